//! Read a few fields out of a JSON-RPC message as it streams by, without
//! building it: the method and id of a request, the id of a response and the
//! first key of its result, the tools of a `tools/list` result. Everything not
//! asked for is skipped (still validated) at full speed.

use crate::error::Error;
use crate::tokenizer::{Tok, Tokenizer};

/// Longest scalar kept raw (method names, ids), quotes and escapes
/// included. Protects: the memory a line's facts take, and a pending
/// request's key. A longer one is not taken (an id then is one the proxy
/// cannot match).
pub const CAPTURE_CAP: usize = 256;

/// Longest tool name kept raw, quotes and escapes included. MCP's names are
/// at most 128 characters; written with each one escaped as a surrogate pair
/// (12 bytes), that is 1,538 bytes. A longer name is not read: its call is
/// one of a tool the proxy does not know, and a listing's entry by it
/// teaches nothing. Earlier builds read no name over [`CAPTURE_CAP`], so a
/// typed tool named by 255 bytes (43 CJK characters written as `\u`
/// escapes) was taken for untyped. Protects: the memory of a line's facts.
pub const NAME_CAP: usize = 2048;

/// Longest tool name, decoded, that the proxy learns from a `tools/list`
/// answer (128 characters of up to 4 UTF-8 bytes). Protects: the tool
/// table's memory (the session's, 100,000 names at most).
pub const NAME_BYTES: usize = 512;

/// Longest `nextCursor` the session keeps to ask for the next page of its
/// own `tools/list`. A cursor is opaque and may be long (a server that
/// writes its state into it); earlier builds kept none over
/// [`CAPTURE_CAP`], and a listing whose cursor was longer ended at its first
/// page, leaving the tools on later pages unknown. Protects: the session's
/// memory; a longer cursor ends the listing there (the tools read count,
/// those on later pages are not known).
pub const CURSOR_CAP: usize = 64 * 1024;

/// A scalar's raw JSON text, read piece by piece as it streams: at most
/// the cap it was started with ([`CAPTURE_CAP`], [`NAME_CAP`]), and a
/// longer one is not taken at all. Shared by the [`Walker`] and the request
/// guard, which capture by the same rule.
#[derive(Debug, Clone)]
pub(crate) struct Capture {
    buf: Vec<u8>,
    over: bool,
    cap: usize,
}

impl Capture {
    pub(crate) fn new() -> Capture {
        Capture {
            buf: Vec::with_capacity(CAPTURE_CAP),
            over: false,
            cap: CAPTURE_CAP,
        }
    }

    /// Start a new scalar with `first`, taken up to `cap` bytes.
    pub(crate) fn start(&mut self, first: &[u8], cap: usize) {
        self.buf.clear();
        self.over = false;
        self.cap = cap;
        self.push(first);
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
        if self.over {
            return;
        }
        if self.buf.len() + bytes.len() > self.cap {
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
        return plain_str(raw).map(str::to_owned);
    }
    serde_json::from_slice(&crate::audit::lone_surrogates_as_replacement(raw)).ok()
}

/// The value of a JSON string without escapes, read in place: `raw`
/// without its quotes, if it has them, holds no backslash and is UTF-8.
fn plain_str(raw: &[u8]) -> Option<&str> {
    let inner = raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    if inner.contains(&b'\\') {
        return None;
    }
    std::str::from_utf8(inner).ok()
}

/// [`unquote`] into `out` (cleared first). A string without escapes (any
/// tool's usual name) is copied into memory `out` already holds, as
/// [`json_str`] reads it ([`plain_str`]); anything else is read by
/// [`unquote`].
pub(crate) fn unquote_into(raw: &[u8], out: &mut String) {
    out.clear();
    match plain_str(raw) {
        Some(s) => out.push_str(s),
        None => out.push_str(&unquote(raw)),
    }
}

/// A JSON string's value ([`json_str`]), or, where `raw` is not a JSON
/// string, its text without the quotes around it, read leniently: a name
/// for logs and lookups that never fails.
pub(crate) fn unquote(raw: &[u8]) -> String {
    if let Some(s) = json_str(raw) {
        return s;
    }
    let inner = raw
        .strip_prefix(b"\"")
        .and_then(|r| r.strip_suffix(b"\""))
        .unwrap_or(raw);
    String::from_utf8_lossy(inner).into_owned()
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

/// A JSON-RPC id (raw JSON, as captured) in one spelling, so that a request's
/// id and the id its answer echoes compare by value: a string as
/// [`canonical`] writes it, a number as its exact value (`7`, `7.0`, `7e0` and
/// `70e-1` are all `7`; `-0` is `0`; a fraction is its significant digits and
/// a power of ten, `1.5` as `15e-1`). A server that parses an id and writes it
/// again (JavaScript's `JSON.stringify`, pydantic) may change its spelling,
/// never its value. Anything else (`null`, a number whose exponent does not
/// fit an `i64`) comes back as it is.
pub(crate) fn id_key(raw: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    use std::borrow::Cow;
    match raw.first() {
        Some(b'"') => canonical(raw),
        Some(b'-' | b'0'..=b'9') if !plain_integer(raw) => match number_key(raw) {
            Some(k) => Cow::Owned(k),
            None => Cow::Borrowed(raw),
        },
        _ => Cow::Borrowed(raw),
    }
}

/// The other spelling both SDK clients match an answer's id by, for an id in
/// [`id_key`]'s form: the number `7` for the string `"7"`, and the string for
/// the number (the TypeScript client reads an answer's id with `Number()`,
/// the Python one turns a string of digits into an int). Integers only, in
/// their plain form; `None` for anything else.
pub(crate) fn id_alt(key: &[u8]) -> Option<Vec<u8>> {
    if let Some(inner) = key.strip_prefix(b"\"").and_then(|k| k.strip_suffix(b"\"")) {
        return plain_integer(inner).then(|| inner.to_vec());
    }
    plain_integer(key).then(|| {
        let mut v = Vec::with_capacity(key.len() + 2);
        v.push(b'"');
        v.extend_from_slice(key);
        v.push(b'"');
        v
    })
}

/// An integer as [`number_key`] writes one: an optional minus, then digits
/// without a leading zero (`0` alone, never `-0`).
fn plain_integer(raw: &[u8]) -> bool {
    let digits = raw.strip_prefix(b"-").unwrap_or(raw);
    match digits {
        [] => false,
        [b'0'] => raw.len() == 1,
        [b'0', ..] => false,
        _ => digits.iter().all(u8::is_ascii_digit),
    }
}

/// The exact value of a JSON number, written one way: digits without leading
/// or trailing zeros and a power of ten, the power spelled out as zeros when it
/// is not negative and the integer stays under 40 digits. `None` when `raw` is
/// not a JSON number or its exponent does not fit an `i64`.
fn number_key(raw: &[u8]) -> Option<Vec<u8>> {
    let (neg, rest) = match raw.strip_prefix(b"-") {
        Some(r) => (true, r),
        None => (false, raw),
    };
    let int_len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let (int, rest) = rest.split_at(int_len);
    if int.is_empty() || (int.len() > 1 && int.first() == Some(&b'0')) {
        return None;
    }
    let (frac, rest) = match rest.strip_prefix(b".") {
        Some(r) => {
            let n = r.iter().take_while(|b| b.is_ascii_digit()).count();
            if n == 0 {
                return None;
            }
            r.split_at(n)
        }
        None => (&[][..], rest),
    };
    let mut exp: i64 = 0;
    if let Some(r) = rest.strip_prefix(b"e").or_else(|| rest.strip_prefix(b"E")) {
        let (eneg, r) = match r.first() {
            Some(b'-') => (true, r.get(1..).unwrap_or(&[])),
            Some(b'+') => (false, r.get(1..).unwrap_or(&[])),
            _ => (false, r),
        };
        if r.is_empty() {
            return None;
        }
        for &b in r {
            if !b.is_ascii_digit() {
                return None;
            }
            exp = exp.checked_mul(10)?.checked_add(i64::from(b - b'0'))?;
        }
        if eneg {
            exp = -exp;
        }
    } else if !rest.is_empty() {
        return None;
    }
    let digits: Vec<u8> = int.iter().chain(frac).copied().collect();
    let lead = digits.iter().take_while(|&&b| b == b'0').count();
    let digits = digits.get(lead..).unwrap_or(&[]);
    let trail = digits.iter().rev().take_while(|&&b| b == b'0').count();
    let digits = digits.get(..digits.len() - trail).unwrap_or(&[]);
    if digits.is_empty() {
        return Some(b"0".to_vec());
    }
    let frac_len = i64::try_from(frac.len()).ok()?;
    let trail = i64::try_from(trail).ok()?;
    let exp = exp.checked_sub(frac_len)?.checked_add(trail)?;
    let mut out = Vec::with_capacity(digits.len() + 24);
    if neg {
        out.push(b'-');
    }
    out.extend_from_slice(digits);
    match usize::try_from(exp) {
        Ok(zeros) if digits.len() + zeros < 40 => out.resize(out.len() + zeros, b'0'),
        _ => {
            out.push(b'e');
            out.extend_from_slice(exp.to_string().as_bytes());
        }
    }
    Some(out)
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
    /// [`Want::Capture`], up to this many bytes.
    CaptureUpTo(usize),
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
    /// A scalar at `path` was to be captured but was longer than its cap:
    /// not taken (a reader still reads it, and the last of duplicate keys
    /// wins, so an earlier one's value is not its value).
    Untaken(&'a [Seg]),
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
                    self.start_cap(b"\"", want);
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
                    self.start_cap(b"", want);
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
                    match self.cap.text() {
                        Some(text) => on(Event::Scalar(&self.path, text)),
                        None => on(Event::Untaken(&self.path)),
                    }
                }
            }
            Tok::Skipped(_) | Tok::StrBegin { key: true } | Tok::NeedMore | Tok::Eof => {}
        }
    }

    fn start_cap(&mut self, first: &[u8], want: Want) {
        self.capturing = true;
        let cap = match want {
            Want::CaptureUpTo(n) => n,
            _ => CAPTURE_CAP,
        };
        self.cap.start(first, cap);
    }
}

#[cfg(test)]
mod tests {
    use super::{canonical, id_alt, id_key, json_str, unquote, unquote_into};

    /// Reading a name into a kept buffer gives what [`unquote`] gives, on
    /// plain names, escapes, bad UTF-8 and text that is not a string, and
    /// whatever the buffer held before.
    #[test]
    fn unquote_into_reads_as_unquote() {
        let mut out = String::from("left over from the last line");
        for raw in [
            &b"\"echo\""[..],
            b"\"\"",
            b"\"",
            b"\"caf\xc3\xa9\"",
            b"\"bad \xff\"",
            br#""a\/b""#,
            br#""\u0073tore""#,
            br#""\ud800x""#,
            b"17",
            b"null",
            b"\"unclosed",
            b"",
        ] {
            unquote_into(raw, &mut out);
            assert_eq!(out, unquote(raw), "{}", String::from_utf8_lossy(raw));
        }
    }

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

    #[test]
    fn ids_compare_by_value_whatever_their_spelling() {
        for (raw, want) in [
            (&b"7"[..], &b"7"[..]),
            (b"0", b"0"),
            (b"-0", b"0"),
            (b"-0.0e5", b"0"),
            (b"7.0", b"7"),
            (b"7e0", b"7"),
            (b"7E+0", b"7"),
            (b"70e-1", b"7"),
            (b"0.7e1", b"7"),
            (b"700", b"700"),
            (b"7e2", b"700"),
            (b"-12.50", b"-125e-1"),
            (b"1.5", b"15e-1"),
            (b"15e-1", b"15e-1"),
            (b"1e40", b"1e40"),
            (b"1e38", b"100000000000000000000000000000000000000"),
            (
                b"123456789012345678901234567890",
                b"123456789012345678901234567890",
            ),
            (b"1e99999999999999999999", b"1e99999999999999999999"),
            (br#""7""#, br#""7""#),
            (br#""\u0037""#, br#""7""#),
            (b"null", b"null"),
            (b"", b""),
        ] {
            assert_eq!(&*id_key(raw), want, "{}", String::from_utf8_lossy(raw));
        }
        // Each spelling of one value has the key of every other.
        let seven = [&b"7"[..], b"7.0", b"7e0", b"0.07e2", b"700e-2"];
        for a in seven {
            assert_eq!(id_key(a), id_key(b"7"));
        }
        assert_ne!(id_key(b"7"), id_key(b"7.5"));
        assert_ne!(id_key(b"7"), id_key(br#""7""#));
        // The other spelling the SDK clients match by: integers only.
        assert_eq!(id_alt(br#""7""#).as_deref(), Some(&b"7"[..]));
        assert_eq!(id_alt(b"-12").as_deref(), Some(&br#""-12""#[..]));
        for none in [
            &br#""07""#[..],
            br#""7.0""#,
            br#"" 7""#,
            br#""-0""#,
            b"15e-1",
            br#""x""#,
        ] {
            assert_eq!(id_alt(none), None, "{}", String::from_utf8_lossy(none));
        }
    }
}
