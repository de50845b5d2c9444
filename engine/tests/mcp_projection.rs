//! The MCP projection (`specs/mcp-result-contract.md`) on small, hand-made
//! results: byte-identity under budget, chunking independence, text cuts at
//! every position (escapes, surrogate pairs, raw multibyte UTF-8), the record
//! merged into the tool's `_meta`, forged records, number spelling, small
//! fields that must never be lost, and the typed-success rule.
mod mcp_support;

use mcp_support::*;
use resultbudget::mcp::{
    typed_error_text, CallInfo, McpLimits, Treat, MUTATION_TEXT, READ_ONLY_TEXT, RECEIPT_KEY,
    RECORD_KEY,
};

/// No per-element limit and a large ceiling: only what a test sets cuts.
const OPEN: McpLimits = McpLimits {
    max_result_bytes: 1 << 40,
    ..McpLimits::UNLIMITED
};

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Run whole, in 1-byte chunks and split at every point; all must agree.
fn run_all_splits(lim: McpLimits, treat: Treat, input: &[u8]) -> Run {
    let mut p = projector(lim);
    let whole = run_with(&mut p, treat.clone(), input, input.len().max(1));
    let ones = run_with(&mut p, treat.clone(), input, 1);
    assert_eq!(whole, ones, "1-byte chunks differ for {}", s(input));
    for cut in 1..input.len() {
        let r = run_split_with(&mut p, treat.clone(), input, &[cut]);
        assert_eq!(whole, r, "split at {cut} differs for {}", s(input));
    }
    whole
}

/// For larger messages: whole, 1-byte chunks and 100 random chunkings.
fn run_random_splits(lim: McpLimits, treat: Treat, input: &[u8]) -> Run {
    let mut p = projector(lim);
    let whole = run_with(&mut p, treat.clone(), input, input.len().max(1));
    let ones = run_with(&mut p, treat.clone(), input, 1);
    assert_eq!(whole, ones, "1-byte chunks differ");
    let mut rng = Rng(input.len() as u64 | 1);
    for _ in 0..100 {
        let cuts = random_cuts(&mut rng, input.len(), 512);
        let r = run_split_with(&mut p, treat.clone(), input, &cuts);
        assert_eq!(whole, r, "random chunking {cuts:?} differs");
    }
    whole
}

fn assert_identity(lim: McpLimits, treat: Treat, input: &[u8]) {
    let r = run_all_splits(lim, treat, input);
    assert_eq!(s(&r.out), s(input), "not byte-identical");
    assert!(!r.rec.truncated);
    assert_eq!(r.rec.omitted_count, 0);
    assert_eq!(r.rec.budget_kind, None);
    assert!(r.rec.omitted_paths.is_empty());
}

// ---------------------------------------------------------------------------
// Under budget: byte-identical
// ---------------------------------------------------------------------------

const UNDER_BUDGET: &[&str] = &[
    // TypeScript SDK order: result first, id last.
    r#"{"result":{"content":[{"type":"text","text":"Echo: hi"}]},"jsonrpc":"2.0","id":3}"#,
    r#"{"result":{"content":[{"type":"text","text":"x"}],"isError":true},"jsonrpc":"2.0","id":"req-7"}"#,
    // Python SDK order.
    r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"text":"a\nb","type":"text"}],"isError":false,"structuredContent":{"result":[{"id":0,"name":"user0"},{"id":1,"name":"user1"}]}}}"#,
    r#"{"jsonrpc":"2.0","id":5,"result":{"content":[{"text":"Unknown tool: nope","type":"text"}],"isError":true,"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"bigserver","version":""}}}}"#,
    // _meta first, escapes, non-ASCII, every block type.
    r#"{"jsonrpc":"2.0","id":9,"result":{"_meta":{"k":[1,2,{"x":null}]},"content":[{"type":"text","text":"caf\u00e9 \uD83D\uDE00 é 😀 \"q\" \\ \/","annotations":{"audience":["user"],"priority":0.5}},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"},{"type":"audio","data":"UklGRg==","mimeType":"audio/wav"},{"type":"resource","resource":{"uri":"file:///a","mimeType":"text/plain","text":"hello"}},{"type":"resource","resource":{"uri":"file:///b","blob":"AAEC"}},{"type":"resource_link","uri":"file:///c","name":"c"}]}}"#,
    // Empty content, structuredContent with awkward numbers.
    r#"{"jsonrpc":"2.0","id":0,"result":{"content":[],"structuredContent":{"big":123456789012345678901234567890,"inf":1E400,"neg":-0.0,"tiny":1e-400,"e":0.5E+3,"list":[true,false,null,"",{}]}}}"#,
    // A JSON-RPC error, as a server answers a call it cannot run.
    r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"Unknown tool: nope","data":{"tool":"nope"}}}"#,
    // A task-augmented call's CreateTaskResult and a 2026-07-28 result.
    r#"{"result":{"task":{"taskId":"bb2d","status":"working","ttl":300000,"pollInterval":1000}},"jsonrpc":"2.0","id":2}"#,
    r#"{"jsonrpc":"2.0","id":4,"result":{"resultType":"incomplete","inputRequests":{"r1":{"method":"elicitation/create","params":{}}},"requestState":"opaque-state"}}"#,
    r#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
];

#[test]
fn under_budget_results_are_byte_identical() {
    for msg in UNDER_BUDGET {
        assert_identity(McpLimits::DEFAULT, tool(), msg.as_bytes());
        let r = run(McpLimits::DEFAULT, tool(), msg.as_bytes(), 7);
        let c = check_message(&McpLimits::DEFAULT, msg.as_bytes(), &r);
        assert!(c.sites.is_empty());
        // A typed tool within the ceiling passes whole as well.
        assert_identity(McpLimits::DEFAULT, typed("t", true, None), msg.as_bytes());
    }
}

#[test]
fn a_tool_answers_json_rpc_error_is_bounded_as_a_result_is() {
    // Its message reaches the model as a result's text would; earlier builds
    // passed it on whole whatever its size.
    let big = "e".repeat(6_000);
    let input = format!(
        r#"{{"jsonrpc":"2.0","id":4,"error":{{"code":-32603,"message":"{big}","data":{{"trace":["{big}","{big}"],"n":[{}]}}}}}}"#,
        vec!["1"; 500].join(",")
    );
    let lim = McpLimits::DEFAULT;
    let r = run_random_splits(lim, tool(), input.as_bytes());
    let v: serde_json::Value = serde_json::from_slice(&r.out).expect("valid JSON");
    let err = serde_json::to_vec(&v["error"]).unwrap();
    assert!(err.len() as u64 <= lim.max_result_bytes, "{}", err.len());
    assert_eq!(v["error"]["code"], -32603);
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.len() as u64 <= lim.max_string_bytes, "{}", msg.len());
    // A prefix, as the generic budget cuts every string (no marker).
    assert!(big.starts_with(msg), "{msg}");
    assert_eq!(
        v["error"]["data"]["n"].as_array().unwrap().len() as u64,
        lim.max_list_items
    );
    assert_eq!(v["id"], 4);
    // Cut by the generic rules, at paths from the envelope (the record
    // itself is written only into a result, which this answer has none of).
    assert!(r.rec.truncated);
    assert!(
        r.rec.omitted_paths.contains(&"/error/message".to_string()),
        "{:?}",
        r.rec
    );
    // Under a ceiling smaller than what the generic limits keep, the ceiling wins.
    let small = McpLimits {
        max_result_bytes: 2048,
        ..lim
    };
    let r = run_random_splits(small, tool(), input.as_bytes());
    let v: serde_json::Value = serde_json::from_slice(&r.out).expect("valid JSON");
    let err = serde_json::to_vec(&v["error"]).unwrap();
    assert!(err.len() <= 2048, "{}", err.len());
    // Any other message's error passes whole.
    let r = run_random_splits(lim, Treat::Pass, input.as_bytes());
    assert_eq!(r.out, input.as_bytes());
}

#[test]
fn members_json_rpc_does_not_define_leave_a_tool_answer() {
    // Anything in a tool answer's envelope but jsonrpc, id, method, params,
    // result and error: dropped wherever it comes, whatever its size, and
    // counted (not recorded: the record lives in the result).
    let big = "j".repeat(5_000);
    let input = format!(
        r#"{{"x-first":[1,2],"jsonrpc":"2.0","id":0,"result":{{"content":[]}},"x-extra":{{"a":"{big}"}},"\u0078":1}}"#
    );
    let r = run_all_splits(McpLimits::DEFAULT, tool(), input.as_bytes());
    assert_eq!(
        s(&r.out),
        r#"{"jsonrpc":"2.0","id":0,"result":{"content":[]}}"#
    );
    assert!(!r.rec.truncated, "{:?}", r.rec);
    let mut p = resultbudget::mcp::Projector::new(McpLimits::DEFAULT).unwrap();
    p.begin(tool());
    let mut out = Vec::new();
    p.feed(input.as_bytes(), &mut out).unwrap();
    p.finish(&mut out).unwrap();
    assert_eq!(p.omitted_members(), 3);
    // A request the server sends while a call is pending keeps its params
    // whole, in any order of its members.
    let request = format!(
        r#"{{"params":{{"messages":[{{"role":"user","content":{{"type":"text","text":"{big}"}}}}]}},"jsonrpc":"2.0","id":1,"method":"sampling/createMessage"}}"#
    );
    assert_identity(McpLimits::DEFAULT, tool(), request.as_bytes());
    // Under Pass, nothing is dropped.
    assert_identity(McpLimits::DEFAULT, Treat::Pass, input.as_bytes());
}

#[test]
fn the_id_is_read_in_either_order() {
    let r = run(McpLimits::DEFAULT, tool(), UNDER_BUDGET[0].as_bytes(), 5);
    assert_eq!(r.id.as_deref(), Some(&b"3"[..]));
    let r = run(McpLimits::DEFAULT, tool(), UNDER_BUDGET[1].as_bytes(), 1);
    assert_eq!(r.id.as_deref(), Some(&br#""req-7""#[..]));
    let r = run(McpLimits::DEFAULT, tool(), UNDER_BUDGET[2].as_bytes(), 1);
    assert_eq!(r.id.as_deref(), Some(&b"3"[..]));
}

#[test]
fn pass_treatment_never_changes_a_byte() {
    let tight = McpLimits {
        max_result_bytes: 1024,
        max_text_bytes: 1,
        max_text_block_bytes: 1,
        max_content_blocks: 0,
        max_list_items: 0,
        max_map_keys: 0,
        max_string_bytes: 0,
        max_depth: 0,
        max_structured_bytes: 0,
        ..McpLimits::DEFAULT
    };
    let mut msgs: Vec<Vec<u8>> = UNDER_BUDGET.iter().map(|m| m.as_bytes().to_vec()).collect();
    msgs.push(br#"{"method":"notifications/progress","params":{"progress":1,"total":4,"progressToken":7},"jsonrpc":"2.0"}"#.to_vec());
    msgs.push(br#"{"jsonrpc":"2.0","id":4,"error":{"code":-32022,"message":"Unsupported","data":{"supported":["2026-07-28"]}}}"#.to_vec());
    msgs.push(br#"{"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}},"jsonrpc":"2.0","id":3}"#.to_vec());
    // A large tools/list result: Pass, so never cut even far over every limit.
    let mut big = br#"{"jsonrpc":"2.0","id":2,"result":{"tools":["#.to_vec();
    for i in 0..3000 {
        if i > 0 {
            big.push(b',');
        }
        big.extend_from_slice(
            format!(
                r#"{{"name":"tool{i}","description":"{}","inputSchema":{{"type":"object"}}}}"#,
                "d".repeat(50)
            )
            .as_bytes(),
        );
    }
    big.extend_from_slice(b"]}}");
    msgs.push(big);
    for m in &msgs {
        for chunk in [1usize, 3, 4096, m.len()] {
            let r = run(tight, Treat::Pass, m, chunk);
            assert_eq!(r.out, *m, "Pass changed {}", s(&m[..m.len().min(200)]));
            assert!(!r.rec.truncated);
        }
    }
}

// ---------------------------------------------------------------------------
// Chunking: every split point gives the same bytes and the same record
// ---------------------------------------------------------------------------

#[test]
fn every_split_point_gives_the_same_output_and_record() {
    let tight = McpLimits {
        max_result_bytes: 1024,
        max_text_bytes: 40,
        max_text_block_bytes: 30,
        max_content_blocks: 3,
        max_list_items: 2,
        max_map_keys: 2,
        max_string_bytes: 5,
        max_depth: 2,
        max_structured_bytes: 80,
        ..McpLimits::DEFAULT
    };
    let long = "0123456789".repeat(12);
    let msgs: Vec<String> = vec![
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"caf\u00e9 \uD83D\uDE00 é😀中 {long}"}},{{"type":"text","text":"{long}"}}],"isError":true}}}}"#
        ),
        format!(
            r#"{{"result":{{"_meta":{{"a":"{long}","b":[1,2,3]}},"content":[{{"type":"text","text":"x"}},{{"type":"text","text":"y"}},{{"type":"text","text":"z"}},{{"type":"text","text":"w"}}],"secret":"{long}","structuredContent":{{"a":[1,2,3],"b":{{"c":{{"d":{{}}}}}},"c":1}}}},"jsonrpc":"2.0","id":42}}"#
        ),
        format!(
            r#"{{"jsonrpc":"2.0","id":"x","result":{{"content":[{{"type":"image","data":"{}","mimeType":"image/png"}},{{"type":"text","text":"after"}}],"structuredContent":{{"n":[1E400,123456789012345678901234567890,-0.0]}}}}}}"#,
            "QUFB".repeat(300)
        ),
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"{long}"}}],"_meta":{{"resultbudget/truncation":{{"truncated":false}},"own":1}}}}}}"#
        ),
    ];
    for m in &msgs {
        let r = run_all_splits(tight, tool(), m.as_bytes());
        assert!(r.rec.truncated, "these messages are over budget: {m}");
        check_message(&tight, m.as_bytes(), &r);
        // And a typed tool: the same verdict at every split.
        let r = run_all_splits(tight, typed("t", false, Some("99")), m.as_bytes());
        if r.typed_failed {
            check_typed_error(&tight.whole_only(), m.as_bytes(), &r, "t", false, b"99");
        }
    }
}

/// A feed that begins inside a long kept text or blob copies its plain
/// prefix as it scans it (AVX2), where the whole message in one feed takes
/// the token path: the two must agree at every split. The strings here are
/// several 64-byte windows long, with an escape, raw UTF-8, a control-free
/// stop or a cut by the text limit in the middle of a window.
#[test]
fn long_plain_strings_agree_at_every_split() {
    let b64 = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0123456789+/".repeat(7);
    let text = format!(
        r"{}\n{}é{}\u00e9{}",
        "a".repeat(150),
        "b".repeat(90),
        "c".repeat(70),
        "d".repeat(130)
    );
    let msgs = [
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"image","data":"{b64}","mimeType":"image/png"}},{{"type":"text","text":"{text}"}}]}}}}"#
        ),
        format!(
            r#"{{"result":{{"content":[{{"type":"resource","resource":{{"uri":"file:///x","blob":"{b64}"}}}},{{"type":"resource","resource":{{"uri":"file:///y","text":"{text}"}}}}]}},"jsonrpc":"2.0","id":2}}"#
        ),
        // Strings the generic budget keeps: structuredContent and _meta.
        format!(
            r#"{{"jsonrpc":"2.0","id":3,"result":{{"content":[],"structuredContent":{{"b":"{b64}","t":["{text}"]}},"_meta":{{"m":"{text}"}}}}}}"#
        ),
    ];
    for m in &msgs {
        assert_identity(OPEN, tool(), m.as_bytes());
        // Texts and other strings cut inside the fused scan's window
        // (allowances of 100 and 260 bytes); blobs kept whole.
        for cap in [100, 260] {
            let lim = McpLimits {
                max_text_block_bytes: cap,
                max_string_bytes: cap,
                ..OPEN
            };
            let r = run_all_splits(lim, tool(), m.as_bytes());
            assert!(r.rec.truncated, "text over {cap} bytes is cut");
            check_message(&lim, m.as_bytes(), &r);
            if !m.contains("structuredContent") {
                assert!(s(&r.out).contains(&b64), "the blob is kept whole");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Text cuts at every position
// ---------------------------------------------------------------------------

/// JSON string content mixing every kind of unit: ASCII, simple escapes,
/// `\u00e9`, an escaped surrogate pair, raw 2-, 3- and 4-byte UTF-8.
const MIXED: &str = r#"ab\u00e9c\uD83D\uDE00dé😀中\n\"\\x\u4e2d\/é😀\uD83D\uDE00z"#;
/// The same kinds of unit without raw multibyte UTF-8 (escapes only). Chunked
/// runs of raw multibyte text are in `mcp_engine_bugs.rs` (the marker total
/// depends on chunking there).
const ESCAPED: &str = r#"ab\u00e9c\uD83D\uDE00d\n\"\\x\u4e2d\/\uD83D\uDE00z\t"#;

fn text_result(text_json: &str, tail: &str) -> Vec<u8> {
    envelope(
        format!(r#"{{"content":[{{"type":"text","text":"{text_json}"}}]{tail}}}"#).as_bytes(),
        1,
    )
}

fn decoded(json_inner: &str) -> String {
    serde_json::from_str(&format!("\"{json_inner}\"")).unwrap()
}

fn out_text(r: &Run, block: usize) -> String {
    let doc = parse_valid(&r.out);
    doc.get("result").unwrap().get("content").unwrap().items()[block]
        .get("text")
        .unwrap()
        .as_str()
        .unwrap()
        .to_string()
}

fn block_limit_sweep(unit: &str, chunked: bool) {
    let inner = unit.repeat(120 / decoded(unit).len() + 1);
    let full = decoded(&inner);
    let input = text_result(&inner, r#","isError":false"#);
    let mut last_kept = 0usize;
    for limit in 0..=(full.len() as u64 + 80) {
        let lim = McpLimits {
            max_text_block_bytes: limit,
            ..OPEN
        };
        let r = run(lim, tool(), &input, input.len());
        if chunked {
            for chunk in [1usize, 2, 5] {
                let c = run(lim, tool(), &input, chunk);
                assert_eq!(r, c, "chunk {chunk} limit {limit}");
            }
        }
        let c = check_message(&lim, &input, &r);
        let text = out_text(&r, 0);
        assert!(text.len() as u64 <= limit);
        if full.len() as u64 <= limit {
            assert_eq!(r.out, input, "fits at limit {limit}");
            continue;
        }
        assert_eq!(c.sites.len(), 1);
        assert_eq!(r.rec.budget_kind.as_deref(), Some("text_block_bytes"));
        assert_eq!(r.rec.omitted_paths, ["/content/0/text"]);
        assert_eq!(r.rec.omitted_count, 1);
        match split_marker(&text) {
            Some((kept, omitted, total)) => {
                assert!(full.starts_with(kept), "kept text is not a prefix");
                assert_eq!(total, full.len() as u64);
                assert_eq!(omitted, total - kept.len() as u64);
                assert!(
                    kept.len() >= last_kept,
                    "kept text shrank as the limit grew"
                );
                last_kept = kept.len();
            }
            None => {
                assert_eq!(
                    text, "",
                    "limit {limit}: a cut text is prefix+marker or empty"
                );
                let smallest = marker(full.len() as u64, full.len() as u64).len() as u64;
                assert!(
                    limit < smallest + 2,
                    "limit {limit}: room for a marker, got \"\""
                );
            }
        }
    }
    assert!(last_kept > 0);
}

#[test]
fn text_cut_by_block_limit_lands_on_every_position() {
    block_limit_sweep(MIXED, false);
}

#[test]
fn text_cut_by_block_limit_escapes_any_chunking() {
    block_limit_sweep(ESCAPED, true);
}

fn ceiling_sweep(unit: &str, chunked: bool) {
    let inner = unit.repeat(40);
    let full = decoded(&inner);
    let input = text_result(&inner, "");
    let mut seen_cut = 0;
    for ceiling in 1024..=1400u64 {
        let lim = McpLimits {
            max_result_bytes: ceiling,
            ..OPEN
        };
        let r = run(lim, tool(), &input, input.len());
        if chunked {
            for chunk in [1usize, 13] {
                let c = run(lim, tool(), &input, chunk);
                assert_eq!(r, c, "{chunk}-byte chunks, ceiling {ceiling}");
            }
        }
        let c = check_message(&lim, &input, &r);
        assert!(c.result_len as u64 <= ceiling);
        let text = out_text(&r, 0);
        assert_eq!(c.sites.len(), 1, "ceiling {ceiling}");
        assert_eq!(c.sites[0].path, "/content/0/text");
        assert_eq!(r.rec.budget_kind.as_deref(), Some("result_bytes"));
        if let Some((kept, _, _)) = split_marker(&text) {
            assert!(full.starts_with(kept));
            seen_cut += 1;
        }
    }
    assert!(seen_cut > 300);
}

#[test]
fn text_cut_by_result_ceiling_lands_on_every_position() {
    ceiling_sweep(MIXED, false);
}

#[test]
fn text_cut_by_result_ceiling_escapes_any_chunking() {
    ceiling_sweep(ESCAPED, true);
}

#[test]
fn text_cut_by_total_text_budget() {
    // Blocks share max_text_bytes, first come first served; once even a marker
    // does not fit, texts become "" and are still recorded.
    let body = |i: usize| format!("{}{i}", "é".repeat(45)); // 91 bytes
    let blocks: Vec<String> = (0..6)
        .map(|i| format!(r#"{{"type":"text","text":"{}"}}"#, body(i)))
        .collect();
    let input = envelope(
        format!(r#"{{"content":[{}]}}"#, blocks.join(",")).as_bytes(),
        1,
    );
    let lim = McpLimits {
        max_text_bytes: 250,
        max_text_block_bytes: 100,
        ..OPEN
    };
    let r = run(lim, tool(), &input, input.len());
    let c = check_message(&lim, &input, &r);
    let texts: Vec<String> = (0..6).map(|i| out_text(&r, i)).collect();
    let total: usize = texts.iter().map(|t| t.len()).sum();
    assert!(total <= 250);
    // Blocks 0 and 1 fit whole (91 <= 100 each), leaving 68 bytes.
    assert_eq!(texts[0], body(0));
    assert_eq!(texts[1], body(1));
    // Block 2 is cut by the total budget: prefix + marker within the 68 bytes left.
    let (kept, omitted, all) = split_marker(&texts[2]).expect("marker");
    assert!(body(2).starts_with(kept));
    assert_eq!(all, 91);
    assert_eq!(omitted, 91 - kept.len() as u64);
    assert!(texts[2].len() <= 68);
    assert!(!kept.is_empty());
    // Then not even a marker fits: "" but recorded.
    assert_eq!(texts[3], "");
    assert_eq!(texts[4], "");
    assert_eq!(texts[5], "");
    assert_eq!(r.rec.budget_kind.as_deref(), Some("text_bytes"));
    assert_eq!(r.rec.omitted_count, 4);
    assert_eq!(
        r.rec.omitted_paths,
        [
            "/content/2/text",
            "/content/3/text",
            "/content/4/text",
            "/content/5/text"
        ]
    );
    assert_eq!(c.sites.len(), 4);
}

#[test]
fn embedded_resource_text_is_a_text() {
    let long = "r".repeat(500);
    let input = envelope(
        format!(r#"{{"content":[{{"type":"resource","resource":{{"uri":"file:///x","mimeType":"text/plain","text":"{long}"}}}}]}}"#).as_bytes(),
        1,
    );
    let lim = McpLimits {
        max_text_block_bytes: 100,
        ..OPEN
    };
    let r = run(lim, tool(), &input, 1);
    check_message(&lim, &input, &r);
    assert_eq!(r.rec.omitted_paths, ["/content/0/resource/text"]);
    assert_eq!(r.rec.budget_kind.as_deref(), Some("text_block_bytes"));
    let doc = parse_valid(&r.out);
    let t = doc.get("result").unwrap().get("content").unwrap().items()[0]
        .get("resource")
        .unwrap()
        .get("text")
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    assert!(t.len() <= 100);
    assert!(t.ends_with(&marker(500 - split_marker(&t).unwrap().0.len() as u64, 500)));
}

#[test]
fn structured_strings_cut_on_whole_units_only() {
    let inner = MIXED.repeat(2);
    let full = decoded(&inner);
    let input = envelope(
        format!(r#"{{"content":[],"structuredContent":{{"s":"{inner}","after":1}}}}"#).as_bytes(),
        1,
    );
    for limit in 0..=(full.len() as u64 + 2) {
        let lim = McpLimits {
            max_string_bytes: limit,
            ..OPEN
        };
        let r = run(lim, tool(), &input, 1);
        assert_eq!(r, run(lim, tool(), &input, input.len()));
        let c = check_message(&lim, &input, &r);
        let doc = parse_valid(&r.out);
        let sc = doc.get("result").unwrap().get("structuredContent").unwrap();
        let got = sc.get("s").unwrap().as_str().unwrap();
        assert!(full.starts_with(got));
        assert!(got.len() as u64 <= limit);
        // The longest prefix of whole characters within the limit.
        let want = full
            .char_indices()
            .map(|(i, ch)| i + ch.len_utf8())
            .take_while(|&e| e as u64 <= limit)
            .last()
            .unwrap_or(0);
        assert_eq!(got.len(), want, "limit {limit}");
        assert_eq!(sc.get("after").unwrap().raw(&r.out), b"1");
        if (full.len() as u64) > limit {
            assert_eq!(r.rec.omitted_paths, ["/structuredContent/s"]);
            assert_eq!(r.rec.budget_kind.as_deref(), Some("string_bytes"));
            assert_eq!(c.sites.len(), 1);
        } else {
            assert_eq!(r.out, input);
        }
    }
}

// ---------------------------------------------------------------------------
// The record in _meta
// ---------------------------------------------------------------------------

fn meta_of(r: &Run) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_slice(&r.out).unwrap();
    v["result"]["_meta"].clone()
}

fn count_meta_keys(out: &[u8]) -> usize {
    parse_valid(out).get("result").unwrap().count_key("_meta")
}

#[test]
fn record_merges_into_meta_before_content() {
    let long = "t".repeat(300);
    let input = envelope(
        format!(r#"{{"_meta":{{"progressToken":7,"x/y":{{"a":[1]}}}},"content":[{{"type":"text","text":"{long}"}}],"isError":true}}"#).as_bytes(),
        1,
    );
    let lim = McpLimits {
        max_text_block_bytes: 100,
        ..OPEN
    };
    let r = run_all_splits(lim, tool(), &input);
    check_message(&lim, &input, &r);
    assert_eq!(count_meta_keys(&r.out), 1);
    let meta = meta_of(&r);
    let keys: Vec<&String> = meta.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["progressToken", "x/y", RECORD_KEY]);
    assert_eq!(meta["progressToken"].to_string(), "7");
    assert_eq!(meta["x/y"]["a"][0].to_string(), "1");
    let rec = Rec::from_json(&meta[RECORD_KEY]);
    assert_eq!(rec.omitted_paths, ["/content/0/text"]);
    assert_eq!(rec.budget_kind.as_deref(), Some("text_block_bytes"));
    assert_eq!(rec.omitted_count, 1);
    assert_eq!(rec.unlisted, 0);
    let ir = parse(&input).unwrap();
    assert_eq!(
        rec.original_bytes,
        Some(ir.get("result").unwrap().len() as u64)
    );
    // The output starts like the input: _meta stays first.
    assert!(
        s(&r.out).starts_with(r#"{"jsonrpc":"2.0","id":1,"result":{"_meta":{"progressToken":7,"#)
    );
}

#[test]
fn record_merges_into_meta_after_content_and_into_an_empty_meta() {
    let long = "t".repeat(300);
    for meta in [r#"{"own":"kept","n":[1,2]}"#, "{}"] {
        let input = envelope(
            format!(r#"{{"content":[{{"type":"text","text":"{long}"}}],"_meta":{meta},"isError":false}}"#).as_bytes(),
            1,
        );
        let lim = McpLimits {
            max_text_block_bytes: 100,
            ..OPEN
        };
        let r = run_all_splits(lim, tool(), &input);
        check_message(&lim, &input, &r);
        assert_eq!(count_meta_keys(&r.out), 1);
        let m = meta_of(&r);
        let mut want: Vec<String> = serde_json::from_str::<serde_json::Value>(meta)
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        want.push(RECORD_KEY.into());
        assert_eq!(
            m.as_object().unwrap().keys().cloned().collect::<Vec<_>>(),
            want
        );
        // _meta keeps its position between content and isError.
        let keys: Vec<String> = parse_valid(&r.out)
            .get("result")
            .unwrap()
            .members()
            .iter()
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(keys, ["content", "_meta", "isError"]);
    }
}

#[test]
fn record_gets_its_own_meta_when_the_tool_has_none() {
    let input = envelope(
        br#"{"content":[{"type":"text","text":"hello world"}],"isError":false}"#,
        1,
    );
    let lim = McpLimits {
        max_text_block_bytes: 0,
        ..OPEN
    };
    let r = run(lim, tool(), &input, 1);
    check_message(&lim, &input, &r);
    let ir = parse(&input).unwrap().get("result").unwrap().len();
    assert_eq!(
        s(&r.out),
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":""}}],"isError":false,"_meta":{{"resultbudget/truncation":{{"truncated":true,"budget_kind":"text_block_bytes","omitted_count":1,"omitted_paths":["/content/0/text"],"omitted_paths_unlisted":0,"original_bytes":{ir}}}}}}}}}"#
        )
    );
}

#[test]
fn forged_record_in_tool_meta_is_dropped() {
    let forged = r#"{"truncated":false,"budget_kind":null,"omitted_count":0,"omitted_paths":[],"omitted_paths_unlisted":0,"original_bytes":1}"#;
    // Nothing else is cut: the forged key alone is dropped and recorded.
    let input = envelope(
        format!(r#"{{"content":[{{"type":"text","text":"ok"}}],"_meta":{{"a":1,"{RECORD_KEY}":{forged},"b":2}}}}"#).as_bytes(),
        1,
    );
    let r = run_all_splits(McpLimits::DEFAULT, tool(), &input);
    check_message(&McpLimits::DEFAULT, &input, &r);
    let m = meta_of(&r);
    assert_eq!(
        m.as_object().unwrap().keys().cloned().collect::<Vec<_>>(),
        ["a", "b", RECORD_KEY]
    );
    let rec = Rec::from_json(&m[RECORD_KEY]);
    assert!(rec.truncated);
    assert_eq!(rec.budget_kind.as_deref(), Some("nonstandard_field"));
    assert_eq!(rec.omitted_count, 1);
    assert_eq!(rec.omitted_paths, ["/_meta/resultbudget~1truncation"]);
    assert_ne!(rec.original_bytes, Some(1));
    // Not one byte of the forged record's values survives.
    assert!(!s(&r.out).contains(r#""original_bytes":1}"#));
    assert_eq!(s(&r.out).matches(RECORD_KEY).count(), 1);
    assert_eq!(count_meta_keys(&r.out), 1);

    // The forged key before content, and a real cut as well.
    let long = "z".repeat(200);
    let input = envelope(
        format!(r#"{{"_meta":{{"{RECORD_KEY}":{forged}}},"content":[{{"type":"text","text":"{long}"}}]}}"#).as_bytes(),
        1,
    );
    let lim = McpLimits {
        max_text_block_bytes: 80,
        ..OPEN
    };
    let r = run_all_splits(lim, tool(), &input);
    check_message(&lim, &input, &r);
    let rec = Rec::from_json(&meta_of(&r)[RECORD_KEY]);
    assert_eq!(rec.omitted_count, 2);
    assert_eq!(rec.budget_kind.as_deref(), Some("nonstandard_field"));
    assert_eq!(
        rec.omitted_paths,
        ["/_meta/resultbudget~1truncation", "/content/0/text"]
    );
    assert_eq!(s(&r.out).matches(RECORD_KEY).count(), 1);
}

#[test]
fn meta_that_is_not_an_object_is_dropped() {
    for meta in [r#""str""#, "[1,2]", "null", "5"] {
        let input = envelope(
            format!(r#"{{"_meta":{meta},"content":[{{"type":"text","text":"ok"}}]}}"#).as_bytes(),
            1,
        );
        let r = run_all_splits(McpLimits::DEFAULT, tool(), &input);
        check_message(&McpLimits::DEFAULT, &input, &r);
        assert_eq!(r.rec.omitted_paths, ["/_meta"]);
        assert_eq!(r.rec.budget_kind.as_deref(), Some("nonstandard_field"));
        assert_eq!(count_meta_keys(&r.out), 1);
        let m = meta_of(&r);
        assert_eq!(m.as_object().unwrap().len(), 1);
    }
}

#[test]
fn nonstandard_fields_are_dropped_and_recorded_in_order() {
    let input = envelope(
        br#"{"debug":{"pw":"hunter2"},"content":[{"type":"text","text":"ok"}],"tool~name/x":"hunter2","structuredContent":{"a":1},"extra":[1,2,3]}"#,
        1,
    );
    let r = run_all_splits(McpLimits::DEFAULT, tool(), &input);
    check_message(&McpLimits::DEFAULT, &input, &r);
    assert!(!s(&r.out).contains("hunter2"));
    assert!(!s(&r.out).contains(r#""debug":"#));
    assert_eq!(r.rec.omitted_count, 3);
    assert_eq!(r.rec.budget_kind.as_deref(), Some("nonstandard_field"));
    assert_eq!(r.rec.omitted_paths, ["/debug", "/tool~0name~1x", "/extra"]);
}

// ---------------------------------------------------------------------------
// Numbers are copied byte for byte
// ---------------------------------------------------------------------------

#[test]
fn numbers_keep_their_spelling_in_structured_content() {
    let nums = r#"{"inf":1E400,"big":123456789012345678901234567890,"negzero":-0.0,"tiny":-1e-400,"frac":0.10000000000000000000000001,"exp":5E+0,"list":[1E400,-0.0,123456789012345678901234567890,7,8,9]}"#;
    let input = envelope(
        format!(
            r#"{{"content":[{{"type":"text","text":"{}"}}],"structuredContent":{nums}}}"#,
            "n".repeat(100)
        )
        .as_bytes(),
        1,
    );
    // Within budget: identical.
    assert_identity(McpLimits::DEFAULT, tool(), &input);
    // Cut elsewhere (text and the list tail): the numbers still keep their spelling.
    let lim = McpLimits {
        max_text_block_bytes: 60,
        max_list_items: 3,
        ..OPEN
    };
    let r = run_all_splits(lim, tool(), &input);
    check_message(&lim, &input, &r);
    let o = s(&r.out);
    for n in [
        "1E400",
        "123456789012345678901234567890",
        "-0.0",
        "-1e-400",
        "0.10000000000000000000000001",
        "5E+0",
    ] {
        assert!(o.contains(&format!(":{n},")), "{n} lost its spelling: {o}");
    }
    assert!(o.contains(r#""list":[1E400,-0.0,123456789012345678901234567890]"#));
    assert_eq!(
        r.rec.omitted_paths,
        ["/content/0/text", "/structuredContent/list/3"]
    );
    assert_eq!(r.rec.omitted_count, 4);
}

// ---------------------------------------------------------------------------
// Small fields are never lost
// ---------------------------------------------------------------------------

#[test]
fn is_error_and_result_type_after_content_that_fills_the_ceiling() {
    let block = format!(r#"{{"type":"text","text":"{}"}}"#, "e".repeat(300));
    let blocks = vec![block; 40].join(",");
    for tail in [
        r#""isError":true"#,
        r#""isError":true,"resultType":"complete""#,
        r#""resultType":"abcdefghijklmnopqrstuvwxyz012345","isError":true"#,
    ] {
        let input = envelope(format!(r#"{{"content":[{blocks}],{tail}}}"#).as_bytes(), 1);
        let lim = McpLimits {
            max_result_bytes: 2048,
            ..OPEN
        };
        for chunk in [1usize, 64, input.len()] {
            let r = run(lim, tool(), &input, chunk);
            let c = check_message(&lim, &input, &r);
            assert!(c.result_len <= 2048);
            let doc = parse_valid(&r.out);
            let res = doc.get("result").unwrap();
            assert_eq!(res.get("isError").unwrap().raw(&r.out), b"true", "{tail}");
            if let Some((_, v)) = tail.split_once(r#""resultType":"#) {
                let want = v.split(',').next().unwrap();
                let got = res.get("resultType").expect("resultType lost");
                assert_eq!(got.raw(&r.out), want.as_bytes());
            }
            assert_eq!(r.rec.budget_kind.as_deref(), Some("result_bytes"));
        }
    }
}

// ---------------------------------------------------------------------------
// Content blocks
// ---------------------------------------------------------------------------

#[test]
fn content_blocks_past_the_limit_are_one_tail_site() {
    let blocks: Vec<String> = (0..10)
        .map(|i| format!(r#"{{"type":"text","text":"b{i}"}}"#))
        .collect();
    let input = envelope(
        format!(r#"{{"content":[{}]}}"#, blocks.join(",")).as_bytes(),
        1,
    );
    for max in [0u64, 1, 4, 9, 10, 11] {
        let lim = McpLimits {
            max_content_blocks: max,
            ..OPEN
        };
        let r = run_all_splits(lim, tool(), &input);
        check_message(&lim, &input, &r);
        let kept = parse_valid(&r.out)
            .get("result")
            .unwrap()
            .get("content")
            .unwrap()
            .items()
            .len();
        assert_eq!(kept as u64, max.min(10));
        if max < 10 {
            assert_eq!(r.rec.omitted_count, 10 - max);
            assert_eq!(r.rec.omitted_paths, [format!("/content/{max}")]);
            assert_eq!(r.rec.budget_kind.as_deref(), Some("content_blocks"));
        } else {
            assert_eq!(r.out, input);
        }
    }
}

#[test]
fn a_block_that_cannot_be_kept_whole_is_dropped_and_the_next_tried() {
    let img = "QUJD".repeat(400); // 1600 bytes of base64
    let input = envelope(
        format!(r#"{{"content":[{{"type":"text","text":"one"}},{{"type":"image","data":"{img}","mimeType":"image/png"}},{{"type":"resource","resource":{{"uri":"x:/b","blob":"{img}"}}}},{{"type":"text","text":"four"}}],"isError":false}}"#).as_bytes(),
        1,
    );
    let lim = McpLimits {
        max_result_bytes: 1024,
        ..OPEN
    };
    let r = run_all_splits(lim, tool(), &input);
    check_message(&lim, &input, &r);
    assert_eq!(r.rec.omitted_paths, ["/content/1", "/content/2"]);
    assert_eq!(r.rec.omitted_count, 2);
    assert_eq!(r.rec.budget_kind.as_deref(), Some("blob"));
    let o = s(&r.out);
    assert!(
        o.contains(r#"{"type":"text","text":"one"},{"type":"text","text":"four"}"#),
        "{o}"
    );
    assert!(!o.contains("QUJD"));
    // With room, the payload is kept whole and the message is untouched.
    let lim = McpLimits {
        max_result_bytes: 8192,
        ..OPEN
    };
    assert_identity(lim, tool(), &input);
}

// ---------------------------------------------------------------------------
// structuredContent limits
// ---------------------------------------------------------------------------

#[test]
fn structured_content_list_string_and_depth_limits() {
    let input = envelope(
        br#"{"content":[],"structuredContent":{"rows":[{"id":1,"tags":["a","b","c"]},{"id":2},{"id":3}],"deep":{"x":{"y":{"z":[1]}}},"s":"abcdefghij","e":{"x":{"y":{}}}}}"#,
        1,
    );
    let lim = McpLimits {
        max_list_items: 2,
        max_string_bytes: 4,
        max_depth: 3,
        ..OPEN
    };
    let r = run_all_splits(lim, tool(), &input);
    check_message(&lim, &input, &r);
    let o = s(&r.out);
    assert!(
        o.contains(
            r#""structuredContent":{"rows":[{"id":1,"tags":[]},{"id":2}],"deep":{"x":{"y":{}}},"s":"abcd","e":{"x":{"y":{}}}}"#
        ),
        "{o}"
    );
    assert_eq!(r.rec.budget_kind.as_deref(), Some("depth"));
    // An emptied container that was already empty is not a cut.
    assert_eq!(
        r.rec.omitted_paths,
        [
            "/structuredContent/rows/0/tags",
            "/structuredContent/rows/2",
            "/structuredContent/deep/x/y",
            "/structuredContent/s"
        ]
    );
    assert_eq!(r.rec.omitted_count, 4);
}

#[test]
fn structured_content_map_keys_limit() {
    let input = envelope(
        br#"{"content":[],"structuredContent":{"a":1,"b":{"x":1,"y":2,"z":3,"w":4},"c":3,"d":4,"e":5}}"#,
        1,
    );
    let lim = McpLimits {
        max_map_keys: 3,
        ..OPEN
    };
    let r = run_all_splits(lim, tool(), &input);
    check_message(&lim, &input, &r);
    assert!(
        s(&r.out).contains(r#""structuredContent":{"a":1,"b":{"x":1,"y":2,"z":3},"c":3}"#),
        "{}",
        s(&r.out)
    );
    assert_eq!(r.rec.budget_kind.as_deref(), Some("map_keys"));
    assert_eq!(
        r.rec.omitted_paths,
        ["/structuredContent/b/w", "/structuredContent/d"]
    );
    assert_eq!(r.rec.omitted_count, 3);
}

#[test]
fn structured_content_byte_limit() {
    let items: Vec<String> = (0..200).map(|i| format!("{i}")).collect();
    let input = envelope(
        format!(r#"{{"content":[{{"type":"text","text":"t"}}],"structuredContent":{{"items":[{}]}},"isError":false}}"#, items.join(",")).as_bytes(),
        1,
    );
    let lim = McpLimits {
        max_structured_bytes: 100,
        ..OPEN
    };
    let r = run_all_splits(lim, tool(), &input);
    let c = check_message(&lim, &input, &r);
    let doc = parse_valid(&r.out);
    let sc = doc.get("result").unwrap().get("structuredContent").unwrap();
    assert!(sc.len() <= 100);
    let kept = sc.get("items").unwrap().items().len();
    assert!(kept > 20);
    assert_eq!(r.rec.budget_kind.as_deref(), Some("structured_bytes"));
    assert_eq!(
        r.rec.omitted_paths,
        [format!("/structuredContent/items/{kept}")]
    );
    assert_eq!(r.rec.omitted_count, 200 - kept as u64);
    assert_eq!(c.sites.len(), 1);
    // The greedy rule: the next item would not have fitted.
    let next = format!(",{kept}");
    assert!(sc.len() + next.len() > 100);
}

// ---------------------------------------------------------------------------
// Typed results: whole or an error
// ---------------------------------------------------------------------------

const POLICY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../specs/typed-success-policy.json"
);

fn policy() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(POLICY).expect("read policy")).expect("policy JSON")
}

fn fill(t: &str, tool: &str, bytes: u64, limit: u64) -> String {
    t.replace("{tool}", tool)
        .replace("{result_bytes}", &bytes.to_string())
        .replace("{limit}", &limit.to_string())
}

#[test]
fn typed_texts_equal_the_policy_templates() {
    let p = policy();
    let ro = p["read_only"]["result"]["text_template"].as_str().unwrap();
    let mu = p["may_mutate"]["result"]["text_template"].as_str().unwrap();
    assert_eq!(READ_ONLY_TEXT, ro);
    assert_eq!(MUTATION_TEXT, mu);
    assert_eq!(
        typed_error_text(true, "ls", 70000, 65536),
        fill(ro, "ls", 70000, 65536)
    );
    assert_eq!(
        typed_error_text(false, "rm", 70000, 65536),
        fill(mu, "rm", 70000, 65536)
    );
    assert_eq!(p["read_only"]["result"]["code"], "result_budget_exceeded");
    assert!(ro.starts_with("result_budget_exceeded"));
    for word in ["smaller limit", "cursor", "filters", "narrower path"] {
        assert!(ro.contains(word), "read-only guidance lacks {word}");
    }
    assert!(mu.contains("do not repeat it"));
    assert!(!mu.to_lowercase().contains("retry"));
    assert!(!mu.to_lowercase().contains("try again"));
}

fn typed_big(id_last: bool) -> Vec<u8> {
    let rows: Vec<String> = (0..400)
        .map(|i| format!(r#"{{"id":{i},"name":"row number {i}"}}"#))
        .collect();
    let result = format!(
        r#"{{"content":[{{"type":"text","text":"{}"}}],"structuredContent":{{"rows":[{}]}},"isError":false}}"#,
        "w".repeat(5000),
        rows.join(",")
    );
    if id_last {
        format!(r#"{{"result":{result},"jsonrpc":"2.0","id":31}}"#).into_bytes()
    } else {
        envelope(result.as_bytes(), 31)
    }
}

#[test]
fn typed_read_only_over_budget_becomes_an_error_with_guidance() {
    let p = policy();
    let ro = p["read_only"]["result"]["text_template"].as_str().unwrap();
    let lim = McpLimits {
        max_result_bytes: 4096,
        ..McpLimits::DEFAULT
    };
    for id_last in [false, true] {
        let input = typed_big(id_last);
        let treat = typed("list_rows", true, None);
        let r = run_random_splits(lim, treat.clone(), &input);
        check_typed_error(&lim.whole_only(), &input, &r, "list_rows", true, b"31");
        check_message(&lim.whole_only(), &input, &r);
        let doc = parse_valid(&r.out);
        let text = doc.get("result").unwrap().get("content").unwrap().items()[0]
            .get("text")
            .unwrap()
            .as_str()
            .unwrap()
            .to_string();
        let orig = parse(&input).unwrap().get("result").unwrap().len() as u64;
        assert_eq!(text, fill(ro, "list_rows", orig, 4096));
        // Nothing of the original content leaks into the error.
        assert!(!s(&r.out).contains("row number"));
        assert!(!s(&r.out).contains("www"));
        // The envelope is unchanged.
        let ids: Vec<&[u8]> = doc.members().iter().map(|(_, v)| v.raw(&r.out)).collect();
        assert!(ids.contains(&&b"31"[..]));
    }
}

#[test]
fn typed_mutation_over_budget_carries_a_receipt() {
    let p = policy();
    let mu = p["may_mutate"]["result"]["text_template"].as_str().unwrap();
    let fields: Vec<String> = p["may_mutate"]["result"]["receipt_fields"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        fields,
        ["tool", "request_id", "result_bytes", "digest", "applied"]
    );
    let lim = McpLimits {
        max_result_bytes: 4096,
        ..McpLimits::DEFAULT
    };
    let input = typed_big(false);
    let orig = parse(&input).unwrap().get("result").unwrap().len() as u64;
    // request_id from the CallInfo (e.g. a string id of the request).
    let r = run_random_splits(lim, typed("write_rows", false, Some(r#""req-31""#)), &input);
    check_typed_error(
        &lim.whole_only(),
        &input,
        &r,
        "write_rows",
        false,
        br#""req-31""#,
    );
    let m = meta_of(&r);
    assert_eq!(
        m.as_object().unwrap().keys().cloned().collect::<Vec<_>>(),
        [RECORD_KEY, RECEIPT_KEY]
    );
    assert_eq!(m[RECEIPT_KEY]["result_bytes"].to_string(), orig.to_string());
    let doc: serde_json::Value = serde_json::from_slice(&r.out).unwrap();
    assert_eq!(
        doc["result"]["content"][0]["text"].as_str().unwrap(),
        fill(mu, "write_rows", orig, 4096)
    );
    // Without a request id in CallInfo, the response's own id (which comes first here).
    let r = run(lim, typed("write_rows", false, None), &input, 1);
    check_typed_error(&lim.whole_only(), &input, &r, "write_rows", false, b"31");
    // The digest does not depend on chunking.
    let mut rng = Rng(7);
    for _ in 0..20 {
        let cuts = random_cuts(&mut rng, input.len(), 3000);
        let r2 = run_split_with(
            &mut projector(lim),
            typed("write_rows", false, None),
            &input,
            &cuts,
        );
        assert_eq!(r2, r);
    }
}

#[test]
fn typed_within_budget_passes_whole_with_long_lists_and_texts() {
    // 400 rows (> max_list_items), a 20 000-byte text (> max_text_block_bytes),
    // 60 blocks (> max_content_blocks): per-element limits are off for typed tools.
    let rows: Vec<String> = (0..400).map(|i| i.to_string()).collect();
    let blocks: Vec<String> = (0..60)
        .map(|i| format!(r#"{{"type":"text","text":"{i}"}}"#))
        .collect();
    let result = format!(
        r#"{{"content":[{{"type":"text","text":"{}"}},{}],"structuredContent":{{"rows":[{}],"s":"{}"}}}}"#,
        "q".repeat(20000),
        blocks.join(","),
        rows.join(","),
        "s".repeat(5000)
    );
    let input = format!(r#"{{"result":{result},"jsonrpc":"2.0","id":8}}"#).into_bytes();
    assert!(input.len() < 60000);
    for read_only in [true, false] {
        let treat = typed("t", read_only, None);
        for chunk in [1usize, 1000, input.len()] {
            let r = run(McpLimits::DEFAULT, treat.clone(), &input, chunk);
            assert!(!r.typed_failed);
            assert_eq!(
                r.out, input,
                "typed result within the ceiling must pass whole"
            );
            assert!(!r.rec.truncated);
        }
        // The same result untyped is cut.
        let r = run(McpLimits::DEFAULT, tool(), &input, 4096);
        assert!(r.rec.truncated);
        check_message(&McpLimits::DEFAULT, &input, &r);
    }
}

#[test]
fn typed_result_still_loses_nonstandard_fields_without_failing() {
    let input = envelope(
        br#"{"content":[{"type":"text","text":"ok"}],"secret":"s3cr3t","structuredContent":{"a":[1,2,3]}}"#,
        4,
    );
    let r = run_all_splits(McpLimits::DEFAULT, typed("t", false, None), &input);
    assert!(!r.typed_failed);
    check_message(&McpLimits::DEFAULT.whole_only(), &input, &r);
    assert!(!s(&r.out).contains("s3cr3t"));
    assert_eq!(r.rec.omitted_paths, ["/secret"]);
    assert_eq!(r.rec.budget_kind.as_deref(), Some("nonstandard_field"));
}

#[test]
fn untyped_call_info_is_projected() {
    let t = Treat::ToolResult(CallInfo {
        tool: Some("x".into()),
        typed: false,
        read_only: false,
        request_id: Some(b"1".to_vec()),
        ..CallInfo::default()
    });
    let input = typed_big(false);
    let lim = McpLimits {
        max_result_bytes: 4096,
        ..McpLimits::DEFAULT
    };
    let r = run(lim, t, &input, 1);
    assert!(!r.typed_failed);
    check_message(&lim, &input, &r);
    assert!(r.rec.truncated);
}

// ---------------------------------------------------------------------------
// Invalid input and limits
// ---------------------------------------------------------------------------

#[test]
fn invalid_messages_are_errors() {
    let mut p = projector(McpLimits::DEFAULT);
    for bad in [
        &br#"{"jsonrpc":"2.0","id":1,"result":{"content":[}"#[..],
        br#"{"jsonrpc":"2.0","id":1,"result":{"content":"\uD800"}}"#,
        br#"{"jsonrpc":"2.0","id":1,"result":{}} x"#,
        b"not json",
        br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ab"#,
    ] {
        p.begin(tool());
        let mut out = Vec::new();
        let fed = p.feed(bad, &mut out);
        let res = fed.and_then(|_| p.finish(&mut out).map(|_| ()));
        assert!(res.is_err(), "accepted {}", s(bad));
    }
    assert!(resultbudget::mcp::Projector::new(McpLimits {
        max_result_bytes: 1023,
        ..McpLimits::DEFAULT
    })
    .is_err());
}

// ---------------------------------------------------------------------------
// Record paths: escaping, caps
// ---------------------------------------------------------------------------

#[test]
fn record_pointers_are_escaped_rfc6901_in_json() {
    let input = envelope(
        br#"{"content":[],"we\"ird\\key\u0001":1,"a~b/c":2,"\u00e9t\u00e9":3}"#,
        1,
    );
    let r = run_all_splits(McpLimits::DEFAULT, tool(), &input);
    check_message(&McpLimits::DEFAULT, &input, &r);
    assert_eq!(
        r.rec.omitted_paths,
        ["/we\"ird\\key\u{1}", "/a~0b~1c", "/été"]
    );
    assert!(s(&r.out).contains(r#""omitted_paths":["/we\"ird\\key\u0001","/a~0b~1c","/été"]"#));
}

#[test]
fn record_lists_at_most_sixteen_paths_and_counts_the_rest() {
    let fields: Vec<String> = (0..20).map(|i| format!(r#""f{i}":{i}"#)).collect();
    let input = envelope(
        format!(r#"{{"content":[],{}}}"#, fields.join(",")).as_bytes(),
        1,
    );
    let r = run(McpLimits::DEFAULT, tool(), &input, 1);
    check_message(&McpLimits::DEFAULT, &input, &r);
    let want: Vec<String> = (0..16).map(|i| format!("/f{i}")).collect();
    assert_eq!(r.rec.omitted_paths, want);
    assert_eq!(r.rec.unlisted, 4);
    assert_eq!(r.rec.omitted_count, 20);
}

#[test]
fn record_does_not_list_long_keys_or_long_pointers() {
    let long_key = "k".repeat(129);
    let k100 = "k".repeat(100);
    let input = envelope(
        format!(r#"{{"content":[],"{long_key}":1,"structuredContent":{{"{k100}":{{"{k100}":{{"{k100}":[1]}}}},"short":[1,2]}}}}"#).as_bytes(),
        1,
    );
    let lim = McpLimits {
        max_list_items: 0,
        ..McpLimits::DEFAULT
    };
    let r = run(lim, tool(), &input, 3);
    check_message(&lim, &input, &r);
    // The 129-byte key and the 300-byte pointer are counted, not listed.
    assert_eq!(r.rec.omitted_paths, ["/structuredContent/short/0"]);
    assert_eq!(r.rec.unlisted, 2);
    assert_eq!(r.rec.omitted_count, 4);
    assert_eq!(r.rec.budget_kind.as_deref(), Some("nonstandard_field"));
}

/// The typed error fits the ceiling however long the tool's name (a server
/// may list a typed tool by a long name) and the call's id: earlier builds
/// wrote the name in full, twice for a mutation, and a 900-byte name gave a
/// 3,444-byte result under a 1,024-byte ceiling. Past what fits, the
/// receipt's `request_id` is `null` and the name is shortened, ending in `…`,
/// never inside a UTF-8 sequence; what fits is written whole.
#[test]
fn a_typed_error_fits_its_ceiling_however_long_the_tool_name() {
    let lim = McpLimits {
        max_result_bytes: 1024,
        ..McpLimits::DEFAULT
    };
    let input = typed_big(false);
    let long_id = format!("\"{}\"", "i".repeat(2000)).into_bytes();
    for unit in ["n", "\\\"\n\u{1}", "\u{e9}", "\u{1F600}"] {
        for n in [1, 20, 60, 200, 900, 5000] {
            for read_only in [true, false] {
                for id in [b"7".to_vec(), long_id.clone()] {
                    let name = unit.repeat(n);
                    let t = Treat::ToolResult(CallInfo {
                        tool: Some(name.clone()),
                        typed: true,
                        read_only,
                        request_id: Some(id.clone()),
                        ..CallInfo::default()
                    });
                    let r = run(lim, t, &input, 1);
                    let what = format!("{n} x {unit:?}, read-only {read_only}, id of {}", id.len());
                    assert!(r.typed_failed, "{what}");
                    let v: serde_json::Value = serde_json::from_slice(&r.out).unwrap();
                    let result = serde_json::to_vec(&v["result"]).unwrap();
                    let text = v["result"]["content"][0]["text"].as_str().unwrap();
                    assert!(
                        result.len() <= 1024,
                        "{what}: a typed error of {} bytes",
                        result.len()
                    );
                    assert!(text.starts_with("result_budget_exceeded"), "{what}");
                    // The name whole, or a prefix of it and `…`.
                    let named = text
                        .strip_prefix("result_budget_exceeded: tool ")
                        .or_else(|| {
                            text.strip_prefix(
                                "result_budget_exceeded: the complete result of tool ",
                            )
                        })
                        .unwrap();
                    let whole = named.starts_with(&format!("{name} "));
                    let shown = named.split_once('\u{2026}').map(|(a, _)| a);
                    assert!(
                        whole || shown.is_some_and(|p| name.starts_with(p)),
                        "{what}: {text}"
                    );
                    if !read_only {
                        let receipt = &v["result"]["_meta"][RECEIPT_KEY];
                        let tool = receipt["tool"].as_str().unwrap();
                        assert!(
                            tool == name
                                || tool
                                    .strip_suffix('\u{2026}')
                                    .is_some_and(|p| name.starts_with(p)),
                            "{what}: {tool}"
                        );
                        let want: serde_json::Value = serde_json::from_slice(&id).unwrap();
                        assert!(
                            receipt["request_id"] == want || receipt["request_id"].is_null(),
                            "{what}"
                        );
                        // The id is given up before the name is shortened.
                        if tool != name {
                            assert!(receipt["request_id"].is_null(), "{what}");
                        }
                    }
                    // What fits is written whole.
                    if n == 1 && id.len() == 1 {
                        assert!(whole, "{what}: {text}");
                    }
                }
            }
        }
    }
}
