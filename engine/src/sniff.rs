//! Read a few fields out of a JSON-RPC message as it streams by, without
//! building it: the method and id of a request, the id of a response and the
//! first key of its result, the tools of a `tools/list` result. Everything not
//! asked for is skipped (still validated) at full speed.

use crate::error::Error;
use crate::tokenizer::{Tok, Tokenizer};

/// Longest scalar kept raw (method names, ids, tool names).
pub const CAPTURE_CAP: usize = 256;

/// A scalar's raw JSON text, read piece by piece as it streams: at most
/// [`CAPTURE_CAP`] bytes, and a longer one is not taken at all. Shared by the
/// [`Walker`] and the request guard, which capture by the same rule.
#[derive(Debug, Clone)]
pub(crate) struct Capture {
    buf: Vec<u8>,
    over: bool,
}

impl Capture {
    pub(crate) fn new() -> Capture {
        Capture {
            buf: Vec::with_capacity(CAPTURE_CAP),
            over: false,
        }
    }

    /// Start a new scalar with `first`.
    pub(crate) fn start(&mut self, first: &[u8]) {
        self.buf.clear();
        self.over = false;
        self.push(first);
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
        if self.buf.len() + bytes.len() > CAPTURE_CAP {
            self.over = true;
        } else {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// The text read, unless it was too long.
    pub(crate) fn text(&self) -> Option<&[u8]> {
        (!self.over).then_some(self.buf.as_slice())
    }
}

/// The value of a JSON string given as its raw text (quotes included),
/// escapes decoded; a surrogate escape outside a pair reads as U+FFFD, as the
/// SDKs' readers take it. `None` when `raw` is not a JSON string.
pub(crate) fn json_str(raw: &[u8]) -> Option<String> {
    if !raw.contains(&b'\\') {
        let inner = raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
        return std::str::from_utf8(inner).ok().map(str::to_owned);
    }
    serde_json::from_slice(&crate::audit::lone_surrogates_as_replacement(raw)).ok()
}

/// A captured scalar in one spelling, so that it compares by value: a string
/// with an escape is written again as serde_json writes strings (`"tools\/call"`
/// and `"tools\u002fcall"` become `"tools/call"`); anything else, a string
/// without an escape included, is already in that spelling and comes back as
/// it is. A server reads the escapes, so a reader that compared the raw text
/// would not see the method or the tool the server runs.
pub(crate) fn canonical(raw: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    use std::borrow::Cow;
    if !raw.contains(&b'\\') {
        return Cow::Borrowed(raw);
    }
    match json_str(raw).and_then(|s| serde_json::to_vec(&s).ok()) {
        Some(v) => Cow::Owned(v),
        None => Cow::Borrowed(raw),
    }
}

/// What the walker does with the value at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Skip it.
    Skip,
    /// Walk into it (containers only; a scalar is captured).
    Descend,
    /// Keep its raw JSON text (scalars only, up to `CAPTURE_CAP`; a container is skipped).
    Capture,
}

/// One step of a path: an object key (decoded, capped) or an array index.
#[derive(Debug, Clone, Copy)]
pub struct Seg {
    key: [u8; 64],
    key_len: u8,
    key_ok: bool,
    pub index: Option<u64>,
}

impl Seg {
    fn new() -> Seg {
        Seg {
            key: [0; 64],
            key_len: 0,
            key_ok: false,
            index: None,
        }
    }

    /// The key, if this step is a key no longer than 64 bytes.
    pub fn key(&self) -> Option<&[u8]> {
        (self.key_ok && self.index.is_none())
            .then(|| self.key.get(..self.key_len as usize).unwrap_or(&[]))
    }

    pub fn is(&self, k: &[u8]) -> bool {
        self.key() == Some(k)
    }
}

/// Events a walker reports.
#[derive(Debug)]
pub enum Event<'a> {
    /// A captured scalar's raw JSON text at `path`.
    Scalar(&'a [Seg], &'a [u8]),
    /// A container at `path` was entered (`true` for an object).
    Enter(&'a [Seg], bool),
    /// A container at `path` ended.
    Leave(&'a [Seg]),
}

/// A streaming walker. `decide(path)` says what to do with each value.
#[derive(Debug)]
pub struct Walker {
    lex: Tokenizer,
    /// `path[i]`: the child currently open in container `i`.
    path: Vec<Seg>,
    /// Per open container: object or array, and an array's next index.
    objs: Vec<(bool, u64)>,
    cap: Capture,
    capturing: bool,
    in_num: bool,
    pending_key: Seg,
    done: bool,
}

impl Default for Walker {
    fn default() -> Self {
        Walker::new()
    }
}

impl Walker {
    /// Read a lone surrogate escape (`"\\ud83d"`) as U+FFFD instead of
    /// failing the walk: [`crate::tokenizer::Tokenizer::set_lone_surrogates`].
    pub fn set_lone_surrogates(&mut self, on: bool) {
        self.lex.set_lone_surrogates(on);
    }

    pub fn new() -> Walker {
        Walker {
            lex: Tokenizer::default(),
            path: Vec::with_capacity(16),
            objs: Vec::with_capacity(16),
            cap: Capture::new(),
            capturing: false,
            in_num: false,
            pending_key: Seg::new(),
            done: false,
        }
    }

    pub fn reset(&mut self) {
        self.lex.reset();
        self.path.clear();
        self.objs.clear();
        self.capturing = false;
        self.in_num = false;
        self.done = false;
    }

    /// Whether the top-level value is complete.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Feed a chunk; `decide` picks what to do with each value, `on` receives events.
    pub fn feed<D, F>(&mut self, chunk: &[u8], decide: &mut D, on: &mut F) -> Result<(), Error>
    where
        D: FnMut(&[Seg]) -> Want,
        F: FnMut(Event<'_>),
    {
        let mut pos = 0;
        loop {
            let tok = self.lex.next(chunk, &mut pos)?;
            if tok == Tok::NeedMore {
                return Ok(());
            }
            self.step(tok, chunk, decide, on);
        }
    }

    /// The input ended.
    pub fn finish<D, F>(&mut self, decide: &mut D, on: &mut F) -> Result<(), Error>
    where
        D: FnMut(&[Seg]) -> Want,
        F: FnMut(Event<'_>),
    {
        loop {
            let tok = self.lex.next_eof()?;
            if tok == Tok::Eof {
                return Ok(());
            }
            self.step(tok, &[], decide, on);
        }
    }

    /// A value starts in the innermost container: set its path step.
    fn child_start(&mut self) {
        let d = self.objs.len();
        self.path.truncate(d.saturating_sub(1));
        let Some((obj, next)) = self.objs.last_mut() else {
            return;
        };
        if *obj {
            self.path.push(self.pending_key);
        } else {
            let mut s = Seg::new();
            s.index = Some(*next);
            *next += 1;
            self.path.push(s);
        }
    }

    fn step<D, F>(&mut self, tok: Tok, chunk: &[u8], decide: &mut D, on: &mut F)
    where
        D: FnMut(&[Seg]) -> Want,
        F: FnMut(Event<'_>),
    {
        match tok {
            Tok::StrEnd if self.lex.after_key() => {
                let mut s = Seg::new();
                let k = self.lex.key();
                if k.len() <= 64 && !self.lex.key_overflowed() {
                    if let Some(d) = s.key.get_mut(..k.len()) {
                        d.copy_from_slice(k);
                    }
                    s.key_len = k.len() as u8;
                    s.key_ok = true;
                }
                self.pending_key = s;
            }
            Tok::EndObject | Tok::EndArray => {
                self.objs.pop();
                self.path.truncate(self.objs.len());
                on(Event::Leave(&self.path));
                if self.objs.is_empty() {
                    self.done = true;
                }
            }
            Tok::BeginObject | Tok::BeginArray => {
                let obj = tok == Tok::BeginObject;
                let want = if self.objs.is_empty() {
                    Want::Descend
                } else {
                    self.child_start();
                    decide(&self.path)
                };
                if want == Want::Descend {
                    self.objs.push((obj, 0));
                    on(Event::Enter(&self.path, obj));
                } else {
                    self.lex.skip_one(self.objs.len() as u32);
                }
            }
            Tok::StrBegin { key: false } | Tok::Lit(_) => {
                let want = if self.objs.is_empty() {
                    Want::Skip
                } else {
                    self.child_start();
                    decide(&self.path)
                };
                if let Tok::Lit(l) = tok {
                    if want != Want::Skip {
                        on(Event::Scalar(&self.path, l.text()));
                    }
                } else if want == Want::Skip {
                    self.lex.skip_one(self.objs.len() as u32);
                } else {
                    self.start_cap(b"\"");
                }
            }
            Tok::NumSpan(a, b) => {
                if !self.in_num {
                    self.in_num = true;
                    let want = if self.objs.is_empty() {
                        Want::Skip
                    } else {
                        self.child_start();
                        decide(&self.path)
                    };
                    if want == Want::Skip {
                        self.in_num = false;
                        self.lex.skip_one(self.objs.len() as u32);
                        return;
                    }
                    self.start_cap(b"");
                }
                self.cap.push(chunk.get(a..b).unwrap_or(&[]));
            }
            Tok::StrSpan(a, b) => {
                if self.capturing {
                    self.cap.push(chunk.get(a..b).unwrap_or(&[]));
                }
            }
            Tok::StrHeld => {
                // A unit split across chunks (an escape, a UTF-8 sequence).
                if self.capturing {
                    self.cap.push(self.lex.held());
                }
            }
            Tok::StrEnd | Tok::NumEnd => {
                self.in_num = false;
                if self.capturing {
                    if tok == Tok::StrEnd {
                        self.cap.push(b"\"");
                    }
                    self.capturing = false;
                    if let Some(text) = self.cap.text() {
                        on(Event::Scalar(&self.path, text));
                    }
                }
            }
            Tok::Skipped(_) | Tok::StrBegin { key: true } | Tok::NeedMore | Tok::Eof => {}
        }
    }

    fn start_cap(&mut self, first: &[u8]) {
        self.capturing = true;
        self.cap.start(first);
    }
}

#[cfg(test)]
mod tests {
    use super::{canonical, json_str};

    #[test]
    fn strings_compare_by_value_whatever_their_escapes() {
        for (raw, want) in [
            (&br#""tools/call""#[..], &br#""tools/call""#[..]),
            (br#""tools\/call""#, br#""tools/call""#),
            (br#""tools\u002fcall""#, br#""tools/call""#),
            (br#""\u006cist_things""#, br#""list_things""#),
            (br#""caf\u00e9""#, "\"café\"".as_bytes()),
            (br#""a\"b\\c\n""#, br#""a\"b\\c\n""#),
            (br#""\ud800x""#, "\"\u{fffd}x\"".as_bytes()),
            (br#""\ud83d\ude00""#, "\"😀\"".as_bytes()),
            (b"17", b"17"),
            (b"null", b"null"),
        ] {
            assert_eq!(&*canonical(raw), want, "{}", String::from_utf8_lossy(raw));
        }
        assert_eq!(json_str(br#""\u0073tore""#).as_deref(), Some("store"));
        assert_eq!(json_str(b"\"plain\"").as_deref(), Some("plain"));
        assert_eq!(json_str(b"17"), None);
    }
}
