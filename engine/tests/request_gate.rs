//! The request gate as a library user runs it: every kind of client line, at
//! every split point (or a sample of them on long lines), fed in pieces and
//! given whole, with the fate, the reply and the bytes the server gets
//! checked against what the line is.

use resultbudget::gate::{Fate, Notice, RequestGate, Why, PASS_PIECE};
use resultbudget::guard::{ArgCaps, GuardVerdict};
use resultbudget::inventory::Inventory;
use serde_json::{json, Value};

const CAPS: ArgCaps = ArgCaps {
    max_arg_bytes: 4096,
    max_arg_items: 8,
    max_arg_string_bytes: 100,
    max_arg_string_chars: 100,
    max_arg_keys: 16,
    max_arg_depth: 8,
    max_request_bytes: 300_000,
};

fn call(id: u32, tool: &str, args: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}}))
        .unwrap()
}

/// What a line should come to: forwarded, or dropped for this reason with a
/// reply of this code (`Some(0)`: an `isError` result) or none.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Want {
    Forward,
    Drop(&'static str, Option<i64>),
}

fn why_name(w: &Why) -> &'static str {
    match w {
        Why::NamedCallLate => "late",
        Why::NotJson => "json",
        Why::NotOneMessage => "batch",
        Why::CapBeforeMethod => "early",
        Why::Refused(_) => "refused",
        Why::NotOneLine => "newline",
        Why::IdUnreadable => "id",
        _ => "other",
    }
}

fn lines() -> Vec<(&'static str, Vec<u8>, Want)> {
    let long = "x".repeat(3 * PASS_PIECE);
    vec![
        (
            "ping",
            br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_vec(),
            Want::Forward,
        ),
        ("blank", b"  \t".to_vec(), Want::Forward),
        ("small call", call(2, "echo", json!({"message":"hi"})), Want::Forward),
        (
            "string over its cap",
            call(3, "echo", json!({"message":"é".repeat(60)})),
            Want::Drop("refused", Some(0)),
        ),
        (
            "arguments before the method",
            br#"{"params":{"arguments":{"a":[1,2,3,4,5,6,7,8,9]},"name":"echo"},"jsonrpc":"2.0","id":4,"method":"tools/call"}"#.to_vec(),
            Want::Drop("refused", Some(0)),
        ),
        (
            "list tool given a query",
            call(5, "list_files", json!({"query":"x"})),
            Want::Drop("refused", Some(0)),
        ),
        // A name is read up to `sniff::NAME_CAP` (2,048) bytes as written,
        // quotes included: at the cap a `list_` name is a list tool's; past
        // it the name names no tool, nor a class by its first letters (no
        // MCP tool has such a name; specs/request-guard.md).
        (
            "list tool by a name at the cap, given a query",
            call(5, &format!("list_{}", "a".repeat(2041)), json!({"query":"x"})),
            Want::Drop("refused", Some(0)),
        ),
        (
            "a list_ name over the cap, given a query",
            call(5, &format!("list_{}", "a".repeat(2042)), json!({"query":"x"})),
            Want::Forward,
        ),
        (
            "a search_ name over the cap, without a query",
            call(5, &format!("search_{}", "a".repeat(2040)), json!({})),
            Want::Forward,
        ),
        (
            "a batch of one call",
            [b"[".as_slice(), &call(6, "echo", json!({"message":"y".repeat(5000)})), b"]"].concat(),
            Want::Drop("batch", Some(-32600)),
        ),
        ("a bare value", b" 42".to_vec(), Want::Drop("batch", Some(-32600))),
        (
            "NaN in a call",
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"a":NaN}}}"#.to_vec(),
            Want::Drop("json", Some(-32700)),
        ),
        (
            "an answer that names tools/call",
            br#"{"jsonrpc":"2.0","id":8,"result":{},"method":"tools/call","params":{"name":"echo","arguments":{}}}"#.to_vec(),
            Want::Drop("late", Some(-32600)),
        ),
        (
            "ping, then tools/call",
            br#"{"jsonrpc":"2.0","id":9,"method":"ping","method":"tools/call","params":{"name":"echo","arguments":{}}}"#.to_vec(),
            Want::Drop("late", Some(-32600)),
        ),
        // Found by fuzzing (finding 21): a third `method` after the call
        // took it back, so the line was late or not by where a read ended.
        (
            "ping, tools/call, then ping again",
            br#"{"jsonrpc":"2.0","id":11,"method":"ping","method":"tools/call","method":"ping"}"#.to_vec(),
            Want::Drop("late", Some(-32600)),
        ),
        (
            "ping, tools/call, ping again, then broken",
            br#"{"jsonrpc":"2.0","id":12,"method":"ping","method":"tools/call","method":"ping","params":NaN}"#.to_vec(),
            Want::Drop("late", Some(-32600)),
        ),
        (
            "ping, broken, then tools/call",
            br#"{"jsonrpc":"2.0","id":13,"method":"ping","params":NaN,"method":"tools/call"}"#.to_vec(),
            Want::Drop("json", Some(-32700)),
        ),
        // Found by fuzzing (finding 22): a request whose id is not one the
        // proxy can read was refused, forwarded or dropped, and never
        // answered. It is answered here with a null id.
        (
            "a call whose id is an array",
            br#"{"jsonrpc":"2.0","id":[],"method":"tools/call","params":{"name":"echo","arguments":{}}}"#.to_vec(),
            Want::Drop("id", Some(-32600)),
        ),
        (
            "a ping whose id is an object",
            br#"{"jsonrpc":"2.0","id":{"n":1},"method":"ping"}"#.to_vec(),
            Want::Drop("id", Some(-32600)),
        ),
        (
            "a ping whose id is over 256 bytes",
            format!(r#"{{"jsonrpc":"2.0","id":"{}","method":"ping"}}"#, "i".repeat(300)).into_bytes(),
            Want::Drop("id", Some(-32600)),
        ),
        (
            "a ping whose last id is an array",
            br#"{"jsonrpc":"2.0","id":14,"method":"ping","id":[14]}"#.to_vec(),
            Want::Drop("id", Some(-32600)),
        ),
        (
            "a ping whose array id comes before its last",
            br#"{"jsonrpc":"2.0","id":[15],"method":"ping","id":15}"#.to_vec(),
            Want::Drop("id", Some(-32600)),
        ),
        (
            "a long ping whose id is an array",
            format!(r#"{{"jsonrpc":"2.0","method":"ping","params":{{"pad":"{long}"}},"id":[17]}}"#).into_bytes(),
            Want::Drop("id", Some(-32600)),
        ),
        (
            "a long ping with an array id at its start",
            format!(r#"{{"jsonrpc":"2.0","method":"ping","id":[18],"params":{{"pad":"{long}"}}}}"#).into_bytes(),
            Want::Drop("id", Some(-32600)),
        ),
        (
            "an answer whose id is an array",
            br#"{"jsonrpc":"2.0","id":[16],"result":{}}"#.to_vec(),
            Want::Forward,
        ),
        (
            "a notification over the caps",
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"a long reason, longer than the string cap of the arguments, which does not apply to it"}}"#.to_vec(),
            Want::Forward,
        ),
        (
            "a long notification",
            format!(r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"data":"{long}"}}}}"#).into_bytes(),
            Want::Forward,
        ),
        (
            "a long notification, broken at its end",
            format!(r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"data":"{long}"}}"#).into_bytes(),
            Want::Drop("json", None),
        ),
        (
            "a long answer that names tools/call at its end",
            format!(r#"{{"jsonrpc":"2.0","id":"s1","result":{{"data":"{long}"}},"method":"tools/call"}}"#).into_bytes(),
            Want::Drop("late", Some(-32600)),
        ),
        (
            "a long call",
            call(10, "echo", json!({"message":"z".repeat(3 * PASS_PIECE)})),
            Want::Drop("refused", Some(0)),
        ),
        // A call with no id is a notification: refused, and answered to no
        // one (an answer with a null id answers nothing the client sent).
        (
            "a call with no id over its cap",
            br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"a":[1,2,3,4,5,6,7,8,9]}}}"#.to_vec(),
            Want::Drop("refused", None),
        ),
        (
            "a list tool given a query, with no id",
            br#"{"jsonrpc":"2.0","idz":11,"method":"tools/call","params":{"name":"list_files","arguments":{"query":"x"}}}"#.to_vec(),
            Want::Drop("refused", None),
        ),
        (
            "a long call with no id",
            format!(r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"echo","arguments":{{"message":"{long}"}}}}}}"#).into_bytes(),
            Want::Drop("refused", None),
        ),
    ]
}

/// The value after the line's first `"id":` (read on a line that is not
/// valid JSON too, as the gate reads what came before the break).
fn id_of(line: &[u8]) -> Option<Value> {
    let at = line.windows(5).position(|w| w == b"\"id\":")?;
    serde_json::Deserializer::from_slice(&line[at + 5..])
        .into_iter::<Value>()
        .next()?
        .ok()
}

/// Split points: all of them on a short line, about 40 on a long one.
fn points(len: usize) -> Vec<usize> {
    if len <= 400 {
        (0..=len).collect()
    } else {
        (0..=len).step_by(len / 40).chain([len - 1, len]).collect()
    }
}

fn check_reply(name: &str, fate: &Fate, want: Want, id: Option<&Value>) {
    match (fate, want) {
        (Fate::Forward { clamped }, Want::Forward) => assert_eq!(*clamped, None, "{name}"),
        (Fate::Dropped { why, reply }, Want::Drop(w, code)) => {
            assert_eq!(why_name(why), w, "{name}: {why:?}");
            match (reply, code) {
                (None, None) => {}
                (Some(r), Some(code)) => {
                    assert!(r.ends_with(b"\n"), "{name}: the reply is a line");
                    let v: Value = serde_json::from_slice(r).unwrap();
                    assert_eq!(v["jsonrpc"], "2.0", "{name}: {v}");
                    if code == 0 {
                        assert_eq!(v["result"]["isError"], true, "{name}: {v}");
                        assert!(
                            v["result"]["_meta"]["resultbudget/refusal"].is_object(),
                            "{name}: {v}"
                        );
                    } else {
                        assert_eq!(v["error"]["code"], code, "{name}: {v}");
                    }
                    let want_id = if w == "batch" || w == "id" {
                        &Value::Null
                    } else {
                        id.unwrap_or(&Value::Null)
                    };
                    assert_eq!(&v["id"], want_id, "{name}: the reply's id");
                }
                (r, c) => panic!(
                    "{name}: reply {:?}, wanted code {c:?}",
                    r.as_ref().map(|r| String::from_utf8_lossy(r))
                ),
            }
        }
        (f, w) => panic!("{name}: {f:?}, wanted {w:?}"),
    }
}

#[test]
fn every_line_at_every_split_comes_to_the_same_fate() {
    let mut gate = RequestGate::new(CAPS);
    let mut whole = RequestGate::new(CAPS);
    for (name, line, want) in lines() {
        let id = id_of(&line);
        let full = [line.as_slice(), b"\n"].concat();
        // Given whole: forwarded byte for byte, or nothing sent.
        let fate = whole.check(&full);
        check_reply(name, &fate, want, id.as_ref());
        match fate {
            Fate::Forward { .. } => assert_eq!(whole.to_send(), &full[..], "{name}"),
            Fate::Dropped { .. } => assert!(whole.to_send().is_empty(), "{name}"),
        }
        for p in points(line.len()) {
            for pieces in [
                vec![&line[..p], &line[p..]],
                line[..p].chunks(4096).chain([&line[p..]]).collect(),
            ] {
                let mut sent = Vec::new();
                let mut notices = Vec::new();
                for piece in pieces {
                    notices.extend(gate.feed(piece, |b| sent.extend_from_slice(b)));
                }
                let f = gate.end_line();
                assert_eq!(f, fate, "{name}, split at {p}");
                match f {
                    Fate::Forward { .. } => {
                        sent.extend_from_slice(gate.to_send());
                        assert_eq!(sent, full, "{name}, split at {p}: the server gets the line");
                        // A short line goes in one write with its newline.
                        if line.len() <= PASS_PIECE {
                            assert_eq!(gate.to_send(), &full[..], "{name}, split at {p}");
                        }
                    }
                    Fate::Dropped { ref why, .. } => {
                        if sent.is_empty() {
                            assert!(gate.to_send().is_empty(), "{name}, split at {p}");
                        } else {
                            // A line that streamed: the server gets a part and
                            // a newline, one line it cannot read whole.
                            assert!(line.len() > PASS_PIECE, "{name}: a short line streamed");
                            assert!(
                                !matches!(why, Why::Refused(_)),
                                "{name}: part of a refused call went on"
                            );
                            assert_eq!(gate.to_send(), b"\n", "{name}, split at {p}");
                            assert!(
                                line.starts_with(&sent),
                                "{name}, split at {p}: not a part of the line"
                            );
                            assert!(
                                serde_json::from_slice::<Value>(&sent).is_err(),
                                "{name}: a whole message went on"
                            );
                        }
                    }
                }
                let late = matches!(
                    f,
                    Fate::Dropped {
                        why: Why::NamedCallLate,
                        ..
                    }
                );
                let streamed_late = late && line.len() > PASS_PIECE;
                assert_eq!(
                    notices.contains(&Notice::NamedCallLate),
                    late,
                    "{name}, split at {p}: the notice of a late call ({streamed_late})"
                );
            }
        }
    }
}

#[test]
fn a_message_with_a_newline_inside_is_not_one_line() {
    let mut gate = RequestGate::default();
    let msg = b"{\"jsonrpc\":\"2.0\",\n\"id\":1,\"method\":\"ping\"}\n";
    match gate.check(msg) {
        Fate::Dropped {
            why: Why::NotOneLine,
            reply: Some(r),
        } => {
            let v: Value = serde_json::from_slice(&r).unwrap();
            assert_eq!(
                (v["id"].clone(), v["error"]["code"].clone()),
                (json!(1), json!(-32600))
            );
        }
        f => panic!("{f:?}"),
    }
    assert!(gate.to_send().is_empty());
    // Its own newline at the end is the frame's.
    assert_eq!(
        gate.check(b"{\"id\":1,\"method\":\"ping\"}\n"),
        Fate::Forward { clamped: None }
    );
    assert_eq!(gate.to_send(), b"{\"id\":1,\"method\":\"ping\"}\n");
}

#[test]
fn the_inventory_clamps_a_limit_in_the_line_that_goes_on() {
    // A list tool whose limit is clamped, and its search twin, which refuses.
    let row = |tool: &str, class: &str, limit: Value| {
        json!({"tool": tool, "surface": "things", "classification": class, "read_only": true,
               "limit": limit, "per_item_budget_bytes": 256,
               "cursor": {"param": "cursor", "has_more_field": "has_more", "next_cursor_field": "next_cursor"},
               "result_budget": {"max_result_bytes": 4096}, "backend_query_bound": "limit+1",
               "structured_content_policy": "cut_generic"})
    };
    let mut list = row(
        "list_things",
        "list",
        json!({"param":"limit","default":20,"max":30,"over_max":"clamp"}),
    );
    list["search_twin"] = json!("search_things");
    let mut search = row(
        "search_things",
        "search",
        json!({"param":"limit","default":20,"max":40}),
    );
    search["query_params"] = json!(["query"]);
    let inv = Inventory::parse(&json!({ "tools": [list, search] }).to_string()).unwrap();
    let mut gate = RequestGate::new(ArgCaps::DEFAULT);
    gate.set_inventory(Some(inv));
    let line = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"limit":500},"name":"list_things"}}"#;
    for p in 0..=line.len() {
        let mut sent = Vec::new();
        let _ = gate.feed(&line[..p], |b| sent.extend_from_slice(b));
        let _ = gate.feed(&line[p..], |b| sent.extend_from_slice(b));
        assert_eq!(gate.end_line(), Fate::Forward { clamped: Some(30) });
        assert!(sent.is_empty(), "a call is held whole");
        assert_eq!(
            gate.to_send(),
            &br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"limit":30},"name":"list_things"}}
"#[..]
        );
        assert_eq!(gate.tool(), "list_things");
    }
    // Over the maximum of a row that refuses: an isError result with the max.
    let line = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search_things","arguments":{"query":"x","limit":41}}}"#;
    match gate.check(line) {
        Fate::Dropped {
            why: Why::Refused(GuardVerdict::LimitTooHigh { max: 40, .. }),
            reply: Some(r),
        } => {
            let v: Value = serde_json::from_slice(&r).unwrap();
            assert_eq!(
                v["result"]["_meta"]["resultbudget/refusal"]["max"], 40,
                "{v}"
            );
            assert_eq!(v["id"], 2);
        }
        f => panic!("{f:?}"),
    }
}

/// A clamp rewrites the page size the server reads (the last member of the
/// row's name for it), whatever its spelling, a string as a string, and
/// changes no other byte; at every split point. Under a row whose page size
/// is `count`, `limit` is left alone.
#[test]
fn a_clamp_rewrites_the_page_size_the_server_reads() {
    let row = |tool: &str, param: &str| {
        json!({"tool": tool, "surface": "things", "classification": "directory", "read_only": true,
               "limit": {"param": param, "default": 5, "max": 30, "over_max": "clamp"},
               "per_item_budget_bytes": 256,
               "cursor": {"param": "cursor", "has_more_field": "has_more", "next_cursor_field": "next_cursor"},
               "result_budget": {"max_result_bytes": 4096}, "backend_query_bound": "limit+1",
               "structured_content_policy": "cut_generic"})
    };
    let inv = Inventory::parse(
        &json!({ "tools": [row("dir", "limit"), row("events", "count")] }).to_string(),
    )
    .unwrap();
    let mut gate = RequestGate::new(ArgCaps::DEFAULT);
    gate.set_inventory(Some(inv));
    for (tool, args, want) in [
        ("dir", r#"{"limit":500}"#, Some(r#"{"limit":30}"#)),
        ("dir", r#"{"limit":5e2}"#, Some(r#"{"limit":30}"#)),
        ("dir", r#"{"limit":30.5}"#, Some(r#"{"limit":30}"#)),
        ("dir", r#"{"limit":1e999}"#, Some(r#"{"limit":30}"#)),
        ("dir", r#"{"limit":"500"}"#, Some(r#"{"limit":"30"}"#)),
        ("dir", r#"{"limit":" 500 "}"#, Some(r#"{"limit":"30"}"#)),
        (
            "dir",
            r#"{"limit":500,"limit":31}"#,
            Some(r#"{"limit":500,"limit":30}"#),
        ),
        (
            "dir",
            r#"{"limit":5,"limit" : 40 ,"x":1}"#,
            Some(r#"{"limit":5,"limit" : 30 ,"x":1}"#),
        ),
        ("dir", r#"{"limit":500,"limit":3}"#, None),
        ("dir", r#"{"limit":30}"#, None),
        ("dir", r#"{"limit":"30.0"}"#, None),
        (
            "events",
            r#"{"count":99,"limit":500}"#,
            Some(r#"{"count":30,"limit":500}"#),
        ),
        ("events", r#"{"limit":500}"#, None),
    ] {
        for name_last in [false, true] {
            let line = |args: &str| {
                let mut l = if name_last {
                    format!(
                        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"arguments":{args},"name":"{tool}"}}}}"#
                    )
                } else {
                    format!(
                        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{args}}}}}"#
                    )
                };
                l.push('\n');
                l.into_bytes()
            };
            let given = line(args);
            let sent_want = line(want.unwrap_or(args));
            let body = &given[..given.len() - 1];
            for p in 0..=body.len() {
                let mut sent = Vec::new();
                let _ = gate.feed(&body[..p], |b| sent.extend_from_slice(b));
                let _ = gate.feed(&body[p..], |b| sent.extend_from_slice(b));
                let fate = gate.end_line();
                assert_eq!(
                    fate,
                    Fate::Forward {
                        clamped: want.map(|_| 30)
                    },
                    "{tool} {args} split at {p}"
                );
                sent.extend_from_slice(gate.to_send());
                assert_eq!(
                    String::from_utf8_lossy(&sent),
                    String::from_utf8_lossy(&sent_want),
                    "{tool} {args} split at {p}"
                );
            }
        }
    }
    // A string that reads as no number is refused, clamp or not.
    let line = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"dir","arguments":{"limit":"all"}}}"#;
    match gate.check(line) {
        Fate::Dropped {
            why:
                Why::Refused(GuardVerdict::LimitNotANumber {
                    ref value, max: 30, ..
                }),
            reply: Some(r),
        } if value == "all" => {
            let v: Value = serde_json::from_slice(&r).unwrap();
            let refusal = &v["result"]["_meta"]["resultbudget/refusal"];
            assert_eq!(refusal["reason"], "limit_not_a_number", "{v}");
            assert_eq!(refusal["value"], "all", "{v}");
            assert_eq!(refusal["param"], "limit", "{v}");
            assert_eq!(v["result"]["isError"], true, "{v}");
        }
        f => panic!("{f:?}"),
    }
}

/// A refusal fits the least result budget there is (1,024 bytes), as a
/// tool's own result must, however long the names and values it repeats: a
/// tool's name may take 2 KiB, and a `list_` tool's search twin is named
/// after it. Earlier builds wrote them whole: a 240-byte name gave a
/// 1,070-byte refusal. What is shortened ends in `…` and is a prefix of
/// what it stands for; a refusal that fits is written as it was.
#[test]
fn a_refusal_fits_the_least_result_budget() {
    let max = resultbudget::guard::MAX_REFUSAL_BYTES;
    assert_eq!(max as u64, resultbudget::mcp::MIN_MCP_RESULT_BYTES);
    for unit in ["x", "\u{1}", "\"", "\u{e9}", "\u{1F600}"] {
        for n in [3usize, 40, 240, 2000] {
            let long = unit.repeat(n);
            let verdicts = [
                GuardVerdict::Cap {
                    cap: "max_arg_string_bytes",
                    pointer: format!("/arguments/{long}"),
                    limit: 100,
                    size: 5000,
                    what: "a string of",
                    unit: "bytes",
                },
                GuardVerdict::QueryOnList {
                    tool: format!("list_{long}"),
                    arg: long.clone(),
                    twin: Some(format!("search_{long}")),
                },
                GuardVerdict::MissingQuery {
                    tool: format!("search_{long}"),
                    params: vec!["query".into(), long.clone()],
                },
                GuardVerdict::LimitTooHigh {
                    tool: long.clone(),
                    param: long.clone(),
                    limit: "9".repeat(n),
                    max: 20,
                },
                GuardVerdict::LimitNotANumber {
                    tool: long.clone(),
                    param: long.clone(),
                    value: long.clone(),
                    max: 20,
                },
            ];
            for v in verdicts {
                let mut out = Vec::new();
                v.write_response(&mut out, Some(b"7"), true);
                let got: Value = serde_json::from_slice(&out).unwrap();
                let result = serde_json::to_vec(&got["result"]).unwrap();
                let what = format!(
                    "{n} x {unit:?}: {}",
                    v.summary().chars().take(60).collect::<String>()
                );
                assert!(result.len() <= max, "{what}: {} bytes", result.len());
                assert_eq!(got["id"], 7);
                assert_eq!(got["result"]["isError"], true);
                let text = got["result"]["content"][0]["text"].as_str().unwrap();
                assert!(text.starts_with("resultbudget refused this call"), "{what}");
                // Whole, where the whole fits.
                if n == 3 {
                    assert!(!text.contains('\u{2026}'), "{what}: {text}");
                    assert_eq!(text, v.message());
                }
                // Each field of the record is whole, or a prefix and `…`.
                let refusal = got["result"]["_meta"]["resultbudget/refusal"]
                    .as_object()
                    .unwrap();
                for (k, f) in refusal {
                    let Some(f) = f.as_str() else { continue };
                    if let Some(p) = f.strip_suffix('\u{2026}') {
                        let whole = match (&v, k.as_str()) {
                            (GuardVerdict::Cap { pointer, .. }, "pointer") => pointer.clone(),
                            (GuardVerdict::QueryOnList { arg, .. }, "argument") => arg.clone(),
                            (GuardVerdict::QueryOnList { twin, .. }, "search_tool") => {
                                twin.clone().unwrap()
                            }
                            (GuardVerdict::LimitTooHigh { param, .. }, "param") => param.clone(),
                            (GuardVerdict::LimitTooHigh { limit, .. }, "limit") => limit.clone(),
                            (GuardVerdict::LimitNotANumber { param, .. }, "param") => param.clone(),
                            (GuardVerdict::LimitNotANumber { value, .. }, "value") => value.clone(),
                            _ => panic!("{what}: {k} shortened"),
                        };
                        assert!(whole.starts_with(p), "{what}: {k}");
                    }
                }
            }
        }
    }
    // Through the gate: a call of a `list_` tool by a long name with a query.
    let mut gate = RequestGate::new(CAPS);
    let line = call(
        1,
        &format!("list_{}", "x".repeat(1000)),
        json!({"query":"a"}),
    );
    let Fate::Dropped {
        reply: Some(reply), ..
    } = gate.check(&line)
    else {
        panic!("not refused");
    };
    let got: Value = serde_json::from_slice(&reply).unwrap();
    assert!(serde_json::to_vec(&got["result"]).unwrap().len() <= max);
    assert_eq!(
        got["result"]["_meta"]["resultbudget/refusal"]["reason"],
        "query_on_list_tool"
    );
}
