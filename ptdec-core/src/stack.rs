//! Call-stack reconstruction: one [`ThreadStack`] per thread turns the
//! decoding stage's [`Op`]s into completed, nested [`Slice`]s that `emit`
//! writes as FTF duration-complete events. Pure state machine: function
//! identity comes from a [`Resolver`] (symbols and the sideband timeline in
//! production, a map in tests).
//!
//! # Rules
//!
//! * The first `Enabled` of a segment (trace start, or after a gap) opens the
//!   *base* frame: the function containing its ip. Its start is the segment's
//!   first instant; it is marked `unknown_start` unless the ip is the
//!   function's entry.
//! * `Call` pushes a frame that remembers its return address (`Op::Call`'s
//!   `ret`, the address after the call instruction). A call to its own
//!   return address that is not a function entry (`call 1f; 1: pop`, PIC
//!   code reading its own address) is not a call and is ignored, as libipt
//!   and hardware return compression ignore it.
//! * `Return` to `to` pops to the matching frame, searching from the top:
//!   first a frame whose return address is exactly `to`; then, below the
//!   top, a frame whose function contains `to`. Frames above the match are
//!   skipped (longjmp, exceptions) and end at the return. No match: the
//!   return goes above the known stack. Every open frame ends, and the
//!   function returned into gets a frame *retroactively*: it starts at the
//!   segment's first instant, one level above the old bottom (depth -1, -2,
//!   ... relative to the base frame), marked `unknown_start`.
//! * `Jump` to another function's entry is a tail call (or a PLT stub's jump):
//!   the top frame ends and the target starts at the same depth, keeping the
//!   call site. A jump into the middle of a function that is open lower on
//!   the stack (longjmp is a `jmp`) pops to it. Any other jump changes nothing.
//! * `Disabled` starts untraced time, written as an `Untraced` slice one level
//!   below the top frame when tracing resumes (`kernel`: syscall or
//!   interrupt; otherwise switched out or not traced). When `Enabled` resumes
//!   in a different function: after an exec of the thread (the resolver
//!   says so: a COMM with the exec flag in the sideband, and the ip in a
//!   mapping made since) every frame ends where tracing stopped and the new
//!   program starts a new segment; otherwise an open frame of that function
//!   is popped to (sigreturn into an interrupted caller), a function entry
//!   is pushed (a signal handler), anything else restarts the stack as a
//!   new segment.
//!   A return that matches no frame while a signal handler is open ends the
//!   handler (and what it left open): it returns to the signal trampoline,
//!   whose rt_sigreturn resumes the interrupted frame.
//! * `Gap` ends all frames and untraced time at the gap, and the stack stays
//!   empty until the next `Enabled` starts a new segment: never guessed. The
//!   gap itself is a `Gap` slice from the gap to that `Enabled` (or `End`).
//! * `End` ends untraced time, gaps and all frames at its stamp. A later
//!   `Enabled` starts a new segment.
//! * A thread's stack holds at most [`MAX_DEPTH`] frames. A call, or a
//!   signal handler's entry, past them ends every frame there and starts a
//!   new segment at the call's source, as a restart does: no real program
//!   gets that deep (a frame takes at least its 8-byte return address, and
//!   a thread's stack is 8 MiB by default), but a corrupt or hostile trace
//!   of calls that never return would hold a frame for each.
//! * `Mark` (PTWRITE, power, event trace) changes nothing: not the frames,
//!   not the state, not the latest stamp. A `Disabled` while no segment is
//!   open (a thread whose trace so far held only marks) ends nothing and is
//!   ignored.
//! * A frame whose call was not seen and that ends at the very stamp it
//!   began (tracing resumed straight into a gap, as at code without an
//!   image) is dropped: nothing was traced in it.
//!
//! # Output order
//!
//! Slices come out when they end, children before parents, except that a
//! slice starting at the same instant as its parent (same time, instruction
//! count or cycle count) is held back and follows its parent: a reader that
//! breaks timestamp ties by file order (Perfetto's sorter does) then sees the
//! parent first and nests them right. Held-back slices are few: only those
//! tied with an open ancestor. A thread holds at most [`MAX_HELD`] of them:
//! past that (PT whose timing packets never move the time, corrupt or
//! hostile, makes every slice tie with its parent, and would hold them all
//! until the parent closes) a tied slice goes out as it closes, before its
//! parent, and is counted ([`StackStats::held_past_bound`]); the summary
//! warns that Perfetto may nest those wrongly. A speculative stack gives up
//! at the bound, and [`ThreadStack::apply`] declines a stretch that could
//! pass it over the real stack's, so the output is the same for any `-j`
//! and chunk size.
//!
//! In close order ([`ThreadStack::close_order`], for `report`, which sums
//! children into their parent) nothing is held back: every slice comes out
//! when it ends, children before parents without exception.
//!
//! # Speculative mode
//!
//! [`ThreadStack::speculative`] runs the same rules on a decode worker
//! above an unknown entry stack, recording what it assumes about it
//! ([`Entry`]); [`ThreadStack::apply`] checks that against the real stack
//! and applies the outcome (`crate::stitch` says when and why).

use std::collections::VecDeque;
use std::num::NonZeroU64;

use crate::model::ops::{Base, Cycles, GapKind, Mark, Op, Stamp};

/// The most frames a thread's stack holds (module doc): past them the
/// stack restarts ([`StackStats::depth_restarts`]), so that its memory
/// stays bounded (about 100 MB per thread at most) whatever the trace.
#[cfg(not(test))]
pub const MAX_DEPTH: usize = 1 << 20;
/// [`MAX_DEPTH`] in this crate's unit tests, which run the same rule
/// over a few thousand ops rather than millions (the deepest other test
/// holds 8,192 frames).
#[cfg(test)]
pub const MAX_DEPTH: usize = 1 << 14;

/// The most slices a thread holds back for the parent they tie with (the
/// module doc's output order): about 150 MB of slices per thread at most.
#[cfg(not(test))]
pub const MAX_HELD: usize = 1 << 20;
/// [`MAX_HELD`] in this crate's unit tests (the most the other tests hold
/// is 2,048).
#[cfg(test)]
pub const MAX_HELD: usize = 1 << 12;

use crate::model::slices::{Func, FuncRef, PlaceSpan, Resolver, Slice, SliceKind};

/// What the stack did, for the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackStats {
    pub calls: u64,
    pub returns: u64,
    pub tail_calls: u64,
    /// Returns and jumps that skipped open frames (longjmp, exceptions).
    pub skipped_frames: u64,
    /// Frames created for returns above the known stack.
    pub retroactive_frames: u64,
    /// Calls to the next instruction, ignored.
    pub ignored_calls: u64,
    /// Resumes in an unrelated function that restarted the stack.
    pub restarts: u64,
    /// Calls (or signal handlers' entries) past [`MAX_DEPTH`] frames,
    /// which restarted the stack.
    pub depth_restarts: u64,
    /// Resumes in a new program (exec) that ended the old one's frames.
    pub execs: u64,
    /// Returns that matched none of the open frames whose call was seen
    /// (an unwind into code without symbols or unwind tables): they end
    /// every frame, and the function returned into is created
    /// retroactively.
    pub unmatched_unwinds: u64,
    /// The frames (with a seen call) those returns ended.
    pub unmatched_frames: u64,
    pub untraced: u64,
    pub gaps: u64,
    /// Frames entered and left at the same instant without a seen call
    /// (resumed straight into a gap): not written.
    pub empty_frames: u64,
    pub max_depth: i32,
    /// The most slices held at once for their parent
    /// ([`ThreadStack::placing_roots`]).
    pub max_unplaced: u64,
    /// Slices that tied with their parent but went out before it, the
    /// thread holding [`MAX_HELD`] already (module doc).
    pub held_past_bound: u64,
    /// Groups of branches at one time that the time spreading ended full
    /// (`crate::interp::MAX_GROUP`), left with the time they had.
    pub cut_groups: u64,
}

impl StackStats {
    /// Adds another thread's counts (`max_depth`: the larger).
    pub fn add(&mut self, o: &StackStats) {
        self.calls += o.calls;
        self.returns += o.returns;
        self.tail_calls += o.tail_calls;
        self.skipped_frames += o.skipped_frames;
        self.retroactive_frames += o.retroactive_frames;
        self.ignored_calls += o.ignored_calls;
        self.restarts += o.restarts;
        self.depth_restarts += o.depth_restarts;
        self.execs += o.execs;
        self.unmatched_unwinds += o.unmatched_unwinds;
        self.unmatched_frames += o.unmatched_frames;
        self.untraced += o.untraced;
        self.gaps += o.gaps;
        self.empty_frames += o.empty_frames;
        self.max_depth = self.max_depth.max(o.max_depth);
        self.max_unplaced = self.max_unplaced.max(o.max_unplaced);
        self.held_past_bound += o.held_past_bound;
        self.cut_groups += o.cut_groups;
    }
}

/// [`Frame::ret_of_entry`]: the number of a tail call out of an entry
/// frame, or none, in 4 bytes. As an `Option<usize>` it took 16, and a
/// frame 144 bytes: a return's `frames.pop()` then moved the frame with a
/// call to `memcpy` (29 instructions a return, 1.3% of `ptdec report`'s
/// on the bench's interp trace). At 128 bytes the move is inline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TailOf(u32);

impl TailOf {
    const NONE: TailOf = TailOf(u32::MAX);

    /// Tail call `i`, or none where `i` does not fit (a stretch counts far
    /// fewer: at most its ops; the stack then gives up).
    fn some(i: usize) -> TailOf {
        match u32::try_from(i) {
            Ok(i) if i != u32::MAX => TailOf(i),
            _ => TailOf::NONE,
        }
    }

    fn get(self) -> Option<usize> {
        (self != TailOf::NONE).then_some(self.0 as usize)
    }

    fn is_none(self) -> bool {
        self == TailOf::NONE
    }
}

impl Default for TailOf {
    fn default() -> TailOf {
        TailOf::NONE
    }
}

const _: () = assert!(std::mem::size_of::<Frame>() <= 128);

/// A frame of the stack (at most 128 bytes: [`TailOf`] says why).
///
/// `repr(C)`, its start first: a frame is moved out of the stack whole
/// when it closes, in 16-byte words from its first byte, and its slice
/// then reads the start's time and instructions as one 16-byte word.
/// Where Rust had put the start, 8 bytes into such a word, that read
/// took the halves of two stores just made and waited on store
/// forwarding: a fifth of `ThreadStack::close`'s samples (perf annotate
/// of `ptdec report` on one CPU, the bench's interp trace).
#[derive(Debug)]
#[repr(C)]
struct Frame {
    start: Stamp,
    /// Its slice's [`Slice::id`].
    id: NonZeroU64,
    func: FuncRef,
    /// Where the call that opened this frame returns to (a tail call's
    /// frame inherits it).
    ret: Option<u64>,
    /// See [`SliceKind::Call`].
    call_time: Option<u64>,
    /// Closed slices that start at the same instant as this frame.
    held: VecDeque<Slice>,
    depth: i32,
    /// In speculative mode, for a tail call out of entry frame `i`: `ret`
    /// is that frame's, not known yet.
    ret_of_entry: TailOf,
    /// Whether `func` came from a symbol (only then is it compared).
    known: bool,
    unknown_start: bool,
    /// Entered from the kernel at a function entry: a signal handler.
    handler: bool,
    /// Ended by a return that matched no open frame.
    unmatched: bool,
    /// A closed child started at the same instant as this frame (held or,
    /// in close order, already out): the frame is not empty.
    tied: bool,
}

#[derive(Debug, Clone)]
enum State {
    /// No segment: before the first `Enabled`, or after `End`.
    Idle,
    Running,
    Disabled {
        at: Stamp,
        ip: u64,
        kernel: bool,
    },
    InGap {
        at: Stamp,
        kind: GapKind,
        offset: u64,
    },
}

/// The call stack of one thread.
#[derive(Debug)]
pub struct ThreadStack {
    pid: u32,
    tid: u32,
    frames: Vec<Frame>,
    /// First instant of the current segment.
    base: Option<Stamp>,
    /// Closed bottom-level slices starting at `base`: a retroactive frame
    /// may still become their parent.
    base_held: VecDeque<Slice>,
    /// How many of `base_held` have no parent yet (the rest are held
    /// behind them, or were adopted by a retroactive frame already): a
    /// retroactive frame looks through `base_held` only when some have
    /// none. Looking every time was quadratic in the retroactive frames
    /// of a segment whose slices all tie (no time moves: 78,642 of them
    /// from 1 MB of hostile PT took 15 s).
    base_parentless: usize,
    /// Slices moved from one held queue into another ([`hold`]): linear
    /// in the slices held, which the tests check.
    held_moves: u64,
    /// The slices held now, in the frames' `held` and in `base_held`
    /// (at most [`MAX_HELD`]).
    held_now: usize,
    /// The most `held_now` was (what a speculative stack adds to the real
    /// one's at most: [`ThreadStack::apply`]).
    held_peak: usize,
    /// A closed bottom-level slice started at `base` (held or out).
    base_tied: bool,
    /// Slices go out as they close; nothing is held back.
    close_order: bool,
    /// The next [`Slice::id`] (see [`ThreadStack::placing_roots`]).
    next_id: NonZeroU64,
    /// While a retroactive frame's id is known and it is not open yet:
    /// the parent of the slices that close below every open frame.
    below: Option<NonZeroU64>,
    /// Hold the slices that close below every open frame until their
    /// parent is known ([`ThreadStack::placing_roots`]).
    place_roots: bool,
    /// Those slices, held.
    unplaced: Vec<Slice>,
    state: State,
    last: Stamp,
    stats: StackStats,
    /// Speculative mode (`crate::stitch`): below `frames` lies the thread's
    /// stack as it was when this stretch began, not known yet.
    entry: Option<Box<Entry>>,
    /// Where jumps went inside functions ([`Spans`]).
    spans: Spans,
    /// The functions calls went to ([`Callees`]).
    callees: Callees,
}

/// Slots of [`Callees`] (a power of two).
const CALLEE_SLOTS: usize = 64;

/// The known functions at call targets a stack met, with the times over
/// which the resolver said they hold, one per slot of a small table found
/// by the target: a call to one asks the resolver nothing (`function_of`
/// was 190 M instructions of `ptdec report`'s 8.2 G on the bench's
/// interpreter trace, 3.5 M calls). A pure cache, as [`Spans`].
#[derive(Debug)]
struct Callees(Box<[Callee; CALLEE_SLOTS]>);

#[derive(Debug, Clone, Default)]
struct Callee {
    to: u64,
    since: u64,
    until: u64,
    func: Option<FuncRef>,
}

impl Default for Callees {
    fn default() -> Self {
        Callees(Box::new(std::array::from_fn(|_| Callee::default())))
    }
}

impl Callees {
    #[inline]
    fn slot(to: u64) -> usize {
        (to >> 4) as usize & (CALLEE_SLOTS - 1)
    }

    /// The known function at `to` at `time`, when a slot says.
    #[inline]
    fn func(&self, to: u64, time: u64) -> Option<&FuncRef> {
        let c = &self.0[Self::slot(to)];
        if c.to == to && c.since <= time && time < c.until {
            return c.func.as_ref();
        }
        None
    }
}

/// Slots of [`Spans`] (a power of two).
const SPAN_SLOTS: usize = 128;

/// The [`PlaceSpan`]s of jump targets a stack met, one per slot of a small
/// table found by the target's address: a jump into one asks the resolver
/// nothing. Most jumps stay in their function (46% of the ops of the
/// bench's interpreter trace are its dispatch jumps), and `place_of` was
/// a third of such a jump's instructions. A pure cache: what it holds is
/// the resolver's answer, whatever the stack's state.
#[derive(Debug)]
struct Spans(Box<[PlaceSpan; SPAN_SLOTS]>);

impl Default for Spans {
    fn default() -> Self {
        Spans(Box::new([PlaceSpan::default(); SPAN_SLOTS]))
    }
}

impl Spans {
    #[inline]
    fn slot(addr: u64) -> usize {
        (addr >> 4) as usize & (SPAN_SLOTS - 1)
    }

    /// The function `addr` lies in, not at its entry, when a span says.
    #[inline]
    fn func(&self, addr: u64, time: u64) -> Option<u64> {
        let s = &self.0[Self::slot(addr)];
        s.holds(addr, time).then_some(s.func)
    }

    /// Keeps `span`, the resolver's for `addr` at `time`.
    #[inline]
    fn put(&mut self, addr: u64, time: u64, span: PlaceSpan) {
        if span.holds(addr, time) {
            self.0[Self::slot(addr)] = span;
        }
    }
}

/// What a stack in speculative mode ([`ThreadStack::speculative`]) assumed
/// about the frames below its own, the *entry frames*, and what it put out
/// meanwhile, in one list ([`Item`]). The stitch ([`ThreadStack::apply`])
/// checks every assumption against the real stack and applies the outcome
/// only when all hold: the slices are then exactly those the real stack
/// would have made from the same ops.
///
/// Entry frames are counted from an *anchor*: at first the top entry frame
/// (E0, E1 below it, ...); after a pop to the highest entry frame running
/// some function ([`Item::PopTo`], whose place the stack cannot know), that
/// frame. Depths are relative to the anchor's.
#[derive(Debug, Default)]
pub struct Entry {
    /// Entry frames closed since the anchor: the next one is E`consumed`.
    consumed: usize,
    /// Pops to an entry frame so far (the anchor's number).
    epoch: usize,
    /// Tail calls out of an entry frame so far ([`Item::TailFrom`]).
    tails: usize,
    items: Vec<Item>,
    /// What the stitch learned ([`Declined`]).
    learned: Learned,
    /// The stamp of the first op taken (before clamping).
    first: Option<Stamp>,
    /// The stack met what it cannot follow without the entry frames (a gap,
    /// the end, a restart, a new segment, a call past the depth bound, ...:
    /// the reasons `ThreadStack::fail` is given): the stitch decodes
    /// this stretch with the real stack instead.
    pub failed: bool,
    /// (epoch, consumed, known, entry) of E`consumed` as guessed (see
    /// [`Assert::Is`]).
    revealed: Option<(usize, usize, bool, u64)>,
    /// Why it gave up.
    pub why: &'static str,
}

/// An assumption about the entry frames, checked by the stitch; `i`
/// counts from the anchor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assert {
    /// Entry frame `i` is the one that returns to `to` (its call's return
    /// address): the first frame from the top that a return matches
    /// exactly, when none of the stack's own frames does.
    Ret { i: usize, to: u64 },
    /// Entry frame `i` runs a function known by symbol (`known`) with that
    /// entry (compared only when known): guessed from the address the
    /// thread runs at when the stack first asks.
    Is { i: usize, known: bool, entry: u64 },
    /// No entry frame from `i` down runs the known function at `entry`.
    NotBelow { i: usize, entry: u64 },
    /// No entry frame from `i` down returns to `to`.
    NoRet { i: usize, to: u64 },
    /// The frame that took over the return address of the entry frame of
    /// tail call `tail` ([`Item::TailFrom`]) returns to `to`.
    RetOf { tail: usize, to: u64 },
}

/// Why the stitch did not apply a speculative stack.
#[derive(Debug, Default)]
pub struct Declined {
    /// It assumed no entry frame runs this function, and one does: the
    /// next speculative stacks assume it does ([`ThreadStack::speculative`]).
    pub below: Option<u64>,
    /// It assumed the next entry frame returns to this address, and it
    /// does not: the next ones assume a return there goes to a frame of
    /// the function returned into, as when no frame matches exactly.
    pub ret: Option<u64>,
}

/// What the stitch learned, for [`ThreadStack::speculative`].
#[derive(Debug, Default, Clone)]
pub struct Learned {
    /// See [`Declined::below`].
    pub below: Vec<u64>,
    /// See [`Declined::ret`].
    pub ret: Vec<u64>,
}

/// What a stack in speculative mode put out, in order (see [`Entry`]).
#[derive(Debug)]
pub enum Item {
    /// A slice of its own frames: stamps counted from the stretch's start,
    /// depth relative to E0's.
    Slice(Slice),
    /// A mark, which goes out between the slices where it came.
    Mark(Stamp, Box<Mark>),
    /// The next entry frame ends here.
    CloseEntry(Stamp),
    /// An assumption, checked where it was made.
    Assume(Assert),
    /// The next entry frame's return address goes to a frame of the stack
    /// (a tail call out of it), which ends next.
    TailFrom,
    /// The entry frames above the highest one running the known function
    /// at `entry` end here (from the next one, or from the one below it
    /// with `skip_top`); that frame becomes the anchor. `skipped`: the
    /// frames counted as skipped besides those.
    PopTo {
        entry: u64,
        skip_top: bool,
        skipped: i64,
        at: Stamp,
    },
}

/// The parent a speculative stack gives a slice whose parent is an entry
/// frame, whose id it does not know: [`ThreadStack::apply`] puts the
/// real one in.
const ENTRY_PARENT: NonZeroU64 = NonZeroU64::MAX;

/// Where a speculative stack's slices and frames go when applied: their
/// counters offset by `base`, their depths by `depth`, their ids by `ids`
/// (the real stack's ids so far).
struct Rebase<'b> {
    base: &'b Base,
    depth: i32,
    ids: u64,
}

impl Rebase<'_> {
    fn id(&self, id: NonZeroU64) -> NonZeroU64 {
        id.saturating_add(self.ids)
    }

    /// A speculative stack's slice, applied; `entry`: the id of the real
    /// frame an [`ENTRY_PARENT`] stands for.
    fn slice(&self, mut s: Slice, entry: Option<NonZeroU64>) -> Slice {
        s.start = self.base.stamp(s.start);
        s.end = self.base.stamp(s.end);
        s.depth += self.depth;
        s.id = self.id(s.id);
        s.parent = match s.parent {
            Some(ENTRY_PARENT) => entry,
            p => p.map(|p| self.id(p)),
        };
        s
    }
}

/// What [`ThreadStack::apply`]'s dry run found in the real stack, entry
/// frames counted from its top (0).
struct DryRun {
    /// The entry frame the speculative stack ends on (its parent).
    cursor: usize,
    /// Per tail call out of an entry frame ([`Item::TailFrom`]): that
    /// frame's return address.
    rets: Vec<Option<u64>>,
    /// Per pop to an entry frame ([`Item::PopTo`]): that frame.
    pops: Vec<usize>,
}

/// Where [`ThreadStack::lower_frame_of`] found a function.
enum Lower {
    /// The stack's own frame at this index.
    Own(usize),
    /// Speculative mode: an entry frame, assumed.
    Entry,
    None,
}

/// Whether two stamps coincide on any time axis.
/// Holds `slice` and the slices held behind it (`held`) after those
/// `into` holds already: `into` becomes `into, slice, held`. The shorter
/// side moves into the longer, so that a recursion whose frames all close
/// at one instant costs time linear in its depth (moving each frame's
/// slices into its parent's took 131,072 frames minutes). Returns how many
/// slices were moved (`slice` included), which tests bound.
fn hold(into: &mut VecDeque<Slice>, slice: Slice, mut held: VecDeque<Slice>) -> u64 {
    if held.len() > into.len() {
        let moved = into.len() as u64 + 1;
        held.push_front(slice);
        while let Some(s) = into.pop_back() {
            held.push_front(s);
        }
        *into = held;
        moved
    } else {
        let moved = held.len() as u64 + 1;
        into.push_back(slice);
        into.extend(held);
        moved
    }
}

fn ties(a: &Stamp, b: &Stamp) -> bool {
    a.time == b.time || a.insns == b.insns || (a.cycles.is_some() && a.cycles == b.cycles)
}

impl ThreadStack {
    pub fn new(pid: u32, tid: u32) -> Self {
        Self {
            pid,
            tid,
            frames: Vec::new(),
            base: None,
            base_held: VecDeque::new(),
            base_parentless: 0,
            held_moves: 0,
            held_now: 0,
            held_peak: 0,
            base_tied: false,
            close_order: false,
            next_id: NonZeroU64::MIN,
            below: None,
            place_roots: false,
            unplaced: Vec::new(),
            state: State::Idle,
            last: Stamp::default(),
            stats: StackStats::default(),
            entry: None,
            spans: Spans::default(),
            callees: Callees::default(),
        }
    }

    /// A stack in speculative mode: it starts running (tracing on) above
    /// an unknown entry stack, records what it assumes about it and what
    /// it puts out ([`Entry`]), and gives up where it cannot go on
    /// without it. Its slices are handed out only by [`ThreadStack::apply`].
    /// `learned`: what the stitch found where other stacks assumed
    /// wrong ([`Declined`]).
    pub fn speculative(pid: u32, tid: u32, learned: &Learned) -> Self {
        Self {
            state: State::Running,
            entry: Some(Box::new(Entry {
                learned: learned.clone(),
                ..Entry::default()
            })),
            ..Self::new(pid, tid)
        }
    }

    /// This stack, handing out slices strictly as they close (see
    /// [`ThreadStack::close_order`]).
    pub fn in_close_order(mut self) -> Self {
        self.close_order = true;
        self
    }

    /// This stack in close order, with every slice's [`Slice::parent`]
    /// exact: a slice that closes below every open frame of its segment
    /// (the segment's first frame, the frames that tail calls put in its
    /// place) may yet get a parent, a frame found later above the
    /// segment's first one (a return above the known stack); it is held
    /// until one opens (its parent) or the segment ends (none). Only such
    /// slices are held, never the children of an open frame: they are as
    /// many as the tail calls at the bottom of a segment before its first
    /// return above it ([`StackStats::max_unplaced`]).
    pub fn placing_roots(mut self) -> Self {
        self.close_order = true;
        self.place_roots = true;
        self
    }

    /// The next slice id.
    #[inline]
    fn alloc_id(&mut self) -> NonZeroU64 {
        let id = self.next_id;
        // Past 2^64 ids (never: one per call) the last one repeats.
        self.next_id = id.saturating_add(1);
        id
    }

    /// Hands out the slices held for their parent, which is `parent`.
    fn place(&mut self, parent: Option<NonZeroU64>, out: &mut dyn FnMut(Slice)) {
        for mut s in std::mem::take(&mut self.unplaced) {
            s.parent = parent;
            out(s);
        }
    }

    /// Whether a speculative stack gave up.
    pub fn failed(&self) -> bool {
        self.entry.as_ref().is_some_and(|e| e.failed)
    }

    /// Why a speculative stack gave up.
    pub fn failed_why(&self) -> &'static str {
        self.entry.as_ref().map_or("", |e| e.why)
    }

    fn fail(&mut self, why: &'static str) {
        if let Some(e) = &mut self.entry {
            e.failed = true;
            e.why = why;
        }
    }

    /// A tied slice goes out before its parent, the thread holding
    /// [`MAX_HELD`] already; a speculative stack gives up (the real one
    /// decides, with what it holds).
    #[cold]
    #[inline(never)]
    fn held_past_bound(&mut self) {
        if self.entry.is_some() {
            self.fail("a slice held past the bound");
        }
        self.stats.held_past_bound += 1;
    }

    /// Counts a group the time spreading ended full
    /// ([`StackStats::cut_groups`]).
    pub fn count_cut_group(&mut self) {
        self.stats.cut_groups += 1;
    }

    /// The slices held back for their parents now (tests check it against
    /// the queues).
    #[cfg(test)]
    fn held_in_queues(&self) -> usize {
        self.frames.iter().map(|f| f.held.len()).sum::<usize>() + self.base_held.len()
    }

    /// Hands a slice out, or records it in speculative mode.
    #[inline]
    fn put(&mut self, slice: Slice, out: &mut dyn FnMut(Slice)) {
        match &mut self.entry {
            Some(e) => e.items.push(Item::Slice(slice)),
            None => out(slice),
        }
    }

    /// The top frame's (known, entry): the stack's own, or in speculative
    /// mode with none of its own, the next entry frame's, guessed the first
    /// time from `addr` (where the thread runs) and assumed ([`Assert::Is`]).
    #[inline]
    fn top_id(&mut self, addr: u64, t: u64, resolver: &dyn Resolver) -> Option<(bool, u64)> {
        // Inline with the common case only: as a call it was a fifth of
        // the instructions of a jump inside a function.
        match self.frames.last() {
            Some(top) => Some((top.known, top.func.entry)),
            None => self.entry_id(addr, t, resolver),
        }
    }

    /// [`ThreadStack::top_id`] without a frame of its own.
    #[inline(never)]
    fn entry_id(&mut self, addr: u64, t: u64, resolver: &dyn Resolver) -> Option<(bool, u64)> {
        let e = self.entry.as_ref()?;
        let (epoch, consumed) = (e.epoch, e.consumed);
        if let Some((ep, i, known, entry)) = e.revealed {
            if (ep, i) == (epoch, consumed) {
                return Some((known, entry));
            }
        }
        let (func, known) = self.resolve(resolver, addr, t);
        let entry = if known { func.entry } else { 0 };
        let e = self.entry.as_mut()?;
        e.revealed = Some((epoch, consumed, known, entry));
        e.items.push(Item::Assume(Assert::Is {
            i: consumed,
            known,
            entry,
        }));
        Some((known, entry))
    }

    /// Checks a speculative stack's assumptions against this (the real)
    /// stack and, when all hold, applies its outcome: its slices, marks and
    /// the ends of entry frames go to `out` in order (with `base` added to
    /// their counters), its frames and state become this stack's. `Err`
    /// (nothing changed): decode the stretch's ops with this stack instead.
    pub fn apply(
        &mut self,
        spec: ThreadStack,
        base: Base,
        out: &mut dyn FnMut(Item),
    ) -> Result<(), Declined> {
        let no = Err(Declined::default());
        let Some(entry) = spec.entry.as_deref() else {
            return no;
        };
        if entry.failed
            || !matches!(self.state, State::Running)
            || self.entry.is_some()
            || self.close_order != spec.close_order
        {
            return no;
        }
        let dry = self.dry_run(&entry.items)?;
        // The entry frame it ends on (its parent) exists.
        if self.frames.len() <= dry.cursor {
            return no;
        }
        // Its frames stay within MAX_DEPTH over this stack's (depths
        // relative to the top frame here, E0): else this stack restarts
        // where it passes the bound, op by op.
        if i64::from(self.top_depth()) + i64::from(spec.stats.max_depth.max(0)) + 1
            >= MAX_DEPTH as i64
        {
            return no;
        }
        // What it held stays within MAX_HELD over what this stack holds:
        // else this stack would let some out early, op by op.
        if self.held_now + spec.held_peak > MAX_HELD {
            return no;
        }
        // Its clamping and ties are this stack's: nothing here is later
        // than its first stamp, on any axis.
        if let Some(first) = entry.first.map(|f| base.stamp(f)) {
            if !self.none_after(first, dry.cursor) {
                return no;
            }
        }
        let mut spec = spec;
        let entry = spec.entry.take().expect("checked above");
        // Its frames' depths, which its own stats count relative to anchors.
        let mut max_depth = self.stats.max_depth;
        // Its ids follow this stack's so far: numbered as they would be
        // had this stack run its ops (it opens the same frames in the
        // same order, or the stitch declines).
        let ids = self.next_id.get() - 1;
        let depth = self.replay(entry.items, dry.pops, &base, ids, &mut max_depth, out);
        self.adopt(spec, &dry.rets, &base, ids, depth, max_depth);
        Ok(())
    }

    /// The `i`th frame from the top (0: the top), as [`ThreadStack::apply`]
    /// counts entry frames.
    fn nth_from_top(&self, i: usize) -> &Frame {
        &self.frames[self.frames.len() - 1 - i]
    }

    /// The `i`th frame from the top and those below it.
    fn nth_and_below(&self, i: usize) -> &[Frame] {
        &self.frames[..self.frames.len().saturating_sub(i)]
    }

    /// [`ThreadStack::apply`]'s dry run over the entry frames a speculative
    /// stack touched (`items`, its record), top first: checks its
    /// assumptions and finds the frames its pops and tail calls go to.
    fn dry_run(&self, items: &[Item]) -> Result<DryRun, Declined> {
        let no = Err(Declined::default());
        let n = self.frames.len();
        // `cursor` is the next entry frame (0: the top), `anchor` the one
        // it counts from.
        let (mut cursor, mut anchor) = (0usize, 0usize);
        let mut rets: Vec<Option<u64>> = Vec::new();
        let mut pops: Vec<usize> = Vec::new();
        for item in items {
            match item {
                Item::Assume(a) => self.check(a, anchor, &rets)?,
                Item::CloseEntry(_) | Item::TailFrom => {
                    if cursor >= n {
                        return no;
                    }
                    if matches!(item, Item::TailFrom) {
                        rets.push(self.nth_from_top(cursor).ret);
                    } else {
                        cursor += 1;
                    }
                }
                Item::PopTo {
                    entry, skip_top, ..
                } => {
                    let start = cursor + usize::from(*skip_top);
                    let Some(j) = (start..n).find(|&j| {
                        let f = self.nth_from_top(j);
                        f.known && f.func.entry == *entry
                    }) else {
                        return no;
                    };
                    pops.push(j);
                    (cursor, anchor) = (j, j);
                }
                Item::Slice(_) | Item::Mark(..) => {}
            }
        }
        Ok(DryRun { cursor, rets, pops })
    }

    /// Checks one assumption of a speculative stack against this one's
    /// frames, counted from `anchor`; `rets`: as [`DryRun::rets`] so far.
    fn check(&self, a: &Assert, anchor: usize, rets: &[Option<u64>]) -> Result<(), Declined> {
        let n = self.frames.len();
        let ok = match *a {
            Assert::Ret { i, to } => {
                if anchor + i < n && self.nth_from_top(anchor + i).ret != Some(to) {
                    return Err(Declined {
                        ret: Some(to),
                        ..Declined::default()
                    });
                }
                anchor + i < n
            }
            Assert::Is { i, known, entry } => {
                anchor + i < n
                    && self.nth_from_top(anchor + i).known == known
                    && (!known || self.nth_from_top(anchor + i).func.entry == entry)
            }
            Assert::NotBelow { i, entry } => {
                if self
                    .nth_and_below(anchor + i)
                    .iter()
                    .any(|f| f.known && f.func.entry == entry)
                {
                    return Err(Declined {
                        below: Some(entry),
                        ..Declined::default()
                    });
                }
                true
            }
            Assert::NoRet { i, to } => !self
                .nth_and_below(anchor + i)
                .iter()
                .any(|f| f.ret == Some(to)),
            Assert::RetOf { tail, to } => rets.get(tail) == Some(&Some(to)),
        };
        if ok {
            Ok(())
        } else {
            Err(Declined::default())
        }
    }

    /// Whether nothing of this stack is later than `first` on any axis: its
    /// latest stamp, and the starts of the frames from the `cursor`th from
    /// the top up (those a speculative stack ends on), before it.
    fn none_after(&self, first: Stamp, cursor: usize) -> bool {
        let before = |a: &Stamp| {
            a.time < first.time
                && a.insns < first.insns
                && match (a.cycles.get(), first.cycles.get()) {
                    (Some(x), Some(y)) => x < y,
                    _ => true,
                }
        };
        let last_ok = self.last.time <= first.time
            && self.last.insns <= first.insns
            && match (self.last.cycles.get(), first.cycles.get()) {
                (Some(x), Some(y)) => x <= y,
                _ => true,
            };
        let n = self.frames.len();
        last_ok
            && self.frames[n - 1 - cursor..]
                .iter()
                .all(|f| before(&f.start))
    }

    /// Hands out a checked speculative stack's record (`items`): its slices
    /// and marks rebased, and the ends of the entry frames it closed or
    /// popped (`pops`: where, from the dry run). Returns the depth its own
    /// frames are relative to; `max_depth` takes its slices'.
    fn replay(
        &mut self,
        items: Vec<Item>,
        pops: Vec<usize>,
        base: &Base,
        ids: u64,
        max_depth: &mut i32,
        out: &mut dyn FnMut(Item),
    ) -> i32 {
        let n = self.frames.len();
        let mut depth = self.top_depth();
        let mut pops = pops.into_iter();
        for item in items {
            match item {
                Item::Slice(s) => {
                    // Its own frames are not on this stack yet: the top
                    // one is the entry frame it ran above.
                    let entry = self.frames.last().map(|f| f.id);
                    let s = Rebase { base, depth, ids }.slice(s, entry);
                    if matches!(s.kind, SliceKind::Call { .. }) {
                        *max_depth = (*max_depth).max(s.depth);
                    }
                    out(Item::Slice(s));
                }
                Item::Mark(at, m) => out(Item::Mark(base.stamp(at), m)),
                Item::CloseEntry(at) => {
                    let frame = self.frames.pop().expect("checked: n > cursor");
                    self.close(frame, base.stamp(at), &mut |s| out(Item::Slice(s)));
                }
                Item::PopTo { skipped, at, .. } => {
                    let j = pops.next().expect("one per pop");
                    let keep = n - j;
                    let closed = self.frames.len() - keep;
                    self.stats.skipped_frames += (closed as i64 + skipped).max(0) as u64;
                    self.pop_to(keep, base.stamp(at), &mut |s| out(Item::Slice(s)));
                    depth = self.top_depth();
                }
                Item::Assume(_) | Item::TailFrom => {}
            }
        }
        depth
    }

    /// Takes over a checked speculative stack's open frames (rebased onto
    /// `depth`, with the return addresses `rets` of the entry frames they
    /// took over), state and stats; `max_depth`: the depth reached.
    fn adopt(
        &mut self,
        spec: ThreadStack,
        rets: &[Option<u64>],
        base: &Base,
        ids: u64,
        depth: i32,
        mut max_depth: i32,
    ) {
        let rebase = Rebase { base, depth, ids };
        self.next_id = self.next_id.saturating_add(spec.next_id.get() - 1);
        // Its frames come with what they hold (it holds nothing else).
        self.held_now += spec.held_now;
        self.held_peak = self.held_peak.max(self.held_now);
        for mut f in spec.frames {
            if let Some(i) = std::mem::take(&mut f.ret_of_entry).get() {
                f.ret = rets[i];
            }
            f.id = rebase.id(f.id);
            f.start = base.stamp(f.start);
            f.depth += depth;
            // Held behind one of its own frames: no entry frame's child.
            f.held = f.held.into_iter().map(|s| rebase.slice(s, None)).collect();
            max_depth = max_depth.max(f.depth);
            for h in &f.held {
                if matches!(h.kind, SliceKind::Call { .. }) {
                    max_depth = max_depth.max(h.depth);
                }
            }
            self.frames.push(f);
        }
        self.state = match spec.state {
            State::Disabled { at, ip, kernel } => State::Disabled {
                at: base.stamp(at),
                ip,
                kernel,
            },
            other => other,
        };
        if spec.last != Stamp::default() {
            self.last = base.stamp(spec.last);
        }
        self.stats.add(&StackStats {
            max_depth: 0,
            ..spec.stats
        });
        self.stats.max_depth = max_depth;
    }

    /// A stack whose slices come out strictly as they close (children
    /// before parents, see the module doc), for consumers that sum them up
    /// rather than write them for Perfetto.
    pub fn close_order(pid: u32, tid: u32) -> Self {
        Self {
            close_order: true,
            ..Self::new(pid, tid)
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn tid(&self) -> u32 {
        self.tid
    }

    pub fn stats(&self) -> &StackStats {
        &self.stats
    }

    /// The latest stamp seen.
    pub fn last_stamp(&self) -> Stamp {
        self.last
    }

    /// The open frames' function names, bottom first (for tests and debugging).
    pub fn open_frames(&self) -> Vec<&str> {
        self.frames.iter().map(|f| &*f.func.name).collect()
    }

    /// Applies one step; completed slices go to `out`.
    #[inline(always)]
    pub fn push(&mut self, op: &Op, resolver: &dyn Resolver, out: &mut dyn FnMut(Slice)) {
        // Most ops are branches while tracing runs, outside speculative
        // mode: straight to their handler, as below.
        if self.entry.is_none() && matches!(self.state, State::Running) {
            match op {
                Op::Call {
                    at,
                    from,
                    to,
                    ret,
                    raw_time,
                } => {
                    let at = self.clamp(*at);
                    if self.frames.len() >= MAX_DEPTH {
                        self.too_deep(at, *from, resolver, out);
                    }
                    return self.call(at, *to, *ret, *raw_time, resolver);
                }
                Op::Return { at, to, .. } => {
                    let at = self.clamp(*at);
                    return self.ret(at, *to, resolver, out);
                }
                Op::Jump { at, from, to, .. } => {
                    let at = self.clamp(*at);
                    return self.jump(at, *from, *to, resolver, out);
                }
                _ => {}
            }
        }
        self.push_any(op, resolver, out);
    }

    /// [`ThreadStack::push`] of `call` and then `ret`, where `ret` is the
    /// return `call` made (the call had no op inside it: a leaf, as
    /// nearly all of an interpreter's calls are), in the commonest case:
    /// not speculative, tracing on, below a parent frame the call does
    /// not tie with. Its slice goes out with no frame pushed and popped,
    /// and `true`; `false` (nothing done) where another case holds, and
    /// the two ops go to `push` one by one. The same slice, stats and
    /// state as `push` would make ([`ThreadStack::call`], then
    /// [`ThreadStack::ret`] and [`ThreadStack::close`]'s commonest case).
    #[inline]
    pub fn push_leaf(
        &mut self,
        call: &Op,
        ret: &Op,
        resolver: &dyn Resolver,
        out: &mut dyn FnMut(Slice),
    ) -> bool {
        let (
            Op::Call {
                at: call_at,
                to,
                ret: back,
                raw_time,
                ..
            },
            Op::Return {
                at: ret_at,
                to: ret_to,
                ..
            },
        ) = (call, ret)
        else {
            return false;
        };
        if self.entry.is_some()
            || !matches!(self.state, State::Running)
            || self.frames.len() >= MAX_DEPTH
            || to == back
            || ret_to != back
        {
            return false;
        }
        let Some((parent, parent_start, depth)) =
            self.frames.last().map(|p| (p.id, p.start, p.depth + 1))
        else {
            return false;
        };
        let last = self.last;
        let start = self.clamp(*call_at);
        if ties(&parent_start, &start) {
            self.last = last;
            return false;
        }
        self.stats.calls += 1;
        let (func, _) = self.callee(resolver, *to, start.time);
        let id = self.alloc_id();
        self.stats.max_depth = self.stats.max_depth.max(depth);
        let end = self.clamp(*ret_at);
        self.stats.returns += 1;
        out(Slice {
            pid: self.pid,
            tid: self.tid,
            depth,
            id,
            parent: Some(parent),
            start,
            end,
            kind: SliceKind::Call {
                func,
                unknown_start: false,
                call_time: Some(*raw_time),
                unmatched: false,
            },
        });
        true
    }

    /// [`ThreadStack::push`] for any op in any state.
    #[inline(never)]
    fn push_any(&mut self, op: &Op, resolver: &dyn Resolver, out: &mut dyn FnMut(Slice)) {
        if let Some(e) = &mut self.entry {
            if e.failed {
                return;
            }
            match op {
                Op::Mark { at, mark } => e.items.push(Item::Mark(*at, mark.clone())),
                Op::Gap { .. } | Op::End { .. } => {
                    e.failed = true;
                    e.why = "a gap or the end";
                }
                _ => {}
            }
            if e.failed || matches!(op, Op::Mark { .. }) {
                return;
            }
            e.first.get_or_insert(op.stamp());
        }
        if matches!(op, Op::Mark { .. })
            || (matches!(op, Op::Disabled { .. }) && matches!(self.state, State::Idle))
        {
            return;
        }
        let at = self.clamp(op.stamp());
        // Anything but Enabled/Gap/End while tracing is off resumes it implicitly.
        let resumes_at = match op {
            Op::Call { from, .. } | Op::Return { from, .. } | Op::Jump { from, .. } => Some(*from),
            Op::Disabled { ip, .. } => Some(*ip),
            _ => None,
        };
        if let Some(ip) = resumes_at {
            if !matches!(self.state, State::Running) {
                self.enable(at, ip, resolver, out);
            }
        }
        match op {
            Op::Enabled { ip, .. } => self.enable(at, *ip, resolver, out),
            Op::Disabled { ip, kernel, .. } => {
                self.state = State::Disabled {
                    at,
                    ip: *ip,
                    kernel: *kernel,
                };
            }
            Op::Call {
                from,
                to,
                ret,
                raw_time,
                ..
            } => {
                if self.frames.len() >= MAX_DEPTH {
                    self.too_deep(at, *from, resolver, out);
                    if self.failed() {
                        return;
                    }
                }
                self.call(at, *to, *ret, *raw_time, resolver)
            }
            Op::Return { to, .. } => self.ret(at, *to, resolver, out),
            Op::Jump { from, to, .. } => self.jump(at, *from, *to, resolver, out),
            Op::Gap { kind, offset, .. } => {
                self.end_segment(at, out);
                self.stats.gaps += 1;
                self.state = State::InGap {
                    at,
                    kind: kind.clone(),
                    offset: *offset,
                };
            }
            Op::End { .. } => {
                self.end_segment(at, out);
                self.state = State::Idle;
            }
            Op::Mark { .. } => {}
        }
    }

    /// Stamps never go backwards within a thread, so slices never end before
    /// they start.
    ///
    /// `self.last` is written field by field: made whole and copied, the
    /// copy read the new stamp back in a 16-byte word just after its
    /// 8-byte stores and waited on store forwarding (perf annotate of
    /// `ptdec report` on one CPU: 15% of `StackSink::push_run`'s samples
    /// on the bench's interp trace).
    #[inline]
    fn clamp(&mut self, s: Stamp) -> Stamp {
        let time = s.time.max(self.last.time);
        let insns = s.insns.max(self.last.insns);
        let cycles = match (s.cycles.get(), self.last.cycles.get()) {
            (Some(c), Some(l)) => Cycles::some(c.max(l)),
            _ => s.cycles,
        };
        self.last.time = time;
        self.last.insns = insns;
        self.last.cycles = cycles;
        Stamp {
            time,
            insns,
            cycles,
        }
    }

    #[inline]
    fn resolve(&self, resolver: &dyn Resolver, addr: u64, t: u64) -> (FuncRef, bool) {
        match resolver.function_of(self.pid, addr, t) {
            Some(f) => (f, true),
            None => (resolver.unknown(self.pid, addr, t), false),
        }
    }

    /// The top frame's depth; with none, -1, or in speculative mode the
    /// next entry frame's (E`i` is at depth -`i`, E0's being 0).
    fn top_depth(&self) -> i32 {
        match (self.frames.last(), &self.entry) {
            (Some(f), _) => f.depth,
            (None, Some(e)) => -(e.consumed as i32),
            (None, None) => -1,
        }
    }

    fn open(
        &mut self,
        func: FuncRef,
        known: bool,
        start: Stamp,
        ret: Option<u64>,
        unknown_start: bool,
        depth: i32,
    ) -> &mut Frame {
        let id = self.alloc_id();
        self.open_as(id, func, known, start, ret, unknown_start, depth)
    }

    /// [`ThreadStack::open`] with its id given.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn open_as(
        &mut self,
        id: NonZeroU64,
        func: FuncRef,
        known: bool,
        start: Stamp,
        ret: Option<u64>,
        unknown_start: bool,
        depth: i32,
    ) -> &mut Frame {
        self.stats.max_depth = self.stats.max_depth.max(depth);
        crate::model::ops::push_made(&mut self.frames, || Frame {
            id,
            func,
            known,
            start,
            ret,
            ret_of_entry: TailOf::NONE,
            unknown_start,
            call_time: None,
            depth,
            handler: false,
            unmatched: false,
            held: VecDeque::new(),
            tied: false,
        });
        self.frames.last_mut().expect("just pushed")
    }

    /// Starts a segment at `at` inside the function containing `ip`.
    fn start_segment(
        &mut self,
        at: Stamp,
        ip: u64,
        resolver: &dyn Resolver,
        out: &mut dyn FnMut(Slice),
    ) {
        // Slices of an earlier stretch without frames (its frames ended
        // empty): no frame of this segment encloses them.
        if !self.unplaced.is_empty() {
            self.place(None, out);
        }
        let (func, known) = self.resolve(resolver, ip, at.time);
        let unknown_start = !(known && func.entry == ip);
        self.base = Some(at);
        self.open(func, known, at, None, unknown_start, 0);
        self.state = State::Running;
    }

    fn enable(&mut self, at: Stamp, ip: u64, resolver: &dyn Resolver, out: &mut dyn FnMut(Slice)) {
        if self.entry.is_some() && matches!(self.state, State::Idle | State::InGap { .. }) {
            // A new segment: the entry frames would end (never reached: a
            // speculative stack starts running and gives up at gaps).
            self.fail("a new segment");
            return;
        }
        match std::mem::replace(&mut self.state, State::Running) {
            State::Idle => self.start_segment(at, ip, resolver, out),
            State::InGap {
                at: gap_at,
                kind,
                offset,
            } => {
                let id = self.alloc_id();
                self.finish(
                    Slice {
                        pid: self.pid,
                        tid: self.tid,
                        depth: 0,
                        id,
                        parent: None,
                        start: gap_at,
                        end: at,
                        kind: SliceKind::Gap { kind, offset },
                    },
                    VecDeque::new(),
                    out,
                );
                self.start_segment(at, ip, resolver, out);
            }
            State::Disabled {
                at: off_at,
                ip: off_ip,
                kernel,
            } => {
                let untraced = Slice {
                    pid: self.pid,
                    tid: self.tid,
                    depth: self.top_depth() + 1,
                    id: self.alloc_id(),
                    parent: None,
                    start: off_at,
                    end: at,
                    kind: SliceKind::Untraced { kernel, ip: off_ip },
                };
                self.stats.untraced += 1;
                if resolver.exec_between(self.pid, self.tid, off_at.time, at.time, ip) {
                    // The thread ran a new program: the old one's frames
                    // end where tracing stopped (in `execve`), and the new
                    // program's first instruction starts a new segment,
                    // whatever function it is (ld.so's `_start` is an
                    // entry, but no signal handler).
                    if self.entry.is_some() {
                        self.fail("an exec");
                        return;
                    }
                    self.stats.execs += 1;
                    self.restart(off_at, untraced, at, ip, resolver, out);
                    return;
                }
                if self.frames.is_empty() && self.entry.is_none() {
                    self.finish(untraced, VecDeque::new(), out);
                    self.start_segment(at, ip, resolver, out);
                    return;
                }
                let (func, known) = self.resolve(resolver, ip, at.time);
                let (top_known, top_entry) = self
                    .top_id(ip, at.time, resolver)
                    .expect("a frame of its own, or an entry frame");
                let lower = if !known || !top_known || top_entry == func.entry {
                    None
                } else {
                    Some(self.lower_frame_of(&func))
                };
                if lower.is_none() {
                    self.finish(untraced, VecDeque::new(), out);
                } else if let Some(Lower::Own(i)) = lower {
                    // The top frame left through the kernel (sigreturn);
                    // frames between it and `i` are skipped.
                    self.finish(untraced, VecDeque::new(), out);
                    self.stats.skipped_frames += (self.frames.len() - 2 - i) as u64;
                    self.pop_to(i + 1, at, out);
                } else if let Some(Lower::Entry) = lower {
                    self.finish(untraced, VecDeque::new(), out);
                    self.pop_to_entry(func.entry, 1, at, out);
                } else if resolver.is_function_entry(self.pid, ip, at.time)
                    && self.frames.len() < MAX_DEPTH
                {
                    // Entered from the kernel like a call: a signal handler.
                    self.finish(untraced, VecDeque::new(), out);
                    let depth = self.top_depth() + 1;
                    self.open(func, known, at, None, false, depth);
                    self.frames.last_mut().expect("just opened").handler = true;
                } else if self.entry.is_some() {
                    // The restart below would end the entry frames.
                    self.fail("a restart");
                } else {
                    // Resumed somewhere unrelated (a context we never
                    // saw), or a handler's entry past MAX_DEPTH: the old
                    // frames end where tracing stopped.
                    if self.frames.len() >= MAX_DEPTH {
                        self.stats.depth_restarts += 1;
                    } else {
                        self.stats.restarts += 1;
                    }
                    self.restart(off_at, untraced, at, ip, resolver, out);
                }
            }
            State::Running => {
                // Re-enabled without a disable (a PSB): nothing changes.
            }
        }
    }

    /// A call at `from` past [`MAX_DEPTH`] frames: every frame ends here
    /// and a new segment starts at `from`, the call's function, as a
    /// restart does. In speculative mode the stack gives up (the real
    /// stack decides, at its own depth).
    #[cold]
    #[inline(never)]
    fn too_deep(
        &mut self,
        at: Stamp,
        from: u64,
        resolver: &dyn Resolver,
        out: &mut dyn FnMut(Slice),
    ) {
        if self.entry.is_some() {
            self.fail("a call past the depth bound");
            return;
        }
        self.stats.depth_restarts += 1;
        self.close_segment(at, out);
        self.start_segment(at, from, resolver, out);
    }

    /// Ends every frame at `off_at` (where tracing stopped), writes the
    /// untraced time after it at depth 0, and starts a new segment at `ip`.
    fn restart(
        &mut self,
        off_at: Stamp,
        mut untraced: Slice,
        at: Stamp,
        ip: u64,
        resolver: &dyn Resolver,
        out: &mut dyn FnMut(Slice),
    ) {
        self.close_segment(off_at, out);
        untraced.depth = 0;
        self.finish(untraced, VecDeque::new(), out);
        self.start_segment(at, ip, resolver, out);
    }

    #[inline(always)]
    fn call(&mut self, at: Stamp, to: u64, ret: u64, raw_time: u64, resolver: &dyn Resolver) {
        if to == ret && !resolver.is_function_entry(self.pid, to, at.time) {
            self.stats.ignored_calls += 1;
            return;
        }
        self.stats.calls += 1;
        let (func, known) = self.callee(resolver, to, at.time);
        let depth = self.top_depth() + 1;
        self.open(func, known, at, Some(ret), false, depth)
            .call_time = Some(raw_time);
    }

    /// The function a call to `to` at `t` enters, and whether a symbol
    /// says it: from [`Callees`], else [`ThreadStack::resolve_callee`].
    #[inline(always)]
    fn callee(&mut self, resolver: &dyn Resolver, to: u64, t: u64) -> (FuncRef, bool) {
        match self.callees.func(to, t) {
            Some(f) => (f.clone(), true),
            None => self.resolve_callee(resolver, to, t),
        }
    }

    /// [`ThreadStack::resolve`] for a call's target `to`, kept in
    /// [`Callees`] when known.
    #[inline(never)]
    fn resolve_callee(&mut self, resolver: &dyn Resolver, to: u64, t: u64) -> (FuncRef, bool) {
        match resolver.function_over(self.pid, to, t) {
            (Some(f), since, until) => {
                if since <= t && t < until {
                    self.callees.0[Callees::slot(to)] = Callee {
                        to,
                        since,
                        until,
                        func: Some(f.clone()),
                    };
                }
                (f, true)
            }
            (None, ..) => (resolver.unknown(self.pid, to, t), false),
        }
    }

    /// The highest frame below the top running `func`. In speculative
    /// mode, when none of the stack's own frames does: an entry frame
    /// ([`Lower::Entry`]: then pop to it with [`ThreadStack::pop_to_entry`])
    /// if the stitch has seen `func` there, else none is assumed
    /// ([`Assert::NotBelow`]).
    fn lower_frame_of(&mut self, func: &Func) -> Lower {
        let below_top = self.frames.len().checked_sub(1);
        if let Some(i) = below_top.and_then(|b| {
            self.frames[..b]
                .iter()
                .rposition(|f| f.known && f.func.entry == func.entry)
        }) {
            return Lower::Own(i);
        }
        if let Some(e) = &mut self.entry {
            if e.learned.below.contains(&func.entry) {
                return Lower::Entry;
            }
            let i = e.consumed + usize::from(below_top.is_none());
            e.items.push(Item::Assume(Assert::NotBelow {
                i,
                entry: func.entry,
            }));
        }
        Lower::None
    }

    /// In speculative mode: ends its own frames, then the entry frames
    /// above the highest one running the known function at `entry` (below
    /// the top one when it has no frames of its own), which becomes the
    /// anchor ([`Item::PopTo`]). The frames skipped are those ended, less
    /// `minus` (the one returning, for a return or a resume).
    fn pop_to_entry(&mut self, entry: u64, minus: i64, at: Stamp, out: &mut dyn FnMut(Slice)) {
        let own = self.frames.len();
        self.pop_to(0, at, out);
        let e = self.entry.as_mut().expect("speculative mode");
        e.items.push(Item::PopTo {
            entry,
            skip_top: own == 0,
            skipped: own as i64 - minus,
            at,
        });
        e.epoch += 1;
        e.consumed = 0;
        e.revealed = Some((e.epoch, 0, true, entry));
    }

    #[inline(always)]
    fn ret(&mut self, at: Stamp, to: u64, resolver: &dyn Resolver, out: &mut dyn FnMut(Slice)) {
        // Most returns end the top frame, returning where its call said.
        if let Some(top) = self.frames.last() {
            if top.ret == Some(to) && top.ret_of_entry.is_none() {
                self.stats.returns += 1;
                let frame = self.frames.pop().expect("a top frame");
                self.close(frame, at, out);
                return;
            }
        }
        self.ret_any(at, to, resolver, out);
    }

    /// [`ThreadStack::ret`] in general.
    #[inline(never)]
    fn ret_any(&mut self, at: Stamp, to: u64, resolver: &dyn Resolver, out: &mut dyn FnMut(Slice)) {
        self.stats.returns += 1;
        // The frame whose call returns to `to` ends; frames above it are skipped.
        if let Some(i) = self
            .frames
            .iter()
            .rposition(|f| f.ret == Some(to) || !f.ret_of_entry.is_none())
        {
            if let (Some(e), Some(tail)) = (&mut self.entry, self.frames[i].ret_of_entry.get()) {
                // Its return address is an entry frame's: assumed to match.
                e.items.push(Item::Assume(Assert::RetOf { tail, to }));
            }
            self.stats.skipped_frames += (self.frames.len() - 1 - i) as u64;
            self.pop_to(i, at, out);
            return;
        }
        if let Some(consumed) = self.entry.as_ref().map(|e| e.consumed) {
            // One of its own frames below the top runs the function
            // returned into (an exception's landing pad, longjmp): that
            // one, assuming no entry frame returns to `to` exactly.
            let (func, known) = self.resolve(resolver, to, at.time);
            let below_top = self.frames.len().saturating_sub(1);
            let own = self.frames[..below_top]
                .iter()
                .rposition(|f| f.known && f.func.entry == func.entry);
            if let (true, Some(i)) = (known, own) {
                let e = self.entry.as_mut().expect("speculative");
                e.items
                    .push(Item::Assume(Assert::NoRet { i: consumed, to }));
                self.stats.skipped_frames += (self.frames.len() - 2 - i) as u64;
                self.pop_to(i + 1, at, out);
                return;
            }
            if !self.frames.is_empty() {
                // Its own top frame returns elsewhere than its call's
                // return address, and none of its frames runs the code
                // returned into: unwinding into an entry frame, found by
                // function as the real stack would (after no frame matched
                // exactly).
                if !known {
                    self.fail("a return to code without a symbol past the entry");
                    return;
                }
                let e = self.entry.as_mut().expect("speculative");
                e.items
                    .push(Item::Assume(Assert::NoRet { i: consumed, to }));
                self.pop_to_entry(func.entry, 1, at, out);
                return;
            }
            if known
                && self
                    .entry
                    .as_ref()
                    .is_some_and(|e| e.learned.ret.contains(&to))
            {
                // A return here went past an exact match before: to the
                // highest frame below the top running the function.
                let e = self.entry.as_mut().expect("speculative");
                e.items
                    .push(Item::Assume(Assert::NoRet { i: consumed, to }));
                self.pop_to_entry(func.entry, 1, at, out);
                return;
            }
            // Otherwise assumed to be the next entry frame's return (from
            // the function the stretch began in, or from its caller, ...),
            // which ends with the frames above it.
            self.stats.skipped_frames += self.frames.len() as u64;
            self.pop_to(0, at, out);
            let e = self.entry.as_mut().expect("speculative");
            e.items.push(Item::Assume(Assert::Ret { i: consumed, to }));
            e.items.push(Item::CloseEntry(at));
            e.consumed += 1;
            return;
        }
        let (func, known) = self.resolve(resolver, to, at.time);
        if known {
            if let Lower::Own(i) = self.lower_frame_of(&func) {
                self.stats.skipped_frames += (self.frames.len() - 2 - i) as u64;
                self.pop_to(i + 1, at, out);
                return;
            }
        }
        // A signal handler returns to the signal trampoline (its return
        // address was pushed by the kernel): the handler ends, and the
        // trampoline's rt_sigreturn resumes the interrupted frame below.
        if let Some(h) = self.frames.iter().rposition(|f| f.handler) {
            self.stats.skipped_frames += (self.frames.len() - 1 - h) as u64;
            self.pop_to(h, at, out);
            return;
        }
        // Above the known stack: the function returned into was running
        // when the segment began. Frames whose call was seen end here
        // unmatched: an unwind (longjmp, exception, panic) into code that
        // no symbol or unwind table covers, or a return the stack cannot
        // place. Counted, and flagged on their slices, never left open.
        let unmatched = self.frames.iter().filter(|f| f.ret.is_some()).count() as u64;
        if unmatched > 0 {
            self.stats.unmatched_unwinds += 1;
            self.stats.unmatched_frames += unmatched;
            for f in &mut self.frames {
                f.unmatched = f.ret.is_some();
            }
        }
        let depth = self.frames.first().map_or(0, |f| f.depth) - 1;
        // Numbered before the frames below it end, so that the lowest
        // names it as its parent.
        let id = self.alloc_id();
        // Those held go first: in the order they closed, before the frame
        // that ends now and its children.
        if !self.unplaced.is_empty() {
            self.place(Some(id), out);
        }
        self.below = Some(id);
        self.pop_to(0, at, out);
        self.below = None;
        let base = self.base.unwrap_or(at);
        self.stats.retroactive_frames += 1;
        self.open_as(id, func, known, base, None, true, depth);
        let mut held = std::mem::take(&mut self.base_held);
        if std::mem::take(&mut self.base_parentless) > 0 {
            for s in held.iter_mut().filter(|s| s.parent.is_none()) {
                // Held at the bottom (Perfetto's order): its parent now.
                s.parent = Some(id);
            }
        }
        let tied = std::mem::take(&mut self.base_tied);
        let frame = self.frames.last_mut().expect("just opened");
        frame.held = held;
        frame.tied = tied;
    }

    #[inline(always)]
    fn jump(
        &mut self,
        at: Stamp,
        from: u64,
        to: u64,
        resolver: &dyn Resolver,
        out: &mut dyn FnMut(Slice),
    ) {
        let Some((top_known, top_entry)) = self.top_id(from, at.time, resolver) else {
            return;
        };
        // Most jumps stay inside the top frame's function: inside a span
        // met before, `place_of` would say (false, Some(func)).
        if let Some(func) = self.spans.func(to, at.time) {
            if !top_known || func == top_entry {
                return;
            }
        }
        self.jump_resolved(at, to, (top_known, top_entry), resolver, out);
    }

    /// [`ThreadStack::jump`] where no span answers: the resolver's.
    #[inline(never)]
    fn jump_resolved(
        &mut self,
        at: Stamp,
        to: u64,
        (top_known, top_entry): (bool, u64),
        resolver: &dyn Resolver,
        out: &mut dyn FnMut(Slice),
    ) {
        let ((to_is_entry, to_func), span) = resolver.place_and_span(self.pid, to, at.time);
        if let Some(span) = span {
            self.spans.put(to, at.time, span);
        }
        if !to_is_entry && (!top_known || to_func.is_none_or(|entry| entry == top_entry)) {
            return;
        }
        self.jump_out(
            at,
            to,
            (top_known, top_entry),
            (to_is_entry, to_func),
            resolver,
            out,
        );
    }

    /// [`ThreadStack::jump`] to a function's entry or into another
    /// function's middle.
    #[inline(never)]
    fn jump_out(
        &mut self,
        at: Stamp,
        to: u64,
        (top_known, top_entry): (bool, u64),
        (to_is_entry, to_func): (bool, Option<u64>),
        resolver: &dyn Resolver,
        out: &mut dyn FnMut(Slice),
    ) {
        if to_is_entry {
            let (func, known) = self.resolve(resolver, to, at.time);
            if top_known && known && func.entry == top_entry {
                return; // a jump to its own entry
            }
            if self.frames.is_empty() {
                // A tail call out of an entry frame: it ends, and the new
                // frame takes its place and its return address.
                self.stats.tail_calls += 1;
                let depth = self.top_depth();
                let e = self
                    .entry
                    .as_mut()
                    .expect("frames are empty only in speculative mode");
                let tail = TailOf::some(e.tails);
                e.tails += 1;
                e.items.push(Item::TailFrom);
                e.items.push(Item::CloseEntry(at));
                e.consumed += 1;
                self.open(func, known, at, None, false, depth);
                self.frames.last_mut().expect("just opened").ret_of_entry = tail;
                if tail.is_none() {
                    self.fail("more tail calls out of entry frames than a stretch may count");
                }
                return;
            }
            self.stats.tail_calls += 1;
            let frame = self.frames.pop().expect("top exists");
            let (depth, ret, of) = (frame.depth, frame.ret, frame.ret_of_entry);
            self.close(frame, at, out);
            self.open(func, known, at, ret, false, depth);
            self.frames.last_mut().expect("just opened").ret_of_entry = of;
            return;
        }
        if !top_known || to_func.is_none_or(|entry| entry == top_entry) {
            return;
        }
        // Into another function's middle (`place_of` said whose).
        if let Some(func) = resolver.function_of(self.pid, to, at.time) {
            match self.lower_frame_of(&func) {
                Lower::Own(i) => {
                    self.stats.skipped_frames += (self.frames.len() - 1 - i) as u64;
                    self.pop_to(i + 1, at, out);
                }
                Lower::Entry => self.pop_to_entry(func.entry, 0, at, out),
                Lower::None => {}
            }
        }
    }

    /// Ends frames `i..` at `at`, top first.
    fn pop_to(&mut self, i: usize, at: Stamp, out: &mut dyn FnMut(Slice)) {
        while self.frames.len() > i {
            let frame = self.frames.pop().expect("len > i");
            self.close(frame, at, out);
        }
    }

    /// Ends `frame` (just popped) at `end`: its slice goes out, or waits
    /// behind its parent ([`ThreadStack::finish`]). In line with its
    /// commonest case only: LLVM then reads the popped frame's fields
    /// in their own widths, where the copy of it passed to the call read
    /// them in 16-byte words just after their stores (a frame is most
    /// often closed a few ops after it opened) and waited on store
    /// forwarding (perf annotate of `ptdec report` on one CPU, the
    /// bench's interp trace: a tenth of `StackSink::push_run`'s
    /// samples).
    #[inline(always)]
    fn close(&mut self, frame: Frame, end: Stamp, out: &mut dyn FnMut(Slice)) {
        if frame.unknown_start && frame.start == end && !frame.tied {
            // Tracing resumed here and stopped at once (a resume straight
            // into a gap, as at code without an image): nothing ran in it.
            self.stats.empty_frames += 1;
            return;
        }
        // Most: out at once, below a parent it does not tie with, holding
        // nothing, in a stack that is not speculative (`finish`'s first
        // and last steps only), the slice made where the call takes it.
        // Made first and moved, it was copied once more, whole, in wider
        // words than its fields' stores just made, which waited on store
        // forwarding (perf annotate of `ptdec report` on one CPU, the
        // bench's interp trace: a fifth of `ThreadStack::close`'s
        // samples).
        let fast = self.entry.is_none() && frame.held.capacity() == 0;
        let parent = match self.frames.last() {
            Some(p) if fast && !ties(&p.start, &frame.start) => Some(p.id),
            _ => None,
        };
        let Frame {
            start,
            id,
            func,
            call_time,
            held,
            depth,
            unknown_start,
            unmatched,
            ..
        } = frame;
        let (pid, tid) = (self.pid, self.tid);
        // Made at each call (in line), not once before them.
        let slice = move |parent| Slice {
            pid,
            tid,
            depth,
            id,
            parent,
            start,
            end,
            kind: SliceKind::Call {
                func,
                unknown_start,
                call_time,
                unmatched,
            },
        };
        match parent {
            Some(_) => {
                std::mem::forget(held);
                out(slice(parent));
            }
            None => self.close_other(slice(None), held, out),
        }
    }

    /// [`ThreadStack::close`] but for its commonest case: its slice
    /// (`parent` not set yet) and the slices held behind it.
    #[inline(never)]
    fn close_other(&mut self, slice: Slice, held: VecDeque<Slice>, out: &mut dyn FnMut(Slice)) {
        self.finish(slice, held, out);
    }

    /// Emits `slice` and the slices held behind it, or holds them all behind
    /// the parent they tie with.
    #[inline]
    fn finish(&mut self, mut slice: Slice, held: VecDeque<Slice>, out: &mut dyn FnMut(Slice)) {
        // Tied with its parent, but the thread holds MAX_HELD already.
        let mut past_bound = false;
        if let Some(parent) = self.frames.last_mut() {
            slice.parent = Some(parent.id);
            if ties(&parent.start, &slice.start) {
                parent.tied = true;
                if !self.close_order {
                    if self.held_now < MAX_HELD {
                        self.held_now += 1;
                        self.held_peak = self.held_peak.max(self.held_now);
                        self.held_moves += hold(&mut parent.held, slice, held);
                        return;
                    }
                    past_bound = true;
                }
            }
        } else if self.entry.is_some() {
            // The parent is an entry frame, which began before any stamp
            // here (checked by `apply`): no tie.
            slice.parent = Some(ENTRY_PARENT);
        } else if matches!(self.state, State::Running | State::Disabled { .. })
            && self.base.is_some()
        {
            // The frame just found above the segment's first one, if any.
            slice.parent = self.below;
            if self.base.is_some_and(|b| ties(&b, &slice.start)) {
                self.base_tied = true;
                if !self.close_order {
                    if self.held_now < MAX_HELD {
                        self.held_now += 1;
                        self.held_peak = self.held_peak.max(self.held_now);
                        // The slices held behind it have their parents.
                        self.base_parentless += usize::from(slice.parent.is_none());
                        self.held_moves += hold(&mut self.base_held, slice, held);
                        return;
                    }
                    past_bound = true;
                }
            }
            if self.place_roots && self.below.is_none() {
                // Its parent is not known yet (close order: nothing held
                // behind it).
                self.unplaced.push(slice);
                let n = self.unplaced.len() as u64;
                self.stats.max_unplaced = self.stats.max_unplaced.max(n);
                return;
            }
        }
        if past_bound {
            self.held_past_bound();
        }
        self.put(slice, out);
        // Most frames hold nothing: no iterator to make and drop (20
        // instructions a slice), nor the deque (never allocated: its drop
        // was 63 M instructions of `ptdec report`'s 8.1 G on the bench's
        // interpreter trace, 18 a slice, for nothing to free).
        if !held.is_empty() {
            self.held_now -= held.len();
            for h in held {
                self.put(h, out);
            }
        } else if held.capacity() == 0 {
            std::mem::forget(held);
        }
    }

    /// Ends every frame at `at` and releases what waited for a retroactive parent.
    fn close_segment(&mut self, at: Stamp, out: &mut dyn FnMut(Slice)) {
        self.pop_to(0, at, out);
        // No frame above the segment's first one comes any more.
        if !self.unplaced.is_empty() {
            self.place(None, out);
        }
        self.held_now -= self.base_held.len();
        self.base_held.drain(..).for_each(&mut *out);
        self.base_parentless = 0;
        self.base_tied = false;
        self.base = None;
    }

    /// Ends untraced time, gaps and frames at `at` (for `Gap` and `End`).
    fn end_segment(&mut self, at: Stamp, out: &mut dyn FnMut(Slice)) {
        match std::mem::replace(&mut self.state, State::Running) {
            State::Disabled {
                at: off_at,
                ip,
                kernel,
            } => {
                self.stats.untraced += 1;
                let untraced = Slice {
                    pid: self.pid,
                    tid: self.tid,
                    depth: self.top_depth() + 1,
                    id: self.alloc_id(),
                    parent: None,
                    start: off_at,
                    end: at,
                    kind: SliceKind::Untraced { kernel, ip },
                };
                self.finish(untraced, VecDeque::new(), out);
            }
            State::InGap {
                at: gap_at,
                kind,
                offset,
            } => {
                self.state = State::Idle;
                let id = self.alloc_id();
                self.finish(
                    Slice {
                        pid: self.pid,
                        tid: self.tid,
                        depth: 0,
                        id,
                        parent: None,
                        start: gap_at,
                        end: at,
                        kind: SliceKind::Gap { kind, offset },
                    },
                    VecDeque::new(),
                    out,
                );
            }
            State::Running | State::Idle => {}
        }
        self.close_segment(at, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::slices::PlaceAndSpan;
    use std::collections::BTreeMap;

    const MAIN: u64 = 0x1000;
    const A: u64 = 0x2000;
    const B: u64 = 0x3000;
    const C: u64 = 0x4000;
    const D: u64 = 0x5000;
    const F: u64 = 0x6000;
    const HANDLER: u64 = 0x7000;
    const X: u64 = 0x8000;
    /// The entry of a program the thread execs (`exec_between` says so of
    /// any ip in it).
    const NEW_START: u64 = 0x9000;

    /// Functions of 0x100 bytes at the addresses above; nothing else has a symbol.
    struct Map(BTreeMap<u64, FuncRef>);

    impl Map {
        fn new() -> Self {
            let names = [
                (MAIN, "main"),
                (A, "a"),
                (B, "b"),
                (C, "c"),
                (D, "d"),
                (F, "f"),
                (HANDLER, "handler"),
                (X, "x"),
                (NEW_START, "_start"),
            ];
            Map(names
                .iter()
                .map(|&(entry, name)| {
                    let func = Func {
                        entry,
                        name: name.into(),
                        module: "prog".into(),
                    };
                    (entry, FuncRef::owned(func))
                })
                .collect())
        }
    }

    impl Resolver for Map {
        fn function_of(&self, _pid: u32, addr: u64, _time: u64) -> Option<FuncRef> {
            let (&entry, f) = self.0.range(..=addr).next_back()?;
            (addr < entry + 0x100).then(|| f.clone())
        }
        fn is_function_entry(&self, _pid: u32, addr: u64, _time: u64) -> bool {
            self.0.contains_key(&addr)
        }
        fn exec_between(&self, _pid: u32, _tid: u32, _after: u64, _upto: u64, ip: u64) -> bool {
            (NEW_START..NEW_START + 0x100).contains(&ip)
        }
        /// For all time (so the tests take the stacks' callee cache too).
        fn function_over(&self, pid: u32, addr: u64, time: u64) -> (Option<FuncRef>, u64, u64) {
            (self.function_of(pid, addr, time), 0, u64::MAX)
        }
        /// Each function's bytes past its entry (so the tests take the
        /// stacks' span cache too).
        fn place_and_span(&self, pid: u32, addr: u64, time: u64) -> PlaceAndSpan {
            let span = self.0.range(..=addr).next_back().and_then(|(&entry, _)| {
                (addr < entry + 0x100).then_some(PlaceSpan {
                    lo: entry,
                    hi: entry + 0x100,
                    since: 0,
                    until: u64::MAX,
                    func: entry,
                })
            });
            (self.place_of(pid, addr, time), span)
        }
    }

    /// Time `t` ns, ten instructions per ns.
    fn s(t: u64) -> Stamp {
        Stamp {
            time: t,
            insns: t * 10,
            cycles: crate::model::ops::Cycles::NONE,
        }
    }

    fn enabled(t: u64, ip: u64) -> Op {
        Op::Enabled {
            at: s(t),
            ip,
            first: false,
        }
    }
    /// A 5-byte call (`call rel32`).
    fn call(t: u64, from: u64, to: u64) -> Op {
        call_len(t, from, to, 5)
    }
    /// A call instruction of `len` bytes (`call *%rax` is 2).
    fn call_len(t: u64, from: u64, to: u64, len: u64) -> Op {
        Op::Call {
            at: s(t),
            from,
            to,
            ret: from + len,
            raw_time: t,
        }
    }
    /// A return to just after a 5-byte call at `site`.
    fn ret(t: u64, from: u64, site: u64) -> Op {
        ret_to(t, from, site + 5)
    }
    fn ret_to(t: u64, from: u64, to: u64) -> Op {
        Op::Return { at: s(t), from, to }
    }
    fn jump(t: u64, from: u64, to: u64) -> Op {
        Op::Jump {
            at: s(t),
            from,
            to,
            inside: false,
        }
    }
    fn disabled(t: u64, ip: u64, kernel: bool) -> Op {
        Op::Disabled {
            at: s(t),
            ip,
            kernel,
        }
    }
    fn end(t: u64) -> Op {
        Op::End { at: s(t) }
    }

    /// Equal functions interned are one `Func` (its address names it in
    /// the report's and the FTF writer's caches); owned ones are not, and
    /// both compare by value.
    #[test]
    fn interned_functions_are_one_and_owned_ones_their_own() {
        let f = |entry: u64, name: &str| Func {
            entry,
            name: name.into(),
            module: "/bin/interned-test".into(),
        };
        let (a, b) = (
            FuncRef::interned(f(0x10, "a")),
            FuncRef::interned(f(0x10, "a")),
        );
        assert_eq!(a.addr(), b.addr());
        assert_eq!(a.addr(), a.clone().addr());
        let c = FuncRef::interned(f(0x20, "a"));
        assert_ne!(a.addr(), c.addr());
        let (o, p) = (FuncRef::owned(f(0x10, "a")), FuncRef::owned(f(0x10, "a")));
        assert_ne!(o.addr(), p.addr());
        assert_eq!(o.addr(), o.clone().addr());
        assert_eq!(a, o);
        assert_ne!(a, c);
        assert_eq!(
            (a.entry, &*a.name, &*a.module),
            (0x10, "a", "/bin/interned-test")
        );
    }

    /// [`ThreadStack::push_leaf`] (a call and its return at once, as
    /// `StackSink::push_run` hands them) makes the same slices (ids,
    /// parents, stamps, kinds), in the same order, and the same stats as
    /// the two ops pushed one by one: random ops, with leaves, ties (times
    /// that repeat, or go back and are clamped), returns elsewhere, jumps,
    /// unknown code, untraced stretches, in every mode a stack runs in.
    #[test]
    fn a_leaf_at_once_is_its_call_and_return_one_by_one() {
        let mut rng = fastrand::Rng::with_seed(0x5eed_1eaf);
        let funcs = [MAIN, A, B, C, D, F, X, 0xa000];
        let mut all_leaves = 0;
        for round in 0..400 {
            let mut ops = vec![enabled(1, MAIN + 0x10)];
            let mut t = 1u64;
            let mut sites: Vec<u64> = Vec::new();
            let mut here = MAIN + 0x10;
            for _ in 0..rng.usize(1..120) {
                t = match rng.u8(0..10) {
                    0..=3 => t,
                    4 => t.saturating_sub(rng.u64(0..3)),
                    _ => t + rng.u64(1..4),
                };
                let f = funcs[rng.usize(0..funcs.len())];
                match rng.u8(0..12) {
                    0..=4 => {
                        let site = here + rng.u64(0..0x20);
                        let to = if rng.u8(0..8) == 0 { site + 5 } else { f };
                        ops.push(call(t, site, to));
                        sites.push(site);
                        here = f + 0x10;
                    }
                    5..=8 => {
                        let site = match (sites.pop(), rng.u8(0..6)) {
                            (Some(site), 0) => site + 0x40,
                            (Some(site), _) => site,
                            (None, _) => f + 0x20,
                        };
                        ops.push(ret(t, here + 0x30, site));
                        here = site + 5;
                    }
                    9 => {
                        let to = if rng.bool() { f } else { f + 0x30 };
                        ops.push(jump(t, here + 0x40, to));
                        here = to;
                    }
                    10 => {
                        ops.push(disabled(t, here, rng.bool()));
                        t += rng.u64(0..3);
                        here = if rng.bool() { here } else { f + 0x18 };
                        ops.push(enabled(t, here));
                    }
                    _ => ops.push(ret_to(t, here + 0x30, f + 0x50)),
                }
            }
            ops.push(end(t + 1));
            if round % 2 == 1 {
                // With cycles, which tie and are clamped too: a count
                // that stands still across two ns (a tie by cycles where
                // the times differ), and goes back where the time does.
                for op in &mut ops {
                    let at = op.stamp_mut();
                    at.cycles = crate::model::ops::Cycles::some(at.time / 2);
                }
            }
            let modes: [fn() -> ThreadStack; 3] = [
                || ThreadStack::new(1, 2),
                || ThreadStack::close_order(1, 2),
                || ThreadStack::new(1, 2).placing_roots(),
            ];
            for (m, make) in modes.iter().enumerate() {
                let map = Map::new();
                let (mut one, mut two) = (make(), make());
                let (mut a, mut b) = (Vec::new(), Vec::new());
                for op in &ops {
                    one.push(op, &map, &mut |sl: Slice| a.push(format!("{sl:?}")));
                }
                let mut i = 0;
                let mut leaves = 0;
                while i < ops.len() {
                    let mut out = |sl: Slice| b.push(format!("{sl:?}"));
                    if i + 1 < ops.len() && two.push_leaf(&ops[i], &ops[i + 1], &map, &mut out) {
                        leaves += 1;
                        i += 2;
                        continue;
                    }
                    two.push(&ops[i], &map, &mut out);
                    i += 1;
                }
                let what = format!("round {round}, mode {m}, {leaves} leaves: {ops:?}");
                assert_eq!(a, b, "{what}");
                assert_eq!(one.stats(), two.stats(), "{what}");
                assert_eq!(one.last_stamp(), two.last_stamp(), "{what}");
                assert_eq!(one.open_frames(), two.open_frames(), "{what}");
                all_leaves += leaves;
            }
        }
        // Most calls here are taken at once, not all.
        assert!(all_leaves > 2_000, "{all_leaves} leaves");
    }

    /// One line per slice: depth, name (`?` marks an unknown start), times, instructions.
    fn render(slice: &Slice) -> String {
        let name = match &slice.kind {
            SliceKind::Call {
                func,
                unknown_start,
                ..
            } => {
                format!("{}{}", func.name, if *unknown_start { "?" } else { "" })
            }
            SliceKind::Untraced { kernel: true, .. } => "[kernel]".into(),
            SliceKind::Untraced { kernel: false, .. } => "[untraced]".into(),
            SliceKind::Gap { kind, .. } => format!("[gap {kind:?}]"),
        };
        format!(
            "{} {name} {}-{} i{}",
            slice.depth,
            slice.start.time,
            slice.end.time,
            slice.insns()
        )
    }

    fn run(ops: &[Op]) -> (Vec<String>, StackStats) {
        let map = Map::new();
        let mut stack = ThreadStack::new(1, 2);
        let mut slices = Vec::new();
        for op in ops {
            stack.push(op, &map, &mut |sl: Slice| {
                assert!(sl.start.time <= sl.end.time, "{sl:?}");
                assert_eq!((sl.pid, sl.tid), (1, 2));
                slices.push(render(&sl));
            });
        }
        (slices, stack.stats().clone())
    }

    fn assert_slices(ops: &[Op], want: &[&str]) -> StackStats {
        let (got, stats) = run(ops);
        assert_eq!(got, want, "\ngot:  {got:#?}\nwant: {want:#?}");
        assert_any_split_agrees(ops);
        assert_parents_exact(ops);
        stats
    }

    /// A stack placing roots over `ops`: its slices, in order.
    fn placed(ops: &[Op]) -> Vec<Slice> {
        let map = Map::new();
        let mut stack = ThreadStack::new(1, 2).placing_roots();
        let mut slices = Vec::new();
        for op in ops {
            stack.push(op, &map, &mut |sl: Slice| slices.push(sl));
        }
        slices
    }

    /// Every id once; every parent a slice that came after its children,
    /// one level down, enclosing it on the time and instruction axes; and
    /// no parent exactly where a slice one level down encloses it.
    fn assert_parents_exact(ops: &[Op]) {
        let slices = placed(ops);
        let at: std::collections::HashMap<NonZeroU64, usize> =
            slices.iter().enumerate().map(|(i, s)| (s.id, i)).collect();
        assert_eq!(at.len(), slices.len(), "ids repeat: {slices:#?}");
        let encloses = |p: &Slice, c: &Slice| {
            p.start.time <= c.start.time
                && p.end.time >= c.end.time
                && p.start.insns <= c.start.insns
                && p.end.insns >= c.end.insns
        };
        for (i, c) in slices.iter().enumerate() {
            match c.parent {
                Some(pid) => {
                    let j = *at.get(&pid).unwrap_or_else(|| panic!("no parent: {c:?}"));
                    let p = &slices[j];
                    assert!(j > i, "parent before child: {p:?} {c:?}");
                    assert_eq!(p.depth, c.depth - 1, "{p:?} {c:?}");
                    assert!(encloses(p, c), "{p:?} does not enclose {c:?}");
                }
                None => {
                    // A slice one level down enclosing it strictly (not
                    // only touching it at an end) would be its parent.
                    let strict = |p: &Slice| {
                        p.depth == c.depth - 1
                            && encloses(p, c)
                            && p.start.insns < c.end.insns
                            && p.end.insns > c.start.insns
                    };
                    assert!(!slices.iter().any(strict), "a root inside a slice: {c:?}");
                }
            }
        }
    }

    /// Every slice (all fields) and the stats of one stack over `ops`, or
    /// of a stack over `ops[..k]` that then applies a speculative stack's
    /// outcome over `ops[k..]` (or, where it declines, takes those ops
    /// itself): whether it applied.
    fn run_split(
        ops: &[Op],
        k: Option<usize>,
        below: &Learned,
        (close_order, place_roots): (bool, bool),
    ) -> (Vec<String>, StackStats, bool) {
        let map = Map::new();
        let mut real = ThreadStack::new(1, 2);
        real.close_order = close_order;
        real.place_roots = place_roots;
        let mut slices = Vec::new();
        let k = k.unwrap_or(ops.len());
        // The speculative stack takes ops k.. up to the last End (which a
        // run ends with only at the end of the trace: not speculated).
        let m = match ops.last() {
            Some(Op::End { .. }) => (ops.len() - 1).max(k),
            _ => ops.len(),
        };
        for op in &ops[..k] {
            real.push(op, &map, &mut |sl: Slice| slices.push(format!("{sl:?}")));
        }
        let mut spec = ThreadStack::speculative(1, 2, below);
        spec.close_order = close_order;
        for op in &ops[k..m] {
            spec.push(op, &map, &mut |_| unreachable!("recorded"));
        }
        let base = Base {
            insns: 0,
            cycles: None,
        };
        let applied = k < m
            && real
                .apply(spec, base, &mut |item| {
                    if let Item::Slice(sl) = item {
                        slices.push(format!("{sl:?}"));
                    }
                })
                .is_ok();
        let rest = if applied { m } else { k };
        for op in &ops[rest..] {
            real.push(op, &map, &mut |sl: Slice| slices.push(format!("{sl:?}")));
        }
        (slices, real.stats().clone(), applied)
    }

    /// The stitch of `crate::stitch` at every op: the same slices, in the
    /// same order, and the same stats as one stack; returns at how many
    /// ops it applied.
    fn assert_any_split_agrees(ops: &[Op]) -> usize {
        let mut applied = 0;
        // Perfetto's order, close order, and close order with exact parents.
        for order in [(false, false), (true, false), (true, true)] {
            applied += splits_agree(ops, order);
        }
        applied
    }

    fn splits_agree(ops: &[Op], close_order: (bool, bool)) -> usize {
        let (want, want_stats, _) = run_split(ops, None, &Learned::default(), close_order);
        let mut applied = 0;
        // Without hints, and with every function assumed in an entry frame
        // where a jump or resume goes into its middle.
        let all = vec![MAIN, A, B, C, D, F, X, HANDLER];
        let rets: Vec<u64> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Return { to, .. } => Some(*to),
                _ => None,
            })
            .collect();
        let none = Learned::default();
        let every = Learned {
            below: all,
            ret: rets,
        };
        for below in [&none, &every] {
            for k in 0..ops.len() {
                let (got, stats, a) = run_split(ops, Some(k), below, close_order);
                assert_eq!(got, want, "split at op {k}, hints {below:?}, of {ops:#?}");
                assert_eq!(
                    stats, want_stats,
                    "split at op {k}, hints {below:?}, of {ops:#?}"
                );
                applied += usize::from(a);
            }
        }
        applied
    }

    /// A random program's ops: calls (some to their own next instruction),
    /// returns, tail calls, jumps within and across functions, longjmps
    /// and unwinding into open frames, syscalls and signal handlers.
    fn random_ops(seed: u64, n: usize) -> Vec<Op> {
        let funcs = [MAIN, A, B, C, D, F, X];
        let mut rng = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = move |m: u64| {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (rng >> 33) % m
        };
        // (function, return address) of each open frame, as the program has it.
        let mut stack: Vec<(u64, u64)> = vec![(MAIN, 0)];
        let mut t = 1;
        let mut ops = vec![enabled(t, MAIN + 1)];
        while ops.len() < n {
            // Some ops share a stamp with the one before: ties.
            t += next(3);
            let (cur, _) = *stack.last().expect("main stays");
            let here = cur + 0x10 + next(0x40);
            match next(20) {
                0..=6 if stack.len() < 12 => {
                    let to = funcs[next(funcs.len() as u64) as usize];
                    ops.push(call(t, here, to));
                    stack.push((to, here + 5));
                }
                7..=12 if stack.len() > 1 => {
                    let (_, ret) = stack.pop().expect("len > 1");
                    ops.push(ret_to(t, here, ret));
                }
                13 if stack.len() > 1 => {
                    let to = funcs[next(funcs.len() as u64) as usize];
                    ops.push(jump(t, here, to));
                    let top = stack.last_mut().expect("len > 1");
                    top.0 = to;
                }
                14 => ops.push(jump(t, here, cur + 0x80 + next(0x40))),
                15 if stack.len() > 2 => {
                    // longjmp (a jump) or an unwinder's return into a lower frame.
                    let keep = 1 + next(stack.len() as u64 - 1) as usize;
                    stack.truncate(keep);
                    let (lower, _) = stack[keep - 1];
                    let to = lower + 0x60 + next(0x10);
                    if next(2) == 0 {
                        ops.push(jump(t, here, to));
                    } else {
                        ops.push(ret_to(t, here, to));
                    }
                }
                16 => {
                    ops.push(disabled(t, here, true));
                    t += 1 + next(5);
                    if next(4) == 0 {
                        ops.push(enabled(t, HANDLER));
                        stack.push((HANDLER, 0));
                    } else {
                        ops.push(enabled(t, here + 2));
                    }
                }
                17 => ops.push(call_len(t, here, here + 5, 5)),
                18 if stack.len() > 1 && next(3) == 0 => {
                    // Returning above anything seen.
                    ops.push(ret_to(t, here, X + 0x20));
                    stack.truncate(1);
                }
                _ => {}
            }
        }
        ops.push(end(t + 1));
        ops
    }

    #[test]
    fn a_speculative_stack_applied_at_any_op_gives_the_same_slices() {
        let mut applied = 0;
        let mut splits = 0;
        for seed in 0..200 {
            let ops = random_ops(seed, 60);
            applied += assert_any_split_agrees(&ops);
            assert_parents_exact(&ops);
            splits += 6 * ops.len();
        }
        // Many splits apply; the others (an entry frame that is not what was
        // assumed, a tie with one, a gap) take the ops one by one.
        eprintln!("applied at {applied} of {splits} splits");
        assert!(
            applied * 5 > splits,
            "applied at {applied} of {splits} splits"
        );
    }

    #[test]
    fn marks_change_nothing() {
        use crate::model::ops::Mark;
        let mark = |t: u64| Op::Mark {
            at: s(t),
            mark: Box::new(Mark::Ptwrite {
                ip: None,
                payload: t,
                emulated: false,
            }),
        };
        // Marks before any segment, inside calls, and a switch-out while
        // only marks were seen: the stack is as without them.
        let with = [
            mark(1),
            disabled(2, 0, true),
            enabled(10, 0x1000),
            mark(11),
            call(12, 0x1010, 0x2000),
            mark(13),
            ret(14, 0x2010, 0x1010),
            mark(15),
            end(20),
        ];
        let without: Vec<Op> = with
            .iter()
            .filter(|o| !matches!(o, Op::Mark { .. } | Op::Disabled { .. }))
            .cloned()
            .collect();
        assert_eq!(run(&with), run(&without));
    }

    /// Time that never moves (two instants here): every slice ties with
    /// its parent and would be held until the parent closes. A thread
    /// holds at most MAX_HELD: past it a tied slice goes out before its
    /// parent, counted; what is held is what the queues hold, op by op;
    /// every slice still comes out, parents as in close order; and the
    /// stitch gives the same slices and stats split anywhere, declining
    /// where the speculative stack's holding would pass the bound over the
    /// real stack's (a split just before `a`'s call, the first op of the
    /// second instant: it holds 2,000 there, the real stack 3,000).
    #[test]
    fn slices_tied_past_the_held_bound_go_out_before_their_parent() {
        const R: usize = 3000;
        const P: usize = 2000;
        const _: () = assert!(R < MAX_HELD && P < MAX_HELD && R + P > MAX_HELD);
        let mut insns = 0;
        let mut at = |time: u64| {
            insns += 10;
            Stamp {
                time,
                insns,
                cycles: crate::model::ops::Cycles::NONE,
            }
        };
        // A call from `from` to `to` at `time` and its return.
        let mut pair = |time: u64, from: u64, to: u64| {
            [
                Op::Call {
                    at: at(time),
                    from,
                    to,
                    ret: from + 5,
                    raw_time: time,
                },
                Op::Return {
                    at: at(time),
                    from: to + 0x10,
                    to: from + 5,
                },
            ]
        };
        let mut ops = vec![Op::Enabled {
            at: Stamp {
                time: 7,
                insns: 0,
                cycles: crate::model::ops::Cycles::NONE,
            },
            ip: MAIN + 1,
            first: false,
        }];
        for _ in 0..R {
            ops.extend(pair(7, MAIN + 0x10, C));
        }
        let call_a = ops.len();
        let [call, ret] = pair(8, MAIN + 0x20, A);
        ops.push(call);
        for _ in 0..P {
            ops.extend(pair(8, A + 0x10, B));
        }
        // a returns after its calls.
        let mut ret = ret;
        *ret.stamp_mut() = at(8);
        ops.push(ret);
        ops.push(Op::End { at: at(8) });
        let map = Map::new();
        let mut st = ThreadStack::new(1, 2);
        let mut out = Vec::new();
        for op in &ops {
            st.push(op, &map, &mut |sl: Slice| out.push(sl));
            assert_eq!(st.held_now, st.held_in_queues());
            assert!(st.held_now <= MAX_HELD);
        }
        assert_eq!(st.held_now, 0);
        // The b's past the bound (a ties with nothing).
        let past = (R + P - MAX_HELD) as u64;
        assert_eq!(st.stats().held_past_bound, past);
        // Every slice, each with the parent close order gives it.
        let mut co = ThreadStack::new(1, 2).in_close_order();
        let mut want = Vec::new();
        for op in &ops {
            co.push(op, &map, &mut |sl: Slice| want.push(sl));
        }
        assert_eq!(co.stats().held_past_bound, 0);
        let key = |v: &[Slice]| {
            let mut k: Vec<_> = v.iter().map(|s| (s.id, s.parent, s.depth)).collect();
            k.sort_unstable();
            k
        };
        assert_eq!(key(&out), key(&want));
        assert_eq!(out.len(), 1 + R + 1 + P);
        // The first b past the bound goes out before a; those held before
        // it come right after a.
        let pos = |f: u64| {
            out.iter()
                .position(|s| matches!(&s.kind, SliceKind::Call { func, .. } if func.entry == f))
        };
        let first_b = pos(B).expect("b");
        let a = pos(A).expect("a");
        assert!(first_b < a);
        assert_eq!(
            out[a + 1..]
                .iter()
                .filter(|s| matches!(&s.kind, SliceKind::Call { func, .. } if func.entry == B))
                .count(),
            MAX_HELD - R
        );
        // Split anywhere that matters: the same as one stack.
        for order in [(false, false), (true, false), (true, true)] {
            let (want, want_stats, _) = run_split(&ops, None, &Learned::default(), order);
            let mut applied = Vec::new();
            for k in [
                1,
                2,
                R,
                2 * R,
                call_a,
                call_a + 1,
                call_a + 2 * (MAX_HELD - R),
                call_a + 2 * P,
                ops.len() - 2,
            ] {
                let (got, stats, a) = run_split(&ops, Some(k), &Learned::default(), order);
                assert_eq!(got, want, "split at {k}, order {order:?}");
                assert_eq!(stats, want_stats, "split at {k}, order {order:?}");
                if a {
                    applied.push(k);
                }
            }
            if !order.0 {
                // Perfetto's order: the stretch from a's call holds 2,000
                // over the real stack's 3,000, so it is declined.
                assert!(!applied.contains(&call_a), "{applied:?}");
            } else {
                // Close order holds nothing: it applies there.
                assert!(applied.contains(&call_a), "{applied:?}");
            }
        }
    }

    /// Calls that never return (a hostile or corrupt trace): past
    /// MAX_DEPTH frames the stack restarts at the call's function, so it
    /// never holds more; a stitch gives the same slices wherever it
    /// splits, declining (the real stack takes the ops) where the
    /// speculative stack would pass the bound.
    #[test]
    fn calls_past_the_depth_bound_restart_the_stack() {
        let n = MAX_DEPTH + 3;
        let mut ops = vec![enabled(0, MAIN + 0x10), call(1, MAIN + 0x20, A)];
        ops.extend((0..n as u64).map(|i| call(2 + i, A + 0x8, A)));
        ops.push(end(n as u64 + 10));
        let (slices, stats) = run(&ops);
        assert_eq!(stats.depth_restarts, 1, "{stats:?}");
        assert_eq!(stats.calls, n as u64 + 1);
        assert_eq!(stats.max_depth, MAX_DEPTH as i32 - 1);
        // main and MAX_DEPTH - 1 calls end at the restart; after it a
        // frame of `a` (where the call was made) and the rest of the calls.
        assert_eq!(slices.len(), 1 + (n + 1) + 1, "{:?}", &slices[..4]);
        // The top frame, the first slice out: the restart at the call at
        // MAX_DEPTH frames ends it.
        let (d, t) = (MAX_DEPTH - 1, MAX_DEPTH);
        assert_eq!(slices[0], format!("{d} a {d}-{t} i10"));
        for k in [0, 5, MAX_DEPTH - 2, MAX_DEPTH + 2] {
            for order in [(false, false), (true, false), (true, true)] {
                let (want, want_stats, _) = run_split(&ops, None, &Learned::default(), order);
                let (got, got_stats, applied) =
                    run_split(&ops, Some(k), &Learned::default(), order);
                assert!(got == want, "split at {k}");
                assert_eq!(got_stats, want_stats, "split at {k}");
                // A speculative stack that passes the bound is declined.
                assert_eq!(applied, k > MAX_DEPTH, "split at {k}");
            }
        }
    }

    #[test]
    fn nested_calls_end_children_first() {
        let stats = assert_slices(
            &[
                enabled(0, MAIN + 0x10),
                call(10, MAIN + 0x20, A),
                call(20, A + 0x8, B),
                ret(30, B + 0x50, A + 0x8),
                ret(40, A + 0x30, MAIN + 0x20),
                end(50),
            ],
            &["2 b 20-30 i100", "1 a 10-40 i300", "0 main? 0-50 i500"],
        );
        assert_eq!((stats.calls, stats.returns, stats.max_depth), (2, 2, 2));
    }

    #[test]
    fn recursion_pairs_each_return_with_its_call() {
        assert_slices(
            &[
                enabled(0, MAIN),
                call(10, MAIN + 0x20, F),
                call(20, F + 0x10, F),
                call(30, F + 0x10, F),
                ret(40, F + 0x30, F + 0x10),
                ret(50, F + 0x30, F + 0x10),
                ret(60, F + 0x30, MAIN + 0x20),
                end(70),
            ],
            &[
                "3 f 30-40 i100",
                "2 f 20-50 i300",
                "1 f 10-60 i500",
                "0 main 0-70 i700",
            ],
        );
    }

    /// A call's slice keeps the raw time of the call that opened it (what
    /// `report --slowest` starts its window at), whatever time spreading
    /// gave the slice; a tail call's slice, and one whose call was not
    /// seen, have none.
    #[test]
    fn a_calls_slice_keeps_its_raw_time() {
        let mut ops = vec![
            enabled(0, MAIN),
            call(10, MAIN + 0x20, A),
            call(12, A + 0x8, D),
            ret(13, D + 0x10, A + 0x8),
            jump(20, A + 0x60, B),
            ret(30, B + 0x10, MAIN + 0x20),
            ret_to(35, MAIN + 0x30, X + 0x10),
            end(40),
        ];
        // Spread times: each call's raw time is earlier than its slice's.
        for (op, raw) in ops.iter_mut().zip([0, 7, 11]) {
            if let Op::Call { raw_time, .. } = op {
                *raw_time = raw;
            }
        }
        let map = Map::new();
        let mut stack = ThreadStack::new(1, 2);
        let mut got = Vec::new();
        for op in &ops {
            stack.push(op, &map, &mut |sl: Slice| {
                if let SliceKind::Call { call_time, .. } = sl.kind {
                    got.push((render(&sl), call_time));
                }
            });
        }
        assert_eq!(
            got,
            [
                ("2 d 12-13 i10".to_string(), Some(11)),
                ("1 a 10-20 i100".to_string(), Some(7)),
                ("1 b 20-30 i100".to_string(), None),
                // (Tied at the start: main comes out behind x.)
                ("-1 x? 0-40 i400".to_string(), None),
                ("0 main 0-35 i350".to_string(), None),
            ]
        );
        assert_any_split_agrees(&ops);
    }

    #[test]
    fn tail_call_replaces_the_top_frame() {
        let stats = assert_slices(
            &[
                enabled(0, MAIN),
                call(10, MAIN + 0x20, A),
                jump(12, A + 0x10, A + 0x40), // inside a: nothing
                jump(14, A + 0x50, A),        // to its own entry: nothing
                jump(20, A + 0x60, B),        // tail call
                jump(25, B + 0x60, C),        // and another
                ret(30, C + 0x10, MAIN + 0x20),
                end(40),
            ],
            &[
                "1 a 10-20 i100",
                "1 b 20-25 i50",
                "1 c 25-30 i50",
                "0 main 0-40 i400",
            ],
        );
        assert_eq!(stats.tail_calls, 2);
    }

    #[test]
    fn return_skipping_three_frames() {
        let stats = assert_slices(
            &[
                enabled(0, MAIN),
                call(10, MAIN + 0x20, A),
                call(20, A + 0x20, B),
                call(30, B + 0x20, C),
                call(40, C + 0x20, D),
                // d returns to a's call site in main: b, c, d are skipped.
                ret(50, D + 0x30, MAIN + 0x20),
                end(60),
            ],
            &[
                "4 d 40-50 i100",
                "3 c 30-50 i200",
                "2 b 20-50 i300",
                "1 a 10-50 i400",
                "0 main 0-60 i600",
            ],
        );
        assert_eq!(stats.skipped_frames, 3);
    }

    #[test]
    fn longjmp_by_jump_pops_to_the_open_frame() {
        let stats = assert_slices(
            &[
                enabled(0, MAIN),
                call(10, MAIN + 0x20, A),
                call(20, A + 0x20, B),
                call(30, B + 0x20, C),
                call(40, C + 0x20, D),
                jump(50, D + 0x30, A + 0x44), // longjmp back into a
                ret(60, A + 0x50, MAIN + 0x20),
                end(70),
            ],
            &[
                "4 d 40-50 i100",
                "3 c 30-50 i200",
                "2 b 20-50 i300",
                "1 a 10-60 i500",
                "0 main 0-70 i700",
            ],
        );
        assert_eq!(stats.skipped_frames, 3);
    }

    #[test]
    fn returns_above_the_known_stack_create_frames_retroactively() {
        let stats = assert_slices(
            &[
                enabled(5, B + 0x10),        // the trace begins inside b
                ret(10, B + 0x50, A + 0x30), // b returns into a: a was running
                call(12, A + 0x40, C),       // a calls c
                ret(15, C + 0x10, A + 0x40),
                ret(20, A + 0x60, MAIN + 0x30), // a returns into main: main too
                end(30),
            ],
            &[
                // Parents first: main and a start where b does, so a reader
                // breaking timestamp ties by file order nests them right.
                "0 c 12-15 i30",
                "-2 main? 5-30 i250",
                "-1 a? 5-20 i150",
                "0 b? 5-10 i50",
            ],
        );
        assert_eq!(stats.retroactive_frames, 2);
    }

    /// (slice, its parent's) as rendered, in the order placed.
    fn parents(ops: &[Op]) -> Vec<(String, Option<String>)> {
        let slices = placed(ops);
        let name = |id: NonZeroU64| {
            let p = slices.iter().find(|p| p.id == id).expect("parent placed");
            render(p)
        };
        slices
            .iter()
            .map(|s| (render(s), s.parent.map(name)))
            .collect()
    }

    fn pairs(want: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        want.iter()
            .map(|(c, p)| (c.to_string(), p.map(str::to_string)))
            .collect()
    }

    /// Returns above the stack at one instant, one after another (no time
    /// moves: every slice ties with the segment's start and is held):
    /// each frame found above is the parent of the one before, the first
    /// also of the frame a tail call closed before it, held without one. The frames found look through what
    /// is held only while something there has no parent (looking every
    /// time was quadratic: 15 s for 1 MB of such PT).
    #[test]
    fn returns_above_the_stack_at_one_instant_chain_their_frames() {
        const N: u64 = 2_000;
        // Time 0 throughout; the instructions go on.
        let at = |insns: u64| Stamp {
            time: 0,
            insns,
            cycles: crate::model::ops::Cycles::NONE,
        };
        let mut ops = vec![
            enabled(0, B + 0x10),
            // b tail-calls c: b closes at the bottom, no parent yet.
            Op::Jump {
                at: at(50),
                from: B + 0x20,
                to: C,
                inside: false,
            },
            // c returns into a: a was running.
            Op::Return {
                at: at(100),
                from: C + 0x50,
                to: A + 0x30,
            },
        ];
        ops.extend((1..=N).map(|k| Op::Return {
            at: at(100 + 10 * k),
            from: A + 0x60,
            to: A + 0x30,
        }));
        ops.push(Op::End {
            at: at(100 + 10 * N + 10),
        });
        let got = parents(&ops);
        assert_eq!(got.len() as u64, N + 3, "{:?}", &got[..3]);
        // Parents first at one instant: the last frame found above holds
        // every other slice below it.
        let roots: Vec<_> = got.iter().filter(|(_, p)| p.is_none()).collect();
        assert_eq!(roots.len(), 1, "{roots:?}");
        assert_parents_exact(&ops);
        let (_, stats) = run(&ops);
        assert_eq!(stats.retroactive_frames, N + 1);
        // In Perfetto's order too (held at the bottom, not placed as roots):
        // b, closed before any frame was found above it, gets the first.
        let map = Map::new();
        let mut stack = ThreadStack::new(1, 2);
        let mut slices = Vec::new();
        for op in &ops {
            stack.push(op, &map, &mut |sl: Slice| slices.push(sl));
        }
        let roots: Vec<_> = slices.iter().filter(|s| s.parent.is_none()).collect();
        assert_eq!(roots.len(), 1, "{roots:?}");
    }

    /// Tail calls at the bottom of a segment, then a return above it: the
    /// frame found there is the parent of every frame at the bottom so
    /// far, held until it opens.
    #[test]
    fn a_frame_found_above_the_stack_is_the_parent_of_the_bottom_so_far() {
        let ops = [
            enabled(0, B + 0x10),        // inside b
            jump(10, B + 0x20, C),       // b tail-calls c
            call(12, C + 0x10, D),       // c calls d
            ret(14, D + 0x10, C + 0x10), // d returns
            jump(16, C + 0x20, X),       // c tail-calls x
            ret(20, X + 0x30, A + 0x30), // x returns into a: a was running
            call(22, A + 0x40, D),       // a calls d
            ret(24, D + 0x10, A + 0x40),
            end(30),
        ];
        assert_eq!(
            parents(&ops),
            pairs(&[
                ("1 d 12-14 i20", Some("0 c 10-16 i60")),
                // Held until a opened, then handed out in order.
                ("0 b? 0-10 i100", Some("-1 a? 0-30 i300")),
                ("0 c 10-16 i60", Some("-1 a? 0-30 i300")),
                ("0 x 16-20 i40", Some("-1 a? 0-30 i300")),
                ("0 d 22-24 i20", Some("-1 a? 0-30 i300")),
                ("-1 a? 0-30 i300", None),
            ])
        );
        assert_parents_exact(&ops);
        assert_any_split_agrees(&ops);
    }

    /// Without a return above it, the bottom of a segment is roots: at a
    /// gap, and at the end; the gap itself is one.
    #[test]
    fn the_bottom_of_a_segment_that_ends_is_roots() {
        let ops = [
            enabled(0, B + 0x10),
            jump(10, B + 0x20, C),
            call(12, C + 0x10, D),
            Op::Gap {
                at: s(14),
                kind: GapKind::Overflow,
                offset: 0,
            },
            enabled(20, A + 0x10),
            jump(22, A + 0x20, C),
            end(30),
        ];
        assert_eq!(
            parents(&ops),
            pairs(&[
                ("1 d 12-14 i20", Some("0 c 10-14 i40")),
                ("0 b? 0-10 i100", None),
                ("0 c 10-14 i40", None),
                ("0 [gap Overflow] 14-20 i60", None),
                ("0 a? 20-22 i20", None),
                ("0 c 22-30 i80", None),
            ])
        );
        let stack = {
            let map = Map::new();
            let mut st = ThreadStack::new(1, 2).placing_roots();
            for op in &ops {
                st.push(op, &map, &mut |_| {});
            }
            st
        };
        assert_eq!(stack.stats().max_unplaced, 2);
        assert_any_split_agrees(&ops);
    }

    #[test]
    fn return_into_recursive_caller_above_the_stack() {
        // The trace begins in f called by f: the return lands in f again,
        // which is a new (retroactive) frame, not the one that returned.
        assert_slices(
            &[enabled(0, F + 0x30), ret(10, F + 0x40, F + 0x10), end(20)],
            &["-1 f? 0-20 i200", "0 f? 0-10 i100"],
        );
    }

    #[test]
    fn syscalls_are_kernel_slices_inside_the_caller() {
        assert_slices(
            &[
                enabled(0, MAIN),
                call(10, MAIN + 0x20, A),
                disabled(15, A + 0x32, true),
                enabled(25, A + 0x34),
                ret(30, A + 0x40, MAIN + 0x20),
                disabled(35, MAIN + 0x40, false), // switched out
                enabled(45, MAIN + 0x40),
                end(50),
            ],
            &[
                "2 [kernel] 15-25 i100",
                "1 a 10-30 i200",
                "1 [untraced] 35-45 i100",
                "0 main 0-50 i500",
            ],
        );
    }

    #[test]
    fn signal_handler_and_sigreturn() {
        let stats = assert_slices(
            &[
                enabled(0, MAIN),
                call(10, MAIN + 0x20, A),
                disabled(20, A + 0x30, true), // interrupt: a signal is delivered
                enabled(22, HANDLER),         // the handler runs
                disabled(30, HANDLER + 0x40, true), // rt_sigreturn
                enabled(32, A + 0x30),        // back in a
                ret(40, A + 0x50, MAIN + 0x20),
                end(50),
            ],
            &[
                "2 [kernel] 20-22 i20",
                "3 [kernel] 30-32 i20",
                "2 handler 22-32 i100",
                "1 a 10-40 i300",
                "0 main 0-50 i500",
            ],
        );
        assert_eq!(stats.skipped_frames, 0);
    }

    #[test]
    fn a_handler_returning_to_the_signal_trampoline_ends_only_itself() {
        // x is the trampoline (__restore_rt): the handler's ret goes there,
        // its rt_sigreturn resumes a where the signal interrupted it.
        let stats = assert_slices(
            &[
                enabled(0, MAIN),
                call(10, MAIN + 0x20, A),
                disabled(20, A + 0x30, true),
                enabled(22, HANDLER),
                call(24, HANDLER + 0x10, B),
                ret(26, B + 0x10, HANDLER + 0x10),
                ret_to(30, HANDLER + 0x40, X),
                disabled(31, X + 0x7, true),
                enabled(33, A + 0x30),
                ret(40, A + 0x50, MAIN + 0x20),
                end(50),
            ],
            &[
                "2 [kernel] 20-22 i20",
                "3 b 24-26 i20",
                "2 handler 22-30 i80",
                "2 [kernel] 31-33 i20",
                "1 a 10-40 i300",
                "0 main 0-50 i500",
            ],
        );
        assert_eq!((stats.retroactive_frames, stats.restarts), (0, 0));
    }

    #[test]
    fn resume_in_an_unrelated_function_restarts_the_stack() {
        let stats = assert_slices(
            &[
                enabled(0, MAIN),
                call(10, MAIN + 0x20, A),
                disabled(20, A + 0x30, true), // execve
                enabled(30, X + 0x10),
                end(40),
            ],
            &[
                "1 a 10-20 i100",
                "0 main 0-20 i200",
                "0 [kernel] 20-30 i100",
                "0 x? 30-40 i100",
            ],
        );
        assert_eq!(stats.restarts, 1);
    }

    /// After an exec, tracing resumes at the new program's entry: a
    /// function entry, but no signal handler. Every frame of the old
    /// program ends at the `execve`, and the new one is a new segment.
    #[test]
    fn exec_ends_the_old_programs_frames() {
        let stats = assert_slices(
            &[
                enabled(0, MAIN),
                call(10, MAIN + 0x20, A),
                disabled(20, A + 0x30, true), // execve
                enabled(30, NEW_START),
                call(32, NEW_START + 0x10, B),
                ret(35, B + 0x20, NEW_START + 0x15),
                end(40),
            ],
            &[
                "1 a 10-20 i100",
                "0 main 0-20 i200",
                "0 [kernel] 20-30 i100",
                "1 b 32-35 i30",
                "0 _start 30-40 i100",
            ],
        );
        assert_eq!((stats.execs, stats.restarts), (1, 0));
    }

    /// A return into code no symbol covers, matching none of the frames
    /// whose calls were seen (an unwind the stack cannot place): every
    /// frame ends there, counted and flagged, never left open.
    #[test]
    fn an_unmatched_unwind_is_counted_and_flagged() {
        let ops = [
            enabled(0, MAIN),
            call(10, MAIN + 0x20, A),
            call(12, A + 0x10, B),
            ret(20, B + 0x20, 0xf000),
            end(40),
        ];
        let stats = assert_slices(
            &ops,
            &[
                "2 b 12-20 i80",
                "1 a 10-20 i100",
                "-1 0xf005? 0-40 i400",
                "0 main 0-20 i200",
            ],
        );
        assert_eq!((stats.unmatched_unwinds, stats.unmatched_frames), (1, 2));
        let map = Map::new();
        let mut stack = ThreadStack::new(1, 2);
        let mut flagged = Vec::new();
        for op in ops {
            stack.push(&op, &map, &mut |s: Slice| {
                if let SliceKind::Call {
                    func, unmatched, ..
                } = &s.kind
                {
                    flagged.push((func.name.to_string(), *unmatched));
                }
            });
        }
        flagged.sort();
        assert_eq!(
            flagged,
            [
                ("0xf005".to_string(), false),
                ("a".to_string(), true),
                ("b".to_string(), true),
                ("main".to_string(), false),
            ]
        );
    }

    #[test]
    fn overflow_ends_every_frame_and_restarts_empty() {
        let stats = assert_slices(
            &[
                enabled(0, MAIN),
                call(10, MAIN + 0x20, A),
                Op::Gap {
                    at: s(20),
                    kind: GapKind::Overflow,
                    offset: 0x4000,
                },
                enabled(30, B + 0x10),
                // A return after the gap is above the (new) known stack: a is
                // created retroactively from the gap's end, never from before.
                ret(35, B + 0x20, A + 0x30),
                end(40),
            ],
            &[
                "1 a 10-20 i100",
                "0 main 0-20 i200",
                "0 [gap Overflow] 20-30 i100",
                "-1 a? 30-40 i100",
                "0 b? 30-35 i50",
            ],
        );
        assert_eq!((stats.gaps, stats.retroactive_frames), (1, 1));
    }

    #[test]
    fn resuming_straight_into_a_gap_leaves_no_empty_frame() {
        let stats = assert_slices(
            &[
                enabled(10, X + 0x10),
                Op::Gap {
                    at: s(10),
                    kind: GapKind::NoImage { ip: X + 0x10 },
                    offset: 0,
                },
                enabled(20, MAIN),
                end(30),
            ],
            &[
                "0 [gap NoImage { ip: 32784 }] 10-20 i100",
                "0 main 20-30 i100",
            ],
        );
        assert_eq!(stats.empty_frames, 1);
    }

    #[test]
    fn gap_while_untraced_and_gap_at_the_end() {
        assert_slices(
            &[
                enabled(0, MAIN),
                disabled(10, MAIN + 0x30, true),
                Op::Gap {
                    at: s(20),
                    kind: GapKind::LostData,
                    offset: 0,
                },
                Op::Gap {
                    at: s(25),
                    kind: GapKind::DecodeError(Box::new("no memory mapped".into())),
                    offset: 0x10,
                },
                end(40),
            ],
            &[
                "1 [kernel] 10-20 i100",
                "0 main 0-20 i200",
                "0 [gap LostData] 20-25 i50",
                "0 [gap DecodeError(\"no memory mapped\")] 25-40 i150",
            ],
        );
    }

    #[test]
    fn end_closes_open_frames_and_a_new_segment_may_follow() {
        assert_slices(
            &[
                enabled(0, MAIN),
                call(10, MAIN + 0x20, A),
                call(20, A + 0x20, B),
                disabled(30, B + 0x10, false),
                end(40),
                enabled(50, C + 0x8),
                end(60),
            ],
            &[
                "3 [untraced] 30-40 i100",
                "2 b 20-40 i200",
                "1 a 10-40 i300",
                "0 main 0-40 i400",
                "0 c? 50-60 i100",
            ],
        );
    }

    #[test]
    fn slices_tied_with_their_parent_follow_it() {
        // Coarse timing: a is called in the same ns main was entered.
        assert_slices(
            &[
                enabled(0, MAIN),
                call(0, MAIN + 0x20, A),
                call(0, A + 0x20, B),
                ret(5, B + 0x10, A + 0x20),
                ret(5, A + 0x10, MAIN + 0x20),
                call(7, MAIN + 0x40, C),
                ret(8, C + 0x10, MAIN + 0x40),
                end(10),
            ],
            &[
                "1 c 7-8 i10",
                "0 main 0-10 i100",
                "1 a 0-5 i50",
                "2 b 0-5 i50",
            ],
        );
    }

    /// A recursion whose frames all start and end at one instant (coarse
    /// timing): each frame's held slices move into its parent's, which
    /// was quadratic (a fuzzed bundle of 2^17 frames ran for minutes:
    /// 8.6 billion moves). The slices moved are counted at two depths: at most
    /// 2 a frame, and twice the depth moves twice as many (quadratic, it
    /// would be four times). The slices come out parents first.
    #[test]
    fn a_deep_recursion_tied_at_one_instant_is_linear() {
        let moves = |depth: usize| {
            let mut ops = vec![enabled(0, MAIN), call(0, MAIN + 0x20, A)];
            ops.extend((1..depth).map(|_| call(0, A + 0x20, A)));
            ops.extend((1..depth).map(|_| ret(0, A + 0x10, A + 0x20)));
            ops.push(ret(0, A + 0x10, MAIN + 0x20));
            ops.push(end(10));
            let map = Map::new();
            let mut stack = ThreadStack::new(1, 2);
            let mut got = Vec::new();
            for op in &ops {
                stack.push(op, &map, &mut |sl: Slice| got.push(render(&sl)));
            }
            assert_eq!(got.len(), depth + 1);
            assert_eq!(got[0], "0 main 0-10 i100");
            for (i, s) in got[1..].iter().enumerate() {
                assert!(s.starts_with(&format!("{} a 0-0", i + 1)), "{i}: {s}");
            }
            stack.held_moves
        };
        // Both within what a thread holds back (MAX_HELD).
        const DEPTH: usize = MAX_HELD / 4;
        let (one, two) = (moves(DEPTH), moves(2 * DEPTH));
        assert!(one <= 2 * DEPTH as u64, "{one} moves for {DEPTH} frames");
        assert!(
            two <= 2 * one + 2,
            "{one} moves for {DEPTH} frames, {two} for twice as many: not linear"
        );
    }

    #[test]
    fn close_order_holds_nothing_back_and_keeps_the_same_slices() {
        let ops = [
            enabled(0, MAIN + 0x10),
            call(0, MAIN + 0x20, A),
            call(0, A + 0x20, B),
            ret(5, B + 0x10, A + 0x20),
            // a returns above the traced stack: x gets a frame around main.
            ret_to(5, A + 0x10, X + 0x30),
            call(7, X + 0x40, C),
            ret(8, C + 0x10, X + 0x40),
            end(10),
        ];
        let map = Map::new();
        let mut stack = ThreadStack::close_order(1, 2);
        let mut got = Vec::new();
        for op in &ops {
            stack.push(op, &map, &mut |s: Slice| got.push(render(&s)));
        }
        // Strictly as they close: b before a before main, and main before x.
        assert_eq!(
            got,
            [
                "2 b 0-5 i50",
                "1 a 0-5 i50",
                "0 main? 0-5 i50",
                "0 c 7-8 i10",
                "-1 x? 0-10 i100"
            ]
        );
        let (mut held, _) = run(&ops);
        held.sort();
        got.sort();
        assert_eq!(held, got, "the same slices in another order");
    }

    #[test]
    fn calls_to_the_next_instruction_are_not_calls() {
        let stats = assert_slices(
            &[
                enabled(0, MAIN),
                call(10, MAIN + 0x20, MAIN + 0x25), // call 1f; 1: pop %rbx
                call(20, MAIN + 0x30, A),
                ret(30, A + 0x10, MAIN + 0x30),
                end(40),
            ],
            &["1 a 20-30 i100", "0 main 0-40 i400"],
        );
        assert_eq!((stats.ignored_calls, stats.calls), (1, 1));
    }

    #[test]
    fn a_call_over_a_few_bytes_is_a_call() {
        // `call 1f` jumping over 7 bytes (a retpoline's capture loop) is no
        // call to the next instruction, though it lands within 15 bytes.
        let stats = assert_slices(
            &[
                enabled(0, MAIN),
                call(10, MAIN + 0x20, MAIN + 0x2c),
                ret_to(20, MAIN + 0x30, MAIN + 0x25),
                end(30),
            ],
            &["1 main 10-20 i100", "0 main 0-30 i300"],
        );
        assert_eq!((stats.ignored_calls, stats.calls), (0, 1));
    }

    #[test]
    fn returns_match_the_exact_return_address() {
        // f recurses through two 2-byte indirect calls two bytes apart:
        // f2 calls f3 from F+0x12 (returns to F+0x14), f3 calls f4 from
        // F+0x10 (returns to F+0x12). An unwind from f4 straight to F+0x14
        // ends f4 *and* f3: f4's call site lies 4 bytes below the target,
        // but only f3's return address is the target.
        let stats = assert_slices(
            &[
                enabled(0, MAIN),
                call(10, MAIN + 0x20, F),
                call_len(20, F + 0x10, F, 2),
                call_len(30, F + 0x12, F, 2),
                call_len(40, F + 0x10, F, 2),
                ret_to(50, F + 0x40, F + 0x14),
                ret_to(60, F + 0x40, F + 0x12),
                ret(70, F + 0x40, MAIN + 0x20),
                end(80),
            ],
            &[
                "4 f 40-50 i100",
                "3 f 30-50 i200",
                "2 f 20-60 i400",
                "1 f 10-70 i600",
                "0 main 0-80 i800",
            ],
        );
        assert_eq!((stats.skipped_frames, stats.retroactive_frames), (1, 0));
    }

    #[test]
    fn unknown_code_keeps_its_entry_address_and_is_never_compared() {
        assert_slices(
            &[
                enabled(0, MAIN),
                call(10, MAIN + 0x20, 0x9_0000), // no symbol
                jump(15, 0x9_0010, 0x9_0500),    // not an entry: nothing
                ret(20, 0x9_0600, MAIN + 0x20),
                end(30),
            ],
            &["1 0x90000 10-20 i100", "0 main 0-30 i300"],
        );
    }

    #[test]
    fn cycles_and_implicit_resume() {
        let map = Map::new();
        let mut stack = ThreadStack::new(1, 2);
        let mut out = Vec::new();
        let c = |t: u64, cyc: u64| Stamp {
            time: t,
            insns: t,
            cycles: Cycles::some(cyc),
        };
        let ops = [
            Op::Enabled {
                at: c(0, 100),
                ip: MAIN,
                first: true,
            },
            Op::Disabled {
                at: c(10, 130),
                ip: MAIN + 0x10,
                kernel: true,
            },
            // The decoder saw no Enabled before this call: tracing resumed.
            Op::Call {
                at: c(20, 150),
                from: MAIN + 0x20,
                to: A,
                ret: MAIN + 0x25,
                raw_time: 20,
            },
            // Time going backwards is clamped.
            Op::End { at: c(15, 170) },
        ];
        for op in &ops {
            stack.push(op, &map, &mut |s| out.push(s));
        }
        let got: Vec<_> = out.iter().map(|s| (render(s), s.cycles())).collect();
        assert_eq!(
            got,
            [
                ("1 [kernel] 10-20 i10".to_string(), Some(20)),
                ("1 a 20-20 i0".to_string(), Some(20)),
                ("0 main 0-20 i20".to_string(), Some(70)),
            ]
        );
    }
}
