//! An LLDB trace bundle whose trace.json and trace file are the fuzz input
//! (fuzz/src/harness.rs, `lldb_bundle`), read and decoded as `ptdec
//! BUNDLE` does. Errors are fine; a panic, an abort, a hang or unbounded
//! memory is a bug.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pt_fuzz::harness::lldb_bundle(data);
});
