//! Garbage (with PSBs planted in it) before valid Intel PT in a trace dir's
//! AUX data, decoded in one chunk and in chunks of a size the input picks
//! (fuzz/src/harness.rs): the same instructions either way, and the valid
//! part in full when the garbage cannot be synchronized at. A panic, a
//! failed check or unbounded memory is a bug.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pt_fuzz::harness::garbage_prefix(data);
});
