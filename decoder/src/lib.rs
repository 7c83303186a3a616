//! ptdec, the library half: reads a trace dir or perf.data, decodes its Intel
//! PT with libipt, rebuilds call stacks and writes FTF. main.rs only parses
//! arguments and prints errors.

pub mod ops;
pub mod input;
pub mod decode;
pub mod images;
pub mod symbols;
pub mod stack;
pub mod emit;
pub mod pipeline;
pub mod summary;
