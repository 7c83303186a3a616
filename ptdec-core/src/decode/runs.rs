//! One concern of the chunk decoder (`chunk`): the runs it builds. A run
//! is a stretch of one task's ops on one buffer, tallied as ops are pushed
//! (so that the ordering stage need not go over them again); the transfer
//! that ended the last block waits in a [`Pending`] for its target; op
//! vectors come back from the ordering stage through an [`OpPool`].

use sideband::timeline::TaskId;

use super::transfer::Transfer;
use crate::model::ops::ThreadStats;
use crate::model::ops::{push_made, Op, Stamp};

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
        }
    }

    /// Appends `op`, tallied.
    #[inline]
    pub fn push(&mut self, op: Op) {
        self.tally.add(self.ops.len(), &op);
        self.ops.push(op);
    }

    /// Appends the transfer `p` to `to`, tallied from its parts, and
    /// made in place ([`push_made`]: made first and copied, the op waited
    /// on store forwarding, a quarter of the decode worker's samples in
    /// `ptdec report` on one core).
    #[inline(always)]
    pub(super) fn push_transfer(&mut self, p: &Pending, to: u64) {
        let (at, from) = (p.at, p.from);
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
        let (kind, ret) = (p.kind, p.ret);
        push_made(&mut self.ops, || match kind {
            Transfer::Call => Op::Call {
                at,
                from,
                to,
                ret,
                raw_time: at.time,
            },
            Transfer::Return => Op::Return { at, from, to },
            Transfer::Jump => Op::Jump { at, from, to },
        });
    }
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

    fn at(time: u64) -> Stamp {
        Stamp {
            time,
            ..Stamp::default()
        }
    }

    const TASK: TaskId = TaskId { pid: 1, tid: 2 };

    #[test]
    fn a_run_tallies_its_ops_after_the_first_two() {
        let mut r = Run::new(TASK, 5, Vec::new());
        r.push(Op::Jump {
            at: at(10),
            from: 1,
            to: 2,
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
        r.push_transfer(&p, 100);
        let p = Pending {
            kind: Transfer::Return,
            at: at(40),
            ..p
        };
        r.push_transfer(&p, 9);
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
        r.push_transfer(&p, 1);
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
