//! The fuzz targets' input decoding and invariant checks, written once.
//!
//! Included with `#[path = ...] mod checks;` by every target under
//! `fuzz/fuzz_targets/` and by `engine/tests/fuzz_regressions.rs`, so a saved
//! crash replays through exactly the code that found it. Each `*_one(data)`
//! function takes the raw bytes libFuzzer hands a target and panics on a broken
//! invariant.
//!
//! Input layout of the structured targets (`budget`, `mcp`, `guard`): the first
//! [`HEADER`] bytes are decoded with `arbitrary` into a config (limits, flags,
//! split points); the rest is the document itself when the config says `raw`,
//! else the bytes from which a document is generated (so most inputs are valid
//! JSON of the right shape). `seed.sh` writes seeds as a header with `raw` set
//! followed by a real document.
//!
//! Acceptance oracle: `serde_json` (features `arbitrary_precision`,
//! `preserve_order`). It is strict RFC 8259 like the engine, lone surrogate
//! escapes included (checked: `"\ud800"`, `"\udc00"`, `"\ud800\u0041"` are all
//! refused), except for its recursion limit of 128 levels: a document serde
//! refuses only for depth is not compared.
//!
//! Structure checks use [`Node`], a raw-span tree built by a small lenient
//! parser that runs only on text serde has accepted. It keeps duplicate keys and
//! the exact spelling of every token, which a `serde_json::Value` cannot (a
//! duplicate key collapses to its last value), so "sub-document" is checked
//! byte for byte, as the spec states it.
#![allow(dead_code)]

use arbitrary::{Arbitrary, Unstructured};
use resultbudget::framing;
use resultbudget::gate::{Fate, RequestGate, Why};
use resultbudget::guard::{ArgCaps, Guard, GuardVerdict, RequestFacts};
use resultbudget::mcp::{CallInfo, McpLimits, Projector, Treat, RECORD_KEY};
use resultbudget::proxy::{relay_session, Calls, ProxyConfig, SplitReads};
use resultbudget::tokenizer::{Lit, Tok, Tokenizer};
use resultbudget::transport::{AsyncProjectWriter, McpEncoder, ProjectWriter};
use resultbudget::{Budget, Error, ErrorKind, Limits, Record};
use serde::Deserialize;
use serde_json::Value;
use std::ops::Range;

/// Bytes at the start of a structured target's input that hold its config.
pub const HEADER: usize = 64;

/// Input nesting the engine accepts by default.
const DEFAULT_NESTING: u32 = 1024;

// ---------------------------------------------------------------------------
// serde_json as the reference
// ---------------------------------------------------------------------------

/// What serde_json says about a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serde {
    Valid,
    Invalid,
    /// Refused only for its 128-level recursion limit: no verdict.
    TooDeep,
}

/// A JSON value read by serde_json and thrown away: its syntax checked as
/// strictly as a `Value` is (strings decoded, so UTF-8 and surrogates are
/// checked, which `IgnoredAny` does not do), but every object taken as an
/// ordinary object. `Value` with `arbitrary_precision` (which the reference
/// needs for numbers like `1e400`) reads an object whose first key is
/// `$serde_json::private::Number` as a number, and refuses valid JSON such as
/// `{"$serde_json::private::Number": "K"}` (found by the `tokenizer` target).
/// Through `deserialize_any`, such a number comes as that very one-key map,
/// which this reads as a map like any other.
pub struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Checked, D::Error> {
        d.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> serde::de::Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Checked, A::Error> {
        while a.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Checked, A::Error> {
        while a.next_entry::<String, Checked>()?.is_some() {}
        Ok(Checked)
    }
}

/// serde_json's verdict with its default recursion limit (safe on any input).
pub fn serde_verdict(doc: &[u8]) -> Serde {
    match serde_json::from_slice::<Checked>(doc) {
        Ok(_) => Serde::Valid,
        Err(e) if e.to_string().starts_with("recursion limit exceeded") => Serde::TooDeep,
        Err(_) => Serde::Invalid,
    }
}

/// Parse with no recursion limit. Only for documents whose bracket depth is
/// known to be small enough for the stack ([`scan_depth`] ≤ a few thousand).
pub fn serde_unbounded(doc: &[u8]) -> Result<(), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(doc);
    de.disable_recursion_limit();
    Checked::deserialize(&mut de)?;
    de.end()
}

/// `doc` as a `Value`, however deep (up to twice the engine's default
/// nesting, deeper than any line the engine reads).
pub fn value_unbounded(doc: &[u8]) -> Option<Value> {
    if scan_depth(doc) > 2 * DEFAULT_NESTING as usize {
        return None;
    }
    let mut de = serde_json::Deserializer::from_slice(doc);
    de.disable_recursion_limit();
    let v = Value::deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(v)
}

/// Deepest bracket nesting outside strings (no validation: an upper bound on
/// what any parser would recurse into before failing).
pub fn scan_depth(doc: &[u8]) -> usize {
    let (mut d, mut max, mut in_str, mut esc) = (0usize, 0usize, false, false);
    for &b in doc {
        if in_str {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => {
                d += 1;
                max = max.max(d);
            }
            b']' | b'}' => d = d.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Whether `doc` is valid JSON (any depth up to `max_depth`, else `None`).
fn valid_up_to(doc: &[u8], max_depth: usize) -> Option<bool> {
    if scan_depth(doc) > max_depth {
        return None;
    }
    Some(serde_unbounded(doc).is_ok())
}

/// Whether `doc` is valid JSON: serde's verdict, looked at closer (without a
/// recursion limit) when serde stopped at its own depth limit and the document
/// is no deeper than `max_depth`; `None` when it is deeper (a document the
/// engine must refuse as too deep, whatever else it holds).
pub fn reference(doc: &[u8], max_depth: usize) -> Option<bool> {
    match serde_verdict(doc) {
        Serde::Valid => Some(true),
        Serde::Invalid => Some(false),
        Serde::TooDeep => valid_up_to(doc, max_depth),
    }
}

/// Decoded UTF-8 of a string's encoded contents (without quotes).
pub fn decode_str(contents: &[u8]) -> String {
    let mut q = Vec::with_capacity(contents.len() + 2);
    q.push(b'"');
    q.extend_from_slice(contents);
    q.push(b'"');
    serde_json::from_slice::<String>(&q).unwrap_or_else(|e| {
        panic!(
            "string contents do not decode ({e}): {:?}",
            String::from_utf8_lossy(contents)
        )
    })
}

// ---------------------------------------------------------------------------
// A raw-span tree
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub enum Kind {
    /// A number or literal, as spelled.
    Scalar,
    /// A string; its contents are `span` without the quotes.
    Str,
    Arr(Vec<Node>),
    /// Members with their keys (each key a `Str` node).
    Obj(Vec<(Node, Node)>),
}

#[derive(Debug, Clone)]
pub struct Node {
    /// The value's bytes in the document it was parsed from.
    pub span: Range<usize>,
    pub kind: Kind,
}

impl Node {
    pub fn raw<'a>(&self, doc: &'a [u8]) -> &'a [u8] {
        doc.get(self.span.clone()).unwrap_or(&[])
    }

    /// A string's encoded contents, without the quotes.
    pub fn contents<'a>(&self, doc: &'a [u8]) -> &'a [u8] {
        doc.get(self.span.start + 1..self.span.end - 1)
            .unwrap_or(&[])
    }

    pub fn is_str(&self) -> bool {
        matches!(self.kind, Kind::Str)
    }

    pub fn members(&self) -> Option<&[(Node, Node)]> {
        match &self.kind {
            Kind::Obj(m) => Some(m),
            _ => None,
        }
    }

    pub fn items(&self) -> Option<&[Node]> {
        match &self.kind {
            Kind::Arr(i) => Some(i),
            _ => None,
        }
    }

    /// Values of the members whose key is exactly `key` (as encoded).
    pub fn get_all<'n>(&'n self, doc: &[u8], key: &[u8]) -> Vec<&'n Node> {
        self.members()
            .unwrap_or(&[])
            .iter()
            .filter(|(k, _)| k.contents(doc) == key)
            .map(|(_, v)| v)
            .collect()
    }

    /// The last member named `key` (the one a JSON library keeps).
    pub fn get_last<'n>(&'n self, doc: &[u8], key: &[u8]) -> Option<&'n Node> {
        self.get_all(doc, key).pop()
    }

    /// Container depth: a scalar is 0, `[]` is 1.
    pub fn depth(&self) -> usize {
        match &self.kind {
            Kind::Scalar | Kind::Str => 0,
            Kind::Arr(items) => 1 + items.iter().map(Node::depth).max().unwrap_or(0),
            Kind::Obj(m) => 1 + m.iter().map(|(_, v)| v.depth()).max().unwrap_or(0),
        }
    }
}

/// Parse a document already accepted by serde_json. Panics if it cannot
/// (a bug in this parser, not in the engine).
pub fn parse(doc: &[u8]) -> Node {
    let mut p = Parser { s: doc, i: 0 };
    let n = p.value();
    p.ws();
    match n {
        Some(n) if p.i == doc.len() => n,
        _ => panic!(
            "checks::parse failed on a document serde accepted: {:?}",
            String::from_utf8_lossy(doc)
        ),
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        self.ws();
        (self.peek() == Some(b)).then(|| self.i += 1)
    }

    fn string(&mut self) -> Option<Node> {
        self.ws();
        let start = self.i;
        self.eat(b'"')?;
        loop {
            match self.peek()? {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    break;
                }
                _ => self.i += 1,
            }
        }
        Some(Node {
            span: start..self.i,
            kind: Kind::Str,
        })
    }

    fn value(&mut self) -> Option<Node> {
        self.ws();
        let start = self.i;
        match self.peek()? {
            b'"' => self.string(),
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                if self.eat(b']').is_none() {
                    loop {
                        items.push(self.value()?);
                        if self.eat(b',').is_none() {
                            self.eat(b']')?;
                            break;
                        }
                    }
                }
                Some(Node {
                    span: start..self.i,
                    kind: Kind::Arr(items),
                })
            }
            b'{' => {
                self.i += 1;
                let mut members = Vec::new();
                if self.eat(b'}').is_none() {
                    loop {
                        let k = self.string()?;
                        self.eat(b':')?;
                        let v = self.value()?;
                        members.push((k, v));
                        if self.eat(b',').is_none() {
                            self.eat(b'}')?;
                            break;
                        }
                    }
                }
                Some(Node {
                    span: start..self.i,
                    kind: Kind::Obj(members),
                })
            }
            _ => {
                while matches!(
                    self.peek(),
                    Some(b'0'..=b'9' | b'a'..=b'z' | b'E' | b'+' | b'-' | b'.')
                ) {
                    self.i += 1;
                }
                (self.i > start).then_some(Node {
                    span: start..self.i,
                    kind: Kind::Scalar,
                })
            }
        }
    }
}

/// The document without insignificant whitespace (every token as spelled).
pub fn minify(doc: &[u8], n: &Node) -> Vec<u8> {
    let mut out = Vec::with_capacity(n.span.len());
    minify_into(doc, n, &mut out);
    out
}

fn minify_into(doc: &[u8], n: &Node, out: &mut Vec<u8>) {
    match &n.kind {
        Kind::Scalar | Kind::Str => out.extend_from_slice(n.raw(doc)),
        Kind::Arr(items) => {
            out.push(b'[');
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                minify_into(doc, it, out);
            }
            out.push(b']');
        }
        Kind::Obj(m) => {
            out.push(b'{');
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(k.raw(doc));
                out.push(b':');
                minify_into(doc, v, out);
            }
            out.push(b'}');
        }
    }
}

fn show(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    if s.len() > 400 {
        let mut cut = 400;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}…", &s[..cut])
    } else {
        s.into_owned()
    }
}

// ---------------------------------------------------------------------------
// Shared invariants on budgeted values
// ---------------------------------------------------------------------------

/// `out` (in `od`) is a sub-document of `inp` (in `id`): arrays keep a prefix of
/// items, objects a prefix of members with the same keys, strings a prefix of
/// their encoded contents, scalars are equal. `null_ok`: the value may be a
/// `null` standing in for a number (the top-level exception).
pub fn check_sub(od: &[u8], out: &Node, id: &[u8], inp: &Node, null_ok: bool) {
    let here = || {
        format!(
            "output {:?} is not a sub-document of input {:?}",
            show(out.raw(od)),
            show(inp.raw(id))
        )
    };
    match (&out.kind, &inp.kind) {
        (Kind::Scalar, Kind::Scalar) => {
            let same = out.raw(od) == inp.raw(id);
            let stand_in = null_ok
                && out.raw(od) == b"null"
                && matches!(inp.raw(id).first(), Some(b'-' | b'0'..=b'9'));
            assert!(same || stand_in, "{}", here());
        }
        (Kind::Str, Kind::Str) => {
            assert!(inp.contents(id).starts_with(out.contents(od)), "{}", here());
        }
        (Kind::Arr(o), Kind::Arr(i)) => {
            assert!(o.len() <= i.len(), "{}", here());
            for (a, b) in o.iter().zip(i) {
                check_sub(od, a, id, b, false);
            }
        }
        (Kind::Obj(o), Kind::Obj(i)) => {
            assert!(o.len() <= i.len(), "{}", here());
            for ((ok, ov), (ik, iv)) in o.iter().zip(i) {
                assert_eq!(ok.raw(od), ik.raw(id), "{}", here());
                check_sub(od, ov, id, iv, false);
            }
        }
        _ => panic!("{}", here()),
    }
}

/// Every element limit holds in `n`, a value at container level `level - 1`
/// (pass 1 for a document: its top container is level 1).
pub fn check_limits(doc: &[u8], n: &Node, lim: &Limits, level: u64) {
    match &n.kind {
        Kind::Scalar => {}
        Kind::Str => {
            let d = decode_str(n.contents(doc)).len() as u64;
            assert!(
                d <= lim.max_string_bytes,
                "string of {d} decoded bytes > max_string_bytes {}: {:?}",
                lim.max_string_bytes,
                show(n.raw(doc))
            );
        }
        Kind::Arr(items) => {
            if level > lim.max_depth as u64 {
                assert!(
                    items.is_empty(),
                    "array at level {level} > max_depth {} is not empty",
                    lim.max_depth
                );
            }
            assert!(
                items.len() as u64 <= lim.max_list_items,
                "array of {} items > max_list_items {}",
                items.len(),
                lim.max_list_items
            );
            for it in items {
                check_limits(doc, it, lim, level + 1);
            }
        }
        Kind::Obj(m) => {
            if level > lim.max_depth as u64 {
                assert!(
                    m.is_empty(),
                    "object at level {level} > max_depth {} is not empty",
                    lim.max_depth
                );
            }
            assert!(
                m.len() as u64 <= lim.max_map_keys,
                "object of {} members > max_map_keys {}",
                m.len(),
                lim.max_map_keys
            );
            for (_, v) in m {
                check_limits(doc, v, lim, level + 1);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Chunking
// ---------------------------------------------------------------------------

/// Split `len` bytes at the given fractions (of 65536) of its length.
pub fn split_points(len: usize, fracs: &[u16]) -> Vec<usize> {
    let mut v: Vec<usize> = fracs
        .iter()
        .map(|&f| (f as usize * (len + 1)) >> 16)
        .collect();
    v.sort_unstable();
    v
}

/// The chunks of `data` cut at `points` (sorted; empty chunks included).
pub fn chunks<'a>(data: &'a [u8], points: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::with_capacity(points.len() + 1);
    let mut at = 0;
    for &p in points {
        let p = p.clamp(at, data.len());
        out.push(&data[at..p]);
        at = p;
    }
    out.push(&data[at..]);
    out
}

/// One-byte chunks.
pub fn bytewise(data: &[u8]) -> Vec<&[u8]> {
    data.chunks(1).collect()
}

// ---------------------------------------------------------------------------
// The proxy's relays
// ---------------------------------------------------------------------------

/// Limits, caps and reads of one proxy session.
#[derive(Debug, Clone, Arbitrary)]
pub struct ProxyCfg {
    /// The body is the client's bytes, a NUL, then the server's bytes.
    pub raw: bool,
    /// None: no ceiling; Some(n): 1024 + n % 4096.
    pub result: Option<u16>,
    pub text: Lim,
    pub block: Lim,
    pub list: Lim,
    pub string: Lim,
    pub structured: Lim,
    pub arg_bytes: Lim,
    pub arg_string_bytes: Lim,
    pub arg_items: Lim,
    pub request: Lim,
    /// None: the default look-ahead; Some(n): 64 + n % 4096 bytes.
    pub lookahead: Option<u16>,
    /// Refuse lone surrogates (`--lone-surrogates refuse`).
    pub strict: bool,
    /// Read sizes of the split run (1 + n % 512 each, in turn).
    pub client_reads: [u16; 3],
    pub server_reads: [u16; 3],
    /// With [`PROXY_INVENTORY`]: per-tool budgets and caps, list and search.
    pub inventory: bool,
}

/// The inventory a session may run with: `plain` a paged directory browse
/// and `list_docs` a paged list, each with `find` as its search twin,
/// `typed` typed, `mut` a mutation with a small argument cap; result
/// budgets of 1,024 to 3,000 bytes. A page size above 20 is refused, but
/// `list_docs` clamps it ([`proxy_clamped`]). (`search_docs`, which calls
/// name too, has no row: its class comes from its name.)
pub const PROXY_INVENTORY: &str = r#"{"version":1,"defaults":{},"tools":[
{"tool":"plain","server":"fuzz","surface":"list","classification":"directory","read_only":true,"limit":{"param":"limit","default":5,"max":20,"over_max":"refuse"},"cursor":{"param":"cursor","has_more_field":"has_more","next_cursor_field":"next_cursor"},"per_item_budget_bytes":512,"result_budget":{"max_result_bytes":1500},"backend_query_bound":"paged","structured_content_policy":"cut_generic","search_twin":"find"},
{"tool":"find","server":"fuzz","surface":"search","classification":"search","read_only":true,"limit":{"param":"limit","default":5,"max":20,"over_max":"refuse"},"cursor":null,"per_item_budget_bytes":512,"result_budget":{"max_result_bytes":3000},"backend_query_bound":"limit+1","structured_content_policy":"cut_generic","query_params":["q"]},
{"tool":"typed","server":"fuzz","surface":"read","classification":"single","read_only":true,"limit":null,"cursor":null,"per_item_budget_bytes":null,"result_budget":{"max_result_bytes":2048},"backend_query_bound":"one","structured_content_policy":"typed_whole_or_error"},
{"tool":"mut","server":"fuzz","surface":"write","classification":"mutation","read_only":false,"limit":null,"cursor":null,"per_item_budget_bytes":null,"result_budget":{"max_result_bytes":1024},"backend_query_bound":"one","structured_content_policy":"typed_whole_or_error","argument_caps":{"max_arg_bytes":300}},
{"tool":"list_docs","server":"fuzz","surface":"list","classification":"list","read_only":true,"limit":{"param":"limit","default":5,"max":20,"over_max":"clamp"},"cursor":{"param":"cursor","has_more_field":"has_more","next_cursor_field":"next_cursor"},"per_item_budget_bytes":512,"result_budget":{"max_result_bytes":1500},"backend_query_bound":"paged","structured_content_policy":"cut_generic","search_twin":"find"}
]}"#;

/// Whether `fwd` is the client's line `sent` as a session with
/// [`PROXY_INVENTORY`] forwards it: a `list_docs` call whose page size reads
/// above 20 (or is too close to 20 to judge, [`Page::undecided`]), with that
/// page size rewritten to 20 and no other byte changed (as [`check_pages`]
/// holds the gate to it).
pub fn proxy_clamped(sent: &[u8], fwd: &[u8]) -> bool {
    // A clamp writes one span of at most 4 bytes (`"20"`) in place: the
    // rest of `fwd` is `sent`'s own start and end. Checked on the bytes
    // first, so that the lines that differ otherwise are not parsed.
    fn same<'a>(pairs: impl Iterator<Item = (&'a u8, &'a u8)>) -> usize {
        pairs.take_while(|(x, y)| x == y).count()
    }
    let start = same(sent.iter().zip(fwd));
    let end = same(sent.iter().rev().zip(fwd.iter().rev()));
    let shared = (start + end).min(sent.len()).min(fwd.len());
    // Only a line the server reads as JSON is clamped, and a server reads a
    // lone surrogate escape as U+FFFD: the line is judged as it reads it,
    // `\ufffd` in the escape's place (the same length, so the spans are the
    // line's own). A session that refuses lone surrogates refuses the call,
    // so its server never reads it.
    if sent == fwd || fwd.len() - shared > 4 {
        return false;
    }
    let read = lone_as_replacement(sent);
    if serde_verdict(&read) != Serde::Valid {
        return false;
    }
    let above = |p: Page| matches!(p, Page::Num(v, _) if v > 20.0) || p.undecided(20.0);
    let page = call_page(&read, |t| (t == "list_docs").then_some("limit"));
    page.is_some_and(|(_, p)| above(p))
        && clamp_into(&read, sent, "limit", 20).is_some_and(|c| c == fwd)
}

/// The tools the session's proxy knows: (name, typed, read-only).
pub const PROXY_TOOLS: &[(&str, bool, bool)] = &[
    ("typed", true, true),
    ("plain", false, true),
    ("mut", true, false),
];

impl ProxyCfg {
    pub fn config(&self) -> ProxyConfig {
        let limits = McpLimits {
            max_result_bytes: self.result.map_or(u64::MAX, |n| {
                resultbudget::mcp::MIN_MCP_RESULT_BYTES + n as u64 % 4096
            }),
            max_text_bytes: self.text.get(),
            max_text_block_bytes: self.block.get(),
            max_list_items: self.list.get(),
            max_string_bytes: self.string.get(),
            max_structured_bytes: self.structured.get(),
            ..McpLimits::DEFAULT
        };
        let caps = ArgCaps {
            max_arg_bytes: self.arg_bytes.get(),
            max_arg_string_bytes: self.arg_string_bytes.get(),
            max_arg_items: self.arg_items.get(),
            max_request_bytes: self.request.get().max(64),
            ..ArgCaps::DEFAULT
        };
        let inventory = self.inventory.then(|| {
            resultbudget::inventory::Inventory::parse(PROXY_INVENTORY)
                .expect("the fuzz inventory is valid")
        });
        ProxyConfig {
            limits,
            inventory,
            guard: Guard::new(caps),
            lookahead: self
                .lookahead
                .map_or(ProxyConfig::default().lookahead, |n| 64 + n as usize % 4096),
            log_level: resultbudget::proxy::LogLevel::Error,
            lone_surrogates: !self.strict,
            ..ProxyConfig::default()
        }
    }
}

/// An id from a small set, so that ids meet: numbers, strings, `null`.
fn gen_id(g: &mut Gen) -> &'static str {
    [
        "1",
        "2",
        "3",
        "\"a\"",
        "\"b\"",
        "7",
        "null",
        "\"resultbudget-tools-0\"",
    ][g.pick(8) as usize]
}

/// One value from the generator, as bytes.
fn gen_value(g: &mut Gen) -> Vec<u8> {
    let keep = std::mem::take(&mut g.out);
    g.value(1);
    std::mem::replace(&mut g.out, keep)
}

/// One string from the generator, quoted.
fn gen_string(g: &mut Gen) -> Vec<u8> {
    let keep = std::mem::take(&mut g.out);
    g.string();
    std::mem::replace(&mut g.out, keep)
}

/// `{` + the members in the generator's order + `}`.
fn object(g: &mut Gen, members: Vec<Vec<u8>>) -> Vec<u8> {
    let mut m = members;
    // Any order (the TypeScript SDK writes `id` last).
    for i in (1..m.len()).rev() {
        let j = g.pick((i + 1) as u8) as usize;
        m.swap(i, j);
    }
    let mut v = b"{".to_vec();
    v.extend_from_slice(&m.join(&b","[..]));
    v.push(b'}');
    v
}

/// A JSON array of `items`, in their order.
fn array(items: &[Vec<u8>]) -> Vec<u8> {
    [b"[".to_vec(), items.join(&b","[..]), b"]".to_vec()].concat()
}

fn member(k: &str, v: &[u8]) -> Vec<u8> {
    let mut m = format!("\"{k}\":").into_bytes();
    m.extend_from_slice(v);
    m
}

/// A client line: calls, lists, other requests, notifications, answers to
/// the server, broken and blank lines.
fn client_line(g: &mut Gen) -> Vec<u8> {
    let id = gen_id(g).as_bytes().to_vec();
    let rpc = member("jsonrpc", b"\"2.0\"");
    let line = match g.pick(9) {
        0..=3 => {
            // The list and search contract by row and by name (`list_`,
            // `search_`), and a name escaped as the server decodes it.
            let name = [
                "\"typed\"",
                "\"plain\"",
                "\"mut\"",
                "\"find\"",
                "\"other\"",
                "\"list_docs\"",
                "\"search_docs\"",
                "\"\\u006cist_docs\"",
                "\"search\\u005fdocs\"",
                LONG_NAME.as_str(),
            ][g.pick(10) as usize];
            // Now and then what the inventory's contract looks at: a query
            // given to a list (or an empty one to a search, or one given
            // twice, the last empty), a limit over its maximum, a cursor.
            let args = match g.pick(12) {
                0 => b"{\"q\":\"x\"}".to_vec(),
                1 => b"{\"limit\":50}".to_vec(),
                6 | 7 => {
                    // A page size in any spelling, or none.
                    let keep = std::mem::take(&mut g.out);
                    page_args(g);
                    std::mem::replace(&mut g.out, keep)
                }
                2 => b"{\"limit\":3,\"cursor\":\"c1\"}".to_vec(),
                3 => {
                    // An empty or blank query, or one with whitespace around it.
                    let q = ["", " ", "\\t\\u3000", "\u{a0}\\ufeff", " x ", "\\u200b"]
                        [g.pick(6) as usize];
                    format!("{{\"query\":\"{q}\"}}").into_bytes()
                }
                4 => b"{\"search\":\"x\",\"limit\":25}".to_vec(),
                8 => {
                    // About the size of `mut`'s own cap on its arguments (300).
                    let n = 260 + 4 * g.pick(20) as usize;
                    format!("{{\"data\":\"{}\"}}", "d".repeat(n)).into_bytes()
                }
                5 => b"{\"q\":\"x\",\"q\":\"\"}".to_vec(),
                _ => gen_value(g),
            };
            let mut params = vec![member("name", name.as_bytes()), member("arguments", &args)];
            // The request's `_meta` (the 2026-07-28 protocol names its
            // version there) and a task-augmented call.
            match g.pick(8) {
                0 => params.push(member("_meta", b"{\"progressToken\":1}")),
                1 => params.push(member(
                    "_meta",
                    b"{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}",
                )),
                2 => params.push(member("task", b"{\"ttl\":60000}")),
                _ => {}
            }
            let params = object(g, params);
            object(
                g,
                vec![
                    rpc,
                    member("id", &id),
                    member("method", b"\"tools/call\""),
                    member("params", &params),
                ],
            )
        }
        4 => object(
            g,
            vec![rpc, member("id", &id), member("method", b"\"tools/list\"")],
        ),
        5 => {
            let params = object(g, vec![member("requestId", &id)]);
            object(
                g,
                vec![
                    rpc,
                    member("method", b"\"notifications/cancelled\""),
                    member("params", &params),
                ],
            )
        }
        6 => {
            let result = gen_value(g);
            object(g, vec![rpc, member("id", &id), member("result", &result)])
        }
        7 => {
            let params = object(g, vec![member("taskId", b"\"t1\"")]);
            object(
                g,
                vec![
                    rpc,
                    member("id", &id),
                    member("method", b"\"tasks/result\""),
                    member("params", &params),
                ],
            )
        }
        _ => match g.pick(3) {
            0 => Vec::new(),
            1 => gen_value(g),
            _ => object(
                g,
                vec![rpc, member("id", &id), member("method", b"\"ping\"")],
            ),
        },
    };
    maybe_cut(g, line)
}

/// A server line: tool results (text, structured, errors), task and list
/// results, requests and notifications of the server's, stray output.
fn server_line(g: &mut Gen) -> Vec<u8> {
    let id = gen_id(g).as_bytes().to_vec();
    let rpc = member("jsonrpc", b"\"2.0\"");
    let line = match g.pick(8) {
        0..=3 => {
            let mut blocks = Vec::new();
            for _ in 0..g.pick(3) {
                let text = gen_string(g);
                let b = object(g, vec![member("type", b"\"text\""), member("text", &text)]);
                blocks.push(b);
            }
            let mut result = vec![member("content", &array(&blocks))];
            if g.flag() {
                let mut sc = gen_value(g);
                if !sc.starts_with(b"{") {
                    sc = b"{}".to_vec();
                }
                result.push(member("structuredContent", &sc));
            }
            if g.flag() {
                result.push(member("isError", b"true"));
            }
            let result = object(g, result);
            let envelope = vec![rpc, member("id", &id), member("result", &result)];
            let envelope = twice(g, envelope);
            object(g, envelope)
        }
        4 => {
            let message = gen_string(g);
            let err = object(
                g,
                vec![member("code", b"-32000"), member("message", &message)],
            );
            let envelope = vec![rpc, member("id", &id), member("error", &err)];
            let envelope = twice(g, envelope);
            object(g, envelope)
        }
        5 => {
            if g.flag() {
                let result = b"{\"task\":{\"taskId\":\"t1\",\"status\":\"working\"}}";
                object(g, vec![rpc, member("id", &id), member("result", result)])
            } else if g.pick(4) == 0 {
                // The server's tools changed: the session forgets it knew them.
                let method = member("method", b"\"notifications/tools/list_changed\"");
                object(g, vec![rpc, method])
            } else {
                let result = tools_list_result(g);
                object(g, vec![rpc, member("id", &id), member("result", &result)])
            }
        }
        6 => {
            let data = gen_value(g);
            let params = object(g, vec![member("data", &data)]);
            let method: &[u8] = if g.flag() {
                b"\"sampling/createMessage\""
            } else {
                b"\"notifications/progress\""
            };
            object(
                g,
                vec![
                    rpc,
                    member("id", &id),
                    member("method", method),
                    member("params", &params),
                ],
            )
        }
        _ => {
            [&b"debug: working"[..], b"{'status': 'ok'}", b"", b"[1,2"][g.pick(4) as usize].to_vec()
        }
    };
    // Rarely a batch of it: not one message.
    let line = if g.pick(32) == 0 {
        [&b"["[..], &line, b"]"].concat()
    } else {
        line
    };
    maybe_cut(g, line)
}

/// A `list_` tool named by 120 CJK characters written as `\u` escapes
/// (727 bytes with its quotes, 365 decoded): over the 256 bytes the proxy
/// once read of a name, so that its refusals (which repeat the name, and
/// its search twin's) and its typed treatment meet long names.
static LONG_NAME: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("\"list_{}\"", "\\u4e00".repeat(120)));

/// A `tools/list` result, which teaches the session the tools it lists when
/// it answers the client's `tools/list`: one to three tools named as the
/// calls name them (now and then escaped, as a server may write them), each
/// maybe typed (an `outputSchema`, or a null one, which is none) and maybe
/// read-only or not by its annotations; now and then a next page.
fn tools_list_result(g: &mut Gen) -> Vec<u8> {
    let mut tools = Vec::new();
    for _ in 0..1 + g.pick(3) {
        let name: &[u8] = [
            &b"\"plain\""[..],
            b"\"typed\"",
            b"\"mut\"",
            b"\"find\"",
            b"\"list_docs\"",
            b"\"other\"",
            b"\"\\u0074yped\"",
            b"\"pl\\u0061in\"",
            LONG_NAME.as_bytes(),
        ][g.pick(9) as usize];
        let mut t = vec![
            member("name", name),
            member("inputSchema", b"{\"type\":\"object\"}"),
        ];
        match g.pick(4) {
            0 => t.push(member("outputSchema", b"{\"type\":\"object\"}")),
            1 => t.push(member("outputSchema", b"null")),
            _ => {}
        }
        match g.pick(4) {
            0 => t.push(member("annotations", b"{\"readOnlyHint\":true}")),
            1 => t.push(member(
                "annotations",
                b"{\"readOnlyHint\":false,\"destructiveHint\":true}",
            )),
            _ => {}
        }
        tools.push(object(g, t));
    }
    let mut result = vec![member("tools", &array(&tools))];
    if g.pick(4) == 0 {
        result.push(member("nextCursor", b"\"page-2\""));
    }
    object(g, result)
}

/// Rarely a second `id` (another or the same) among an answer's members: a
/// reader keeps the last of duplicate members.
fn twice(g: &mut Gen, mut envelope: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    if g.pick(8) == 0 {
        envelope.push(member("id", gen_id(g).as_bytes()));
    }
    envelope
}

/// Sometimes the line cut short, as a broken writer leaves it.
fn maybe_cut(g: &mut Gen, mut line: Vec<u8>) -> Vec<u8> {
    if g.pick(16) == 0 && !line.is_empty() {
        let at = g.u16() as usize % line.len();
        line.truncate(at);
    }
    line
}

/// The session's inputs: the client's bytes and the server's.
fn proxy_inputs(cfg: &ProxyCfg, body: &[u8]) -> (Vec<u8>, Vec<u8>) {
    if cfg.raw {
        let at = body.iter().position(|&b| b == 0).unwrap_or(body.len());
        let server = body.get(at + 1..).unwrap_or(&[]);
        return (body[..at].to_vec(), server.to_vec());
    }
    let mut g = Gen::new(body, 0);
    g.budget = 400;
    let (mut client, mut server) = (Vec::new(), Vec::new());
    for _ in 0..1 + g.pick(6) {
        client.extend_from_slice(&client_line(&mut g));
        client.push(b'\n');
    }
    for _ in 0..1 + g.pick(6) {
        server.extend_from_slice(&server_line(&mut g));
        server.push(b'\n');
    }
    // Sometimes the server's output ends inside its last line (it died while
    // writing it). (Asked after the lines, and never when the bytes have run
    // out, so the sessions of earlier inputs keep their lines.)
    if g.pick(3) == 2 {
        server.pop();
    }
    (client, server)
}

/// The lines of `b` (without their newlines; a last line without one too).
fn lines_of(b: &[u8]) -> Vec<&[u8]> {
    let mut v: Vec<&[u8]> = b.split(|&c| c == b'\n').collect();
    if v.last().is_some_and(|l| l.is_empty()) {
        v.pop();
    }
    v
}

fn is_blank(l: &[u8]) -> bool {
    l.iter().all(|b| b" \t\r".contains(b))
}

/// A line's value as a JSON reader reads it, a lone surrogate escape
/// read as U+FFFD (of the same length, `\ufffd`); `None` if it is not JSON.
fn value_of(l: &[u8]) -> Option<Value> {
    value_unbounded(&lone_as_replacement(l))
}

/// Whether `line` is JSON, a lone surrogate escape allowed (as `\ufffd`).
/// (Nesting is bounded by the engine's 1024 levels, so the parse has no
/// recursion limit.)
fn json_line(line: &[u8]) -> bool {
    scan_depth(line) <= 2 * DEFAULT_NESTING as usize
        && serde_unbounded(&lone_as_replacement(line)).is_ok()
}

/// Each client line's request facts as the guard reads them.
fn guard_facts(strict: bool, lines: &[&[u8]]) -> Vec<RequestFacts> {
    lines
        .iter()
        .map(|l| {
            let mut g = Guard::new(ArgCaps::DEFAULT);
            g.set_lone_surrogates(!strict);
            g.feed(l);
            g.end_line();
            g.facts().clone()
        })
        .collect()
}

/// Whether the proxy reads a server line as one JSON value (a lone
/// surrogate escape refused when `strict`).
fn readable_line(strict: bool, l: &[u8]) -> bool {
    let read = lone_as_replacement(l);
    !is_blank(l)
        && (!strict || read == l)
        && scan_depth(l) <= DEFAULT_NESTING as usize
        && serde_unbounded(&read).is_ok()
}

pub fn proxy_one(data: &[u8]) {
    let (cfg, body): (ProxyCfg, _) = header(data);
    let (client, server) = proxy_inputs(&cfg, body);
    let config = cfg.config();
    let run = |creads: &[usize], sreads: &[usize]| {
        relay_session(
            config.clone(),
            PROXY_TOOLS,
            SplitReads::new(&client, creads),
            SplitReads::new(&server, sreads),
        )
    };
    let whole = run(&[usize::MAX], &[usize::MAX]);
    let sizes = |r: &[u16; 3]| r.iter().map(|&n| 1 + n as usize % 512).collect::<Vec<_>>();
    let split = run(&sizes(&cfg.client_reads), &sizes(&cfg.server_reads));
    let long = lines_of(&client).iter().any(|l| l.len() > 60_000);
    // However the pipes' reads split the input, the same session (but for
    // how much of a long non-call line streamed on before it broke).
    if !long {
        assert!(
            whole == split,
            "the reads changed the session:\n{}\n{}\n--\n{}\n{}",
            squash(&whole.to_server),
            squash(&whole.to_client),
            squash(&split.to_server),
            squash(&split.to_client)
        );
    }
    // Every line the client reads is JSON: a broken line is never forwarded
    // (a session this small never streams a line before it is whole). What
    // the proxy answers itself (an error, a refusal) answers a request the
    // client sent.
    // The id of each request as far as the guard read it.
    let client_lines = lines_of(&client);
    let client_facts = guard_facts(cfg.strict, &client_lines);
    // (A request whose id the guard could not take is answered with a null
    // id, JSON-RPC's id for one that cannot be read.)
    let sent_ids: Vec<Value> = client_facts
        .iter()
        .filter(|f| f.is_request())
        .filter_map(|f| f.reply_id().map_or(Some(Value::Null), value_of))
        .collect();
    let client_values: Vec<Option<Value>> = client_lines.iter().map(|l| value_of(l)).collect();
    // (A request cut short is answered too: its id as far as it was read.)
    let mut asked: Vec<Value> = client_values
        .iter()
        .flatten()
        .filter(|v| v.get("method").is_some())
        .filter_map(|v| v.get("id").cloned())
        .collect();
    asked.extend(sent_ids.iter().cloned());
    let served = lines_of(&server);
    // What the proxy writes of its own: an error, or a refusal of a call.
    let own = |v: &Value| {
        let err = v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("resultbudget:"));
        err || v["result"]["_meta"].get("resultbudget/refusal").is_some()
    };
    // The proxy's answer to a client line that is not one message (a batch,
    // a bare value): -32600 with a null id, one at most for each such line.
    let not_one = |v: &Value| {
        own(v)
            && v["id"].is_null()
            && v["error"]["code"] == -32600
            && v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("not one JSON-RPC message"))
    };
    let bare_lines = lines_of(&client)
        .iter()
        .filter(|l| framing::not_one_object(framing::first_content(l)))
        .count();
    // A result the proxy wrote (cut, or its own) fits the result budget
    // (the inventory's rows go up to 3,000 bytes).
    let mut ceiling = config.limits.max_result_bytes;
    if cfg.inventory {
        ceiling = ceiling.max(3000);
    }
    let got = lines_of(&whole.to_client);
    let got_values: Vec<Option<Value>> = got.iter().map(|l| value_of(l)).collect();
    for (&l, v) in got.iter().zip(&got_values) {
        assert!(
            json_line(l),
            "the client read a line that is not JSON: {}",
            squash(l)
        );
        // (A server's line passed on unchanged may say anything.)
        let Some(v) = v.as_ref().filter(|_| !served.contains(&l)) else {
            continue;
        };
        if let Some(r) = parse(l).get_all(l, b"result").last() {
            assert!(
                r.span.len() as u64 <= ceiling,
                "a result of {} bytes over the {ceiling}-byte budget: {}",
                r.span.len(),
                squash(l)
            );
        }
        if own(v) && !not_one(v) {
            assert!(
                asked.contains(&v["id"]),
                "the proxy answered an id the client never sent: {}",
                squash(l)
            );
        }
    }
    // Every server line the proxy can read reaches the client once, in
    // order: unchanged but for insignificant whitespace, or, an answer, as
    // the answer with the same id (budgeted). A line it cannot read, or that
    // is not one answer (`not_one_answer`), is never forwarded (its call may
    // get an error of the proxy's own). Nothing else reaches the client but
    // the proxy's own errors and refusals.
    let readable = |l: &[u8]| readable_line(cfg.strict, l);
    let own_line = |k: usize| got_values.get(k).and_then(Option::as_ref).is_some_and(own);
    let mut k = 0;
    // (A last line without its newline is one the server left half-written.)
    let whole_lines = served.len() - usize::from(!server.is_empty() && !server.ends_with(b"\n"));
    // (A line that is not one message, a batch or a bare value, is dropped.)
    // The answers owed a typed treatment, by the twin of its choice.
    let forwarded = lines_of(&whole.to_server);
    // (The client's side as read once, for the fed session's twin too.)
    let client_side = Followed {
        inventory: cfg.inventory,
        known: true,
        client_lines: &client_lines,
        client_values: &client_values,
        client_facts: &client_facts,
        forwarded: &[],
    };
    let owed_typed = typed_owed(
        &Followed {
            forwarded: &forwarded,
            ..client_side
        },
        &served[..whole_lines],
        &vec![forwarded.len(); whole_lines],
        &readable,
    );
    for (si, s) in served
        .iter()
        .enumerate()
        .take(whole_lines)
        .filter(|(_, s)| readable(s) && framing::first_content(s) == Some(b'{'))
    {
        let doc = parse(s);
        // A line whose top-level `id`, `result` or `error` comes twice, or
        // with both a `result` and an `error`, is dropped as an unreadable
        // one is (`docs/proxy.md`).
        // (Keys by value: `"i\u0064"` is `id` to every reader.)
        let keys = decoded_keys(&doc, s);
        if not_one_answer(&keys) {
            continue;
        }
        let want = minify(s, &doc);
        // With a call pending, the members JSON-RPC does not define may be
        // dropped from any line: the projector drops them from a tool
        // answer's envelope, and cannot tell a request from an answer
        // before its `method`.
        let trimmed: Option<Vec<u8>> = doc.members().map(|m| {
            let kept: Vec<Vec<u8>> = m
                .iter()
                .filter(|(k, _)| JSONRPC_MEMBERS.contains(&decode_key(k, s).as_str()))
                .map(|(k, v)| [minify(s, k), b":".to_vec(), minify(s, v)].concat())
                .collect();
            [b"{".to_vec(), kept.join(&b","[..]), b"}".to_vec()].concat()
        });
        // (Ids compared as written: the proxy never rewrites one.)
        let ids: Vec<&[u8]> = doc.get_all(s, b"id").iter().map(|n| n.raw(s)).collect();
        // (A `result` or `error` member is budgeted even in a line with a
        // method: the line's treatment is chosen as it streams, and a
        // `method` may come after it.)
        let no_method = doc.get_all(s, b"method").is_empty();
        let has_error = !doc.get_all(s, b"error").is_empty();
        let has_result = !doc.get_all(s, b"result").is_empty();
        let answer = !ids.is_empty() && (no_method || has_error || has_result);
        // A line with a `result` or `error` and no id at all gets the
        // pending calls' treatment, as one whose id names no pending call
        // does (`docs/proxy.md`, "Ids are matched by value"), and comes out
        // bounded, with no id.
        let idless = ids.is_empty() && (has_error || has_result);
        loop {
            let Some(&c) = got.get(k) else {
                panic!(
                    "a server line never reached the client: {}\nserver:\n{}\nclient read:\n{}",
                    squash(s),
                    squash(&server),
                    squash(&whole.to_client)
                );
            };
            k += 1;
            if c == want || trimmed.as_deref() == Some(c) {
                break;
            }
            if own_line(k - 1) {
                continue;
            }
            let c_doc = parse(c);
            let got_ids = c_doc.get_all(c, b"id");
            let same_id = got_ids.iter().any(|n| ids.contains(&n.raw(c)));
            assert!(
                (answer && same_id) || (idless && got_ids.is_empty()),
                "the client read {} where the server sent {}",
                squash(c),
                squash(s)
            );
            // A typed call's result: whole, or the typed error.
            if owed_typed.get(si) == Some(&true) {
                let (sv, cv) = (value_of(s), value_of(c));
                let (sr, cr) = (
                    &sv.as_ref().unwrap_or(&Value::Null)["result"],
                    &cv.as_ref().unwrap_or(&Value::Null)["result"],
                );
                assert!(
                    typed_kept(sr, cr),
                    "a typed call's result came back cut: {}\nthe server sent {}\nclient:\n{}\nserver:\n{}",
                    squash(c),
                    squash(s),
                    squash(&client),
                    squash(&server)
                );
            }
            break;
        }
    }
    for (i, &c) in got.iter().enumerate().skip(k) {
        assert!(
            own_line(i),
            "the client read a line the server did not send: {}",
            squash(c)
        );
    }
    // The proxy answers a request of the client's at most once (no more often
    // than the client sent its id), and by the session's end every request it
    // could read has an answer (the server's, or the proxy's own error or
    // refusal) unless the client cancelled it: a client never waits forever.
    let answers: Vec<&Value> = got_values
        .iter()
        .flatten()
        .filter(|v| v.get("method").is_none())
        .collect();
    let refused_lines = answers.iter().filter(|v| not_one(v)).count();
    assert!(
        refused_lines <= bare_lines,
        "{refused_lines} answers to lines that are not one message, for {bare_lines} such lines"
    );
    for a in answers.iter().filter(|v| own(v) && !not_one(v)) {
        let id = &a["id"];
        let given = answers
            .iter()
            .filter(|v| own(v) && !not_one(v) && &v["id"] == id)
            .count();
        let sent = sent_ids.iter().filter(|s| *s == id).count();
        assert!(
            given <= sent,
            "the proxy answered id {id} {given} times for {sent} requests:\n{}",
            squash(&whole.to_client)
        );
    }
    // The readable requests, apart by whether the guard could take their
    // id: one it could not (an object, an array, a string over its cap) is
    // answered with a null id, looked for below.
    let (requests, unreadable): (Vec<(&Value, &RequestFacts)>, Vec<_>) = client_lines
        .iter()
        .zip(&client_values)
        .zip(&client_facts)
        .filter(|((l, _), _)| readable(l))
        .filter_map(|((_, v), f)| Some((v.as_ref()?, f)))
        .filter(|(v, _)| v.get("method").is_some())
        .partition(|(_, f)| !f.id_untaken);
    let requests: Vec<&Value> = requests.into_iter().map(|(v, _)| v).collect();
    let unreadable_ids = unreadable.len();
    let null_answers = answers
        .iter()
        .filter(|a| own(a) && !not_one(a) && a["id"].is_null())
        .count();
    assert!(
        null_answers >= unreadable_ids,
        "{unreadable_ids} requests whose id cannot be read, {null_answers} answers with a null id:\n{}",
        squash(&whole.to_client)
    );
    let cancelled: Vec<&Value> = requests
        .iter()
        .filter(|v| v["method"] == "notifications/cancelled")
        .map(|v| &v["params"]["requestId"])
        .collect();
    // The requests owed an answer: each with an id, unless cancelled.
    let owed: Vec<(&Value, &Value)> = requests
        .iter()
        .filter_map(|r| Some((*r, r.get("id")?)))
        .filter(|(_, id)| !cancelled.contains(id))
        .collect();
    for (r, id) in &owed {
        assert!(
            answers.iter().any(|a| a.get("id") == Some(*id)),
            "request {} was never answered:\n{}",
            r,
            squash(&whole.to_client)
        );
    }
    // The server reads the client's lines unchanged (but for a clamped page
    // size), in order, and nothing else (its tools are known, so the proxy
    // asks nothing itself); blank lines pass.
    let sent = lines_of(&client);
    let mut from = 0;
    for l in lines_of(&whole.to_server) {
        if is_blank(l) {
            continue;
        }
        let at = sent[from..]
            .iter()
            .position(|s| s == &l || (cfg.inventory && proxy_clamped(s, l)));
        let Some(at) = at else {
            panic!(
                "the server read a line the client did not send (or out of order): {}",
                squash(l)
            );
        };
        from += at + 1;
        assert!(
            json_line(l),
            "the server read a line that is not JSON: {}",
            squash(l)
        );
        // A call the guard refuses never reaches the server.
        let mut g = config.guard.clone();
        g.set_inventory(config.inventory.clone());
        g.set_lone_surrogates(!cfg.strict);
        g.feed(l);
        g.end_line();
        if g.facts().is_call() {
            // The name as the server reads it (`"\u006cist_docs"` is
            // `list_docs`), as the proxy looks it up.
            let raw = g.facts().name.clone();
            let tool = serde_json::from_slice::<String>(&raw).unwrap_or_else(|_| {
                let inner = raw
                    .strip_prefix(b"\"")
                    .and_then(|n| n.strip_suffix(b"\""))
                    .unwrap_or(&raw);
                String::from_utf8_lossy(inner).into_owned()
            });
            let verdict = g.finish(&tool);
            assert!(
                verdict.is_none(),
                "a refused call reached the server: {verdict:?} {}",
                squash(l)
            );
            // And by an oracle of its own: the arguments the server reads
            // hold the caps owed, the tightest of every tool the line names
            // (`mut`'s row allows 300 encoded bytes).
            if valid_up_to(l, DEFAULT_NESTING as usize) == Some(true) {
                let base = *config.guard.caps();
                let owed = caps_owed(l, &tool, |t| {
                    let mut c = base;
                    if cfg.inventory && t == "mut" {
                        c.max_arg_bytes = 300;
                    }
                    c
                });
                let tree = parse(l);
                let args = last_decoded(&tree, l, "params")
                    .and_then(|p| last_decoded(p, l, "arguments"))
                    .filter(|a| matches!(a.kind, Kind::Arr(_) | Kind::Obj(_)));
                if let Some(args) = args {
                    for (name, v, c) in measure(l, args).against(&owed) {
                        assert!(
                            v <= c,
                            "a call whose arguments break {name} ({v} > {c}) reached the server: {}",
                            squash(l)
                        );
                    }
                }
            }
        }
        // And without the guard: a call to a list tool (`list_…`, by its
        // name or by its inventory row) that gives a query argument (`q`,
        // `query` or `search`, of any type) never reaches the server, the
        // call read as the server reads it.
        if let Some(v) = value_of(l).filter(|v| v["method"] == "tools/call") {
            // A name longer than the proxy reads (`sniff::NAME_CAP` as
            // written, quotes included; MCP's 128 characters take at most
            // 1,538) names no tool it knows, nor a class by its first
            // letters: no MCP server has a tool by it (docs/proxy.md).
            let tree = parse(l);
            let named = last_decoded(&tree, l, "params")
                .and_then(|p| last_decoded(p, l, "name"))
                .is_none_or(|n| n.raw(l).len() <= resultbudget::sniff::NAME_CAP);
            let tool = v["params"]["name"].as_str().filter(|_| named).unwrap_or("");
            let query = v["params"]["arguments"].as_object().and_then(|a| {
                ["q", "query", "search"]
                    .into_iter()
                    .find(|q| a.contains_key(*q))
            });
            assert!(
                !(tool.starts_with("list_") && query.is_some()),
                "a list tool's call with a query ({query:?}) reached the server: {}",
                squash(l)
            );
            // And a search tool's (`search_…` by its name, `find` by its row,
            // whose query parameter is `q`) gives one of its query parameters
            // as a string that is not blank: the last of a repeated one, as
            // read.
            let params: &[&str] = if tool.starts_with("search_") {
                &["q", "query", "search"]
            } else if cfg.inventory && tool == "find" {
                &["q"]
            } else {
                &[]
            };
            // Nor a page size above the maximum (20 for the inventory's
            // paged rows, else 100 for a `list_` or `search_` name), nor a
            // string that reads as no number, read as in the guard target.
            if serde_verdict(l) == Serde::Valid {
                let max_of = |t: &str| match t {
                    _ if !named => None,
                    "plain" | "find" | "list_docs" if cfg.inventory => Some(20.0),
                    "typed" | "mut" if cfg.inventory => None,
                    t if t.starts_with("list_") || t.starts_with("search_") => Some(100.0),
                    _ => None,
                };
                if let Some((tool, page)) = call_page(l, |t| max_of(t).map(|_| "limit")) {
                    let max: f64 = max_of(&tool).unwrap_or(f64::INFINITY);
                    assert!(
                        page.undecided(max) || !page.breaks(max),
                        "a call's page size {page:?} (at most {max}) reached the server: {}",
                        squash(l)
                    );
                }
            }
            if !params.is_empty() {
                let args = v["params"]["arguments"].as_object();
                let given = args.is_some_and(|a| {
                    params.iter().any(|q| {
                        a.get(*q)
                            .and_then(Value::as_str)
                            .is_some_and(|s| !blank_query(s))
                    })
                });
                assert!(
                    given,
                    "a search tool's call without a query reached the server: {}",
                    squash(l)
                );
            }
        }
    }
    // The same lines through the fed form, the tools not known in advance.
    check_fed(&config, &cfg, &client_side, &client, &server);
    // The same session with a hold of 64 to 575 bytes, so that the server's
    // longer lines stream on before they are whole (the default, 8 MiB, is
    // never reached here). A line that then breaks, or that the server's
    // output ends inside, is ended as a line: the client reads at most one
    // line that is not JSON for each line the server sent, and every
    // request is still answered on a line of its own.
    let hold = 64 + server.len() % 512;
    let streamed = relay_session(
        ProxyConfig {
            max_hold: hold,
            ..config.clone()
        },
        PROXY_TOOLS,
        client.as_slice(),
        server.as_slice(),
    );
    let s_values: Vec<Option<Value>> = lines_of(&streamed.to_client)
        .iter()
        .map(|l| value_of(l))
        .collect();
    let broken = s_values.iter().filter(|v| v.is_none()).count();
    assert!(
        broken <= served.len(),
        "{broken} lines the client cannot read, for {} server lines (hold {hold}):\n{}",
        served.len(),
        squash(&streamed.to_client)
    );
    for (r, id) in &owed {
        assert!(
            s_values
                .iter()
                .flatten()
                .any(|a| a.get("method").is_none() && a.get("id") == Some(*id)),
            "request {r} was never answered with a hold of {hold}:\n{}",
            squash(&streamed.to_client)
        );
    }
}

/// What one fed session gave: the server's bytes and the client's, and the
/// ids of the session's own `tools/list` requests, in order.
struct FedRun {
    to_server: Vec<u8>,
    to_client: Vec<u8>,
    own: Vec<Vec<u8>>,
    /// The gate's answers, held while the relay is inside a line it
    /// streams (`AnswerRelay::mid_line`), as a gateway holds them.
    replies: Vec<u8>,
    /// Each server line as it was fed (the session's own id in place of
    /// the placeholder), and how many lines the server had read by then.
    served: Vec<(Vec<u8>, usize)>,
}

impl FedRun {
    /// Its bytes with each of the session's own ids written as its index
    /// (a session's ids hold a random number of its own).
    fn normalized(&self) -> (Vec<u8>, Vec<u8>) {
        let swap = |b: &[u8]| {
            let mut s = String::from_utf8_lossy(b).into_owned();
            for (k, id) in self.own.iter().enumerate() {
                s = s.replace(&*String::from_utf8_lossy(id), &format!("\"OWN-{k}\""));
            }
            s.into_bytes()
        };
        (swap(&self.to_server), swap(&self.to_client))
    }
}

/// The placeholder a generated server line answers the session's own
/// `tools/list` by: the fed run writes the id it last asked by in its place.
const OWN_PLACEHOLDER: &str = "\"resultbudget-tools-0\"";

/// One session in the fed form (`Calls`, its gate and its `AnswerRelay`),
/// the tools not known in advance, with the harness as the gateway
/// `docs/library.md` describes: before a `tools/call` goes on while the
/// session does not know the tools, it sends the session's own `tools/list`
/// (`Calls::tools_request`, every page) and holds the call, and every
/// client line after it, until the tools are known or it gives up
/// (`Calls::give_up_tools`; `Session` gives up after 3 s). Client and
/// server lines come in the order `seed`'s bits pick; a server line gives
/// up instead now and then while a call is held, and the server's end
/// gives up on any listing still unanswered. Each server line is fed whole,
/// or in pieces of `cut` bytes.
fn fed_session(
    config: &ProxyConfig,
    client: &[u8],
    server: &[u8],
    mut seed: u64,
    cut: Option<usize>,
) -> FedRun {
    let calls = Calls::new(config.clone());
    calls.set_log(|_, _| {});
    let mut gate = calls.gate();
    let Ok(mut relay) = calls.answers() else {
        panic!("no answer relay");
    };
    let mut run = FedRun {
        to_server: Vec::new(),
        to_client: Vec::new(),
        own: Vec::new(),
        replies: Vec::new(),
        served: Vec::new(),
    };
    let client_lines: Vec<&[u8]> = lines_of(client);
    let server_lines: Vec<&[u8]> = lines_of(server);
    let whole = server.ends_with(b"\n");
    let (mut ci, mut si) = (0, 0);
    // The call held for the tools (its facts, tool and bytes), and the
    // client's lines read after it.
    let mut held: Option<(RequestFacts, String, Vec<u8>)> = None;
    let mut queue: std::collections::VecDeque<&[u8]> = Default::default();
    let ask = |calls: &Calls, version: &[u8], run: &mut FedRun| {
        if let Some(line) = calls.tools_request(version) {
            let id = value_unbounded(&line)
                .map(|v| v["id"].to_string().into_bytes())
                .unwrap_or_default();
            run.own.push(id);
            run.to_server.extend_from_slice(&line);
        }
    };
    // A client line through the gate: on to the server, or held (a call
    // while the tools are unknown), or answered by the gate.
    let mut client_line =
        |line: &[u8], run: &mut FedRun, held: &mut Option<_>| match gate.check(line) {
            Fate::Forward { .. } => {
                let facts = gate.facts().clone();
                if facts.is_call() && !calls.tools_known() {
                    ask(&calls, &facts.version, run);
                    if !calls.tools_known() {
                        *held = Some((facts, gate.tool().to_owned(), gate.to_send().to_vec()));
                        return;
                    }
                }
                calls.note(&facts, gate.tool());
                run.to_server.extend_from_slice(gate.to_send());
            }
            Fate::Dropped { reply, .. } => run.replies.extend(reply.unwrap_or_default()),
        };
    loop {
        if !relay.mid_line() {
            run.to_client.append(&mut run.replies);
        }
        // A held call goes on once the tools are known, and the lines
        // queued behind it after it, until one is held again.
        if let Some((facts, tool, bytes)) = held.take() {
            if calls.tools_known() {
                calls.note(&facts, &tool);
                run.to_server.extend_from_slice(&bytes);
                while held.is_none() {
                    let Some(line) = queue.pop_front() else {
                        break;
                    };
                    client_line(line, &mut run, &mut held);
                }
            } else {
                held = Some((facts, tool, bytes));
            }
        }
        let bit = seed & 1;
        seed = seed.rotate_right(1) ^ 0x9e37_79b9;
        let server_left = si < server_lines.len();
        if ci < client_lines.len() && (bit == 0 || !server_left) {
            let line = client_lines[ci];
            ci += 1;
            if held.is_some() {
                queue.push_back(line);
            } else {
                client_line(line, &mut run, &mut held);
            }
            continue;
        }
        if held.is_some() && (!server_left || seed & 7 == 7) {
            calls.give_up_tools();
            continue;
        }
        if !server_left {
            break;
        }
        let mut line = server_lines[si].to_vec();
        si += 1;
        if let Some(own) = run.own.last() {
            let text = String::from_utf8_lossy(&line);
            if text.contains(OWN_PLACEHOLDER) {
                line = text
                    .replace(OWN_PLACEHOLDER, &String::from_utf8_lossy(own))
                    .into_bytes();
            }
        }
        if si < server_lines.len() || whole {
            let read = lines_of(&run.to_server).len();
            run.served.push((line.clone(), read));
            line.push(b'\n');
        }
        match cut.map(|c| c.min(line.len())) {
            Some(c) => {
                for piece in line.chunks(c.max(1)) {
                    relay.feed(piece, &mut run.to_client);
                }
            }
            None => relay.feed(&line, &mut run.to_client),
        }
        // A page answered: the next, while the call waits.
        if let Some((facts, _, _)) = &held {
            let version = facts.version.clone();
            ask(&calls, &version, &mut run);
        }
    }
    relay.finish(&mut run.to_client);
    run.to_client.append(&mut run.replies);
    run
}

/// The fed form with the tools unknown (`fed_session`): the session's own
/// listing never reaches the client and never shares an id with a request
/// of the client's in flight, every page it asks for after the first names
/// a cursor the server gave, every request the client sent is answered
/// unless cancelled, every line the client reads is JSON, and the same
/// bytes come out however the server's lines are cut; and again with a
/// small hold, where a line that streamed on and broke may reach the
/// client, at most one for each of the server's lines.
fn check_fed(
    config: &ProxyConfig,
    cfg: &ProxyCfg,
    client_side: &Followed,
    client: &[u8],
    server: &[u8],
) {
    let seed = cfg
        .client_reads
        .iter()
        .chain(&cfg.server_reads)
        .fold(0u64, |a, &r| a.rotate_left(16) ^ r as u64);
    let run = fed_session(config, client, server, seed, None);
    let cut = 1 + cfg.server_reads[0] as usize % 64;
    let split = fed_session(config, client, server, seed, Some(cut));
    assert!(
        run.normalized() == split.normalized(),
        "the fed session changed with the server's lines fed {cut} bytes at a time:\n{}\n--\n{}",
        squash(&run.normalized().1),
        squash(&split.normalized().1)
    );
    // And with a hold of 64 to 575 bytes, so that longer lines stream on
    // before they are whole (an answer to the session's own listing among
    // them: let go once its id shows it, or from there if it streamed
    // first); a line that is not JSON then reaches the client at most once
    // for each line the server sent. Fed in the same pieces, so that a line
    // streams on before its id is read.
    let hold = 64 + server.len() % 512;
    let held = ProxyConfig {
        max_hold: hold,
        ..config.clone()
    };
    let streamed = fed_session(&held, client, server, seed, Some(cut));
    for (run, strict) in [(&run, true), (&streamed, false)] {
        let got: Vec<Option<Value>> = lines_of(&run.to_client)
            .iter()
            .map(|l| value_of(l))
            .collect();
        let broken: Vec<&[u8]> = lines_of(&run.to_client)
            .into_iter()
            .zip(&got)
            .filter(|(_, v)| v.is_none())
            .map(|(l, _)| l)
            .collect();
        let allowed = if strict { 0 } else { lines_of(server).len() };
        assert!(
            broken.len() <= allowed,
            "{} lines the client cannot read (hold {}), as {}",
            broken.len(),
            if strict {
                "default".into()
            } else {
                hold.to_string()
            },
            squash(broken.first().copied().unwrap_or_default())
        );
        let mut own: Vec<String> = run
            .own
            .iter()
            .map(|id| String::from_utf8_lossy(id).into_owned())
            .collect();
        own.sort();
        let count = own.len();
        own.dedup();
        assert_eq!(count, own.len(), "an own id twice: {own:?}");
        let own: Vec<Value> = own
            .iter()
            .filter_map(|id| value_of(id.as_bytes()))
            .collect();
        let answers: Vec<&Value> = got
            .iter()
            .flatten()
            .filter(|v| v.get("method").is_none())
            .collect();
        for a in &answers {
            assert!(
                !own.contains(&a["id"]),
                "the session's own listing reached the client: {a}\nserver read:\n{}\nserver sent:\n{}",
                squash(&run.to_server),
                squash(server)
            );
        }
        // What the server read: the client's lines and the session's own
        // requests. Each own request is a `tools/list` whose id no request
        // of the client's before it has; a page after the first names a
        // cursor the server gave.
        let cursors: Vec<Value> = lines_of(server)
            .iter()
            .filter_map(|l| value_of(l))
            .filter_map(|v| v["result"].get("nextCursor").cloned())
            .collect();
        let mut forwarded: Vec<Value> = Vec::new();
        for l in lines_of(&run.to_server) {
            let Some(v) = value_of(l) else {
                continue;
            };
            if own.contains(&v["id"]) && v["method"] == "tools/list" {
                assert!(
                    !forwarded.contains(&v["id"]),
                    "the session asked with an id the client had sent: {}",
                    squash(l)
                );
                if let Some(c) = v["params"].get("cursor") {
                    assert!(
                        cursors.contains(c),
                        "a cursor the server never gave: {}",
                        squash(l)
                    );
                }
            } else if v.get("method").is_some() {
                if let Some(id) = v.get("id") {
                    forwarded.push(id.clone());
                }
            }
        }
        // Every request of the client's that went on to the server is
        // answered by the end, unless cancelled.
        let cancelled: Vec<Value> = lines_of(&run.to_server)
            .iter()
            .filter_map(|l| value_of(l))
            .filter(|v| v["method"] == "notifications/cancelled")
            .map(|v| v["params"]["requestId"].clone())
            .collect();
        for id in forwarded
            .iter()
            .filter(|id| !cancelled.contains(id) && !own.contains(id))
        {
            assert!(
                answers.iter().any(|a| &a["id"] == id),
                "request {id} was never answered (hold {}):\n{}",
                if strict {
                    "default".into()
                } else {
                    hold.to_string()
                },
                squash(&run.to_client)
            );
        }
    }
    // Where the twin says the session must take an answer for a typed
    // call's, it reaches the client whole or as the typed error; with the
    // small hold too, where the session's own listing may stream on before
    // its id shows (it still teaches the tools).
    for (run, hold) in [(&run, "default".to_string()), (&streamed, hold.to_string())] {
        let forwarded = lines_of(&run.to_server);
        let served: Vec<&[u8]> = run.served.iter().map(|(l, _)| &l[..]).collect();
        let after: Vec<usize> = run.served.iter().map(|&(_, n)| n).collect();
        let owed = typed_owed(
            &Followed {
                known: false,
                forwarded: &forwarded,
                ..*client_side
            },
            &served,
            &after,
            &|l| readable_line(cfg.strict, l),
        );
        let got: Vec<Value> = lines_of(&run.to_client)
            .iter()
            .filter_map(|l| value_of(l))
            .filter(|v| v.get("method").is_none())
            .collect();
        for (s, _) in served.iter().zip(&owed).filter(|(_, &o)| o) {
            let Some(sv) = value_of(s) else {
                continue;
            };
            let Some(c) = got.iter().find(|c| c.get("id") == sv.get("id")) else {
                panic!(
                    "a typed call's answer never reached the client (hold {hold}): {}\nclient read:\n{}",
                    squash(s),
                    squash(&run.to_client)
                );
            };
            assert!(
                typed_kept(&sv["result"], &c["result"]),
                "a typed call's result came back cut (fed, hold {hold}): {c}\nthe server sent {}\nserver read:\n{}\nserver sent:\n{}",
                squash(s),
                squash(&run.to_server),
                squash(server)
            );
        }
    }
}

/// Whether the client's `cr` keeps the server's result `sr` as a typed
/// call's must be kept: whole (its `content`, `structuredContent` and
/// `isError`), or replaced by the typed error. (Only a result object is
/// owed that.)
fn typed_kept(sr: &Value, cr: &Value) -> bool {
    let failed = cr["isError"] == true
        && cr["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("result_budget_exceeded"));
    let whole = ["content", "structuredContent", "isError"]
        .iter()
        .all(|k| cr.get(k) == sr.get(k));
    !sr.is_object() || failed || whole
}

/// An id by value, loosely: a string that reads as a number is that number
/// (the proxy matches `"7"` to `7` when nothing else matches), so that ids
/// that might be taken for each other share a key. `None` for an id that is
/// no string or number.
fn loose_id(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => n.as_f64().map(|f| format!("n{f}")),
        Value::String(s) => Some(match s.trim().parse::<f64>() {
            Ok(f) => format!("n{f}"),
            Err(_) => format!("s{s}"),
        }),
        _ => None,
    }
}

/// The keys of object `n`'s members as a reader reads them, in order.
fn decoded_keys(n: &Node, doc: &[u8]) -> Vec<String> {
    n.members()
        .unwrap_or(&[])
        .iter()
        .map(|(k, _)| decode_key(k, doc))
        .collect()
}

/// The members of object `n` whose key reads as `key`.
fn all_decoded<'n>(n: &'n Node, doc: &[u8], key: &str) -> Vec<&'n Node> {
    n.members()
        .unwrap_or(&[])
        .iter()
        .filter(|(k, _)| decode_key(k, doc) == key)
        .map(|(_, v)| v)
        .collect()
}

/// What the typed twin ([`typed_owed`]) follows of a session: the client's
/// lines (as read, and as the guard read them) and the lines the server
/// read (the client's it forwarded, and the session's own listings).
#[derive(Clone, Copy)]
struct Followed<'a> {
    /// The session runs with [`PROXY_INVENTORY`].
    inventory: bool,
    /// The session knows [`PROXY_TOOLS`] in advance.
    known: bool,
    client_lines: &'a [&'a [u8]],
    client_values: &'a [Option<Value>],
    client_facts: &'a [RequestFacts],
    forwarded: &'a [&'a [u8]],
}

/// A request the twin follows: its id's key, a call's tool (`None` for a
/// `tools/list`), its place among the lines the server read, and whether
/// the session sent it.
struct Request {
    key: String,
    tool: Option<String>,
    at: usize,
    own: bool,
}

/// A twin of the session's choice of a typed treatment, kept on the safe
/// side: for each of the server's lines, whether it is the answer to a call
/// of a tool the proxy must take for typed, so that its result reaches the
/// client whole or as a `result_budget_exceeded` error, never cut
/// (`specs/mcp-result-contract.md`, "Typed results are whole or an error").
/// A tool is typed by the inventory's row (`typed` and `mut`; the other rows
/// are not), else as known in advance ([`PROXY_TOOLS`]: `typed` and `mut`,
/// where the session knows them) or as learned from a `tools/list` answer
/// since (to the client's listing or to the session's own).
///
/// A line is owed that only where no reading of the session could give the
/// call another treatment: its id, taken by value and loosely, names that
/// one request and no other line of the client's (none, for the session's
/// own listing), the call reached the server before the line was fed to
/// the session (`served_after`: how many of the lines the server read came
/// before each of its lines), has no `task` and was not cancelled, no earlier server line
/// named the id, and none could have been taken for an answer without one
/// (a broken line with a `result` or `error` answers the only pending
/// call) or for one with an id (the call a broken line's `id`, read before
/// the break, names is answered with `-32603`). A tool listed without an
/// `outputSchema` object (by any of its entry's names) may be untyped from
/// there on; one listed with one, by one name, is typed from there on only
/// if the line answers a `tools/list` request that way for sure.
fn typed_owed(
    f: &Followed,
    served: &[&[u8]],
    served_after: &[usize],
    readable: &dyn Fn(&[u8]) -> bool,
) -> Vec<bool> {
    let Followed {
        inventory,
        known,
        client_lines,
        client_values,
        client_facts,
        forwarded,
    } = *f;
    let has = |l: &[u8], w: &[u8]| l.windows(w.len()).any(|x| x == w);
    // The ids each client line may be taken to carry: as a reader reads
    // them, and as the guard took them.
    let line_keys: Vec<Vec<String>> = client_lines
        .iter()
        .zip(client_values)
        .zip(client_facts)
        .map(|((l, v), f)| {
            let mut keys: Vec<String> = v
                .as_ref()
                .filter(|v| v.get("method").is_some())
                .and_then(|v| loose_id(v.get("id")?))
                .into_iter()
                .collect();
            keys.extend(
                f.reply_id()
                    .filter(|_| f.is_request() || !readable(l))
                    .and_then(value_of)
                    .and_then(|v| loose_id(&v)),
            );
            keys
        })
        .collect();
    // A cancellation the proxy may have read in a broken line: give up.
    if client_lines
        .iter()
        .any(|l| !readable(l) && (has(l, b"cancel") || has(l, b"\\u")))
    {
        return vec![false; served.len()];
    }
    let cancelled: Vec<String> = client_values
        .iter()
        .flatten()
        .filter(|v| v["method"] == "notifications/cancelled")
        .filter_map(|v| loose_id(&v["params"]["requestId"]))
        .collect();
    // The plain requests the twin follows, by key: calls (with their tool)
    // and `tools/list` requests (`None`), with where the server read them
    // and whether they are the session's own.
    let mut requests: Vec<Request> = Vec::new();
    for ((&l, v), f) in client_lines.iter().zip(client_values).zip(client_facts) {
        let Some(v) = v else {
            continue;
        };
        let at = forwarded
            .iter()
            .position(|&x| x == l || (inventory && proxy_clamped(l, x)));
        let Some(at) = at.filter(|_| readable(l) && !f.id_untaken) else {
            continue;
        };
        let tree = parse(l);
        let one = |n: &Node, k: &str| all_decoded(n, l, k).len() == 1;
        let params = all_decoded(&tree, l, "params");
        let Some(key) = loose_id(&v["id"]).filter(|_| one(&tree, "method") && one(&tree, "id"))
        else {
            continue;
        };
        let request = |tool| Request {
            key,
            tool,
            at,
            own: false,
        };
        if v["method"] == "tools/list" {
            requests.push(request(None));
        } else if v["method"] == "tools/call"
            && params.len() == 1
            && params
                .iter()
                .all(|p| one(p, "name") && all_decoded(p, l, "task").is_empty())
        {
            if let Some(tool) = v["params"]["name"].as_str() {
                requests.push(request(Some(tool.to_owned())));
            }
        }
    }
    // The session's own listings (ids no client line has).
    for (at, l) in forwarded.iter().enumerate() {
        let Some(v) = value_of(l) else {
            continue;
        };
        let own = v["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("resultbudget-tools-"));
        let sent = client_lines
            .iter()
            .any(|&c| c == *l || (inventory && proxy_clamped(c, l)));
        if let Some(key) = loose_id(&v["id"]).filter(|_| own && !sent) {
            requests.push(Request {
                key,
                tool: None,
                at,
                own: true,
            });
        }
    }
    // Typed for sure: by the inventory's row (`typed` and `mut` typed, the
    // other rows not), else as known in advance or learned since.
    let row = |tool: &str| {
        let typed = tool == "typed" || tool == "mut";
        let has_row = typed || ["plain", "find", "list_docs"].contains(&tool);
        (inventory && has_row).then_some(typed)
    };
    let mut sure: Vec<String> = if known {
        vec!["typed".into(), "mut".into()]
    } else {
        Vec::new()
    };
    let mut owed = vec![false; served.len()];
    let mut seen: Vec<String> = Vec::new();
    for (si, &l) in served.iter().enumerate() {
        if is_blank(l) {
            continue;
        }
        if !readable(l) || framing::first_content(l) != Some(b'{') {
            // A broken line is read as far as it goes: one that began as an
            // answer without an id takes the only pending call, and the call
            // an `id` read before the break names is answered with `-32603`,
            // which settles it (a later answer with its id is a stray, given
            // no call's treatment; docs/proxy.md, "Malformed server line").
            if [&b"result"[..], b"error", b"tools", b"\\u", b"\"id\""]
                .iter()
                .any(|w| has(l, w))
            {
                break;
            }
            continue;
        }
        let tree = parse(l);
        let keys = decoded_keys(&tree, l);
        let count = |key: &str| keys.iter().filter(|k| *k == key).count();
        let ids: Vec<Option<String>> = all_decoded(&tree, l, "id")
            .iter()
            .map(|n| value_of(n.raw(l)).and_then(|v| loose_id(&v)))
            .collect();
        if ids.is_empty() && count("result") + count("error") > 0 {
            break;
        }
        // The one request this line answers, for sure.
        let mut answers = None;
        if let ([Some(key)], 0, 1, 0) = (&ids[..], count("method"), count("result"), count("error"))
        {
            let holders = line_keys.iter().filter(|ks| ks.contains(key)).count();
            let fresh = !seen.contains(key) && !cancelled.contains(key);
            let read_before = served_after.get(si).copied().unwrap_or(0);
            answers = requests
                .iter()
                .find(|r| &r.key == key)
                .filter(|r| holders == usize::from(!r.own) && fresh && r.at < read_before)
                .map(|r| r.tool.as_deref());
        }
        if let Some(Some(tool)) = answers {
            owed[si] = row(tool).unwrap_or(sure.iter().any(|t| t == tool));
        }
        // (A server's request numbers its ids on its own: never an answer.)
        if count("method") == 0 || count("result") + count("error") > 0 {
            seen.extend(ids.into_iter().flatten());
        }
        // What a `tools/list` answer teaches, in its order: a tool listed
        // without an `outputSchema` object may be untyped from here on; one
        // listed with one (by one name) is typed if the line answers a
        // `tools/list` for sure.
        let learns = answers == Some(None);
        for r in all_decoded(&tree, l, "result") {
            for t in all_decoded(r, l, "tools") {
                for item in t.items().unwrap_or(&[]) {
                    if item.members().is_none() {
                        continue;
                    }
                    let schema = all_decoded(item, l, "outputSchema");
                    let typed = schema.last().is_some_and(|s| s.members().is_some());
                    let names: Vec<Option<Value>> = all_decoded(item, l, "name")
                        .iter()
                        .map(|n| value_of(n.raw(l)))
                        .collect();
                    match &names[..] {
                        [Some(Value::String(name))] if typed && learns => {
                            sure.push(name.clone());
                        }
                        _ if typed => {}
                        _ => {
                            for n in &names {
                                match n {
                                    Some(Value::String(name)) => sure.retain(|t| t != name),
                                    _ => sure.clear(),
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    owed
}

// ---------------------------------------------------------------------------
// Lone surrogates
// ---------------------------------------------------------------------------

/// The code point of a `\uXXXX` escape at `s[i]`, if one is there.
fn u_escape_at(s: &[u8], i: usize) -> Option<u32> {
    let e = s.get(i..i + 6)?;
    if !e.starts_with(b"\\u") || !e[2..].iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u32::from_str_radix(std::str::from_utf8(&e[2..]).ok()?, 16).ok()
}

/// Walks the escapes of `s` (inside strings): for each escaped surrogate
/// pair, each lone surrogate escape and each other escape, `f` gets the
/// escape's bytes and says what to write instead (`None`: the bytes as they
/// are). Everything else is copied.
fn rewrite_escapes(s: &[u8], mut f: impl FnMut(Esc<'_>) -> Option<Vec<u8>>) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut in_str = false;
    let mut i = 0;
    while let Some(&b) = s.get(i) {
        if !in_str || b != b'\\' {
            in_str ^= b == b'"';
            out.push(b);
            i += 1;
            continue;
        }
        let (len, esc) = match u_escape_at(s, i) {
            Some(0xD800..=0xDBFF)
                if u_escape_at(s, i + 6).is_some_and(|lo| (0xDC00..0xE000).contains(&lo)) =>
            {
                (12, Esc::Pair(&s[i..i + 12]))
            }
            Some(0xD800..=0xDFFF) => (6, Esc::Lone(&s[i..i + 6])),
            Some(_) => (6, Esc::Other(&s[i..i + 6])),
            None => {
                let n = 2.min(s.len() - i);
                (n, Esc::Other(&s[i..i + n]))
            }
        };
        let bytes = match esc {
            Esc::Pair(b) | Esc::Lone(b) | Esc::Other(b) => b,
        };
        match f(esc) {
            Some(new) => out.extend_from_slice(&new),
            None => out.extend_from_slice(bytes),
        }
        i += len;
    }
    out
}

/// One escape met by [`rewrite_escapes`].
#[derive(Debug, Clone, Copy)]
pub enum Esc<'a> {
    Pair(&'a [u8]),
    Lone(&'a [u8]),
    Other(&'a [u8]),
}

/// `s` with every lone surrogate escape (not half of a high+low pair) written
/// `\ufffd`: the same length and the same decoded size (U+FFFD, 3 bytes).
/// The strict engine's run over this is the oracle of the lenient engine's
/// run over `s` (`set_lone_surrogates`), with the same rewrite of its output.
/// Best effort on broken input, the same way for input and output.
pub fn lone_as_replacement(s: &[u8]) -> Vec<u8> {
    rewrite_escapes(s, |e| {
        matches!(e, Esc::Lone(_)).then(|| b"\\ufffd".to_vec())
    })
}

/// `out` with a receipt's `"digest":"fnv1a64:…"` value blanked (16 hex digits).
fn no_digest(out: &[u8]) -> Vec<u8> {
    let tag = b"\"digest\":\"fnv1a64:";
    let mut v = out.to_vec();
    if let Some(at) = v.windows(tag.len()).position(|w| w == tag) {
        let from = at + tag.len();
        for b in v.iter_mut().skip(from).take(16) {
            *b = b'0';
        }
    }
    v
}

/// `s` with escaped surrogate pairs broken into lone halves: of every three
/// pairs, the first keeps its high half only, the second its low half only,
/// the third stays whole. Lone escapes then meet quotes, other escapes and
/// each other wherever the generator put pairs.
pub fn unpair(s: &[u8]) -> Vec<u8> {
    let mut k = 0u32;
    rewrite_escapes(s, |e| match e {
        Esc::Pair(b) => {
            k += 1;
            match k % 3 {
                1 => Some(b[..6].to_vec()),
                2 => Some(b[6..].to_vec()),
                _ => None,
            }
        }
        _ => None,
    })
}

// ---------------------------------------------------------------------------
// Configs decoded from the header
// ---------------------------------------------------------------------------

/// A limit drawn small, often tiny, sometimes off.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum Lim {
    Off,
    Tiny(u8),
    Small(u8),
    Mid(u16),
}

impl Lim {
    pub fn get(self) -> u64 {
        match self {
            Lim::Off => u64::MAX,
            Lim::Tiny(v) => (v % 4) as u64,
            Lim::Small(v) => v as u64,
            Lim::Mid(v) => v as u64,
        }
    }

    pub fn depth(self) -> u32 {
        match self {
            Lim::Off => u32::MAX,
            _ => self.get() as u32,
        }
    }
}

/// The header of a structured target, or a default one when `data` is short.
fn header<T: for<'a> Arbitrary<'a>>(data: &[u8]) -> (T, &[u8]) {
    let n = data.len().min(HEADER);
    let mut u = Unstructured::new(&data[..n]);
    let cfg = T::arbitrary(&mut u).unwrap_or_else(|_| {
        T::arbitrary(&mut Unstructured::new(&[])).expect("default config from no bytes")
    });
    (cfg, &data[n..])
}

// ---------------------------------------------------------------------------
// Document generator
// ---------------------------------------------------------------------------

/// Writes valid JSON text driven by fuzz bytes. When the bytes run out every
/// choice is 0, which is always a leaf, so generation ends.
pub struct Gen<'a> {
    pub u: Unstructured<'a>,
    pub out: Vec<u8>,
    /// Whitespace density (0: none).
    pub ws: u8,
    /// Values still allowed (bounds the size of the document).
    pub budget: u32,
}

/// A generated document stops growing past this many bytes.
const DOC_CAP: usize = 1 << 18;
/// A generated string stops growing past this many bytes.
const STR_CAP: usize = 1 << 14;

/// One member of a generated object: its key and a writer for its value.
pub type Member<'m, 'a> = (&'m str, Box<dyn FnOnce(&mut Gen<'a>) + 'm>);

const KEYS: &[&str] = &[
    "a",
    "b",
    "id",
    "name",
    "type",
    "text",
    "data",
    "blob",
    "uri",
    "_meta",
    "content",
    "structuredContent",
    "isError",
    "resultType",
    "result",
    "params",
    "arguments",
    "limit",
    "q",
    "query",
    "items",
    "resultbudget/truncation",
    "a/b~c",
    "\u{e9}t\u{e9}",
    "",
];

impl<'a> Gen<'a> {
    pub fn new(bytes: &'a [u8], ws: u8) -> Gen<'a> {
        Gen {
            u: Unstructured::new(bytes),
            out: Vec::with_capacity(bytes.len() * 4 + 64),
            ws,
            budget: 3000,
        }
    }

    pub fn byte(&mut self) -> u8 {
        u8::arbitrary(&mut self.u).unwrap_or(0)
    }

    pub fn pick(&mut self, n: u8) -> u8 {
        if n == 0 {
            0
        } else {
            self.byte() % n
        }
    }

    pub fn u16(&mut self) -> u16 {
        u16::arbitrary(&mut self.u).unwrap_or(0)
    }

    pub fn flag(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    pub fn put(&mut self, s: &[u8]) {
        self.out.extend_from_slice(s);
    }

    /// Maybe some insignificant whitespace.
    pub fn sp(&mut self) {
        if self.ws == 0 {
            return;
        }
        let b = self.byte();
        if b < self.ws {
            let s: &[u8] = match b % 5 {
                0 => b" ",
                1 => b"\n",
                2 => b"\t",
                3 => b"\r\n  ",
                _ => b"  ",
            };
            self.put(s);
        }
    }

    /// One unit of string contents, as encoded.
    pub fn unit(&mut self) {
        match self.pick(24) {
            0..=7 => {
                let c = b'a' + self.pick(26);
                self.out.push(c);
            }
            8 => self.put(b" "),
            9 => {
                let e: &[u8] = match self.pick(8) {
                    0 => b"\\n",
                    1 => b"\\\"",
                    2 => b"\\\\",
                    3 => b"\\/",
                    4 => b"\\b",
                    5 => b"\\f",
                    6 => b"\\r",
                    _ => b"\\t",
                };
                self.put(e);
            }
            10 => {
                let v = self.pick(0x20);
                self.put(format!("\\u00{v:02x}").as_bytes());
            }
            11 | 12 => {
                // A BMP escape (never a surrogate), upper or lower case hex.
                let mut v = self.u16() as u32;
                if (0xD800..0xE000).contains(&v) {
                    v -= 0x800;
                }
                let s = if self.flag() {
                    format!("\\u{v:04X}")
                } else {
                    format!("\\u{v:04x}")
                };
                self.put(s.as_bytes());
            }
            13 | 14 => {
                // An escaped surrogate pair.
                let hi = 0xD800 + (self.u16() as u32 & 0x3FF);
                let lo = 0xDC00 + (self.u16() as u32 & 0x3FF);
                let s = if self.flag() {
                    format!("\\u{hi:04X}\\u{lo:04X}")
                } else {
                    format!("\\u{hi:04x}\\u{lo:04x}")
                };
                self.put(s.as_bytes());
            }
            15 => self.put("é".as_bytes()),
            16 => self.put("€".as_bytes()),
            17 => self.put("😀".as_bytes()),
            18 => {
                // Any scalar value, raw UTF-8.
                let v = ((self.byte() as u32) << 16 | self.u16() as u32) % 0x11_0000;
                let c = char::from_u32(v).unwrap_or('\u{fffd}');
                if c >= ' ' && c != '"' && c != '\\' {
                    let mut b = [0u8; 4];
                    self.put(c.encode_utf8(&mut b).as_bytes());
                } else {
                    self.put(b"x");
                }
            }
            19 => {
                // A run, to reach the limits cheaply.
                let n = (self.u16() % 2048) as usize;
                let c = b'A' + self.pick(26);
                self.out.resize(self.out.len() + n, c);
            }
            20 => {
                let n = (self.byte() % 64) as usize;
                for _ in 0..n {
                    self.put("é".as_bytes());
                }
            }
            21 => {
                let n = (self.byte() % 32) as usize;
                for _ in 0..n {
                    self.put(b"\\ud83d\\ude00");
                }
            }
            22 => {
                let n = (self.byte() % 32) as usize;
                for _ in 0..n {
                    self.put(b"\\n");
                }
            }
            _ => self.put(b"0"),
        }
    }

    /// A string of `n` units (with its quotes).
    pub fn string_of(&mut self, n: usize) {
        self.out.push(b'"');
        let start = self.out.len();
        for _ in 0..n {
            if self.out.len() - start > STR_CAP || self.out.len() > DOC_CAP {
                break;
            }
            self.unit();
        }
        self.out.push(b'"');
    }

    pub fn string(&mut self) {
        let n = match self.pick(8) {
            0 => 0,
            1..=4 => self.pick(8) as usize,
            5 | 6 => self.pick(64) as usize,
            _ => self.byte() as usize * 2,
        };
        self.string_of(n);
    }

    pub fn key(&mut self) {
        if self.flag() {
            let k = KEYS[self.pick(KEYS.len() as u8) as usize];
            self.out.push(b'"');
            self.put(k.as_bytes());
            self.out.push(b'"');
        } else {
            let n = match self.pick(8) {
                0..=5 => self.pick(6) as usize,
                6 => self.pick(64) as usize,
                _ => self.byte() as usize,
            };
            self.string_of(n);
        }
    }

    pub fn number(&mut self) {
        let s: String = match self.pick(12) {
            0 => "0".into(),
            1 => "-0".into(),
            2 => format!("{}", self.byte()),
            3 => format!("-{}", self.u16()),
            4 => format!("{}.{}", self.byte(), self.u16()),
            5 => format!("{}e{}", self.byte() % 10, self.byte()),
            6 => format!("-{}.{}E-{}", self.byte() % 10, self.byte(), self.byte()),
            7 => format!("1E+{}", self.u16()),
            8 => {
                let n = 1 + (self.byte() % 40) as usize;
                let mut s = String::from("9");
                for _ in 1..n {
                    s.push(char::from(b'0' + self.pick(10)));
                }
                s
            }
            9 => format!("{}", u64::arbitrary(&mut self.u).unwrap_or(0)),
            10 => "0.0".into(),
            _ => format!("{}", self.byte() as u32 * 1000 + 1),
        };
        self.put(s.as_bytes());
    }

    pub fn scalar(&mut self) {
        match self.pick(8) {
            0 => self.put(b"null"),
            1 => self.put(b"true"),
            2 => self.put(b"false"),
            3..=5 => self.string(),
            _ => self.number(),
        }
    }

    pub fn array_of(&mut self, n: usize, depth: u32) {
        self.out.push(b'[');
        self.sp();
        for i in 0..n {
            if i > 0 {
                self.out.push(b',');
                self.sp();
            }
            self.value(depth + 1);
            self.sp();
        }
        self.out.push(b']');
    }

    pub fn object_of(&mut self, n: usize, depth: u32) {
        self.out.push(b'{');
        self.sp();
        for i in 0..n {
            if i > 0 {
                self.out.push(b',');
                self.sp();
            }
            self.key();
            self.sp();
            self.out.push(b':');
            self.sp();
            self.value(depth + 1);
            self.sp();
        }
        self.out.push(b'}');
    }

    fn width(&mut self) -> usize {
        match self.pick(8) {
            0 => 0,
            1..=5 => self.pick(5) as usize,
            6 => self.pick(16) as usize,
            _ => self.pick(100) as usize,
        }
    }

    /// Any value; `depth` is the nesting so far.
    pub fn value(&mut self, depth: u32) {
        if self.budget == 0 || depth > 40 || self.out.len() > DOC_CAP {
            self.scalar();
            return;
        }
        self.budget -= 1;
        match self.pick(16) {
            0..=6 => self.scalar(),
            7..=9 => {
                let n = self.width();
                self.array_of(n, depth);
            }
            10..=13 => {
                let n = self.width();
                self.object_of(n, depth);
            }
            14 => {
                // A deep chain of containers around a value.
                let d = match self.pick(4) {
                    0 => self.pick(20) as usize,
                    1 => 120 + self.pick(16) as usize,
                    _ => self.byte() as usize + self.byte() as usize,
                };
                let objs: Vec<bool> = (0..d).map(|_| self.flag()).collect();
                for &o in &objs {
                    self.put(if o { b"{\"k\":" } else { b"[" });
                }
                self.value(depth + 40);
                for &o in objs.iter().rev() {
                    self.put(if o { b"}" } else { b"]" });
                }
            }
            _ => {
                // A long list of small items.
                let n = self.byte() as usize * 2;
                self.out.push(b'[');
                for i in 0..n {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    let v = self.pick(3);
                    self.put(match v {
                        0 => b"1".as_slice(),
                        1 => b"\"s\"",
                        _ => b"{}",
                    });
                }
                self.out.push(b']');
            }
        }
    }

    /// An object from member writers, in the order given, with whitespace.
    pub fn members(&mut self, members: Vec<Member<'_, 'a>>) {
        self.out.push(b'{');
        self.sp();
        for (i, (k, f)) in members.into_iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
                self.sp();
            }
            self.out.push(b'"');
            self.put(k.as_bytes());
            self.out.push(b'"');
            self.sp();
            self.out.push(b':');
            self.sp();
            f(self);
            self.sp();
        }
        self.out.push(b'}');
    }

    /// Shuffle `v` with fuzz bytes.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.byte() as usize % (i + 1);
            v.swap(i, j);
        }
    }
}

// ---------------------------------------------------------------------------
// Target: tokenizer
// ---------------------------------------------------------------------------

/// What the tokenizer saw, independent of chunking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ev {
    BeginObject,
    EndObject,
    BeginArray,
    EndArray,
    /// A string's encoded contents, its decoded length and characters, and for
    /// a key its capped decoded prefix and overflow flag.
    Str {
        key: bool,
        enc: Vec<u8>,
        dec_len: u64,
        chars: u64,
        key_prefix: Vec<u8>,
        key_over: bool,
    },
    Num(Vec<u8>),
    Lit(Lit),
}

/// Run the tokenizer over `chunks`; the events, or the first error.
pub fn tokenize(chunks: &[&[u8]]) -> Result<Vec<Ev>, Error> {
    let mut lex = Tokenizer::default();
    let mut evs = Vec::new();
    let mut s: Vec<u8> = Vec::new();
    let mut num: Vec<u8> = Vec::new();
    let mut in_num = false;
    let mut on = |tok: Tok, chunk: &[u8], lex: &Tokenizer, evs: &mut Vec<Ev>| match tok {
        Tok::BeginObject => evs.push(Ev::BeginObject),
        Tok::EndObject => evs.push(Ev::EndObject),
        Tok::BeginArray => evs.push(Ev::BeginArray),
        Tok::EndArray => evs.push(Ev::EndArray),
        Tok::StrBegin { .. } => s.clear(),
        Tok::StrSpan(a, b) => s.extend_from_slice(&chunk[a..b]),
        Tok::StrHeld => s.extend_from_slice(lex.held()),
        Tok::StrEnd => {
            let key = lex.after_key();
            evs.push(Ev::Str {
                key,
                enc: std::mem::take(&mut s),
                dec_len: lex.string_decoded_len(),
                chars: lex.string_chars(),
                key_prefix: if key { lex.key().to_vec() } else { Vec::new() },
                key_over: key && lex.key_overflowed(),
            });
        }
        Tok::NumSpan(a, b) => {
            in_num = true;
            num.extend_from_slice(&chunk[a..b]);
        }
        Tok::NumEnd => {
            assert!(in_num, "NumEnd without NumSpan");
            in_num = false;
            evs.push(Ev::Num(std::mem::take(&mut num)));
        }
        Tok::Lit(l) => evs.push(Ev::Lit(l)),
        Tok::Skipped(_) => panic!("Skipped without a skip"),
        Tok::NeedMore | Tok::Eof => {}
    };
    for chunk in chunks {
        let mut pos = 0;
        loop {
            let tok = lex.next(chunk, &mut pos)?;
            if tok == Tok::NeedMore {
                break;
            }
            assert!(pos <= chunk.len(), "pos {pos} past the chunk");
            on(tok, chunk, &lex, &mut evs);
        }
    }
    loop {
        let tok = lex.next_eof()?;
        if tok == Tok::Eof {
            break;
        }
        on(tok, &[], &lex, &mut evs);
    }
    Ok(evs)
}

/// The JSON text the events stand for, without whitespace.
pub fn render(evs: &[Ev]) -> Vec<u8> {
    let mut out = Vec::new();
    // Per open container: values written so far.
    let mut stack: Vec<u64> = Vec::new();
    let mut after_key = false;
    for ev in evs {
        let closing = matches!(ev, Ev::EndObject | Ev::EndArray);
        if !closing && !after_key {
            if let Some(n) = stack.last_mut() {
                if *n > 0 {
                    out.push(b',');
                }
                *n += 1;
            }
        }
        after_key = false;
        match ev {
            Ev::BeginObject => {
                out.push(b'{');
                stack.push(0);
            }
            Ev::BeginArray => {
                out.push(b'[');
                stack.push(0);
            }
            Ev::EndObject => {
                out.push(b'}');
                stack.pop();
            }
            Ev::EndArray => {
                out.push(b']');
                stack.pop();
            }
            Ev::Str { key, enc, .. } => {
                out.push(b'"');
                out.extend_from_slice(enc);
                out.push(b'"');
                if *key {
                    out.push(b':');
                    after_key = true;
                }
            }
            Ev::Num(n) => out.extend_from_slice(n),
            Ev::Lit(l) => out.extend_from_slice(l.text()),
        }
    }
    out
}

/// `tokenizer` target: raw bytes, whole, split in two at a position derived
/// from the data, and (when short) byte by byte; differential against serde.
/// The tokenizer's verdict when asked to skip the whole document (`skip_one(0)`):
/// exactly one `Skipped(1)`, then the end.
fn skip_verdict(parts: &[&[u8]]) -> Result<(), Error> {
    let mut t = Tokenizer::default();
    t.skip_one(0);
    let mut skipped = 0;
    for part in parts {
        let mut pos = 0;
        loop {
            match t.next(part, &mut pos)? {
                Tok::NeedMore => break,
                Tok::Skipped(1) => skipped += 1,
                other => panic!("token {other:?} while skipping the whole document"),
            }
        }
    }
    loop {
        match t.next_eof()? {
            Tok::Eof => break,
            Tok::Skipped(1) => skipped += 1,
            other => panic!("token {other:?} at the end of a skipped document"),
        }
    }
    assert_eq!(skipped, 1, "one Skipped(1) for the whole document");
    Ok(())
}

pub fn tokenizer_one(data: &[u8]) {
    let whole = tokenize(&[data]);
    let at = match (data.first(), data.last()) {
        (Some(&a), Some(&b)) => (a as usize * 256 + b as usize) % (data.len() + 1),
        _ => 0,
    };
    let split = tokenize(&chunks(data, &[at]));
    assert_eq!(whole, split, "split at {at} differs from whole");
    if data.len() <= 256 {
        assert_eq!(
            whole,
            tokenize(&bytewise(data)),
            "1-byte chunks differ from whole"
        );
    }
    // Skipped bytes are validated exactly like tokenized ones.
    let want = whole.as_ref().map(|_| ()).map_err(|e| *e);
    assert_eq!(skip_verdict(&[data]), want, "skipping the document whole");
    assert_eq!(
        skip_verdict(&chunks(data, &[at])),
        want,
        "skipping the document split at {at}"
    );
    match reference(data, DEFAULT_NESTING as usize) {
        None => assert!(whole.is_err(), "engine accepted nesting over its limit"),
        Some(true) => {
            let evs = match &whole {
                Ok(evs) => evs,
                Err(e) => panic!("engine refused ({e}) what serde accepts"),
            };
            let tree = parse(data);
            assert_eq!(
                render(evs),
                minify(data, &tree),
                "tokens do not spell the input"
            );
            for ev in evs {
                if let Ev::Str {
                    key,
                    enc,
                    dec_len,
                    chars,
                    key_prefix,
                    key_over,
                } = ev
                {
                    let s = decode_str(enc);
                    assert_eq!(
                        *dec_len,
                        s.len() as u64,
                        "decoded length of {:?}",
                        show(enc)
                    );
                    assert_eq!(
                        *chars,
                        s.chars().count() as u64,
                        "characters of {:?}",
                        show(enc)
                    );
                    if *key {
                        let n = s.len().min(resultbudget::tokenizer::KEY_CAP);
                        assert_eq!(key_prefix.as_slice(), &s.as_bytes()[..n], "key prefix");
                        assert_eq!(*key_over, s.len() > resultbudget::tokenizer::KEY_CAP);
                    }
                }
            }
        }
        Some(false) => assert!(whole.is_err(), "engine accepted what serde refuses"),
    }
    if let Err(e) = &whole {
        assert!(
            e.offset() <= data.len() as u64,
            "error offset past the input: {e}"
        );
        if e.kind() == ErrorKind::UnexpectedEnd {
            assert_eq!(
                e.offset(),
                data.len() as u64,
                "UnexpectedEnd not at the end"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Target: budget
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Arbitrary)]
pub struct BudgetCfg {
    pub raw: bool,
    pub list: Lim,
    pub map: Lim,
    pub string: Lim,
    pub depth: Lim,
    pub result: Lim,
    /// Some(n): max_nesting 1 + n % 40; None: the default.
    pub nesting: Option<u8>,
    pub nsplits: u8,
    pub splits: [u16; 4],
    pub ws: u8,
}

impl BudgetCfg {
    pub fn limits(&self) -> Limits {
        Limits {
            max_list_items: self.list.get(),
            max_map_keys: self.map.get(),
            max_string_bytes: self.string.get(),
            max_depth: self.depth.depth(),
            max_result_bytes: self
                .result
                .get()
                .max(resultbudget::limits::MIN_RESULT_BYTES),
            max_nesting: self
                .nesting
                .map_or(DEFAULT_NESTING, |n| 1 + (n % 40) as u32),
        }
    }
}

/// The document of a structured input: the body itself, or generated from it.
fn budget_doc(cfg: &BudgetCfg, body: &[u8]) -> Vec<u8> {
    if cfg.raw {
        return body.to_vec();
    }
    let mut g = Gen::new(body, cfg.ws % 64);
    g.sp();
    g.value(0);
    g.sp();
    g.out
}

pub type BudgetRun = (Result<Record, Error>, Vec<u8>);

pub fn run_budget(lim: Limits, chunks: &[&[u8]]) -> BudgetRun {
    run_budget_with(lim, chunks, true)
}

/// [`run_budget`] with the fast keeping loop on or off.
pub fn run_budget_with(lim: Limits, chunks: &[&[u8]], fast: bool) -> BudgetRun {
    run_budget_opts(lim, chunks, fast, false)
}

/// [`run_budget_with`], and lone surrogates read (`set_lone_surrogates`) or not.
pub fn run_budget_opts(lim: Limits, chunks: &[&[u8]], fast: bool, lone: bool) -> BudgetRun {
    let mut b = Budget::new(lim).expect("limits are valid");
    b.set_fast_keep(fast);
    b.set_lone_surrogates(lone);
    feed_all(&mut b, chunks)
}

/// `chunks` fed to `b`, then its end: the output, and the record or the
/// first error.
fn feed_all(b: &mut Budget, chunks: &[&[u8]]) -> BudgetRun {
    let mut out = Vec::new();
    for c in chunks {
        if let Err(e) = b.feed(c, &mut out) {
            return (Err(e), out);
        }
    }
    let r = b.finish(&mut out).cloned();
    (r, out)
}

/// Offset of the first bracket deeper than `max` in a valid document.
fn too_deep_offset(n: &Node, level: u32, max: u32) -> Option<usize> {
    let kids: Vec<&Node> = match &n.kind {
        Kind::Arr(items) => items.iter().collect(),
        Kind::Obj(m) => m.iter().map(|(_, v)| v).collect(),
        _ => return None,
    };
    if level > max {
        return Some(n.span.start);
    }
    kids.into_iter()
        .find_map(|k| too_deep_offset(k, level + 1, max))
}

pub fn budget_one(data: &[u8]) {
    let (cfg, body): (BudgetCfg, _) = header(data);
    let doc = budget_doc(&cfg, body);
    let lim = cfg.limits();
    let n = (cfg.nsplits % 5) as usize;
    let points = split_points(doc.len(), &cfg.splits[..n]);
    let whole = run_budget(lim, &[&doc]);
    let split = run_budget(lim, &chunks(&doc, &points));
    // The token-by-token path the fast keeping loop shortcuts: same verdict,
    // same bytes, same record.
    let slow = run_budget_with(lim, &chunks(&doc, &points), false);
    assert!(slow == split, "fast keep and token by token differ");
    match (&whole.0, &split.0) {
        (Ok(_), Ok(_)) => assert!(
            whole == split,
            "split at {points:?} differs from whole:\n{:?}\n{:?}",
            show(&whole.1),
            show(&split.1)
        ),
        _ => assert_eq!(whole.0, split.0, "split at {points:?}: verdicts differ"),
    }
    if doc.len() <= 128 {
        let bytes = run_budget(lim, &bytewise(&doc));
        match &whole.0 {
            Ok(_) => assert!(whole == bytes, "1-byte chunks differ from whole"),
            Err(_) => assert_eq!(whole.0, bytes.0, "1-byte chunks: verdicts differ"),
        }
    }
    check_budget(&doc, lim, &whole);
    check_lone_budget(&doc, lim, &cfg.splits[..n]);
    check_abort(&doc, lim, &points, &split);
}

/// `out` is one valid JSON value (however deep) of at most `max` bytes.
fn one_value_within(out: &[u8], max: u64, what: &str) {
    let parsed = serde_unbounded(out);
    assert!(
        parsed.is_ok(),
        "{what} is not one JSON value ({:?}): {:?}",
        parsed.err(),
        show(out)
    );
    assert!(
        out.len() as u64 <= max,
        "{what}: {} bytes > max_result_bytes {max}",
        out.len()
    );
}

/// What a caller that streams each feed's output holds after an error:
/// `abort` must leave the feeds' output plus its own as one valid JSON value
/// within the ceiling, with the caller's bytes in front untouched (the
/// `budget` command does this with no ceiling; a library caller may with
/// one). The errors: the document's own, if it is invalid, and its end cut
/// off at the first split point (or halfway), fed in the pieces before it.
/// Then the same `Budget`, `reset` (after the error, or after a document
/// read whole), reads the document as a new one does (`fresh`): nothing of
/// the last document is left in it.
pub fn check_abort(doc: &[u8], lim: Limits, points: &[usize], fresh: &BudgetRun) {
    let cut = points.first().copied().unwrap_or(doc.len() / 2);
    let short = doc.get(..cut).unwrap_or(doc);
    let prefix = b"caller:";
    for (what, input) in [("the document", doc), ("the document cut short", short)] {
        let inner: Vec<usize> = points
            .iter()
            .copied()
            .filter(|&p| p < input.len())
            .collect();
        let mut b = Budget::new(lim).expect("limits are valid");
        let mut out = prefix.to_vec();
        let failed = chunks(input, &inner)
            .iter()
            .any(|c| b.feed(c, &mut out).is_err())
            || b.finish(&mut out).is_err();
        if failed {
            b.abort(&mut out);
            let Some(value) = out.strip_prefix(prefix) else {
                panic!("abort after {what}: the caller's bytes were touched");
            };
            one_value_within(
                value,
                lim.max_result_bytes,
                &format!("abort after {what} (cut at {cut}, pieces at {inner:?})"),
            );
        }
        b.reset();
        let reused = feed_all(&mut b, &chunks(doc, points));
        assert!(
            reused == *fresh,
            "reset after {what} (failed: {failed}), then the document at {points:?}: {:?} {:?}, where a new Budget gives {:?} {:?}",
            reused.0,
            show(&reused.1),
            fresh.0,
            show(&fresh.1)
        );
    }
}

/// Lone surrogates read as U+FFFD: the document with its escaped pairs broken
/// ([`unpair`]), split as the config says, gives what the strict engine gives
/// on it with each lone escape written `\ufffd`, with the same rewrite.
pub fn check_lone_budget(doc: &[u8], lim: Limits, splits: &[u16]) {
    let lone = unpair(doc);
    let points = split_points(lone.len(), splits);
    let fast = splits.len().is_multiple_of(2);
    let got = run_budget_opts(lim, &chunks(&lone, &points), fast, true);
    let want = run_budget(lim, &[&lone_as_replacement(&lone)]);
    match (&got.0, &want.0) {
        (Ok(g), Ok(w)) => {
            assert!(
                lone_as_replacement(&got.1) == want.1,
                "lone surrogates at {points:?}: {:?} vs {:?}",
                show(&got.1),
                show(&want.1)
            );
            assert_eq!(g.to_json(), w.to_json(), "lone surrogates: records differ");
        }
        _ => assert_eq!(
            got.0, want.0,
            "lone surrogates at {points:?}: verdicts differ"
        ),
    }
}

/// Every invariant of one budget run over the document `doc`.
pub fn check_budget(doc: &[u8], lim: Limits, run: &BudgetRun) {
    let (res, out) = run;
    let nesting = lim.max_nesting as usize;
    let Some(valid) = reference(doc, DEFAULT_NESTING as usize) else {
        assert!(
            res.is_err(),
            "engine accepted a document deeper than max_nesting"
        );
        return;
    };
    let rec = match res {
        Err(e) => {
            assert!(
                e.offset() <= doc.len() as u64,
                "error offset past the input: {e}"
            );
            if valid {
                let tree = parse(doc);
                assert_eq!(
                    e.kind(),
                    ErrorKind::TooDeep,
                    "engine refused ({e}) a valid document"
                );
                let at = too_deep_offset(&tree, 1, lim.max_nesting);
                assert_eq!(at.map(|a| a as u64), Some(e.offset()), "TooDeep offset");
            }
            return;
        }
        Ok(rec) => rec,
    };
    assert!(valid, "engine accepted an invalid document");
    let tree = parse(doc);
    assert!(
        tree.depth() <= nesting,
        "accepted nesting deeper than max_nesting"
    );
    one_value_within(out, lim.max_result_bytes, "the output");
    let otree = parse(out);
    check_sub(out, &otree, doc, &tree, true);
    check_limits(out, &otree, &lim, 1);
    let same = *out == minify(doc, &tree);
    assert_eq!(
        rec.omitted_count() == 0,
        same,
        "omitted_count {} but output {} the minified input",
        rec.omitted_count(),
        if same { "equals" } else { "differs from" }
    );
    assert_eq!(rec.truncated(), rec.omitted_count() > 0);
    assert_eq!(rec.budget_kind().is_some(), rec.truncated());
    let rj = serde_json::from_slice::<Value>(&rec.to_json()).expect("record JSON is valid");
    assert_eq!(
        rj["omitted_count"].to_string(),
        rec.omitted_count().to_string()
    );
}

// ---------------------------------------------------------------------------
// Target: mcp
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Arbitrary)]
pub struct McpCfg {
    pub raw: bool,
    /// None: no ceiling; Some(n): 1024 + n.
    pub result: Option<u16>,
    pub text: Lim,
    pub block: Lim,
    pub blocks: Lim,
    pub list: Lim,
    pub map: Lim,
    pub string: Lim,
    pub depth: Lim,
    pub structured: Lim,
    /// Pass the message through instead of projecting it.
    pub pass: bool,
    pub typed: bool,
    pub read_only: bool,
    pub modern: bool,
    /// Tool name: None, or this many name characters (0..=128).
    pub tool: Option<u8>,
    pub request_id: Option<u16>,
    pub nsplits: u8,
    pub splits: [u16; 4],
    pub ws: u8,
}

impl McpCfg {
    pub fn limits(&self) -> McpLimits {
        McpLimits {
            max_result_bytes: self.result.map_or(u64::MAX, |n| {
                resultbudget::mcp::MIN_MCP_RESULT_BYTES + n as u64 % 8192
            }),
            max_text_bytes: self.text.get(),
            max_text_block_bytes: self.block.get(),
            max_content_blocks: self.blocks.get(),
            max_list_items: self.list.get(),
            max_map_keys: self.map.get(),
            max_string_bytes: self.string.get(),
            max_depth: self.depth.depth(),
            max_structured_bytes: self.structured.get(),
            max_nesting: DEFAULT_NESTING,
        }
    }

    pub fn treat(&self) -> Treat {
        if self.pass {
            return Treat::Pass;
        }
        const NAME: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.";
        // Long names too (a server may list a typed tool by one), with
        // characters JSON escapes and multi-byte ones: the typed error must
        // fit the ceiling all the same.
        const LONG: &[&str] = &["a", "\"", "\\", "\n", "\u{1}", "\u{e9}", "\u{1F600}", "z"];
        Treat::ToolResult(CallInfo {
            tool: self.tool.map(|n| {
                if n < 129 {
                    (0..n as usize)
                        .map(|i| NAME[(i * 7 + n as usize) % NAME.len()] as char)
                        .collect()
                } else {
                    (0..(n as usize - 128) * 9)
                        .map(|i| LONG[(i * 5 + n as usize) % LONG.len()])
                        .collect()
                }
            }),
            typed: self.typed,
            read_only: self.read_only,
            request_id: self.request_id.map(|v| match v % 8 {
                7 => format!("\"{}\"", "r".repeat(v as usize % 3000)).into_bytes(),
                n if n % 2 == 0 => v.to_string().into_bytes(),
                _ => format!("\"req-{v}\"").into_bytes(),
            }),
            modern: self.modern,
        })
    }
}

/// A base64-looking payload.
fn b64(g: &mut Gen) {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let n = match g.pick(4) {
        0 => g.pick(16) as usize,
        1 | 2 => g.pick(200) as usize,
        _ => (g.u16() % 6000) as usize,
    };
    let seed = g.byte() as usize;
    g.out.push(b'"');
    for i in 0..n {
        g.out.push(A[(i * 31 + seed) % 64]);
    }
    g.put(&b"=="[..(seed % 3).min(2)]);
    g.out.push(b'"');
}

/// One content block.
fn block<'a>(g: &mut Gen<'a>) {
    let kind = g.pick(8);
    let mut m: Vec<Member<'_, 'a>> = Vec::new();
    match kind {
        0..=3 => {
            m.push(("type", Box::new(|g: &mut Gen| g.put(b"\"text\""))));
            m.push((
                "text",
                Box::new(|g: &mut Gen| {
                    if g.pick(16) == 0 {
                        g.value(3)
                    } else {
                        let n = match g.pick(4) {
                            0 => g.pick(8) as usize,
                            1 | 2 => g.pick(64) as usize,
                            _ => g.byte() as usize * 4,
                        };
                        g.string_of(n)
                    }
                }),
            ));
        }
        4 | 5 => {
            let t: &'static [u8] = if kind == 4 {
                b"\"image\""
            } else {
                b"\"audio\""
            };
            m.push(("type", Box::new(move |g: &mut Gen| g.put(t))));
            m.push(("data", Box::new(b64)));
            m.push(("mimeType", Box::new(|g: &mut Gen| g.put(b"\"image/png\""))));
        }
        6 => {
            m.push(("type", Box::new(|g: &mut Gen| g.put(b"\"resource\""))));
            m.push((
                "resource",
                Box::new(|g: &mut Gen| {
                    let blob = g.flag();
                    let mut r: Vec<Member<'_, 'a>> = vec![
                        ("uri", Box::new(|g: &mut Gen| g.put(b"\"file:///a.txt\""))),
                        ("mimeType", Box::new(|g: &mut Gen| g.put(b"\"text/plain\""))),
                    ];
                    if blob {
                        r.push(("blob", Box::new(b64)));
                    } else {
                        r.push((
                            "text",
                            Box::new(|g: &mut Gen| {
                                let n = g.byte() as usize * 2;
                                g.string_of(n)
                            }),
                        ));
                    }
                    if g.pick(4) == 0 {
                        r.push(("_meta", Box::new(|g: &mut Gen| g.value(3))));
                    }
                    g.shuffle(&mut r);
                    g.members(r);
                }),
            ));
        }
        _ => {
            m.push(("type", Box::new(|g: &mut Gen| g.put(b"\"resource_link\""))));
            m.push(("uri", Box::new(|g: &mut Gen| g.put(b"\"file:///b\""))));
            m.push(("name", Box::new(|g: &mut Gen| g.string())));
        }
    }
    if g.pick(4) == 0 {
        m.push(("annotations", Box::new(|g: &mut Gen| g.value(3))));
    }
    if g.pick(4) == 0 {
        m.push(("_meta", Box::new(|g: &mut Gen| g.value(3))));
    }
    if g.pick(8) == 0 {
        m.push(("extra", Box::new(|g: &mut Gen| g.value(3))));
    }
    g.shuffle(&mut m);
    g.members(m);
}

/// A tools/call response.
fn mcp_doc<'a>(cfg: &McpCfg, body: &'a [u8]) -> Vec<u8> {
    if cfg.raw {
        return body.to_vec();
    }
    let mut g = Gen::new(body, cfg.ws % 32);
    g.budget = 400;
    let mut env: Vec<Member<'_, 'a>> = vec![
        ("jsonrpc", Box::new(|g: &mut Gen| g.put(b"\"2.0\""))),
        (
            "id",
            Box::new(|g: &mut Gen| match g.pick(4) {
                0 => g.put(b"\"abc\""),
                1 => g.put(b"null"),
                _ => g.number(),
            }),
        ),
        (
            "result",
            Box::new(|g: &mut Gen| {
                if g.pick(32) == 0 {
                    // Not an object: no CallToolResult at all.
                    g.value(1);
                    return;
                }
                let mut r: Vec<Member<'_, 'a>> = Vec::new();
                if g.pick(8) != 0 {
                    r.push((
                        "content",
                        Box::new(|g: &mut Gen| {
                            if g.pick(32) == 0 {
                                g.value(2);
                                return;
                            }
                            let n = match g.pick(4) {
                                0 => 0,
                                1 | 2 => 1 + g.pick(4) as usize,
                                _ => g.pick(60) as usize,
                            };
                            g.out.push(b'[');
                            for i in 0..n {
                                if i > 0 {
                                    g.out.push(b',');
                                }
                                g.sp();
                                if g.pick(32) == 0 {
                                    g.value(3);
                                } else {
                                    block(g);
                                }
                            }
                            g.out.push(b']');
                        }),
                    ));
                }
                if g.pick(3) == 0 {
                    r.push(("structuredContent", Box::new(|g: &mut Gen| g.value(1))));
                }
                if g.pick(3) == 0 {
                    r.push((
                        "isError",
                        Box::new(|g: &mut Gen| match g.pick(8) {
                            0 => g.value(2),
                            1..=3 => g.put(b"true"),
                            _ => g.put(b"false"),
                        }),
                    ));
                }
                if g.pick(3) == 0 {
                    r.push((
                        "_meta",
                        Box::new(|g: &mut Gen| {
                            if g.pick(16) == 0 {
                                g.value(2);
                                return;
                            }
                            let n = g.pick(4) as usize;
                            let mut m: Vec<Member<'_, 'a>> = Vec::new();
                            for i in 0..n {
                                let k = ["progressToken", "x/y", "a", "b"][i % 4];
                                m.push((k, Box::new(|g: &mut Gen| g.value(3))));
                            }
                            if g.pick(8) == 0 {
                                m.push((RECORD_KEY, Box::new(|g: &mut Gen| g.value(3))));
                            }
                            g.shuffle(&mut m);
                            g.members(m);
                        }),
                    ));
                }
                if g.pick(4) == 0 {
                    r.push((
                        "resultType",
                        Box::new(|g: &mut Gen| {
                            if g.flag() {
                                g.put(b"\"complete\"")
                            } else {
                                g.string()
                            }
                        }),
                    ));
                }
                for _ in 0..g.pick(3) {
                    let k = ["debugDump", "nextCursor", "task", "requestState", "x"]
                        [g.pick(5) as usize];
                    r.push((k, Box::new(|g: &mut Gen| g.value(2))));
                }
                g.shuffle(&mut r);
                g.members(r);
            }),
        ),
    ];
    if g.pick(8) == 0 {
        env.push(("extra", Box::new(|g: &mut Gen| g.value(1))));
    }
    if g.pick(8) == 0 {
        // A JSON-RPC error, beside the result or (drawn twice) in its place.
        env.push(("error", Box::new(|g: &mut Gen| g.value(2))));
    }
    if g.pick(16) == 0 {
        // A member a reader keeps the last of, twice.
        match g.pick(3) {
            0 => env.push(("id", Box::new(|g: &mut Gen| g.number()))),
            1 => env.push(("result", Box::new(|g: &mut Gen| g.value(2)))),
            _ => env.push(("error", Box::new(|g: &mut Gen| g.value(1)))),
        }
    }
    g.shuffle(&mut env);
    g.sp();
    match g.pick(32) {
        // Not one message: a batch of it, or a bare value.
        0 => {
            g.out.push(b'[');
            g.members(env);
            g.out.push(b']');
        }
        1 => g.value(2),
        _ => g.members(env),
    }
    g.sp();
    g.out
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpRun {
    pub res: Result<Record, Error>,
    pub out: Vec<u8>,
    pub typed_failed: bool,
    pub original_bytes: u64,
    /// Envelope members dropped (`Projector::omitted_members`).
    pub omitted_members: u64,
}

pub fn run_mcp(lim: McpLimits, treat: &Treat, chunks: &[&[u8]]) -> McpRun {
    run_mcp_with(lim, treat, chunks, true)
}

/// [`run_mcp`] with the fast keeping loop on or off.
pub fn run_mcp_with(lim: McpLimits, treat: &Treat, chunks: &[&[u8]], fast: bool) -> McpRun {
    run_mcp_opts(lim, treat, chunks, fast, false)
}

/// [`run_mcp_with`], and lone surrogates read (`set_lone_surrogates`) or not.
pub fn run_mcp_opts(
    lim: McpLimits,
    treat: &Treat,
    chunks: &[&[u8]],
    fast: bool,
    lone: bool,
) -> McpRun {
    let mut p = Projector::new(lim).expect("limits are valid");
    p.set_fast_keep(fast);
    p.set_lone_surrogates(lone);
    p.begin(treat.clone());
    let mut out = Vec::new();
    for c in chunks {
        if let Err(e) = p.feed(c, &mut out) {
            return McpRun {
                res: Err(e),
                out,
                typed_failed: p.typed_failed(),
                original_bytes: 0,
                omitted_members: p.omitted_members(),
            };
        }
    }
    let res = p.finish(&mut out).cloned();
    McpRun {
        res,
        out,
        typed_failed: p.typed_failed(),
        original_bytes: p.original_bytes(),
        omitted_members: p.omitted_members(),
    }
}

pub fn mcp_one(data: &[u8]) {
    let (cfg, body): (McpCfg, _) = header(data);
    let doc = mcp_doc(&cfg, body);
    let lim = cfg.limits();
    let treat = cfg.treat();
    let n = (cfg.nsplits % 5) as usize;
    let points = split_points(doc.len(), &cfg.splits[..n]);
    let whole = run_mcp(lim, &treat, &[&doc]);
    let split = run_mcp(lim, &treat, &chunks(&doc, &points));
    let slow = run_mcp_with(lim, &treat, &chunks(&doc, &points), false);
    assert!(slow == split, "fast keep and token by token differ");
    match (&whole.res, &split.res) {
        (Ok(_), Ok(_)) => assert!(
            whole == split,
            "split at {points:?} differs from whole:\n{:?}\n{:?}",
            show(&whole.out),
            show(&split.out)
        ),
        _ => assert_eq!(whole.res, split.res, "split at {points:?}: verdicts differ"),
    }
    check_mcp(&doc, lim, &treat, &whole);
    check_writer(&doc, lim, &treat, &cfg.splits[..n], &whole);
    // Lone surrogates, as for the generic budget (`check_lone_budget`).
    let lone = unpair(&doc);
    let points = split_points(lone.len(), &cfg.splits[..n]);
    let got = run_mcp_opts(
        lim,
        &treat,
        &chunks(&lone, &points),
        n.is_multiple_of(2),
        true,
    );
    let want = run_mcp(lim, &treat, &[&lone_as_replacement(&lone)]);
    match (&got.res, &want.res) {
        (Ok(g), Ok(w)) => {
            // A receipt's digest is of the result's own bytes, which the
            // rewrite changes; everything else must be the same.
            assert!(
                no_digest(&lone_as_replacement(&got.out)) == no_digest(&want.out),
                "lone surrogates at {points:?}: {:?} vs {:?}",
                show(&got.out),
                show(&want.out)
            );
            assert_eq!(g.to_json(), w.to_json(), "lone surrogates: records differ");
        }
        _ => assert_eq!(
            got.res, want.res,
            "lone surrogates at {points:?}: verdicts differ"
        ),
    }
}

/// `pieces` and a newline, `times` times over, through an
/// `AsyncProjectWriter` over a `Vec`, polled by hand (a `Vec` is always
/// ready, so no runtime is needed), then shut down: what the `Vec` holds.
fn async_written(lim: McpLimits, treat: &Treat, pieces: &[&[u8]], times: usize) -> Vec<u8> {
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use tokio::io::AsyncWrite;
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut w = AsyncProjectWriter::new(Vec::new(), lim, treat.clone()).expect("limits are valid");
    for _ in 0..times {
        for &piece in pieces.iter().chain([&b"\n"[..]].iter()) {
            let mut rest = piece;
            while !rest.is_empty() {
                match Pin::new(&mut w).poll_write(&mut cx, rest) {
                    Poll::Ready(Ok(n)) if n > 0 => rest = rest.get(n..).unwrap_or(&[]),
                    other => panic!("a Vec took no bytes: {other:?}"),
                }
            }
        }
    }
    match Pin::new(&mut w).poll_shutdown(&mut cx) {
        Poll::Ready(Ok(())) => {}
        other => panic!("shutting down over a Vec: {other:?}"),
    }
    w.into_inner()
}

/// The library's writer (`transport::ProjectWriter`) on `doc` as one line
/// (a raw newline in it made a space), written in the pieces `splits` make:
/// one line out, valid JSON. A valid object whose top-level `id`, `result`
/// and `error` (keys by value) come once each gives the projection of
/// [`run_mcp`] itself; one with any of them twice, the `-32700` line naming
/// its last `id`; valid JSON that is not an object, the `-32600` line with a
/// null id; anything else the projector refuses, the `-32700` line
/// (`docs/library.md`). The line twice through one writer, through the
/// tokio-util encoder and through the `AsyncWrite` adapter gives the same
/// bytes twice; with a small hold, the same bytes or a streamed part ended
/// as a line and then the same error line.
pub fn check_writer(doc: &[u8], lim: McpLimits, treat: &Treat, splits: &[u16], whole: &McpRun) {
    let line: Vec<u8> = doc
        .iter()
        .map(|&b| if b == b'\n' { b' ' } else { b })
        .collect();
    let relined;
    let whole = if line == doc {
        whole
    } else {
        relined = run_mcp(lim, treat, &[&line]);
        &relined
    };
    let points = split_points(line.len(), splits);
    // The line and its newline through a writer, in those pieces, `times`
    // times over.
    let written = |hold: Option<usize>, times: usize| {
        let mut w = ProjectWriter::new(Vec::new(), lim, treat.clone()).expect("limits are valid");
        if let Some(hold) = hold {
            w.set_max_hold(hold);
        }
        for _ in 0..times {
            for c in chunks(&line, &points) {
                std::io::Write::write_all(&mut w, c).expect("a Vec takes every byte");
            }
            std::io::Write::write_all(&mut w, b"\n").expect("a Vec takes every byte");
        }
        w.finish().expect("a Vec takes every byte")
    };
    let got = written(None, 1);
    // The writer's projector goes on to the next line as a new one would:
    // the same line twice gives the same output twice, after a line that
    // broke as after one that did not.
    let twice = written(None, 2);
    assert!(
        twice.strip_prefix(got.as_slice()) == Some(got.as_slice()),
        "the same line a second time through one writer gave another output:\n{:?}\n{:?}",
        show(&twice),
        show(&got)
    );
    // The tokio-util encoder, one item per message, writes what the writer
    // writes for it (it holds a message whole; the writer's hold is never
    // reached here), the second time as the first.
    let mut enc = McpEncoder::new(lim, treat.clone()).expect("limits are valid");
    let mut encoded = bytes::BytesMut::new();
    for _ in 0..2 {
        tokio_util::codec::Encoder::encode(&mut enc, line.as_slice(), &mut encoded)
            .expect("a line without a newline encodes");
    }
    assert!(
        encoded[..] == twice[..],
        "the encoder wrote other bytes than the writer:\n{:?}\n{:?}",
        show(&encoded),
        show(&twice)
    );
    // The AsyncWrite adapter, polled by hand over a `Vec` (always ready), in
    // the same pieces, twice, then shut down: the same bytes again.
    let polled = async_written(lim, treat, &chunks(&line, &points), 2);
    assert!(
        polled == twice,
        "the async writer wrote other bytes than the writer:\n{:?}\n{:?}",
        show(&polled),
        show(&twice)
    );
    // Again with a hold of 64 to 575 bytes, so that a longer line streams on
    // before it is whole (the default, 8 MiB, is never reached here): the
    // same bytes; or, where the line turns out broken after part of it went
    // out, that part ended as a line of its own, then the same error line.
    let hold = 64 + line.len() % 512;
    let streamed = written(Some(hold), 1);
    if streamed != got {
        let head = streamed.strip_suffix(got.as_slice());
        let Some(head) = head.filter(|h| h.iter().position(|&b| b == b'\n') == Some(h.len() - 1))
        else {
            panic!(
                "with a hold of {hold}: not the held line, nor a part of it and then the held line:\n{:?}\n{:?}",
                show(&streamed),
                show(&got)
            );
        };
        let error = value_unbounded(got.strip_suffix(b"\n").unwrap_or(&got));
        assert_eq!(
            error.as_ref().map(|v| &v["error"]["code"]),
            Some(&Value::from(-32700)),
            "with a hold of {hold}: a part went out ({:?}) of a line that was not refused: {:?}",
            show(head),
            show(&got)
        );
    }
    let Some(first) = framing::first_content(&line) else {
        assert!(got.is_empty(), "a blank line wrote {:?}", show(&got));
        return;
    };
    let Some(out) = got.strip_suffix(b"\n").filter(|o| !o.contains(&b'\n')) else {
        panic!("not one line out: {:?}", show(&got));
    };
    let Some(v) = value_unbounded(out) else {
        panic!("the writer's line is not JSON: {:?}", show(out));
    };
    let code = &v["error"]["code"];
    let valid = reference(&line, DEFAULT_NESTING as usize) == Some(true);
    if !valid || whole.res.is_err() {
        assert_eq!(code, -32700, "refused input: {:?}", show(out));
        return;
    }
    if first != b'{' {
        assert_eq!(code, -32600, "not an object: {:?}", show(out));
        assert!(v["id"].is_null(), "{:?}", show(out));
        return;
    }
    let tree = parse(&line);
    let members = tree.members().unwrap_or(&[]);
    let keys: Vec<String> = members.iter().map(|(k, _)| decode_key(k, &line)).collect();
    if not_one_answer(&keys) {
        assert_eq!(code, -32700, "not one answer: {:?}", show(out));
        // The last `id`, as readers keep it (none held past 64 bytes).
        let last_id = keys
            .iter()
            .zip(members)
            .filter(|(k, _)| *k == "id")
            .map(|(_, (_, v))| v)
            .next_back();
        if let Some(id) = last_id {
            let raw = id.raw(&line);
            if !matches!(id.kind, Kind::Arr(_) | Kind::Obj(_)) {
                let want = if raw.len() <= 64 {
                    value_unbounded(&lone_as_replacement(raw)).expect("a valid id")
                } else {
                    Value::Null
                };
                assert_eq!(v["id"], want, "the error names another id: {:?}", show(out));
            }
        }
        return;
    }
    assert!(
        out == whole.out,
        "the writer differs from the projection:\n{:?}\n{:?}",
        show(out),
        show(&whole.out)
    );
}

const STANDARD_FIELDS: &[&[u8]] = &[
    b"content",
    b"structuredContent",
    b"isError",
    b"_meta",
    b"resultType",
    b"inputRequests",
    b"requestState",
    b"task",
];

/// Every invariant of one projection of the message `doc`.
pub fn check_mcp(doc: &[u8], lim: McpLimits, treat: &Treat, run: &McpRun) {
    let Some(valid) = reference(doc, DEFAULT_NESTING as usize) else {
        assert!(
            run.res.is_err(),
            "engine accepted a document deeper than max_nesting"
        );
        return;
    };
    let rec = match &run.res {
        Err(e) => {
            if valid {
                assert_eq!(
                    e.kind(),
                    ErrorKind::TooDeep,
                    "engine refused ({e}) a valid message"
                );
            }
            return;
        }
        Ok(r) => r,
    };
    assert!(valid, "engine accepted an invalid message");
    let out = &run.out;
    let tree = parse(doc);
    if let Err(e) = serde_unbounded(out) {
        panic!("output is not valid JSON ({e}): {:?}", show(out));
    }
    let otree = parse(out);
    let info = match treat {
        Treat::Pass => {
            assert_eq!(*out, minify(doc, &tree), "a passed message changed");
            return;
        }
        Treat::ToolResult(c) => c,
    };
    if !rec.truncated() && run.omitted_members == 0 {
        assert!(
            *out == minify(doc, &tree),
            "nothing recorded as cut, yet the output differs from the minified input: {:?}",
            show(out)
        );
    }
    let (Some(im), Some(om)) = (tree.members(), otree.members()) else {
        return;
    };
    // The envelope: the members JSON-RPC defines, in the same order; every
    // one but `result` and `error` unchanged, and the rest dropped (keys by
    // value, as the projector reads them); of more than one `result` or
    // `error`, only the first is kept.
    let defined = |k: &Node, d: &[u8]| JSONRPC_MEMBERS.contains(&decode_key(k, d).as_str());
    let mut answered = false;
    let kept: Vec<&(Node, Node)> = im
        .iter()
        .filter(|(k, _)| defined(k, doc))
        .filter(|(k, _)| {
            let answer = matches!(decode_key(k, doc).as_str(), "result" | "error");
            let second = answer && answered;
            answered |= answer;
            !second
        })
        .collect();
    assert_eq!(
        kept.len(),
        om.len(),
        "envelope members were added or dropped"
    );
    // (The record counts what was cut in an `error` too, which a record
    // written in the result before it cannot.)
    let keys: Vec<String> = im.iter().map(|(k, _)| decode_key(k, doc)).collect();
    let single =
        keys.iter().filter(|k| *k == "result").count() == 1 && !keys.iter().any(|k| k == "error");
    for ((ik, iv), (ok, ov)) in kept.into_iter().zip(om) {
        assert_eq!(ik.raw(doc), ok.raw(out), "envelope keys differ");
        if decode_key(ik, doc) == "result" {
            check_result(doc, iv, out, ov, &lim, info, single.then_some(rec), run);
        } else if decode_key(ik, doc) == "error" {
            // Bounded as a result is (the generic budget under its ceiling).
            assert!(
                ov.span.len() as u64 <= lim.max_result_bytes,
                "an error of {} bytes over the {}-byte ceiling",
                ov.span.len(),
                lim.max_result_bytes
            );
        } else {
            assert_eq!(minify(doc, iv), ov.raw(out), "envelope member changed");
        }
    }
}

/// The members JSON-RPC defines in a message's envelope; a tool answer keeps
/// no other.
const JSONRPC_MEMBERS: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];

/// Whether top-level members with these keys (by value) are not one answer
/// (`Projector::repeated`): an `id` twice, or more than one `result` and
/// `error` together. A reader keeps the last of duplicate members, and the
/// projector budgets each `result` and `error` on its own.
fn not_one_answer(keys: &[String]) -> bool {
    let count = |key: &str| keys.iter().filter(|k| *k == key).count();
    count("id") > 1 || count("result") + count("error") > 1
}

/// A key's value (lone surrogates read as U+FFFD).
fn decode_key(k: &Node, doc: &[u8]) -> String {
    serde_json::from_slice(&lone_as_replacement(k.raw(doc))).unwrap_or_default()
}

/// Decoded bytes of a text member, if it is a string.
fn text_len(doc: &[u8], n: Option<&Node>) -> u64 {
    match n {
        Some(s) if s.is_str() => decode_str(s.contents(doc)).len() as u64,
        _ => 0,
    }
}

#[allow(clippy::too_many_arguments)]
fn check_result(
    doc: &[u8],
    ir: &Node,
    out: &[u8],
    or: &Node,
    lim: &McpLimits,
    info: &CallInfo,
    // The message's record, when this is its only result.
    rec: Option<&Record>,
    run: &McpRun,
) {
    let size = or.span.len() as u64;
    assert!(
        size <= lim.max_result_bytes,
        "result of {size} bytes > max_result_bytes {}: {:?}",
        lim.max_result_bytes,
        show(or.raw(out))
    );
    let (Some(_), Some(om)) = (ir.members(), or.members()) else {
        return;
    };
    for (k, _) in om {
        assert!(
            STANDARD_FIELDS.contains(&k.contents(out)),
            "non-standard result field {:?} kept",
            show(k.raw(out))
        );
    }
    let in_metas = ir.get_all(doc, b"_meta").len();
    let out_metas = or.get_all(out, b"_meta");
    assert!(
        out_metas.len() <= in_metas.max(1),
        "{} _meta members in the result (input had {in_metas})",
        out_metas.len()
    );
    // The record: present exactly when something was cut, and it tells the truth.
    let records: Vec<&Node> = out_metas
        .iter()
        .flat_map(|m| m.get_all(out, RECORD_KEY.as_bytes()))
        .collect();
    match rec {
        Some(rec) if rec.truncated() => {
            assert_eq!(
                records.len(),
                1,
                "{} truncation records in the result",
                records.len()
            );
            let r: Value =
                serde_json::from_slice(records[0].raw(out)).expect("the record is valid JSON");
            assert_eq!(r["truncated"], Value::Bool(true));
            assert_eq!(
                r["omitted_count"].to_string(),
                rec.omitted_count().to_string()
            );
            assert_eq!(
                r["original_bytes"].to_string(),
                run.original_bytes.to_string()
            );
            assert_eq!(run.original_bytes, ir.span.len() as u64, "original_bytes");
        }
        Some(_) => assert!(records.is_empty(), "a truncation record with nothing cut"),
        None => assert!(
            records.len() <= 1,
            "{} truncation records in a result",
            records.len()
        ),
    }
    // An error result never turns into a success.
    if ir.get_last(doc, b"isError").map(|v| v.raw(doc)) == Some(b"true") {
        assert_eq!(
            or.get_last(out, b"isError").map(|v| v.raw(out)),
            Some(&b"true"[..]),
            "isError: true was lost"
        );
    }
    if run.typed_failed {
        assert!(info.typed, "typed_failed for an untyped call");
        assert_eq!(
            or.get_last(out, b"isError").map(|v| v.raw(out)),
            Some(&b"true"[..])
        );
        // It names the tool whole, or a prefix of its name and `…`; a
        // receipt names the call's id, or `null`.
        let v = value_unbounded(or.raw(out)).unwrap_or_default();
        let name = info.tool.as_deref().unwrap_or("unknown");
        let named = |s: &str| {
            s.starts_with(name)
                || s.split_once('\u{2026}')
                    .is_some_and(|(p, _)| name.starts_with(p))
        };
        let text = v["content"][0]["text"].as_str().unwrap_or_default();
        let after = text
            .strip_prefix("result_budget_exceeded: tool ")
            .or_else(|| text.strip_prefix("result_budget_exceeded: the complete result of tool "));
        assert!(after.is_some_and(named), "the typed error's text: {text:?}");
        if !info.read_only {
            let receipt = &v["_meta"]["resultbudget/receipt"];
            let tool = receipt["tool"].as_str().unwrap_or_default();
            assert!(
                tool == name
                    || tool
                        .strip_suffix('\u{2026}')
                        .is_some_and(|p| name.starts_with(p)),
                "the receipt's tool: {tool:?}"
            );
            let id = &receipt["request_id"];
            let want = info.request_id.as_deref().and_then(value_unbounded);
            assert!(
                id.is_null() || want.is_none() || want.as_ref() == Some(id),
                "the receipt's request_id: {id}"
            );
        }
        return;
    }
    if info.typed {
        // Whole or an error: each kept member is its input twin unchanged (the
        // record aside, merged into `_meta`).
        let im = ir.members().unwrap_or(&[]);
        let last_is_error = ir.get_last(doc, b"isError").map(|v| v.raw(doc));
        let mut from = 0;
        for (n, (k, v)) in om.iter().enumerate() {
            if k.contents(out) == b"_meta" {
                continue;
            }
            let at = im[from..]
                .iter()
                .position(|(ik, iv)| ik.raw(doc) == k.raw(out) && minify(doc, iv) == v.raw(out));
            match at {
                Some(i) => from += i + 1,
                // A boolean `isError` that did not fit where it came is written
                // last (only `_meta` after it), with the input's last value.
                None if k.contents(out) == b"isError"
                    && last_is_error == Some(v.raw(out))
                    && om[n + 1..].iter().all(|(k, _)| k.contents(out) == b"_meta") => {}
                None => panic!("typed result member {:?} was cut", show(k.raw(out))),
            }
        }
        return;
    }
    // Content blocks and texts.
    let mut total = 0u64;
    for content in or.get_all(out, b"content") {
        let Some(items) = content.items() else {
            continue;
        };
        // Only objects are blocks: the engine passes other items (`null`, a
        // number) through the generic budget without counting them.
        let blocks: Vec<&Node> = items.iter().filter(|b| b.members().is_some()).collect();
        assert!(
            blocks.len() as u64 <= lim.max_content_blocks,
            "{} content blocks > max_content_blocks {}",
            blocks.len(),
            lim.max_content_blocks
        );
        for b in blocks {
            let mut texts: Vec<&Node> = b.get_all(out, b"text");
            for r in b.get_all(out, b"resource") {
                texts.extend(r.get_all(out, b"text"));
            }
            for t in texts {
                let n = text_len(out, Some(t));
                assert!(
                    n <= lim.max_text_block_bytes,
                    "text of {n} bytes > max_text_block_bytes {}",
                    lim.max_text_block_bytes
                );
                total += n;
            }
        }
    }
    assert!(
        total <= lim.max_text_bytes,
        "texts of {total} bytes > max_text_bytes {}",
        lim.max_text_bytes
    );
    // structuredContent: a sub-document within the free-form limits and its ceiling.
    let (isc, osc) = (
        ir.get_all(doc, b"structuredContent"),
        or.get_all(out, b"structuredContent"),
    );
    if let ([i], [o]) = (isc.as_slice(), osc.as_slice()) {
        check_sub(out, o, doc, i, false);
        check_limits(out, o, &lim.free(), 1);
        assert!(
            o.span.len() as u64 <= lim.max_structured_bytes,
            "structuredContent of {} bytes > max_structured_bytes {}",
            o.span.len(),
            lim.max_structured_bytes
        );
    }
}

// ---------------------------------------------------------------------------
// Target: guard
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Arbitrary)]
pub struct GuardCfg {
    pub raw: bool,
    pub arg_bytes: Lim,
    pub items: Lim,
    pub string_bytes: Lim,
    pub string_chars: Lim,
    pub keys: Lim,
    pub depth: Lim,
    pub request: Lim,
    /// The sniffed tool name handed to `finish`.
    pub tool: u8,
    pub nsplits: u8,
    pub splits: [u16; 4],
    pub ws: u8,
    /// With [`GUARD_INVENTORY`]: rows with page sizes of their own, a clamp,
    /// a search row's own query name.
    pub inventory: bool,
}

const TOOLS: &[&str] = &[
    "echo",
    "list_items",
    "search_docs",
    "",
    "get_file",
    "events",
    "dir",
    "find",
];

/// Tool names longer than the 256 bytes the guard once read of a name (300
/// bytes), and than [`resultbudget::sniff::NAME_CAP`] (2,100 bytes: a tool
/// the guard does not know).
static LONG_TOOLS: std::sync::LazyLock<[String; 2]> =
    std::sync::LazyLock::new(|| ["x".repeat(300), "y".repeat(2100)]);

/// The guard target's inventory: `events` pages by `count` (at most 10,
/// refused above), `dir` by `limit` (at most 30, clamped), `find` searches
/// by `term` and pages by `limit` (at most 20). [`page_rule`] knows the same
/// rows, written apart on purpose. Each row has argument caps of its own
/// (`events` looser, `dir` tighter, `find` a request cap), which
/// [`row_caps`] knows apart too.
pub const GUARD_INVENTORY: &str = r#"{"version":1,"defaults":{},"tools":[
{"tool":"events","server":"fuzz","surface":"events","classification":"discovery","read_only":true,"limit":{"param":"count","default":3,"max":10,"over_max":"refuse"},"cursor":null,"per_item_budget_bytes":512,"result_budget":{"max_result_bytes":4096},"backend_query_bound":"count","structured_content_policy":"cut_generic","argument_caps":{"max_arg_items":100000,"max_arg_depth":100,"max_arg_bytes":1000000}},
{"tool":"dir","server":"fuzz","surface":"dir","classification":"directory","read_only":true,"limit":{"param":"limit","default":5,"max":30,"over_max":"clamp"},"cursor":{"param":"cursor","has_more_field":"has_more","next_cursor_field":"next_cursor"},"per_item_budget_bytes":512,"result_budget":{"max_result_bytes":4096},"backend_query_bound":"paged","structured_content_policy":"cut_generic","argument_caps":{"max_arg_string_bytes":24,"max_arg_keys":5,"max_arg_string_chars":20}},
{"tool":"find","server":"fuzz","surface":"find","classification":"search","read_only":true,"limit":{"param":"limit","default":5,"max":20,"over_max":"refuse"},"cursor":null,"per_item_budget_bytes":512,"result_budget":{"max_result_bytes":4096},"backend_query_bound":"limit+1","structured_content_policy":"cut_generic","query_params":["term"],"argument_caps":{"max_request_bytes":500}}
]}"#;

fn guard_inventory() -> &'static resultbudget::inventory::Inventory {
    static INV: std::sync::OnceLock<resultbudget::inventory::Inventory> =
        std::sync::OnceLock::new();
    INV.get_or_init(|| {
        resultbudget::inventory::Inventory::parse(GUARD_INVENTORY)
            .expect("the guard target's inventory is valid")
    })
}

/// The caps a tool is held to with [`GUARD_INVENTORY`], over the target's
/// own: the row's `argument_caps` where it names one.
pub fn row_caps(tool: &str, base: ArgCaps) -> ArgCaps {
    let mut c = base;
    match tool {
        "events" => {
            c.max_arg_items = 100_000;
            c.max_arg_depth = 100;
            c.max_arg_bytes = 1_000_000;
        }
        "dir" => {
            c.max_arg_string_bytes = 24;
            c.max_arg_keys = 5;
            c.max_arg_string_chars = 20;
        }
        "find" => c.max_request_bytes = 500,
        _ => {}
    }
    c
}

/// The caps the guard owes a valid line: the tightest of every tool it
/// names (each string `name` of each `params` object, decoded), and of the
/// sniffed tool where it names none, or last names the empty string.
pub fn caps_owed(doc: &[u8], tool: &str, of: impl Fn(&str) -> ArgCaps) -> ArgCaps {
    let tree = parse(doc);
    let mut names: Vec<String> = Vec::new();
    for (k, p) in tree.members().unwrap_or(&[]) {
        if decode_str(k.contents(doc)) != "params" {
            continue;
        }
        for (k, n) in p.members().unwrap_or(&[]) {
            if decode_str(k.contents(doc)) == "name" && n.is_str() {
                names.push(decode_str(n.contents(doc)));
            }
        }
    }
    if names.last().is_none_or(|n| n.is_empty()) {
        names.push(tool.to_string());
    }
    let first = of(&names[0]);
    names[1..]
        .iter()
        .fold(first, |c, n| caps_each(c, of(n), u64::min))
}

/// Each cap of `a` and `b` put together by `f` (`u64::min`: the tighter).
fn caps_each(a: ArgCaps, b: ArgCaps, f: fn(u64, u64) -> u64) -> ArgCaps {
    ArgCaps {
        max_arg_bytes: f(a.max_arg_bytes, b.max_arg_bytes),
        max_arg_items: f(a.max_arg_items, b.max_arg_items),
        max_arg_string_bytes: f(a.max_arg_string_bytes, b.max_arg_string_bytes),
        max_arg_string_chars: f(a.max_arg_string_chars, b.max_arg_string_chars),
        max_arg_keys: f(a.max_arg_keys, b.max_arg_keys),
        max_arg_depth: f(a.max_arg_depth, b.max_arg_depth),
        max_request_bytes: f(a.max_request_bytes, b.max_request_bytes),
    }
}

/// A cap's value by its name in a verdict.
fn cap_named(c: &ArgCaps, name: &str) -> Option<u64> {
    Some(match name {
        "max_arg_bytes" => c.max_arg_bytes,
        "max_arg_items" => c.max_arg_items,
        "max_arg_string_bytes" => c.max_arg_string_bytes,
        "max_arg_string_chars" => c.max_arg_string_chars,
        "max_arg_keys" => c.max_arg_keys,
        "max_arg_depth" => c.max_arg_depth,
        "max_request_bytes" => c.max_request_bytes,
        _ => return None,
    })
}

/// The page-size rule of a tool, as the spec states it for
/// [`GUARD_INVENTORY`]: the argument's name, the maximum, and whether a
/// larger one is clamped (else refused). A tool without a row pages by
/// `limit` if its name makes it a list or search tool (at most 100).
pub fn page_rule(tool: &str) -> Option<(&'static str, f64, bool)> {
    match tool {
        "events" => Some(("count", 10.0, false)),
        "dir" => Some(("limit", 30.0, true)),
        "find" => Some(("limit", 20.0, false)),
        t if t.starts_with("list_") || t.starts_with("search_") => Some(("limit", 100.0, false)),
        _ => None,
    }
}

impl GuardCfg {
    pub fn caps(&self) -> ArgCaps {
        ArgCaps {
            max_arg_bytes: self.arg_bytes.get(),
            max_arg_items: self.items.get(),
            max_arg_string_bytes: self.string_bytes.get(),
            max_arg_string_chars: self.string_chars.get(),
            max_arg_keys: self.keys.get(),
            max_arg_depth: self.depth.get(),
            max_request_bytes: self.request.get(),
        }
    }

    pub fn tool(&self) -> &'static str {
        let n = self.tool as usize % (TOOLS.len() + LONG_TOOLS.len());
        match TOOLS.get(n) {
            Some(t) => t,
            None => LONG_TOOLS.get(n - TOOLS.len()).map_or("", String::as_str),
        }
    }
}

fn guard_doc<'a>(cfg: &GuardCfg, body: &'a [u8]) -> Vec<u8> {
    if cfg.raw {
        return body.to_vec();
    }
    let mut g = Gen::new(body, cfg.ws % 32);
    g.budget = 600;
    let tool = cfg.tool();
    let mut env: Vec<Member<'_, 'a>> = vec![
        ("jsonrpc", Box::new(|g: &mut Gen| g.put(b"\"2.0\""))),
        (
            "id",
            Box::new(|g: &mut Gen| match g.pick(8) {
                0 => g.string(),
                1 => g.value(1),
                _ => g.number(),
            }),
        ),
        (
            "method",
            Box::new(|g: &mut Gen| match g.pick(8) {
                0 => g.put(b"\"ping\""),
                1 => g.put(b"\"tools\\/call\""),
                2 => g.value(1),
                _ => g.put(b"\"tools/call\""),
            }),
        ),
        (
            "params",
            Box::new(move |g: &mut Gen| {
                let mut p: Vec<Member<'_, 'a>> = vec![
                    (
                        "name",
                        Box::new(move |g: &mut Gen| {
                            g.out.push(b'"');
                            g.put(tool.as_bytes());
                            g.out.push(b'"');
                        }),
                    ),
                    (
                        "arguments",
                        Box::new(|g: &mut Gen| match g.pick(16) {
                            0 => g.value(0),
                            2..=4 => page_args(g),
                            1 => {
                                let n = g.pick(8) as usize;
                                g.array_of(n, 1)
                            }
                            _ => {
                                let n = match g.pick(4) {
                                    0 => 0,
                                    1 | 2 => g.pick(6) as usize,
                                    _ => g.pick(64) as usize,
                                };
                                g.object_of(n, 1)
                            }
                        }),
                    ),
                ];
                if g.pick(4) == 0 {
                    p.push((
                        "_meta",
                        Box::new(|g: &mut Gen| {
                            if g.flag() {
                                g.put(
                                    b"{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}",
                                )
                            } else {
                                g.value(1)
                            }
                        }),
                    ));
                }
                for _ in 0..g.pick(3) {
                    let k = [
                        "task",
                        "arguments",
                        "name",
                        "x",
                        "requestId",
                        "taskId",
                        "_meta",
                    ][g.pick(7) as usize];
                    if k == "arguments" {
                        // A second `arguments`: the server reads the last.
                        p.push((
                            k,
                            Box::new(
                                |g: &mut Gen| {
                                    if g.flag() {
                                        page_args(g)
                                    } else {
                                        g.value(1)
                                    }
                                },
                            ),
                        ));
                    } else {
                        p.push((k, Box::new(|g: &mut Gen| g.value(1))));
                    }
                }
                g.shuffle(&mut p);
                g.members(p);
            }),
        ),
    ];
    if g.pick(8) == 0 {
        let k = ["params", "extra", "result", "error", "method", "id"][g.pick(6) as usize];
        if k == "params" && g.flag() {
            // A second `params` with a page size of its own, for this tool
            // or another: the server reads the last.
            let other = TOOLS[g.pick(TOOLS.len() as u8) as usize];
            env.push((
                k,
                Box::new(move |g: &mut Gen| {
                    let name = if g.flag() { tool } else { other };
                    let p: Vec<Member<'_, 'a>> = vec![
                        (
                            "name",
                            Box::new(move |g: &mut Gen| {
                                g.out.push(b'"');
                                g.put(name.as_bytes());
                                g.out.push(b'"');
                            }),
                        ),
                        ("arguments", Box::new(page_args)),
                    ];
                    g.members(p);
                }),
            ));
        } else {
            env.push((k, Box::new(|g: &mut Gen| g.value(1))));
        }
    }
    g.shuffle(&mut env);
    g.members(env);
    g.out
}

/// Arguments around page sizes: a few members named as page sizes, query
/// parameters and others (some names escaped), repeated at times, each with
/// a value a server might read as a page size, or not.
fn page_args(g: &mut Gen) {
    let n = 1 + g.pick(6) as usize;
    let mut members: Vec<Member<'_, '_>> = Vec::with_capacity(n);
    for _ in 0..n {
        let k = match g.pick(13) {
            0..=2 => "limit",
            3 | 4 => "count",
            5 => "\\u006cimit",
            6 => "co\\u0075nt",
            7 => "term",
            8 => "q",
            9 => "query",
            10 => "\\u0071",
            11 => "search",
            _ => "cursor",
        };
        let query = matches!(k, "term" | "q" | "query" | "\\u0071" | "search");
        if query && g.pick(4) != 0 {
            members.push((k, Box::new(query_value)));
        } else {
            members.push((k, Box::new(page_value)));
        }
    }
    g.members(members);
}

/// A value for a query argument: strings of whitespace (blank) in every
/// spelling, now and then with one character that is not, or that no trim
/// removes; or any value.
fn query_value(g: &mut Gen) {
    const BLANK: &[&str] = &[
        " ", "\\t", "\\n", "\\r", "\\f", "\\u0020", "\\u00a0", "\\u3000", "\\uFEFF", "\\u001c",
        "\\u001F", "\\u000b", "\\u0085", "\\u2029", "\u{a0}", "\u{85}", "\u{2003}", "\u{2028}",
        "\u{3000}", "\u{feff}", "\u{1680}",
    ];
    const OTHER: &[&str] = &[
        "x",
        "\\b",
        "\\u0000",
        "\\u200b",
        "\u{200b}",
        "\\ud83d\\ude00",
        "\u{e9}",
        "\\u0041",
        "\\\\",
        "\\/",
        "\\\"",
        "\u{180e}",
        "\\u180e",
        "\u{1f600}",
    ];
    match g.pick(8) {
        0..=4 => {
            let n = g.pick(5) as usize;
            let other = (g.pick(3) == 0).then(|| g.pick(n as u8 + 1) as usize);
            g.out.push(b'"');
            for i in 0..=n {
                if other == Some(i) {
                    let o = OTHER[g.pick(OTHER.len() as u8) as usize];
                    g.put(o.as_bytes());
                }
                if i < n {
                    let b = BLANK[g.pick(BLANK.len() as u8) as usize];
                    g.put(b.as_bytes());
                }
            }
            g.out.push(b'"');
        }
        5 => g.string(),
        6 => page_value(g),
        _ => g.value(1),
    }
}

/// Whether a query is blank as the spec reads it: only characters Python's
/// `str.strip()` or JavaScript's `trim()` removes, listed here by code point
/// apart from the guard's own test.
pub fn blank_query(s: &str) -> bool {
    s.chars().all(|c| {
        matches!(
            c as u32,
            0x09..=0x0d
                | 0x1c..=0x20
                | 0x85
                | 0xa0
                | 0x1680
                | 0x2000..=0x200a
                | 0x2028
                | 0x2029
                | 0x202f
                | 0x205f
                | 0x3000
                | 0xfeff
        )
    })
}

/// The list and search contract's query rule on the guard's verdict for a
/// search tool (`search_…` by name; `find` by [`GUARD_INVENTORY`]'s row,
/// whose query parameter is `term`): refused as without a query exactly
/// when no query parameter of the arguments the server reads (the last
/// `params`, its last `arguments`, the last member of each name) is a string
/// that is not blank.
pub fn check_queries(doc: &[u8], tool: &str, inventory: bool, verdict: &Option<GuardVerdict>) {
    let params: &[&str] = match tool {
        t if t.starts_with("search_") => &["q", "query", "search"],
        "find" if inventory => &["term"],
        _ => return,
    };
    let judged = matches!(
        verdict,
        None | Some(
            GuardVerdict::MissingQuery { .. }
                | GuardVerdict::LimitTooHigh { .. }
                | GuardVerdict::LimitNotANumber { .. }
        )
    );
    if !judged || serde_verdict(doc) != Serde::Valid {
        return;
    }
    let Ok(v) = serde_json::from_slice::<Value>(doc) else {
        return;
    };
    let given = v["params"]["arguments"].as_object().is_some_and(|a| {
        params.iter().any(|q| {
            a.get(*q)
                .and_then(Value::as_str)
                .is_some_and(|s| !blank_query(s))
        })
    });
    let missing = matches!(verdict, Some(GuardVerdict::MissingQuery { .. }));
    assert_eq!(
        missing,
        !given,
        "{tool} (query parameters {params:?}): verdict {verdict:?}, line {}",
        show(doc)
    );
}

/// A value for a page-size argument: numbers near and far from the rows'
/// maxima in every spelling, strings that read as numbers and strings that
/// do not, and values that are no page size.
fn page_value(g: &mut Gen) {
    let max = [10u32, 20, 30, 100][g.pick(4) as usize];
    let near = (max as i64 + g.pick(5) as i64 - 2).to_string();
    let t: String = match g.pick(24) {
        0 | 1 => near,
        2 => format!("{near}.0"),
        3 => format!("{max}.5"),
        4 => format!("{}e1", max / 10 + g.pick(2) as u32),
        5 => format!("{}e-1", max * 10 + g.pick(3) as u32),
        6 => format!("{}E+{}", 1 + g.pick(9), g.pick(4)),
        7 => "1e400".into(),
        8 => format!("1{}", "0".repeat(g.pick(40) as usize)),
        9 => format!("0.{}1e{}", "0".repeat(g.pick(40) as usize), g.pick(50)),
        10 => format!("-{near}"),
        11 => format!("\"{near}\""),
        12 => format!(
            "\"{}{near}{}\"",
            " ".repeat(g.pick(3) as usize),
            "\\n".repeat(g.pick(2) as usize)
        ),
        13 => format!("\"{}_{}\"", g.pick(10), g.pick(10)),
        14 => {
            let mut s = String::from("\"");
            for c in near.bytes() {
                s.push_str(&format!("\\u{:04x}", c));
            }
            s.push('"');
            s
        }
        15 => [
            "\"abc\"",
            "\"0x1F\"",
            "\"Infinity\"",
            "\"\"",
            "\"5e\"",
            "\"1__0\"",
            "\"+5\"",
            "\".5e2\"",
        ][g.pick(8) as usize]
            .into(),
        16 => format!("\"{}{near}\"", " ".repeat(60 + g.pick(8) as usize)),
        17 => ["null", "true", "false", "[50]", "{\"n\":500}", "[]"][g.pick(6) as usize].into(),
        18 | 19 => {
            g.number();
            return;
        }
        20 => {
            g.string();
            return;
        }
        _ => {
            g.value(1);
            return;
        }
    };
    g.put(t.as_bytes());
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardRun {
    /// Whether any `feed` returned a verdict.
    pub early: Option<GuardVerdict>,
    pub verdict: Option<GuardVerdict>,
    /// The facts read on the same walk.
    pub facts: RequestFacts,
}

/// The guard's facts against [`walker_facts`]. On a line that is not valid
/// JSON the guard may note `response` at a top-level `result` key whose value
/// never comes (it decides at the key, so that a long answer is never held),
/// where the walker notes it at the value: `response` (and `first_call` and
/// `method_untaken`) are compared on valid lines only.
pub fn assert_facts(facts: &RequestFacts, chunks: &[&[u8]], what: &str) {
    let mut want = walker_facts(chunks);
    let doc: Vec<u8> = chunks.concat();
    if valid_up_to(&doc, DEFAULT_NESTING as usize) != Some(true) {
        want.response = facts.response;
        want.first_call = facts.first_call;
        // (Likewise a `method` or an `id` the guard found untaken at its
        // value's start.)
        want.method_untaken = facts.method_untaken;
        want.id_untaken = facts.id_untaken;
    }
    assert_eq!(
        facts, &want,
        "the guard's facts differ from the walker's{what}"
    );
}

/// The slow twin of [`Guard::facts`]: the facts as the proxy's sniffer read
/// them before the guard did, with a `Walker` that descends only where a fact
/// can be and reports each scalar it captures.
/// A method's or a tool name's raw text as the guard keeps it: by value, a
/// string's escapes decoded and the string written again by serde_json (a lone
/// surrogate escape read as U+FFFD); the text as it is when it has no escape.
fn by_value(raw: &[u8]) -> Vec<u8> {
    if !raw.contains(&b'\\') {
        return raw.to_vec();
    }
    serde_json::from_slice::<String>(&lone_as_replacement(raw))
        .ok()
        .and_then(|s| serde_json::to_vec(&s).ok())
        .unwrap_or_else(|| raw.to_vec())
}

pub fn walker_facts(chunks: &[&[u8]]) -> RequestFacts {
    use resultbudget::sniff::{Event, Seg, Walker, Want};
    use std::cell::Cell;
    const VERSION: &[u8] = b"io.modelcontextprotocol/protocolVersion";
    let response = Cell::new(false);
    // In token order: the first method taken, or result/error before any.
    let first_call: Cell<Option<bool>> = Cell::new(None);
    // A `method` key whose value has not come as a scalar (yet): at the next
    // key, or the end, it was not taken (a container, a string over the cap).
    let method_open = Cell::new(false);
    let untaken = Cell::new(false);
    // Likewise an `id` key (any one: a taken one after it does not count).
    let id_open = Cell::new(false);
    let id_untaken = Cell::new(false);
    let settle = || {
        if id_open.replace(false) {
            id_untaken.set(true);
        }
        if method_open.replace(false) {
            untaken.set(true);
            if first_call.get().is_none() {
                first_call.set(Some(false));
            }
        }
    };
    let mut decide = |path: &[Seg]| {
        settle();
        match path {
            [k] if k.is(b"result") || k.is(b"error") => {
                response.set(true);
                if first_call.get().is_none() {
                    first_call.set(Some(false));
                }
                Want::Skip
            }
            [k] if k.is(b"method") => {
                method_open.set(true);
                Want::Capture
            }
            [k] if k.is(b"id") => {
                id_open.set(true);
                Want::Capture
            }
            [k] if k.is(b"params") => Want::Descend,
            // (A tool name up to MCP's 128 characters in any spelling.)
            [p, k] if p.is(b"params") && k.is(b"name") => {
                Want::CaptureUpTo(resultbudget::sniff::NAME_CAP)
            }
            [p, k] if p.is(b"params") && (k.is(b"requestId") || k.is(b"taskId")) => Want::Capture,
            [p, k] if p.is(b"params") && (k.is(b"task") || k.is(b"_meta")) => Want::Descend,
            [p, m, k] if p.is(b"params") && m.is(b"_meta") && k.is(VERSION) => Want::Capture,
            _ => Want::Skip,
        }
    };
    let mut f = RequestFacts::default();
    let mut on = |ev: Event<'_>| {
        let set = |field: &mut Vec<u8>, raw: &[u8]| {
            field.clear();
            field.extend_from_slice(raw);
        };
        match ev {
            Event::Enter([p, k], true) if p.is(b"params") && k.is(b"task") => f.task = true,
            Event::Untaken([p, k]) if p.is(b"params") && k.is(b"name") => f.name.clear(),
            Event::Scalar(path, raw) => match path {
                [k] if k.is(b"method") => {
                    method_open.set(false);
                    untaken.set(false);
                    let method = by_value(raw);
                    let call = method == b"\"tools/call\"";
                    if call && first_call.get() == Some(false) {
                        f.call_late = true;
                    }
                    if first_call.get().is_none() {
                        first_call.set(Some(call));
                    }
                    set(&mut f.method, &method)
                }
                [k] if k.is(b"id") => {
                    id_open.set(false);
                    set(&mut f.id, raw)
                }
                [_, k] if k.is(b"name") => set(&mut f.name, &by_value(raw)),
                [_, k] if k.is(b"requestId") => set(&mut f.request_id, raw),
                [_, k] if k.is(b"taskId") => set(&mut f.task_id, &by_value(raw)),
                [_, _, k] if k.is(VERSION) => set(&mut f.version, raw),
                _ => {}
            },
            _ => {}
        }
    };
    let mut w = Walker::new();
    let mut ok = true;
    for c in chunks {
        if ok && w.feed(c, &mut decide, &mut on).is_err() {
            ok = false;
        }
    }
    if ok {
        let _ = w.finish(&mut decide, &mut on);
    }
    settle();
    f.method_untaken = untaken.get();
    f.id_untaken = id_untaken.get();
    f.response = response.get();
    f.first_call = first_call.get();
    f
}

pub fn run_guard(caps: ArgCaps, inv: bool, tool: &str, chunks: &[&[u8]]) -> GuardRun {
    let mut g = Guard::new(caps);
    if inv {
        g.set_inventory(Some(guard_inventory().clone()));
    }
    let mut early = None;
    for c in chunks {
        if let Some(v) = g.feed(c) {
            assert!(early.is_none(), "feed returned a second verdict");
            early = Some(v);
        }
    }
    let verdict = g.finish(tool);
    let facts = g.facts().clone();
    assert_facts(&facts, chunks, "");
    // The guard is reused line after line: a reset one must behave like a new one.
    g.reset();
    let mut again = None;
    for c in chunks {
        if let Some(v) = g.feed(c) {
            again.get_or_insert(v);
        }
    }
    assert_eq!(again, early, "a reset guard gives another early verdict");
    assert_eq!(
        g.finish(tool),
        verdict,
        "a reset guard gives another verdict"
    );
    assert_eq!(g.facts(), &facts, "a reset guard reads other facts");
    GuardRun {
        early,
        verdict,
        facts,
    }
}

/// The measures of the arguments, as the guard defines them.
#[derive(Debug, Default, Clone, Copy)]
pub struct ArgMeasure {
    pub bytes: u64,
    pub items: u64,
    pub string_bytes: u64,
    pub string_chars: u64,
    pub keys: u64,
    pub depth: u64,
}

impl ArgMeasure {
    /// Each measure beside its cap in `caps`, by the cap's name.
    pub fn against(&self, caps: &ArgCaps) -> [(&'static str, u64, u64); 6] {
        [
            ("max_arg_bytes", self.bytes, caps.max_arg_bytes),
            ("max_arg_depth", self.depth, caps.max_arg_depth),
            ("max_arg_keys", self.keys, caps.max_arg_keys),
            ("max_arg_items", self.items, caps.max_arg_items),
            (
                "max_arg_string_bytes",
                self.string_bytes,
                caps.max_arg_string_bytes,
            ),
            (
                "max_arg_string_chars",
                self.string_chars,
                caps.max_arg_string_chars,
            ),
        ]
    }
}

pub fn measure(doc: &[u8], args: &Node) -> ArgMeasure {
    fn walk(doc: &[u8], n: &Node, level: u64, m: &mut ArgMeasure) {
        let s = |n: &Node, m: &mut ArgMeasure| {
            let d = decode_str(n.contents(doc));
            m.string_bytes = m.string_bytes.max(d.len() as u64);
            m.string_chars = m.string_chars.max(d.chars().count() as u64);
        };
        match &n.kind {
            Kind::Scalar => {}
            Kind::Str => s(n, m),
            Kind::Arr(items) => {
                m.depth = m.depth.max(level);
                m.items = m.items.max(items.len() as u64);
                for it in items {
                    walk(doc, it, level + 1, m);
                }
            }
            Kind::Obj(mem) => {
                m.depth = m.depth.max(level);
                m.keys = m.keys.max(mem.len() as u64);
                for (k, v) in mem {
                    s(k, m);
                    walk(doc, v, level + 1, m);
                }
            }
        }
    }
    let mut m = ArgMeasure {
        bytes: args.span.len() as u64,
        ..ArgMeasure::default()
    };
    walk(doc, args, 1, &mut m);
    m
}

/// The line the guard target makes of `data`.
pub fn guard_line(data: &[u8]) -> Vec<u8> {
    let (cfg, body): (GuardCfg, _) = header(data);
    guard_doc(&cfg, body)
}

pub fn guard_one(data: &[u8]) {
    let (cfg, body): (GuardCfg, _) = header(data);
    let doc = guard_doc(&cfg, body);
    let caps = cfg.caps();
    let tool = cfg.tool();
    let n = (cfg.nsplits % 5) as usize;
    let points = split_points(doc.len(), &cfg.splits[..n]);
    let whole = run_guard(caps, cfg.inventory, tool, &[&doc]);
    let split = run_guard(caps, cfg.inventory, tool, &chunks(&doc, &points));
    // On a line that is not valid JSON the guard measures up to the first error,
    // and how much of the text before it was measured depends on the chunking
    // (the tokenizer reports the error before the span that precedes it in the
    // same chunk): verdicts are compared on valid lines only.
    if valid_up_to(&doc, DEFAULT_NESTING as usize) == Some(true) {
        assert_eq!(
            whole.early.is_some(),
            split.early.is_some(),
            "split at {points:?}: an early verdict in one run only ({:?} / {:?})",
            whole.early,
            split.early
        );
        assert_eq!(
            whole.verdict, split.verdict,
            "split at {points:?}: verdicts differ"
        );
        assert_eq!(
            whole.facts, split.facts,
            "split at {points:?}: facts differ"
        );
    }
    // As the proxy runs it: told that the line is not a call once the facts
    // say so, the guard reads the same facts without measuring the rest.
    let pieces = chunks(&doc, &points);
    let mut g = Guard::new(caps);
    let mut decided = false;
    for c in &pieces {
        let early = g.feed(c);
        let f = g.facts();
        if decided {
            assert!(early.is_none(), "a verdict after not_a_call: {early:?}");
        } else if f.first_call == Some(false) {
            g.not_a_call();
            decided = true;
        }
    }
    g.end_line();
    assert_facts(
        g.facts(),
        &pieces,
        &format!(" (split at {points:?}, once the guard was told the line is not a call)"),
    );
    check_guard(&doc, caps, tool, cfg.inventory, &whole);
    check_guard(&doc, caps, tool, cfg.inventory, &split);
    check_queries(&doc, tool, cfg.inventory, &whole.verdict);
    check_gate(&doc, caps, &points);
    if cfg.inventory {
        check_pages(&doc, &points);
    }
    // Lone surrogates read as U+FFFD (as the proxy reads them by default): on
    // a line the strict guard reads whole once each lone escape is written
    // `\ufffd`, the same verdicts, however the line is split.
    let lone = unpair(&doc);
    let mapped = lone_as_replacement(&lone);
    if valid_up_to(&mapped, DEFAULT_NESTING as usize) == Some(true) {
        let points = split_points(lone.len(), &cfg.splits[..n]);
        let run = |line: &[u8], points: &[usize], on: bool| {
            let mut g = Guard::new(caps);
            g.set_lone_surrogates(on);
            let mut early = false;
            for c in chunks(line, points) {
                early |= g.feed(c).is_some();
            }
            let verdict = g.finish(tool);
            (early, verdict, g.is_broken())
        };
        assert_eq!(
            run(&lone, &points, true),
            run(&mapped, &[], false),
            "lone surrogates at {points:?}: the guard differs"
        );
    }
}

/// The request gate over the line split at `points`, against the gate given
/// the line whole: on a valid line the same fate and reply; a line that goes
/// on goes byte for byte with its newline, and only if it is one valid message
/// (or blank); a call the guard refuses, and a batch or bare value, send
/// nothing at all.
pub fn check_gate(doc: &[u8], caps: ArgCaps, points: &[usize]) {
    if doc.contains(&b'\n') {
        return;
    }
    let mut whole = RequestGate::new(caps);
    let fate = whole.check(doc);
    let line = [doc, b"\n"].concat();
    let mut gate = RequestGate::new(caps);
    // Twice, so the second line runs on a gate that ended one.
    for round in 0..2 {
        let mut sent = Vec::new();
        for c in chunks(doc, points) {
            let _ = gate.feed(c, |b| sent.extend_from_slice(b));
        }
        let split = gate.end_line();
        let what = format!("split at {points:?}, round {round}");
        match &split {
            Fate::Forward { clamped } => {
                assert_eq!(*clamped, None, "{what}: clamped without an inventory");
                sent.extend_from_slice(gate.to_send());
                assert_eq!(sent, line, "{what}: forwarded other bytes");
                let first = framing::first_content(doc);
                let blank = first.is_none();
                assert!(
                    blank || first == Some(b'{'),
                    "{what}: forwarded a line that is not one object"
                );
                assert!(
                    blank
                        || serde_verdict(doc) == Serde::Valid
                        || serde_verdict(doc) == Serde::TooDeep,
                    "{what}: forwarded a line that is not valid JSON"
                );
            }
            Fate::Dropped { why, .. } => {
                if matches!(
                    why,
                    Why::Refused(_) | Why::NotOneMessage | Why::CapBeforeMethod
                ) {
                    assert!(
                        sent.is_empty(),
                        "{what}: {why:?} but {} bytes went on",
                        sent.len()
                    );
                }
                assert!(
                    sent.len() < doc.len() && doc.starts_with(&sent),
                    "{what}: what went on is not a part of the line"
                );
                let end: &[u8] = if sent.is_empty() { b"" } else { b"\n" };
                assert_eq!(gate.to_send(), end, "{what}: the end of a dropped line");
            }
        }
        if serde_verdict(doc) == Serde::Valid {
            assert_eq!(
                split, fate,
                "{what}: the gate decides otherwise than on the whole line"
            );
        } else {
            assert_eq!(
                matches!(split, Fate::Forward { .. }),
                matches!(fate, Fate::Forward { .. }),
                "{what}: forwarded in one run only ({split:?} / {fate:?})"
            );
        }
    }
    match &fate {
        Fate::Forward { .. } => assert_eq!(whole.to_send(), &line[..]),
        Fate::Dropped { .. } => assert!(whole.to_send().is_empty()),
    }
    if let Fate::Dropped { reply: Some(r), .. } = &fate {
        let v: Value = serde_json::from_slice(r).expect("the reply is JSON");
        assert!(r.ends_with(b"\n") && r.iter().filter(|&&b| b == b'\n').count() == 1);
        assert_eq!(v["jsonrpc"], "2.0", "the reply is JSON-RPC: {v}");
    }
}

/// The last member of an object whose key, decoded, is `key` (the one a
/// JSON reader keeps); a lone surrogate escape in a key reads as U+FFFD, as
/// the proxy reads it by default, rather than stopping the check.
fn last_decoded<'n>(n: &'n Node, doc: &[u8], key: &str) -> Option<&'n Node> {
    n.members()
        .unwrap_or(&[])
        .iter()
        .rev()
        .find(|(k, _)| decode_key(k, doc) == key)
        .map(|(_, v)| v)
}

/// A page-size argument as a server reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Page {
    /// No member, or `null`, a boolean, a container.
    Absent,
    /// A number, or a string that reads as one: its value, and how many
    /// significant digits its text has.
    Num(f64, usize),
    /// A string that does not read as a number.
    NotANumber,
}

impl Page {
    /// What no server may read as a page size of at most `max`: a value
    /// above it, or a string that reads as no number.
    pub fn breaks(self, max: f64) -> bool {
        matches!(self, Page::Num(v, _) if v > max) || self == Page::NotANumber
    }

    /// A value past 32 significant digits within a billionth of `max`: the
    /// guard keeps 32 digits and may round it otherwise, so it is not judged.
    pub fn undecided(self, max: f64) -> bool {
        matches!(self, Page::Num(v, d) if d > 32 && (v - max).abs() <= max * 1e-9)
    }
}

/// The oracle's reading of a page size: a number by Rust's float parser on
/// its text; a string, when its decoded text (at most 64 bytes) without
/// ASCII whitespace around it is, once underscores standing between two
/// digits are taken out, made of digits, signs, points and exponents that
/// Rust's float parser takes.
pub fn read_page(doc: &[u8], v: &Node) -> Page {
    let sig = |t: &str| {
        let mantissa = t.split(['e', 'E']).next().unwrap_or("");
        mantissa
            .bytes()
            .filter(u8::is_ascii_digit)
            .skip_while(|&b| b == b'0')
            .count()
    };
    match &v.kind {
        Kind::Scalar => {
            let t = String::from_utf8_lossy(v.raw(doc)).into_owned();
            if t.starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
                let x: f64 = t.parse().expect("a JSON number parses as f64");
                Page::Num(x, sig(&t))
            } else {
                Page::Absent
            }
        }
        Kind::Str => {
            let s = decode_str(v.contents(doc));
            if s.len() > 64 {
                return Page::NotANumber;
            }
            let t = s.trim_matches([' ', '\t', '\n', '\r', '\x0c']);
            let b = t.as_bytes();
            let underscores_ok = b.iter().enumerate().all(|(i, &c)| {
                c != b'_'
                    || (i > 0
                        && b.get(i - 1).is_some_and(u8::is_ascii_digit)
                        && b.get(i + 1).is_some_and(u8::is_ascii_digit))
            });
            let clean: String = t.chars().filter(|&c| c != '_').collect();
            let chars_ok = clean
                .bytes()
                .all(|c| c.is_ascii_digit() || b"+-.eE".contains(&c));
            match clean.parse::<f64>() {
                Ok(x) if underscores_ok && chars_ok => Page::Num(x, sig(&clean)),
                _ => Page::NotANumber,
            }
        }
        _ => Page::Absent,
    }
}

/// A `tools/call` line's page size as a server reads it (the last of each
/// member): the tool, what its page-size argument (named by `param_of`
/// the tool) gives. `None` if the line is not a call to a tool that has a page size.
pub fn call_page(
    line: &[u8],
    param_of: impl Fn(&str) -> Option<&'static str>,
) -> Option<(String, Page)> {
    let tree = parse(line);
    let method = last_decoded(&tree, line, "method");
    if !method.is_some_and(|m| m.is_str() && decode_str(m.contents(line)) == "tools/call") {
        return None;
    }
    let params = last_decoded(&tree, line, "params");
    let params = params.filter(|p| p.members().is_some())?;
    let name = last_decoded(params, line, "name");
    let name = name.filter(|n| n.is_str())?;
    let tool = decode_str(name.contents(line));
    let param = param_of(&tool)?;
    let args = last_decoded(params, line, "arguments");
    let page = match args.filter(|a| a.members().is_some()) {
        Some(a) => match last_decoded(a, line, param) {
            Some(v) => read_page(line, v),
            None => Page::Absent,
        },
        None => Page::Absent,
    };
    Some((tool, page))
}

/// `line` with the page size a server reads (`param` of the last
/// `arguments` of the last `params`, the last of each) rewritten to `max`:
/// a string as a string, every other byte as it was. `None` if the line has
/// no such member.
pub fn clamp_of(line: &[u8], param: &str, max: u64) -> Option<Vec<u8>> {
    clamp_into(line, line, param, max)
}

/// [`clamp_of`] with the member found in `read` (the line as a server reads
/// it, [`lone_as_replacement`]: the same length and spans) and the rewrite
/// made in `line`, whose other bytes are kept as they are.
fn clamp_into(read: &[u8], line: &[u8], param: &str, max: u64) -> Option<Vec<u8>> {
    let tree = parse(read);
    let params = last_decoded(&tree, read, "params")?;
    let args = last_decoded(params, read, "arguments")?;
    let v = last_decoded(args, read, param)?;
    let new = if v.is_str() {
        format!("\"{max}\"")
    } else {
        max.to_string()
    };
    Some(
        [
            line.get(..v.span.start).unwrap_or(&[]),
            new.as_bytes(),
            line.get(v.span.end..).unwrap_or(&[]),
        ]
        .concat(),
    )
}

/// The page-size contract with [`GUARD_INVENTORY`], against an oracle of its
/// own ([`page_rule`], [`read_page`]) on a valid line that a server reads as
/// a `tools/call`: the page size the server reads from what the gate sends
/// is never above the maximum, nor a string that reads as no number; a
/// clamp rewrites exactly the member the server reads, to the maximum (a
/// string as a string), and no other byte; and a refusal for the page size
/// is owed, however many `params` and `arguments` the line has (the guard
/// judges the last of each, as the server reads them).
/// The caps are the defaults: the target's own, drawn tiny, would refuse
/// nearly every line before its page size is judged.
pub fn check_pages(doc: &[u8], points: &[usize]) {
    if doc.contains(&b'\n') || serde_verdict(doc) != Serde::Valid {
        return;
    }
    let mut gate = RequestGate::new(ArgCaps::DEFAULT);
    gate.set_inventory(Some(guard_inventory().clone()));
    let mut sent = Vec::new();
    for c in chunks(doc, points) {
        let _ = gate.feed(c, |b| sent.extend_from_slice(b));
    }
    let fate = gate.end_line();
    sent.extend_from_slice(gate.to_send());
    let what = format!("split at {points:?}: {fate:?}, line {}", show(doc));
    let server_page = |line: &[u8]| call_page(line, |t| page_rule(t).map(|r| r.0));
    let Some((tool, page)) = server_page(doc) else {
        return;
    };
    let Some((param, max, clamp)) = page_rule(&tool) else {
        return;
    };
    if page.undecided(max) {
        return;
    }
    let above = matches!(page, Page::Num(v, _) if v > max);
    match &fate {
        Fate::Forward { clamped } => {
            let body = sent.strip_suffix(b"\n").unwrap_or(&sent);
            let after = server_page(body).map(|(_, p)| p);
            assert!(
                !after.is_some_and(|p| p.breaks(max)),
                "{what}: {param} {after:?} reached the server for {tool} (at most {max})"
            );
            match clamped {
                None => assert_eq!(body, doc, "{what}: forwarded other bytes"),
                Some(m) => {
                    assert!(
                        clamp && above,
                        "{what}: clamped a page size that was {page:?}"
                    );
                    assert_eq!(*m as f64, max, "{what}: clamped to another value");
                    // Exactly the member the server reads, rewritten.
                    let want = clamp_of(doc, param, *m).expect("the page size");
                    assert_eq!(
                        show(body),
                        show(&want),
                        "{what}: the clamp changed other bytes"
                    );
                }
            }
        }
        Fate::Dropped {
            why:
                Why::Refused(GuardVerdict::LimitTooHigh {
                    param: p, max: m, ..
                }),
            ..
        } => {
            assert!(
                above && !clamp && p == param && *m as f64 == max,
                "{what}: refused {p} above {m}, but {param} is {page:?} (at most {max}, clamp {clamp})"
            );
        }
        Fate::Dropped {
            why: Why::Refused(GuardVerdict::LimitNotANumber { param: p, .. }),
            ..
        } => {
            assert!(
                page == Page::NotANumber && p == param,
                "{what}: refused {p} as not a number, but {param} is {page:?}"
            );
        }
        _ => {}
    }
}

pub fn check_guard(doc: &[u8], base: ArgCaps, tool: &str, inventory: bool, run: &GuardRun) {
    // The caps owed a valid line (on another, those of the names read
    // before it broke, which the oracle does not know): the loosest of every
    // tool bounds them.
    let valid = valid_up_to(doc, DEFAULT_NESTING as usize) == Some(true);
    let caps = if valid {
        caps_owed(
            doc,
            tool,
            |t| if inventory { row_caps(t, base) } else { base },
        )
    } else if inventory {
        ["events", "dir", "find"]
            .iter()
            .fold(base, |c, t| caps_each(c, row_caps(t, base), u64::max))
    } else {
        base
    };
    if let Some(GuardVerdict::Cap { size, limit, .. }) = &run.early {
        assert!(
            size > limit,
            "early verdict within its cap: {:?}",
            run.early
        );
    }
    if run.early.is_some() {
        assert!(
            matches!(run.verdict, Some(GuardVerdict::Cap { .. })),
            "an early verdict but no cap verdict at the end: {:?}",
            run.verdict
        );
    }
    let request = doc.len() as u64;
    match &run.verdict {
        None => assert!(
            request <= caps.max_request_bytes,
            "request over its cap passed"
        ),
        Some(GuardVerdict::Cap {
            cap, size, limit, ..
        }) => {
            assert!(size > limit, "verdict within its cap: {:?}", run.verdict);
            if *cap == "max_request_bytes" {
                assert_eq!(*size, request, "request size");
            }
            if valid {
                assert_eq!(
                    Some(*limit),
                    cap_named(&caps, cap),
                    "{cap}: the verdict's limit is not the cap owed ({caps:?})"
                );
            }
        }
        Some(_) => {}
    }
    // Caps only tighten as a line streams: an early refusal's cap is at least
    // the one owed at the end.
    if let (true, Some(GuardVerdict::Cap { cap, limit, .. })) = (valid, &run.early) {
        assert!(
            cap_named(&caps, cap).is_some_and(|owed| *limit >= owed),
            "early {cap} {limit}, below the cap owed ({caps:?})"
        );
    }
    // Recompute the measures where a server would read the arguments: the last
    // `params` member of the message, and the last `arguments` in it.
    if !valid {
        return;
    }
    let tree = parse(doc);
    let Some(args) = tree
        .get_last(doc, b"params")
        .and_then(|p| p.get_last(doc, b"arguments"))
    else {
        return;
    };
    if !matches!(args.kind, Kind::Arr(_) | Kind::Obj(_)) {
        return;
    }
    let pairs = measure(doc, args).against(&caps);
    let single = tree.get_all(doc, b"params").len() == 1
        && tree
            .get_last(doc, b"params")
            .is_some_and(|p| p.get_all(doc, b"arguments").len() == 1);
    match &run.verdict {
        Some(GuardVerdict::Cap { cap, size, .. }) => {
            if single {
                if let Some((_, v, _)) = pairs.iter().find(|(n, _, _)| n == cap) {
                    assert_eq!(
                        size, v,
                        "{cap}: the guard measured {size}, the arguments have {v}"
                    );
                }
            }
        }
        _ => {
            for (name, v, c) in pairs {
                assert!(
                    v <= c,
                    "no verdict, but {name} is broken: {v} > {c} (arguments {:?})",
                    show(args.raw(doc))
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Replay helpers
// ---------------------------------------------------------------------------

/// The targets, by directory name under `fuzz/regressions/` and `fuzz/corpus/`.
pub const TARGETS: &[&str] = &["tokenizer", "budget", "mcp", "guard", "proxy"];

/// Run one input through a target's checks (panics on a broken invariant).
pub fn run_target(target: &str, data: &[u8]) {
    match target {
        "tokenizer" => tokenizer_one(data),
        "budget" => budget_one(data),
        "mcp" => mcp_one(data),
        "guard" => guard_one(data),
        "proxy" => proxy_one(data),
        _ => panic!("unknown fuzz target {target:?}"),
    }
}

/// `b` as text with long runs of one character shortened to `c×N`.
pub fn squash(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let mut out = String::new();
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        let mut n = 1;
        while it.peek() == Some(&c) {
            it.next();
            n += 1;
        }
        if n > 8 {
            out.push_str(&format!("{c}×{n}"));
        } else {
            for _ in 0..n {
                out.push(c);
            }
        }
    }
    out
}

/// The document an input stands for (the body itself for `tokenizer`).
pub fn document(target: &str, data: &[u8]) -> Vec<u8> {
    match target {
        "budget" => {
            let (cfg, body): (BudgetCfg, _) = header(data);
            budget_doc(&cfg, body)
        }
        "mcp" => {
            let (cfg, body): (McpCfg, _) = header(data);
            mcp_doc(&cfg, body)
        }
        "guard" => {
            let (cfg, body): (GuardCfg, _) = header(data);
            guard_doc(&cfg, body)
        }
        _ => data.to_vec(),
    }
}

/// What an input stands for: its config and document, for a failure report.
pub fn describe(target: &str, data: &[u8]) -> String {
    match target {
        "budget" => {
            let (cfg, body): (BudgetCfg, _) = header(data);
            let doc = budget_doc(&cfg, body);
            format!(
                "{cfg:?}\nlimits: {:?}\ndocument: {}",
                cfg.limits(),
                squash(&doc)
            )
        }
        "mcp" => {
            let (cfg, body): (McpCfg, _) = header(data);
            let doc = mcp_doc(&cfg, body);
            let out = run_mcp(cfg.limits(), &cfg.treat(), &[&doc]);
            format!(
                "{cfg:?}\nlimits: {:?}\ntreat: {:?}\ndocument: {}\noutput: {}\nrecord: {:?}",
                cfg.limits(),
                cfg.treat(),
                squash(&doc),
                squash(&out.out),
                out.res.as_ref().map(|r| squash(&r.to_json()))
            )
        }
        "guard" => {
            let (cfg, body): (GuardCfg, _) = header(data);
            let doc = guard_doc(&cfg, body);
            format!("{cfg:?}\ncaps: {:?}\nline: {}", cfg.caps(), squash(&doc))
        }
        _ => format!("document: {}", squash(data)),
    }
}
