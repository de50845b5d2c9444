//! Real recorded MCP traffic (`shared/captures`, read in place) through the
//! projection: every server→client line gets `ToolResult` treatment when it is
//! a `tools/call` result (a result with `content`, `structuredContent` or
//! `isError`, or — in the tee recordings — the answer to a `tools/call` or
//! `tasks/result` request) and `Pass` otherwise.
//!
//! * Under the default limits every line comes out byte-identical.
//! * Under tight limits every bound holds and the record is exact (checked
//!   against the cut sites derived from input and output).
//! * Any chunking gives the same bytes and record.
mod mcp_support;

use mcp_support::*;
use resultbudget::mcp::{McpLimits, Treat};

const CAPTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/captures");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    C2s,
    S2c,
}

struct Line {
    file: String,
    no: usize,
    dir: Dir,
    bytes: Vec<u8>,
    tool_result: bool,
}

fn is_tool_result_shape(v: &serde_json::Value) -> bool {
    v.get("result")
        .and_then(|r| r.as_object())
        .is_some_and(|r| {
            r.contains_key("content")
                || r.contains_key("structuredContent")
                || r.contains_key("isError")
        })
}

/// Every JSON-RPC line of every capture, with its direction and treatment.
fn load() -> Vec<Line> {
    let mut names: Vec<String> = std::fs::read_dir(CAPTURES)
        .unwrap_or_else(|e| panic!("reading {CAPTURES}: {e}"))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut lines = Vec::new();
    for name in names {
        let text = std::fs::read_to_string(format!("{CAPTURES}/{name}")).unwrap();
        let mut raw: Vec<(Dir, String)> = Vec::new();
        if name.ends_with(".tee.jsonl") {
            for l in text.lines().filter(|l| !l.trim().is_empty()) {
                let w: serde_json::Value = serde_json::from_str(l).expect("tee wrapper");
                let dir = match w["dir"].as_str() {
                    Some("c2s") => Dir::C2s,
                    Some("s2c") => Dir::S2c,
                    d => panic!("bad dir {d:?} in {name}"),
                };
                raw.push((dir, w["line"].as_str().expect("line").to_string()));
            }
        } else if name.ends_with(".jsonl") {
            for l in text.lines().filter(|l| !l.trim().is_empty()) {
                raw.push((Dir::S2c, l.to_string()));
            }
        } else if name.ends_with(".sse") {
            for l in text.lines() {
                if let Some(d) = l.strip_prefix("data: ") {
                    if d.starts_with('{') {
                        raw.push((Dir::S2c, d.to_string()));
                    }
                }
            }
        } else if name.ends_with(".http") {
            for l in text.lines() {
                if let Some(at) = l.find("{\"") {
                    // The body follows the headers on the same line as the next
                    // status line at most: take the JSON value that starts here.
                    let body = &l[at..];
                    let mut de =
                        serde_json::Deserializer::from_str(body).into_iter::<serde_json::Value>();
                    if let Some(Ok(_)) = de.next() {
                        raw.push((Dir::S2c, body[..de.byte_offset()].to_string()));
                    }
                }
            }
        }
        // Requests seen so far in a tee recording: id -> method.
        let mut methods: std::collections::HashMap<String, String> = Default::default();
        for (no, (dir, l)) in raw.into_iter().enumerate() {
            let v: serde_json::Value =
                serde_json::from_str(&l).unwrap_or_else(|e| panic!("{name}:{no}: not JSON: {e}"));
            let id = v.get("id").map(|i| i.to_string());
            if dir == Dir::C2s {
                if let (Some(id), Some(m)) = (&id, v.get("method").and_then(|m| m.as_str())) {
                    methods.insert(id.clone(), m.to_string());
                }
            }
            let answers = id
                .as_ref()
                .and_then(|i| methods.get(i))
                .map(|m| m == "tools/call" || m == "tasks/result");
            let tool_result = dir == Dir::S2c
                && v.get("result").is_some()
                && (is_tool_result_shape(&v) || answers == Some(true));
            if let (Dir::S2c, Some(false), true) = (dir, answers, is_tool_result_shape(&v)) {
                panic!("{name}:{no}: a tool-result shape answering another method");
            }
            lines.push(Line {
                file: name.clone(),
                no,
                dir,
                bytes: l.into_bytes(),
                tool_result,
            });
        }
    }
    lines
}

fn treat(l: &Line) -> Treat {
    if l.tool_result {
        tool()
    } else {
        Treat::Pass
    }
}

#[test]
fn captures_are_found_and_classified() {
    let lines = load();
    let tools = lines.iter().filter(|l| l.tool_result).count();
    let s2c = lines.iter().filter(|l| l.dir == Dir::S2c).count();
    let c2s = lines.iter().filter(|l| l.dir == Dir::C2s).count();
    assert!(tools >= 25, "only {tools} tool results found");
    assert!(s2c > tools + 20);
    assert_eq!(c2s, 17, "client lines in the tee recordings");
    // A few known ones.
    for (file, needle) in [
        ("everything-echo-small.jsonl", "Echo: hello"),
        ("everything-tiny-image.jsonl", "\"type\":\"image\""),
        ("everything-embedded-resource-blob.jsonl", "\"blob\""),
        ("pyserver-legacy-rows-structured.jsonl", "structuredContent"),
        ("everything-invalid-args.jsonl", "\"isError\":true"),
    ] {
        assert!(
            lines.iter().any(|l| l.file == file
                && l.tool_result
                && String::from_utf8_lossy(&l.bytes).contains(needle)),
            "{file} not classified as a tool result"
        );
    }
    // tools/list and initialize results are not tool results.
    assert!(lines
        .iter()
        .filter(|l| String::from_utf8_lossy(&l.bytes).contains("\"tools\":[{"))
        .all(|l| !l.tool_result));
}

#[test]
fn captures_under_default_limits_are_byte_identical() {
    let mut p = projector(McpLimits::DEFAULT);
    for l in load() {
        for chunk in [l.bytes.len(), 1, 7, BIG_CHUNK] {
            let r = run_with(&mut p, treat(&l), &l.bytes, chunk);
            assert_eq!(
                String::from_utf8_lossy(&r.out),
                String::from_utf8_lossy(&l.bytes),
                "{}:{} changed (chunk {chunk})",
                l.file,
                l.no
            );
            assert!(!r.rec.truncated, "{}:{}", l.file, l.no);
        }
        if l.tool_result {
            let r = run_with(&mut p, treat(&l), &l.bytes, l.bytes.len());
            check_message(&McpLimits::DEFAULT, &l.bytes, &r);
            // A typed tool within the ceiling passes whole as well.
            for ro in [true, false] {
                let r = run_with(&mut p, typed("t", ro, None), &l.bytes, 64);
                assert_eq!(r.out, l.bytes, "{}:{} typed", l.file, l.no);
            }
        }
    }
}

fn tight_limit_sets() -> Vec<McpLimits> {
    vec![
        McpLimits {
            max_result_bytes: 1024,
            max_text_bytes: 300,
            max_text_block_bytes: 120,
            max_content_blocks: 2,
            max_list_items: 2,
            max_map_keys: 3,
            max_string_bytes: 16,
            max_depth: 2,
            max_structured_bytes: 200,
            ..McpLimits::DEFAULT
        },
        McpLimits {
            max_result_bytes: 1024,
            ..McpLimits::UNLIMITED
        },
        McpLimits {
            max_text_block_bytes: 60,
            max_string_bytes: 8,
            max_list_items: 1,
            ..McpLimits::DEFAULT
        },
        McpLimits {
            max_result_bytes: 1024,
            max_text_bytes: 0,
            max_text_block_bytes: 0,
            max_content_blocks: 0,
            max_list_items: 0,
            max_map_keys: 0,
            max_string_bytes: 0,
            max_depth: 0,
            max_structured_bytes: 0,
            ..McpLimits::DEFAULT
        },
        McpLimits {
            max_result_bytes: 1200,
            max_content_blocks: 1,
            max_map_keys: 1,
            max_depth: 1,
            ..McpLimits::DEFAULT
        },
    ]
}

#[test]
fn captures_under_tight_limits_hold_every_bound_with_an_exact_record() {
    let lines = load();
    let mut cut = 0;
    let mut failures = Vec::new();
    for (set, lim) in tight_limit_sets().into_iter().enumerate() {
        let mut p = projector(lim);
        for l in &lines {
            let r = run_with(&mut p, treat(l), &l.bytes, BIG_CHUNK);
            if !l.tool_result {
                assert_eq!(r.out, l.bytes, "Pass line {}:{} changed", l.file, l.no);
                continue;
            }
            match std::panic::catch_unwind(|| check_message(&lim, &l.bytes, &r)) {
                Ok(c) => cut += usize::from(!c.sites.is_empty()),
                Err(e) => {
                    let msg = e
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    let first = msg.lines().next().unwrap_or("").to_string();
                    failures.push(format!("limit set {set}, {}:{}: {first}", l.file, l.no));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} capture lines failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        cut > 60,
        "tight limits should cut many capture lines, cut {cut}"
    );
}

#[test]
fn captures_under_tight_limits_do_not_depend_on_chunking() {
    let lines = load();
    let mut rng = Rng(0x5eed);
    for lim in tight_limit_sets() {
        let mut p = projector(lim);
        for l in lines.iter().filter(|l| l.tool_result) {
            let whole = run_with(&mut p, tool(), &l.bytes, l.bytes.len());
            let ones = run_with(&mut p, tool(), &l.bytes, 1);
            assert_eq!(whole, ones, "{}:{} 1-byte chunks", l.file, l.no);
            if l.bytes.len() <= 1500 {
                for cut in 1..l.bytes.len() {
                    let r = run_split_with(&mut p, tool(), &l.bytes, &[cut]);
                    assert_eq!(whole, r, "{}:{} split at {cut}", l.file, l.no);
                }
            } else {
                for _ in 0..50 {
                    let cuts = random_cuts(&mut rng, l.bytes.len(), 200);
                    let r = run_split_with(&mut p, tool(), &l.bytes, &cuts);
                    assert_eq!(whole, r, "{}:{} random chunks {cuts:?}", l.file, l.no);
                }
            }
        }
    }
}

#[test]
fn captures_as_typed_tools_are_whole_or_an_error() {
    let lim = McpLimits {
        max_result_bytes: 1024,
        ..McpLimits::DEFAULT
    };
    let mut failed = 0;
    let mut p = projector(lim);
    for l in load().iter().filter(|l| l.tool_result) {
        let doc = parse(&l.bytes).unwrap();
        let id = doc.get("id").expect("id").raw(&l.bytes).to_vec();
        let id_s = String::from_utf8(id.clone()).unwrap();
        let result_len = doc.get("result").unwrap().len();
        for ro in [true, false] {
            let t = typed("captured_tool", ro, Some(&id_s));
            let r = run_with(&mut p, t, &l.bytes, 5);
            if r.typed_failed {
                failed += 1;
                check_typed_error(&lim.whole_only(), &l.bytes, &r, "captured_tool", ro, &id);
                check_message(&lim.whole_only(), &l.bytes, &r);
            } else {
                // Whole (only non-standard fields could go).
                let c = check_message(&lim.whole_only(), &l.bytes, &r);
                assert!(c.sites.iter().all(|s| s.kinds == ["nonstandard_field"]));
                assert!((result_len as u64) < lim.max_result_bytes);
            }
        }
    }
    assert!(
        failed >= 8,
        "some captures exceed 1024 bytes, failed {failed}"
    );
}
