//! FTF encoding in blocks, on threads of its own: the emitter decides what
//! each file holds and in which order ([`Rec`]s, one per record), cuts
//! each file's records into blocks of [`BLOCK_RECS`], and each block
//! becomes bytes on one of the [`Encoders`] with an FTF writer whose
//! string and thread tables start empty ([`ftf::Writer::segment`]). The
//! encoders write the blocks' bytes to the file in the order the blocks
//! were cut.
//!
//! So a block's bytes depend on its own records only, and a file's bytes
//! on the records and [`BLOCK_RECS`] only: the same for any number of
//! encoders (none: each block is encoded where it is cut), any `-j` and
//! any chunk size. The cost is that each block names again the strings
//! and threads it uses (0.1-0.5% of the bytes; see `BLOCK_RECS`).
//!
//! Why: encoding was 58% of the emitter thread's instructions (callgrind,
//! `ptdec -j1`, 1 MB interp trace: `Writer::event` 183.5 M of
//! `Emitter::slice`'s 318.7 M), and that thread alone capped the decode
//! at about 16-20 MB/s of trace however many cores there are. With the
//! encoding and the writing spread over threads, what stays serial per
//! slice is placing it (range, folding, windows) and storing its record.
//!
//! A block holds its functions by reference count, each function about
//! once per block ([`Block::func`]), so a function's count, which the
//! call stacks change per call, changes about once per block on the
//! other threads: per call, its cache line would go back and forth
//! between them.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use ftf::{Arg, ArgValue, Text, ThreadRef, Writer};

use super::Sink;
use crate::model::slices::FuncRef;

/// Records per block. Each block restates the strings and threads it
/// uses: on the bench's 10 MB traces, 16384 records per block made the
/// files 0.08% (interp) and 0.46% (shapes, more functions) larger than
/// one table for the whole file; 4096 made them 0.31% and 1.8% larger,
/// and shapes took 10% more CPU at `-j2` (interning the names again).
pub(super) const BLOCK_RECS: usize = 16384;

/// Blocks sent to the encoders and not yet written, at most, per encoder.
const IN_FLIGHT_PER_ENCODER: usize = 3;

/// Emptied blocks kept for reuse, at most, per encoder (and two more):
/// enough for those in flight; more would keep the memory of blocks
/// filled once (2-3 MB each) for nothing.
pub(super) const SPARE_PER_ENCODER: usize = IN_FLIGHT_PER_ENCODER + 1;

/// Ways of [`Block::func`]'s cache.
const FUNC_WAYS: usize = 256;

/// One record of a file, as the emitter decided it; its strings and
/// thread are interned when its block is encoded. Nothing in it needs
/// dropping (what owns memory is in [`Block::others`]): a block's records
/// are let go of at once, not one by one (callgrind showed 24
/// instructions per record for that).
#[derive(Clone, Copy)]
pub(super) enum Rec {
    /// A slice (duration complete event).
    Piece(Piece),
    /// `Block::others[i]`.
    Other(u32),
}

/// A record that owns memory, rare next to slices.
pub(super) enum Other {
    /// A process's kernel object.
    Process { pid: u32, name: Box<str> },
    /// A thread's kernel object.
    Thread { pid: u32, tid: u32, name: Box<str> },
    /// The name and arguments of a gap's [`Piece`].
    Gap(GapRec),
    /// An instant or counter.
    Event(Event),
}

/// A slice or the part of it inside one window; see `emit`'s module doc
/// for its arguments.
#[derive(Clone, Copy)]
pub(super) struct Piece {
    pub pid: u32,
    pub tid: u32,
    pub start: u64,
    pub end: u64,
    pub what: What,
    pub cut: Cut,
    /// `folded` and `folded_levels` when `folded > 0`.
    pub folded: u64,
    pub levels: u64,
}

/// A slice's kind, name and own arguments.
#[derive(Clone, Copy)]
pub(super) enum What {
    Call {
        /// Index in the block's functions ([`Block::func`]).
        func: u32,
        unknown_start: bool,
        /// Ended by a return that matched no open frame.
        unmatched: bool,
        insns: u64,
        cycles: Option<u64>,
    },
    Untraced {
        name: &'static str,
        ip: u64,
    },
    /// `Block::others[i]`, an [`Other::Gap`].
    Gap(u32),
}

/// A gap slice's name and arguments.
pub(super) struct GapRec {
    pub name: &'static str,
    pub reason: Box<str>,
    pub offset: u64,
    pub ip: Option<u64>,
}

/// Which side of a slice lies outside its file (`cut`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Cut {
    None,
    Start,
    End,
    Both,
}

impl Cut {
    fn arg(self) -> Option<&'static str> {
        match self {
            Cut::None => None,
            Cut::Start => Some("start"),
            Cut::End => Some("end"),
            Cut::Both => Some("both"),
        }
    }
}

/// An instant or counter event with owned arguments (marks, renames, the
/// instant at a decode error: rare next to slices).
pub(super) struct Event {
    pub pid: u32,
    pub tid: u32,
    /// `Some(id)`: a counter.
    pub counter: Option<u64>,
    pub category: &'static str,
    pub name: Box<str>,
    pub ts: u64,
    pub args: Vec<(&'static str, Val)>,
}

impl Event {
    /// An instant of thread `(pid, tid)`.
    pub(super) fn new(
        (pid, tid): (u32, u32),
        category: &'static str,
        name: &str,
        ts: u64,
        args: Vec<(&'static str, Val)>,
    ) -> Self {
        Event {
            pid,
            tid,
            counter: None,
            category,
            name: name.into(),
            ts,
            args,
        }
    }
}

/// An owned argument value.
pub(super) enum Val {
    U64(u64),
    Pointer(u64),
    Bool(bool),
    Str(Box<str>),
}

impl Val {
    fn arg(&self) -> ArgValue<'_> {
        match self {
            Val::U64(v) => ArgValue::U64(*v),
            Val::Pointer(v) => ArgValue::Pointer(*v),
            Val::Bool(v) => ArgValue::Bool(*v),
            Val::Str(s) => ArgValue::Str(s),
        }
    }
}

/// Up to [`BLOCK_RECS`] records of one file and the functions they name,
/// and once encoded, their bytes.
pub(super) struct Block {
    pub recs: Vec<Rec>,
    others: Vec<Other>,
    /// The bytes [`Block::encode`] made (the buffer is kept for the next
    /// block: a fresh one each time cost page faults).
    pub bytes: Vec<u8>,
    funcs: Vec<FuncRef>,
    /// By address: a function's index in `funcs`. `funcs` holds the
    /// function, so its address names it until the block is cleared.
    ways: Vec<(usize, u32)>,
}

impl Block {
    /// An empty block that takes memory as records come: a `--split`
    /// window may hold one for long with few records.
    pub(super) fn new() -> Self {
        Block {
            recs: Vec::new(),
            bytes: Vec::new(),
            others: Vec::new(),
            funcs: Vec::new(),
            ways: vec![(0, 0); FUNC_WAYS],
        }
    }

    /// Gives back most of the memory of a block holding few records for
    /// its size (one taken over from a full block, left by the window
    /// that filled it): a `--split` window may hold it long.
    pub(super) fn trim(&mut self) {
        if self.recs.capacity() > 4 * self.recs.len().max(64) {
            self.recs.shrink_to(2 * self.recs.len());
        }
    }

    pub(super) fn is_full(&self) -> bool {
        self.recs.len() >= BLOCK_RECS
    }

    /// Keeps `o` for a record of this block: its index there.
    pub(super) fn other(&mut self, o: Other) -> u32 {
        self.others.push(o);
        (self.others.len() - 1) as u32
    }

    /// Adds a record that owns memory.
    pub(super) fn push_other(&mut self, o: Other) {
        let i = self.other(o);
        self.recs.push(Rec::Other(i));
    }

    /// The index of `f` in the block's functions, added when not found
    /// in its way (a function whose way another took is added again: the
    /// bytes depend on the function's text, not on the index).
    pub(super) fn func(&mut self, f: &FuncRef) -> u32 {
        let p = f.addr();
        let way = ((p >> 6) ^ (p >> 14)) % FUNC_WAYS;
        let (held, index) = self.ways[way];
        if held == p {
            return index;
        }
        let index = self.funcs.len() as u32;
        self.funcs.push(f.clone());
        self.ways[way] = (p, index);
        index
    }

    /// Drops the records and functions, keeping the buffers (and the
    /// bytes: [`Block::encode`] starts them afresh).
    pub(super) fn clear(&mut self) {
        self.recs.clear();
        self.others.clear();
        if !self.funcs.is_empty() {
            self.funcs.clear();
            self.ways.fill((0, 0));
        }
    }

    /// Encodes the records into [`Block::bytes`]: an FTF segment, to
    /// follow the file's header and the blocks before it.
    pub(super) fn encode(&mut self) -> ftf::Result<()> {
        let mut bytes = std::mem::take(&mut self.bytes);
        bytes.clear();
        let mut w = Writer::segment(bytes);
        let r = self.encode_into(&mut w);
        self.bytes = w.finish()?;
        r
    }

    /// Appends the encoded bytes to `sink`.
    fn write_to(&self, sink: &SharedSink) -> Result<(), BlockError> {
        lock(sink).write_all(&self.bytes).map_err(BlockError::Write)
    }

    fn encode_into(&self, w: &mut Writer<Vec<u8>>) -> ftf::Result<()> {
        for rec in &self.recs {
            match rec {
                Rec::Piece(p) => self.piece(w, p)?,
                Rec::Other(i) => match &self.others[*i as usize] {
                    Other::Process { pid, name } => w.process((*pid).into(), name)?,
                    Other::Thread { pid, tid, name } => {
                        w.thread((*pid).into(), (*tid).into(), name)?;
                    }
                    // Only through a piece's `What::Gap`.
                    Other::Gap(_) => {}
                    Other::Event(e) => {
                        let th = thread(e.pid, e.tid);
                        let args: arrayvec::ArrayVec<Arg, { ftf::MAX_ARGS }> = e
                            .args
                            .iter()
                            .take(ftf::MAX_ARGS)
                            .map(|(n, v)| Arg::new(n, v.arg()))
                            .collect();
                        match e.counter {
                            Some(id) => w.counter(th, e.category, &*e.name, e.ts, id, &args)?,
                            None => w.instant(th, e.category, &*e.name, e.ts, &args)?,
                        }
                    }
                },
            }
        }
        Ok(())
    }

    fn piece(&self, w: &mut Writer<Vec<u8>>, p: &Piece) -> ftf::Result<()> {
        // At most 9: insns, cycles, addr, module, unknown_start, unmatched,
        // cut, folded, folded_levels.
        let mut args: arrayvec::ArrayVec<Arg, 9> = arrayvec::ArrayVec::new();
        let (category, name): (&'static str, Text<'_>) = match &p.what {
            What::Call {
                func,
                unknown_start,
                unmatched,
                insns,
                cycles,
            } => {
                let f = &self.funcs[*func as usize];
                args.push(Arg::new("insns", *insns));
                if let Some(c) = cycles {
                    args.push(Arg::new("cycles", *c));
                }
                args.push(Arg::new("addr", ArgValue::Pointer(f.entry)));
                args.push(Arg::new("module", &f.module));
                if *unknown_start {
                    args.push(Arg::new("unknown_start", true));
                }
                if *unmatched {
                    args.push(Arg::new("unmatched", true));
                }
                ("call", Text::Shared(&f.name))
            }
            What::Untraced { name, ip } => {
                args.push(Arg::new("ip", ArgValue::Pointer(*ip)));
                ("untraced", Text::Str(name))
            }
            What::Gap(i) => {
                let Other::Gap(g) = &self.others[*i as usize] else {
                    unreachable!("a gap's piece names its Other::Gap");
                };
                args.push(Arg::new("reason", &*g.reason));
                args.push(Arg::new("offset", g.offset));
                if let Some(ip) = g.ip {
                    args.push(Arg::new("ip", ArgValue::Pointer(ip)));
                }
                ("gap", Text::Str(g.name))
            }
        };
        if let Some(c) = p.cut.arg() {
            args.push(Arg::new("cut", c));
        }
        if p.folded > 0 {
            args.push(Arg::new("folded", p.folded));
            args.push(Arg::new("folded_levels", p.levels));
        }
        let th = thread(p.pid, p.tid);
        w.duration_complete(th, category, name, p.start, p.end, &args)
    }
}

fn thread(pid: u32, tid: u32) -> ThreadRef {
    ThreadRef {
        pid: pid.into(),
        tid: tid.into(),
    }
}

/// A file's sink, shared with the encoder threads, which write to it.
pub(super) type SharedSink = Arc<Mutex<Sink>>;

/// Why a block did not reach its file.
pub(super) enum BlockError {
    Encode(ftf::Error),
    Write(std::io::Error),
}

/// A block of file `window` encoded and written (or why not), handed
/// back emptied for reuse.
pub(super) struct Done {
    pub window: u64,
    pub result: Result<(), BlockError>,
    pub block: Block,
}

/// Encodes `block` and appends its bytes to `sink`.
pub(super) fn encode_and_write(block: &mut Block, sink: &SharedSink) -> Result<(), BlockError> {
    block.encode().map_err(BlockError::Encode)?;
    block.write_to(sink)
}

/// `m` locked; a panic while it was held (a bug, already reported by its
/// thread) does not make it unusable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct Job {
    seq: u64,
    window: u64,
    sink: SharedSink,
    block: Block,
}

/// Blocks encoded and waiting for their turn to be written: the blocks
/// go to their files in the order they were sent, whichever encoder
/// finishes first.
#[derive(Default)]
struct Turn {
    next: u64,
    parked: BTreeMap<u64, (Job, Result<(), ftf::Error>)>,
}

/// Threads that encode blocks and write them to their files in the order
/// they were sent ([`Encoders::send`]); [`Encoders::next`] hands the blocks
/// back, in that order, emptied, with what became of them. So the
/// emitter's thread neither encodes nor writes: the writes' copies into
/// the page cache were 45% of its samples once it no longer encoded
/// (perf, `PTDEC_STACKS_AHEAD=1 -j2`, interp 10 MB).
pub(super) struct Encoders {
    jobs: Option<Sender<Job>>,
    done: Receiver<Done>,
    threads: Vec<JoinHandle<()>>,
    /// Blocks sent, and handed back.
    sent: u64,
    back: u64,
    max_in_flight: u64,
}

impl Encoders {
    /// `n` threads (at least one).
    pub(super) fn new(n: usize) -> std::io::Result<Self> {
        let n = n.max(1);
        let depth = n * IN_FLIGHT_PER_ENCODER;
        let (jobs, rx) = crossbeam_channel::bounded::<Job>(depth);
        // Room for every block in flight: an encoder never waits to hand
        // one back.
        let (tx, done) = crossbeam_channel::bounded::<Done>(depth + 1);
        let turn = Arc::new(Mutex::new(Turn::default()));
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let (rx, tx, turn) = (rx.clone(), tx.clone(), turn.clone());
            let t = std::thread::Builder::new()
                .name(format!("ftf-encode-{i}"))
                .spawn(move || {
                    for mut job in rx {
                        let encoded = job.block.encode();
                        // Dropped here, off the emitter's thread.
                        job.block.clear();
                        let mut turn = lock(&turn);
                        turn.parked.insert(job.seq, (job, encoded));
                        // Whoever holds the turn writes every block whose
                        // turn has come.
                        loop {
                            let next = turn.next;
                            let Some((job, encoded)) = turn.parked.remove(&next) else {
                                break;
                            };
                            turn.next += 1;
                            let result = match encoded {
                                Err(e) => Err(BlockError::Encode(e)),
                                Ok(()) => job.block.write_to(&job.sink),
                            };
                            let done = Done {
                                window: job.window,
                                result,
                                block: job.block,
                            };
                            if tx.send(done).is_err() {
                                return;
                            }
                        }
                    }
                })?;
            threads.push(t);
        }
        Ok(Encoders {
            jobs: Some(jobs),
            done,
            threads,
            sent: 0,
            back: 0,
            max_in_flight: depth as u64,
        })
    }

    /// Whether as many blocks as allowed are in flight: take the oldest
    /// back ([`Encoders::next`]) before sending another.
    pub(super) fn is_full(&self) -> bool {
        self.pending() >= self.max_in_flight
    }

    /// Sends `block` of file `window`, to be written to `sink`.
    pub(super) fn send(&mut self, window: u64, sink: SharedSink, block: Block) {
        let job = Job {
            seq: self.sent,
            window,
            sink,
            block,
        };
        self.sent += 1;
        if let Some(jobs) = &self.jobs {
            if jobs.send(job).is_err() {
                // Every encoder is gone (one panicked): `next` reports it.
                self.jobs = None;
            }
        }
    }

    /// The next block handed back, in the order sent; with `wait`, waits
    /// for it while any is in flight.
    pub(super) fn next(&mut self, wait: bool) -> Option<Done> {
        let d = if self.back == self.sent {
            None
        } else if wait {
            match self.done.recv() {
                Ok(d) => Some(d),
                Err(_) => {
                    // An encoder panicked: show its panic.
                    self.join();
                    None
                }
            }
        } else {
            self.done.try_recv().ok()
        };
        if d.is_some() {
            self.back += 1;
        }
        d
    }

    /// Blocks sent and not handed back.
    pub(super) fn pending(&self) -> u64 {
        self.sent - self.back
    }

    fn join(&mut self) {
        self.jobs = None;
        for t in self.threads.drain(..) {
            if let Err(p) = t.join() {
                std::panic::resume_unwind(p);
            }
        }
    }
}

impl Drop for Encoders {
    fn drop(&mut self) {
        self.jobs = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
