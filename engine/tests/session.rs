//! A whole MCP session in the library: `proxy::Session` (the proxy's relays
//! over streams the caller owns) and its fed form, `Calls` and
//! `AnswerRelay`, driven from one thread and from a tokio task. Mostly in
//! front of real servers the tests start themselves: the reference
//! `server-everything`, which writes the `id` of each answer last, and the
//! Python test server, listing its tools in pages.
mod peers_support;

use peers_support::*;
use resultbudget::gate::Fate;
use resultbudget::guard::{ArgCaps, Guard};
use resultbudget::mcp::McpLimits;
use resultbudget::proxy::{
    relay_session, AnswerRelay, Calls, LogLevel, ProxyConfig, ServerEnd, Session, SessionOutput,
    ToolFacts,
};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Each non-empty line of `b`, parsed (panics on one that is not JSON).
fn json_lines(b: &[u8]) -> Vec<Value> {
    b.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}

/// A server started as a gateway starts it: its stdin and stdout are the
/// caller's, its stderr is dropped.
fn spawn_server(cmd: &[String], env: &[(&str, &str)]) -> (Child, ChildStdin, ChildStdout) {
    let mut child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .envs(env.iter().copied())
        .current_dir(peers_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let server_in = child.stdin.take().expect("stdin");
    let server_out = child.stdout.take().expect("stdout");
    (child, server_in, server_out)
}

/// A session between the test (as the client, writing raw lines) and a
/// server-everything child the test spawned.
struct Gateway {
    child: Child,
    to_session: Option<std::io::PipeWriter>,
    answers: mpsc::Receiver<Value>,
    /// Answers read while waiting for another.
    early: Vec<Value>,
    client_side: Option<JoinHandle<()>>,
    server_side: Option<JoinHandle<ServerEnd>>,
    logs: Arc<Mutex<Vec<(LogLevel, String)>>>,
}

impl Gateway {
    fn start(cfg: ProxyConfig, tools: &[(&str, ToolFacts)]) -> Gateway {
        let (child, server_in, server_out) = spawn_server(&everything_cmd(), &[]);
        let (from_client, to_session) = std::io::pipe().expect("pipe");
        let (from_session, to_client) = std::io::pipe().expect("pipe");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let session = Session::new(cfg, to_client);
        let sink = Arc::clone(&logs);
        session.set_log(move |level, msg| sink.lock().unwrap().push((level, msg.to_owned())));
        session.set_known_tools(tools.iter().copied());
        let session = Arc::new(session);
        let s = Arc::clone(&session);
        let client_side = std::thread::spawn(move || s.relay_client(from_client, server_in));
        let server_side = std::thread::spawn(move || session.relay_server(server_out));
        let (tx, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(from_session).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("the session wrote a line that is not JSON ({e}): {line}")
                });
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        Gateway {
            child,
            to_session: Some(to_session),
            answers,
            early: Vec::new(),
            client_side: Some(client_side),
            server_side: Some(server_side),
            logs,
        }
    }

    fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).unwrap();
        line.push(b'\n');
        let w = self.to_session.as_mut().expect("client side open");
        w.write_all(&line).unwrap();
        w.flush().unwrap();
    }

    /// The handshake; `initialized` sends the client's
    /// `notifications/initialized`, on which server-everything registers more
    /// tools and says its list changed.
    fn initialize(&mut self, initialized: bool) {
        self.send(&json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"session-test","version":"0"}}}));
        let init = self.answer(&json!("init"));
        assert!(init.get("result").is_some(), "{init}");
        if initialized {
            self.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        }
    }

    fn call(&mut self, id: i64, name: &str, args: Value) {
        self.send(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":args}}));
    }

    /// The answer with this id, in whatever order the answers came (the
    /// server's own requests and notifications are passed over).
    fn answer(&mut self, id: &Value) -> Value {
        let is_it = |v: &Value| v.get("id") == Some(id) && v.get("method").is_none();
        if let Some(i) = self.early.iter().position(is_it) {
            return self.early.swap_remove(i);
        }
        loop {
            let v = self
                .answers
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no answer with id {id}"));
            if is_it(&v) {
                return v;
            }
            if v.get("method").is_none() {
                self.early.push(v);
            }
        }
    }

    /// The client's input ends: the session closes the server's stdin, the
    /// server exits, and both relays return.
    fn close(mut self) -> ServerEnd {
        drop(self.to_session.take());
        self.client_side.take().unwrap().join().unwrap();
        let end = self.server_side.take().unwrap().join().unwrap();
        let _ = self.child.wait();
        end
    }

    fn logged(&self, level: LogLevel, part: &str) -> bool {
        self.logs
            .lock()
            .unwrap()
            .iter()
            .any(|(l, m)| *l == level && m.contains(part))
    }
}

fn info_config() -> ProxyConfig {
    ProxyConfig {
        log_level: LogLevel::Info,
        ..ProxyConfig::default()
    }
}

#[test]
fn a_session_matches_each_answer_to_its_call_with_the_id_written_last() {
    // Typed and untyped calls in flight at once: each answer begins before
    // its id, so the session reads ahead for it. The session learns which
    // tools are typed with its own `tools/list`, sent before the first call.
    let mut gw = Gateway::start(info_config(), &[]);
    gw.initialize(true);
    let big = "z".repeat(200_000);
    gw.call(1, "echo", json!({ "message": big }));
    gw.call(2, "get-structured-content", json!({"location":"Chicago"}));
    gw.call(3, "echo", json!({"message":"small"}));
    gw.call(4, "echo", json!({ "message": big }));

    for id in [1, 4] {
        let r = &gw.answer(&json!(id))["result"];
        let t = text(r, 0);
        assert!(
            t.starts_with("Echo: zzz") && t.ends_with(" bytes omitted]"),
            "{id}"
        );
        assert!(t.len() <= 16 * 1024, "{id}: {}", t.len());
        let rec = record(r).expect("a cut answer carries its record");
        assert_eq!(rec["budget_kind"], "text_block_bytes");
        assert_eq!(rec["omitted_paths"], json!(["/content/0/text"]));
    }
    let typed = &gw.answer(&json!(2))["result"];
    assert!(typed["structuredContent"].is_object(), "{typed}");
    assert!(record(typed).is_none(), "{typed}");
    let small = &gw.answer(&json!(3))["result"];
    assert_eq!(text(small, 0), "Echo: small");
    assert!(record(small).is_none());

    assert!(gw.logged(LogLevel::Info, "cut echo"));
    let end = gw.close();
    assert_eq!(
        end,
        ServerEnd {
            broken_line: false,
            orphaned: 0
        }
    );
}

#[test]
fn a_session_refuses_an_oversized_argument_and_uses_the_tools_it_was_told() {
    let caps = ArgCaps {
        max_arg_string_bytes: 10_000,
        ..ArgCaps::DEFAULT
    };
    let cfg = ProxyConfig {
        guard: Guard::new(caps),
        limits: McpLimits {
            max_result_bytes: 2048,
            ..McpLimits::DEFAULT
        },
        ..info_config()
    };
    // The gateway says `echo` is typed (server-everything lists it with no
    // `outputSchema`): told its tools, the session sends no `tools/list` of
    // its own, so nothing it learns overrides that, and an echo over the
    // result budget fails whole instead of being cut.
    let facts = ToolFacts {
        typed: true,
        read_only: true,
    };
    let mut gw = Gateway::start(cfg, &[("echo", facts)]);
    // Without `notifications/initialized`: server-everything would answer it
    // with `tools/list_changed`, and a session that hears the list changed
    // lists the tools again, as it should, and learns `echo` is not typed.
    gw.initialize(false);
    gw.call(7, "echo", json!({"message": "a".repeat(20_000)}));
    gw.call(8, "echo", json!({"message": "after"}));
    gw.call(9, "echo", json!({"message": "b".repeat(5_000)}));
    // Refused as a tool error the model can act on, with its record.
    let refused = &gw.answer(&json!(7))["result"];
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        text(refused, 0).starts_with("resultbudget refused this call before it reached the server")
    );
    assert_eq!(
        refused["_meta"]["resultbudget/refusal"],
        json!({"reason":"argument_cap","cap":"max_arg_string_bytes","pointer":"/arguments/message","limit":10000,"size":20000})
    );
    assert!(gw.logged(LogLevel::Info, "refused tools/call echo"));
    // The calls after it went on and were answered by the server.
    assert_eq!(text(&gw.answer(&json!(8))["result"], 0), "Echo: after");
    let over = &gw.answer(&json!(9))["result"];
    assert_eq!(over["isError"], true, "{over}");
    assert!(
        text(over, 0).starts_with("result_budget_exceeded: the complete result of tool echo is "),
        "{over}"
    );
    assert_eq!(gw.close(), ServerEnd::default());
}

#[test]
fn a_server_gone_mid_call_leaves_no_call_unanswered() {
    let mut gw = Gateway::start(ProxyConfig::default(), &[]);
    gw.initialize(true);
    gw.call(
        9,
        "trigger-long-running-operation",
        json!({"duration": 30, "steps": 3}),
    );
    // Once a call sent after it is answered, the long one is in flight
    // (the client's lines are relayed in order); the server dies before it
    // answers.
    gw.call(10, "echo", json!({"message": "ping"}));
    assert_eq!(text(&gw.answer(&json!(10))["result"], 0), "Echo: ping");
    gw.child.kill().unwrap();
    let err = gw.answer(&json!(9));
    assert_eq!(err["error"]["code"], -32603, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exited before answering"),
        "{err}"
    );
    let end = gw.close();
    assert_eq!(end.orphaned, 1);
    assert!(!end.broken_line);
}

/// A tokio runtime on this thread, its I/O and timers on.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The tokio pattern `docs/library.md` gives: the client's connection is an
/// async stream (here an in-memory duplex), bridged for the session's
/// blocking relays, each on a blocking thread of the runtime.
#[test]
fn a_tokio_gateway_runs_the_relays_on_blocking_threads() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    use tokio_util::io::SyncIoBridge;

    runtime().block_on(async {
        let (mut child, server_in, server_out) = spawn_server(&everything_cmd(), &[]);
        let (client, gateway) = tokio::io::duplex(64 * 1024);
        let (from_client, to_client) = tokio::io::split(gateway);
        let session = Arc::new(Session::new(
            ProxyConfig::default(),
            SyncIoBridge::new(to_client),
        ));
        let s = Arc::clone(&session);
        let from_client = SyncIoBridge::new(from_client);
        let client_side =
            tokio::task::spawn_blocking(move || s.relay_client(from_client, server_in));
        let s = Arc::clone(&session);
        let server_side = tokio::task::spawn_blocking(move || s.relay_server(server_out));

        let (read, mut write) = tokio::io::split(client);
        let mut lines = tokio::io::BufReader::new(read).lines();
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"tokio-test","version":"0"}}});
        let call = json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
            "params":{"name":"echo","arguments":{"message": "q".repeat(100_000)}}});
        for v in [init, call] {
            let mut line = serde_json::to_vec(&v).unwrap();
            line.push(b'\n');
            write.write_all(&line).await.unwrap();
        }
        let mut cut = None;
        while let Some(line) = lines.next_line().await.unwrap() {
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == 1 {
                cut = Some(v);
                break;
            }
        }
        let cut = cut.expect("the call's answer");
        let t = text(&cut["result"], 0);
        assert!(t.starts_with("Echo: qqq") && t.ends_with(" bytes omitted]"));
        assert!(t.len() <= 16 * 1024);
        assert_eq!(record(&cut["result"]).unwrap()["budget_kind"], "text_block_bytes");

        // The client hangs up: the relays end, and the server with them.
        drop(write);
        drop(lines);
        client_side.await.unwrap();
        let end = server_side.await.unwrap();
        assert_eq!(end, ServerEnd::default());
        let _ = child.wait();
    });
}

/// The fed form, as a gateway with its own event loop drives it: the
/// client's lines through the session's gate, noted before they go on; the
/// server's bytes into an `AnswerRelay`. Returns what the server and the
/// client read, given the server's output in these pieces.
fn fed(
    cfg: &ProxyConfig,
    tools: &[(&str, bool, bool)],
    client: &[u8],
    server: &[&[u8]],
) -> (Vec<u8>, Vec<u8>, ServerEnd) {
    let calls = Calls::new(cfg.clone());
    calls.set_known_tools(
        tools
            .iter()
            .map(|&(name, typed, read_only)| (name, ToolFacts { typed, read_only })),
    );
    let mut gate = calls.gate();
    let (mut to_server, mut to_client) = (Vec::new(), Vec::new());
    for line in client.split_inclusive(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        match gate.check(line) {
            Fate::Forward { .. } => {
                calls.note(gate.facts(), gate.tool());
                to_server.extend_from_slice(gate.to_send());
            }
            Fate::Dropped { reply, .. } => to_client.extend(reply.unwrap_or_default()),
        }
    }
    let mut answers: AnswerRelay = calls.answers().unwrap();
    for piece in server {
        answers.feed(piece, &mut to_client);
    }
    let end = answers.finish(&mut to_client);
    (to_server, to_client, end)
}

/// The fed form ([`fed`]) gives the server and the client what the threaded
/// session gave them (`threaded`), with the server's output in pieces of each
/// size in `chunks` and split in two at every byte; each run ends with no
/// broken line and `orphaned` calls left unanswered.
fn fed_reads_as_threaded(
    cfg: &ProxyConfig,
    tools: &[(&str, bool, bool)],
    client: &[u8],
    server: &[u8],
    threaded: &SessionOutput,
    orphaned: usize,
    chunks: impl IntoIterator<Item = usize>,
) {
    let same = |what: String, pieces: &[&[u8]]| {
        let (to_server, to_client, end) = fed(cfg, tools, client, pieces);
        assert_eq!(to_server, threaded.to_server, "{what}");
        assert_eq!(
            String::from_utf8_lossy(&to_client),
            String::from_utf8_lossy(&threaded.to_client),
            "{what}"
        );
        assert_eq!((end.broken_line, end.orphaned), (false, orphaned), "{what}");
    };
    for chunk in chunks {
        same(
            format!("chunks of {chunk}"),
            &server.chunks(chunk).collect::<Vec<_>>(),
        );
    }
    for at in 0..=server.len() {
        same(format!("split at {at}"), &[&server[..at], &server[at..]]);
    }
}

/// A session's traffic with everything the server side decides: calls of a
/// typed and an untyped tool in flight at once, answers with the id last and
/// first, one over budget, a broken one, one with its id twice, a notification,
/// a `tools/list` that teaches a tool, a cancelled call answered late, and a
/// call never answered.
fn traffic() -> (String, String) {
    let call = |id: u32, tool: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#
        )
    };
    let text = |n: usize| {
        format!(
            r#"{{"content":[{{"type":"text","text":"{}"}}]}}"#,
            "w".repeat(n)
        )
    };
    let client = [
        call(1, "plain"),
        call(2, "typed"),
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#.to_string(),
        call(4, "plain"),
        call(5, "plain"),
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}"#.to_string(),
        call(6, "late"),
        call(7, "plain"),
        call(8, "plain"),
        format!(r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"plain","arguments":{{"a":"{}"}}}}}}"#, "v".repeat(3000)),
    ]
    .join("\n")
        + "\n";
    let server = [
        format!(r#"{{"result":{},"jsonrpc":"2.0","id":1}}"#, text(5000)),
        r#"{"result":{"content":[],"structuredContent":{"n":1}},"jsonrpc":"2.0","id":2}"#.to_string(),
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}"#.to_string(),
        r#"{"result":{"tools":[{"name":"late","outputSchema":{"type":"object"}}]},"jsonrpc":"2.0","id":3}"#.to_string(),
        format!(r#"{{"jsonrpc":"2.0","id":4,"result":{}}}"#, text(10)),
        format!(r#"{{"result":{},"jsonrpc":"2.0","id":5}}"#, text(3000)),
        format!(r#"{{"result":{{"content":[],"structuredContent":{{"s":"{}"}}}},"jsonrpc":"2.0","id":6}}"#, "u".repeat(3000)),
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]},"id":8}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":8,"result":{"content":[tru"#.to_string(),
    ]
    .join("\n")
        + "\n";
    (client, server)
}

fn small_config() -> ProxyConfig {
    let mut cfg = ProxyConfig {
        log_level: LogLevel::Error,
        lookahead: 2048,
        guard: Guard::new(ArgCaps {
            max_arg_string_bytes: 1000,
            ..ArgCaps::DEFAULT
        }),
        ..ProxyConfig::default()
    };
    cfg.limits.max_result_bytes = 1024;
    cfg.limits.max_text_block_bytes = 512;
    cfg
}

#[test]
fn the_fed_form_decides_as_the_session_does_however_the_bytes_come() {
    let (client, server) = traffic();
    let cfg = small_config();
    let tools = [("plain", false, true), ("typed", true, true)];
    let threaded = relay_session(cfg.clone(), &tools, client.as_bytes(), server.as_bytes());
    // What the session did, checked, so agreeing with it means something.
    let lines = json_lines(&threaded.to_client);
    let by_id = |id: i64| -> Vec<&Value> { lines.iter().filter(|v| v["id"] == id).collect() };
    assert_eq!(
        by_id(9)[0]["result"]["_meta"]["resultbudget/refusal"]["cap"],
        "max_arg_string_bytes"
    );
    assert_eq!(record(&by_id(1)[0]["result"]).unwrap()["truncated"], true);
    assert!(by_id(2)[0]["result"]["structuredContent"].is_object());
    assert_eq!(text(&by_id(4)[0]["result"], 0), "w".repeat(10));
    assert!(
        record(&by_id(5)[0]["result"]).is_some(),
        "a cancelled call's late answer is still budgeted"
    );
    // `late` was learned typed from the client's tools/list: over budget, it fails whole.
    assert_eq!(by_id(6)[0]["result"]["isError"], true);
    assert!(text(&by_id(6)[0]["result"], 0).starts_with("result_budget_exceeded"));
    // The answer with two ids is dropped and the call its last id names
    // gets an error; the broken answer after it then answers nothing. Call
    // 7 is left unanswered: when the output ends, it gets its error.
    assert_eq!(by_id(8).len(), 1);
    assert_eq!(by_id(8)[0]["error"]["code"], -32603);
    assert!(by_id(8)[0]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("malformed"));
    assert_eq!(by_id(7).len(), 1);
    assert!(by_id(7)[0]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("exited before answering"));
    assert_eq!((threaded.broken_line, threaded.orphaned), (false, 1));
    assert_eq!(
        lines
            .iter()
            .filter(|v| v["method"] == "notifications/message")
            .count(),
        1
    );
    // Every line but the refused call went on.
    assert_eq!(
        threaded.to_server.iter().filter(|&&b| b == b'\n').count(),
        9
    );

    fed_reads_as_threaded(
        &cfg,
        &tools,
        client.as_bytes(),
        server.as_bytes(),
        &threaded,
        1,
        (1..=64).chain([1000, 4096]),
    );
}

/// A `CreateTaskResult` that gives `taskId` twice: the task named by the
/// last one, the one a client reads, is the typed tool's, at every split of
/// the server's output; the first names no task of any tool.
#[test]
fn a_task_named_twice_is_known_by_its_last_id_however_the_bytes_come() {
    let client = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"typed","arguments":{},"task":{"ttl":60000}}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"second"}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"first"}}"#,
    ]
    .join("\n")
        + "\n";
    let result = |id: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[],"structuredContent":{{"s":"{}"}}}}}}"#,
            "u".repeat(3000)
        )
    };
    let server = [
        r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"first","status":"working","taskId":"second","createdAt":"2026-12-07T00:00:00Z"}}}"#.to_string(),
        result(2),
        result(3),
    ]
    .join("\n")
        + "\n";
    let cfg = small_config();
    let tools = [("typed", true, true)];
    let threaded = relay_session(cfg.clone(), &tools, client.as_bytes(), server.as_bytes());
    let lines = json_lines(&threaded.to_client);
    let by_id = |id: i64| -> &Value {
        let got: Vec<&Value> = lines.iter().filter(|v| v["id"] == id).collect();
        assert_eq!(got.len(), 1, "one answer to call {id}: {lines:?}");
        got[0]
    };
    // The created task goes on unchanged: it is under every budget.
    assert_eq!(
        by_id(1),
        &serde_json::from_str::<Value>(server.lines().next().unwrap()).unwrap()
    );
    // The task the client reads is the typed tool's: over budget, it fails whole.
    assert_eq!(by_id(2)["result"]["isError"], true, "{}", by_id(2));
    assert!(text(&by_id(2)["result"], 0).starts_with("result_budget_exceeded"));
    // The first id names no task: its result is cut like any untyped one.
    assert!(by_id(3)["result"].get("isError").is_none(), "{}", by_id(3));
    assert_eq!(record(&by_id(3)["result"]).unwrap()["truncated"], true);
    assert_eq!((threaded.broken_line, threaded.orphaned), (false, 0));

    fed_reads_as_threaded(
        &cfg,
        &tools,
        client.as_bytes(),
        server.as_bytes(),
        &threaded,
        0,
        1..=40,
    );
}

/// A gateway on the fed form, driven by one thread with no session threads
/// at all: each client line through the session's gate, noted, then written
/// to the server; the server's bytes read and fed as they come.
struct Fed {
    child: Child,
    server_in: Option<ChildStdin>,
    server_out: ChildStdout,
    calls: Calls,
    gate: resultbudget::gate::RequestGate,
    answers: AnswerRelay,
    to_client: Vec<u8>,
    buf: Vec<u8>,
}

impl Fed {
    fn start(cmd: &[String], env: &[(&str, &str)], cfg: ProxyConfig) -> Fed {
        let (child, server_in, server_out) = spawn_server(cmd, env);
        let calls = Calls::new(cfg);
        Fed {
            child,
            server_in: Some(server_in),
            server_out,
            gate: calls.gate(),
            answers: calls.answers().unwrap(),
            calls,
            to_client: Vec::new(),
            buf: vec![0u8; 64 * 1024],
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        let w = self.server_in.as_mut().expect("the server's stdin is open");
        w.write_all(bytes).unwrap();
        w.flush().unwrap();
    }

    /// One read of the server's output, fed; false at its end.
    fn read(&mut self) -> bool {
        let n = self.server_out.read(&mut self.buf).unwrap();
        self.answers.feed(&self.buf[..n], &mut self.to_client);
        n > 0
    }

    /// A client line, as a gateway sends it; a `tools/call` waits for the
    /// session's own listing of the tools first, if `list` (returns how many
    /// pages it asked for).
    fn send(&mut self, v: &Value, list: bool) -> usize {
        let line = serde_json::to_vec(v).unwrap();
        let fate = self.gate.check(&line);
        assert!(matches!(fate, Fate::Forward { .. }), "{fate:?}");
        let mut pages = 0;
        if list && self.gate.facts().is_call() {
            let version = self.gate.facts().version.clone();
            while !self.calls.tools_known() {
                if let Some(req) = self.calls.tools_request(&version) {
                    self.write(&req);
                    pages += 1;
                }
                assert!(self.read(), "the server ended early");
            }
        }
        self.calls.note(self.gate.facts(), self.gate.tool());
        let out = self.gate.to_send().to_vec();
        self.write(&out);
        pages
    }

    /// What the client read, line by line.
    fn lines(&self) -> Vec<Value> {
        json_lines(&self.to_client)
    }

    /// Read until the answers with these ids are in; them, in that order.
    fn answers_to(&mut self, ids: &[i64]) -> Vec<Value> {
        loop {
            let got = self.lines();
            let found: Vec<Value> = ids
                .iter()
                .filter_map(|id| {
                    got.iter()
                        .find(|v| v["id"] == *id && v.get("method").is_none())
                })
                .cloned()
                .collect();
            if found.len() == ids.len() {
                return found;
            }
            assert!(self.read(), "the server ended early");
        }
    }

    fn initialize(&mut self) {
        self.send(
            &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fed-test","version":"0"}}}),
            false,
        );
        self.answers_to(&[0]);
        self.send(
            &json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
            false,
        );
    }

    /// The client hangs up: the server's stdin closes, its output is read to
    /// its end, and the relay finishes.
    fn close(mut self) -> ServerEnd {
        drop(self.server_in.take());
        while self.read() {}
        let end = self.answers.finish(&mut self.to_client);
        let _ = self.child.wait();
        end
    }
}

/// The fed form in front of the reference server: typed and untyped calls in
/// flight at once, each answer with its id last.
#[test]
fn the_fed_form_in_front_of_a_real_server() {
    let mut fed = Fed::start(&everything_cmd(), &[], ProxyConfig::default());
    fed.initialize();
    // The client lists the tools: the answer teaches the session which are typed.
    fed.send(
        &json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
        false,
    );
    fed.answers_to(&[1]);
    let big = "k".repeat(200_000);
    for v in [
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message": big}}}),
        json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get-structured-content","arguments":{"location":"Chicago"}}}),
        json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"message":"small"}}}),
    ] {
        fed.send(&v, false);
    }
    let got = fed.answers_to(&[2, 3, 4]);
    let cut = &got[0]["result"];
    assert!(text(cut, 0).starts_with("Echo: kkk") && text(cut, 0).len() <= 16 * 1024);
    assert_eq!(record(cut).unwrap()["budget_kind"], "text_block_bytes");
    assert!(got[1]["result"]["structuredContent"].is_object());
    assert!(record(&got[1]["result"]).is_none());
    assert_eq!(text(&got[2]["result"], 0), "Echo: small");
    assert_eq!(fed.close(), ServerEnd::default());
}

/// A client that never lists the tools: the fed gateway has the session ask
/// for them before the first call, page by page (the Python test server
/// answers two tools a page), and the typed tool's answer over budget then
/// fails whole instead of being cut. The session's own listing never
/// reaches the client.
#[test]
fn the_fed_form_lists_the_tools_itself_page_by_page() {
    let cfg = ProxyConfig {
        limits: McpLimits {
            max_result_bytes: 4096,
            ..McpLimits::DEFAULT
        },
        ..ProxyConfig::default()
    };
    let mut fed = Fed::start(&pyserver_cmd(), &[("RB_TOOLS_PAGE", "2")], cfg);
    fed.initialize();
    let pages = fed.send(
        &json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rows","arguments":{"n": 500}}}),
        true,
    );
    assert!(pages >= 5, "{pages} pages");
    let pages_again = fed.send(
        &json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big_text","arguments":{"n_bytes": 100000}}}),
        true,
    );
    assert_eq!(pages_again, 0, "the tools are known now");
    let got = fed.answers_to(&[1, 2]);
    let typed = &got[0]["result"];
    assert_eq!(typed["isError"], true, "{typed}");
    assert!(
        text(typed, 0).starts_with("result_budget_exceeded: the complete result of tool rows is ")
    );
    let untyped = &got[1]["result"];
    assert_eq!(record(untyped).unwrap()["truncated"], true);
    assert!(
        fed.lines()
            .iter()
            .all(|v| !v["id"].to_string().contains("resultbudget-tools")),
        "the session's own listing reached the client"
    );
    assert_eq!(fed.close(), ServerEnd::default());
}

/// A tokio gateway on the fed form: one task per session, no blocking
/// relays. It selects between the client's connection and the server's
/// output; client lines go through the gate and are noted before their
/// newline is written, the server's bytes through the answer relay. The
/// server is the reference one, its pipes opened as tokio files.
#[test]
fn a_tokio_gateway_on_the_fed_form() {
    use std::os::fd::OwnedFd;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, DuplexStream};

    async fn gateway(
        calls: Calls,
        conn: DuplexStream,
        server_in: tokio::fs::File,
        mut server_out: tokio::fs::File,
    ) -> ServerEnd {
        let (mut from_client, mut to_client) = tokio::io::split(conn);
        let mut server_in = Some(server_in);
        let mut gate = calls.gate();
        let mut answers = calls.answers().unwrap();
        let (mut cbuf, mut sbuf) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
        let (mut to_server, mut out) = (Vec::new(), Vec::new());
        // The gate's own answers, held while a line streams on.
        let mut replies = Vec::new();
        loop {
            tokio::select! {
                n = from_client.read(&mut cbuf), if server_in.is_some() => {
                    let n = n.unwrap();
                    if n == 0 {
                        // The client hung up: so does the server's stdin.
                        let mut w = server_in.take().unwrap();
                        w.flush().await.unwrap();
                        continue;
                    }
                    let mut rest = &cbuf[..n];
                    while !rest.is_empty() {
                        let end = rest.iter().position(|&b| b == b'\n');
                        let piece = &rest[..end.unwrap_or(rest.len())];
                        rest = &rest[end.map_or(rest.len(), |k| k + 1)..];
                        gate.feed(piece, |b| to_server.extend_from_slice(b));
                        if end.is_none() {
                            continue;
                        }
                        match gate.end_line() {
                            Fate::Forward { .. } => calls.note(gate.facts(), gate.tool()),
                            Fate::Dropped { reply, .. } => replies.extend(reply.unwrap_or_default()),
                        }
                        to_server.extend_from_slice(gate.to_send());
                    }
                    let w = server_in.as_mut().unwrap();
                    w.write_all(&to_server).await.unwrap();
                    w.flush().await.unwrap();
                    to_server.clear();
                }
                n = server_out.read(&mut sbuf) => {
                    let n = n.unwrap();
                    if n == 0 {
                        let end = answers.finish(&mut out);
                        out.append(&mut replies);
                        to_client.write_all(&out).await.unwrap();
                        to_client.shutdown().await.unwrap();
                        return end;
                    }
                    answers.feed(&sbuf[..n], &mut out);
                }
            }
            if !answers.mid_line() {
                out.append(&mut replies);
            }
            if !out.is_empty() {
                to_client.write_all(&out).await.unwrap();
                out.clear();
            }
        }
    }

    runtime().block_on(async {
        let (mut child, server_in, server_out) = spawn_server(&everything_cmd(), &[]);
        let file = |fd: OwnedFd| tokio::fs::File::from_std(std::fs::File::from(fd));
        let calls = Calls::new(ProxyConfig {
            guard: Guard::new(ArgCaps {
                max_arg_string_bytes: 300_000,
                ..ArgCaps::DEFAULT
            }),
            ..ProxyConfig::default()
        });
        let facts = ToolFacts {
            typed: false,
            read_only: true,
        };
        calls.set_known_tools([("echo", facts)]);
        let (client, conn) = tokio::io::duplex(64 << 10);
        let gw = tokio::spawn(gateway(
            calls,
            conn,
            file(server_in.into()),
            file(server_out.into()),
        ));

        let (read, mut write) = tokio::io::split(client);
        let mut lines = tokio::io::BufReader::new(read).lines();
        let big = "g".repeat(250_000);
        for v in [
            json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"tokio-fed","version":"0"}}}),
            json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message": big}}}),
            json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message": "small"}}}),
            json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message": "q".repeat(400_000)}}}),
        ] {
            let mut line = serde_json::to_vec(&v).unwrap();
            line.push(b'\n');
            write.write_all(&line).await.unwrap();
        }
        let mut got = std::collections::HashMap::new();
        while got.len() < 4 {
            let line = lines.next_line().await.unwrap().expect("an answer");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("method").is_none() {
                got.insert(v["id"].as_i64().unwrap(), v);
            }
        }
        let cut = &got[&1]["result"];
        assert!(text(cut, 0).starts_with("Echo: ggg") && text(cut, 0).len() <= 16 * 1024);
        assert_eq!(record(cut).unwrap()["budget_kind"], "text_block_bytes");
        assert_eq!(text(&got[&2]["result"], 0), "Echo: small");
        assert_eq!(
            got[&3]["result"]["_meta"]["resultbudget/refusal"]["cap"],
            "max_arg_string_bytes"
        );
        // The client hangs up (its half of the connection shut down: the
        // connection itself lives on in the half it reads with).
        write.shutdown().await.unwrap();
        let end = gw.await.unwrap();
        assert_eq!(end, ServerEnd::default());
        assert!(lines.next_line().await.unwrap().is_none(), "the gateway closed the client's end");
        let _ = child.wait();
    });
}

/// A server that says its tools changed, in the spellings real servers use
/// (Python's `json.dumps` puts a space after each colon, PHP's
/// `json_encode` escapes `/`): the session no longer counts its tools as
/// known, so it lists them again before the next call. Fed bytes, no
/// server: what is read is the notification alone. The spaced line passed
/// before `a3f94a0` too (the relay drops whitespace before it asks); the
/// escaped one did not.
#[test]
fn list_changed_in_any_spelling_makes_the_tools_unknown() {
    let lines: [&[u8]; 3] = [
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n",
        b"{\"jsonrpc\": \"2.0\", \"method\": \"notifications/tools/list_changed\"}\n",
        b"{\"method\":\"notifications\\/tools\\/list_changed\",\"jsonrpc\":\"2.0\"}\n",
    ];
    for line in lines {
        let calls = Calls::new(ProxyConfig::default());
        let facts = ToolFacts {
            typed: true,
            read_only: true,
        };
        calls.set_known_tools([("echo", facts)]);
        assert!(calls.tools_known());
        let mut relay = calls.answers().expect("an answer relay");
        let mut out = Vec::new();
        relay.feed(line, &mut out);
        let sent: Value = serde_json::from_slice(line).unwrap();
        let read: Value = serde_json::from_slice(&out).expect("the client reads JSON");
        assert_eq!(read, sent, "the notification goes on as it was");
        assert!(
            !calls.tools_known(),
            "still known after {}",
            String::from_utf8_lossy(line)
        );
    }
}

/// The client's ids and the session's own `tools/list` share the server's
/// id space. Earlier builds named the session's own request
/// `"resultbudget-tools-0"` in every session: a client request with that id,
/// sent before or after it, had its answer swallowed as the listing's, and
/// the listing's answer went to the client in its place. The id now holds a
/// number of the session's own the client cannot guess, counts on (never
/// repeats), and skips an id the client has in flight, should it guess one.
#[test]
fn a_client_id_equal_to_the_sessions_own_is_kept_apart() {
    for client_first in [true, false] {
        let calls = Calls::new(ProxyConfig::default());
        let mut gate = calls.gate();
        let mut to_server = Vec::new();
        let mut send = |line: &[u8], to_server: &mut Vec<u8>| {
            assert!(matches!(gate.check(line), Fate::Forward { .. }));
            calls.note(gate.facts(), gate.tool());
            to_server.extend_from_slice(gate.to_send());
        };
        let ping = |id: &str| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
        // The id earlier builds gave the session's own request.
        let old = r#""resultbudget-tools-0""#;
        if client_first {
            send(ping(old).as_bytes(), &mut to_server);
        }
        let ask = calls.tools_request(b"").expect("the tools are unknown");
        to_server.extend_from_slice(&ask);
        let first: Value = serde_json::from_slice(&ask).unwrap();
        let first = first["id"].as_str().unwrap().to_owned();
        // A client that guessed the next one: the session passes it by.
        let guessed = format!("\"{}1\"", first.strip_suffix('0').unwrap());
        if !client_first {
            send(ping(old).as_bytes(), &mut to_server);
        }
        send(ping(&guessed).as_bytes(), &mut to_server);
        // The server answers each request it read, by the id it read, in
        // the order it read them; its first listing has a second page.
        let mut server = Vec::new();
        let answer = |v: &Value, server: &mut Vec<u8>| {
            let a = if v["method"] == "tools/list" && v["params"]["cursor"].is_null() {
                json!({"jsonrpc":"2.0","id":v["id"],"result":{"tools":[],"nextCursor":"p2"}})
            } else if v["method"] == "tools/list" {
                json!({"jsonrpc":"2.0","id":v["id"],"result":{"tools":[{"name":"t","inputSchema":{},"outputSchema":{"type":"object"}}]}})
            } else {
                json!({"jsonrpc":"2.0","id":v["id"],"result":{"pong":true}})
            };
            server.extend_from_slice(a.to_string().as_bytes());
            server.push(b'\n');
        };
        // All but the guessed ping's answer first.
        let read = json_lines(&to_server);
        let later = serde_json::from_str::<Value>(&guessed).unwrap();
        for v in read.iter().filter(|v| v["id"] != later) {
            answer(v, &mut server);
        }
        let mut relay = calls.answers().unwrap();
        let mut to_client = Vec::new();
        relay.feed(&server, &mut to_client);
        // The second page, asked for while the guessed id is in flight: not
        // under that id.
        let ask = calls.tools_request(b"").expect("a second page");
        let second: Value = serde_json::from_slice(&ask).unwrap();
        let second = second["id"].as_str().unwrap();
        assert_eq!(second, format!("{}2", first.strip_suffix('0').unwrap()));
        server.clear();
        answer(&serde_json::from_slice(&ask).unwrap(), &mut server);
        for v in read.iter().filter(|v| v["id"] == later) {
            answer(v, &mut server);
        }
        relay.feed(&server, &mut to_client);
        let end = relay.finish(&mut to_client);
        let got = json_lines(&to_client);
        let pong = |id: &str| json!({"jsonrpc":"2.0","id":serde_json::from_str::<Value>(id).unwrap(),"result":{"pong":true}});
        assert_eq!(
            got,
            vec![pong(old), pong(&guessed)],
            "client first: {client_first}; server read:\n{}",
            String::from_utf8_lossy(&to_server)
        );
        assert!(calls.tools_known(), "client first: {client_first}");
        assert_eq!(end, ServerEnd::default());
    }
}

/// An answer to the session's own listing that finds it settled already (a
/// second answer, or one after a broken line took the listing for the only
/// request in flight) is the session's all the same: the client never sent
/// that id. Earlier builds passed it on (found by the `proxy` fuzz target's
/// fed session). And one longer than the hold, its id written first, is let
/// go as it comes rather than streamed to the client; the tools in it are
/// still learned.
#[test]
fn answers_to_the_sessions_own_listing_never_reach_the_client() {
    let answer = |id: &str, tools: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{tools}]}}}}"#) + "\n"
    };
    let typed_tool = r#"{"name":"t","inputSchema":{},"outputSchema":{"type":"object"}}"#;
    // Twice; and after a broken line that began as an answer.
    for before in ["", "{\"jsonrpc\":\"2.0\",\"result\":{\"tools\":[\n"] {
        let calls = Calls::new(ProxyConfig::default());
        calls.set_log(|_, _| {});
        let ask = calls.tools_request(b"").expect("the tools are unknown");
        let id = serde_json::from_slice::<Value>(&ask).unwrap()["id"].to_string();
        let mut server = before.to_string();
        server += &answer(&id, typed_tool);
        server += &answer(&id, typed_tool);
        let mut relay = calls.answers().unwrap();
        let mut to_client = Vec::new();
        relay.feed(server.as_bytes(), &mut to_client);
        let end = relay.finish(&mut to_client);
        assert!(
            to_client.is_empty(),
            "after {before:?}: {}",
            String::from_utf8_lossy(&to_client)
        );
        assert!(calls.tools_known());
        assert_eq!(end, ServerEnd::default());
    }
    // Longer than the hold (64 bytes here), its id first: let go, learned.
    let calls = Calls::new(ProxyConfig {
        max_hold: 64,
        ..ProxyConfig::default()
    });
    let ask = calls.tools_request(b"").expect("the tools are unknown");
    let id = serde_json::from_slice::<Value>(&ask).unwrap()["id"].to_string();
    let many = vec![typed_tool.replace("\"t\"", "\"u\""); 50].join(",");
    let long = answer(&id, &format!("{many},{typed_tool}"));
    assert!(long.len() > 64 * 20);
    let mut relay = calls.answers().unwrap();
    let mut to_client = Vec::new();
    for piece in long.as_bytes().chunks(16) {
        relay.feed(piece, &mut to_client);
    }
    assert!(
        to_client.is_empty(),
        "{}",
        String::from_utf8_lossy(&to_client)
    );
    assert!(calls.tools_known());
    // The tool it taught is typed: a call of it over budget fails whole.
    let got = call_over_budget(&calls, &mut relay, "t");
    assert_eq!(got["result"]["isError"], true, "{got}");
}

/// An answer to the session's own listing in a line that began before the
/// listing was asked for (no honest server writes one: it names a request it
/// has not read) ends the listing, reaches no client, and teaches nothing:
/// the line was not read for tools, as none was pending when it began.
#[test]
fn an_own_listing_answered_by_a_line_begun_before_it_ends_the_listing() {
    let calls = Calls::new(ProxyConfig::default());
    calls.set_log(|_, _| {});
    let mut relay = calls.answers().unwrap();
    let mut to_client = Vec::new();
    relay.feed(br#"{"jsonrpc":"2.0","result":{"tools":["#, &mut to_client);
    let ask = calls.tools_request(b"").expect("the tools are unknown");
    let id = serde_json::from_slice::<Value>(&ask).unwrap()["id"].to_string();
    assert!(!calls.tools_known());
    let typed_tool = r#"{"name":"t","inputSchema":{},"outputSchema":{"type":"object"}}"#;
    relay.feed(
        format!("{typed_tool}]}},\"id\":{id}}}\n").as_bytes(),
        &mut to_client,
    );
    assert!(
        to_client.is_empty(),
        "{}",
        String::from_utf8_lossy(&to_client)
    );
    assert!(calls.tools_known(), "the listing still waits");
    assert!(calls.tools_request(b"").is_none(), "asked again");
    // `t` was not learned as typed: a call of it over budget comes back cut.
    let got = call_over_budget(&calls, &mut relay, "t");
    assert_eq!(got["id"], 1, "{got}");
    assert_ne!(got["result"]["isError"], true, "{got}");
    assert!(
        got["result"]["_meta"]["resultbudget/truncation"].is_object(),
        "{got}"
    );
    assert_eq!(relay.finish(&mut to_client), ServerEnd::default());
}

/// A call of `tool` (id 1) through the session's gate, then its answer of
/// 100 KB of text: what the client reads of it.
fn call_over_budget(calls: &Calls, relay: &mut AnswerRelay, tool: &str) -> Value {
    let mut gate = calls.gate();
    let call = json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
        "params":{"name":tool,"arguments":{}}});
    assert!(matches!(
        gate.check(call.to_string().as_bytes()),
        Fate::Forward { .. }
    ));
    calls.note(gate.facts(), gate.tool());
    let big = json!({"jsonrpc":"2.0","id":1,"result":{
        "content":[{"type":"text","text":"x".repeat(100_000)}],"structuredContent":{}}});
    let mut to_client = Vec::new();
    relay.feed(format!("{big}\n").as_bytes(), &mut to_client);
    serde_json::from_slice(&to_client).unwrap()
}

/// What the client reads, shared with the session that writes it.
#[derive(Clone, Default)]
struct Collected(Arc<Mutex<Vec<u8>>>);

impl Write for Collected {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The server's output: the first part of a line, then, at the next read,
/// a wait until told to go on, then the rest.
struct Paused {
    parts: Vec<Vec<u8>>,
    waiting: mpsc::Sender<()>,
    go: mpsc::Receiver<()>,
}

impl Read for Paused {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.parts.is_empty() {
            return Ok(0);
        }
        if self.parts.len() == 1 {
            // The first part went out: the relay is inside the line.
            self.waiting.send(()).unwrap();
            self.go.recv().unwrap();
        }
        let part = self.parts.remove(0);
        buf[..part.len()].copy_from_slice(&part);
        Ok(part.len())
    }
}

/// A line the client's relay writes itself (the answer to a refused call)
/// while the server's relay is streaming a long line on (past the hold)
/// waits for that line's end. Earlier builds wrote it inside the line: the
/// client could read neither, and the refused call waited for ever (found
/// by the `proxy` fuzz target's fed session, whose gateway did the same).
#[test]
fn a_refusal_waits_for_the_end_of_a_line_that_streams() {
    let cfg = ProxyConfig {
        max_hold: 1024,
        guard: Guard::new(ArgCaps {
            max_arg_bytes: 16,
            ..ArgCaps::DEFAULT
        }),
        ..ProxyConfig::default()
    };
    let out = Collected::default();
    let session = Arc::new(Session::new(cfg, out.clone()));
    session.set_log(|_, _| {});
    let long = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":"{}"}}}}"#,
        "x".repeat(8000)
    ) + "\n";
    let (waiting, is_waiting) = mpsc::channel();
    let (go, wait_for_go) = mpsc::channel();
    let server = Paused {
        parts: vec![
            long.as_bytes()[..4000].to_vec(),
            long.as_bytes()[4000..].to_vec(),
        ],
        waiting,
        go: wait_for_go,
    };
    let relay = {
        let session = Arc::clone(&session);
        std::thread::spawn(move || session.relay_server(server))
    };
    is_waiting.recv().unwrap();
    let streamed = out.0.lock().unwrap().len();
    assert!(streamed > 1024, "the line streams on: {streamed} bytes out");
    let call = json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"far over sixteen bytes"}}});
    session.relay_client(format!("{call}\n").as_bytes(), std::io::sink());
    go.send(()).unwrap();
    relay.join().unwrap();
    let got = out.0.lock().unwrap().clone();
    let lines: Vec<&[u8]> = got
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    // (Short messages: the line is 8 KB.)
    let shown = |b: &[u8]| String::from_utf8_lossy(&b[b.len().saturating_sub(300)..]).into_owned();
    assert_eq!(lines.len(), 2, "…{}", shown(&got));
    assert!(
        lines[0] == long.trim_end().as_bytes(),
        "…{}",
        shown(lines[0])
    );
    let refusal: Value = serde_json::from_slice(lines[1]).unwrap();
    assert_eq!(refusal["id"], 7, "{refusal}");
    assert_eq!(refusal["result"]["isError"], true, "{refusal}");
}

/// A server whose listing never ends (each page names one more tool and a
/// next cursor): the session asks for 100 pages in a row, each with the
/// cursor the last one gave, and then takes the tools as known; what the
/// pages taught it counts (the last page's tool is typed). Nothing of it
/// reaches the client.
#[test]
fn a_listing_that_never_ends_is_read_for_a_hundred_pages() {
    let calls = Calls::new(ProxyConfig::default());
    let mut relay = calls.answers().unwrap();
    let mut to_client = Vec::new();
    let mut pages = 0u32;
    let mut cursor = Value::Null;
    while let Some(ask) = calls.tools_request(b"") {
        let ask: Value = serde_json::from_slice(&ask).unwrap();
        assert_eq!(ask["params"]["cursor"], cursor, "page {pages}");
        pages += 1;
        cursor = json!(format!("c{pages}"));
        let tool = json!({"name": format!("t{pages}"), "inputSchema": {}, "outputSchema": {"type": "object"}});
        let page =
            json!({"jsonrpc":"2.0","id":ask["id"],"result":{"tools":[tool],"nextCursor":cursor}});
        relay.feed(format!("{page}\n").as_bytes(), &mut to_client);
        assert!(pages <= 100, "asked past the cap");
    }
    assert_eq!(pages, 100);
    assert!(calls.tools_known());
    assert!(
        to_client.is_empty(),
        "{}",
        String::from_utf8_lossy(&to_client)
    );
    // The hundredth page's tool is typed: its call's answer over budget
    // becomes the typed error.
    let mut gate = calls.gate();
    let call =
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t100","arguments":{}}}"#;
    assert!(matches!(gate.check(call.as_bytes()), Fate::Forward { .. }));
    calls.note(gate.facts(), gate.tool());
    let big = "x".repeat(1 << 20);
    let answer = json!({"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":big}],"structuredContent":{"s":big}}});
    relay.feed(format!("{answer}\n").as_bytes(), &mut to_client);
    let end = relay.finish(&mut to_client);
    assert_eq!(end, ServerEnd::default());
    let got = json_lines(&to_client);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["result"]["isError"], true, "{}", got[0]);
    let text = got[0]["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("result_budget_exceeded"), "{text}");
}

/// A typed tool named by more than 254 bytes as written (43 CJK characters
/// written as `\u` escapes, as a writer that escapes every non-ASCII
/// character writes them; or 300 plain ones) is typed all the same: earlier
/// builds read no name over 256 bytes, in the listing or in the call, and
/// cut such a tool's results. A name longer than MCP's 128 characters (here
/// 600) teaches nothing: its calls are an unknown tool's.
#[test]
fn a_typed_tool_by_a_long_name_is_typed() {
    let escaped: String = (0..128).map(|i| format!("\\u{:04x}", 0x4e00 + i)).collect();
    let decoded: String = (0..128)
        .map(|i| char::from_u32(0x4e00 + i).unwrap())
        .collect();
    let cases = [
        (format!("\"{}\"", "t".repeat(255)), true),
        (format!("\"{}\"", "t".repeat(300)), true),
        (format!("\"{escaped}\""), true),
        (serde_json::to_string(&decoded).unwrap(), true),
        (format!("\"{}\"", "t".repeat(600)), false),
    ];
    for (raw_name, typed) in cases {
        let calls = Calls::new(ProxyConfig::default());
        let mut relay = calls.answers().unwrap();
        let mut to_client = Vec::new();
        let ask = calls.tools_request(b"").unwrap();
        let ask: Value = serde_json::from_slice(&ask).unwrap();
        let page = format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"tools":[{{"name":{raw_name},"inputSchema":{{}},"outputSchema":{{"type":"object"}}}}]}}}}"#,
            ask["id"]
        );
        relay.feed(format!("{page}\n").as_bytes(), &mut to_client);
        assert!(calls.tools_known());
        // The call names it as written in the listing.
        let mut gate = calls.gate();
        let call = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":{raw_name},"arguments":{{}}}}}}"#
        );
        assert!(matches!(gate.check(call.as_bytes()), Fate::Forward { .. }));
        calls.note(gate.facts(), gate.tool());
        let name: String = serde_json::from_str(&raw_name).unwrap();
        assert_eq!(gate.tool(), name.as_str(), "{raw_name}");
        let big = "x".repeat(1 << 20);
        let answer = json!({"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":big}],"structuredContent":{"s":big}}});
        relay.feed(format!("{answer}\n").as_bytes(), &mut to_client);
        relay.finish(&mut to_client);
        let got = json_lines(&to_client);
        assert_eq!(got.len(), 1);
        let text = got[0]["result"]["content"][0]["text"].as_str().unwrap();
        assert_eq!(
            text.starts_with("result_budget_exceeded"),
            typed,
            "{} bytes as written: {}",
            raw_name.len(),
            &text[..text.len().min(80)]
        );
    }
}

/// The session pages through its own listing with the cursors the server
/// gives, however long (a server may write its state into one): earlier
/// builds kept none over 256 bytes, and the listing ended at its first
/// page, leaving the tools on later pages unknown. Past 64 KiB the listing
/// ends there.
#[test]
fn a_long_cursor_is_followed() {
    for (len, followed) in [(300usize, true), (20_000, true), (70_000, false)] {
        let calls = Calls::new(ProxyConfig::default());
        let mut relay = calls.answers().unwrap();
        let mut to_client = Vec::new();
        let ask = calls.tools_request(b"").unwrap();
        let ask: Value = serde_json::from_slice(&ask).unwrap();
        let cursor = "c".repeat(len);
        let page =
            json!({"jsonrpc":"2.0","id":ask["id"],"result":{"tools":[],"nextCursor":cursor}});
        relay.feed(format!("{page}\n").as_bytes(), &mut to_client);
        let next = calls.tools_request(b"");
        assert_eq!(next.is_some(), followed, "a cursor of {len}");
        assert_eq!(calls.tools_known(), !followed);
        if let Some(next) = next {
            let next: Value = serde_json::from_slice(&next).unwrap();
            assert_eq!(next["params"]["cursor"], json!(cursor));
        }
        assert!(to_client.is_empty());
    }
}

/// An answer to the session's own listing that streams on before its id
/// shows it (written last, past the hold) cannot be taken back: the client
/// reads the part that went out, ended as a line of its own so that its
/// framing holds, and nothing from the id on; the tools it lists are still
/// learned, and the next answer reaches the client whole. (With the default
/// hold, a listing whose id comes after its first 8 MiB; docs/proxy.md.)
/// Earlier builds streamed such a line to its end, the session's id with
/// it: an answer to a request the client never sent.
#[test]
fn an_own_listing_with_its_id_past_the_hold_ends_as_a_line() {
    let calls = Calls::new(ProxyConfig {
        max_hold: 64,
        ..ProxyConfig::default()
    });
    calls.set_log(|_, _| {});
    let ask = calls.tools_request(b"").expect("the tools are unknown");
    let id = serde_json::from_slice::<Value>(&ask).unwrap()["id"].to_string();
    let tool = |n: usize| {
        format!(r#"{{"name":"t{n}","inputSchema":{{}},"outputSchema":{{"type":"object"}}}}"#)
    };
    let tools: Vec<String> = (0..20).map(tool).collect();
    let long = format!(
        r#"{{"jsonrpc":"2.0","result":{{"tools":[{}]}},"id":{id}}}"#,
        tools.join(",")
    ) + "\n";
    assert!(long.len() > 64 * 10);
    let mut relay = calls.answers().unwrap();
    let mut to_client = Vec::new();
    for piece in long.as_bytes().chunks(16) {
        relay.feed(piece, &mut to_client);
    }
    let text = String::from_utf8(to_client.clone()).unwrap();
    assert_eq!(text.matches('\n').count(), 1, "{text}");
    assert!(text.ends_with('\n'), "{text}");
    assert!(long.starts_with(text.trim_end()), "{text}");
    assert!(serde_json::from_str::<Value>(&text).is_err(), "{text}");
    assert!(!text.contains(&id), "the id reached the client: {text}");
    assert!(calls.tools_known());
    // The tools it listed were learned: t19 is typed, so a call of it
    // over budget fails whole.
    let got = call_over_budget(&calls, &mut relay, "t19");
    assert_eq!(got["id"], 1, "{got}");
    assert_eq!(got["result"]["isError"], true, "{got}");
    assert_eq!(relay.finish(&mut to_client), ServerEnd::default());
}
