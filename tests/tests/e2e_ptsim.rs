//! Issue 4 end to end: real programs traced by ptsim, decoded by ptdec, and
//! checked three ways against ptsim's ground truth (`truth/TID.txt`,
//! `truth/summary.txt`) and perf's own Intel PT decoder.
//!
//! For each fixture program and trace configuration (default; `--per-cpu 2`;
//! `--noretcomp`; `--cyc`):
//!
//! 1. **Ops = truth = perf, exactly.** ptdec's decoding stage
//!    (`ptdec::decode::decode`) drives an [`OpSink`] that keeps each
//!    thread's `Op::Call` and `Op::Return` as (from, to) pairs. Per thread
//!    they must be the truth's `call` and `return` lines, in order, and the
//!    `call`/`return` branch samples of `perf script --itrace=cr`. No
//!    difference is allowed: ptsim traces every instruction from the first,
//!    so no call starts before the trace.
//! 2. **Instructions per thread** that ptdec decoded equal the truth's
//!    `insns` column of `summary.txt`, and perf reports no decode error.
//! 3. **The FTF** that the whole pipeline writes (`pipeline::run`, on the
//!    instruction axis, so a slice's start and end are instruction counts
//!    the truth also has) against the **stack oracle** (`common::oracle`):
//!    the true frame stack that ptsim's stack pointers give, independent
//!    of ptdec. Every call and signal handler is a call slice that starts
//!    right after the call (at the handler's first instruction), whose
//!    `addr` is the target and whose name is its symbol (`nm` of the static
//!    non-PIE programs; a stripped copy may say `FILE+0xOFFSET` instead),
//!    at **exactly** the oracle's depth (recomputed from the slices'
//!    intervals), ending at the return that ended it (a tail call hands
//!    the level on), at the instruction that unwound it (longjmp, a landing
//!    pad: by the next listed transfer), or at the exec. Every other call
//!    slice (tail calls) sits at the depth of the oracle frame it runs in.
//!    No depth offset is allowed. `NAME.stripped` and `NAME.minidebug` are
//!    the programs without symbols (`strip`), and stripped with
//!    MiniDebugInfo as Fedora ships them (fixtures/programs/build.sh).
//!    The Parquet dataset of the same decode (`--format parquet`) has the
//!    FTF's call slices as rows, and each row's level in its `parent_id`
//!    chain is the oracle's depth, checked the same way.
//! 4. The `fxt` Python reader parses every FTF file written here, event for
//!    event as our own reader does.
//! 5. Perfetto's own importer (`trace_processor_shell`) loads every FTF
//!    file written here, on the instruction axis and on the ns axis, with
//!    no import error or data loss, shows every event, names threads and
//!    processes as ptdec's summary does, and puts every call slice with a
//!    duration at the depth ptdec's stack gave it.
//!
//! The traces are made with ptsim's library (`ptsim::sim::run`) in this
//! process, two at a time (the machine has two cores; ptsim's engines use
//! `__WNOTHREAD`, so engines in one process never wait for each other's
//! children), with an empty environment, so the runs are small and
//! deterministic. perf and the fxt venv follow `pt_tests`' tool policy.

mod common;
use common::AllOps;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use ftf::read::{EventKind, RecordKind, Value};
use pt_tests::Branch;
use ptdec::decode::{decode, DecodeOptions, DecodeStats};
use ptdec::emit::{EmitOptions, Target, TimeAxis};
use ptdec::images::{ImageStore, SearchPath};
use ptdec::input::Trace;
use ptdec::model::ops::{Cycles, Op, OpSink};
use ptdec::pipeline::Report;
use ptdec::symbols::SymbolCache;
use ptsim::truth::{read_thread_file, TruthLine};

// ---- set-up ---------------------------------------------------------------

fn programs(test: &str) -> Option<PathBuf> {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-programs");
    pt_tests::fixture_programs(test, &out)
}

/// A trace configuration: its name and what it sets.
#[derive(Clone, Copy)]
struct Variant {
    name: &'static str,
    apply: fn(&mut ptsim::sim::Options),
}

const DEFAULT: Variant = Variant {
    name: "default",
    apply: |_| {},
};
// The variants other than the default put a PSB every 2 KiB (perf's
// psb_period=0), so ptdec's chunks (one per PSB in `decode_ops`) meet
// compressed returns, per-cpu switches and CYC timing at their edges.
const PER_CPU_2: Variant = Variant {
    name: "--per-cpu 2 --psb-period 0",
    apply: |o| {
        o.per_cpu = Some(2);
        o.pt.psb_period = 0;
    },
};
const NORETCOMP: Variant = Variant {
    name: "--noretcomp --psb-period 0",
    apply: |o| {
        o.pt.noretcomp = true;
        o.pt.psb_period = 0;
    },
};
// The CBR changes (2.4 GHz, then 800 MHz, then 3 GHz) while the
// simulated clock does not: libipt's calibration from MTC and CYC then
// differs from the CBR's, so a chunk that starts without the calibration
// before its PSB gets other times than one decoder running through.
const CYC: Variant = Variant {
    name: "--cyc --psb-period 0 --cbr 24,3000=8,9000=30",
    apply: |o| {
        o.pt.cyc = true;
        o.pt.psb_period = 0;
        o.pt.cbr = Some(ptsim::pt::CbrSchedule {
            start: 24,
            changes: vec![(3000, 8), (9000, 30)],
        });
    },
};

// CYC without MTC: each chunk warms up from the PSB before it.
const CYC_NO_MTC: Variant = Variant {
    name: "--cyc --psb-period 0 --no-mtc",
    apply: |o| {
        o.pt.cyc = true;
        o.pt.psb_period = 0;
        o.pt.mtc = false;
    },
};

/// Runs ptsim on `prog` (empty environment; forkexec follows its child)
/// into `tmp/trace`.
fn simulate(progs: &Path, prog: &str, v: Variant) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("trace");
    // `wrapper`: a Debian program (stripped, dynamic) that execs ours, as
    // `env`, `nice` and version-manager shims do.
    let mut o = if prog == "wrapper" {
        let target = progs.join("longjmp").into_os_string();
        ptsim::sim::Options::new(PathBuf::from("/usr/bin/env"), vec![target], &dir)
    } else {
        ptsim::sim::Options::new(progs.join(prog), Vec::new(), &dir)
    };
    o.env = Some(Vec::new());
    o.follow_children = prog.starts_with("forkexec");
    (v.apply)(&mut o);
    let r = ptsim::sim::run(o).unwrap_or_else(|e| panic!("ptsim {prog} {}: {e}", v.name));
    assert!(
        matches!(r.outcome.exit, Some(ptsim::engine::Exit::Code(0))),
        "{prog} {}: {:?}",
        v.name,
        r.outcome.exit
    );
    (tmp, dir)
}

/// Runs `f` on each item, two at a time.
fn parallel<T: Sync>(items: &[T], f: impl Fn(&T) + Sync) {
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(item) = items.get(i) else { break };
                f(item);
            });
        }
    });
}

// ---- the truth --------------------------------------------------------------

/// Each thread's truth lines.
fn truth(dir: &Path) -> BTreeMap<u32, Vec<TruthLine>> {
    let mut m = BTreeMap::new();
    for e in std::fs::read_dir(dir.join("truth")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(tid) = name
            .strip_suffix(".txt")
            .and_then(|n| n.parse::<u32>().ok())
        {
            m.insert(tid, read_thread_file(&e.path()).unwrap());
        }
    }
    m
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

fn branches_of_truth(lines: &[TruthLine]) -> Vec<Branch> {
    lines
        .iter()
        .filter(|l| l.kind == "call" || l.kind == "return")
        .map(|l| Branch {
            call: l.kind == "call",
            from: l.from,
            to: l.to,
        })
        .collect()
}

// ---- ptdec ------------------------------------------------------------------

/// The calls and returns of each thread, as ptdec's decoding stage emits them.
#[derive(Default)]
struct Branches(BTreeMap<u32, Vec<Branch>>);

impl OpSink for Branches {
    fn op(&mut self, _pid: u32, tid: u32, op: Op) {
        let b = match op {
            Op::Call { from, to, .. } => Branch {
                call: true,
                from,
                to,
            },
            Op::Return { from, to, .. } => Branch {
                call: false,
                from,
                to,
            },
            _ => return,
        };
        self.0.entry(tid).or_default().push(b);
    }
}

/// Binaries at their recorded paths on this machine, vDSO from the trace
/// dir; never perf's ~/.debug.
fn images(dir: &Path) -> ImageStore {
    ImageStore::new(SearchPath {
        buildid_dir: None,
        ..SearchPath::for_trace(dir)
    })
}

/// Decodes `dir` with default chunks and again cut at every PSB (a chunk
/// per PSB, two workers, a window of three chunks): the ops must be the
/// same, stamps and all, as from one decoder running through the PSBs.
/// With CYC (`cycle_accurate`) the cycle counts too: the chunk decoder
/// warms libipt's calibration up from a PSB before its own, and a chunk
/// counts cycles up to the next chunk's PSB+, the next one from there.
fn decode_ops(dir: &Path, frequent_psbs: bool, cycle_accurate: bool) -> (Branches, DecodeStats) {
    let trace = Trace::open(dir).unwrap();
    let mut all = AllOps::default();
    let stats = decode(&trace, &images(dir), &DecodeOptions::default(), &mut all).unwrap();
    let reports = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let r2 = reports.clone();
    let tiny = DecodeOptions {
        chunking: ptdec::decode::Chunking::Bytes(1),
        jobs: 2,
        window: Some(3),
        progress: Some(ptdec::decode::ProgressCallback::new(move |done, total| {
            r2.lock().unwrap().push((done, total))
        })),
        ..DecodeOptions::default()
    };
    let mut chunked = AllOps::default();
    let stats2 = decode(&trace, &images(dir), &tiny, &mut chunked).unwrap();
    // Memory: the ops held at once (reorder buffer and per-cpu runs) stay
    // within the window of 3 chunks (plus the one being handed over and
    // the per-cpu runs waiting for the watermark), far below the trace's.
    if stats2.chunks >= 20 {
        assert!(
            stats2.max_ops_held <= 5 * stats2.max_chunk_ops && stats2.max_ops_held * 4 < stats2.ops,
            "{}: held {} ops at once, chunks of up to {}, {} in all",
            dir.display(),
            stats2.max_ops_held,
            stats2.max_chunk_ops,
            stats2.ops
        );
    }
    // Progress: a report per chunk, rising to the total.
    let reports = reports.lock().unwrap();
    assert_eq!(reports.len() as u64, stats2.chunks);
    assert!(reports.windows(2).all(|w| w[0].0 < w[1].0), "{reports:?}");
    assert_eq!(reports.last().map(|r| r.0), Some(stats2.bytes));
    // With a PSB every 2 KiB, more than 8 KiB of trace is several chunks.
    assert!(
        !frequent_psbs || stats.bytes < 8192 || stats2.chunks > 2,
        "{}: {} chunks at every PSB of {} bytes",
        dir.display(),
        stats2.chunks,
        stats.bytes
    );
    // With CYC the stamps hold cycles, compared with the rest.
    let counted = all
        .0
        .values()
        .flatten()
        .any(|op| op.stamp().cycles != Cycles::NONE);
    assert_eq!(counted, cycle_accurate, "{}: cycles", dir.display());
    for (k, ops) in &all.0 {
        let got = chunked.0.get(k).map_or(&[][..], Vec::as_slice);
        if got != ops.as_slice() {
            let i = got.iter().zip(ops).position(|(a, b)| a != b);
            panic!(
                "{} thread {k:?}: ops cut at every PSB differ at {i:?} of {}/{}: got {:?}, want {:?}",
                dir.display(),
                got.len(),
                ops.len(),
                i.map(|i| &got[i.saturating_sub(2)..(i + 3).min(got.len())]),
                i.map(|i| &ops[i.saturating_sub(2)..(i + 3).min(ops.len())]),
            );
        }
    }
    assert_eq!(chunked.0.len(), all.0.len(), "{}: threads", dir.display());
    let mut sink = Branches::default();
    for ((pid, tid), ops) in all.0 {
        for op in ops {
            sink.op(pid, tid, op);
        }
    }
    (sink, stats)
}

fn decode_ftf(dir: &Path, out: &Path) -> Report {
    decode_ftf_on(dir, out, TimeAxis::Instructions)
}

fn decode_ftf_on(dir: &Path, out: &Path, axis: TimeAxis) -> Report {
    let emit = EmitOptions {
        axis,
        record: true,
        ..EmitOptions::default()
    };
    ftf_with(dir, out, DecodeOptions::default(), emit)
}

/// Trace dir `dir` decoded with `decode` into FTF file `out` as `emit`
/// says.
fn ftf_with(dir: &Path, out: &Path, decode: DecodeOptions, emit: EmitOptions) -> Report {
    let trace = Trace::open(dir).unwrap();
    let images = images(dir);
    let symbols = SymbolCache::for_search(images.search());
    let input = ptdec::pipeline::Input::Trace {
        trace: &trace,
        images: &images,
        symbols: &symbols,
    };
    let target = Target::File(out.to_path_buf());
    common::ftf_run(input, decode, Default::default(), emit, target).unwrap()
}

/// A call slice of the FTF, with its depth recomputed from the intervals.
#[derive(Debug, Clone)]
struct FtfSlice {
    name: String,
    addr: u64,
    start: u64,
    end: u64,
    depth: i32,
}

/// The call slices of each thread (tid), nested by their intervals.
fn ftf_slices(bytes: &[u8]) -> BTreeMap<u32, Vec<FtfSlice>> {
    let mut by_tid: BTreeMap<u32, Vec<FtfSlice>> = BTreeMap::new();
    for r in ftf::read::parse(bytes).unwrap() {
        let RecordKind::Event(e) = r.kind else {
            continue;
        };
        let EventKind::DurationComplete { end } = e.kind else {
            continue;
        };
        if e.category != "call" {
            continue;
        }
        let addr = e.args.iter().find(|a| a.name == "addr").map(|a| &a.value);
        let Some(Value::Pointer(addr)) = addr else {
            panic!("call slice without addr: {e:?}");
        };
        by_tid
            .entry(e.thread.tid as u32)
            .or_default()
            .push(FtfSlice {
                name: e.name,
                addr: *addr,
                start: e.ts,
                end,
                depth: 0,
            });
    }
    for v in by_tid.values_mut() {
        v.sort_by_key(|s| (s.start, std::cmp::Reverse(s.end)));
        let mut open: Vec<(u64, u64)> = Vec::new();
        for s in v.iter_mut() {
            while open
                .last()
                .is_some_and(|&(os, oe)| !(os <= s.start && s.end <= oe))
            {
                open.pop();
            }
            s.depth = open.len() as i32;
            open.push((s.start, s.end));
        }
    }
    by_tid
}

/// `nm -C` of a static non-PIE program: address -> every name there.
fn symbols_of(prog: &Path) -> HashMap<u64, Vec<String>> {
    let out = Command::new("nm")
        .arg("-C")
        .arg(prog)
        .output()
        .expect("run nm");
    let mut m: HashMap<u64, Vec<String>> = HashMap::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = l.splitn(3, ' ').collect();
        if let [a, t, n] = f[..] {
            if matches!(t, "T" | "t" | "W" | "w" | "i") {
                if let Ok(a) = u64::from_str_radix(a, 16) {
                    m.entry(a).or_default().push(n.to_string());
                }
            }
        }
    }
    m
}

// ---- fxt ----------------------------------------------------------------

const FXT_COUNT: &str = r#"
import sys
from collections import Counter
from fxt.reader import parse_records
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        result = parse_records(f)
    if result.had_unexpected_eof:
        print("unexpected EOF in", path, result.eof_error, file=sys.stderr)
        sys.exit(2)
    c = Counter()
    for provider in result.records_by_provider.values():
        for r in provider.records:
            if hasattr(r, "thread"):
                c[(type(r).__name__, r.thread.thread_id, r.name)] += 1
    for (kind, tid, name), n in sorted(c.items()):
        print(f"{kind} {tid} {name} {n}")
"#;

/// The same counts from our reader.
fn our_counts(bytes: &[u8]) -> String {
    let mut c: BTreeMap<(String, u64, String), u64> = BTreeMap::new();
    for r in ftf::read::parse(bytes).unwrap() {
        if let RecordKind::Event(e) = r.kind {
            let kind = match e.kind {
                EventKind::Instant => "InstantEventRecord",
                EventKind::DurationComplete { .. } => "DurationCompleteEventRecord",
                EventKind::Counter { .. } => "CounterEventRecord",
                other => panic!("ptdec never writes {other:?}"),
            };
            *c.entry((kind.into(), e.thread.tid, e.name)).or_default() += 1;
        }
    }
    c.iter()
        .map(|((k, t, n), v)| format!("{k} {t} {n} {v}\n"))
        .collect()
}

/// The fxt reader finds in `file` the events our reader finds.
fn fxt_agrees(python: &Path, file: &Path) {
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("count.py");
    std::fs::write(&script, FXT_COUNT).unwrap();
    let out = Command::new(python)
        .arg(&script)
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fxt on {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        theirs,
        our_counts(&std::fs::read(file).unwrap()),
        "{}",
        file.display()
    );
}

// ---- one program ------------------------------------------------------------

/// Traces `prog`, decodes it, checks everything; prints one result line.
fn check(test: &str, progs: &Path, prog: &str, v: Variant) {
    let what = format!("{prog} ({})", v.name);
    let (_tmp, dir) = simulate(progs, prog, v);
    let truth = truth(&dir);
    let insns = truth_insns(&dir);

    // 1 and 2: ops, instructions, perf.
    let (ops, stats) = decode_ops(
        &dir,
        v.name.contains("--psb-period 0"),
        v.name.contains("--cyc"),
    );
    assert!(
        stats.errors.is_empty(),
        "{what}: decode errors {:?}",
        stats.errors
    );
    let mut got_insns: BTreeMap<u32, u64> = BTreeMap::new();
    for ((_, tid), t) in &stats.threads {
        *got_insns.entry(*tid).or_default() += t.insns;
    }
    let want_insns: BTreeMap<u32, u64> = insns.iter().map(|(t, n)| (*t, *n)).collect();
    assert_eq!(got_insns, want_insns, "{what}: instructions per thread");
    let perf = pt_tests::perf(test).map(|perf| {
        let home = tempfile::tempdir().unwrap();
        pt_tests::perf_branches(&perf, &dir, home.path())
    });
    if let Some(p) = &perf {
        assert!(p.errors.is_empty(), "{what}: perf: {:?}", p.errors);
    }
    let (mut calls, mut returns) = (0, 0);
    for (tid, lines) in &truth {
        let want = branches_of_truth(lines);
        let empty = Vec::new();
        let sides = [
            ("ptdec", ops.0.get(tid)),
            (
                "perf",
                perf.as_ref().map(|p| p.threads.get(tid).unwrap_or(&empty)),
            ),
        ];
        for (side, got) in sides {
            let Some(got) = got.or((side == "ptdec").then_some(&empty)) else {
                continue;
            };
            if let Some(i) = (0..want.len().max(got.len())).find(|&i| got.get(i) != want.get(i)) {
                let show = |v: &[Branch]| {
                    v[i.saturating_sub(3)..(i + 3).min(v.len())]
                        .iter()
                        .map(|b| format!("    {b}"))
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                panic!(
                    "{what}: tid {tid}: {side} and the truth differ at call/return #{i} ({side} {} vs truth {}):\n  {side}:\n{}\n  truth:\n{}",
                    got.len(),
                    want.len(),
                    show(got),
                    show(&want)
                );
            }
        }
        calls += want.iter().filter(|b| b.call).count();
        returns += want.iter().filter(|b| !b.call).count();
    }
    if let Some(p) = &perf {
        let extra: Vec<_> = p
            .threads
            .keys()
            .filter(|t| !truth.contains_key(t))
            .collect();
        assert!(extra.is_empty(), "{what}: perf shows threads {extra:?}");
    }

    // 3: the FTF.
    let ftf = dir.join("out.ftf");
    let report = decode_ftf(&dir, &ftf);
    assert!(report.missing.is_empty(), "{what}: {:?}", report.missing);
    let slices = ftf_slices(&std::fs::read(&ftf).unwrap());
    let base = prog.split('.').next().unwrap_or(prog);
    let static_nopie = !matches!(
        base,
        "exception" | "exception_O0" | "panic" | "dlopen" | "wrapper" | "vdso" | "plt" | "forkexec"
    );
    let names = static_nopie.then(|| symbols_of(&progs.join(base)));
    // A stripped copy names what no symbol covers `FILE+0xOFFSET`; with
    // MiniDebugInfo, as the program with symbols does.
    let stripped = prog.ends_with(".stripped").then(|| format!("{prog}+0x"));
    let name_ok = |addr: u64, name: &str| {
        let Some(names) = &names else { return true };
        match names.get(&addr) {
            Some(n) if n.iter().any(|n| n == name) => true,
            Some(_) => stripped
                .as_ref()
                .is_some_and(|p| name.starts_with(p.as_str())),
            None => true,
        }
    };
    let oslices = slices
        .iter()
        .map(|(tid, v)| {
            let v = v
                .iter()
                .map(|s| common::oracle::Slice {
                    name: s.name.clone(),
                    addr: s.addr,
                    start: s.start,
                    end: s.end,
                    depth: s.depth,
                })
                .collect();
            (*tid, v)
        })
        .collect();
    let oracle = common::oracle::check_all(&truth, &oslices, &name_ok);
    assert!(
        oracle.mismatches.is_empty(),
        "{what}: {} differences from the stack oracle ({} frames, {} slices; max depth {} oracle, {} ptdec):\n{}",
        oracle.mismatches.len(),
        oracle.frames,
        oracle.slices,
        oracle.max_depth_oracle,
        oracle.max_depth_ptdec,
        oracle.mismatches[..oracle.mismatches.len().min(12)].join("\n")
    );
    let checked = oracle.frames;

    // 3b: the Parquet dataset of the same decode: its call rows are the
    // FTF's call slices (instruction counts and names), and each row's
    // level in its `parent_id` chain is the oracle's depth, frame for
    // frame (the chain, not the FTF's intervals, says who called whom).
    let root = dir.with_file_name("dataset");
    common::dataset::write(&dir, &root, "t", DecodeOptions::default());
    let rows = common::dataset::calls(&root, "t");
    let levels = common::dataset::levels(&rows);
    let mut pslices: BTreeMap<u32, Vec<common::oracle::Slice>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.is_call()) {
        pslices
            .entry(r.tid as u32)
            .or_default()
            .push(common::oracle::Slice {
                name: r.function.clone(),
                addr: r.addr as u64,
                start: r.start_insn as u64,
                end: (r.start_insn + r.insns) as u64,
                depth: levels[&r.call_id],
            });
    }
    let key = |v: &[common::oracle::Slice]| {
        let mut k: Vec<(u64, u64, String, i32)> = v
            .iter()
            .map(|s| (s.start, s.end, s.name.clone(), s.depth))
            .collect();
        k.sort();
        k
    };
    for (tid, v) in &oslices {
        let got = pslices.get(tid).map_or_else(Vec::new, |p| key(p));
        assert_eq!(
            got,
            key(v),
            "{what}: tid {tid}: the dataset's calls vs the FTF's"
        );
    }
    let by_parents = common::oracle::check_all(&truth, &pslices, &name_ok);
    assert!(
        by_parents.mismatches.is_empty(),
        "{what}: the dataset's parent chains differ from the stack oracle in {} places:\n{}",
        by_parents.mismatches.len(),
        by_parents.mismatches[..by_parents.mismatches.len().min(12)].join("\n")
    );
    assert_eq!(
        by_parents.frames, checked,
        "{what}: frames checked via parents"
    );
    assert_eq!(
        (
            report.stack.unmatched_unwinds,
            report.stack.unmatched_frames
        ),
        (0, 0),
        "{what}: every unwind lands in code with symbols or unwind tables"
    );
    if base == "wrapper" || base == "forkexec" {
        assert_eq!(report.stack.execs, 1, "{what}: one exec");
    }

    // 4: fxt.
    if let Some(python) = pt_tests::python_with_fxt(test) {
        fxt_agrees(&python, &ftf);
    }
    // 5: Perfetto, on the instruction axis and on the default ns axis.
    common::perfetto_agrees_with_report(&format!("{test}: {what}"), &report);
    let ns = decode_ftf_on(&dir, &dir.join("ns.ftf"), TimeAxis::Ns);
    common::perfetto_agrees_with_report(&format!("{test}: {what} (ns)"), &ns);
    let total: u64 = insns.values().sum();
    eprintln!(
        "{prog:<10} {:<12} threads {:>2}  insns {total:>6} = truth = ptdec  calls {calls:>4} returns {returns:>4} = truth = ptdec{}  oracle frames {checked} (FTF and dataset parents), other slices {}, max depth {} = oracle",
        v.name,
        truth.len(),
        if perf.is_some() { " = perf" } else { "" },
        oracle.slices,
        oracle.max_depth_ptdec,
    );
}

fn check_all(test: &str, list: &[&str], v: Variant) {
    let Some(progs) = programs(test) else { return };
    let list: Vec<&str> = list
        .iter()
        .copied()
        .filter(|p| match *p {
            "wrapper" => Path::new("/usr/bin/env").exists(),
            p => progs.join(p).exists(),
        })
        .collect();
    parallel(&list, |p| check(test, &progs, p, v));
}

// ---- tests ----------------------------------------------------------------

/// Nested and recursive calls, tail calls, indirect calls, longjmp, C++
/// exceptions, signals (raise, a fault, a timer), threads, fork+exec, the
/// vDSO, lazy PLT binding, Rust trait objects.
#[test]
fn every_program_decodes_as_the_truth_and_perf_say() {
    check_all(
        "every_program_decodes_as_the_truth_and_perf_say",
        &[
            "plt",
            "vdso",
            "exception",
            "tiny",
            "recursion",
            "tailcall",
            "indirect",
            "longjmp",
            "signals",
            "threads",
            "forkexec",
            "rust_calls",
        ],
        DEFAULT,
    );
}

/// Issue 43's corpus: the programs users run, checked by the stack oracle
/// (and perf) exactly as those above: without symbols (`strip`), stripped
/// with MiniDebugInfo, C++ exceptions at -O0 and -O2, Rust panics caught by
/// `catch_unwind`, `dlopen`/`dlclose` twice, a Debian program (`env`) that
/// execs ours, fork+exec followed into the child.
#[test]
fn stripped_and_wrapped_programs_have_the_oracles_stacks() {
    check_all(
        "stripped_and_wrapped_programs_have_the_oracles_stacks",
        &[
            "wrapper",
            "longjmp.stripped",
            "longjmp.minidebug",
            "signals.stripped",
            "signals.minidebug",
            "exception.stripped",
            "exception.minidebug",
            "exception_O0",
            "exception_O0.stripped",
            "tailcall.stripped",
            "forkexec.stripped",
            "panic",
            "panic.stripped",
            "panic.minidebug",
            "dlopen",
        ],
        DEFAULT,
    );
}

/// Per-cpu buffers: threads migrate and are switched out in user mode.
#[test]
fn per_cpu_buffers_decode_as_the_truth_says() {
    check_all(
        "per_cpu_buffers_decode_as_the_truth_says",
        &[
            "threads",
            "forkexec",
            "signals",
            "wrapper",
            "forkexec.stripped",
        ],
        PER_CPU_2,
    );
}

/// Every return a TIP: the stack must match returns by their target alone.
#[test]
fn uncompressed_returns_decode_as_the_truth_says() {
    check_all(
        "uncompressed_returns_decode_as_the_truth_says",
        &["longjmp", "signals", "recursion", "tailcall"],
        NORETCOMP,
    );
}

/// CYC packets: cycle-accurate timing must not change the flow.
#[test]
fn cycle_accurate_traces_decode_as_the_truth_says() {
    check_all(
        "cycle_accurate_traces_decode_as_the_truth_says",
        &["threads", "vdso", "indirect"],
        CYC,
    );
}

/// A hostile CYC trace: a real program's PSB+ copied over its last PSB
/// interval, at packets spread over it (the hostile-input probe's
/// mutations). Decoded in chunks of one PSB and
/// whole, with either flow decoder: the same ops. With CYC each chunk's
/// decoder warms up from a PSB before the chunk and carries its state
/// over the copied PSB+ as one decoder running through does, so it meets
/// the error after that PSB+ too; the chunk before, walking to the copy's
/// IP, asked a decoder synchronized afresh there, which does not, and
/// made the gap as well: two gaps, and other stacks after them, at one-PSB
/// chunks, one whole (16 of 40 such placements differed by the FTF they
/// gave). A PSB+ copied from later in the trace (its TSC in the future)
/// still gives other cycle counts near the trace's end at one-PSB chunks,
/// and is not tested here (docs/decoding.md).
#[test]
fn a_psb_plus_copied_into_a_cyc_trace_decodes_alike_however_cut() {
    let test = "a_psb_plus_copied_into_a_cyc_trace_decodes_alike_however_cut";
    let Some(progs) = programs(test) else { return };
    let (tmp, dir) = simulate(&progs, "interp", CYC_NO_MTC);
    let parsed = aux_packets(&dir);
    let (_, _, aux, packets) = &parsed;
    let psbs = psbs_of(aux, packets);
    assert!(psbs.len() >= 3, "PSBs at {psbs:?}");
    // An earlier PSB+ (its TSC in the past), over the last PSB interval.
    let src = psbs[psbs.len() / 2];
    let copy = &aux[src..psb_plus_end(packets, src)];
    let last = psbs[psbs.len() - 1];
    let from = psb_plus_end(packets, psbs[psbs.len() - 2]);
    let spots: Vec<usize> = packets
        .iter()
        .map(|(o, _)| *o)
        .filter(|&o| o >= from && o + copy.len() < last)
        .collect();
    assert!(spots.len() >= 20, "{} packets to copy over", spots.len());
    let picked: Vec<usize> = (0..20).map(|i| spots[i * spots.len() / 20]).collect();
    let errors = copies_decode_alike(tmp.path(), (&dir, &parsed), copy, &picked);
    // Not a test of sound traces: the copies make errors.
    assert!(errors >= 20, "too few decode errors");
}

/// As [`a_psb_plus_copied_into_a_cyc_trace_decodes_alike_however_cut`],
/// with MTCs far apart (`--mtc-period 11`: fewer MTCs than PSBs), the
/// first PSB+ copied over spots of every later PSB interval. A chunk's
/// warm-up starts at the last PSB before it whose stretch holds two MTCs,
/// or the last PSB where it holds none: here a chunk with no MTC before it
/// warms up from the PSB before it, and the next, with one MTC between,
/// from further back, before this chunk's bytes. The next chunk's decoder
/// then could not be run from this chunk's bytes, and a decoder
/// synchronized afresh answered again (a copy in the interval after
/// such a chunk made the gap twice); each chunk job now reads from the
/// earlier of the two warm-ups (`ChunkMeta::lead`). Copies that end
/// within 16 bytes of the next PSB are left out: one there is read as a
/// bad status update, twice in one decoder and once at one-PSB chunks
/// (open, docs/decoding.md).
#[test]
fn a_psb_plus_copied_into_a_trace_with_few_mtcs_decodes_alike_however_cut() {
    let test = "a_psb_plus_copied_into_a_trace_with_few_mtcs_decodes_alike_however_cut";
    let Some(progs) = programs(test) else { return };
    let v = Variant {
        name: "--cyc --psb-period 0 --mtc-period 11",
        apply: |o| {
            o.pt.cyc = true;
            o.pt.psb_period = 0;
            o.pt.mtc_period = 11;
        },
    };
    let (tmp, dir) = simulate(&progs, "interp", v);
    let parsed = aux_packets(&dir);
    let (_, _, aux, packets) = &parsed;
    let psbs = psbs_of(aux, packets);
    assert!(psbs.len() >= 8, "PSBs at {psbs:?}");
    let copy = &aux[psbs[0]..psb_plus_end(packets, psbs[0])];
    let mut picked = Vec::new();
    for w in psbs.windows(2).skip(1) {
        let from = psb_plus_end(packets, w[0]);
        let spots: Vec<usize> = packets
            .iter()
            .map(|(o, _)| *o)
            .filter(|&o| o >= from && o + copy.len() < w[1])
            .collect();
        let step = (spots.len() / 3).max(1);
        picked.extend(
            spots
                .iter()
                .step_by(step)
                .filter(|&&o| o + copy.len() + 16 <= w[1]),
        );
    }
    let errors = copies_decode_alike(tmp.path(), (&dir, &parsed), copy, &picked);
    assert!(errors >= picked.len() as u64, "too few decode errors");
}

/// A CYC trace (ptsim `interp`) with one PSB+'s FUP corrupted, for each
/// of its PSBs after the first in turn: bits 40-47 of the IP set, so that
/// the PSB+ says the flow is at code without an image. One decoder
/// running through reads that PSB+ as a status update its state does not
/// match, makes a gap, and goes on from where it recovers (the next
/// PSB). The chunk that starts at that PSB warms up from the PSB before
/// and then waits for its first IP, the corrupt one: it made the same
/// gap, and then dropped everything it decoded after it, waiting for an
/// IP the flow never gets to. A fifth of a real program's trace was gone
/// at chunks of 32K, with the same gaps and errors as whole (a
/// hostile-input probe's mutant). Decoded whole and in chunks of one
/// PSB, with either flow decoder: the same FTF.
#[test]
fn a_corrupt_ip_in_a_psb_plus_of_a_cyc_trace_decodes_alike_however_cut() {
    let test = "a_corrupt_ip_in_a_psb_plus_of_a_cyc_trace_decodes_alike_however_cut";
    let Some(progs) = programs(test) else { return };
    let (tmp, dir) = simulate(&progs, "interp", CYC_NO_MTC);
    let parsed = aux_packets(&dir);
    let (_, _, aux, packets) = &parsed;
    let psbs = psbs_of(aux, packets);
    assert!(psbs.len() >= 3, "PSBs at {psbs:?}");
    // The byte for bits 40-47 of each later PSB+'s FUP with a 6- or
    // 8-byte IP.
    let spots: Vec<usize> = psbs[1..]
        .iter()
        .filter_map(|&p| {
            let end = psb_plus_end(packets, p);
            packets
                .iter()
                .find(|(o, k)| (p..end).contains(o) && matches!(k, ptflow::packet::Packet::Fup(..)))
                .map(|(o, _)| *o)
                .filter(|&o| matches!(aux[o] >> 5, 3 | 6))
                .map(|o| o + 6)
        })
        .collect();
    assert!(spots.len() >= 3, "{} PSB+s with a FUP", spots.len());
    let errors = copies_decode_alike(tmp.path(), (&dir, &parsed), &[0xa1], &spots);
    assert!(errors >= spots.len() as u64, "too few decode errors");
}

/// A CYC trace with overflows (ptsim `interp`, as a hostile-input probe
/// made it) whose PSB+ MODE.Exec says 16-bit code where the code is
/// 64-bit (one byte changed): libipt decodes that PSB interval as 16-bit
/// code, and its block cache, the worker's, keeps those blocks and gives
/// them back in 16-bit mode to the 64-bit decode of a later chunk (or
/// the other way round). Which chunks a worker decoded before depended on
/// how the two workers shared them: `-j2` gave another output from one
/// run to the next (4 of 12 runs of the probe's mutant, the fast decoder
/// at 4K chunks). Now a chunk decoded after code was decoded in two
/// modes with the worker's caches, or handed a cached block in another
/// mode than its decoder's, is decoded again with fresh ones
/// (`WorkerImages::modes_mixed`): at each of six places, `-j2`, run four
/// times, gives `-j1`'s FTF each time, with either flow decoder.
#[test]
fn a_psb_plus_that_says_16_bit_code_decodes_alike_on_any_worker() {
    let test = "a_psb_plus_that_says_16_bit_code_decodes_alike_on_any_worker";
    let Some(progs) = programs(test) else { return };
    let v = Variant {
        name: "--cyc --psb-period 0 --overflow-every 3000 --overflow-lost 40",
        apply: |o| {
            o.pt.cyc = true;
            o.pt.psb_period = 0;
            o.pt.overflow_every = Some(3000);
            o.pt.overflow_lost_insns = 40;
        },
    };
    let (_tmp, dir) = simulate(&progs, "interp", v);
    let (data, base, aux, packets) = aux_packets(&dir);
    let psbs = psbs_of(&aux, &packets);
    assert!(psbs.len() >= 8, "PSBs at {psbs:?}");
    // Where each PSB+'s MODE.Exec payload is in the file.
    let modes: Vec<Option<usize>> = psbs
        .iter()
        .map(|&p| {
            let end = psb_plus_end(&packets, p);
            packets
                .iter()
                .find(|(o, k)| {
                    (p..end).contains(o) && matches!(k, ptflow::packet::Packet::ModeExec { .. })
                })
                .map(|&(o, _)| base + o + 1)
        })
        .collect();
    // Two PSB+s in a row made to say 16-bit code (payload 0), at six
    // places spread over the trace, in turn: which chunks meet the cache
    // filled in the other mode depends on where (a review found one
    // place where no run differed, and others where 1 to 3 of 8 did).
    let mut mutants = 0;
    for k in 0..6 {
        let at = 1 + k * (psbs.len() - 3) / 6;
        let mut bytes = data.clone();
        for m in modes[at..at + 2].iter().flatten() {
            bytes[*m] &= !3;
        }
        if bytes == data {
            continue;
        }
        mutants += 1;
        std::fs::write(dir.join("data"), &bytes).unwrap();
        for decoder in [
            ptdec::decode::DecoderKind::Fast,
            ptdec::decode::DecoderKind::Libipt,
        ] {
            let decode = |jobs: usize| {
                let opts = DecodeOptions {
                    jobs,
                    decoder,
                    chunking: ptdec::decode::Chunking::Bytes(4096),
                    ..DecodeOptions::default()
                };
                let out = dir.join(format!("{decoder:?}-j{jobs}.ftf"));
                ftf_with(&dir, &out, opts, EmitOptions::default());
                std::fs::read(out).unwrap()
            };
            let one = decode(1);
            for run in 0..4 {
                assert!(
                    decode(2) == one,
                    "PSB+s {at} and {}, {decoder:?}, run {run}: -j2 differs from -j1",
                    at + 1
                );
            }
        }
    }
    assert!(mutants >= 4, "{mutants} places with a MODE.Exec");
}

/// Trace dir `dir`'s PT (`parsed`, its [`aux_packets`]) with `copy`
/// written over it at each of `spots` (offsets in the PT), each a trace
/// dir in `tmp`: decoded whole and in chunks of one PSB, with either flow
/// decoder, the same FTF and errors. The decode errors of the whole
/// decodes, summed.
fn copies_decode_alike(
    tmp: &Path,
    (dir, parsed): (&Path, &AuxPackets),
    copy: &[u8],
    spots: &[usize],
) -> u64 {
    let (data, base, _, _) = parsed;
    let errors = std::sync::atomic::AtomicU64::new(0);
    parallel(spots, |&q| {
        let mdir = tmp.join(format!("copied-at-{q}"));
        std::fs::create_dir(&mdir).unwrap();
        let mut bytes = data.clone();
        bytes[base + q..base + q + copy.len()].copy_from_slice(copy);
        std::fs::write(mdir.join("data"), &bytes).unwrap();
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_name() != "data" {
                std::os::unix::fs::symlink(entry.path(), mdir.join(entry.file_name())).unwrap();
            }
        }
        for decoder in [
            ptdec::decode::DecoderKind::Fast,
            ptdec::decode::DecoderKind::Libipt,
        ] {
            let (whole, st) = ftf_chunked(&mdir, decoder, ptdec::decode::Chunking::Sequential);
            let (cut, cut_st) = ftf_chunked(&mdir, decoder, ptdec::decode::Chunking::Bytes(1));
            assert!(cut_st.decode.chunks > st.decode.chunks, "copied at {q}");
            assert_eq!(
                st.decode.errors, cut_st.decode.errors,
                "copied at {q}, {decoder:?}"
            );
            assert!(
                whole == cut,
                "copied at {q}, {decoder:?}: the FTF cut at every PSB differs"
            );
            errors.fetch_add(
                st.decode.errors.values().sum::<u64>(),
                std::sync::atomic::Ordering::Relaxed,
            );
        }
    });
    errors.into_inner()
}

/// A trace whose buffer lost data right after a PSB+ read with tracing
/// off (a real program's, ptsim `--psb-period 0 --drop-bytes` cutting
/// there; the PSB came after an MTC, the program in a syscall): decoded
/// in chunks of one PSB and whole, with either flow decoder, the same
/// FTF. The lost-data gap is at the last time the trace tells before the
/// loss, that PSB+'s, however the trace is cut: the chunk that starts at
/// that PSB+ has no op, only its time, and put the gap there, while one
/// decoder running through put it at its last op before, so the calls
/// cut by the loss ended 660 ns apart.
#[test]
fn lost_data_after_a_psb_plus_with_tracing_off_is_one_gap_however_cut() {
    let test = "lost_data_after_a_psb_plus_with_tracing_off_is_one_gap_however_cut";
    let Some(progs) = programs(test) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let sim = |drop: Option<(u64, u64)>, dir: &Path| {
        let mut o = ptsim::sim::Options::new(progs.join("interp"), Vec::new(), dir);
        o.env = Some(Vec::new());
        o.pt.psb_period = 0;
        o.drop_bytes = drop;
        ptsim::sim::run(o).unwrap();
    };
    let whole_dir = tmp.path().join("whole");
    sim(None, &whole_dir);
    let (_, _, aux, packets) = aux_packets(&whole_dir);
    // The first PSB+ after the first with no FUP: tracing is off there.
    let psbs = psbs_of(&aux, &packets);
    let off = psbs
        .iter()
        .skip(1)
        .map(|&p| (p, psb_plus_end(&packets, p)))
        .find(|&(p, end)| {
            !packets
                .iter()
                .any(|(o, k)| (p..end).contains(o) && matches!(k, ptflow::packet::Packet::Fup(..)))
        });
    let Some((_, end)) = off else {
        panic!("no PSB+ with tracing off among {psbs:?}");
    };
    let dir = tmp.path().join("cut");
    sim(Some((end as u64, 300)), &dir);
    for decoder in [
        ptdec::decode::DecoderKind::Fast,
        ptdec::decode::DecoderKind::Libipt,
    ] {
        let (whole, st) = ftf_chunked(&dir, decoder, ptdec::decode::Chunking::Sequential);
        let (cut, cut_st) = ftf_chunked(&dir, decoder, ptdec::decode::Chunking::Bytes(1));
        assert!(cut_st.decode.chunks > st.decode.chunks);
        assert_eq!(st.decode.lost_data, cut_st.decode.lost_data, "{decoder:?}");
        // One cut, one gap (perf too reports it once: `Lost trace
        // data`); the segment after the loss no longer adds a second one
        // of no length for the same thread.
        assert_eq!(st.decode.lost_data, 1, "{decoder:?}: the lost-data gaps");
        assert!(
            whole == cut,
            "{decoder:?}: the FTF cut at every PSB differs"
        );
    }
}

/// A perf.data's bytes, where the PT lies in them, the PT, and its
/// packets from the first PSB on (their offsets in the PT).
type AuxPackets = (
    Vec<u8>,
    usize,
    Vec<u8>,
    Vec<(usize, ptflow::packet::Packet)>,
);

/// The PT of ptsim's trace dir `dir` (its first AUX record), as
/// [`AuxPackets`].
fn aux_packets(dir: &Path) -> AuxPackets {
    let data = std::fs::read(dir.join("data")).unwrap();
    let file = sideband::file::PerfFile::parse(&data).unwrap();
    let auxes: Vec<Vec<u8>> = file
        .events()
        .filter_map(|e| match e.unwrap().1.record {
            sideband::record::Record::Auxtrace(a) => Some(a.data.into_owned()),
            _ => None,
        })
        .collect();
    let aux = auxes
        .first()
        .unwrap_or_else(|| panic!("no AUX record"))
        .clone();
    let base = data
        .windows(aux.len())
        .position(|w| w == aux.as_slice())
        .unwrap();
    let mut packets = Vec::new();
    let mut at = (0..aux.len())
        .find(|&i| ptflow::packet::is_psb(&aux, i))
        .unwrap();
    while let Ok((p, n)) = ptflow::packet::decode_known(&aux, at, false, false) {
        packets.push((at, p));
        at += n;
    }
    (data, base, aux, packets)
}

/// The offsets of the PSBs among `packets` of `aux`.
fn psbs_of(aux: &[u8], packets: &[(usize, ptflow::packet::Packet)]) -> Vec<usize> {
    packets
        .iter()
        .filter(|(o, _)| ptflow::packet::is_psb(aux, *o))
        .map(|(o, _)| *o)
        .collect()
}

/// Where the PSB+ of the PSB at `psb` ends (after its PSBEND).
fn psb_plus_end(packets: &[(usize, ptflow::packet::Packet)], psb: usize) -> usize {
    packets
        .iter()
        .find(|(o, p)| *o > psb && matches!(p, ptflow::packet::Packet::Psbend))
        .map(|(o, _)| o + 2)
        .unwrap()
}

/// Trace dir `dir` decoded into FTF by `decoder` in `chunking`: its
/// bytes and the run's report.
fn ftf_chunked(
    dir: &Path,
    decoder: ptdec::decode::DecoderKind,
    chunking: ptdec::decode::Chunking,
) -> (Vec<u8>, Report) {
    let decode = DecodeOptions {
        decoder,
        chunking,
        ..DecodeOptions::default()
    };
    let out = dir.join(format!("{decoder:?}-{chunking:?}.ftf"));
    let r = ftf_with(dir, &out, decode, EmitOptions::default());
    (std::fs::read(out).unwrap(), r)
}

/// Recursion 700 levels deep (fixtures/programs/deep.c), deeper than the
/// 512 levels Perfetto keeps per track: ptdec folds what lies below level
/// `FOLD_DEPTH` into the slice at that level, so Perfetto drops nothing
/// (`slice_max_depth_exceeded` stays 0), and the `folded` args of the
/// folding slices add up to every call not written, on both time axes.
#[test]
fn deep_recursion_is_folded_within_perfettos_depth() {
    let test = "deep_recursion_is_folded_within_perfettos_depth";
    let Some(progs) = programs(test) else { return };
    let (_tmp, dir) = simulate(&progs, "deep", DEFAULT);
    for axis in [TimeAxis::Ns, TimeAxis::Instructions] {
        let out = dir.join(format!("deep-{axis:?}.ftf"));
        let report = common::run_pipeline(
            &dir,
            &[],
            DecodeOptions::default(),
            Default::default(),
            EmitOptions {
                axis,
                record: true,
                ..EmitOptions::default()
            },
            Target::File(out.clone()),
        );
        // down(700) and down(600) under _start: 702 levels of calls.
        assert_eq!(report.stack.max_depth, 702, "{axis:?}");
        let e = &report.emit;
        let fold = ptdec::emit::FOLD_DEPTH;
        assert_eq!(e.folds, 2, "{axis:?}: {e:?}");
        assert_eq!(e.folded_max_depth, 702, "{axis:?}: {e:?}");
        // Levels fold+1..=702 of the first, fold+1..=602 of the second.
        let want = (702 - fold) as u64 + (602 - fold) as u64;
        assert_eq!(e.folded_calls, want, "{axis:?}: {e:?}");
        let w = &report.written[0];
        assert_eq!(w.slices.iter().map(|s| s.folded).sum::<u64>(), want);
        assert!(w.slices.iter().all(|s| s.depth <= fold), "{axis:?}");
        assert_eq!(
            w.slices.iter().filter(|s| s.category == "call").count() as u64 + e.folded_calls,
            report.stack.calls + 1,
            "{axis:?}: every call (and _start) is written or folded"
        );
        let Some(view) = pt_tests::perfetto_agrees(test, &out, w.events, &[], &common_expected(w))
        else {
            return;
        };
        let deepest = view.slices.values().flatten().map(|s| s.depth).max();
        assert_eq!(deepest, Some(fold as u32), "{axis:?}");
    }
}

fn common_expected(w: &ptdec::emit::Written) -> Vec<pt_tests::ExpectedSlice> {
    w.slices
        .iter()
        .map(|s| pt_tests::ExpectedSlice {
            tid: s.tid.into(),
            category: s.category.to_string(),
            name: s.name.clone(),
            ts: s.start as i64,
            end: s.end as i64,
            depth: s.depth,
        })
        .collect()
}

/// The PT of ptsim's trace dir `dir` of program `prog` alone, written
/// beside it, as `ptdec raw`'s input with the program (static) as its
/// `--elf`.
fn raw_input(dir: &Path, progs: &Path, prog: &str) -> ptdec::raw::RawInput {
    let bytes = std::fs::read(dir.join("data")).unwrap();
    let file = sideband::file::PerfFile::parse(&bytes).unwrap();
    let mut pt = Vec::new();
    for e in file.events() {
        if let sideband::record::Record::Auxtrace(a) = e.unwrap().1.record {
            pt.extend_from_slice(&a.data);
        }
    }
    assert!(pt.len() > 100, "{} bytes of PT", pt.len());
    let pt_path = dir.join(format!("{prog}.pt"));
    std::fs::write(&pt_path, &pt).unwrap();
    ptdec::raw::RawInput::load(
        &ptdec::raw::FileRange {
            path: pt_path,
            from: 0,
            to: None,
        },
        &[ptdec::raw::ElfSpec {
            path: progs.join(prog),
            base: None,
        }],
        &[],
    )
    .unwrap()
}

/// `ptdec raw` of a real program's trace (ptsim's, its PT alone, the
/// static binary as `--elf`): the decode workers leave out the jumps
/// inside a function that the stacks would do nothing at, asking the raw
/// decode's own resolver, as a trace dir's decode does, and the FTF is
/// byte for byte the one with every jump kept. The calls are the
/// truth's.
#[test]
fn raw_pt_leaves_out_quiet_jumps_with_the_same_output() {
    let test = "raw_pt_leaves_out_quiet_jumps_with_the_same_output";
    let Some(progs) = programs(test) else { return };
    let (_tmp, dir) = simulate(&progs, "tailcall", DEFAULT);
    let input = raw_input(&dir, &progs, "tailcall");
    let (symbols, cfg) = (SymbolCache::new(), ptdec::decode::RawConfig::default());
    let (quiet, kept) = (dir.join("quiet.ftf"), dir.join("kept.ftf"));
    let run = |keep, out: &Path| {
        let chunks = ptdec::decode::Chunking::Bytes(4096);
        common::raw_ftf_run(
            (&input, &cfg, &symbols),
            keep,
            chunks,
            Target::File(out.into()),
        )
    };
    let q = run(false, &quiet);
    let k = run(true, &kept);
    assert!(q.decode.quiet_jumps > 0, "no quiet jumps");
    assert_eq!(k.decode.quiet_jumps, 0);
    assert!(
        std::fs::read(&quiet).unwrap() == std::fs::read(&kept).unwrap(),
        "the FTF with jumps left out differs"
    );
    let lines: Vec<TruthLine> = truth(&dir).into_values().flatten().collect();
    let calls = lines.iter().filter(|l| l.kind == "call").count() as u64;
    assert_eq!(q.stack.calls, calls);
    assert_eq!(q.decode.insns, truth_insns(&dir).values().sum::<u64>());
}

/// A real program traced without timing packets (ptsim with TSC and MTC
/// off), its Intel PT taken out of the perf.data and decoded as raw PT
/// with the program's ELF (`ptdec raw`'s path): every op has the same time.
/// With no axis chosen ptdec writes the instruction axis and says so, and
/// folds the 700-level recursion, so Perfetto shows every slice written;
/// `ns` asked for is refused. Before, the default axis put all 1,306 slices
/// at time 0, and Perfetto nested them in each other and dropped all but
/// 512 levels.
#[test]
fn a_real_trace_without_timing_packets_loads_whole_in_perfetto() {
    let test = "a_real_trace_without_timing_packets_loads_whole_in_perfetto";
    let Some(progs) = programs(test) else { return };
    let no_timing = Variant {
        name: "no tsc, no mtc",
        apply: |o| {
            o.pt.tsc = false;
            o.pt.mtc = false;
        },
    };
    let (_tmp, dir) = simulate(&progs, "deep", no_timing);
    let input = raw_input(&dir, &progs, "deep");
    assert!(input.pt.len() > 1000, "{} bytes of PT", input.pt.len());
    let symbols = SymbolCache::new();
    let decode_raw = |emit: EmitOptions, out: &Path| {
        let cfg = ptdec::decode::RawConfig::default();
        let input = ptdec::pipeline::Input::Raw {
            input: &input,
            cfg: &cfg,
            symbols: &symbols,
        };
        let (decode, stacks) = (DecodeOptions::default(), Default::default());
        common::ftf_run(input, decode, stacks, emit, Target::File(out.to_path_buf()))
    };
    let out = dir.join("deep-raw.ftf");
    let report = decode_raw(
        EmitOptions {
            axis_auto: true,
            record: true,
            ..EmitOptions::default()
        },
        &out,
    )
    .unwrap();
    assert!(report.emit.no_time, "{:?}", report.emit);
    assert_eq!(report.emit.axis, TimeAxis::Instructions);
    assert_eq!(report.decode.insns, truth_insns(&dir).values().sum::<u64>());
    assert_eq!(report.stack.max_depth, 702);
    assert_eq!(report.emit.folds, 2, "{:?}", report.emit);
    let w = &report.written[0];
    assert_eq!(
        w.slices.iter().filter(|s| s.category == "call").count() as u64 + report.emit.folded_calls,
        report.stack.calls + 1,
        "every call (and _start) is written or folded"
    );
    let summary = ptdec::summary::render(&report);
    assert!(summary.contains("time axis     instructions"), "{summary}");
    assert!(summary.contains("folded        346 calls"), "{summary}");
    pt_tests::perfetto_agrees(test, &out, w.events, &[], &common_expected(w));

    let refused = decode_raw(EmitOptions::default(), &dir.join("ns.ftf"));
    let err = refused.expect_err("ns axis without time").to_string();
    assert!(err.contains("--time-axis instructions"), "{err}");
}
