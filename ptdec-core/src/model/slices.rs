//! What the call stacks hand on: [`Slice`]s of a thread's nesting calls,
//! untraced time and gaps, each naming its [`Func`]; and what they ask of
//! the code's symbols ([`Resolver`]). The stacks stage (`crate::stack`)
//! makes them; the sinks (the FTF writer, the report) take them.

use std::num::NonZeroU64;
use std::sync::Arc;

use super::ops::{GapKind, Mark, Stamp};

/// A function as the stack knows it.
///
/// Aligned to a cache line: in an `Arc`, its fields then lie on a line of
/// their own, apart from the reference counts. The call stacks clone and
/// drop a function's `Arc` for every call while the FTF thread reads its
/// fields for every slice; sharing one line, the two cores took it from
/// each other each time (at `-j2`, `function_of` took 3.2x and the FTF
/// writer's event 1.6x the samples they took on one core).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[repr(align(64))]
pub struct Func {
    /// Its first instruction (for code without a symbol: the address the
    /// frame was entered at).
    pub entry: u64,
    /// Symbol name, or a fallback such as `libfoo.so+0x1234`.
    pub name: Arc<str>,
    /// The file it comes from (as recorded), empty when unknown.
    pub module: Arc<str>,
}

/// A function as the call stacks hand it on: in every frame and slice, to
/// the FTF writer or the report.
///
/// A function with a symbol is interned for the whole run
/// ([`FuncRef::interned`]): a `&'static Func`, copied without a reference
/// count. As an `Arc`, every call cost an atomic increment when its frame
/// opened and a decrement when its slice was dropped, and at `-j2` the
/// count's cache line went back and forth between the cores: with
/// interned functions one core takes 0.84 s of user CPU instead of 0.87 s
/// to write the FTF of the bench's 10 MB interpreter trace (shapes: 0.71
/// s instead of 0.74 s; `ptdec report`: 0.72 s instead of 0.74 s).
/// Interned functions are never freed: there is one per symbol the trace
/// reaches per address it was loaded at, bounded by the symbol tables the
/// run holds anyway. Code without a symbol gets a function per address
/// ([`FuncRef::owned`], counted and freed with its last slice): a hostile
/// trace can reach any number of those.
#[derive(Clone)]
pub struct FuncRef(FuncPtr);

#[derive(Clone)]
enum FuncPtr {
    Interned(&'static Func),
    Owned(Arc<Func>),
}

impl FuncRef {
    /// `f`, interned: one `&'static Func` for all equal functions of the run.
    pub fn interned(f: Func) -> FuncRef {
        use std::collections::HashSet;
        use std::sync::{Mutex, OnceLock};
        static FUNCS: OnceLock<Mutex<HashSet<&'static Func>>> = OnceLock::new();
        let mut funcs = FUNCS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(&known) = funcs.get(&f) {
            return FuncRef(FuncPtr::Interned(known));
        }
        let f: &'static Func = Box::leak(Box::new(f));
        funcs.insert(f);
        FuncRef(FuncPtr::Interned(f))
    }

    /// `f`, not interned: freed with its last `FuncRef`.
    pub fn owned(f: Func) -> FuncRef {
        FuncRef(FuncPtr::Owned(Arc::new(f)))
    }

    /// The address of the `Func`: the same for clones, and (for an owned
    /// one) not reused while a clone is alive.
    #[inline]
    pub fn addr(&self) -> usize {
        let f: &Func = self;
        std::ptr::from_ref(f) as usize
    }
}

impl std::ops::Deref for FuncRef {
    type Target = Func;
    #[inline]
    fn deref(&self) -> &Func {
        match &self.0 {
            FuncPtr::Interned(f) => f,
            FuncPtr::Owned(f) => f,
        }
    }
}

/// Equal when the functions are (as `Arc`s compared).
impl PartialEq for FuncRef {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for FuncRef {}

impl std::fmt::Debug for FuncRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// See [`Resolver::place_and_span`]: addresses `(lo, hi)`, both left out, in
/// the known function at `func` over perf times `[since, until)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlaceSpan {
    pub lo: u64,
    pub hi: u64,
    pub since: u64,
    pub until: u64,
    pub func: u64,
}

impl PlaceSpan {
    /// Whether the span answers for `addr` at `time`.
    #[inline]
    pub fn holds(&self, addr: u64, time: u64) -> bool {
        self.lo < addr && addr < self.hi && self.since <= time && time < self.until
    }

    /// Whether the span answers for `a` and `b` at `time`.
    #[inline]
    pub fn holds_both(&self, a: u64, b: u64, time: u64) -> bool {
        self.since <= time && time < self.until && self.lo < a.min(b) && a.max(b) < self.hi
    }
}

/// What [`Resolver::place_and_span`] answers.
pub type PlaceAndSpan = ((bool, Option<u64>), Option<PlaceSpan>);

/// One worker's way to ask the stacks' resolver ([`JumpSpans::worker`]):
/// `(pid, addr, time)` to what [`Resolver::place_over`] answers.
pub type SpanOf<'s> = Box<dyn FnMut(u32, u64, u64) -> (PlaceAndSpan, u64, u64) + 's>;

/// Given to the decode by the stage that keeps call stacks, so that the
/// decode workers can tell a jump that stays inside one function
/// (`Op::Jump`'s `inside`) and leave out those the stacks would make
/// nothing of (`decode::runs`); [`JumpSpans::worker`] is called once per
/// worker.
pub trait JumpSpans: Sync {
    /// One worker's way to ask.
    fn worker(&self) -> SpanOf<'_>;
}

/// [`JumpSpans`] with a resolver of its own for each worker, made by
/// `make` (each keeps its own caches).
pub struct ResolverSpans<'a> {
    pub make: Box<dyn Fn() -> Box<dyn Resolver + 'a> + Sync + 'a>,
}

impl JumpSpans for ResolverSpans<'_> {
    fn worker(&self) -> SpanOf<'_> {
        let resolver = (self.make)();
        Box::new(move |pid, addr, time| resolver.place_over(pid, addr, time))
    }
}

/// Where function identity comes from.
pub trait Resolver {
    /// The function containing `addr` in process `pid` at perf time `time`,
    /// or `None` when no symbol covers it.
    fn function_of(&self, pid: u32, addr: u64, time: u64) -> Option<FuncRef>;

    /// Whether `addr` is the first instruction of a function.
    fn is_function_entry(&self, pid: u32, addr: u64, time: u64) -> bool;

    /// Both questions a jump asks of its target, in one: whether `addr`
    /// is a function's first instruction, and the entry of the function
    /// containing it (`None`: no symbol covers it). Resolvers with a
    /// cache answer with one lookup and no reference count (a jump's two
    /// lookups and `Arc` showed in the profile of an interpreter).
    fn place_of(&self, pid: u32, addr: u64, time: u64) -> (bool, Option<u64>) {
        (
            self.is_function_entry(pid, addr, time),
            self.function_of(pid, addr, time).map(|f| f.entry),
        )
    }

    /// [`Resolver::place_of`], and the addresses around `addr` where it
    /// gives one answer, no entry among them: with `Some(span)`, for every
    /// `a` with `span.lo < a < span.hi` and every `time` in
    /// `[span.since, span.until)`, `place_of(pid, a, time)` is `(false,
    /// Some(span.func))`. `None` where the resolver cannot say. A stack
    /// keeps the spans its jumps met (`stack::Spans`), so that a jump
    /// inside a function asks nothing.
    fn place_and_span(&self, pid: u32, addr: u64, time: u64) -> PlaceAndSpan {
        (self.place_of(pid, addr, time), None)
    }

    /// [`Resolver::place_and_span`], and the perf times `[since, until)`
    /// over which `place_of(pid, addr, _)` gives that answer (`since ==
    /// until` when the resolver cannot say). A decode worker keeps those
    /// of the jump targets no span holds, as functions' entries
    /// (`decode::runs`).
    fn place_over(&self, pid: u32, addr: u64, time: u64) -> (PlaceAndSpan, u64, u64) {
        (self.place_and_span(pid, addr, time), time, time)
    }

    /// [`Resolver::function_of`], and the perf times `[since, until)` over
    /// which `addr` stays in that function (`since == until` when the
    /// resolver cannot say). A stack keeps those of its calls' targets
    /// (`stack::Callees`).
    fn function_over(&self, pid: u32, addr: u64, time: u64) -> (Option<FuncRef>, u64, u64) {
        (self.function_of(pid, addr, time), time, time)
    }

    /// Whether thread `tid` of process `pid` ran a new program (exec) after
    /// perf time `after`, up to `upto`, and `ip` is code of that program:
    /// tracing that stopped at `after` and resumed at `ip` at `upto` did
    /// not come back to the old program. `false` when the resolver does not
    /// know (no sideband).
    fn exec_between(&self, _pid: u32, _tid: u32, _after: u64, _upto: u64, _ip: u64) -> bool {
        false
    }

    /// A stand-in for code at `addr` without a symbol; the stack never
    /// compares such functions with others.
    fn unknown(&self, _pid: u32, addr: u64, _time: u64) -> FuncRef {
        FuncRef::owned(Func {
            entry: addr,
            name: format!("0x{addr:x}").into(),
            module: "".into(),
        })
    }
}

/// What a slice stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SliceKind {
    /// A function call. `unknown_start`: the call was not seen (the trace or
    /// segment began inside it, or it was created retroactively), so the
    /// slice starts at the segment's first instant. `call_time`: the raw
    /// time of the call that opened it (`Op::Call`'s `raw_time`), when a
    /// call did (not a tail call, a resume or a retroactive frame).
    Call {
        func: FuncRef,
        unknown_start: bool,
        call_time: Option<u64>,
        /// Ended by a return that matched no open frame
        /// ([`StackStats::unmatched_unwinds`](crate::stack::StackStats::unmatched_unwinds)): its real end is unknown.
        unmatched: bool,
    },
    /// Untraced time: `kernel` for syscalls and interrupts, otherwise switched
    /// out or tracing off. `ip` is where tracing stopped.
    Untraced { kernel: bool, ip: u64 },
    /// A hole in the trace; the stack restarted after it.
    Gap { kind: GapKind, offset: u64 },
}

/// A completed slice of one thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slice {
    pub pid: u32,
    pub tid: u32,
    /// Nesting level relative to the segment's base frame (0); negative for
    /// frames created retroactively above it. Gaps have depth 0.
    pub depth: i32,
    /// Its number on its thread, from 1: a call's when its frame opened,
    /// untraced time's and a gap's when they ended. The same however the
    /// decode was cut into chunks (stacks built ahead number their frames
    /// from their stretch's start, renumbered when stitched).
    pub id: NonZeroU64,
    /// The `id` of the slice one level below that encloses it (the
    /// caller's frame; for untraced time, the frame it interrupted), or
    /// `None` at a root. Exact when the sink asks for it
    /// ([`SliceSink::needs_parents`]); otherwise a slice at the bottom of
    /// its segment says `None` even where a frame found later above the
    /// segment's first one encloses it (`crate::stack`'s retroactive
    /// frames).
    pub parent: Option<NonZeroU64>,
    pub start: Stamp,
    pub end: Stamp,
    pub kind: SliceKind,
}

impl Slice {
    /// Instructions executed inside the slice, callees included.
    pub fn insns(&self) -> u64 {
        self.end.insns.saturating_sub(self.start.insns)
    }

    /// Core cycles inside the slice, when both ends have a cycle count.
    pub fn cycles(&self) -> Option<u64> {
        Some(
            self.end
                .cycles
                .get()?
                .saturating_sub(self.start.cycles.get()?),
        )
    }
}

/// The part of a span from `t0` to `t1` (perf time) inside the window
/// `range` (`[start, end)`: `--start`/`--duration`), as every sink cuts
/// slices to it: `None` when the span lies outside (a span of no length
/// at the window's start is inside, one at its end outside), else its
/// start and end cut to the window. Without a window, the span itself (an
/// end before the start read as the start).
#[inline]
pub fn cut_to_window(range: Option<(u64, u64)>, t0: u64, t1: u64) -> Option<(u64, u64)> {
    let Some((rs, re)) = range else {
        return Some((t0, t1.max(t0)));
    };
    if !(t0 < re && (t1 > rs || t0 >= rs)) {
        return None;
    }
    let lo = t0.max(rs);
    Some((lo, t1.min(re).max(lo)))
}

/// How a slice's frame was entered. The stacks say whether a call
/// instruction opened a frame (`call_time`) and whether its start was
/// traced; a frame that neither a call nor an untraced start explains was
/// entered by a tail call, or is a root frame or a signal handler. A tail
/// call ends the frame it leaves and opens its own at that very stamp and
/// depth; a signal handler starts where the untraced time before it (one
/// level below the interrupted frame) ends, a root frame where its
/// segment begins (after nothing, a gap or the untraced time of a
/// restart). So: a tail call when the sibling before it, at its depth, is
/// a call that ended at its start ([`Siblings`] remembers it in close
/// order). The report's counts and the Parquet dataset's `kind` both come
/// from here.
///
/// One case reads as a root that the stacks count as a tail call: a
/// segment that begins on a jump to a function's entry, its first frame
/// ending at the instant it began (and so dropped as empty). The jump's
/// target is then the segment's first frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// Untraced time or a gap.
    NotACall,
    /// A call instruction.
    Call,
    /// The start was not traced.
    UnknownStart,
    Tail,
    /// A root frame or a signal handler.
    Root,
}

impl Entry {
    /// How slice `s` was entered, `follows_call` saying whether the
    /// sibling before it at its depth is a call that ended at its start.
    #[inline]
    pub fn of(s: &Slice, follows_call: bool) -> Entry {
        match &s.kind {
            SliceKind::Call {
                unknown_start: true,
                ..
            } => Entry::UnknownStart,
            SliceKind::Call {
                call_time: Some(_), ..
            } => Entry::Call,
            SliceKind::Call { .. } if follows_call => Entry::Tail,
            SliceKind::Call { .. } => Entry::Root,
            _ => Entry::NotACall,
        }
    }
}

/// A thread's latest slice closed at each depth, shallowest first, for
/// telling how the next one was entered ([`Entry`]) in close order.
#[derive(Debug, Clone, Default)]
pub struct Siblings(Vec<(i32, Stamp, bool)>);

impl Siblings {
    /// How slice `s` (the thread's next in close order) was entered; notes
    /// it as the latest slice at its depth. Deeper slices were its
    /// children: no later slice follows them as a sibling.
    #[inline]
    pub fn entry(&mut self, s: &Slice) -> Entry {
        let mut before = None;
        while let Some(&(depth, end, call)) = self.0.last() {
            if depth < s.depth {
                break;
            }
            if depth == s.depth {
                before = Some((end, call));
            }
            self.0.pop();
        }
        let entry = Entry::of(s, before.is_some_and(|(end, call)| call && end == s.start));
        self.0.push((s.depth, s.end, entry != Entry::NotACall));
        entry
    }
}

/// Where the stacks' slices, thread names and marks go: the FTF writer
/// (`crate::emit::Emitter`, or a queue to it on its own thread), the
/// report's aggregation, or a filter in front of either
/// (`crate::min_duration`). Slices of one thread come in the order the
/// stacks close or hold them; threads interleave in any order, and a sink's
/// result must not depend on that interleaving. `Error` is the sink's own.
pub trait SliceSink {
    type Error;
    /// Names thread `tid` of process `pid` (`renames`: later names, with
    /// the perf time of each).
    fn thread(
        &mut self,
        pid: u32,
        tid: u32,
        name: &str,
        process: &str,
        renames: &[(u64, String)],
    ) -> Result<(), Self::Error>;
    /// One slice, by reference: taken by value, it was copied once more
    /// by the closure that hands the stacks' slices to the sink, to pass
    /// it on (for `ptdec report`, 1% of the CPU time on the bench's
    /// interp trace). A sink that keeps the slice clones it.
    fn slice(&mut self, s: &Slice) -> Result<(), Self::Error>;
    /// The perf time written as 0.
    fn set_origin(&mut self, origin: u64);
    /// One mark of thread `tid` at `at`.
    fn mark(&mut self, pid: u32, tid: u32, at: &Stamp, mark: &Mark) -> Result<(), Self::Error>;
    /// Whether this sink's output is the same byte for byte however the
    /// threads' slices interleave: the report's aggregate is; an FTF file
    /// holds the same slices in another order of records. The decode may
    /// then cut per-cpu traces as it likes
    /// ([`crate::decode::DecodeOptions::any_interleaving`]).
    fn any_interleaving(&self) -> bool {
        false
    }
    /// Whether this sink reads [`Slice::parent`] and needs it exact. The
    /// stacks then hand out slices in close order
    /// (`crate::stack::ThreadStack::close_order`) and hold each slice at
    /// the bottom of a segment until they know its parent: a frame found
    /// later above the segment's first one, or none when the segment ends
    /// first (`crate::stack::ThreadStack::placing_roots`).
    fn needs_parents(&self) -> bool {
        false
    }
}
