//! resultbudget: a zero-copy streaming budget engine for MCP tool results.
//!
//! Data flows one way: bytes → [`tokenizer`] → policy ([`budget`], [`mcp`]) → output.
//! `unsafe` is denied everywhere but in [`scan`] (SIMD, each block with a `SAFETY` line).
#![deny(unsafe_code)]

pub mod audit;
pub mod budget;
pub mod cli;
pub mod error;
pub mod framing;
pub mod gate;
pub mod guard;
pub mod inventory;
pub mod jsonrpc;
pub mod limits;
pub mod mcp;
mod out;
mod page_size;
pub mod proxy;
pub mod record;
pub mod scan;
mod session;
mod skim;
pub mod sniff;
pub mod tokenizer;
pub mod transport;

pub use budget::{Budget, Status};
pub use error::{Error, ErrorKind};
pub use limits::Limits;
pub use record::{BudgetKind, Record};

/// The library guide (`docs/library.md`); its examples run as doctests.
#[doc = include_str!("../../docs/library.md")]
pub mod guide {}
