//! Decoding on another machine (issue 4): a program is traced by ptsim from
//! a directory that then disappears (its binary hidden from the lookup
//! path, as on a machine that never had it), and the trace dir is copied
//! elsewhere. Decoded there without `--sysroot`, the binary is reported
//! missing with the address range left undecoded; with `--sysroot DIR`
//! holding the binary at its recorded path, the FTF is byte for byte the
//! one decoded on the recording machine, and so are the calls and
//! instructions; Perfetto's importer shows it with every call at the depth
//! ptdec's stack gave it.

mod common;

use std::path::{Path, PathBuf};

use ptdec::pipeline::Report;

fn programs(test: &str) -> Option<PathBuf> {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-programs");
    pt_tests::fixture_programs(test, &out)
}

/// Decodes `dir` into memory, searching the trace dir, the `sysroots`
/// and this machine's files (not ~/.debug).
fn decode(dir: &Path, sysroots: &[PathBuf]) -> Report {
    common::decode_to_memory(dir, sysroots)
}

fn dump(r: &Report) -> String {
    assert_eq!(r.written.len(), 1);
    ftf::read::dump(&r.written[0].bytes).unwrap()
}

#[test]
fn a_copied_trace_decodes_with_sysroot_as_on_the_recording_machine() {
    let test = "a_copied_trace_decodes_with_sysroot_as_on_the_recording_machine";
    let Some(progs) = programs(test) else { return };
    let tmp = tempfile::tempdir().unwrap();

    // The recording machine: the program lives in app/ there.
    let app = tmp.path().join("app");
    std::fs::create_dir(&app).unwrap();
    let prog = app.join("recursion");
    std::fs::copy(progs.join("recursion"), &prog).unwrap();
    let recorded = tmp.path().join("recorded");
    let mut o = ptsim::sim::Options::new(&prog, Vec::new(), &recorded);
    o.env = Some(Vec::new());
    ptsim::sim::run(o).unwrap();
    let here = decode(&recorded, &[]);
    assert!(here.missing.is_empty(), "{:?}", here.missing);
    assert!(here.decode.insns > 10_000 && here.stack.calls > 190);

    // Another machine: the trace dir copied, the program nowhere.
    let elsewhere = tmp.path().join("elsewhere/trace");
    pt_tests::copy_tree(&recorded, &elsewhere);
    std::fs::rename(&app, tmp.path().join("app.gone")).unwrap();

    let bare = decode(&elsewhere, &[]);
    let m = bare
        .missing
        .iter()
        .find(|m| Path::new(&m.name) == prog)
        .unwrap_or_else(|| {
            panic!(
                "{} not reported missing: {:?}",
                prog.display(),
                bare.missing
            )
        });
    // -no-pie: the text mapping starts at 0x401000.
    assert!(
        m.ranges
            .iter()
            .any(|&(_, start, end)| start <= 0x40_1000 && 0x40_1000 < end),
        "{m:?}"
    );
    let text = ptdec::summary::render(&bare);
    eprintln!("without --sysroot:\n{text}");
    let (_, start, end) = m.ranges[0];
    for want in [
        format!("{}", prog.display()),
        format!("{start:#x}-{end:#x}"),
        "--sysroot".to_string(),
    ] {
        assert!(text.contains(&want), "summary lacks {want:?}:\n{text}");
    }
    assert!(bare.decode.insns < here.decode.insns);

    // With a sysroot holding the binary at its recorded path.
    let sysroot = tmp.path().join("sysroot");
    let inside = sysroot.join(prog.strip_prefix("/").unwrap());
    std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
    std::fs::copy(progs.join("recursion"), &inside).unwrap();
    let there = decode(&elsewhere, &[sysroot]);
    assert!(there.missing.is_empty(), "{:?}", there.missing);
    assert_eq!(there.decode.insns, here.decode.insns);
    assert_eq!(there.stack, here.stack);
    assert_eq!(dump(&there), dump(&here));
    common::perfetto_agrees_with_report(test, &there);
    common::perfetto_agrees_with_report(&format!("{test} (no binary)"), &bare);
}
