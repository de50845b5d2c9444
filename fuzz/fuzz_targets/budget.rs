//! The generic budget: limits, split points and a document (raw or generated)
//! from the input; output invariants of `specs/budget-semantics.md` (see
//! `checks::budget_one`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::budget_one(data));
