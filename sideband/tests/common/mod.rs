//! Helpers shared by the sideband integration tests: the real recordings,
//! the `perf` binary and the missing-tool policy (PT_REQUIRE_TOOLS=1 turns a
//! skip into a failure, as in the workspace's `tests` crate), rewriting a
//! file through our writer, and perf's per-kind record counts.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sideband::feature;
use sideband::file::PerfFile;
use sideband::record::{kind, Record};
use sideband::writer::{FileWriter, PipeWriter};

pub const FILES: [&str; 3] = [
    "perf.data.intel_pt-4.14",
    "perf.data.piped.intel_pt-4.14",
    "tmon-alderlake-ptw.perf.data",
];

pub fn realdata(name: &str) -> Vec<u8> {
    let p = pt_tests::realdata(name);
    std::fs::read(&p)
        .unwrap_or_else(|e| panic!("{}: {e} (see ../shared/realdata/README.md)", p.display()))
}

/// `perf`, or `None` after printing a skip line (a panic under PT_REQUIRE_TOOLS=1).
pub fn perf(test: &str) -> Option<PathBuf> {
    pt_tests::perf(test)
}

/// Runs perf with `args`, the input file given with `-i` (file mode) or on
/// stdin (pipe mode: perf 6.1 misreads AUXTRACE payloads of a pipe-format
/// file given with -i). Returns (stdout, stderr, success).
pub fn run_perf(perf: &Path, args: &[&str], input: &Path, pipe: bool) -> (String, String, bool) {
    let mut cmd = Command::new(perf);
    cmd.args(args)
        .env("PAGER", "cat")
        .env("HOME", std::env::temp_dir());
    // No ~/.debug build-id cache or symbol lookups from this machine.
    cmd.args(["--symfs", "/nonexistent-symfs"]);
    let out = if pipe {
        // A real pipe: with stdin redirected from a regular file perf 6.1
        // takes the file path and misreads AUXTRACE payloads.
        cmd.args(["-i", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let bytes = std::fs::read(input).unwrap();
        let feeder = std::thread::spawn(move || {
            use std::io::Write;
            // perf may stop reading early on an error; that is reported through its exit status.
            let _ = stdin.write_all(&bytes);
        });
        let out = child.wait_with_output().unwrap();
        feeder.join().unwrap();
        out
    } else {
        cmd.arg("-i")
            .arg(input)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

/// perf's per-kind record counts ("Aggregated stats" of `perf report -D`).
pub fn perf_counts(perf: &Path, input: &Path, pipe: bool) -> BTreeMap<String, u64> {
    let (out, err, ok) = run_perf(perf, &["report", "-D"], input, pipe);
    assert!(ok, "perf report -D -i {} failed: {err}", input.display());
    let stats = out.split("Aggregated stats").nth(1).unwrap_or_else(|| {
        panic!(
            "perf report -D -i {} printed no Aggregated stats: {} ... {err}",
            input.display(),
            &out[..out.len().min(2000)]
        )
    });
    let mut m = BTreeMap::new();
    for line in stats.lines().skip(1) {
        let Some((name, rest)) = line.trim().split_once(" events:") else {
            break;
        };
        if name == "TOTAL" {
            continue;
        }
        let n: u64 = rest.split_whitespace().next().unwrap().parse().unwrap();
        m.insert(name.to_string(), n);
    }
    m
}

/// Our per-kind record counts, named as perf names them.
pub fn our_counts(f: &PerfFile<'_>) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for r in f.raw_records() {
        *m.entry(kind::name(r.header.kind).to_string()).or_insert(0) += 1;
    }
    m
}

/// Re-writes a parsed file through our writer, record by record (parsed and
/// serialized, not copied), with its attrs and feature sections; the
/// AUXTRACE index is rebuilt for the new offsets. File mode gives a file,
/// pipe mode a stream.
pub fn rewrite(f: &PerfFile<'_>) -> Vec<u8> {
    if f.is_pipe() {
        let mut w = PipeWriter::new(Vec::new(), f.attrs().clone()).unwrap();
        for ev in f.events() {
            let (_, ev) = ev.unwrap();
            if matches!(ev.record, Record::HeaderAttr { .. }) {
                continue; // PipeWriter::new wrote them
            }
            w.write_event(&ev).unwrap();
        }
        w.finish().unwrap()
    } else {
        let mut w = FileWriter::new(Cursor::new(Vec::new()), f.attrs().clone()).unwrap();
        for (&id, s) in f.features().sections() {
            if id != feature::id::AUXTRACE {
                w.set_feature(id, s.data.to_vec()).unwrap();
            }
        }
        for ev in f.events() {
            w.write_event(&ev.unwrap().1).unwrap();
        }
        w.finish().unwrap().into_inner()
    }
}

/// A temp file holding `bytes`.
pub fn temp_file(bytes: &[u8]) -> tempfile::NamedTempFile {
    use std::io::Write;
    let mut t = tempfile::NamedTempFile::new().unwrap();
    t.write_all(bytes).unwrap();
    t.flush().unwrap();
    t
}
