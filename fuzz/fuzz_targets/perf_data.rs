//! Any bytes given to the perf.data reader: parse, walk every record and
//! feature, replay the sideband (fuzz/src/harness.rs). Errors are fine; a
//! panic is a bug.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pt_fuzz::harness::perf_data(data);
});
