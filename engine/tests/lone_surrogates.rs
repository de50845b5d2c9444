//! Lone surrogate escapes (`"\ud83d"`), read as characters when turned on
//! (`set_lone_surrogates`), against an oracle that needs no new code: the same
//! engine, strict, on the input with every lone surrogate escape replaced by
//! `\ufffd`. That escape has the same length (6 bytes) and the same decoded
//! size (U+FFFD, 3 bytes), so every budget, cut and record must come out the
//! same, and the output must be the lenient output with the same replacement.
//! Errors must match in kind and offset. Run at every split of small inputs,
//! in 1-byte chunks, and at random splits.
#[path = "../../fuzz/checks.rs"]
mod checks;
#[path = "common/suite.rs"]
mod suite;

use resultbudget::guard::{ArgCaps, Guard};
use resultbudget::mcp::{CallInfo, McpLimits, Projector, Treat};
use resultbudget::{Budget, Error, Limits};

/// Every lone surrogate escape written `\ufffd` (shared with the fuzz checks).
fn map_lone(s: &[u8]) -> Vec<u8> {
    checks::lone_as_replacement(s)
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

/// String content units; lone surrogates next to everything else, so that
/// they also meet each other (`\ud83d` then `\uDC00` makes a pair).
const UNITS: &[&str] = &[
    "a",
    "xyz",
    "é",
    "€",
    "😀",
    "\\n",
    "\\\"",
    "\\\\",
    "\\u0041",
    "\\u00e9",
    "\\u20AC",
    "\\ud83d\\ude00",
    "\\ud83d",
    "\\uD83D",
    "\\uDBFF",
    "\\uDC00",
    "\\udfff",
];

fn string(r: &mut Rng, out: &mut Vec<u8>, max_units: u64) {
    out.push(b'"');
    for _ in 0..r.below(max_units + 1) {
        out.extend_from_slice(r.pick(UNITS).as_bytes());
    }
    out.push(b'"');
}

fn value(r: &mut Rng, out: &mut Vec<u8>, depth: u32) {
    match r.below(if depth > 3 { 3 } else { 6 }) {
        0 => out.extend_from_slice(r.pick(&["1", "-2.5e3", "true", "null"]).as_bytes()),
        1 | 2 => string(r, out, 8),
        3 => {
            out.push(b'[');
            for k in 0..r.below(4) {
                if k > 0 {
                    out.push(b',');
                }
                value(r, out, depth + 1);
            }
            out.push(b']');
        }
        _ => {
            out.push(b'{');
            for k in 0..r.below(4) {
                if k > 0 {
                    out.push(b',');
                }
                // Keys with a counter so they differ.
                out.extend_from_slice(format!("\"k{k}").as_bytes());
                let mut key = Vec::new();
                string(r, &mut key, 2);
                out.extend_from_slice(&key[1..]);
                out.push(b':');
                value(r, out, depth + 1);
            }
            out.push(b'}');
        }
    }
}

/// Output and record, or the error, of a `Budget` fed in chunks ending at `bounds`.
fn budget(lim: Limits, lenient: bool, doc: &[u8], bounds: &[usize]) -> Result<Vec<u8>, Error> {
    let mut b = Budget::new(lim).unwrap();
    b.set_lone_surrogates(lenient);
    let mut out = Vec::new();
    for piece in checks::chunks(doc, bounds) {
        b.feed(piece, &mut out)?;
    }
    let rec = b.finish(&mut out)?.to_json();
    out.push(b'\n');
    out.extend_from_slice(&rec);
    Ok(out)
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn random_limits(r: &mut Rng) -> Limits {
    let small = |r: &mut Rng, n: u64| {
        if r.below(3) == 0 {
            u64::MAX
        } else {
            r.below(n)
        }
    };
    Limits {
        max_list_items: small(r, 4),
        max_map_keys: small(r, 4),
        max_string_bytes: small(r, 24),
        max_depth: if r.below(3) == 0 {
            u32::MAX
        } else {
            r.below(4) as u32
        },
        max_result_bytes: if r.below(3) == 0 {
            u64::MAX
        } else {
            8 + r.below(160)
        },
        max_nesting: 64,
    }
}

/// All the ways a document is fed: whole, 1-byte chunks, every single split
/// (for short documents), and a few random multi-splits.
fn splits(r: &mut Rng, n: usize) -> Vec<Vec<usize>> {
    let mut v = vec![vec![], (1..n).collect()];
    if n <= 160 {
        v.extend((1..n).map(|k| vec![k]));
    }
    for _ in 0..4 {
        let mut b: Vec<usize> = (0..r.below(6))
            .map(|_| r.below(n as u64) as usize)
            .collect();
        b.sort();
        v.push(b);
    }
    v
}

#[test]
fn the_budget_reads_lone_surrogates_as_the_replacement_character() {
    let mut r = Rng(0x9E37_79B9_7F4A_7C15);
    let mut lone_kept = 0;
    for case in 0..1500 {
        let mut doc = Vec::new();
        value(&mut r, &mut doc, 0);
        let lim = random_limits(&mut r);
        let mapped = map_lone(&doc);
        let want = budget(lim, false, &mapped, &[]);
        for bounds in splits(&mut r, doc.len()) {
            let got = budget(lim, true, &doc, &bounds);
            match (&got, &want) {
                (Ok(g), Ok(w)) => {
                    assert_eq!(
                        show(&map_lone(g)),
                        show(w),
                        "case {case} {lim:?} at {bounds:?} on {}",
                        show(&doc)
                    );
                    if bounds.is_empty() && g != w {
                        lone_kept += 1;
                    }
                }
                (Err(g), Err(w)) => assert_eq!(
                    (g.kind(), g.offset()),
                    (w.kind(), w.offset()),
                    "case {case} on {}",
                    show(&doc)
                ),
                _ => panic!(
                    "case {case} {lim:?} at {bounds:?}: {got:?} vs {want:?} on {}",
                    show(&doc)
                ),
            }
        }
        // Strict, the document is refused exactly when it has a lone surrogate.
        let strict = budget(lim, false, &doc, &[]);
        assert_eq!(
            strict.is_err(),
            mapped != doc,
            "case {case} on {}",
            show(&doc)
        );
    }
    // Outputs that kept a lone surrogate escape, unchanged.
    assert!(
        lone_kept > 300,
        "only {lone_kept} outputs kept a lone surrogate"
    );
}

#[test]
fn broken_escapes_after_a_high_surrogate_fail_where_the_oracle_fails() {
    let docs: &[&[u8]] = &[
        br#"["\ud83d\x"]"#,
        br#"["\ud83d\u00zz"]"#,
        br#"["\ud83d\uDC0"]"#,
        br#"["\ud83d"#,
        br#"["\ud83d\"#,
        br#"["\ud83d\u"#,
        br#"["\ud83d\ud83d\"]"#,
        b"[\"\\ud83d\x01\"]",
        b"[\"\\ud83d\xff\"]",
        br#"{"\ud83d\q":1}"#,
    ];
    for doc in docs {
        let want = budget(Limits::UNLIMITED, false, &map_lone(doc), &[]).unwrap_err();
        for bounds in splits(&mut Rng(7), doc.len()) {
            let got = budget(Limits::UNLIMITED, true, doc, &bounds).unwrap_err();
            assert_eq!(
                (got.kind(), got.offset()),
                (want.kind(), want.offset()),
                "{}",
                show(doc)
            );
        }
    }
}

#[test]
fn the_suites_surrogate_files_pass_unchanged_when_lone_surrogates_are_on() {
    let files: Vec<_> = suite::files("i_")
        .into_iter()
        .filter(|(name, _)| name.contains("surrogate") && !name.contains("UTF8"))
        .collect();
    assert_eq!(
        files.len(),
        10,
        "{:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for (name, doc) in files {
        let doc: Vec<u8> = doc.trim_ascii_end().to_vec();
        for bounds in splits(&mut Rng(11), doc.len()) {
            let got = budget(Limits::UNLIMITED, true, &doc, &bounds)
                .unwrap_or_else(|e| panic!("{name} at {bounds:?}: {e}"));
            let out = got.split(|&b| b == b'\n').next().unwrap();
            assert_eq!(show(out), show(&doc), "{name} at {bounds:?}");
        }
        // Still refused by default.
        assert!(
            budget(Limits::UNLIMITED, false, &doc, &[]).is_err(),
            "{name}"
        );
    }
}

fn tool() -> Treat {
    Treat::ToolResult(CallInfo {
        tool: Some("t".into()),
        typed: false,
        read_only: true,
        request_id: None,
        modern: false,
    })
}

fn project(lim: McpLimits, lenient: bool, line: &[u8], bounds: &[usize]) -> Result<Vec<u8>, Error> {
    let mut p = Projector::new(lim).unwrap();
    p.set_lone_surrogates(lenient);
    p.begin(tool());
    let mut out = Vec::new();
    for piece in checks::chunks(line, bounds) {
        p.feed(piece, &mut out)?;
    }
    let rec = p.finish(&mut out)?.to_json();
    out.push(b'\n');
    out.extend_from_slice(&rec);
    Ok(out)
}

#[test]
fn tool_results_with_lone_surrogates_are_cut_as_if_they_were_the_replacement_character() {
    let mut r = Rng(0x2545_F491_4F6C_DD1D);
    let mut cut = 0;
    for case in 0..600 {
        // Text blocks, structured content, and a lone surrogate in an id.
        let mut line = br#"{"jsonrpc":"2.0","id":"#.to_vec();
        string(&mut r, &mut line, 2);
        line.extend_from_slice(br#","result":{"content":["#);
        for k in 0..1 + r.below(3) {
            if k > 0 {
                line.push(b',');
            }
            line.extend_from_slice(br#"{"type":"text","text":"#);
            string(&mut r, &mut line, 40);
            line.push(b'}');
        }
        line.extend_from_slice(br#"],"structuredContent":"#);
        let mut sc = Vec::new();
        while sc.first() != Some(&b'{') {
            sc.clear();
            value(&mut r, &mut sc, 0);
        }
        line.extend_from_slice(&sc);
        line.extend_from_slice(b"}}");
        let lim = McpLimits {
            max_text_bytes: r.below(80),
            max_text_block_bytes: 10 + r.below(60),
            max_string_bytes: r.below(20),
            max_list_items: r.below(3),
            max_map_keys: 1 + r.below(3),
            max_structured_bytes: 20 + r.below(200),
            ..McpLimits::DEFAULT
        };
        let want = project(lim, false, &map_lone(&line), &[]);
        for bounds in splits(&mut Rng(case + 1), line.len()) {
            let got = project(lim, true, &line, &bounds);
            match (&got, &want) {
                (Ok(g), Ok(w)) => {
                    assert_eq!(show(&map_lone(g)), show(w), "case {case} at {bounds:?}");
                    if bounds.is_empty() && show(g).contains("\"truncated\":true") {
                        cut += 1;
                    }
                }
                _ => panic!(
                    "case {case} at {bounds:?}: {got:?} vs {want:?} on {}",
                    show(&line)
                ),
            }
        }
    }
    assert!(cut > 300, "only {cut} results were cut");
}

/// Every verdict the guard gives on `line`, fed in chunks ending at `bounds`.
fn guard(lenient: bool, line: &[u8], bounds: &[usize]) -> String {
    let caps = ArgCaps {
        max_arg_string_bytes: 12,
        max_arg_string_chars: 5,
        ..ArgCaps::DEFAULT
    };
    let mut g = Guard::new(caps);
    g.set_lone_surrogates(lenient);
    g.reset();
    let mut early = None;
    for piece in checks::chunks(line, bounds) {
        if let Some(v) = g.feed(piece) {
            early.get_or_insert(v);
        }
    }
    let last = g.finish("t");
    // (Which cap a piece's early verdict names can depend on where the piece
    // ends; the proxy takes its answer from `finish`.)
    format!(
        "early {} {last:?} broken {}",
        early.is_some(),
        g.is_broken()
    )
}

#[test]
fn the_guard_measures_lone_surrogates_as_the_replacement_character() {
    let mut r = Rng(0xD1B5_4A32_D192_ED03);
    let mut refused = 0;
    for case in 0..800 {
        let mut line =
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":"#
                .to_vec();
        string(&mut r, &mut line, 6);
        line.extend_from_slice(br#","b":"#);
        value(&mut r, &mut line, 1);
        line.extend_from_slice(b"}}}");
        let want = guard(false, &map_lone(&line), &[]);
        assert!(!want.contains("broken true"), "{want} on {}", show(&line));
        for bounds in splits(&mut Rng(case + 3), line.len()) {
            let got = guard(true, &line, &bounds);
            assert_eq!(got, want, "case {case} at {bounds:?} on {}", show(&line));
        }
        refused += want.contains("Cap") as u32;
    }
    assert!(refused > 200, "only {refused} calls were refused");
}
