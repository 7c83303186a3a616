//! The options of `ptdec TRACE` and its subcommands, as clap parses them;
//! their doc comments are the `--help` text.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

pub use super::parse::CpuArg;
use super::parse::{
    parse_address, parse_chunk_size, parse_cpu, parse_filter_cfg, parse_hz, parse_jobs,
    parse_sample_config, parse_size, parse_slowest, parse_time_mult, parse_time_shift, parse_top,
    parse_u64, parse_window_duration,
};
use crate::raw;
use crate::report::render;

/// `ptdec report`'s options: the selection of `ptdec TRACE`'s, and what
/// to print.
#[derive(Args)]
pub struct ReportArgs {
    /// Trace dir (ptrec/ptsim -o DIR, perf record -o DIR), perf.data file, or LLDB
    /// trace bundle (trace save DIR: the folder or its trace.json).
    pub trace: PathBuf,
    #[command(flatten)]
    pub images: ImageArgs,
    /// From this time on: seconds or a unit ("1.5", "250ms") after the first
    /// timestamp, or "@NS" in absolute perf time. Example: --start 2s
    #[arg(long, value_name = "T")]
    pub start: Option<String>,
    /// This long (from --start, or from the first timestamp), more than 0;
    /// calls crossing an edge count their time inside. Example: --duration 10ms
    #[arg(long, value_name = "D", value_parser = parse_window_duration)]
    pub duration: Option<u64>,
    /// Only these threads. Example: --tid 4242,4243
    #[arg(long, value_name = "TID,..", value_delimiter = ',')]
    pub tid: Vec<u32>,
    /// Only the threads of these processes. Example: --pid 4242
    #[arg(long, value_name = "PID,..", value_delimiter = ',')]
    pub pid: Vec<u32>,
    /// Decode with N threads, at most the CPUs ptdec may run on (default:
    /// all of them). Example: -j 4
    #[arg(short = 'j', long = "jobs", value_name = "N", default_value_t = 0)]
    pub jobs: usize,
    /// The unit of parallel decoding, as for `ptdec TRACE`; the report is
    /// the same for any size. Default 32K (16K when it may run on one CPU
    /// only, from per-cpu buffers too), or 256K for a trace with CYC.
    /// Example: --chunk-size 1M
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub chunk_size: Option<u64>,
    #[command(flatten)]
    pub flow: FlowArgs,
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
    /// function,module,calls,total_ns,self_ns,max_ns,insns,self_insns,tail_calls)
    /// or json. Example: --format csv
    #[arg(long, value_enum, default_value_t = render::Format::Table)]
    pub format: render::Format,
    /// One set of rows per thread instead of functions over all threads.
    /// Example: --per-thread
    #[arg(long)]
    pub per_thread: bool,
    /// Also list the N longest calls with thread, depth, duration and start
    /// as @NS, for `ptdec TRACE --start @NS --duration D`. At most 100000:
    /// each call listed is held in memory until printed (about 3 KB each
    /// as JSON). Example: --slowest 10
    #[arg(long, value_name = "N", value_parser = parse_slowest)]
    pub slowest: Option<usize>,
    /// Write folded stacks (`outer;inner;leaf WEIGHT` per line) to FILE;
    /// `-` is standard output, which then holds them instead of the table.
    /// Example: --folded out.folded
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    /// Write an SVG flame graph of the folded stacks to FILE; `-` is
    /// standard output, which then holds it instead of the table.
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
    /// Stop waiting for trace_processor_shell after this many seconds
    /// (default: 600 plus 1 per MB of the file), kill it and fail.
    /// Example: --check-timeout 3600
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    pub check_timeout: Option<u64>,
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
    #[command(flatten)]
    pub flow: FlowArgs,
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
    /// X.parquet: the calls as one Parquet file (see --format).
    /// With --format parquet, a dataset folder.
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    #[command(flatten)]
    pub dataset: DatasetArgs,
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
    /// `[disabled]`, `[overflow]`, `[OFFSET: error: MESSAGE]`; with
    /// --pevent, the sideband's errors and what the --sb:* options ask.
    /// Example: --insn-list flow.txt
    #[arg(long, value_name = "FILE")]
    pub insn_list: Option<PathBuf>,
    #[command(flatten)]
    pub marks: MarkArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub pevent: PeventArgs,
    /// Have libipt report a tick at timing packets (ptxed --event:tick):
    /// with --pevent, more moments at which sideband is applied.
    #[arg(long = "event:tick")]
    pub event_tick: bool,
    /// Have libipt report interrupt-flag changes (ptxed --event:iflags;
    /// Event Trace recordings): with --pevent, more such moments.
    #[arg(long = "event:iflags")]
    pub event_iflags: bool,
}

/// perf_event sideband in ptxed's option names and forms: each setting
/// applies to the `--pevent:primary/secondary` files given after it, as in
/// ptxed. The image follows MMAP, COMM.EXEC, FORK, ITRACE_START and the
/// context switches of the primary files (`crate::pevent`).
#[derive(clap::Args)]
#[command(next_help_heading = "perf_event sideband (as ptxed)")]
pub struct PeventArgs {
    /// Sideband of the traced CPU (or thread), whose context switches and
    /// ITRACE_START change the image. Example: --pevent:primary cpu0.sb
    #[arg(long = "pevent:primary", value_name = "FILE[:FROM[-TO]]", value_parser = raw::parse_file_range)]
    pub primary: Vec<raw::FileRange>,
    /// Sideband of other CPUs: its MMAP, FORK and COMM.EXEC records count.
    /// Example: --pevent:secondary cpu1.sb
    #[arg(long = "pevent:secondary", value_name = "FILE[:FROM[-TO]]", value_parser = raw::parse_file_range)]
    pub secondary: Vec<raw::FileRange>,
    /// perf_event_attr.sample_type of the records (default 0). Example:
    /// --pevent:sample-type 0x10086
    #[arg(long = "pevent:sample-type", value_name = "N", value_parser = parse_u64)]
    pub sample_type: Vec<u64>,
    /// The sample_type of the records whose sample identifier is ID
    /// (repeatable; TYPE must have PERF_SAMPLE_IDENTIFIER).
    /// Example: --pevent:sample-config 42:0x10086
    #[arg(long = "pevent:sample-config", value_name = "ID:TYPE", value_parser = parse_sample_config)]
    pub sample_config: Vec<(u64, u64)>,
    /// perf_event_mmap_page.time_zero (record times to TSC; default 0).
    /// Example: --pevent:time-zero 0xfffffff7b4d2b16a
    #[arg(long = "pevent:time-zero", value_name = "N", value_parser = parse_u64)]
    pub time_zero: Vec<u64>,
    /// perf_event_mmap_page.time_shift (default 0, less than 64).
    /// Example: --pevent:time-shift 31
    #[arg(long = "pevent:time-shift", value_name = "N", value_parser = parse_time_shift)]
    pub time_shift: Vec<u16>,
    /// perf_event_mmap_page.time_mult (default 1, not 0).
    /// Example: --pevent:time-mult 1789569706
    #[arg(long = "pevent:time-mult", value_name = "N", value_parser = parse_time_mult)]
    pub time_mult: Vec<u32>,
    /// Apply the records N TSC ticks earlier (two's complement: later).
    /// Example: --pevent:tsc-offset 0x100
    #[arg(long = "pevent:tsc-offset", value_name = "N", value_parser = parse_u64)]
    pub tsc_offset: Vec<u64>,
    /// Where kernel addresses start, to know when the trace is in the
    /// kernel (default: none is). Example: --pevent:kernel-start 0xffffffff80000000
    #[arg(long = "pevent:kernel-start", value_name = "ADDR", value_parser = parse_address)]
    pub kernel_start: Vec<u64>,
    /// Prepended (as a string) to the file names of MMAP records.
    /// Example: --pevent:sysroot /mnt/target
    #[arg(long = "pevent:sysroot", value_name = "DIR")]
    pub sysroot: Vec<String>,
    /// A kernel ELF image (kcore), in every process's image.
    /// Example: --pevent:kcore kcore_dir/kcore
    #[arg(long = "pevent:kcore", value_name = "FILE[:BASE]", value_parser = raw::parse_elf)]
    pub kcore: Vec<raw::ElfSpec>,
    /// The vDSO of 64-bit processes (their `[vdso]` mappings).
    /// Example: --pevent:vdso-x64 vdso.so
    #[arg(long = "pevent:vdso-x64", value_name = "FILE")]
    pub vdso_x64: Vec<PathBuf>,
    /// The vDSO of x32 processes. Example: --pevent:vdso-x32 vdsox32.so
    #[arg(long = "pevent:vdso-x32", value_name = "FILE")]
    pub vdso_x32: Vec<PathBuf>,
    /// The vDSO of 32-bit processes. Example: --pevent:vdso-ia32 vdso32.so
    #[arg(long = "pevent:vdso-ia32", value_name = "FILE")]
    pub vdso_ia32: Vec<PathBuf>,
    /// List sideband warnings (lost records and sections) in --insn-list,
    /// as ptxed --sb:warn; errors are listed always. Example: --sb:warn
    #[arg(long = "sb:warn", action = clap::ArgAction::Count)]
    pub warn: u8,
    /// List each sideband record in --insn-list where it is applied, on
    /// one line (ptxed --sb:compact, or --sb). Example: --sb:compact
    #[arg(long = "sb:compact", alias = "sb", action = clap::ArgAction::Count)]
    pub sb_compact: u8,
    /// The same a field a line (ptxed --sb:verbose); of --sb:compact and
    /// --sb:verbose the one given last counts. Example: --sb:verbose
    #[arg(long = "sb:verbose", action = clap::ArgAction::Count)]
    pub sb_verbose: u8,
    /// Put the sideband file's name before each listed record.
    /// Example: --sb:filename
    #[arg(long = "sb:filename", action = clap::ArgAction::Count)]
    pub sb_filename: u8,
    /// Put the record's offset in its file (or range) before each listed
    /// record. Example: --sb:offset
    #[arg(long = "sb:offset", action = clap::ArgAction::Count)]
    pub sb_offset: u8,
    /// Put the record's time (TSC, in hex) before each listed record that
    /// has one. Example: --sb:time
    #[arg(long = "sb:time", action = clap::ArgAction::Count)]
    pub sb_time: u8,
    /// List `[context: pid-N]` where the image becomes another process's
    /// (ptxed --sb:switch). Example: --sb:switch
    #[arg(long = "sb:switch", action = clap::ArgAction::Count)]
    pub sb_switch: u8,
}

/// Where each value of an option was on the command line (clap's
/// indices), by the option's id; `None`: order unknown, every setting
/// applies to every file.
pub type ArgOrder = std::collections::HashMap<&'static str, Vec<usize>>;

impl PeventArgs {
    /// The ids of the settings, for [`PeventArgs::order`].
    const IDS: [&'static str; 14] = [
        "primary",
        "secondary",
        "sample_type",
        "sample_config",
        "time_zero",
        "time_shift",
        "time_mult",
        "tsc_offset",
        "kernel_start",
        "sysroot",
        "kcore",
        "vdso_x64",
        "vdso_x32",
        "vdso_ia32",
    ];

    /// The printing options whose order matters (the last counts).
    const PRINT_IDS: [&'static str; 2] = ["sb_compact", "sb_verbose"];

    /// The command-line positions of the `raw` subcommand's sideband options.
    pub fn order(m: &clap::ArgMatches) -> ArgOrder {
        Self::IDS
            .iter()
            .chain(&Self::PRINT_IDS)
            .filter_map(|&id| {
                let i = m.indices_of(id)?.collect();
                Some((id, i))
            })
            .collect()
    }

    /// What ptxed's `--sb:*` options ask to be listed. Of `--sb:compact`
    /// and `--sb:verbose` the one given last counts (verbose, when the
    /// order is unknown).
    pub fn print(&self, order: Option<&ArgOrder>) -> crate::pevent::SbPrint {
        use crate::pevent::SbFormat;
        let last = |id: &str| {
            order
                .and_then(|o| o.get(id))
                .and_then(|v| v.iter().max().copied())
        };
        let format = match (self.sb_compact > 0, self.sb_verbose > 0) {
            (false, false) => None,
            (true, false) => Some(SbFormat::Compact),
            (false, true) => Some(SbFormat::Verbose),
            (true, true) => Some(if last("sb_compact") > last("sb_verbose") {
                SbFormat::Compact
            } else {
                SbFormat::Verbose
            }),
        };
        crate::pevent::SbPrint {
            format,
            filename: self.sb_filename > 0,
            offset: self.sb_offset > 0,
            time: self.sb_time > 0,
            switch: self.sb_switch > 0,
            warnings: self.warn > 0,
        }
    }

    /// Each sideband file with the settings ptxed gives it: for each
    /// setting, the last value before the file (all values when the order
    /// is unknown). A setting after the last file applies to none: an error.
    pub fn specs(
        &self,
        order: Option<&ArgOrder>,
    ) -> Result<Vec<crate::pevent::PeventSpec>, String> {
        let pos = |id: &str, k: usize| {
            order
                .and_then(|o| o.get(id))
                .and_then(|v| v.get(k).copied())
        };
        let mut files: Vec<(usize, raw::FileRange, bool)> = Vec::new();
        for (k, f) in self.primary.iter().enumerate() {
            files.push((pos("primary", k).unwrap_or(k), f.clone(), true));
        }
        for (k, f) in self.secondary.iter().enumerate() {
            let at = pos("secondary", k).unwrap_or(self.primary.len() + k);
            files.push((at, f.clone(), false));
        }
        files.sort_by_key(|f| f.0);
        let last_file = files.last().map(|f| f.0);
        // The value of a setting at `at`: its last one before it.
        fn before<T: Clone>(
            vals: &[T],
            id: &'static str,
            at: usize,
            order: Option<&ArgOrder>,
        ) -> Option<T> {
            match order.and_then(|o| o.get(id)) {
                Some(idx) => idx
                    .iter()
                    .zip(vals)
                    .filter(|(&i, _)| i < at)
                    .last()
                    .map(|(_, v)| v.clone()),
                None => vals.last().cloned(),
            }
        }
        if let Some(o) = order {
            for id in &Self::IDS[2..] {
                let late = o.get(id).and_then(|v| v.iter().max()).copied();
                if late.is_some_and(|i| last_file.is_none_or(|l| i > l)) {
                    return Err(format!(
                        "--pevent:{} is given after the last --pevent:primary/secondary \
                         file and applies to none: give it before the file it is for (as ptxed)",
                        id.replace('_', "-")
                    ));
                }
            }
        }
        let mut out = Vec::new();
        for (at, file, primary) in files {
            let d = crate::pevent::PeventConfig::default();
            let sample_config = match order.and_then(|o| o.get("sample_config")) {
                Some(idx) => idx
                    .iter()
                    .zip(&self.sample_config)
                    .filter(|(&i, _)| i < at)
                    .map(|(_, v)| *v)
                    .collect(),
                None => self.sample_config.clone(),
            };
            out.push(crate::pevent::PeventSpec {
                file,
                primary,
                config: crate::pevent::PeventConfig {
                    sample_type: before(&self.sample_type, "sample_type", at, order)
                        .unwrap_or(d.sample_type),
                    sample_config,
                    time_zero: before(&self.time_zero, "time_zero", at, order)
                        .unwrap_or(d.time_zero),
                    time_shift: before(&self.time_shift, "time_shift", at, order)
                        .unwrap_or(d.time_shift),
                    time_mult: before(&self.time_mult, "time_mult", at, order)
                        .unwrap_or(d.time_mult),
                    tsc_offset: before(&self.tsc_offset, "tsc_offset", at, order)
                        .unwrap_or(d.tsc_offset),
                    kernel_start: before(&self.kernel_start, "kernel_start", at, order)
                        .unwrap_or(d.kernel_start),
                    sysroot: before(&self.sysroot, "sysroot", at, order),
                    vdso: [
                        before(&self.vdso_x64, "vdso_x64", at, order),
                        before(&self.vdso_x32, "vdso_x32", at, order),
                        before(&self.vdso_ia32, "vdso_ia32", at, order),
                    ],
                },
            });
        }
        Ok(out)
    }
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
    /// The four ranges; `Err` naming both ends of one whose first address
    /// is above its last (the hardware takes A..=B: such a range holds
    /// nothing, and libipt was handed it without a word).
    pub fn ranges(&self) -> Result<[ipt::AddrFilter; 4], String> {
        let f = |cfg, a, b| ipt::AddrFilter { cfg, a, b };
        let ranges = [
            f(self.addr0_cfg, self.addr0_a, self.addr0_b),
            f(self.addr1_cfg, self.addr1_a, self.addr1_b),
            f(self.addr2_cfg, self.addr2_a, self.addr2_b),
            f(self.addr3_cfg, self.addr3_a, self.addr3_b),
        ];
        for (n, r) in ranges.iter().enumerate() {
            if r.a > r.b {
                return Err(format!(
                    "--filter:addr{n}_a {:#x} is above --filter:addr{n}_b {:#x}: A is the \
                     range's first address and B its last (both included); give A <= B, as \
                     the trace was recorded with (IA32_RTIT_ADDR{n}_A/B)",
                    r.a, r.b
                ));
            }
        }
        Ok(ranges)
    }
}

/// `--decoder` and `--on-error`, the same for `ptdec`, `ptdec report` and
/// `ptdec raw`.
#[derive(Args)]
pub struct FlowArgs {
    /// The flow decoder: `fast` (ptdec's own, with libipt for the PSB
    /// intervals it does not handle; the output is the same with
    /// --on-error next-psb)
    /// or `libipt` (libipt's block decoder for all, the reference).
    /// Default: fast.
    /// Example: --decoder libipt
    #[arg(long, value_enum, value_name = "NAME", default_value_t = Decoder::Fast)]
    pub decoder: Decoder,
    /// After a decode error (code without an image, a corrupt trace):
    /// `resync` goes on where the trace next tells the IP (a TIP, a FUP,
    /// a PSB+; as perf script does, and ptxed --resync-on-error), or
    /// `next-psb` skips to the next PSB (ptxed's default), losing what
    /// lies between (often kilobytes). Either way one gap per stretch
    /// that could not be decoded. Default: resync; with --decoder libipt
    /// next-psb, as libipt 2.1.2 cannot resync (it refuses resync). The
    /// two decoders give the same output with next-psb.
    /// Example: --on-error next-psb
    #[arg(long, value_enum, value_name = "WHERE")]
    pub on_error: Option<OnError>,
}

/// `--decoder`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Decoder {
    Fast,
    Libipt,
}

impl From<Decoder> for crate::decode::DecoderKind {
    fn from(d: Decoder) -> Self {
        match d {
            Decoder::Fast => crate::decode::DecoderKind::Fast,
            Decoder::Libipt => crate::decode::DecoderKind::Libipt,
        }
    }
}

/// `--on-error`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnError {
    Resync,
    NextPsb,
}

impl FlowArgs {
    /// The flow decoder and where it goes on after an error: resync
    /// unless the decoder is libipt without `pt_blk_resync` (2.1.2),
    /// which refuses an explicit `--on-error resync`.
    pub fn resolve(&self) -> Result<(crate::decode::DecoderKind, crate::decode::OnError), String> {
        use crate::decode::OnError as E;
        let can_resync = self.decoder == Decoder::Fast || ipt::HAS_RESYNC;
        let on_error = match self.on_error {
            Some(OnError::NextPsb) => E::NextPsb,
            Some(OnError::Resync) if !can_resync => {
                let (a, b, c) = ipt::version();
                return Err(format!(
                    "--on-error resync: libipt {a}.{b}.{c} cannot resync at an error \
                     (pt_blk_resync came with libipt 2.2); use --decoder fast, or \
                     --on-error next-psb with --decoder libipt"
                ));
            }
            Some(OnError::Resync) => E::Resync,
            None if can_resync => E::Resync,
            None => E::NextPsb,
        };
        Ok((self.decoder.into(), on_error))
    }
}

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
    pub fn filter(&self) -> crate::model::ops::MarkFilter {
        crate::model::ops::MarkFilter {
            ptwrite: !self.no_ptwrite,
            power: !self.no_power,
            events: !self.no_events,
        }
    }
}

#[derive(Args)]
pub struct DecodeArgs {
    /// Trace dir (ptrec/ptsim -o DIR, perf record -o DIR), perf.data file, or LLDB
    /// trace bundle (trace save DIR: the folder or its trace.json).
    #[arg(required = true)]
    pub trace: Option<PathBuf>,
    /// Output FTF file; gzip-compressed when it ends in .gz; `-` for stdout.
    /// X.parquet: the calls as one Parquet file (see --format).
    /// With --format parquet, a dataset folder. Example: -o out.ftf
    #[arg(short, long, value_name = "OUT", required = true)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub dataset: DatasetArgs,
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
    /// Decode this long (from --start, or from the first timestamp), more
    /// than 0. Example: --duration 10ms
    #[arg(long, value_name = "D", value_parser = parse_window_duration)]
    pub duration: Option<u64>,
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
    /// Decode with N threads, at most 256 and at most the CPUs ptdec may
    /// run on (default: all of them). Memory: the
    /// chunks decoded ahead of the output hold at most 8 MiB of trace in
    /// all, whatever -j and --chunk-size say (more threads than chunks fit
    /// there are not started); decoded, that is about 700 MB for
    /// call-dense code. Example: -j 4
    #[arg(short = 'j', long = "jobs", value_name = "N", default_value_t = 0, value_parser = parse_jobs)]
    pub jobs: usize,
    /// Cut each buffer into chunks of about BYTES (at the next PSB), the
    /// unit of parallel decoding: at most 8M, of which 8 MiB are decoded
    /// ahead at once (see -j). The slices are the same for any size.
    /// Default 32K (16K for per-thread buffers when it may run on one CPU
    /// only), or 256K for a trace with CYC (each chunk then decodes up to
    /// 64K before it first). Example: --chunk-size 1M
    #[arg(long, value_name = "BYTES", value_parser = parse_chunk_size)]
    pub chunk_size: Option<u64>,
    #[command(flatten)]
    pub flow: FlowArgs,
    #[command(flatten)]
    pub marks: MarkArgs,
}

/// What -o gets, and a dataset's trace name (`ptdec TRACE` and `ptdec raw`).
#[derive(Args)]
pub struct DatasetArgs {
    /// What -o gets: ftf (a file for Perfetto) or parquet: a dataset folder
    /// of tables for SQL engines (calls/, marks/, threads/, trace/, this
    /// trace in each as trace=NAME/part-0.parquet; docs/sql.md), or, when
    /// -o names a file (X.parquet, a file or device already there, or - for
    /// stdout), that one file holding the calls table.
    /// Default: parquet when -o ends in .parquet, else ftf.
    /// Example: --format parquet
    #[arg(long, value_enum)]
    pub format: Option<OutputFormat>,
    /// With --format parquet: the trace's name, its folder in each table
    /// and its `trace` column; another name adds a trace beside those in
    /// the folder (default: the trace's file name). A single file keeps it
    /// in its footer. Example: --trace-name build-42
    #[arg(long, value_name = "NAME")]
    pub trace_name: Option<String>,
    /// With --format parquet: replace the trace of that name if the folder
    /// holds it already (the other traces stay). A single file is replaced
    /// as an FTF file is, without it.
    #[arg(long)]
    pub force: bool,
}

/// `ptdec TRACE --format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Ftf,
    Parquet,
}

/// How a Parquet run writes `-o`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParquetLayout {
    /// A dataset folder of four tables.
    Folder,
    /// One file, the calls table (`-o X.parquet`, not a folder).
    File,
}

impl DatasetArgs {
    /// What `-o output` gets: `None` for FTF, else the Parquet layout.
    /// `--format parquet` writes a folder unless `output` is not a folder
    /// and either ends in `.parquet` or is there already (a file, or a
    /// device such as /dev/null); a dataset folder of any name gets more
    /// traces. Without `--format`, a name ending in `.parquet` means
    /// parquet, as DuckDB's `COPY ... TO 'x.parquet'` does.
    /// The name is matched in any case (`X.PARQUET`); a trailing `/` names
    /// a folder.
    pub fn parquet(&self, output: &std::path::Path) -> Option<ParquetLayout> {
        let text = output.as_os_str().as_encoded_bytes();
        let slash = text.ends_with(b"/");
        let name = text.strip_suffix(b"/").unwrap_or(text);
        let suffix = b".parquet";
        let named = name.len() >= suffix.len()
            && name[name.len() - suffix.len()..].eq_ignore_ascii_case(suffix);
        let meta = std::fs::metadata(output);
        let is_dir = slash || meta.as_ref().is_ok_and(|m| m.is_dir());
        // `-o -`: standard output, one file as FTF's.
        let stdout = output == std::path::Path::new("-");
        let layout = if stdout || (!is_dir && (named || meta.is_ok())) {
            ParquetLayout::File
        } else {
            ParquetLayout::Folder
        };
        match self.format {
            Some(OutputFormat::Ftf) => None,
            Some(OutputFormat::Parquet) => Some(layout),
            None => named.then_some(layout),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Axis {
    Ns,
    Cycles,
    Instructions,
}
