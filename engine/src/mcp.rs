//! The MCP projection: budget the `result` of a `tools/call` (or `tasks/result`)
//! response while it streams, and pass the rest of the JSON-RPC message through.
//!
//! The driver knows the shape of a `CallToolResult` (result object, `content`
//! blocks, embedded `resource`, `_meta`) and hands every free-form value
//! (`structuredContent`, annotations, a block's `_meta`, …) to the generic
//! `ValueBudget`. Contract: `specs/mcp-result-contract.md`.

use crate::budget::{Step, ValueBudget};
use crate::error::Error;
use crate::limits::Limits;
use crate::out::Out;
use crate::record::{push_u64, u64_digits, BudgetKind, PointerBuf, Record, RecordMark};
use crate::tokenizer::{hex4, is_low_escape, Lit, Tok, Tokenizer};

/// Limits of the MCP projection. `u64::MAX` means no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpLimits {
    /// Encoded bytes of the whole `result` value, truncation record included.
    /// Protects: the client's context and transport. Does not bound: the rest of
    /// the JSON-RPC envelope (`jsonrpc`, `id`), which passes unchanged.
    pub max_result_bytes: u64,
    /// Decoded text bytes kept across all text blocks and embedded resource texts,
    /// markers included. Protects: context spent on text. First come, first served.
    pub max_text_bytes: u64,
    /// Decoded text bytes kept per text block (or resource text), marker included.
    /// Protects: one block starving the others.
    pub max_text_block_bytes: u64,
    /// Content blocks kept (the first N; dropped blocks do not count).
    pub max_content_blocks: u64,
    /// For `structuredContent` and every other free-form value: items per array.
    pub max_list_items: u64,
    /// Members per object in free-form values.
    pub max_map_keys: u64,
    /// Decoded bytes per string in free-form values (not text blocks, not blobs).
    pub max_string_bytes: u64,
    /// Nesting kept in free-form values; `structuredContent` itself is level 1.
    pub max_depth: u32,
    /// Encoded bytes of `structuredContent`. Protects: the typed twin of the
    /// text eating the whole result budget.
    pub max_structured_bytes: u64,
    /// Input nesting refused as an error (see [`Limits::max_nesting`]).
    pub max_nesting: u32,
}

/// Smallest accepted `max_result_bytes` for the MCP projection: room for the
/// record without paths and a typed-success error result.
pub const MIN_MCP_RESULT_BYTES: u64 = 1024;

impl McpLimits {
    pub const DEFAULT: McpLimits = McpLimits {
        max_result_bytes: 64 * 1024,
        max_text_bytes: 48 * 1024,
        max_text_block_bytes: 16 * 1024,
        max_content_blocks: 50,
        max_list_items: 100,
        max_map_keys: 100,
        max_string_bytes: 4 * 1024,
        max_depth: 16,
        max_structured_bytes: 32 * 1024,
        max_nesting: crate::tokenizer::DEFAULT_MAX_NESTING,
    };

    pub const UNLIMITED: McpLimits = McpLimits {
        max_result_bytes: u64::MAX,
        max_text_bytes: u64::MAX,
        max_text_block_bytes: u64::MAX,
        max_content_blocks: u64::MAX,
        max_list_items: u64::MAX,
        max_map_keys: u64::MAX,
        max_string_bytes: u64::MAX,
        max_depth: u32::MAX,
        max_structured_bytes: u64::MAX,
        max_nesting: crate::tokenizer::DEFAULT_MAX_NESTING,
    };

    pub fn validate(&self) -> Result<(), String> {
        if self.max_result_bytes < MIN_MCP_RESULT_BYTES {
            return Err(format!(
                "max_result_bytes must be at least {MIN_MCP_RESULT_BYTES} for MCP results, got {}",
                self.max_result_bytes
            ));
        }
        if self.max_nesting == 0 {
            return Err("max_nesting must be at least 1".into());
        }
        Ok(())
    }

    /// Limits for free-form values (structuredContent, _meta, annotations, …).
    pub fn free(&self) -> Limits {
        Limits {
            max_list_items: self.max_list_items,
            max_map_keys: self.max_map_keys,
            max_string_bytes: self.max_string_bytes,
            max_depth: self.max_depth,
            max_result_bytes: u64::MAX,
            max_nesting: self.max_nesting,
        }
    }

    /// The same limits with every per-element cut switched off: only the final
    /// ceiling stays (used for typed tools, which are whole or an error).
    pub fn whole_only(&self) -> McpLimits {
        McpLimits {
            max_result_bytes: self.max_result_bytes,
            max_nesting: self.max_nesting,
            ..McpLimits::UNLIMITED
        }
    }
}

impl Default for McpLimits {
    fn default() -> Self {
        McpLimits::DEFAULT
    }
}

/// What the caller knows about the call a response answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallInfo {
    /// The tool's name, for receipts and error texts.
    pub tool: Option<String>,
    /// The tool must return a schema-valid result (it has an `outputSchema`,
    /// or the inventory says so): never a partial success.
    pub typed: bool,
    /// The tool does not change state (annotation `readOnlyHint` or inventory).
    pub read_only: bool,
    /// The request's raw JSON id, for receipts (else the response's own id is used).
    pub request_id: Option<Vec<u8>>,
    /// The call used the 2026-07-28 protocol: results the engine writes itself
    /// carry `resultType`.
    pub modern: bool,
}

/// How to treat one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Treat {
    /// Budget `result` as a `CallToolResult`.
    ToolResult(CallInfo),
    /// Pass the whole message unchanged (other methods' results, requests,
    /// notifications, errors).
    Pass,
}

/// Longest `id` (as written) the projector takes ([`Projector::id`]): ids
/// are a request's own small numbers or strings. Bounds what it holds of an
/// `id` while reading it; does not bound the `id` written on, which passes
/// whole.
pub const MAX_ID_BYTES: usize = 64;

/// The longest name of a member a result keeps: a longer key there is a
/// non-standard field, dropped.
const LONGEST_RESULT_KEY: usize = "structuredContent".len();
/// The longest name of a member a tool answer's envelope keeps: a longer key
/// there is one JSON-RPC does not define, dropped.
const LONGEST_ENVELOPE_KEY: usize = "jsonrpc".len();

/// The record key merged into `result._meta`.
pub const RECORD_KEY: &str = "resultbudget/truncation";
/// The receipt key for a typed mutation whose result was too large.
pub const RECEIPT_KEY: &str = "resultbudget/receipt";

const META_WRAP_OPEN: &[u8] = b",\"_meta\":{\"resultbudget/truncation\":{";
const ORIGINAL_FIELD: &[u8] = b",\"original_bytes\":";
/// Bytes reserved for the record (without paths) from the moment `result` opens.
const RECORD_RESERVE: u64 =
    (META_WRAP_OPEN.len() + Record::BASE_FIELDS_LEN + ORIGINAL_FIELD.len() + 20 + 2) as u64;
/// Room kept for `,"isError":false` until it is seen: an error must never be lost.
const IS_ERROR_RESERVE: u64 = 16;
/// Room kept to the end of the result for a last `,"isError":…`: a duplicate
/// `isError` that comes when the room is spent still decides the verdict
/// (JSON parsers keep the last), so the result ends with the input's last.
const IS_ERROR_LAST_RESERVE: u64 = 16;
/// Room kept for `,"resultType":"…"` (up to 32 characters of type) until it is seen.
const RESULT_TYPE_RESERVE: u64 = 48;

const MARKER_HEAD: &str = "\\n[resultbudget: output cut, ";
const MARKER_MID: &str = " of ";
const MARKER_TAIL: &str = " bytes omitted]";

fn digits(mut v: u64) -> u64 {
    let mut n = 1;
    while v >= 10 {
        v /= 10;
        n += 1;
    }
    n
}

/// Encoded length of the marker for a string of `total` decoded bytes (an upper
/// bound: the omitted count has at most as many digits as the total).
fn marker_len(total: u64) -> u64 {
    (MARKER_HEAD.len() + MARKER_MID.len() + MARKER_TAIL.len()) as u64 + 2 * digits(total)
}

/// Encoded length of the marker for exactly these numbers.
fn marker_len_for(omitted: u64, total: u64) -> u64 {
    (MARKER_HEAD.len() + MARKER_MID.len() + MARKER_TAIL.len()) as u64
        + digits(omitted)
        + digits(total)
}

/// Write the marker of a cut text, piece by piece (nothing allocated);
/// its length.
fn write_marker(out: &mut Out, omitted: u64, total: u64) -> u64 {
    let mut n = 0;
    for piece in [
        MARKER_HEAD.as_bytes(),
        u64_digits(omitted, &mut [0; 20]),
        MARKER_MID.as_bytes(),
        u64_digits(total, &mut [0; 20]),
        MARKER_TAIL.as_bytes(),
    ] {
        out.write(piece);
        n += piece.len() as u64;
    }
    n
}

/// The longest prefix of `enc` (valid JSON string content) made of whole units
/// whose decoded size is ≤ `max_dec` and encoded size ≤ `max_enc`, walked
/// from `from`: the (encoded, decoded) length of a prefix that is already
/// known to fit, `(0, 0)` or an earlier answer for limits no larger.
/// Returns (encoded length, decoded length).
///
/// The walk is greedy, so an answer for larger limits extends the answer
/// for smaller ones: a cut text whose marker turns out shorter than first
/// sized goes on from the first answer instead of walking its kept bytes
/// again.
///
/// This runs over a cut text's kept bytes (up to the text allowance, 60 KiB
/// by default) when the text ends, so on a result a little over budget it
/// is a large part of the work: the bytes between backslashes decode to
/// themselves and are taken a run at once, found with `memchr`, and only
/// escapes are read one by one. The walk of one unit at a time that it
/// replaced is kept in the tests as its oracle.
pub(crate) fn unit_prefix(
    enc: &[u8],
    from: (usize, u64),
    max_dec: u64,
    max_enc: u64,
) -> (usize, u64) {
    let (mut i, mut dec) = from;
    loop {
        let rest = enc.get(i..).unwrap_or_default();
        let run = memchr::memchr(b'\\', rest).unwrap_or(rest.len());
        // Room left under both limits; a run's bytes count the same in each.
        let room = max_dec
            .saturating_sub(dec)
            .min(max_enc.saturating_sub(i as u64));
        if run as u64 > room {
            // `room < run`, so it fits in a usize. Back off to the start of
            // the character the limit falls in (valid UTF-8: at most 3 bytes).
            let mut r = room as usize;
            while r > 0 && rest.get(r).is_some_and(|&b| b & 0xC0 == 0x80) {
                r -= 1;
            }
            return (i + r, dec + r as u64);
        }
        i += run;
        dec += run as u64;
        // At a backslash, or at the end.
        let Some(esc) = enc.get(i + 1) else {
            return (i, dec);
        };
        let (e, d) = if *esc == b'u' {
            match hex4(enc, i + 2).unwrap_or(0) {
                // A high surrogate: the pair is one unit of four bytes; one
                // with no low half after it (read as U+FFFD when lone
                // surrogates are on) is a unit of its own, as any lone one.
                0xD800..=0xDBFF if is_low_escape(enc, i + 6) => (12, 4),
                0..=0x7F => (6, 1),
                0x80..=0x7FF => (6, 2),
                _ => (6, 3),
            }
        } else {
            (2, 1)
        };
        if dec + d > max_dec || (i + e) as u64 > max_enc || i + e > enc.len() {
            return (i, dec);
        }
        i += e;
        dec += d;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Envelope,
    Result,
    Content,
    Block,
    Resource,
    Meta,
}

/// What to do with a child value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    /// Copy unchanged (envelope members).
    Pass,
    /// Generic budget with the free-form limits.
    Free,
    /// `structuredContent`: free-form limits inside its own byte scope.
    Structured,
    /// A known container level.
    Descend(Level),
    /// A text string (text budget, marker).
    Text,
    /// A base64 payload: whole, or the block goes.
    Blob,
    /// A block field that is never cut (`type`, `uri`, `name`, `mimeType`):
    /// whole, or the block goes.
    Whole,
    /// Drop the member (recorded with this kind).
    Drop(BudgetKind),
    /// The result's `isError`: a boolean is taken by `is_error_value`, any
    /// other value is budgeted like `Free`.
    IsError,
    /// The result's `isError` whose key did not fit (it is rolled back): a
    /// boolean is still taken for the end of the result; any other value is
    /// dropped (recorded with this kind).
    IsErrorBare(BudgetKind),
    /// The envelope's `id` (passed, and remembered).
    Id,
    /// A tool answer's JSON-RPC `error`: free-form limits under the result
    /// ceiling (its message lands in the model's context as a result would).
    AnswerError,
    /// A member JSON-RPC does not define in a tool answer's envelope:
    /// dropped, and not recorded (the record lives in the result, which may
    /// already be written).
    Omit,
}

/// Bits of [`Projector`]'s `envelope_keys`: the top-level keys read.
struct Envelope;

impl Envelope {
    const METHOD: u8 = 1;
    const ID: u8 = 2;
    const RESULT: u8 = 4;
    const ERROR: u8 = 8;
}

/// Why the driver asked the tokenizer to skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DSkip {
    /// One member or item dropped.
    DropOne,
    /// The rest of a block that cannot be kept whole.
    BlockFail,
    /// Content blocks past `max_content_blocks`.
    ContentTail,
    /// The rest of `_meta` after a member that did not fit.
    MetaRest(BudgetKind),
    /// The rest of a typed result that is over budget.
    TypedFail,
}

#[derive(Debug, Clone, Copy)]
struct DFrame {
    level: Level,
    kept: u64,
    seen: u64,
    path_len: usize,
    path_ovf: bool,
    /// Output position where this container (its comma included) starts.
    start_mark: u64,
    /// A block that can no longer be kept whole.
    failed: Option<BudgetKind>,
    /// `Out::reserved` before this container opened.
    reserved_at_open: u64,
}

/// A text or blob string in progress.
#[derive(Debug, Clone, Copy)]
struct StrChild {
    act: Act,
    /// Output position just after the opening quote.
    start: u64,
    dec_allow: u64,
    enc_allow: u64,
    /// Nothing can cut or drop it (no allowance, no ceiling, no hold): its
    /// bytes are committed as they come, so it streams at any size (and goes
    /// straight into the caller's output, `Out::lend`).
    streams: bool,
}

/// Project one JSON-RPC message at a time. Push chunks with [`Projector::feed`];
/// end each message with [`Projector::finish`]; then [`Projector::begin`] the next.
#[derive(Debug)]
pub struct Projector {
    lim: McpLimits,
    treat: Treat,
    /// The message is a typed tool's result (whole or an error).
    typed: bool,
    /// The limits in force for this message (whole-only for typed tools).
    eff: McpLimits,
    lex: Tokenizer,
    out: Out,
    vb: ValueBudget,
    vb_act: Option<Act>,
    rec: Record,
    frames: Vec<DFrame>,
    path: PointerBuf,
    pending: Option<Act>,
    key_mark: u64,
    key_doom: Option<BudgetKind>,
    str_child: Option<StrChild>,
    text_left: u64,
    result_mark: Option<u64>,
    result_in_start: u64,
    result_done: bool,
    original_bytes: u64,
    meta_at: Option<(u64, bool)>,
    reserve_is_error: bool,
    /// The value of the latest `isError` of the result when it is a boolean.
    is_error_in: Option<bool>,
    /// The value of the latest `isError` written so far when it is a boolean.
    is_error_out: Option<bool>,
    reserve_result_type: bool,
    typed_failed: bool,
    digest: u64,
    hash_from: Option<usize>,
    id_mark: Option<u64>,
    id_hold: bool,
    id: Vec<u8>,
    /// The top-level keys read of those the envelope's kind hangs on
    /// ([`Envelope`]'s bits).
    envelope_keys: u8,
    /// Why the message is not one answer, from the member that showed it:
    /// `id`, `result` or `error` a second time, or both `result` and `error`.
    repeated: Option<&'static str>,
    /// Envelope members dropped as [`Act::Omit`].
    omitted_members: u64,
    block_hold: bool,
    /// The hold of a text string in progress (when no block hold covers it).
    text_hold: bool,
    /// At a block's start: the record, the text budget and the listed paths'
    /// size, restored if the block is dropped (its inner cuts vanish with it).
    block_mark: Option<(RecordMark, u64, usize)>,
    /// Where a typed error result goes once the message's id is known.
    error_at: Option<u64>,
    dskip: Option<DSkip>,
    done: bool,
    /// Scratch for building the record and error results.
    scratch: Vec<u8>,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

impl Projector {
    pub fn new(lim: McpLimits) -> Result<Projector, String> {
        lim.validate()?;
        let mut p = Projector {
            lim,
            treat: Treat::Pass,
            typed: false,
            eff: lim,
            lex: Tokenizer::new(lim.max_nesting),
            out: Out::default(),
            vb: ValueBudget::new(lim.free()),
            vb_act: None,
            rec: Record::new(),
            frames: Vec::with_capacity(8),
            path: PointerBuf::new(),
            pending: None,
            key_mark: 0,
            key_doom: None,
            str_child: None,
            text_left: 0,
            result_mark: None,
            result_in_start: 0,
            result_done: false,
            original_bytes: 0,
            meta_at: None,
            reserve_is_error: false,
            is_error_in: None,
            is_error_out: None,
            reserve_result_type: false,
            typed_failed: false,
            digest: FNV_OFFSET,
            hash_from: None,
            id_mark: None,
            id_hold: false,
            id: Vec::with_capacity(MAX_ID_BYTES),
            envelope_keys: 0,
            repeated: None,
            omitted_members: 0,
            block_hold: false,
            text_hold: false,
            block_mark: None,
            error_at: None,
            dskip: None,
            done: false,
            scratch: Vec::with_capacity(1024),
        };
        // Nothing here reads strings' characters.
        p.lex.set_count_chars(false);
        p.begin(Treat::Pass);
        Ok(p)
    }

    pub fn limits(&self) -> &McpLimits {
        &self.lim
    }

    /// Read a lone surrogate escape (`"\\ud83d"`) as U+FFFD instead of
    /// refusing the input: [`crate::tokenizer::Tokenizer::set_lone_surrogates`].
    pub fn set_lone_surrogates(&mut self, on: bool) {
        self.lex.set_lone_surrogates(on);
    }

    /// Use other limits from the next `begin` on (they must be valid).
    pub fn set_limits(&mut self, lim: McpLimits) {
        if lim.validate().is_ok() {
            self.lim = lim;
        }
    }

    /// The treatment of the message begun last ([`Projector::begin`]).
    pub fn treat(&self) -> &Treat {
        &self.treat
    }

    /// Take the treatment of the message begun last (leaving
    /// [`Treat::Pass`]), for its buffers.
    pub(crate) fn take_treat(&mut self) -> Treat {
        std::mem::replace(&mut self.treat, Treat::Pass)
    }

    /// Start a new message.
    pub fn begin(&mut self, treat: Treat) {
        self.eff = match &treat {
            Treat::ToolResult(c) if c.typed => self.lim.whole_only(),
            _ => self.lim,
        };
        self.typed = matches!(&treat, Treat::ToolResult(c) if c.typed);
        self.treat = treat;
        self.lex.reset();
        self.out.reset();
        self.rec.reset();
        self.frames.clear();
        self.path.clear();
        self.vb_act = None;
        self.pending = Some(Act::Descend(Level::Envelope));
        self.key_doom = None;
        self.str_child = None;
        self.text_left = self.eff.max_text_bytes;
        self.result_mark = None;
        self.result_done = false;
        self.original_bytes = 0;
        self.meta_at = None;
        self.reserve_is_error = false;
        self.is_error_in = None;
        self.is_error_out = None;
        self.reserve_result_type = false;
        self.typed_failed = false;
        self.digest = FNV_OFFSET;
        self.hash_from = None;
        self.id_mark = None;
        self.id_hold = false;
        self.id.clear();
        self.envelope_keys = 0;
        self.repeated = None;
        self.omitted_members = 0;
        self.block_hold = false;
        self.text_hold = false;
        self.block_mark = None;
        self.error_at = None;
        self.dskip = None;
        self.done = false;
    }

    /// The record of the current message (complete after `finish`).
    pub fn record(&self) -> &Record {
        &self.rec
    }

    /// The raw JSON of the message's `id`, once seen: of its last top-level
    /// `id` read so far, the one a reader keeps (none if that one is longer
    /// than 64 bytes).
    pub fn id(&self) -> Option<&[u8]> {
        (!self.id.is_empty()).then_some(self.id.as_slice())
    }

    /// Whether the message has a top-level `method` (so far): a request or a
    /// notification, whose `id` (if any) is its sender's, not an answer's.
    pub fn has_method(&self) -> bool {
        self.envelope_keys & Envelope::METHOD != 0
    }

    /// Whether the message has a top-level `result` or `error` key (so far):
    /// it began as an answer, even if it breaks before its `id`.
    pub fn has_answer(&self) -> bool {
        self.envelope_keys & (Envelope::RESULT | Envelope::ERROR) != 0
    }

    /// Why the message is not one answer (so far), if it is not: its
    /// top-level `id`, `result` or `error` came twice (the phrase names the
    /// first that did), or it has both a `result` and an `error`, which
    /// JSON-RPC forbids. A reader keeps the last of duplicate members, so
    /// such an answer may be read as answering another request than the first
    /// `id` says, or by another `result` than the first.
    ///
    /// Of a tool answer the projector keeps the first `result` or `error` and
    /// drops the others (counted in [`Projector::omitted_members`]), so its
    /// output stays one bounded answer (earlier builds budgeted each on its
    /// own, so the output grew with each); every `id` passes. The proxy,
    /// `filter` and the writers of [`crate::transport`] keep none of such a
    /// line, and read it to its end for its last `id` (`docs/proxy.md`).
    pub fn repeated(&self) -> Option<&'static str> {
        self.repeated
    }

    /// Members of a tool answer's envelope that JSON-RPC does not define
    /// (anything but `jsonrpc`, `id`, `method`, `params`, `result` and
    /// `error`), dropped so far. They are not in the record, which lives in
    /// the result and may already be written when one comes.
    pub fn omitted_members(&self) -> u64 {
        self.omitted_members
    }

    /// Encoded size of the original `result` value (after `finish`).
    pub fn original_bytes(&self) -> u64 {
        self.original_bytes
    }

    /// Whether a typed result was replaced by a `result_budget_exceeded` error.
    pub fn typed_failed(&self) -> bool {
        self.typed_failed
    }

    /// Turn the fast paths off (or back on): the keeping loop, and the copy
    /// of a string's plain prefix as it is scanned at the start of a feed.
    /// For tests that compare them with the token-by-token path; the output
    /// is the same either way.
    #[doc(hidden)]
    pub fn set_fast_keep(&mut self, on: bool) {
        self.vb.fast = on;
    }

    /// Push the next chunk of the message; committed output is appended to `out`.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), Error> {
        if self.hash_from.is_some() {
            self.hash_from = Some(0);
        }
        // Kept bytes go straight into `out` (one copy) unless a long
        // uncommitted tail is pending; `Out::lend` says why.
        let lent = self.out.lend(out, input.len());
        let res = self.feed_tokens(input);
        if res.is_ok() {
            self.let_go_of_a_long_id();
        }
        self.out.end_feed(out, lent, res.is_ok());
        res?;
        if let Some(from) = self.hash_from {
            self.digest = fnv1a(self.digest, input.get(from..).unwrap_or(&[]));
        }
        Ok(())
    }

    /// An `id` is held while it is read, so that it can be taken whole from
    /// the output; one longer than [`MAX_ID_BYTES`] is not taken, so it need
    /// not be held either. Without this a 100 MB `id` (which passes whole,
    /// as every envelope member but the answer does) was held whole.
    fn let_go_of_a_long_id(&mut self) {
        if let (true, Some(m)) = (self.id_hold, self.id_mark) {
            if self.out.pos().saturating_sub(m) > MAX_ID_BYTES as u64 {
                self.out.release();
                self.out.commit();
                self.id_hold = false;
                self.id_mark = None;
                // The last `id` is the one a reader keeps: none is held.
                self.id.clear();
            }
        }
    }

    fn feed_tokens(&mut self, input: &[u8]) -> Result<(), Error> {
        let mut pos = 0;
        if !self.done && self.vb.fast {
            // A feed that goes on inside a long kept string: its plain prefix
            // is copied as it is scanned, then handled as the span `next`
            // would have returned (a span changes nothing `step`'s
            // typed-result check reads).
            if self.vb_act.is_some() {
                pos = self.vb.take_plain(&mut self.lex, input, &mut self.out);
            } else {
                pos = self.lex.take_plain_into(input, self.out.tail_mut());
                if pos > 0 {
                    // `driver_span`, less the write.
                    self.after_span();
                }
            }
            if pos > 0 && self.lex.try_end_chunk(input, pos) {
                return Ok(());
            }
        }
        loop {
            if self.vb_act.is_some() && !self.done {
                self.vb
                    .fast_keep(&mut self.lex, input, &mut pos, &mut self.out);
            }
            let tok = self.lex.next(input, &mut pos)?;
            match tok {
                Tok::NeedMore => return Ok(()),
                // A span of a string at a driver level (the usual token of a
                // feed inside a long text or blob): what `step` would do with
                // it, without its dispatch. A span changes nothing `step`'s
                // typed-result check reads, so that check is not owed here.
                Tok::StrSpan(a, b) if !self.done && self.vb_act.is_none() => {
                    self.driver_span(input, a, b);
                }
                _ => self.step(tok, input, pos)?,
            }
            if self.lex.try_end_chunk(input, pos) {
                return Ok(());
            }
        }
    }

    /// The message ended: flush the rest. The record is then complete.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<&Record, Error> {
        loop {
            let tok = self.lex.next_eof()?;
            if tok == Tok::Eof {
                break;
            }
            self.step(tok, &[], 0)?;
        }
        if let Some(at) = self.error_at.take() {
            let err = self.typed_error();
            self.out.insert(at, &err);
            self.out.release();
        }
        self.out.commit();
        self.out.drain_into(out);
        Ok(&self.rec)
    }

    fn step(&mut self, tok: Tok, chunk: &[u8], pos: usize) -> Result<(), Error> {
        if self.done {
            return Ok(());
        }
        let forward = self.vb_act.is_some() || self.driver(tok, chunk, pos);
        if let (true, Some(act)) = (forward, self.vb_act) {
            let step = self
                .vb
                .token(tok, chunk, &mut self.lex, &mut self.out, &mut self.rec)?;
            match step {
                Step::More => {}
                Step::Done => {
                    self.vb_act = None;
                    self.vb_done(act);
                }
                Step::Omitted => {
                    self.vb_act = None;
                    self.vb_omitted(act);
                }
            }
        }
        if self.typed
            && self.eff.max_result_bytes != u64::MAX
            && !self.typed_failed
            && self.result_mark.is_some()
            && !self.result_done
            && self.rec.cut_other_than(BudgetKind::NonStandardField)
        {
            self.fail_typed();
        }
        Ok(())
    }

    /// Record a cut at the current path, listing the path only if the record
    /// still has room for it inside the result ceiling.
    fn add_cut(&mut self, kind: BudgetKind, count: u64) {
        self.out
            .add_cut(&mut self.rec, kind, count, self.path.get());
    }

    fn top_depth(&self) -> u32 {
        self.frames.len() as u32
    }

    fn top_level(&self) -> Option<Level> {
        self.frames.last().map(|f| f.level)
    }

    /// The action for a member `key` of a container at `level`.
    fn classify(&self, level: Level, key: &[u8]) -> Act {
        let project = matches!(self.treat, Treat::ToolResult(_));
        match level {
            Level::Envelope => match key {
                b"result" if project => Act::Descend(Level::Result),
                b"error" if project => Act::AnswerError,
                b"id" => Act::Id,
                // A request the server sends while a call is pending (sampling,
                // elicitation) is a message like any other: it passes whole.
                b"jsonrpc" | b"method" | b"params" => Act::Pass,
                _ if project => Act::Omit,
                _ => Act::Pass,
            },
            Level::Result => match key {
                b"content" => Act::Descend(Level::Content),
                b"structuredContent" => Act::Structured,
                b"_meta" => Act::Descend(Level::Meta),
                b"isError" => Act::IsError,
                b"resultType" | b"requestState" | b"inputRequests" | b"task" => Act::Free,
                _ => Act::Drop(BudgetKind::NonStandardField),
            },
            Level::Block => match key {
                b"text" => Act::Text,
                b"data" => Act::Blob,
                b"resource" => Act::Descend(Level::Resource),
                b"type" | b"uri" | b"name" | b"mimeType" => Act::Whole,
                _ => Act::Free,
            },
            Level::Resource => match key {
                b"text" => Act::Text,
                b"blob" => Act::Blob,
                b"uri" | b"mimeType" => Act::Whole,
                _ => Act::Free,
            },
            Level::Meta => {
                if key == RECORD_KEY.as_bytes() {
                    // A tool may not forge the engine's own record.
                    Act::Drop(BudgetKind::NonStandardField)
                } else {
                    Act::Free
                }
            }
            Level::Content => Act::Descend(Level::Block),
        }
    }

    /// Whether this level lives under the result's byte ceiling.
    fn bounded(&self) -> bool {
        self.result_mark.is_some() && !self.result_done
    }

    /// Handle a token at a driver level. Returns true when the token starts a
    /// value handed to the generic budget (the caller forwards it).
    fn driver(&mut self, tok: Tok, chunk: &[u8], pos: usize) -> bool {
        match tok {
            Tok::Skipped(n) => self.driver_skipped(n),
            Tok::StrBegin { key: true } => self.key_begin(),
            Tok::StrSpan(a, b) => self.driver_span(chunk, a, b),
            Tok::StrHeld => {
                let mut tmp = [0u8; 12];
                let held = self.lex.held();
                let n = held.len().min(12);
                if let (Some(d), Some(s)) = (tmp.get_mut(..n), held.get(..n)) {
                    d.copy_from_slice(s);
                }
                self.out.write(tmp.get(..n).unwrap_or(&[]));
                self.after_string_bytes();
            }
            Tok::StrEnd => {
                if self.lex.after_key() {
                    self.key_end();
                } else {
                    self.string_end();
                }
            }
            Tok::EndObject | Tok::EndArray => self.close(chunk, pos),
            Tok::NeedMore | Tok::Eof => {}
            _ => return self.value_start(tok, pos),
        }
        false
    }

    /// Room for a key being read: at result level the reserves kept for
    /// `isError`/`resultType` are usable (the key may be one of them; any other
    /// member meets the real room when its value starts).
    fn key_room(&self) -> u64 {
        let mut a = self.out.avail();
        if self.top_level() == Some(Level::Result) {
            if self.reserve_is_error {
                a = a.saturating_add(IS_ERROR_RESERVE);
            }
            if self.reserve_result_type {
                a = a.saturating_add(RESULT_TYPE_RESERVE);
            }
            // Always readable: an `isError` key must be seen whatever the room.
            a = a.saturating_add(IS_ERROR_LAST_RESERVE);
        }
        a
    }

    /// A span of the string being read at a driver level, `chunk[a..b]`.
    #[inline]
    fn driver_span(&mut self, chunk: &[u8], a: usize, b: usize) {
        self.out.write(chunk.get(a..b).unwrap_or(&[]));
        self.after_span();
    }

    /// What follows the write of a span at a driver level.
    #[inline]
    fn after_span(&mut self) {
        self.after_string_bytes();
        if self.str_child.is_some_and(|c| c.streams) {
            self.out.commit();
        }
    }

    fn after_string_bytes(&mut self) {
        if !self.lex.in_key_string() || self.key_doom.is_some() {
            return;
        }
        // A key longer than every name its level keeps will be dropped at its
        // end (a result's non-standard field; a tool answer's member JSON-RPC
        // does not define): it is written no further, so that however long it
        // is, it is not held. (Its decoded bytes are still read, for the
        // record's path.)
        let longest = match self.top_level() {
            Some(Level::Result) => Some(LONGEST_RESULT_KEY),
            Some(Level::Envelope) if matches!(self.treat, Treat::ToolResult(_)) => {
                Some(LONGEST_ENVELOPE_KEY)
            }
            _ => None,
        };
        if longest.is_some_and(|n| self.lex.key().len() > n) {
            self.out.rollback(self.key_mark);
            self.lex.stop_keeping();
            return;
        }
        if matches!(self.treat, Treat::Pass) && !self.out.is_held() {
            // Nothing of a passed message is rolled back: its keys stream on.
            self.out.commit();
            return;
        }
        if self.bounded() && self.key_room() < 3 {
            self.key_doom = Some(self.out.bytes_kind());
            self.out.rollback(self.key_mark);
            self.lex.stop_keeping();
        }
    }

    fn key_begin(&mut self) {
        let Some(f) = self.frames.last_mut() else {
            return;
        };
        f.seen += 1;
        let comma = f.kept > 0;
        self.key_mark = self.out.pos();
        self.key_doom = None;
        if comma {
            self.out.byte(b',');
        }
        self.out.byte(b'"');
        self.after_string_bytes();
    }

    fn key_end(&mut self) {
        let Some(level) = self.top_level() else {
            return;
        };
        let key_ok = !self.lex.key_overflowed();
        // A second `result` or `error` (of either name) of the envelope.
        let mut second_answer = false;
        if level == Level::Envelope {
            let (bit, twice) = match self.lex.key() {
                b"method" => (Envelope::METHOD, ""),
                b"id" => (Envelope::ID, "its top-level `id` comes twice"),
                b"result" => (Envelope::RESULT, "its top-level `result` comes twice"),
                b"error" => (Envelope::ERROR, "its top-level `error` comes twice"),
                _ => (0, ""),
            };
            // (`method` only tells a request from an answer: a second one
            // changes nothing here.)
            let answer = Envelope::RESULT | Envelope::ERROR;
            second_answer = bit & answer != 0 && self.envelope_keys & answer != 0;
            if self.repeated.is_none() {
                if self.envelope_keys & bit & !Envelope::METHOD != 0 {
                    self.repeated = Some(twice);
                } else if second_answer {
                    self.repeated = Some("it has both a `result` and an `error`");
                }
            }
            self.envelope_keys |= bit;
        }
        self.path.push_key(self.lex.key(), key_ok);
        let act = if second_answer && matches!(self.treat, Treat::ToolResult(_)) {
            // Dropped: one answer's output is bounded by one ceiling (each
            // `result` or `error` would get the whole of it), and a typed
            // result's verdict has one place to go. The message is not one
            // answer (`repeated`); its first `result` or `error` is kept.
            Act::Omit
        } else if key_ok {
            self.classify(level, self.lex.key())
        } else {
            match level {
                Level::Result => Act::Drop(BudgetKind::NonStandardField),
                Level::Envelope if matches!(self.treat, Treat::ToolResult(_)) => Act::Omit,
                Level::Envelope => Act::Pass,
                _ => Act::Free,
            }
        };
        if level == Level::Result {
            // The reserves for small result fields are released when they arrive
            // (all but the one for a last `isError`, kept to the end).
            if self.lex.key() == b"isError" && self.reserve_is_error {
                self.reserve_is_error = false;
                self.out.reserved = self.out.reserved.saturating_sub(IS_ERROR_RESERVE);
            }
            if self.lex.key() == b"resultType" && self.reserve_result_type {
                self.reserve_result_type = false;
                self.out.reserved = self.out.reserved.saturating_sub(RESULT_TYPE_RESERVE);
            }
        }
        if let Some(kind) = self.key_doom.take() {
            self.out.rollback(self.key_mark);
            if act == Act::IsError {
                // Its value still counts: see `value_start`.
                self.pending = Some(Act::IsErrorBare(kind));
                return;
            }
            self.cannot_fit(kind, false);
            return;
        }
        if let Act::Drop(_) | Act::Omit = act {
            self.out.rollback(self.key_mark);
            match act {
                Act::Drop(kind) => self.add_cut(kind, 1),
                _ => self.omitted_members += 1,
            }
            self.lex.skip_one(self.top_depth());
            self.dskip = Some(DSkip::DropOne);
            self.pending = None;
            return;
        }
        self.out.write(b"\":");
        self.pending = Some(act);
    }

    /// A member or item of the top driver frame does not fit even in its
    /// smallest form (the output is already rolled back to its start).
    /// `started`: its value's first token was consumed.
    fn cannot_fit(&mut self, kind: BudgetKind, started: bool) {
        let Some(level) = self.top_level() else {
            return;
        };
        self.pending = None;
        match level {
            Level::Block | Level::Resource => self.fail_block(kind),
            Level::Meta => {
                // Prefix rule inside _meta: this member and the rest go.
                self.lex.skip_rest(self.top_depth(), u64::from(started));
                self.dskip = Some(DSkip::MetaRest(kind));
            }
            Level::Content | Level::Result | Level::Envelope => {
                // Drop this one and go on: a later small field (isError) may still fit.
                self.add_cut(kind, 1);
                self.lex.skip_one(self.top_depth());
                self.dskip = Some(DSkip::DropOne);
            }
        }
    }

    /// The nearest block can no longer be kept whole: skip its rest, drop it at its end.
    fn fail_block(&mut self, kind: BudgetKind) {
        let Some(b) = self.frames.iter().rposition(|f| f.level == Level::Block) else {
            return;
        };
        if let Some(f) = self.frames.get_mut(b) {
            if f.failed.is_none() {
                f.failed = Some(kind);
            }
        }
        self.str_child = None;
        self.drop_text_hold();
        self.vb_act = None;
        self.pending = None;
        self.lex.skip_rest(b as u32 + 1, 0);
        self.dskip = Some(DSkip::BlockFail);
    }

    fn drop_text_hold(&mut self) {
        if self.text_hold {
            self.out.release();
            self.text_hold = false;
        }
    }

    fn fail_typed(&mut self) {
        let Some(r) = self.frames.iter().rposition(|f| f.level == Level::Result) else {
            return;
        };
        self.typed_failed = true;
        self.vb_act = None;
        self.str_child = None;
        self.drop_text_hold();
        self.pending = None;
        self.frames.truncate(r + 1);
        if let Some(m) = self.result_mark {
            self.out.rollback(m);
        }
        self.lex.skip_rest(r as u32 + 1, 0);
        self.dskip = Some(DSkip::TypedFail);
    }

    fn driver_skipped(&mut self, n: u64) {
        match self.dskip.take() {
            Some(DSkip::DropOne) => self.child_end(),
            Some(DSkip::BlockFail) => {
                if let Some(b) = self.frames.iter().rposition(|f| f.level == Level::Block) {
                    self.frames.truncate(b + 1);
                    if let Some(f) = self.frames.last() {
                        self.path.truncate(f.path_len, f.path_ovf);
                    }
                }
            }
            Some(DSkip::ContentTail) => {
                if let Some(f) = self.frames.last() {
                    let (len, ovf) = (self.path.len(), self.path.overflowed());
                    self.path.push_index(f.seen);
                    self.add_cut(BudgetKind::ContentBlocks, n);
                    self.path.truncate(len, ovf);
                }
            }
            Some(DSkip::MetaRest(kind)) => {
                self.add_cut(kind, n);
                if let Some(f) = self.frames.last() {
                    self.path.truncate(f.path_len, f.path_ovf);
                }
            }
            Some(DSkip::TypedFail) | None => {}
        }
    }

    /// The current child of the top driver frame is complete.
    fn child_end(&mut self) {
        self.pending = None;
        if let Some(f) = self.frames.last() {
            self.path.truncate(f.path_len, f.path_ovf);
        }
        self.out.commit();
    }

    fn value_start(&mut self, tok: Tok, pos: usize) -> bool {
        let act = if self.top_level() == Some(Level::Content) {
            let Some(f) = self.frames.last_mut() else {
                return false;
            };
            f.seen += 1;
            let comma = f.kept > 0;
            self.path.push_index(f.seen - 1);
            self.key_mark = self.out.pos();
            if comma {
                self.out.byte(b',');
            }
            Act::Descend(Level::Block)
        } else {
            if self.frames.is_empty() {
                self.key_mark = self.out.pos();
            }
            self.pending.take().unwrap_or(Act::Free)
        };
        if let Act::IsError | Act::IsErrorBare(_) = act {
            if let Tok::Lit(l @ (Lit::True | Lit::False)) = tok {
                self.is_error_value(l == Lit::True, act == Act::IsError);
                return false;
            }
            // Not a boolean: the input's last `isError` is no longer one.
            self.is_error_in = None;
            if let Act::IsErrorBare(kind) = act {
                self.drop_started(tok, kind);
                return false;
            }
            // Budgeted like any free value; the output's last `isError` is
            // no longer a boolean either.
            self.is_error_out = None;
        }
        let is_obj = tok == Tok::BeginObject;
        let is_str = tok == Tok::StrBegin { key: false };
        match act {
            Act::Descend(level)
                if (is_obj && level != Level::Content)
                    || (tok == Tok::BeginArray && level == Level::Content) =>
            {
                self.open(level, is_obj, pos);
                false
            }
            Act::Descend(Level::Meta) => {
                // A `_meta` that is not an object cannot carry the record: drop it.
                self.drop_started(tok, BudgetKind::NonStandardField);
                false
            }
            Act::Text | Act::Blob | Act::Whole if is_str => {
                self.open_string(act);
                false
            }
            Act::Drop(_) => false,
            _ => {
                let lim = match act {
                    // A message that is not an object (or is not budgeted) passes as it is.
                    Act::Pass | Act::Id | Act::Descend(Level::Envelope) => Limits {
                        max_nesting: self.lim.max_nesting,
                        ..Limits::UNLIMITED
                    },
                    _ => self.eff.free(),
                };
                if act == Act::Descend(Level::Result) {
                    // A `result` that is not an object: generic limits, and still the ceiling.
                    self.out
                        .open_scope(0, self.eff.max_result_bytes, BudgetKind::ResultBytes);
                }
                if act == Act::Structured {
                    self.out.open_scope(
                        1,
                        self.eff.max_structured_bytes,
                        BudgetKind::StructuredBytes,
                    );
                }
                if act == Act::AnswerError {
                    self.out
                        .open_scope(0, self.eff.max_result_bytes, BudgetKind::ResultBytes);
                }
                if act == Act::Id {
                    self.id_mark = Some(self.out.pos());
                    if !self.out.is_held() {
                        self.out.hold_here();
                        self.id_hold = true;
                    }
                }
                if let Some(f) = self.frames.last_mut() {
                    f.kept += 1;
                }
                self.vb
                    .begin(lim, &self.path, self.top_depth(), self.key_mark);
                self.vb_act = Some(act);
                true
            }
        }
    }

    /// Drop the member whose value starts with `tok` (its key is rolled back),
    /// recorded with `kind`, and skip the rest of the value.
    fn drop_started(&mut self, tok: Tok, kind: BudgetKind) {
        self.out.rollback(self.key_mark);
        self.add_cut(kind, 1);
        if matches!(tok, Tok::Lit(_)) {
            // Already complete: nothing to skip.
            self.child_end();
        } else {
            self.lex.skip_one(self.top_depth());
            self.dskip = Some(DSkip::DropOne);
        }
    }

    /// A boolean `isError` of the result (`keyed`: its key and `":` are
    /// written). It stays in place when it fits; otherwise it goes, and
    /// `result_end` writes the input's last value from the room kept for it.
    /// So a result always ends with the verdict the input ends with, and a
    /// client that keeps the last of duplicate members (as JSON parsers do)
    /// reads the same one.
    fn is_error_value(&mut self, v: bool, keyed: bool) {
        let lit: &[u8] = if v { b"true" } else { b"false" };
        self.is_error_in = Some(v);
        if keyed && self.out.avail() >= lit.len() as u64 {
            self.out.write(lit);
            if let Some(f) = self.frames.last_mut() {
                f.kept += 1;
            }
            self.is_error_out = Some(v);
        } else {
            self.out.rollback(self.key_mark);
        }
        self.child_end();
    }

    fn open(&mut self, level: Level, obj: bool, pos: usize) {
        let reserved_at_open = self.out.reserved;
        if level == Level::Result {
            self.result_mark = Some(self.out.pos());
            self.result_in_start = self.lex.offset_at(pos).saturating_sub(1);
            // A typed result fails only by crossing the ceiling (its element
            // limits are off): without one its verdict is known, and it
            // streams instead of being held whole.
            let can_fail = self.typed && self.eff.max_result_bytes != u64::MAX;
            if can_fail && matches!(&self.treat, Treat::ToolResult(c) if !c.read_only) {
                // Only a mutation's receipt needs the digest of the original bytes.
                self.hash_from = Some(pos.saturating_sub(1));
            }
            self.out
                .open_scope(0, self.eff.max_result_bytes, BudgetKind::ResultBytes);
            if can_fail {
                self.out.hold_here();
            }
        } else if self.bounded() && 2 > self.out.avail() {
            self.out.rollback(self.key_mark);
            let kind = self.out.bytes_kind();
            self.cannot_fit(kind, true);
            return;
        }
        self.out.byte(if obj { b'{' } else { b'[' });
        self.out.reserved += 1;
        if level == Level::Result {
            self.path.clear();
            self.out.record_reserve = RECORD_RESERVE;
            // The record goes inside the result: its paths take room from the ceiling.
            self.out.record_inside = true;
            self.out.reserved += IS_ERROR_RESERVE + IS_ERROR_LAST_RESERVE + RESULT_TYPE_RESERVE;
            self.reserve_is_error = true;
            self.reserve_result_type = true;
        }
        if level == Level::Block {
            // A block is held so it can be dropped whole; without a ceiling it
            // can never need to be (nothing is short of room), so it streams.
            if !self.out.is_held() && self.eff.max_result_bytes != u64::MAX {
                self.out.hold_here_at(self.key_mark);
                self.block_hold = true;
            }
            self.block_mark = Some((self.rec.checkpoint(), self.text_left, self.rec.paths_len()));
        }
        if let Some(f) = self.frames.last_mut() {
            f.kept += 1;
        }
        self.frames.push(DFrame {
            level,
            kept: 0,
            seen: 0,
            path_len: self.path.len(),
            path_ovf: self.path.overflowed(),
            start_mark: self.key_mark,
            failed: None,
            reserved_at_open,
        });
        self.out.commit();
        if level == Level::Content && self.eff.max_content_blocks == 0 {
            self.lex.skip_rest(self.top_depth(), 0);
            self.dskip = Some(DSkip::ContentTail);
        }
    }

    fn open_string(&mut self, act: Act) {
        if 2 > self.out.avail() {
            self.out.rollback(self.key_mark);
            let kind = self.out.bytes_kind();
            self.cannot_fit(kind, true);
            return;
        }
        self.out.byte(b'"');
        self.out.reserved += 1;
        if let Some(f) = self.frames.last_mut() {
            f.kept += 1;
        }
        let enc_allow = self.out.avail();
        let dec_allow = match act {
            Act::Text => self.eff.max_text_block_bytes.min(self.text_left),
            _ => u64::MAX,
        };
        self.lex.set_string_allowance(dec_allow, enc_allow);
        let uncuttable = dec_allow == u64::MAX && self.eff.max_result_bytes == u64::MAX;
        if act == Act::Text && !self.out.is_held() && !uncuttable {
            // A cut text is backed off to make room for its marker: its kept
            // bytes (at most the text allowance) stay uncommitted until it ends.
            // With neither a text allowance nor a ceiling it cannot be cut, so
            // it streams instead of being held whole.
            self.out.hold_here();
            self.text_hold = true;
        }
        self.str_child = Some(StrChild {
            act,
            start: self.out.pos(),
            dec_allow,
            enc_allow,
            // A blob or a whole-kept field cannot be cut or dropped without
            // a ceiling either (content is never under the structured scope),
            // so it streams too.
            streams: uncuttable && !self.out.is_held(),
        });
    }

    fn string_end(&mut self) {
        let Some(sc) = self.str_child.take() else {
            return;
        };
        let cut = self.lex.string_cut();
        let total = self.lex.string_decoded_len();
        if sc.act == Act::Blob || sc.act == Act::Whole {
            if cut {
                let kind = if sc.act == Act::Blob {
                    BudgetKind::Blob
                } else {
                    self.out.bytes_kind()
                };
                self.fail_block(kind);
                return;
            }
        } else if cut {
            let m = marker_len(total);
            let kind = if self.lex.cut_by_decoded() {
                if self.text_left < self.eff.max_text_block_bytes {
                    BudgetKind::TextBytes
                } else {
                    BudgetKind::TextBlockBytes
                }
            } else {
                self.out.bytes_kind()
            };
            if sc.dec_allow >= m - 1 && sc.enc_allow >= m {
                // The marker's `\n` is two encoded bytes and one decoded byte. First
                // fit with the widest marker, then again with the marker the cut
                // really needs (fewer omitted bytes never need more digits).
                let kept = self.out.tail_from(sc.start);
                let (mut e, mut d) =
                    unit_prefix(kept, (0, 0), sc.dec_allow - (m - 1), sc.enc_allow - m);
                let exact = marker_len_for(total - d, total);
                if exact < m {
                    // More room: the walk goes on from its first answer.
                    (e, d) = unit_prefix(
                        kept,
                        (e, d),
                        sc.dec_allow - (exact - 1),
                        sc.enc_allow - exact,
                    );
                }
                self.out.rollback(sc.start + e as u64);
                let ml = write_marker(&mut self.out, total - d, total);
                self.text_left = self.text_left.saturating_sub(d + ml - 1);
            } else {
                self.out.rollback(sc.start);
                self.text_left = 0;
            }
            self.add_cut(kind, 1);
        } else {
            self.text_left = self.text_left.saturating_sub(total);
        }
        self.out.byte(b'"');
        self.out.reserved = self.out.reserved.saturating_sub(1);
        if self.text_hold {
            self.out.release();
            self.text_hold = false;
        }
        self.child_end();
    }

    fn close(&mut self, chunk: &[u8], pos: usize) {
        let Some(f) = self.frames.pop() else {
            return;
        };
        match f.level {
            Level::Block => {
                if let Some(kind) = f.failed {
                    self.out.rollback(f.start_mark);
                    self.out.reserved = f.reserved_at_open;
                    if let Some((m, text_left, paths_len)) = self.block_mark.take() {
                        let grown = self.rec.paths_len().saturating_sub(paths_len) as u64;
                        if self.out.record_inside {
                            self.out.record_reserve = self.out.record_reserve.saturating_sub(grown);
                        }
                        self.rec.restore(&m);
                        self.text_left = text_left;
                    }
                    self.path.truncate(f.path_len, f.path_ovf);
                    self.add_cut(kind, 1);
                    if let Some(p) = self.frames.last_mut() {
                        p.kept = p.kept.saturating_sub(1);
                    }
                } else {
                    self.out.byte(b'}');
                    self.out.reserved = f.reserved_at_open;
                }
                if self.block_hold {
                    self.out.release();
                    self.block_hold = false;
                }
                self.child_end();
                self.check_content_tail();
            }
            Level::Meta => {
                let at = self.out.pos();
                self.meta_at = Some((at, f.kept > 0));
                self.out.hold_here();
                self.out.byte(b'}');
                self.out.reserved = f.reserved_at_open;
                self.child_end();
            }
            Level::Result => self.result_end(f, chunk, pos),
            Level::Content | Level::Resource | Level::Envelope => {
                self.out.byte(if f.level == Level::Content {
                    b']'
                } else {
                    b'}'
                });
                self.out.reserved = f.reserved_at_open;
                self.child_end();
            }
        }
    }

    fn result_end(&mut self, f: DFrame, chunk: &[u8], pos: usize) {
        self.original_bytes = self.lex.offset_at(pos).saturating_sub(self.result_in_start);
        if let Some(from) = self.hash_from.take() {
            self.digest = fnv1a(self.digest, chunk.get(from..pos).unwrap_or(&[]));
        }
        self.out.reserved = f.reserved_at_open;
        self.out.record_reserve = 0;
        self.out.record_inside = false;
        self.out.close_scope(0);
        self.out.close_scope(1);
        if self.typed_failed {
            if let Some(m) = self.result_mark {
                self.out.rollback(m);
            }
            // The error carries the request id in its receipt; the id may come
            // after the result (TypeScript SDK order), so the error is placed
            // when the message ends. The output stays held until then.
            self.error_at = Some(self.out.pos());
            self.result_done = true;
            self.child_end();
            return;
        }
        let mut kept = f.kept;
        if let Some(v) = self.is_error_in.filter(|&v| self.is_error_out != Some(v)) {
            // From the room kept for it (released just above).
            if kept > 0 {
                self.out.byte(b',');
            }
            self.out.write(if v {
                b"\"isError\":true"
            } else {
                b"\"isError\":false"
            });
            kept += 1;
        }
        if self.rec.truncated() {
            let mut rec = std::mem::take(&mut self.scratch);
            rec.clear();
            rec.push(b'{');
            self.rec.write_fields(&mut rec);
            rec.extend_from_slice(ORIGINAL_FIELD);
            push_u64(&mut rec, self.original_bytes);
            rec.push(b'}');
            match self.meta_at {
                Some((at, nonempty)) => {
                    let mut ins = Vec::with_capacity(rec.len() + 32);
                    if nonempty {
                        ins.push(b',');
                    }
                    ins.extend_from_slice(b"\"resultbudget/truncation\":");
                    ins.extend_from_slice(&rec);
                    self.out.insert(at, &ins);
                    self.out.byte(b'}');
                }
                None => {
                    if kept > 0 {
                        self.out.byte(b',');
                    }
                    self.out.write(b"\"_meta\":{\"resultbudget/truncation\":");
                    self.out.write(&rec);
                    self.out.write(b"}}");
                }
            }
            self.scratch = rec;
        } else {
            self.out.byte(b'}');
        }
        self.result_done = true;
        self.out.release();
        self.child_end();
    }

    fn vb_done(&mut self, act: Act) {
        match act {
            Act::Structured => self.out.close_scope(1),
            Act::Descend(Level::Result) | Act::AnswerError => self.out.close_scope(0),
            Act::Id => {
                if let Some(m) = self.id_mark.take() {
                    // The last `id` is the one a reader keeps; one too long
                    // to hold leaves none.
                    let bytes = self.out.tail_from(m);
                    self.id.clear();
                    if bytes.len() <= MAX_ID_BYTES {
                        self.id.extend_from_slice(bytes);
                    }
                }
                if self.id_hold {
                    self.out.release();
                    self.id_hold = false;
                }
            }
            _ => {}
        }
        self.child_end();
        self.check_content_tail();
    }

    /// After a content item: stop at `max_content_blocks` (items that are not
    /// objects count too).
    fn check_content_tail(&mut self) {
        if let Some(p) = self.frames.last() {
            if p.level == Level::Content && p.kept >= self.eff.max_content_blocks {
                self.lex.skip_rest(self.top_depth(), 0);
                self.dskip = Some(DSkip::ContentTail);
            }
        }
    }

    fn vb_omitted(&mut self, act: Act) {
        let kind = self.vb.root_omitted_kind;
        if act == Act::Structured {
            self.out.close_scope(1);
        }
        if act == Act::Descend(Level::Result) || act == Act::AnswerError {
            self.out.close_scope(0);
        }
        if let Some(f) = self.frames.last_mut() {
            f.kept = f.kept.saturating_sub(1);
        }
        match self.top_level() {
            Some(Level::Block | Level::Resource) => self.fail_block(kind),
            _ => {
                self.add_cut(kind, 1);
                self.child_end();
            }
        }
    }

    /// The typed error in place of a result over its ceiling. It fits the
    /// ceiling however long the tool's name and the call's id: first with
    /// the record's paths, then without them, then with the receipt's
    /// `request_id` null (the envelope still names the call) and, last, the
    /// tool's name shortened to what fits, ending in `…`. (The ceiling is at
    /// least [`MIN_MCP_RESULT_BYTES`], which the error's fixed parts fit.)
    fn typed_error(&mut self) -> Vec<u8> {
        let (tool, read_only, req_id, modern) = match &self.treat {
            Treat::ToolResult(c) => (
                c.tool.clone().unwrap_or_else(|| "unknown".into()),
                c.read_only,
                c.request_id.clone(),
                c.modern,
            ),
            Treat::Pass => ("unknown".into(), true, None, false),
        };
        let id = req_id.unwrap_or_else(|| self.id.clone());
        let max = self.eff.max_result_bytes;
        let fits = |v: &Vec<u8>| v.len() as u64 <= max;
        let v = self.typed_error_with(read_only, modern, &tool, &id);
        if fits(&v) {
            return v;
        }
        self.rec.unlist_paths();
        let v = self.typed_error_with(read_only, modern, &tool, &id);
        if fits(&v) {
            return v;
        }
        let v = self.typed_error_with(read_only, modern, &tool, &[]);
        if fits(&v) {
            return v;
        }
        // Each byte of the name taken off takes at least one byte off each
        // place it is written (the text, and a receipt's `tool`), and the
        // `…` put on adds three to each.
        let uses = if read_only { 1 } else { 2 };
        let over = (v.len() as u64).saturating_sub(max);
        let cut = usize::try_from(over.div_ceil(uses) + 3).unwrap_or(usize::MAX);
        let short = shortened(&tool, tool.len().saturating_sub(cut));
        self.typed_error_with(read_only, modern, &short, &[])
    }

    /// The typed error's bytes for this tool name and request id (`null`
    /// when empty).
    fn typed_error_with(&self, read_only: bool, modern: bool, tool: &str, id: &[u8]) -> Vec<u8> {
        let text = typed_error_text(
            read_only,
            tool,
            self.original_bytes,
            self.eff.max_result_bytes,
        );
        let mut v = Vec::with_capacity(1024);
        v.extend_from_slice(b"{\"content\":[{\"type\":\"text\",\"text\":");
        push_json_string(&mut v, &text);
        v.extend_from_slice(b"}],\"isError\":true,");
        if modern {
            v.extend_from_slice(b"\"resultType\":\"complete\",");
        }
        v.extend_from_slice(b"\"_meta\":{\"resultbudget/truncation\":{");
        self.rec.write_fields(&mut v);
        v.extend_from_slice(ORIGINAL_FIELD);
        push_u64(&mut v, self.original_bytes);
        v.push(b'}');
        if !read_only {
            v.extend_from_slice(b",\"resultbudget/receipt\":{\"tool\":");
            push_json_string(&mut v, tool);
            v.extend_from_slice(b",\"request_id\":");
            if id.is_empty() {
                v.extend_from_slice(b"null");
            } else {
                v.extend_from_slice(id);
            }
            v.extend_from_slice(b",\"result_bytes\":");
            push_u64(&mut v, self.original_bytes);
            v.extend_from_slice(b",\"digest\":\"fnv1a64:");
            v.extend_from_slice(format!("{:016x}", self.digest).as_bytes());
            v.extend_from_slice(b"\",\"applied\":\"may_have_changed_state\"}");
        }
        v.extend_from_slice(b"}}");
        v
    }
}

/// The text of a typed tool's over-budget error (see `specs/typed-success-policy.json`).
pub fn typed_error_text(read_only: bool, tool: &str, bytes: u64, limit: u64) -> String {
    let tmpl = if read_only {
        READ_ONLY_TEXT
    } else {
        MUTATION_TEXT
    };
    tmpl.replace("{tool}", tool)
        .replace("{result_bytes}", &bytes.to_string())
        .replace("{limit}", &limit.to_string())
}

/// Template for a read-only typed tool (placeholders `{tool}`, `{result_bytes}`, `{limit}`).
pub const READ_ONLY_TEXT: &str = "result_budget_exceeded: the complete result of tool {tool} is {result_bytes} bytes, over the result budget of {limit} bytes, and a typed result is never cut. Nothing was returned. Ask for less: pass a smaller limit, continue from a cursor, add filters, or read a narrower path.";
/// Template for a typed tool that may have changed state.
pub const MUTATION_TEXT: &str = "result_budget_exceeded: tool {tool} ran, but its complete result of {result_bytes} bytes is over the result budget of {limit} bytes, so it was not returned. The call may already have changed state: do not repeat it. Check the outcome with a read-only tool; the receipt is in _meta[\"resultbudget/receipt\"].";

/// `s` whole if it takes at most `n` bytes, else its first `n` bytes or
/// fewer (on a character boundary) and `…`: a name or value the proxy
/// repeats in its own errors, shortened to fit a budget.
pub(crate) fn shortened(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_owned();
    }
    let mut k = n;
    while !s.is_char_boundary(k) {
        k -= 1;
    }
    format!("{}\u{2026}", s.get(..k).unwrap_or_default())
}

/// Append `s` as a JSON string.
pub(crate) fn push_json_string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for &b in s.as_bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0..=0x1F => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(b >> 4) as usize]);
                out.push(HEX[(b & 15) as usize]);
            }
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::{push_json_string, unit_prefix};
    use proptest::prelude::*;

    /// Every character the engine's own messages may carry (a tool's name
    /// goes into the typed error text) comes back from a JSON parser as it was.
    #[test]
    fn own_strings_are_valid_json_for_every_character() {
        let mut all: String = (0u8..0x80).map(char::from).collect();
        all.push_str("é€😀\u{2028}\u{fffd}");
        for s in [all.as_str(), "", "\"", "\\", "a\nb", "\u{0}\u{1f}\u{7f}"] {
            let mut out = Vec::new();
            push_json_string(&mut out, s);
            let back: String = serde_json::from_slice(&out).expect("valid JSON");
            assert_eq!(back, s);
            assert!(
                !out.iter().any(|&b| b < 0x20),
                "raw control byte in {out:?}"
            );
        }
    }

    /// The oracle: one unit at a time, each sized from its first bytes.
    fn unit_prefix_naive(enc: &[u8], max_dec: u64, max_enc: u64) -> (usize, u64) {
        let mut i = 0usize;
        let mut dec = 0u64;
        while let Some(&b) = enc.get(i) {
            let (e, d) = if b == b'\\' {
                if enc.get(i + 1) == Some(&b'u') {
                    let hex = enc.get(i + 2..i + 6).unwrap_or(&[]);
                    let cp = std::str::from_utf8(hex)
                        .ok()
                        .and_then(|h| u32::from_str_radix(h, 16).ok())
                        .unwrap_or(0);
                    let low = enc
                        .get(i + 6..i + 12)
                        .filter(|e| e.starts_with(b"\\u"))
                        .and_then(|e| std::str::from_utf8(&e[2..]).ok())
                        .and_then(|h| u32::from_str_radix(h, 16).ok())
                        .is_some_and(|lo| (0xDC00..0xE000).contains(&lo));
                    if (0xD800..0xDC00).contains(&cp) && low {
                        (12, 4)
                    } else if cp < 0x80 {
                        (6, 1)
                    } else if cp < 0x800 {
                        (6, 2)
                    } else {
                        (6, 3)
                    }
                } else {
                    (2, 1)
                }
            } else if b < 0x80 {
                (1, 1)
            } else if b >= 0xF0 {
                (4, 4)
            } else if b >= 0xE0 {
                (3, 3)
            } else {
                (2, 2)
            };
            if dec + d > max_dec || (i + e) as u64 > max_enc || i + e > enc.len() {
                break;
            }
            i += e;
            dec += d;
        }
        (i, dec)
    }

    /// One unit of valid string content, encoded.
    fn unit() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => "[a-z ]{1,12}".prop_map(String::into_bytes),
            1 => prop::sample::select(vec!["é", "ж", "€", "中", "😀", "𝄞"])
                .prop_map(|s| s.as_bytes().to_vec()),
            1 => prop::sample::select(vec!["\\n", "\\\"", "\\\\", "\\/", "\\t"])
                .prop_map(|s| s.as_bytes().to_vec()),
            1 => prop::sample::select(vec![
                "\\u0041", "\\u001f", "\\u00e9", "\\u07FF", "\\u0800", "\\u20ac",
                "\\uFFFF", "\\ud83d\\ude00", "\\uDBFF\\uDFFF", "\\uE000",
            ])
            .prop_map(|s| s.as_bytes().to_vec()),
            // Lone surrogates (valid content when they are read as U+FFFD).
            1 => prop::sample::select(vec!["\\ud83d", "\\uDC00", "\\uDBFF"])
                .prop_map(|s| s.as_bytes().to_vec()),
        ]
    }

    proptest! {
        // As in tests/oracle.rs: a failure is reported with its shrunk
        // input, and no file is written into the source tree.
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        /// The run-at-once walk cuts where the unit walk does, for every
        /// pair of limits up to the content's size.
        #[test]
        fn unit_prefix_matches_the_unit_walk(units in prop::collection::vec(unit(), 0..24)) {
            let enc: Vec<u8> = units.concat();
            let n = enc.len() as u64;
            for max_enc in 0..=n + 1 {
                for max_dec in [0, 1, 2, 3, 5, max_enc / 2, max_enc, n, u64::MAX] {
                    prop_assert_eq!(
                        unit_prefix(&enc, (0, 0), max_dec, max_enc),
                        unit_prefix_naive(&enc, max_dec, max_enc),
                        "limits dec {} enc {} on {:?}", max_dec, max_enc,
                        String::from_utf8_lossy(&enc)
                    );
                }
            }
        }

        /// Going on from an answer for smaller limits gives the answer the
        /// walk from the start gives (what `string_end` relies on when the
        /// exact marker is shorter than the first one).
        #[test]
        fn unit_prefix_resumes_from_a_smaller_answer(
            units in prop::collection::vec(unit(), 0..24),
            small in (0u64..200, 0u64..200),
            more in (0u64..40, 0u64..40),
        ) {
            let enc: Vec<u8> = units.concat();
            let (dec0, enc0) = small;
            let (dec1, enc1) = (dec0 + more.0, enc0 + more.1);
            let first = unit_prefix(&enc, (0, 0), dec0, enc0);
            prop_assert_eq!(
                unit_prefix(&enc, first, dec1, enc1),
                unit_prefix_naive(&enc, dec1, enc1),
                "limits dec {}..{} enc {}..{} on {:?}", dec0, dec1, enc0, enc1,
                String::from_utf8_lossy(&enc)
            );
        }
    }

    /// Cuts that end inside a multi-byte character or escape back off to its
    /// start, and a run longer than the room stops at the room.
    #[test]
    fn unit_prefix_backs_off_to_a_whole_unit() {
        let s = "ab€\\u00e9\\ud83d\\ude00x".as_bytes();
        assert_eq!(unit_prefix(s, (0, 0), u64::MAX, 1), (1, 1));
        assert_eq!(unit_prefix(s, (0, 0), u64::MAX, 4), (2, 2));
        assert_eq!(unit_prefix(s, (0, 0), u64::MAX, 5), (5, 5));
        assert_eq!(unit_prefix(s, (0, 0), u64::MAX, 10), (5, 5));
        assert_eq!(unit_prefix(s, (0, 0), u64::MAX, 11), (11, 7));
        assert_eq!(unit_prefix(s, (0, 0), 10, 100), (11, 7));
        assert_eq!(unit_prefix(s, (0, 0), 11, 100), (23, 11));
        assert_eq!(unit_prefix(s, (0, 0), u64::MAX, u64::MAX), (s.len(), 12));
    }
}
