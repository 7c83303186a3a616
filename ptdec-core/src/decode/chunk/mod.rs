//! The per-chunk decoder ([`decode_fast`], [`decode_by_libipt`]): libipt's block decoder over one
//! chunk's bytes (from its PSB through the next chunk's PSB+), turning blocks
//! and events into per-task [`Run`]s of [`Op`]s, with the sideband applied
//! (which task runs, which image is in the decoder). The loop is ptxed's
//! (see the `decode` module doc); a chunk holds no state of another.
//!
//! # At the chunk's edges
//!
//! A chunk starts at a PSB, where libipt synchronizes with nothing of what
//! came before (the hardware compresses no return across a PSB, and PSB+
//! restates time, mode and IP). The PSB+'s FUP gives the IP of the next
//! instruction when the PSB was written: the instructions before it belong
//! to the previous chunk, those from it on to this one. So a chunk's decoder
//! reads on into the next chunk's PSB+ (and [`super::chunks::LOOKAHEAD`]
//! bytes after it, which libipt reads ahead), and when libipt hands out that
//! PSB+'s status update (as soon as it reads it, often before its decoding
//! reaches the IP), decoding goes on to that IP and stops there, counting
//! the part of a block before it ([`Edges::stop_at`]). A transfer
//! pending there completes at that IP, as the next block's first IP in one
//! decoder would. With tracing off at that PSB+, decoding stops at once.
//! The next chunk starts with an `Op::Enabled` at the IP, which the ordering
//! stage drops when this chunk ended with tracing on
//! ([`ChunkOutput::open_task`], [`ChunkOutput::sync_task`]): the ops are
//! those of one decoder running through the PSB. Timing state is restated
//! by PSB+ (TSC, TMA, CBR) too: the tests compare every op, stamps
//! included, with a chunk at every PSB and with one chunk.

use std::collections::BTreeMap;

use ipt::{Block, Config as PtConfig, Error as PtError, Event as PtEvent, EventKind, Status};

use super::flow_decoder::{DecoderKind, Fast, FlowDecoder, Libipt, EMULATED_PTWRITE};
use ptflow::block::Follow;
use ptflow::walk::Walk;
use sideband::timeline::TaskId;

use super::chunks::{next_psb, psb_holding};
use super::clock::Clock;
use super::context::{event_place, Context, Owner};
use super::edges::Edges;
use super::runs::{OpPool, Pending, Run, Tally};
use super::setup::{is_kernel_ip, DecodeSetup};
use super::transfer::{Insns, Transfer};
use super::worker_images::WorkerImages;
use super::{ListItem, NO_PROGRESS_INSNS};
use crate::model::ops::{GapKind, Op, Stamp};
use crate::model::source::EventPlace;
use crate::model::source::SbNote;

mod recover;
mod task;

/// What decoding one chunk counted.
#[derive(Debug, Default)]
pub(super) struct ChunkStats {
    pub bytes: u64,
    pub syncs: u64,
    pub resyncs: u64,
    pub skipped_bytes: u64,
    /// Bytes of the chunk before its first sync; all of them when no PSB
    /// in it could be synchronized at.
    pub unsynced_bytes: u64,
    /// PSBs whose PSB+ libipt could not read (sync errors).
    pub bad_psbs: u64,
    /// The chunk started decoding at a PSB without counting that sync in
    /// `syncs` (a chunk goes on where the previous one stopped). The
    /// ordering stage counts it when no earlier chunk of the segment
    /// synchronized.
    pub start_sync: bool,
    /// Decoding stopped at an error (or found nothing to synchronize at)
    /// with no PSB left in the chunk to go on from: one decoder would
    /// synchronize at the next chunk's PSB, and the ordering stage counts
    /// that chunk's `start_sync` as a sync.
    pub ends_unsynced: bool,
    pub max_stall: u64,
    /// Ops left out because the stall they were decoded in reached the
    /// no-progress bound ([`NO_PROGRESS_INSNS`]).
    pub no_progress_ops: u64,
    pub blocks: u64,
    pub insns: u64,
    pub overflows: u64,
    pub lost_data: u64,
    pub no_image: u64,
    pub unattributed_insns: u64,
    pub errors: BTreeMap<String, u64>,
    pub tsc_span: Option<(u64, u64)>,
    /// Decoded by the fast flow decoder (1), or by libipt (0).
    pub fast: u64,
    /// Chunks the fast decoder gave to libipt, by why.
    pub fallbacks: BTreeMap<&'static str, u64>,
    /// Chunks the fast decoder decoded where libipt is known to decode
    /// wrong, by why (`FastDecoder::libipt_differs`).
    pub libipt_differs: BTreeMap<&'static str, u64>,
}

/// A decoded chunk.
pub(super) struct ChunkOutput {
    pub runs: Vec<Run>,
    pub stats: ChunkStats,
    /// The task whose run was still traced at the chunk's end (no disable,
    /// gap or loss after its last op).
    pub open_task: Option<TaskId>,
    /// The task of the `Op::Enabled` the chunk starts with because it
    /// synchronized at a PSB whose FUP says tracing is on (the first op of
    /// `runs[0]`).
    pub sync_task: Option<TaskId>,
    /// The ratio of the chunk's first CBR mark when it restates the ratio
    /// in a PSB+ (a status update, before any CBR packet of the chunk's
    /// own, usually from the PSB+ it synchronized at): when the previous
    /// chunk of the segment ended at that ratio, the ordering stage drops
    /// it, as one decoder running through the PSB would not mark it.
    pub sync_cbr: Option<u16>,
    /// The ratio of the chunk's last CBR mark.
    pub last_cbr: Option<u16>,
    /// The chunk would hold more ops than its bound
    /// ([`super::chunk_ops_bound`]): nothing else here is set, and the
    /// calling thread decodes it again, flushing, as this says
    /// (`super::parts::decode_here`).
    pub redo: Option<Redo>,
    /// The chunk decoded in parts, one from each PSB
    /// (`super::parts`): each part's place and output, in order, each
    /// handed to the ordering stage as a chunk. The fields above are then
    /// empty.
    pub parts: Vec<(ChunkMeta, ChunkOutput)>,
}

/// How the calling thread decodes a chunk a worker could not hold
/// ([`ChunkOutput::redo`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Redo {
    /// By libipt (`why` the fast decoder gave it up, if it ran).
    Libipt(Option<&'static str>),
    /// By the fast decoder with a flush (its ops passed the bound), in
    /// parts where it gives the chunk up.
    Fast,
    /// In parts (`why` the fast decoder gave the chunk up, for a chunk of
    /// one part, which libipt decodes).
    Parts(&'static str),
}

impl ChunkOutput {
    /// What a worker hands on for a chunk over its op bound: only how to
    /// decode it again.
    pub(super) fn over_bound(redo: Redo) -> ChunkOutput {
        ChunkOutput {
            redo: Some(redo),
            ..ChunkOutput::empty()
        }
    }

    /// A chunk decoded in parts.
    pub(super) fn in_parts(parts: Vec<(ChunkMeta, ChunkOutput)>) -> ChunkOutput {
        ChunkOutput {
            parts,
            ..ChunkOutput::empty()
        }
    }

    fn empty() -> ChunkOutput {
        ChunkOutput {
            runs: Vec::new(),
            stats: ChunkStats::default(),
            open_task: None,
            sync_task: None,
            sync_cbr: None,
            last_cbr: None,
            redo: None,
            parts: Vec::new(),
        }
    }

    /// The ops it holds, its parts' included (parts hold no parts).
    pub(super) fn ops_held(&self) -> usize {
        self.runs_ref().map(|r| r.ops.len()).sum()
    }

    fn runs_ref(&self) -> impl Iterator<Item = &Run> {
        let parts = self.parts.iter().flat_map(|p| p.1.runs.iter());
        self.runs.iter().chain(parts)
    }

    /// Its runs, its parts' included.
    pub(super) fn runs_mut(&mut self) -> impl Iterator<Item = &mut Run> {
        let parts = self.parts.iter_mut().flat_map(|p| p.1.runs.iter_mut());
        self.runs.iter_mut().chain(parts)
    }

    /// Gives its op vectors back to `pool`.
    pub(super) fn give_back(self, pool: &OpPool) {
        let parts = self.parts.into_iter().flat_map(|p| p.1.runs);
        for r in self.runs.into_iter().chain(parts) {
            pool.give(r.ops);
        }
    }
}

/// Runs a chunk hands on before its end ([`decode_by_libipt`]), with
/// what the ordering stage needs to stitch the chunk's first run to the
/// chunk before (as [`ChunkOutput`]'s fields of the same names, as they
/// stand when the piece is handed on: the sync's task is known by then,
/// and the sync's CBR once the chunk's first CBR mark is made).
pub(super) struct Piece {
    pub runs: Vec<Run>,
    pub sync_task: Option<TaskId>,
    pub sync_cbr: Option<u16>,
}

/// Where a chunk sits: in its buffer's stream, in its segment, whose it is.
#[derive(Debug, Clone, Copy)]
pub(super) struct ChunkMeta {
    /// Stream offset of the chunk's first byte (error offsets are
    /// reported in the stream).
    pub aux_offset: u64,
    /// Bytes of the chunk proper (the next chunk's PSB+ not included).
    pub len: u64,
    /// Data was lost just before / just after it (only the first / last
    /// chunk of a segment).
    pub after_loss: bool,
    pub before_loss: bool,
    /// The first / last chunk of its segment (the first's sync counts as
    /// one, and starts no `Enabled` to drop; after the last no PSB+
    /// follows).
    pub first: bool,
    pub last: bool,
    pub owner: Option<Owner>,
    /// Perf time of the chunk's PSB (from its TSC), if known.
    pub start_time: Option<u64>,
    /// Bytes before the chunk that its decoder reads first, only to warm
    /// libipt's timing up (see [`decode_fast`]); 0: none.
    pub warmup: u64,
    /// Ops it may hold, where fewer than [`op_bound`] says (a part of a
    /// chunk on a worker: what the chunk's bound leaves, `super::parts`).
    pub op_limit: Option<usize>,
    /// The next chunk of the segment (or part of the chunk), where it
    /// warms up: what [`ChunkDecoder::next_chunk_meets`] decodes as it is
    /// decoded. `None`: no next chunk, or one synchronized at its PSB.
    pub next: Option<NextChunk>,
    /// Bytes of the job before the warm-up (before the chunk without
    /// one), read only where the next chunk's decoder is run from its own
    /// warm-up, which may start earlier: a chunk with no MTC before it
    /// warms up from the PSB before it, the next one with an MTC between
    /// looks further back (`chunks::warmup_len`).
    pub lead: u64,
}

/// The next chunk and its bytes from its warm-up's start to where this
/// chunk's reading ends, where it warms up.
type NextBytes<'b> = Option<(NextChunk, &'b [u8])>;

/// The next chunk as its decoder sees it: its warm-up bytes before its
/// PSB (more than 0), its length, whether it is the segment's last, the
/// perf time of its PSB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NextChunk {
    pub warmup: u64,
    pub len: u64,
    pub last: bool,
    pub start_time: Option<u64>,
}

impl NextChunk {
    /// The chunk over stream offsets `range` as another's next, warmed up
    /// over `warmup` bytes before it, and the stream offset its warm-up
    /// starts at; `None` without a warm-up.
    pub(super) fn of(
        range: &std::ops::Range<u64>,
        warmup: u64,
        last: bool,
        start_time: Option<u64>,
    ) -> Option<(NextChunk, u64)> {
        (warmup > 0).then(|| {
            let next = NextChunk {
                warmup,
                len: range.end - range.start,
                last,
                start_time,
            };
            (next, range.start - warmup)
        })
    }

    /// [`ChunkMeta::lead`] of a job whose warm-up (or chunk) starts at
    /// stream offset `from`, its next chunk's warm-up at `next`'s.
    pub(super) fn lead(from: u64, next: Option<(NextChunk, u64)>) -> u64 {
        next.map_or(0, |(_, at)| from.saturating_sub(at))
    }
}

/// The ops a decode worker may hold of the chunk `meta` places
/// (`DecodeOptions::chunk_ops`, or [`super::chunk_ops_bound`] of its
/// length), or fewer where its [`ChunkMeta::op_limit`] says.
pub(super) fn op_bound(setup: &DecodeSetup<'_>, meta: &ChunkMeta) -> usize {
    setup
        .opts
        .chunk_ops
        .unwrap_or_else(|| super::chunk_ops_bound(meta.len))
        .max(1)
        .min(meta.op_limit.unwrap_or(usize::MAX))
}

/// A disable or a gap: an op after which a run is not traced on.
fn is_closing(op: &Op) -> bool {
    matches!(op, Op::Disabled { .. } | Op::Gap { .. })
}

/// Why decoding stopped before the chunk's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// libipt's error.
    Pt(PtError),
    /// The no-progress bound: this many instructions without trace.
    NoProgress(u64),
}

/// Instructions decoded since the trace offset last moved.
#[derive(Debug, Default, Clone, Copy)]
struct Stall {
    offset: Option<u64>,
    insns: u64,
}

/// Why the fast decoder did not decode a chunk ([`decode_fast`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GaveUp {
    /// It does not decode the trace's settings (`FastDecoder::new`), or
    /// an image ([`EMULATED_PTWRITE`]): it would not decode the parts
    /// either; libipt decodes the chunk.
    Refused(&'static str),
    /// It met something it does not follow (why) somewhere in the chunk:
    /// the chunk is decoded again in parts, one from each PSB, and libipt
    /// decodes only the parts the fast decoder gives up
    /// (`super::parts`), so that what libipt decodes does not depend on
    /// the chunk size.
    At(&'static str),
    /// The chunk's ops passed its bound ([`super::chunk_ops_bound`]).
    OverBound,
}

impl GaveUp {
    /// How the chunk is decoded instead.
    pub(super) fn redo(self) -> Redo {
        match self {
            GaveUp::Refused(why) => Redo::Libipt(Some(why)),
            GaveUp::At(why) => Redo::Parts(why),
            GaveUp::OverBound => Redo::Fast,
        }
    }

    /// Why, as `DecodeStats::fallbacks` counts it.
    pub(super) fn why(self) -> &'static str {
        match self {
            GaveUp::Refused(why) | GaveUp::At(why) => why,
            GaveUp::OverBound => OVER_BOUND,
        }
    }
}

/// Decodes one chunk with the fast flow decoder, holding all its ops (no
/// flush): `bytes` are `meta.warmup` bytes before it, the chunk, the next
/// chunk's PSB+ and the lookahead.
///
/// With CYC, libipt estimates time from cycle counts calibrated against
/// MTC/TSC as it goes; a decoder that synchronizes at the chunk's PSB starts
/// uncalibrated, and its first estimates would differ from those of one
/// decoder running through the PSB. So the decoder first runs, ignored, from
/// a PSB before the chunk (`warmup` bytes) until libipt hands out the status
/// update of the chunk's own PSB+; from the IP that gives, the chunk is
/// decoded as usual. When the warm-up meets a decode error, the chunk is
/// decoded again without it. The fast decoder does the same, to decode as
/// libipt does.
pub(super) fn decode_fast(
    images: &WorkerImages<'_, '_>,
    pool: &OpPool,
    meta: ChunkMeta,
    bytes: &[u8],
) -> Result<Result<ChunkOutput, GaveUp>, super::DecodeError> {
    Ok(
        match decode_chunk_warm(images, pool, meta, bytes, How::Fast, None)? {
            Ok(out) => Ok(out),
            Err(stopped) => Err(stopped.gave_up()),
        },
    )
}

/// A flush that gives the runs' op vectors back to `pool`: a decode
/// whose runs are not kept (a dry run, the next chunk's probe).
fn dropping(pool: &OpPool) -> impl FnMut(Piece) + '_ {
    |p: Piece| {
        for r in p.runs {
            pool.give(r.ops);
        }
    }
}

/// Whether the fast decoder decodes the chunk whole (`Err`: why not),
/// its ops dropped as they fill up and with no listing: a dry run before
/// [`decode_fast_flushing`].
pub(super) fn fast_decodes_whole(
    images: &WorkerImages<'_, '_>,
    pool: &OpPool,
    meta: ChunkMeta,
    bytes: &[u8],
) -> Result<Result<(), GaveUp>, super::DecodeError> {
    let mut drop_runs = dropping(pool);
    Ok(
        match decode_chunk_warm(images, pool, meta, bytes, How::Dry, Some(&mut drop_runs))? {
            Ok(out) => {
                out.give_back(pool);
                Ok(())
            }
            Err(stopped) => Err(stopped.gave_up()),
        },
    )
}

/// [`decode_fast`], handing the runs decoded so far to `flush` as
/// [`decode_by_libipt`] does, and the listing on as it comes, for a chunk
/// whose ops pass its bound. The fast decoder may give a chunk up after
/// any number of ops: only a chunk it decodes whole
/// ([`fast_decodes_whole`]) goes here. Twice the fast decoder costs
/// less than libipt once (the bare fast decoder takes 6.8-8.9 times less CPU
/// than libipt on the bench's traces).
pub(super) fn decode_fast_flushing(
    images: &WorkerImages<'_, '_>,
    pool: &OpPool,
    meta: ChunkMeta,
    bytes: &[u8],
    flush: &mut dyn FnMut(Piece),
) -> Result<ChunkOutput, super::DecodeError> {
    match decode_chunk_warm(images, pool, meta, bytes, How::FastListing, Some(flush))? {
        Ok(out) => Ok(out),
        Err(stopped) => Err(super::DecodeError::Worker(format!(
            "the fast decoder gave up the chunk at trace offset {:#x} ({}), which it had decoded whole before",
            meta.aux_offset,
            stopped.gave_up().why()
        ))),
    }
}

/// Ops a chunk decoded with a flush (see [`decode_by_libipt`]) holds
/// before it hands its runs on (fewer where the chunk's op bound,
/// `DecodeOptions::chunk_ops`, is lower).
pub(super) const FLUSH_OPS: usize = 1 << 16;

/// Listing items the fast decoder holds at most while it may still give
/// its chunk up (a chunk whose listing is longer is decoded again with a
/// flush, as one over its op bound): `ptdec raw`'s listing is one chunk
/// as long as the trace, and a 10 MB trace lists 55 M instructions.
const LIST_HELD: usize = 1 << 20;

/// [`GaveUp::OverBound`] as a reason.
const OVER_BOUND: &str = "more ops than a chunk may hold";

/// The chunk decoded by libipt (see [`decode_fast`] for `bytes`), `why`
/// the fast decoder gave it up, if it did (counted as a fallback).
///
/// With a flush, the runs decoded so far go to `flush` whenever they hold
/// [`FLUSH_OPS`] ops (between two blocks, with no transfer pending): the
/// current run goes on in a new one whose counters start from 0, as the
/// next chunk's would. The flushed runs and the returned output together
/// are the chunk's runs, and memory stays bounded however many ops the
/// chunk makes (the fast decoder flushes only after a dry run,
/// [`decode_fast_flushing`]). Without a flush (a decode worker),
/// a chunk whose ops pass the bound comes back as
/// [`ChunkOutput::over_bound`], for the calling thread to decode again
/// with one.
pub(super) fn decode_by_libipt(
    images: &WorkerImages<'_, '_>,
    pool: &OpPool,
    (meta, bytes): (ChunkMeta, &[u8]),
    flush: Option<&mut dyn FnMut(Piece)>,
    why: Option<&'static str>,
) -> Result<ChunkOutput, super::DecodeError> {
    let mut out = match decode_chunk_warm(images, pool, meta, bytes, How::Libipt, flush)? {
        Ok(out) => out,
        Err(Stopped::OverBound) => return Ok(ChunkOutput::over_bound(Redo::Libipt(why))),
        Err(_) => unreachable!("libipt decodes every chunk"),
    };
    if let Some(why) = why {
        *out.stats.fallbacks.entry(why).or_default() += 1;
    }
    Ok(out)
}

/// A chunk decoded as `how` says: `Err` when the fast decoder gave up or
/// the ops passed the chunk's bound (never `Stopped::WarmUp`).
fn decode_chunk_warm(
    images: &WorkerImages<'_, '_>,
    pool: &OpPool,
    meta: ChunkMeta,
    bytes: &[u8],
    how: How,
    mut flush: Option<&mut dyn FnMut(Piece)>,
) -> Result<Result<ChunkOutput, Stopped>, super::DecodeError> {
    // A warm-up that fails has flushed nothing (nothing is flushed while
    // warming up).
    let again = flush.as_mut().map(|f| &mut **f as &mut dyn FnMut(Piece));
    // The next chunk's bytes from its warm-up, up to where this chunk's
    // reading ends: its PSB lies `meta.lead + meta.warmup + meta.len` in
    // the job's bytes, which start where the earlier of the two warm-ups
    // starts (`ChunkMeta::lead`).
    let all = bytes;
    let bytes = &all[(meta.lead as usize).min(all.len())..];
    let next = meta.next.and_then(|n| {
        let from = (meta.lead + meta.warmup + meta.len).checked_sub(n.warmup)?;
        Some((n, all.get(usize::try_from(from).ok()?..)?))
    });
    match decode_chunk_from(images, pool, (meta, bytes, next), how, again)? {
        Err(Stopped::WarmUp) => {
            let w = (meta.warmup as usize).min(bytes.len());
            let meta = ChunkMeta { warmup: 0, ..meta };
            let r = decode_chunk_from(images, pool, (meta, &bytes[w..], next), how, flush)?;
            assert!(
                !matches!(r, Err(Stopped::WarmUp)),
                "a decode without warm-up always ends"
            );
            Ok(r)
        }
        r => Ok(r),
    }
}

/// [`decode_chunk_warm`] once: `Err` when the warm-up failed, the fast decoder
/// gave up, or the ops passed the chunk's bound.
fn decode_chunk_from<'b>(
    images: &WorkerImages<'_, '_>,
    pool: &OpPool,
    (meta, bytes, next): (ChunkMeta, &'b [u8], NextBytes<'b>),
    how: How,
    flush: Option<&mut dyn FnMut(Piece)>,
) -> Result<Result<ChunkOutput, Stopped>, super::DecodeError> {
    let cfg = images.setup.pt_config();
    let chunk = (meta, bytes, next);
    match how {
        How::Libipt => {
            let mut dec = Libipt::of_chunk(images, &cfg, bytes).map_err(|error| {
                super::DecodeError::Libipt {
                    what: "allocate a block decoder",
                    error,
                }
            })?;
            Ok(run_chunk(&mut dec, images, pool, chunk, how, flush))
        }
        How::Fast | How::FastListing | How::Dry => {
            let mut dec = match Fast::of_chunk(images, &cfg, bytes) {
                Ok(d) => d,
                Err(why) => return Ok(Err(Stopped::Refused(why))),
            };
            Ok(run_chunk(&mut dec, images, pool, chunk, how, flush))
        }
    }
}

/// The first error past its warm-up that the decoder of chunk `meta`'s
/// next chunk `next` meets, reading `bytes` (from its warm-up's start
/// to where chunk `meta`'s reading ends), its offset in `bytes`:
/// `Some(None)` where it meets none there; `None` where its warm-up fails
/// (the next chunk is then decoded without one). The decoder is the one
/// that decodes the next chunk: the fast decoder where it was asked for,
/// libipt where the fast decoder refuses the trace or gives up before
/// that error (the next chunk, or its first part, goes to libipt with
/// the same warm-up; where the fast decoder gives up only after the
/// error, within the part, libipt decodes that part and the answer is
/// still the fast decoder's). Nothing it decodes is kept or listed. See
/// [`ChunkDecoder::next_chunk_meets`].
#[cold]
#[inline(never)]
fn probe_next(
    images: &WorkerImages<'_, '_>,
    pool: &OpPool,
    (meta, next, bytes): (ChunkMeta, NextChunk, &[u8]),
) -> Option<Option<(PtError, u64)>> {
    let meta = ChunkMeta {
        aux_offset: meta.aux_offset + meta.len,
        len: next.len,
        after_loss: false,
        before_loss: false,
        first: false,
        last: next.last,
        start_time: next.start_time,
        warmup: next.warmup,
        op_limit: None,
        next: None,
        lead: 0,
        owner: meta.owner,
    };
    let cfg = images.setup.pt_config();
    if images.setup.opts.decoder == DecoderKind::Fast {
        if let Ok(mut dec) = Fast::of_chunk(images, &cfg, bytes) {
            match probe_with(&mut dec, images, pool, (meta, bytes), How::Dry) {
                Probed::GaveUp => {}
                Probed::WarmUpFailed => return None,
                Probed::Met(first) => return Some(first),
            }
        }
    }
    let mut dec = Libipt::of_chunk(images, &cfg, bytes).ok()?;
    match probe_with(&mut dec, images, pool, (meta, bytes), How::Libipt) {
        Probed::Met(first) => Some(first),
        Probed::GaveUp | Probed::WarmUpFailed => None,
    }
}

/// What [`probe_with`] found.
enum Probed {
    /// The first error past the warm-up (`None`: none).
    Met(Option<(PtError, u64)>),
    /// The warm-up failed.
    WarmUpFailed,
    /// The fast decoder gave the chunk up before any error.
    GaveUp,
}

/// [`probe_next`] with the decoder `dec`, as `how` decodes. Its runs go
/// back to the pool as they fill up, as a dry run's do.
fn probe_with(
    dec: &mut impl FlowDecoder,
    images: &WorkerImages<'_, '_>,
    pool: &OpPool,
    (meta, bytes): (ChunkMeta, &[u8]),
    how: How,
) -> Probed {
    let mut drop_runs = dropping(pool);
    let flush: &mut dyn FnMut(Piece) = &mut drop_runs;
    let mut st = ChunkDecoder::new(images, pool, (meta, bytes, None), how, Some(flush), false);
    st.list_off = true;
    st.probe = Some(None);
    st.run_decoder(dec);
    st.give_back_runs();
    match st.probe.flatten() {
        Some(first) => Probed::Met(Some(first)),
        None if dec.unsupported().is_some() => Probed::GaveUp,
        None if st.edges.warming => Probed::WarmUpFailed,
        None => Probed::Met(None),
    }
}

/// Why [`run_chunk`] has no output.
enum Stopped {
    /// The warm-up before the chunk met an error: decode without it.
    WarmUp,
    /// The fast decoder met something it does not follow.
    Unsupported(&'static str),
    /// The fast decoder does not decode the trace's settings, or an image
    /// ([`EMULATED_PTWRITE`]).
    Refused(&'static str),
    /// The chunk's ops passed its bound ([`super::chunk_ops_bound`]),
    /// with no flush to hand them to.
    OverBound,
}

impl Stopped {
    /// Why the fast decoder stopped, as [`GaveUp`] (never a warm-up).
    fn gave_up(self) -> GaveUp {
        match self {
            Stopped::OverBound => GaveUp::OverBound,
            Stopped::Unsupported(why) => GaveUp::At(why),
            Stopped::Refused(why) => GaveUp::Refused(why),
            Stopped::WarmUp => unreachable!("a decode without warm-up always ends"),
        }
    }
}

/// Which flow decoder decodes a chunk, and where its listing goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// libipt; the listing as it comes.
    Libipt,
    /// The fast decoder, its listing held until it has decoded the chunk
    /// whole (it may give the chunk up).
    Fast,
    /// The fast decoder, its listing as it comes: it has decoded the
    /// chunk whole before ([`How::Dry`]).
    FastListing,
    /// The fast decoder with no listing: only whether it decodes the
    /// chunk whole.
    Dry,
}

/// One chunk through `dec`.
fn run_chunk<'b>(
    dec: &mut impl FlowDecoder,
    images: &WorkerImages<'_, '_>,
    pool: &OpPool,
    (meta, bytes, next): (ChunkMeta, &'b [u8], NextBytes<'b>),
    how: How,
    flush: Option<&mut dyn FnMut(Piece)>,
) -> Result<ChunkOutput, Stopped> {
    let setup = images.setup;
    let held_listing =
        setup.opts.insn_list.is_some() && dec.unsupported().is_none() && how == How::Fast;
    let mut st = ChunkDecoder::new(images, pool, (meta, bytes, next), how, flush, held_listing);
    st.run_decoder(dec);
    st.over_bound |= st.list_over.get();
    if let Some(why) = dec.libipt_differs() {
        *st.stats.libipt_differs.entry(why).or_default() += 1;
    }
    // Not where the chunk is decoded again (over its op bound too).
    if let (Some(buf), None, Some(f), false) = (
        &st.list_buf,
        dec.unsupported(),
        &setup.opts.insn_list,
        st.over_bound,
    ) {
        for item in buf.take() {
            (f.0)(&item);
        }
    }
    if st.edges.warming || st.over_bound || dec.unsupported().is_some() {
        st.give_back_runs();
        // An error in the warm-up is libipt's too: it decodes the chunk
        // again without one, and so does the fast decoder.
        return Err(match (dec.unsupported(), st.over_bound) {
            (Some(EMULATED_PTWRITE), _) => Stopped::Refused(EMULATED_PTWRITE),
            (Some(why), _) => Stopped::Unsupported(why),
            (None, true) => Stopped::OverBound,
            (None, false) => Stopped::WarmUp,
        });
    }
    st.finish();
    let open_task = if st.open { st.ctx.task } else { None };
    Ok(ChunkOutput {
        runs: st.runs,
        stats: ChunkStats {
            tsc_span: st.clock.span,
            ..st.stats
        },
        open_task,
        sync_task: st.sync_task,
        sync_cbr: st.sync_cbr,
        last_cbr: st.marked_cbr,
        redo: None,
        parts: Vec::new(),
    })
}

impl<'i, 's, 't, 'f> ChunkDecoder<'i, 's, 't, 'f> {
    /// Gives the op vectors of its runs, finished and current, back to
    /// the pool: a decode that is not kept.
    fn give_back_runs(&mut self) {
        for r in self.runs.drain(..).chain(self.run.take()) {
            self.pool.give(r.ops);
        }
    }

    /// The decoder of the chunk `meta` in `bytes` (see [`decode_fast`]),
    /// decoded as `how` says; `next`: the next chunk and its bytes, where
    /// it warms up; `held_listing`: the listing is held until the chunk
    /// is decoded whole.
    fn new(
        images: &'i WorkerImages<'s, 't>,
        pool: &'i OpPool,
        (meta, bytes, next): (ChunkMeta, &'i [u8], NextBytes<'i>),
        how: How,
        flush: Option<&'f mut dyn FnMut(Piece)>,
        held_listing: bool,
    ) -> Self {
        let setup = images.setup;
        let bound = op_bound(setup, &meta);
        // With a flush, the bound is where the runs are handed on. A listing
        // held back counts with the ops, up to LIST_HELD.
        let (op_bound, flush_ops) = match flush {
            Some(_) => (usize::MAX, bound.min(FLUSH_OPS)),
            None if held_listing => (bound.min(LIST_HELD), usize::MAX),
            None => (bound, usize::MAX),
        };
        let time = meta.start_time.unwrap_or(0);
        ChunkDecoder {
            images,
            bytes,
            cfg: setup.pt_config(),
            pool,
            meta,
            runs: Vec::new(),
            run: None,
            ctx: Context::of(meta.owner, setup),
            pending: Pending::default(),
            marks_at: None,
            need_enable: true,
            last_ip: 0,
            edges: Edges::new(meta.warmup, meta.len, meta.last),
            emu: Default::default(),
            marked_cbr: None,
            sync_cbr: None,
            held_cbr: None,
            psb_ip_insns: None,
            at_start: true,
            sync_task: None,
            open: false,
            stall: Stall::default(),
            last_error_offset: None,
            next_chunk_error: None,
            clock: Clock::new(time, setup.cycles),
            lost_first: meta.after_loss,
            flush,
            op_bound,
            flush_ops,
            runs_ops: 0,
            over_bound: false,
            continued: None,
            flush_wait: None,
            listing: setup.opts.insn_list.is_some(),
            cycles: setup.cycles,
            stats: ChunkStats {
                bytes: meta.len,
                fast: u64::from(how != How::Libipt),
                ..ChunkStats::default()
            },
            end: setup.opts.end.map(|e| e.saturating_add(setup.switch_slack)),
            list_buf: held_listing.then(Default::default),
            list_off: how == How::Dry,
            list_over: Default::default(),
            fell_back: how == How::Libipt && setup.opts.decoder == DecoderKind::Fast,
            next,
            probe: None,
        }
    }
}

/// The decoder of one chunk: libipt's block decoder and what ptdec tracks
/// around it.
struct ChunkDecoder<'i, 's, 't, 'f> {
    images: &'i WorkerImages<'s, 't>,
    /// The bytes the decoder reads, and libipt's configuration (to find
    /// the PSB after one whose PSB+ cannot be read).
    bytes: &'i [u8],
    cfg: PtConfig,
    pool: &'i OpPool,
    meta: ChunkMeta,
    /// Runs finished so far, and the current one.
    runs: Vec<Run>,
    run: Option<Run>,
    /// Who runs on the buffer, and whose code the decoder sees.
    ctx: Context<'i>,
    pending: Pending,
    /// Where in the current run the marks made while a transfer was
    /// pending start ([`ChunkDecoder::resolve_before_marks`]).
    marks_at: Option<usize>,
    /// After a sync: the first block starts a traced stretch.
    need_enable: bool,
    last_ip: u64,
    /// Where the decode is between the chunk's edges: the warm-up, the
    /// chunk's first IP and the next chunk's (see [`decode_fast`]).
    edges: Edges,
    /// Where an emulated ptwrite being walked is (`crate::events`).
    emu: crate::events::EmuState,
    /// The core:bus ratio of the last CBR mark.
    marked_cbr: Option<u16>,
    /// See [`ChunkOutput::sync_cbr`].
    sync_cbr: Option<u16>,
    /// A CBR restated by a PSB+ decoded through, not marked yet
    /// ([`ChunkDecoder::release_cbr`]).
    held_cbr: Option<EventKind>,
    /// `stats.insns` at the last status update bound to an IP (a
    /// MODE.Exec's, not an enable's, which comes before the walk to
    /// it): the decoder is at the IP of a PSB+ while it is the same.
    psb_ip_insns: Option<u64>,
    /// Nothing has been decoded yet (the first enable is the sync's).
    at_start: bool,
    /// See [`ChunkOutput::sync_task`].
    sync_task: Option<TaskId>,
    /// Tracing was on at the end (set by `finish`).
    open: bool,
    /// Instructions since the trace offset last moved.
    stall: Stall,
    /// Where the last error was (a second one there skips to the next PSB).
    last_error_offset: Option<u64>,
    /// The first error of a decoder synchronized at the next chunk's PSB
    /// and its offset, once asked ([`ChunkDecoder::next_chunk_meets`]):
    /// the same for every error this chunk meets, so looked for once.
    next_chunk_error: Option<Option<(PtError, u64)>>,
    /// The decoder's TSC and perf time, the CBR, the cycles.
    clock: Clock,
    /// The segment follows lost data: the first run starts with a gap.
    lost_first: bool,
    stats: ChunkStats,
    /// Decoding stops past this perf time (`--start/--duration`).
    end: Option<u64>,
    /// Where runs go when they hold `flush_ops` ops (see
    /// [`decode_by_libipt`]).
    flush: Option<&'f mut dyn FnMut(Piece)>,
    flush_ops: usize,
    /// Past this many ops held (in `runs` and `run`) decoding stops, the
    /// chunk over its bound (`over_bound`; `usize::MAX` with a flush).
    op_bound: usize,
    /// Ops in `runs`.
    runs_ops: usize,
    over_bound: bool,
    /// `Some`: the current run goes on from one a flush handed on, its
    /// counters starting at that one's last op: whether the op was a
    /// disable or gap, and its time (as `switch_to` and `finish` ask of
    /// the current run's last op).
    continued: Option<(bool, u64)>,
    /// The current run's ops were all the stall's at this trace offset
    /// when a flush was due: none is handed on before the stall ends.
    flush_wait: Option<Option<u64>>,
    /// Listing items held until the chunk's decode is kept (fast decoder),
    /// and whether more came than the op bound (`op_bound`) lets it hold.
    list_buf: Option<std::cell::RefCell<Vec<ListItem>>>,
    list_over: std::cell::Cell<bool>,
    /// No listing: a dry run (`How::Dry`).
    list_off: bool,
    /// libipt decodes this chunk because the fast decoder, the one asked
    /// for, gave it up (what an error message says to do differs).
    fell_back: bool,
    /// The setup's `opts.insn_list.is_some()` and `cycles`, asked per
    /// block (the chunk decoder asks these fields, not the setup): kept
    /// here, next to the rest of the per-block state. Behind three
    /// pointers they were read back from cache lines the ops written
    /// since had pushed out (perf annotate, `ptdec report` of the bench's
    /// interp trace on one core: a ninth of the decode worker's samples
    /// on that test).
    listing: bool,
    cycles: bool,
    /// The next chunk and its bytes, where it warms up ([`ChunkMeta::next`]).
    next: NextBytes<'i>,
    /// This decoder is the next chunk's, run by the chunk before it
    /// ([`ChunkDecoder::next_chunk_meets`]): `Some(None)` until it meets an
    /// error past its warm-up, then that error and its offset, and
    /// decoding stops.
    probe: Option<Option<(PtError, u64)>>,
}

enum Flow {
    Continue,
    Stop,
}

/// The chunk decoder as the fast decoder's [`Follow`], with the counts
/// it notes once after `follow`: the last block's end and the
/// instructions.
/// With `W`, it takes walks (`ptflow::walk`): where no flush can come
/// between blocks.
struct Following<'c, 'i, 's, 't, 'f, const W: bool> {
    chunk: &'c mut ChunkDecoder<'i, 's, 't, 'f>,
    last_end: u64,
    insns: u64,
}

impl<const W: bool> Follow for Following<'_, '_, '_, '_, '_, W> {
    #[inline(always)]
    fn moved(&mut self, (tsc, _, _): (u64, u32, u32), offset: Option<u64>) {
        self.chunk.followed_moved(tsc, offset);
    }

    #[inline(always)]
    fn block(&mut self, b: &Block) -> bool {
        self.last_end = b.end_ip;
        self.insns += u64::from(b.ninsn);
        self.chunk.on_followed(b)
    }

    const WALKS: bool = W;

    #[inline(always)]
    fn walk(&mut self, w: &Walk, _: &ptflow::code::CodeCache) -> Option<bool> {
        if !self.chunk.walk_fits(w) {
            return None;
        }
        self.last_end = w.last_end;
        self.insns += w.insns;
        Some(self.chunk.on_walk(w))
    }
}

impl<'i, 's, 't> ChunkDecoder<'i, 's, 't, '_> {
    fn setup(&self) -> &DecodeSetup<'_> {
        self.images.setup
    }

    /// The block's instructions, as this worker reads them.
    #[inline(always)]
    fn insns(&self) -> Insns<'i, 's, 't> {
        Insns(self.images)
    }

    fn run_decoder(&mut self, dec: &mut impl FlowDecoder) {
        let mut last_sync: Option<u64> = None;
        let mut status = match self.sync(dec, &mut last_sync) {
            Some(s) => s,
            None => {
                self.stats.ends_unsynced = !self.edges.warming;
                return;
            }
        };
        // Written in place by the decoder (`FlowDecoder::next_block`).
        let mut blk = Block::default();
        'blocks: loop {
            let failure = 'step: {
                let events = status.event_pending();
                while status.event_pending() {
                    match dec.event() {
                        Ok((ev, s)) => {
                            // Past the next chunk's PSB+: that chunk's.
                            if self.edges.at_boundary && !ev.status_update() {
                                return;
                            }
                            status = s;
                            if self.edges.warming && !self.warmed_up(dec, &ev) {
                                if let EventKind::Enabled { .. } = ev.kind() {
                                    self.warm_up_image(dec, &ev);
                                }
                                continue;
                            }
                            self.update_time(dec, ev.tsc());
                            let notes = self.on_sideband(dec, &ev);
                            if self.at_next_chunk(dec, &ev) {
                                self.list_notes(notes);
                                return;
                            }
                            if let EventKind::Overflow { .. } = ev.kind() {
                                if self.overflow_at_an_edge(dec) {
                                    self.list_notes(notes);
                                    return;
                                }
                            }
                            if self.edges.stop_at.is_none() {
                                self.on_event(dec, &ev);
                            }
                            // As ptxed: the event's line, then the sideband's.
                            self.list_notes(notes);
                        }
                        Err(e) => break 'step Failure::Pt(e),
                    }
                }
                // Synchronized at the next chunk's PSB after an error: its
                // status updates were taken; the rest is the next chunk's.
                if self.edges.at_boundary {
                    return;
                }
                // The end of the trace: libipt would otherwise follow the
                // code after the last packet until it needs one.
                if status.eos() {
                    if !status.ip_suppressed() {
                        self.list(ListItem::EndOfTrace);
                    }
                    return;
                }
                // Events may have started or ended the stretch in which
                // the decoder may follow blocks.
                if events {
                    self.update_follow(dec);
                }
                // The commonest blocks, where the decoder may follow
                // them: in its own loop, each with what `on_block` and
                // `check_progress` do to it. (Each has `Status(0)`, as
                // `status` is now.)
                // The blocks and their instructions are counted, and the
                // last one's end noted, once after: the count is
                // `follow`'s, the instructions and the end are kept in
                // locals (three updates of `self` a block less in the
                // loop), and the stall's maximum is noted where a stall
                // ends and once after.
                let (followed, last_end, insns) = if self.flush.is_none() {
                    let mut f = Following::<true> {
                        chunk: self,
                        last_end: 0,
                        insns: 0,
                    };
                    (dec.follow(&mut blk, &mut f), f.last_end, f.insns)
                } else {
                    let mut f = Following::<false> {
                        chunk: self,
                        last_end: 0,
                        insns: 0,
                    };
                    (dec.follow(&mut blk, &mut f), f.last_end, f.insns)
                };
                if followed > 0 {
                    self.stats.blocks += u64::from(followed);
                    self.stats.insns += insns;
                    self.last_ip = last_end;
                    self.stats.max_stall = self.stats.max_stall.max(self.stall.insns);
                    if self.stall.insns > NO_PROGRESS_INSNS {
                        break 'step Failure::NoProgress(self.stall.insns);
                    }
                }
                // libipt fills in the instructions it decoded before an
                // error, so the block counts whatever the status.
                let next = dec.next_block(&mut blk);
                if blk.ninsn > 0 && !self.edges.warming {
                    self.block_time(dec);
                    if let Flow::Stop = self.on_block(dec, &blk) {
                        return;
                    }
                }
                match next {
                    Ok(s) => {
                        status = s;
                        match self.check_progress(dec, blk.ninsn) {
                            Some(n) => Failure::NoProgress(n),
                            None => continue 'blocks,
                        }
                    }
                    Err(e) => Failure::Pt(e),
                }
            };
            if failure == Failure::Pt(PtError::EOS) {
                return;
            }
            // The next chunk's decoder, run by the chunk before: its first
            // error past the warm-up is the answer.
            if let (Some(None), false, Failure::Pt(e)) = (self.probe, self.edges.warming, failure) {
                // An offset the decoder cannot tell matches no error.
                self.probe = Some(dec.offset().ok().map(|at| (e, at)));
                return;
            }
            // A packet that cannot be read (BAD_OPC, BAD_PACKET), met while
            // walking to the next chunk's first IP, after its PSB+ was
            // read: that chunk's packet, which it meets too, from its own
            // sync (libipt reads the packet after a PSB+ before it hands
            // out the block at the PSB's IP: a CBR of ratio 0 right after
            // PSBEND). Its gap is that chunk's, as one decoder running
            // through makes one: this chunk ends there. Not an error the
            // decoder's state makes (a query the packet does not answer,
            // code without an image on the walk), which that chunk,
            // synchronized afresh, may not meet. (ptflow also makes a
            // BAD_PACKET of its state, a suppressed TIP at an indirect
            // branch or a TRIG without an anchor; a review found neither
            // reachable here: a walk that needs a packet past a PSB+ fails
            // at PSBEND with BAD_QUERY first.)
            // Any other error met there (an enable without an IP right
            // after PSBEND) is that chunk's too where a decoder
            // synchronized at its PSB meets it at the same offset, before
            // any block: it makes the gap; this chunk ends.
            if let (Some(_), Failure::Pt(e)) = (self.edges.stop_at, failure) {
                if e == PtError::BAD_OPC
                    || e == PtError::BAD_PACKET
                    || (e != PtError::NOMAP && self.next_chunk_meets(dec, e))
                {
                    return;
                }
            }
            match self.recover(dec, failure, &mut last_sync) {
                Some(s) => status = s,
                None => {
                    self.stats.ends_unsynced = !self.edges.warming;
                    return;
                }
            }
        }
    }

    /// Whether the next chunk's decoder meets error `e` at the offset
    /// `dec` met it. Cold: only an error while walking to the next chunk's
    /// first IP asks, and the answer is kept for this decode of the chunk
    /// (a chunk decoded again asks again): a hostile trace may hold many
    /// errors there, and a long run of events after the PSB+ to read
    /// again for each.
    ///
    /// Without a warm-up (no CYC) the next chunk's decoder synchronizes at
    /// its PSB (where this one ends): the answer is whether one
    /// synchronized there meets `e` at that offset among that PSB+'s
    /// status updates and the events right after them.
    ///
    /// Where the next chunk warms up (with CYC), its decoder is not one
    /// synchronized afresh: it reads from a PSB before, through this
    /// chunk's last bytes, and carries its state over the PSB as this
    /// chunk's decoder does, so it may meet an error that a fresh one does
    /// not (a PSB+ copied from elsewhere, whose IP is not where the flow
    /// is). Then the next chunk's decoder is run as it is run
    /// ([`probe_next`]), from its warm-up's start (the job's bytes begin
    /// there where it is earlier than this chunk's: `ChunkMeta::lead`) up
    /// to where this chunk's reading ends, and its first error past its
    /// warm-up, after blocks or not, is the answer; where its warm-up
    /// fails, the next chunk is decoded without one, and a fresh decoder
    /// answers as without CYC. Asking a fresh decoder there made the gap
    /// twice at small chunk sizes, once by each chunk.
    #[cold]
    #[inline(never)]
    fn next_chunk_meets(&mut self, dec: &impl FlowDecoder, e: PtError) -> bool {
        let Ok(at) = dec.offset() else {
            return false;
        };
        let psb = self.meta.warmup + self.meta.len;
        let (images, pool, next, meta) = (self.images, self.pool, self.next, self.meta);
        let first = *self.next_chunk_error.get_or_insert_with(|| {
            // The next chunk's offsets from its warm-up's start, made this
            // chunk's.
            let warm = next.and_then(|(n, bytes)| {
                let first = probe_next(images, pool, (meta, n, bytes))?;
                Some(first.and_then(|(e, o)| Some((e, o.checked_sub(n.warmup)?.checked_add(psb)?))))
            });
            warm.unwrap_or_else(|| dec.error_after_psb(&self.cfg, self.bytes, psb))
        });
        first == Some((e, at))
    }

    /// An overflow read between a PSB+ and its IP (the decoder hands the
    /// PSB+'s status update out as it reads it, before its decode has got
    /// to that IP, and the packets that would take it there were lost):
    /// the decode never gets to that IP, and goes on where the trace
    /// resumes. So the edge between the chunks is the overflow: walking
    /// to the next chunk's first IP, this chunk stops there (`true`: the
    /// overflow is the next chunk's); the next chunk, warmed up and
    /// waiting for that IP, starts at the overflow. A sound ptsim trace
    /// whose overflows lose instructions had a PSB+ right before an OVF:
    /// the chunk before walked on from where the trace resumed, the next
    /// chunk still waited for its first IP, and the chunk size changed
    /// the output.
    #[cold]
    fn overflow_at_an_edge(&mut self, dec: &mut impl FlowDecoder) -> bool {
        if self.edges.stop_at.is_some() {
            return true;
        }
        if self.edges.start_at.take().is_some() {
            self.update_follow(dec);
        }
        false
    }

    /// Decoder offsets less the warm-up: offsets in the chunk.
    fn offset(&self, dec: &impl FlowDecoder) -> Option<u64> {
        dec.offset().ok().map(|o| self.edges.in_chunk(o))
    }

    /// During the warm-up: whether `ev` belongs to the chunk
    /// ([`Edges::warmed_up`]). When the warm-up ends, the chunk starts at
    /// its PSB, reached without a sync of its own.
    fn warmed_up(&mut self, dec: &impl FlowDecoder, ev: &PtEvent) -> bool {
        if !self
            .edges
            .warmed_up(ev.status_update(), dec.offset().ok(), &ev.kind())
        {
            return false;
        }
        self.stats.start_sync |= !self.edges.warming;
        self.drop_pending();
        true
    }

    /// In the warm-up, tracing is on from `ev`: the decoder gets the image
    /// of the task running then, to walk the warm-up's code with. Without
    /// one every warm-up met NOMAP at its first block, and every chunk
    /// was decoded again without it, starting uncalibrated: where the CBR
    /// changes, the times near a chunk's start followed the chunk size.
    /// No run is started and nothing is noted: the chunk's own enable
    /// picks its task again.
    ///
    /// The task and the image's time are picked as `enable` picks them
    /// (`task_enabled_at`, `image_time_enabled`). The clock does not move
    /// in the warm-up: the time is the event's.
    #[cold]
    fn warm_up_image(&mut self, dec: &mut impl FlowDecoder, ev: &PtEvent) {
        let (EventKind::Enabled { ip, .. }, Some(now)) = (ev.kind(), ev.tsc()) else {
            return;
        };
        if now == 0 || now == u64::MAX {
            return;
        }
        let now = self.images.setup.perf_time(now);
        let task = self.ctx.task;
        self.ctx.task = self.task_enabled_at(now, ev.status_update());
        let image_t = self.image_time_enabled(ip, now);
        self.refresh_image(dec, image_t);
        self.ctx.task = task;
    }

    /// Whether `ev` says the next chunk's PSB+ was read with tracing off:
    /// then decoding stops ([`Edges::at_next_chunk`]). Events after it
    /// belong to the next chunk.
    ///
    /// Once it says where the next chunk starts, this chunk walks there
    /// and its cycles stop ([`Clock::cycles_wait`]): the next chunk counts
    /// the TSC's steps from its PSB+'s TSC on, whatever its decoder (warmed
    /// up or synchronized there), and every path that ends a chunk at the
    /// next one's PSB+ (walked to its first IP, stopped at its status
    /// update, synchronized there after an error) has counted up to that
    /// TSC and no further. Counted by both, a thread's cycles after a
    /// chunk edge were too many by the steps of the walk (the block at the
    /// next chunk's first IP, whose time is read after it: 4 cycles on 10
    /// calls of a ptsim trace at chunks of one PSB interval, and on every
    /// call around them).
    fn at_next_chunk(&mut self, dec: &impl FlowDecoder, ev: &PtEvent) -> bool {
        let stop = self.edges.at_next_chunk(
            ev.status_update(),
            dec.offset().ok(),
            &ev.kind(),
            self.need_enable,
        );
        self.clock.cycles_wait |= self.edges.stop_at.is_some();
        stop
    }

    /// How many of `b`'s instructions come before `ip` (`None`: `ip` is not
    /// one of them).
    fn insns_before(&self, b: &Block, ip: u64) -> Option<u16> {
        let mut at = b.ip;
        for n in 0..b.ninsn {
            if at == ip {
                return Some(n);
            }
            at = self.insns().insn_at(b, at)?.next_ip();
        }
        None
    }

    /// Tells the decoder whether it may follow blocks in its own loop
    /// from here (`FlowDecoder::set_follow`, with
    /// [`ChunkDecoder::on_followed`] at each block): only where
    /// [`ChunkDecoder::on_block`] does nothing at a block in user code
    /// but count it and note its transfer. So not while the chunk's
    /// first IP or the next chunk's is looked for inside blocks, nor in
    /// the warm-up, nor before the first block of a traced stretch (its
    /// enable comes first), nor with an end time (decoding stops past
    /// it), nor for an instruction listing, nor where emulated ptwrite is
    /// followed block by block.
    fn update_follow(&self, dec: &mut impl FlowDecoder) {
        dec.set_follow(
            !self.listing
                && self.images.emu.is_empty()
                && self.end.is_none()
                && !self.need_enable
                && !self.edges.watching(),
        );
    }

    /// Moves the clock to `tsc` (an event's), or to the decoder's time.
    /// Out of line: inlined, it made the decode loop around it slower
    /// (bench/RESULTS.md, 2026-12-04, twenty-second session).
    #[inline(never)]
    fn update_time(&mut self, dec: &mut impl FlowDecoder, tsc: Option<u64>) {
        let tsc = match tsc {
            Some(t) => t,
            None => match dec.time() {
                Ok((t, _, _)) => t,
                Err(_) => return,
            },
        };
        self.set_tsc(tsc);
    }

    /// [`ChunkDecoder::update_time`] to the decoder's time after a block:
    /// the call only when the time moved. Most blocks come between the
    /// same two timing packets: a call for each cost 1.2% of `ptdec
    /// report`'s instructions on the bench's interp trace, 1.5% on
    /// shapes (cachegrind).
    #[inline(always)]
    fn block_time(&mut self, dec: &mut impl FlowDecoder) {
        if let Ok((tsc, _, _)) = dec.time() {
            if tsc != self.clock.tsc {
                self.update_time(dec, Some(tsc));
            }
        }
    }

    /// [`ChunkDecoder::update_time`] to the decoder's TSC `tsc`.
    #[inline(always)]
    fn set_tsc(&mut self, tsc: u64) {
        let setup = self.images.setup;
        let cycles = self
            .clock
            .set_tsc(tsc, setup.max_non_turbo, |t| setup.perf_time(t));
        if let (Some(d), Some(run)) = (cycles, self.run.as_mut()) {
            run.cycles += d;
        }
    }

    fn stamp(&self) -> Stamp {
        let run = self.run.as_ref();
        Stamp {
            time: self.clock.time,
            insns: run.map_or(0, |r| r.insns),
            cycles: self.cycles.then(|| run.map_or(0, |r| r.cycles)).into(),
        }
    }

    fn push(&mut self, op: Op) {
        if let Some(r) = self.run.as_mut() {
            r.push(op);
        }
    }

    fn gap(&mut self, kind: GapKind, offset: u64) {
        self.emu = Default::default();
        let at = self.stamp();
        self.push(Op::Gap {
            at,
            kind,
            offset: self.meta.aux_offset + offset,
        });
    }

    /// A pending transfer completes at `to`, or is dropped (`None`).
    /// Always inline: with the jumps' test (`Run::push_jump`) LLVM left it
    /// out of line, and the call per transfer cost more than that test
    /// (434 M of `ptdec report`'s instructions on the bench's shapes).
    #[inline(always)]
    fn resolve(&mut self, to: Option<u64>) {
        if !std::mem::take(&mut self.pending.set) {
            return;
        }
        if self.marks_at.is_some() {
            return self.resolve_before_marks(to);
        }
        self.push_pending(to);
    }

    /// The pending transfer's op, to `to` (none for `None`).
    #[inline(always)]
    fn push_pending(&mut self, to: Option<u64>) {
        let Some(to) = to else {
            return;
        };
        let Some(r) = self.run.as_mut() else {
            return;
        };
        match (&self.images.places, self.pending.kind) {
            (Some(places), Transfer::Jump) => {
                r.push_jump(&self.pending, to, places, self.images.keep_quiet)
            }
            _ => r.push_transfer(&self.pending, to, false),
        }
    }

    /// [`ChunkDecoder::resolve`] where marks were made while the
    /// transfer was pending (`marks_at`): its branch was taken before
    /// them, so its op goes before them. Events come after the block
    /// whose last instruction the branch is; a chunk cut at a PSB between
    /// the two hands out the transfer with the chunk before, the PSB+'s
    /// status updates (a CBR restated) with the next: one chunk put the
    /// mark first, and time spread up to it changed with the chunk size.
    #[cold]
    #[inline(never)]
    fn resolve_before_marks(&mut self, to: Option<u64>) {
        let at = self.marks_at.take().unwrap_or(usize::MAX);
        let marks = match self.run.as_mut() {
            Some(r) if at < r.ops.len() && to.is_some() => {
                let marks = r.ops.split_off(at);
                r.tally.n = at;
                marks
            }
            _ => Vec::new(),
        };
        self.push_pending(to);
        if let Some(r) = self.run.as_mut() {
            for m in marks {
                r.push(m);
            }
        }
    }

    /// The transfer pending is dropped, not resolved: the marks made
    /// while it was pending stay where they are.
    fn drop_pending(&mut self) {
        self.pending.set = false;
        self.marks_at = None;
    }

    fn on_block(&mut self, dec: &mut impl FlowDecoder, b: &Block) -> Flow {
        if b.ninsn == 0 {
            return Flow::Continue;
        }
        if self.end.is_some_and(|e| self.clock.time > e) {
            return Flow::Stop;
        }
        // After a warm-up: what comes before the chunk's first IP is the
        // previous chunk's.
        // Copied only where it changes (a copy per block showed in the
        // profile: 5% of the one-core run).
        let mut cut: Block;
        let mut b = b;
        if let Some(x) = self.edges.start_at {
            match self.insns_before(b, x) {
                Some(n) => {
                    self.edges.start_at = None;
                    self.update_follow(dec);
                    cut = *b;
                    cut.ninsn -= n;
                    cut.ip = x;
                    b = &cut;
                }
                None => return Flow::Continue,
            }
        }
        self.resolve(Some(b.ip));
        self.at_start = false;
        self.maybe_flush();
        // The next chunk starts at `stop_at`: count what comes before it.
        let mut stop = false;
        if let Some(x) = self.edges.stop_at {
            match self.insns_before(b, x) {
                Some(0) => return Flow::Stop,
                Some(n) => {
                    cut = *b;
                    cut.ninsn = n;
                    b = &cut;
                    stop = true;
                }
                None => {}
            }
        }
        if self.need_enable {
            self.enable(dec, b.ip, false);
        }
        if is_kernel_ip(b.ip) {
            // Kernel code: a due context switch or image change applies here.
            if self.clock.time >= self.ctx.next_switch {
                let task = self.task_at(self.clock.time);
                self.switch_to(task, b.ip);
                if self.ctx.task.is_some() {
                    let at = self.stamp();
                    self.push(Op::Enabled {
                        at,
                        ip: b.ip,
                        first: false,
                    });
                }
                self.refresh_image(dec, self.clock.time);
            } else if self.clock.time >= self.ctx.image_until() {
                self.refresh_image(dec, self.clock.time);
            }
        }
        if self.listing {
            self.list_block(b);
        }
        self.count_block(b);
        if let Some(mark) = self.images.emu.on_block(&mut self.emu, b.ip, b.end_ip) {
            let at = self.stamp();
            self.push(Op::Mark {
                at,
                mark: Box::new(mark),
            });
        }
        if stop {
            return Flow::Stop;
        }
        self.note_transfer(b);
        Flow::Continue
    }

    /// What [`ChunkDecoder::on_block`] and then
    /// [`ChunkDecoder::check_progress`] do to a block the decoder
    /// followed in its own loop ([`FlowDecoder::follow`]): the decoder
    /// follows only where `update_follow` lets it (no end time, no chunk
    /// edge looked for inside blocks, no enable due, no listing, no
    /// emulated ptwrite, not warming up) and only in user code (no
    /// context switch or image change can be due), so the rest of
    /// `on_block` does nothing there. Whether to go on: not once more than
    /// [`NO_PROGRESS_INSNS`] instructions were decoded without progress
    /// (the caller then stops as `check_progress` says). The block count,
    /// the instructions' in the chunk's stats, the last block's end
    /// (`last_ip`) and the stall's maximum at the end are the caller's to
    /// note, once after `follow`.
    ///
    /// The time and the trace offset after the block are what
    /// [`ChunkDecoder::followed_moved`] was last told: the decoder tells
    /// them before the first block and before a block for which it read
    /// a packet, not at every block (compared at every block, as
    /// `Option`s, they cost the real LLDB row's 202 M blocks 1.6 G
    /// instructions, more than following the blocks that read a packet
    /// saved there).
    #[inline(always)]
    fn on_followed(&mut self, b: &Block) -> bool {
        debug_assert!(b.ninsn > 0 && !is_kernel_ip(b.ip) && !self.at_start);
        self.resolve(Some(b.ip));
        self.maybe_flush();
        self.count_run_insns(b);
        self.note_followed_transfer(b);
        self.stall.insns += u64::from(b.ninsn);
        self.stall.insns <= NO_PROGRESS_INSNS
    }

    /// Whether walk `w` can be taken whole ([`ChunkDecoder::on_walk`]):
    /// no block of it would end the follow (the stall's bound). (Walks
    /// are offered only where no flush can come between blocks:
    /// `Following`.)
    #[inline(always)]
    fn walk_fits(&self, w: &Walk) -> bool {
        debug_assert!(self.flush.is_none());
        self.stall.insns + w.insns <= NO_PROGRESS_INSNS
    }

    /// [`ChunkDecoder::on_followed`] for each block of walk `w`, at once:
    /// the transfer pending before it completes at its first block, its
    /// direct jumps are pending in turn and complete at their targets
    /// (the last one, if it ends the walk, at the block after it), and
    /// its instructions count where they did, each jump's stamp taken
    /// after its own block. Its conditional branches make no op.
    #[inline(always)]
    fn on_walk(&mut self, w: &Walk) -> bool {
        debug_assert!(!self.at_start && self.walk_fits(w));
        self.resolve(Some(w.first_ip));
        let mut counted = 0;
        for j in w.jumps() {
            self.count_run_insns_n(u64::from(j.insns) - counted);
            counted = u64::from(j.insns);
            self.pend(Transfer::Jump, j.from, 0);
            if counted < w.insns {
                self.resolve(Some(j.to));
            }
        }
        self.count_run_insns_n(w.insns - counted);
        self.stall.insns += w.insns;
        true
    }

    /// What [`ChunkDecoder::block_time`] and `check_progress` do before a
    /// followed block, told before the first one of a `follow` and
    /// before each one for which the decoder read a packet: its time
    /// `tsc`, and the trace offset `off` after it, where a new stall
    /// starts (the one that ends there counts in its maximum). (Before
    /// the block's ops, not after as `check_progress` is: a flush,
    /// which only a one-chunk decode makes, then cuts the run before the
    /// new stall rather than the old one, and the chunk's op bound
    /// (`stall_at`) is asked before the block's op is counted, so it may
    /// be found passed one move of the offset later; neither shows in
    /// the output.) `at_start` is false from there.
    #[inline(always)]
    fn followed_moved(&mut self, tsc: u64, off: Option<u64>) {
        debug_assert!(
            !self.edges.warming && !self.need_enable && !self.listing && self.end.is_none()
        );
        debug_assert!(!self.edges.watching());
        self.at_start = false;
        if tsc != self.clock.tsc {
            self.followed_time(tsc);
        }
        if off != self.stall.offset {
            self.stats.max_stall = self.stats.max_stall.max(self.stall.insns);
            self.stall_at(off);
        }
    }

    /// [`ChunkDecoder::followed_moved`] where the time moved.
    #[inline(never)]
    fn followed_time(&mut self, tsc: u64) {
        self.set_tsc(tsc);
    }

    /// Counts block `b`'s instructions; its end is the last IP.
    #[inline(always)]
    fn count_block(&mut self, b: &Block) {
        self.stats.blocks += 1;
        self.stats.insns += u64::from(b.ninsn);
        self.count_run_insns(b);
        self.last_ip = b.end_ip;
    }

    /// Block `b`'s instructions in the current run's count (or, with
    /// none, the chunk's unattributed ones): [`ChunkDecoder::count_block`]
    /// but for the chunk's counts and the last IP, which a followed
    /// block's caller notes once, after `follow`.
    #[inline(always)]
    fn count_run_insns(&mut self, b: &Block) {
        self.count_run_insns_n(u64::from(b.ninsn));
    }

    /// Counts `n` instructions of followed blocks.
    #[inline(always)]
    fn count_run_insns_n(&mut self, n: u64) {
        match self.run.as_mut() {
            Some(r) => r.insns += n,
            None => self.stats.unattributed_insns += n,
        }
    }

    /// The transfer `b`'s last instruction makes, if any, pending until
    /// the next block says where it went.
    #[inline(always)]
    fn note_transfer(&mut self, b: &Block) {
        let kind = self.insns().classify(b);
        if let Some(kind) = kind {
            let ret = match kind {
                Transfer::Call => b.end_ip + self.insns().last_len(b).map_or(0, u64::from),
                _ => 0,
            };
            self.pend(kind, b.end_ip, ret);
        }
    }

    /// [`ChunkDecoder::note_transfer`] for a block the fast decoder
    /// followed ([`Transfer::of_followed`]: its class says what it does,
    /// and the decoder gave the call's length). Through `note_transfer`,
    /// whose lookups for the other classes take a copy of the block,
    /// every field of every followed block was computed: 0.7% of `ptdec
    /// report`'s instructions on the bench's interp trace, 1.2% on
    /// shapes (cachegrind).
    #[inline(always)]
    fn note_followed_transfer(&mut self, b: &Block) {
        if let Some(kind) = Transfer::of_followed(b) {
            let ret = match kind {
                Transfer::Call => b.end_ip + u64::from(b.size),
                _ => 0,
            };
            self.pend(kind, b.end_ip, ret);
        }
    }

    /// A transfer of `kind` at `from` is pending (a call's return
    /// address `ret`), until the next block says where it went.
    #[inline(always)]
    fn pend(&mut self, kind: Transfer, from: u64, ret: u64) {
        self.pending = Pending {
            set: true,
            kind,
            at: self.stamp(),
            from,
            ret,
        };
    }

    /// Hands the runs to [`ChunkDecoder::flush`] when they hold
    /// [`FLUSH_OPS`] ops, between blocks, with no transfer pending (its
    /// stamp counts from the current run's start); the current run goes on
    /// in a new one.
    #[inline]
    fn maybe_flush(&mut self) {
        // Inline and first: a chunk decoded without a flush (all but
        // `ptdec raw`'s one long chunk) pays one test per block (the call
        // showed as 1.5% of the instructions of `ptdec -j1`).
        if self.flush.is_some() {
            self.flush_if_full();
        }
    }

    /// [`ChunkDecoder::maybe_flush`] where there is a flush.
    ///
    /// Out of line: the decode workers' chunks have no flush, and this
    /// beside them in the decoder's loop made it dearer.
    ///
    /// Not the ops the current stall made: a stall that reaches the
    /// no-progress bound drops them (`drop_stall_ops`), which it could not
    /// do once they were handed on. So the current run is cut after its
    /// last op before the stall: what comes before goes on, and a new run
    /// holds the rest, its counters starting there (its ops' stamps
    /// rebased to it), as a run a flush starts always does. The runs then
    /// hold at most `flush_ops` ops plus a stall's (at most
    /// [`NO_PROGRESS_INSNS`]). The new run keeps the start of the one it
    /// goes on from (the per-cpu runs' order), and what that one's last
    /// op was (`continued`, for [`ChunkDecoder::last_closed`]). Empty runs
    /// are not handed on, as `finish` drops them.
    #[cold]
    #[inline(never)]
    fn flush_if_full(&mut self) {
        if self.pending.set || self.edges.watching() {
            return;
        }
        if self.held_ops() < self.flush_ops || self.flush_wait == Some(self.stall.offset) {
            return;
        }
        let mut runs = std::mem::take(&mut self.runs);
        self.runs_ops = 0;
        if let Some(r) = self.run.as_mut() {
            let cut = recover::first_stall_op(r, self.stall.insns);
            if cut == 0 && !r.ops.is_empty() {
                // All the stall's: none goes on before it ends.
                self.flush_wait = Some(self.stall.offset);
            }
            // The new run's counters start at the last op handed on (so
            // that op's stamp is the new run's 0), and none starts before
            // an op goes on.
            if let Some(last) = cut.checked_sub(1).map(|i| r.ops[i].stamp()) {
                let (insns, cycles) = (last.insns, last.cycles.get().unwrap_or(0));
                let mut next = Run::new(r.task, r.start, self.pool.take());
                next.ops.extend(r.ops.drain(cut..));
                for op in &mut next.ops {
                    let s = op.stamp_mut();
                    s.insns -= insns;
                    s.cycles = s.cycles.get().map(|c| c.saturating_sub(cycles)).into();
                }
                (next.tail_insns, next.tail_cycles) = r.tail_after((insns, cycles));
                next.insns = r.insns - insns;
                next.cycles = r.cycles - cycles;
                r.insns = insns;
                r.cycles = cycles;
                if !next.ops.is_empty() {
                    // Counted as pushed into the run they left: the new
                    // run's counted afresh (more are pushed, and a stall
                    // may drop some), the one handed on counted again by
                    // the ordering stage.
                    let mut tally = Tally::default();
                    for (i, op) in next.ops.iter().enumerate() {
                        tally.add(i, op);
                    }
                    next.tally = tally;
                    r.tally.n = usize::MAX;
                }
                let r = std::mem::replace(r, next);
                self.continued = r.ops.last().map(|op| (is_closing(op), last.time));
                runs.push(r);
            }
        }
        let mut piece = Vec::with_capacity(runs.len());
        for r in runs {
            if r.ops.is_empty() && r.insns == 0 {
                self.pool.give(r.ops);
            } else {
                piece.push(r);
            }
        }
        if piece.is_empty() {
            return;
        }
        let (sync_task, sync_cbr) = (self.sync_task, self.sync_cbr);
        if let Some(f) = self.flush.as_mut() {
            f(Piece {
                runs: piece,
                sync_task,
                sync_cbr,
            });
        }
    }

    /// Whether run `r` (the current one) ends in a disable or gap, as one
    /// run of all that a flush handed on of it and `r` would (`None`: no
    /// op).
    pub(super) fn last_closed(&self, r: &Run) -> Option<bool> {
        match r.ops.last() {
            Some(op) => Some(is_closing(op)),
            None => self.continued.map(|c| c.0),
        }
    }

    /// Hands an item to the instruction listing, if one was asked for
    /// (held back while the fast decoder may still give the chunk up).
    fn list(&self, item: ListItem) {
        if self.list_off {
            return;
        }
        if let Some(f) = &self.setup().opts.insn_list {
            match &self.list_buf {
                // Held back, counted with the ops against the op bound
                // (at most LIST_HELD): past it, decoding stops
                // (`stall_at`) and the chunk is decoded again, its listing
                // handed on as it comes (`super::parts::decode_here`).
                Some(buf) => {
                    let mut buf = buf.borrow_mut();
                    if buf.len() < self.op_bound {
                        buf.push(item);
                    } else {
                        self.list_over.set(true);
                    }
                }
                None => (f.0)(&item),
            }
        }
    }

    /// Lists every instruction of `b` ([`Insns::each_ip`]).
    fn list_block(&self, b: &Block) {
        self.insns().each_ip(b, |ip| match ip {
            Ok(ip) => self.list(ListItem::Insn(ip)),
            Err(ip) => self.list(ListItem::Error {
                offset: 0,
                what: "reconstruct error",
                message: format!("cannot read the instruction at {ip:#x}"),
            }),
        });
    }

    fn finish(&mut self) {
        self.release_cbr();
        self.drop_pending();
        // The current run, where it goes on from one a flush handed on and
        // has no op of its own: that one's last op, at the new run's 0
        // (the run may be dropped below, as empty).
        let continued = self
            .run
            .as_ref()
            .filter(|r| r.ops.is_empty())
            .and_then(|r| self.continued.map(|c| (r.task, c)));
        // The run still going on, of the task on the buffer's CPU now.
        let current = self
            .run
            .as_ref()
            .is_some_and(|r| Some(r.task) == self.ctx.task);
        if let Some(r) = self.run.take() {
            self.runs.push(r);
        }
        if self.meta.before_loss {
            if let Some(r) = self.runs.last_mut() {
                let last = match (r.ops.last(), continued) {
                    (Some(op), _) => op.stamp(),
                    (None, Some((_, (_, t)))) => Stamp {
                        time: t,
                        ..Stamp::default()
                    },
                    (None, None) => Stamp {
                        time: self.clock.time,
                        ..Stamp::default()
                    },
                };
                // In the run still going on, at the last time the trace
                // tells before the loss, as any gap is made (a PSB+ or an
                // MTC may follow the last op, with tracing off), but not
                // past the task's next switch on that CPU (the decoder
                // switches runs only as it decodes): then the same for
                // any chunk size, where the chunk starting at a PSB+ read
                // with tracing off right before the loss has no op, only
                // that PSB+'s time; one decoder running through had put
                // the gap at its last op before it. A run already ended
                // keeps it at its last op.
                let at = match current {
                    true => Stamp {
                        time: self.clock.time.min(self.ctx.next_switch).max(last.time),
                        insns: r.insns,
                        cycles: self.cycles.then_some(r.cycles).into(),
                    },
                    false => last,
                };
                let offset = self.meta.aux_offset + self.meta.len;
                r.push(Op::Gap {
                    at,
                    kind: GapKind::LostData,
                    offset,
                });
                self.stats.lost_data += 1;
            }
        }
        self.runs.retain(|r| !r.ops.is_empty() || r.insns > 0);
        let open = !self.need_enable
            && !self.meta.before_loss
            && match continued {
                Some((task, (closed, _))) => Some(task) == self.ctx.task && !closed,
                None => self.runs.last().is_some_and(|r| {
                    Some(r.task) == self.ctx.task && !r.ops.last().is_some_and(is_closing)
                }),
            };
        self.open = open;
    }
}
