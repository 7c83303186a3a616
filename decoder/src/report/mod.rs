//! `ptdec report`: whole-trace answers instead of an FTF file. The same
//! decode and call stacks as `ptdec TRACE -o out.ftf` (`pipeline::Stacks`,
//! so every option that selects what is decoded works unchanged), but the
//! slices go to an [`Aggregator`] instead of the FTF emitter: per-function
//! totals, folded stacks and the longest calls ([`aggregate`]), printed as
//! a table, CSV, JSON, folded stacks or an SVG flame graph ([`render`]).

pub use ptdec_out::aggregate;
pub mod files;
pub mod render;

use std::cell::RefCell;

use crate::interp::RawLog;
use crate::model::ops::{Mark, Op, PerThread, Stamp};
use crate::model::slices::SliceSink;
use crate::model::slices::{Slice, SliceKind};
use crate::pipeline::{self, Report, RunError};
use crate::plan::Plan;
use std::convert::Infallible;

pub use aggregate::{
    Aggregate, AggregateOptions, Aggregator, FuncId, FuncName, FuncStats, SlowCall, MAX_SLOWEST,
};

/// Decodes a planned report (`plan.output`: what to collect) and
/// aggregates its calls: the run's [`Report`] (for the summary: decode and
/// stack statistics, threads, missing images; nothing written) and the
/// [`Aggregate`]. The aggregation runs beside the call stacks, on their
/// thread: it costs less than FTF encoding, and the slowest calls learn
/// the raw timestamps of their call instructions there ([`RawTimes`]).
/// `on_op`: progress, as for [`pipeline::run`].
pub fn run(
    plan: &Plan<'_, AggregateOptions>,
    on_op: Option<&dyn Fn(u64)>,
) -> Result<(Report, Aggregate), RunError> {
    let pipeline::Input::Trace { trace, images, .. } = plan.input else {
        return Err(RunError::NeedsTrace {
            what: "ptdec report",
        });
    };
    let interpolate = plan.stacks.interpolate;
    let slowest = plan.output.slowest > 0;
    let mut aggregator = Aggregator::new(plan.output.clone(), plan.facts.origin.unwrap_or(0));
    let raw = RefCell::new(RawTimes::default());
    // Without spreading, a tap sees the ops; with it, the spreading tells.
    let mut tap = |pid: u32, tid: u32, ops: &[Op]| raw.borrow_mut().see(pid, tid, ops);
    let mut log = RawTimesLog(&raw);
    let mut with_raw = WithRawTimes {
        raw: &raw,
        aggregator: &mut aggregator,
    };
    let out: &mut dyn SliceSink<Error = Infallible> = if slowest {
        &mut with_raw
    } else {
        with_raw.aggregator
    };
    debug_assert_eq!(out.any_interleaving(), plan.decode.any_interleaving);
    pipeline::check_filter(trace, &plan.decode)?;
    let mut stacks = pipeline::Stacks::planned(plan, on_op, true);
    stacks.tap = (slowest && !interpolate).then_some(&mut tap as &mut dyn FnMut(u32, u32, &[Op]));
    stacks.raw_log = (slowest && interpolate).then_some(&mut log as &mut dyn RawLog);
    let ((decode_stats, threads), short) =
        pipeline::with_min_duration(out, plan.stacks.min_duration, |out| {
            stacks.run(plan.input, out)
        });
    let aggregate = aggregator.finish();
    let (decode, threads) = (decode_stats?, threads.unwrap_or_else(|e| match e {}));
    // Nothing synchronized, or a --tid/--pid that matches nothing: the
    // same error as a decode to FTF.
    pipeline::check_decoded(&decode, &plan.decode, Some(trace))?;
    pipeline::check_window_held_something(trace, &plan.decode, aggregate.rows.is_empty())?;
    let mut report = Report {
        origin: aggregate.origin,
        min_duration: short,
        ..Report::of(decode, threads)
    };
    report.note_images(images);
    Ok((report, aggregate))
}

/// Per thread, the latest raw time (of the timing packet, before
/// interpolation spreads it) decoded. `--start @NS` keeps the ops whose
/// raw time is NS or later, so the window that holds a call whole starts
/// at its call's raw time (`SliceKind::Call`'s `call_time`, carried from
/// the call's op by its frame) and ends at the raw time interpolation
/// spread its return up to: the latest one when the return went on.
///
/// (Until the call's raw time came with its op, a log here kept every
/// call's and matched each slice to its call by instruction count: 0.7 G
/// of the 10.1 G instructions of `ptdec report --slowest 10` on the
/// bench's interp trace.)
#[derive(Debug, Default)]
pub struct RawTimes {
    latest: PerThread<u64>,
}

impl RawTimes {
    #[inline]
    fn latest_of(&mut self, pid: u32, tid: u32) -> &mut u64 {
        let i = self.latest.slot(pid, tid);
        &mut self.latest.items[i]
    }

    /// Ops of one thread as decoded, before interpolation.
    pub fn see(&mut self, pid: u32, tid: u32, ops: &[Op]) {
        let latest = self.latest_of(pid, tid);
        for op in ops {
            if !matches!(op, Op::Mark { .. }) {
                *latest = (*latest).max(op.stamp().time);
            }
        }
    }

    /// For a slice that just closed: the raw time of the call that opened
    /// it, when a call did, and the latest raw time decoded (interpolation
    /// released its return on seeing that).
    #[inline]
    pub fn window(&mut self, s: &Slice) -> Option<(u64, u64)> {
        let SliceKind::Call {
            call_time: Some(start),
            unmatched: false,
            ..
        } = s.kind
        else {
            return None;
        };
        Some((start, (*self.latest_of(s.pid, s.tid)).max(s.end.time)))
    }
}

/// `report --slowest` with times spread: the spreading tells the latest
/// raw time ([`Interpolate::with_log`](crate::interp::Interpolate::with_log))
/// and the ops go on in long runs. A tap in front of the spreading
/// (as without it) had to hand them on in stretches of one time, each
/// held and copied by the spreading: 0.07 s of the 0.72 s of CPU of
/// `ptdec report --slowest 10` on the bench's 10 MB interpreter trace.
struct RawTimesLog<'a>(&'a RefCell<RawTimes>);

impl RawLog for RawTimesLog<'_> {
    fn latest(&mut self, pid: u32, tid: u32, time: u64) {
        let mut raw = self.0.borrow_mut();
        let t = raw.latest_of(pid, tid);
        *t = (*t).max(time);
    }
}

/// The aggregator with each call slice's [`RawTimes::window`].
struct WithRawTimes<'a> {
    raw: &'a RefCell<RawTimes>,
    aggregator: &'a mut Aggregator,
}

impl SliceSink for WithRawTimes<'_> {
    type Error = Infallible;

    fn any_interleaving(&self) -> bool {
        self.aggregator.any_interleaving()
    }

    fn thread(
        &mut self,
        pid: u32,
        tid: u32,
        name: &str,
        process: &str,
        renames: &[(u64, String)],
    ) -> Result<(), Infallible> {
        self.aggregator.thread(pid, tid, name, process, renames)
    }

    fn slice(&mut self, s: &Slice) -> Result<(), Infallible> {
        let raw = self.raw;
        self.aggregator.add_with(s, |s| raw.borrow_mut().window(s));
        Ok(())
    }

    fn set_origin(&mut self, origin: u64) {
        self.aggregator.set_origin(origin)
    }

    fn mark(&mut self, pid: u32, tid: u32, at: &Stamp, mark: &Mark) -> Result<(), Infallible> {
        self.aggregator.mark(pid, tid, at, mark)
    }
}
