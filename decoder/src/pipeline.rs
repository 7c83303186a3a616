//! The whole `ptdec` run as library code: open the trace, decode its AUX
//! data (`decode`), rebuild each thread's call stack (`stack`) with
//! functions named from the images (`images`, `symbols`) and the sideband
//! timeline, and write FTF (`emit`). `main.rs` only parses arguments and
//! prints; `summary` renders the [`Report`].

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use sideband::timeline::{Mapping, TaskId, Timeline};

use crate::decode::{
    decode_raw, DecodeError, DecodeOptions, DecodeStats, DecoderKind, RawConfig, StopFlag,
};
use crate::emit::{EmitError, EmitStats, Emitter, Target, TimeAxis, Written};
use crate::images::{is_kernel_name, Image, ImageStore, MissingImage};
use crate::input::Trace;
use crate::interp::{Interpolate, RawLog};
use crate::min_duration::{MinDuration, MinDurationStats};
use crate::model::ops::{Ahead, Base, Mark, Op, OpSink, Rebase, Stamp};
use crate::model::slices::{Func, FuncRef, PlaceAndSpan, PlaceSpan, Resolver, Slice, SliceSink};
use crate::plan::{Ftf, Plan};
pub use crate::plan::{Input, StackOptions};
use crate::raw::RawInput;
use crate::stack::{Item, StackStats, ThreadStack};
use crate::stitch::Stretch;
use crate::symbols::{fallback_name, SymbolCache};
use crate::text::thousands;
use ftf::hash::FastMap;

/// Cached resolutions before the cache is dropped and refilled.
const RESOLVE_CACHE_MAX: usize = 1 << 20;

/// Ops between two calls of [`run`]'s `on_op`: a few per second at
/// the stacks' speed, so a progress bar moves without costing per op.
pub const OPS_PER_PROGRESS: u64 = 1 << 16;

/// Names functions from the images mapped in the sideband timeline:
/// mapping → image → ELF vaddr → symbol, else JIT maps (`perf-PID.map`);
/// code without a symbol is named `module+0xOFFSET` (or its address when no
/// mapping covers it).
pub struct TraceResolver<'a> {
    timeline: &'a Timeline,
    images: &'a ImageStore,
    symbols: &'a SymbolCache,
    cache: RefCell<FastMap<(u32, u64), Resolved>>,
    /// In front of `cache`: the last resolution per slot of a small
    /// direct-mapped table, found without hashing (the stacks ask for
    /// every call and jump, and the hash lookups were 6% of `ptdec
    /// report`'s instructions on an interpreter).
    near: NearTable<Near>,
}

/// Slots of a [`NearTable`] (a power of two).
const NEAR_SLOTS: usize = 2048;

/// A resolver's small direct-mapped table of its last answers, found
/// without hashing ([`TraceResolver::near`], [`RawResolver::near`]).
struct NearTable<T>(RefCell<Box<[Option<T>]>>);

impl<T> NearTable<T> {
    fn new() -> Self {
        NearTable(RefCell::new((0..NEAR_SLOTS).map(|_| None).collect()))
    }

    /// `f` of the entry in slot `k` (any number: it is masked) where
    /// `hit` takes it, else of `make`'s, which then takes the slot.
    #[inline]
    fn with<R>(
        &self,
        k: usize,
        hit: impl FnOnce(&T) -> bool,
        make: impl FnOnce() -> T,
        f: impl FnOnce(&T) -> R,
    ) -> R {
        let k = k & (NEAR_SLOTS - 1);
        if let Some(e) = &self.0.borrow()[k] {
            if hit(e) {
                return f(e);
            }
        }
        let e = make();
        let out = f(&e);
        self.0.borrow_mut()[k] = Some(e);
        out
    }
}

/// A [`TraceResolver::near`] slot: (pid, addr)'s resolution.
struct Near {
    pid: u32,
    addr: u64,
    r: Resolved,
}

#[derive(Clone)]
struct Resolved {
    /// Perf-time range the answer holds for (the mapping's lifetime).
    since: u64,
    until: u64,
    func: Option<FuncRef>,
    entry: bool,
    fallback: FuncRef,
    /// See [`Resolver::place_and_span`].
    span: Option<PlaceSpan>,
}

impl<'a> TraceResolver<'a> {
    pub fn new(timeline: &'a Timeline, images: &'a ImageStore, symbols: &'a SymbolCache) -> Self {
        Self {
            timeline,
            images,
            symbols,
            cache: RefCell::new(FastMap::default()),
            near: NearTable::new(),
        }
    }

    /// `f` of the resolution of `addr`, cached: borrowed, so that the
    /// stacks' several questions per branch cost no reference counting (the
    /// profile showed the `Arc` clones of a returned copy).
    #[inline]
    fn with_resolved<R>(&self, pid: u32, addr: u64, t: u64, f: impl FnOnce(&Resolved) -> R) -> R {
        let k = (addr ^ (addr >> 11) ^ u64::from(pid).wrapping_mul(0x9e37_79b9)) as usize;
        self.near.with(
            k,
            |n| n.addr == addr && n.pid == pid && n.r.since <= t && t < n.r.until,
            || Near {
                pid,
                addr,
                r: self.resolved(pid, addr, t),
            },
            |n| f(&n.r),
        )
    }

    /// (pid, addr)'s resolution at `t`, from `cache` or made (and kept).
    fn resolved(&self, pid: u32, addr: u64, t: u64) -> Resolved {
        if let Some(r) = self.cache.borrow().get(&(pid, addr)) {
            if r.since <= t && t < r.until {
                return r.clone();
            }
        }
        let r = self.resolve_uncached(pid, addr, t);
        let mut cache = self.cache.borrow_mut();
        if cache.len() >= RESOLVE_CACHE_MAX {
            cache.clear();
        }
        cache.insert((pid, addr), r.clone());
        r
    }

    /// A JIT map (`perf-PID.map`) symbol: absolute addresses.
    fn perf_map(&self, pid: u32, addr: u64, r: &mut Resolved) {
        if let Some(s) = self.symbols.lookup_perf_map(pid, addr) {
            r.entry = s.vaddr == addr;
            r.func = Some(FuncRef::interned(Func {
                entry: s.vaddr,
                name: s.name,
                module: format!("perf-{pid}.map").into(),
            }));
        }
    }

    fn resolve_uncached(&self, pid: u32, addr: u64, t: u64) -> Resolved {
        let Some(m) = self.timeline.lookup(pid, addr, t) else {
            // Unmapped only until code is mapped there (a library loaded
            // later, its MMAP late in the sideband).
            let (since, until) = self.timeline.unmapped_span(pid, addr, t);
            let mut r = Resolved {
                since,
                until,
                entry: false,
                fallback: FuncRef::owned(Func {
                    entry: addr,
                    name: format!("0x{addr:x}").into(),
                    module: "".into(),
                }),
                func: None,
                span: None,
            };
            self.perf_map(pid, addr, &mut r);
            return r;
        };
        let module: Arc<str> = m.file.filename.as_str().into();
        let offset = m.file_offset(addr);
        let kernel = is_kernel_name(&m.file.filename);
        // The kernel map's "offset" is the address itself: name it so.
        let name = if kernel {
            format!("[kernel] 0x{addr:x}")
        } else {
            fallback_name(&m.file.filename, offset)
        };
        let fallback = FuncRef::owned(Func {
            entry: addr,
            name: name.into(),
            module: module.clone(),
        });
        let mut r = Resolved {
            since: m.since,
            until: m.until,
            func: None,
            entry: false,
            fallback,
            span: None,
        };
        let image = self.images.get(&m.file);
        let vaddr = match &image {
            Some(_) if kernel => Some(addr),
            Some(img) => img.offset_to_vaddr(offset),
            None => None,
        };
        if let (Some(image), Some(vaddr)) = (image, vaddr) {
            if let Some((sym, vlo, vhi)) = self.symbols.lookup_span(&image, vaddr) {
                r.span = self.span(pid, addr, t, m, &image, (vaddr, sym.vaddr, vlo, vhi));
                r.entry = sym.vaddr == vaddr;
                r.func = Some(FuncRef::interned(Func {
                    entry: addr.wrapping_sub(vaddr - sym.vaddr),
                    name: sym.name,
                    module,
                }));
                return r;
            }
        }
        // JIT code sits in anonymous mappings (or files without symbols).
        self.perf_map(pid, addr, &mut r);
        r
    }
    /// The addresses around `addr` where `resolve_uncached` finds the same
    /// symbol by the same steps, for [`Resolver::place_and_span`]: the
    /// process's mapping `m` (no other over its lifetime in the span),
    /// one ELF segment (the first holding the offset, as
    /// `offset_to_vaddr` takes it) and one symbol table answer (`vaddr`'s
    /// span of the table `[vlo, vhi)`, its symbol at `sym_vaddr`:
    /// `SymbolCache::lookup_span`).
    /// `None` where the answer came or could come another way (the
    /// kernel's map).
    fn span(
        &self,
        pid: u32,
        addr: u64,
        t: u64,
        m: &Mapping,
        image: &Image,
        (vaddr, sym_vaddr, vlo, vhi): (u64, u64, u64, u64),
    ) -> Option<PlaceSpan> {
        let maps = self.timeline.process_maps(pid)?;
        if !maps.lookup(addr, t).is_some_and(|x| std::ptr::eq(x, m)) {
            return None;
        }
        let (mut lo, mut hi) = (m.start, m.end);
        if !is_kernel_name(&m.file.filename) {
            let offset = m.file_offset(addr);
            let k = image
                .segments
                .iter()
                .position(|s| offset >= s.file_offset && offset - s.file_offset < s.filesz)?;
            let seg = &image.segments[k];
            let (mut olo, mut ohi) = (seg.file_offset, seg.file_offset.checked_add(seg.filesz)?);
            // Offsets an earlier segment holds would be translated by it.
            for e in &image.segments[..k] {
                let end = e.file_offset.saturating_add(e.filesz);
                if end <= offset {
                    olo = olo.max(end);
                } else {
                    ohi = ohi.min(e.file_offset);
                }
            }
            lo = lo.max(addr.checked_sub(offset - olo)?);
            hi = hi.min(addr.saturating_add(ohi - offset));
        }
        lo = lo.max(addr.checked_sub(vaddr - vlo)?);
        hi = hi.min(addr.saturating_add(vhi - vaddr));
        // Any other mapping of the process that lives beside this one
        // bounds the span (or, over `addr` itself, leaves it out).
        for o in maps.history() {
            if std::ptr::eq(o, m) || o.until <= m.since || m.until <= o.since {
                continue;
            }
            if o.end <= lo || hi <= o.start {
                continue;
            }
            if o.contains(addr) {
                return None;
            }
            if o.end <= addr {
                lo = lo.max(o.end);
            } else {
                hi = hi.min(o.start);
            }
        }
        Some(PlaceSpan {
            lo,
            hi,
            since: m.since,
            until: m.until,
            func: addr.wrapping_sub(vaddr - sym_vaddr),
        })
    }
}

impl Resolver for TraceResolver<'_> {
    fn function_of(&self, pid: u32, addr: u64, time: u64) -> Option<FuncRef> {
        self.with_resolved(pid, addr, time, |r| r.func.clone())
    }

    fn is_function_entry(&self, pid: u32, addr: u64, time: u64) -> bool {
        self.with_resolved(pid, addr, time, |r| r.entry)
    }

    fn function_over(&self, pid: u32, addr: u64, time: u64) -> (Option<FuncRef>, u64, u64) {
        self.with_resolved(pid, addr, time, |r| (r.func.clone(), r.since, r.until))
    }

    fn place_of(&self, pid: u32, addr: u64, time: u64) -> (bool, Option<u64>) {
        self.with_resolved(pid, addr, time, |r| {
            (r.entry, r.func.as_ref().map(|f| f.entry))
        })
    }

    fn unknown(&self, pid: u32, addr: u64, time: u64) -> FuncRef {
        self.with_resolved(pid, addr, time, |r| r.fallback.clone())
    }

    fn place_and_span(&self, pid: u32, addr: u64, time: u64) -> PlaceAndSpan {
        self.with_resolved(pid, addr, time, |r| {
            ((r.entry, r.func.as_ref().map(|f| f.entry)), r.span)
        })
    }

    fn place_over(&self, pid: u32, addr: u64, time: u64) -> (PlaceAndSpan, u64, u64) {
        self.with_resolved(pid, addr, time, |r| {
            (
                ((r.entry, r.func.as_ref().map(|f| f.entry)), r.span),
                r.since,
                r.until,
            )
        })
    }

    /// An exec COMM of the thread after `after` and at most
    /// [`EXEC_SLACK`] after `upto`, and `ip` in a mapping made at or after
    /// it. Not before `after`: the new program's first syscalls (ld.so's
    /// `brk`) come microseconds after the exec.
    fn exec_between(&self, pid: u32, tid: u32, after: u64, upto: u64, ip: u64) -> bool {
        let Some(thread) = self.timeline.thread(tid, upto) else {
            return false;
        };
        let Some(exec) = thread
            .names()
            .iter()
            .rev()
            .filter(|c| c.exec && c.time > after && c.time <= upto.saturating_add(EXEC_SLACK))
            .map(|c| c.time)
            .next()
        else {
            return false;
        };
        self.timeline
            .lookup(pid, ip, upto.max(exec))
            .is_some_and(|m| m.since >= exec)
    }
}

/// How far (perf ns) an exec's COMM may come after the time of the packet
/// that resumed tracing in the new program: that time is the last timing
/// packet's, which may be older than the instant itself.
const EXEC_SLACK: u64 = 1_000_000;

/// One thread of the output.
#[derive(Debug, Clone, Default)]
pub struct ThreadReport {
    /// COMM at its first traced instant.
    pub name: String,
    pub stack: StackStats,
}

/// What a run did: everything the summary prints.
#[derive(Debug, Default)]
pub struct Report {
    pub decode: DecodeStats,
    /// Call-stack totals over all threads.
    pub stack: StackStats,
    pub threads: BTreeMap<(u32, u32), ThreadReport>,
    pub emit: EmitStats,
    pub written: Vec<Written>,
    pub missing: Vec<MissingImage>,
    pub warnings: Vec<String>,
    /// Perf time of tick 0.
    pub origin: u64,
    /// Times are TSC ticks, not ns (`ptdec raw` without a TSC frequency).
    pub tsc_ticks: bool,
    /// Wall time of the run, set by whoever timed it (`ptdec` around
    /// [`run`]); the summary gives the decode rate from it.
    pub wall_time: Option<std::time::Duration>,
    /// What `--min-duration` left out ([`StackOptions::min_duration`]).
    pub min_duration: Option<MinDurationStats>,
    /// The window files of an earlier `--split` into the same name that
    /// this run removed or left ([`crate::emit::stale`]).
    pub stale: crate::emit::stale::StaleWindows,
}

impl Report {
    /// The report of a run whose stacks are closed: the decode, the
    /// threads, and their stack totals; what the output adds is the
    /// caller's.
    pub fn of(decode: DecodeStats, threads: BTreeMap<(u32, u32), ThreadReport>) -> Report {
        let mut stack = StackStats::default();
        for t in threads.values() {
            stack.add(&t.stack);
        }
        Report {
            decode,
            stack,
            threads,
            ..Report::default()
        }
    }

    /// A warning when the decoded times lie far outside the times of the
    /// trace's sideband records: the TSC conversion (AUXTRACE_INFO's
    /// time_shift, time_mult, time_zero, or an LLDB bundle's) is then
    /// likely wrong, and with it the context switches and mappings the
    /// code was matched with (a corrupt conversion gave a span of 584
    /// years for a 34 µs recording, or no code at all, without a word).
    /// Far: by more than the sideband's own span and at least 10 s.
    pub fn note_times(&mut self, trace: &Trace) {
        let (Some((a, b)), Some((s0, s1))) = (self.decode.time_span, trace.sideband_span) else {
            return;
        };
        let slack = (s1 - s0).max(10_000_000_000);
        if a >= s0.saturating_sub(slack) && b <= s1.saturating_add(slack) {
            return;
        }
        self.warnings.push(format!(
            "the decoded times (perf time {a} .. {b}) lie far outside the times of the trace's \
             sideband records ({s0} .. {s1}): the TSC conversion the trace gives (AUXTRACE_INFO's \
             time_shift, time_mult and time_zero, or an LLDB bundle's) is likely corrupt, and with \
             it the slices' times and the context switches and mappings the code was matched \
             with; `ptdec info` shows the conversion"
        ));
    }

    /// What the images of a trace's run say: the ones missing, their
    /// warnings, and whether changed code may explain the decode errors.
    pub fn note_images(&mut self, images: &ImageStore) {
        self.missing = images.missing();
        self.warnings = images.warnings();
        self.warnings
            .extend(images.changed_code_hint(&self.decode.errors));
        self.warnings.extend(self.no_code_hint());
    }

    /// Trace decoded, not one instruction, every error a lack of code,
    /// and no image missing: the trace's addresses and times matched none
    /// of the files mapped, which code in memory no file maps (JIT code)
    /// explains, or a damaged record (an AUXTRACE record's tid or cpu,
    /// AUXTRACE_INFO's fields) or a sideband from another run; said, as
    /// the summary alone ("errors Nomap ...") did not.
    fn no_code_hint(&self) -> Option<String> {
        let d = &self.decode;
        let all_nomap = !d.errors.is_empty() && d.errors.keys().all(|k| k.contains("Nomap"));
        if d.bytes == 0 || d.insns > 0 || !all_nomap || !self.missing.is_empty() {
            return None;
        }
        let nomap: u64 = d.errors.values().sum();
        Some(format!(
            "no instruction was decoded: all {} times the trace needed code, no file was \
             mapped at that address in that thread at that time, though no image file is \
             missing; either the code ran in memory no file maps (JIT code, anonymous \
             memory), or the recording's threads, times or mappings do not describe this \
             trace (a damaged record, or sideband of another run): `ptdec info` shows the \
             threads, buffers and mappings it gives",
            thousands(nomap)
        ))
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Emit(#[from] EmitError),
    /// `--start`/`--duration` select a window in which nothing was traced.
    #[error("{}", empty_window_text(*window, *span, *origin))]
    EmptyWindow {
        /// The window, perf time (ns).
        window: (Option<u64>, Option<u64>),
        /// The trace's first and last sideband times.
        span: Option<(u64, u64)>,
        /// The perf time shown as 0.
        origin: Option<u64>,
    },
    /// The file was cut before any trace data: nothing decoded.
    #[error(
        "nothing decoded: the recording holds no trace data ({warning}); it was cut before its \
         first AUXTRACE record (`ptdec info` shows what the sideband holds). Nothing was written"
    )]
    CutBeforeTrace {
        /// The reader's warning about the cut.
        warning: String,
    },
    /// The records are damaged before any trace data could be read (an
    /// AUXTRACE record's size of 0, say, has the trace bytes after it read
    /// as records): nothing decoded.
    #[error(
        "nothing decoded: no trace data could be read, as the recording's records are damaged \
         before it ({warning}); `ptdec info` shows what the sideband holds; copy or record the \
         file again. Nothing was written"
    )]
    DamagedBeforeTrace {
        /// The reader's warning about the damage.
        warning: String,
    },
    /// The recording has AUXTRACE_INFO but no trace data at all.
    #[error(
        "nothing decoded: the recording has AUXTRACE_INFO but no trace data (no AUXTRACE \
         record): the traced program ran no traced code, or the file was cut before its first \
         trace data (a pipe-mode recording cut on a record boundary shows no other sign of it); \
         `ptdec info` shows what the sideband holds. Nothing was written"
    )]
    NoTraceData,
    /// The file was cut inside its first trace data, before anything a
    /// decoder could start at.
    #[error(
        "nothing decoded: the {} bytes of trace data before the cut hold no point a decoder \
         can start at (a PSB and its PSB+) ({warning}); copy or record the whole file again. \
         Nothing was written",
        thousands(*bytes)
    )]
    CutInFirstTrace {
        /// Trace bytes searched.
        bytes: u64,
        /// The reader's warning about the cut.
        warning: String,
    },
    /// No PSB of the trace could be synchronized at: nothing decoded.
    #[error(
        "nothing decoded: {} in the {} bytes of trace data, so a decoder has nowhere to start \
         (the data is not Intel PT, or is corrupt); check that the input is an Intel PT \
         recording (`ptdec info` describes a trace's buffers). Nothing was written",
        no_sync_reason(*bad_psbs),
        thousands(*bytes)
    )]
    NoSync {
        /// Trace bytes searched.
        bytes: u64,
        /// PSBs whose PSB+ could not be read.
        bad_psbs: u64,
    },
    /// libipt (`--decoder libipt`) could not start at any PSB: the
    /// packet after it is one only a newer libipt knows.
    #[error(
        "nothing decoded: libipt 2.1.2 stopped in the {} bytes of trace data at a {packet} \
         packet (libipt 2.2's), which it does not know; --decoder fast (the default) decodes \
         it. Nothing was written",
        thousands(*bytes)
    )]
    NewerPacket {
        /// Trace bytes searched.
        bytes: u64,
        /// The packet's name (`TRIG`).
        packet: &'static str,
    },
    /// `--tid`/`--pid` match no thread the trace knows.
    #[error(
        "no thread of the trace matches {filter}; its threads (pid/tid name): {}. Give \
         --tid or --pid one of them. Nothing was written",
        threads.join(", ")
    )]
    NoThreadMatched {
        /// The filter as given: `--tid 1,2 --pid 3`.
        filter: String,
        /// The trace's threads, as `pid/tid name`.
        threads: Vec<String>,
    },
    /// `--tid`/`--pid` match threads of the trace, but none of their code
    /// was decoded.
    #[error(
        "nothing decoded for {filter}: the threads it matches ({}) ran no traced code{}. \
         Nothing was written",
        matched.join(", "),
        if *window { " in the --start/--duration window" } else { "" }
    )]
    NothingDecodedFor {
        /// The filter as given.
        filter: String,
        /// The threads it matches, as `pid/tid name`.
        matched: Vec<String>,
        /// A time window was given.
        window: bool,
    },
    /// An LLDB bundle's processes (decoded by default, no `--pid` given)
    /// ran none of the code decoded.
    #[error(
        "nothing decoded for the processes the bundle lists: {} bytes of trace were decoded, \
         but none of it ran in their threads ({}){}. Nothing was written",
        thousands(*bytes),
        matched.join(", "),
        if *per_core {
            "; a per-core trace is given to threads by the cores' context switches, placed \
             by the bundle's tscPerfZeroConversion: if that conversion is off, the trace's \
             times fall outside the switches (`ptdec info` shows the conversion and the \
             time range); check it against the recording"
        } else {
            ""
        }
    )]
    NothingDecodedInBundle {
        /// Trace bytes decoded.
        bytes: u64,
        /// The bundle's threads, as `pid/tid name`.
        matched: Vec<String>,
        /// A per-core bundle (threads found by context switches).
        per_core: bool,
    },
    /// `--min-duration` left out every call the run decoded.
    #[error("{}", no_call_long_enough_text(*stats, *ticks))]
    NoCallLongEnough {
        /// What the filter left out, and the longest call.
        stats: MinDurationStats,
        /// Times are TSC ticks (`ptdec raw` without a TSC frequency).
        ticks: bool,
    },
    /// A run that needs a trace's sideband was planned over raw PT.
    #[error("{what} needs a trace dir, perf.data or LLDB bundle, not raw PT")]
    NeedsTrace {
        /// The run: `ptdec report`.
        what: &'static str,
    },
}

fn no_sync_reason(bad_psbs: u64) -> String {
    if bad_psbs == 0 {
        "no PSB was found".to_string()
    } else {
        format!(
            "no PSB whose PSB+ libipt can read ({} PSBs are unreadable) was found",
            thousands(bad_psbs)
        )
    }
}

/// The message of [`RunError::NoCallLongEnough`]: the longest call, and
/// a threshold that keeps it (exact: the duration shown is rounded).
fn no_call_long_enough_text(m: MinDurationStats, ticks: bool) -> String {
    let (longest, min, keep) = if ticks {
        (
            format!("{} TSC ticks", thousands(m.longest_call)),
            format!("{} ticks", thousands(m.min_ns)),
            format!("{}ns (times are TSC ticks here)", m.longest_call),
        )
    } else {
        (
            crate::text::duration(m.longest_call),
            crate::text::duration(m.min_ns),
            format!("{}ns", m.longest_call),
        )
    };
    format!(
        "--min-duration {min} leaves out every call: the longest of the {} calls decoded \
         lasted {longest}. Give a lower --min-duration ({keep} or less keeps that call). \
         Nothing was written",
        thousands(m.calls)
    )
}

/// `--min-duration` that left out every call there was is an error, as
/// a run that decoded nothing is, before anything is written: the output
/// would hold no call (it was written, exit 0, without a word).
pub(crate) fn check_min_duration_kept_a_call(
    short: Option<&MinDurationStats>,
    ticks: bool,
) -> Result<(), RunError> {
    match short {
        Some(&stats) if stats.left_out_every_call() => {
            Err(RunError::NoCallLongEnough { stats, ticks })
        }
        _ => Ok(()),
    }
}

/// Threads listed in an error at most.
const THREADS_LISTED: usize = 32;

/// `--tid 1,2 --pid 3`, or `None` without a thread filter.
fn filter_text(opts: &DecodeOptions) -> Option<String> {
    let list = |flag: &str, set: &Option<std::collections::BTreeSet<u32>>| {
        set.as_ref().map(|s| {
            let ids: Vec<String> = s.iter().map(u32::to_string).collect();
            format!("{flag} {}", ids.join(","))
        })
    };
    let parts: Vec<String> = [list("--tid", &opts.tids), list("--pid", &opts.pids)]
        .into_iter()
        .flatten()
        .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// Every task the trace knows of, `pid/tid name` (the names a thread had
/// over time, as `ptdec info` gives them), sorted by (pid, tid): the
/// sideband's threads, the tasks its context switches name, and the
/// threads of per-thread buffers and ITRACE_START records.
fn known_threads(trace: &Trace) -> BTreeMap<(u32, u32), String> {
    let tl = &trace.timeline;
    let mut tasks: BTreeMap<(u32, u32), String> = BTreeMap::new();
    let mut add = |pid: u32, tid: u32, name: Option<String>| {
        let e = tasks.entry((pid, tid)).or_default();
        if e.is_empty() {
            *e = name.unwrap_or_else(|| "(no name)".to_string());
        }
    };
    for th in tl.threads() {
        let names: Vec<&str> = th.names().iter().map(|c| &*c.name).collect();
        add(
            th.pid,
            th.tid,
            (!names.is_empty()).then(|| names.join(" → ")),
        );
    }
    for cpu in tl.cpus() {
        for t in tl.cpu_slots(cpu).iter().filter_map(|s| s.task) {
            add(t.pid, t.tid, None);
        }
    }
    for b in &trace.buffers {
        if let Some(tid) = b.tid {
            add(tl.pid_of(tid).unwrap_or(tid), tid, None);
        }
    }
    for i in &trace.itrace_starts {
        add(i.pid, i.tid, None);
    }
    tasks
}

/// `pid/tid name` of `threads`, at most [`THREADS_LISTED`] of them.
fn list_threads<'a>(
    threads: impl ExactSizeIterator<Item = (&'a (u32, u32), &'a String)>,
) -> Vec<String> {
    let n = threads.len();
    let mut out: Vec<String> = threads
        .take(THREADS_LISTED)
        .map(|((pid, tid), name)| format!("{pid}/{tid} {name}"))
        .collect();
    if n > THREADS_LISTED {
        out.push(format!(
            "and {} more (`ptdec info` lists them all)",
            n - THREADS_LISTED
        ));
    }
    out
}

/// A run that decoded nothing is an error, before anything is written:
/// no PSB could be synchronized at, or the thread filter kept nothing.
pub(crate) fn check_decoded(
    stats: &DecodeStats,
    opts: &DecodeOptions,
    trace: Option<&Trace>,
) -> Result<(), RunError> {
    // A recording cut before its first trace data (a full disk, a killed
    // copy): nothing to decode, and not "nothing was traced".
    if let Some(t) = trace.filter(|_| stats.bytes == 0 && stats.chunks == 0) {
        if let Some(w) = crate::input::cut_warning(&t.warnings, true) {
            return Err(RunError::CutBeforeTrace { warning: w.clone() });
        }
        // Damaged records, and not a byte of trace read (not one that a
        // --tid or --pid left out): the damage came before any.
        if let Some(w) = t.warnings.iter().find(|w| w.contains(" is damaged (")) {
            if t.buffers
                .iter()
                .all(|b| b.chunks.iter().all(|c| c.len == 0))
            {
                return Err(RunError::DamagedBeforeTrace { warning: w.clone() });
            }
        }
        // Not cut, as far as the file tells (a pipe-mode file cut on a
        // record boundary does not): an empty output is no answer either.
        if t.buffers.is_empty() && !t.sideband_only {
            return Err(RunError::NoTraceData);
        }
    }
    if stats.bytes > 0 && stats.unsynced_bytes >= stats.bytes {
        // Cut inside its first trace data: too little left to start at,
        // which is the cut, not "not Intel PT".
        let cut = trace.and_then(|t| crate::input::cut_warning(&t.warnings, false));
        if let Some(w) = cut {
            return Err(RunError::CutInFirstTrace {
                bytes: stats.bytes,
                warning: w.clone(),
            });
        }
        // libipt, asked for, stopped at a packet only a newer libipt
        // knows (the errors count it as `... (TRIG)`): say so, not "not
        // Intel PT". (Where it decoded chunks the fast decoder gave up,
        // the fast decoder is already what the message would suggest.)
        if let Some(packet) = stats
            .errors
            .keys()
            .find_map(|k| k.strip_suffix(" (TRIG)").map(|_| "TRIG"))
            .filter(|_| opts.decoder == DecoderKind::Libipt)
        {
            return Err(RunError::NewerPacket {
                bytes: stats.bytes,
                packet,
            });
        }
        return Err(RunError::NoSync {
            bytes: stats.bytes,
            bad_psbs: stats.bad_psbs,
        });
    }
    if let (Some(filter), Some(trace), 0) = (filter_text(opts), trace, stats.ops) {
        let known = known_threads(trace);
        let matched: BTreeMap<_, _> = known
            .into_iter()
            .filter(|&((pid, tid), _)| opts.wants(TaskId { pid, tid }))
            .collect();
        // A bundle's processes are decoded by default (`cli::run::selected`):
        // no --pid was given, so none is named.
        if let Some(b) = trace.bundle.as_ref().filter(|_| opts.pids_of_bundle) {
            return Err(RunError::NothingDecodedInBundle {
                bytes: stats.bytes,
                matched: list_threads(matched.iter()),
                per_core: !b.cores.is_empty(),
            });
        }
        return Err(RunError::NothingDecodedFor {
            filter,
            matched: list_threads(matched.iter()),
            window: opts.start.is_some() || opts.end.is_some(),
        });
    }
    Ok(())
}

/// A `--start`/`--duration` window in which nothing was decoded
/// (`empty`: the output holds nothing) is an error naming the trace's
/// time range, before anything is written; without a window, `Ok`.
pub(crate) fn check_window_held_something(
    trace: &Trace,
    opts: &DecodeOptions,
    empty: bool,
) -> Result<(), RunError> {
    if !empty || (opts.start.is_none() && opts.end.is_none()) {
        return Ok(());
    }
    Err(RunError::EmptyWindow {
        window: (opts.start, opts.end),
        span: trace.sideband_span,
        origin: crate::plan::origin(trace),
    })
}

/// The message of [`RunError::EmptyWindow`].
fn empty_window_text(
    (start, end): (Option<u64>, Option<u64>),
    span: Option<(u64, u64)>,
    origin: Option<u64>,
) -> String {
    // "1.5 ms to 2 ms (perf time @A to @B)": relative to the origin where
    // every bound is at or after it.
    let range = |a: Option<u64>, b: Option<u64>| {
        let fmt = |f: &dyn Fn(u64) -> String| match (a, b) {
            (Some(a), Some(b)) => format!("{} to {}", f(a), f(b)),
            (Some(a), None) => format!("{} on", f(a)),
            (None, Some(b)) => format!("up to {}", f(b)),
            (None, None) => "everything".into(),
        };
        let abs = fmt(&|t| format!("@{t}"));
        match origin {
            Some(o) if a.is_none_or(|a| a >= o) && b.is_none_or(|b| b >= o) => format!(
                "{} (perf time {abs})",
                fmt(&|t| crate::text::duration(t - o))
            ),
            _ => format!("perf time {abs}"),
        }
    };
    let window = range(start, end);
    let Some((first, last)) = span else {
        return format!(
            "nothing was traced in the window --start/--duration select, {window}: nothing \
             was written. Give a window the trace covers (`ptdec info` shows its time)"
        );
    };
    let trace = range(Some(first), Some(last));
    if start.is_some_and(|s| s > last) || end.is_some_and(|e| e < first) {
        format!(
            "the window --start/--duration select, {window}, lies outside the trace, which \
             runs from {trace}: nothing was written. Give a window within that range"
        )
    } else {
        format!(
            "nothing was traced in the window --start/--duration select, {window}, though the \
             trace runs from {trace}: nothing was written. Give a wider window or another \
             --start"
        )
    }
}

/// `--tid`/`--pid` that match no thread the trace knows are refused
/// before decoding.
pub(crate) fn check_filter(trace: &Trace, opts: &DecodeOptions) -> Result<(), RunError> {
    let Some(filter) = filter_text(opts) else {
        return Ok(());
    };
    let known = known_threads(trace);
    if known.is_empty()
        || known
            .keys()
            .any(|&(pid, tid)| opts.wants(TaskId { pid, tid }))
    {
        return Ok(());
    }
    Err(RunError::NoThreadMatched {
        filter,
        threads: list_threads(known.iter()),
    })
}

/// A [`SliceSink`] that sets a [`StopFlag`] when the one it forwards to
/// fails: the decode feeding it then ends at its next chunk.
struct StopOnError<'o, E> {
    out: &'o mut dyn SliceSink<Error = E>,
    stop: &'o StopFlag,
}

impl<E> StopOnError<'_, E> {
    fn check(&self, r: Result<(), E>) -> Result<(), E> {
        if r.is_err() {
            self.stop.stop();
        }
        r
    }
}

impl<E> SliceSink for StopOnError<'_, E> {
    type Error = E;

    fn any_interleaving(&self) -> bool {
        self.out.any_interleaving()
    }

    fn needs_parents(&self) -> bool {
        self.out.needs_parents()
    }

    fn thread(
        &mut self,
        pid: u32,
        tid: u32,
        name: &str,
        process: &str,
        renames: &[(u64, String)],
    ) -> Result<(), E> {
        let r = self.out.thread(pid, tid, name, process, renames);
        self.check(r)
    }

    fn slice(&mut self, s: &Slice) -> Result<(), E> {
        let r = self.out.slice(s);
        self.check(r)
    }

    fn set_origin(&mut self, origin: u64) {
        self.out.set_origin(origin)
    }

    fn mark(&mut self, pid: u32, tid: u32, at: &Stamp, mark: &Mark) -> Result<(), E> {
        let r = self.out.mark(pid, tid, at, mark);
        self.check(r)
    }
}

/// One call to the emitter, queued.
enum EmitCall {
    Thread {
        pid: u32,
        tid: u32,
        name: String,
        process: String,
        renames: Vec<(u64, String)>,
    },
    Slice(Slice),
    Origin(u64),
    Mark(u32, u32, Stamp, Mark),
}

/// Calls queued per batch sent to the emitter thread.
const EMIT_BATCH: usize = 4096;
/// Batches in flight at most (memory: a few MB of slices).
const EMIT_BATCHES: usize = 8;

/// The stacks' side of the emitter thread ([`with_emit_thread`]): calls
/// are batched and sent over a bounded channel; a write error is the
/// emitter thread's, returned when it is joined.
pub struct EmitQueue {
    batch: Vec<EmitCall>,
    tx: Option<crossbeam_channel::Sender<Vec<EmitCall>>>,
    /// Batches the emitter thread has written, handed back: they are
    /// emptied (their slices dropped) here and filled again. So each
    /// function's reference count is changed by this thread alone; the
    /// profile showed the atomic decrements of the emitter thread's drops
    /// and this thread's increments contending for the same cache lines.
    back: crossbeam_channel::Receiver<Vec<EmitCall>>,
}

impl EmitQueue {
    fn push(&mut self, c: EmitCall) {
        self.batch.push(c);
        if self.batch.len() >= EMIT_BATCH {
            self.send();
        }
    }

    fn send(&mut self) {
        let next = match self.back.try_recv() {
            Ok(mut v) => {
                v.clear();
                v
            }
            Err(_) => Vec::with_capacity(EMIT_BATCH),
        };
        let batch = std::mem::replace(&mut self.batch, next);
        if let Some(tx) = &self.tx {
            if tx.send(batch).is_err() {
                // The emitter thread stopped (it panicked): drop the rest.
                self.tx = None;
            }
        }
    }
}

impl SliceSink for EmitQueue {
    type Error = EmitError;

    fn thread(
        &mut self,
        pid: u32,
        tid: u32,
        name: &str,
        process: &str,
        renames: &[(u64, String)],
    ) -> Result<(), EmitError> {
        self.push(EmitCall::Thread {
            pid,
            tid,
            name: name.to_string(),
            process: process.to_string(),
            renames: renames.to_vec(),
        });
        Ok(())
    }

    fn slice(&mut self, s: &Slice) -> Result<(), EmitError> {
        self.push(EmitCall::Slice(s.clone()));
        Ok(())
    }

    fn set_origin(&mut self, origin: u64) {
        self.push(EmitCall::Origin(origin));
    }

    fn mark(&mut self, pid: u32, tid: u32, at: &Stamp, mark: &Mark) -> Result<(), EmitError> {
        self.push(EmitCall::Mark(pid, tid, *at, mark.clone()));
        Ok(())
    }
}

/// Runs `f` with an [`EmitQueue`] to `emitter`, which writes on its own
/// thread meanwhile (FTF encoding and writing overlap the decoding and the
/// stacks); returns the emitter (or its first write error) and `f`'s result.
/// A write error sets `stop`, so that the decode feeding `f` ends at its
/// next chunk instead of decoding the rest for nothing (`-o - | head`).
pub fn with_emit_thread<R>(
    emitter: Emitter,
    stop: &StopFlag,
    f: impl FnOnce(&mut EmitQueue) -> R,
) -> (Result<Emitter, EmitError>, R) {
    std::thread::scope(|scope| {
        let (tx, rx) = crossbeam_channel::bounded::<Vec<EmitCall>>(EMIT_BATCHES);
        let (back_tx, back) = crossbeam_channel::bounded::<Vec<EmitCall>>(EMIT_BATCHES + 1);
        let writer = scope.spawn(move || {
            let mut em = emitter;
            let mut error = None;
            for batch in rx {
                if error.is_some() {
                    continue;
                }
                for c in &batch {
                    let r = match c {
                        EmitCall::Thread {
                            pid,
                            tid,
                            name,
                            process,
                            renames,
                        } => em.thread(*pid, *tid, name, process, renames),
                        EmitCall::Slice(s) => em.slice(s),
                        EmitCall::Origin(o) => {
                            em.set_origin(*o);
                            Ok(())
                        }
                        EmitCall::Mark(pid, tid, at, mark) => em.mark(*pid, *tid, at, mark),
                    };
                    if let Err(e) = r {
                        error = Some(e);
                        stop.stop();
                        break;
                    }
                }
                // Back to the stacks' thread, which drops the slices.
                let _ = back_tx.try_send(batch);
            }
            match error {
                Some(e) => Err(e),
                None => Ok(em),
            }
        });
        let mut queue = EmitQueue {
            batch: Vec::with_capacity(EMIT_BATCH),
            tx: Some(tx),
            back,
        };
        let r = f(&mut queue);
        queue.send();
        drop(queue);
        let em = writer
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (em, r)
    })
}

/// Feeds the decoder's ops through per-thread stacks into a sink of slices
/// (the FTF emitter, or the report's aggregator).
pub struct StackSink<'a, 'e, E> {
    resolver: &'a dyn Resolver,
    timeline: &'a Timeline,
    out: &'e mut dyn SliceSink<Error = E>,
    /// Each thread's stack, found through `index`, and the last one asked
    /// for: a thread's ops come in runs, so most ops find their stack
    /// without hashing (the profile showed two hash lookups per op).
    stacks: Vec<ThreadStack>,
    index: FastMap<(u32, u32), usize>,
    last: Option<((u32, u32), usize)>,
    threads: BTreeMap<(u32, u32), ThreadReport>,
    /// Set the sink's origin from the first op (no TSC conversion).
    origin_from_first_op: bool,
    error: Option<E>,
    /// Ops handed to the stacks so far (a plain count: nothing per op but
    /// the increment).
    ops: u64,
    /// Called with `ops` each time it passes a multiple of
    /// [`OPS_PER_PROGRESS`] (counted per run of ops), for progress.
    on_op: Option<&'a dyn Fn(u64)>,
    /// (thread, process) names for every thread, instead of the timeline's.
    names: Option<(String, String)>,
    /// Stacks hand out slices strictly as they close
    /// ([`ThreadStack::close_order`]).
    close_order: bool,
    /// Where what the stitch learns goes (`crate::stitch::Hints`).
    hints: Option<&'a crate::stitch::Hints>,
    /// Groups the time spreading ended full, per thread
    /// ([`OpSink::group_cut`]).
    cut_groups: FastMap<(u32, u32), u64>,
}

impl<'a, 'e, E> StackSink<'a, 'e, E> {
    pub fn new(
        resolver: &'a dyn Resolver,
        timeline: &'a Timeline,
        out: &'e mut dyn SliceSink<Error = E>,
    ) -> Self {
        Self {
            resolver,
            timeline,
            out,
            stacks: Vec::new(),
            index: FastMap::default(),
            last: None,
            threads: BTreeMap::new(),
            origin_from_first_op: false,
            error: None,
            ops: 0,
            on_op: None,
            names: None,
            close_order: false,
            hints: None,
            cut_groups: FastMap::default(),
        }
    }

    /// Slices strictly in the order they close, children before parents
    /// (see [`ThreadStack::close_order`]): for consumers that sum children
    /// into their parents, not for Perfetto.
    pub fn set_close_order(&mut self, on: bool) {
        self.close_order = on;
    }

    /// Ends what is still open and returns the per-thread reports, or the
    /// first write error.
    pub fn finish(mut self) -> Result<BTreeMap<(u32, u32), ThreadReport>, E> {
        let mut keys: Vec<_> = self.index.iter().map(|(&k, &i)| (k, i)).collect();
        keys.sort_unstable();
        for &((pid, tid), i) in &keys {
            // Threads whose ops did not end with End (a decoder that stopped early).
            let last = self.stacks[i].last_stamp();
            self.op(pid, tid, Op::End { at: last });
        }
        if let Some(e) = self.error {
            return Err(e);
        }
        for ((pid, tid), i) in keys {
            let mut stats = self.stacks[i].stats().clone();
            stats.cut_groups += self.cut_groups.get(&(pid, tid)).copied().unwrap_or(0);
            self.threads.entry((pid, tid)).or_default().stack = stats;
        }
        Ok(self.threads)
    }

    fn register(&mut self, pid: u32, tid: u32, t: u64) -> Result<(), E> {
        if let Some((name, process)) = &self.names {
            self.threads.entry((pid, tid)).or_default().name = name.clone();
            return self.out.thread(pid, tid, name, process, &[]);
        }
        let tl = self.timeline;
        let name = tl.name(tid, t).map(str::to_owned).unwrap_or_else(|| {
            if tid == 0 {
                "swapper".into()
            } else {
                format!("tid {tid}")
            }
        });
        let process = tl.name(pid, t).map_or_else(|| name.clone(), str::to_owned);
        let mut renames = Vec::new();
        if let Some(th) = tl.thread(tid, t) {
            let mut prev = name.clone();
            for c in th.names().iter().filter(|c| c.time > t) {
                if *c.name != *prev {
                    renames.push((c.time, c.name.to_string()));
                    prev = c.name.to_string();
                }
            }
        }
        self.threads.entry((pid, tid)).or_default().name = name.clone();
        self.out.thread(pid, tid, &name, &process, &renames)
    }
}

impl<E> OpSink for StackSink<'_, '_, E> {
    fn op(&mut self, pid: u32, tid: u32, op: Op) {
        if self.error.is_some() {
            return;
        }
        if let Some(i) = self.stack_of(pid, tid, &op) {
            self.push(pid, tid, i, &op);
        }
    }

    fn run_ops(
        &mut self,
        pid: u32,
        tid: u32,
        ops: &mut Vec<Op>,
        skip: usize,
        rebase: Option<Rebase>,
    ) {
        self.push_run(pid, tid, &mut ops[skip..], rebase);
        ops.clear();
    }

    fn ops_in_place(&mut self, pid: u32, tid: u32, ops: &mut [Op]) {
        self.push_run(pid, tid, ops, None);
    }

    fn stretch(&mut self, pid: u32, tid: u32, st: Box<Ahead>, base: Base) -> bool {
        self.take_stretch(pid, tid, st, base)
    }

    /// Counted per thread, added to its stack's stats at the end (the
    /// thread may have no stack yet: the group goes on after this).
    fn group_cut(&mut self, pid: u32, tid: u32) {
        *self.cut_groups.entry((pid, tid)).or_default() += 1;
    }
}

/// Where a stack's slices and marks go: the sink, and the first error
/// it gave (after which nothing more goes to it).
struct To<'o, 'e, E> {
    out: &'o mut (dyn SliceSink<Error = E> + 'e),
    error: &'o mut Option<E>,
}

impl<'o, 'e, E> To<'o, 'e, E> {
    /// `op` to `stack` (thread pid, tid's), its slices to the sink: 1 when
    /// `op` went to the stack, 0 for a mark (which goes straight to the
    /// sink; the stack ignores it).
    #[inline(always)]
    fn push(
        &mut self,
        stack: &mut ThreadStack,
        resolver: &dyn Resolver,
        pid: u32,
        tid: u32,
        op: &Op,
    ) -> u64 {
        if let Op::Mark { at, mark } = op {
            if let Err(e) = self.out.mark(pid, tid, at, mark) {
                *self.error = Some(e);
            }
            return 0;
        }
        stack.push(op, resolver, &mut self.slices());
        1
    }

    /// A leaf call `call` and its return `ret` to `stack` at once
    /// ([`ThreadStack::push_leaf`]), its slice to the sink: `false`
    /// (nothing done) where that does not apply.
    #[inline(always)]
    fn leaf(
        &mut self,
        stack: &mut ThreadStack,
        resolver: &dyn Resolver,
        call: &Op,
        ret: &Op,
    ) -> bool {
        stack.push_leaf(call, ret, resolver, &mut self.slices())
    }

    /// Where a stack's slices go: to the sink until it gives an error,
    /// which is kept.
    #[inline(always)]
    fn slices(&mut self) -> impl FnMut(Slice) + use<'_, 'o, 'e, E> {
        let (out, error) = (&mut *self.out, &mut *self.error);
        move |s| {
            if error.is_none() {
                if let Err(e) = out.slice(&s) {
                    *error = Some(e);
                }
            }
        }
    }
}

impl<E> StackSink<'_, '_, E> {
    /// The index of thread (pid, tid)'s stack, made for `op` when it has
    /// none; `None` (and `self.error` set) when registering it failed.
    #[inline]
    fn stack_of(&mut self, pid: u32, tid: u32, op: &Op) -> Option<usize> {
        let i = match self.last {
            Some((key, i)) if key == (pid, tid) => i,
            _ => match self.index.get(&(pid, tid)) {
                Some(&i) => i,
                None => self.new_stack(pid, tid, op)?,
            },
        };
        self.last = Some(((pid, tid), i));
        Some(i)
    }

    /// A run of one thread's ops, each stamp moved by `rebase` first: its
    /// stack is found once (the lookup and a call per op were 4% of
    /// `ptdec report`'s instructions).
    fn push_run(&mut self, pid: u32, tid: u32, ops: &mut [Op], rebase: Option<Rebase>) {
        // A new stack takes the first op's time, which `rebase` keeps.
        let Some(first) = ops.first() else {
            return;
        };
        if self.error.is_some() {
            return;
        }
        let Some(i) = self.stack_of(pid, tid, first) else {
            return;
        };
        // Two loops, not a test per op; the ops counted once per run (a
        // count and a test per op were 80 M instructions of `ptdec
        // report`'s 8.0 G on the bench's interpreter trace).
        // The stack, sink and resolver taken apart once: through `self`,
        // each op indexed the stacks again (a bounds check) and reloaded
        // them.
        let mut n = 0;
        let StackSink {
            stacks,
            out,
            error,
            resolver,
            ..
        } = self;
        let stack = &mut stacks[i];
        let mut to = To {
            out: &mut **out,
            error,
        };
        // A call whose return is the next op (a leaf: nearly every call
        // of an interpreter) goes with it at once, without a frame
        // (`ThreadStack::push_leaf`).
        let leaf = |ops: &[Op], i: usize| {
            matches!(ops[i], Op::Call { .. }) && matches!(ops.get(i + 1), Some(Op::Return { .. }))
        };
        let mut i = 0;
        match rebase {
            None => {
                while i < ops.len() && to.error.is_none() {
                    if leaf(ops, i) && to.leaf(stack, *resolver, &ops[i], &ops[i + 1]) {
                        n += 2;
                        i += 2;
                        continue;
                    }
                    n += to.push(stack, *resolver, pid, tid, &ops[i]);
                    i += 1;
                }
            }
            Some(r) => {
                // Whether ops[i] is fixed already (looked at as a leaf's
                // return).
                let mut fixed = false;
                while i < ops.len() && to.error.is_none() {
                    if !std::mem::take(&mut fixed) {
                        r.apply(ops[i].stamp_mut());
                    }
                    if leaf(ops, i) {
                        r.apply(ops[i + 1].stamp_mut());
                        if to.leaf(stack, *resolver, &ops[i], &ops[i + 1]) {
                            n += 2;
                            i += 2;
                            continue;
                        }
                        fixed = true;
                    }
                    n += to.push(stack, *resolver, pid, tid, &ops[i]);
                    i += 1;
                }
            }
        }
        self.count_ops(n);
    }

    /// `op` to stack `i` (thread pid, tid's), its slices to the sink.
    #[inline(always)]
    fn push(&mut self, pid: u32, tid: u32, i: usize, op: &Op) {
        let n = self.push_uncounted(pid, tid, i, op);
        self.count_ops(n);
    }

    /// [`StackSink::push`] without counting: 1 when `op` went to the
    /// stack, 0 for a mark.
    #[inline(always)]
    fn push_uncounted(&mut self, pid: u32, tid: u32, i: usize, op: &Op) -> u64 {
        let mut to = To {
            out: &mut *self.out,
            error: &mut self.error,
        };
        to.push(&mut self.stacks[i], self.resolver, pid, tid, op)
    }

    /// Counts `n` ops handed to the stacks, telling `on_op` each time the
    /// count passes a multiple of [`OPS_PER_PROGRESS`].
    #[inline]
    fn count_ops(&mut self, n: u64) {
        let before = self.ops / OPS_PER_PROGRESS;
        self.ops += n;
        if self.ops / OPS_PER_PROGRESS != before {
            if let Some(f) = self.on_op {
                f(self.ops);
            }
        }
    }

    /// See [`OpSink::stretch`]: the thread's stack checks and applies the
    /// worker's ([`ThreadStack::apply`]).
    fn take_stretch(&mut self, pid: u32, tid: u32, st: Box<Ahead>, base: Base) -> bool {
        if self.error.is_some() {
            return true;
        }
        // What this stage's workers built (`stitch::Stacks`); anything else
        // goes op by op.
        let Ok(st) = st.built.downcast::<Stretch>() else {
            return false;
        };
        let i = match self.last {
            Some((key, i)) if key == (pid, tid) => i,
            _ => match self.index.get(&(pid, tid)) {
                Some(&i) => i,
                None => return false,
            },
        };
        self.last = Some(((pid, tid), i));
        let st = *st;
        let out = &mut *self.out;
        let error = &mut self.error;
        let applied = self.stacks[i].apply(st.stack, base, &mut |item| {
            if error.is_some() {
                return;
            }
            let r = match item {
                Item::Slice(s) => out.slice(&s),
                Item::Mark(at, m) => out.mark(pid, tid, &at, &m),
                _ => Ok(()),
            };
            if let Err(e) = r {
                *error = Some(e);
            }
        });
        if let (Err(d), Some(h)) = (&applied, self.hints) {
            h.learn(d);
        }
        if applied.is_ok() {
            self.count_ops(st.stack_ops);
        }
        applied.is_ok()
    }

    /// Registers a thread met for the first time (its names, the origin
    /// from its first op when the trace has no TSC conversion) and gives
    /// it a stack; `None` after a write error.
    fn new_stack(&mut self, pid: u32, tid: u32, op: &Op) -> Option<usize> {
        let t = op.stamp().time;
        if self.origin_from_first_op {
            self.out.set_origin(t);
            self.origin_from_first_op = false;
        }
        if let Err(e) = self.register(pid, tid, t) {
            self.error = Some(e);
            return None;
        }
        let stack = if self.out.needs_parents() {
            // Close order, each slice's parent exact (the dataset's ids).
            ThreadStack::new(pid, tid).placing_roots()
        } else if self.close_order {
            ThreadStack::close_order(pid, tid)
        } else {
            ThreadStack::new(pid, tid)
        };
        self.stacks.push(stack);
        self.index.insert((pid, tid), self.stacks.len() - 1);
        Some(self.stacks.len() - 1)
    }
}

/// Decodes a planned FTF run: a trace into FTF, or raw PT (`ptdec raw`:
/// one thread named after the trace file; times are TSC ticks, ns with
/// `cfg.tsc_hz`, 0 at the first op, and the emitter's range and split are
/// in that unit). `on_op`: progress, called with the number of ops handed
/// to the stacks so far, each time it passes a multiple of
/// [`OPS_PER_PROGRESS`] (never per op: a progress bar takes a lock and
/// reads the clock).
pub fn run(plan: &Plan<'_, Ftf>, on_op: Option<&dyn Fn(u64)>) -> Result<Report, RunError> {
    match plan.input {
        Input::Trace { trace, images, .. } => run_trace(plan, trace, images, on_op),
        Input::Raw { cfg, .. } => run_raw(plan, cfg, on_op),
    }
}

/// [`run`] of a trace dir, perf.data or LLDB bundle.
fn run_trace(
    plan: &Plan<'_, Ftf>,
    trace: &Trace,
    images: &ImageStore,
    on_op: Option<&dyn Fn(u64)>,
) -> Result<Report, RunError> {
    check_filter(trace, &plan.decode)?;
    let (emit, target) = (&plan.output.emit, &plan.output.target);
    // Before the output is created: it may not be one of them.
    crate::decode::open_images(trace, images, &plan.decode);
    let emitter = Emitter::new(target.clone(), emit.clone())?;
    let stacks = Stacks::for_ftf(plan, on_op);
    let (emitter, stacked) = with_emit_thread(emitter, &plan.decode.stop, |queue| {
        with_min_duration(queue, plan.stacks.min_duration, |out| {
            stacks.run(plan.input, out)
        })
    });
    let ((decode_stats, threads), short) = stacked;
    let mut emitter = emitter?;
    let (decode_stats, threads) = (decode_stats?, threads?);
    check_decoded(&decode_stats, &plan.decode, Some(trace))?;
    check_min_duration_kept_a_call(short.as_ref(), false)?;
    // Before any file is put in place: an empty window replaces nothing.
    emitter.flush()?;
    // What --min-duration left out was in the window all the same.
    let left_out = short.as_ref().map_or(0, |m| m.calls + m.untraced);
    check_window_held_something(trace, &plan.decode, emitter.is_empty() && left_out == 0)?;
    let mut report = finish_run(emitter, threads, decode_stats)?;
    report.min_duration = short;
    if let (Target::File(template), Some(_)) = (target, emit.split) {
        let written: Vec<u64> = report.written.iter().filter_map(|w| w.window).collect();
        report.stale = crate::emit::stale::remove_stale_windows(template, &written);
    }
    report.note_images(images);
    report.note_times(trace);
    Ok(report)
}

/// Runs `f` with `out`, behind a [`MinDuration`] filter when `min_ns` is
/// given; returns `f`'s result and what the filter left out.
pub(crate) fn with_min_duration<R, E>(
    out: &mut dyn SliceSink<Error = E>,
    min_ns: Option<u64>,
    f: impl FnOnce(&mut dyn SliceSink<Error = E>) -> R,
) -> (R, Option<MinDurationStats>) {
    match min_ns {
        None => (f(out), None),
        Some(min) => {
            let mut filter = MinDuration::new(out, min);
            let r = f(&mut filter);
            (r, Some(filter.stats()))
        }
    }
}

/// The decode and the call stacks of a trace dir, feeding any
/// [`SliceSink`]: the FTF emitter ([`run`]) or `report`'s aggregation.
pub struct Stacks<'a> {
    pub decode: &'a DecodeOptions,
    /// Spread times between timing packets ([`Interpolate`]).
    pub interpolate: bool,
    /// See [`run`]'s `on_op`.
    pub on_op: Option<&'a dyn Fn(u64)>,
    /// See [`StackSink::set_close_order`].
    pub close_order: bool,
    /// Sees every op as decoded, before [`Interpolate`] moves its time
    /// (`report` learns the timing packet's time of a call from it), when
    /// times are not spread; when they are, `raw_log` learns the same.
    pub tap: Option<OpTap<'a>>,
    /// Told the raw times as they are spread ([`RawLog`]).
    pub raw_log: Option<&'a mut dyn RawLog>,
}

/// See [`Stacks::tap`]: called with (pid, tid, ops), the ops in decode
/// order.
pub type OpTap<'a> = &'a mut dyn FnMut(u32, u32, &[Op]);

/// An [`OpSink`] that shows ops to a tap, then forwards them: for
/// `report --slowest` when times are not spread. When they are, the
/// spreading tells the same ([`Interpolate::with_log`]): behind a tap,
/// it held and copied every stretch the tap handed on (0.04 s of the
/// 0.72 s of CPU of `ptdec report --slowest 10` on the bench's 10 MB
/// interpreter trace; the tap's pass took 0.03 s more).
struct Tap<'t, S: OpSink> {
    tap: OpTap<'t>,
    inner: S,
}

impl<S: OpSink> OpSink for Tap<'_, S> {
    fn op(&mut self, pid: u32, tid: u32, op: Op) {
        (self.tap)(pid, tid, std::slice::from_ref(&op));
        self.inner.op(pid, tid, op);
    }

    /// The run goes on in stretches of ops that share a time, each shown
    /// to the tap just before it goes on, and a mark alone. The tap's
    /// user (`report::RawTimes`) learns the latest time and the calls
    /// from it: what it knows while a stretch's slices close is what it
    /// would know with the ops one by one (the stretch's ops add their
    /// one time, and calls after the slice that closes), and it forgets
    /// what it saw as the slices it opened close. Shown a whole run ahead,
    /// it held every call of the run and moved them for each slice (54 s
    /// instead of 2 s for `ptdec report --slowest 10` on the bench's 10 MB
    /// trace); one by one, the ops lost the later stages' batching (a
    /// third more time for `--slowest`). A time is shared by 27-93 ops on
    /// the bench's traces. The stretches go on where they lie in `ops`
    /// ([`OpSink::ops_in_place`]): copied out, the copies were 9% of
    /// `ptdec report --slowest 10`.
    fn run_ops(
        &mut self,
        pid: u32,
        tid: u32,
        ops: &mut Vec<Op>,
        skip: usize,
        rebase: Option<Rebase>,
    ) {
        let run = &mut ops[skip..];
        let fix = |op: &mut Op| crate::model::ops::fix(rebase, op);
        let time = |op: &Op| (!matches!(op, Op::Mark { .. })).then(|| op.stamp().time);
        let mut a = 0;
        while a < run.len() {
            fix(&mut run[a]);
            let t = time(&run[a]);
            let mut b = a + 1;
            if t.is_some() {
                while b < run.len() && time(&run[b]) == t {
                    fix(&mut run[b]);
                    b += 1;
                }
            }
            (self.tap)(pid, tid, &run[a..b]);
            self.inner.ops_in_place(pid, tid, &mut run[a..b]);
            a = b;
        }
        ops.clear();
    }
}

/// What [`Stacks::run`] returns: the decode's stats and the threads'
/// stacks (or the first error of each; `E` is the sink's).
pub type Stacked<E> = (
    Result<DecodeStats, DecodeError>,
    Result<BTreeMap<(u32, u32), ThreadReport>, E>,
);

impl<'a> Stacks<'a> {
    /// The decode and stacks of `plan`, reporting progress to `on_op`;
    /// `close_order`: slices in the order frames close (a report) rather
    /// than Perfetto's.
    pub fn planned<O>(
        plan: &'a Plan<'_, O>,
        on_op: Option<&'a dyn Fn(u64)>,
        close_order: bool,
    ) -> Self {
        Stacks {
            decode: &plan.decode,
            interpolate: plan.stacks.interpolate,
            on_op,
            close_order,
            tap: None,
            raw_log: None,
        }
    }

    /// The stacks of an FTF run: times spread only when the axis is time
    /// (other axes count instructions or cycles, which need no spreading),
    /// slices in Perfetto's order.
    fn for_ftf(plan: &'a Plan<'_, Ftf>, on_op: Option<&'a dyn Fn(u64)>) -> Self {
        let mut stacks = Stacks::planned(plan, on_op, false);
        stacks.interpolate &= plan.output.emit.axis == TimeAxis::Ns;
        stacks
    }
}

impl Stacks<'_> {
    /// Decodes `input` and hands every thread's slices, names and marks to
    /// `out`: the one place the decode, the time spreading and the call
    /// stacks are wired to a sink, for FTF ([`run`]) and
    /// `ptdec report` alike.
    pub fn run<E>(self, input: Input<'_>, out: &mut dyn SliceSink<Error = E>) -> Stacked<E> {
        match input {
            Input::Trace {
                trace,
                images,
                symbols,
            } => self.run_trace(trace, images, symbols, out),
            Input::Raw {
                input,
                cfg,
                symbols,
            } => self.run_raw(input, cfg, symbols, out),
        }
    }

    /// [`Stacks::run`] of a trace: the origin is the trace's ([`origin`]),
    /// or the first op's when it has no TSC conversion; call stacks may be
    /// built ahead on the decode workers.
    fn run_trace<E>(
        self,
        trace: &Trace,
        images: &ImageStore,
        symbols: &SymbolCache,
        out: &mut dyn SliceSink<Error = E>,
    ) -> Stacked<E> {
        let resolver = TraceResolver::new(&trace.timeline, images, symbols);
        let mut sink = StackSink::new(&resolver, &trace.timeline, out);
        sink.origin_from_first_op = crate::plan::origin(trace).is_none();
        sink.on_op = self.on_op;
        sink.close_order = self.close_order;
        // Call stacks built on the decode workers where the output is the
        // same (crate::stitch's module doc says where).
        let hints = crate::stitch::Hints::default();
        sink.hints = Some(&hints);
        let ahead = crate::stitch::Stacks {
            resolver: || {
                Box::new(TraceResolver::new(&trace.timeline, images, symbols)) as Box<dyn Resolver>
            },
            interpolate: self.interpolate,
            hints: &hints,
            close_order: self.close_order,
        };
        // With one worker, the stacks' own thread runs beside it as a
        // pipeline stage: moving the stacks onto the worker would leave
        // that thread idle (on one core it only adds the checks).
        let workers = self.decode.workers();
        let prepare = (self.tap.is_none()
            && self.raw_log.is_none()
            && workers >= 2
            && self.decode.start.is_none()
            && self.decode.end.is_none()
            && !self.decode.sequential_stacks)
            .then_some(&ahead as &dyn crate::model::ops::Prepare);
        // The decode workers tell jumps inside a function, and leave out
        // those the stacks would do nothing at (`decode::runs`).
        let spans = crate::model::slices::ResolverSpans {
            make: Box::new(|| {
                Box::new(TraceResolver::new(&trace.timeline, images, symbols)) as Box<dyn Resolver>
            }),
        };
        let opts = self.decode;
        let decode_stats = self.feed(&mut sink, prepare, |ops, prepare| {
            crate::decode::decode_with(trace, images, opts, ops, prepare, Some(&spans))
        });
        (decode_stats, sink.finish())
    }

    /// [`Stacks::run`] of raw PT: one thread named after the trace file,
    /// the origin at the first op, no sideband timeline (a replayed
    /// perf_event sideband switches images inside the decode).
    fn run_raw<E>(
        self,
        input: &RawInput,
        cfg: &RawConfig,
        symbols: &SymbolCache,
        out: &mut dyn SliceSink<Error = E>,
    ) -> Stacked<E> {
        let resolver = RawResolver::new(input, symbols);
        let timeline = Timeline::new();
        let file = input.pt_path.file_name().map_or_else(
            || input.pt_path.display().to_string(),
            |f| f.to_string_lossy().into_owned(),
        );
        let mut sink = StackSink::new(&resolver, &timeline, out);
        sink.origin_from_first_op = true;
        sink.on_op = self.on_op;
        sink.close_order = self.close_order;
        sink.names = Some((file, "raw PT".into()));
        // As for a trace: the workers leave out the jumps inside a
        // function that the stacks would do nothing at.
        let spans = crate::model::slices::ResolverSpans {
            make: Box::new(|| Box::new(RawResolver::new(input, symbols)) as Box<dyn Resolver>),
        };
        let opts = self.decode;
        let decode_stats = self.feed(&mut sink, None, |ops, _| {
            decode_raw(&input.pt, &input.sections, cfg, opts, ops, Some(&spans))
        });
        (decode_stats, sink.finish())
    }

    /// Runs `decode` into the stacks' `sink`, the same for every input:
    /// through the time spreading (which tells `raw_log` the raw times)
    /// when times are spread, else behind the `tap` when there is one;
    /// `prepare` goes to the decode unless a tap stands in front.
    fn feed<E>(
        self,
        sink: &mut StackSink<'_, '_, E>,
        prepare: Option<&dyn crate::model::ops::Prepare>,
        decode: impl FnOnce(
            &mut dyn OpSink,
            Option<&dyn crate::model::ops::Prepare>,
        ) -> Result<DecodeStats, DecodeError>,
    ) -> Result<DecodeStats, DecodeError> {
        if self.interpolate {
            let mut spread = match self.raw_log {
                Some(log) => Interpolate::with_log(sink, log),
                None => Interpolate::new(sink),
            };
            let stats = decode(&mut spread, prepare);
            spread.finish();
            return stats;
        }
        match self.tap {
            Some(tap) => decode(&mut Tap { tap, inner: sink }, None),
            None => decode(sink, prepare),
        }
    }
}

/// The tail [`run`]'s trace and raw runs share, once the stacks are closed
/// ([`StackSink::finish`]): flushes and finishes the FTF output, and builds
/// the [`Report`] ([`Report::of`]; no missing images, no warnings, times
/// in ns: the callers add theirs).
fn finish_run(
    mut emitter: Emitter,
    threads: BTreeMap<(u32, u32), ThreadReport>,
    decode: DecodeStats,
) -> Result<Report, RunError> {
    emitter.flush()?;
    let emit = emitter.stats().clone();
    let origin = emitter.origin();
    let written = emitter.finish()?;
    Ok(Report {
        emit,
        written,
        origin,
        ..Report::of(decode, threads)
    })
}

/// Names functions of a raw decode from its modules: `--elf` files by
/// their symbols, `--raw` bytes as `FILE+0xOFFSET`. The modules do not
/// change over the decode, so every answer holds at every time; each
/// address's is kept in a direct-mapped table, as [`TraceResolver`]
/// keeps its own, with the span around it ([`Resolver::place_and_span`]).
/// Without them every call and jump the stacks asked about looked its
/// symbol up, hashed the image's path and interned the function: 70% of
/// `ptdec raw`'s samples on the bench's real LLDB trace (`perf record`),
/// which decoded at 0.6 MiB/s.
pub struct RawResolver<'a> {
    input: &'a RawInput,
    symbols: &'a SymbolCache,
    near: NearTable<RawNear>,
}

/// A [`RawResolver::near`] slot: an address and its answer.
type RawNear = (u64, RawResolved);

/// What [`RawResolver`] answers for an address.
#[derive(Clone)]
struct RawResolved {
    func: Option<FuncRef>,
    entry: bool,
    span: Option<PlaceSpan>,
}

impl<'a> RawResolver<'a> {
    pub fn new(input: &'a RawInput, symbols: &'a SymbolCache) -> Self {
        Self {
            input,
            symbols,
            near: NearTable::new(),
        }
    }

    /// `f` of `addr`'s answer, from the table or made (and kept there).
    #[inline]
    fn with_resolved<R>(&self, addr: u64, f: impl FnOnce(&RawResolved) -> R) -> R {
        self.near.with(
            (addr ^ (addr >> 11)) as usize,
            |(a, _)| *a == addr,
            || (addr, self.resolve(addr)),
            |(_, r)| f(r),
        )
    }

    /// The function containing `addr`, whether `addr` is its entry, and
    /// the addresses around it with the same answer.
    fn resolve(&self, addr: u64) -> RawResolved {
        let mut r = RawResolved {
            func: None,
            entry: false,
            span: None,
        };
        let Some((i, m)) = self
            .input
            .modules
            .iter()
            .enumerate()
            .rev()
            .find(|(_, m)| m.start <= addr && addr < m.end)
        else {
            return r;
        };
        let Some(image) = m.image.as_ref() else {
            return r;
        };
        let link = addr.wrapping_sub(m.bias);
        let Some((sym, vlo, vhi)) = self.symbols.lookup_span(image, link) else {
            return r;
        };
        let entry = addr.wrapping_sub(link - sym.vaddr);
        r.entry = sym.vaddr == link;
        r.func = Some(FuncRef::interned(Func {
            entry,
            name: sym.name,
            module: m.name.as_str().into(),
        }));
        // The module's bounds and the symbol table's answer; a module
        // given later wins where they overlap, so it bounds the span.
        let (Some(below), Some(above)) = (link.checked_sub(vlo), vhi.checked_sub(link)) else {
            return r;
        };
        let mut lo = m.start.max(addr.saturating_sub(below));
        let mut hi = m.end.min(addr.saturating_add(above));
        for o in &self.input.modules[i + 1..] {
            if o.end <= lo || hi <= o.start {
                continue;
            }
            if o.end <= addr {
                lo = lo.max(o.end);
            } else {
                hi = hi.min(o.start);
            }
        }
        r.span = Some(PlaceSpan {
            lo,
            hi,
            since: 0,
            until: u64::MAX,
            func: entry,
        });
        r
    }
}

impl Resolver for RawResolver<'_> {
    fn function_of(&self, _pid: u32, addr: u64, _time: u64) -> Option<FuncRef> {
        self.with_resolved(addr, |r| r.func.clone())
    }

    fn is_function_entry(&self, _pid: u32, addr: u64, _time: u64) -> bool {
        self.with_resolved(addr, |r| r.entry)
    }

    fn place_of(&self, _pid: u32, addr: u64, _time: u64) -> (bool, Option<u64>) {
        self.with_resolved(addr, |r| (r.entry, r.func.as_ref().map(|f| f.entry)))
    }

    fn place_and_span(&self, _pid: u32, addr: u64, _time: u64) -> PlaceAndSpan {
        self.with_resolved(addr, |r| {
            ((r.entry, r.func.as_ref().map(|f| f.entry)), r.span)
        })
    }

    fn place_over(&self, pid: u32, addr: u64, time: u64) -> (PlaceAndSpan, u64, u64) {
        (self.place_and_span(pid, addr, time), 0, u64::MAX)
    }

    fn function_over(&self, _pid: u32, addr: u64, _time: u64) -> (Option<FuncRef>, u64, u64) {
        self.with_resolved(addr, |r| (r.func.clone(), 0, u64::MAX))
    }

    fn unknown(&self, _pid: u32, addr: u64, _time: u64) -> FuncRef {
        let (name, module) = match self.input.module(addr) {
            Some(m) => (
                fallback_name(&m.name, m.file_offset(addr)),
                m.name.as_str().into(),
            ),
            None => (format!("0x{addr:x}"), "".into()),
        };
        FuncRef::owned(Func {
            entry: addr,
            name: name.into(),
            module,
        })
    }
}

/// [`run`] of raw PT.
fn run_raw(
    plan: &Plan<'_, Ftf>,
    cfg: &RawConfig,
    on_op: Option<&dyn Fn(u64)>,
) -> Result<Report, RunError> {
    let mut emitter = Emitter::new(plan.output.target.clone(), plan.output.emit.clone())?;
    let stacks = Stacks::for_ftf(plan, on_op);
    let mut out = StopOnError {
        out: &mut emitter,
        stop: &plan.decode.stop,
    };
    let (stacked, short) = with_min_duration(&mut out, plan.stacks.min_duration, |out| {
        stacks.run(plan.input, out)
    });
    // The output's error first: a decode stopped for it
    // (`DecodeError::Stopped`) says only that it stopped.
    let threads = stacked.1?;
    let decode_stats = stacked.0?;
    check_decoded(&decode_stats, &plan.decode, None)?;
    check_min_duration_kept_a_call(short.as_ref(), cfg.tsc_hz.is_none())?;
    let mut report = finish_run(emitter, threads, decode_stats)?;
    report.min_duration = short;
    report.tsc_ticks = cfg.tsc_hz.is_none();
    if report.decode.insns > 0
        && report.decode.tsc_span.is_none()
        && report.emit.axis == TimeAxis::Ns
        && !report.emit.no_time
    {
        report.warnings.push(
            "the trace has no timing packets (TSC/MTC): every slice is at time 0; use --time-axis instructions"
                .to_string(),
        );
    }
    Ok(report)
}

#[cfg(test)]
mod tap_tests {
    use super::*;
    use crate::model::ops::Stamp;
    use std::cell::RefCell;

    /// What the inner sink saw: each op, with how many ops the tap had
    /// been shown by then.
    struct Inner<'a> {
        shown: &'a RefCell<Vec<Op>>,
        got: Vec<(Op, usize)>,
    }

    impl OpSink for Inner<'_> {
        fn op(&mut self, _pid: u32, _tid: u32, op: Op) {
            let n = self.shown.borrow().len();
            self.got.push((op, n));
        }
    }

    fn random_ops(rng: &mut fastrand::Rng, n: usize) -> Vec<Op> {
        let mut time = 0;
        (0..n as u64)
            .map(|i| {
                time += rng.u64(0..2) * rng.u64(1..50);
                let at = Stamp {
                    time,
                    insns: i,
                    cycles: crate::model::ops::Cycles::NONE,
                };
                crate::model::ops::test_op(rng.u64(0..9), at)
            })
            .collect()
    }

    /// A run goes on in stretches: when an op goes on, the tap has been
    /// shown every op up to the end of its stretch (the ops after it that
    /// share its time, none for a mark) and nothing after, so the tap's
    /// user knows then what it would with the ops one by one, but for
    /// ops of the same time (see `Tap::ops`).
    #[test]
    fn the_tap_sees_a_run_a_stretch_of_one_time_ahead() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..200 {
            let n = rng.usize(0..60);
            let ops = random_ops(&mut rng, n);
            let shown = RefCell::new(Vec::new());
            let mut see =
                |_pid: u32, _tid: u32, ops: &[Op]| shown.borrow_mut().extend_from_slice(ops);
            let mut tap = Tap {
                tap: &mut see,
                inner: Inner {
                    shown: &shown,
                    got: Vec::new(),
                },
            };
            // Two runs, as the ordering stage hands them on.
            let half = ops.len() / 2;
            tap.ops(1, 1, &mut ops[..half].to_vec());
            tap.ops(1, 1, &mut ops[half..].to_vec());
            let got = std::mem::take(&mut tap.inner.got);
            assert_eq!(got.iter().map(|g| g.0.clone()).collect::<Vec<_>>(), ops);
            assert_eq!(*shown.borrow(), ops);
            for (i, (op, n)) in got.iter().enumerate() {
                let run_end = if i < half { half } else { ops.len() };
                let mut end = i + 1;
                if !matches!(op, Op::Mark { .. }) {
                    while end < run_end
                        && !matches!(ops[end], Op::Mark { .. })
                        && ops[end].stamp().time == op.stamp().time
                    {
                        end += 1;
                    }
                }
                // The stretch began at or before `i`: its end is `end`.
                assert_eq!(*n, end, "op {i} of {ops:?}");
            }
        }
    }

    /// What the log was told, as `report::RawTimes` keeps it.
    #[derive(Default)]
    struct Told {
        latest: u64,
    }

    /// The log, told through a shared [`Told`].
    struct TellTold<'a>(&'a RefCell<Told>);

    impl RawLog for TellTold<'_> {
        fn latest(&mut self, _pid: u32, _tid: u32, time: u64) {
            let mut t = self.0.borrow_mut();
            t.latest = t.latest.max(time);
        }
    }

    /// Each op as it went on, with the latest time known then.
    struct Seen<'a> {
        told: &'a RefCell<Told>,
        got: Vec<(Op, u64)>,
    }

    impl OpSink for Seen<'_> {
        fn op(&mut self, _pid: u32, _tid: u32, op: Op) {
            self.got.push((op, self.told.borrow().latest));
        }
    }

    /// With times spread, the spreading tells `report --slowest` what a
    /// tap in front of it would show (`Interpolate::with_log`): when each
    /// op goes on (spread), the same latest time, whatever the runs and
    /// single ops the ops come in. And a call's raw time is its time as
    /// decoded, which the spreading leaves alone.
    #[test]
    fn the_log_tells_what_the_tap_showed() {
        let mut rng = fastrand::Rng::with_seed(11);
        for _ in 0..400 {
            let n = rng.usize(0..80);
            let ops = random_ops(&mut rng, n);
            let mut cuts: Vec<usize> = (0..rng.usize(0..4)).map(|_| rng.usize(0..=n)).collect();
            cuts.sort_unstable();
            cuts.push(n);
            let feed = |sink: &mut dyn OpSink, rng: &mut fastrand::Rng| {
                let mut from = 0;
                for &to in &cuts {
                    if to - from == 1 && rng.bool() {
                        sink.op(1, 1, ops[from].clone());
                    } else {
                        sink.ops(1, 1, &mut ops[from..to].to_vec());
                    }
                    from = to;
                }
            };
            let tapped = RefCell::new(Told::default());
            let mut see = |_pid: u32, _tid: u32, ops: &[Op]| {
                let mut t = tapped.borrow_mut();
                for op in ops {
                    if !matches!(op, Op::Mark { .. }) {
                        t.latest = t.latest.max(op.stamp().time);
                    }
                }
            };
            let mut tap = Tap {
                tap: &mut see,
                inner: Interpolate::new(Seen {
                    told: &tapped,
                    got: Vec::new(),
                }),
            };
            let mut r = rng.clone();
            feed(&mut tap, &mut r);
            let want = tap.inner.finish().got;
            let told = RefCell::new(Told::default());
            let mut log = TellTold(&told);
            let mut spread = Interpolate::with_log(
                Seen {
                    told: &told,
                    got: Vec::new(),
                },
                &mut log,
            );
            feed(&mut spread, &mut rng);
            let got = spread.finish().got;
            assert_eq!(got, want, "{ops:?} cut at {cuts:?}");
            let raw = |ops: &mut dyn Iterator<Item = &Op>| -> Vec<(u64, u64)> {
                ops.filter_map(|op| match op {
                    Op::Call { at, raw_time, .. } => Some((at.insns, *raw_time)),
                    _ => None,
                })
                .collect()
            };
            let decoded = raw(&mut ops.iter());
            assert_eq!(raw(&mut got.iter().map(|g| &g.0)), decoded);
        }
    }
}

#[cfg(test)]
mod report_tests {
    use super::*;

    /// The hint that no instruction was decoded comes where trace was
    /// decoded, every error was a lack of code and no image is missing;
    /// not with an instruction decoded, another error, an image missing,
    /// or no trace.
    #[test]
    fn no_code_anywhere_with_no_image_missing_is_said() {
        let report = |bytes: u64, insns: u64, errors: &[(&str, u64)], missing: bool| {
            let mut r = Report::default();
            r.decode.bytes = bytes;
            r.decode.insns = insns;
            r.decode.errors = errors.iter().map(|&(k, n)| (k.to_string(), n)).collect();
            if missing {
                r.missing.push(MissingImage {
                    name: "/lib/x.so".into(),
                    build_id: None,
                    reason: "not found".into(),
                    ranges: Vec::new(),
                });
            }
            r.no_code_hint()
        };
        let hint = report(4096, 0, &[("Nomap", 1234)], false).expect("said");
        assert!(hint.contains("no instruction was decoded"), "{hint}");
        assert!(hint.contains("all 1,234 times"), "{hint}");
        assert_eq!(report(4096, 1, &[("Nomap", 1234)], false), None);
        assert_eq!(report(4096, 0, &[("Nomap", 9), ("BadOpc", 1)], false), None);
        assert_eq!(report(4096, 0, &[("Nomap", 1234)], true), None);
        assert_eq!(report(0, 0, &[("Nomap", 1234)], false), None);
        assert_eq!(report(4096, 0, &[], false), None);
    }
}

#[cfg(test)]
mod resolver_tests {
    use super::*;
    use crate::images::SearchPath;
    use sideband::record::{misc, Event, Mmap, Record, SampleId};

    /// An address with nothing mapped is resolved again once code is
    /// mapped there: the miss is kept only until then.
    #[test]
    fn a_miss_holds_until_the_address_is_mapped() {
        let mut timeline = Timeline::new();
        timeline.apply(&Event {
            misc: misc::USER,
            record: Record::Mmap(Mmap {
                pid: 7,
                tid: 7,
                addr: 0x40_0000,
                len: 0x1000,
                pgoff: 0x2000,
                file_id: None,
                prot: Some(5), // PROT_READ | PROT_EXEC
                flags: None,
                filename: "/nonexistent/libloaded.so".into(),
            }),
            sample_id: SampleId {
                time: Some(10),
                ..Default::default()
            },
        });
        let images = ImageStore::new(SearchPath::default());
        let symbols = SymbolCache::new();
        let r = TraceResolver::new(&timeline, &images, &symbols);
        let name = |t| r.unknown(7, 0x40_0010, t).name.to_string();
        assert_eq!(name(5), "0x400010");
        assert_eq!(name(15), "libloaded.so+0x2010");
        assert_eq!(name(5), "0x400010");
    }

    /// Over the test binary's own code, mapped twice over time with a
    /// third mapping beside it: wherever a span is given, every address
    /// inside it is resolved (afresh) as its span says, and most jump
    /// targets inside a function get one.
    #[test]
    fn a_span_answers_as_place_of_throughout() {
        let exe = std::env::current_exe().expect("the test binary");
        let size = std::fs::metadata(&exe).expect("its size").len();
        let base = 0x5555_0000_0000u64;
        let mut timeline = Timeline::new();
        let mut map = |addr: u64, len: u64, pgoff: u64, filename: String, time: u64| {
            timeline.apply(&Event {
                misc: misc::USER,
                record: Record::Mmap(Mmap {
                    pid: 7,
                    tid: 7,
                    addr,
                    len,
                    pgoff,
                    file_id: None,
                    prot: Some(5),
                    flags: None,
                    filename,
                }),
                sample_id: SampleId {
                    time: Some(time),
                    ..Default::default()
                },
            });
        };
        let name = exe.to_string_lossy().into_owned();
        let len = size.next_multiple_of(0x1000);
        map(base, len, 0, name.clone(), 10);
        // Its last pages mapped again (another file) from time 100, and
        // the whole binary elsewhere from time 200.
        map(
            base + len - 0x3000,
            0x3000,
            0,
            "/nonexistent/x.so".into(),
            100,
        );
        map(base + len + 0x10_0000, len, 0, name, 200);
        let images = ImageStore::new(SearchPath::default());
        let symbols = SymbolCache::new();
        let r = TraceResolver::new(&timeline, &images, &symbols);
        let image = images
            .get(&timeline.lookup(7, base, 10).expect("mapped").file)
            .expect("the test binary as an image");
        let text = image
            .segments
            .iter()
            .find(|s| s.executable)
            .expect("an executable segment");
        let mut rng = fastrand::Rng::with_seed(47);
        let (mut spans, mut inside) = (0, 0);
        for _ in 0..2000 {
            let t = [20, 150, 250][rng.usize(..3)];
            let addr = base + text.file_offset + rng.u64(..text.filesz);
            let (place, span) = r.place_and_span(7, addr, t);
            assert_eq!(place, r.place_of(7, addr, t));
            if !place.0 && place.1.is_some() {
                inside += 1;
            }
            let Some(span) = span else {
                continue;
            };
            if !span.holds(addr, t) {
                continue;
            }
            spans += 1;
            assert!(span.since <= t && t < span.until);
            let fresh = TraceResolver::new(&timeline, &images, &symbols);
            let width = span.hi - span.lo;
            let probes = (1..width.min(64)).map(|i| span.lo + i * width / width.min(64));
            for a in probes.chain([span.lo + 1, span.hi - 1]) {
                if a <= span.lo || a >= span.hi {
                    continue;
                }
                for time in [span.since, t, span.until.saturating_sub(1)] {
                    assert_eq!(
                        fresh.place_of(7, a, time),
                        (false, Some(span.func)),
                        "{addr:#x} at {t}: {span:x?}, {a:#x} at {time}"
                    );
                }
            }
        }
        assert!(spans * 10 > inside * 9, "{spans} spans of {inside}");
    }

    /// [`RawResolver`] over the test binary's code given three times:
    /// whole, as `--elf`; its first pages again before it in the list (a
    /// module that loses where they overlap, of another name and load
    /// address); raw bytes over a stretch of its code after it (a module
    /// that wins). Every answer is what the module `RawInput::module`
    /// picks and its symbol table (`SymbolCache::lookup`) say, wherever a
    /// span is given every address inside it is resolved so, and most
    /// addresses inside a function get a span.
    #[test]
    fn a_raw_span_answers_as_place_of_throughout() {
        use crate::raw::Module;
        let exe = std::env::current_exe().expect("the test binary");
        let image = Arc::new(
            Image::load("test", &exe, Arc::new(SearchPath::default())).expect("the test binary"),
        );
        let text = image
            .segments
            .iter()
            .find(|s| s.executable)
            .copied()
            .expect("an executable segment");
        let bias = 0x5555_0000_0000u64;
        let (start, end) = (bias + text.vaddr, bias + text.vaddr + text.filesz);
        let module =
            |name: &str, (start, end): (u64, u64), image: Option<Arc<Image>>, bias| Module {
                start,
                end,
                name: name.into(),
                image,
                bias,
            };
        let third = text.filesz / 3;
        let input = RawInput {
            pt_path: "t.pt".into(),
            pt: Vec::new(),
            sections: Vec::new(),
            modules: vec![
                module(
                    "loses",
                    (start, start + 0x4000),
                    Some(image.clone()),
                    bias - 0x40,
                ),
                module("m", (start, end), Some(image.clone()), bias),
                module("wins", (start + third, start + third + 0x3000), None, 0),
            ],
        };
        let symbols = SymbolCache::new();
        // What the module `RawInput::module` picks and its symbols say:
        // (entry?, the function's entry, module).
        let oracle = |a: u64| {
            let m = input.module(a)?;
            let link = a.wrapping_sub(m.bias);
            let sym = symbols.lookup(m.image.as_ref()?, link)?;
            Some((sym.vaddr == link, a - (link - sym.vaddr), m.name.clone()))
        };
        let answer = |r: &RawResolver, a: u64| {
            let (entry, func) = r.place_of(1, a, 0);
            let f = r.function_of(1, a, 0);
            assert_eq!(func, f.as_ref().map(|f| f.entry), "{a:#x}");
            f.map(|f| (entry, f.entry, f.module.to_string()))
        };
        let r = RawResolver::new(&input, &symbols);
        let mut rng = fastrand::Rng::with_seed(47);
        let (mut spans, mut inside) = (0, 0);
        for _ in 0..2000 {
            let addr = start + rng.u64(..text.filesz);
            let (place, span) = r.place_and_span(1, addr, 0);
            assert_eq!(answer(&r, addr), oracle(addr), "{addr:#x}");
            assert_eq!(place, r.place_of(1, addr, 0), "{addr:#x}");
            if !place.0 && place.1.is_some() {
                inside += 1;
            }
            let Some(span) = span else {
                continue;
            };
            assert_eq!(place.1, Some(span.func));
            if !span.holds(addr, 0) {
                continue;
            }
            spans += 1;
            let width = span.hi - span.lo;
            let probes = (1..width.min(64)).map(|i| span.lo + i * width / width.min(64));
            for a in probes.chain([span.lo + 1, span.hi - 1]) {
                if a <= span.lo || a >= span.hi {
                    continue;
                }
                assert_eq!(
                    oracle(a).map(|(entry, func, _)| (entry, func)),
                    Some((false, span.func)),
                    "{addr:#x}: {span:x?}, {a:#x}"
                );
            }
        }
        assert!(inside > 500, "{inside} addresses inside a function");
        assert!(spans * 10 > inside * 9, "{spans} spans of {inside}");
    }
}
