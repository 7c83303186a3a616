//! perf reads what our writer writes: the real recording re-written record by
//! record (parsed, then serialized) is accepted by `perf script -D` without a
//! warning, with the same record counts, and perf's Intel PT decoder prints
//! the same thing for it as for the original. Our own output round-trips
//! byte for byte (write → read → write).

mod common;

use common::*;
use sideband::file::PerfFile;
use sideband::record::{Event, Record};

#[test]
fn write_read_write_is_byte_identical_for_the_real_files() {
    for name in FILES {
        let bytes = realdata(name);
        let f = PerfFile::parse(&bytes).unwrap();
        let once = rewrite(&f);
        let g = PerfFile::parse(&once).unwrap_or_else(|e| panic!("{name}: our output: {e}"));
        assert!(g.warnings().is_empty(), "{name}: {:?}", g.warnings());
        assert_eq!(g.is_pipe(), f.is_pipe());
        assert_eq!(our_counts(&g), our_counts(&f), "{name}");
        assert_eq!(g.attrs(), f.attrs(), "{name}");
        // Same events (offsets differ: the file layout is ours; in pipe mode
        // our writer puts the HEADER_ATTR records first).
        let events = |f: &PerfFile<'_>| -> Vec<Event<'static>> {
            f.events()
                .map(|e| e.unwrap().1.into_owned())
                .filter(|e| !matches!(e.record, Record::HeaderAttr { .. }))
                .collect()
        };
        assert_eq!(events(&g), events(&f), "{name}");
        let twice = rewrite(&g);
        assert!(once == twice, "{name}: write -> read -> write differs");
    }
}

#[test]
fn perf_reads_the_rewritten_file_without_warning_and_decodes_it_alike() {
    let Some(perf) = perf("perf_reads_the_rewritten_file_without_warning_and_decodes_it_alike")
    else {
        return;
    };
    let name = "perf.data.intel_pt-4.14";
    let orig_path = pt_tests::realdata(name);
    let bytes = realdata(name);
    let ours = temp_file(&rewrite(&PerfFile::parse(&bytes).unwrap()));

    let (dump, err, ok) = run_perf(&perf, &["script", "-D"], ours.path(), false);
    assert!(
        ok && err.trim().is_empty(),
        "perf script -D on our file: {err}"
    );
    assert!(dump.contains("PERF_RECORD_AUXTRACE size: 0x21a00"));
    assert_eq!(
        perf_counts(&perf, ours.path(), false),
        perf_counts(&perf, &orig_path, false)
    );

    let (want, want_err, ok1) = run_perf(&perf, &["script", "--itrace=cr"], &orig_path, false);
    let (got, got_err, ok2) = run_perf(&perf, &["script", "--itrace=cr"], ours.path(), false);
    assert!(ok1 && ok2, "{want_err}\n{got_err}");
    // Nothing differs but the file name perf may print in its messages.
    let norm = |s: &str| {
        s.replace(&*orig_path.to_string_lossy(), "FILE")
            .replace(&*ours.path().to_string_lossy(), "FILE")
    };
    assert_eq!(norm(&got_err), norm(&want_err));
    assert!(!want.is_empty());
    assert!(
        norm(&got) == norm(&want),
        "perf script --itrace=cr differs:\n{}",
        first_diff(&want, &got)
    );
}

#[test]
fn perf_reads_our_pipe_stream() {
    let Some(perf) = perf("perf_reads_our_pipe_stream") else {
        return;
    };
    let name = "perf.data.piped.intel_pt-4.14";
    let bytes = realdata(name);
    let ours = temp_file(&rewrite(&PerfFile::parse(&bytes).unwrap()));
    let (_, err, ok) = run_perf(&perf, &["script", "-D"], ours.path(), true);
    assert!(
        ok && err.trim().is_empty(),
        "perf script -D on our stream: {err}"
    );
    assert_eq!(
        perf_counts(&perf, ours.path(), true),
        perf_counts(&perf, &pt_tests::realdata(name), true)
    );
}

fn first_diff(a: &str, b: &str) -> String {
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {}:\n- {x}\n+ {y}", i + 1);
        }
    }
    format!("{} vs {} lines", a.lines().count(), b.lines().count())
}
