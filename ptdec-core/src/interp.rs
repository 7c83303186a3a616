//! Spreading time over instructions between timing packets.
//!
//! Without CYC, Intel PT timestamps advance only at timing packets (TSC, MTC
//! every 2^mtc_period crystal ticks: a few hundred ns with perf's defaults),
//! so every call between two packets gets the same timestamp and shows in
//! Perfetto as a zero-width slice. Like magic-trace, ptdec spreads such a run
//! of branches linearly by instruction count between the timestamp they share
//! and the next, later timestamp of the same thread. Only runs of plain
//! control flow (calls, returns, jumps) are spread, and only up to the next
//! branch or trace-disable that carries a later time: time across a disable,
//! enable or gap (kernel or lost time) is never redistributed. When the
//! interval has at least one ns more than the branches spread over it, no
//! two of them share a ns (times are whole ns, and rounding would otherwise
//! give a call a few instructions long zero width); each keeps its order and
//! stays within the interval. Instruction counts (`insns`) are exact either
//! way; `--no-interpolate` turns this off.
//!
//! A jump inside one function (`Op::Jump`'s `inside`: the decode worker
//! asked the stacks' resolver) is not counted among the branches that
//! need a ns each, and takes its time by instruction count, kept between
//! the times of the counted ops around it: the decode workers leave most
//! such jumps out (`decode::runs`'s quiet jumps), the first of each run
//! in, so the times of the other ops must not depend on them. Without a
//! resolver (the library's `decode`) no jump is `inside`.
//!
//! A group (the branches that share a time) holds at most [`MAX_GROUP`]
//! ops besides jumps inside a function: the bench's traces share a time
//! among 27-93, but PT whose timing
//! packets never move the time (corrupt or hostile) would make one group
//! of the whole trace, held in memory until its end. A branch that would
//! join a full group ends it instead: the group goes on with the time it
//! has (there is no later one to spread it to), the branch starts the next
//! group, and the sink is told ([`OpSink::group_cut`]). The rule depends
//! only on the thread's ops, so it is the same for any `-j` and chunk size.
//! Jumps inside a function are not counted toward [`MAX_GROUP`] (the
//! decode workers leave most out, the first of each run in), only toward
//! the bound on all of a group's ops, [`MAX_GROUP_OPS`]: PT that reaches
//! that one (hostile) may be cut where runs begin.

use crate::model::ops::{fix, take, Op, OpSink, PerThread, Rebase};

/// The most ops a group holds besides jumps inside a function, its
/// anchor included (module doc); [`MAX_GROUP_OPS`] bounds all of them.
#[cfg(not(test))]
pub const MAX_GROUP: usize = 1 << 20;
/// [`MAX_GROUP`] in this crate's unit tests, whose random groups reach it.
#[cfg(test)]
pub const MAX_GROUP: usize = 8;

/// The most ops a group holds, the jumps inside a function among them,
/// which [`MAX_GROUP`] does not count: the decode workers leave most of
/// those out, the first of each run in, so a cut counting them would
/// land where runs begin. This bound is for PT that makes a group of
/// those alone (kept ones alternate between functions without a call):
/// only there may the cut depend on `-j` and the chunk size. 256 MiB of
/// ops per thread.
pub const MAX_GROUP_OPS: usize = 4 * MAX_GROUP;

/// A thread's group held for the time after it, and how many of its ops
/// are jumps inside a function (`is_inside`).
#[derive(Debug, Default)]
struct Group {
    ops: Vec<Op>,
    inside: usize,
}

impl Group {
    fn push(&mut self, op: Op) {
        self.inside += usize::from(is_inside(&op));
        self.ops.push(op);
    }

    /// `next`, at the anchor's time, may not join: it is counted and
    /// [`MAX_GROUP`] ops are, or [`MAX_GROUP_OPS`] ops are there in all.
    /// (A jump inside a function joins a group its counted ops fill, so
    /// that the next group's anchor is the same op with or without it.)
    fn full(&self, next: &Op) -> bool {
        let n = self.ops.len();
        full_for(n, n - self.inside, next)
    }

    fn clear(&mut self) {
        self.ops.clear();
        self.inside = 0;
    }
}

/// The rule of a full group ([`Group::full`], [`past_full`]): a group of
/// `n` ops, `counted` of them not jumps inside a function, takes no
/// `next` at its time.
#[inline]
fn full_for(n: usize, counted: usize, next: &Op) -> bool {
    n >= MAX_GROUP_OPS || (counted >= MAX_GROUP && !is_inside(next))
}

/// An [`OpSink`] adapter that assigns interpolated times, then forwards.
pub struct Interpolate<'l, S: OpSink> {
    inner: S,
    /// Per thread: the anchor op and the branches that share its time.
    pending: PerThread<Group>,
    /// See [`Interpolate::with_log`].
    log: Option<&'l mut dyn RawLog>,
    /// Per thread, with a log: the latest raw time it was told.
    latest: PerThread<u64>,
    /// With a log, in [`Interpolate::spread_run_as`]: where each piece of
    /// the run ends and the latest time after it, to hand on once the run
    /// is spread.
    pieces: Vec<(usize, u64)>,
}

/// What `report --slowest` learns while times are spread
/// (`report::RawTimes`): the latest raw time decoded (the timing
/// packet's, before spreading), as it is when each op goes on. That is
/// the latest time of the ops up to the one that released the op (the
/// first op after its group that does not join it; an op in no group
/// releases itself), marks left out; with the latest time and its call's
/// raw time (`Op::Call`'s `raw_time`), a slice knows the window of trace
/// that decodes it whole.
pub trait RawLog {
    /// The latest raw time of thread (pid, tid) is `time` now.
    fn latest(&mut self, pid: u32, tid: u32, time: u64);
}

/// An op's raw time as the latest time counts it (marks are not counted).
fn counted_time(op: &Op) -> Option<u64> {
    (!matches!(op, Op::Mark { .. })).then(|| op.stamp().time)
}

fn is_branch(op: &Op) -> bool {
    matches!(op, Op::Call { .. } | Op::Return { .. } | Op::Jump { .. })
}

/// Branches and marks (PTWRITE, power, events) between two timing
/// packets are spread alike, so a mark keeps its place among the calls.
fn spreads(op: &Op) -> bool {
    is_branch(op) || matches!(op, Op::Mark { .. })
}

impl<'l, S: OpSink> Interpolate<'l, S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Interpolate {
            inner,
            pending: PerThread::default(),
            log: None,
            latest: PerThread::default(),
            pieces: Vec::new(),
        }
    }

    /// Wraps `inner`, telling `log` the raw times ([`RawLog`]). The ops go
    /// on as they would without it, in more pieces: those released before
    /// the latest time changes go on before it does.
    pub fn with_log(inner: S, log: &'l mut dyn RawLog) -> Self {
        Interpolate {
            log: Some(log),
            ..Interpolate::new(inner)
        }
    }

    /// Ops of thread (pid, tid) held for the time after them.
    pub fn held(&self, pid: u32, tid: u32) -> usize {
        self.pending
            .find(pid, tid)
            .map_or(0, |i| self.pending.items[i].ops.len())
    }

    /// The inner sink; what is held is dropped.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// Forwards what is still held and returns the inner sink.
    pub fn finish(mut self) -> S {
        for ((pid, tid), i) in self.pending.sorted() {
            for op in std::mem::take(&mut self.pending.items[i].ops) {
                self.inner.op(pid, tid, op);
            }
        }
        self.inner
    }
}

/// Division by one divisor, many times, as a multiplication: `p / d`
/// for a group's instruction span `d` and each op's product `p`. A
/// division per op waited on the divider: two thirds of
/// [`spread`]'s samples sat on the instruction after it (`perf record -e
/// cpu-clock`, `ptdec report` on the bench's 10 MB interp trace, one
/// core), where a multiplication takes a few cycles.
///
/// Exact where `p` and `d` fit in 32 bits (on the bench's traces, whose
/// timing packets come a few hundred ns apart, they do; a product past
/// 2^32, as sparse timing can make, divides): with `m = ceil(2^64 / d)`, `m·d =
/// 2^64 + e` for an `e < d`, so `p·m / 2^64 = p/d + p·e/(d·2^64)`, whose
/// second term is below `2^32/2^64 <= 1/d`, while `p/d` lies at least
/// `1/d` below the next whole number: the whole part is `p / d`'s. (The
/// standard reciprocal of division by invariant integers, Granlund and
/// Montgomery 1994; hand-written, as it is these few lines.)
#[derive(Debug, Clone, Copy)]
struct Quotient {
    d: u64,
    /// `ceil(2^64 / d)` where `2 <= d < 2^32`, else 0 (divide).
    m: u64,
}

impl Quotient {
    fn by(d: u64) -> Quotient {
        let m = if (2..=u64::from(u32::MAX)).contains(&d) {
            u64::MAX / d + 1
        } else {
            0
        };
        Quotient { d, m }
    }

    /// `p / d`.
    #[inline(always)]
    fn of(self, p: u64) -> u64 {
        if self.m != 0 && p <= u64::from(u32::MAX) {
            ((u128::from(p) * u128::from(self.m)) >> 64) as u64
        } else {
            p / self.d
        }
    }
}

/// Spreads the times of `group[1..]` between `group[0]` (the anchor) and
/// `next` by instruction count. A jump inside a function (`Op::Jump`'s
/// `inside`) is not counted among the group's branches (module doc): it
/// takes its time by instruction count too, kept between the times of
/// the counted ops around it, and moves none of theirs.
fn spread(group: &mut [Op], next: &Op) {
    let (Some(first), Some(_)) = (group.first(), group.get(1)) else {
        return;
    };
    let (a, b) = (first.stamp(), next.stamp());
    if b.time <= a.time || b.insns <= a.insns {
        return;
    }
    let (dt, di) = (b.time - a.time, b.insns - a.insns);
    // Rounding down to whole ns gives branches a few instructions apart the
    // same time, and their calls zero width. When the interval has a ns for
    // each branch counted (`distinct`), no two share one: each is moved up
    // past the one before it, then down below the one after it (and below
    // `next`). Counted only when the interval is short for the group.
    let distinct = dt > (group.len() - 1) as u64
        || dt > group[1..].iter().filter(|op| !is_inside(op)).count() as u64;
    let mut prev = a.time;
    let by_di = Quotient::by(di);
    // In place, without a vector of times (the profile showed its
    // allocation per group) and in 64 bits where the product fits (the
    // 128-bit division showed too): the same whole ns either way. The
    // move up is done in the same pass.
    for op in group[1..].iter_mut() {
        let i = op.stamp().insns.clamp(a.insns, b.insns) - a.insns;
        let t = match i.checked_mul(dt) {
            Some(p) => a.time + by_di.of(p),
            None => (a.time as u128 + i as u128 * dt as u128 / di as u128) as u64,
        };
        let mut t = t.min(b.time);
        if distinct {
            if is_inside(op) {
                // No later than the next counted op: it gets prev + 1 or
                // more, from instructions no fewer.
                t = t.max(prev);
            } else {
                t = t.max(prev + 1);
                prev = t;
            }
        }
        op.stamp_mut().time = t;
    }
    // The counted times rise strictly now: only a tail that reached
    // `next`'s time moves down (most groups have none: one pass, not two),
    // a jump inside a function to no later than the counted op after it.
    if !distinct || prev < b.time {
        return;
    }
    let mut after = b.time;
    for op in group[1..].iter_mut().rev() {
        let inside = is_inside(op);
        let t = &mut op.stamp_mut().time;
        if inside {
            *t = (*t).min(after);
        } else {
            *t = (*t).min(after - 1);
            after = *t;
        }
    }
}

/// Whether `op` is a jump inside a function, which the spreading does
/// not count ([`spread`]).
#[inline]
fn is_inside(op: &Op) -> bool {
    matches!(op, Op::Jump { inside: true, .. })
}

/// Tells `inner` a full group was ended: out of line, so that the loops
/// that join ops to groups keep their registers (inlined, the sink's map
/// made `Interpolate::run_ops` 5 instructions an op dearer on the real
/// LLDB row, where nearly every op joins a group).
#[cold]
#[inline(never)]
fn group_cut<S: OpSink>(inner: &mut S, pid: u32, tid: u32) {
    inner.group_cut(pid, tid);
}

/// What `next` does to the thread's `group`: `false`, it joins it (a
/// branch or mark at the anchor's time); otherwise the group is spread up
/// to `next` where that is due and handed to `inner`, and `true`.
fn end_group<S: OpSink>(inner: &mut S, pid: u32, tid: u32, group: &mut Group, next: &Op) -> bool {
    let Some(anchor) = group.ops.first() else {
        return true;
    };
    if joins(anchor, next) {
        if !group.full(next) {
            return false;
        }
        group_cut(inner, pid, tid);
    }
    if spreads_up_to(next) {
        spread(&mut group.ops, next);
    }
    // Together: as one by one, without a call per op.
    inner.ops(pid, tid, &mut group.ops);
    group.clear();
    true
}

impl<S: OpSink> Interpolate<'_, S> {
    /// The index of thread (pid, tid)'s group, made when new.
    fn group_of(&mut self, pid: u32, tid: u32) -> usize {
        self.pending.slot(pid, tid)
    }

    /// What `op` does to each op of `ops`, each fixed by `fix` first, with
    /// the groups inside `ops` spread where they lie: the ops go on in
    /// the order they came (a group is handed on when the op after it
    /// comes, before that op), so only the group held from before and the
    /// one still open at the end move; they are taken into the thread's
    /// group (placeholders stay behind). The ops in the range returned go
    /// on next, in order; the group held from before has gone on already.
    fn spread_run(
        &mut self,
        pid: u32,
        tid: u32,
        ops: &mut [Op],
        fix: impl Fn(&mut Op),
    ) -> std::ops::Range<usize> {
        match self.log.is_some() {
            false => self.spread_run_as::<false>(pid, tid, ops, fix),
            true => self.spread_run_as::<true>(pid, tid, ops, fix),
        }
    }

    /// [`Interpolate::spread_run`], telling the log when `LOG` (a
    /// constant: the spreading without one pays no test per op). With a
    /// log, the ops released before the latest time changes go on before
    /// it changes, and the range returned starts after them.
    fn spread_run_as<const LOG: bool>(
        &mut self,
        pid: u32,
        tid: u32,
        ops: &mut [Op],
        fix: impl Fn(&mut Op),
    ) -> std::ops::Range<usize> {
        let gi = self.group_of(pid, tid);
        let li = if LOG { self.latest.slot(pid, tid) } else { 0 };
        let Interpolate {
            inner,
            pending,
            log,
            latest: latests,
            pieces,
        } = self;
        let mut latest = if LOG { latests.items[li] } else { 0 };
        let group = &mut pending.items[gi];
        // The ops that join the group held from the last call go into it;
        // the first that does not ends it. Times are spread by the fixed
        // stamps: `ops[..fixed]` are fixed.
        let mut s = 0;
        let mut fixed = 0;
        // With a log: `ops[..handed]` have gone on.
        let mut handed = 0;
        if let Some(anchor) = group.ops.first() {
            // Up to a full group: the op after ends it ([`end_group`]).
            // (Joined: the anchor's time, or a mark; the latest time
            // stays.)
            let anchor_time = anchor.stamp().time;
            while s < ops.len()
                && spreads(&ops[s])
                && ops[s].stamp().time == anchor_time
                && !group.full(&ops[s])
            {
                fix(&mut ops[s]);
                group.push(take(&mut ops[s]));
                s += 1;
            }
            let Some(next) = ops.get_mut(s) else {
                if LOG {
                    latests.items[li] = latest;
                }
                return s..s;
            };
            fix(next);
            fixed = s + 1;
            if LOG {
                if let Some(t) = log_op(next, latest) {
                    latest = t;
                    log_latest(log, pid, tid, t);
                }
            }
            end_group(inner, pid, tid, group, next);
        }
        handed = handed.max(s);
        // With a log, the pieces are noted and go on after the pass (the
        // spreading never touches an op again once it is in a piece): in
        // the pass, the stacks' work between pieces made its first reads
        // of each op wait on memory twice as long as without a log.
        let first = handed;
        pieces.clear();
        // The rest, in place: `open` is where the group being gathered
        // starts (its anchor), with the anchor's time and the index the
        // group is full at (in locals: `joins` and `k - a` on the anchor
        // made the loop 6 instructions an op dearer where nearly every op
        // joins, as on the real LLDB row).
        let mut open: Option<usize> = None;
        let (mut anchor_time, mut full_at) = (0, 0);
        // Past `full_at`: what [`past_full`] counted of the open group.
        let mut tally = Counted::default();
        for k in s..ops.len() {
            if k >= fixed {
                fix(&mut ops[k]);
            }
            if LOG && k >= fixed {
                if let Some(t) = log_op(&ops[k], latest) {
                    // What was released before `ops[k]` goes on first;
                    // the open group is released by it (or joined).
                    handed = handed.max(open.unwrap_or(k));
                    pieces.push((handed, t));
                    latest = t;
                }
            }
            if let Some(a) = open {
                if spreads(&ops[k]) && ops[k].stamp().time == anchor_time {
                    if k < full_at {
                        continue;
                    }
                    if let Some(at) = past_full(ops, a, k, &mut tally) {
                        full_at = at;
                        continue;
                    }
                    group_cut(inner, pid, tid);
                }
                if spreads_up_to(&ops[k]) {
                    let (before, from) = ops.split_at_mut(k);
                    spread(&mut before[a..], &from[0]);
                }
                open = None;
            }
            if matches!(ops[k], Op::Enabled { .. }) || is_branch(&ops[k]) {
                open = Some(k);
                anchor_time = ops[k].stamp().time;
                full_at = k + MAX_GROUP;
                tally = Counted { n: 0, to: k };
            }
        }
        if LOG {
            latests.items[li] = latest;
            let mut from = first;
            for &(to, t) in pieces.iter() {
                if to > from {
                    inner.ops_in_place(pid, tid, &mut ops[from..to]);
                    from = to;
                }
                log_latest(log, pid, tid, t);
            }
        }
        // The group still open waits for the op after it.
        let end = open.unwrap_or(ops.len());
        let group = &mut pending.items[gi];
        for op in &mut ops[end..] {
            group.push(take(op));
        }
        handed..end
    }
}

/// The ops of a group other than jumps inside a function, `n` of them
/// before index `to` ([`past_full`]).
#[derive(Default, Clone, Copy)]
struct Counted {
    n: usize,
    to: usize,
}

/// The group `ops[a..k]`, of MAX_GROUP ops or more, and `ops[k]` at its
/// time: `None` when the group is full for it ([`Group::full`]'s rule),
/// else the index to look again at. Counts each op once, in `tally`.
/// Out of line: in the pass over a run, its state made every op dearer
/// (15 instructions an op on the bench's interp trace).
#[cold]
#[inline(never)]
fn past_full(ops: &[Op], a: usize, k: usize, tally: &mut Counted) -> Option<usize> {
    let from = tally.to.max(a);
    tally.n += ops[from..k].iter().filter(|op| !is_inside(op)).count();
    tally.to = k;
    let counted = tally.n;
    if full_for(k - a, counted, &ops[k]) {
        return None;
    }
    Some(match counted < MAX_GROUP {
        true => (k + MAX_GROUP - counted).min(a + MAX_GROUP_OPS),
        false => k + 1,
    })
}

/// `Some(t)` when the latest time moves on to `t` with `op` (fixed):
/// tell the log with [`log_latest`] once what was released before it has
/// gone on.
#[inline]
fn log_op(op: &Op, latest: u64) -> Option<u64> {
    counted_time(op).filter(|&t| t > latest)
}

/// Tells `log` the latest time.
fn log_latest(log: &mut Option<&mut dyn RawLog>, pid: u32, tid: u32, t: u64) {
    if let Some(log) = log.as_deref_mut() {
        log.latest(pid, tid, t);
    }
}

/// Whether `op` joins a group anchored at `anchor`: a branch or mark at
/// its time.
fn joins(anchor: &Op, op: &Op) -> bool {
    spreads(op) && op.stamp().time == anchor.stamp().time
}

/// Whether a group that `next` ends is spread up to it: time is spread up
/// to a later branch or mark, or a disable, never across an enable or gap.
fn spreads_up_to(next: &Op) -> bool {
    spreads(next) || matches!(next, Op::Disabled { .. })
}

impl<S: OpSink> OpSink for Interpolate<'_, S> {
    fn op(&mut self, pid: u32, tid: u32, op: Op) {
        if self.log.is_some() {
            let li = self.latest.slot(pid, tid);
            if let Some(t) = log_op(&op, self.latest.items[li]) {
                self.latest.items[li] = t;
                log_latest(&mut self.log, pid, tid, t);
            }
        }
        let i = self.group_of(pid, tid);
        let group = &mut self.pending.items[i];
        if !end_group(&mut self.inner, pid, tid, group, &op) {
            group.push(op);
            return;
        }
        if matches!(op, Op::Enabled { .. }) || is_branch(&op) {
            group.push(op);
        } else {
            self.inner.op(pid, tid, op);
        }
    }

    /// What `op` does to each op of `ops[skip..]`, each stamp fixed
    /// first, with the groups inside `ops` spread where they lie
    /// ([`Interpolate::spread_run`]).
    fn run_ops(
        &mut self,
        pid: u32,
        tid: u32,
        ops: &mut Vec<Op>,
        skip: usize,
        rebase: Option<Rebase>,
    ) {
        let go = self.spread_run(pid, tid, &mut ops[skip..], |op| fix(rebase, op));
        // What was held is placeholders now.
        ops.truncate(skip + go.end);
        self.inner.run_ops(pid, tid, ops, skip + go.start, None);
        ops.clear();
    }

    fn ops_in_place(&mut self, pid: u32, tid: u32, ops: &mut [Op]) {
        let go = self.spread_run(pid, tid, ops, |_| {});
        if !go.is_empty() {
            self.inner.ops_in_place(pid, tid, &mut ops[go]);
        }
    }

    /// The stretch's first op ends the thread's group, as it would if it
    /// came: the group is spread and handed on, then the stretch. Unless
    /// that op would join the group (the same time): then `false`, and
    /// the ops come one by one.
    fn stretch(
        &mut self,
        pid: u32,
        tid: u32,
        stretch: Box<crate::model::ops::Ahead>,
        base: crate::model::ops::Base,
    ) -> bool {
        // A log sees every op: the ops come one by one.
        if self.log.is_some() {
            return false;
        }
        if let Some(i) = self.pending.find(pid, tid) {
            let mut lead = stretch.lead.clone();
            *lead.stamp_mut() = base.stamp(lead.stamp());
            if !end_group(&mut self.inner, pid, tid, &mut self.pending.items[i], &lead) {
                return false;
            }
        }
        self.inner.stretch(pid, tid, stretch, base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ops::Stamp;

    #[derive(Default)]
    struct Collect(Vec<(u32, Op)>);
    impl OpSink for Collect {
        fn op(&mut self, _pid: u32, tid: u32, op: Op) {
            self.0.push((tid, op));
        }
    }

    fn at(time: u64, insns: u64) -> Stamp {
        Stamp {
            time,
            insns,
            cycles: crate::model::ops::Cycles::NONE,
        }
    }
    fn call(time: u64, insns: u64) -> Op {
        Op::Call {
            at: at(time, insns),
            from: 1,
            to: 2,
            ret: 3,
            raw_time: time,
        }
    }
    fn times(c: &Collect) -> Vec<u64> {
        c.0.iter().map(|(_, o)| o.stamp().time).collect()
    }

    /// The reciprocal gives every quotient division gives: divisors at
    /// the edges (2, powers of two, 2^32 - 1, 1, 2^32 and above, which
    /// divide) and at random, products at the edges and at random.
    #[test]
    fn quotient_by_reciprocal_is_division() {
        let mut rng = fastrand::Rng::with_seed(0x51ed_270b_2b1c_93d1);
        let u32max = u64::from(u32::MAX);
        let mut ds = vec![
            1,
            2,
            3,
            7,
            1 << 16,
            (1 << 31) + 1,
            u32max - 1,
            u32max,
            u32max + 1,
        ];
        ds.extend((0..2000).map(|_| rng.u64(2..=u32max)));
        ds.extend((0..200).map(|_| rng.u64(2..1000)));
        for d in ds {
            let q = Quotient::by(d);
            let mut ps = vec![
                0,
                1,
                d - 1,
                d,
                d + 1,
                u32max - 1,
                u32max,
                u32max + 1,
                u64::MAX,
            ];
            ps.extend((0..500).map(|_| rng.u64(..=u32max)));
            ps.extend((0..50).map(|_| rng.u64(..)));
            // The largest multiple of d that fits, and one below it.
            let top = (u32max / d) * d;
            ps.extend([top, top.saturating_sub(1)]);
            for p in ps {
                assert_eq!(q.of(p), p / d, "{p} / {d}");
            }
        }
    }

    /// Jumps inside a function (`inside`) move no other op's time: random
    /// groups spread whole and with a random part of their inside jumps
    /// left out give the other ops the same times. Every time stays in
    /// `[anchor, next]` and rises with the ops; where the interval has a
    /// ns for each branch counted, the counted ones get one each, though
    /// the inside jumps alone would leave too few.
    #[test]
    fn inside_jumps_move_no_other_time() {
        // Its own test, not the one under test.
        let inside = |op: &Op| matches!(op, Op::Jump { inside: true, .. });
        let mut rng = fastrand::Rng::with_seed(0x6a09_e667_f3bc_c908);
        for _ in 0..3000 {
            let (t0, i0) = (rng.u64(0..1000), rng.u64(0..1000));
            let n = rng.usize(1..40);
            let mut insns = i0;
            let mut group = vec![call(t0, i0)];
            for _ in 0..n {
                insns += rng.u64(0..6);
                let op = match rng.u8(0..4) {
                    0 => call(t0, insns),
                    1 => Op::Jump {
                        at: at(t0, insns),
                        from: 1,
                        to: 2,
                        inside: false,
                    },
                    _ => Op::Jump {
                        at: at(t0, insns),
                        from: 1,
                        to: 2,
                        inside: true,
                    },
                };
                group.push(op);
            }
            let next = call(t0 + rng.u64(1..60), insns + rng.u64(1..20));
            let keep: Vec<bool> = (0..group.len())
                .map(|i| i == 0 || !inside(&group[i]) || rng.bool())
                .collect();
            let mut fewer: Vec<Op> = group
                .iter()
                .zip(&keep)
                .filter(|(_, k)| **k)
                .map(|(op, _)| op.clone())
                .collect();
            spread(&mut group, &next);
            spread(&mut fewer, &next);
            let kept: Vec<&Op> = group
                .iter()
                .zip(&keep)
                .filter(|(_, k)| **k)
                .map(|(o, _)| o)
                .collect();
            for (a, b) in kept.iter().zip(&fewer) {
                if !inside(a) {
                    assert_eq!(a.stamp().time, b.stamp().time, "{group:?}\n{fewer:?}");
                }
            }
            for g in [&group, &fewer] {
                let ts: Vec<u64> = g.iter().map(|o| o.stamp().time).collect();
                assert!(ts.windows(2).all(|w| w[0] <= w[1]), "{ts:?}");
                assert!(
                    ts.iter().all(|&t| t0 <= t && t <= next.stamp().time),
                    "{ts:?}"
                );
                let counted: Vec<u64> = g[1..]
                    .iter()
                    .filter(|o| !inside(o))
                    .map(|o| o.stamp().time)
                    .collect();
                let dt = next.stamp().time - t0;
                if dt > counted.len() as u64 {
                    let mut all = vec![t0];
                    all.extend(&counted);
                    all.push(next.stamp().time);
                    assert!(all.windows(2).all(|w| w[0] < w[1]), "{all:?}");
                }
            }
        }
    }

    #[test]
    fn branches_sharing_a_timestamp_are_spread_by_instructions() {
        let mut s = Interpolate::new(Collect::default());
        s.op(
            1,
            1,
            Op::Enabled {
                at: at(100, 0),
                ip: 0,
                first: true,
            },
        );
        s.op(1, 1, call(100, 10));
        s.op(1, 1, call(100, 30));
        s.op(1, 1, call(200, 40)); // next timing packet seen
        s.op(1, 1, call(200, 50));
        s.op(1, 1, Op::End { at: at(200, 60) });
        let c = s.finish();
        assert_eq!(times(&c), [100, 125, 175, 200, 200, 200]);
    }

    #[test]
    fn branches_close_together_get_distinct_times_when_there_is_room() {
        let mut s = Interpolate::new(Collect::default());
        // Four branches within 12 of 1000 instructions over 10 ns: by
        // proportion all would round to 100.
        s.op(1, 1, call(100, 0));
        s.op(1, 1, call(100, 3));
        s.op(1, 1, call(100, 6));
        s.op(1, 1, call(100, 9));
        s.op(1, 1, call(110, 1000));
        let c = s.finish();
        assert_eq!(times(&c), [100, 101, 102, 103, 110]);

        // No room (3 ns for 3 branches): proportional, ties stay.
        let mut s = Interpolate::new(Collect::default());
        s.op(1, 1, call(100, 0));
        s.op(1, 1, call(100, 1));
        s.op(1, 1, call(100, 2));
        s.op(1, 1, call(100, 999));
        s.op(1, 1, call(103, 1000));
        let c = s.finish();
        assert_eq!(times(&c), [100, 100, 100, 102, 103]);

        // Late branches are moved down below the next timestamp.
        let mut s = Interpolate::new(Collect::default());
        s.op(1, 1, call(100, 0));
        s.op(1, 1, call(100, 998));
        s.op(1, 1, call(100, 999));
        s.op(1, 1, call(105, 1000));
        let c = s.finish();
        assert_eq!(times(&c), [100, 103, 104, 105]);
    }

    #[test]
    fn time_across_a_disable_is_never_spread() {
        let mut s = Interpolate::new(Collect::default());
        s.op(1, 1, call(100, 10));
        s.op(1, 1, call(100, 20));
        s.op(
            1,
            1,
            Op::Disabled {
                at: at(100, 30),
                ip: 5,
                kernel: true,
            },
        );
        s.op(
            1,
            1,
            Op::Enabled {
                at: at(900, 30),
                ip: 7,
                first: false,
            },
        );
        s.op(1, 1, call(900, 35));
        s.op(
            1,
            1,
            Op::Gap {
                at: at(1000, 40),
                kind: crate::model::ops::GapKind::Overflow,
                offset: 0,
            },
        );
        let c = s.finish();
        assert_eq!(times(&c), [100, 100, 100, 900, 900, 1000]);
    }

    #[test]
    fn threads_are_kept_apart_and_flushed_at_the_end() {
        let mut s = Interpolate::new(Collect::default());
        s.op(1, 1, call(100, 0));
        s.op(1, 2, call(500, 0));
        s.op(1, 1, call(100, 5));
        s.op(1, 2, call(600, 10));
        s.op(1, 1, call(110, 10));
        let c = s.finish();
        let t1: Vec<u64> =
            c.0.iter()
                .filter(|(t, _)| *t == 1)
                .map(|(_, o)| o.stamp().time)
                .collect();
        let t2: Vec<u64> =
            c.0.iter()
                .filter(|(t, _)| *t == 2)
                .map(|(_, o)| o.stamp().time)
                .collect();
        assert_eq!(t1, [100, 105, 110]);
        assert_eq!(t2, [500, 600]);
    }

    /// What went on, and how many groups were cut full.
    #[derive(Default)]
    struct Cuts {
        ops: Vec<Op>,
        cuts: usize,
    }
    impl OpSink for Cuts {
        fn op(&mut self, _pid: u32, _tid: u32, op: Op) {
            self.ops.push(op);
        }
        fn group_cut(&mut self, _pid: u32, _tid: u32) {
            self.cuts += 1;
        }
    }

    /// `input` of thread (1, 1) through the spreading one op at a time.
    fn one_by_one(input: &[Op]) -> Cuts {
        let mut one = Interpolate::new(Cuts::default());
        for op in input.iter().cloned() {
            one.op(1, 1, op);
        }
        one.finish()
    }

    /// `input` of thread (1, 1) through the spreading as two runs, cut
    /// before `cut`.
    fn in_two_runs(input: &[Op], cut: usize) -> Cuts {
        let mut runs = Interpolate::new(Cuts::default());
        let (a, b) = input.split_at(cut);
        runs.run_ops(1, 1, &mut a.to_vec(), 0, None);
        runs.run_ops(1, 1, &mut b.to_vec(), 0, None);
        runs.finish()
    }

    /// A group holds at most MAX_GROUP ops: a branch at the time of a full
    /// group ends it, the group keeps its time (nothing later to spread it
    /// to), the branch anchors the next group, which is spread as any;
    /// the sink is told once. One by one and in one run alike.
    #[test]
    fn a_full_group_ends_and_keeps_its_time() {
        let n = MAX_GROUP as u64 + 3;
        let mut input: Vec<Op> = (0..n).map(|k| call(100, 10 * k)).collect();
        input.push(call(200, 10 * n));
        let mut want: Vec<u64> = vec![100; MAX_GROUP];
        want.extend([100, 133, 166, 200]);
        let one = one_by_one(&input);
        let times = |ops: &[Op]| ops.iter().map(|o| o.stamp().time).collect::<Vec<_>>();
        assert_eq!(times(&one.ops), want);
        assert_eq!(one.cuts, 1);
        for cut in [1, MAX_GROUP - 1, MAX_GROUP, MAX_GROUP + 1, input.len()] {
            let runs = in_two_runs(&input, cut);
            assert_eq!(runs.ops, one.ops, "cut at {cut}");
            assert_eq!(runs.cuts, 1, "cut at {cut}");
        }
        // Time that never moves: groups of MAX_GROUP, none spread.
        let mut flat = Interpolate::new(Cuts::default());
        let mut all: Vec<Op> = (0..5 * MAX_GROUP as u64 + 1)
            .map(|k| call(100, k))
            .collect();
        flat.ops(1, 1, &mut all);
        assert!(flat.held(1, 1) <= MAX_GROUP);
        let flat = flat.finish();
        assert_eq!(flat.cuts, 5);
        assert!(flat.ops.iter().all(|o| o.stamp().time == 100));
    }

    /// A group is cut where its ops other than jumps inside a function
    /// reach MAX_GROUP, so the cut and every other op's time do not
    /// depend on which of those jumps are there (the decode workers leave
    /// some out, by where runs begin); one by one or in runs cut anywhere.
    /// A group of such jumps alone ends at MAX_GROUP_OPS.
    #[test]
    fn a_group_is_cut_where_its_counted_ops_fill_it() {
        let inside = |time: u64, insns: u64| Op::Jump {
            at: at(time, insns),
            from: 1,
            to: 2,
            inside: true,
        };
        let mut rng = fastrand::Rng::with_seed(0xbb67_ae85_84ca_a73b);
        for _ in 0..200 {
            // Calls at one time, past two full groups, with inside jumps
            // between them, then a later call.
            let mut full: Vec<Op> = Vec::new();
            let mut insns = 0;
            let calls = 2 * MAX_GROUP + rng.usize(0..MAX_GROUP);
            for _ in 0..calls {
                insns += 1 + rng.u64(0..3);
                full.push(call(100, insns));
                for _ in 0..rng.usize(0..3) {
                    insns += 1;
                    full.push(inside(100, insns));
                }
            }
            insns += 5;
            full.push(call(100 + rng.u64(1..40), insns));
            let fewer: Vec<Op> = full
                .iter()
                .filter(|op| !is_inside(op) || rng.bool())
                .cloned()
                .collect();
            let counted = |ops: &[Op]| -> Vec<(u64, u64)> {
                ops.iter()
                    .filter(|op| !is_inside(op))
                    .map(|op| (op.stamp().insns, op.stamp().time))
                    .collect()
            };
            let mut outs = Vec::new();
            for input in [&full, &fewer] {
                let one = one_by_one(input);
                let cut = rng.usize(0..=input.len());
                let runs = in_two_runs(input, cut);
                assert_eq!(runs.ops, one.ops, "cut at {cut}");
                assert_eq!(runs.cuts, one.cuts, "cut at {cut}");
                outs.push((counted(&one.ops), one.cuts));
            }
            assert_eq!(outs[0], outs[1]);
            assert_eq!(outs[0].1, (calls - 1) / MAX_GROUP);
        }
        // Inside jumps alone at one time: groups of MAX_GROUP_OPS.
        let mut flat = Interpolate::new(Cuts::default());
        let mut all: Vec<Op> = (0..3 * MAX_GROUP_OPS as u64 + 1)
            .map(|k| if k == 0 { call(100, 0) } else { inside(100, k) })
            .collect();
        flat.ops(1, 1, &mut all);
        assert!(flat.held(1, 1) <= MAX_GROUP_OPS);
        assert_eq!(flat.finish().cuts, 3);
    }

    /// `ops` (the groups spread where they lie) gives what `op` gives one
    /// by one, however the ops are cut into calls and threads interleave:
    /// random ops of every kind, times that repeat (groups) and rise
    /// (spreads), cut at random.
    #[test]
    fn ops_in_batches_come_out_as_one_by_one() {
        let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
        let mut rnd = move |n: u64| rng.u64(..n);
        for _ in 0..300 {
            let mut input: Vec<(u32, Op)> = Vec::new();
            let (mut t, mut n) = ([100u64; 3], [0u64; 3]);
            for _ in 0..rnd(80) {
                let tid = 1 + rnd(2) as u32;
                let k = tid as usize;
                // A new time now and then (a timing packet), a large or
                // a tiny step, so that spreads with and without a ns per
                // branch both come.
                match rnd(6) {
                    0 => t[k] += 1 + rnd(3),
                    1 => t[k] += 1000,
                    _ => {}
                }
                n[k] += 1 + rnd(40);
                let a = at(t[k], n[k]);
                let op = crate::model::ops::test_op(rnd(9), a);
                input.push((tid, op));
            }
            let mut one = Interpolate::new(Collect::default());
            for (tid, op) in input.clone() {
                one.op(1, tid, op);
            }
            let mut batched = Interpolate::new(Collect::default());
            // And as the ordering stage hands runs on: after ops it skips,
            // their instructions counted from the run's start.
            let mut based = Interpolate::new(Collect::default());
            let mut i = 0;
            while i < input.len() {
                // A run of one thread's ops, cut at random.
                let tid = input[i].0;
                let mut j = i;
                let cut = i + 1 + rnd(12) as usize;
                while j < input.len() && j < cut && input[j].0 == tid {
                    j += 1;
                }
                let mut ops: Vec<Op> = input[i..j].iter().map(|(_, o)| o.clone()).collect();
                let base = ops.iter().map(|o| o.stamp().insns).min().unwrap_or(0);
                let skip = rnd(3) as usize;
                let mut run: Vec<Op> = (0..skip).map(|_| call(1, 1)).collect();
                run.extend(ops.iter().cloned().map(|mut o| {
                    o.stamp_mut().insns -= base;
                    o
                }));
                batched.ops(1, tid, &mut ops);
                assert!(ops.is_empty());
                let fix = Rebase {
                    insns: base,
                    cycles: None,
                };
                based.run_ops(1, tid, &mut run, skip, Some(fix));
                assert!(run.is_empty());
                i = j;
            }
            let one = one.finish().0;
            assert_eq!(batched.finish().0, one, "{input:?}");
            assert_eq!(based.finish().0, one, "{input:?}");
        }
    }
}
