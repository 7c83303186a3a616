//! TSC -> perf time conversion checked live against `perf script` on the real
//! recordings in `../shared/realdata/`: for every PSB event perf synthesizes
//! (`--itrace=p`), the TSC packet of that PSB+ converted with the AUXTRACE_INFO
//! parameters must give the time perf printed, to the nanosecond.
//!
//! The same pairs are recorded as constants in `src/timeconv.rs`; this test
//! recomputes them from perf so that a different perf build is checked too.
//! Without perf it prints one skip line, unless `PT_REQUIRE_TOOLS=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use sideband::timeconv::TscConversion;

fn realdata(name: &str) -> PathBuf {
    pt_tests::realdata(name)
}

/// The workspace's policy for missing tools (see `tests/src/lib.rs`).
fn perf(test: &str) -> Option<PathBuf> {
    pt_tests::perf(test)
}

fn run(perf: &Path, args: &[&str]) -> String {
    let out = Command::new(perf).args(args).output().expect("run perf");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value after `label` on the first line that contains it.
fn field(dump: &str, label: &str) -> u64 {
    let line = dump
        .lines()
        .find(|l| l.contains(label))
        .unwrap_or_else(|| panic!("no {label} in perf -D"));
    line.rsplit(' ').next().unwrap().trim().parse().unwrap()
}

fn check_file(test: &str, name: &str) {
    let Some(perf) = perf(test) else { return };
    let file = realdata(name);
    let file = file.to_str().unwrap();
    let dump = run(&perf, &["script", "-D", "-i", file]);
    // AUXTRACE_INFO lines, e.g. "  Time Shift          31".
    let info_at = dump
        .find("PERF_RECORD_AUXTRACE_INFO")
        .expect("AUXTRACE_INFO in perf -D");
    let info = &dump[info_at..];
    let conv = TscConversion::new(
        field(info, "Time Shift"),
        field(info, "Time Muliplier"), // sic, perf's spelling
        field(info, "Time Zero"),
    )
    .unwrap();

    // The TSC packet inside each PSB+ (between "PSB" and "PSBEND").
    let mut psb_tscs = Vec::new();
    let mut in_psb = false;
    for l in dump.lines().map(str::trim_end) {
        if l.ends_with(" PSB") {
            in_psb = true;
        } else if l.ends_with(" PSBEND") {
            in_psb = false;
        } else if let (true, Some(tsc)) = (in_psb, l.split("TSC 0x").nth(1)) {
            psb_tscs.push(u64::from_str_radix(tsc.trim(), 16).unwrap());
        }
    }

    // "[003]   641.256845844:        psb:  psb offs: 0"
    let psb = run(
        &perf,
        &[
            "script",
            "-i",
            file,
            "--itrace=p",
            "-F",
            "cpu,time,event,synth",
            "--ns",
        ],
    );
    let mut times = Vec::new();
    for l in psb.lines().filter(|l| l.contains("psb:")) {
        let t = l
            .split(']')
            .nth(1)
            .unwrap()
            .trim()
            .split(':')
            .next()
            .unwrap();
        let (s, ns) = t.split_once('.').unwrap();
        times.push(s.parse::<u64>().unwrap() * 1_000_000_000 + ns.parse::<u64>().unwrap());
    }
    assert!(!times.is_empty(), "{name}: perf printed no PSB events");
    let converted: Vec<u64> = psb_tscs.iter().map(|&t| conv.tsc_to_perf_time(t)).collect();
    for t in &times {
        assert!(
            converted.contains(t),
            "{name}: perf's PSB time {t} is no converted PSB TSC: {converted:?}"
        );
    }
    eprintln!("{test}: {} PSB times of {name} match perf", times.len());
}

#[test]
fn skylake_psb_times_match_perf() {
    check_file("skylake_psb_times_match_perf", "perf.data.intel_pt-4.14");
}

#[test]
fn alderlake_psb_times_match_perf() {
    check_file(
        "alderlake_psb_times_match_perf",
        "tmon-alderlake-ptw.perf.data",
    );
}
