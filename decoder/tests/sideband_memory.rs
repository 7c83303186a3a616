//! What opening a trace holds while its sideband is large: an LLDB bundle
//! whose context-switch file is 16 MiB, and a perf.data of 16 MiB of
//! context switches without FINISHED_ROUND (whose records all wait in
//! perf's ordered queue until its end). Both are made here, at run time.
//! The timeline's high-water mark of records waiting to be applied in
//! time order (`TimelineStats::waiting_peak`) must stay at one head per
//! core for the bundle (its switches are streamed; before, it held them
//! all, 26 times the file in memory) and at 24 bytes a record for the
//! perf.data (its queue holds their offsets; before, a parsed record
//! each, 17 times the file). Counted, not measured: the peak RSS of such
//! inputs is `scripts/bench --only sideband`'s.

use std::io::{BufWriter, Write};
use std::path::Path;

use ptdec_core::input::Trace;
use sideband::attr::{flags, Attr, AttrSet, ATTR_SIZE_VER7};
use sideband::record::{misc, Event, Record, SampleId};
use sideband::sample::sample_type as st;
use sideband::writer::FileWriter;

const SWITCH_BYTES: usize = 16 << 20;

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

    // (input, its switches, the most records that may wait at once, the
    // most bytes a waiting record may take: a bundle's core holds its
    // next switch parsed, 288 bytes on x86-64)
    let cases = [
        (&bundle, SWITCH_BYTES / 32, 1, 512),
        (&perf, SWITCH_BYTES / 40, SWITCH_BYTES / 40, 24),
    ];
    for (input, records, most, each) in cases {
        let trace = Trace::open(input).unwrap();
        // Every switch reached the timeline: out and in alternate, so the
        // core's task changes at every other one.
        let slots = trace.timeline.cpu_slots(3);
        assert_eq!(slots.len(), records / 2, "{}", input.display());
        let stats = trace.timeline.stats();
        assert_eq!(stats.unmatched_switches, 0);
        let (peak, bytes) = (stats.waiting_peak, stats.waiting_peak_bytes);
        eprintln!(
            "{}: at most {peak} records ({bytes} bytes) waited, of {records}",
            input.display()
        );
        assert!(
            (1..=most).contains(&(peak as usize)),
            "{}: {peak} of its {records} records waited at once to be applied in time order, \
             not at least 1 and at most {most}",
            input.display()
        );
        assert!(
            bytes <= peak * each,
            "{}: the {peak} records waiting at once took {bytes} bytes, more than {each} each",
            input.display()
        );
    }
}
