//! The budget policy: copy one JSON value from tokens to output, cutting it to
//! limits, and record every cut. [`Budget`] is the push API for a whole document;
//! `ValueBudget` is the policy for one value, which the MCP projection reuses
//! for `structuredContent`, `_meta` and other free-form values.
//!
//! Semantics (see `specs/budget-semantics.md`): lists keep a prefix of items,
//! objects a prefix of members, strings a prefix of whole characters; a
//! container past `max_depth` is emptied; the byte ceiling holds with the
//! closers still owed; whatever is kept is copied byte for byte.

use crate::error::Error;
use crate::limits::Limits;
use crate::out::Out;
use crate::record::{BudgetKind, PointerBuf, Record};
use crate::tokenizer::{KeepSink, Tok, Tokenizer};

#[derive(Debug, Clone, Copy)]
struct Frame {
    obj: bool,
    /// Children written.
    kept: u64,
    /// Children started (the index of the next one).
    seen: u64,
    /// This object's current key in `keys` (offset, length), and whether it is
    /// exact (not longer than the tokenizer keeps).
    key_off: u32,
    key_len: u32,
    key_ok: bool,
    /// Set by [`Keeper`] only: the key is `key_len` bytes at `key_off` of the
    /// chunk it runs over, not yet copied into `keys` (see [`Keeper::flush`]).
    key_lazy: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SkipWhy {
    None,
    /// The rest of a list past `max_list_items`.
    ListTail,
    /// A child (and the rest of its container) did not fit or was doomed.
    Rest(BudgetKind),
    /// A container past `max_depth`.
    Emptied,
    /// The value as a whole did not fit.
    Root(BudgetKind),
}

/// What a value's policy reports after a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The value goes on.
    More,
    /// The value is complete and written.
    Done,
    /// The value could not be written at all (not even its smallest form); the
    /// output was rolled back to where the value began and the value skipped.
    Omitted,
}

/// The policy for one value. Driven token by token; writes through [`Out`].
#[derive(Debug)]
pub(crate) struct ValueBudget {
    lim: Limits,
    frames: Vec<Frame>,
    /// The pointer of the value itself (set by the driver); the pointer of a
    /// cut site is rendered from it and the frames only when a cut is recorded.
    prefix: PointerBuf,
    /// Current keys of the open objects, one slot per object frame.
    keys: Vec<u8>,
    /// Scratch for rendering a pointer.
    scratch: PointerBuf,
    /// Tokenizer depth of the value's parent (0 for a document).
    base_depth: u32,
    /// Start of the current tentative item (its comma included).
    mark: Option<u64>,
    in_num: bool,
    key_doom: Option<BudgetKind>,
    skip_why: SkipWhy,
    /// The rollback point for the whole value (set by the driver).
    value_mark: u64,
    /// A string value's opening quote is written and its closing quote owed.
    in_str: bool,
    /// After `Step::Omitted`: the kind of the ceiling that left no room.
    pub root_omitted_kind: BudgetKind,
    /// Whether [`ValueBudget::fast_keep`] runs (off only to test it against
    /// the token-by-token path).
    pub fast: bool,
}

impl ValueBudget {
    pub fn new(lim: Limits) -> ValueBudget {
        let cap = (lim.max_depth.min(lim.max_nesting) as usize)
            .saturating_add(2)
            .min(4096);
        ValueBudget {
            lim,
            frames: Vec::with_capacity(cap),
            prefix: PointerBuf::new(),
            keys: Vec::with_capacity(1024),
            scratch: PointerBuf::new(),
            base_depth: 0,
            mark: None,
            in_num: false,
            key_doom: None,
            skip_why: SkipWhy::None,
            value_mark: 0,
            in_str: false,
            root_omitted_kind: BudgetKind::ResultBytes,
            fast: true,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.lim
    }

    /// Start a value whose first token comes next. `prefix` is the pointer of
    /// the value in the original document; `value_mark` the output position to
    /// roll back to if not even its smallest form fits.
    pub fn begin(&mut self, lim: Limits, prefix: &PointerBuf, base_depth: u32, value_mark: u64) {
        self.lim = lim;
        self.frames.clear();
        self.prefix.set(prefix);
        self.keys.clear();
        self.base_depth = base_depth;
        self.mark = None;
        self.in_num = false;
        self.key_doom = None;
        self.skip_why = SkipWhy::None;
        self.value_mark = value_mark;
        self.in_str = false;
    }

    /// Input broke off: close what is open so the output is one valid value.
    /// Returns false when nothing of the value was written.
    pub fn close_open(&mut self, out: &mut Out) -> bool {
        if let Some(m) = self.mark.take() {
            out.rollback(m);
        }
        if self.in_str {
            out.byte(b'"');
            out.reserved = out.reserved.saturating_sub(1);
            self.in_str = false;
        }
        let wrote = out.pos() > self.value_mark || !self.frames.is_empty();
        while let Some(f) = self.frames.pop() {
            out.byte(if f.obj { b'}' } else { b']' });
            out.reserved = out.reserved.saturating_sub(1);
        }
        out.commit();
        wrote
    }

    #[inline]
    fn top_depth(&self) -> u32 {
        self.base_depth + self.frames.len() as u32
    }

    /// Render the pointer through the current child of the first `upto` frames,
    /// plus an index, into `scratch`.
    fn render(&mut self, upto: usize, extra_index: Option<u64>) {
        self.scratch.set(&self.prefix);
        for f in self.frames.iter().take(upto) {
            if f.obj {
                let (a, b) = (f.key_off as usize, (f.key_off + f.key_len) as usize);
                self.scratch
                    .push_key(self.keys.get(a..b).unwrap_or(&[]), f.key_ok);
            } else {
                self.scratch.push_index(f.seen.saturating_sub(1));
            }
        }
        if let Some(i) = extra_index {
            self.scratch.push_index(i);
        }
    }

    /// Record a cut at the current child of the innermost container (or at the value).
    fn record_here(&mut self, out: &mut Out, rec: &mut Record, kind: BudgetKind, count: u64) {
        if count == 0 {
            return;
        }
        self.render(self.frames.len(), None);
        out.add_cut(rec, kind, count, self.scratch.get());
    }

    /// A child value starts; make room for its smallest form (`min_len` bytes).
    /// Returns false when it does not fit: the child, and the rest of its
    /// container, are then being skipped.
    fn start_child(&mut self, lex: &mut Tokenizer, out: &mut Out, min_len: u64) -> bool {
        let Some(p) = self.frames.last_mut() else {
            // The value itself.
            if min_len > out.avail() {
                out.rollback(self.value_mark);
                lex.skip_one(self.base_depth);
                self.skip_why = SkipWhy::Root(out.bytes_kind());
                return false;
            }
            return true;
        };
        let mut need = min_len;
        if !p.obj {
            p.seen += 1;
            self.mark = Some(out.pos());
            if p.kept > 0 {
                need += 1;
            }
        }
        if need > out.avail() {
            if let Some(m) = self.mark.take() {
                out.rollback(m);
            }
            lex.skip_rest(self.top_depth(), 1);
            self.skip_why = SkipWhy::Rest(out.bytes_kind());
            return false;
        }
        if !p.obj && p.kept > 0 {
            out.byte(b',');
        }
        p.kept += 1;
        true
    }

    /// The current child of the innermost container (or the value) is complete.
    fn value_end(&mut self, lex: &mut Tokenizer, out: &mut Out) -> Step {
        self.mark = None;
        out.commit();
        let Some(p) = self.frames.last() else {
            return Step::Done;
        };
        if !p.obj && p.kept >= self.lim.max_list_items {
            lex.skip_rest(self.top_depth(), 0);
            self.skip_why = SkipWhy::ListTail;
        }
        Step::More
    }

    fn open(&mut self, obj: bool, lex: &mut Tokenizer, out: &mut Out) -> Step {
        if !self.start_child(lex, out, 2) {
            return Step::More;
        }
        out.byte(if obj { b'{' } else { b'[' });
        out.reserved += 1;
        out.commit();
        self.mark = None;
        self.frames.push(Frame {
            obj,
            kept: 0,
            seen: 0,
            key_off: self.keys.len() as u32,
            key_len: 0,
            key_ok: false,
            key_lazy: false,
        });
        if self.frames.len() as u64 > self.lim.max_depth as u64 {
            lex.skip_rest(self.top_depth(), 0);
            self.skip_why = SkipWhy::Emptied;
        } else if !obj && self.lim.max_list_items == 0 {
            lex.skip_rest(self.top_depth(), 0);
            self.skip_why = SkipWhy::ListTail;
        }
        Step::More
    }

    /// Take whole tokens from `chunk` at `*pos` without the per-token round
    /// trip, while nothing can be cut (see [`Keeper`]). Call between tokens.
    #[inline]
    pub fn fast_keep(&mut self, lex: &mut Tokenizer, chunk: &[u8], pos: &mut usize, out: &mut Out) {
        if !self.fast
            || self.frames.is_empty()
            || self.in_num
            || self.in_str
            || self.key_doom.is_some()
            || self.skip_why != SkipWhy::None
        {
            return;
        }
        let mut keeper = Keeper::new(self, out, chunk, *pos);
        lex.fast_keep(chunk, pos, &mut keeper);
        keeper.flush();
    }

    /// At the start of a feed that goes on inside a kept string value: take
    /// its plain prefix, copied as it is scanned
    /// ([`Tokenizer::take_plain_into`]), and do what [`ValueBudget::token`]
    /// does with that span (write it, commit). Returns the bytes taken (0
    /// when not inside a kept string value, or with the fast paths off).
    pub fn take_plain(&mut self, lex: &mut Tokenizer, chunk: &[u8], out: &mut Out) -> usize {
        if !self.fast || !self.in_str {
            return 0;
        }
        let n = lex.take_plain_into(chunk, out.tail_mut());
        if n > 0 {
            out.commit();
        }
        n
    }

    /// Feed one token (never `NeedMore` or `Eof`).
    pub fn token(
        &mut self,
        tok: Tok,
        chunk: &[u8],
        lex: &mut Tokenizer,
        out: &mut Out,
        rec: &mut Record,
    ) -> Result<Step, Error> {
        match tok {
            Tok::BeginArray => return Ok(self.open(false, lex, out)),
            Tok::BeginObject => return Ok(self.open(true, lex, out)),
            Tok::EndArray | Tok::EndObject => {
                self.frames.pop();
                out.byte(if tok == Tok::EndArray { b']' } else { b'}' });
                out.reserved = out.reserved.saturating_sub(1);
                return Ok(self.value_end(lex, out));
            }
            Tok::StrBegin { key: false } => {
                if self.start_child(lex, out, 2) {
                    out.byte(b'"');
                    out.reserved += 1;
                    out.commit();
                    self.mark = None;
                    self.in_str = true;
                    lex.set_string_allowance(self.lim.max_string_bytes, out.avail());
                }
            }
            Tok::StrBegin { key: true } => {
                let Some(p) = self.frames.last_mut() else {
                    return Ok(Step::More);
                };
                p.seen += 1;
                if p.kept >= self.lim.max_map_keys {
                    self.key_doom = Some(BudgetKind::MapKeys);
                    lex.stop_keeping();
                } else {
                    self.key_doom = None;
                    self.mark = Some(out.pos());
                    if p.kept > 0 {
                        out.byte(b',');
                    }
                    out.byte(b'"');
                    self.check_key(lex, out);
                }
            }
            Tok::StrSpan(a, b) => {
                if let Some(bytes) = chunk.get(a..b) {
                    out.write(bytes);
                }
                self.after_string_bytes(lex, out);
            }
            Tok::StrHeld => {
                out.write(lex.held());
                self.after_string_bytes(lex, out);
            }
            Tok::StrEnd => {
                if self.frames.last().is_some_and(|p| p.obj) && self.mark_is_key(lex) {
                    return Ok(self.key_end(lex, out, rec));
                }
                out.byte(b'"');
                out.reserved = out.reserved.saturating_sub(1);
                self.in_str = false;
                if lex.string_cut() {
                    let kind = if lex.cut_by_decoded() {
                        BudgetKind::StringBytes
                    } else {
                        out.bytes_kind()
                    };
                    self.record_here(out, rec, kind, 1);
                }
                return Ok(self.value_end(lex, out));
            }
            Tok::NumSpan(a, b) => {
                if !self.in_num {
                    if !self.start_child(lex, out, 1) {
                        return Ok(Step::More);
                    }
                    self.in_num = true;
                    if self.mark.is_none() {
                        self.mark = Some(out.pos());
                    }
                }
                let bytes = chunk.get(a..b).unwrap_or(&[]);
                if bytes.len() as u64 > out.avail() {
                    // The number cannot fit whole: it and the rest of its container go.
                    self.in_num = false;
                    let kind = out.bytes_kind();
                    let m = self.mark.take().unwrap_or(self.value_mark);
                    out.rollback(m);
                    if self.frames.is_empty() {
                        out.rollback(self.value_mark);
                        lex.skip_one(self.base_depth);
                        self.skip_why = SkipWhy::Root(kind);
                    } else {
                        lex.skip_rest(self.top_depth(), 1);
                        self.skip_why = SkipWhy::Rest(kind);
                    }
                    return Ok(Step::More);
                }
                out.write(bytes);
                if out.unbounded() {
                    // Without a ceiling a number is never rolled back: do not hold it.
                    out.commit();
                }
            }
            Tok::NumEnd => {
                self.in_num = false;
                return Ok(self.value_end(lex, out));
            }
            Tok::Lit(l) => {
                let text = l.text();
                if self.frames.is_empty() && text.len() as u64 > out.avail() {
                    // The literal is already complete: nothing to skip.
                    out.rollback(self.value_mark);
                    self.root_omitted_kind = out.bytes_kind();
                    return Ok(Step::Omitted);
                }
                if self.start_child(lex, out, text.len() as u64) {
                    out.write(text);
                    return Ok(self.value_end(lex, out));
                }
            }
            Tok::Skipped(n) => return Ok(self.skipped(n, lex, out, rec)),
            Tok::NeedMore | Tok::Eof => {}
        }
        Ok(Step::More)
    }

    /// Whether the string that just ended is a key (the tokenizer now waits for `:`).
    fn mark_is_key(&self, lex: &Tokenizer) -> bool {
        lex.after_key()
    }

    /// After bytes of a string: a value string's bytes are final (commit them, so
    /// a long string never piles up in the buffer); a key's are checked for room.
    #[inline]
    fn after_string_bytes(&mut self, lex: &mut Tokenizer, out: &mut Out) {
        if self.in_str {
            out.commit();
        } else {
            self.check_key(lex, out);
        }
    }

    fn check_key(&mut self, lex: &mut Tokenizer, out: &mut Out) {
        if !lex.in_key_string() || self.key_doom.is_some() {
            return;
        }
        if out.unbounded() {
            // Without a ceiling a kept key is never rolled back: do not hold it.
            out.commit();
            return;
        }
        // A member needs `":` and at least one byte of value after the key.
        if out.avail() < 3 {
            if let Some(m) = self.mark.take() {
                out.rollback(m);
            }
            self.key_doom = Some(out.bytes_kind());
            lex.stop_keeping();
        }
    }

    fn key_end(&mut self, lex: &mut Tokenizer, out: &mut Out, _rec: &mut Record) -> Step {
        if let Some(f) = self.frames.last_mut() {
            // This object's key slot is the last one: replace it.
            self.keys.truncate(f.key_off as usize);
            self.keys.extend_from_slice(lex.key());
            f.key_len = lex.key().len() as u32;
            f.key_ok = !lex.key_overflowed();
        }
        if let Some(kind) = self.key_doom.take() {
            if let Some(m) = self.mark.take() {
                out.rollback(m);
            }
            // The member's value has not started: the skip counts it.
            lex.skip_rest(self.top_depth(), 0);
            self.skip_why = SkipWhy::Rest(kind);
            return Step::More;
        }
        out.write(b"\":");
        // The member counts as kept once its value starts (`start_child`).
        Step::More
    }

    fn skipped(&mut self, n: u64, lex: &mut Tokenizer, out: &mut Out, rec: &mut Record) -> Step {
        let why = std::mem::replace(&mut self.skip_why, SkipWhy::None);
        match why {
            SkipWhy::None => {}
            SkipWhy::ListTail => {
                if n > 0 {
                    if let Some(seen) = self.frames.last().map(|p| p.seen) {
                        self.render(self.frames.len() - 1, Some(seen));
                        out.add_cut(rec, BudgetKind::ListItems, n, self.scratch.get());
                    }
                }
            }
            SkipWhy::Rest(kind) => self.record_here(out, rec, kind, n),
            SkipWhy::Emptied => {
                if n > 0 {
                    // The emptied container is the innermost frame: its own pointer.
                    self.render(self.frames.len().saturating_sub(1), None);
                    out.add_cut(rec, BudgetKind::Depth, 1, self.scratch.get());
                }
            }
            SkipWhy::Root(kind) => {
                self.root_omitted_kind = kind;
                out.rollback(self.value_mark);
                let _ = lex;
                return Step::Omitted;
            }
        }
        Step::More
    }
}

/// [`ValueBudget`] as the policy of [`Tokenizer::fast_keep`]: it takes a token
/// only when the token-by-token path ([`ValueBudget::token`]) would write it
/// whole, cut nothing and start no skip, and then writes the same bytes,
/// commits at the same point and leaves the same state. Everything else
/// (a limit reached or about to be, the value's own first and last token) is
/// refused and left to that path.
///
/// Writes are coalesced: a token whose output (its comma, if any, and its
/// bytes) stands in the chunk right after the previous one's is not written
/// at once but joins a pending run of the chunk, written as one slice when a
/// token does not join (whitespace between, or a comma the output drops) and
/// at [`Keeper::flush`]. Compact JSON that passes unchanged is one run. Marks
/// and commits are taken as positions counting the run, and the last commit
/// is applied at the flush; nothing reads the output in between.
struct Keeper<'a> {
    vb: &'a mut ValueBudget,
    out: &'a mut Out,
    /// `out.avail()`, kept current (counting the pending run as written).
    room: u64,
    /// The chunk the tokens are offered from.
    chunk: &'a [u8],
    /// `chunk[run..end]` is accepted output not yet written.
    run: usize,
    end: usize,
    /// `max_list_items - 1` (0 when that is 0): a list item at this index
    /// is the one that reaches the limit, which `value_end` must see.
    last_item: u64,
    /// `out.pos()` less the length of the output buffer, which only writes
    /// change while the loop runs.
    origin: u64,
    /// The last commit asked for (an output position counting the run), or
    /// the output's own commit point if none was.
    commit: u64,
    /// The lowest frame the loop pushed or gave a key to: from there up the
    /// frames' key slots are set at the flush.
    low: usize,
    /// `out.reserve_floor()`: while `out.reserved` is above it, every open
    /// scope counts a reserve made or released here.
    floor: u64,
}

impl<'a> Keeper<'a> {
    fn new(vb: &'a mut ValueBudget, out: &'a mut Out, chunk: &'a [u8], at: usize) -> Self {
        let room = out.avail();
        let floor = out.reserve_floor();
        let low = vb.frames.len();
        let commit = out.committed();
        let origin = out.pos().wrapping_sub(out.len() as u64);
        let last_item = vb.lim.max_list_items.saturating_sub(1);
        Keeper {
            vb,
            out,
            room,
            chunk,
            run: at,
            end: at,
            origin,
            last_item,
            commit,
            low,
            floor,
        }
    }

    /// Bytes accepted and not yet written.
    #[inline(always)]
    fn pending(&self) -> u64 {
        // `run <= end` always; wrapping only keeps the arithmetic free of checks.
        (self.end as u64).wrapping_sub(self.run as u64)
    }

    /// The output position, counting the pending run.
    #[inline(always)]
    fn pos(&self) -> u64 {
        self.origin
            .wrapping_add(self.out.len() as u64)
            .wrapping_add(self.pending())
    }

    /// `out.avail()` as if the pending run were written.
    #[inline(always)]
    fn avail(&self) -> u64 {
        self.out.avail().saturating_sub(self.pending())
    }

    /// Whether a token at `at`, after a comma if `comma`, joins the pending
    /// run: what it outputs comes next in the chunk.
    #[inline(always)]
    fn joins(&self, comma: bool, at: usize) -> bool {
        if comma {
            self.end + 1 == at && self.chunk.get(self.end) == Some(&b',')
        } else {
            self.end == at
        }
    }

    /// Output a comma (if `comma`) and then `chunk[at..end]`: join the run,
    /// or write the run and then the token (which starts the next run).
    #[inline(always)]
    fn put(&mut self, comma: bool, at: usize, end: usize) {
        if !self.joins(comma, at) {
            self.write_alone(comma);
            self.out.write(self.chunk.get(at..end).unwrap_or(&[]));
            self.run = end;
        }
        self.end = end;
    }

    /// [`Keeper::put`] for the one-byte token `b` at `at`.
    #[inline(always)]
    fn put_byte(&mut self, comma: bool, at: usize, b: u8) {
        if !self.joins(comma, at) {
            self.write_alone(comma);
            self.out.byte(b);
            self.run = at + 1;
        }
        self.end = at + 1;
    }

    /// A token that does not join the run is written at once (one push for
    /// a bracket, where a one-token run would cost a `memcpy` call): first the
    /// run, then its comma (if `comma`).
    #[inline(always)]
    fn write_alone(&mut self, comma: bool) {
        self.write_run();
        if comma {
            self.out.byte(b',');
        }
    }

    /// Write the pending run.
    #[inline(always)]
    fn write_run(&mut self) {
        if self.end > self.run {
            self.out
                .write(self.chunk.get(self.run..self.end).unwrap_or(&[]));
        }
        self.run = self.end;
    }

    /// Write what is pending, apply the last commit and copy the keys still
    /// in the chunk: call when the loop returns.
    fn flush(&mut self) {
        self.write_run();
        self.out.commit_at(self.commit);
        let vb = &mut *self.vb;
        if self.low >= vb.frames.len() {
            return;
        }
        // The frames below `low` are as the token path left them; each frame
        // from `low` up was pushed here (no key yet, or a lazy one) or had
        // its key set here (lazy): lay their slots out again above theirs.
        let below = self.low.checked_sub(1).and_then(|j| vb.frames.get(j));
        let end = below.map_or(0, |p| p.key_off as usize + p.key_len as usize);
        vb.keys.truncate(end);
        let Some(top) = vb.frames.get_mut(self.low..) else {
            return;
        };
        for f in top {
            let (a, n) = (f.key_off as usize, f.key_len as usize);
            f.key_off = vb.keys.len() as u32;
            if f.key_lazy {
                f.key_lazy = false;
                vb.keys
                    .extend_from_slice(self.chunk.get(a..a + n).unwrap_or(&[]));
            } else {
                f.key_len = 0;
            }
        }
        self.low = vb.frames.len();
    }

    /// A child of `len` bytes starts in the innermost container; `ends` when it
    /// is complete with this token (a scalar). Checks what `start_child` and
    /// `value_end` would check, then counts it; returns whether it needs a
    /// comma (`None` when refused).
    #[inline(always)]
    fn child(&mut self, len: u64, ends: bool) -> Option<bool> {
        let last_item = self.last_item;
        let p = self.vb.frames.last_mut()?;
        let comma = !p.obj && p.kept > 0;
        // `len` is a token's length in the chunk: no sum here can overflow.
        let need = len + comma as u64;
        if need > self.room || (!p.obj && ends && p.kept >= last_item) {
            return None;
        }
        if !p.obj {
            p.seen += 1;
        }
        p.kept += 1;
        self.room -= comma as u64;
        Some(comma)
    }

    /// A scalar child of `len` bytes was written: what `value_end` does for it.
    #[inline(always)]
    fn ended(&mut self, len: u64) {
        self.room -= len;
        self.vb.mark = None;
        self.commit = self.pos();
    }
}

impl KeepSink for Keeper<'_> {
    #[inline(always)]
    fn key(&mut self, at: usize, q: usize) -> bool {
        let max_keys = self.vb.lim.max_map_keys;
        let Some(body) = self.chunk.get(at + 1..q) else {
            return false;
        };
        let top = self.vb.frames.len().wrapping_sub(1);
        let Some(p) = self.vb.frames.last_mut() else {
            return false;
        };
        let comma = p.kept > 0;
        // `check_key` wants room for `":` and one byte of value after the key.
        let need = body.len() as u64 + 4 + comma as u64;
        if !p.obj || p.kept >= max_keys || need > self.room {
            return false;
        }
        p.seen += 1;
        // `key_end`: this object's key slot is the last one. It is copied
        // there at the flush (most objects the loop opens it also closes).
        match u32::try_from(at + 1) {
            Ok(off) => {
                p.key_off = off;
                p.key_lazy = true;
                self.low = self.low.min(top);
            }
            Err(_) => {
                self.vb.keys.truncate(p.key_off as usize);
                self.vb.keys.extend_from_slice(body);
                p.key_lazy = false;
            }
        }
        p.key_len = body.len() as u32;
        p.key_ok = true;
        let start = self.pos();
        self.vb.mark = Some(start);
        // The colon joins the run when it follows the key at once.
        let colon = self.chunk.get(q + 1) == Some(&b':');
        self.put(comma, at, q + 1 + colon as usize);
        if !colon {
            self.write_run();
            self.out.byte(b':');
        }
        if self.out.unbounded() {
            // Where the token path commits: after the key's text, before `":`.
            self.commit = start + comma as u64 + 1 + body.len() as u64;
        }
        self.room -= need - 1;
        true
    }

    #[inline(always)]
    fn string_room(&self) -> u64 {
        let comma = self.vb.frames.last().is_some_and(|p| !p.obj && p.kept > 0);
        self.room.saturating_sub(2 + comma as u64)
    }

    #[inline(always)]
    fn string(&mut self, at: usize, end: usize, dec: u64) -> bool {
        // `at..end` has its quotes; the allowance `token` would give is
        // `max_string_bytes` decoded and the room after `"` and its closer.
        // Past its decoded allowance, it is taken as any other scalar.
        dec <= self.vb.lim.max_string_bytes && self.scalar(at, end)
    }

    #[inline(always)]
    fn scalar(&mut self, at: usize, end: usize) -> bool {
        let len = end.wrapping_sub(at) as u64;
        let Some(comma) = self.child(len, true) else {
            return false;
        };
        self.put(comma, at, end);
        self.ended(len);
        true
    }

    #[inline(always)]
    fn open(&mut self, at: usize, obj: bool) -> bool {
        let lim = self.vb.lim;
        if self.vb.frames.len() as u64 >= lim.max_depth as u64 || (!obj && lim.max_list_items == 0)
        {
            return false;
        }
        let Some(comma) = self.child(2, false) else {
            return false;
        };
        self.put_byte(comma, at, if obj { b'{' } else { b'[' });
        // Every scope counts the reserve (see `floor`): the bracket and its
        // closer take two bytes of room.
        let counted = self.out.reserved >= self.floor;
        self.out.reserved += 1;
        self.commit = self.pos();
        self.vb.mark = None;
        self.vb.frames.push(Frame {
            obj,
            kept: 0,
            seen: 0,
            key_off: self.vb.keys.len() as u32,
            key_len: 0,
            key_ok: false,
            key_lazy: false,
        });
        self.low = self.low.min(self.vb.frames.len() - 1);
        self.room = if counted { self.room - 2 } else { self.avail() };
        true
    }

    #[inline(always)]
    fn close(&mut self, at: usize) -> bool {
        let max_items = self.vb.lim.max_list_items;
        let n = self.vb.frames.len();
        let (Some(f), Some(parent)) = (
            self.vb.frames.get(n.wrapping_sub(1)),
            self.vb.frames.get(n.wrapping_sub(2)),
        ) else {
            // The value's own closer: `token` reports it done.
            return false;
        };
        if !parent.obj && parent.kept >= max_items {
            // `value_end` would start the list's tail.
            return false;
        }
        let b = if f.obj { b'}' } else { b']' };
        self.vb.frames.pop();
        self.put_byte(false, at, b);
        // Every scope stops counting the closer's reserve (see `floor`) as it
        // counts the closer itself: the room does not change.
        let counted = self.out.reserved > self.floor;
        self.out.reserved = self.out.reserved.saturating_sub(1);
        self.vb.mark = None;
        self.commit = self.pos();
        if !counted {
            self.room = self.avail();
        }
        true
    }
}

/// Whether the last [`Budget::feed`] completed the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// More input is needed (or allowed: trailing whitespace).
    NeedInput,
    /// The top-level value is complete; only whitespace may follow.
    Complete,
}

/// Budget one JSON document, pushed in chunks of any size.
///
/// ```
/// use resultbudget::{Budget, Limits};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut b = Budget::new(Limits { max_list_items: 2, ..Limits::UNLIMITED })?;
/// let mut out = Vec::new();
/// b.feed(b"[1,2,", &mut out)?;
/// b.feed(b"3,4]", &mut out)?;
/// let rec = b.finish(&mut out)?;
/// assert_eq!(out, b"[1,2]");
/// assert_eq!(rec.omitted_count(), 2);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Budget {
    lex: Tokenizer,
    out: Out,
    vb: ValueBudget,
    rec: Record,
    done: bool,
}

impl Budget {
    /// A budget with these limits (an error message if they are unusable).
    pub fn new(lim: Limits) -> Result<Budget, String> {
        lim.validate()?;
        let mut b = Budget {
            lex: Tokenizer::new(lim.max_nesting),
            out: Out::default(),
            vb: ValueBudget::new(lim),
            rec: Record::new(),
            done: false,
        };
        // Nothing here reads strings' characters.
        b.lex.set_count_chars(false);
        b.reset();
        Ok(b)
    }

    /// Start a new document with the same limits, keeping allocations.
    pub fn reset(&mut self) {
        self.lex.reset();
        self.out.reset();
        self.rec.reset();
        self.done = false;
        let lim = *self.vb.limits();
        self.out
            .open_scope(0, lim.max_result_bytes, BudgetKind::ResultBytes);
        self.vb.begin(lim, &PointerBuf::new(), 0, 0);
    }

    /// Read a lone surrogate escape (`"\\ud83d"`) as U+FFFD instead of
    /// refusing the input: [`crate::tokenizer::Tokenizer::set_lone_surrogates`].
    pub fn set_lone_surrogates(&mut self, on: bool) {
        self.lex.set_lone_surrogates(on);
    }

    /// The record so far (complete after [`Budget::finish`]).
    pub fn record(&self) -> &Record {
        &self.rec
    }

    fn step(&mut self, tok: Tok, chunk: &[u8]) -> Result<(), Error> {
        if self.done {
            return Ok(());
        }
        match self
            .vb
            .token(tok, chunk, &mut self.lex, &mut self.out, &mut self.rec)?
        {
            Step::More => {}
            Step::Done => self.done = true,
            Step::Omitted => {
                // Not even the smallest form fitted (a long top-level number):
                // a valid stand-in that always fits the minimum ceiling.
                self.rec.add(self.vb.root_omitted_kind, 1, Some(b""));
                self.out.write(b"null");
                self.out.commit();
                self.done = true;
            }
        }
        Ok(())
    }

    /// Turn the fast paths off (or back on): the keeping loop, and the copy
    /// of a string's plain prefix as it is scanned at the start of a feed.
    /// For tests that compare them with the token-by-token path; the output
    /// is the same either way.
    #[doc(hidden)]
    pub fn set_fast_keep(&mut self, on: bool) {
        self.vb.fast = on;
    }

    /// Push the next chunk; committed output is appended to `out`.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<Status, Error> {
        // Kept bytes go straight into `out` (one copy) unless a long
        // uncommitted tail is pending; `Out::lend` says why.
        let lent = self.out.lend(out, input.len());
        let res = self.feed_tokens(input);
        self.out.end_feed(out, lent, res.is_ok());
        res?;
        Ok(if self.done {
            Status::Complete
        } else {
            Status::NeedInput
        })
    }

    fn feed_tokens(&mut self, input: &[u8]) -> Result<(), Error> {
        let mut pos = 0;
        if !self.done {
            pos = self.vb.take_plain(&mut self.lex, input, &mut self.out);
            if pos > 0 && self.lex.try_end_chunk(input, pos) {
                return Ok(());
            }
        }
        loop {
            if !self.done {
                self.vb
                    .fast_keep(&mut self.lex, input, &mut pos, &mut self.out);
            }
            let tok = self.lex.next(input, &mut pos)?;
            if tok == Tok::NeedMore {
                return Ok(());
            }
            self.step(tok, input)?;
            if self.lex.try_end_chunk(input, pos) {
                return Ok(());
            }
        }
    }

    /// After an error: close every open string and container so that what was
    /// written so far plus what this appends is one valid JSON value (`null` if
    /// nothing was written). Marks nothing in the record; the caller reports the error.
    pub fn abort(&mut self, out: &mut Vec<u8>) {
        if !self.done {
            if !self.vb.close_open(&mut self.out) {
                self.out.write(b"null");
            }
            self.done = true;
        }
        self.out.commit();
        self.out.drain_into(out);
    }

    /// The input has ended: flush the rest and return the record. An error
    /// here is [`Error::is_incomplete`] when the value was cut short.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<&Record, Error> {
        loop {
            let tok = self.lex.next_eof()?;
            if tok == Tok::Eof {
                break;
            }
            self.step(tok, &[])?;
        }
        self.out.commit();
        self.out.drain_into(out);
        Ok(&self.rec)
    }
}
