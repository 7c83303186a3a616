//! `ptdec` command line: argument parsing and error printing only; the work
//! is `ptdec::pipeline::run` and `ptdec::summary`.
#![deny(unsafe_code)]

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};

use ptdec::decode::{DecodeOptions, RawConfig};
use ptdec::emit::{EmitOptions, Target, TimeAxis};
use ptdec::images::{ImageStore, SearchPath};
use ptdec::input::Trace;
use ptdec::outfile;
use ptdec::pipeline::{self, Report, RunError, RunOptions};
use ptdec::raw::{self, RawInput};
use ptdec::report::render;
use ptdec::summary::{self, Progress};
use ptdec::symbols::SymbolCache;

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
  ptdec raw --pt trace.pt --elf ./prog --cpu 6/85/4 -o out.ftf
                                             raw PT (LLDB, simple-pt, kAFL) as one thread
  ptdec dump out.ftf                         the FTF as text, one record per line
  ptdec trace.dir --no-power --no-events -o out.ftf
                                             calls and PTWRITE payloads only (no CBR, C-states, interrupts)
  ptdec check out.ftf                        load it into Perfetto's importer, report what it drops

Times: a number of seconds (\"1.5\") or a number with a unit (s, ms, us, ns:
\"250ms\", \"10us\"), relative to the first timestamp of the recording (which is
also 0 in the output); --start also takes an absolute perf time in ns
written \"@NS\" (as `perf script` prints it, times 1e9).";

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
        /// Trace dir (ptrec/ptsim -o DIR, perf record -o DIR) or perf.data file.
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
    Raw(RawArgs),
    /// Decode as `ptdec TRACE -o OUT` does (the same options select what is
    /// decoded), but instead of FTF print per-function totals sorted by
    /// self time: calls, total, self and longest time, instructions.
    /// Optionally folded stacks, a flame graph and the slowest calls.
    ///
    /// Example: ptdec report trace.dir --top 20 --slowest 5 --flamegraph flame.svg
    Report(ReportArgs),
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

/// `ptdec report`'s options: the selection of `ptdec TRACE`'s, and what
/// to print.
#[derive(Args)]
struct ReportArgs {
    /// Trace dir (ptrec/ptsim -o DIR, perf record -o DIR) or perf.data file.
    trace: PathBuf,
    #[command(flatten)]
    images: ImageArgs,
    /// From this time on: seconds or a unit ("1.5", "250ms") after the first
    /// timestamp, or "@NS" in absolute perf time. Example: --start 2s
    #[arg(long, value_name = "T")]
    start: Option<String>,
    /// This long (from --start, or from the first timestamp); calls
    /// crossing an edge count their time inside. Example: --duration 10ms
    #[arg(long, value_name = "D")]
    duration: Option<String>,
    /// Only these threads. Example: --tid 4242,4243
    #[arg(long, value_name = "TID,..", value_delimiter = ',')]
    tid: Vec<u32>,
    /// Only the threads of these processes. Example: --pid 4242
    #[arg(long, value_name = "PID,..", value_delimiter = ',')]
    pid: Vec<u32>,
    /// Decode with N threads (default: all cores). Example: -j 4
    #[arg(short = 'j', long = "jobs", value_name = "N", default_value_t = 0)]
    jobs: usize,
    /// The unit of parallel decoding, as for `ptdec TRACE`. Example: --chunk-size 1M
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    chunk_size: Option<u64>,
    /// Keep the raw timestamps instead of spreading calls between timing
    /// packets by instruction count. Example: --no-interpolate
    #[arg(long)]
    no_interpolate: bool,
    /// Sort by calls, total time, self time or instructions (largest
    /// first). Example: --sort total
    #[arg(long, value_enum, value_name = "KEY", default_value_t = render::Sort::SelfTime)]
    sort: render::Sort,
    /// Rows to print (per thread with --per-thread); default 25 in the
    /// table, every function in CSV and JSON. Example: --top 50
    #[arg(long, value_name = "N", value_parser = parse_top)]
    top: Option<usize>,
    /// table (for people), csv (every function, header
    /// function,module,calls,total_ns,self_ns,max_ns,insns,self_insns) or
    /// json. Example: --format csv
    #[arg(long, value_enum, default_value_t = render::Format::Table)]
    format: render::Format,
    /// One set of rows per thread instead of functions over all threads.
    /// Example: --per-thread
    #[arg(long)]
    per_thread: bool,
    /// Also list the N longest calls with thread, depth, duration and start
    /// as @NS, for `ptdec TRACE --start @NS --duration D`. Example: --slowest 10
    #[arg(long, value_name = "N", value_parser = parse_top)]
    slowest: Option<usize>,
    /// Write folded stacks (`outer;inner;leaf WEIGHT` per line) to FILE.
    /// Example: --folded out.folded
    #[arg(long, value_name = "FILE")]
    folded: Option<PathBuf>,
    /// Write an SVG flame graph of the folded stacks to FILE.
    /// Example: --flamegraph flame.svg
    #[arg(long, value_name = "FILE")]
    flamegraph: Option<PathBuf>,
    /// What a folded stack weighs: self instructions (exact) or self ns.
    /// Example: --weight ns
    #[arg(long, value_enum, default_value_t = render::Weight::Insns)]
    weight: render::Weight,
    /// No progress and no summary on stderr (errors are still printed).
    #[arg(short, long)]
    quiet: bool,
}

/// A count of rows: at least 1.
fn parse_top(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        Ok(_) => Err("give at least 1 row".into()),
        Err(_) => Err(format!("{s:?} is not a number of rows")),
    }
}

#[derive(Args)]
struct CheckArgs {
    /// Perfetto's trace_processor_shell (default: $PT_TRACE_PROCESSOR, else
    /// trace_processor_shell on the PATH).
    /// Example: --trace-processor ~/bin/trace_processor_shell
    #[arg(long, value_name = "PATH")]
    trace_processor: Option<PathBuf>,
}

#[derive(Args)]
struct ImageArgs {
    /// A copy of the recording machine's root filesystem, searched for the
    /// traced binaries after the trace dir's own sysroot/. Repeatable.
    /// Example: --sysroot /mnt/target
    #[arg(long = "sysroot", value_name = "DIR")]
    sysroots: Vec<PathBuf>,
    /// perf's build-id cache (default ~/.debug). Example: --buildid-dir ~/.debug
    #[arg(long, value_name = "DIR")]
    buildid_dir: Option<PathBuf>,
    /// A `perf record --kcore` copy holding kcore and kallsyms (default: the
    /// trace dir's kcore_dir/). Example: --kcore trace.dir/kcore_dir
    #[arg(long, value_name = "DIR")]
    kcore: Option<PathBuf>,
    /// An uncompressed kernel ELF image, preferred over kcore.
    /// Example: --vmlinux /usr/lib/debug/boot/vmlinux-6.1.0
    #[arg(long, value_name = "FILE")]
    vmlinux: Option<PathBuf>,
}

#[derive(Args)]
struct RawArgs {
    /// The raw trace, or a byte range of it. Example: --pt trace.pt:0x1000-0x8000
    #[arg(long, value_name = "FILE[:FROM[-TO]]", value_parser = raw::parse_file_range)]
    pt: raw::FileRange,
    /// An ELF file whose PT_LOAD segments are loaded at their addresses, or
    /// with the lowest at BASE (a PIE or shared object). Repeatable.
    /// Example: --elf ./libfoo.so:0x7f0000000000
    #[arg(long, value_name = "FILE[:BASE]", value_parser = raw::parse_elf)]
    elf: Vec<raw::ElfSpec>,
    /// Raw code bytes of FILE (or of its range FROM..TO) loaded at ADDR.
    /// Repeatable. Example: --raw dump.bin:0x200-0x1200:0x400000
    #[arg(long, value_name = "FILE[:FROM[-TO]]:ADDR", value_parser = raw::parse_raw)]
    raw: Vec<raw::RawSpec>,
    /// The CPU, FAMILY/MODEL[/STEPPING], for libipt's errata workarounds;
    /// `none`: decode by the spec (default). Example: --cpu 6/85/4
    #[arg(long, value_name = "F/M[/S]", value_parser = parse_cpu)]
    cpu: Option<CpuArg>,
    /// IA32_RTIT_CTL.MTCFreq the trace was recorded with (needed with MTC).
    /// Example: --mtc-freq 3
    #[arg(long, value_name = "N", default_value_t = 0)]
    mtc_freq: u8,
    /// Max non-turbo ratio, MSR_PLATFORM_INFO[15:8] (calibrates CYC timing).
    /// Example: --nom-freq 24
    #[arg(long, value_name = "N", default_value_t = 0)]
    nom_freq: u8,
    /// CPUID.15H:EAX, the TSC/crystal clock ratio's denominator (needed with MTC).
    /// Example: --cpuid-0x15.eax 2
    #[arg(long = "cpuid-0x15.eax", value_name = "N", default_value_t = 0)]
    cpuid_15_eax: u32,
    /// CPUID.15H:EBX, the TSC/crystal clock ratio's numerator (needed with MTC).
    /// Example: --cpuid-0x15.ebx 200
    #[arg(long = "cpuid-0x15.ebx", value_name = "N", default_value_t = 0)]
    cpuid_15_ebx: u32,
    /// TSC frequency in Hz (or with kHz, MHz, GHz): output times in ns
    /// instead of TSC ticks. Example: --tsc-freq 2.4GHz
    #[arg(long, value_name = "HZ", value_parser = parse_hz)]
    tsc_freq: Option<u64>,
    /// Output FTF file; gzip-compressed when it ends in .gz; `-` for stdout.
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// What the output's timestamps count: ns (TSC ticks, or ns with
    /// --tsc-freq), cycles (needs CYC packets) or instructions. Default: ns,
    /// or instructions when the trace has no timing packets.
    #[arg(long, value_enum)]
    time_axis: Option<Axis>,
    /// After writing, load the output into Perfetto's importer (as `ptdec
    /// check`); exit status 1 on import errors.
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    tp: CheckArgs,
    /// Keep the raw timestamps: without CYC packets every call between two
    /// timing packets gets the same time (zero-width slices); by default they
    /// are spread by instruction count up to the next timestamp, as
    /// magic-trace does (instruction counts are exact either way).
    /// Example: --no-interpolate
    #[arg(long)]
    no_interpolate: bool,
    /// No progress and no summary on stderr (errors are still printed).
    #[arg(short, long)]
    quiet: bool,
    /// Also write the instruction flow to FILE (`-`: stdout) as ptxed
    /// --no-inst lists it: one address per instruction, `[enabled]`,
    /// `[disabled]`, `[overflow]`, `[OFFSET: error: MESSAGE]`.
    /// Example: --insn-list flow.txt
    #[arg(long, value_name = "FILE")]
    insn_list: Option<PathBuf>,
    /// After a decode error: `resync` at the next point libipt can
    /// resume from (ptxed --resync-on-error; needs libipt 2.2, else the
    /// next PSB), or skip to the `next-psb` (ptxed's default).
    /// Example: --on-error next-psb
    #[arg(long, value_enum, default_value_t = OnError::Resync)]
    on_error: OnError,
    #[command(flatten)]
    marks: MarkArgs,
    #[command(flatten)]
    filter: FilterArgs,
}

/// The address filters a raw trace was recorded with, in ptxed's option
/// names and forms (IA32_RTIT_CTL.ADDRn_CFG: 0 off, 1 filter, 2 stop;
/// IA32_RTIT_ADDRn_A/B), so that a ptxed command line works unchanged.
/// libipt needs them for the errata whose workaround depends on them.
#[derive(clap::Args)]
#[command(next_help_heading = "Address filters (as ptxed)")]
struct FilterArgs {
    /// ADDR0_CFG: 0 off, 1 filter (trace inside), 2 stop. Example: --filter:addr0_cfg 1
    #[arg(long = "filter:addr0_cfg", value_name = "CFG", value_parser = parse_filter_cfg, default_value = "0")]
    addr0_cfg: u32,
    /// ADDR0_A, the range's first address. Example: --filter:addr0_a 0x1000
    #[arg(long = "filter:addr0_a", value_name = "ADDR", value_parser = parse_address, default_value = "0")]
    addr0_a: u64,
    /// ADDR0_B, the range's last address. Example: --filter:addr0_b 0x10ff
    #[arg(long = "filter:addr0_b", value_name = "ADDR", value_parser = parse_address, default_value = "0")]
    addr0_b: u64,
    /// ADDR1_CFG, as --filter:addr0_cfg.
    #[arg(long = "filter:addr1_cfg", value_name = "CFG", value_parser = parse_filter_cfg, default_value = "0")]
    addr1_cfg: u32,
    /// ADDR1_A.
    #[arg(long = "filter:addr1_a", value_name = "ADDR", value_parser = parse_address, default_value = "0")]
    addr1_a: u64,
    /// ADDR1_B.
    #[arg(long = "filter:addr1_b", value_name = "ADDR", value_parser = parse_address, default_value = "0")]
    addr1_b: u64,
    /// ADDR2_CFG, as --filter:addr0_cfg.
    #[arg(long = "filter:addr2_cfg", value_name = "CFG", value_parser = parse_filter_cfg, default_value = "0")]
    addr2_cfg: u32,
    /// ADDR2_A.
    #[arg(long = "filter:addr2_a", value_name = "ADDR", value_parser = parse_address, default_value = "0")]
    addr2_a: u64,
    /// ADDR2_B.
    #[arg(long = "filter:addr2_b", value_name = "ADDR", value_parser = parse_address, default_value = "0")]
    addr2_b: u64,
    /// ADDR3_CFG, as --filter:addr0_cfg.
    #[arg(long = "filter:addr3_cfg", value_name = "CFG", value_parser = parse_filter_cfg, default_value = "0")]
    addr3_cfg: u32,
    /// ADDR3_A.
    #[arg(long = "filter:addr3_a", value_name = "ADDR", value_parser = parse_address, default_value = "0")]
    addr3_a: u64,
    /// ADDR3_B.
    #[arg(long = "filter:addr3_b", value_name = "ADDR", value_parser = parse_address, default_value = "0")]
    addr3_b: u64,
}

impl FilterArgs {
    fn ranges(&self) -> [ipt::AddrFilter; 4] {
        let f = |cfg, a, b| ipt::AddrFilter { cfg, a, b };
        [
            f(self.addr0_cfg, self.addr0_a, self.addr0_b),
            f(self.addr1_cfg, self.addr1_a, self.addr1_b),
            f(self.addr2_cfg, self.addr2_a, self.addr2_b),
            f(self.addr3_cfg, self.addr3_a, self.addr3_b),
        ]
    }
}

/// An address: decimal or 0x hex.
fn parse_address(s: &str) -> Result<u64, String> {
    raw::parse_num(s).ok_or_else(|| format!("{s:?} is not an address (decimal or 0x hex)"))
}

/// ADDRn_CFG: 0, 1 or 2 (the values IA32_RTIT_CTL defines).
fn parse_filter_cfg(s: &str) -> Result<u32, String> {
    match raw::parse_num(s) {
        Some(v @ 0..=2) => Ok(v as u32),
        _ => Err(format!(
            "{s:?}: ADDRn_CFG is 0 (off), 1 (filter) or 2 (stop)"
        )),
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OnError {
    Resync,
    NextPsb,
}

/// A `--cpu` value: `None` for `none`.
#[derive(Clone)]
struct CpuArg(Option<(u16, u8, u8)>);

fn parse_cpu(s: &str) -> Result<CpuArg, String> {
    raw::parse_cpu(s).map(CpuArg)
}

/// `2400000000`, `2.4GHz`, `100MHz`, `25kHz`.
fn parse_hz(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (num, scale) = [("ghz", 1e9), ("mhz", 1e6), ("khz", 1e3), ("hz", 1.0)]
        .iter()
        .find_map(|&(unit, scale)| lower.strip_suffix(unit).map(|n| (n.to_string(), scale)))
        .unwrap_or((lower.clone(), 1.0));
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v * scale >= 1.0 && v * scale < 1.8e19 => {
            Ok((v * scale).round() as u64)
        }
        _ => Err(format!(
            "`{t}` is not a frequency: give Hz (\"2400000000\") or a number with kHz, MHz or GHz (\"2.4GHz\")"
        )),
    }
}

/// What the trace holds besides calls, and the options that leave it out.
#[derive(Args)]
struct MarkArgs {
    /// Leave out PTWRITE payloads (by default each is an instant `ptwrite`
    /// on its thread, real or perf's emulated ptwrite). Example: --no-ptwrite
    #[arg(long)]
    no_ptwrite: bool,
    /// Leave out power and frequency: CBR (the `cpu N frequency` counter in MHz), MWAIT,
    /// PWRE, PWRX and EXSTOP instants. Example: --no-power
    #[arg(long)]
    no_power: bool,
    /// Leave out event trace (CFE/EVD): interrupt, iret, vmentry, vmexit,
    /// ... instants. Example: --no-events
    #[arg(long)]
    no_events: bool,
}

impl MarkArgs {
    fn filter(&self) -> ptdec::events::MarkFilter {
        ptdec::events::MarkFilter {
            ptwrite: !self.no_ptwrite,
            power: !self.no_power,
            events: !self.no_events,
        }
    }
}

#[derive(Args)]
struct DecodeArgs {
    /// Trace dir (ptrec/ptsim -o DIR, perf record -o DIR) or perf.data file.
    #[arg(required = true)]
    trace: Option<PathBuf>,
    /// Output FTF file; gzip-compressed when it ends in .gz; `-` for stdout.
    /// Example: -o out.ftf
    #[arg(short, long, value_name = "OUT", required = true)]
    output: Option<PathBuf>,
    #[command(flatten)]
    images: ImageArgs,
    /// What the output's timestamps count: ns (perf time from the first
    /// timestamp), cycles (needs CYC packets) or instructions (per thread).
    /// Default: ns, or instructions when the trace has no timing packets.
    /// Example: --time-axis instructions
    #[arg(long, value_enum)]
    time_axis: Option<Axis>,
    /// After writing, load the output into Perfetto's importer (as `ptdec
    /// check`); exit status 1 on import errors. Example: --check
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    tp: CheckArgs,
    /// Keep the raw timestamps: without CYC packets every call between two
    /// timing packets gets the same time (zero-width slices); by default they
    /// are spread by instruction count up to the next timestamp, as
    /// magic-trace does (instruction counts are exact either way).
    /// Example: --no-interpolate
    #[arg(long)]
    no_interpolate: bool,
    /// Decode from this time on: seconds or a unit ("1.5", "250ms") after the
    /// first timestamp, or "@NS" in absolute perf time. Example: --start 2s
    #[arg(long, value_name = "T", allow_hyphen_values = false)]
    start: Option<String>,
    /// Decode this long (from --start, or from the first timestamp).
    /// Example: --duration 10ms
    #[arg(long, value_name = "D")]
    duration: Option<String>,
    /// Only these threads. Example: --tid 4242,4243
    #[arg(long, value_name = "TID,..", value_delimiter = ',')]
    tid: Vec<u32>,
    /// Only the threads of these processes. Example: --pid 4242
    #[arg(long, value_name = "PID,..", value_delimiter = ',')]
    pid: Vec<u32>,
    /// Write one file per window of this length: out-0.ftf, out-1.ftf, ...;
    /// calls crossing a boundary appear in both files, cut and marked
    /// `cut`. Windows without events write no file. Example: --split 100ms
    #[arg(long, value_name = "D")]
    split: Option<String>,
    /// Leave out call (and untraced) slices shorter than D; their callers
    /// are kept, as a caller lasts at least as long. The summary says how
    /// many were left out. Example: --min-duration 1us
    #[arg(long, value_name = "D")]
    min_duration: Option<String>,
    /// No progress and no summary on stderr (errors are still printed).
    #[arg(short, long)]
    quiet: bool,
    /// Decode with N threads, at most 256 (default: all cores). Memory: the
    /// chunks decoded ahead of the output hold at most 8 MiB of trace in
    /// all, whatever -j and --chunk-size say (more threads than chunks fit
    /// there are not started); decoded, that is about 700 MB for
    /// call-dense code. Example: -j 4
    #[arg(short = 'j', long = "jobs", value_name = "N", default_value_t = 0, value_parser = parse_jobs)]
    jobs: usize,
    /// Cut each buffer into chunks of about BYTES (at the next PSB), the
    /// unit of parallel decoding: at most 8M, of which 8 MiB are decoded
    /// ahead at once (see -j). The slices are the same for any size.
    /// Default 256K. Example: --chunk-size 1M
    #[arg(long, value_name = "BYTES", value_parser = parse_chunk_size)]
    chunk_size: Option<u64>,
    #[command(flatten)]
    marks: MarkArgs,
}

/// A byte count with an optional K, M or G suffix (powers of 1024).
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{s:?} is not a size in bytes (e.g. 262144, 256K, 1M)"))
}

/// `--chunk-size`: a size up to `MAX_BYTES_IN_FLIGHT`.
fn parse_chunk_size(s: &str) -> Result<u64, String> {
    let n = parse_size(s)?;
    let max = ptdec::decode::MAX_BYTES_IN_FLIGHT;
    if n > max {
        return Err(format!(
            "{s:?} is more than the largest chunk, {}M: the chunks decoded ahead of the \
             output hold at most that much trace (memory); give at most {}M",
            max >> 20,
            max >> 20
        ));
    }
    Ok(n)
}

/// `-j`: 0 (all cores) up to `MAX_JOBS`.
fn parse_jobs(s: &str) -> Result<usize, String> {
    let max = ptdec::decode::MAX_JOBS;
    match s.trim().parse::<usize>() {
        Ok(n) if n <= max => Ok(n),
        Ok(_) => Err(format!(
            "ptdec starts at most {max} decode threads; give -j {max} or less (0: all cores)"
        )),
        Err(_) => Err(format!("{s:?} is not a number of threads (e.g. 4)")),
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Axis {
    Ns,
    Cycles,
    Instructions,
}

/// A `--start` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimeArg {
    /// ns after the origin.
    Relative(u64),
    /// Absolute perf time, ns.
    Absolute(u64),
}

/// Parses "1.5" (seconds), "250ms", "10us", "5ns", "2s"; "@NS" is absolute.
fn parse_time(s: &str) -> Result<TimeArg, String> {
    let s = s.trim();
    if let Some(abs) = s.strip_prefix('@') {
        return abs.parse::<u64>().map(TimeArg::Absolute).map_err(|_| {
            format!("`{s}`: after @ give an absolute perf time in ns, e.g. @123456789000")
        });
    }
    let (num, scale) = [
        ("ns", 1.0),
        ("us", 1e3),
        ("µs", 1e3),
        ("ms", 1e6),
        ("s", 1e9),
    ]
    .iter()
    .find_map(|&(unit, scale)| s.strip_suffix(unit).map(|n| (n, scale)))
    .unwrap_or((s, 1e9));
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && v * scale < 1.8e19 => Ok(TimeArg::Relative((v * scale).round() as u64)),
        _ => Err(format!(
            "`{s}` is not a time: give seconds (\"1.5\") or a number with s, ms, us or ns (\"250ms\")"
        )),
    }
}

fn parse_duration(what: &str, s: &str) -> Result<u64> {
    match parse_time(s) {
        Ok(TimeArg::Relative(ns)) => Ok(ns),
        Ok(TimeArg::Absolute(_)) => bail!("{what} {s}: a duration cannot be absolute; drop the @"),
        Err(e) => bail!("{what} {e}"),
    }
}

fn search_path(trace: &Trace, a: &ImageArgs) -> SearchPath {
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
    s
}

fn open(path: &Path) -> Result<Trace> {
    Trace::open(path).with_context(|| format!("cannot decode {}", path.display()))
}

fn info(trace_path: &Path, a: &ImageArgs) -> Result<()> {
    let trace = open(trace_path)?;
    let images = ImageStore::new(search_path(&trace, a));
    images.add_known_build_ids(trace.build_ids.iter().cloned());
    let text = summary::info(&trace, &images);
    let mut out = outfile::stdout()?;
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

fn dump(file: &Path) -> Result<()> {
    let raw = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&raw[..]), &mut v)
            .with_context(|| format!("{}: bad gzip data", file.display()))?;
        v
    } else {
        raw
    };
    let text = ftf::read::dump(&bytes)
        .with_context(|| format!("{} is not a readable FTF file", file.display()))?;
    let mut out = outfile::stdout()?;
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Opens a trace to decode: refuses a sideband-only recording and prints
/// the input's warnings (a cut file, ...) whatever -q says, as `ptdec
/// info` lists them: the output may be incomplete.
fn open_decodable(trace_path: &Path) -> Result<Trace> {
    let trace = open(trace_path)?;
    if trace.sideband_only {
        bail!(
            "{} is a sideband-only recording (ptrec --sideband-only): there is no Intel PT to \
             decode; `ptdec info {}` describes its processes and mappings",
            trace_path.display(),
            trace_path.display()
        );
    }
    for w in &trace.warnings {
        eprintln!("ptdec: warning: {}: {w}", trace_path.display());
    }
    Ok(trace)
}

/// `--start`/`--duration` as a range of absolute perf times (ns).
fn window(
    trace: &Trace,
    trace_path: &Path,
    start: Option<&str>,
    duration: Option<&str>,
) -> Result<(Option<u64>, Option<u64>)> {
    let origin = pipeline::origin(trace);
    let start = match start.map(parse_time).transpose() {
        Err(e) => bail!("--start {e}"),
        Ok(None) => None,
        Ok(Some(TimeArg::Absolute(t))) => Some(t),
        Ok(Some(TimeArg::Relative(ns))) => match origin {
            Some(o) => Some(o + ns),
            None => bail!(
                "--start {}: {} has no TSC conversion, so relative times have no origin; give an absolute time as @NS",
                start.unwrap_or_default(),
                trace_path.display()
            ),
        },
    };
    let duration = duration
        .map(|d| parse_duration("--duration", d))
        .transpose()?;
    let end = match duration {
        None => None,
        Some(d) => match start.or(origin) {
            Some(s) => Some(s.saturating_add(d)),
            None => bail!("--duration needs --start @NS on a trace without TSC conversion"),
        },
    };
    Ok((start, end))
}

fn decode(a: DecodeArgs) -> Result<()> {
    let (Some(trace_path), Some(output)) = (a.trace, a.output) else {
        bail!("give a trace and -o OUT (see --help)");
    };
    let trace = open_decodable(&trace_path)?;
    let (start, end) = window(
        &trace,
        &trace_path,
        a.start.as_deref(),
        a.duration.as_deref(),
    )?;
    let split = a
        .split
        .as_deref()
        .map(|d| parse_duration("--split", d))
        .transpose()?;
    if split == Some(0) {
        bail!("--split must be longer than 0");
    }
    let min_duration = a
        .min_duration
        .as_deref()
        .map(|d| parse_duration("--min-duration", d))
        .transpose()?;
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
        Target::File(output.clone())
    };
    let progress = Progress::new(a.quiet);
    let set = |v: Vec<u32>| (!v.is_empty()).then(|| v.into_iter().collect::<BTreeSet<u32>>());
    let decode = DecodeOptions {
        tids: set(a.tid),
        pids: set(a.pid),
        start,
        end,
        jobs: a.jobs,
        chunk_bytes: a.chunk_size,
        progress: progress.callback(),
        ..DecodeOptions::default()
    };
    let emit = EmitOptions {
        axis,
        axis_auto: a.time_axis.is_none(),
        timed: None,
        record: false,
        origin: 0,
        range: (start.is_some() || end.is_some())
            .then(|| (start.unwrap_or(0), end.unwrap_or(u64::MAX))),
        split,
        interpolate: !a.no_interpolate,
        marks: a.marks.filter(),
        filtered: false,
        min_duration,
    };
    let images = ImageStore::new(search_path(&trace, &a.images));
    let symbols = SymbolCache::for_search(images.search());
    progress.message(format!("decoding {}", trace_path.display()));
    let end = RunEnd {
        input: &trace_path,
        output: &output,
        quiet: a.quiet,
        check: a.check.then_some(&a.tp),
    };
    run_and_report(
        &progress,
        &end,
        |on_op| {
            pipeline::run(
                &trace,
                &images,
                &symbols,
                RunOptions {
                    decode,
                    emit,
                    target,
                    on_op,
                },
            )
        },
        || Ok(()),
    )
}

/// `ptdec report`: the decode of `ptdec TRACE` into `ptdec::report`'s
/// aggregation, printed; the folded stacks and flame graph written.
fn report(a: ReportArgs) -> Result<()> {
    use ptdec::report::{files::ReportFiles, render, AggregateOptions, ReportOptions};
    let trace = open_decodable(&a.trace)?;
    let (start, end) = window(&trace, &a.trace, a.start.as_deref(), a.duration.as_deref())?;
    if a.format == render::Format::Csv && a.slowest.is_some() {
        bail!("--slowest: CSV holds one table (the functions); use the table or --format json for the slowest calls");
    }
    // Refused before decoding: the same protection as -o.
    let files = ReportFiles::create(a.folded.as_deref(), a.flamegraph.as_deref())?;
    let set = |v: Vec<u32>| (!v.is_empty()).then(|| v.into_iter().collect::<BTreeSet<u32>>());
    let progress = Progress::new(a.quiet);
    let decode = DecodeOptions {
        tids: set(a.tid),
        pids: set(a.pid),
        start,
        end,
        jobs: a.jobs,
        chunk_bytes: a.chunk_size,
        progress: progress.callback(),
        ..DecodeOptions::default()
    };
    let images = ImageStore::new(search_path(&trace, &a.images));
    let symbols = SymbolCache::for_search(images.search());
    progress.message(format!("decoding {}", a.trace.display()));
    let on_op = |n: u64| progress.ops(n);
    let started = Instant::now();
    let aggregate = AggregateOptions {
        per_thread: a.per_thread,
        folded: files.wants_folded(),
        slowest: a.slowest.unwrap_or(0),
        range: (start.is_some() || end.is_some())
            .then(|| (start.unwrap_or(0), end.unwrap_or(u64::MAX))),
        filtered: false,
    };
    let opts = ReportOptions {
        decode,
        interpolate: !a.no_interpolate,
        on_op: (!progress.is_hidden()).then_some(&on_op as &dyn Fn(u64)),
        aggregate,
    };
    let result = ptdec::report::run(&trace, &images, &symbols, opts);
    progress.finish();
    let (mut run, agg) = result.with_context(|| format!("decoding {}", a.trace.display()))?;
    run.wall_time = Some(started.elapsed());
    files.write(
        &agg,
        a.weight,
        &format!("ptdec report {}", a.trace.display()),
    )?;
    let name = a.trace.display().to_string();
    let text = render::print(&agg, &run, a.format, a.sort, a.top, &name);
    let mut out = outfile::stdout()?;
    out.write_all(text.as_bytes())?;
    out.flush()?;
    if !a.quiet {
        eprint!("{}", summary::render(&run));
    }
    Ok(())
}

/// What a decode run (`ptdec TRACE` or `ptdec raw`) does after its
/// options are set up: see [`run_and_report`].
struct RunEnd<'a> {
    /// The trace decoded and the FTF written, to name in an error.
    input: &'a Path,
    output: &'a Path,
    /// `-q`: no progress bar, no summary.
    quiet: bool,
    /// `--check` with its options.
    check: Option<&'a CheckArgs>,
}

/// Runs `run` (`pipeline::run` or `run_raw`, given the progress callback
/// for `RunOptions::on_op`) under the progress bar and times it; then
/// names the input and output in its error, completes the other outputs
/// (`finish_outputs`: `--insn-list`), prints the summary with the decode
/// rate unless `-q`, and `--check`s the files written.
fn run_and_report(
    progress: &Progress,
    end: &RunEnd,
    run: impl FnOnce(Option<&dyn Fn(u64)>) -> Result<Report, RunError>,
    finish_outputs: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let on_op = |n: u64| progress.ops(n);
    let on_op = (!progress.is_hidden()).then_some(&on_op as &dyn Fn(u64));
    let started = Instant::now();
    let result = run(on_op);
    let wall_time = started.elapsed();
    progress.finish();
    let mut report = result.with_context(|| {
        format!(
            "decoding {} into {}",
            end.input.display(),
            end.output.display()
        )
    })?;
    report.wall_time = Some(wall_time);
    finish_outputs()?;
    if !end.quiet {
        eprint!("{}", summary::render(&report));
    }
    if let Some(tp) = end.check {
        check_written(&report, tp)?;
    }
    Ok(())
}

/// `--check`: each file just written, through Perfetto's importer.
fn check_written(report: &pipeline::Report, a: &CheckArgs) -> Result<()> {
    let tp = ptdec::check::find_trace_processor(a.trace_processor.as_deref())
        .context("--check: the output was written but cannot be checked")?;
    let mut failed = Vec::new();
    for w in &report.written {
        let Some(path) = &w.path else {
            bail!("--check needs -o FILE (it reads the file back), not -");
        };
        let r = ptdec::check::check(&tp, path)?;
        eprint!("{}", ptdec::check::render(path, &r, Some(w.events)));
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

/// `ptdec check FILE`.
fn check(file: &Path, a: &CheckArgs) -> Result<()> {
    let tp = ptdec::check::find_trace_processor(a.trace_processor.as_deref())?;
    let r = ptdec::check::check(&tp, file)?;
    print!("{}", ptdec::check::render(file, &r, None));
    if r.failed() {
        bail!(
            "Perfetto reported import errors or data loss in {}",
            file.display()
        );
    }
    Ok(())
}

fn decode_raw(a: RawArgs) -> Result<()> {
    let input = RawInput::load(&a.pt, &a.elf, &a.raw)
        .with_context(|| format!("cannot decode {}", a.pt.path.display()))?;
    let cfg = RawConfig {
        cpu: a.cpu.and_then(|c| c.0),
        mtc_freq: a.mtc_freq,
        nom_freq: a.nom_freq,
        cpuid_15_eax: a.cpuid_15_eax,
        cpuid_15_ebx: a.cpuid_15_ebx,
        tsc_hz: a.tsc_freq,
        cycles: a.time_axis == Some(Axis::Cycles),
        next_psb_on_error: a.on_error == OnError::NextPsb,
        addr_filters: a.filter.ranges(),
    };
    if let Some(list) = a.insn_list.as_deref().filter(|l| same_output(l, &a.output)) {
        bail!(
            "--insn-list {} and -o {} are the same file; give each its own",
            list.display(),
            a.output.display()
        );
    }
    let list = match &a.insn_list {
        None => None,
        Some(p) => Some(InsnList::create(p)?),
    };
    let target = if a.output == Path::new("-") {
        if a.check {
            bail!("--check reads the output back; give -o a file name, not -");
        }
        Target::Stdout
    } else {
        Target::File(a.output.clone())
    };
    let progress = Progress::new(a.quiet);
    progress.message(format!("decoding {}", a.pt.path.display()));
    let decode = DecodeOptions {
        progress: progress.callback(),
        insn_list: list.as_ref().map(InsnList::callback),
        ..DecodeOptions::default()
    };
    let emit = EmitOptions {
        axis: match a.time_axis.unwrap_or(Axis::Ns) {
            Axis::Ns => TimeAxis::Ns,
            Axis::Cycles => TimeAxis::Cycles,
            Axis::Instructions => TimeAxis::Instructions,
        },
        axis_auto: a.time_axis.is_none(),
        interpolate: !a.no_interpolate,
        marks: a.marks.filter(),
        ..EmitOptions::default()
    };
    let symbols = SymbolCache::new();
    let end = RunEnd {
        input: &a.pt.path,
        output: &a.output,
        quiet: a.quiet,
        check: a.check.then_some(&a.tp),
    };
    run_and_report(
        &progress,
        &end,
        |on_op| {
            pipeline::run_raw(
                &input,
                &cfg,
                &symbols,
                RunOptions {
                    decode,
                    emit,
                    target,
                    on_op,
                },
            )
        },
        || match (list, &a.insn_list) {
            (Some(list), Some(path)) => list
                .finish()
                .with_context(|| format!("cannot write the instruction list {}", path.display())),
            _ => Ok(()),
        },
    )
}

/// `ptdec raw --insn-list`: the listing's writer, shared with the decode
/// worker; the first write error is kept and reported at the end.
struct InsnList {
    out: std::sync::Arc<std::sync::Mutex<ListOut>>,
}

/// The listing's writer and its first write error.
type ListOut = (ListWriter, Option<std::io::Error>);

/// Where the listing goes: stdout, or a file put in place only when
/// complete (`ptdec::outfile`, as the FTF).
enum ListWriter {
    Stdout(std::io::BufWriter<std::io::Stdout>),
    File(std::io::BufWriter<outfile::OutFile>),
}

impl Write for ListWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            ListWriter::Stdout(w) => w.write(buf),
            ListWriter::File(w) => w.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            ListWriter::Stdout(w) => w.flush(),
            ListWriter::File(w) => w.flush(),
        }
    }
}

/// Whether two output names are one file: the same name in the same
/// directory, however spelled (outputs need not exist yet).
fn same_output(a: &Path, b: &Path) -> bool {
    let key = |p: &Path| -> Option<PathBuf> {
        let real = std::fs::canonicalize(p).ok().or_else(|| {
            let dir = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            Some(std::fs::canonicalize(dir).ok()?.join(p.file_name()?))
        })?;
        Some(real)
    };
    a != Path::new("-") && b != Path::new("-") && key(a).is_some_and(|k| Some(k) == key(b))
}

impl InsnList {
    fn create(path: &Path) -> Result<InsnList> {
        let w = if path == Path::new("-") {
            ListWriter::Stdout(std::io::BufWriter::new(std::io::stdout()))
        } else {
            let f = outfile::OutFile::create(path).with_context(|| {
                format!("cannot create the instruction list {}", path.display())
            })?;
            ListWriter::File(std::io::BufWriter::new(f))
        };
        Ok(InsnList {
            out: std::sync::Arc::new(std::sync::Mutex::new((w, None))),
        })
    }

    fn callback(&self) -> ptdec::decode::ListCallback {
        let out = self.out.clone();
        ptdec::decode::ListCallback::new(move |item| {
            let mut g = out.lock().unwrap_or_else(|p| p.into_inner());
            if g.1.is_none() {
                if let Err(e) = writeln!(g.0, "{item}") {
                    g.1 = Some(e);
                }
            }
        })
    }

    fn finish(self) -> std::io::Result<()> {
        let Ok(out) = std::sync::Arc::try_unwrap(self.out) else {
            return Err(std::io::Error::other("the listing is still being written"));
        };
        let (w, err) = out.into_inner().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = err {
            return Err(e);
        }
        match w {
            ListWriter::Stdout(mut w) => w.flush(),
            ListWriter::File(w) => w
                .into_inner()
                .map_err(|e| e.into_error())?
                .commit()
                .map_err(std::io::Error::from),
        }
    }
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

/// SIGINT, SIGTERM and SIGHUP end ptdec with a message and 128 + the
/// signal's number, after removing what an unfinished output left
/// (`outfile::abandon`; an output being put in place is completed first).
/// SIGKILL cannot be caught: an unfinished output is then an unnamed file
/// that vanishes with the process (or, on a filesystem without
/// `O_TMPFILE`, a `.NAME.ptdec-PID-N.tmp` beside it that stays). A signal
/// ignored when ptdec started (`nohup`, a shell's background job) stays
/// ignored.
fn on_interrupt() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let ignored = ignored_signals();
    let caught = [SIGINT, SIGTERM, SIGHUP]
        .into_iter()
        .filter(|&s| ignored & (1 << (s - 1)) == 0);
    let Ok(mut signals) = signal_hook::iterator::Signals::new(caught) else {
        // Without a handler the signal's default action ends the run:
        // unnamed temporaries still vanish.
        return;
    };
    std::thread::spawn(move || {
        let Some(sig) = signals.forever().next() else {
            return;
        };
        let unfinished = outfile::abandon();
        let name = match sig {
            SIGINT => "SIGINT",
            SIGTERM => "SIGTERM",
            _ => "SIGHUP",
        };
        let what = if unfinished.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = unfinished.iter().map(|p| p.display().to_string()).collect();
            format!("; {} not written (nothing of it is left)", list.join(", "))
        };
        // On its own line after a progress bar.
        let nl = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            "\n"
        } else {
            ""
        };
        eprintln!("{nl}ptdec: interrupted by {name}{what}");
        std::process::exit(128 + sig);
    });
}

/// The signals this process ignores (bit `n - 1` for signal `n`), as
/// /proc/self/status's `SigIgn` lists them; none when it cannot be read.
fn ignored_signals() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("SigIgn:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    on_interrupt();
    let result = match cli.command {
        Some(Command::Info { trace, images }) => info(&trace, &images),
        Some(Command::Report(args)) => report(args),
        Some(Command::Dump { file }) => dump(&file),
        Some(Command::Check { file, tp }) => check(&file, &tp),
        Some(Command::Raw(args)) => decode_raw(args),
        None => decode(cli.decode),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ptdec: {}", sideband::error::display_chain(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(parse_time("1.5"), Ok(TimeArg::Relative(1_500_000_000)));
        assert_eq!(parse_time("250ms"), Ok(TimeArg::Relative(250_000_000)));
        assert_eq!(parse_time("10us"), Ok(TimeArg::Relative(10_000)));
        assert_eq!(parse_time("7ns"), Ok(TimeArg::Relative(7)));
        assert_eq!(parse_time("2s"), Ok(TimeArg::Relative(2_000_000_000)));
        assert_eq!(parse_time("@123456789"), Ok(TimeArg::Absolute(123456789)));
        assert!(parse_time("-1").is_err());
        assert!(parse_time("1.5h").is_err());
        assert!(parse_time("@1.5").is_err());
        assert!(parse_duration("--split", "@5").is_err());
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
