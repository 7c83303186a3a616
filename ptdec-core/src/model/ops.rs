//! The contract between the decoding stage (libipt over one AUX buffer, with
//! sideband applied: `decode`) and the call-stack stage (`stack`, which turns
//! a thread's control flow into nested slices for FTF). Decoding emits, per
//! thread, the control transfers that matter for call stacks and the places
//! where the trace has holes, and the [`Mark`]s the hardware recorded
//! beside the control flow (PTWRITE, power and frequency, event trace),
//! which never change a call stack; nothing here knows about symbols or FTF.

use ftf::hash::FastMap;
use sideband::timeline::TaskId;

/// Where a point in the trace sits in time. `time` is perf time in ns (the
/// sideband's clock, converted from TSC/MTC/CYC); `insns` counts instructions
/// the thread executed in the traced region so far; `cycles` counts core
/// cycles from CYC packets when the trace has them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stamp {
    pub time: u64,
    pub insns: u64,
    pub cycles: Cycles,
}

/// A cycle count or none (a trace without CYC), in one word: as an
/// `Option<u64>` it took two, and a stamp is in every op, frame and slice
/// (an op stays 64 bytes with `Op::Call`'s raw time; bench/RESULTS.md,
/// fourteenth session). `u64::MAX` stands for none: a count saturates one
/// below it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cycles(u64);

impl Cycles {
    pub const NONE: Cycles = Cycles(u64::MAX);

    /// `c` cycles (`u64::MAX - 1` at most).
    #[inline]
    pub const fn some(c: u64) -> Cycles {
        Cycles(if c == u64::MAX { u64::MAX - 1 } else { c })
    }

    #[inline]
    pub const fn get(self) -> Option<u64> {
        if self.0 == u64::MAX {
            None
        } else {
            Some(self.0)
        }
    }

    #[inline]
    pub const fn is_some(self) -> bool {
        self.0 != u64::MAX
    }
}

impl Default for Cycles {
    fn default() -> Self {
        Cycles::NONE
    }
}

impl From<Option<u64>> for Cycles {
    #[inline]
    fn from(c: Option<u64>) -> Self {
        match c {
            Some(c) => Cycles::some(c),
            None => Cycles::NONE,
        }
    }
}

/// As the `Option` it stands for.
impl std::fmt::Debug for Cycles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

/// Appends `make()` to `v`, made in place. `v.push(x)` makes `x` on the
/// stack first (it must exist there to be dropped if growing `v`
/// unwinds), in narrow stores, then copies it in 16-byte words read back
/// at once, which wait on store forwarding: for the decode worker's op
/// per branch the profile showed that copy as a quarter of the
/// function's samples, and for the stacks' frame per call two thirds of
/// `ThreadStack::open`'s. Where `v` has room (tested first), LLVM knows
/// the push cannot grow it and makes the element straight in its slot;
/// the other arm runs only when `v` grows. The two arms are the same
/// code on purpose: a `reserve` before the second push made the
/// closure's captures go to the stack on the first arm too. (`extend`
/// over `once_with`, used before, made the element in place only where
/// std's `extend_trusted` was inlined, and for the frames it was not.)
#[inline(always)]
#[allow(clippy::if_same_then_else)]
pub fn push_made<T>(v: &mut Vec<T>, make: impl FnOnce() -> T) {
    if v.len() < v.capacity() {
        v.push(make());
    } else {
        v.push(make());
    }
}

/// Why a thread's control flow has a hole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GapKind {
    /// Internal buffer overflow (OVF): the hardware lost packets.
    Overflow,
    /// The AUX buffer was truncated or data was lost (PERF_RECORD_AUX flags, LOST).
    LostData,
    /// A decode error; the text names it (libipt's error and the offset).
    /// (Boxed: one word, and an op stays 64 bytes.)
    DecodeError(Box<String>),
    /// No image for the code at `ip`: instructions there cannot be followed.
    NoImage { ip: u64 },
}

impl GapKind {
    /// The name of a gap's slice, in the FTF and as `report`'s row.
    pub fn name(&self) -> &'static str {
        match self {
            GapKind::Overflow => "[gap: overflow]",
            GapKind::LostData => "[gap: lost data]",
            GapKind::DecodeError(_) => "[gap: decode error]",
            GapKind::NoImage { .. } => "[gap: no image]",
        }
    }
}

/// Which of the `--no-ptwrite`, `--no-power`, `--no-events` options
/// leaves a [`Mark`] out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MarkClass {
    /// PTWRITE payloads, real or emulated.
    Ptwrite,
    /// CBR (frequency), MWAIT, PWRE, PWRX, EXSTOP.
    Power,
    /// Event trace (CFE/EVD): interrupts, faults, VM entries and exits.
    Event,
}

/// The classes of marks to keep, from `--no-ptwrite`, `--no-power`,
/// `--no-events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkFilter {
    pub ptwrite: bool,
    pub power: bool,
    pub events: bool,
}

impl Default for MarkFilter {
    fn default() -> Self {
        MarkFilter {
            ptwrite: true,
            power: true,
            events: true,
        }
    }
}

impl MarkFilter {
    /// Whether `mark` is written.
    pub fn keeps(&self, mark: &Mark) -> bool {
        match mark.class() {
            MarkClass::Ptwrite => self.ptwrite,
            MarkClass::Power => self.power,
            MarkClass::Event => self.events,
        }
    }
}

/// The bus clock CBR ratios multiply: 100 MHz on every CPU with Intel PT.
pub const BUS_MHZ: u64 = 100;

/// The MHz a core:bus ratio stands for.
pub fn cbr_mhz(ratio: u16) -> u64 {
    u64::from(ratio) * BUS_MHZ
}

/// Something the trace recorded beside the control flow, at one instant of
/// a thread. Names follow perf's (`perf script --itrace=wpI`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// A PTWRITE payload; `ip` of the instruction when known; `emulated`:
    /// decoded from perf's emulated ptwrite (`perf_emulate_ptwrite`).
    Ptwrite {
        ip: Option<u64>,
        payload: u64,
        emulated: bool,
    },
    /// The core:bus ratio changed (CBR): the core runs at `ratio` × 100 MHz.
    /// `cpu` is the buffer's CPU when the trace was recorded per CPU.
    Cbr { ratio: u16, cpu: Option<u32> },
    /// A power event (`mwait`, `pwre`, `pwrx`, `exstop`) with its fields.
    Power {
        name: &'static str,
        ip: Option<u64>,
        args: Vec<(&'static str, u64)>,
    },
    /// An event-trace event (`interrupt`, `iret`, `vmexit`, ...) with its
    /// vector and data.
    Event {
        name: &'static str,
        ip: Option<u64>,
        args: Vec<(&'static str, u64)>,
    },
}

impl Mark {
    /// The option class that leaves it out.
    pub fn class(&self) -> MarkClass {
        match self {
            Mark::Ptwrite { .. } => MarkClass::Ptwrite,
            Mark::Cbr { .. } | Mark::Power { .. } => MarkClass::Power,
            Mark::Event { .. } => MarkClass::Event,
        }
    }
}

/// One step of a thread's traced control flow, in execution order.
///
/// `repr(C, u8)`: every variant's stamp comes first and so lies at the same
/// offset, and [`Op::stamp`] is one load, not a match over the variants
/// (the stages read an op's stamp several times each).
#[derive(Debug, Clone, PartialEq, Eq)]
#[repr(C, u8)]
pub enum Op {
    /// Tracing of this thread (re)starts at `ip` (after a PSB, TIP.PGE,
    /// a context switch in, or after a gap). The first `Enabled` of a thread
    /// has `first == true`.
    Enabled { at: Stamp, ip: u64, first: bool },
    /// Tracing stops at `ip` (syscall, interrupt, switch out, end of trace):
    /// the time until the next `Enabled` is untraced. `kernel` is true when the
    /// thread is known to be in the kernel (syscall or async exit with
    /// user-only tracing).
    Disabled { at: Stamp, ip: u64, kernel: bool },
    /// A call instruction at `from` transferred to `to`; `ret` is where the
    /// matching return lands: the address after the call instruction (for an
    /// interrupt or a syscall, the instruction to resume at). When the call's
    /// bytes could not be read (never seen in practice) `ret == from`, an
    /// address no return goes to, and the stack falls back to its other rules.
    /// `raw_time` is the time the decoder gave it (its timing packet's),
    /// which time spreading leaves alone: `report --slowest` starts the
    /// window that decodes the call whole there.
    Call {
        at: Stamp,
        from: u64,
        to: u64,
        ret: u64,
        raw_time: u64,
    },
    /// A return instruction at `from` went to `to`.
    Return { at: Stamp, from: u64, to: u64 },
    /// An unconditional jump at `from` to `to` (direct or indirect); the stack
    /// stage decides whether it is a tail call (a jump to a function's entry).
    /// `inside`: `from` and `to` lie in one function, neither its entry, as
    /// the decode worker found (one span of the stacks' resolver, `JumpSpans`
    /// in `model::slices`, holds both); time spreading then does not count
    /// the jump among its group's branches (`crate::interp`). Always `false`
    /// when the decode was given no `JumpSpans`.
    Jump {
        at: Stamp,
        from: u64,
        to: u64,
        inside: bool,
    },
    /// The flow has a hole; after it the call stack restarts, never guessed.
    Gap {
        at: Stamp,
        kind: GapKind,
        offset: u64,
    },
    /// The thread's part of this buffer ends (end of data); open frames close here.
    End { at: Stamp },
    /// Something recorded beside the control flow; call stacks ignore it.
    /// Boxed: marks are rare, and inline they made every op 96 bytes
    /// instead of 64 (ops are moved several times between decoder and
    /// stacks; the profile showed the copies).
    Mark { at: Stamp, mark: Box<Mark> },
}

impl Op {
    /// The stamp of this step.
    pub fn stamp(&self) -> Stamp {
        match self {
            Op::Enabled { at, .. }
            | Op::Disabled { at, .. }
            | Op::Call { at, .. }
            | Op::Return { at, .. }
            | Op::Jump { at, .. }
            | Op::Gap { at, .. }
            | Op::End { at }
            | Op::Mark { at, .. } => *at,
        }
    }

    /// The stamp of this step, to be rewritten in place (interpolated times,
    /// renumbered instruction counts). The one match over every variant that
    /// writes a stamp; `stamp` is the one that reads it.
    pub fn stamp_mut(&mut self) -> &mut Stamp {
        match self {
            Op::Enabled { at, .. }
            | Op::Disabled { at, .. }
            | Op::Call { at, .. }
            | Op::Return { at, .. }
            | Op::Jump { at, .. }
            | Op::Gap { at, .. }
            | Op::End { at }
            | Op::Mark { at, .. } => at,
        }
    }

    /// The address the step happens at (a branch's source; 0 for a gap
    /// or the end).
    pub fn ip(&self) -> u64 {
        match self {
            Op::Enabled { ip, .. } | Op::Disabled { ip, .. } => *ip,
            Op::Call { from, .. } | Op::Return { from, .. } | Op::Jump { from, .. } => *from,
            Op::Gap { .. } | Op::End { .. } | Op::Mark { .. } => 0,
        }
    }
}

/// Turns the stamps of a run of ops, counted from the run's start, into
/// the thread's counts: `insns` instructions and, when the trace counts
/// cycles, `cycles` cycles before the run (a stamp without cycles then
/// counts from 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rebase {
    pub insns: u64,
    pub cycles: Option<u64>,
}

impl Rebase {
    #[inline]
    pub fn apply(self, s: &mut Stamp) {
        s.insns += self.insns;
        s.cycles = self.cycles.map(|b| s.cycles.get().unwrap_or(0) + b).into();
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
    /// Ops handed to the sink, and the jumps the decode workers left out
    /// (`decode::runs`'s quiet jumps).
    pub ops: u64,
    /// Perf time of the first and last op.
    pub span: Option<(u64, u64)>,
}

impl ThreadStats {
    /// Counts `op` among the calls, returns, jumps or gaps.
    pub fn count(&mut self, op: &Op) {
        match op {
            Op::Call { .. } => self.calls += 1,
            Op::Return { .. } => self.returns += 1,
            Op::Jump { .. } => self.jumps += 1,
            Op::Gap { .. } => self.gaps += 1,
            _ => {}
        }
    }

    /// Takes back what [`ThreadStats::count`] counted of `op`.
    pub fn uncount(&mut self, op: &Op) {
        let n = match op {
            Op::Call { .. } => &mut self.calls,
            Op::Return { .. } => &mut self.returns,
            Op::Jump { .. } => &mut self.jumps,
            Op::Gap { .. } => &mut self.gaps,
            _ => return,
        };
        *n = n.saturating_sub(1);
    }

    /// Adds the calls, returns, jumps and gaps `other` counted.
    pub fn add_counts(&mut self, other: &ThreadStats) {
        self.calls += other.calls;
        self.returns += other.returns;
        self.jumps += other.jumps;
        self.gaps += other.gaps;
    }
}

/// How a stretch built ahead ([`Ahead`]) is counted from the thread's start:
/// instructions and cycles before it. (A stamp without cycles keeps none;
/// [`Rebase`], for the ordering stage's runs, counts it from 0.)
#[derive(Debug, Clone, Copy)]
pub struct Base {
    pub insns: u64,
    /// `None`: the trace has no cycle counts (stamps keep `None`).
    pub cycles: Option<u64>,
}

impl Base {
    /// `s` counted from the thread's start.
    pub fn stamp(&self, s: Stamp) -> Stamp {
        Stamp {
            time: s.time,
            insns: s.insns + self.insns,
            cycles: match (s.cycles.get(), self.cycles) {
                (Some(c), Some(b)) => Cycles::some(c + b),
                _ => s.cycles,
            },
        }
    }
}

/// What a decode worker built ahead over ops `[from, to)` of a run, for a
/// stage after the ordering (the call stacks: `crate::stitch`). The decode
/// and ordering stages carry it without knowing what was built: they read
/// its extent and counts, and hand it to [`OpSink::stretch`] in place of
/// those ops.
#[derive(Debug)]
pub struct Ahead {
    pub from: usize,
    pub to: usize,
    /// The run's op at `from`, counters as the run counts them.
    pub lead: Op,
    /// Calls, returns, jumps and gaps among its ops (the ordering stage's
    /// statistics; only those are counted).
    pub counts: ThreadStats,
    /// The first and last time among its ops, before spreading.
    pub span: (u64, u64),
    /// The stamp of its last op, as the run counts.
    pub last: Stamp,
    /// What the stage built (its own type, which it takes back with
    /// `downcast`).
    pub built: Box<dyn std::any::Any + Send>,
}

/// One worker's preparer ([`Prepare::worker`]): `(task, ops, cycles)` of a
/// run, `cycles` whether the trace counts cycles.
pub type Preparer<'p> = Box<dyn FnMut(TaskId, &[Op], bool) -> Option<Box<Ahead>> + 'p>;

/// What a decode worker runs on each run it decoded, given by the stage
/// that takes the [`Ahead`]s: `decode::decode_with` calls
/// [`Prepare::worker`] once per worker.
pub trait Prepare: Sync {
    /// One worker's preparer.
    fn worker(&self) -> Preparer<'_>;
}

/// A value per thread, found by (pid, tid), the last thread's without
/// hashing: a thread's ops and slices come in runs, so most are found so
/// (a hash lookup per op showed in the profile).
#[derive(Debug)]
pub struct PerThread<T> {
    pub items: Vec<T>,
    index: FastMap<(u32, u32), usize>,
    last: Option<((u32, u32), usize)>,
}

impl<T> Default for PerThread<T> {
    fn default() -> Self {
        PerThread {
            items: Vec::new(),
            index: FastMap::default(),
            last: None,
        }
    }
}

impl<T: Default> PerThread<T> {
    /// The index of thread (pid, tid)'s value in `items`, made when new.
    /// Inlined: as a call it cost 18 instructions of prologue and
    /// epilogue around a 4-instruction test (callgrind, 7 M calls in
    /// `ptdec report --slowest` of the bench's interp trace).
    #[inline(always)]
    pub fn slot(&mut self, pid: u32, tid: u32) -> usize {
        match self.last {
            Some((key, i)) if key == (pid, tid) => i,
            _ => self.slot_slow(pid, tid),
        }
    }

    #[inline(never)]
    fn slot_slow(&mut self, pid: u32, tid: u32) -> usize {
        let n = self.items.len();
        let i = *self.index.entry((pid, tid)).or_insert(n);
        if i == n {
            self.items.push(T::default());
        }
        self.last = Some(((pid, tid), i));
        i
    }
}

impl<T> PerThread<T> {
    /// The index of thread (pid, tid)'s value, if it has one.
    pub fn find(&self, pid: u32, tid: u32) -> Option<usize> {
        self.index.get(&(pid, tid)).copied()
    }

    /// The threads and their values' indices, in thread order.
    pub fn sorted(&self) -> Vec<((u32, u32), usize)> {
        let mut keys: Vec<_> = self.index.iter().map(|(&k, &i)| (k, i)).collect();
        keys.sort_unstable();
        keys
    }
}

/// What [`OpSink::run_ops`] does by default, for any `f`: `ops[skip..]`
/// to `f` one by one, each stamp fixed by `rebase` first; `ops` is left
/// empty.
pub fn drain_fixed(ops: &mut Vec<Op>, skip: usize, rebase: Option<Rebase>, mut f: impl FnMut(Op)) {
    for mut op in ops.drain(skip..) {
        fix(rebase, &mut op);
        f(op);
    }
    ops.clear();
}

/// `op`'s stamp moved by `rebase` (`None`: left as it is).
#[inline]
pub fn fix(rebase: Option<Rebase>, op: &mut Op) {
    if let Some(r) = rebase {
        r.apply(op.stamp_mut());
    }
}

/// `op`, a placeholder (an [`Op::End`], nothing to drop) left in its place.
#[inline]
pub fn take(op: &mut Op) -> Op {
    std::mem::replace(
        op,
        Op::End {
            at: Stamp::default(),
        },
    )
}

/// Receives the decoded steps of each thread. Steps of one thread arrive in
/// order; steps of different threads may interleave.
pub trait OpSink {
    /// One step of thread `tid` of process `pid`.
    fn op(&mut self, pid: u32, tid: u32, op: Op);

    /// Several steps of thread `tid` of process `pid`, in order, taken out
    /// of `ops` (left empty): what `op` does to each, one by one. The
    /// ordering stage hands on a run's ops so, and time spreading works on
    /// them where they lie (moving each op into a group and out again, and
    /// a call per op, showed in the profile). The default is `run_ops`.
    fn ops(&mut self, pid: u32, tid: u32, ops: &mut Vec<Op>) {
        self.run_ops(pid, tid, ops, 0, None);
    }

    /// What `ops` does to `ops[skip..]` with each stamp fixed by `rebase`
    /// first (`None`: as they are); `ops` is left empty. The ordering
    /// stage hands on a run so: the sinks that go over the ops anyway fix
    /// them on the way and skip the first ones without moving the rest (a
    /// pass of its own over each run, MBs of ops, was 7-10% of `ptdec`'s
    /// time on one core). The default hands them to `op` one by one; a
    /// sink overrides this, not `ops`.
    fn run_ops(
        &mut self,
        pid: u32,
        tid: u32,
        ops: &mut Vec<Op>,
        skip: usize,
        rebase: Option<Rebase>,
    ) {
        drain_fixed(ops, skip, rebase, |op| self.op(pid, tid, op));
    }

    /// What `ops` does to the ops of `ops`, where they lie: each is taken
    /// (a placeholder left in its place), so the caller keeps its vector
    /// and may hand on pieces of one run without copying them out
    /// (`pipeline::Tap` hands on a run a stretch at a time: its copies of
    /// every op were 9% of `ptdec report --slowest 10`). The default hands
    /// them to `op` one by one.
    fn ops_in_place(&mut self, pid: u32, tid: u32, ops: &mut [Op]) {
        for op in ops {
            self.op(pid, tid, take(op));
        }
    }

    /// A stretch of the thread's ops whose call stack a decode worker
    /// built ahead (`crate::stitch`), its counters to be offset by `base`:
    /// `true` when the sink took it in their stead; `false` (the default),
    /// and the ops come one by one.
    fn stretch(&mut self, _pid: u32, _tid: u32, _stretch: Box<Ahead>, _base: Base) -> bool {
        false
    }

    /// The time spreading ended a group of thread (pid, tid) that was
    /// full ([`crate::interp::MAX_GROUP`]) at a branch of the same time:
    /// for the summary's warning. Nothing to do by default.
    fn group_cut(&mut self, _pid: u32, _tid: u32) {}
}

impl<S: OpSink + ?Sized> OpSink for &mut S {
    fn op(&mut self, pid: u32, tid: u32, op: Op) {
        (**self).op(pid, tid, op)
    }

    fn run_ops(
        &mut self,
        pid: u32,
        tid: u32,
        ops: &mut Vec<Op>,
        skip: usize,
        rebase: Option<Rebase>,
    ) {
        (**self).run_ops(pid, tid, ops, skip, rebase)
    }

    fn ops_in_place(&mut self, pid: u32, tid: u32, ops: &mut [Op]) {
        (**self).ops_in_place(pid, tid, ops)
    }

    fn stretch(&mut self, pid: u32, tid: u32, stretch: Box<Ahead>, base: Base) -> bool {
        (**self).stretch(pid, tid, stretch, base)
    }

    fn group_cut(&mut self, pid: u32, tid: u32) {
        (**self).group_cut(pid, tid)
    }
}

/// One op of any kind at `at`, drawn by `pick` (0-8: enable, disable,
/// CBR mark, return, jump, gap, and three ways a call), for the property
/// tests of the stages (here, and in `ptdec` with the `test-helpers`
/// feature).
#[cfg(any(test, feature = "test-helpers"))]
pub fn test_op(pick: u64, at: Stamp) -> Op {
    match pick {
        0 => Op::Enabled {
            at,
            ip: 0,
            first: false,
        },
        1 => Op::Disabled {
            at,
            ip: 0,
            kernel: true,
        },
        2 => Op::Mark {
            at,
            mark: Box::new(Mark::Cbr {
                ratio: 1,
                cpu: None,
            }),
        },
        3 => Op::Return { at, from: 1, to: 2 },
        4 => Op::Jump {
            at,
            from: 1,
            to: 2,
            inside: false,
        },
        5 => Op::Gap {
            at,
            kind: GapKind::Overflow,
            offset: 0,
        },
        _ => Op::Call {
            at,
            from: 1,
            to: 2,
            ret: 3,
            raw_time: at.time,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_by_class() {
        let f = MarkFilter {
            power: false,
            ..MarkFilter::default()
        };
        assert!(!f.keeps(&Mark::Cbr {
            ratio: 1,
            cpu: None
        }));
        assert!(f.keeps(&Mark::Ptwrite {
            ip: None,
            payload: 0,
            emulated: false
        }));
        assert_eq!(cbr_mhz(47), 4700);
    }

    /// A stamp in three words (see [`Cycles`]), and a cycle count stands
    /// for the `Option` it was.
    #[test]
    fn a_stamp_is_three_words_and_cycles_an_option() {
        assert_eq!(std::mem::size_of::<Stamp>(), 24);
        for c in [None, Some(0), Some(7), Some(u64::MAX - 1)] {
            assert_eq!(Cycles::from(c).get(), c);
            assert_eq!(Cycles::from(c).is_some(), c.is_some());
            assert_eq!(format!("{:?}", Cycles::from(c)), format!("{c:?}"));
        }
        // The one count it cannot hold saturates below it.
        assert_eq!(Cycles::some(u64::MAX).get(), Some(u64::MAX - 1));
        assert_eq!(Cycles::default(), Cycles::NONE);
        assert_eq!(Stamp::default().cycles.get(), None);
    }

    /// One cache line per op (see `Op::Mark`, `GapKind::DecodeError` and
    /// `Cycles`: `Op::Call`, the largest, has 56 bytes beside its tag).
    #[test]
    fn an_op_is_64_bytes() {
        assert!(
            std::mem::size_of::<Op>() <= 64,
            "{}",
            std::mem::size_of::<Op>()
        );
    }

    #[test]
    fn stamp_mut_writes_what_stamp_reads() {
        let at = Stamp {
            time: 1,
            insns: 2,
            cycles: crate::model::ops::Cycles::NONE,
        };
        let mut ops = [
            Op::Enabled {
                at,
                ip: 0,
                first: true,
            },
            Op::Disabled {
                at,
                ip: 0,
                kernel: false,
            },
            Op::Call {
                at,
                from: 0,
                to: 1,
                ret: 2,
                raw_time: 1,
            },
            Op::Return { at, from: 0, to: 1 },
            Op::Jump {
                at,
                from: 0,
                to: 1,
                inside: false,
            },
            Op::Gap {
                at,
                kind: GapKind::Overflow,
                offset: 0,
            },
            Op::End { at },
        ];
        for op in &mut ops {
            op.stamp_mut().time = 7;
            op.stamp_mut().cycles = Cycles::some(3);
            assert_eq!(
                op.stamp(),
                Stamp {
                    time: 7,
                    insns: 2,
                    cycles: Cycles::some(3)
                }
            );
        }
    }
}
