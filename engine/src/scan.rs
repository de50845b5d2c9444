//! Block-wise scanning of string bodies: find the next byte that ends a plain
//! run — `"`, `\` or a control character (U+0000..U+001F) — and say whether the
//! run holds non-ASCII bytes. AVX2 (32 bytes a step) and SSE2 (16) on x86_64,
//! chosen at run time; a portable SWAR twin (8 bytes a step) everywhere else.
//! Every implementation is tested against the one-line naive oracle.
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
    use super::{scan_naive, Run};
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

/// Index of the first non-whitespace byte at or after `i` (JSON whitespace:
/// space, tab, LF, CR). Runs of indentation are skipped eight bytes at a time.
#[inline]
pub fn skip_ws(s: &[u8], mut i: usize) -> usize {
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
fn detect() -> Level {
    use std::sync::atomic::{AtomicU8, Ordering};
    static LEVEL: AtomicU8 = AtomicU8::new(0);
    match LEVEL.load(Ordering::Relaxed) {
        1 => Level::Sse2,
        2 => Level::Avx2,
        _ => {
            let l = if std::env::var_os("RESULTBUDGET_NO_AVX2").is_none()
                && is_x86_feature_detected!("avx2")
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
    detect() == Level::Avx2 || is_x86_feature_detected!("avx2")
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
            // SAFETY: `avx2_ok` checked (once, cached) that the CPU has AVX2.
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

    #[test]
    fn skip_ws_matches_its_oracle() {
        let pieces: [&[u8]; 6] = [b" ", b"        ", b"\n", b"\r\n  ", b"\t", b"x"];
        let mut x: u64 = 12345;
        for _ in 0..5000 {
            let mut v = Vec::new();
            for _ in 0..(x % 12) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                v.extend_from_slice(pieces[(x >> 40) as usize % pieces.len()]);
            }
            for i in 0..=v.len() + 1 {
                assert_eq!(skip_ws(&v, i), skip_ws_naive(&v, i), "{v:?} at {i}");
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
