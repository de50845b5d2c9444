//! `resultbudget budget` with default limits on a generated input of hundreds
//! of megabytes, streamed into its stdin from a writer thread and never held in
//! memory: it exits 0 with a bounded, valid, exactly predicted output and
//! record, and its peak RSS stays in the low MiB.
//!
//! The debug binary reads ~100 MB/s here, so the 300 MB run takes a few
//! seconds and is not ignored.
use std::io::{Read, Write};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_resultbudget");
const TIME: &str = "/usr/bin/time";
const MIB: u64 = 1024 * 1024;

/// Nesting of the `deep` member: arrays below `max_depth` 32 are emptied.
const DEEP: usize = 40;

/// The text of item `i` (about 200 bytes): escapes, a surrogate pair, raw
/// multibyte characters.
fn item(i: u64) -> String {
    format!(
        r#"{{"id":{i},"name":"item-{i}","text":"line one\nline two \u00e9 é \uD83D\uDE00 😀 quoted \"x\" tab\t and padding text to make it longer","n":-{i}.5e-3,"ok":true}}"#
    )
}

/// One period of the blob string (26 + 5 + 2 + 3 + 4 = 40 decoded bytes).
const BLOB_UNIT: &str = r#"abcdefghijklmnopqrstuvwxyz\n\t\\\/\"\u00e9€\uD83D\uDE00"#;

/// How the generated input is laid out.
struct Plan {
    items: u64,
    blob_units: u64,
}

impl Plan {
    /// About `total` bytes, half items and half blob.
    fn new(total: u64) -> Plan {
        let half = total / 2;
        let item_len = item(500_000).len() as u64 + 1;
        Plan {
            items: half / item_len,
            blob_units: half / BLOB_UNIT.len() as u64,
        }
    }

    /// Write the whole input to `w` in ~64 KiB pieces; returns its length.
    fn write(&self, w: &mut impl Write) -> std::io::Result<u64> {
        let mut buf = Vec::with_capacity(80 * 1024);
        let mut total = 0u64;
        let mut flush = |buf: &mut Vec<u8>, force: bool| -> std::io::Result<()> {
            if force || buf.len() >= 64 * 1024 {
                w.write_all(buf)?;
                total += buf.len() as u64;
                buf.clear();
            }
            Ok(())
        };
        buf.extend_from_slice(b"{\"items\":[\n");
        for i in 0..self.items {
            if i > 0 {
                buf.extend_from_slice(b",\n");
            }
            buf.extend_from_slice(item(i).as_bytes());
            flush(&mut buf, false)?;
        }
        buf.extend_from_slice(b"\n],\"blob\":\"");
        for _ in 0..self.blob_units {
            buf.extend_from_slice(BLOB_UNIT.as_bytes());
            flush(&mut buf, false)?;
        }
        buf.extend_from_slice(b"\",\"deep\":");
        buf.extend_from_slice("[".repeat(DEEP).as_bytes());
        buf.extend_from_slice(b"1");
        buf.extend_from_slice("]".repeat(DEEP).as_bytes());
        buf.extend_from_slice(b",\"end\":null}\n");
        flush(&mut buf, true)?;
        Ok(total)
    }
}

/// The decoded blob prefix the default `max_string_bytes` (8192) keeps.
fn expected_blob() -> String {
    let unit: String = serde_json::from_str(&format!("\"{BLOB_UNIT}\"")).unwrap();
    let mut s = String::new();
    for c in unit.chars().cycle() {
        if s.len() + c.len_utf8() > 8192 {
            break;
        }
        s.push(c);
    }
    s
}

/// Peak RSS of the child in KiB, from GNU time's `-f maxrss_kib=%M` line.
fn maxrss_kib(stderr: &str) -> Option<u64> {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("maxrss_kib="))
        .and_then(|v| v.trim().parse().ok())
}

/// VmHWM (KiB) of a running process.
fn vmhwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Run the binary on ~`total` bytes. Peak RSS comes from GNU time when
/// `prefer_time` and it is installed, else from polling VmHWM while feeding.
fn run(total: u64, prefer_time: bool) {
    let plan = Plan::new(total);
    let use_time = prefer_time && std::path::Path::new(TIME).exists();
    let mut cmd = if use_time {
        let mut c = Command::new(TIME);
        c.args(["-f", "maxrss_kib=%M", BIN, "budget"]);
        c
    } else {
        let mut c = Command::new(BIN);
        c.arg("budget");
        c
    };
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn resultbudget");
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let n = plan.write(&mut stdin).expect("writing the child's stdin");
        drop(stdin);
        n
    });
    // Without GNU time, sample the child's high-water mark while it reads.
    let mut polled = 0u64;
    if !use_time {
        while !writer.is_finished() {
            if let Some(k) = vmhwm_kib(pid) {
                polled = polled.max(k);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    let mut stdout = Vec::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let written = writer.join().unwrap();
    let status = child.wait().unwrap();
    let plan = Plan::new(total);
    assert!(
        written >= total * 9 / 10,
        "wrote only {written} of ~{total} bytes"
    );

    assert!(status.success(), "exit {status:?}; stderr: {stderr}");
    assert_eq!(stdout.last(), Some(&b'\n'), "stdout ends with a newline");
    let value = &stdout[..stdout.len() - 1];
    assert!(
        value.len() <= 65536,
        "output of {} bytes over the default ceiling",
        value.len()
    );
    let v: serde_json::Value = serde_json::from_slice(value).expect("stdout is one JSON value");

    // 100 items, exactly as generated; 8192 decoded bytes of the blob; `deep`
    // emptied at level 33; `end` kept.
    let items = v["items"].as_array().expect("items");
    assert_eq!(items.len(), 100);
    for (i, it) in items.iter().enumerate() {
        let exp: serde_json::Value = serde_json::from_str(&item(i as u64)).unwrap();
        assert_eq!(*it, exp, "item {i}");
    }
    assert_eq!(v["blob"].as_str().unwrap(), expected_blob());
    let mut d = &v["deep"];
    let mut levels = 1; // the top-level object
    while let Some(a) = d.as_array() {
        levels += 1;
        match a.first() {
            Some(x) => d = x,
            None => break,
        }
    }
    assert_eq!(levels, 33, "deepest array kept (emptied) at level 33");
    assert_eq!(v["end"], serde_json::Value::Null);
    assert_eq!(v.as_object().unwrap().len(), 4);

    // The record: the items' tail, the cut blob, the emptied array, in input order.
    let rec_line = stderr
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no record on stderr: {stderr}"));
    let deep_path = format!("/deep{}", "/0".repeat(31));
    let expected_rec = format!(
        r#"{{"truncated":true,"budget_kind":"list_items","omitted_count":{},"omitted_paths":["/items/100","/blob","{deep_path}"],"omitted_paths_unlisted":0}}"#,
        plan.items - 100 + 2
    );
    assert_eq!(rec_line, expected_rec);

    let peak_kib = if use_time {
        maxrss_kib(&stderr).unwrap_or_else(|| panic!("no maxrss line in {stderr}"))
    } else {
        assert!(polled > 0, "could not read VmHWM");
        polled
    };
    eprintln!(
        "{} MB in, {} bytes out, peak RSS {} KiB ({})",
        written / 1_000_000,
        value.len(),
        peak_kib,
        if use_time { "GNU time" } else { "VmHWM polled" }
    );
    assert!(
        peak_kib * 1024 < 16 * MIB,
        "peak RSS {peak_kib} KiB is not in the low MiB"
    );
}

#[test]
fn budget_300mb_stream_default_limits() {
    run(300_000_000, true);
}

/// The same at 64 MB, with the peak RSS polled from /proc (the fallback).
#[test]
fn budget_64mb_stream_default_limits() {
    run(64_000_000, false);
}

/// Without any budget, `filter` must still stream a huge line: its memory stays
/// bounded by the hold (8 MiB), not by the line (here 96 MB of content blocks).
#[test]
fn filter_without_budgets_streams_a_huge_line() {
    use std::io::Write;
    let block = format!(
        "{{\"type\":\"text\",\"text\":\"{}\"}}",
        "abcdefgh".repeat(128 * 1024)
    );
    unbudgeted_filter(96 * 1024 * 1024, &[], move |stdin| {
        stdin
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[")
            .unwrap();
        for i in 0..96 {
            if i > 0 {
                stdin.write_all(b",").unwrap();
            }
            stdin.write_all(block.as_bytes()).unwrap();
        }
        stdin.write_all(b"]}}\n").unwrap();
    });
}

/// The same for one 96 MB text block: a text nothing can cut is not held
/// (before, it was buffered whole: peak RSS twice the block).
#[test]
fn filter_without_budgets_streams_one_huge_text_block() {
    unbudgeted_filter(
        96 * 1024 * 1024,
        &[],
        huge_text_line(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\""),
    );
}

/// A writer of `head`, then 96 MB of text, then the end of its block and line.
fn huge_text_line(head: &'static [u8]) -> impl FnOnce(&mut std::process::ChildStdin) + Send {
    move |stdin| {
        use std::io::Write;
        stdin.write_all(head).unwrap();
        let piece = "abcdefgh".repeat(128 * 1024);
        for _ in 0..96 {
            stdin.write_all(piece.as_bytes()).unwrap();
        }
        stdin.write_all(b"\"}]}}\n").unwrap();
    }
}

/// And for one 96 MB image: without a ceiling a blob can never be dropped, so
/// it is not held either (before, it was buffered whole, like the text above).
#[test]
fn filter_without_budgets_streams_one_huge_image_block() {
    use std::io::Write;
    unbudgeted_filter(96 * 1024 * 1024, &[], |stdin| {
        stdin
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"image\",\"data\":\"")
            .unwrap();
        let piece = "QUJDRA==".repeat(128 * 1024).replace("==", "Rk");
        for _ in 0..96 {
            stdin.write_all(piece.as_bytes()).unwrap();
        }
        stdin
            .write_all(b"\",\"mimeType\":\"image/png\"}]}}\n")
            .unwrap();
    });
}

/// A typed tool's result without a ceiling: it cannot fail (only the ceiling
/// decides for a typed tool), so it streams too (before, it was held whole
/// for a verdict that could never come: peak RSS twice the result).
#[test]
fn filter_without_budgets_streams_a_huge_typed_result() {
    unbudgeted_filter(
        96 * 1024 * 1024,
        &["--typed"],
        huge_text_line(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"structuredContent\":{\"a\":1},\"content\":[{\"type\":\"text\",\"text\":\""),
    );
}

/// Run `filter` with every budget off (and the `extra` flags) on what `write`
/// sends; assert that more than `min_out` bytes come out unchanged at the end
/// and peak RSS < 24 MiB.
fn unbudgeted_filter(
    min_out: u64,
    extra: &[&str],
    write: impl FnOnce(&mut std::process::ChildStdin) + Send + 'static,
) {
    let bin = env!("CARGO_BIN_EXE_resultbudget");
    let mut child = std::process::Command::new("/usr/bin/time")
        .args(["-f", "%M", bin, "filter"])
        .args(extra)
        .args([
            "--max-result-bytes",
            "none",
            "--max-text-bytes",
            "none",
            "--max-text-block-bytes",
            "none",
            "--max-content-blocks",
            "none",
            "--max-list-items",
            "none",
            "--max-map-keys",
            "none",
            "--max-string-bytes",
            "none",
            "--max-depth",
            "none",
            "--max-structured-bytes",
            "none",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("/usr/bin/time runs the filter");
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || write(&mut stdin));
    let mut out = child.stdout.take().unwrap();
    let mut n = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    let mut tail = Vec::new();
    loop {
        let k = std::io::Read::read(&mut out, &mut buf).unwrap();
        if k == 0 {
            break;
        }
        n += k as u64;
        tail.extend_from_slice(&buf[..k]);
        if tail.len() > 64 {
            tail.drain(..tail.len() - 64);
        }
    }
    writer.join().unwrap();
    let res = child.wait_with_output().unwrap();
    assert!(res.status.success());
    let err = String::from_utf8_lossy(&res.stderr);
    let peak_kib: u64 = err.lines().last().unwrap().trim().parse().unwrap();
    assert!(n > min_out, "everything passes: {n}");
    assert!(
        tail.ends_with(b"\"}]}}\n"),
        "{:?}",
        String::from_utf8_lossy(&tail)
    );
    assert!(peak_kib < 24 * 1024, "peak RSS {peak_kib} KiB");
}
