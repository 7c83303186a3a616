//! The drain loop (on the caller's thread) and the writer thread.
//!
//! Drain side: each pass copies new DATA records and, in full-trace mode,
//! new AUX bytes out of every ring, releases them to the kernel (tails move
//! after a release fence, in [`Ring`]), and hands the copies to the writer
//! over a bounded channel with `try_send`. The drain thread never blocks on
//! the channel: when it is full, copies wait in the drain thread's own
//! queue (the backlog, in order), because with the kernel NOT draining is
//! what loses data. The backlog is capped (`max_backlog_bytes`); past the
//! cap AUX areas are left alone until the writer catches up, so the kernel
//! records the loss itself (PERF_RECORD_AUX, TRUNCATED) in the trace rather
//! than the recorder dropping bytes it already copied. DATA is always drained.
//!
//! Full-trace AUX chunks end on an 8-byte boundary (the remainder waits for
//! the next pass), so no AUXTRACE padding lands inside the stream: chunk
//! offsets stay contiguous and a decoder can concatenate them. Only the last
//! chunk of a buffer may be padded with zeros (PT PAD packets), as perf does.
//!
//! Snapshot mode follows perf's `__auxtrace_mmap__read` with
//! `intel_pt_find_snapshot`: all buffers are paused, each ring is copied
//! (the whole ring once it has wrapped, else `[0, head)`; at most the
//! snapshot size, newest bytes), then all are resumed. Wrapping is known from
//! a head past the ring size (monotonic heads) or, for kernels whose
//! overwrite-mode head is an offset within the ring, from non-zero bytes at
//! the ring's end (the AUX pages start zeroed), as perf's
//! `intel_pt_first_wrap` does. Each snapshot is one AUXTRACE per buffer whose
//! `offset` is the (monotonic) AUX position of its first byte and whose
//! `reference` is the TSC at the snapshot, so each decodes on its own.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use sideband::record::{aux_flags, kind, Auxtrace};

use super::wait::PollWaiter;
use super::{
    Buffer, BufferStats, DataObserver, Mode, Progress, ProgressFn, Report, Session, SessionConfig,
    SessionError, StopReason, StopSignal, TraceWriter, Waiter,
};
use crate::sys;

/// Bytes checked at the ring's end to tell whether an overwrite-mode ring
/// with a non-monotonic head has wrapped (perf checks 512 u64 words).
const WRAP_PROBE: u64 = 4096;

/// What the drain thread hands the writer.
enum Msg {
    /// Whole DATA records of buffer `buf` (an index into the session's buffers).
    Data { buf: usize, bytes: Vec<u8> },
    /// One AUXTRACE chunk; `bytes` is padded to 8, `len` is without padding.
    Aux {
        buf: usize,
        offset: u64,
        reference: u64,
        len: u64,
        bytes: Vec<u8>,
    },
    /// End of a drain pass: PERF_RECORD_FINISHED_ROUND.
    Round,
}

impl Msg {
    fn bytes(&self) -> u64 {
        match self {
            Msg::Data { bytes, .. } | Msg::Aux { bytes, .. } => bytes.len() as u64,
            Msg::Round => 0,
        }
    }
}

/// Shared between the threads for the progress line.
#[derive(Debug, Default)]
struct Counters {
    written: AtomicU64,
    copied: AtomicU64,
    lost: AtomicU64,
    truncated: AtomicU64,
}

#[derive(Debug, Clone, Copy)]
struct Meta {
    idx: u32,
    cpu: u32,
    tid: u32,
}

/// The drain thread's state of one buffer.
#[derive(Debug, Default)]
struct Drain {
    /// Full trace: our AUX tail (monotonic).
    aux_pos: u64,
    /// Snapshot: the ring has wrapped at least once.
    wrapped: bool,
    /// Snapshot: the (monotonic) head of the previous snapshot.
    last_snapshot: Option<u64>,
    copied_aux: u64,
    copied_data: u64,
    overrun_aux: u64,
}

pub(super) fn run(s: Session, stop: &StopSignal) -> Result<Report, SessionError> {
    let Session {
        buffers,
        out,
        cfg,
        waiter,
        progress,
        observer,
    } = s;
    let started = Instant::now();
    let counters = Arc::new(Counters::default());
    let meta: Vec<Meta> = buffers
        .iter()
        .map(|b| Meta {
            idx: b.idx,
            cpu: b.cpu.unwrap_or(u32::MAX),
            tid: b.tid.unwrap_or(u32::MAX),
        })
        .collect();
    let (tx, rx) = crossbeam_channel::bounded(cfg.channel_depth.max(1));
    let writer = {
        let counters = Arc::clone(&counters);
        let stop = stop.clone();
        thread::Builder::new()
            .name("ptrec-writer".into())
            .spawn(move || write_loop(out, rx, meta, counters, observer, stop))
            .map_err(|_| SessionError::Panic("writer (spawn)"))?
    };

    let mut d = Drainer {
        drains: buffers
            .iter()
            .map(|b| Drain {
                aux_pos: b.ring.aux_tail(),
                ..Default::default()
            })
            .collect(),
        buffers,
        cfg,
        tx,
        backlog: VecDeque::new(),
        backlog_bytes: 0,
        backlog_peak: 0,
        stalls: 0,
        snapshots: 0,
        counters: Arc::clone(&counters),
    };
    let mut waiter = waiter.unwrap_or_else(|| Box::new(PollWaiter));
    let result = d.record(stop, waiter.as_mut(), progress, started);
    let reason = stop.stop_reason();
    let teardown = d.teardown(reason, result.is_ok());
    let Drainer {
        drains,
        tx,
        backlog_peak,
        stalls,
        snapshots,
        ..
    } = d;
    drop(tx);
    let w = writer.join().map_err(|_| SessionError::Panic("writer"))?;

    let mut report = Report {
        snapshots,
        duration: started.elapsed(),
        stop: stop.stop_reason(),
        backlog_peak_bytes: backlog_peak,
        backlog_stalls: stalls,
        ..Default::default()
    };
    for (mut st, dr) in w.stats.into_iter().zip(&drains) {
        st.overrun_aux = dr.overrun_aux;
        report.bytes_aux += st.bytes_aux;
        report.bytes_data += st.bytes_data;
        report.lost_records = report.lost_records.saturating_add(st.lost_records);
        report.truncated_aux += st.truncated_aux;
        report.per_buffer.push(st);
    }
    match (w.error, w.finish) {
        (None, Ok(size)) => {
            report.file_bytes = size;
            result?;
            teardown?;
            Ok(report)
        }
        (err, finish) => {
            let finalized = finish.is_ok();
            if let Ok(size) = finish {
                report.file_bytes = size;
            }
            let source = match (err, finish) {
                (Some(e), _) => e,
                (None, Err(e)) => e,
                (None, Ok(_)) => unreachable!("handled above"),
            };
            Err(SessionError::Output {
                source,
                report: Box::new(report),
                finalized,
            })
        }
    }
}

struct Drainer {
    buffers: Vec<Buffer>,
    drains: Vec<Drain>,
    cfg: SessionConfig,
    tx: Sender<Msg>,
    backlog: VecDeque<Msg>,
    backlog_bytes: u64,
    backlog_peak: u64,
    stalls: u64,
    snapshots: u32,
    counters: Arc<Counters>,
}

impl Drainer {
    /// The loop: passes, snapshot requests, waits, until a stop.
    fn record(
        &mut self,
        stop: &StopSignal,
        waiter: &mut dyn Waiter,
        mut progress: Option<ProgressFn>,
        started: Instant,
    ) -> Result<(), SessionError> {
        let deadline = self.cfg.duration.map(|d| started + d);
        let mut snap_seen = 0u64;
        let mut last_progress = (started, 0u64);
        loop {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                stop.stop(StopReason::Duration);
            }
            // Requests made before a stop are served before it.
            if let Mode::Snapshot { .. } = self.cfg.mode {
                let requests = stop.snapshot_requests();
                while snap_seen < requests && !self.max_snapshots_reached() {
                    snap_seen += 1;
                    self.snapshot()?;
                }
                if self.max_snapshots_reached() {
                    stop.stop(StopReason::MaxSnapshots);
                }
            }
            if stop.stop_reason().is_some() {
                return Ok(());
            }
            self.pass(false)?;
            self.flush_backlog();
            if let Some(f) = progress.as_mut() {
                let now = Instant::now();
                if now - last_progress.0 >= self.cfg.progress_interval {
                    let p = self.progress(started, now, last_progress);
                    last_progress = (now, p.bytes_copied);
                    f(&p);
                }
            }
            let mut timeout = if self.backlog.is_empty() {
                self.cfg.poll_interval
            } else {
                self.cfg.poll_interval.min(Duration::from_millis(1))
            };
            if let Some(d) = deadline {
                timeout = timeout.min(d.saturating_duration_since(Instant::now()));
            }
            // A failing wait must not end the recording: fall back to a sleep.
            if waiter.wait(&self.buffers, timeout).is_err() {
                thread::sleep(timeout);
            }
        }
    }

    fn max_snapshots_reached(&self) -> bool {
        self.cfg.max_snapshots.is_some_and(|m| self.snapshots >= m)
    }

    fn progress(&self, started: Instant, now: Instant, last: (Instant, u64)) -> Progress {
        let copied = self.counters.copied.load(Ordering::Relaxed);
        let secs = (now - last.0).as_secs_f64();
        Progress {
            elapsed: now - started,
            bytes_written: self.counters.written.load(Ordering::Relaxed),
            bytes_copied: copied,
            bytes_per_sec: if secs > 0.0 {
                (copied - last.1) as f64 / secs
            } else {
                0.0
            },
            lost_records: self.counters.lost.load(Ordering::Relaxed),
            truncated_aux: self.counters.truncated.load(Ordering::Relaxed),
            snapshots: self.snapshots,
            backlog_bytes: self.backlog_bytes,
        }
    }

    /// The end: a last snapshot, events disabled, a last full pass, and
    /// the backlog handed over (blocking now: nothing is left to drain).
    fn teardown(&mut self, reason: Option<StopReason>, ok: bool) -> Result<(), SessionError> {
        let write_failed = reason == Some(StopReason::WriteFailed);
        let mut result = Ok(());
        if ok
            && !write_failed
            && matches!(self.cfg.mode, Mode::Snapshot { .. })
            && self.cfg.snapshot_on_exit
            && !self.max_snapshots_reached()
        {
            result = self.snapshot();
        }
        for b in &self.buffers {
            // The task may be gone; the final pass below still drains.
            let _ = b.control.disable();
        }
        if !write_failed {
            let last = self.pass(true);
            result = result.and(last);
        }
        while let Some(m) = self.backlog.pop_front() {
            if self.tx.send(m).is_err() {
                break;
            }
        }
        self.backlog_bytes = 0;
        result
    }

    /// One drain pass over every buffer; `last` drains the AUX remainder too.
    fn pass(&mut self, last: bool) -> Result<(), SessionError> {
        let full = self.cfg.mode == Mode::FullTrace;
        let stalled = full && !last && self.backlog_bytes >= self.cfg.max_backlog_bytes;
        if stalled {
            self.stalls += 1;
        }
        let mut sent = false;
        for i in 0..self.buffers.len() {
            let b = &self.buffers[i];
            let mut data = Vec::new();
            b.ring
                .drain_data(&mut data)
                .map_err(|source| SessionError::Ring { idx: b.idx, source })?;
            if !data.is_empty() {
                self.drains[i].copied_data += data.len() as u64;
                self.counters
                    .copied
                    .fetch_add(data.len() as u64, Ordering::Relaxed);
                self.send(Msg::Data {
                    buf: i,
                    bytes: data,
                });
                sent = true;
            }
            if full && !stalled {
                if let Some(m) = self.drain_aux(i, last) {
                    self.send(m);
                    sent = true;
                }
            }
        }
        if sent {
            self.send(Msg::Round);
        }
        Ok(())
    }

    /// Full trace: copies the AUX bytes between our tail and the head.
    fn drain_aux(&mut self, i: usize, last: bool) -> Option<Msg> {
        let ring = &self.buffers[i].ring;
        let size = ring.aux_size()?;
        let st = &mut self.drains[i];
        let head = ring.aux_head();
        let mut tail = st.aux_pos;
        if head <= tail {
            return None;
        }
        if head - tail > size {
            // Cannot happen with a read-write mapping: the kernel stops at
            // our tail. Count it and take what the ring still holds.
            st.overrun_aux += head - tail - size;
            tail = head - size;
        }
        let avail = head - tail;
        let len = if last { avail } else { avail & !7 };
        if len == 0 {
            return None;
        }
        let mut bytes = Vec::with_capacity(len as usize + 8);
        ring.copy_aux(tail, len, &mut bytes);
        ring.set_aux_tail(tail + len);
        st.aux_pos = tail + len;
        st.copied_aux += len;
        self.counters.copied.fetch_add(len, Ordering::Relaxed);
        bytes.resize(bytes.len().next_multiple_of(8), 0);
        Some(Msg::Aux {
            buf: i,
            offset: tail,
            reference: sys::tsc(),
            len,
            bytes,
        })
    }

    /// One snapshot of every buffer, taken while all are paused.
    fn snapshot(&mut self) -> Result<(), SessionError> {
        let limit = match self.cfg.mode {
            Mode::Snapshot { size } => size,
            Mode::FullTrace => return Ok(()),
        };
        let mut paused = Vec::with_capacity(self.buffers.len());
        let mut err = None;
        for (i, b) in self.buffers.iter().enumerate() {
            if b.ring.aux_size().is_none() {
                continue;
            }
            match b.control.pause() {
                Ok(()) => paused.push(i),
                Err(source) => {
                    err = Some(SessionError::Control {
                        idx: b.idx,
                        what: "pause",
                        source,
                    });
                    break;
                }
            }
        }
        let reference = sys::tsc();
        let mut msgs = Vec::new();
        if err.is_none() {
            for &i in &paused {
                if let Some(m) = self.copy_snapshot(i, limit, reference) {
                    msgs.push(m);
                }
            }
        }
        for &i in &paused {
            let b = &self.buffers[i];
            if let Err(source) = b.control.resume() {
                err.get_or_insert(SessionError::Control {
                    idx: b.idx,
                    what: "resume",
                    source,
                });
            }
        }
        if let Some(e) = err {
            return Err(e);
        }
        self.snapshots += 1;
        for m in msgs {
            self.send(m);
        }
        self.send(Msg::Round);
        Ok(())
    }

    fn copy_snapshot(&mut self, i: usize, limit: Option<u64>, reference: u64) -> Option<Msg> {
        let ring = &self.buffers[i].ring;
        let size = ring.aux_size()?;
        let st = &mut self.drains[i];
        let raw = ring.aux_head();
        let at = raw & (size - 1);
        if !st.wrapped {
            st.wrapped = raw >= size || {
                // Kernels whose overwrite-mode head stays within the ring:
                // bytes past the head were written on an earlier lap.
                let from = at.max(size.saturating_sub(WRAP_PROBE));
                let mut probe = Vec::new();
                ring.copy_aux(from, size - from, &mut probe);
                probe.iter().any(|&b| b != 0)
            };
        }
        let head = if raw < size && st.wrapped {
            raw + size
        } else {
            raw
        };
        if st.last_snapshot == Some(head) {
            return None; // nothing new since the previous snapshot
        }
        st.last_snapshot = Some(head);
        let avail = if st.wrapped { size } else { head };
        let len = limit.map_or(avail, |l| l.min(avail));
        if len == 0 {
            return None;
        }
        let mut bytes = Vec::with_capacity(len as usize + 8);
        ring.copy_aux(head - len, len, &mut bytes);
        st.copied_aux += len;
        self.counters.copied.fetch_add(len, Ordering::Relaxed);
        bytes.resize(bytes.len().next_multiple_of(8), 0);
        Some(Msg::Aux {
            buf: i,
            offset: head - len,
            reference,
            len,
            bytes,
        })
    }

    /// Hands `m` to the writer without ever blocking; keeps order.
    fn send(&mut self, m: Msg) {
        if self.backlog.is_empty() {
            match self.tx.try_send(m) {
                Ok(()) => {}
                Err(TrySendError::Full(m)) => self.queue(m),
                // The writer is gone (it failed and said so): drop.
                Err(TrySendError::Disconnected(_)) => {}
            }
        } else {
            self.queue(m);
        }
    }

    fn queue(&mut self, m: Msg) {
        self.backlog_bytes += m.bytes();
        self.backlog_peak = self.backlog_peak.max(self.backlog_bytes);
        self.backlog.push_back(m);
    }

    fn flush_backlog(&mut self) {
        while let Some(m) = self.backlog.pop_front() {
            let n = m.bytes();
            match self.tx.try_send(m) {
                Ok(()) => self.backlog_bytes -= n,
                Err(TrySendError::Full(m)) => {
                    self.backlog.push_front(m);
                    return;
                }
                Err(TrySendError::Disconnected(_)) => {
                    self.backlog.clear();
                    self.backlog_bytes = 0;
                    return;
                }
            }
        }
    }
}

struct WriterResult {
    stats: Vec<BufferStats>,
    /// The first write error; nothing was written after it.
    error: Option<sideband::Error>,
    finish: Result<u64, sideband::Error>,
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .map_or(0, |s| u64::from_le_bytes(s.try_into().unwrap_or([0; 8])))
}

fn write_loop(
    mut out: TraceWriter,
    rx: Receiver<Msg>,
    meta: Vec<Meta>,
    counters: Arc<Counters>,
    mut observer: Option<DataObserver>,
    stop: StopSignal,
) -> WriterResult {
    let mut stats: Vec<BufferStats> = meta
        .iter()
        .map(|m| BufferStats {
            idx: m.idx,
            ..Default::default()
        })
        .collect();
    let mut error = None;
    let mut since_round = false;
    const FINISHED_ROUND: [u8; 8] = {
        let k = kind::FINISHED_ROUND.to_le_bytes();
        [k[0], k[1], k[2], k[3], 0, 0, 8, 0]
    };
    for msg in rx {
        if error.is_some() {
            continue; // keep receiving so the drain thread never blocks
        }
        let r = match msg {
            Msg::Data { buf, bytes } => {
                if let Some(f) = observer.as_mut() {
                    f(meta[buf].idx, &bytes);
                }
                write_data(&mut out, &bytes, &mut stats[buf], &counters)
            }
            Msg::Aux {
                buf,
                offset,
                reference,
                len,
                bytes,
            } => {
                let m = meta[buf];
                out.write_auxtrace(Auxtrace {
                    offset,
                    reference,
                    idx: m.idx,
                    tid: m.tid,
                    cpu: m.cpu,
                    data: Cow::Borrowed(&bytes),
                })
                .map(|_| stats[buf].bytes_aux += len)
            }
            Msg::Round => {
                if since_round {
                    since_round = false;
                    // Then the header's data size, so that a killed ptrec
                    // leaves a file readable up to this round (perf too).
                    out.write_raw(&FINISHED_ROUND)
                        .and_then(|_| out.sync_header())
                } else {
                    Ok(())
                }
            }
        };
        match r {
            Ok(()) => since_round = true,
            Err(e) => {
                error = Some(e);
                stop.stop(StopReason::WriteFailed);
            }
        }
        counters.written.store(out.pos(), Ordering::Relaxed);
    }
    WriterResult {
        stats,
        error,
        finish: out.finish(),
    }
}

/// Writes DATA records one by one (each an all-or-nothing append) and
/// counts the kernel's loss reports among them.
fn write_data(
    out: &mut TraceWriter,
    bytes: &[u8],
    st: &mut BufferStats,
    counters: &Counters,
) -> Result<(), sideband::Error> {
    for rec in sideband::parse::ring_records(bytes) {
        let rec = rec?;
        out.write_raw(rec.bytes)?;
        st.bytes_data += rec.bytes.len() as u64;
        match rec.header.kind {
            kind::LOST => {
                let n = u64_at(rec.bytes, 16);
                st.lost_records = st.lost_records.saturating_add(n);
                counters.lost.fetch_add(n, Ordering::Relaxed);
            }
            kind::AUX => {
                let flags = u64_at(rec.bytes, 24);
                if flags & aux_flags::TRUNCATED != 0 {
                    st.truncated_aux += 1;
                    counters.truncated.fetch_add(1, Ordering::Relaxed);
                }
                if flags & (aux_flags::PARTIAL | aux_flags::COLLISION) != 0 {
                    st.partial_aux += 1;
                }
            }
            _ => {}
        }
    }
    Ok(())
}
