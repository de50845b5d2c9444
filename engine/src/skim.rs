//! The block skim: the skip loop's fast path over compact JSON, 64 bytes a
//! step, with the grammar read from the block's byte-class masks
//! ([`scan::Classes`]) instead of token by token.
//!
//! The skip loop in the tokenizer takes one token a trip: about 14
//! instructions a byte on a list of small objects, most of them the dispatch
//! on each token. Here a block is validated whole, and only its brackets are
//! visited one by one (for the stack: which container each byte is in), or
//! at once where they all open or all close ([`monotone`]). Everything else
//! is a few dozen operations on 64-bit masks:
//!
//! - strings: escapes from the backslash runs, then the bytes inside strings
//!   by a prefix XOR of the unescaped quotes; no control byte inside, each
//!   escape a one-character one (`\u` hands the block back), UTF-8 checked
//!   by the level's flags;
//! - scalars: the runs of bytes outside strings that are neither whitespace
//!   nor structure; each must be a number (its grammar written as mask rules:
//!   where a sign, a dot, an exponent and a leading zero may stand) or exactly
//!   `true`, `false` or `null`;
//! - grammar: for each kind of token, the next token (found across whitespace
//!   by a carry through its runs) must be one its kind allows, and which
//!   strings are keys follows from what comes before them.
//!
//! A block is taken up to its last structural byte outside strings (the
//! *cut*): every token before the cut is then whole, and the state after it
//! is one the tokenizer has (after `{`, `[`, `,`, `:` or a closer). The next
//! block starts right after the cut. A block the skim cannot take whole (an
//! error, a `\u` escape, a string longer than the block, a closer that ends
//! the skip, the depth limit) is not taken at all: the skim stops before it,
//! and the byte-wise loop goes on from exactly there, so errors keep their
//! kind and offset. The skim only ever takes valid bytes, with the state the
//! byte-wise loop would reach on them.
//!
//! Indented structure (a document pretty-printed) holds too few tokens a
//! block for this to pay: the whitespace is most of it. Where the CPU has
//! VBMI2's byte compress ([`Blocks::COMPRESS`]), the skim goes on past such
//! a block in *dense windows* ([`dense`]): 64 bytes gathered from the
//! input with the whitespace outside strings left out, taken as a block,
//! and the cut mapped back to the input.
//!
//! It runs at [`scan::Level::Avx512`] ([`Blocks::SKIM`]), where each class
//! is one compare: on the bench's list of small objects the skip ran at
//! about 1.5 GB/s with it and 0.9 without (criterion; `docs/performance.md`,
//! the thirty-third round). At [`scan::Level::Avx2`] a class costs two
//! compares and two `movemask`s, so there the skim takes only dense blocks
//! ([`MIN_TOKENS_AVX2`]), and runs only where BMI2 is quick
//! ([`scan::fast_bmi2`]); on a Zen 3 host it skips the list about 30%
//! faster than the loop, and `mcp_deep` about 55% (the forty-second round).
//! Dense windows need VBMI2's byte compress, so they run at AVX-512 only.
//! The portable classes ([`scan::classes_naive`]) run it in tests, as the
//! twin of the AVX2 and AVX-512 ones.
use crate::scan::{self, BlockJob, Blocks, Classes};

/// The last token before the skim's start (or after a block's cut), as far
/// as what may follow it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prev {
    /// `{`: a key or `}`.
    ObjOpen,
    /// `[`: a value or `]`.
    ArrOpen,
    /// `,`: a key in an object, a value in an array.
    Comma,
    /// `:` (or a `,` in an array, which allows the same): a value.
    Colon,
    /// A value: `,` or a closer.
    ValueEnd,
    /// A key: `:`.
    KeyEnd,
}

/// What bounds a skim: the skip's own level and floor, and the depth limit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// Values that start at this depth are counted.
    pub level: u32,
    /// A closer met at this depth or below ends the skip: not taken.
    pub floor: u32,
    /// No container is opened at this depth or deeper.
    pub max_depth: u32,
    /// `skip_one`: a value starting at `level` is the tokenizer's to open.
    pub one: bool,
}

/// Where a skim stopped: right after the cut of its last block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Skimmed {
    pub end: usize,
    pub prev: Prev,
    pub depth: u32,
    /// Values started at [`Bounds::level`] in the bytes taken.
    pub count: u64,
    /// The skim stopped after a block with few tokens.
    pub sparse: bool,
}

/// A block taken with fewer tokens than this ends the skim: on sparse
/// input (pretty-printed structure, long strings) the byte-wise loop is as
/// fast or faster, and the skim is better left to the dense parts. A list
/// of small objects has about 20 tokens a block, `canada.json`'s
/// coordinates 8 to 10, `citm_catalog.json`'s indented objects fewer still.
/// Measured on this crate's benches (thirty-fourth round, once the skim
/// had got faster): at 16 `canada` was not skimmed, at 10 it was skimmed
/// in part and lost 5%, at 8 and 6 it gained 24%, and no other input moved
/// beyond the runs' noise; at 1 `citm_catalog` lost 40% and `twitter` 10%.
/// The floor at AVX-512, and at every level in the tests, so that the
/// levels take the same blocks there.
pub(crate) const MIN_TOKENS: u32 = 8;

/// [`MIN_TOKENS`] at AVX2, where a block's classes cost about four times
/// what they cost at AVX-512 (two compares and two `movemask`s a class,
/// where AVX-512 has one compare). Measured on a Zen 3 host (forty-second
/// round): the list of small objects (about 20 tokens a block) skimmed
/// 30% faster than the loop skips it, at 12 or 16 alike; `canada`'s 8 to 10
/// tokens a block read slower skimmed, so they are left to the loop.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) const MIN_TOKENS_AVX2: u32 = 16;

/// The longest wait, in bytes, between the skip loop's tries of the skim
/// when they take nothing or stop at a sparse block (`\u` escapes, long
/// strings, pretty-printed input), at AVX-512: a try costs about what the
/// loop spends on 64 bytes, so well under 1% of its time from there on.
const WAIT_MAX: usize = 16 << 10;

/// [`WAIT_MAX`] at AVX2, where a try costs more (its classes, and code
/// that is cold by the time of the next try; about a microsecond on a Zen 3
/// host): at 16 KiB, `twitter`'s budgeted run (25 tries, each taking one
/// sparse block) read 2–4% slower with the skim on than off (forty-second
/// round). Since the wait counts down across feeds (forty-third round), 64
/// KiB still cost `twitter` 2.5% against the wait begun afresh in each
/// feed (which, as long as the 64 KiB feeds, never ran out); at 128 KiB it
/// reads the same, and so do the other inputs.
const WAIT_MAX_AVX2: usize = 128 << 10;

/// The longest wait between the skip loop's tries of the skim, at the
/// level in use ([`WAIT_MAX`], [`WAIT_MAX_AVX2`]). Asked only after a try.
#[inline]
pub(crate) fn wait_max() -> usize {
    if scan::level() == scan::Level::Avx512 {
        WAIT_MAX
    } else {
        WAIT_MAX_AVX2
    }
}

/// The bytes of a skim's block: the skim never starts with fewer left.
pub(crate) const BLOCK: usize = 64;

/// Whether the skim runs: the level in use is AVX-512, or AVX2 on a CPU
/// whose BMI2 is quick ([`scan::fast_bmi2`]), and the environment does not
/// turn it off (`RESULTBUDGET_NO_SKIM`, read once, like the
/// level's own switches: for a side-by-side measurement, or should the
/// skim ever be suspected).
#[inline]
pub(crate) fn available() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    // 0 until read; then 1 (off) or 2 (on).
    static ON: AtomicU8 = AtomicU8::new(0);
    match ON.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let on = match scan::level() {
                scan::Level::Avx512 => true,
                scan::Level::Avx2 => scan::fast_bmi2(),
                _ => false,
            } && std::env::var_os("RESULTBUDGET_NO_SKIM").is_none();
            ON.store(if on { 2 } else { 1 }, Ordering::Relaxed);
            on
        }
    }
}

/// Skim `chunk` from `at` (between tokens, after `prev`, `depth` containers
/// open, `stack` their kinds) while whole blocks validate; `None` when not
/// even the first block was taken. `stack` is updated as the blocks taken
/// leave it. Runs only where [`available`].
#[inline(never)]
pub(crate) fn skim(
    chunk: &[u8],
    at: usize,
    prev: Prev,
    depth: u32,
    stack: &mut Vec<bool>,
    bounds: Bounds,
) -> Option<Skimmed> {
    let job = SkimJob::<true>::new(chunk, at, prev, depth, stack, bounds, false);
    scan::with_blocks(job)
}

/// [`skim`] at a given level, at any level (the portable one too): for the
/// tests, which hold each level to the same results.
#[cfg(test)]
pub(crate) fn skim_at(
    level: scan::Level,
    chunk: &[u8],
    at: usize,
    prev: Prev,
    depth: u32,
    stack: &mut Vec<bool>,
    bounds: Bounds,
) -> Option<Skimmed> {
    let job = SkimJob::<true>::new(chunk, at, prev, depth, stack, bounds, true);
    scan::with_blocks_at(level, job)
}

/// The skim as a [`BlockJob`]; `V`: run with VBMI2 where the CPU has it.
struct SkimJob<'a, const V: bool> {
    chunk: &'a [u8],
    at: usize,
    prev: Prev,
    depth: u32,
    stack: &'a mut Vec<bool>,
    bounds: Bounds,
    /// Run below AVX-512 too (tests).
    any_level: bool,
}

impl<'a, const V: bool> SkimJob<'a, V> {
    fn new(
        chunk: &'a [u8],
        at: usize,
        prev: Prev,
        depth: u32,
        stack: &'a mut Vec<bool>,
        bounds: Bounds,
        any_level: bool,
    ) -> SkimJob<'a, V> {
        SkimJob {
            chunk,
            at,
            prev,
            depth,
            stack,
            bounds,
            any_level,
        }
    }
}

impl<const V: bool> SkimJob<'_, V> {
    /// The block that ends the skim has fewer tokens than this: the level's
    /// own floor, or in the tests, where levels are held to each other,
    /// [`MIN_TOKENS`] at each.
    #[inline(always)]
    fn min_tokens<B: Blocks>(&self) -> u32 {
        if self.any_level {
            MIN_TOKENS
        } else {
            B::SKIM_MIN_TOKENS
        }
    }
}

impl<const V: bool> BlockJob for SkimJob<'_, V> {
    type Out = Option<Skimmed>;
    const VBMI2: bool = V;

    #[inline(always)]
    fn run<B: Blocks>(self, blocks: B) -> Option<Skimmed> {
        if !B::SKIM && !self.any_level {
            return None;
        }
        let mut st = Skimmed {
            end: self.at,
            prev: self.prev,
            depth: self.depth,
            count: 0,
            sparse: false,
        };
        while let Some(b) = self
            .chunk
            .get(st.end..)
            .and_then(|s| s.first_chunk::<BLOCK>())
        {
            scan::prefetch(self.chunk, st.end + scan::PREFETCH_AHEAD);
            let c = blocks.classes(b);
            match block(blocks, b, &c, 0, &mut st, self.stack, &self.bounds) {
                None => break,
                Some(tokens) if tokens < self.min_tokens::<B>() => {
                    st.sparse = true;
                    // Sparse for its whitespace (indentation), not for a
                    // long string: dense windows leave the whitespace out.
                    if (B::COMPRESS || self.any_level) && c.ws.count_ones() >= DENSE_WS {
                        dense(blocks, self.chunk, &mut st, self.stack, &self.bounds);
                    }
                    break;
                }
                Some(_) => {}
            }
        }
        (st.end > self.at).then_some(st)
    }
}

/// The first token after each token that ends at a bit of `x` (and after a
/// token just before the block, `before`), across the whitespace `ws`: the
/// bit after each end, carried to the end of the whitespace run it falls in.
#[inline(always)]
fn next_token(x: u64, before: bool, ws: u64) -> u64 {
    let y = (x << 1) | u64::from(before);
    (y & !ws) | ((y & ws).wrapping_add(ws) & !ws)
}

/// The bits of the runs of `run` that begin at a bit of `start` (each run
/// carries its start's bit to its end).
#[inline(always)]
fn runs_from(run: u64, start: u64) -> u64 {
    (run.wrapping_add(start) ^ run) & run
}

/// The token a cut's structural byte leaves as [`Skimmed::prev`]: a closer
/// ends a value.
const PREV_AFTER: [Prev; 256] = {
    let mut t = [Prev::ValueEnd; 256];
    t[b'{' as usize] = Prev::ObjOpen;
    t[b'[' as usize] = Prev::ArrOpen;
    t[b',' as usize] = Prev::Comma;
    t[b':' as usize] = Prev::Colon;
    t
};

/// Closers in a block with no opener from which [`monotone`] takes them at
/// once rather than one by one: below it the loop is as quick.
const CLOSER_RUN: u32 = 8;

/// The bracket step of a block in closed form, where that is quicker than
/// the bracket loop in [`block`]: what the loop would leave, or that it
/// would refuse the block.
enum Shape {
    /// Not such a block: the loop takes it.
    Loop,
    /// The loop would refuse the block (a bound).
    Refuse,
    /// The loop's state after the block's brackets.
    Taken(Walked),
}

/// The bracket loop's state after a block: `obj`, `lvl` and `depth` as
/// it leaves them, the stack's first `kept` entries kept, then `n_pushed`
/// pushed (bit `k` of `pushed`: the `k`-th is an object).
struct Walked {
    obj: u64,
    lvl: u64,
    depth: u32,
    kept: usize,
    pushed: u64,
    n_pushed: u32,
}

/// [`Shape`] for a block whose brackets (`opens`, `closers`; `lbrace` its
/// `{`) all open (the way into deep nesting) or, [`CLOSER_RUN`] or more,
/// all close (the way out), with `stack` the kinds of the `depth`
/// containers open before it. Other blocks are the loop's: on mixed
/// brackets (`canada.json`'s `],[`, a list's `},{`) a closed form read
/// slower than the loop (thirty-fifth round).
///
/// The kind innermost after each bracket, one bit each (`kv`: bit `j + 1`
/// after the `j`-th, bit 0 before the first), comes from the openers' own
/// kinds, or from the stack as the closers uncover it. The changes from
/// bracket to bracket are deposited on the brackets and, shifted past
/// them, carried along by a prefix XOR. A bit at a bracket holds the state
/// before it, as in the loop.
#[inline(always)]
fn monotone<B: Blocks>(
    blocks: B,
    lbrace: u64,
    opens: u64,
    closers: u64,
    stack: &[bool],
    depth: u32,
    bounds: &Bounds,
) -> Shape {
    let m = opens | closers;
    let n = m.count_ones();
    let kept = stack.len();
    let top = stack.last() == Some(&true);
    let (kv, walked) = if closers == 0 {
        // Each opener at its depth, `depth` up to `depth + n - 1`.
        if depth.saturating_add(n) > bounds.max_depth {
            return Shape::Refuse;
        }
        let braces = blocks.extract(lbrace, m);
        let walked = Walked {
            obj: 0,
            lvl: 0,
            depth: depth + n,
            kept,
            pushed: braces,
            n_pushed: n,
        };
        (u64::from(top) | (braces << 1), walked)
    } else if opens == 0 && n >= CLOSER_RUN && kept > n as usize {
        // Each closer at its depth, `depth` down to `depth - n + 1`.
        if depth < bounds.floor.saturating_add(n) {
            return Shape::Refuse;
        }
        // Bit `j`: the container innermost after `j` closers (to `j = 63`:
        // nothing follows a 64th).
        let from = kept - (n.min(63) as usize + 1);
        let kv = stack
            .get(from..)
            .unwrap_or_default()
            .iter()
            .rev()
            .enumerate()
            .fold(0u64, |kv, (j, &o)| kv | (u64::from(o) << j));
        let walked = Walked {
            obj: 0,
            lvl: 0,
            depth: depth - n,
            kept: kept - n as usize,
            pushed: 0,
            n_pushed: 0,
        };
        (kv, walked)
    } else {
        return Shape::Loop;
    };
    #[cfg(test)]
    tests::MONOTONE[usize::from(closers != 0)].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let changes = blocks.deposit(kv ^ (kv >> 1), m) << 1;
    let obj = blocks.prefix_xor(changes) ^ 0u64.wrapping_sub(kv & 1);
    // At depth `level`: the bytes after `r` brackets and up to the next.
    let r = if closers == 0 {
        bounds.level.checked_sub(depth)
    } else {
        depth.checked_sub(bounds.level)
    };
    let lvl = match r {
        Some(r) if r <= n => {
            let upto = |j: u32| {
                if j >= n {
                    !0
                } else {
                    (blocks.deposit(1 << j, m) << 1).wrapping_sub(1)
                }
            };
            upto(r) & !r.checked_sub(1).map_or(0, upto)
        }
        _ => 0,
    };
    Shape::Taken(Walked { obj, lvl, ..walked })
}

/// A block's tokens up to its cut, for [`grammar`]: the masks of its
/// brackets, colons, commas and quotes outside strings, the bytes inside
/// strings (`instr`) and the first and last bytes of its scalars (`s0`,
/// `s1`); `obj`: the bytes inside an object; `v`: the bytes taken; `prev`:
/// the token before the block.
struct Tokens {
    prev: Prev,
    obj: u64,
    v: u64,
    instr: u64,
    lbrace: u64,
    lbrack: u64,
    rbrace: u64,
    rbrack: u64,
    colon: u64,
    comma: u64,
    open_q: u64,
    close_q: u64,
    s0: u64,
    s1: u64,
}

/// What may follow each token, across the whitespace `ws`: the tokens that
/// break the rules (0 if none), and the opening quotes of keys. The token
/// before the block (`t.prev`) is a carry into the first.
#[inline(always)]
fn grammar(t: &Tokens, ws: u64) -> (u64, u64) {
    let p = t.prev;
    let in_obj = t.obj & 1 != 0;
    let value = t.open_q | t.s0 | t.lbrace | t.lbrack;
    let after_lbrace = next_token(t.lbrace, p == Prev::ObjOpen, ws) & t.v;
    let after_lbrack = next_token(t.lbrack, p == Prev::ArrOpen, ws) & t.v;
    // After `:` and after a `,` in an array alike: a value.
    let before_value = p == Prev::Colon || (p == Prev::Comma && !in_obj);
    let after_colon = next_token(t.colon | (t.comma & !t.obj), before_value, ws) & t.v;
    let after_obj_comma = next_token(t.comma & t.obj, p == Prev::Comma && in_obj, ws) & t.v;
    let key_open = (after_lbrace | after_obj_comma) & t.open_q;
    // A key's closing quote: its opening bit carried along the string.
    let key_close = t.instr.wrapping_add(key_open) & t.close_q;
    let after_key = next_token(key_close, p == Prev::KeyEnd, ws) & t.v;
    let ends = (t.close_q & !key_close) | t.s1 | t.rbrace | t.rbrack;
    let after_value = next_token(ends, p == Prev::ValueEnd, ws) & t.v;
    let bad = (after_lbrace & !(t.open_q | t.rbrace))
        | (after_lbrack & !(value | t.rbrack))
        | (after_colon & !value)
        | (after_obj_comma & !t.open_q)
        | (after_key & !t.colon)
        | (after_value & !(t.comma | t.rbrace | t.rbrack));
    (bad, key_open)
}

/// The input blocks a dense window may draw from; past this many the
/// window is taken short.
const DENSE_FROM: usize = 8;

/// The whitespace bytes a sparse block must hold for the skim to go on in
/// dense windows: fewer, and it is sparse for its long strings, which
/// dense windows do not shorten.
const DENSE_WS: u32 = 24;

/// The skim over sparse structure (indented JSON): each window of 64
/// bytes is gathered from the input with the whitespace outside strings
/// left out, then taken as a block ([`block`]), its cut mapped back to the
/// input. Each window starts right after the last one's cut, outside any
/// string, so the string state is carried only across the input blocks of
/// one window. Whitespace between two scalar bytes (`1 2`) would join
/// them: `block` refuses a window where it did (`gap`). Stops as [`skim`]
/// does, and on a window with fewer than [`MIN_TOKENS`] tokens.
#[inline(always)]
fn dense<B: Blocks>(
    blocks: B,
    chunk: &[u8],
    st: &mut Skimmed,
    stack: &mut Vec<bool>,
    bounds: &Bounds,
) {
    loop {
        let mut win = [b' '; 64];
        // Of each input block drawn: where it starts, its bytes kept, and
        // where in the window they start.
        let mut from = [(0usize, 0u64, usize::MAX); DENSE_FROM];
        let mut drawn = 0;
        let mut n = 0usize;
        let mut o = st.end;
        let (mut in_str, mut esc, mut dropped) = (0u64, 0u64, 0u64);
        let mut gap = 0u64;
        while n < 64 {
            let (Some(w), Some(f)) = (
                chunk.get(o..).and_then(|s| s.first_chunk::<64>()),
                from.get_mut(drawn),
            ) else {
                // The window is short, and the rest of it spaces.
                break;
            };
            let sp = blocks.spacing(w);
            let bs = sp.bslash & !esc;
            let leads = if bs == 0 { 0 } else { scan::escape_leads(bs) };
            let escaped = (leads << 1) | esc;
            esc = leads >> 63;
            let instr = blocks.prefix_xor(sp.quote & !escaped) ^ in_str;
            in_str = 0u64.wrapping_sub(instr >> 63);
            let drop = sp.ws & !instr;
            let keep = !drop;
            let g = keep & ((drop << 1) | dropped);
            dropped = drop >> 63;
            blocks.compress(&mut win, n, w, keep);
            gap |= blocks.extract(g, keep) << n;
            *f = (o, keep, n);
            drawn += 1;
            n += keep.count_ones() as usize;
            o += 64;
        }
        if n == 0 {
            return;
        }
        let c = blocks.classes(&win);
        let mut t = Skimmed { end: 0, ..*st };
        let Some(tokens) = block(blocks, &win, &c, gap, &mut t, stack, bounds) else {
            return;
        };
        // The cut, in the input: the `k`-th byte kept of the block it is in.
        let Some(cut) = t.end.checked_sub(1) else {
            return;
        };
        // Counted over all entries, not searched: how many blocks a window
        // draws from varies at random.
        let j = from.iter().filter(|f| f.2 <= cut).count();
        let Some(&(at, keep, d0)) = j.checked_sub(1).and_then(|j| from.get(j)) else {
            return;
        };
        let k = (cut - d0) as u32;
        let end = at + blocks.deposit(1u64 << k, keep).trailing_zeros() as usize + 1;
        #[cfg(test)]
        tests::DENSE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *st = Skimmed {
            end,
            sparse: tokens < MIN_TOKENS,
            ..t
        };
        if st.sparse {
            return;
        }
    }
}

/// Take the block `b` (classes `c`) after `st`, up to its cut, and say how
/// many tokens it held; `None` (and nothing changed) if it cannot be taken
/// whole. `gap`: the bytes that whitespace left out of a dense window
/// came before ([`dense`]; 0 for an input block).
#[inline(always)]
fn block<B: Blocks>(
    blocks: B,
    b: &[u8; 64],
    c: &Classes,
    gap: u64,
    st: &mut Skimmed,
    stack: &mut Vec<bool>,
    bounds: &Bounds,
) -> Option<u32> {
    // Escapes: the block starts between tokens, outside any escape.
    // On a branch: structure often has no backslash at all.
    let escaped = if c.bslash == 0 {
        0
    } else {
        scan::escape_leads(c.bslash) << 1
    };
    let quote = c.quote & !escaped;
    // Inside a string: from its opening quote up to (not with) its closing one.
    let instr = blocks.prefix_xor(quote);
    let ops = c.lbrace | c.rbrace | c.lbrack | c.rbrack | c.colon | c.comma;
    let ops_out = ops & !instr;
    if ops_out == 0 {
        return None;
    }
    let cut = 63 - ops_out.leading_zeros();
    // The bytes taken: up to the cut.
    let v = u64::MAX >> (63 - cut);
    let out = !instr & v;
    // Strings: no control byte, one-character escapes, valid UTF-8.
    let body = instr & !quote & v;
    if body & c.ctrl != 0 {
        return None;
    }
    // On a branch: structure often has no escape at all, and the letters
    // are asked for only where it has one (or a literal, below).
    let esc = escaped & instr & v;
    if esc != 0 {
        let l = blocks.letters(b);
        if esc & !(c.quote | c.bslash | l.slash | l.b | l.f | l.n | l.r | l.t) != 0 {
            return None;
        }
    }
    if c.high & v != 0 && blocks.utf8_flags([0; 3], b) & v != 0 {
        return None;
    }
    let ws = c.ws & out;
    let open_q = quote & instr & v;
    let close_q = quote & !instr & v;
    let lbrace = c.lbrace & out;
    let rbrace = c.rbrace & out;
    let lbrack = c.lbrack & out;
    let rbrack = c.rbrack & out;
    let colon = c.colon & out;
    let comma = c.comma & out;
    // Scalars: the other bytes outside strings, in runs.
    let sc = out & !quote & !c.ws & !ops;
    let s0 = sc & !(sc << 1);
    let s1 = sc & !(sc >> 1);
    // Two scalar bytes that whitespace kept apart: two tokens, not one.
    if gap & sc & (sc << 1) != 0 {
        return None;
    }
    // Numbers: the runs that begin with a digit or `-`.
    let dig = c.digit;
    let num = runs_from(sc, s0 & (dig | c.minus));
    let lit = sc & !num;
    let first_dig = (s0 & dig) | ((s0 & c.minus) << 1);
    let mut bad = (num & !(dig | c.minus | c.plus | c.dot | c.e | c.big_e))
        | (((first_dig & c.zero) << 1) & dig & num)
        | (s1 & num & !dig);
    let minus = c.minus & num;
    let dot = c.dot & num;
    let exp = (c.e | c.big_e) & num;
    let plus = c.plus & num;
    if (exp | plus | (minus & !s0)) != 0 {
        let signs = minus | plus;
        let after_dot = runs_from(num, dot << 1);
        let after_exp = runs_from(num, exp << 1);
        bad |= (minus & !(s0 | (exp << 1)))
            | (plus & !(exp << 1))
            | ((signs << 1) & !dig)
            | (dot & !(dig << 1))
            | ((dot << 1) & !dig)
            | (exp & !(dig << 1))
            | ((exp << 1) & !(dig | c.minus | c.plus))
            | (dot & after_dot)
            | ((dot | exp) & after_exp);
    } else {
        // The common shape, on a branch of its own: a `-` only first, at
        // most one dot, between digits; no exponent. Not on whether there
        // is a `-` or a dot: in a list that goes either way at random.
        bad |= ((minus << 1) & !dig)
            | (dot & !(dig << 1))
            | ((dot << 1) & !dig)
            | (dot & runs_from(num, dot << 1));
    }
    // Literals: each run spelled out whole.
    if lit != 0 {
        let l = blocks.literals(b, c.e);
        let ls = s0 & lit;
        let ends = ((ls & l.four) << 3) | ((ls & l.five) << 4);
        bad |= (ls & !(l.four | l.five)) | (ends ^ (s1 & lit));
    }
    if bad != 0 {
        return None;
    }
    // Brackets, one by one (or at once, by [`monotone`]): which container
    // each byte is in (`obj`), and which bytes are at the counted level
    // (`lvl`). A bit at a bracket holds the state before it. Pushes go to
    // `pushed` (bit k: the k-th container opened here and still open is an
    // object) and pops below them lower `kept`, so a block given back
    // leaves `stack` as it was.
    let mut depth = st.depth;
    let mut kept = stack.len();
    let mut pushed = 0u64;
    let mut n_pushed = 0u32;
    let mut obj = if stack.last() == Some(&true) { !0 } else { 0 };
    let mut lvl = if depth == bounds.level { !0 } else { 0 };
    let opens = lbrace | lbrack;
    let closers = rbrace | rbrack;
    let mut m = opens | closers;
    if m != 0 {
        match monotone(blocks, lbrace, opens, closers, stack, depth, bounds) {
            Shape::Loop => {}
            Shape::Refuse => return None,
            Shape::Taken(w) => {
                (obj, lvl, depth, kept) = (w.obj, w.lvl, w.depth, w.kept);
                (pushed, n_pushed) = (w.pushed, w.n_pushed);
                m = 0;
            }
        }
    }
    while m != 0 {
        let k = m.trailing_zeros();
        let bit = 1u64 << k;
        let after = (!0u64 << k) << 1;
        let inner = if opens & bit != 0 {
            if depth >= bounds.max_depth {
                return None;
            }
            let o = lbrace & bit != 0;
            pushed = (pushed & !(1 << n_pushed)) | (u64::from(o) << n_pushed);
            n_pushed += 1;
            depth += 1;
            o
        } else {
            if depth <= bounds.floor {
                return None;
            }
            if n_pushed > 0 {
                n_pushed -= 1;
            } else {
                kept = kept.saturating_sub(1);
            }
            depth -= 1;
            if n_pushed > 0 {
                (pushed >> (n_pushed - 1)) & 1 != 0
            } else {
                kept.checked_sub(1).and_then(|j| stack.get(j)) == Some(&true)
            }
        };
        obj = if inner { obj | after } else { obj & !after };
        lvl = if depth == bounds.level {
            lvl | after
        } else {
            lvl & !after
        };
        m &= m - 1;
    }
    // Each closer closes its own kind.
    if (rbrace & !obj) | (rbrack & obj) != 0 {
        return None;
    }
    // Grammar: what may follow each token. Compact structure (what MCP
    // peers write) has no whitespace to carry across, and with none the
    // carries fold away: the rules compiled twice, on a branch.
    let t = Tokens {
        prev: st.prev,
        obj,
        v,
        instr,
        lbrace,
        lbrack,
        rbrace,
        rbrack,
        colon,
        comma,
        open_q,
        close_q,
        s0,
        s1,
    };
    let (bad, key_open) = if ws == 0 {
        grammar(&t, 0)
    } else {
        grammar(&t, ws)
    };
    if bad != 0 {
        return None;
    }
    let value = open_q | s0 | lbrace | lbrack;
    let counted = value & !key_open & lvl;
    if bounds.one && counted != 0 {
        return None;
    }
    // Taken: commit.
    stack.truncate(kept);
    // In one `extend` (one capacity check, then the writes), not a `push`
    // a bracket: with the push loop every skimmed input read 3–9% slower
    // over four placements (forty-eighth round), though no block grew
    // the stack.
    stack.extend((0..n_pushed).map(|k| (pushed >> k) & 1 != 0));
    st.depth = depth;
    st.count += u64::from(counted.count_ones());
    // By a lookup: the cut's byte varies from block to block, and a chain
    // of branches on it went either way at random.
    st.prev = b
        .get(cut as usize)
        .map_or(Prev::ValueEnd, |&x| PREV_AFTER[x as usize]);
    st.end += cut as usize + 1;
    Some((ops_out & v).count_ones() + open_q.count_ones() + s0.count_ones())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::Level;

    /// The levels to hold to each other: the portable classes, the AVX2
    /// ones and the AVX-512 ones (where the CPU has them; else that run is
    /// at the best level it has).
    const LEVELS: [Level; 3] = [Level::Portable, Level::Avx2, Level::Avx512];

    struct ClassesJob<'a>(&'a [u8; 64]);

    impl BlockJob for ClassesJob<'_> {
        type Out = (Classes, scan::Letters);
        fn run<B: Blocks>(self, blocks: B) -> Self::Out {
            (blocks.classes(self.0), blocks.letters(self.0))
        }
    }

    struct LiteralsJob<'a>(&'a [u8; 64]);

    impl BlockJob for LiteralsJob<'_> {
        type Out = scan::Literals;
        fn run<B: Blocks>(self, blocks: B) -> Self::Out {
            blocks.literals(self.0, blocks.classes(self.0).e)
        }
    }

    /// Each level finds the literals its oracle finds: blocks strung from
    /// literals, their near misses and cut-off starts, letters and other
    /// bytes, so that literals cross the 16- and 32-byte lanes and run off
    /// the block's end.
    #[test]
    fn literals_match_their_oracle() {
        const PIECES: [&[u8]; 16] = [
            b"true", b"null", b"false", b"tru", b"nul", b"fals", b"truee", b"nulll", b"trUe",
            b"fa1se", b"e", b"l", b",", b"\"", b" ", b"\xe9",
        ];
        let mut seed = 0x9E37_79B9_7F4A_7C15;
        let (mut four, mut five) = (0u32, 0u32);
        for _ in 0..20_000 {
            let mut v = Vec::with_capacity(80);
            while v.len() < 64 {
                let r = xorshift(&mut seed);
                v.extend_from_slice(PIECES[(r % 16) as usize]);
            }
            let mut b = [0u8; 64];
            // Start anywhere in the first piece, so that the pieces fall
            // at every offset.
            let skip = (xorshift(&mut seed) % 4) as usize;
            for (x, y) in b.iter_mut().zip(v.iter().skip(skip)) {
                *x = *y;
            }
            let want = scan::literals_naive(&b);
            four += want.four.count_ones();
            five += want.five.count_ones();
            for level in LEVELS {
                assert_eq!(scan::with_blocks_at(level, LiteralsJob(&b)), want, "{b:?}");
            }
        }
        // The blocks held literals to find.
        assert!(four > 10_000 && five > 5_000, "{four} {five}");
    }

    fn xorshift(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    #[test]
    fn classes_match_their_oracle() {
        let mut seed = 0x2545_F491_4F6C_DD1D;
        for round in 0..20_000 {
            let mut b = [0u8; 64];
            for x in b.iter_mut() {
                let r = xorshift(&mut seed);
                // A third of the rounds any byte, a third JSON's own bytes,
                // a third those without the classes most blocks lack (a
                // backslash, `+`, `E`, a control or high byte), which the
                // AVX2 classes skip when none is there.
                *x = match round % 3 {
                    0 => r as u8,
                    1 => {
                        b"{}[]:,\"\\ \t\n\r0123456789-+.eEtrufalsnb/x\x01\x7f\xc3\xa9"
                            [(r % 38) as usize]
                    }
                    _ => b"{}[]:,\" \t\n\r0123456789-.etrufalsnb/x\x7f"[(r % 36) as usize],
                };
            }
            // And in some of those, one of them at any place.
            if round % 3 == 2 && round % 2 == 0 {
                let r = xorshift(&mut seed);
                if let Some(x) = b.get_mut((r % 64) as usize) {
                    *x = b"\\+E\x01\x1f\x80\xff"[((r >> 8) % 7) as usize];
                }
            }
            let want = (scan::classes_naive(&b), scan::letters_naive(&b));
            for level in [Level::Avx2, Level::Avx512] {
                assert_eq!(scan::with_blocks_at(level, ClassesJob(&b)), want, "{b:?}");
            }
        }
    }

    /// A slow twin: the bytes `s[at..end]` read one by one from the same
    /// state; `Some` (the state at `end`, and the values started at
    /// `bounds.level`) only if every byte is valid and within `bounds`, and
    /// `end` is just after a structural byte.
    fn reference(
        s: &[u8],
        at: usize,
        end: usize,
        prev: Prev,
        stack: &[bool],
        bounds: Bounds,
    ) -> Option<(Prev, Vec<bool>, u64)> {
        let mut st = stack.to_vec();
        let mut p = prev;
        let mut i = at;
        let mut count = 0;
        let mut last_op = false;
        while i < end {
            let b = *s.get(i)?;
            let depth = st.len() as u32;
            let in_obj = st.last() == Some(&true);
            if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                i += 1;
                last_op = false;
                continue;
            }
            let value_ok = p == Prev::ArrOpen || p == Prev::Colon || (p == Prev::Comma && !in_obj);
            let key_ok = p == Prev::ObjOpen || (p == Prev::Comma && in_obj);
            let starts_value = value_ok && !matches!(b, b'}' | b']' | b',' | b':');
            if starts_value && depth == bounds.level {
                if bounds.one {
                    return None;
                }
                count += 1;
            }
            last_op = matches!(b, b'{' | b'[' | b'}' | b']' | b',' | b':');
            match b {
                b'{' | b'[' => {
                    if !value_ok || depth >= bounds.max_depth {
                        return None;
                    }
                    st.push(b == b'{');
                    p = if b == b'{' {
                        Prev::ObjOpen
                    } else {
                        Prev::ArrOpen
                    };
                    i += 1;
                }
                b'}' | b']' => {
                    let ok = p == Prev::ValueEnd
                        || (p == Prev::ObjOpen && b == b'}')
                        || (p == Prev::ArrOpen && b == b']');
                    if !ok || st.last() != Some(&(b == b'}')) || depth <= bounds.floor {
                        return None;
                    }
                    st.pop();
                    p = Prev::ValueEnd;
                    i += 1;
                }
                b',' => {
                    if p != Prev::ValueEnd {
                        return None;
                    }
                    p = Prev::Comma;
                    i += 1;
                }
                b':' => {
                    if p != Prev::KeyEnd {
                        return None;
                    }
                    p = Prev::Colon;
                    i += 1;
                }
                b'"' => {
                    if !key_ok && !value_ok {
                        return None;
                    }
                    let close = (i + 1..end).find(|&j| {
                        s.get(j) == Some(&b'"')
                            && s[i + 1..j]
                                .iter()
                                .rev()
                                .take_while(|&&c| c == b'\\')
                                .count()
                                % 2
                                == 0
                    })?;
                    let text = std::str::from_utf8(s.get(i..=close)?).ok()?;
                    if serde_json::from_str::<String>(text).is_err() {
                        return None;
                    }
                    // The skim leaves `\u` escapes to the byte-wise loop.
                    let mut k = i + 1;
                    while k < close {
                        if s[k] == b'\\' {
                            if s[k + 1] == b'u' {
                                return None;
                            }
                            k += 1;
                        }
                        k += 1;
                    }
                    i = close + 1;
                    p = if key_ok { Prev::KeyEnd } else { Prev::ValueEnd };
                }
                _ => {
                    if !value_ok {
                        return None;
                    }
                    let from = i;
                    while i < end
                        && !matches!(
                            s[i],
                            b' ' | b'\t'
                                | b'\n'
                                | b'\r'
                                | b'{'
                                | b'}'
                                | b'['
                                | b']'
                                | b':'
                                | b','
                                | b'"'
                        )
                    {
                        i += 1;
                    }
                    let tok = &s[from..i];
                    let ok = matches!(tok, b"true" | b"false" | b"null")
                        || (tok
                            .iter()
                            .all(|c| c.is_ascii_digit() || b"-+.eE".contains(c))
                            && serde_json::from_slice::<serde_json::Value>(tok)
                                .is_ok_and(|v| v.is_number()));
                    if !ok {
                        return None;
                    }
                    p = Prev::ValueEnd;
                }
            }
        }
        last_op.then_some((p, st, count))
    }

    /// Blocks whose brackets [`monotone`] took in closed form in all tests
    /// so far, opening and closing: the twin test asks that its documents
    /// reach both.
    pub(super) static MONOTONE: [std::sync::atomic::AtomicUsize; 2] = [
        std::sync::atomic::AtomicUsize::new(0),
        std::sync::atomic::AtomicUsize::new(0),
    ];

    /// Dense windows taken in all tests so far: the dense twin test asks
    /// that its documents reach them.
    pub(super) static DENSE: std::sync::atomic::AtomicUsize =
        std::sync::atomic::AtomicUsize::new(0);

    const BOUNDS: Bounds = Bounds {
        level: 1,
        floor: 1,
        max_depth: 24,
        one: false,
    };

    fn bases() -> Vec<Vec<u8>> {
        let mut list = b"[".to_vec();
        for i in 0..30 {
            if i > 0 {
                list.push(b',');
            }
            list.extend_from_slice(
                format!(
                    "{{\"id\":{i},\"name\":\"item-{i}\",\"price\":{}.{:02},\"tags\":[\"red\",\"blue\"],\"active\":{},\"owner\":null}}",
                    i * 37 % 1000,
                    i % 100,
                    i % 3 == 0
                )
                .as_bytes(),
            );
        }
        list.push(b']');
        let mixed = r#"[{"a":[1,2.5e-3,-0,true,false,null,"x\"y\\z\n\/"],"b":{"c":{},"d":[]}} , [ [ ] , { } ] ,"s" , 1E+5 , 0.25 , {"k" : "v" , "l" :[ "m" ]},
  {"caf\u00e9":"caf\u00e9","é":"ü€𝄞","n":-12.5E-07, "deep":[[[[{"x":[[[]]]}]]]]},
  {"a":[1,2.5e-3,-0,true,false,null,"x\"y\\z\n"],"b":{"c":{},"d":[]}} , [ [ ] , { } ] ,"s" , 1E+5 , 0.25 , {"k" : "v" , "l" :[ "m" ]}, 1]"#;
        // Nesting 19 deep, its closers in one run that a block boundary
        // splits with more than 8 left: a block that closes many and opens
        // nothing.
        let mut deep = b"[".to_vec();
        let mut closers = Vec::new();
        for i in 0..18 {
            if i % 3 == 1 {
                deep.extend_from_slice(b"{\"k\":");
                closers.push(b'}');
            } else {
                deep.push(b'[');
                closers.push(b']');
            }
        }
        deep.extend_from_slice(b"\"pad-pad-pa\",null");
        // Values between the closers, and one at the counted level after
        // them: each counted only where the depth is right.
        for (idx, &c) in closers.iter().enumerate().rev() {
            deep.push(c);
            if idx % 4 == 1 && closers.get(idx - 1) == Some(&b']') {
                deep.extend_from_slice(b",5");
            }
        }
        deep.extend_from_slice(format!(",7,\"{}\"]", "x".repeat(70)).as_bytes());
        // Rings of points, as in `canada.json`, and a ring of small
        // objects: blocks whose brackets alternate, from an opener or a
        // closer, and only a few levels deep, for the bounds to cross.
        let mut rings = b"[".to_vec();
        for i in 0..6 {
            if i > 0 {
                rings.push(b',');
            }
            rings.push(b'[');
            for j in 0..12 {
                if j > 0 {
                    rings.push(b',');
                }
                let (a, b) = (i * 37 + j * 11, j * 7919 % 1000);
                let point = if i % 3 == 2 {
                    format!("{{\"p\":-{a}.{b}}}")
                } else {
                    format!("[-{a}.{b:03}91,{b}.{a}]")
                };
                rings.extend_from_slice(point.as_bytes());
            }
            rings.push(b']');
        }
        rings.push(b']');
        vec![list, mixed.as_bytes().to_vec(), deep, rings]
    }

    /// Up to three one-byte changes to `d`, each a byte of `alphabet` put
    /// over one, put in, or a byte taken out.
    fn mutate(d: &mut Vec<u8>, seed: &mut u64, alphabet: &[u8]) {
        for _ in 0..(xorshift(seed) % 4) {
            let at = (xorshift(seed) as usize) % d.len();
            let ch = alphabet[(xorshift(seed) as usize) % alphabet.len()];
            match xorshift(seed) % 3 {
                0 => d[at] = ch,
                1 => d.insert(at, ch),
                _ => {
                    d.remove(at);
                }
            }
        }
    }

    /// Skim `d` from `start` at each level: whatever is taken, the slow
    /// twin takes too, with the same state, stack and count; a try that
    /// takes nothing leaves the stack alone; the levels agree, and so does
    /// the AVX-512 skim without VBMI2. Whether anything was taken.
    fn skims_as_its_twin(
        d: &[u8],
        start: usize,
        prev: Prev,
        stack0: &[bool],
        bounds: Bounds,
    ) -> bool {
        let mut outs = Vec::new();
        for level in LEVELS {
            let mut stack = stack0.to_vec();
            let depth = stack.len() as u32;
            let got = skim_at(level, d, start, prev, depth, &mut stack, bounds);
            if let Some(t) = got {
                let want = reference(d, start, t.end, prev, stack0, bounds);
                assert_eq!(
                    want,
                    Some((t.prev, stack.clone(), t.count)),
                    "{level:?} took {}..{} of {}",
                    start,
                    t.end,
                    String::from_utf8_lossy(d)
                );
                assert_eq!(t.depth as usize, stack.len());
            } else {
                assert_eq!(stack, stack0, "a block not taken changed the stack");
            }
            outs.push((got, stack));
        }
        // The AVX-512 skim as a CPU without VBMI2 runs it, its dense
        // windows gathered by the portable compress (in use they do not
        // run there).
        let mut stack = stack0.to_vec();
        let depth = stack.len() as u32;
        let job = SkimJob::<false>::new(d, start, prev, depth, &mut stack, bounds, true);
        let got = scan::with_blocks_at(Level::Avx512, job);
        outs.push((got, stack));
        assert!(
            outs.iter().all(|o| *o == outs[0]),
            "levels disagree on {}",
            String::from_utf8_lossy(d)
        );
        outs[0].0.is_some()
    }

    /// Whatever the skim takes, the slow twin takes too, and reaches the
    /// same state, stack and count; the two levels agree byte for byte.
    #[test]
    fn the_skim_takes_only_what_its_twin_takes() {
        let mut seed = 0x9E37_79B9_7F4A_7C15;
        let alphabet = b"{}[]:,\"\\ \t\n0123456789-+.eEtrufalsnb/xu\x01\x7f\xc3\xa9";
        let bases = bases();
        let (mut tried, mut taken) = (0, 0);
        for round in 0..40_000u64 {
            let mut d = bases[(round % 4) as usize].clone();
            mutate(&mut d, &mut seed, alphabet);
            if d.first() != Some(&b'[') {
                continue;
            }
            // Start at every one of the first few token boundaries the
            // skim could be handed, as the skip loop hands them.
            let start = 1 + (round as usize / 2) % 3;
            let Some(prev) = (match d.get(start - 1) {
                Some(b'[') => Some(Prev::ArrOpen),
                Some(b'{') => Some(Prev::ObjOpen),
                _ => None,
            }) else {
                continue;
            };
            let stack0: Vec<bool> = d
                .get(..start)
                .unwrap_or_default()
                .iter()
                .filter_map(|&c| match c {
                    b'[' => Some(false),
                    b'{' => Some(true),
                    _ => None,
                })
                .collect();
            if stack0.len() != start {
                continue;
            }
            tried += 1;
            // The bounds vary too, across the depths each document
            // reaches: the deep one each depth limit from 12 to 24 on the
            // way in and each floor from 0 to 12 on the way out, the rings
            // limits from 2 to 5 and floors from 0 to 3. The counted level
            // is any of the first five.
            let (r5, r7) = (round as u32 / 5, round as u32 / 7);
            let (floor, max_depth) = match round % 4 {
                2 => (r7 % 13, 12 + r5 % 13),
                3 => (r7 % 4, 2 + r5 % 4),
                _ => (1, 12 + r5 % 13),
            };
            let bounds = Bounds {
                level: 1 + (round as u32 / 3) % 5,
                floor,
                max_depth,
                ..BOUNDS
            };
            if skims_as_its_twin(&d, start, prev, &stack0, bounds) {
                taken += 1;
            }
        }
        // Not vacuous: most documents (few mutations, early in them or not
        // at all) are taken at least in part.
        assert!(
            tried > 20_000 && taken > tried / 2,
            "tried {tried}, taken {taken}"
        );
        let taken = MONOTONE
            .each_ref()
            .map(|n| n.load(std::sync::atomic::Ordering::Relaxed));
        assert!(
            taken.iter().all(|&n| n > 500),
            "opening, closing: {taken:?}"
        );
    }

    /// `d` indented: each token on a line of its own, `indent` per level,
    /// lines ended by `nl`, a space after each `:` (whitespace outside
    /// strings replaced, strings as they were).
    fn indented(d: &[u8], indent: &str, nl: &str) -> Vec<u8> {
        let mut out = Vec::new();
        let (mut level, mut in_str, mut esc) = (0usize, false, false);
        let line = |out: &mut Vec<u8>, level: usize| {
            out.extend_from_slice(nl.as_bytes());
            out.extend_from_slice(indent.repeat(level).as_bytes());
        };
        for &c in d {
            if in_str {
                out.push(c);
                (in_str, esc) = (esc || c != b'"', !esc && c == b'\\');
                continue;
            }
            match c {
                b' ' | b'\t' | b'\n' | b'\r' => {}
                b'{' | b'[' => {
                    out.push(c);
                    level += 1;
                    line(&mut out, level);
                }
                b'}' | b']' => {
                    level = level.saturating_sub(1);
                    line(&mut out, level);
                    out.push(c);
                }
                b',' => {
                    out.push(c);
                    line(&mut out, level);
                }
                b':' => out.extend_from_slice(b": "),
                b'"' => {
                    out.push(c);
                    in_str = true;
                }
                _ => out.push(c),
            }
        }
        out
    }

    /// The twin test on indented documents, where blocks are sparse and the
    /// skim goes on in dense windows ([`dense`]): whatever it takes, the
    /// slow twin takes too, with the same state; the levels agree. The
    /// mutations favour whitespace, inside scalars too (`1 2` must not read
    /// as `12`).
    #[test]
    fn dense_windows_take_only_what_the_twin_takes() {
        let mut seed = 0x0DE5_E0DE_5E00_0001;
        let alphabet = b"{}[]:,\"\\ \t\n\r  0123456789-+.eEtrufalsnb/xu\x01\xc3\xa9";
        let styles = [
            ("  ", "\n"),
            ("\t", "\r\n"),
            ("    ", "\n"),
            (" ", ""),
            (&" ".repeat(40), "\n"),
        ];
        let bases: Vec<Vec<u8>> = bases()
            .iter()
            .flat_map(|b| styles.iter().map(|(i, nl)| indented(b, i, nl)))
            .collect();
        let dense_before = DENSE.load(std::sync::atomic::Ordering::Relaxed);
        let (mut tried, mut taken) = (0, 0);
        for round in 0..20_000u64 {
            let mut d = bases[(round % bases.len() as u64) as usize].clone();
            mutate(&mut d, &mut seed, alphabet);
            // After the first one to three tokens, each an opener.
            let k = 1 + (round as usize / 2) % 3;
            let Some((start, stack0)) = d
                .iter()
                .enumerate()
                .filter(|(_, c)| !matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
                .take(k)
                .try_fold((0, Vec::new()), |(_, mut st), (i, &c)| {
                    st.push(match c {
                        b'{' => true,
                        b'[' => false,
                        _ => return None,
                    });
                    Some((i + 1, st))
                })
            else {
                continue;
            };
            if stack0.len() != k {
                continue;
            }
            let prev = if stack0.last() == Some(&true) {
                Prev::ObjOpen
            } else {
                Prev::ArrOpen
            };
            tried += 1;
            let bounds = Bounds {
                level: 1 + (round as u32 / 3) % 5,
                floor: (round as u32 / 7) % 3,
                max_depth: 4 + (round as u32 / 5) % 20,
                ..BOUNDS
            };
            if skims_as_its_twin(&d, start, prev, &stack0, bounds) {
                taken += 1;
            }
        }
        let dense = DENSE.load(std::sync::atomic::Ordering::Relaxed) - dense_before;
        assert!(
            tried > 10_000 && taken > tried / 2 && dense > 20_000,
            "tried {tried}, taken {taken}, dense windows {dense}"
        );
    }

    /// A dense window never joins two scalars that whitespace keeps apart:
    /// the skim stops before the window that holds them, and takes the
    /// windows before it.
    #[test]
    fn whitespace_between_scalars_is_not_dropped() {
        for bad in [
            "1 2", "- 1", "1 .5", "1. 5", "1e +5", "tr ue", "nul l", "0 0", "1\n2",
        ] {
            for pad in [0, 1, 7, 33] {
                // Indented deep enough that a block holds fewer than
                // `MIN_TOKENS` tokens.
                let line = format!("\n{}", " ".repeat(24));
                let mut d = b"[".to_vec();
                d.extend_from_slice(" ".repeat(pad).as_bytes());
                for i in 0..40 {
                    d.extend_from_slice(format!("{line}{i},").as_bytes());
                }
                let bad_at = d.len() + line.len();
                d.extend_from_slice(format!("{line}{bad},").as_bytes());
                for i in 0..40 {
                    d.extend_from_slice(format!("{line}{i},").as_bytes());
                }
                d.extend_from_slice(format!("{line}0\n]").as_bytes());
                for level in LEVELS {
                    let mut stack = vec![false];
                    let t = skim_at(level, &d, 1, Prev::ArrOpen, 1, &mut stack, BOUNDS)
                        .expect("the numbers before are taken");
                    let want = reference(&d, 1, t.end, Prev::ArrOpen, &[false], BOUNDS);
                    assert_eq!(want, Some((t.prev, stack, t.count)), "{bad} at {level:?}");
                    assert!(t.end <= bad_at, "{bad} at {level:?}: took up to {}", t.end);
                    assert!(
                        t.end + 4 * BLOCK > bad_at,
                        "{bad} at {level:?}: stopped at {}",
                        t.end
                    );
                }
                assert!(DENSE.load(std::sync::atomic::Ordering::Relaxed) > 0);
            }
        }
    }

    /// A dense window's string state carried across the input blocks it
    /// draws from: an escaped quote or a backslash run at every offset from
    /// a block's end, then a raw tab inside the same string (not JSON
    /// whitespace there: the string is invalid) or a space (valid). The
    /// skim takes what its twin takes, and never the invalid string.
    #[test]
    fn escapes_across_input_blocks_keep_the_string_state() {
        let mut cases = Vec::new();
        for inner in [
            "\\\" \t ",
            "\\\\\t",
            "\\\\\\\"\t",
            "\\\" \" x",
            "\\\\ ",
            "\\\"\n",
        ] {
            // Lines so sparse that each input block holds about one, and
            // the string at each offset in a window's blocks.
            for (width, pad) in (40..104).flat_map(|w| (0..8).map(move |p| (w, p))) {
                cases.push((inner, width, pad));
            }
        }
        let mut taken = 0;
        for (inner, width, pad) in cases {
            let line = format!("\n{}", " ".repeat(width));
            {
                let mut d = b"[".to_vec();
                for i in 0..6 {
                    d.extend_from_slice(format!("{line}{i},").as_bytes());
                }
                let bad_at = d.len() + line.len();
                d.extend_from_slice(format!("{line}\"{}{inner}\",", "a".repeat(pad)).as_bytes());
                for i in 0..30 {
                    d.extend_from_slice(format!("{line}{i},").as_bytes());
                }
                d.extend_from_slice(format!("{line}0\n]").as_bytes());
                let valid = serde_json::from_slice::<serde_json::Value>(&d).is_ok();
                for level in LEVELS {
                    let mut stack = vec![false];
                    let got = skim_at(level, &d, 1, Prev::ArrOpen, 1, &mut stack, BOUNDS);
                    let Some(t) = got else {
                        // A first block of whitespace only: nothing to cut at.
                        assert!(width > 60, "{inner:?} {width} {pad} {level:?}");
                        continue;
                    };
                    let want = reference(&d, 1, t.end, Prev::ArrOpen, &[false], BOUNDS);
                    let at = format!("{inner:?} {width} {pad} {level:?}");
                    assert_eq!(want, Some((t.prev, stack, t.count)), "{at}");
                    assert!(valid || t.end <= bad_at, "{at}: {}", t.end);
                    taken += 1;
                }
            }
        }
        assert!(taken > 1500, "{taken}");
    }

    /// The unmutated inputs are taken to their last whole block, with the
    /// right count of the list's items.
    #[test]
    fn a_list_is_taken_to_its_last_block() {
        let bases = bases();
        let list = &bases[0];
        for level in LEVELS {
            let mut stack = vec![false];
            let t = skim_at(level, list, 1, Prev::ArrOpen, 1, &mut stack, BOUNDS)
                .expect("the list is taken");
            assert!(t.end + BLOCK > list.len(), "{} of {}", t.end, list.len());
            let want = reference(list, 1, t.end, Prev::ArrOpen, &[false], BOUNDS);
            assert_eq!(want, Some((t.prev, stack, t.count)));
            assert!(t.count >= 25, "{}", t.count);
        }
        // With whitespace between the tokens (the grammar's carries across
        // it, on their own branch), every block is still taken, however few
        // tokens it has: the first at least, and what is taken is right.
        let spaced: Vec<u8> = String::from_utf8_lossy(list)
            .replace(",\"", ", \"")
            .replace("\":", "\" :\t")
            .into_bytes();
        for level in LEVELS {
            let mut stack = vec![false];
            let t = skim_at(level, &spaced, 1, Prev::ArrOpen, 1, &mut stack, BOUNDS)
                .expect("the spaced list is taken");
            assert!(t.end > BLOCK / 2, "{}", t.end);
            let want = reference(&spaced, 1, t.end, Prev::ArrOpen, &[false], BOUNDS);
            assert_eq!(want, Some((t.prev, stack, t.count)));
        }
    }

    /// An indented list is taken by dense windows to its end, each window
    /// gathered from right after the last one's cut: a byte lost or added
    /// at that seam splits or joins the numbers, and the skim stops.
    #[test]
    fn dense_windows_take_an_indented_list_to_its_end() {
        for (indent, item) in [(24, "12345,"), (31, "\"abc\","), (50, "-7.25,")] {
            let d = indented(
                format!("[{}0]", item.repeat(400)).as_bytes(),
                &" ".repeat(indent),
                "\n",
            );
            // Each item's line: a newline, the indent, the item.
            let line_len = 1 + indent + item.len();
            for level in LEVELS {
                let dense_before = DENSE.load(std::sync::atomic::Ordering::Relaxed);
                let mut stack = vec![false];
                let t = skim_at(level, &d, 1, Prev::ArrOpen, 1, &mut stack, BOUNDS)
                    .expect("the list is taken");
                let want = reference(&d, 1, t.end, Prev::ArrOpen, &[false], BOUNDS);
                assert_eq!(want, Some((t.prev, stack, t.count)), "{item} at {level:?}");
                // The last window is short of tokens where the chunk ends.
                let rest = d.len() - t.end;
                assert!(rest < 2 * line_len * 8, "{item} at {level:?}: {rest} left");
                assert!(t.count >= 390, "{item} at {level:?}: {}", t.count);
                let dense = DENSE.load(std::sync::atomic::Ordering::Relaxed) - dense_before;
                assert!(dense >= 400 * item.len() / 64, "{item}: {dense} windows");
            }
        }
    }

    /// Whitespace runs of any length between tokens, many blocks long too:
    /// a window's bytes then come from blocks far apart (past
    /// [`DENSE_FROM`] of them the window is taken short), and scalars that
    /// only whitespace keeps apart may stand anywhere in a later window.
    /// The skim takes only what its twin takes.
    #[test]
    fn dense_windows_hold_across_long_whitespace() {
        let mut seed = 0x10A6_5BAC_E5EE_D001_u64;
        let runs = [0usize, 1, 2, 5, 24, 40, 63, 64, 65, 130, 300, 520, 700];
        let values: [&str; 10] = [
            "1",
            "23",
            "-4.5",
            "true",
            "null",
            "\"ab\"",
            "\"k\\\"\"",
            "[]",
            "{}",
            "6e2",
        ];
        let dense_before = DENSE.load(std::sync::atomic::Ordering::Relaxed);
        let (mut taken, mut far) = (0, 0);
        for round in 0..4_000u64 {
            let mut pick = |n: usize| (xorshift(&mut seed) % n as u64) as usize;
            // Runs short or long for a whole document, so that some windows
            // hold many tokens and some draw from many blocks.
            let long = round % 3 == 0;
            let ws = |pick: &mut dyn FnMut(usize) -> usize| {
                let r = runs[if long { pick(runs.len()) } else { pick(6) }];
                " ".repeat(r)
            };
            let mut d = String::from("[");
            let items = 20 + pick(60);
            let joined = (round % 4 == 1).then(|| pick(items));
            for i in 0..items {
                if i > 0 {
                    d.push_str(&ws(&mut pick));
                    d.push(',');
                }
                d.push_str(&ws(&mut pick));
                if joined == Some(i) {
                    d.push_str(&format!("1{}2", " ".repeat(1 + pick(3))));
                } else if pick(6) == 0 {
                    d.push_str(&format!("{{\"k\":{}{}}}", ws(&mut pick), values[pick(10)]));
                } else {
                    d.push_str(values[pick(10)]);
                }
            }
            d.push_str(&ws(&mut pick));
            d.push(']');
            if d.len() > 4_000 {
                far += 1;
            }
            let bounds = Bounds {
                level: 1,
                floor: 0,
                max_depth: 8,
                one: false,
            };
            if skims_as_its_twin(d.as_bytes(), 1, Prev::ArrOpen, &[false], bounds) {
                taken += 1;
            }
        }
        let dense = DENSE.load(std::sync::atomic::Ordering::Relaxed) - dense_before;
        assert!(
            taken > 2_000 && far > 500 && dense > 20_000,
            "taken {taken}, far {far}, dense windows {dense}"
        );
    }

    /// What the skim must leave to the byte-wise loop: the closer that ends
    /// the skip, the depth limit, a value `skip_one` opens itself, a `\u`
    /// escape, a string longer than a block, invalid bytes.
    #[test]
    fn the_skim_stops_before_what_it_must_not_take() {
        let pad = |inner: &str| {
            let mut d = b"[".to_vec();
            d.extend_from_slice("1,".repeat(40).as_bytes());
            d.extend_from_slice(inner.as_bytes());
            d.extend_from_slice("1,".repeat(40).as_bytes());
            d.extend_from_slice(b"2]");
            d
        };
        let cases: [(&str, Bounds, Vec<u8>); 6] = [
            (
                "the skip's end",
                Bounds {
                    level: 2,
                    floor: 2,
                    ..BOUNDS
                },
                {
                    let mut d = b"[[".to_vec();
                    d.extend_from_slice("1,".repeat(50).as_bytes());
                    d.extend_from_slice(b"1],");
                    d.extend_from_slice("1,".repeat(50).as_bytes());
                    d.extend_from_slice(b"2]");
                    d
                },
            ),
            (
                "depth",
                Bounds {
                    max_depth: 3,
                    ..BOUNDS
                },
                pad("[[[1]]],"),
            ),
            (
                "skip_one",
                Bounds {
                    one: true,
                    floor: 2,
                    ..BOUNDS
                },
                pad(""),
            ),
            ("\\u", BOUNDS, pad("\"\\u0041\",")),
            (
                "long string",
                BOUNDS,
                pad(&format!("\"{}\",", "x".repeat(70))),
            ),
            ("invalid", BOUNDS, pad("01,")),
        ];
        for (what, bounds, d) in cases {
            let start = if what == "the skip's end" { 2 } else { 1 };
            let prev = Prev::ArrOpen;
            let stack0 = vec![false; start];
            // Where the bytes the skim must not take begin.
            let bad_at = match what {
                "the skip's end" => 103,
                "skip_one" => 1,
                _ => 81,
            };
            for level in LEVELS {
                let mut stack = stack0.clone();
                let depth = start as u32;
                let got = skim_at(level, &d, start, prev, depth, &mut stack, bounds);
                let end = got.map_or(start, |t| t.end);
                if let Some(t) = got {
                    let want = reference(&d, start, t.end, prev, &stack0, bounds);
                    assert_eq!(want, Some((t.prev, stack, t.count)), "{what} at {level:?}");
                }
                assert!(
                    end <= bad_at,
                    "{what} at {level:?}: took up to {end}, past {bad_at}"
                );
                // It took every block before the one that holds them.
                assert!(
                    end + BLOCK > bad_at,
                    "{what} at {level:?}: stopped early, at {end}"
                );
            }
        }
    }
}
