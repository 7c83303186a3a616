//! `ptdec` on the real recordings in `../shared/realdata` (no binaries come
//! with them): decoding finishes without a panic, reports the missing
//! images, and the FTF it writes (plain, gzip, split) is read by the `fxt`
//! Python package exactly as our reader reads it.

use std::path::Path;
use std::process::Command;

use ftf::read::{EventKind, RecordKind};
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

const FXT_EVENTS: &str = r#"
import sys
from fxt.reader import parse_records
with open(sys.argv[1], "rb") as f:
    result = parse_records(f)
if result.had_unexpected_eof:
    print("unexpected EOF:", result.eof_error, file=sys.stderr)
    sys.exit(2)
for provider_id, provider in sorted(result.records_by_provider.items()):
    for r in provider.records:
        name = type(r).__name__
        if name == "KernelObjectRecord":
            print(f"kobj {int(r.type)} {r.id} {r.name}")
        elif hasattr(r, "thread"):
            print(f"{name} {r.thread.process_id} {r.thread.thread_id} {r.category} {r.name} {r.timestamp_ns} {sorted(r.args)}")
"#;

/// The fxt script's view from our reader (1e9 ticks per second).
fn our_view(bytes: &[u8]) -> String {
    let mut s = String::new();
    for r in ftf::read::parse(bytes).unwrap() {
        match r.kind {
            RecordKind::KernelObject(k) => {
                s += &format!("kobj {} {} {}\n", k.obj_type, k.koid, k.name)
            }
            RecordKind::Event(e) => {
                let class = match e.kind {
                    EventKind::Instant => "InstantEventRecord",
                    EventKind::DurationComplete { .. } => "DurationCompleteEventRecord",
                    other => panic!("ptdec never writes {other:?}"),
                };
                let mut names: Vec<String> =
                    e.args.iter().map(|a| format!("'{}'", a.name)).collect();
                names.sort();
                s += &format!(
                    "{class} {} {} {} {} {} [{}]\n",
                    e.thread.pid,
                    e.thread.tid,
                    e.category,
                    e.name,
                    e.ts,
                    names.join(", ")
                );
            }
            _ => {}
        }
    }
    s
}

fn fxt_agrees(test: &str, python: &Path, bytes: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let (script, file) = (dir.path().join("ev.py"), dir.path().join("t.ftf"));
    std::fs::write(&script, FXT_EVENTS).unwrap();
    std::fs::write(&file, bytes).unwrap();
    let out = Command::new(python)
        .arg(&script)
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{test}: fxt: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs = String::from_utf8(out.stdout).unwrap();
    let ours = our_view(bytes);
    if theirs != ours {
        let first = theirs
            .lines()
            .zip(ours.lines())
            .find(|(a, b)| a != b)
            .map(|(a, b)| format!("fxt:  {a}\nours: {b}"))
            .unwrap_or_else(|| "one is a prefix of the other".into());
        panic!("{test}: fxt and our reader disagree:\n{first}");
    }
}

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
        let report = decode(&path, EmitOptions::default());
        assert!(
            !report.missing.is_empty(),
            "{name}: no binaries come with it"
        );
        let split = decode(
            &path,
            EmitOptions {
                split: Some(250_000),
                ..EmitOptions::default()
            },
        );
        let Some(python) = &python else { continue };
        for w in report.written.iter().chain(&split.written) {
            fxt_agrees(&format!("{test} {name} {:?}", w.window), python, &w.bytes);
        }
    }
}
