//! ptdec, the library half: reads a trace dir or perf.data, decodes its Intel
//! PT with libipt, rebuilds call stacks and writes FTF. main.rs only parses
//! arguments and prints errors (`cli` holds its options and handlers). No unsafe code: files are mapped through
//! `sideband::bytes::FileBytes` and libipt is called through the `ipt`
//! crate.
#![deny(unsafe_code)]

pub mod check;
pub mod cli;
pub mod decode;
pub mod emit;
pub mod events;
pub mod flow_diff;
pub mod images;
pub mod input;
pub mod inputs;
pub mod interp;
pub mod min_duration;
pub mod model;
pub mod outfile;
pub mod pevent;
pub mod pipeline;
pub mod raw;
pub mod report;
pub mod stack;
pub mod stitch;
pub mod summary;
pub mod symbols;
pub mod text;
