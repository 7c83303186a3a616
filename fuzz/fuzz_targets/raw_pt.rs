//! Raw Intel PT bytes decoded as `ptdec raw` does, against a fixed image
//! (fuzz/src/harness.rs). Errors are fine; a panic or unbounded memory is a bug.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pt_fuzz::harness::raw_pt(data);
});
