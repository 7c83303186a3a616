//! One concern of the chunk decoder (`chunk`): the runs it builds. A run
//! is a stretch of one task's ops on one buffer, tallied as ops are pushed
//! (so that the ordering stage need not go over them again); the transfer
//! that ended the last block waits in a [`Pending`] for its target; op
//! vectors come back from the ordering stage through an [`OpPool`].
//!
//! **Quiet jumps.** Given a way to ask where functions hold
//! ([`JumpPlaces`], from the stacks' resolver), a jump is marked `inside`
//! when its source and target lie in one function, neither its entry,
//! and it is left out (counted in [`Run::dropped`], never an op)
//! when, besides, the run's op before it is a jump at the same time into
//! that function's span (the span holds both its ends).
//! Such a jump changes no call stack: after the jump before it, the top
//! frame runs that function, or no frame of it is known and
//! `ThreadStack::jump` finds the same again (`lower_frame_of` answers as
//! it did; a speculative stack has recorded what it assumed already). It
//! changes no time either: it joins its group (the same time as the jump
//! before), and the time spreading does not count an `inside` jump
//! among a group's branches (`crate::interp`), so the ops around it get
//! the same times whether it is there or not. Which jumps are left out
//! depends on where runs begin (the first of a run is kept), so neither
//! may depend on them. Interpreters' dispatch jumps (`jmp *%rax` from
//! one handler to the next, all in one function) are most of them: a
//! 64-byte op made, handed over, spread and pushed through the stacks
//! for nothing, each.

use std::cell::RefCell;

use sideband::timeline::TaskId;

use super::places::JumpPlaces;
use super::transfer::Transfer;
use crate::model::ops::ThreadStats;
use crate::model::ops::{push_made, Cycles, Op, Stamp};
use crate::model::slices::PlaceSpan;

/// A stretch of one task's ops on one buffer; counters are run-local.
#[derive(Debug)]
pub(super) struct Run {
    pub task: TaskId,
    /// Perf time when the run started (per-cpu buffers are merged by it).
    pub start: u64,
    pub ops: Vec<Op>,
    /// Instructions and cycles of the run (its ops' stamps count from 0).
    pub insns: u64,
    pub cycles: u64,
    /// Ops the ordering stage drops when it hands the run on (the first
    /// op, the index of a CBR mark), instead of removing them from `ops`:
    /// the profile showed those removals' copies of whole chunks.
    pub skip: Skip,
    /// Its call stack, built ahead by the decode worker (`crate::stitch`).
    pub stretch: Option<Box<crate::model::ops::Ahead>>,
    /// What the ordering stage counts of `ops`, kept as they are pushed
    /// ([`Run::push`]) so that it need not go over them again.
    pub tally: Tally,
    /// Jumps left out (the module doc's quiet jumps), which the ordering
    /// stage counts among the thread's jumps.
    pub dropped: u64,
    /// Its first op is the gap a segment after lost data starts with,
    /// which the ordering stage drops where the thread's last op handed
    /// on is the loss's gap already (`order::Orderer::follows_loss`).
    pub lost_first: bool,
    /// The instructions and cycles of the last jump left out (0: none).
    /// Where no op came after it (its instructions are more than the
    /// last op's: an op's stamp is taken later), the ordering stage takes
    /// its stamp as the thread's latest ([`Run::tail_stamp`]), where the
    /// thread's `Op::End` closes its open frames, as it would at that jump
    /// had it been kept: a trace that ends in a loop of quiet jumps (cut
    /// off, killed) would otherwise end its open calls at the last op
    /// kept, their instructions short by the loop's. Two plain fields,
    /// stored at each jump left out: with its index and an `Option`, the
    /// LLDB row's 88 M took `ptdec report` 5% more instructions.
    pub tail_insns: u64,
    pub tail_cycles: Cycles,
    /// When the last op pushed was a jump whose target a
    /// span holds: its time; that span is `span`.
    quiet: Option<u64>,
    /// The span of the last jump's target that had one (kept across
    /// other ops: after a call returns, the next jump most often stays
    /// in the same function, and this answers without asking).
    span: PlaceSpan,
}

impl Run {
    /// A run of `task` from perf time `start`, its ops in `ops` (empty).
    pub fn new(task: TaskId, start: u64, ops: Vec<Op>) -> Run {
        Run {
            task,
            start,
            ops,
            insns: 0,
            cycles: 0,
            skip: Skip::default(),
            stretch: None,
            tally: Tally::default(),
            dropped: 0,
            lost_first: false,
            tail_insns: 0,
            tail_cycles: Cycles::NONE,
            quiet: None,
            span: PlaceSpan::default(),
        }
    }

    /// Appends `op`, tallied.
    #[inline]
    pub fn push(&mut self, op: Op) {
        self.quiet = None;
        self.tally.add(self.ops.len(), &op);
        self.ops.push(op);
    }

    /// Forgets the last op's jump: the ops after `mark` were dropped (a
    /// stall's), and a jump left out next must follow one kept. A jump
    /// left out after `start` instructions of the run (the stall's) goes
    /// with them.
    pub(super) fn truncate(&mut self, mark: usize, start: u64) {
        self.ops.truncate(mark);
        self.quiet = None;
        self.forget_tail(start);
    }

    /// Forgets [`Run::tail_insns`] when that jump came after `start`
    /// instructions of the run (a stall's, dropped).
    pub(super) fn forget_tail(&mut self, start: u64) {
        if self.tail_insns > start {
            self.tail_insns = 0;
        }
    }

    /// The stamp of the last jump left out when no op came after it
    /// ([`Run::tail_insns`]), of the same time as the last op (a jump is
    /// left out only at the time of the jump kept before it).
    pub fn tail_stamp(&self, ops: &[Op]) -> Option<Stamp> {
        let last = ops.last()?.stamp();
        (self.tail_insns > last.insns).then_some(Stamp {
            time: last.time,
            insns: self.tail_insns,
            cycles: self.tail_cycles,
        })
    }

    /// [`Run::tail_insns`] for the part of the run after a flush's cut,
    /// whose stamps count from `(insns, cycles)`: a jump left out after
    /// them, rebased (one left out before them is the part handed on's,
    /// where an op of this part comes after it).
    pub(super) fn tail_after(&self, (insns, cycles): (u64, u64)) -> (u64, Cycles) {
        if self.tail_insns <= insns {
            return (0, Cycles::NONE);
        }
        let c = self.tail_cycles.get().map(|c| c.saturating_sub(cycles));
        (self.tail_insns - insns, c.into())
    }

    /// The jump `p` to `to`, asking `places` where functions hold: left
    /// out when quiet (unless `keep`), else appended with `inside` (module
    /// doc).
    #[inline(always)]
    pub(super) fn push_jump(
        &mut self,
        p: &Pending,
        to: u64,
        places: &RefCell<JumpPlaces<'_>>,
        keep: bool,
    ) {
        // Most: a jump from and into the span of the last jump's target
        // (an interpreter's dispatch), left out when that jump was the
        // last op, at the same time.
        let t = p.at.time;
        if self.span.holds_both(to, p.from, t) {
            if self.quiet == Some(t) && !keep {
                self.dropped += 1;
                self.tail_insns = p.at.insns;
                self.tail_cycles = p.at.cycles;
                return;
            }
            self.push_transfer(p, to, true);
            self.quiet = Some(t);
            return;
        }
        self.push_jump_asked(p, to, places);
    }

    /// [`Run::push_jump`] where the last jump's span does not answer: the
    /// worker's `places` do.
    #[inline(never)]
    fn push_jump_asked(&mut self, p: &Pending, to: u64, places: &RefCell<JumpPlaces<'_>>) {
        let (t, from) = (p.at.time, p.from);
        let pid = self.task.pid;
        let places = &mut *places.borrow_mut();
        let ((to_entry, to_func), span) = places.place(pid, to, t);
        // Most often the target's span holds the source too.
        let inside = match (span, to_entry, to_func) {
            (Some(s), ..) if s.holds(from, t) => true,
            (_, false, Some(f)) => places.place(pid, from, t).0 == (false, Some(f)),
            _ => false,
        };
        self.push_transfer(p, to, inside);
        match span {
            Some(s) => {
                self.span = s;
                self.quiet = Some(t);
            }
            None => self.quiet = None,
        }
    }

    /// Appends the transfer `p` to `to`, tallied from its parts, and
    /// made in place ([`push_transfer_op`]).
    /// `inside`: a jump's (module doc); not asked of others.
    #[inline(always)]
    pub(super) fn push_transfer(&mut self, p: &Pending, to: u64, inside: bool) {
        let at = p.at;
        if p.kind != Transfer::Jump {
            self.quiet = None;
        }
        if self.ops.len() >= 2 {
            let c = &mut self.tally.counts;
            match p.kind {
                Transfer::Call => c.calls += 1,
                Transfer::Return => c.returns += 1,
                Transfer::Jump => c.jumps += 1,
            }
            let span = &mut self.tally.span;
            *span = (span.0.min(at.time), span.1.max(at.time));
        }
        self.tally.n += 1;
        push_transfer_op(&mut self.ops, p, to, inside);
    }
}

/// The op of transfer `p` to `to` pushed onto `ops`, made where it goes.
/// Out of line, so that `Vec::push` is in line here: in the chunk
/// decoder's follow loop LLVM left `push` out (and the closure that made
/// the op), and the op made on the stack in 8-byte stores was read back
/// in 16-byte words as it was copied, waiting on store forwarding (4.5% of
/// `ptdec report`'s samples on interp, one core, 80% of them on that
/// read).
#[inline(never)]
fn push_transfer_op(ops: &mut Vec<Op>, p: &Pending, to: u64, inside: bool) {
    let (at, from, ret) = (p.at, p.from, p.ret);
    push_made(ops, || match p.kind {
        Transfer::Call => Op::Call {
            at,
            from,
            to,
            ret,
            raw_time: at.time,
        },
        Transfer::Return => Op::Return { at, from, to },
        Transfer::Jump => Op::Jump {
            at,
            from,
            to,
            inside,
        },
    });
}

/// See [`Run::tally`]: the calls, returns, jumps and gaps among a run's
/// ops after the first two (the ones the ordering stage may skip:
/// [`Skip`]; it counts those it keeps itself), and their time span.
/// Valid while `n` is the number of ops.
#[derive(Debug, Clone)]
pub(super) struct Tally {
    pub n: usize,
    /// Only the calls, returns, jumps and gaps are counted.
    pub counts: ThreadStats,
    /// (u64::MAX, 0) for none.
    pub span: (u64, u64),
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            n: 0,
            counts: ThreadStats::default(),
            span: (u64::MAX, 0),
        }
    }
}

impl Tally {
    /// Counts `op`, the op at index `i`.
    #[inline]
    pub(super) fn add(&mut self, i: usize, op: &Op) {
        if i >= 2 {
            self.counts.count(op);
            let t = op.stamp().time;
            self.span = (self.span.0.min(t), self.span.1.max(t));
        }
        self.n += 1;
    }
}

/// See [`Run::skip`].
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Skip {
    pub first: bool,
    pub at: Option<usize>,
}

impl Skip {
    /// Whether the op at `i` is dropped.
    pub fn drops(self, i: usize) -> bool {
        (self.first && i == 0) || self.at == Some(i)
    }
}

/// The transfer that ended the last block, waiting for its target (the
/// next block's first IP, or an event's): a call, return or jump, when
/// `set`. Its parts, not an op: the op is made where it is pushed, each
/// part read back as it was written. An op made with its block and
/// copied whole into the run later was read back as 16-byte words just
/// after its narrower stores, and that copy waited on store forwarding
/// (60% of `resolve`'s samples, 13% of the decode worker's time in
/// `ptdec -j1` on one core).
#[derive(Debug, Default)]
pub(super) struct Pending {
    pub set: bool,
    pub kind: Transfer,
    pub at: Stamp,
    pub from: u64,
    /// A call's return address.
    pub ret: u64,
}

/// Op vectors handed back by the ordering stage for the workers' next
/// runs: a chunk's ops go into memory already mapped and of the right
/// size, instead of growing fresh vectors (the profile showed their
/// reallocation copies and page faults).
///
/// Bounded by the room it holds ([`POOL_BYTES`]) as well as by count
/// ([`POOL_MAX`]): per-cpu traces make many runs per chunk (the real LLDB
/// row: about 28 per 32 KiB chunk, 6 MB of ops), and with 16 vectors at
/// most the rest started empty and grew, copying each op once more
/// (`memcpy` under `realloc`: 3.7% of `ptdec report`'s instructions on
/// one CPU, 7.5% with `-j1`, on a 3 MB tile of that row).
#[derive(Default)]
pub(super) struct OpPool(std::sync::Mutex<Pooled>);

/// The vectors an [`OpPool`] holds and their room in bytes, all told.
#[derive(Default)]
pub(super) struct Pooled {
    vecs: Vec<Vec<Op>>,
    bytes: usize,
}

/// Vectors the pool keeps at most (more than a window's runs).
const POOL_MAX: usize = 256;

/// The room the pool's vectors may have, all told, in bytes: what it
/// may add to the peak memory (measured on the real LLDB row: 47 to
/// 51 MB on one CPU, 63 to 85 MB with `-j1`, 112 to 150 MB with `-j2`).
const POOL_BYTES: usize = 32 << 20;

impl OpPool {
    /// An empty vector, with room when one was handed back.
    pub fn take(&self) -> Vec<Op> {
        let mut pool = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match pool.vecs.pop() {
            Some(v) => {
                pool.bytes -= v.capacity() * std::mem::size_of::<Op>();
                v
            }
            None => Vec::new(),
        }
    }

    /// Hands `v` back for reuse.
    pub fn give(&self, mut v: Vec<Op>) {
        v.clear();
        let bytes = v.capacity() * std::mem::size_of::<Op>();
        if bytes == 0 {
            return;
        }
        let mut pool = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if pool.vecs.len() < POOL_MAX && pool.bytes + bytes <= POOL_BYTES {
            pool.bytes += bytes;
            pool.vecs.push(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ops::GapKind;
    use crate::model::slices::SpanOf;

    fn at(time: u64) -> Stamp {
        Stamp {
            time,
            ..Stamp::default()
        }
    }

    const TASK: TaskId = TaskId { pid: 1, tid: 2 };

    /// A function at [0x1000, 0x2000) (its entry 0x1000) for the quiet
    /// jumps: a span inside it, the entry's answer, nothing elsewhere.
    fn places() -> (
        RefCell<JumpPlaces<'static>>,
        std::rc::Rc<std::cell::Cell<u32>>,
    ) {
        let asked = std::rc::Rc::new(std::cell::Cell::new(0));
        let count = asked.clone();
        let ask: SpanOf<'static> = Box::new(move |pid, addr, _time| {
            assert_eq!(pid, TASK.pid);
            count.set(count.get() + 1);
            let span = PlaceSpan {
                lo: 0x1000,
                hi: 0x2000,
                since: 0,
                until: u64::MAX,
                func: 0x1000,
            };
            match addr {
                0x1000 => (((true, Some(0x1000)), None), 0, u64::MAX),
                0x1001..0x2000 => (((false, Some(0x1000)), Some(span)), 0, u64::MAX),
                _ => (((false, None), None), 0, u64::MAX),
            }
        });
        (RefCell::new(JumpPlaces::new(ask)), asked)
    }

    /// A jump is left out where the run's op before it is a jump at its
    /// time into the span that holds it: not after a call, a mark, a new
    /// time, or a jump to an entry; never with `keep`. The others are
    /// marked `inside` as they lie, and those left out counted.
    #[test]
    fn quiet_jumps_are_left_out_and_the_rest_marked() {
        let (places, asked) = places();
        let mut r = Run::new(TASK, 0, Vec::new());
        r.push(Op::Enabled {
            at: at(10),
            ip: 0x1100,
            first: false,
        });
        let step = |r: &mut Run, kind, t, from, to, keep| {
            let p = Pending {
                set: true,
                kind,
                at: at(t),
                from,
                ret: from + 5,
            };
            match kind {
                Transfer::Jump => r.push_jump(&p, to, &places, keep),
                _ => r.push_transfer(&p, to, false),
            }
        };
        step(&mut r, Transfer::Jump, 10, 0x1100, 0x1200, false); // kept: after an enable
        step(&mut r, Transfer::Jump, 10, 0x1300, 0x1400, false); // left out
        step(&mut r, Transfer::Jump, 20, 0x1500, 0x1600, false); // kept: a later time
        step(&mut r, Transfer::Jump, 20, 0x1500, 0x1600, true); // kept: keep
        step(&mut r, Transfer::Call, 20, 0x1600, 0x3000, false);
        step(&mut r, Transfer::Jump, 20, 0x1700, 0x1800, false); // kept: after a call
        step(&mut r, Transfer::Jump, 20, 0x1900, 0x1000, false); // kept: to the entry
        step(&mut r, Transfer::Jump, 20, 0x1100, 0x1200, false); // kept: after it
        r.push(Op::Mark {
            at: at(20),
            mark: Box::new(crate::model::ops::Mark::Cbr {
                ratio: 1,
                cpu: None,
            }),
        });
        step(&mut r, Transfer::Jump, 20, 0x1300, 0x1400, false); // kept: after a mark
        step(&mut r, Transfer::Jump, 20, 0x1300, 0x1400, false); // left out
        step(&mut r, Transfer::Jump, 20, 0x1300, 0x3000, false); // kept: out of it
        step(&mut r, Transfer::Jump, 20, 0x1300, 0x1400, false); // kept: after it
        let jumps: Vec<(u64, u64, bool)> = r
            .ops
            .iter()
            .filter_map(|op| match op {
                Op::Jump {
                    from, to, inside, ..
                } => Some((*from, *to, *inside)),
                _ => None,
            })
            .collect();
        assert_eq!(
            jumps,
            [
                (0x1100, 0x1200, true),
                (0x1500, 0x1600, true),
                (0x1500, 0x1600, true),
                (0x1700, 0x1800, true),
                (0x1900, 0x1000, false),
                (0x1100, 0x1200, true),
                (0x1300, 0x1400, true),
                (0x1300, 0x3000, false),
                (0x1300, 0x1400, true),
            ]
        );
        assert_eq!(r.dropped, 2);
        assert_eq!(r.tally.n, r.ops.len());
        // The ops after the first two are tallied: eight jumps and a call.
        assert_eq!((r.tally.counts.jumps, r.tally.counts.calls), (8, 1));
        // Asked once for the span, once for the entry and once for 0x3000:
        // what was asked is kept.
        assert_eq!(asked.get(), 3);
    }

    #[test]
    fn a_run_tallies_its_ops_after_the_first_two() {
        let mut r = Run::new(TASK, 5, Vec::new());
        r.push(Op::Jump {
            at: at(10),
            from: 1,
            to: 2,
            inside: false,
        });
        r.push(Op::Return {
            at: at(11),
            from: 2,
            to: 3,
        });
        assert_eq!(
            (r.tally.n, r.tally.counts.jumps, r.tally.span),
            (2, 0, (u64::MAX, 0))
        );
        r.push(Op::Gap {
            at: at(30),
            kind: GapKind::LostData,
            offset: 0,
        });
        let p = Pending {
            set: true,
            kind: Transfer::Call,
            at: at(20),
            from: 7,
            ret: 9,
        };
        r.push_transfer(&p, 100, false);
        let p = Pending {
            kind: Transfer::Return,
            at: at(40),
            ..p
        };
        r.push_transfer(&p, 9, false);
        let c = &r.tally.counts;
        assert_eq!((c.calls, c.returns, c.jumps, c.gaps), (1, 1, 0, 1));
        assert_eq!((r.tally.n, r.tally.span), (5, (20, 40)));
        assert_eq!(r.ops.len(), 5);
        assert!(matches!(
            r.ops[3],
            Op::Call {
                from: 7,
                to: 100,
                ret: 9,
                raw_time: 20,
                ..
            }
        ));
        assert!(matches!(r.ops[4], Op::Return { from: 7, to: 9, .. }));
        // Pushed as a transfer before the third op: not counted either.
        let mut r = Run::new(TASK, 5, Vec::new());
        r.push_transfer(&p, 1, false);
        assert_eq!((r.tally.n, r.tally.counts.returns), (1, 0));
    }

    #[test]
    fn skip_drops_the_first_op_and_one_more() {
        let s = Skip {
            first: true,
            at: Some(3),
        };
        let dropped: Vec<usize> = (0..5).filter(|&i| s.drops(i)).collect();
        assert_eq!(dropped, [0, 3]);
        assert!((0..5).all(|i| !Skip::default().drops(i)));
    }

    #[test]
    fn the_pool_keeps_emptied_vectors_with_room_up_to_a_bound() {
        let pool = OpPool::default();
        assert_eq!(pool.take().capacity(), 0);
        // Without room: not kept.
        pool.give(Vec::new());
        assert_eq!(pool.take().capacity(), 0);
        for _ in 0..POOL_MAX + 4 {
            let mut v = Vec::with_capacity(8);
            v.push(Op::End { at: at(1) });
            pool.give(v);
        }
        let mut kept = 0;
        loop {
            let v = pool.take();
            if v.capacity() == 0 {
                break;
            }
            assert!(v.is_empty());
            kept += 1;
        }
        assert_eq!(kept, POOL_MAX);
    }

    /// The room the pool holds stays within [`POOL_BYTES`]: a vector
    /// that would pass it is dropped, and one taken out makes room again.
    #[test]
    fn the_pool_keeps_no_more_room_than_its_byte_bound() {
        let pool = OpPool::default();
        let each = POOL_BYTES / 4 / std::mem::size_of::<Op>();
        let room = |pool: &OpPool| pool.0.lock().unwrap().bytes;
        for _ in 0..6 {
            pool.give(Vec::with_capacity(each));
        }
        let held = pool.0.lock().unwrap().vecs.len();
        assert_eq!(held, 4);
        assert!(room(&pool) <= POOL_BYTES);
        let v = pool.take();
        assert!(v.capacity() >= each);
        assert_eq!(room(&pool), 3 * v.capacity() * std::mem::size_of::<Op>());
        pool.give(v);
        pool.give(Vec::with_capacity(each));
        assert_eq!(pool.0.lock().unwrap().vecs.len(), 4);
        // Taken out all: nothing is held.
        while pool.take().capacity() > 0 {}
        assert_eq!(room(&pool), 0);
    }
}
