//! `ptdec` on the real recordings in `../shared/realdata` (no binaries come
//! with them): decoding finishes without a panic, reports the missing
//! images, and the FTF it writes (plain, gzip, split) is read by the `fxt`
//! Python package exactly as our reader reads it, and by Perfetto's own
//! importer with no import error, every event shown, threads named as in
//! the summary and calls at the depth ptdec's stack gave them. The Alder
//! Lake recording's PTWRITE payloads are those `perf script --itrace=w`
//! lists.

mod common;

use std::path::Path;

use ptdec::decode::DecodeOptions;
use ptdec::emit::{EmitOptions, Target};
use ptdec::images::{ImageStore, SearchPath};
use ptdec::input::Trace;
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
    let input = ptdec::pipeline::Input::Trace {
        trace: &trace,
        images: &images,
        symbols: &symbols,
    };
    let (decode, stacks) = (DecodeOptions::default(), Default::default());
    common::ftf_run(input, decode, stacks, emit, Target::Memory).unwrap()
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

#[test]
fn ptwrite_payloads_of_the_alder_lake_recording_equal_perfs() {
    let test = "ptwrite_payloads_of_the_alder_lake_recording_equal_perfs";
    let Some(path) = pt_tests::realdata_file(test, "tmon-alderlake-ptw.perf.data") else {
        return;
    };
    let Some(perf) = pt_tests::perf(test) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let want = common::perf_ptwrites(&perf, &path, home.path());
    assert_eq!(
        want.len(),
        11,
        "perf lists the recording's 11 PTWRITEs: {want:?}"
    );
    let report = decode(
        &path,
        EmitOptions {
            record: true,
            ..EmitOptions::default()
        },
    );
    assert_eq!(report.emit.ptwrites, 11);
    let got = common::ptwrites(&report.written[0].bytes);
    // Per thread in order (perf merges the CPUs' buffers by time, ptdec
    // writes thread after thread).
    let per_tid = |v: &[(u64, u64)]| {
        let mut m: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
        for (t, p) in v {
            m.entry(*t).or_default().push(*p);
        }
        m
    };
    assert_eq!(per_tid(&got), per_tid(&want));
    // The CBR values are a MHz counter per CPU; --no-ptwrite leaves the
    // payloads out.
    let dump = ftf::read::dump(&report.written[0].bytes).unwrap();
    assert!(dump.contains(r#"name="cpu 4 frequency""#), "{dump}");
    assert!(dump.contains(r#"{"MHz": u32(4700)}"#), "{dump}");
    let none = decode(
        &path,
        EmitOptions {
            marks: ptdec::model::ops::MarkFilter {
                ptwrite: false,
                ..Default::default()
            },
            ..EmitOptions::default()
        },
    );
    assert!(common::ptwrites(&none.written[0].bytes).is_empty());
    assert_eq!(none.emit.marks_dropped, 11);
    common::perfetto_agrees_with_report(test, &report);
    if let Some(python) = pt_tests::python_with_fxt(test) {
        common::fxt_agrees(test, &python, &report.written[0].bytes);
    }
}

/// `ptdec raw` of a real core's trace (LLDB's multi-core bundle, a
/// Skylake server running a loop of `jmp`s) cut off at several places, as
/// a trace ends when the program is killed or the buffer fills up: the
/// decode workers leave out the loop's jumps (the stacks do nothing at
/// them), and the call still open where the trace ends ends at the last
/// of them all the same (`Run::tail`), its instructions counted to there.
/// The FTF is byte for byte the one with every jump kept.
#[test]
fn raw_pt_cut_in_a_loop_of_quiet_jumps_ends_as_with_every_jump_kept() {
    let test = "raw_pt_cut_in_a_loop_of_quiet_jumps_ends_as_with_every_jump_kept";
    let bundle = "lldb/intelpt-multi-core-trace";
    let Some(core) = pt_tests::realdata_file(test, &format!("{bundle}/cores/51.intelpt_trace"))
    else {
        return;
    };
    let elf = pt_tests::realdata(&format!("{bundle}/modules/m.out"));
    let pt = std::fs::read(&core).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let symbols = SymbolCache::new();
    let cfg = ptdec::decode::RawConfig {
        cpu: Some((6, 85, 4)),
        ..Default::default()
    };
    // Its first 1,081 bytes are before a PSB, then code without an image
    // before the loop: cut in the loop's packets.
    for cut in [
        pt.len(),
        pt.len() - 138,
        pt.len() - 738,
        pt.len() - 1238,
        pt.len() - 1538,
    ] {
        let path = dir.path().join(format!("cut-{cut}.pt"));
        std::fs::write(&path, &pt[..cut]).unwrap();
        let input = ptdec::raw::RawInput::load(
            &ptdec::raw::FileRange {
                path,
                from: 0,
                to: None,
            },
            &[ptdec::raw::ElfSpec {
                path: elf.clone(),
                base: None,
            }],
            &[],
        )
        .unwrap();
        let ftf = |keep| {
            let chunks = ptdec::decode::Chunking::Auto;
            let r = common::raw_ftf_run((&input, &cfg, &symbols), keep, chunks, Target::Memory);
            (r.written[0].bytes.clone(), r.decode.quiet_jumps)
        };
        let (quiet, left_out) = ftf(false);
        let (kept, none) = ftf(true);
        assert!(left_out > 100, "cut at {cut}: {left_out} quiet jumps");
        assert_eq!(none, 0);
        assert!(quiet == kept, "cut at {cut}: the FTF differs");
    }
}
