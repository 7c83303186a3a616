//! Snapshot sessions: the producer keeps overwriting its AUX ring while
//! snapshots are taken; each snapshot must hold exactly the newest bytes
//! (the last ring-size bytes, or all of them before the first wrap) at the
//! moment the buffer was paused.

mod session_util;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use ptrec::session::sim::{sim_attrs, SimBuffer, SimOptions, SimWaiter, SimWaker};
use ptrec::session::{Mode, Report, Session, SessionConfig, StopReason, StopSignal, TraceWriter};
use session_util::*;

const AUX: u64 = 8192;

fn producer(buf: Arc<SimBuffer>, seed: u64, run: Arc<AtomicBool>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let bytes = pattern(seed, 1 << 16);
        let mut i = 0usize;
        while run.load(Ordering::Relaxed) {
            let n = 61 + (i * 37) % 700;
            let at = (i * 613) % (bytes.len() - n);
            buf.produce_aux(&bytes[at..at + n]);
            i += 1;
            if i % 8 == 0 {
                thread::sleep(Duration::from_micros(50));
            }
        }
    })
}

fn wait_pauses(bufs: &[Arc<SimBuffer>], n: usize) {
    let t = Instant::now();
    while bufs.iter().any(|b| b.pause_heads().len() < n) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "snapshot {n} never taken"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

/// Each chunk of each buffer is the newest bytes at one of its pauses.
fn check_snapshots(bufs: &[Arc<SimBuffer>], bytes: &[u8], limit: Option<u64>) -> Vec<usize> {
    let p = parse(bytes);
    let mut counts = Vec::new();
    for (i, b) in bufs.iter().enumerate() {
        let stream = b.aux_stream();
        let heads = b.pause_heads();
        let chunks = p.aux.get(&(i as u32)).cloned().unwrap_or_default();
        let mut last = 0;
        for c in &chunks {
            let want = |h: u64| h.min(AUX).min(limit.unwrap_or(u64::MAX));
            let h = *heads
                .iter()
                .find(|&&h| h > last && h > c.offset && h - c.offset == want(h))
                .unwrap_or_else(|| {
                    panic!(
                        "buffer {i}: chunk at {} matches no pause head {heads:?}",
                        c.offset
                    )
                });
            last = h;
            let len = (h - c.offset) as usize;
            assert!(c.data.len() >= len && c.data.len() - len < 8);
            assert!(c.data[len..].iter().all(|&x| x == 0));
            assert!(
                c.data[..len] == stream[c.offset as usize..h as usize],
                "buffer {i}: snapshot ending at {h} differs from the producer's bytes"
            );
            assert_eq!(c.cpu, i as u32);
        }
        counts.push(chunks.len());
    }
    counts
}

fn session(
    bufs: &[Arc<SimBuffer>],
    waker: &Arc<SimWaker>,
    cfg: SessionConfig,
) -> (Session, Arc<std::sync::Mutex<Vec<u8>>>) {
    let disk = SmallDisk::new(u64::MAX / 2, 0);
    let bytes = Arc::clone(&disk.bytes);
    let out = TraceWriter::new(Box::new(disk), sim_attrs(&ids(bufs.len()))).unwrap();
    let buffers = bufs
        .iter()
        .enumerate()
        .map(|(i, b)| b.buffer(i as u32, Some(i as u32)).unwrap())
        .collect();
    let s =
        Session::new(buffers, out, cfg).with_waiter(Box::new(SimWaiter::new(Arc::clone(waker))));
    (s, bytes)
}

fn snapshot_cfg(size: Option<u64>) -> SessionConfig {
    SessionConfig {
        mode: Mode::Snapshot { size },
        poll_interval: Duration::from_millis(2),
        ..Default::default()
    }
}

#[test]
fn several_snapshots_while_the_producer_overwrites() {
    let waker = SimWaker::new();
    let bufs = sim(2, SimOptions::new(4096, AUX, true), &waker);
    for (i, b) in bufs.iter().enumerate() {
        b.produce_aux(&pattern(50 + i as u64, 3000)); // not wrapped yet
    }
    let (s, out) = session(&bufs, &waker, snapshot_cfg(None));
    let stop = StopSignal::new();
    let run = Arc::new(AtomicBool::new(true));
    let report: Report = thread::scope(|sc| {
        let h = sc.spawn(|| s.run(&stop));
        stop.request_snapshot();
        wait_pauses(&bufs, 1);
        let ps: Vec<_> = bufs
            .iter()
            .enumerate()
            .map(|(i, b)| producer(Arc::clone(b), i as u64 + 9, Arc::clone(&run)))
            .collect();
        for k in 2..=5 {
            thread::sleep(Duration::from_millis(15));
            stop.request_snapshot();
            wait_pauses(&bufs, k);
        }
        run.store(false, Ordering::Relaxed);
        for p in ps {
            p.join().unwrap();
        }
        for b in &bufs {
            b.produce_aux(&pattern(77, 500));
        }
        stop.stop(StopReason::Requested); // one more snapshot on the way out
        h.join().unwrap().unwrap()
    });
    assert_eq!(report.snapshots, 6);
    assert_eq!(report.stop, Some(StopReason::Requested));
    let bytes = out.lock().unwrap().clone();
    let counts = check_snapshots(&bufs, &bytes, None);
    assert_eq!(counts, vec![6, 6]);
    let p = parse(&bytes);
    for chunks in p.aux.values() {
        assert_eq!(chunks[0].offset, 0);
        assert_eq!(chunks[0].data.len(), 3000usize.next_multiple_of(8));
        assert!(
            chunks[1..].iter().all(|c| c.data.len() == AUX as usize),
            "wrapped: whole ring"
        );
    }
}

#[test]
fn max_snapshots_ends_the_session() {
    let waker = SimWaker::new();
    let bufs = sim(1, SimOptions::new(4096, AUX, true), &waker);
    let (s, out) = session(
        &bufs,
        &waker,
        SessionConfig {
            max_snapshots: Some(3),
            ..snapshot_cfg(None)
        },
    );
    let stop = StopSignal::new();
    let run = Arc::new(AtomicBool::new(true));
    let p = producer(Arc::clone(&bufs[0]), 5, Arc::clone(&run));
    thread::sleep(Duration::from_millis(5));
    let report = thread::scope(|sc| {
        let h = sc.spawn(|| s.run(&stop));
        for k in 1..=3 {
            // New bytes before each snapshot, or it has no chunk: on a
            // loaded machine the producer may not run for a few ms.
            let before = bufs[0].aux_stream().len();
            let t = std::time::Instant::now();
            while bufs[0].aux_stream().len() == before {
                assert!(
                    t.elapsed() < Duration::from_secs(10),
                    "the producer stalled"
                );
                thread::sleep(Duration::from_millis(1));
            }
            stop.request_snapshot();
            wait_pauses(&bufs, k);
        }
        // Requests past the maximum are not served.
        for _ in 0..7 {
            stop.request_snapshot();
        }
        h.join().unwrap().unwrap()
    });
    run.store(false, Ordering::Relaxed);
    p.join().unwrap();
    assert_eq!(report.snapshots, 3);
    assert_eq!(report.stop, Some(StopReason::MaxSnapshots));
    assert_eq!(check_snapshots(&bufs, &out.lock().unwrap(), None), vec![3]);
}

#[test]
fn snapshot_size_and_disable_when_pause_is_unavailable() {
    let waker = SimWaker::new();
    let opts = SimOptions {
        can_pause: false,
        ..SimOptions::new(4096, AUX, true)
    };
    let bufs = sim(1, opts, &waker);
    let (s, out) = session(
        &bufs,
        &waker,
        SessionConfig {
            snapshot_on_exit: false,
            ..snapshot_cfg(Some(1000))
        },
    );
    let stop = StopSignal::new();
    let run = Arc::new(AtomicBool::new(true));
    let p = producer(Arc::clone(&bufs[0]), 6, Arc::clone(&run));
    let report = thread::scope(|sc| {
        let h = sc.spawn(|| s.run(&stop));
        for k in 1..=4 {
            thread::sleep(Duration::from_millis(10));
            stop.request_snapshot();
            wait_pauses(&bufs, k);
        }
        stop.targets_exited();
        h.join().unwrap().unwrap()
    });
    run.store(false, Ordering::Relaxed);
    p.join().unwrap();
    assert_eq!(report.snapshots, 4);
    // Resumed (re-enabled) after each snapshot: every one saw new bytes.
    assert_eq!(
        check_snapshots(&bufs, &out.lock().unwrap(), Some(1000)),
        vec![4]
    );
}
