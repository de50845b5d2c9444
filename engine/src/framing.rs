//! Newline-delimited framing that never holds a whole line: a line is handed
//! on in pieces as it is read, so an over-long line never grows memory.

use std::io::Read;

/// Read buffer size; also the most a single piece can be.
pub const READ_BUF: usize = 64 * 1024;

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
