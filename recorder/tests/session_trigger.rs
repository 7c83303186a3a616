//! A real hardware execute breakpoint on a function of a real child drives
//! the session's snapshot path: one snapshot per call, up to max_snapshots.
//! Breakpoints work in VMs; without perf access the test says so and skips.

mod session_util;

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use ptrec::session::sim::{sim_attrs, SimOptions, SimWaiter, SimWaker};
use ptrec::session::{Mode, Session, SessionConfig, StopReason, StopSignal, TraceWriter};
use ptrec::trigger::Breakpoint;
use session_util::*;

const PROGRAM: &str = r#"
#include <stdlib.h>
#include <unistd.h>
__attribute__((noinline)) void trigger_point(int i) { __asm__ volatile("" : : "r"(i) : "memory"); }
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    char c;
    if (read(0, &c, 1) != 1) return 2;
    for (int i = 0; i < n; i++) { trigger_point(i); usleep(20000); }
    return 0;
}
"#;

/// Builds the program; returns its path and trigger_point's address.
fn build(dir: &std::path::Path) -> Option<(std::path::PathBuf, u64)> {
    let src = dir.join("trig.c");
    let exe = dir.join("trig");
    std::fs::write(&src, PROGRAM).unwrap();
    let ok = Command::new("gcc")
        .args(["-O1", "-no-pie", "-fno-pie", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .ok()?
        .success();
    if !ok {
        return None;
    }
    let nm = Command::new("nm").arg(&exe).output().ok()?;
    let addr = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .find(|l| l.ends_with(" T trigger_point"))
        .and_then(|l| u64::from_str_radix(l.split(' ').next()?, 16).ok())?;
    Some((exe, addr))
}

fn run(calls: u32, max: Option<u32>) -> Option<(ptrec::session::Report, u64)> {
    let dir = tempfile::tempdir().unwrap();
    let Some((exe, addr)) = build(dir.path()) else {
        println!("skipped: gcc/nm unavailable to build the trigger program");
        return None;
    };
    let mut child = Command::new(&exe)
        .arg(calls.to_string())
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let bp = match Breakpoint::open(child.id() as i32, addr) {
        Ok(bp) => bp,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            println!("skipped: cannot open a hardware breakpoint ({e})");
            return None;
        }
    };
    let waker = SimWaker::new();
    let bufs = sim(1, SimOptions::new(4096, 8192, true), &waker);
    let out = TraceWriter::new(Box::new(SmallDisk::new(1 << 40, 0)), sim_attrs(&ids(1))).unwrap();
    let cfg = SessionConfig {
        mode: Mode::Snapshot { size: None },
        max_snapshots: max,
        snapshot_on_exit: false,
        poll_interval: Duration::from_millis(2),
        ..Default::default()
    };
    let session = Session::new(vec![bufs[0].buffer(0, Some(0)).unwrap()], out, cfg)
        .with_waiter(Box::new(SimWaiter::new(waker)));
    let stop = StopSignal::new();
    let done = Arc::new(AtomicBool::new(false));
    let run = Arc::new(AtomicBool::new(true));
    let producer = {
        let (b, run) = (Arc::clone(&bufs[0]), Arc::clone(&run));
        thread::spawn(move || {
            let bytes = pattern(1, 4096);
            while run.load(Ordering::Relaxed) {
                b.produce_aux(&bytes[..999]);
                thread::sleep(Duration::from_micros(200));
            }
        })
    };
    let forward = bp.forward(stop.clone(), Arc::clone(&done));
    let report = thread::scope(|sc| {
        let h = sc.spawn(|| session.run(&stop));
        child.stdin.take().unwrap().write_all(b"g").unwrap();
        assert!(child.wait().unwrap().success());
        done.store(true, Ordering::SeqCst);
        let hits = forward.join().unwrap().unwrap();
        stop.targets_exited();
        bufs[0].wake();
        (h.join().unwrap().unwrap(), hits)
    });
    run.store(false, Ordering::Relaxed);
    producer.join().unwrap();
    Some(report)
}

#[test]
fn one_snapshot_per_breakpoint_hit() {
    let Some((report, hits)) = run(5, None) else {
        return;
    };
    assert_eq!(hits, 5, "the breakpoint fires once per call");
    assert_eq!(report.snapshots, 5);
    assert_eq!(report.stop, Some(StopReason::TargetsExited));
}

#[test]
fn breakpoint_snapshots_stop_at_max_snapshots() {
    let Some((report, hits)) = run(6, Some(3)) else {
        return;
    };
    assert_eq!(hits, 6);
    assert_eq!(report.snapshots, 3);
    assert_eq!(report.stop, Some(StopReason::MaxSnapshots));
}
