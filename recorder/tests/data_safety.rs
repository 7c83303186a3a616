//! What ptrec leaves on disk when things go wrong: a killed recorder, a
//! failed start, `--force` over something that is not a trace, `--archive`
//! copies of files others may not read, and ownership under sudo.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sideband::file::PerfFile;
use sideband::record::Record;

const EXE: &str = env!("CARGO_BIN_EXE_ptrec");

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Starts `ptrec --sideband-only -o dir -- sh -c SCRIPT` with `env`, waits
/// until `dir/data` has sideband records in it, and kills ptrec with SIGKILL.
fn record_and_kill(dir: &Path, script: &str, env: &[(&str, &str)]) {
    let mut child = Command::new(EXE)
        .args(["--sideband-only", "-q", "-o"])
        .arg(dir)
        .args(["--", "sh", "-c", script])
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    // The command's exec and mappings are drained within a round or two.
    loop {
        let len = std::fs::metadata(dir.join("data")).map_or(0, |m| m.len());
        if len > 2000 && start.elapsed() > Duration::from_millis(1500) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "ptrec wrote no sideband in 20 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(9),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_killed_recorder_leaves_a_readable_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    record_and_kill(&dir, "ls / >/dev/null; exec sleep 10", &[]);
    // No reserve file or anything else half-made beside the trace.
    assert_eq!(names(&dir), ["data", "images"]);
    assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    let bytes = std::fs::read(dir.join("data")).unwrap();
    let f = PerfFile::parse(&bytes).expect("a killed ptrec's perf.data parses");
    assert!(
        f.warnings().iter().any(|w| w.contains("cut")),
        "the reader says the recording was cut: {:?}",
        f.warnings()
    );
    let comms: Vec<String> = f
        .events()
        .filter_map(|e| match e.unwrap().1.record {
            Record::Comm { comm, .. } => Some(comm.to_string()),
            _ => None,
        })
        .collect();
    assert!(comms.iter().any(|c| c == "ls"), "{comms:?}");
    // perf reads it up to the last synced round: the command's exec is there.
    let Some(perf) = pt_tests::perf("a_killed_recorder_leaves_a_readable_trace") else {
        return;
    };
    let o = Command::new(perf)
        .args(["script", "--show-task-events", "-i"])
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "perf script: {}", stderr(&o));
    assert!(text.contains("PERF_RECORD_COMM exec: ls:"), "{text}");
}

#[test]
fn under_sudo_a_killed_recording_belongs_to_the_user() {
    if !ptrec::outdir::running_as_root() {
        pt_tests::missing::<()>(
            "under_sudo_a_killed_recording_belongs_to_the_user",
            "needs root (it plays sudo with SUDO_UID/SUDO_GID)",
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("new/t");
    record_and_kill(
        &dir,
        "ls / >/dev/null; exec sleep 10",
        &[("SUDO_UID", "65534"), ("SUDO_GID", "65533")],
    );
    let mut left = vec![tmp.path().join("new"), dir.clone()];
    for n in names(&dir) {
        left.push(dir.join(n));
    }
    for e in std::fs::read_dir(dir.join("images")).unwrap() {
        left.push(e.unwrap().path());
    }
    for p in left {
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert_eq!((m.uid(), m.gid()), (65534, 65533), "{}", p.display());
    }
}

#[test]
fn force_replaces_only_a_trace_and_a_failed_start_keeps_it() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(EXE)
            .current_dir(tmp.path())
            .args(["--sideband-only", "-q"])
            .args(args)
            .output()
            .unwrap()
    };
    // A directory holding a `data` but something else too is not a trace.
    let notes = tmp.path().join("notes");
    std::fs::create_dir(&notes).unwrap();
    std::fs::write(notes.join("data"), b"PERFILE2").unwrap();
    std::fs::write(notes.join("thesis.tex"), b"x").unwrap();
    let o = run(&["-f", "-o", "notes", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("thesis.tex") && stderr(&o).contains("not look like a trace"),
        "{}",
        stderr(&o)
    );
    assert!(notes.join("thesis.tex").exists());
    // Nor is `.`, whatever it holds.
    let o = run(&["-f", "-o", ".", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("current directory"), "{}", stderr(&o));
    // A trace is replaced, but only by a recording that started.
    let o = run(&["-o", "t", "--", "true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let old = std::fs::read(tmp.path().join("t/data")).unwrap();
    let script = tmp.path().join("not-executable");
    std::fs::write(&script, b"#!/bin/sh\n").unwrap();
    for cmd in ["/nonexistent/prog", script.to_str().unwrap()] {
        let o = run(&["-f", "-o", "t", "--", cmd]);
        assert!(!o.status.success(), "{cmd}");
        assert_eq!(
            std::fs::read(tmp.path().join("t/data")).unwrap(),
            old,
            "{cmd}"
        );
        // A failed start into a new directory leaves none.
        let o = run(&["-o", "fresh", "--", cmd]);
        assert!(!o.status.success(), "{cmd}");
        assert!(!tmp.path().join("fresh").exists(), "{cmd}: {}", stderr(&o));
    }
    let o = run(&["-f", "-o", "t", "--", "true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_ne!(std::fs::read(tmp.path().join("t/data")).unwrap(), old);
    assert_eq!(
        names(tmp.path()),
        ["not-executable", "notes", "t"],
        "no staging dir is left"
    );
}

#[test]
fn a_failed_start_leaves_no_process_behind() {
    // The command is held (forked, waiting for its exec) while the events
    // are opened; opening one on a CPU that does not exist fails.
    let tmp = tempfile::tempdir().unwrap();
    let marker = format!("pt-failed-start-{}", std::process::id());
    // Not through pipes: a held child left behind would keep them open and
    // the wait for their end would never return.
    let err_path = tmp.path().join("stderr");
    let status = Command::new(EXE)
        .args(["--sideband-only", "-q", "-C", "1023", "-o"])
        .arg(tmp.path().join("t"))
        .args(["--", "true", &marker])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .status()
        .unwrap();
    let err = std::fs::read_to_string(&err_path).unwrap();
    assert!(!status.success(), "{err}");
    assert!(err.contains("cpu 1023"), "{err}");
    assert!(!tmp.path().join("t").exists());
    let held = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| {
                let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
                String::from_utf8_lossy(&cmd)
                    .contains(&marker)
                    .then_some(pid)
            })
            .collect::<Vec<_>>()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !held().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = held();
    for pid in &left {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    assert!(
        left.is_empty(),
        "the held command is still waiting: {left:?}"
    );
}

#[test]
fn archive_copies_are_never_more_readable_than_their_source() {
    let tmp = tempfile::tempdir().unwrap();
    // An owner-only executable (a copy of true).
    let prog = tmp.path().join("secret-true");
    std::fs::copy(std::fs::canonicalize("/bin/true").unwrap(), &prog).unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o700)).unwrap();
    let dir = tmp.path().join("t");
    let o = Command::new(EXE)
        .args(["--sideband-only", "-q", "--archive", "-o"])
        .arg(&dir)
        .arg("--")
        .arg(&prog)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let copy = dir.join("sysroot").join(prog.strip_prefix("/").unwrap());
    let mode = std::fs::metadata(&copy).unwrap().mode() & 0o777;
    assert_eq!(mode & !0o700, 0, "copy of a 0700 file has mode {mode:o}");
    // A world-readable library stays at most what it was.
    let sysroot = dir.join("sysroot");
    let mut checked = 0;
    for entry in walk(&sysroot) {
        let rel = entry.strip_prefix(&sysroot).unwrap();
        let src = Path::new("/").join(rel);
        if let Ok(m) = std::fs::metadata(&src) {
            let (c, s) = (
                std::fs::metadata(&entry).unwrap().mode() & 0o777,
                m.mode() & 0o777,
            );
            assert_eq!(c & !s, 0, "{}: copy {c:o}, source {s:o}", rel.display());
            checked += 1;
        }
    }
    assert!(checked > 1, "libc and the loader were archived too");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
