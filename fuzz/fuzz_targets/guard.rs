//! The request guard: a tools/call request line (raw or generated), caps and
//! split points; same verdict at any split, and no verdict only when every cap
//! holds (see `checks::guard_one`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::guard_one(data));
