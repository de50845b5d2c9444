//! The transports (`engine/src/transport.rs`) against a line-by-line twin.
//!
//! A stream of newline-delimited JSON-RPC — every recorded line of
//! `shared/captures`, a result far over budget, broken lines, blank lines,
//! and a last line without its newline — goes through `ProjectWriter`,
//! `AsyncProjectWriter` and `McpEncoder`. What each must write is derived
//! the slow, obvious way: each line on its own through a `Projector`, a
//! broken one or one with a top-level member twice replaced by the `-32700`
//! line, one that is not an object (a batch, a bare value) by the `-32600`
//! line, a blank one dropped. Then:
//!
//! * any split of the stream into writes gives those bytes, one byte at a
//!   time included;
//! * an inner writer that takes a few bytes a call and fails now and then
//!   (`WouldBlock`, `Interrupted`; `Pending` for the async one) gives those
//!   bytes too, to a caller that retries as `std::io::Write` says: a failed
//!   call took nothing;
//! * finished lines reach the inner writer at once, with no flush;
//! * the encoder writes, per message, what the writers write for its line,
//!   and refuses a message a newline would split.
mod mcp_support;

use bytes::BytesMut;
use mcp_support::{random_cuts, Rng};
use resultbudget::mcp::{CallInfo, McpLimits, Projector, Treat};
use resultbudget::transport::{AsyncProjectWriter, McpEncoder, ProjectWriter};
use std::cell::RefCell;
use std::io::{self, Write};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio_util::codec::Encoder;

const CAPTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/captures");

/// Tight enough that recorded lines are cut too, not only the big one.
fn limits() -> McpLimits {
    McpLimits {
        max_result_bytes: 4096,
        max_text_bytes: 600,
        max_text_block_bytes: 400,
        max_list_items: 8,
        ..McpLimits::DEFAULT
    }
}

fn treat() -> Treat {
    Treat::ToolResult(CallInfo::default())
}

fn error_line(id: &str) -> Vec<u8> {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32700,\"message\":\
         \"resultbudget: the message was not valid JSON and was not forwarded\"}}}}"
    )
    .into_bytes()
}

/// The line written for one that is valid JSON but not one message object.
fn not_one_message_line() -> Vec<u8> {
    b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":\
      \"resultbudget: a line that is not one JSON-RPC message object (a batch, or a bare value) \
      is not forwarded\"}}"
        .to_vec()
}

/// Valid JSON that is not one answer the projector can hold to its budget:
/// a batch and a bare value (not one object), and answers with a top-level
/// member twice (a reader keeps the last; each `result` is budgeted alone).
fn not_one_answer() -> Vec<Vec<u8>> {
    let text = "0123456789abcdef".repeat(1_000);
    let result = format!("{{\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}}");
    vec![
        format!("[{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{result}}}]").into_bytes(),
        b" 42".to_vec(),
        b"[{\"jsonrpc\":\"2.0\",\"id\":1},".to_vec(),
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":2{}}}",
            format!(",\"result\":{result}").repeat(6)
        )
        .into_bytes(),
        b"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{},\"id\":4}".to_vec(),
        b"{\"jsonrpc\":\"2.0\",\"id\":5,\"error\":{\"code\":1,\"message\":\"a\"},\"error\":{}}"
            .to_vec(),
        format!("{{\"jsonrpc\":\"2.0\",\"id\":6,\"error\":{{\"code\":1,\"message\":\"{text}\"}},\"result\":{result}}}")
            .into_bytes(),
    ]
}

/// Every line of the `.jsonl` captures, then lines the captures lack.
fn lines() -> Vec<Vec<u8>> {
    let mut files: Vec<_> = std::fs::read_dir(CAPTURES)
        .expect("shared/captures")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let mut lines: Vec<Vec<u8>> = Vec::new();
    for f in &files {
        let bytes = std::fs::read(f).expect("capture");
        lines.extend(
            bytes
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .map(<[u8]>::to_vec),
        );
    }
    assert!(lines.len() >= 80, "captures found: {}", lines.len());
    lines.extend(not_one_answer());
    let big_text = "0123456789abcdef\\n".repeat(12_000);
    lines.extend([
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":77,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{big_text}\"}}]}}}}"
        )
        .into_bytes(),
        // Broken after its id, and before it.
        b"{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"result\":{\"content\":[tru]}}".to_vec(),
        b"{\"result\":{\"content\":[]},,\"id\":5}".to_vec(),
        b"   \t".to_vec(),
        Vec::new(),
        b"{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{\"content\":[],\"extra\":[1,2,3]}}\r".to_vec(),
        // The last line, written without its newline.
        b"{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"end\"}]}}"
            .to_vec(),
    ]);
    lines
}

fn stream(lines: &[Vec<u8>]) -> Vec<u8> {
    lines.join(&b'\n')
}

/// What one line must become: the slow, obvious twin of the writers.
fn expected_line(p: &mut Projector, line: &[u8]) -> Option<Vec<u8>> {
    let first = line.iter().find(|b| !matches!(b, b' ' | b'\t' | b'\r'))?;
    p.begin(treat());
    let mut out = Vec::new();
    let ok = p.feed(line, &mut out).is_ok() && p.repeated().is_none() && p.finish(&mut out).is_ok();
    if !ok {
        let id = p.id().map_or("null".to_string(), |i| {
            String::from_utf8(i.to_vec()).expect("id")
        });
        out = error_line(&id);
    } else if *first != b'{' {
        out = not_one_message_line();
    }
    out.push(b'\n');
    Some(out)
}

fn expected(lines: &[Vec<u8>]) -> Vec<u8> {
    let mut p = Projector::new(limits()).expect("limits");
    let mut all = Vec::new();
    for line in lines {
        if let Some(out) = expected_line(&mut p, line) {
            all.extend_from_slice(&out);
        }
    }
    all
}

#[test]
fn the_twin_is_what_the_contract_says() {
    let lines = lines();
    let want = expected(&lines);
    let out: Vec<&[u8]> = want.split(|&b| b == b'\n').collect();
    // One line out per line in that is not blank, plus the empty tail.
    let blank = lines
        .iter()
        .filter(|l| l.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')))
        .count();
    assert_eq!(blank, 2);
    assert_eq!(out.len(), lines.len() - blank + 1);
    assert_eq!(out.last(), Some(&&b""[..]));
    let mut results = 0;
    for l in &out[..out.len() - 1] {
        let v: serde_json::Value = serde_json::from_slice(l).expect("every line out is JSON");
        // Tool results are budgeted; other messages pass.
        let r = &v["result"];
        if r.get("content").is_some() || r.get("structuredContent").is_some() {
            assert!(l.len() <= 4096, "over the budget: {} bytes", l.len());
            results += 1;
        }
    }
    assert!(results > 20, "tool results: {results}");
    let n = out.len();
    let text = |l: &[u8]| String::from_utf8_lossy(l).into_owned();
    assert_eq!(text(out[n - 5]), text(&error_line("\"abc\"")));
    assert_eq!(text(out[n - 4]), text(&error_line("null")));
    // The big result is cut and says so; the `\r` line loses its extra field.
    let big: serde_json::Value = serde_json::from_slice(out[n - 6]).expect("json");
    assert_eq!(big["id"], 77);
    assert_eq!(
        big["result"]["_meta"]["resultbudget/truncation"]["truncated"],
        true
    );
    let cr: serde_json::Value = serde_json::from_slice(out[n - 3]).expect("json");
    assert!(cr["result"].get("extra").is_none());
    assert_eq!(
        out[n - 2],
        &b"{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"end\"}]}}"[..]
    );
}

fn write_all_split(w: &mut impl Write, input: &[u8], cuts: &[usize]) {
    let mut last = 0;
    for &c in cuts.iter().chain(std::iter::once(&input.len())) {
        w.write_all(&input[last..c]).expect("write");
        last = c;
    }
}

#[test]
fn writer_gives_the_same_bytes_for_any_split() {
    let lines = lines();
    let input = stream(&lines);
    let want = expected(&lines);
    let mut rng = Rng(0x5eed_0001);
    for round in 0..60 {
        let max = [7, 300, 4096, 70_000][round % 4];
        let cuts = random_cuts(&mut rng, input.len(), max);
        let mut w = ProjectWriter::new(Vec::new(), limits(), treat()).expect("limits");
        write_all_split(&mut w, &input, &cuts);
        let got = w.finish().expect("finish");
        assert!(got == want, "round {round}: output differs");
    }
    let mut w = ProjectWriter::new(Vec::new(), limits(), treat()).expect("limits");
    for b in input.chunks(1) {
        w.write_all(b).expect("write");
    }
    assert!(w.finish().expect("finish") == want, "1-byte writes differ");
}

/// An inner writer that takes at most `cap` bytes a call and fails every
/// `every`-th call with `kind`; or, once `broken_after` calls are made, with
/// `BrokenPipe` for good.
struct Flaky {
    got: Vec<u8>,
    cap: usize,
    every: usize,
    kind: io::ErrorKind,
    calls: usize,
    refused: usize,
    broken_after: usize,
}

impl Flaky {
    fn new(cap: usize, every: usize, kind: io::ErrorKind) -> Flaky {
        Flaky {
            got: Vec::new(),
            cap,
            every,
            kind,
            calls: 0,
            refused: 0,
            broken_after: usize::MAX,
        }
    }
}

impl Write for Flaky {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.calls > self.broken_after {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        if self.calls.is_multiple_of(self.every) {
            self.refused += 1;
            return Err(self.kind.into());
        }
        let n = buf.len().min(self.cap);
        self.got.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Write `input` as a caller of a non-blocking writer does: a `WouldBlock`
/// took nothing, so the same bytes are offered again.
fn write_retrying(w: &mut ProjectWriter<Flaky>, input: &[u8], cuts: &[usize]) {
    // A writer that took bytes from a failed call would have the caller
    // offer them again and again; stop that with a failure, not a hang.
    let mut refusals_left = 4 * input.len() + 1024;
    let mut refused = || {
        refusals_left = refusals_left
            .checked_sub(1)
            .expect("no progress: a refused call took bytes");
    };
    let mut last = 0;
    for &c in cuts.iter().chain(std::iter::once(&input.len())) {
        let mut rest = &input[last..c];
        while !rest.is_empty() {
            match w.write(rest) {
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => refused(),
                Err(e) => panic!("write: {e}"),
            }
        }
        last = c;
    }
    loop {
        match w.close() {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => refused(),
            Err(e) => panic!("close: {e}"),
        }
    }
}

#[test]
fn writer_takes_nothing_from_a_call_whose_inner_write_failed() {
    let lines = lines();
    let input = stream(&lines);
    let want = expected(&lines);
    let mut rng = Rng(0x5eed_0002);
    for (round, (cap, every)) in [(1, 2), (7, 3), (100, 2), (5000, 4), (1 << 20, 2)]
        .into_iter()
        .enumerate()
    {
        let cuts = random_cuts(&mut rng, input.len(), [5, 900, 70_000][round % 3]);
        let inner = Flaky::new(cap, every, io::ErrorKind::WouldBlock);
        let mut w = ProjectWriter::new(inner, limits(), treat()).expect("limits");
        write_retrying(&mut w, &input, &cuts);
        let inner = w.finish().expect("finish");
        assert!(
            inner.refused > 0,
            "round {round}: the inner writer never refused"
        );
        let got = inner.got;
        assert!(
            got == want,
            "round {round} (cap {cap}, every {every}): output differs"
        );
    }
    // `Interrupted` is retried inside, never seen by the caller.
    let mut w = ProjectWriter::new(
        Flaky::new(3, 2, io::ErrorKind::Interrupted),
        limits(),
        treat(),
    )
    .expect("limits");
    w.write_all(&input).expect("write");
    let inner = w.finish().expect("finish");
    assert!(inner.refused > 0);
    assert!(inner.got == want);
}

#[test]
fn writer_reports_a_broken_inner_writer() {
    let input = stream(&lines());
    let mut inner = Flaky::new(64, usize::MAX, io::ErrorKind::Other);
    inner.broken_after = 5;
    let mut w = ProjectWriter::new(inner, limits(), treat()).expect("limits");
    let mut err = None;
    for piece in input.chunks(1000) {
        if let Err(e) = w.write_all(piece) {
            err = Some(e);
            break;
        }
    }
    let err = err.or_else(|| w.flush().err()).expect("an error");
    assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    assert_eq!(
        w.close().expect_err("still broken").kind(),
        io::ErrorKind::BrokenPipe
    );
}

/// A `Vec` the test can read while the writer owns the other handle.
#[derive(Clone, Default)]
struct Shared(Rc<RefCell<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsyncWrite for Shared {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.0.borrow_mut().extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
}

#[test]
fn finished_lines_reach_the_inner_writer_without_a_flush() {
    let lines = lines();
    let mut p = Projector::new(limits()).expect("limits");
    let first = expected_line(&mut p, &lines[0]).expect("not blank");
    let second = expected_line(&mut p, &lines[1]).expect("not blank");
    let mut input = lines[0].clone();
    input.push(b'\n');
    input.extend_from_slice(&lines[1][..lines[1].len() / 2]);

    let sink = Shared::default();
    let mut w = ProjectWriter::new(sink.clone(), limits(), treat()).expect("limits");
    w.write_all(&input).expect("write");
    assert!(
        *sink.0.borrow() == first,
        "sync: the first line, and only it"
    );
    w.write_all(&lines[1][lines[1].len() / 2..]).expect("write");
    w.write_all(b"\n").expect("write");
    assert!(*sink.0.borrow() == [first.clone(), second.clone()].concat());

    let sink = Shared::default();
    runtime().block_on(async {
        let mut w = AsyncProjectWriter::new(sink.clone(), limits(), treat()).expect("limits");
        w.write_all(&input).await.expect("write");
        assert!(
            *sink.0.borrow() == first,
            "async: the first line, and only it"
        );
    });
}

/// An `AsyncWrite` that takes at most `cap` bytes a poll and answers every
/// other poll `Pending` (waking its task at once).
struct Slow {
    got: Vec<u8>,
    cap: usize,
    polls: usize,
}

impl AsyncWrite for Slow {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.polls += 1;
        if self.polls.is_multiple_of(2) {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let n = buf.len().min(self.cap);
        self.got.extend_from_slice(&buf[..n]);
        Poll::Ready(Ok(n))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[test]
fn async_writer_gives_the_same_bytes_for_any_split_and_a_slow_inner_writer() {
    let lines = lines();
    let input = stream(&lines);
    let want = expected(&lines);
    let mut rng = Rng(0x5eed_0003);
    let rt = runtime();
    for (round, cap) in [1, 9, 500, 1 << 20].into_iter().enumerate() {
        let cuts = random_cuts(&mut rng, input.len(), [5, 900, 70_000, 4096][round]);
        let got = rt.block_on(async {
            let inner = Slow {
                got: Vec::new(),
                cap,
                polls: 0,
            };
            let mut w = AsyncProjectWriter::new(inner, limits(), treat()).expect("limits");
            let mut last = 0;
            for &c in cuts.iter().chain(std::iter::once(&input.len())) {
                w.write_all(&input[last..c]).await.expect("write");
                last = c;
            }
            w.shutdown().await.expect("shutdown");
            let inner = w.into_inner();
            assert!(
                inner.polls > 2,
                "round {round}: the inner writer was hardly used"
            );
            inner.got
        });
        assert!(got == want, "round {round} (cap {cap}): output differs");
    }
}

#[test]
fn async_writer_reports_an_inner_writer_that_takes_nothing() {
    struct Zero;
    impl AsyncWrite for Zero {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &[u8],
        ) -> Poll<io::Result<usize>> {
            Poll::Ready(Ok(0))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }
    let line = stream(&lines()[..3]);
    runtime().block_on(async {
        let mut w = AsyncProjectWriter::new(Zero, limits(), treat()).expect("limits");
        // The lines are taken; the inner writer's refusal comes back next.
        w.write_all(&line).await.expect("taken");
        let err = w.flush().await.expect_err("nothing was written");
        assert_eq!(err.kind(), io::ErrorKind::WriteZero);
    });
}

#[test]
fn encoder_writes_what_the_writers_write_for_each_line() {
    let lines = lines();
    let mut p = Projector::new(limits()).expect("limits");
    let mut enc = McpEncoder::new(limits(), treat()).expect("limits");
    let mut encoded = 0;
    for (i, line) in lines.iter().enumerate() {
        let want = expected_line(&mut p, line).unwrap_or_default();
        let mut dst = BytesMut::from(&b"before;"[..]);
        enc.encode(&line[..], &mut dst).expect("encode");
        assert!(dst[7..] == want[..], "line {i}");
        // With the frame's newline on the item: the same.
        let mut framed = line.clone();
        framed.push(b'\n');
        let mut dst = BytesMut::new();
        enc.encode(framed, &mut dst).expect("encode");
        assert!(dst[..] == want[..], "line {i} with its newline");
        encoded += usize::from(!want.is_empty());
    }
    assert_eq!(encoded, lines.len() - 2);
}

#[test]
fn encoder_refuses_a_message_a_newline_would_split() {
    let mut enc = McpEncoder::new(limits(), treat()).expect("limits");
    let mut dst = BytesMut::from(&b"kept"[..]);
    for item in [
        &b"{\"jsonrpc\":\"2.0\",\n\"id\":1,\"result\":{}}"[..],
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
        b"\n{}",
    ] {
        let err = enc.encode(item, &mut dst).expect_err("refused");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("newline"), "{err}");
        assert_eq!(&dst[..], b"kept");
    }
    // And goes on with the next message.
    enc.encode(
        &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"[..],
        &mut dst,
    )
    .expect("encode");
    assert_eq!(
        &dst[..],
        b"kept{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"
    );
}

#[test]
fn records_of_cut_lines_are_kept_on_request() {
    let lines = lines();
    let mut w = ProjectWriter::new(Vec::new(), limits(), treat()).expect("limits");
    w.keep_records(true);
    w.write_all(&stream(&lines)).expect("write");
    let out = w.finish().expect("finish");
    // As many records as lines that carry one.
    let carried = out
        .split(|&b| b == b'\n')
        .filter(|l| {
            serde_json::from_slice::<serde_json::Value>(l)
                .is_ok_and(|v| v["result"]["_meta"]["resultbudget/truncation"]["truncated"] == true)
        })
        .count();
    assert!(carried >= 2, "cut lines: {carried}");
    let mut w = ProjectWriter::new(Vec::new(), limits(), treat()).expect("limits");
    w.keep_records(true);
    w.write_all(&stream(&lines)).expect("write");
    let recs = w.take_records();
    assert_eq!(recs.len(), carried);
    assert!(recs.iter().all(|r| r.truncated()));
    assert!(w.take_records().is_empty());
    runtime().block_on(async {
        let mut w = AsyncProjectWriter::new(Vec::new(), limits(), treat()).expect("limits");
        w.keep_records(true);
        w.write_all(&stream(&lines)).await.expect("write");
        let async_recs = w.take_records();
        assert!(async_recs
            .iter()
            .map(|r| r.to_json())
            .eq(recs.iter().map(|r| r.to_json())));
    });
}

/// `set_next_treat` applies to the next line that starts, and only to it;
/// the encoder's `set_treat` to every item after it.
#[test]
fn a_treat_set_for_the_next_line_applies_to_it_alone() {
    let line = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[],\"extra\":1}}";
    let mut p = Projector::new(limits()).expect("limits");
    let as_tool = expected_line(&mut p, line).expect("not blank");
    assert!(
        !as_tool.windows(7).any(|w| w == b"\"extra\""),
        "a tool result drops it"
    );
    let passed = [&line[..], b"\n"].concat();
    let want = [passed.clone(), as_tool.clone()].concat();
    let input = [&passed[..], &passed[..]].concat();

    let mut w = ProjectWriter::new(Vec::new(), limits(), treat()).expect("limits");
    w.set_next_treat(Treat::Pass);
    w.write_all(&input).expect("write");
    assert!(w.finish().expect("finish") == want);
    // Set inside a line: for the line after it.
    let mut w = ProjectWriter::new(Vec::new(), limits(), treat()).expect("limits");
    w.write_all(&input[..10]).expect("write");
    w.set_next_treat(Treat::Pass);
    w.write_all(&input[10..]).expect("write");
    w.write_all(&passed).expect("write");
    let got = w.finish().expect("finish");
    assert!(got == [as_tool.clone(), passed.clone(), as_tool.clone()].concat());

    let got = runtime().block_on(async {
        let mut w = AsyncProjectWriter::new(Vec::new(), limits(), treat()).expect("limits");
        w.set_next_treat(Treat::Pass);
        w.write_all(&input).await.expect("write");
        w.flush().await.expect("flush");
        w.into_inner()
    });
    assert!(got == want);

    let mut enc = McpEncoder::new(limits(), treat()).expect("limits");
    let mut dst = BytesMut::new();
    enc.set_treat(Treat::Pass);
    enc.encode(&line[..], &mut dst).expect("encode");
    enc.encode(&line[..], &mut dst).expect("encode");
    enc.set_treat(treat());
    enc.encode(&line[..], &mut dst).expect("encode");
    assert!(dst[..] == [passed.clone(), passed, as_tool].concat()[..]);
}

/// A batch, a bare value, or an answer with a top-level member twice is not
/// one answer the budget can hold: each writer puts the error line in its
/// place, and never more than the budget. Earlier builds passed a batch whole
/// (100,076 bytes of a 100 KB result through a 4 KiB budget) and budgeted
/// each repeated `result` on its own (20 of them wrote 54,130 bytes).
#[test]
fn a_line_that_is_not_one_answer_is_replaced_by_every_writer() {
    let big = "x".repeat(100_000);
    let result = format!("{{\"content\":[{{\"type\":\"text\",\"text\":\"{big}\"}}]}}");
    let cases = [
        (
            format!("[{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{result}}}]"),
            not_one_message_line(),
        ),
        ("\t\"just a string\"".to_string(), not_one_message_line()),
        ("[1,2,".to_string(), error_line("null")),
        (
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":1{}}}",
                format!(",\"result\":{result}").repeat(20)
            ),
            error_line("1"),
        ),
        (
            format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"id\":8,\"result\":{result}}}"),
            error_line("8"),
        ),
        (
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{result},\"error\":{{\"code\":1,\"message\":\"{big}\"}}}}"
            ),
            error_line("9"),
        ),
    ];
    for (line, want) in cases {
        let want = [&want[..], b"\n"].concat();
        let framed = [line.as_bytes(), b"\n"].concat();
        let mut w = ProjectWriter::new(Vec::new(), limits(), treat()).expect("limits");
        for piece in framed.chunks(997) {
            w.write_all(piece).expect("write");
        }
        let got = w.finish().expect("finish");
        assert!(got == want, "writer: {}", String::from_utf8_lossy(&got));
        let got = runtime().block_on(async {
            let mut w = AsyncProjectWriter::new(Vec::new(), limits(), treat()).expect("limits");
            w.write_all(&framed).await.expect("write");
            w.shutdown().await.expect("shutdown");
            w.into_inner()
        });
        assert!(
            got == want,
            "async writer: {}",
            String::from_utf8_lossy(&got)
        );
        let mut enc = McpEncoder::new(limits(), treat()).expect("limits");
        let mut dst = BytesMut::new();
        enc.encode(line.as_bytes(), &mut dst).expect("encode");
        assert!(
            dst[..] == want[..],
            "encoder: {}",
            String::from_utf8_lossy(&dst)
        );
    }
}

/// A line without a byte ceiling (here `Treat::Pass`) is held only up to the
/// hold, then streams on: a writer in front of a 3 MB pass-through message
/// holds about 1 MiB of it, not all of it (earlier builds held every line
/// whole). A line that breaks after it streamed is ended, and the error line
/// follows, as `filter` does; the next line is untouched. However the writes
/// split the input.
#[test]
fn a_line_without_a_ceiling_streams_on_past_the_hold() {
    const HOLD: usize = 1 << 20;
    let text = "0123456789abcdef".repeat(3 << 16);
    let long = format!(
        r#"{{"jsonrpc":"2.0","id":40,"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#
    );
    let broken = long
        .replace("\"id\":40", "\"id\":41")
        .replace("]}}", "],tru}}");
    let next = r#"{"jsonrpc":"2.0","id":42,"result":{"content":[]}}"#;
    let input = format!("{long}\n{broken}\n{next}\n").into_bytes();
    let check = |got: &[u8], how: &str| {
        let out: Vec<&[u8]> = got.split(|&b| b == b'\n').collect();
        assert_eq!(out.len(), 5, "{how}");
        assert!(
            out[0] == long.as_bytes(),
            "{how}: the long line passes whole"
        );
        assert!(
            out[1].len() > HOLD,
            "{how}: {} bytes streamed",
            out[1].len()
        );
        assert!(broken.as_bytes().starts_with(out[1]), "{how}");
        assert!(out[1].len() < broken.len(), "{how}");
        assert_eq!(out[2], &error_line("41")[..], "{how}");
        assert_eq!(out[3], next.as_bytes(), "{how}");
        assert!(out[4].is_empty(), "{how}");
    };
    let mut rng = Rng(0x5eed_0007);
    for round in 0..6 {
        let cuts = random_cuts(&mut rng, input.len(), [1000, 70_000, 1 << 20][round % 3]);
        let sink = Shared::default();
        let mut w = ProjectWriter::new(sink.clone(), limits(), Treat::Pass).expect("limits");
        w.set_max_hold(HOLD);
        let mut last = 0;
        for &c in cuts.iter().chain(std::iter::once(&input.len())) {
            w.write_all(&input[last..c]).expect("write");
            // What is held is at most the hold and the piece just written.
            let held = c - sink.0.borrow().len().min(c);
            assert!(
                held <= HOLD + (c - last) + 64,
                "round {round}: {held} bytes held"
            );
            last = c;
        }
        w.finish().expect("finish");
        check(&sink.0.borrow(), &format!("writer, round {round}"));
    }
    let got = runtime().block_on(async {
        let mut w = AsyncProjectWriter::new(Vec::new(), limits(), Treat::Pass).expect("limits");
        w.set_max_hold(HOLD);
        for piece in input.chunks(65_536) {
            w.write_all(piece).await.expect("write");
        }
        w.shutdown().await.expect("shutdown");
        w.into_inner()
    });
    check(&got, "async writer");
    // The encoder holds an item's output to its end: the broken one is
    // replaced whole.
    let mut enc = McpEncoder::new(limits(), Treat::Pass).expect("limits");
    let mut dst = BytesMut::new();
    enc.encode(broken.as_bytes(), &mut dst).expect("encode");
    assert!(dst[..] == [&error_line("41")[..], b"\n"].concat()[..]);
}
