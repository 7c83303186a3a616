//! Benchmark helpers for `scripts/bench` (results: bench/RESULTS.md). The
//! binaries are the speed limits of ptdec's flow decoders: the same
//! segments of the same trace with the same images as `ptdec`, decoded by
//! libipt's block decoder alone (`ptbench-libipt`: `pt_blk_next`) or by
//! ptdec's own flow decoder alone (`ptbench-fast`: the `ptflow` crate),
//! counting instructions, with no call stacks, timing or output.
#![deny(unsafe_code)]

use std::path::{Path, PathBuf};

use anyhow::bail;
use ipt::{Config, Cpu, Frequency};
use ptdec_core::images::{ImageStore, SearchPath};
use ptdec_core::input::Trace;

/// The one argument of a ptbench binary, `TRACE_DIR_OR_PERF_DATA`; with
/// `-h`/`--help` prints `about` and the usage and exits 0.
pub fn trace_arg(name: &str, about: &str) -> anyhow::Result<PathBuf> {
    let usage = format!("usage: {name} TRACE_DIR_OR_PERF_DATA");
    let mut args = std::env::args_os().skip(1);
    match (args.next(), args.next()) {
        (Some(a), None) if a == "-h" || a == "--help" => {
            println!("{about}\n\n{usage}");
            std::process::exit(0);
        }
        (Some(path), None) => Ok(PathBuf::from(path)),
        _ => bail!("{usage} (--help says more)"),
    }
}

/// What both benchmarks decode with.
pub struct Setup {
    pub trace: Trace,
    /// Every executable file mapping of the traced processes: (file,
    /// offset, size, address). One image holds them all (enough for the
    /// benchmark's single-process workloads; ptdec switches images over
    /// time and by task).
    pub sections: Vec<(String, u64, u64, u64)>,
    /// ptdec's configuration: the trace's timing and CPU, blocks ended at
    /// calls and jumps (ptdec needs each call's return address), so every
    /// decoder does the same work per block.
    pub cfg: Config,
}

/// Opens the trace dir, perf.data or LLDB bundle at `path`.
pub fn setup(path: &Path) -> anyhow::Result<Setup> {
    // The error names the path and its cause already (its source repeats
    // the cause).
    let trace = Trace::open(path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let dir: PathBuf = trace.dir.clone().unwrap_or_else(|| path.to_path_buf());
    let images = ImageStore::new(SearchPath::for_trace(dir));
    let mut sections = Vec::new();
    let mut pids: Vec<u32> = trace.itrace_starts.iter().map(|s| s.pid).collect();
    // An LLDB bundle has no ITRACE_START: its processes are the traced
    // ones.
    if pids.is_empty() {
        pids = trace.timeline.pids();
    }
    pids.sort_unstable();
    pids.dedup();
    for pid in pids {
        let Some(maps) = trace.timeline.process_maps(pid) else {
            continue;
        };
        for m in maps.history() {
            let Some(img) = images.get(&m.file) else {
                continue;
            };
            if m.pgoff >= img.size {
                continue;
            }
            let size = (m.end - m.start).min(img.size - m.pgoff);
            let file = img.path.to_string_lossy().into_owned();
            sections.push((file, m.pgoff, size, m.start));
        }
    }
    if sections.is_empty() {
        bail!("no binary of the traced processes was found (is the trace dir complete?)");
    }
    let info = &trace.info;
    let mut cfg = Config::default();
    cfg.set_freq(Frequency {
        mtc_freq: trace.mtc_period().unwrap_or(3).min(15),
        nom_freq: info.max_non_turbo_ratio.min(255) as u8,
        cpuid_15_eax: info.tsc_ctc_ratio_n as u32,
        cpuid_15_ebx: info.tsc_ctc_ratio_d as u32,
    });
    cfg.set_block_flags(true, true);
    if let Some(c) = trace.cpu.as_ref().filter(|c| c.is_intel()) {
        cfg.set_cpu(Cpu {
            family: c.family,
            model: c.model,
            stepping: c.stepping,
        })
        .map_err(|e| anyhow::anyhow!("libipt: unknown CPU: {}", ipt::message(e)))?;
    }
    Ok(Setup {
        trace,
        sections,
        cfg,
    })
}

/// What one run counted.
#[derive(Debug, Default)]
pub struct Counts {
    pub segments: u64,
    pub bytes: u64,
    pub blocks: u64,
    pub insns: u64,
    pub events: u64,
    pub errors: u64,
}

impl Counts {
    pub fn print(&self, secs: f64) {
        println!(
            "segments {} bytes {} blocks {} insns {} events {} errors {} seconds {secs:.3}",
            self.segments, self.bytes, self.blocks, self.insns, self.events, self.errors
        );
    }
}
