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
//! ([`ChunkOutput::parts`]), holding at most the chunk's op bound; past
//! it, and for a chunk that was over its bound in one piece, the calling
//! thread decodes the parts when the chunk's turn comes ([`decode_here`]),
//! a part over its bound by libipt, its runs handed on as they fill up.

use std::ops::Range;
use std::panic::AssertUnwindSafe;

use super::chunk::{self, ChunkMeta, ChunkOutput, GaveUp, Redo};
use super::chunks::{cut_within, Stream};
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
        self.decode.start + self.meta.warmup
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

/// `job` cut at every PSB in it that a chunk may start at: the jobs of
/// its parts, in order (one, `job` itself, where it holds no other PSB).
fn part_jobs(setup: &DecodeSetup<'_>, stream: &Stream<'_>, job: &ChunkJob) -> Vec<ChunkJob> {
    let start = job.start();
    let cuts = cut_within(
        stream,
        &setup.pt_config(),
        start..start + job.meta.len,
        job.decode.end,
        None,
    );
    let n = cuts.len();
    let mut time = job.meta.start_time;
    let mut prev_start = start;
    let mut jobs = Vec::with_capacity(n);
    for (i, c) in cuts.into_iter().enumerate() {
        let (first, last) = (i == 0, i + 1 == n);
        // As `super::segment_jobs` warms a chunk up with CYC.
        let warmup = match first {
            true => job.meta.warmup,
            false if setup.cycles => (c.range.start - prev_start).min(WARMUP_BYTES),
            false => 0,
        };
        if !first {
            time = c.tsc.map(|t| setup.perf_time(t)).or(time);
        }
        prev_start = c.range.start;
        jobs.push(ChunkJob {
            stream: job.stream,
            decode: c.decode.start - warmup..c.decode.end,
            meta: ChunkMeta {
                aux_offset: job.meta.aux_offset + (c.range.start - start),
                len: c.range.end - c.range.start,
                after_loss: job.meta.after_loss && first,
                before_loss: job.meta.before_loss && last,
                first: job.meta.first && first,
                last: job.meta.last && last,
                start_time: time,
                warmup,
                ..job.meta
            },
        });
    }
    jobs
}

/// The ops bound of a chunk (`DecodeOptions::chunk_ops`, or
/// [`super::chunk_ops_bound`]).
fn ops_bound(setup: &DecodeSetup<'_>, meta: &ChunkMeta) -> usize {
    setup
        .opts
        .chunk_ops
        .unwrap_or_else(|| super::chunk_ops_bound(meta.len))
        .max(1)
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
    let bytes = stream.bytes(job.decode.clone());
    if images.setup.opts.decoder == DecoderKind::Libipt {
        return chunk::decode_by_libipt(images, pool, (job.meta, &bytes), None, None);
    }
    let why = match chunk::decode_fast(images, pool, job.meta, &bytes)? {
        Ok(out) => return Ok(out),
        Err(GaveUp::Refused(why)) => {
            return chunk::decode_by_libipt(images, pool, (job.meta, &bytes), None, Some(why))
        }
        Err(GaveUp::OverBound) => return Ok(ChunkOutput::over_bound(Redo::Fast)),
        Err(GaveUp::At(why)) => why,
    };
    let parts = part_jobs(images.setup, stream, job);
    if parts.len() == 1 {
        return chunk::decode_by_libipt(images, pool, (job.meta, &bytes), None, Some(why));
    }
    drop(bytes);
    let bound = ops_bound(images.setup, &job.meta);
    let mut held = 0;
    let mut outs = Vec::with_capacity(parts.len());
    for p in &parts {
        let bytes = stream.bytes(p.decode.clone());
        let out = match chunk::decode_fast(images, pool, p.meta, &bytes)? {
            Ok(out) => out,
            Err(g @ (GaveUp::At(_) | GaveUp::Refused(_))) => {
                chunk::decode_by_libipt(images, pool, (p.meta, &bytes), None, Some(g.why()))?
            }
            Err(GaveUp::OverBound) => ChunkOutput::over_bound(Redo::Parts(why)),
        };
        held += out.ops_held();
        if out.redo.is_some() || held > bound {
            for (_, o) in outs.into_iter().chain([(p.meta, out)]) {
                o.give_back(pool);
            }
            return Ok(ChunkOutput::over_bound(Redo::Parts(why)));
        }
        outs.push((p.meta, out));
    }
    Ok(ChunkOutput::in_parts(outs))
}

/// The watermark of part `i` of `metas`, handed to the ordering stage
/// before part `i + 1` and then the next chunk, whose start time is
/// `watermark`: the earlier of the two start times.
fn part_watermark(metas: &[ChunkMeta], i: usize, watermark: Option<u64>) -> Option<u64> {
    match metas.get(i + 1) {
        Some(next) => {
            let t = next.start_time.unwrap_or(0);
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
    let parts = std::mem::take(&mut out.parts);
    let metas: Vec<ChunkMeta> = parts.iter().map(|p| p.0).collect();
    for (i, (meta, out)) in parts.into_iter().enumerate() {
        let wm = part_watermark(&metas, i, watermark);
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
/// part).
fn in_parts(
    images: &WorkerImages<'_, '_>,
    pool: &OpPool,
    (stream, job, why): (&Stream<'_>, &ChunkJob, &'static str),
    (orderer, watermark): (&mut Orderer<'_>, Option<u64>),
    sink: &mut dyn OpSink,
) -> Result<(), DecodeError> {
    let parts = caught(|| Ok(part_jobs(images.setup, stream, job)))?;
    if parts.len() == 1 {
        return by_libipt(
            images,
            pool,
            (stream, job, Some(why)),
            (orderer, watermark),
            sink,
        );
    }
    let metas: Vec<ChunkMeta> = parts.iter().map(|p| p.meta).collect();
    for (i, p) in parts.iter().enumerate() {
        let wm = part_watermark(&metas, i, watermark);
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
                match fast_flushing(images, pool, (stream, p), (orderer, wm), sink)? {
                    None => continue,
                    Some(g) => g,
                }
            }
            Err(g) => g,
        };
        by_libipt(
            images,
            pool,
            (stream, p, Some(gave_up.why())),
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

    fn meta(start_time: Option<u64>) -> ChunkMeta {
        ChunkMeta {
            aux_offset: 0,
            len: 1,
            after_loss: false,
            before_loss: false,
            first: false,
            last: false,
            owner: None,
            start_time,
            warmup: 0,
        }
    }

    /// A part's watermark is the next part's start time, or the next
    /// chunk's where that is earlier (per-cpu chunks of other CPUs);
    /// the last part's is the chunk's.
    #[test]
    fn a_part_waits_for_the_next_part_or_the_next_chunk() {
        let metas = [meta(Some(10)), meta(Some(20)), meta(Some(30))];
        assert_eq!(part_watermark(&metas, 0, Some(50)), Some(20));
        assert_eq!(part_watermark(&metas, 1, Some(25)), Some(25));
        assert_eq!(part_watermark(&metas, 1, None), Some(30));
        assert_eq!(part_watermark(&metas, 2, Some(50)), Some(50));
        assert_eq!(part_watermark(&metas, 2, None), None);
    }
}
