//! The projection in front of a transport writer: `std::io::Write`, tokio
//! `AsyncWrite`, and a tokio-util `Encoder`.
//!
//! [`ProjectWriter`] and [`AsyncProjectWriter`] take newline-delimited JSON-RPC
//! in pieces of any size and write the budgeted stream to the inner writer as
//! soon as bytes are final. Each line is treated as the next [`Treat`] says
//! (set per message with `set_next_treat`, or the default). A line that is not
//! valid JSON, or is not one answer (its top-level `id`, `result` or `error`
//! twice, or both a `result` and an `error`: `Projector::repeated`), is
//! replaced by a JSON-RPC error line (`-32700`), and a line that is not one
//! message object (a batch, a bare value) by a `-32600` line. The writer
//! holds nothing larger than one chunk plus the output of the message in
//! progress, which is bounded by its budget, or, for a message without a byte
//! ceiling, by [`MAX_HOLD`]: past that it streams on. A line of whitespace
//! only is dropped.
//!
//! When the inner writer fails (`WouldBlock` from a non-blocking socket, a
//! closed pipe), nothing of the input passed to that call is taken, so the
//! caller's retry with the same bytes is correct; output the inner writer has
//! not accepted yet stays pending and goes first on the next call.
//!
//! [`McpEncoder`] encodes one message per item and writes exactly what the
//! writers write for that message as a line (but that it holds a message's
//! output to its end, however long: a broken one is replaced whole).

use crate::mcp::{McpLimits, Projector, Treat};
use bytes::{BufMut, BytesMut};
use std::io::{self, Write};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::AsyncWrite;

/// Output of one line the writers hold before they stream it on: the
/// default of `set_max_hold`, and `filter`'s hold.
///
/// A line is held so that a broken one can be replaced whole; with a byte
/// ceiling (every tool result under the default limits) its output never
/// gets here. A line without one (`Treat::Pass`, or budgets off) would
/// otherwise be held whole, however long: past this much of its output it
/// streams on instead, and should it break after that, what went out is ended
/// with a newline and the error line follows. Bounds the writer's memory for
/// one line; does not bound the output, which is the budget's to do.
pub const MAX_HOLD: usize = 8 * 1024 * 1024;

/// Line splitting + projection, shared by the writers.
#[derive(Debug)]
struct LineProjector {
    p: Projector,
    default_treat: Treat,
    next_treat: Option<Treat>,
    in_line: bool,
    /// The line's first byte that is not whitespace (`None`: blank so far).
    first: Option<u8>,
    /// The line broke (the projector is fed no more of it).
    failed: bool,
    /// Held output for the current line while it is not known to be valid.
    line_out: Vec<u8>,
    /// Output of a line held before it streams on (see [`MAX_HOLD`]).
    max_hold: usize,
    /// Part of the current line has gone to the output.
    streamed: bool,
    records: Vec<crate::record::Record>,
    keep_records: bool,
}

impl LineProjector {
    fn new(lim: McpLimits, treat: Treat) -> Result<LineProjector, String> {
        Ok(LineProjector {
            p: Projector::new(lim)?,
            default_treat: treat,
            next_treat: None,
            in_line: false,
            first: None,
            failed: false,
            line_out: Vec::with_capacity(64 * 1024),
            max_hold: MAX_HOLD,
            streamed: false,
            records: Vec::new(),
            keep_records: false,
        })
    }

    /// Process `input`; append finished lines to `out`.
    fn push(&mut self, mut input: &[u8], out: &mut Vec<u8>) {
        while !input.is_empty() {
            if !self.in_line {
                let treat = match self.next_treat.take() {
                    Some(t) => t,
                    // The last line's treatment again where it is the
                    // default (as it is unless the line before had its own):
                    // the tool's name and request id are not copied for
                    // every line.
                    None => {
                        let last = self.p.take_treat();
                        if last == self.default_treat {
                            last
                        } else {
                            self.default_treat.clone()
                        }
                    }
                };
                self.p.begin(treat);
                self.in_line = true;
                self.first = None;
                self.failed = false;
                self.streamed = false;
                self.line_out.clear();
            }
            let (piece, rest, ended) = crate::framing::split_line(input);
            input = rest;
            if self.first.is_none() {
                self.first = crate::framing::first_content(piece);
            }
            if !self.failed {
                self.failed = self.p.feed(piece, &mut self.line_out).is_err();
            }
            if self.discarded() {
                // Read to its end (a broken line is answered as broken, and
                // the error names the line's last `id`), but none of it is kept.
                self.line_out.clear();
            }
            if !self.failed
                && !self.line_out.is_empty()
                && (self.streamed || self.line_out.len() > self.max_hold)
            {
                // Past the hold (only a line without a byte ceiling gets
                // there) the line streams on, each piece as it is final.
                out.extend_from_slice(&self.line_out);
                self.line_out.clear();
                self.streamed = true;
            }
            if ended {
                self.end_line(out);
            }
        }
    }

    /// The line is not one message object: a batch (an array) or a bare
    /// value, which the projector would pass whole.
    fn not_message(&self) -> bool {
        crate::framing::not_one_object(self.first)
    }

    /// Nothing of the line will be kept: it is not one message, or not one
    /// answer ([`Projector::repeated`]: a reader keeps the last of duplicate
    /// members, which need not be what the projector kept); it is replaced as
    /// a broken one is (`specs/mcp-result-contract.md`).
    fn discarded(&self) -> bool {
        self.not_message() || self.p.repeated().is_some()
    }

    fn end_line(&mut self, out: &mut Vec<u8>) {
        self.in_line = false;
        if self.first.is_none() {
            return;
        }
        if !self.failed {
            self.failed = self.p.finish(&mut self.line_out).is_err();
        }
        if self.failed || self.p.repeated().is_some() {
            self.line_out.clear();
            if self.streamed {
                // Part of the line is out: end it, so the next line stays a
                // line, then answer it as a held one is.
                self.line_out.push(b'\n');
            }
            crate::jsonrpc::parse_error_line(&mut self.line_out, self.p.id());
        } else if self.not_message() {
            self.line_out.clear();
            crate::jsonrpc::not_one_message_line(&mut self.line_out);
        } else if self.keep_records && self.p.record().truncated() {
            self.records.push(self.p.record().clone());
        }
        out.extend_from_slice(&self.line_out);
        out.push(b'\n');
        self.line_out.clear();
    }
}

/// Newline-delimited JSON-RPC in, budgeted JSON-RPC out to `W`.
///
/// Output of a line is written once the line is complete (it is bounded by the
/// budget, and a broken line must be replaced whole), or, past [`MAX_HOLD`]
/// of it, as it is final. Call [`ProjectWriter::finish`] at the end to flush
/// a last line without a newline.
#[derive(Debug)]
pub struct ProjectWriter<W: Write> {
    inner: W,
    lp: LineProjector,
    /// Finished lines; the inner writer has accepted `out[..sent]`.
    out: Vec<u8>,
    sent: usize,
}

impl<W: Write> ProjectWriter<W> {
    /// Every line is treated as `treat` unless [`ProjectWriter::set_next_treat`] says otherwise.
    pub fn new(inner: W, lim: McpLimits, treat: Treat) -> Result<ProjectWriter<W>, String> {
        Ok(ProjectWriter {
            inner,
            lp: LineProjector::new(lim, treat)?,
            out: Vec::with_capacity(64 * 1024),
            sent: 0,
        })
    }

    /// Hand the pending output to the inner writer, all of it or an error.
    fn drain(&mut self) -> io::Result<()> {
        while let Some(rest) = self.out.get(self.sent..).filter(|r| !r.is_empty()) {
            match self.inner.write(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.sent = 0;
        Ok(())
    }

    /// How to treat the next line that starts.
    pub fn set_next_treat(&mut self, treat: Treat) {
        self.lp.next_treat = Some(treat);
    }

    /// Hold at most `bytes` of a line's output before streaming it on
    /// ([`MAX_HOLD`] by default, which says what it bounds).
    pub fn set_max_hold(&mut self, bytes: usize) {
        self.lp.max_hold = bytes;
    }

    /// Read a lone surrogate escape (`"\\ud83d"`) as U+FFFD instead of
    /// refusing the input: [`crate::tokenizer::Tokenizer::set_lone_surrogates`].
    pub fn set_lone_surrogates(&mut self, on: bool) {
        self.lp.p.set_lone_surrogates(on);
    }

    /// Keep the records of lines that were cut (read them with `take_records`).
    pub fn keep_records(&mut self, on: bool) {
        self.lp.keep_records = on;
    }

    pub fn take_records(&mut self) -> Vec<crate::record::Record> {
        std::mem::take(&mut self.lp.records)
    }

    /// End the stream and keep the writer: a last line without a newline is
    /// completed, and everything is handed to the inner writer and flushed.
    /// After an error (`WouldBlock`) the rest stays pending, and `close` may
    /// be called again. Writing on after it starts a new line.
    pub fn close(&mut self) -> io::Result<()> {
        if self.lp.in_line {
            self.lp.end_line(&mut self.out);
        }
        self.flush()
    }

    /// [`ProjectWriter::close`], then the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.close()?;
        Ok(self.inner)
    }
}

impl<W: Write> Write for ProjectWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Earlier output goes first. If the inner writer fails here, nothing
        // of `buf` has been taken, and the caller's retry is correct.
        self.drain()?;
        self.lp.push(buf, &mut self.out);
        // `buf` is taken now, so this call succeeds. Lines the inner writer
        // refuses stay pending, and its error comes back from the next
        // `write` or `flush` (as `std::io::BufWriter` reports one).
        let _ = self.drain();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.drain()?;
        self.inner.flush()
    }
}

/// The async twin of [`ProjectWriter`] for tokio.
#[derive(Debug)]
pub struct AsyncProjectWriter<W> {
    inner: W,
    lp: LineProjector,
    out: Vec<u8>,
    sent: usize,
}

impl<W: AsyncWrite + Unpin> AsyncProjectWriter<W> {
    pub fn new(inner: W, lim: McpLimits, treat: Treat) -> Result<AsyncProjectWriter<W>, String> {
        Ok(AsyncProjectWriter {
            inner,
            lp: LineProjector::new(lim, treat)?,
            out: Vec::with_capacity(64 * 1024),
            sent: 0,
        })
    }

    pub fn set_next_treat(&mut self, treat: Treat) {
        self.lp.next_treat = Some(treat);
    }

    /// Hold at most `bytes` of a line's output before streaming it on
    /// ([`MAX_HOLD`] by default, which says what it bounds).
    pub fn set_max_hold(&mut self, bytes: usize) {
        self.lp.max_hold = bytes;
    }

    /// Read a lone surrogate escape (`"\\ud83d"`) as U+FFFD instead of
    /// refusing the input: [`crate::tokenizer::Tokenizer::set_lone_surrogates`].
    pub fn set_lone_surrogates(&mut self, on: bool) {
        self.lp.p.set_lone_surrogates(on);
    }

    /// Keep the records of lines that were cut (read them with `take_records`).
    pub fn keep_records(&mut self, on: bool) {
        self.lp.keep_records = on;
    }

    pub fn take_records(&mut self) -> Vec<crate::record::Record> {
        std::mem::take(&mut self.lp.records)
    }

    pub fn into_inner(self) -> W {
        self.inner
    }

    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.out.len() {
            let pending = self.out.get(self.sent..).unwrap_or(&[]);
            match Pin::new(&mut self.inner).poll_write(cx, pending) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.sent += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        self.out.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for AsyncProjectWriter<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        // Back-pressure: earlier output goes first, so memory stays bounded.
        match this.poll_drain(cx) {
            Poll::Ready(Ok(())) => {}
            other => return other.map(|r| r.map(|_| 0)),
        }
        this.lp.push(buf, &mut this.out);
        // Finished lines go out now where the inner writer takes them; what it
        // does not take stays pending for the next write or flush, which
        // report its error if it has one.
        let _ = this.poll_drain(cx);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match this.poll_drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.lp.in_line {
            this.lp.end_line(&mut this.out);
        }
        match this.poll_drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_shutdown(cx),
            other => other,
        }
    }
}

/// A tokio-util `Encoder` for whole JSON-RPC messages: each item is one message,
/// and the budgeted message and a newline are appended to `dst`, exactly what
/// the writers write for that message as a line: a message that is not valid
/// JSON, or is not one answer ([`Projector::repeated`]), becomes a JSON-RPC
/// error line (`-32700`, with the message's last id where it was read), one that is
/// not one object (a batch, a bare value) a `-32600` line, and an item of
/// whitespace only writes nothing.
///
/// An item may end with one newline (it is the frame's, not the message's);
/// an item with a newline anywhere else cannot be framed as one line, and
/// `encode` refuses it with [`io::ErrorKind::InvalidInput`], writing nothing.
#[derive(Debug)]
pub struct McpEncoder {
    /// The writers' own line projector, so an item becomes what they write.
    lp: LineProjector,
    scratch: Vec<u8>,
}

impl McpEncoder {
    pub fn new(lim: McpLimits, treat: Treat) -> Result<McpEncoder, String> {
        let mut lp = LineProjector::new(lim, treat)?;
        // An item is whole in the caller's memory already: its output is
        // held to the end, so a broken one is always replaced whole.
        lp.max_hold = usize::MAX;
        Ok(McpEncoder {
            lp,
            scratch: Vec::with_capacity(64 * 1024),
        })
    }

    /// How to treat the following items.
    pub fn set_treat(&mut self, treat: Treat) {
        self.lp.default_treat = treat;
    }

    /// Read a lone surrogate escape (`"\\ud83d"`) as U+FFFD instead of
    /// refusing the input: [`crate::tokenizer::Tokenizer::set_lone_surrogates`].
    pub fn set_lone_surrogates(&mut self, on: bool) {
        self.lp.p.set_lone_surrogates(on);
    }
}

impl<T: AsRef<[u8]>> tokio_util::codec::Encoder<T> for McpEncoder {
    type Error = io::Error;

    fn encode(&mut self, item: T, dst: &mut BytesMut) -> Result<(), io::Error> {
        let item = item.as_ref();
        let msg = item.strip_suffix(b"\n").unwrap_or(item);
        if let Some(at) = memchr::memchr(b'\n', msg) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "resultbudget: the message has a newline at byte {at}; \
                     newline-delimited JSON-RPC cannot frame it as one line"
                ),
            ));
        }
        self.scratch.clear();
        self.lp.push(msg, &mut self.scratch);
        if self.lp.in_line {
            self.lp.end_line(&mut self.scratch);
        }
        dst.reserve(self.scratch.len());
        dst.put_slice(&self.scratch);
        Ok(())
    }
}
