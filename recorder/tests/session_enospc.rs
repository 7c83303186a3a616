//! The disk fills up mid-recording: the session stops with a clear error,
//! and DIR/data is still a readable perf.data holding everything written
//! before the failure.

mod session_util;

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use ptrec::session::sim::{sim_attrs, SimOptions, SimWaiter, SimWaker};
use ptrec::session::{Session, SessionConfig, SessionError, StopReason, StopSignal, TraceWriter};
use session_util::*;

#[test]
fn disk_full_leaves_a_readable_file_of_everything_before() {
    let waker = SimWaker::new();
    let bufs = sim(2, SimOptions::new(2048, 16384, false), &waker);
    let disk = SmallDisk::new(300_000, 64 << 10);
    let bytes = Arc::clone(&disk.bytes);
    let out = TraceWriter::new(Box::new(disk), sim_attrs(&ids(2))).unwrap();
    let buffers = bufs
        .iter()
        .enumerate()
        .map(|(i, b)| b.buffer(i as u32, Some(i as u32)).unwrap())
        .collect();
    let cfg = SessionConfig {
        poll_interval: Duration::from_millis(2),
        ..Default::default()
    };
    let session =
        Session::new(buffers, out, cfg).with_waiter(Box::new(SimWaiter::new(Arc::clone(&waker))));
    let stop = StopSignal::new();
    let err = thread::scope(|sc| {
        let h = sc.spawn(|| session.run(&stop));
        // Kernel-like producers (they drop what does not fit) writing far
        // more than the disk holds.
        let ps: Vec<_> = bufs
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let b = Arc::clone(b);
                thread::spawn(move || {
                    let data = pattern(i as u64 + 20, 1 << 20);
                    for (k, c) in data.chunks(1001).enumerate() {
                        b.produce_aux(c);
                        if k % 4 == 0 {
                            b.produce_record(&comm(&b, k as u32, k % 17));
                        }
                        thread::sleep(Duration::from_micros(20));
                    }
                })
            })
            .collect();
        for p in ps {
            p.join().unwrap();
        }
        stop.stop(StopReason::Requested);
        bufs[0].wake();
        h.join().unwrap().expect_err("the disk filled up")
    });
    let SessionError::Output {
        ref report,
        finalized,
        ..
    } = err
    else {
        panic!("not an output error: {err}")
    };
    let msg = err.to_string();
    assert!(
        msg.contains("disk is full") && msg.contains("readable"),
        "{msg}"
    );
    assert!(finalized);
    assert_eq!(report.stop, Some(StopReason::WriteFailed));
    let bytes = bytes.lock().unwrap().clone();
    assert_eq!(report.file_bytes, bytes.len() as u64);
    assert!(bytes.len() as u64 <= 300_000 + (64 << 10));
    // Everything in the file is a prefix of what was produced.
    let p = parse(&bytes);
    let mut aux_total = 0;
    for (i, b) in bufs.iter().enumerate() {
        let stream = b.aux_stream();
        let chunks = p.aux.get(&(i as u32)).cloned().unwrap_or_default();
        let mut pos = 0u64;
        for c in &chunks {
            assert_eq!(c.offset, pos);
            assert!(c.data[..] == stream[pos as usize..pos as usize + c.data.len()]);
            pos += c.data.len() as u64;
        }
        aux_total += pos;
        let data = p.data.get(&(100 + i as u64)).cloned().unwrap_or_default();
        let produced = b.data_stream();
        assert!(produced.starts_with(&data), "buffer {i}: DATA is a prefix");
    }
    assert_eq!(aux_total, report.bytes_aux);
    assert!(
        aux_total > 100_000,
        "most of the disk holds trace: {aux_total}"
    );
}
