//! Any bytes given to the perf.data reader: parse, walk every record and
//! feature, replay the sideband. Errors are fine; a panic is a bug.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(file) = sideband::file::PerfFile::parse(data) else {
        return;
    };
    let features = file.features();
    let _ = features.cpuid();
    let _ = features.build_ids();
    let _ = features.auxtrace_index();
    let events: Vec<_> = file
        .events()
        .filter_map(Result::ok)
        .map(|(_, e)| e)
        .collect();
    let _ = sideband::timeline::Timeline::replay(events);
});
