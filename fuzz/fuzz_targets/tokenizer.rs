//! Raw bytes through the push tokenizer: whole, split in two, byte by byte;
//! accepted exactly when serde_json accepts (see `checks::tokenizer_one`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::tokenizer_one(data));
