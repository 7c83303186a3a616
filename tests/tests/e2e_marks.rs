//! What a trace holds besides calls, from real executions traced by ptsim
//! (issue 13): perf's emulated ptwrite in `fixtures/programs/emuptw.c`
//! (payloads in the TNT bits of `jc` branches to the next instruction),
//! which perf and ptdec must both decode to the payloads the program wrote;
//! and a `--cbr`
//! frequency schedule, which perf (`--itrace=p`) and ptdec (a MHz counter)
//! must both show, with the FTF read by our reader, fxt and Perfetto.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use ptdec::pipeline::Report;

/// The payloads `emuptw` writes, in order (as in emuptw.c).
const EMUPTW_PAYLOADS: [u64; 6] = [
    0x0,
    0x1,
    0x1234_5678_90ab_cdef,
    0xffff_ffff_ffff_ffff,
    0x8000_0000_0000_0001,
    0xdead_beef,
];

fn programs(test: &str) -> Option<PathBuf> {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-programs");
    pt_tests::fixture_programs(test, &out)
}

fn trace(prog: &Path, dir: &Path, cfg: ptsim::pt::Config) {
    let mut o = ptsim::sim::Options::new(prog, Vec::new(), dir);
    o.env = Some(Vec::new());
    o.pt = cfg;
    ptsim::sim::run(o).unwrap();
}

fn decode(dir: &Path) -> Report {
    common::decode_to_memory(dir, &[])
}

#[test]
fn perf_and_ptdec_read_the_emulated_ptwrite_payloads_the_program_wrote() {
    let test = "perf_and_ptdec_read_the_emulated_ptwrite_payloads_the_program_wrote";
    let Some(progs) = programs(test) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    trace(&progs.join("emuptw"), &dir, ptsim::pt::Config::default());
    if let Some(perf) = pt_tests::perf(test) {
        let got: Vec<u64> = common::perf_ptwrites(&perf, &dir, tmp.path())
            .into_iter()
            .map(|p| p.1)
            .collect();
        assert_eq!(got, EMUPTW_PAYLOADS);
    }
    // ptdec reads the same payloads from the same bits, each an instant at
    // the function's entry marked emulated, and the call stacks stay exact.
    let r = decode(&dir);
    assert!(r.decode.errors.is_empty(), "{:?}", r.decode.errors);
    let bytes = &r.written[0].bytes;
    let ours: Vec<u64> = common::ptwrites(bytes).into_iter().map(|p| p.1).collect();
    assert_eq!(ours, EMUPTW_PAYLOADS);
    let dump = ftf::read::dump(bytes).unwrap();
    assert_eq!(
        dump.matches(r#""emulated": bool(true)"#).count(),
        6,
        "{dump}"
    );
    let calls = r.written[0]
        .slices
        .iter()
        .filter(|s| s.name == "perf_emulate_ptwrite")
        .count();
    assert_eq!(calls, 6);
    // 131 instructions per call, as the program ran them (jmp, mov, 64
    // shl/jc pairs, ret): the patched image changes no count.
    let lines: Vec<&str> = dump
        .lines()
        .filter(|l| l.contains(r#"name="perf_emulate_ptwrite" end="#))
        .collect();
    assert_eq!(lines.len(), 6, "{dump}");
    assert!(
        lines.iter().all(|l| l.contains(r#""insns": u32(131),"#)),
        "{lines:#?}"
    );
    common::perfetto_agrees_with_report(test, &r);
    if let Some(python) = pt_tests::python_with_fxt(test) {
        common::fxt_agrees(test, &python, bytes);
    }
}

/// `perf script --itrace=p` lines of CBR: the ratios, in order.
fn perf_cbrs(perf: &Path, dir: &Path, home: &Path) -> Vec<u64> {
    let out = Command::new(perf)
        .env("HOME", home)
        .args(["script", "--itrace=p", "-i"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let i = l.find("freq:")?;
            l[i + 5..].split_whitespace().next()?.parse().ok()
        })
        .collect()
}

#[test]
fn a_cbr_schedule_is_a_mhz_counter_in_ptdec_and_cbr_samples_in_perf() {
    let test = "a_cbr_schedule_is_a_mhz_counter_in_ptdec_and_cbr_samples_in_perf";
    let Some(progs) = programs(test) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let cfg = ptsim::pt::Config {
        cbr: Some("24,3000=8,6000=30".parse().unwrap()),
        ..ptsim::pt::Config::default()
    };
    trace(&progs.join("recursion"), &dir, cfg);
    let r = decode(&dir);
    let bytes = &r.written[0].bytes;
    let mut mhz = Vec::new();
    for rec in ftf::read::parse(bytes).unwrap() {
        if let ftf::read::RecordKind::Event(e) = rec.kind {
            if matches!(e.kind, ftf::read::EventKind::Counter { .. }) {
                assert_eq!(
                    (e.category.as_str(), e.name.as_str()),
                    ("power", "cpu frequency")
                );
                let Some(v) = e.args[0].value.as_u64() else {
                    panic!("MHz is an unsigned integer: {e:?}")
                };
                mhz.push(v);
            }
        }
    }
    // The start ratio (in every PSB+, written once), then each change.
    assert_eq!(mhz, [2400, 800, 3000]);
    assert_eq!(r.emit.cbr, 3);
    assert_eq!(r.written[0].counters, 3);
    common::perfetto_agrees_with_report(test, &r);
    if let Some(python) = pt_tests::python_with_fxt(test) {
        common::fxt_agrees(test, &python, bytes);
    }
    if let Some(perf) = pt_tests::perf(test) {
        let mut p = perf_cbrs(&perf, &dir, tmp.path());
        p.dedup();
        assert_eq!(p, [2400, 800, 3000]);
    }
}
