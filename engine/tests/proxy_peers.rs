//! The proxy between the official MCP SDK clients and the reference servers.
mod peers_support;

use peers_support::*;
use serde_json::{json, Value};

fn make_fs(tag: &str) -> std::path::PathBuf {
    let d = tmpdir(tag);
    let mut big = String::with_capacity(8_500_000);
    let mut i = 0u64;
    while big.len() < 8 * 1024 * 1024 {
        big.push_str(&format!(
            "line {i}: the quick brown fox jumps over the lazy dog, caf\u{e9} \u{1F600}\n"
        ));
        i += 1;
    }
    std::fs::write(d.join("big.txt"), big).unwrap();
    std::fs::write(d.join("small.txt"), "hello from a small file\n").unwrap();
    d
}

#[test]
fn ts_client_reads_8mb_file_only_through_the_proxy() {
    let dir = make_fs("fs8");
    let fs = filesystem_cmd(&dir);
    let small = json!({"name":"read_text_file","arguments":{"path": dir.join("small.txt")}});
    let big = json!({"name":"read_text_file","arguments":{"path": dir.join("big.txt")}});

    // Without the proxy the TypeScript SDK drops the connection (its 10 MiB line limit).
    let direct = ts_client(&json!({"command": fs, "calls":[small, big], "timeout_ms": 20000}));
    assert_eq!(direct[0]["ok"], true, "{direct:?}");
    assert_eq!(
        direct[1]["ok"], false,
        "the direct read should kill the connection: {direct:?}"
    );
    let why = direct[1].to_string();
    assert!(
        why.contains("Connection closed") || why.contains("exceeded maximum size"),
        "{why}"
    );

    // Through the proxy: a bounded, well-formed answer, and the session goes on.
    let via = ts_client(&json!({
        "command": proxied(&["--log-level","info"], &fs),
        "calls":[small, big, small], "timeout_ms": 30000}));
    assert_eq!(via.len(), 3, "{via:?}");
    for v in &via {
        assert_eq!(v["ok"], true, "{via:?}");
    }
    assert_eq!(
        via[0]["result"], direct[0]["result"],
        "small reads pass unchanged"
    );
    assert_eq!(via[2]["result"], direct[0]["result"]);
    let r = &via[1]["result"];
    // read_text_file declares an outputSchema: a typed, read-only result is whole or an error.
    assert_eq!(r["isError"], true, "{r}");
    let t = text(r, 0);
    assert!(
        t.starts_with("result_budget_exceeded: the complete result of tool read_text_file is "),
        "{t}"
    );
    assert!(t.contains("over the result budget of 65536 bytes"), "{t}");
    assert!(
        !t.contains("do not repeat"),
        "read-only guidance never mentions repeating"
    );
    let rec = record(r).expect("record");
    assert_eq!(rec["truncated"], true);
    assert!(
        rec["original_bytes"].as_u64().unwrap() > 16_000_000,
        "{rec}"
    );
    assert!(serde_json::to_vec(r).unwrap().len() <= 65536);
    assert!(
        r.get("structuredContent").is_none(),
        "no partial typed success"
    );
}

#[test]
fn ts_client_untyped_inventory_gets_a_cut_text() {
    // With an inventory that treats read_text_file as plain text, the client gets the head of the file.
    let dir = make_fs("fsinv");
    let inv = dir.join("inv.json");
    std::fs::write(
        &inv,
        serde_json::to_vec(&json!({"tools":[{
            "tool":"read_text_file","surface":"file read","classification":"single","read_only":true,
            "limit":null,"cursor":null,"per_item_budget_bytes":null,
            "result_budget":{"max_result_bytes":65536},
            "backend_query_bound":"one file","structured_content_policy":"cut_generic"}]}))
        .unwrap(),
    )
    .unwrap();
    let fs = filesystem_cmd(&dir);
    let inv_s = inv.to_string_lossy().into_owned();
    let via = ts_client(&json!({
        "command": proxied(&["--inventory", &inv_s], &fs),
        "calls":[{"name":"read_text_file","arguments":{"path": dir.join("big.txt")}}], "timeout_ms": 30000}));
    let r = &via[0]["result"];
    assert_eq!(via[0]["ok"], true, "{via:?}");
    assert!(r.get("isError").is_none() || r["isError"] == false);
    let t = text(r, 0);
    assert!(t.starts_with("line 0: the quick brown fox"), "{t:.200}");
    assert!(
        t.contains("\n[resultbudget: output cut, "),
        "marker present"
    );
    assert!(t.len() <= 16 * 1024, "{}", t.len());
    let sc = r["structuredContent"]["content"].as_str().unwrap();
    assert!(sc.len() <= 4096 && sc.starts_with("line 0:"));
    let rec = record(r).unwrap();
    let paths: Vec<&str> = rec["omitted_paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(paths, ["/content/0/text", "/structuredContent/content"]);
}

#[test]
fn small_calls_through_the_proxy_equal_direct_calls() {
    let calls = json!([
        {"name":"echo","arguments":{"message":"hello \u{e9}\u{1F600} \"quoted\""}},
        {"name":"get-sum","arguments":{"a":1.5,"b":-0.0}},
        {"name":"get-tiny-image","arguments":{}},
        {"name":"get-structured-content","arguments":{"location":"New York"}},
        {"name":"get-annotated-message","arguments":{"messageType":"error","includeImage":true}},
        {"name":"get-resource-links","arguments":{"count":3}}
    ]);
    let ev = everything_cmd();
    let direct = ts_client(&json!({"command": ev, "calls": calls}));
    let via = ts_client(&json!({"command": proxied(&[], &ev), "calls": calls}));
    assert_eq!(direct.len(), 6);
    for (d, v) in direct.iter().zip(&via) {
        assert_eq!(d["ok"], true, "{d}");
        assert_eq!(
            d, v,
            "a small call must come back exactly as the server sent it"
        );
    }
    // And the Python client sees the same.
    let pdirect = py_client(&json!({"command": ev, "calls": calls}));
    let pvia = py_client(&json!({"command": proxied(&[], &ev), "calls": calls}));
    assert_eq!(pdirect, pvia);
    assert!(pdirect.iter().all(|o| o["ok"] == true), "{pdirect:?}");
}

#[test]
fn python_client_gets_a_cut_3mb_echo_with_its_record() {
    let msg = "y".repeat(3_000_000);
    let ev = everything_cmd();
    let out = py_client(&json!({
        "command": proxied(&["--max-arg-bytes","8m","--max-arg-string-bytes","8m","--max-arg-string-chars","8m","--max-request-bytes","8m"], &ev),
        "calls":[{"name":"echo","arguments":{"message": msg}}, {"name":"echo","arguments":{"message":"after"}}]}));
    assert_eq!(out[0]["ok"], true, "{out:?}");
    let r = &out[0]["result"];
    let t = text(r, 0);
    assert!(t.starts_with("Echo: yyyy"));
    assert!(
        t.ends_with(" bytes omitted]"),
        "{}",
        &t[t.len().saturating_sub(80)..]
    );
    assert!(t.len() <= 16 * 1024);
    let rec = record(r).expect("record");
    assert_eq!(rec["truncated"], true);
    assert_eq!(rec["budget_kind"], "text_block_bytes");
    assert_eq!(rec["omitted_count"], 1);
    assert_eq!(rec["omitted_paths"], json!(["/content/0/text"]));
    assert!(rec["original_bytes"].as_u64().unwrap() > 3_000_000);
    assert_eq!(text(&out[1]["result"], 0), "Echo: after");
    assert!(record(&out[1]["result"]).is_none());
}

#[test]
fn parallel_calls_with_different_budgets_and_the_id_last() {
    // The TypeScript server writes the id last; typed and untyped calls in flight at once.
    let ev = everything_cmd();
    let big = "z".repeat(200_000);
    let calls = json!([
        {"name":"echo","arguments":{"message": big}},
        {"name":"get-structured-content","arguments":{"location":"Chicago"}},
        {"name":"echo","arguments":{"message":"small"}},
        {"name":"echo","arguments":{"message": big}},
    ]);
    let direct =
        ts_client(&json!({"command": ev, "calls": calls, "parallel": true, "list_first": true}));
    let via = ts_client(
        &json!({"command": proxied(&[], &ev), "calls": calls, "parallel": true, "list_first": true}),
    );
    assert!(via.iter().all(|o| o["ok"] == true), "{via:?}");
    assert_eq!(via[1], direct[1], "the typed call passes whole");
    assert_eq!(via[2], direct[2]);
    for i in [0, 3] {
        let t = text(&via[i]["result"], 0);
        assert!(
            t.len() <= 16 * 1024 && t.ends_with(" bytes omitted]"),
            "{i}: {}",
            t.len()
        );
        assert_eq!(
            record(&via[i]["result"]).unwrap()["budget_kind"],
            "text_block_bytes"
        );
    }
}

/// Hundreds of calls in flight at once, as a busy agent sends them: the proxy
/// batches the lines it has already read into one write each way (requests
/// to the server, answers to the client). Every answer must still come back,
/// to its own call, exactly as the server sent it.
#[test]
fn hundreds_of_calls_in_flight_come_back_whole_and_matched() {
    let calls: Vec<Value> = (0..400)
        .map(|i| {
            if i % 5 == 0 {
                json!({"name":"get-sum","arguments":{"a": i, "b": 0.5}})
            } else {
                json!({"name":"echo","arguments":{"message": format!("call {i}: {}", "x".repeat(i % 97))}})
            }
        })
        .collect();
    let ev = everything_cmd();
    let direct = ts_client(&json!({"command": ev, "calls": calls, "parallel": true}));
    let via = ts_client(&json!({"command": proxied(&[], &ev), "calls": calls, "parallel": true}));
    assert_eq!(direct.len(), 400);
    assert_eq!(via.len(), 400);
    for (i, (d, v)) in direct.iter().zip(&via).enumerate() {
        assert_eq!(d["ok"], true, "{i}: {d}");
        assert_eq!(d, v, "call {i} must come back as the server sent it");
    }
    assert!(text(&via[7]["result"], 0).starts_with("Echo: call 7: xxxxxxx"));
}

/// A server that does not exit when its input ends is given the proxy's
/// grace (2 s) once the client's input has ended, then ended; the proxy
/// says so and exits non-zero, long before the server would have.
#[test]
fn a_server_that_outlives_its_input_is_ended_after_the_grace() {
    // `sleep` neither reads its input nor exits at its end.
    let server = ["sh", "-c", "exec sleep 60"].map(String::from);
    let started = std::time::Instant::now();
    let s = Raw::spawn(&proxied(&[], &server), &[]);
    let (code, err) = s.wait(30);
    let took = started.elapsed();
    assert_eq!(code, Some(1), "the proxy exits non-zero: {err}");
    assert!(
        err.contains("did not exit after stdin closed"),
        "the proxy says why: {err}"
    );
    assert!(err.contains("exited with status"), "{err}");
    assert!(
        took >= std::time::Duration::from_secs(2) && took < std::time::Duration::from_secs(20),
        "ended after the grace, not at once nor with the server: {took:?}"
    );
}

#[test]
fn server_crash_mid_response_ends_cleanly() {
    let log = tmpdir("crash").join("server.log");
    let log_s = log.to_string_lossy().into_owned();
    let mut s = Raw::spawn(&proxied(&[], &pyserver_cmd()), &[("RB_SERVER_LOG", &log_s)]);
    s.initialize();
    let ok = s.call(5, "big_text", json!({"n_bytes": 10}));
    assert_eq!(ok["result"]["content"][0]["text"], "lorem ipsu");
    s.send(&json!({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"crash","arguments":{}}}));
    // Every line the client sees parses; the crashed call gets an error, then the stream ends.
    let mut got_error = false;
    while let Some(v) = s.next(30) {
        if v["id"] == 6 {
            assert_eq!(v["error"]["code"], -32603, "{v}");
            got_error = true;
        }
    }
    assert!(got_error, "the pending call must be answered with an error");
    let (code, err) = s.wait(10);
    assert_eq!(code, Some(1), "the proxy exits non-zero: {err}");
    assert!(err.contains("died in the middle of a response"), "{err}");
}

#[test]
fn python_client_survives_a_server_crash() {
    let out = py_client(&json!({"command": proxied(&[], &pyserver_cmd()),
        "calls":[{"name":"big_text","arguments":{"n_bytes": 5}}, {"name":"crash","arguments":{}}]}));
    assert_eq!(out[0]["ok"], true, "{out:?}");
    assert_eq!(out[1]["ok"], false, "{out:?}");
    assert!(
        out[1]["error"].as_str().unwrap().contains("exited"),
        "{out:?}"
    );
}

#[test]
fn stray_lines_on_the_servers_stdout_do_not_fail_the_call() {
    // Both SDK clients skip a line that is not JSON and keep waiting for the
    // call's answer; through the proxy the call must not fare worse (it used to
    // get an error for the stray line, and its real answer was then dropped).
    let calls = json!([{"name":"chatty","arguments":{"n_lines":3}},
                       {"name":"big_text","arguments":{"n_bytes":5}}]);
    for client in [py_client, ts_client] {
        let direct = client(&json!({"command": pyserver_cmd(), "calls": calls}));
        let via = client(&json!({"command": proxied(&[], &pyserver_cmd()), "calls": calls}));
        assert_eq!(direct[0]["ok"], true, "{direct:?}");
        assert_eq!(text(&direct[0]["result"], 0), "chatty done");
        assert_eq!(direct, via);
    }
}

#[test]
fn python_client_answers_a_sampling_request_larger_than_the_request_cap() {
    // A client's answer to the server's own request is not a call: it is never held,
    // guarded or refused, whatever its size (here 3 MB against the 2 MiB request cap).
    let out = py_client(&json!({"command": proxied(&[], &pyserver_cmd()),
        "mode": "legacy", "sampling_text_bytes": 3_000_000, "read_timeout": 30,
        "calls":[{"name":"ask_client","arguments":{"prompt":"hi"}},
                 {"name":"big_text","arguments":{"n_bytes": 5}}]}));
    assert_eq!(out[0]["ok"], true, "{out:?}");
    assert_eq!(
        text(&out[0]["result"], 0),
        "the client answered with 3000000 characters"
    );
    assert_eq!(text(&out[1]["result"], 0), "lorem");
}

#[test]
fn a_long_line_that_breaks_after_it_streamed_on_never_becomes_a_call() {
    // A line that starts as a `ping` streams on once it passes 64 KiB. This
    // one then has a `NaN`, where the guard stops reading it, and a second
    // `method`, tools/call, with arguments over their cap, then whitespace.
    // The Python SDK reads `NaN` and keeps the last of two keys: earlier
    // builds sent the line on up to its whitespace, and the server ran the
    // call, unmeasured.
    let log = tmpdir("nan-call").join("server.log");
    let log_s = log.to_string_lossy().into_owned();
    let mut s = Raw::spawn(
        &proxied(&["--max-arg-bytes", "1000"], &pyserver_cmd()),
        &[("RB_SERVER_LOG", &log_s)],
    );
    s.initialize();
    let pad = "p".repeat(200_000);
    let big = "b".repeat(5_000);
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\",\"params\":{{\"pad\":\"{pad}\",\"n\":NaN}},\
         \"method\":\"tools/call\",\"params\":{{\"name\":\"store\",\"arguments\":{{\"payload\":\"{big}\"}}}}}}{}\n",
        " ".repeat(300_000)
    );
    s.send_raw(line.as_bytes());
    let (v, _) = s.until_id(&json!(7), 30);
    assert_eq!(v["error"]["code"], -32700, "{v}");
    // The session goes on, and exactly one answer came for id 7.
    let ok = s.call(8, "big_text", json!({"n_bytes": 5}));
    assert_eq!(text(&ok["result"], 0), "lorem", "{ok}");
    s.close_stdin();
    let mut late = Vec::new();
    while let Some(v) = s.next(10) {
        late.push(v);
    }
    assert!(late.iter().all(|v| v["id"] != 7), "{late:?}");
    let (code, err) = s.wait(20);
    assert_eq!(code, Some(0), "{err}");
    let seen = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!seen.contains("store"), "the server ran it: {seen}");
    assert!(seen.contains("big_text 5"), "{seen}");
}

#[test]
fn a_method_or_tool_spelled_with_escapes_is_read_as_the_server_reads_it() {
    // `"tools\/call"` is `tools/call` to every JSON reader, and
    // `"\u006cist_things"` is `list_things`. Read as raw text, the first was
    // taken for another method and forwarded unmeasured (the Python SDK
    // server ran `store` with 5,000 bytes through `--max-arg-bytes 1000`),
    // and the second named no tool of the inventory.
    let log = tmpdir("escaped").join("server.log");
    let log_s = log.to_string_lossy().into_owned();
    let mut s = Raw::spawn(
        &proxied(&["--max-arg-bytes", "1000"], &pyserver_cmd()),
        &[("RB_SERVER_LOG", &log_s)],
    );
    s.initialize();
    let big = "b".repeat(5_000);
    let lines = [
        format!(r#"{{"jsonrpc":"2.0","id":8,"method":"tools\/call","params":{{"name":"store","arguments":{{"payload":"{big}"}}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":9,"method":"tools\u002fcall","params":{{"name":"\u0073tore","arguments":{{"payload":"{big}"}}}}}}"#),
        r#"{"jsonrpc":"2.0","id":10,"method":"tools\/call","params":{"name":"\u006cist_things","arguments":{"query":"x"}}}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":11,"method":"tools\/call","params":{"name":"big_text","arguments":{"n_bytes":200000}}}"#.to_string(),
    ];
    for l in &lines {
        s.send_raw(format!("{l}\n").as_bytes());
    }
    for id in [8, 9] {
        let (v, _) = s.until_id(&json!(id), 30);
        assert_eq!(
            v["result"]["_meta"]["resultbudget/refusal"]["cap"], "max_arg_bytes",
            "{v}"
        );
    }
    let (v, _) = s.until_id(&json!(10), 30);
    assert_eq!(
        v["result"]["_meta"]["resultbudget/refusal"]["reason"], "query_on_list_tool",
        "{v}"
    );
    // A call spelled so is still a call: registered, and its result budgeted.
    let (v, _) = s.until_id(&json!(11), 30);
    assert!(record(&v["result"]).is_some(), "{v}");
    assert!(text(&v["result"], 0).len() <= 16 * 1024, "{v}");
    let (code, err) = s.wait(20);
    assert_eq!(code, Some(0), "{err}");
    let seen = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(seen.trim(), "big_text 200000", "{seen}");
}

#[test]
fn a_call_the_guard_cannot_read_never_reaches_the_server() {
    // The reference server decodes its input as UTF-8 with replacement, then
    // parses with `JSON.parse`: a byte that is not UTF-8 (0xFF) inside a string
    // becomes U+FFFD there. The guard rejects the line as JSON and stops
    // measuring at that byte. A message after it, over `--max-arg-string-bytes
    // 1000`, used to reach the server unchecked (and came back in the echo).
    // (A lone surrogate escape did the same before the guard read them as U+FFFD.)
    let mut s = Raw::spawn(
        &proxied(&["--max-arg-string-bytes", "1000"], &everything_cmd()),
        &[],
    );
    s.initialize();
    let message = "m".repeat(5_000);
    let line = |id: u32, pad: &[u8]| {
        let mut l = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"pad\":\"").into_bytes();
        l.extend_from_slice(pad);
        l.extend_from_slice(format!("\",\"message\":\"{message}\"}}}}}}\n").as_bytes());
        l
    };
    s.send_raw(&line(7, b"\xff"));
    // (The server's notifications may come first.)
    let v = std::iter::from_fn(|| s.next(30))
        .find(|v| v.get("method").is_none())
        .unwrap_or_default();
    assert_eq!(v["id"], 7, "{v}");
    assert_eq!(v["error"]["code"], -32700, "{v}");
    // With a lone surrogate escape the line is read to its end, so the
    // message is measured and refused by its cap.
    s.send_raw(&line(6, b"\\ud800"));
    let (lone, _) = s.until_id(&json!(6), 30);
    assert_eq!(
        lone["result"]["_meta"]["resultbudget/refusal"]["cap"], "max_arg_string_bytes",
        "{lone}"
    );
    // The same call without the lone surrogate is refused by its cap, and a small
    // one still reaches the server.
    let plain = s.call(8, "echo", json!({"pad": "p", "message": message}));
    assert_eq!(
        plain["result"]["_meta"]["resultbudget/refusal"]["cap"], "max_arg_string_bytes",
        "{plain}"
    );
    let ok = s.call(9, "echo", json!({"message": "small"}));
    assert_eq!(ok["result"]["content"][0]["text"], "Echo: small", "{ok}");
}

#[test]
fn a_lone_surrogate_from_a_javascript_peer_reaches_the_client_as_it_would_directly() {
    // JavaScript's `JSON.stringify` writes a string cut inside a surrogate pair
    // as a lone surrogate escape (`"\ud83d"`), and `JSON.parse` reads it back.
    // The TypeScript client sends one in `echo`'s message, the reference server
    // echoes it, and the client reads it: the proxy must not make that an
    // error. (The plan writes a lone surrogate `<U+D83D>`; see ts_client.mjs.)
    let ev = everything_cmd();
    let small = "cut <U+D83D> here, low <U+DC00>, pair 😀";
    let big = format!("{}<U+D83D>", "ab<U+DBFF>c".repeat(2_000));
    let calls = json!([
        {"name": "echo", "arguments": {"message": small}},
        {"name": "echo", "arguments": {"message": big}},
    ]);
    let flags = ["--max-text-bytes", "3000"];
    let direct = ts_client(&json!({"command": ev, "calls": calls}));
    let via = ts_client(&json!({"command": proxied(&flags, &ev), "calls": calls}));
    assert_eq!(direct[0]["ok"], true, "{direct:?}");
    assert_eq!(text(&direct[0]["result"], 0), format!("Echo: {small}"));
    assert_eq!(direct[0], via[0]);
    // The big echo is cut on a unit boundary: what is kept is the direct
    // text's start, lone surrogates included, then the marker.
    assert_eq!(via[1]["ok"], true, "{via:?}");
    let (whole, cut) = (text(&direct[1]["result"], 0), text(&via[1]["result"], 0));
    assert_eq!(whole, format!("Echo: {big}"));
    let kept = cut.split("\n[resultbudget:").next().unwrap_or_default();
    assert!(kept.len() > 2000 && whole.starts_with(kept), "{cut:.300}");
    assert!(kept.contains("<U+DBFF>"), "{cut:.300}");
    let rec = record(&via[1]["result"]).expect("record");
    assert_eq!(rec["omitted_paths"], json!(["/content/0/text"]));
    // Refused, as earlier builds did, the same call never gets its answer:
    // the client writes `id` last, after the escape the proxy stops at.
    let strict = ts_client(
        &json!({"command": proxied(&["--lone-surrogates", "refuse"], &ev),
        "calls": [calls[0]], "timeout_ms": 3000}),
    );
    assert_eq!(strict[0]["ok"], false, "{strict:?}");
}

#[test]
fn answers_to_the_server_pass_and_only_calls_are_held() {
    let dir = tmpdir("answers");
    let log = dir.join("server.log");
    let log_s = log.to_string_lossy().into_owned();
    let mut s = Raw::spawn(
        &proxied(&["--max-request-bytes", "6000"], &pyserver_cmd()),
        &[("RB_SERVER_LOG", &log_s)],
    );
    s.initialize_with(json!({"sampling": {}}));
    // The server asks the client; the answer (100 000 characters, over the 6 000-byte
    // request cap) reaches it whole, written with `result` before `id` as well as after.
    for (i, result_first) in [(1, false), (2, true)] {
        s.send(&json!({"jsonrpc":"2.0","id":i,"method":"tools/call",
            "params":{"name":"ask_client","arguments":{"prompt":"hi"}}}));
        let ask = s.until_method("sampling/createMessage", 30);
        let result = json!({"role":"assistant","model":"m",
            "content":{"type":"text","text":"s".repeat(100_000)}});
        let line = if result_first {
            format!(
                "{{\"result\":{result},\"jsonrpc\":\"2.0\",\"id\":{}}}\n",
                ask["id"]
            )
        } else {
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{result}}}\n",
                ask["id"]
            )
        };
        s.send_raw(line.as_bytes());
        let (r, _) = s.until_id(&Value::from(i), 30);
        assert_eq!(
            text(&r["result"], 0),
            "the client answered with 100000 characters",
            "{r}"
        );
    }
    // A raw line sent; the client's answer for `id`, and the lines before it.
    let answer_for = |s: &mut Raw, line: String, id: i64| {
        s.send_raw(line.as_bytes());
        s.until_id(&Value::from(id), 30)
    };
    // A line that began as an answer and then names tools/call is not a call the guard
    // has seen: what is left of it never reaches the server, and the client is told.
    let pad = "p".repeat(100_000);
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":77,\"result\":{{\"pad\":\"{pad}\"}},\"method\":\"tools/call\",\"params\":{{\"name\":\"store\",\"arguments\":{{\"payload\":\"{}\"}}}}}}\n",
        "x".repeat(9000)
    );
    let (r, _) = answer_for(&mut s, line, 77);
    assert_eq!(r["error"]["code"], -32600, "{r}");
    // So is a line whose first method is not a call and whose later duplicate
    // `method` (which a server's parser keeps) is.
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":78,\"method\":\"ping\",\"params\":{{\"name\":\"store\",\"arguments\":{{\"payload\":\"{}\"}}}},\"method\":\"tools/call\"}}\n",
        "x".repeat(100_000)
    );
    let (r, _) = answer_for(&mut s, line, 78);
    assert_eq!(r["error"]["code"], -32600, "{r}");
    // A line with no method that breaks the request cap before its `result` (in
    // an earlier 64 KiB piece) is dropped, and its id (the server's) is not
    // answered to the client: no line for it comes before the answers to the
    // next two.
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":88,\"pad\":\"{}\",\"result\":{{}}}}\n",
        "q".repeat(100_000)
    );
    s.send_raw(line.as_bytes());
    // A request whose method comes after the cap is dropped whole, its long tail too
    // (the next line must reach the server intact), and the client is told.
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":90,\"params\":{{\"pad\":\"{}\"}},\"method\":\"ping\",\"tail\":\"{}\"}}\n",
        "q".repeat(70_000),
        "t".repeat(200_000)
    );
    let (r, before_90) = answer_for(&mut s, line, 90);
    assert_eq!(r["error"]["code"], -32602, "{r}");
    s.send(&json!({"jsonrpc":"2.0","id":3,"method":"tools/call",
        "params":{"name":"store","arguments":{"payload":"after"}}}));
    let (r, before_3) = s.until_id(&Value::from(3), 30);
    assert_eq!(text(&r["result"], 0), "stored", "{r}");
    assert!(
        before_90.iter().chain(&before_3).all(|o| o["id"] != 88),
        "{before_90:?} {before_3:?}"
    );
    let _ = s.wait(20);
    let seen = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = seen.lines().collect();
    assert_eq!(
        lines,
        [
            "ask_client hi",
            "ask_client answered 100000",
            "ask_client hi",
            "ask_client answered 100000",
            "store 5"
        ],
        "{seen}"
    );
}

#[test]
fn ts_client_answers_the_reference_servers_sampling_requests_through_the_proxy() {
    // server-everything asks the client for a sampling message and returns it in its
    // text. The TypeScript SDK client answers with 3 MB (over the 2 MiB request cap:
    // an answer is never held or refused); two calls at once, so the server's request
    // ids (0, 1) cross the client's call ids (1, 2). Both results come back cut.
    let ev = everything_cmd();
    let calls = json!([
        {"name":"trigger-sampling-request","arguments":{"prompt":"a"}},
        {"name":"trigger-sampling-request","arguments":{"prompt":"b"}},
    ]);
    let via = ts_client(&json!({"command": proxied(&[], &ev), "calls": calls,
        "parallel": true, "sampling_text_bytes": 3_000_000, "timeout_ms": 60000}));
    assert_eq!(via.len(), 2, "{via:?}");
    for o in &via {
        assert_eq!(o["ok"], true, "{o}");
        let t = text(&o["result"], 0);
        assert!(
            t.starts_with("LLM sampling result"),
            "{}",
            &t[..t.len().min(80)]
        );
        assert!(t.len() <= 48 * 1024, "{} bytes", t.len());
        let rec = record(&o["result"]).expect("record");
        assert_eq!(rec["truncated"], true);
        assert!(rec["original_bytes"].as_u64().unwrap() > 3_000_000, "{rec}");
    }
}

#[test]
fn an_answer_whose_id_is_spelled_otherwise_is_still_budgeted() {
    // The test server behind a shim that writes each answer's id as a string
    // (`"1"` for 1, as servers that keep ids as strings do) or as `"0x1"`: the
    // TypeScript client reads an answer's id with `Number()` and takes either
    // for its call. With calls to two tools in flight the proxy reads ahead for
    // the id; earlier builds found no call by it and passed the answer on
    // whole (200 000 bytes of text here).
    let big = 200_000;
    let calls = json!([
        {"name":"big_text","arguments":{"n_bytes": big}},
        {"name":"rows","arguments":{"n": 3}},
        {"name":"big_text","arguments":{"n_bytes": big}},
    ]);
    for how in ["string", "hex"] {
        let mut server = pyserver_cmd();
        server.extend(["--answer-ids-as".to_string(), how.to_string()]);
        let direct = ts_client(&json!({"command": server, "calls": calls, "parallel": true}));
        assert!(direct.iter().all(|o| o["ok"] == true), "{how}: {direct:?}");
        assert_eq!(text(&direct[0]["result"], 0).len(), big, "{how}");
        let via =
            ts_client(&json!({"command": proxied(&[], &server), "calls": calls, "parallel": true}));
        assert!(via.iter().all(|o| o["ok"] == true), "{how}: {via:?}");
        assert_eq!(via[1], direct[1], "{how}: the typed call's small answer");
        for i in [0, 2] {
            let r = &via[i]["result"];
            let size = serde_json::to_vec(r).unwrap().len();
            assert!(size <= 65536, "{how} {i}: {size} bytes reached the client");
            match how {
                // Found as its call (the client's 1 is the server's "1"): the
                // untyped tool's text is cut.
                "string" => {
                    assert_eq!(
                        record(r).expect("record")["budget_kind"],
                        "text_block_bytes"
                    );
                    assert!(text(r, 0).ends_with(" bytes omitted]"), "{how} {i}");
                }
                // Found as no call: the tightest pending treatment, the typed
                // tool's, which cannot hold it whole.
                _ => {
                    assert_eq!(r["isError"], true, "{how} {i}: {r}");
                    assert!(
                        text(r, 0).starts_with("result_budget_exceeded"),
                        "{how} {i}: {r}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_json_rpc_error_from_a_tool_is_bounded_for_both_clients() {
    // The Python server's tool raises an MCPError whose message and data are
    // 200 000 bytes each; both SDK clients turn the message into the error the
    // agent sees. Earlier builds passed it on whole.
    let n = 200_000;
    let calls = json!([{"name":"fail_loudly","arguments":{"n_bytes": n}},
                       {"name":"big_text","arguments":{"n_bytes": 10}}]);
    for (who, run) in [
        ("python", py_client as fn(&Value) -> Vec<Value>),
        ("typescript", ts_client),
    ] {
        let direct = run(&json!({"command": pyserver_cmd(), "calls": calls}));
        let via = run(&json!({"command": proxied(&[], &pyserver_cmd()), "calls": calls}));
        for (out, far) in [(&direct, true), (&via, false)] {
            assert_eq!(out[0]["ok"], false, "{who}: {out:?}");
            let e = out[0]["error"].as_str().unwrap_or_default();
            assert!(e.contains("boom eee"), "{who}: {}", &e[..e.len().min(200)]);
            if far {
                assert!(e.len() > n, "{who} directly: {}", e.len());
            } else {
                // The message cut to --max-string-bytes (4096).
                assert!(e.len() < 4096 + 100, "{who} through the proxy: {}", e.len());
            }
        }
        assert_eq!(via[1], direct[1], "{who}: the next call is untouched");
    }
}

#[test]
fn a_server_request_with_the_id_of_a_pending_call_leaves_the_call_budgeted() {
    // Ids are per direction: the server's own request may carry the id of a call the
    // client is waiting on. It must not stand in for the call's answer, or the real
    // answer arrives with nothing pending and passes unbudgeted.
    let mut s = Raw::spawn(
        &proxied(&["--max-text-bytes", "2000"], &pyserver_cmd()),
        &[],
    );
    s.initialize_with(json!({"sampling": {}}));
    let ask = |s: &mut Raw, id: Value| {
        s.send(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":"ask_client","arguments":{"prompt":"hi","pad":100_000}}}));
        let req = s.until_method("sampling/createMessage", 30);
        s.send(
            &json!({"jsonrpc":"2.0","id":req["id"],"result":{"role":"assistant",
            "model":"m","content":{"type":"text","text":"ok"}}}),
        );
        let (r, _) = s.until_id(&id, 30);
        (req["id"].clone(), r)
    };
    // The server numbers its requests in turn: learn its next id from the first.
    let (first, r) = ask(&mut s, json!("first"));
    assert_eq!(
        record(&r["result"]).expect("record")["truncated"],
        true,
        "{r}"
    );
    let next = first.as_i64().expect("a numeric request id") + 1;
    let (second, r) = ask(&mut s, json!(next));
    assert_eq!(second, json!(next), "the clash this test is about happened");
    let t = text(&r["result"], 0);
    assert!(
        t.len() <= 2000,
        "the call's answer passed unbudgeted: {} bytes",
        t.len()
    );
    assert_eq!(
        record(&r["result"]).expect("record")["truncated"],
        true,
        "{r}"
    );
    let _ = s.wait(20);
}

#[test]
fn modern_protocol_and_typed_rules_with_the_python_server() {
    // The Python SDK client and server speak 2026-07-28 (server/discover, resultType).
    let out = py_client(&json!({"command": proxied(&[], &pyserver_cmd()),
    "calls":[
        {"name":"big_text","arguments":{"n_bytes": 200000}},
        {"name":"rows","arguments":{"n": 3}},
        {"name":"rows","arguments":{"n": 5000}},
        {"name":"mutate_rows","arguments":{"n": 5000}}
    ]}));
    assert!(out.iter().all(|o| o["ok"] == true), "{out:?}");
    let cut = &out[0]["result"];
    assert_eq!(cut["resultType"], "complete");
    assert_eq!(record(cut).unwrap()["budget_kind"], "text_block_bytes");
    let small = &out[1]["result"];
    assert_eq!(
        small["structuredContent"]["result"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert!(record(small).is_none());
    let ro = &out[2]["result"];
    assert_eq!(ro["isError"], true);
    assert!(text(ro, 0).starts_with("result_budget_exceeded: the complete result of tool rows is "));
    assert!(ro["_meta"].get("resultbudget/receipt").is_none());
    let mu = &out[3]["result"];
    assert_eq!(mu["isError"], true);
    let t = text(mu, 0);
    assert!(t.contains("do not repeat it"), "{t}");
    let receipt = &mu["_meta"]["resultbudget/receipt"];
    assert_eq!(receipt["tool"], "mutate_rows");
    assert!(receipt["result_bytes"].as_u64().unwrap() > 65536);
    assert!(receipt["digest"].as_str().unwrap().starts_with("fnv1a64:"));
    assert!(!receipt["request_id"].is_null());
}

#[test]
fn a_tool_added_later_is_learned_after_list_changed() {
    // The proxy learns which tools are typed from tools/list, once; a server that adds
    // a tool says so with notifications/tools/list_changed, and the proxy asks again.
    let mut s = Raw::spawn(&proxied(&[], &pyserver_cmd()), &[]);
    s.initialize();
    // The first call makes the proxy list the tools: late_rows is not among them yet.
    let r = s.call(2, "rows", json!({"n": 5000}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    let (r, seen) = {
        s.send(&json!({"jsonrpc":"2.0","id":3,"method":"tools/call",
            "params":{"name":"add_late_tool","arguments":{}}}));
        s.until_id(&json!(3), 60)
    };
    assert_eq!(text(&r["result"], 0), "added late_rows", "{r}");
    assert!(
        seen.iter()
            .any(|v| v["method"] == "notifications/tools/list_changed"),
        "the notification reaches the client: {seen:?}"
    );
    // Typed and over the budget, it fails whole. Taken for an untyped tool (the list
    // not asked again), its structuredContent would have been cut instead.
    let r = s.call(4, "late_rows", json!({"n": 10000}));
    let res = &r["result"];
    assert_eq!(res["isError"], true, "{r}");
    let t = text(res, 0);
    assert!(
        t.starts_with("result_budget_exceeded: the complete result of tool late_rows is "),
        "{t}"
    );
    assert!(res.get("structuredContent").is_none(), "{r}");
    let (code, err) = s.wait(20);
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn the_proxy_reads_every_page_of_tools_list() {
    // The test server answers tools/list three tools at a time (RB_TOOLS_PAGE),
    // in name order; `mutate_rows` is on its third page of five and `rows` on
    // its fourth. Read from the first page only, they would pass for untyped
    // tools and be cut.
    let log = tmpdir("paged").join("server.log");
    let log_s = log.to_string_lossy().into_owned();
    let mut s = Raw::spawn(
        &proxied(&[], &pyserver_cmd()),
        &[("RB_SERVER_LOG", &log_s), ("RB_TOOLS_PAGE", "3")],
    );
    s.initialize();
    let r = s.call(2, "rows", json!({"n": 5000}));
    let res = &r["result"];
    assert_eq!(res["isError"], true, "{r}");
    assert!(
        text(res, 0).starts_with("result_budget_exceeded: the complete result of tool rows is "),
        "{r}"
    );
    assert!(res.get("structuredContent").is_none(), "{r}");
    let r = s.call(3, "mutate_rows", json!({"n": 5000}));
    assert_eq!(
        r["result"]["_meta"]["resultbudget/receipt"]["tool"], "mutate_rows",
        "{r}"
    );
    let (code, err) = s.wait(20);
    assert_eq!(code, Some(0), "{err}");
    let seen = std::fs::read_to_string(&log).expect("server log");
    let pages: Vec<&str> = seen
        .lines()
        .filter(|l| l.starts_with("tools/list from "))
        .collect();
    assert_eq!(
        pages,
        [
            "tools/list from 0",
            "tools/list from 3",
            "tools/list from 6",
            "tools/list from 9",
            "tools/list from 12"
        ]
    );
}

#[cfg(target_os = "linux")]
#[test]
fn the_proxy_widens_the_pipe_it_reads_the_server_from() {
    let pipe_bytes = |cmd: &[String]| -> usize {
        let mut s = Raw::spawn(cmd, &[]);
        s.initialize();
        let r = s.call(2, "stdout_pipe_bytes", json!({}));
        let n = text(&r["result"], 0);
        let (code, err) = s.wait(20);
        assert_eq!(code, Some(0), "{err}");
        n.parse().unwrap_or_else(|_| panic!("not a size: {r}"))
    };
    let direct = pipe_bytes(&pyserver_cmd());
    let proxied = pipe_bytes(&proxied(&[], &pyserver_cmd()));
    assert_eq!(proxied, resultbudget::framing::PIPE_BYTES);
    assert!(
        direct < proxied,
        "a pipe of the system's size ({direct} bytes) is smaller"
    );
}

#[test]
fn client_eof_stops_the_server() {
    let mut s = Raw::spawn(&proxied(&[], &everything_cmd()), &[]);
    s.initialize();
    let r = s.call(2, "echo", json!({"message": "bye"}));
    assert_eq!(r["result"]["content"][0]["text"], "Echo: bye");
    let (code, err) = s.wait(20);
    assert_eq!(code, Some(0), "a clean client EOF is a clean exit: {err}");
}

#[test]
fn logs_go_to_stderr_and_name_each_cut() {
    let mut s = Raw::spawn(&proxied(&["--log-level", "info"], &everything_cmd()), &[]);
    s.initialize();
    let r = s.call(3, "echo", json!({"message": "w".repeat(100_000)}));
    assert!(record(&r["result"]).is_some());
    let (code, err) = s.wait(20);
    assert_eq!(code, Some(0));
    assert!(
        err.lines().any(|l| l.contains("cut echo:")
            && l.contains("bytes in ->")
            && l.contains("budget_kind text_block_bytes")),
        "{err}"
    );
}

fn text_of(v: &Value) -> String {
    v["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn guard_refuses_bad_calls_before_the_server_sees_them() {
    let dir = tmpdir("guard");
    let log = dir.join("server.log");
    let log_s = log.to_string_lossy().into_owned();
    let flags = [
        "--max-arg-bytes",
        "4000",
        "--max-arg-items",
        "5",
        "--max-arg-string-bytes",
        "2000",
        "--max-arg-string-chars",
        "900",
        "--max-arg-keys",
        "6",
        "--max-arg-depth",
        "4",
        "--max-request-bytes",
        "6000",
    ];
    let mut s = Raw::spawn(
        &proxied(&flags, &pyserver_cmd()),
        &[("RB_SERVER_LOG", &log_s)],
    );
    s.initialize();
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            json!({"payload": "a".repeat(2500)}),
            "max_arg_string_bytes",
            "/arguments/payload",
        ),
        // Multibyte: 700 characters of 3 bytes break the byte cap, not the character cap;
        // 950 characters of 2 bytes break the character cap, not the byte cap.
        (
            json!({"payload": "\u{20ac}".repeat(700)}),
            "max_arg_string_bytes",
            "/arguments/payload",
        ),
        (
            json!({"payload": "\u{e9}".repeat(950)}),
            "max_arg_string_chars",
            "/arguments/payload",
        ),
        (
            json!({"payload": "ok", "items": ["a","b","c","d","e","f"]}),
            "max_arg_items",
            "/arguments/items",
        ),
        (
            json!({"payload": "ok", "a":1,"b":2,"c":3,"d":4,"e":5,"f":6}),
            "max_arg_keys",
            "/arguments",
        ),
        (
            json!({"payload": "ok", "items": [[[[["deep"]]]]]}),
            "max_arg_depth",
            "/arguments/items/0/0/0/0",
        ),
        (
            json!({"payload": "x", "items": ["a".repeat(1500), "b".repeat(1500), "c".repeat(1500)]}),
            "max_arg_bytes",
            "/arguments",
        ),
    ];
    for (i, (args, cap, ptr)) in cases.iter().enumerate() {
        let r = s.call(100 + i as i64, "store", args.clone());
        assert_eq!(r["result"]["isError"], true, "case {i}: {r}");
        let refusal = &r["result"]["_meta"]["resultbudget/refusal"];
        assert_eq!(refusal["cap"], *cap, "case {i}: {r}");
        assert_eq!(refusal["pointer"], *ptr, "case {i}: {r}");
        assert!(refusal["size"].as_u64().unwrap() > refusal["limit"].as_u64().unwrap());
        assert!(text_of(&r).contains("Nothing was sent"), "{r}");
    }
    // The request line as a whole (a huge _meta is not an argument but counts here).
    s.send(&json!({"jsonrpc":"2.0","id":200,"method":"tools/call","params":{"name":"store","arguments":{"payload":"ok"},"_meta":{"pad":"p".repeat(7000)}}}));
    let (r, _) = s.until_id(&json!(200), 30);
    assert_eq!(
        r["result"]["_meta"]["resultbudget/refusal"]["cap"], "max_request_bytes",
        "{r}"
    );
    // List versus search, and limits.
    for (i, arg) in ["q", "query", "search"].iter().enumerate() {
        let r = s.call(
            300 + 10 * i as i64,
            "list_things",
            json!({ *arg: "needle" }),
        );
        let refusal = &r["result"]["_meta"]["resultbudget/refusal"];
        assert_eq!(refusal["reason"], "query_on_list_tool", "{r}");
        assert_eq!(refusal["argument"], *arg);
        assert_eq!(refusal["search_tool"], "search_things");
        assert!(text_of(&r).contains("call search_things"), "{r}");
    }
    let r = s.call(301, "search_things", json!({"query": ""}));
    assert_eq!(
        r["result"]["_meta"]["resultbudget/refusal"]["reason"],
        "search_without_query"
    );
    // A blank query is no query either: whitespace, escaped or not.
    for (i, q) in [" ", " \t\n", "\u{3000}\u{a0}"].iter().enumerate() {
        let r = s.call(305 + i as i64, "search_things", json!({ "query": *q }));
        assert_eq!(
            r["result"]["_meta"]["resultbudget/refusal"]["reason"], "search_without_query",
            "{q:?}: {r}"
        );
    }
    let r = s.call(302, "search_things", json!({}));
    assert_eq!(
        r["result"]["_meta"]["resultbudget/refusal"]["reason"],
        "search_without_query"
    );
    let r = s.call(303, "list_things", json!({"limit": 500}));
    let refusal = &r["result"]["_meta"]["resultbudget/refusal"];
    assert_eq!(refusal["reason"], "limit_above_max");
    assert_eq!(refusal["max"], 100);
    // Valid calls pass unchanged.
    let r = s.call(
        400,
        "store",
        json!({"payload": "\u{20ac}".repeat(300), "items": ["a"]}),
    );
    assert_eq!(text_of(&r), "stored", "{r}");
    let r = s.call(401, "list_things", json!({"limit": 100}));
    assert_eq!(text_of(&r), "100 things");
    let r = s.call(402, "search_things", json!({"query": "needle", "limit": 5}));
    assert_eq!(text_of(&r), "things matching needle");
    // Whitespace around a query is the query's own business.
    let r = s.call(403, "search_things", json!({"query": " needle\t"}));
    assert_eq!(text_of(&r), "things matching  needle\t");
    let _ = s.wait(20);
    // The server's own log: only the valid calls reached it.
    let seen = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = seen.lines().collect();
    assert_eq!(
        lines,
        [
            "store 300",
            "list_things limit=100",
            "search_things query='needle' limit=5",
            "search_things query=' needle\\t' limit=20"
        ],
        "{seen}"
    );
}

#[test]
fn valid_calls_reach_the_server_byte_for_byte() {
    // The server's stdin is teed to a file: what the proxy forwards is compared byte for byte.
    let dir = tmpdir("tee");
    let wire = dir.join("wire.log");
    let server = vec![
        "sh".to_string(),
        "-c".to_string(),
        format!(
            "tee {} | {} {}",
            wire.display(),
            python(),
            peers_dir().join("pyserver.py").display()
        ),
    ];
    let mut s = Raw::spawn(&proxied(&[], &server), &[]);
    s.initialize();
    // Odd but valid spacing and escapes: the proxy must not normalise a request.
    let line = "{ \"jsonrpc\" : \"2.0\", \"id\" : 9, \"method\":\"tools/call\", \"params\":{\"name\":\"store\",\"arguments\":{\"payload\":\"caf\\u00e9 \\\"q\\\" \u{1F600}\",\"items\":[ \"a\" ]}}}\n";
    s.send_raw(line.as_bytes());
    let (r, _) = s.until_id(&json!(9), 30);
    assert_eq!(r["result"]["content"][0]["text"], "stored", "{r}");
    let _ = s.wait(20);
    let sent = std::fs::read_to_string(&wire).unwrap();
    assert!(
        sent.contains(line),
        "the call was changed on its way: {sent}"
    );
}

#[test]
fn a_task_result_gets_the_treatment_of_its_tool() {
    // server-everything runs simulate-research-query as a task (SEP-1686): the
    // tools/call answer names the task, the result comes from tasks/result. Made
    // typed and read-only by the inventory, that result must be whole or an error,
    // exactly as if it had come from tools/call.
    let dir = tmpdir("tasks");
    let inv = dir.join("inv.json");
    std::fs::write(
        &inv,
        serde_json::to_vec(&json!({"tools":[{
            "tool":"simulate-research-query","surface":"research demo","classification":"single",
            "read_only":true,"limit":null,"cursor":null,"per_item_budget_bytes":null,
            "result_budget":{"max_result_bytes":1024},"backend_query_bound":"one query",
            "structured_content_policy":"typed_whole_or_error"}]}))
        .unwrap(),
    )
    .unwrap();
    let inv_s = inv.to_string_lossy().into_owned();
    // `escaped`: the client writes the task id with every character escaped
    // (`\u0061` for `a`), which the server reads as the same id.
    let run = |flags: &[&str], escaped: bool| -> Value {
        let mut s = Raw::spawn(&proxied(flags, &everything_cmd()), &[]);
        s.initialize();
        s.send(
            &json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{
            "name":"simulate-research-query","arguments":{"topic":"rust"},"task":{"ttl":60000}}}),
        );
        let (created, _) = s.until_id(&json!(2), 30);
        let task_id = created["result"]["task"]["taskId"].clone();
        assert!(task_id.is_string(), "a task was created: {created}");
        let written = if escaped {
            let units: String = task_id
                .as_str()
                .unwrap()
                .encode_utf16()
                .map(|u| format!("\\u{u:04x}"))
                .collect();
            format!("\"{units}\"")
        } else {
            task_id.to_string()
        };
        s.send_raw(
            format!(
                "{}\n",
                r#"{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":TASK}}"#
                    .replace("TASK", &written)
            )
            .as_bytes(),
        );
        let (r, _) = s.until_id(&json!(3), 60);
        let _ = s.wait(10);
        r
    };
    for escaped in [false, true] {
        let typed = run(&["--inventory", &inv_s], escaped);
        assert_eq!(typed["result"]["isError"], true, "{escaped}: {typed}");
        let t = typed["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            t.starts_with(
                "result_budget_exceeded: the complete result of tool simulate-research-query is "
            ),
            "{escaped}: {t}"
        );
    }
    // The same call with only the ceiling: untyped, so the report is cut, not refused.
    let cut = run(&["--max-result-bytes", "1024"], false);
    assert!(cut["result"].get("isError").is_none(), "{cut}");
    let t = cut["result"]["content"][0]["text"].as_str().unwrap();
    assert!(t.starts_with("# Research Report: rust"), "{t}");
    assert!(t.ends_with(" bytes omitted]"), "{t}");
}

/// With the budgets off, a 20 MB result is longer than the proxy's 8 MiB hold:
/// it streams on, and reaches the client whole and unchanged.
#[test]
fn a_20mb_result_streams_through_whole_with_budgets_off() {
    let flags = [
        "--max-result-bytes",
        "none",
        "--max-text-bytes",
        "none",
        "--max-text-block-bytes",
        "none",
    ];
    let mut s = Raw::spawn(&proxied(&flags, &pyserver_cmd()), &[]);
    s.initialize();
    let n = 20_000_000usize;
    let v = s.call(7, "big_text", json!({"n_bytes": n}));
    let got = text(&v["result"], 0);
    assert_eq!(got.len(), n, "the whole text arrives");
    let unit = "lorem ipsum dolor sit amet ";
    assert!(
        got.as_bytes()
            .chunks(unit.len())
            .all(|c| unit.as_bytes().starts_with(c)),
        "the text arrives unchanged"
    );
    assert_eq!(record(&v["result"]), None, "nothing was cut");
    s.close_stdin();
    let (code, err) = s.wait(20);
    assert_eq!(code, Some(0), "{err}");
}
