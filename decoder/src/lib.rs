//! ptdec, the top of the decoder: the pipeline assembled from the stages
//! of `ptdec-core` and a sink of `ptdec-out` (`pipeline`: FTF and raw
//! runs; `report`: the aggregator's run and its renderings), the command
//! line (`cli`), the run's summary (`summary`) and `ptdec check`. main.rs
//! only parses arguments and prints errors. The core's and the sinks'
//! modules are re-exported under their own names, so `ptdec::decode` is
//! `ptdec_core::decode`. No unsafe code.
#![deny(unsafe_code)]

pub use ptdec_core::{
    decode, events, flow_diff, images, input, inputs, interp, min_duration, model, outfile, pevent,
    raw, stack, stitch, symbols, text,
};
pub use ptdec_out::emit;

pub mod check;
pub mod cli;
pub mod pipeline;
pub mod report;
pub mod summary;
