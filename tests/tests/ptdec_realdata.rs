//! `ptdec` on the real recordings in `../shared/realdata` (no binaries come
//! with them): decoding finishes without a panic, reports the missing
//! images, and the FTF it writes (plain, gzip, split) is read by the `fxt`
//! Python package exactly as our reader reads it, and by Perfetto's own
//! importer with no import error, every event shown, threads named as in
//! the summary and calls at the depth ptdec's stack gave them.

mod common;

use std::path::Path;

use ptdec::decode::DecodeOptions;
use ptdec::emit::{EmitOptions, Target};
use ptdec::images::{ImageStore, SearchPath};
use ptdec::input::Trace;
use ptdec::pipeline::{run, RunOptions};
use ptdec::symbols::SymbolCache;

const FILES: [&str; 3] = [
    "perf.data.intel_pt-4.14",
    "perf.data.piped.intel_pt-4.14",
    "tmon-alderlake-ptw.perf.data",
];

fn decode(path: &Path, emit: EmitOptions) -> ptdec::pipeline::Report {
    let trace = Trace::open(path).unwrap();
    let images = ImageStore::new(SearchPath {
        live_fs: false,
        buildid_dir: None,
        ..SearchPath::default()
    });
    let symbols = SymbolCache::for_search(images.search());
    run(
        &trace,
        &images,
        &symbols,
        RunOptions {
            decode: DecodeOptions::default(),
            emit,
            target: Target::Memory,
            on_op: None,
        },
    )
    .unwrap()
}

#[test]
fn fxt_reads_what_ptdec_writes_for_the_real_recordings() {
    let test = "fxt_reads_what_ptdec_writes_for_the_real_recordings";
    let python = pt_tests::python_with_fxt(test);
    for name in FILES {
        let path = pt_tests::realdata_dir().join(name);
        if !path.exists() {
            pt_tests::missing::<()>(test, &format!("{} is not there", path.display()));
            continue;
        }
        let report = decode(
            &path,
            EmitOptions {
                record: true,
                ..EmitOptions::default()
            },
        );
        assert!(
            !report.missing.is_empty(),
            "{name}: no binaries come with it"
        );
        let split = decode(
            &path,
            EmitOptions {
                split: Some(250_000),
                record: true,
                ..EmitOptions::default()
            },
        );
        common::perfetto_agrees_with_report(&format!("{test} {name}"), &report);
        common::perfetto_agrees_with_report(&format!("{test} {name} split"), &split);
        let Some(python) = &python else { continue };
        for w in report.written.iter().chain(&split.written) {
            common::fxt_agrees(&format!("{test} {name} {:?}", w.window), python, &w.bytes);
        }
    }
}
