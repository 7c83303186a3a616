//! `--min-duration D`: a filter between the call stacks and the FTF
//! emitter that leaves out call and untraced slices shorter than D, so a
//! trace of hundreds of millions of calls becomes a file Perfetto's UI
//! loads, holding the calls that take the time. A caller lasts at least as
//! long as its callee, so every slice kept still has its caller: nesting
//! stays whole. Gaps, thread names and marks pass unchanged.

use crate::model::ops::{Mark, Stamp};
use crate::model::slices::{Slice, SliceKind, SliceSink};

/// What the filter left out, for the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MinDurationStats {
    /// The threshold, ns of perf time.
    pub min_ns: u64,
    /// Call slices shorter than it, not written.
    pub calls: u64,
    /// Untraced slices (`[kernel]`, ...) shorter than it, not written.
    pub untraced: u64,
    /// Call slices as long as it or longer, written.
    pub kept_calls: u64,
    /// The longest call slice seen, kept or not (ns of perf time): what a
    /// threshold that left out every call can be lowered to.
    pub longest_call: u64,
}

impl MinDurationStats {
    /// The threshold left out every call there was (there was one): the
    /// output holds no call slice.
    pub fn left_out_every_call(&self) -> bool {
        self.kept_calls == 0 && self.calls > 0
    }
}

/// A [`SliceSink`] that forwards to `inner` only the slices lasting at
/// least `min_ns` ns (perf time, interpolated as the output is). A slice
/// cut by a `--start`/`--duration`/`--split` edge is judged by its whole
/// length, as its `insns` are.
pub struct MinDuration<'o, E> {
    inner: &'o mut dyn SliceSink<Error = E>,
    stats: MinDurationStats,
}

impl<'o, E> MinDuration<'o, E> {
    pub fn new(inner: &'o mut dyn SliceSink<Error = E>, min_ns: u64) -> Self {
        MinDuration {
            inner,
            stats: MinDurationStats {
                min_ns,
                ..MinDurationStats::default()
            },
        }
    }

    pub fn stats(&self) -> MinDurationStats {
        self.stats
    }
}

impl<E> SliceSink for MinDuration<'_, E> {
    type Error = E;

    fn any_interleaving(&self) -> bool {
        self.inner.any_interleaving()
    }

    fn needs_parents(&self) -> bool {
        self.inner.needs_parents()
    }

    fn thread(
        &mut self,
        pid: u32,
        tid: u32,
        name: &str,
        process: &str,
        renames: &[(u64, String)],
    ) -> Result<(), E> {
        self.inner.thread(pid, tid, name, process, renames)
    }

    fn slice(&mut self, s: &Slice) -> Result<(), E> {
        let length = s.end.time.saturating_sub(s.start.time);
        let short = length < self.stats.min_ns;
        if let SliceKind::Call { .. } = s.kind {
            self.stats.longest_call = self.stats.longest_call.max(length);
            self.stats.kept_calls += u64::from(!short);
        }
        match s.kind {
            SliceKind::Call { .. } if short => self.stats.calls += 1,
            SliceKind::Untraced { .. } if short => self.stats.untraced += 1,
            _ => return self.inner.slice(s),
        }
        Ok(())
    }

    fn set_origin(&mut self, origin: u64) {
        self.inner.set_origin(origin)
    }

    fn mark(&mut self, pid: u32, tid: u32, at: &Stamp, mark: &Mark) -> Result<(), E> {
        self.inner.mark(pid, tid, at, mark)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ops::GapKind;
    use crate::model::slices::{Func, FuncRef};
    use std::convert::Infallible;

    #[derive(Default)]
    struct Kept(Vec<Slice>);

    impl SliceSink for Kept {
        type Error = Infallible;

        fn thread(
            &mut self,
            _: u32,
            _: u32,
            _: &str,
            _: &str,
            _: &[(u64, String)],
        ) -> Result<(), Infallible> {
            Ok(())
        }
        fn slice(&mut self, s: &Slice) -> Result<(), Infallible> {
            self.0.push(s.clone());
            Ok(())
        }
        fn set_origin(&mut self, _: u64) {}
        fn mark(&mut self, _: u32, _: u32, _: &Stamp, _: &Mark) -> Result<(), Infallible> {
            Ok(())
        }
    }

    fn slice(start: u64, end: u64, kind: SliceKind) -> Slice {
        let at = |t| Stamp {
            time: t,
            insns: t,
            cycles: crate::model::ops::Cycles::NONE,
        };
        Slice {
            pid: 1,
            tid: 1,
            depth: 0,
            id: std::num::NonZeroU64::MIN,
            parent: None,
            start: at(start),
            end: at(end),
            kind,
        }
    }

    #[test]
    fn short_calls_and_untraced_slices_are_left_out_and_counted() {
        let call = || SliceKind::Call {
            func: FuncRef::owned(Func {
                entry: 0x1000,
                name: "f".into(),
                module: "m".into(),
            }),
            unknown_start: false,
            call_time: None,
            unmatched: false,
        };
        let kernel = || SliceKind::Untraced {
            kernel: true,
            ip: 0,
        };
        let gap = || SliceKind::Gap {
            kind: GapKind::Overflow,
            offset: 0,
        };
        let mut kept = Kept::default();
        let mut f = MinDuration::new(&mut kept, 1000);
        for s in [
            slice(0, 999, call()),
            slice(0, 1000, call()),
            slice(5, 10, kernel()),
            slice(0, 5000, kernel()),
            slice(7, 7, gap()),
        ] {
            f.slice(&s).unwrap();
        }
        let stats = f.stats();
        assert_eq!((stats.calls, stats.untraced), (1, 1));
        assert_eq!((stats.kept_calls, stats.longest_call), (1, 1000));
        assert!(!stats.left_out_every_call());
        let lengths: Vec<u64> = kept.0.iter().map(|s| s.end.time - s.start.time).collect();
        // A gap is kept whatever its length: it says data is missing.
        assert_eq!(lengths, [1000, 5000, 0]);
    }
}
