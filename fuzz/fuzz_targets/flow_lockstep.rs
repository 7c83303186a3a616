//! ptdec's own flow decoder and libipt's block decoder side by side on raw
//! Intel PT against the fixed image of `raw_pt` (fuzz/src/harness.rs,
//! `ptdec::flow_diff`): any difference in instructions, events, times,
//! errors or error offsets is a bug, as are a panic and unbounded memory.
//! Much faster per input than `flow_diff`, which runs the whole pipeline.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pt_fuzz::harness::flow_lockstep(data);
});
