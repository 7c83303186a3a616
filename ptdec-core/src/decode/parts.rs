//! A chunk the fast decoder gave up, decoded again in parts: one from each
//! PSB in it, each by the fast decoder, and by libipt only where the fast
//! decoder gives that part up too.
//!
//! The fast decoder gives a chunk up where it meets something it does not
//! follow (an instruction iced-x86 cannot decode, a packet it does not
//! know). libipt decoding the whole chunk in its stead would make the
//! output depend on the chunk size on a corrupt trace: libipt 2.1.2 goes
//! on at the next PSB after a decode error, where the fast decoder
//! synchronizes again at the error (libipt 2.2's way), so a larger chunk
//! handed to libipt decodes less of the trace around other errors in it.
//! Cut at every PSB, the part libipt decodes is the PSB interval the fast
//! decoder stopped in, whatever the chunk size. The parts are chunks as
//! [`super::chunks::cut`] makes at a chunk size of one byte (the same PSBs
//! a chunk may start at, the same warm-up with CYC), and the ordering
//! stage stitches them as it stitches chunks, so the ops are those of the
//! chunks at any size.
//!
//! A worker decodes the parts and hands them on together
//! ([`ChunkOutput::parts`]), holding at most the chunk's op bound in all;
//! past it, the calling thread decodes the parts when the chunk's turn
//! comes ([`decode_here`]), handing each on as it is decoded, and a part
//! over its own bound in pieces. Not where perf_event sideband is
//! replayed (`ptdec raw --pevent`): its replay runs once through the one
//! chunk of such a decode, and each part would replay it again from the
//! start; libipt decodes the chunk there, as before.

use std::ops::Range;
use std::panic::AssertUnwindSafe;

use super::chunk::{self, ChunkMeta, ChunkOutput, GaveUp, NextChunk, Redo};
use super::chunks::{cuts_within, warmup_len, CutsWithin, Stream};
use super::flow_decoder::DecoderKind;
use super::order::Orderer;
use super::runs::OpPool;
use super::setup::DecodeSetup;
use super::worker_images::WorkerImages;
use super::{DecodeError, WARMUP_BYTES};
use crate::model::ops::OpSink;

/// One chunk to decode: its stream (segment), the stream range to read
/// and where it sits.
pub(super) struct ChunkJob {
    pub stream: usize,
    pub decode: Range<u64>,
    pub meta: ChunkMeta,
}

impl ChunkJob {
    /// Stream offset of the chunk's first byte (after its warm-up).
    pub(super) fn start(&self) -> u64 {
        self.decode.start + self.meta.lead + self.meta.warmup
    }
}

/// The text of a panic.
pub(super) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// `f`, its panic made an error.
pub(super) fn caught<T>(f: impl FnOnce() -> Result<T, DecodeError>) -> Result<T, DecodeError> {
    std::panic::catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|p| Err(DecodeError::Worker(panic_message(&*p))))
}

/// The parts of `job`, one from each PSB in it that a chunk may start at
/// (one, `job` itself, where it holds no other), found one at a time:
/// the chunk of a sequential decode is as long as its trace.
struct Parts<'a, 't> {
    setup: &'a DecodeSetup<'t>,
    stream: &'a Stream<'t>,
    job: &'a ChunkJob,
    cuts: std::iter::Peekable<CutsWithin<'a, 't>>,
    /// The start time of the last part returned (before any, the chunk's).
    time: Option<u64>,
    /// The start of the last part returned.
    prev_start: Option<u64>,
    /// With CYC: the next part's start and warm-up, found with the last
    /// part returned (as its next chunk).
    next_warmup: Option<(u64, u64)>,
}

impl<'a, 't> Parts<'a, 't> {
    fn new(setup: &'a DecodeSetup<'t>, stream: &'a Stream<'t>, job: &'a ChunkJob) -> Self {
        let start = job.start();
        let range = start..start + job.meta.len;
        Parts {
            setup,
            stream,
            job,
            cuts: cuts_within(stream, setup.pt_config(), range, job.decode.end).peekable(),
            time: job.meta.start_time,
            prev_start: None,
            next_warmup: None,
        }
    }

    /// Whether another part follows the last one returned, and its start
    /// time.
    fn next_time(&mut self) -> Option<Option<u64>> {
        let (setup, time) = (self.setup, self.time);
        let first = self.prev_start.is_none();
        self.cuts.peek().map(|c| match first {
            true => time,
            false => c.tsc.map(|t| setup.perf_time(t)).or(time),
        })
    }
}

impl Iterator for Parts<'_, '_> {
    type Item = ChunkJob;

    fn next(&mut self) -> Option<ChunkJob> {
        self.time = self.next_time()?;
        let c = self.cuts.next()?;
        let job = self.job;
        let first = self.prev_start.is_none();
        let last = self.cuts.peek().is_none();
        // As `super::segment_jobs` warms a chunk up with CYC: a part warms
        // up as a chunk starting at its PSB does.
        // The next part's warm-up, found with the part before it.
        let warmup = match (self.prev_start, self.next_warmup.take()) {
            (None, _) => job.meta.warmup,
            (Some(_), Some((at, warmup))) if at == c.range.start => warmup,
            (Some(_), _) => self.warmup_at(c.range.start),
        };
        // The next part, or after the last the chunk's next, and where its
        // warm-up starts (only with CYC: without, none warms up).
        let ahead: Vec<_> = match self.setup.cycles {
            true => self.cuts.clone().take(2).collect(),
            false => Vec::new(),
        };
        let next = match ahead.as_slice() {
            _ if !self.setup.cycles => None,
            [] => job
                .meta
                .next
                .map(|n| (n, job.start() + job.meta.len - n.warmup)),
            [n, more @ ..] => {
                let warmup = self.warmup_at(n.range.start);
                self.next_warmup = Some((n.range.start, warmup));
                let time = n.tsc.map(|t| self.setup.perf_time(t)).or(self.time);
                NextChunk::of(&n.range, warmup, job.meta.last && more.is_empty(), time)
            }
        };
        let from = c.decode.start - warmup;
        let lead = NextChunk::lead(from, next);
        self.prev_start = Some(c.range.start);
        Some(ChunkJob {
            stream: job.stream,
            decode: from - lead..c.decode.end,
            meta: ChunkMeta {
                aux_offset: job.meta.aux_offset + (c.range.start - job.start()),
                len: c.range.end - c.range.start,
                after_loss: job.meta.after_loss && first,
                before_loss: job.meta.before_loss && last,
                first: job.meta.first && first,
                last: job.meta.last && last,
                start_time: self.time,
                warmup,
                next: next.map(|(n, _)| n),
                lead,
                ..job.meta
            },
        })
    }
}

impl Parts<'_, '_> {
    /// The warm-up of a part starting at stream offset `start` (not the
    /// first), as `super::segment_jobs` gives a chunk one.
    fn warmup_at(&self, start: u64) -> u64 {
        match self.setup.cycles {
            true => warmup_len(&self.setup.pt_config(), self.stream, start, WARMUP_BYTES),
            false => 0,
        }
    }
}

/// Whether a chunk the fast decoder gave up may be decoded in parts: not
/// where perf_event sideband is replayed (the module doc says why).
fn in_parts_may(setup: &DecodeSetup<'_>) -> bool {
    setup.sideband().is_none()
}

/// The first try at `job`'s chunk, on a worker or on the
/// calling thread: the fast decoder's output, or how to decode the chunk
/// instead (libipt where it was asked for).
pub(super) fn first_try(
    images: &WorkerImages<'_, '_>,
    pool: &OpPool,
    stream: &Stream<'_>,
    job: &ChunkJob,
) -> Result<Result<ChunkOutput, Redo>, DecodeError> {
    if images.setup.opts.decoder == DecoderKind::Libipt {
        return Ok(Err(Redo::Libipt(None)));
    }
    let bytes = stream.bytes(job.decode.clone());
    Ok(chunk::decode_fast(images, pool, job.meta, &bytes)?.map_err(GaveUp::redo))
}

/// A decode worker's output for `job`, with no flush: the fast decoder's
/// (in parts where it gave the chunk up), or libipt's where libipt was
/// asked for or the fast decoder refused the trace's settings; or
/// [`ChunkOutput::over_bound`], for [`decode_here`].
pub(super) fn decode_on_worker(
    images: &WorkerImages<'_, '_>,
    pool: &OpPool,
    stream: &Stream<'_>,
    job: &ChunkJob,
) -> Result<ChunkOutput, DecodeError> {
    let setup = images.setup;
    let redo = match first_try(images, pool, stream, job)? {
        Ok(out) => return Ok(out),
        Err(redo) => redo,
    };
    // Fetched again where the fast decoder gave the chunk up: a copy only
    // where the chunk spans two of the stream's pieces.
    let bytes = stream.bytes(job.decode.clone());
    let why = match redo {
        Redo::Libipt(why) => {
            return chunk::decode_by_libipt(images, pool, (job.meta, &bytes), None, why)
        }
        Redo::Fast => return Ok(ChunkOutput::over_bound(redo)),
        Redo::Parts(why) if !in_parts_may(setup) => {
            return chunk::decode_by_libipt(images, pool, (job.meta, &bytes), None, Some(why))
        }
        // A part's listing goes out as it is decoded: where a later part
        // sent the chunk to the calling thread, it would come out twice.
        Redo::Parts(_) if setup.opts.insn_list.is_some() => {
            return Ok(ChunkOutput::over_bound(redo))
        }
        Redo::Parts(why) => why,
    };
    drop(bytes);
    let mut parts = Parts::new(setup, stream, job);
    let bound = chunk::op_bound(setup, &job.meta);
    let mut held = 0;
    let mut outs = Vec::new();
    while let Some(mut p) = parts.next() {
        let bytes = stream.bytes(p.decode.clone());
        if outs.is_empty() && parts.next_time().is_none() {
            // One part: the chunk.
            return chunk::decode_by_libipt(images, pool, (job.meta, &bytes), None, Some(why));
        }
        // What the chunk's bound leaves.
        p.meta.op_limit = Some(bound - held);
        let out = match chunk::decode_fast(images, pool, p.meta, &bytes)? {
            Ok(out) => out,
            Err(GaveUp::OverBound) => ChunkOutput::over_bound(Redo::Fast),
            Err(g) => chunk::decode_by_libipt(images, pool, (p.meta, &bytes), None, Some(g.why()))?,
        };
        held += out.ops_held();
        if out.redo.is_some() || held >= bound {
            for (_, o) in outs.into_iter().chain([(p.meta, out)]) {
                o.give_back(pool);
            }
            return Ok(ChunkOutput::over_bound(redo));
        }
        outs.push((p.meta, out));
    }
    Ok(ChunkOutput::in_parts(outs))
}

/// The watermark of a part followed by one starting at `next` (`None`:
/// the chunk's last part), handed to the ordering stage before that part
/// and then the next chunk, whose start time is `watermark`: the earlier
/// of the two start times.
fn part_watermark(next: Option<Option<u64>>, watermark: Option<u64>) -> Option<u64> {
    match next {
        Some(t) => {
            let t = t.unwrap_or(0);
            Some(watermark.map_or(t, |w| w.min(t)))
        }
        None => watermark,
    }
}

/// Hands a worker's output for `job` to the ordering stage: its parts one
/// after another, each as a chunk, or the chunk.
pub(super) fn deliver(
    orderer: &mut Orderer<'_>,
    job: &ChunkJob,
    mut out: ChunkOutput,
    watermark: Option<u64>,
    sink: &mut dyn OpSink,
) {
    if out.parts.is_empty() {
        orderer.chunk(job.stream, job.meta.first, out, watermark, sink);
        return;
    }
    let mut parts = std::mem::take(&mut out.parts).into_iter().peekable();
    while let Some((meta, out)) = parts.next() {
        let wm = part_watermark(parts.peek().map(|p| p.0.start_time), watermark);
        orderer.chunk(job.stream, meta.first, out, wm, sink);
    }
}

/// Decodes `job` on this thread, as `redo` says, handing its runs to the
/// ordering stage as they fill up: a chunk a worker handed on as over its
/// op bound, or the one chunk of a sequential decode the fast decoder did
/// not decode whole. Over its bound, the fast decoder decodes the chunk
/// with a flush ([`chunk::decode_fast_flushing`]); where it gives the
/// chunk up, the chunk is decoded in parts ([`in_parts`]).
pub(super) fn decode_here(
    images: &WorkerImages<'_, '_>,
    pool: &OpPool,
    (stream, job, redo): (&Stream<'_>, &ChunkJob, Redo),
    (orderer, watermark): (&mut Orderer<'_>, Option<u64>),
    sink: &mut dyn OpSink,
) -> Result<(), DecodeError> {
    let why = match redo {
        Redo::Libipt(why) => {
            return by_libipt(images, pool, (stream, job, why), (orderer, watermark), sink)
        }
        Redo::Parts(why) => why,
        // The dry run, with a flush, never passes a bound; it may meet an
        // emulated ptwrite image past where the first try stopped.
        Redo::Fast => match fast_flushing(images, pool, (stream, job), (orderer, watermark), sink)?
        {
            None => return Ok(()),
            Some(GaveUp::Refused(why)) => {
                return by_libipt(
                    images,
                    pool,
                    (stream, job, Some(why)),
                    (orderer, watermark),
                    sink,
                )
            }
            Some(g) => g.why(),
        },
    };
    in_parts(images, pool, (stream, job, why), (orderer, watermark), sink)
}

/// `job`, which the fast decoder gave up (`why`), decoded on this thread
/// in parts: each part by the fast decoder, holding its ops, or with a
/// flush where they pass the part's bound; by libipt where the fast
/// decoder gives the part up too (the whole chunk where it holds one
/// part, or where sideband is replayed).
fn in_parts(
    images: &WorkerImages<'_, '_>,
    pool: &OpPool,
    (stream, job, why): (&Stream<'_>, &ChunkJob, &'static str),
    (orderer, watermark): (&mut Orderer<'_>, Option<u64>),
    sink: &mut dyn OpSink,
) -> Result<(), DecodeError> {
    let setup = images.setup;
    let mut parts = Parts::new(setup, stream, job);
    let mut first = true;
    while let Some(p) = caught(|| Ok(parts.next()))? {
        let next = caught(|| Ok(parts.next_time()))?;
        if first && (next.is_none() || !in_parts_may(setup)) {
            return by_libipt(
                images,
                pool,
                (stream, job, Some(why)),
                (orderer, watermark),
                sink,
            );
        }
        first = false;
        let wm = part_watermark(next, watermark);
        let fast = caught(|| {
            let bytes = stream.bytes(p.decode.clone());
            chunk::decode_fast(images, pool, p.meta, &bytes)
        })?;
        let gave_up = match fast {
            Ok(out) => {
                orderer.chunk(job.stream, p.meta.first, out, wm, sink);
                continue;
            }
            Err(GaveUp::OverBound) => {
                match fast_flushing(images, pool, (stream, &p), (orderer, wm), sink)? {
                    None => continue,
                    Some(g) => g,
                }
            }
            Err(g) => g,
        };
        by_libipt(
            images,
            pool,
            (stream, &p, Some(gave_up.why())),
            (orderer, wm),
            sink,
        )?;
    }
    Ok(())
}

/// `job` decoded by the fast decoder on this thread, its runs handed to
/// the ordering stage as they fill up ([`chunk::decode_fast_flushing`],
/// after [`chunk::fast_decodes_whole`]): `Some` (nothing handed on) where
/// it gives the chunk up.
fn fast_flushing(
    images: &WorkerImages<'_, '_>,
    pool: &OpPool,
    (stream, job): (&Stream<'_>, &ChunkJob),
    (orderer, watermark): (&mut Orderer<'_>, Option<u64>),
    sink: &mut dyn OpSink,
) -> Result<Option<GaveUp>, DecodeError> {
    let bytes = stream.bytes(job.decode.clone());
    if let Err(g) = caught(|| chunk::fast_decodes_whole(images, pool, job.meta, &bytes))? {
        return Ok(Some(g));
    }
    let mut st = orderer.begin(job.stream, job.meta.first);
    let out = {
        let mut flush = |p| orderer.piece(&mut st, p, watermark, sink);
        caught(|| chunk::decode_fast_flushing(images, pool, job.meta, &bytes, &mut flush))?
    };
    orderer.end(st, out, watermark, sink);
    Ok(None)
}

/// `job` decoded by libipt on this thread, its runs handed to the
/// ordering stage as they fill up (`why`: the fast decoder gave it up).
fn by_libipt(
    images: &WorkerImages<'_, '_>,
    pool: &OpPool,
    (stream, job, why): (&Stream<'_>, &ChunkJob, Option<&'static str>),
    (orderer, watermark): (&mut Orderer<'_>, Option<u64>),
    sink: &mut dyn OpSink,
) -> Result<(), DecodeError> {
    let mut st = orderer.begin(job.stream, job.meta.first);
    let out = {
        let mut flush = |p| orderer.piece(&mut st, p, watermark, sink);
        caught(|| {
            let bytes = stream.bytes(job.decode.clone());
            chunk::decode_by_libipt(images, pool, (job.meta, &bytes), Some(&mut flush), why)
        })?
    };
    orderer.end(st, out, watermark, sink);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part's watermark is the next part's start time, or the next
    /// chunk's where that is earlier (per-cpu chunks of other CPUs);
    /// the last part's is the chunk's.
    #[test]
    fn a_part_waits_for_the_next_part_or_the_next_chunk() {
        assert_eq!(part_watermark(Some(Some(20)), Some(50)), Some(20));
        assert_eq!(part_watermark(Some(Some(30)), Some(25)), Some(25));
        assert_eq!(part_watermark(Some(Some(30)), None), Some(30));
        assert_eq!(part_watermark(Some(None), Some(25)), Some(0));
        assert_eq!(part_watermark(None, Some(50)), Some(50));
        assert_eq!(part_watermark(None, None), None);
    }
}
