//! The proxy's two relays over one session of client and server lines
//! (generated, or raw), whole and in random reads: the same session however
//! the reads fall, JSON lines only to the client, the client's own lines only
//! to the server, and no refused call among them; then the same lines
//! through the fed form with the tools unknown, so that the session lists
//! them itself (see `checks::proxy_one` and `checks::check_fed`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::proxy_one(data));
