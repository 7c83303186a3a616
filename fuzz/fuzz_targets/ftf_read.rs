//! Any bytes given to the FTF reader and its text dump. Errors are fine; a
//! panic is a bug.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = ftf::read::dump(data);
});
