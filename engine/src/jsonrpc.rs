//! Small JSON-RPC messages the engine writes itself.

/// JSON-RPC parse error.
pub const PARSE_ERROR: i32 = -32700;
/// JSON-RPC invalid request (a message that is not a valid request).
pub const INVALID_REQUEST: i32 = -32600;
/// JSON-RPC invalid params.
pub const INVALID_PARAMS: i32 = -32602;
/// JSON-RPC internal error (used for a broken or vanished server response).
pub const INTERNAL_ERROR: i32 = -32603;

/// Append `{"jsonrpc":"2.0","id":ID,"error":{"code":CODE,"message":MSG}}`;
/// `id` is raw JSON (`null` when unknown).
pub fn error_line(out: &mut Vec<u8>, id: Option<&[u8]>, code: i32, message: &str) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.unwrap_or(b"null"));
    out.extend_from_slice(b",\"error\":{\"code\":");
    out.extend_from_slice(code.to_string().as_bytes());
    out.extend_from_slice(b",\"message\":");
    crate::mcp::push_json_string(out, message);
    out.extend_from_slice(b"}}");
}

/// [`error_line`] as a line of its own, its newline included: the reply a
/// proxy or a gateway sends its client.
pub fn error_reply(id: Option<&[u8]>, code: i32, message: &str) -> Vec<u8> {
    let mut line = Vec::with_capacity(256);
    error_line(&mut line, id, code, message);
    line.push(b'\n');
    line
}

/// The line `filter` writes for an input line that is not valid JSON.
pub fn parse_error_line(out: &mut Vec<u8>, id: Option<&[u8]>) {
    error_line(
        out,
        id,
        PARSE_ERROR,
        "resultbudget: the message was not valid JSON and was not forwarded",
    );
}

/// What the engine says of a line that is valid JSON but not one message
/// object (`filter`, the writers, and the proxy to its client).
pub const NOT_ONE_MESSAGE: &str =
    "resultbudget: a line that is not one JSON-RPC message object (a batch, or a bare value) is not forwarded";

/// The line `filter` and the library's writers write for an input line that is
/// valid JSON but not one message object: a batch (an array) or a bare value.
pub fn not_one_message_line(out: &mut Vec<u8>) {
    error_line(out, None, INVALID_REQUEST, NOT_ONE_MESSAGE);
}
