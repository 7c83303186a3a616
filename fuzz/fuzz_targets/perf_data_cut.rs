//! A trace's perf.data cut at any offset (fuzz/src/harness.rs,
//! `perf_data_cut`): the reader refuses it or decodes what is there; a
//! panic, an abort or unbounded memory is a bug.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pt_fuzz::harness::perf_data_cut(data);
});
