//! The ordered merge and the timeline on a real recording:
//! `../shared/realdata/perf.data.intel_pt-4.14` (`perf record -e cycles -e
//! intel_pt// -- echo Hello, World!` on a Skylake, perf 4.14), read with our
//! perf.data reader.
//!
//! The expected values in `replay_echo_recording` come from
//! `perf script -D -i perf.data.intel_pt-4.14` (perf 6.1): the MMAP2, COMM,
//! EXIT and SWITCH_CPU_WIDE lines. The other tests ask perf live and compare
//! everything it prints: the order perf delivers records in, its switch events,
//! and the dso and tid it gives each sample. Without perf they print one skip
//! line, unless `PT_REQUIRE_TOOLS=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use sideband::file::PerfFile;
use sideband::ordered::{Arrival, OrderedEvents, Timestamped};
use sideband::record::{Event, FileId};
use sideband::timeline::Timeline;

const FILE: &str = "perf.data.intel_pt-4.14";
const ECHO: u32 = 3174;
/// `PERF_RECORD_COMM exec: echo:3174/3174` on cpu 3.
const EXEC_TIME: u64 = 641_256_847_598;
/// `PERF_RECORD_EXIT(3174:3174):(3174:3174)` on cpu 0.
const EXIT_TIME: u64 = 641_258_039_091;

fn realdata(name: &str) -> PathBuf {
    pt_tests::realdata(name)
}

fn read(name: &str) -> Vec<u8> {
    let path = realdata(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn events<'a>(file: &PerfFile<'a>) -> Vec<(u64, Event<'a>)> {
    file.events()
        .collect::<Result<_, _>>()
        .expect("parse every record")
}

/// The workspace's policy for missing tools (see `tests/src/lib.rs`).
fn perf(test: &str) -> Option<PathBuf> {
    pt_tests::perf(test)
}

fn perf_out(perf: &Path, args: &[&str]) -> String {
    let out = Command::new(perf).args(args).output().expect("run perf");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// "641.256845844" -> ns.
fn ns(s: &str) -> u64 {
    let (sec, frac) = s.trim_end_matches(':').split_once('.').expect("sec.ns");
    sec.parse::<u64>().unwrap() * 1_000_000_000 + frac.parse::<u64>().unwrap()
}

#[test]
fn replay_echo_recording() {
    let bytes = read(FILE);
    let file = PerfFile::parse(&bytes).unwrap();
    let events = events(&file);
    // The record count the README quotes from `perf script -D`.
    assert_eq!(events.len(), 257);
    let tl = Timeline::replay(events.into_iter().map(|(_, e)| e));

    // Threads and names.
    assert_eq!(tl.pid_of(ECHO), Some(ECHO));
    assert_eq!(tl.name(ECHO, EXEC_TIME - 1), Some("perf"));
    assert_eq!(tl.name(ECHO, EXEC_TIME), Some("echo"));
    assert_eq!(tl.name(ECHO, EXIT_TIME), Some("echo"));
    let lives = tl.thread_lifetimes(ECHO);
    assert_eq!(lives.len(), 1);
    assert_eq!((lives[0].start, lives[0].end), (None, Some(EXIT_TIME)));
    let names: Vec<(&str, bool)> = lives[0]
        .names()
        .iter()
        .map(|c| (&*c.name, c.exec))
        .collect();
    assert_eq!(names, [("perf", false), ("echo", true), ("echo", false)]);
    for tid in [0, 8, 22, 118, 125, 127, 1760, 3173, ECHO] {
        assert!(
            tl.tids().any(|t| t == tid),
            "tid {tid} from the switch records"
        );
    }

    // The image of echo: nothing recorded before the exec, the ten MMAP2s after.
    assert_eq!(tl.image_map(ECHO, EXEC_TIME - 1).iter().count(), 0);
    let end = tl.image_map(ECHO, EXIT_TIME);
    let expect = [
        (0x5cba63156000, 0x125000, "/usr/bin/coreutils"),
        (0x7fb36d08b000, 0x227000, "/lib64/ld-2.23.so"),
        (0x7ffd8fdfe000, 0x2000, "[vdso]"),
        (0x7fb36d279000, 0x28000, "/lib64/libselinux.so.1"),
        (0x7fb36d272000, 0x6000, "/lib64/libattr.so.1.1.0"),
        (0x7fb36ce83000, 0x208000, "/lib64/librt-2.23.so"),
        (0x7fb36cc66000, 0x21d000, "/lib64/libpthread-2.23.so"),
        (0x7fb36c8bb000, 0x3ab000, "/lib64/libc-2.23.so"),
        (0x7fb36d1f7000, 0x7a000, "/lib64/libpcre.so.1.2.8"),
        (0x7fb36c6b7000, 0x204000, "/lib64/libdl-2.23.so"),
    ];
    for (start, len, name) in expect {
        let m = end
            .lookup(start)
            .unwrap_or_else(|| panic!("{name} at {start:#x}"));
        assert_eq!((m.start, m.file.filename.as_str()), (start, name));
        // ld.so's record spans its whole reservation; the libraries later
        // mapped into the freed part of it cut it, as they do in perf.
        if name != "/lib64/ld-2.23.so" {
            assert_eq!(m.end, start + len, "{name}");
        }
        assert_eq!(m.file.prot, Some(5), "{name} is r-xp");
    }
    let ld = end.lookup(0x7fb36d0a20b3).unwrap(); // the user-mode cycles sample in ld.so
    assert_eq!((ld.start, ld.end), (0x7fb36d08b000, 0x7fb36d1f7000));
    let coreutils = end.lookup(0x5cba63221580).unwrap();
    assert_eq!(
        coreutils.file.file_id,
        Some(FileId::Inode {
            maj: 0xb3,
            min: 5,
            ino: 26037,
            ino_generation: 2948000201
        })
    );
    // libc is mapped at 641257237773: not before.
    assert!(tl.lookup(ECHO, 0x7fb36c8bb000, 641_257_237_772).is_none());
    assert!(tl.lookup(ECHO, 0x7fb36c8bb000, 641_257_237_773).is_some());

    // The kernel: [kernel.kallsyms]_text and 55 modules, shared by every pid.
    assert_eq!(tl.kernel_map().current().count(), 56);
    let k = tl.lookup(ECHO, 0xffffffffb96071f4, EXEC_TIME).unwrap();
    assert_eq!(
        (k.file.filename.as_str(), k.start, k.end),
        (
            "[kernel.kallsyms]_text",
            0xffffffffb9600000,
            0xffffffffb9600000 + 0x6cf0000
        )
    );
    assert_eq!(
        tl.lookup(1760, 0xffffffffc02f0010, 0)
            .unwrap()
            .file
            .filename,
        "/lib/modules/4.14.18/kernel/drivers/input/joydev.ko"
    );
    assert_eq!(tl.pids().iter().filter(|&&p| p == u32::MAX).count(), 0);

    // Cpus, from the SWITCH_CPU_WIDE and ITRACE_START records.
    assert_eq!(tl.cpus().collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert_eq!(tl.tid_on_cpu(3, 641_255_848_110), None);
    assert_eq!(tl.tid_on_cpu(3, 641_255_848_111), Some(1760)); // OUT next 1760/1760
    assert_eq!(tl.tid_on_cpu(3, 641_255_852_546), Some(0)); // OUT next 0/0
    assert_eq!(tl.tid_on_cpu(3, 641_256_844_131), Some(ECHO)); // ITRACE_START 3174
    assert_eq!(tl.tid_on_cpu(0, 641_256_032_286), Some(ECHO)); // OUT next 3174/3174
    assert_eq!(tl.tid_on_cpu(2, 641_256_057_463), Some(0)); // OUT next 0/0
    assert_eq!(tl.tid_on_cpu(2, 641_256_057_464), Some(0)); // idle's IN, prev 3173/3173
    let s = tl.stats();
    assert_eq!(
        (s.time_went_backwards, s.out_of_order, s.unmatched_switches),
        (0, 0, 0),
        "{s:?}"
    );
}

#[test]
fn replay_piped_recording() {
    // The pipe-mode sibling: features and attrs arrive as records and pass through.
    let bytes = read("perf.data.piped.intel_pt-4.14");
    let file = PerfFile::parse(&bytes).unwrap();
    let tl = Timeline::replay(events(&file).into_iter().map(|(_, e)| e));
    assert_eq!(tl.name(3587, 0), Some("perf"));
    assert_eq!(tl.stats().time_went_backwards, 0);
}

/// Our delivery order, as file offsets, with round marks and untimed records
/// at their input position.
fn our_order(events: &[(u64, Event<'_>)]) -> Vec<u64> {
    let mut oe = OrderedEvents::new();
    let mut order = Vec::new();
    for (offset, event) in events {
        match event.arrival() {
            Arrival::RoundEnd => {
                order.push(*offset);
                order.extend(oe.finished_round());
            }
            Arrival::Untimed => order.push(*offset),
            Arrival::Timed(t) => assert!(oe.push(Some(t), *offset).is_none()),
        }
    }
    order.extend(oe.flush_all());
    order
}

#[test]
fn delivery_order_matches_perf() {
    let Some(perf) = perf("delivery_order_matches_perf") else {
        return;
    };
    let bytes = read(FILE);
    let file = PerfFile::parse(&bytes).unwrap();
    let ours = our_order(&events(&file));
    // perf -D prints each record when it is delivered:
    // "3 641255848111 0x21b0 [0x30]: PERF_RECORD_SWITCH_CPU_WIDE OUT ...".
    let dump = perf_out(
        &perf,
        &["script", "-D", "-i", realdata(FILE).to_str().unwrap()],
    );
    let perfs: Vec<u64> = dump
        .lines()
        .filter(|l| l.contains("]: PERF_RECORD_"))
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let i = words
                .iter()
                .position(|w| w.starts_with("[0x") && w.ends_with("]:"))?;
            u64::from_str_radix(words.get(i.checked_sub(1)?)?.strip_prefix("0x")?, 16).ok()
        })
        .collect();
    assert_eq!(perfs.len(), 257);
    assert_eq!(ours, perfs);
}

#[test]
fn cpu_timeline_matches_perf_switch_events() {
    let Some(perf) = perf("cpu_timeline_matches_perf_switch_events") else {
        return;
    };
    let bytes = read(FILE);
    let file = PerfFile::parse(&bytes).unwrap();
    let tl = Timeline::replay(events(&file).into_iter().map(|(_, e)| e));
    let path = realdata(FILE);
    // " 1760 [003]   641.255849446: PERF_RECORD_SWITCH_CPU_WIDE IN           prev pid/tid:     0/0"
    let out = perf_out(
        &perf,
        &[
            "script",
            "-i",
            path.to_str().unwrap(),
            "--show-switch-events",
            "--ns",
            "-F",
            "tid,cpu,time",
        ],
    );
    let mut n = 0;
    for l in out
        .lines()
        .filter(|l| l.contains("PERF_RECORD_SWITCH_CPU_WIDE"))
    {
        let w: Vec<&str> = l.split_whitespace().collect();
        let tid: u32 = w[0].parse().unwrap();
        let cpu: u32 = w[1].trim_matches(|c| c == '[' || c == ']').parse().unwrap();
        let t = ns(w[2]);
        let other: u32 = w
            .last()
            .unwrap()
            .split('/')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let running = if w[4] == "OUT" { other } else { tid };
        assert_eq!(tl.tid_on_cpu(cpu, t), Some(running), "{l}");
        n += 1;
    }
    assert_eq!(n, 152);
}

#[test]
fn samples_resolve_like_perf() {
    let Some(perf) = perf("samples_resolve_like_perf") else {
        return;
    };
    let bytes = read(FILE);
    let file = PerfFile::parse(&bytes).unwrap();
    let tl = Timeline::replay(events(&file).into_iter().map(|(_, e)| e));
    let path = realdata(FILE);
    // " 3174 [003]   641.257864456:     branches:      5cba63221580 (/usr/bin/coreutils)":
    // perf's cycles samples and the samples it synthesizes from the trace.
    let out = perf_out(
        &perf,
        &[
            "script",
            "-i",
            path.to_str().unwrap(),
            "-F",
            "tid,cpu,time,event,ip,dso",
            "--ns",
        ],
    );
    let (mut dsos, mut tids) = (0, 0);
    for l in out
        .lines()
        .filter(|l| !l.contains("trace error") && l.ends_with(')'))
    {
        let w: Vec<&str> = l.split_whitespace().collect();
        let tid: u32 = w[0].parse().unwrap();
        let cpu = w[1].trim_matches(|c| c == '[' || c == ']');
        let t = ns(w[2]);
        let ip = u64::from_str_radix(w[4], 16).unwrap();
        let dso = w[5].trim_matches(|c| c == '(' || c == ')');
        if let Ok(cpu) = cpu.parse::<u32>() {
            // perf switches tid on the same records; it never runs ahead of them.
            assert_eq!(tl.tid_on_cpu(cpu, t), Some(tid), "{l}");
            tids += 1;
        }
        if ip == 0 {
            continue;
        }
        let pid = tl.pid_of(tid).unwrap();
        let ours = tl.lookup(pid, ip, t).map(|m| m.file.filename.as_str());
        match dso {
            "[unknown]" => assert_eq!(ours, None, "{l}"),
            // perf shows the kernel text map as "[kernel.kallsyms]".
            _ => assert!(
                ours.is_some_and(|f| f.strip_suffix("_text").unwrap_or(f) == dso),
                "{l}: {ours:?}"
            ),
        }
        dsos += 1;
    }
    assert!(
        dsos >= 20 && tids >= 10,
        "{dsos} dsos, {tids} tids compared"
    );
}
