//! `ptdec` command line: argument parsing, dispatch and error printing
//! only; the options are `ptdec::cli::args`, the work `ptdec::cli`'s
//! handlers over `ptdec::pipeline` and `ptdec::summary`.
#![deny(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use ptdec::cli::args::{CheckArgs, DecodeArgs, ImageArgs, RawArgs, ReportArgs};
use ptdec::cli::{check, decode, decode_raw, dump, info, on_interrupt, report};

const EXAMPLES: &str = "\
Examples:
  ptdec trace.dir -o out.ftf                 decode everything; open out.ftf in ui.perfetto.dev
  ptdec trace.dir -o out.ftf.gz              the same, gzip-compressed (Perfetto opens it)
  ptdec trace.dir --sysroot /mnt/target -o out.ftf
                                             decode on another machine with a copy of its files
  ptdec perf.data --start 1.5 --duration 250ms --tid 4242 -o part.ftf
                                             250 ms of one thread, 1.5 s after the recording began
  ptdec trace.dir --start @123456789000 -o out.ftf
                                             from an absolute perf timestamp (ns)
  ptdec trace.dir --split 100ms -o out.ftf   out-0.ftf, out-1.ftf, ... one per 100 ms
  ptdec info trace.dir                       what the trace holds, without decoding
  ptdec lldb-trace/ -o out.ftf               an LLDB `trace save` bundle (or its trace.json)
  ptdec raw --pt trace.pt --elf ./prog --cpu 6/85/4 -o out.ftf
                                             raw PT (LLDB, simple-pt, kAFL) as one thread
  ptdec dump out.ftf                         the FTF as text, one record per line
  ptdec trace.dir --no-power --no-events -o out.ftf
                                             calls and PTWRITE payloads only (no CBR, C-states, interrupts)
  ptdec check out.ftf                        load it into Perfetto's importer, report what it drops

Times: a number of seconds (\"1.5\") or a number with a unit (s, ms, us, ns:
\"250ms\", \"10us\"), relative to the first timestamp of the recording (which is
also 0 in the output); --start also takes an absolute perf time in ns
written \"@NS\" (as `perf script` prints it, times 1e9).

Calls the trace did not see end (still running when the thread's trace
ended, e.g. a killed program, or when a gap ended them) carry the argument
cut = \"end\"; calls whose start it did not see, unknown_start = true.";

#[derive(Parser)]
#[command(
    name = "ptdec",
    version = version(),
    about = "Decode an Intel PT trace (ptrec, ptsim or `perf record -e intel_pt//`) into a Fuchsia Trace Format file of per-thread call stacks for Perfetto",
    after_help = EXAMPLES,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    decode: DecodeArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Print what a trace holds (configuration, cpus, threads, time range,
    /// AUX data sizes, losses, images found and missing) without decoding.
    ///
    /// Example: ptdec info trace.dir
    Info {
        /// Trace dir (ptrec/ptsim -o DIR, perf record -o DIR), perf.data file, or LLDB
        /// trace bundle (trace save DIR: the folder or its trace.json).
        trace: PathBuf,
        #[command(flatten)]
        images: ImageArgs,
    },
    /// Decode raw Intel PT (no perf.data: LLDB, simple-pt, kAFL) as one
    /// thread, with the code given as ELF files or raw bytes, in the forms
    /// libipt's ptxed takes.
    ///
    /// Times are TSC ticks from the first timestamp (written as ns: 1 tick
    /// shows as 1 ns), or ns with --tsc-freq. Without TSC/MTC packets use
    /// --time-axis instructions.
    ///
    /// Example: ptdec raw --pt trace.pt --elf ./prog --raw vdso.bin:0x7ffff7fc1000 -o out.ftf
    #[command(group(clap::ArgGroup::new("code").args(["elf", "raw"]).multiple(true).required(true)))]
    Raw(Box<RawArgs>),
    /// Decode as `ptdec TRACE -o OUT` does (the same options select what is
    /// decoded), but instead of FTF print per-function totals sorted by
    /// self time: calls, total, self and longest time, instructions.
    /// Optionally folded stacks, a flame graph and the slowest calls.
    ///
    /// A function's calls are its slices: call instructions, tail calls (a
    /// jump to its entry: CSV/JSON `tail_calls`), root frames and signal
    /// handlers, and frames whose start was not traced; the heading says
    /// how many of each. `perf script --itrace=c` counts call instructions
    /// only.
    ///
    /// Example: ptdec report trace.dir --top 20 --slowest 5 --flamegraph flame.svg
    Report(Box<ReportArgs>),
    /// Print an FTF file (plain or .gz) as text, one record per line.
    ///
    /// Example: ptdec dump out.ftf | grep duration_complete
    Dump {
        /// The FTF file.
        file: PathBuf,
    },
    /// Load an FTF file into Perfetto's own importer (trace_processor_shell)
    /// and report the slices it shows and every import error or data loss
    /// it counts; exit status 1 when there are any.
    ///
    /// Example: ptdec check out.ftf
    Check {
        /// The FTF file (plain or .gz).
        file: PathBuf,
        #[command(flatten)]
        tp: CheckArgs,
    },
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// `ptdec --version`: ours, and the libipt it was built with.
fn version() -> &'static str {
    static V: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    V.get_or_init(|| format!("{} with {}", env!("CARGO_PKG_VERSION"), ipt::BUILT_WITH))
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Sideband settings apply to the files after them (as in ptxed).
    let order = matches
        .subcommand_matches("raw")
        .map(ptdec::cli::args::PeventArgs::order);
    on_interrupt();
    // A mapped input truncated by another process: named, exit 1, not a
    // bare SIGBUS. Without the handler the signal still ends the run.
    let _ = sideband::bytes::name_files_on_sigbus("ptdec");
    let result = match cli.command {
        Some(Command::Info { trace, images }) => info(&trace, &images),
        Some(Command::Report(args)) => report(*args),
        Some(Command::Dump { file }) => dump(&file),
        Some(Command::Check { file, tp }) => check(&file, &tp),
        Some(Command::Raw(args)) => decode_raw(*args, order.as_ref()),
        None => decode(cli.decode),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            sideband::say!("ptdec: {}", sideband::error::display_chain(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
