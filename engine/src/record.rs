//! The truncation record: what was cut, built while the value streams.
//!
//! Its size is bounded: at most [`MAX_PATHS`] pointers are listed, each at most
//! [`MAX_PATH_BYTES`] encoded bytes; further cut sites are only counted.

/// Pointers listed in `omitted_paths` at most.
pub const MAX_PATHS: usize = 16;
/// Encoded bytes (inside the JSON string) of one listed pointer at most.
pub const MAX_PATH_BYTES: usize = 256;

/// Which limit made a cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BudgetKind {
    ListItems,
    MapKeys,
    StringBytes,
    Depth,
    ResultBytes,
    ContentBlocks,
    TextBytes,
    TextBlockBytes,
    StructuredBytes,
    NonStandardField,
    Blob,
}

impl BudgetKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetKind::ListItems => "list_items",
            BudgetKind::MapKeys => "map_keys",
            BudgetKind::StringBytes => "string_bytes",
            BudgetKind::Depth => "depth",
            BudgetKind::ResultBytes => "result_bytes",
            BudgetKind::ContentBlocks => "content_blocks",
            BudgetKind::TextBytes => "text_bytes",
            BudgetKind::TextBlockBytes => "text_block_bytes",
            BudgetKind::StructuredBytes => "structured_bytes",
            BudgetKind::NonStandardField => "nonstandard_field",
            BudgetKind::Blob => "blob",
        }
    }
}

/// A saved state of a [`Record`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordMark {
    omitted_count: u64,
    kind: Option<BudgetKind>,
    paths_len: usize,
    listed: usize,
    unlisted: u64,
    kinds: u32,
}

/// What a budget cut, exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    omitted_count: u64,
    kind: Option<BudgetKind>,
    /// Listed pointers, each already a JSON string with quotes, comma-separated.
    paths: Vec<u8>,
    listed: usize,
    unlisted: u64,
    /// One bit per `BudgetKind` that cut.
    kinds: u32,
    /// Encoded bytes that listed paths may still take (a policy that writes the
    /// record into its output sets this to the room it has).
    pub(crate) path_room: u64,
}

impl Record {
    pub fn new() -> Record {
        Record {
            paths: Vec::with_capacity(MAX_PATHS * (MAX_PATH_BYTES + 3)),
            path_room: u64::MAX,
            ..Record::default()
        }
    }

    pub fn reset(&mut self) {
        self.omitted_count = 0;
        self.kind = None;
        self.paths.clear();
        self.listed = 0;
        self.unlisted = 0;
        self.kinds = 0;
        self.path_room = u64::MAX;
    }

    /// Whether any cut of a kind other than `except` happened.
    pub fn cut_other_than(&self, except: BudgetKind) -> bool {
        self.kinds & !(1u32 << except as u32) != 0
    }

    /// Whether anything was cut.
    pub fn truncated(&self) -> bool {
        self.omitted_count > 0
    }

    /// The first limit that cut.
    pub fn budget_kind(&self) -> Option<BudgetKind> {
        self.kind
    }

    /// Omitted values: list items + object members + cut strings + emptied containers
    /// (+ dropped fields and blocks in an MCP result).
    pub fn omitted_count(&self) -> u64 {
        self.omitted_count
    }

    /// Cut sites that were not listed in `omitted_paths` (over the count or size cap).
    pub fn omitted_paths_unlisted(&self) -> u64 {
        self.unlisted
    }

    /// Record a cut site. `path` is an encoded pointer (see [`PointerBuf`]), or
    /// `None` when it could not be rendered exactly (over the size cap).
    pub fn add(&mut self, kind: BudgetKind, count: u64, path: Option<&[u8]>) {
        if count == 0 {
            return;
        }
        self.omitted_count += count;
        self.kinds |= 1u32 << kind as u32;
        if self.kind.is_none() {
            self.kind = Some(kind);
        }
        let cost = path.map_or(u64::MAX, |p| p.len() as u64 + 3);
        match path {
            Some(p)
                if self.listed < MAX_PATHS
                    && p.len() <= MAX_PATH_BYTES
                    && cost <= self.path_room =>
            {
                self.path_room -= cost;
                if self.listed > 0 {
                    self.paths.push(b',');
                }
                self.paths.push(b'"');
                self.paths.extend_from_slice(p);
                self.paths.push(b'"');
                self.listed += 1;
            }
            _ => self.unlisted += 1,
        }
    }

    /// A point to come back to (see [`Record::restore`]).
    pub fn checkpoint(&self) -> RecordMark {
        RecordMark {
            omitted_count: self.omitted_count,
            kind: self.kind,
            paths_len: self.paths.len(),
            listed: self.listed,
            unlisted: self.unlisted,
            kinds: self.kinds,
        }
    }

    /// Forget every cut recorded since `m` (a dropped block's inner cuts).
    pub fn restore(&mut self, m: &RecordMark) {
        self.omitted_count = m.omitted_count;
        self.kind = m.kind;
        self.paths.truncate(m.paths_len);
        self.listed = m.listed;
        self.unlisted = m.unlisted;
        self.kinds = m.kinds;
    }

    /// Move every listed path to the unlisted count (to make the record smaller).
    pub fn unlist_paths(&mut self) {
        self.unlisted += self.listed as u64;
        self.listed = 0;
        self.paths.clear();
    }

    /// Write the record's fields (without braces), e.g. for merging into an object.
    pub fn write_fields(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"\"truncated\":");
        out.extend_from_slice(if self.truncated() { b"true" } else { b"false" });
        out.extend_from_slice(b",\"budget_kind\":");
        match self.kind {
            Some(k) => {
                out.push(b'"');
                out.extend_from_slice(k.as_str().as_bytes());
                out.push(b'"');
            }
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"omitted_count\":");
        push_u64(out, self.omitted_count);
        out.extend_from_slice(b",\"omitted_paths\":[");
        out.extend_from_slice(&self.paths);
        out.extend_from_slice(b"],\"omitted_paths_unlisted\":");
        push_u64(out, self.unlisted);
    }

    /// The record as one JSON object.
    pub fn to_json(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(128 + self.paths.len());
        v.push(b'{');
        self.write_fields(&mut v);
        v.push(b'}');
        v
    }

    /// The most bytes `write_fields` produces with no path listed (for reserving
    /// room); each listed path adds its encoded length plus 3.
    pub const BASE_FIELDS_LEN: usize = "\"truncated\":false,\"budget_kind\":\"nonstandard_field\",\"omitted_count\":18446744073709551615,\"omitted_paths\":[],\"omitted_paths_unlisted\":18446744073709551615".len();

    /// Encoded bytes the listed paths take now (with quotes and commas).
    pub fn paths_len(&self) -> usize {
        self.paths.len()
    }
}

/// Append the decimal digits of `v`.
pub(crate) fn push_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(u64_digits(v, &mut [0; 20]));
}

/// The decimal digits of `v`, written at the end of `tmp`.
pub(crate) fn u64_digits(mut v: u64, tmp: &mut [u8; 20]) -> &[u8] {
    let mut i = tmp.len();
    loop {
        i -= 1;
        if let Some(d) = tmp.get_mut(i) {
            *d = b'0' + (v % 10) as u8;
        }
        v /= 10;
        if v == 0 || i == 0 {
            break;
        }
    }
    tmp.get(i..).unwrap_or(&[])
}

/// A JSON Pointer (RFC 6901) under construction, kept in its JSON-string-encoded
/// form, capped at [`MAX_PATH_BYTES`]; past the cap it is marked overflowed.
#[derive(Debug, Clone, Default)]
pub struct PointerBuf {
    buf: Vec<u8>,
    overflow: bool,
}

impl PointerBuf {
    pub fn new() -> PointerBuf {
        PointerBuf {
            buf: Vec::with_capacity(MAX_PATH_BYTES + 32),
            overflow: false,
        }
    }

    pub fn clear(&mut self) {
        self.buf.clear();
        self.overflow = false;
    }

    pub fn set(&mut self, other: &PointerBuf) {
        self.buf.clear();
        self.buf.extend_from_slice(&other.buf);
        self.overflow = other.overflow;
    }

    /// The encoded pointer, or `None` if it overflowed.
    pub fn get(&self) -> Option<&[u8]> {
        (!self.overflow).then_some(self.buf.as_slice())
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn truncate(&mut self, len: usize, overflow: bool) {
        self.buf.truncate(len);
        self.overflow = overflow;
    }

    pub fn overflowed(&self) -> bool {
        self.overflow
    }

    fn check(&mut self) {
        if self.buf.len() > MAX_PATH_BYTES {
            self.buf.truncate(MAX_PATH_BYTES);
            self.overflow = true;
        }
    }

    /// Append `/index`.
    pub fn push_index(&mut self, index: u64) {
        if self.overflow {
            return;
        }
        self.buf.push(b'/');
        push_u64(&mut self.buf, index);
        self.check();
    }

    /// Append `/key` for a decoded key; `complete` false marks it overflowed
    /// (a key longer than the tokenizer keeps cannot be pointed at exactly).
    /// Plain runs of the key are copied whole; only `~`, `/` (RFC 6901) and
    /// what a JSON string must escape are written byte by byte.
    pub fn push_key(&mut self, key: &[u8], complete: bool) {
        if self.overflow {
            return;
        }
        if !complete {
            self.overflow = true;
            return;
        }
        self.buf.push(b'/');
        let mut rest = key;
        while let Some(k) = rest.iter().position(|&b| pointer_escaped(b)) {
            let (plain, tail) = rest.split_at(k);
            self.buf.extend_from_slice(plain);
            let Some((&b, tail)) = tail.split_first() else {
                break;
            };
            push_escaped(&mut self.buf, b);
            rest = tail;
            if self.buf.len() > MAX_PATH_BYTES {
                // Overflowed: what else the key holds is never shown.
                rest = &[];
                break;
            }
        }
        self.buf.extend_from_slice(rest);
        self.check();
    }
}

/// Bytes a key's pointer step does not copy as they are, by a lookup: a
/// chain of five compares a byte was most of the step's work on the
/// proxy's short keys.
#[inline]
fn pointer_escaped(b: u8) -> bool {
    static ESCAPED: [bool; 256] = {
        let mut t = [false; 256];
        let mut i = 0;
        while i < 256 {
            let b = i as u8;
            t[i] = matches!(b, b'~' | b'/' | b'"' | b'\\') || b < 0x20;
            i += 1;
        }
        t
    };
    ESCAPED[b as usize]
}

/// One byte of a key in its pointer step, JSON-string-encoded: `~0`, `~1`,
/// an escaped quote or backslash, `\u00XX` for a control byte.
fn push_escaped(buf: &mut Vec<u8>, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match b {
        b'~' => buf.extend_from_slice(b"~0"),
        b'/' => buf.extend_from_slice(b"~1"),
        b'"' => buf.extend_from_slice(b"\\\""),
        b'\\' => buf.extend_from_slice(b"\\\\"),
        _ => {
            buf.extend_from_slice(b"\\u00");
            buf.push(HEX[(b >> 4) as usize & 15]);
            buf.push(HEX[(b & 15) as usize]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{PointerBuf, MAX_PATH_BYTES};

    /// The byte-by-byte encoding `push_key` had before it copied plain runs.
    fn push_key_bytewise(p: &mut PointerBuf, key: &[u8]) {
        p.buf.push(b'/');
        for &b in key {
            match b {
                b'~' => p.buf.extend_from_slice(b"~0"),
                b'/' => p.buf.extend_from_slice(b"~1"),
                b'"' => p.buf.extend_from_slice(b"\\\""),
                b'\\' => p.buf.extend_from_slice(b"\\\\"),
                0..=0x1F => p.buf.extend_from_slice(format!("\\u{:04x}", b).as_bytes()),
                _ => p.buf.push(b),
            }
            if p.buf.len() > MAX_PATH_BYTES {
                break;
            }
        }
        p.check();
    }

    #[test]
    fn push_key_matches_the_byte_walk() {
        let alphabet: &[u8] = b"ab~/\"\\\x00\x1f\n \xc3\xa9z";
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for round in 0..20_000 {
            let len = next(if round % 10 == 0 { 400 } else { 24 }) as usize;
            let key: Vec<u8> = (0..len)
                .map(|_| alphabet[next(alphabet.len() as u64) as usize])
                .collect();
            // Some keys go on a path already near the cap.
            let prefix = next(3) as usize * 120;
            let mut fast = PointerBuf::new();
            let mut slow = PointerBuf::new();
            for _ in 0..prefix / 10 {
                fast.push_index(123_456_789);
                slow.push_index(123_456_789);
            }
            fast.push_key(&key, true);
            push_key_bytewise(&mut slow, &key);
            assert_eq!(fast.get(), slow.get(), "key {key:?} after {prefix}");
            assert_eq!(fast.overflowed(), slow.overflowed());
            if !slow.overflowed() {
                assert_eq!(fast.len(), slow.len());
            }
        }
    }
}
