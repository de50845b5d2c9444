//! Shared helpers for the end-to-end tests with real MCP peers.
//!
//! The peers are installed by `.ci/test` (the README's test command):
//! `engine/tests/peers/node_modules` (npm ci) and a Python venv with the `mcp` SDK
//! at `target/peers-venv` (or `$RB_PEERS_PYTHON`). A missing peer is a test failure
//! with a message that says how to install it, never a silent skip.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub fn peers_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peers")
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_resultbudget")
}

fn must_exist(p: &Path, what: &str) -> PathBuf {
    assert!(
        p.exists(),
        "{what} not found at {} — run `bash .ci/test` (the README's test command), which installs the MCP peers",
        p.display()
    );
    p.to_path_buf()
}

pub fn node_module(rel: &str) -> String {
    must_exist(&peers_dir().join("node_modules").join(rel), rel)
        .to_string_lossy()
        .into_owned()
}

pub fn everything_cmd() -> Vec<String> {
    vec![
        "node".into(),
        node_module("@modelcontextprotocol/server-everything/dist/index.js"),
    ]
}

pub fn filesystem_cmd(dir: &Path) -> Vec<String> {
    vec![
        "node".into(),
        node_module("@modelcontextprotocol/server-filesystem/dist/index.js"),
        dir.to_string_lossy().into_owned(),
    ]
}

pub fn python() -> String {
    if let Ok(p) = std::env::var("RB_PEERS_PYTHON") {
        return p;
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/peers-venv/bin/python");
    must_exist(&p, "the Python venv with the mcp SDK")
        .to_string_lossy()
        .into_owned()
}

pub fn pyserver_cmd() -> Vec<String> {
    vec![
        python(),
        peers_dir()
            .join("pyserver.py")
            .to_string_lossy()
            .into_owned(),
    ]
}

/// `resultbudget proxy [flags] -- server…`
pub fn proxied(flags: &[&str], server: &[String]) -> Vec<String> {
    let mut v = vec![bin().to_string(), "proxy".to_string()];
    v.extend(flags.iter().map(|s| s.to_string()));
    v.push("--".into());
    v.extend(server.iter().cloned());
    v
}

pub fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rb-peers-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Run a client script with a plan; returns its array of call outcomes.
fn run_client(prog: &str, script: &str, plan: &Value, env: &[(&str, &str)]) -> Vec<Value> {
    let dir = tmpdir(&format!("plan-{}", rand_tag()));
    let plan_path = dir.join("plan.json");
    std::fs::write(&plan_path, serde_json::to_vec(plan).unwrap()).unwrap();
    let mut cmd = Command::new(prog);
    cmd.arg(peers_dir().join(script))
        .arg(&plan_path)
        .current_dir(peers_dir());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.stderr(Stdio::inherit()).output().expect("client runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or("").to_string();
    let v: Value = serde_json::from_str(&last)
        .unwrap_or_else(|e| panic!("client output is not JSON ({e}): {text}"));
    v.as_array().cloned().unwrap_or_default()
}

fn rand_tag() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{SystemTime, UNIX_EPOCH};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let n = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{n}-{}", SEQ.fetch_add(1, Ordering::Relaxed))
}

pub fn ts_client(plan: &Value) -> Vec<Value> {
    run_client("node", "ts_client.mjs", plan, &[])
}

pub fn ts_client_env(plan: &Value, env: &[(&str, &str)]) -> Vec<Value> {
    run_client("node", "ts_client.mjs", plan, env)
}

pub fn py_client(plan: &Value) -> Vec<Value> {
    run_client(&python(), "py_client.py", plan, &[])
}

pub fn py_client_env(plan: &Value, env: &[(&str, &str)]) -> Vec<Value> {
    run_client(&python(), "py_client.py", plan, env)
}

/// A raw JSON-RPC session with a child (the proxy), line by line, with timeouts.
pub struct Raw {
    pub child: Child,
    lines: mpsc::Receiver<String>,
    pub stderr: mpsc::Receiver<String>,
}

impl Raw {
    pub fn spawn(cmd: &[String], env: &[(&str, &str)]) -> Raw {
        let mut c = Command::new(&cmd[0]);
        c.args(&cmd[1..])
            .current_dir(peers_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c.spawn().expect("spawn");
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                match l {
                    Ok(l) => {
                        if tx.send(l).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        });
        let (etx, erx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut s = String::new();
            let mut r = BufReader::new(err);
            let _ = r.read_to_string(&mut s);
            let _ = etx.send(s);
        });
        Raw {
            child,
            lines: rx,
            stderr: erx,
        }
    }

    pub fn send(&mut self, v: &Value) {
        let mut s = serde_json::to_vec(v).unwrap();
        s.push(b'\n');
        self.send_raw(&s);
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.child.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    pub fn close_stdin(&mut self) {
        drop(self.child.stdin.take());
    }

    /// The next line, parsed (panics on a line that is not JSON: the proxy never
    /// forwards one).
    pub fn next(&self, secs: u64) -> Option<Value> {
        let l = self.lines.recv_timeout(Duration::from_secs(secs)).ok()?;
        Some(
            serde_json::from_str(&l)
                .unwrap_or_else(|e| panic!("the proxy wrote a line that is not JSON ({e}): {l}")),
        )
    }

    /// Lines until the response with this id (notifications and others are collected).
    pub fn until_id(&self, id: &Value, secs: u64) -> (Value, Vec<Value>) {
        let mut others = Vec::new();
        loop {
            let v = self
                .next(secs)
                .unwrap_or_else(|| panic!("no response with id {id} (saw {others:?})"));
            if v.get("id") == Some(id) && v.get("method").is_none() {
                return (v, others);
            }
            others.push(v);
        }
    }

    pub fn initialize(&mut self) {
        self.initialize_with(serde_json::json!({}));
    }

    /// The 2025-11-25 handshake, declaring these client capabilities.
    pub fn initialize_with(&mut self, capabilities: Value) {
        self.send(&serde_json::json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":capabilities,"clientInfo":{"name":"raw-test","version":"0"}}}));
        let (r, _) = self.until_id(&Value::from("init"), 30);
        assert!(r.get("result").is_some(), "initialize failed: {r}");
        self.send(&serde_json::json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    }

    /// Lines until a request from the server with this method.
    pub fn until_method(&self, method: &str, secs: u64) -> Value {
        loop {
            let v = self
                .next(secs)
                .unwrap_or_else(|| panic!("no {method} request from the server"));
            if v["method"] == method {
                return v;
            }
        }
    }

    pub fn call(&mut self, id: i64, name: &str, args: Value) -> Value {
        self.send(&serde_json::json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":args}}));
        self.until_id(&Value::from(id), 60).0
    }

    pub fn wait(mut self, secs: u64) -> (Option<i32>, String) {
        self.close_stdin();
        let deadline = std::time::Instant::now() + Duration::from_secs(secs);
        let code = loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                break s.code();
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let err = self
            .stderr
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default();
        (code, err)
    }
}

/// Text of content block `i` of a CallToolResult.
pub fn text(result: &Value, i: usize) -> String {
    result["content"][i]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The truncation record of a result, if any.
pub fn record(result: &Value) -> Option<Value> {
    result
        .get("_meta")
        .and_then(|m| m.get("resultbudget/truncation"))
        .cloned()
}
