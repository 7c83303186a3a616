//! `ptdec TRACE -o DIR --format parquet` (and `ptdec raw ... --format
//! parquet`): the same decode and call stacks
//! as an FTF run (`pipeline::Stacks`, so every option that selects what
//! is decoded works unchanged), the slices going to the Parquet dataset
//! (`ptdec_out::parquet`) on the stacks' own thread, in close order with
//! exact parents (`SliceSink::needs_parents`).

use crate::model::slices::SliceSink;
use crate::parquet::{Dataset, DatasetError, DatasetStats, TscFacts};
use crate::pipeline::{self, Input, Report, RunError, Stacks};
use crate::plan::{Parquet, Plan};

/// Why a dataset run failed: the decode's errors, or the dataset's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetRunError {
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Dataset(#[from] DatasetError),
}

/// Decodes a planned dataset run into its folder: the run's [`Report`]
/// (for the summary; nothing in its FTF fields) and what the dataset
/// holds. Nothing is put in place unless the whole run succeeds. `on_op`:
/// progress, as for [`pipeline::run`].
pub fn run(
    plan: &Plan<'_, Parquet>,
    on_op: Option<&dyn Fn(u64)>,
) -> Result<(Report, DatasetStats), DatasetRunError> {
    let mut facts = plan.output.facts.clone();
    let trace = match plan.input {
        Input::Trace { trace, images, .. } => {
            pipeline::check_filter(trace, &plan.decode)?;
            // Before the output is created: it may not be one of them.
            crate::decode::open_images(trace, images, &plan.decode);
            facts.cpu = trace
                .cpu
                .as_ref()
                .map(|c| format!("{}/{}/{}", c.family, c.model, c.stepping));
            facts.tsc = trace.tsc.as_ref().map(|t| TscFacts {
                time_mult: t.time_mult(),
                time_shift: t.time_shift(),
                time_zero: t.time_zero(),
            });
            // Without perf's conversion (an LLDB bundle without
            // tscPerfZeroConversion, a perf.data without TIME_CONV) times
            // stay TSC ticks, as `setup::perf_time` gives them.
            if trace.tsc.is_none() {
                facts.time_unit = "tsc".into();
            }
            Some(trace)
        }
        Input::Raw { cfg, .. } => {
            facts.cpu = cfg.cpu.map(|(f, m, st)| format!("{f}/{m}/{st}"));
            // Times are TSC ticks unless --tsc-freq converts them.
            facts.time_unit = if cfg.tsc_hz.is_some() { "ns" } else { "tsc" }.into();
            None
        }
    };
    let mut dataset = Dataset::create(&plan.output.folder, plan.output.dataset.clone(), facts)?;
    // The dataset asks for exact parents, which the stacks give in close
    // order (`ThreadStack::placing_roots`).
    let stacks = Stacks::planned(plan, on_op, dataset.needs_parents());
    let ((decode_stats, threads), short) =
        pipeline::with_min_duration(&mut dataset, plan.stacks.min_duration, |out| {
            stacks.run(plan.input, out)
        });
    let (decode, threads) = (decode_stats.map_err(RunError::from)?, threads?);
    pipeline::check_decoded(&decode, &plan.decode, trace)?;
    let ticks = matches!(plan.input, Input::Raw { cfg, .. } if cfg.tsc_hz.is_none());
    pipeline::check_min_duration_kept_a_call(short.as_ref(), ticks)?;
    dataset.end_threads()?;
    let s = dataset.stats();
    let rows = s.calls + s.untraced + s.gaps;
    let left_out = short.as_ref().map_or(0, |m| m.calls + m.untraced);
    if let Some(trace) = trace {
        // Before the folder is put in place: an empty window replaces
        // nothing. What --min-duration left out, or a single file's marks,
        // were in it all the same.
        let empty = rows + s.marks + s.marks_unwritten + left_out == 0;
        pipeline::check_window_held_something(trace, &plan.decode, empty)?;
    }
    if rows + left_out == 0 && s.marks_unwritten > 0 {
        // A single file of no rows: all the decode found was marks.
        return Err(DatasetError::OnlyMarks {
            path: plan.output.folder.clone(),
            marks: s.marks_unwritten,
        }
        .into());
    }
    let stats = dataset.finish()?;
    let mut report = Report {
        origin: plan.facts.origin.unwrap_or(0),
        min_duration: short,
        ..Report::of(decode, threads)
    };
    match plan.input {
        Input::Trace { images, trace, .. } => {
            report.note_images(images);
            report.note_times(trace);
        }
        Input::Raw { cfg, .. } => report.tsc_ticks = cfg.tsc_hz.is_none(),
    }
    Ok((report, stats))
}
