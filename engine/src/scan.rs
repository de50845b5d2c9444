//! Block-wise scanning of string bodies: find the next byte that ends a plain
//! run — `"`, `\` or a control character (U+0000..U+001F) — and say whether the
//! run holds non-ASCII bytes. AVX2 (32 bytes a step) and SSE2 (16) on x86_64,
//! chosen at run time; NEON (16) on aarch64, where the target has it (it is
//! part of the aarch64 baseline, as SSE2 is of x86_64); a portable SWAR twin
//! (8 bytes a step) everywhere else. Every implementation is tested against
//! the one-line naive oracle (NEON under `qemu-aarch64`, by `.ci/test`).
//!
//! The 64-byte block masks that string scanning uses, the UTF-8 flags of a
//! block, its escape masks (backslashes and the bytes of one-character
//! escapes, from which [`simple_escapes`] finds whole escapes) and its hex
//! masks (for `\u` escapes) come through a [`Blocks`] level: code generic
//! over it runs via [`with_blocks`], which calls it inside a function
//! compiled for AVX-512 (F and BW) or AVX2, the best the CPU has and the job
//! accepts (so the masks inline into the caller's loop), with the NEON masks
//! on aarch64, and with the naive masks and flags otherwise.
//!
//! `unsafe` lives only here, each block with a `// SAFETY:` line.
#![allow(unsafe_code)]

/// The result of a scan: `end` is the index of the first special byte (or the
/// length), `non_ascii` whether any byte in `[0, end)` is ≥ 0x80.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub end: usize,
    pub non_ascii: bool,
}

#[inline]
fn is_special(b: u8) -> bool {
    b == b'"' || b == b'\\' || b < 0x20
}

/// The naive oracle.
pub fn scan_naive(s: &[u8]) -> Run {
    let end = s.iter().position(|&b| is_special(b)).unwrap_or(s.len());
    let non_ascii = s.get(..end).is_some_and(|r| r.iter().any(|&b| b >= 0x80));
    Run { end, non_ascii }
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// The portable twin: eight bytes at a time in a `u64`.
pub fn scan_swar(s: &[u8]) -> Run {
    let mut i = 0;
    let mut non_ascii = false;
    while let Some(w) = s.get(i..i + 8) {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        let x = u64::from_le_bytes(a);
        let q = x ^ (LO * b'"' as u64);
        let b = x ^ (LO * b'\\' as u64);
        // A byte is flagged when it is zero after the xor (quote, backslash) or
        // below 0x20; borrows can only flag bytes *after* a real hit, and only the
        // lowest flagged byte is used.
        let zero_q = q.wrapping_sub(LO) & !q & HI;
        let zero_b = b.wrapping_sub(LO) & !b & HI;
        let ctrl = x.wrapping_sub(LO * 0x20) & !x & HI;
        let hit = zero_q | zero_b | ctrl;
        if hit != 0 {
            let k = (hit.trailing_zeros() / 8) as usize;
            let before = if k == 0 {
                0
            } else {
                x & (u64::MAX >> (64 - 8 * k))
            };
            return Run {
                end: i + k,
                non_ascii: non_ascii || before & HI != 0,
            };
        }
        non_ascii |= x & HI != 0;
        i += 8;
    }
    let tail = scan_naive(s.get(i..).unwrap_or(&[]));
    Run {
        end: i + tail.end,
        non_ascii: non_ascii || tail.non_ascii,
    }
}

/// The oracle of [`ascii_run`]: the index of the first byte that is `"`,
/// `\`, a control byte or non-ASCII (or the length).
pub fn ascii_run_naive(s: &[u8]) -> usize {
    s.iter()
        .position(|&b| is_special(b) || b >= 0x80)
        .unwrap_or(s.len())
}

/// The portable twin of [`ascii_run`]: eight bytes at a time in a `u64`.
pub fn ascii_run_swar(s: &[u8]) -> usize {
    let mut i = 0;
    while let Some(w) = s.get(i..i + 8) {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        let x = u64::from_le_bytes(a);
        let q = x ^ (LO * b'"' as u64);
        let b = x ^ (LO * b'\\' as u64);
        // As in `scan_swar`, plus the high bit of every non-ASCII byte; a
        // borrow flags only bytes after a real hit.
        let hit = (q.wrapping_sub(LO) & !q)
            | (b.wrapping_sub(LO) & !b)
            | (x.wrapping_sub(LO * 0x20) & !x)
            | x;
        let hit = hit & HI;
        if hit != 0 {
            return i + (hit.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + ascii_run_naive(s.get(i..).unwrap_or(&[]))
}

// ---------------------------------------------------------------- UTF-8 flags
//
// UTF-8 is checked a block at a time by looking at every byte together with
// the one before it (two nibble tables on the earlier byte, one on the later)
// and at whether the byte two or three back starts a sequence that needs it as
// a continuation: the lookup scheme of Keiser and Lemire ("Validating UTF-8
// in less than one instruction per byte", 2021). Each table entry is the set of
// error kinds its nibble allows; a pair is bad when all three agree on one.
// A byte is *flagged* when the pair it ends is bad, or when it must be a third
// or fourth byte and is not one (or is one and must not be).
//
// A span is valid UTF-8 exactly when none of its bytes is flagged (reading the
// bytes before the span as ASCII) and its last sequence is complete
// ([`utf8_incomplete_tail`]); the tests check that against `std`.

/// A lead byte followed by a byte that is not a continuation.
const TOO_SHORT: u8 = 1 << 0;
/// A continuation after an ASCII byte.
const TOO_LONG: u8 = 1 << 1;
/// `E0` followed by `80..=9F`.
const OVERLONG_3: u8 = 1 << 2;
/// `F4 90..` and above, or a lead from `F5`.
const TOO_LARGE: u8 = 1 << 3;
/// `ED A0..=BF`: a UTF-16 surrogate.
const SURROGATE: u8 = 1 << 4;
/// `C0` or `C1` followed by a continuation.
const OVERLONG_2: u8 = 1 << 5;
/// `F0 80..=8F` (overlong), or a lead from `F5` followed by `80..=8F`.
const OVERLONG_4_OR_LARGE: u8 = 1 << 6;
/// Two continuations in a row: right only for a third or fourth byte.
const TWO_CONTS: u8 = 1 << 7;
/// The kinds that depend on the earlier byte's high nibble alone.
const CARRY: u8 = TOO_SHORT | TOO_LONG | TWO_CONTS;

/// By the high nibble of the earlier byte.
const PREV_HIGH: [u8; 16] = {
    let mut t = [0u8; 16];
    let mut k = 0;
    while k < 8 {
        t[k] = TOO_LONG; // ASCII
        k += 1;
    }
    while k < 12 {
        t[k] = TWO_CONTS; // a continuation
        k += 1;
    }
    t[0xC] = TOO_SHORT | OVERLONG_2;
    t[0xD] = TOO_SHORT;
    t[0xE] = TOO_SHORT | OVERLONG_3 | SURROGATE;
    t[0xF] = TOO_SHORT | TOO_LARGE | OVERLONG_4_OR_LARGE;
    t
};

/// By the low nibble of the earlier byte.
const PREV_LOW: [u8; 16] = {
    let mut t = [CARRY | TOO_LARGE | OVERLONG_4_OR_LARGE; 16];
    t[0x0] = CARRY | OVERLONG_3 | OVERLONG_2 | OVERLONG_4_OR_LARGE;
    t[0x1] = CARRY | OVERLONG_2;
    t[0x2] = CARRY;
    t[0x3] = CARRY;
    t[0x4] = CARRY | TOO_LARGE;
    t[0xD] = CARRY | TOO_LARGE | OVERLONG_4_OR_LARGE | SURROGATE;
    t
};

/// By the high nibble of the later byte.
const CUR_HIGH: [u8; 16] = {
    let mut t = [TOO_SHORT; 16]; // ASCII or a lead: not a continuation
    t[0x8] = TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | OVERLONG_4_OR_LARGE;
    t[0x9] = TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE;
    t[0xA] = TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE;
    t[0xB] = TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE;
    t
};

/// Whether the byte `cur` is flagged, given the three bytes before it.
#[inline]
fn utf8_flag(prev3: u8, prev2: u8, prev1: u8, cur: u8) -> bool {
    let nib = |t: &[u8; 16], x: u8| t.get((x & 0x0F) as usize).copied().unwrap_or(0);
    let pair = nib(&PREV_HIGH, prev1 >> 4) & nib(&PREV_LOW, prev1) & nib(&CUR_HIGH, cur >> 4);
    let must = if prev2 >= 0xE0 || prev3 >= 0xF0 {
        0x80
    } else {
        0
    };
    pair ^ must != 0
}

/// The naive UTF-8 flags of a block: bit `k` when `b[k]` is flagged, given
/// the three bytes `before` it.
pub fn utf8_flags_naive(before: [u8; 3], b: &[u8; 64]) -> u64 {
    let [mut p3, mut p2, mut p1] = before;
    let mut m = 0u64;
    for (k, &c) in b.iter().enumerate() {
        if utf8_flag(p3, p2, p1, c) {
            m |= 1 << k;
        }
        (p3, p2, p1) = (p2, p1, c);
    }
    m
}

/// Whether `s` ends inside a UTF-8 sequence: its last lead (among its last
/// three bytes) asks for more bytes than follow it.
pub fn utf8_incomplete_tail(s: &[u8]) -> bool {
    for back in 1..=3 {
        let Some(&b) = s.len().checked_sub(back).and_then(|i| s.get(i)) else {
            return false;
        };
        if b < 0x80 {
            return false;
        }
        if b >= 0xC0 {
            let need = if b >= 0xF0 {
                4
            } else if b >= 0xE0 {
                3
            } else {
                2
            };
            return back < need;
        }
    }
    false
}

/// Where a block's end splits a UTF-8 sequence: the first of its last three
/// bytes that is a lead asking for more bytes than the block holds after it
/// (`F0..` at 61, `E0..` at 62, `C0..` at 63), or 64 if none is. On valid
/// text at most one is; on text that is not, any one of them starts the
/// next block, which then finds the error.
#[inline(always)]
pub fn split_lead(b: &[u8; 64]) -> u32 {
    // On branches: a split is rare, and three compares that fall through
    // cost less than the same three turned into a mask.
    let [.., b61, b62, b63] = *b;
    if b61 >= 0xF0 {
        61
    } else if b62 >= 0xE0 {
        62
    } else if b63 >= 0xC0 {
        63
    } else {
        64
    }
}

/// Bytes that follow a backslash in a one-character escape: `"\/bfnrt`
/// (`u` begins the six-byte form and is not among them).
#[inline]
fn is_simple_escape(b: u8) -> bool {
    matches!(b, b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't')
}

/// Nibble tables of [`is_simple_escape`]: a byte is one when
/// `ESC_HIGH[b >> 4] & ESC_LOW[b & 15] != 0`. One bit per high nibble in use
/// (2, 5, 6, 7); each low-nibble entry holds the bits of the high nibbles it
/// pairs with.
const ESC_HIGH: [u8; 16] = [0, 0, 1, 0, 0, 2, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0];
const ESC_LOW: [u8; 16] = {
    let mut t = [0u8; 16];
    t[0x2] = 1 | 4 | 8; // "  b  r
    t[0x4] = 8; // t
    t[0x6] = 4; // f
    t[0xC] = 2; // \
    t[0xE] = 4; // n
    t[0xF] = 1; // /
    t
};

/// The escape masks of one 64-byte block; bit `k` describes byte `k`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Escapes {
    /// Backslashes.
    pub bs: u64,
    /// Bytes that may follow a backslash in a one-character escape: `"\/bfnrt`.
    pub simple: u64,
    /// `u`, which begins the six-byte form.
    pub u: u64,
}

/// The naive escape masks of a block (and the portable implementation).
pub fn escape_masks_naive(b: &[u8; 64]) -> Escapes {
    let mut e = Escapes::default();
    for (k, &x) in b.iter().enumerate() {
        let bit = 1u64 << k;
        if x == b'\\' {
            e.bs |= bit;
        }
        if is_simple_escape(x) {
            e.simple |= bit;
        }
        if x == b'u' {
            e.u |= bit;
        }
    }
    e
}

/// The hex-digit masks of one 64-byte block, for the four digits of `\u`
/// escapes; bit `k` describes byte `k`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HexMasks {
    /// Hex digits: `0-9`, `a-f`, `A-F`.
    pub hex: u64,
    /// `0`.
    pub zero: u64,
    /// `0-7`.
    pub oct: u64,
    /// `d` or `D`.
    pub d: u64,
    /// `c-f` or `C-F`.
    pub cf: u64,
}

impl HexMasks {
    /// The masks from `class(bits)`, the mask of the block's bytes whose
    /// [`HEX_HIGH`] and [`HEX_LOW`] entries share one of `bits`.
    #[inline(always)]
    fn from_classes(class: impl Fn(u8) -> u64) -> HexMasks {
        HexMasks {
            hex: class(HX_DIGIT | HX_ALPHA),
            zero: class(HX_ZERO),
            oct: class(HX_OCT),
            d: class(HX_D),
            cf: class(HX_CF),
        }
    }
}

/// The naive hex masks of a block (and the portable implementation).
pub fn hex_masks_naive(b: &[u8; 64]) -> HexMasks {
    let mut h = HexMasks::default();
    for (k, &x) in b.iter().enumerate() {
        let bit = 1u64 << k;
        let lower = x.to_ascii_lowercase();
        if x.is_ascii_hexdigit() {
            h.hex |= bit;
        }
        if x == b'0' {
            h.zero |= bit;
        }
        if (b'0'..=b'7').contains(&x) {
            h.oct |= bit;
        }
        if lower == b'd' {
            h.d |= bit;
        }
        if (b'c'..=b'f').contains(&lower) {
            h.cf |= bit;
        }
    }
    h
}

/// Class bits of the nibble tables [`HEX_HIGH`] and [`HEX_LOW`]: a byte is
/// in class `c` when `HEX_HIGH[b >> 4] & HEX_LOW[b & 15] & c != 0`.
const HX_DIGIT: u8 = 1;
const HX_ALPHA: u8 = 2;
const HX_ZERO: u8 = 4;
const HX_OCT: u8 = 8;
const HX_D: u8 = 16;
const HX_CF: u8 = 32;
const HEX_HIGH: [u8; 16] = {
    let mut t = [0u8; 16];
    t[0x3] = HX_DIGIT | HX_ZERO | HX_OCT;
    t[0x4] = HX_ALPHA | HX_D | HX_CF;
    t[0x6] = HX_ALPHA | HX_D | HX_CF;
    t
};
const HEX_LOW: [u8; 16] = {
    let mut t = [0u8; 16];
    let mut k = 0;
    while k < 16 {
        t[k] = match k {
            0 => HX_DIGIT | HX_ZERO | HX_OCT,
            1 | 2 => HX_DIGIT | HX_OCT | HX_ALPHA,
            3 | 5 | 6 => HX_DIGIT | HX_OCT | HX_ALPHA | HX_CF,
            4 => HX_DIGIT | HX_OCT | HX_ALPHA | HX_CF | HX_D,
            7 => HX_DIGIT | HX_OCT,
            8 | 9 => HX_DIGIT,
            _ => 0,
        };
        k += 1;
    }
    t
};

/// The backslashes of `bs` that begin an escape, for a block read from a
/// point outside any escape: in each run of backslashes, those at an even
/// distance from the run's start (the others are escaped by the one before).
#[inline(always)]
pub fn escape_leads(bs: u64) -> u64 {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    let starts = bs & !(bs << 1);
    // Adding a run's first bit clears the whole run (the carry stops at the
    // zero after it), so what `bs` keeps are the runs that start at odd bits.
    let odd_runs = bs & bs.wrapping_add(starts & EVEN);
    ((bs & !odd_runs) & EVEN) | (odd_runs & !EVEN)
}

/// The short last block of `s` from `at` (fewer than 64 bytes), padded with
/// spaces, which are in no mask or class.
#[inline(always)]
fn padded_block(s: &[u8], at: usize) -> [u8; 64] {
    let mut b = [b' '; 64];
    let tail = s.get(at..).unwrap_or(&[]);
    if let Some(dst) = b.get_mut(..tail.len()) {
        dst.copy_from_slice(tail);
    }
    b
}

/// The one-character escapes of the block at `s[at..]` (64 bytes, or the
/// short tail padded with spaces), read from a point outside any escape: bit
/// `k` when `s[at + k]` is a backslash beginning an escape whose second byte,
/// in the block, is one of `"\/bfnrt`. Such an escape is whole and valid.
#[inline(always)]
pub fn simple_escapes<B: Blocks>(blocks: B, s: &[u8], at: usize) -> u64 {
    let e = match s
        .get(at..at + 64)
        .and_then(|w| <&[u8; 64]>::try_from(w).ok())
    {
        Some(w) => blocks.escape_masks(w),
        None => blocks.escape_masks(&padded_block(s, at)),
    };
    escape_leads(e.bs) & (e.simple >> 1)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{
        scan_naive, BlockJob, Blocks, Classes, Escapes, HexMasks, Letters, Literals, Masks, Run,
        CUR_HIGH, ESC_HIGH, ESC_LOW, HEX_HIGH, HEX_LOW, HX_ALPHA, HX_CF, HX_D, HX_DIGIT, HX_OCT,
        HX_ZERO, PREV_HIGH, PREV_LOW, WS_BY_LOW,
    };
    use std::arch::x86_64::*;

    /// # Safety
    /// The CPU must support SSE2 (every x86_64 CPU does).
    #[target_feature(enable = "sse2")]
    pub unsafe fn scan_sse2(s: &[u8]) -> Run {
        let n = s.len();
        let mut i = 0;
        let mut non_ascii = false;
        let quote = _mm_set1_epi8(b'"' as i8);
        let bslash = _mm_set1_epi8(b'\\' as i8);
        let ctrl_max = _mm_set1_epi8(0x1F);
        while i + 16 <= n {
            // SAFETY: i + 16 <= n, so the 16 bytes read are inside `s`; loadu has no alignment need.
            let v = unsafe { _mm_loadu_si128(s.as_ptr().add(i) as *const __m128i) };
            let q = _mm_cmpeq_epi8(v, quote);
            let b = _mm_cmpeq_epi8(v, bslash);
            // v <= 0x1F unsigned  <=>  max(v, 0x1F) == 0x1F
            let c = _mm_cmpeq_epi8(_mm_max_epu8(v, ctrl_max), ctrl_max);
            let hit = _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(q, b), c)) as u32;
            let high = _mm_movemask_epi8(v) as u32;
            if hit != 0 {
                let k = hit.trailing_zeros();
                let before = high & ((1u32 << k) - 1);
                return Run {
                    end: i + k as usize,
                    non_ascii: non_ascii || before != 0,
                };
            }
            non_ascii |= high != 0;
            i += 16;
        }
        let tail = scan_naive(s.get(i..).unwrap_or(&[]));
        Run {
            end: i + tail.end,
            non_ascii: non_ascii || tail.non_ascii,
        }
    }

    /// Bit `k` set when `w[k]` ends a plain-ASCII run: a control or
    /// non-ASCII byte (both below 0x20 as a signed byte), `"` or `\`. The
    /// 16-byte step of [`ascii_run_sse2`] and [`plain_string_sse2`].
    #[inline(always)]
    fn plain_stops_sse2(w: &[u8; 16]) -> u32 {
        // SAFETY: `w` is 16 readable bytes; SSE2 is part of the x86_64
        // baseline; loadu has no alignment need.
        unsafe {
            let v = _mm_loadu_si128(w.as_ptr() as *const __m128i);
            let low = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20));
            let q = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let b = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
            _mm_movemask_epi8(_mm_or_si128(low, _mm_or_si128(q, b))) as u32
        }
    }

    /// [`super::ascii_run`] sixteen bytes a step with SSE2, which every
    /// x86_64 CPU has.
    #[inline]
    pub fn ascii_run_sse2(s: &[u8]) -> usize {
        let mut i = 0;
        while let Some(w) = s.get(i..i + 16).and_then(|w| <&[u8; 16]>::try_from(w).ok()) {
            let hit = plain_stops_sse2(w);
            if hit != 0 {
                return i + hit.trailing_zeros() as usize;
            }
            i += 16;
        }
        i + super::ascii_run_naive(s.get(i..).unwrap_or(&[]))
    }

    /// The bytes of `v` that end a plain-ASCII run: below 0x20 as signed
    /// bytes (control bytes and non-ASCII), `"` and `\`.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn ascii_stops(v: __m256i) -> __m256i {
        let low = _mm256_cmpgt_epi8(_mm256_set1_epi8(0x20), v);
        let q = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8));
        let b = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8));
        _mm256_or_si256(low, _mm256_or_si256(q, b))
    }

    /// The first byte of the 64-byte window `lo`, `hi` that ends a
    /// plain-ASCII run ([`ascii_stops`]), if any: one mask for the test,
    /// two more only when it hits.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn first_ascii_stop(lo: __m256i, hi: __m256i) -> Option<usize> {
        let (a, b) = (ascii_stops(lo), ascii_stops(hi));
        if _mm256_movemask_epi8(_mm256_or_si256(a, b)) == 0 {
            return None;
        }
        Some(join_halves(a, b).trailing_zeros() as usize)
    }

    /// [`super::ascii_run`] 64 bytes a step: three compares and one mask
    /// per 32 bytes, where the string blocks also sort continuation bytes
    /// and count them.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn ascii_run_avx2(s: &[u8]) -> usize {
        let mut i = 0;
        while let Some(w) = s.get(i..i + 64) {
            // SAFETY: `w` is 64 readable bytes; loadu has no alignment need.
            let (lo, hi) = unsafe {
                let p = w.as_ptr() as *const __m256i;
                (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1)))
            };
            if let Some(k) = first_ascii_stop(lo, hi) {
                return i + k;
            }
            i += 64;
        }
        i + ascii_run_sse2(s.get(i..).unwrap_or(&[]))
    }

    /// [`super::ascii_run_copy`] within `dst`'s spare capacity:
    /// [`ascii_run_avx2`] that stores each 64-byte window at the end of
    /// `dst` as soon as it is loaded, so the run is read once and no copy
    /// call follows. A window is stored whole before it is checked; the
    /// bytes past the run are spare capacity, and `dst`'s length covers only
    /// the run. Looks no further than the spare capacity (so never grows
    /// `dst`): a return equal to it may mean the run goes on.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn ascii_run_copy_avx2(s: &[u8], dst: &mut Vec<u8>) -> usize {
        let len = dst.len();
        let s = s.get(..s.len().min(dst.capacity() - len)).unwrap_or(&[]);
        let d = dst.spare_capacity_mut().as_mut_ptr() as *mut u8;
        let mut i = 0;
        let n = loop {
            let Some(w) = s.get(i..i + 64) else {
                let rest = s.get(i..).unwrap_or(&[]);
                if rest.is_empty() {
                    break i;
                }
                let r = ascii_run_sse2(rest);
                // SAFETY: `d` has `s.len()` bytes of spare capacity (`s` is
                // cut to it above) and `i + r <= s.len()`; source and destination are
                // different allocations (`s` is borrowed, `dst` mutably).
                unsafe { std::ptr::copy_nonoverlapping(rest.as_ptr(), d.add(i), r) };
                break i + r;
            };
            // SAFETY: `w` is 64 readable bytes, and `d[i..i + 64]` is inside
            // the spare capacity (`i + 64 <= s.len()`); loadu and storeu have
            // no alignment need.
            let (lo, hi) = unsafe {
                let p = w.as_ptr() as *const __m256i;
                let (lo, hi) = (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1)));
                let q = d.add(i) as *mut __m256i;
                _mm256_storeu_si256(q, lo);
                _mm256_storeu_si256(q.add(1), hi);
                (lo, hi)
            };
            if let Some(k) = first_ascii_stop(lo, hi) {
                break i + k;
            }
            i += 64;
        };
        // SAFETY: `n <= s.len()` is within the spare capacity, and its
        // first `n` bytes were all written: whole windows up to `i`, then the
        // window or tail holding the run's end.
        unsafe { dst.set_len(len + n) };
        n
    }

    /// [`super::skip_ws`] with SSE2, which every x86_64 CPU has.
    #[inline]
    pub fn skip_ws_sse2(s: &[u8], mut i: usize) -> usize {
        while let Some(w) = s.get(i..i + 16) {
            // SAFETY: `w` is 16 readable bytes; SSE2 is part of the x86_64 baseline;
            // loadu has no alignment need.
            let ws = unsafe {
                let v = _mm_loadu_si128(w.as_ptr() as *const __m128i);
                let sp = _mm_cmpeq_epi8(v, _mm_set1_epi8(b' ' as i8));
                let nl = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\n' as i8));
                let cr = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\r' as i8));
                let tb = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\t' as i8));
                _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(sp, nl), _mm_or_si128(cr, tb))) as u32
            };
            if ws != 0xFFFF {
                return i + (!ws).trailing_zeros() as usize;
            }
            i += 16;
        }
        super::skip_ws_portable(s, i)
    }

    /// [`super::digits32`] with SSE2, which every x86_64 CPU has.
    #[inline]
    pub fn digits32_sse2(s: &[u8], i: usize) -> Option<u32> {
        let w = s.get(i..i.checked_add(32)?)?;
        // SAFETY: `w` is 32 readable bytes; SSE2 is part of the x86_64
        // baseline; loadu has no alignment need.
        let mask = unsafe {
            let p = w.as_ptr() as *const __m128i;
            // A byte is a digit when `b - '0'`, unsigned, is at most 9.
            let digits = |v: __m128i| {
                let x = _mm_sub_epi8(v, _mm_set1_epi8(b'0' as i8));
                _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(9)), x)) as u32
            };
            digits(_mm_loadu_si128(p)) | digits(_mm_loadu_si128(p.add(1))) << 16
        };
        Some(mask)
    }

    /// [`super::plain_string`] with SSE2, which every x86_64 CPU has.
    #[inline]
    pub fn plain_string_sse2<const STEPS: usize>(s: &[u8], i: usize) -> Option<usize> {
        let mut j = i;
        for _ in 0..STEPS {
            let w: &[u8; 16] = s.get(j..j + 16)?.try_into().ok()?;
            let mask = plain_stops_sse2(w);
            if mask != 0 {
                let k = mask.trailing_zeros() as usize;
                return (w.get(k) == Some(&b'"')).then_some(j + k);
            }
            j += 16;
        }
        None
    }

    /// Special, continuation and high-bit masks of 32 bytes.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn half_masks(v: __m256i) -> (u32, u32, u32) {
        let quote = _mm256_set1_epi8(b'"' as i8);
        let bslash = _mm256_set1_epi8(b'\\' as i8);
        let ctrl_max = _mm256_set1_epi8(0x1F);
        // Bytes 0x80..=0xBF are, as signed bytes, exactly those below -64 (0xC0).
        let cont_lim = _mm256_set1_epi8(-64);
        let q = _mm256_cmpeq_epi8(v, quote);
        let b = _mm256_cmpeq_epi8(v, bslash);
        let c = _mm256_cmpeq_epi8(_mm256_max_epu8(v, ctrl_max), ctrl_max);
        let sp = _mm256_movemask_epi8(_mm256_or_si256(_mm256_or_si256(q, b), c)) as u32;
        let ct = _mm256_movemask_epi8(_mm256_cmpgt_epi8(cont_lim, v)) as u32;
        (sp, ct, _mm256_movemask_epi8(v) as u32)
    }

    /// The two 32-byte halves of a block.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn halves(b: &[u8; 64]) -> (__m256i, __m256i) {
        // SAFETY: `b` is 64 readable bytes; loadu has no alignment need.
        unsafe {
            (
                _mm256_loadu_si256(b.as_ptr() as *const __m256i),
                _mm256_loadu_si256(b.as_ptr().add(32) as *const __m256i),
            )
        }
    }

    /// A block's mask from its halves' 32-bit masks.
    #[inline(always)]
    fn join(lo: u32, hi: u32) -> u64 {
        u64::from(lo) | u64::from(hi) << 32
    }

    /// [`Blocks::masks`] at AVX2: a block's halves, then a join.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn masks_avx2(b: &[u8; 64]) -> Masks {
        let (lo, hi) = halves(b);
        let (s0, c0, h0) = half_masks(lo);
        let (s1, c1, h1) = half_masks(hi);
        Masks {
            special: join(s0, s1),
            cont: join(c0, c1),
            high: join(h0, h1),
        }
    }

    /// A 16-entry table in both lanes, for `_mm256_shuffle_epi8`.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn table(t: &[u8; 16]) -> __m256i {
        // SAFETY: `t` is 16 readable bytes; loadu has no alignment need.
        let v = unsafe { _mm_loadu_si128(t.as_ptr() as *const __m128i) };
        _mm256_broadcastsi128_si256(v)
    }

    /// A block's mask from its halves' byte masks (all ones for a byte in
    /// the class): a `movemask` each, and a join.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn join_halves(lo: __m256i, hi: __m256i) -> u64 {
        join(
            _mm256_movemask_epi8(lo) as u32,
            _mm256_movemask_epi8(hi) as u32,
        )
    }

    /// The bytes of a block (its halves `lo`, `hi`) equal to `c`.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn equal_to(lo: __m256i, hi: __m256i, c: u8) -> u64 {
        let c = _mm256_set1_epi8(c as i8);
        join_halves(_mm256_cmpeq_epi8(lo, c), _mm256_cmpeq_epi8(hi, c))
    }

    /// [`Blocks::classes`]: a compare a half for most classes, then a
    /// `movemask` each and a join.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn classes_avx2(b: &[u8; 64]) -> Classes {
        let (lo, hi) = halves(b);
        let eq = |c: u8| equal_to(lo, hi, c);
        // As at AVX-512: each whitespace byte by its low nibble.
        let wt = table(&WS_BY_LOW);
        let ws = |v: __m256i| _mm256_cmpeq_epi8(_mm256_shuffle_epi8(wt, v), v);
        // `v - '0' <= 9`, unsigned: the minimum with 9 is itself.
        let (zero, nine) = (_mm256_set1_epi8(b'0' as i8), _mm256_set1_epi8(9));
        let digit = |v: __m256i| {
            let d = _mm256_sub_epi8(v, zero);
            _mm256_cmpeq_epi8(_mm256_min_epu8(d, nine), d)
        };
        // `v <= 0x1F`, unsigned: the maximum with 0x1F is 0x1F.
        let c1f = _mm256_set1_epi8(0x1F);
        let ctrl = |v: __m256i| _mm256_cmpeq_epi8(_mm256_max_epu8(v, c1f), c1f);
        // The classes most blocks have none of, by one `movemask` of their
        // union (a high byte by its own top bit): each `movemask` is a cycle
        // on its own port. Each class's halves, compared once.
        let cmp = |c: u8| {
            let c = _mm256_set1_epi8(c as i8);
            [_mm256_cmpeq_epi8(lo, c), _mm256_cmpeq_epi8(hi, c)]
        };
        let rare = [
            cmp(b'\\'),
            [ctrl(lo), ctrl(hi)],
            [lo, hi],
            cmp(b'+'),
            cmp(b'E'),
        ];
        let union = rare
            .iter()
            .flatten()
            .fold(_mm256_setzero_si256(), |u, &v| _mm256_or_si256(u, v));
        let [bslash, ctrl_bytes, high, plus, big_e] = if _mm256_movemask_epi8(union) != 0 {
            rare.map(|[l, h]| join_halves(l, h))
        } else {
            [0; 5]
        };
        Classes {
            quote: eq(b'"'),
            bslash,
            ws: join_halves(ws(lo), ws(hi)),
            lbrace: eq(b'{'),
            rbrace: eq(b'}'),
            lbrack: eq(b'['),
            rbrack: eq(b']'),
            colon: eq(b':'),
            comma: eq(b','),
            ctrl: ctrl_bytes,
            high,
            digit: join_halves(digit(lo), digit(hi)),
            zero: eq(b'0'),
            minus: eq(b'-'),
            plus,
            dot: eq(b'.'),
            e: eq(b'e'),
            big_e,
        }
    }

    /// [`Blocks::letters`]: a compare a half a letter.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn letters_avx2(b: &[u8; 64]) -> Letters {
        let (lo, hi) = halves(b);
        let eq = |c: u8| equal_to(lo, hi, c);
        Letters {
            t: eq(b't'),
            r: eq(b'r'),
            u: eq(b'u'),
            f: eq(b'f'),
            a: eq(b'a'),
            l: eq(b'l'),
            s: eq(b's'),
            n: eq(b'n'),
            b: eq(b'b'),
            slash: eq(b'/'),
        }
    }

    /// [`Blocks::literals`] on one half, `next` being the 32 bytes after it
    /// (zeros after the block): as at AVX-512, each literal's letters
    /// compared in the half moved back by one to four bytes, the compares
    /// joined in the vector unit, and only two masks moved out.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn literals_half(cur: __m256i, next: __m256i) -> (u32, u32) {
        // [cur's high lane, next's low lane]: each lane of cur byte-aligned
        // against it moves cur back by n bytes across the lane boundary
        // (byte `k` of `vn` is byte `k + n` of cur and next).
        let joint = _mm256_permute2x128_si256::<0x21>(cur, next);
        let v1 = _mm256_alignr_epi8::<1>(joint, cur);
        let v2 = _mm256_alignr_epi8::<2>(joint, cur);
        let v3 = _mm256_alignr_epi8::<3>(joint, cur);
        let v4 = _mm256_alignr_epi8::<4>(joint, cur);
        let eq = |v: __m256i, c: u8| _mm256_cmpeq_epi8(v, _mm256_set1_epi8(c as i8));
        let and = _mm256_and_si256;
        let word = |w: &[u8; 4]| {
            let [a, b, c, d] = *w;
            and(and(eq(cur, a), eq(v1, b)), and(eq(v2, c), eq(v3, d)))
        };
        let four = _mm256_or_si256(word(b"true"), word(b"null"));
        let five = and(word(b"fals"), eq(v4, b'e'));
        (
            _mm256_movemask_epi8(four) as u32,
            _mm256_movemask_epi8(five) as u32,
        )
    }

    /// [`Blocks::literals`]: [`literals_half`] on each half.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn literals_avx2(b: &[u8; 64]) -> Literals {
        let (lo, hi) = halves(b);
        let (f0, v0) = literals_half(lo, hi);
        let (f1, v1) = literals_half(hi, _mm256_setzero_si256());
        Literals {
            four: join(f0, f1),
            five: join(v0, v1),
        }
    }

    /// UTF-8 flags of the 32 bytes `cur`, whose 32 predecessors are `prev`.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn utf8_half(cur: __m256i, prev: __m256i) -> u32 {
        // [prev's high lane, cur's low lane]: byte-aligning each lane of cur
        // against it shifts cur right by n bytes across the lane boundary.
        let joint = _mm256_permute2x128_si256::<0x21>(prev, cur);
        let prev1 = _mm256_alignr_epi8::<15>(cur, joint);
        let prev2 = _mm256_alignr_epi8::<14>(cur, joint);
        let prev3 = _mm256_alignr_epi8::<13>(cur, joint);
        let nib = _mm256_set1_epi8(0x0F);
        let hi = |v: __m256i| _mm256_and_si256(_mm256_srli_epi16::<4>(v), nib);
        let pair = _mm256_and_si256(
            _mm256_and_si256(
                _mm256_shuffle_epi8(table(&PREV_HIGH), hi(prev1)),
                _mm256_shuffle_epi8(table(&PREV_LOW), _mm256_and_si256(prev1, nib)),
            ),
            _mm256_shuffle_epi8(table(&CUR_HIGH), hi(cur)),
        );
        // Only bytes from E0 (two back) or F0 (three back) reach 0x80 here.
        let third = _mm256_subs_epu8(prev2, _mm256_set1_epi8(0x60));
        let fourth = _mm256_subs_epu8(prev3, _mm256_set1_epi8(0x70));
        let must = _mm256_and_si256(
            _mm256_or_si256(third, fourth),
            _mm256_set1_epi8(0x80u8 as i8),
        );
        let bad = _mm256_xor_si256(pair, must);
        !(_mm256_movemask_epi8(_mm256_cmpeq_epi8(bad, _mm256_setzero_si256())) as u32)
    }

    /// [`Blocks::utf8_flags`] at AVX2, a half at a time.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn utf8_avx2(before: [u8; 3], b: &[u8; 64]) -> u64 {
        let (lo, hi) = halves(b);
        let [a, b, c] = before;
        let prev =
            _mm256_insert_epi32::<7>(_mm256_setzero_si256(), i32::from_le_bytes([0, a, b, c]));
        join(utf8_half(lo, prev), utf8_half(hi, lo))
    }

    /// Backslash, one-character-escape and `u` masks of 32 bytes.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn escape_half(v: __m256i) -> (u32, u32, u32) {
        let nib = _mm256_set1_epi8(0x0F);
        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), nib);
        let both = _mm256_and_si256(
            _mm256_shuffle_epi8(table(&ESC_HIGH), hi),
            _mm256_shuffle_epi8(table(&ESC_LOW), _mm256_and_si256(v, nib)),
        );
        let none = _mm256_cmpeq_epi8(both, _mm256_setzero_si256());
        let bs = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8));
        let u = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'u' as i8));
        (
            _mm256_movemask_epi8(bs) as u32,
            !(_mm256_movemask_epi8(none) as u32),
            _mm256_movemask_epi8(u) as u32,
        )
    }

    /// [`Blocks::escape_masks`] at AVX2, a half at a time.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn escapes_avx2(b: &[u8; 64]) -> Escapes {
        let (lo, hi) = halves(b);
        let (b0, s0, u0) = escape_half(lo);
        let (b1, s1, u1) = escape_half(hi);
        Escapes {
            bs: join(b0, b1),
            simple: join(s0, s1),
            u: join(u0, u1),
        }
    }

    /// Hex-digit class masks of 32 bytes: hex, `0`, `0-7`, `d`, `c-f`.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn hex_half(v: __m256i) -> [u32; 5] {
        let nib = _mm256_set1_epi8(0x0F);
        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), nib);
        let cls = _mm256_and_si256(
            _mm256_shuffle_epi8(table(&HEX_HIGH), hi),
            _mm256_shuffle_epi8(table(&HEX_LOW), _mm256_and_si256(v, nib)),
        );
        // Each class bit shifted to the top of its byte: a 16-bit shift by
        // 7 - n moves bit n of each byte into that byte's bit 7.
        let bit = |v: __m256i| _mm256_movemask_epi8(v) as u32;
        [
            bit(_mm256_slli_epi16::<{ 7 - HX_DIGIT.trailing_zeros() as i32 }>(cls))
                | bit(_mm256_slli_epi16::<{ 7 - HX_ALPHA.trailing_zeros() as i32 }>(cls)),
            bit(_mm256_slli_epi16::<{ 7 - HX_ZERO.trailing_zeros() as i32 }>(cls)),
            bit(_mm256_slli_epi16::<{ 7 - HX_OCT.trailing_zeros() as i32 }>(
                cls,
            )),
            bit(_mm256_slli_epi16::<{ 7 - HX_D.trailing_zeros() as i32 }>(
                cls,
            )),
            bit(_mm256_slli_epi16::<{ 7 - HX_CF.trailing_zeros() as i32 }>(
                cls,
            )),
        ]
    }

    /// [`Blocks::hex_masks`] at AVX2, a half at a time.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn hex_avx2(b: &[u8; 64]) -> HexMasks {
        let (lo, hi) = halves(b);
        let [h0, z0, o0, d0, c0] = hex_half(lo);
        let [h1, z1, o1, d1, c1] = hex_half(hi);
        HexMasks {
            hex: join(h0, h1),
            zero: join(z0, z1),
            oct: join(o0, o1),
            d: join(d0, d1),
            cf: join(c0, c1),
        }
    }

    /// The AVX2 block level; made only by [`run_avx2`].
    #[derive(Debug, Clone, Copy)]
    pub struct Avx2Blocks(());

    impl Blocks for Avx2Blocks {
        const SKIM: bool = true;
        const SKIM_MIN_TOKENS: u32 = crate::skim::MIN_TOKENS_AVX2;

        #[inline(always)]
        fn classes(self, b: &[u8; 64]) -> Classes {
            // SAFETY: an `Avx2Blocks` exists only inside `run_avx2`, which the
            // dispatcher calls after detecting AVX2.
            unsafe { classes_avx2(b) }
        }

        #[inline(always)]
        fn letters(self, b: &[u8; 64]) -> Letters {
            // SAFETY: as for `classes`.
            unsafe { letters_avx2(b) }
        }

        #[inline(always)]
        fn literals(self, b: &[u8; 64], _e: u64) -> Literals {
            // SAFETY: as for `classes`.
            unsafe { literals_avx2(b) }
        }

        // `prefix_xor` stays the portable chain of shifts here: BMI2's
        // `pdep` runs in microcode on AMD before Zen 3, and the two read
        // alike on Zen 3 (the forty-second round). `deposit` and `extract`
        // are the skim's, which runs at this level only where they are
        // quick (`fast_bmi2`).

        #[inline(always)]
        fn deposit(self, x: u64, mask: u64) -> u64 {
            // SAFETY: an `Avx2Blocks` exists only inside `run_avx2`, which the
            // dispatcher calls after detecting BMI2.
            unsafe { deposit_bmi2(x, mask) }
        }

        #[inline(always)]
        fn extract(self, x: u64, mask: u64) -> u64 {
            // SAFETY: as for `deposit`.
            unsafe { extract_bmi2(x, mask) }
        }

        #[inline(always)]
        fn below(self, k: u32) -> u64 {
            // SAFETY: an `Avx2Blocks` exists only inside `run_avx2`, which the
            // dispatcher calls after detecting BMI2 (with AVX2, POPCNT, BMI1).
            unsafe { below_bmi2(k) }
        }

        #[inline(always)]
        fn masks(self, b: &[u8; 64]) -> Masks {
            // SAFETY: an `Avx2Blocks` exists only inside `run_avx2`, which the
            // dispatcher calls after detecting AVX2 and POPCNT.
            unsafe { masks_avx2(b) }
        }

        #[inline(always)]
        fn utf8_flags(self, before: [u8; 3], b: &[u8; 64]) -> u64 {
            // SAFETY: as above.
            unsafe { utf8_avx2(before, b) }
        }

        #[inline(always)]
        fn escape_masks(self, b: &[u8; 64]) -> Escapes {
            // SAFETY: as above.
            unsafe { escapes_avx2(b) }
        }

        #[inline(always)]
        fn hex_masks(self, b: &[u8; 64]) -> HexMasks {
            // SAFETY: as above.
            unsafe { hex_avx2(b) }
        }

        #[inline(always)]
        fn skip_ws_after(self, s: &[u8], i: usize) -> usize {
            // SAFETY: as above.
            unsafe { skip_ws_after_avx2(s, i) }
        }
    }

    /// [`super::below`] in one `bzhi`, for `k < 256` (it reads the low 8
    /// bits of `k`): `Blocks::below` at both x86_64 block levels.
    ///
    /// # Safety
    /// The CPU must support BMI2.
    #[target_feature(enable = "bmi2")]
    #[inline]
    pub(super) unsafe fn below_bmi2(k: u32) -> u64 {
        debug_assert!(k < 256);
        _bzhi_u64(u64::MAX, k)
    }

    /// [`Blocks::prefix_xor`] by pairs: with the set bits of `x` taken two
    /// by two, the bits from the first of each pair (`open`, deposited by
    /// `pdep`) up to the second (`close`) are `close - open`, and an
    /// unpaired last bit runs to the top as the subtraction borrows. Three
    /// steps on the general registers, where a carry-less multiply moves the
    /// mask to a vector register and back.
    ///
    /// # Safety
    /// The CPU must support BMI2.
    #[target_feature(enable = "bmi2")]
    #[inline]
    pub(super) unsafe fn prefix_xor_bmi2(x: u64) -> u64 {
        let open = _pdep_u64(0x5555_5555_5555_5555, x);
        (x ^ open).wrapping_sub(open)
    }

    /// [`Blocks::deposit`]: one `pdep`.
    ///
    /// # Safety
    /// The CPU must support BMI2.
    #[target_feature(enable = "bmi2")]
    #[inline]
    pub(super) unsafe fn deposit_bmi2(x: u64, mask: u64) -> u64 {
        _pdep_u64(x, mask)
    }

    /// [`Blocks::extract`]: one `pext`.
    ///
    /// # Safety
    /// The CPU must support BMI2.
    #[target_feature(enable = "bmi2")]
    #[inline]
    pub(super) unsafe fn extract_bmi2(x: u64, mask: u64) -> u64 {
        _pext_u64(x, mask)
    }

    /// [`super::skip_ws_after`] 32 bytes a step: a newline and deep
    /// indentation (`citm_catalog`'s runs are mostly 17 to 32 bytes) in one
    /// compare, where SSE2 takes two.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(super) unsafe fn skip_ws_after_avx2(s: &[u8], i: usize) -> usize {
        let mut j = i + 1;
        match s.get(j) {
            Some(&c) if super::is_ws(c) => {}
            _ => return j,
        }
        while let Some(w) = s.get(j..j + 32) {
            // SAFETY: `w` is 32 readable bytes; loadu has no alignment need;
            // the caller guarantees AVX2.
            let ws = unsafe {
                let v = _mm256_loadu_si256(w.as_ptr() as *const __m256i);
                let sp = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b' ' as i8));
                let nl = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\n' as i8));
                let cr = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\r' as i8));
                let tb = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\t' as i8));
                _mm256_movemask_epi8(_mm256_or_si256(
                    _mm256_or_si256(sp, nl),
                    _mm256_or_si256(cr, tb),
                )) as u32
            };
            if ws != u32::MAX {
                return j + (!ws).trailing_zeros() as usize;
            }
            j += 32;
        }
        skip_ws_sse2(s, j)
    }

    /// Run `job` compiled for AVX2, so its block scans inline. BMI1 and BMI2
    /// come with it (every AVX2 part from Intel and AMD has them): a block
    /// mask's low bits in one `bzhi`, shifts by a count in any register.
    ///
    /// # Safety
    /// The CPU must support AVX2, POPCNT, BMI1 and BMI2 (checked at run time
    /// by the caller).
    #[target_feature(enable = "avx2,popcnt,bmi1,bmi2")]
    pub unsafe fn run_avx2<J: BlockJob>(job: J) -> J::Out {
        job.run(Avx2Blocks(()))
    }

    /// # Safety
    /// The CPU must support AVX2 (checked at run time by the caller).
    #[target_feature(enable = "avx2")]
    pub unsafe fn scan_avx2(s: &[u8]) -> Run {
        let n = s.len();
        let mut i = 0;
        let mut non_ascii = false;
        let quote = _mm256_set1_epi8(b'"' as i8);
        let bslash = _mm256_set1_epi8(b'\\' as i8);
        let ctrl_max = _mm256_set1_epi8(0x1F);
        while i + 32 <= n {
            // SAFETY: i + 32 <= n, so the 32 bytes read are inside `s`; loadu has no alignment need.
            let v = unsafe { _mm256_loadu_si256(s.as_ptr().add(i) as *const __m256i) };
            let q = _mm256_cmpeq_epi8(v, quote);
            let b = _mm256_cmpeq_epi8(v, bslash);
            let c = _mm256_cmpeq_epi8(_mm256_max_epu8(v, ctrl_max), ctrl_max);
            let hit = _mm256_movemask_epi8(_mm256_or_si256(_mm256_or_si256(q, b), c)) as u32;
            let high = _mm256_movemask_epi8(v) as u32;
            if hit != 0 {
                let k = hit.trailing_zeros();
                let before = if k == 0 {
                    0
                } else {
                    high & (u32::MAX >> (32 - k))
                };
                return Run {
                    end: i + k as usize,
                    non_ascii: non_ascii || before != 0,
                };
            }
            non_ascii |= high != 0;
            i += 32;
        }
        // SAFETY: SSE2 is part of every x86_64 CPU (and implied by AVX2).
        let tail = unsafe { scan_sse2(s.get(i..).unwrap_or(&[])) };
        Run {
            end: i + tail.end,
            non_ascii: non_ascii || tail.non_ascii,
        }
    }
}

#[cfg(target_arch = "x86_64")]
/// JSON's whitespace by low nibble, for a `pshufb` lookup: entry `k` is the
/// whitespace byte whose low nibble is `k` (space 0, tab 9, line feed A,
/// carriage return D), else 0, which no byte with that nibble equals (and a
/// byte from 0x80 looks up 0).
const WS_BY_LOW: [u8; 16] = {
    let mut t = [0u8; 16];
    t[0x0] = b' ';
    t[0x9] = b'\t';
    t[0xA] = b'\n';
    t[0xD] = b'\r';
    t
};

/// The AVX-512 block level (AVX-512 F and BW): each mask of a 64-byte block
/// is one compare into a mask register, where AVX2 takes two compares, two
/// `movemask`s and a join.
#[cfg(target_arch = "x86_64")]
mod x86_512 {
    use super::{
        BlockJob, Blocks, Classes, Escapes, HexMasks, Letters, Literals, Masks, Spacing, CUR_HIGH,
        ESC_HIGH, ESC_LOW, HEX_HIGH, HEX_LOW, PREV_HIGH, PREV_LOW, WS_BY_LOW,
    };
    use std::arch::x86_64::*;

    /// The 64 bytes of `b`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn load(b: &[u8; 64]) -> __m512i {
        // SAFETY: `b` is 64 readable bytes; loadu has no alignment need.
        unsafe { _mm512_loadu_si512(b.as_ptr() as *const __m512i) }
    }

    /// A 16-entry table in all four lanes, for `_mm512_shuffle_epi8`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn table(t: &[u8; 16]) -> __m512i {
        // SAFETY: `t` is 16 readable bytes; loadu has no alignment need.
        let v = unsafe { _mm_loadu_si128(t.as_ptr() as *const __m128i) };
        _mm512_broadcast_i32x4(v)
    }

    /// The high and low nibble of each byte.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn nibbles(v: __m512i) -> (__m512i, __m512i) {
        let nib = _mm512_set1_epi8(0x0F);
        (
            _mm512_and_si512(_mm512_srli_epi16::<4>(v), nib),
            _mm512_and_si512(v, nib),
        )
    }

    /// [`Blocks::masks`].
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn masks_512(b: &[u8; 64]) -> Masks {
        let v = load(b);
        let quote = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'"' as i8));
        let bslash = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8));
        let ctrl = _mm512_cmplt_epu8_mask(v, _mm512_set1_epi8(0x20));
        Masks {
            special: quote | bslash | ctrl,
            // Bytes 0x80..=0xBF are, as signed bytes, exactly those below -64.
            cont: _mm512_cmplt_epi8_mask(v, _mm512_set1_epi8(-64)),
            high: _mm512_movepi8_mask(v),
        }
    }

    /// [`Blocks::classes`]: one compare into a mask register a class.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn classes_512(b: &[u8; 64]) -> Classes {
        let v = load(b);
        let eq = |c: u8| _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(c as i8));
        let digit = _mm512_cmplt_epu8_mask(
            _mm512_sub_epi8(v, _mm512_set1_epi8(b'0' as i8)),
            _mm512_set1_epi8(10),
        );
        // Each whitespace byte has a low nibble of its own: one lookup of
        // the byte the nibble asks for, and one compare.
        let ws = _mm512_cmpeq_epi8_mask(_mm512_shuffle_epi8(table(&WS_BY_LOW), v), v);
        Classes {
            quote: eq(b'"'),
            bslash: eq(b'\\'),
            ws,
            lbrace: eq(b'{'),
            rbrace: eq(b'}'),
            lbrack: eq(b'['),
            rbrack: eq(b']'),
            colon: eq(b':'),
            comma: eq(b','),
            ctrl: _mm512_cmplt_epu8_mask(v, _mm512_set1_epi8(0x20)),
            high: _mm512_movepi8_mask(v),
            digit,
            zero: eq(b'0'),
            minus: eq(b'-'),
            plus: eq(b'+'),
            dot: eq(b'.'),
            e: eq(b'e'),
            big_e: eq(b'E'),
        }
    }

    /// [`Blocks::letters`]: one compare into a mask register a letter.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn letters_512(b: &[u8; 64]) -> Letters {
        let v = load(b);
        let eq = |c: u8| _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(c as i8));
        Letters {
            t: eq(b't'),
            r: eq(b'r'),
            u: eq(b'u'),
            f: eq(b'f'),
            a: eq(b'a'),
            l: eq(b'l'),
            s: eq(b's'),
            n: eq(b'n'),
            b: eq(b'b'),
            slash: eq(b'/'),
        }
    }

    /// [`Blocks::literals`]: each literal's letters compared in place, in
    /// the block moved back by one to four bytes (zeros moving in: byte `k`
    /// of `vn` is byte `k + n` of the block), each compare masked by the
    /// one before, so that only the literals' masks leave the mask
    /// registers.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn literals_512(b: &[u8; 64]) -> Literals {
        let v = load(b);
        // Each 16-byte lane's next lane, for the lane-wise `alignr`.
        let next = _mm512_alignr_epi64::<2>(_mm512_setzero_si512(), v);
        let v1 = _mm512_alignr_epi8::<1>(next, v);
        let v2 = _mm512_alignr_epi8::<2>(next, v);
        let v3 = _mm512_alignr_epi8::<3>(next, v);
        let v4 = _mm512_alignr_epi8::<4>(next, v);
        let word = |w: &[u8; 4]| {
            let [a, b, c, d] = w.map(|x| _mm512_set1_epi8(x as i8));
            let k = _mm512_cmpeq_epi8_mask(v, a);
            let k = _mm512_mask_cmpeq_epi8_mask(k, v1, b);
            let k = _mm512_mask_cmpeq_epi8_mask(k, v2, c);
            _mm512_mask_cmpeq_epi8_mask(k, v3, d)
        };
        let five = word(b"fals");
        Literals {
            four: word(b"true") | word(b"null"),
            five: _mm512_mask_cmpeq_epi8_mask(five, v4, _mm512_set1_epi8(b'e' as i8)),
        }
    }

    /// [`Blocks::utf8_flags`]: the AVX2 check ([`super::x86`]) on one
    /// 64-byte register.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn utf8_512(before: [u8; 3], b: &[u8; 64]) -> u64 {
        let cur = load(b);
        // `before` as the last three bytes of an otherwise zero register.
        let [p3, p2, p1] = before;
        let prev = _mm512_maskz_set1_epi32(1 << 15, i32::from_le_bytes([0, p3, p2, p1]));
        // Each 16-byte lane's predecessor lane: [before's last lane, cur's
        // first three]; byte-aligning each lane of cur against it shifts
        // cur right by n bytes across the lane boundaries.
        let joint = _mm512_alignr_epi64::<6>(cur, prev);
        let prev1 = _mm512_alignr_epi8::<15>(cur, joint);
        let prev2 = _mm512_alignr_epi8::<14>(cur, joint);
        let prev3 = _mm512_alignr_epi8::<13>(cur, joint);
        let (p1_hi, p1_lo) = nibbles(prev1);
        let (cur_hi, _) = nibbles(cur);
        let pair = _mm512_and_si512(
            _mm512_and_si512(
                _mm512_shuffle_epi8(table(&PREV_HIGH), p1_hi),
                _mm512_shuffle_epi8(table(&PREV_LOW), p1_lo),
            ),
            _mm512_shuffle_epi8(table(&CUR_HIGH), cur_hi),
        );
        // Only bytes from E0 (two back) or F0 (three back) reach 0x80 here.
        let third = _mm512_subs_epu8(prev2, _mm512_set1_epi8(0x60));
        let fourth = _mm512_subs_epu8(prev3, _mm512_set1_epi8(0x70));
        let must = _mm512_and_si512(
            _mm512_or_si512(third, fourth),
            _mm512_set1_epi8(0x80u8 as i8),
        );
        let bad = _mm512_xor_si512(pair, must);
        _mm512_test_epi8_mask(bad, bad)
    }

    /// Per byte of a block, the least lead there that asks for more bytes
    /// than the block holds after it: `F0` at 61, `E0` at 62, `C0` at 63.
    /// The other bytes are masked off.
    const SPLIT_AT: [u8; 64] = {
        let mut t = [0xFFu8; 64];
        t[61] = 0xF0;
        t[62] = 0xE0;
        t[63] = 0xC0;
        t
    };

    /// [`Blocks::split_lead`]: one masked compare.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn split_lead_512(b: &[u8; 64]) -> u32 {
        let m = _mm512_mask_cmpge_epu8_mask(7 << 61, load(b), load(&SPLIT_AT));
        m.trailing_zeros()
    }

    /// [`Blocks::escape_masks`].
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn escapes_512(b: &[u8; 64]) -> Escapes {
        let v = load(b);
        let (hi, lo) = nibbles(v);
        let both = _mm512_and_si512(
            _mm512_shuffle_epi8(table(&ESC_HIGH), hi),
            _mm512_shuffle_epi8(table(&ESC_LOW), lo),
        );
        Escapes {
            bs: _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8)),
            simple: _mm512_test_epi8_mask(both, both),
            u: _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'u' as i8)),
        }
    }

    /// [`Blocks::hex_masks`].
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn hex_512(b: &[u8; 64]) -> HexMasks {
        let (hi, lo) = nibbles(load(b));
        let cls = _mm512_and_si512(
            _mm512_shuffle_epi8(table(&HEX_HIGH), hi),
            _mm512_shuffle_epi8(table(&HEX_LOW), lo),
        );
        HexMasks::from_classes(|k| _mm512_test_epi8_mask(cls, _mm512_set1_epi8(k as i8)))
    }

    /// [`Blocks::spacing`].
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn spacing_512(b: &[u8; 64]) -> Spacing {
        let v = load(b);
        Spacing {
            quote: _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'"' as i8)),
            bslash: _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8)),
            ws: _mm512_cmpeq_epi8_mask(_mm512_shuffle_epi8(table(&WS_BY_LOW), v), v),
        }
    }

    /// [`Blocks::compress`]: VBMI2's byte compress, then its expand into
    /// the window's bytes from `at` (merged: the others stay).
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi2")]
    #[inline]
    fn compress_vbmi2(win: &mut [u8; 64], at: usize, b: &[u8; 64], keep: u64) {
        let c = _mm512_maskz_compress_epi8(keep, load(b));
        // The window's bytes from `at` to `at + n` (none past its end),
        // written out: the crate's `below` here read 5% slower.
        let n = keep.count_ones() as usize;
        let end = at + n;
        let upto = if end >= 64 { !0 } else { (1u64 << end) - 1 };
        let from = if at >= 64 { !0 } else { (1u64 << at) - 1 };
        let w = _mm512_mask_expand_epi8(load(win), upto & !from, c);
        // SAFETY: `win` is 64 writable bytes; storeu has no alignment need.
        unsafe { _mm512_storeu_si512(win.as_mut_ptr() as *mut __m512i, w) }
    }

    /// The AVX-512 block level; made only by [`run_avx512`] and (`V`, with
    /// VBMI2's byte compress) [`run_avx512_vbmi2`].
    #[derive(Debug, Clone, Copy)]
    pub struct Avx512Blocks<const V: bool>(());

    impl<const V: bool> Blocks for Avx512Blocks<V> {
        const SKIM: bool = true;
        const COMPRESS: bool = V;

        #[inline(always)]
        fn compress(self, win: &mut [u8; 64], at: usize, b: &[u8; 64], keep: u64) {
            if V {
                // SAFETY: an `Avx512Blocks<true>` exists only inside
                // `run_avx512_vbmi2`, which the dispatcher calls after
                // detecting VBMI2 (with AVX-512 F and BW).
                unsafe { compress_vbmi2(win, at, b, keep) }
            } else {
                super::compress_naive(win, at, b, keep)
            }
        }

        #[inline(always)]
        fn spacing(self, b: &[u8; 64]) -> Spacing {
            // SAFETY: as for `classes`.
            unsafe { spacing_512(b) }
        }

        #[inline(always)]
        fn classes(self, b: &[u8; 64]) -> Classes {
            // SAFETY: an `Avx512Blocks` exists only inside `run_avx512`, which
            // the dispatcher calls after detecting AVX-512 F and BW.
            unsafe { classes_512(b) }
        }

        #[inline(always)]
        fn letters(self, b: &[u8; 64]) -> Letters {
            // SAFETY: as for `classes`.
            unsafe { letters_512(b) }
        }

        #[inline(always)]
        fn literals(self, b: &[u8; 64], _e: u64) -> Literals {
            // SAFETY: as for `classes`.
            unsafe { literals_512(b) }
        }

        #[inline(always)]
        fn below(self, k: u32) -> u64 {
            // SAFETY: an `Avx512Blocks` exists only inside `run_avx512`, which
            // the dispatcher calls after detecting BMI2 (with AVX-512 F and
            // BW, AVX2, POPCNT and BMI1).
            unsafe { super::x86::below_bmi2(k) }
        }

        #[inline(always)]
        fn masks(self, b: &[u8; 64]) -> Masks {
            // SAFETY: an `Avx512Blocks` exists only inside `run_avx512`, which
            // the dispatcher calls after detecting AVX-512 F and BW (and AVX2
            // and POPCNT).
            unsafe { masks_512(b) }
        }

        #[inline(always)]
        fn utf8_flags(self, before: [u8; 3], b: &[u8; 64]) -> u64 {
            // SAFETY: as above.
            unsafe { utf8_512(before, b) }
        }

        #[inline(always)]
        fn split_lead(self, b: &[u8; 64]) -> u32 {
            // SAFETY: as above.
            unsafe { split_lead_512(b) }
        }

        #[inline(always)]
        fn escape_masks(self, b: &[u8; 64]) -> Escapes {
            // SAFETY: as above.
            unsafe { escapes_512(b) }
        }

        #[inline(always)]
        fn hex_masks(self, b: &[u8; 64]) -> HexMasks {
            // SAFETY: as above.
            unsafe { hex_512(b) }
        }

        #[inline(always)]
        fn prefix_xor(self, x: u64) -> u64 {
            // SAFETY: an `Avx512Blocks` exists only inside `run_avx512`, which
            // the dispatcher calls after detecting BMI2 (with AVX-512).
            unsafe { super::x86::prefix_xor_bmi2(x) }
        }

        #[inline(always)]
        fn deposit(self, x: u64, mask: u64) -> u64 {
            // SAFETY: as for `prefix_xor`.
            unsafe { super::x86::deposit_bmi2(x, mask) }
        }

        #[inline(always)]
        fn extract(self, x: u64, mask: u64) -> u64 {
            // SAFETY: as for `prefix_xor`.
            unsafe { super::x86::extract_bmi2(x, mask) }
        }

        #[inline(always)]
        fn skip_ws_after(self, s: &[u8], i: usize) -> usize {
            // SAFETY: as above; this level implies AVX2.
            unsafe { super::x86::skip_ws_after_avx2(s, i) }
        }
    }

    /// Run `job` compiled for AVX-512, so its block scans inline.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F and BW, AVX2, POPCNT, BMI1 and BMI2
    /// (checked at run time by the caller).
    #[target_feature(enable = "avx2,popcnt,bmi1,bmi2,avx512f,avx512bw")]
    pub unsafe fn run_avx512<J: BlockJob>(job: J) -> J::Out {
        job.run(Avx512Blocks::<false>(()))
    }

    /// [`run_avx512`] with VBMI2 too, for a job that asks for its byte
    /// compress ([`BlockJob::VBMI2`]).
    ///
    /// # Safety
    /// As [`run_avx512`], and the CPU must support AVX-512 VBMI2.
    #[target_feature(enable = "avx2,popcnt,bmi1,bmi2,avx512f,avx512bw,avx512vbmi2")]
    pub unsafe fn run_avx512_vbmi2<J: BlockJob>(job: J) -> J::Out {
        job.run(Avx512Blocks::<true>(()))
    }
}

/// NEON, part of every `aarch64` target that enables it (Linux, macOS,
/// Windows on ARM). It is a compile-time feature there, like SSE2 on
/// x86_64, so this module is compiled only where the target has it and no
/// run-time check is needed. Rust still asks for `#[target_feature]` on
/// functions that use the intrinsics, and so for an `unsafe` block where code
/// without the attribute calls them; the module's `cfg` is what makes each of
/// those calls sound.
#[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
mod arm {
    use super::{
        scan_naive, BlockJob, Blocks, Escapes, HexMasks, Masks, Run, CUR_HIGH, ESC_HIGH, ESC_LOW,
        HEX_HIGH, HEX_LOW, PREV_HIGH, PREV_LOW,
    };
    use std::arch::aarch64::*;

    /// The 16 bytes of `w`.
    #[target_feature(enable = "neon")]
    #[inline]
    fn load16(w: &[u8; 16]) -> uint8x16_t {
        // SAFETY: `w` is 16 readable bytes; `vld1q_u8` has no alignment need.
        unsafe { vld1q_u8(w.as_ptr()) }
    }

    /// The 64 bytes of `b`, as four vectors.
    #[target_feature(enable = "neon")]
    #[inline]
    fn load64(b: &[u8; 64]) -> [uint8x16_t; 4] {
        let p = b.as_ptr();
        // SAFETY: `b` is 64 readable bytes, so each of the four 16-byte loads
        // (at 0, 16, 32, 48) is inside it; `vld1q_u8` has no alignment need.
        unsafe {
            [
                vld1q_u8(p),
                vld1q_u8(p.add(16)),
                vld1q_u8(p.add(32)),
                vld1q_u8(p.add(48)),
            ]
        }
    }

    /// Bit `k` of each byte's place: 1, 2, 4 … 128, twice.
    const WEIGHTS: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];

    /// NEON has no `movemask`: each byte (0 or 0xFF) keeps its place's bit,
    /// and pairwise adds sum every eight neighbours into one byte.
    /// Bit `k` of the result is set when byte `k` of `v` (16 bytes each) is.
    #[target_feature(enable = "neon")]
    #[inline]
    fn bits64(v: [uint8x16_t; 4]) -> u64 {
        let w = load16(&WEIGHTS);
        let [a, b, c, d] = v;
        let ab = vpaddq_u8(vandq_u8(a, w), vandq_u8(b, w));
        let cd = vpaddq_u8(vandq_u8(c, w), vandq_u8(d, w));
        let abcd = vpaddq_u8(ab, cd);
        let all = vpaddq_u8(abcd, abcd);
        vgetq_lane_u64::<0>(vreinterpretq_u64_u8(all))
    }

    /// [`bits64`] for two vectors: bit `k` for byte `k` of 32.
    #[target_feature(enable = "neon")]
    #[inline]
    fn bits32(a: uint8x16_t, b: uint8x16_t) -> u32 {
        let w = load16(&WEIGHTS);
        let ab = vpaddq_u8(vandq_u8(a, w), vandq_u8(b, w));
        let quads = vpaddq_u8(ab, ab);
        let all = vpaddq_u8(quads, quads);
        vgetq_lane_u32::<0>(vreinterpretq_u32_u8(all))
    }

    /// Four bits per byte of one vector (bits `4k..4k+4` set when byte `k`
    /// is): the narrowing shift that stands in for a 16-byte `movemask`
    /// where only the first set byte matters.
    #[target_feature(enable = "neon")]
    #[inline]
    fn nibbles(v: uint8x16_t) -> u64 {
        let n = vshrn_n_u16::<4>(vreinterpretq_u16_u8(v));
        vget_lane_u64::<0>(vreinterpret_u64_u8(n))
    }

    /// `"`, `\` or a control byte.
    #[target_feature(enable = "neon")]
    #[inline]
    fn special(v: uint8x16_t) -> uint8x16_t {
        let q = vceqq_u8(v, vdupq_n_u8(b'"'));
        let b = vceqq_u8(v, vdupq_n_u8(b'\\'));
        let c = vcltq_u8(v, vdupq_n_u8(0x20));
        vorrq_u8(vorrq_u8(q, b), c)
    }

    /// UTF-8 continuation bytes: 0x80..=0xBF are, as signed bytes, exactly
    /// those below -64 (0xC0).
    #[target_feature(enable = "neon")]
    #[inline]
    fn cont(v: uint8x16_t) -> uint8x16_t {
        vcltq_s8(vreinterpretq_s8_u8(v), vdupq_n_s8(-64))
    }

    /// Bytes ≥ 0x80.
    #[target_feature(enable = "neon")]
    #[inline]
    fn high(v: uint8x16_t) -> uint8x16_t {
        vcgeq_u8(v, vdupq_n_u8(0x80))
    }

    /// [`super::scan`] sixteen bytes a step.
    #[target_feature(enable = "neon")]
    pub fn scan_neon(s: &[u8]) -> Run {
        let mut i = 0;
        let mut non_ascii = false;
        while let Some(w) = s.get(i..i + 16).and_then(|w| <&[u8; 16]>::try_from(w).ok()) {
            let v = load16(w);
            let hit = nibbles(special(v));
            let hi = nibbles(high(v));
            if hit != 0 {
                let k = hit.trailing_zeros() / 4;
                return Run {
                    end: i + k as usize,
                    non_ascii: non_ascii || hi & super::below(4 * k) != 0,
                };
            }
            non_ascii |= hi != 0;
            i += 16;
        }
        let tail = scan_naive(s.get(i..).unwrap_or(&[]));
        Run {
            end: i + tail.end,
            non_ascii: non_ascii || tail.non_ascii,
        }
    }

    /// [`super::ascii_run`] sixteen bytes a step.
    #[target_feature(enable = "neon")]
    pub fn ascii_run_neon(s: &[u8]) -> usize {
        let mut i = 0;
        while let Some(w) = s.get(i..i + 16).and_then(|w| <&[u8; 16]>::try_from(w).ok()) {
            let v = load16(w);
            let hit = nibbles(vorrq_u8(special(v), high(v)));
            if hit != 0 {
                return i + (hit.trailing_zeros() / 4) as usize;
            }
            i += 16;
        }
        i + super::ascii_run_naive(s.get(i..).unwrap_or(&[]))
    }

    /// [`super::skip_ws`] sixteen bytes a step.
    #[target_feature(enable = "neon")]
    #[inline]
    pub fn skip_ws_neon(s: &[u8], mut i: usize) -> usize {
        while let Some(w) = s.get(i..i + 16).and_then(|w| <&[u8; 16]>::try_from(w).ok()) {
            let v = load16(w);
            let sp = vceqq_u8(v, vdupq_n_u8(b' '));
            let nl = vceqq_u8(v, vdupq_n_u8(b'\n'));
            let cr = vceqq_u8(v, vdupq_n_u8(b'\r'));
            let tb = vceqq_u8(v, vdupq_n_u8(b'\t'));
            let not_ws = nibbles(vmvnq_u8(vorrq_u8(vorrq_u8(sp, nl), vorrq_u8(cr, tb))));
            if not_ws != 0 {
                return i + (not_ws.trailing_zeros() / 4) as usize;
            }
            i += 16;
        }
        super::skip_ws_portable(s, i)
    }

    /// [`super::digits32`]: two compares and one 32-bit mask.
    #[target_feature(enable = "neon")]
    #[inline]
    pub fn digits32_neon(s: &[u8], i: usize) -> Option<u32> {
        let w = s.get(i..i.checked_add(32)?)?;
        let (a, b) = w.split_at(16);
        let a = load16(a.try_into().ok()?);
        let b = load16(b.try_into().ok()?);
        // A byte is a digit when `b - '0'`, unsigned, is at most 9.
        let (zero, nine) = (vdupq_n_u8(b'0'), vdupq_n_u8(9));
        let da = vcleq_u8(vsubq_u8(a, zero), nine);
        let db = vcleq_u8(vsubq_u8(b, zero), nine);
        Some(bits32(da, db))
    }

    /// [`super::plain_string`] sixteen bytes a step.
    #[target_feature(enable = "neon")]
    #[inline]
    pub fn plain_string_neon<const STEPS: usize>(s: &[u8], i: usize) -> Option<usize> {
        let mut j = i;
        for _ in 0..STEPS {
            let w = s.get(j..j + 16)?;
            let v = load16(w.try_into().ok()?);
            let stop = nibbles(vorrq_u8(special(v), high(v)));
            if stop != 0 {
                let k = (stop.trailing_zeros() / 4) as usize;
                return (w.get(k) == Some(&b'"')).then_some(j + k);
            }
            j += 16;
        }
        None
    }

    /// The UTF-8 flags of the 16 bytes `cur`, whose 16 predecessors are `prev`.
    #[target_feature(enable = "neon")]
    #[inline]
    fn utf8_16(cur: uint8x16_t, prev: uint8x16_t) -> uint8x16_t {
        let prev1 = vextq_u8::<15>(prev, cur);
        let prev2 = vextq_u8::<14>(prev, cur);
        let prev3 = vextq_u8::<13>(prev, cur);
        let nib = vdupq_n_u8(0x0F);
        let pair = vandq_u8(
            vandq_u8(
                vqtbl1q_u8(load16(&PREV_HIGH), vshrq_n_u8::<4>(prev1)),
                vqtbl1q_u8(load16(&PREV_LOW), vandq_u8(prev1, nib)),
            ),
            vqtbl1q_u8(load16(&CUR_HIGH), vshrq_n_u8::<4>(cur)),
        );
        // Only bytes from E0 (two back) or F0 (three back) reach 0x80 here.
        let third = vqsubq_u8(prev2, vdupq_n_u8(0x60));
        let fourth = vqsubq_u8(prev3, vdupq_n_u8(0x70));
        let must = vandq_u8(vorrq_u8(third, fourth), vdupq_n_u8(0x80));
        let bad = veorq_u8(pair, must);
        vtstq_u8(bad, bad)
    }

    /// Backslashes, bytes in `"\/bfnrt` and `u`, of 16 bytes.
    #[target_feature(enable = "neon")]
    #[inline]
    fn escape_16(v: uint8x16_t) -> [uint8x16_t; 3] {
        let both_hi = vqtbl1q_u8(load16(&ESC_HIGH), vshrq_n_u8::<4>(v));
        let both_lo = vqtbl1q_u8(load16(&ESC_LOW), vandq_u8(v, vdupq_n_u8(0x0F)));
        [
            vceqq_u8(v, vdupq_n_u8(b'\\')),
            vtstq_u8(both_hi, both_lo),
            vceqq_u8(v, vdupq_n_u8(b'u')),
        ]
    }

    /// [`Blocks::masks`].
    #[target_feature(enable = "neon")]
    #[inline]
    fn masks_neon(b: &[u8; 64]) -> Masks {
        let [v0, v1, v2, v3] = load64(b);
        Masks {
            special: bits64([special(v0), special(v1), special(v2), special(v3)]),
            cont: bits64([cont(v0), cont(v1), cont(v2), cont(v3)]),
            high: bits64([high(v0), high(v1), high(v2), high(v3)]),
        }
    }

    /// [`Blocks::utf8_flags`].
    #[target_feature(enable = "neon")]
    #[inline]
    fn utf8_neon(before: [u8; 3], b: &[u8; 64]) -> u64 {
        let [v0, v1, v2, v3] = load64(b);
        let [p3, p2, p1] = before;
        let prev = load16(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, p3, p2, p1]);
        bits64([
            utf8_16(v0, prev),
            utf8_16(v1, v0),
            utf8_16(v2, v1),
            utf8_16(v3, v2),
        ])
    }

    /// [`Blocks::escape_masks`].
    #[target_feature(enable = "neon")]
    #[inline]
    fn escapes_neon(b: &[u8; 64]) -> Escapes {
        let [v0, v1, v2, v3] = load64(b);
        let [b0, s0, u0] = escape_16(v0);
        let [b1, s1, u1] = escape_16(v1);
        let [b2, s2, u2] = escape_16(v2);
        let [b3, s3, u3] = escape_16(v3);
        Escapes {
            bs: bits64([b0, b1, b2, b3]),
            simple: bits64([s0, s1, s2, s3]),
            u: bits64([u0, u1, u2, u3]),
        }
    }

    /// [`Blocks::hex_masks`].
    #[target_feature(enable = "neon")]
    #[inline]
    fn hex_neon(b: &[u8; 64]) -> HexMasks {
        let [v0, v1, v2, v3] = load64(b);
        let (th, tl) = (load16(&HEX_HIGH), load16(&HEX_LOW));
        let nib = vdupq_n_u8(0x0F);
        let cls = |v: uint8x16_t| {
            vandq_u8(
                vqtbl1q_u8(th, vshrq_n_u8::<4>(v)),
                vqtbl1q_u8(tl, vandq_u8(v, nib)),
            )
        };
        let c = [cls(v0), cls(v1), cls(v2), cls(v3)];
        HexMasks::from_classes(|k| {
            let m = vdupq_n_u8(k);
            bits64(c.map(|v| vtstq_u8(v, m)))
        })
    }

    /// The NEON block level; made only by [`run_neon`].
    #[derive(Debug, Clone, Copy)]
    pub struct NeonBlocks(());

    impl Blocks for NeonBlocks {
        #[inline(always)]
        fn masks(self, b: &[u8; 64]) -> Masks {
            // SAFETY: this module is compiled only where the target enables NEON.
            unsafe { masks_neon(b) }
        }

        #[inline(always)]
        fn utf8_flags(self, before: [u8; 3], b: &[u8; 64]) -> u64 {
            // SAFETY: as above.
            unsafe { utf8_neon(before, b) }
        }

        #[inline(always)]
        fn escape_masks(self, b: &[u8; 64]) -> Escapes {
            // SAFETY: as above.
            unsafe { escapes_neon(b) }
        }

        #[inline(always)]
        fn hex_masks(self, b: &[u8; 64]) -> HexMasks {
            // SAFETY: as above.
            unsafe { hex_neon(b) }
        }
    }

    /// Run `job` at the NEON level, compiled with NEON so its block scans inline.
    #[target_feature(enable = "neon")]
    pub fn run_neon<J: BlockJob>(job: J) -> J::Out {
        job.run(NeonBlocks(()))
    }
}

/// Bit masks of one 64-byte block of a string body; bit `k` describes byte `k`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Masks {
    /// `"`, `\` or a control byte (< 0x20).
    pub special: u64,
    /// UTF-8 continuation bytes (0x80..=0xBF).
    pub cont: u64,
    /// Non-ASCII bytes (≥ 0x80).
    pub high: u64,
}

/// The naive oracle of the block masks (and the portable implementation).
pub fn masks_naive(b: &[u8; 64]) -> Masks {
    let mut m = Masks::default();
    for (k, &x) in b.iter().enumerate() {
        let bit = 1u64 << k;
        if is_special(x) {
            m.special |= bit;
        }
        if (0x80..=0xBF).contains(&x) {
            m.cont |= bit;
        }
        if x >= 0x80 {
            m.high |= bit;
        }
    }
    m
}

/// The byte classes of one 64-byte block that the block skim
/// (`crate::skim`) reads JSON's grammar from; bit `k` describes byte `k`.
/// Each is one compare at [`Level::Avx512`], two and two `movemask`s at
/// [`Level::Avx2`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Classes {
    pub quote: u64,
    pub bslash: u64,
    /// Space, tab, line feed, carriage return.
    pub ws: u64,
    pub lbrace: u64,
    pub rbrace: u64,
    pub lbrack: u64,
    pub rbrack: u64,
    pub colon: u64,
    pub comma: u64,
    /// Below 0x20.
    pub ctrl: u64,
    /// 0x80 and above.
    pub high: u64,
    /// `0`..=`9`.
    pub digit: u64,
    pub zero: u64,
    pub minus: u64,
    pub plus: u64,
    pub dot: u64,
    /// `e` (lower case: in `true` and `false`, and an exponent).
    pub e: u64,
    /// `E` (an exponent).
    pub big_e: u64,
}

/// The other letters of `true`, `false` and `null`, and of the
/// one-character escapes (`b`, `/` with `f`, `n`, `r`, `t`), apart from
/// [`Classes`]: the skim asks for them only for a block that has an escape
/// (or, through [`Literals::from_letters`], a literal at a level without
/// [`Blocks::literals`] of its own), so that a block of numbers
/// (`canada.json`) does not pay for them. LLVM moved some of them into
/// those branches by itself, not all (docs/performance.md, the forty-first
/// round).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Letters {
    pub t: u64,
    pub r: u64,
    pub u: u64,
    pub f: u64,
    pub a: u64,
    pub l: u64,
    pub s: u64,
    pub n: u64,
    pub b: u64,
    pub slash: u64,
}

/// Where a block spells out a literal whole: bit `k` when `true` or `null`
/// (`four`), or `false` (`five`), starts at byte `k` and ends inside the
/// block. The skim checks each run of letters against these. At AVX2 and
/// AVX-512 the letters are compared in place in the vector unit and only
/// these two masks leave it: on a list whose items each hold a literal,
/// that skimmed 6–9% faster than ten [`Letters`] masks moved out and
/// shifted together (docs/performance.md, the forty-eighth round).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Literals {
    pub four: u64,
    pub five: u64,
}

impl Literals {
    /// From the block's letters and its `e`s ([`Classes::e`]): each
    /// literal's letters shifted back onto its first.
    #[inline(always)]
    pub fn from_letters(l: &Letters, e: u64) -> Literals {
        Literals {
            four: (l.t & (l.r >> 1) & (l.u >> 2) & (e >> 3))
                | (l.n & (l.u >> 1) & (l.l >> 2) & (l.l >> 3)),
            five: l.f & (l.a >> 1) & (l.l >> 2) & (l.s >> 3) & (e >> 4),
        }
    }
}

/// [`Blocks::spacing`]: three of a block's [`Classes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Spacing {
    pub quote: u64,
    pub bslash: u64,
    pub ws: u64,
}

/// The portable [`Blocks::compress`], and its oracle: the kept bytes one by one.
pub fn compress_naive(win: &mut [u8; 64], at: usize, b: &[u8; 64], keep: u64) {
    let mut n = at;
    for (k, &x) in b.iter().enumerate() {
        if keep >> k & 1 != 0 {
            if let Some(d) = win.get_mut(n) {
                *d = x;
            }
            n += 1;
        }
    }
}

/// Bit `k` set when `f(blk[k])`: one class of a block, a byte at a time.
fn bits_where(blk: &[u8; 64], f: impl Fn(u8) -> bool) -> u64 {
    blk.iter()
        .enumerate()
        .filter(|&(_, &x)| f(x))
        .fold(0, |m, (k, _)| m | 1u64 << k)
}

/// The naive oracle of [`Classes`] (and the portable implementation, which
/// only tests use: the skim is off below [`Level::Avx2`]).
pub fn classes_naive(blk: &[u8; 64]) -> Classes {
    let eq = |c: u8| bits_where(blk, move |x| x == c);
    Classes {
        quote: eq(b'"'),
        bslash: eq(b'\\'),
        ws: bits_where(blk, is_ws),
        lbrace: eq(b'{'),
        rbrace: eq(b'}'),
        lbrack: eq(b'['),
        rbrack: eq(b']'),
        colon: eq(b':'),
        comma: eq(b','),
        ctrl: bits_where(blk, |x| x < 0x20),
        high: bits_where(blk, |x| x >= 0x80),
        digit: bits_where(blk, |x| x.is_ascii_digit()),
        zero: eq(b'0'),
        minus: eq(b'-'),
        plus: eq(b'+'),
        dot: eq(b'.'),
        e: eq(b'e'),
        big_e: eq(b'E'),
    }
}

/// The naive oracle of [`Letters`], like [`classes_naive`].
pub fn letters_naive(blk: &[u8; 64]) -> Letters {
    let eq = |c: u8| bits_where(blk, move |x| x == c);
    Letters {
        t: eq(b't'),
        r: eq(b'r'),
        u: eq(b'u'),
        f: eq(b'f'),
        a: eq(b'a'),
        l: eq(b'l'),
        s: eq(b's'),
        n: eq(b'n'),
        b: eq(b'b'),
        slash: eq(b'/'),
    }
}

/// The naive oracle of [`Literals`]: each place's next bytes compared.
pub fn literals_naive(blk: &[u8; 64]) -> Literals {
    let at = |word: &[u8]| {
        (0..64).fold(0u64, |m, k| {
            let here = blk.get(k..k + word.len()) == Some(word);
            m | (u64::from(here) << k)
        })
    };
    Literals {
        four: at(b"true") | at(b"null"),
        five: at(b"false"),
    }
}

/// Where [`find_block`] stopped: the block at `at` (64 bytes, or the short tail
/// of the input, with no mask bit past its end) and its masks; for the
/// whole blocks skipped before it (no special byte), how many continuation
/// bytes they held, whether any byte was non-ASCII, and whether any was
/// flagged by the UTF-8 check. `utf8` is the found block's UTF-8 flags, for
/// its bytes of the input only (0 when it is all ASCII). The UTF-8 check reads
/// the bytes before `from` (the start of the span) as ASCII.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Found {
    pub at: usize,
    pub masks: Masks,
    pub utf8: u64,
    pub cont_before: u64,
    pub high_before: bool,
    pub bad_before: bool,
}

/// Block-wise from `i` (in a span that starts at `from`): the first 64-byte
/// block (at `i + 64k`) holding a special byte, or else the last, partial
/// block (its `special` is then 0 and it ends at `s.len()`), with the bulk
/// counts of the blocks in between.
///
/// `eager` says the span is likely to hold more non-ASCII text: the UTF-8
/// check then runs on every block instead of only on blocks with a high byte
/// (or one just behind them). The walk turns eager by itself after a
/// non-ASCII block; the flag carries that from an earlier call. The result is the same either way (an ASCII
/// block after ASCII bytes has no flag); what changes is a branch. On text
/// that mixes ASCII and non-ASCII blocks that branch goes either way at
/// random, and its misses cost more than the check (docs/design.md §9).
#[inline]
pub fn find_block(s: &[u8], from: usize, i: usize, eager: bool) -> Found {
    find_block_at(detect(), s, from, i, eager)
}

/// [`find_block`] with a given implementation (portable where unsupported).
#[inline]
pub fn find_block_at(level: Level, s: &[u8], from: usize, i: usize, eager: bool) -> Found {
    struct Job<'a>(&'a [u8], usize, usize, bool);
    impl BlockJob for Job<'_> {
        type Out = Found;
        #[inline(always)]
        fn run<B: Blocks>(self, blocks: B) -> Found {
            find_block_in(blocks, self.0, self.1, self.2, self.3)
        }
    }
    with_blocks_at(level, Job(s, from, i, eager))
}

/// [`Blocks::skip_ws_after`] at a given level (portable where unsupported).
#[cfg(test)]
fn skip_ws_after_at(level: Level, s: &[u8], i: usize) -> usize {
    struct Job<'a>(&'a [u8], usize);
    impl BlockJob for Job<'_> {
        type Out = usize;
        #[inline(always)]
        fn run<B: Blocks>(self, blocks: B) -> usize {
            blocks.skip_ws_after(self.0, self.1)
        }
    }
    with_blocks_at(level, Job(s, i))
}

/// The three bytes before `at`, reading those before `from` as spaces.
#[inline(always)]
fn before3(s: &[u8], from: usize, at: usize) -> [u8; 3] {
    if at >= from.saturating_add(3) {
        if let Some(&[a, b, c]) = s.get(at - 3..at) {
            return [a, b, c];
        }
    }
    let byte = |back: usize| {
        at.checked_sub(back)
            .filter(|&p| p >= from)
            .and_then(|p| s.get(p).copied())
            .unwrap_or(b' ')
    };
    [byte(3), byte(2), byte(1)]
}

/// The block walk, at any [`Blocks`] level.
#[inline(always)]
fn find_block_with<B: Blocks, const EAGER: bool>(
    blocks: B,
    s: &[u8],
    from: usize,
    mut i: usize,
) -> Found {
    let mut cont_before = 0u64;
    let mut high_before = false;
    let mut bad_before = false;
    // Whether a byte among the three before the block is non-ASCII: an ASCII
    // block can still be flagged, where a sequence before it ends too soon.
    // At the span's start `before3` reads spaces, so the answer is no: said
    // first, that spares a string's first walk (most strings need only one)
    // three bounds checks and the loads behind them.
    let mut high_behind = i > from && before3(s, from, i).iter().any(|&b| b >= 0x80);
    while let Some(w) = s.get(i..i + 64).and_then(|w| <&[u8; 64]>::try_from(w).ok()) {
        let mut m = blocks.masks(w);
        // Without the barrier LLVM tests the two halves' OR and, on the found
        // path, rebuilds the 64-bit mask byte by byte (≈ 60 extract/insert
        // instructions per string).
        m.special = std::hint::black_box(m.special);
        let utf8 = if EAGER || m.high != 0 || high_behind {
            blocks.utf8_flags(before3(s, from, i), w)
        } else {
            0
        };
        if m.special != 0 {
            return Found {
                at: i,
                masks: m,
                utf8,
                cont_before,
                high_before,
                bad_before,
            };
        }
        cont_before += m.cont.count_ones() as u64;
        high_before |= m.high != 0;
        bad_before |= utf8 != 0;
        high_behind = m.high >> 61 != 0;
        i += 64;
        if !EAGER && m.high != 0 {
            // The span has shown non-ASCII: the rest of the walk is eager.
            let mut rest = find_block_with::<B, true>(blocks, s, from, i);
            rest.cont_before += cont_before;
            rest.high_before = true;
            rest.bad_before |= bad_before;
            return rest;
        }
    }
    let n = s.len();
    let mut found = Found {
        at: i,
        masks: Masks::default(),
        utf8: 0,
        cont_before,
        high_before,
        bad_before,
    };
    if i >= n {
        return found;
    }
    // The last, partial block. When the span holds the 64 bytes that end `s`,
    // read those (a load, where a padded copy costs a variable-length copy and
    // vector loads that wait on its byte stores: a fixed cost of every feed
    // that ends inside a long string) and shift the masks so that bit `k` is
    // still byte `i + k`. The bytes before `i` are shifted out; the context of
    // those after it is the same as in a padded block.
    if let Some(back) = n.checked_sub(64).filter(|&b| b >= from) {
        if let Some(w) = s.get(back..n).and_then(|w| <&[u8; 64]>::try_from(w).ok()) {
            // 1..=63: the loop above took every whole block from `i`.
            let d = ((i - back) & 63) as u32;
            let m = blocks.masks(w);
            found.masks = Masks {
                special: m.special >> d,
                cont: m.cont >> d,
                high: m.high >> d,
            };
            if found.masks.high != 0 || high_behind {
                found.utf8 = blocks.utf8_flags(before3(s, from, back), w) >> d;
            }
            return found;
        }
    }
    let b = padded_block(s, i);
    found.masks = blocks.masks(&b);
    if found.masks.high != 0 || high_behind {
        // Only the block's bytes of `s`: a space after a sequence cut by the
        // end of `s` is flagged, and no caller reads past the end.
        found.utf8 = blocks.utf8_flags(before3(s, from, i), &b) & below((n - i) as u32);
    }
    found
}

/// Bit `k` set when an odd number of bits `0..=k` of `x` are set: with `x`
/// a block's unescaped quotes, the bytes from each opening quote up to (not
/// with) its closing one. The portable twin of [`Blocks::prefix_xor`].
#[inline(always)]
pub fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

/// Bit `j` of `x` on the `j`-th lowest set bit of `mask`, for each of them
/// (what BMI2's `pdep` does): the portable twin of [`Blocks::deposit`].
#[inline]
pub fn deposit(mut x: u64, mut mask: u64) -> u64 {
    let mut out = 0u64;
    while mask != 0 {
        if x & 1 != 0 {
            out |= mask & mask.wrapping_neg();
        }
        x >>= 1;
        mask &= mask - 1;
    }
    out
}

/// The bits of `x` on the set bits of `mask`, packed from bit 0 in the
/// order of `mask`'s bits (what BMI2's `pext` does): the portable twin of
/// [`Blocks::extract`], and the inverse of [`deposit`].
#[inline]
pub fn extract(x: u64, mut mask: u64) -> u64 {
    let (mut out, mut j) = (0u64, 0);
    while mask != 0 {
        let low = mask & mask.wrapping_neg();
        if x & low != 0 {
            out |= 1 << j;
        }
        j += 1;
        mask &= mask - 1;
    }
    out
}

/// The low `k` bits of a block mask (all of them from 64).
#[inline(always)]
pub(crate) fn below(k: u32) -> u64 {
    if k >= 64 {
        u64::MAX
    } else {
        (1u64 << k) - 1
    }
}

/// A block-scanning level: how the masks of one 64-byte block are made.
/// Code generic over it is compiled once per level by [`with_blocks`], so on
/// x86_64 the AVX2 masks inline into the loop that uses them.
pub trait Blocks: Copy {
    /// Whether the block skim (`crate::skim`) pays at this level: at
    /// [`Level::Avx512`], where each of its [`Classes`] is one compare, and
    /// at [`Level::Avx2`], where a class is two compares, two `movemask`s
    /// and a join: there it pays on dense blocks only
    /// ([`Blocks::SKIM_MIN_TOKENS`]), and only on a CPU whose BMI2 is quick
    /// (`crate::skim::available`).
    const SKIM: bool = false;
    /// The skim ends at a block with fewer tokens than this: on sparser
    /// blocks the skip loop is as fast or faster at this level.
    const SKIM_MIN_TOKENS: u32 = crate::skim::MIN_TOKENS;
    fn masks(self, b: &[u8; 64]) -> Masks;
    /// The byte classes of `b`; the same bits as [`classes_naive`].
    #[inline(always)]
    fn classes(self, b: &[u8; 64]) -> Classes {
        classes_naive(b)
    }
    /// The letters of `b`; the same bits as [`letters_naive`].
    #[inline(always)]
    fn letters(self, b: &[u8; 64]) -> Letters {
        letters_naive(b)
    }
    /// The literals of `b`, `e` being its [`Classes::e`]; the same bits as
    /// [`literals_naive`].
    #[inline(always)]
    fn literals(self, b: &[u8; 64], e: u64) -> Literals {
        Literals::from_letters(&self.letters(b), e)
    }
    /// Bit `k` when `b[k]` is flagged by the UTF-8 check, `before` being
    /// the three bytes before the block; the same bits as [`utf8_flags_naive`].
    fn utf8_flags(self, before: [u8; 3], b: &[u8; 64]) -> u64;
    /// [`split_lead`] at this level.
    #[inline(always)]
    fn split_lead(self, b: &[u8; 64]) -> u32 {
        split_lead(b)
    }
    /// The escape masks of `b`; the same bits as [`escape_masks_naive`].
    fn escape_masks(self, b: &[u8; 64]) -> Escapes;
    /// The hex-digit masks of `b`; the same bits as [`hex_masks_naive`].
    fn hex_masks(self, b: &[u8; 64]) -> HexMasks;
    /// The low `k` bits, all 64 from `k = 64` on, for `k < 256`: the
    /// crate's `below` at this level. BMI2's `bzhi` at the x86_64 levels:
    /// LLVM does not always find it in `below`'s select, which is then a
    /// shift, a `not`, a compare and a `cmov`.
    #[inline(always)]
    fn below(self, k: u32) -> u64 {
        below(k)
    }
    /// [`prefix_xor`] at this level: bit `k` set when an odd number of bits
    /// `0..=k` of `x` are. Three steps with BMI2's `pdep` at AVX-512, where
    /// the shifts are a chain of twelve.
    #[inline(always)]
    fn prefix_xor(self, x: u64) -> u64 {
        prefix_xor(x)
    }
    /// [`deposit`] at this level: the low bits of `x`, one by one, on the
    /// set bits of `mask` from the lowest. BMI2's `pdep` at AVX-512.
    #[inline(always)]
    fn deposit(self, x: u64, mask: u64) -> u64 {
        deposit(x, mask)
    }
    /// [`extract`] at this level: the bits of `x` on the set bits of
    /// `mask`, packed from bit 0. BMI2's `pext` at AVX-512.
    #[inline(always)]
    fn extract(self, x: u64, mask: u64) -> u64 {
        extract(x, mask)
    }
    /// Whether [`Blocks::compress`] is one instruction at this level (the
    /// dense skim runs only where it is).
    const COMPRESS: bool = false;
    /// The bytes of `b` at the set bits of `keep`, in order, into `win`
    /// from `at` on, as many as fit; the rest of `win` is left as it was.
    #[inline(always)]
    fn compress(self, win: &mut [u8; 64], at: usize, b: &[u8; 64], keep: u64) {
        compress_naive(win, at, b, keep)
    }
    /// The quotes, backslashes and whitespace of `b`: the classes the dense
    /// skim needs to find the whitespace outside strings.
    #[inline(always)]
    fn spacing(self, b: &[u8; 64]) -> Spacing {
        let c = self.classes(b);
        Spacing {
            quote: c.quote,
            bslash: c.bslash,
            ws: c.ws,
        }
    }
    /// [`skip_ws_after`] at this level: `s[i]` is whitespace; the index of
    /// the first byte after it that is not (or `s.len()`). The baseline
    /// (SSE2 on x86_64, NEON on aarch64) unless a level has wider registers.
    #[inline(always)]
    fn skip_ws_after(self, s: &[u8], i: usize) -> usize {
        skip_ws_after(s, i)
    }
}

/// The portable level (the naive masks).
#[derive(Debug, Clone, Copy)]
pub struct PortableBlocks;

impl Blocks for PortableBlocks {
    #[inline(always)]
    fn masks(self, b: &[u8; 64]) -> Masks {
        masks_naive(b)
    }

    #[inline(always)]
    fn utf8_flags(self, before: [u8; 3], b: &[u8; 64]) -> u64 {
        utf8_flags_naive(before, b)
    }

    #[inline(always)]
    fn escape_masks(self, b: &[u8; 64]) -> Escapes {
        escape_masks_naive(b)
    }

    #[inline(always)]
    fn hex_masks(self, b: &[u8; 64]) -> HexMasks {
        hex_masks_naive(b)
    }
}

/// Work that runs over some [`Blocks`] level.
pub trait BlockJob {
    type Out;
    /// Whether the job runs at [`Level::Avx512`] where the CPU has it; if
    /// not, it runs at [`Level::Avx2`] there. A job whose own code (not the
    /// block masks) is most of its work can lose more to being compiled
    /// for AVX-512 than the masks win.
    const AVX512: bool = true;
    /// Whether the job runs with VBMI2 too at [`Level::Avx512`], where the
    /// CPU has it ([`Blocks::COMPRESS`]).
    const VBMI2: bool = false;
    fn run<B: Blocks>(self, blocks: B) -> Self::Out;
}

/// Run `job` at the best level for this CPU.
#[inline]
pub fn with_blocks<J: BlockJob>(job: J) -> J::Out {
    with_blocks_at(detect(), job)
}

/// Run `job` at a given level (portable where unsupported).
#[inline]
pub fn with_blocks_at<J: BlockJob>(level: Level, job: J) -> J::Out {
    match level {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 if J::AVX512 && J::VBMI2 && vbmi2_ok() => {
            // SAFETY: `vbmi2_ok` checked that the CPU has AVX-512 VBMI2, F
            // and BW, AVX2, POPCNT, BMI1 and BMI2.
            unsafe { x86_512::run_avx512_vbmi2(job) }
        }
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 if J::AVX512 && avx512_ok() => {
            // SAFETY: `avx512_ok` checked (once, cached) that the CPU has
            // AVX-512 F and BW, AVX2, POPCNT, BMI1 and BMI2.
            unsafe { x86_512::run_avx512(job) }
        }
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 | Level::Avx512 if avx2_ok() => {
            // SAFETY: `avx2_ok` checked (once, cached) that the CPU has AVX2 and POPCNT.
            unsafe { x86::run_avx2(job) }
        }
        #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
        // SAFETY: `arm` is compiled only where the target enables NEON.
        Level::Neon => unsafe { arm::run_neon(job) },
        _ => job.run(PortableBlocks),
    }
}

/// The block levels that run different code on this CPU for a job with
/// [`BlockJob`]'s default flags: [`with_blocks_at`] runs a level the CPU
/// lacks as a lower one, so a test that holds every level to an oracle
/// would run the same code twice. Each kept level is the first of those
/// that run alike.
#[cfg(test)]
pub(crate) fn distinct_levels() -> Vec<Level> {
    struct Which;
    impl BlockJob for Which {
        type Out = &'static str;
        fn run<B: Blocks>(self, _: B) -> &'static str {
            std::any::type_name::<B>()
        }
    }
    let mut seen = Vec::new();
    let mut kept = Vec::new();
    for l in [Level::Portable, Level::Avx2, Level::Avx512, Level::Neon] {
        let t = with_blocks_at(l, Which);
        if !seen.contains(&t) {
            seen.push(t);
            kept.push(l);
        }
    }
    kept
}

/// [`find_block`] at a given [`Blocks`] level, for code generic over it.
#[inline(always)]
pub fn find_block_in<B: Blocks>(blocks: B, s: &[u8], from: usize, i: usize, eager: bool) -> Found {
    if eager {
        find_block_with::<B, true>(blocks, s, from, i)
    } else {
        find_block_with::<B, false>(blocks, s, from, i)
    }
}

/// The index of the closing quote when a string body starting at `s[i]` ends
/// within its first `STEPS` 16-byte steps and everything before that quote is
/// plain printable ASCII (no escape, control or non-ASCII byte); otherwise
/// `None`. Only whole steps are read: fewer than 16 readable bytes at `i` give
/// `None`.
#[inline]
pub fn plain_string<const STEPS: usize>(s: &[u8], i: usize) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        x86::plain_string_sse2::<STEPS>(s, i)
    }
    #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
    {
        // SAFETY: `arm` is compiled only where the target enables NEON.
        unsafe { arm::plain_string_neon::<STEPS>(s, i) }
    }
    #[cfg(not(any(
        target_arch = "x86_64",
        all(target_arch = "aarch64", target_feature = "neon")
    )))]
    {
        plain_string_portable::<STEPS>(s, i)
    }
}

/// The portable twin (and oracle) of [`plain_string`].
pub fn plain_string_portable<const STEPS: usize>(s: &[u8], i: usize) -> Option<usize> {
    let steps = (s.len().checked_sub(i)? / 16).min(STEPS);
    let w = s.get(i..i + 16 * steps)?;
    let k = w.iter().position(|&b| is_special(b) || b >= 0x80)?;
    (w.get(k) == Some(&b'"')).then_some(i + k)
}

/// The common short key or value, in one step: [`plain_string`] over 16 bytes.
#[inline]
pub fn short_string(s: &[u8], i: usize) -> Option<usize> {
    plain_string::<1>(s, i)
}

/// The medium string (a URL, a date, an id, a sentence) without the setup of
/// the block walk, which it would finish in one block anyway:
/// [`plain_string`] over up to 64 bytes.
#[inline]
pub fn medium_string(s: &[u8], i: usize) -> Option<usize> {
    plain_string::<4>(s, i)
}

/// Bit `k` set when `s[i + k]` is an ASCII digit, for the 32 bytes from `i`
/// (`None` when fewer remain): two SSE2 compares on x86_64, else the
/// portable twin. A number's digit runs, and so its end, come from one mask.
#[inline]
pub fn digits32(s: &[u8], i: usize) -> Option<u32> {
    #[cfg(target_arch = "x86_64")]
    {
        x86::digits32_sse2(s, i)
    }
    #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
    {
        // SAFETY: `arm` is compiled only where the target enables NEON.
        unsafe { arm::digits32_neon(s, i) }
    }
    #[cfg(not(any(
        target_arch = "x86_64",
        all(target_arch = "aarch64", target_feature = "neon")
    )))]
    {
        digits32_portable(s, i)
    }
}

/// The portable twin (and oracle) of [`digits32`].
pub fn digits32_portable(s: &[u8], i: usize) -> Option<u32> {
    let w = s.get(i..i.checked_add(32)?)?;
    Some(
        w.iter()
            .enumerate()
            .fold(0, |m, (k, b)| m | (b.is_ascii_digit() as u32) << k),
    )
}

/// Index of the first non-whitespace byte at or after `i` (JSON whitespace:
/// space, tab, LF, CR). A run of one byte (the space after a colon in
/// indented JSON) is settled by the byte after it; longer runs go sixteen
/// bytes a step with SSE2 (a newline and its indentation usually in one),
/// else the portable twin.
#[inline]
pub fn skip_ws(s: &[u8], i: usize) -> usize {
    if let Some(&[a, b]) = s.get(i..i + 2) {
        if is_ws(a) && !is_ws(b) {
            return i + 1;
        }
    }
    skip_ws_run(s, i)
}

/// The whitespace walk of [`skip_ws`] and [`skip_ws_after`], sixteen bytes a
/// step: SSE2 on x86_64, NEON on aarch64, else the portable twin.
#[inline(always)]
fn skip_ws_run(s: &[u8], i: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        x86::skip_ws_sse2(s, i)
    }
    #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
    {
        // SAFETY: `arm` is compiled only where the target enables NEON.
        unsafe { arm::skip_ws_neon(s, i) }
    }
    #[cfg(not(any(
        target_arch = "x86_64",
        all(target_arch = "aarch64", target_feature = "neon")
    )))]
    {
        skip_ws_portable(s, i)
    }
}

/// [`skip_ws`] when `s[i]` is already known to be whitespace: the index of
/// the first non-whitespace byte after it (or `s.len()`). A loop that has
/// just classified `s[i]` saves classifying it again: in indented JSON every
/// value and key follows such a run.
#[inline]
pub fn skip_ws_after(s: &[u8], i: usize) -> usize {
    let j = i + 1;
    match s.get(j) {
        Some(&c) if is_ws(c) => {}
        _ => return j,
    }
    skip_ws_run(s, j)
}

/// How far ahead of the byte being read [`prefetch`] asks for input.
pub(crate) const PREFETCH_AHEAD: usize = 1024;

/// Ask for the cache line at `s[at]`, a hint that it is read soon; `at`
/// may be past the end of `s` (nothing is read then either). A string's
/// block walk reads each block after the last one's masks, so the CPU's own
/// prefetcher is all that runs ahead of it; where that falls behind (on a
/// shared host, often: the 20 MB texts skipped at a third of their usual
/// speed) the walk waits on every line, so it asks for the lines ahead
/// itself. The structure skip loop does not: per token, the hint cost more
/// in cache than it won out of it. On x86_64 a `prefetcht0` (SSE, part of
/// the baseline); elsewhere nothing.
#[inline(always)]
pub(crate) fn prefetch(s: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = s.as_ptr().wrapping_add(at).cast::<i8>();
        // SAFETY: a prefetch is only a hint: it does not fault and changes
        // nothing the program can observe, whatever the address (`p` is
        // never dereferenced).
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (s, at);
    }
}

/// JSON whitespace: space, tab, LF, CR.
#[inline(always)]
pub(crate) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// The portable twin of [`skip_ws`]: runs of indentation eight bytes at a time.
#[inline]
pub fn skip_ws_portable(s: &[u8], mut i: usize) -> usize {
    const SPACES: u64 = LO * b' ' as u64;
    loop {
        match s.get(i) {
            Some(b' ' | b'\n' | b'\r' | b'\t') => i += 1,
            _ => return i,
        }
        // Indentation: whole words of spaces.
        while let Some(w) = s.get(i..i + 8) {
            let mut a = [0u8; 8];
            a.copy_from_slice(w);
            if u64::from_le_bytes(a) != SPACES {
                break;
            }
            i += 8;
        }
    }
}

/// The naive oracle of [`skip_ws`].
pub fn skip_ws_naive(s: &[u8], i: usize) -> usize {
    s.iter()
        .skip(i)
        .position(|b| !matches!(b, b' ' | b'\n' | b'\r' | b'\t'))
        .map_or(s.len().max(i), |k| i + k)
}

/// Which implementation `scan` uses on this machine.
/// Discriminants from 1, so that `detect()`'s cache can keep 0 for "not yet".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Level {
    Portable = 1,
    Sse2,
    Avx2,
    /// AVX-512 F and BW (with AVX2): the block masks of the jobs that accept
    /// it ([`BlockJob::AVX512`]: the string scan and [`find_block`], not the
    /// skip loop); every other scan as at [`Level::Avx2`].
    Avx512,
    /// aarch64 with NEON (compiled in where the target has it).
    Neon,
}

/// The level in use: [`probe`] runs once, and its answer is kept.
#[inline]
fn detect() -> Level {
    use std::sync::atomic::{AtomicU8, Ordering};
    const PORTABLE: u8 = Level::Portable as u8;
    const SSE2: u8 = Level::Sse2 as u8;
    const AVX2: u8 = Level::Avx2 as u8;
    const AVX512: u8 = Level::Avx512 as u8;
    const NEON: u8 = Level::Neon as u8;
    // 0 until probed; then the level's discriminant.
    static LEVEL: AtomicU8 = AtomicU8::new(0);
    match LEVEL.load(Ordering::Relaxed) {
        PORTABLE => Level::Portable,
        SSE2 => Level::Sse2,
        AVX2 => Level::Avx2,
        AVX512 => Level::Avx512,
        NEON => Level::Neon,
        _ => {
            let l = probe();
            LEVEL.store(l as u8, Ordering::Relaxed);
            l
        }
    }
}

/// The best level this CPU has, unless the environment asks for less
/// (`RESULTBUDGET_NO_AVX512`: AVX2 at most; `RESULTBUDGET_NO_AVX2`: SSE2).
#[cfg(target_arch = "x86_64")]
#[cold]
fn probe() -> Level {
    let off = |name: &str| std::env::var_os(name).is_some();
    if off("RESULTBUDGET_NO_AVX2") || !has_avx2() {
        Level::Sse2
    } else if off("RESULTBUDGET_NO_AVX512") || !has_avx512() {
        Level::Avx2
    } else {
        Level::Avx512
    }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx2() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("popcnt")
        && is_x86_feature_detected!("bmi1")
        && is_x86_feature_detected!("bmi2")
}

/// Whether BMI2's `pdep` and `pext` are quick on this CPU: one cycle or a
/// few on every Intel part with them and on AMD's from Zen 3 (family 0x19)
/// on, but microcode on AMD's and Hygon's earlier ones, where one costs
/// tens to hundreds of cycles by its mask. The block skim at AVX2 uses them
/// for its brackets (`skim::monotone`); without them quick, it stays off
/// there, and the skip loop runs as it did. Asked once, by `skim::available`.
#[cfg(target_arch = "x86_64")]
pub(crate) fn fast_bmi2() -> bool {
    use std::arch::x86_64::__cpuid;
    let v = __cpuid(0);
    let mut vendor = [0u8; 12];
    for (d, w) in vendor.chunks_exact_mut(4).zip([v.ebx, v.edx, v.ecx]) {
        d.copy_from_slice(&w.to_le_bytes());
    }
    if &vendor != b"AuthenticAMD" && &vendor != b"HygonGenuine" {
        return true;
    }
    let eax = __cpuid(1).eax;
    let base = (eax >> 8) & 0xF;
    let family = if base == 0xF {
        base + ((eax >> 20) & 0xFF)
    } else {
        base
    };
    family >= 0x19
}

/// [`fast_bmi2`] where there is no BMI2: never asked.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn fast_bmi2() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx512() -> bool {
    has_avx2() && is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw")
}

/// NEON, unless the environment asks for the portable level
/// (`RESULTBUDGET_NO_NEON`).
#[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
#[cold]
fn probe() -> Level {
    if std::env::var_os("RESULTBUDGET_NO_NEON").is_none() {
        Level::Neon
    } else {
        Level::Portable
    }
}

#[cfg(not(any(
    target_arch = "x86_64",
    all(target_arch = "aarch64", target_feature = "neon")
)))]
#[cold]
fn probe() -> Level {
    Level::Portable
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn avx2_ok() -> bool {
    matches!(detect(), Level::Avx2 | Level::Avx512) || has_avx2()
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn avx512_ok() -> bool {
    detect() == Level::Avx512 || has_avx512()
}

/// Whether the CPU has AVX-512 (as [`avx512_ok`]) and VBMI2 (the standard
/// library keeps what it detected, as for the other features).
#[cfg(target_arch = "x86_64")]
#[inline]
fn vbmi2_ok() -> bool {
    avx512_ok() && is_x86_feature_detected!("avx512vbmi2")
}

/// The implementation in use.
pub fn level() -> Level {
    detect()
}

/// Scan with the best implementation for this CPU.
#[inline]
pub fn scan(s: &[u8]) -> Run {
    if s.len() < 16 {
        return scan_naive(s);
    }
    scan_at(detect(), s)
}

/// Scan with a given implementation (falls back to portable where unsupported).
pub fn scan_at(level: Level, s: &[u8]) -> Run {
    match level {
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 | Level::Avx512 if avx2_ok() => {
            // SAFETY: `avx2_ok` checked (once, cached) that the CPU has AVX2 (and POPCNT).
            unsafe { x86::scan_avx2(s) }
        }
        #[cfg(target_arch = "x86_64")]
        Level::Sse2 | Level::Avx2 | Level::Avx512 => {
            // SAFETY: SSE2 is part of every x86_64 CPU.
            unsafe { x86::scan_sse2(s) }
        }
        #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
        // SAFETY: `arm` is compiled only where the target enables NEON.
        Level::Neon => unsafe { arm::scan_neon(s) },
        _ => scan_swar(s),
    }
}

/// The length of the plain-ASCII prefix of `s`: the index of its first `"`,
/// `\`, control or non-ASCII byte (or `s.len()`). Where a string body goes
/// on from the last chunk (a base64 blob, long text), this prefix needs no
/// UTF-8 check and no character count: each byte is one character.
#[inline]
pub fn ascii_run(s: &[u8]) -> usize {
    if s.len() < 16 {
        return ascii_run_naive(s);
    }
    ascii_run_at(detect(), s)
}

/// [`ascii_run`] with a given implementation (portable where unsupported).
pub fn ascii_run_at(level: Level, s: &[u8]) -> usize {
    match level {
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 | Level::Avx512 if avx2_ok() => {
            // SAFETY: `avx2_ok` checked (once, cached) that the CPU has AVX2.
            unsafe { x86::ascii_run_avx2(s) }
        }
        #[cfg(target_arch = "x86_64")]
        Level::Sse2 | Level::Avx2 | Level::Avx512 => x86::ascii_run_sse2(s),
        #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
        // SAFETY: `arm` is compiled only where the target enables NEON.
        Level::Neon => unsafe { arm::ascii_run_neon(s) },
        _ => ascii_run_swar(s),
    }
}

/// [`ascii_run`] that also appends the run to `dst`, reading it once where
/// the CPU allows (AVX2) and `dst` has room: for the long plain strings of a
/// pass-through (a base64 blob), whose every byte is kept. Returns the run's
/// length. `dst` grows only by what is written, as with `extend_from_slice`.
pub fn ascii_run_copy(s: &[u8], dst: &mut Vec<u8>) -> usize {
    ascii_run_copy_at(detect(), s, dst)
}

/// [`ascii_run_copy`] with a given implementation: the fused AVX2 loop in
/// `dst`'s spare capacity, or [`ascii_run_at`] followed by one copy (its
/// portable twin), which also takes over where the spare capacity ends.
#[inline]
pub fn ascii_run_copy_at(level: Level, s: &[u8], dst: &mut Vec<u8>) -> usize {
    // What the fused loop took (nothing where it does not run).
    #[cfg(target_arch = "x86_64")]
    let n = {
        let room = s.len().min(dst.capacity() - dst.len());
        if matches!(level, Level::Avx2 | Level::Avx512) && avx2_ok() && room >= 64 {
            // SAFETY: `avx2_ok` checked (once, cached) that the CPU has AVX2.
            let n = unsafe { x86::ascii_run_copy_avx2(s, dst) };
            if n < room || n == s.len() {
                // The run ended inside the room the fused loop had, or took
                // all of `s`.
                return n;
            }
            n
        } else {
            0
        }
    };
    #[cfg(not(target_arch = "x86_64"))]
    let n = 0;
    let rest = s.get(n..).unwrap_or(&[]);
    let r = ascii_run_at(level, rest);
    dst.extend_from_slice(rest.get(..r).unwrap_or(rest));
    n + r
}

/// One step of xorshift64: the tests' source of varied, repeatable inputs.
#[cfg(test)]
pub(crate) fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(s: &[u8]) {
        let want = scan_naive(s);
        assert_eq!(scan_swar(s), want, "swar {s:?}");
        for l in [
            Level::Portable,
            Level::Sse2,
            Level::Avx2,
            Level::Avx512,
            Level::Neon,
        ] {
            assert_eq!(scan_at(l, s), want, "{l:?} {s:?}");
        }
        assert_eq!(scan(s), want);
        let want = ascii_run_naive(s);
        assert_eq!(ascii_run_swar(s), want, "ascii swar {s:?}");
        for l in [
            Level::Portable,
            Level::Sse2,
            Level::Avx2,
            Level::Avx512,
            Level::Neon,
        ] {
            assert_eq!(ascii_run_at(l, s), want, "ascii {l:?} {s:?}");
        }
        assert_eq!(ascii_run(s), want);
        check_copy(s, want);
    }

    /// `ascii_run_copy` at every level: the run's length, and the run
    /// appended after what `dst` held, whatever room `dst` has (none, part
    /// of the run: the fused loop then stops and the twin goes on, or all),
    /// and `dst` not grown when the run fits its room.
    fn check_copy(s: &[u8], want: usize) {
        // No spare capacity, room for half of `s`, room for all of it.
        for spare in [0, s.len() / 2, s.len() + 64] {
            for l in [
                Level::Portable,
                Level::Sse2,
                Level::Avx2,
                Level::Avx512,
                Level::Neon,
            ] {
                let mut d = Vec::with_capacity(3 + spare);
                d.extend_from_slice(b"pre");
                let cap = d.capacity();
                assert_eq!(
                    ascii_run_copy_at(l, s, &mut d),
                    want,
                    "copy {l:?} {spare} {s:?}"
                );
                assert_eq!(d.get(..3), Some(&b"pre"[..]));
                assert_eq!(d.get(3..), s.get(..want), "copied {l:?} {spare} {s:?}");
                if want <= cap - 3 {
                    assert_eq!(d.capacity(), cap, "grown with room {l:?} {spare}");
                }
            }
        }
        let mut d = Vec::new();
        assert_eq!(ascii_run_copy(s, &mut d), want);
        assert_eq!(Some(&d[..]), s.get(..want));
    }

    /// The fused copy over several 64-byte windows: a stop in the first,
    /// a middle and the last window, or none, with the tail of each length.
    #[test]
    fn ascii_run_copy_over_many_windows() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for len in [
            64, 65, 127, 128, 129, 191, 192, 200, 255, 256, 257, 4096, 4100,
        ] {
            // Base64's alphabet: no stop anywhere.
            let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            let base: Vec<u8> = (0..len)
                .map(|_| alphabet[(xorshift(&mut x) % 64) as usize])
                .collect();
            assert_eq!(ascii_run_naive(&base), len);
            check(&base);
            for pos in [0, 1, 31, 32, 63, 64, 65, 100, 127, 128, 191, 192, len - 1] {
                if pos >= len {
                    continue;
                }
                for sp in [b'"', b'\\', 0x01, 0x80, 0xFF] {
                    let mut v = base.clone();
                    v[pos] = sp;
                    check(&v);
                }
            }
        }
    }

    /// On aarch64 the twin tests compare NEON with the portable code only if
    /// NEON is the level in use (it is, unless `RESULTBUDGET_NO_NEON` is set).
    #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
    #[test]
    fn neon_is_the_level_on_aarch64() {
        assert!(std::env::var_os("RESULTBUDGET_NO_NEON").is_none());
        assert_eq!(level(), Level::Neon);
    }

    /// The best x86_64 level the CPU has is the one in use (unless the
    /// environment asks for less).
    /// Each level's prefix XOR against a walk over the bits, on edge values
    /// and random ones (quote masks are random enough).
    #[test]
    fn prefix_xor_at_every_level_matches_a_bit_walk() {
        struct Job(u64);
        impl BlockJob for Job {
            type Out = u64;
            fn run<B: Blocks>(self, blocks: B) -> u64 {
                blocks.prefix_xor(self.0)
            }
        }
        let walk = |x: u64| {
            let (mut odd, mut out) = (false, 0u64);
            for k in 0..64 {
                odd ^= (x >> k) & 1 != 0;
                out |= u64::from(odd) << k;
            }
            out
        };
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let edges = [
            0,
            1,
            1 << 63,
            u64::MAX,
            0x8000_0000_0000_0001,
            0x5555_5555_5555_5555,
        ];
        let randoms = (0..20_000).map(|_| xorshift(&mut seed) & xorshift(&mut seed));
        for x in edges.into_iter().chain(randoms) {
            let want = walk(x);
            assert_eq!(prefix_xor(x), want, "{x:#x}");
            for level in [Level::Portable, Level::Avx2, Level::Avx512] {
                assert_eq!(with_blocks_at(level, Job(x)), want, "{level:?} {x:#x}");
            }
        }
    }

    /// Each level's deposit and extract against a walk over the mask's
    /// bits, and the extract as the deposit's inverse.
    #[test]
    fn deposit_and_extract_at_every_level_match_a_bit_walk() {
        struct Job(u64, u64);
        impl BlockJob for Job {
            type Out = (u64, u64);
            fn run<B: Blocks>(self, blocks: B) -> (u64, u64) {
                (
                    blocks.deposit(self.0, self.1),
                    blocks.extract(self.0, self.1),
                )
            }
        }
        // Bit `j` of `x` to the `j`-th set bit of `mask`, and back.
        let walk = |x: u64, mask: u64| {
            let (mut deposited, mut extracted, mut j) = (0u64, 0u64, 0);
            for k in 0..64 {
                if (mask >> k) & 1 != 0 {
                    deposited |= ((x >> j) & 1) << k;
                    extracted |= ((x >> k) & 1) << j;
                    j += 1;
                }
            }
            (deposited, extracted)
        };
        let mut seed = 0xD1B5_4A32_D192_ED03u64;
        let edges = [
            (0, 0),
            (u64::MAX, 0),
            (0, u64::MAX),
            (u64::MAX, u64::MAX),
            (1, 1 << 63),
            (1 << 63, 1 << 63),
            (0x5555_5555_5555_5555, 0xFFFF_0000_FFFF_0000),
        ];
        let randoms = (0..20_000).map(|_| {
            (
                xorshift(&mut seed),
                xorshift(&mut seed) & xorshift(&mut seed),
            )
        });
        for (x, mask) in edges.into_iter().chain(randoms) {
            let want = walk(x, mask);
            assert_eq!(
                (deposit(x, mask), extract(x, mask)),
                want,
                "{x:#x} {mask:#x}"
            );
            assert_eq!(deposit(want.1, mask), x & mask, "{x:#x} {mask:#x}");
            for level in [Level::Portable, Level::Avx2, Level::Avx512] {
                assert_eq!(with_blocks_at(level, Job(x, mask)), want, "{level:?}");
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_best_x86_level_is_in_use() {
        let off = |name: &str| std::env::var_os(name).is_some();
        let want = if off("RESULTBUDGET_NO_AVX2") || !has_avx2() {
            Level::Sse2
        } else if off("RESULTBUDGET_NO_AVX512") || !has_avx512() {
            Level::Avx2
        } else {
            Level::Avx512
        };
        assert_eq!(level(), want);
        assert_eq!(
            want == Level::Avx512,
            is_x86_feature_detected!("avx512bw")
                && !off("RESULTBUDGET_NO_AVX512")
                && !off("RESULTBUDGET_NO_AVX2")
        );
    }

    #[test]
    fn every_special_at_every_position_and_length() {
        let specials = [b'"', b'\\', 0x00, 0x1F, 0x0A, b'\t'];
        let fillers = [b'a', 0x7F, 0x80, 0xC3, 0xFF, 0x20, b'!', b'#', b'[', b']'];
        for len in 0..70 {
            for &f in &fillers {
                let base = vec![f; len];
                check(&base);
                for pos in 0..len {
                    for &sp in &specials {
                        let mut v = base.clone();
                        v[pos] = sp;
                        check(&v);
                        // A non-ASCII byte before and after the special.
                        if pos > 0 {
                            v[pos - 1] = 0xE2;
                            check(&v);
                        }
                        if pos + 1 < len {
                            v[pos + 1] = 0x90;
                            check(&v);
                        }
                    }
                }
            }
        }
    }

    /// The naive definition of `find_block`, byte by byte.
    fn find_block_naive(s: &[u8], from: usize, mut i: usize) -> Found {
        let mut f = Found::default();
        loop {
            let mut b = [b' '; 64];
            let part = s.get(i..(i + 64).min(s.len())).unwrap_or(&[]);
            b[..part.len()].copy_from_slice(part);
            let byte = |p: Option<usize>| p.filter(|&p| p >= from).map_or(b' ', |p| s[p]);
            let before = [
                byte(i.checked_sub(3)),
                byte(i.checked_sub(2)),
                byte(i.checked_sub(1)),
            ];
            let m = masks_naive(&b);
            let utf8 = if m.high != 0 || before.iter().any(|&x| x >= 0x80) {
                utf8_flags_naive(before, &b)
            } else {
                0
            };
            if m.special != 0 || i + 64 > s.len() {
                f.at = i;
                f.masks = m;
                // Flags of the bytes of `s` only.
                f.utf8 = if part.len() >= 64 {
                    utf8
                } else {
                    utf8 & ((1u64 << part.len()) - 1)
                };
                return f;
            }
            f.cont_before += part.iter().filter(|&&x| (0x80..=0xBF).contains(&x)).count() as u64;
            f.high_before |= part.iter().any(|&x| x >= 0x80);
            f.bad_before |= utf8 != 0;
            i += 64;
        }
    }

    fn check_blocks(s: &[u8]) {
        for i in [0, 1, 7, 31, 32, 63, 64, 65] {
            if i > s.len() {
                continue;
            }
            for from in [0, i.saturating_sub(2), i] {
                let want = find_block_naive(s, from, i);
                for eager in [false, true] {
                    for l in [
                        Level::Portable,
                        Level::Sse2,
                        Level::Avx2,
                        Level::Avx512,
                        Level::Neon,
                    ] {
                        assert_eq!(
                            find_block_at(l, s, from, i, eager),
                            want,
                            "{l:?} at {i} from {from}, eager {eager}, in {s:?}"
                        );
                    }
                    assert_eq!(find_block(s, from, i, eager), want);
                }
            }
        }
    }

    #[test]
    fn find_block_matches_its_oracle() {
        let fillers = [b'a', 0x7F, 0x80, 0xBF, 0xC0, 0xC3, 0xFF, 0x20];
        let specials = [b'"', b'\\', 0x00, 0x1F];
        for len in [0, 1, 63, 64, 65, 127, 128, 129, 200] {
            for &f in &fillers {
                let base = vec![f; len];
                check_blocks(&base);
                for pos in (0..len).step_by(5) {
                    for &sp in &specials {
                        let mut v = base.clone();
                        v[pos] = sp;
                        check_blocks(&v);
                    }
                }
            }
        }
        // Valid non-ASCII text, so sequences cross block edges and the bytes
        // before a block matter.
        let text = "日本語😀é-".repeat(20);
        for len in [60, 64, 67, 100, 128, 131, 200] {
            let base = &text.as_bytes()[..len];
            check_blocks(base);
            for pos in (0..len).step_by(7) {
                let mut v = base.to_vec();
                v[pos] = b'"';
                check_blocks(&v);
            }
        }
        let mut x: u64 = 0x1234_5678_9ABC_DEF1;
        for _ in 0..3000 {
            xorshift(&mut x);
            let len = (x % 300) as usize;
            let v: Vec<u8> = (0..len)
                .map(|k| {
                    let y = x.rotate_left(k as u32 % 64) ^ (k as u64 * 0x9E37);
                    match y % 97 {
                        0 => b'"',
                        1 => b'\\',
                        2 => 0x0A,
                        3..=30 => 0x80 | (y >> 8) as u8,
                        _ => b'a' + (y % 26) as u8,
                    }
                })
                .collect();
            check_blocks(&v);
        }
    }

    #[test]
    fn medium_string_matches_its_twin() {
        let bytes = [b'"', b'\\', 0x00, 0x1F, 0x7F, 0x80, 0xC3, 0xFF, b' '];
        let mut x: u64 = 0x0DDB_A11C_AFE5_EED5;
        let mut found = 0;
        for _ in 0..50_000 {
            xorshift(&mut x);
            let len = (x % 90) as usize;
            // Sparse stops, so that runs of plain bytes reach every step.
            let gap = 8 + (x >> 8) as usize % 60;
            let mut y = x;
            let v: Vec<u8> = (0..len)
                .map(|_| {
                    xorshift(&mut y);
                    if (y as usize).is_multiple_of(gap) {
                        bytes[(y >> 32) as usize % bytes.len()]
                    } else {
                        b'a'
                    }
                })
                .collect();
            for i in 0..=len + 1 {
                let want = plain_string_portable::<4>(&v, i);
                found += want.is_some() as u32;
                assert_eq!(medium_string(&v, i), want, "{v:?} at {i}");
            }
        }
        assert!(found > 10_000, "{found}");
    }

    #[test]
    fn short_string_matches_its_twin() {
        let bytes = [b'a', b'"', b'\\', 0x00, 0x1F, 0x7F, 0x80, 0xC3, b' '];
        let mut x: u64 = 0xDEAD_BEEF_0BAD_F00D;
        for _ in 0..200_000 {
            xorshift(&mut x);
            let len = (x % 24) as usize;
            let v: Vec<u8> = (0..len)
                .map(|k| {
                    let y = (x >> (k % 60)) as usize;
                    if y.is_multiple_of(5) {
                        bytes[y / 5 % bytes.len()]
                    } else {
                        b'a'
                    }
                })
                .collect();
            for i in 0..=len {
                assert_eq!(
                    short_string(&v, i),
                    plain_string_portable::<1>(&v, i),
                    "{v:?} at {i}"
                );
            }
        }
    }

    #[test]
    fn skip_ws_matches_its_oracle() {
        let pieces: [&[u8]; 6] = [b" ", b"        ", b"\n", b"\r\n  ", b"\t", b"x"];
        let mut x: u64 = 12345;
        for _ in 0..5000 {
            let mut v = Vec::new();
            for _ in 0..(x % 40) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                v.extend_from_slice(pieces[(x >> 40) as usize % pieces.len()]);
            }
            for i in 0..=v.len() + 1 {
                assert_eq!(skip_ws(&v, i), skip_ws_naive(&v, i), "{v:?} at {i}");
                assert_eq!(
                    skip_ws_portable(&v, i),
                    skip_ws_naive(&v, i),
                    "{v:?} at {i}"
                );
                if v.get(i).is_some_and(|&b| is_ws(b)) {
                    let want = skip_ws_naive(&v, i);
                    assert_eq!(skip_ws_after(&v, i), want, "{v:?} at {i}");
                    for l in [
                        Level::Portable,
                        Level::Sse2,
                        Level::Avx2,
                        Level::Avx512,
                        Level::Neon,
                    ] {
                        assert_eq!(skip_ws_after_at(l, &v, i), want, "{l:?} {v:?} at {i}");
                    }
                }
            }
        }
    }

    #[test]
    fn random_bytes_agree() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            xorshift(&mut x);
            let len = (x % 200) as usize;
            let mut v = Vec::with_capacity(len);
            let mut y = x;
            for _ in 0..len {
                y = y
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                // Mostly plain bytes, sometimes specials and high bytes.
                let b = (y >> 33) as u8;
                v.push(if b.is_multiple_of(23) {
                    b'"'
                } else if b.is_multiple_of(29) {
                    b % 32
                } else {
                    b | 0x20
                });
            }
            check(&v);
        }
    }

    /// Bytes at the edges of UTF-8's classes.
    const EDGES: [u8; 27] = [
        0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1,
        0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF7, 0xF8, 0xFF,
    ];

    /// Whether the flags (at `level`, block by block, ASCII before) and the
    /// tail check call `s` valid UTF-8.
    fn valid_by_flags(level: Level, s: &[u8]) -> bool {
        struct Job<'a>(&'a [u8]);
        impl BlockJob for Job<'_> {
            type Out = bool;
            fn run<B: Blocks>(self, blocks: B) -> bool {
                let s = self.0;
                let mut at = 0;
                while at < s.len() {
                    let mut b = [b' '; 64];
                    let part = &s[at..(at + 64).min(s.len())];
                    b[..part.len()].copy_from_slice(part);
                    let flags = blocks.utf8_flags(before3(s, 0, at), &b);
                    let n = part.len();
                    let live = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
                    if flags & live != 0 {
                        return false;
                    }
                    at += 64;
                }
                !utf8_incomplete_tail(s)
            }
        }
        with_blocks_at(level, Job(s))
    }

    fn check_utf8(s: &[u8]) {
        let want = std::str::from_utf8(s).is_ok();
        for l in [Level::Portable, Level::Avx2, Level::Avx512, Level::Neon] {
            assert_eq!(valid_by_flags(l, s), want, "{l:?} {s:02X?}");
        }
    }

    #[test]
    fn utf8_flags_agree_with_std_on_every_short_string_of_edge_bytes() {
        check_utf8(&[]);
        let mut v = Vec::new();
        for len in 1..=4u32 {
            for mut code in 0..EDGES.len().pow(len) {
                v.clear();
                for _ in 0..len {
                    v.push(EDGES[code % EDGES.len()]);
                    code /= EDGES.len();
                }
                // Only the naive level here: the AVX2 one runs the same bits
                // (the twin test) and this loop is half a million strings.
                assert_eq!(
                    valid_by_flags(Level::Portable, &v),
                    std::str::from_utf8(&v).is_ok(),
                    "{v:02X?}"
                );
            }
        }
        // Every byte pair, and every byte after each kind of lead.
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                check_utf8(&[a, b]);
                check_utf8(&[0xE1, a, b]);
                check_utf8(&[0xF1, 0x80, a, b]);
            }
        }
    }

    #[test]
    fn utf8_flags_agree_with_std_across_blocks() {
        let units: [&[u8]; 12] = [
            b"a",
            b"plain text ",
            "é".as_bytes(),
            "日本".as_bytes(),
            "😀".as_bytes(),
            "\u{7FF}\u{800}\u{FFFF}\u{10000}\u{10FFFF}".as_bytes(),
            &[0xC3],
            &[0xE2, 0x82],
            &[0xF0, 0x9F, 0x98],
            &[0x80],
            &[0xED, 0xA0, 0x80],
            &[0xF4, 0x90, 0x80, 0x80],
        ];
        let mut x: u64 = 0x0DDB_A11C_AFE5_EED5;
        for _ in 0..20_000 {
            xorshift(&mut x);
            let mut v = Vec::new();
            let mut y = x;
            while v.len() < (x % 200) as usize {
                y = y.wrapping_mul(6364136223846793005).wrapping_add(1);
                // Mostly valid units; a bad one now and then.
                let k = (y >> 40) as usize % 64;
                v.extend_from_slice(units[if k < 58 { k % 6 } else { k - 52 }]);
            }
            check_utf8(&v);
            for cut in [1, 2, 3] {
                check_utf8(&v[..v.len().saturating_sub(cut)]);
            }
        }
    }

    #[test]
    fn utf8_flags_match_their_twin() {
        let mut x: u64 = 0xA5A5_5A5A_1234_4321;
        for round in 0..50_000 {
            xorshift(&mut x);
            let mut b = [0u8; 64];
            let mut y = x;
            for slot in b.iter_mut() {
                y = y
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let r = (y >> 33) as usize;
                *slot = if round % 2 == 0 {
                    EDGES[r % EDGES.len()]
                } else {
                    r as u8
                };
            }
            let before = [
                EDGES[(x % 27) as usize],
                EDGES[(x >> 8) as usize % 27],
                (x >> 16) as u8,
            ];
            struct Job<'a>([u8; 3], &'a [u8; 64]);
            impl BlockJob for Job<'_> {
                type Out = u64;
                fn run<B: Blocks>(self, blocks: B) -> u64 {
                    blocks.utf8_flags(self.0, self.1)
                }
            }
            let want = utf8_flags_naive(before, &b);
            for l in [Level::Portable, Level::Avx2, Level::Avx512, Level::Neon] {
                assert_eq!(
                    with_blocks_at(l, Job(before, &b)),
                    want,
                    "{l:?} {before:02X?} {b:02X?}"
                );
            }
        }
    }

    /// The escapes of a block read from a point outside any escape, walked
    /// byte by byte: a backslash begins an escape and takes the byte after
    /// it. (leads, leads whose escape is one-character and ends in the block)
    fn escapes_walk(b: &[u8]) -> (u64, u64) {
        let (mut leads, mut simple) = (0u64, 0u64);
        let mut k = 0;
        while k < b.len().min(64) {
            if b[k] == b'\\' {
                leads |= 1 << k;
                if b.get(k + 1)
                    .is_some_and(|&e| k + 1 < 64 && is_simple_escape(e))
                {
                    simple |= 1 << k;
                }
                k += 2;
            } else {
                k += 1;
            }
        }
        (leads, simple)
    }

    fn leads_walk(bs: u64) -> u64 {
        let b: Vec<u8> = (0..64)
            .map(|k| if bs >> k & 1 == 1 { b'\\' } else { b'x' })
            .collect();
        escapes_walk(&b).0
    }

    #[test]
    fn escape_leads_match_the_walk() {
        // Every pattern of 16 backslashes at the bottom, the middle and the
        // top of the word (runs that reach bit 63 included), then random
        // words of every density.
        for p in 0..=u16::MAX as u64 {
            for shift in [0, 23, 48] {
                let bs = p << shift;
                assert_eq!(escape_leads(bs), leads_walk(bs), "{bs:064b}");
            }
        }
        let mut x = 0x0DDB_1A5E_5BAD_5EEDu64;
        for round in 0..200_000 {
            let mut bs = xorshift(&mut x);
            for _ in 0..round % 3 {
                bs |= xorshift(&mut x);
            }
            assert_eq!(escape_leads(bs), leads_walk(bs), "{bs:064b}");
        }
    }

    #[test]
    fn below_matches_its_twin_at_every_level() {
        struct Job;
        impl BlockJob for Job {
            type Out = Vec<u64>;
            fn run<B: Blocks>(self, blocks: B) -> Vec<u64> {
                (0..256).map(|k| blocks.below(k)).collect()
            }
        }
        let want: Vec<u64> = (0..256).map(below).collect();
        assert_eq!(want[0], 0);
        assert_eq!(want[5], 0b11111);
        assert_eq!(want[64], u64::MAX);
        assert_eq!(want[65], u64::MAX);
        for l in [Level::Portable, Level::Avx2, Level::Avx512, Level::Neon] {
            assert_eq!(with_blocks_at(l, Job), want, "{l:?}");
        }
    }

    #[test]
    fn simple_escapes_match_the_walk() {
        struct Job<'a>(&'a [u8], usize);
        impl BlockJob for Job<'_> {
            type Out = u64;
            fn run<B: Blocks>(self, blocks: B) -> u64 {
                simple_escapes(blocks, self.0, self.1)
            }
        }
        const BYTES: &[u8] = b"\\\\\\\\\"\"/bfnrtuxN0\x01\x1F\xC3\xA9 ";
        let mut x = 0x1234_5678_9ABC_DEF1u64;
        for round in 0..100_000 {
            let len = if round % 4 == 0 {
                (xorshift(&mut x) % 80) as usize
            } else {
                64 + (xorshift(&mut x) % 16) as usize
            };
            let s: Vec<u8> = (0..len)
                .map(|_| BYTES[(xorshift(&mut x) % BYTES.len() as u64) as usize])
                .collect();
            let at = (xorshift(&mut x) % 8) as usize % (len + 1);
            let block = s.get(at..).unwrap_or(&[]);
            // Bytes past the end of `s` read as spaces.
            let want = escapes_walk(block).1;
            for l in [Level::Portable, Level::Avx2, Level::Avx512, Level::Neon] {
                assert_eq!(
                    with_blocks_at(l, Job(&s, at)),
                    want,
                    "{l:?} {:?}",
                    String::from_utf8_lossy(block)
                );
            }
        }
    }

    #[test]
    fn escape_masks_match_their_twin() {
        struct Job<'a>(&'a [u8; 64]);
        impl BlockJob for Job<'_> {
            type Out = Escapes;
            fn run<B: Blocks>(self, blocks: B) -> Escapes {
                blocks.escape_masks(self.0)
            }
        }
        // Every byte value at every position, then random blocks.
        let mut x = 0xC0FF_EE00_1234_5678u64;
        for round in 0..20_000u32 {
            let mut b = [0u8; 64];
            for (k, slot) in b.iter_mut().enumerate() {
                *slot = if round < 256 {
                    (round as usize + k * 97) as u8
                } else {
                    xorshift(&mut x) as u8
                };
            }
            let want = escape_masks_naive(&b);
            for l in [Level::Portable, Level::Avx2, Level::Avx512, Level::Neon] {
                assert_eq!(with_blocks_at(l, Job(&b)), want, "{l:?} {b:02X?}");
            }
        }
    }

    #[test]
    fn compress_and_spacing_match_their_oracles() {
        struct Job<'a>(&'a [u8; 64], [u8; 64], usize, u64);
        impl BlockJob for Job<'_> {
            type Out = ([u8; 64], Spacing, bool);
            // The dense skim's own levels: with VBMI2 where the CPU has it.
            const VBMI2: bool = true;
            fn run<B: Blocks>(self, blocks: B) -> Self::Out {
                let Job(b, mut win, at, keep) = self;
                blocks.compress(&mut win, at, b, keep);
                (win, blocks.spacing(b), B::COMPRESS)
            }
        }
        let mut x = 0x5EED_0FC0_4E55_u64;
        let mut compressed = 0;
        for round in 0..20_000u32 {
            let mut b = [0u8; 64];
            for slot in b.iter_mut() {
                let r = xorshift(&mut x);
                *slot = if round % 2 == 0 {
                    r as u8
                } else {
                    b" \t\n\r\"\\ax{1"[(r % 10) as usize]
                };
            }
            // Any mask, and the sparse and dense ends of it; any start,
            // past the window's end too.
            let keep = match round % 4 {
                0 => xorshift(&mut x),
                1 => xorshift(&mut x) & xorshift(&mut x) & xorshift(&mut x),
                2 => xorshift(&mut x) | xorshift(&mut x),
                _ => u64::MAX,
            };
            let at = (xorshift(&mut x) % 70) as usize;
            let mut before = [0u8; 64];
            for slot in before.iter_mut() {
                *slot = xorshift(&mut x) as u8;
            }
            let mut want = before;
            let kept: Vec<u8> = (0..64)
                .filter(|&k| keep >> k & 1 != 0)
                .map(|k| b[k])
                .collect();
            for (k, &v) in kept.iter().enumerate() {
                if let Some(slot) = want.get_mut(at + k) {
                    *slot = v;
                }
            }
            let c = classes_naive(&b);
            let spacing = Spacing {
                quote: c.quote,
                bslash: c.bslash,
                ws: c.ws,
            };
            for l in [Level::Portable, Level::Avx2, Level::Avx512, Level::Neon] {
                let (win, sp, vbmi2) = with_blocks_at(l, Job(&b, before, at, keep));
                assert_eq!(win, want, "{l:?} at {at}, keep {keep:016X}, {b:02X?}");
                assert_eq!(sp, spacing, "{l:?} {b:02X?}");
                compressed += usize::from(vbmi2);
            }
        }
        // The byte compress itself was run where the CPU has it.
        #[cfg(target_arch = "x86_64")]
        let has = vbmi2_ok();
        #[cfg(not(target_arch = "x86_64"))]
        let has = false;
        assert_eq!(compressed > 0, has, "{compressed}");
    }

    #[test]
    fn split_lead_matches_the_tail_walk() {
        struct Job<'a>(&'a [u8; 64]);
        impl BlockJob for Job<'_> {
            type Out = u32;
            fn run<B: Blocks>(self, blocks: B) -> u32 {
                blocks.split_lead(self.0)
            }
        }
        // The first of the last three bytes whose sequence, by its lead,
        // runs past the block's end.
        let walk = |b: &[u8; 64]| {
            (61..64u32)
                .find(|&k| {
                    let need = match b[k as usize] {
                        0xF0.. => 4,
                        0xE0.. => 3,
                        0xC0.. => 2,
                        _ => 1,
                    };
                    k + need > 64
                })
                .unwrap_or(64)
        };
        // Every value of each of the three bytes among boundary values of
        // the other two, over blocks that are all ASCII or all leads.
        let edges = [
            0x00, 0x41, 0x7F, 0x80, 0xBF, 0xC0, 0xC3, 0xDF, 0xE0, 0xEF, 0xF0, 0xF4, 0xFF,
        ];
        let mut seen = [0usize; 65];
        for fill in [b'a', 0xF0] {
            for pos in 61..64 {
                for v in 0..=255u8 {
                    for &x in &edges {
                        for &y in &edges {
                            let mut b = [fill; 64];
                            let others: Vec<usize> = (61..64).filter(|&k| k != pos).collect();
                            b[pos] = v;
                            b[others[0]] = x;
                            b[others[1]] = y;
                            let want = walk(&b);
                            seen[want as usize] += 1;
                            for l in [Level::Portable, Level::Avx2, Level::Avx512, Level::Neon] {
                                assert_eq!(
                                    with_blocks_at(l, Job(&b)),
                                    want,
                                    "{l:?} {:02X?}",
                                    &b[61..]
                                );
                            }
                        }
                    }
                }
            }
        }
        // Each answer came up.
        for k in [61, 62, 63, 64] {
            assert!(seen[k] > 1000, "{k}: {}", seen[k]);
        }
    }

    #[test]
    fn hex_masks_match_their_twin() {
        struct Job<'a>(&'a [u8; 64]);
        impl BlockJob for Job<'_> {
            type Out = HexMasks;
            fn run<B: Blocks>(self, blocks: B) -> HexMasks {
                blocks.hex_masks(self.0)
            }
        }
        // Every byte value at every position, then random blocks, then
        // blocks of hex digits and their neighbours.
        let mut x = 0x4E58_D16E_0BAD_F00Du64;
        let near = b"/0123456789:@ABCDEFG`abcdefgxX\\u";
        for round in 0..20_000u32 {
            let mut b = [0u8; 64];
            for (k, slot) in b.iter_mut().enumerate() {
                *slot = if round < 256 {
                    (round as usize + k * 97) as u8
                } else if round % 2 == 0 {
                    xorshift(&mut x) as u8
                } else {
                    near[xorshift(&mut x) as usize % near.len()]
                };
            }
            let want = hex_masks_naive(&b);
            for l in [Level::Portable, Level::Avx2, Level::Avx512, Level::Neon] {
                assert_eq!(with_blocks_at(l, Job(&b)), want, "{l:?} {b:02X?}");
            }
        }
        let mut all = [b' '; 64];
        all[..22].copy_from_slice(b"0123456789abcdefABCDEF");
        let h = hex_masks_naive(&all);
        assert_eq!(h.hex, (1 << 22) - 1);
        assert_eq!(h.zero, 1);
        assert_eq!(h.oct, 0xFF);
        assert_eq!(h.d, 1 << 13 | 1 << 19);
        assert_eq!(h.cf, 0xF << 12 | 0xF << 18);
    }

    #[test]
    fn digits32_matches_its_twin() {
        // Every byte value at every position, then random windows; and
        // every start near the end of the input.
        let mut x = 0x0DD5_EED5_0123_4567u64;
        for round in 0..20_000u32 {
            let b: Vec<u8> = (0..40)
                .map(|k: usize| {
                    if round < 256 {
                        (round as usize + k * 97) as u8
                    } else {
                        xorshift(&mut x) as u8
                    }
                })
                .collect();
            for i in 0..=b.len() {
                assert_eq!(digits32(&b, i), digits32_portable(&b, i), "{b:02X?} at {i}");
            }
        }
        assert_eq!(digits32(b"0123456789", 0), None);
        assert_eq!(digits32(&[b'5'; 32], 0), Some(u32::MAX));
    }
}
