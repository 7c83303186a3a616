//! Address filters end to end (issue 13): `ptsim --filter` traces a real
//! program with the TIP.PGD/TIP.PGE the hardware writes at the filter's
//! edges and records the filter in AUXTRACE_INFO; perf decodes the trace
//! without an error; ptdec shows the filtered code's calls as the ground
//! truth restricted to that code has them, the time outside as
//! `[filtered out]`, and a call from the filtered code into code outside
//! that returns is an ordinary call, not a broken stack.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use ptdec::input::Trace;
use ptdec::pipeline::Report;
use ptsim::truth::{read_thread_file, TruthLine};

fn programs(test: &str) -> Option<PathBuf> {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-programs");
    pt_tests::fixture_programs(test, &out)
}

/// Address and size of a function symbol (`nm -S`).
fn symbol(prog: &Path, name: &str) -> (u64, u64) {
    let out = Command::new("nm")
        .arg("-S")
        .arg(prog)
        .output()
        .expect("run nm");
    let text = String::from_utf8_lossy(&out.stdout);
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 4 && f[3] == name {
            return (
                u64::from_str_radix(f[0], 16).unwrap(),
                u64::from_str_radix(f[1], 16).unwrap(),
            );
        }
    }
    panic!("no symbol {name} in {}", prog.display())
}

/// Traces `prog` with `--filter 'filter FUNC @ prog'`; the trace dir.
fn trace(prog: &Path, func: &str, dir: &Path) {
    let filter = ptsim::sim::ip_filter(&format!("filter {func} @ {}", prog.display())).unwrap();
    let mut o = ptsim::sim::Options::new(prog, Vec::new(), dir);
    o.env = Some(Vec::new());
    o.pt.filter = Some(filter);
    ptsim::sim::run(o).unwrap();
}

fn decode(dir: &Path) -> Report {
    let trace = Trace::open(dir).unwrap();
    assert!(
        trace
            .info
            .filter
            .as_deref()
            .is_some_and(|f| f.starts_with("filter 0x")),
        "AUXTRACE_INFO records the filter: {:?}",
        trace.info.filter
    );
    common::decode_to_memory(dir, &[])
}

fn truth(dir: &Path) -> Vec<TruthLine> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("truth"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_stem()
                .is_some_and(|s| s.to_string_lossy().parse::<u32>().is_ok())
        })
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    read_thread_file(&files.remove(0)).unwrap()
}

/// (category, name, depth) of every slice ptdec wrote.
fn slices(r: &Report) -> Vec<(String, String, i32)> {
    r.written[0]
        .slices
        .iter()
        .map(|s| (s.category.to_string(), s.name.clone(), s.depth))
        .collect()
}

/// perf decodes the filtered trace without an error; its branch lines.
fn perf_branches(dir: &Path, home: &Path, test: &str) -> Option<Vec<String>> {
    let perf = pt_tests::perf(test)?;
    let out = Command::new(perf)
        .env("HOME", home)
        .args(["script", "--itrace=cre", "-i"])
        .arg(dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        !text.contains("error") && !err.contains("error"),
        "perf reports errors on the filtered trace:\n{text}\n{err}"
    );
    Some(text.lines().map(str::to_string).collect())
}

#[test]
fn a_recursion_filtered_to_itself_has_the_truths_calls() {
    let test = "a_recursion_filtered_to_itself_has_the_truths_calls";
    let Some(progs) = programs(test) else { return };
    let prog = progs.join("recursion");
    let (fact, size) = symbol(&prog, "fact");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    trace(&prog, "fact", &dir);
    let inside = |ip: u64| ip >= fact && ip < fact + size;
    let t = truth(&dir);
    let calls_in = t
        .iter()
        .filter(|l| l.kind == "call" && inside(l.to))
        .count();
    let calls_within = t
        .iter()
        .filter(|l| l.kind == "call" && inside(l.from) && inside(l.to))
        .count();
    assert!(calls_in >= 2, "{calls_in}");

    let r = decode(&dir);
    assert!(r.decode.errors.is_empty(), "{:?}", r.decode.errors);
    assert_eq!(r.stack.skipped_frames, 0);
    // Every call of fact is a slice: the first entered from outside (a
    // TIP.PGE at its entry), the others called from inside.
    let s = slices(&r);
    let facts = s.iter().filter(|x| x.1 == "fact").count();
    assert_eq!(facts, calls_in, "{s:?}");
    assert_eq!(r.stack.calls as usize, calls_within);
    // Time outside the filter is [filtered out], never [kernel].
    let untraced: Vec<_> = s.iter().filter(|x| x.0 == "untraced").collect();
    assert!(!untraced.is_empty());
    assert!(
        untraced.iter().all(|x| x.1 == "[filtered out]"),
        "{untraced:?}"
    );
    common::perfetto_agrees_with_report(test, &r);

    if let Some(lines) = perf_branches(&dir, tmp.path(), test) {
        let recursive = lines
            .iter()
            .filter(|l| {
                l.contains("fact+0x") && l.contains("=>") && {
                    let (a, b) = l.split_once("=>").unwrap();
                    a.contains("fact+") && b.contains("fact+0x0 ")
                }
            })
            .count();
        assert_eq!(recursive, calls_within, "{lines:#?}");
    }
}

#[test]
fn a_call_into_filtered_out_code_that_returns_keeps_the_stack() {
    let test = "a_call_into_filtered_out_code_that_returns_keeps_the_stack";
    let Some(progs) = programs(test) else { return };
    let prog = progs.join("recursion");
    let (compute, size) = symbol(&prog, "compute");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    trace(&prog, "compute", &dir);
    let inside = |ip: u64| ip >= compute && ip < compute + size;
    let t = truth(&dir);
    let calls_out = t
        .iter()
        .filter(|l| l.kind == "call" && inside(l.from))
        .count();
    assert!(calls_out >= 1);

    let r = decode(&dir);
    assert!(r.decode.errors.is_empty(), "{:?}", r.decode.errors);
    assert_eq!(
        r.stack.skipped_frames, 0,
        "no frame is skipped at the filter edges"
    );
    assert_eq!(r.stack.restarts, 0, "the stack never restarts");
    assert_eq!(r.stack.calls as usize, calls_out);
    // compute's callee (outside the filter) is a slice inside compute,
    // holding the [filtered out] time; compute returns into main.
    let s = slices(&r);
    let depth = |name: &str| s.iter().find(|x| x.1 == name).map(|x| x.2);
    let c = depth("compute").expect("compute is a slice");
    assert_eq!(depth("fact"), Some(c + 1), "{s:?}");
    assert!(
        s.iter().any(|x| x.1 == "[filtered out]" && x.2 == c + 2),
        "the callee's time is filtered out: {s:?}"
    );
    assert_eq!(depth("main"), Some(c - 1), "{s:?}");
    common::perfetto_agrees_with_report(test, &r);
    perf_branches(&dir, tmp.path(), test);
}

#[test]
fn filters_ptsim_cannot_simulate_are_clear_errors() {
    for (text, want) in [
        ("start main @ /bin/true", "`filter` regions only"),
        ("filter main", "kernel code"),
        ("filter main @ /nonexistent/prog", "/nonexistent/prog"),
        ("filter nosuchsymbol @ /proc/self/exe", "nosuchsymbol"),
        (
            "filter a @ /bin/true, filter b @ /bin/true, filter c @ /bin/true",
            "3",
        ),
        ("bogus", "bogus"),
        // Past the end of the file (a trace of nothing, exit 0), or past
        // 2^64.
        (
            "filter 0x40000000/0x1000 @ /bin/true",
            "the range 0x40000000/0x1000 (file offset and size) lies past the end of /bin/true, which is",
        ),
        (
            "filter 0xffffffffffffff00/0x1000 @ /bin/true",
            "lies past the end of /bin/true",
        ),
    ] {
        let e = ptsim::sim::ip_filter(text).unwrap_err();
        assert!(e.contains(want), "{text}: {e}");
    }
}

/// The question about filtered interpreters: `interp` filtered to
/// its dispatch loop (`interp_run`, whose builtins, libc and vDSO calls are
/// all outside the filter). Every call the loop makes is a call in ptdec,
/// as in the truth, and none is taken for a frame skipped by longjmp.
#[test]
fn a_filtered_interpreter_loop_keeps_every_call_and_skips_no_frame() {
    let test = "a_filtered_interpreter_loop_keeps_every_call_and_skips_no_frame";
    let Some(progs) = programs(test) else { return };
    let prog = progs.join("interp");
    let (run_at, size) = symbol(&prog, "interp_run");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    trace(&prog, "interp_run", &dir);
    let inside = |ip: u64| ip >= run_at && ip < run_at + size;
    let t = truth(&dir);
    let calls_out = t
        .iter()
        .filter(|l| l.kind == "call" && inside(l.from))
        .count();
    assert!(calls_out > 1000, "{calls_out}");
    let r = decode(&dir);
    assert!(r.decode.errors.is_empty(), "{:?}", r.decode.errors);
    assert_eq!(r.stack.calls as usize, calls_out);
    assert_eq!(r.stack.skipped_frames, 0);
    assert_eq!(r.stack.restarts, 0);
    common::perfetto_agrees_with_report(test, &r);
    perf_branches(&dir, tmp.path(), test);
}
