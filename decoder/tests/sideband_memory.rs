//! What opening a trace costs in memory when its sideband is large: an
//! LLDB bundle whose context-switch file is 16 MiB, and a perf.data of
//! 16 MiB of context switches without FINISHED_ROUND (whose records all
//! wait in perf's ordered queue until its end). Both are made here, at
//! run time, and opened in this process; the growth of its peak RSS
//! (VmHWM, reset before each through /proc/self/clear_refs) must stay
//! below the switch file's size for the bundle (it was 0.45 times it on
//! the machine this was written on) and 1.5 times it for the perf.data
//! (1.07: its queue holds 24 bytes for each of its 40-byte records until
//! the end). Before the switches were streamed, the bundle took 26 times
//! its switch file and the perf.data 17 times its size.
//! One test in its own binary, so that nothing else runs beside it.

use std::io::{BufWriter, Write};
use std::path::Path;

use ptdec_core::input::Trace;
use sideband::attr::{flags, Attr, AttrSet, ATTR_SIZE_VER7};
use sideband::record::{misc, Event, Record, SampleId};
use sideband::sample::sample_type as st;
use sideband::writer::FileWriter;

const SWITCH_BYTES: usize = 16 << 20;

/// A line of /proc/self/status, in bytes.
fn status_bytes(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb << 10)
}

/// How much the peak RSS grows while `f` runs, when the kernel lets it
/// be measured (`None` otherwise).
fn peak_growth<T>(f: impl FnOnce() -> T) -> (T, Option<u64>) {
    // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux 4.0).
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let before = status_bytes("VmRSS:");
    let out = f();
    let after = status_bytes("VmHWM:");
    let growth = match (reset, before, after) {
        (true, Some(b), Some(a)) => Some(a.saturating_sub(b)),
        _ => None,
    };
    (out, growth)
}

/// Switches of one core between two threads of pid 10, out and in, each
/// 1000 ns after the last: (misc, next_prev tid, record tid, time).
fn switches(n: usize) -> impl Iterator<Item = (u16, u32, u32, u64)> {
    (0..n).map(|i| {
        let (a, b) = if i / 2 % 2 == 0 { (11, 12) } else { (12, 11) };
        let t = 1_000_000 + i as u64 * 1000;
        match i % 2 {
            0 => (misc::SWITCH_OUT, b, a, t),
            _ => (0, a, b, t),
        }
    })
}

/// An LLDB bundle of one process, one core with a few bytes of trace and
/// `SWITCH_BYTES` of context switches (LLDB's form: SWITCH_CPU_WIDE with
/// TID | TIME, 32 bytes each).
fn write_bundle(dir: &Path) {
    std::fs::write(
        dir.join("trace.json"),
        r#"{"type": "intel-pt",
            "cpuInfo": {"vendor": "GenuineIntel", "family": 6, "model": 85, "stepping": 4},
            "processes": [{"pid": 10, "threads": [{"tid": 11}, {"tid": 12}], "modules": []}],
            "cpus": [{"id": 3, "iptTrace": "3.trace", "contextSwitchTrace": "3.switches"}]}"#,
    )
    .unwrap();
    std::fs::write(dir.join("3.trace"), [0x02, 0x82].repeat(8)).unwrap();
    let mut w = BufWriter::new(std::fs::File::create(dir.join("3.switches")).unwrap());
    for (m, next_prev, tid, t) in switches(SWITCH_BYTES / 32) {
        let mut r = Vec::with_capacity(32);
        r.extend_from_slice(&15u32.to_le_bytes()); // PERF_RECORD_SWITCH_CPU_WIDE
        r.extend_from_slice(&m.to_le_bytes());
        r.extend_from_slice(&32u16.to_le_bytes());
        for v in [10, next_prev, 10, tid] {
            r.extend_from_slice(&v.to_le_bytes());
        }
        r.extend_from_slice(&t.to_le_bytes());
        w.write_all(&r).unwrap();
    }
    w.flush().unwrap();
}

/// A sideband-only perf.data of `SWITCH_BYTES` of SWITCH_CPU_WIDE records
/// and no FINISHED_ROUND.
fn write_perf_data(path: &Path) {
    let mut attrs = AttrSet::new();
    attrs.push(
        Attr {
            kind: 1,   // PERF_TYPE_SOFTWARE
            config: 9, // PERF_COUNT_SW_DUMMY
            size: ATTR_SIZE_VER7,
            sample_type: st::TID | st::TIME | st::CPU,
            flags: flags::SAMPLE_ID_ALL | flags::CONTEXT_SWITCH,
            ..Attr::default()
        },
        vec![1],
    );
    let file = BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = FileWriter::new(file, attrs).unwrap();
    // 8 of header, 8 of pids, 24 of sample id.
    for (m, next_prev, tid, t) in switches(SWITCH_BYTES / 40) {
        w.write_event(&Event {
            misc: m,
            record: Record::SwitchCpuWide {
                next_prev_pid: 10,
                next_prev_tid: next_prev,
            },
            sample_id: SampleId {
                pid: Some(10),
                tid: Some(tid),
                time: Some(t),
                cpu: Some(3),
                ..SampleId::default()
            },
        })
        .unwrap();
    }
    w.finish().unwrap().flush().unwrap();
}

#[test]
fn a_large_sideband_costs_less_memory_than_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    std::fs::create_dir(&bundle).unwrap();
    write_bundle(&bundle);
    let perf = dir.path().join("perf.data");
    write_perf_data(&perf);

    // (input, its switches, the most its peak RSS may grow in bytes)
    let cases = [
        (&bundle, SWITCH_BYTES / 32, SWITCH_BYTES),
        (&perf, SWITCH_BYTES / 40, SWITCH_BYTES * 3 / 2),
    ];
    for (input, records, most) in cases {
        let (trace, growth) = peak_growth(|| Trace::open(input).unwrap());
        // Every switch reached the timeline: out and in alternate, so the
        // core's task changes at every other one.
        let slots = trace.timeline.cpu_slots(3);
        assert_eq!(slots.len(), records / 2, "{}", input.display());
        assert_eq!(trace.timeline.stats().unmatched_switches, 0);
        let Some(growth) = growth else {
            eprintln!("peak RSS cannot be measured here (/proc/self/clear_refs): not checked");
            continue;
        };
        eprintln!(
            "{}: peak RSS grew {} KiB opening {} KiB of switches ({} slots)",
            input.display(),
            growth >> 10,
            SWITCH_BYTES >> 10,
            slots.len()
        );
        assert!(
            growth < most as u64,
            "{}: opening it grew the peak RSS by {growth} bytes, more than {most} for its \
             {SWITCH_BYTES} bytes of switches",
            input.display()
        );
    }
}
