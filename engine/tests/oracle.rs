//! The engine against a slow, obviously-correct DOM oracle of
//! `specs/budget-semantics.md`.
//!
//! Documents are generated as a tree ([`Doc`]) whose strings are lists of
//! *units* with their exact encoding (plain ASCII, `\n`, `\u00e9`,
//! `\uD83D\uDE00`, raw UTF-8, …), then encoded by [`encode`] with random
//! insignificant whitespace. The oracle walks the tree with the spec's greedy
//! rules and writes the expected output from the units' encoded text, so it
//! never depends on how a JSON library would re-escape a string. serde_json is
//! used only as a cross-check: the input must parse to the tree's value, and
//! every output must parse.
use proptest::prelude::*;
use proptest::sample::Index;
use resultbudget::{Budget, Limits};
use serde_json::Value;

// ---------------------------------------------------------------------------
// Documents

/// One unit of a string: the smallest piece a cut may not split.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Unit {
    /// As written in the JSON text.
    enc: String,
    /// The UTF-8 bytes it stands for.
    dec: Vec<u8>,
}

impl Unit {
    fn plain(c: char) -> Unit {
        assert!(c != '"' && c != '\\' && c >= ' ');
        Unit {
            enc: c.to_string(),
            dec: c.to_string().into_bytes(),
        }
    }

    fn escape(enc: &str, dec: u8) -> Unit {
        Unit {
            enc: enc.to_string(),
            dec: vec![dec],
        }
    }

    /// `\uXXXX` (a BMP non-surrogate) or an escaped surrogate pair.
    fn u_escape(c: char, upper: bool) -> Unit {
        let mut buf = [0u16; 2];
        let enc = c
            .encode_utf16(&mut buf)
            .iter()
            .map(|w| {
                if upper {
                    format!("\\u{w:04X}")
                } else {
                    format!("\\u{w:04x}")
                }
            })
            .collect();
        Unit {
            enc,
            dec: c.to_string().into_bytes(),
        }
    }
}

type Str = Vec<Unit>;

fn enc_len(s: &Str) -> u64 {
    s.iter().map(|u| u.enc.len() as u64).sum()
}

fn decoded(s: &Str) -> Vec<u8> {
    s.iter().flat_map(|u| u.dec.iter().copied()).collect()
}

#[derive(Debug, Clone)]
enum Doc {
    /// `true`, `false`, `null`, or a number, as written.
    Atom(String),
    Str(Str),
    Arr(Vec<Doc>),
    Obj(Vec<(Str, Doc)>),
}

impl Doc {
    /// The serde_json value this document stands for.
    fn to_value(&self) -> Value {
        match self {
            Doc::Atom(t) => serde_json::from_str(t).unwrap(),
            Doc::Str(s) => Value::String(String::from_utf8(decoded(s)).unwrap()),
            Doc::Arr(items) => Value::Array(items.iter().map(Doc::to_value).collect()),
            Doc::Obj(members) => Value::Object(
                members
                    .iter()
                    .map(|(k, v)| (String::from_utf8(decoded(k)).unwrap(), v.to_value()))
                    .collect(),
            ),
        }
    }
}

/// A tiny deterministic generator for whitespace placement.
struct Ws(u64);

impl Ws {
    fn next(&mut self) -> &'static str {
        if self.0 == 0 {
            return "";
        }
        // xorshift64
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        match self.0 % 16 {
            0 => " ",
            1 => "\n",
            2 => "\t ",
            3 => "\r\n  ",
            _ => "",
        }
    }
}

/// The document's JSON text, with whitespace from `ws` between tokens.
fn encode(doc: &Doc, ws: &mut Ws) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(ws.next().as_bytes());
    encode_into(doc, ws, &mut out);
    out.extend_from_slice(ws.next().as_bytes());
    out
}

fn encode_str(s: &Str, out: &mut Vec<u8>) {
    out.push(b'"');
    for u in s {
        out.extend_from_slice(u.enc.as_bytes());
    }
    out.push(b'"');
}

fn encode_into(doc: &Doc, ws: &mut Ws, out: &mut Vec<u8>) {
    match doc {
        Doc::Atom(t) => out.extend_from_slice(t.as_bytes()),
        Doc::Str(s) => encode_str(s, out),
        Doc::Arr(items) => {
            out.push(b'[');
            out.extend_from_slice(ws.next().as_bytes());
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                    out.extend_from_slice(ws.next().as_bytes());
                }
                encode_into(item, ws, out);
                out.extend_from_slice(ws.next().as_bytes());
            }
            out.push(b']');
        }
        Doc::Obj(members) => {
            out.push(b'{');
            out.extend_from_slice(ws.next().as_bytes());
            for (i, (k, v)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                    out.extend_from_slice(ws.next().as_bytes());
                }
                encode_str(k, out);
                out.extend_from_slice(ws.next().as_bytes());
                out.push(b':');
                out.extend_from_slice(ws.next().as_bytes());
                encode_into(v, ws, out);
                out.extend_from_slice(ws.next().as_bytes());
            }
            out.push(b'}');
        }
    }
}

// ---------------------------------------------------------------------------
// The oracle

#[derive(Debug, Clone)]
enum Seg {
    Index(u64),
    Key(Vec<u8>),
}

/// A cut site, in the order the walk meets its end.
#[derive(Debug)]
struct Site {
    kind: &'static str,
    count: u64,
    path: Vec<Seg>,
}

const MAX_PATHS: usize = 16;
const MAX_PATH_BYTES: usize = 256;
const MAX_KEY_BYTES: usize = 128;

/// The JSON-string-encoded RFC 6901 pointer, or `None` when it may not be listed.
fn pointer(path: &[Seg]) -> Option<String> {
    let mut s = String::new();
    for seg in path {
        s.push('/');
        match seg {
            Seg::Index(i) => s.push_str(&i.to_string()),
            Seg::Key(k) => {
                if k.len() > MAX_KEY_BYTES {
                    return None;
                }
                for ch in std::str::from_utf8(k).unwrap().chars() {
                    match ch {
                        '~' => s.push_str("~0"),
                        '/' => s.push_str("~1"),
                        '"' => s.push_str("\\\""),
                        '\\' => s.push_str("\\\\"),
                        c if (c as u32) < 0x20 => s.push_str(&format!("\\u{:04x}", c as u32)),
                        c => s.push(c),
                    }
                }
            }
        }
    }
    (s.len() <= MAX_PATH_BYTES).then_some(s)
}

struct Oracle {
    lim: Limits,
    out: Vec<u8>,
    /// Closers still to write.
    owed: u64,
    path: Vec<Seg>,
    sites: Vec<Site>,
}

/// The smallest form of a value: 2 bytes for a string or container, else all of it.
fn min_len(doc: &Doc) -> u64 {
    match doc {
        Doc::Atom(t) => t.len() as u64,
        _ => 2,
    }
}

impl Oracle {
    /// Expected output and record JSON for `doc` under `lim`.
    fn run(lim: Limits, doc: &Doc) -> (Vec<u8>, Vec<u8>) {
        let mut o = Oracle {
            lim,
            out: Vec::new(),
            owed: 0,
            path: Vec::new(),
            sites: Vec::new(),
        };
        match doc {
            Doc::Atom(t) => {
                if t.len() as u64 > o.avail() {
                    o.out.extend_from_slice(b"null");
                    o.cut("result_bytes", 1);
                } else {
                    o.out.extend_from_slice(t.as_bytes());
                }
            }
            _ => o.value(doc, 1),
        }
        assert_eq!(o.owed, 0);
        let rec = o.record();
        (o.out, rec)
    }

    fn avail(&self) -> u64 {
        self.lim
            .max_result_bytes
            .saturating_sub(self.out.len() as u64)
            .saturating_sub(self.owed)
    }

    fn cut(&mut self, kind: &'static str, count: u64) {
        self.sites.push(Site {
            kind,
            count,
            path: self.path.clone(),
        });
    }

    /// Write a value whose smallest form was already found to fit; `level` is
    /// the level it has if it is a container.
    fn value(&mut self, doc: &Doc, level: u64) {
        match doc {
            Doc::Atom(t) => self.out.extend_from_slice(t.as_bytes()),
            Doc::Str(s) => self.string(s),
            Doc::Arr(_) | Doc::Obj(_) => self.container(doc, level),
        }
    }

    fn string(&mut self, s: &Str) {
        self.out.push(b'"');
        self.owed += 1;
        let mut dec = 0u64;
        let mut cut = None;
        for u in s {
            if dec + u.dec.len() as u64 > self.lim.max_string_bytes {
                cut = Some("string_bytes");
                break;
            }
            if u.enc.len() as u64 > self.avail() {
                cut = Some("result_bytes");
                break;
            }
            dec += u.dec.len() as u64;
            self.out.extend_from_slice(u.enc.as_bytes());
        }
        self.out.push(b'"');
        self.owed -= 1;
        if let Some(kind) = cut {
            self.cut(kind, 1);
        }
    }

    fn container(&mut self, doc: &Doc, level: u64) {
        let (open, close, len) = match doc {
            Doc::Arr(items) => (b'[', b']', items.len()),
            Doc::Obj(members) => (b'{', b'}', members.len()),
            _ => unreachable!(),
        };
        self.out.push(open);
        self.owed += 1;
        if level > self.lim.max_depth as u64 {
            if len > 0 {
                self.cut("depth", 1);
            }
        } else {
            match doc {
                Doc::Arr(items) => self.items(items, level),
                Doc::Obj(members) => self.members(members, level),
                _ => unreachable!(),
            }
        }
        self.out.push(close);
        self.owed -= 1;
    }

    fn items(&mut self, items: &[Doc], level: u64) {
        let n = items.len() as u64;
        for (i, item) in items.iter().enumerate() {
            let i = i as u64;
            self.path.push(Seg::Index(i));
            if i >= self.lim.max_list_items {
                self.cut("list_items", n - i);
                self.path.pop();
                return;
            }
            let comma = u64::from(i > 0);
            if comma + min_len(item) > self.avail() {
                self.cut("result_bytes", n - i);
                self.path.pop();
                return;
            }
            if i > 0 {
                self.out.push(b',');
            }
            self.value(item, level + 1);
            self.path.pop();
        }
    }

    fn members(&mut self, members: &[(Str, Doc)], level: u64) {
        let n = members.len() as u64;
        for (i, (k, v)) in members.iter().enumerate() {
            let i = i as u64;
            self.path.push(Seg::Key(decoded(k)));
            if i >= self.lim.max_map_keys {
                self.cut("map_keys", n - i);
                self.path.pop();
                return;
            }
            let comma = u64::from(i > 0);
            if comma + enc_len(k) + 3 + min_len(v) > self.avail() {
                self.cut("result_bytes", n - i);
                self.path.pop();
                return;
            }
            if i > 0 {
                self.out.push(b',');
            }
            encode_str(k, &mut self.out);
            self.out.push(b':');
            self.value(v, level + 1);
            self.path.pop();
        }
    }

    fn record(&self) -> Vec<u8> {
        let count: u64 = self.sites.iter().map(|s| s.count).sum();
        let mut listed = Vec::new();
        let mut unlisted = 0u64;
        for s in &self.sites {
            match pointer(&s.path) {
                Some(p) if listed.len() < MAX_PATHS => listed.push(format!("\"{p}\"")),
                _ => unlisted += 1,
            }
        }
        let kind = match self.sites.first() {
            Some(s) => format!("\"{}\"", s.kind),
            None => "null".to_string(),
        };
        format!(
            "{{\"truncated\":{},\"budget_kind\":{kind},\"omitted_count\":{count},\"omitted_paths\":[{}],\"omitted_paths_unlisted\":{unlisted}}}",
            count > 0,
            listed.join(",")
        )
        .into_bytes()
    }
}

// ---------------------------------------------------------------------------
// Running the engine

/// Output and record JSON of the engine for `input` fed in chunks ending at
/// `bounds` (then the rest).
fn engine(lim: Limits, input: &[u8], bounds: &[usize]) -> (Vec<u8>, Vec<u8>) {
    let (feeds, rec) = engine_feeds(lim, input, bounds, true);
    (feeds.concat(), rec)
}

/// What each `feed` (and then `finish`) wrote, and the record; `fast` turns the
/// fast keeping loop on or off.
fn engine_feeds(
    lim: Limits,
    input: &[u8],
    bounds: &[usize],
    fast: bool,
) -> (Vec<Vec<u8>>, Vec<u8>) {
    let mut b = Budget::new(lim).unwrap();
    b.set_fast_keep(fast);
    let mut feeds = Vec::new();
    let mut prev = 0;
    for &end in bounds.iter().chain([input.len()].iter()) {
        let end = end.clamp(prev, input.len());
        let mut out = Vec::new();
        b.feed(&input[prev..end], &mut out)
            .unwrap_or_else(|e| panic!("{e} in {:?}", String::from_utf8_lossy(input)));
        feeds.push(out);
        prev = end;
    }
    let mut out = Vec::new();
    let rec = b.finish(&mut out).unwrap().to_json();
    feeds.push(out);
    (feeds, rec)
}

fn engine_whole(lim: Limits, input: &[u8]) -> (Vec<u8>, Vec<u8>) {
    engine(lim, input, &[])
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The full check of one document under one set of limits. `cuts` are the
/// random chunk boundaries.
fn check(doc: &Doc, ws_seed: u64, lim: Limits, cuts: &[Index]) -> Result<(), TestCaseError> {
    let input = encode(doc, &mut Ws(ws_seed));
    let parsed: Value = serde_json::from_slice(&input)
        .map_err(|e| TestCaseError::fail(format!("generator made bad JSON: {e}")))?;
    prop_assert_eq!(
        &parsed,
        &doc.to_value(),
        "generator and serde_json disagree"
    );

    let (exp_out, exp_rec) = Oracle::run(lim, doc);
    let (out, rec) = engine_whole(lim, &input);
    prop_assert_eq!(
        show(&out),
        show(&exp_out),
        "output; input {} limits {:?}",
        show(&input),
        lim
    );
    prop_assert_eq!(
        show(&rec),
        show(&exp_rec),
        "record; input {} limits {:?}",
        show(&input),
        lim
    );
    let v: Result<Value, _> = serde_json::from_slice(&out);
    prop_assert!(v.is_ok(), "output does not parse: {}", show(&out));
    prop_assert!(out.len() as u64 <= lim.max_result_bytes);

    let mut bounds: Vec<usize> = cuts.iter().map(|i| i.index(input.len() + 1)).collect();
    bounds.sort_unstable();
    let chunked = engine(lim, &input, &bounds);
    prop_assert_eq!(
        (show(&chunked.0), show(&chunked.1)),
        (show(&out), show(&rec)),
        "chunks ending at {:?}",
        bounds
    );
    // The fast keeping loop and the token-by-token path it shortcuts write the
    // same bytes in every feed, whole and in the same chunks.
    for b in [&[][..], &bounds[..]] {
        let fast = engine_feeds(lim, &input, b, true);
        let slow = engine_feeds(lim, &input, b, false);
        prop_assert_eq!(
            fast,
            slow,
            "fast keep vs token by token, chunks ending at {:?}",
            b
        );
    }
    let ones: Vec<usize> = (1..input.len()).collect();
    let bytewise = engine(lim, &input, &ones);
    prop_assert_eq!(
        (show(&bytewise.0), show(&bytewise.1)),
        (show(&out), show(&rec)),
        "1-byte chunks"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Strategies

fn plain_ascii() -> impl Strategy<Value = Unit> {
    prop_oneof![
        6 => (b'a'..=b'z').prop_map(|b| Unit::plain(b as char)),
        1 => prop::sample::select(vec![' ', '/', '~', '0', '9', '.', '{', '[', ':', ',', '\'']).prop_map(Unit::plain),
    ]
}

fn simple_escape() -> impl Strategy<Value = Unit> {
    prop::sample::select(vec![
        ("\\\"", b'"'),
        ("\\\\", b'\\'),
        ("\\/", b'/'),
        ("\\b", 0x08),
        ("\\f", 0x0C),
        ("\\n", b'\n'),
        ("\\r", b'\r'),
        ("\\t", b'\t'),
    ])
    .prop_map(|(e, d)| Unit::escape(e, d))
}

/// A character whose UTF-8 form is 1, 2, 3 or 4 bytes.
fn any_width_char() -> impl Strategy<Value = char> {
    prop_oneof![
        (0u32..0x80).prop_map(|c| char::from_u32(c).unwrap()),
        wide_char(),
    ]
}

/// A character whose UTF-8 form is 2, 3 or 4 bytes.
fn wide_char() -> impl Strategy<Value = char> {
    prop_oneof![
        (0x80u32..0x800).prop_map(|c| char::from_u32(c).unwrap()),
        (0x800u32..0xD800).prop_map(|c| char::from_u32(c).unwrap()),
        (0xE000u32..0x10000).prop_map(|c| char::from_u32(c).unwrap()),
        (0x10000u32..0x110000).prop_map(|c| char::from_u32(c).unwrap()),
        prop::sample::select(vec!['é', '€', '😀', '\u{80}', '\u{FFFF}', '\u{10FFFF}']),
    ]
}

fn unit() -> impl Strategy<Value = Unit> {
    prop_oneof![
        8 => plain_ascii(),
        2 => simple_escape(),
        2 => (any_width_char(), any::<bool>()).prop_map(|(c, up)| Unit::u_escape(c, up)),
        1 => prop::sample::select(vec!['\u{0}', '\u{1f}', '\u{7f}', '"', '\\', '/'])
            .prop_map(|c| Unit::u_escape(c, false)),
        2 => wide_char().prop_map(Unit::plain),
    ]
}

fn string() -> impl Strategy<Value = Str> {
    prop_oneof![
        6 => prop::collection::vec(unit(), 0..8),
        2 => prop::collection::vec(unit(), 8..40),
    ]
}

fn key() -> impl Strategy<Value = Str> {
    prop_oneof![
        12 => prop::collection::vec(unit(), 0..4),
        // Around the 128-decoded-byte key cap.
        1 => prop::collection::vec(plain_ascii(), 120..136),
        1 => prop::collection::vec(unit(), 40..130),
    ]
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "0",
            "-0",
            "-0.0",
            "0.5",
            "1E400",
            "1e-400",
            "-1E+2",
            "2.5e-3",
            "123456789012345678901234567890",
            "-98765432109876543210.123456789e-12",
            "3.14",
            "7",
            "42",
        ])
        .prop_map(String::from),
        any::<i64>().prop_map(|n| n.to_string()),
        (
            any::<bool>(),
            prop_oneof![Just("0".to_string()), "[1-9][0-9]{0,12}"],
            prop::option::of("[0-9]{1,6}"),
            prop::option::of(("[eE]", "[+-]?", "[0-9]{1,3}")),
        )
            .prop_map(|(neg, int, frac, exp)| {
                let mut s = String::new();
                if neg {
                    s.push('-');
                }
                s.push_str(&int);
                if let Some(f) = frac {
                    s.push('.');
                    s.push_str(&f);
                }
                if let Some((e, sign, d)) = exp {
                    s.push_str(&e);
                    s.push_str(&sign);
                    s.push_str(&d);
                }
                s
            }),
    ]
}

fn leaf() -> impl Strategy<Value = Doc> {
    prop_oneof![
        1 => prop::sample::select(vec!["true", "false", "null"]).prop_map(|t| Doc::Atom(t.into())),
        2 => number().prop_map(Doc::Atom),
        3 => string().prop_map(Doc::Str),
    ]
}

/// Members with distinct decoded keys (the first of duplicates is kept).
fn dedup(members: Vec<(Str, Doc)>) -> Vec<(Str, Doc)> {
    let mut seen = std::collections::HashSet::new();
    members
        .into_iter()
        .filter(|(k, _)| seen.insert(decoded(k)))
        .collect()
}

fn doc() -> impl Strategy<Value = Doc> {
    leaf().prop_recursive(6, 96, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Doc::Arr),
            prop::collection::vec((key(), inner), 0..8).prop_map(|m| Doc::Obj(dedup(m))),
        ]
    })
}

fn small_or_none(max_small: u64) -> impl Strategy<Value = u64> {
    prop_oneof![3 => 0..=max_small, 1 => Just(u64::MAX)]
}

fn limits() -> impl Strategy<Value = Limits> {
    (
        small_or_none(6),
        small_or_none(6),
        small_or_none(16),
        prop_oneof![3 => 0u32..=4, 1 => Just(u32::MAX)],
        prop_oneof![2 => 8u64..48, 2 => 48u64..300, 1 => Just(u64::MAX)],
    )
        .prop_map(|(items, keys, sbytes, depth, bytes)| Limits {
            max_list_items: items,
            max_map_keys: keys,
            max_string_bytes: sbytes,
            max_depth: depth,
            max_result_bytes: bytes,
            max_nesting: Limits::DEFAULT.max_nesting,
        })
}

/// Component-wise loosest and tightest of two limits.
fn loose_tight(a: Limits, b: Limits) -> (Limits, Limits) {
    (
        Limits {
            max_list_items: a.max_list_items.max(b.max_list_items),
            max_map_keys: a.max_map_keys.max(b.max_map_keys),
            max_string_bytes: a.max_string_bytes.max(b.max_string_bytes),
            max_depth: a.max_depth.max(b.max_depth),
            max_result_bytes: a.max_result_bytes.max(b.max_result_bytes),
            max_nesting: a.max_nesting,
        },
        Limits {
            max_list_items: a.max_list_items.min(b.max_list_items),
            max_map_keys: a.max_map_keys.min(b.max_map_keys),
            max_string_bytes: a.max_string_bytes.min(b.max_string_bytes),
            max_depth: a.max_depth.min(b.max_depth),
            max_result_bytes: a.max_result_bytes.min(b.max_result_bytes),
            max_nesting: a.max_nesting,
        },
    )
}

/// `cases` cases, or `PROPTEST_CASES` when set (for long runs).
fn config(cases: u32) -> ProptestConfig {
    let default = ProptestConfig::default();
    let cases = if std::env::var_os("PROPTEST_CASES").is_some() {
        default.cases
    } else {
        cases
    };
    ProptestConfig {
        cases,
        // Failures are reported with the shrunk input; no regression files in the repo.
        failure_persistence: None,
        ..default
    }
}

proptest! {
    #![proptest_config(config(512))]

    /// Output and record equal the oracle's exactly, whole, in random chunks and
    /// in 1-byte chunks; the output parses and respects the byte ceiling.
    #[test]
    fn engine_matches_oracle(
        doc in doc(),
        ws in any::<u64>(),
        lim in limits(),
        cuts in prop::collection::vec(any::<Index>(), 0..6),
    ) {
        check(&doc, ws, lim, &cuts)?;
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// Unlimited: the output is the input without whitespace and nothing is cut.
    #[test]
    fn unlimited_is_identity(doc in doc(), ws in any::<u64>()) {
        let input = encode(&doc, &mut Ws(ws));
        let compact = encode(&doc, &mut Ws(0));
        let (out, rec) = engine_whole(Limits::UNLIMITED, &input);
        prop_assert_eq!(show(&out), show(&compact));
        prop_assert_eq!(
            show(&rec),
            r#"{"truncated":false,"budget_kind":null,"omitted_count":0,"omitted_paths":[],"omitted_paths_unlisted":0}"#
        );
        check(&doc, ws, Limits::UNLIMITED, &[])?;
    }

    /// Budgets compose (the spec's claim, in the form that holds; see
    /// `composition_with_a_binding_loose_ceiling_does_not_hold`): budgeting the
    /// output of a looser budget *without a byte ceiling* with a tighter one
    /// gives the bytes of budgeting the original with the tighter one.
    #[test]
    fn budgets_compose(doc in doc(), ws in any::<u64>(), a in limits(), b in limits()) {
        let (mut loose, tight) = loose_tight(a, b);
        loose.max_result_bytes = u64::MAX;
        let input = encode(&doc, &mut Ws(ws));
        let (direct, _) = engine_whole(tight, &input);
        let (first, _) = engine_whole(loose, &input);
        let (twice, _) = engine_whole(tight, &first);
        prop_assert_eq!(show(&twice), show(&direct), "loose {:?} tight {:?} via {}", loose, tight, show(&first));
        prop_assert_eq!(show(&direct), show(&Oracle::run(tight, &doc).0));
    }

    /// A budget is idempotent on its own output (with any byte ceiling): the
    /// output passes through again unchanged, and the second record is clean.
    #[test]
    fn budget_is_idempotent(doc in doc(), ws in any::<u64>(), lim in limits()) {
        let input = encode(&doc, &mut Ws(ws));
        let (first, _) = engine_whole(lim, &input);
        let (twice, rec) = engine_whole(lim, &first);
        prop_assert_eq!(show(&twice), show(&first), "limits {:?}", lim);
        // Only a top-level number turned into `null` leaves nothing to cut again.
        prop_assert!(show(&rec).starts_with(r#"{"truncated":false"#), "{}", show(&rec));
    }

    /// Many cut sites and long pointers: the 16-path, 256-byte and 128-byte-key
    /// caps of the record.
    #[test]
    fn record_caps(
        keys in prop::collection::vec(key(), 1..6),
        width in 10usize..40,
        sbytes in 0u64..3,
        items in prop_oneof![Just(u64::MAX), 0u64..3],
        ws in any::<u64>(),
    ) {
        // A chain of objects down the keys, ending in a list of `width` strings
        // that are all cut (and, with `items`, a cut tail).
        let mut d = Doc::Arr(
            (0..width)
                .map(|i| Doc::Str(vec![Unit::plain('x'); 3 + i % 4]))
                .collect(),
        );
        for k in keys.iter().rev() {
            d = Doc::Obj(vec![(k.clone(), d), (vec![Unit::plain('z')], Doc::Str(vec![Unit::plain('y'); 5]))]);
        }
        let lim = Limits {
            max_string_bytes: sbytes,
            max_list_items: items,
            ..Limits::UNLIMITED
        };
        check(&d, ws, lim, &[])?;
    }
}

// ---------------------------------------------------------------------------
// Hand-computed cases: the oracle and the engine against known answers.

fn s(text: &str) -> Str {
    text.chars().map(Unit::plain).collect()
}

fn atom(t: &str) -> Doc {
    Doc::Atom(t.to_string())
}

/// Both the oracle and the engine give exactly `out` and `rec` (the record
/// written as `kind count [paths] unlisted`).
fn known(doc: &Doc, lim: Limits, out: &str, rec: &str) {
    let input = encode(doc, &mut Ws(0));
    let (o_out, o_rec) = Oracle::run(lim, doc);
    assert_eq!(show(&o_out), out, "oracle output for {}", show(&input));
    assert_eq!(show(&o_rec), rec, "oracle record for {}", show(&input));
    check(doc, 0, lim, &[]).unwrap();
    check(doc, 0x9E37_79B9_7F4A_7C15, lim, &[]).unwrap();
}

/// A record; `paths` are given as they appear inside the JSON strings.
fn rec(kind: &str, count: u64, paths: &[&str], unlisted: u64) -> String {
    let paths: Vec<String> = paths.iter().map(|p| format!("\"{p}\"")).collect();
    format!(
        "{{\"truncated\":true,\"budget_kind\":\"{kind}\",\"omitted_count\":{count},\"omitted_paths\":[{}],\"omitted_paths_unlisted\":{unlisted}}}",
        paths.join(",")
    )
}

const U: Limits = Limits::UNLIMITED;

#[test]
fn known_list_string_depth_and_bytes() {
    let nums = Doc::Arr(["1", "2", "3", "4"].iter().map(|t| atom(t)).collect());
    known(
        &nums,
        Limits {
            max_list_items: 2,
            ..U
        },
        "[1,2]",
        &rec("list_items", 2, &["/2"], 0),
    );
    known(
        &nums,
        Limits {
            max_list_items: 0,
            ..U
        },
        "[]",
        &rec("list_items", 4, &["/0"], 0),
    );
    // An emptied container counts once, only if it had children.
    let nested = Doc::Obj(vec![
        (s("a"), atom("1")),
        (
            s("b"),
            Doc::Arr(vec![atom("1"), Doc::Arr(vec![atom("2")]), atom("3")]),
        ),
        (s("c"), Doc::Obj(vec![(s("x"), Doc::Obj(vec![]))])),
        (s("d"), Doc::Arr(vec![])),
    ]);
    known(
        &nested,
        Limits { max_depth: 1, ..U },
        r#"{"a":1,"b":[],"c":{},"d":[]}"#,
        &rec("depth", 2, &["/b", "/c"], 0),
    );
    known(
        &nested,
        Limits { max_depth: 0, ..U },
        "{}",
        &rec("depth", 1, &[""], 0),
    );
    // Strings are cut on whole units: a surrogate pair is 4 decoded bytes, \u00e9 is 2.
    let units = Doc::Arr(vec![Doc::Str(vec![
        Unit::u_escape('😀', true),
        Unit::u_escape('é', false),
        Unit::plain('a'),
    ])]);
    known(
        &units,
        Limits {
            max_string_bytes: 5,
            ..U
        },
        r#"["\uD83D\uDE00"]"#,
        &rec("string_bytes", 1, &["/0"], 0),
    );
    known(
        &units,
        Limits {
            max_string_bytes: 6,
            ..U
        },
        r#"["\uD83D\uDE00\u00e9"]"#,
        &rec("string_bytes", 1, &["/0"], 0),
    );
    // The byte ceiling: closers owed, member needs comma + key + 3 + min.
    let obj = Doc::Obj(vec![
        (s("a"), atom("1")),
        (s("b"), Doc::Arr(vec![atom("1"), atom("2"), atom("3")])),
        (s("c"), Doc::Str(s("hello world"))),
    ]);
    known(
        &obj,
        Limits {
            max_result_bytes: 20,
            ..U
        },
        r#"{"a":1,"b":[1,2,3]}"#,
        &rec("result_bytes", 1, &["/c"], 0),
    );
    known(
        &obj,
        Limits {
            max_result_bytes: 30,
            ..U
        },
        r#"{"a":1,"b":[1,2,3],"c":"hell"}"#,
        &rec("result_bytes", 1, &["/c"], 0),
    );
    known(
        &obj,
        Limits {
            max_result_bytes: 12,
            ..U
        },
        r#"{"a":1}"#,
        &rec("result_bytes", 2, &["/b"], 0),
    );
    known(
        &obj,
        Limits {
            max_result_bytes: 16,
            ..U
        },
        r#"{"a":1,"b":[1]}"#,
        &rec("result_bytes", 3, &["/b/1", "/c"], 0),
    );
    // A top-level number too long for the ceiling becomes null; literals always fit.
    known(
        &atom("12345678901234567890"),
        Limits {
            max_result_bytes: 10,
            ..U
        },
        "null",
        &rec("result_bytes", 1, &[""], 0),
    );
    known(
        &atom("false"),
        Limits {
            max_result_bytes: 8,
            ..U
        },
        "false",
        r#"{"truncated":false,"budget_kind":null,"omitted_count":0,"omitted_paths":[],"omitted_paths_unlisted":0}"#,
    );
    // Numbers keep their spelling.
    let spell = Doc::Arr(
        ["-0.0", "1E400", "123456789012345678901234567890"]
            .iter()
            .map(|t| atom(t))
            .collect(),
    );
    known(
        &spell,
        U,
        "[-0.0,1E400,123456789012345678901234567890]",
        r#"{"truncated":false,"budget_kind":null,"omitted_count":0,"omitted_paths":[],"omitted_paths_unlisted":0}"#,
    );
}

/// `budget_kind` is the kind of the cut site that *ends* first in the input:
/// the cut string inside an array ends before the array's omitted tail.
#[test]
fn known_cut_site_order_is_by_end_position() {
    let d = Doc::Arr(vec![Doc::Str(s("abcdef")), atom("1"), atom("2")]);
    known(
        &d,
        Limits {
            max_list_items: 1,
            max_string_bytes: 2,
            ..U
        },
        r#"["ab"]"#,
        &rec("string_bytes", 3, &["/0", "/1"], 0),
    );
    // The outer list's tail ends after the inner list's tail.
    let d = Doc::Arr(vec![
        Doc::Arr(vec![atom("1"), atom("2")]),
        Doc::Arr(vec![atom("3")]),
    ]);
    known(
        &d,
        Limits {
            max_list_items: 1,
            ..U
        },
        "[[1]]",
        &rec("list_items", 2, &["/0/1", "/1"], 0),
    );
}

/// Pointers escape `~`, `/`, `"`, `\` and control characters; at most 16 are
/// listed; a key over 128 decoded bytes or a pointer over 256 encoded bytes is
/// only counted.
#[test]
fn known_record_paths_and_caps() {
    let key = vec![
        Unit::plain('a'),
        Unit::plain('~'),
        Unit::escape("\\/", b'/'),
        Unit::escape("\\\"", b'"'),
        Unit::escape("\\\\", b'\\'),
        Unit::escape("\\n", b'\n'),
        Unit::u_escape('\u{1}', false),
        Unit::u_escape('é', true),
    ];
    let d = Doc::Obj(vec![(key, Doc::Str(s("long")))]);
    known(
        &d,
        Limits {
            max_string_bytes: 1,
            ..U
        },
        r#"{"a~\/\"\\\n\u0001\u00E9":"l"}"#,
        &rec("string_bytes", 1, &[r#"/a~0~1\"\\\u000a\u0001é"#], 0),
    );
    // 20 cut strings: 16 listed, 4 counted.
    let d = Doc::Arr((0..20).map(|_| Doc::Str(s("xyz"))).collect());
    let paths: Vec<String> = (0..16).map(|i| format!("/{i}")).collect();
    let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
    known(
        &d,
        Limits {
            max_string_bytes: 1,
            ..U
        },
        &format!("[{}]", vec!["\"x\""; 20].join(",")),
        &rec("string_bytes", 20, &paths, 4),
    );
    // Key of 128 bytes is listed, 129 is not.
    for (len, listed) in [(128usize, true), (129, false)] {
        let k = "k".repeat(len);
        let d = Doc::Obj(vec![(s(&k), Doc::Str(s("abc")))]);
        let p = format!("/{k}");
        let paths: &[&str] = if listed { &[p.as_str()] } else { &[] };
        known(
            &d,
            Limits {
                max_string_bytes: 0,
                ..U
            },
            &format!(r#"{{"{k}":""}}"#),
            &rec("string_bytes", 1, paths, u64::from(!listed)),
        );
    }
    // A pointer of exactly 256 encoded bytes is listed, 257 is not
    // ("/" + 127 + "/" + 127 = 256).
    for (second, listed) in [(127usize, true), (128, false)] {
        let k1 = "p".repeat(127);
        let k2 = "q".repeat(second);
        let d = Doc::Obj(vec![(
            s(&k1),
            Doc::Obj(vec![(s(&k2), Doc::Arr(vec![atom("1"), atom("2")]))]),
        )]);
        let p = format!("/{k1}/{k2}");
        let paths: &[&str] = if listed { &[p.as_str()] } else { &[] };
        known(
            &d,
            Limits { max_depth: 2, ..U },
            &format!(r#"{{"{k1}":{{"{k2}":[]}}}}"#),
            &rec("depth", 1, paths, u64::from(!listed)),
        );
    }
    // A control character in a key takes 6 encoded bytes of the 256.
    let k1 = "p".repeat(120);
    // "/" + 120 + "/" + 22 * 2 ("\n" encoded) = 166 bytes, and with 22 * 6
    // ("\u0002") = 254 bytes: both listed.
    let short: Str = std::iter::repeat_n(Unit::escape("\\n", b'\n'), 22).collect();
    let long: Str = std::iter::repeat_n(Unit::u_escape('\u{2}', false), 22).collect();
    for k2 in [short, long] {
        let d = Doc::Obj(vec![(
            s(&k1),
            Doc::Obj(vec![(k2, Doc::Arr(vec![atom("1")]))]),
        )]);
        let (_, r) = Oracle::run(Limits { max_depth: 2, ..U }, &d);
        assert!(
            show(&r).contains(r#""omitted_paths_unlisted":0"#),
            "{}",
            show(&r)
        );
        check(&d, 0, Limits { max_depth: 2, ..U }, &[]).unwrap();
    }
}

/// The spec says budgets compose: "budgeting the output of a looser budget
/// with a tighter one gives the same bytes as budgeting the original with the
/// tighter one". With the greedy rule that is false whenever the looser
/// budget's byte ceiling binds: the looser budget spends bytes on something the
/// tighter one cuts (a longer string, a number the tighter ceiling cannot hold)
/// and runs out before a later sibling that the tighter budget keeps. These are
/// the engine's (and the oracle's) results, as the spec's rules define them.
#[test]
fn composition_with_a_binding_loose_ceiling_does_not_hold() {
    let cases = [
        // Same ceiling; the looser string limit fills it, `false` no longer fits.
        (
            r#"["abcdef",false]"#,
            Limits {
                max_result_bytes: 10,
                ..U
            },
            Limits {
                max_result_bytes: 10,
                max_string_bytes: 0,
                ..U
            },
            r#"["abcdef"]"#,
            r#"["",false]"#,
            r#"[""]"#,
        ),
        // Only the ceiling differs: the looser one keeps the number, then has
        // no room for "abc"; the tighter one drops the number and keeps "abc".
        (
            r#"[[123456789],"abc"]"#,
            Limits {
                max_result_bytes: 13,
                ..U
            },
            Limits {
                max_result_bytes: 10,
                ..U
            },
            r#"[[123456789]]"#,
            r#"[[],"abc"]"#,
            r#"[[]]"#,
        ),
    ];
    for (input, loose, tight, exp_loose, exp_tight, exp_twice) in cases {
        let (l, _) = engine_whole(loose, input.as_bytes());
        let (t, _) = engine_whole(tight, input.as_bytes());
        let (tt, _) = engine_whole(tight, &l);
        assert_eq!(show(&l), exp_loose, "{input} loose");
        assert_eq!(show(&t), exp_tight, "{input} tight");
        assert_eq!(show(&tt), exp_twice, "{input} tight after loose");
        assert_ne!(tt, t, "{input}: composition would hold here");
    }
}

// ---------------------------------------------------------------------------
// Regressions found by the oracle.

/// Root cause (fixed): every kept object member was counted twice against
/// `max_map_keys` (`Frame::kept` was incremented in `key_end` and again in
/// `start_child` when the member's value started), so an object kept
/// ceil(max_map_keys / 2) members. `{"a":1,"b":2,"c":3}` with `max_map_keys: 2`
/// must give `{"a":1,"b":2}` and one `map_keys` cut at `/c`.
#[test]
fn regression_map_keys_counted_once_per_member() {
    let d = Doc::Obj(vec![
        (s("a"), atom("1")),
        (s("b"), atom("2")),
        (s("c"), atom("3")),
    ]);
    let lim = Limits {
        max_map_keys: 2,
        ..U
    };
    let (out, record) = engine_whole(lim, br#"{"a":1,"b":2,"c":3}"#);
    assert_eq!(
        (show(&out), show(&record)),
        (
            r#"{"a":1,"b":2}"#.to_string(),
            rec("map_keys", 1, &["/c"], 0)
        )
    );
    known(&d, lim, r#"{"a":1,"b":2}"#, &rec("map_keys", 1, &["/c"], 0));
}

/// The keeping loop writes runs of unchanged tokens as one slice, copies the
/// keys of the objects it leaves open only when it returns, and updates its
/// room without recomputing it. Around exactly those points (runs broken by
/// whitespace, a colon after whitespace, objects left open at a chunk's end
/// and cut later, so that their keys name the cut) it writes the same bytes
/// in every feed as the token-by-token path, and the same record, for every
/// place one or two chunk boundaries can fall.
#[test]
fn keeping_loop_runs_and_keys_match_token_path_at_every_split() {
    let inputs: [&[u8]; 5] = [
        br#"{"a":{"b":{"c":[1,2,3,4,5,6]}},"d":[{"e":1},{"f":[7,8,9]}],"g":"h"}"#,
        br#"{ "a" : { "b" :{"c" :[1, 2,3 ,4 ]}} , "d":[ {"e" :1},{"f" :[7 ,8,9]}] ,"g":"h"}"#,
        br#"{"":{"":[true,false,null,"x",[],{}]},"k2":{"k3":{"k4":"abcdefgh"}}}"#,
        b"[{\"a\":1},\n {\"b\":[\"x\",\"y\",\"z\"]},\t{\"c\":{\"d\":[1,2,3]}}]",
        br#"{"list":[{"id":1,"name":"one","tags":["r","b"]},{"id":2,"name":"two","tags":["g"]},{"id":3,"name":"three","tags":[]}]}"#,
    ];
    let limits = [
        U,
        Limits {
            max_list_items: 2,
            ..U
        },
        Limits {
            max_map_keys: 1,
            max_string_bytes: 3,
            ..U
        },
        Limits { max_depth: 3, ..U },
        Limits {
            max_result_bytes: 40,
            ..U
        },
    ];
    for input in inputs {
        for lim in limits {
            let (whole, rec) = engine_whole(lim, input);
            assert!(
                serde_json::from_slice::<Value>(&whole).is_ok(),
                "{}",
                show(&whole)
            );
            for i in 0..=input.len() {
                let mut cuts = vec![vec![i]];
                cuts.extend((i..=input.len()).step_by(3).map(|j| vec![i, j]));
                for b in cuts {
                    let fast = engine_feeds(lim, input, &b, true);
                    let slow = engine_feeds(lim, input, &b, false);
                    assert_eq!(
                        fast,
                        slow,
                        "{} {lim:?}, chunks ending at {b:?}",
                        show(input)
                    );
                    assert_eq!(
                        (fast.0.concat(), &fast.1),
                        (whole.clone(), &rec),
                        "{} {lim:?}, chunks ending at {b:?}",
                        show(input)
                    );
                }
            }
        }
    }
}
