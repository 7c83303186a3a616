//! Simulated trace buffers: a [`Block`] with a producer that behaves as the
//! kernel does around it, for the session's tests and the benchmark.
//!
//! What the kernel does and this reproduces: DATA records are refused when
//! they do not fit before `data_tail` and counted; the count is emitted as a
//! PERF_RECORD_LOST ahead of the next record that fits (perf_output_begin).
//! AUX bytes past `aux_tail` are dropped in full-trace mode and a
//! PERF_RECORD_AUX with the TRUNCATED flag says so; in overwrite mode
//! everything is written and the head keeps counting. A PERF_RECORD_AUX is
//! emitted every `aux_watermark` bytes. Waiters are woken when the DATA or
//! AUX ring advanced past its watermark. While paused or disabled nothing is
//! written: AUX bytes are not produced (the hardware is stopped) and DATA
//! records are counted lost, as with PERF_EVENT_IOC_PAUSE_OUTPUT.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use sideband::attr::{self, Attr, AttrSet};
use sideband::record::{aux_flags, kind};

use super::{Buffer, BufferControl, Waiter};
use crate::ring::sim::Block;
use crate::ring::Ring;

/// PERF_SAMPLE_IDENTIFIER: the sample_id_all trailer of simulated records
/// is the buffer's event id alone.
const SAMPLE_IDENTIFIER: u64 = 1 << 16;

/// The attrs for a perf.data of simulated buffers: one dummy event with
/// `sample_id_all` and PERF_SAMPLE_IDENTIFIER, whose ids are the buffers'
/// [`SimOptions::id`]s, so every record names the buffer it came from.
pub fn sim_attrs(ids: &[u64]) -> AttrSet {
    let mut set = AttrSet::new();
    set.push(
        Attr {
            kind: attr::kind::SOFTWARE,
            size: attr::ATTR_SIZE_VER8,
            config: 9, // PERF_COUNT_SW_DUMMY
            sample_type: SAMPLE_IDENTIFIER,
            flags: attr::flags::SAMPLE_ID_ALL,
            ..Default::default()
        },
        ids.to_vec(),
    );
    set
}

/// Wakes a [`SimWaiter`] when any of its buffers crosses a watermark.
#[derive(Debug, Default)]
pub struct SimWaker {
    generation: Mutex<u64>,
    cv: Condvar,
    wakeups: AtomicU64,
}

impl SimWaker {
    pub fn new() -> Arc<SimWaker> {
        Arc::default()
    }

    /// Wakes the waiter (as a stop request should).
    pub fn wake(&self) {
        let mut g = lock(&self.generation);
        *g += 1;
        self.wakeups.fetch_add(1, Ordering::Relaxed);
        self.cv.notify_all();
    }

    /// Wake-ups so far.
    pub fn wakeups(&self) -> u64 {
        self.wakeups.load(Ordering::Relaxed)
    }
}

/// The [`Waiter`] over a [`SimWaker`]: returns at the next wake-up (or
/// at once if one happened since the previous wait), else at the timeout.
#[derive(Debug)]
pub struct SimWaiter {
    waker: Arc<SimWaker>,
    seen: u64,
}

impl SimWaiter {
    pub fn new(waker: Arc<SimWaker>) -> SimWaiter {
        SimWaiter { waker, seen: 0 }
    }
}

impl Waiter for SimWaiter {
    fn wait(&mut self, _buffers: &[Buffer], timeout: Duration) -> io::Result<()> {
        let g = lock(&self.waker.generation);
        let (g, _) = self
            .waker
            .cv
            .wait_timeout_while(g, timeout, |g| *g == self.seen)
            .unwrap_or_else(|e| e.into_inner());
        self.seen = *g;
        Ok(())
    }
}

/// How a simulated buffer behaves.
#[derive(Debug, Clone, Copy)]
pub struct SimOptions {
    pub data_size: u64,
    pub aux_size: u64,
    /// Snapshot mode: the AUX area is overwritten, `aux_tail` ignored.
    pub overwrite: bool,
    /// Wake when this many DATA bytes arrived since the last wake-up.
    pub data_watermark: u64,
    /// Wake (and emit a PERF_RECORD_AUX) every this many AUX bytes.
    pub aux_watermark: u64,
    /// Whether PAUSE_OUTPUT works (else the control pauses by disabling).
    pub can_pause: bool,
    /// Keep a copy of every byte accepted (for comparisons in tests).
    pub keep_stream: bool,
    /// The event id in every record's trailer.
    pub id: u64,
}

impl SimOptions {
    /// Half-ring watermarks (the kernel's defaults), pausable, stream kept.
    pub fn new(data_size: u64, aux_size: u64, overwrite: bool) -> SimOptions {
        SimOptions {
            data_size,
            aux_size,
            overwrite,
            data_watermark: (data_size / 2).max(1),
            aux_watermark: (aux_size / 2).max(1),
            can_pause: true,
            keep_stream: true,
            id: 1,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    paused: bool,
    disabled: bool,
    /// Records refused since the last LOST record was emitted.
    pending_lost: u64,
    /// AUX bytes since the last PERF_RECORD_AUX.
    aux_unreported: u64,
    aux_truncated: bool,
    data_since_wake: u64,
    aux_since_wake: u64,
    /// Every DATA record the producer wrote, in order (LOST and AUX included).
    data_stream: Vec<u8>,
    /// Every AUX byte written; index = monotonic AUX position.
    aux_stream: Vec<u8>,
    /// AUX head at each pause.
    pause_heads: Vec<u64>,
    lost_total: u64,
    truncated_records: u64,
    aux_dropped: u64,
}

/// A simulated buffer: ring memory plus the kernel's side of it.
pub struct SimBuffer {
    block: Arc<Block>,
    opts: SimOptions,
    waker: Arc<SimWaker>,
    state: Mutex<Locked>,
}

/// The producer's state and its own view of the ring's heads and tails.
struct Locked {
    st: State,
    view: Ring,
}

impl std::fmt::Debug for SimBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimBuffer")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A kernel record: header, `body` (padded to 8 bytes), then the
/// sample_id_all trailer (the event id).
pub fn kernel_record(kind: u32, body: &[u8], id: u64) -> Vec<u8> {
    let body_len = body.len().next_multiple_of(8);
    let size = 8 + body_len + 8;
    let mut r = Vec::with_capacity(size);
    r.extend_from_slice(&kind.to_le_bytes());
    r.extend_from_slice(&0u16.to_le_bytes());
    r.extend_from_slice(&(size as u16).to_le_bytes());
    r.extend_from_slice(body);
    r.resize(8 + body_len, 0);
    r.extend_from_slice(&id.to_le_bytes());
    r
}

fn words(w: &[u64]) -> Vec<u8> {
    w.iter().flat_map(|w| w.to_le_bytes()).collect()
}

impl SimBuffer {
    pub fn new(opts: SimOptions, waker: Arc<SimWaker>) -> io::Result<Arc<SimBuffer>> {
        let block = Block::new(opts.data_size, opts.aux_size)?;
        let view = block.ring().map_err(io::Error::other)?;
        Ok(Arc::new(SimBuffer {
            block,
            opts,
            waker,
            state: Mutex::new(Locked {
                st: State::default(),
                view,
            }),
        }))
    }

    /// The session's [`Buffer`] over this simulated buffer.
    pub fn buffer(self: &Arc<Self>, idx: u32, cpu: Option<u32>) -> io::Result<Buffer> {
        Ok(Buffer {
            idx,
            cpu,
            tid: None,
            ring: self.block.ring().map_err(io::Error::other)?,
            control: Box::new(SimControl(Arc::clone(self))),
        })
    }

    /// Writes one DATA record as the kernel would; false when it was lost.
    pub fn produce_record(&self, rec: &[u8]) -> bool {
        let mut l = lock(&self.state);
        self.record_locked(&mut l, rec)
    }

    fn record_locked(&self, l: &mut Locked, rec: &[u8]) -> bool {
        let Locked { st, view } = l;
        if st.paused || st.disabled {
            st.pending_lost += 1;
            st.lost_total += 1;
            return false;
        }
        let id = self.opts.id;
        let lost = (st.pending_lost > 0)
            .then(|| kernel_record(kind::LOST, &words(&[id, st.pending_lost]), id));
        let need = rec.len() as u64 + lost.as_ref().map_or(0, |l| l.len() as u64);
        let used = view.data_head() - view.data_tail();
        if used + need > self.opts.data_size {
            st.pending_lost += 1;
            st.lost_total += 1;
            return false;
        }
        for r in lost.iter().map(Vec::as_slice).chain([rec]) {
            let ok = self.block.produce_record(r);
            debug_assert!(ok, "room was checked");
            if self.opts.keep_stream {
                st.data_stream.extend_from_slice(r);
            }
        }
        st.pending_lost = 0;
        st.data_since_wake += need;
        if st.data_since_wake >= self.opts.data_watermark {
            st.data_since_wake = 0;
            self.waker.wake();
        }
        true
    }

    /// Writes trace bytes into the AUX area as the hardware would; returns
    /// how many were written (all of them in overwrite mode, none while
    /// paused or disabled).
    pub fn produce_aux(&self, bytes: &[u8]) -> usize {
        let mut l = lock(&self.state);
        let st = &mut l.st;
        if st.paused || st.disabled {
            return 0;
        }
        let n = self.block.produce_aux(bytes, self.opts.overwrite);
        if self.opts.keep_stream {
            st.aux_stream.extend_from_slice(&bytes[..n]);
        }
        st.aux_unreported += n as u64;
        st.aux_since_wake += n as u64;
        if n < bytes.len() {
            st.aux_truncated = true;
            st.aux_dropped += (bytes.len() - n) as u64;
        }
        let wake = st.aux_since_wake >= self.opts.aux_watermark;
        if wake {
            st.aux_since_wake = 0;
        }
        if st.aux_unreported >= self.opts.aux_watermark || st.aux_truncated {
            self.aux_record_locked(&mut l);
        }
        if wake {
            self.waker.wake();
        }
        n
    }

    fn aux_record_locked(&self, l: &mut Locked) {
        let head = l.view.aux_head();
        let mut flags = 0;
        if l.st.aux_truncated {
            flags |= aux_flags::TRUNCATED;
        }
        if self.opts.overwrite {
            flags |= aux_flags::OVERWRITE;
        }
        let size = l.st.aux_unreported;
        let truncated = l.st.aux_truncated;
        let rec = kernel_record(kind::AUX, &words(&[head - size, size, flags]), self.opts.id);
        if self.record_locked(l, &rec) {
            let st = &mut l.st;
            if truncated {
                st.truncated_records += 1;
            }
            st.aux_unreported = 0;
            st.aux_truncated = false;
        }
    }

    /// Emits the pending PERF_RECORD_AUX (as the kernel does when the event
    /// stops) and wakes the waiter.
    pub fn flush(&self) {
        let mut l = lock(&self.state);
        if l.st.aux_unreported > 0 || l.st.aux_truncated {
            self.aux_record_locked(&mut l);
        }
        drop(l);
        self.waker.wake();
    }

    /// A record of this buffer's event (`body` padded, trailer appended).
    pub fn make_record(&self, kind: u32, body: &[u8]) -> Vec<u8> {
        kernel_record(kind, body, self.opts.id)
    }

    /// Free AUX bytes before the consumer's tail (full-trace mode).
    pub fn aux_room(&self) -> u64 {
        let l = lock(&self.state);
        self.opts.aux_size - (l.view.aux_head() - l.view.aux_tail())
    }

    /// Wakes the session's waiter.
    pub fn wake(&self) {
        self.waker.wake();
    }

    /// The monotonic AUX head.
    pub fn aux_head(&self) -> u64 {
        lock(&self.state).view.aux_head()
    }

    /// Every DATA record written so far (LOST and AUX records included).
    pub fn data_stream(&self) -> Vec<u8> {
        lock(&self.state).st.data_stream.clone()
    }

    /// Every AUX byte written so far.
    pub fn aux_stream(&self) -> Vec<u8> {
        lock(&self.state).st.aux_stream.clone()
    }

    /// AUX heads at each pause.
    pub fn pause_heads(&self) -> Vec<u64> {
        lock(&self.state).st.pause_heads.clone()
    }

    /// Records refused (DATA ring full, or output paused).
    pub fn lost_records(&self) -> u64 {
        lock(&self.state).st.lost_total
    }

    /// PERF_RECORD_AUX records written with the TRUNCATED flag.
    pub fn truncated_records(&self) -> u64 {
        lock(&self.state).st.truncated_records
    }

    /// AUX bytes dropped because the ring was full.
    pub fn aux_dropped(&self) -> u64 {
        lock(&self.state).st.aux_dropped
    }
}

/// [`BufferControl`] of a [`SimBuffer`]. Pausing takes the producer's lock,
/// so when `pause` returns no write is in progress, as with the ioctl.
#[derive(Debug)]
pub struct SimControl(pub Arc<SimBuffer>);

impl BufferControl for SimControl {
    fn pause(&self) -> io::Result<()> {
        let mut l = lock(&self.0.state);
        let head = l.view.aux_head();
        let st = &mut l.st;
        st.pause_heads.push(head);
        if self.0.opts.can_pause {
            st.paused = true;
        } else {
            st.disabled = true;
        }
        Ok(())
    }

    fn resume(&self) -> io::Result<()> {
        let st = &mut lock(&self.0.state).st;
        if self.0.opts.can_pause {
            st.paused = false;
        } else {
            st.disabled = false;
        }
        Ok(())
    }

    fn enable(&self) -> io::Result<()> {
        lock(&self.0.state).st.disabled = false;
        Ok(())
    }

    fn disable(&self) -> io::Result<()> {
        lock(&self.0.state).st.disabled = true;
        Ok(())
    }

    fn can_pause(&self) -> bool {
        self.0.opts.can_pause
    }
}
