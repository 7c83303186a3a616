//! `ptbench-fast TRACE`: decodes every segment of a trace dir (or
//! perf.data) with ptdec's own flow decoder alone (the `ptflow` crate, issue
//! 23) and prints what it counted, as `ptbench-libipt` does with libipt's
//! block decoder: the same segments, images and configuration, the same
//! loop (events, blocks, a sync at the next PSB after an error). The
//! blocks come through `FastDecoder::next_blocks`, the decoder's way of
//! handing out every block when nothing else is done between two of them
//! (the same blocks as `next_block`, one by one, hands out:
//! `ptdec_core::flow_diff` checks it). ptdec's chunk decoder, which does the
//! call stacks' work between blocks, takes them one by one. A segment
//! where it meets something it does not follow (libipt would decode that
//! chunk in ptdec) ends there and is counted as `unsupported`.
#![deny(unsafe_code)]

use std::path::Path;
use std::rc::Rc;
use std::time::Instant;

use anyhow::bail;
use ipt::Error as PtError;
use pt_bench::Counts;
use ptflow::code::{CodeCache, Image, Section};
use ptflow::FastDecoder;
use sideband::bytes::FileBytes;

fn main() {
    if let Err(e) = run() {
        eprintln!("ptbench-fast: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let path = pt_bench::trace_arg(
        "ptbench-fast",
        "Decodes every segment of a trace dir or perf.data with ptdec's own flow decoder\n(`--decoder fast`) alone, instructions only, and prints what it counted and the\nCPU time: the fast decoder's floor, next to ptbench-libipt. Segments with what it\ndoes not follow yet end there and are counted as `unsupported`.",
    )?;
    let s = pt_bench::setup(&path)?;
    let mut sections = Vec::new();
    let mut missing = false;
    for (i, (file, off, size, vaddr)) in s.sections.iter().enumerate() {
        let Ok(bytes) = FileBytes::open(Path::new(file)) else {
            missing = true;
            continue;
        };
        let (offset, len) = (*off as usize, *size as usize);
        if offset.saturating_add(len) > bytes.len() {
            missing = true;
            continue;
        }
        sections.push(Section::new(
            i as u32 + 1,
            *vaddr,
            Rc::new(bytes),
            offset,
            len,
        ));
    }
    let image = Image::new(sections, missing);
    let mut code = CodeCache::default();

    let started = Instant::now();
    let mut n = Counts::default();
    let mut unsupported = Vec::new();
    for seg in s.trace.segments() {
        let bytes = s.trace.segment_bytes(&seg);
        n.segments += 1;
        n.bytes += bytes.len() as u64;
        let mut dec = match FastDecoder::new(&s.cfg.settings(), &bytes) {
            Ok(d) => d,
            Err(why) => bail!("the flow decoder cannot decode this configuration: {why}"),
        };
        dec.set_image(image.clone());
        decode(&mut dec, &mut code, &mut n);
        if let Some(why) = dec.unsupported() {
            unsupported.push(why);
        }
    }
    n.print(started.elapsed().as_secs_f64());
    if !unsupported.is_empty() {
        println!("unsupported {} {unsupported:?}", unsupported.len());
    }
    Ok(())
}

/// Synchronizes at each PSB in turn and walks every block to the next
/// error or the end.
fn decode(dec: &mut FastDecoder<'_>, code: &mut CodeCache, n: &mut Counts) {
    let mut b = ipt::Block::default();
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
            let (mut blocks, mut insns) = (0, 0);
            let r = dec.next_blocks(code, &mut b, 1 << 16, |b, _| {
                blocks += 1;
                insns += u64::from(b.ninsn);
            });
            n.blocks += blocks;
            n.insns += insns + u64::from(b.ninsn);
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
