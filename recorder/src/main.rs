//! `ptrec` command line: argument parsing and error printing only; the
//! recording itself is [`ptrec::record::record`].
#![deny(unsafe_code)]

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use ptrec::record::{self, RecordOptions};
use ptrec::session::{Mode, StopSignal};
use ptrec::target::Target;

const AFTER_HELP: &str = "\
Examples:
  sudo ptrec -p 1234 -o trace.dir             record a running process, all its threads, until Ctrl-C
  sudo ptrec -o trace.dir -- ./prog arg1      record a command from its first instruction
  sudo ptrec -e cyc,cyc_thresh=1 -- ./prog    cycle-accurate timing (CYC packets)
  sudo ptrec -S -p 1234 --control fifo:ctl,ack
                                              snapshot mode: `echo snapshot > ctl` (or kill -USR2)
  sudo ptrec -k --archive -a --duration 2     whole system with the kernel, binaries copied
  sudo ptrec --filter 'filter work @ ./prog' -- ./prog
                                              trace only function work() of ./prog
  ptdec trace.dir -o out.ftf                  then decode; perf script -i trace.dir reads it too

Privileges: Intel PT needs root, CAP_PERFMON (Linux 5.8+; CAP_SYS_ADMIN before),
or /proc/sys/kernel/perf_event_paranoid low enough: user-space tracing of your
own processes works at 2 or below with small rings (-m), -k needs 1 or below
(and root for kcore), -a needs 0 or below. No intel_pt PMU (virtual machines
usually lack it)? Synthesize a trace with `ptsim -o trace.dir -- ./prog`.";

/// Record Intel Processor Trace through perf_event_open into a trace
/// directory (perf.data `data`, `images/`, `sysroot/`, `kcore_dir/`).
#[derive(Debug, Parser)]
#[command(name = "ptrec", version, after_help = AFTER_HELP)]
struct Args {
    /// Record running processes and every thread they have or create, e.g. `-p 1234,5678`.
    #[arg(
        short,
        long,
        value_name = "PID[,PID...]",
        value_delimiter = ',',
        conflicts_with = "all_cpus"
    )]
    pid: Vec<i32>,

    /// Record every process on every CPU (needs privilege), e.g. `-a --duration 1`.
    #[arg(short, long)]
    all_cpus: bool,

    /// One buffer per existing thread instead of per CPU, no inheritance, e.g. `-p 1234 --per-thread`.
    #[arg(long)]
    per_thread: bool,

    /// Only these CPUs' buffers (per-cpu modes), e.g. `-C 0-3,6`.
    #[arg(short = 'C', long, value_name = "LIST")]
    cpu: Option<String>,

    /// Output trace directory, e.g. `-o trace.dir`.
    #[arg(short, long, value_name = "DIR", default_value = "trace.dir")]
    output: PathBuf,

    /// Replace an existing output trace directory, e.g. `-f -o trace.dir`.
    #[arg(short, long)]
    force: bool,

    /// Intel PT config terms as perf spells them, checked against this CPU's caps,
    /// e.g. `-e cyc,cyc_thresh=1,mtc_period=3,noretcomp,psb_period=3` (perf's
    /// `intel_pt/.../u` form works too). Default: tsc, mtc, branch as perf.
    #[arg(short, long, value_name = "TERMS")]
    event: Option<String>,

    /// Trace the kernel too and copy kcore, kallsyms and modules into kcore_dir/, e.g. `-k -p 1234`.
    #[arg(short, long)]
    kernel: bool,

    /// Ring sizes in pages, powers of two: DATA[,AUX], e.g. `-m 128,2048`.
    /// Default as perf: 128,1024 privileged, 64,32 otherwise (4 KiB pages).
    #[arg(short = 'm', long, value_name = "DATA[,AUX]")]
    mmap_pages: Option<String>,

    /// Snapshot mode: the AUX ring is overwritten and saved on SIGUSR2, `snapshot` on
    /// the control fifo, a --trigger hit and at the end; optional size per buffer
    /// in bytes (K/M suffixes), e.g. `-S` or `-S1M`.
    #[arg(short = 'S', long, value_name = "SIZE", num_args = 0..=1, default_missing_value = "")]
    snapshot: Option<String>,

    /// Stop after N snapshots, e.g. `-S --max-snapshots 3`.
    #[arg(long, value_name = "N")]
    max_snapshots: Option<u32>,

    /// Stop after this many seconds, e.g. `--duration 2.5`.
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,

    /// perf's control fifos: commands snapshot, enable, disable, stop, ping; each
    /// acknowledged with `ack` on ACK, e.g. `--control fifo:ctl,ack`.
    #[arg(long, value_name = "fifo:CTL[,ACK]")]
    control: Option<String>,

    /// Take a snapshot when the target executes SYMBOL, ADDR or FILE:SYMBOL
    /// (a hardware execute breakpoint), e.g. `--trigger main` or `--trigger libc.so.6:abort`.
    #[arg(long, value_name = "SYMBOL|ADDR|FILE:SYMBOL")]
    trigger: Option<String>,

    /// Trace only where address filters allow, in perf's syntax: `filter|start|stop|tracestop
    /// START[/SIZE][@FILE]`, START and SIZE numbers or function symbols (spaces around symbols),
    /// no @FILE for the kernel; several separated by ','. E.g. `--filter 'filter main @ ./prog'`,
    /// `--filter 'filter 0x1130/0x80@/usr/bin/prog, tracestop memcpy @ /lib/x86_64-linux-gnu/libc.so.6'`.
    /// At most caps/num_address_ranges filters.
    #[arg(long, value_name = "FILTERS")]
    filter: Option<String>,

    /// Copy every mapped executable into DIR/sysroot/ (checked by build-id) to decode elsewhere, e.g. `--archive`.
    #[arg(long)]
    archive: bool,

    /// Read the PMU from this sysfs root instead of /sys (fake trees for tests), e.g. `--sysfs-root tests/sysfs/skylake`.
    #[arg(long, value_name = "DIR", default_value = ptrec::errors::SYSFS)]
    sysfs_root: PathBuf,

    /// Record only the sideband (mmap, comm, task, switch records), no Intel PT:
    /// works without the PMU, e.g. to check permissions: `--sideband-only -- true`.
    #[arg(long)]
    sideband_only: bool,

    /// No progress line.
    #[arg(short, long)]
    quiet: bool,

    /// The command to record, after `--`, e.g. `-- ./prog arg1`.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// The longest `--duration`, in seconds.
const MAX_DURATION_S: f64 = 31_536_000.0;

fn parse_size(s: &str) -> anyhow::Result<u64> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, 'K' | 'k')) => (&s[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&s[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    let n = match num.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => num.parse(),
    }
    .with_context(|| format!("bad size {s:?} (bytes, with an optional K, M or G)"))?;
    Ok(n * mult)
}

fn options(args: &Args) -> anyhow::Result<RecordOptions> {
    let target = match (args.pid.is_empty(), args.all_cpus, args.command.is_empty()) {
        (false, _, false) => bail!("give either -p PID or a command after --, not both"),
        (false, _, true) => Target::Pids(args.pid.clone()),
        (true, true, _) if !args.command.is_empty() => {
            bail!("-a records everything; a command after -- is not supported with it")
        }
        (true, true, _) => Target::SystemWide,
        (true, false, false) => Target::Command(args.command.clone()),
        (true, false, true) => {
            bail!("nothing to record: give -p PID, -a, or a command after `--` (see --help)")
        }
    };
    let mut o = RecordOptions::new(target, &args.output);
    o.force = args.force;
    o.event = args.event.clone();
    o.kernel = args.kernel;
    if let Some(m) = &args.mmap_pages {
        let (d, a) = match m.split_once(',') {
            Some((d, a)) => (d, Some(a)),
            None => (m.as_str(), None),
        };
        let pages = |s: &str| {
            s.trim()
                .parse::<usize>()
                .with_context(|| format!("-m: {s:?} is not a page count"))
        };
        if !d.is_empty() {
            o.data_pages = Some(pages(d)?);
        }
        if let Some(a) = a.filter(|a| !a.is_empty()) {
            o.aux_pages = Some(pages(a)?);
        }
    }
    o.mode = match &args.snapshot {
        None => Mode::FullTrace,
        Some(s) if s.is_empty() => Mode::Snapshot { size: None },
        Some(s) => Mode::Snapshot {
            size: Some(parse_size(s)?),
        },
    };
    if args.max_snapshots.is_some() && args.snapshot.is_none() {
        bail!("--max-snapshots needs snapshot mode (-S)");
    }
    o.max_snapshots = args.max_snapshots;
    o.duration = match args.duration {
        // Up to a year: Duration's own limit (2^64 s) panicked, and a
        // recording longer than that is a typo.
        Some(d) if d.is_finite() && d > 0.0 && d <= MAX_DURATION_S => {
            Some(Duration::from_secs_f64(d))
        }
        Some(d) if d > MAX_DURATION_S => {
            bail!("--duration {d}: at most {MAX_DURATION_S} seconds (a year); give a shorter time")
        }
        Some(d) => bail!("--duration {d}: give a positive number of seconds"),
        None => None,
    };
    o.per_thread = args.per_thread;
    o.cpus = match &args.cpu {
        Some(list) => Some(
            ptrec::sideband_capture::parse_cpu_list(list)
                .with_context(|| format!("-C {list:?}: expected a CPU list such as 0-3,6"))?,
        ),
        None => None,
    };
    o.archive = args.archive;
    o.sysfs_root = args.sysfs_root.clone();
    o.sideband_only = args.sideband_only;
    o.control = match &args.control {
        Some(c) => {
            let spec = c
                .strip_prefix("fifo:")
                .with_context(|| format!("--control {c:?}: expected fifo:CTL[,ACK]"))?;
            let (ctl, ack) = match spec.split_once(',') {
                Some((c, a)) => (PathBuf::from(c), Some(PathBuf::from(a))),
                None => (PathBuf::from(spec), None),
            };
            Some((ctl, ack))
        }
        None => None,
    };
    if args.trigger.is_some() && args.snapshot.is_none() {
        bail!("--trigger takes snapshots: it needs snapshot mode (-S)");
    }
    o.trigger = args.trigger.clone();
    o.filter = args.filter.clone();
    o.cmdline = std::env::args().collect();
    Ok(o)
}

fn run(args: Args) -> anyhow::Result<i32> {
    let opts = options(&args)?;
    let stop = StopSignal::new();
    ptrec::sys::install_signal_counters().context("installing signal handlers")?;
    let done = Arc::new(AtomicBool::new(false));
    let forwarder = record::spawn_signal_forwarder(stop.clone(), done.clone());
    let progress: Option<ptrec::session::ProgressFn> = if args.quiet {
        None
    } else {
        Some(Box::new(|p: &ptrec::session::Progress| {
            sideband::say_part!(
                "\rptrec: {:.1}s, {:.1} MiB written, {:.1} MiB/s{}{}   ",
                p.elapsed.as_secs_f64(),
                p.bytes_written as f64 / (1 << 20) as f64,
                p.bytes_per_sec / (1 << 20) as f64,
                if p.snapshots > 0 {
                    format!(", {} snapshots", p.snapshots)
                } else {
                    String::new()
                },
                if p.lost_records + p.truncated_aux > 0 {
                    format!(
                        ", LOST {} records, {} truncated AUX",
                        p.lost_records, p.truncated_aux
                    )
                } else {
                    String::new()
                },
            );
        }))
    };
    for w in ptrec::outdir::leftovers(&opts.out) {
        sideband::say!("ptrec: warning: {w}");
    }
    let result = record::record(&opts, &stop, progress);
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = forwarder.join();
    let summary = result?;
    if !args.quiet {
        sideband::say!();
    }
    for w in &summary.warnings {
        sideband::say!("ptrec: warning: {w}");
    }
    let r = &summary.report;
    sideband::say!(
        "ptrec: wrote {} ({:.1} MiB: {} bytes of trace, {} of sideband){}",
        summary.out.display(),
        r.file_bytes as f64 / (1 << 20) as f64,
        r.bytes_aux,
        r.bytes_data,
        if r.snapshots > 0 {
            format!(", {} snapshots", r.snapshots)
        } else {
            String::new()
        }
    );
    if r.lost_records > 0 || r.truncated_aux > 0 {
        sideband::say!(
            "ptrec: warning: the kernel lost {} sideband records and truncated {} AUX buffers; \
             use larger rings (-m) or snapshot mode (-S)",
            r.lost_records,
            r.truncated_aux
        );
    }
    Ok(summary.child_status.unwrap_or(0))
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            sideband::say!("ptrec: {}", sideband::error::display_chain(e.as_ref()));
            ExitCode::from(2)
        }
    }
}
