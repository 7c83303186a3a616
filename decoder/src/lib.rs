//! ptdec, the top of the decoder: the pipeline assembled from
//! `ptdec-core`'s stages and one of `ptdec-out`'s sinks (`pipeline`,
//! `report`, `dataset`), the command line (`cli`), the summary and `ptdec check`.
//! The core's and the sinks' modules are re-exported under their own
//! names (`ptdec::decode` is `ptdec_core::decode`). No unsafe code.
#![deny(unsafe_code)]

pub use ptdec_core::{
    decode, events, flow_diff, images, input, inputs, interp, min_duration, model, outfile, pevent,
    raw, stack, stitch, symbols, text,
};
pub use ptdec_out::{aggregate, emit, parquet};

pub mod check;
pub mod cli;
pub mod dataset;
pub mod pipeline;
pub mod plan;
pub mod report;
pub mod summary;
