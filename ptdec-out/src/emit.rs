//! FTF emission: the call-stack stage's [`Slice`]s become duration-complete
//! events on one track per thread, under its process, in one file or one file
//! per `--split` window. Last stage of the data flow; knows the layout a user
//! sees in Perfetto (DESIGN.md, "FTF output").
//!
//! # Layout
//!
//! * A kernel-object record per process (koid = pid) and per thread (koid =
//!   tid, `process` = pid), written before the thread's first event in each
//!   file. The thread is named by its COMM at its first traced instant; a
//!   later COMM (exec, prctl) is an instant `comm: NEW` on the thread at the
//!   time of the change, so the track keeps one name and the rename is
//!   visible where it happened.
//! * A call: category `call`, name = the function, args `insns` (u64,
//!   inclusive of callees), `cycles` (u64, when CYC packets were recorded),
//!   `addr` (pointer, the function's entry), `module` (string), and
//!   `unknown_start = true` when the call was not seen (the trace began
//!   inside it; it starts at the thread's first traced instant), and
//!   `unmatched = true` when a return that matched no open frame ended it
//!   (an unwind into code without symbols or unwind tables: its real end
//!   may be earlier).
//! * Untraced time: category `untraced`, a slice named `[kernel]` (syscall or
//!   interrupt with user-only tracing), `[filtered out]` (code outside the
//!   recording's address filters: tracing stopped at a user-space IP in a
//!   trace recorded with `--filter`) or `[untraced]` (switched out, tracing
//!   off) nested in the function it interrupted, with `ip` where tracing
//!   stopped.
//! * A gap: category `gap`, a top-level slice `[gap: overflow]`,
//!   `[gap: lost data]`, `[gap: decode error]` or `[gap: no image]` from
//!   the hole to where tracing resumed, with `reason`, `offset` (in the AUX
//!   buffer) and, for missing images, `ip`. A decode error is also an instant
//!   `[decode error]` at the gap, so a zero-length gap stays clickable.
//! * Slices cut at a window boundary (`--split`, `--start`, `--duration`)
//!   carry `cut` = `start`, `end` or `both`: the side that lies outside this
//!   file. Their `insns` and `cycles` are those of the whole call.
//! * Calls still running when the thread's trace ended (the program was
//!   killed, or exited from inside them: `exit`, `_exit`), or when a gap or
//!   a restart in an unrelated function ended their segment, carry `cut` =
//!   `end` (`both` with a window's start cut): they did not return, and
//!   their end is where tracing stopped. `ptdec report` counts them cut
//!   too. The emitter learns this from the thread's next slice: each
//!   thread's latest calls are held until it comes ([`Tail`]).
//! * Nesting deeper than Perfetto keeps ([`PERFETTO_MAX_DEPTH`] levels per
//!   track; deeper slices are dropped on import) is folded: levels up to
//!   [`FOLD_DEPTH`] below a segment's first frame are written as they are,
//!   and each slice at level [`FOLD_DEPTH`] stands for everything below it,
//!   with `folded` (the calls and untraced slices not written) and
//!   `folded_levels` (how many levels they went deeper) as args. Frames
//!   found above a segment's first frame (returns above the traced stack)
//!   more than [`RETROACTIVE_RESERVE`] levels up are not written: each would
//!   push all that came before one level deeper. The summary counts both;
//!   no call disappears without a trace.
//!
//! * Marks (`ops::Mark`, what the trace holds besides control flow) are
//!   instants on the thread's track: category `ptwrite`, name `ptwrite`,
//!   args `payload` (u64), `ip` (pointer, when known) and `emulated = true`
//!   for perf's emulated ptwrite; category `power`, names `mwait`, `pwre`,
//!   `pwrx`, `exstop` with perf's fields as args; category `event`, names
//!   `interrupt`, `iret`, `vmentry`, `vmexit`, `smi`, `rsm`, `sipi`, `init`,
//!   `shutdown`, `uintr`, `uiret` with `vector`, `cr2`, `reason`,
//!   `qualification` and `ip` as recorded. CBR is a counter in MHz (ratio ×
//!   100 MHz bus clock), `cpu N frequency` with arg `MHz` for a per-CPU
//!   trace (under the process that ran when it changed: Perfetto keeps FTF
//!   counters per process, as the track `cpu N frequency:MHz`) and `cpu
//!   frequency` when the buffer's CPU is not known; a value equal to the
//!   last one written on that counter in that file is not repeated.
//!
//! # Time axes
//!
//! `ns`: perf time minus the origin (the trace's first timestamp), 1e9 ticks
//! per second. `cycles` and `instructions`: the thread's counters as ticks,
//! still written as 1e9 ticks per second, so Perfetto's "ns" read as cycles or
//! instructions. Windows are always in perf time; on the counter axes a slice
//! crossing a window boundary is kept whole (the counters at the boundary are
//! not known) and marked `cut`.
//!
//! A trace without timing packets (TSC/MTC) gives every op the same time.
//! When its configuration does not say whether it has them
//! ([`EmitOptions::timed`]; raw PT), the `ns` axis holds the first slices
//! back until two of their stamps differ in time. A trace that never shows
//! time passing is, when the user did not choose an axis
//! ([`EmitOptions::axis_auto`]), written on the instruction axis
//! ([`EmitStats::no_time`]), instead
//! of a file whose slices all sit at one instant (Perfetto would nest them
//! all inside each other and drop all but 512 levels). With `ns` chosen
//! explicitly such a trace is an error naming `--time-axis instructions`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use flate2::write::GzEncoder;

mod blocks;
pub mod stale;
use blocks::{
    Block, BlockError, Cut, Encoders, Event, GapRec, Other, Piece, Rec, SharedSink, Val, What,
};

use crate::model::ops::{cbr_mhz, MarkFilter};
use crate::model::ops::{GapKind, Mark, Stamp};
use crate::model::slices::{cut_to_window, Slice, SliceKind, SliceSink};
use crate::outfile::OutFile;
use ftf::hash::FastMap;

/// Most `--split` files one run may write (all stay open until the end,
/// because a long call is written only when it ends).
pub const MAX_WINDOWS: u64 = 4096;

/// Nesting levels Perfetto's trace processor keeps per track:
/// `SliceTracker::kMaxDepth` in
/// `src/trace_processor/importers/common/slice_tracker.h` (512 since 2020,
/// still in v58). A slice at a deeper level is dropped on import and counted
/// in `stats` as `slice_max_depth_exceeded`.
pub const PERFETTO_MAX_DEPTH: i32 = 512;

/// Levels kept free above a segment's first frame for frames found later: a
/// return above the traced stack opens a frame around everything before it
/// (`stack`'s retroactive frames, depth -1, -2, ...), pushing what was
/// already written one level deeper in Perfetto.
pub const RETROACTIVE_RESERVE: i32 = 32;

/// The deepest level written, counted from a segment's first frame (0);
/// slices below it are folded into their ancestor at this level.
pub const FOLD_DEPTH: i32 = PERFETTO_MAX_DEPTH - 1 - RETROACTIVE_RESERVE;

/// Slices held back while the time axis is undecided (see the module doc):
/// a trace with timing packets gives a slice a duration long before this.
pub const AXIS_HOLD_MAX: usize = 100_000;

/// What the output timestamps count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeAxis {
    /// Nanoseconds of perf time from the origin.
    #[default]
    Ns,
    /// Core cycles (CYC packets).
    Cycles,
    /// Instructions executed by the thread.
    Instructions,
}

/// Why emission failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmitError {
    /// An output file could not be created or written.
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The FTF writer failed (its sink failed, or a value is out of range).
    #[error("writing {path}: {source}")]
    Ftf {
        path: PathBuf,
        #[source]
        source: ftf::Error,
    },
    /// `--time-axis cycles` on a trace without cycle counts.
    #[error("tid {tid}: no cycle counts (the trace has no CYC packets); use --time-axis ns or instructions")]
    NoCycles { tid: u32 },
    /// More `--split` windows than [`MAX_WINDOWS`].
    #[error(
        "--split would write more than {MAX_WINDOWS} files (window {index}); use a longer duration"
    )]
    TooManyWindows { index: u64 },
    /// `--split` ran out of open files: every window's file stays open.
    #[error(
        "--split: cannot open window {index}'s file: the limit on open files is reached \
         (every window's file stays open until the end); raise it (ulimit -n) or use a longer \
         duration"
    )]
    OpenFiles { index: u64 },
    /// An output file could not be started or put in place (it is an
    /// input, or the rename failed).
    #[error(transparent)]
    Output(#[from] crate::outfile::OutFileError),
    /// `--time-axis ns` on a trace without timing packets.
    #[error("the trace has no timing packets (TSC/MTC), or none that moves the time: on --time-axis ns every slice would sit at one instant; use --time-axis instructions (the default for such traces)")]
    NoTime,
}

/// Where the FTF goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A file; gzip-compressed when its name ends in `.gz`. With windows,
    /// `out.ftf` becomes `out-0.ftf`, `out-1.ftf`, ...
    File(PathBuf),
    /// Standard output (no windows).
    Stdout,
    /// Memory, for tests: [`Written::bytes`].
    Memory,
}

/// How slices become events.
#[derive(Debug, Clone, Default)]
pub struct EmitOptions {
    pub axis: TimeAxis,
    /// The user did not choose `axis` (`Ns`): switch to instructions when the
    /// trace has no time (see the module doc) instead of failing.
    pub axis_auto: bool,
    /// Whether the trace has timing packets, when its configuration says
    /// (perf.data's `tsc` bit); `None`: the slices tell (see the module doc).
    pub timed: Option<bool>,
    /// Keep a [`Placed`] per written slice in [`Written::slices`] (tests).
    pub record: bool,
    /// Perf time (ns) of tick 0 on the `ns` axis.
    pub origin: u64,
    /// Only slices overlapping `[start, end)` (perf time) are written, cut to it.
    pub range: Option<(u64, u64)>,
    /// One file per window of this many ns (counted from the range start or
    /// the origin).
    pub split: Option<u64>,
    /// Which marks are written (`--no-ptwrite`, `--no-power`, `--no-events`).
    pub marks: MarkFilter,
    /// The recording had address filters (AUXTRACE_INFO's filter string):
    /// tracing that stops in user space is code filtered out, written as
    /// `[filtered out]`.
    pub filtered: bool,
    /// Threads that encode the FTF (`blocks`); 0 or 1: the emitter's own
    /// thread does. The bytes are the same for any number.
    pub encoders: usize,
    /// Permission bits of the files created ([`crate::outfile::mode_of`]
    /// the trace); `None`: [`crate::outfile::PRIVATE_MODE`]. A file
    /// replaced keeps its own.
    pub file_mode: Option<u32>,
}

/// One file written.
#[derive(Debug)]
pub struct Written {
    /// The window index, with `--split`.
    pub window: Option<u64>,
    /// `None` for stdout and memory.
    pub path: Option<PathBuf>,
    /// The FTF bytes, for [`Target::Memory`]; empty otherwise.
    pub bytes: Vec<u8>,
    /// Events written (slices and instants; Perfetto shows each as a slice).
    pub events: u64,
    /// Counter values written (CBR frequency).
    pub counters: u64,
    /// Every slice written, with the stack's depth, when
    /// [`EmitOptions::record`] is set.
    pub slices: Vec<Placed>,
}

/// A slice as written, with the depth the call stack gave it (relative to
/// its segment's first frame); for tests that compare it with a reader's view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub pid: u32,
    pub tid: u32,
    pub category: &'static str,
    pub name: String,
    pub start: u64,
    pub end: u64,
    pub depth: i32,
    /// Slices folded into this one (see [`FOLD_DEPTH`]).
    pub folded: u64,
}

/// What the emitter wrote, for the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EmitStats {
    pub calls: u64,
    pub untraced: u64,
    pub gaps: u64,
    /// Slices outside `--start`/`--duration`.
    pub dropped: u64,
    /// Slice pieces cut at a window boundary.
    pub cut: u64,
    /// The axis the file was written on (differs from the one asked for
    /// when the trace has no time, see [`EmitOptions::axis_auto`]).
    pub axis: TimeAxis,
    /// The trace has no time: its configuration says it has no TSC, or no
    /// two stamps of its slices differ in time (no timing packets).
    pub no_time: bool,
    /// Calls deeper than [`FOLD_DEPTH`], not written but counted in the
    /// `folded` arg of their ancestor at that level.
    pub folded_calls: u64,
    /// Untraced slices folded likewise.
    pub folded_untraced: u64,
    /// Slices at [`FOLD_DEPTH`] that stand for folded ones.
    pub folds: u64,
    /// Frames found above a segment's first frame more than
    /// [`RETROACTIVE_RESERVE`] levels up, not written.
    pub outer_frames: u64,
    /// The deepest level a folded slice had.
    pub folded_max_depth: i32,
    /// PTWRITE instants written (emulated ones included).
    pub ptwrites: u64,
    /// Power instants (mwait, pwre, pwrx, exstop) written.
    pub power: u64,
    /// CBR counter values written.
    pub cbr: u64,
    /// Event-trace instants written.
    pub events: u64,
    /// Marks left out by `--no-ptwrite`, `--no-power`, `--no-events`.
    pub marks_dropped: u64,
    /// Call slices written with zero width (no time, instruction or cycle
    /// passed between call and return on the axis written).
    pub zero_width_calls: u64,
    /// Calls the trace's end, a gap or a restart ended while they ran,
    /// written with `cut` = `end` ([`Tail`]).
    pub ended_open: u64,
}

pub(super) enum Sink {
    Plain(OutFile),
    Gzip(GzEncoder<OutFile>),
    Memory(Vec<u8>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Plain(f) => f.write(buf),
            Sink::Gzip(g) => g.write(buf),
            Sink::Memory(v) => v.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Plain(f) => f.flush(),
            Sink::Gzip(g) => g.flush(),
            Sink::Memory(v) => v.flush(),
        }
    }
}

impl Sink {
    /// Completes the stream (the gzip trailer) and returns memory bytes.
    fn close(self) -> io::Result<Vec<u8>> {
        match self {
            // Renamed into place only when whole (crate::outfile).
            Sink::Plain(f) => f.commit().map_err(io::Error::from).map(|()| Vec::new()),
            Sink::Gzip(g) => g
                .finish()
                .and_then(|f| f.commit().map_err(io::Error::from))
                .map(|()| Vec::new()),
            Sink::Memory(v) => Ok(v),
        }
    }
}

struct Window {
    /// Where the blocks' bytes go, after the header (the encoder threads
    /// write them).
    sink: SharedSink,
    /// The records not yet sent to be encoded.
    block: Block,
    path: Option<PathBuf>,
    /// Threads whose kernel objects this file already has, and the last
    /// thread written (a thread's slices come in runs: no hashing for them).
    threads: FastMap<(u32, u32), ()>,
    last_thread: Option<(u32, u32)>,
    processes: FastMap<u32, ()>,
    events: u64,
    counters: u64,
    slices: Vec<Placed>,
}

/// A thread as the output names it.
#[derive(Debug, Clone)]
struct ThreadInfo {
    name: String,
    process: String,
}

/// Per thread: slices folded below [`FOLD_DEPTH`] waiting for their
/// ancestor at that level, and that ancestor held back until its own
/// tied children (which follow it) have come.
#[derive(Default)]
struct Fold {
    calls: u64,
    untraced: u64,
    max_depth: i32,
    held: Option<(Slice, u64, i32, bool)>,
}

/// Per thread: the calls that ended at one stamp `at`, the latest of the
/// thread's slices so far, held (with the slices the stacks hold back
/// behind them) until the thread's next slice shows what ended them. The
/// stacks end every open frame at one stamp when the trace ends, at a gap
/// and at a restart; nothing comes after the trace's end, a gap slice
/// starts where its gap did, a restart's untraced slice at depth 0 where
/// the old frames ended. A later slice of any other kind means they
/// returned or were unwound. The rule is `report`'s (`aggregate`'s
/// `mark_cut`), so the file and the report call the same calls cut; like
/// it, a call that returned at the thread's very last stamp reads as cut.
#[derive(Default)]
struct Tail {
    at: Stamp,
    /// The lowest depth among the calls that ended at `at`.
    min_depth: i32,
    /// The first call held; most often the only slice held (a call that
    /// returned, whose next sibling or parent lets it go).
    first: Option<Slice>,
    /// The slices after it, in the order they came, each with whether it
    /// is a call that ended at `at` (false: a slice held back behind one,
    /// which ended earlier).
    more: Vec<(Slice, bool)>,
}

/// What waits while the time axis is undecided.
enum Pending {
    Thread {
        pid: u32,
        tid: u32,
        name: String,
        process: String,
        renames: Vec<(u64, String)>,
    },
    Slice(Slice),
    Mark(u32, u32, Stamp, Mark),
}

/// Writes slices as FTF. See the module doc for the layout.
pub struct Emitter {
    target: Target,
    opts: EmitOptions,
    windows: Windows,
    threads: FastMap<(u32, u32), ThreadInfo>,
    stats: EmitStats,
    folds: FastMap<(u32, u32), Fold>,
    /// How many of `folds` hold a slice: while none does, a slice that is
    /// not too deep has nothing to release (no lookup per slice).
    held_folds: usize,
    /// `Some` while the `ns` axis waits for time to pass.
    pending: Option<Vec<Pending>>,
    /// The time of the first slice held.
    pending_time: Option<u64>,
    /// The last value written on each counter, by (window, name).
    counters: FastMap<(u64, String), u64>,
    /// `None`: blocks are encoded on this thread.
    encoders: Option<Encoders>,
    /// Blocks encoded and written, emptied, to be filled again, and
    /// their byte buffers, kept apart so a window's block holds none (a
    /// few: see `blocks::SPARE_PER_ENCODER`).
    spare: Vec<Block>,
    buffers: Vec<Vec<u8>>,
    /// The window of the last record.
    last_window: Option<u64>,
    /// Records in the windows' blocks, all told (see [`MAX_HELD_RECS`]).
    held: usize,
    /// Per thread (an index in `tails`), and the last thread's: a
    /// thread's slices come in runs.
    tails: Vec<Tail>,
    tail_index: FastMap<(u32, u32), usize>,
    last_tail: Option<((u32, u32), usize)>,
}

/// Records the windows' blocks may hold in all before every one is sent
/// to be encoded, full or not: with `--split`, thousands of windows each
/// holding a block almost full would take gigabytes. (Decided by the
/// records alone, so the bytes stay the same for any `-j`.)
const MAX_HELD_RECS: usize = 4 * blocks::BLOCK_RECS;

/// `out.ftf` → `out-3.ftf`, `out.ftf.gz` → `out-3.ftf.gz`, `out` → `out-3`.
pub fn window_path(path: &Path, index: u64) -> PathBuf {
    let (stem, ext) = window_parts(path);
    path.with_file_name(format!("{stem}-{index}{ext}"))
}

/// The file name of `path` cut where [`window_path`] puts `-N`: (`out`,
/// `.ftf.gz`) for `out.ftf.gz`.
fn window_parts(path: &Path) -> (String, String) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let at = match name.strip_suffix(".gz") {
        Some(inner) => match inner.rfind('.') {
            Some(i) if i > 0 => i,
            _ => inner.len(),
        },
        None => match name.rfind('.') {
            Some(i) if i > 0 => i,
            _ => name.len(),
        },
    };
    let (stem, ext) = name.split_at(at);
    (stem.to_string(), ext.to_string())
}

/// The FTF header every file ptdec writes starts with.
pub(crate) fn write_ftf_header(sink: &mut impl Write) -> ftf::Result<()> {
    ftf::write_header(sink, 1_000_000_000, 1, "ptdec")
}

fn gap_reason(kind: &GapKind) -> String {
    match kind {
        GapKind::Overflow => "trace buffer overflow (OVF): the hardware lost packets".into(),
        GapKind::LostData => "AUX data lost or truncated".into(),
        GapKind::DecodeError(e) => e.to_string(),
        GapKind::NoImage { ip } => format!("no image for the code at {ip:#x}"),
    }
}

impl Emitter {
    /// An emitter writing to `target`. Files are created when their first
    /// event comes (without `--split`, at once).
    pub fn new(target: Target, opts: EmitOptions) -> Result<Self, EmitError> {
        let pending = (opts.axis == TimeAxis::Ns && opts.timed.is_none()).then(Vec::new);
        let mut stats = EmitStats {
            axis: opts.axis,
            ..EmitStats::default()
        };
        let mut opts = opts;
        if opts.axis == TimeAxis::Ns && opts.timed == Some(false) {
            if !opts.axis_auto {
                return Err(EmitError::NoTime);
            }
            opts.axis = TimeAxis::Instructions;
            stats.axis = TimeAxis::Instructions;
            stats.no_time = true;
        }
        let mut e = Emitter {
            target,
            opts,
            windows: Windows::default(),
            threads: FastMap::default(),
            stats,
            folds: FastMap::default(),
            held_folds: 0,
            pending,
            pending_time: None,
            counters: FastMap::default(),
            encoders: None,
            spare: Vec::new(),
            buffers: Vec::new(),
            last_window: None,
            held: 0,
            tails: Vec::new(),
            tail_index: FastMap::default(),
            last_tail: None,
        };
        if e.opts.encoders > 1 {
            let enc = Encoders::new(e.opts.encoders).map_err(|source| EmitError::Io {
                path: "<FTF encoder threads>".into(),
                source,
            })?;
            e.encoders = Some(enc);
        }
        if e.opts.split.is_none() {
            e.window(0)?;
        }
        Ok(e)
    }

    /// Sets the perf time of tick 0 (before the first event).
    pub fn set_origin(&mut self, origin: u64) {
        self.opts.origin = origin;
    }

    /// The perf time of tick 0.
    pub fn origin(&self) -> u64 {
        self.opts.origin
    }

    pub fn stats(&self) -> &EmitStats {
        &self.stats
    }

    /// Whether no file has an event or counter value yet (its header
    /// aside): after [`Emitter::flush`], whether the output would be empty.
    pub fn is_empty(&self) -> bool {
        self.windows
            .list
            .iter()
            .all(|(_, w)| w.events == 0 && w.counters == 0)
    }

    /// Names a thread before its first slice: `name` its COMM at its first
    /// traced instant, `process` the name of its process, `renames` the
    /// names it took later, with their perf times.
    pub fn thread(
        &mut self,
        pid: u32,
        tid: u32,
        name: &str,
        process: &str,
        renames: &[(u64, String)],
    ) -> Result<(), EmitError> {
        if let Some(p) = &mut self.pending {
            p.push(Pending::Thread {
                pid,
                tid,
                name: name.to_owned(),
                process: process.to_owned(),
                renames: renames.to_vec(),
            });
            return Ok(());
        }
        let info = ThreadInfo {
            name: name.to_owned(),
            process: process.to_owned(),
        };
        self.threads.insert((pid, tid), info);
        for (t, new) in renames {
            if !self.in_range(*t, *t) {
                continue;
            }
            let index = self.window_of(*t);
            let ts = self.ticks_at(*t);
            let args = vec![("name", Val::Str(new.as_str().into()))];
            let name = format!("comm: {new}");
            self.event(index, Event::new((pid, tid), "comm", &name, ts, args))?;
        }
        Ok(())
    }

    fn in_range(&self, start: u64, end: u64) -> bool {
        cut_to_window(self.opts.range, start, end).is_some()
    }

    /// The window start used for `--split` numbering.
    fn split_base(&self) -> u64 {
        self.opts.range.map_or(self.opts.origin, |r| r.0)
    }

    fn window_of(&self, t: u64) -> u64 {
        match self.opts.split {
            None => 0,
            Some(d) => t.saturating_sub(self.split_base()) / d.max(1),
        }
    }

    fn ticks_at(&self, t: u64) -> u64 {
        t.saturating_sub(self.opts.origin)
    }

    fn ticks(&self, tid: u32, s: &Stamp) -> Result<u64, EmitError> {
        Ok(match self.opts.axis {
            TimeAxis::Ns => self.ticks_at(s.time),
            TimeAxis::Instructions => s.insns,
            TimeAxis::Cycles => s.cycles.get().ok_or(EmitError::NoCycles { tid })?,
        })
    }

    fn window(&mut self, index: u64) -> Result<&mut Window, EmitError> {
        window_in(&mut self.windows, &self.target, &self.opts, index)
    }

    /// Adds the record `rec` makes to window `index`, after naming the
    /// thread there; sends the window's block to be encoded when full.
    fn with_window(
        &mut self,
        index: u64,
        pid: u32,
        tid: u32,
        rec: impl FnOnce(&mut Block) -> Rec,
    ) -> Result<(), EmitError> {
        // The thread's names are looked up only the first time the window
        // meets the thread: the profile showed their copies' allocations
        // per slice.
        if self.last_window != Some(index) {
            // The window left may hold a block taken over from a full one,
            // with few records in it, for long.
            if let Some(left) = self.last_window.and_then(|i| self.windows.get_mut(i)) {
                left.block.trim();
            }
            self.last_window = Some(index);
        }
        let w = window_in(&mut self.windows, &self.target, &self.opts, index)?;
        let before = w.block.recs.len();
        let named = w.last_thread == Some((pid, tid)) || w.threads.contains_key(&(pid, tid));
        w.last_thread = Some((pid, tid));
        if !named {
            w.threads.insert((pid, tid), ());
            let (name, process) = match self.threads.get(&(pid, tid)) {
                Some(i) => (i.name.as_str(), i.process.as_str()),
                None => ("", ""),
            };
            if w.processes.insert(pid, ()).is_none() {
                w.block.push_other(Other::Process {
                    pid,
                    name: process.into(),
                });
            }
            w.block.push_other(Other::Thread {
                pid,
                tid,
                name: name.into(),
            });
        }
        w.events += 1;
        let r = rec(&mut w.block);
        w.block.recs.push(r);
        self.held += w.block.recs.len() - before;
        if w.block.is_full() {
            self.submit(index, true)?;
        }
        if self.held > MAX_HELD_RECS {
            self.submit_all()?;
        }
        Ok(())
    }

    /// Adds instant or counter `e` to window `index`.
    fn event(&mut self, index: u64, e: Event) -> Result<(), EmitError> {
        self.with_window(index, e.pid, e.tid, |b| {
            Rec::Other(b.other(Other::Event(e)))
        })
    }

    /// Sends every window's block that holds records to be encoded.
    fn submit_all(&mut self) -> Result<(), EmitError> {
        let held: Vec<u64> = (self.windows.list.iter())
            .filter(|(_, w)| !w.block.recs.is_empty())
            .map(|(i, _)| *i)
            .collect();
        for index in held {
            self.submit(index, false)?;
        }
        Ok(())
    }

    /// Sends window `index`'s block to be encoded (encodes and writes it,
    /// without encoder threads), and writes the blocks encoded by now. The
    /// window gets a block used before when `reuse` (it filled this one
    /// and goes on), else an empty one that takes memory as records come
    /// (`--split` windows sent all at once may get few records for long).
    fn submit(&mut self, index: u64, reuse: bool) -> Result<(), EmitError> {
        let fresh = match reuse {
            true => self.spare.pop().unwrap_or_else(Block::new),
            false => Block::new(),
        };
        let Some(w) = self.windows.get_mut(index) else {
            return Ok(());
        };
        let mut block = std::mem::replace(&mut w.block, fresh);
        let sink = w.sink.clone();
        self.held -= block.recs.len();
        block.bytes = self.buffers.pop().unwrap_or_default();
        if self.encoders.is_none() {
            let result = blocks::encode_and_write(&mut block, &sink);
            return self.block_done(index, result, block);
        }
        // Room first: the oldest blocks in flight back.
        while let Some(d) = (self.encoders.as_mut())
            .filter(|e| e.is_full())
            .and_then(|e| e.next(true))
        {
            self.block_done(d.window, d.result, d.block)?;
        }
        if let Some(enc) = &mut self.encoders {
            enc.send(index, sink, block);
        }
        self.write_encoded(false)
    }

    /// Takes back the blocks the encoders wrote by now; with `wait`, all
    /// those sent. The first error wins.
    fn write_encoded(&mut self, wait: bool) -> Result<(), EmitError> {
        while let Some(d) = self.encoders.as_mut().and_then(|e| e.next(wait)) {
            self.block_done(d.window, d.result, d.block)?;
        }
        if wait && self.encoders.as_ref().is_some_and(|e| e.pending() > 0) {
            return Err(EmitError::Io {
                path: "<FTF encoder threads>".into(),
                source: io::Error::other("an encoder thread stopped"),
            });
        }
        Ok(())
    }

    /// Keeps a block written to window `index`'s file, emptied, for
    /// reuse; its error, if any, names the file.
    fn block_done(
        &mut self,
        index: u64,
        result: Result<(), BlockError>,
        mut block: Block,
    ) -> Result<(), EmitError> {
        let keep = self.opts.encoders.max(1) * blocks::SPARE_PER_ENCODER + 2;
        block.clear();
        if self.buffers.len() < keep {
            self.buffers.push(std::mem::take(&mut block.bytes));
        }
        if self.spare.len() < keep {
            block.bytes = Vec::new();
            self.spare.push(block);
        }
        let Err(e) = result else {
            return Ok(());
        };
        let path = (self.windows.get_mut(index))
            .and_then(|w| w.path.clone())
            .unwrap_or_else(|| "standard output".into());
        Err(match e {
            BlockError::Encode(source) => EmitError::Ftf { path, source },
            BlockError::Write(source) => EmitError::Io { path, source },
        })
    }

    /// Writes one slice (cut into the windows it crosses, folded when too
    /// deep), or holds it while the time axis is undecided.
    pub fn slice(&mut self, s: &Slice) -> Result<(), EmitError> {
        if let Some(p) = &mut self.pending {
            let first = *self.pending_time.get_or_insert(s.start.time);
            let timed = s.start.time != first || s.end.time != first;
            if !timed && p.len() < AXIS_HOLD_MAX {
                p.push(Pending::Slice(s.clone()));
                return Ok(());
            }
            self.decide(timed)?;
        }
        self.place(s)
    }

    /// Writes one mark (PTWRITE, power, event trace) of thread `tid` at
    /// `at` as an instant or counter (see the module doc), or holds it while
    /// the time axis is undecided.
    pub fn mark(&mut self, pid: u32, tid: u32, at: &Stamp, mark: &Mark) -> Result<(), EmitError> {
        if !self.opts.marks.keeps(mark) {
            self.stats.marks_dropped += 1;
            return Ok(());
        }
        if let Some(p) = &mut self.pending {
            // Marks at different times show that time passes, as slices do.
            let first = *self.pending_time.get_or_insert(at.time);
            if at.time == first && p.len() < AXIS_HOLD_MAX {
                p.push(Pending::Mark(pid, tid, *at, mark.clone()));
                return Ok(());
            }
            self.decide(at.time != first)?;
        }
        self.write_mark(pid, tid, at, mark)
    }

    fn write_mark(&mut self, pid: u32, tid: u32, at: &Stamp, mark: &Mark) -> Result<(), EmitError> {
        if !self.in_range(at.time, at.time) {
            self.stats.dropped += 1;
            return Ok(());
        }
        let index = self.window_of(at.time);
        let ts = self.ticks(tid, at)?;
        let ip_arg = |ip: &Option<u64>| ip.map(|ip| ("ip", Val::Pointer(ip)));
        let event = |category, name: &str, args| Event::new((pid, tid), category, name, ts, args);
        match mark {
            Mark::Ptwrite {
                ip,
                payload,
                emulated,
            } => {
                let mut args = vec![("payload", Val::U64(*payload))];
                args.extend(ip_arg(ip));
                if *emulated {
                    args.push(("emulated", Val::Bool(true)));
                }
                self.stats.ptwrites += 1;
                self.event(index, event("ptwrite", "ptwrite", args))
            }
            Mark::Cbr { ratio, cpu } => {
                let name = match cpu {
                    Some(c) => format!("cpu {c} frequency"),
                    None => "cpu frequency".to_string(),
                };
                let mhz = cbr_mhz(*ratio);
                let key = (index, format!("{pid}/{name}"));
                if self.counters.get(&key) == Some(&mhz) {
                    return Ok(());
                }
                self.counters.insert(key, mhz);
                self.stats.cbr += 1;
                let args = vec![("MHz", Val::U64(mhz))];
                let counter = Event {
                    counter: Some(0),
                    ..event("power", &name, args)
                };
                self.event(index, counter)?;
                // A counter value is not a slice in Perfetto.
                if let Some(w) = self.windows.get_mut(index) {
                    w.events -= 1;
                    w.counters += 1;
                }
                Ok(())
            }
            Mark::Power { name, ip, args } | Mark::Event { name, ip, args } => {
                let power = matches!(mark, Mark::Power { .. });
                let mut a: Vec<_> = args.iter().map(|(n, v)| (*n, Val::U64(*v))).collect();
                a.extend(ip_arg(ip));
                let cat = if power {
                    self.stats.power += 1;
                    "power"
                } else {
                    self.stats.events += 1;
                    "event"
                };
                self.event(index, event(cat, name, a))
            }
        }
    }

    /// Ends the wait for a timed slice: `timed`, the `ns` axis stays;
    /// otherwise the trace has no time (instructions, or an error when `ns`
    /// was asked for). Then writes what waited.
    fn decide(&mut self, timed: bool) -> Result<(), EmitError> {
        let Some(pending) = self.pending.take() else {
            return Ok(());
        };
        let any_slice = pending.iter().any(|p| matches!(p, Pending::Slice(_)));
        if !timed && any_slice {
            if !self.opts.axis_auto {
                return Err(EmitError::NoTime);
            }
            self.opts.axis = TimeAxis::Instructions;
            self.stats.axis = TimeAxis::Instructions;
            self.stats.no_time = true;
        }
        for p in pending {
            match p {
                Pending::Thread {
                    pid,
                    tid,
                    name,
                    process,
                    renames,
                } => self.thread(pid, tid, &name, &process, &renames)?,
                Pending::Slice(s) => self.place(&s)?,
                Pending::Mark(pid, tid, at, m) => self.write_mark(pid, tid, &at, &m)?,
            }
        }
        Ok(())
    }

    /// The index of thread `key`'s [`Tail`] in `tails`.
    #[inline]
    fn tail_of(&mut self, key: (u32, u32)) -> usize {
        match self.last_tail {
            Some((k, i)) if k == key => i,
            _ => {
                let i = match self.tail_index.get(&key) {
                    Some(&i) => i,
                    None => {
                        self.tails.push(Tail::default());
                        self.tail_index.insert(key, self.tails.len() - 1);
                        self.tails.len() - 1
                    }
                };
                self.last_tail = Some((key, i));
                i
            }
        }
    }

    /// Holds the thread's latest calls until its next slice tells whether
    /// the trace's end, a gap or a restart ended them ([`Tail`]), then
    /// places them.
    #[inline]
    fn place(&mut self, s: &Slice) -> Result<(), EmitError> {
        let ti = self.tail_of((s.pid, s.tid));
        let call = matches!(s.kind, SliceKind::Call { .. });
        let tail = &mut self.tails[ti];
        let Some(first) = &mut tail.first else {
            if !call {
                return self.place_now(s, false);
            }
            tail.at = s.end;
            tail.min_depth = s.depth;
            tail.first = Some(s.clone());
            return Ok(());
        };
        let at = tail.at;
        // Stamps never go back in a thread: one that ended no later is
        // another call that ended at `at`, or was held back by the stacks
        // behind one of the calls, which it follows.
        if s.end.time <= at.time && s.end.insns <= at.insns {
            let ended_at = call && s.end == at;
            if ended_at {
                tail.min_depth = tail.min_depth.min(s.depth);
            }
            tail.more.push((s.clone(), ended_at));
            return Ok(());
        }
        let cut = match &s.kind {
            SliceKind::Gap { .. } => s.start == at,
            SliceKind::Untraced { .. } => s.depth == 0 && s.start == at && tail.min_depth <= 0,
            SliceKind::Call { .. } => false,
        };
        if call && tail.more.is_empty() {
            // The common case: a call that returned (its sibling or
            // parent came), and the next one to hold.
            let done = std::mem::replace(first, s.clone());
            tail.at = s.end;
            tail.min_depth = s.depth;
            self.stats.ended_open += u64::from(cut);
            return self.place_now(&done, cut);
        }
        self.release_tail(ti, cut)?;
        if call {
            let tail = &mut self.tails[ti];
            tail.at = s.end;
            tail.min_depth = s.depth;
            tail.first = Some(s.clone());
            return Ok(());
        }
        self.place_now(s, false)
    }

    /// Places the slices tail `ti` holds; with `cut`, its calls are
    /// written cut at their end.
    #[inline]
    fn release_tail(&mut self, ti: usize, cut: bool) -> Result<(), EmitError> {
        let Some(first) = self.tails[ti].first.take() else {
            return Ok(());
        };
        self.stats.ended_open += u64::from(cut);
        self.place_now(&first, cut)?;
        if self.tails[ti].more.is_empty() {
            return Ok(());
        }
        self.release_more(ti, cut)
    }

    /// [`Emitter::release_tail`] for the slices after the first.
    #[cold]
    fn release_more(&mut self, ti: usize, cut: bool) -> Result<(), EmitError> {
        let more = std::mem::take(&mut self.tails[ti].more);
        for (s, ended_at) in &more {
            let open = cut && *ended_at;
            self.stats.ended_open += u64::from(open);
            self.place_now(s, open)?;
        }
        // The vector is kept for the thread's next calls.
        let mut more = more;
        more.clear();
        self.tails[ti].more = more;
        Ok(())
    }

    /// Drops slices outside the range and folds those too deep for
    /// Perfetto; `open`: a call the end of its trace ended.
    #[inline(always)]
    fn place_now(&mut self, s: &Slice, open: bool) -> Result<(), EmitError> {
        let (t0, t1) = (s.start.time, s.end.time);
        if !self.in_range(t0, t1) {
            self.stats.dropped += 1;
            return Ok(());
        }
        let key = (s.pid, s.tid);
        if s.depth < -RETROACTIVE_RESERVE {
            self.stats.outer_frames += 1;
            return Ok(());
        }
        if s.depth > FOLD_DEPTH {
            // Only a child tied with the held ancestor comes after it (by
            // instruction count, which never stands still across a call).
            let inside_held = self.folds.get(&key).is_some_and(|f| {
                f.held.as_ref().is_some_and(|(h, ..)| {
                    h.start.insns <= s.start.insns && s.end.insns <= h.end.insns
                })
            });
            if !inside_held {
                self.release_fold(key)?;
            }
            let fold = self.folds.entry(key).or_default();
            let untraced = matches!(s.kind, SliceKind::Untraced { .. });
            let deepest = s.depth - FOLD_DEPTH;
            let (calls, levels) = match &mut fold.held {
                Some((_, n, l, _)) => (n, l),
                None => (
                    if untraced {
                        &mut fold.untraced
                    } else {
                        &mut fold.calls
                    },
                    &mut fold.max_depth,
                ),
            };
            *calls += 1;
            *levels = (*levels).max(deepest);
            if untraced {
                self.stats.folded_untraced += 1;
            } else {
                self.stats.folded_calls += 1;
            }
            self.stats.folded_max_depth = self.stats.folded_max_depth.max(s.depth);
            return Ok(());
        }
        if self.held_folds > 0 {
            self.release_fold(key)?;
        }
        if s.depth == FOLD_DEPTH {
            let fold = self.folds.entry(key).or_default();
            let n = std::mem::take(&mut fold.calls) + std::mem::take(&mut fold.untraced);
            let levels = std::mem::take(&mut fold.max_depth);
            fold.held = Some((s.clone(), n, levels, open));
            self.held_folds += 1;
            return Ok(());
        }
        self.write_slice(s, 0, 0, open)
    }

    /// Writes the held slice at [`FOLD_DEPTH`] of thread `key`, if any.
    fn release_fold(&mut self, key: (u32, u32)) -> Result<(), EmitError> {
        let held = self.folds.get_mut(&key).and_then(|f| f.held.take());
        match held {
            Some((s, n, levels, open)) => {
                self.held_folds -= 1;
                if n > 0 {
                    self.stats.folds += 1;
                }
                self.write_slice(&s, n, levels, open)
            }
            None => Ok(()),
        }
    }

    /// Writes one slice, cut into the windows it crosses; `folded` slices
    /// `levels` deep stand behind it; `open`: the end of its trace ended it
    /// (cut at its end in every piece).
    fn write_slice(
        &mut self,
        s: &Slice,
        folded: u64,
        levels: i32,
        open: bool,
    ) -> Result<(), EmitError> {
        let (t0, t1) = (s.start.time, s.end.time);
        match &s.kind {
            SliceKind::Call { .. } => self.stats.calls += 1,
            SliceKind::Untraced { .. } => self.stats.untraced += 1,
            SliceKind::Gap { .. } => self.stats.gaps += 1,
        }
        // The part inside the range, then one piece per window it touches; a
        // piece ending exactly at a boundary belongs to the window before it.
        let (lo, hi) = match self.opts.range {
            Some((rs, re)) => (t0.max(rs), t1.min(re).max(t0.max(rs))),
            None => (t0, t1),
        };
        let first = self.window_of(lo);
        let last = if hi > lo {
            self.window_of(hi - 1)
        } else {
            first
        };
        let ns = self.opts.axis == TimeAxis::Ns;
        let start_ticks = self.ticks(s.tid, &s.start)?;
        let end_ticks = self.ticks(s.tid, &s.end)?;
        for index in first..=last {
            let (mut a, mut b) = (t0, t1);
            if let Some(d) = self.opts.split {
                let ws = self.split_base() + index * d;
                a = a.max(ws);
                b = b.min(ws + d);
            }
            a = a.max(lo);
            b = b.min(hi).max(a);
            let cut = match (a > t0, b < t1) {
                (false, false) => Cut::None,
                (true, false) => Cut::Start,
                (false, true) => Cut::End,
                (true, true) => Cut::Both,
            };
            if cut != Cut::None {
                self.stats.cut += 1;
            }
            let cut = match (cut, open) {
                (Cut::None, true) => Cut::End,
                (Cut::Start, true) => Cut::Both,
                (cut, _) => cut,
            };
            let (ta, tb) = if ns {
                (self.ticks_at(a), self.ticks_at(b))
            } else {
                (start_ticks, end_ticks)
            };
            self.write_piece(index, s, ta, tb, cut, (folded, levels))?;
        }
        Ok(())
    }

    fn write_piece(
        &mut self,
        index: u64,
        s: &Slice,
        start: u64,
        end: u64,
        cut: Cut,
        (folded, levels): (u64, i32),
    ) -> Result<(), EmitError> {
        let untraced = match (&s.kind, self.opts.filtered) {
            (SliceKind::Untraced { kernel: true, .. }, _) => "[kernel]",
            (SliceKind::Untraced { .. }, true) => "[filtered out]",
            (SliceKind::Untraced { .. }, false) => "[untraced]",
            _ => "",
        };
        let call = matches!(s.kind, SliceKind::Call { .. });
        if call && start == end {
            self.stats.zero_width_calls += 1;
        }
        if self.opts.record {
            let (category, name) = match &s.kind {
                SliceKind::Call { func, .. } => ("call", func.name.to_string()),
                SliceKind::Untraced { .. } => ("untraced", untraced.into()),
                SliceKind::Gap { kind, .. } => ("gap", kind.name().into()),
            };
            let placed = Placed {
                pid: s.pid,
                tid: s.tid,
                category,
                name,
                start,
                end,
                depth: s.depth,
                folded,
            };
            // Made with the window, which is there by now or made below.
            window_in(&mut self.windows, &self.target, &self.opts, index)?
                .slices
                .push(placed);
        }
        let (pid, tid) = (s.pid, s.tid);
        let levels = u64::try_from(levels).unwrap_or(0);
        self.with_window(index, pid, tid, |block| {
            let what = match &s.kind {
                SliceKind::Call {
                    func,
                    unknown_start,
                    unmatched,
                    ..
                } => What::Call {
                    func: block.func(func),
                    unknown_start: *unknown_start,
                    unmatched: *unmatched,
                    insns: s.insns(),
                    cycles: s.cycles(),
                },
                SliceKind::Untraced { ip, .. } => What::Untraced {
                    name: untraced,
                    ip: *ip,
                },
                SliceKind::Gap { kind, offset } => What::Gap(block.other(Other::Gap(GapRec {
                    name: kind.name(),
                    reason: gap_reason(kind).into(),
                    offset: *offset,
                    ip: match kind {
                        GapKind::NoImage { ip } => Some(*ip),
                        _ => None,
                    },
                }))),
            };
            Rec::Piece(Piece {
                pid,
                tid,
                start,
                end,
                what,
                cut,
                folded,
                levels,
            })
        })?;
        if let SliceKind::Gap {
            kind: kind @ GapKind::DecodeError(_),
            offset,
        } = &s.kind
        {
            if matches!(cut, Cut::None | Cut::End) {
                let args = vec![
                    ("reason", Val::Str(gap_reason(kind).into())),
                    ("offset", Val::U64(*offset)),
                ];
                let e = Event::new((pid, tid), "gap", "[decode error]", start, args);
                self.event(index, e)?;
            }
        }
        Ok(())
    }

    /// Writes what is still held (the time axis decided now, folds
    /// released); [`Emitter::finish`] calls it, so the stats are final after it.
    pub fn flush(&mut self) -> Result<(), EmitError> {
        self.decide(false)?;
        // What the threads' traces ended while it ran.
        let mut tails: Vec<_> = self.tail_index.iter().map(|(&k, &i)| (k, i)).collect();
        tails.sort_unstable();
        for (_, ti) in tails {
            self.release_tail(ti, true)?;
        }
        let mut keys: Vec<_> = self.folds.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            self.release_fold(key)?;
        }
        self.submit_all()?;
        self.write_encoded(true)
    }

    /// Flushes and closes every file.
    pub fn finish(mut self) -> Result<Vec<Written>, EmitError> {
        self.flush()?;
        let split = self.opts.split.is_some();
        let mut out = Vec::new();
        // No block is in flight (flush waited for all): each sink is
        // this thread's alone again.
        self.encoders = None;
        for (index, w) in std::mem::take(&mut self.windows.list) {
            let label = w.path.clone().unwrap_or_else(|| "standard output".into());
            let sink = Arc::try_unwrap(w.sink)
                .map_err(|_| EmitError::Io {
                    path: label.clone(),
                    source: io::Error::other("an encoder thread still holds the file"),
                })?
                .into_inner()
                .unwrap_or_else(|e| e.into_inner());
            let bytes = sink.close().map_err(|source| EmitError::Io {
                path: label,
                source,
            })?;
            out.push(Written {
                window: split.then_some(index),
                path: w.path,
                bytes,
                events: w.events,
                counters: w.counters,
                slices: w.slices,
            });
        }
        Ok(out)
    }
}

/// Window `index` of `windows`, made (its file created) when new. One
/// search of the map per slice (the profile showed four); a function of
/// the fields it needs, so the emitter's other fields stay free to borrow.
fn window_in<'w>(
    windows: &'w mut Windows,
    target: &Target,
    opts: &EmitOptions,
    index: u64,
) -> Result<&'w mut Window, EmitError> {
    let at = match windows.find(index) {
        Ok(at) => return Ok(&mut windows.list[at].1),
        Err(at) => at,
    };
    if index >= MAX_WINDOWS {
        return Err(EmitError::TooManyWindows { index });
    }
    let split = opts.split.is_some();
    let (sink, path) = match target {
        Target::Memory => (Sink::Memory(Vec::new()), None),
        // Written in place: its commit is a flush.
        Target::Stdout => (Sink::Plain(OutFile::stdout()?), None),
        Target::File(p) => {
            let path = if split {
                window_path(p, index)
            } else {
                p.clone()
            };
            let mode = opts.file_mode.unwrap_or(crate::outfile::PRIVATE_MODE);
            let file = OutFile::create(&path, mode).map_err(|e| match &e {
                // EMFILE.
                crate::outfile::OutFileError::Io { source, .. }
                    if split && source.raw_os_error() == Some(24) =>
                {
                    EmitError::OpenFiles { index }
                }
                _ => e.into(),
            })?;
            let gz = path.extension().is_some_and(|e| e == "gz");
            let sink = if gz {
                Sink::Gzip(GzEncoder::new(file, flate2::Compression::default()))
            } else {
                Sink::Plain(file)
            };
            (sink, Some(path))
        }
    };
    let mut sink = sink;
    write_ftf_header(&mut sink).map_err(|source| EmitError::Ftf {
        path: path.clone().unwrap_or_else(|| "standard output".into()),
        source,
    })?;
    let window = Window {
        sink: Arc::new(Mutex::new(sink)),
        block: Block::new(),
        path,
        threads: FastMap::default(),
        last_thread: None,
        processes: FastMap::default(),
        events: 0,
        counters: 0,
        slices: Vec::new(),
    };
    windows.list.insert(at, (index, window));
    windows.last = at;
    Ok(&mut windows.list[at].1)
}

/// The files written so far by window index, in order, and where the last
/// one asked for is: slices come by the thousand per window (one search
/// of a map per slice showed in the profile).
#[derive(Default)]
struct Windows {
    list: Vec<(u64, Window)>,
    last: usize,
}

impl Windows {
    /// Where window `index` is, or where it would go.
    fn find(&mut self, index: u64) -> Result<usize, usize> {
        if self.list.get(self.last).is_some_and(|(i, _)| *i == index) {
            return Ok(self.last);
        }
        let at = self.list.binary_search_by_key(&index, |(i, _)| *i)?;
        self.last = at;
        Ok(at)
    }

    fn get_mut(&mut self, index: u64) -> Option<&mut Window> {
        let at = self.find(index).ok()?;
        Some(&mut self.list[at].1)
    }
}

/// The emitter as a sink of the call stacks' slices.
impl SliceSink for Emitter {
    type Error = EmitError;

    fn thread(
        &mut self,
        pid: u32,
        tid: u32,
        name: &str,
        process: &str,
        renames: &[(u64, String)],
    ) -> Result<(), EmitError> {
        Emitter::thread(self, pid, tid, name, process, renames)
    }

    fn slice(&mut self, s: &Slice) -> Result<(), EmitError> {
        Emitter::slice(self, s)
    }

    fn set_origin(&mut self, origin: u64) {
        Emitter::set_origin(self, origin)
    }

    fn mark(&mut self, pid: u32, tid: u32, at: &Stamp, mark: &Mark) -> Result<(), EmitError> {
        Emitter::mark(self, pid, tid, at, mark)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::slices::{Func, FuncRef};

    fn st(t: u64) -> Stamp {
        Stamp {
            time: t,
            insns: t * 2,
            cycles: crate::model::ops::Cycles::some(t * 3),
        }
    }

    fn call(depth: i32, name: &str, t0: u64, t1: u64, unknown_start: bool) -> Slice {
        Slice {
            pid: 10,
            tid: 11,
            depth,
            id: std::num::NonZeroU64::MIN,
            parent: None,
            start: st(t0),
            end: st(t1),
            kind: SliceKind::Call {
                func: FuncRef::owned(Func {
                    entry: 0x401000,
                    name: name.into(),
                    module: "/bin/prog".into(),
                }),
                unknown_start,
                call_time: None,
                unmatched: false,
            },
        }
    }

    /// The dump's kernel objects and events, without offsets.
    fn events(bytes: &[u8]) -> Vec<String> {
        ftf::read::dump(bytes)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once(' ').map(|(_, rest)| rest.to_string()))
            .filter(|l| {
                l.starts_with("kernel_object")
                    || l.starts_with("duration_complete")
                    || l.starts_with("instant")
            })
            .collect()
    }

    fn emitter(opts: EmitOptions) -> Emitter {
        let mut e = Emitter::new(Target::Memory, opts).unwrap();
        e.thread(10, 11, "worker", "prog", &[(150, "renamed".into())])
            .unwrap();
        e
    }

    /// Slices of `funcs` functions (each its own `Arc`, as the symbol
    /// cache makes them), one per unit of time from 0, on two threads,
    /// with an untraced slice, a gap and a mark now and then; their (tid,
    /// name).
    fn many_slices(e: &mut Emitter, n: u64, funcs: usize) -> Vec<(u32, String)> {
        let fs: Vec<FuncRef> = (0..funcs)
            .map(|i| {
                FuncRef::owned(Func {
                    entry: 0x400000 + i as u64 * 16,
                    name: format!("f{i}").into(),
                    module: format!("/lib/m{}.so", i % 7).into(),
                })
            })
            .collect();
        let mut names = Vec::new();
        for t in 0..n {
            let kind = match t % 1000 {
                500 => SliceKind::Untraced {
                    kernel: true,
                    ip: 0x1234,
                },
                700 => SliceKind::Gap {
                    kind: GapKind::Overflow,
                    offset: t,
                },
                _ => SliceKind::Call {
                    func: fs[(t as usize * 7919) % funcs].clone(),
                    unknown_start: t % 3 == 0,
                    call_time: None,
                    unmatched: false,
                },
            };
            let s = Slice {
                pid: 10,
                tid: 11 + (t % 2) as u32,
                depth: (t % 5) as i32,
                id: std::num::NonZeroU64::MIN,
                parent: None,
                start: st(t),
                end: st(t + 1),
                kind,
            };
            names.push((
                s.tid,
                match &s.kind {
                    SliceKind::Call { func, .. } => func.name.to_string(),
                    SliceKind::Untraced { .. } => "[kernel]".into(),
                    SliceKind::Gap { kind, .. } => kind.name().into(),
                },
            ));
            e.slice(&s).unwrap();
            if t % 4000 == 0 {
                let m = Mark::Ptwrite {
                    ip: Some(t),
                    payload: t,
                    emulated: false,
                };
                e.mark(10, 11, &st(t), &m).unwrap();
            }
            assert!(e.held <= MAX_HELD_RECS + 3, "{} records held", e.held);
        }
        names
    }

    #[test]
    fn blocks_make_the_same_bytes_on_any_number_of_encoders() {
        let n = 3 * blocks::BLOCK_RECS as u64 + 123;
        let run = |encoders: usize, split: Option<u64>| {
            let mut e = emitter(EmitOptions {
                encoders,
                split,
                ..Default::default()
            });
            let names = many_slices(&mut e, n, 700);
            (names, e.finish().unwrap())
        };
        let (mut names, one) = run(0, None);
        // Every slice, in its thread's order (a thread's latest calls wait
        // for its next slice), named right across the blocks' tables.
        let mut written: Vec<(u32, String)> = events(&one[0].bytes)
            .iter()
            .filter(|l| l.starts_with("duration_complete"))
            .map(|l| {
                let tid = l.split(" tid=").nth(1).unwrap();
                let tid = tid[..tid.find(' ').unwrap()].parse().unwrap();
                let name = l.split("name=\"").nth(1).unwrap();
                (tid, name[..name.find('"').unwrap()].to_string())
            })
            .collect();
        written.sort_by_key(|w| w.0);
        names.sort_by_key(|w| w.0);
        assert_eq!(written, names);
        // The slices, the marks and the rename's instant.
        assert_eq!(one[0].events, n + (n / 4000 + 1) + 1);
        for encoders in [1, 2, 5] {
            let (_, more) = run(encoders, None);
            assert!(more[0].bytes == one[0].bytes, "{encoders} encoders");
        }
        // Windows: a slice crossing many of them puts a record in each,
        // and what they hold in all stays bounded.
        let (_, split) = run(0, Some(700));
        assert_eq!(split.len() as u64, n.div_ceil(700));
        let mut e = emitter(EmitOptions {
            split: Some(100),
            encoders: 2,
            ..Default::default()
        });
        let long = call(0, "long", 0, 100 * 400, false);
        for _ in 0..300 {
            e.slice(&long).unwrap();
            assert!(e.held <= MAX_HELD_RECS + 3, "{} records held", e.held);
        }
        let out = e.finish().unwrap();
        assert_eq!(out.len(), 400);
        // 300 pieces in each, and the rename's instant in window 1.
        let counts: Vec<u64> = out.iter().map(|w| w.events).collect();
        assert!(counts
            .iter()
            .enumerate()
            .all(|(i, n)| *n == 300 + u64::from(i == 1)));
        assert!(out.iter().all(|w| events(&w.bytes).len() as u64 > 300));
        // Windows filled one after the other, each past a block: those
        // left behind keep no block's worth of memory they do not use.
        let mut e = emitter(EmitOptions {
            split: Some(20_000),
            encoders: 2,
            ..Default::default()
        });
        for t in 0..20 * 20_000 {
            e.slice(&call(0, "f", t, t + 1, false)).unwrap();
        }
        let capacity: usize = (e.windows.list.iter())
            .map(|(_, w)| w.block.recs.capacity())
            .sum();
        let used: usize = (e.windows.list.iter())
            .map(|(_, w)| w.block.recs.len())
            .sum();
        assert!(
            capacity <= 2 * used + blocks::BLOCK_RECS,
            "{capacity} for {used} records"
        );
        e.finish().unwrap();
        for encoders in [2, 3] {
            let (_, again) = run(encoders, Some(700));
            for (a, b) in split.iter().zip(&again) {
                assert!(
                    a.bytes == b.bytes,
                    "window {:?}, {encoders} encoders",
                    a.window
                );
            }
        }
    }

    /// A frame a return matching no open frame ended says so.
    #[test]
    fn an_unmatched_frame_carries_unmatched() {
        let mut e = emitter(EmitOptions {
            origin: 100,
            ..Default::default()
        });
        let mut s = call(1, "deep", 110, 150, false);
        if let SliceKind::Call { unmatched, .. } = &mut s.kind {
            *unmatched = true;
        }
        e.slice(&s).unwrap();
        e.slice(&call(0, "main", 100, 200, false)).unwrap();
        let out = e.finish().unwrap();
        let got = events(&out[0].bytes);
        let deep = got.iter().find(|l| l.contains(r#"name="deep""#)).unwrap();
        assert!(deep.contains(r#""unmatched": bool(true)"#), "{deep}");
        let main = got.iter().find(|l| l.contains(r#"name="main""#)).unwrap();
        assert!(!main.contains("unmatched"), "{main}");
    }

    #[test]
    fn every_slice_kind_as_ftf() {
        let mut e = emitter(EmitOptions {
            origin: 100,
            ..Default::default()
        });
        e.slice(&call(0, "main", 100, 200, true)).unwrap();
        e.slice(&Slice {
            depth: 1,
            kind: SliceKind::Untraced {
                kernel: true,
                ip: 0x401010,
            },
            ..call(1, "", 120, 130, false)
        })
        .unwrap();
        e.slice(&Slice {
            depth: 0,
            kind: SliceKind::Gap {
                kind: GapKind::DecodeError(Box::new("bad packet".into())),
                offset: 64,
            },
            ..call(0, "", 200, 210, false)
        })
        .unwrap();
        let out = e.finish().unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].window, None);
        let got = events(&out[0].bytes);
        let want = [
            r#"kernel_object process koid=10 name="prog""#,
            r#"kernel_object thread koid=11 name="worker" args={"process": koid(10)}"#,
            r#"instant ts=50 pid=10 tid=11 cat="comm" name="comm: renamed" args={"name": str("renamed")}"#,
            // The gap that follows ended it while it ran.
            r#"duration_complete ts=0 pid=10 tid=11 cat="call" name="main" end=100 args={"insns": u32(200), "cycles": u32(300), "addr": ptr(0x401000), "module": str("/bin/prog"), "unknown_start": bool(true), "cut": str("end")}"#,
            r#"duration_complete ts=20 pid=10 tid=11 cat="untraced" name="[kernel]" end=30 args={"ip": ptr(0x401010)}"#,
            r#"duration_complete ts=100 pid=10 tid=11 cat="gap" name="[gap: decode error]" end=110 args={"reason": str("bad packet"), "offset": u32(64)}"#,
            r#"instant ts=100 pid=10 tid=11 cat="gap" name="[decode error]" args={"reason": str("bad packet"), "offset": u32(64)}"#,
        ];
        assert_eq!(got, want, "{got:#?}");
    }

    /// Calls the trace's end, a gap or a restart ended while they ran are
    /// cut at their end; calls that returned are not, nor slices held back
    /// behind a cut one that ended earlier; threads are told apart.
    #[test]
    fn calls_still_running_at_the_end_are_cut_at_their_end() {
        let mut e = emitter(EmitOptions {
            origin: 0,
            ..Default::default()
        });
        let on = |tid: u32, s: Slice| Slice { tid, ..s };
        let untraced = |depth: i32, t0: u64, t1: u64| Slice {
            depth,
            kind: SliceKind::Untraced {
                kernel: true,
                ip: 0x401010,
            },
            ..call(depth, "", t0, t1, false)
        };
        // Thread 11: a returns at 20, b at 30 (both at depth 1); then a
        // restart: the frames end at 40, untraced time at depth 0 from 40.
        // The new segment's c returns at 60, and the trace ends at 70 with
        // d (its child tied with its start, held back behind it) and main
        // running.
        for s in [
            call(1, "a", 10, 20, false),
            call(1, "b", 25, 30, false),
            call(1, "b_open", 32, 40, false),
            call(0, "main", 0, 40, false),
            untraced(0, 40, 45),
            call(1, "c", 50, 60, false),
            call(1, "d", 62, 70, false),
            call(2, "d_child", 62, 65, false),
            call(0, "main2", 45, 70, true),
        ] {
            e.slice(&s).unwrap();
        }
        // Thread 12: f returns at 20 and a gap begins at 30: g ends there;
        // h returns at 50, after it nothing.
        e.thread(10, 12, "other", "prog", &[]).unwrap();
        for s in [
            call(1, "f", 10, 20, false),
            call(0, "g", 0, 30, false),
            Slice {
                kind: SliceKind::Gap {
                    kind: GapKind::Overflow,
                    offset: 0,
                },
                ..call(0, "", 30, 40, false)
            },
            call(0, "h", 40, 50, false),
        ] {
            e.slice(&on(12, s)).unwrap();
        }
        e.flush().unwrap();
        assert_eq!(e.stats().ended_open, 6);
        let out = e.finish().unwrap();
        let mut got: Vec<String> = events(&out[0].bytes)
            .into_iter()
            .filter(|l| l.starts_with("duration_complete"))
            .map(|l| {
                let tid = l.split(" tid=").nth(1).unwrap().split(' ').next().unwrap();
                let name = l
                    .split("name=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap();
                let cut = l
                    .split("\"cut\": ")
                    .nth(1)
                    .map_or("", |c| c.trim_end_matches('}'));
                format!("{tid} {name} {cut}").trim_end().to_string()
            })
            .collect();
        // In each thread's order.
        got.sort_by_key(|l| l.split(' ').next().unwrap().to_string());
        assert_eq!(
            got,
            [
                "11 a",
                "11 b",
                r#"11 b_open str("end")"#,
                r#"11 main str("end")"#,
                "11 [kernel]",
                "11 c",
                r#"11 d str("end")"#,
                "11 d_child",
                r#"11 main2 str("end")"#,
                "12 f",
                r#"12 g str("end")"#,
                "12 [gap: overflow]",
                r#"12 h str("end")"#,
            ]
        );
    }

    #[test]
    fn split_cuts_slices_at_window_boundaries() {
        let mut e = emitter(EmitOptions {
            origin: 0,
            split: Some(100),
            ..Default::default()
        });
        e.slice(&call(0, "long", 50, 250, false)).unwrap();
        e.slice(&call(1, "inside", 120, 180, false)).unwrap();
        e.slice(&call(1, "at_boundary", 180, 200, false)).unwrap();
        let out = e.finish().unwrap();
        let windows: Vec<_> = out.iter().map(|w| w.window).collect();
        assert_eq!(windows, [Some(0), Some(1), Some(2)]);
        let names: Vec<Vec<String>> = out
            .iter()
            .map(|w| {
                events(&w.bytes)
                    .into_iter()
                    .filter(|l| l.starts_with("duration"))
                    .map(|l| {
                        let field = |key: &str| {
                            l.split(' ')
                                .find(|f| f.starts_with(key))
                                .unwrap_or("")
                                .to_string()
                        };
                        let cut = l
                            .split("\"cut\": ")
                            .nth(1)
                            .map_or("", |c| c.trim_end_matches('}'));
                        format!(
                            "{} {} {} {cut}",
                            field("ts="),
                            field("end="),
                            field("name=")
                        )
                    })
                    .collect()
            })
            .collect();
        assert_eq!(
            names,
            [
                vec![r#"ts=50 end=100 name="long" str("end")"#],
                vec![
                    r#"ts=100 end=200 name="long" str("both")"#,
                    r#"ts=120 end=180 name="inside" "#,
                    r#"ts=180 end=200 name="at_boundary" "#,
                ],
                // The trace ends while it runs: both ends cut.
                vec![r#"ts=200 end=250 name="long" str("both")"#],
            ]
        );
        // Every file names its threads; the rename at 150 lands in window 1.
        for w in &out {
            let ev = events(&w.bytes);
            assert!(ev[0].starts_with("kernel_object process koid=10"), "{ev:?}");
            assert_eq!(
                ev.iter().any(|l| l.contains("comm: renamed")),
                w.window == Some(1)
            );
        }
    }

    #[test]
    fn range_drops_and_cuts() {
        let mut e = emitter(EmitOptions {
            origin: 0,
            range: Some((100, 200)),
            ..Default::default()
        });
        e.slice(&call(0, "before", 10, 90, false)).unwrap();
        e.slice(&call(0, "after", 200, 300, false)).unwrap();
        e.slice(&call(0, "across", 50, 150, false)).unwrap();
        e.slice(&call(0, "zero_at_start", 100, 100, false)).unwrap();
        e.flush().unwrap();
        assert_eq!(e.stats().dropped, 2);
        let out = e.finish().unwrap();
        let ev: Vec<_> = events(&out[0].bytes)
            .into_iter()
            .filter(|l| l.starts_with("duration"))
            .collect();
        assert_eq!(ev.len(), 2, "{ev:#?}");
        assert!(ev[0].contains(r#"ts=100 pid=10 tid=11 cat="call" name="across" end=150"#));
        assert!(ev[0].ends_with(r#""cut": str("start")}"#), "{}", ev[0]);
        assert!(ev[1].contains(r#"ts=100 pid=10 tid=11 cat="call" name="zero_at_start" end=100"#));
    }

    #[test]
    fn counter_axes() {
        let mut e = emitter(EmitOptions {
            axis: TimeAxis::Instructions,
            ..Default::default()
        });
        e.slice(&call(0, "main", 100, 200, false)).unwrap();
        let out = e.finish().unwrap();
        let ev = events(&out[0].bytes);
        assert!(
            ev[3].starts_with("duration_complete ts=200") && ev[3].contains("end=400"),
            "{ev:#?}"
        );

        let mut e = emitter(EmitOptions {
            axis: TimeAxis::Cycles,
            ..Default::default()
        });
        let mut s = call(0, "main", 100, 200, false);
        e.slice(&s).unwrap();
        s.start.cycles = crate::model::ops::Cycles::NONE;
        // Written (and refused) once the thread's next slice or the end
        // shows whether the trace's end cut it.
        e.slice(&s).unwrap();
        assert!(matches!(e.flush(), Err(EmitError::NoCycles { tid: 11 })));
    }

    /// Name, depth and `folded` of every call written, in file order.
    fn folds(bytes: &[u8]) -> Vec<String> {
        events(bytes)
            .into_iter()
            .filter(|l| l.starts_with("duration"))
            .map(|l| {
                let name = l
                    .split("name=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap();
                let folded = l
                    .split("\"folded\": u32(")
                    .nth(1)
                    .map_or("-", |r| r.split(')').next().unwrap());
                let levels = l
                    .split("\"folded_levels\": u32(")
                    .nth(1)
                    .map_or("-", |r| r.split(')').next().unwrap());
                format!("{name} {folded} {levels}")
            })
            .collect()
    }

    #[test]
    fn slices_deeper_than_perfetto_keeps_fold_into_their_ancestor() {
        let f = FOLD_DEPTH;
        let mut e = emitter(EmitOptions {
            record: true,
            ..Default::default()
        });
        // Children end first: two levels below the fold level, then the
        // slice at the fold level that stands for them.
        e.slice(&call(f + 2, "deep2", 12, 13, false)).unwrap();
        e.slice(&call(f + 1, "deep1", 11, 14, false)).unwrap();
        e.slice(&call(f, "at_fold", 10, 15, false)).unwrap();
        // A sibling at the fold level whose tied child follows it (the
        // stack holds a child that starts with its parent behind it).
        e.slice(&call(f, "tied_parent", 20, 25, false)).unwrap();
        e.slice(&call(f + 1, "tied_child", 20, 22, false)).unwrap();
        // A later subtree: its deep child ends before its own fold slice.
        e.slice(&call(f + 1, "later_child", 31, 32, false)).unwrap();
        e.slice(&call(f, "later", 30, 35, false)).unwrap();
        e.slice(&call(f - 1, "above", 5, 40, false)).unwrap();
        assert_eq!(e.stats().folded_calls, 4);
        let out = e.finish().unwrap();
        assert_eq!(
            folds(&out[0].bytes),
            ["at_fold 2 2", "tied_parent 1 1", "later 1 1", "above - -"]
        );
        let placed = &out[0].slices;
        assert!(placed.iter().all(|p| p.depth <= f), "{placed:?}");
        assert_eq!(placed.iter().map(|p| p.folded).sum::<u64>(), 4);
    }

    #[test]
    fn frames_found_far_above_the_trace_start_are_counted_not_written() {
        let r = RETROACTIVE_RESERVE;
        let mut e = emitter(EmitOptions::default());
        e.slice(&call(0, "base", 0, 10, true)).unwrap();
        e.slice(&call(-r, "outer_kept", 0, 20, true)).unwrap();
        e.slice(&call(-r - 1, "outer_dropped", 0, 30, true))
            .unwrap();
        e.flush().unwrap();
        assert_eq!(e.stats().outer_frames, 1);
        let out = e.finish().unwrap();
        let names: Vec<String> = folds(&out[0].bytes);
        assert_eq!(names, ["base - -", "outer_kept - -"]);
    }

    #[test]
    fn slices_without_time_are_written_on_the_instruction_axis() {
        let timeless = |opts: EmitOptions| {
            let mut e = emitter(opts);
            e.slice(&Slice {
                end: Stamp {
                    time: 100,
                    insns: 9,
                    cycles: crate::model::ops::Cycles::NONE,
                },
                ..call(1, "leaf", 100, 100, false)
            })
            .map(|()| e)
        };
        let mut e = timeless(EmitOptions {
            axis_auto: true,
            ..Default::default()
        })
        .unwrap();
        assert!(!e.stats().no_time, "undecided until the end");
        e.flush().unwrap();
        assert!(e.stats().no_time);
        let out = e.finish().unwrap();
        let ev = events(&out[0].bytes);
        // Instructions 200 .. 9 (st() counts two per ns): the thread's counts.
        assert!(
            ev.iter()
                .any(|l| l.contains("ts=200") && l.contains("end=9")),
            "{ev:#?}"
        );

        // Asked for ns: refused, naming the instruction axis.
        let e = timeless(EmitOptions::default()).unwrap();
        let err = e.finish().unwrap_err();
        assert!(matches!(err, EmitError::NoTime), "{err}");
        assert!(err.to_string().contains("--time-axis instructions"));

        // Known from the configuration: no waiting.
        let e = Emitter::new(
            Target::Memory,
            EmitOptions {
                timed: Some(false),
                axis_auto: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(e.stats().axis, TimeAxis::Instructions);
        assert!(matches!(
            Emitter::new(
                Target::Memory,
                EmitOptions {
                    timed: Some(false),
                    ..Default::default()
                }
            ),
            Err(EmitError::NoTime)
        ));

        // Time passes: the ns axis stays.
        let mut e = emitter(EmitOptions {
            axis_auto: true,
            ..Default::default()
        });
        e.slice(&call(1, "a", 100, 100, false)).unwrap();
        e.slice(&call(1, "b", 100, 130, false)).unwrap();
        assert_eq!(e.stats().axis, TimeAxis::Ns);
        assert!(!e.stats().no_time);
    }

    #[test]
    fn gzip_files_and_window_names() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.ftf.gz");
        let mut e = Emitter::new(
            Target::File(path.clone()),
            EmitOptions {
                split: Some(100),
                ..Default::default()
            },
        )
        .unwrap();
        e.thread(10, 11, "worker", "prog", &[]).unwrap();
        e.slice(&call(0, "main", 0, 150, false)).unwrap();
        let out = e.finish().unwrap();
        assert_eq!(out.len(), 2);
        for (i, w) in out.iter().enumerate() {
            let p = w.path.as_ref().unwrap();
            assert_eq!(*p, dir.path().join(format!("out-{i}.ftf.gz")));
            let mut bytes = Vec::new();
            let gz = std::fs::File::open(p).unwrap();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz), &mut bytes).unwrap();
            assert!(ftf::read::dump(&bytes).unwrap().contains("name=\"main\""));
        }
        assert_eq!(
            window_path(Path::new("a/out.ftf"), 3),
            Path::new("a/out-3.ftf")
        );
        assert_eq!(window_path(Path::new("out"), 0), Path::new("out-0"));
        assert_eq!(window_path(Path::new("x.gz"), 1), Path::new("x-1.gz"));
        assert_eq!(window_path(Path::new(".hidden"), 1), Path::new(".hidden-1"));
    }
}
