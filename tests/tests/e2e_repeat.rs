//! Issue 11: traces scaled up with `ptsim --repeat LOC=K`, decoded by perf
//! and ptdec, checked against the ground truth, whose `repeat` lines stand
//! for the K copies of one iteration.
//!
//! - Small traces (CI): per thread, every call and return that perf's
//!   decoder (`perf script --itrace=cr`) and ptdec's decoding stage report
//!   is the truth's, in order, with the repeated iteration written out
//!   (`ThreadTruth::expanded`); instructions per thread equal the truth's;
//!   the FTF has one call slice per truth call of each repeated function.
//! - Per function (call target), the call counts of perf and ptdec equal
//!   the truth's totals, counted from the `repeat` lines without expanding
//!   them (`ThreadTruth::totals`): also for the ~100 MB trace, an ignored
//!   test that `scripts/bench` runs.
//!
//! perf and gcc follow `pt_tests`' tool policy (fail under
//! `PT_REQUIRE_TOOLS=1`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ftf::read::{EventKind, RecordKind, Value};
use pt_tests::Branch;
use ptdec::decode::{decode, DecodeOptions, DecodeStats};
use ptdec::emit::{EmitOptions, Target, TimeAxis};
use ptdec::images::{ImageStore, SearchPath};
use ptdec::input::Trace;
use ptdec::model::ops::{Op, OpSink};
use ptsim::sim::repeat::RepeatSpec;
use ptsim::truth::ThreadTruth;

mod common;
use common::AllOps;

fn programs(test: &str) -> Option<PathBuf> {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-programs");
    pt_tests::fixture_programs(test, &out)
}

/// Runs ptsim on `prog args` with `--repeat` specs (empty environment).
fn simulate(
    progs: &Path,
    prog: &str,
    args: &[String],
    repeat: &[&str],
    per_cpu: Option<u32>,
    dir: &Path,
) -> ptsim::sim::Report {
    let mut o =
        ptsim::sim::Options::new(progs.join(prog), args.iter().map(Into::into).collect(), dir);
    o.env = Some(Vec::new());
    o.per_cpu = per_cpu;
    o.repeat = repeat
        .iter()
        .map(|s| s.parse::<RepeatSpec>().unwrap())
        .collect();
    let r = ptsim::sim::run(o).unwrap_or_else(|e| panic!("ptsim {prog}: {e}"));
    assert!(
        matches!(r.outcome.exit, Some(ptsim::engine::Exit::Code(0))),
        "{prog}: {:?}",
        r.outcome.exit
    );
    r
}

/// Instructions per tid from `truth/summary.txt`.
fn truth_insns(dir: &Path) -> BTreeMap<u32, u64> {
    let s = std::fs::read_to_string(dir.join("truth/summary.txt")).unwrap();
    s.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((f.first()?.parse().ok()?, f.get(2)?.parse().ok()?))
        })
        .collect()
}

/// Calls per (tid, target) from the truth, repeats counted.
fn truth_calls(truth: &BTreeMap<u32, ThreadTruth>) -> BTreeMap<(u32, u64), u64> {
    let mut m = BTreeMap::new();
    for (tid, t) in truth {
        for ((kind, to), n) in t.totals() {
            if kind == "call" {
                m.insert((*tid, to), n);
            }
        }
    }
    m
}

fn images(dir: &Path) -> ImageStore {
    ImageStore::new(SearchPath {
        buildid_dir: None,
        ..SearchPath::for_trace(dir)
    })
}

/// ptdec's calls and returns per thread (kept in order when `keep`), and
/// its calls per (tid, target).
#[derive(Default)]
struct Ops {
    keep: bool,
    seq: BTreeMap<u32, Vec<Branch>>,
    calls: BTreeMap<(u32, u64), u64>,
}

impl OpSink for Ops {
    fn op(&mut self, _pid: u32, tid: u32, op: Op) {
        let b = match op {
            Op::Call { from, to, .. } => {
                *self.calls.entry((tid, to)).or_default() += 1;
                Branch {
                    call: true,
                    from,
                    to,
                }
            }
            Op::Return { from, to, .. } => Branch {
                call: false,
                from,
                to,
            },
            _ => return,
        };
        if self.keep {
            self.seq.entry(tid).or_default().push(b);
        }
    }
}

fn decode_ops(dir: &Path, keep: bool) -> (Ops, DecodeStats) {
    let trace = Trace::open(dir).unwrap();
    let mut sink = Ops {
        keep,
        ..Ops::default()
    };
    let stats = decode(&trace, &images(dir), &DecodeOptions::default(), &mut sink).unwrap();
    assert!(stats.errors.is_empty(), "ptdec: {:?}", stats.errors);
    (sink, stats)
}

/// perf's calls per (tid, target), counted as its output streams by (a
/// 100 MB trace has tens of millions of calls), and its error lines.
fn perf_calls(perf: &Path, dir: &Path) -> (BTreeMap<(u32, u64), u64>, Vec<String>) {
    let home = tempfile::tempdir().unwrap();
    pt_tests::perf_home(dir, home.path()).unwrap();
    let mut child = Command::new(perf)
        .args(["script", "--itrace=cre", "-F", "tid,flags,ip,addr", "-i"])
        .arg(dir)
        .env("HOME", home.path())
        .env("PAGER", "cat")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run perf");
    let mut calls = BTreeMap::new();
    let mut errors = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let line = line.trim();
        if line.starts_with("instruction trace error") {
            errors.push(line.to_string());
            continue;
        }
        let Some((left, right)) = line.split_once("=>") else {
            continue;
        };
        let words: Vec<&str> = left.split_whitespace().collect();
        if words.len() != 3 || words[1] != "call" {
            continue;
        }
        let tid: u32 = words[0].parse().unwrap();
        let to = right.split_whitespace().next().unwrap();
        let to = u64::from_str_radix(to.trim_start_matches("0x"), 16).unwrap();
        *calls.entry((tid, to)).or_default() += 1;
    }
    assert!(child.wait().unwrap().success(), "perf script failed");
    (calls, errors)
}

/// Call slices per (tid, addr) in the FTF that ptdec's pipeline writes.
fn ftf_calls(dir: &Path) -> BTreeMap<(u32, u64), u64> {
    let out = dir.join("out.ftf");
    let report = common::run_pipeline(
        dir,
        &[],
        DecodeOptions::default(),
        Default::default(),
        EmitOptions {
            axis: TimeAxis::Instructions,
            ..EmitOptions::default()
        },
        Target::File(out.clone()),
    );
    assert!(report.missing.is_empty(), "{:?}", report.missing);
    let mut m = BTreeMap::new();
    for r in ftf::read::parse(&std::fs::read(&out).unwrap()).unwrap() {
        let RecordKind::Event(e) = r.kind else {
            continue;
        };
        if !matches!(e.kind, EventKind::DurationComplete { .. }) || e.category != "call" {
            continue;
        }
        if let Some(Value::Pointer(addr)) =
            e.args.iter().find(|a| a.name == "addr").map(|a| &a.value)
        {
            *m.entry((e.thread.tid as u32, *addr)).or_default() += 1;
        }
    }
    m
}

/// The address of `sym` in a non-PIE program.
fn symbol(prog: &Path, sym: &str) -> u64 {
    let out = Command::new("nm").arg(prog).output().expect("run nm");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[2] == sym).then(|| u64::from_str_radix(f[0], 16).unwrap())
        })
        .unwrap_or_else(|| panic!("no {sym} in {}", prog.display()))
}

/// Per thread: perf's and ptdec's calls and returns are the truth's, in
/// order, with every repeat written out; instructions per thread are the
/// truth's. Returns the number of calls checked.
fn check_sequences(test: &str, what: &str, dir: &Path) -> usize {
    let truth = common::thread_truths(dir);
    let (ops, stats) = decode_ops(dir, true);
    let mut got_insns: BTreeMap<u32, u64> = BTreeMap::new();
    for ((_, tid), t) in &stats.threads {
        *got_insns.entry(*tid).or_default() += t.insns;
    }
    assert_eq!(
        got_insns,
        truth_insns(dir),
        "{what}: instructions per thread"
    );
    let perf = pt_tests::perf(test).map(|perf| {
        let home = tempfile::tempdir().unwrap();
        pt_tests::perf_branches(&perf, dir, home.path())
    });
    if let Some(p) = &perf {
        assert!(p.errors.is_empty(), "{what}: perf: {:?}", p.errors);
    }
    let mut calls = 0;
    for (tid, t) in &truth {
        assert!(
            !t.repeats.is_empty() || truth.len() > 1,
            "{what}: no repeat"
        );
        let want: Vec<Branch> = t
            .expanded()
            .iter()
            .filter(|l| l.kind == "call" || l.kind == "return")
            .map(|l| Branch {
                call: l.kind == "call",
                from: l.from,
                to: l.to,
            })
            .collect();
        let empty = Vec::new();
        // perf first: when only ptdec differs, the trace is right.
        let sides = [
            (
                "perf",
                perf.as_ref().map(|p| p.threads.get(tid).unwrap_or(&empty)),
            ),
            ("ptdec", Some(ops.seq.get(tid).unwrap_or(&empty))),
        ];
        for (side, got) in sides {
            let Some(got) = got else { continue };
            if let Some(i) = (0..want.len().max(got.len())).find(|&i| got.get(i) != want.get(i)) {
                panic!(
                    "{what}: tid {tid}: {side} and the truth differ at call/return #{i} of {} ({side}: {:?}, truth: {:?})",
                    want.len(),
                    got.get(i),
                    want.get(i)
                );
            }
        }
        calls += want.iter().filter(|b| b.call).count();
    }
    calls
}

// ---- tests ----------------------------------------------------------------

/// An iteration with a vDSO call, a syscall, a signal handler entered from
/// raise() and a longjmp out of two frames, repeated 40 times; then the
/// program maps a library (dlopen) and calls it: its MMAP2 must come after
/// the repeats in perf's time order, or perf and ptdec would apply it too
/// early or, if it fell inside them, see the library's code unmapped.
#[test]
fn an_iteration_with_signal_syscall_vdso_and_longjmp_repeats_as_the_truth_says() {
    let test = "an_iteration_with_signal_syscall_vdso_and_longjmp_repeats_as_the_truth_says";
    let Some(progs) = programs(test) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("trace");
    let lib = progs.join("libplt.so").to_string_lossy().into_owned();
    let r = simulate(&progs, "loopmix", &[lib], &["step=40"], None, &dir);
    assert_eq!(r.repeats.len(), 1, "{:?}", r.warnings);
    assert!(r.repeat_missing.is_empty());
    let truth = common::thread_truths(&dir);
    let (tid, t) = truth.iter().next().unwrap();
    let (at, rep) = t.repeats[0];
    assert_eq!(rep.count, 40);
    let it = &t.lines[at - rep.lines as usize..at];
    // What the iteration holds: the handler entered from the tgkill
    // syscall, other syscalls, the vDSO, the longjmp's return-less unwind.
    let handler = symbol(&progs.join("loopmix"), "on_usr1");
    assert!(
        it.iter().any(|l| l.kind == "far" && l.to == handler),
        "{it:?}"
    );
    assert!(it.iter().filter(|l| l.kind == "far").count() >= 3);
    let calls = check_sequences(test, "loopmix step=40", &dir);

    // The MMAP2 of libplt.so lies after the last repeated call of step()
    // and before lib_square runs.
    let Some(perf) = pt_tests::perf(test) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    pt_tests::perf_home(&dir, home.path()).unwrap();
    let out = Command::new(&perf)
        .args([
            "script",
            "--itrace=cr",
            "--show-mmap-events",
            "-F",
            "tid,time,flags,ip,addr",
            "-i",
        ])
        .arg(&dir)
        .env("HOME", home.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let step = format!("{:x}", symbol(&progs.join("loopmix"), "step"));
    let lines: Vec<&str> = text.lines().collect();
    let calls_step = |l: &&str| {
        l.split_whitespace().any(|w| w == "call")
            && l.split_whitespace().last() == Some(step.as_str())
    };
    let last_step = lines
        .iter()
        .rposition(calls_step)
        .expect("calls of step in perf's output");
    let mmap = lines
        .iter()
        .position(|l| l.contains("PERF_RECORD_MMAP2") && l.contains("libplt.so"))
        .expect("the MMAP2 of libplt.so");
    assert!(
        mmap > last_step,
        "the MMAP2 of libplt.so ({}) comes before the last repeated call of step ({})",
        lines[mmap],
        lines[last_step]
    );
    let steps = lines.iter().filter(|l| calls_step(l)).count();
    // loopmix's own 4 iterations, and 40 repeats.
    assert_eq!(steps as u64, 4 + 40, "calls of step in perf's output");
    eprintln!(
        "loopmix step=40: tid {tid}: {calls} calls = truth = ptdec = perf, MMAP2 after the repeats"
    );
}

/// An iteration that maps code (dlopen the first time) is refused with a
/// warning; the next one, which does not, is repeated.
#[test]
fn an_iteration_that_maps_code_is_refused_and_the_next_repeated() {
    let test = "an_iteration_that_maps_code_is_refused_and_the_next_repeated";
    let Some(progs) = programs(test) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("trace");
    let lib = progs.join("libplt.so").to_string_lossy().into_owned();
    let r = simulate(
        &progs,
        "loopmix",
        &[lib.clone(), lib],
        &["step=5"],
        None,
        &dir,
    );
    assert!(
        r.warnings.iter().any(
            |w| w.contains("libplt.so was mapped") && w.contains("executable mappings changed")
        ),
        "{:?}",
        r.warnings
    );
    assert_eq!(r.repeats.len(), 1);
    check_sequences(test, "loopmix step=5 (dlopen in the loop)", &dir);
}

/// The two workloads, repeated: per function, perf's and ptdec's call
/// counts are the truth's totals; the FTF has a slice per call of each
/// function called in the repeated iteration.
#[test]
fn repeated_workloads_count_every_call_as_the_truth_says() {
    let test = "repeated_workloads_count_every_call_as_the_truth_says";
    let Some(progs) = programs(test) else { return };
    for (prog, spec) in [("interp", "interp_run=30"), ("shapes", "shapes_round=30")] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("trace");
        let r = simulate(&progs, prog, &[], &[spec], None, &dir);
        assert_eq!(r.repeats.len(), 1, "{prog}: {:?}", r.warnings);
        check_counts(test, prog, &dir, Some(&progs.join(prog)), prog == "interp");
    }
}

/// Two threads of the interpreter on two simulated CPUs, each repeating
/// its own loop: per thread every call and return is the truth's.
#[test]
fn two_threads_repeat_on_two_cpus_as_the_truth_says() {
    let test = "two_threads_repeat_on_two_cpus_as_the_truth_says";
    let Some(progs) = programs(test) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("trace");
    let r = simulate(
        &progs,
        "interp",
        &["2".into()],
        &["interp_run=8"],
        Some(2),
        &dir,
    );
    let tids: Vec<u32> = r.repeats.iter().map(|d| d.tid).collect();
    assert_eq!(tids.len(), 2, "one repeat per thread: {:?}", r.warnings);
    assert_ne!(tids[0], tids[1]);
    let calls = check_sequences(test, "interp 2 --per-cpu 2", &dir);
    eprintln!("interp 2 --per-cpu 2: {calls} calls = truth = ptdec = perf");
}

/// The keys whose counts differ: (key, got, truth).
fn diff(
    got: &BTreeMap<(u32, u64), u64>,
    want: &BTreeMap<(u32, u64), u64>,
) -> Vec<((u32, u64), u64, u64)> {
    let mut keys: Vec<_> = got.keys().chain(want.keys()).copied().collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .map(|k| {
            (
                k,
                got.get(&k).copied().unwrap_or(0),
                want.get(&k).copied().unwrap_or(0),
            )
        })
        .filter(|(_, a, b)| a != b)
        .collect()
}

/// Per (tid, function): truth totals = ptdec = perf; with `prog`, the FTF
/// has a call slice per truth call of each function the repeated iteration
/// calls (exactly one per call with `exact_ftf`, for the functions that no
/// direct `jmp` of `prog` enters: ptdec makes a slice of a tail call too).
fn check_counts(test: &str, what: &str, dir: &Path, prog: Option<&Path>, exact_ftf: bool) {
    let truth = common::thread_truths(dir);
    let want = truth_calls(&truth);
    let total: u64 = want.values().sum();
    if let Some(perf) = pt_tests::perf(test) {
        let (calls, errors) = perf_calls(&perf, dir);
        assert!(errors.is_empty(), "{what}: perf: {errors:?}");
        assert!(
            calls == want,
            "{what}: perf's calls per (tid, target) differ from the truth's: {:?}",
            diff(&calls, &want)
        );
    }
    let (ops, stats) = decode_ops(dir, false);
    assert!(
        ops.calls == want,
        "{what}: ptdec's calls per (tid, target) differ from the truth's (perf's do not): {:?}",
        diff(&ops.calls, &want)
    );
    let insns: u64 = stats.threads.values().map(|t| t.insns).sum();
    assert_eq!(
        insns,
        truth_insns(dir).values().sum::<u64>(),
        "{what}: instructions"
    );
    if let Some(prog) = prog {
        let slices = ftf_calls(dir);
        // ptdec makes a slice of a tail call too (a `jmp` to a function):
        // only functions no direct jmp of the program enters have one slice
        // per call.
        let jumped = common::jump_targets(prog);
        let mut checked = 0;
        for (tid, t) in &truth {
            for &(at, r) in &t.repeats {
                for l in &t.lines[at - r.lines as usize..at] {
                    if l.kind != "call" || (exact_ftf && jumped.contains(&l.to)) {
                        continue;
                    }
                    let key = (*tid, l.to);
                    let (got, want) = (slices.get(&key), want.get(&key));
                    // A jump through a pointer into a function (a virtual
                    // tail call in libstdc++) is a slice too: at least one
                    // per call there.
                    let ok = if exact_ftf { got == want } else { got >= want };
                    assert!(
                        ok,
                        "{what}: tid {tid}: FTF call slices at {:#x}: {got:?}, truth calls {want:?}",
                        l.to
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 0);
    }
    eprintln!(
        "{what}: {} functions, {total} calls, {insns} instructions = truth = ptdec{}",
        want.len(),
        if pt_tests::perf(test).is_some() {
            " = perf"
        } else {
            ""
        }
    );
}

/// The ~100 MB trace of the benchmark (`scripts/bench` runs it):
/// `PT_REPEAT_TRACE=DIR` checks an existing trace dir, else the
/// interpreter is repeated 21,000 times (about 100 MB of PT).
#[test]
#[ignore = "about 100 MB of PT and a few minutes: scripts/bench runs it"]
fn hundred_megabytes_count_every_call_as_the_truth_says() {
    let test = "hundred_megabytes_count_every_call_as_the_truth_says";
    let tmp = tempfile::tempdir().unwrap();
    let dir = match std::env::var_os("PT_REPEAT_TRACE") {
        Some(d) => PathBuf::from(d),
        None => {
            let Some(progs) = programs(test) else { return };
            let dir = tmp.path().join("trace");
            simulate(&progs, "interp", &[], &["interp_run=21000"], None, &dir);
            dir
        }
    };
    let mb = std::fs::metadata(dir.join("data")).unwrap().len() >> 20;
    check_counts(
        test,
        &format!("{} ({mb} MB)", dir.display()),
        &dir,
        None,
        false,
    );
}

/// The two traces the window and pieces tests decode, each in a temporary
/// dir (kept while it is used): the interpreter on one buffer, and on two
/// threads on two CPUs; with what to call each, and its CPUs.
fn interp_traces(progs: &Path) -> Vec<(tempfile::TempDir, PathBuf, String, Option<u32>)> {
    [
        (vec![], "interp_run=100", None),
        (vec!["2".to_string()], "interp_run=50", Some(2)),
    ]
    .into_iter()
    .map(|(args, spec, per_cpu)| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("trace");
        simulate(progs, "interp", &args, &[spec], per_cpu, &dir);
        let what = format!("interp {args:?} per-cpu {per_cpu:?}");
        (tmp, dir, what, per_cpu)
    })
    .collect()
}

/// `got` has `want`'s threads and every thread's ops, stamps included.
fn assert_same_ops(what: &str, want: &AllOps, got: &AllOps) {
    assert_eq!(got.0.len(), want.0.len(), "{what}: threads");
    for (k, ops) in &want.0 {
        let g = got.0.get(k).map_or(&[][..], Vec::as_slice);
        let i = g.iter().zip(ops).position(|(x, y)| x != y);
        assert!(
            i.is_none() && g.len() == ops.len(),
            "{what}: thread {k:?} differs at {i:?} of {}/{}: {:?} vs {:?}",
            g.len(),
            ops.len(),
            i.map(|i| &g[i]),
            i.map(|i| &ops[i]),
        );
    }
}

fn decode_all(dir: &Path, opts: &DecodeOptions) -> (AllOps, DecodeStats) {
    let trace = Trace::open(dir).unwrap();
    let mut sink = AllOps::default();
    let stats = decode(&trace, &images(dir), opts, &mut sink).unwrap();
    assert!(stats.errors.is_empty(), "ptdec: {:?}", stats.errors);
    (sink, stats)
}

/// Memory is bounded by the window, not by the trace: a trace of about
/// 0.5 MB (one thread, and two threads on two CPUs) decoded in 4 KiB
/// chunks with a window of two chunks on two workers holds at most a few
/// chunks' ops at once, a small part of the trace's, and gives exactly the
/// ops of one chunk on one worker and of the default chunks on all cores;
/// its FTF is byte-identical for `-j1`, `-j2` and `-j8`, and has the same
/// slices for small chunks (byte-identical from one buffer).
#[test]
fn a_small_window_bounds_the_ops_held_and_changes_nothing() {
    let test = "a_small_window_bounds_the_ops_held_and_changes_nothing";
    let Some(progs) = programs(test) else { return };
    for (_tmp, dir, what, per_cpu) in interp_traces(&progs) {
        let whole = DecodeOptions {
            chunking: ptdec::decode::Chunking::Sequential,
            jobs: 1,
            ..DecodeOptions::default()
        };
        let small = DecodeOptions {
            chunking: ptdec::decode::Chunking::Bytes(4 << 10),
            jobs: 2,
            window: Some(2),
            ..DecodeOptions::default()
        };
        let (a, sa) = decode_all(&dir, &whole);
        let (b, sb) = decode_all(&dir, &small);
        let (c, _) = decode_all(&dir, &DecodeOptions::default());
        assert!(sb.chunks >= 20, "{what}: only {} chunks", sb.chunks);
        assert_eq!(sa.chunks as usize, sa.segments as usize, "{what}");
        assert_same_ops(&format!("{what}: 4 KiB chunks"), &a, &b);
        assert_same_ops(&format!("{what}: default chunks"), &a, &c);
        // Two chunks in the reorder window, one being handed over, and
        // per-cpu runs waiting for the time watermark (a chunk per CPU).
        let bound = 5 * sb.max_chunk_ops;
        eprintln!(
            "{what}: {} ops in {} chunks of up to {} ops; held at once: {} (bound {bound}); one chunk holds {}",
            sb.ops, sb.chunks, sb.max_chunk_ops, sb.max_ops_held, sa.max_chunk_ops
        );
        assert!(
            sb.max_ops_held <= bound,
            "{what}: {} > {bound}",
            sb.max_ops_held
        );
        assert!(
            sb.max_ops_held * 10 < sb.ops,
            "{what}: held {} of {} ops at once",
            sb.max_ops_held,
            sb.ops
        );
        // The FTF, byte for byte: the same for 1, 2 and 8 workers, and the
        // same as with every call stack built on the calling thread (the
        // reference: none built ahead on the workers). With 4 KiB chunks
        // the same slices: byte for byte from one buffer; from per-cpu
        // buffers the threads' records may interleave differently (runs
        // are handed over per chunk).
        let sequential = DecodeOptions {
            sequential_stacks: true,
            ..DecodeOptions::default()
        };
        let (reference, placed, seq) = ftf_bytes(&dir, sequential, "sequential");
        assert_eq!(seq.stacks_ahead_ops, 0, "{what}");
        let mut ahead = 0;
        for (jobs, chunk) in [
            (1, None),
            (2, None),
            (8, None),
            (1, Some(4 << 10)),
            (8, Some(4 << 10)),
            (2, Some(64 << 10)),
        ] {
            let opts = DecodeOptions {
                jobs,
                chunking: ptdec::decode::Chunking::of(chunk),
                ..DecodeOptions::default()
            };
            let (got, got_placed, st) = ftf_bytes(&dir, opts, &format!("j{jobs}-{chunk:?}"));
            ahead += st.stacks_ahead_ops;
            eprintln!(
                "{what}: -j{jobs} chunks {chunk:?}: call stacks of {} of {} ops built on the workers, {} stretches declined",
                st.stacks_ahead_ops, st.ops, st.stacks_ahead_declined
            );
            assert!(
                got_placed == placed,
                "{what}: -j{jobs} chunks {chunk:?}: other slices than -j1's"
            );
            // The per-thread counts too: the ordering stage takes a stack
            // built ahead's counts from its stretch.
            assert_eq!(
                st.threads, seq.threads,
                "{what}: -j{jobs} chunks {chunk:?}: per-thread statistics"
            );
            if chunk.is_some() && per_cpu.is_some() {
                continue;
            }
            let at = got.iter().zip(&reference).position(|(x, y)| x != y);
            assert!(
                at.is_none() && got.len() == reference.len(),
                "{what}: -j{jobs} chunks {chunk:?}: FTF differs from the sequential stacks' at byte {at:?} ({} vs {} bytes)",
                got.len(),
                reference.len()
            );
        }
        // On one CPU the chunks are decoded on the calling thread, with no
        // worker: the same FTF (a thread pinned to one CPU, as under
        // `taskset -c 0`).
        let one_cpu = std::thread::scope(|s| {
            s.spawn(|| {
                pin_to_one_cpu();
                let opts = DecodeOptions::default();
                assert!(
                    ptdec::decode::decodes_on_calling_thread(&opts),
                    "{what}: pinned to one CPU, but decoding on workers"
                );
                ftf_bytes(&dir, opts, "one-cpu")
            })
            .join()
            .unwrap()
        });
        assert!(
            one_cpu.1 == placed,
            "{what}: one CPU: other slices than -j1's"
        );
        assert_eq!(
            one_cpu.2.threads, seq.threads,
            "{what}: one CPU: per-thread statistics"
        );
        let at = one_cpu.0.iter().zip(&reference).position(|(x, y)| x != y);
        assert!(
            at.is_none() && one_cpu.0.len() == reference.len(),
            "{what}: one CPU: FTF differs from the sequential stacks' at byte {at:?}"
        );
        // Per-thread buffers: most call stacks are built on the workers.
        if per_cpu.is_none() {
            assert!(ahead > 0, "{what}: no call stack was built on the workers");
        }
    }
}

/// A chunk whose ops pass its bound (`DecodeOptions::chunk_ops`; here 700
/// ops, which nearly every 4 KiB chunk of these traces passes) is given
/// back by its decode worker, decoded again on the calling thread and
/// handed on in pieces of about that many ops, so that a chunk
/// of hostile PT, where a byte can stand for a million ops, is never held
/// whole. Nothing changes: every thread's ops, stamps included, are those
/// of one chunk on one worker (one buffer, and two threads on two CPUs),
/// and so are the FTF's slices (byte for byte from one buffer) and the
/// per-thread statistics.
#[test]
fn chunks_over_their_op_bound_go_on_in_pieces_and_change_nothing() {
    let test = "chunks_over_their_op_bound_go_on_in_pieces_and_change_nothing";
    let Some(progs) = programs(test) else { return };
    const BOUND: usize = 700;
    for (_tmp, dir, what, per_cpu) in interp_traces(&progs) {
        let whole = DecodeOptions {
            chunking: ptdec::decode::Chunking::Sequential,
            jobs: 1,
            ..DecodeOptions::default()
        };
        let (a, sa) = decode_all(&dir, &whole);
        assert_eq!(sa.chunks_in_pieces, 0, "{what}");
        let (reference, placed, ref_stats) = ftf_bytes(&dir, whole, "whole");
        for (jobs, chunk, sequential_stacks) in [
            (1, 4 << 10, false),
            (2, 4 << 10, false),
            (2, 16 << 10, true),
        ] {
            let opts = DecodeOptions {
                jobs,
                chunking: ptdec::decode::Chunking::Bytes(chunk),
                chunk_ops: Some(BOUND),
                sequential_stacks,
                ..DecodeOptions::default()
            };
            let how = format!("{what}: -j{jobs}, {chunk} B chunks");
            let (b, sb) = decode_all(&dir, &opts);
            eprintln!(
                "{how}: {} of {} chunks in pieces; {} ops, at most {} a piece, {} held at once",
                sb.chunks_in_pieces, sb.chunks, sb.ops, sb.max_chunk_ops, sb.max_ops_held
            );
            assert!(
                sb.chunks >= 8 && sb.chunks_in_pieces * 10 >= sb.chunks * 9,
                "{how}: {} of {} chunks in pieces",
                sb.chunks_in_pieces,
                sb.chunks
            );
            // A piece goes on when it holds the bound, between two blocks
            // and outside a stall that made ops.
            assert!(
                sb.max_chunk_ops < 3 * BOUND as u64,
                "{how}: a piece of {} ops",
                sb.max_chunk_ops
            );
            assert_same_ops(&how, &a, &b);
            assert_eq!(
                (sb.insns, sb.blocks, sb.ops, &sb.threads),
                (sa.insns, sa.blocks, sa.ops, &sa.threads),
                "{how}"
            );
            let (got, got_placed, st) = ftf_bytes(&dir, opts, &format!("pieces-j{jobs}-{chunk}"));
            assert!(st.chunks_in_pieces > 0, "{how}");
            assert!(got_placed == placed, "{how}: other slices");
            assert_eq!(
                st.threads, ref_stats.threads,
                "{how}: per-thread statistics"
            );
            if per_cpu.is_none() {
                assert!(got == reference, "{how}: the FTF differs");
            }
        }
    }
}

/// `ptdec report`'s answers, as JSON (every row, the slowest calls) and as
/// folded stacks, for `dir` decoded with `decode`; per thread or not; and
/// the number of chunks decoded.
fn report_texts(dir: &Path, decode: DecodeOptions, per_thread: bool) -> (String, String, u64) {
    use ptdec::report::render::{self, Sort, Weight};
    let (run, agg) = common::run_report(dir, decode, per_thread, 25);
    assert!(run.decode.errors.is_empty(), "{:?}", run.decode.errors);
    (
        render::json(&agg, &run, Sort::SelfTime, None),
        render::folded(&agg, Weight::Ns),
        run.decode.chunks,
    )
}

/// `ptdec report`'s answers do not depend on the chunk size or the CPUs,
/// from per-cpu buffers too, where the threads' slices reach the
/// aggregation interleaved by chunk: so on one CPU a report of a per-cpu
/// trace takes the smaller one-CPU chunks, which the FTF output cannot
/// (its records' order would change).
#[test]
fn a_report_of_per_cpu_buffers_is_the_same_for_any_chunks_and_cpus() {
    let test = "a_report_of_per_cpu_buffers_is_the_same_for_any_chunks_and_cpus";
    let Some(progs) = programs(test) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("trace");
    simulate(
        &progs,
        "interp",
        &["2".to_string()],
        &["interp_run=50"],
        Some(2),
        &dir,
    );
    for per_thread in [false, true] {
        let what = format!("per thread: {per_thread}");
        let (json, folded, _) = report_texts(&dir, DecodeOptions::default(), per_thread);
        assert!(json.contains("\"slowest\""), "{what}: {json}");
        let mut runs = 0;
        for (jobs, chunk) in [
            (1, Some(4 << 10)),
            (2, Some(4 << 10)),
            (1, Some(16 << 10)),
            (8, Some(16 << 10)),
            (2, Some(64 << 10)),
            (1, Some(u64::MAX)),
        ] {
            let opts = DecodeOptions {
                jobs,
                chunking: ptdec::decode::Chunking::of(chunk),
                ..DecodeOptions::default()
            };
            let (j, f, _) = report_texts(&dir, opts, per_thread);
            assert!(j == json, "{what}: -j{jobs} chunks {chunk:?}: other JSON");
            assert!(
                f == folded,
                "{what}: -j{jobs} chunks {chunk:?}: other folded stacks"
            );
            runs += 1;
        }
        // Pinned to one CPU (as under `taskset -c 0`): decoded on the
        // calling thread, in the one-CPU chunk size.
        let (j, f, chunks) = std::thread::scope(|s| {
            s.spawn(|| {
                pin_to_one_cpu();
                let opts = DecodeOptions::default();
                assert!(ptdec::decode::decodes_on_calling_thread(&opts));
                report_texts(&dir, opts, per_thread)
            })
            .join()
            .unwrap()
        });
        let small = DecodeOptions {
            chunking: ptdec::decode::Chunking::Bytes(ptdec::decode::DEFAULT_CHUNK_BYTES_ONE_CPU),
            ..DecodeOptions::default()
        };
        assert_eq!(
            chunks,
            report_texts(&dir, small, per_thread).2,
            "{what}: one CPU: not the one-CPU chunk size"
        );
        assert!(j == json, "{what}: one CPU: other JSON");
        assert!(f == folded, "{what}: one CPU: other folded stacks");
        eprintln!(
            "{what}: {} runs and one CPU agree ({chunks} chunks there)",
            runs + 1
        );
    }
}

/// Pins the calling thread to the first CPU it may run on.
fn pin_to_one_cpu() {
    let mut cpus = nix::sched::CpuSet::new();
    let cpu = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
        .ok()
        .and_then(|set| (0..nix::sched::CpuSet::count()).find(|&c| set.is_set(c).unwrap_or(false)))
        .unwrap_or(0);
    cpus.set(cpu).unwrap();
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &cpus).unwrap();
}

/// The FTF ptdec's pipeline writes for `dir` with `decode` and the CLI's
/// default emit options, and its slices, sorted.
fn ftf_bytes(
    dir: &Path,
    decode: DecodeOptions,
    name: &str,
) -> (Vec<u8>, Vec<String>, ptdec::decode::DecodeStats) {
    let out = dir.join(format!("{name}.ftf"));
    let report = common::run_pipeline(
        dir,
        &[],
        decode,
        ptdec::pipeline::StackOptions {
            interpolate: true,
            min_duration: None,
        },
        EmitOptions {
            axis_auto: true,
            record: true,
            ..EmitOptions::default()
        },
        Target::File(out.clone()),
    );
    assert!(report.missing.is_empty(), "{:?}", report.missing);
    let mut placed: Vec<String> = report
        .written
        .iter()
        .flat_map(|w| &w.slices)
        .map(|p| format!("{p:?}"))
        .collect();
    placed.sort_unstable();
    (std::fs::read(&out).unwrap(), placed, report.decode)
}

/// Overwrites the first `n` bytes of the first AUXTRACE payload of the
/// trace dir `dir` in place with `with(n)`: the perf.data around it is
/// untouched.
fn overwrite_aux_start(dir: &Path, n: usize, with: impl FnOnce(usize) -> Vec<u8>) {
    let chunk = {
        let trace = Trace::open(dir).unwrap();
        let c = &trace.buffers[0].chunks[0];
        assert!(c.len > 2 * n, "{} bytes of AUX data", c.len);
        c.file_offset
    };
    let path = dir.join("data");
    let mut data = std::fs::read(&path).unwrap();
    data[chunk..chunk + n].copy_from_slice(&with(n));
    std::fs::write(&path, data).unwrap();
}

/// A ptsim trace with 8 bytes of its AUX data overwritten at
/// pseudo-random places, for each of the first three choices (seeds)
/// that make the fast decoder give a chunk up (a corrupt TIP sends it to
/// bytes iced-x86 cannot decode) with decode errors besides: the ops and
/// the instructions are the same for chunks of 1 byte, 4 KiB, 64 KiB and
/// 8 MiB. The fast decoder decodes such a chunk again in parts, one from
/// each PSB, and libipt only the part it stopped in, so what libipt
/// decodes (it goes on at the next PSB after an error, where the fast
/// decoder synchronizes again at the error) does not follow the chunk
/// size.
#[test]
fn chunks_the_fast_decoder_gives_up_decode_alike_for_any_chunk_size() {
    let test = "chunks_the_fast_decoder_gives_up_decode_alike_for_any_chunk_size";
    let Some(c) = corruptible(test) else { return };
    let (dir, aux, aux_len) = (&c.dir, c.aux, c.aux_len);
    let decode_dir = |chunk: u64, chunk_ops: Option<usize>| decode_fast(dir, chunk, chunk_ops);
    let mut tried = Vec::new();
    for seed in 1..=60u64 {
        let mut data = c.clean.clone();
        let mut next = xorshift(seed);
        for _ in 0..8 {
            let x = next();
            data[aux + (x % aux_len as u64) as usize] = (x >> 24) as u8;
        }
        std::fs::write(dir.join("data"), &data).unwrap();
        let (want, whole) = decode_dir(8 << 20, None);
        let gave_up = whole.fallbacks.keys().any(|k| k.contains("iced-x86"));
        let errors: u64 = whole.errors.values().sum();
        if !gave_up || errors < 2 {
            continue;
        }
        // With 2,000 ops a chunk at most, every chunk is decoded again on
        // the calling thread (with a flush, and in parts where the fast
        // decoder gives it up).
        for (chunk, ops) in [
            (1, None),
            (4 << 10, None),
            (64 << 10, None),
            (64 << 10, Some(2000)),
        ] {
            let (got, st) = decode_dir(chunk, ops);
            eprintln!(
                "seed {seed}, chunks of {chunk}, ops bound {ops:?}: {} instructions, {} errors, \
                 fallbacks {:?}, {} chunks in pieces",
                st.insns,
                st.errors.values().sum::<u64>(),
                st.fallbacks,
                st.chunks_in_pieces
            );
            let what = format!("seed {seed}, chunks of {chunk}, ops bound {ops:?}");
            assert_eq!(st.insns, whole.insns, "{what}");
            assert_eq!(st.errors, whole.errors, "{what}");
            assert!(got.0 == want.0, "{what}: other ops than in one chunk");
            if ops.is_some() {
                assert!(st.chunks_in_pieces >= whole.bytes / (64 << 10), "{what}");
            }
        }
        tried.push(seed);
        if tried.len() == 3 {
            break;
        }
    }
    assert_eq!(
        tried.len(),
        3,
        "fewer than 3 of 60 corruptions made the fast decoder give a chunk up with errors besides"
    );
}

/// A ptsim trace of about 6 M ops whose PSBs after the first are
/// overwritten with zeros (PADs): one chunk as long as the trace, whose
/// decode worker holds at most `decode::MAX_CHUNK_OPS` of its ops and
/// gives it back; the calling thread decodes it again and hands its ops
/// on in pieces. Nothing holds more than that bound plus a stall's ops
/// and a flush's, and the ops are those of the same trace cut at one
/// byte (one chunk whatever the size).
#[test]
fn a_long_stretch_without_psb_is_held_within_the_chunk_bound() {
    let test = "a_long_stretch_without_psb_is_held_within_the_chunk_bound";
    let Some(progs) = programs(test) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("trace");
    simulate(&progs, "interp", &[], &["interp_run=1200"], None, &dir);
    let path = dir.join("data");
    let mut data = std::fs::read(&path).unwrap();
    let psb = [0x02u8, 0x82].repeat(8);
    let at: Vec<usize> = data
        .windows(16)
        .enumerate()
        .filter(|(_, w)| *w == &psb[..])
        .map(|(i, _)| i)
        .collect();
    assert!(at.len() > 100, "{} PSBs", at.len());
    for &i in &at[1..] {
        data[i..i + 16].fill(0);
    }
    std::fs::write(&path, &data).unwrap();
    let decode_dir = |chunk: u64| decode_fast(&dir, chunk, None);
    let (ops, st) = decode_dir(32 << 10);
    eprintln!(
        "{} ops in {} chunks, {} in pieces, at most {} held",
        st.ops, st.chunks, st.chunks_in_pieces, st.max_ops_held
    );
    assert!(st.ops > ptdec::decode::MAX_CHUNK_OPS as u64, "{st:?}");
    assert_eq!((st.chunks, st.chunks_in_pieces), (1, 1), "{st:?}");
    let bound =
        ptdec::decode::MAX_CHUNK_OPS + ptdec::decode::NO_PROGRESS_INSNS as usize + (1 << 16);
    assert!(st.max_ops_held as usize <= bound, "{st:?}");
    let (again, _) = decode_dir(1);
    assert!(ops.0 == again.0);
}

/// The ops the decode workers hold across chunks stay within the budget
/// (`DecodeOptions::ops_in_flight`, `decode::MAX_OPS_IN_FLIGHT`) whatever
/// the window lets them decode ahead. The output waits at its first op
/// until the workers have decoded every chunk (at most 2 s), so that 2
/// workers with a window of 64 chunks decode all 30 chunks of this trace
/// (about 20,000 ops each) ahead of it: more than 400,000 ops held
/// without a budget. With a budget of 50,000 they hold at most the
/// budget and a share each: no chunk but the next to deliver starts
/// while the chunks not delivered hold the budget, and each worker holds
/// at most its share (here the budget, the floor where a test sets it
/// below `decode::MIN_CHUNK_OPS`) of the chunk it decodes. With a budget
/// of 16,000 the share is less than the chunks make: they are decoded
/// again on the calling thread, in pieces. The ops are the same every
/// time.
#[test]
fn the_ops_held_across_workers_stay_within_the_budget() {
    let test = "the_ops_held_across_workers_stay_within_the_budget";
    let Some(progs) = programs(test) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("trace");
    simulate(&progs, "interp", &[], &["interp_run=100"], None, &dir);
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    /// Every op, the first after the workers decoded every chunk (or
    /// after 2 s: with a budget they stop before).
    struct Slow(AllOps, bool, Arc<AtomicBool>);
    impl ptdec::model::ops::OpSink for Slow {
        fn op(&mut self, pid: u32, tid: u32, op: ptdec::model::ops::Op) {
            if !std::mem::replace(&mut self.1, true) {
                let until = Instant::now() + Duration::from_secs(2);
                while !self.2.load(Ordering::Relaxed) && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            self.0.op(pid, tid, op);
        }
    }
    let run = |budget: Option<usize>| {
        let trace = Trace::open(&dir).unwrap();
        let all = Arc::new(AtomicBool::new(false));
        let mut sink = Slow(AllOps::default(), false, all.clone());
        let opts = DecodeOptions {
            chunking: ptdec::decode::Chunking::Bytes(4 << 10),
            jobs: 2,
            window: Some(64),
            decoder: ptdec::decode::DecoderKind::Fast,
            ops_in_flight: budget,
            progress: Some(ptdec::decode::ProgressCallback::new(move |done, total| {
                if done >= total {
                    all.store(true, Ordering::Relaxed);
                }
            })),
            ..DecodeOptions::default()
        };
        let stats = decode(&trace, &images(&dir), &opts, &mut sink).unwrap();
        eprintln!(
            "budget {budget:?}: {} ops in {} chunks, {} in pieces, at most {} held",
            stats.ops, stats.chunks, stats.chunks_in_pieces, stats.max_ops_held
        );
        (sink.0, stats)
    };
    let (want, free) = run(None);
    assert!(free.max_ops_held > 400_000, "{free:?}");
    let (got, st) = run(Some(50_000));
    assert!(got.0 == want.0, "other ops with a budget of 50,000");
    assert_eq!(st.chunks_in_pieces, 0, "{st:?}");
    assert!(st.max_ops_held <= 3 * 50_000, "{st:?}");
    let (got, st) = run(Some(16_000));
    assert!(got.0 == want.0, "other ops with a budget of 16,000");
    assert!(st.chunks_in_pieces > st.chunks / 2, "{st:?}");
    assert!(st.max_ops_held <= 3 * 16_000, "{st:?}");
}

/// A ptsim trace of the interpreter (`interp_run=100`) in a temporary
/// folder, for a test to corrupt: the trace's folder, where its AUX
/// payload lies in `data` (offset and length), and `data` as written.
struct Corruptible {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    aux: usize,
    aux_len: usize,
    clean: Vec<u8>,
}

/// [`Corruptible`], or `None` where the test programs cannot be built.
fn corruptible(test: &str) -> Option<Corruptible> {
    let progs = programs(test)?;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("trace");
    simulate(&progs, "interp", &[], &["interp_run=100"], None, &dir);
    let (aux, aux_len) = {
        let trace = Trace::open(&dir).unwrap();
        let c = &trace.buffers[0].chunks[0];
        (c.file_offset as usize, c.len as usize)
    };
    let clean = std::fs::read(dir.join("data")).unwrap();
    Some(Corruptible {
        _tmp: tmp,
        dir,
        aux,
        aux_len,
        clean,
    })
}

/// An opcode no decoder knows written right after the PSBEND of the
/// trace's second PSB+ (as a review did): libipt and ptflow meet it as
/// they read that PSB+, so a chunk that ends at that PSB stops at the
/// error with no PSB left, and the chunk that starts there cannot
/// synchronize at its PSB. The bytes up to the next PSB are skipped after
/// an error however the trace is cut; at small chunk sizes they were
/// counted as bytes before a first sync instead. Their number is the same
/// to within a PSB+: one decoder counts from the error (inside the PSB+
/// it could not read) to its offset after the next PSB+, the chunk from
/// its PSB to the next.
#[test]
fn bytes_after_an_unreadable_psb_plus_are_skipped_however_the_trace_is_cut() {
    let test = "bytes_after_an_unreadable_psb_plus_are_skipped_however_the_trace_is_cut";
    let Some(c) = corruptible(test) else { return };
    let aux = &c.clean[c.aux..c.aux + c.aux_len];
    let psb = [0x02, 0x82, 0x02, 0x82];
    let second = (1..aux.len() - 4)
        .find(|&i| aux[i..i + 4] == psb && aux[i - 1] != 0x82)
        .expect("a second PSB");
    let end = second
        + (second..aux.len() - 1)
            .position(|i| aux[i..i + 2] == [0x02, 0x23])
            .expect("its PSBEND");
    let mut data = c.clean.clone();
    data[c.aux + end + 2..c.aux + end + 4].copy_from_slice(&[0x02, 0x04]);
    std::fs::write(c.dir.join("data"), data).unwrap();
    let (whole_ops, whole) = decode_fast(&c.dir, 16 << 20, None);
    assert!(whole.skipped_bytes > 0, "{whole:?}");
    // A chunk at every PSB (one size: the test runs in debug in CI).
    let (ops, st) = decode_fast(&c.dir, 1, None);
    assert!(ops.0 == whole_ops.0, "other ops at a chunk per PSB");
    assert_eq!(st.unsynced_bytes, whole.unsynced_bytes);
    let d = st.skipped_bytes.abs_diff(whole.skipped_bytes);
    assert!(d < 64, "{st:?} against {whole:?}");
}

/// Pseudo-random numbers from `seed` (xorshift).
fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// The trace in `dir` decoded by the fast decoder on 2 workers, in
/// chunks of `chunk` bytes holding at most `chunk_ops` ops (`None`: the
/// default bound): every op, and the statistics.
fn decode_fast(dir: &Path, chunk: u64, chunk_ops: Option<usize>) -> (AllOps, DecodeStats) {
    let trace = Trace::open(dir).unwrap();
    let mut sink = AllOps::default();
    let opts = DecodeOptions {
        chunking: ptdec::decode::Chunking::Bytes(chunk),
        jobs: 2,
        decoder: ptdec::decode::DecoderKind::Fast,
        chunk_ops,
        ..DecodeOptions::default()
    };
    let stats = decode(&trace, &images(dir), &opts, &mut sink).unwrap();
    (sink, stats)
}

/// Random bytes (xorshift) with a PSB at the start of every KiB.
fn garbage_with_psbs(n: usize) -> Vec<u8> {
    let mut x = 0x5eed_u64;
    let mut g: Vec<u8> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    for at in (0..n - 16).step_by(1024) {
        for k in 0..8 {
            g[at + 2 * k..at + 2 * k + 2].copy_from_slice(&[0x02, 0x82]);
        }
    }
    g
}

/// A ptsim trace whose buffer's first 70 KiB were overwritten (in the
/// AUXTRACE payload of `data`) with random bytes carrying a PSB every KiB,
/// more than any per-chunk bound on failed syncs: the intact rest decodes
/// in full, with the same ops for chunks of 1 byte, 4 KiB, 256 KiB and 16
/// MiB, as the same trace with those bytes zeroed (no PSB: decoding starts
/// at the first intact PSB); every garbage PSB is counted once, and the
/// bytes skipped are those before the first intact PSB.
#[test]
fn a_corrupt_buffer_start_leaves_the_intact_rest_whole_for_any_chunk_size() {
    let test = "a_corrupt_buffer_start_leaves_the_intact_rest_whole_for_any_chunk_size";
    let Some(progs) = programs(test) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("trace");
    simulate(&progs, "interp", &[], &["interp_run=100"], None, &dir);
    const BAD: usize = 70 << 10;
    let (garbled, zeroed) = (tmp.path().join("garbled"), tmp.path().join("zeroed"));
    pt_tests::copy_tree(&dir, &garbled);
    pt_tests::copy_tree(&dir, &zeroed);
    overwrite_aux_start(&garbled, BAD, garbage_with_psbs);
    overwrite_aux_start(&zeroed, BAD, |n| vec![0; n]);
    let decode_dir = |dir: &Path, chunk: u64| {
        let trace = Trace::open(dir).unwrap();
        let mut sink = AllOps::default();
        let opts = DecodeOptions {
            chunking: ptdec::decode::Chunking::Bytes(chunk),
            jobs: 2,
            ..DecodeOptions::default()
        };
        let stats = decode(&trace, &images(dir), &opts, &mut sink).unwrap();
        (sink, stats)
    };
    let (want, reference) = decode_dir(&zeroed, 16 << 20);
    assert!(reference.errors.is_empty(), "{reference:?}");
    assert!(reference.insns > 1_000_000, "{reference:?}");
    assert!(reference.unsynced_bytes >= BAD as u64, "{reference:?}");
    for chunk in [1, 4 << 10, 256 << 10, 16 << 20] {
        let (got, st) = decode_dir(&garbled, chunk);
        eprintln!(
            "chunks of {chunk}: {} instructions, {} bytes not synced, {} bad PSBs",
            st.insns, st.unsynced_bytes, st.bad_psbs
        );
        assert_eq!(st.insns, reference.insns, "chunks of {chunk}: {st:?}");
        assert!(
            got.0 == want.0,
            "chunks of {chunk}: other ops than the intact part's"
        );
        assert_eq!(
            (st.unsynced_bytes, st.bad_psbs),
            (reference.unsynced_bytes, (BAD / 1024) as u64),
            "chunks of {chunk}"
        );
    }
}
