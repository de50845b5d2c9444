//! The request guard: measure a `tools/call` request as it streams and refuse
//! it before it reaches the server when its arguments break a cap, or when it
//! breaks the list-versus-search contract or a `limit` maximum.
//!
//! Nothing is built: the guard walks the tokens once, keeping the largest value
//! of each measure and where it was (a JSON Pointer), so a 10 MB argument is
//! refused after its cap is crossed, not after it was held.

use crate::inventory::{Class, Inventory};
use crate::mcp::push_json_string;
use crate::page_size::{self, NumRead};
use crate::record::PointerBuf;
use crate::sniff::Capture;
use crate::tokenizer::{Tok, Tokenizer};

/// Caps on `params.arguments` and on the whole request line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgCaps {
    /// Encoded bytes of `params.arguments`. Protects: the server from payloads it
    /// would half-apply. Does not bound: `_meta` and other `params` members.
    pub max_arg_bytes: u64,
    /// Items in any array inside the arguments.
    pub max_arg_items: u64,
    /// Decoded UTF-8 bytes of any string (value or key) inside the arguments.
    pub max_arg_string_bytes: u64,
    /// Characters (Unicode scalar values) of any string inside the arguments.
    pub max_arg_string_chars: u64,
    /// Members of any object inside the arguments (the arguments object included).
    pub max_arg_keys: u64,
    /// Nesting of the arguments (the arguments object is level 1).
    pub max_arg_depth: u64,
    /// Bytes of the whole request line (arguments, `_meta`, `task`,
    /// `inputResponses`, `requestState`, envelope). Protects: the proxy's hold of a
    /// call until it is checked (it never holds more than this).
    pub max_request_bytes: u64,
}

impl ArgCaps {
    pub const DEFAULT: ArgCaps = ArgCaps {
        max_arg_bytes: 1024 * 1024,
        max_arg_items: 10_000,
        max_arg_string_bytes: 512 * 1024,
        max_arg_string_chars: 512 * 1024,
        max_arg_keys: 1_000,
        max_arg_depth: 32,
        max_request_bytes: 2 * 1024 * 1024,
    };

    /// Each cap of `self` and `o` put together by `f`.
    fn each(self, o: ArgCaps, f: fn(u64, u64) -> u64) -> ArgCaps {
        ArgCaps {
            max_arg_bytes: f(self.max_arg_bytes, o.max_arg_bytes),
            max_arg_items: f(self.max_arg_items, o.max_arg_items),
            max_arg_string_bytes: f(self.max_arg_string_bytes, o.max_arg_string_bytes),
            max_arg_string_chars: f(self.max_arg_string_chars, o.max_arg_string_chars),
            max_arg_keys: f(self.max_arg_keys, o.max_arg_keys),
            max_arg_depth: f(self.max_arg_depth, o.max_arg_depth),
            max_request_bytes: f(self.max_request_bytes, o.max_request_bytes),
        }
    }
}

impl Default for ArgCaps {
    fn default() -> Self {
        ArgCaps::DEFAULT
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum M {
    ArgBytes = 0,
    Items = 1,
    StrBytes = 2,
    StrChars = 3,
    Keys = 4,
    Depth = 5,
    RequestBytes = 6,
}

const METRICS: [M; 7] = [
    M::RequestBytes,
    M::ArgBytes,
    M::Depth,
    M::Keys,
    M::Items,
    M::StrBytes,
    M::StrChars,
];

impl M {
    fn cap_name(self) -> &'static str {
        match self {
            M::ArgBytes => "max_arg_bytes",
            M::Items => "max_arg_items",
            M::StrBytes => "max_arg_string_bytes",
            M::StrChars => "max_arg_string_chars",
            M::Keys => "max_arg_keys",
            M::Depth => "max_arg_depth",
            M::RequestBytes => "max_request_bytes",
        }
    }

    fn what(self) -> &'static str {
        match self {
            M::ArgBytes => "the arguments are",
            M::Items => "an array has",
            M::StrBytes => "a string is",
            M::StrChars => "a string is",
            M::Keys => "an object has",
            M::Depth => "the arguments nest",
            M::RequestBytes => "the request is",
        }
    }

    fn unit(self) -> &'static str {
        match self {
            M::ArgBytes | M::StrBytes | M::RequestBytes => "bytes",
            M::Items => "items",
            M::StrChars => "characters",
            M::Keys => "members",
            M::Depth => "levels",
        }
    }

    fn cap(self, c: &ArgCaps) -> u64 {
        match self {
            M::ArgBytes => c.max_arg_bytes,
            M::Items => c.max_arg_items,
            M::StrBytes => c.max_arg_string_bytes,
            M::StrChars => c.max_arg_string_chars,
            M::Keys => c.max_arg_keys,
            M::Depth => c.max_arg_depth,
            M::RequestBytes => c.max_request_bytes,
        }
    }
}

/// Why a call was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardVerdict {
    /// A cap was broken: which, where (pointer into `params`), the limit, the size.
    Cap {
        cap: &'static str,
        pointer: String,
        limit: u64,
        size: u64,
        what: &'static str,
        unit: &'static str,
    },
    /// A list tool was given a query argument.
    QueryOnList {
        tool: String,
        arg: String,
        twin: Option<String>,
    },
    /// A search tool was called without a query: none of its query
    /// arguments is a string with more than whitespace in it.
    MissingQuery { tool: String, params: Vec<String> },
    /// The page size (`limit`, or the row's own name for it) above the
    /// maximum; `limit` is its text as written (`specs/request-guard.md`,
    /// "Page sizes").
    LimitTooHigh {
        tool: String,
        param: String,
        limit: String,
        max: u64,
    },
    /// The page size given as a string that does not read as a number.
    LimitNotANumber {
        tool: String,
        param: String,
        value: String,
        max: u64,
    },
}

impl GuardVerdict {
    /// One line for logs.
    pub fn summary(&self) -> String {
        match self {
            GuardVerdict::Cap {
                cap,
                pointer,
                limit,
                size,
                ..
            } => format!("{cap} at {pointer:?}: {size} > {limit}"),
            GuardVerdict::QueryOnList { arg, .. } => {
                format!("list tool given query argument {arg:?}")
            }
            GuardVerdict::MissingQuery { .. } => "search tool without a query".into(),
            GuardVerdict::LimitTooHigh { limit, max, .. } => format!("limit {limit} > max {max}"),
            GuardVerdict::LimitNotANumber { param, value, .. } => {
                format!("{param} {value:?} is not a number")
            }
        }
    }

    /// The message the model reads.
    pub fn message(&self) -> String {
        match self {
            GuardVerdict::Cap {
                cap,
                pointer,
                limit,
                size,
                what,
                unit,
            } => format!(
                "resultbudget refused this call before it reached the server: {what} {size} {unit} at {ptr}, over the limit of {limit} ({cap}). Nothing was sent and nothing was applied. Send a smaller payload (split it into several calls if the tool allows).",
                ptr = if pointer.is_empty() { "the request" } else { pointer }
            ),
            GuardVerdict::QueryOnList { tool, arg, twin } => {
                let hint = match twin {
                    Some(t) => format!(" To find items by text, call {t} with your query instead."),
                    None => " It browses one page at a time; to find items by text, use the server's search tool.".into(),
                };
                format!(
                    "resultbudget refused this call: {tool} is a list (browse) tool and does not take a query argument ({arg:?}).{hint} Nothing was sent."
                )
            }
            GuardVerdict::MissingQuery { tool, params } => format!(
                "resultbudget refused this call: {tool} is a search tool and needs a query that is not blank ({}). To browse without a query, use the matching list tool. Nothing was sent.",
                params.join(" or ")
            ),
            GuardVerdict::LimitTooHigh { tool, param, limit, max } => format!(
                "resultbudget refused this call: {param} {limit} is above the maximum of {max} for {tool}. Ask for at most {max} and continue with the cursor for more. Nothing was sent."
            ),
            GuardVerdict::LimitNotANumber { tool, param, value, max } => format!(
                "resultbudget refused this call: {param} {value:?} is not a number. {tool} takes a page size of at most {max}; give it as a number and continue with the cursor for more. Nothing was sent."
            ),
        }
    }

    /// Append the JSON-RPC response (an `isError: true` result, the form the
    /// specification asks for on input errors so the model can correct itself).
    /// Its `result` takes at most [`MAX_REFUSAL_BYTES`]: where the names and
    /// values it repeats (a tool's name may take 2 KiB) would not fit, each is
    /// shortened, ending in `…`.
    pub fn write_response(&self, out: &mut Vec<u8>, id: Option<&[u8]>, modern: bool) {
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        out.extend_from_slice(id.unwrap_or(b"null"));
        out.extend_from_slice(b",\"result\":");
        let start = out.len();
        self.write_result(out, modern);
        for n in [128, 48, 16, 0] {
            if out.len() - start <= MAX_REFUSAL_BYTES {
                break;
            }
            out.truncate(start);
            self.clipped(n).write_result(out, modern);
        }
        out.push(b'}');
    }

    /// This verdict with each name and value it repeats shortened to at most
    /// `n` bytes (on a character boundary), ending in `…` where cut.
    fn clipped(&self, n: usize) -> GuardVerdict {
        let clip = |s: &String| crate::mcp::shortened(s, n);
        match self {
            GuardVerdict::Cap {
                cap,
                pointer,
                limit,
                size,
                what,
                unit,
            } => GuardVerdict::Cap {
                cap,
                pointer: clip(pointer),
                limit: *limit,
                size: *size,
                what,
                unit,
            },
            GuardVerdict::QueryOnList { tool, arg, twin } => GuardVerdict::QueryOnList {
                tool: clip(tool),
                arg: clip(arg),
                twin: twin.as_ref().map(clip),
            },
            GuardVerdict::MissingQuery { tool, params } => GuardVerdict::MissingQuery {
                tool: clip(tool),
                params: params.iter().map(clip).collect(),
            },
            GuardVerdict::LimitTooHigh {
                tool,
                param,
                limit,
                max,
            } => GuardVerdict::LimitTooHigh {
                tool: clip(tool),
                param: clip(param),
                limit: clip(limit),
                max: *max,
            },
            GuardVerdict::LimitNotANumber {
                tool,
                param,
                value,
                max,
            } => GuardVerdict::LimitNotANumber {
                tool: clip(tool),
                param: clip(param),
                value: clip(value),
                max: *max,
            },
        }
    }

    /// The refusal's `result` object.
    fn write_result(&self, out: &mut Vec<u8>, modern: bool) {
        out.extend_from_slice(b"{\"content\":[{\"type\":\"text\",\"text\":");
        push_json_string(out, &self.message());
        out.extend_from_slice(b"}],\"isError\":true,");
        if modern {
            out.extend_from_slice(b"\"resultType\":\"complete\",");
        }
        out.extend_from_slice(b"\"_meta\":{\"resultbudget/refusal\":{\"reason\":");
        // Each reason, then its fields, written in place.
        let field = |out: &mut Vec<u8>, key: &[u8], value: &str| {
            out.extend_from_slice(b",\"");
            out.extend_from_slice(key);
            out.extend_from_slice(b"\":");
            push_json_string(out, value);
        };
        match self {
            GuardVerdict::Cap {
                cap,
                pointer,
                limit,
                size,
                ..
            } => {
                push_json_string(out, "argument_cap");
                field(out, b"cap", cap);
                field(out, b"pointer", pointer);
                out.extend_from_slice(format!(",\"limit\":{limit},\"size\":{size}").as_bytes());
            }
            GuardVerdict::QueryOnList { arg, twin, .. } => {
                push_json_string(out, "query_on_list_tool");
                field(out, b"argument", arg);
                match twin {
                    Some(t) => field(out, b"search_tool", t),
                    None => out.extend_from_slice(b",\"search_tool\":null"),
                }
            }
            GuardVerdict::MissingQuery { .. } => push_json_string(out, "search_without_query"),
            GuardVerdict::LimitTooHigh {
                param, limit, max, ..
            } => {
                push_json_string(out, "limit_above_max");
                field(out, b"param", param);
                // A whole number as a number, as before; any other spelling
                // (`5e3`, `"500"`, a cut text) as the string it was.
                match limit.parse::<u64>() {
                    Ok(v) => {
                        out.extend_from_slice(b",\"limit\":");
                        crate::record::push_u64(out, v);
                    }
                    Err(_) => field(out, b"limit", limit),
                }
                out.extend_from_slice(format!(",\"max\":{max}").as_bytes());
            }
            GuardVerdict::LimitNotANumber {
                param, value, max, ..
            } => {
                push_json_string(out, "limit_not_a_number");
                field(out, b"param", param);
                field(out, b"value", value);
                out.extend_from_slice(format!(",\"max\":{max}").as_bytes());
            }
        }
        out.extend_from_slice(b"}}}");
    }
}

/// A piece of the tool name being read (its raw contents) onto `name`, up
/// to [`crate::sniff::NAME_CAP`] with its quotes; past that, `over`. (A free
/// function, so that a piece the tokenizer holds can be pushed while it is
/// borrowed.)
fn push_name(name: &mut Vec<u8>, over: &mut bool, bytes: &[u8]) {
    if *over || name.len() + bytes.len() + 2 > crate::sniff::NAME_CAP {
        *over = true;
    } else {
        name.extend_from_slice(bytes);
    }
}

/// The most bytes a refusal's `result` takes: the least result budget a
/// configuration allows ([`crate::mcp::MIN_MCP_RESULT_BYTES`]), so that a
/// refusal fits every budget, as a tool's own result must.
pub const MAX_REFUSAL_BYTES: usize = crate::mcp::MIN_MCP_RESULT_BYTES as usize;

#[derive(Debug, Clone, Copy)]
struct GFrame {
    obj: bool,
    count: u64,
    path_len: usize,
    path_ovf: bool,
}

/// The container the walk expects next (after a key it looks into).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    None,
    Params,
    Args,
    Meta,
    /// `params.name`: captured if it is a string.
    Name,
    /// `params._meta[protocolVersion]`: noted if it is a string.
    Version,
    /// Top-level `method`, `id`; `params.requestId`, `params.taskId`: facts.
    Method,
    Id,
    RequestId,
    TaskId,
    /// `params.task`: noted if it is an object.
    Task,
}

impl Expect {
    /// The fact this value is read into, if any.
    fn fact(self) -> Option<Fact> {
        match self {
            Expect::Method => Some(Fact::Method),
            Expect::Id => Some(Fact::Id),
            Expect::Name => Some(Fact::Name),
            Expect::RequestId => Some(Fact::RequestId),
            Expect::TaskId => Some(Fact::TaskId),
            Expect::Version => Some(Fact::Version),
            _ => None,
        }
    }
}

/// A field of [`RequestFacts`] read from a scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fact {
    Method,
    Id,
    Name,
    RequestId,
    TaskId,
    Version,
}

/// What the proxy needs to know of a request line besides its verdict, read on
/// the guard's own walk of it. Each field is the raw JSON text of a scalar as
/// written (a string with its quotes and escapes), but for `method`, `name`
/// and `task_id`, which are read by value (a string with escapes written
/// again as serde_json writes it, see `sniff::canonical`), as the server reads
/// them; a value that is a container,
/// or longer than [`CAPTURE_CAP`](crate::sniff::CAPTURE_CAP) bytes, is not taken, and of duplicate keys
/// the last one taken wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestFacts {
    /// Top-level `method`.
    pub method: Vec<u8>,
    /// A top-level `method` was there but not taken: a container, or a
    /// string longer than the cap. Such a line is still a request when it
    /// has an id ([`RequestFacts::is_request`]): it is owed an answer, and
    /// its method is not `tools/call`.
    pub method_untaken: bool,
    /// Top-level `id` (the last one taken).
    pub id: Vec<u8>,
    /// A top-level `id` was there but not taken: a container (not a
    /// JSON-RPC id), or a scalar longer than the cap. No answer can name it,
    /// so a request with it is not one the proxy can answer or match an
    /// answer to ([`RequestFacts::is_request`] counts it; `id` then holds
    /// another id's text, or nothing). Set at the id, in the order of the
    /// tokens, and not cleared by another `id`: a line that has one is
    /// stopped there, whatever comes after.
    pub id_untaken: bool,
    /// `params.name`.
    pub name: Vec<u8>,
    /// `params.requestId` (of `notifications/cancelled`).
    pub request_id: Vec<u8>,
    /// `params._meta["io.modelcontextprotocol/protocolVersion"]`.
    pub version: Vec<u8>,
    /// `params.taskId` (of `tasks/result`).
    pub task_id: Vec<u8>,
    /// `params.task` is an object (a task-augmented call).
    pub task: bool,
    /// A top-level `result` or `error` member was seen (the line answers one of
    /// the server's requests, unless it also has a method).
    pub response: bool,
    /// What the line showed itself to be first, in the order of its tokens
    /// (so however its pieces fall): `Some(true)` if its first top-level
    /// `method` taken is `"tools/call"`, `Some(false)` if that method is another
    /// or a top-level `result` or `error` came before any; `None` until then.
    pub first_call: Option<bool>,
    /// A top-level `method` taken as `"tools/call"` after the line showed
    /// itself to be something else (`first_call` was `Some(false)`), in the
    /// order of its tokens: it stays set whatever method comes after, so it
    /// does not depend on where the line's pieces end.
    pub call_late: bool,
}

impl RequestFacts {
    /// Forget the last line, keeping the buffers.
    pub fn clear(&mut self) {
        for v in [
            &mut self.method,
            &mut self.id,
            &mut self.name,
            &mut self.request_id,
            &mut self.version,
            &mut self.task_id,
        ] {
            v.clear();
        }
        self.task = false;
        self.method_untaken = false;
        self.id_untaken = false;
        self.response = false;
        self.first_call = None;
        self.call_late = false;
    }

    fn field(&mut self, f: Fact) -> &mut Vec<u8> {
        match f {
            Fact::Method => &mut self.method,
            Fact::Id => &mut self.id,
            Fact::Name => &mut self.name,
            Fact::RequestId => &mut self.request_id,
            Fact::TaskId => &mut self.task_id,
            Fact::Version => &mut self.version,
        }
    }

    /// Whether the line is a request of its sender's, owed an answer: it has
    /// both an `id` and a `method`, whatever its value (a line with an id
    /// and no method answers the other side, and its id is the other side's).
    pub fn is_request(&self) -> bool {
        (!self.id.is_empty() || self.id_untaken) && self.has_method()
    }

    /// The id an answer to the line names: its raw text, or `None` (JSON-RPC's
    /// `null`) when an `id` of it was not taken ([`RequestFacts::id_untaken`])
    /// or it has none.
    pub fn reply_id(&self) -> Option<&[u8]> {
        (!self.id_untaken && !self.id.is_empty()).then_some(self.id.as_slice())
    }

    /// Whether the line is a request whose id cannot be read
    /// ([`RequestFacts::id_untaken`]): nothing could answer it by its id.
    pub fn id_unreadable(&self) -> bool {
        self.id_untaken && self.has_method()
    }

    /// Whether the line has a top-level `method`, taken or not.
    pub fn has_method(&self) -> bool {
        !self.method.is_empty() || self.method_untaken
    }

    /// Whether the method is `tools/call`.
    pub fn is_call(&self) -> bool {
        self.method == b"\"tools/call\""
    }
}

/// The top-level arguments the contract looks at, kept from line to line
/// so that a call allocates nothing for them once the guard is warm.
#[derive(Debug, Clone, Default)]
struct TopArg {
    /// Query-like argument names present, each once, with whether its last
    /// value was a string that is not blank: the first `nq` entries (the names'
    /// buffers are reused).
    queries: Vec<(Vec<u8>, bool)>,
    nq: usize,
    /// Page-size arguments present, each once by its index in
    /// `Guard::page_names`, with what its last member gave.
    pages: Vec<(usize, PageRead)>,
}

impl TopArg {
    fn clear(&mut self) {
        self.nq = 0;
        self.pages.clear();
    }

    fn queries(&self) -> &[(Vec<u8>, bool)] {
        self.queries.get(..self.nq).unwrap_or(&[])
    }
}

/// What the last member of a page-size name gave.
#[derive(Debug, Clone)]
enum PageRead {
    /// `null`, a boolean, a container: no page size.
    Nothing,
    /// A number, or a string that reads as one: its value, how it read
    /// (for its text), and its span in the line (a string's with its quotes).
    Value {
        value: f64,
        num: NumRead,
        start: u64,
        end: u64,
        string: bool,
    },
    /// A string that does not read as a number (its text, cut).
    NotANumber(NumRead),
}

/// A page size being read: which entry of [`TopArg::pages`], from where.
#[derive(Debug, Clone, Copy)]
struct PageOpen {
    slot: usize,
    start: u64,
    end: u64,
}

/// A `limit` the gate rewrites: the new value, and the span of the old one
/// in the line; `quoted` if the old one was a string (the new one is too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clamp {
    pub max: u64,
    pub start: u64,
    pub end: u64,
    pub quoted: bool,
}

/// The streaming request guard. One line at a time: `feed` pieces, then `finish`.
///
/// It measures a line; it does not decide what of it goes on. A batch or a
/// bare value, for one, is no call to it, and so gets no verdict, though a
/// server that reads batches would run the calls inside. A caller that
/// forwards lines wants [`crate::gate::RequestGate`], which runs this guard
/// and decides each line as the proxy does.
#[derive(Debug, Clone)]
pub struct Guard {
    caps: ArgCaps,
    /// The loosest caps of the guard's own and every inventory row's: what
    /// holds while a call's tool is not known (set with the inventory).
    loosest: ArgCaps,
    inventory: Option<Inventory>,
    lex: Tokenizer,
    broken: bool,
    line_bytes: u64,
    frames: Vec<GFrame>,
    expect: Expect,
    params_open: bool,
    meta_open: bool,
    path: PointerBuf,
    /// The largest of each measure and where it was (`M::RequestBytes`'s slot
    /// is unused: the request's size is `line_bytes`, or a token's offset).
    max: [(u64, PointerBuf); 7],
    args_start: Option<u64>,
    args_bytes: Option<u64>,
    name: Vec<u8>,
    name_capture: bool,
    /// The name being read is longer than [`crate::sniff::NAME_CAP`]: the
    /// call is one of a tool the guard does not know.
    name_over: bool,
    /// The tightest caps of every tool name the line gave so far (see
    /// [`Guard::effective_caps`]).
    name_caps: Option<ArgCaps>,
    modern: bool,
    modern_capture: bool,
    top: TopArg,
    top_key: Vec<u8>,
    /// The last key, copied out of the tokenizer (see `step`).
    key: Vec<u8>,
    num_start: Option<u64>,
    /// Names a top-level argument gives a page size by: `limit` and each
    /// inventory row's own.
    page_names: Vec<Vec<u8>>,
    /// Names a top-level argument gives a query by besides [`QUERY_NAMES`]:
    /// each inventory row's own. Every one is noted whatever the tool, which
    /// the line may name after its arguments; the contract picks the tool's.
    row_query_names: Vec<Vec<u8>>,
    /// The page size being read, if the value in progress is one.
    page: Option<PageOpen>,
    page_num: NumRead,
    /// A page size given as a string: its encoded contents, up to a cap.
    page_str: Vec<u8>,
    /// The top-level argument being read is query-like: whether its string,
    /// so far, is blank.
    query: Option<Blank>,
    early: Option<GuardVerdict>,
    /// Told by [`Guard::not_a_call`]: only the facts are read from here on.
    facts_only: bool,
    facts: RequestFacts,
    /// The fact a scalar in progress is read into, and its text so far.
    cap_to: Option<Fact>,
    cap: Capture,
}

impl Default for Guard {
    fn default() -> Self {
        Guard::new(ArgCaps::DEFAULT)
    }
}

const QUERY_NAMES: [&str; 3] = ["q", "query", "search"];

/// Whether a top-level argument's name (decoded, perhaps not UTF-8) is one
/// of [`QUERY_NAMES`]: compared as bytes, which is the same answer as
/// comparing its text (a name that is not UTF-8 is none of them).
fn is_query_name(key: &[u8]) -> bool {
    QUERY_NAMES.iter().any(|q| q.as_bytes() == key)
}

/// Whether a character is blank in a query: whitespace as Python's
/// `str.strip()` or JavaScript's `String.prototype.trim()` removes it (the
/// Unicode White_Space characters, U+001C to U+001F, and U+FEFF).
fn blank_char(c: char) -> bool {
    c.is_whitespace() || matches!(c, '\u{1c}'..='\u{1f}' | '\u{feff}')
}

/// Whether a string value, fed as its encoded contents in any pieces, is
/// blank: empty or only [`blank_char`]s, its escapes decoded. A server that
/// trims its query reads a blank one as no query. A unit (an escape, a UTF-8
/// sequence) split between pieces is held until it is whole; nothing is read
/// once a character is not blank, so a long query costs its first character.
#[derive(Debug, Clone, Copy)]
struct Blank {
    blank: bool,
    unit: [u8; 6],
    held: u8,
}

impl Blank {
    const fn new() -> Blank {
        Blank {
            blank: true,
            unit: [0; 6],
            held: 0,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if !self.blank {
                return;
            }
            if self.held == 0 {
                match b {
                    b' ' => continue,
                    b'\\' | 0x80.. => {}
                    _ => {
                        self.blank = false;
                        return;
                    }
                }
            }
            if let Some(slot) = self.unit.get_mut(self.held as usize) {
                *slot = b;
                self.held += 1;
            }
            let unit = self.unit.get(..self.held as usize).unwrap_or(&[]);
            let need = match unit {
                [b'\\'] => continue,
                [b'\\', b'u', ..] => 6,
                [b'\\', _] => 2,
                [0xc0..=0xdf, ..] => 2,
                [0xe0..=0xef, ..] => 3,
                [0xf0..=0xf7, ..] => 4,
                _ => 1,
            };
            if unit.len() < need {
                continue;
            }
            let c = match unit {
                [b'\\', b't'] => Some('\t'),
                [b'\\', b'n'] => Some('\n'),
                [b'\\', b'r'] => Some('\r'),
                [b'\\', b'f'] => Some('\u{c}'),
                [b'\\', b'u', hex @ ..] => std::str::from_utf8(hex)
                    .ok()
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .and_then(char::from_u32),
                _ => std::str::from_utf8(unit)
                    .ok()
                    .and_then(|s| s.chars().next()),
            };
            self.blank = c.is_some_and(blank_char);
            self.held = 0;
        }
    }
}

/// A page size's string contents as the server reads them, if they decode.
/// Escapes are rare in a page size: decoding them may allocate. A lone
/// surrogate reads as U+FFFD whatever the guard's mode (in a line the guard
/// takes at all, the two read the same).
fn decode_page_string(raw: &[u8]) -> Option<std::borrow::Cow<'_, [u8]>> {
    if raw.contains(&b'\\') {
        let quoted = [&b"\""[..], raw, b"\""].concat();
        crate::sniff::json_str(&quoted).map(|d| d.into_bytes().into())
    } else {
        std::str::from_utf8(raw).ok().map(|s| s.as_bytes().into())
    }
}

/// More of a page size's string, as encoded: kept up to just past what
/// [`Guard::page_string_end`] reads, so a long string costs nothing more.
fn page_text(kept: &mut Vec<u8>, bytes: &[u8]) {
    let room = (page_size::STRING_ENCODED_CAP + 1).saturating_sub(kept.len());
    kept.extend_from_slice(bytes.get(..room.min(bytes.len())).unwrap_or(&[]));
}

impl Guard {
    pub fn new(caps: ArgCaps) -> Guard {
        let pb = PointerBuf::new();
        Guard {
            caps,
            loosest: caps,
            inventory: None,
            lex: Tokenizer::default(),
            broken: false,
            line_bytes: 0,
            frames: Vec::with_capacity(64),
            expect: Expect::None,
            params_open: false,
            meta_open: false,
            path: PointerBuf::new(),
            max: [
                (0, pb.clone()),
                (0, pb.clone()),
                (0, pb.clone()),
                (0, pb.clone()),
                (0, pb.clone()),
                (0, pb.clone()),
                (0, pb),
            ],
            args_start: None,
            args_bytes: None,
            name: Vec::new(),
            name_capture: false,
            name_over: false,
            name_caps: None,
            modern: false,
            modern_capture: false,
            top: TopArg::default(),
            top_key: Vec::new(),
            key: Vec::new(),
            num_start: None,
            page_names: vec![b"limit".to_vec()],
            row_query_names: Vec::new(),
            page: None,
            page_num: NumRead::new(),
            page_str: Vec::new(),
            query: None,
            early: None,
            facts_only: false,
            facts: RequestFacts::default(),
            cap_to: None,
            cap: Capture::new(),
        }
    }

    pub fn caps(&self) -> &ArgCaps {
        &self.caps
    }

    /// Read a lone surrogate escape (`"\\ud83d"`) as U+FFFD instead of
    /// calling the line broken: [`crate::tokenizer::Tokenizer::set_lone_surrogates`].
    /// It counts 3 UTF-8 bytes and one character toward the string caps.
    pub fn set_lone_surrogates(&mut self, on: bool) {
        self.lex.set_lone_surrogates(on);
    }

    pub fn set_inventory(&mut self, inv: Option<Inventory>) {
        self.page_names = vec![b"limit".to_vec()];
        self.row_query_names.clear();
        self.loosest = self.caps;
        for r in inv.iter().flat_map(|i| &i.rows) {
            if let Some(rc) = r.arg_caps {
                self.loosest = self.loosest.each(rc.over(self.caps), u64::max);
            }
            if let Some(l) = &r.limit {
                let p = l.param.as_bytes();
                if !self.page_names.iter().any(|n| n == p) {
                    self.page_names.push(p.to_vec());
                }
            }
            for q in &r.query_params {
                let q = q.as_bytes();
                if !is_query_name(q) && !self.row_query_names.iter().any(|n| n == q) {
                    self.row_query_names.push(q.to_vec());
                }
            }
        }
        self.inventory = inv;
    }

    /// Start a new line.
    pub fn reset(&mut self) {
        self.lex.reset();
        self.broken = false;
        self.line_bytes = 0;
        self.frames.clear();
        self.expect = Expect::None;
        self.params_open = false;
        self.meta_open = false;
        self.path.clear();
        for m in self.max.iter_mut() {
            m.0 = 0;
            m.1.clear();
        }
        self.args_start = None;
        self.args_bytes = None;
        self.name.clear();
        self.name_capture = false;
        self.name_over = false;
        self.name_caps = None;
        self.modern = false;
        self.modern_capture = false;
        self.top.clear();
        self.top_key.clear();
        self.num_start = None;
        self.page = None;
        self.query = None;
        self.early = None;
        self.facts_only = false;
        self.facts.clear();
        self.cap_to = None;
    }

    /// The facts read so far.
    pub fn facts(&self) -> &RequestFacts {
        &self.facts
    }

    /// The line is not a call (the caller decided from the facts): from here
    /// on the guard reads only the facts, skips the arguments whole, and gives
    /// no verdict.
    pub fn not_a_call(&mut self) {
        self.facts_only = true;
    }

    /// Start reading a scalar into `f`.
    fn cap_start(&mut self, f: Fact, first: &[u8]) {
        self.cap_to = Some(f);
        let cap = if f == Fact::Name {
            crate::sniff::NAME_CAP
        } else {
            crate::sniff::CAPTURE_CAP
        };
        self.cap.start(first, cap);
    }

    /// The scalar ended at `pos` in the chunk: its fact becomes its text,
    /// unless it was too long.
    fn cap_end(&mut self, pos: usize) {
        if let Some(f) = self.cap_to.take() {
            if let Some(text) = self.cap.text() {
                // By value, as the server reads it: `"tools\/call"` is a call.
                // (A task id too: it is looked up among the tasks the server
                // named, in its own spelling.)
                let text = if matches!(f, Fact::Method | Fact::Name | Fact::TaskId) {
                    crate::sniff::canonical(text)
                } else {
                    std::borrow::Cow::Borrowed(text)
                };
                let call = *text == *b"\"tools/call\"";
                let field = self.facts.field(f);
                field.clear();
                field.extend_from_slice(&text);
                if f == Fact::Method {
                    self.facts.method_untaken = false;
                    self.facts.call_late |= call && self.facts.first_call == Some(false);
                    self.shown(call, pos);
                }
            } else if f == Fact::Method {
                // Longer than any spelling of `tools/call`: another method.
                self.method_untaken(pos);
            } else if f == Fact::Id {
                self.facts.id_untaken = true;
            } else if f == Fact::Name {
                // Longer than MCP allows: the call names no tool known (the
                // last `name` is the one the server reads, not an earlier).
                self.facts.name.clear();
            }
        }
    }

    /// A top-level `method` whose value is not taken (a container, a
    /// string over the cap), at `pos`: a method other than `tools/call`.
    fn method_untaken(&mut self, pos: usize) {
        self.facts.method_untaken = true;
        self.shown(false, pos);
    }

    /// The line showed what it is (its first method, or a `result` or `error`
    /// before any), at `pos` in the chunk. A cap it broke before this token
    /// counts whatever it turns out to be, so it is looked for here, at this
    /// token, and not only where the chunk ends: the verdict does not depend
    /// on where the line was split. After a kind other than a call, no later
    /// cap counts (see [`Guard::feed`]).
    fn shown(&mut self, call: bool, pos: usize) {
        if self.facts.first_call.is_some() {
            return;
        }
        self.facts.first_call = Some(call);
        if self.early.is_some() || self.facts_only {
            return;
        }
        let at = self.lex.offset_at(pos).min(self.line_bytes);
        let caps = self.effective_caps();
        self.early = self.first_violation(&caps, at);
    }

    /// The tool name, once read (raw JSON string contents).
    pub fn tool_name(&self) -> Option<String> {
        (!self.name.is_empty()).then(|| String::from_utf8_lossy(&self.name).into_owned())
    }

    /// Whether the request carried the 2026-07-28 protocol-version `_meta`.
    pub fn is_modern(&self) -> bool {
        self.modern
    }

    /// The caps of the tool named `name`: its row's over the guard's own.
    fn caps_of(&self, name: &[u8]) -> ArgCaps {
        let Some(inv) = &self.inventory else {
            return self.caps;
        };
        let row = std::str::from_utf8(name).ok().and_then(|n| inv.row(n));
        match row.and_then(|r| r.arg_caps) {
            Some(rc) => rc.over(self.caps),
            None => self.caps,
        }
    }

    /// A tool name was read whole (`self.name`): its caps hold from here on,
    /// with every earlier name's.
    fn name_read(&mut self) {
        let c = self.caps_of(&self.name);
        self.name_caps = Some(self.name_caps.map_or(c, |p| p.each(c, u64::min)));
    }

    /// Caps in force: the tool's own once its name is read, else the loosest
    /// known (a name still being read, a chunk ended inside it, is not known
    /// yet: its first bytes would name another tool, or none). A line that
    /// names a tool more than once is held to the tightest caps of every name
    /// it gave: the caps only tighten as the line streams, so a refusal given
    /// at the end of one piece is given however the line is split.
    fn effective_caps(&self) -> ArgCaps {
        self.name_caps.unwrap_or(self.loosest)
    }

    /// The most of a call a caller may have to hold before the guard refuses
    /// it: the loosest `max_request_bytes` of any tool (a call's tool may be
    /// named last).
    pub fn max_hold(&self) -> u64 {
        self.loosest.max_request_bytes
    }

    fn note(&mut self, m: M, v: u64) {
        if let Some(slot) = self.max.get_mut(m as usize) {
            if v > slot.0 {
                slot.0 = v;
                slot.1.set(&self.path);
            }
        }
    }

    /// The first cap broken by the measures so far, the request taken as
    /// `request_bytes` long (the line so far, or up to a token).
    fn first_violation(&self, caps: &ArgCaps, request_bytes: u64) -> Option<GuardVerdict> {
        for m in METRICS {
            let (v, p) = self.max.get(m as usize)?;
            let v = if m == M::RequestBytes {
                request_bytes
            } else {
                *v
            };
            let cap = m.cap(caps);
            if v > cap {
                let pointer = if m == M::RequestBytes {
                    String::new()
                } else {
                    p.get().map_or_else(
                        || "(a path too long to show)".to_string(),
                        |b| {
                            let s = String::from_utf8_lossy(b);
                            // Stored JSON-escaped; unescape the two common cases for display.
                            s.replace("\\\"", "\"").replace("\\\\", "\\")
                        },
                    )
                };
                return Some(GuardVerdict::Cap {
                    cap: m.cap_name(),
                    pointer,
                    limit: cap,
                    size: v,
                    what: m.what(),
                    unit: m.unit(),
                });
            }
        }
        None
    }

    /// Feed a piece of the line. Returns a verdict as soon as a cap is crossed
    /// (the caller stops holding the line; feeding on keeps sizes exact), once.
    /// Caps count until the line shows it is not a call
    /// ([`RequestFacts::first_call`]): one broken before that token is returned
    /// (from the piece that holds the token, if no earlier piece ended past the
    /// break), one broken after it is not.
    pub fn feed(&mut self, bytes: &[u8]) -> Option<GuardVerdict> {
        let had_early = self.early.is_some();
        self.line_bytes += bytes.len() as u64;
        if !self.broken {
            let mut pos = 0;
            loop {
                match self.lex.next(bytes, &mut pos) {
                    Ok(Tok::NeedMore) => break,
                    Ok(tok) => self.step(tok, bytes, pos),
                    Err(_) => {
                        self.broken = true;
                        break;
                    }
                }
            }
            if let (Some(s), None) = (self.args_start, self.args_bytes) {
                let so_far = self.lex.chunk_base().saturating_sub(s);
                let p = std::mem::take(&mut self.path);
                self.path.clear();
                self.path.push_key(b"arguments", true);
                self.note(M::ArgBytes, so_far);
                self.path = p;
            }
        }
        // A line that showed another kind than a call is measured no more
        // (what it broke before it showed that was looked for then).
        if self.early.is_none() && !self.facts_only && self.facts.first_call != Some(false) {
            let caps = self.effective_caps();
            self.early = self.first_violation(&caps, self.line_bytes);
        }
        if had_early {
            None
        } else {
            self.early.clone()
        }
    }

    /// The line ended; `tool` is the sniffed tool name. Returns the verdict for
    /// a call that must not be forwarded.
    pub fn finish(&mut self, tool: &str) -> Option<GuardVerdict> {
        self.end_line();
        if self.name.is_empty() {
            self.name = tool.as_bytes().to_vec();
            self.name_read();
        }
        let caps = self.effective_caps();
        if let Some(v) = self.first_violation(&caps, self.line_bytes) {
            return Some(v);
        }
        self.contract(tool)
    }

    /// Whether the line is not valid JSON as far as the guard read it (after
    /// [`Guard::end_line`], including a line that ended early). Its measures
    /// stop where it broke, so a caller must not forward it as checked.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// The line ended: read what its end completes (a top-level scalar).
    /// [`Guard::finish`] does this too, for a call.
    pub fn end_line(&mut self) {
        if !self.broken {
            loop {
                match self.lex.next_eof() {
                    Ok(Tok::Eof) => break,
                    Ok(tok) => self.step(tok, &[], 0),
                    Err(_) => {
                        self.broken = true;
                        break;
                    }
                }
            }
        }
    }

    /// List versus search, and `limit`.
    fn contract(&self, tool: &str) -> Option<GuardVerdict> {
        let row = self.inventory.as_ref().and_then(|i| i.row(tool));
        let class = row.map(|r| r.class).or_else(|| Class::by_name(tool))?;
        let own = row.map(|r| &r.query_params).filter(|q| !q.is_empty());
        match class {
            Class::List => {
                if let Some((arg, _)) = self.top.queries().iter().find(|(k, _)| is_query_name(k)) {
                    let arg = String::from_utf8_lossy(arg).into_owned();
                    let twin = row
                        .and_then(|r| r.search_twin.clone())
                        .filter(|t| !t.is_empty())
                        .or_else(|| {
                            tool.strip_prefix("list_")
                                .map(|rest| format!("search_{rest}"))
                        });
                    return Some(GuardVerdict::QueryOnList {
                        tool: tool.to_string(),
                        arg,
                        twin,
                    });
                }
            }
            Class::Search => {
                let named = |k: &[u8]| match own {
                    Some(q) => q.iter().any(|q| q.as_bytes() == k),
                    None => is_query_name(k),
                };
                let ok = self
                    .top
                    .queries()
                    .iter()
                    .any(|(k, nonempty)| *nonempty && named(k));
                if !ok {
                    let params = match own {
                        Some(q) => q.clone(),
                        None => QUERY_NAMES.iter().map(|s| s.to_string()).collect(),
                    };
                    return Some(GuardVerdict::MissingQuery {
                        tool: tool.to_string(),
                        params,
                    });
                }
            }
            _ => {}
        }
        let (param, max, clamp) = match row.and_then(|r| r.limit.as_ref()) {
            Some(l) => (l.param.as_str(), l.max, l.clamp),
            None => ("limit", class.default_limits()?.1, false),
        };
        match self.page_read(param)? {
            PageRead::Value { value, num, .. } if *value > max as f64 && !clamp => {
                Some(GuardVerdict::LimitTooHigh {
                    tool: tool.to_string(),
                    param: param.to_string(),
                    limit: num.text(),
                    max,
                })
            }
            PageRead::NotANumber(num) => Some(GuardVerdict::LimitNotANumber {
                tool: tool.to_string(),
                param: param.to_string(),
                value: num.text(),
                max,
            }),
            _ => None,
        }
    }

    /// What the last member named `param` gave, if any.
    fn page_read(&self, param: &str) -> Option<&PageRead> {
        let name = self.page_names.iter().position(|n| n == param.as_bytes())?;
        self.top
            .pages
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, r)| r)
    }

    /// For a tool whose inventory row clamps: the page size to write in place
    /// of the one the call gave, if that one is above the row's maximum.
    pub fn clamp_to(&self, tool: &str) -> Option<Clamp> {
        let row = self.inventory.as_ref()?.row(tool)?;
        let l = row.limit.as_ref()?;
        match self.page_read(&l.param)? {
            PageRead::Value {
                value,
                start,
                end,
                string,
                ..
            } if l.clamp && *value > l.max as f64 => Some(Clamp {
                max: l.max,
                start: *start,
                end: *end,
                quoted: *string,
            }),
            _ => None,
        }
    }

    fn step(&mut self, tok: Tok, chunk: &[u8], pos: usize) {
        let in_args = self.args_start.is_some() && self.args_bytes.is_none();
        match tok {
            Tok::StrEnd if self.lex.after_key() => {
                // The key, copied into a buffer kept from line to line (the
                // tokenizer's own is borrowed from `self.lex`).
                let mut key = std::mem::take(&mut self.key);
                key.clear();
                key.extend_from_slice(self.lex.key());
                let complete = !self.lex.key_overflowed();
                if in_args {
                    if let Some(f) = self.frames.last_mut() {
                        f.count += 1;
                        let c = f.count;
                        self.note(M::Keys, c);
                        // A key's size is noted at its object's pointer, as while it streamed.
                        self.note(M::StrBytes, self.lex.string_decoded_len());
                        self.note(M::StrChars, self.lex.string_chars());
                        self.path.push_key(&key, complete);
                        if self.frames.len() == 1 {
                            self.top_key.clear();
                            self.top_key.extend_from_slice(&key);
                        }
                    }
                    self.key = key;
                    return;
                }
                // Outside the arguments: decide what to look at.
                let depth = self.lex.depth();
                self.expect = Expect::None;
                let outside = key.as_slice();
                match (depth, outside) {
                    (1, b"params") => {
                        // A server reads the last `params`: what an earlier
                        // one's arguments gave the contract is gone.
                        self.expect = Expect::Params;
                        self.top.clear();
                    }
                    (1, b"method") => self.expect = Expect::Method,
                    (1, b"id") => self.expect = Expect::Id,
                    (1, b"result" | b"error") => {
                        self.facts.response = true;
                        self.shown(false, pos);
                        self.lex.skip_one(depth);
                    }
                    (2, b"name") if self.params_open => self.expect = Expect::Name,
                    (2, b"arguments") if self.params_open && !self.facts_only => {
                        // And its last `arguments`, whatever it is.
                        self.expect = Expect::Args;
                        self.top.clear();
                    }
                    (2, b"_meta") if self.params_open => self.expect = Expect::Meta,
                    (2, b"requestId") if self.params_open => self.expect = Expect::RequestId,
                    (2, b"taskId") if self.params_open => self.expect = Expect::TaskId,
                    (2, b"task") if self.params_open => self.expect = Expect::Task,
                    (3, b"io.modelcontextprotocol/protocolVersion") if self.meta_open => {
                        self.expect = Expect::Version;
                    }
                    _ => self.lex.skip_one(depth),
                }
                self.key = key;
                self.top_key.clear();
            }
            Tok::BeginObject | Tok::BeginArray => {
                let obj = tok == Tok::BeginObject;
                let d = self.lex.depth();
                let expect = std::mem::replace(&mut self.expect, Expect::None);
                if in_args {
                    self.child_start();
                    self.page = None;
                } else {
                    match (expect, d, obj) {
                        (Expect::Params, 2, true) => self.params_open = true,
                        (Expect::Meta, 3, true) => self.meta_open = true,
                        (Expect::Task, 3, _) => {
                            // Any object `task` counts, as the proxy's sniffer had it.
                            self.facts.task |= obj;
                            self.lex.skip_one(d - 1);
                        }
                        // A container where a scalar fact belongs is not one.
                        (e, _, _) if e.fact().is_some() => {
                            if e == Expect::Method {
                                self.method_untaken(pos);
                            }
                            if e == Expect::Id {
                                self.facts.id_untaken = true;
                            }
                            self.lex.skip_one(d.saturating_sub(1));
                        }
                        (Expect::Args, 3, _) => {
                            // A duplicate `arguments` is measured too (readers keep the
                            // last one; every one must hold the caps); its top-level
                            // members replace the earlier ones'.
                            self.args_start = Some(self.lex.offset_at(pos).saturating_sub(1));
                            self.args_bytes = None;
                            self.frames.clear();
                            self.top.clear();
                            self.path.clear();
                            self.path.push_key(b"arguments", true);
                        }
                        _ => {}
                    }
                }
                if self.args_start.is_some() && self.args_bytes.is_none() {
                    self.frames.push(GFrame {
                        obj,
                        count: 0,
                        path_len: self.path.len(),
                        path_ovf: self.path.overflowed(),
                    });
                    self.note(M::Depth, self.frames.len() as u64);
                }
            }
            Tok::EndObject | Tok::EndArray => {
                let d = self.lex.depth();
                if !in_args {
                    if d == 1 {
                        self.params_open = false;
                    }
                    if d == 2 {
                        self.meta_open = false;
                    }
                }
                if in_args {
                    self.frames.pop();
                    if self.frames.is_empty() {
                        let end = self.lex.offset_at(pos);
                        let start = self.args_start.unwrap_or(end);
                        self.args_bytes = Some(end - start);
                        self.path.clear();
                        self.path.push_key(b"arguments", true);
                        self.note(M::ArgBytes, end - start);
                    } else {
                        self.value_end();
                    }
                }
            }
            Tok::StrBegin { key: false } | Tok::Lit(_) => {
                let expect = std::mem::replace(&mut self.expect, Expect::None);
                if let Some(f) = expect.fact() {
                    match tok {
                        Tok::Lit(l) => {
                            self.cap_start(f, l.text());
                            self.cap_end(pos);
                        }
                        _ => self.cap_start(f, b"\""),
                    }
                }
                if tok == (Tok::StrBegin { key: false }) {
                    match expect {
                        Expect::Name => {
                            // The last `name` wins, as in every JSON reader.
                            self.name.clear();
                            self.name_capture = true;
                            self.name_over = false;
                        }
                        Expect::Version => self.modern_capture = true,
                        _ => {}
                    }
                }
                if in_args {
                    self.child_start();
                    if let Tok::Lit(_) = tok {
                        self.page = None;
                        self.value_end();
                    } else if let Some(p) = &mut self.page {
                        p.start = self.lex.offset_at(pos).saturating_sub(1);
                        self.page_str.clear();
                    }
                }
            }
            Tok::StrSpan(a, b) => {
                if self.cap_to.is_some() {
                    self.cap.push(chunk.get(a..b).unwrap_or(&[]));
                }
                if self.name_capture {
                    let piece = chunk.get(a..b).unwrap_or(&[]);
                    push_name(&mut self.name, &mut self.name_over, piece);
                } else if self.modern_capture {
                    self.modern = true;
                } else if in_args {
                    self.note(M::StrBytes, self.lex.string_decoded_len());
                    self.note(M::StrChars, self.lex.string_chars());
                    if self.page.is_some() {
                        page_text(&mut self.page_str, chunk.get(a..b).unwrap_or(&[]));
                    }
                    if let Some(q) = self.query.as_mut().filter(|_| self.frames.len() == 1) {
                        q.push(chunk.get(a..b).unwrap_or(&[]));
                    }
                }
            }
            Tok::StrEnd => {
                if self.cap_to.is_some() {
                    self.cap.push(b"\"");
                    self.cap_end(pos);
                }
                if self.name_capture {
                    self.name_capture = false;
                    // A name longer than MCP allows names no tool known.
                    if self.name_over {
                        self.name.clear();
                    }
                    // The name as the server reads it (`"\u006cist_things"` is
                    // `list_things`), for its inventory row and its class.
                    if self.name.contains(&b'\\') {
                        let raw = [&b"\""[..], &self.name, b"\""].concat();
                        if let Some(n) = crate::sniff::json_str(&raw) {
                            self.name = n.into_bytes();
                        }
                    }
                    self.name_read();
                } else if self.modern_capture {
                    self.modern_capture = false;
                } else if in_args {
                    let len = self.lex.string_decoded_len();
                    self.note(M::StrBytes, len);
                    self.note(M::StrChars, self.lex.string_chars());
                    if self.frames.len() == 1 {
                        self.top_string();
                    }
                    if let Some(p) = self.page.take() {
                        self.page_string_end(p, self.lex.offset_at(pos));
                    }
                    self.value_end();
                }
            }
            Tok::NumSpan(a, b) => {
                if self.expect != Expect::None && !in_args {
                    let expect = std::mem::replace(&mut self.expect, Expect::None);
                    if let Some(f) = expect.fact() {
                        self.cap_start(f, b"");
                    }
                }
                if self.cap_to.is_some() {
                    self.cap.push(chunk.get(a..b).unwrap_or(&[]));
                }
                if in_args {
                    if self.num_start.is_none() {
                        self.child_start();
                        self.num_start = Some(self.lex.offset_at(a));
                        if let Some(p) = &mut self.page {
                            p.start = self.lex.offset_at(a);
                            self.page_num.clear();
                        }
                    }
                    if let Some(p) = &mut self.page {
                        self.page_num.push(chunk.get(a..b).unwrap_or(&[]));
                        p.end = self.lex.offset_at(b);
                    }
                }
            }
            Tok::NumEnd => {
                self.cap_end(pos);
                if in_args && self.num_start.take().is_some() {
                    if let Some(p) = self.page.take() {
                        let read = match self.page_num.value() {
                            Some(value) => PageRead::Value {
                                value,
                                num: self.page_num.clone(),
                                start: p.start,
                                end: p.end,
                                string: false,
                            },
                            // The tokenizer passed it: it is a number.
                            None => PageRead::Nothing,
                        };
                        self.set_page(p.slot, read);
                    }
                    self.value_end();
                }
            }
            Tok::StrHeld => {
                // A unit split across pieces (an escape, a UTF-8 sequence):
                // what a span would have given, so the name is the same
                // however the reads split it.
                if self.cap_to.is_some() {
                    self.cap.push(self.lex.held());
                }
                if self.name_capture {
                    push_name(&mut self.name, &mut self.name_over, self.lex.held());
                } else if self.modern_capture {
                    self.modern = true;
                } else if in_args {
                    if self.page.is_some() {
                        page_text(&mut self.page_str, self.lex.held());
                    }
                    if let Some(q) = self.query.as_mut().filter(|_| self.frames.len() == 1) {
                        q.push(self.lex.held());
                    }
                }
            }
            Tok::StrBegin { key: true } | Tok::Skipped(_) | Tok::NeedMore | Tok::Eof => {}
        }
    }

    fn set_page(&mut self, slot: usize, read: PageRead) {
        if let Some(e) = self.top.pages.get_mut(slot) {
            e.1 = read;
        }
    }

    /// At a top-level argument's value: if its name is a page size's, its
    /// entry (one per name; the last member wins, so it starts as nothing).
    fn page_slot(&mut self) -> Option<usize> {
        let name = self.page_names.iter().position(|n| *n == self.top_key)?;
        let slot = match self.top.pages.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None => {
                self.top.pages.push((name, PageRead::Nothing));
                self.top.pages.len() - 1
            }
        };
        self.set_page(slot, PageRead::Nothing);
        Some(slot)
    }

    /// A page size given as a string ended at `end`: read it.
    fn page_string_end(&mut self, p: PageOpen, end: u64) {
        let raw = self.page_str.as_slice();
        let whole = raw.len() <= page_size::STRING_ENCODED_CAP;
        let decoded = if whole {
            decode_page_string(raw)
        } else {
            // Too long to be a page size; its start, for the refusal's
            // text: the longest prefix that decodes (a cut unit left out).
            (0..=12)
                .filter_map(|back| raw.get(..raw.len().saturating_sub(back)))
                .find_map(decode_page_string)
        };
        let read = decoded
            .as_deref()
            .filter(|d| whole && d.len() <= page_size::STRING_CAP)
            .and_then(page_size::read_string);
        let read = match read {
            Some(num) => match num.value() {
                Some(value) => PageRead::Value {
                    value,
                    num,
                    start: p.start,
                    end,
                    string: true,
                },
                None => PageRead::NotANumber(num),
            },
            None => {
                // Its text as the server reads it (as written, if that is not JSON).
                let mut num = NumRead::new();
                num.push(decoded.as_deref().unwrap_or(raw).trim_ascii());
                PageRead::NotANumber(num)
            }
        };
        self.set_page(p.slot, read);
    }

    /// A top-level string ended: a query-like argument's counts as given
    /// if it is not blank (`" "` and `"\\t"` are no query).
    fn top_string(&mut self) {
        if let Some(q) = self.query.take() {
            self.note_query(!q.blank);
        }
    }

    /// Whether the top-level argument being read is query-like: one of the
    /// usual names or of any inventory row's own, by its bytes.
    fn top_is_query(&self) -> bool {
        is_query_name(&self.top_key) || self.row_query_names.contains(&self.top_key)
    }

    /// The top-level argument being read is query-like; `nonempty`: its
    /// value is a string that is not blank. A server's JSON reader keeps the last of
    /// a repeated member, so a name seen again takes its new value's flag:
    /// `{"q":"x","q":""}` gives a search tool an empty query. One entry per
    /// name, however often a line repeats it.
    fn note_query(&mut self, nonempty: bool) {
        let top = &mut self.top;
        let key = &self.top_key;
        let live = top.queries.get_mut(..top.nq).unwrap_or(&mut []);
        if let Some(q) = live.iter_mut().find(|(k, _)| k == key) {
            q.1 = nonempty;
            return;
        }
        match top.queries.get_mut(top.nq) {
            Some((k, n)) => {
                k.clear();
                k.extend_from_slice(key);
                *n = nonempty;
            }
            None => top.queries.push((key.clone(), nonempty)),
        }
        top.nq += 1;
    }

    fn child_start(&mut self) {
        if let Some(f) = self.frames.last_mut() {
            if !f.obj {
                let i = f.count;
                f.count += 1;
                let c = f.count;
                self.note(M::Items, c);
                self.path.push_index(i);
            } else if self.frames.len() == 1 {
                // Any top-level value: a query-like name counts as present,
                // and as empty until a string says otherwise (`top_string`).
                self.query = None;
                if self.top_is_query() {
                    if self.top_key != b"limit" {
                        self.note_query(false);
                    }
                    self.query = Some(Blank::new());
                }
                // A page size's is read if it is a number or a string.
                self.page = self.page_slot().map(|slot| PageOpen {
                    slot,
                    start: 0,
                    end: 0,
                });
            }
        }
    }

    fn value_end(&mut self) {
        if let Some(f) = self.frames.last() {
            self.path.truncate(f.path_len, f.path_ovf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Guard;

    /// A `method` whose value is not taken (a container, a string longer
    /// than the cap) still makes a line with an id a request, owed an
    /// answer, and one that is not a call: a later `"tools/call"` does not
    /// make it one. However the reads split the line.
    #[test]
    fn a_method_that_is_not_taken_still_makes_a_request() {
        let long = "m".repeat(300);
        let lines = [
            (r#"{"jsonrpc":"2.0","id":1,"method":{"name":"tools/call"},"params":{}}"#.to_string(), true),
            (format!(r#"{{"jsonrpc":"2.0","id":2,"method":"{long}"}}"#), true),
            (r#"{"jsonrpc":"2.0","method":["tools/call"]}"#.to_string(), false),
            (r#"{"jsonrpc":"2.0","id":3,"method":[1],"method":"tools/call","params":{"name":"a","arguments":{}}}"#.to_string(), true),
        ];
        for (line, request) in &lines {
            for piece in [line.len(), 1, 2, 7] {
                let mut g = Guard::default();
                for c in line.as_bytes().chunks(piece) {
                    g.feed(c);
                }
                g.end_line();
                let f = g.facts();
                assert_eq!(f.is_request(), *request, "{line} in {piece}s");
                assert!(f.method_untaken || f.is_call(), "{line} in {piece}s");
                assert_eq!(f.first_call, Some(false), "{line} in {piece}s");
            }
        }
    }

    /// `tools/call` after the line showed itself to be something else is
    /// late in the order of the tokens, and a later method does not take it
    /// back: the same at every split point (fuzzing, finding 21).
    #[test]
    fn a_late_call_stays_late_whatever_the_reads() {
        let lines = [
            (r#"{"id":1,"method":"ping","method":"tools/call"}"#, true),
            (
                r#"{"id":2,"method":"ping","method":"tools/call","method":"ping"}"#,
                true,
            ),
            (
                r#"{"id":3,"result":{},"method":"tools/call","method":"x"}"#,
                true,
            ),
            (
                r#"{"id":4,"method":[1],"method":"tools/call","method":"x"}"#,
                true,
            ),
            (r#"{"id":5,"method":"tools/call","method":"ping"}"#, false),
            (
                r#"{"id":6,"method":"tools/call","method":"ping","method":"tools/call"}"#,
                false,
            ),
            (
                r#"{"id":7,"method":"ping","params":{"method":"tools/call"}}"#,
                false,
            ),
        ];
        for (line, late) in lines {
            let b = line.as_bytes();
            for p in 0..=b.len() {
                let mut g = Guard::default();
                g.feed(&b[..p]);
                g.feed(&b[p..]);
                g.end_line();
                assert_eq!(g.facts().call_late, late, "{line} split at {p}");
            }
        }
    }

    /// The tool's name is what the server reads, however it is spelled and
    /// however the reads split it: its row is found either way.
    #[test]
    fn a_tool_name_is_read_by_value_whatever_the_reads() {
        let inv = crate::inventory::Inventory::parse(
            r#"{"tools":[{"tool":"café","surface":"c","classification":"mutation",
               "read_only":false,"limit":null,"cursor":null,"per_item_budget_bytes":null,
               "result_budget":{"max_result_bytes":65536},"backend_query_bound":"none",
               "structured_content_policy":"none"}]}"#,
        )
        .expect("inventory");
        for name in ["café", "caf\\u00e9", "caf\\u00E9", "\\u0063af\u{e9}"] {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{{"name":"{name}","arguments":{{}}}}}}"#
            );
            for piece in [line.len(), 1, 2, 3] {
                let mut g = Guard::default();
                g.set_inventory(Some(inv.clone()));
                for c in line.as_bytes().chunks(piece) {
                    g.feed(c);
                }
                g.end_line();
                assert_eq!(g.tool_name().as_deref(), Some("café"), "{line} in {piece}s");
                assert!(
                    inv.row(g.tool_name().as_deref().unwrap_or("")).is_some(),
                    "{line} in {piece}s"
                );
                assert!(g.facts().is_call(), "{line} in {piece}s");
                assert_eq!(g.facts().name, "\"café\"".as_bytes(), "{line} in {piece}s");
            }
        }
    }

    /// A page size is the argument the tool's row names (else `limit`),
    /// wherever the tool's name comes in the line, read by value as servers
    /// read it, by its last member; a string that reads as no number is
    /// refused. The same verdict however the reads split the line.
    #[test]
    fn a_page_size_is_read_by_value_under_its_rows_name() {
        use super::GuardVerdict;
        let inv = crate::inventory::Inventory::parse(
            r#"{"tools":[{"tool":"events","surface":"e","classification":"discovery",
               "read_only":true,"limit":{"param":"count","default":3,"max":10,"over_max":"refuse"},
               "cursor":null,"per_item_budget_bytes":512,
               "result_budget":{"max_result_bytes":65536},"backend_query_bound":"count",
               "structured_content_policy":"none"}]}"#,
        )
        .expect("inventory");
        #[derive(Debug, PartialEq)]
        enum V {
            Pass,
            High(String),
            NotANumber(String),
        }
        let run = |tool: &str, args: &str| {
            let mut seen = Vec::new();
            for name_last in [false, true] {
                let line = if name_last {
                    format!(
                        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"arguments":{args},"name":"{tool}"}}}}"#
                    )
                } else {
                    format!(
                        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{args}}}}}"#
                    )
                };
                for piece in [line.len(), 1, 2, 3, 5] {
                    let mut g = Guard::default();
                    g.set_inventory(Some(inv.clone()));
                    for c in line.as_bytes().chunks(piece) {
                        g.feed(c);
                    }
                    seen.push(match g.finish(tool) {
                        None => V::Pass,
                        Some(GuardVerdict::LimitTooHigh { limit, .. }) => V::High(limit),
                        Some(GuardVerdict::LimitNotANumber { value, .. }) => V::NotANumber(value),
                        Some(v) => panic!("{line}: {v:?}"),
                    });
                }
            }
            assert!(seen.windows(2).all(|w| w[0] == w[1]), "{args}: {seen:?}");
            seen.swap_remove(0)
        };
        let high = |s: &str| V::High(s.to_string());
        let nan = |s: &str| V::NotANumber(s.to_string());
        for (tool, args, want) in [
            // The row's own name for it; `limit` is another argument there.
            ("events", r#"{"count":11}"#, high("11")),
            ("events", r#"{"count":10}"#, V::Pass),
            ("events", r#"{"limit":500,"count":2}"#, V::Pass),
            ("events", r#"{"limit":"soon"}"#, V::Pass),
            // Any spelling of a number, and a string that reads as one.
            ("events", r#"{"count":1.1e1}"#, high("1.1e1")),
            ("events", r#"{"count":10.5}"#, high("10.5")),
            (
                "events",
                r#"{"count":100000000000000000000000}"#,
                high("100000000000000000000000"),
            ),
            ("events", r#"{"count":1e400}"#, high("1e400")),
            ("events", r#"{"count":1000e-2}"#, V::Pass),
            ("events", r#"{"count":-50}"#, V::Pass),
            ("events", r#"{"count":"11"}"#, high("11")),
            ("events", r#"{"count":" 1_1 "}"#, high("1_1")),
            ("events", r#"{"count":"\u0031\u0031"}"#, high("11")),
            ("events", r#"{"count":"9"}"#, V::Pass),
            ("events", r#"{"count":"eleven"}"#, nan("eleven")),
            ("events", r#"{"count":"0x0B"}"#, nan("0x0B")),
            ("events", r#"{"count":"Infinity"}"#, nan("Infinity")),
            // No page size: the server's default, or its own error.
            ("events", r#"{"count":null}"#, V::Pass),
            ("events", r#"{"count":[50]}"#, V::Pass),
            ("events", r#"{"count":{"n":50}}"#, V::Pass),
            // The last member is what the server reads.
            ("events", r#"{"count":50,"count":5}"#, V::Pass),
            ("events", r#"{"count":5,"count":5e1}"#, high("5e1")),
            ("events", r#"{"count":"x","count":5}"#, V::Pass),
            ("events", r#"{"count":50,"count":null}"#, V::Pass),
            // A tool without a row: `limit`, by its class's maximum.
            ("list_docs", r#"{"limit":1.01e2}"#, high("1.01e2")),
            ("list_docs", r#"{"limit":"101"}"#, high("101")),
            ("list_docs", r#"{"limit":100.0}"#, V::Pass),
            ("list_docs", r#"{"count":500}"#, V::Pass),
            ("get_doc", r#"{"limit":"many"}"#, V::Pass),
        ] {
            assert_eq!(run(tool, args), want, "{tool} {args}");
        }
        // However often a line repeats them, one entry per name.
        let many = format!("{{{}\"count\":1}}", r#""count":"x","limit":1,"#.repeat(300));
        assert_eq!(run("events", &many), V::Pass);
        let mut g = Guard::default();
        g.set_inventory(Some(inv.clone()));
        g.feed(
            format!(r#"{{"method":"tools/call","params":{{"name":"events","arguments":{many}}}}}"#)
                .as_bytes(),
        );
        assert_eq!(g.top.pages.len(), 2, "{:?}", g.top.pages);
    }

    /// The contract judges the arguments the server reads: those of the last
    /// `params`, its last `arguments`, whatever the earlier ones held, and
    /// nothing when that last one has none or gives a scalar.
    #[test]
    fn the_contract_judges_the_last_params_and_arguments() {
        use super::GuardVerdict;
        let run = |line: &str, tool: &str| {
            let mut out = Vec::new();
            for piece in [line.len(), 1, 3] {
                let mut g = Guard::default();
                for c in line.as_bytes().chunks(piece) {
                    g.feed(c);
                }
                out.push(g.finish(tool));
            }
            assert!(out.windows(2).all(|w| w[0] == w[1]), "{line}: {out:?}");
            out.swap_remove(0)
        };
        let head = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","#;
        for (rest, tool, missing) in [
            // A later `params` without arguments: the search has no query.
            (
                r#""params":{"name":"search_docs","arguments":{"q":"x"}},"params":{"name":"search_docs"}}"#,
                "search_docs",
                true,
            ),
            // A later `arguments` that is no object: no query either.
            (
                r#""params":{"name":"search_docs","arguments":{"q":"x"},"arguments":"q"}}"#,
                "search_docs",
                true,
            ),
            (
                r#""params":{"name":"search_docs","arguments":{"q":"x"},"arguments":7}}"#,
                "search_docs",
                true,
            ),
            (
                r#""params":{"name":"search_docs","arguments":{}},"params":{"name":"search_docs","arguments":{"q":"x"}}}"#,
                "search_docs",
                false,
            ),
        ] {
            let v = run(&format!("{head}{rest}"), tool);
            assert_eq!(
                matches!(v, Some(GuardVerdict::MissingQuery { .. })),
                missing,
                "{rest}: {v:?}"
            );
        }
        // A page size or a query the server does not read is not judged.
        for rest in [
            r#""params":{"name":"list_docs","arguments":{"limit":500,"q":"x"}},"params":{"name":"list_docs"}}"#,
            r#""params":{"name":"list_docs","arguments":{"limit":500,"q":"x"},"arguments":null}}"#,
            r#""params":{"name":"list_docs","arguments":{"limit":500,"q":"x"}},"params":[]}"#,
        ] {
            assert_eq!(run(&format!("{head}{rest}"), "list_docs"), None, "{rest}");
        }
    }

    /// A query that is only whitespace, as a server that trims it reads it,
    /// is no query: its escapes decoded, split anywhere.
    #[test]
    fn a_blank_query_is_no_query() {
        use super::GuardVerdict;
        let missing = |args: &str| {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"search_docs","arguments":{args}}}}}"#
            );
            let mut out = Vec::new();
            for piece in 1..=line.len() {
                let mut g = Guard::default();
                for c in line.as_bytes().chunks(piece) {
                    g.feed(c);
                }
                out.push(matches!(
                    g.finish("search_docs"),
                    Some(GuardVerdict::MissingQuery { .. })
                ));
            }
            assert!(out.windows(2).all(|w| w[0] == w[1]), "{args}: {out:?}");
            out[0]
        };
        for args in [
            r#"{"q":""}"#,
            r#"{"q":" "}"#,
            r#"{"q":"   \t\n\r\f"}"#,
            r#"{"q":"\u0020\u00a0\u3000\ufeff\u001c\u000b\u0085"}"#,
            "{\"q\":\" \u{a0}\u{2003}\u{2028}\u{3000}\u{feff} \"}",
            r#"{"query":" ","q":"\t"}"#,
            r#"{"q":"x","q":"  "}"#,
        ] {
            assert!(missing(args), "{args} is a query");
        }
        for args in [
            r#"{"q":"x"}"#,
            r#"{"q":" x "}"#,
            r#"{"q":"\b"}"#,
            r#"{"q":"\u0000"}"#,
            r#"{"q":"\u200b"}"#,
            r#"{"q":"\ud83d\ude00"}"#,
            r#"{"q":"\\"}"#,
            r#"{"q":"\/"}"#,
            r#"{"q":"\""}"#,
            "{\"q\":\" \u{e9}\"}",
            "{\"q\":\"\u{1f600}\"}",
            r#"{"q":"  ","query":"\u0041"}"#,
            r#"{"q":"  ","q":"a"}"#,
        ] {
            assert!(!missing(args), "{args} is no query");
        }
    }

    /// A repeated query argument counts as the server reads it, by its last
    /// value; and however often a line repeats it, the guard keeps it once.
    #[test]
    fn a_repeated_query_counts_by_its_last_value() {
        use super::GuardVerdict;
        let verdict = |tool: &str, args: &str| {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{args}}}}}"#
            );
            let mut out = Vec::new();
            for piece in [line.len(), 1, 7] {
                let mut g = Guard::default();
                for c in line.as_bytes().chunks(piece) {
                    g.feed(c);
                }
                let v = g.finish(tool);
                assert!(g.top.queries().len() <= 3, "{line}: {:?}", g.top.queries);
                out.push(v);
            }
            assert!(out.windows(2).all(|w| w[0] == w[1]), "{args}: {out:?}");
            out.swap_remove(0)
        };
        let missing =
            |v: &Option<GuardVerdict>| matches!(v, Some(GuardVerdict::MissingQuery { .. }));
        assert!(missing(&verdict("search_docs", r#"{"q":"x","q":""}"#)));
        assert!(missing(&verdict("search_docs", r#"{"q":"x","q":null}"#)));
        assert!(missing(&verdict(
            "search_docs",
            r#"{"query":"x","q":"","query":7}"#
        )));
        assert_eq!(verdict("search_docs", r#"{"q":"","q":"x"}"#), None);
        assert_eq!(verdict("search_docs", r#"{"q":"","query":"x"}"#), None);
        let on_list =
            |v: &Option<GuardVerdict>| matches!(v, Some(GuardVerdict::QueryOnList { .. }));
        assert!(on_list(&verdict("list_docs", r#"{"q":"x","q":""}"#)));
        let many = format!("{{{}\"q\":\"\"}}", r#""q":"x","query":1,"#.repeat(200));
        assert!(missing(&verdict("search_docs", &many)));
        // A row's own query parameter, given last as a number, is no query.
        let inv = crate::inventory::Inventory::parse(
            r#"{"tools":[{"tool":"find","surface":"s","classification":"search",
               "read_only":true,"limit":{"param":"limit","default":5,"max":20,"over_max":"refuse"},
               "cursor":null,"per_item_budget_bytes":512,
               "result_budget":{"max_result_bytes":65536},"backend_query_bound":"limit+1",
               "structured_content_policy":"none","query_params":["term"]}]}"#,
        )
        .expect("inventory");
        // Before or after the name: a server reads the arguments whole, in any
        // order (earlier builds noted a row's own query parameter only when
        // the name came first, and refused `{"arguments":{"term":"x"},
        // "name":"find"}` as without a query).
        for (args, refused) in [
            (r#"{"term":"x","term":5}"#, true),
            (r#"{"term":"x","term":{}}"#, true),
            (r#"{"term":" ","q":"x"}"#, true),
            (r#"{"term":5,"term":"x"}"#, false),
            (r#"{"term":"x"}"#, false),
        ] {
            let head = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"#;
            for line in [
                format!(r#"{head}{{"name":"find","arguments":{args}}}}}"#),
                format!(r#"{head}{{"arguments":{args},"name":"find"}}}}"#),
            ] {
                for piece in [line.len(), 1, 5] {
                    let mut g = Guard::default();
                    g.set_inventory(Some(inv.clone()));
                    for c in line.as_bytes().chunks(piece) {
                        g.feed(c);
                    }
                    let v = g.finish("find");
                    assert_eq!(missing(&v), refused, "{line} in {piece}s: {v:?}");
                }
            }
        }
    }

    /// A line that names two tools with caps of their own is held to the
    /// tighter, whole or split: earlier builds judged each piece by the name
    /// read last, so a line split after its first `params` was refused early
    /// on that tool's caps, and the same line whole was not.
    #[test]
    fn a_line_naming_two_tools_is_held_to_the_tighter_caps() {
        use super::GuardVerdict;
        let row = |tool: &str, cap: u64| {
            format!(
                r#"{{"tool":"{tool}","surface":"s","classification":"single","read_only":true,"limit":null,"cursor":null,"per_item_budget_bytes":null,"result_budget":{{"max_result_bytes":65536}},"backend_query_bound":"one","structured_content_policy":"none","argument_caps":{{"max_arg_string_bytes":{cap}}}}}"#
            )
        };
        let inv = crate::inventory::Inventory::parse(&format!(
            r#"{{"tools":[{},{}]}}"#,
            row("tight", 10),
            row("loose", 1000)
        ))
        .expect("inventory");
        let long = "x".repeat(50);
        let head = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","#;
        for (rest, refused) in [
            (
                format!(
                    r#""params":{{"name":"tight","arguments":{{"s":"{long}"}}}},"params":{{"name":"loose","arguments":{{"s":"y"}}}}}}"#
                ),
                true,
            ),
            (
                format!(
                    r#""params":{{"name":"loose","arguments":{{"s":"{long}"}}}},"params":{{"name":"tight","arguments":{{"s":"y"}}}}}}"#
                ),
                true,
            ),
            (
                format!(
                    r#""params":{{"arguments":{{"s":"{long}"}},"name":"loose","name":"tight"}}}}"#
                ),
                true,
            ),
            (
                format!(r#""params":{{"arguments":{{"s":"{long}"}},"name":"loose"}}}}"#),
                false,
            ),
        ] {
            let line = format!("{head}{rest}");
            for piece in 1..=line.len() {
                let mut g = Guard::default();
                g.set_inventory(Some(inv.clone()));
                let mut early = None;
                for c in line.as_bytes().chunks(piece) {
                    if let Some(v) = g.feed(c) {
                        early = Some(v);
                    }
                }
                let last = g.finish("loose");
                // Early, the size so far; at the end, the string's.
                let early_cap = matches!(early, Some(GuardVerdict::Cap { limit: 10, .. }));
                assert_eq!(early_cap, refused, "{line} in {piece}s: early {early:?}");
                let cap = matches!(
                    last,
                    Some(GuardVerdict::Cap {
                        limit: 10,
                        size: 50,
                        ..
                    })
                );
                assert_eq!(cap, refused, "{line} in {piece}s: {last:?}");
            }
        }
    }
}
