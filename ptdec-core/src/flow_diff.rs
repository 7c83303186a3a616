//! The flow decoder against libipt's block decoder on the same trace and
//! code, for tests and the differential fuzz target: each decoder runs as
//! ptxed runs a block decoder (sync, events, blocks, the next PSB after an
//! error) and logs every instruction, event (with its status flags and
//! time), error (with its trace offset) and the time after each block that
//! ends in a branch (an error's block too: ptdec stamps its gap with it).
//! The logs must agree up to where the flow decoder gave up on something
//! it does not follow: errors, and the syncs after them, included.
//!
//! A trace with a packet only libipt 2.2 knows (TRIG) is compared up to
//! libipt 2.1.2's error at it.
//!
//! Block boundaries are not compared: libipt's block cache ends blocks
//! where earlier passes over the same code ended them; the instructions
//! are the same. But for one libipt defect: a block from its cache has
//! the mode the code was cached in, not the one the trace switched to
//! ([`Line::StaleMode`]); libipt's log ends there. Where the flow decoder
//! goes where libipt is known to decode wrong
//! ([`FastDecoder::libipt_differs`]: an asynchronous branch behind queued
//! events), its log ends before that step ([`Outcome::libipt_differs`]).

use std::path::Path;
use std::rc::Rc;

use ipt::{Block, BlockDecoder, Config as PtConfig, Error as PtError, Event, SectionCache, Status};
use sideband::bytes::FileBytes;

use ptflow::code::{CodeCache, Image, Section};
use ptflow::FastDecoder;

/// One line of a decoder's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Sync(Result<u32, PtError>),
    Insn(u64),
    /// Time after a block ending in a branch: (tsc, lost mtc, lost cyc).
    Time(u64, u32, u32),
    Event(String, u32),
    Error(PtError, u64),
    /// After a `NOMAP` error: the address the decoder found no code at.
    Miss(Option<u64>),
    Eos,
    /// A block said its last instruction (at this address) has this size,
    /// and the code there decodes to another (libipt says no size for a
    /// whole block, so this line alone makes the logs differ).
    WrongSize(u64, u8),
    /// A block at this address in another mode (the second, [`mode`])
    /// than the last MODE.Exec set (the first): libipt's block cache keys
    /// its entries by code offset alone, and `pt_blk_proceed_no_event_cached`
    /// gives the block the mode of the pass that filled the entry (code
    /// run in two modes, 2.1.2 and 2.2 alike). libipt's log ends here, so
    /// the comparison ends here; the fast decoder decodes in the trace's
    /// mode. A known libipt defect, not a difference.
    ///
    /// [`mode`]: ipt::mode
    StaleMode(u64, u32, u32),
    /// The same defect as an error: `pt_blk_proceed_no_event_fill_cache`
    /// decodes an instruction in the trace's mode and finds the entry
    /// after it cached in another mode, `-pte_internal` ("We must not
    /// have switched execution modes"). Logged for an internal error
    /// (at this trace offset) after MODE.Exec gave two modes since the
    /// start; libipt's log ends here, and so does the comparison.
    StaleModeError(u64),
    /// A truncated block (its last instruction runs past its section's
    /// end into the next): the instruction's address and bytes.
    Truncated(u64, Vec<u8>),
}

/// The most log lines kept per decoder (the comparison is of a prefix).
const MAX_LINES: usize = 1 << 16;

/// What [`compare`] found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Log lines that agreed.
    pub lines: usize,
    /// Why the flow decoder stopped early, if it did.
    pub unsupported: Option<&'static str>,
    /// Decode errors in the agreeing lines (each followed by a sync).
    pub errors: usize,
    /// libipt's log ended at its stale-mode defect ([`Line::StaleMode`],
    /// [`Line::StaleModeError`]).
    pub libipt_stale_mode: bool,
    /// libipt 2.1.2's log met a packet only a newer libipt knows (TRIG):
    /// compared up to its error there ([`newer_packet_cut`]).
    pub libipt_newer_packet: bool,
    /// The flow decoder went where libipt is known to decode wrong
    /// ([`FastDecoder::libipt_differs`]): the logs were compared up to
    /// the step that went there.
    pub libipt_differs: Option<&'static str>,
}

trait Dec {
    fn sync_forward(&mut self) -> Result<Status, PtError>;
    fn next_block(&mut self) -> (Block, Result<Status, PtError>);
    fn event(&mut self) -> Result<(Event, Status), PtError>;
    fn offset(&self) -> u64;
    fn time(&mut self) -> (u64, u32, u32);
    /// The address the image had no code at, after a `NOMAP` error.
    fn take_miss(&mut self) -> Option<u64>;
    /// The instruction at `ip`, decoded as code of `bits` (16, 32, 64).
    fn code_at(&self, ip: u64, bits: u32) -> Option<iced_x86::Instruction>;
    /// The fast decoder stopped (its log ends here).
    fn stopped(&self) -> bool;
    /// The fast decoder went where libipt is known to decode wrong
    /// ([`FastDecoder::libipt_differs`]): its log ends before the step
    /// that went there.
    fn differs(&self) -> bool {
        false
    }
}

struct Lib<'a> {
    dec: BlockDecoder<'a>,
    cache: Rc<SectionCache>,
    isids: Vec<(u32, u64, u64)>,
}

impl Dec for Lib<'_> {
    fn sync_forward(&mut self) -> Result<Status, PtError> {
        self.dec.sync_forward()
    }
    fn next_block(&mut self) -> (Block, Result<Status, PtError>) {
        self.dec.next_block()
    }
    fn event(&mut self) -> Result<(Event, Status), PtError> {
        self.dec.event()
    }
    fn offset(&self) -> u64 {
        self.dec.offset().unwrap_or(u64::MAX)
    }
    fn time(&mut self) -> (u64, u32, u32) {
        self.dec.time().unwrap_or_default()
    }
    fn take_miss(&mut self) -> Option<u64> {
        self.dec.image().take_miss()
    }
    fn code_at(&self, ip: u64, bits: u32) -> Option<iced_x86::Instruction> {
        let &(isid, _, _) = self
            .isids
            .iter()
            .rev()
            .find(|(_, a, n)| ip >= *a && ip - a < *n)?;
        let mut buf = [0u8; 15];
        let n = self.cache.read(&mut buf, isid, ip).ok()?;
        let i = iced_x86::Decoder::with_ip(bits, &buf[..n], ip, iced_x86::DecoderOptions::NONE)
            .decode();
        (!i.is_invalid()).then_some(i)
    }
    fn stopped(&self) -> bool {
        false
    }
}

struct Fast<'a> {
    dec: FastDecoder<'a>,
    code: CodeCache,
    sections: Vec<Section>,
}

impl Dec for Fast<'_> {
    fn sync_forward(&mut self) -> Result<Status, PtError> {
        self.dec.sync_forward()
    }
    fn next_block(&mut self) -> (Block, Result<Status, PtError>) {
        let mut b = Block::default();
        let r = self.dec.next_block(&mut self.code, &mut b);
        (b, r)
    }
    fn event(&mut self) -> Result<(Event, Status), PtError> {
        self.dec.event()
    }
    fn offset(&self) -> u64 {
        self.dec.offset().unwrap_or(u64::MAX)
    }
    fn time(&mut self) -> (u64, u32, u32) {
        self.dec.time()
    }
    fn take_miss(&mut self) -> Option<u64> {
        self.dec.take_miss()
    }
    fn code_at(&self, ip: u64, bits: u32) -> Option<iced_x86::Instruction> {
        // The last section added that holds `ip` (as libipt's image).
        let s = self
            .sections
            .iter()
            .rev()
            .find(|s| ip >= s.vaddr && ip - s.vaddr < s.len as u64)?;
        let off = s.offset + (ip - s.vaddr) as usize;
        let end = (s.offset + s.len).min(off + 15);
        let i = iced_x86::Decoder::with_ip(
            bits,
            &(*s.bytes).as_ref()[off..end],
            ip,
            iced_x86::DecoderOptions::NONE,
        )
        .decode();
        (!i.is_invalid()).then_some(i)
    }
    fn stopped(&self) -> bool {
        self.dec.unsupported().is_some()
    }
    fn differs(&self) -> bool {
        self.dec.libipt_differs().is_some()
    }
}

/// The most blocks [`Batch`] takes from one call of `next_blocks`
/// (besides the last).
const BATCH_MAX: u32 = 1000;

/// A block [`Batch`] was handed, its result and the time after it.
type Queued = (Block, Result<Status, PtError>, (u64, u32, u32));

/// The flow decoder through [`FastDecoder::next_blocks`]: the blocks it
/// hands out at once are queued and taken one by one, each with the time
/// after it. Its log must be [`Fast`]'s. With `walks`, through
/// [`FastDecoder::next_blocks_to`] taking walks (`ptflow::walk`): each
/// walk's blocks are found again one by one
/// ([`ptflow::walk::Walk::expand`]) and queued, so a walk that went
/// elsewhere or left the decoder elsewhere than the blocks one by one
/// makes the logs differ.
struct Batch<'a> {
    fast: Fast<'a>,
    walks: Option<ptflow::walk::Walks>,
    /// The first walk whose own account of its blocks (instructions,
    /// ends, jumps) is not what its blocks found again say.
    walk_error: Option<String>,
    queue: std::collections::VecDeque<Queued>,
    time: (u64, u32, u32),
}

impl Batch<'_> {
    /// The next blocks from `next_blocks_to` taking walks, queued.
    fn walk_on(&mut self) {
        let Some(walks) = self.walks.as_mut() else {
            return;
        };
        let mut b = Block::default();
        let mut h = Handout {
            time: self.fast.dec.time(),
            ..Handout::default()
        };
        let r = self
            .fast
            .dec
            .next_blocks_to(&mut self.fast.code, walks, &mut b, BATCH_MAX, &mut h);
        if let Some(e) = h.walk_error {
            self.walk_error.get_or_insert(e);
        }
        for (b, t) in h.handed {
            self.queue.push_back((b, Ok(Status(0)), t));
        }
        self.queue.push_back((b, r, self.fast.dec.time()));
    }
}

/// Whether walk `w` says of itself what its blocks, found again one by
/// one, say: how many, their instructions, the first IP and the last
/// end, and each direct jump (where, to the next block's IP, with the
/// instructions up to it): what the chunk decoder takes of a walk.
fn walk_says(w: &ptflow::walk::Walk, blocks: &[Block]) -> Result<(), String> {
    let insns: u64 = blocks.iter().map(|b| u64::from(b.ninsn)).sum();
    let mut jumps = Vec::new();
    let mut upto = 0u64;
    for (k, b) in blocks.iter().enumerate() {
        upto += u64::from(b.ninsn);
        if b.iclass == ipt::ffi::ptic_jump {
            let to = blocks.get(k + 1).map_or(w.ip_after(), |n| n.ip);
            jumps.push((b.end_ip, to, upto));
        }
    }
    let said: Vec<_> = w
        .jumps()
        .iter()
        .map(|j| (j.from, j.to, u64::from(j.insns)))
        .collect();
    let ends = (
        blocks.first().map(|b| b.ip),
        blocks.last().map(|b| b.end_ip),
    );
    if blocks.len() as u64 != u64::from(w.blocks)
        || insns != w.insns
        || ends != (Some(w.first_ip), Some(w.last_end))
        || jumps != said
    {
        return Err(format!(
            "walk at {:#x}: says {} blocks, {} instructions, ends {:#x}..{:#x}, jumps {said:x?}; its blocks: {}, {insns}, {ends:x?}, {jumps:x?}",
            w.first_ip,
            w.blocks,
            w.insns,
            w.first_ip,
            w.last_end,
            blocks.len()
        ));
    }
    Ok(())
}

impl Dec for Batch<'_> {
    fn sync_forward(&mut self) -> Result<Status, PtError> {
        self.fast.sync_forward()
    }
    fn next_block(&mut self) -> (Block, Result<Status, PtError>) {
        if self.queue.is_empty() && self.walks.is_some() {
            self.walk_on();
        } else if self.queue.is_empty() {
            let mut b = Block::default();
            let queue = &mut self.queue;
            let r = self
                .fast
                .dec
                .next_blocks(&mut self.fast.code, &mut b, BATCH_MAX, |b, t| {
                    queue.push_back((*b, Ok(Status(0)), t))
                });
            queue.push_back((b, r, self.fast.dec.time()));
        }
        let (b, r, t) = self.queue.pop_front().expect("queued");
        self.time = t;
        (b, r)
    }
    fn event(&mut self) -> Result<(Event, Status), PtError> {
        self.fast.event()
    }
    fn offset(&self) -> u64 {
        self.fast.offset()
    }
    fn time(&mut self) -> (u64, u32, u32) {
        self.time
    }
    fn take_miss(&mut self) -> Option<u64> {
        self.fast.take_miss()
    }
    fn code_at(&self, ip: u64, bits: u32) -> Option<iced_x86::Instruction> {
        self.fast.code_at(ip, bits)
    }
    fn stopped(&self) -> bool {
        self.queue.is_empty() && self.fast.stopped()
    }
}

/// The blocks [`Batch`] taking walks queues from one call of
/// `next_blocks_to`, each with the time it was handed out at: each walk's
/// found again one by one ([`ptflow::walk::Walk::expand`]) as it is
/// handed out (the links it followed may be made anew by `next_block`
/// before the call returns), checked against what the walk says of them
/// ([`walk_says`]).
#[derive(Default)]
struct Handout {
    handed: Vec<(Block, (u64, u32, u32))>,
    time: (u64, u32, u32),
    walk_error: Option<String>,
}

impl ptflow::block::Follow for Handout {
    const WALKS: bool = true;
    fn moved(&mut self, time: (u64, u32, u32), _: Option<u64>) {
        self.time = time;
    }
    fn block(&mut self, b: &Block) -> bool {
        self.handed.push((*b, self.time));
        true
    }
    fn walk(&mut self, w: &ptflow::walk::Walk, code: &CodeCache) -> Option<bool> {
        let blocks = w.expand(code);
        if let Err(e) = walk_says(w, &blocks) {
            self.walk_error.get_or_insert(e);
        }
        let time = self.time;
        self.handed.extend(blocks.into_iter().map(|b| (b, time)));
        Some(true)
    }
}

/// Runs `d` as ptxed does, logging what it hands out.
fn run(d: &mut impl Dec, log: &mut Vec<Line>) {
    // The decoder's mode: unknown after a sync (`pt_blk_reset`), then the
    // last MODE.Exec's.
    let mut mode: Option<u32>;
    // The modes MODE.Exec gave since the start.
    let mut modes = Vec::new();
    'sync: while log.len() < MAX_LINES {
        // Where the log stood before the step: it is cut back there when
        // the step went where libipt is known to decode wrong.
        let mut mark = log.len();
        let r = d.sync_forward();
        mode = None;
        if d.stopped() {
            return;
        }
        if d.differs() {
            log.truncate(mark);
            return;
        }
        log.push(Line::Sync(r.map(|s| s.0)));
        let mut status = match r {
            Ok(s) => s,
            Err(PtError::EOS) => return,
            Err(_) => continue,
        };
        while log.len() < MAX_LINES {
            while status.event_pending() {
                mark = log.len();
                let r = d.event();
                if d.differs() {
                    log.truncate(mark);
                    return;
                }
                match r {
                    Ok((ev, s)) => {
                        let m = ev.exec_mode();
                        log.push(Line::Event(
                            format!("{ev:?} {:?} {m:?}", ev.other_ip()),
                            s.0,
                        ));
                        mode = m.or(mode);
                        if let Some(m) = m.filter(|m| !modes.contains(m)) {
                            modes.push(m);
                        }
                        status = s;
                    }
                    Err(e) => {
                        if d.stopped() {
                            return;
                        }
                        log.push(Line::Error(e, d.offset()));
                        continue 'sync;
                    }
                }
            }
            if status.eos() {
                log.push(Line::Eos);
                return;
            }
            mark = log.len();
            let (b, r) = d.next_block();
            if d.differs() {
                log.truncate(mark);
                return;
            }
            if let Some(m) = mode.filter(|&m| b.ninsn > 0 && m != b.mode) {
                log.push(Line::StaleMode(b.ip, m, b.mode));
                return;
            }
            // The block's instructions (a truncated one's bytes are not
            // followed: its address is the block's end).
            let mut ip = b.ip;
            for i in 0..b.ninsn {
                log.push(Line::Insn(ip));
                if i + 1 == b.ninsn {
                    break;
                }
                let Some(insn) = d.code_at(ip, b.bitness()) else {
                    log.push(Line::Insn(b.end_ip));
                    break;
                };
                use iced_x86::OpKind as K;
                ip = match insn.op0_kind() {
                    K::NearBranch16 | K::NearBranch32 | K::NearBranch64 => {
                        insn.near_branch_target()
                    }
                    _ => insn.next_ip(),
                };
            }
            if b.ninsn > 0 && b.size != 0 && !b.truncated {
                let len = d.code_at(b.end_ip, b.bitness()).map(|i| i.len());
                if len != Some(usize::from(b.size)) {
                    log.push(Line::WrongSize(b.end_ip, b.size));
                }
            }
            if b.ninsn > 0 && b.truncated {
                let n = usize::from(b.size).min(b.raw.len());
                log.push(Line::Truncated(b.end_ip, b.raw[..n].to_vec()));
            }
            if d.stopped() {
                return;
            }
            let branch = !matches!(b.iclass, ipt::ffi::ptic_other | ipt::ffi::ptic_unknown);
            if b.ninsn > 0 && branch {
                let (t, m, c) = d.time();
                log.push(Line::Time(t, m, c));
            }
            match r {
                Ok(s) => status = s,
                Err(PtError::EOS) => {
                    log.push(Line::Eos);
                    return;
                }
                Err(PtError::INTERNAL) if modes.len() > 1 => {
                    log.push(Line::StaleModeError(d.offset()));
                    return;
                }
                Err(e) => {
                    log.push(Line::Error(e, d.offset()));
                    if e == PtError::NOMAP {
                        log.push(Line::Miss(d.take_miss()));
                    }
                    continue 'sync;
                }
            }
        }
    }
}

/// Where libipt 2.1.2's log stops being comparable: its first `BAD_OPC`
/// at a packet only a newer libipt knows (libipt 2.2's TRIG, which ptflow
/// decodes), met at the packet or while reading on from a packet before
/// it ([`crate::decode::newer_packet`]), or any error at such a packet, or a sync that failed so in a
/// trace that holds one (a sync error has no offset); one line earlier
/// when that line's status holds the error's event-pending flag.
fn newer_packet_cut(trace: &[u8], lib_log: &[Line]) -> Option<usize> {
    let k = lib_log.iter().position(|l| match *l {
        Line::Error(e, off) => {
            // Any error at the newer packet itself: libipt 2.1.2's block
            // decoder may say BAD_QUERY there, when it needed the next
            // event and its event decoder stopped at the opcode (the
            // flow_lockstep fuzz target found one in CI).
            let at_it = usize::try_from(off).is_ok_and(|o| trace.get(o) == Some(&0xd9));
            (e == PtError::BAD_OPC || at_it) && crate::decode::newer_packet(trace, off).is_some()
        }
        Line::Sync(Err(e)) => e == PtError::BAD_OPC && crate::decode::holds_newer_packet(trace),
        _ => false,
    })?;
    // The status on the line before says libipt's error is pending (an
    // event to query): the fast decoder's says what it does with the
    // TRIG. Compared up to that line.
    match k.checked_sub(1).map(|i| &lib_log[i]) {
        Some(Line::Event(..) | Line::Sync(Ok(_))) => Some(k - 1),
        _ => Some(k),
    }
}

/// Decodes `trace` with both decoders over the sections (file, offset,
/// size, address) and compares their logs; `Err` names the first
/// difference.
pub fn compare(
    cfg: &PtConfig,
    trace: &[u8],
    sections: &[(&Path, u64, u64, u64)],
) -> Result<Outcome, String> {
    let (cache, isids, fast_sections) = load_sections(sections)?;
    let lib_log = libipt_log(cfg, trace, cache, isids)?;

    let Ok(fast_dec) = FastDecoder::new(&cfg.settings(), trace) else {
        return Ok(Outcome::default());
    };
    let image = Image::new(fast_sections.clone(), false);
    let mut fast = Fast {
        dec: fast_dec,
        code: CodeCache::default(),
        sections: fast_sections.clone(),
    };
    fast.dec.set_image(image.clone());
    let mut fast_log = Vec::new();
    run(&mut fast, &mut fast_log);
    let cut = fast.dec.libipt_differs().is_some();
    batches_agree(cfg, trace, fast_sections, image, &fast_log, cut)?;

    if std::env::var_os("PTDEC_FLOW_DIFF_DUMP").is_some() {
        eprintln!("libipt: {lib_log:x?}\nfast: {fast_log:x?}");
    }
    if let Some(k) = newer_packet_cut(trace, &lib_log) {
        // Up to libipt's error at the packet it does not know; the fast
        // decoder goes on.
        logs_agree(&lib_log[..k], &fast_log[..k.min(fast_log.len())], &fast)?;
        return Ok(Outcome {
            lines: k,
            libipt_newer_packet: true,
            unsupported: fast.dec.unsupported(),
            libipt_differs: fast.dec.libipt_differs(),
            errors: fast_log[..k.min(fast_log.len())]
                .iter()
                .filter(|l| matches!(l, Line::Error(..) | Line::Sync(Err(_))))
                .count(),
            ..Outcome::default()
        });
    }
    logs_agree(&lib_log, &fast_log, &fast)?;
    let libipt_stale_mode = matches!(
        lib_log.last(),
        Some(Line::StaleMode(..) | Line::StaleModeError(_))
    );
    Ok(Outcome {
        lines: if libipt_stale_mode {
            lib_log.len() - 1
        } else {
            fast_log.len()
        },
        libipt_stale_mode,
        unsupported: fast.dec.unsupported(),
        libipt_differs: fast.dec.libipt_differs(),
        errors: fast_log
            .iter()
            .filter(|l| matches!(l, Line::Error(..) | Line::Sync(Err(_))))
            .count(),
        libipt_newer_packet: false,
    })
}

/// The sections (file, offset, size, address) in libipt's section cache,
/// their isids with address and size, and the same sections for the fast
/// decoder (those whose bytes can be read).
#[allow(clippy::type_complexity)]
fn load_sections(
    sections: &[(&Path, u64, u64, u64)],
) -> Result<(SectionCache, Vec<(u32, u64, u64)>, Vec<Section>), String> {
    let cache = SectionCache::new().map_err(|e| format!("libipt: {}", ipt::message(e)))?;
    let mut isids = Vec::new();
    let mut fast_sections = Vec::new();
    for &(path, offset, size, vaddr) in sections {
        let Ok(isid) = cache.add_file(&path.to_string_lossy(), offset, size, vaddr) else {
            continue;
        };
        isids.push((isid, vaddr, size));
        if let Ok(bytes) = FileBytes::open(path) {
            let (o, n) = (offset as usize, size as usize);
            if o.saturating_add(n) <= bytes.len() {
                fast_sections.push(Section::new(isid, vaddr, Rc::new(bytes), o, n));
            }
        }
    }
    Ok((cache, isids, fast_sections))
}

/// libipt's block decoder's log of `trace` over the cached sections.
fn libipt_log(
    cfg: &PtConfig,
    trace: &[u8],
    cache: SectionCache,
    isids: Vec<(u32, u64, u64)>,
) -> Result<Vec<Line>, String> {
    let cache = Rc::new(cache);
    let mut lib_dec =
        BlockDecoder::new(cfg, trace).map_err(|e| format!("libipt: {}", ipt::message(e)))?;
    lib_dec.image().set_memory(Vec::new());
    for &(isid, _, _) in &isids {
        let _ = lib_dec.image().add_cached(&cache, isid);
    }
    let mut lib = Lib {
        dec: lib_dec,
        cache,
        isids,
    };
    let mut lib_log = Vec::new();
    run(&mut lib, &mut lib_log);
    Ok(lib_log)
}

/// The fast decoder taking its blocks in batches gives `fast_log`, the
/// log of it taking them one at a time (its start, when `cut`: that log
/// ended where libipt is known to decode wrong, and the batches, which
/// run ahead, do not say where that was).
fn batches_agree(
    cfg: &PtConfig,
    trace: &[u8],
    sections: Vec<Section>,
    image: Image,
    fast_log: &[Line],
    cut: bool,
) -> Result<(), String> {
    let Ok(dec) = FastDecoder::new(&cfg.settings(), trace) else {
        return Ok(());
    };
    let mut batch = Batch {
        fast: Fast {
            dec,
            code: CodeCache::default(),
            sections,
        },
        walks: None,
        walk_error: None,
        queue: Default::default(),
        time: Default::default(),
    };
    batch.fast.dec.set_image(image.clone());
    let mut batch_log = Vec::new();
    run(&mut batch, &mut batch_log);
    same_logs(fast_log, batch_log, cut, "next_blocks")?;
    let Ok(dec) = FastDecoder::new(&cfg.settings(), trace) else {
        return Ok(());
    };
    let mut walked = Batch {
        fast: Fast {
            dec,
            code: CodeCache::default(),
            sections: batch.fast.sections,
        },
        walks: Some(Default::default()),
        walk_error: None,
        queue: Default::default(),
        time: Default::default(),
    };
    walked.fast.dec.set_image(image);
    let mut walked_log = Vec::new();
    run(&mut walked, &mut walked_log);
    if let Some(e) = walked.walk_error {
        return Err(e);
    }
    same_logs(fast_log, walked_log, cut, "next_blocks_to, walking")
}

/// `log`, made by `how`, is `fast_log` (its start, when `cut`).
fn same_logs(fast_log: &[Line], mut log: Vec<Line>, cut: bool, how: &str) -> Result<(), String> {
    if cut {
        log.truncate(fast_log.len());
    }
    match (0..fast_log.len().max(log.len())).find(|&i| fast_log.get(i) != log.get(i)) {
        Some(i) => Err(format!(
            "line {i}: next_block {:?}, {how} {:?}",
            &fast_log[i.min(fast_log.len())..(i + 3).min(fast_log.len())],
            &log[i.min(log.len())..(i + 3).min(log.len())],
        )),
        None => Ok(()),
    }
}

/// The fast decoder's log is libipt's, up to where the fast decoder
/// stopped: at libipt's end or at what it does not support. Errors are
/// in both logs, with their offsets, and so is what each decoder does
/// after them (the next PSB).
fn logs_agree(lib_log: &[Line], fast_log: &[Line], fast: &Fast) -> Result<(), String> {
    if let Some((&Line::StaleMode(ip, ..), lib_log)) = lib_log.split_last() {
        // Up to libipt's defect; the fast decoder's block starts there.
        let k = lib_log.len();
        let fast_part = &fast_log[..k.min(fast_log.len())];
        logs_agree(lib_log, fast_part, fast)?;
        return match fast_log.get(k) {
            Some(&Line::Insn(i)) if i == ip => Ok(()),
            // The fast decoder stopped before libipt's defect: at what it
            // does not support, or before a step where libipt is known
            // to decode wrong (code in no mode after a later sync).
            None if fast.dec.unsupported().is_some() || fast.dec.libipt_differs().is_some() => {
                Ok(())
            }
            other => Err(format!(
                "line {k}: libipt's block at {ip:#x} from its cache in another mode, fast {other:?}"
            )),
        };
    }
    if let Some((Line::StaleModeError(_), lib_log)) = lib_log.split_last() {
        // Up to libipt's defect, the fast decoder goes on.
        return logs_agree(
            lib_log,
            &fast_log[..lib_log.len().min(fast_log.len())],
            fast,
        );
    }
    let n = fast_log.len();
    let lib_part = &lib_log[..n.min(lib_log.len())];
    if let Some(i) = (0..n.min(lib_log.len())).find(|&i| lib_log[i] != fast_log[i]) {
        return Err(format!(
            "line {i}: libipt {:?}, fast {:?} (after {:?})",
            &lib_log[i..(i + 3).min(lib_log.len())],
            &fast_log[i..(i + 3).min(n)],
            &lib_log[i.saturating_sub(3)..i]
        ));
    }
    if fast.dec.unsupported().is_none()
        && fast.dec.libipt_differs().is_none()
        && lib_part.len() == n
        && lib_log.len() != n
    {
        return Err(format!(
            "fast ended after {n} lines, libipt goes on: {:?}",
            &lib_log[n..(n + 3).min(lib_log.len())]
        ));
    }
    if n > lib_log.len() {
        return Err(format!(
            "libipt ended after {} lines, fast goes on: {:?}",
            lib_log.len(),
            &fast_log[lib_log.len()..(lib_log.len() + 3).min(n)]
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
