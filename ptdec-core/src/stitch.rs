//! Call stacks built on the decode workers, stitched in order: the first
//! step of every stage running per chunk (DESIGN.md, "Decoding at any
//! size"). A worker that decoded a run of a thread's ops also spreads their
//! times ([`Interpolate`]) and runs them through a [`ThreadStack`] in
//! speculative mode ([`speculate`]), which starts above the thread's
//! unknown entry stack, records what it assumes about it and gives up
//! where it cannot decide without it. The calling thread, which has the
//! real stack, checks the assumptions and applies the outcome in one step
//! ([`ThreadStack::apply`]), or, when any fails, feeds the ops one by one
//! as before. So the output is that of the sequential stacks, byte for
//! byte, for any `-j` and chunk size; only who does the work changes.
//!
//! # Which ops a worker's stack takes
//!
//! A run's ops `[0, from)`, its *head*, go through the calling thread as
//! before: the first op may be a sync `Enabled` the ordering stage drops,
//! a restated CBR there may be dropped too, and the time spreading groups
//! the first ops with the previous chunk's last ones. `from` is the first
//! op after those that ends any group before it: one that is never spread
//! (an enable or disable), or one later than every op before it in the
//! run (the calling thread checks that it is later than the group it
//! holds, too). From there the worker's spreading is the calling
//! thread's. The ops still grouped when the run ends, its *tail*
//! `[to, len)`, wait for the next run's times: they go through the calling
//! thread too. The stack takes `[from, to)`.
//!
//! # What the stack assumes ([`crate::stack::Entry`])
//!
//! Tracing is on where the stretch begins; a return that matches none of
//! its own frames returns from the next entry frame (exact return
//! address), or, when its own top frame returns elsewhere than its call's
//! return address, to the highest entry frame running the function
//! returned into; an entry frame's function, when asked, is the one the
//! thread runs in; a jump or resume into the middle of another function
//! finds no entry frame running it (or, once the stitch has seen one,
//! the highest one: [`Hints`]); a tail call out of an entry frame inherits
//! its return address; the entry frames it may touch exist and began
//! before its first stamp (so no slice ties with them, and clamping
//! changes nothing). It gives up at a gap, the end and a restart.
//!
//! Not used (everything goes through the calling thread): one worker (the
//! calling thread's stacks then run beside it as a pipeline stage),
//! per-cpu buffers (a thread's runs interleave across buffers), a time
//! window, `report --slowest` (its tap sees each op), `ptdec raw`, and a
//! thread's first run.

use sideband::timeline::TaskId;

use crate::interp::Interpolate;
use crate::model::ops::{Ahead, Op, OpSink, Prepare, Preparer, ThreadStats};
use crate::model::slices::Resolver;
use crate::stack::{Declined, Learned, ThreadStack};

/// Fewer ops than this between a run's head and tail are not worth the
/// checks: they go through the calling thread.
const MIN_OPS: usize = 64;

/// What a worker built ahead over a stretch of a run's ops (the
/// [`Ahead::built`] of the stacks stage): the speculative stack after them.
#[derive(Debug)]
pub struct Stretch {
    pub stack: ThreadStack,
    /// Ops the stack took (marks not counted).
    pub stack_ops: u64,
}

/// What the stitch learned for the workers' next stacks ([`Declined`]):
/// functions a jump or resume into their middle found in an entry frame
/// (C++ landing pads, longjmp targets), and return targets no entry frame
/// returns to exactly (unwinding, `ptsim --repeat`'s rewinds), which a
/// speculative stack then assumes ([`ThreadStack::speculative`]).
/// Whatever it holds, the output is the same: only how much the workers
/// build changes.
#[derive(Debug, Default)]
pub struct Hints {
    learned: std::sync::Mutex<Learned>,
}

/// Functions learned at most (a few landing pads in practice).
const MAX_HINTS: usize = 64;

impl Hints {
    /// What was learned so far.
    pub fn learned(&self) -> Learned {
        self.learned.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Learns why a speculative stack was declined.
    pub fn learn(&self, d: &Declined) {
        let Ok(mut guard) = self.learned.lock() else {
            return;
        };
        let l = &mut *guard;
        for (list, v) in [(&mut l.below, d.below), (&mut l.ret, d.ret)] {
            if let Some(v) = v {
                if !list.contains(&v) && list.len() < MAX_HINTS {
                    list.push(v);
                }
            }
        }
    }
}

/// [`Prepare`] with a resolver made per worker (each has its own cache).
pub struct Stacks<'a, F: Fn() -> Box<dyn Resolver + 'a> + Sync> {
    /// Makes a worker's resolver.
    pub resolver: F,
    /// Times are spread between timing packets ([`Interpolate`]).
    pub interpolate: bool,
    /// What the stitch learned.
    pub hints: &'a Hints,
    /// Slices in close order (`report`: [`ThreadStack::close_order`]).
    pub close_order: bool,
}

impl<'a, F> Prepare for Stacks<'a, F>
where
    F: Fn() -> Box<dyn Resolver + 'a> + Sync,
{
    fn worker(&self) -> Preparer<'_> {
        let resolver = (self.resolver)();
        let interpolate = self.interpolate;
        let (hints, close_order) = (self.hints, self.close_order);
        Box::new(move |task, ops, cycles| {
            let learned = hints.learned();
            let stack = ThreadStack::speculative(task.pid, task.tid, &learned);
            let stack = if close_order {
                stack.in_close_order()
            } else {
                stack
            };
            speculate(task, ops, cycles, interpolate, stack, &*resolver)
        })
    }
}

/// Ops copied and spread together on a worker (see [`speculate`]).
const SPREAD_BATCH: usize = 1024;

/// Whether the time spreading moves an op (or a mark) with its group.
fn spreads(op: &Op) -> bool {
    matches!(
        op,
        Op::Call { .. } | Op::Return { .. } | Op::Jump { .. } | Op::Mark { .. }
    )
}

/// Where a worker's stack may start in `ops` (see the module doc).
fn stretch_start(ops: &[Op], interpolate: bool) -> Option<usize> {
    let cbr = ops.iter().position(
        |op| matches!(op, Op::Mark { mark, .. } if matches!(**mark, crate::model::ops::Mark::Cbr { .. })),
    );
    let start = cbr.map_or(1, |c| c + 1).max(1);
    if !interpolate {
        return (start < ops.len()).then_some(start);
    }
    let mut latest = ops.first()?.stamp().time;
    for (i, op) in ops.iter().enumerate().skip(1) {
        let t = op.stamp().time;
        if i >= start && (!spreads(op) || t > latest) {
            return Some(i);
        }
        latest = latest.max(t);
    }
    None
}

/// The stamp as the ordering stage makes it, before it adds the counts of
/// the thread's earlier runs.
fn fixed(op: &Op, cycles: bool) -> Op {
    let mut op = op.clone();
    let s = op.stamp_mut();
    s.cycles = cycles.then(|| s.cycles.get().unwrap_or(0)).into();
    op
}

/// Feeds a speculative stack (marks included: it records them).
struct Feed<'r> {
    stack: ThreadStack,
    resolver: &'r dyn Resolver,
    ops: u64,
}

impl OpSink for Feed<'_> {
    fn op(&mut self, _pid: u32, _tid: u32, op: Op) {
        if !matches!(op, Op::Mark { .. }) {
            self.ops += 1;
        }
        self.stack
            .push(&op, self.resolver, &mut |_| unreachable!("recorded"));
    }

    fn group_cut(&mut self, _pid: u32, _tid: u32) {
        self.stack.count_cut_group();
    }
}

/// Builds the call stack of a run's ops ahead with `stack` (speculative:
/// [`ThreadStack::speculative`]; see the module doc), or `None` when it
/// gives up or the run is too short.
pub fn speculate(
    task: TaskId,
    ops: &[Op],
    cycles: bool,
    interpolate: bool,
    stack: ThreadStack,
    resolver: &dyn Resolver,
) -> Option<Box<Ahead>> {
    let from = stretch_start(ops, interpolate)?;
    if ops.len() - from < MIN_OPS {
        return None;
    }
    let (pid, tid) = (task.pid, task.tid);
    let feed = Feed {
        stack,
        resolver,
        ops: 0,
    };
    let (feed, to) = if interpolate {
        let mut spread = Interpolate::new(feed);
        // A few at a time (`OpSink::ops`): the groups are spread where
        // they lie, in a vector that stays in the cache (one as long as
        // the run, hundreds of MB, cost a page fault per 4 KiB).
        let mut batch: Vec<Op> = Vec::with_capacity(SPREAD_BATCH);
        for part in ops[from..].chunks(SPREAD_BATCH) {
            batch.extend(part.iter().map(|op| fixed(op, cycles)));
            spread.ops(pid, tid, &mut batch);
        }
        let to = ops.len() - spread.held(pid, tid);
        (spread.into_inner(), to)
    } else {
        let mut feed = feed;
        for op in &ops[from..] {
            feed.op(pid, tid, fixed(op, cycles));
        }
        (feed, ops.len())
    };
    if feed.stack.failed() || to <= from {
        return None;
    }
    let mut st = Ahead {
        from,
        to,
        lead: fixed(&ops[from], cycles),
        counts: ThreadStats::default(),
        span: (u64::MAX, 0),
        last: fixed(&ops[to - 1], cycles).stamp(),
        built: Box::new(Stretch {
            stack: feed.stack,
            stack_ops: feed.ops,
        }),
    };
    for op in &ops[from..to] {
        st.counts.count(op);
        let t = op.stamp().time;
        st.span = (st.span.0.min(t), st.span.1.max(t));
    }
    Some(Box::new(st))
}
