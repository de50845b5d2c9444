//! A push tokenizer for strict RFC 8259 JSON.
//!
//! The caller feeds chunks split at any byte and pulls one [`Tok`] at a time
//! with [`Tokenizer::next`]; spans in tokens are ranges of the chunk being fed,
//! so nothing is copied. [`Tok::NeedMore`] means the chunk is used up; the end of
//! input is announced with [`Tokenizer::next_eof`].
//!
//! Memory is fixed: the container stack is preallocated to the depth limit, a
//! string's state is a few counters plus a 12-byte carry for an escape or UTF-8
//! sequence split across chunks, and a key's decoded prefix is capped at
//! [`KEY_CAP`] bytes. Nothing grows with the size of a string, number or document.
//!
//! Strings are scanned by *units*: one ASCII byte, one UTF-8 sequence, one
//! escape, or one escaped surrogate pair. A policy may give a string an
//! allowance (decoded bytes and encoded bytes); the tokenizer then emits only the
//! longest prefix of whole units within it and keeps validating the rest, so a
//! cut never lands inside a UTF-8 sequence, an escape or a surrogate pair.
//!
//! A policy may also ask it to skip: the rest of the current container
//! ([`Tokenizer::skip_rest`]) or one value ([`Tokenizer::skip_one`]). Skipped
//! bytes are still validated; no tokens are emitted for them, and the number of
//! values skipped at the container's level is reported in [`Tok::Skipped`].

use crate::error::{Error, ErrorKind};
use crate::scan::{self, below};
use crate::skim;

/// Default limit on container nesting accepted by the tokenizer.
///
/// Protects: the tokenizer's stack (one byte per level, preallocated) and every
/// layer above it that keeps per-level state. Does not bound: how deep the
/// *output* is (that is the budget's `max_depth`), nor time or input size.
/// Documents deeper than this are refused with [`ErrorKind::TooDeep`], never cut.
pub const DEFAULT_MAX_NESTING: u32 = 1024;

/// How many decoded bytes of a key are kept for matching and for JSON Pointers.
pub const KEY_CAP: usize = 128;

/// U+FFFD in UTF-8: what a decoded key holds for a lone surrogate escape.
const REPLACEMENT: &[u8] = "\u{FFFD}".as_bytes();

/// The tokens a policy sees. Spans index the chunk passed to [`Tokenizer::next`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tok {
    /// The chunk is used up; feed the next one (or call `next_eof`).
    NeedMore,
    BeginObject,
    EndObject,
    BeginArray,
    EndArray,
    /// A string starts; `key` says whether it is an object key.
    StrBegin {
        key: bool,
    },
    /// Raw (still JSON-encoded) bytes of whole kept units, `chunk[a..b]`.
    StrSpan(usize, usize),
    /// One kept unit that was split across chunks: its bytes are in [`Tokenizer::held`].
    StrHeld,
    /// The closing quote was consumed. [`Tokenizer::string_cut`] says whether
    /// units were left out; [`Tokenizer::string_decoded_len`] gives the full length.
    StrEnd,
    /// Raw bytes of a number, `chunk[a..b]`.
    NumSpan(usize, usize),
    /// The number ended (its terminator is not consumed).
    NumEnd,
    /// A complete `true`, `false` or `null`.
    Lit(Lit),
    /// The input ended after one complete value (from `next_eof` only).
    Eof,
    /// A skip ended; the payload is how many values were skipped at the skip's level
    /// (for [`Tokenizer::skip_rest`], the container's remaining items or members plus
    /// the initial count; for [`Tokenizer::skip_one`], 1).
    Skipped(u64),
}

/// The three literal names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lit {
    True,
    False,
    Null,
}

impl Lit {
    /// The literal's exact spelling.
    pub fn text(self) -> &'static [u8] {
        match self {
            Lit::True => b"true",
            Lit::False => b"false",
            Lit::Null => b"null",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A value must come (document start, after `,` in an array, after `:`).
    Value,
    /// After `[`: a value or `]`.
    ArrFirst,
    /// After `{`: a key or `}`.
    ObjFirst,
    /// After `,` in an object: a key.
    ObjKey,
    /// After a key: `:`.
    Colon,
    /// After a value inside a container: `,` or the closer.
    After,
    /// After the top-level value: whitespace only.
    Done,
    Str,
    /// Inside a number (its sub-state is `num_st`).
    Num,
    Lit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumSt {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
}

impl NumSt {
    fn can_end(self) -> bool {
        matches!(
            self,
            NumSt::Zero | NumSt::Int | NumSt::Frac | NumSt::ExpDigits
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Esc {
    None,
    /// After `\`.
    Backslash,
    /// Reading the `n`-th hex digit (0..4) of a `\u` escape.
    Hex(u8),
    /// After a high surrogate: need `\`.
    LowBackslash,
    /// After a high surrogate and `\`: need `u`.
    LowU,
    /// Reading the `n`-th hex digit of the low surrogate.
    LowHex(u8),
}

#[derive(Debug, Clone, Copy)]
struct Skip {
    /// The depth whose level is counted and whose end stops the skip.
    depth: u32,
    count: u64,
    /// `skip_one`: stop when one value at `depth` completes.
    one: bool,
}

/// Where the span [`Tokenizer::next`] just returned stopped, when the next
/// call needs no scan: at its string's closing quote (the quote is the next
/// byte), or at its number's terminator (seen, not consumed). The next call
/// then ends the value at once, in the small inlined part of `next`, which
/// spares a kept string or number (two tokens: its span, then its end) one
/// trip through the whole machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    /// Read on from `*pos`.
    Scan,
    /// `chunk[*pos]` is the closing quote of the string in progress.
    Quote,
    /// The number in progress ended before `chunk[*pos]`.
    NumEnd,
}

/// [`Tokenizer::fast_skip`], compiled for the block level in use.
struct SkipJob<'a, 'b> {
    lex: &'a mut Tokenizer,
    chunk: &'b [u8],
    pos: &'a mut usize,
}

impl scan::BlockJob for SkipJob<'_, '_> {
    type Out = Option<Tok>;
    /// Compiled for AVX-512, the skip loop ran 8-14% slower on compact
    /// structure (Zen 5): its work is the token dispatch, not the masks.
    /// Long strings inside a skip still get AVX-512: [`fast_string`] is a job
    /// of its own.
    const AVX512: bool = false;
    #[inline(always)]
    fn run<B: scan::Blocks>(self, blocks: B) -> Option<Tok> {
        self.lex.fast_skip_in(blocks, self.chunk, self.pos)
    }
}

/// The block skim's view of a state between tokens inside a container.
fn skim_prev(state: State) -> Option<skim::Prev> {
    Some(match state {
        State::ObjFirst => skim::Prev::ObjOpen,
        State::ArrFirst => skim::Prev::ArrOpen,
        State::ObjKey => skim::Prev::Comma,
        // A value must come: after `:` or after `,` in an array.
        State::Value => skim::Prev::Colon,
        State::After => skim::Prev::ValueEnd,
        State::Colon => skim::Prev::KeyEnd,
        State::Done | State::Str | State::Num | State::Lit => return None,
    })
}

/// The state after a block skim that ended after `prev`.
fn skim_state(prev: skim::Prev, in_obj: bool) -> State {
    match prev {
        skim::Prev::ObjOpen => State::ObjFirst,
        skim::Prev::ArrOpen => State::ArrFirst,
        skim::Prev::Comma if in_obj => State::ObjKey,
        skim::Prev::Comma | skim::Prev::Colon => State::Value,
        skim::Prev::ValueEnd => State::After,
        skim::Prev::KeyEnd => State::Colon,
    }
}

/// Byte classes inside strings: 0 = plain ASCII, 1 = `"`, 2 = `\`, 3 = control, 4 = non-ASCII.
static STR_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = if i < 0x20 {
            3
        } else if i == b'"' as usize {
            1
        } else if i == b'\\' as usize {
            2
        } else if i >= 0x80 {
            4
        } else {
            0
        };
        i += 1;
    }
    t
};

/// A hex digit's value, or 0xFF.
static HEX: [u8; 256] = {
    let mut t = [0xFFu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// After a backslash: the byte a one-character escape stands for, 0xFF for
/// `u`, 0 for a byte that cannot follow a backslash. A table rather than a
/// `match`, which compiles to an indirect jump that mispredicts on mixed text.
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t[b'/' as usize] = b'/';
    t[b'b' as usize] = 0x08;
    t[b'f' as usize] = 0x0C;
    t[b'n' as usize] = b'\n';
    t[b'r' as usize] = b'\r';
    t[b't' as usize] = b'\t';
    t[b'u' as usize] = 0xFF;
    t
};

#[inline]
fn hex_val(b: u8) -> Option<u32> {
    let v = HEX[b as usize];
    (v != 0xFF).then_some(v as u32)
}

/// Length, and the allowed range of the first continuation byte, for a UTF-8 lead byte.
#[inline]
fn utf8_lead(b: u8) -> Option<(u8, u8, u8)> {
    match b {
        0xC2..=0xDF => Some((1, 0x80, 0xBF)),
        0xE0 => Some((2, 0xA0, 0xBF)),
        0xE1..=0xEC | 0xEE..=0xEF => Some((2, 0x80, 0xBF)),
        0xED => Some((2, 0x80, 0x9F)),
        0xF0 => Some((3, 0x90, 0xBF)),
        0xF1..=0xF3 => Some((3, 0x80, 0xBF)),
        0xF4 => Some((3, 0x80, 0x8F)),
        _ => None,
    }
}

/// Four hex digits at `s[i..i + 4]` (also sizes the `\u` escapes of a cut
/// text's kept bytes in the MCP projection).
#[inline]
pub(crate) fn hex4(s: &[u8], i: usize) -> Option<u32> {
    let w: [u8; 4] = s.get(i..i + 4)?.try_into().ok()?;
    hex4_word(u32::from_le_bytes(w))
}

/// The code point of a whole `\uXXXX` escape at `s[i..]`.
#[inline]
pub(crate) fn u_escape(s: &[u8], i: usize) -> Option<u32> {
    if s.get(i..i + 2)? != b"\\u" {
        return None;
    }
    hex4(s, i + 2)
}

/// Whether `s[i..]` begins with the escape of a low surrogate.
pub(crate) fn is_low_escape(s: &[u8], i: usize) -> bool {
    u_escape(s, i).is_some_and(|lo| (0xDC00..=0xDFFF).contains(&lo))
}

/// The value of four hex digits packed little-endian in `w` (the first digit
/// in the low byte), checked and combined in the register: no table loads,
/// which sat on the critical path of every `\u` escape. `hex4_table` is
/// the obvious twin it is tested against.
#[inline(always)]
fn hex4_word(w: u32) -> Option<u32> {
    const ONES: u32 = 0x0101_0101;
    const HIGH: u32 = 0x8080_8080;
    // For ASCII bytes each byte's sum below stays under 0x100, so no carry
    // crosses into the next byte: bit 7 of a byte says `byte >= lo`. A
    // non-ASCII byte may carry, but then the answer is `None` anyway.
    let at_least = |v: u32, lo: u32| v.wrapping_add(ONES * (0x80 - lo)) & HIGH;
    let digit = at_least(w, 0x30) & !at_least(w, 0x3A);
    // `| 0x20` folds `A`–`F` onto `a`–`f` and maps nothing else there.
    let folded = w | 0x2020_2020;
    let letter = at_least(folded, 0x61) & !at_least(folded, 0x67);
    if w & HIGH != 0 || digit | letter != HIGH {
        return None;
    }
    // A letter has bit 6 set, a digit not: `A`/`a` is 1 + 9.
    let nib = (w & 0x0F0F_0F0F) + 9 * ((w >> 6) & ONES);
    let pairs = ((nib << 4) | (nib >> 8)) & 0x00FF_00FF;
    Some((pairs & 0xFF) << 8 | pairs >> 16)
}

/// [`hex4_word`]'s obvious twin: four table lookups.
#[cfg(test)]
fn hex4_table(s: &[u8]) -> Option<u32> {
    let mut v = 0u32;
    for &b in s.get(..4)? {
        v = v << 4 | hex_val(b)?;
    }
    Some(v)
}

/// A complete, valid escape starting at `s[i] == b'\\'`: (encoded length,
/// decoded length, the code point). `None` when it is split by the end of `s`
/// or invalid (the byte-wise machine then handles it).
#[inline(always)]
fn inline_escape(s: &[u8], i: usize) -> Option<(usize, u64, u32)> {
    let e = *s.get(i + 1)?;
    if e != b'u' {
        let d = ESCAPE[e as usize];
        return (d != 0).then_some((2, 1, d as u32));
    }
    let cp = hex4(s, i + 2)?;
    match cp {
        0xD800..=0xDBFF => {
            let low = u_escape(s, i + 6)?;
            if !(0xDC00..=0xDFFF).contains(&low) {
                return None;
            }
            Some((12, 4, 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)))
        }
        0xDC00..=0xDFFF => None,
        // Not a surrogate: its UTF-8 length, without a branch.
        _ => Some((6, 1 + (cp >= 0x80) as u64 + (cp >= 0x800) as u64, cp)),
    }
}

/// The byte a one-character escape (`\"`, `\n`, …) stands for.
#[inline]
fn simple_escape(e: u8) -> Option<u8> {
    match ESCAPE[e as usize] {
        0 | 0xFF => None,
        d => Some(d),
    }
}

/// Encode a scalar value as UTF-8 into `out`, returning the length.
fn encode_utf8(cp: u32, out: &mut [u8; 4]) -> usize {
    char::from_u32(cp).map_or(0, |c| c.encode_utf8(out).len())
}

/// What [`fast_string`] covered: whole, valid units in `[start, end)`, with
/// their decoded bytes and characters; `quote` when `chunk[end]` is the
/// closing quote. Otherwise the byte at `end` (if any) needs the byte-wise
/// machine: an escape split by the chunk end or invalid, a control byte, or a
/// UTF-8 sequence that is invalid or split by the chunk end.
///
/// The layout is fixed so that `dec` and `chars` are not neighbours: the
/// callee writes the fields one by one, and a caller that read both with
/// one 16-byte load (as the compiler did for the two sums they feed) could
/// not take the load from those stores and stalled on every call.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct FastStr {
    dec: u64,
    end: usize,
    chars: u64,
    quote: bool,
}

impl FastStr {
    /// Nothing covered: the byte at `at` needs the byte-wise machine.
    fn none(at: usize) -> FastStr {
        FastStr {
            end: at,
            quote: false,
            dec: 0,
            chars: 0,
        }
    }
}

/// Scan a string body from `start` block-wise: special bytes come from
/// 64-byte masks, escapes are taken whole in place (a block's one-character
/// escapes at once, from two more masks), UTF-8 is checked on the same blocks
/// (`std` re-checks the span only on an alarm), and characters are counted
/// from the continuation-byte masks. Compiled once per [`scan::Blocks`]
/// level, so the block masks inline into this loop.
///
/// Characters are counted only when `chars` asks for them (the request guard
/// limits them; nothing else reads them); otherwise `chars` is 0. The block
/// walk is compiled both ways: on text with many escapes or non-ASCII
/// characters the count is a few percent of the walk.
#[inline(never)]
fn fast_string(chunk: &[u8], start: usize, chars: bool, passes: &mut Passes) -> FastStr {
    // A string that ends within 64 bytes, plain ASCII up to its quote (a URL,
    // a date, an id, a sentence), needs none of the walk's setup.
    if let Some(q) = scan::medium_string(chunk, start) {
        let run = (q - start) as u64;
        return FastStr {
            end: q,
            quote: true,
            dec: run,
            chars: if chars { run } else { 0 },
        };
    }
    string_walk(chunk, start, chars, passes)
}

/// [`fast_string`] without its first try as a medium string: the block walk
/// at the CPU's level, for a caller that has made that try itself.
#[inline(never)]
fn string_walk(chunk: &[u8], start: usize, chars: bool, passes: &mut Passes) -> FastStr {
    fast_string_at(scan::level(), chunk, start, chars, passes)
}

/// Which passes of the block walk a string has needed so far
/// ([`string_blocks`]' `U` and `EAGER`): a string that goes on in the next
/// chunk starts there in the pass it had reached, not in the first one
/// again. Any pass is right for any block, so a stale value costs only
/// speed.
#[derive(Debug, Clone, Copy, Default)]
struct Passes {
    u: bool,
    eager: bool,
}

/// [`fast_string`]'s block walk at a given level: the CPU's own, or (in
/// tests) any other, the portable twin among them.
#[inline(always)]
fn fast_string_at(
    level: scan::Level,
    chunk: &[u8],
    start: usize,
    chars: bool,
    passes: &mut Passes,
) -> FastStr {
    if chars {
        scan::with_blocks_at(level, StrJob::<true>(chunk, start, passes))
    } else {
        scan::with_blocks_at(level, StrJob::<false>(chunk, start, passes))
    }
}

/// The block walk of a string body; `CHARS`: count its characters.
struct StrJob<'a, const CHARS: bool>(&'a [u8], usize, &'a mut Passes);

impl<const CHARS: bool> scan::BlockJob for StrJob<'_, CHARS> {
    type Out = FastStr;
    #[inline(always)]
    fn run<B: scan::Blocks>(self, blocks: B) -> FastStr {
        fast_string_in::<B, CHARS>(blocks, self.0, self.1, self.2)
    }
}

/// [`fast_string`] at one level: whole blocks first ([`string_blocks`]), then
/// from where they stop, the unit walk ([`string_units`]).
#[inline(always)]
fn fast_string_in<B: scan::Blocks, const CHARS: bool>(
    blocks: B,
    chunk: &[u8],
    start: usize,
    passes: &mut Passes,
) -> FastStr {
    // The walk starts in the passes the string has needed so far (for a
    // new string, without the `\u` work and without the UTF-8 check); each
    // stop for one of them goes on with it from there, so there are at most
    // three.
    let (mut less, mut not_chars) = (0, 0);
    let mut at = start;
    let b = loop {
        let b = match (passes.u, passes.eager) {
            (false, false) => string_blocks::<B, CHARS, false, false>(blocks, chunk, at),
            (false, true) => string_blocks::<B, CHARS, false, true>(blocks, chunk, at),
            (true, false) => string_blocks::<B, CHARS, true, false>(blocks, chunk, at),
            (true, true) => string_blocks::<B, CHARS, true, true>(blocks, chunk, at),
        };
        less += b.less;
        not_chars += b.not_chars;
        if !(b.u_seen || b.high_seen) {
            break b;
        }
        passes.u |= b.u_seen;
        passes.eager |= b.high_seen;
        at = b.end;
    };
    let taken = (b.end - start) as u64;
    let (dec, chars) = (taken - less, taken - not_chars);
    if b.quote {
        return FastStr {
            end: b.end,
            quote: true,
            dec,
            chars: if CHARS { chars } else { 0 },
        };
    }
    let f = string_units::<B, CHARS>(blocks, chunk, b.end);
    FastStr {
        end: f.end,
        quote: f.quote,
        dec: dec + f.dec,
        chars: if CHARS { chars + f.chars } else { 0 },
    }
}

/// What [`string_blocks`] took: the whole units in `[start, end)`, how many
/// more encoded bytes than decoded ones they hold (`less`) and how many of
/// their bytes begin no character (`not_chars`, 0 when not counted); `quote`
/// when `chunk[end]` closes the string; `u_seen` when the walk without the
/// `\u` work stopped before a block that needs it, and `high_seen` when the
/// walk without the UTF-8 check stopped before a block that has a
/// non-ASCII byte.
#[derive(Debug, Clone, Copy)]
struct Taken {
    end: usize,
    less: u64,
    not_chars: u64,
    quote: bool,
    u_seen: bool,
    high_seen: bool,
}

/// A string body from `start`, 64 bytes at a time, each block taken whole
/// from its masks: the escape leads come from the backslash runs at once,
/// so one-character escapes cost no step of their own; each `\u` escape is
/// read in place; UTF-8 is checked on the block. Each block starts between
/// units, so nothing is carried from one to the next: a unit that the
/// block's end would split (an escape, a UTF-8 sequence) is left for the next
/// block, which starts at it. Stops before the first block that is not all
/// valid units up to its end or its closing quote (an error, a control
/// byte), and before the last, short block: [`string_units`] goes on from
/// there, with exact errors.
///
/// Without `U`, the walk stops before the first block that has a `\u`
/// escape (`u_seen`); with it, every block with a special byte does the
/// `\u` work, whether it has one or not. On text that mixes `\u` escapes
/// with others, about half the blocks have one, and a branch on the block's
/// own escapes went either way at random; on text without them, the work
/// would be wasted on every block. So [`fast_string_in`] walks a string
/// without `U` until its first `\u` escape, then with it.
///
/// In the same way, without `EAGER` the walk stops before the first block
/// that has a non-ASCII byte (`high_seen`); with it, every block is checked.
/// On text that mixes ASCII and non-ASCII blocks a branch on the block's
/// own bytes goes either way at random (as in `find_block`), and a flag
/// kept from block to block cost 5% of the walk of escape-rich text.
#[inline(always)]
fn string_blocks<B: scan::Blocks, const CHARS: bool, const U: bool, const EAGER: bool>(
    blocks: B,
    chunk: &[u8],
    start: usize,
) -> Taken {
    let mut t = Taken {
        end: start,
        less: 0,
        not_chars: 0,
        quote: false,
        u_seen: false,
        high_seen: false,
    };
    while let Some(w) = chunk
        .get(t.end..t.end + 64)
        .and_then(|w| <&[u8; 64]>::try_from(w).ok())
    {
        scan::prefetch(chunk, t.end + scan::PREFETCH_AHEAD);
        let m = blocks.masks(w);
        if !EAGER && m.high != 0 {
            t.high_seen = true;
            return t;
        }
        // The block's bytes taken: [0, c).
        let mut c = 64u32;
        let mut leads = 0u64;
        // The block's `\u` escapes, none until read.
        let mut u = UEscapes::NONE;
        // Whether the byte at `c` is the closing quote.
        let mut quote = false;
        if m.special != 0 {
            let e = blocks.escape_masks(w);
            leads = scan::escape_leads(e.bs);
            let escaped = leads << 1;
            let stops = m.special & !e.bs & !escaped;
            if stops != 0 {
                c = stops.trailing_zeros();
                if w.get(c as usize) != Some(&b'"') {
                    // A control byte: the unit walk reports it.
                    break;
                }
                quote = true;
            } else if leads >> 63 != 0 {
                // The last byte begins an escape.
                c = 63;
            }
            if escaped & !(e.simple | e.u) & blocks.below(c) != 0 {
                break;
            }
            let ul = leads & (e.u >> 1) & blocks.below(c);
            if U || ul != 0 {
                if !U {
                    t.u_seen = true;
                    return t;
                }
                u = u_escapes(blocks.hex_masks(w), ul);
                if u.bad == 0 {
                    // Neither whole nor valid, though a pair would fit in the
                    // block: the unit walk reports it.
                    break;
                }
                if u.bad < 64 {
                    // Cut by the block's end, or not valid: the next block
                    // starts at it (and stops there if it is not valid).
                    c = u.bad;
                    quote = false;
                }
            }
        }
        if EAGER {
            let flags = blocks.utf8_flags([b' '; 3], w);
            if c == 64 {
                // A sequence the block's end splits: the next block starts at
                // its lead.
                c = blocks.split_lead(w);
            }
            // Bit `c`: whether the sequence before it is whole.
            if flags & blocks.below(c + 1) != 0 {
                break;
            }
        }
        // Step a whole block by the constant, on a branch: stepping by `c`
        // made the next block's load wait for this block's masks. A block
        // taken short (a unit its end splits, the closing quote) is rare.
        // So is one whose escapes are counted only up to `c`: a whole
        // block's sums need not wait for `c`, and without that wait the
        // walk of escape-rich text ran 6% faster.
        if c != 64 {
            t.count(blocks.below(c), leads, m.cont, &u, CHARS);
            t.end += c as usize;
            if quote {
                t.quote = true;
                return t;
            }
            continue;
        }
        t.count(u64::MAX, leads, m.cont, &u, CHARS);
        t.end += 64;
    }
    t
}

impl Taken {
    /// Count what a block gives: its bytes in `taken` (those before the
    /// block's stop), of which `leads` begin escapes, `cont` continue UTF-8
    /// sequences, and `u` holds the `\u` escapes. Characters only with
    /// `chars`.
    #[inline(always)]
    fn count(&mut self, taken: u64, leads: u64, cont: u64, u: &UEscapes, chars: bool) {
        self.less += ((leads | u.less_bits()) & taken).count_ones() as u64;
        if chars {
            let n_esc = (leads & taken).count_ones() as u64;
            self.not_chars += (cont & taken).count_ones() as u64 + n_esc + u.not_chars(taken);
        }
    }
}

/// What [`u_escapes`] found of a block's `\u` escapes: the first lead
/// (`bad`, 64 if none) that does not begin a whole, valid escape or pair in
/// the block, and the leads of the good ones by kind, before and after
/// `bad`. The string walk counts those before where the block stops
/// ([`UEscapes::less_bits`], [`UEscapes::not_chars`]), which is never past
/// `bad`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct UEscapes {
    bad: u32,
    /// Good escapes that are not surrogates.
    single: u64,
    /// Good pairs, by their high half.
    pairs: u64,
    /// Those of `single` below U+0800.
    below_800: u64,
    /// Those of `single` below U+0080.
    below_80: u64,
}

impl UEscapes {
    /// A block without `\u` escapes.
    const NONE: UEscapes = UEscapes {
        bad: 64,
        single: 0,
        pairs: 0,
        below_800: 0,
        below_80: 0,
    };

    /// The escapes' encoded bytes beyond a one-character escape's 2 that
    /// decode to nothing more, as bits: one for each such byte, set in the
    /// escape's own bytes. A single escape's 6 bytes are 3 more than the 3
    /// it decodes to (bits at `+1` and `+3`), and one more for each of the
    /// two bounds it is below (U+0800 and U+0080 decode to two bytes and
    /// one; `+2` and `+4`); a pair's 12 are 8 more than its 4 (six at `+1`
    /// to `+5` and `+7`: its low half's lead is at `+6`). One of each
    /// escape's is its lead, counted by the caller as for every escape.
    ///
    /// Escapes never overlap and a good one lies whole in the block, so the
    /// bits are apart from each other and from every lead, below 64, and
    /// before a stop wherever their lead is: a block's sum is one count of
    /// them and its leads together. Five counts, one per mask, cost the
    /// walk of escape-rich text about 6% (thirty-ninth round).
    #[inline(always)]
    fn less_bits(&self) -> u64 {
        (self.single << 1)
            | (self.single << 3)
            | (self.below_800 << 2)
            | (self.below_80 << 4)
            | self.pairs.wrapping_mul(0b1011_1110)
    }

    /// Over the escapes whose leads are in `taken`: bytes beyond a
    /// one-character escape's 1 that begin no character.
    #[inline(always)]
    fn not_chars(&self, taken: u64) -> u64 {
        let pop = |m: u64| (m & taken).count_ones() as u64;
        4 * pop(self.single) + 9 * pop(self.pairs)
    }
}

/// The `\u` escapes of a block whose leads (the backslashes) are `ul`, all
/// at once from the block's hex masks `h`: bit `p` of a mask shifted right
/// by `2 + k` tells of the escape at `p`'s digit `k`. A lead is good when it
/// begins an escape of four hex digits that is not a surrogate, or a high
/// surrogate whose low half follows at once (that low half's lead is then
/// good too); the first lead that is not is `bad`. An escape that the
/// block's end cuts (its lead past 58, or a high half past 52) is never
/// good.
#[inline(always)]
fn u_escapes(h: scan::HexMasks, ul: u64) -> UEscapes {
    // Bit `p`: bytes `p..p + 4` are hex digits (two doubling steps).
    let hex2 = h.hex & (h.hex >> 1);
    let hex4 = hex2 & (hex2 >> 2);
    let whole = ul & (hex4 >> 2);
    // `D` then one of `89ABCDEF`; a low half's second digit is in `CDEF`.
    let surrogate = whole & (h.d >> 2) & ((h.hex & !h.oct) >> 3);
    let lows = surrogate & (h.cf >> 3);
    let pairs = surrogate & !lows & (lows >> 6);
    let single = whole & !surrogate;
    // Code points below 0x800 are `0` then `0-7`; below 0x80, `00` then
    // `0-7`.
    let below_800 = single & (h.zero >> 2) & (h.oct >> 3);
    UEscapes {
        bad: (ul & !(single | pairs | pairs << 6)).trailing_zeros(),
        single,
        pairs,
        below_800,
        below_80: below_800 & (h.zero >> 3) & (h.oct >> 4),
    }
}

/// The unit walk of [`fast_string`]: special bytes come from 64-byte masks,
/// one-character escapes are taken a block's run at once, other escapes and
/// the end one at a time.
#[inline(always)]
fn string_units<B: scan::Blocks, const CHARS: bool>(
    blocks: B,
    chunk: &[u8],
    start: usize,
) -> FastStr {
    let n = chunk.len();
    let mut i = start;
    // The bytes in [start, stop) that begin no character: continuation bytes
    // (counted once per block) and each escape's bytes after its first. One
    // sum, not two: fewer values live across the block walk, whose loop
    // otherwise spills.
    let mut cont = 0u64;
    // Whether any byte in [start, stop) is non-ASCII (no escape byte is).
    let mut high = false;
    // Over all escapes: encoded minus decoded bytes.
    let mut esc_dec = 0u64;
    let mut quote = false;
    // Whether a byte before the stop is flagged by the UTF-8 check; the last
    // block's flags wait until the stop is final.
    let mut bad = false;
    let last;
    let stop;
    'blocks: loop {
        let f = scan::find_block_in(blocks, chunk, start, i, high);
        cont += f.cont_before;
        high |= f.high_before;
        bad |= f.bad_before;
        let m = f.masks;
        let mut sp = m.special;
        // The block's one-character escapes, and the special bytes that are
        // in none (quotes, control bytes, `\u` escapes, invalid escapes).
        // Found only when the block's first special byte begins a
        // one-character escape: on text whose escapes are `\u` (JSON written
        // ASCII-only), the masks cost more than they save.
        let first = f.at + sp.trailing_zeros() as usize;
        let (simple, hard) = if chunk.get(first) == Some(&b'\\')
            && chunk.get(first + 1).is_some_and(|&e| e != b'u')
        {
            let simple = scan::simple_escapes(blocks, chunk, f.at);
            (simple, sp & !(simple | simple << 1))
        } else {
            (0, sp)
        };
        // The one-character escapes before the next special byte in none,
        // taken at once (each is two bytes that decode to one); the unit walk
        // below takes that byte. On text escaped this way (source files,
        // logs) skipping is about a fifth faster than one escape at a time
        // (docs/design.md §9).
        let bulk = |sp: &mut u64| {
            let upto = (*sp & hard).trailing_zeros();
            let run = (simple & *sp & below(upto)).count_ones() as u64;
            *sp &= !below(upto);
            run
        };
        let run = bulk(&mut sp);
        esc_dec += run;
        cont += run;
        loop {
            if sp == 0 {
                cont += m.cont.count_ones() as u64;
                high |= m.high != 0;
                let next = f.at + 64;
                if next >= n {
                    stop = n;
                    last = (f.at, f.utf8);
                    break 'blocks;
                }
                bad |= f.utf8 != 0;
                i = next;
                continue 'blocks;
            }
            let k = sp.trailing_zeros();
            let p = f.at + k as usize;
            let b = chunk.get(p).copied();
            if b == Some(b'\\') {
                if let Some((enc, dec, _)) = inline_escape(chunk, p) {
                    esc_dec += enc as u64 - dec;
                    cont += enc as u64 - 1;
                    let q = k as usize + enc;
                    if q < 64 {
                        sp &= !below(q as u32);
                        let run = bulk(&mut sp);
                        esc_dec += run;
                        cont += run;
                        continue;
                    }
                    cont += (m.cont & below(k)).count_ones() as u64;
                    high |= m.high & below(k) != 0;
                    // The escape runs past the block: all of it is in the span.
                    bad |= f.utf8 != 0;
                    i = f.at + q;
                    continue 'blocks;
                }
            }
            cont += (m.cont & below(k)).count_ones() as u64;
            high |= m.high & below(k) != 0;
            quote = b == Some(b'"');
            stop = p;
            last = (f.at, f.utf8);
            break 'blocks;
        }
    }
    let mut stop = stop;
    if high && !quote && stop == n {
        // A sequence split by the chunk end is left to the byte-wise machine,
        // which carries it into the next chunk.
        let mut j = stop;
        while j > start && stop - j < 3 && chunk.get(j - 1).is_some_and(|&b| (b as i8) < -0x40) {
            j -= 1;
        }
        if let Some((need, _, _)) = j
            .checked_sub(1)
            .and_then(|l| chunk.get(l))
            .and_then(|&b| utf8_lead(b))
        {
            if j > start && need as usize > stop - j {
                cont -= (stop - j) as u64;
                stop = j - 1;
            }
        }
    }
    let span = chunk.get(start..stop).unwrap_or(&[]);
    bad |= last.1 & below(stop.saturating_sub(last.0).min(64) as u32) != 0;
    if high && (bad || scan::utf8_incomplete_tail(span)) {
        // Flagged (rarely a false alarm, when the chunk end cut a sequence the
        // check had already seen): std says whether and where. Stop where the
        // bad sequence starts; it is never inside an escape, so a second pass
        // over the valid prefix is exact.
        if let Err(e) = std::str::from_utf8(span) {
            let v = e.valid_up_to();
            if v == 0 {
                return FastStr::none(start);
            }
            return fast_string(
                chunk.get(..start + v).unwrap_or(&[]),
                start,
                CHARS,
                &mut Passes::default(),
            );
        }
    }
    let len = (stop - start) as u64;
    FastStr {
        end: stop,
        quote: quote && stop < n,
        dec: len - esc_dec,
        chars: len - cont,
    }
}

/// Skip a string body starting at `start`: `Ok` with the index just past its
/// closing quote, or `Err` with what was validated when the chunk (or a byte
/// the byte-wise machine must see) comes first.
#[inline]
fn skip_string(chunk: &[u8], start: usize) -> Result<usize, FastStr> {
    if let Some(q) = scan::medium_string(chunk, start) {
        return Ok(q + 1);
    }
    skip_string_walk(chunk, start, start)
}

/// [`skip_string`]'s block walk from `from`, for a caller that has read
/// `start..from` already: plain printable ASCII, each byte a unit of one
/// decoded byte.
#[inline]
fn skip_string_walk(chunk: &[u8], start: usize, from: usize) -> Result<usize, FastStr> {
    let f = string_walk(chunk, from, false, &mut Passes::default());
    if f.quote {
        Ok(f.end + 1)
    } else {
        Err(FastStr {
            dec: f.dec + (from - start) as u64,
            ..f
        })
    }
}

/// [`skip_string`] for the skip loop's keys and string values: a plain
/// string that ends within 16 bytes is read a byte at a time first. Keys
/// and short values repeat (each item of a list has the same keys, and
/// values of like lengths), so the branch predictor learns where each ends
/// and the next token's load starts at once; the end [`skip_string`] finds
/// from a mask is data that load must wait for. A string whose first 16
/// bytes are all plain goes on from its 17th: the rest of a medium string
/// (up to 64 bytes in all) by masks, else the block walk (twitter.json's
/// long keys and its URLs, dates and ids: reading those 16 bytes again, and
/// the call of [`fast_string`], cost its budgeted skip 5%). Anything else (an
/// escape, a control or non-ASCII byte, the chunk's end within 16 bytes)
/// goes to [`skip_string`] from the start. Each way reads the units as
/// [`skip_string`] does (`fast_string_matches_the_unit_walk` holds them to
/// the unit walk).
///
/// Where 16 bytes are left in the chunk (nearly always), the 16 tests are
/// written out, one branch each, with no loop: a loop this small ran 10–15%
/// slower when its few bytes of code happened to cross a 64-byte line,
/// which depends on where the linker puts the skip loop
/// (docs/performance-history.md, twenty-second round).
#[inline(always)]
fn skip_string_short_first(chunk: &[u8], start: usize) -> Result<usize, FastStr> {
    if let Some(w) = chunk.get(start..).and_then(|s| s.first_chunk::<16>()) {
        macro_rules! byte {
            ($k:literal) => {
                match STR_CLASS[w[$k] as usize] {
                    0 => {}
                    1 => return Ok(start + $k + 1),
                    _ => return skip_string(chunk, start),
                }
            };
        }
        byte!(0);
        byte!(1);
        byte!(2);
        byte!(3);
        byte!(4);
        byte!(5);
        byte!(6);
        byte!(7);
        byte!(8);
        byte!(9);
        byte!(10);
        byte!(11);
        byte!(12);
        byte!(13);
        byte!(14);
        byte!(15);
        // Sixteen plain bytes: the rest of a medium string from there, and
        // else the block walk, neither reading those sixteen again.
        let from = start + 16;
        if let Some(q) = scan::plain_string::<3>(chunk, from) {
            return Ok(q + 1);
        }
        return skip_string_walk(chunk, start, from);
    }
    // Fewer than 16 bytes left: the token path's read of a chunk's tail.
    match tail_string(chunk, start) {
        Some(q) => Ok(q + 1),
        None => skip_string(chunk, start),
    }
}

/// [`scan::short_string`] where fewer than its 16 bytes are left in the
/// chunk (a message's last string, as `"hi"}}}` ends a call): the closing
/// quote of a rest that is plain ASCII up to it, read a byte at a time, or
/// `None`. The block walk it saves costs some 350 instructions for these
/// few bytes. The skip loop's byte-wise try reads a chunk's last 15 bytes
/// with it too ([`skip_string_short_first`]).
#[inline(never)]
fn tail_string(chunk: &[u8], i: usize) -> Option<usize> {
    let rest = chunk.get(i..).filter(|r| r.len() < 16)?;
    for (k, &b) in rest.iter().enumerate() {
        match STR_CLASS[b as usize] {
            0 => {}
            1 => return Some(i + k),
            _ => return None,
        }
    }
    None
}

/// A whole string body from `start` whose closing quote is in the chunk within
/// `max` encoded bytes: the quote's index and the decoded length. `None` when
/// it is longer, goes on past the chunk, or needs the byte-wise machine.
#[inline]
fn whole_string(chunk: &[u8], start: usize, max: u64) -> Option<(usize, u64)> {
    if let Some(q) = scan::medium_string(chunk, start) {
        return ((q - start) as u64 <= max).then_some((q, (q - start) as u64));
    }
    // Scan no further than the quote may be: a longer string is refused anyway.
    let lim = usize::try_from(max)
        .ok()
        .and_then(|m| start.checked_add(m)?.checked_add(1))
        .map_or(chunk.len(), |l| l.min(chunk.len()));
    let f = string_walk(chunk.get(..lim)?, start, false, &mut Passes::default());
    f.quote.then_some((f.end, f.dec))
}

/// The state after a value inside a container ends at `chunk[*i]` (for the
/// skip loop): a `,` right after it, as most JSON is written, is taken at
/// once; in an object so are the key after it (past any whitespace) and the
/// key's colon, when the key ends in the chunk. Each saves the loop a trip
/// round its dispatch.
#[inline(always)]
fn separator_after_value<B: scan::Blocks>(
    blocks: B,
    chunk: &[u8],
    i: &mut usize,
    in_obj: bool,
) -> State {
    let state = comma_after(chunk, i, in_obj);
    if state != State::ObjKey {
        return state;
    }
    if chunk.get(*i).is_some_and(|&c| scan::is_ws(c)) {
        *i = blocks.skip_ws_after(chunk, *i);
    }
    if chunk.get(*i) == Some(&b'"') {
        if let Ok(end) = skip_string_short_first(chunk, *i + 1) {
            return colon_after_key(chunk, end, i);
        }
    }
    // The loop takes the key (or enters it, when the chunk ends inside it).
    State::ObjKey
}

/// The state after a value inside a container ends at `chunk[*i]`: a `,`
/// right after it is taken at once (the keeping loop's step, and the first
/// of [`separator_after_value`]).
#[inline(always)]
fn comma_after(chunk: &[u8], i: &mut usize, in_obj: bool) -> State {
    if chunk.get(*i) != Some(&b',') {
        return State::After;
    }
    *i += 1;
    if in_obj {
        State::ObjKey
    } else {
        State::Value
    }
}

/// The state after a key whose closing quote is at `end - 1` (for the skip
/// loop): the colon right after it is taken too.
#[inline(always)]
fn colon_after_key(chunk: &[u8], end: usize, i: &mut usize) -> State {
    if chunk.get(end) == Some(&b':') {
        *i = end + 1;
        State::Value
    } else {
        *i = end;
        State::Colon
    }
}

/// The literal (`true`, `false` or `null`) spelled out whole at `chunk[i]`,
/// compared as a fixed-size word rather than through a `memcmp` call.
#[inline(always)]
fn literal_at(chunk: &[u8], i: usize) -> Option<&'static [u8]> {
    let w = chunk
        .get(i..i + 4)
        .and_then(|w| <[u8; 4]>::try_from(w).ok())?;
    match &w {
        b"true" => Some(b"true"),
        b"null" => Some(b"null"),
        b"fals" if chunk.get(i + 4) == Some(&b'e') => Some(b"false"),
        _ => None,
    }
}

/// The end of the run of ASCII digits starting at `s[j]`. Eight bytes at a
/// time (SWAR): a byte is a digit exactly when `t = b ^ 0x30` is at most 9;
/// `t + 0x76` sets bit 7 for every larger `t` below 0x8A, `t` itself has it
/// from 0x80 on, and a carry out of a non-digit byte only reaches later
/// bytes, so the lowest flagged byte is the first non-digit.
#[inline]
fn digits_end(s: &[u8], mut j: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    while let Some(w) = s.get(j..j + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()) {
        let t = u64::from_le_bytes(w) ^ (0x30 * ONES);
        let flagged = (t.wrapping_add(0x76 * ONES) | t) & (0x80 * ONES);
        if flagged != 0 {
            return j + (flagged.trailing_zeros() / 8) as usize;
        }
        j += 8;
    }
    while let Some(b'0'..=b'9') = s.get(j) {
        j += 1;
    }
    j
}

/// The end of a valid number starting at `chunk[i]`, when it ends inside the
/// chunk and the byte after it cannot continue it. `None` sends the number to
/// the byte-wise machine (which reports the exact error, or carries it on).
/// A number that ends within 32 bytes is read from one digit mask
/// ([`number_in_mask`]); a longer one, or one near the chunk end, byte-wise.
#[inline(always)]
fn number_end(chunk: &[u8], i: usize) -> Option<usize> {
    let window = chunk.get(i..).and_then(|s| s.first_chunk::<32>());
    match window.and_then(|w| Some(number_in_mask(w, scan::digits32(w, 0)?))) {
        Some(Some(len)) => len.map(|n| i + n as usize),
        _ => number_end_bytes(chunk, i),
    }
}

/// A number longer than this many bytes turns the skip loop's short-number
/// path off, until one at most this long turns it back on: on long numbers
/// (`canada.json`'s coordinates) the byte-wise try before the mask only costs.
const SHORT_NUMBER: usize = 11;

/// The end of a short number at `chunk[i]` (at most ten integer digits and
/// four fraction digits, no exponent), read a byte at a time, or `None` for
/// anything else, which [`number_end`] then decides. Each test is a branch,
/// and branches the predictor learns (structured results repeat their
/// numbers' shapes: ids, counts, prices) let the next token's load start at
/// once; the end [`number_end`] takes from a digit mask is data that load
/// must wait for. `Some` only where [`number_end_bytes`] gives the same end.
#[inline(always)]
fn short_number_end(chunk: &[u8], i: usize) -> Option<usize> {
    let mut j = i + usize::from(chunk.get(i) == Some(&b'-'));
    let lead = *chunk.get(j)?;
    j += 1;
    if lead != b'0' {
        if !(b'1'..=b'9').contains(&lead) {
            return None;
        }
        let mut n = 0;
        while let b'0'..=b'9' = chunk.get(j)? {
            j += 1;
            n += 1;
            if n == 10 {
                return None;
            }
        }
    }
    match chunk.get(j)? {
        b'0'..=b'9' | b'e' | b'E' => None,
        b'.' => {
            j += 1;
            if !chunk.get(j)?.is_ascii_digit() {
                return None;
            }
            j += 1;
            for _ in 0..3 {
                match chunk.get(j)? {
                    b'0'..=b'9' => j += 1,
                    b'e' | b'E' => return None,
                    _ => return Some(j),
                }
            }
            None
        }
        _ => Some(j),
    }
}

/// [`number_end`] from `d`, the digit mask of `w`, the 32 bytes the number
/// starts: each digit run ends at the next zero bit, so only the sign, the
/// dot and the exponent are read as bytes (from `w`, so no read is checked
/// against the chunk's length). The number's length, or `None` when it
/// reaches the 32nd byte (it may go on past the mask).
#[inline(always)]
fn number_in_mask(w: &[u8; 32], d: u32) -> Option<Option<u32>> {
    // The first non-digit at or after bit `k`; `None` when the digits run to
    // the mask's end (the number may go on past it).
    let run =
        |k: u32| Some(((!d as u64 | !0u64 << 32) >> k).trailing_zeros() + k).filter(|&e| e < 32);
    let at = |k: u32| w.get(k as usize).copied();
    let int = (at(0) == Some(b'-')) as u32;
    let mut end = run(int)?;
    // No digit, or a leading zero with more digits after it.
    if end == int || (at(int) == Some(b'0') && end > int + 1) {
        return Some(None);
    }
    if at(end) == Some(b'.') {
        let frac = run(end + 1)?;
        if frac == end + 1 {
            return Some(None);
        }
        end = frac;
    }
    if let Some(b'e' | b'E') = at(end) {
        let mut j = end + 1;
        if let Some(b'+' | b'-') = at(j) {
            j += 1;
        }
        let exp = run(j)?;
        if exp == j {
            return Some(None);
        }
        end = exp;
    }
    Some(Some(end))
}

/// [`number_end`] byte-wise (digit runs eight bytes a step); the oracle of
/// [`number_in_mask`].
#[inline]
fn number_end_bytes(chunk: &[u8], mut i: usize) -> Option<usize> {
    let digits = |j: usize| digits_end(chunk, j);
    if chunk.get(i) == Some(&b'-') {
        i += 1;
    }
    let zero = match chunk.get(i)? {
        b'0' => {
            i += 1;
            true
        }
        b'1'..=b'9' => {
            i = digits(i + 1);
            false
        }
        _ => return None,
    };
    if chunk.get(i) == Some(&b'.') {
        let j = digits(i + 1);
        if j == i + 1 {
            return None;
        }
        i = j;
    } else if zero && chunk.get(i).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    if let Some(b'e' | b'E') = chunk.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = chunk.get(i) {
            i += 1;
        }
        let j = digits(i);
        if j == i {
            return None;
        }
        i = j;
    }
    // The terminator must be in this chunk (a number may go on in the next).
    chunk.get(i)?;
    Some(i)
}

/// The policy side of [`Tokenizer::fast_keep`]: each method is offered one
/// complete, valid token, by its place in the chunk the loop runs over, and
/// returns whether it wrote it exactly as the token-by-token path would have.
/// `false` leaves the token unconsumed, for that path to decide.
pub(crate) trait KeepSink {
    /// An object key with no escapes: its quotes are at `at` and `q` (the
    /// bytes between are also its decoded form).
    fn key(&mut self, at: usize, q: usize) -> bool;
    /// Encoded bytes a string value may have to be offered (its quotes not counted).
    fn string_room(&self) -> u64;
    /// A string value at `at..end`, quotes included, and its decoded length.
    fn string(&mut self, at: usize, end: usize, dec: u64) -> bool;
    /// A number or a literal at `at..end`.
    fn scalar(&mut self, at: usize, end: usize) -> bool;
    /// `{` (`obj`) or `[` at `at`.
    fn open(&mut self, at: usize, obj: bool) -> bool;
    /// The innermost container's closer, at `at`.
    fn close(&mut self, at: usize) -> bool;
}

/// The push tokenizer. See the module documentation.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    state: State,
    /// Containers open now.
    depth: u32,
    max_depth: u32,
    /// Whether the skip loop's last number was short: the next is then tried
    /// byte by byte first (see [`short_number_end`]). A speed hint only; it
    /// lives here, not in a register of the loop, which measured faster.
    short_numbers: bool,
    /// How many bytes the skip loop takes itself before it next tries the
    /// block skim: one block, doubled after each try that takes nothing or
    /// stops at a sparse block, up to [`skim::wait_max`]. A speed hint only,
    /// kept across calls (and messages), so that input the skim does not
    /// take (escape-rich or pretty-printed) stops paying for tries.
    skim_wait: usize,
    /// How many of those bytes the skip loop has still to take, counted
    /// down across calls: each call waits for this (and at least a block)
    /// from where it starts. Counted from each call's start alone, a wait
    /// as long as the feeds (at AVX2 the longest was then 64 KiB, as long as
    /// the benches' feeds and the proxy's reads) was never over, and one
    /// sparse stretch turned the skim off for the rest of the stream (a
    /// compact list after an indented part; the forty-third round in
    /// `benches/performance-notes.md`).
    skim_left: usize,
    /// One entry per open container: true for an object.
    stack: Vec<bool>,
    /// Absolute offset of byte 0 of the current chunk.
    base: u64,
    skip: Option<Skip>,
    ended: bool,

    // --- string state ---
    in_key: bool,
    /// Decode the key (not while skipping: nobody reads it).
    decode_key: bool,
    keep: bool,
    cut: bool,
    /// The cut happened because the decoded allowance ran out (else the encoded one).
    cut_by_dec: bool,
    allow_dec: u64,
    allow_enc: u64,
    dec_total: u64,
    /// Characters (Unicode scalar values) of the current string so far,
    /// when `count_chars`.
    chars_total: u64,
    /// The block walk's passes the current string has needed.
    passes: Passes,
    /// Whether strings' characters are counted ([`Tokenizer::set_count_chars`]).
    count_chars: bool,
    /// Whether a surrogate escape outside a pair is read as a character
    /// ([`Tokenizer::set_lone_surrogates`]).
    lone_surrogates: bool,
    esc: Esc,
    utf_need: u8,
    utf_lo: u8,
    utf_hi: u8,
    /// Code point of the `\u` escape being read (or the high surrogate).
    cp: u32,
    low: u32,
    /// Bytes of the current multi-byte unit seen in earlier chunks, then (once the
    /// unit completes) the whole unit when it is kept.
    held: [u8; 12],
    held_len: u8,
    /// Bytes after `held_len` that begin the next unit: a lone high surrogate
    /// was emitted from `held` while the escape after it, also held, goes on.
    /// Moved to the front when the string's scan resumes.
    held_next: u8,
    /// Bytes of the current multi-byte unit seen in earlier chunks (counted
    /// whether or not the unit is kept).
    prev_unit_bytes: u8,
    /// The current multi-byte unit began in an earlier chunk.
    unit_from_prev: bool,
    /// Start of the current multi-byte unit in this chunk (valid when !unit_from_prev).
    unit_start: usize,
    key_buf: [u8; KEY_CAP],
    key_len: u64,

    // --- number and literal state ---
    /// The number's first byte was classified by `start_value` but not consumed.
    num_first: bool,
    num_st: NumSt,
    lit: Lit,
    lit_pos: u8,
    /// What the span just returned stopped at, for the next call to finish
    /// at once (see [`Then`]).
    then: Then,
}

impl Default for Tokenizer {
    fn default() -> Self {
        Tokenizer::new(DEFAULT_MAX_NESTING)
    }
}

impl Tokenizer {
    /// A tokenizer refusing containers nested deeper than `max_nesting` (at least 1).
    pub fn new(max_nesting: u32) -> Tokenizer {
        let max_depth = max_nesting.max(1);
        Tokenizer::with_stack(max_depth, Vec::with_capacity(max_depth as usize))
    }

    /// A fresh tokenizer around `stack` (empty), which needs no allocation.
    fn with_stack(max_depth: u32, stack: Vec<bool>) -> Tokenizer {
        Tokenizer {
            state: State::Value,
            depth: 0,
            max_depth,
            short_numbers: true,
            skim_wait: skim::BLOCK,
            skim_left: skim::BLOCK,
            stack,
            base: 0,
            skip: None,
            ended: false,
            in_key: false,
            decode_key: false,
            keep: true,
            cut: false,
            cut_by_dec: false,
            allow_dec: u64::MAX,
            allow_enc: u64::MAX,
            dec_total: 0,
            chars_total: 0,
            passes: Passes::default(),
            count_chars: true,
            lone_surrogates: false,
            esc: Esc::None,
            utf_need: 0,
            utf_lo: 0,
            utf_hi: 0,
            cp: 0,
            low: 0,
            held: [0; 12],
            held_len: 0,
            held_next: 0,
            prev_unit_bytes: 0,
            unit_from_prev: false,
            unit_start: 0,
            key_buf: [0; KEY_CAP],
            key_len: 0,
            num_first: false,
            num_st: NumSt::Int,
            lit: Lit::Null,
            lit_pos: 0,
            then: Then::Scan,
        }
    }

    /// Back to the start of a new document, keeping the allocation.
    pub fn reset(&mut self) {
        let mut stack = std::mem::take(&mut self.stack);
        stack.clear();
        let (count_chars, lone) = (self.count_chars, self.lone_surrogates);
        let (skim_wait, skim_left) = (self.skim_wait, self.skim_left);
        *self = Tokenizer::with_stack(self.max_depth, stack);
        self.count_chars = count_chars;
        self.lone_surrogates = lone;
        (self.skim_wait, self.skim_left) = (skim_wait, skim_left);
    }

    /// Open containers at this point.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// Whether the innermost open container is an object.
    pub fn in_object(&self) -> bool {
        self.stack.last().copied().unwrap_or(false)
    }

    /// Absolute offset of the next byte to be read from the current chunk,
    /// given the position in it.
    pub fn offset_at(&self, pos: usize) -> u64 {
        self.base + pos as u64
    }

    /// Bytes consumed in earlier chunks (the absolute offset of this chunk's byte 0).
    pub fn chunk_base(&self) -> u64 {
        self.base
    }

    /// Whether the top-level value is complete (only whitespace may follow).
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Whether an object key's closing quote was just consumed (`:` comes next).
    pub fn after_key(&self) -> bool {
        self.state == State::Colon
    }

    /// Whether the string being scanned is an object key.
    pub fn in_key_string(&self) -> bool {
        self.state == State::Str && self.in_key
    }

    /// Whether a skip is in progress.
    pub fn is_skipping(&self) -> bool {
        self.skip.is_some()
    }

    /// The kept unit announced by [`Tok::StrHeld`].
    pub fn held(&self) -> &[u8] {
        self.held.get(..self.held_len as usize).unwrap_or(&[])
    }

    /// After [`Tok::StrBegin`]: keep at most `dec` decoded and `enc` encoded bytes
    /// of this string, in whole units. The default is unlimited.
    pub fn set_string_allowance(&mut self, dec: u64, enc: u64) {
        self.allow_dec = dec;
        self.allow_enc = enc;
    }

    /// Whether the string's cut came from the decoded-bytes allowance (rather
    /// than the encoded one).
    pub fn cut_by_decoded(&self) -> bool {
        self.cut_by_dec
    }

    /// Whether units of the current (or just ended) string were left out.
    pub fn string_cut(&self) -> bool {
        self.cut
    }

    /// Decoded UTF-8 length of the current string so far (after `StrEnd`: all of it).
    pub fn string_decoded_len(&self) -> u64 {
        self.dec_total
    }

    /// Characters (Unicode scalar values) of the current string so far. Exact
    /// while characters are counted (the default; see
    /// [`Tokenizer::set_count_chars`]), and not meaningful otherwise.
    pub fn string_chars(&self) -> u64 {
        self.chars_total
    }

    /// Whether to count strings' characters for [`Tokenizer::string_chars`]
    /// (on by default). A user that never reads them (the result budgets)
    /// turns the count off: the block walk of long strings is then a few
    /// percent faster on text rich in escapes or non-ASCII characters.
    /// [`Tokenizer::reset`] keeps the setting.
    pub fn set_count_chars(&mut self, on: bool) {
        self.count_chars = on;
    }

    /// Whether a `\u` escape of a surrogate that is not half of a well-formed
    /// pair (`"\ud83d"`, which JavaScript's `JSON.stringify` writes for a
    /// string cut inside a pair) is read as one character instead of refused
    /// with [`ErrorKind::LoneSurrogate`] (off by default). Such an escape is
    /// one unit of 6 encoded bytes that decodes to 3, as U+FFFD, the
    /// character a UTF-8 reader puts in its place; a decoded key holds
    /// U+FFFD there. Its bytes are copied unchanged like any other unit.
    /// [`Tokenizer::reset`] keeps the setting.
    pub fn set_lone_surrogates(&mut self, on: bool) {
        self.lone_surrogates = on;
    }

    /// The decoded key (its first [`KEY_CAP`] bytes) after `StrEnd` of a key.
    pub fn key(&self) -> &[u8] {
        let n = (self.key_len as usize).min(KEY_CAP);
        self.key_buf.get(..n).unwrap_or(&[])
    }

    /// Whether the key was longer than [`KEY_CAP`] decoded bytes.
    pub fn key_overflowed(&self) -> bool {
        self.key_len > KEY_CAP as u64
    }

    /// Stop keeping the current string: the rest is validated but not emitted.
    pub fn stop_keeping(&mut self) {
        self.keep = false;
    }

    /// Skip the rest of the container open at `depth` (its closer is then
    /// emitted as usual, after [`Tok::Skipped`]). `initial` is added to the count,
    /// for a value already started at that level. Must be called with
    /// `1 <= depth <= self.depth()`.
    pub fn skip_rest(&mut self, depth: u32, initial: u64) {
        self.keep = false;
        self.skip = Some(Skip {
            depth,
            count: initial,
            one: false,
        });
    }

    /// Skip the value that starts next (or is in progress) at level `depth`
    /// (the depth of its parent container; 0 for the top-level value).
    pub fn skip_one(&mut self, depth: u32) {
        self.keep = false;
        self.skip = Some(Skip {
            depth,
            count: 1,
            one: true,
        });
    }

    #[inline]
    fn err(&self, kind: ErrorKind, pos: usize) -> Error {
        Error::new(kind, self.base + pos as u64)
    }

    /// A value just completed (its last byte consumed, or a number's terminator seen).
    /// Returns the `Skipped` token that ends a `skip_one`, if any.
    #[inline]
    fn value_done(&mut self) -> Option<Tok> {
        self.state = if self.depth == 0 {
            State::Done
        } else {
            State::After
        };
        if let Some(s) = self.skip {
            if s.one && s.depth == self.depth {
                self.skip = None;
                return Some(Tok::Skipped(1));
            }
        }
        None
    }

    /// A value starts at the current depth: count it for a `skip_rest`.
    #[inline]
    fn value_start(&mut self) {
        if let Some(s) = &mut self.skip {
            if !s.one && s.depth == self.depth {
                s.count += 1;
            }
        }
    }

    fn begin_string(&mut self, key: bool) {
        self.state = State::Str;
        self.in_key = key;
        self.decode_key = key && self.skip.is_none();
        self.keep = self.skip.is_none();
        self.cut = false;
        self.cut_by_dec = false;
        self.allow_dec = u64::MAX;
        self.allow_enc = u64::MAX;
        self.dec_total = 0;
        self.chars_total = 0;
        self.passes = Passes::default();
        self.esc = Esc::None;
        self.utf_need = 0;
        self.held_len = 0;
        self.held_next = 0;
        self.unit_from_prev = false;
        self.key_len = 0;
    }

    #[inline]
    fn push_key_bytes(&mut self, bytes: &[u8]) {
        let have = self.key_len.min(KEY_CAP as u64) as usize;
        let room = KEY_CAP - have;
        let n = bytes.len().min(room);
        if let (Some(dst), Some(src)) = (self.key_buf.get_mut(have..have + n), bytes.get(..n)) {
            dst.copy_from_slice(src);
        }
        self.key_len += bytes.len() as u64;
    }

    /// End the chunk at `pos` without another [`Tokenizer::next`] call when
    /// that call could do nothing but account the chunk and return
    /// [`Tok::NeedMore`]: `pos` is at the chunk's end and nothing is half
    /// read (inside a string between units, or between tokens outside a
    /// skip). Returns whether it did; if not, call `next` as usual. Saves a
    /// driver one call per feed (about 60 instructions of a feed that ends
    /// inside a long string).
    #[inline]
    pub fn try_end_chunk(&mut self, chunk: &[u8], pos: usize) -> bool {
        let at_rest = match self.state {
            State::Str => self.esc == Esc::None && self.utf_need == 0,
            State::Num | State::Lit => false,
            _ => self.skip.is_none(),
        };
        if pos < chunk.len() || self.ended || !at_rest {
            return false;
        }
        self.base += chunk.len() as u64;
        true
    }

    /// At the start of a feed that goes on inside a kept string value (a long
    /// text or blob), between units: take the string's plain-ASCII prefix
    /// within its allowance, appending it to `dst` as it is scanned (one read
    /// of the bytes, no separate copy), and return its length. The caller
    /// continues with [`Tokenizer::next`] from there, exactly as if `next`
    /// had returned that prefix as a [`Tok::StrSpan`] it wrote to `dst`.
    /// Returns 0, taking nothing, in any other state (keys included).
    #[inline]
    pub fn take_plain_into(&mut self, chunk: &[u8], dst: &mut Vec<u8>) -> usize {
        if self.state != State::Str
            || self.then != Then::Scan
            || self.in_key
            || !self.keep
            || self.decode_key
            || self.esc != Esc::None
            || self.utf_need != 0
        {
            return 0;
        }
        // As `scan_string`: the allowance is the window, and every plain
        // byte inside it fits.
        let lim = self.kept_window_end(0, chunk.len());
        let a = scan::ascii_run_copy(chunk.get(..lim).unwrap_or(chunk), dst);
        self.take_plain(a);
        a
    }

    /// Where the window of a kept string's scan from `i` ends, in a chunk
    /// of `n` bytes: no further than its allowance (decoded and encoded),
    /// inside which every unit fits.
    #[inline(always)]
    fn kept_window_end(&self, i: usize, n: usize) -> usize {
        let room = self.allow_dec.min(self.allow_enc);
        i.saturating_add(usize::try_from(room).unwrap_or(usize::MAX))
            .min(n)
    }

    /// Count `len` bytes of plain ASCII taken inside the current string: each
    /// is one unit, one decoded byte and one character, and (the scans look
    /// no further than the allowance) each fits.
    #[inline(always)]
    fn take_plain(&mut self, len: usize) {
        let run = len as u64;
        self.dec_total += run;
        self.chars_total += run;
        if self.keep {
            self.allow_dec -= run;
            self.allow_enc -= run;
        }
    }

    /// Pull the next token from `chunk`, starting at `*pos`.
    #[inline]
    pub fn next(&mut self, chunk: &[u8], pos: &mut usize) -> Result<Tok, Error> {
        match std::mem::replace(&mut self.then, Then::Scan) {
            Then::Scan => {}
            Then::Quote => {
                *pos += 1;
                if let Some(t) = self.end_string() {
                    return Ok(t);
                }
            }
            Then::NumEnd => {
                if let Some(t) = self.end_scalar(Tok::NumEnd) {
                    return Ok(t);
                }
            }
        }
        self.next_in(chunk, pos)
    }

    /// [`Self::next`] past its inlined start: the whole machine.
    #[inline(never)]
    fn next_in(&mut self, chunk: &[u8], pos: &mut usize) -> Result<Tok, Error> {
        if self.ended {
            return Err(self.err(ErrorKind::Misuse, *pos));
        }
        loop {
            match self.state {
                State::Str => {
                    if let Some(t) = self.scan_string(chunk, pos)? {
                        return Ok(t);
                    }
                }
                State::Num => {
                    let st = self.num_st;
                    if let Some(t) = self.scan_number(chunk, pos, st)? {
                        return Ok(t);
                    }
                }
                State::Lit => {
                    if let Some(t) = self.scan_literal(chunk, pos)? {
                        return Ok(t);
                    }
                }
                _ => {
                    if self.skip.is_some() {
                        if let Some(t) = self.fast_skip(chunk, pos) {
                            return Ok(t);
                        }
                        if self.state == State::Str {
                            continue;
                        }
                    }
                    // Structural states: skip whitespace, then one byte decides.
                    let mut i = *pos;
                    if chunk.get(i).is_some_and(|&b| scan::is_ws(b)) {
                        i = scan::skip_ws_after(chunk, i);
                    }
                    *pos = i;
                    let Some(&b) = chunk.get(i) else {
                        self.base += chunk.len() as u64;
                        *pos = 0;
                        return Ok(Tok::NeedMore);
                    };
                    if let Some(t) = self.structural(b, i, pos)? {
                        return Ok(t);
                    }
                }
            }
        }
    }

    /// Handle one non-whitespace byte in a structural state.
    fn structural(&mut self, b: u8, i: usize, pos: &mut usize) -> Result<Option<Tok>, Error> {
        match self.state {
            State::Value | State::ArrFirst => {
                if b == b']' && self.state == State::ArrFirst {
                    return self.close(false, i, pos);
                }
                self.start_value(b, i, pos)
            }
            State::ObjFirst | State::ObjKey => {
                if b == b'}' && self.state == State::ObjFirst {
                    return self.close(true, i, pos);
                }
                if b != b'"' {
                    return Err(self.err(ErrorKind::UnexpectedByte, i));
                }
                *pos = i + 1;
                self.begin_string(true);
                if self.skip.is_some() {
                    Ok(None)
                } else {
                    Ok(Some(Tok::StrBegin { key: true }))
                }
            }
            State::Colon => {
                if b != b':' {
                    return Err(self.err(ErrorKind::UnexpectedByte, i));
                }
                *pos = i + 1;
                self.state = State::Value;
                Ok(None)
            }
            State::After => {
                let obj = self.in_object();
                match b {
                    b',' => {
                        *pos = i + 1;
                        self.state = if obj { State::ObjKey } else { State::Value };
                        Ok(None)
                    }
                    b']' if !obj => self.close(false, i, pos),
                    b'}' if obj => self.close(true, i, pos),
                    _ => Err(self.err(ErrorKind::UnexpectedByte, i)),
                }
            }
            State::Done => Err(self.err(ErrorKind::TrailingData, i)),
            State::Str | State::Num | State::Lit => Err(self.err(ErrorKind::Misuse, i)),
        }
    }

    fn close(&mut self, obj: bool, i: usize, pos: &mut usize) -> Result<Option<Tok>, Error> {
        if let Some(s) = self.skip {
            if !s.one && s.depth == self.depth {
                // The skipped container ends here: report, and emit its closer next.
                self.skip = None;
                return Ok(Some(Tok::Skipped(s.count)));
            }
        }
        *pos = i + 1;
        self.stack.pop();
        self.depth -= 1;
        let skipped = self.value_done();
        if skipped.is_some() {
            return Ok(skipped);
        }
        if self.skip.is_some() {
            return Ok(None);
        }
        Ok(Some(if obj { Tok::EndObject } else { Tok::EndArray }))
    }

    fn start_value(&mut self, b: u8, i: usize, pos: &mut usize) -> Result<Option<Tok>, Error> {
        self.value_start();
        let emit = self.skip.is_none();
        match b {
            b'"' => {
                *pos = i + 1;
                self.begin_string(false);
                Ok(emit.then_some(Tok::StrBegin { key: false }))
            }
            b'[' | b'{' => {
                if self.depth >= self.max_depth {
                    return Err(self.err(ErrorKind::TooDeep, i));
                }
                *pos = i + 1;
                let obj = b == b'{';
                self.stack.push(obj);
                self.depth += 1;
                self.state = if obj {
                    State::ObjFirst
                } else {
                    State::ArrFirst
                };
                Ok(emit.then_some(if obj {
                    Tok::BeginObject
                } else {
                    Tok::BeginArray
                }))
            }
            b'-' | b'0'..=b'9' => {
                // The number state machine consumes this first byte itself.
                self.state = State::Num;
                self.num_st = match b {
                    b'-' => NumSt::Minus,
                    b'0' => NumSt::Zero,
                    _ => NumSt::Int,
                };
                // Leave pos at the first byte so the span includes it.
                *pos = i;
                self.num_first = true;
                Ok(None)
            }
            b't' | b'f' | b'n' => {
                self.lit = match b {
                    b't' => Lit::True,
                    b'f' => Lit::False,
                    _ => Lit::Null,
                };
                self.lit_pos = 1;
                self.state = State::Lit;
                *pos = i + 1;
                Ok(None)
            }
            _ => Err(self.err(ErrorKind::UnexpectedByte, i)),
        }
    }

    #[inline]
    fn need_more(&mut self, chunk: &[u8], pos: &mut usize) -> Tok {
        self.base += chunk.len() as u64;
        *pos = chunk.len();
        Tok::NeedMore
    }

    /// A number or literal ended (a number's terminator seen, or the
    /// input's end; a literal's last byte): `tok` (its `NumEnd` or `Lit`), or
    /// while skipping the `Skipped` that ends a `skip_one`, or nothing.
    fn end_scalar(&mut self, tok: Tok) -> Option<Tok> {
        let emit = self.skip.is_none();
        let skipped = self.value_done();
        if emit {
            Some(tok)
        } else {
            skipped
        }
    }

    /// The closing quote of a string was consumed.
    fn end_string(&mut self) -> Option<Tok> {
        let emit = self.skip.is_none();
        if self.in_key {
            self.state = State::Colon;
            return emit.then_some(Tok::StrEnd);
        }
        let skipped = self.value_done();
        if emit {
            Some(Tok::StrEnd)
        } else {
            skipped
        }
    }

    /// A multi-byte unit (escape, pair, UTF-8 sequence) completed; `i` is the
    /// index just past it and `start` the span start of this call.
    #[inline]
    fn unit_done(
        &mut self,
        chunk: &[u8],
        start: usize,
        i: usize,
        dec: u64,
        pos: &mut usize,
    ) -> Option<Tok> {
        let enc = if self.unit_from_prev {
            self.prev_unit_bytes as u64 + (i - start) as u64
        } else {
            (i - self.unit_start) as u64
        };
        let dec = if dec == 0 { enc } else { dec };
        self.dec_total += dec;
        self.chars_total += 1;
        let from_prev = self.unit_from_prev;
        self.unit_from_prev = false;
        if !self.keep {
            return None;
        }
        if dec <= self.allow_dec && enc <= self.allow_enc {
            self.allow_dec -= dec;
            self.allow_enc -= enc;
            if from_prev {
                // The unit's head is held; add its tail and emit it whole.
                self.append_held(chunk.get(start..i).unwrap_or(&[]));
                *pos = i;
                return Some(Tok::StrHeld);
            }
            None
        } else {
            self.keep = false;
            self.cut = true;
            self.cut_by_dec = dec > self.allow_dec;
            let end = if from_prev { start } else { self.unit_start };
            *pos = i;
            (end > start).then_some(Tok::StrSpan(start, end))
        }
    }

    /// Lone surrogates: the bytes just read, ending at `i`, are a high
    /// surrogate escape (6 bytes, 3 decoded as U+FFFD) and then a whole
    /// second unit of `enc2` bytes decoding to `dec2` (not a surrogate). Each
    /// is kept or cut on its own, as [`Self::unit_done`] does for one unit.
    #[cold]
    fn lone_high_then(
        &mut self,
        chunk: &[u8],
        start: usize,
        i: usize,
        enc2: u64,
        dec2: u64,
        pos: &mut usize,
    ) -> Option<Tok> {
        self.dec_total += 3 + dec2;
        self.chars_total += 2;
        let from_prev = self.unit_from_prev;
        self.unit_from_prev = false;
        if !self.keep {
            return None;
        }
        *pos = i;
        let head = if from_prev { start } else { self.unit_start };
        if let Err(tok) = self.keep_lone_high(start, head) {
            return tok;
        }
        let second_fits = dec2 <= self.allow_dec && enc2 <= self.allow_enc;
        if second_fits {
            self.allow_dec -= dec2;
            self.allow_enc -= enc2;
        } else {
            self.keep = false;
            self.cut = true;
            self.cut_by_dec = dec2 > self.allow_dec;
        }
        if from_prev {
            // Both units' heads are held: add the tail, and emit what is kept.
            self.append_held(chunk.get(start..i).unwrap_or(&[]));
            if !second_fits {
                self.held_len = self.held_len.min(6);
            }
            return Some(Tok::StrHeld);
        }
        if second_fits {
            return None;
        }
        Some(Tok::StrSpan(start, self.unit_start + 6))
    }

    /// Lone surrogates: the bytes just read, ending at `i`, are a high
    /// surrogate escape (a unit of its own, 3 decoded) and a second high
    /// surrogate escape, which becomes the unit in progress (`esc` and `cp`
    /// already set for it). The next call, if one is needed, starts at `i`
    /// with the second escape's bytes counted (and held) as from before it.
    #[cold]
    fn lone_high_then_high(
        &mut self,
        chunk: &[u8],
        start: usize,
        i: usize,
        pos: &mut usize,
    ) -> Option<Tok> {
        self.dec_total += 3;
        self.chars_total += 1;
        let from_prev = self.unit_from_prev;
        let first_start = self.unit_start;
        // Where the second escape's bytes are: all in this call's span, or
        // some held from before it.
        let in_span = if from_prev { i - start } else { 12 };
        let second_in_span = in_span >= 6;
        if second_in_span {
            self.unit_from_prev = false;
            self.unit_start = i - 6;
        } else {
            self.prev_unit_bytes = self.prev_unit_bytes.saturating_sub(6);
        }
        if !self.keep {
            return None;
        }
        let head = if from_prev { start } else { first_start };
        if let Err(tok) = self.keep_lone_high(start, head) {
            *pos = i;
            return tok;
        }
        if !from_prev {
            return None;
        }
        // The first escape's head is held: emit it whole, and hold the
        // second escape as a unit from before the next call.
        self.append_held(chunk.get(start..i).unwrap_or(&[]));
        self.held_next = self.held_len.saturating_sub(6);
        self.held_len = self.held_len.min(6);
        self.unit_from_prev = true;
        self.prev_unit_bytes = 6;
        *pos = i;
        Some(Tok::StrHeld)
    }

    /// A lone high surrogate (6 bytes, 3 decoded) that began at `head` (this
    /// call's `start` if it began before the call) is kept, or the string is
    /// cut before it: `Err` then holds the span to emit, if any.
    fn keep_lone_high(&mut self, start: usize, head: usize) -> Result<(), Option<Tok>> {
        if 3 > self.allow_dec || 6 > self.allow_enc {
            self.keep = false;
            self.cut = true;
            self.cut_by_dec = 3 > self.allow_dec;
            return Err((head > start).then_some(Tok::StrSpan(start, head)));
        }
        self.allow_dec -= 3;
        self.allow_enc -= 6;
        Ok(())
    }

    /// Add `tail` to the held unit.
    #[inline]
    fn append_held(&mut self, tail: &[u8]) {
        let have = self.held_len as usize;
        if let Some(dst) = self.held.get_mut(have..have + tail.len()) {
            dst.copy_from_slice(tail);
            self.held_len += tail.len() as u8;
        }
    }

    /// Move the held head of the next unit (see `held_next`) to the front.
    #[cold]
    fn settle_held(&mut self) {
        let (from, n) = (self.held_len as usize, self.held_next as usize);
        if from + n <= self.held.len() {
            self.held.copy_within(from..from + n, 0);
        }
        self.held_len = self.held_next;
        self.held_next = 0;
    }

    /// Scan string bytes from `*pos`. Returns a token, or `None` when the string
    /// ended without one to emit (during a skip).
    fn scan_string(&mut self, chunk: &[u8], pos: &mut usize) -> Result<Option<Tok>, Error> {
        let start = *pos;
        let mut i = start;
        let n = chunk.len();
        loop {
            if self.esc == Esc::None && self.utf_need == 0 {
                if i >= n {
                    // The chunk is used up between units (the usual end of a
                    // feed inside a long string): no scan of an empty rest.
                    if self.keep && i > start {
                        *pos = i;
                        return Ok(Some(Tok::StrSpan(start, i)));
                    }
                    return Ok(Some(self.need_more(chunk, pos)));
                }
                // Fast paths: whole units up to the closing quote, or to where the
                // byte-wise machine must take over. A kept string looks no further
                // than its allowance: every unit wholly inside that window fits
                // (decoded ≤ encoded), and one straddling its end is left to the
                // byte-wise path, which then keeps or cuts it exactly. Windows never
                // overlap, so this stays linear.
                let lim = if self.keep {
                    self.kept_window_end(i, n)
                } else {
                    n
                };
                if i == 0 && !self.decode_key {
                    // The string goes on from the last chunk (a long text or
                    // blob; the usual start of a feed inside one): its
                    // plain-ASCII prefix first, with the leanest scan. Each
                    // byte is one unit and one character, and fits: the
                    // window is the allowance. (A string that starts in this
                    // chunk tries the short step first, below.)
                    let a = scan::ascii_run(chunk.get(..lim).unwrap_or(chunk));
                    if a > 0 {
                        self.take_plain(a);
                        i = a;
                        continue;
                    }
                }
                let f = match scan::short_string(chunk, i).or_else(|| tail_string(chunk, i)) {
                    // The rest of a short plain-ASCII string, in one step (a key
                    // being decoded too: its decoded bytes are these bytes).
                    Some(q) if q <= lim => {
                        if self.decode_key {
                            self.push_key_bytes(chunk.get(i..q).unwrap_or(&[]));
                        }
                        let run = (q - i) as u64;
                        FastStr {
                            end: q,
                            quote: true,
                            dec: run,
                            chars: run,
                        }
                    }
                    _ if !self.decode_key => {
                        let a = if i == start && i > 0 {
                            scan::ascii_run(chunk.get(i..lim).unwrap_or(&[]))
                        } else {
                            0
                        };
                        if a > 0 {
                            self.take_plain(a);
                            i += a;
                            continue;
                        }
                        fast_string(
                            chunk.get(..lim).unwrap_or(chunk),
                            i,
                            self.count_chars,
                            &mut self.passes,
                        )
                    }
                    _ => FastStr::none(i),
                };
                if f.end > i || f.quote {
                    self.dec_total += f.dec;
                    self.chars_total += f.chars;
                    if self.keep {
                        self.allow_dec -= f.dec;
                        self.allow_enc -= (f.end - i) as u64;
                    }
                    i = f.end;
                    if f.quote {
                        if self.keep && i > start {
                            *pos = i;
                            self.then = Then::Quote;
                            return Ok(Some(Tok::StrSpan(start, i)));
                        }
                        *pos = i + 1;
                        return Ok(self.end_string());
                    }
                    if i >= n {
                        continue;
                    }
                }
                // Plain run: no quote, backslash or control byte, and whole valid
                // UTF-8 sequences (found block-wise, validated in bulk). Each
                // character is a unit; its decoded size is its encoded size.
                let run_start = i;
                let rest = chunk.get(i..).unwrap_or(&[]);
                let r = scan::scan(rest);
                let mut run_len = r.end;
                if r.non_ascii {
                    if let Err(e) = std::str::from_utf8(rest.get(..run_len).unwrap_or(&[])) {
                        // The byte-wise path below reports the exact error, or carries
                        // a sequence split by the chunk end.
                        run_len = e.valid_up_to();
                    }
                }
                i = run_start + run_len;
                let run = run_len as u64;
                if run > 0 {
                    let bytes = chunk.get(run_start..i).unwrap_or(&[]);
                    self.dec_total += run;
                    self.chars_total += if r.non_ascii {
                        bytes.iter().filter(|&&b| (b as i8) >= -0x40).count() as u64
                    } else {
                        run
                    };
                    if self.decode_key {
                        self.push_key_bytes(bytes);
                    }
                    if self.keep {
                        let mut fit = run.min(self.allow_dec).min(self.allow_enc);
                        if fit < run && r.non_ascii {
                            // Back off to a character boundary.
                            while fit > 0
                                && bytes.get(fit as usize).is_some_and(|&b| (b as i8) < -0x40)
                            {
                                fit -= 1;
                            }
                        }
                        self.allow_dec -= fit;
                        self.allow_enc -= fit;
                        if fit < run {
                            let next = bytes.get(fit as usize).copied().unwrap_or(0);
                            let next_len = utf8_lead(next).map_or(1, |(n, _, _)| n as u64 + 1);
                            self.cut_by_dec = next_len > self.allow_dec;
                            self.keep = false;
                            self.cut = true;
                            let end = run_start + fit as usize;
                            if end > start {
                                *pos = i;
                                return Ok(Some(Tok::StrSpan(start, end)));
                            }
                        }
                    }
                }
                let Some(&b) = chunk.get(i) else {
                    if self.keep && i > start {
                        *pos = i;
                        return Ok(Some(Tok::StrSpan(start, i)));
                    }
                    return Ok(Some(self.need_more(chunk, pos)));
                };
                match STR_CLASS[b as usize] {
                    1 => {
                        if self.keep && i > start {
                            *pos = i;
                            self.then = Then::Quote;
                            return Ok(Some(Tok::StrSpan(start, i)));
                        }
                        *pos = i + 1;
                        if let Some(t) = self.end_string() {
                            return Ok(Some(t));
                        }
                        return Ok(None);
                    }
                    2 => {
                        // A whole, valid escape inside this chunk is taken in one step;
                        // anything else (split by the chunk end, or invalid) goes
                        // through the byte-wise machine, which reports exact offsets.
                        if let Some((enc, dec, cp)) = inline_escape(chunk, i) {
                            self.dec_total += dec;
                            self.chars_total += 1;
                            if self.decode_key {
                                let mut tmp = [0u8; 4];
                                let len = encode_utf8(cp, &mut tmp);
                                self.push_key_bytes(tmp.get(..len).unwrap_or(&[]));
                            }
                            if self.keep {
                                if dec <= self.allow_dec && enc as u64 <= self.allow_enc {
                                    self.allow_dec -= dec;
                                    self.allow_enc -= enc as u64;
                                } else {
                                    self.keep = false;
                                    self.cut = true;
                                    self.cut_by_dec = dec > self.allow_dec;
                                    if i > start {
                                        *pos = i + enc;
                                        return Ok(Some(Tok::StrSpan(start, i)));
                                    }
                                }
                            }
                            i += enc;
                            continue;
                        }
                        self.esc = Esc::Backslash;
                        self.unit_start = i;
                        self.held_len = 0;
                        self.prev_unit_bytes = 0;
                        i += 1;
                    }
                    3 => return Err(self.err(ErrorKind::ControlInString, i)),
                    _ => {
                        let Some((need, lo, hi)) = utf8_lead(b) else {
                            return Err(self.err(ErrorKind::InvalidUtf8, i));
                        };
                        self.utf_need = need;
                        self.utf_lo = lo;
                        self.utf_hi = hi;
                        self.unit_start = i;
                        self.held_len = 0;
                        self.prev_unit_bytes = 0;
                        if self.decode_key {
                            self.push_key_bytes(&[b]);
                        }
                        i += 1;
                    }
                }
                continue;
            }

            // Inside a multi-byte unit. (The held head of a unit after a lone
            // high surrogate moves to the front here, before anything is
            // added to it: that unit is an escape, so the scan resumes here.)
            if self.held_next != 0 {
                self.settle_held();
            }
            let Some(&b) = chunk.get(i) else {
                // The chunk ends mid-unit: hold this chunk's part of it.
                let from = if self.unit_from_prev {
                    start
                } else {
                    self.unit_start
                };
                let span_end = if self.unit_from_prev {
                    start
                } else {
                    self.unit_start
                };
                self.prev_unit_bytes = self.prev_unit_bytes.saturating_add((n - from) as u8);
                if self.keep {
                    self.append_held(chunk.get(from..n).unwrap_or(&[]));
                }
                self.unit_from_prev = true;
                if self.keep && span_end > start {
                    *pos = n;
                    return Ok(Some(Tok::StrSpan(start, span_end)));
                }
                return Ok(Some(self.need_more(chunk, pos)));
            };
            i += 1;
            if self.utf_need > 0 {
                if b < self.utf_lo || b > self.utf_hi {
                    return Err(self.err(ErrorKind::InvalidUtf8, i - 1));
                }
                if self.decode_key {
                    self.push_key_bytes(&[b]);
                }
                self.utf_lo = 0x80;
                self.utf_hi = 0xBF;
                self.utf_need -= 1;
                if self.utf_need == 0 {
                    if let Some(t) = self.unit_done(chunk, start, i, 0, pos) {
                        return Ok(Some(t));
                    }
                }
                continue;
            }
            match self.esc {
                Esc::Backslash => {
                    let decoded = match (simple_escape(b), b) {
                        (Some(d), _) => d,
                        (None, b'u') => {
                            self.esc = Esc::Hex(0);
                            self.cp = 0;
                            continue;
                        }
                        (None, _) => return Err(self.err(ErrorKind::InvalidEscape, i - 1)),
                    };
                    self.esc = Esc::None;
                    if self.decode_key {
                        self.push_key_bytes(&[decoded]);
                    }
                    if let Some(t) = self.unit_done(chunk, start, i, 1, pos) {
                        return Ok(Some(t));
                    }
                }
                Esc::Hex(k) => {
                    let Some(v) = hex_val(b) else {
                        return Err(self.err(ErrorKind::InvalidEscape, i - 1));
                    };
                    self.cp = self.cp * 16 + v;
                    if k < 3 {
                        self.esc = Esc::Hex(k + 1);
                        continue;
                    }
                    match self.cp {
                        0xD800..=0xDBFF => {
                            self.esc = Esc::LowBackslash;
                            continue;
                        }
                        0xDC00..=0xDFFF => {
                            if !self.lone_surrogates {
                                return Err(self.err(ErrorKind::LoneSurrogate, i - 1));
                            }
                            self.esc = Esc::None;
                            if self.decode_key {
                                self.push_key_bytes(REPLACEMENT);
                            }
                            if let Some(t) = self.unit_done(chunk, start, i, 3, pos) {
                                return Ok(Some(t));
                            }
                        }
                        cp => {
                            self.esc = Esc::None;
                            let mut tmp = [0u8; 4];
                            let len = encode_utf8(cp, &mut tmp);
                            if self.decode_key {
                                self.push_key_bytes(tmp.get(..len).unwrap_or(&[]));
                            }
                            if let Some(t) = self.unit_done(chunk, start, i, len as u64, pos) {
                                return Ok(Some(t));
                            }
                        }
                    }
                }
                Esc::LowBackslash => {
                    if b != b'\\' {
                        if !self.lone_surrogates {
                            return Err(self.err(ErrorKind::LoneSurrogate, i - 1));
                        }
                        // The high surrogate ends before `b`, which is read
                        // afresh as whatever it begins.
                        i -= 1;
                        self.esc = Esc::None;
                        if self.decode_key {
                            self.push_key_bytes(REPLACEMENT);
                        }
                        if let Some(t) = self.unit_done(chunk, start, i, 3, pos) {
                            return Ok(Some(t));
                        }
                        continue;
                    }
                    self.esc = Esc::LowU;
                }
                Esc::LowU => {
                    if b != b'u' {
                        if !self.lone_surrogates {
                            return Err(self.err(ErrorKind::LoneSurrogate, i - 1));
                        }
                        // A lone high surrogate, then a one-character escape.
                        let Some(d) = simple_escape(b) else {
                            return Err(self.err(ErrorKind::InvalidEscape, i - 1));
                        };
                        self.esc = Esc::None;
                        if self.decode_key {
                            self.push_key_bytes(REPLACEMENT);
                            self.push_key_bytes(&[d]);
                        }
                        if let Some(t) = self.lone_high_then(chunk, start, i, 2, 1, pos) {
                            return Ok(Some(t));
                        }
                        continue;
                    }
                    self.esc = Esc::LowHex(0);
                    self.low = 0;
                }
                Esc::LowHex(k) => {
                    let Some(v) = hex_val(b) else {
                        return Err(self.err(ErrorKind::InvalidEscape, i - 1));
                    };
                    self.low = self.low * 16 + v;
                    if k < 3 {
                        self.esc = Esc::LowHex(k + 1);
                        continue;
                    }
                    if !(0xDC00..=0xDFFF).contains(&self.low) {
                        if !self.lone_surrogates {
                            return Err(self.err(ErrorKind::LoneSurrogate, i - 1));
                        }
                        if self.decode_key {
                            self.push_key_bytes(REPLACEMENT);
                        }
                        if (0xD800..=0xDBFF).contains(&self.low) {
                            // A lone high surrogate, then another high one,
                            // which waits for its own low half.
                            self.cp = self.low;
                            self.esc = Esc::LowBackslash;
                            if let Some(t) = self.lone_high_then_high(chunk, start, i, pos) {
                                return Ok(Some(t));
                            }
                            continue;
                        }
                        // A lone high surrogate, then an escape that is not a
                        // surrogate.
                        let mut tmp = [0u8; 4];
                        let len = encode_utf8(self.low, &mut tmp);
                        if self.decode_key {
                            self.push_key_bytes(tmp.get(..len).unwrap_or(&[]));
                        }
                        self.esc = Esc::None;
                        if let Some(t) = self.lone_high_then(chunk, start, i, 6, len as u64, pos) {
                            return Ok(Some(t));
                        }
                        continue;
                    }
                    let cp = 0x10000 + ((self.cp - 0xD800) << 10) + (self.low - 0xDC00);
                    self.esc = Esc::None;
                    if self.decode_key {
                        let mut tmp = [0u8; 4];
                        let len = encode_utf8(cp, &mut tmp);
                        self.push_key_bytes(tmp.get(..len).unwrap_or(&[]));
                    }
                    if let Some(t) = self.unit_done(chunk, start, i, 4, pos) {
                        return Ok(Some(t));
                    }
                }
                Esc::None => {}
            }
        }
    }

    /// Skip whole tokens in a tight loop while a skip is on and nothing needs
    /// the general machine: stops (leaving the state exactly as the byte-wise
    /// path would have it) before any byte that could end the skip, open a
    /// value at the skip's own level for `skip_one`, exceed the depth limit, be
    /// an error, or run past the chunk. A string that the chunk cuts is entered
    /// and left to `scan_string`. Returns `NeedMore` when the chunk is used up.
    /// Compiled once per [`scan::Blocks`] level, like [`fast_string`]: on an
    /// AVX2 machine the loop runs inside `run_avx2`, and on an AVX-512 one too
    /// (`SkipJob` opts out of that level).
    #[inline(never)]
    fn fast_skip(&mut self, chunk: &[u8], pos: &mut usize) -> Option<Tok> {
        scan::with_blocks(SkipJob {
            lex: self,
            chunk,
            pos,
        })
    }

    /// The loop of [`Self::fast_skip`], inlined into each level's copy.
    #[inline(always)]
    fn fast_skip_in<B: scan::Blocks>(
        &mut self,
        blocks: B,
        chunk: &[u8],
        pos: &mut usize,
    ) -> Option<Tok> {
        let mut sk = self.skip?;
        let mut i = *pos;
        let mut state = self.state;
        let mut depth = self.depth;
        // The innermost container is an object (the stack's top, kept in a
        // register: every `,` and closer asks).
        let mut in_obj = self.in_object();
        // A closer at or above this depth ends the skip (for `skip_one`, so
        // does the one at `depth + 1`, which closes the skipped value).
        let close_floor = sk.depth + u32::from(sk.one);
        // A value that starts at this depth is `skip_one`'s own: the byte-wise
        // machine opens it (`u32::MAX`, never a depth, for `skip_rest`).
        let one_depth = if sk.one { sk.depth } else { u32::MAX };
        // The block skim (where the CPU runs it) is tried once this loop
        // has taken the rest of its wait (`skim_left`, counted across
        // calls), and at least a block's worth in this call, so that a short
        // skip (one dropped field) never pays for a try.
        let skim_on = skim::available();
        let mut skim_from = if skim_on {
            i.saturating_add(self.skim_left.max(skim::BLOCK))
        } else {
            usize::MAX
        };
        let mut entered = None;
        while let Some(&b) = chunk.get(i) {
            // A try needs a whole block; with less left, the loop ends the
            // chunk itself (not counted as a try that took nothing).
            if i >= skim_from && chunk.len() - i >= skim::BLOCK {
                let prev = skim_prev(state);
                let bounds = skim::Bounds {
                    level: sk.depth,
                    // Closing the outermost container is the byte loop's too.
                    floor: close_floor.max(1),
                    max_depth: self.max_depth,
                    one: sk.one,
                };
                let taken = match prev {
                    Some(p) if depth > 0 => skim::skim(chunk, i, p, depth, &mut self.stack, bounds),
                    _ => None,
                };
                if let Some(t) = taken {
                    #[cfg(test)]
                    tests::SKIMMED.with(|n| n.set(n.get() + (t.end - i) as u64));
                    i = t.end;
                    depth = t.depth;
                    in_obj = self.in_object();
                    state = skim_state(t.prev, in_obj);
                    sk.count += t.count;
                    self.skim_wait = if t.sparse {
                        (self.skim_wait * 2).min(skim::wait_max())
                    } else {
                        skim::BLOCK
                    };
                } else {
                    self.skim_wait = (self.skim_wait * 2).min(skim::wait_max());
                }
                skim_from = i + self.skim_wait;
                continue;
            }
            if scan::is_ws(b) {
                i = blocks.skip_ws_after(chunk, i);
                continue;
            }
            match (state, b) {
                (State::ObjFirst, b'}') | (State::ArrFirst, b']') | (State::After, b'}' | b']') => {
                    let obj = b == b'}';
                    if in_obj != obj || depth <= close_floor {
                        break;
                    }
                    // This closer and the ones right after it (`}}}`, `]}`:
                    // the ends of nested containers), each a step of this
                    // loop, not a trip round the dispatch. A closer it may
                    // not take is left to the dispatch, which breaks on it.
                    loop {
                        self.stack.pop();
                        in_obj = self.in_object();
                        depth -= 1;
                        i += 1;
                        match chunk.get(i) {
                            Some(&c @ (b'}' | b']'))
                                if in_obj == (c == b'}') && depth > close_floor => {}
                            _ => break,
                        }
                    }
                    state = separator_after_value(blocks, chunk, &mut i, in_obj);
                }
                (State::Value | State::ArrFirst, _) => {
                    if depth == one_depth {
                        break;
                    }
                    let at_level = depth == sk.depth;
                    match b {
                        b'"' => match skip_string_short_first(chunk, i + 1) {
                            Ok(end) => i = end,
                            Err(f) => {
                                entered = Some((false, f));
                                if at_level {
                                    sk.count += 1;
                                }
                                break;
                            }
                        },
                        b'[' | b'{' => {
                            if depth >= self.max_depth {
                                break;
                            }
                            let obj = b == b'{';
                            self.stack.push(obj);
                            in_obj = obj;
                            depth += 1;
                            if at_level {
                                sk.count += 1;
                            }
                            state = if obj {
                                State::ObjFirst
                            } else {
                                State::ArrFirst
                            };
                            i += 1;
                            continue;
                        }
                        b'-' | b'0'..=b'9' => {
                            let short = if self.short_numbers {
                                short_number_end(chunk, i)
                            } else {
                                None
                            };
                            if let Some(e) = short {
                                i = e;
                            } else if let Some(e) = number_end(chunk, i) {
                                self.short_numbers = e - i <= SHORT_NUMBER;
                                i = e;
                            } else {
                                break;
                            }
                        }
                        b't' | b'f' | b'n' => match literal_at(chunk, i) {
                            Some(text) => i += text.len(),
                            None => break,
                        },
                        _ => break,
                    }
                    // A scalar value completed inside a container.
                    if at_level {
                        sk.count += 1;
                    }
                    state = separator_after_value(blocks, chunk, &mut i, in_obj);
                }
                (State::ObjFirst | State::ObjKey, b'"') => {
                    match skip_string_short_first(chunk, i + 1) {
                        Ok(end) => state = colon_after_key(chunk, end, &mut i),
                        Err(f) => {
                            entered = Some((true, f));
                            break;
                        }
                    }
                }
                (State::After, b',') => {
                    state = if in_obj { State::ObjKey } else { State::Value };
                    i += 1;
                }
                (State::Colon, b':') => {
                    state = State::Value;
                    i += 1;
                }
                _ => break,
            }
        }
        if skim_on {
            self.skim_left = skim_from.saturating_sub(i);
        }
        self.state = state;
        self.depth = depth;
        self.skip = Some(sk);
        if let Some((key, f)) = entered {
            // A string the chunk ends inside of: enter it as `start_value` /
            // `structural` would, with the units already validated counted.
            self.begin_string(key);
            self.dec_total = f.dec;
            self.chars_total = f.chars;
            *pos = f.end;
            return None;
        }
        *pos = i;
        if i >= chunk.len() {
            return Some(self.need_more(chunk, pos));
        }
        None
    }

    /// Take whole tokens in one loop while a policy keeps them unchanged (see
    /// [`KeepSink`]): commas, colons and whitespace are consumed here, every
    /// value, key and closer is offered to `sink`, which writes it or refuses.
    /// Returns at the first refusal, at anything that is not a complete,
    /// valid token inside this chunk (an escape in a key, a number or string
    /// the chunk ends in, an error), or at a skip: the byte-wise machine then
    /// goes on from exactly there, so errors keep their kind and offset.
    #[inline(never)]
    pub(crate) fn fast_keep<S: KeepSink>(&mut self, chunk: &[u8], pos: &mut usize, sink: &mut S) {
        // Only between tokens: inside a string, number or literal every byte counts.
        if self.skip.is_some()
            || self.ended
            || matches!(
                self.state,
                State::Str | State::Num | State::Lit | State::Done
            )
        {
            return;
        }
        let mut i = *pos;
        let mut state = self.state;
        // The innermost container is an object (the stack's top, kept here).
        let mut in_obj = self.stack.last() == Some(&true);
        while let Some(&b) = chunk.get(i) {
            if scan::is_ws(b) {
                i = scan::skip_ws_after(chunk, i);
                continue;
            }
            match (state, b) {
                (State::After, b',') | (State::Colon, b':') => {
                    state = if b == b',' && in_obj {
                        State::ObjKey
                    } else {
                        State::Value
                    };
                    i += 1;
                }
                (State::ObjFirst | State::ObjKey, b'"') => {
                    let Some((q, dec)) = whole_string(chunk, i + 1, KEY_CAP as u64) else {
                        break;
                    };
                    // A key with escapes is decoded by the byte-wise machine.
                    if dec != (q - i - 1) as u64 || !sink.key(i, q) {
                        break;
                    }
                    state = colon_after_key(chunk, q + 1, &mut i);
                }
                (State::ObjFirst, b'}') | (State::ArrFirst, b']') | (State::After, b'}' | b']') => {
                    if in_obj != (b == b'}') || !sink.close(i) {
                        break;
                    }
                    self.stack.pop();
                    self.depth -= 1;
                    in_obj = self.stack.last() == Some(&true);
                    i += 1;
                    state = if self.depth == 0 {
                        State::Done
                    } else {
                        comma_after(chunk, &mut i, in_obj)
                    };
                }
                (State::Value | State::ArrFirst, _) => {
                    let end = match b {
                        b'"' => {
                            let max = sink.string_room();
                            let Some((q, dec)) = whole_string(chunk, i + 1, max) else {
                                break;
                            };
                            if !sink.string(i, q + 1, dec) {
                                break;
                            }
                            q + 1
                        }
                        b'[' | b'{' => {
                            let obj = b == b'{';
                            if self.depth >= self.max_depth || !sink.open(i, obj) {
                                break;
                            }
                            self.stack.push(obj);
                            self.depth += 1;
                            in_obj = obj;
                            state = if obj {
                                State::ObjFirst
                            } else {
                                State::ArrFirst
                            };
                            i += 1;
                            continue;
                        }
                        b'-' | b'0'..=b'9' => match number_end(chunk, i) {
                            Some(e) if sink.scalar(i, e) => e,
                            _ => break,
                        },
                        b't' | b'f' | b'n' => match literal_at(chunk, i) {
                            Some(text) if sink.scalar(i, i + text.len()) => i + text.len(),
                            _ => break,
                        },
                        _ => break,
                    };
                    i = end;
                    state = if self.depth == 0 {
                        State::Done
                    } else {
                        comma_after(chunk, &mut i, in_obj)
                    };
                }
                _ => break,
            }
        }
        self.state = state;
        *pos = i;
    }

    fn scan_number(
        &mut self,
        chunk: &[u8],
        pos: &mut usize,
        mut st: NumSt,
    ) -> Result<Option<Tok>, Error> {
        let start = *pos;
        let mut i = start;
        let emit = self.skip.is_none();
        if self.num_first {
            self.num_first = false;
            i += 1;
        }
        loop {
            let Some(&b) = chunk.get(i) else {
                self.state = State::Num;
                self.num_st = st;
                if emit && i > start {
                    *pos = i;
                    return Ok(Some(Tok::NumSpan(start, i)));
                }
                return Ok(Some(self.need_more(chunk, pos)));
            };
            let next = match (st, b) {
                (NumSt::Int | NumSt::Frac | NumSt::ExpDigits, b'0'..=b'9') => {
                    // Fast path: a run of digits.
                    i += 1;
                    while let Some(b'0'..=b'9') = chunk.get(i) {
                        i += 1;
                    }
                    continue;
                }
                (NumSt::Minus, b'0') => NumSt::Zero,
                (NumSt::Minus, b'1'..=b'9') => NumSt::Int,
                (NumSt::Zero | NumSt::Int, b'.') => NumSt::Dot,
                (NumSt::Zero | NumSt::Int | NumSt::Frac, b'e' | b'E') => NumSt::Exp,
                (NumSt::Dot, b'0'..=b'9') => NumSt::Frac,
                (NumSt::Exp, b'+' | b'-') => NumSt::ExpSign,
                (NumSt::Exp | NumSt::ExpSign, b'0'..=b'9') => NumSt::ExpDigits,
                (NumSt::Zero, b'0'..=b'9') => return Err(self.err(ErrorKind::InvalidNumber, i)),
                (s, _) if s.can_end() => {
                    // The terminator is not part of the number.
                    self.state = State::Num;
                    self.num_st = st;
                    if emit && i > start {
                        *pos = i;
                        self.then = Then::NumEnd;
                        return Ok(Some(Tok::NumSpan(start, i)));
                    }
                    *pos = i;
                    return Ok(self.end_scalar(Tok::NumEnd));
                }
                _ => return Err(self.err(ErrorKind::InvalidNumber, i)),
            };
            st = next;
            i += 1;
        }
    }

    fn scan_literal(&mut self, chunk: &[u8], pos: &mut usize) -> Result<Option<Tok>, Error> {
        let text = self.lit.text();
        let mut i = *pos;
        loop {
            let Some(&b) = chunk.get(i) else {
                return Ok(Some(self.need_more(chunk, pos)));
            };
            if text.get(self.lit_pos as usize) != Some(&b) {
                return Err(self.err(ErrorKind::UnexpectedByte, i));
            }
            i += 1;
            self.lit_pos += 1;
            if self.lit_pos as usize == text.len() {
                *pos = i;
                return Ok(self.end_scalar(Tok::Lit(self.lit)));
            }
        }
    }

    /// Announce the end of input; call repeatedly until [`Tok::Eof`] (or an error).
    /// May first return `NumEnd` (and `Skipped`) for a top-level number.
    pub fn next_eof(&mut self) -> Result<Tok, Error> {
        // A quote or terminator left in the last chunk is not read now.
        self.then = Then::Scan;
        if self.state == State::Num && self.num_st.can_end() {
            if let Some(t) = self.end_scalar(Tok::NumEnd) {
                return Ok(t);
            }
        }
        if self.state == State::Done {
            self.ended = true;
            return Ok(Tok::Eof);
        }
        Err(Error::new(ErrorKind::UnexpectedEnd, self.base))
    }
}

#[cfg(test)]
mod tests {
    use super::{
        digits_end, fast_string, fast_string_at, hex4_table, hex4_word, inline_escape, number_end,
        number_end_bytes, short_number_end, skip_string, skip_string_short_first, u_escapes,
        whole_string, FastStr, Passes, Tok, Tokenizer,
    };
    use crate::scan;
    use crate::skim;

    thread_local! {
        /// Bytes the block skim took in this thread's skips.
        pub(super) static SKIMMED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// The skip loop's wait between tries of the block skim is counted
    /// across feeds. A stretch the skim does not take (strings with `\u`
    /// escapes, indented) grows the wait to its longest; a compact list
    /// after it is still skimmed, in feeds of 4 KiB, of the longest wait
    /// and of twice that. Counted from each call's start alone, the wait
    /// was never over in the first two, and the list went to the byte loop.
    #[test]
    fn the_skim_comes_back_after_a_sparse_stretch_in_any_feed_size() {
        let item = "\n    {\n        \"text\": \"caf\\u00e9 \\u00e9t\\u00e9 \\u2014 long enough to fill a block and more\",\n        \"id\": 1\n    }";
        let sparse = vec![item; 3_000].join(",");
        let list = vec!["{\"id\":12,\"name\":\"item\",\"tags\":[\"a\",\"b\"],\"on\":true}"; 20_000]
            .join(",");
        let doc = format!("[{sparse},{list}]");
        let doc = doc.as_bytes();
        for feed in [4 << 10, skim::wait_max(), 2 * skim::wait_max()] {
            SKIMMED.with(|n| n.set(0));
            let mut t = Tokenizer::default();
            let mut toks = Vec::new();
            for chunk in doc.chunks(feed) {
                let mut pos = 0;
                loop {
                    let tok = t.next(chunk, &mut pos).expect("valid");
                    if tok == Tok::NeedMore {
                        break;
                    }
                    if tok == Tok::BeginArray && toks.is_empty() {
                        t.skip_rest(1, 0);
                    }
                    toks.push(tok);
                }
            }
            while let Ok(tok) = t.next_eof() {
                if tok == Tok::Eof {
                    break;
                }
                toks.push(tok);
            }
            assert_eq!(
                toks,
                [Tok::BeginArray, Tok::Skipped(23_000), Tok::EndArray],
                "feed {feed}"
            );
            let taken = SKIMMED.with(|n| n.get());
            if skim::available() {
                assert!(
                    taken > list.len() as u64 * 9 / 10,
                    "feed {feed}: the skim took {taken} of the list's {} bytes",
                    list.len()
                );
            } else {
                assert_eq!(taken, 0, "feed {feed}");
            }
        }
    }

    /// The unit-by-unit reading of a string body that `fast_string` must
    /// match: (end, closing quote, decoded bytes, characters).
    fn naive_string(s: &[u8], start: usize) -> (usize, bool, u64, u64) {
        let (mut i, mut dec, mut chars) = (start, 0u64, 0u64);
        loop {
            let Some(&b) = s.get(i) else {
                return (i, false, dec, chars);
            };
            let (enc, d) = match b {
                b'"' => return (i, true, dec, chars),
                b'\\' => match inline_escape(s, i) {
                    Some((enc, d, _)) => (enc, d),
                    None => return (i, false, dec, chars),
                },
                0..=0x1F => return (i, false, dec, chars),
                0x20..=0x7F => (1, 1),
                _ => {
                    let len = match b {
                        0xC0..=0xDF => 2,
                        0xE0..=0xEF => 3,
                        _ => 4,
                    };
                    match s.get(i..i + len).map(std::str::from_utf8) {
                        Some(Ok(_)) => (len, len as u64),
                        _ => return (i, false, dec, chars),
                    }
                }
            };
            i += enc;
            dec += d;
            chars += 1;
        }
    }

    /// Escape-rich bodies of every length class, cut at every length (the
    /// chunk end), with bad bytes planted: block-wise and unit-wise agree.
    #[test]
    fn fast_string_matches_the_unit_walk() {
        let units: &[&[u8]] = &[
            b"a",
            b"word ",
            b"\\n",
            b"\\\\",
            b"\\\"",
            b"\\/",
            b"\\u00e9",
            b"\\u20AC",
            b"\\uD83D\\uDE00",
            b"\\u0041",
            "é".as_bytes(),
            "日本".as_bytes(),
            "😀".as_bytes(),
            b"\\\\\\\\",
            b"\\t",
            b"0123456789abcdef",
            b"\\\\\\\"",
            b"\\\\\\\\\\\\\\u00e9",
            "\u{10FFFF}".as_bytes(),
            "\u{7FF}\u{800}".as_bytes(),
            // Each side of every edge of a `\u` escape's decoded length.
            b"\\u0000",
            b"\\u007F",
            b"\\u0080",
            b"\\u07ff",
            b"\\u0800",
            b"\\uD7FF",
            b"\\ue000",
            b"\\uFFFF",
            b"\\ud800\\udc00",
            b"\\uDBFF\\uDFFF",
            b"\\uDbFf\\udFfF",
        ];
        let bad: &[&[u8]] = &[
            b"\"",
            b"\\x",
            b"\\u12",
            b"\\uD83D",
            b"\\uD83Dx",
            b"\\uDE00",
            b"\n",
            b"\xC3",
            b"\xFF",
            b"\\",
            b"\\uZZZZ",
            b"\\uD83D\\u0041",
            b"\\\x01",
            b"\xC0\x80",
            b"\xED\xA0\x80",
            b"\xF4\x90\x80\x80",
            b"\xE6\x97",
            b"\xF0\x9F\x98",
            b"\x80",
            b"\\uD83D\\uD83D",
            b"\\u00G0",
            b"\\u:000",
            b"\\u/000",
            b"\\u0@00",
            b"\\u00`0",
            b"\\u000g",
            b"\\uDC00\\uDC00",
            b"\\uDBFF\\uE000",
            b"\\uD7FF\\uDC00",
        ];
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut rnd = |n: usize| (crate::scan::xorshift(&mut x) % n as u64) as usize;
        // Units without a `\u` escape: a string walks its blocks without the
        // `\u` work until its first one.
        let no_u: Vec<&[u8]> = units
            .iter()
            .copied()
            .filter(|u| !u.windows(2).any(|w| w == b"\\u"))
            .collect();
        // Each level this CPU runs differently, once.
        let levels = crate::scan::distinct_levels();
        for round in 0..3000 {
            let mut body = Vec::new();
            let target = 1 + rnd(300);
            // Every fourth body starts with up to 200 bytes of them.
            let plain = if round % 4 == 3 { rnd(200) } else { 0 };
            while body.len() < plain {
                body.extend_from_slice(no_u[rnd(no_u.len())]);
            }
            // Every fourth other starts with 16 to 100 plain ASCII bytes:
            // the skip loop's first sixteen, then the rest of a medium
            // string or the block walk from there.
            if round % 4 == 1 {
                let n = 16 + rnd(85);
                body.extend((0..n).map(|k| b"plain text, "[k % 12]));
            }
            while body.len() < target {
                body.extend_from_slice(units[rnd(units.len())]);
            }
            if round % 3 > 0 {
                let at = rnd(body.len() + 1);
                let b = bad[rnd(bad.len())];
                body.splice(at..at, b.iter().copied());
            }
            body.push(b'"');
            let start = rnd(3);
            let mut s = vec![b'x'; start];
            s.extend_from_slice(&body);
            for end in start..=s.len() {
                let c = &s[..end];
                let want = naive_string(c, start);
                for &level in &levels {
                    // Started in any pass, as a string that goes on from the
                    // last chunk is: the same answer.
                    let mut passes = Passes {
                        u: end % 2 == 1,
                        eager: end % 4 >= 2,
                    };
                    let f = fast_string_at(level, c, start, true, &mut passes);
                    // A UTF-8 sequence the chunk end splits is left to the
                    // byte-wise machine, as the unit walk does.
                    assert_eq!(
                        (f.end, f.quote, f.dec, f.chars),
                        want,
                        "{level:?} {:?} {c:02X?}",
                        String::from_utf8_lossy(c)
                    );
                    // Without the count: the same walk, no characters.
                    let f = fast_string_at(level, c, start, false, &mut Passes::default());
                    assert_eq!(
                        (f.end, f.quote, f.dec, f.chars),
                        (want.0, want.1, want.2, 0),
                        "uncounted {level:?} {:?} {c:02X?}",
                        String::from_utf8_lossy(c)
                    );
                }
                let f = fast_string(c, start, true, &mut Passes::default());
                assert_eq!((f.end, f.quote, f.dec, f.chars), want);
                // The skip loop's readings and the keeping loop's: the same
                // end, and what was validated when there is none.
                let skip = |r: Result<usize, FastStr>| r.map_err(|f| (f.end, f.quote, f.dec));
                let skipped = if want.1 {
                    Ok(want.0 + 1)
                } else {
                    Err((want.0, false, want.2))
                };
                assert_eq!(skip(skip_string(c, start)), skipped, "{c:02X?}");
                assert_eq!(skip(skip_string_short_first(c, start)), skipped, "{c:02X?}");
                // Each side of the string's own length, and no bound.
                let len = (want.0 - start) as u64;
                for max in [len.saturating_sub(1), len, u64::MAX] {
                    let whole = (want.1 && len <= max).then_some((want.0, want.2));
                    assert_eq!(whole_string(c, start, max), whole, "{max} {c:02X?}");
                }
                let f = fast_string(c, start, false, &mut Passes::default());
                assert_eq!(
                    (f.end, f.quote, f.dec, f.chars),
                    (want.0, want.1, want.2, 0)
                );
            }
        }
    }

    /// [`u_escapes`]' obvious twin: each escape read in turn, in place.
    /// The first bad lead, and over the escapes before it and before
    /// `limit`, what the bits of [`UEscapes::less_bits`] and
    /// [`UEscapes::not_chars`] count.
    fn u_walk(w: &[u8; 64], mut ul: u64, limit: u32) -> (u32, u64, u64) {
        let (mut less, mut not_chars) = (0, 0);
        while ul != 0 {
            let p = ul.trailing_zeros();
            let Some((enc, dec, _)) = inline_escape(w, p as usize) else {
                return (p, less, not_chars);
            };
            if p < limit {
                let enc = enc as u64;
                let pair = enc / 6;
                less += enc - dec - pair;
                not_chars += enc - 1 - pair;
            }
            if enc == 12 {
                ul &= !(1 << (p + 6));
            }
            ul &= ul - 1;
        }
        (64, less, not_chars)
    }

    /// A block's `\u` escapes from its masks against reading each in turn:
    /// blocks of escapes good and bad, at every offset, and random bytes
    /// from the alphabet escapes are made of.
    #[test]
    fn u_escapes_match_the_escape_walk() {
        let units: &[&[u8]] = &[
            b"a",
            b"\\n",
            b"\\\\",
            b"\\u0000",
            b"\\u007f",
            b"\\u0080",
            b"\\u07FF",
            b"\\u0800",
            b"\\uD7FF",
            b"\\uE000",
            b"\\uffff",
            b"\\uD83D\\uDE00",
            b"\\udbff\\udfff",
            b"\\uD800\\uDC00",
            b"\\uDC00",
            b"\\uD800",
            b"\\uD800\\u0041",
            b"\\uD800\\uD800",
            b"\\u00G0",
            b"\\u0:00",
            b"\\u/000",
            b"\\u@000",
        ];
        let alphabet = b"\\u0789aAbBcCdDeEfF/:@G`g";
        let mut x = 0x75E5_CA9E_5EED_0001u64;
        let mut rnd = |n: usize| (crate::scan::xorshift(&mut x) % n as u64) as usize;
        let mut seen = [0usize; 3];
        for round in 0..200_000 {
            let mut b = Vec::new();
            if round % 4 == 0 {
                b.extend((0..64).map(|_| alphabet[rnd(alphabet.len())]));
            } else {
                b.extend(std::iter::repeat_n(b'a', rnd(64)));
                while b.len() < 64 {
                    b.extend_from_slice(units[rnd(units.len())]);
                }
            }
            let Ok(w) = <[u8; 64]>::try_from(&b[..64]) else {
                unreachable!()
            };
            let e = scan::escape_masks_naive(&w);
            let ul = scan::escape_leads(e.bs) & (e.u >> 1);
            let u = u_escapes(scan::hex_masks_naive(&w), ul);
            let bad = u_walk(&w, ul, 64).0;
            seen[match bad {
                64 => 0,
                0..=52 => 1,
                _ => 2,
            }] += 1;
            assert_eq!(u.bad, bad, "{:?}", String::from_utf8_lossy(&w));
            // Apart from every lead, so a block counts them with its leads.
            assert_eq!(u.less_bits() & scan::escape_leads(e.bs), 0);
            // Counted up to where a block may stop: `bad`, or any byte
            // before it that is not inside a good escape (a stop is a unit's
            // first byte; a byte inside one is moved back to its lead).
            let mut limit = rnd(bad as usize + 1) as u32;
            let mut leads = ul;
            while leads != 0 {
                let p = leads.trailing_zeros();
                let enc = inline_escape(&w, p as usize).map_or(0, |e| e.0 as u32);
                if p >= bad || p >= limit {
                    break;
                }
                if limit < p + enc {
                    limit = p;
                }
                leads &= leads - 1;
            }
            for limit in [bad, limit] {
                let taken = scan::below(limit);
                let less = (u.less_bits() & taken).count_ones() as u64;
                assert_eq!(
                    (u.bad, less, u.not_chars(taken)),
                    u_walk(&w, ul, limit),
                    "{limit} {:?}",
                    String::from_utf8_lossy(&w)
                );
            }
        }
        // All good, bad inside the block, bad at its end: each is common.
        assert!(seen.iter().all(|&n| n > 10_000), "{seen:?}");
    }

    /// Every unit and every bad byte run at every offset around the first
    /// two block ends, the chunk cut at every length: a block that must leave
    /// a unit to the next one (or to the unit walk) agrees with the walk.
    #[test]
    fn fast_string_agrees_at_every_block_offset() {
        let units: &[&[u8]] = &[
            b"\\n",
            b"\\\\",
            b"\\u00e9",
            b"\\u20AC",
            b"\\uD83D\\uDE00",
            "é".as_bytes(),
            "日本".as_bytes(),
            "😀".as_bytes(),
            b"\\x",
            b"\\u12",
            b"\\uD83Dx",
            b"\\uDE00",
            b"\n",
            b"\xC3",
            b"\xFF",
            b"\xE6\x97",
            b"\xF0\x9F\x98",
            b"\\uD83D\\u0041",
            b"\\u007F",
            b"\\u0080",
            b"\\u0800",
            b"\\uFFFF",
            b"\\udbff\\udfff",
            b"\\u0G00",
            b"\\uDBFF\\uE000",
            b"\\u00e9\\uD83D\\uDE00\\u20AC",
        ];
        let levels = crate::scan::distinct_levels();
        for unit in units {
            for lead in 50..140 {
                let mut s = vec![b'a'; lead];
                s.extend_from_slice(unit);
                s.extend_from_slice(&[b'b'; 70]);
                s.push(b'"');
                for end in lead..=s.len() {
                    let c = &s[..end];
                    let want = naive_string(c, 0);
                    for &level in &levels {
                        let mut passes = Passes {
                            u: end % 2 == 1,
                            eager: end % 4 >= 2,
                        };
                        let f = fast_string_at(level, c, 0, true, &mut passes);
                        assert_eq!(
                            (f.end, f.quote, f.dec, f.chars),
                            want,
                            "{level:?} {lead} {end} {unit:02X?}"
                        );
                    }
                }
            }
        }
    }

    /// `hex4_word` against four table lookups: every value of every pair of
    /// the four places (the only place bytes interact is a carry into the
    /// next byte), the other two held at digits of every kind and at bytes
    /// next to the digit ranges.
    #[test]
    fn hex4_word_matches_the_table() {
        let fill = b"0fA:g\x80";
        for (x, y) in [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)] {
            let others: Vec<usize> = (0..4).filter(|&p| p != x && p != y).collect();
            for &f0 in fill {
                for &f1 in fill {
                    for pair in 0..=u16::MAX {
                        let mut b = [0u8; 4];
                        b[x] = pair as u8;
                        b[y] = (pair >> 8) as u8;
                        if let [o0, o1] = others[..] {
                            b[o0] = f0;
                            b[o1] = f1;
                        }
                        let want = hex4_table(&b);
                        assert_eq!(hex4_word(u32::from_le_bytes(b)), want, "{b:02X?}");
                    }
                }
            }
        }
        assert_eq!(hex4_word(u32::from_le_bytes(*b"D83d")), Some(0xD83D));
        assert_eq!(hex4_word(u32::from_le_bytes(*b"00e9")), Some(0xE9));
        assert_eq!(hex4_word(u32::from_le_bytes(*b"00g9")), None);
    }

    fn naive(s: &[u8], mut j: usize) -> usize {
        while s.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        j
    }

    /// Every byte value at every place of a digit run, from every start, and
    /// runs of every length up to past two words.
    #[test]
    fn digits_end_matches_the_byte_loop() {
        for len in 0..20 {
            for at in 0..=len {
                for b in 0..=255u8 {
                    let mut s: Vec<u8> = (0..len).map(|k| b'0' + (k % 10) as u8).collect();
                    if at < len {
                        s[at] = b;
                    }
                    for start in 0..=len {
                        assert_eq!(
                            digits_end(&s, start),
                            naive(&s, start),
                            "{s:?} from {start}"
                        );
                    }
                }
            }
        }
    }

    /// The masked number end against the byte-wise one: every string of
    /// number bytes up to five long at every place of a 40-byte window
    /// (so across the mask's 32nd byte), and random ones.
    #[test]
    fn number_end_matches_the_byte_walk() {
        const AB: &[u8] = b"0123456789-+.eEx ";
        let short_taken = std::cell::Cell::new(0u64);
        let check = |s: &[u8], from: &mut dyn Iterator<Item = usize>| {
            for i in from {
                let want = number_end_bytes(s, i);
                assert_eq!(
                    number_end(s, i),
                    want,
                    "{:?} from {i}",
                    String::from_utf8_lossy(s)
                );
                if let Some(e) = short_number_end(s, i) {
                    assert_eq!(
                        Some(e),
                        want,
                        "short: {:?} from {i}",
                        String::from_utf8_lossy(s)
                    );
                    short_taken.set(short_taken.get() + 1);
                }
            }
        };
        for len in 1..=5u32 {
            for code in 0..(AB.len() as u32).pow(len) {
                let mut piece = Vec::new();
                let mut c = code;
                for _ in 0..len {
                    piece.push(AB[(c % AB.len() as u32) as usize]);
                    c /= AB.len() as u32;
                }
                for at in [0usize, 1, 20, 27, 29, 31, 33] {
                    let mut s = vec![b'7'; 40];
                    s[at..at + piece.len()].copy_from_slice(&piece);
                    // From the start (a number that runs into the piece),
                    // from where the piece lands at the 32-byte digit
                    // mask's first bytes or across its edge, from each of
                    // the piece's bytes, and from the two after it and the
                    // last: not from every start, which took over four
                    // minutes in a debug build (CI's).
                    let end = at + piece.len();
                    let mut from = [0]
                        .into_iter()
                        .chain(
                            [1, 2, 28, 29, 30, 31, 32]
                                .iter()
                                .filter_map(|&o| at.checked_sub(o)),
                        )
                        .chain(at..(end + 2).min(s.len()))
                        .chain([s.len() - 1]);
                    check(&s, &mut from);
                }
            }
        }
        let mut x = 0x1234_5678_9ABC_DEF1u64;
        for _ in 0..20_000 {
            let len = 1 + (crate::scan::xorshift(&mut x) % 48) as usize;
            let s = mixed_bytes(&mut x, len, 4, AB, b'0'..=b'9');
            check(&s, &mut (0..s.len()));
        }
        // The short path took a share of them (not only `None`).
        assert!(short_taken.get() > 100_000, "{}", short_taken.get());
    }

    /// `len` random bytes: one in `every` (on average) from `ab`, the others
    /// from `rest`.
    fn mixed_bytes(
        x: &mut u64,
        len: usize,
        every: u64,
        ab: &[u8],
        rest: std::ops::RangeInclusive<u8>,
    ) -> Vec<u8> {
        let span = rest.end() - rest.start() + 1;
        (0..len)
            .map(|_| {
                let r = crate::scan::xorshift(x);
                if r.is_multiple_of(every) {
                    ab[(r >> 8) as usize % ab.len()]
                } else {
                    rest.start() + (r >> 16) as u8 % span
                }
            })
            .collect()
    }

    /// The token path's read of a string's last few bytes (`tail_string`)
    /// against the unit walk: on bytes of every class, with fewer than 16
    /// left, the closing quote exactly where a plain rest ends in one, and
    /// `None` with 16 or more left.
    #[test]
    fn tail_string_matches_the_unit_walk() {
        const AB: &[u8] = b"ab\"\\\x01\x7f\xc3\xa9 n";
        let mut x = 0x7A11_5EED_0000_0001u64;
        let mut found = 0;
        for _ in 0..100_000 {
            let len = (crate::scan::xorshift(&mut x) % 20) as usize;
            let s = mixed_bytes(&mut x, len, 6, AB, b'a'..=b'z');
            for start in 0..=s.len() {
                let (end, quote, _, _) = naive_string(&s, start);
                let plain = s[start..end]
                    .iter()
                    .all(|&b| (0x20..0x80).contains(&b) && b != b'\\');
                let want = (s.len() - start < 16 && quote && plain).then_some(end);
                assert_eq!(super::tail_string(&s, start), want, "{s:02X?} from {start}");
                found += u32::from(want.is_some());
            }
        }
        assert!(found > 50_000, "{found}");
    }

    /// The skip loop's byte-wise try at a string against `skip_string`: on
    /// bytes of every class, at every start and every length up to past its
    /// 16-byte reach, the same answer.
    #[test]
    fn short_first_string_matches_skip_string() {
        const AB: &[u8] = b"ab\"\\\x01\x7f\xc3\xa9 n";
        let mut x = 0x0DDB_A11C_AFE5_EED5u64;
        let mut quoted = 0;
        // Strings that end within 16 bytes, with a whole 16-byte window
        // left and with fewer bytes left (the chunk's end near): each form
        // of the byte path meets many it must end itself.
        let (mut window, mut tail) = (0, 0);
        for _ in 0..200_000 {
            let len = 1 + (crate::scan::xorshift(&mut x) % 40) as usize;
            let s = mixed_bytes(&mut x, len, 8, AB, b'a'..=b'z');
            for start in 0..s.len() {
                let answer = |r: Result<usize, super::FastStr>| {
                    r.map_err(|f| (f.end, f.quote, f.dec, f.chars))
                };
                let got = answer(skip_string_short_first(&s, start));
                assert_eq!(got, answer(skip_string(&s, start)), "{s:02X?} from {start}");
                quoted += u32::from(got.is_ok());
                if got.is_ok_and(|e| e - start <= 16) {
                    if s.len() - start >= 16 {
                        window += 1;
                    } else {
                        tail += 1;
                    }
                }
            }
        }
        assert!(quoted > 100_000, "{quoted}");
        assert!(window > 10_000 && tail > 10_000, "{window} {tail}");
    }
}
