//! Decoding chunks on all cores ([`run`]) and delivering them in order.
//!
//! Workers (`DecodeOptions::jobs` threads, each with its own
//! [`WorkerImages`]) take chunks in delivery order from a shared counter and
//! decode them; the calling thread receives the results, puts them back in
//! order in a reorder buffer and hands each to `deliver` (the ordering
//! stage, call stacks and FTF writing run there, while the workers go on).
//! A worker may start chunk `k` only when `k < delivered + window` and the
//! chunks from the next one to deliver through `k` hold at most
//! [`Limits::bytes`] of trace (the next one always may start), so at most
//! `window` chunks and that many bytes are decoded and not yet delivered:
//! memory is bounded by the window, not by the trace. Nor may it start one
//! (but the next to deliver) while the chunks decoded and not delivered
//! hold [`Limits::ops`] ops, and it holds at most its share of that
//! (over the workers, with a floor) of the chunk it decodes, handing a
//! chunk past it to the calling thread to decode in pieces: so the ops
//! held stay within that budget plus a share a worker, whatever the
//! chunks make ([`super::MAX_OPS_IN_FLIGHT`]).
//!
//! # Priority
//!
//! Each worker runs at [`WORKER_NICE`] more than the process's nice value
//! ([`yield_to_delivery`]). The calling thread (ordering, call stacks) is
//! the one stage that cannot run on two cores at once, while the workers
//! decode ahead of it; with more runnable threads than CPUs (the workers,
//! it, the FTF writer and its encoders: always so at the default `-j`) the
//! scheduler's fair share kept it off a CPU while the workers filled the
//! window, and then left a CPU idle while the workers waited for it. At
//! nice +5 the workers take the CPU time it leaves: `ptdec -j2` on 2 CPUs,
//! 0.57 s against 0.54 s wall on the bench's 10 MB interp trace, `ptdec
//! report` 0.44 s against 0.40 s on shapes (medians of 9 and 7
//! interleaved runs); one core's time unchanged (1.00 s against 1.00 s).
//! On a machine busy with other programs, the workers yield to them a
//! little more too.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use super::chunk::ChunkOutput;
use super::chunks::Stream;
use super::parts::{decode_on_worker, panic_message, ChunkJob};
use super::runs::OpPool;
use super::setup::DecodeSetup;
use super::worker_images::WorkerImages;
use super::{DecodeError, ProgressFn};

/// How much lower a worker's priority is than the calling thread's (in
/// nice steps; the module doc says why).
const WORKER_NICE: i32 = 5;

/// Lowers the calling thread's priority by [`WORKER_NICE`] (on Linux the
/// nice value is each thread's own). Only a hint: where it fails (a
/// sandbox's seccomp filter) the worker runs at its usual priority.
fn yield_to_delivery() {
    let _ = rustix::process::nice(WORKER_NICE);
}

/// Decoded bytes of all chunks, for the progress callback.
pub(super) struct Progress<'a> {
    pub done: AtomicU64,
    pub total: u64,
    pub report: Option<&'a ProgressFn>,
}

impl Progress<'_> {
    pub(super) fn add(&self, n: u64) {
        let done = self.done.fetch_add(n, Ordering::Relaxed) + n;
        if let Some(f) = self.report {
            f(done.min(self.total), self.total);
        }
    }
}

/// What the workers share: the set-up, the segments' bytes, the chunks to
/// decode, the op vectors to reuse and the progress count.
pub(super) struct Shared<'a, 't> {
    pub setup: &'a DecodeSetup<'t>,
    pub streams: &'a [&'a Stream<'t>],
    pub jobs: &'a [ChunkJob],
    pub pool: &'a OpPool,
    pub progress: &'a Progress<'a>,
    /// Run on each run a worker decoded (per-thread buffers only).
    pub prepare: Option<&'a dyn crate::model::ops::Prepare>,
}

/// How many workers, and how far ahead of delivery they may decode.
pub(super) struct Limits {
    /// Worker threads.
    pub threads: usize,
    /// Chunks started and not yet delivered, at most.
    pub window: usize,
    /// Trace bytes of those chunks, at most (beyond the next to deliver).
    pub bytes: u64,
    /// Ops those chunks hold: no chunk but the next to deliver starts
    /// while they hold this many, and a worker holds at most its share
    /// (this over `threads`, at least [`super::MIN_CHUNK_OPS`] or this)
    /// of a chunk ([`super::MAX_OPS_IN_FLIGHT`]).
    pub ops: usize,
    /// Decode on the calling thread, each chunk just before it is
    /// delivered, with no worker ([`run_inline`]).
    pub inline: bool,
}

/// Whether [`run`] decodes on the calling thread: one worker, and the
/// process may run on one CPU only (`taskset -c 0`, a one-CPU container).
/// A worker could then only take turns with the calling thread: 300
/// switches between the two on the bench's 10 MB interp trace, which
/// left each side's caches to the other and cost 0.02 s of system time
/// in futex calls.
pub(super) fn inline_on_one_cpu(threads: usize) -> bool {
    threads == 1 && std::thread::available_parallelism().is_ok_and(|n| n.get() == 1)
}

/// Decodes `job` with a worker's `images`, each run then prepared by
/// `prepare` (the stitch's stacks built ahead) where there is one, and
/// counts its bytes as done; a panic becomes the error.
fn decode_job<'s, 't>(
    shared: &Shared<'s, 't>,
    images: &mut WorkerImages<'s, 't>,
    prepare: &mut Option<crate::model::ops::Preparer<'_>>,
    (job, share): (&ChunkJob, Option<usize>),
) -> Result<ChunkOutput, DecodeError> {
    let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let limited = share.map(|share| ChunkJob {
            stream: job.stream,
            decode: job.decode.clone(),
            meta: super::chunk::ChunkMeta {
                op_limit: Some(job.meta.op_limit.map_or(share, |l| l.min(share))),
                ..job.meta
            },
        });
        let job = limited.as_ref().unwrap_or(job);
        let stream = shared.streams[job.stream];
        let used = images.used.replace(true);
        let mut r = decode_on_worker(images, shared.pool, stream, job);
        // libipt decoded some code in two execution modes with the
        // worker's caches (`WorkerImages::modes_mixed`): what this chunk
        // decoded may depend on the chunks the worker decoded before. So
        // it is decoded again with fresh caches, unless they were fresh,
        // and the next chunk gets fresh ones too: each chunk then decodes
        // as it would alone, whichever worker takes it.
        if images.modes_mixed() && used {
            if let Ok(out) = r {
                out.give_back(shared.pool);
            }
            *images = WorkerImages::new(shared.setup)?;
            images.used.set(true);
            r = decode_on_worker(images, shared.pool, stream, job);
        }
        if images.modes_mixed() {
            *images = WorkerImages::new(shared.setup)?;
        }
        if let (Ok(out), Some(prep)) = (&mut r, prepare.as_mut()) {
            for run in out.runs_mut() {
                run.stretch = prep(run.task, &run.ops, shared.setup.cycles);
            }
        }
        r
    }))
    .unwrap_or_else(|p| Err(DecodeError::Worker(panic_message(&*p))));
    shared.progress.add(job.meta.len);
    r
}

/// [`run`] on the calling thread: each chunk in order is decoded, then
/// delivered, as a worker and the delivery would, with nothing held.
fn run_inline(shared: &Shared<'_, '_>, deliver: &mut Deliver<'_>) -> Result<(), DecodeError> {
    let setup = shared.setup;
    let mut images = WorkerImages::new(setup)?;
    let mut prepare = shared
        .prepare
        .filter(|_| !setup.per_cpu)
        .map(|p| p.worker());
    let stop = &setup.opts.stop;
    for (k, job) in shared.jobs.iter().enumerate() {
        if stop.is_stopped() {
            return Err(DecodeError::Stopped);
        }
        let out = decode_job(shared, &mut images, &mut prepare, (job, None))?;
        let held = out.ops_held();
        deliver(k, out, held)?;
    }
    Ok(())
}

/// What [`run`] hands each decoded chunk to, in order: `(k, output,
/// held)`; an error ends the decode.
pub(super) type Deliver<'d> = dyn FnMut(usize, ChunkOutput, usize) -> Result<(), DecodeError> + 'd;

/// Decodes the jobs on `limits.threads` workers, at most `limits.window`
/// chunks and `limits.bytes` of trace ahead of delivery, and calls
/// `deliver(k, output, held)` for each in order, on the calling thread
/// (`held`: ops of the chunks decoded and not delivered, this one's
/// included).
pub(super) fn run(
    shared: &Shared<'_, '_>,
    limits: Limits,
    deliver: &mut Deliver<'_>,
) -> Result<(), DecodeError> {
    let Shared {
        setup,
        jobs,
        prepare,
        ..
    } = *shared;
    if limits.inline {
        return run_inline(shared, deliver);
    }
    let window = limits.window.max(1);
    let threads = limits.threads.clamp(1, jobs.len().max(1));
    // ends[k]: the bytes of jobs 0..k, for the bytes from one to another.
    let ends: Vec<u64> = std::iter::once(0)
        .chain(jobs.iter().scan(0u64, |sum, j| {
            *sum += j.decode.end - j.decode.start;
            Some(*sum)
        }))
        .collect();
    // Ops of the chunks decoded and not delivered.
    let in_flight = AtomicUsize::new(0);
    // At least what a chunk may hold by its own bound's floor (or the
    // budget, where a test sets it lower), so that a chunk of real trace
    // (256 KiB with CYC: about 800,000 ops of the densest) is not decoded
    // twice on many cores.
    let share = (limits.ops / threads).max(super::MIN_CHUNK_OPS.min(limits.ops));
    let too_far = |k: usize, delivered: usize| {
        k >= delivered + window
            || (k > delivered
                && (ends[k + 1] - ends[delivered] > limits.bytes
                    || in_flight.load(Ordering::Relaxed) >= limits.ops))
    };
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let gate = (Mutex::new(0usize), Condvar::new());
    let (tx, rx) = crossbeam_channel::unbounded::<(usize, Result<ChunkOutput, DecodeError>)>();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let tx = tx.clone();
            let (next, stop, gate, too_far, in_flight) =
                (&next, &stop, &gate, &too_far, &in_flight);
            scope.spawn(move || {
                yield_to_delivery();
                let mut images = match WorkerImages::new(setup) {
                    Ok(i) => i,
                    Err(e) => {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        let _ = tx.send((k, Err(e)));
                        return;
                    }
                };
                let mut prepare = prepare.filter(|_| !setup.per_cpu).map(|p| p.worker());
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(k) else { break };
                    {
                        let mut delivered = gate.0.lock().unwrap_or_else(|p| p.into_inner());
                        while too_far(k, *delivered) && !stop.load(Ordering::Relaxed) {
                            delivered = gate.1.wait(delivered).unwrap_or_else(|p| p.into_inner());
                        }
                    }
                    if stop.load(Ordering::Relaxed) || setup.opts.stop.is_stopped() {
                        break;
                    }
                    let r = decode_job(shared, &mut images, &mut prepare, (job, Some(share)));
                    if let Ok(out) = &r {
                        in_flight.fetch_add(out.ops_held(), Ordering::Relaxed);
                    }
                    if tx.send((k, r)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut ready: BTreeMap<usize, ChunkOutput> = BTreeMap::new();
        let mut delivered = 0usize;
        let mut result = Ok(());
        'receive: for (k, r) in rx.iter() {
            let out = match r {
                Ok(o) => o,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            ready.insert(k, out);
            while let Some(out) = ready.remove(&delivered) {
                // This chunk's and those decoded after it, received or
                // still in the channel.
                let held = in_flight.fetch_sub(out.ops_held(), Ordering::Relaxed);
                if let Err(e) = deliver(delivered, out, held) {
                    result = Err(e);
                    break 'receive;
                }
                delivered += 1;
                *gate.0.lock().unwrap_or_else(|p| p.into_inner()) = delivered;
                gate.1.notify_all();
            }
            // The output failed: what is decoded ahead goes nowhere.
            if setup.opts.stop.is_stopped() {
                result = Err(DecodeError::Stopped);
                break;
            }
        }
        if result.is_ok() && delivered < jobs.len() {
            result = Err(DecodeError::Worker(format!(
                "chunk {delivered} of {} was never decoded",
                jobs.len()
            )));
        }
        if result.is_err() {
            // Under the gate's lock: a worker that tested `stop` there and
            // is about to wait cannot miss the notification.
            let held = gate.0.lock().unwrap_or_else(|p| p.into_inner());
            stop.store(true, Ordering::Relaxed);
            drop(held);
            gate.1.notify_all();
        }
        // Workers still running see `stop` (or a closed channel) and end.
        drop(rx);
        result
    })
}
