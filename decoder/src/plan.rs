//! A run's plan: every option of a decode run resolved once, before it
//! starts, from the arguments and the input, as ripgrep resolves its
//! `HiArgs` from the low-level arguments. The stages read their part of it
//! and never write an option after: the decode its [`DecodeOptions`]
//! (including what the output allows, [`DecodeOptions::any_interleaving`]),
//! the stacks their [`StackOptions`], the output its own options with the
//! trace's facts filled in ([`Output::resolve`]).
//!
//! One plan type serves every output: FTF ([`Ftf`], run by
//! [`crate::pipeline::run`]) and `ptdec report` (`AggregateOptions`, run
//! by [`crate::report::run`]), from a trace or from raw PT ([`Input`]).

use ptdec_out::aggregate::AggregateOptions;
use ptdec_out::parquet::{DatasetOptions, TraceFacts};

use crate::decode::{DecodeOptions, RawConfig};
use crate::emit::{EmitOptions, Target};
use crate::images::ImageStore;
use crate::input::Trace;
use crate::raw::RawInput;
use crate::symbols::SymbolCache;

/// What a run decodes: a trace dir, perf.data or LLDB bundle with its
/// images and symbols, or raw PT with the code given.
#[derive(Clone, Copy)]
pub enum Input<'a> {
    /// A trace dir, perf.data or LLDB bundle (`Trace::open`), with the
    /// images and symbols of the code it ran.
    Trace {
        trace: &'a Trace,
        images: &'a ImageStore,
        symbols: &'a SymbolCache,
    },
    /// Raw PT (`ptdec raw`): the trace and the code given, its
    /// configuration (CPU, timing, sideband), and the code's symbols.
    Raw {
        input: &'a RawInput,
        cfg: &'a RawConfig,
        symbols: &'a SymbolCache,
    },
}

/// How the call stacks are built and thinned before any sink: the same
/// for an FTF run and a report.
#[derive(Debug, Clone, Default)]
pub struct StackOptions {
    /// Spread branches that share a timestamp over the time to the next
    /// timestamp by instruction count (on the time axis only; see
    /// [`crate::interp`]).
    pub interpolate: bool,
    /// Leave out call and untraced slices shorter than this many ns
    /// (`--min-duration`), in front of the sink ([`crate::min_duration`]),
    /// which never sees them.
    pub min_duration: Option<u64>,
}

/// What the trace says about every output, resolved once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Facts {
    /// The perf time shown as 0: the recording's first sideband timestamp,
    /// or `None` when the first op sets it (raw PT, or a trace without a
    /// TSC conversion: op times are then raw TSC).
    pub origin: Option<u64>,
    /// Whether the trace says if it is timed (TSC packets enabled): `None`
    /// when it does not say (raw PT, or no configuration recorded).
    pub timed: Option<bool>,
    /// The recording had address filters: tracing that stops in user
    /// space is code filtered out.
    pub filtered: bool,
    /// `--start`/`--duration` as a range of perf times, when given.
    pub window: Option<(u64, u64)>,
    /// The threads that may encode output: the decode's workers.
    pub encoders: usize,
}

impl Facts {
    /// The facts of `input` as `decode` selects from it.
    pub fn of(input: &Input<'_>, decode: &DecodeOptions) -> Facts {
        let (origin, timed, filtered) = match input {
            Input::Trace { trace, .. } => (
                origin(trace),
                trace.config_bit(trace.info.tsc_bit),
                filtered(trace),
            ),
            Input::Raw { .. } => (None, None, false),
        };
        Facts {
            origin,
            timed,
            filtered,
            window: window(decode),
            encoders: decode.workers(),
        }
    }
}

/// The perf time shown as 0: the first sideband timestamp (the recording's
/// start), or `None` when the trace has no TSC conversion (op times are
/// then raw TSC and the first op sets the origin).
pub fn origin(trace: &Trace) -> Option<u64> {
    trace.tsc.as_ref()?;
    trace.sideband_span.map(|s| s.0)
}

/// Whether the recording had address filters: tracing that stops in user
/// space is code filtered out ([`EmitOptions::filtered`]).
pub fn filtered(trace: &Trace) -> bool {
    trace.info.filter.as_ref().is_some_and(|f| !f.is_empty())
}

/// The decode's time window as a range of perf times, when it has one.
pub fn window(decode: &DecodeOptions) -> Option<(u64, u64)> {
    (decode.start.is_some() || decode.end.is_some())
        .then(|| (decode.start.unwrap_or(0), decode.end.unwrap_or(u64::MAX)))
}

/// An output's options: what the user chose, completed from the trace's
/// [`Facts`] when the plan is made.
pub trait Output {
    /// Fills in what depends on the trace and the decode.
    fn resolve(&mut self, facts: &Facts);
    /// Whether the output is the same byte for byte however the threads'
    /// slices interleave (the sink's
    /// [`any_interleaving`](crate::model::slices::SliceSink::any_interleaving)):
    /// the decode may then cut per-cpu traces as it likes.
    fn any_interleaving(&self) -> bool {
        false
    }
}

/// An FTF run's output: the emitter's options and where it writes.
#[derive(Debug, Clone)]
pub struct Ftf {
    /// The split is in perf time; origin, timing, filters, range and
    /// encoders are resolved from the trace and the decode.
    pub emit: EmitOptions,
    pub target: Target,
}

impl Output for Ftf {
    fn resolve(&mut self, facts: &Facts) {
        let emit = &mut self.emit;
        if let Some(origin) = facts.origin {
            emit.origin = origin;
        }
        if emit.timed.is_none() {
            emit.timed = facts.timed;
        }
        emit.filtered = facts.filtered;
        emit.range = facts.window;
        emit.encoders = facts.encoders;
    }
}

/// A Parquet run's output (`--format parquet`): the dataset folder, how
/// slices become rows, and the `trace` table's row (its CPU and TSC
/// conversion are filled from the trace by the run).
#[derive(Debug, Clone)]
pub struct Parquet {
    pub dataset: DatasetOptions,
    pub folder: std::path::PathBuf,
    pub facts: TraceFacts,
}

impl Output for Parquet {
    fn resolve(&mut self, facts: &Facts) {
        let d = &mut self.dataset;
        if let Some(origin) = facts.origin {
            d.origin = origin;
        }
        d.filtered = facts.filtered;
        d.range = facts.window;
    }
}

impl Output for AggregateOptions {
    fn resolve(&mut self, facts: &Facts) {
        self.filtered = facts.filtered;
        self.range = facts.window;
    }

    /// The aggregate is the same however the threads' slices interleave.
    fn any_interleaving(&self) -> bool {
        true
    }
}

/// Everything a run does, resolved: what it decodes, how, and into what.
pub struct Plan<'a, O> {
    pub input: Input<'a>,
    pub decode: DecodeOptions,
    pub stacks: StackOptions,
    pub facts: Facts,
    pub output: O,
}

impl<'a, O: Output> Plan<'a, O> {
    /// Resolves a run: works out the trace's [`Facts`] and completes the
    /// output's options and the decode's from them. (A `--tid`/`--pid`
    /// that matches no thread is refused by the run, before it decodes.)
    pub fn new(
        input: Input<'a>,
        mut decode: DecodeOptions,
        stacks: StackOptions,
        mut output: O,
    ) -> Self {
        let facts = Facts::of(&input, &decode);
        output.resolve(&facts);
        decode.any_interleaving = output.any_interleaving();
        Plan {
            input,
            decode,
            stacks,
            facts,
            output,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::RawInput;
    use crate::symbols::SymbolCache;

    /// The emitter's range is the decode's window, given once; raw PT
    /// fills in nothing of a trace, and the encoders follow the decode's
    /// workers.
    #[test]
    fn the_outputs_options_are_resolved_from_the_decode() {
        let raw = RawInput {
            pt_path: "t.pt".into(),
            pt: Vec::new(),
            sections: Vec::new(),
            modules: Vec::new(),
        };
        let cfg = crate::decode::RawConfig::default();
        let symbols = SymbolCache::new();
        let input = Input::Raw {
            input: &raw,
            cfg: &cfg,
            symbols: &symbols,
        };
        let mut decode = DecodeOptions {
            jobs: 3,
            ..DecodeOptions::default()
        };
        let given = Ftf {
            emit: EmitOptions {
                origin: 7,
                ..EmitOptions::default()
            },
            target: Target::Stdout,
        };
        let plan = |decode: &DecodeOptions| {
            Plan::new(
                input,
                decode.clone(),
                StackOptions::default(),
                given.clone(),
            )
        };
        let e = plan(&decode).output.emit;
        assert_eq!((e.range, e.origin, e.filtered), (None, 7, false));
        assert_eq!(e.encoders, decode.workers());
        assert!(!plan(&decode).decode.any_interleaving);
        decode.start = Some(100);
        assert_eq!(window(&decode), Some((100, u64::MAX)));
        decode.end = Some(200);
        assert_eq!(plan(&decode).output.emit.range, Some((100, 200)));
        decode.start = None;
        assert_eq!(window(&decode), Some((0, 200)));
        let report = Plan::new(
            input,
            decode.clone(),
            StackOptions::default(),
            AggregateOptions::default(),
        );
        assert!(report.decode.any_interleaving);
        assert_eq!(report.output.range, Some((0, 200)));
    }
}
