//! Inputs and helpers shared by the benchmarks in `benches/benches/`.
//!
//! Everything here is deterministic: the generated MCP results are the same
//! bytes on every run, so the expected answers the benches assert are stable.
//! Benches run in two modes: `cargo bench` (full-size inputs) and
//! `cargo test --benches` (criterion's test mode, which CI runs: every bench
//! once, in a debug build), where the generated inputs are scaled down so the
//! assertions stay cheap.

use resultbudget::mcp::{CallInfo, McpLimits, Projector, Treat};
use resultbudget::{Budget, Limits};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Whether the bench binary was started by `cargo bench` (criterion passes
/// `--bench`); otherwise it runs in criterion's test mode.
pub fn bench_mode() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// Divisor applied to generated input sizes: 1 under `cargo bench`, 64 in test
/// mode. `RB_BENCH_SCALE` overrides it.
pub fn scale_div() -> usize {
    if let Some(v) = std::env::var("RB_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
    {
        return v.max(1);
    }
    if bench_mode() {
        1
    } else {
        64
    }
}

/// `n / scale_div()`, but at least `min`.
pub fn scaled(n: usize, min: usize) -> usize {
    (n / scale_div()).max(min)
}

/// The workspace root (the parent of this crate).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// Cargo's target directory (`CARGO_TARGET_DIR`, else `target/` in the
/// workspace), where the benches leave their JSON results for `report.py`.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// Where the json-benchmark corpus lives: `shared/` beside the workspace
/// (read in place, never copied). `RB_JSON_BENCHMARK_DATA` overrides it.
pub fn corpus_dir() -> PathBuf {
    if let Ok(d) = std::env::var("RB_JSON_BENCHMARK_DATA") {
        return PathBuf::from(d);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpora/json-benchmark/data")
}

/// Read one corpus file; `None` (with a note on stderr) when it is absent.
pub fn corpus(name: &str) -> Option<Vec<u8>> {
    let p = corpus_dir().join(name);
    match std::fs::read(&p) {
        Ok(b) => Some(b),
        Err(e) => {
            eprintln!("note: skipping {}: {e}", p.display());
            None
        }
    }
}

/// A tiny deterministic generator (xorshift64*).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Remove insignificant whitespace from valid JSON: what the engine's
/// pass-through output is (the engine tests' oracle, shared).
#[path = "../../engine/tests/common/strip.rs"]
mod strip;
pub use strip::strip_ws;

/// JSON-encoded string content (no quotes) of about `bytes` bytes, rich in
/// escapes (`\n`, `\"`, `\\`, `\t`, `\u00e9`, `\uD83D\uDE00`) and raw UTF-8
/// (`é`, `日本`, `😀`), between runs of ASCII words. Always valid, never ends
/// inside a unit.
pub fn escape_rich_text(bytes: usize, seed: u64) -> Vec<u8> {
    const SPECIAL: &[&[u8]] = &[
        b"\\n",
        b"\\\"",
        b"\\u00e9",
        b"\\uD83D\\uDE00",
        "é".as_bytes(),
        "日本".as_bytes(),
        "😀".as_bytes(),
        b"\\\\",
        b"\\t",
        b"\\n",
    ];
    text_with(bytes, seed, SPECIAL)
}

/// Like [`escape_rich_text`], but escaped the way `JSON.stringify`, pydantic
/// and serde write text (a source file, a log): one-character escapes only,
/// non-ASCII left raw. Same words, same density of special units.
pub fn one_char_escaped_text(bytes: usize, seed: u64) -> Vec<u8> {
    const SPECIAL: &[&[u8]] = &[
        b"\\n",
        b"\\\"",
        b"\\n",
        b"\\n",
        "é".as_bytes(),
        "日本".as_bytes(),
        b"\\\"",
        b"\\\\",
        b"\\t",
        b"\\n",
    ];
    text_with(bytes, seed, SPECIAL)
}

/// About `bytes` of runs of ASCII words, each run followed by one unit drawn
/// from `special`.
fn text_with(bytes: usize, seed: u64, special: &[&[u8]]) -> Vec<u8> {
    const WORDS: &[&[u8]] = &[
        b"the ",
        b"quick ",
        b"brown ",
        b"fox ",
        b"jumps ",
        b"over ",
        b"lazy ",
        b"dog ",
        b"error: ",
        b"line ",
        b"0123456789 ",
        b"INFO ",
        b"request_id=abc123 ",
    ];
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(bytes + 64);
    while out.len() < bytes {
        // On average about one special unit per ~24 bytes of text.
        let words = 1 + rng.below(6);
        for _ in 0..words {
            out.extend_from_slice(WORDS[rng.below(WORDS.len() as u64) as usize]);
        }
        out.extend_from_slice(special[rng.below(special.len() as u64) as usize]);
    }
    out
}

/// Base64 (standard alphabet, padded) of `raw` pseudo-random bytes.
pub fn base64_blob(raw: usize, seed: u64) -> Vec<u8> {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut rng = Rng::new(seed);
    let data: Vec<u8> = (0..raw).map(|_| rng.next_u64() as u8).collect();
    let mut out = Vec::with_capacity(raw.div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        out.push(A[(n >> 18) as usize & 63]);
        out.push(A[(n >> 12) as usize & 63]);
        out.push(if c.len() > 1 {
            A[(n >> 6) as usize & 63]
        } else {
            b'='
        });
        out.push(if c.len() > 2 {
            A[n as usize & 63]
        } else {
            b'='
        });
    }
    out
}

/// A compact `tools/call` response line (no trailing newline) whose `result`
/// is `result_json`.
pub fn response_line(id: u64, result_json: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(result_json.len() + 48);
    v.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    v.extend_from_slice(id.to_string().as_bytes());
    v.extend_from_slice(b",\"result\":");
    v.extend_from_slice(result_json);
    v.push(b'}');
    v
}

/// A tools/call response whose `content[0].text` is `text_bytes` of
/// escape-rich text.
pub fn mcp_text(text_bytes: usize) -> Vec<u8> {
    mcp_text_of(&escape_rich_text(text_bytes, 0x5EED))
}

/// A tools/call response whose `content[0].text` is `text_bytes` of
/// [`one_char_escaped_text`].
pub fn mcp_code_text(text_bytes: usize) -> Vec<u8> {
    mcp_text_of(&one_char_escaped_text(text_bytes, 0x5EED))
}

fn mcp_text_of(text: &[u8]) -> Vec<u8> {
    let mut r = Vec::with_capacity(text.len() + 64);
    r.extend_from_slice(b"{\"content\":[{\"type\":\"text\",\"text\":\"");
    r.extend_from_slice(text);
    r.extend_from_slice(b"\"}],\"isError\":false}");
    response_line(1, &r)
}

/// One item of the structured list: a few fields of every JSON kind.
pub fn list_item(i: usize, out: &mut Vec<u8>) {
    use std::io::Write;
    let _ = write!(
        out,
        "{{\"id\":{i},\"name\":\"item-{i}\",\"price\":{}.{:02},\"tags\":[\"red\",\"blue\"],\"active\":{},\"owner\":null}}",
        i % 1000,
        i % 100,
        if i.is_multiple_of(3) { "true" } else { "false" }
    );
}

/// A JSON array of `n` list items (a generic document).
pub fn json_list(n: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(n * 96 + 2);
    v.push(b'[');
    for i in 0..n {
        if i > 0 {
            v.push(b',');
        }
        list_item(i, &mut v);
    }
    v.push(b']');
    v
}

/// A tools/call response whose `structuredContent.items` holds `n` items.
pub fn mcp_list(n: usize) -> Vec<u8> {
    let mut r = Vec::with_capacity(n * 96 + 128);
    r.extend_from_slice(b"{\"content\":[{\"type\":\"text\",\"text\":\"");
    r.extend_from_slice(n.to_string().as_bytes());
    r.extend_from_slice(b" rows\"}],\"structuredContent\":{\"items\":");
    r.extend_from_slice(&json_list(n));
    r.extend_from_slice(b"}}");
    response_line(2, &r)
}

/// One `depth`-deep chain of objects: `{"depth":0,"child":{"depth":1,…"child":null}…}`.
pub fn deep_tree(depth: usize, out: &mut Vec<u8>) {
    for d in 0..depth {
        out.extend_from_slice(b"{\"depth\":");
        out.extend_from_slice(d.to_string().as_bytes());
        out.extend_from_slice(b",\"child\":");
    }
    out.extend_from_slice(b"null");
    for _ in 0..depth {
        out.push(b'}');
    }
}

/// A tools/call response whose `structuredContent.trees` holds `trees` chains,
/// each `depth` objects deep.
pub fn mcp_deep(depth: usize, trees: usize) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(
        b"{\"content\":[{\"type\":\"text\",\"text\":\"nested\"}],\"structuredContent\":{\"trees\":[",
    );
    for t in 0..trees {
        if t > 0 {
            r.push(b',');
        }
        deep_tree(depth, &mut r);
    }
    r.extend_from_slice(b"]}}");
    response_line(3, &r)
}

/// A tools/call response with a short text block and an image block whose
/// base64 `data` encodes `raw` bytes.
pub fn mcp_image(raw: usize) -> Vec<u8> {
    let blob = base64_blob(raw, 0xB10B);
    let mut r = Vec::with_capacity(blob.len() + 128);
    r.extend_from_slice(
        b"{\"content\":[{\"type\":\"text\",\"text\":\"the chart\"},{\"type\":\"image\",\"data\":\"",
    );
    r.extend_from_slice(&blob);
    r.extend_from_slice(b"\",\"mimeType\":\"image/png\"}]}");
    response_line(4, &r)
}

/// Time two runs one after the other, again and again in one process, for
/// `secs` seconds and at least `min_pairs` pairs, after one warm-up run of
/// each: `run(false)` is the first, `run(true)` the second. Returns the
/// pairs' times, `(first, second)`. With `swap`, every other pair runs the
/// second before the first. Drift of the machine's speed slower than a pair
/// hits both alike, so a ratio of one pair's times is steadier than a ratio of
/// two separately measured medians.
pub fn alternate(
    secs: f64,
    min_pairs: usize,
    swap: bool,
    run: &mut dyn FnMut(bool),
) -> Vec<(f64, f64)> {
    let mut time = |second: bool| {
        let t = Instant::now();
        run(second);
        t.elapsed().as_secs_f64()
    };
    time(false);
    time(true);
    let mut pairs = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs_f64(secs) || pairs.len() < min_pairs {
        let pair = if swap && pairs.len() % 2 == 1 {
            let t2 = time(true);
            (time(false), t2)
        } else {
            let t1 = time(false);
            (t1, time(true))
        };
        pairs.push(pair);
    }
    pairs
}

/// Each side's best (shortest) time over the pairs of [`alternate`].
pub fn bests(pairs: &[(f64, f64)]) -> (f64, f64) {
    pairs
        .iter()
        .fold((f64::MAX, f64::MAX), |(a, b), &(x, y)| (a.min(x), b.min(y)))
}

/// The median and quartiles of `v` (NaN when it is empty).
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    pub median: f64,
    pub q1: f64,
    pub q3: f64,
}

impl Spread {
    pub fn of(mut v: Vec<f64>) -> Spread {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let at = |k: usize| v.get(k).copied().unwrap_or(f64::NAN);
        Spread {
            median: at(n / 2),
            q1: at(n / 4),
            q3: at(3 * n / 4),
        }
    }
}

/// Feed size of the benches' main runs.
pub const CHUNK: usize = 64 * 1024;
/// Feed size of the 4 KiB pass-through runs.
pub const SMALL_CHUNK: usize = 4 * 1024;

/// Full-size generated inputs (the benches scale them down in test mode):
/// `mcp_text`'s text bytes, `mcp_list`'s items, `mcp_deep`'s depth and trees,
/// `mcp_image`'s raw bytes.
pub const TEXT_BYTES: usize = 20 << 20;
pub const LIST_ITEMS: usize = 300_000;
pub const DEEP: usize = 200;
pub const DEEP_TREES: usize = 1_000;
pub const IMAGE_RAW: usize = 3 << 19; // 1.5 MiB raw = 2 MiB of base64

/// The engine under test, either way: the generic `Budget` for one JSON
/// document, the MCP `Projector` for one tools/call response line.
pub enum Engine {
    Generic(Box<Budget>),
    Mcp(Box<Projector>),
}

impl Engine {
    pub fn generic(lim: Limits) -> Engine {
        Engine::Generic(Box::new(Budget::new(lim).expect("valid limits")))
    }

    pub fn mcp(lim: McpLimits) -> Engine {
        Engine::Mcp(Box::new(Projector::new(lim).expect("valid limits")))
    }

    /// Budget `input` fed in `chunk`-byte pieces into `out` (cleared first);
    /// returns the record's `omitted_count`.
    pub fn run(&mut self, input: &[u8], chunk: usize, out: &mut Vec<u8>) -> u64 {
        out.clear();
        self.drive(input, chunk, out, |_| {})
    }

    /// [`Engine::run`] as a streaming writer runs it: each feed's output is
    /// handed on (here to `black_box`) and `out` cleared, so the output
    /// buffer stays small and hot (what the proxy and the `Write` adapter
    /// do). Returns the bytes written in all.
    pub fn run_drained(&mut self, input: &[u8], chunk: usize, out: &mut Vec<u8>) -> usize {
        out.clear();
        let mut total = 0;
        let mut hand_on = |out: &mut Vec<u8>| {
            total += std::hint::black_box(&*out).len();
            out.clear();
        };
        self.drive(input, chunk, out, &mut hand_on);
        hand_on(out);
        total
    }

    /// Feed `input` in `chunk`-byte pieces, calling `after_feed` after each
    /// feed, then finish; returns the number of omitted items.
    fn drive(
        &mut self,
        input: &[u8],
        chunk: usize,
        out: &mut Vec<u8>,
        mut after_feed: impl FnMut(&mut Vec<u8>),
    ) -> u64 {
        match self {
            Engine::Generic(b) => {
                b.reset();
                for c in input.chunks(chunk) {
                    b.feed(c, out).expect("valid input");
                    after_feed(out);
                }
                b.finish(out).expect("complete input").omitted_count()
            }
            Engine::Mcp(p) => {
                p.begin(Treat::ToolResult(CallInfo::default()));
                for c in input.chunks(chunk) {
                    p.feed(c, out).expect("valid input");
                    after_feed(out);
                }
                p.finish(out).expect("complete input").omitted_count()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_lengths() {
        assert_eq!(base64_blob(3, 1).len(), 4);
        assert_eq!(base64_blob(4, 1).len(), 8);
        assert!(base64_blob(5, 1).ends_with(b"="));
    }

    #[test]
    fn deep_tree_shape() {
        let mut v = Vec::new();
        deep_tree(2, &mut v);
        assert_eq!(v, b"{\"depth\":0,\"child\":{\"depth\":1,\"child\":null}}");
    }
}
