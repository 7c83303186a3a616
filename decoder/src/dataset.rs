//! `ptdec TRACE -o DIR --format parquet`: the same decode and call stacks
//! as an FTF run (`pipeline::Stacks`, so every option that selects what
//! is decoded works unchanged), the slices going to the Parquet dataset
//! (`ptdec_out::parquet`) on the stacks' own thread, in close order with
//! exact parents (`SliceSink::needs_parents`).

use crate::decode::DecodeOptions;
use crate::images::ImageStore;
use crate::input::Trace;
use crate::model::ops::MarkFilter;
use crate::model::slices::SliceSink;
use crate::parquet::{Dataset, DatasetError, DatasetOptions, DatasetStats, TraceFacts, TscFacts};
use crate::pipeline::{self, Report, RunError, StackOptions, Stacks};
use crate::stack::StackStats;
use crate::symbols::SymbolCache;

/// Everything a dataset run needs besides the trace.
pub struct DatasetRunOptions<'a> {
    pub decode: DecodeOptions,
    pub stacks: StackOptions,
    /// See [`pipeline::RunOptions::on_op`].
    pub on_op: Option<&'a dyn Fn(u64)>,
    /// The folder written.
    pub output: std::path::PathBuf,
    /// Replace an existing folder.
    pub force: bool,
    pub marks: MarkFilter,
    /// The `trace` table's row; its CPU and TSC conversion are the trace's.
    pub facts: TraceFacts,
}

/// Why a dataset run failed: the decode's errors, or the dataset's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetRunError {
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Dataset(#[from] DatasetError),
}

/// Decodes `trace` into the Parquet dataset `opts.output`: the run's
/// [`Report`] (for the summary; nothing in its FTF fields) and what the
/// dataset holds. Nothing is put in place unless the whole run succeeds.
pub fn run(
    trace: &Trace,
    images: &ImageStore,
    symbols: &SymbolCache,
    opts: DatasetRunOptions,
) -> Result<(Report, DatasetStats), DatasetRunError> {
    let decode_opts = opts.decode;
    pipeline::check_filter(trace, &decode_opts)?;
    // Before the output is created: it may not be one of them.
    crate::decode::open_images(trace, images, &decode_opts);
    let mut facts = opts.facts;
    facts.cpu = trace
        .cpu
        .as_ref()
        .map(|c| format!("{}/{}/{}", c.family, c.model, c.stepping));
    facts.tsc = trace.tsc.as_ref().map(|t| TscFacts {
        time_mult: t.time_mult(),
        time_shift: t.time_shift(),
        time_zero: t.time_zero(),
    });
    let dataset_opts = DatasetOptions {
        origin: pipeline::origin(trace).unwrap_or(0),
        range: pipeline::window(&decode_opts),
        marks: opts.marks,
        filtered: pipeline::filtered(trace),
        force: opts.force,
        file_mode: Some(crate::outfile::mode_of(&trace.data_path)),
        rows_per_group: 0,
    };
    let mut dataset = Dataset::create(&opts.output, dataset_opts, facts)?;
    let stacks = Stacks {
        decode: &decode_opts,
        interpolate: opts.stacks.interpolate,
        on_op: opts.on_op,
        // The dataset asks for exact parents, which the stacks give in
        // close order (`ThreadStack::placing_roots`).
        close_order: dataset.needs_parents(),
        tap: None,
        raw_log: None,
    };
    let input = pipeline::Input::Trace {
        trace,
        images,
        symbols,
    };
    let ((decode_stats, threads), short) =
        pipeline::with_min_duration(&mut dataset, opts.stacks.min_duration, |out| {
            stacks.run(input, out)
        });
    let (decode, threads) = (decode_stats.map_err(RunError::from)?, threads?);
    pipeline::check_decoded(&decode, &decode_opts, Some(trace))?;
    dataset.end_threads()?;
    // Before the folder is put in place: an empty window replaces nothing.
    let s = dataset.stats();
    let empty = s.calls + s.untraced + s.gaps + s.marks == 0;
    pipeline::check_window_held_something(trace, &decode_opts, empty)?;
    let stats = dataset.finish()?;
    let mut stack = StackStats::default();
    for t in threads.values() {
        stack.add(&t.stack);
    }
    let mut warnings = images.warnings();
    warnings.extend(images.changed_code_hint(&decode.errors));
    let report = Report {
        decode,
        stack,
        threads,
        missing: images.missing(),
        warnings,
        origin: pipeline::origin(trace).unwrap_or(0),
        min_duration: short,
        ..Report::default()
    };
    Ok((report, stats))
}
