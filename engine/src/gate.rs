//! The request gate: what of each client line reaches the server.
//!
//! [`Guard`] measures one request line. The gate decides around it, line by
//! line, the way the proxy does (`specs/request-guard.md`):
//!
//! - a line that shows it is not a `tools/call` (another method, or an answer
//!   to one of the server's requests) goes on as it streams, in pieces of
//!   about 64 KiB;
//! - a call is held until the guard has read all of it, and goes on whole, its
//!   `limit` lowered where the inventory clamps it;
//! - a call over a cap, or against the list-versus-search contract, is refused
//!   before any of it reaches the server, and the client is owed an
//!   `isError: true` result;
//! - a line that is not valid JSON, that is a batch or a bare value (the guard
//!   cannot check the calls inside a batch, and a server that still reads
//!   batches would run them), that names `tools/call` only after it was sent
//!   on as something else, or that is a request whose id the proxy cannot
//!   read (an object or an array, or over 256 bytes: nothing could be
//!   matched to it), does not go on; the part of it that already went, if
//!   any, is ended with a newline so the server reads one broken line.
//!
//! The gate writes nothing itself. [`RequestGate::feed`] hands the caller what
//! to send on now; [`RequestGate::end_line`] gives the line's [`Fate`], and
//! [`RequestGate::to_send`] the bytes that end the line on the server's side.
//! A gateway that has each message whole calls [`RequestGate::check`] instead.
//!
//! Memory: the gate holds at most one call, up to the loosest
//! `max_request_bytes` of any tool ([`Guard::max_hold`]; a call is refused
//! there at the latest), and at most about 64 KiB of a line that is not a call.

use crate::framing;
use crate::guard::{ArgCaps, Guard, GuardVerdict, RequestFacts};
use crate::inventory::Inventory;
use crate::jsonrpc;
use crate::sniff::unquote_into;

/// How much of a line that is not a `tools/call` the gate holds before it
/// hands it on: a short line goes to the server in one write with its newline
/// (a write the server reads without the newline wakes it for nothing), a long
/// one streams in pieces of about this size.
pub const PASS_PIECE: usize = 64 << 10;

/// Something the gate did while a line streamed, worth a line in a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// A line sent on as not a call (an answer, another method first) named
    /// `tools/call` later: the rest of it is not handed on, and it ends
    /// [`Why::NamedCallLate`].
    NamedCallLate,
    /// A line showed no method within [`Guard::max_hold`] bytes, so it could
    /// not be held to be checked: it is handed on unchecked.
    PassedUnchecked,
}

impl Notice {
    /// One line for logs.
    pub fn message(&self) -> &'static str {
        match self {
            Notice::NamedCallLate => {
                "a line sent on as not a call named tools/call later; the rest of it was not forwarded"
            }
            Notice::PassedUnchecked => {
                "a request line with no method in its first bytes was passed unchecked"
            }
        }
    }
}

/// Why a line did not go on. More reasons may come (a match needs a `_` arm).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Why {
    /// It named `tools/call` only after it was taken for another kind of
    /// message, so the guard never measured it as a call.
    NamedCallLate,
    /// It is not valid JSON: the guard's measures stop where it broke, and a
    /// lenient parser could run what follows unmeasured.
    NotJson,
    /// It is a batch (a JSON array) or a bare value, not one message.
    NotOneMessage,
    /// It broke a cap before its method showed, and was not a call.
    CapBeforeMethod,
    /// A call the guard refused.
    Refused(GuardVerdict),
    /// Given to [`RequestGate::check`], it holds a newline before its end.
    NotOneLine,
    /// A request with an `id` the proxy cannot read
    /// ([`RequestFacts::id_untaken`]): an object or an array, which JSON-RPC
    /// does not allow, or a scalar longer than 256 bytes. No answer could
    /// be matched to it, nor could the proxy answer it by its id. Nothing of
    /// it goes on from the piece that shows it.
    IdUnreadable,
}

impl Why {
    /// One line for logs; `tool` is the call's tool name.
    pub fn message(&self, tool: &str) -> String {
        match self {
            Why::NamedCallLate => "a line that named tools/call late was not forwarded".into(),
            Why::NotJson => "dropped a line from the client that is not valid JSON".into(),
            Why::NotOneMessage => {
                "dropped a line from the client that is not one JSON-RPC message (a batch, or a bare value)".into()
            }
            Why::CapBeforeMethod => {
                "dropped a line that broke an argument cap before its method was known".into()
            }
            Why::Refused(v) => format!("refused tools/call {tool}: {}", v.summary()),
            Why::NotOneLine => "dropped a message that holds a newline before its end".into(),
            Why::IdUnreadable => {
                "dropped a request whose id is not a string or a number of up to 256 bytes".into()
            }
        }
    }
}

/// What became of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// Send [`RequestGate::to_send`] to the server: the line (or the rest of
    /// it, after what `feed` handed on) and its newline. `clamped` is the new
    /// `limit` of a call the inventory clamps.
    Forward { clamped: Option<u64> },
    /// The line does not go on; [`RequestGate::to_send`] is a newline if part
    /// of it already went, else empty. `reply` is the line the client is owed
    /// (its newline included): an `isError` result for a refused call, a
    /// JSON-RPC error for a broken request; none for a line the client is not
    /// waiting on (a notification, an answer to the server).
    Dropped { why: Why, reply: Option<Vec<u8>> },
}

/// The request gate: feed a client line's pieces, then end it.
#[derive(Debug, Clone)]
pub struct RequestGate {
    guard: Guard,
    hold_cap: usize,
    /// The line's bytes not handed on yet; after `end_line`, what to send.
    held: Vec<u8>,
    /// What the line showed itself to be first ([`RequestFacts::first_call`]).
    decided: Option<bool>,
    refused: bool,
    /// Some of the line was handed on (it streamed).
    streamed: bool,
    /// The line named `tools/call` after it was taken for something else.
    cut: bool,
    /// The line's first byte that is not whitespace; `None` while only
    /// whitespace came (a blank line goes on, and is never "broken").
    first: Option<u8>,
    /// `end_line` ran: the next call starts a new line.
    ended: bool,
    tool: String,
}

impl Default for RequestGate {
    fn default() -> Self {
        RequestGate::with_guard(Guard::default())
    }
}

impl RequestGate {
    /// A gate with these caps and no inventory.
    pub fn new(caps: ArgCaps) -> RequestGate {
        RequestGate::with_guard(Guard::new(caps))
    }

    /// A gate around a configured guard (its inventory, its lone-surrogate
    /// reading).
    pub fn with_guard(guard: Guard) -> RequestGate {
        let hold_cap = usize::try_from(guard.max_hold()).unwrap_or(usize::MAX);
        RequestGate {
            guard,
            hold_cap,
            held: Vec::new(),
            decided: None,
            refused: false,
            streamed: false,
            cut: false,
            first: None,
            ended: false,
            tool: String::new(),
        }
    }

    /// Per-tool caps, classes and limits (see [`Guard::set_inventory`]).
    pub fn set_inventory(&mut self, inv: Option<Inventory>) {
        self.guard.set_inventory(inv);
        self.hold_cap = usize::try_from(self.guard.max_hold()).unwrap_or(usize::MAX);
    }

    /// Read a lone surrogate escape as one character (see
    /// [`Guard::set_lone_surrogates`]).
    pub fn set_lone_surrogates(&mut self, on: bool) {
        self.guard.set_lone_surrogates(on);
    }

    /// The guard, as configured.
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// What the line showed of itself so far (after `end_line`, all of it,
    /// until the next line begins).
    pub fn facts(&self) -> &RequestFacts {
        self.guard.facts()
    }

    /// After `end_line` of a call: its tool name, by value.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// Whether the line carried the 2026-07-28 protocol-version `_meta`.
    pub fn is_modern(&self) -> bool {
        self.guard.is_modern()
    }

    /// Forget a line that was ended, keeping the buffers.
    fn begin(&mut self) {
        if self.ended {
            self.ended = false;
            self.held.clear();
            self.decided = None;
            self.refused = false;
            self.streamed = false;
            self.cut = false;
            self.first = None;
            self.tool.clear();
            self.guard.reset();
        }
    }

    /// Forget the line in progress: the next piece begins a new one.
    pub fn reset(&mut self) {
        self.ended = true;
        self.begin();
    }

    /// Feed a piece of the line (without its newline). `send` is called with
    /// the bytes to hand on to the server now, in order; the line's newline is
    /// not among them (see [`RequestGate::to_send`]).
    pub fn feed(&mut self, piece: &[u8], mut send: impl FnMut(&[u8])) -> Option<Notice> {
        self.begin();
        let mut notice = None;
        if self.first.is_none() {
            self.first = framing::first_content(piece);
        }
        // A batch (a JSON array) or a bare value is not a message the guard
        // can check: its calls would reach a server that still reads batches
        // (MCP 2025-03-26 allowed them) unmeasured.
        let not_message = framing::not_one_object(self.first);
        // One walk of the guard reads the facts and measures a call.
        let verdict = self.guard.feed(piece);
        let first_call = self.guard.facts().first_call;
        if self.decided.is_none() {
            // Decided by what the line showed first, in token order (so
            // however its pieces fall): its first method, or a top-level
            // `result` or `error` before any method, which makes it an answer
            // to one of the server's requests, never held.
            self.decided = first_call;
            if self.decided == Some(false) {
                self.guard.not_a_call();
            }
        }
        if self.named_call_late() && !self.cut {
            // Handed on as an answer or another method, it names tools/call
            // after all (after its result, or in a duplicate method): the
            // guard never measured it as a call.
            self.cut = true;
            self.held.clear();
            notice = Some(Notice::NamedCallLate);
        }
        // The guard keeps measuring after a refusal, so the size it reports is
        // exact. It gives no verdict for what a line broke after it showed it
        // is not a call (`Guard::feed`).
        if verdict.is_some() && !self.refused {
            self.refused = true;
            // The hold is let go of, not only emptied: it may be large.
            self.held = Vec::new();
        }
        let facts = self.guard.facts();
        // A request whose id cannot be read goes no further from the piece
        // that shows it (its id, or its method after such an id).
        let rejected = self.cut
            || not_message
            || self.refused
            || facts.id_unreadable()
            || self.guard.is_broken();
        match self.decided {
            // Refused or cut: nothing more of this line goes on. Nor after the
            // guard found it is not valid JSON: a lenient parser could read on
            // past the break, where the guard cannot (a `NaN`, then a second
            // `method`), so no byte of the piece it broke in, or after,
            // reaches the server.
            _ if rejected => {}
            Some(false) if self.held.len() + piece.len() <= PASS_PIECE => {
                self.held.extend_from_slice(piece);
            }
            Some(false) => {
                if !self.held.is_empty() {
                    send(&self.held);
                    self.held.clear();
                }
                send(piece);
                self.streamed = true;
            }
            None if self.held.len() + piece.len() > self.hold_cap => {
                // No method yet after the request cap: this cannot be guarded.
                // (The guard refuses a call at this size at the latest, so
                // this is a safety net only.)
                notice = Some(Notice::PassedUnchecked);
                self.decided = Some(false);
                send(&self.held);
                self.held.clear();
                send(piece);
                self.streamed = true;
            }
            _ => self.held.extend_from_slice(piece),
        }
        notice
    }

    /// Whether the line named `tools/call` after it was taken for something
    /// else: by its first sign ([`RequestFacts::call_late`], in the order of
    /// its tokens, so a later method does not take it back and the pieces'
    /// ends do not matter), or by its size before any method (handed on
    /// unchecked, the one way `decided` differs from its first sign).
    fn named_call_late(&self) -> bool {
        let facts = self.guard.facts();
        facts.call_late || (self.decided == Some(false) && facts.first_call == Some(true))
    }

    /// The line ended (its newline, or the end of the input after it). Says
    /// what becomes of it; [`RequestGate::to_send`] is then what to send the
    /// server, and [`RequestGate::facts`] what the line was, until the next
    /// line begins.
    pub fn end_line(&mut self) -> Fate {
        self.begin();
        self.ended = true;
        self.guard.end_line();
        let is_call = self.guard.facts().is_call();
        if is_call {
            unquote_into(&self.guard.facts().name, &mut self.tool);
        }
        let verdict = if is_call {
            self.guard.finish(&self.tool)
        } else {
            None
        };
        let modern = self.guard.is_modern();
        let clamp = if is_call {
            self.guard.clamp_to(&self.tool)
        } else {
            None
        };
        self.cut |= self.named_call_late();
        let broken = self.guard.is_broken() && self.first.is_some();
        let not_message = framing::not_one_object(self.first);
        let facts = self.guard.facts();
        let request = facts.is_request();
        let error =
            |code: i32, message: &str| jsonrpc::error_reply(facts.reply_id(), code, message);
        let fate = match verdict {
            _ if self.cut => Fate::Dropped {
                why: Why::NamedCallLate,
                reply: request.then(|| {
                    error(
                        jsonrpc::INVALID_REQUEST,
                        "resultbudget: the message named tools/call only after it was taken for another kind of message (a result, or another method first), and was not forwarded",
                    )
                }),
            },
            _ if broken => Fate::Dropped {
                why: Why::NotJson,
                reply: request.then(|| {
                    error(
                        jsonrpc::PARSE_ERROR,
                        "resultbudget: the request is not valid JSON, so its arguments could not be checked; it was not forwarded",
                    )
                }),
            },
            _ if not_message => Fate::Dropped {
                why: Why::NotOneMessage,
                reply: Some(jsonrpc::error_reply(
                    None,
                    jsonrpc::INVALID_REQUEST,
                    &format!("{}; MCP sends one message per line", jsonrpc::NOT_ONE_MESSAGE),
                )),
            },
            // A request whose id cannot be read: nothing could answer it by
            // its id, so it is answered here, by JSON-RPC's rule for an id
            // that cannot be read: a null one.
            _ if facts.id_unreadable() => Fate::Dropped {
                why: Why::IdUnreadable,
                reply: Some(error(
                    jsonrpc::INVALID_REQUEST,
                    "resultbudget: the request's id is not a string or a number of up to 256 bytes, so no answer could be matched to it; it was not forwarded",
                )),
            },
            // Refused before its method was known: it is gone. Only a request
            // of the client's is answered: a line with no method answers the
            // server, and its id is the server's.
            None if self.refused => Fate::Dropped {
                why: Why::CapBeforeMethod,
                reply: request.then(|| {
                    error(
                        jsonrpc::INVALID_PARAMS,
                        "resultbudget: the request broke an argument cap and was not forwarded",
                    )
                }),
            },
            Some(v) => {
                // Answered here: the server never sees the call. A call with
                // no id is a notification, which nobody waits on: an answer
                // with a null id would answer nothing the client sent.
                let reply = request.then(|| {
                    let mut line = Vec::with_capacity(512);
                    v.write_response(&mut line, facts.reply_id(), modern);
                    line.push(b'\n');
                    line
                });
                Fate::Dropped {
                    why: Why::Refused(v),
                    reply,
                }
            }
            None => {
                // `clamp` is only ever set for a call, which is held whole.
                let mut clamped = None;
                if let Some(c) = clamp {
                    let (a, b) = (c.start as usize, c.end as usize);
                    if a <= b && b <= self.held.len() {
                        // A string stays a string: the server reads it as before.
                        let quote: &[u8] = if c.quoted { b"\"" } else { b"" };
                        let mut tmp = [0; 20];
                        let digits = crate::record::u64_digits(c.max, &mut tmp);
                        let new = quote.iter().chain(digits).chain(quote).copied();
                        self.held.splice(a..b, new);
                        clamped = Some(c.max);
                    }
                }
                self.held.push(b'\n');
                return Fate::Forward { clamped };
            }
        };
        self.held.clear();
        // Part of it may have gone on: end that line, so the server reads one
        // broken line and drops it.
        if self.streamed {
            self.held.push(b'\n');
        }
        fate
    }

    /// After [`RequestGate::end_line`] or [`RequestGate::check`]: the bytes
    /// that end the line on the server's side. For a line that goes on, the
    /// line (or its rest) and its newline; for a dropped line, a newline if
    /// part of it went, else nothing.
    pub fn to_send(&self) -> &[u8] {
        if self.ended {
            &self.held
        } else {
            &[]
        }
    }

    /// One whole message, with or without its newline. Nothing is handed on
    /// early: [`RequestGate::to_send`] is then the whole line and its newline,
    /// or empty. A message that holds a newline anywhere else cannot go to a
    /// server as one line: it is dropped ([`Why::NotOneLine`]).
    pub fn check(&mut self, message: &[u8]) -> Fate {
        let message = message.strip_suffix(b"\n").unwrap_or(message);
        let mut early: Vec<u8> = Vec::new();
        self.reset();
        let _ = self.feed(message, |b| early.extend_from_slice(b));
        let fate = self.end_line();
        if let Fate::Forward { .. } = fate {
            if memchr::memchr(b'\n', message).is_some() {
                self.held.clear();
                self.streamed = false;
                let facts = self.guard.facts();
                return Fate::Dropped {
                    why: Why::NotOneLine,
                    reply: facts.is_request().then(|| {
                        jsonrpc::error_reply(
                            facts.reply_id(),
                            jsonrpc::INVALID_REQUEST,
                            "resultbudget: the message holds a newline, so it cannot be sent as one line; it was not forwarded",
                        )
                    }),
                };
            }
        }
        if self.streamed {
            self.held.clear();
            if let Fate::Forward { .. } = fate {
                // `held` was the newline alone: nothing was held back.
                early.push(b'\n');
                self.held = early;
            }
        }
        fate
    }
}
