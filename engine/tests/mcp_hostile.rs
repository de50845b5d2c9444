//! Generated hostile tool results, each checked for every bound of
//! `specs/mcp-result-contract.md`, for an exact record, and for valid JSON:
//! a 5 MB text, 20 000 blocks, a 300 000-item list, 100 000 keys, 900-deep
//! nesting, secrets in non-standard fields, a 2 MB image, `_meta` before and
//! after a huge `content`, and `isError` after a huge `content`.
//!
//! Large inputs are fed in 64 KiB chunks, and once more in a random chunking
//! that must give the same bytes and record, with and without the fast
//! keeping loop.
mod mcp_support;

use mcp_support::*;
use resultbudget::mcp::{McpLimits, Treat, RECORD_KEY};
use resultbudget::ErrorKind;

const D: McpLimits = McpLimits::DEFAULT;

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(3000)]).into_owned()
}

/// Project in 64 KiB chunks and in one random chunking; both must agree.
fn project(lim: McpLimits, treat: Treat, input: &[u8], seed: u64) -> Run {
    let mut p = projector(lim);
    let r = run_with(&mut p, treat.clone(), input, BIG_CHUNK);
    let cuts = random_cuts(&mut Rng(seed), input.len(), 3 * BIG_CHUNK);
    let r2 = run_split_with(&mut p, treat.clone(), input, &cuts);
    assert_eq!(r, r2, "random chunking differs");
    // The token-by-token path that the fast keeping loop shortcuts.
    let mut slow = projector(lim);
    slow.set_fast_keep(false);
    let r3 = run_split_with(&mut slow, treat, input, &cuts);
    assert_eq!(r2, r3, "fast keep and token by token differ");
    r
}

fn result_of(doc: &Node) -> &Node {
    doc.get("result").expect("result")
}

fn rec_eq(r: &Run, kind: &str, count: u64, paths: &[&str], unlisted: u64) {
    assert_eq!(r.rec.budget_kind.as_deref(), Some(kind), "budget_kind");
    assert_eq!(r.rec.omitted_count, count, "omitted_count");
    assert_eq!(r.rec.omitted_paths, paths, "omitted_paths");
    assert_eq!(r.rec.unlisted, unlisted, "omitted_paths_unlisted");
    assert!(r.rec.truncated);
}

/// 5 MB of text with escapes and non-ASCII (JSON string content).
fn five_mb_text() -> String {
    let unit = r#"line \"quoted\" caf\u00e9 \uD83D\uDE00 tab\t end\n"#;
    let mut t = String::with_capacity(5 * 1024 * 1024 + 64);
    while t.len() < 5 * 1024 * 1024 {
        t.push_str(unit);
    }
    t
}

// ---------------------------------------------------------------------------
// A 5 MB text
// ---------------------------------------------------------------------------

#[test]
fn five_mb_text_is_cut_to_the_block_budget() {
    let text = five_mb_text();
    let input = envelope(
        format!(r#"{{"content":[{{"type":"text","text":"{text}"}},{{"type":"text","text":"second block"}}],"isError":true}}"#).as_bytes(),
        1,
    );
    let r = project(D, tool(), &input, 1);
    let c = check_message(&D, &input, &r);
    assert!(c.result_len as u64 <= D.max_result_bytes);
    rec_eq(&r, "text_block_bytes", 1, &["/content/0/text"], 0);
    let doc = parse_valid(&r.out);
    let res = result_of(&doc);
    let blocks = res.get("content").unwrap().items();
    assert_eq!(blocks.len(), 2);
    let t0 = blocks[0].get("text").unwrap().as_str().unwrap();
    assert!(t0.len() as u64 <= D.max_text_block_bytes);
    assert!(t0.len() as u64 > D.max_text_block_bytes - 100);
    let (kept, omitted, total) = split_marker(t0).expect("marker");
    let full: String = serde_json::from_str(&format!("\"{text}\"")).unwrap();
    assert!(full.starts_with(kept));
    assert_eq!(total, full.len() as u64);
    assert_eq!(omitted, total - kept.len() as u64);
    assert_eq!(
        blocks[1].get("text").unwrap().as_str(),
        Some("second block")
    );
    assert_eq!(res.get("isError").unwrap().raw(&r.out), b"true");
}

#[test]
fn five_mb_text_under_only_a_ceiling_keeps_is_error() {
    // No text limits: the result ceiling alone cuts the text; isError:true
    // comes after 5 MB and must survive.
    let text = five_mb_text();
    let lim = McpLimits {
        max_result_bytes: 64 * 1024,
        ..McpLimits::UNLIMITED
    };
    let input = envelope(
        format!(r#"{{"content":[{{"type":"text","text":"{text}"}}],"isError":true}}"#).as_bytes(),
        2,
    );
    let r = project(lim, tool(), &input, 2);
    let c = check_message(&lim, &input, &r);
    assert!(c.result_len as u64 <= lim.max_result_bytes);
    let doc = parse_valid(&r.out);
    assert_eq!(
        result_of(&doc).get("isError").map(|n| n.raw(&r.out)),
        Some(&b"true"[..]),
        "isError:true lost after a huge content"
    );
    assert_eq!(r.rec.budget_kind.as_deref(), Some("result_bytes"));
}

// ---------------------------------------------------------------------------
// 20 000 blocks
// ---------------------------------------------------------------------------

fn blocks_input(n: usize, text: &dyn Fn(usize) -> String, tail: &str) -> Vec<u8> {
    let mut r = String::from(r#"{"content":["#);
    for i in 0..n {
        if i > 0 {
            r.push(',');
        }
        r.push_str(r#"{"type":"text","text":""#);
        r.push_str(&text(i));
        r.push_str(r#""}"#);
    }
    r.push(']');
    r.push_str(tail);
    r.push('}');
    envelope(r.as_bytes(), 3)
}

#[test]
fn twenty_thousand_blocks_keep_the_first_fifty() {
    let input = blocks_input(20_000, &|i| format!("block {i}"), r#","isError":true"#);
    let r = project(D, tool(), &input, 3);
    check_message(&D, &input, &r);
    rec_eq(&r, "content_blocks", 19_950, &["/content/50"], 0);
    let doc = parse_valid(&r.out);
    let res = result_of(&doc);
    let blocks = res.get("content").unwrap().items();
    assert_eq!(blocks.len(), 50);
    for (i, b) in blocks.iter().enumerate() {
        assert_eq!(
            b.get("text").unwrap().as_str().unwrap(),
            format!("block {i}")
        );
    }
    assert_eq!(res.get("isError").unwrap().raw(&r.out), b"true");
}

#[test]
fn twenty_thousand_large_blocks_spend_every_budget() {
    // No block limit: the text budget runs out (texts become ""), then the
    // ceiling drops whole blocks; every site is recorded exactly and
    // isError:true after all of it survives.
    let lim = McpLimits {
        max_content_blocks: u64::MAX,
        ..D
    };
    let input = blocks_input(
        20_000,
        &|i| format!("{i:05}{}", "x".repeat(995)),
        r#","isError":true"#,
    );
    let r = project(lim, tool(), &input, 4);
    let c = check_message(&lim, &input, &r);
    assert_eq!(
        r.rec.omitted_count,
        c.sites.iter().map(|s| s.count).sum::<u64>()
    );
    assert_eq!(r.rec.omitted_paths.len(), 16);
    assert_eq!(r.rec.unlisted, c.sites.len() as u64 - 16);
    assert_eq!(r.rec.budget_kind.as_deref(), Some("text_bytes"));
    let doc = parse_valid(&r.out);
    let res = result_of(&doc);
    let blocks = res.get("content").unwrap().items();
    // 49 whole texts of 1000 bytes fit the 49 152-byte text budget; the 50th
    // gets the 152 bytes left (prefix + marker); then texts become "".
    for b in &blocks[..49] {
        assert_eq!(b.get("text").unwrap().as_str().unwrap().len(), 1000);
    }
    let t49 = blocks[49].get("text").unwrap().as_str().unwrap();
    let (kept, omitted, total) = split_marker(t49).expect("marker");
    assert_eq!((omitted, total), (1000 - kept.len() as u64, 1000));
    assert!(t49.len() <= 152);
    assert!(blocks[50..]
        .iter()
        .all(|b| b.get("text").unwrap().as_str() == Some("")));
    assert!(blocks.len() < 20_000);
    assert_eq!(
        res.get("isError").map(|n| n.raw(&r.out)),
        Some(&b"true"[..]),
        "isError:true lost"
    );
}

#[test]
fn twenty_thousand_blocks_under_only_a_ceiling_keep_is_error() {
    let lim = McpLimits {
        max_result_bytes: 64 * 1024,
        ..McpLimits::UNLIMITED
    };
    let input = blocks_input(
        20_000,
        &|i| format!("block number {i}"),
        r#","isError":true"#,
    );
    let r = project(lim, tool(), &input, 5);
    let c = check_message(&lim, &input, &r);
    assert!(c.result_len as u64 <= lim.max_result_bytes);
    let doc = parse_valid(&r.out);
    assert_eq!(
        result_of(&doc).get("isError").map(|n| n.raw(&r.out)),
        Some(&b"true"[..]),
        "isError:true lost after 20 000 blocks"
    );
}

// ---------------------------------------------------------------------------
// structuredContent: 300 000 items, 100 000 keys, 900 levels
// ---------------------------------------------------------------------------

fn list_input(n: usize) -> Vec<u8> {
    let mut r = String::from(
        r#"{"content":[{"type":"text","text":"rows"}],"structuredContent":{"total":300000,"items":["#,
    );
    for i in 0..n {
        if i > 0 {
            r.push(',');
        }
        r.push_str(&format!(r#"{{"id":{i},"v":"r{i}"}}"#));
    }
    r.push_str(r#"],"next_cursor":"abc"}}"#);
    envelope(r.as_bytes(), 6)
}

#[test]
fn three_hundred_thousand_items_keep_the_first_hundred() {
    let input = list_input(300_000);
    let r = project(D, tool(), &input, 6);
    check_message(&D, &input, &r);
    rec_eq(
        &r,
        "list_items",
        299_900,
        &["/structuredContent/items/100"],
        0,
    );
    let doc = parse_valid(&r.out);
    let sc = result_of(&doc).get("structuredContent").unwrap();
    assert_eq!(sc.get("items").unwrap().items().len(), 100);
    assert_eq!(sc.get("next_cursor").unwrap().as_str(), Some("abc"));
    assert!(sc.len() as u64 <= D.max_structured_bytes);
}

#[test]
fn three_hundred_thousand_items_under_the_structured_byte_limit() {
    let lim = McpLimits {
        max_list_items: u64::MAX,
        ..D
    };
    let input = list_input(300_000);
    let r = project(lim, tool(), &input, 7);
    let c = check_message(&lim, &input, &r);
    let doc = parse_valid(&r.out);
    let sc = result_of(&doc).get("structuredContent").unwrap();
    assert!(sc.len() as u64 <= lim.max_structured_bytes);
    let kept = sc.get("items").unwrap().items().len();
    assert!(kept > 1000);
    // The greedy rule near the end of the byte scope (a member or item is
    // kept in its smallest form while it fits), then the items tail, then
    // the member after the list.
    let n = c.sites.len();
    assert!(n >= 2);
    assert_eq!(
        c.sites[n - 2].path,
        format!("/structuredContent/items/{kept}")
    );
    assert_eq!(c.sites[n - 2].count, 300_000 - kept as u64);
    assert_eq!(c.sites[n - 1].path, "/structuredContent/next_cursor");
    assert_eq!(r.rec.budget_kind.as_deref(), Some("structured_bytes"));
    assert_eq!(
        r.rec.omitted_count,
        c.sites.iter().map(|s| s.count).sum::<u64>()
    );
    // The result has ample room left for the record: every site is listed.
    assert_eq!(
        r.rec.omitted_paths,
        c.sites.iter().map(|s| s.path.clone()).collect::<Vec<_>>()
    );
}

#[test]
fn hundred_thousand_keys_keep_the_first_hundred() {
    let mut r = String::from(r#"{"content":[],"structuredContent":{"#);
    for i in 0..100_000 {
        if i > 0 {
            r.push(',');
        }
        r.push_str(&format!(r#""key{i}":{i}"#));
    }
    r.push_str("}}");
    let input = envelope(r.as_bytes(), 8);
    let out = project(D, tool(), &input, 8);
    check_message(&D, &input, &out);
    let doc = parse_valid(&out.out);
    let sc = result_of(&doc).get("structuredContent").unwrap();
    let keys: Vec<&str> = sc.members().iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys.len(), 100);
    assert_eq!(keys[99], "key99");
    rec_eq(&out, "map_keys", 99_900, &["/structuredContent/key100"], 0);
}

fn nested(kind: u8, depth: usize) -> String {
    let (open, close) = if kind == b'o' {
        (r#"{"a":"#, "}")
    } else {
        ("[", "]")
    };
    format!("{}1{}", open.repeat(depth), close.repeat(depth))
}

#[test]
fn nine_hundred_levels_are_emptied_at_max_depth() {
    big_stack(|| {
        for kind in [b'o', b'a'] {
            let sc = nested(kind, 900);
            let input = envelope(
                format!(r#"{{"content":[{{"type":"text","text":"deep"}}],"structuredContent":{sc},"isError":false}}"#).as_bytes(),
                9,
            );
            let r = project(D, tool(), &input, 9);
            check_message(&D, &input, &r);
            let (seg, open, close) = if kind == b'o' {
                ("/a", r#"{"a":"#, "}")
            } else {
                ("/0", "[", "]")
            };
            let empty = if kind == b'o' { "{}" } else { "[]" };
            let want_sc = format!("{}{empty}{}", open.repeat(16), close.repeat(16));
            let doc = parse_valid(&r.out);
            let got = result_of(&doc).get("structuredContent").unwrap();
            assert_eq!(s(got.raw(&r.out)), want_sc);
            let path = format!("/structuredContent{}", seg.repeat(16));
            rec_eq(&r, "depth", 1, &[path.as_str()], 0);
        }
    });
}

#[test]
fn nine_hundred_levels_in_meta_and_annotations() {
    big_stack(|| {
        let deep = nested(b'o', 900);
        let input = envelope(
            format!(r#"{{"content":[{{"type":"text","text":"x","annotations":{deep}}}],"_meta":{{"trace":{deep}}}}}"#).as_bytes(),
            10,
        );
        let r = project(D, tool(), &input, 10);
        check_message(&D, &input, &r);
        let p1 = format!("/content/0/annotations{}", "/a".repeat(16));
        let p2 = format!("/_meta/trace{}", "/a".repeat(16));
        rec_eq(&r, "depth", 2, &[p1.as_str(), p2.as_str()], 0);
    });
}

#[test]
fn nesting_beyond_max_nesting_is_an_error_not_a_cut() {
    let input = envelope(
        format!(
            r#"{{"content":[],"structuredContent":{}}}"#,
            nested(b'a', 1100)
        )
        .as_bytes(),
        11,
    );
    let mut p = projector(D);
    p.begin(tool());
    let mut out = Vec::new();
    let mut err = None;
    for c in input.chunks(BIG_CHUNK) {
        if let Err(e) = p.feed(c, &mut out) {
            err = Some(e);
            break;
        }
    }
    let e = err.expect("too deep must be an error");
    assert_eq!(e.kind(), ErrorKind::TooDeep);
    // The offending byte: the bracket that opens level 1025 (the envelope is
    // level 1, result 2, structuredContent's first bracket 3).
    let sc = String::from_utf8_lossy(&input)
        .find(r#""structuredContent":"#)
        .unwrap()
        + 20;
    assert_eq!(e.offset(), (sc + 1022) as u64);
}

// ---------------------------------------------------------------------------
// Secrets in non-standard fields
// ---------------------------------------------------------------------------

const SECRET: &str = "sk-live-7f3a9c1e5b2d4f6a8c0e";

#[test]
fn nonstandard_fields_never_leak_a_byte_of_a_secret() {
    let huge_secret = format!("{SECRET}-{}", "S".repeat(1 << 20));
    let result = format!(
        r#"{{"debugDump":{{"env":{{"API_KEY":"{SECRET}"}},"trace":["{SECRET}"]}},"content":[{{"type":"text","text":"public answer"}}],"apiKey":"{SECRET}","structuredContent":{{"ok":true}},"rawResponse":"{huge_secret}","headers":[{{"authorization":"Bearer {SECRET}"}}],"isError":false,"zzz":"{SECRET}"}}"#
    );
    let input = envelope(result.as_bytes(), 12);
    for lim in [
        D,
        McpLimits {
            max_result_bytes: 1024,
            ..D
        },
    ] {
        let r = project(lim, tool(), &input, 12);
        check_message(&lim, &input, &r);
        let out = String::from_utf8(r.out.clone()).unwrap();
        assert!(!out.contains(SECRET), "secret leaked: {}", s(&r.out));
        assert!(!out.contains("sk-live"), "part of the secret leaked");
        assert!(!out.contains("Bearer"));
        assert!(!out.contains("SSSS"));
        assert!(out.contains("public answer"));
        // Every dropped field is recorded, in order.
        rec_eq(
            &r,
            "nonstandard_field",
            5,
            &["/debugDump", "/apiKey", "/rawResponse", "/headers", "/zzz"],
            0,
        );
    }
    // The 1-byte chunking of the small part of the same shape.
    let small = envelope(
        format!(r#"{{"leak":"{SECRET}","content":[{{"type":"text","text":"a"}}],"more":{{"k":"{SECRET}"}}}}"#).as_bytes(),
        13,
    );
    let r = run(D, tool(), &small, 1);
    assert_eq!(r, run(D, tool(), &small, small.len()));
    check_message(&D, &small, &r);
    assert!(!String::from_utf8_lossy(&r.out).contains(SECRET));
    rec_eq(&r, "nonstandard_field", 2, &["/leak", "/more"], 0);
}

// ---------------------------------------------------------------------------
// A 2 MB image
// ---------------------------------------------------------------------------

fn b64(n: usize) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(n + 4);
    for i in 0..n {
        s.push(A[(i * 7 + i / 64) % 64] as char);
    }
    s.push_str("==");
    s
}

#[test]
fn two_mb_image_is_dropped_whole_and_later_text_kept() {
    let img = b64(2 * 1024 * 1024);
    let input = envelope(
        format!(r#"{{"content":[{{"type":"text","text":"before"}},{{"type":"image","data":"{img}","mimeType":"image/png"}},{{"type":"text","text":"after"}}],"isError":false}}"#).as_bytes(),
        15,
    );
    let r = project(D, tool(), &input, 15);
    check_message(&D, &input, &r);
    rec_eq(&r, "blob", 1, &["/content/1"], 0);
    let doc = parse_valid(&r.out);
    let blocks = result_of(&doc).get("content").unwrap().items();
    let texts: Vec<&str> = blocks
        .iter()
        .map(|b| b.get("text").unwrap().as_str().unwrap())
        .collect();
    assert_eq!(texts, ["before", "after"]);
    assert!(!String::from_utf8_lossy(&r.out).contains("image/png"));
    assert!(r.out.len() < 1000);

    // data before type, and an embedded resource blob: the same.
    let input = envelope(
        format!(r#"{{"content":[{{"data":"{img}","type":"audio","mimeType":"audio/wav"}},{{"type":"resource","resource":{{"uri":"file:///x.bin","blob":"{img}"}}}},{{"type":"text","text":"after"}}]}}"#).as_bytes(),
        16,
    );
    let r = project(D, tool(), &input, 16);
    check_message(&D, &input, &r);
    rec_eq(&r, "blob", 2, &["/content/0", "/content/1"], 0);
    assert!(
        String::from_utf8_lossy(&r.out).contains(r#""content":[{"type":"text","text":"after"}]"#)
    );
}

#[test]
fn two_mb_image_is_kept_whole_when_the_ceiling_allows() {
    let img = b64(2 * 1024 * 1024);
    let input = envelope(
        format!(r#"{{"content":[{{"type":"text","text":"before"}},{{"type":"image","data":"{img}","mimeType":"image/png"}},{{"type":"text","text":"after"}}]}}"#).as_bytes(),
        17,
    );
    let lim = McpLimits {
        max_result_bytes: 3 * 1024 * 1024,
        ..D
    };
    let r = project(lim, tool(), &input, 17);
    assert_eq!(r.out, input, "within every limit: byte-identical");
    assert!(!r.rec.truncated);
    // Just under the image's size, it goes whole.
    let lim = McpLimits {
        max_result_bytes: 2 * 1024 * 1024,
        ..D
    };
    let r = project(lim, tool(), &input, 18);
    check_message(&lim, &input, &r);
    rec_eq(&r, "blob", 1, &["/content/1"], 0);
}

// ---------------------------------------------------------------------------
// _meta before and after a huge content
// ---------------------------------------------------------------------------

#[test]
fn meta_before_and_after_huge_content_receives_the_record() {
    let text = five_mb_text();
    for (before, after) in [
        (r#""_meta":{"progressToken":"p1","x":[1,2]},"#, ""),
        ("", r#","_meta":{"progressToken":"p1","x":[1,2]}"#),
    ] {
        let input = envelope(
            format!(
                r#"{{{before}"content":[{{"type":"text","text":"{text}"}}]{after},"isError":true}}"#
            )
            .as_bytes(),
            19,
        );
        let r = project(D, tool(), &input, 19);
        check_message(&D, &input, &r);
        let doc = parse_valid(&r.out);
        let res = result_of(&doc);
        assert_eq!(res.count_key("_meta"), 1);
        let meta = res.get("_meta").unwrap();
        let keys: Vec<&str> = meta.members().iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["progressToken", "x", RECORD_KEY]);
        assert_eq!(meta.get("x").unwrap().raw(&r.out), b"[1,2]");
        rec_eq(&r, "text_block_bytes", 1, &["/content/0/text"], 0);
        assert_eq!(res.get("isError").unwrap().raw(&r.out), b"true");
    }
}

#[test]
fn forged_record_next_to_huge_content_is_replaced() {
    let text = five_mb_text();
    let forged = r#"{"truncated":false,"budget_kind":null,"omitted_count":0,"omitted_paths":[],"omitted_paths_unlisted":0,"original_bytes":0}"#;
    let input = envelope(
        format!(r#"{{"_meta":{{"{RECORD_KEY}":{forged},"own":1}},"content":[{{"type":"text","text":"{text}"}}]}}"#).as_bytes(),
        20,
    );
    let r = project(D, tool(), &input, 20);
    check_message(&D, &input, &r);
    rec_eq(
        &r,
        "nonstandard_field",
        2,
        &["/_meta/resultbudget~1truncation", "/content/0/text"],
        0,
    );
    let doc = parse_valid(&r.out);
    let meta = result_of(&doc).get("_meta").unwrap();
    let keys: Vec<&str> = meta.members().iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["own", RECORD_KEY]);
    assert!(!String::from_utf8_lossy(&r.out).contains(r#""original_bytes":0"#));
}

// ---------------------------------------------------------------------------
// Typed tools and huge results
// ---------------------------------------------------------------------------

#[test]
fn typed_tool_with_a_five_mb_result_becomes_an_error() {
    let text = five_mb_text();
    let input = format!(
        r#"{{"result":{{"content":[{{"type":"text","text":"{text}"}}],"structuredContent":{{"n":1}}}},"jsonrpc":"2.0","id":21}}"#
    )
    .into_bytes();
    let r = project(D, typed("dump", true, None), &input, 21);
    check_typed_error(&D, &input, &r, "dump", true, b"21");
    let r = project(D, typed("apply", false, Some("21")), &input, 22);
    check_typed_error(&D, &input, &r, "apply", false, b"21");
    assert!(r.out.len() < 2048);
}

/// An answer with a second `result` or `error` (which no SDK writes, and
/// whose last a reader keeps) is not one answer: the projector says so, keeps
/// the first and drops the rest, so the output is one answer within one
/// ceiling. Earlier builds budgeted each on its own (the output grew with
/// each), and for a typed call over budget wrote the first `result` with no
/// value at all (`"result":,`, found by the `mcp` fuzz target).
#[test]
fn a_second_result_or_error_is_dropped_and_reported() {
    let text = "0123456789abcdef".repeat(8_000);
    let result = format!(r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#);
    let error = format!(r#"{{"code":-1,"message":"{text}"}}"#);
    let lim = McpLimits {
        max_result_bytes: 4096,
        ..D
    };
    for (members, dropped) in [
        (
            format!(r#""result":{result},"result":{result},"result":{result}"#),
            2,
        ),
        (format!(r#""result":{result},"error":{error}"#), 1),
        (
            format!(r#""error":{error},"result":{result},"error":{error}"#),
            2,
        ),
    ] {
        let input = format!(r#"{{"jsonrpc":"2.0",{members},"id":5}}"#);
        for treat in [tool(), typed("t", false, Some("5"))] {
            let r = project(lim, treat, input.as_bytes(), 0x2e5);
            let doc = parse_valid(&r.out);
            assert_eq!(
                doc.count_key("result") + doc.count_key("error"),
                1,
                "{}",
                s(&r.out)
            );
            assert!(r.out.len() <= 4096 + 64, "{} bytes", r.out.len());
            let mut p = projector(lim);
            p.begin(tool());
            let mut out = Vec::new();
            p.feed(input.as_bytes(), &mut out).expect("valid");
            p.finish(&mut out).expect("valid");
            assert!(p.repeated().is_some());
            assert_eq!(p.omitted_members(), dropped);
        }
    }
}

/// An `id` of 1 MB passes whole (every envelope member but the answer does),
/// and is handed on as it is read, not held to its end: the projector takes
/// no `id` longer than `MAX_ID_BYTES`, so it need not hold one. Earlier
/// builds held it whole (a 100 MB `id` took `filter` to 198 MB of RSS).
#[test]
fn a_huge_id_passes_without_being_held() {
    let id = "i".repeat(1 << 20);
    let input = format!(r#"{{"jsonrpc":"2.0","id":"{id}","result":{{"content":[]}}}}"#);
    let mut p = projector(D);
    p.begin(tool());
    let mut out = Vec::new();
    let chunks: Vec<&[u8]> = input.as_bytes().chunks(BIG_CHUNK).collect();
    let mut fed = 0;
    for c in &chunks {
        p.feed(c, &mut out).expect("valid");
        fed += c.len();
        // All but the last feed's worth is out already.
        assert!(
            out.len() + BIG_CHUNK + 64 >= fed,
            "{} of {fed} bytes out",
            out.len()
        );
    }
    p.finish(&mut out).expect("valid");
    assert!(out == input.as_bytes());
    assert_eq!(p.id(), None);
    // A short one is still taken.
    let short = br#"{"jsonrpc":"2.0","id":"abc","result":{"content":[]}}"#;
    p.begin(tool());
    let mut out = Vec::new();
    for c in short.chunks(3) {
        p.feed(c, &mut out).expect("valid");
    }
    p.finish(&mut out).expect("valid");
    assert_eq!(p.id(), Some(&b"\"abc\""[..]));
}
