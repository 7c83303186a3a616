//! The `ptrec` binary on this machine: clear errors without the PMU, the
//! sideband path for real (checked by perf), captures, and a real Intel PT
//! recording where the PMU exists.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const EXE: &str = env!("CARGO_BIN_EXE_ptrec");

fn ptrec(args: &[&str]) -> Output {
    Command::new(EXE).args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn sysfs(cpu: &str) -> String {
    format!("{}/tests/sysfs/{cpu}", env!("CARGO_MANIFEST_DIR"))
}

fn have_pt() -> bool {
    Path::new("/sys/bus/event_source/devices/intel_pt").exists()
}

#[test]
fn pid_1_without_the_pmu() {
    if have_pt() {
        pt_tests::skipped("pid_1_without_the_pmu", "this machine has an intel_pt PMU");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    let o = ptrec(&["-p", "1", "-o", out.to_str().unwrap()]);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("no intel_pt PMU") && err.contains("ptsim"),
        "{err}"
    );
    assert!(err.contains("virtual machines usually lack it"), "{err}");
    assert!(!out.exists(), "no output dir is left behind");
}

#[test]
fn fake_tree_without_pt() {
    let o = ptrec(&["--sysfs-root", &sysfs("no-pt"), "-p", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("ptsim"), "{}", stderr(&o));
}

#[test]
fn config_errors_from_the_binary() {
    let sk = sysfs("skylake");
    let o = ptrec(&["--sysfs-root", &sk, "-e", "cyc,bogus", "-p", "1"]);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("unknown intel_pt config term \"bogus\""),
        "{err}"
    );
    let o = ptrec(&["--sysfs-root", &sk, "-e", "mtc_period=5", "-p", "1"]);
    assert!(
        stderr(&o).contains("Valid values are: 0,3,6,9"),
        "{}",
        stderr(&o)
    );
    let o = ptrec(&["--sysfs-root", &sk, "-e", "ptw", "-p", "1"]);
    assert!(stderr(&o).contains("caps/ptwrite is 0"), "{}", stderr(&o));
}

#[test]
fn bad_pid_existing_dir_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    let o = ptrec(&[
        "--sideband-only",
        "-p",
        "2147483646",
        "-o",
        out.to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(err.contains("no such process: pid 2147483646"), "{err}");
    assert!(!out.exists());

    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("data"), b"old").unwrap();
    let o = ptrec(&["--sideband-only", "-o", out.to_str().unwrap(), "--", "true"]);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("already exists") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read(out.join("data")).unwrap(), b"old");

    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&out, &link).unwrap();
    let o = ptrec(&[
        "--sideband-only",
        "-f",
        "-o",
        link.to_str().unwrap(),
        "--",
        "true",
    ]);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read(out.join("data")).unwrap(), b"old");
}

#[test]
fn usage_errors() {
    let o = ptrec(&[]);
    assert!(stderr(&o).contains("nothing to record"), "{}", stderr(&o));
    let o = ptrec(&["-m", "100,64", "--sideband-only", "--", "true"]);
    assert!(stderr(&o).contains("power of two"), "{}", stderr(&o));
    // A control "FIFO" that is not one: /dev/zero was read without end.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    let o = ptrec(&[
        "--sideband-only",
        "--control",
        "fifo:/dev/zero",
        "-o",
        out.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("is not a FIFO"), "{}", stderr(&o));
    assert!(!out.exists());
    // Past Duration's range: a message, not a panic.
    for d in ["1e20", "18446744073709551616"] {
        let o = ptrec(&["--sideband-only", "--duration", d, "--", "true"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("at most 31536000 seconds"),
            "{}",
            stderr(&o)
        );
    }
    let o = ptrec(&[
        "--sideband-only",
        "-o",
        "/nonexistent-dir/x",
        "--",
        "no-such-prog-xyz",
    ]);
    assert!(!o.status.success());
    let help = String::from_utf8_lossy(&ptrec(&["--help"]).stdout).into_owned();
    for opt in [
        "--pid",
        "--all-cpus",
        "--per-thread",
        "--output",
        "--force",
        "--event",
        "--kernel",
        "--mmap-pages",
        "--snapshot",
        "--max-snapshots",
        "--duration",
        "--control",
        "--trigger",
        "--archive",
        "--sysfs-root",
        "--sideband-only",
        "perf_event_paranoid",
        "CAP_PERFMON",
    ] {
        assert!(help.contains(opt), "--help lacks {opt}");
    }
}

/// What perf shows of the sideband.
const TASK_EVENTS: &[&str] = &["--show-task-events", "--show-mmap-events"];

/// `perf script ARGS -i DIR`'s stdout (asserting success); `None` without perf.
fn perf_script(test: &str, args: &[&str], dir: &Path) -> Option<String> {
    let perf = pt_tests::perf(test)?;
    let o = Command::new(perf)
        .arg("script")
        .args(args)
        .arg("-i")
        .arg(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "perf script: {}", stderr(&o));
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The sideband event on a real command, written by the session into
/// DIR/data, as perf reads it; the vDSO and --archive copies beside it.
#[test]
fn sideband_of_a_command_read_by_perf() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let o = ptrec(&[
        "--sideband-only",
        "-q",
        "--archive",
        "-o",
        dir.to_str().unwrap(),
        "--",
        "/bin/true",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));

    // vDSO: an ELF image named by its build-id, the one this kernel maps.
    let images: Vec<PathBuf> = std::fs::read_dir(dir.join("images"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(images.len(), 1, "{images:?}");
    let bytes = std::fs::read(&images[0]).unwrap();
    let id =
        ptrec::capture::build_id(&bytes).expect("the saved vDSO parses as ELF with a build-id");
    let own = ptrec::capture::build_id(&ptrec::capture::read_vdso("self").unwrap()).unwrap();
    assert_eq!(id, own);
    assert_eq!(
        images[0].file_name().unwrap().to_str().unwrap(),
        format!("vdso-{}.so", ptrec::capture::hex(&id))
    );
    assert!(ptrec::capture::has_text(&bytes));

    // --archive: the executable, same build-id as on disk.
    let copy = std::fs::read(dir.join("sysroot/usr/bin/true"))
        .or_else(|_| std::fs::read(dir.join("sysroot/bin/true")))
        .expect("sysroot holds the traced executable");
    let real = std::fs::read(std::fs::canonicalize("/bin/true").unwrap()).unwrap();
    assert_eq!(
        ptrec::capture::build_id(&copy),
        ptrec::capture::build_id(&real)
    );

    let Some(text) = perf_script("sideband_of_a_command_read_by_perf", TASK_EVENTS, &dir) else {
        return;
    };
    assert!(text.contains("PERF_RECORD_COMM exec: true:"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("PERF_RECORD_MMAP2") && l.ends_with("/true")),
        "{text}"
    );
    assert!(text.contains("libc"), "{text}");
    assert!(text.contains("PERF_RECORD_EXIT"), "{text}");
}

/// `-p`: the threads and mappings that existed before recording are
/// synthesized (COMM, MMAP2), then the duration ends the recording.
#[test]
fn sideband_of_a_running_process() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    // Let it exec.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let pid = child.id().to_string();
    let o = ptrec(&[
        "--sideband-only",
        "-q",
        "--duration",
        "0.3",
        "-p",
        &pid,
        "-o",
        dir.to_str().unwrap(),
    ]);
    let _ = child.kill();
    let _ = child.wait();
    assert!(o.status.success(), "{}", stderr(&o));
    let Some(text) = perf_script("sideband_of_a_running_process", TASK_EVENTS, &dir) else {
        return;
    };
    assert!(
        text.contains(&format!("PERF_RECORD_COMM: sleep:{pid}/{pid}")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("PERF_RECORD_MMAP2") && l.contains("/sleep")),
        "{text}"
    );
}

/// A real Intel PT recording of `ls`, decoded by perf (and ptdec when built).
#[test]
fn intel_pt_recording_of_ls() {
    if !have_pt() {
        pt_tests::skipped(
            "intel_pt_recording_of_ls",
            "no intel_pt PMU on this machine (VMs usually lack it)",
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let o = ptrec(&["-q", "-o", dir.to_str().unwrap(), "--", "ls", "/"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let Some(text) = perf_script("intel_pt_recording_of_ls", &["--itrace=cr"], &dir) else {
        return;
    };
    assert!(text.contains("ls"), "perf decoded no calls: {text}");
}

/// `--trigger`: a hardware execute breakpoint on a libc function of a running
/// process; each hit takes a snapshot, and `--max-snapshots 2` ends the
/// recording by itself (breakpoints work in VMs).
#[test]
fn trigger_on_a_libc_function_takes_snapshots() {
    let Ok(mut child) = Command::new("python3")
        .args([
            "-c",
            "import os,time\nwhile True:\n    os.getpid(); time.sleep(0.02)",
        ])
        .spawn()
    else {
        pt_tests::missing::<()>(
            "trigger_on_a_libc_function_takes_snapshots",
            "python3 is not installed",
        );
        return;
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let pid = child.id().to_string();
    let o = ptrec(&[
        "--sideband-only",
        "-q",
        "-S",
        "--max-snapshots",
        "2",
        "--duration",
        "20",
        "--trigger",
        "libc.so.6:getpid",
        "-p",
        &pid,
        "-o",
        dir.to_str().unwrap(),
    ]);
    let _ = child.kill();
    let _ = child.wait();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("2 snapshots"), "{err}");
    let o = ptrec(&["--sideband-only", "--trigger", "main", "-p", &pid]);
    assert!(stderr(&o).contains("needs snapshot mode"), "{}", stderr(&o));
}

/// `-k`: the kernel image is an MMAP `[kernel.kallsyms]_text` with pid -1 and
/// pgoff `_text` (perf's convention), and `kcore_dir/` holds kallsyms and
/// modules (and kcore when this kernel has `/proc/kcore`).
#[test]
fn kernel_mappings_with_k() {
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
    let Some((text, _)) = ptrec::synth::kernel_extent(&kallsyms) else {
        pt_tests::missing::<()>(
            "kernel_mappings_with_k",
            "/proc/kallsyms hides addresses (run the tests as root)",
        );
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let o = ptrec(&[
        "--sideband-only",
        "-q",
        "-k",
        "-o",
        dir.to_str().unwrap(),
        "--",
        "/bin/true",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let kd = dir.join("kcore_dir");
    let copied = std::fs::read_to_string(kd.join("kallsyms")).unwrap();
    assert_eq!(ptrec::synth::kernel_extent(&copied).unwrap().0, text);
    assert!(kd.join("modules").exists());
    if Path::new("/proc/kcore").exists() {
        assert!(kd.join("kcore").exists());
    } else {
        assert!(stderr(&o).contains("no /proc/kcore"), "{}", stderr(&o));
    }
    let n_modules = std::fs::read_to_string("/proc/modules")
        .map(|m| ptrec::synth::parse_modules(&m).len())
        .unwrap_or(0);
    let Some(out) = perf_script("kernel_mappings_with_k", &["-D"], &dir) else {
        return;
    };
    let want = format!("PERF_RECORD_MMAP -1/0: [{text:#x}(");
    let line = out
        .lines()
        .find(|l| l.contains(&want) && l.ends_with("x [kernel.kallsyms]_text"))
        .unwrap_or_else(|| panic!("no kernel MMAP {want}: {out}"));
    assert!(line.contains(&format!("@ {text:#x}]")), "{line}");
    let kernel_mmaps = out
        .lines()
        .filter(|l| l.contains("PERF_RECORD_MMAP -1/0:"))
        .count();
    assert_eq!(kernel_mmaps, 1 + n_modules, "{out}");
}

/// `-k` for a user who cannot see kernel addresses: an error naming
/// /proc/kallsyms and the remedy, nothing left behind.
#[test]
fn kernel_without_kallsyms_addresses() {
    if !ptrec::outdir::running_as_root() || Command::new("setpriv").arg("--help").output().is_err()
    {
        pt_tests::missing::<()>(
            "kernel_without_kallsyms_addresses",
            "needs root and setpriv (util-linux)",
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let dir = tmp.path().join("t");
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", EXE])
        .args([
            "--sideband-only",
            "-k",
            "-o",
            dir.to_str().unwrap(),
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let err = stderr(&o);
    let as_nobody = std::fs::read_to_string("/proc/kallsyms").is_ok()
        && Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "head",
                "-1",
                "/proc/kallsyms",
            ])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).starts_with("0000000000000000"))
            .unwrap_or(false);
    if !as_nobody {
        pt_tests::skipped(
            "kernel_without_kallsyms_addresses",
            "nobody sees kernel addresses here",
        );
        return;
    }
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("/proc/kallsyms") && err.contains("root"),
        "{err}"
    );
    assert!(!dir.exists(), "nothing is created");
}

/// `-a`: the processes already running are synthesized (COMM of each thread,
/// MMAP2 of each executable mapping), as perf record -a does.
#[test]
fn system_wide_synthesizes_running_processes() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let pid = child.id();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let o = ptrec(&[
        "--sideband-only",
        "-q",
        "-a",
        "--duration",
        "0.2",
        "-o",
        dir.to_str().unwrap(),
    ]);
    let _ = child.kill();
    let _ = child.wait();
    if !o.status.success() && stderr(&o).contains("perf_event_paranoid") {
        pt_tests::skipped("system_wide_synthesizes_running_processes", &stderr(&o));
        return;
    }
    assert!(o.status.success(), "{}", stderr(&o));
    let Some(text) = perf_script(
        "system_wide_synthesizes_running_processes",
        TASK_EVENTS,
        &dir,
    ) else {
        return;
    };
    assert!(
        text.contains(&format!("PERF_RECORD_COMM: sleep:{pid}/{pid}")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains(&format!("PERF_RECORD_MMAP2 {pid}/{pid}:"))
                && l.contains("r-xp")
                && l.ends_with("/sleep")),
        "{text}"
    );
    // Every thread of a multi-threaded process: this test's own thread.
    let me = std::process::id();
    let tid: u32 = std::fs::read_link("/proc/thread-self")
        .unwrap()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains("PERF_RECORD_COMM") && l.ends_with(&format!(":{me}/{tid}"))),
        "thread {tid} of {me} missing"
    );
}

const PIE_PROGRAM: &str = r#"
#include <stdlib.h>
#include <unistd.h>
__attribute__((noinline)) void trigger_point(int i) { __asm__ volatile("" : : "r"(i) : "memory"); }
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    for (int i = 0; i < n; i++) { trigger_point(i); getpid(); usleep(20000); }
    return 0;
}
"#;

/// `--trigger SYMBOL -- CMD`: a PIE's own function and a libc function are
/// resolved after the exec (the command stopped at its entry point), one
/// snapshot per call up to `--max-snapshots`, plus the one snapshot mode
/// takes at the command's exit when the maximum was not reached.
#[test]
fn trigger_symbol_of_a_command() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, exe) = (tmp.path().join("p.c"), tmp.path().join("p"));
    std::fs::write(&src, PIE_PROGRAM).unwrap();
    let built = Command::new("gcc")
        .args(["-O1", "-fPIE", "-pie", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .is_ok_and(|s| s.success());
    if !built {
        pt_tests::missing::<()>(
            "trigger_symbol_of_a_command",
            "gcc cannot build the PIE program",
        );
        return;
    }
    let snapshots = |name: &str, trigger: &str, calls: u32, max: u32| {
        let dir = tmp.path().join(name);
        let o = ptrec(&[
            "--sideband-only",
            "-q",
            "-S",
            "--trigger",
            trigger,
            "--max-snapshots",
            &max.to_string(),
            "-o",
            dir.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
            &calls.to_string(),
        ]);
        let err = stderr(&o);
        assert!(dir.join("data").exists(), "{err}");
        let n: u32 = err
            .split(", ")
            .find_map(|p| p.strip_suffix(" snapshots\n")?.parse().ok())
            .unwrap_or_else(|| panic!("no snapshot count: {err}"));
        n
    };
    // Calls + the snapshot at exit; the maximum ends the recording first.
    assert_eq!(snapshots("a", "trigger_point", 3, 10), 4);
    assert_eq!(snapshots("b", "trigger_point", 5, 2), 2);
    assert_eq!(snapshots("c", "trigger_point", 0, 10), 1);
    // A shared-library symbol: libc is mapped by the entry point.
    assert_eq!(snapshots("d", "libc.so.6:getpid", 4, 10), 5);

    let o = ptrec(&[
        "--sideband-only",
        "-S",
        "--trigger",
        "no_such_fn_xyz",
        "-o",
        tmp.path().join("e").to_str().unwrap(),
        "--",
        exe.to_str().unwrap(),
        "1",
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("no symbol \"no_such_fn_xyz\""),
        "{}",
        stderr(&o)
    );
}
