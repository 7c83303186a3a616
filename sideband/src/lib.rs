//! perf_event records, the perf.data container and the process timeline.
//!
//! Pure code, no syscalls: the recorder (`ptrec`), the simulator (`ptsim`) and
//! the decoder (`ptdec`) all read and write perf's formats through this crate.
//! Unsafe code is denied except in [`bytes`], whose one unsafe block maps
//! a file.
#![deny(unsafe_code)]

pub mod addr_filter;
pub mod attr;
pub mod auxtrace_info;
#[allow(unsafe_code)]
pub mod bytes;
pub mod endian;
pub mod error;
pub mod feature;
pub mod file;
pub mod ordered;
pub mod parse;
pub mod record;
pub mod sample;
pub mod serialize;
pub mod sink;
pub mod timeconv;
pub mod timeline;
pub mod writer;

pub use error::Error;
