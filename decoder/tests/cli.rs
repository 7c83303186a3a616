//! The `ptdec` binary: decoding the real recordings (no binaries: every
//! missing image is reported, nothing panics), `info`, `dump`, `--split`,
//! gzip output, clean failures for user mistakes and closed pipes, and
//! `ptdec check` / `--check` with Perfetto's importer: every file written
//! here is loaded into trace_processor_shell and must show what our reader
//! reads.

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

/// Loads `path` into Perfetto's importer (pt_tests' tool policy when it is
/// missing) and checks it against our reader: no import problem, every
/// event a row, threads and processes as the kernel objects name them,
/// each call slice at the depth its interval nests it.
fn perfetto_matches_our_reader(test: &str, path: &Path) {
    let bytes = read_ftf(path);
    let records = ftf::read::parse(&bytes).unwrap();
    let mut names = std::collections::HashMap::new();
    let mut slices = Vec::new();
    let mut events = 0;
    let mut threads = std::collections::BTreeSet::new();
    for r in records {
        match r.kind {
            ftf::read::RecordKind::KernelObject(k) if k.obj_type == 2 => {
                names.insert(k.koid, k.name);
            }
            // A counter value (CBR frequency) is not a slice in Perfetto.
            ftf::read::RecordKind::Event(e)
                if matches!(e.kind, ftf::read::EventKind::Counter { .. }) => {}
            ftf::read::RecordKind::Event(e) => {
                events += 1;
                threads.insert((e.thread.pid, e.thread.tid));
                if let ftf::read::EventKind::DurationComplete { end } = e.kind {
                    slices.push(pt_tests::ExpectedSlice {
                        tid: e.thread.tid,
                        category: e.category,
                        name: e.name,
                        ts: e.ts as i64,
                        end: end as i64,
                        depth: 0,
                    });
                }
            }
            _ => {}
        }
    }
    // Nest by intervals, per thread, parents first at equal starts.
    slices.sort_by_key(|s| (s.tid, s.ts, std::cmp::Reverse(s.end)));
    let mut open: Vec<(u64, i64, i64)> = Vec::new();
    for s in &mut slices {
        while open
            .last()
            .is_some_and(|&(t, a, b)| t != s.tid || !(a <= s.ts && s.end <= b))
        {
            open.pop();
        }
        s.depth = open.len() as i32;
        open.push((s.tid, s.ts, s.end));
    }
    let threads: Vec<_> = threads
        .into_iter()
        .map(|(pid, tid)| pt_tests::ExpectedThread {
            pid,
            tid,
            name: names.get(&tid).cloned().unwrap_or_default(),
        })
        .collect();
    pt_tests::perfetto_agrees(test, path, events, &threads, &slices);
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
        // An empty build-id cache: not the user's ~/.debug.
        let cache = tempfile::tempdir().unwrap();
        let out = ptdec()
            .arg(&input)
            .arg("-o")
            .arg(&out_path)
            .arg("--buildid-dir")
            .arg(cache.path())
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(out.status.success(), "{name}: {err}");
        assert!(err.contains("ptdec: wrote"), "{name}: {err}");
        assert!(err.contains("missing images"), "{name}: {err}");
        assert!(err.contains("--sysroot DIR"), "{name}: {err}");
        let records = ftf::read::parse(&read_ftf(&out_path)).unwrap();
        assert!(records.len() > 3, "{name}");
        perfetto_matches_our_reader(&format!("real_recordings {name}"), &out_path);
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
    // `-q` says one thing: that code went undecoded for want of its
    // binaries (the recording comes without them).
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "--quiet: {err}");
    assert!(
        err.starts_with("ptdec: warning: the code of ") && err.contains("was not decoded"),
        "--quiet: {err}"
    );
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

/// `--on-error` on trace decodes: `next-psb` makes the fast decoder's
/// output libipt's; libipt 2.1.2 refuses `resync`, saying what to do.
#[test]
fn on_error_selects_where_decoding_goes_on() {
    let Some(input) = pt_tests::realdata_file(module_path!(), "perf.data.intel_pt-4.14") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out_path = dir.path().join("out.ftf");
        let out = ptdec()
            .arg(&input)
            .args(args)
            .arg("-o")
            .arg(&out_path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        let resyncs = text(&out.stderr)
            .lines()
            .find(|l| l.trim_start().starts_with("resyncs"))
            .unwrap_or_default()
            .to_string();
        (read_ftf(&out_path), resyncs)
    };
    let (lib, lib_line) = run(&["--decoder", "libipt"]);
    let (psb, psb_line) = run(&["--on-error", "next-psb"]);
    let (resync, resync_line) = run(&[]);
    assert!(
        lib == psb,
        "--on-error next-psb: the fast decoder differs from libipt"
    );
    assert_eq!(lib_line, psb_line);
    assert!(
        psb_line.contains("0 at the error, 10 PSB syncs"),
        "{psb_line}"
    );
    assert!(
        resync_line.contains("12,041 at the error, 2 PSB syncs"),
        "{resync_line}"
    );
    assert!(resync != psb);
    // The report takes it too.
    let out = ptdec()
        .args(["report", "--on-error", "next-psb", "--format", "csv"])
        .arg(&input)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    if ipt::HAS_RESYNC {
        return;
    }
    for cmd in [
        &["--decoder", "libipt", "-o", "-"][..],
        &["report", "--decoder", "libipt"][..],
    ] {
        let out = ptdec()
            .args(cmd)
            .args(["--on-error", "resync"])
            .arg(&input)
            .output()
            .unwrap();
        let err = check_clean_failure(&out);
        assert!(
            err.contains("--on-error resync: libipt 2.1") && err.contains("--decoder fast"),
            "{err}"
        );
    }
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
        ftf::read::parse(&read_ftf(&dir.path().join(&f))).unwrap();
        perfetto_matches_our_reader("split_writes_one_file_per_window", &dir.path().join(f));
    }
    // More windows than the soft limit on open files allows (each file
    // stays open): the limit is raised to the hard one; a hard limit too
    // low is named with what to do.
    let limited = |limit: &str, out: &Path| {
        Command::new("bash")
            .arg("-c")
            .arg(format!("ulimit {limit} 48; exec \"$0\" \"$@\""))
            .arg(env!("CARGO_BIN_EXE_ptdec"))
            .arg(&input)
            .arg("-o")
            .arg(out)
            .args(["--split", "20us", "-q"])
            .output()
            .unwrap()
    };
    let many = tempfile::tempdir().unwrap();
    let o = limited("-Sn", &many.path().join("w.ftf"));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(std::fs::read_dir(many.path()).unwrap().count() > 48);
    let few = tempfile::tempdir().unwrap();
    let o = limited("-n", &few.path().join("w.ftf"));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("raise it (ulimit -n)"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(std::fs::read_dir(few.path()).unwrap().count(), 0);
    // Beside a device: refused (`-o /dev/null` made /dev/null-0, ...).
    let o = ptdec()
        .arg(&input)
        .args(["-o", "/dev/null", "--split", "500us", "-q"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("a device or FIFO"),
        "{}",
        text(&o.stderr)
    );
    assert!(!Path::new("/dev/null-0").exists());
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
    // A thread the trace does not have: refused, naming those it has.
    let path = dir.path().join("none.ftf");
    let out = ptdec()
        .arg(&input)
        .arg("-o")
        .arg(&path)
        .args(["--tid", "999999"])
        .output()
        .unwrap();
    let err = check_clean_failure(&out);
    assert!(
        err.contains("no thread of the trace matches --tid 999999")
            && err.contains("(pid/tid name)"),
        "{err}"
    );
    assert!(!path.exists());
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
fn info_names_config_terms_ptwrite_and_no_branch_tracing() {
    let Some(input) = pt_tests::realdata_file(module_path!(), "tmon-alderlake-ptw.perf.data")
    else {
        return;
    };
    let out = ptdec().arg("info").arg(&input).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    for want in [
        "config        0x300d401: pt=1,cyc=0,pwr_evt=0,fup_on_ptw=0,mtc=0,tsc=1,noretcomp=0,ptw=1,branch=0,",
        "no branch tracing (branch=0)",
        "PTWRITE payloads (ptw)",
        "filter        none",
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
        "--on-error",
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

/// An FTF of `depth` nested slices on one thread, written with ftf's writer.
fn nested_ftf(path: &Path, depth: u64) {
    let mut w = ftf::Writer::new(std::fs::File::create(path).unwrap(), 1_000_000_000).unwrap();
    w.process(7, "nest").unwrap();
    let t = w.thread(7, 7, "nest").unwrap();
    for d in (0..depth).rev() {
        w.duration_complete(t, "call", &format!("f{d}"), 10 + d, 10_000 - d, &[])
            .unwrap();
    }
    w.finish().unwrap();
}

/// `ptdec check` loads a file into Perfetto's importer: a good file is
/// reported with its slices and exit status 0; a file nesting 600 levels
/// (Perfetto keeps 512) exits 1 naming `slice_max_depth_exceeded` and the
/// 88 slices dropped; a missing trace_processor_shell or a file that is not
/// a trace fails cleanly, naming what to do.
#[test]
fn check_reports_perfettos_import_errors() {
    let test = "check_reports_perfettos_import_errors";
    let dir = tempfile::tempdir().unwrap();
    let (good, deep) = (dir.path().join("good.ftf"), dir.path().join("deep.ftf"));
    nested_ftf(&good, 512);
    nested_ftf(&deep, 600);

    let out = ptdec()
        .args(["check", "--trace-processor", "/nonexistent/tp"])
        .arg(&good)
        .output()
        .unwrap();
    let err = check_clean_failure(&out);
    assert!(
        err.contains("/nonexistent/tp") && err.contains("PT_TRACE_PROCESSOR"),
        "{err}"
    );
    let out = ptdec()
        .arg("check")
        .arg(&good)
        .env_remove("PT_TRACE_PROCESSOR")
        .env("PATH", dir.path())
        .output()
        .unwrap();
    let err = check_clean_failure(&out);
    assert!(
        err.contains("trace_processor_shell not found") && err.contains("--trace-processor"),
        "{err}"
    );

    // One that never finishes is stopped after --check-timeout (it was
    // waited for forever).
    let hang = dir.path().join("hang");
    std::fs::write(&hang, "#!/bin/sh\nexec sleep 600\n").unwrap();
    std::fs::set_permissions(&hang, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let t0 = std::time::Instant::now();
    let out = ptdec()
        .args(["check", "--check-timeout", "1", "--trace-processor"])
        .arg(&hang)
        .arg(&good)
        .output()
        .unwrap();
    let err = check_clean_failure(&out);
    assert!(
        err.contains("did not finish loading") && err.contains("--check-timeout"),
        "{err}"
    );
    // A hang guard, not a speed check: the trace processor sleeps 600 s,
    // so ptdec returning within 60 s shows it stopped it rather than
    // waiting for it.
    assert!(t0.elapsed().as_secs() < 60, "{:?}", t0.elapsed());
    // What it started is stopped with it: its process group is killed,
    // not the child alone (a `sleep` a wrapper script started ran on).
    let pidfile = dir.path().join("grandchild.pid");
    let wrapper = dir.path().join("wrapper");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nsleep 600 &\necho $! > {}\nwait\n",
            pidfile.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out = ptdec()
        .args(["check", "--check-timeout", "1", "--trace-processor"])
        .arg(&wrapper)
        .arg(&good)
        .output()
        .unwrap();
    let err = check_clean_failure(&out);
    assert!(err.contains("did not finish loading"), "{err}");
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    let stat = format!("/proc/{}/stat", pid.trim());
    // Gone, or a zombie not yet reaped by whoever adopted it: not running.
    let running = || {
        std::fs::read_to_string(&stat).is_ok_and(|s| {
            let state = s.rsplit_once(") ").map_or("", |(_, rest)| rest);
            !state.starts_with('Z') && !state.starts_with('X')
        })
    };
    let waited = std::time::Instant::now();
    while running() && waited.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let left = running();
    if left {
        let _ = Command::new("kill").arg(pid.trim()).status();
    }
    assert!(
        !left,
        "the wrapper's sleep (pid {}) survived ptdec",
        pid.trim()
    );
    // One that prints without end: its output is not held (it reached
    // 5 GB), and the answer is not what was asked for.
    let chatty = dir.path().join("chatty");
    std::fs::write(&chatty, "#!/bin/sh\nexec yes\n").unwrap();
    std::fs::set_permissions(&chatty, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = Command::new("prlimit")
        .arg("--as=2000000000")
        .arg(env!("CARGO_BIN_EXE_ptdec"))
        .args(["check", "--check-timeout", "3", "--trace-processor"])
        .arg(&chatty)
        .arg(&good)
        .output()
        .unwrap();
    let err = check_clean_failure(&out);
    assert!(err.contains("did not finish loading"), "{err}");

    let Some(tp) = pt_tests::trace_processor(test) else {
        return;
    };
    let check = |file: &Path| {
        ptdec()
            .arg("check")
            .arg(file)
            .arg("--trace-processor")
            .arg(&tp)
            .output()
            .unwrap()
    };
    let out = check(&good);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("Perfetto shows 512 slices on 1 thread ("),
        "{stdout}"
    );
    assert!(stdout.contains("no import errors or data loss"), "{stdout}");

    let out = check(&deep);
    let err = check_clean_failure(&out);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("Perfetto shows 512 slices"), "{stdout}");
    assert!(
        stdout.contains("error slice_max_depth_exceeded: 88"),
        "{stdout}"
    );
    assert!(err.contains("import errors or data loss in"), "{err}");

    let junk = dir.path().join("junk.ftf");
    std::fs::write(&junk, "not a trace\n").unwrap();
    let err = check_clean_failure(&check(&junk));
    assert!(
        err.contains("Perfetto cannot load") && err.contains("junk.ftf"),
        "{err}"
    );
}

/// `--check` after decoding: the summary is followed by Perfetto's report,
/// and the run succeeds when Perfetto shows every event written.
#[test]
fn check_after_decoding() {
    let test = "check_after_decoding";
    let Some(input) = pt_tests::realdata_file(test, "perf.data.intel_pt-4.14") else {
        return;
    };
    let Some(tp) = pt_tests::trace_processor(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out.ftf.gz");
    let out = ptdec()
        .arg(&input)
        .arg("-o")
        .arg(&out_path)
        .arg("--check")
        .env("PT_TRACE_PROCESSOR", &tp)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let report = err
        .lines()
        .find(|l| l.starts_with("ptdec check: "))
        .unwrap_or_else(|| panic!("{err}"));
    // "... Perfetto shows N slices on T threads (loaded in S s), of N written"
    let shown = report
        .split("shows ")
        .nth(1)
        .and_then(|r| r.split(' ').next());
    let written = report
        .rsplit("of ")
        .next()
        .and_then(|r| r.split(' ').next());
    assert_eq!(shown, written, "{report}");
    assert!(err.contains("no import errors or data loss"), "{err}");

    // Checking stdout cannot work: refused before decoding.
    let out = ptdec()
        .arg(&input)
        .args(["-o", "-", "--check"])
        .output()
        .unwrap();
    let err = check_clean_failure(&out);
    assert!(err.contains("--check reads the output back"), "{err}");
    assert!(out.stdout.is_empty());
}

/// Issue 44: `ptdec dump` streams. A gzip bomb (256 MiB of zeros in a
/// quarter-MiB file) is refused at its first record, without unpacking
/// it whole: "bad gzip data: out of memory" before.
#[test]
fn dump_streams_and_a_gzip_bomb_is_only_a_malformed_record() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let bomb = dir.path().join("bomb.ftf.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&bomb).unwrap(),
        flate2::Compression::best(),
    );
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..256 {
        gz.write_all(&zeros).unwrap();
    }
    gz.finish().unwrap();
    let out = ptdec().arg("dump").arg(&bomb).output().unwrap();
    let err = check_clean_failure(&out);
    assert!(
        err.contains("bomb.ftf.gz") && err.contains("size word is 0"),
        "{err}"
    );
}

/// A window that holds nothing is an error naming the trace's time range,
/// and nothing is written (an older output is kept); `--duration 0` is a
/// usage error. Issue 44: `--start` past the end and `--duration 0` wrote
/// an empty FTF and exited 0 without a word.
#[test]
fn an_empty_window_is_refused_naming_the_traces_time() {
    let Some(input) = pt_tests::realdata_file(module_path!(), "perf.data.intel_pt-4.14") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("o.ftf");
    std::fs::write(&o, b"an older output").unwrap();
    let run = |args: &[&str]| ptdec().arg(&input).arg("-q").args(args).output().unwrap();
    for report in [false, true] {
        let out = if report {
            ptdec()
                .args(["report", "-q", "--duration", "0"])
                .arg(&input)
                .output()
                .unwrap()
        } else {
            run(&["-o", o.to_str().unwrap(), "--duration", "0"])
        };
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("--duration") && err.contains("above 0"),
            "{err}"
        );
    }
    // The trace runs 2.242 ms from perf time 641255848111.
    let range = "from 0 ns to 2.242 ms (perf time @641255848111 to @641258090053)";
    let o_arg = o.to_str().unwrap();
    for args in [
        &["-o", o_arg, "--start", "100s"][..],
        &["-o", o_arg, "--start", "@1", "--duration", "1ms"],
        &["-o", o_arg, "--start", "100s", "--split", "1ms"],
        &["-o", "-", "--start", "100s"],
    ] {
        let out = run(args);
        let err = check_clean_failure(&out);
        assert!(
            err.contains("lies outside the trace") && err.contains(range),
            "{args:?}: {err}"
        );
        assert!(err.contains("nothing was written"), "{err}");
    }
    // Inside the trace, but nothing ran traced code then.
    let err = check_clean_failure(&run(&["-o", o_arg, "--start", "2ms", "--duration", "1ns"]));
    assert!(
        err.contains("nothing was traced in the window") && err.contains(range),
        "{err}"
    );
    let err = check_clean_failure(
        &ptdec()
            .args(["report", "-q", "--start", "100s"])
            .arg(&input)
            .output()
            .unwrap(),
    );
    assert!(err.contains("lies outside the trace"), "{err}");
    assert_eq!(std::fs::read(&o).unwrap(), b"an older output");
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["o.ftf"], "no split file or temporary is left");
}

/// `--split` again into the same `-o` with fewer windows: the windows of
/// the earlier run that this one did not write are removed once its own
/// are in place (and the summary says so), so the folder holds one run's
/// set; a file of such a name that ptdec did not write is kept, with a
/// warning. Issue 44: `out-5.ftf`...`out-8.ftf` stayed beside the new ones.
#[test]
fn splitting_again_removes_the_earlier_windows() {
    let Some(input) = pt_tests::realdata_file(module_path!(), "perf.data.intel_pt-4.14") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let windows = || -> Vec<u64> {
        let mut v: Vec<u64> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| {
                let n = e.unwrap().file_name().to_string_lossy().into_owned();
                n.strip_prefix("w-")?.strip_suffix(".ftf")?.parse().ok()
            })
            .collect();
        v.sort();
        v
    };
    let split = |d: &str| {
        ptdec()
            .arg(&input)
            .arg("-o")
            .arg(dir.path().join("w.ftf"))
            .args(["--split", d])
            .output()
            .unwrap()
    };
    let out = split("200us");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let before = windows();
    assert!(
        before.len() > 3 && before.iter().any(|&w| w > 2),
        "{before:?}"
    );
    let mine = dir.path().join("w-999.ftf");
    std::fs::write(&mine, b"my notes").unwrap();
    // The trace lasts 2.242 ms: windows 0 to 2 at most.
    let out = split("1ms");
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let after = windows();
    assert!(
        !after.is_empty() && after.iter().all(|&w| w <= 2 || w == 999),
        "{after:?}"
    );
    assert!(err.contains("ptdec: removed"), "{err}");
    assert!(
        err.contains("w-999.ftf is named as a --split window") && err.contains("left as it is"),
        "{err}"
    );
    assert_eq!(std::fs::read(&mine).unwrap(), b"my notes");
    for w in after.iter().filter(|&&w| w != 999) {
        ftf::read::parse(&read_ftf(&dir.path().join(format!("w-{w}.ftf")))).unwrap();
    }
}

/// A second `--split` run into an `-o` whose windows another run is
/// writing is refused, naming that run's pid, and touches none of its
/// files (two runs wrote and removed each other's windows: a mix of both
/// was left). The other run is this test holding the lock as ptdec does
/// (`flock` on `.w.ftf.ptdec-split.lock`). Once it is free, a run takes
/// it, and removes it when done.
#[test]
fn a_second_split_run_into_the_same_output_is_refused() {
    let Some(input) = pt_tests::realdata_file(module_path!(), "perf.data.intel_pt-4.14") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let lock_path = dir.path().join(".w.ftf.ptdec-split.lock");
    let mut held = std::fs::File::create(&lock_path).unwrap();
    std::io::Write::write_all(&mut held, b"4242\n").unwrap();
    let held = nix::fcntl::Flock::lock(held, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| e)
        .unwrap();
    let window = dir.path().join("w-0.ftf");
    std::fs::write(&window, b"the other run's window").unwrap();
    let split = || {
        ptdec()
            .arg(&input)
            .arg("-o")
            .arg(dir.path().join("w.ftf"))
            .args(["-q", "--split", "1ms"])
            .output()
            .unwrap()
    };
    let err = check_clean_failure(&split());
    assert!(
        err.contains("another ptdec (pid 4242) is writing the --split windows of")
            && err.contains("give -o another name"),
        "{err}"
    );
    assert_eq!(std::fs::read(&window).unwrap(), b"the other run's window");
    assert!(lock_path.exists());
    drop(held);
    let out = split();
    assert!(out.status.success(), "{}", text(&out.stderr));
    ftf::read::parse(&read_ftf(&window)).unwrap();
    assert!(!lock_path.exists(), "the lock is removed when the run ends");
}

/// Messages that name what is wrong (issue 44): a trace dir whose `data`
/// is a FIFO, a link to /dev/zero or a folder ("a directory without a
/// `data` file" before); an empty `--pt` ("range 0x0..0x0 outside the
/// file's 0x0 bytes"); a `--start` too large for a perf time ("not a
/// time"); a `--sysroot`, `--buildid-dir`, `--kcore` or `--vmlinux` that
/// does not exist or is not what the option takes (accepted silently).
#[test]
fn messages_name_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = d.join("o.ftf");
    let fifo = d.join("fifo.dir");
    std::fs::create_dir(&fifo).unwrap();
    let made = Command::new("mkfifo").arg(fifo.join("data")).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let zero = d.join("zero.dir");
    std::fs::create_dir(&zero).unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero.join("data")).unwrap();
    let folder = d.join("folder.dir");
    std::fs::create_dir_all(folder.join("data")).unwrap();
    for (trace, what) in [
        (&fifo, "data is a FIFO"),
        (&zero, "data is a character device (a link to /dev/zero)"),
        (&folder, "data is a directory"),
    ] {
        for info in [false, true] {
            let mut cmd = ptdec();
            if info {
                cmd.arg("info").arg(trace);
            } else {
                cmd.arg(trace).arg("-o").arg(&o);
            }
            let err = check_clean_failure(&cmd.output().unwrap());
            assert!(
                err.contains(what) && err.contains("not the perf.data file"),
                "{err}"
            );
        }
    }

    let empty = d.join("empty.pt");
    std::fs::write(&empty, b"").unwrap();
    std::fs::write(d.join("code.bin"), [0x90, 0xc3]).unwrap();
    let err = check_clean_failure(
        &ptdec()
            .current_dir(d)
            .args([
                "raw",
                "--pt",
                "empty.pt",
                "--raw",
                "code.bin:0x400000",
                "-o",
                "o.ftf",
            ])
            .output()
            .unwrap(),
    );
    assert!(err.contains("empty.pt: the file is empty"), "{err}");

    let Some(input) = pt_tests::realdata_file(module_path!(), "perf.data.intel_pt-4.14") else {
        return;
    };
    let run = |args: &[&str]| {
        ptdec()
            .arg(&input)
            .arg("-o")
            .arg(&o)
            .args(args)
            .output()
            .unwrap()
    };
    for start in ["18446744073s", "@18446744073709551616", "1e30"] {
        let err = check_clean_failure(&run(&["--start", start]));
        assert!(
            err.contains("--start") && err.contains("out of range"),
            "{err}"
        );
    }
    let missing = d.join("missing");
    let missing = missing.to_str().unwrap();
    let file = d.join("code.bin");
    let file = file.to_str().unwrap();
    for (opt, arg, want) in [
        ("--sysroot", missing, "no such directory"),
        ("--buildid-dir", missing, "no such directory"),
        ("--kcore", missing, "no such directory"),
        ("--sysroot", file, "that is a file, not a directory"),
        ("--vmlinux", missing, "no such file"),
        (
            "--vmlinux",
            d.to_str().unwrap(),
            "that is a directory, not a file",
        ),
    ] {
        for report in [false, true] {
            let out = if report {
                ptdec()
                    .arg("report")
                    .arg(&input)
                    .args([opt, arg])
                    .output()
                    .unwrap()
            } else {
                run(&[opt, arg])
            };
            let err = check_clean_failure(&out);
            assert!(
                err.contains(&format!("{opt} {arg}: {want}")),
                "{opt} {arg}: {err}"
            );
        }
    }
    assert!(!o.exists());
}

/// A FIFO as ptdec's TRACE (hostile probe): read as a pipe-mode
/// perf.data only while a program writes it, as perf reads one, never
/// waited on in `open` (ptdec waited silently for a writer); JSON coming
/// through one is named as such ("not perf.data" before); a bundle folder
/// whose `trace.json` is a FIFO is named so ("a directory without a `data`
/// file" before); a device is named what it is. Under `timeout`, so a
/// hang fails rather than waits.
#[test]
fn a_fifo_or_device_as_trace_is_named_not_waited_on() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mkfifo = |p: &Path| {
        let made = Command::new("mkfifo").arg(p).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    };
    let timed = |args: &[&std::ffi::OsStr]| {
        let mut c = Command::new("timeout");
        c.arg("20").arg(env!("CARGO_BIN_EXE_ptdec")).args(args);
        c.stdin(Stdio::null()).output().unwrap()
    };
    let fifo = d.join("fifo");
    mkfifo(&fifo);
    let o = d.join("o.ftf");
    let (f, o) = (fifo.as_os_str(), o.as_os_str());
    let (info, dump, dash_o) = ("info".as_ref(), "dump".as_ref(), "-o".as_ref());
    for args in [&[f, dash_o, o][..], &[info, f], &[dump, f]] {
        let err = check_clean_failure(&timed(args));
        assert!(
            err.contains("fifo")
                && err.contains("a FIFO or pipe that no program has open for writing"),
            "{args:?}: {err}"
        );
    }

    // JSON in a FIFO: held open for reading and writing here, so that
    // ptdec finds a writer and the JSON waiting.
    let mut held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    held.write_all(br#"{"type": "intel-pt"}"#).unwrap();
    let err = check_clean_failure(&timed(&[f, dash_o, o]));
    assert!(
        err.contains("what came through it is JSON, as an LLDB bundle's trace.json")
            && err.contains("give the bundle's folder"),
        "{err}"
    );
    drop(held);

    let bundle = d.join("bundle");
    std::fs::create_dir(&bundle).unwrap();
    mkfifo(&bundle.join("trace.json"));
    let err = check_clean_failure(&timed(&[bundle.as_os_str(), dash_o, o]));
    assert!(
        err.contains("trace.json: it is a FIFO (named pipe), not a regular file"),
        "{err}"
    );

    let err = check_clean_failure(&timed(&["/dev/zero".as_ref(), dash_o, o]));
    assert!(
        err.contains("/dev/zero is a character device, not a regular file"),
        "{err}"
    );

    // A pipe-mode perf.data through a pipe still decodes, as its file does.
    let test = "a_fifo_or_device_as_trace_is_named_not_waited_on";
    let Some(piped) = pt_tests::realdata_file(test, "perf.data.piped.intel_pt-4.14") else {
        return;
    };
    let mut child = Command::new("timeout")
        .arg("60")
        .arg(env!("CARGO_BIN_EXE_ptdec"))
        .args(["info", "/dev/stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let bytes = std::fs::read(&piped).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&bytes));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let from_file = ptdec().arg("info").arg(&piped).output().unwrap();
    let tail = |o: &[u8]| text(o).lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(tail(&out.stdout), tail(&from_file.stdout));
}

/// A file that cannot be mapped (here: bigger than the address space
/// `ulimit -v` leaves) is read up to a bound, then refused naming why it
/// could not be mapped, not as "a file that says it is empty".
#[test]
fn an_input_that_cannot_be_mapped_is_refused_naming_why() {
    if !pt_tests::have_tool(module_path!(), "prlimit") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let big = tmp.path().join("perf.data");
    let f = std::fs::File::create(&big).unwrap();
    // Sparse: 6 GB that take no disk.
    f.set_len(6 << 30).unwrap();
    let o = Command::new("prlimit")
        .arg("--as=3000000000")
        .arg(env!("CARGO_BIN_EXE_ptdec"))
        .arg("info")
        .arg(&big)
        .output()
        .unwrap();
    let err = check_clean_failure(&o);
    assert!(
        err.contains("cannot be mapped into memory")
            && err.contains("ulimit -v")
            && !err.contains("says it is empty"),
        "{err}"
    );
}
