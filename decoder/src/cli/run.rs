//! `ptdec TRACE` and `ptdec raw`: options built from the arguments, the
//! decode run under a progress bar, its summary and `--check`.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::args::{
    ArgOrder, Axis, CheckArgs, DatasetArgs, DecodeArgs, ImageArgs, ParquetLayout, RawArgs,
};
use super::insn_list::InsnList;
use super::parse::{parse_duration, parse_time, TimeArg};
use crate::decode::{DecodeOptions, RawConfig, SidebandRef};
use crate::emit::{EmitOptions, Target, TimeAxis};
use crate::images::{ImageStore, SearchPath};
use crate::input::Trace;
use crate::pevent::Sideband;
use crate::pipeline::{self, Report, RunError, StackOptions};
use crate::plan::{Ftf, Plan};
use crate::raw::RawInput;
use crate::summary::{self, Progress};
use crate::symbols::SymbolCache;

pub(super) fn search_path(trace: &Trace, a: &ImageArgs) -> SearchPath {
    let mut s = match &trace.dir {
        Some(d) => SearchPath::for_trace(d),
        None => SearchPath::default(),
    };
    s.sysroots = a.sysroots.clone();
    if a.buildid_dir.is_some() {
        s.buildid_dir = a.buildid_dir.clone();
    }
    if a.kcore.is_some() {
        s.kcore_dir = a.kcore.clone();
    }
    s.vmlinux = a.vmlinux.clone();
    s.recorded_by = std::fs::metadata(&trace.data_path)
        .and_then(|m| m.modified())
        .ok();
    s
}

/// Refuses a `--sysroot`, `--buildid-dir`, `--kcore` or `--vmlinux` that
/// does not exist or is not what the option takes: searched anyway, it
/// would find nothing and the decode would only say that images are
/// missing, never why.
fn check_image_args(a: &ImageArgs) -> Result<()> {
    let dirs = a
        .sysroots
        .iter()
        .map(|d| {
            (
                "--sysroot",
                d,
                "the directory holding a copy of the recording machine's root filesystem",
            )
        })
        .chain(a.buildid_dir.iter().map(|d| {
            (
                "--buildid-dir",
                d,
                "perf's build-id cache directory (by default ~/.debug)",
            )
        }))
        .chain(a.kcore.iter().map(|d| {
            (
                "--kcore",
                d,
                "the kcore_dir that `perf record --kcore` wrote (holding kcore and kallsyms)",
            )
        }));
    for (opt, dir, what) in dirs {
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(m) => bail!(
                "{opt} {}: that is {}, not a directory; give {what}",
                dir.display(),
                crate::input::file_kind(&m)
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bail!("{opt} {}: no such directory; give {what}", dir.display())
            }
            Err(e) => bail!("{opt} {}: cannot read it: {e}", dir.display()),
        }
    }
    if let Some(f) = &a.vmlinux {
        let what =
            "give an uncompressed kernel ELF image, e.g. /usr/lib/debug/boot/vmlinux-VERSION";
        match std::fs::metadata(f) {
            Ok(m) if m.is_file() => {}
            Ok(m) => bail!(
                "--vmlinux {}: that is {}, not a file; {what}",
                f.display(),
                crate::input::file_kind(&m)
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bail!("--vmlinux {}: no such file; {what}", f.display())
            }
            Err(e) => bail!("--vmlinux {}: cannot read it: {e}", f.display()),
        }
    }
    // Inputs even when the decode never opens them (no kernel code
    // traced): an output over one of them is refused as over any input.
    // Opened and closed here only to be recorded.
    let named = a.vmlinux.iter().cloned().chain(
        a.kcore
            .iter()
            .flat_map(|d| [d.join("kcore"), d.join("kallsyms")]),
    );
    for f in named {
        // (A FIFO is not waited on: kcore and kallsyms are read as files.)
        let _ = crate::inputs::open_regular(&f);
    }
    Ok(())
}

pub(super) fn open(path: &Path, images: &ImageArgs) -> Result<Trace> {
    check_image_args(images)?;
    Trace::open_with(path, &images.sysroots)
        .with_context(|| format!("cannot decode {}", path.display()))
}

/// Opens a trace to decode: refuses a sideband-only recording and prints
/// the input's warnings (a cut file, ...) whatever -q says, as `ptdec
/// info` lists them: the output may be incomplete. With -q, an LLDB
/// bundle's several warnings are one line that counts them (the bundle's
/// own are already summarised: `lldb::WARNINGS_SHOWN` of each kind).
pub(super) fn open_decodable(trace_path: &Path, images: &ImageArgs, quiet: bool) -> Result<Trace> {
    let trace = open(trace_path, images)?;
    if trace.sideband_only {
        bail!(
            "{} is a sideband-only recording (ptrec --sideband-only): there is no Intel PT to \
             decode; `ptdec info {}` describes its processes and mappings",
            trace_path.display(),
            trace_path.display()
        );
    }
    match &trace.bundle {
        Some(b) if quiet && trace.warnings.len() > 1 => sideband::say!(
            "ptdec: warning: {} warnings about the bundle {}, the first: {}; run without -q to \
             see more of them",
            b.warnings,
            trace_path.display(),
            trace.warnings[0]
        ),
        // An LLDB bundle's warnings name their own file (trace.json or a
        // trace file in the bundle).
        Some(_) => trace
            .warnings
            .iter()
            .for_each(|w| sideband::say!("ptdec: warning: {w}")),
        None => trace
            .warnings
            .iter()
            .for_each(|w| sideband::say!("ptdec: warning: {}: {w}", trace_path.display())),
    }
    Ok(trace)
}

/// `--start`/`--duration` as a range of absolute perf times (ns).
pub(super) fn window(
    trace: &Trace,
    trace_path: &Path,
    start: Option<&str>,
    duration: Option<u64>,
) -> Result<(Option<u64>, Option<u64>)> {
    let origin = crate::plan::origin(trace);
    let start = match start.map(parse_time).transpose() {
        Err(e) => bail!("--start {e}"),
        Ok(None) => None,
        Ok(Some(TimeArg::Absolute(t))) => Some(t),
        Ok(Some(TimeArg::Relative(ns))) => match origin {
            Some(o) => match o.checked_add(ns) {
                Some(t) => Some(t),
                None => bail!(
                    "--start {}: out of range, past the last perf time (@{}) after the \
                     recording's first timestamp (@{o})",
                    start.unwrap_or_default(),
                    u64::MAX
                ),
            },
            None => bail!(
                "--start {}: {} has no TSC conversion, so relative times have no origin; give an absolute time as @NS",
                start.unwrap_or_default(),
                trace_path.display()
            ),
        },
    };
    let end = match duration {
        None => None,
        Some(d) => match start.or(origin) {
            Some(s) => Some(s.saturating_add(d)),
            None => bail!("--duration needs --start @NS on a trace without TSC conversion"),
        },
    };
    Ok((start, end))
}

/// Refuses the dataset's options without --format parquet.
fn check_ftf_args(a: &DatasetArgs) -> Result<()> {
    if a.trace_name.is_some() || a.force {
        bail!("--trace-name and --force go with --format parquet");
    }
    Ok(())
}

/// The dataset's name for the trace at `path`: `--trace-name`, or the
/// file's name; checked when it names a folder (`layout`).
fn trace_name(a: &DatasetArgs, path: &Path, layout: ParquetLayout) -> Result<String> {
    let name = match &a.trace_name {
        Some(n) => n.clone(),
        None => {
            let p = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            let name = p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            if layout == ParquetLayout::File {
                return Ok(name);
            }
            // Not given: the error says where the name came from.
            if let Err(crate::parquet::DatasetError::TraceName { name, why }) =
                crate::parquet::check_trace_name(&name)
            {
                bail!(
                    "the trace's name in the dataset would be its file's name, {name:?}, but {why}; \
                     give one with --trace-name NAME"
                );
            }
            name
        }
    };
    if layout == ParquetLayout::Folder {
        crate::parquet::check_trace_name(&name)?;
    }
    Ok(name)
}

/// `ptdec TRACE -o OUT`: the trace decoded into FTF, or with `--format
/// parquet` into a Parquet dataset (`crate::dataset`).
pub fn decode(a: DecodeArgs) -> Result<()> {
    let (Some(trace_path), Some(output)) = (a.trace.clone(), a.output.clone()) else {
        bail!("give a trace and -o OUT (see --help)");
    };
    let flow = a.flow.resolve().map_err(anyhow::Error::msg)?;
    let layout = a.dataset.parquet(&output);
    let trace_name = if let Some(layout) = layout {
        check_dataset_args(a.split.is_some(), a.time_axis.is_some(), a.check)?;
        Some(trace_name(&a.dataset, &trace_path, layout)?)
    } else {
        check_ftf_args(&a.dataset)?;
        None
    };
    let trace = open_decodable(&trace_path, &a.images, a.quiet)?;
    // Its warnings were said, `-q` or not (a bundle's name its missing
    // modules): `-q`'s line about undecoded images would say it again.
    let warned = !trace.warnings.is_empty();
    let (start, end) = window(&trace, &trace_path, a.start.as_deref(), a.duration)?;
    // What goes to FTF only, checked before anything is decoded.
    let ftf = match trace_name {
        Some(_) => None,
        None => Some(ftf_output(&a, &trace, &trace_path, &output)?),
    };
    // Held until the windows are written and the earlier ones removed.
    let _split_lock = match ftf.as_ref().map(|f| (f.emit.split, &f.target)) {
        Some((Some(_), Target::File(template))) => crate::outfile::SplitLock::take(template)?,
        _ => None,
    };
    let min_duration = a
        .min_duration
        .as_deref()
        .map(|d| parse_duration("--min-duration", d))
        .transpose()?;
    let progress = Progress::new(a.quiet);
    let mut decode = selected(
        &trace,
        a.tid.clone(),
        a.pid.clone(),
        (start, end),
        a.jobs,
        a.chunk_size,
        &progress,
    );
    (decode.decoder, decode.on_error) = flow;
    let stacks = StackOptions {
        interpolate: !a.no_interpolate,
        min_duration,
    };
    let images = ImageStore::new(search_path(&trace, &a.images));
    let symbols = SymbolCache::for_search(images.search());
    progress.message(format!("decoding {}", trace_path.display()));
    let input = pipeline::Input::Trace {
        trace: &trace,
        images: &images,
        symbols: &symbols,
    };
    let Some(ftf) = ftf else {
        let out = crate::plan::Parquet {
            dataset: crate::parquet::DatasetOptions {
                marks: a.marks.filter(),
                force: a.dataset.force,
                file_mode: Some(crate::outfile::mode_of(&trace.data_path)),
                single_file: layout == Some(ParquetLayout::File),
                ..Default::default()
            },
            folder: output.clone(),
            facts: crate::parquet::TraceFacts {
                trace_name: trace_name.unwrap_or_default(),
                source: trace_path.display().to_string(),
                ptdec_version: env!("CARGO_PKG_VERSION").to_string(),
                ..Default::default()
            },
        };
        let plan = Plan::new(input, decode, stacks, out);
        return run_dataset(&progress, plan, &trace_path, a.quiet, warned, || Ok(()));
    };
    let end = RunEnd {
        input: &trace_path,
        output: &output,
        quiet: a.quiet,
        warned,
        check: a.check.then_some(&a.tp),
    };
    let plan = Plan::new(input, decode, stacks, ftf);
    run_and_report(
        &progress,
        &end,
        |on_op| pipeline::run(&plan, on_op),
        || Ok(()),
    )
}

/// The FTF output `ptdec TRACE` writes: `--split`, `--time-axis` (cycles
/// only where the trace has CYC), `-o` (`-` for stdout, which neither
/// `--split` nor `--check` can read back) and the marks. The origin,
/// timing, filters, range and encoders are resolved from the trace and the
/// decode by the plan (`plan::Output::resolve`).
fn ftf_output(a: &DecodeArgs, trace: &Trace, trace_path: &Path, output: &Path) -> Result<Ftf> {
    let split = a
        .split
        .as_deref()
        .map(|d| parse_duration("--split", d))
        .transpose()?;
    if split == Some(0) {
        bail!("--split must be longer than 0");
    }
    let axis = match a.time_axis.unwrap_or(Axis::Ns) {
        Axis::Ns => TimeAxis::Ns,
        Axis::Cycles => {
            if trace.config_bit(trace.info.cyc_bit) == Some(false) {
                bail!(
                    "--time-axis cycles: {} was recorded without CYC packets; use --time-axis ns or instructions",
                    trace_path.display()
                );
            }
            TimeAxis::Cycles
        }
        Axis::Instructions => TimeAxis::Instructions,
    };
    let target = if output == Path::new("-") {
        if split.is_some() {
            bail!("--split writes several files; give -o a file name, not -");
        }
        if a.check {
            bail!("--check reads the output back; give -o a file name, not -");
        }
        Target::Stdout
    } else {
        if split.is_some() {
            // OUT-0.ftf, OUT-1.ftf, ... beside a device or FIFO would be
            // files in its folder (`-o /dev/null` made /dev/null-0 ...).
            if std::fs::metadata(output).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
                bail!(
                    "--split writes several files named after -o {}, which is a device or \
                     FIFO; give -o a file name in a folder",
                    output.display()
                );
            }
            crate::outfile::raise_open_files();
        }
        Target::File(output.to_path_buf())
    };
    let emit = EmitOptions {
        axis,
        axis_auto: a.time_axis.is_none(),
        split,
        marks: a.marks.filter(),
        file_mode: Some(crate::outfile::mode_of(&trace.data_path)),
        ..EmitOptions::default()
    };
    Ok(Ftf { emit, target })
}

/// Refuses what goes with FTF output only.
fn check_dataset_args(split: bool, time_axis: bool, check: bool) -> Result<()> {
    for (given, opt, why) in [
        (split, "--split", "select rows by start_ns instead"),
        (time_axis, "--time-axis", "its tables hold every axis"),
        (check, "--check", "it loads FTF into Perfetto"),
    ] {
        if given {
            bail!("{opt} goes with FTF output, not Parquet ({why})");
        }
    }
    Ok(())
}

/// Runs a planned dataset (`ptdec TRACE` or `ptdec raw` with --format
/// parquet) as [`run_timed`] does, then says what the dataset holds
/// unless `quiet`. The plan, which holds `--insn-list`'s callback, is gone
/// before `finish_outputs` completes the listing.
fn run_dataset(
    progress: &Progress,
    plan: Plan<'_, crate::plan::Parquet>,
    input: &Path,
    quiet: bool,
    warned: bool,
    finish_outputs: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let output = plan.output.folder.clone();
    let single = plan.output.dataset.single_file;
    let end = RunEnd {
        input,
        output: &output,
        quiet,
        warned,
        check: None,
    };
    let run = move |on_op: Option<&dyn Fn(u64)>| crate::dataset::run(&plan, on_op);
    let (_, stats) = run_timed(progress, &end, run, finish_outputs)?;
    let output = if output == Path::new("-") {
        std::path::PathBuf::from("standard output")
    } else {
        output
    };
    if !quiet {
        let rows = stats.calls + stats.untraced + stats.gaps;
        sideband::say!(
            "{} {}: {} calls, {} untraced, {} gaps, {} marks, {} threads; {} bytes ({:.1} per row of calls)",
            if single { "file" } else { "dataset" },
            output.display(),
            stats.calls,
            stats.untraced,
            stats.gaps,
            stats.marks,
            stats.threads,
            stats.bytes,
            stats.bytes as f64 / rows.max(1) as f64
        );
    }
    // Whatever -q says: what was asked for is not in the file.
    if stats.marks_unwritten > 0 {
        sideband::say!(
            "ptdec: warning: {} marks (PTWRITE, power, frequency, events) are not in {}: a single \
             file holds the calls; write a dataset folder (-o DIR --format parquet) for the marks table",
            stats.marks_unwritten,
            output.display()
        );
    }
    Ok(())
}

/// What a decode run (`ptdec TRACE` or `ptdec raw`) does after its
/// options are set up: see [`run_timed`].
struct RunEnd<'a> {
    /// The trace decoded and the FTF or dataset written, to name in an error.
    input: &'a Path,
    output: &'a Path,
    /// `-q`: no progress bar, no summary.
    quiet: bool,
    /// The input's own warnings were said (`-q` or not).
    warned: bool,
    /// `--check` with its options.
    check: Option<&'a CheckArgs>,
}

/// Runs `run` (`pipeline::run`, given the progress callback) as
/// [`run_timed`] does; then warns of the `--split` windows it left, and
/// `--check`s the files written.
fn run_and_report(
    progress: &Progress,
    end: &RunEnd,
    run: impl FnOnce(Option<&dyn Fn(u64)>) -> Result<Report, RunError>,
    finish_outputs: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let run = |on_op: Option<&dyn Fn(u64)>| run(on_op).map(|r| (r, ()));
    let (report, ()) = run_timed(progress, end, run, finish_outputs)?;
    // Whatever -q says: the folder holds files that look like this run's.
    for (path, why) in &report.stale.kept {
        sideband::say!(
            "ptdec: warning: {} is named as a --split window of {} that this run did not \
             write, and was left as it is ({why}); it is not part of this run's output",
            path.display(),
            end.output.display()
        );
    }
    if let Some(tp) = end.check {
        check_written(&report, tp)?;
    }
    Ok(())
}

/// Runs `run` (given the progress callback) under the progress bar and
/// times it; then names the input and output in its error, completes the
/// other outputs (`finish_outputs`: `--insn-list`, once `run`, which may
/// own the plan, is gone) and prints the summary with the decode rate
/// unless `-q`. Returns the run's report and what else it returned.
fn run_timed<T, E>(
    progress: &Progress,
    end: &RunEnd,
    run: impl FnOnce(Option<&dyn Fn(u64)>) -> Result<(Report, T), E>,
    finish_outputs: impl FnOnce() -> Result<()>,
) -> Result<(Report, T)>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let on_op = |n: u64| progress.ops(n);
    let on_op = (!progress.is_hidden()).then_some(&on_op as &dyn Fn(u64));
    let started = Instant::now();
    let result = run(on_op);
    let wall_time = started.elapsed();
    progress.finish();
    let (mut report, more) = result.with_context(|| {
        format!(
            "decoding {} into {}",
            end.input.display(),
            end.output.display()
        )
    })?;
    report.wall_time = Some(wall_time);
    finish_outputs()?;
    if !end.quiet {
        sideband::say_part!("{}", summary::render(&report));
    } else if !end.warned {
        // What `-q` still says: code that was not decoded for want of its
        // binary.
        if let Some(line) = summary::quiet_missing(&report) {
            sideband::say!("{line}");
        }
    }
    Ok((report, more))
}

/// `--check`: each file just written, through Perfetto's importer.
fn check_written(report: &pipeline::Report, a: &CheckArgs) -> Result<()> {
    let tp = crate::check::find_trace_processor(a.trace_processor.as_deref())
        .context("--check: the output was written but cannot be checked")?;
    let mut failed = Vec::new();
    for w in &report.written {
        let Some(path) = &w.path else {
            bail!("--check needs -o FILE (it reads the file back), not -");
        };
        let r = crate::check::check(&tp, path, a.check_timeout)?;
        sideband::say_part!("{}", crate::check::render(path, &r, Some(w.events)));
        if r.failed() || r.slices != w.events {
            failed.push(path.display().to_string());
        }
    }
    if !failed.is_empty() {
        bail!(
            "Perfetto does not show everything written to {} (see above)",
            failed.join(", ")
        );
    }
    Ok(())
}

/// The first of ptxed's `--sb:*` listing options given, if any.
fn print_option(a: &RawArgs) -> Option<&'static str> {
    let p = &a.pevent;
    [
        (p.sb_compact, "--sb:compact"),
        (p.sb_verbose, "--sb:verbose"),
        (p.sb_filename, "--sb:filename"),
        (p.sb_offset, "--sb:offset"),
        (p.sb_time, "--sb:time"),
        (p.sb_switch, "--sb:switch"),
        (p.warn, "--sb:warn"),
    ]
    .into_iter()
    .find(|(n, _)| *n > 0)
    .map(|(_, name)| name)
}

/// `ptdec raw`: raw Intel PT decoded as one thread into FTF.
/// `order`: where the sideband options were on the command line (each
/// setting applies to the files after it); `None`: to every file.
pub fn decode_raw(a: RawArgs, order: Option<&ArgOrder>) -> Result<()> {
    let layout = a.dataset.parquet(&a.output);
    if layout.is_some() {
        check_dataset_args(false, a.time_axis.is_some(), a.check)?;
    } else {
        check_ftf_args(&a.dataset)?;
    }
    let addr_filters = a.filter.ranges().map_err(anyhow::Error::msg)?;
    let input = RawInput::load(&a.pt, &a.elf, &a.raw)
        .with_context(|| format!("cannot decode {}", a.pt.path.display()))?;
    let specs = a.pevent.specs(order).map_err(anyhow::Error::msg)?;
    let print = a.pevent.print(order);
    if a.insn_list.is_none() && !a.quiet {
        if let Some(opt) = print_option(&a) {
            sideband::say!(
                "ptdec: warning: {opt} lists sideband in --insn-list FILE, which is not \
                 given: nothing is listed (add --insn-list FILE, or - for stdout)"
            );
        }
    }
    let sideband = if specs.is_empty() && a.pevent.kcore.is_empty() {
        None
    } else {
        let sb = Sideband::load(&specs, &a.pevent.kcore, print)?;
        if !sb.missing.is_empty() && !a.quiet {
            let names: Vec<String> = sb.missing.iter().map(|p| p.display().to_string()).collect();
            sideband::say!(
                "ptdec: warning: files the sideband maps do not exist, their code is missing \
                 (give --pevent:sysroot DIR where they are): {}",
                names.join(", ")
            );
        }
        let (loops, odd): (Vec<_>, Vec<_>) =
            (sb.not_regular.iter()).partition(|(_, &kind)| kind == crate::inputs::LINK_LOOP);
        if !loops.is_empty() && !a.quiet {
            let names: Vec<String> = loops.iter().map(|(p, _)| p.display().to_string()).collect();
            sideband::say!(
                "ptdec: warning: files the sideband maps are symbolic link loops (links that \
                 lead back to each other, ELOOP), their code is missing (fix or remove the \
                 links, or give --pevent:sysroot DIR where the files are): {}",
                names.join(", ")
            );
        }
        if !odd.is_empty() && !a.quiet {
            let names: Vec<String> = (odd.iter())
                .map(|(p, kind)| format!("{} ({kind})", p.display()))
                .collect();
            sideband::say!(
                "ptdec: warning: files the sideband maps are not regular files, their code is \
                 missing (not read: a device or FIFO may never end): {}",
                names.join(", ")
            );
        }
        Some(SidebandRef(std::sync::Arc::new(sb)))
    };
    let cfg = RawConfig {
        cpu: a.cpu.and_then(|c| c.0),
        mtc_freq: a.mtc_freq,
        nom_freq: a.nom_freq,
        cpuid_15_eax: a.cpuid_15_eax,
        cpuid_15_ebx: a.cpuid_15_ebx,
        tsc_hz: a.tsc_freq,
        cycles: a.time_axis == Some(Axis::Cycles),
        addr_filters,
        tick_events: a.event_tick,
        iflags_events: a.event_iflags,
        sideband,
    };
    if let Some(list) = a
        .insn_list
        .as_deref()
        .filter(|l| crate::outfile::same_output(l, &a.output))
    {
        bail!(
            "--insn-list {} and -o {} are the same file; give each its own",
            list.display(),
            a.output.display()
        );
    }
    let list = match &a.insn_list {
        None => None,
        Some(p) => Some(InsnList::create(p, crate::outfile::mode_of(&a.pt.path))?),
    };
    let target = if a.output == Path::new("-") {
        if a.check {
            bail!("--check reads the output back; give -o a file name, not -");
        }
        Target::Stdout
    } else {
        Target::File(a.output.clone())
    };
    let (decoder, on_error) = a.flow.resolve().map_err(anyhow::Error::msg)?;
    let progress = Progress::new(a.quiet);
    progress.message(format!("decoding {}", a.pt.path.display()));
    let decode = DecodeOptions {
        progress: progress.callback(),
        insn_list: list.as_ref().map(InsnList::callback),
        decoder,
        on_error,
        keep_quiet_jumps: keep_quiet_jumps(),
        ..DecodeOptions::default()
    };
    if let Some(layout) = layout {
        let trace_name = trace_name(&a.dataset, &a.pt.path, layout)?;
        let symbols = SymbolCache::new();
        let input = pipeline::Input::Raw {
            input: &input,
            cfg: &cfg,
            symbols: &symbols,
        };
        let out = crate::plan::Parquet {
            dataset: crate::parquet::DatasetOptions {
                marks: a.marks.filter(),
                force: a.dataset.force,
                file_mode: Some(crate::outfile::mode_of(&a.pt.path)),
                single_file: layout == ParquetLayout::File,
                ..Default::default()
            },
            folder: a.output.clone(),
            facts: crate::parquet::TraceFacts {
                trace_name,
                source: a.pt.path.display().to_string(),
                ptdec_version: env!("CARGO_PKG_VERSION").to_string(),
                ..Default::default()
            },
        };
        let stacks = StackOptions {
            interpolate: !a.no_interpolate,
            min_duration: None,
        };
        let plan = Plan::new(input, decode, stacks, out);
        return run_dataset(&progress, plan, &a.pt.path, a.quiet, false, || {
            finish_list(list, a.insn_list.as_deref())
        });
    }
    let emit = EmitOptions {
        axis: match a.time_axis.unwrap_or(Axis::Ns) {
            Axis::Ns => TimeAxis::Ns,
            Axis::Cycles => TimeAxis::Cycles,
            Axis::Instructions => TimeAxis::Instructions,
        },
        axis_auto: a.time_axis.is_none(),
        marks: a.marks.filter(),
        file_mode: Some(crate::outfile::mode_of(&a.pt.path)),
        ..EmitOptions::default()
    };
    let symbols = SymbolCache::new();
    let end = RunEnd {
        input: &a.pt.path,
        output: &a.output,
        quiet: a.quiet,
        warned: false,
        check: a.check.then_some(&a.tp),
    };
    let input = pipeline::Input::Raw {
        input: &input,
        cfg: &cfg,
        symbols: &symbols,
    };
    let stacks = StackOptions {
        interpolate: !a.no_interpolate,
        min_duration: None,
    };
    let plan = Plan::new(input, decode, stacks, Ftf { emit, target });
    run_and_report(
        &progress,
        &end,
        // The plan holds the listing's callback: moved in, it is dropped
        // when the run ends, so the listing below is the one owner left.
        move |on_op| pipeline::run(&plan, on_op),
        || finish_list(list, a.insn_list.as_deref()),
    )
}

/// Completes `--insn-list` at `path`, once the run is over.
fn finish_list(list: Option<InsnList>, path: Option<&Path>) -> Result<()> {
    match (list, path) {
        (Some(list), Some(path)) => list
            .finish()
            .with_context(|| format!("cannot write the instruction list {}", path.display())),
        _ => Ok(()),
    }
}

/// The decode options that select what is decoded, as `ptdec TRACE` and
/// `ptdec report` take them: threads, processes, the window, workers and
/// chunk size, with the progress bar. An LLDB bundle decodes the
/// processes it lists unless threads or processes are given, as LLDB
/// shows them (a per-core trace also holds other processes' code, which
/// the bundle has no modules for).
pub(super) fn selected(
    trace: &Trace,
    tids: Vec<u32>,
    mut pids: Vec<u32>,
    (start, end): (Option<u64>, Option<u64>),
    jobs: usize,
    chunk_bytes: Option<u64>,
    progress: &Progress,
) -> DecodeOptions {
    let set = |v: Vec<u32>| (!v.is_empty()).then(|| v.into_iter().collect::<BTreeSet<u32>>());
    let mut pids_of_bundle = false;
    if let (true, true, Some(b)) = (tids.is_empty(), pids.is_empty(), &trace.bundle) {
        pids = b.processes.iter().map(|p| p.0).collect();
        pids_of_bundle = true;
    }
    DecodeOptions {
        tids: set(tids),
        pids: set(pids),
        pids_of_bundle,
        start,
        end,
        jobs: crate::decode::cpu_jobs(jobs),
        chunking: crate::decode::Chunking::of(chunk_bytes),
        sequential_stacks: sequential_stacks(),
        keep_quiet_jumps: keep_quiet_jumps(),
        progress: progress.callback(),
        ..DecodeOptions::default()
    }
}

/// Whether the decode workers keep every jump inside a function as an op
/// (`PTDEC_KEEP_QUIET_JUMPS`): tests compare the output with and without
/// (docs/decoding.md).
fn keep_quiet_jumps() -> bool {
    std::env::var_os("PTDEC_KEEP_QUIET_JUMPS").is_some()
}

/// Whether every call stack is built on the output thread, none on the
/// decode workers (the output is the same either way: docs/decoding.md).
/// `PTDEC_SEQUENTIAL_STACKS=1` says so and `PTDEC_STACKS_AHEAD=1` the
/// opposite; otherwise so on a machine of 2 CPUs or fewer. There the
/// workers, the output thread and the FTF writer already share the CPUs,
/// and building stacks ahead costs more than it frees: at `-j2` on 2
/// CPUs, with the outputs on a tmpfs, FTF took 0.39 s of wall time
/// instead of 0.55 s on the bench's 10 MB interp trace and 0.30 s instead
/// of 0.38 s on shapes, `ptdec report` 0.27 s instead of 0.43 s and 0.25 s
/// instead of 0.30 s (medians of 7 interleaved runs, 2026-12-05).
fn sequential_stacks() -> bool {
    if std::env::var_os("PTDEC_SEQUENTIAL_STACKS").is_some() {
        return true;
    }
    if std::env::var_os("PTDEC_STACKS_AHEAD").is_some() {
        return false;
    }
    std::thread::available_parallelism().map_or(true, |n| n.get() <= 2)
}
