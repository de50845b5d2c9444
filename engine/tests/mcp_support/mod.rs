//! Shared helpers for the MCP projection tests: running a [`Projector`] over
//! chunked input, a raw-span JSON tree (so sizes and byte-for-byte copies can be
//! checked exactly), a bounds checker for every limit of
//! `specs/mcp-result-contract.md`, and a diff oracle that derives the exact
//! truncation record (cut sites, counts, RFC 6901 pointers) from the original
//! result and the projected one.
#![allow(dead_code)]

use resultbudget::mcp::{
    typed_error_text, CallInfo, McpLimits, Projector, Treat, RECEIPT_KEY, RECORD_KEY,
};
use std::fmt::Write as _;

// ---------------------------------------------------------------------------
// Running the projector
// ---------------------------------------------------------------------------

/// The truncation record as parsed from JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    pub truncated: bool,
    pub budget_kind: Option<String>,
    pub omitted_count: u64,
    pub omitted_paths: Vec<String>,
    pub unlisted: u64,
    /// Only in the record embedded in the output.
    pub original_bytes: Option<u64>,
}

impl Rec {
    pub fn from_json(v: &serde_json::Value) -> Rec {
        let o = v.as_object().expect("record is an object");
        let num = |k: &str| -> u64 {
            o.get(k)
                .unwrap_or_else(|| panic!("record lacks {k}: {v}"))
                .to_string()
                .parse()
                .unwrap_or_else(|_| panic!("record field {k} is not a u64: {v}"))
        };
        Rec {
            truncated: o
                .get("truncated")
                .and_then(|t| t.as_bool())
                .expect("truncated"),
            budget_kind: match o.get("budget_kind") {
                Some(serde_json::Value::Null) => None,
                Some(serde_json::Value::String(s)) => Some(s.clone()),
                other => panic!("bad budget_kind {other:?}"),
            },
            omitted_count: num("omitted_count"),
            omitted_paths: o
                .get("omitted_paths")
                .and_then(|p| p.as_array())
                .expect("omitted_paths")
                .iter()
                .map(|p| p.as_str().expect("path is a string").to_string())
                .collect(),
            unlisted: num("omitted_paths_unlisted"),
            original_bytes: o.get("original_bytes").map(|_| num("original_bytes")),
        }
    }

    pub fn from_bytes(b: &[u8]) -> Rec {
        Rec::from_json(&serde_json::from_slice(b).expect("record JSON"))
    }
}

/// What one message produced.
#[derive(Clone)]
pub struct Run {
    pub out: Vec<u8>,
    pub rec: Rec,
    pub rec_json: Vec<u8>,
    pub original_bytes: u64,
    pub typed_failed: bool,
    pub id: Option<Vec<u8>>,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let o = &self.out[..self.out.len().min(4000)];
        write!(
            f,
            "Run {{ out: {}, rec: {}, original_bytes: {}, typed_failed: {}, id: {:?} }}",
            String::from_utf8_lossy(o),
            String::from_utf8_lossy(&self.rec_json),
            self.original_bytes,
            self.typed_failed,
            self.id
                .as_ref()
                .map(|i| String::from_utf8_lossy(i).into_owned())
        )
    }
}

impl PartialEq for Run {
    fn eq(&self, o: &Run) -> bool {
        self.out == o.out
            && self.rec_json == o.rec_json
            && self.original_bytes == o.original_bytes
            && self.typed_failed == o.typed_failed
            && self.id == o.id
    }
}

pub fn projector(lim: McpLimits) -> Projector {
    Projector::new(lim).expect("limits accepted")
}

/// Feed `input` split at the given (increasing) cut positions.
pub fn run_split_with(p: &mut Projector, treat: Treat, input: &[u8], cuts: &[usize]) -> Run {
    p.begin(treat);
    let mut out = Vec::new();
    let mut last = 0;
    for &c in cuts.iter().chain(std::iter::once(&input.len())) {
        let c = c.clamp(last, input.len());
        p.feed(&input[last..c], &mut out)
            .unwrap_or_else(|e| panic!("feed failed: {e}"));
        last = c;
    }
    let rec_json = p.finish(&mut out).expect("finish").to_json();
    Run {
        rec: Rec::from_bytes(&rec_json),
        rec_json,
        out,
        original_bytes: p.original_bytes(),
        typed_failed: p.typed_failed(),
        id: p.id().map(|i| i.to_vec()),
    }
}

/// Feed `input` in chunks of `chunk` bytes.
pub fn run_with(p: &mut Projector, treat: Treat, input: &[u8], chunk: usize) -> Run {
    let cuts: Vec<usize> = (1..)
        .map(|k| k * chunk)
        .take_while(|&c| c < input.len())
        .collect();
    run_split_with(p, treat, input, &cuts)
}

pub fn run(lim: McpLimits, treat: Treat, input: &[u8], chunk: usize) -> Run {
    run_with(&mut projector(lim), treat, input, chunk)
}

/// 64 KiB, the chunk size of the CLI and of large inputs in these tests.
pub const BIG_CHUNK: usize = 64 * 1024;

pub fn tool() -> Treat {
    Treat::ToolResult(CallInfo::default())
}

pub fn typed(tool: &str, read_only: bool, request_id: Option<&str>) -> Treat {
    Treat::ToolResult(CallInfo {
        tool: Some(tool.to_string()),
        typed: true,
        read_only,
        request_id: request_id.map(|s| s.as_bytes().to_vec()),
        ..CallInfo::default()
    })
}

/// `{"jsonrpc":"2.0","id":ID,"result":RESULT}`.
pub fn envelope(result: &[u8], id: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(result.len() + 40);
    v.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    v.extend_from_slice(id.to_string().as_bytes());
    v.extend_from_slice(b",\"result\":");
    v.extend_from_slice(result);
    v.push(b'}');
    v
}

/// A tiny deterministic PRNG (xorshift64*), so tests need no extra crate.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// Random increasing cut positions (sizes from 1 byte to `max_chunk`).
pub fn random_cuts(rng: &mut Rng, len: usize, max_chunk: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut p = 0usize;
    loop {
        // Mix tiny and large chunks.
        let n = if rng.below(4) == 0 {
            1 + rng.below(8) as usize
        } else {
            1 + rng.below(max_chunk as u64) as usize
        };
        p += n;
        if p >= len {
            return v;
        }
        v.push(p);
    }
}

pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Run `f` on a thread with a large stack (deep documents recurse).
pub fn big_stack<F: FnOnce() + Send + 'static>(f: F) {
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(f)
        .expect("spawn")
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));
}

// ---------------------------------------------------------------------------
// A JSON tree that remembers the raw byte span of every value
// ---------------------------------------------------------------------------

#[derive(Debug)]
pub enum J {
    Obj(Vec<(String, Node)>),
    Arr(Vec<Node>),
    Str(String),
    Num,
    Lit,
}

#[derive(Debug)]
pub struct Node {
    pub start: usize,
    pub end: usize,
    /// For an object member: the raw span of its key (with quotes).
    pub v: J,
}

impl Node {
    pub fn raw<'a>(&self, doc: &'a [u8]) -> &'a [u8] {
        &doc[self.start..self.end]
    }
    /// The raw bytes between the quotes of a string.
    pub fn str_inner<'a>(&self, doc: &'a [u8]) -> &'a [u8] {
        &doc[self.start + 1..self.end - 1]
    }
    pub fn len(&self) -> usize {
        self.end - self.start
    }
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.v {
            J::Obj(m) => m.iter().find(|(k, _)| k == key).map(|(_, n)| n),
            _ => None,
        }
    }
    pub fn count_key(&self, key: &str) -> usize {
        match &self.v {
            J::Obj(m) => m.iter().filter(|(k, _)| k == key).count(),
            _ => 0,
        }
    }
    pub fn members(&self) -> &[(String, Node)] {
        match &self.v {
            J::Obj(m) => m,
            _ => &[],
        }
    }
    pub fn items(&self) -> &[Node] {
        match &self.v {
            J::Arr(a) => a,
            _ => &[],
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match &self.v {
            J::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn is_obj(&self) -> bool {
        matches!(self.v, J::Obj(_))
    }
    pub fn is_arr(&self) -> bool {
        matches!(self.v, J::Arr(_))
    }
    pub fn is_str(&self) -> bool {
        matches!(self.v, J::Str(_))
    }
}

struct P<'a> {
    b: &'a [u8],
    i: usize,
}

impl P<'_> {
    fn ws(&mut self) {
        while matches!(self.b.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }
    fn err<T>(&self, m: &str) -> Result<T, String> {
        Err(format!("{m} at byte {}", self.i))
    }
    fn string(&mut self) -> Result<(usize, String), String> {
        let s = self.i;
        if self.b.get(self.i) != Some(&b'"') {
            return self.err("expected string");
        }
        self.i += 1;
        loop {
            match memchr_any(&self.b[self.i..]) {
                None => return self.err("unterminated string"),
                Some(k) => {
                    self.i += k;
                    if self.b[self.i] == b'\\' {
                        self.i += 2;
                    } else {
                        self.i += 1;
                        break;
                    }
                }
            }
        }
        let dec: String = serde_json::from_slice(&self.b[s..self.i])
            .map_err(|e| format!("bad string at byte {s}: {e}"))?;
        Ok((s, dec))
    }
    fn value(&mut self) -> Result<Node, String> {
        self.ws();
        let start = self.i;
        let v = match self.b.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut m = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b'}') {
                    self.i += 1;
                } else {
                    loop {
                        self.ws();
                        let (_, k) = self.string()?;
                        self.ws();
                        if self.b.get(self.i) != Some(&b':') {
                            return self.err("expected ':'");
                        }
                        self.i += 1;
                        let v = self.value()?;
                        m.push((k, v));
                        self.ws();
                        match self.b.get(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b'}') => {
                                self.i += 1;
                                break;
                            }
                            _ => return self.err("expected ',' or '}'"),
                        }
                    }
                }
                J::Obj(m)
            }
            Some(b'[') => {
                self.i += 1;
                let mut a = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b']') {
                    self.i += 1;
                } else {
                    loop {
                        a.push(self.value()?);
                        self.ws();
                        match self.b.get(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b']') => {
                                self.i += 1;
                                break;
                            }
                            _ => return self.err("expected ',' or ']'"),
                        }
                    }
                }
                J::Arr(a)
            }
            Some(b'"') => J::Str(self.string()?.1),
            Some(b't') | Some(b'f') | Some(b'n') => {
                let rest = &self.b[self.i..];
                let n = if rest.starts_with(b"true") || rest.starts_with(b"null") {
                    4
                } else if rest.starts_with(b"false") {
                    5
                } else {
                    return self.err("bad literal");
                };
                self.i += n;
                J::Lit
            }
            Some(b'-' | b'0'..=b'9') => {
                while matches!(
                    self.b.get(self.i),
                    Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                ) {
                    self.i += 1;
                }
                let t = std::str::from_utf8(&self.b[start..self.i]).unwrap_or("");
                if !valid_number(t) {
                    return self.err("bad number");
                }
                J::Num
            }
            _ => return self.err("expected a value"),
        };
        Ok(Node {
            start,
            end: self.i,
            v,
        })
    }
}

fn memchr_any(s: &[u8]) -> Option<usize> {
    s.iter().position(|&c| c == b'"' || c == b'\\')
}

/// RFC 8259 number grammar.
pub fn valid_number(t: &str) -> bool {
    let b = t.as_bytes();
    let mut i = 0;
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            while matches!(b.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
        }
        _ => return false,
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        let s = i;
        while matches!(b.get(i), Some(b'0'..=b'9')) {
            i += 1;
        }
        if i == s {
            return false;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let s = i;
        while matches!(b.get(i), Some(b'0'..=b'9')) {
            i += 1;
        }
        if i == s {
            return false;
        }
    }
    i == b.len()
}

/// Parse one complete JSON text (strict enough for these tests: structure,
/// strings via serde_json, number grammar, nothing after the value).
pub fn parse(b: &[u8]) -> Result<Node, String> {
    let mut p = P { b, i: 0 };
    let n = p.value()?;
    p.ws();
    if p.i != b.len() {
        return p.err("trailing data");
    }
    Ok(n)
}

/// Parse and also demand that serde_json agrees that the text is valid JSON
/// (when it is shallow enough for serde_json's recursion limit).
pub fn parse_valid(b: &[u8]) -> Node {
    let n = parse(b).unwrap_or_else(|e| {
        panic!(
            "output is not valid JSON: {e}\n{}",
            String::from_utf8_lossy(&b[..b.len().min(2000)])
        )
    });
    if depth(&n) < 120 {
        if let Err(e) = serde_json::from_slice::<serde_json::Value>(b) {
            panic!("serde_json rejects the output: {e}");
        }
    }
    n
}

pub fn depth(n: &Node) -> usize {
    match &n.v {
        J::Obj(m) => 1 + m.iter().map(|(_, v)| depth(v)).max().unwrap_or(0),
        J::Arr(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

// ---------------------------------------------------------------------------
// RFC 6901 pointers
// ---------------------------------------------------------------------------

pub fn ptr_key(base: &str, key: &str) -> String {
    let mut s = String::with_capacity(base.len() + key.len() + 1);
    s.push_str(base);
    s.push('/');
    for c in key.chars() {
        match c {
            '~' => s.push_str("~0"),
            '/' => s.push_str("~1"),
            c => s.push(c),
        }
    }
    s
}

pub fn ptr_idx(base: &str, i: usize) -> String {
    format!("{base}/{i}")
}

/// Whether the engine can list this pointer: its JSON-encoded form is at most
/// 256 bytes and every key on it at most 128 decoded bytes.
pub fn listable(path: &str, keys_ok: bool) -> bool {
    let enc = serde_json::to_string(path).unwrap_or_default();
    keys_ok && enc.len() - 2 <= 256
}

// ---------------------------------------------------------------------------
// The text marker
// ---------------------------------------------------------------------------

pub const MARKER_PREFIX: &str = "\n[resultbudget: output cut, ";

pub fn marker(omitted: u64, total: u64) -> String {
    format!("\n[resultbudget: output cut, {omitted} of {total} bytes omitted]")
}

/// Split a cut text into (kept prefix, omitted, total) if it ends with a marker.
pub fn split_marker(s: &str) -> Option<(&str, u64, u64)> {
    let at = s.rfind(MARKER_PREFIX)?;
    let tail = s[at + MARKER_PREFIX.len()..].strip_suffix(" bytes omitted]")?;
    let (a, b) = tail.split_once(" of ")?;
    Some((&s[..at], a.parse().ok()?, b.parse().ok()?))
}

// ---------------------------------------------------------------------------
// Bounds
// ---------------------------------------------------------------------------

const RESULT_FIELDS: [&str; 8] = [
    "content",
    "structuredContent",
    "isError",
    "_meta",
    "resultType",
    "inputRequests",
    "requestState",
    "task",
];

/// Check the generic limits on a free-form value at `level` (1 = the value itself).
fn free_bounds(n: &Node, level: u32, lim: &McpLimits, path: &str, errs: &mut Vec<String>) {
    match &n.v {
        J::Obj(m) => {
            if level > lim.max_depth && !m.is_empty() {
                errs.push(format!("{path}: object deeper than max_depth is not empty"));
            }
            if m.len() as u64 > lim.max_map_keys {
                errs.push(format!("{path}: {} members > max_map_keys", m.len()));
            }
            for (k, v) in m {
                free_bounds(v, level + 1, lim, &ptr_key(path, k), errs);
            }
        }
        J::Arr(a) => {
            if level > lim.max_depth && !a.is_empty() {
                errs.push(format!("{path}: array deeper than max_depth is not empty"));
            }
            if a.len() as u64 > lim.max_list_items {
                errs.push(format!("{path}: {} items > max_list_items", a.len()));
            }
            for (i, v) in a.iter().enumerate() {
                free_bounds(v, level + 1, lim, &ptr_idx(path, i), errs);
            }
        }
        J::Str(s) if s.len() as u64 > lim.max_string_bytes => {
            errs.push(format!(
                "{path}: string of {} bytes > max_string_bytes",
                s.len()
            ));
        }
        _ => {}
    }
}

/// Every bound of the contract on a projected `result` (`out` is the output
/// document, `r` its `result` node). Returns the violations.
pub fn result_bounds(lim: &McpLimits, out: &[u8], r: &Node) -> Vec<String> {
    let mut errs = Vec::new();
    if r.len() as u64 > lim.max_result_bytes {
        errs.push(format!(
            "result is {} bytes > max_result_bytes {}",
            r.len(),
            lim.max_result_bytes
        ));
    }
    let J::Obj(m) = &r.v else {
        return errs;
    };
    for (k, _) in m {
        if !RESULT_FIELDS.contains(&k.as_str()) {
            errs.push(format!("non-standard field {k:?} survived"));
        }
    }
    if r.count_key("_meta") > 1 {
        errs.push("more than one _meta".into());
    }
    let mut text_total = 0u64;
    if let Some(c) = r.get("content") {
        if let J::Arr(blocks) = &c.v {
            if blocks.len() as u64 > lim.max_content_blocks {
                errs.push(format!(
                    "{} content blocks > max_content_blocks",
                    blocks.len()
                ));
            }
            for (i, b) in blocks.iter().enumerate() {
                let bp = ptr_idx("/content", i);
                for (k, v) in b.members() {
                    match (k.as_str(), &v.v) {
                        ("text", J::Str(s)) => {
                            text_total += s.len() as u64;
                            if s.len() as u64 > lim.max_text_block_bytes {
                                errs.push(format!("{bp}/text: {} > max_text_block_bytes", s.len()));
                            }
                        }
                        ("data", J::Str(_)) => {}
                        ("resource", J::Obj(rm)) => {
                            for (rk, rv) in rm {
                                match (rk.as_str(), &rv.v) {
                                    ("text", J::Str(s)) => {
                                        text_total += s.len() as u64;
                                        if s.len() as u64 > lim.max_text_block_bytes {
                                            errs.push(format!(
                                                "{bp}/resource/text: {} > max_text_block_bytes",
                                                s.len()
                                            ));
                                        }
                                    }
                                    ("blob", J::Str(_)) => {}
                                    // Identifiers are kept whole, never cut.
                                    ("uri" | "mimeType", J::Str(_)) => {}
                                    _ => free_bounds(rv, 1, lim, &ptr_key(&bp, rk), &mut errs),
                                }
                            }
                        }
                        // The discriminator and identifiers are not free-form text.
                        ("type" | "uri" | "name" | "mimeType", J::Str(_)) => {}
                        _ => free_bounds(v, 1, lim, &ptr_key(&bp, k), &mut errs),
                    }
                }
            }
        } else {
            free_bounds(c, 1, lim, "/content", &mut errs);
        }
    }
    if text_total > lim.max_text_bytes {
        errs.push(format!("texts total {text_total} > max_text_bytes"));
    }
    if let Some(sc) = r.get("structuredContent") {
        if sc.len() as u64 > lim.max_structured_bytes {
            errs.push(format!(
                "structuredContent is {} bytes > max_structured_bytes {}",
                sc.len(),
                lim.max_structured_bytes
            ));
        }
        free_bounds(sc, 1, lim, "/structuredContent", &mut errs);
    }
    for k in [
        "isError",
        "resultType",
        "inputRequests",
        "requestState",
        "task",
    ] {
        if let Some(v) = r.get(k) {
            free_bounds(v, 1, lim, &ptr_key("", k), &mut errs);
        }
    }
    if let Some(meta) = r.get("_meta") {
        for (k, v) in meta.members() {
            if k != RECORD_KEY && k != RECEIPT_KEY {
                free_bounds(v, 1, lim, &ptr_key("/_meta", k), &mut errs);
            }
        }
    }
    let _ = out;
    errs
}

// ---------------------------------------------------------------------------
// The diff oracle: the cut sites implied by (original, projected)
// ---------------------------------------------------------------------------

/// One cut site, as the record must list it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    pub path: String,
    pub count: u64,
    /// Kinds this site may be recorded with.
    pub kinds: Vec<&'static str>,
    /// Every key on the pointer is at most 128 decoded bytes.
    pub keys_ok: bool,
}

struct Diff<'a> {
    lim: McpLimits,
    ib: &'a [u8],
    ob: &'a [u8],
    sites: Vec<Site>,
    errs: Vec<String>,
    text_left: u64,
    keys_ok: bool,
    /// The output's last `isError` is the one the contract moves to the end
    /// ("Small fields are never lost"): left out of the in-order walk.
    moved_is_error: bool,
    /// The output ends with the boolean `isError` the input ends with: then a
    /// boolean `isError` that is not in the output was held back, not cut.
    verdict_kept: bool,
    /// How to read input `_meta` members missing at the end of the output's
    /// `_meta` (see `check_message`).
    meta: MetaReading,
}

/// Input `_meta` members missing at the end of the output's `_meta` are one
/// cut site by the prefix rule, or each its own site (each value dropped
/// alone, when its key fitted), or, when the output's `_meta` holds only the
/// record, the input's `_meta` was dropped whole and the record brought its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaReading {
    Prefix,
    Alone,
    Whole,
}

const BYTES_KINDS: [&str; 2] = ["result_bytes", "structured_bytes"];

impl Diff<'_> {
    fn site(&mut self, path: String, count: u64, kinds: &[&'static str]) {
        if count > 0 {
            self.sites.push(Site {
                path,
                count,
                kinds: kinds.to_vec(),
                keys_ok: self.keys_ok,
            });
        }
    }

    fn with_key<R>(&mut self, key: &str, f: impl FnOnce(&mut Self) -> R) -> R {
        let saved = self.keys_ok;
        if key.len() > 128 {
            self.keys_ok = false;
        }
        let r = f(self);
        self.keys_ok = saved;
        r
    }

    fn key_site(&mut self, path: String, key: &str, count: u64, kinds: &[&'static str]) {
        self.with_key(key, |d| d.site(path, count, kinds));
    }

    fn result(&mut self, o: &Node, u: &Node) {
        let (J::Obj(om), J::Obj(um)) = (&o.v, &u.v) else {
            // Not an object: a free-form value.
            self.free(o, u, "", 1);
            return;
        };
        // Without the moved `isError`, if there is one.
        let moved = if self.moved_is_error {
            um.iter().rposition(|(k, _)| k == "isError")
        } else {
            None
        };
        let um: Vec<&(String, Node)> = um
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != moved)
            .map(|(_, m)| m)
            .collect();
        let mut j = 0;
        let mut meta_seen = false;
        for (k, ov) in om {
            let p = ptr_key("", k);
            if !RESULT_FIELDS.contains(&k.as_str()) {
                self.key_site(p, k, 1, &["nonstandard_field"]);
                continue;
            }
            if k == "_meta" && !ov.is_obj() {
                self.key_site(p, k, 1, &["nonstandard_field"]);
                continue;
            }
            if let Some((uk, uv)) = um.get(j) {
                if uk == k {
                    j += 1;
                    match k.as_str() {
                        "content" => self.content(ov, uv),
                        "_meta" => {
                            meta_seen = true;
                            let record_only = uv.members().iter().all(|(k, _)| k == RECORD_KEY);
                            if self.meta == MetaReading::Whole
                                && record_only
                                && !ov.members().is_empty()
                            {
                                self.key_site(p, k, 1, &BYTES_KINDS);
                            } else {
                                self.meta(ov, uv)
                            }
                        }
                        _ => self.with_key(k, |d| d.free(ov, uv, &p, 1)),
                    }
                    continue;
                }
            }
            if k == "isError" && self.verdict_kept && matches!(ov.raw(self.ib), b"true" | b"false")
            {
                continue;
            }
            // Not even its smallest form fitted. Small fields are never lost:
            // room is kept for `,"isError":false` and a short `resultType`.
            let small = match k.as_str() {
                "isError" => matches!(ov.v, J::Lit),
                "resultType" => ov.as_str().is_some_and(|t| ov.len() <= 34 && t.len() <= 32),
                _ => false,
            };
            if small {
                self.errs.push(format!("small field {k} was lost"));
            }
            self.key_site(p, k, 1, &BYTES_KINDS);
        }
        for (uk, uv) in &um[j..] {
            if uk == "_meta" && !meta_seen && uv.members().iter().all(|(k, _)| k == RECORD_KEY) {
                meta_seen = true;
                continue;
            }
            self.errs
                .push(format!("result member {uk:?} not matched to the original"));
        }
    }

    fn meta(&mut self, o: &Node, u: &Node) {
        let um: Vec<&(String, Node)> = u
            .members()
            .iter()
            .filter(|(k, _)| k != RECORD_KEY)
            .collect();
        if let Some(pos) = u.members().iter().position(|(k, _)| k == RECORD_KEY) {
            if pos + 1 != u.members().len() {
                self.errs
                    .push("the record is not the last member of _meta".into());
            }
        }
        let om = o.members();
        let mut j = 0;
        let mut i = 0;
        while i < om.len() {
            let (k, ov) = &om[i];
            let p = ptr_key("/_meta", k);
            if k == RECORD_KEY {
                self.key_site(p, k, 1, &["nonstandard_field"]);
                i += 1;
                continue;
            }
            match um.get(j) {
                Some((uk, uv)) if uk == k => {
                    self.with_key(k, |d| d.free(ov, uv, &p, 1));
                    j += 1;
                }
                Some(_) => {
                    // Omitted alone (its value did not fit at all).
                    self.key_site(p, k, 1, &BYTES_KINDS);
                }
                None if self.meta == MetaReading::Alone => {
                    // Each value dropped alone, its key having fitted.
                    self.key_site(p, k, 1, &BYTES_KINDS);
                }
                None => {
                    // This member and every later one.
                    self.key_site(p, k, (om.len() - i) as u64, &BYTES_KINDS);
                    break;
                }
            }
            i += 1;
        }
        if j != um.len() {
            self.errs
                .push("_meta holds members not in the original".into());
        }
    }

    fn content(&mut self, o: &Node, u: &Node) {
        let (J::Arr(ob), J::Arr(ub)) = (&o.v, &u.v) else {
            self.free(o, u, "/content", 1);
            return;
        };
        let mut j = 0;
        for (i, blk) in ob.iter().enumerate() {
            let p = ptr_idx("/content", i);
            if let Some(ublk) = ub.get(j) {
                if self.compatible(blk, ublk) {
                    self.block(blk, ublk, &p);
                    j += 1;
                    continue;
                }
            }
            if j == ub.len() && ub.len() as u64 >= self.lim.max_content_blocks {
                self.site(p, (ob.len() - i) as u64, &["content_blocks"]);
                return;
            }
            let has_blob = blk.get("data").is_some_and(|d| d.is_str())
                || blk
                    .get("resource")
                    .and_then(|r| r.get("blob"))
                    .is_some_and(|d| d.is_str());
            let kinds: &[&'static str] = if has_blob {
                &["blob", "result_bytes"]
            } else {
                &["result_bytes", "structured_bytes"]
            };
            self.site(p, 1, kinds);
        }
        if j != ub.len() {
            self.errs
                .push("content holds blocks not in the original".into());
        }
    }

    fn compatible(&self, o: &Node, u: &Node) -> bool {
        match (&o.v, &u.v) {
            (J::Obj(om), J::Obj(um)) => {
                om.len() == um.len()
                    && om.iter().zip(um).all(|((a, av), (b, bv))| {
                        a == b
                            && match a.as_str() {
                                "data" => !av.is_str() || av.raw(self.ib) == bv.raw(self.ob),
                                _ => true,
                            }
                    })
            }
            (J::Obj(_), _) | (_, J::Obj(_)) => false,
            _ => true,
        }
    }

    fn block(&mut self, o: &Node, u: &Node, p: &str) {
        if !o.is_obj() {
            self.free(o, u, p, 1);
            return;
        }
        for ((k, ov), (_, uv)) in o.members().iter().zip(u.members()) {
            let kp = ptr_key(p, k);
            if k == "type" && ov.raw(self.ib) != uv.raw(self.ob) {
                // The discriminator is not free-form text: cutting it turns the
                // block into another kind of block.
                self.errs.push(format!(
                    "{kp}: block type changed from {} to {}",
                    String::from_utf8_lossy(ov.raw(self.ib)),
                    String::from_utf8_lossy(uv.raw(self.ob))
                ));
            }
            match (k.as_str(), ov.is_str()) {
                ("text", true) => self.text(ov, uv, &kp),
                ("data", true) => self.same(ov, uv, &kp),
                // Kept whole (or the block goes): `specs/mcp-result-contract.md`.
                ("type" | "uri" | "name" | "mimeType", true) => self.same(ov, uv, &kp),
                ("resource", _) if ov.is_obj() => {
                    if !uv.is_obj() || uv.members().len() != ov.members().len() {
                        self.errs.push(format!("{kp}: resource not kept whole"));
                        continue;
                    }
                    for ((rk, rov), (uk, ruv)) in ov.members().iter().zip(uv.members()) {
                        let rp = ptr_key(&kp, rk);
                        if rk != uk {
                            self.errs.push(format!("{rp}: key changed"));
                        } else if rk == "text" && rov.is_str() {
                            self.text(rov, ruv, &rp);
                        } else if (rk == "blob" || rk == "uri" || rk == "mimeType") && rov.is_str()
                        {
                            self.same(rov, ruv, &rp);
                        } else {
                            self.with_key(rk, |d| d.free(rov, ruv, &rp, 1));
                        }
                    }
                }
                _ => self.with_key(k, |d| d.free(ov, uv, &kp, 1)),
            }
        }
    }

    fn same(&mut self, o: &Node, u: &Node, p: &str) {
        if o.raw(self.ib) != u.raw(self.ob) {
            self.errs.push(format!("{p}: not copied byte for byte"));
        }
    }

    fn text(&mut self, o: &Node, u: &Node, p: &str) {
        let (J::Str(os), J::Str(us)) = (&o.v, &u.v) else {
            self.errs.push(format!("{p}: text is not a string"));
            return;
        };
        let total = os.len() as u64;
        if o.raw(self.ib) == u.raw(self.ob) {
            self.text_left = self.text_left.saturating_sub(total);
            return;
        }
        let dec_kind = if self.text_left < self.lim.max_text_block_bytes {
            "text_bytes"
        } else {
            "text_block_bytes"
        };
        self.site(p.to_string(), 1, &[dec_kind, "result_bytes"]);
        if us.is_empty() {
            self.text_left = 0;
            return;
        }
        let Some((kept, omitted, t)) = split_marker(us) else {
            self.errs.push(format!("{p}: cut text without a marker"));
            return;
        };
        if t != total || omitted + kept.len() as u64 != total || !os.starts_with(kept) {
            self.errs.push(format!(
                "{p}: bad cut: kept {} bytes, marker says {omitted} of {t}, original {total}",
                kept.len()
            ));
            return;
        }
        let mraw = marker(omitted, t).replace('\n', "\\n");
        let uin = u.str_inner(self.ob);
        let oin = o.str_inner(self.ib);
        match uin.strip_suffix(mraw.as_bytes()) {
            Some(pre) if oin.starts_with(pre) => {}
            _ => self.errs.push(format!(
                "{p}: kept text is not a raw prefix of the original"
            )),
        }
        self.text_left = self
            .text_left
            .saturating_sub(kept.len() as u64 + marker(omitted, t).len() as u64);
    }

    /// The generic rules (`specs/budget-semantics.md`) for a free-form value.
    fn free(&mut self, o: &Node, u: &Node, p: &str, level: u32) {
        match (&o.v, &u.v) {
            (J::Obj(om), J::Obj(um)) => {
                if level > self.lim.max_depth {
                    if !um.is_empty() {
                        self.errs.push(format!("{p}: not emptied past max_depth"));
                    }
                    if !om.is_empty() {
                        self.site(p.to_string(), 1, &["depth"]);
                    }
                    return;
                }
                if um.len() > om.len() {
                    self.errs
                        .push(format!("{p}: more members than the original"));
                    return;
                }
                for ((k, ov), (uk, uv)) in om.iter().zip(um) {
                    if k != uk {
                        self.errs.push(format!("{p}: members are not a prefix"));
                        return;
                    }
                    let kp = ptr_key(p, k);
                    self.with_key(k, |d| d.free(ov, uv, &kp, level + 1));
                }
                if um.len() < om.len() {
                    let k = &om[um.len()].0;
                    let kinds: &[&'static str] = if um.len() as u64 >= self.lim.max_map_keys {
                        &["map_keys"]
                    } else {
                        &BYTES_KINDS
                    };
                    self.key_site(ptr_key(p, k), k, (om.len() - um.len()) as u64, kinds);
                }
            }
            (J::Arr(oa), J::Arr(ua)) => {
                if level > self.lim.max_depth {
                    if !ua.is_empty() {
                        self.errs.push(format!("{p}: not emptied past max_depth"));
                    }
                    if !oa.is_empty() {
                        self.site(p.to_string(), 1, &["depth"]);
                    }
                    return;
                }
                if ua.len() > oa.len() {
                    self.errs.push(format!("{p}: more items than the original"));
                    return;
                }
                for (i, (ov, uv)) in oa.iter().zip(ua).enumerate() {
                    self.free(ov, uv, &ptr_idx(p, i), level + 1);
                }
                if ua.len() < oa.len() {
                    let kinds: &[&'static str] = if ua.len() as u64 >= self.lim.max_list_items {
                        &["list_items"]
                    } else {
                        &BYTES_KINDS
                    };
                    self.site(ptr_idx(p, ua.len()), (oa.len() - ua.len()) as u64, kinds);
                }
            }
            (J::Str(os), J::Str(us)) => {
                if o.raw(self.ib) == u.raw(self.ob) {
                    return;
                }
                let uin = u.str_inner(self.ob);
                if !o.str_inner(self.ib).starts_with(uin) || !os.starts_with(us.as_str()) {
                    self.errs
                        .push(format!("{p}: string is not a prefix of the original"));
                    return;
                }
                let next = os[us.len()..].chars().next().map_or(0, |c| c.len_utf8());
                let kinds: &[&'static str] =
                    if us.len() as u64 + next as u64 > self.lim.max_string_bytes {
                        &["string_bytes"]
                    } else {
                        &BYTES_KINDS
                    };
                self.site(p.to_string(), 1, kinds);
            }
            (J::Num, J::Num) | (J::Lit, J::Lit) => self.same(o, u, p),
            _ => self.errs.push(format!("{p}: value changed type")),
        }
    }
}

/// The cut sites that turn original result `o` into projected result `u`,
/// in the order the record must list them, or the ways `u` is not a
/// projection of `o`.
pub fn expected_sites(
    lim: &McpLimits,
    ib: &[u8],
    o: &Node,
    ob: &[u8],
    u: &Node,
    meta: MetaReading,
) -> Result<(Vec<Site>, bool), Vec<String>> {
    // The contract's "Small fields are never lost" for `isError`: the output
    // ends with the boolean the input ends with; one that did not fit where it
    // came is held back (not cut), and the last value may be written as the
    // result's last member (only `_meta` after it).
    let last = |n: &Node, b: &[u8]| {
        n.members()
            .iter()
            .rev()
            .find(|(k, _)| k == "isError")
            .map(|(_, v)| v.raw(b).to_vec())
    };
    let in_last = last(o, ib);
    let verdict_kept =
        matches!(in_last.as_deref(), Some(b"true" | b"false")) && in_last == last(u, ob);
    let tail_ok = u
        .members()
        .iter()
        .rev()
        .take_while(|(k, _)| k != "isError")
        .all(|(k, _)| k == "_meta");
    let mut first_errs = None;
    for moved in [false, true] {
        if moved && !(verdict_kept && tail_ok) {
            break;
        }
        let mut d = Diff {
            lim: *lim,
            ib,
            ob,
            sites: Vec::new(),
            errs: Vec::new(),
            text_left: lim.max_text_bytes,
            keys_ok: true,
            moved_is_error: moved,
            verdict_kept,
            meta,
        };
        d.result(o, u);
        if d.errs.is_empty() {
            return Ok((d.sites, moved));
        }
        first_errs.get_or_insert(d.errs);
    }
    Err(first_errs.unwrap_or_default())
}

// ---------------------------------------------------------------------------
// The full check of one projected message
// ---------------------------------------------------------------------------

/// What `check_message` found out, for further assertions.
#[derive(Debug)]
pub struct Checked {
    pub sites: Vec<Site>,
    pub result_len: usize,
}

/// Check one message projected with `ToolResult` treatment under `lim`
/// (the limits in force: pass `lim.whole_only()` for a typed tool):
/// valid JSON, the envelope unchanged, every bound, the record embedded once
/// and equal to the projector's record, and the record exact against the
/// cut sites the diff oracle derives.
pub fn check_message(lim: &McpLimits, input: &[u8], run: &Run) -> Checked {
    let out = &run.out;
    let inp = parse(input).expect("test input is valid JSON");
    let onode = parse_valid(out);
    let show = || String::from_utf8_lossy(&out[..out.len().min(3000)]).into_owned();
    // The envelope: same members in the same order, all but `result` byte-identical.
    let (im, om) = (inp.members(), onode.members());
    assert_eq!(
        im.iter().map(|(k, _)| k).collect::<Vec<_>>(),
        om.iter().map(|(k, _)| k).collect::<Vec<_>>(),
        "envelope members changed: {}",
        show()
    );
    for ((k, iv), (_, ov)) in im.iter().zip(om) {
        if k != "result" {
            assert_eq!(iv.raw(input), ov.raw(out), "envelope member {k} changed");
        }
    }
    let (Some(ir), Some(or)) = (inp.get("result"), onode.get("result")) else {
        assert_eq!(
            out.as_slice(),
            input,
            "a message without result must pass unchanged"
        );
        return Checked {
            sites: Vec::new(),
            result_len: 0,
        };
    };
    assert_eq!(run.original_bytes, ir.len() as u64, "original_bytes");
    let errs = result_bounds(lim, out, or);
    assert!(errs.is_empty(), "bounds violated: {errs:?}\n{}", show());
    // The record inside the output.
    let meta = or.get("_meta");
    let embedded = meta.and_then(|m| m.get(RECORD_KEY));
    if run.rec.truncated {
        let e = embedded.unwrap_or_else(|| panic!("record missing from output: {}", show()));
        let e: serde_json::Value = serde_json::from_slice(e.raw(out)).expect("record");
        let er = Rec::from_json(&e);
        assert_eq!(
            er.original_bytes,
            Some(ir.len() as u64),
            "record original_bytes"
        );
        assert_eq!(
            Rec {
                original_bytes: None,
                ..er
            },
            run.rec,
            "embedded record differs from Projector::record()"
        );
        if let Some(m) = meta {
            assert_eq!(
                m.count_key(RECORD_KEY),
                1,
                "exactly one record key in _meta"
            );
        }
    } else {
        assert!(embedded.is_none(), "record written though nothing was cut");
        assert_eq!(run.rec.omitted_count, 0);
        assert_eq!(run.rec.budget_kind, None);
    }
    assert_eq!(run.rec.truncated, run.rec.omitted_count > 0);
    if run.typed_failed {
        return Checked {
            sites: Vec::new(),
            result_len: or.len(),
        };
    }
    let (mut sites, mut moved) = match expected_sites(lim, input, ir, out, or, MetaReading::Prefix)
    {
        Ok(s) => s,
        Err(e) => panic!("output is not a projection of the input: {e:?}\n{}", show()),
    };
    // Missing `_meta` members are ambiguous in the output alone (see
    // `MetaReading`): the engine does one or the other by the room left, and
    // the record says which.
    let fits = |sites: &[Site]| {
        let mut it = sites.iter();
        sites.iter().map(|x| x.count).sum::<u64>() == run.rec.omitted_count
            && run.rec.omitted_paths.len() as u64 + run.rec.unlisted == sites.len() as u64
            && run
                .rec
                .omitted_paths
                .iter()
                .all(|p| it.any(|x| &x.path == p))
    };
    for reading in [MetaReading::Whole, MetaReading::Alone] {
        if fits(&sites) {
            break;
        }
        if let Ok((s, m)) = expected_sites(lim, input, ir, out, or, reading) {
            if fits(&s) {
                (sites, moved) = (s, m);
            }
        }
    }
    assert_record_matches(
        &run.rec,
        &sites,
        lim.max_result_bytes >= ir.len() as u64 + 8192,
    );
    if sites.is_empty() && !moved {
        assert_eq!(out.as_slice(), input, "nothing cut, so byte-identical");
    }
    Checked {
        sites,
        result_len: or.len(),
    }
}

/// The record must match the sites exactly: count, kind of the first site,
/// listed paths a subsequence of the sites (with room to spare: exactly the
/// first listable ones, at most 16), listed + unlisted = sites.
pub fn assert_record_matches(rec: &Rec, sites: &[Site], roomy: bool) {
    let count: u64 = sites.iter().map(|s| s.count).sum();
    let desc = || {
        let mut s = String::new();
        for x in sites.iter().take(40) {
            let _ = write!(s, "\n  {} x{} {:?}", x.path, x.count, x.kinds);
        }
        s
    };
    assert_eq!(
        rec.omitted_count,
        count,
        "omitted_count; sites:{}\nrecord: {rec:?}",
        desc()
    );
    assert_eq!(rec.truncated, count > 0);
    match sites.first() {
        None => assert_eq!(rec.budget_kind, None),
        Some(first) => {
            let k = rec.budget_kind.as_deref().unwrap_or("null");
            assert!(
                first.kinds.contains(&k),
                "budget_kind {k} but the first site is {} ({:?}); sites:{}",
                first.path,
                first.kinds,
                desc()
            );
        }
    }
    assert_eq!(
        rec.omitted_paths.len() as u64 + rec.unlisted,
        sites.len() as u64,
        "listed + unlisted paths must equal the cut sites; sites:{}\nrecord: {rec:?}",
        desc()
    );
    assert!(rec.omitted_paths.len() <= 16);
    if roomy {
        let want: Vec<&str> = sites
            .iter()
            .filter(|s| listable(&s.path, s.keys_ok))
            .take(16)
            .map(|s| s.path.as_str())
            .collect();
        assert_eq!(rec.omitted_paths, want, "omitted_paths; sites:{}", desc());
    } else {
        let mut it = sites.iter();
        for p in &rec.omitted_paths {
            assert!(
                it.any(|s| &s.path == p),
                "listed path {p} is not a cut site in order; sites:{}",
                desc()
            );
        }
    }
}

/// The typed error result for an over-budget typed tool, checked in full.
pub fn check_typed_error(
    lim: &McpLimits,
    input: &[u8],
    run: &Run,
    tool: &str,
    read_only: bool,
    request_id: &[u8],
) {
    assert!(run.typed_failed, "typed result should have failed");
    let inp = parse(input).unwrap();
    let ir = inp.get("result").unwrap();
    let onode = parse_valid(&run.out);
    let or = onode.get("result").expect("result");
    assert!(or.len() as u64 <= lim.max_result_bytes);
    let keys: Vec<&str> = or.members().iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["content", "isError", "_meta"]);
    assert_eq!(or.get("isError").unwrap().raw(&run.out), b"true");
    let content = or.get("content").unwrap().items();
    assert_eq!(content.len(), 1);
    assert_eq!(content[0].get("type").unwrap().as_str(), Some("text"));
    let text = content[0].get("text").unwrap().as_str().unwrap();
    assert_eq!(
        text,
        typed_error_text(read_only, tool, ir.len() as u64, lim.max_result_bytes)
    );
    let meta = or.get("_meta").unwrap();
    let rec = Rec::from_json(
        &serde_json::from_slice(meta.get(RECORD_KEY).unwrap().raw(&run.out)).unwrap(),
    );
    assert!(rec.truncated);
    assert_eq!(rec.original_bytes, Some(ir.len() as u64));
    assert_eq!(run.original_bytes, ir.len() as u64);
    let receipt = meta.get(RECEIPT_KEY);
    if read_only {
        assert!(receipt.is_none(), "a read-only tool gets no receipt");
        assert_eq!(meta.members().len(), 1);
    } else {
        let r = receipt.expect("receipt");
        let rk: Vec<&str> = r.members().iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            rk,
            ["tool", "request_id", "result_bytes", "digest", "applied"]
        );
        assert_eq!(r.get("tool").unwrap().as_str(), Some(tool));
        assert_eq!(r.get("request_id").unwrap().raw(&run.out), request_id);
        assert_eq!(
            r.get("result_bytes").unwrap().raw(&run.out),
            ir.len().to_string().as_bytes()
        );
        let digest = r.get("digest").unwrap().as_str().unwrap();
        let hex = format!("{:016x}", fnv1a64(ir.raw(input)));
        assert_eq!(
            digest.strip_prefix("fnv1a64:").unwrap_or(digest),
            hex,
            "digest"
        );
        assert_eq!(
            r.get("applied").unwrap().as_str(),
            Some("may_have_changed_state")
        );
        // The only mention of repeating is the instruction not to.
        let rest = text.to_lowercase().replace("do not repeat it", "");
        for bad in ["repeat", "retry", "try again", "again", "re-run", "rerun"] {
            assert!(
                !rest.contains(bad),
                "text advises repeating ({bad}): {text}"
            );
        }
        assert!(text.contains("do not repeat it"));
    }
}
