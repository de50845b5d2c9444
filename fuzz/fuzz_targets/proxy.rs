//! The proxy's two relays over one session of client and server lines
//! (generated, or raw), whole and in random reads: the same session however
//! the reads fall, JSON lines only to the client, the client's own lines only
//! to the server, and no refused call among them (see `checks::proxy_one`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::proxy_one(data));
