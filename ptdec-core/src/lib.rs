//! ptdec's stages, from a trace to call slices, and the contracts between
//! them: above the libraries (`sideband`, `ipt`, `ptflow`), below the
//! sinks (`ptdec-out`) and the `ptdec` crate, which assembles the pipeline.
//!
//! - the contracts in [`model`] (what decode takes from the sources:
//!   `TraceSource`, `CodeImages`, `RawSideband`; ops, marks, slices;
//!   `OpSink`, `SliceSink`, `Resolver`) and helpers of every stage ([`text`], [`inputs`],
//!   [`outfile`]);
//! - opening a trace: [`input`] (perf.data, LLDB bundles), [`images`],
//!   [`symbols`], [`raw`] PT with its perf_event sideband ([`pevent`]);
//! - decoding into ops per thread: [`decode`] (libipt or ptflow), marks
//!   ([`events`]), the two flow decoders side by side ([`flow_diff`]);
//! - call stacks: [`stack`], time spreading ([`interp`]), stacks built
//!   ahead on the workers ([`stitch`]); the `--min-duration` filter
//!   ([`min_duration`]).
//!
//! `decoder/tests/architecture.rs` checks that no module imports a stage
//! it may not (also through `ptdec_core::` paths from the other crates).
//! No unsafe code: files are mapped through `sideband::bytes::FileBytes`
//! and libipt is called through the `ipt` crate.
#![deny(unsafe_code)]

pub mod decode;
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
pub mod raw;
pub mod stack;
pub mod stitch;
pub mod symbols;
pub mod text;
