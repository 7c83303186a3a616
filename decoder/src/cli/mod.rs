//! The `ptdec` command line's work: its options (`args`, parsed by `parse`),
//! and the handlers `main.rs` dispatches to, which build the library's
//! options from them, run and print.

pub mod args;
mod commands;
mod insn_list;
pub mod parse;
mod run;
mod signals;

pub use commands::{check, dump, info, report};
pub use run::{decode, decode_raw};
pub use signals::{ignored_signals, on_interrupt};
