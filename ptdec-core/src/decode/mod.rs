//! The decoding stage: a flow decoder (libipt's block decoder, or ptdec's
//! own in `crate::flow` with libipt for the PSB intervals it does not handle:
//! [`DecoderKind`], `flow_decoder`) over the AUX data of a
//! trace, with the sideband applied, producing per-thread [`Op`](crate::model::ops::Op)s for the
//! call-stack stage, on all cores and in memory bounded by a window of
//! chunks, not by the trace. It reads the trace, its images and a raw
//! decode's sideband only through the contracts of
//! [`crate::model::source`], which the source stage implements.
//!
//! # Data flow, one file per role
//!
//! 1. [`setup`]: what every worker shares ([`setup::DecodeSetup`]): libipt's
//!    configuration (CPU for errata, MTC frequency, nominal frequency,
//!    CPUID.15H ratio), every file section the images need, and which
//!    make up a process's image at a time.
//! 2. [`chunks`]: each segment of AUX data (a buffer's stream between
//!    losses or snapshots) is cut at PSBs into chunks of about
//!    [`DEFAULT_CHUNK_BYTES`] (with CYC [`DEFAULT_CHUNK_BYTES_CYC`], on
//!    one CPU [`DEFAULT_CHUNK_BYTES_ONE_CPU`]),
//!    independently of the number of workers; the
//!    TSC of each chunk's PSB+ orders per-cpu chunks and finds the chunks
//!    of a `--start/--duration` window by binary search.
//! 3. [`workers`]: `jobs` threads decode chunks, at most `window` ahead of
//!    delivery, each with its section cache ([`worker_images`]); the calling
//!    thread gets them back in order.
//! 4. [`chunk`]: one chunk, decoded as ptxed does, into runs of ops per task
//!    (its module doc says what happens at a chunk's edges).
//! 5. [`order`]: runs stitched across chunk edges, merged per thread in
//!    execution order (per-cpu buffers by time, up to a watermark), counters
//!    made cumulative, the window applied, handed to the [`OpSink`] — the
//!    call stacks and the FTF writer, which run while decoding goes on.
//!
//! libipt is reached through the `ipt` crate's safe wrapper, which holds
//! all of the project's FFI: this module has no unsafe code.
//!
//! # How a chunk is decoded
//!
//! One block decoder per chunk, blocks ended at every call and jump so that
//! each control transfer is seen. The image follows the process that runs:
//! per-thread buffers use their thread's process; per-cpu buffers take the
//! task from the sideband's context switches, applied where the trace is
//! outside user code — at a TIP.PGE (tracing enabled) with a small slack
//! for timing imprecision, or at a kernel block once the switch is due when
//! the kernel is traced (libipt-sb's rule; a user-only trace cannot switch
//! tasks while it is enabled). The libipt image is rebuilt only when the
//! (process, map version) changes.
//!
//! As libipt's `ptxed` does: drain the pending events, stop when the status
//! says end of stream (`pts_eos`: libipt would otherwise follow the code
//! after the last packet and end in a false no-image error), and take the
//! next block. The block `pt_blk_next` fills in before an error holds the
//! instructions decoded before it: they count. Status updates (libipt's
//! state at a PSB+) change nothing; an untraced stretch (`Op::Disabled` ..
//! `Op::Enabled`) starts only at a real disable (TIP.PGD, async disable,
//! TraceStop) while tracing is on, so its slices pair one to one with the
//! trace's disable/enable pairs. An overflow before tracing was first
//! enabled is still a gap.
//!
//! # Raw PT
//!
//! [`decode_raw`] runs the same decoder over raw trace bytes (`ptdec raw`):
//! one segment, one task ([`RAW_TASK`]), one image holding every given
//! section, and the libipt configuration the caller gives instead of
//! AUXTRACE_INFO. `Stamp::time` is the TSC (or ns from a given TSC
//! frequency). With an instruction listing it is decoded as one chunk, on
//! the calling thread, so the listing is in order; with perf_event
//! sideband ([`RawSideband`], read by `crate::pevent`) too, since its
//! replay is sequential: the image then changes at libipt's events as the
//! sideband says, as in ptxed. The fast decoder holds that chunk's ops up
//! to its op bound; past it, it decodes the chunk again and hands its
//! runs on whenever they hold `chunk::FLUSH_OPS` ops
//! (`parts::decode_here`), as libipt does where it decodes the chunk, so
//! memory stays bounded however long the trace.
//!
//! # Errors
//!
//! A decode error becomes a `Gap(DecodeError)` (or `Gap(NoImage)` when the
//! code's memory is not in the image; one per stretch) at the error's
//! stream offset, and the decoder resynchronizes *at the error*
//! ([`OnError::Resync`], ptxed's `--resync-on-error`: the next FUP, TIP
//! or PSB that gives an IP, often long before the next PSB; the fast
//! decoder's own, as libipt 2.1.2 has no `pt_blk_resync`), or at the
//! next PSB when that fails, when an error repeats at the same offset,
//! with libipt 2.1.2, or for `--on-error next-psb`. [`DecodeStats`] counts PSB syncs,
//! resyncs and the bytes skipped. OVF becomes `Gap(Overflow)`; data lost
//! between segments (AUX records flagged truncated/partial/collision, or
//! holes in the AUX offsets) becomes `Gap(LostData)`: at the end of the
//! segment before the loss, and at the start of the segment after it
//! unless the last op handed on for its first task is that gap already
//! (`Orderer::follows_loss`).
//!
//! A PSB whose PSB+ libipt cannot read (random bytes that hold the
//! pattern, a corrupt buffer) is passed over for the next one, however many
//! there are: a bound per chunk would make what decodes depend on the chunk
//! size. The bytes before a segment's first usable PSB are counted
//! ([`DecodeStats::unsynced_bytes`]), and so are the PSBs passed over
//! ([`DecodeStats::bad_psbs`]); a chunk's search stops at the next chunk's
//! PSB, so each is counted once whatever the chunk size.
//!
//! More than [`NO_PROGRESS_INSNS`] instructions decoded without libipt
//! consuming a byte of trace is a decode error too (code that loops through
//! direct jumps, which need no packets: a hostile or corrupt trace, or the
//! wrong image), followed by a sync at the next PSB: memory per chunk is
//! bounded whatever the bytes are.
//!
//! # Order of the ops handed to the sink
//!
//! Every thread's ops arrive in execution order, each thread's last op an
//! [`Op::End`](crate::model::ops::Op::End); ops of different threads interleave (chunk by chunk).
//!
//! # Counters
//!
//! `Stamp::insns` counts the instructions the thread retired in traced code
//! up to and including the op's branch. `Stamp::cycles` is present when the
//! recording had CYC packets; it is estimated from libipt's cycle-accurate
//! time and the core:bus ratio (`Δtsc × CBR / max non-turbo ratio`).
//! `Stamp::time` is perf time (ns) from libipt's TSC estimate (TSC, MTC, CYC);
//! traces without a TSC conversion carry raw TSC values.

mod chunk;
mod chunks;
mod clock;
mod context;
mod edges;
mod flow_decoder;
mod order;
mod parts;
mod places;
mod runs;
mod setup;
mod transfer;
mod worker_images;
mod workers;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use ipt::{Config as PtConfig, Cpu, Error as PtError};
use sideband::timeline::TaskId;

use crate::model::ops::OpSink;
pub use crate::model::ops::ThreadStats;
pub use crate::model::source::RawSection;
use crate::model::source::{CodeImages, RawSideband, SbNote, TraceSource};

use chunk::{ChunkMeta, ChunkStats, NextChunk};
use chunks::{cut, Stream};
use context::Owner;
pub use flow_decoder::DecoderKind;
use order::Orderer;
use parts::ChunkJob;
use setup::DecodeSetup;
use workers::Progress;

/// With CYC, how far before a chunk its decoder starts to warm libipt's
/// timing up at most: from a PSB in these bytes ([`chunks::warmup_len`]
/// says which), else from the first PSB in them. More than perf's default
/// PSB period (16 KiB), so a PSB+ interval is decoded first.
const WARMUP_BYTES: u64 = 64 << 10;

/// Chunk size when [`DecodeOptions::chunking`] is `Auto` and the
/// trace has no CYC: big enough that a chunk's set-up (a decoder, a sync,
/// an image) is noise, small enough that its ops (64 bytes each, up to
/// ~90 bytes of ops per byte of trace in call-dense code: 3 MB) are still
/// in the cache when the output takes them. With 256 KiB chunks the ops
/// had left it: on the bench's interpreter trace on one core the
/// decoder's pushes and the output's first pass over them waited on
/// memory, and the run took 1.08 s of CPU against 0.99 s in 32 KiB chunks
/// (128 KiB: 1.06 s, 64 KiB: 1.02 s; medians of 9; the C++ trace, with
/// half the calls per instruction, the same either way).
pub const DEFAULT_CHUNK_BYTES: u64 = 32 << 10;

/// [`DEFAULT_CHUNK_BYTES`] where the chunks are decoded on the calling
/// thread ([`decodes_on_calling_thread`]: one CPU), each just before its
/// ops go on: the ops of a chunk half the size stay in the core's own
/// cache (2 MiB of L2 here) between the decoder's pushes and the output's
/// passes over them. On the bench's 10 MB traces on one core (medians
/// of 5, 2026-12-01): `ptdec report --slowest 10` on interp 499 -> 455 ms
/// (12 KiB: 451), FTF 827 -> 716 ms; shapes 478 -> 471 and 583 -> 582 ms.
/// With workers (each chunk decoded on another CPU while the output
/// takes the one before) 16 KiB chunks took 2-8% more CPU than 32 KiB.
/// Only for per-thread buffers: their chunks go to the output buffer by
/// buffer, so the FTF is the same byte for byte whatever the chunk size,
/// and so whatever the CPUs. Per-cpu runs are released in start order a
/// chunk at a time, so the threads' records interleave in the FTF by
/// chunk: the same slices, in another order of records. There the size
/// stays [`DEFAULT_CHUNK_BYTES`], and the FTF does not depend on how many
/// CPUs ptdec may use, unless the records' order does not matter
/// ([`DecodeOptions::any_interleaving`]: `ptdec report`).
pub const DEFAULT_CHUNK_BYTES_ONE_CPU: u64 = 16 << 10;

/// The chunk size with CYC: each chunk then first decodes up to
/// `WARMUP_BYTES` (64 KiB) before it, which small chunks would pay again
/// and again.
pub const DEFAULT_CHUNK_BYTES_CYC: u64 = 256 << 10;

/// The most trace bytes decoded ahead of the output at once: the chunks
/// the workers have started and the output has not yet taken. Their
/// decoded ops are most of a decode's memory (about 90 bytes per byte of
/// trace in call-dense code: ~700 MB at this limit), so it bounds memory
/// whatever `jobs` and `chunk_bytes` say; the chunk being delivered is
/// always let through, however large. `ptdec --chunk-size` is at most this.
pub const MAX_BYTES_IN_FLIGHT: u64 = 8 << 20;

/// The most ops a decode worker holds of a chunk of `len` bytes: 16 an
/// average byte, and at least 1,048,576 (64 MiB of ops). Real traces stay
/// far below it (about 1.3 ops a byte of call-dense code, 3.2 on the real
/// LLDB row), but a byte of PT can stand for a million ops: a TNT bit
/// taking a branch back over a chain of direct jumps, which need no
/// packet, up to [`NO_PROGRESS_INSNS`] instructions a byte. A chunk that
/// would pass the bound is decoded again on the calling thread when its
/// turn comes, and its runs handed on in pieces as they fill up
/// (`parts::decode_here`), so memory stays bounded: at most the window's
/// chunks of at most this many ops each.
///
/// And at most [`MAX_CHUNK_OPS`]: a chunk is as long as the trace between
/// two PSBs, and trace without PSB (corrupt, or hostile) made one chunk
/// whose ops the worker held up to 16 a byte of it (a 40 MB stretch
/// without PSB ran out of 4 GB of address space).
pub fn chunk_ops_bound(len: u64) -> usize {
    usize::try_from(len.saturating_mul(16))
        .unwrap_or(usize::MAX)
        .clamp(MIN_CHUNK_OPS, MAX_CHUNK_OPS)
}

/// The fewest ops a decode worker may hold of a chunk, whatever its
/// length and however many workers share [`MAX_OPS_IN_FLIGHT`] (64 MiB
/// of ops).
pub const MIN_CHUNK_OPS: usize = 1 << 20;

/// The most ops a decode worker holds of any chunk (256 MiB of ops; real
/// traces make about 100,000 ops a 32 KiB chunk).
pub const MAX_CHUNK_OPS: usize = 1 << 22;

/// The most ops the decode workers hold at once, of all the chunks they
/// decoded and the output has not taken (2 GiB of ops; a 32 KiB chunk of
/// real trace makes about 100,000). The window of chunks bounds memory
/// for the usual chunk; this bounds it for any: a worker starts no chunk
/// but the next to deliver while the chunks decoded and not delivered
/// hold this many, and holds at most its share of the chunk it decodes:
/// this divided by the workers, and at least [`MIN_CHUNK_OPS`]; past its
/// share the chunk is decoded again on the calling thread, its runs
/// handed on in pieces, as one over [`chunk_ops_bound`] is. So the
/// workers hold at most this plus a share each: 2 GiB more up to 32
/// workers, 64 MiB a worker past that (`-j64`: 6 GiB, where the window
/// of 130 chunks of up to 4,194,304 ops each let them hold 33 GiB). At
/// `-j2` the share is past [`MAX_CHUNK_OPS`] and the window holds less
/// than this: nothing changes there.
pub const MAX_OPS_IN_FLIGHT: usize = 1 << 25;

/// The most decode workers ([`DecodeOptions::jobs`] is clamped to it, and
/// to the chunks [`MAX_BYTES_IN_FLIGHT`] lets decode at once).
pub const MAX_JOBS: usize = 256;

/// The workers `-j N` starts: `N`, but no more than the CPUs this process
/// may run on (`available_parallelism`: its affinity mask and cgroup
/// quota); 0 stays 0 (all of them). More workers than CPUs only take
/// turns: each keeps its own image and block caches and a chunk in the
/// window, so on 2 CPUs `-j8` ran 1.1-1.2x the wall time of `-j2` with
/// 2.8x the memory (scripts/bench, 2026-11-27). The output is the same
/// for any number of workers. The library's [`DecodeOptions::jobs`] is
/// not capped: tests run 8 workers on 2 CPUs to prove that.
pub fn cpu_jobs(requested: usize) -> usize {
    match requested {
        0 => 0,
        n => n.min(std::thread::available_parallelism().map_or(1, |c| c.get())),
    }
}

/// The decode workers for `opts` and chunks of `chunk_bytes`.
fn worker_threads(opts: &DecodeOptions, chunk_bytes: u64) -> usize {
    opts.workers()
        // More could only wait for room in MAX_BYTES_IN_FLIGHT.
        .min((MAX_BYTES_IN_FLIGHT / chunk_bytes.max(1)).max(1) as usize)
}

/// Whether a decode with `opts` runs on the calling thread, each chunk
/// decoded just before it is handed on, with no worker thread: one
/// worker, and the calling thread may run on one CPU only (its affinity
/// mask or cgroup quota: `taskset -c 0`). The output is the same either
/// way; tests compare the two. (With `Chunking::Auto`, the chunk
/// size depends on CYC and on this answer, but every default size leaves
/// room for more than one worker: the answer is the same for all.)
pub fn decodes_on_calling_thread(opts: &DecodeOptions) -> bool {
    let chunk_bytes = opts.chunking.bytes().unwrap_or(DEFAULT_CHUNK_BYTES);
    workers::inline_on_one_cpu(worker_threads(opts, chunk_bytes))
}

/// How each segment of trace is cut into chunks, and so decoded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Chunking {
    /// Chunks of the size the trace calls for ([`DEFAULT_CHUNK_BYTES`],
    /// [`DEFAULT_CHUNK_BYTES_ONE_CPU`] on one CPU, or
    /// [`DEFAULT_CHUNK_BYTES_CYC`] for a trace with CYC), decoded in
    /// parallel.
    #[default]
    Auto,
    /// Chunks of about this many bytes (cut at the PSB after each
    /// multiple), decoded in parallel (`--chunk-size`).
    Bytes(u64),
    /// One chunk per segment, decoded in order on the calling thread with
    /// its runs handed on as they fill up (memory stays bounded however
    /// long the segment): what a listing and a perf_event sideband replay
    /// need (`ptdec raw --insn-list`, `--pevent`), which follow decode
    /// order. With several segments or per-cpu buffers, as
    /// `Bytes(u64::MAX)`.
    Sequential,
}

impl Chunking {
    /// `Auto` for `None`, else chunks of `bytes`.
    pub fn of(bytes: Option<u64>) -> Chunking {
        bytes.map_or(Chunking::Auto, Chunking::Bytes)
    }

    /// The chunk size asked for; `None`: the trace's default.
    fn bytes(self) -> Option<u64> {
        match self {
            Chunking::Auto => None,
            Chunking::Bytes(n) => Some(n),
            Chunking::Sequential => Some(u64::MAX),
        }
    }
}

/// Where decoding goes on after a decode error (`--on-error`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnError {
    /// Where the trace next tells the IP (a TIP, a FUP that binds to an
    /// IP, a PSB+): ptxed's `--resync-on-error`, libipt 2.2's
    /// `pt_blk_resync`, and where perf's decoder goes on. The fast
    /// decoder's own; libipt 2.1.2 has none, so the chunks libipt decodes
    /// go on at the next PSB whatever this says.
    #[default]
    Resync,
    /// At the next PSB (ptxed's default, and libipt 2.1.2's only way):
    /// what lies between the error and that PSB is skipped. The two flow
    /// decoders then give the same output.
    NextPsb,
}

/// What to decode and how.
#[derive(Debug, Clone, Default)]
pub struct DecodeOptions {
    /// Only these threads (`--tid`); `None`: all.
    pub tids: Option<BTreeSet<u32>>,
    /// Only these processes (`--pid`); `None`: all.
    pub pids: Option<BTreeSet<u32>>,
    /// `pids` are an LLDB bundle's processes, decoded by default, not a
    /// `--pid` given (errors then name no option).
    pub pids_of_bundle: bool,
    /// Drop ops before this perf time (ns).
    pub start: Option<u64>,
    /// Drop ops after this perf time (ns); decoding of a segment stops past it.
    pub end: Option<u64>,
    /// Build every thread's call stacks on the calling thread only, never
    /// ahead on the decode workers (`crate::stitch`): the output is the
    /// same either way; tests compare the two.
    pub sequential_stacks: bool,
    /// With `decode_with`'s `spans`: jumps inside a function are marked
    /// so, but none is left out (`runs`'s quiet jumps). The output is the
    /// same either way; tests compare the two.
    pub keep_quiet_jumps: bool,
    /// Worker threads; 0: `available_parallelism`. At most [`MAX_JOBS`],
    /// and at most as many as chunks fit in [`MAX_BYTES_IN_FLIGHT`].
    pub jobs: usize,
    /// How far (ns) a context switch or mmap record may lie after the time
    /// libipt estimates for a TIP.PGE and still apply to it; `None`: two MTC
    /// periods (1 µs without MTC).
    pub switch_slack_ns: Option<u64>,
    /// Called from the decode workers as chunks are decoded: (bytes
    /// decoded, bytes to decode). Decoding is done when they are equal.
    pub progress: Option<ProgressCallback>,
    /// Called from the decode workers with every instruction, event and
    /// error in decode order (`ptdec raw --insn-list`; meant for one
    /// segment: with several, workers interleave).
    pub insn_list: Option<ListCallback>,
    /// How segments are cut into chunks.
    pub chunking: Chunking,
    /// Chunks decoded ahead of delivery at most (`None`: twice the
    /// workers, plus two).
    pub window: Option<usize>,
    /// The most ops a decode worker holds of one chunk before it gives the
    /// chunk to the calling thread, which decodes it again and hands its
    /// runs on in pieces ([`chunk_ops_bound`]; `None`: that bound). Tests
    /// set it low, to decode every chunk in pieces.
    pub chunk_ops: Option<usize>,
    /// The most ops the decode workers hold at once, across chunks
    /// ([`MAX_OPS_IN_FLIGHT`]; `None`: that budget). Tests set it low.
    pub ops_in_flight: Option<usize>,
    /// Which flow decoder decodes (`--decoder`).
    pub decoder: DecoderKind,
    /// Where decoding goes on after a decode error (`--on-error`).
    pub on_error: OnError,
    /// What the ops become does not depend on how the threads' records
    /// interleave, only on each thread's own order: the sink says so
    /// ([`crate::model::slices::SliceSink::any_interleaving`]; `ptdec
    /// report`'s aggregate). Per-cpu traces then take
    /// [`DEFAULT_CHUNK_BYTES_ONE_CPU`] on one CPU as well.
    pub any_interleaving: bool,
    /// Set by whoever the ops go to when its output failed (a closed
    /// pipe): decoding stops at the next chunk, with
    /// [`DecodeError::Stopped`].
    pub stop: StopFlag,
}

/// Stops a decode at the next chunk once set ([`DecodeOptions::stop`]);
/// clones share the flag.
#[derive(Debug, Clone, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// Asks the decode to stop.
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`StopFlag::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// One line of an instruction listing, as ptxed prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListItem {
    /// An instruction at this address.
    Insn(u64),
    /// Tracing enabled.
    Enabled,
    /// Tracing disabled.
    Disabled,
    /// An internal buffer overflow.
    Overflow,
    /// A trigger fired (TRIG): its number and whether more than one did,
    /// as ptxed prints it (`[trig 1a]`, `[trig 05, mult]`).
    Trig { number: u8, mult: bool },
    /// A decode error at a trace offset (of the segment): `what` is
    /// ptxed's error type (`error`, `sync error`), `message` libipt's.
    Error {
        offset: u64,
        what: &'static str,
        message: String,
    },
    /// The trace ended while tracing was enabled.
    EndOfTrace,
    /// perf_event sideband (`ptdec raw --pevent:*`): a record, a warning
    /// or error, a context switch.
    Sideband(SbNote),
}

impl std::fmt::Display for ListItem {
    /// ptxed's `--no-inst` format (`[offset, ip: error: ...]` without the
    /// ip, which ptdec does not reconstruct).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListItem::Insn(ip) => write!(f, "{ip:016x}"),
            ListItem::Enabled => f.write_str("[enabled]"),
            ListItem::Disabled => f.write_str("[disabled]"),
            ListItem::Overflow => f.write_str("[overflow]"),
            ListItem::Trig { number, mult } => {
                write!(
                    f,
                    "[trig {number:02x}{}]",
                    if *mult { ", mult" } else { "" }
                )
            }
            ListItem::Error {
                offset,
                what,
                message,
            } => write!(f, "[{offset:x}: {what}: {message}]"),
            ListItem::EndOfTrace => f.write_str("[end of trace]"),
            ListItem::Sideband(n) => n.fmt(f),
        }
    }
}

/// The name of the first packet from `at` of `bytes` that libipt 2.1.2
/// does not know but a newer libipt does and ptflow reads (libipt 2.2's
/// TRIG): where libipt answered `BAD_OPC` (at the packet, or at a PSB or
/// an OVF whose packets it read on to it), what it stopped at. `None` when
/// an error, a packet no libipt knows or 4 KiB of packets come first.
pub fn newer_packet(bytes: &[u8], at: u64) -> Option<&'static str> {
    let mut at = usize::try_from(at).ok()?;
    let end = at.saturating_add(4096);
    while at < end {
        match ptflow::packet::decode(bytes, at, false) {
            Ok((p, _)) if p.known_to_libipt() && !p.known_to_libipt_2_1() => return Some("TRIG"),
            Ok((p, n)) if p.known_to_libipt_2_1() => at += n,
            _ if trig_cut(bytes, at) => return Some("TRIG"),
            _ => return None,
        }
    }
    None
}

/// A TRIG the end of `bytes` cuts, at `at`: libipt 2.1.2 answers
/// `BAD_OPC` at its opcode before it knows the packet's length, where
/// ptflow (and libipt 2.2) answer `EOS`.
fn trig_cut(bytes: &[u8], at: usize) -> bool {
    bytes.get(at) == Some(&0xd9)
        && ptflow::packet::decode(bytes, at, false) == Err(ptflow::Error::EOS)
}

/// Whether ptflow's packet decoder, reading on from each PSB of `bytes`
/// to the first error, meets a packet libipt 2.1.2 does not know but a
/// newer libipt does ([`newer_packet`]). Every PSB is read from, also one
/// that the packets read from an earlier PSB ran over (garbage read as
/// packets may swallow it, and a decoder may still sync there).
pub fn holds_newer_packet(bytes: &[u8]) -> bool {
    (0..bytes.len().saturating_sub(15))
        .filter(|&psb| ptflow::packet::is_psb(bytes, psb))
        .any(|psb| {
            let mut at = psb;
            loop {
                match ptflow::packet::decode(bytes, at, false) {
                    Ok((p, _)) if p.known_to_libipt() && !p.known_to_libipt_2_1() => return true,
                    Ok((_, n)) => at += n,
                    Err(_) => return trig_cut(bytes, at),
                }
            }
        })
}

/// The listing callback's type.
pub type ListFn = dyn Fn(&ListItem) + Send + Sync;

/// A listing callback in [`DecodeOptions`].
#[derive(Clone)]
pub struct ListCallback(pub Arc<ListFn>);

impl ListCallback {
    pub fn new(f: impl Fn(&ListItem) + Send + Sync + 'static) -> Self {
        ListCallback(Arc::new(f))
    }
}

impl std::fmt::Debug for ListCallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ListCallback")
    }
}

/// The progress callback's type.
pub type ProgressFn = dyn Fn(u64, u64) + Send + Sync;

/// A progress callback in [`DecodeOptions`].
#[derive(Clone)]
pub struct ProgressCallback(pub Arc<ProgressFn>);

impl ProgressCallback {
    pub fn new(f: impl Fn(u64, u64) + Send + Sync + 'static) -> Self {
        ProgressCallback(Arc::new(f))
    }
}

impl std::fmt::Debug for ProgressCallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressCallback")
    }
}

impl DecodeOptions {
    /// The worker threads `jobs` asks for: as many as the CPUs we may run
    /// on for 0, at most [`MAX_JOBS`].
    pub fn workers(&self) -> usize {
        match self.jobs {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
        .min(MAX_JOBS)
    }

    /// Whether ops of `task` are wanted.
    pub fn wants(&self, task: TaskId) -> bool {
        self.tids.as_ref().is_none_or(|t| t.contains(&task.tid))
            && self.pids.as_ref().is_none_or(|p| p.contains(&task.pid))
    }

    fn filtered(&self) -> bool {
        self.tids.is_some() || self.pids.is_some()
    }
}

/// What the decode did, for the CLI's summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecodeStats {
    /// Segments decoded and skipped (by the thread filters).
    pub segments: u64,
    pub segments_skipped: u64,
    /// Chunks decoded (each part counted of a chunk decoded in parts,
    /// `parts`), and skipped as outside the `--start/--duration` window.
    pub chunks: u64,
    pub chunks_skipped: u64,
    /// The most ops of one chunk (of one piece, for a chunk handed on in
    /// pieces), and the most held at once by the ordering stage and the
    /// chunks decoded and not delivered (the memory bound).
    pub max_chunk_ops: u64,
    pub max_ops_held: u64,
    /// Chunks whose ops passed their bound on a decode worker
    /// ([`chunk_ops_bound`]), decoded again on the calling thread and
    /// handed on in pieces.
    pub chunks_in_pieces: u64,
    /// Trace bytes decoded.
    pub bytes: u64,
    /// Ops whose call stacks the decode workers built (`crate::stitch`),
    /// and stretches of ops built there that the stacks' thread declined
    /// (an assumption did not hold: it took their ops one by one).
    pub stacks_ahead_ops: u64,
    pub stacks_ahead_declined: u64,
    /// Jumps inside a function the decode workers left out, as the call
    /// stacks would do nothing at them (`runs`'s quiet jumps; counted
    /// among the threads' jumps and among `ops`).
    pub quiet_jumps: u64,
    /// Synchronizations at a PSB (the first, and after errors when
    /// resynchronizing at the error was not possible).
    pub syncs: u64,
    /// Of those, resynchronizations at an error (`pt_blk_resync`).
    pub resyncs: u64,
    /// Trace bytes skipped from errors to where decoding resumed.
    pub skipped_bytes: u64,
    /// Trace bytes skipped before the first PSB a decoder could
    /// synchronize at (a segment's start that is not Intel PT, is
    /// corrupt, or begins mid-stream); the whole trace when no PSB
    /// anywhere could be.
    pub unsynced_bytes: u64,
    /// PSBs passed over because libipt could not read their PSB+ (the
    /// bytes around them are not Intel PT, or are corrupt).
    pub bad_psbs: u64,
    /// The most instructions decoded without libipt consuming a trace
    /// byte (the no-progress bound is [`NO_PROGRESS_INSNS`]).
    pub max_stall: u64,
    /// Ops left out because their stall reached the no-progress bound.
    pub no_progress_ops: u64,
    pub blocks: u64,
    pub insns: u64,
    /// Per (pid, tid).
    pub threads: BTreeMap<(u32, u32), ThreadStats>,
    /// Decode errors by libipt error name.
    pub errors: BTreeMap<String, u64>,
    pub overflows: u64,
    /// Gaps for lost AUX data.
    pub lost_data: u64,
    /// Gaps for code with no image (one per stretch: the `Nomap` errors
    /// of each resync point in it make one gap).
    pub no_image: u64,
    /// Instructions decoded while no thread was known to run (per-cpu
    /// buffers without switch sideband); their ops are dropped.
    pub unattributed_insns: u64,
    /// Ops handed to the sink, and the jumps the decode workers left out
    /// (`quiet_jumps`).
    pub ops: u64,
    /// First and last TSC seen by the decoders.
    pub tsc_span: Option<(u64, u64)>,
    /// First and last perf time of the ops handed over.
    pub time_span: Option<(u64, u64)>,
    /// Chunks (and parts, as `chunks` counts them) ptdec's own flow
    /// decoder decoded (`--decoder fast`).
    pub fast_chunks: u64,
    /// Chunks and parts it handed to libipt, by why.
    pub fallbacks: BTreeMap<String, u64>,
    /// Chunks it decoded where libipt 2.1.2 is known to decode wrong, by
    /// why (docs/decoding.md): `--decoder libipt` gives other output
    /// there.
    pub libipt_differs: BTreeMap<String, u64>,
}

impl DecodeStats {
    fn merge_chunk(&mut self, s: &ChunkStats) {
        self.chunks += 1;
        self.bytes += s.bytes;
        self.syncs += s.syncs;
        self.resyncs += s.resyncs;
        self.skipped_bytes += s.skipped_bytes;
        self.unsynced_bytes += s.unsynced_bytes;
        self.bad_psbs += s.bad_psbs;
        self.max_stall = self.max_stall.max(s.max_stall);
        self.no_progress_ops += s.no_progress_ops;
        self.blocks += s.blocks;
        self.insns += s.insns;
        self.overflows += s.overflows;
        self.lost_data += s.lost_data;
        self.no_image += s.no_image;
        self.unattributed_insns += s.unattributed_insns;
        self.fast_chunks += s.fast;
        for (k, v) in &s.fallbacks {
            *self.fallbacks.entry((*k).to_string()).or_default() += v;
        }
        for (k, v) in &s.libipt_differs {
            *self.libipt_differs.entry((*k).to_string()).or_default() += v;
        }
        for (k, v) in &s.errors {
            *self.errors.entry(k.clone()).or_default() += v;
        }
        if let Some((a, b)) = s.tsc_span {
            self.tsc_span = Some(self.tsc_span.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
        }
    }
}

/// A decode that could not run at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// libipt refused to set up a decoder or image section cache.
    #[error("libipt: cannot {what}: {}", ipt::message(*.error))]
    Libipt {
        what: &'static str,
        /// libipt's error (its message is in this one's).
        error: PtError,
    },
    /// A CPU libipt knows no errata for (`ptdec raw --cpu`).
    #[error("{v} knows no CPU {family}/{model}/{stepping}: give a CPU it knows (FAMILY/MODEL[/STEPPING], e.g. 6/85/4) or --cpu none to decode without errata workarounds", v = libipt_version())]
    UnknownCpu {
        family: u16,
        model: u8,
        stepping: u8,
    },
    /// A worker thread panicked.
    #[error("a decode worker panicked: {0}")]
    Worker(String),
    /// [`DecodeOptions::stop`] was set: the output failed, and its error
    /// says why.
    #[error("decoding stopped: its output could not be written")]
    Stopped,
}

/// The linked libipt's version, for messages: "libipt 2.1.2".
pub fn libipt_version() -> String {
    let (major, minor, patch) = ipt::version();
    format!("libipt {major}.{minor}.{patch}")
}

/// More instructions than this decoded without libipt consuming a byte of
/// trace is a decode error ("no progress"), followed by a resync at the
/// next PSB. Only code that needs no packets runs without consuming trace:
/// straight-line code and direct jumps and calls (every conditional
/// branch, return and indirect branch needs TNT or TIP). Real code meets
/// one of those within thousands of instructions (`DecodeStats::max_stall`
/// of the real recordings and ptsim's programs stays far below this);
/// libipt following a loop of direct jumps (a corrupt trace, or a trace
/// against the wrong image) would otherwise grow the op list until memory
/// runs out. Per stall at most this many instructions are decoded, and
/// a stall that reaches the bound keeps none of its ops (the gap stands
/// for them: `ChunkDecoder::drop_stall_ops`).
pub const NO_PROGRESS_INSNS: u64 = 1 << 20;

/// What a raw decode cannot read from a perf.data file: the values ptxed
/// takes on its command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawConfig {
    /// (family, model, stepping) of the CPU, for libipt's errata
    /// workarounds; `None`: decode by the spec.
    pub cpu: Option<(u16, u8, u8)>,
    /// IA32_RTIT_CTL.MTCFreq (needed when the trace has MTC packets).
    pub mtc_freq: u8,
    /// The max non-turbo ratio, `MSR_PLATFORM_INFO[15:8]` (calibrates CYC).
    pub nom_freq: u8,
    /// CPUID leaf 0x15 eax (denominator) and ebx (numerator) of the TSC to
    /// core crystal clock ratio (needed with MTC packets).
    pub cpuid_15_eax: u32,
    pub cpuid_15_ebx: u32,
    /// The TSC frequency: times become ns; `None`: they stay TSC ticks.
    pub tsc_hz: Option<u64>,
    /// Count cycles (the trace has CYC packets).
    pub cycles: bool,
    /// Address filter ranges 0 to 3 the trace was recorded with (ptxed's
    /// `--filter:addrN_cfg/_a/_b`), for libipt's errata workarounds.
    pub addr_filters: [ipt::AddrFilter; 4],
    /// libipt's tick and iflags events (ptxed's `--event:tick`,
    /// `--event:iflags`): more moments at which sideband is applied.
    pub tick_events: bool,
    pub iflags_events: bool,
    /// perf_event sideband (ptxed's `--pevent:*`): the image follows it.
    pub sideband: Option<SidebandRef>,
}

/// Shared, read sideband in a [`RawConfig`] (equal when it is the same).
#[derive(Debug, Clone)]
pub struct SidebandRef(pub Arc<dyn RawSideband>);

impl PartialEq for SidebandRef {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SidebandRef {}

/// The task a raw decode's ops belong to.
pub const RAW_TASK: TaskId = TaskId { pid: 1, tid: 1 };

/// Finds and opens every image [`decode`] will read for `trace` with
/// `opts` (the store keeps them, so `decode` finds them again at no
/// cost). Called before the outputs are created, so that an output that
/// is one of them is refused at once, not after the decode
/// (`crate::outfile`).
pub fn open_images(trace: &dyn TraceSource, images: &dyn CodeImages, opts: &DecodeOptions) {
    images.add_known_build_ids(trace.build_ids());
    DecodeSetup::new(trace, images, opts);
}

/// Decodes every segment of `trace` and hands each thread's ops to `sink`
/// (see the module doc for the order and the counters).
pub fn decode(
    trace: &dyn TraceSource,
    images: &dyn CodeImages,
    opts: &DecodeOptions,
    sink: &mut dyn OpSink,
) -> Result<DecodeStats, DecodeError> {
    decode_with(trace, images, opts, sink, None, None)
}

/// [`decode`], with `prepare` run by the decode workers on each run of
/// ops they decoded (`crate::stitch`: the call stacks built ahead, which
/// the sink takes through [`OpSink::stretch`]), and `spans` asked by
/// them whether a jump stays in its function (`runs`'s quiet jumps: such
/// jumps are marked `inside`, and some left out, as the call stacks
/// would do nothing at them; not for a sink that wants every jump).
pub fn decode_with(
    trace: &dyn TraceSource,
    images: &dyn CodeImages,
    opts: &DecodeOptions,
    sink: &mut dyn OpSink,
    prepare: Option<&dyn crate::model::ops::Prepare>,
    spans: Option<&dyn crate::model::slices::JumpSpans>,
) -> Result<DecodeStats, DecodeError> {
    images.add_known_build_ids(trace.build_ids());
    let mut setup = DecodeSetup::new(trace, images, opts);
    setup.jump_spans = spans;
    let buffers = trace.buffers();
    let mut stats = DecodeStats::default();
    let mut segments = Vec::new();
    // The buffer of the trace's segment before, when it is decoded.
    let mut decoded_before: Option<usize> = None;
    for s in trace.segments() {
        if !setup.wanted(&s) {
            stats.segments_skipped += 1;
            decoded_before = None;
            continue;
        }
        let follows = s.after_loss && decoded_before == Some(s.buffer);
        decoded_before = Some(s.buffer);
        let buf = &buffers[s.buffer];
        let owner = if setup.per_cpu {
            buf.cpu.map(Owner::Cpu)
        } else {
            buf.tid.map(Owner::Thread)
        }
        .or(buf.cpu.map(Owner::Cpu));
        let bytes = trace.buffer_file(s.buffer);
        let pieces = s
            .pieces
            .iter()
            .map(|&(off, len)| bytes.get(off..off + len).unwrap_or_default())
            .collect();
        segments.push(SegmentPlan {
            stream: Stream::new(pieces),
            aux_offset: s.aux_offset,
            after_loss: s.after_loss,
            before_loss: s.before_loss,
            follows,
            owner,
        });
    }
    decode_segments(
        &setup,
        &segments,
        sink,
        stats,
        &|part| trace.release(part),
        prepare,
    )
}

/// Decodes raw Intel PT (as LLDB, simple-pt or kAFL write it: the bytes
/// of one trace buffer, no perf.data around them) as one thread,
/// [`RAW_TASK`], with an image made of `sections`. `Stamp::time` is in TSC
/// ticks, or ns when `cfg.tsc_hz` is given; `opts.start`/`end` compare with it.
/// `spans`: as [`decode_with`]'s.
pub fn decode_raw(
    pt: &[u8],
    sections: &[RawSection],
    cfg: &RawConfig,
    opts: &DecodeOptions,
    sink: &mut dyn OpSink,
    spans: Option<&dyn crate::model::slices::JumpSpans>,
) -> Result<DecodeStats, DecodeError> {
    if let Some((family, model, stepping)) = cfg.cpu {
        let cpu = Cpu {
            family,
            model,
            stepping,
        };
        if PtConfig::default().set_cpu(cpu).is_err() {
            return Err(DecodeError::UnknownCpu {
                family,
                model,
                stepping,
            });
        }
    }
    // A listing is printed as the workers decode: one chunk, in order.
    // Sideband is replayed in order from the start, as libipt-sb does:
    // one chunk too (see `crate::pevent`).
    let listing;
    let opts = if opts.insn_list.is_some() || cfg.sideband.is_some() {
        listing = DecodeOptions {
            chunking: Chunking::Sequential,
            jobs: 1,
            ..opts.clone()
        };
        &listing
    } else {
        opts
    };
    let mut setup = DecodeSetup::raw(sections, cfg, opts);
    setup.jump_spans = spans;
    let segment = SegmentPlan {
        stream: Stream::new(vec![pt]),
        aux_offset: 0,
        after_loss: false,
        before_loss: false,
        follows: false,
        owner: Some(Owner::Task(RAW_TASK)),
    };
    decode_segments(
        &setup,
        &[segment],
        sink,
        DecodeStats::default(),
        &|_| {},
        None,
    )
}

/// A segment to decode: its bytes and where they sit.
struct SegmentPlan<'t> {
    stream: Stream<'t>,
    aux_offset: u64,
    after_loss: bool,
    before_loss: bool,
    /// After lost data, with the segment before the loss (the one before
    /// this one) decoded too: its end made the loss's gap.
    follows: bool,
    owner: Option<Owner>,
}

/// The shared core: cuts the segments into chunks, decodes them on the
/// workers and hands the ops, in order, to `sink`. `release` is given the
/// input bytes of each chunk once it is delivered (a mapped trace drops
/// them from resident memory: peak RSS follows the window, not the trace).
fn decode_segments(
    setup: &DecodeSetup<'_>,
    segments: &[SegmentPlan<'_>],
    sink: &mut dyn OpSink,
    mut stats: DecodeStats,
    release: &dyn Fn(&[u8]),
    prepare: Option<&dyn crate::model::ops::Prepare>,
) -> Result<DecodeStats, DecodeError> {
    let opts = setup.opts;
    let chunk_bytes = chunk_bytes(setup);
    let threads = worker_threads(opts, chunk_bytes);
    let window = opts.window.unwrap_or(2 * threads + 2);
    let mut jobs: Vec<ChunkJob> = Vec::new();
    let cfg = setup.pt_config();
    for (si, seg) in segments.iter().enumerate() {
        stats.segments += 1;
        segment_jobs(
            setup,
            &cfg,
            chunk_bytes,
            (si, seg),
            release,
            &mut stats,
            &mut jobs,
        );
    }
    // Delivery order: per-thread buffers in stream order, segment after
    // segment; per-cpu buffers by chunk start time across CPUs.
    if setup.per_cpu {
        jobs.sort_by_key(|j| j.meta.start_time.unwrap_or(0));
    }
    let watermarks: Vec<Option<u64>> = (0..jobs.len())
        .map(|k| jobs.get(k + 1).map(|j| j.meta.start_time.unwrap_or(0)))
        .collect();
    let progress = Progress {
        done: AtomicU64::new(0),
        total: jobs.iter().map(|j| j.meta.len).sum(),
        report: opts.progress.as_ref().map(|p| &*p.0),
    };
    let pool = runs::OpPool::default();
    let mut orderer = Orderer::new(
        opts,
        setup.cycles,
        setup.per_cpu,
        segments.len(),
        &pool,
        stats,
    );
    for (si, seg) in segments.iter().enumerate() {
        if seg.follows {
            orderer.follows_loss(si);
        }
    }
    // One chunk as long as its segment (`ptdec raw` with a listing or
    // sideband): decoded here, its runs handed on as they fill up, so that
    // memory stays bounded however long the trace.
    if opts.chunking == Chunking::Sequential && jobs.len() == 1 && !setup.per_cpu {
        decode_in_place(
            setup,
            &pool,
            (&segments[0].stream, &jobs[0]),
            &mut orderer,
            sink,
        )?;
        progress.add(jobs[0].meta.len);
        return Ok(orderer.finish(sink));
    }
    // A chunk over its op bound is decoded again here, with these images.
    let mut images_here: Option<worker_images::WorkerImages<'_, '_>> = None;
    let mut deliver = |k: usize, mut out: chunk::ChunkOutput, held: usize| {
        let job = &jobs[k];
        let now = held + orderer.held_ops();
        orderer.stats.max_ops_held = orderer.stats.max_ops_held.max(now as u64);
        let stream = &segments[job.stream].stream;
        if let Some(redo) = out.redo.take() {
            orderer.stats.chunks_in_pieces += 1;
            // Fresh caches after code decoded in two execution modes
            // (`WorkerImages::modes_mixed`).
            if images_here.as_ref().is_some_and(|i| i.modes_mixed()) {
                images_here = None;
            }
            let images = match &mut images_here {
                Some(i) => &*i,
                None => &*images_here.insert(worker_images::WorkerImages::new(setup)?),
            };
            parts::decode_here(
                images,
                &pool,
                (stream, job, redo),
                (&mut orderer, watermarks[k]),
                sink,
            )?;
        } else {
            parts::deliver(&mut orderer, job, out, watermarks[k], sink);
        }
        let start = job.start();
        stream.for_each_piece(start..start + job.meta.len, release);
        Ok(())
    };
    let streams: Vec<&Stream<'_>> = segments.iter().map(|s| &s.stream).collect();
    let shared = workers::Shared {
        setup,
        streams: &streams,
        jobs: &jobs,
        pool: &pool,
        progress: &progress,
        prepare,
    };
    let limits = workers::Limits {
        threads,
        window,
        bytes: MAX_BYTES_IN_FLIGHT,
        ops: opts.ops_in_flight.unwrap_or(MAX_OPS_IN_FLIGHT),
        inline: workers::inline_on_one_cpu(threads),
    };
    workers::run(&shared, limits, &mut deliver)?;
    Ok(orderer.finish(sink))
}

/// How many bytes of trace a chunk holds: `--chunk-size`, or the default
/// for the trace's kind (smaller with CYC, larger when one thread decodes
/// a single CPU's buffer).
fn chunk_bytes(setup: &DecodeSetup<'_>) -> u64 {
    let opts = setup.opts;
    opts.chunking.bytes().unwrap_or(if setup.cycles {
        DEFAULT_CHUNK_BYTES_CYC
    } else if (!setup.per_cpu || opts.any_interleaving) && decodes_on_calling_thread(opts) {
        DEFAULT_CHUNK_BYTES_ONE_CPU
    } else {
        DEFAULT_CHUNK_BYTES
    })
}

/// Cuts segment `si` into chunks of about `chunk_bytes` at PSBs (as
/// libipt, configured by `cfg`, reads them) and appends a job for each
/// chunk the time window keeps (counting the others as skipped in `stats`).
fn segment_jobs(
    setup: &DecodeSetup<'_>,
    cfg: &PtConfig,
    chunk_bytes: u64,
    (si, seg): (usize, &SegmentPlan<'_>),
    release: &dyn Fn(&[u8]),
    stats: &mut DecodeStats,
    jobs: &mut Vec<ChunkJob>,
) {
    let opts = setup.opts;
    let slack = setup.switch_slack;
    let (start, end) = (opts.start, opts.end);
    let before = |tsc: u64| start.is_some_and(|s| setup.perf_time(tsc).saturating_add(slack) < s);
    let past = |tsc: u64| end.is_some_and(|e| setup.perf_time(tsc) > e.saturating_add(slack));
    let window = chunks::Window {
        bounded: start.is_some() || end.is_some(),
        before: &before,
        past: &past,
    };
    let (cuts, not_cut) = cut(&seg.stream, cfg, chunk_bytes, &window, release);
    stats.chunks_skipped += not_cut;
    let len = seg.stream.len();
    let n = cuts.len();
    let times: Vec<Option<u64>> = cuts
        .iter()
        .map(|c| c.tsc.map(|t| setup.perf_time(t)))
        .collect();
    let (lo, hi) = in_window(&times, start, end, slack);
    stats.chunks_skipped += (n - (hi - lo)) as u64;
    // With CYC, a warm-up from a PSB before each chunk, in the segment's
    // last WARMUP_BYTES before it: see `chunk::decode_fast`. The next
    // chunk's too, which a chunk decodes as it is decoded where an error
    // lies on the walk to its first IP (`chunk::NextChunk`).
    let warmups: Vec<u64> = (lo..(hi + 1).min(n))
        .map(|ci| match setup.cycles {
            true => chunks::warmup_len(cfg, &seg.stream, cuts[ci].range.start, WARMUP_BYTES),
            false => 0,
        })
        .collect();
    // Each chunk's next, and where its warm-up starts.
    let nexts: Vec<Option<(NextChunk, u64)>> = (lo..hi)
        .map(|ci| {
            let next = cuts.get(ci + 1)?;
            let (warmup, last) = (warmups[ci + 1 - lo], next.range.end == len);
            NextChunk::of(&next.range, warmup, last, times[ci + 1])
        })
        .collect();
    for (ci, c) in cuts.into_iter().enumerate().take(hi).skip(lo) {
        let (warmup, next) = (warmups[ci - lo], nexts[ci - lo]);
        let from = c.decode.start - warmup;
        let lead = NextChunk::lead(from, next);
        jobs.push(ChunkJob {
            stream: si,
            decode: from - lead..c.decode.end,
            meta: ChunkMeta {
                aux_offset: seg.aux_offset + c.range.start,
                len: c.range.end - c.range.start,
                after_loss: seg.after_loss && c.range.start == 0,
                before_loss: seg.before_loss && c.range.end == len,
                first: ci == lo,
                last: c.range.end == len,
                owner: seg.owner,
                start_time: times[ci],
                warmup,
                op_limit: None,
                next: next.map(|(n, _)| n),
                lead,
            },
        });
    }
}

/// The chunks `lo..hi` of a segment that the time window `start..end`
/// needs, given each chunk's start time (rising within a segment): chunks
/// wholly before its start or after its end are not decoded. At least one
/// chunk is kept.
fn in_window(
    times: &[Option<u64>],
    start: Option<u64>,
    end: Option<u64>,
    slack: u64,
) -> (usize, usize) {
    let n = times.len();
    let lo = match start {
        Some(start) => {
            let i = times.partition_point(|t| t.is_some_and(|t| t.saturating_add(slack) < start));
            i.saturating_sub(1)
        }
        None => 0,
    };
    let hi = match end {
        Some(end) => times.partition_point(|t| t.is_none_or(|t| t <= end.saturating_add(slack))),
        None => n,
    }
    .max(lo + 1)
    .min(n);
    (lo, hi)
}

/// Decodes `job`, the one chunk of a sequential decode, on this thread:
/// by the fast decoder, holding its ops up to the chunk's op bound, and
/// past it (or where it gave the chunk up) in parts, handing runs to
/// `orderer` as they fill up (`parts::decode_here`).
fn decode_in_place(
    setup: &DecodeSetup<'_>,
    pool: &runs::OpPool,
    (stream, job): (&Stream<'_>, &ChunkJob),
    orderer: &mut Orderer<'_>,
    sink: &mut dyn OpSink,
) -> Result<(), DecodeError> {
    let images = worker_images::WorkerImages::new(setup)?;
    let first = parts::caught(|| parts::first_try(&images, pool, stream, job))?;
    let redo = match first {
        Ok(out) => {
            orderer.chunk(job.stream, job.meta.first, out, None, sink);
            return Ok(());
        }
        Err(redo) => redo,
    };
    parts::decode_here(&images, pool, (stream, job, redo), (orderer, None), sink)
}
