//! The MCP projection: a tools/call response (raw or generated), McpLimits,
//! call flags and split points; the result contract of
//! `specs/mcp-result-contract.md` (see `checks::mcp_one`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::mcp_one(data));
