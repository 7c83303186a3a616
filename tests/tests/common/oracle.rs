//! The stack oracle: each thread's true call stack, computed from ptsim's
//! ground truth alone (its stack pointers: sim/README.md, "The stack
//! oracle"), and the check of ptdec's FTF call slices against it.
//!
//! A frame (a call, or a signal handler) has a *slot*, where its return
//! address lies; it is open while the stack pointer stays at or below the
//! slot. `return` and `unwind` lines end the frames whose slots their stack
//! pointer rose above, `handler` lines open a handler's frame, `begin` (a
//! new thread, or exec) starts an empty stack. Nothing here reads symbols,
//! jumps or PT: the oracle is independent of the decoder it checks.
//!
//! What ptdec must show, on the instruction axis, for every frame: a call
//! slice starting right after its call (the handler's first instruction),
//! whose `addr` is the call's target, whose nesting depth (recomputed from
//! the slices' intervals) is the oracle's, and which (with the tail calls
//! that hand its level on) ends right after the return that ended it; a
//! frame left by `unwind` (longjmp, a landing pad) ends between that
//! instruction and the thread's next listed transfer (ptdec learns of it at
//! the jump that follows); a frame cut by exec ends at the exec. Every other
//! call slice (tail calls, and the frames open when tracing began) must sit
//! at the depth of the oracle frame it runs in.
//!
//! Depth: a segment's first frame (the function running when the thread's
//! trace, or its new program, began) is depth 0, and each return that goes
//! above everything the segment has seen opens one more frame around all of
//! it, as ptdec does (its frames created retroactively): a frame's depth is
//! the open frames below it, plus one, plus the returns above that come
//! after it in its segment.

use std::collections::{BTreeMap, HashMap};

use ptsim::truth::TruthLine;

/// How a frame ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Its own return (instruction count after it).
    Returned(u64),
    /// Skipped by a return further down (longjmp'd or unwound frames whose
    /// stack pointer was only left at that return).
    Skipped(u64),
    /// Left by an `unwind` instruction at count `at`; ptdec may end it up
    /// to `by` (the next listed transfer).
    Unwound { at: u64, by: u64 },
    /// The thread ran a new program (exec) at count `at`.
    Exec(u64),
    /// Still open when the thread ended.
    Open,
}

/// One frame of the oracle.
#[derive(Debug, Clone)]
pub struct Frame {
    /// Call target, or the handler's first instruction.
    pub to: u64,
    pub handler: bool,
    /// Instruction count when it began (after the call).
    pub start: u64,
    pub ended: Ended,
    /// Its exact nesting depth, as ptdec numbers it (see the module doc).
    pub depth: i32,
    /// The segment it belongs to.
    pub segment: usize,
}

impl Frame {
    /// Where it stopped running, for finding what runs inside it.
    fn until(&self) -> u64 {
        match self.ended {
            Ended::Returned(e) | Ended::Skipped(e) | Ended::Exec(e) => e,
            Ended::Unwound { at, .. } => at,
            Ended::Open => u64::MAX,
        }
    }
}

/// A stretch of one program in one thread.
#[derive(Debug, Clone, Default)]
pub struct Segment {
    pub start: u64,
    /// Counts after each return that went above everything seen.
    pub aboves: Vec<u64>,
}

impl Segment {
    /// The depth of the segment's outermost open frame at count `t`.
    fn base(&self, t: u64) -> i32 {
        self.aboves.iter().filter(|&&a| a > t).count() as i32
    }
}

/// The oracle of one thread.
#[derive(Debug, Clone, Default)]
pub struct Oracle {
    pub frames: Vec<Frame>,
    pub segments: Vec<Segment>,
}

impl Oracle {
    /// Replays a thread's truth lines (copies of `repeat` written out).
    pub fn of(lines: &[TruthLine]) -> Oracle {
        struct Open {
            slot: u64,
            frame: usize,
        }
        let mut o = Oracle::default();
        let mut stack: Vec<Open> = Vec::new();
        let mut below_of: Vec<i32> = Vec::new();
        let next_index = |k: usize| {
            lines[k + 1..]
                .iter()
                .find(|l| !matches!(l.kind.as_str(), "handler" | "unwind"))
                .map_or(u64::MAX, |l| l.index + 1)
        };
        for (k, l) in lines.iter().enumerate() {
            let seg = o.segments.len().saturating_sub(1);
            match l.kind.as_str() {
                "begin" => {
                    o.segments.push(Segment {
                        start: l.index,
                        aboves: Vec::new(),
                    });
                    stack.clear();
                }
                "call" | "handler" => {
                    if o.segments.is_empty() {
                        o.segments.push(Segment::default());
                    }
                    let handler = l.kind == "handler";
                    o.frames.push(Frame {
                        to: l.to,
                        handler,
                        start: if handler { l.index } else { l.index + 1 },
                        ended: Ended::Open,
                        depth: 0,
                        segment: o.segments.len() - 1,
                    });
                    below_of.push(stack.len() as i32);
                    stack.push(Open {
                        slot: l.sp,
                        frame: o.frames.len() - 1,
                    });
                }
                "return" | "unwind" => {
                    let keep = stack.partition_point(|f| f.slot >= l.sp);
                    if keep == stack.len() {
                        if l.kind == "return" && stack.is_empty() {
                            if let Some(s) = o.segments.get_mut(seg) {
                                s.aboves.push(l.index + 1);
                            }
                        }
                        continue;
                    }
                    for (i, f) in stack.drain(keep..).enumerate().rev() {
                        o.frames[f.frame].ended = if l.kind == "unwind" {
                            Ended::Unwound {
                                at: l.index + 1,
                                by: next_index(k),
                            }
                        } else if i == 0 {
                            Ended::Returned(l.index + 1)
                        } else {
                            Ended::Skipped(l.index + 1)
                        };
                    }
                }
                "end" => {
                    let exec = lines.get(k + 1).is_some_and(|n| n.kind == "begin");
                    for f in stack.drain(..) {
                        if exec {
                            o.frames[f.frame].ended = Ended::Exec(l.index);
                        }
                    }
                }
                _ => {}
            }
        }
        for (f, below) in o.frames.iter_mut().zip(below_of) {
            f.depth = below + 1 + o.segments[f.segment].base(f.start);
        }
        o
    }

    /// The deepest frame.
    pub fn max_depth(&self) -> i32 {
        self.frames.iter().map(|f| f.depth).max().unwrap_or(0)
    }

    fn segment_at(&self, t: u64) -> Option<&Segment> {
        self.segments.iter().rev().find(|s| s.start <= t)
    }
}

/// A call slice of the FTF, its depth recomputed from the intervals.
#[derive(Debug, Clone)]
pub struct Slice {
    pub name: String,
    pub addr: u64,
    pub start: u64,
    pub end: u64,
    pub depth: i32,
}

/// What one thread's check found.
#[derive(Debug, Default)]
pub struct Checked {
    /// Oracle frames (calls and handlers) compared with their slice.
    pub frames: usize,
    /// FTF call slices whose depth was compared.
    pub slices: usize,
    pub max_depth_oracle: i32,
    pub max_depth_ptdec: i32,
    /// What differed, one line each.
    pub mismatches: Vec<String>,
}

/// Checks one thread's call slices against its oracle. `name_ok(addr,
/// name)` says whether a slice for a call to `addr` may be called `name`.
pub fn check(oracle: &Oracle, got: &[Slice], name_ok: &dyn Fn(u64, &str) -> bool) -> Checked {
    let mut c = Checked {
        max_depth_oracle: oracle.max_depth(),
        max_depth_ptdec: got.iter().map(|s| s.depth).max().unwrap_or(0),
        ..Checked::default()
    };
    let mut by_start: HashMap<u64, Vec<&Slice>> = HashMap::new();
    for s in got {
        by_start.entry(s.start).or_default().push(s);
    }
    let mut matched: std::collections::HashSet<(u64, u64)> = Default::default();
    for f in &oracle.frames {
        c.frames += 1;
        let Some(s) = by_start
            .get(&f.start)
            .and_then(|v| v.iter().find(|s| s.addr == f.to))
        else {
            c.mismatches.push(format!(
                "no slice starts at {} for {} {:#x} (depth {})",
                f.start,
                if f.handler {
                    "the handler"
                } else {
                    "the call to"
                },
                f.to,
                f.depth
            ));
            continue;
        };
        matched.insert((s.start, s.addr));
        if !f.handler && !name_ok(f.to, &s.name) {
            c.mismatches
                .push(format!("slice {s:?}: not the name of {:#x}", f.to));
        }
        if s.depth != f.depth {
            c.mismatches.push(format!(
                "slice {s:?}: depth {}, the oracle's is {} ({f:?})",
                s.depth, f.depth
            ));
            continue;
        }
        // The level's last slice: a tail call hands the level on. A slice
        // starting where the frame ends is a new call (a handler entered
        // right at the return), not handed on.
        let ends = got
            .iter()
            .filter(|o| o.depth == s.depth && o.start >= s.start && o.start < f.until())
            .map(|o| o.end)
            .max()
            .unwrap_or(s.end);
        let ok = match f.ended {
            Ended::Returned(e) | Ended::Skipped(e) => ends == e,
            Ended::Unwound { at, by } => at <= ends && ends <= by,
            Ended::Exec(e) => e.saturating_sub(1) <= ends && ends <= e,
            Ended::Open => true,
        };
        if !ok {
            c.mismatches.push(format!(
                "slice {s:?}: its level ends at {ends}, the oracle says {:?} ({f:?})",
                f.ended
            ));
        }
    }
    // Every other slice: at the depth of the oracle frame it runs in.
    for s in got {
        if matched.contains(&(s.start, s.addr)) {
            c.slices += 1;
            continue;
        }
        let Some(seg) = oracle.segment_at(s.start) else {
            continue;
        };
        if s.start == seg.start {
            continue; // open when tracing began: no call seen
        }
        c.slices += 1;
        let inner = oracle
            .frames
            .iter()
            .filter(|f| f.start <= s.start && s.start < f.until())
            .max_by_key(|f| (f.start, f.depth));
        let want = match inner {
            Some(f) if oracle.segments[f.segment].start == seg.start => f.depth,
            _ => seg.base(s.start),
        };
        if s.depth != want {
            c.mismatches.push(format!(
                "slice {s:?} (a tail call or a frame open at the start): depth {}, the oracle's frame there is at {want} ({inner:?})",
                s.depth
            ));
        }
    }
    c
}

/// Checks every thread; returns the totals, and the mismatches prefixed
/// with their tid.
pub fn check_all(
    truth: &BTreeMap<u32, Vec<TruthLine>>,
    slices: &BTreeMap<u32, Vec<Slice>>,
    name_ok: &dyn Fn(u64, &str) -> bool,
) -> Checked {
    let mut all = Checked::default();
    let empty = Vec::new();
    for (tid, lines) in truth {
        let o = Oracle::of(lines);
        let c = check(&o, slices.get(tid).unwrap_or(&empty), name_ok);
        all.frames += c.frames;
        all.slices += c.slices;
        all.max_depth_oracle = all.max_depth_oracle.max(c.max_depth_oracle);
        all.max_depth_ptdec = all.max_depth_ptdec.max(c.max_depth_ptdec);
        all.mismatches
            .extend(c.mismatches.into_iter().map(|m| format!("tid {tid}: {m}")));
    }
    all
}
