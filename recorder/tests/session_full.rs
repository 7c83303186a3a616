//! Full-trace sessions against producer threads that write the rings as the
//! kernel does: what lands in perf.data equals, byte for byte, what was
//! produced, across wraps, split records, back-pressure and loss.

mod session_util;

use std::io::Cursor;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use ptrec::session::sim::{sim_attrs, SimBuffer, SimOptions, SimWaiter, SimWaker};
use ptrec::session::{
    Mode, OutputSink, Session, SessionConfig, SleepWaiter, StopReason, StopSignal, TraceWriter,
};
use session_util::*;

/// A shared in-memory output whose bytes the test reads afterwards.
#[derive(Clone, Default)]
struct Mem(Arc<std::sync::Mutex<Cursor<Vec<u8>>>>);

impl std::io::Write for Mem {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
impl std::io::Seek for Mem {
    fn seek(&mut self, p: std::io::SeekFrom) -> std::io::Result<u64> {
        self.0.lock().unwrap().seek(p)
    }
}
impl OutputSink for Mem {
    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.0.lock().unwrap().get_mut().truncate(len as usize);
        Ok(())
    }
}

/// Produces `aux_total` AUX bytes (odd chunk sizes) and COMM records of
/// varying size into `buf`. `polite` waits for room instead of letting the
/// kernel drop bytes; at the end, one record is retried until it fits so
/// pending losses are reported, and the pending AUX record is flushed.
fn produce(
    buf: Arc<SimBuffer>,
    seed: u64,
    aux_total: usize,
    polite: bool,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let bytes = pattern(seed, aux_total);
        let mut sent = 0;
        let mut i = 0u32;
        while sent < bytes.len() {
            let n = (97 + (i as usize * 331) % 2900).min(bytes.len() - sent);
            if polite {
                while buf.aux_room() < n as u64 {
                    thread::yield_now();
                }
            }
            buf.produce_aux(&bytes[sent..sent + n]);
            sent += n;
            if i % 3 == 0 {
                let rec = comm(&buf, i, (i % 29) as usize);
                while !buf.produce_record(&rec) && polite {
                    thread::yield_now();
                }
            }
            i += 1;
            if i % 16 == 0 {
                thread::yield_now();
            }
        }
        buf.flush();
        let last = comm(&buf, 999_999, 3);
        while !buf.produce_record(&last) {
            thread::sleep(Duration::from_millis(1));
        }
    })
}

fn run_session(
    bufs: &[Arc<SimBuffer>],
    cfg: SessionConfig,
    waiter: Box<dyn ptrec::session::Waiter>,
    producers: Vec<thread::JoinHandle<()>>,
) -> (ptrec::session::Report, Vec<u8>) {
    let mem = Mem::default();
    let out = TraceWriter::new(Box::new(mem.clone()), sim_attrs(&ids(bufs.len()))).unwrap();
    let buffers = bufs
        .iter()
        .enumerate()
        .map(|(i, b)| b.buffer(i as u32, Some(i as u32)).unwrap())
        .collect();
    let stop = StopSignal::new();
    let session = Session::new(buffers, out, cfg).with_waiter(waiter);
    let report = thread::scope(|s| {
        let h = s.spawn(|| session.run(&stop));
        for p in producers {
            p.join().unwrap();
        }
        stop.targets_exited();
        bufs[0].wake();
        h.join().unwrap().expect("session ok")
    });
    let bytes = mem.0.lock().unwrap().get_ref().clone();
    assert_eq!(report.file_bytes, bytes.len() as u64);
    (report, bytes)
}

fn check_equal(bufs: &[Arc<SimBuffer>], bytes: &[u8]) {
    let p = parse(bytes);
    for (i, b) in bufs.iter().enumerate() {
        let stream = b.aux_stream();
        assert_contiguous(p.aux.get(&(i as u32)).map_or(&[][..], |v| v), &stream);
        let data = p.data.get(&(100 + i as u64)).cloned().unwrap_or_default();
        assert!(data == b.data_stream(), "buffer {i}: DATA records differ");
    }
    assert!(p.rounds > 0, "FINISHED_ROUND after drain passes");
    assert_eq!(
        p.auxtrace_index_entries,
        p.aux.values().map(Vec::len).sum::<usize>()
    );
}

#[test]
fn two_buffers_wrap_and_split_records_byte_for_byte() {
    let waker = SimWaker::new();
    // Small rings: the AUX ring wraps ~100 times, DATA records straddle its end.
    let bufs = sim(2, SimOptions::new(1024, 8192, false), &waker);
    let producers = bufs
        .iter()
        .enumerate()
        .map(|(i, b)| produce(Arc::clone(b), i as u64 + 1, 800_001 + i, true))
        .collect();
    let cfg = SessionConfig {
        poll_interval: Duration::from_millis(5),
        ..Default::default()
    };
    let (report, bytes) = run_session(&bufs, cfg, Box::new(SimWaiter::new(waker)), producers);
    assert_eq!(report.stop, Some(StopReason::TargetsExited));
    assert_eq!(report.bytes_aux, 800_001 + 800_002);
    assert_eq!(report.lost_records, 0);
    assert_eq!(report.truncated_aux, 0);
    check_equal(&bufs, &bytes);
}

#[test]
fn back_pressure_losses_are_recorded_and_counted() {
    let waker = SimWaker::new();
    // Tiny rings and a slow, sleeping drain: the producer overruns both.
    let bufs = sim(1, SimOptions::new(512, 4096, false), &waker);
    let producers = vec![produce(Arc::clone(&bufs[0]), 7, 400_000, false)];
    let cfg = SessionConfig {
        poll_interval: Duration::from_millis(3),
        ..Default::default()
    };
    let (report, bytes) = run_session(&bufs, cfg, Box::new(SleepWaiter), producers);
    let b = &bufs[0];
    assert!(
        b.aux_dropped() > 0,
        "the producer must have overrun the AUX ring"
    );
    assert!(b.lost_records() > 0, "and the DATA ring");
    assert_eq!(report.lost_records, b.lost_records());
    assert_eq!(report.truncated_aux, b.truncated_records());
    assert!(report.truncated_aux > 0);
    assert_eq!(report.bytes_aux, b.aux_stream().len() as u64);
    check_equal(&bufs, &bytes);
}

#[test]
fn watermark_wakeups_drive_the_drain() {
    let waker = SimWaker::new();
    let bufs = sim(1, SimOptions::new(4096, 16384, false), &waker);
    let producers = vec![produce(Arc::clone(&bufs[0]), 3, 2_000_000, true)];
    // A poll interval far longer than the test: only wake-ups can drain.
    let cfg = SessionConfig {
        poll_interval: Duration::from_secs(30),
        ..Default::default()
    };
    let t = Instant::now();
    let stop_waker = Arc::clone(&waker);
    let (report, bytes) = run_session(&bufs, cfg, Box::new(SimWaiter::new(waker)), producers);
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    assert!(
        stop_waker.wakeups() > 100,
        "{} wake-ups",
        stop_waker.wakeups()
    );
    assert_eq!(report.bytes_aux, 2_000_000);
    check_equal(&bufs, &bytes);
}

#[test]
fn backlog_absorbs_a_stalled_writer_without_blocking_the_drain() {
    // channel_depth 1 and a tiny output sink that is slow: the backlog grows.
    #[derive(Clone, Default)]
    struct Slow(Mem);
    impl std::io::Write for Slow {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if b.len() > 1000 {
                thread::sleep(Duration::from_millis(2));
            }
            self.0.write(b)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl std::io::Seek for Slow {
        fn seek(&mut self, p: std::io::SeekFrom) -> std::io::Result<u64> {
            self.0.seek(p)
        }
    }
    impl OutputSink for Slow {
        fn truncate(&mut self, len: u64) -> std::io::Result<()> {
            self.0.truncate(len)
        }
    }
    let waker = SimWaker::new();
    let bufs = sim(1, SimOptions::new(4096, 8192, false), &waker);
    let slow = Slow::default();
    let out = TraceWriter::new(Box::new(slow.clone()), sim_attrs(&ids(1))).unwrap();
    let stop = StopSignal::new();
    let cfg = SessionConfig {
        channel_depth: 1,
        poll_interval: Duration::from_millis(1),
        mode: Mode::FullTrace,
        ..Default::default()
    };
    let session = Session::new(vec![bufs[0].buffer(0, None).unwrap()], out, cfg)
        .with_waiter(Box::new(SimWaiter::new(Arc::clone(&waker))));
    let p = produce(Arc::clone(&bufs[0]), 11, 1_000_000, true);
    let report = thread::scope(|s| {
        let h = s.spawn(|| session.run(&stop));
        p.join().unwrap();
        stop.stop(StopReason::Requested);
        h.join().unwrap().unwrap()
    });
    assert!(report.backlog_peak_bytes > 0, "{report:?}");
    assert_eq!(report.truncated_aux, 0);
    let bytes = slow.0 .0.lock().unwrap().get_ref().clone();
    check_equal(&bufs, &bytes);
}
