//! ptdec's sinks of call slices, each a `ptdec_core::model::slices::SliceSink`
//! with its own error type: the FTF emitter ([`emit`]: slices, instants
//! and counters into Fuchsia Trace Format files, encoded in blocks on
//! threads of their own) and the report's aggregator ([`aggregate`]:
//! per-function totals, the slowest calls). Where it sits in the data
//! flow: after the call stacks (`ptdec-core`), below the `ptdec` crate,
//! which assembles the pipeline and feeds one of them. The two sinks do
//! not know each other.
#![deny(unsafe_code)]

// The core's modules these use, under the names they had in one crate.
use ptdec_core::{model, outfile};

pub mod aggregate;
pub mod emit;
