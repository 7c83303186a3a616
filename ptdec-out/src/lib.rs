//! ptdec's sinks of call slices, after the call stacks (`ptdec-core`) and
//! below the `ptdec` crate, which feeds one of them: the FTF emitter
//! ([`emit`]), the Parquet dataset ([`parquet`]) and the report's
//! aggregator ([`aggregate`]), each a
//! `ptdec_core::model::slices::SliceSink` with its own error type. They do
//! not know each other.
#![deny(unsafe_code)]

// The core's modules these use, as `crate::model` and `crate::outfile`:
// the paths the architecture test (decoder/tests/architecture.rs) reads.
use ptdec_core::{model, outfile};

pub mod aggregate;
pub mod emit;
pub mod parquet;
