//! `proxy::Session`: the proxy's relays over streams the caller owns, in
//! front of a real server the test started itself (the reference
//! `server-everything`, which writes the `id` of each answer last).
mod peers_support;

use peers_support::*;
use resultbudget::guard::{ArgCaps, Guard};
use resultbudget::mcp::McpLimits;
use resultbudget::proxy::{LogLevel, ProxyConfig, ServerEnd, Session, ToolFacts};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

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
        let cmd = everything_cmd();
        let mut child = Command::new(&cmd[0])
            .args(&cmd[1..])
            .current_dir(peers_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn server-everything");
        let server_in = child.stdin.take().expect("stdin");
        let server_out = child.stdout.take().expect("stdout");
        let (from_client, to_session) = std::io::pipe().expect("pipe");
        let (from_session, to_client) = std::io::pipe().expect("pipe");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let mut session = Session::new(cfg, to_client);
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

/// The tokio pattern `docs/library.md` gives: the client's connection is an
/// async stream (here an in-memory duplex), bridged for the session's
/// blocking relays, each on a blocking thread of the runtime.
#[test]
fn a_tokio_gateway_runs_the_relays_on_blocking_threads() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    use tokio_util::io::SyncIoBridge;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cmd = everything_cmd();
        let mut child = Command::new(&cmd[0])
            .args(&cmd[1..])
            .current_dir(peers_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn server-everything");
        let server_in = child.stdin.take().expect("stdin");
        let server_out = child.stdout.take().expect("stdout");
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
