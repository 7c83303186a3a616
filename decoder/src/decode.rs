//! The decoding stage: libipt's block decoder over each [`Segment`] of AUX
//! data, with the sideband applied, producing per-thread [`Op`]s for the
//! call-stack stage.
//!
//! # How a segment is decoded
//!
//! One block decoder per segment (configured from the trace: CPU for errata,
//! MTC frequency, nominal frequency, CPUID.15H ratio), blocks ended at every
//! call and jump so that each control transfer is seen. The image follows
//! the process that runs: per-thread buffers use their thread's process;
//! per-cpu buffers take the task from the sideband's context switches, applied
//! where the trace is outside user code — at a TIP.PGE (tracing enabled)
//! with a small slack for timing imprecision, or at a kernel block once the
//! switch is due when the kernel is traced (libipt-sb's rule; a user-only
//! trace cannot switch tasks while it is enabled). The libipt image is
//! rebuilt only when the (process, map version) changes; sections come from a
//! per-worker image section cache, so each file section is mapped once per
//! worker.
//!
//! # Raw PT
//!
//! [`decode_raw`] runs the same per-segment decoder over raw trace bytes
//! (`ptdec raw`): one segment, one task ([`RAW_TASK`]), one image holding
//! every given section, and the libipt configuration the caller gives
//! instead of AUXTRACE_INFO. There is no sideband, so `Stamp::time` is the
//! TSC (or ns from a given TSC frequency).
//!
//! # Progress
//!
//! [`DecodeOptions::progress`] is called from the workers with the bytes
//! decoded so far and the total, every 4096 blocks and at each segment's
//! end; ops reach the sink only after every segment is decoded.
//!
//! # The decode loop, as ptxed's
//!
//! Per segment: sync at the first PSB; then, as libipt's `ptxed` does,
//! drain the pending events, stop when the status says end of stream
//! (`pts_eos`: libipt would otherwise follow the code after the last packet
//! and end in a false no-image error), and take the next block. The block
//! `pt_blk_next` fills in before an error holds the instructions decoded
//! before it: they count. Status updates (libipt's state at a PSB+) change
//! nothing; an untraced stretch (`Op::Disabled` .. `Op::Enabled`) starts
//! only at a real disable (TIP.PGD, async disable, TraceStop) while tracing
//! is on, so its slices pair one to one with the trace's disable/enable
//! pairs. An overflow before tracing was first enabled is still a gap.
//!
//! # Errors
//!
//! A decode error becomes a `Gap(DecodeError)` (or `Gap(NoImage)` when the
//! code's memory is not in the image; one per stretch) at the error's
//! stream offset, and the decoder resynchronizes *at the error* with
//! libipt 2.2's `pt_blk_resync` (ptxed's `--resync-on-error`: the next FUP,
//! TIP.PGE or PSB that gives an IP, often long before the next PSB), or at
//! the next PSB when that fails, when an error repeats at the same offset,
//! or for `ptdec raw --on-error next-psb`. [`DecodeStats`] counts PSB syncs,
//! resyncs and the bytes skipped. OVF becomes `Gap(Overflow)`; data lost
//! between segments (AUX records flagged truncated/partial/collision, or
//! holes in the AUX offsets) becomes `Gap(LostData)`.
//!
//! More than [`NO_PROGRESS_INSNS`] instructions decoded without libipt
//! consuming a byte of trace is a decode error too (code that loops through
//! direct jumps, which need no packets: a hostile or corrupt trace, or the
//! wrong image), followed by a sync at the next PSB: memory per segment is
//! bounded whatever the bytes are.
//!
//! # Order of the ops handed to the sink
//!
//! Segments are decoded in parallel (`std::thread::scope`, one worker per
//! core). Each worker collects its segment's ops as *runs* (a stretch of one
//! task on one buffer). When all are done, the runs of each thread are put in
//! order (per-thread buffers: stream order; per-cpu buffers: by start time,
//! since a thread migrates between CPUs), their counters made cumulative, and
//! handed to the sink thread by thread, on the calling thread: every thread's
//! ops arrive in execution order, one thread after another, each thread's
//! last op an [`Op::End`]. Memory is therefore proportional to the number of
//! ops of the trace.
//!
//! # Counters
//!
//! `Stamp::insns` counts the instructions the thread retired in traced code
//! up to and including the op's branch. `Stamp::cycles` is present when the
//! recording had CYC packets; it is estimated from libipt's cycle-accurate
//! time and the core:bus ratio (`Δtsc × CBR / max non-turbo ratio`).
//! `Stamp::time` is perf time (ns) from libipt's TSC estimate (TSC, MTC, CYC);
//! traces without a TSC conversion carry raw TSC values.
//!
//! # Unsafe
//!
//! None: libipt is reached through the `ipt` crate's safe wrapper, which
//! holds all of the project's FFI.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use ipt::{
    Block, BlockDecoder, Config as PtConfig, Cpu, Error as PtError, Event as PtEvent, EventKind,
    Frequency, SectionCache, Status,
};
use sideband::timeline::{Mapping, TaskId, Timeline};

use crate::images::{is_kernel_name, ImageStore};
use crate::input::{AuxBuffer, Segment, Trace};
use crate::ops::{GapKind, Op, OpSink, Stamp};

/// What to decode and how.
#[derive(Debug, Clone, Default)]
pub struct DecodeOptions {
    /// Only these threads (`--tid`); `None`: all.
    pub tids: Option<BTreeSet<u32>>,
    /// Only these processes (`--pid`); `None`: all.
    pub pids: Option<BTreeSet<u32>>,
    /// Drop ops before this perf time (ns).
    pub start: Option<u64>,
    /// Drop ops after this perf time (ns); decoding of a segment stops past it.
    pub end: Option<u64>,
    /// Worker threads; 0: `available_parallelism`.
    pub jobs: usize,
    /// How far (ns) a context switch or mmap record may lie after the time
    /// libipt estimates for a TIP.PGE and still apply to it; `None`: two MTC
    /// periods (1 µs without MTC).
    pub switch_slack_ns: Option<u64>,
    /// Called from the decode workers as trace bytes are decoded: (bytes
    /// decoded, bytes to decode). Decoding is done when they are equal;
    /// the ops are handed to the sink after that.
    pub progress: Option<ProgressCallback>,
    /// Called from the decode workers with every instruction, event and
    /// error in decode order (`ptdec raw --insn-list`; meant for one
    /// segment: with several, workers interleave).
    pub insn_list: Option<ListCallback>,
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
    /// A decode error at a trace offset (of the segment): `what` is
    /// ptxed's error type (`error`, `sync error`), `message` libipt's.
    Error {
        offset: u64,
        what: &'static str,
        message: String,
    },
    /// The trace ended while tracing was enabled.
    EndOfTrace,
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
            ListItem::Error {
                offset,
                what,
                message,
            } => write!(f, "[{offset:x}: {what}: {message}]"),
            ListItem::EndOfTrace => f.write_str("[end of trace]"),
        }
    }
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
    /// Whether ops of `task` are wanted.
    pub fn wants(&self, task: TaskId) -> bool {
        self.tids.as_ref().is_none_or(|t| t.contains(&task.tid))
            && self.pids.as_ref().is_none_or(|p| p.contains(&task.pid))
    }

    fn filtered(&self) -> bool {
        self.tids.is_some() || self.pids.is_some()
    }
}

/// Per-thread totals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadStats {
    pub insns: u64,
    pub calls: u64,
    pub returns: u64,
    pub jumps: u64,
    pub gaps: u64,
    /// Ops handed to the sink.
    pub ops: u64,
    /// Perf time of the first and last op.
    pub span: Option<(u64, u64)>,
}

/// What the decode did, for the CLI's summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecodeStats {
    /// Segments decoded and skipped (by the thread filters).
    pub segments: u64,
    pub segments_skipped: u64,
    /// Trace bytes decoded.
    pub bytes: u64,
    /// Synchronizations at a PSB (the first, and after errors when
    /// resynchronizing at the error was not possible).
    pub syncs: u64,
    /// Of those, resynchronizations at an error (`pt_blk_resync`).
    pub resyncs: u64,
    /// Trace bytes skipped from errors to where decoding resumed.
    pub skipped_bytes: u64,
    /// The most instructions decoded without libipt consuming a trace
    /// byte (the no-progress bound is [`NO_PROGRESS_INSNS`]).
    pub max_stall: u64,
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
    /// Ops handed to the sink.
    pub ops: u64,
    /// First and last TSC seen by the decoders.
    pub tsc_span: Option<(u64, u64)>,
    /// First and last perf time of the ops handed over.
    pub time_span: Option<(u64, u64)>,
}

impl DecodeStats {
    fn merge_segment(&mut self, s: &SegStats) {
        self.segments += 1;
        self.bytes += s.bytes;
        self.syncs += s.syncs;
        self.resyncs += s.resyncs;
        self.skipped_bytes += s.skipped_bytes;
        self.max_stall = self.max_stall.max(s.max_stall);
        self.blocks += s.blocks;
        self.insns += s.insns;
        self.overflows += s.overflows;
        self.lost_data += s.lost_data;
        self.no_image += s.no_image;
        self.unattributed_insns += s.unattributed_insns;
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
    #[error("libipt: cannot {what}: {source}")]
    Libipt {
        what: &'static str,
        #[source]
        source: PtError,
    },
    /// A CPU libipt knows no errata for (`ptdec raw --cpu`).
    #[error("libipt {v} knows no CPU {family}/{model}/{stepping}: give a CPU it knows (FAMILY/MODEL[/STEPPING], e.g. 6/85/4) or --cpu none to decode without errata workarounds", v = LIBIPT_VERSION)]
    UnknownCpu {
        family: u16,
        model: u8,
        stepping: u8,
    },
    /// A worker thread panicked.
    #[error("a decode worker panicked: {0}")]
    Worker(String),
}

/// The vendored libipt's version, for messages.
pub const LIBIPT_VERSION: &str = "2.2";

/// More instructions than this decoded without libipt consuming a byte of
/// trace is a decode error ("no progress"), followed by a resync at the
/// next PSB. Only code that needs no packets runs without consuming trace:
/// straight-line code and direct jumps and calls (every conditional
/// branch, return and indirect branch needs TNT or TIP). Real code meets
/// one of those within thousands of instructions (`DecodeStats::max_stall`
/// of the real recordings and ptsim's programs stays far below this);
/// libipt following a loop of direct jumps (a corrupt trace, or a trace
/// against the wrong image) would otherwise grow the op list until memory
/// runs out. Per stall at most this many instructions (and ops) are kept.
pub const NO_PROGRESS_INSNS: u64 = 1 << 20;

/// Why decoding a segment stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// libipt's error.
    Pt(PtError),
    /// The no-progress bound: this many instructions without trace.
    NoProgress(u64),
}

/// Instructions decoded since the trace offset last moved.
#[derive(Debug, Default, Clone, Copy)]
struct Stall {
    offset: Option<u64>,
    insns: u64,
}

/// One instruction of `bitness`-bit code at `ip` from `bytes`.
fn decode_one(bitness: u32, bytes: &[u8], ip: u64) -> Option<iced_x86::Instruction> {
    let mut d = iced_x86::Decoder::with_ip(bitness, bytes, ip, iced_x86::DecoderOptions::NONE);
    let insn = d.decode();
    (!insn.is_invalid()).then_some(insn)
}

// ---------------------------------------------------------------------------
// The plan: what every worker shares.

/// A file section for libipt: `size` bytes at `offset` of `path` loaded at `vaddr`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SectionSpec {
    path: String,
    offset: u64,
    size: u64,
    vaddr: u64,
}

/// A mapping's identity in the (immutable) timeline.
type MapKey = (u64, u64, u64, usize);

fn map_key(m: &Mapping) -> MapKey {
    (m.start, m.end, m.pgoff, Arc::as_ptr(&m.file) as usize)
}

/// The pid used for "no process known": the image is the kernel's only.
const NO_PID: u32 = u32::MAX;

fn is_kernel_ip(ip: u64) -> bool {
    ip >> 63 == 1
}

/// The processes whose code the trace may hold: those of per-thread
/// buffers' threads (restricted by the options' filters: other buffers are
/// not decoded), of tasks switched in on per-cpu buffers and of ITRACE_START
/// records (all of them: a per-cpu buffer is decoded whole, and its other
/// tasks' ops dropped).
fn traced_pids(trace: &Trace, opts: &DecodeOptions) -> BTreeSet<u32> {
    let tl = &trace.timeline;
    let mut pids = BTreeSet::new();
    for b in &trace.buffers {
        if let Some(tid) = b.tid {
            let lifetimes = tl.thread_lifetimes(tid);
            let tasks = lifetimes
                .iter()
                .map(|th| TaskId { pid: th.pid, tid })
                .chain(lifetimes.is_empty().then_some(TaskId { pid: tid, tid }));
            pids.extend(tasks.filter(|t| opts.wants(*t)).map(|t| t.pid));
        }
        if let Some(cpu) = b.cpu {
            pids.extend(
                tl.cpu_slots(cpu)
                    .iter()
                    .filter_map(|s| s.task.map(|t| t.pid)),
            );
        }
    }
    pids.extend(trace.itrace_starts.iter().map(|i| i.pid));
    pids
}

/// Where the running task, its image and perf time come from.
enum Source<'t> {
    /// A perf.data trace: the sideband timeline and the images it names.
    Perf {
        trace: &'t Trace,
        images: &'t ImageStore,
        /// The sections of each mapping that has an image.
        map_specs: HashMap<MapKey, Vec<usize>>,
        /// Per pid: the times its image (or the kernel's) changes.
        changes: HashMap<u32, Vec<u64>>,
    },
    /// Raw PT (`ptdec raw`): one thread, one image of every section, time
    /// in TSC ticks (or ns from a given TSC frequency).
    Raw { tsc_hz: Option<u64> },
}

struct Plan<'t> {
    src: Source<'t>,
    opts: &'t DecodeOptions,
    specs: Vec<SectionSpec>,
    freq: Frequency,
    cpu: Option<Cpu>,
    slack: u64,
    cyc: bool,
    nom: u64,
    per_cpu: bool,
    /// Resynchronize at an error (`pt_blk_resync`) rather than at the next PSB.
    resync: bool,
}

impl<'t> Plan<'t> {
    fn new(trace: &'t Trace, images: &'t ImageStore, opts: &'t DecodeOptions) -> Self {
        let info = &trace.info;
        let tl = &trace.timeline;
        let mut specs = Vec::new();
        let mut spec_index: HashMap<SectionSpec, usize> = HashMap::new();
        let mut map_specs: HashMap<MapKey, Vec<usize>> = HashMap::new();
        let mut add = |spec: SectionSpec| -> usize {
            *spec_index.entry(spec.clone()).or_insert_with(|| {
                specs.push(spec);
                specs.len() - 1
            })
        };
        let kernel_history = tl.kernel_map().history();
        let mut kernel_changes = Vec::new();
        // Kernel code (image and modules) comes from the kernel image (kcore
        // maps the modules too), never from the module files.
        let kernel = trace.kernel_traced().then(|| images.kernel()).flatten();
        for m in kernel_history {
            kernel_changes.push(m.since);
            kernel_changes.push(m.until);
            let Some(img) = &kernel else {
                continue;
            };
            let path = img.path.to_string_lossy().into_owned();
            let mut v = Vec::new();
            for s in img.segments.iter().filter(|s| s.executable) {
                let lo = s.vaddr.max(m.start);
                let hi = s.vaddr.saturating_add(s.filesz).min(m.end);
                if lo < hi {
                    v.push(add(SectionSpec {
                        path: path.clone(),
                        offset: s.file_offset + (lo - s.vaddr),
                        size: hi - lo,
                        vaddr: lo,
                    }));
                }
            }
            map_specs.insert(map_key(m), v);
        }
        let mut changes = HashMap::new();
        for pid in traced_pids(trace, opts) {
            let mut c = kernel_changes.clone();
            if let Some(pm) = tl.process_maps(pid) {
                for m in pm.history() {
                    c.push(m.since);
                    c.push(m.until);
                    if is_kernel_name(&m.file.filename) {
                        continue;
                    }
                    let Some(img) = images.get(&m.file) else {
                        continue;
                    };
                    let spec = SectionSpec {
                        path: img.path.to_string_lossy().into_owned(),
                        offset: m.pgoff,
                        size: m.end - m.start,
                        vaddr: m.start,
                    };
                    if m.pgoff < img.size {
                        let i = add(spec);
                        map_specs.insert(map_key(m), vec![i]);
                    }
                }
            }
            c.retain(|&t| t != u64::MAX);
            c.sort_unstable();
            c.dedup();
            changes.insert(pid, c);
        }
        kernel_changes.retain(|&t| t != u64::MAX);
        kernel_changes.sort_unstable();
        kernel_changes.dedup();
        changes.insert(NO_PID, kernel_changes);

        // perf's default when the attr is absent: mtc_period=3.
        let mtc_bits = trace.mtc_period().unwrap_or(3).min(15);
        let freq = Frequency {
            mtc_freq: mtc_bits,
            nom_freq: info.max_non_turbo_ratio.min(255) as u8,
            cpuid_15_ebx: info.tsc_ctc_ratio_n as u32,
            cpuid_15_eax: info.tsc_ctc_ratio_d as u32,
        };
        let cpu = trace.cpu.as_ref().filter(|c| c.is_intel()).map(|c| Cpu {
            family: c.family,
            model: c.model,
            stepping: c.stepping,
        });
        let mtc = trace.config_bit(info.mtc_bit).unwrap_or(true);
        let slack = opts.switch_slack_ns.unwrap_or_else(|| {
            let (n, d) = (info.tsc_ctc_ratio_n, info.tsc_ctc_ratio_d);
            match (&trace.tsc, mtc && n != 0 && d != 0) {
                (Some(tc), true) => {
                    let ticks = (2u64 << mtc_bits) * n / d;
                    tc.tsc_to_perf_time(ticks)
                        .wrapping_sub(tc.tsc_to_perf_time(0))
                        .clamp(100, 1_000_000)
                }
                _ => 1_000,
            }
        });
        Plan {
            src: Source::Perf {
                trace,
                images,
                map_specs,
                changes,
            },
            opts,
            specs,
            freq,
            cpu,
            slack,
            cyc: trace.config_bit(info.cyc_bit).unwrap_or(false),
            nom: info.max_non_turbo_ratio,
            per_cpu: info.per_cpu_mmaps,
            resync: true,
        }
    }

    /// The plan of a raw decode: every section is in the one image.
    fn raw(sections: &[RawSection], cfg: &RawConfig, opts: &'t DecodeOptions) -> Self {
        let specs = sections
            .iter()
            .map(|s| SectionSpec {
                path: s.path.to_string_lossy().into_owned(),
                offset: s.offset,
                size: s.size,
                vaddr: s.vaddr,
            })
            .collect();
        Plan {
            src: Source::Raw {
                tsc_hz: cfg.tsc_hz.filter(|&hz| hz > 0),
            },
            opts,
            specs,
            freq: Frequency {
                mtc_freq: cfg.mtc_freq,
                nom_freq: cfg.nom_freq,
                cpuid_15_eax: cfg.cpuid_15_eax,
                cpuid_15_ebx: cfg.cpuid_15_ebx,
            },
            cpu: cfg.cpu.map(|(family, model, stepping)| Cpu {
                family,
                model,
                stepping,
            }),
            slack: 0,
            cyc: cfg.cycles,
            nom: u64::from(cfg.nom_freq),
            per_cpu: false,
            resync: !cfg.next_psb_on_error,
        }
    }

    /// libipt's configuration: blocks end at every call and jump, so each
    /// control transfer is seen. A CPU libipt knows no errata for decodes
    /// by the spec (a raw decode refuses it before, in [`decode_raw`]).
    fn pt_config(&self) -> PtConfig {
        let mut c = PtConfig::default();
        c.set_freq(self.freq);
        c.set_block_flags(true, true);
        if let Some(cpu) = self.cpu {
            let _ = c.set_cpu(cpu);
        }
        c
    }

    fn timeline(&self) -> Option<&'t Timeline> {
        match self.src {
            Source::Perf { trace, .. } => Some(&trace.timeline),
            Source::Raw { .. } => None,
        }
    }

    fn perf_time(&self, tsc: u64) -> u64 {
        match &self.src {
            Source::Perf { trace, .. } => trace.tsc.map_or(tsc, |c| c.tsc_to_perf_time(tsc)),
            Source::Raw { tsc_hz: None } => tsc,
            Source::Raw { tsc_hz: Some(hz) } => {
                (u128::from(tsc) * 1_000_000_000 / u128::from(*hz)).min(u128::from(u64::MAX)) as u64
            }
        }
    }

    /// The version of `pid`'s image at `t`, and until when it holds.
    fn version(&self, pid: u32, t: u64) -> (usize, u64) {
        let Source::Perf { changes, .. } = &self.src else {
            return (0, u64::MAX);
        };
        let c = changes
            .get(&pid)
            .or_else(|| changes.get(&NO_PID))
            .map_or(&[][..], Vec::as_slice);
        let v = c.partition_point(|&x| x <= t);
        (v, c.get(v).copied().unwrap_or(u64::MAX))
    }

    /// The section specs of `pid`'s image at `t` (user mappings, then kernel).
    fn image_specs(&self, pid: u32, t: u64) -> Vec<usize> {
        let Source::Perf {
            trace, map_specs, ..
        } = &self.src
        else {
            return (0..self.specs.len()).collect();
        };
        let tl = &trace.timeline;
        let user = (pid != NO_PID)
            .then(|| tl.image_map(pid, t))
            .into_iter()
            .flat_map(|m| m.iter());
        user.chain(tl.kernel_map().at(t))
            .filter_map(|m| map_specs.get(&map_key(m)))
            .flatten()
            .copied()
            .collect()
    }

    /// Whether the buffer of segment `s` may hold ops of wanted threads.
    fn wanted(&self, s: &Segment) -> bool {
        let Source::Perf { trace, .. } = &self.src else {
            return true;
        };
        if !self.opts.filtered() {
            return true;
        }
        let b = &trace.buffers[s.buffer];
        let tl = &trace.timeline;
        if self.per_cpu {
            match b.cpu {
                Some(cpu) if !tl.cpu_slots(cpu).is_empty() => tl
                    .cpu_slots(cpu)
                    .iter()
                    .any(|sl| sl.task.is_some_and(|t| self.opts.wants(t))),
                _ => true,
            }
        } else {
            match b.tid {
                Some(tid) => {
                    let lifetimes = tl.thread_lifetimes(tid);
                    if lifetimes.is_empty() {
                        self.opts.wants(TaskId { pid: tid, tid })
                    } else {
                        lifetimes
                            .iter()
                            .any(|th| self.opts.wants(TaskId { pid: th.pid, tid }))
                    }
                }
                None => true,
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Per segment.

/// A stretch of one task's ops on one buffer; counters are run-local.
#[derive(Debug, Clone)]
struct Run {
    task: TaskId,
    start: u64,
    ops: Vec<Op>,
    insns: u64,
    cycles: u64,
}

#[derive(Debug, Default)]
struct SegStats {
    bytes: u64,
    syncs: u64,
    resyncs: u64,
    skipped_bytes: u64,
    max_stall: u64,
    blocks: u64,
    insns: u64,
    overflows: u64,
    lost_data: u64,
    no_image: u64,
    unattributed_insns: u64,
    errors: BTreeMap<String, u64>,
    tsc_span: Option<(u64, u64)>,
}

struct SegOut {
    runs: Vec<Run>,
    stats: SegStats,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transfer {
    Call,
    Return,
    Jump,
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    kind: Transfer,
    from: u64,
    /// For a call: the address after it.
    ret: u64,
    at: Stamp,
}

/// (pid, map version) of an image.
type ImageKey = (u32, usize);

/// One worker: its image section cache holds every section of the plan.
struct Worker<'p, 't> {
    plan: &'p Plan<'t>,
    iscache: Rc<SectionCache>,
    isids: Vec<Option<u32>>,
    /// The isids of each (pid, map version) image built so far.
    image_sets: RefCell<HashMap<ImageKey, Rc<[u32]>>>,
    /// Lengths of call instructions read so far, by (isid, ip): a block
    /// gives its last instruction's address, not its length.
    call_lens: RefCell<HashMap<(i32, u64), u8>>,
    emu: crate::events::EmuPtwrite, // issue13 hook
}

impl<'p, 't> Worker<'p, 't> {
    fn new(plan: &'p Plan<'t>) -> Result<Self, DecodeError> {
        let cache = SectionCache::new().map_err(|source| DecodeError::Libipt {
            what: "allocate an image section cache",
            source,
        })?;
        let isids: Vec<Option<u32>> = plan // issue13 hook (type)
            .specs
            .iter()
            .map(|s| cache.add_file(&s.path, s.offset, s.size, s.vaddr).ok())
            .collect();
        let sections = plan.specs.iter().zip(&isids); // issue13 hook
        let sections = sections.map(|(s, i)| (*i, s.path.as_str(), s.offset, s.size, s.vaddr)); // issue13 hook
        let emu = crate::events::EmuPtwrite::new(&cache, sections); // issue13 hook
        Ok(Worker {
            plan,
            iscache: Rc::new(cache),
            isids,
            image_sets: RefCell::new(HashMap::new()),
            call_lens: RefCell::new(HashMap::new()),
            emu, // issue13 hook
        })
    }

    fn decode(
        &self,
        seg: SegMeta,
        bytes: Vec<u8>,
        progress: &Progress<'_>,
    ) -> Result<SegOut, DecodeError> {
        let plan = self.plan;
        let cfg = plan.pt_config();
        let len = bytes.len() as u64;
        let mut dec = BlockDecoder::new(&cfg, &bytes).map_err(|source| DecodeError::Libipt {
            what: "allocate a block decoder",
            source,
        })?;
        // No memory besides the file sections: the callback only records
        // the address libipt found no code at (for the NoImage gap).
        dec.image().set_memory(Vec::new());
        let mut st = SegState {
            w: self,
            seg,
            owner: seg.owner,
            progress,
            reported: 0,
            runs: Vec::new(),
            run: None,
            task: None,
            image: None,
            image_until: 0,
            next_switch: u64::MAX,
            pending: None,
            need_enable: true,
            last_ip: 0,
            stall: Stall::default(),
            last_error_offset: None,
            tsc: 0,
            last_cycle_tsc: None,
            cbr: 0,
            time: 0,
            lost_first: seg.after_loss,
            stats: SegStats {
                bytes: len,
                ..SegStats::default()
            },
            end: plan.opts.end.map(|e| e.saturating_add(plan.slack)),
            emu: Default::default(), // issue13 hook
        };
        st.run_decoder(&mut dec);
        st.finish();
        Ok(SegOut {
            runs: st.runs,
            stats: st.stats,
        })
    }
}

/// Whose trace a buffer holds.
#[derive(Debug, Clone, Copy)]
enum Owner {
    /// A CPU's: the sideband's context switches say who runs.
    Cpu(u32),
    /// A thread's; its process from the sideband.
    Thread(u32),
    /// One known task (raw PT).
    Task(TaskId),
}

/// A stretch of trace bytes decoded with one decoder, as the segment
/// decoder sees it: where it sits in its buffer's stream and whose it is.
#[derive(Debug, Clone, Copy)]
struct SegMeta {
    /// Stream offset of the first byte (error offsets are reported in it).
    aux_offset: u64,
    len: u64,
    /// Data was lost just before / just after it.
    after_loss: bool,
    before_loss: bool,
    owner: Option<Owner>,
}

impl SegMeta {
    fn of(s: &Segment, buf: &AuxBuffer, per_cpu: bool) -> SegMeta {
        let owner = if per_cpu {
            buf.cpu.map(Owner::Cpu)
        } else {
            buf.tid.map(Owner::Thread)
        }
        .or(buf.cpu.map(Owner::Cpu));
        SegMeta {
            aux_offset: s.aux_offset,
            len: s.len() as u64,
            after_loss: s.after_loss,
            before_loss: s.before_loss,
            owner,
        }
    }
}

/// Decoded bytes of all segments, for the progress callback.
struct Progress<'a> {
    done: AtomicU64,
    total: u64,
    report: Option<&'a ProgressFn>,
}

impl Progress<'_> {
    fn add(&self, n: u64) {
        let done = self.done.fetch_add(n, Ordering::Relaxed) + n;
        if let Some(f) = self.report {
            f(done.min(self.total), self.total);
        }
    }
}

/// Blocks between progress reports within a segment.
const PROGRESS_BLOCKS: u32 = 1 << 12;

struct SegState<'w, 'p, 't> {
    w: &'w Worker<'p, 't>,
    seg: SegMeta,
    owner: Option<Owner>,
    progress: &'w Progress<'w>,
    /// Bytes of this segment reported to `progress`.
    reported: u64,
    runs: Vec<Run>,
    run: Option<Run>,
    task: Option<TaskId>,
    /// (pid, version) of the image in the decoder.
    image: Option<(u32, usize)>,
    image_until: u64,
    next_switch: u64,
    pending: Option<Pending>,
    /// After a sync: the first block starts a traced stretch.
    need_enable: bool,
    last_ip: u64,
    /// Instructions since the trace offset last moved.
    stall: Stall,
    /// Where the last error was (a second one there skips to the next PSB).
    last_error_offset: Option<u64>,
    tsc: u64,
    last_cycle_tsc: Option<u64>,
    cbr: u32,
    time: u64,
    /// The segment follows lost data: the first run starts with a gap.
    lost_first: bool,
    stats: SegStats,
    end: Option<u64>,
    emu: crate::events::EmuState, // issue13 hook
}

enum Flow {
    Continue,
    Stop,
}

impl SegState<'_, '_, '_> {
    fn plan(&self) -> &Plan<'_> {
        self.w.plan
    }

    fn run_decoder(&mut self, dec: &mut BlockDecoder<'_>) {
        let mut last_sync: Option<u64> = None;
        let mut status = match self.sync(dec, &mut last_sync) {
            Some(s) => s,
            None => return,
        };
        let mut blocks = 0u32;
        'blocks: loop {
            blocks = blocks.wrapping_add(1);
            if blocks % PROGRESS_BLOCKS == 0 {
                if let Ok(off) = dec.offset() {
                    self.report_progress(off);
                }
            }
            let failure = 'step: {
                while status.event_pending() {
                    match dec.event() {
                        Ok((ev, s)) => {
                            status = s;
                            self.update_time(dec, ev.tsc());
                            self.on_event(dec, &ev);
                        }
                        Err(e) => break 'step Failure::Pt(e),
                    }
                }
                // The end of the trace: libipt would otherwise follow the
                // code after the last packet until it needs one.
                if status.eos() {
                    if !status.ip_suppressed() {
                        self.list(ListItem::EndOfTrace);
                    }
                    return;
                }
                // libipt fills in the instructions it decoded before an
                // error, so the block counts whatever the status.
                let (blk, r) = dec.next_block();
                if blk.ninsn > 0 {
                    self.update_time(dec, None);
                    if let Flow::Stop = self.on_block(dec, &blk) {
                        return;
                    }
                }
                match r {
                    Ok(s) => {
                        status = s;
                        match self.check_progress(dec, blk.ninsn) {
                            Some(n) => Failure::NoProgress(n),
                            None => continue 'blocks,
                        }
                    }
                    Err(e) => Failure::Pt(e),
                }
            };
            if failure == Failure::Pt(PtError::EOS) {
                return;
            }
            match self.recover(dec, failure, &mut last_sync) {
                Some(s) => status = s,
                None => return,
            }
        }
    }

    /// Counts `n` instructions decoded: `Some(count)` when more than
    /// [`NO_PROGRESS_INSNS`] were decoded without libipt consuming a byte of
    /// trace (code that loops through direct jumps and calls, which need
    /// no packets: libipt would follow it forever).
    fn check_progress(&mut self, dec: &BlockDecoder<'_>, n: u16) -> Option<u64> {
        let off = dec.offset().ok();
        if off != self.stall.offset {
            self.stall = Stall {
                offset: off,
                insns: 0,
            };
        }
        self.stall.insns += u64::from(n);
        self.stats.max_stall = self.stats.max_stall.max(self.stall.insns);
        (self.stall.insns > NO_PROGRESS_INSNS).then_some(self.stall.insns)
    }

    /// Synchronizes at the next PSB after the last one; `None` at the end.
    fn sync(&mut self, dec: &mut BlockDecoder<'_>, last: &mut Option<u64>) -> Option<Status> {
        for _ in 0..64 {
            match dec.sync_forward() {
                Ok(s) => {
                    let off = dec.sync_offset().ok();
                    if off.is_some() && off <= *last {
                        return None;
                    }
                    *last = off;
                    self.stats.syncs += 1;
                    self.synced(dec);
                    return Some(s);
                }
                Err(PtError::EOS) => return None,
                Err(e) => {
                    let off = dec.offset().unwrap_or(0);
                    self.list(ListItem::Error {
                        offset: off,
                        what: "sync error",
                        message: e.message().to_string(),
                    });
                    *self.stats.errors.entry(format!("sync: {e:?}")).or_default() += 1;
                }
            }
        }
        None
    }

    /// State after the decoder (re)synchronized: a traced stretch starts
    /// with the next block, nothing is pending.
    fn synced(&mut self, dec: &mut BlockDecoder<'_>) {
        self.need_enable = true;
        self.pending = None;
        self.stall = Stall::default();
        self.update_time(dec, None);
    }

    /// Resynchronizes at the error (libipt 2.2's `pt_blk_resync`: the next
    /// event or PSB that tells the IP, often long before the next PSB), as
    /// ptxed's `--resync-on-error`; falls back to the next PSB. The events
    /// libipt hands out on the way are returned for the caller to apply.
    fn resync(
        &mut self,
        dec: &mut BlockDecoder<'_>,
        last: &mut Option<u64>,
        events: &mut Vec<PtEvent>,
    ) -> Option<Status> {
        for _ in 0..1024 {
            match dec.resync() {
                Ok(s) => {
                    self.stats.resyncs += 1;
                    self.synced(dec);
                    if s.ip_suppressed() {
                        self.list(ListItem::Disabled);
                    }
                    return Some(s);
                }
                Err(PtError::EVENT_IGNORED) => match dec.event() {
                    Ok((ev, _)) => events.push(ev),
                    Err(_) => break,
                },
                Err(PtError::EOS) => return None,
                Err(e) => {
                    *self
                        .stats
                        .errors
                        .entry(format!("resync: {e:?}"))
                        .or_default() += 1;
                    break;
                }
            }
        }
        self.sync(dec, last)
    }

    fn update_time(&mut self, dec: &mut BlockDecoder<'_>, tsc: Option<u64>) {
        let tsc = match tsc {
            Some(t) => t,
            None => match dec.time() {
                Ok((t, _, _)) => t,
                Err(_) => return,
            },
        };
        // libipt answers all-ones right after a sync, before the decoder has
        // read the PSB+'s TSC.
        if tsc == 0 || tsc == u64::MAX {
            return;
        }
        if self.plan().cyc {
            if let (Some(prev), Some(run)) = (self.last_cycle_tsc, self.run.as_mut()) {
                if tsc > prev {
                    let d = tsc - prev;
                    let nom = self.w.plan.nom;
                    run.cycles += if self.cbr != 0 && nom != 0 {
                        d * u64::from(self.cbr) / nom
                    } else {
                        d
                    };
                }
            }
            self.last_cycle_tsc = Some(tsc);
        }
        self.tsc = tsc;
        self.stats.tsc_span = Some(
            self.stats
                .tsc_span
                .map_or((tsc, tsc), |(a, b)| (a.min(tsc), b.max(tsc))),
        );
        self.time = self.w.plan.perf_time(tsc);
    }

    fn stamp(&self) -> Stamp {
        let run = self.run.as_ref();
        Stamp {
            time: self.time,
            insns: run.map_or(0, |r| r.insns),
            cycles: self.plan().cyc.then(|| run.map_or(0, |r| r.cycles)),
        }
    }

    fn push(&mut self, op: Op) {
        if let Some(r) = self.run.as_mut() {
            r.ops.push(op);
        }
    }

    fn gap(&mut self, kind: GapKind, offset: u64) {
        self.emu = Default::default(); // issue13 hook
        let at = self.stamp();
        self.push(Op::Gap {
            at,
            kind,
            offset: self.seg.aux_offset + offset,
        });
    }

    /// The task running at `t` on this buffer.
    fn task_at(&self, t: u64) -> Option<TaskId> {
        let tl = self.plan().timeline();
        match self.owner? {
            Owner::Cpu(cpu) => tl?.task_on_cpu(cpu, t),
            Owner::Thread(tid) => Some(TaskId {
                pid: tl.and_then(|tl| tl.thread(tid, t)).map_or(tid, |th| th.pid),
                tid,
            }),
            Owner::Task(task) => Some(task),
        }
    }

    /// Makes `task` the current one: closes the current run, starts another.
    fn switch_to(&mut self, task: Option<TaskId>, ip: u64) {
        if let (Some(Owner::Cpu(cpu)), Some(tl)) = (self.owner, self.plan().timeline()) {
            let slots = tl.cpu_slots(cpu);
            let i = slots.partition_point(|s| s.since <= self.time);
            self.next_switch = slots.get(i).map_or(u64::MAX, |s| s.since);
        }
        if task == self.task && (self.run.is_some() || task.is_none()) {
            return;
        }
        if let Some(mut r) = self.run.take() {
            if !matches!(
                r.ops.last(),
                Some(Op::Disabled { .. }) | Some(Op::Gap { .. }) | None
            ) {
                let at = Stamp {
                    time: self.time,
                    insns: r.insns,
                    cycles: self.plan().cyc.then_some(r.cycles),
                };
                r.ops.push(Op::Disabled {
                    at,
                    ip,
                    kernel: true,
                });
            }
            self.runs.push(r);
        }
        self.task = task;
        self.run = task.map(|task| Run {
            task,
            start: self.time,
            ops: Vec::new(),
            insns: 0,
            cycles: 0,
        });
        if self.run.is_some() && std::mem::take(&mut self.lost_first) {
            self.stats.lost_data += 1;
            self.gap(GapKind::LostData, 0);
        }
    }

    /// Puts the image of the current task at `t` into the decoder.
    fn refresh_image(&mut self, dec: &mut BlockDecoder<'_>, t: u64) {
        let pid = self.task.map_or(NO_PID, |t| t.pid);
        let (v, until) = self.plan().version(pid, t);
        self.image_until = until;
        if self.image == Some((pid, v)) {
            return;
        }
        self.image = Some((pid, v));
        let isids = self
            .w
            .image_sets
            .borrow_mut()
            .entry((pid, v))
            .or_insert_with(|| {
                self.plan()
                    .image_specs(pid, t)
                    .into_iter()
                    .filter_map(|i| self.w.isids[i])
                    .collect()
            })
            .clone();
        let mut img = dec.image();
        img.clear();
        for &isid in isids.iter() {
            let _ = img.add_cached(&self.w.iscache, isid);
        }
        for o in self.w.emu.overlays(&isids) {
            let _ = img.add_cached(&self.w.iscache, o); // issue13 hook
        }
    }

    /// Tracing (re)starts at `ip`: pick the task and image, emit `Enabled`.
    fn enable(&mut self, dec: &mut BlockDecoder<'_>, ip: u64) {
        let t = self.time.saturating_add(self.plan().slack);
        let task = match self.owner {
            Some(Owner::Cpu(_)) => self.task_at(t),
            _ => self.task_at(self.time),
        };
        self.switch_to(task, ip);
        // The slack lets a mapping made just before tracing resumes count
        // although the decoder's time lags; but it must not reach past an
        // exec that follows soon after (a forked child runs a few hundred
        // ns of its parent's code before execve): keep the image of now
        // when only that one maps `ip`.
        let image_t = match (self.plan().timeline(), self.task) {
            (Some(tl), Some(task))
                if tl.lookup(task.pid, ip, t).is_none()
                    && tl.lookup(task.pid, ip, self.time).is_some() =>
            {
                self.time
            }
            _ => t,
        };
        self.refresh_image(dec, image_t);
        let at = self.stamp();
        self.push(Op::Enabled {
            at,
            ip,
            first: false,
        });
        self.need_enable = false;
        self.last_ip = ip;
    }

    /// A pending transfer completes at `to`, or is dropped (`None`).
    fn resolve(&mut self, to: Option<u64>) {
        let Some(p) = self.pending.take() else {
            return;
        };
        let Some(to) = to else {
            return;
        };
        let (at, from, ret) = (p.at, p.from, p.ret);
        self.push(match p.kind {
            Transfer::Call => Op::Call { at, from, to, ret },
            Transfer::Return => Op::Return { at, from, to },
            Transfer::Jump => Op::Jump { at, from, to },
        });
    }

    fn on_event(&mut self, dec: &mut BlockDecoder<'_>, ev: &PtEvent) {
        // Status updates (libipt's state at a PSB+) change nothing; an
        // untraced stretch starts at a real disable while tracing is on
        // (`need_enable` is false once a traced block or enable was seen)
        // and ends at the next enable, so its slices pair one to one.
        let update = ev.status_update();
        match ev.kind() {
            EventKind::Enabled { ip, .. } => {
                if update && !self.need_enable {
                    return;
                }
                self.list(ListItem::Enabled);
                self.resolve(Some(ip));
                self.enable(dec, ip);
            }
            EventKind::Disabled { ip } => {
                if update || self.need_enable {
                    self.need_enable = true;
                    return;
                }
                self.list(ListItem::Disabled);
                self.resolve(ip);
                let at = self.stamp();
                self.push(Op::Disabled {
                    at,
                    ip: ip.unwrap_or(self.last_ip),
                    kernel: ip.is_none_or(is_kernel_ip),
                });
                self.need_enable = true;
            }
            EventKind::AsyncDisabled { at: from, ip } => {
                if update || self.need_enable {
                    self.need_enable = true;
                    return;
                }
                self.list(ListItem::Disabled);
                self.resolve(Some(from));
                let at = self.stamp();
                self.push(Op::Disabled {
                    at,
                    ip: from,
                    kernel: ip.is_none_or(is_kernel_ip),
                });
                self.last_ip = from;
                self.need_enable = true;
            }
            EventKind::AsyncBranch { from, to } => {
                self.resolve(Some(from));
                let to = to.unwrap_or(from);
                let at = self.stamp();
                // An interrupt returns to the instruction it interrupted.
                self.push(Op::Call {
                    at,
                    from,
                    to,
                    ret: from,
                });
                self.last_ip = to;
            }
            EventKind::Overflow { ip } => {
                self.pending = None;
                self.stats.overflows += 1;
                self.list(ListItem::Overflow);
                // An overflow before tracing was first enabled still
                // belongs to the buffer's task: start its run for the gap.
                if self.run.is_none() {
                    let task = self.task_at(self.time);
                    self.switch_to(task, ip.unwrap_or(0));
                }
                let off = dec.offset().unwrap_or(0);
                self.gap(GapKind::Overflow, off);
                match ip {
                    Some(ip) => self.enable(dec, ip),
                    None => self.need_enable = true,
                }
            }
            EventKind::Stop => {
                self.resolve(None);
                if update || self.need_enable {
                    self.need_enable = true;
                    return;
                }
                let at = self.stamp();
                self.push(Op::Disabled {
                    at,
                    ip: self.last_ip,
                    kernel: false,
                });
                self.need_enable = true;
            }
            EventKind::Cbr { .. } => {
                if let Ok(c) = dec.core_bus_ratio() {
                    self.cbr = c;
                }
                self.on_mark(&ev.kind()); // issue13 hook
            }
            k => self.on_mark(&k), // issue13 hook
        }
    }

    // issue13 hook: PTWRITE, power and event-trace events become marks on
    // the running thread (also in traces without branches: no Enabled).
    fn on_mark(&mut self, kind: &EventKind) {
        let cpu = match self.owner {
            Some(Owner::Cpu(c)) => Some(c),
            _ => None,
        };
        let Some(mark) = crate::events::mark_of(kind, cpu) else {
            return;
        };
        if self.run.is_none() || (self.need_enable && self.time >= self.next_switch) {
            let task = self.task_at(self.time);
            self.switch_to(task, self.last_ip);
        }
        let at = self.stamp();
        self.push(Op::Mark { at, mark });
    }

    fn on_block(&mut self, dec: &mut BlockDecoder<'_>, b: &Block) -> Flow {
        if b.ninsn == 0 {
            return Flow::Continue;
        }
        if self.end.is_some_and(|e| self.time > e) {
            return Flow::Stop;
        }
        self.resolve(Some(b.ip));
        if self.need_enable {
            self.enable(dec, b.ip);
        }
        if is_kernel_ip(b.ip) {
            // Kernel code: a due context switch or image change applies here.
            if self.time >= self.next_switch {
                let task = self.task_at(self.time);
                self.switch_to(task, b.ip);
                if self.task.is_some() {
                    let at = self.stamp();
                    self.push(Op::Enabled {
                        at,
                        ip: b.ip,
                        first: false,
                    });
                }
                self.refresh_image(dec, self.time);
            } else if self.time >= self.image_until {
                self.refresh_image(dec, self.time);
            }
        }
        if self.plan().opts.insn_list.is_some() {
            self.list_block(b);
        }
        let n = u64::from(b.ninsn);
        self.stats.blocks += 1;
        self.stats.insns += n;
        match self.run.as_mut() {
            Some(r) => r.insns += n,
            None => self.stats.unattributed_insns += n,
        }
        self.last_ip = b.end_ip;
        if let Some(mark) = self.w.emu.on_block(&mut self.emu, b.ip, b.end_ip) {
            let at = self.stamp(); // issue13 hook
            self.push(Op::Mark { at, mark }); // issue13 hook
        }
        let kind = self.classify(b);
        if let Some(kind) = kind {
            let ret = match kind {
                Transfer::Call => b.end_ip + self.last_len(b).map_or(0, u64::from),
                _ => 0,
            };
            self.pending = Some(Pending {
                kind,
                from: b.end_ip,
                ret,
                at: self.stamp(),
            });
        }
        Flow::Continue
    }

    /// Hands an item to the instruction listing, if one was asked for.
    fn list(&self, item: ListItem) {
        if let Some(f) = &self.plan().opts.insn_list {
            (f.0)(&item);
        }
    }

    /// Lists every instruction of `b`: the addresses between `ip` and
    /// `end_ip` come from decoding each instruction's length (ptxed does
    /// the same with XED).
    fn list_block(&self, b: &Block) {
        let mut ip = b.ip;
        for i in 0..b.ninsn {
            self.list(ListItem::Insn(ip));
            if i + 1 == b.ninsn {
                break;
            }
            let Some(insn) = self.insn_at(b, ip) else {
                self.list(ListItem::Error {
                    offset: 0,
                    what: "reconstruct error",
                    message: format!("cannot read the instruction at {ip:#x}"),
                });
                return;
            };
            // A direct branch inside a block was followed (ptxed's
            // xed_next_ip adds the displacement likewise).
            use iced_x86::OpKind as K;
            ip = match insn.op0_kind() {
                K::NearBranch16 | K::NearBranch32 | K::NearBranch64 => insn.near_branch_target(),
                _ => insn.next_ip(),
            };
        }
    }

    /// The control transfer the block's last instruction makes.
    #[allow(non_upper_case_globals)]
    fn classify(&self, b: &Block) -> Option<Transfer> {
        use ipt::ffi::*;
        match b.iclass {
            ptic_call | ptic_far_call => Some(Transfer::Call),
            ptic_return | ptic_far_return => Some(Transfer::Return),
            ptic_jump | ptic_far_jump => Some(Transfer::Jump),
            ptic_cond_jump | ptic_other | ptic_ptwrite => None,
            // ptic_indirect (an indirect jump or a far transfer),
            // ptic_unknown and classes newer libipt may add: look at the
            // instruction.
            _ => self.decode_last(b),
        }
    }

    fn decode_last(&self, b: &Block) -> Option<Transfer> {
        let insn = self.last_insn(b);
        let Some(insn) = insn else {
            // No bytes: libipt followed it, so it transfers control.
            return (!b.truncated && b.isid <= 0).then_some(Transfer::Jump);
        };
        use iced_x86::FlowControl as F;
        match insn.flow_control() {
            F::Call | F::IndirectCall => Some(Transfer::Call),
            F::Return => Some(Transfer::Return),
            F::UnconditionalBranch | F::IndirectBranch => Some(Transfer::Jump),
            // syscall, int n: a far call into the kernel.
            F::Interrupt => Some(Transfer::Call),
            _ => None,
        }
    }

    /// The length of the block's last instruction (a call's: the return
    /// address follows it), cached per worker.
    fn last_len(&self, b: &Block) -> Option<u8> {
        if b.truncated {
            return Some(b.size);
        }
        let key = (b.isid, b.end_ip);
        if let Some(&n) = self.w.call_lens.borrow().get(&key) {
            return Some(n);
        }
        let n = self.last_insn(b)?.len() as u8;
        self.w.call_lens.borrow_mut().insert(key, n);
        Some(n)
    }

    /// The block's last instruction, decoded with iced-x86 from the block's
    /// raw bytes (truncated blocks) or the image section cache.
    fn last_insn(&self, b: &Block) -> Option<iced_x86::Instruction> {
        if b.truncated {
            let bytes = &b.raw[..usize::from(b.size).min(b.raw.len())];
            return decode_one(b.bitness(), bytes, b.end_ip);
        }
        self.insn_at(b, b.end_ip)
    }

    /// The instruction at `ip` of block `b`'s image section.
    fn insn_at(&self, b: &Block, ip: u64) -> Option<iced_x86::Instruction> {
        if b.truncated && ip == b.end_ip {
            return self.last_insn(b);
        }
        let isid = u32::try_from(b.isid).ok().filter(|&i| i > 0)?;
        let mut buf = [0u8; 15];
        let n = self.w.iscache.read(&mut buf, isid, ip).ok()?;
        decode_one(b.bitness(), &buf[..n], ip)
    }

    /// Records a decode error as a gap and resynchronizes: at the error
    /// (libipt errors, when the plan says so) or at the next PSB. A
    /// segment that ends in lost data usually ends inside a packet: an
    /// error after which no PSB follows is that loss, reported by the
    /// `LostData` gap [`SegState::finish`] adds, not as a decode error.
    fn recover(
        &mut self,
        dec: &mut BlockDecoder<'_>,
        failure: Failure,
        last_sync: &mut Option<u64>,
    ) -> Option<Status> {
        let off = dec.offset().unwrap_or(0);
        self.pending = None;
        let nomap = failure == Failure::Pt(PtError::NOMAP);
        let (kind, name, message) = match failure {
            Failure::Pt(e) if e == PtError::NOMAP => {
                let ip = dec.image().take_miss().unwrap_or(self.last_ip);
                let pid = self.task.map_or(NO_PID, |t| t.pid);
                if let Source::Perf { trace, images, .. } = &self.plan().src {
                    if let Some(m) = trace.timeline.lookup(pid, ip, self.time) {
                        images.note_undecoded(&m.file, pid, m.start, m.end);
                    }
                }
                (GapKind::NoImage { ip }, e.name(), e.message().to_string())
            }
            Failure::Pt(e) => (
                GapKind::DecodeError(format!("{e} at offset {:#x}", self.seg.aux_offset + off)),
                e.name(),
                e.message().to_string(),
            ),
            Failure::NoProgress(n) => (
                GapKind::DecodeError(format!(
                    "no progress: {n} instructions decoded without a trace byte at offset {:#x} \
                     (code that loops through direct jumps and calls: a corrupt trace or image)",
                    self.seg.aux_offset + off
                )),
                "NoProgress".to_string(),
                "no progress".to_string(),
            ),
        };
        self.list(ListItem::Error {
            offset: off,
            what: "error",
            message,
        });
        let at = self.stamp();
        // Resynchronizing at the same offset twice would not progress:
        // then (and for the no-progress bound) skip to the next PSB.
        let again = self.last_error_offset == Some(off);
        self.last_error_offset = Some(off);
        let mut events = Vec::new();
        let next = match failure {
            Failure::Pt(_) if self.plan().resync && !again => {
                self.resync(dec, last_sync, &mut events)
            }
            _ => self.sync(dec, last_sync),
        };
        if next.is_none() && self.seg.before_loss && !nomap {
            return None;
        }
        *self.stats.errors.entry(name).or_default() += 1;
        // Code without an image stops decoding at each resync point again:
        // one gap for the whole stretch.
        let repeated = nomap
            && matches!(
                self.run.as_ref().and_then(|r| r
                    .ops
                    .iter()
                    .rev()
                    .find(|o| !matches!(o, Op::Enabled { .. } | Op::Disabled { .. }))),
                Some(Op::Gap {
                    kind: GapKind::NoImage { .. },
                    ..
                })
            );
        if !repeated {
            if nomap {
                self.stats.no_image += 1;
            }
            self.push(Op::Gap {
                at,
                kind,
                offset: self.seg.aux_offset + off,
            });
        }
        if next.is_some() {
            let to = dec.offset().unwrap_or(off);
            self.stats.skipped_bytes += to.saturating_sub(off);
        } else {
            self.stats.skipped_bytes += self.seg.len.saturating_sub(off);
        }
        for ev in &events {
            self.update_time(dec, ev.tsc());
            self.on_event(dec, ev);
        }
        next
    }

    /// Tells the progress callback that the decoder reached `offset`.
    fn report_progress(&mut self, offset: u64) {
        let offset = offset.min(self.seg.len);
        if offset > self.reported {
            self.progress.add(offset - self.reported);
            self.reported = offset;
        }
    }

    fn finish(&mut self) {
        self.report_progress(self.seg.len);
        self.pending = None;
        if let Some(r) = self.run.take() {
            self.runs.push(r);
        }
        if self.seg.before_loss {
            if let Some(r) = self.runs.last_mut() {
                let at = r.ops.last().map_or(
                    Stamp {
                        time: self.time,
                        ..Stamp::default()
                    },
                    Op::stamp,
                );
                let offset = self.seg.aux_offset + self.seg.len;
                r.ops.push(Op::Gap {
                    at,
                    kind: GapKind::LostData,
                    offset,
                });
                self.stats.lost_data += 1;
            }
        }
        self.runs.retain(|r| !r.ops.is_empty() || r.insns > 0);
    }
}

// ---------------------------------------------------------------------------
// The entry point.

/// Decodes every segment of `trace` and hands each thread's ops to `sink`,
/// thread by thread (see the module doc for the order and the counters).
pub fn decode(
    trace: &Trace,
    images: &ImageStore,
    opts: &DecodeOptions,
    sink: &mut dyn OpSink,
) -> Result<DecodeStats, DecodeError> {
    images.add_known_build_ids(trace.build_ids.iter().cloned());
    let plan = Plan::new(trace, images, opts);
    let mut stats = DecodeStats::default();
    let segments = trace.segments();
    let mut jobs: Vec<(usize, SegMeta)> = Vec::new();
    for (i, s) in segments.iter().enumerate() {
        if plan.wanted(s) {
            let meta = SegMeta::of(s, &trace.buffers[s.buffer], plan.per_cpu);
            jobs.push((i, meta));
        } else {
            stats.segments_skipped += 1;
        }
    }
    let metas: Vec<SegMeta> = jobs.iter().map(|j| j.1).collect();
    let bytes = |k: usize| trace.segment_bytes(&segments[jobs[k].0]).into_owned();
    decode_jobs(&plan, &metas, &bytes, sink, stats)
}

/// A file section of a raw decode's image: `size` bytes at `offset` of
/// `path`, loaded at `vaddr` (ptxed's `--raw` and `--elf` sections).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSection {
    pub path: std::path::PathBuf,
    pub offset: u64,
    pub size: u64,
    pub vaddr: u64,
}

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
    /// After a decode error skip to the next PSB, as ptxed does without
    /// `--resync-on-error`; default: resynchronize at the error.
    pub next_psb_on_error: bool,
}

/// The task a raw decode's ops belong to.
pub const RAW_TASK: TaskId = TaskId { pid: 1, tid: 1 };

/// Decodes raw Intel PT (as LLDB, simple-pt or kAFL write it: the bytes
/// of one trace buffer, no perf.data around them) as one thread,
/// [`RAW_TASK`], with an image made of `sections`. `Stamp::time` is in TSC
/// ticks, or ns when `cfg.tsc_hz` is given; `opts.start`/`end` compare with it.
pub fn decode_raw(
    pt: &[u8],
    sections: &[RawSection],
    cfg: &RawConfig,
    opts: &DecodeOptions,
    sink: &mut dyn OpSink,
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
    let plan = Plan::raw(sections, cfg, opts);
    let meta = SegMeta {
        aux_offset: 0,
        len: pt.len() as u64,
        after_loss: false,
        before_loss: false,
        owner: Some(Owner::Task(RAW_TASK)),
    };
    let bytes = |_: usize| pt.to_vec();
    decode_jobs(&plan, &[meta], &bytes, sink, DecodeStats::default())
}

/// The shared core: decodes the segments `jobs` (whose bytes `bytes(k)`
/// gives) in parallel, then hands each thread's ops to `sink`.
fn decode_jobs(
    plan: &Plan<'_>,
    jobs: &[SegMeta],
    bytes: &(dyn Fn(usize) -> Vec<u8> + Sync),
    sink: &mut dyn OpSink,
    mut stats: DecodeStats,
) -> Result<DecodeStats, DecodeError> {
    let opts = plan.opts;
    // Largest first, for balance.
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&k| std::cmp::Reverse(jobs[k].len));
    let n = match opts.jobs {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .clamp(1, jobs.len().max(1));
    let progress = Progress {
        done: AtomicU64::new(0),
        total: jobs.iter().map(|j| j.len).sum(),
        report: opts.progress.as_ref().map(|p| &*p.0),
    };
    let next = AtomicUsize::new(0);
    let results: Vec<Result<Vec<(usize, SegOut)>, DecodeError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                scope.spawn(|| -> Result<Vec<(usize, SegOut)>, DecodeError> {
                    let w = Worker::new(plan)?;
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&k) = order.get(i) else { break };
                        out.push((k, w.decode(jobs[k], bytes(k), &progress)?));
                    }
                    Ok(out)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|p| {
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    Err(DecodeError::Worker(msg))
                })
            })
            .collect()
    });
    let mut outs: Vec<Option<SegOut>> = (0..jobs.len()).map(|_| None).collect();
    for r in results {
        for (k, o) in r? {
            stats.merge_segment(&o.stats);
            outs[k] = Some(o);
        }
    }
    // Runs per thread, in segment (= buffer, stream) order.
    let mut by_task: BTreeMap<TaskId, Vec<Run>> = BTreeMap::new();
    for o in outs.into_iter().flatten() {
        for r in o.runs {
            by_task.entry(r.task).or_default().push(r);
        }
    }
    for (task, mut runs) in by_task {
        if !opts.wants(task) {
            continue;
        }
        if plan.per_cpu {
            runs.sort_by_key(|r| r.start);
        }
        emit_thread(task, runs, opts, plan.cyc, sink, &mut stats);
    }
    Ok(stats)
}

/// The ip an op happens at (for a synthesized `Enabled`).
fn op_ip(op: &Op) -> u64 {
    match op {
        Op::Enabled { ip, .. } | Op::Disabled { ip, .. } => *ip,
        Op::Call { from, .. } | Op::Return { from, .. } | Op::Jump { from, .. } => *from,
        Op::Gap { .. } | Op::End { .. } | Op::Mark { .. } => 0, // issue13 hook
    }
}

fn set_stamp(op: &mut Op, s: Stamp) {
    match op {
        Op::Enabled { at, .. }
        | Op::Disabled { at, .. }
        | Op::Call { at, .. }
        | Op::Return { at, .. }
        | Op::Jump { at, .. }
        | Op::Gap { at, .. }
        | Op::End { at }
        | Op::Mark { at, .. } => *at = s, // issue13 hook
    }
}

fn emit_thread(
    task: TaskId,
    runs: Vec<Run>,
    opts: &DecodeOptions,
    cyc: bool,
    sink: &mut dyn OpSink,
    stats: &mut DecodeStats,
) {
    let ts = stats.threads.entry((task.pid, task.tid)).or_default();
    let (mut insns, mut cycles) = (0u64, 0u64);
    let mut first = true;
    let mut last: Option<Stamp> = None;
    let mut skipped = false;
    let mut n_ops = 0u64;
    let mut span: Option<(u64, u64)> = None;
    let mut send = |op: Op, first: &mut bool, last: &mut Option<Stamp>| {
        let mut op = op;
        if let Op::Enabled { first: f, .. } = &mut op {
            *f = std::mem::take(first);
        }
        let s = op.stamp();
        span = Some(span.map_or((s.time, s.time), |(a, b)| (a.min(s.time), b.max(s.time))));
        *last = Some(s);
        n_ops += 1;
        sink.op(task.pid, task.tid, op);
    };
    'runs: for run in runs {
        ts.insns += run.insns;
        for mut op in run.ops {
            let s = op.stamp();
            let fixed = Stamp {
                time: s.time,
                insns: s.insns + insns,
                cycles: cyc.then(|| s.cycles.unwrap_or(0) + cycles),
            };
            set_stamp(&mut op, fixed);
            match &op {
                Op::Call { .. } => ts.calls += 1,
                Op::Return { .. } => ts.returns += 1,
                Op::Jump { .. } => ts.jumps += 1,
                Op::Gap { .. } => ts.gaps += 1,
                _ => {}
            }
            if opts.start.is_some_and(|st| fixed.time < st) {
                skipped = true;
                continue;
            }
            if opts.end.is_some_and(|e| fixed.time > e) {
                break 'runs;
            }
            // issue13 hook: a mark does not resume the call stack.
            if !matches!(op, Op::Mark { .. })
                && std::mem::take(&mut skipped)
                && !matches!(op, Op::Enabled { .. } | Op::Gap { .. })
            {
                let ip = op_ip(&op);
                send(
                    Op::Enabled {
                        at: fixed,
                        ip,
                        first: false,
                    },
                    &mut first,
                    &mut last,
                );
            }
            send(op, &mut first, &mut last);
        }
        insns += run.insns;
        cycles += run.cycles;
    }
    if let Some(at) = last {
        send(Op::End { at }, &mut first, &mut last);
    }
    ts.ops += n_ops;
    if let Some((a, b)) = span {
        ts.span = Some((a, b));
        stats.time_span = Some(
            stats
                .time_span
                .map_or((a, b), |(x, y)| (x.min(a), y.max(b))),
        );
    }
    stats.ops += n_ops;
}
