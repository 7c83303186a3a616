//! The `ptdec` binary: decoding the real recordings (no binaries: every
//! missing image is reported, nothing panics), `info`, `dump`, `--split`,
//! gzip output, and clean failures for user mistakes and closed pipes.

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn ptdec() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ptdec"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn check_clean_failure(out: &Output) -> String {
    let err = text(&out.stderr);
    assert!(!out.status.success(), "should fail: {err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
    err
}

fn read_ftf(path: &Path) -> Vec<u8> {
    let raw = std::fs::read(path).unwrap();
    if path.extension().is_some_and(|e| e == "gz") {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&raw[..]), &mut v).unwrap();
        v
    } else {
        raw
    }
}

#[test]
fn real_recordings_decode_and_report_missing_images() {
    for name in [
        "perf.data.intel_pt-4.14",
        "perf.data.piped.intel_pt-4.14",
        "tmon-alderlake-ptw.perf.data",
    ] {
        let Some(input) = pt_tests::realdata_file(module_path!(), name) else {
            continue;
        };
        let dir = tempfile::tempdir().unwrap();
        let out_path = dir.path().join("out.ftf.gz");
        let out = ptdec()
            .arg(&input)
            .arg("-o")
            .arg(&out_path)
            .args(["--buildid-dir", "/nonexistent"])
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(out.status.success(), "{name}: {err}");
        assert!(err.contains("ptdec: wrote"), "{name}: {err}");
        assert!(err.contains("missing images"), "{name}: {err}");
        assert!(err.contains("--sysroot DIR"), "{name}: {err}");
        let records = ftf::read::parse(&read_ftf(&out_path)).unwrap();
        assert!(records.len() > 3, "{name}");
    }
}

#[test]
fn skylake_recording_shows_threads_gaps_and_renames() {
    let Some(input) = pt_tests::realdata_file(module_path!(), "perf.data.intel_pt-4.14") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out.ftf");
    let out = ptdec()
        .arg(&input)
        .arg("-o")
        .arg(&out_path)
        .arg("-q")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "--quiet: {}", text(&out.stderr));
    let dump = ftf::read::dump(&read_ftf(&out_path)).unwrap();
    assert!(
        dump.contains(r#"kernel_object thread koid=3174 name="perf""#),
        "{dump}"
    );
    assert!(dump.contains(r#"name="comm: echo""#), "{dump}");
    assert!(
        dump.contains(r#"cat="gap" name="[gap: no image]""#),
        "{dump}"
    );
}

#[test]
fn split_writes_one_file_per_window() {
    let Some(input) = pt_tests::realdata_file(module_path!(), "perf.data.intel_pt-4.14") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = ptdec()
        .arg(&input)
        .arg("-o")
        .arg(dir.path().join("w.ftf"))
        .args(["--split", "500us", "-q"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert!(files.len() >= 2, "{files:?}");
    assert!(
        files
            .iter()
            .all(|f| f.starts_with("w-") && f.ends_with(".ftf")),
        "{files:?}"
    );
    for f in files {
        ftf::read::parse(&read_ftf(&dir.path().join(f))).unwrap();
    }
}

#[test]
fn start_and_duration_narrow_the_output() {
    let Some(input) = pt_tests::realdata_file(module_path!(), "perf.data.intel_pt-4.14") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let count = |extra: &[&str]| {
        let path = dir.path().join("o.ftf");
        let out = ptdec()
            .arg(&input)
            .arg("-o")
            .arg(&path)
            .arg("-q")
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{extra:?}: {}", text(&out.stderr));
        let dump = ftf::read::dump(&read_ftf(&path)).unwrap();
        dump.lines()
            .filter(|l| l.contains("duration_complete"))
            .count()
    };
    let all = count(&[]);
    let part = count(&["--start", "1.3ms", "--duration", "300us"]);
    assert!(part < all && all > 0, "{part} of {all}");
    assert_eq!(count(&["--tid", "999999"]), 0);
}

#[test]
fn info_describes_the_trace() {
    let Some(input) = pt_tests::realdata_file(module_path!(), "perf.data.intel_pt-4.14") else {
        return;
    };
    let out = ptdec().arg("info").arg(&input).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    for want in [
        "GenuineIntel family 6 model 78",
        "per-cpu buffers",
        "3174/3174 perf → echo",
        "missing  /usr/bin/coreutils",
        "aux data",
        "losses",
    ] {
        assert!(s.contains(want), "{want:?} not in\n{s}");
    }
}

#[test]
fn user_mistakes_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.dir");
    let err = check_clean_failure(
        &ptdec()
            .arg(&missing)
            .arg("-o")
            .arg(dir.path().join("o.ftf"))
            .output()
            .unwrap(),
    );
    assert!(err.contains("nope.dir"), "{err}");

    let not_perf = dir.path().join("junk.data");
    std::fs::write(&not_perf, b"hello").unwrap();
    let err = check_clean_failure(
        &ptdec()
            .arg(&not_perf)
            .arg("-o")
            .arg(dir.path().join("o.ftf"))
            .output()
            .unwrap(),
    );
    assert!(err.contains("junk.data"), "{err}");

    let err = check_clean_failure(&ptdec().arg("dump").arg(&not_perf).output().unwrap());
    assert!(err.contains("junk.data") && err.contains("FTF"), "{err}");

    if let Some(input) = pt_tests::realdata_file(module_path!(), "perf.data.intel_pt-4.14") {
        let o = dir.path().join("o.ftf");
        let err = check_clean_failure(
            &ptdec()
                .arg(&input)
                .arg("-o")
                .arg(&o)
                .args(["--start", "soon"])
                .output()
                .unwrap(),
        );
        assert!(err.contains("--start") && err.contains("250ms"), "{err}");
        let err = check_clean_failure(
            &ptdec()
                .arg(&input)
                .arg("-o")
                .arg(&o)
                .args(["--split", "@5"])
                .output()
                .unwrap(),
        );
        assert!(err.contains("--split"), "{err}");
        let err = check_clean_failure(
            &ptdec()
                .arg(&input)
                .args(["--time-axis", "cycles"])
                .arg("-o")
                .arg(&o)
                .output()
                .unwrap(),
        );
        assert!(err.contains("CYC"), "{err}");
        let unwritable = dir.path().join("no/such/dir/o.ftf");
        let err = check_clean_failure(
            &ptdec()
                .arg(&input)
                .arg("-o")
                .arg(&unwritable)
                .output()
                .unwrap(),
        );
        assert!(err.contains("no/such/dir/o.ftf"), "{err}");
    }

    // Usage errors are clap's (exit 2) and name the missing argument.
    let out = ptdec().arg("x").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--output"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn help_has_an_example_for_every_option() {
    let out = ptdec().arg("--help").output().unwrap();
    let s = text(&out.stdout);
    let s = s.split("Options:").nth(1).expect("an Options section");
    for opt in [
        "--output",
        "--sysroot",
        "--buildid-dir",
        "--kcore",
        "--vmlinux",
        "--time-axis",
        "--start",
        "--duration",
        "--tid",
        "--pid",
        "--split",
        "--quiet",
        "--jobs",
    ] {
        let block = s
            .split_once(&format!("{opt} "))
            .map(|x| x.1)
            .unwrap_or_else(|| panic!("{opt} missing from --help"));
        let block = block.split("\n  -").next().unwrap();
        assert!(
            block.contains("Example") || opt == "--quiet",
            "{opt} has no example:\n{block}"
        );
    }
}

#[test]
fn a_closed_pipe_exits_quietly() {
    // An FTF file large enough that its dump overflows a pipe buffer.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.ftf");
    let mut w = ftf::Writer::new(Vec::new(), 1_000_000_000).unwrap();
    let th = w.thread(1, 1, "t").unwrap();
    for i in 0..20_000u64 {
        w.duration_complete(th, "call", "f", i, i + 1, &[]).unwrap();
    }
    std::fs::write(&path, w.finish().unwrap()).unwrap();
    let mut child = ptdec()
        .arg("dump")
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
}
