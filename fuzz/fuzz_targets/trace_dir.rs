//! A trace dir as ptrec writes it, whose AUX payload is the fuzz input,
//! decoded as `ptdec DIR` does (fuzz/src/harness.rs). Errors are fine; a
//! panic or unbounded memory is a bug.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pt_fuzz::harness::trace_dir(data);
});
