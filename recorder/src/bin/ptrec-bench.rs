//! Benchmark of the session's drain-and-write path against simulated
//! kernel producers (no PMU needed): for 1, 2 and 4 buffers, offered AUX
//! rates are doubled until the producers lose data (AUX ring full → the
//! kernel would truncate), and the table shows the highest rate sustained
//! with zero loss, the first lossy one, and the unthrottled throughput.
//!
//!     cargo run --release -p ptrec --bin ptrec-bench [-- OUT_DIR [SECONDS]]
//!
//! Output goes to a real file in OUT_DIR (default: the temp dir), so the
//! disk and page cache are part of what is measured.
#![deny(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use ptrec::session::sim::{sim_attrs, SimBuffer, SimOptions, SimWaiter, SimWaker};
use ptrec::session::{DataFile, Session, SessionConfig, StopSignal, TraceWriter};

const AUX_SIZE: u64 = 4 << 20;
const DATA_SIZE: u64 = 512 << 10;
const CHUNK: usize = 16 << 10;
const MB: f64 = 1e6;

struct Outcome {
    /// Bytes per second the producers offered in total (throttled runs).
    offered: Option<f64>,
    copied_per_sec: f64,
    lost_bytes: u64,
    produced: u64,
    lost_records: u64,
}

/// One run: `n` buffers each offered `rate` bytes/s (None: as fast as the
/// producer can write) for `secs`.
fn trial(dir: &Path, n: usize, rate: Option<f64>, secs: f64) -> Outcome {
    let waker = SimWaker::new();
    let bufs: Vec<Arc<SimBuffer>> = (0..n)
        .map(|i| {
            let opts = SimOptions {
                keep_stream: false,
                id: 1 + i as u64,
                ..SimOptions::new(DATA_SIZE, AUX_SIZE, false)
            };
            SimBuffer::new(opts, Arc::clone(&waker)).expect("sim buffer")
        })
        .collect();
    let path = dir.join("ptrec-bench.data");
    let sink = DataFile::create(&path, 0).expect("output file");
    let ids: Vec<u64> = (1..=n as u64).collect();
    let out = TraceWriter::new(Box::new(sink), sim_attrs(&ids)).expect("writer");
    let buffers = bufs
        .iter()
        .enumerate()
        .map(|(i, b)| b.buffer(i as u32, Some(i as u32)).expect("buffer"))
        .collect();
    let cfg = SessionConfig {
        poll_interval: Duration::from_millis(10),
        ..Default::default()
    };
    let session = Session::new(buffers, out, cfg).with_waiter(Box::new(SimWaiter::new(waker)));
    let stop = StopSignal::new();
    let running = Arc::new(AtomicBool::new(true));
    let payload: Vec<u8> = (0..CHUNK).map(|i| (i * 7 + 1) as u8).collect();
    let payload = Arc::new(payload);
    let started = Instant::now();
    let report = thread::scope(|s| {
        let h = s.spawn(|| session.run(&stop));
        let producers: Vec<_> = bufs
            .iter()
            .map(|b| {
                let (b, running, payload) =
                    (Arc::clone(b), Arc::clone(&running), Arc::clone(&payload));
                s.spawn(move || {
                    let t = Instant::now();
                    let mut offered = 0u64;
                    let mut k = 0u32;
                    while running.load(Ordering::Relaxed) {
                        if let Some(r) = rate {
                            if offered as f64 > r * t.elapsed().as_secs_f64() {
                                thread::sleep(Duration::from_micros(100));
                                continue;
                            }
                        }
                        let n = b.produce_aux(&payload);
                        offered += CHUNK as u64;
                        if n < CHUNK {
                            // Ring full: the hardware would go on writing (and
                            // losing); the simulated one yields its CPU so the
                            // drain is not starved on small machines.
                            thread::sleep(Duration::from_micros(50));
                        }
                        k += 1;
                        if k % 64 == 0 {
                            // A little sideband, as a real trace has.
                            b.produce_record(&b.make_record(14, &[]));
                        }
                    }
                    b.flush();
                    offered
                })
            })
            .collect();
        thread::sleep(Duration::from_secs_f64(secs));
        running.store(false, Ordering::Relaxed);
        let produced: u64 = producers.into_iter().map(|p| p.join().unwrap_or(0)).sum();
        stop.targets_exited();
        bufs[0].wake();
        (h.join().expect("session thread"), produced)
    });
    let elapsed = started.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&path);
    let (report, produced) = report;
    let report = report.expect("session");
    Outcome {
        // What the producers managed to offer (they are CPU-bound too).
        offered: rate.map(|_| produced as f64 / secs),
        copied_per_sec: report.bytes_aux as f64 / elapsed,
        lost_bytes: bufs.iter().map(|b| b.aux_dropped()).sum(),
        produced,
        lost_records: report.lost_records,
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().map_or_else(std::env::temp_dir, PathBuf::from);
    let secs: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0.5);
    println!(
        "drain+write to {} | AUX ring {} MiB, DATA ring {} KiB per buffer, {CHUNK}-byte producer writes, {secs} s per trial",
        dir.display(),
        AUX_SIZE >> 20,
        DATA_SIZE >> 10
    );
    println!(
        "{:>7} | {:>22} | {:>22} | {:>30}",
        "buffers", "zero loss up to (MB/s)", "first loss at (MB/s)", "unthrottled: MB/s, lost"
    );
    for n in [1usize, 2, 4] {
        let mut best: Option<Outcome> = None;
        #[allow(unused_assignments)]
        let mut first_loss: Option<Outcome> = None;
        let mut rate = 50.0 * MB / n as f64; // per buffer
        while rate * (n as f64) <= 12_800.0 * MB {
            let o = trial(&dir, n, Some(rate), secs);
            if o.lost_bytes > 0 || o.lost_records > 0 {
                first_loss = Some(o);
                break;
            }
            best = Some(o);
            rate *= 2.0;
        }
        // Narrow the edge down between the last clean and the first lossy rate.
        if let (Some(ok), Some(bad)) = (&best, &first_loss) {
            let (mut lo, mut hi) = (ok.offered.unwrap_or(0.0), bad.offered.unwrap_or(0.0));
            for _ in 0..2 {
                let mid = (lo + hi) / 2.0;
                let o = trial(&dir, n, Some(mid / n as f64), secs);
                if o.lost_bytes > 0 || o.lost_records > 0 {
                    hi = mid;
                    first_loss = Some(o);
                } else {
                    lo = mid;
                    best = Some(o);
                }
            }
        }
        let free = trial(&dir, n, None, secs);
        let fmt_ok = best.map_or("-".to_string(), |o| {
            format!(
                "{:.0} (wrote {:.0})",
                o.offered.unwrap_or(0.0) / MB,
                o.copied_per_sec / MB
            )
        });
        let fmt_loss = first_loss.map_or("none up to 12800".to_string(), |o| {
            format!(
                "{:.0} ({:.1}% lost)",
                o.offered.unwrap_or(0.0) / MB,
                100.0 * o.lost_bytes as f64 / (o.produced.max(1)) as f64
            )
        });
        let fmt_free = format!(
            "{:.0}, {:.1}% of {:.0} MB",
            free.copied_per_sec / MB,
            100.0 * free.lost_bytes as f64 / free.produced.max(1) as f64,
            free.produced as f64 / MB
        );
        println!("{n:>7} | {fmt_ok:>22} | {fmt_loss:>22} | {fmt_free:>30}");
    }
}
