//! The output side shared by every policy: a bounded buffer of bytes not yet
//! handed to the caller, split into a committed prefix and a tentative tail
//! that can be rolled back, plus the byte accounting that every ceiling uses.
//!
//! Positions are absolute stream positions (bytes ever written), so marks stay
//! valid while committed bytes are handed out.

use crate::record::{BudgetKind, Record};

/// A feed lends the caller's output `Vec` (see [`Out::lend`]) only while the
/// uncommitted tail is at most the chunk's length divided by this: moving the
/// tail in and out then costs at most a quarter of a copy of the chunk.
const LEND_TAIL_DIV: usize = 8;

/// A byte ceiling over part of the output.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scope {
    /// Absolute position the scope's bytes may not pass.
    pub end: u64,
    /// `Out::reserved` when the scope opened: reserves made outside it do not count.
    pub reserved_base: u64,
    /// The kind recorded when this scope is the one that runs out.
    pub kind: BudgetKind,
}

#[derive(Debug, Default)]
pub(crate) struct Out {
    /// Our bytes are `buf[start..]`. Between feeds `buf` is our own buffer
    /// and `start` is 0; during a feed it may be the caller's output `Vec`
    /// (see [`Out::lend`]), whose first `start` bytes are the caller's.
    buf: Vec<u8>,
    start: usize,
    /// Absolute position of `buf[start]`.
    base: u64,
    /// Absolute position up to which bytes are final.
    commit: u64,
    /// Bytes owed later (closing brackets and quotes, small fields kept room for).
    pub reserved: u64,
    /// Bytes owed to the truncation record; counts against scope 0 only.
    pub record_reserve: u64,
    /// The record is written into this output (inside scope 0): each listed
    /// path must fit the room of scope 0 and is then reserved.
    pub record_inside: bool,
    /// While set, nothing at or after this position is committed.
    hold: Option<u64>,
    scopes: [Option<Scope>; 2],
}

impl Out {
    /// Total bytes written so far (committed or not).
    #[inline]
    pub fn pos(&self) -> u64 {
        self.base + self.buf.len().saturating_sub(self.start) as u64
    }

    /// Length of the buffer written into (during a lent feed, the caller's
    /// bytes included): `pos()` moves with it one for one between feeds'
    /// start and end.
    #[inline]
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Index in `buf` of absolute position `at` (clamped to our part).
    #[inline]
    fn index(&self, at: u64) -> usize {
        let rel = at.saturating_sub(self.base);
        self.start
            .saturating_add(usize::try_from(rel).unwrap_or(usize::MAX))
            .min(self.buf.len())
    }

    /// Write straight into the caller's `dst` for one feed, so that kept bytes
    /// are copied once (input → `dst`) instead of twice (input → our buffer →
    /// `dst`). `dst` and our buffer swap places: the caller's bytes stay in
    /// front, untouched, and our uncommitted tail is appended after them.
    /// Returns false, and lends nothing, when that tail is longer than the
    /// feed's `chunk_len` over [`LEND_TAIL_DIV`] (a long hold would otherwise
    /// be copied on every feed). Every `lend` must be followed by
    /// [`Out::end_feed`] with the same `dst`.
    #[inline]
    pub fn lend(&mut self, dst: &mut Vec<u8>, chunk_len: usize) -> bool {
        if self.start != 0 || self.buf.len() > chunk_len / LEND_TAIL_DIV {
            return false;
        }
        std::mem::swap(&mut self.buf, dst);
        self.start = self.buf.len();
        // Usually there is no tail: no copy call for nothing.
        if !dst.is_empty() {
            self.buf.extend_from_slice(dst);
            dst.clear();
        }
        true
    }

    /// End a feed that began with `lent = lend(dst, …)`. When it succeeded
    /// (`ok`), the committed bytes end up in `dst`: they stay there if it was
    /// lent (the uncommitted tail moves back into our buffer), or are drained
    /// into it. After an error nothing is handed over: every byte of ours,
    /// committed or not, moves back into our buffer, as if never lent.
    #[inline]
    pub fn end_feed(&mut self, dst: &mut Vec<u8>, lent: bool, ok: bool) {
        match (lent, ok) {
            (true, true) => self.return_from(self.index(self.commit), dst),
            (true, false) => self.return_from(self.start, dst),
            (false, true) => self.drain_into(dst),
            (false, false) => {}
        }
    }

    fn return_from(&mut self, cut: usize, dst: &mut Vec<u8>) {
        // `dst` holds our (empty) buffer while lent.
        dst.clear();
        let tail = self.buf.get(cut..).unwrap_or(&[]);
        if !tail.is_empty() {
            dst.extend_from_slice(tail);
            self.buf.truncate(cut);
        }
        self.base += cut.saturating_sub(self.start) as u64;
        self.start = 0;
        // Moved whole rather than swapped field by field: the next `lend`
        // reads `self.buf` back within a few dozen cycles, with a 16-byte
        // load that two 8-byte stores could not serve.
        let ours = std::mem::take(dst);
        *dst = std::mem::replace(&mut self.buf, ours);
    }

    /// The buffer our bytes are written at the end of, for a writer that
    /// appends to it directly (as [`Out::write`] does) and does nothing else.
    #[inline]
    pub fn tail_mut(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    #[inline]
    pub fn write(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    #[inline]
    pub fn byte(&mut self, b: u8) {
        self.buf.push(b);
    }

    /// Bytes that may still be written inside every open scope, after the reserves.
    #[inline]
    pub fn avail(&self) -> u64 {
        let mut a = u64::MAX;
        for i in 0..self.scopes.len() {
            a = a.min(self.room(i));
        }
        a
    }

    /// Room left in scope `i` (u64::MAX when it is not open).
    #[inline]
    pub fn room(&self, i: usize) -> u64 {
        let Some(Some(s)) = self.scopes.get(i) else {
            return u64::MAX;
        };
        let mut owed = self.reserved.saturating_sub(s.reserved_base);
        if i == 0 {
            owed = owed.saturating_add(self.record_reserve);
        }
        s.end.saturating_sub(self.pos()).saturating_sub(owed)
    }

    /// The largest `reserved` any open scope started from (0 when none is
    /// open): while `reserved` stays at or above it, a reserve made or
    /// released changes every open scope's room by exactly one byte.
    pub fn reserve_floor(&self) -> u64 {
        self.scopes
            .iter()
            .flatten()
            .map(|s| s.reserved_base)
            .max()
            .unwrap_or(0)
    }

    /// Whether no byte ceiling is open (nothing written can ever need a rollback
    /// for lack of room).
    #[inline]
    pub fn unbounded(&self) -> bool {
        self.scopes.iter().all(|s| s.is_none())
    }

    /// Open a scope of `limit` bytes starting here (slot 0 outer, 1 inner).
    pub fn open_scope(&mut self, slot: usize, limit: u64, kind: BudgetKind) {
        let end = self.pos().saturating_add(limit);
        if let Some(s) = self.scopes.get_mut(slot) {
            *s = Some(Scope {
                end,
                reserved_base: self.reserved,
                kind,
            });
        }
    }

    /// The kind of the scope with the least room (what a byte cut is recorded as).
    pub fn bytes_kind(&self) -> BudgetKind {
        let mut best = (u64::MAX, BudgetKind::ResultBytes);
        for (i, s) in self.scopes.iter().enumerate() {
            if let Some(s) = s {
                let a = self.room(i);
                if a < best.0 {
                    best = (a, s.kind);
                }
            }
        }
        best.1
    }

    pub fn close_scope(&mut self, slot: usize) {
        if let Some(s) = self.scopes.get_mut(slot) {
            *s = None;
        }
    }

    /// Everything written so far is final (up to a hold).
    #[inline]
    pub fn commit(&mut self) {
        self.commit_at(self.pos());
    }

    /// The position up to which bytes are final.
    #[inline]
    pub fn committed(&self) -> u64 {
        self.commit
    }

    /// Everything up to `p` (a position already written) is final (up to a hold).
    #[inline]
    pub fn commit_at(&mut self, p: u64) {
        self.commit = match self.hold {
            Some(h) => h.min(p),
            None => p,
        };
    }

    /// Drop everything written after `mark` (which must not be committed).
    pub fn rollback(&mut self, mark: u64) {
        let keep = self.index(mark.max(self.commit));
        self.buf.truncate(keep);
    }

    /// Stop committing at the current position until `release`.
    pub fn hold_here(&mut self) -> u64 {
        let p = self.pos();
        if self.hold.is_none() {
            self.hold = Some(p);
        }
        p
    }

    /// Stop committing at `at` (an uncommitted position) until `release`.
    pub fn hold_here_at(&mut self, at: u64) {
        if self.hold.is_none() {
            self.hold = Some(at.max(self.commit));
        }
    }

    pub fn release(&mut self) {
        self.hold = None;
    }

    pub fn is_held(&self) -> bool {
        self.hold.is_some()
    }

    /// The uncommitted bytes from absolute position `from` on.
    pub fn tail_from(&self, from: u64) -> &[u8] {
        self.buf.get(self.index(from)..).unwrap_or(&[])
    }

    /// Insert `bytes` at absolute position `at` (which must not be committed).
    pub fn insert(&mut self, at: u64, bytes: &[u8]) {
        let i = self.index(at.max(self.commit));
        self.buf.splice(i..i, bytes.iter().copied());
    }

    /// Record a cut; when the record lives inside this output, its path is
    /// listed only if it fits the ceiling's room, and that room is then reserved.
    pub fn add_cut(&mut self, rec: &mut Record, kind: BudgetKind, count: u64, path: Option<&[u8]>) {
        if !self.record_inside {
            rec.path_room = u64::MAX;
            rec.add(kind, count, path);
            return;
        }
        let before = rec.paths_len();
        rec.path_room = self.room(0);
        rec.add(kind, count, path);
        self.record_reserve += rec.paths_len().saturating_sub(before) as u64;
    }

    /// Hand the committed bytes to `dst` (not while lent).
    pub fn drain_into(&mut self, dst: &mut Vec<u8>) {
        let n = self.index(self.commit).saturating_sub(self.start);
        if n == 0 || self.start != 0 {
            return;
        }
        if let Some(ready) = self.buf.get(..n) {
            dst.extend_from_slice(ready);
        }
        if n == self.buf.len() {
            self.buf.clear();
        } else {
            self.buf.drain(..n);
        }
        self.base += n as u64;
    }

    /// Forget all state but keep the allocation.
    pub fn reset(&mut self) {
        self.buf.truncate(self.start);
        self.base = 0;
        self.commit = 0;
        self.reserved = 0;
        self.record_reserve = 0;
        self.record_inside = false;
        self.hold = None;
        self.scopes = [None, None];
    }
}
