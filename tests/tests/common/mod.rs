#![allow(dead_code)]
//! What the `fxt` Python reader and our FTF reader each see in a file
//! ptdec wrote, as comparable text: one line per kernel object and per event
//! (class, pid, tid, category, name, timestamp, sorted argument names).

pub mod dataset;
pub mod oracle;

use std::path::Path;
use std::process::Command;

use ftf::read::{EventKind, RecordKind};

const FXT_EVENTS: &str = r#"
import sys
from fxt.reader import parse_records
with open(sys.argv[1], "rb") as f:
    result = parse_records(f)
if result.had_unexpected_eof:
    print("unexpected EOF:", result.eof_error, file=sys.stderr)
    sys.exit(2)
for provider_id, provider in sorted(result.records_by_provider.items()):
    for r in provider.records:
        name = type(r).__name__
        if name == "KernelObjectRecord":
            print(f"kobj {int(r.type)} {r.id} {r.name}")
        elif hasattr(r, "thread"):
            print(f"{name} {r.thread.process_id} {r.thread.thread_id} {r.category} {r.name} {r.timestamp_ns} {sorted(r.args)}")
"#;

/// The fxt script's view from our reader (1e9 ticks per second).
pub fn our_view(bytes: &[u8]) -> String {
    let mut s = String::new();
    for r in ftf::read::parse(bytes).unwrap() {
        match r.kind {
            RecordKind::KernelObject(k) => {
                s += &format!("kobj {} {} {}\n", k.obj_type, k.koid, k.name)
            }
            RecordKind::Event(e) => {
                let class = match e.kind {
                    EventKind::Instant => "InstantEventRecord",
                    EventKind::Counter { .. } => "CounterEventRecord",
                    EventKind::DurationComplete { .. } => "DurationCompleteEventRecord",
                    other => panic!("ptdec never writes {other:?}"),
                };
                let mut names: Vec<String> =
                    e.args.iter().map(|a| format!("'{}'", a.name)).collect();
                names.sort();
                s += &format!(
                    "{class} {} {} {} {} {} [{}]\n",
                    e.thread.pid,
                    e.thread.tid,
                    e.category,
                    e.name,
                    e.ts,
                    names.join(", ")
                );
            }
            _ => {}
        }
    }
    s
}

/// Runs fxt on `bytes` and asserts it sees what [`our_view`] sees.
pub fn fxt_agrees(test: &str, python: &Path, bytes: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let (script, file) = (dir.path().join("ev.py"), dir.path().join("t.ftf"));
    std::fs::write(&script, FXT_EVENTS).unwrap();
    std::fs::write(&file, bytes).unwrap();
    let out = Command::new(python)
        .arg(&script)
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{test}: fxt: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs = String::from_utf8(out.stdout).unwrap();
    let ours = our_view(bytes);
    if theirs != ours {
        let first = theirs
            .lines()
            .zip(ours.lines())
            .find(|(a, b)| a != b)
            .map(|(a, b)| format!("fxt:  {a}\nours: {b}"))
            .unwrap_or_else(|| "one is a prefix of the other".into());
        panic!("{test}: fxt and our reader disagree:\n{first}");
    }
}

/// Checks each file of a ptdec run (decoded with `EmitOptions::record`)
/// through Perfetto's importer ([`pt_tests::perfetto_agrees`]): no import
/// problems, every event shown, threads named and numbered as in the report,
/// every slice at the depth ptdec's stack gave it. Files in memory are
/// written to a temporary file first.
pub fn perfetto_agrees_with_report(test: &str, report: &ptdec::pipeline::Report) {
    let threads: Vec<pt_tests::ExpectedThread> = report
        .threads
        .iter()
        .map(|((pid, tid), t)| pt_tests::ExpectedThread {
            pid: (*pid).into(),
            tid: (*tid).into(),
            name: t.name.clone(),
        })
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    for (i, w) in report.written.iter().enumerate() {
        let path = match &w.path {
            Some(p) => p.clone(),
            None => {
                let p = tmp.path().join(format!("out-{i}.ftf"));
                std::fs::write(&p, &w.bytes).unwrap();
                p
            }
        };
        let only_marks = report.emit.calls + report.emit.untraced + report.emit.gaps == 0;
        assert!(
            w.events == 0 || !w.slices.is_empty() || only_marks,
            "{test}: decode with EmitOptions::record to check through Perfetto"
        );
        let slices: Vec<pt_tests::ExpectedSlice> = w
            .slices
            .iter()
            .map(|s| pt_tests::ExpectedSlice {
                tid: s.tid.into(),
                category: s.category.to_string(),
                name: s.name.clone(),
                ts: s.start as i64,
                end: s.end as i64,
                depth: s.depth,
            })
            .collect();
        let seen: Vec<_> = threads
            .iter()
            .filter(|t| {
                w.slices.iter().any(|s| u64::from(s.tid) == t.tid)
                    || (only_marks && ptwrites(&w.bytes).iter().any(|p| p.0 == t.tid))
            })
            .cloned()
            .collect();
        if pt_tests::perfetto_agrees(test, &path, w.events, &seen, &slices).is_none() {
            return;
        }
    }
}

/// Every op ptdec's decoding stage hands over, per (pid, tid), in order:
/// for comparing whole decodes (chunk sizes, windows, workers).
#[derive(Default, PartialEq, Eq, Debug)]
pub struct AllOps(pub std::collections::BTreeMap<(u32, u32), Vec<ptdec::model::ops::Op>>);

impl ptdec::model::ops::OpSink for AllOps {
    fn op(&mut self, pid: u32, tid: u32, op: ptdec::model::ops::Op) {
        self.0.entry((pid, tid)).or_default().push(op);
    }
}

/// Every `ptwrite` instant of an FTF file as (tid, payload), in file order.
pub fn ptwrites(bytes: &[u8]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for r in ftf::read::parse(bytes).unwrap() {
        if let RecordKind::Event(e) = r.kind {
            if e.kind == EventKind::Instant && e.category == "ptwrite" {
                let payload = e
                    .args
                    .iter()
                    .find(|a| a.name == "payload")
                    .and_then(|a| a.value.as_u64())
                    .expect("a ptwrite instant has an unsigned payload");
                out.push((e.thread.tid, payload));
            }
        }
    }
    out
}

/// `perf script --itrace=w` on `trace`: every PTWRITE as (tid, payload),
/// in perf's order.
pub fn perf_ptwrites(perf: &Path, trace: &Path, home: &Path) -> Vec<(u64, u64)> {
    let out = Command::new(perf)
        .env("HOME", home)
        .args(["script", "--itrace=w", "-F", "tid,synth", "-i"])
        .arg(trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "perf script --itrace=w {}: {}",
        trace.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut v = Vec::new();
    for line in text.lines() {
        let Some(i) = line.find("payload: ") else {
            continue;
        };
        let tid: u64 = line.split_whitespace().next().unwrap().parse().unwrap();
        // perf prints 0 as "0", anything else in hex.
        let word = line[i + 9..].split_whitespace().next().unwrap();
        let payload = match word.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
            None => word.parse().unwrap(),
        };
        v.push((tid, payload));
    }
    v
}

/// Decodes the trace dir `dir` into an in-memory FTF with ptdec's defaults,
/// binaries from their recorded paths, the trace dir's vDSO and `sysroots`
/// (never ~/.debug), the slices recorded in the report.
pub fn decode_to_memory(dir: &Path, sysroots: &[std::path::PathBuf]) -> ptdec::pipeline::Report {
    run_pipeline(
        dir,
        sysroots,
        ptdec::decode::DecodeOptions::default(),
        ptdec::pipeline::StackOptions::default(),
        ptdec::emit::EmitOptions {
            record: true,
            ..ptdec::emit::EmitOptions::default()
        },
        ptdec::emit::Target::Memory,
    )
}

/// ptdec's whole run (decode, stacks, FTF) on the trace dir `dir` with
/// these options, binaries from their recorded paths, the trace dir's vDSO
/// and `sysroots` (never ~/.debug).
pub fn run_pipeline(
    dir: &Path,
    sysroots: &[std::path::PathBuf],
    decode: ptdec::decode::DecodeOptions,
    stacks: ptdec::pipeline::StackOptions,
    emit: ptdec::emit::EmitOptions,
    target: ptdec::emit::Target,
) -> ptdec::pipeline::Report {
    let opened = Opened::new(dir, sysroots);
    ftf_run(opened.input(), decode, stacks, emit, target).unwrap()
}

/// A trace dir opened as the tests decode it: binaries from their
/// recorded paths, the trace dir's vDSO and the `sysroots` given, never
/// ~/.debug.
pub struct Opened {
    pub trace: ptdec::input::Trace,
    pub images: ptdec::images::ImageStore,
    pub symbols: ptdec::symbols::SymbolCache,
}

impl Opened {
    pub fn new(dir: &Path, sysroots: &[std::path::PathBuf]) -> Opened {
        use ptdec::images::{ImageStore, SearchPath};
        let trace = ptdec::input::Trace::open(dir).unwrap();
        let images = ImageStore::new(SearchPath {
            buildid_dir: None,
            sysroots: sysroots.to_vec(),
            ..SearchPath::for_trace(dir)
        });
        let symbols = ptdec::symbols::SymbolCache::for_search(images.search());
        Opened {
            trace,
            images,
            symbols,
        }
    }

    /// What a run decodes.
    pub fn input(&self) -> ptdec::pipeline::Input<'_> {
        ptdec::pipeline::Input::Trace {
            trace: &self.trace,
            images: &self.images,
            symbols: &self.symbols,
        }
    }
}

/// `input` decoded into FTF as `ptdec` plans and runs it
/// (`ptdec::plan::Plan`, then `ptdec::pipeline::run`).
pub fn ftf_run(
    input: ptdec::pipeline::Input<'_>,
    decode: ptdec::decode::DecodeOptions,
    stacks: ptdec::pipeline::StackOptions,
    emit: ptdec::emit::EmitOptions,
    target: ptdec::emit::Target,
) -> Result<ptdec::pipeline::Report, ptdec::pipeline::RunError> {
    let out = ptdec::plan::Ftf { emit, target };
    let plan = ptdec::plan::Plan::new(input, decode, stacks, out);
    ptdec::pipeline::run(&plan, None)
}

/// Raw PT (`input`, with `cfg`) decoded into FTF by [`ftf_run`] as
/// `ptdec raw` decodes it (the fast flow decoder), with every jump inside
/// a function kept as an op or not (`keep_quiet_jumps`).
pub fn raw_ftf_run(
    (input, cfg, symbols): (
        &ptdec::raw::RawInput,
        &ptdec::decode::RawConfig,
        &ptdec::symbols::SymbolCache,
    ),
    keep_quiet_jumps: bool,
    chunking: ptdec::decode::Chunking,
    target: ptdec::emit::Target,
) -> ptdec::pipeline::Report {
    let input = ptdec::pipeline::Input::Raw {
        input,
        cfg,
        symbols,
    };
    let decode = ptdec::decode::DecodeOptions {
        keep_quiet_jumps,
        chunking,
        decoder: ptdec::decode::DecoderKind::Fast,
        ..ptdec::decode::DecodeOptions::default()
    };
    // The axis the trace has: instructions without timing packets.
    let emit = ptdec::emit::EmitOptions {
        axis_auto: true,
        ..ptdec::emit::EmitOptions::default()
    };
    ftf_run(input, decode, Default::default(), emit, target).unwrap()
}

/// `ptdec report`'s run on the trace dir `dir` as the CLI makes it
/// (interpolated times), with `decode`, folded stacks, per thread or not,
/// and the `slowest` longest calls; binaries from their recorded paths and
/// the trace dir's vDSO (never ~/.debug).
pub fn run_report(
    dir: &Path,
    decode: ptdec::decode::DecodeOptions,
    per_thread: bool,
    slowest: usize,
) -> (ptdec::pipeline::Report, ptdec::report::Aggregate) {
    use ptdec::report::AggregateOptions;
    let opened = Opened::new(dir, &[]);
    let stacks = ptdec::pipeline::StackOptions {
        interpolate: true,
        min_duration: None,
    };
    let aggregate = AggregateOptions {
        per_thread,
        folded: true,
        slowest,
        ..AggregateOptions::default()
    };
    let plan = ptdec::plan::Plan::new(opened.input(), decode, stacks, aggregate);
    ptdec::report::run(&plan, None).unwrap()
}

/// Each thread's ground truth of a ptsim trace dir (`truth/TID.txt`), by tid.
pub fn thread_truths(dir: &Path) -> std::collections::BTreeMap<u32, ptsim::truth::ThreadTruth> {
    let mut m = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(dir.join("truth")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(tid) = name
            .strip_suffix(".txt")
            .and_then(|n| n.parse::<u32>().ok())
        {
            m.insert(tid, ptsim::truth::read_thread_truth(&e.path()).unwrap());
        }
    }
    m
}

/// Targets of the direct `jmp`s of a non-PIE program (`objdump -d`).
pub fn jump_targets(prog: &Path) -> std::collections::HashSet<u64> {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(prog)
        .output()
        .expect("run objdump");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (_, rest) = l.split_once(":\t")?;
            let target = rest.strip_prefix("jmp")?.split_whitespace().next()?;
            u64::from_str_radix(target, 16).ok()
        })
        .collect()
}
