//! Raw Intel PT decoded by libipt's block decoder and by ptdec's own flow
//! decoder (issue 23) against the fixed image of `raw_pt`
//! (fuzz/src/harness.rs): a difference in instructions, errors, error
//! offsets or FTF is a bug, as are a panic and unbounded memory.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pt_fuzz::harness::flow_diff(data);
});
