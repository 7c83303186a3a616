//! The options of `ptdec TRACE` and its subcommands, as clap parses them;
//! their doc comments are the `--help` text.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::parse::{
    parse_address, parse_chunk_size, parse_cpu, parse_filter_cfg, parse_hz, parse_jobs, parse_size,
    parse_top,
};
use crate::raw;
use crate::report::render;

/// `ptdec report`'s options: the selection of `ptdec TRACE`'s, and what
/// to print.
#[derive(Args)]
pub struct ReportArgs {
    /// Trace dir (ptrec/ptsim -o DIR, perf record -o DIR) or perf.data file.
    pub trace: PathBuf,
    #[command(flatten)]
    pub images: ImageArgs,
    /// From this time on: seconds or a unit ("1.5", "250ms") after the first
    /// timestamp, or "@NS" in absolute perf time. Example: --start 2s
    #[arg(long, value_name = "T")]
    pub start: Option<String>,
    /// This long (from --start, or from the first timestamp); calls
    /// crossing an edge count their time inside. Example: --duration 10ms
    #[arg(long, value_name = "D")]
    pub duration: Option<String>,
    /// Only these threads. Example: --tid 4242,4243
    #[arg(long, value_name = "TID,..", value_delimiter = ',')]
    pub tid: Vec<u32>,
    /// Only the threads of these processes. Example: --pid 4242
    #[arg(long, value_name = "PID,..", value_delimiter = ',')]
    pub pid: Vec<u32>,
    /// Decode with N threads (default: all cores). Example: -j 4
    #[arg(short = 'j', long = "jobs", value_name = "N", default_value_t = 0)]
    pub jobs: usize,
    /// The unit of parallel decoding, as for `ptdec TRACE`. Example: --chunk-size 1M
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub chunk_size: Option<u64>,
    /// Keep the raw timestamps instead of spreading calls between timing
    /// packets by instruction count. Example: --no-interpolate
    #[arg(long)]
    pub no_interpolate: bool,
    /// Sort by calls, total time, self time or instructions (largest
    /// first). Example: --sort total
    #[arg(long, value_enum, value_name = "KEY", default_value_t = render::Sort::SelfTime)]
    pub sort: render::Sort,
    /// Rows to print (per thread with --per-thread); default 25 in the
    /// table, every function in CSV and JSON. Example: --top 50
    #[arg(long, value_name = "N", value_parser = parse_top)]
    pub top: Option<usize>,
    /// table (for people), csv (every function, header
    /// function,module,calls,total_ns,self_ns,max_ns,insns,self_insns) or
    /// json. Example: --format csv
    #[arg(long, value_enum, default_value_t = render::Format::Table)]
    pub format: render::Format,
    /// One set of rows per thread instead of functions over all threads.
    /// Example: --per-thread
    #[arg(long)]
    pub per_thread: bool,
    /// Also list the N longest calls with thread, depth, duration and start
    /// as @NS, for `ptdec TRACE --start @NS --duration D`. Example: --slowest 10
    #[arg(long, value_name = "N", value_parser = parse_top)]
    pub slowest: Option<usize>,
    /// Write folded stacks (`outer;inner;leaf WEIGHT` per line) to FILE.
    /// Example: --folded out.folded
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    /// Write an SVG flame graph of the folded stacks to FILE.
    /// Example: --flamegraph flame.svg
    #[arg(long, value_name = "FILE")]
    pub flamegraph: Option<PathBuf>,
    /// What a folded stack weighs: self instructions (exact) or self ns.
    /// Example: --weight ns
    #[arg(long, value_enum, default_value_t = render::Weight::Insns)]
    pub weight: render::Weight,
    /// No progress and no summary on stderr (errors are still printed).
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Args)]
pub struct CheckArgs {
    /// Perfetto's trace_processor_shell (default: $PT_TRACE_PROCESSOR, else
    /// trace_processor_shell on the PATH).
    /// Example: --trace-processor ~/bin/trace_processor_shell
    #[arg(long, value_name = "PATH")]
    pub trace_processor: Option<PathBuf>,
}

#[derive(Args)]
pub struct ImageArgs {
    /// A copy of the recording machine's root filesystem, searched for the
    /// traced binaries after the trace dir's own sysroot/. Repeatable.
    /// Example: --sysroot /mnt/target
    #[arg(long = "sysroot", value_name = "DIR")]
    pub sysroots: Vec<PathBuf>,
    /// perf's build-id cache (default ~/.debug). Example: --buildid-dir ~/.debug
    #[arg(long, value_name = "DIR")]
    pub buildid_dir: Option<PathBuf>,
    /// A `perf record --kcore` copy holding kcore and kallsyms (default: the
    /// trace dir's kcore_dir/). Example: --kcore trace.dir/kcore_dir
    #[arg(long, value_name = "DIR")]
    pub kcore: Option<PathBuf>,
    /// An uncompressed kernel ELF image, preferred over kcore.
    /// Example: --vmlinux /usr/lib/debug/boot/vmlinux-6.1.0
    #[arg(long, value_name = "FILE")]
    pub vmlinux: Option<PathBuf>,
}

#[derive(Args)]
pub struct RawArgs {
    /// The raw trace, or a byte range of it. Example: --pt trace.pt:0x1000-0x8000
    #[arg(long, value_name = "FILE[:FROM[-TO]]", value_parser = raw::parse_file_range)]
    pub pt: raw::FileRange,
    /// An ELF file whose PT_LOAD segments are loaded at their addresses, or
    /// with the lowest at BASE (a PIE or shared object). Repeatable.
    /// Example: --elf ./libfoo.so:0x7f0000000000
    #[arg(long, value_name = "FILE[:BASE]", value_parser = raw::parse_elf)]
    pub elf: Vec<raw::ElfSpec>,
    /// Raw code bytes of FILE (or of its range FROM..TO) loaded at ADDR.
    /// Repeatable. Example: --raw dump.bin:0x200-0x1200:0x400000
    #[arg(long, value_name = "FILE[:FROM[-TO]]:ADDR", value_parser = raw::parse_raw)]
    pub raw: Vec<raw::RawSpec>,
    /// The CPU, FAMILY/MODEL[/STEPPING], for libipt's errata workarounds;
    /// `none`: decode by the spec (default). Example: --cpu 6/85/4
    #[arg(long, value_name = "F/M[/S]", value_parser = parse_cpu)]
    pub cpu: Option<CpuArg>,
    /// IA32_RTIT_CTL.MTCFreq the trace was recorded with (needed with MTC).
    /// Example: --mtc-freq 3
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub mtc_freq: u8,
    /// Max non-turbo ratio, MSR_PLATFORM_INFO[15:8] (calibrates CYC timing).
    /// Example: --nom-freq 24
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub nom_freq: u8,
    /// CPUID.15H:EAX, the TSC/crystal clock ratio's denominator (needed with MTC).
    /// Example: --cpuid-0x15.eax 2
    #[arg(long = "cpuid-0x15.eax", value_name = "N", default_value_t = 0)]
    pub cpuid_15_eax: u32,
    /// CPUID.15H:EBX, the TSC/crystal clock ratio's numerator (needed with MTC).
    /// Example: --cpuid-0x15.ebx 200
    #[arg(long = "cpuid-0x15.ebx", value_name = "N", default_value_t = 0)]
    pub cpuid_15_ebx: u32,
    /// TSC frequency in Hz (or with kHz, MHz, GHz): output times in ns
    /// instead of TSC ticks. Example: --tsc-freq 2.4GHz
    #[arg(long, value_name = "HZ", value_parser = parse_hz)]
    pub tsc_freq: Option<u64>,
    /// Output FTF file; gzip-compressed when it ends in .gz; `-` for stdout.
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// What the output's timestamps count: ns (TSC ticks, or ns with
    /// --tsc-freq), cycles (needs CYC packets) or instructions. Default: ns,
    /// or instructions when the trace has no timing packets.
    #[arg(long, value_enum)]
    pub time_axis: Option<Axis>,
    /// After writing, load the output into Perfetto's importer (as `ptdec
    /// check`); exit status 1 on import errors.
    #[arg(long)]
    pub check: bool,
    #[command(flatten)]
    pub tp: CheckArgs,
    /// Keep the raw timestamps: without CYC packets every call between two
    /// timing packets gets the same time (zero-width slices); by default they
    /// are spread by instruction count up to the next timestamp, as
    /// magic-trace does (instruction counts are exact either way).
    /// Example: --no-interpolate
    #[arg(long)]
    pub no_interpolate: bool,
    /// No progress and no summary on stderr (errors are still printed).
    #[arg(short, long)]
    pub quiet: bool,
    /// Also write the instruction flow to FILE (`-`: stdout) as ptxed
    /// --no-inst lists it: one address per instruction, `[enabled]`,
    /// `[disabled]`, `[overflow]`, `[OFFSET: error: MESSAGE]`.
    /// Example: --insn-list flow.txt
    #[arg(long, value_name = "FILE")]
    pub insn_list: Option<PathBuf>,
    /// After a decode error: `resync` at the next point libipt can
    /// resume from (ptxed --resync-on-error; needs libipt 2.2, else the
    /// next PSB), or skip to the `next-psb` (ptxed's default).
    /// Example: --on-error next-psb
    #[arg(long, value_enum, default_value_t = OnError::Resync)]
    pub on_error: OnError,
    #[command(flatten)]
    pub marks: MarkArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
}

/// The address filters a raw trace was recorded with, in ptxed's option
/// names and forms (IA32_RTIT_CTL.ADDRn_CFG: 0 off, 1 filter, 2 stop;
/// IA32_RTIT_ADDRn_A/B), so that a ptxed command line works unchanged.
/// libipt needs them for the errata whose workaround depends on them.
#[derive(clap::Args)]
#[command(next_help_heading = "Address filters (as ptxed)")]
pub struct FilterArgs {
    /// ADDR0_CFG: 0 off, 1 filter (trace inside), 2 stop. Example: --filter:addr0_cfg 1
    #[arg(long = "filter:addr0_cfg", value_name = "CFG", value_parser = parse_filter_cfg, default_value = "0")]
    pub addr0_cfg: u32,
    /// ADDR0_A, the range's first address. Example: --filter:addr0_a 0x1000
    #[arg(long = "filter:addr0_a", value_name = "ADDR", value_parser = parse_address, default_value = "0")]
    pub addr0_a: u64,
    /// ADDR0_B, the range's last address. Example: --filter:addr0_b 0x10ff
    #[arg(long = "filter:addr0_b", value_name = "ADDR", value_parser = parse_address, default_value = "0")]
    pub addr0_b: u64,
    /// ADDR1_CFG, as --filter:addr0_cfg.
    #[arg(long = "filter:addr1_cfg", value_name = "CFG", value_parser = parse_filter_cfg, default_value = "0")]
    pub addr1_cfg: u32,
    /// ADDR1_A.
    #[arg(long = "filter:addr1_a", value_name = "ADDR", value_parser = parse_address, default_value = "0")]
    pub addr1_a: u64,
    /// ADDR1_B.
    #[arg(long = "filter:addr1_b", value_name = "ADDR", value_parser = parse_address, default_value = "0")]
    pub addr1_b: u64,
    /// ADDR2_CFG, as --filter:addr0_cfg.
    #[arg(long = "filter:addr2_cfg", value_name = "CFG", value_parser = parse_filter_cfg, default_value = "0")]
    pub addr2_cfg: u32,
    /// ADDR2_A.
    #[arg(long = "filter:addr2_a", value_name = "ADDR", value_parser = parse_address, default_value = "0")]
    pub addr2_a: u64,
    /// ADDR2_B.
    #[arg(long = "filter:addr2_b", value_name = "ADDR", value_parser = parse_address, default_value = "0")]
    pub addr2_b: u64,
    /// ADDR3_CFG, as --filter:addr0_cfg.
    #[arg(long = "filter:addr3_cfg", value_name = "CFG", value_parser = parse_filter_cfg, default_value = "0")]
    pub addr3_cfg: u32,
    /// ADDR3_A.
    #[arg(long = "filter:addr3_a", value_name = "ADDR", value_parser = parse_address, default_value = "0")]
    pub addr3_a: u64,
    /// ADDR3_B.
    #[arg(long = "filter:addr3_b", value_name = "ADDR", value_parser = parse_address, default_value = "0")]
    pub addr3_b: u64,
}

impl FilterArgs {
    pub fn ranges(&self) -> [ipt::AddrFilter; 4] {
        let f = |cfg, a, b| ipt::AddrFilter { cfg, a, b };
        [
            f(self.addr0_cfg, self.addr0_a, self.addr0_b),
            f(self.addr1_cfg, self.addr1_a, self.addr1_b),
            f(self.addr2_cfg, self.addr2_a, self.addr2_b),
            f(self.addr3_cfg, self.addr3_a, self.addr3_b),
        ]
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnError {
    Resync,
    NextPsb,
}

/// A `--cpu` value: `None` for `none`.
#[derive(Clone)]
pub struct CpuArg(pub Option<(u16, u8, u8)>);

/// What the trace holds besides calls, and the options that leave it out.
#[derive(Args)]
pub struct MarkArgs {
    /// Leave out PTWRITE payloads (by default each is an instant `ptwrite`
    /// on its thread, real or perf's emulated ptwrite). Example: --no-ptwrite
    #[arg(long)]
    pub no_ptwrite: bool,
    /// Leave out power and frequency: CBR (the `cpu N frequency` counter in MHz), MWAIT,
    /// PWRE, PWRX and EXSTOP instants. Example: --no-power
    #[arg(long)]
    pub no_power: bool,
    /// Leave out event trace (CFE/EVD): interrupt, iret, vmentry, vmexit,
    /// ... instants. Example: --no-events
    #[arg(long)]
    pub no_events: bool,
}

impl MarkArgs {
    pub fn filter(&self) -> crate::events::MarkFilter {
        crate::events::MarkFilter {
            ptwrite: !self.no_ptwrite,
            power: !self.no_power,
            events: !self.no_events,
        }
    }
}

#[derive(Args)]
pub struct DecodeArgs {
    /// Trace dir (ptrec/ptsim -o DIR, perf record -o DIR) or perf.data file.
    #[arg(required = true)]
    pub trace: Option<PathBuf>,
    /// Output FTF file; gzip-compressed when it ends in .gz; `-` for stdout.
    /// Example: -o out.ftf
    #[arg(short, long, value_name = "OUT", required = true)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub images: ImageArgs,
    /// What the output's timestamps count: ns (perf time from the first
    /// timestamp), cycles (needs CYC packets) or instructions (per thread).
    /// Default: ns, or instructions when the trace has no timing packets.
    /// Example: --time-axis instructions
    #[arg(long, value_enum)]
    pub time_axis: Option<Axis>,
    /// After writing, load the output into Perfetto's importer (as `ptdec
    /// check`); exit status 1 on import errors. Example: --check
    #[arg(long)]
    pub check: bool,
    #[command(flatten)]
    pub tp: CheckArgs,
    /// Keep the raw timestamps: without CYC packets every call between two
    /// timing packets gets the same time (zero-width slices); by default they
    /// are spread by instruction count up to the next timestamp, as
    /// magic-trace does (instruction counts are exact either way).
    /// Example: --no-interpolate
    #[arg(long)]
    pub no_interpolate: bool,
    /// Decode from this time on: seconds or a unit ("1.5", "250ms") after the
    /// first timestamp, or "@NS" in absolute perf time. Example: --start 2s
    #[arg(long, value_name = "T", allow_hyphen_values = false)]
    pub start: Option<String>,
    /// Decode this long (from --start, or from the first timestamp).
    /// Example: --duration 10ms
    #[arg(long, value_name = "D")]
    pub duration: Option<String>,
    /// Only these threads. Example: --tid 4242,4243
    #[arg(long, value_name = "TID,..", value_delimiter = ',')]
    pub tid: Vec<u32>,
    /// Only the threads of these processes. Example: --pid 4242
    #[arg(long, value_name = "PID,..", value_delimiter = ',')]
    pub pid: Vec<u32>,
    /// Write one file per window of this length: out-0.ftf, out-1.ftf, ...;
    /// calls crossing a boundary appear in both files, cut and marked
    /// `cut`. Windows without events write no file. Example: --split 100ms
    #[arg(long, value_name = "D")]
    pub split: Option<String>,
    /// Leave out call (and untraced) slices shorter than D; their callers
    /// are kept, as a caller lasts at least as long. The summary says how
    /// many were left out. Example: --min-duration 1us
    #[arg(long, value_name = "D")]
    pub min_duration: Option<String>,
    /// No progress and no summary on stderr (errors are still printed).
    #[arg(short, long)]
    pub quiet: bool,
    /// Decode with N threads, at most 256 (default: all cores). Memory: the
    /// chunks decoded ahead of the output hold at most 8 MiB of trace in
    /// all, whatever -j and --chunk-size say (more threads than chunks fit
    /// there are not started); decoded, that is about 700 MB for
    /// call-dense code. Example: -j 4
    #[arg(short = 'j', long = "jobs", value_name = "N", default_value_t = 0, value_parser = parse_jobs)]
    pub jobs: usize,
    /// Cut each buffer into chunks of about BYTES (at the next PSB), the
    /// unit of parallel decoding: at most 8M, of which 8 MiB are decoded
    /// ahead at once (see -j). The slices are the same for any size.
    /// Default 256K. Example: --chunk-size 1M
    #[arg(long, value_name = "BYTES", value_parser = parse_chunk_size)]
    pub chunk_size: Option<u64>,
    #[command(flatten)]
    pub marks: MarkArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Axis {
    Ns,
    Cycles,
    Instructions,
}
