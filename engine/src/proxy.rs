//! `resultbudget proxy -- <server command>`: a stdio MCP proxy that budgets
//! every `tools/call` (and `tasks/result`) response on its way to the client.
//!
//! Two threads relay newline-delimited JSON-RPC: client→server (the guard
//! walks each request once, reading its method, id and tool name as it
//! measures a call; requests are registered as pending before their newline
//! reaches the server) and server→client (responses are projected; the
//! budget is picked from the pending requests). The server's stderr is inherited.
//! See `docs/proxy.md` for the behaviour in detail. The decisions are made by
//! [`Calls`] (what one session knows, shared by both directions) and
//! [`AnswerRelay`] (the server's side), fed bytes and doing no I/O;
//! [`Session`] drives them as the two relays over streams the caller owns,
//! and [`run`] is a session around a child process, on stdin and stdout.

use crate::framing::{self, LineReader, Piece};
use crate::gate::{Fate, Why};
use crate::guard::Guard;
use crate::inventory::Inventory;
use crate::mcp::McpLimits;
use crate::session::{lock, Shared};
pub use crate::session::{AnswerRelay, Calls, ServerEnd, ToolFacts};
use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Log verbosity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
}

/// Proxy settings.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    pub limits: McpLimits,
    pub inventory: Option<Inventory>,
    pub guard: Guard,
    pub log_level: LogLevel,
    /// Bytes of a response read ahead to find its id when several calls with
    /// different budgets are pending (the TypeScript SDK writes the id last).
    pub lookahead: usize,
    /// Output of a pass-through line held before it is streamed on (a held line
    /// can still be replaced by an error if it turns out broken).
    pub max_hold: usize,
    /// How long the server may take to exit after the client's stdin ends
    /// ([`run`] only: a [`Session`] starts and ends no process).
    pub grace: Duration,
    /// Read a surrogate escape outside a pair (`"\\ud83d"`) as a character
    /// (U+FFFD, 3 bytes) in both directions, as the SDKs' `JSON.parse` and
    /// Python's `json` do, instead of taking the line for malformed. On by
    /// default: a JavaScript peer writes one for a string cut inside a pair.
    pub lone_surrogates: bool,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            limits: McpLimits::DEFAULT,
            inventory: None,
            guard: Guard::default(),
            log_level: LogLevel::Warn,
            lookahead: 1024 * 1024,
            max_hold: crate::transport::MAX_HOLD,
            grace: Duration::from_secs(2),
            lone_surrogates: true,
        }
    }
}

/// How long a `tools/call` waits for the proxy's own `tools/list` before it is forwarded.
const TOOLS_WAIT: Duration = Duration::from_secs(3);

/// The proxy's two relays over byte streams the caller owns: a server it
/// started itself (in its own sandbox, with its own environment), a socket, a
/// pipe. Each stream carries newline-delimited JSON-RPC, as MCP's stdio
/// transport does; what crosses is decided as by `resultbudget proxy`
/// (`docs/proxy.md`), since the proxy runs this same type.
///
/// One `Session` is one MCP session ([`Calls`]): it answers a tool result
/// from the requests in flight, whichever way round the server writes its
/// `id`, and before the first `tools/call` it asks the server for its tools
/// (every page) unless [`Session::set_known_tools`] told it.
///
/// The two relays must run at the same time, one thread each (they are
/// `&self`; a `Session` is `Send` and `Sync`). The client's relay holds the
/// first `tools/call` until the server's relay has read the answer to the
/// session's own `tools/list`, for at most 3 s.
///
/// Bounds: what the proxy holds ([`ProxyConfig::lookahead`],
/// [`ProxyConfig::max_hold`], the guard's caps) and what [`Calls`] bounds.
pub struct Session {
    calls: Calls,
    /// What the client reads; both relays write to it.
    client_out: Mutex<ClientOut>,
    /// Signalled when the server's relay ends a line it streamed.
    line_ended: Condvar,
}

/// What the client reads, and the lines of the client's relay (answers to
/// lines it refused) held while the server's relay is inside a line it
/// streams: written there, they would break that line and be lost in it.
struct ClientOut {
    w: Box<dyn Write + Send>,
    /// The server's relay wrote part of a line and not its end.
    mid_line: bool,
    /// The client relay's lines waiting for that line's end (at most
    /// [`HELD_REPLIES`] bytes; past that the client's relay waits).
    held: Vec<u8>,
}

/// The most bytes of the client relay's own lines held while the server's
/// relay streams a line. Protects: memory, against a client that sends
/// refused calls while a long line streams on (its relay then waits for the
/// line's end). Does not bound: how long that wait is.
const HELD_REPLIES: usize = 1 << 20;

impl Session {
    /// A session that writes what the client reads (answers, the server's
    /// requests and notifications, errors for refused calls) to `to_client`.
    pub fn new(cfg: ProxyConfig, to_client: impl Write + Send + 'static) -> Session {
        Session {
            calls: Calls::new(cfg),
            client_out: Mutex::new(ClientOut {
                w: Box::new(to_client),
                mid_line: false,
                held: Vec::new(),
            }),
            line_ended: Condvar::new(),
        }
    }

    /// See [`Calls::set_log`].
    pub fn set_log(&self, log: impl Fn(LogLevel, &str) + Send + Sync + 'static) {
        self.calls.set_log(log);
    }

    /// See [`Calls::set_known_tools`].
    pub fn set_known_tools<'a>(&self, tools: impl IntoIterator<Item = (&'a str, ToolFacts)>) {
        self.calls.set_known_tools(tools);
    }

    /// Relay the client's lines to `to_server` until `from_client` ends:
    /// each request is guarded and noted as in flight before its newline is
    /// written; a refused one is answered on the client's side instead.
    /// `to_server` is dropped on return (for a pipe: the server reads its end).
    pub fn relay_client(&self, from_client: impl Read, to_server: impl Write) {
        relay_client(self, from_client, to_server);
    }

    /// Relay the server's lines to the client until `from_server` ends (or
    /// fails to read): each answer budgeted by the request it answers. Then
    /// every request still in flight is answered with an error, since none
    /// can come now.
    pub fn relay_server(&self, mut from_server: impl Read) -> ServerEnd {
        let mut answers = match self.calls.answers() {
            Ok(a) => a,
            Err(e) => {
                self.shared().log(LogLevel::Error, &e);
                return ServerEnd::default();
            }
        };
        let mut buf = vec![0u8; framing::READ_BUF];
        let mut out: Vec<u8> = Vec::with_capacity(256 * 1024);
        loop {
            let n = match from_server.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.shared()
                        .log(LogLevel::Error, &format!("reading the server: {e}"));
                    break;
                }
            };
            let mut rest = buf.get(..n).unwrap_or(&[]);
            // Whole lines go out together while more of this read waits,
            // up to `OUT_BATCH`; whatever is finished goes once the read is
            // used up, so a lone answer waits for nothing.
            while !rest.is_empty() {
                let k = answers.feed_until(rest, &mut out, OUT_BATCH);
                rest = rest.get(k..).unwrap_or(&[]);
                if !out.is_empty() && (rest.is_empty() || out.len() >= OUT_BATCH) {
                    let _ = self.send_from_server(&out, answers.mid_line());
                    out.clear();
                }
            }
        }
        let end = answers.finish(&mut out);
        // (`finish` ends a line that streamed: nothing waits after this.)
        let _ = self.send_from_server(&out, false);
        end
    }

    fn shared(&self) -> &Shared {
        &self.calls.0
    }

    /// The server relay's bytes for the client; `mid_line`: they end inside
    /// a line. At a line's end, the client relay's lines held meanwhile go
    /// after it.
    fn send_from_server(&self, bytes: &[u8], mid_line: bool) -> std::io::Result<()> {
        let mut guard = lock(&self.client_out);
        let out = &mut *guard;
        out.mid_line = mid_line;
        let mut r = out.w.write_all(bytes);
        if !mid_line && !out.held.is_empty() {
            r = r.and_then(|()| out.w.write_all(&out.held));
            // (Its room kept for the next time.)
            out.held.clear();
        }
        if !mid_line {
            self.line_ended.notify_all();
        }
        r.and_then(|()| out.w.flush())
    }

    /// A line of the client relay's own (an answer to a line it refused):
    /// written now, or after the line the server's relay is streaming.
    fn send_client(&self, line: &[u8]) -> std::io::Result<()> {
        let mut out = lock(&self.client_out);
        while out.mid_line && out.held.len() + line.len() > HELD_REPLIES {
            out = match self.line_ended.wait(out) {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
        }
        if out.mid_line {
            out.held.extend_from_slice(line);
            return Ok(());
        }
        out.w.write_all(line)?;
        out.w.flush()
    }
}

/// Run the proxy around `cmd`; returns the process exit code.
pub fn run(cfg: ProxyConfig, cmd: &[String]) -> u8 {
    let Some((prog, args)) = cmd.split_first() else {
        eprintln!("resultbudget: proxy needs a server command after --");
        return 2;
    };
    let mut child = match Command::new(prog)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("resultbudget: cannot start {prog}: {e}");
            return 2;
        }
    };
    let (Some(server_in), Some(server_out)) = (child.stdin.take(), child.stdout.take()) else {
        eprintln!("resultbudget: cannot open the server's pipes");
        return 2;
    };
    // Room for the server to write on while the proxy budgets (see `PIPE_BYTES`).
    framing::widen_pipe(&server_out);
    let session = Arc::new(Session::new(cfg, std::io::stdout()));
    let child = Arc::new(Mutex::new(child));
    // Set once the client's input has ended, before that side's grace: its
    // thread may still be ending the server when this side reads the flag,
    // so whether the thread has finished would depend on timing.
    let client_closed = Arc::new(AtomicBool::new(false));
    {
        let session = Arc::clone(&session);
        let child = Arc::clone(&child);
        let closed = Arc::clone(&client_closed);
        std::thread::spawn(move || {
            client_to_server(&session, std::io::stdin(), server_in, &child, &closed)
        });
    }
    let outcome = session.relay_server(server_out);
    // The server's stdout is closed: it is gone or going.
    let status = wait_or_end(&child, session.shared().cfg.grace, || {});
    let client_closed = client_closed.load(Ordering::Acquire);
    let clean = status.is_some_and(|s| s.success());
    if outcome.broken_line || (!client_closed && !clean) || outcome.orphaned > 0 {
        let why = if outcome.broken_line {
            "the server died in the middle of a response"
        } else if outcome.orphaned > 0 {
            "the server exited with requests unanswered"
        } else {
            "the server exited"
        };
        eprintln!(
            "resultbudget: {why} (exit status {}); {} pending request(s) answered with an error",
            status.map_or_else(|| "unknown".to_string(), |s| s.to_string()),
            outcome.orphaned
        );
        return 1;
    }
    if !clean {
        eprintln!(
            "resultbudget: the server exited with status {}",
            status.map_or_else(|| "unknown".to_string(), |s| s.to_string())
        );
        return 1;
    }
    0
}

/// Before the first `tools/call`, learn the tools' `outputSchema` and annotations
/// by asking the server itself (every page), so the typed-success rule holds
/// even for a client that never lists tools. Waits at most `TOOLS_WAIT` in all;
/// then, or once the server's input is gone, the tools count as known.
fn ensure_tools<W: Write>(shared: &Shared, to_server: &mut ToServer<W>, version: &[u8]) {
    if lock(&shared.tools_state).known {
        return;
    }
    let deadline = Instant::now() + TOOLS_WAIT;
    while let Some((id, line)) = shared.tools_request(version) {
        // After what came before it (`write` sends the batch first).
        to_server.write(&line);
        if to_server.pipe.is_none() {
            break;
        }
        let mut st = lock(&shared.tools_state);
        while st.asked.as_ref() == Some(&id) {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            st = match shared.tools_cv.wait_timeout(st, deadline - now) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        if st.asked.as_ref() == Some(&id) {
            drop(st);
            shared.log(
                LogLevel::Warn,
                "the server did not answer tools/list in time; typed tools may be cut",
            );
            break;
        }
    }
    shared.tools_given_up();
}

fn client_to_server<R: Read>(
    session: &Session,
    input: R,
    server_in: ChildStdin,
    child: &Mutex<Child>,
    closed: &AtomicBool,
) {
    // The server's stdin is closed when the relay returns.
    session.relay_client(input, server_in);
    closed.store(true, Ordering::Release);
    let shared = session.shared();
    // Client EOF: give the server a moment to exit, then end it.
    wait_or_end(child, shared.cfg.grace, || {
        shared.log(
            LogLevel::Warn,
            "the server did not exit after stdin closed; ending it",
        )
    });
}

/// Wait for the server to exit, up to `grace`, looking every 20 ms; past it,
/// call `before_end` and end it (should it not be waited for, end it
/// without). Its exit status, the one from its end if it was ended. Both of
/// the proxy's threads wait like this, one when the client's input ends, one
/// when the server's output does; whichever reaps the server, the other
/// reads the status the handle keeps.
fn wait_or_end(
    child: &Mutex<Child>,
    grace: Duration,
    before_end: impl FnOnce(),
) -> Option<ExitStatus> {
    let deadline = Instant::now() + grace;
    loop {
        let mut c = lock(child);
        match c.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => {
                drop(c);
                std::thread::sleep(Duration::from_millis(20));
            }
            waited => {
                // Past the grace (not a failed wait): say why it is ended.
                if waited.is_ok() {
                    before_end();
                }
                let _ = c.kill();
                return c.wait().ok();
            }
        }
    }
}

/// The client's lines to `server_in` until the client's input ends: guarded,
/// registered as pending, refused ones answered on the client's side.
fn relay_client<R: Read, W: Write>(session: &Session, input: R, server_in: W) {
    let shared = session.shared();
    let mut reader = LineReader::new(input);
    let mut to_server = ToServer {
        pipe: Some(server_in),
        batch: LineBatch::new(),
    };
    // What of each line goes on, and what the client is owed for one that
    // does not: the library's gate, so the proxy and a gateway built on the
    // library decide alike.
    let mut gate = session.calls.gate();
    loop {
        if !reader.buffered() {
            // Nothing more to read without waiting: what is batched goes now.
            to_server.flush();
        }
        let piece = match reader.next_piece() {
            Ok(p) => p,
            Err(e) => {
                shared.log(LogLevel::Error, &format!("reading the client: {e}"));
                break;
            }
        };
        match piece {
            Piece::Data(bytes) => {
                if let Some(n) = gate.feed(bytes, |b| to_server.write(b)) {
                    shared.log(LogLevel::Warn, n.message());
                }
            }
            Piece::End | Piece::Eof { partial: true } => {
                let end = matches!(piece, Piece::Eof { .. });
                match gate.end_line() {
                    Fate::Forward { clamped } => {
                        let tool = gate.tool();
                        if let Some(max) = clamped {
                            shared.log(
                                LogLevel::Info,
                                &format!("clamped the limit of {tool} to {max}"),
                            );
                        }
                        if gate.facts().is_call() {
                            ensure_tools(shared, &mut to_server, &gate.facts().version);
                        }
                        session.calls.note(gate.facts(), tool);
                        // The line and its newline in one write (see
                        // `gate::PASS_PIECE`), with the lines after it while
                        // more are read at once.
                        to_server.line(gate.to_send());
                    }
                    Fate::Dropped { why, reply } => {
                        // Part of it may have gone on: the newline that ends
                        // it, so the server reads one broken line and drops it.
                        if !gate.to_send().is_empty() {
                            to_server.line(gate.to_send());
                        }
                        let level = match why {
                            Why::Refused(_) => LogLevel::Info,
                            Why::NamedCallLate => LogLevel::Debug,
                            _ => LogLevel::Warn,
                        };
                        shared.log(level, &why.message(gate.tool()));
                        if let Some(line) = reply {
                            let _ = session.send_client(&line);
                        }
                    }
                }
                if end {
                    break;
                }
            }
            Piece::Eof { partial: false } => break,
        }
    }
    to_server.flush();
}

/// The server's stdin, with the whole request lines batched for it (as the
/// answers for the client are, see [`LineBatch`]): written when no more
/// input waits to be read, when the batch is full, and before anything
/// written on its own (a long line streamed on, the proxy's own
/// `tools/list`). `pipe` is `None` once a write failed.
struct ToServer<W> {
    pipe: Option<W>,
    batch: LineBatch,
}

impl<W: Write> ToServer<W> {
    /// A whole line, newline included, to go with the batch.
    fn line(&mut self, bytes: &[u8]) {
        let pipe = &mut self.pipe;
        self.batch.line(bytes, |b| write_pipe(pipe, b));
    }

    /// Bytes written at once, after the batch.
    fn write(&mut self, bytes: &[u8]) {
        self.flush();
        write_pipe(&mut self.pipe, bytes);
    }

    /// Write the batch.
    fn flush(&mut self) {
        let pipe = &mut self.pipe;
        self.batch.flush(|b| write_pipe(pipe, b));
    }
}

/// Write `bytes` to the server's stdin; forget the pipe once a write fails.
fn write_pipe<W: Write>(pipe: &mut Option<W>, bytes: &[u8]) {
    if let Some(si) = pipe.as_mut() {
        if si.write_all(bytes).and_then(|_| si.flush()).is_err() {
            *pipe = None;
        }
    }
}

/// The most whole lines are batched to, each way. While more input than one
/// line waits in the read buffer (many calls in flight), the lines the proxy
/// has finished go out together, one write for many, instead of one write
/// (and one wake-up of the reader) each; as soon as nothing more waits to be
/// read, whatever is batched is written, so a lone message waits for
/// nothing. 20 000 small calls written at once went through at about
/// 240 000 calls/s with a write a line, 425 000 with this, 447 000 with
/// 64 KiB (`docs/proxy.md`); the smaller batch keeps what the first call of
/// a burst waits for the rest of it to be read to a quarter.
const OUT_BATCH: usize = 16 << 10;

/// Whole lines gathered for one write to the server's stdin; never more
/// than [`OUT_BATCH`] bytes but for one longer line alone. (The client's
/// side gathers in the answer relay's output, `Session::relay_server`.)
struct LineBatch(Vec<u8>);

impl LineBatch {
    fn new() -> LineBatch {
        LineBatch(Vec::with_capacity(OUT_BATCH))
    }

    /// A whole line, newline included. One that would overflow the batch
    /// writes it first; one too long to batch is written through `write`
    /// from where it is, never copied.
    fn line(&mut self, bytes: &[u8], mut write: impl FnMut(&[u8])) {
        if self.0.len() + bytes.len() > OUT_BATCH {
            self.flush(&mut write);
        }
        if bytes.len() >= OUT_BATCH {
            write(bytes);
        } else {
            self.0.extend_from_slice(bytes);
        }
    }

    /// Write what is batched, if anything.
    fn flush(&mut self, mut write: impl FnMut(&[u8])) {
        if !self.0.is_empty() {
            write(&self.0);
            self.0.clear();
        }
    }
}

/// A writer whose bytes can be read back from another handle (a clone).
#[derive(Clone, Default)]
struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        lock(&self.0).extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// For fuzzing and tests: a reader that hands out `data` in reads of
/// `sizes` bytes in turn (at least one, at most what the caller's buffer
/// holds), as a pipe may split it.
#[doc(hidden)]
pub struct SplitReads<'a> {
    data: &'a [u8],
    sizes: &'a [usize],
    k: usize,
}

impl<'a> SplitReads<'a> {
    pub fn new(data: &'a [u8], sizes: &'a [usize]) -> SplitReads<'a> {
        SplitReads { data, sizes, k: 0 }
    }
}

impl Read for SplitReads<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = self.sizes.get(self.k % self.sizes.len().max(1)).copied();
        self.k += 1;
        let n = want
            .unwrap_or(usize::MAX)
            .max(1)
            .min(buf.len())
            .min(self.data.len());
        let (head, rest) = self.data.split_at(n);
        if let Some(dst) = buf.get_mut(..n) {
            dst.copy_from_slice(head);
        }
        self.data = rest;
        Ok(n)
    }
}

/// What one session through the proxy's relays gave: the bytes the server
/// read, the bytes the client read, and the server side's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionOutput {
    pub to_server: Vec<u8>,
    pub to_client: Vec<u8>,
    pub broken_line: bool,
    pub orphaned: usize,
}

/// For fuzzing and tests: one whole session through both relays, with no
/// child process and no threads. `tools` are known in advance (name, typed,
/// read-only), so the proxy sends no `tools/list` of its own. All of the
/// client's input is relayed first (calls registered, refused or forwarded),
/// then all of the server's output, then the server's exit (what is still
/// pending is answered). Each side is read as its reader hands it out, so a
/// reader that splits its bytes tests the relays' split independence.
#[doc(hidden)]
pub fn relay_session<C: Read, S: Read>(
    cfg: ProxyConfig,
    tools: &[(&str, bool, bool)],
    client: C,
    server: S,
) -> SessionOutput {
    let to_client = SharedBuf::default();
    let session = Session::new(cfg, to_client.clone());
    session.set_known_tools(
        tools
            .iter()
            .map(|&(name, typed, read_only)| (name, ToolFacts { typed, read_only })),
    );
    let to_server = SharedBuf::default();
    session.relay_client(client, to_server.clone());
    let o = session.relay_server(server);
    let to_server = std::mem::take(&mut *lock(&to_server.0));
    let to_client = std::mem::take(&mut *lock(&to_client.0));
    SessionOutput {
        to_server,
        to_client,
        broken_line: o.broken_line,
        orphaned: o.orphaned,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::PASS_PIECE;
    use crate::guard::ArgCaps;
    use crate::jsonrpc;
    use crate::mcp::Treat;
    use crate::session::*;

    /// The obvious form of [`pick_treat`]: every pending call's treatment
    /// built and compared whole.
    fn pick_treat_slow(shared: &Shared) -> Pick {
        let pending = lock(&shared.pending);
        let lists = pending
            .iter()
            .any(|(_, p)| matches!(p.method, Method::ToolsList | Method::ProxyToolsList));
        let tasks = pending.iter().any(|(_, p)| p.task);
        let mut treats: Vec<Treat> = Vec::new();
        let mut others = 0usize;
        let mut cancelled_calls = 0usize;
        for (id, p) in pending.iter() {
            match p.method {
                Method::ToolsCall(_) | Method::TasksResult(_) if p.cancelled => {
                    cancelled_calls += 1;
                }
                Method::ToolsCall(_) | Method::TasksResult(_) => {
                    let (_, mut t) = shared.treat_for(id, p, &mut Spare::default());
                    if let Treat::ToolResult(c) = &mut t {
                        c.request_id = None;
                    }
                    if !treats.contains(&t) {
                        treats.push(t);
                    }
                }
                _ => others += 1,
            }
        }
        let (treat, ambiguous) = match (treats.len(), others) {
            (0, _) => (Treat::Pass, cancelled_calls > 0),
            (1, 0) => (treats.pop().unwrap_or(Treat::Pass), false),
            _ => (Treat::Pass, true),
        };
        Pick {
            treat,
            ambiguous,
            lists,
            tasks,
        }
    }

    /// The counts of a [`PendingSet`] made again from its requests.
    fn recount(set: &PendingSet) -> PendingSet {
        let mut fresh = PendingSet::default();
        for (id, p) in set.iter() {
            fresh.insert(id.to_vec(), p.clone());
        }
        fresh
    }

    #[test]
    fn a_cancelled_call_does_not_decide_a_live_calls_treatment() {
        // A typed call the client cancelled, which the server never answers (as
        // the TypeScript SDK's servers do not), and an untyped call whose large
        // answer carries its id last, past the look-ahead.
        let out = SharedBuf::default();
        let cfg = ProxyConfig {
            lookahead: 1024,
            ..ProxyConfig::default()
        };
        let shared = Session::new(cfg, out.clone());
        lock(&shared.shared().tools).insert(
            "typed".into(),
            ToolFacts {
                typed: true,
                read_only: true,
            },
        );
        let call = |name: &str| Pending {
            method: Method::ToolsCall(name.into()),
            cancelled: false,
            modern: false,
            task: false,
        };
        lock(&shared.shared().pending).insert(b"1".to_vec(), call("typed"));
        lock(&shared.shared().pending).cancel(b"1");
        lock(&shared.shared().pending).insert(b"2".to_vec(), call("plain"));
        let text = "x".repeat(100_000);
        let line = format!(
            "{{\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}},\"jsonrpc\":\"2.0\",\"id\":2}}\n"
        );
        shared.relay_server(line.as_bytes());
        let got = lock(&out.0).clone();
        let v: serde_json::Value = serde_json::from_slice(&got).expect("one JSON line");
        let t = v["result"]["content"][0]["text"].as_str().unwrap_or("");
        // The untyped call's treatment: its text cut, not replaced by the typed error.
        assert!(t.starts_with("xxxx") && t.contains("bytes omitted"), "{v}");
        assert!(t.len() < 20_000, "{} bytes", t.len());
        // One line: at the server's end, the cancelled call gets no error.
        assert_eq!(got.iter().filter(|&&b| b == b'\n').count(), 1);
    }

    /// The client's lines after `server` is read with `pending` calls (ids)
    /// waiting, one parsed value per line.
    fn client_sees(pending: &[&[u8]], server: &str) -> Vec<serde_json::Value> {
        let calls: Vec<(&[u8], Method)> = pending
            .iter()
            .map(|id| (*id, call_method("plain")))
            .collect();
        answers_for(&calls, server)
    }

    /// What the client gets for `server`'s output while the given requests
    /// (raw id, method) wait; when the output ends, each request still
    /// pending gets its error, so those show what was never answered.
    fn answers_for(pending: &[(&[u8], Method)], server: &str) -> Vec<serde_json::Value> {
        answers_for_reads(pending, server, &[usize::MAX])
    }

    /// [`answers_for`], the server's output read in pieces of the given sizes
    /// (in turn).
    fn answers_for_reads(
        pending: &[(&[u8], Method)],
        server: &str,
        reads: &[usize],
    ) -> Vec<serde_json::Value> {
        let out = SharedBuf::default();
        let shared = Session::new(ProxyConfig::default(), out.clone());
        for (id, method) in pending {
            lock(&shared.shared().pending).insert(
                id.to_vec(),
                Pending {
                    method: method.clone(),
                    cancelled: false,
                    modern: false,
                    task: false,
                },
            );
        }
        shared.relay_server(SplitReads::new(server.as_bytes(), reads));
        let got = lock(&out.0).clone();
        got.split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap_or(serde_json::Value::Null))
            .collect()
    }

    fn call_method(tool: &str) -> Method {
        Method::ToolsCall(tool.into())
    }

    /// A text answer of `n` bytes for `id` (raw JSON).
    fn text_answer(id: &str, n: usize) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
            "x".repeat(n)
        )
    }

    #[test]
    fn an_answer_is_found_by_the_value_of_its_id() {
        // The client wrote the id one way, the server (which parsed it) writes
        // it another; a call and a `ping` wait, so the proxy reads ahead for
        // the id. Earlier builds compared the spellings, found nothing, and
        // passed the 100 000 bytes on whole.
        for (client, server) in [
            (r#""a\u0062""#, r#""ab""#),
            (r#""ab""#, r#""a\u0062""#),
            ("7.0", "7"),
            ("1e1", "10"),
            ("7", r#""7""#),
            (r#""7""#, "7"),
        ] {
            let got = answers_for(
                &[
                    (client.as_bytes(), call_method("plain")),
                    (b"99", Method::Other),
                ],
                &format!("{}\n", text_answer(server, 100_000)),
            );
            let what = format!("client {client}, server {server}");
            // The answer, cut; then, at the server's end, the ping's error
            // alone: the call was answered.
            assert_eq!(got.len(), 2, "{what}: {got:?}");
            let t = got[0]["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or("");
            assert!(t.len() <= 16 * 1024, "{what}: {} bytes", t.len());
            assert_eq!(got[1]["id"], 99, "{what}: {:?}", got[1]);
        }
    }

    #[test]
    fn an_answer_whose_id_names_no_request_gets_the_tightest_treatment() {
        // `"0x7"` names no request here, but the TypeScript client reads it
        // with `Number()` as its call 7: it is budgeted as the tightest
        // pending call's answer, never passed on whole.
        let got = answers_for(
            &[
                (b"7", call_method("plain")),
                (b"8", call_method("other")),
                (b"99", Method::Other),
            ],
            &format!("{}\n", text_answer(r#""0x7""#, 100_000)),
        );
        let t = got[0]["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("");
        assert!(t.len() <= 16 * 1024, "{} bytes", t.len());
        assert_eq!(
            got[0]["result"]["_meta"]["resultbudget/truncation"]["budget_kind"],
            "text_block_bytes"
        );
        // An answer to the ping by its own id still passes as it is.
        let ping = r#"{"jsonrpc":"2.0","id":99,"result":{"big":"yyyyyyyyyy"}}"#;
        let got = answers_for(
            &[(b"7", call_method("plain")), (b"99", Method::Other)],
            &format!("{ping}\n"),
        );
        assert_eq!(
            got[0],
            serde_json::from_str::<serde_json::Value>(ping).unwrap()
        );
    }

    #[test]
    fn an_answer_with_its_id_or_result_twice_is_dropped() {
        // A reader keeps the last of duplicate members. The first `id` names
        // the ping (its answer passes whole), the last the call: earlier builds
        // passed the call's 100 000 bytes on whole. And every `result` was cut
        // on its own, so a line of many grew with each.
        let text = "x".repeat(100_000);
        let twice_id = format!(
            r#"{{"jsonrpc":"2.0","id":99,"result":{{"content":[{{"type":"text","text":"{text}"}}]}},"id":7}}"#
        );
        let block = format!(r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#);
        let many = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{block},"result":{block},"result":{block}}}"#
        );
        let twice_error = r#"{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"a"},"error":{"code":2,"message":"b"}}"#;
        // A `result` and an `error` each got the whole ceiling.
        let both = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{block},"error":{{"code":1,"message":"{text}"}}}}"#
        );
        for line in [&twice_id, &many, &twice_error.to_string(), &both] {
            // However the reads split the line: the last `id`, which a reader
            // keeps, names the request answered (earlier builds answered the
            // first when a read ended before the second's value).
            for reads in [usize::MAX, 1, 7, 100_010, 100_078] {
                let got = answers_for_reads(
                    &[(b"7", call_method("plain")), (b"99", Method::Other)],
                    &format!("{line}\n"),
                    &[reads],
                );
                // The call gets an error in its place (the ping's comes when
                // the server's output ends).
                assert_eq!(got.len(), 2, "reads of {reads}: {got:?}");
                assert_eq!(got[0]["id"], 7, "reads of {reads}: {got:?}");
                assert_eq!(got[0]["error"]["code"], jsonrpc::INTERNAL_ERROR, "{got:?}");
                let msg = got[0]["error"]["message"].as_str().unwrap_or("");
                assert!(
                    msg.contains("comes twice") || msg.contains("both a `result` and an `error`"),
                    "{msg}"
                );
            }
        }
        // The same id twice is still twice.
        let got = answers_for(
            &[(b"7", call_method("plain"))],
            "{\"id\":7,\"id\":7,\"result\":{}}\n",
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0]["error"]["code"], jsonrpc::INTERNAL_ERROR, "{got:?}");
    }

    #[test]
    fn stray_output_from_the_server_does_not_fail_a_pending_call() {
        // A server that prints to stdout (a log line, a Python dict's repr)
        // while one call is in flight: the SDK clients skip such lines and the
        // call goes on to its answer, so the proxy drops them and answers nothing.
        let answer =
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"done"}]}}"#;
        let got = client_sees(
            &[b"7"],
            &format!("Starting work...\n{{'status': 'ok'}}\n[1, 2\n{answer}\n"),
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0]["id"], 7);
        assert_eq!(got[0]["result"]["content"][0]["text"], "done", "{got:?}");
    }

    #[test]
    fn a_broken_answer_fails_the_call_it_answers() {
        // An answer broken before its id: the only pending call gets the error.
        let got = client_sees(
            &[b"7"],
            "{\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ab\n",
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0]["id"], 7);
        assert_eq!(got[0]["error"]["code"], jsonrpc::INTERNAL_ERROR, "{got:?}");
        // An error broken before its id, likewise.
        let got = client_sees(&[b"7"], "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-1,\n");
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0]["id"], 7, "{got:?}");
        // With its id read, the call it names gets the error, whatever else waits.
        let got = client_sees(
            &[b"7", b"8"],
            "{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{\"content\":tru\n",
        );
        // (At the server's end, the call still waiting gets its own error.)
        let malformed = |v: &serde_json::Value| {
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("malformed response"))
        };
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0]["id"], 8, "{got:?}");
        assert!(malformed(&got[0]), "{got:?}");
        assert_eq!(got[1]["id"], 7, "{got:?}");
        assert!(!malformed(&got[1]), "{got:?}");
        // Without an id and with two calls waiting, no call is guessed at.
        let got = client_sees(&[b"7", b"8"], "{\"result\":{\"content\":[\n");
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(!got.iter().any(malformed), "{got:?}");
        // An id nothing waits for (a second answer, say) is not answered.
        let got = client_sees(&[b"7"], "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":tru\n");
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0]["id"], 7, "{got:?}");
        assert!(!malformed(&got[0]), "{got:?}");
    }

    #[test]
    fn requests_left_unanswered_get_their_errors_in_the_order_they_were_sent() {
        let out = SharedBuf::default();
        let shared = Session::new(ProxyConfig::default(), out.clone());
        let ids: Vec<String> = (0..40).map(|i| format!("\"r{}\"", (i * 7) % 40)).collect();
        for (k, id) in ids.iter().enumerate() {
            let p = Pending {
                method: Method::Other,
                cancelled: k == 3,
                modern: false,
                task: false,
            };
            lock(&shared.shared().pending).insert(id.as_bytes().to_vec(), p);
        }
        let outcome = shared.relay_server(&b""[..]);
        assert_eq!(outcome.orphaned, 39);
        let got: Vec<String> = lines_of(&lock(&out.0))
            .iter()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_slice(l).unwrap();
                v["id"].to_string()
            })
            .collect();
        let want: Vec<String> = ids
            .iter()
            .enumerate()
            .filter(|(k, _)| *k != 3)
            .map(|(_, id)| id.clone())
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn the_proxys_own_tools_list_is_never_answered_to_the_client() {
        let out = SharedBuf::default();
        let shared = Session::new(ProxyConfig::default(), out.clone());
        let state = shared.shared();
        let (own, line) = state.tools_request(b"").expect("the tools are not known");
        // `"resultbudget-tools-` + the session's number (16 hex digits) +
        // `-0"`: the first of its own requests.
        let own_text = String::from_utf8_lossy(&own).into_owned();
        let nonce = own_text
            .strip_prefix("\"resultbudget-tools-")
            .and_then(|r| r.strip_suffix("-0\""))
            .unwrap_or_default();
        assert!(
            nonce.len() == 16 && nonce.bytes().all(|b| b.is_ascii_hexdigit()),
            "{own_text}"
        );
        let head = format!(r#"{{"jsonrpc":"2.0","id":{own_text},"method":"tools/list""#);
        assert!(line.starts_with(head.as_bytes()));
        assert!(
            state.tools_request(b"").is_none(),
            "one in flight at a time"
        );
        // A broken answer to it (the server wrote bytes that are not UTF-8, say): the
        // proxy stops waiting for it, and the client, which never sent that id,
        // hears nothing.
        let broken = [
            &b"{\"jsonrpc\":\"2.0\",\"id\":"[..],
            &own,
            b",\"result\":{\"tools\":[\"\xff\"]}}\n",
        ]
        .concat();
        shared.relay_server(&broken[..]);
        assert!(
            lock(&out.0).is_empty(),
            "{:?}",
            String::from_utf8_lossy(&lock(&out.0))
        );
        let st = lock(&state.tools_state);
        assert!(st.asked.is_none() && st.known, "{st:?}");
        drop(st);
        assert!(lock(&state.pending).get(&own).is_none());
        // Still pending when the server exits: nothing for the client either.
        state.tools_changed();
        let (again, _) = state.tools_request(b"").expect("the tools changed");
        // Its id is new (a late answer to the first is not this one's),
        // and its listing starts at its first page again.
        let second = own_text.replace("-0\"", "-1\"");
        assert_eq!(again, second.as_bytes());
        assert_eq!(lock(&state.tools_state).pages, 1);
        let outcome = shared.relay_server(&b""[..]);
        assert!(
            lock(&out.0).is_empty(),
            "{:?}",
            String::from_utf8_lossy(&lock(&out.0))
        );
        assert_eq!(outcome.orphaned, 0);
        assert!(
            lock(&state.tools_state).asked.is_none(),
            "no one waits for it"
        );
    }

    /// Whether `line` is JSON, lone surrogate escapes allowed (RFC 8259's
    /// grammar has them; serde_json refuses them, so each is read as
    /// `\ufffd`, of the same length, first).
    fn is_json(line: &[u8]) -> bool {
        let v = crate::audit::lone_surrogates_as_replacement(line);
        serde_json::from_slice::<serde_json::Value>(&v).is_ok()
    }

    /// Xorshift, for the generated sessions below.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n.max(1) as u64) as usize
        }

        fn pick<'a>(&mut self, of: &[&'a str]) -> &'a str {
            of.get(self.below(of.len())).copied().unwrap_or("")
        }

        /// Read sizes: whole reads, single bytes, or a mix up to 2 000 bytes.
        fn sizes(&mut self) -> Vec<usize> {
            match self.below(4) {
                0 => vec![1],
                1 => (0..64).map(|_| 1 + self.below(7)).collect(),
                _ => (0..64).map(|_| 1 + self.below(2000)).collect(),
            }
        }

        /// A JSON string's text (quoted) of about `n` characters, with escapes.
        fn string(&mut self, n: usize) -> String {
            let mut t = String::from("\"");
            for _ in 0..n {
                t.push_str(self.pick(&[
                    "a",
                    "b",
                    " ",
                    "\\n",
                    "\\\"",
                    "\\u00e9",
                    "é",
                    "\\ud83d\\ude00",
                    // Read as U+FFFD (`lone_surrogates`, on by default).
                    "\\ud83d",
                    "\\uDC00",
                ]));
            }
            t.push('"');
            t
        }

        /// A JSON value of some depth, size and string lengths around the
        /// test caps.
        fn value(&mut self, depth: usize) -> String {
            match self.below(if depth > 7 { 3 } else { 6 }) {
                0 => self
                    .pick(&["1", "-0.5e3", "true", "null", "12345678901234567890"])
                    .to_string(),
                1 => {
                    let n = [
                        self.below(20),
                        480 + self.below(160),
                        2900 + self.below(300),
                    ];
                    let n = n.get(self.below(3)).copied().unwrap_or(0);
                    self.string(n)
                }
                2 => {
                    let n = self.below(12);
                    self.string(n)
                }
                3 | 4 => {
                    let n = if depth <= 2 && self.below(4) == 0 {
                        18 + self.below(5)
                    } else {
                        self.below(4)
                    };
                    let items: Vec<String> = (0..n).map(|_| self.value(depth + 1)).collect();
                    format!("[{}]", items.join(","))
                }
                _ => {
                    let n = if depth <= 2 && self.below(4) == 0 {
                        18 + self.below(5)
                    } else {
                        self.below(4)
                    };
                    let members: Vec<String> = (0..n)
                        .map(|i| format!("\"k{i}\":{}", self.value(depth + 1)))
                        .collect();
                    format!("{{{}}}", members.join(","))
                }
            }
        }

        /// One line in eight cut short at a random byte (a broken line).
        fn sometimes_cut(&mut self, line: String) -> String {
            if self.below(8) != 0 {
                return line;
            }
            let cut = self.below(line.len());
            let mut b = line.into_bytes();
            b.truncate(cut);
            String::from_utf8_lossy(&b).into_owned()
        }

        fn id(&mut self) -> String {
            self.pick(&["1", "2", "3", "\"a\"", "4", "5"]).to_string()
        }
    }

    /// A line under 60 000 bytes (so no relay streams it) from `make`.
    fn bounded(r: &mut Rng, make: fn(&mut Rng) -> String) -> String {
        loop {
            let l = make(r);
            if l.len() < 60_000 {
                return l;
            }
        }
    }

    /// A line a client might send, hostile shapes included.
    fn client_line(r: &mut Rng) -> String {
        let id = r.id();
        let answer_len = r.below(4000);
        let answer = r.string(answer_len);
        let tool = r.pick(&["\"plain\"", "\"wide\"", "\"typed\"", "\"wid\\u0065\""]);
        let args = r.value(1);
        let line = match r.below(12) {
            0 | 1 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":{tool},\"arguments\":{args}}}}}"),
            2 => format!("{{\"jsonrpc\":\"2.0\",\"params\":{{\"arguments\":{args},\"name\":{tool}}},\"method\":\"tools/call\",\"id\":{id}}}"),
            3 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":{tool},\"arguments\":{args},\"task\":{{\"ttl\":5}},\"_meta\":{{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}}}}"),
            4 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":{}}}]}}}}", answer),
            5 => format!("{{\"jsonrpc\":\"2.0\",\"result\":{args},\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":{tool},\"arguments\":{{}}}}}}"),
            6 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\",\"params\":{args},\"method\":\"tools/call\"}}"),
            7 => format!("{{\"jsonrpc\":\"2.0\",\"params\":{{\"uri\":{args}}},\"method\":\"resources/read\",\"id\":{id}}}"),
            8 => format!("{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{{\"requestId\":{id}}}}}"),
            9 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/list\"}}"),
            10 => "  ".to_string(),
            _ => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":{tool},\"arguments\":{args},\"name\":\"plain\"}},\"method\":\"ping\"}}"),
        };
        r.sometimes_cut(line)
    }

    /// A line a server might send while `ids` wait, hostile shapes included.
    fn server_line(r: &mut Rng) -> String {
        let id = r.id();
        let text_len = r.below(1500);
        let text = r.string(text_len);
        let content = format!(
            "[{{\"type\":\"text\",\"text\":{text}}},{{\"type\":\"text\",\"text\":\"tail\"}}]"
        );
        let structured = r.value(1);
        let result = match r.below(3) {
            0 => format!("{{\"content\":{content}}}"),
            1 => format!("{{\"content\":{content},\"structuredContent\":{{\"v\":{structured}}},\"extra\":1}}"),
            _ => format!("{{\"content\":[],\"structuredContent\":{{\"v\":{structured}}},\"isError\":false}}"),
        };
        let line = match r.below(10) {
            0..=2 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}"),
            3 | 4 => format!("{{\"result\":{result},\"jsonrpc\":\"2.0\",\"id\":{id}}}"),
            5 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"sampling/createMessage\",\"params\":{{\"messages\":{structured}}}}}"),
            6 => format!("{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progress\":1,\"data\":{structured}}}}}"),
            7 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32000,\"message\":{text}}}}}"),
            8 => r.pick(&["debug: working", "{'status': 'ok'}", "", "[1,2"]).to_string(),
            _ => format!("{{\"result\":{{\"task\":{{\"taskId\":\"t{}\",\"status\":\"working\"}}}},\"jsonrpc\":\"2.0\",\"id\":{id}}}", r.below(3)),
        };
        r.sometimes_cut(line)
    }

    /// Lines as one list (the errors for calls the server never answered
    /// come in the order the calls were sent, whatever a map's order).
    fn lines_of(out: &[u8]) -> Vec<Vec<u8>> {
        out.split_inclusive(|&b| b == b'\n')
            .map(<[u8]>::to_vec)
            .collect()
    }

    /// Bytes for a failure message: the head and the tail of a long text.
    fn short(b: &[u8]) -> String {
        let t = String::from_utf8_lossy(b);
        let c: Vec<char> = t.chars().collect();
        if c.len() <= 1200 {
            return t.into_owned();
        }
        let head: String = c.iter().take(800).collect();
        let tail: String = c.iter().skip(c.len() - 300).collect();
        format!("{head} …[{} characters]… {tail}", c.len() - 1100)
    }

    fn split_test_config(lookahead: usize, max_hold: usize) -> ProxyConfig {
        let caps = ArgCaps {
            max_arg_bytes: 4000,
            max_arg_items: 20,
            max_arg_string_bytes: 600,
            max_arg_string_chars: 550,
            max_arg_keys: 20,
            max_arg_depth: 6,
            max_request_bytes: 6000,
        };
        let inv = Inventory::parse(
            r#"{"tools":[{"tool":"wide","server":"test","surface":"test","classification":"mutation",
            "read_only":false,"limit":null,"cursor":null,"per_item_budget_bytes":null,
            "result_budget":{"max_result_bytes":2048},"backend_query_bound":"one",
            "structured_content_policy":"typed_whole_or_error",
            "argument_caps":{"max_arg_bytes":9000,"max_arg_string_bytes":3100,
            "max_arg_string_chars":3100,"max_request_bytes":12000}}]}"#,
        )
        .ok();
        assert!(inv.is_some(), "the test inventory parses");
        ProxyConfig {
            limits: McpLimits {
                max_result_bytes: 1500,
                max_text_bytes: 600,
                max_text_block_bytes: 400,
                max_content_blocks: 3,
                max_list_items: 5,
                max_map_keys: 5,
                max_string_bytes: 100,
                max_depth: 4,
                max_structured_bytes: 700,
                max_nesting: 64,
            },
            inventory: inv,
            guard: Guard::new(caps),
            lookahead,
            max_hold,
            log_level: LogLevel::Error,
            ..ProxyConfig::default()
        }
    }

    fn fresh_shared(cfg: ProxyConfig, out: &SharedBuf) -> Session {
        let shared = Session::new(cfg, out.clone());
        lock(&shared.shared().tools_state).known = true;
        for (name, typed) in [("typed", true), ("plain", false), ("wide", false)] {
            lock(&shared.shared().tools).insert(
                name.into(),
                ToolFacts {
                    typed,
                    read_only: typed,
                },
            );
        }
        shared
    }

    /// The pending requests, as a sorted list (the map's order is its own).
    fn pending_list(shared: &Shared) -> Vec<String> {
        let mut v: Vec<String> = lock(&shared.pending)
            .iter()
            .map(|(id, p)| format!("{} {:?}", String::from_utf8_lossy(id), p))
            .collect();
        v.sort();
        v
    }

    /// A line that is not a call streams on to the server once it is longer
    /// than one write (`PASS_PIECE`). If it then breaks, or names
    /// `tools/call` after all, what went on is ended as a line (the server
    /// reads one broken line and drops it), nothing more of it goes on, and a
    /// request of the client's gets its error; the next line is untouched.
    #[test]
    fn a_line_that_is_not_one_message_goes_neither_way() {
        // A batch holding a call, short and longer than the hold cap: a server
        // that still reads batches (MCP 2025-03-26) would run the call with
        // its arguments unmeasured. Earlier builds passed the short one on
        // whole, and the long one once the cap passed with no method seen.
        let next = r#"{"jsonrpc":"2.0","id":99,"method":"ping"}"#;
        let call = |n: usize| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"plain","arguments":{{"a":"{}"}}}}}}"#,
                "a".repeat(n)
            )
        };
        let long = 3 << 20;
        for line in [
            format!("[{}]", call(10)),
            format!("  [{}]", call(long)),
            "42".to_string(),
            r#""tools/call""#.to_string(),
        ] {
            let input = format!("{line}\n{next}\n").into_bytes();
            for sizes in [vec![usize::MAX], vec![4096], vec![1, 7]] {
                if sizes == [1, 7] && line.len() > 1000 {
                    continue;
                }
                let to_client = SharedBuf::default();
                let to_server = SharedBuf::default();
                let shared = fresh_shared(split_test_config(1 << 20, 8 << 20), &to_client);
                shared.relay_client(SplitReads::new(&input, &sizes), to_server.clone());
                let server = lock(&to_server.0).clone();
                assert_eq!(server, format!("{next}\n").as_bytes(), "{sizes:?}");
                let client = lock(&to_client.0).clone();
                let v: serde_json::Value = serde_json::from_slice(&client).expect("one answer");
                assert_eq!(v["id"], serde_json::Value::Null, "{sizes:?}");
                assert_eq!(v["error"]["code"], jsonrpc::INVALID_REQUEST, "{sizes:?}");
            }
        }
        // From the server: dropped as stray output, the pending call still
        // waits for its answer (and gets it).
        let answer = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#;
        let got = answers_for(
            &[(b"7", call_method("plain"))],
            &format!("[{answer}]\n17\n{answer}\n"),
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(
            got[0],
            serde_json::from_str::<serde_json::Value>(answer).unwrap()
        );
    }

    /// The server's output ends inside a long pass-through line that had
    /// begun to stream: what went out is ended as a line, before the errors
    /// for the requests left unanswered, so each of those is a line of its
    /// own, and the request the line answers is settled by it. Broken, the
    /// line gets its request an error; whole but for its newline, it is that
    /// request's answer, and no error follows for it. Earlier builds wrote
    /// the first error on the end of the streamed bytes, where the client
    /// could not read it, and that request waited for ever.
    #[test]
    fn output_that_ends_inside_a_streamed_line_leaves_every_answer_readable() {
        let read =
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a"}}"#;
        let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"plain","arguments":{}}}"#;
        let client = format!("{read}\n{call}\n");
        let cut = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"contents":[{{"uri":"file:///a","text":"{}"#,
            "t".repeat(200_000)
        );
        let whole = format!("{cut}\"}}]}}}}");
        for (server, broken) in [(cut, true), (whole, false)] {
            for sizes in [vec![usize::MAX], vec![4096], vec![1000, 7]] {
                let cfg = ProxyConfig {
                    max_hold: 64 << 10,
                    ..split_test_config(1 << 20, 64 << 10)
                };
                let out = relay_session(
                    cfg,
                    &[("plain", false, false)],
                    client.as_bytes(),
                    SplitReads::new(server.as_bytes(), &sizes),
                );
                // The server died in the middle of a line either way.
                assert!(out.broken_line, "{sizes:?}");
                assert_eq!(out.orphaned, 1, "{sizes:?}");
                let lines: Vec<&[u8]> = out.to_client.split(|&b| b == b'\n').collect();
                let n = if broken { 4 } else { 3 };
                assert_eq!(lines.len(), n, "{sizes:?}: {}", short(&out.to_client));
                let errors: Vec<serde_json::Value> = if broken {
                    assert!(server.as_bytes().starts_with(lines[0]) && lines[0].len() > 64 << 10);
                    lines[1..3]
                        .iter()
                        .map(|l| serde_json::from_slice(l).expect("an error line"))
                        .collect()
                } else {
                    assert_eq!(lines[0], server.as_bytes(), "{sizes:?}");
                    vec![serde_json::from_slice(lines[1]).expect("an error line")]
                };
                let ids: Vec<&serde_json::Value> = errors.iter().map(|v| &v["id"]).collect();
                assert_eq!(ids, if broken { vec![1, 2] } else { vec![2] }, "{sizes:?}");
                for v in &errors {
                    assert_eq!(v["error"]["code"], jsonrpc::INTERNAL_ERROR, "{sizes:?}");
                }
                let last = errors.last().unwrap()["error"]["message"].as_str().unwrap();
                assert!(last.contains("exited before answering"), "{last}");
            }
        }
    }

    #[test]
    fn a_long_line_that_streamed_on_and_then_broke_is_ended() {
        let pad = "p".repeat(3 * PASS_PIECE);
        let next = r#"{"jsonrpc":"2.0","id":99,"method":"ping"}"#;
        let cases = [
            // A request that breaks at its end: -32700.
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":7,"method":"ping","params":{{"pad":"{pad}"}},}}"#
                ),
                Some((7, jsonrpc::PARSE_ERROR)),
            ),
            // A notification that breaks: nobody to answer.
            (
                format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"pad":"{pad}"}}]"#
                ),
                None,
            ),
            // A request that breaks where a lenient parser reads on (`NaN`),
            // and names tools/call after the break, where the guard cannot see
            // it: nothing after the break may reach the server. -32700.
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":6,"method":"ping","params":{{"pad":"{pad}","n":NaN}},"method":"tools/call","params":{{"name":"plain","arguments":{{"big":"{pad}"}}}}}}"#
                ),
                Some((6, jsonrpc::PARSE_ERROR)),
            ),
            // A request whose second `method` is tools/call: -32600.
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":8,"method":"ping","params":{{"pad":"{pad}"}},"method":"tools/call"}}"#
                ),
                Some((8, jsonrpc::INVALID_REQUEST)),
            ),
        ];
        for (line, answer) in cases {
            let input = format!("{line}\n{next}\n").into_bytes();
            for sizes in [vec![usize::MAX], vec![4096], vec![PASS_PIECE + 1, 7]] {
                let to_client = SharedBuf::default();
                let to_server = SharedBuf::default();
                let shared = fresh_shared(split_test_config(1 << 20, 8 << 20), &to_client);
                shared.relay_client(SplitReads::new(&input, &sizes), to_server.clone());
                let server = lock(&to_server.0).clone();
                let lines: Vec<&[u8]> = server.split(|&b| b == b'\n').collect();
                assert_eq!(lines.len(), 3, "{sizes:?}: {}", short(&server));
                // The first line is a broken prefix of the input's first line.
                assert!(lines[0].len() >= PASS_PIECE, "{sizes:?}: it streamed");
                assert!(line.as_bytes().starts_with(lines[0]), "{sizes:?}");
                // Nothing from where the guard stopped reading it as it is.
                let stop = line
                    .find("NaN")
                    .or(line.find("\"method\":\"tools/call\""))
                    .unwrap_or(line.len() - 1);
                assert!(
                    lines[0].len() <= stop,
                    "{sizes:?}: {} of {} bytes went on",
                    lines[0].len(),
                    line.len()
                );
                assert_eq!(lines[1], next.as_bytes(), "{sizes:?}");
                assert_eq!(lines[2], b"", "{sizes:?}");
                let client = lock(&to_client.0).clone();
                match answer {
                    None => assert!(client.is_empty(), "{}", short(&client)),
                    Some((id, code)) => {
                        let v: serde_json::Value =
                            serde_json::from_slice(&client).expect("one answer");
                        assert_eq!(v["id"], id, "{sizes:?}");
                        assert_eq!(v["error"]["code"], code, "{sizes:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_client_relay_does_the_same_however_reads_split_its_input() {
        let mut r = Rng(0x2545_f491_4f6c_dd1d);
        let mut refused = 0;
        let mut forwarded = 0;
        for session in 0..300 {
            let lines: Vec<String> = (0..1 + r.below(6))
                .map(|_| bounded(&mut r, client_line))
                .collect();
            let input = format!("{}\n", lines.join("\n")).into_bytes();
            let run = |sizes: Vec<usize>| {
                let to_client = SharedBuf::default();
                let to_server = SharedBuf::default();
                let shared = fresh_shared(split_test_config(1 << 20, 8 << 20), &to_client);
                let reader = SplitReads::new(&input, &sizes);
                shared.relay_client(reader, to_server.clone());
                let c = lock(&to_client.0).clone();
                let s = lock(&to_server.0).clone();
                (c, s, pending_list(shared.shared()))
            };
            let whole = run(vec![usize::MAX]);
            refused += whole.0.iter().filter(|&&b| b == b'\n').count();
            forwarded += whole.1.iter().filter(|&&b| b == b'\n').count();
            for _ in 0..3 {
                let sizes = r.sizes();
                let split = run(sizes.clone());
                assert!(
                    split == whole,
                    "session {session}, reads {:?}…: the relay differs\ninput: {}\nclient: {}\n  vs: {}\nserver: {}\n  vs: {}\npending: {:?}\n  vs: {:?}",
                    sizes.get(..8),
                    short(&input),
                    short(&whole.0),
                    short(&split.0),
                    short(&whole.1),
                    short(&split.1),
                    whole.2,
                    split.2
                );
            }
        }
        // The sessions reached both sides: lines refused and lines sent on.
        assert!(
            refused > 100 && forwarded > 300,
            "{refused} answered, {forwarded} sent on"
        );
    }

    #[test]
    fn the_server_relay_does_the_same_however_reads_split_its_output() {
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        let mut cut = 0;
        for session in 0..400 {
            // Calls with different treatments wait, so the relay reads ahead
            // for ids; the look-ahead is short, so ids fall on both sides of it.
            let mut pending: Vec<(String, Pending)> = Vec::new();
            for id in ["1", "2", "3", "\"a\"", "4"] {
                if r.below(3) == 0 {
                    continue;
                }
                let method = match r.below(6) {
                    0 => Method::ToolsList,
                    1 => Method::TasksResult(Arc::from(&b"\"t1\""[..])),
                    k => Method::ToolsCall(Arc::from(["typed", "plain", "wide", "other"][k - 2])),
                };
                pending.push((
                    id.to_string(),
                    Pending {
                        method,
                        cancelled: r.below(6) == 0,
                        modern: r.below(4) == 0,
                        task: r.below(5) == 0,
                    },
                ));
            }
            let lines: Vec<String> = (0..1 + r.below(6))
                .map(|_| bounded(&mut r, server_line))
                .collect();
            let input = format!("{}\n", lines.join("\n")).into_bytes();
            let lookahead = 200 + r.below(1500);
            // A small hold makes long lines stream; a broken one then leaves a
            // line begun, which depends on where the reads fell: compared
            // without the lines that are not JSON.
            let max_hold = if r.below(3) == 0 { 1200 } else { 8 << 20 };
            let run = |sizes: Vec<usize>| {
                let to_client = SharedBuf::default();
                let shared = fresh_shared(split_test_config(lookahead, max_hold), &to_client);
                lock(&shared.shared().tasks).insert(b"\"t1\"".to_vec(), "typed".into());
                for (id, p) in &pending {
                    lock(&shared.shared().pending).insert(id.as_bytes().to_vec(), p.clone());
                    if p.cancelled {
                        lock(&shared.shared().pending).cancel(id.as_bytes());
                    }
                }
                let reader = SplitReads::new(&input, &sizes);
                shared.relay_server(reader);
                let out = lock(&to_client.0).clone();
                let mut lines = lines_of(&out);
                if max_hold < (1 << 20) {
                    lines.retain(|l| is_json(l));
                } else {
                    for l in &lines {
                        assert!(
                            is_json(l),
                            "session {session}: a line the client gets is not JSON: {}",
                            String::from_utf8_lossy(l)
                        );
                    }
                }
                (lines, pending_list(shared.shared()))
            };
            let whole = run(vec![usize::MAX]);
            cut += whole
                .0
                .iter()
                .filter(|l| l.windows(7).any(|w| w == b"omitted"))
                .count();
            for _ in 0..3 {
                let sizes = r.sizes();
                let split = run(sizes.clone());
                assert!(
                    split == whole,
                    "session {session}, look-ahead {lookahead}, hold {max_hold}, reads {:?}…: the relay differs\ninput: {}\nclient: {:?}\n  vs: {:?}",
                    sizes.get(..8),
                    short(&input),
                    whole.0.iter().map(|l| short(l)).collect::<Vec<_>>(),
                    split.0.iter().map(|l| short(l)).collect::<Vec<_>>(),
                );
            }
        }
        // The sessions reached the budgets.
        assert!(cut > 50, "only {cut} answers were cut");
    }

    #[test]
    fn the_tools_learned_are_bounded_the_newest_kept() {
        // Two listings of 60,000 tools each (a server whose list keeps
        // changing): the proxy remembers the newest 100,000. Earlier builds
        // kept every name any listing ever gave.
        let out = SharedBuf::default();
        let shared = Session::new(ProxyConfig::default(), out.clone());
        let mut server = String::new();
        for (id, from) in [(1, 0), (2, 60_000)] {
            let tools: Vec<String> = (from..from + 60_000)
                .map(|i| format!(r#"{{"name":"t{i}","inputSchema":{{}},"outputSchema":{{}}}}"#))
                .collect();
            let id_raw = id.to_string().into_bytes();
            lock(&shared.shared().pending).insert(
                id_raw,
                Pending {
                    method: Method::ToolsList,
                    cancelled: false,
                    modern: false,
                    task: false,
                },
            );
            server.push_str(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{}]}}}}"#,
                tools.join(",")
            ));
            server.push('\n');
        }
        shared.relay_server(server.as_bytes());
        let tools = lock(&shared.shared().tools);
        assert_eq!(tools.by_key.len(), MAX_TOOLS);
        assert_eq!(tools.order.len(), MAX_TOOLS);
        assert!(tools.get("t19999").is_none(), "the oldest are forgotten");
        for name in ["t20000", "t59999", "t60000", "t119999"] {
            assert_eq!(
                tools.get(name).copied(),
                Some(ToolFacts {
                    typed: true,
                    read_only: false
                }),
                "{name}"
            );
        }
    }

    #[test]
    fn the_newest_tasks_are_remembered() {
        let mut t = TaskTools::default();
        for i in 0..MAX_TASKS + 50 {
            t.insert(i.to_string().into_bytes(), format!("tool{i}"));
        }
        // A task id seen again keeps its place and takes the new tool.
        t.insert(b"60".to_vec(), "again".into());
        assert_eq!(t.by_key.len(), MAX_TASKS);
        assert_eq!(t.order.len(), MAX_TASKS);
        assert!(t.get(&b"49"[..]).is_none(), "the oldest are forgotten");
        assert_eq!(t.get(&b"60"[..]).map(String::as_str), Some("again"));
        let last = (MAX_TASKS + 49).to_string();
        assert_eq!(
            t.get(last.as_bytes()).map(String::as_str),
            Some(format!("tool{last}").as_str())
        );
    }

    #[test]
    fn cancelled_requests_kept_are_bounded() {
        let mut set = PendingSet::default();
        let p = Pending {
            method: Method::ToolsCall("t".into()),
            cancelled: false,
            modern: false,
            task: false,
        };
        for i in 0..MAX_CANCELLED + 50 {
            let id = i.to_string().into_bytes();
            set.insert(id.clone(), p.clone());
            set.cancel(&id);
        }
        assert_eq!(set.cancelled, MAX_CANCELLED);
        assert_eq!(set.cancelled_calls, MAX_CANCELLED);
        assert_eq!(set.by_id.len(), MAX_CANCELLED);
        assert!(set.calls.is_empty());
        // The newest is always kept.
        assert!(set
            .get((MAX_CANCELLED + 49).to_string().as_bytes())
            .is_some());
    }

    /// The buffers the pending set keeps for calls to come stay few and
    /// small, and hand back what was put in.
    #[test]
    fn the_pending_set_keeps_few_small_buffers() {
        let mut set = PendingSet::default();
        // A name called again is shared; the last NAMES are kept, and a
        // long one is not.
        let a = set.name("alpha");
        assert!(Arc::ptr_eq(&a, &set.name("alpha")));
        for i in 0..100 {
            assert_eq!(&*set.name(&format!("t{i}")), format!("t{i}"));
        }
        assert_eq!(set.names.len(), NAMES);
        assert!(set.names.capacity() <= NAMES);
        assert!(!Arc::ptr_eq(&a, &set.name("alpha")));
        let long = "x".repeat(SPARE_KEY_BYTES + 1);
        assert!(!Arc::ptr_eq(&set.name(&long), &set.name(&long)));
        assert!(set.names.iter().all(|n| n.len() <= SPARE_KEY_BYTES));
        // Ids: each answer gets its call's id as the client wrote it (`7.0`
        // is found as `7`), and the buffers kept are at most SPARE_KEYS, of
        // at most SPARE_KEY_BYTES.
        let p = Pending {
            method: Method::ToolsCall("t".into()),
            cancelled: false,
            modern: false,
            task: false,
        };
        let mut into = Vec::new();
        for round in 0..3 {
            let ids: Vec<String> = (0..200)
                .map(|i| match i % 3 {
                    0 => format!("{i}"),
                    1 => format!("\"r{round}-{i}\""),
                    _ => format!("\"{}\"", "y".repeat(SPARE_KEY_BYTES + i)),
                })
                .collect();
            for id in &ids {
                let k = set.key_for(id.as_bytes());
                set.insert(k, p.clone());
            }
            for id in &ids {
                let asked = if id.starts_with('"') {
                    id.clone()
                } else {
                    format!("{id}.0")
                };
                let got = set.remove_into(asked.as_bytes(), &mut into);
                assert!(got.is_some_and(|g| g.method == p.method), "{id}");
                assert_eq!(into, id.as_bytes());
            }
            assert!(set.by_id.is_empty() && set.calls.is_empty());
            assert!(set.spare_keys.len() <= SPARE_KEYS);
            assert!(set.spare_keys.capacity() <= SPARE_KEYS);
            assert!(set
                .spare_keys
                .iter()
                .all(|k| (1..=SPARE_KEY_BYTES).contains(&k.capacity())));
        }
        assert!(set.remove_into(b"1", &mut into).is_none());
        // An answer's id in the other type finds its call, as both SDK
        // clients match it; the id comes back as the client wrote it.
        for (sent, answered) in [("\"7\"", "7"), ("8", "\"8\""), ("-9", "\"-9\"")] {
            let k = set.key_for(sent.as_bytes());
            set.insert(k, p.clone());
            let got = set.remove_into(answered.as_bytes(), &mut into);
            assert!(got.is_some(), "{sent} answered as {answered}");
            assert_eq!(into, sent.as_bytes());
        }
        assert!(set.by_id.is_empty() && set.calls.is_empty());
        assert!(set.remove_into(b"\"1\"", &mut into).is_none());
    }

    #[test]
    fn pick_treat_matches_its_slow_twin() {
        let shared = Session::new(ProxyConfig::default(), std::io::sink());
        lock(&shared.shared().tools).insert(
            "typed".into(),
            ToolFacts {
                typed: true,
                read_only: true,
            },
        );
        // Tasks whose tools are known (one of them the same tool as a call's),
        // and one whose tool is not.
        lock(&shared.shared().tasks).insert(b"\"t1\"".to_vec(), "typed".into());
        lock(&shared.shared().tasks).insert(b"\"t2\"".to_vec(), "plain".into());
        lock(&shared.shared().tasks).insert(b"\"t4\"".to_vec(), "typed".into());
        let methods = [
            Method::ToolsCall("typed".into()),
            Method::ToolsCall("plain".into()),
            Method::TasksResult(b"\"t1\"".as_slice().into()),
            Method::TasksResult(b"\"t2\"".as_slice().into()),
            Method::TasksResult(b"\"t3\"".as_slice().into()),
            Method::TasksResult(b"\"t4\"".as_slice().into()),
            Method::ToolsList,
            Method::ProxyToolsList,
            Method::Other,
        ];
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let mut kinds = std::collections::HashSet::new();
        for step in 0..50_000 {
            let mut pending = lock(&shared.shared().pending);
            // Requests come and go; ids are reused, so a request may replace
            // another; now and then the server dies and all are dropped.
            match next(100) {
                0 => {
                    pending.drain();
                }
                1..=39 => {
                    let id = format!("{}", next(6)).into_bytes();
                    pending.remove(&id);
                }
                40..=44 => {
                    let id = format!("{}", next(6)).into_bytes();
                    pending.cancel(&id);
                }
                _ => {
                    let method = methods
                        .get(next(methods.len()))
                        .cloned()
                        .unwrap_or(Method::Other);
                    let p = Pending {
                        method,
                        cancelled: next(8) == 0,
                        modern: next(4) == 0,
                        task: next(6) == 0,
                    };
                    pending.insert(format!("{}", next(6)).into_bytes(), p);
                }
            }
            let fresh = recount(&pending);
            assert_eq!(
                (&pending.calls, pending.lists, pending.tasks, pending.others),
                (&fresh.calls, fresh.lists, fresh.tasks, fresh.others),
                "step {step}: the counts follow the requests"
            );
            assert_eq!(
                (pending.cancelled_calls, pending.cancelled),
                (fresh.cancelled_calls, fresh.cancelled),
                "step {step}: the cancelled counts follow the requests"
            );
            drop(pending);
            let fast = pick_treat(shared.shared(), &mut Spare::default());
            assert_eq!(fast, pick_treat_slow(shared.shared()), "step {step}");
            kinds.insert((
                fast.ambiguous,
                fast.treat == Treat::Pass,
                fast.lists,
                fast.tasks,
            ));
        }
        // Every outcome that can be came up: ambiguous or not with the
        // pass-through, each with or without a pending list and task call, and
        // a treatment (never with a pending list, which makes it ambiguous)
        // with or without a task call.
        assert_eq!(kinds.len(), 10, "{kinds:?}");
    }
}
