//! The ordering stage ([`Orderer`]): decoded chunks arrive here in delivery
//! order (see `workers`); their runs are stitched across chunk edges, put in
//! each thread's execution order, their counters made cumulative per
//! thread, cut to the `--start/--duration` window, and handed to the sink.
//!
//! * Stitching: a chunk that starts where tracing was already on (its PSB+
//!   has a FUP) begins with an `Op::Enabled`; when the previous chunk of the
//!   same segment ended with the same task traced, that op is dropped, so
//!   the ops are those of one decoder running through the PSB.
//! * Per-thread buffers: chunks are delivered segment by segment in stream
//!   order, which is each thread's execution order: runs go to the sink at
//!   once.
//! * Per-cpu buffers: a thread's runs come from several CPUs' buffers.
//!   Chunks are delivered in order of their start time (the TSC of their
//!   PSB); a run starts no earlier than its chunk, so once the chunks
//!   before time T are delivered, no later chunk can hold a run that starts
//!   before T. Runs are held until then and released in start order, as
//!   perf's ordered events flush up to a watermark.
//!
//! Memory: the runs held here are those of chunks delivered but not yet
//! released (per-cpu) — a few chunks' worth, never the trace.

use std::collections::{BTreeMap, BTreeSet};

use sideband::timeline::TaskId;

use super::chunk::{ChunkOutput, Piece};
use super::runs::{OpPool, Run};
use super::{DecodeOptions, DecodeStats};
use crate::model::ops::{Ahead, Base, GapKind, Mark, Op, OpSink, Rebase, Stamp, ThreadStats};

/// A chunk's stitch to the chunk before it in its segment, taken when it
/// begins ([`Orderer::begin`]), and how far its runs have come.
pub(super) struct ChunkStart {
    segment: usize,
    first: bool,
    /// The segment's first chunk after lost data, when the segment before
    /// was decoded ([`Orderer::follows_loss`]).
    lost_in: bool,
    /// The previous chunk's open task and last CBR ratio.
    prev_open: Option<TaskId>,
    prev_cbr: Option<u16>,
    /// The run the previous chunk left that this one goes on with.
    prev_tail: Option<Tail>,
    /// The tail of the chunk's runs so far (`prev_tail` before any).
    tail: Option<Tail>,
    /// The chunk's first runs came (and were stitched).
    begun: bool,
    /// The chunk's first CBR mark came and was dropped.
    cbr_dropped: bool,
    /// Pieces with runs handed on.
    pieces: u64,
}

/// Per thread: what has been handed to the sink so far.
#[derive(Debug, Default)]
struct ThreadOut {
    /// Instructions and cycles of the runs handed over (the next run's
    /// counters start here).
    insns: u64,
    cycles: u64,
    /// No op handed over yet (the first `Enabled` gets `first`).
    fresh: bool,
    last: Option<Stamp>,
    /// Ops before the window were dropped: the next op needs an `Enabled`.
    skipped: bool,
    /// Past the window's end: nothing more is handed over.
    done: bool,
    /// The last op handed over is a gap for lost data, with nothing
    /// decoded after it.
    after_lost: bool,
}

/// See the module doc.
pub(super) struct Orderer<'o> {
    opts: &'o DecodeOptions,
    /// Where emptied op vectors go back.
    pool: &'o OpPool,
    cycles: bool,
    per_cpu: bool,
    /// Per segment: the task still traced at the end of its last chunk.
    open: Vec<Option<TaskId>>,
    /// Per segment: the ratio of the last CBR mark handed on.
    cbr: Vec<Option<u16>>,
    /// Per segment: a chunk of it synchronized (its sync was counted).
    synced: Vec<bool>,
    /// Per segment: its last chunk ended unsynchronized
    /// (`ChunkStats::ends_unsynced`).
    lost: Vec<bool>,
    /// Per segment: the run its last chunk left open (see [`Tail`]).
    tail: Vec<Option<Tail>>,
    /// Per segment: it follows lost data, and the segment before it, of
    /// the same buffer, was decoded ([`Orderer::follows_loss`]).
    follows: Vec<bool>,
    /// Per-cpu runs waiting for the watermark, by (start time, arrival).
    held: BTreeMap<(u64, u64), Run>,
    held_ops: usize,
    arrivals: u64,
    threads: BTreeMap<TaskId, ThreadOut>,
    /// Tasks seen, in order (for `End`).
    seen: BTreeSet<TaskId>,
    /// A long run's ops go to the sink through this, [`BATCH_OPS`] at a
    /// time (see [`run_ops`]).
    batch: Vec<Op>,
    pub stats: DecodeStats,
}

/// How many of a long run's ops go to the sink at a time: 128 KiB, so
/// that they are still in the cache when the sink's second stage (the
/// call stacks, after time spreading) goes over them.
const BATCH_OPS: usize = 2048;

/// Runs of more ops than this go to the sink in batches: 4 MiB of ops,
/// which have left the cache by the time the output takes them. A run of
/// a default chunk (32 KiB, about 41,000 ops of call-dense code) is still
/// in it, and moving it in batches only added a pass: one core took 1.01
/// s of CPU with it and 0.94 s without on the bench's interpreter trace,
/// `-j2` 0.66 s of wall time against 0.60 s. Runs of 256 KiB chunks
/// (traces with CYC, `--chunk-size`) are 8 times longer.
const BATCH_MIN_RUN: usize = 1 << 16;

impl<'o> Orderer<'o> {
    pub fn new(
        opts: &'o DecodeOptions,
        cycles: bool,
        per_cpu: bool,
        segments: usize,
        pool: &'o OpPool,
        stats: DecodeStats,
    ) -> Self {
        Orderer {
            opts,
            pool,
            cycles,
            per_cpu,
            open: vec![None; segments],
            cbr: vec![None; segments],
            synced: vec![false; segments],
            lost: vec![false; segments],
            tail: vec![None; segments],
            follows: vec![false; segments],
            held: BTreeMap::new(),
            held_ops: 0,
            arrivals: 0,
            threads: BTreeMap::new(),
            seen: BTreeSet::new(),
            batch: Vec::new(),
            stats,
        }
    }

    /// Segment `segment` follows lost data, and the segment before it is
    /// of the same buffer: the end of that one made the loss's gap
    /// (`ChunkDecoder::finish`), and the start of this one makes one too
    /// for the task it starts with (the task on the CPU may have changed
    /// in the loss). When the last op handed on for that task is the
    /// loss's gap, with nothing decoded for it since, that second gap is
    /// the same loss again: dropped where the run is handed on
    /// ([`Orderer::emit`]; its thread may have run on another CPU in
    /// between, and a window may have cut the first gap), so that one
    /// loss is one gap (per-thread buffers showed two for each, the
    /// second with no length). Not with a time window: the first gap may
    /// lie before it.
    pub fn follows_loss(&mut self, segment: usize) {
        self.follows[segment] = segment > 0;
    }

    /// Ops held here now (per-cpu runs waiting for their turn).
    pub fn held_ops(&self) -> usize {
        self.held_ops
    }

    /// Takes the next chunk in delivery order. `segment` is its segment's
    /// index, `first` whether it is the segment's first decoded chunk, and
    /// `watermark` the start time of the next chunk to be delivered (no
    /// later chunk holds a run that starts before it; `None`: no more
    /// chunks).
    pub fn chunk(
        &mut self,
        segment: usize,
        first: bool,
        out: ChunkOutput,
        watermark: Option<u64>,
        sink: &mut dyn OpSink,
    ) {
        let st = self.begin(segment, first);
        self.end(st, out, watermark, sink);
    }

    /// A chunk begins: what its first runs are stitched to. Its runs come
    /// in pieces ([`Orderer::piece`], as `chunk::decode_by_libipt`
    /// and `chunk::decode_fast_flushing` hand them on), then the rest with its output ([`Orderer::end`]);
    /// together, what [`Orderer::chunk`] does with the whole.
    pub fn begin(&mut self, segment: usize, first: bool) -> ChunkStart {
        let prev_open = self.open[segment];
        // The run the previous chunk left open goes on; so does one it
        // left with tracing off, when it left none open (one decoder
        // would go on with it at the next enable).
        let tail = self.tail[segment]
            .take()
            .filter(|t| !first && (prev_open == Some(t.task) || (prev_open.is_none() && !t.open)));
        let lost_in = first && self.follows[segment];
        ChunkStart {
            segment,
            first,
            lost_in,
            prev_open,
            prev_cbr: self.cbr[segment],
            prev_tail: tail,
            tail,
            begun: false,
            cbr_dropped: false,
            pieces: 0,
        }
    }

    /// Hands on runs a chunk flushed before its end (see
    /// `chunk::decode_by_libipt`); its output, given to
    /// [`Orderer::end`] when it ends, holds the rest and its statistics.
    /// The chunk's first runs are stitched as [`Orderer::chunk`] would;
    /// per-cpu runs wait for the watermark as there, and for the run the
    /// chunk goes on with (no later run of it starts before that one).
    pub fn piece(
        &mut self,
        st: &mut ChunkStart,
        piece: Piece,
        watermark: Option<u64>,
        sink: &mut dyn OpSink,
    ) {
        let mut runs = piece.runs;
        if runs.is_empty() {
            return;
        }
        st.pieces += 1;
        self.stitch(st, &mut runs, piece.sync_task, piece.sync_cbr);
        let last = runs.last().map(|r| (r.task, r.start));
        st.tail = Tail::of(&runs, last.map(|l| l.0), st.tail);
        let n: usize = runs.iter().map(|r| r.ops.len()).sum();
        self.stats.max_chunk_ops = self.stats.max_chunk_ops.max(n as u64);
        self.stats.max_ops_held = self.stats.max_ops_held.max((n + self.held_ops) as u64);
        self.hand_on(runs, watermark, last.map(|l| l.1), sink);
    }

    /// A chunk ends ([`Orderer::begin`]): its output, after any pieces.
    pub fn end(
        &mut self,
        mut st: ChunkStart,
        mut out: ChunkOutput,
        watermark: Option<u64>,
        sink: &mut dyn OpSink,
    ) {
        let segment = st.segment;
        // The bytes a chunk could not synchronize in, after a chunk of a
        // segment that synchronized stopped at an error with no PSB left
        // in it: one decoder skips them after that error, and counts them
        // so, not as bytes before a first sync.
        if self.synced[segment] && self.lost[segment] {
            out.stats.skipped_bytes += std::mem::take(&mut out.stats.unsynced_bytes);
        }
        self.stats.merge_chunk(&out.stats);
        // One decoder synchronizes once at a segment's start. When the
        // segment's first chunks could not (a corrupt start), the first
        // chunk that synchronized at its own PSB counts that sync
        // (`ChunkStats::start_sync`), as one decoder would have; so does
        // a chunk after one that stopped at an error with no PSB left in
        // it (one decoder synchronizes at this chunk's PSB then), so that
        // the count is the same for any chunk size.
        if out.stats.start_sync && (!self.synced[segment] || self.lost[segment]) {
            self.stats.syncs += 1;
        }
        self.synced[segment] |= out.stats.start_sync || out.stats.syncs > 0;
        self.lost[segment] = out.stats.ends_unsynced;
        let n_ops: usize = out.runs.iter().map(|r| r.ops.len()).sum();
        self.stats.max_chunk_ops = self.stats.max_chunk_ops.max(n_ops as u64);
        self.open[segment] = out.open_task;
        if out.last_cbr.is_some() {
            self.cbr[segment] = out.last_cbr;
        }
        self.stitch(&mut st, &mut out.runs, out.sync_task, out.sync_cbr);
        self.tail[segment] = match (st.pieces, st.tail, out.runs.is_empty()) {
            // The chunk's last run was handed on in a piece: its tail, now
            // that the chunk says whether it is still traced.
            (1.., Some(t), true) => out.open_task.is_none_or(|o| o == t.task).then_some(Tail {
                open: out.open_task.is_some(),
                ..t
            }),
            (1.., None, true) => None,
            _ => Tail::of(&out.runs, out.open_task, st.tail),
        };
        self.hand_on(out.runs, watermark, None, sink);
    }

    /// Stitches a chunk's runs, as they come, to the chunk before: the
    /// enable it synchronized with and the CBR its PSB+ restated are
    /// dropped where one decoder running through the PSB would not have
    /// made them, and a gap at code without an image made again is undone
    /// ([`repeated_gap`]).
    fn stitch(
        &mut self,
        st: &mut ChunkStart,
        runs: &mut [Run],
        sync_task: Option<TaskId>,
        sync_cbr: Option<u16>,
    ) {
        if runs.is_empty() {
            return;
        }
        let begins = !std::mem::replace(&mut st.begun, true);
        if begins && !st.first && st.prev_open.is_some() && st.prev_open == sync_task {
            if let Some(r) = runs.first_mut() {
                if matches!(r.ops.first(), Some(Op::Enabled { .. })) {
                    r.skip.first = true;
                }
            }
        }
        // `sync_cbr` is set when the chunk's first CBR mark is made, if
        // ever: a piece before that has none to drop, and after it the
        // mark is in the first piece looked at.
        if !st.cbr_dropped && !st.first && sync_cbr.is_some() && sync_cbr == st.prev_cbr {
            st.cbr_dropped = drop_first_cbr(runs);
        }
        if let (true, Some(t)) = (begins, st.prev_tail) {
            if runs[0].task == t.task {
                let removed = repeated_gap(runs, t, self.cycles);
                self.stats.no_image = self.stats.no_image.saturating_sub(removed);
            }
        }
        if begins && st.lost_in {
            runs[0].lost_first = runs[0].ops.first().is_some_and(is_lost_data);
        }
    }

    /// Hands runs on: at once from per-thread buffers; from per-cpu ones
    /// held, and those before the watermark (and not after the start
    /// `going_on`, the run a chunk in pieces goes on with) released in
    /// start order.
    fn hand_on(
        &mut self,
        runs: Vec<Run>,
        watermark: Option<u64>,
        going_on: Option<u64>,
        sink: &mut dyn OpSink,
    ) {
        if !self.per_cpu {
            for r in runs {
                self.emit(r, sink);
            }
            return;
        }
        for r in runs {
            self.held_ops += r.ops.len();
            self.held.insert((r.start, self.arrivals), r);
            self.arrivals += 1;
        }
        let wm = watermark.unwrap_or(u64::MAX);
        self.stats.max_ops_held = self.stats.max_ops_held.max(self.held_ops as u64);
        while let Some(e) = self.held.first_entry() {
            if e.key().0 >= wm || going_on.is_some_and(|g| e.key().0 > g) {
                break;
            }
            let r = e.remove();
            self.held_ops -= r.ops.len();
            self.emit(r, sink);
        }
    }

    /// Hands over what is still held and ends every thread with `Op::End`.
    pub fn finish(mut self, sink: &mut dyn OpSink) -> DecodeStats {
        while let Some((_, r)) = self.held.pop_first() {
            self.held_ops -= r.ops.len();
            self.emit(r, sink);
        }
        for task in std::mem::take(&mut self.seen) {
            let Some(th) = self.threads.get_mut(&task) else {
                continue;
            };
            let Some(at) = th.last else { continue };
            let ts = self.stats.threads.entry((task.pid, task.tid)).or_default();
            send(task, th, &mut ts.span, Op::End { at }, sink);
            ts.ops += 1;
            self.stats.ops += 1;
        }
        self.stats
    }

    /// Hands one run of a thread to the sink: its ops one by one, or the
    /// stretch of them a worker built the call stack of
    /// ([`OpSink::stretch`]) between its head and tail.
    fn emit(&mut self, mut run: Run, sink: &mut dyn OpSink) {
        let windowed = self.opts.start.is_some() || self.opts.end.is_some();
        if run.lost_first
            && !windowed
            && self.threads.get(&run.task).is_some_and(|t| t.after_lost)
            && drop_first_op(&mut run, is_lost_data)
        {
            self.stats.lost_data = self.stats.lost_data.saturating_sub(1);
        }
        // What the run leaves its thread with: nothing decoded (keep what
        // it was), or whether it ends in a gap for lost data.
        let after_lost = (!run.ops.is_empty() || run.insns > 0)
            .then(|| run.ops.last().is_some_and(is_lost_data));
        let task = run.task;
        let mut ops = std::mem::take(&mut run.ops);
        let stretch = run.stretch.take().filter(|st| {
            // Not with a window (ops are dropped around it), not for a
            // dropped CBR inside it, not for the thread's first run.
            self.opts.start.is_none()
                && self.opts.end.is_none()
                && run.skip.at.is_none_or(|a| a < st.from)
                && self.threads.get(&run.task).is_some_and(|t| !t.fresh)
        });
        self.emit_ops(&run, &mut ops, stretch, sink);
        if let (Some(a), Some(th)) = (after_lost, self.threads.get_mut(&task)) {
            th.after_lost = a;
        }
        // Drained by `emit_ops`: nothing left to drop.
        ops.clear();
        self.pool.give(ops);
    }

    /// Hands a run's ops to the sink (`ops` is left drained) unless its
    /// thread is not wanted or past the window, and counts them.
    fn emit_ops(
        &mut self,
        run: &Run,
        ops: &mut Vec<Op>,
        stretch: Option<Box<Ahead>>,
        sink: &mut dyn OpSink,
    ) {
        let task = run.task;
        if !self.opts.wants(task) {
            return;
        }
        let th = self.threads.entry(task).or_insert_with(|| ThreadOut {
            fresh: true,
            ..ThreadOut::default()
        });
        if th.done {
            return;
        }
        self.seen.insert(task);
        // The jumps the decoder left out (`runs`'s quiet jumps) count as
        // jumps and ops, so that the counts do not depend on where runs
        // begin (the first jump of each is kept; but for jumps left out in
        // a stall whose ops are then dropped, `chunk::recover`): none is
        // left out with a time window.
        self.stats.quiet_jumps += run.dropped;
        self.stats.ops += run.dropped;
        let ts = self.stats.threads.entry((task.pid, task.tid)).or_default();
        ts.jumps += run.dropped;
        ts.ops += run.dropped;
        let (base_insns, base_cycles) = (th.insns, th.cycles);
        th.insns += run.insns;
        th.cycles += run.cycles;
        ts.insns += run.insns;
        let (start, end) = (self.opts.start, self.opts.end);
        let mut h = Handover {
            task,
            fix: Rebase {
                insns: base_insns,
                cycles: self.cycles.then_some(base_cycles),
            },
            span: ts.span,
            sent: 0,
            ahead_ops: 0,
            ahead_declined: 0,
            th,
            ts,
        };
        // The skipped ops when they are the run's first ones (as at a
        // chunk's start: its enable and CBR mark).
        let prefix = match (run.skip.first, run.skip.at) {
            (false, None) => Some(0),
            (true, None) | (_, Some(0)) => Some(1),
            (true, Some(1)) => Some(2),
            _ => None,
        }
        .filter(|&p| p <= ops.len());
        let plain = stretch.is_none() && start.is_none() && end.is_none();
        let tail = run.tail_stamp(ops);
        if let (true, Some(p), false, true) = (plain, prefix, h.th.fresh, run.tally.n == ops.len())
        {
            h.tallied(run, ops, p, &mut self.batch, sink);
        } else if plain {
            h.fixed_in_place(run, ops, sink);
        } else {
            h.one_by_one(run, ops, stretch, (start, end), sink);
        }
        // A jump left out after the run's last op: the thread's latest
        // stamp, where its `Op::End` ends what is open (`Run::tail_insns`).
        if let (Some(mut at), Some(_)) = (tail, h.th.last) {
            h.fix.apply(&mut at);
            h.th.last = Some(at);
        }
        let Handover {
            ts,
            span,
            sent,
            ahead_ops,
            ahead_declined,
            ..
        } = h;
        self.stats.stacks_ahead_ops += ahead_ops;
        self.stats.stacks_ahead_declined += ahead_declined;
        ts.span = span;
        ts.ops += sent;
        self.stats.ops += sent;
        if let Some((a, b)) = span {
            self.stats.time_span = Some(
                self.stats
                    .time_span
                    .map_or((a, b), |(x, y)| (x.min(a), y.max(b))),
            );
        }
    }
}

/// One run on its way to the sink ([`Orderer::emit_ops`]): its thread's
/// state and statistics, and what went so far, which the stats take after.
struct Handover<'a> {
    task: TaskId,
    th: &'a mut ThreadOut,
    ts: &'a mut ThreadStats,
    /// The run's ops counted from the thread's start, not the run's.
    fix: Rebase,
    /// The thread's time span (`ts.span`) with the ops handed over.
    span: Option<(u64, u64)>,
    /// Ops handed over.
    sent: u64,
    /// Ops of a stretch the sink took, and stretches it declined
    /// (`DecodeStats::stacks_ahead_*`).
    ahead_ops: u64,
    ahead_declined: u64,
}

impl Handover<'_> {
    /// Hands on a run whose ops the decoder counted (`Run::tally`) and
    /// the sink fixes (`OpSink::run_ops`), all but the first `p`.
    #[inline]
    fn tallied(
        &mut self,
        run: &Run,
        ops: &mut Vec<Op>,
        p: usize,
        batch: &mut Vec<Op>,
        sink: &mut dyn OpSink,
    ) {
        // Nothing cut out or put in but the run's first ops, and no
        // first enable to mark: the decoder counted the ops as it
        // made them (`Run::tally`), and the sink fixes their stamps
        // as it goes over them (`OpSink::run_ops`), so no pass over
        // them here (one was 7-10% of `ptdec` on one core).
        // The tally leaves out the first two ops; those kept are
        // counted here.
        let tally = &run.tally;
        let (mut lo, mut hi) = tally.span;
        self.ts.add_counts(&tally.counts);
        for op in &ops[p..ops.len().min(2)] {
            self.ts.count(op);
            let t = op.stamp().time;
            (lo, hi) = (lo.min(t), hi.max(t));
        }
        if let Some(op) = ops.last().filter(|_| ops.len() > p) {
            let mut last = op.stamp();
            self.fix.apply(&mut last);
            self.th.last = Some(last);
            self.span = Some(self.span.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
        }
        self.sent = (ops.len() - p) as u64;
        run_ops(batch, self.task, sink, ops, p, self.fix);
    }

    /// Hands on a run's ops but its own skipped ones, fixed where they lie
    /// and counted in one pass, together.
    #[inline]
    fn fixed_in_place(&mut self, run: &Run, ops: &mut Vec<Op>, sink: &mut dyn OpSink) {
        // Nothing cut out or put in but the run's own skipped ops: the
        // ops are fixed where they lie and go on together.
        // One pass and one match per op; the thread's last stamp and
        // time span are taken once (three matches and an update of
        // each per op were 4% of `ptdec -j1`'s instructions).
        let (th, ts, fix) = (&mut *self.th, &mut *self.ts, self.fix);
        let (mut i, mut lo, mut hi) = (0, u64::MAX, 0);
        ops.retain_mut(|op| {
            i += 1;
            if run.skip.drops(i - 1) {
                return false;
            }
            let at = match op {
                Op::Call { at, .. } => {
                    ts.calls += 1;
                    at
                }
                Op::Return { at, .. } => {
                    ts.returns += 1;
                    at
                }
                Op::Jump { at, .. } => {
                    ts.jumps += 1;
                    at
                }
                Op::Gap { at, .. } => {
                    ts.gaps += 1;
                    at
                }
                Op::Enabled { at, first, .. } => {
                    *first = std::mem::take(&mut th.fresh);
                    at
                }
                Op::Disabled { at, .. } | Op::End { at } | Op::Mark { at, .. } => at,
            };
            fix.apply(at);
            (lo, hi) = (lo.min(at.time), hi.max(at.time));
            true
        });
        if let Some(op) = ops.last() {
            th.last = Some(op.stamp());
            self.span = Some(self.span.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
        }
        self.sent = ops.len() as u64;
        sink.ops(self.task.pid, self.task.tid, ops);
    }

    /// Hands on a run's ops one at a time: cut to the window (`start`,
    /// `end`; an enable goes first after a cut), the stretch, if any,
    /// offered to the sink in place of its ops.
    #[inline]
    fn one_by_one(
        &mut self,
        run: &Run,
        ops: &mut Vec<Op>,
        mut stretch: Option<Box<Ahead>>,
        (start, end): (Option<u64>, Option<u64>),
        sink: &mut dyn OpSink,
    ) {
        let (from, to) = stretch
            .as_ref()
            .map_or((ops.len(), ops.len()), |st| (st.from, st.to));
        // Each op is moved out once (a placeholder written in its
        // stead and a drop pass over them after showed in the profile).
        let mut ops = ops.drain(..);
        let mut i = 0;
        while let Some(mut op) = ops.next() {
            if i == from {
                if let Some(st) = stretch.take() {
                    if self.offer(st, to - from, sink) {
                        // The stretch's other ops are dropped.
                        ops.by_ref()
                            .take((to - from).saturating_sub(1))
                            .for_each(drop);
                        i = to;
                        continue;
                    }
                }
            }
            if run.skip.drops(i) {
                i += 1;
                continue;
            }
            i += 1;
            self.fix.apply(op.stamp_mut());
            let fixed = op.stamp();
            self.ts.count(&op);
            if start.is_some_and(|st| fixed.time < st) {
                self.th.skipped = true;
                continue;
            }
            if end.is_some_and(|e| fixed.time > e) {
                self.th.done = true;
                break;
            }
            if !matches!(op, Op::Mark { .. })
                && std::mem::take(&mut self.th.skipped)
                && !matches!(op, Op::Enabled { .. } | Op::Gap { .. })
            {
                let enable = Op::Enabled {
                    at: fixed,
                    ip: op.ip(),
                    first: false,
                };
                send(self.task, self.th, &mut self.span, enable, sink);
                self.sent += 1;
            }
            send(self.task, self.th, &mut self.span, op, sink);
            self.sent += 1;
        }
    }

    /// Offers the sink a stretch of `n` ops a worker built the call stack
    /// of ([`OpSink::stretch`]); counts them when it takes it (the answer).
    #[inline]
    fn offer(&mut self, st: Box<Ahead>, n: usize, sink: &mut dyn OpSink) -> bool {
        let base = Base {
            insns: self.fix.insns,
            cycles: self.fix.cycles,
        };
        let (counts, (a, b), last) = (st.counts.clone(), st.span, st.last);
        let taken = sink.stretch(self.task.pid, self.task.tid, st, base);
        if !taken {
            self.ahead_declined += 1;
            return false;
        }
        self.ahead_ops += n as u64;
        self.ts.add_counts(&counts);
        self.sent += n as u64;
        self.span = Some(self.span.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
        self.th.last = Some(base.stamp(last));
        true
    }
}

/// What the ordering stage knows of the run a chunk left open (its task
/// still traced at the chunk's end), for the next chunk, which goes on
/// with it: whether its last op (of those handed on) after the last gap
/// for code without an image is only enables and disables, and whether
/// its last op is a disable or gap (`closed`).
#[derive(Debug, Clone, Copy)]
struct Tail {
    task: TaskId,
    /// Still traced at the chunk's end (else tracing was off).
    open: bool,
    after_no_image: bool,
    closed: Option<bool>,
}

impl Tail {
    /// The tail `runs` leave, its task still traced when it is `open`;
    /// `prev` is the tail the chunk went on from, for a first run with
    /// nothing to say (and for a chunk without runs).
    fn of(runs: &[Run], open: Option<TaskId>, prev: Option<Tail>) -> Option<Tail> {
        let Some((i, r)) = runs.iter().enumerate().next_back() else {
            return prev.filter(|p| !p.open && open.is_none());
        };
        if open.is_some_and(|t| t != r.task) {
            return None;
        }
        let prev = prev.filter(|p| i == 0 && p.task == r.task);
        let flow = kept(r).rev().find(|(_, op)| is_flow(op));
        Some(Tail {
            task: r.task,
            open: open.is_some(),
            // No instruction decoded since that gap (the run's counter
            // stands where the gap's stamp does).
            after_no_image: match flow {
                Some((_, op)) => is_no_image(op) && op.stamp().insns == r.insns,
                None => r.insns == 0 && prev.is_some_and(|p| p.after_no_image),
            },
            closed: closed(r).or_else(|| prev.and_then(|p| p.closed)),
        })
    }
}

/// `r`'s ops that go on (not dropped by its `skip`), with their indices.
fn kept(r: &Run) -> impl DoubleEndedIterator<Item = (usize, &Op)> {
    r.ops.iter().enumerate().filter(|(k, _)| !r.skip.drops(*k))
}

/// Whether `r`'s last op that goes on is a disable or gap (`None`: none
/// goes on), as `ChunkDecoder::switch_to` asks of a run before it adds
/// the disable of a switch.
fn closed(r: &Run) -> Option<bool> {
    kept(r)
        .next_back()
        .map(|(_, op)| matches!(op, Op::Gap { .. } | Op::Disabled { .. }))
}

/// Control flow or a gap: what `ChunkDecoder::recover` looks back to,
/// past enables, disables and marks, to tell a repeated gap.
pub(super) fn is_flow(op: &Op) -> bool {
    !matches!(
        op,
        Op::Enabled { .. } | Op::Disabled { .. } | Op::Mark { .. }
    )
}

/// A gap at code without an image.
pub(super) fn is_no_image(op: &Op) -> bool {
    matches!(
        op,
        Op::Gap {
            kind: GapKind::NoImage { .. },
            ..
        }
    )
}

/// A gap for lost data.
fn is_lost_data(op: &Op) -> bool {
    matches!(
        op,
        Op::Gap {
            kind: GapKind::LostData,
            ..
        }
    )
}

/// Removes `r`'s first op when it goes on and `what` says so (the gap a
/// segment after lost data starts with: `ChunkDecoder::switch_to`);
/// whether it did.
fn drop_first_op(r: &mut Run, what: fn(&Op) -> bool) -> bool {
    if r.skip.drops(0) || !r.ops.first().is_some_and(what) {
        return false;
    }
    r.ops.remove(0);
    if let Some(a) = r.skip.at.as_mut() {
        *a = a.saturating_sub(1);
    }
    // Counted and built ahead for the ops as they were.
    r.stretch = None;
    r.tally.n = usize::MAX;
    true
}

/// A chunk's first run goes on with the run its previous chunk left
/// open (`prev`). When that run's last ops are a gap at code without an
/// image and enables, one decoder would not make the first gap at code
/// without an image of this run again (`ChunkDecoder::recover`: one gap
/// for the whole stretch), nor, without it, leave out the disable a task
/// switch right after makes (`switch_to`): the chunk, decoded alone,
/// did both. Undone here, so that the ops are the same for any chunk
/// size. Returns the gaps removed (0 or 1).
fn repeated_gap(runs: &mut [Run], prev: Tail, cycles: bool) -> u64 {
    let (r, next) = match runs {
        [r, rest @ ..] => (r, rest.first()),
        [] => return 0,
    };
    if !prev.after_no_image {
        return 0;
    }
    let Some((i, true)) = kept(r)
        .find(|(_, op)| is_flow(op))
        .map(|(i, op)| (i, is_no_image(op) && op.stamp().insns == 0))
    else {
        return 0;
    };
    let was_last = kept(r).next_back().is_some_and(|(k, _)| k == i);
    r.ops.remove(i);
    if let Some(a) = r.skip.at.as_mut() {
        if *a > i {
            *a -= 1;
        }
    }
    // Counted and built ahead for the ops as they were.
    r.stretch = None;
    r.tally.n = usize::MAX;
    if let (true, Some(next)) = (was_last, next) {
        if closed(r).or(prev.closed) == Some(false) {
            let ip = next.ops.first().map_or(0, Op::ip);
            r.ops.push(Op::Disabled {
                at: Stamp {
                    time: next.start,
                    insns: r.insns,
                    cycles: cycles.then_some(r.cycles).into(),
                },
                ip,
                kernel: true,
            });
        }
    }
    1
}

/// Removes the first CBR mark of a chunk's runs (see
/// [`ChunkOutput::sync_cbr`]); whether there was one.
fn drop_first_cbr(runs: &mut [Run]) -> bool {
    for r in runs {
        let at = r.ops.iter().position(
            |op| matches!(op, Op::Mark { mark, .. } if matches!(**mark, Mark::Cbr { .. })),
        );
        if let Some(i) = at {
            r.skip.at = Some(i);
            return true;
        }
    }
    false
}

/// Hands one op of `task` to the sink, noting it in the thread's state and
/// time span.
fn send(
    task: TaskId,
    th: &mut ThreadOut,
    span: &mut Option<(u64, u64)>,
    mut op: Op,
    sink: &mut dyn OpSink,
) {
    note(th, span, &mut op);
    sink.op(task.pid, task.tid, op);
}

/// Notes an op about to be handed on in the thread's state and time span
/// (the thread's first enable is marked `first`).
fn note(th: &mut ThreadOut, span: &mut Option<(u64, u64)>, op: &mut Op) {
    if let Op::Enabled { first, .. } = op {
        *first = std::mem::take(&mut th.fresh);
    }
    let t = op.stamp();
    th.last = Some(t);
    *span = Some(span.map_or((t.time, t.time), |(a, b)| (a.min(t.time), b.max(t.time))));
}

/// `sink.run_ops(.., ops, skip, Some(fix))`, a run longer than
/// [`BATCH_MIN_RUN`] in batches of [`BATCH_OPS`]: the sink goes over the
/// ops twice (time spreading, then the call stacks), and a long run's
/// ops (MBs) had left the cache before the second pass (the profile
/// showed each pass waiting on its first load of each op; moved out in
/// batches, only the move waits). The sinks take a run in several calls
/// as they take several runs.
fn run_ops(
    batch: &mut Vec<Op>,
    task: TaskId,
    sink: &mut dyn OpSink,
    ops: &mut Vec<Op>,
    skip: usize,
    fix: Rebase,
) {
    if ops.len() - skip <= BATCH_MIN_RUN {
        sink.run_ops(task.pid, task.tid, ops, skip, Some(fix));
        return;
    }
    let mut rest = ops.drain(skip..);
    loop {
        batch.extend(rest.by_ref().take(BATCH_OPS));
        if batch.is_empty() {
            break;
        }
        sink.run_ops(task.pid, task.tid, batch, 0, Some(fix));
        batch.clear();
    }
    drop(rest);
    ops.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::chunk::ChunkStats;

    const A: TaskId = TaskId { pid: 1, tid: 1 };
    const B: TaskId = TaskId { pid: 1, tid: 2 };

    fn at(time: u64, insns: u64) -> Stamp {
        Stamp {
            time,
            insns,
            cycles: crate::model::ops::Cycles::NONE,
        }
    }

    fn call(time: u64, insns: u64, from: u64) -> Op {
        Op::Call {
            at: at(time, insns),
            from,
            to: from + 0x100,
            ret: from + 5,
            raw_time: time,
        }
    }

    fn enabled(time: u64, ip: u64) -> Op {
        Op::Enabled {
            at: at(time, 0),
            ip,
            first: false,
        }
    }

    fn run(task: TaskId, start: u64, insns: u64, ops: Vec<Op>) -> Run {
        let mut r = Run::new(task, start, Vec::new());
        r.insns = insns;
        for op in ops {
            r.push(op);
        }
        r
    }

    fn chunk(runs: Vec<Run>, open: Option<TaskId>, sync: Option<TaskId>) -> ChunkOutput {
        ChunkOutput {
            runs,
            stats: ChunkStats::default(),
            open_task: open,
            sync_task: sync,
            sync_cbr: None,
            last_cbr: None,
            redo: None,
            parts: Vec::new(),
        }
    }

    fn cbr(time: u64, ratio: u16) -> Op {
        Op::Mark {
            at: at(time, 0),
            mark: Box::new(Mark::Cbr { ratio, cpu: None }),
        }
    }

    fn ratios(seen: &Seen) -> Vec<u16> {
        seen.0
            .iter()
            .filter_map(|(_, op)| match op {
                Op::Mark { mark, .. } => match **mark {
                    Mark::Cbr { ratio, .. } => Some(ratio),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }

    /// A chunk's PSB+ restates the CBR: dropped when the segment's last
    /// mark has that ratio already (also across a chunk without CBR),
    /// kept when it differs, in a segment's first chunk, and when it is a
    /// CBR packet of the chunk's own.
    #[test]
    fn a_restated_cbr_at_a_chunk_start_is_marked_once() {
        let opts = DecodeOptions::default();
        let pool = OpPool::default();
        let mut o = Orderer::new(&opts, false, false, 2, &pool, DecodeStats::default());
        let mut seen = Seen::default();
        let with = |start: u64, ratios: &[u16], sync: bool, seg_last: Option<u16>| {
            let mut c = chunk(
                vec![run(
                    A,
                    start,
                    1,
                    ratios.iter().map(|&r| cbr(start, r)).collect(),
                )],
                None,
                None,
            );
            c.sync_cbr = ratios.first().copied().filter(|_| sync);
            c.last_cbr = seg_last;
            c
        };
        o.chunk(0, true, with(10, &[20], true, Some(20)), None, &mut seen);
        o.chunk(
            0,
            false,
            with(20, &[20, 24], true, Some(24)),
            None,
            &mut seen,
        );
        o.chunk(0, false, with(30, &[], false, None), None, &mut seen);
        o.chunk(0, false, with(40, &[24], true, Some(24)), None, &mut seen);
        o.chunk(0, false, with(50, &[30], true, Some(30)), None, &mut seen);
        o.chunk(0, false, with(60, &[30], false, Some(30)), None, &mut seen);
        // Another segment starts afresh.
        o.chunk(1, true, with(70, &[30], true, Some(30)), None, &mut seen);
        o.finish(&mut seen);
        assert_eq!(ratios(&seen), [20, 24, 30, 30, 30]);
    }

    /// Every op handed over, per thread, and how many calls handed over
    /// a batch ([`BATCH_OPS`] ops).
    #[derive(Default)]
    struct Seen(Vec<(u32, Op)>, usize);

    impl OpSink for Seen {
        fn op(&mut self, _pid: u32, tid: u32, op: Op) {
            self.0.push((tid, op));
        }

        fn run_ops(
            &mut self,
            pid: u32,
            tid: u32,
            ops: &mut Vec<Op>,
            skip: usize,
            rebase: Option<Rebase>,
        ) {
            self.1 += usize::from(ops.len().saturating_sub(skip) == BATCH_OPS);
            crate::model::ops::drain_fixed(ops, skip, rebase, |op| self.op(pid, tid, op));
        }
    }

    /// The ops of a run the decoder tallied go on without a pass here
    /// (`Run::tally`, `OpSink::run_ops`): the same ops, stamps and
    /// counters as with the pass, for random runs of both threads, with
    /// and without cycles, whatever the ops skipped at their start. Every
    /// thirtieth round has runs long enough to go on in batches
    /// ([`BATCH_OPS`]), which must change nothing either.
    #[test]
    fn tallied_runs_go_on_as_runs_fixed_one_by_one() {
        let mut rng = fastrand::Rng::with_seed(21);
        let mut batched = 0;
        for round in 0..300 {
            let long = round % 30 == 0;
            let cycles = round % 2 == 1;
            let mut chunks = Vec::new();
            let mut time = 100;
            for _ in 0..rng.usize(1..5) {
                let mut runs = Vec::new();
                for _ in 0..rng.usize(1..3) {
                    let task = if rng.bool() { A } else { B };
                    let mut ops = Vec::new();
                    let mut insns = 0;
                    let n = if long {
                        rng.usize(BATCH_MIN_RUN + 1..BATCH_MIN_RUN + 3 * BATCH_OPS)
                    } else {
                        rng.usize(0..12)
                    };
                    for _ in 0..n {
                        time += rng.u64(0..3);
                        insns += rng.u64(1..9);
                        let mut a = at(time, insns);
                        a.cycles = (cycles && rng.bool()).then_some(insns * 2).into();
                        ops.push(crate::model::ops::test_op(rng.u64(0..9), a));
                    }
                    let mut r = run(task, time, insns, ops);
                    r.cycles = if cycles { insns * 2 } else { 0 };
                    r.skip = crate::decode::runs::Skip {
                        first: rng.bool(),
                        at: [None, Some(0), Some(1), Some(2), Some(5)][rng.usize(0..5)],
                    };
                    runs.push(r);
                }
                chunks.push(runs);
            }
            let opts = DecodeOptions::default();
            let pool = OpPool::default();
            let feed = |tallied: bool| {
                let mut o = Orderer::new(&opts, cycles, false, 1, &pool, DecodeStats::default());
                let mut seen = Seen::default();
                for (i, runs) in chunks.iter().enumerate() {
                    let runs = runs
                        .iter()
                        .map(|r| {
                            let mut c = run(r.task, r.start, r.insns, r.ops.clone());
                            c.cycles = r.cycles;
                            c.skip = r.skip;
                            if !tallied {
                                c.tally.n = usize::MAX;
                            }
                            c
                        })
                        .collect();
                    o.chunk(0, i == 0, chunk(runs, None, None), None, &mut seen);
                }
                let stats = o.finish(&mut seen);
                (seen.0, stats, seen.1)
            };
            let (tallied, fixed) = (feed(true), feed(false));
            assert_eq!(fixed.2, 0, "round {round}: the pass hands a run on whole");
            batched += usize::from(tallied.2 > 0);
            assert_eq!((tallied.0, tallied.1), (fixed.0, fixed.1), "round {round}");
        }
        assert!(batched >= 4, "{batched} rounds handed runs on in batches");
    }

    #[test]
    fn a_sync_enable_after_an_open_chunk_is_dropped_and_counters_add_up() {
        let opts = DecodeOptions::default();
        let pool = OpPool::default();
        let mut o = Orderer::new(&opts, false, false, 1, &pool, DecodeStats::default());
        let mut seen = Seen::default();
        let c0 = chunk(
            vec![run(
                A,
                10,
                7,
                vec![enabled(10, 0x1000), call(11, 3, 0x1010)],
            )],
            Some(A),
            None,
        );
        o.chunk(0, true, c0, None, &mut seen);
        // Tracing ran on across the PSB: the next chunk's enable goes.
        let c1 = chunk(
            vec![run(
                A,
                20,
                5,
                vec![enabled(20, 0x2000), call(21, 2, 0x2010)],
            )],
            None,
            Some(A),
        );
        o.chunk(0, false, c1, None, &mut seen);
        // Not open at the end of c1: c2's enable stays.
        let c2 = chunk(
            vec![run(A, 30, 1, vec![enabled(30, 0x3000)])],
            None,
            Some(A),
        );
        o.chunk(0, false, c2, None, &mut seen);
        let stats = o.finish(&mut seen);
        let ops: Vec<&Op> = seen.0.iter().map(|(_, op)| op).collect();
        assert!(matches!(ops[0], Op::Enabled { first: true, .. }));
        // Instruction counts continue from the runs before.
        assert_eq!(ops[1].stamp().insns, 3);
        assert!(matches!(ops[2], Op::Call { .. }));
        assert_eq!(ops[2].stamp().insns, 7 + 2);
        assert!(matches!(
            ops[3],
            Op::Enabled {
                first: false,
                ip: 0x3000,
                ..
            }
        ));
        assert_eq!(ops[3].stamp().insns, 12);
        assert!(matches!(ops[4], Op::End { .. }));
        assert_eq!(ops.len(), 5);
        assert_eq!(stats.threads[&(1, 1)].insns, 13);
        assert_eq!(stats.threads[&(1, 1)].calls, 2);
    }

    fn lost(time: u64, insns: u64) -> Op {
        Op::Gap {
            at: at(time, insns),
            kind: GapKind::LostData,
            offset: 500,
        }
    }

    /// One loss, one gap: the segment after the loss drops the gap it
    /// starts with where the last op handed on for its task is the loss's
    /// gap, and keeps it for another task (per-cpu buffers), where the
    /// task ran elsewhere in between (another CPU's segment, 2), or where
    /// the segment before was not decoded (`follows_loss` not said).
    #[test]
    fn a_loss_between_segments_is_one_gap_per_task() {
        let cases = [
            (true, A, false, 1),
            (true, B, false, 2),
            (false, A, false, 2),
            (true, A, true, 2),
        ];
        for (follows, next, elsewhere, want) in cases {
            let opts = DecodeOptions::default();
            let pool = OpPool::default();
            let mut o = Orderer::new(&opts, false, false, 3, &pool, DecodeStats::default());
            let mut seen = Seen::default();
            if follows {
                o.follows_loss(1);
            }
            o.stats.lost_data = 2;
            let c0 = chunk(
                vec![run(A, 10, 3, vec![enabled(10, 0x1000), lost(12, 3)])],
                None,
                None,
            );
            o.chunk(0, true, c0, None, &mut seen);
            if elsewhere {
                let c2 = chunk(
                    vec![run(
                        A,
                        15,
                        4,
                        vec![enabled(15, 0x3000), call(16, 2, 0x3010)],
                    )],
                    None,
                    None,
                );
                o.chunk(2, true, c2, None, &mut seen);
            }
            let c1 = chunk(
                vec![run(next, 20, 2, vec![lost(20, 0), enabled(20, 0x2000)])],
                None,
                None,
            );
            o.chunk(1, true, c1, None, &mut seen);
            let stats = o.finish(&mut seen);
            let gaps = seen
                .0
                .iter()
                .filter(|(_, op)| matches!(op, Op::Gap { .. }))
                .count();
            assert_eq!(
                (gaps, stats.lost_data),
                (want, want as u64),
                "{follows} {next:?} {elsewhere}"
            );
        }
    }

    #[test]
    fn per_cpu_runs_wait_for_the_watermark_and_come_out_in_time_order() {
        let opts = DecodeOptions::default();
        let pool = OpPool::default();
        let mut o = Orderer::new(&opts, false, true, 2, &pool, DecodeStats::default());
        let mut seen = Seen::default();
        // CPU 0's chunk (start 10) holds A then B; CPU 1's (start 15) A.
        let c0 = chunk(
            vec![
                run(A, 10, 1, vec![enabled(10, 0xa0)]),
                run(B, 40, 1, vec![enabled(40, 0xb0)]),
            ],
            None,
            None,
        );
        o.chunk(0, true, c0, Some(15), &mut seen);
        // Only what starts before the next chunk's start is out.
        assert_eq!(seen.0.len(), 1);
        assert_eq!(o.held_ops(), 1);
        let c1 = chunk(vec![run(A, 20, 1, vec![enabled(20, 0xa1)])], None, None);
        o.chunk(1, true, c1, None, &mut seen);
        o.finish(&mut seen);
        let order: Vec<(u32, u64)> = seen
            .0
            .iter()
            .filter(|(_, op)| matches!(op, Op::Enabled { .. }))
            .map(|(tid, op)| (*tid, op.stamp().time))
            .collect();
        assert_eq!(order, vec![(1, 10), (1, 20), (2, 40)]);
    }

    #[test]
    fn the_window_drops_ops_outside_and_restarts_with_an_enable() {
        let opts = DecodeOptions {
            start: Some(15),
            end: Some(25),
            ..DecodeOptions::default()
        };
        let pool = OpPool::default();
        let mut o = Orderer::new(&opts, false, false, 1, &pool, DecodeStats::default());
        let mut seen = Seen::default();
        let ops = vec![
            enabled(10, 0x1000),
            call(12, 1, 0x1010),
            call(16, 2, 0x1020),
            call(30, 3, 0x1030),
        ];
        o.chunk(
            0,
            true,
            chunk(vec![run(A, 10, 4, ops)], None, None),
            None,
            &mut seen,
        );
        o.finish(&mut seen);
        assert_eq!(seen.0.len(), 3, "{:?}", seen.0);
        // The first op inside the window comes after an enable at its place.
        assert!(matches!(seen.0[0].1, Op::Enabled { ip: 0x1020, .. }));
        assert!(matches!(seen.0[1].1, Op::Call { from: 0x1020, .. }));
        assert!(matches!(seen.0[2].1, Op::End { .. }));
    }
}
