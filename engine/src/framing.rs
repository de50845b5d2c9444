//! Newline-delimited framing that never holds a whole line: a line is handed
//! on in pieces as it is read, so an over-long line never grows memory.

use std::io::Read;

/// Whether `bytes` hold something other than the whitespace a blank line may
/// carry (spaces, tabs, a CR before the newline).
pub fn has_content(bytes: &[u8]) -> bool {
    first_content(bytes).is_some()
}

/// The first byte of `bytes` that is not such whitespace.
pub fn first_content(bytes: &[u8]) -> Option<u8> {
    bytes
        .iter()
        .copied()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\r'))
}

/// Whether a line whose [`first_content`] is `first` cannot be one JSON-RPC
/// message object: it has content, and that content is not an object (a
/// batch, a bare value). A blank line so far is not such a line.
pub fn not_one_object(first: Option<u8>) -> bool {
    matches!(first, Some(b) if b != b'{')
}

/// The next piece of a line in `input`: its bytes before the first newline
/// (or all of them), the bytes after that newline, and whether there was
/// one (the line ended). For a caller that is handed bytes rather than
/// reading them ([`LineReader`] is the reading twin).
pub fn split_line(input: &[u8]) -> (&[u8], &[u8], bool) {
    match memchr::memchr(b'\n', input) {
        Some(k) => (
            input.get(..k).unwrap_or(&[]),
            input.get(k + 1..).unwrap_or(&[]),
            true,
        ),
        None => (input, &[], false),
    }
}

/// Read buffer size; also the most a single piece can be.
pub const READ_BUF: usize = 64 * 1024;

/// The capacity asked of a pipe the engine reads a stream from (Linux).
///
/// Linux gives a pipe 64 KiB, one [`READ_BUF`]: a writer producing a large
/// message fills it and waits while the reader works on the piece, so the two
/// take turns, each waking the other every 64 KiB, instead of running at once
/// on two cores. With four reads of room they overlap: through the proxy a
/// 100 MB result cut to the default budget took about 0.07 s against
/// 0.11–0.13 s, and `cat | resultbudget filter` on a 162 MB line 0.08–0.09 s
/// against 0.10–0.22 s (`docs/proxy.md`). Bounds no memory of the process's:
/// the pipe's pages are the kernel's.
pub const PIPE_BYTES: usize = 256 << 10;

/// Ask the kernel for [`PIPE_BYTES`] of room in the pipe `f` reads from or
/// writes to; `true` if it was granted. Not a pipe (a file, a terminal), a
/// kernel that refuses (a lower `/proc/sys/fs/pipe-max-size`, a user over its
/// pipe pages) or another system than Linux: `false`, and nothing changes.
#[cfg(unix)]
pub fn widen_pipe<F: std::os::fd::AsFd>(f: F) -> bool {
    #[cfg(target_os = "linux")]
    {
        rustix::pipe::fcntl_setpipe_size(f, PIPE_BYTES).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = f;
        false
    }
}

/// See the Unix form: elsewhere there is nothing to widen.
#[cfg(not(unix))]
pub fn widen_pipe<F>(_f: F) -> bool {
    false
}

/// One step of reading newline-delimited input.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Bytes of the current line (never containing the newline).
    Data(&'a [u8]),
    /// The current line ended with a newline.
    End,
    /// The input ended; `partial` when a last line had no newline.
    Eof { partial: bool },
}

/// Splits a reader into line pieces with a fixed buffer.
pub struct LineReader<R> {
    r: R,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    eof: bool,
    in_line: bool,
}

impl<R: Read> LineReader<R> {
    pub fn new(r: R) -> LineReader<R> {
        LineReader {
            r,
            buf: vec![0u8; READ_BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            eof: false,
            in_line: false,
        }
    }

    /// Whether bytes already read wait in the buffer: the next
    /// [`Self::next_piece`] returns without reading (so without blocking).
    /// A writer that batches its output flushes when this turns false.
    pub fn buffered(&self) -> bool {
        self.start < self.end
    }

    /// The next piece. After `Eof` it keeps returning `Eof { partial: false }`.
    pub fn next_piece(&mut self) -> std::io::Result<Piece<'_>> {
        if self.start == self.end {
            if self.eof {
                let partial = std::mem::take(&mut self.in_line);
                return Ok(Piece::Eof { partial });
            }
            let n = loop {
                match self.r.read(&mut self.buf) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            };
            self.start = 0;
            self.end = n;
            if n == 0 {
                self.eof = true;
                let partial = std::mem::take(&mut self.in_line);
                return Ok(Piece::Eof { partial });
            }
        }
        let window = self.buf.get(self.start..self.end).unwrap_or(&[]);
        match memchr::memchr(b'\n', window) {
            Some(0) => {
                self.start += 1;
                self.in_line = false;
                Ok(Piece::End)
            }
            Some(k) => {
                let s = self.start;
                self.start += k;
                self.in_line = true;
                Ok(Piece::Data(self.buf.get(s..s + k).unwrap_or(&[])))
            }
            None => {
                let s = self.start;
                self.start = self.end;
                self.in_line = true;
                Ok(Piece::Data(self.buf.get(s..self.end).unwrap_or(&[])))
            }
        }
    }
}
