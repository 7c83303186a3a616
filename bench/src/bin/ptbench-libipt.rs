//! `ptbench-libipt TRACE`: decodes every segment of a trace dir (or
//! perf.data) with libipt's block decoder alone and prints what it counted.
//!
//! Input parsing is ptdec's (`Trace::open`, `Trace::segments`: the AUX data
//! cut at PSBs, as ptdec decodes it) and so are the binaries found
//! (`ImageStore`, vDSO from the trace dir). One libipt image holds every
//! executable mapping of the traced processes (enough for the benchmark's
//! single-process workloads; ptdec switches images over time and by task).
//! Single-threaded: the per-core limit. Uses the project's `ipt` wrapper
//! (the libipt the `ipt` crate was built with), as `decoder/src/decode/` does.
#![deny(unsafe_code)]

use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use anyhow::{bail, Context};
use ipt::{BlockDecoder, Config, Cpu, Error as PtError, Frequency, SectionCache};
use ptdec::images::{ImageStore, SearchPath};
use ptdec::input::Trace;

/// What one run counted.
#[derive(Debug, Default)]
struct Counts {
    segments: u64,
    bytes: u64,
    blocks: u64,
    insns: u64,
    events: u64,
    errors: u64,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("ptbench-libipt: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let (Some(path), None) = (args.next(), args.next()) else {
        bail!("usage: ptbench-libipt TRACE_DIR_OR_PERF_DATA");
    };
    let path = PathBuf::from(path);
    let trace = Trace::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
    let dir = trace.dir.clone().unwrap_or_else(|| path.clone());
    let images = ImageStore::new(SearchPath::for_trace(dir));

    // Every executable file mapping of the traced processes.
    let cache = SectionCache::new().context("libipt: allocate a section cache")?;
    let mut isids = Vec::new();
    let mut pids: Vec<u32> = trace.itrace_starts.iter().map(|s| s.pid).collect();
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
            if let Ok(isid) = cache.add_file(&file, m.pgoff, size, m.start) {
                isids.push(isid);
            }
        }
    }
    if isids.is_empty() {
        bail!("no binary of the traced processes was found (is the trace dir complete?)");
    }
    let cache = Rc::new(cache);

    let info = &trace.info;
    let mut cfg = Config::default();
    cfg.set_freq(Frequency {
        mtc_freq: trace.mtc_period().unwrap_or(3).min(15),
        nom_freq: info.max_non_turbo_ratio.min(255) as u8,
        cpuid_15_eax: info.tsc_ctc_ratio_n as u32,
        cpuid_15_ebx: info.tsc_ctc_ratio_d as u32,
    });
    // ptdec's block flags (end on calls and jumps: it needs each call's
    // return address), so both do the same work per block.
    cfg.set_block_flags(true, true);
    if let Some(c) = trace.cpu.as_ref().filter(|c| c.is_intel()) {
        cfg.set_cpu(Cpu {
            family: c.family,
            model: c.model,
            stepping: c.stepping,
        })
        .context("libipt: unknown CPU")?;
    }

    let started = Instant::now();
    let mut n = Counts::default();
    for seg in trace.segments() {
        let bytes = trace.segment_bytes(&seg);
        n.segments += 1;
        n.bytes += bytes.len() as u64;
        let mut dec =
            BlockDecoder::new(&cfg, &bytes).context("libipt: allocate a block decoder")?;
        for &isid in &isids {
            let _ = dec.image().add_cached(&cache, isid);
        }
        decode(&mut dec, &mut n);
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "segments {} bytes {} blocks {} insns {} events {} errors {} seconds {secs:.3}",
        n.segments, n.bytes, n.blocks, n.insns, n.events, n.errors
    );
    Ok(())
}

/// Synchronizes at each PSB in turn and walks every block to the next
/// error or the end.
fn decode(dec: &mut BlockDecoder<'_>, n: &mut Counts) {
    'sync: loop {
        let mut status = match dec.sync_forward() {
            Ok(s) => s,
            Err(PtError::EOS) => return,
            Err(_) => {
                n.errors += 1;
                continue;
            }
        };
        loop {
            while status.event_pending() {
                match dec.event() {
                    Ok((_, s)) => {
                        n.events += 1;
                        status = s;
                    }
                    Err(_) => {
                        n.errors += 1;
                        continue 'sync;
                    }
                }
            }
            let (b, r) = dec.next_block();
            // libipt returns the instructions it decoded before an error.
            n.insns += u64::from(b.ninsn);
            match r {
                Ok(s) => {
                    n.blocks += 1;
                    status = s;
                    if s.eos() {
                        return;
                    }
                }
                Err(PtError::EOS) => return,
                Err(_) => {
                    n.errors += 1;
                    continue 'sync;
                }
            }
        }
    }
}
