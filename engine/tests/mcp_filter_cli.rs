//! `resultbudget filter` end to end through the built binary: one output line
//! per non-blank input line, a malformed line becomes a JSON-RPC `-32700`
//! error line and the stream goes on (after the part already written, when
//! more than 8 MiB of it streamed on), results are budgeted, the rest passes.
mod mcp_support;

use mcp_support::*;
use resultbudget::mcp::{typed_error_text, McpLimits};
use std::io::{Read, Write};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_resultbudget");
const CAPTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/captures");

struct Out {
    code: i32,
    stdout: Vec<u8>,
    stderr: String,
}

/// Run `resultbudget filter ARGS` with `input` on stdin (written from a
/// thread, so large inputs cannot deadlock against a full stdout pipe).
fn filter(args: &[&str], input: Vec<u8>) -> Out {
    run_command("filter", args, input)
}

/// Run `resultbudget COMMAND ARGS` with `input` on stdin.
fn run_command(command: &str, args: &[&str], input: Vec<u8>) -> Out {
    let mut child = Command::new(BIN)
        .arg(command)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn resultbudget");
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut stderr = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut stdout = Vec::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    writer.join().unwrap();
    let status = child.wait().unwrap();
    Out {
        code: status.code().unwrap_or(-1),
        stdout,
        stderr: err_reader.join().unwrap(),
    }
}

fn lines(b: &[u8]) -> Vec<&[u8]> {
    let mut v: Vec<&[u8]> = b.split(|&c| c == b'\n').collect();
    assert_eq!(v.pop(), Some(&b""[..]), "output must end with a newline");
    v
}

fn json(b: &[u8]) -> serde_json::Value {
    serde_json::from_slice(b)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(b)))
}

#[test]
fn one_line_out_per_line_in_and_malformed_lines_become_errors() {
    let small =
        r#"{"result":{"content":[{"type":"text","text":"Echo: hi"}]},"jsonrpc":"2.0","id":3}"#;
    let note = r#"{"method":"notifications/progress","params":{"progress":1,"total":4,"progressToken":7},"jsonrpc":"2.0"}"#;
    let broken_with_id = r#"{"jsonrpc":"2.0","id":5,"result":{"content":[}"#;
    let big_text = "b".repeat(100_000);
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":6,"result":{{"content":[{{"type":"text","text":"{big_text}"}}],"isError":true}}}}"#
    );
    let err_resp =
        r#"{"jsonrpc":"2.0","id":8,"error":{"code":-32601,"message":"Method not found"}}"#;
    let last = r#"{"jsonrpc":"2.0","id":9,"result":{"content":[]}}"#;
    let input = format!(
        "{small}\n{broken_with_id}\n\n   \n{note}\nnot json at all\n{big}\n{{\"a\":\n{err_resp}\r\n{last}"
    );
    let o = filter(&[], input.into_bytes());
    assert_eq!(o.code, 0, "stderr: {}", o.stderr);
    let out = lines(&o.stdout);
    assert_eq!(out.len(), 8, "one output line per non-blank input line");
    assert_eq!(out[0], small.as_bytes());
    // Malformed with a readable id: the error carries it.
    let e = json(out[1]);
    assert_eq!(e["jsonrpc"], "2.0");
    assert_eq!(e["id"].to_string(), "5");
    assert_eq!(e["error"]["code"].to_string(), "-32700");
    assert!(e["error"]["message"].is_string());
    assert!(e.get("result").is_none());
    assert_eq!(out[2], note.as_bytes());
    let e = json(out[3]);
    assert_eq!(e["id"], serde_json::Value::Null);
    assert_eq!(e["error"]["code"].to_string(), "-32700");
    // The big result is budgeted with the default limits.
    let b = json(out[4]);
    let text = b["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.len() as u64 <= McpLimits::DEFAULT.max_text_block_bytes);
    assert!(split_marker(text).is_some());
    assert_eq!(b["result"]["isError"], true);
    assert_eq!(
        b["result"]["_meta"]["resultbudget/truncation"]["omitted_paths"][0],
        "/content/0/text"
    );
    let doc = parse(out[4]).unwrap();
    assert!(doc.get("result").unwrap().len() as u64 <= McpLimits::DEFAULT.max_result_bytes);
    // An unterminated value on its own line is an error too.
    assert_eq!(json(out[5])["error"]["code"].to_string(), "-32700");
    // CR before LF is whitespace; the error response passes.
    assert_eq!(out[6], err_resp.as_bytes());
    // The last line had no newline and is still processed.
    assert_eq!(out[7], last.as_bytes());
    assert!(
        o.stderr.contains("line 2"),
        "stderr names the bad line: {}",
        o.stderr
    );
}

#[test]
fn an_answer_with_its_id_or_result_twice_becomes_an_error() {
    // Each `result` is budgeted on its own, so a line that repeats it grew
    // with every repeat (here 40 times the 16 KiB text budget); and readers
    // keep the last `id`, which need not be the one that picked the budget.
    let block = format!(
        r#"{{"content":[{{"type":"text","text":"{}"}}]}}"#,
        "z".repeat(50_000)
    );
    let many = format!(
        r#"{{"jsonrpc":"2.0","id":4,{}}}"#,
        vec![format!(r#""result":{block}"#); 40].join(",")
    );
    let ids = r#"{"jsonrpc":"2.0","id":4,"result":{"content":[]},"id":5}"#;
    let errors = r#"{"jsonrpc":"2.0","id":6,"error":{"code":1,"message":"a"},"error":{"code":2,"message":"b"}}"#;
    let both =
        r#"{"jsonrpc":"2.0","id":8,"error":{"code":1,"message":"a"},"result":{"content":[]}}"#;
    let once = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#;
    let o = filter(
        &[],
        format!("{many}\n{ids}\n{errors}\n{both}\n{once}\n").into_bytes(),
    );
    assert_eq!(o.code, 0, "stderr: {}", o.stderr);
    let out = lines(&o.stdout);
    assert_eq!(out.len(), 5);
    for (line, id) in [(out[0], 4), (out[1], 5), (out[2], 6), (out[3], 8)] {
        let e = json(line);
        assert_eq!(e["id"], id, "{e}");
        assert_eq!(e["error"]["code"], -32700, "{e}");
    }
    assert_eq!(out[4], once.as_bytes());
    assert!(
        o.stderr
            .contains("line 4: it has both a `result` and an `error`"),
        "{}",
        o.stderr
    );
    for key in ["result", "id", "error"] {
        assert!(
            o.stderr.contains(&format!("`{key}` comes twice")),
            "{}",
            o.stderr
        );
    }
}

/// The answer named is the last `id`'s, however the reads fall: stdin is a
/// file, so `filter` reads it 64 KiB at a time, and the first read ends
/// between the second `id` and its value. Earlier builds stopped reading the
/// line at the second `id` and named the first.
#[test]
fn an_answer_with_its_id_twice_names_the_last_whatever_the_reads() {
    let head = r#"{"jsonrpc":"2.0","id":4,"result":{"content":[]},"#;
    let key = r#""id":"#;
    let pad = " ".repeat(64 * 1024 - head.len() - key.len());
    let line = format!("{head}{pad}{key}5}}\n");
    assert_eq!(line.find("5}").map(|at| at == 64 * 1024), Some(true));
    let path = std::env::temp_dir().join(format!("rb-twice-{}.jsonl", std::process::id()));
    std::fs::write(&path, &line).expect("write the input");
    let file = std::fs::File::open(&path).expect("open the input");
    let o = Command::new(BIN)
        .arg("filter")
        .stdin(Stdio::from(file))
        .output()
        .expect("run resultbudget");
    let _ = std::fs::remove_file(&path);
    assert_eq!(o.status.code(), Some(0));
    let out = lines(&o.stdout);
    assert_eq!(out.len(), 1);
    let e = json(out[0]);
    assert_eq!(e["id"], 5, "{e}");
    assert_eq!(e["error"]["code"], -32700, "{e}");
}

#[test]
fn a_line_that_is_not_one_message_becomes_an_error() {
    // A JSON-RPC batch of answers: the projector budgets one message, so
    // earlier builds passed the batch's 200 000-byte result on whole.
    let answer = format!(
        r#"{{"jsonrpc":"2.0","id":4,"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
        "z".repeat(200_000)
    );
    let once = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#;
    let input = format!(" [{answer}]\n42\n[1,\n{once}\n");
    let o = filter(&[], input.into_bytes());
    assert_eq!(o.code, 0, "stderr: {}", o.stderr);
    let out = lines(&o.stdout);
    assert_eq!(out.len(), 4);
    for (line, code) in [(out[0], -32600), (out[1], -32600), (out[2], -32700)] {
        let e = json(line);
        assert_eq!(e["id"], serde_json::Value::Null, "{e}");
        assert_eq!(e["error"]["code"], code, "{e}");
    }
    assert_eq!(out[3], once.as_bytes());
}

#[test]
fn filter_limits_flags_and_records() {
    let long = "x".repeat(500);
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{long}"}},{{"type":"text","text":"b"}},{{"type":"text","text":"c"}}],"structuredContent":{{"items":[1,2,3,4,5]}}}}}}"#
    );
    let args = [
        "--max-text-block-bytes",
        "100",
        "--max-content-blocks",
        "2",
        "--max-list-items",
        "3",
        "--records",
    ];
    let o = filter(&args, format!("{line}\n{line}\n").into_bytes());
    assert_eq!(o.code, 0);
    let out = lines(&o.stdout);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0], out[1]);
    let lim = McpLimits {
        max_text_block_bytes: 100,
        max_content_blocks: 2,
        max_list_items: 3,
        ..McpLimits::DEFAULT
    };
    let mut expected = run(lim, tool(), line.as_bytes(), 1 << 20);
    check_message(&lim, line.as_bytes(), &expected);
    assert_eq!(out[0], expected.out.as_slice(), "filter equals the library");
    let rec = json(out[0])["result"]["_meta"]["resultbudget/truncation"].clone();
    assert_eq!(
        rec["omitted_paths"],
        serde_json::json!([
            "/content/0/text",
            "/content/2",
            "/structuredContent/items/3"
        ])
    );
    assert_eq!(rec["omitted_count"].to_string(), "4");
    // --records: the record of each line on stderr.
    expected.rec_json.insert(0, b' ');
    let want = format!("line 1:{}", String::from_utf8_lossy(&expected.rec_json));
    assert!(o.stderr.contains(&want), "stderr: {}", o.stderr);
    assert!(o.stderr.contains("line 2:"));
}

#[test]
fn filter_rejects_unusable_limits() {
    let o = filter(&["--max-result-bytes", "100"], b"{}\n".to_vec());
    assert_eq!(o.code, 2);
    assert!(o.stdout.is_empty());
    assert!(o.stderr.contains("1024"), "{}", o.stderr);
}

#[test]
fn filter_typed_mutating_writes_a_receipt() {
    let rows: Vec<String> = (0..300).map(|i| format!(r#"{{"id":{i}}}"#)).collect();
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":"call-1","result":{{"content":[{{"type":"text","text":"ok"}}],"structuredContent":{{"rows":[{}]}}}}}}"#,
        rows.join(",")
    );
    let result_len = parse(line.as_bytes()).unwrap().get("result").unwrap().len() as u64;
    for (args, read_only) in [
        (
            vec!["--typed", "--mutating", "--max-result-bytes", "1024"],
            false,
        ),
        (vec!["--typed", "--max-result-bytes", "1024"], true),
    ] {
        let o = filter(&args, format!("{line}\n").into_bytes());
        assert_eq!(o.code, 0);
        let out = lines(&o.stdout);
        assert_eq!(out.len(), 1);
        let v = json(out[0]);
        assert_eq!(v["id"], "call-1");
        assert_eq!(v["result"]["isError"], true);
        assert_eq!(
            v["result"]["content"][0]["text"].as_str().unwrap(),
            typed_error_text(read_only, "unknown", result_len, 1024)
        );
        let receipt = &v["result"]["_meta"]["resultbudget/receipt"];
        if read_only {
            assert!(receipt.is_null());
        } else {
            assert_eq!(receipt["request_id"], "call-1");
            assert_eq!(receipt["result_bytes"].to_string(), result_len.to_string());
            let raw = parse(line.as_bytes()).unwrap();
            let hex = format!(
                "{:016x}",
                fnv1a64(raw.get("result").unwrap().raw(line.as_bytes()))
            );
            assert!(receipt["digest"].as_str().unwrap().ends_with(&hex));
        }
    }
    // Within the ceiling a typed result passes whole (300 rows > max_list_items).
    let o = filter(&["--typed"], format!("{line}\n").into_bytes());
    assert_eq!(lines(&o.stdout), [line.as_bytes()]);
}

#[test]
fn filter_passes_captured_tool_results_unchanged() {
    let mut input = Vec::new();
    let mut n = 0;
    let mut names: Vec<_> = std::fs::read_dir(CAPTURES)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl") && !n.ends_with(".tee.jsonl"))
        .collect();
    names.sort();
    for name in names {
        let text = std::fs::read_to_string(format!("{CAPTURES}/{name}")).unwrap();
        for l in text.lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let tool_result = v
                .get("result")
                .and_then(|r| r.as_object())
                .is_some_and(|r| r.contains_key("content") || r.contains_key("isError"));
            // filter treats every result as a tool result; feed it tool results
            // and messages without a result.
            if tool_result || v.get("result").is_none() {
                input.extend_from_slice(l.as_bytes());
                input.push(b'\n');
                n += 1;
            }
        }
    }
    assert!(n > 25);
    let o = filter(&[], input.clone());
    assert_eq!(o.code, 0);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&input),
        "captured lines within budget must pass byte-identical"
    );
}

#[test]
fn filter_bounds_a_five_megabyte_line() {
    let text = "0123456789abcdef".repeat(5 * 1024 * 1024 / 16);
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":77,"result":{{"content":[{{"type":"text","text":"{text}"}}],"isError":false}}}}"#
    );
    let o = filter(&[], format!("{line}\n{line}\n").into_bytes());
    assert_eq!(o.code, 0);
    let out = lines(&o.stdout);
    assert_eq!(out.len(), 2);
    for l in out {
        let doc = parse_valid(l);
        assert!(doc.get("result").unwrap().len() as u64 <= McpLimits::DEFAULT.max_result_bytes);
        let r = run(McpLimits::DEFAULT, tool(), line.as_bytes(), BIG_CHUNK);
        assert_eq!(l, r.out.as_slice());
    }
}

/// With every limit off, a line's output past 8 MiB (`cli::MAX_HOLD`) streams
/// on; if the line then breaks, the part written is ended as a line and the
/// `-32700` line a held broken line gets follows it, so the reader keeps its
/// framing and the request its answer. The stream goes on after it.
#[test]
fn filter_ends_a_broken_streamed_line_and_answers_it() {
    let text = "0123456789abcdef".repeat(9 * 1024 * 1024 / 16);
    let broken = format!(
        r#"{{"jsonrpc":"2.0","id":41,"result":{{"content":[{{"type":"text","text":"{text}"}}],"isError":tru}}}}"#
    );
    let next = r#"{"jsonrpc":"2.0","id":42,"result":{"content":[]}}"#;
    let none = [
        "--max-result-bytes",
        "none",
        "--max-text-bytes",
        "none",
        "--max-text-block-bytes",
        "none",
    ];
    let o = filter(
        &none,
        format!(
            "{broken}
{next}
"
        )
        .into_bytes(),
    );
    assert_eq!(o.code, 0, "stderr: {}", o.stderr);
    let out = lines(&o.stdout);
    assert_eq!(out.len(), 3);
    // What went out is the line's own first bytes, at least the hold's worth.
    assert!(out[0].len() > resultbudget::cli::MAX_HOLD);
    assert!(broken.as_bytes().starts_with(out[0]));
    assert!(serde_json::from_slice::<serde_json::Value>(out[0]).is_err());
    let e = json(out[1]);
    assert_eq!(e["id"], 41);
    assert_eq!(e["error"]["code"], -32700);
    assert_eq!(out[2], next.as_bytes());
    assert!(o.stderr.contains("line 1: broken after"), "{}", o.stderr);
    // Under the hold the same break is replaced whole.
    let short = broken.replacen(&text, "short", 1);
    let o = filter(
        &none,
        format!(
            "{short}
{next}
"
        )
        .into_bytes(),
    );
    let out = lines(&o.stdout);
    assert_eq!(out.len(), 2);
    assert_eq!(json(out[0])["error"]["code"], -32700);
    assert_eq!(out[1], next.as_bytes());
}

/// `--summary` (the README's main job) says on stderr, per line, what was
/// cut, and its numbers are the output's.
#[test]
fn summary_says_what_each_line_lost() {
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/examples/tool-results.jsonl"
    );
    let input = std::fs::read(example).expect("the README's example");
    let o = filter(&["--summary"], input.clone());
    assert_eq!(o.code, 0, "stderr: {}", o.stderr);
    let out = lines(&o.stdout);
    let ins = lines(&input);
    let said: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(said.len(), ins.len(), "{}", o.stderr);
    let mut cut = 0;
    for (i, ((s, line_in), line_out)) in said.iter().zip(&ins).zip(&out).enumerate() {
        let s = s
            .strip_prefix(&format!("line {}: ", i + 1))
            .unwrap_or_else(|| panic!("line {}: {s}", i + 1));
        let rec = &json(line_out)["result"]["_meta"]["resultbudget/truncation"];
        if rec["truncated"] == true {
            cut += 1;
            let want = format!(
                "{} -> {} bytes; {} value(s) omitted, first cut by {}; at {}",
                line_in.len(),
                line_out.len(),
                rec["omitted_count"],
                rec["budget_kind"].as_str().expect("kind"),
                rec["omitted_paths"]
                    .as_array()
                    .expect("paths")
                    .iter()
                    .map(|p| p.as_str().expect("path"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            assert_eq!(s, want);
        } else {
            assert_eq!(line_in, line_out);
            assert_eq!(
                s,
                format!("{} bytes, nothing cut (passed unchanged)", line_in.len())
            );
        }
    }
    assert_eq!(cut, 2, "{}", o.stderr);
}

/// `budget` and `filter` ask for a wider pipe on their stdin (see
/// `framing::PIPE_BYTES`); a file or a terminal is left alone.
#[cfg(target_os = "linux")]
#[test]
fn stdin_pipes_are_widened() {
    use resultbudget::framing::PIPE_BYTES;
    // A pipe starts smaller than the engine asks for, or the check below
    // would show nothing. Measured on a pipe of the test's own: the child's
    // may be widened before the test can look at it (it was, in CI).
    let (fresh, _w) = rustix::pipe::pipe().unwrap();
    let new_size = rustix::pipe::fcntl_getpipe_size(&fresh).unwrap();
    assert!(new_size < PIPE_BYTES, "a new pipe has {new_size} bytes");
    for cmd in ["budget", "filter"] {
        let mut child = Command::new(BIN)
            .arg(cmd)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn resultbudget");
        let stdin = child.stdin.take().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut size = rustix::pipe::fcntl_getpipe_size(&stdin).unwrap();
        while size != PIPE_BYTES && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
            size = rustix::pipe::fcntl_getpipe_size(&stdin).unwrap();
        }
        drop(stdin);
        let _ = child.wait();
        assert_eq!(size, PIPE_BYTES, "{cmd} widens its stdin pipe");
    }
}

#[test]
fn lone_surrogates_pass_the_filter_unless_refused() {
    // What JavaScript writes for a text cut inside a surrogate pair, then a
    // text over the budget whose cut keeps a lone surrogate.
    let long = "x\\ud83d".repeat(3000);
    let input = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"ab\\ud83d\"}}]}}}}\n\
         {{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{long}\"}}]}}}}\n"
    );
    let out = filter(&["--max-text-bytes", "1000"], input.clone().into_bytes());
    assert_eq!(out.code, 0, "{}", out.stderr);
    let got = lines(&out.stdout);
    assert_eq!(got[0], input.lines().next().unwrap().as_bytes());
    let cut = String::from_utf8_lossy(got[1]);
    assert!(
        cut.contains("x\\ud83dx\\ud83d") && cut.contains("bytes omitted]"),
        "{cut:.200}"
    );
    assert!(got[1].len() < 2000, "{cut}");
    // Refused: each line becomes a parse error (the stream goes on).
    let out = filter(&["--lone-surrogates", "refuse"], input.into_bytes());
    assert_eq!(out.code, 0);
    assert_eq!(lines(&out.stdout).len(), 2);
    for l in lines(&out.stdout) {
        assert!(
            String::from_utf8_lossy(l).contains("-32700"),
            "{}",
            String::from_utf8_lossy(l)
        );
    }
    assert!(out.stderr.contains("unpaired surrogate"), "{}", out.stderr);
}

#[test]
fn the_budget_command_refuses_lone_surrogates_unless_told_to_pass_them() {
    let doc = br#"["\uDC00 then \ud83d", "\ud83d\ude00"]"#;
    let run = |args: &[&str]| {
        let out = run_command("budget", args, doc.to_vec());
        (
            Some(out.code),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert_eq!(run(&[]).0, Some(1));
    assert_eq!(
        run(&["--lone-surrogates", "pass", "--max-string-bytes", "7"]),
        // 7 bytes of the first string: U+FFFD (3) and " the".
        (
            Some(0),
            "[\"\\uDC00 the\",\"\\ud83d\\ude00\"]\n".to_string()
        )
    );
}

/// `budget` with a ceiling holds its output and prints nothing for input that
/// turns out invalid; with `--max-result-bytes none` it streams, and after the
/// error closes what is open, so stdout still holds one valid value: a prefix
/// of the input's items.
#[test]
fn the_budget_command_leaves_one_value_when_streamed_input_breaks() {
    let item = format!("{{\"name\":\"{}\",\"n\":[1,2.5,-3e2]}}", "x".repeat(200));
    let items = vec![item.as_str(); 2000].join(",");
    // Broken near its end, deep inside an object and a string.
    let doc = format!("[{items},{{\"a\":[{{\"b\":\"unfinished \\x\"}}]}}]");
    let held = run_command("budget", &[], doc.clone().into_bytes());
    assert_eq!(held.code, 1);
    assert!(held.stdout.is_empty(), "held output is not printed");
    assert!(held.stderr.contains("invalid input"), "{}", held.stderr);

    let streamed = run_command(
        "budget",
        &["--max-result-bytes", "none", "--max-list-items", "none"],
        doc.into_bytes(),
    );
    assert_eq!(streamed.code, 1, "{}", streamed.stderr);
    assert!(
        streamed.stderr.contains("invalid input"),
        "{}",
        streamed.stderr
    );
    assert!(streamed.stdout.len() > 64 * 1024, "it streamed");
    assert_eq!(streamed.stdout.last(), Some(&b'\n'));
    let v = json(&streamed.stdout);
    let got = v.as_array().expect("an array");
    let want: serde_json::Value = serde_json::from_str(&item).expect("item");
    // The whole items, then the broken one, closed where it broke: its
    // string holds a prefix of what came before the bad escape.
    assert_eq!(got.len(), 2001);
    assert!(got[..2000].iter().all(|g| *g == want));
    let b = got[2000]["a"][0]["b"].as_str().expect("the string, closed");
    assert!("unfinished ".starts_with(b), "{b:?}");
}

/// `budget --report FILE` writes the record there instead of to stderr.
#[test]
fn the_budget_command_writes_its_record_where_asked() {
    let doc = b"{\"keep\":[1,2,3,4,5],\"s\":\"abcdefghij\"}".to_vec();
    let args = ["--max-list-items", "2", "--max-string-bytes", "4"];
    let on_stderr = run_command("budget", &args, doc.clone());
    assert_eq!(on_stderr.code, 0, "{}", on_stderr.stderr);
    let rec: serde_json::Value = serde_json::from_str(on_stderr.stderr.trim()).expect("record");
    assert_eq!(rec["truncated"], true);
    assert_eq!(rec["omitted_paths"], serde_json::json!(["/keep/2", "/s"]));

    let path = std::env::temp_dir().join(format!("rb-report-{}.json", std::process::id()));
    let p = path.to_str().expect("utf-8 path");
    let to_file = run_command("budget", &[&args[..], &["--report", p]].concat(), doc);
    assert_eq!(to_file.code, 0, "{}", to_file.stderr);
    assert!(to_file.stderr.is_empty(), "{}", to_file.stderr);
    assert_eq!(to_file.stdout, on_stderr.stdout);
    let written = std::fs::read(&path).expect("the report file");
    let _ = std::fs::remove_file(&path);
    assert_eq!(String::from_utf8_lossy(&written), on_stderr.stderr);
    assert_eq!(to_file.stdout, b"{\"keep\":[1,2],\"s\":\"abcd\"}\n");
}
