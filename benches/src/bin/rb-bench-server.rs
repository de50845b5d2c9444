//! A tiny stdio MCP server for the proxy bench (`benches/benches/proxy.rs`).
//!
//! It answers newline-delimited JSON-RPC requests on stdin: `initialize`,
//! `tools/list` (two tools), and `tools/call` — tool `echo` gets a small canned
//! result, tool `big` a result whose one text block is `--big-bytes` bytes of
//! escape-rich text (default 100 MB, built once at start). Notifications and
//! responses are ignored. It exits when stdin closes.

use std::io::{BufRead, BufWriter, Write};

/// The raw JSON after `"key":` up to the next `,` or `}` (enough for the
/// compact requests the bench and the proxy send).
fn raw_field<'a>(line: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let mut pat = Vec::with_capacity(key.len() + 3);
    pat.push(b'"');
    pat.extend_from_slice(key);
    pat.extend_from_slice(b"\":");
    let at = line.windows(pat.len()).position(|w| w == pat.as_slice())? + pat.len();
    let rest = line.get(at..)?;
    let end = rest
        .iter()
        .position(|&b| b == b',' || b == b'}')
        .unwrap_or(rest.len());
    rest.get(..end)
}

fn main() {
    let mut big_bytes: usize = 100_000_000;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--big-bytes" {
            big_bytes = args
                .next()
                .and_then(|v| v.parse().ok())
                .expect("--big-bytes N");
        }
    }
    let big_text = resultbudget_benches::escape_rich_text(big_bytes, 0xB16);
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut out = BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let (Some(method), Some(id)) = (raw_field(&line, b"method"), raw_field(&line, b"id"))
        else {
            continue; // a notification or a response
        };
        let head = |out: &mut BufWriter<_>| {
            let _ = out.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":");
            let _ = out.write_all(id);
            let _ = out.write_all(b",\"result\":");
        };
        match method {
            b"\"initialize\"" => {
                head(&mut out);
                let _ = out.write_all(
                    b"{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"tools\":{}},\"serverInfo\":{\"name\":\"rb-bench-server\",\"version\":\"0\"}}",
                );
            }
            b"\"tools/list\"" => {
                head(&mut out);
                let _ = out.write_all(
                    b"{\"tools\":[{\"name\":\"echo\",\"inputSchema\":{\"type\":\"object\"}},{\"name\":\"big\",\"inputSchema\":{\"type\":\"object\"}}]}",
                );
            }
            b"\"tools/call\"" => {
                head(&mut out);
                if raw_field(&line, b"name") == Some(b"\"big\"") {
                    let _ = out.write_all(b"{\"content\":[{\"type\":\"text\",\"text\":\"");
                    let _ = out.write_all(&big_text);
                    let _ = out.write_all(b"\"}],\"isError\":false}");
                } else {
                    let _ = out.write_all(
                        b"{\"content\":[{\"type\":\"text\",\"text\":\"hello from the bench server: 42 items, all fine\"}],\"isError\":false}",
                    );
                }
            }
            _ => {
                let _ = out.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":");
                let _ = out.write_all(id);
                let _ = out
                    .write_all(b",\"error\":{\"code\":-32601,\"message\":\"method not found\"}}\n");
                let _ = out.flush();
                continue;
            }
        }
        let _ = out.write_all(b"}\n");
        if out.flush().is_err() {
            break;
        }
    }
}
