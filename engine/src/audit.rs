//! `resultbudget inventory audit -- <server command>`: start a server, read every
//! page of `tools/list`, and report each tool that breaks the inventory contract.

use crate::framing::{LineReader, Piece};
use crate::inventory::{Class, Inventory};
use crate::tokenizer::{is_low_escape, u_escape};
use clap::Args;
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A server's line as JSON. `serde_json` refuses a lone surrogate escape,
/// which a JavaScript server writes for a description cut inside a pair (and
/// which its SDK's clients read); the audit reads one as U+FFFD, so such a
/// page is audited instead of skipped until the wait runs out.
fn parse_line(line: &str) -> Option<Value> {
    serde_json::from_str(line)
        .ok()
        .or_else(|| serde_json::from_slice(&lone_surrogates_as_replacement(line.as_bytes())).ok())
}

/// `json` with each `\u` escape of a surrogate outside a high+low pair written
/// `\ufffd` (the same length; U+FFFD is what a UTF-8 reader puts in its
/// place). Escapes are read as escapes (`\\ud83d` is a backslash, then text).
pub(crate) fn lone_surrogates_as_replacement(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len());
    let mut i = 0;
    while let Some(&b) = json.get(i) {
        let step = match u_escape(json, i) {
            Some(0xD800..=0xDBFF) if is_low_escape(json, i + 6) => 12,
            Some(0xD800..=0xDFFF) => {
                out.extend_from_slice(b"\\ufffd");
                i += 6;
                continue;
            }
            _ if b == b'\\' => 2,
            _ => 1,
        };
        let end = (i + step).min(json.len());
        out.extend_from_slice(json.get(i..end).unwrap_or_default());
        i = end;
    }
    out
}

#[derive(Args, Debug, Clone)]
pub struct AuditArgs {
    /// The inventory to audit against (without one, every tool lacks a row).
    #[arg(long)]
    pub inventory: Option<std::path::PathBuf>,
    /// Print one JSON report on stdout instead of lines.
    #[arg(long)]
    pub json: bool,
    /// Seconds to wait for each answer.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
    /// The server command and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// One problem found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub tool: String,
    pub kind: &'static str,
    pub detail: String,
}

const QUERY_NAMES: [&str; 3] = ["q", "query", "search"];

/// Check a list of tools (as `tools/list` returns them) against an inventory.
pub fn audit_tools(tools: &[Value], inv: Option<&Inventory>) -> Vec<Finding> {
    let mut out = Vec::new();
    for t in tools {
        let name = t
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let row = inv.and_then(|i| i.row(&name));
        if row.is_none() {
            out.push(Finding {
                tool: name.clone(),
                kind: "no_inventory_row",
                detail: "the tool has no inventory row".into(),
            });
        }
        let class = row.map(|r| r.class).or_else(|| Class::by_name(&name));
        let schema = t.get("inputSchema");
        let props = schema
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object);
        let required: Vec<&str> = schema
            .and_then(|s| s.get("required"))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let has = |k: &str| props.is_some_and(|p| p.contains_key(k));
        match class {
            Some(Class::List) => {
                for q in QUERY_NAMES {
                    if has(q) {
                        out.push(Finding {
                            tool: name.clone(),
                            kind: "list_accepts_query",
                            detail: format!("a list tool whose inputSchema accepts {q:?}"),
                        });
                    }
                }
            }
            Some(Class::Search) => {
                let qs: Vec<String> = match row {
                    Some(r) if !r.query_params.is_empty() => r.query_params.clone(),
                    _ => QUERY_NAMES.iter().map(|s| s.to_string()).collect(),
                };
                if !qs.iter().any(|q| required.contains(&q.as_str())) {
                    out.push(Finding {
                        tool: name.clone(),
                        kind: "search_query_optional",
                        detail: format!(
                            "a search tool that does not require a query ({})",
                            qs.join("/")
                        ),
                    });
                }
            }
            _ => {}
        }
        let paged = matches!(
            class,
            Some(Class::List | Class::Search | Class::Discovery | Class::Directory)
        );
        // The page-size argument: the row's, else `limit`.
        let limit_param = row
            .and_then(|r| r.limit.as_ref())
            .map_or("limit", |l| l.param.as_str());
        if paged {
            if !has(limit_param) {
                out.push(Finding {
                    tool: name.clone(),
                    kind: "paged_without_limit",
                    detail: format!("a paged tool without {limit_param:?} in its inputSchema"),
                });
            }
            if !has("cursor") {
                out.push(Finding {
                    tool: name.clone(),
                    kind: "paged_without_cursor",
                    detail: "a paged tool without \"cursor\" in its inputSchema".into(),
                });
            }
        }
        if let Some((def, max)) = class.and_then(Class::default_limits) {
            if let Some(l) = props.and_then(|p| p.get(limit_param)) {
                if let Some(m) = l.get("maximum").and_then(Value::as_u64) {
                    if m > max {
                        out.push(Finding {
                            tool: name.clone(),
                            kind: "limit_outside_defaults",
                            detail: format!("inputSchema {limit_param} maximum {m} is above {max}"),
                        });
                    }
                }
                if let Some(d) = l.get("default").and_then(Value::as_u64) {
                    if d > def {
                        out.push(Finding {
                            tool: name.clone(),
                            kind: "limit_outside_defaults",
                            detail: format!("inputSchema {limit_param} default {d} is above {def}"),
                        });
                    }
                }
            }
            if let Some(l) = row.and_then(|r| r.limit.as_ref()) {
                if l.max > max || l.default > def {
                    out.push(Finding {
                        tool: name.clone(),
                        kind: "limit_outside_defaults",
                        detail: format!(
                            "inventory limit {}/{} is outside the {} defaults {def}/{max}",
                            l.default,
                            l.max,
                            class.map_or("", Class::as_str)
                        ),
                    });
                }
            }
        }
    }
    out
}

/// The longest line the audit reads from a server. What it protects: the
/// audit's memory, against a server that writes a huge stray line on its
/// stdout (a page of hundreds of tools with their schemas is a few MB). What
/// it does not bound: the tools kept across pages (at most 1,000 pages).
const MAX_LINE: usize = 64 << 20;

/// The next line of `r` into `line` (its newline left out): `None` at the
/// end of the output, else whether the line was longer than `cap` bytes, in
/// which case it was read to its end and none of it kept. Bytes that are not
/// UTF-8 are the caller's to read as it can (the standard `lines()` ends at
/// the first such line, and the audit with it).
fn read_line_capped<R: std::io::Read>(
    r: &mut LineReader<R>,
    line: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<Option<bool>> {
    line.clear();
    let mut over = false;
    loop {
        match r.next_piece()? {
            Piece::Data(d) if !over && line.len() + d.len() <= cap => line.extend_from_slice(d),
            Piece::Data(_) => {
                over = true;
                line.clear();
            }
            Piece::End => return Ok(Some(over)),
            Piece::Eof { partial } => return Ok(partial.then_some(over)),
        }
    }
}

/// The audit's answer to a request from the server while it lists the
/// tools: no roots, a pong, and for anything else (sampling, elicitation:
/// the audit declared none of those capabilities) JSON-RPC's "method not
/// found", rather than a result of the wrong shape.
fn reply_to_server(request: &Value) -> Value {
    let id = &request["id"];
    match request["method"].as_str() {
        Some("roots/list") => json!({"jsonrpc":"2.0","id":id,"result":{"roots":[]}}),
        Some("ping") => json!({"jsonrpc":"2.0","id":id,"result":{}}),
        _ => json!({"jsonrpc":"2.0","id":id,"error":{
            "code":-32601,"message":"resultbudget audit: method not supported"}}),
    }
}

/// Talk to the server: initialize, then every page of tools/list. The
/// server is stopped and reaped however the talk ends, so that a failed
/// audit leaves no server behind (nor one holding the audit's stderr).
pub fn fetch_tools(cmd: &[String], timeout: Duration) -> Result<Vec<Value>, String> {
    let (prog, args) = cmd
        .split_first()
        .ok_or("audit needs a server command after --")?;
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start {prog}: {e}"))?;
    let talked = talk(&mut child, timeout);
    let _ = child.kill();
    let _ = child.wait();
    talked
}

/// What a failed write to the server means: a broken pipe is the server
/// no longer reading its input (it closed it, or exited), which says more
/// than the error's own text.
fn write_error(what: &str, e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        format!("the server stopped reading its input before {what} was sent")
    } else {
        format!("writing {what} to the server: {e}")
    }
}

/// The conversation of [`fetch_tools`], on a started server.
fn talk(child: &mut std::process::Child, timeout: Duration) -> Result<Vec<Value>, String> {
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        let mut reader = LineReader::new(stdout);
        let mut line = Vec::new();
        loop {
            match read_line_capped(&mut reader, &mut line, MAX_LINE) {
                Ok(None) => break,
                Ok(Some(true)) => eprintln!(
                    "resultbudget: audit: skipped a line of the server's over {} MiB",
                    MAX_LINE >> 20
                ),
                Ok(Some(false)) => {
                    if tx
                        .send(String::from_utf8_lossy(&line).into_owned())
                        .is_err()
                    {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
    });
    let mut send = |v: &Value| -> Result<(), String> {
        let mut s = v.to_string();
        s.push('\n');
        stdin.write_all(s.as_bytes()).map_err(|e| {
            let what = match (v.get("id"), v.get("method").and_then(Value::as_str)) {
                (Some(id), Some(_)) => format!("request {id}"),
                (Some(id), None) => format!("the answer to its request {id}"),
                (None, m) => m.unwrap_or("a message").to_string(),
            };
            write_error(&what, &e)
        })
    };
    let wait = |id: u64,
                send_reply: &mut dyn FnMut(&Value) -> Result<(), String>|
     -> Result<Value, String> {
        loop {
            let line = rx.recv_timeout(timeout).map_err(|e| match e {
                mpsc::RecvTimeoutError::Timeout => {
                    format!("no answer to request {id} within {}s", timeout.as_secs())
                }
                mpsc::RecvTimeoutError::Disconnected => {
                    format!("the server's output ended before it answered request {id}")
                }
            })?;
            let Some(v) = parse_line(&line) else {
                continue;
            };
            if v.get("method").is_some() && v.get("id").is_some() {
                send_reply(&reply_to_server(&v))?;
                continue;
            }
            if v.get("id").and_then(Value::as_u64) == Some(id) {
                if let Some(e) = v.get("error") {
                    return Err(format!("request {id} failed: {e}"));
                }
                return Ok(v.get("result").cloned().unwrap_or(Value::Null));
            }
        }
    };
    send(
        &json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},
        "clientInfo":{"name":"resultbudget-audit","version":env!("CARGO_PKG_VERSION")}}}),
    )?;
    wait(1, &mut send)?;
    send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}))?;
    let mut tools = Vec::new();
    let mut cursor: Option<Value> = None;
    let mut id = 2u64;
    loop {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        send(&json!({"jsonrpc":"2.0","id":id,"method":"tools/list","params":params}))?;
        let r = wait(id, &mut send)?;
        if let Some(a) = r.get("tools").and_then(Value::as_array) {
            tools.extend(a.iter().cloned());
        }
        match r.get("nextCursor") {
            Some(c) if !c.is_null() && id < 1000 => cursor = Some(c.clone()),
            _ => break,
        }
        id += 1;
    }
    Ok(tools)
}

pub fn run(a: AuditArgs) -> u8 {
    let inv = match &a.inventory {
        Some(p) => match Inventory::load(p) {
            Ok(i) => Some(i),
            Err(problems) => {
                for m in problems {
                    eprintln!("resultbudget: inventory {}: {m}", p.display());
                }
                return 2;
            }
        },
        None => None,
    };
    let tools = match fetch_tools(&a.command, Duration::from_secs(a.timeout)) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("resultbudget: audit: {e}");
            return 2;
        }
    };
    let findings = audit_tools(&tools, inv.as_ref());
    if a.json {
        let report = json!({
            "tools": tools.iter().filter_map(|t| t.get("name")).collect::<Vec<_>>(),
            "findings": findings.iter().map(|f| json!({"tool": f.tool, "kind": f.kind, "detail": f.detail})).collect::<Vec<_>>(),
        });
        println!("{report}");
    } else {
        for f in &findings {
            println!("{}: {}: {}", f.tool, f.kind, f.detail);
        }
        println!("{} tool(s), {} finding(s)", tools.len(), findings.len());
    }
    u8::from(!findings.is_empty())
}

#[cfg(test)]
mod tests {
    use super::{
        audit_tools, lone_surrogates_as_replacement as fix, parse_line, read_line_capped,
        reply_to_server,
    };
    use crate::framing::LineReader;
    use crate::inventory::Inventory;
    use serde_json::json;

    fn kinds(tools: &[serde_json::Value], inv: Option<&Inventory>) -> Vec<(String, String)> {
        audit_tools(tools, inv)
            .into_iter()
            .map(|f| (f.tool, format!("{}: {}", f.kind, f.detail)))
            .collect()
    }

    #[test]
    fn a_list_tool_that_takes_a_query_or_pages_past_the_defaults_is_reported() {
        let tools = [
            json!({"name": "list_items", "inputSchema": {"type": "object", "properties": {
                "query": {"type": "string"}, "cursor": {"type": "string"},
                "limit": {"type": "integer", "default": 50, "maximum": 500}}}}),
            json!({"name": "list_fine", "inputSchema": {"type": "object", "properties": {
                "cursor": {"type": "string"},
                "limit": {"type": "integer", "default": 20, "maximum": 100}}}}),
        ];
        assert_eq!(
            kinds(&tools, None)
                .into_iter()
                .filter(|(_, k)| !k.starts_with("no_inventory_row"))
                .collect::<Vec<_>>(),
            [
                (
                    "list_items",
                    "list_accepts_query: a list tool whose inputSchema accepts \"query\""
                ),
                (
                    "list_items",
                    "limit_outside_defaults: inputSchema limit maximum 500 is above 100"
                ),
                (
                    "list_items",
                    "limit_outside_defaults: inputSchema limit default 50 is above 20"
                ),
            ]
            .map(|(t, k)| (t.to_string(), k.to_string()))
        );
    }

    #[test]
    fn the_rows_page_size_argument_is_the_one_checked() {
        // The row names `pageSize`: that is the argument whose bounds count,
        // and a row's own limit past its class's defaults is reported too.
        let row = |tool: &str, default: u64, max: u64| {
            json!({"tool": tool, "surface": tool, "classification": "discovery", "read_only": true,
                   "limit": {"param": "pageSize", "default": default, "max": max},
                   "cursor": {"param": "cursor", "has_more_field": "has_more",
                              "next_cursor_field": "next_cursor"},
                   "per_item_budget_bytes": 256, "result_budget": {"max_result_bytes": 65536},
                   "backend_query_bound": "limit+1", "structured_content_policy": "cut_generic"})
        };
        let inv = Inventory::parse(
            &json!({"tools": [row("things", 20, 100), row("more_things", 30, 100)]}).to_string(),
        )
        .expect("inventory");
        let tools = [
            json!({"name": "things", "inputSchema": {"type": "object", "properties": {
                "cursor": {"type": "string"},
                "pageSize": {"type": "integer", "default": 20, "maximum": 1000},
                "limit": {"type": "integer", "maximum": 5}}}}),
            json!({"name": "more_things", "inputSchema": {"type": "object", "properties": {
                "cursor": {"type": "string"}, "pageSize": {"type": "integer"}}}}),
        ];
        assert_eq!(
            kinds(&tools, Some(&inv)),
            [
                ("things", "limit_outside_defaults: inputSchema pageSize maximum 1000 is above 100"),
                ("more_things", "limit_outside_defaults: inventory limit 30/100 is outside the discovery defaults 20/100"),
            ]
            .map(|(t, k)| (t.to_string(), k.to_string()))
        );
    }

    #[test]
    fn lone_surrogate_escapes_become_the_replacement_character() {
        let cases: [(&str, &str); 7] = [
            (r#""\ud83d""#, r#""\ufffd""#),
            (r#""\ud83d\ude00""#, r#""\ud83d\ude00""#),
            (r#""\\ud83d""#, r#""\\ud83d""#),
            (
                r#""\uDC00\ud83d\uDE00\ud83d""#,
                r#""\ufffd\ud83d\uDE00\ufffd""#,
            ),
            (r#""\ud83d\ud83d\ude00x""#, r#""\ufffd\ud83d\ude00x""#),
            (r#""\ud83d\n\u00e9""#, r#""\ufffd\n\u00e9""#),
            (r#""\ud8"#, r#""\ud8"#),
        ];
        for (input, want) in cases {
            assert_eq!(String::from_utf8(fix(input.as_bytes())).unwrap(), want);
        }
    }

    #[test]
    fn a_page_with_a_lone_surrogate_is_read() {
        let line = r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"t","description":"cut \ud83d","inputSchema":{"type":"object"}}]}}"#;
        let v = parse_line(line).expect("read");
        assert_eq!(v["result"]["tools"][0]["description"], "cut \u{fffd}");
        assert!(parse_line("{\"id\":").is_none());
    }

    #[test]
    fn a_line_over_the_cap_is_read_to_its_end_and_not_kept() {
        // Read three bytes at a time, so the lines come in pieces.
        struct Trickle(&'static [u8]);
        impl std::io::Read for Trickle {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(buf.len()).min(3);
                let (head, rest) = self.0.split_at(n);
                buf[..n].copy_from_slice(head);
                self.0 = rest;
                Ok(n)
            }
        }
        let input = b"12345\n123456\n\xff\xfe\n1234567890\nend";
        let mut r = LineReader::new(Trickle(input));
        let mut line = Vec::new();
        let mut got = Vec::new();
        while let Some(over) = read_line_capped(&mut r, &mut line, 6).expect("a slice reads") {
            got.push((over, line.clone()));
        }
        let want: Vec<(bool, Vec<u8>)> = vec![
            (false, b"12345".to_vec()),
            (false, b"123456".to_vec()),
            (false, b"\xff\xfe".to_vec()),
            (true, Vec::new()),
            (false, b"end".to_vec()),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn a_server_request_is_answered_by_its_method() {
        let ask = |m: &str| reply_to_server(&json!({"jsonrpc":"2.0","id":"s1","method":m}));
        assert_eq!(ask("roots/list")["result"], json!({"roots": []}));
        assert_eq!(ask("ping")["result"], json!({}));
        for m in ["sampling/createMessage", "elicitation/create"] {
            let r = ask(m);
            assert_eq!(r["id"], "s1");
            assert_eq!(r["error"]["code"], -32601, "{r}");
            assert!(r.get("result").is_none(), "{r}");
        }
    }
}
