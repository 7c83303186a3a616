//! Our FTF output read by an independent parser: the `fxt` Python package.
//!
//! Each test writes a trace with `ftf::Writer`, has a short embedded Python
//! script print what `fxt` parsed (record counts by kind, kernel objects,
//! every event with its thread, names, time and arguments), and compares those
//! lines with the same view rendered from our own reader. Needs the test venv
//! (`bash scripts/setup`); skipped with one line otherwise, failed under
//! `PT_REQUIRE_TOOLS=1`.
//!
//! Each trace is also loaded into Perfetto's own importer
//! (`trace_processor_shell`, [`pt_tests::perfetto_agrees`]): no import error,
//! every slice a row, threads and processes named and numbered as written.
//!
//! fxt 0.3.0 reads the duration-complete word as a duration and calls it
//! `duration_ns`, but the spec defines it as the *end time* in ticks, which is
//! what we write and what Perfetto's importer reads (`end_ts`, then
//! `duration = end_ts - ts`). The comparison therefore checks the word's value
//! (`end_word_ns`) and does not take fxt's name for it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use ftf::read::{EventKind, RecordKind, Value};
use ftf::{Arg, ArgValue, ThreadRef, Writer};

const FXT_DUMP: &str = r#"
import json, sys
from collections import Counter
from fxt.reader import parse_records
from fxt.models import KernelObjectRecord

def j(v):
    return json.dumps(v, ensure_ascii=False)

def args(a):
    return "".join(f" {k}={j(v)}" for k, v in a.items())

with open(sys.argv[1], "rb") as f:
    result = parse_records(f)
if result.had_unexpected_eof:
    print("unexpected EOF:", result.eof_error, file=sys.stderr)
    sys.exit(2)
for provider_id, provider in sorted(result.records_by_provider.items()):
    print(f"provider {provider_id} {j(provider.name)}")
    counts = Counter(type(r).__name__ for r in provider.records)
    for kind in sorted(counts):
        print(f"count {kind} {counts[kind]}")
    for r in provider.records:
        if isinstance(r, KernelObjectRecord):
            print(f"kobj {int(r.type)} {r.id} {j(r.name)}{args(r.args)}")
            continue
        extra = ""
        if hasattr(r, "counter_id"):
            extra = f" counter_id={r.counter_id}"
        if hasattr(r, "duration_ns"):
            extra = f" end_word_ns={r.duration_ns}"
        print(f"{type(r).__name__} {r.thread.process_id} {r.thread.thread_id} "
              f"{j(r.category)} {j(r.name)} ts_ns={r.timestamp_ns}{extra}{args(r.args)}")
"#;

/// Runs the fxt script on `trace`; `None` when the venv is missing (skipped).
fn fxt_view(test: &str, trace: &[u8]) -> Option<String> {
    let python = pt_tests::python_with_fxt(test)?;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("fxt_dump.py");
    let file = dir.path().join("trace.fxt");
    std::fs::write(&script, FXT_DUMP).unwrap();
    std::fs::write(&file, trace).unwrap();
    let out = Command::new(&python)
        .arg(&script)
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fxt failed to parse our trace: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).unwrap())
}

/// A value as Python's `json.dumps` prints what fxt made of it.
fn json(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::I32(x) => x.to_string(),
        Value::U32(x) => x.to_string(),
        Value::I64(x) => x.to_string(),
        Value::U64(x) | Value::Pointer(x) | Value::Koid(x) => x.to_string(),
        Value::F64(x) => format!("{x:?}"),
        Value::Str(s) => format!("{s:?}"),
        Value::Bool(b) => b.to_string(),
        other => panic!("writer never emits {other:?}"),
    }
}

fn args(a: &[ftf::read::Arg]) -> String {
    a.iter()
        .map(|a| format!(" {}={}", a.name, json(&a.value)))
        .collect()
}

/// The same view as `FXT_DUMP`, from our reader.
fn our_view(trace: &[u8]) -> String {
    let records = ftf::read::parse(trace).unwrap();
    let mut tps = 1_000_000_000u128;
    let ns = |ticks: u64, tps: u128| u128::from(ticks) * 1_000_000_000 / tps;
    let mut provider = String::new();
    let mut counts = BTreeMap::<&str, usize>::new();
    let mut lines = String::new();
    for r in &records {
        match &r.kind {
            RecordKind::ProviderInfo { id, name } => provider = format!("provider {id} {name:?}\n"),
            RecordKind::Initialization { ticks_per_second } => tps = u128::from(*ticks_per_second),
            RecordKind::KernelObject(k) => {
                *counts.entry("KernelObjectRecord").or_default() += 1;
                let _ = writeln!(
                    lines,
                    "kobj {} {} {:?}{}",
                    k.obj_type,
                    k.koid,
                    k.name,
                    args(&k.args)
                );
            }
            RecordKind::Event(e) => {
                let (class, extra) = match e.kind {
                    EventKind::Instant => ("InstantEventRecord", String::new()),
                    EventKind::Counter { id } => {
                        ("CounterEventRecord", format!(" counter_id={id}"))
                    }
                    EventKind::DurationBegin => ("DurationBeginEventRecord", String::new()),
                    EventKind::DurationEnd => ("DurationEndEventRecord", String::new()),
                    EventKind::DurationComplete { end } => (
                        "DurationCompleteEventRecord",
                        format!(" end_word_ns={}", ns(end, tps)),
                    ),
                    other => panic!("writer never emits {other:?}"),
                };
                *counts.entry(class).or_default() += 1;
                let _ = writeln!(
                    lines,
                    "{class} {} {} {:?} {:?} ts_ns={}{extra}{}",
                    e.thread.pid,
                    e.thread.tid,
                    e.category,
                    e.name,
                    ns(e.ts, tps),
                    args(&e.args)
                );
            }
            _ => {}
        }
    }
    let mut view = provider;
    for (kind, n) in counts {
        let _ = writeln!(view, "count {kind} {n}");
    }
    view + &lines
}

/// Perfetto's importer shows `trace` with `slices` rows (begin/end pairs
/// are one), `threads` under their names and pids, and `expected` slices
/// (ns) at their depths.
fn perfetto_reads(
    test: &str,
    trace: &[u8],
    slices: u64,
    threads: &[pt_tests::ExpectedThread],
    expected: &[pt_tests::ExpectedSlice],
) -> Option<pt_tests::PerfettoView> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{test}.ftf"));
    std::fs::write(&path, trace).unwrap();
    pt_tests::perfetto_agrees(test, &path, slices, threads, expected)
}

fn thread(pid: u64, tid: u64, name: &str) -> pt_tests::ExpectedThread {
    pt_tests::ExpectedThread {
        pid,
        tid,
        name: name.into(),
    }
}

fn compare(test: &str, trace: &[u8]) {
    let Some(theirs) = fxt_view(test, trace) else {
        return;
    };
    let ours = our_view(trace);
    if theirs != ours {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
        std::fs::write(dir.join(format!("{test}.fxt.txt")), &theirs).unwrap();
        std::fs::write(dir.join(format!("{test}.ours.txt")), &ours).unwrap();
        let first = theirs
            .lines()
            .zip(ours.lines())
            .find(|(a, b)| a != b)
            .map(|(a, b)| format!("fxt:  {a}\nours: {b}"))
            .unwrap_or_else(|| "one view is a prefix of the other".into());
        panic!(
            "fxt and our reader disagree (views in {}):\n{first}",
            dir.display()
        );
    }
}

#[test]
fn fxt_reads_every_record_kind_and_argument_type() {
    let mut w = Writer::with_provider(Vec::new(), 2_400_000_000, 3, "ptdec").unwrap();
    w.process(4242, "prog").unwrap();
    w.process(5000, "other ünïcode").unwrap();
    let main = w.thread(4242, 4242, "prog").unwrap();
    let worker = w.thread(4242, 4243, "worker").unwrap();
    let other = w.thread(5000, 5001, "other-main").unwrap();
    let every_arg = [
        Arg::new("null", ArgValue::Null),
        Arg::new("i32", -7i32),
        Arg::new("u32", 4_000_000_000u32),
        Arg::new("i64", -5_000_000_000i64),
        Arg::new("u64", u64::MAX),
        Arg::new("f64", 2.5f64),
        Arg::new("str", "/usr/lib/libc.so.6"),
        Arg::new("ptr", ArgValue::Pointer(0x7fff_0000_1234)),
        Arg::new("koid", ArgValue::Koid(4243)),
        Arg::new("bool", true),
    ];
    w.duration_begin(main, "call", "main", 1000, &[]).unwrap();
    w.duration_complete(main, "call", "compute", 1100, 1900, &every_arg)
        .unwrap();
    w.instant(worker, "gap", "overflow", 1500, &every_arg[..5])
        .unwrap();
    w.counter(
        worker,
        "stats",
        "ipc",
        1600,
        7,
        &[Arg::new("value", 1.5f64)],
    )
    .unwrap();
    w.duration_complete(other, "call", "", 1700, 1800, &[Arg::new("", false)])
        .unwrap();
    w.duration_end(main, "call", "main", 2400, &every_arg[5..])
        .unwrap();
    let trace = w.finish().unwrap();

    // Our own reader sees every kind, so the comparison covers them all.
    let ours = our_view(&trace);
    for kind in [
        "count DurationBeginEventRecord 1",
        "count DurationCompleteEventRecord 2",
        "count DurationEndEventRecord 1",
        "count InstantEventRecord 1",
        "count CounterEventRecord 1",
        "count KernelObjectRecord 5",
        "kobj 2 4243 \"worker\" process=4242",
    ] {
        assert!(ours.contains(kind), "{kind} missing from\n{ours}");
    }
    compare("fxt_reads_every_record_kind_and_argument_type", &trace);
    // main (begin/end), compute, the instant and the nameless slice; the
    // counter goes to Perfetto's counter table. Ticks are 2.4 GHz here, so
    // only counts and names are compared.
    let view = perfetto_reads(
        "fxt_reads_every_record_kind_and_argument_type",
        &trace,
        4,
        &[
            thread(4242, 4242, "prog"),
            thread(4242, 4243, "worker"),
            thread(5000, 5001, "other-main"),
        ],
        &[],
    );
    if let Some(view) = view {
        let main = &view.slices[&4242];
        assert_eq!(main.len(), 2, "{main:?}");
        // 1000 and 2400 ticks of 2.4 GHz: 416 ns and 1000 ns.
        assert_eq!((main[0].name.as_str(), main[0].ts), ("main", 416));
        assert_eq!(main[0].ts + main[0].dur, 1000);
        assert_eq!((main[1].name.as_str(), main[1].depth), ("compute", 1));
    }
}

#[test]
fn fxt_resolves_recycled_string_and_thread_slots() {
    // 40000 distinct names and 300 threads: both tables fill and recycle.
    let mut w = Writer::new(Vec::new(), 1_000_000_000).unwrap();
    let threads: Vec<ThreadRef> = (0..300u64)
        .map(|i| {
            let pid = 100 + i / 10;
            if i % 10 == 0 {
                w.process(pid, &format!("proc{pid}")).unwrap();
            }
            w.thread(pid, 10_000 + i, &format!("thr{i}")).unwrap()
        })
        .collect();
    for i in 0..40_000u64 {
        let t = threads[(i * 7 % 300) as usize];
        w.duration_complete(
            t,
            "call",
            &format!("fn_{i}"),
            i * 10,
            i * 10 + 5,
            &[Arg::new("module", format!("m{}", i % 1000).as_str())],
        )
        .unwrap();
    }
    let trace = w.finish().unwrap();
    compare("fxt_resolves_recycled_string_and_thread_slots", &trace);
    let threads: Vec<_> = (0..300u64)
        .map(|i| thread(100 + i / 10, 10_000 + i, &format!("thr{i}")))
        .collect();
    let expected: Vec<_> = (0..40_000u64)
        .map(|i| pt_tests::ExpectedSlice {
            tid: 10_000 + i * 7 % 300,
            category: "call".into(),
            name: format!("fn_{i}"),
            ts: (i * 10) as i64,
            end: (i * 10 + 5) as i64,
            depth: 0,
        })
        .collect();
    perfetto_reads(
        "fxt_resolves_recycled_string_and_thread_slots",
        &trace,
        40_000,
        &threads,
        &expected,
    );
}
