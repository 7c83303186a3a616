//! The report's consumer of the call stacks' slices: an [`Aggregator`] takes
//! the place of the FTF emitter (a [`SliceSink`] on the emitter thread) and
//! sums every slice into per-function totals instead of encoding it.
//!
//! The stacks run in close order ([`ptdec_core::stack::ThreadStack::close_order`]):
//! every slice arrives after all of its descendants. Each thread keeps a
//! stack of finished *items* waiting for their parent; a slice adopts the
//! items above it that lie inside it (deeper and starting no earlier),
//! which gives its self time and self instructions (its own minus its
//! children's), the outermost calls of each function below it (so a
//! recursive function's total counts each outermost call once), and, for
//! folded stacks, the weights of every path below it. Siblings at the same
//! depth merge into one item, so memory holds a few items per level of the
//! deepest stack and one row per function, never one per call.
//!
//! Frames found above the traced stack (`stack`'s retroactive frames) start
//! at their segment's first instant and adopt the segment's earlier
//! bottom-level items like any parent. A gap ends a segment: what waits on
//! the stack then has no parent to come and is final.
//!
//! How each call's frame was entered (a call instruction, a tail call, a
//! root frame or signal handler, or not traced) is counted per function, so
//! that the report's calls reconcile with tools that count call
//! instructions only (`model::slices::Entry`).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;

use ftf::hash::FastMap;

use crate::model::ops::{Mark, Stamp};
use crate::model::slices::SliceSink;
use crate::model::slices::{cut_to_window, Entry, FuncRef, Siblings, Slice, SliceKind};
use std::convert::Infallible;

/// Index of a function in [`Aggregate::funcs`].
pub type FuncId = u32;

/// Whose row: a thread (pid, tid) with `--per-thread`, else `None` (all).
pub type ThreadKey = Option<(u32, u32)>;

/// One folded stack: a path of functions (outermost first) and its self
/// weights.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FoldedPath {
    pub thread: ThreadKey,
    pub path: Vec<FuncId>,
    pub insns: u64,
    pub ns: u64,
}

/// Pointer-keyed resolutions kept before the cache is cleared (the
/// resolver makes a new owned `FuncRef` for code without a symbol when
/// its own cache is refilled).
const FUNC_CACHE_MAX: usize = 1 << 20;

/// The totals of one function (of one thread with `--per-thread`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FuncStats {
    /// Slices: calls, tail calls and frames whose start was not traced (for
    /// the `[kernel]`, `[untraced]` and gap rows: their slices).
    pub calls: u64,
    /// Calls whose start or end was not traced: the trace, a gap or a
    /// `--start`/`--duration` edge cut them.
    pub cut: u64,
    /// Calls whose start was not traced (of `cut`).
    pub unknown_start: u64,
    /// Calls entered by a tail call: a jump to the function's entry, not a
    /// call instruction (`perf script --itrace=c` does not count these).
    pub tail_calls: u64,
    /// Calls entered at the function's entry with neither a call nor a
    /// jump: a root frame (the trace, or its segment after a gap or a
    /// restart, began at the function's first instruction) or a signal
    /// handler (entered from the kernel). The rest of `calls`, less
    /// `tail_calls` and `unknown_start`, are call instructions.
    pub roots: u64,
    /// ns inside the function, callees included, each outermost call once.
    pub total_ns: u64,
    /// ns in the function itself: its calls' ns minus their callees'.
    pub self_ns: u64,
    /// The longest call.
    pub max_ns: u64,
    /// Instructions, callees included, each outermost call once.
    pub insns: u64,
    /// Instructions of the function itself.
    pub self_insns: u64,
}

/// A function as the report names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuncName {
    pub name: Arc<str>,
    /// The file it comes from, as recorded; empty when unknown.
    pub module: Arc<str>,
    /// Not a function: a row of untraced time (`[kernel]`, ...) or of a
    /// gap kind, whose "calls" are its slices.
    pub pseudo: bool,
}

/// One of the longest calls (`--slowest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowCall {
    pub func: FuncId,
    pub pid: u32,
    pub tid: u32,
    /// The stack's depth: 0 is the first frame of the thread's traced
    /// segment, negative for frames found above it.
    pub depth: i32,
    /// Absolute perf time (ns) of its start, as the FTF shows it.
    pub start: u64,
    pub ns: u64,
    /// Instructions, callees included.
    pub insns: u64,
    /// Its start or end was not traced.
    pub cut: bool,
    /// The window (absolute perf times) that `--start @NS --duration D`
    /// decodes with this call whole and timed as here: from its call
    /// instruction's raw timestamp (interpolation moves a call after it)
    /// to the timestamp its return was spread up to. The call's own times
    /// when they are not known (a tail call or a frame whose start was not
    /// traced).
    pub window: (u64, u64),
}

/// What a report run found: one row per function (and thread), the
/// folded stacks and the longest calls.
#[derive(Debug, Default)]
pub struct Aggregate {
    pub funcs: Vec<FuncName>,
    /// Per (thread, function): the thread is `None` unless per thread.
    pub rows: BTreeMap<(ThreadKey, FuncId), FuncStats>,
    /// Folded stacks, when asked for, sorted.
    pub folded: Vec<FoldedPath>,
    /// Longest first.
    pub slowest: Vec<SlowCall>,
    /// Thread names by (pid, tid), as the FTF names them.
    pub threads: BTreeMap<(u32, u32), String>,
    /// The perf time shown as 0.
    pub origin: u64,
}

/// The most slowest calls a report keeps (`--slowest`): each is held
/// until the report is printed, and printing them as JSON took about
/// 2.8 KB per call (277 MB for 100,000 and 2.8 GB for 1,000,000, measured
/// on this build's `render::json`), so more would make the memory of a
/// report depend on the option rather than on the trace.
pub const MAX_SLOWEST: usize = 100_000;

/// What to collect.
#[derive(Debug, Clone, Default)]
pub struct AggregateOptions {
    /// Rows per thread rather than per function over all threads.
    pub per_thread: bool,
    /// Collect folded stacks (`--folded`, `--flamegraph`).
    pub folded: bool,
    /// Keep the N longest calls, at most [`MAX_SLOWEST`] (a larger N
    /// keeps that many). Memory: one entry per call kept, never more than
    /// the calls seen; nothing is reserved up front.
    pub slowest: usize,
    /// Only slices overlapping `[start, end)` (perf time), their time cut
    /// to it, as the FTF emitter does.
    pub range: Option<(u64, u64)>,
    /// The recording had address filters: untraced time in user space is
    /// `[filtered out]`.
    pub filtered: bool,
}

/// Per function below an item: (ns, instructions) of its outermost calls.
/// Small maps stay in place, then vectors: most items hold a leaf or two,
/// and a vector for each of them (an allocation and a free per slice)
/// showed in the profile of `ptdec report`.
#[derive(Debug)]
enum Outer {
    Inline(arrayvec::ArrayVec<(FuncId, (u64, u64)), OUTER_INLINE>),
    Small(Vec<(FuncId, (u64, u64))>),
    Large(FastMap<FuncId, (u64, u64)>),
}

const OUTER_INLINE: usize = 3;
const OUTER_SMALL: usize = 16;

impl Outer {
    /// `f`'s outermost calls alone.
    fn one(f: FuncId, ns: u64, insns: u64) -> Self {
        let mut v = arrayvec::ArrayVec::new();
        v.push((f, (ns, insns)));
        Outer::Inline(v)
    }

    #[cfg(test)]
    fn new() -> Self {
        Outer::Inline(arrayvec::ArrayVec::new())
    }

    fn len(&self) -> usize {
        match self {
            Outer::Inline(v) => v.len(),
            Outer::Small(v) => v.len(),
            Outer::Large(m) => m.len(),
        }
    }

    #[cfg(test)]
    fn get(&self, f: FuncId) -> (u64, u64) {
        let find = |v: &[(FuncId, (u64, u64))]| v.iter().find(|e| e.0 == f).map_or((0, 0), |e| e.1);
        match self {
            Outer::Inline(v) => find(v),
            Outer::Small(v) => find(v),
            Outer::Large(m) => m.get(&f).copied().unwrap_or((0, 0)),
        }
    }

    /// `f`'s sums, (0, 0) when new.
    #[inline]
    fn slot(&mut self, f: FuncId) -> &mut (u64, u64) {
        let at = match &*self {
            Outer::Inline(v) => v.iter().position(|e| e.0 == f),
            Outer::Small(v) => v.iter().position(|e| e.0 == f),
            Outer::Large(_) => None,
        };
        if at.is_none() {
            self.insert(f);
        }
        match self {
            Outer::Inline(v) => {
                let i = at.unwrap_or(v.len() - 1);
                &mut v[i].1
            }
            Outer::Small(v) => {
                let i = at.unwrap_or(v.len() - 1);
                &mut v[i].1
            }
            Outer::Large(m) => m.entry(f).or_default(),
        }
    }

    /// Adds `f` (not in a vector yet) with sums (0, 0), last in the vector;
    /// a full vector spills to the next representation.
    #[inline]
    fn insert(&mut self, f: FuncId) {
        match self {
            Outer::Inline(v) if !v.is_full() => v.push((f, (0, 0))),
            Outer::Inline(v) => {
                let mut w = Vec::with_capacity(2 * OUTER_INLINE);
                w.extend(v.drain(..));
                w.push((f, (0, 0)));
                *self = Outer::Small(w);
            }
            Outer::Small(v) if v.len() < OUTER_SMALL => v.push((f, (0, 0))),
            Outer::Small(v) => {
                let mut m: FastMap<FuncId, (u64, u64)> = v.drain(..).collect();
                m.insert(f, (0, 0));
                *self = Outer::Large(m);
            }
            // `slot` looks it up in the map.
            Outer::Large(_) => {}
        }
    }

    /// Adds `(ns, insns)` to `f`'s sums.
    #[inline(always)]
    fn add(&mut self, f: FuncId, ns: u64, insns: u64) {
        // The common case first: a function already in place (a sibling's).
        if let Outer::Inline(v) = self {
            if let Some(e) = v.iter_mut().find(|e| e.0 == f) {
                e.1 = (e.1 .0 + ns, e.1 .1 + insns);
                return;
            }
        }
        let e = self.slot(f);
        *e = (e.0 + ns, e.1 + insns);
    }

    /// Sets `f`'s sums to `(ns, insns)`; returns the sums before.
    fn replace(&mut self, f: FuncId, ns: u64, insns: u64) -> (u64, u64) {
        std::mem::replace(self.slot(f), (ns, insns))
    }

    /// Adds `other`'s sums (a larger vector or map goes into the smaller
    /// one's place rather than being re-inserted).
    fn absorb(&mut self, mut other: Outer) {
        if !matches!(other, Outer::Inline(_)) && other.len() > self.len() {
            std::mem::swap(self, &mut other);
        }
        match other {
            Outer::Inline(v) => v.iter().for_each(|&(f, (a, b))| self.add(f, a, b)),
            Outer::Small(v) => v.iter().for_each(|&(f, (a, b))| self.add(f, a, b)),
            Outer::Large(m) => m.iter().for_each(|(&f, &(a, b))| self.add(f, a, b)),
        }
    }
}

/// Call paths, interned from the leaf up: a path is a function and the
/// path below it, so prepending a caller is one lookup.
#[derive(Debug, Default)]
struct Paths {
    ids: FastMap<(FuncId, u32), u32>,
    nodes: Vec<(FuncId, u32)>,
    /// The one-function paths by function ([`NO_PATH`] until interned).
    leaves: Vec<u32>,
}

/// The empty path.
const NO_PATH: u32 = u32::MAX;

impl Paths {
    fn prepend(&mut self, f: FuncId, below: u32) -> u32 {
        if let Some(&id) = self.ids.get(&(f, below)) {
            return id;
        }
        let id = self.nodes.len() as u32;
        self.nodes.push((f, below));
        self.ids.insert((f, below), id);
        id
    }

    /// `prepend(f, NO_PATH)`, without hashing once known.
    fn leaf(&mut self, f: FuncId) -> u32 {
        let i = f as usize;
        if i >= self.leaves.len() {
            self.leaves.resize(i + 1, NO_PATH);
        }
        if self.leaves[i] == NO_PATH {
            self.leaves[i] = self.prepend(f, NO_PATH);
        }
        self.leaves[i]
    }

    /// The functions of `path`, outermost first.
    fn expand(&self, mut path: u32) -> Vec<FuncId> {
        let mut v = Vec::new();
        while path != NO_PATH {
            let (f, below) = self.nodes[path as usize];
            v.push(f);
            path = below;
        }
        v
    }
}

/// Self (instructions, ns) per path relative to an item's members.
type Weights = FastMap<u32, (u64, u64)>;

/// Adds `(insns, ns)` to `path`'s weights.
fn weigh(w: &mut Weights, path: u32, insns: u64, ns: u64) {
    let e = w.entry(path).or_default();
    *e = (e.0 + insns, e.1 + ns);
}

/// Finished slices of one depth waiting for their parent (siblings merged).
#[derive(Debug)]
struct Item {
    depth: i32,
    /// The last member is a gap or untraced slice.
    sep: bool,
    /// The first member's start (time and instructions: all a parent
    /// compares) and the last member's end.
    start_time: u64,
    start_insns: u64,
    end: Stamp,
    /// The members' own ns and instructions (their parent's children's).
    ns: u64,
    insns: u64,
    outer: Outer,
    paths: Option<Weights>,
}

impl Item {
    /// On top of the stack when `s` closes: it is `s`'s child.
    #[inline]
    fn inside(&self, s: &Slice) -> bool {
        self.depth > s.depth && self.start_insns >= s.start.insns && self.start_time >= s.start.time
    }
}

/// A call that ended at the latest end stamp of its thread, waiting to
/// learn whether a gap or the trace's end cut it.
#[derive(Debug, Clone, Copy)]
struct Ended {
    func: FuncId,
    depth: i32,
    /// Already counted as cut (its start was not traced).
    cut: bool,
    /// Its place in the slowest calls, when it is one of them.
    seq: u64,
}

#[derive(Debug)]
struct ThreadAgg {
    key: (u32, u32),
    items: Vec<Item>,
    /// The calls that ended at `ended_at`, one after another.
    ended: Vec<Ended>,
    ended_at: Option<Stamp>,
    /// Its rows by function with `--per-thread` (no calls: no row).
    rows: Vec<FuncStats>,
    /// With a window: the latest slice to close at each depth that may
    /// still be the sibling before a slice to come, shallowest first
    /// ([`ThreadAgg::entry`]).
    closed: Siblings,
}

/// How the report tells a slice's entry without a window: the thread's
/// top item once `s`'s children are adopted is the sibling before it
/// (merged with the siblings before that), so it says what
/// [`Siblings`] would. With a window, which keeps the slices outside it
/// from the items, [`ThreadAgg::closed`] remembers them instead.
#[inline]
fn entry_after(s: &Slice, top: Option<&Item>) -> Entry {
    Entry::of(
        s,
        top.is_some_and(|t| t.depth == s.depth && !t.sep && t.end == s.start),
    )
}

impl ThreadAgg {
    /// How slice `s` (the thread's next in close order) was entered; notes
    /// it as the latest slice at its depth. For a window only (see
    /// [`entry_after`]).
    #[inline]
    fn entry(&mut self, s: &Slice) -> Entry {
        self.closed.entry(s)
    }
}

/// A slowest-calls candidate, ordered so that the heap's top is the one to
/// drop: the shortest, then the latest, then the one of the higher
/// (pid, tid), then the one that came later. Calls of one thread come in
/// the same order however the threads' slices interleave (per-cpu
/// buffers interleave them by chunk), and so the order, and with it which
/// calls are kept, does not depend on the interleaving.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Slow {
    ns: u64,
    start: Reverse<u64>,
    thread: Reverse<(u32, u32)>,
    seq: Reverse<u64>,
    call: SlowKey,
}

impl Slow {
    /// Whether a call of `ns` from `start` in `thread`, coming after every
    /// call taken so far, ranks above `self` (`seq` decides the rest, and
    /// the newcomer's is the highest).
    #[inline]
    fn below(&self, ns: u64, start: u64, thread: (u32, u32)) -> bool {
        ns > self.ns
            || (ns == self.ns && (Reverse(start), Reverse(thread)) > (self.start, self.thread))
    }

    fn into_call(self) -> SlowCall {
        let Reverse((pid, tid)) = self.thread;
        SlowCall {
            func: self.call.func,
            pid,
            tid,
            depth: self.call.depth,
            start: self.start.0,
            ns: self.ns,
            insns: self.call.insns,
            cut: self.call.cut,
            window: self.call.window,
        }
    }
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SlowKey {
    depth: i32,
    func: FuncId,
    insns: u64,
    cut: bool,
    window: (u64, u64),
}

/// Slots of [`Aggregator::recent`] (a power of two).
const RECENT_BITS: u32 = 10;

/// The slot of `FuncRef` address `ptr` in [`Aggregator::recent`].
#[inline]
fn recent_slot(ptr: usize) -> usize {
    (ptr as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) as usize >> (usize::BITS - RECENT_BITS)
}

/// See the module doc.
pub struct Aggregator {
    opts: AggregateOptions,
    funcs: Vec<FuncName>,
    by_name: FastMap<(Arc<str>, Arc<str>), FuncId>,
    by_ptr: FastMap<usize, (FuncRef, FuncId)>,
    /// In front of `by_ptr`, without hashing: (address, id) of an
    /// `FuncRef` that `by_ptr` holds (so the address is not reused), in
    /// the slot [`recent_slot`] of its address; address 0 when empty.
    recent: Box<[(usize, FuncId)]>,
    /// The rows by function, unless per thread (then in [`ThreadAgg`]).
    rows: Vec<FuncStats>,
    threads: Vec<ThreadAgg>,
    thread_index: FastMap<(u32, u32), usize>,
    /// The last slice's thread and its index in `threads`: slices come in
    /// runs of one thread.
    last_thread: Option<((u32, u32), usize)>,
    names: BTreeMap<(u32, u32), String>,
    paths: Paths,
    folded: FastMap<(ThreadKey, u32), (u64, u64)>,
    slowest: BinaryHeap<Reverse<Slow>>,
    /// Whether a gap or the trace's end cut each call in `slowest`, by its
    /// `seq`: marking it in the heap itself meant rebuilding the heap and
    /// scanning it at every thread's end (quadratic in threads × N).
    slow_cut: FastMap<u64, bool>,
    /// The entries `mark_cut` looked at, all told: the tests check it is
    /// linear in the calls (a deterministic stand-in for timing it).
    cut_steps: u64,
    seq: u64,
    origin: u64,
}

impl Aggregator {
    /// `origin`: the perf time shown as 0 (the trace's, or set by the
    /// first op when it has no TSC conversion).
    pub fn new(mut opts: AggregateOptions, origin: u64) -> Self {
        opts.slowest = opts.slowest.min(MAX_SLOWEST);
        Aggregator {
            opts,
            funcs: Vec::new(),
            by_name: FastMap::default(),
            by_ptr: FastMap::default(),
            recent: vec![(0, 0); 1 << RECENT_BITS].into_boxed_slice(),
            rows: Vec::new(),
            threads: Vec::new(),
            thread_index: FastMap::default(),
            last_thread: None,
            names: BTreeMap::new(),
            paths: Paths::default(),
            folded: FastMap::default(),
            slowest: BinaryHeap::new(),
            slow_cut: FastMap::default(),
            cut_steps: 0,
            seq: 0,
            origin,
        }
    }

    fn named(&mut self, name: &Arc<str>, module: &Arc<str>, pseudo: bool) -> FuncId {
        let key = (name.clone(), module.clone());
        if let Some(&id) = self.by_name.get(&key) {
            return id;
        }
        let id = self.funcs.len() as FuncId;
        self.funcs.push(FuncName {
            name: name.clone(),
            module: module.clone(),
            pseudo,
        });
        self.by_name.insert(key, id);
        id
    }

    #[cold]
    fn func_id(&mut self, f: &FuncRef) -> FuncId {
        // A `FuncRef`'s address names the function without hashing its
        // name (one per interned function, one per resolution of code
        // without a symbol). The `FuncRef` is kept, so the address of an
        // owned one is not reused while cached.
        let ptr = f.addr();
        if let Some((_, id)) = self.by_ptr.get(&ptr) {
            return *id;
        }
        let id = self.named(&f.name, &f.module, false);
        if self.by_ptr.len() >= FUNC_CACHE_MAX {
            self.by_ptr.clear();
            // Their addresses may be reused now.
            self.recent.fill((0, 0));
        }
        self.by_ptr.insert(ptr, (f.clone(), id));
        id
    }

    /// The row a slice counts in: the function, or `[kernel]`,
    /// `[filtered out]`, `[untraced]` and the gap kinds, named as in the FTF.
    #[inline]
    fn kind_id(&mut self, kind: &SliceKind) -> FuncId {
        if let SliceKind::Call { func, .. } = kind {
            let ptr = func.addr();
            let slot = recent_slot(ptr);
            let (seen, id) = self.recent[slot];
            if seen == ptr {
                return id;
            }
            let id = self.func_id(func);
            self.recent[slot] = (ptr, id);
            return id;
        }
        self.pseudo_id(kind)
    }

    #[cold]
    fn pseudo_id(&mut self, kind: &SliceKind) -> FuncId {
        let name = match kind {
            SliceKind::Call { func, .. } => return self.func_id(func),
            SliceKind::Untraced { kernel: true, .. } => "[kernel]",
            SliceKind::Untraced { .. } if self.opts.filtered => "[filtered out]",
            SliceKind::Untraced { .. } => "[untraced]",
            SliceKind::Gap { kind, .. } => kind.name(),
        };
        self.named(&Arc::from(name), &Arc::from(""), true)
    }

    /// The index of `key`'s thread in `threads`, entered when new.
    #[inline]
    fn thread(&mut self, key: (u32, u32)) -> usize {
        match self.last_thread {
            Some((k, i)) if k == key => i,
            _ => self.thread_slow(key),
        }
    }

    #[cold]
    fn thread_slow(&mut self, key: (u32, u32)) -> usize {
        let i = match self.thread_index.get(&key) {
            Some(&i) => i,
            None => {
                self.threads.push(ThreadAgg {
                    key,
                    items: Vec::new(),
                    ended: Vec::new(),
                    ended_at: None,
                    rows: Vec::new(),
                    closed: Siblings::default(),
                });
                self.thread_index.insert(key, self.threads.len() - 1);
                self.threads.len() - 1
            }
        };
        self.last_thread = Some((key, i));
        i
    }

    /// The slice's ns inside the range, or `None` outside it.
    fn ns(&self, s: &Slice) -> Option<u64> {
        cut_to_window(self.opts.range, s.start.time, s.end.time).map(|(lo, hi)| hi - lo)
    }

    /// Adds one slice; `window` is its [`SlowCall::window`] when known.
    #[inline(always)]
    pub fn add(&mut self, s: &Slice, window: Option<(u64, u64)>) {
        self.add_with(s, |_| window)
    }

    /// [`add`](Self::add), asking `window` for the slice's window only
    /// if it is among the slowest so far (few are: the per-slice lookup
    /// of the latest raw time was 1.8% of `ptdec report --slowest 10`'s
    /// instructions on the bench's interp trace).
    #[inline(always)]
    pub fn add_with(&mut self, s: &Slice, window: impl FnOnce(&Slice) -> Option<(u64, u64)>) {
        // With a window, the slices outside it never reach the items, so
        // the thread tells how `s` was entered from the slices before it,
        // in the window or not (a tail call into the window is one).
        // Without, the items tell ([`Entry`]).
        let entry = if self.opts.range.is_some() {
            let ti = self.thread((s.pid, s.tid));
            Some(self.threads[ti].entry(s))
        } else {
            None
        };
        let Some(ns) = self.ns(s) else { return };
        let func = self.kind_id(&s.kind);
        let ti = self.thread((s.pid, s.tid));
        let th = &mut self.threads[ti];
        // Its children: the items above it on the stack that lie inside it.
        // Most slices are leaves, with none.
        if th.items.last().is_some_and(|top| top.inside(s)) {
            self.add_parent(s, window, entry, ns, func, ti);
        } else {
            self.add_leaf(s, window, entry, ns, func, ti);
        }
    }

    /// [`add`](Self::add) for a slice without children.
    #[inline(always)]
    fn add_leaf(
        &mut self,
        s: &Slice,
        window: impl FnOnce(&Slice) -> Option<(u64, u64)>,
        entry: Option<Entry>,
        ns: u64,
        func: FuncId,
        ti: usize,
    ) {
        let insns = s.insns();
        let entry = entry.unwrap_or_else(|| entry_after(s, self.threads[ti].items.last()));
        self.count(s, window, entry, func, ti, (ns, insns), (ns, insns), (0, 0));
        let leaf_path = self.opts.folded.then(|| self.paths.leaf(func));
        let th = &mut self.threads[ti];
        let call = matches!(s.kind, SliceKind::Call { .. });
        if let Some(top) = th.items.last_mut().filter(|top| merges(top, s)) {
            top.end = s.end;
            top.sep = !call;
            top.ns += ns;
            top.insns += insns;
            top.outer.add(func, ns, insns);
            if let (Some(w), Some(leaf)) = (&mut top.paths, leaf_path) {
                weigh(w, leaf, insns, ns);
            }
        } else {
            let paths = leaf_path.map(|leaf| {
                let mut w = Weights::default();
                weigh(&mut w, leaf, insns, ns);
                w
            });
            th.items.push(Item {
                depth: s.depth,
                sep: !call,
                start_time: s.start.time,
                start_insns: s.start.insns,
                end: s.end,
                ns,
                insns,
                outer: Outer::one(func, ns, insns),
                paths,
            });
        }
        self.settle_at_gap(s, ti);
    }

    /// [`add`](Self::add) for a slice whose children are on top of its
    /// thread's items.
    #[inline(never)]
    fn add_parent(
        &mut self,
        s: &Slice,
        window: impl FnOnce(&Slice) -> Option<(u64, u64)>,
        entry: Option<Entry>,
        ns: u64,
        func: FuncId,
        ti: usize,
    ) {
        let insns = s.insns();
        let th = &mut self.threads[ti];
        let mut below = adopt(&mut th.items, s, func, &mut self.paths);
        let entry = entry.unwrap_or_else(|| entry_after(s, th.items.last()));
        let self_ns = ns.saturating_sub(below.ns);
        let self_insns = insns.saturating_sub(below.insns);
        let inner = below.outer.replace(func, ns, insns);
        self.count(
            s,
            window,
            entry,
            func,
            ti,
            (ns, insns),
            (self_ns, self_insns),
            inner,
        );
        if let Some(p) = &mut below.paths {
            weigh(p, self.paths.leaf(func), self_insns, self_ns);
        }
        let th = &mut self.threads[ti];
        let call = matches!(s.kind, SliceKind::Call { .. });
        if let Some(top) = th.items.last_mut().filter(|top| merges(top, s)) {
            top.end = s.end;
            top.sep = !call;
            top.ns += ns;
            top.insns += insns;
            top.outer.absorb(below.outer);
            if let (Some(a), Some(mut b)) = (&mut top.paths, below.paths) {
                if b.len() > a.len() {
                    std::mem::swap(a, &mut b);
                }
                for (path, (i, n)) in b {
                    weigh(a, path, i, n);
                }
            }
        } else {
            th.items.push(Item {
                depth: s.depth,
                sep: !call,
                start_time: s.start.time,
                start_insns: s.start.insns,
                end: s.end,
                ns,
                insns,
                outer: below.outer,
                paths: below.paths,
            });
        }
        self.settle_at_gap(s, ti);
    }

    /// Counts slice `s` of function `func`, entered as `entry`, in its
    /// row (`all` and `own`: its (ns, instructions) and those of itself,
    /// `inner`: those of its outermost calls of `func` below it), among
    /// the slowest, and among the calls a gap may cut.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn count(
        &mut self,
        s: &Slice,
        window: impl FnOnce(&Slice) -> Option<(u64, u64)>,
        entry: Entry,
        func: FuncId,
        ti: usize,
        (ns, insns): (u64, u64),
        (self_ns, self_insns): (u64, u64),
        (inner_ns, inner_insns): (u64, u64),
    ) {
        let call = entry != Entry::NotACall;
        let unknown_start = entry == Entry::UnknownStart;
        let th = &mut self.threads[ti];
        let rows = if self.opts.per_thread {
            &mut th.rows
        } else {
            &mut self.rows
        };
        if rows.len() <= func as usize {
            rows.resize(func as usize + 1, FuncStats::default());
        }
        let st = &mut rows[func as usize];
        st.calls += 1;
        st.self_ns += self_ns;
        st.self_insns += self_insns;
        st.total_ns += ns.saturating_sub(inner_ns);
        st.insns += insns.saturating_sub(inner_insns);
        st.max_ns = st.max_ns.max(ns);
        match entry {
            Entry::UnknownStart => {
                st.cut += 1;
                st.unknown_start += 1;
            }
            Entry::Tail => st.tail_calls += 1,
            Entry::Root => st.roots += 1,
            Entry::Call | Entry::NotACall => {}
        }

        let mut seq = u64::MAX;
        if call && self.opts.slowest > 0 {
            let full = self.slowest.len() >= self.opts.slowest;
            if !full
                || self
                    .slowest
                    .peek()
                    .is_some_and(|Reverse(m)| m.below(ns, s.start.time, (s.pid, s.tid)))
            {
                seq = self.seq;
                self.seq += 1;
                self.slowest.push(Reverse(Slow {
                    ns,
                    start: Reverse(s.start.time),
                    thread: Reverse((s.pid, s.tid)),
                    seq: Reverse(seq),
                    call: SlowKey {
                        depth: s.depth,
                        func,
                        insns,
                        cut: unknown_start,
                        window: window(s).unwrap_or((s.start.time, s.end.time)),
                    },
                }));
                self.slow_cut.insert(seq, false);
                if full {
                    if let Some(Reverse(out)) = self.slowest.pop() {
                        self.slow_cut.remove(&out.seq.0);
                    }
                }
            }
        }

        // Calls that end where a gap or a restart begins were cut by it;
        // those still open at the end of the trace, by the end (`finish`).
        if call {
            if th.ended_at != Some(s.end) {
                th.ended.clear();
                th.ended_at = Some(s.end);
            }
            th.ended.push(Ended {
                func,
                depth: s.depth,
                cut: unknown_start,
                seq,
            });
        } else {
            // A restart ends the segment with an untraced slice at depth 0
            // where every frame ended.
            let gap = matches!(s.kind, SliceKind::Gap { .. });
            let cuts = th.ended_at == Some(s.start)
                && (gap || (s.depth == 0 && th.ended.iter().any(|e| e.depth <= 0)));
            th.ended_at = None;
            if cuts {
                let rows = if self.opts.per_thread {
                    &mut th.rows
                } else {
                    &mut self.rows
                };
                self.cut_steps += mark_cut(rows, &mut self.slow_cut, &th.ended);
            }
            th.ended.clear();
        }
    }

    /// After a gap slice: nothing before it gets a parent any more.
    #[inline]
    fn settle_at_gap(&mut self, s: &Slice, ti: usize) {
        if matches!(s.kind, SliceKind::Gap { .. }) {
            let th = &mut self.threads[ti];
            let row = self.opts.per_thread.then_some(th.key);
            settle(&mut self.folded, row, std::mem::take(&mut th.items));
        }
    }

    /// Ends the run: calls still open at the end of a thread's trace were
    /// cut by it; everything waiting is final.
    pub fn finish(self) -> Aggregate {
        self.finish_counted().0
    }

    /// [`Aggregator::finish`], and the entries marking cut calls looked at
    /// over the whole run (`cut_steps`).
    fn finish_counted(mut self) -> (Aggregate, u64) {
        let per_thread = self.opts.per_thread;
        let mut threads = std::mem::take(&mut self.threads);
        threads.sort_unstable_by_key(|th| th.key);
        let mut rows = BTreeMap::new();
        let with_calls = |row: ThreadKey, v: &[FuncStats]| {
            v.iter()
                .enumerate()
                .filter(|(_, st)| st.calls > 0)
                .map(move |(f, st)| ((row, f as FuncId), *st))
                .collect::<Vec<_>>()
        };
        for mut th in threads {
            let row = per_thread.then_some(th.key);
            let own = if per_thread {
                &mut th.rows
            } else {
                &mut self.rows
            };
            self.cut_steps += mark_cut(own, &mut self.slow_cut, &th.ended);
            settle(&mut self.folded, row, th.items);
            if per_thread {
                rows.extend(with_calls(row, &th.rows));
            }
        }
        if !per_thread {
            rows.extend(with_calls(None, &self.rows));
        }
        let folded: Vec<_> = self
            .folded
            .into_iter()
            .map(|((thread, path), (insns, ns))| FoldedPath {
                thread,
                path: self.paths.expand(path),
                insns,
                ns,
            })
            .collect();
        let slow_cut = self.slow_cut;
        let mut slowest: Vec<Slow> = self
            .slowest
            .into_iter()
            .map(|Reverse(mut s)| {
                s.call.cut |= slow_cut.get(&s.seq.0).copied().unwrap_or(false);
                s
            })
            .collect();
        slowest.sort_unstable_by(|a, b| b.cmp(a));
        let agg = canonical(Aggregate {
            funcs: self.funcs,
            rows,
            folded,
            slowest: slowest.into_iter().map(Slow::into_call).collect(),
            threads: self.names,
            origin: self.origin,
        });
        (agg, self.cut_steps)
    }
}

/// `agg` with its functions numbered in the order of their (name, module),
/// the functions' order of first appearance otherwise: that depends on how
/// the threads' slices interleave (from per-cpu buffers, by chunk, so by
/// the chunk size), and ties between rows of one name are broken by
/// number. The folded stacks are sorted again after renumbering.
fn canonical(mut agg: Aggregate) -> Aggregate {
    let funcs = std::mem::take(&mut agg.funcs);
    let mut order: Vec<usize> = (0..funcs.len()).collect();
    order.sort_unstable_by(|&a, &b| {
        let (a, b) = (&funcs[a], &funcs[b]);
        (&a.name, &a.module, a.pseudo).cmp(&(&b.name, &b.module, b.pseudo))
    });
    let mut new = vec![0 as FuncId; funcs.len()];
    for (n, &old) in order.iter().enumerate() {
        new[old] = n as FuncId;
    }
    agg.funcs = order.iter().map(|&old| funcs[old].clone()).collect();
    agg.rows = std::mem::take(&mut agg.rows)
        .into_iter()
        .map(|((t, f), st)| ((t, new[f as usize]), st))
        .collect();
    for p in &mut agg.folded {
        for f in &mut p.path {
            *f = new[*f as usize];
        }
    }
    agg.folded.sort_unstable();
    for c in &mut agg.slowest {
        c.func = new[c.func as usize];
    }
    agg
}

/// Whether slice `s` merges into item `top` (on top of its thread's items)
/// as a sibling: same depth, its start traced, and not right after a gap or
/// untraced time that ended the item.
#[inline]
fn merges(top: &Item, s: &Slice) -> bool {
    let unknown_start = matches!(
        s.kind,
        SliceKind::Call {
            unknown_start: true,
            ..
        }
    );
    top.depth == s.depth && !unknown_start && !(top.sep && top.end == s.start)
}

/// A closing slice's children, merged.
struct Below {
    ns: u64,
    insns: u64,
    outer: Outer,
    /// With folded stacks: the children's paths with the slice's function
    /// prepended.
    paths: Option<Weights>,
}

/// Pops the items on top of `items` that lie inside `s` (the top one
/// does) as the children of `s`, of function `func`.
fn adopt(items: &mut Vec<Item>, s: &Slice, func: FuncId, paths: &mut Paths) -> Below {
    let first = items.pop().expect("a child on top");
    let mut prefixed = |into: &mut Weights, w: Weights| {
        for (path, (i, n)) in w {
            weigh(into, paths.prepend(func, path), i, n);
        }
    };
    let mut below = Below {
        ns: first.ns,
        insns: first.insns,
        outer: first.outer,
        paths: first.paths.map(|w| {
            let mut p = Weights::default();
            prefixed(&mut p, w);
            p
        }),
    };
    while items.last().is_some_and(|top| top.inside(s)) {
        let item = items.pop().expect("a top item");
        below.ns += item.ns;
        below.insns += item.insns;
        below.outer.absorb(item.outer);
        if let (Some(p), Some(w)) = (&mut below.paths, item.paths) {
            prefixed(p, w);
        }
    }
    below
}

/// Items that will get no parent: their paths are final.
fn settle(folded: &mut FastMap<(ThreadKey, u32), (u64, u64)>, row: ThreadKey, items: Vec<Item>) {
    for item in items {
        for (path, (i, n)) in item.paths.into_iter().flatten() {
            let e = folded.entry((row, path)).or_default();
            *e = (e.0 + i, e.1 + n);
        }
    }
}

/// Counts the `ended` calls as cut at their end (those not counted yet) in
/// `rows`, and marks those among the slowest in `slow_cut` (by `seq`; a
/// call no longer among them has no entry). O(`ended`), whatever N.
/// Returns the entries it looked at (the aggregator's `cut_steps`).
fn mark_cut(rows: &mut [FuncStats], slow_cut: &mut FastMap<u64, bool>, ended: &[Ended]) -> u64 {
    let mut steps = 0;
    for e in ended {
        steps += 1;
        if !e.cut {
            if let Some(st) = rows.get_mut(e.func as usize) {
                st.cut += 1;
            }
        }
        if e.seq != u64::MAX {
            if let Some(c) = slow_cut.get_mut(&e.seq) {
                *c = true;
            }
        }
    }
    steps
}

/// Adding up never fails: the aggregator's error is `Infallible`.
impl SliceSink for Aggregator {
    type Error = Infallible;

    /// The totals, folded stacks and slowest calls are sorted
    /// (`canonical`), whatever order the threads' slices came in.
    fn any_interleaving(&self) -> bool {
        true
    }

    fn thread(
        &mut self,
        pid: u32,
        tid: u32,
        name: &str,
        _process: &str,
        _renames: &[(u64, String)],
    ) -> Result<(), Infallible> {
        self.names.insert((pid, tid), name.to_string());
        Ok(())
    }

    fn slice(&mut self, s: &Slice) -> Result<(), Infallible> {
        self.add(s, None);
        Ok(())
    }

    fn set_origin(&mut self, origin: u64) {
        self.origin = origin;
    }

    fn mark(&mut self, _: u32, _: u32, _: &Stamp, _: &Mark) -> Result<(), Infallible> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {

    /// `Outer` sums like a plain map through every representation (in
    /// place, vector, hash map) and every spill between them.
    #[test]
    fn outer_sums_as_a_map_does() {
        use std::collections::BTreeMap;
        type Model = BTreeMap<FuncId, (u64, u64)>;
        fn contents(o: &Outer, funcs: u32) -> Model {
            (0..funcs)
                .map(|f| (f, o.get(f)))
                .filter(|(_, v)| *v != (0, 0))
                .collect()
        }
        let mut rng = fastrand::Rng::with_seed(0x2545_f491_4f6c_dd1d);
        let mut rnd = move |n: u64| rng.u64(..n);
        for _ in 0..500 {
            let funcs = 1 + rnd(40) as u32;
            let mut items: Vec<(Outer, Model)> = Vec::new();
            for _ in 0..rnd(60) {
                let (mut o, mut m) = (Outer::new(), Model::new());
                for _ in 0..rnd(25) {
                    let (f, ns, insns) = (rnd(u64::from(funcs)) as u32, 1 + rnd(9), 1 + rnd(9));
                    let e = m.entry(f).or_default();
                    if rnd(3) == 0 {
                        assert_eq!(o.replace(f, ns, insns), *e, "the sums before");
                        *e = (ns, insns);
                    } else {
                        o.add(f, ns, insns);
                        *e = (e.0 + ns, e.1 + insns);
                    }
                }
                if let Some((p, pm)) = items.pop() {
                    if rnd(2) == 0 {
                        o.absorb(p);
                        for (f, (a, b)) in pm {
                            let e = m.entry(f).or_default();
                            *e = (e.0 + a, e.1 + b);
                        }
                    } else {
                        items.push((p, pm));
                    }
                }
                assert_eq!(contents(&o, funcs), m);
                items.push((o, m));
            }
        }
    }
    use super::*;
    use crate::model::ops::{GapKind, Op};
    use crate::model::slices::{Func, Resolver};
    use ptdec_core::stack::{StackStats, ThreadStack};

    /// Functions of 0x100 bytes at 0x1000 (main), 0x2000 (a), 0x3000 (b),
    /// 0x4000 (f).
    struct Map;

    const MAIN: u64 = 0x1000;
    const A: u64 = 0x2000;
    const B: u64 = 0x3000;
    const F: u64 = 0x4000;

    impl Resolver for Map {
        fn function_of(&self, _: u32, addr: u64, _: u64) -> Option<FuncRef> {
            let name = match addr & !0xfff {
                MAIN => "main",
                A => "a",
                B => "b",
                F => "f",
                _ => return None,
            };
            Some(FuncRef::owned(Func {
                entry: addr & !0xfff,
                name: name.into(),
                module: "prog".into(),
            }))
        }
        fn is_function_entry(&self, _: u32, addr: u64, _: u64) -> bool {
            addr & 0xfff == 0
        }
    }

    /// Time `t`, instructions `i`.
    fn at(t: u64, i: u64) -> Stamp {
        Stamp {
            time: t,
            insns: i,
            cycles: crate::model::ops::Cycles::NONE,
        }
    }

    fn call(t: u64, i: u64, from: u64, to: u64) -> Op {
        Op::Call {
            at: at(t, i),
            from,
            to,
            ret: from + 5,
            raw_time: t,
        }
    }

    fn ret(t: u64, i: u64, from: u64, to: u64) -> Op {
        Op::Return {
            at: at(t, i),
            from,
            to,
        }
    }

    /// The stacks' slices of `ops` (one thread) aggregated.
    fn aggregate(ops: &[Op], opts: AggregateOptions) -> Aggregate {
        let mut agg = Aggregator::new(opts, 0);
        let mut stack = ThreadStack::close_order(1, 1);
        for op in ops {
            stack.push(op, &Map, &mut |s| agg.add(&s, None));
        }
        agg.finish()
    }

    fn row(a: &Aggregate, name: &str) -> FuncStats {
        let id = a.funcs.iter().position(|f| &*f.name == name).unwrap() as FuncId;
        a.rows[&(None, id)]
    }

    /// `path instructions ns`, sorted.
    fn folded(a: &Aggregate) -> Vec<String> {
        let mut v: Vec<String> = a
            .folded
            .iter()
            .map(|f| {
                let names: Vec<&str> = f.path.iter().map(|&f| &*a.funcs[f as usize].name).collect();
                format!("{} {} {}", names.join(";"), f.insns, f.ns)
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn self_time_is_a_call_minus_its_callees_and_recursion_counts_once() {
        // main calls f, which recurses once and calls a; then main calls a.
        let ops = [
            Op::Enabled {
                at: at(0, 0),
                ip: MAIN,
                first: true,
            },
            call(10, 10, MAIN + 0x10, F),
            call(20, 20, F + 0x10, F),
            call(30, 30, F + 0x20, A),
            ret(40, 40, A + 0x50, F + 0x25),
            ret(50, 50, F + 0x50, F + 0x15),
            ret(60, 60, F + 0x50, MAIN + 0x15),
            call(70, 70, MAIN + 0x20, A),
            ret(75, 75, A + 0x50, MAIN + 0x25),
            Op::End { at: at(100, 100) },
        ];
        let a = aggregate(
            &ops,
            AggregateOptions {
                folded: true,
                slowest: 2,
                ..AggregateOptions::default()
            },
        );
        let f = row(&a, "f");
        assert_eq!(f.calls, 2);
        // The outer call (10..60) once, not plus the inner one (20..50).
        assert_eq!((f.total_ns, f.insns, f.max_ns), (50, 50, 50));
        // 50 + 30 minus the inner f (30) and a (10).
        assert_eq!((f.self_ns, f.self_insns), (40, 40));
        let ar = row(&a, "a");
        assert_eq!((ar.calls, ar.total_ns, ar.self_ns), (2, 15, 15));
        let m = row(&a, "main");
        // main's start is the trace's (its entry): not cut there, but the
        // trace ends while it runs.
        assert_eq!((m.calls, m.cut, m.unknown_start), (1, 1, 0));
        assert_eq!((m.total_ns, m.self_ns), (100, 100 - 50 - 5));
        let total: u64 = a.rows.values().map(|r| r.self_insns).sum();
        assert_eq!(total, 100, "self instructions add up to the trace's");
        assert_eq!(
            folded(&a),
            [
                "main 45 45",
                "main;a 5 5",
                "main;f 20 20",
                "main;f;f 20 20",
                "main;f;f;a 10 10"
            ]
        );
        let slow: Vec<(u64, bool)> = a.slowest.iter().map(|s| (s.ns, s.cut)).collect();
        assert_eq!(slow, [(100, true), (50, false)]);
    }

    #[test]
    fn frames_found_above_the_stack_adopt_what_ran_before_them() {
        // Tracing starts inside a; a returns into main, which was not seen
        // being called; main then calls b. An overflow gap follows, and a
        // new segment in b.
        let ops = [
            Op::Enabled {
                at: at(0, 0),
                ip: A + 0x40,
                first: true,
            },
            call(5, 5, A + 0x41, B),
            ret(8, 8, B + 0x10, A + 0x46),
            ret(10, 10, A + 0x50, MAIN + 0x30),
            call(20, 20, MAIN + 0x40, B),
            ret(30, 30, B + 0x10, MAIN + 0x45),
            Op::Gap {
                at: at(40, 40),
                kind: GapKind::Overflow,
                offset: 0,
            },
            Op::Enabled {
                at: at(50, 40),
                ip: B + 0x8,
                first: false,
            },
            Op::End { at: at(60, 50) },
        ];
        let a = aggregate(
            &ops,
            AggregateOptions {
                folded: true,
                ..AggregateOptions::default()
            },
        );
        let m = row(&a, "main");
        assert_eq!((m.calls, m.cut, m.unknown_start), (1, 1, 1));
        assert_eq!((m.total_ns, m.self_insns), (40, 40 - 10 - 10));
        let ar = row(&a, "a");
        assert_eq!((ar.cut, ar.self_insns), (1, 7));
        let b = row(&a, "b");
        // Two calls and the frame the trace resumed in after the gap.
        assert_eq!((b.calls, b.cut, b.unknown_start), (3, 1, 1));
        let gap = row(&a, "[gap: overflow]");
        assert_eq!((gap.calls, gap.total_ns, gap.self_insns), (1, 10, 0));
        let total: u64 = a.rows.values().map(|r| r.self_insns).sum();
        assert_eq!(total, 50);
        assert_eq!(
            folded(&a),
            [
                "[gap: overflow] 0 10",
                "b 10 10",
                "main 20 20",
                "main;a 7 7",
                "main;a;b 3 3",
                "main;b 10 10"
            ]
        );
        let sum_ns: u64 = a.folded.iter().map(|f| f.ns).sum();
        assert_eq!(sum_ns, 60, "ns of the segments and the gap");
    }

    /// The aggregation as first written, with plain maps, paths as vectors
    /// and no caches: the model [`Aggregator`] must agree with.
    mod model {
        use super::*;
        use std::collections::{BTreeMap, HashMap};

        type Paths = BTreeMap<Vec<FuncId>, (u64, u64)>;

        struct MItem {
            depth: i32,
            start: Stamp,
            end: Stamp,
            sep: bool,
            ns: u64,
            insns: u64,
            outer: BTreeMap<FuncId, (u64, u64)>,
            paths: Option<Paths>,
        }

        #[derive(Default)]
        struct MThread {
            items: Vec<MItem>,
            ended: Vec<Ended>,
            ended_at: Option<Stamp>,
            /// Every slice so far: (depth, end, a call).
            seen: Vec<(i32, Stamp, bool)>,
        }

        #[derive(Default)]
        pub struct Model {
            opts: AggregateOptions,
            funcs: Vec<FuncName>,
            rows: BTreeMap<(ThreadKey, FuncId), FuncStats>,
            threads: HashMap<(u32, u32), MThread>,
            folded: BTreeMap<(ThreadKey, Vec<FuncId>), (u64, u64)>,
            slowest: BinaryHeap<Reverse<Slow>>,
            seq: u64,
        }

        fn add_to(e: &mut (u64, u64), a: u64, b: u64) {
            *e = (e.0 + a, e.1 + b);
        }

        impl Model {
            pub fn new(opts: AggregateOptions) -> Self {
                Model {
                    opts,
                    ..Model::default()
                }
            }

            fn id(&mut self, name: &str, module: &str, pseudo: bool) -> FuncId {
                if let Some(i) = self
                    .funcs
                    .iter()
                    .position(|f| &*f.name == name && &*f.module == module)
                {
                    return i as FuncId;
                }
                self.funcs.push(FuncName {
                    name: name.into(),
                    module: module.into(),
                    pseudo,
                });
                self.funcs.len() as FuncId - 1
            }

            pub fn add(&mut self, s: Slice, window: Option<(u64, u64)>) {
                // A tail call: neither a call instruction nor an untraced
                // start, and the latest slice before it at its depth or
                // shallower is a call at its depth that ended at its start.
                let seen = &mut self.threads.entry((s.pid, s.tid)).or_default().seen;
                let before = seen.iter().rev().find(|b| b.0 <= s.depth).copied();
                let is_call = matches!(s.kind, SliceKind::Call { .. });
                seen.push((s.depth, s.end, is_call));
                let (tail, root) = match &s.kind {
                    SliceKind::Call {
                        unknown_start: false,
                        call_time: None,
                        ..
                    } => {
                        let tail = before == Some((s.depth, s.start, true));
                        (tail, !tail)
                    }
                    _ => (false, false),
                };
                let Some((lo, hi)) = cut_to_window(self.opts.range, s.start.time, s.end.time)
                else {
                    return;
                };
                let ns = hi - lo;
                let insns = s.insns();
                let func = match &s.kind {
                    SliceKind::Call { func, .. } => self.id(&func.name, &func.module, false),
                    SliceKind::Untraced { kernel: true, .. } => self.id("[kernel]", "", true),
                    SliceKind::Untraced { .. } if self.opts.filtered => {
                        self.id("[filtered out]", "", true)
                    }
                    SliceKind::Untraced { .. } => self.id("[untraced]", "", true),
                    SliceKind::Gap { kind, .. } => self.id(kind.name(), "", true),
                };
                let key = (s.pid, s.tid);
                let row = self.opts.per_thread.then_some(key);
                let (call, unknown_start) = match &s.kind {
                    SliceKind::Call { unknown_start, .. } => (true, *unknown_start),
                    _ => (false, false),
                };
                let gap = matches!(s.kind, SliceKind::Gap { .. });
                let th = self.threads.entry(key).or_default();

                let (mut child_ns, mut child_insns) = (0, 0);
                let mut outer = BTreeMap::new();
                let mut paths = self.opts.folded.then(Paths::new);
                while let Some(top) = th.items.last() {
                    if !(top.depth > s.depth
                        && top.start.insns >= s.start.insns
                        && top.start.time >= s.start.time)
                    {
                        break;
                    }
                    let item = th.items.pop().unwrap();
                    child_ns += item.ns;
                    child_insns += item.insns;
                    for (f, (a, b)) in item.outer {
                        add_to(outer.entry(f).or_default(), a, b);
                    }
                    if let (Some(p), Some(below)) = (&mut paths, item.paths) {
                        for (path, (i, n)) in below {
                            let mut longer = vec![func];
                            longer.extend(path);
                            add_to(p.entry(longer).or_default(), i, n);
                        }
                    }
                }
                let self_ns = ns.saturating_sub(child_ns);
                let self_insns = insns.saturating_sub(child_insns);
                let (inner_ns, inner_insns) = outer.insert(func, (ns, insns)).unwrap_or((0, 0));
                if let Some(p) = &mut paths {
                    add_to(p.entry(vec![func]).or_default(), self_insns, self_ns);
                }
                let st = self.rows.entry((row, func)).or_default();
                st.calls += 1;
                st.self_ns += self_ns;
                st.self_insns += self_insns;
                st.total_ns += ns.saturating_sub(inner_ns);
                st.insns += insns.saturating_sub(inner_insns);
                st.max_ns = st.max_ns.max(ns);
                if unknown_start {
                    st.cut += 1;
                    st.unknown_start += 1;
                }
                st.tail_calls += u64::from(tail);
                st.roots += u64::from(root);

                let mut seq = u64::MAX;
                if call && self.opts.slowest > 0 {
                    let full = self.slowest.len() >= self.opts.slowest;
                    if !full
                        || self
                            .slowest
                            .peek()
                            .is_some_and(|Reverse(m)| m.below(ns, s.start.time, (s.pid, s.tid)))
                    {
                        seq = self.seq;
                        self.seq += 1;
                        self.slowest.push(Reverse(Slow {
                            ns,
                            start: Reverse(s.start.time),
                            thread: Reverse((s.pid, s.tid)),
                            seq: Reverse(seq),
                            call: SlowKey {
                                depth: s.depth,
                                func,
                                insns,
                                cut: unknown_start,
                                window: window.unwrap_or((s.start.time, s.end.time)),
                            },
                        }));
                        if full {
                            self.slowest.pop();
                        }
                    }
                }

                let ended = Ended {
                    func,
                    depth: s.depth,
                    cut: unknown_start,
                    seq,
                };
                if call {
                    if th.ended_at != Some(s.end) {
                        th.ended.clear();
                        th.ended_at = Some(s.end);
                    }
                    th.ended.push(ended);
                } else {
                    let cuts = th.ended_at == Some(s.start)
                        && (gap || (s.depth == 0 && th.ended.iter().any(|e| e.depth <= 0)));
                    let ended = std::mem::take(&mut th.ended);
                    th.ended_at = None;
                    if cuts {
                        cut(&mut self.rows, &mut self.slowest, row, &ended);
                    }
                }

                let th = self.threads.get_mut(&key).unwrap();
                let item = MItem {
                    depth: s.depth,
                    start: s.start,
                    end: s.end,
                    sep: !call,
                    ns,
                    insns,
                    outer,
                    paths,
                };
                let merge = th.items.last().is_some_and(|top| {
                    top.depth == s.depth && !unknown_start && !(top.sep && top.end == s.start)
                });
                if merge {
                    let top = th.items.last_mut().unwrap();
                    top.end = s.end;
                    top.sep = item.sep;
                    top.ns += item.ns;
                    top.insns += item.insns;
                    for (f, (a, b)) in item.outer {
                        add_to(top.outer.entry(f).or_default(), a, b);
                    }
                    if let (Some(a), Some(b)) = (&mut top.paths, item.paths) {
                        for (path, (i, n)) in b {
                            add_to(a.entry(path).or_default(), i, n);
                        }
                    }
                } else {
                    th.items.push(item);
                }
                if gap {
                    let items = std::mem::take(&mut th.items);
                    settle(&mut self.folded, row, items);
                }
            }

            pub fn finish(mut self) -> Aggregate {
                let mut keys: Vec<(u32, u32)> = self.threads.keys().copied().collect();
                keys.sort_unstable();
                for key in keys {
                    let th = self.threads.remove(&key).unwrap();
                    let row = self.opts.per_thread.then_some(key);
                    cut(&mut self.rows, &mut self.slowest, row, &th.ended);
                    settle(&mut self.folded, row, th.items);
                }
                let mut slowest: Vec<Slow> = self.slowest.into_iter().map(|Reverse(s)| s).collect();
                slowest.sort_unstable_by(|a, b| b.cmp(a));
                canonical(Aggregate {
                    funcs: self.funcs,
                    rows: self.rows,
                    folded: self
                        .folded
                        .into_iter()
                        .map(|((thread, path), (insns, ns))| FoldedPath {
                            thread,
                            path,
                            insns,
                            ns,
                        })
                        .collect(),
                    slowest: slowest.into_iter().map(Slow::into_call).collect(),
                    ..Aggregate::default()
                })
            }
        }

        fn settle(
            folded: &mut BTreeMap<(ThreadKey, Vec<FuncId>), (u64, u64)>,
            row: ThreadKey,
            items: Vec<MItem>,
        ) {
            for item in items {
                for (path, (i, n)) in item.paths.into_iter().flatten() {
                    add_to(folded.entry((row, path)).or_default(), i, n);
                }
            }
        }

        fn cut(
            rows: &mut BTreeMap<(ThreadKey, FuncId), FuncStats>,
            slowest: &mut BinaryHeap<Reverse<Slow>>,
            row: ThreadKey,
            ended: &[Ended],
        ) {
            for e in ended.iter().filter(|e| !e.cut) {
                if let Some(st) = rows.get_mut(&(row, e.func)) {
                    st.cut += 1;
                }
            }
            let mut v = std::mem::take(slowest).into_vec();
            for Reverse(s) in &mut v {
                if ended.iter().any(|e| e.seq == s.seq.0) {
                    s.call.cut = true;
                }
            }
            *slowest = v.into();
        }
    }

    /// Random ops of one thread: calls and returns (mostly matching, some
    /// returning elsewhere), tail calls, untraced time, gaps, equal stamps.
    fn random_ops(rng: &mut fastrand::Rng, n: usize) -> Vec<Op> {
        const FUNCS: [u64; 5] = [MAIN, A, B, F, 0x5000];
        let func = |rng: &mut fastrand::Rng| FUNCS[rng.usize(..FUNCS.len())];
        let (mut t, mut i) = (0u64, 0u64);
        let mut next = |rng: &mut fastrand::Rng| {
            t += rng.u64(..4);
            i += rng.u64(..4);
            Stamp {
                time: t,
                insns: i,
                cycles: (rng.u8(..8) == 0).then(|| rng.u64(..3)).into(),
            }
        };
        let mut at_fn = func(rng);
        let mut rets: Vec<u64> = Vec::new();
        let mut ops = vec![Op::Enabled {
            at: next(rng),
            ip: at_fn + rng.u64(..2) * 0x40,
            first: true,
        }];
        let mut off = false;
        for _ in 0..n {
            let at = next(rng);
            if off {
                at_fn = func(rng);
                ops.push(Op::Enabled {
                    at,
                    // At an entry: a signal handler.
                    ip: at_fn + rng.u64(..2) * 0x40,
                    first: false,
                });
                off = false;
                continue;
            }
            let from = at_fn + 0x10 + rng.u64(..0x80);
            match rng.u8(..20) {
                0..=7 => {
                    let to = func(rng);
                    ops.push(Op::Call {
                        at,
                        from,
                        to,
                        ret: from + 5,
                        raw_time: at.time,
                    });
                    rets.push(from + 5);
                    at_fn = to;
                }
                8..=14 => {
                    let to = match rets.pop() {
                        Some(r) if rng.u8(..8) != 0 => r,
                        _ => func(rng) + 0x20 + rng.u64(..0x20),
                    };
                    ops.push(Op::Return { at, from, to });
                    at_fn = to & !0xfff;
                }
                15 | 16 => {
                    let to = func(rng) + rng.u64(..2) * 0x30;
                    ops.push(Op::Jump {
                        at,
                        from,
                        to,
                        inside: false,
                    });
                    at_fn = to & !0xfff;
                }
                17 | 18 => {
                    ops.push(Op::Disabled {
                        at,
                        ip: from,
                        kernel: rng.bool(),
                    });
                    off = true;
                }
                _ => {
                    ops.push(Op::Gap {
                        at,
                        kind: if rng.bool() {
                            GapKind::Overflow
                        } else {
                            GapKind::LostData
                        },
                        offset: 0,
                    });
                    rets.clear();
                    off = true;
                }
            }
        }
        ops.push(Op::End { at: next(rng) });
        ops
    }

    /// The aggregator agrees with the plain model on random traces of a
    /// few threads whose slices interleave, with every option.
    #[test]
    fn aggregator_agrees_with_the_plain_model() {
        let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
        for round in 0..400 {
            let opts = AggregateOptions {
                per_thread: rng.bool(),
                folded: rng.bool(),
                slowest: rng.usize(..6),
                range: (rng.u8(..4) == 0).then(|| {
                    let a = rng.u64(..200);
                    (a, a + rng.u64(..200))
                }),
                filtered: rng.bool(),
            };
            let mut agg = Aggregator::new(opts.clone(), 0);
            let mut model = model::Model::new(opts.clone());
            let threads = 1 + rng.u32(..3);
            let mut stacks: Vec<(ThreadStack, Vec<Op>, usize)> = (0..threads)
                .map(|t| {
                    let n = rng.usize(..120);
                    (
                        ThreadStack::close_order(1 + t % 2, 10 + t),
                        random_ops(&mut rng, n),
                        0,
                    )
                })
                .collect();
            let mut slices = Vec::new();
            while let Some(k) = (0..stacks.len()).find(|&k| stacks[k].2 < stacks[k].1.len()) {
                // Runs of one thread, then another.
                let k = if rng.bool() {
                    k
                } else {
                    rng.usize(k..stacks.len())
                };
                let (stack, ops, next) = &mut stacks[k];
                for _ in 0..1 + rng.usize(..8) {
                    if let Some(op) = ops.get(*next) {
                        stack.push(op, &Map, &mut |s| slices.push(s));
                        *next += 1;
                    }
                }
                // Dropped once added, so that the addresses of their
                // functions (owned: one per resolution) are reused unless
                // the aggregator keeps them.
                for s in slices.drain(..) {
                    let window = (rng.u8(..3) == 0).then(|| (rng.u64(..100), rng.u64(..100)));
                    model.add(s.clone(), window);
                    agg.add(&s, window);
                }
            }
            let mut stats = StackStats::default();
            for (stack, _, _) in &stacks {
                stats.add(stack.stats());
            }
            let (a, m) = (agg.finish(), model.finish());
            let at = format!("round {round}, {opts:?}");
            assert_eq!(a.funcs, m.funcs, "{at}");
            assert_eq!(a.rows, m.rows, "{at}");
            assert_eq!(a.folded, m.folded, "{at}");
            assert_eq!(a.slowest, m.slowest, "{at}");
            if opts.range.is_none() {
                // The calls that are neither tail calls, roots nor
                // untraced starts are the stacks' call instructions; the
                // tail calls theirs, but for those out of a frame dropped
                // as empty (then the target is its segment's root).
                let sum = |f: fn(&FuncStats) -> u64| -> u64 {
                    a.rows
                        .iter()
                        .filter(|((_, id), _)| !a.funcs[*id as usize].pseudo)
                        .map(|(_, st)| f(st))
                        .sum()
                };
                let calls = sum(|st| st.calls - st.tail_calls - st.roots - st.unknown_start);
                assert_eq!(calls, stats.calls, "{at}");
                let tail = sum(|st| st.tail_calls);
                assert!(
                    tail <= stats.tail_calls && tail + stats.empty_frames >= stats.tail_calls,
                    "{at}: {tail} tail calls, {stats:?}"
                );
            }
        }
    }

    /// Each call is counted by how its frame was entered: a call
    /// instruction, a tail call (a jump to an entry), a root frame (the
    /// trace begins at an entry), a signal handler, an untraced start.
    #[test]
    fn calls_are_counted_by_how_they_were_entered() {
        let ops = [
            // main's entry: a root frame.
            Op::Enabled {
                at: at(0, 0),
                ip: MAIN,
                first: true,
            },
            call(10, 10, MAIN + 0x10, A),
            // a tail-calls b, which tail-calls f.
            Op::Jump {
                at: at(20, 20),
                from: A + 0x20,
                to: B,
                inside: false,
            },
            Op::Jump {
                at: at(30, 30),
                from: B + 0x20,
                to: F,
                inside: false,
            },
            ret(40, 40, F + 0x50, MAIN + 0x15),
            // A signal: f's entry from the kernel, then back to main.
            Op::Disabled {
                at: at(50, 50),
                ip: MAIN + 0x30,
                kernel: true,
            },
            Op::Enabled {
                at: at(60, 50),
                ip: F,
                first: false,
            },
            ret(70, 60, F + 0x50, MAIN + 0x30),
            // A jump within main is no tail call; a jump to b's middle
            // neither (nothing of b is open).
            Op::Jump {
                at: at(80, 70),
                from: MAIN + 0x40,
                to: MAIN + 0x60,
                inside: false,
            },
            call(90, 80, MAIN + 0x60, B),
            Op::Jump {
                at: at(95, 85),
                from: B + 0x10,
                to: B + 0x40,
                inside: false,
            },
            ret(100, 90, B + 0x50, MAIN + 0x65),
            // A gap, and a segment that begins inside a, which tail-calls
            // b: an untraced start and a tail call.
            Op::Gap {
                at: at(110, 100),
                kind: GapKind::Overflow,
                offset: 0,
            },
            Op::Enabled {
                at: at(120, 100),
                ip: A + 0x10,
                first: false,
            },
            Op::Jump {
                at: at(130, 110),
                from: A + 0x20,
                to: B,
                inside: false,
            },
            Op::End { at: at(140, 120) },
        ];
        let a = aggregate(&ops, AggregateOptions::default());
        let entries = |name| {
            let r = row(&a, name);
            (r.calls, r.tail_calls, r.roots, r.unknown_start)
        };
        assert_eq!(entries("main"), (1, 0, 1, 0));
        assert_eq!(entries("a"), (2, 0, 0, 1));
        assert_eq!(entries("b"), (3, 2, 0, 0));
        // Tail-called once, and once entered as a signal handler.
        assert_eq!(entries("f"), (2, 1, 1, 0));
        let kernel = row(&a, "[kernel]");
        assert_eq!((kernel.calls, kernel.tail_calls, kernel.roots), (1, 0, 0));
        // A window from 35 on: the tail call into f before it still counts.
        let w = aggregate(
            &ops,
            AggregateOptions {
                range: Some((35, 200)),
                ..AggregateOptions::default()
            },
        );
        let f = w.funcs.iter().position(|f| &*f.name == "f").unwrap() as FuncId;
        let f = w.rows[&(None, f)];
        assert_eq!((f.calls, f.tail_calls, f.roots), (2, 1, 1));
    }

    /// `--slowest N` with many threads: marking the calls a thread's end
    /// cut among the slowest took O(N) per thread (the heap rebuilt and
    /// scanned), 30 s for 60,000 threads and N = 60,000. Now O(calls):
    /// counted, not timed (the time is `scripts/bench`'s business), as the
    /// entries marking looked at, which must double with the threads and
    /// stay within the calls that ended.
    #[test]
    fn marking_cut_calls_is_linear_in_threads() {
        let run = |threads: u32| {
            let opts = AggregateOptions {
                per_thread: false,
                folded: false,
                slowest: threads as usize,
                range: None,
                filtered: false,
            };
            let mut agg = Aggregator::new(opts, 0);
            for t in 0..threads {
                let mut stack = ThreadStack::close_order(1, t);
                let d = 10 + u64::from(t % 1000);
                for op in [call(0, 0, MAIN + 0x10, A), ret(d, d, A + 0x10, MAIN + 0x15)] {
                    stack.push(&op, &Map, &mut |s| agg.add(&s, None));
                }
            }
            let (a, steps) = agg.finish_counted();
            assert_eq!(a.slowest.len(), threads as usize);
            assert!(
                a.slowest.iter().all(|c| c.cut),
                "each thread's last call ends at its trace's end, so was cut by it"
            );
            steps
        };
        let (n, two_n) = (run(2_000), run(4_000));
        assert!(
            n <= 2 * 2_000,
            "marking cut calls looked at {n} entries for 2,000 threads of one call each"
        );
        assert_eq!(
            two_n,
            2 * n,
            "marking cut calls looked at {n} entries for 2,000 threads, {two_n} for 4,000: \
             not linear in threads any more"
        );
    }

    /// The aggregate does not depend on how the threads' slices
    /// interleave, only on each thread's own order: from per-cpu buffers
    /// they interleave by chunk, so by the chunk size, and `ptdec report`
    /// must give the same answer for any. Ties between calls of equal
    /// length and start in different threads, and functions first met in
    /// another order, are common here (times step by 0-3).
    #[test]
    fn the_aggregate_does_not_depend_on_how_threads_interleave() {
        let mut rng = fastrand::Rng::with_seed(0x2545_f491_4f6c_dd1d);
        for round in 0..300 {
            let opts = AggregateOptions {
                per_thread: rng.bool(),
                folded: rng.bool(),
                slowest: rng.usize(1..6),
                range: None,
                filtered: rng.bool(),
            };
            // Every thread's slices, in its own order, with their windows.
            let threads = 2 + rng.usize(..3);
            type Window = Option<(u64, u64)>;
            let per_thread: Vec<Vec<(Slice, Window)>> = (0..threads)
                .map(|t| {
                    let t = t as u32;
                    let mut stack = ThreadStack::close_order(1 + t % 2, 10 + t);
                    let mut v = Vec::new();
                    let n = rng.usize(..100);
                    for op in random_ops(&mut rng, n) {
                        stack.push(&op, &Map, &mut |s| v.push(s));
                    }
                    v.into_iter()
                        .map(|s| {
                            let w = (rng.u8(..3) == 0).then(|| (rng.u64(..100), rng.u64(..100)));
                            (s, w)
                        })
                        .collect()
                })
                .collect();
            let run = |rng: &mut fastrand::Rng| {
                let mut agg = Aggregator::new(opts.clone(), 0);
                let mut next = vec![0; threads];
                while let Some(k) = (0..threads).find(|&k| next[k] < per_thread[k].len()) {
                    let k = rng.usize(k..threads);
                    for _ in 0..1 + rng.usize(..6) {
                        if let Some((s, w)) = per_thread[k].get(next[k]) {
                            agg.add(s, *w);
                            next[k] += 1;
                        }
                    }
                }
                agg.finish()
            };
            let (a, b) = (run(&mut rng), run(&mut rng));
            let at = format!("round {round}, {opts:?}");
            assert_eq!(a.funcs, b.funcs, "{at}");
            assert_eq!(a.rows, b.rows, "{at}");
            assert_eq!(a.folded, b.folded, "{at}");
            assert_eq!(a.slowest, b.slowest, "{at}");
        }
    }

    #[test]
    fn a_window_cuts_times_to_it() {
        let ops = [
            Op::Enabled {
                at: at(0, 0),
                ip: MAIN,
                first: true,
            },
            call(10, 10, MAIN + 0x10, A),
            ret(40, 40, A + 0x50, MAIN + 0x15),
            call(60, 60, MAIN + 0x20, B),
            ret(70, 70, B + 0x50, MAIN + 0x25),
            Op::End { at: at(100, 100) },
        ];
        let a = aggregate(
            &ops,
            AggregateOptions {
                range: Some((20, 50)),
                ..AggregateOptions::default()
            },
        );
        assert_eq!(row(&a, "a").total_ns, 20);
        assert_eq!(row(&a, "main").total_ns, 30);
        assert!(a.funcs.iter().all(|f| &*f.name != "b"), "b is outside");
    }
}
