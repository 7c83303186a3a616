//! `ptdec info`, `ptdec dump`, `ptdec check` and `ptdec report`.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::args::{CheckArgs, ImageArgs, ReportArgs};
use super::run::{open, open_decodable, search_path, selected, window};
use crate::images::ImageStore;
use crate::outfile;
use crate::summary::{self, Progress};
use crate::symbols::SymbolCache;

/// `ptdec info TRACE`: what the trace holds, printed.
pub fn info(trace_path: &Path, a: &ImageArgs) -> Result<()> {
    let trace = open(trace_path, a)?;
    let images = ImageStore::new(search_path(&trace, a));
    images.add_known_build_ids(trace.build_ids.iter().cloned());
    let text = summary::info(&trace, &images);
    print(&text)
}

/// `text` written to standard output; a failure says so and what to do
/// ([`outfile::Stdout`] names it). A closed pipe stays a `BrokenPipe` in
/// the chain, which ends ptdec quietly.
fn print(text: &str) -> Result<()> {
    print_with(|out| out.write_all(text.as_bytes()))
}

/// Writes to standard output with `write`, a failure named as [`print`]
/// names it.
fn print_with(write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
    let mut out = outfile::stdout()?;
    write(&mut out).and_then(|()| out.flush())?;
    Ok(())
}

/// `ptdec dump FILE`: the FTF as text on stdout, a record at a time as it
/// is read (plain or gzip): memory stays at one record and the string and
/// thread tables whatever the file's size, and a gzip bomb is only a long
/// output. What precedes a malformed record is printed before the error.
pub fn dump(file: &Path) -> Result<()> {
    use std::io::BufRead;
    // A FIFO or pipe is read as it comes (never waited on for a writer
    // in `open`); a device is refused.
    let f: Box<dyn std::io::Read> = match crate::inputs::open_stream(file) {
        Ok(crate::inputs::Opened::File(f)) => Box::new(f),
        Ok(crate::inputs::Opened::Stream(f, head)) => {
            Box::new(std::io::Read::chain(std::io::Cursor::new(head), f))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotConnected => bail!(
            "cannot read {}: {e}: start the program that writes the FTF into it first, or give \
             the FTF file",
            file.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
            bail!("cannot read {}: {e}: give an FTF file", file.display())
        }
        Err(e) => {
            return Err(e).with_context(|| format!("cannot read {}", file.display()));
        }
    };
    let mut input = std::io::BufReader::with_capacity(1 << 16, f);
    let gzip = input
        .fill_buf()
        .with_context(|| format!("cannot read {}", file.display()))?
        .starts_with(&[0x1f, 0x8b]);
    let reader: Box<dyn std::io::Read> = if gzip {
        Box::new(flate2::read::MultiGzDecoder::new(input))
    } else {
        Box::new(input)
    };
    let mut out = std::io::BufWriter::with_capacity(1 << 16, outfile::stdout()?);
    let r = ftf::read::for_each(reader, |record| writeln!(out, "{record}"));
    match r {
        Ok(_) => {}
        // The output's error, named by `outfile::Stdout` (a closed pipe
        // ends ptdec quietly): as it is.
        Err(ftf::Error::Io(e)) => return Err(e.into()),
        Err(ftf::Error::Read(e)) if gzip => {
            let _ = out.flush();
            bail!("{}: bad gzip data: {e}", file.display());
        }
        Err(e) => {
            let _ = out.flush();
            return Err(e)
                .with_context(|| format!("{} is not a readable FTF file", file.display()));
        }
    }
    out.flush()?;
    Ok(())
}

/// `ptdec check FILE`.
pub fn check(file: &Path, a: &CheckArgs) -> Result<()> {
    let tp = crate::check::find_trace_processor(a.trace_processor.as_deref())?;
    let r = crate::check::check(&tp, file, a.check_timeout)?;
    // A failed check stays one where its report cannot be printed (a
    // reader that has gone ends a print quietly).
    let printed = print(&crate::check::render(file, &r, None));
    if r.failed() {
        bail!(
            "Perfetto reported import errors or data loss in {}",
            file.display()
        );
    }
    printed
}

/// `ptdec report`: the decode of `ptdec TRACE` into `crate::report`'s
/// aggregation, printed; the folded stacks and flame graph written.
pub fn report(a: ReportArgs) -> Result<()> {
    use crate::report::{files::ReportFiles, render, AggregateOptions};
    let flow = a.flow.resolve().map_err(anyhow::Error::msg)?;
    let trace = open_decodable(&a.trace, &a.images, a.quiet)?;
    let (start, end) = window(&trace, &a.trace, a.start.as_deref(), a.duration)?;
    if a.format == render::Format::Csv && a.slowest.is_some() {
        bail!("--slowest: CSV holds one table (the functions); use the table or --format json for the slowest calls");
    }
    // Refused before decoding: the same protection as -o.
    let files = ReportFiles::create(
        a.folded.as_deref(),
        a.flamegraph.as_deref(),
        outfile::mode_of(&trace.data_path),
    )?;
    let progress = Progress::new(a.quiet);
    let mut decode = selected(
        &trace,
        a.tid,
        a.pid,
        (start, end),
        a.jobs,
        a.chunk_size,
        &progress,
    );
    (decode.decoder, decode.on_error) = flow;
    let images = ImageStore::new(search_path(&trace, &a.images));
    let symbols = SymbolCache::for_search(images.search());
    progress.message(format!("decoding {}", a.trace.display()));
    let on_op = |n: u64| progress.ops(n);
    let started = Instant::now();
    // The filters and the range are resolved from the trace and the
    // decode's window by the plan.
    let aggregate = AggregateOptions {
        per_thread: a.per_thread,
        folded: files.wants_folded(),
        slowest: a.slowest.unwrap_or(0),
        ..AggregateOptions::default()
    };
    let stacks = crate::pipeline::StackOptions {
        interpolate: !a.no_interpolate,
        min_duration: None,
    };
    let input = crate::pipeline::Input::Trace {
        trace: &trace,
        images: &images,
        symbols: &symbols,
    };
    let plan = crate::plan::Plan::new(input, decode, stacks, aggregate);
    let on_op = (!progress.is_hidden()).then_some(&on_op as &dyn Fn(u64));
    let result = crate::report::run(&plan, on_op);
    progress.finish();
    let (mut run, agg) = result.with_context(|| format!("decoding {}", a.trace.display()))?;
    run.wall_time = Some(started.elapsed());
    // `--folded -` or `--flamegraph -` holds standard output instead.
    let table = !files.on_stdout();
    files.write(
        &agg,
        a.weight,
        &format!("ptdec report {}", a.trace.display()),
    )?;
    if table {
        let name = a.trace.display().to_string();
        if a.format == render::Format::Json {
            // Streamed: a --per-thread report of many threads is large.
            print_with(|out| render::write_json(out, &agg, &run, a.sort, a.top))?;
        } else {
            print(&render::print(&agg, &run, a.format, a.sort, a.top, &name))?;
        }
    }
    if !a.quiet {
        sideband::say_part!("{}", summary::render(&run));
    }
    Ok(())
}
