//! Block-wise scanning of string bodies: find the next byte that ends a plain
//! run — `"`, `\` or a control character (U+0000..U+001F) — and say whether the
//! run holds non-ASCII bytes. AVX2 (32 bytes a step) and SSE2 (16) on x86_64,
//! chosen at run time; a portable SWAR twin (8 bytes a step) everywhere else.
//! Every implementation is tested against the one-line naive oracle.
//!
//! The 64-byte block masks that string scanning uses come through a
//! [`Blocks`] level: code generic over it runs via [`with_blocks`], which
//! calls it inside an AVX2-compiled function when the CPU has AVX2 (so the
//! masks inline into the caller's loop) and with the naive masks otherwise.
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

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{scan_naive, BlockJob, Blocks, Masks, Run};
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

    /// [`super::short_string`] with SSE2, which every x86_64 CPU has.
    #[inline]
    pub fn short_string_sse2(s: &[u8], i: usize) -> Option<usize> {
        let w = s.get(i..i + 16)?;
        // SAFETY: `w` is 16 readable bytes; SSE2 is part of the x86_64 baseline,
        // so these intrinsics are always available; loadu has no alignment need.
        let mask = unsafe {
            let v = _mm_loadu_si128(w.as_ptr() as *const __m128i);
            let q = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let b = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
            let ctrl_max = _mm_set1_epi8(0x1F);
            let c = _mm_cmpeq_epi8(_mm_max_epu8(v, ctrl_max), ctrl_max);
            (_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(q, b), c)) | _mm_movemask_epi8(v)) as u32
        };
        let k = mask.trailing_zeros() as usize;
        (w.get(k) == Some(&b'"')).then_some(i + k)
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

    /// # Safety
    /// The CPU must support AVX2; `p` must point to 64 readable bytes.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn masks_avx2(p: *const u8) -> Masks {
        // SAFETY: the caller guarantees 64 readable bytes at `p`; loadu has no alignment need.
        let (lo, hi) = unsafe {
            (
                _mm256_loadu_si256(p as *const __m256i),
                _mm256_loadu_si256(p.add(32) as *const __m256i),
            )
        };
        let (s0, c0, h0) = half_masks(lo);
        let (s1, c1, h1) = half_masks(hi);
        Masks {
            special: s0 as u64 | (s1 as u64) << 32,
            cont: c0 as u64 | (c1 as u64) << 32,
            high: h0 as u64 | (h1 as u64) << 32,
        }
    }

    /// The AVX2 block level; made only by [`run_avx2`].
    #[derive(Debug, Clone, Copy)]
    pub struct Avx2Blocks(());

    impl Blocks for Avx2Blocks {
        #[inline(always)]
        fn masks(self, b: &[u8; 64]) -> Masks {
            // SAFETY: an `Avx2Blocks` exists only inside `run_avx2`, which the
            // dispatcher calls after detecting AVX2 and POPCNT.
            unsafe { masks_avx2(b.as_ptr()) }
        }
    }

    /// Run `job` compiled for AVX2, so its block scans inline.
    ///
    /// # Safety
    /// The CPU must support AVX2 and POPCNT (checked at run time by the caller).
    #[target_feature(enable = "avx2,popcnt")]
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

/// Where [`find_block`] stopped: the block at `at` (64 bytes, or the short tail
/// of the input padded with spaces, which are in no mask) and its masks; for the
/// whole blocks skipped before it (no special byte), how many continuation
/// bytes they held and whether any byte was non-ASCII.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Found {
    pub at: usize,
    pub masks: Masks,
    pub cont_before: u64,
    pub high_before: bool,
}

/// Block-wise from `i`: the first 64-byte block (at `i + 64k`) holding a
/// special byte, or else the last, partial block (its `special` is then 0 and
/// it ends at `s.len()`), with the bulk counts of the blocks in between.
#[inline]
pub fn find_block(s: &[u8], i: usize) -> Found {
    find_block_at(detect(), s, i)
}

/// [`find_block`] with a given implementation (portable where unsupported).
#[inline]
pub fn find_block_at(level: Level, s: &[u8], i: usize) -> Found {
    struct Job<'a>(&'a [u8], usize);
    impl BlockJob for Job<'_> {
        type Out = Found;
        #[inline(always)]
        fn run<B: Blocks>(self, blocks: B) -> Found {
            find_block_in(blocks, self.0, self.1)
        }
    }
    with_blocks_at(level, Job(s, i))
}

/// The block walk shared by the portable path, over any mask function.
#[inline(always)]
fn find_block_with(s: &[u8], mut i: usize, masks: impl Fn(&[u8; 64]) -> Masks) -> Found {
    let mut cont_before = 0u64;
    let mut high_before = false;
    while let Some(w) = s.get(i..i + 64).and_then(|w| <&[u8; 64]>::try_from(w).ok()) {
        let mut m = masks(w);
        // Without the barrier LLVM tests the two halves' OR and, on the found
        // path, rebuilds the 64-bit mask byte by byte (≈ 60 extract/insert
        // instructions per string).
        m.special = std::hint::black_box(m.special);
        if m.special != 0 {
            return Found {
                at: i,
                masks: m,
                cont_before,
                high_before,
            };
        }
        cont_before += m.cont.count_ones() as u64;
        high_before |= m.high != 0;
        i += 64;
    }
    let mut b = [b' '; 64];
    let tail = s.get(i..).unwrap_or(&[]);
    if let Some(dst) = b.get_mut(..tail.len()) {
        dst.copy_from_slice(tail);
    }
    Found {
        at: i,
        masks: masks(&b),
        cont_before,
        high_before,
    }
}

/// A block-scanning level: how the masks of one 64-byte block are made.
/// Code generic over it is compiled once per level by [`with_blocks`], so on
/// x86_64 the AVX2 masks inline into the loop that uses them.
pub trait Blocks: Copy {
    fn masks(self, b: &[u8; 64]) -> Masks;
}

/// The portable level (the naive masks).
#[derive(Debug, Clone, Copy)]
pub struct PortableBlocks;

impl Blocks for PortableBlocks {
    #[inline(always)]
    fn masks(self, b: &[u8; 64]) -> Masks {
        masks_naive(b)
    }
}

/// Work that runs over some [`Blocks`] level.
pub trait BlockJob {
    type Out;
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
        Level::Avx2 if avx2_ok() => {
            // SAFETY: `avx2_ok` checked (once, cached) that the CPU has AVX2 and POPCNT.
            unsafe { x86::run_avx2(job) }
        }
        _ => job.run(PortableBlocks),
    }
}

/// [`find_block`] at a given [`Blocks`] level, for code generic over it.
#[inline(always)]
pub fn find_block_in<B: Blocks>(blocks: B, s: &[u8], i: usize) -> Found {
    find_block_with(s, i, |w| blocks.masks(w))
}

/// The index of the closing quote when a string body starting at `s[i]` ends
/// within the next 16 bytes and everything before that quote is plain
/// printable ASCII (no escape, control or non-ASCII byte); otherwise `None`.
/// Needs 16 readable bytes at `i`. The common short key or value, in one step.
#[inline]
pub fn short_string(s: &[u8], i: usize) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        x86::short_string_sse2(s, i)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        short_string_portable(s, i)
    }
}

/// The portable twin (and oracle) of [`short_string`].
pub fn short_string_portable(s: &[u8], i: usize) -> Option<usize> {
    let w = s.get(i..i + 16)?;
    let k = w.iter().position(|&b| is_special(b) || b >= 0x80)?;
    (w.get(k) == Some(&b'"')).then_some(i + k)
}

/// Index of the first non-whitespace byte at or after `i` (JSON whitespace:
/// space, tab, LF, CR): sixteen bytes a step with SSE2 (a newline and its
/// indentation usually in one), else the portable twin.
#[inline]
pub fn skip_ws(s: &[u8], i: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        x86::skip_ws_sse2(s, i)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        x86::skip_ws_sse2(s, i)
    }
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Portable,
    Sse2,
    Avx2,
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn detect() -> Level {
    use std::sync::atomic::{AtomicU8, Ordering};
    static LEVEL: AtomicU8 = AtomicU8::new(0);
    match LEVEL.load(Ordering::Relaxed) {
        1 => Level::Sse2,
        2 => Level::Avx2,
        _ => {
            let l = if std::env::var_os("RESULTBUDGET_NO_AVX2").is_none()
                && is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("popcnt")
            {
                Level::Avx2
            } else {
                Level::Sse2
            };
            LEVEL.store(if l == Level::Avx2 { 2 } else { 1 }, Ordering::Relaxed);
            l
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Level {
    Level::Portable
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn avx2_ok() -> bool {
    detect() == Level::Avx2
        || (is_x86_feature_detected!("avx2") && is_x86_feature_detected!("popcnt"))
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
        Level::Avx2 if avx2_ok() => {
            // SAFETY: `avx2_ok` checked (once, cached) that the CPU has AVX2 (and POPCNT).
            unsafe { x86::scan_avx2(s) }
        }
        #[cfg(target_arch = "x86_64")]
        Level::Sse2 | Level::Avx2 => {
            // SAFETY: SSE2 is part of every x86_64 CPU.
            unsafe { x86::scan_sse2(s) }
        }
        _ => scan_swar(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(s: &[u8]) {
        let want = scan_naive(s);
        assert_eq!(scan_swar(s), want, "swar {s:?}");
        for l in [Level::Portable, Level::Sse2, Level::Avx2] {
            assert_eq!(scan_at(l, s), want, "{l:?} {s:?}");
        }
        assert_eq!(scan(s), want);
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
    fn find_block_naive(s: &[u8], mut i: usize) -> Found {
        let mut f = Found::default();
        loop {
            let mut b = [b' '; 64];
            let part = s.get(i..(i + 64).min(s.len())).unwrap_or(&[]);
            b[..part.len()].copy_from_slice(part);
            let m = masks_naive(&b);
            if m.special != 0 || i + 64 > s.len() {
                f.at = i;
                f.masks = m;
                return f;
            }
            f.cont_before += part.iter().filter(|&&x| (0x80..=0xBF).contains(&x)).count() as u64;
            f.high_before |= part.iter().any(|&x| x >= 0x80);
            i += 64;
        }
    }

    fn check_blocks(s: &[u8]) {
        for i in [0, 1, 7, 31, 32, 63, 64, 65] {
            if i > s.len() {
                continue;
            }
            let want = find_block_naive(s, i);
            for l in [Level::Portable, Level::Sse2, Level::Avx2] {
                assert_eq!(find_block_at(l, s, i), want, "{l:?} at {i} in {s:?}");
            }
            assert_eq!(find_block(s, i), want);
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
        let mut x: u64 = 0x1234_5678_9ABC_DEF1;
        for _ in 0..3000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
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
    fn short_string_matches_its_twin() {
        let bytes = [b'a', b'"', b'\\', 0x00, 0x1F, 0x7F, 0x80, 0xC3, b' '];
        let mut x: u64 = 0xDEAD_BEEF_0BAD_F00D;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 24) as usize;
            let v: Vec<u8> = (0..len)
                .map(|k| {
                    let y = (x >> (k % 60)) as usize;
                    if y % 5 == 0 {
                        bytes[y / 5 % bytes.len()]
                    } else {
                        b'a'
                    }
                })
                .collect();
            for i in 0..=len {
                assert_eq!(
                    short_string(&v, i),
                    short_string_portable(&v, i),
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
            }
        }
    }

    #[test]
    fn random_bytes_agree() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 200) as usize;
            let mut v = Vec::with_capacity(len);
            let mut y = x;
            for _ in 0..len {
                y = y
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                // Mostly plain bytes, sometimes specials and high bytes.
                let b = (y >> 33) as u8;
                v.push(if b % 23 == 0 {
                    b'"'
                } else if b % 29 == 0 {
                    b % 32
                } else {
                    b | 0x20
                });
            }
            check(&v);
        }
    }
}
