//! `ptbench-libipt TRACE`: decodes every segment of a trace dir (or
//! perf.data) with libipt's block decoder alone and prints what it counted.
//!
//! Input parsing is ptdec's (`Trace::open`, `Trace::segments`: the AUX data
//! cut at PSBs, as ptdec decodes it) and so are the binaries found
//! (`ImageStore`, vDSO from the trace dir). One libipt image holds every
//! executable mapping of the traced processes (enough for the benchmark's
//! single-process workloads; ptdec switches images over time and by task).
//! Single-threaded: the per-core limit. Uses the project's `ipt` wrapper
//! (the libipt the `ipt` crate was built with), as `ptdec-core/src/decode/` does.
#![deny(unsafe_code)]

use std::rc::Rc;
use std::time::Instant;

use ipt::{BlockDecoder, Error as PtError, SectionCache};
use pt_bench::Counts;

fn main() {
    if let Err(e) = run() {
        eprintln!("ptbench-libipt: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let path = pt_bench::trace_arg(
        "ptbench-libipt",
        "Decodes every segment of a trace dir or perf.data with libipt's block decoder\nalone, on one thread, and prints what it counted and the CPU time: bare libipt,\nthe yardstick of scripts/bench.",
    )?;
    let s = pt_bench::setup(&path)?;
    let cache = SectionCache::new()
        .map_err(|e| anyhow::anyhow!("libipt: allocate a section cache: {}", ipt::message(e)))?;
    let isids: Vec<u32> = s
        .sections
        .iter()
        .filter_map(|(file, off, size, vaddr)| cache.add_file(file, *off, *size, *vaddr).ok())
        .collect();
    let cache = Rc::new(cache);

    let started = Instant::now();
    let mut n = Counts::default();
    for seg in s.trace.segments() {
        let bytes = s.trace.segment_bytes(&seg);
        n.segments += 1;
        n.bytes += bytes.len() as u64;
        let mut dec = BlockDecoder::new(&s.cfg, &bytes).map_err(|e| {
            anyhow::anyhow!("libipt: allocate a block decoder: {}", ipt::message(e))
        })?;
        for &isid in &isids {
            let _ = dec.image().add_cached(&cache, isid);
        }
        decode(&mut dec, &mut n);
    }
    n.print(started.elapsed().as_secs_f64());
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
