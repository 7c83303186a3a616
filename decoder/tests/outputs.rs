//! What ptdec does to the files around it: outputs are written whole or not
//! at all, never over an input, never "written" to a closed stdout; damaged
//! and unusual inputs are read with the same warnings on every path.

use std::ffi::OsString;
use std::io::Cursor;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sideband::file::PerfFile;
use sideband::record::Record;
use sideband::writer::FileWriter;

const EXE: &str = env!("CARGO_BIN_EXE_ptdec");

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

use pt_tests::names;

/// A trace dir `tmp/t` holding a copy of a real recording as `data`.
fn trace_dir(test: &str, tmp: &Path) -> Option<PathBuf> {
    let src = pt_tests::realdata_file(test, "perf.data.intel_pt-4.14")?;
    let dir = tmp.join("t");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(src, dir.join("data")).unwrap();
    Some(dir)
}

/// Runs `bash -c SCRIPT ptdec ARGS...` (`"$0" "$@"` runs ptdec).
fn via_bash(script: &str, args: &[&str]) -> Output {
    Command::new("bash")
        .arg("-c")
        .arg(script)
        .arg(EXE)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(dir) = trace_dir(module_path!(), tmp.path()) else {
        return;
    };
    let before = std::fs::read(dir.join("data")).unwrap();
    let link = tmp.path().join("out.ftf");
    std::os::unix::fs::symlink(dir.join("data"), &link).unwrap();
    for out in [dir.join("data"), link] {
        let o = Command::new(EXE)
            .arg(&dir)
            .arg("-o")
            .arg(&out)
            .arg("-q")
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("same file as the input"), "{err}");
        assert_eq!(std::fs::read(dir.join("data")).unwrap(), before);
    }
    assert_eq!(names(&dir), ["data"], "no temporary file is left");
}

#[test]
fn a_failed_write_leaves_no_partial_output_and_keeps_the_old_one() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(dir) = trace_dir(module_path!(), tmp.path()) else {
        return;
    };
    let out = tmp.path().join("out.ftf");
    std::fs::write(&out, b"the previous output").unwrap();
    // Files may grow to 1 KiB (EFBIG past it, as a full disk fails with
    // ENOSPC); the decoded FTF is larger.
    let o = via_bash(
        "trap '' XFSZ; ulimit -f 1; exec \"$0\" \"$@\"",
        &[dir.to_str().unwrap(), "-q", "-o", out.to_str().unwrap()],
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("File too large"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), b"the previous output");
    assert_eq!(
        names(tmp.path()),
        ["out.ftf", "t"],
        "no temporary file is left"
    );
    // Without the limit the same command writes it whole.
    let o = Command::new(EXE)
        .arg(&dir)
        .args(["-q", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(std::fs::metadata(&out).unwrap().len() > 1024);
    ftf::read::parse(&std::fs::read(&out).unwrap()).unwrap();
}

#[test]
fn a_closed_stdout_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(dir) = trace_dir(module_path!(), tmp.path()) else {
        return;
    };
    let d = dir.to_str().unwrap();
    for args in [vec![d, "-q", "-o", "-"], vec!["info", d]] {
        let o = via_bash("exec \"$0\" \"$@\" >&-", &args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("standard output is closed"), "{err}");
        assert!(!err.contains("wrote"), "{err}");
    }
    // /dev/null is a fine place to write to.
    let o = via_bash("exec \"$0\" \"$@\" >/dev/null", &[d, "-q", "-o", "-"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // A full disk under stdout is named, with what to do (it was a bare
    // "No space left on device").
    if Path::new("/dev/full").exists() {
        let o = via_bash("exec \"$0\" \"$@\" >/dev/full", &["info", d]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains("cannot write to standard output; free space"),
            "{err}"
        );
    }
}

/// A recording whose first AUXTRACE record says its trace data is 0
/// bytes long: the trace bytes after it are read as records until one is
/// damaged, and nothing is left to decode. An error naming the damage,
/// exit 1 and no output (it was exit 0 and an FTF of no slices, the
/// damage only a warning that said "the trace before it is decoded").
#[test]
fn records_damaged_before_any_trace_data_are_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(dir) = trace_dir(module_path!(), tmp.path()) else {
        return;
    };
    let data = dir.join("data");
    let mut bytes = std::fs::read(&data).unwrap();
    let aux = PerfFile::parse(&bytes)
        .unwrap()
        .raw_records()
        .find(|r| r.header.kind == sideband::record::kind::AUXTRACE)
        .map(|r| r.offset as usize)
        .unwrap();
    // The AUXTRACE record's `size` (of the trace data after it) follows
    // its 8-byte header.
    bytes[aux + 8..aux + 16].copy_from_slice(&0u64.to_le_bytes());
    std::fs::write(&data, &bytes).unwrap();
    let d = dir.to_str().unwrap();
    let out = tmp.path().join("out.ftf");
    for args in [vec![d, "-o", out.to_str().unwrap()], vec!["report", d]] {
        let o = Command::new(EXE).args(&args).output().unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("nothing decoded") && err.contains("damaged"),
            "{args:?}: {err}"
        );
        assert!(o.stdout.is_empty(), "{args:?}");
        assert!(!out.exists(), "{args:?}");
    }
}

/// Standard error full (`2>/dev/full`) or a pipe whose reader has gone:
/// the messages are lost, never a panic (std's `eprintln!` panicked,
/// exit 101, after a finished decode). A decode that wrote its FTF exits 0
/// with the FTF whole; one that failed exits 1 as it would have.
#[test]
fn a_full_or_gone_stderr_loses_the_messages_not_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(dir) = trace_dir(module_path!(), tmp.path()) else {
        return;
    };
    let d = dir.to_str().unwrap();
    let ftf = tmp.path().join("out.ftf");
    let f = ftf.to_str().unwrap();
    let missing = tmp.path().join("no-such-trace");
    let m = missing.to_str().unwrap();
    // (Not `2>&-`: Rust's runtime opens a closed fd 2 as /dev/null.)
    let mut redirects = Vec::new();
    if Path::new("/dev/full").exists() {
        redirects.push("exec \"$0\" \"$@\" 2>/dev/full");
    }
    // A reader that has gone: stderr a pipe into `true`, which exits at
    // once (where it has not yet, the pipe takes the messages: no failure
    // either way).
    // (Standard output stays the test's, through fd 3.)
    let gone = "{ \"$0\" \"$@\" 2>&1 1>&3 | (exec 0<&-; true); exit ${PIPESTATUS[0]}; } 3>&1";
    redirects.push(gone);
    for redirect in redirects {
        let _ = std::fs::remove_file(&ftf);
        let o = via_bash(redirect, &[d, "-o", f]);
        assert_eq!(o.status.code(), Some(0), "{redirect}: {o:?}");
        ftf::read::parse(&std::fs::read(&ftf).unwrap()).unwrap();
        let o = via_bash(redirect, &["report", d]);
        assert_eq!(o.status.code(), Some(0), "{redirect}: {o:?}");
        assert!(
            text(&o.stdout).contains("by self time"),
            "{redirect}: {o:?}"
        );
        let o = via_bash(redirect, &[m, "-o", f]);
        assert_eq!(o.status.code(), Some(1), "{redirect}: {o:?}");
    }
}

/// Every command names a failed write to standard output the same way
/// (`outfile::Stdout`; `ptdec dump` printed a bare "No space left on
/// device"), standard output open for reading only (`1<FILE`) says what
/// to do, and a reader that has gone (EPIPE) ends each quietly, as
/// ripgrep does.
#[test]
fn every_command_names_a_failed_write_to_stdout() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(dir) = trace_dir(module_path!(), tmp.path()) else {
        return;
    };
    let d = dir.to_str().unwrap();
    let ftf = tmp.path().join("out.ftf");
    let o = Command::new(EXE)
        .args([d, "-q", "-o"])
        .arg(&ftf)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let f = ftf.to_str().unwrap();
    let commands = [
        vec!["dump", f],
        vec!["info", d],
        vec!["report", d, "-q"],
        vec![d, "-q", "-o", "-"],
        vec![d, "-q", "--format", "parquet", "-o", "-"],
    ];
    for args in &commands {
        if Path::new("/dev/full").exists() {
            let o = via_bash("exec \"$0\" \"$@\" >/dev/full", args);
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
            assert!(
                err.contains("cannot write to standard output; free space on its disk"),
                "{args:?}: {err}"
            );
        }
        // Standard output open for reading only (`1<FILE`): said, with
        // what to do (EBADF's bare message before), and the file as it was.
        let ro = tmp.path().join("read-only-stdout");
        std::fs::write(&ro, b"kept").unwrap();
        let o = via_bash(&format!("exec \"$0\" \"$@\" 1<'{}'", ro.display()), args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("open for reading only") || err.contains("it is not open for writing"),
            "{args:?}: {err}"
        );
        assert!(
            err.contains("redirect it to a file (> FILE)"),
            "{args:?}: {err}"
        );
        assert_eq!(std::fs::read(&ro).unwrap(), b"kept");
        // A pipe whose reader is gone before ptdec starts: every write
        // fails with EPIPE.
        let o = via_bash(
            "exec 4> >(exec 0<&-); wait $!; exec \"$0\" \"$@\" >&4 4>&-",
            args,
        );
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        assert_eq!(err, "", "{args:?}");
    }
}

#[test]
fn an_unsearchable_dir_is_permission_denied() {
    let test = "an_unsearchable_dir_is_permission_denied";
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    if !root || !pt_tests::have_tool(test, "setpriv") {
        pt_tests::missing::<()>(test, "needs root and setpriv to run ptdec as another user");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let Some(dir) = trace_dir(test, tmp.path()) else {
        return;
    };
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            EXE,
            "info",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("Permission denied"), "{err}");
    assert!(!err.contains("without a `data` file"), "{err}");
}

#[test]
fn a_cut_pipe_file_warns_on_every_path() {
    let test = "a_cut_pipe_file_warns_on_every_path";
    let Some(src) = pt_tests::realdata_file(test, "perf.data.piped.intel_pt-4.14") else {
        return;
    };
    let bytes = std::fs::read(src).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let cut = tmp.path().join("cut.data");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let out = tmp.path().join("out.ftf");
    let decode = Command::new(EXE)
        .arg(&cut)
        .args(["-q", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(decode.status.success(), "{}", text(&decode.stderr));
    let info = Command::new(EXE).arg("info").arg(&cut).output().unwrap();
    assert!(info.status.success(), "{}", text(&info.stderr));
    let warning = "the file was cut: the data ends inside";
    assert!(
        text(&decode.stderr).contains(warning),
        "{}",
        text(&decode.stderr)
    );
    assert!(
        text(&info.stdout).contains(warning),
        "{}",
        text(&info.stdout)
    );
}

#[test]
fn a_file_cut_in_its_features_decodes_its_data() {
    let test = "a_file_cut_in_its_features_decodes_its_data";
    let Some(src) = pt_tests::realdata_file(test, "perf.data.intel_pt-4.14") else {
        return;
    };
    let bytes = std::fs::read(src).unwrap();
    let data_end = PerfFile::parse(&bytes).unwrap().data_range().end as usize;
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole.ftf");
    let o = Command::new(EXE)
        .arg(pt_tests::realdata("perf.data.intel_pt-4.14"))
        .args(["-q", "-o"])
        .arg(&whole)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let cut = tmp.path().join("cut.data");
    std::fs::write(&cut, &bytes[..data_end + (bytes.len() - data_end) / 2]).unwrap();
    let out = tmp.path().join("cut.ftf");
    let o = Command::new(EXE)
        .arg(&cut)
        .args(["-q", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("cut inside its feature sections"), "{err}");
    let count = |p: &Path| ftf::read::parse(&std::fs::read(p).unwrap()).unwrap().len();
    assert!(count(&out) > 3 && count(&whole) > 3);
}

#[test]
fn info_describes_a_sideband_only_trace() {
    let test = "info_describes_a_sideband_only_trace";
    let Some(src) = pt_tests::realdata_file(test, "perf.data.intel_pt-4.14") else {
        return;
    };
    // The real recording without its Intel PT (records and event): what
    // `ptrec --sideband-only` writes.
    let bytes = std::fs::read(src).unwrap();
    let f = PerfFile::parse(&bytes).unwrap();
    let mut attrs = sideband::attr::AttrSet::new();
    for e in f.attrs().entries() {
        // Only the kernel's fixed event types (software, ...), no PMU's.
        if e.attr.kind < 6 {
            attrs.push(e.attr, e.ids.clone());
        }
    }
    assert!(attrs.len() < f.attrs().len(), "the intel_pt event dropped");
    let sb_only = rewrite(&f, attrs, &|r| {
        !matches!(
            r,
            Record::Auxtrace(_)
                | Record::AuxtraceInfo(_)
                | Record::Aux { .. }
                | Record::ItraceStart { .. }
        )
    });
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("sb.data");
    std::fs::write(&path, sb_only).unwrap();
    let o = Command::new(EXE).arg("info").arg(&path).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s = text(&o.stdout);
    assert!(s.contains("sideband-only recording"), "{s}");
    assert!(s.contains("3174/3174 perf → echo"), "{s}");
    // Decoding it says why there is nothing to decode.
    let o = Command::new(EXE)
        .arg(&path)
        .arg("-o")
        .arg(tmp.path().join("x.ftf"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("ptdec info"),
        "{}",
        text(&o.stderr)
    );
}

/// `f` written again with the attrs `attrs` and the records `keep` keeps.
fn rewrite(
    f: &PerfFile,
    attrs: sideband::attr::AttrSet,
    keep: &dyn Fn(&Record) -> bool,
) -> Vec<u8> {
    let mut w = FileWriter::new(Cursor::new(Vec::new()), attrs).unwrap();
    for e in f.events() {
        let (_, ev) = e.unwrap();
        if keep(&ev.record) {
            w.write_event(&ev).unwrap();
        }
    }
    w.finish().unwrap().into_inner()
}

/// A recording with an intel_pt event whose AUXTRACE_INFO is gone (a
/// pipe-mode file cut on a record boundary, or the record removed) is no
/// sideband-only recording; one with AUXTRACE_INFO but no trace data
/// writes nothing and says so: both exit 1 without an output.
#[test]
fn a_recording_without_its_trace_is_an_error_not_sideband_only() {
    let test = "a_recording_without_its_trace_is_an_error_not_sideband_only";
    let Some(src) = pt_tests::realdata_file(test, "perf.data.intel_pt-4.14") else {
        return;
    };
    let bytes = std::fs::read(src).unwrap();
    let f = PerfFile::parse(&bytes).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x.ftf");
    // `keep` says which records stay; every attr stays.
    let write = |name: &str, keep: &dyn Fn(&Record) -> bool| {
        let path = tmp.path().join(name);
        std::fs::write(&path, rewrite(&f, f.attrs().clone(), keep)).unwrap();
        path
    };
    let decode = |path: &Path| {
        let o = Command::new(EXE)
            .arg(path)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        (o.status.code(), text(&o.stderr))
    };
    let no_info = write("no-info.data", &|r| {
        !matches!(
            r,
            Record::Auxtrace(_) | Record::AuxtraceInfo(_) | Record::Aux { .. }
        )
    });
    let (code, err) = decode(&no_info);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("records an event of PMU type") && !err.contains("sideband-only"),
        "{err}"
    );
    assert!(!out.exists());
    let no_data = write("no-data.data", &|r| {
        !matches!(r, Record::Auxtrace(_) | Record::Aux { .. })
    });
    let (code, err) = decode(&no_data);
    assert_eq!(code, Some(1), "{err}");
    // (Written without feature sections: "may have been cut" too.)
    assert!(
        err.contains("nothing decoded") && err.contains("no trace data"),
        "{err}"
    );
    assert!(!out.exists());

    // The real pipe-mode recording cut at each record boundary before its
    // first AUXTRACE (type 71): never "sideband-only"; before its first
    // HEADER_ATTR (64) no event, before its AUXTRACE_INFO (70) an intel_pt
    // event without it, after it "no trace data" (a pipe-mode file has no
    // sizes to tell a cut by).
    let Some(piped) = pt_tests::realdata_file(test, "perf.data.piped.intel_pt-4.14") else {
        return;
    };
    let piped = std::fs::read(piped).unwrap();
    // Pipe mode: a 16-byte header, then records of `size` at offset 6.
    let mut at = 16;
    let (mut cuts, mut attr, mut info) = (0, false, false);
    while at + 8 <= piped.len() {
        let kind = u32::from_le_bytes(piped[at..at + 4].try_into().unwrap());
        let size = u16::from_le_bytes(piped[at + 6..at + 8].try_into().unwrap()) as usize;
        if kind == 71 || size == 0 {
            break;
        }
        attr |= kind == 64;
        info |= kind == 70;
        let path = tmp.path().join("cut.data");
        std::fs::write(&path, &piped[..at + size]).unwrap();
        let (code, err) = decode(&path);
        let cut = at + size;
        assert_eq!(code, Some(1), "cut at {cut:#x}: {err}");
        assert!(!err.contains("sideband-only"), "cut at {cut:#x}: {err}");
        let want = match (attr, info) {
            (false, _) => "describes no event (no attr)",
            (true, false) => "records an event of PMU type",
            (true, true) => "has AUXTRACE_INFO but no trace data",
        };
        assert!(err.contains(want), "cut at {cut:#x}: {err}");
        assert!(!out.exists());
        cuts += 1;
        at += size;
    }
    assert!(info && cuts > 3, "{cuts} cuts before the first AUXTRACE");
}

/// The fixture programs (fixtures/programs), built once per test binary.
fn programs(test: &str) -> Option<PathBuf> {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-programs");
    pt_tests::fixture_programs(test, &out)
}

/// `ptsim` of the fixture `prog` (no arguments, empty environment, the
/// `--repeat` specs `repeat`) into the trace dir `dir`.
fn simulate(progs: &Path, prog: &str, repeat: &[String], dir: &Path) {
    let mut o = ptsim::sim::Options::new(progs.join(prog), Vec::new(), dir);
    o.env = Some(Vec::new());
    o.repeat = repeat.iter().map(|s| s.parse().unwrap()).collect();
    let r = ptsim::sim::run(o).unwrap_or_else(|e| panic!("ptsim {prog}: {e}"));
    assert!(
        matches!(r.outcome.exit, Some(ptsim::engine::Exit::Code(0))),
        "{prog}: {:?}",
        r.outcome.exit
    );
}

/// A trace of `interp` with its loop run `k` more times (about 4.6 KB of
/// PT each: `ptsim --repeat interp_run=K`, as scripts/bench makes its
/// traces), made once and kept in CARGO_TARGET_TMPDIR for later runs (its
/// bytes matter to no test here, only its size).
fn interp_trace(test: &str, k: u64) -> Option<PathBuf> {
    // Tests of this binary run on threads of one process: two asking for
    // the same trace at once would both make it in the same `.PID` folder.
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = root.join(format!("outputs-interp-repeat-{k}"));
    let progs = programs(test)?;
    // A trace made before the program was last built names another
    // build-id: its code would not be found, and nothing decoded.
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(t), Some(p)) = (modified(&dir.join("data")), modified(&progs.join("interp"))) {
        if t > p {
            return Some(dir);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    // Made aside and renamed: a test killed while ptsim runs leaves no
    // half trace to be taken for a whole one.
    let part = root.join(format!("outputs-interp-repeat-{k}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&part);
    simulate(&progs, "interp", &[format!("interp_run={k}")], &part);
    if std::fs::rename(&part, &dir).is_err() {
        // Another test process made it meanwhile.
        std::fs::remove_dir_all(&part).unwrap();
    }
    Some(dir)
}

/// Runs ptdec with `args`, and checks that it refused to write over
/// `input` (exit 1, the message) and left it as it was.
fn assert_refused(args: &[OsString], input: &Path, before: &[u8]) {
    let o = Command::new(EXE).args(args).output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
    assert!(err.contains("same file as the input"), "{args:?}: {err}");
    // Refused when the output was created, not after a whole decode.
    assert!(!err.contains("cannot write"), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        std::fs::read(input).unwrap(),
        before,
        "{args:?} changed {}",
        input.display()
    );
}

#[test]
fn no_file_the_decode_reads_is_written_by_any_name() {
    let test = "no_file_the_decode_reads_is_written_by_any_name";
    let Some(progs) = programs(test) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t");
    simulate(&progs, "vdso", &[], &trace);
    let vdso = std::fs::read_dir(trace.join("images"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".so"))
        .expect("ptsim wrote the vDSO image");
    let vdso_bytes = std::fs::read(&vdso).unwrap();
    let name = vdso.file_name().unwrap();
    // The program, found in a --sysroot (a copy of the recording machine).
    let sysroot = tmp.path().join("sysroot");
    let prog = progs.join("vdso");
    let in_sysroot = sysroot.join(prog.strip_prefix("/").unwrap());
    std::fs::create_dir_all(in_sysroot.parent().unwrap()).unwrap();
    std::fs::copy(&prog, &in_sysroot).unwrap();
    let prog_bytes = std::fs::read(&in_sysroot).unwrap();
    let hard = tmp.path().join("vdso-hard-link.ftf");
    std::fs::hard_link(&vdso, &hard).unwrap();
    let other_spelling = trace.join("images/../images").join(name);
    let decode = |out: &Path| -> Vec<OsString> {
        vec![
            trace.clone().into(),
            "--sysroot".into(),
            sysroot.clone().into(),
            "-q".into(),
            "-o".into(),
            out.into(),
        ]
    };
    // The vDSO image ptsim wrote into the trace (the issue's case), by its
    // own path, another spelling and a hard link; the binary read from the
    // --sysroot; the perf.data.
    for out in [&vdso, &other_spelling, &hard] {
        assert_refused(&decode(out), &vdso, &vdso_bytes);
    }
    assert_refused(&decode(&in_sysroot), &in_sysroot, &prog_bytes);
    let data = trace.join("data");
    let data_bytes = std::fs::read(&data).unwrap();
    assert_refused(&decode(&data), &data, &data_bytes);
    assert_eq!(names(&trace.join("images")), [name.to_string_lossy()]);
    assert_eq!(names(in_sysroot.parent().unwrap()), ["vdso"]);
    // A --vmlinux and a --kcore dir's files the decode never opens (no
    // kernel code in this trace) are inputs all the same, for FTF and a
    // Parquet file (they were overwritten).
    let vmlinux = tmp.path().join("vmlinux");
    std::fs::copy(&prog, &vmlinux).unwrap();
    let kcore = tmp.path().join("kcore_dir");
    std::fs::create_dir(&kcore).unwrap();
    std::fs::write(kcore.join("kcore"), b"kcore").unwrap();
    std::fs::write(kcore.join("kallsyms"), b"kallsyms").unwrap();
    let kernel = |out: &Path| -> Vec<OsString> {
        let mut a = decode(out);
        a.extend(["--vmlinux".into(), vmlinux.clone().into()]);
        a.extend(["--kcore".into(), kcore.clone().into()]);
        a
    };
    let linked = tmp.path().join("vmlinux.parquet");
    std::os::unix::fs::symlink(&vmlinux, &linked).unwrap();
    assert_refused(&kernel(&vmlinux), &vmlinux, &prog_bytes);
    assert_refused(&kernel(&linked), &vmlinux, &prog_bytes);
    let kcore_file = kcore.join("kcore");
    assert_refused(&kernel(&kcore_file), &kcore_file, b"kcore");
    // And it does decode with an output of its own, reading both.
    let out = tmp.path().join("out.ftf");
    let o = Command::new(EXE).args(decode(&out)).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!text(&o.stderr).contains("missing"), "{}", text(&o.stderr));
}

#[test]
fn raw_insn_list_is_never_an_input_nor_the_output() {
    let tmp = tempfile::tempdir().unwrap();
    let pt = tmp.path().join("trace.pt");
    let code = tmp.path().join("code.bin");
    // What the bytes decode to does not matter: the outputs are refused
    // before decoding.
    std::fs::write(&pt, [0x02, 0x82].repeat(8)).unwrap();
    std::fs::write(&code, [0x90, 0xc3]).unwrap();
    let out = tmp.path().join("out.ftf");
    let raw = |list: &Path| -> Vec<OsString> {
        vec![
            "raw".into(),
            "--pt".into(),
            pt.clone().into(),
            "--raw".into(),
            "code.bin:0x400000".into(),
            "-q".into(),
            "-o".into(),
            out.clone().into(),
            "--insn-list".into(),
            list.into(),
        ]
    };
    let run = |args: Vec<OsString>| {
        Command::new(EXE)
            .current_dir(tmp.path())
            .args(args)
            .output()
            .unwrap()
    };
    for (input, bytes) in [(&pt, [0x02, 0x82].repeat(8)), (&code, vec![0x90, 0xc3])] {
        let o = run(raw(input));
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("same file as the input"), "{err}");
        assert_eq!(std::fs::read(input).unwrap(), bytes);
    }
    let o = run(raw(Path::new("./out.ftf")));
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("are the same file"), "{err}");
    // Through a link to the output not there yet (it was not seen, and
    // the FTF lost), and both on standard output (the list was appended
    // to the FTF's bytes).
    std::os::unix::fs::symlink("out.ftf", tmp.path().join("to-out")).unwrap();
    let mut both = raw(Path::new("to-out"));
    let o = run(both.clone());
    assert!(
        text(&o.stderr).contains("are the same file"),
        "{}",
        text(&o.stderr)
    );
    both[7] = "-".into();
    both[9] = "-".into();
    let o = run(both);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("are the same file"),
        "{}",
        text(&o.stderr)
    );
    assert!(o.stdout.is_empty());
    // The list on standard output redirected to the FTF's file (the FTF
    // replaced it, and the list was lost).
    let mut to_file = raw(Path::new("-"));
    to_file[7] = "out.ftf".into();
    let o = Command::new(EXE)
        .current_dir(tmp.path())
        .args(to_file)
        .stdout(std::fs::File::create(&out).unwrap())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("are the same file"),
        "{}",
        text(&o.stderr)
    );
    std::fs::remove_file(&out).unwrap();
    std::fs::remove_file(tmp.path().join("to-out")).unwrap();
    assert_eq!(names(tmp.path()), ["code.bin", "trace.pt"]);
}

/// Runs `ptdec TRACE ARGS -o OUT` under a 4 GB address-space limit (as a
/// small machine or `ulimit -v` has) and checks that it neither aborts nor
/// panics; returns its exit code and stderr.
fn under_4gb(trace: &Path, args: &[&str], out: &Path) -> (Option<i32>, String) {
    let o = Command::new("prlimit")
        .arg("--as=4000000000")
        .arg(EXE)
        .arg(trace)
        .args(args)
        .args(["-q", "-o"])
        .arg(out)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    // An abort kills it with SIGABRT (exit status 134 in a shell).
    assert!(
        o.status.code().is_some_and(|c| c != 134),
        "{args:?}: {:?}: {err}",
        o.status
    );
    for bad in ["panicked", "memory allocation", "backtrace"] {
        assert!(!err.contains(bad), "{args:?}: {err}");
    }
    (o.status.code(), err)
}

/// Options whose memory is beyond the limits `--help` gives are refused
/// naming the limit, and -j 64 stays within them.
fn check_huge_options(test: &str, trace: &Path) {
    if !pt_tests::have_tool(test, "prlimit") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.ftf");
    for (args, limit) in [
        (&["--chunk-size", "1G"][..], "at most 8M"),
        (&["-j", "8", "--chunk-size", "64M"][..], "at most 8M"),
        (&["-j", "1000"][..], "at most 256"),
    ] {
        let (code, err) = under_4gb(trace, args, &out);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(limit), "{args:?}: {err}");
        assert!(names(tmp.path()).is_empty());
    }
    let (code, err) = under_4gb(trace, &["-j", "64"], &out);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(names(tmp.path()), ["out.ftf"]);
}

#[test]
fn huge_options_are_refused_naming_their_limit() {
    let test = "huge_options_are_refused_naming_their_limit";
    let Some(trace) = pt_tests::realdata_file(test, "perf.data.intel_pt-4.14") else {
        return;
    };
    check_huge_options(test, &trace);
}

/// The issue's case: `--chunk-size 1G`, `-j 64` and `-j 8 --chunk-size 64M`
/// aborted under a 4 GB limit on a 40 MB trace of call-dense code, as
/// their decoded calls outgrew it (ops of up to 130 chunks, or of one
/// chunk of the whole trace, in memory). Ignored: its decode takes
/// minutes in a debug build; `cargo test --release -p ptdec --test
/// outputs -- --ignored huge` runs it.
#[test]
#[ignore]
fn huge_options_on_a_40mb_trace_stay_under_4gb() {
    let test = "huge_options_on_a_40mb_trace_stay_under_4gb";
    let Some(trace) = interp_trace(test, 9000) else {
        return;
    };
    check_huge_options(test, &trace);
}

/// Whether this process ignores `sig`: its children then start with it
/// ignored.
fn ignored(sig: nix::sys::signal::Signal) -> bool {
    ptdec::cli::ignored_signals() & (1 << (sig as i32 - 1)) != 0
}

/// Sends `sig` to ptdec decoding a trace of a few MB once its output is
/// open (the decode then takes seconds more in a debug build): ptdec
/// says so and exits 128 + sig, and the output's folder stays empty.
/// Skipped where the tests run with `sig` ignored (under `nohup` or
/// `setsid`, or as a background job of a shell without job control):
/// ptdec inherits it so and, as its signal handling documents, keeps it
/// ignored, so the signal cannot interrupt it (one such run failed here).
fn interrupt_mid_write(test: &str, trace: &Path, sig: nix::sys::signal::Signal, name: &str) {
    if ignored(sig) {
        pt_tests::skipped(
            test,
            &format!(
                "{name} is ignored in this test's environment (nohup, setsid or a background \
                 job), and ptdec keeps an ignored signal ignored"
            ),
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.ftf");
    std::fs::write(&out, b"the previous output").unwrap();
    let child = Command::new(EXE)
        .arg(trace)
        .args(["-q", "-o"])
        .arg(&out)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    // Its file descriptors: the output being written is one in `tmp`
    // (named or not).
    let fds = format!("/proc/{}/fd", child.id());
    let writing = || {
        std::fs::read_dir(&fds).is_ok_and(|d| {
            d.flatten()
                .any(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.starts_with(tmp.path())))
        })
    };
    let started = std::time::Instant::now();
    while !writing() {
        assert!(
            started.elapsed().as_secs() < 120,
            "ptdec never opened its output"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Soon after: a release build decodes the trace in a few tenths of
    // a second (300 ms here was too late for it).
    std::thread::sleep(std::time::Duration::from_millis(50));
    nix::sys::signal::kill(pid, sig).unwrap();
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(128 + sig as i32),
        "{name}: {:?}: {err}",
        o.status
    );
    assert!(err.contains(&format!("interrupted by {name}")), "{err}");
    assert!(err.contains("out.ftf not written"), "{err}");
    assert_eq!(names(tmp.path()), ["out.ftf"], "no temporary is left");
    assert_eq!(std::fs::read(&out).unwrap(), b"the previous output");
}

#[test]
fn an_interrupted_decode_leaves_no_file_and_says_so() {
    let test = "an_interrupted_decode_leaves_no_file_and_says_so";
    // About 2 MB of PT.
    let Some(trace) = interp_trace(test, 450) else {
        return;
    };
    use nix::sys::signal::Signal;
    interrupt_mid_write(test, &trace, Signal::SIGINT, "SIGINT");
    interrupt_mid_write(test, &trace, Signal::SIGTERM, "SIGTERM");
    // Written to a pipe: what its reader got cannot be taken back, and
    // the message says it is incomplete (it said nothing of it).
    if ignored(Signal::SIGINT) {
        return;
    }
    use std::io::Read;
    let mut child = Command::new(EXE)
        .arg(&trace)
        .args(["-q", "-o", "-"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 1];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, Signal::SIGINT).unwrap();
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(128 + Signal::SIGINT as i32), "{err}");
    assert!(
        err.contains("what standard output got is incomplete"),
        "{err}"
    );
}

/// `ptdec TRACE -o - | head`: once the reader has closed the pipe, ptdec
/// stops decoding at its next chunk and exits quietly with status 0, as
/// ripgrep does. Issue 44: it went on decoding the whole trace (~7 s on
/// the issue's) after the pipe closed. Compared with the whole decode of
/// the same trace, for scale (about 2 MB of PT: seconds in a debug build).
#[test]
fn a_closed_pipe_stops_the_decode_promptly() {
    use std::io::Read;
    let test = "a_closed_pipe_stops_the_decode_promptly";
    let Some(trace) = interp_trace(test, 450) else {
        return;
    };
    let started = std::time::Instant::now();
    let o = Command::new(EXE)
        .arg(&trace)
        .args(["-q", "-o", "/dev/null"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let whole = started.elapsed();
    let mut child = Command::new(EXE)
        .arg(&trace)
        .args(["-q", "-o", "-"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1000];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let closed = std::time::Instant::now();
    let o = child.wait_with_output().unwrap();
    let after = closed.elapsed();
    assert!(o.status.success(), "{:?}: {}", o.status, text(&o.stderr));
    assert!(o.stderr.is_empty(), "{}", text(&o.stderr));
    // Half the whole decode: what stops at its next chunk takes a small
    // part of it, and what decodes on takes all of it. (A quarter failed
    // once on a machine busy with two builds beside the tests: 0.75 s of
    // 2.0 s.)
    assert!(
        after * 2 < whole,
        "ran {after:?} after the pipe closed; the whole decode takes {whole:?}"
    );

    // `ptdec raw -o -` of the same trace's Intel PT (the program's code
    // only): as quiet, and with status 0.
    let bytes = std::fs::read(trace.join("data")).unwrap();
    let mut pt = Vec::new();
    for e in PerfFile::parse(&bytes).unwrap().events() {
        if let Record::Auxtrace(a) = e.unwrap().1.record {
            pt.extend_from_slice(&a.data);
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let raw = tmp.path().join("trace.pt");
    std::fs::write(&raw, &pt).unwrap();
    let prog = programs(test).unwrap().join("interp");
    let mut child = Command::new(EXE)
        .args([
            "raw",
            "--time-axis",
            "instructions",
            "-q",
            "-o",
            "-",
            "--pt",
        ])
        .arg(&raw)
        .arg("--elf")
        .arg(&prog)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{:?}: {}", o.status, text(&o.stderr));
    assert!(o.stderr.is_empty(), "{}", text(&o.stderr));
}

/// The permission bits of a file.
fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Outputs are no more readable than their trace (issue 44: they were
/// created 0644 from a 0600 trace, and re-decoding over a 0600 file made
/// it 0644): a new FTF, `--split` file, `--folded` file and flame graph
/// get the trace's read and write bits (under a umask of 022 here, which
/// would have made them 0644), and a file replaced keeps its own mode,
/// less what the trace's has not.
#[test]
fn outputs_are_as_private_as_their_trace() {
    let test = "outputs_are_as_private_as_their_trace";
    let Some(interp) = interp_trace(test, 30) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let t = copy_trace(&interp, tmp.path());
    let data = t.join("data");
    let set = |p: &Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    };
    set(&data, 0o600);
    let ptdec = |args: &[&str]| {
        let mut all = vec![t.to_str().unwrap(), "-q"];
        all.extend_from_slice(args);
        let o = via_bash("umask 022; exec \"$0\" \"$@\"", &all);
        assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
    };
    let out = tmp.path().join("out.ftf");
    let o = out.to_str().unwrap();
    ptdec(&["-o", o]);
    assert_eq!(mode(&out), 0o600);
    // Decoded again over it: still 0600; over a file of another mode:
    // that mode, less what the trace's has not (a 0640 or 0666 file gave
    // the 0600 trace's output to its group or everyone).
    ptdec(&["-o", o]);
    assert_eq!(mode(&out), 0o600);
    for (was, is) in [(0o640, 0o600), (0o666, 0o600), (0o400, 0o400)] {
        set(&out, was);
        ptdec(&["-o", o]);
        assert_eq!(mode(&out), is, "over {was:o}");
    }
    let split = tmp.path().join("w.ftf.gz");
    ptdec(&["-o", split.to_str().unwrap(), "--split", "1ms"]);
    let windows: Vec<String> = names(tmp.path())
        .into_iter()
        .filter(|n| n.starts_with("w-"))
        .collect();
    assert!(!windows.is_empty());
    for w in &windows {
        assert_eq!(mode(&tmp.path().join(w)), 0o600, "{w}");
    }
    let (folded, svg) = (tmp.path().join("f.folded"), tmp.path().join("f.svg"));
    let o = via_bash(
        "umask 022; exec \"$0\" \"$@\" >/dev/null",
        &[
            "report",
            t.to_str().unwrap(),
            "-q",
            "--folded",
            folded.to_str().unwrap(),
            "--flamegraph",
            svg.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!((mode(&folded), mode(&svg)), (0o600, 0o600));
    // A trace others may read gives outputs they may read.
    set(&data, 0o644);
    let shared = tmp.path().join("shared.ftf");
    ptdec(&["-o", shared.to_str().unwrap()]);
    assert_eq!(mode(&shared), 0o644);
}

/// A ptsim trace cut anywhere past its first chunk, as a full disk or a
/// killed copy leaves it, decodes the PT it holds (issue 44, item 7): ptsim
/// writes its sideband before each chunk of PT, in perf's order, so the
/// MMAPs that name the code come before the PT that runs through it. (It
/// wrote all the sideband after the PT: a cut trace had no image, and
/// decoded nothing.) The summary says that the file was cut.
#[test]
fn a_cut_ptsim_trace_decodes_what_it_holds() {
    let test = "a_cut_ptsim_trace_decodes_what_it_holds";
    // About 2 MB of PT: two chunks of 1 MiB.
    let Some(trace) = interp_trace(test, 450) else {
        return;
    };
    let whole = std::fs::read(trace.join("data")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut got = Vec::new();
    for percent in [60, 80, 95] {
        let dir = tmp.path().join(format!("cut-{percent}"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("data"), &whole[..whole.len() * percent / 100]).unwrap();
        let o = Command::new(EXE)
            .arg(&dir)
            .args(["-o"])
            .arg(dir.join("out.ftf"))
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert!(o.status.success(), "cut at {percent} %: {err}");
        let insns: u64 = err
            .lines()
            .find_map(|l| l.trim().strip_prefix("instructions"))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|n| n.replace(',', "").parse().ok())
            .unwrap_or_else(|| panic!("no instruction count: {err}"));
        assert!(
            insns > 100_000,
            "cut at {percent} %: {insns} instructions: {err}"
        );
        assert!(err.contains("cut"), "cut at {percent} %: not said: {err}");
        got.push(insns);
    }
    // More of the file, more of the trace.
    assert!(got.windows(2).all(|w| w[0] <= w[1]), "{got:?}");

    // Cut before its first AUXTRACE record (type 71, 48 bytes: its header
    // is `47 00 00 00 00 00 30 00`): nothing to decode, which is an error
    // naming the cut, not an empty output and "nothing was traced".
    let header = [0x47, 0, 0, 0, 0, 0, 0x30, 0];
    let first = whole
        .windows(8)
        .position(|w| w == header)
        .expect("an AUXTRACE record");
    let dir = tmp.path().join("cut-before-trace");
    std::fs::create_dir(&dir).unwrap();
    let out = dir.join("out.ftf");
    // The cut file decoded: exit code and stderr.
    let decode_cut = |bytes: &[u8]| {
        std::fs::write(dir.join("data"), bytes).unwrap();
        let o = Command::new(EXE)
            .arg(&dir)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        (o.status.code(), text(&o.stderr))
    };
    let (code, err) = decode_cut(&whole[..first]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("cut before its first AUXTRACE record"),
        "{err}"
    );
    assert!(!err.contains("nothing was traced"), "{err}");
    assert!(!out.exists());

    // Cut a few bytes into that record's trace data (its 48-byte header,
    // then the PT): the cut, not "not Intel PT".
    for into in [1, 8, 15] {
        let (code, err) = decode_cut(&whole[..first + 48 + into]);
        assert_eq!(code, Some(1), "{into}: {err}");
        assert!(
            err.contains("before the cut hold no point a decoder can start at")
                && !err.contains("not Intel PT"),
            "{into}: {err}"
        );
        assert!(!out.exists());
    }

    // Cut anywhere in the data section before that record (inside
    // TIME_CONV, AUXTRACE_INFO or the sideband): said as a cut, never as a
    // sideband-only recording or as nothing traced.
    let data_off = u64::from_le_bytes(whole[40..48].try_into().unwrap()) as usize;
    assert!(data_off < first, "{data_off:#x} {first:#x}");
    let cuts: Vec<usize> = (0..40)
        .map(|k| data_off + k * (first - data_off) / 40)
        .chain(data_off + 1..data_off + 24)
        .collect();
    for cut in cuts {
        let (code, err) = decode_cut(&whole[..cut]);
        assert_eq!(code, Some(1), "cut at {cut:#x}: {err}");
        assert!(
            err.contains("cut")
                && !err.contains("sideband-only")
                && !err.contains("nothing was traced"),
            "cut at {cut:#x}: {err}"
        );
        assert!(!out.exists(), "cut at {cut:#x}");
    }
}

/// Runs `ptdec DIR -o DIR.ftf -q` on the trace dir `dir`; its status,
/// stderr and the output's size.
fn decode_dir(dir: &Path) -> (Option<i32>, String, u64) {
    let out = dir.with_extension("ftf");
    let o = Command::new(EXE)
        .arg(dir)
        .arg("-o")
        .arg(&out)
        .arg("-q")
        .output()
        .unwrap();
    let size = std::fs::metadata(&out).map_or(0, |m| m.len());
    (o.status.code(), text(&o.stderr), size)
}

/// A damaged record in a whole perf.data: the records before it decode,
/// with a warning naming it (the run failed and wrote nothing). A record
/// that does not parse is skipped; a header that frames nothing (size 0)
/// ends the records there.
#[test]
fn a_damaged_record_costs_only_what_it_held() {
    let test = "a_damaged_record_costs_only_what_it_held";
    let Some(src) = pt_tests::realdata_file(test, "perf.data.intel_pt-4.14") else {
        return;
    };
    let bytes = std::fs::read(src).unwrap();
    let f = PerfFile::parse(&bytes).unwrap();
    let records: Vec<(usize, u32, usize)> = f
        .raw_records()
        .map(|r| (r.offset as usize, r.header.kind, r.bytes.len()))
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let dir_with = |name: &str, data: &[u8]| {
        let dir = tmp.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("data"), data).unwrap();
        dir
    };
    let (code, err, whole) = decode_dir(&dir_with("whole", &bytes));
    assert_eq!(code, Some(0), "{err}");
    assert!(whole > 0);

    // A COMM whose kind now says MMAP2: too short for one, it does not
    // parse; the thread's name is lost, nothing else.
    let &(at, _, _) = records
        .iter()
        .find(|r| r.1 == sideband::record::kind::COMM)
        .expect("the recording has a COMM");
    let mut damaged = bytes.clone();
    damaged[at..at + 4].copy_from_slice(&sideband::record::kind::MMAP2.to_le_bytes());
    let (code, err, size) = decode_dir(&dir_with("kind", &damaged));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("1 damaged record skipped") && err.contains(&format!("{at:#x}")),
        "{err}"
    );
    assert!(size > 0);

    // The header of the record after the first AUXTRACE framing nothing:
    // that AUXTRACE's trace still decodes.
    let i = records
        .iter()
        .position(|r| r.1 == sideband::record::kind::AUXTRACE)
        .expect("the recording has trace data");
    let aux_end = records[i].0 + records[i].2;
    let Some(&(next, _, _)) = records.iter().find(|r| r.0 >= aux_end) else {
        println!("skipped the size-0 case: nothing follows the first AUXTRACE record");
        return;
    };
    let mut damaged = bytes.clone();
    damaged[next + 6..next + 8].copy_from_slice(&0u16.to_le_bytes());
    let (code, err, size) = decode_dir(&dir_with("size0", &damaged));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains(&format!("at offset {next:#x} is damaged")) && err.contains("size 0"),
        "{err}"
    );
    assert!(size > 0);
}

/// `-o -` on a terminal: refused, as gzip refuses, not binary bytes on
/// the screen (FTF and a Parquet file alike).
#[test]
fn binary_output_is_not_written_to_a_terminal() {
    let test = "binary_output_is_not_written_to_a_terminal";
    let tmp = tempfile::tempdir().unwrap();
    let Some(dir) = trace_dir(test, tmp.path()) else {
        return;
    };
    let d = dir.to_str().unwrap();
    for extra in ["", " --format parquet"] {
        // util-linux's script(1) runs the command on a pseudo-terminal.
        let cmd = format!("'{EXE}' '{d}' -q -o -{extra}");
        let o = match Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .output()
        {
            Ok(o) => o,
            Err(e) => {
                let _: Option<()> = pt_tests::missing(test, &format!("script(1): {e}"));
                return;
            }
        };
        let shown = text(&o.stdout);
        assert_eq!(o.status.code(), Some(1), "{shown}");
        assert!(shown.contains("standard output is a terminal"), "{shown}");
    }
}

/// An LLDB bundle whose trace.json anyone may read but whose per-core
/// traces and context switches are private: every output is private too
/// (they took trace.json's bits alone, 0644).
#[test]
fn outputs_are_as_private_as_every_trace_file() {
    let test = "outputs_are_as_private_as_every_trace_file";
    let src = pt_tests::realdata("lldb/intelpt-multi-core-trace");
    if !src.join("trace.json").exists() {
        let _: Option<()> = pt_tests::missing(test, &format!("{} is not there", src.display()));
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("mc");
    pt_tests::copy_tree(&src, &bundle);
    let set = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    fn files(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                files(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut all = Vec::new();
    files(&bundle, &mut all);
    for f in &all {
        set(
            f,
            if f.ends_with("trace.json") {
                0o644
            } else {
                0o600
            },
        );
    }
    let b = bundle.to_str().unwrap();
    let out = |name: &str| tmp.path().join(name);
    let (ftf, pq, folded) = (out("mc.ftf"), out("mc.parquet"), out("mc.folded"));
    for args in [
        vec![b, "-q", "-o", ftf.to_str().unwrap()],
        vec![b, "-q", "-o", pq.to_str().unwrap()],
        vec!["report", b, "-q", "--folded", folded.to_str().unwrap()],
    ] {
        let o = via_bash("umask 022; exec \"$0\" \"$@\" >/dev/null", &args);
        assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
    }
    for f in [&ftf, &pq, &folded] {
        let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", f.display());
    }
}

/// A copy of trace dir `from` as `into/t` (its `data` and `images/`, whose
/// build-ids find the code), made with the umask's modes.
fn copy_trace(from: &Path, into: &Path) -> PathBuf {
    let t = into.join("t");
    std::fs::create_dir(&t).unwrap();
    let copied = Command::new("cp")
        .args(["-r", "--no-preserve=mode"])
        .arg(from.join("data"))
        .arg(from.join("images"))
        .arg(&t)
        .status()
        .unwrap();
    assert!(copied.success());
    t
}

/// Sets words of the AUXTRACE_INFO record (type 70) of perf.data `data`:
/// `(i, v)` makes priv\[i\] (the i-th 8-byte word after its 16-byte
/// header) `v`.
fn patch_auxtrace_info(data: &mut [u8], words: &[(usize, u64)]) {
    let u64_at = |d: &[u8], o: usize| u64::from_le_bytes(d[o..o + 8].try_into().unwrap());
    let (start, size) = (u64_at(data, 40) as usize, u64_at(data, 48) as usize);
    let mut off = start;
    while off + 8 <= start + size {
        let kind = u32::from_le_bytes(data[off..off + 4].try_into().unwrap());
        let mut len = u16::from_le_bytes(data[off + 6..off + 8].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        if kind == 70 {
            for &(i, v) in words {
                let at = off + 16 + 8 * i;
                data[at..at + 8].copy_from_slice(&v.to_le_bytes());
            }
            return;
        }
        if kind == 71 {
            len += u64_at(data, off + 8) as usize;
        }
        off += len;
    }
    panic!("no AUXTRACE_INFO record");
}

/// A TSC conversion that puts the decoded times far from the sideband's
/// (a corrupt AUXTRACE_INFO: time_shift 0, time_mult 2^32-1, time_zero 0)
/// is said in the summary; the trace as recorded gives no such warning.
/// It decoded with exit 0 into a span of 584 years, without a word.
#[test]
fn a_corrupt_tsc_conversion_is_said() {
    let test = "a_corrupt_tsc_conversion_is_said";
    let Some(interp) = interp_trace(test, 30) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let t = copy_trace(&interp, tmp.path());
    let decode = || {
        let o = Command::new(EXE)
            .arg(&t)
            .arg("-o")
            .arg(tmp.path().join("o.ftf"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stderr)
    };
    let warning = "lie far outside the times of the trace's sideband records";
    let err = decode();
    assert!(!err.contains(warning), "{err}");
    let mut data = std::fs::read(t.join("data")).unwrap();
    patch_auxtrace_info(&mut data, &[(1, 0), (2, 0xffff_ffff), (3, 0)]);
    std::fs::write(t.join("data"), &data).unwrap();
    let err = decode();
    assert!(err.contains(warning), "{err}");
    assert!(err.contains("TSC conversion"), "{err}");
}
