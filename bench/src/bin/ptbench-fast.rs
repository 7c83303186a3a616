//! `ptbench-fast TRACE`: decodes every segment of a trace dir (or
//! perf.data) with ptdec's own flow decoder alone (the `ptflow` crate, issue
//! 23) and prints what it counted, as `ptbench-libipt` does with libipt's
//! block decoder: the same segments, images and configuration, the same
//! loop (events, blocks, a sync at the next PSB after an error). The
//! blocks come through `FastDecoder::next_blocks_to`, the decoder's way
//! of handing out every block when nothing else is done between two of
//! them (the same blocks as `next_block`, one by one, hands out:
//! `ptdec_core::flow_diff` checks it). With `PTBENCH_WALKS` set, the
//! blocks of plain code come in walks (`ptflow::walk`), as ptdec's chunk
//! decoder takes them: a second copy of the decoder's loop runs then,
//! which costs this loop's few instructions per block more (the bench's
//! interp and shapes traces: 0.11-0.12 instead of 0.10-0.11 s, and
//! 0.155 instead of 0.135 s) and the real LLDB row's loop of a branch
//! and a jump less (0.66-0.80 instead of 0.74-1.07 s). In ptdec, where
//! more is done per block, walks cost nothing on interp and save on the
//! others (docs/decoding.md). A segment
//! where it meets something it does not follow (libipt would decode that
//! chunk in ptdec) ends there and is counted as `unsupported`.
#![deny(unsafe_code)]

use std::path::Path;
use std::rc::Rc;
use std::time::Instant;

use anyhow::bail;
use ipt::Error as PtError;
use pt_bench::Counts;
use ptflow::block::Follow;
use ptflow::code::{CodeCache, Image, Section};
use ptflow::walk::{Walk, Walks};
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
    let walking = std::env::var_os("PTBENCH_WALKS").is_some();
    let mut code = CodeCache::default();
    let mut walks = Walks::default();

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
        if walking {
            decode::<true>(&mut dec, &mut code, &mut walks, &mut n);
        } else {
            decode::<false>(&mut dec, &mut code, &mut walks, &mut n);
        }
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

/// Counts the blocks and instructions handed out, and with `W` takes
/// walks.
#[derive(Default)]
struct Count<const W: bool> {
    blocks: u64,
    insns: u64,
}

impl<const W: bool> Follow for Count<W> {
    const WALKS: bool = W;
    #[inline(always)]
    fn moved(&mut self, _: (u64, u32, u32), _: Option<u64>) {}
    #[inline(always)]
    fn block(&mut self, b: &ipt::Block) -> bool {
        self.blocks += 1;
        self.insns += u64::from(b.ninsn);
        true
    }
    #[inline(always)]
    fn walk(&mut self, w: &Walk, _: &CodeCache) -> Option<bool> {
        self.blocks += u64::from(w.blocks);
        self.insns += w.insns;
        Some(true)
    }
}

/// Synchronizes at each PSB in turn and walks every block to the next
/// error or the end.
fn decode<const W: bool>(
    dec: &mut FastDecoder<'_>,
    code: &mut CodeCache,
    walks: &mut Walks,
    n: &mut Counts,
) {
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
            let mut c = Count::<W>::default();
            let r = dec.next_blocks_to(code, walks, &mut b, 1 << 16, &mut c);
            n.blocks += c.blocks;
            n.insns += c.insns + u64::from(b.ninsn);
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
