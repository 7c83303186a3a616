//! The recording session: drains every trace buffer (DATA ring + AUX ring)
//! and writes what it copies into `DIR/data` (perf.data), in full-trace or
//! snapshot mode, until a stop request, the duration, the targets' exit or a
//! write failure ends it. It sits between the opened events (pmu/target
//! setup, which builds the [`Buffer`]s) and the perf.data writer.
//!
//! Threads: the caller's thread runs the drain loop (it never blocks on the
//! disk); a writer thread owns the [`TraceWriter`] and receives copied bytes
//! over a bounded channel. Everything here is safe code over [`crate::ring`]
//! and [`crate::sys`], so it runs against [`sim`] producers in tests.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::ring::{Ring, RingError};
use crate::sys::{self, Ioctl};

mod drain;
mod output;
pub mod sim;
mod wait;

pub use output::{DataFile, OutputSink, TraceWriter};
pub use wait::{SleepWaiter, Waiter};

/// One trace buffer: a ring (DATA + AUX) and how to control its events.
pub struct Buffer {
    /// perf's mmap index: the `idx` of this buffer's AUXTRACE records.
    pub idx: u32,
    /// The CPU of a per-cpu buffer.
    pub cpu: Option<u32>,
    /// The thread of a per-thread buffer.
    pub tid: Option<u32>,
    /// The mapped ring; in snapshot mode its AUX area is mapped read-only
    /// (the kernel then overwrites it and ignores `aux_tail`).
    pub ring: Ring,
    /// Pause/resume/enable/disable of the events writing into `ring`.
    pub control: Box<dyn BufferControl>,
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("idx", &self.idx)
            .field("cpu", &self.cpu)
            .field("tid", &self.tid)
            .field("ring", &self.ring)
            .finish_non_exhaustive()
    }
}

/// How the session controls the event(s) producing into one buffer.
pub trait BufferControl: Send {
    /// Stops output into the ring (PERF_EVENT_IOC_PAUSE_OUTPUT, or DISABLE
    /// where pausing is unavailable). When it returns, nothing more is written.
    fn pause(&self) -> io::Result<()>;
    /// Undoes [`BufferControl::pause`].
    fn resume(&self) -> io::Result<()>;
    /// PERF_EVENT_IOC_ENABLE.
    fn enable(&self) -> io::Result<()>;
    /// PERF_EVENT_IOC_DISABLE.
    fn disable(&self) -> io::Result<()>;
    /// Whether [`BufferControl::pause`] really pauses (else it disables).
    fn can_pause(&self) -> bool;
    /// An fd that poll(2) reports readable when the ring crossed its
    /// watermark (the AUX event's fd); `None` for simulated buffers.
    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}

/// [`BufferControl`] over a real event fd (the intel_pt event of the buffer).
/// Pausing uses PERF_EVENT_IOC_PAUSE_OUTPUT (Linux 4.7+); if the kernel
/// refuses it once, this falls back to DISABLE/ENABLE for good.
#[derive(Debug)]
pub struct FdControl {
    fd: Arc<OwnedFd>,
    pause_works: AtomicBool,
    paused_by_disable: AtomicBool,
}

impl FdControl {
    /// Controls the event behind `fd`.
    pub fn new(fd: Arc<OwnedFd>) -> Self {
        FdControl {
            fd,
            pause_works: AtomicBool::new(true),
            paused_by_disable: AtomicBool::new(false),
        }
    }
}

impl BufferControl for FdControl {
    fn pause(&self) -> io::Result<()> {
        if self.pause_works.load(Ordering::Relaxed) {
            match sys::ioctl(&self.fd, Ioctl::Pause) {
                Ok(()) => return Ok(()),
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINVAL | libc::ENOTTY | libc::EOPNOTSUPP)
                    ) =>
                {
                    self.pause_works.store(false, Ordering::Relaxed);
                }
                Err(e) => return Err(e),
            }
        }
        sys::ioctl(&self.fd, Ioctl::Disable)?;
        self.paused_by_disable.store(true, Ordering::Relaxed);
        Ok(())
    }

    fn resume(&self) -> io::Result<()> {
        if self.paused_by_disable.swap(false, Ordering::Relaxed) {
            sys::ioctl(&self.fd, Ioctl::Enable)
        } else {
            sys::ioctl(&self.fd, Ioctl::Resume)
        }
    }

    fn enable(&self) -> io::Result<()> {
        sys::ioctl(&self.fd, Ioctl::Enable)
    }

    fn disable(&self) -> io::Result<()> {
        sys::ioctl(&self.fd, Ioctl::Disable)
    }

    fn can_pause(&self) -> bool {
        self.pause_works.load(Ordering::Relaxed)
    }

    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.fd.as_fd())
    }
}

/// Full trace or snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every AUX byte is copied out and written (the AUX area is mapped
    /// read-write and `aux_tail` is advanced).
    FullTrace,
    /// `-S[SIZE]`: the AUX area is overwritten by the kernel; on each request
    /// the newest `size` bytes (default: the whole ring) are written.
    Snapshot {
        /// Bytes per buffer per snapshot; `None` for the ring size.
        size: Option<u64>,
    },
}

/// Knobs of a session.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    pub mode: Mode,
    /// Snapshot mode: stop after this many snapshots.
    pub max_snapshots: Option<u32>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Longest wait between two drain passes (poll timeout, or sleep when
    /// the buffers have no fds).
    pub poll_interval: Duration,
    /// Bounded channel depth between the drain and the writer thread, in
    /// messages (one message is one chunk of one buffer).
    pub channel_depth: usize,
    /// When the channel is full the drain thread keeps copied bytes in its
    /// own queue up to this many bytes; past it, AUX areas are no longer
    /// drained until the writer catches up, so the kernel records the loss
    /// (PERF_RECORD_AUX with the TRUNCATED flag) instead of us dropping
    /// bytes already copied. DATA rings are always drained.
    pub max_backlog_bytes: u64,
    /// Snapshot mode: take one more snapshot when the session ends (target
    /// exit, stop request, duration), unless `max_snapshots` is reached.
    pub snapshot_on_exit: bool,
    /// Call the progress callback this often.
    pub progress_interval: Duration,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            mode: Mode::FullTrace,
            max_snapshots: None,
            duration: None,
            poll_interval: Duration::from_millis(50),
            channel_depth: 64,
            max_backlog_bytes: 1 << 30,
            snapshot_on_exit: true,
            progress_interval: Duration::from_millis(500),
        }
    }
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
#[non_exhaustive]
pub enum StopReason {
    /// SIGINT/SIGTERM, the control fifo's `stop`, or a caller's request.
    Requested = 1,
    /// Every traced target exited (the caller signals it).
    TargetsExited = 2,
    /// `SessionConfig::duration` passed.
    Duration = 3,
    /// `SessionConfig::max_snapshots` snapshots were taken.
    MaxSnapshots = 4,
    /// The writer failed (disk full, I/O error).
    WriteFailed = 5,
}

impl StopReason {
    fn from_u8(v: u8) -> Option<StopReason> {
        Some(match v {
            1 => StopReason::Requested,
            2 => StopReason::TargetsExited,
            3 => StopReason::Duration,
            4 => StopReason::MaxSnapshots,
            5 => StopReason::WriteFailed,
            _ => return None,
        })
    }
}

/// Requests into a running session, from signal handlers (only atomics, so
/// async-signal-safe), the control fifo, trigger events and the target
/// watcher. Clones share the same state.
#[derive(Debug, Clone, Default)]
pub struct StopSignal {
    inner: Arc<StopInner>,
}

#[derive(Debug, Default)]
struct StopInner {
    stop: AtomicU8,
    snapshots: AtomicU64,
}

impl StopSignal {
    pub fn new() -> Self {
        Self::default()
    }

    /// Ends the session (the first reason given wins).
    pub fn stop(&self, reason: StopReason) {
        let _ =
            self.inner
                .stop
                .compare_exchange(0, reason as u8, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Every target exited: ends the session (with a final snapshot in
    /// snapshot mode).
    pub fn targets_exited(&self) {
        self.stop(StopReason::TargetsExited)
    }

    /// Asks for one snapshot (SIGUSR2, control fifo `snapshot`, a trigger hit).
    pub fn request_snapshot(&self) {
        self.inner.snapshots.fetch_add(1, Ordering::SeqCst);
    }

    /// The stop reason, once a stop was requested.
    pub fn stop_reason(&self) -> Option<StopReason> {
        StopReason::from_u8(self.inner.stop.load(Ordering::SeqCst))
    }

    /// Total snapshot requests so far.
    pub fn snapshot_requests(&self) -> u64 {
        self.inner.snapshots.load(Ordering::SeqCst)
    }
}

/// Per-buffer totals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BufferStats {
    pub idx: u32,
    /// AUX bytes copied (and written, unless the writer failed).
    pub bytes_aux: u64,
    /// DATA bytes copied.
    pub bytes_data: u64,
    /// Sum of PERF_RECORD_LOST `lost` counts in this buffer's DATA ring.
    pub lost_records: u64,
    /// PERF_RECORD_AUX records with the TRUNCATED flag.
    pub truncated_aux: u64,
    /// PERF_RECORD_AUX records with the PARTIAL or COLLISION flags.
    pub partial_aux: u64,
    /// AUX bytes the ring held beyond its size when drained (full-trace mode:
    /// should never happen; the oldest bytes were overwritten).
    pub overrun_aux: u64,
}

/// What a session did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// AUX bytes written in AUXTRACE records (without padding).
    pub bytes_aux: u64,
    /// DATA record bytes written.
    pub bytes_data: u64,
    /// Records the kernel lost (PERF_RECORD_LOST counts).
    pub lost_records: u64,
    /// PERF_RECORD_AUX records with the TRUNCATED flag (AUX data lost).
    pub truncated_aux: u64,
    /// Snapshots taken.
    pub snapshots: u32,
    /// From `run` to the end of the final drain.
    pub duration: Duration,
    /// Why it ended (`None` only if it never started).
    pub stop: Option<StopReason>,
    /// Size of `DIR/data` when finalized.
    pub file_bytes: u64,
    /// Largest amount of copied bytes waiting in the drain thread's own
    /// queue because the writer's channel was full.
    pub backlog_peak_bytes: u64,
    /// Drain passes that skipped AUX areas because the backlog was full.
    pub backlog_stalls: u64,
    pub per_buffer: Vec<BufferStats>,
}

/// A progress sample for the status line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Progress {
    pub elapsed: Duration,
    /// Bytes written to the file so far.
    pub bytes_written: u64,
    /// AUX and DATA bytes copied out of the rings so far.
    pub bytes_copied: u64,
    /// Copy rate since the previous sample, in bytes per second.
    pub bytes_per_sec: f64,
    pub lost_records: u64,
    pub truncated_aux: u64,
    pub snapshots: u32,
    /// Bytes queued between the drain and the writer.
    pub backlog_bytes: u64,
}

/// A session failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// A ring's metadata or a record in it was malformed.
    #[error("buffer {idx}: {source}")]
    Ring {
        idx: u32,
        #[source]
        source: RingError,
    },
    /// An ioctl on a buffer's event failed.
    #[error("buffer {idx}: cannot {what} its event: {source}")]
    Control {
        idx: u32,
        what: &'static str,
        #[source]
        source: io::Error,
    },
    /// Writing perf.data failed (disk full, I/O error). `report` says what
    /// was saved; when `finalized` the file is readable up to the failure.
    #[error("{}", output_message(.source, .report, *.finalized))]
    Output {
        #[source]
        source: sideband::Error,
        report: Box<Report>,
        finalized: bool,
    },
    /// A session thread panicked.
    #[error("the {0} thread panicked")]
    Panic(&'static str),
}

fn output_message(source: &sideband::Error, report: &Report, finalized: bool) -> String {
    let disk_full =
        matches!(source, sideband::Error::Io(e) if e.raw_os_error() == Some(libc::ENOSPC));
    let what = if disk_full {
        "the disk is full".to_string()
    } else {
        format!("writing the trace failed ({source})")
    };
    if finalized {
        format!(
            "{what}: recording stopped; the trace holds the {} bytes written before the failure and is readable",
            report.file_bytes
        )
    } else {
        format!("{what}: recording stopped, and the trace file could not be finalized")
    }
}

/// A progress callback (the CLI draws it with indicatif).
pub type ProgressFn = Box<dyn FnMut(&Progress) + Send>;
/// A callback on the DATA bytes of each drain (e.g. to feed a live timeline):
/// the buffer index and whole records.
pub type DataObserver = Box<dyn FnMut(u32, &[u8]) + Send>;

/// A recording session over some buffers.
pub struct Session {
    buffers: Vec<Buffer>,
    out: TraceWriter,
    cfg: SessionConfig,
    waiter: Option<Box<dyn Waiter>>,
    progress: Option<ProgressFn>,
    observer: Option<DataObserver>,
}

impl Session {
    /// A session draining `buffers` into `out` (header, attrs and any
    /// leading records such as AUXTRACE_INFO already written by the caller).
    pub fn new(buffers: Vec<Buffer>, out: TraceWriter, cfg: SessionConfig) -> Self {
        Session {
            buffers,
            out,
            cfg,
            waiter: None,
            progress: None,
            observer: None,
        }
    }

    /// How to wait between drain passes. Default: poll(2) on the buffers'
    /// fds when they all have one, else a sleep of `poll_interval`.
    pub fn with_waiter(mut self, waiter: Box<dyn Waiter>) -> Self {
        self.waiter = Some(waiter);
        self
    }

    /// Called every `progress_interval` from the drain thread; keep it quick.
    pub fn with_progress(mut self, f: ProgressFn) -> Self {
        self.progress = Some(f);
        self
    }

    /// Called on the writer thread with the DATA records of each drain.
    pub fn with_data_observer(mut self, f: DataObserver) -> Self {
        self.observer = Some(f);
        self
    }

    /// Records until `stop` (or the duration, or a write failure), drains
    /// what is left, finalizes the file and reports.
    pub fn run(self, stop: &StopSignal) -> Result<Report, SessionError> {
        drain::run(self, stop)
    }
}
