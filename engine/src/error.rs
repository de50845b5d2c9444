//! The engine's one error type: a kind and the absolute byte offset where it was found.

use std::fmt;

/// What went wrong. New kinds may be added; match with a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input ended before the JSON value did (or held no value at all).
    /// This is the only kind for which [`Error::is_incomplete`] is true: more
    /// input might have made the document valid.
    UnexpectedEnd,
    /// A byte that cannot appear at this point of the grammar.
    UnexpectedByte,
    /// Bytes that are not well-formed UTF-8 (overlong, surrogate, > U+10FFFF,
    /// stray continuation byte, truncated sequence).
    InvalidUtf8,
    /// An unescaped control character (U+0000..U+001F) inside a string.
    ControlInString,
    /// A backslash escape that RFC 8259 does not define, or a `\u` escape
    /// without four hex digits.
    InvalidEscape,
    /// A `\u` escape of a surrogate that is not half of a well-formed pair.
    LoneSurrogate,
    /// A number that breaks RFC 8259's grammar (leading zero, lone `-`, `1.`, `1e`).
    InvalidNumber,
    /// Something other than whitespace after the top-level value.
    TrailingData,
    /// Containers nested deeper than the tokenizer's depth limit.
    TooDeep,
    /// A line longer than the framing limit (proxy and filter only).
    LineTooLong,
    /// The caller used the API out of order (fed input after `finish`).
    Misuse,
}

impl ErrorKind {
    /// A short stable name, used in messages and records.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::UnexpectedEnd => "unexpected end of input",
            ErrorKind::UnexpectedByte => "unexpected byte",
            ErrorKind::InvalidUtf8 => "invalid UTF-8",
            ErrorKind::ControlInString => "unescaped control character in string",
            ErrorKind::InvalidEscape => "invalid escape",
            ErrorKind::LoneSurrogate => "unpaired surrogate escape",
            ErrorKind::InvalidNumber => "invalid number",
            ErrorKind::TrailingData => "trailing data after the JSON value",
            ErrorKind::TooDeep => "nesting too deep",
            ErrorKind::LineTooLong => "line too long",
            ErrorKind::Misuse => "API misuse",
        }
    }
}

/// An error with the absolute byte offset (from the first byte ever fed) where
/// it was detected. The offset does not depend on how the input was chunked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Error {
    kind: ErrorKind,
    offset: u64,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, offset: u64) -> Error {
        Error { kind, offset }
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Absolute byte offset of the offending byte (for [`ErrorKind::UnexpectedEnd`],
    /// the total length of the input).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// True when the input simply stopped too early: "need more input", not
    /// "bad input".
    pub fn is_incomplete(&self) -> bool {
        self.kind == ErrorKind::UnexpectedEnd
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.kind.as_str(), self.offset)
    }
}

impl std::error::Error for Error {}
