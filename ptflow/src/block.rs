//! Events and code to blocks, as libipt's block decoder (`pt_blk_next`,
//! `pt_blk_event`) hands them out: a block runs from the decoder's IP to
//! the next instruction that needs trace (its TNT bit or TIP), or to an
//! event's IP, with the return stack for compressed returns; events are
//! indicated when the decoder reaches the IP they bind to. Paging, VMCS
//! and ptwrite events bind to an instruction rather than an IP (MOV CR3,
//! VMPTRLD, a far branch or VM entry, a PTWRITE): the decoder stays at it (the postponed
//! instruction) until the events binding to it are handed out. Only what
//! ChunkDecoder configures is followed: blocks end at every call and jump
//! (tick and iflags events as libipt makes them when asked for; with tick
//! events every block takes the general path). Most blocks take the fast
//! path (`next_block_fast`): one run, resolved by a TNT bit or a TIP or
//! needing none, following the last run's link; it falls back to the
//! general path, before changing any state, for anything else.

use pttypes::{filter_allows, iclass, mode, AddrRange, Block, Errata, Error as PtError, Status};

use super::code::{
    binds, Class, CodeCache, Image, Insn, Node, NEXT_INDIRECT, NEXT_NOT_TAKEN, NEXT_RETURN,
    NEXT_TAKEN, NO_NODE,
};
use super::event::{Ev, EventDecoder, Kind};
use super::walk::{Walk, Walks, WALK_BITS};
use super::Fail;

const BAD_QUERY: PtError = PtError::BAD_QUERY;
const BAD_CONTEXT: PtError = PtError::BAD_CONTEXT;

/// libipt's return stack: 64 addresses, the oldest overwritten; beside
/// each, the code cache generation and node of the call that pushed it
/// (generation 0: none), so the fast path can follow the call's
/// [`NEXT_RETURN`] link at the return. libipt keeps 65 slots and a
/// bottom index; this is the same stack as a ring of 64 with a length,
/// whose index wraps with a mask (no division, no bounds check).
#[derive(Clone)]
struct RetStack {
    entries: [RetEntry; 64],
    /// The slot the next push writes (below 64).
    top: u8,
    /// How many addresses it holds (at most 64).
    len: u8,
    /// 64 less how many of the (at most 64) return addresses libipt
    /// holds beneath these are of calls made before a PSB+ decoded
    /// through, which it keeps and this stack does not
    /// ([`Self::clear_at_psb`]): as a limit on `len`, past which each
    /// push overwrites one of them in libipt's stack, a `max` per push.
    /// (Their count, tested and decremented per push, cost `ptdec
    /// report` 1% more instructions on the bench's interp trace.)
    pre_psb_limit: u8,
}

#[derive(Clone, Copy)]
struct RetEntry {
    ip: u64,
    gen: u64,
    call: u32,
}

impl Default for RetStack {
    fn default() -> Self {
        RetStack {
            entries: [RetEntry {
                ip: 0,
                gen: 0,
                call: NO_NODE,
            }; 64],
            top: 0,
            len: 0,
            pre_psb_limit: 64,
        }
    }
}

impl RetStack {
    #[inline]
    fn push(&mut self, ip: u64, gen: u64, call: u32) {
        self.entries[usize::from(self.top & 63)] = RetEntry { ip, gen, call };
        self.top = (self.top + 1) & 63;
        if self.len < 64 {
            self.len += 1;
        }
        // Past the limit libipt's stack was full: the push overwrote its
        // oldest address, one made before the PSB.
        self.pre_psb_limit = self.pre_psb_limit.max(self.len);
    }

    /// Pushes the return address of `insn` if it is a call that returns
    /// (not a direct call to the next instruction), from node `call` of
    /// generation `gen`. Always inline: as a call (inlined in the fast
    /// path and in `follow_tnt`) it cost 13 instructions a branch.
    #[inline(always)]
    fn log_call(&mut self, insn: &Insn, gen: u64, call: u32) {
        if insn.class == Class::Call && !(insn.direct && insn.disp == 0) {
            self.push(insn.next(), gen, call);
        }
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn pop(&mut self) -> Result<u64, PtError> {
        self.pop_call().map(|(ip, _)| ip)
    }

    /// The return address and its call's (generation, node).
    #[inline]
    fn pop_call(&mut self) -> Result<(u64, (u64, u32)), PtError> {
        if self.len == 0 {
            return Err(PtError::RETSTACK_EMPTY);
        }
        self.len -= 1;
        self.top = self.top.wrapping_sub(1) & 63;
        let e = self.entries[usize::from(self.top & 63)];
        Ok((e.ip, (e.gen, e.call)))
    }

    /// Empties the stack at a PSB+ decoded through. The hardware
    /// compresses only returns whose calls it saw since the last PSB (the
    /// SDM's return compression; perf's decoder empties its stack at
    /// every PSB too), so on a sound trace this changes nothing; on a
    /// corrupt one, a compressed return against a call made before the
    /// PSB is an error here as it is in a chunk that starts at that PSB,
    /// so the output does not depend on where chunks start. libipt 2.1.2
    /// keeps its stack through a PSB and pops such a call while it has
    /// one (`pre_psb_limit`: 64 calls on the stack at once after the PSB
    /// overwrite them all), where `pop`'s caller says the two differ.
    #[inline]
    fn clear_at_psb(&mut self) {
        // The calls it held join those libipt holds from before (the
        // limit is never below `len`: together at most 64).
        self.pre_psb_limit -= self.len;
        self.len = 0;
    }

    /// Forgets the calls' nodes (another image: their links may not
    /// hold).
    fn forget_calls(&mut self) {
        for e in &mut self.entries {
            e.gen = 0;
            e.call = NO_NODE;
        }
    }
}

/// How far a walk without trace got.
enum Reach {
    /// The wanted IP (or instruction) was reached.
    Reached,
    /// The block is full, or the next instruction is in another section,
    /// or a direct call or jump ended it.
    Stopped,
    /// This instruction needs trace to go on.
    NeedTrace(Insn),
}

/// The block decoder.
pub struct BlockDecoder<'a> {
    pub evdec: EventDecoder<'a>,
    errata: Errata,
    /// The address filter ranges, when some range is configured (boxed:
    /// only SKL014's workaround reads them, off the hot path).
    addr_filter: Option<Box<[AddrRange; 4]>>,
    /// The current event; `None` after the event decoder failed (libipt
    /// fills it with all-ones then).
    event: Option<Ev>,
    status: Result<(), PtError>,
    tsc: u64,
    lost_mtc: u32,
    lost_cyc: u32,
    cbr: u32,
    mode: u32,
    ip: u64,
    enabled: bool,
    /// Inside a TSX transaction (blocks are speculative).
    speculative: bool,
    retstack: RetStack,
    /// The instruction a paging or ptwrite event bound to: the decoder
    /// stays at it until the events binding to it are handed out
    /// (`process_insn`, `insn`).
    postponed: Option<Insn>,
    /// A paging / ptwrite event already bound to the postponed
    /// instruction: a second one waits for the next.
    bound_paging: bool,
    bound_vmcs: bool,
    bound_ptwrite: bool,
    /// The event trace kinds ([`binds`]: iret, vmentry, uiret) already
    /// bound to the postponed instruction.
    bound_binds: u8,
    /// Tick events are on ([`Self::enable_tick_events`]).
    tick_events: bool,
    /// A TRIG's anchor (libipt 2.2's `has_icnt`, `icnt`): the last event
    /// used up whose IP the trace gave, and the instructions walked since
    /// ([`Self::anchor`]). Counted only on the general path's walks (the
    /// fast path walks only while a TNT or TIP is the event, and using
    /// that up anchors again before another event is current).
    anchor: Option<u32>,
    /// The current event's IP is the instruction it bound to, not one the
    /// trace gave (a PTWRITE, IRET, VM entry or UIRET without an IP): it
    /// anchors no TRIG.
    ip_from_insn: bool,
    image: Image,
    /// Where the last fast block went (see [`Chain`]).
    chain: Chain,
    /// [`Self::fast_ready`], kept so that the fast path tests one flag
    /// rather than five fields per block: every public method that can
    /// change them (`sync_forward`, `sync_set`, `event`, the general
    /// path of `next_block`) sets it before it returns, and within the
    /// fast path only `fetch_event_slow` can change them, which sets it
    /// too. [`super::FastDecoder`] clears it when it stops.
    fast: bool,
}

/// The fast path's link state: the node the last block's successor link
/// named (used when it starts at the decoder's IP), and the link to fill
/// when it did not (the last block's node and which successor). Valid
/// only in the code cache's generation `gen`, and only with the image it
/// was made with (`set_image` clears it: a link joins runs of one
/// section, which then is in the image).
#[derive(Clone, Copy)]
struct Chain {
    gen: u64,
    next: u32,
    from: u32,
    slot: u8,
}

impl Chain {
    const NONE: Chain = Chain {
        gen: 0,
        next: NO_NODE,
        from: NO_NODE,
        slot: 0,
    };

    /// The node of the run from `ip`, looked up in `image` and the code
    /// cache and linked from the last block's node (`None`: the general
    /// path says).
    #[inline(always)]
    fn look_up(self, image: &Image, code: &mut CodeCache, ip: u64) -> Option<u32> {
        let s = image.find(ip).ok()?;
        let cur = code.node_at(s, ip).ok()?;
        // (The lookup may have cleared the cache: the generation is read
        // after it.)
        if self.gen == code.gen() && code.node(self.from).is_some_and(|n| n.key == s.key) {
            code.link(self.from, usize::from(self.slot), cur);
        }
        Some(cur)
    }
}

/// `pt_insn_binds_to_pip`: MOV CR3, VMLAUNCH and VMRESUME (far returns
/// here, as in libipt), or any far branch.
fn binds_to_pip(insn: &Insn) -> bool {
    insn.mov_cr3
        || matches!(
            insn.class,
            Class::FarCall | Class::FarReturn | Class::FarJump
        )
}

/// `pt_insn_binds_to_vmcs`: VMPTRLD, VMLAUNCH and VMRESUME, or any far
/// branch.
fn binds_to_vmcs(insn: &Insn) -> bool {
    insn.vmptrld
        || matches!(
            insn.class,
            Class::FarCall | Class::FarReturn | Class::FarJump
        )
}

/// `pt_insn_is_ptwrite`.
fn is_ptwrite(insn: &Insn) -> bool {
    insn.class == Class::Ptwrite
}

/// Whether an event binds to an instruction.
type Binds = fn(&Insn) -> bool;

/// The instructions an event trace event without an IP binds to, and
/// its [`Insn::binds`] bit: `pt_insn_is_iret`, `_is_vmentry`, `_is_uiret`.
fn binds_to(kind: &Kind) -> Option<(Binds, u8)> {
    fn iret(i: &Insn) -> bool {
        i.binds & binds::IRET != 0
    }
    fn vmentry(i: &Insn) -> bool {
        i.binds & binds::VMENTRY != 0
    }
    fn uiret(i: &Insn) -> bool {
        i.binds & binds::UIRET != 0
    }
    match kind {
        Kind::Iret { .. } => Some((iret, binds::IRET)),
        Kind::VmEntry { .. } => Some((vmentry, binds::VMENTRY)),
        Kind::Uiret { .. } => Some((uiret, binds::UIRET)),
        _ => None,
    }
}

/// Whether an event binds to the postponed instruction `insn` (`binds`),
/// at most one of its kind per instruction (`bound`, reset at the next).
fn bind_once(insn: Option<Insn>, bound: &mut bool, binds: impl Fn(&Insn) -> bool) -> bool {
    match insn {
        Some(i) if !*bound && binds(&i) => {
            *bound = true;
            true
        }
        _ => false,
    }
}

/// The fast path's status after [`BlockDecoder::refill`]: `Status(0)`
/// when the event decoder's fast path gave the next event (see
/// `refill`), `None` (`trailing_event` says) after its general path.
#[inline(always)]
fn after_refill(r: Result<bool, Fail>) -> Option<Result<Status, Fail>> {
    match r {
        Ok(true) => Some(Ok(Status(0))),
        Ok(false) => None,
        Err(f) => Some(Err(f)),
    }
}

/// [`refill_fast`] with a block decoder's fields (`$ev` borrows its
/// `event`, so a method could not take it).
macro_rules! refill_fast_of {
    ($d:ident, $ev:expr) => {
        refill_fast(
            &mut $d.evdec,
            $ev,
            &mut $d.tsc,
            &mut $d.lost_mtc,
            &mut $d.lost_cyc,
        )
    };
}

/// The fast path's status after its event `$ev` was used up: the next
/// one fetched, as `trailing_event_slow` would fetch it first thing
/// (`None`: `trailing_event` says). A macro: `$ev` borrows the decoder's
/// `event` until it is used here, and the same code after the fast
/// path's match, for both of its arms that use it, cost 1.7% of the fast
/// decoder's instructions.
macro_rules! refill_status {
    ($d:ident, $ev:expr) => {
        if refill_fast_of!($d, $ev) {
            Some(Ok(Status(0)))
        } else {
            after_refill($d.fetch_event_slow().map(|_| false))
        }
    };
}

/// [`BlockDecoder::refill`]'s fast path over the decoder's fields (the
/// block decoder's fast path holds the event already): a TNT or TIP
/// next, the event `ev` overwritten in place, its time kept as the
/// decoder's (`tsc`, `lost_mtc`, `lost_cyc`); `false` with nothing
/// changed when the event decoder's general path has to say.
#[inline(always)]
fn refill_fast(
    evdec: &mut EventDecoder<'_>,
    ev: &mut Ev,
    tsc: &mut u64,
    lost_mtc: &mut u32,
    lost_cyc: &mut u32,
) -> bool {
    let (t, m, c) = (ev.tsc, ev.lost_mtc, ev.lost_cyc);
    if evdec.next_event_fast(ev) {
        *tsc = t;
        *lost_mtc = m;
        *lost_cyc = c;
        return true;
    }
    false
}

/// Where conditional branch `last` goes with TNT bit `taken`, and the
/// successor slot of its run. A branch on the bit, not a select: the CPU
/// predicts it (the traced program's own branch, as predictable as it was
/// there) and reads the next run from the cache ahead of the TNT bit,
/// where a select made that read wait for the bit. `black_box` (no
/// instruction) only keeps LLVM from making a select of it again
/// (`hint::cold_path` on either arm did the same, but needs Rust 1.95):
/// ptbench-fast 2-3 % faster on shapes, 1 % on interp.
#[inline(always)]
fn cond_branch_to(last: &Insn, taken: bool) -> (u64, usize) {
    if taken {
        (last.next().wrapping_add(last.disp as u64), NEXT_TAKEN)
    } else {
        std::hint::black_box(());
        (last.next(), NEXT_NOT_TAKEN)
    }
}

/// Where conditional branch or compressed return `last`, ending node
/// `cur`, goes with TNT bit `taken`: the IP and the link to follow
/// (`from`, `slot`); a return pops its address (`None`: nothing there).
#[inline(always)]
fn tnt_branch_to(
    last: &Insn,
    taken: bool,
    retstack: &mut RetStack,
    gen: u64,
    cur: u32,
) -> Option<(u64, u32, usize)> {
    if last.class == Class::Return {
        let (ip, (call_gen, call)) = retstack.pop_call().ok()?;
        let from = if call_gen == gen { call } else { NO_NODE };
        Some((ip, from, NEXT_RETURN))
    } else {
        let (ip, slot) = cond_branch_to(last, taken);
        Some((ip, cur, slot))
    }
}

/// The run linked as successor `slot` of node `from`, where the run just
/// handed out is node `cur`, `node` (read without a lookup when `from`
/// is `cur`: all but returns).
#[inline(always)]
fn successor(code: &CodeCache, node: &Node, cur: u32, from: u32, slot: usize) -> u32 {
    if from == cur {
        node.next[slot]
    } else {
        code.node(from).map_or(NO_NODE, |n| n.next[slot])
    }
}

/// What [`BlockDecoder::follow_tnt`] hands its blocks to. (A trait, not
/// a closure taking either: a closure called from two places was left
/// out of line, which cost the chunk decoder 12% more instructions.)
pub trait Follow {
    /// Before the first block, and before each block for which a packet
    /// was read: the time and the trace offset after that block (they
    /// hold for the blocks after it until the next call).
    fn moved(&mut self, time: (u64, u32, u32), offset: Option<u64>);
    /// A block with `Status(0)`; whether to go on.
    fn block(&mut self, b: &Block) -> bool;
    /// Whether [`Follow::walk`] is to be offered walks (the walks are
    /// not looked up otherwise).
    const WALKS: bool = false;
    /// The blocks of walk `w` ([`crate::walk`]), all with `Status(0)`,
    /// at once: whether to go on after them, or `None` to have them one
    /// by one through [`Follow::block`] instead (where it would stop
    /// within them). `code` is the code cache the walk was found in, as
    /// it is (for [`Walk::expand`], in tests).
    #[inline(always)]
    fn walk(&mut self, _w: &Walk, _code: &CodeCache) -> Option<bool> {
        None
    }
}

/// Whether `F` takes walks.
#[inline(always)]
fn takes_walks<F: Follow>(_: &F) -> bool {
    F::WALKS
}

/// The TNT (its bits, how many, no IP) or TIP (no bits, none left, its
/// IP) that the event decoder's fast path just made event `ev`, as
/// [`BlockDecoder::follow_tnt`] keeps it in locals.
#[inline(always)]
fn next_in_locals(ev: &Ev) -> (u64, u8, u64) {
    match ev.kind {
        Kind::Tnt { bits, size } => (bits, size, 0),
        Kind::Tip { ip } => (0, 0, ip),
        _ => {
            debug_assert!(false, "the fast path gives a TNT or a TIP");
            (0, 0, 0)
        }
    }
}

/// The block of the fast path's cached run `node` (from its IP, in
/// 64-bit code: `BlockDecoder::fast`).
#[inline(always)]
fn fast_block(node: &Node, speculative: bool) -> Block {
    let last = &node.last;
    Block {
        ip: node.ip,
        end_ip: last.ip,
        isid: node.isid as i32,
        mode: mode::BITS64,
        iclass: last.class.raw(),
        ninsn: node.ninsn as u16,
        size: last.size,
        speculative,
        ..Block::default()
    }
}

fn pt(e: PtError) -> Fail {
    Fail::Pt(e)
}

impl<'a> BlockDecoder<'a> {
    pub fn new(
        evdec: EventDecoder<'a>,
        errata: Errata,
        addr_filter: Option<[AddrRange; 4]>,
    ) -> Self {
        BlockDecoder {
            evdec,
            errata,
            addr_filter: addr_filter.map(Box::new),
            event: None,
            status: Err(PtError::NOSYNC),
            tsc: 0,
            lost_mtc: 0,
            lost_cyc: 0,
            cbr: 0,
            mode: mode::UNKNOWN,
            ip: 0,
            enabled: false,
            speculative: false,
            retstack: RetStack::default(),
            postponed: None,
            bound_paging: false,
            bound_vmcs: false,
            bound_ptwrite: false,
            bound_binds: 0,
            tick_events: false,
            anchor: None,
            ip_from_insn: false,
            image: Image::default(),
            chain: Chain::NONE,
            fast: false,
        }
    }

    /// Tick events from now on (libipt's `enable_tick_events`): a tick
    /// where a TIP or TNT comes with a new time. The fast path is off
    /// (it knows no ticks).
    pub fn enable_tick_events(&mut self) {
        self.tick_events = true;
        self.fast = false;
    }

    /// The fast path's preconditions: tracing on, the status fine, 64-bit
    /// code, nothing postponed, an event, no tick events.
    #[inline]
    fn fast_ready(&self) -> bool {
        !self.tick_events
            && self.status.is_ok()
            && self.enabled
            && self.mode == mode::BITS64
            && self.postponed.is_none()
            && self.event.is_some()
    }

    #[inline]
    fn update_fast(&mut self) {
        self.fast = self.fast_ready();
    }

    /// Makes every later block take the general path (the caller stops
    /// calling it).
    pub fn stop_fast(&mut self) {
        self.fast = false;
    }

    /// Decodes with `image` from now on.
    pub fn set_image(&mut self, image: Image) {
        self.image = image;
        self.chain = Chain::NONE;
        self.retstack.forget_calls();
    }

    fn reset(&mut self) {
        self.chain = Chain::NONE;
        self.tsc = 0;
        self.lost_mtc = 0;
        self.lost_cyc = 0;
        self.cbr = 0;
        self.mode = mode::UNKNOWN;
        self.ip = 0;
        self.status = Err(PtError::NOSYNC);
        self.enabled = false;
        self.speculative = false;
        self.event = None;
        self.retstack = RetStack::default();
        self.anchor = None;
        self.ip_from_insn = false;
        self.clear_postponed();
    }

    fn clear_postponed(&mut self) {
        self.postponed = None;
        self.bound_paging = false;
        self.bound_vmcs = false;
        self.bound_ptwrite = false;
        self.bound_binds = 0;
    }

    /// Stays at `insn`, to which the current event bound, until the
    /// events binding to it are handed out (`pt_blk_postpone_insn`).
    fn postpone(&mut self, insn: Insn) -> Result<Status, Fail> {
        if self.postponed.is_some() {
            return Err(Fail::Pt(PtError::INTERNAL));
        }
        self.postponed = Some(insn);
        Ok(self.status(Status::EVENT_PENDING))
    }

    /// Goes past the postponed instruction, if any, with trace if it
    /// needs it (`pt_blk_proceed_postponed_insn`).
    fn proceed_postponed(&mut self) -> Result<(), Fail> {
        let Some(insn) = self.postponed else {
            return Ok(());
        };
        if self.enabled {
            match insn.next_ip() {
                Some(next) => self.ip = next,
                None => self.proceed_with_trace(&insn)?,
            }
        }
        self.clear_postponed();
        Ok(())
    }

    #[inline]
    pub fn time(&self) -> (u64, u32, u32) {
        (self.tsc, self.lost_mtc, self.lost_cyc)
    }

    /// The decoder's IP: after a `NOMAP` error, the address no section
    /// holds (the one libipt's image was asked for).
    pub fn ip(&self) -> u64 {
        self.ip
    }

    pub fn cbr(&self) -> u32 {
        self.cbr
    }

    /// Takes the next event from the event decoder; a failure is kept in
    /// `status` for later, as libipt does.
    #[inline(always)]
    fn fetch_event(&mut self) -> Result<(), Fail> {
        self.refill().map(|_| ())
    }

    /// [`Self::fetch_event`], saying whether the event decoder's fast
    /// path gave the next event: `Ok(true)` when the event is now a TNT
    /// (with bits: a TNT packet has at least one) or a TIP and the
    /// status is unchanged, so no event binds where the decoder is
    /// (`trailing_event` would say `Status(0)` while tracing is on).
    #[inline(always)]
    fn refill(&mut self) -> Result<bool, Fail> {
        if let Some(ev) = &mut self.event {
            if refill_fast_of!(self, ev) {
                return Ok(true);
            }
        }
        self.fetch_event_slow().map(|_| false)
    }

    #[inline(never)]
    fn fetch_event_slow(&mut self) -> Result<(), Fail> {
        match &self.event {
            Some(ev) => {
                self.tsc = ev.tsc;
                self.lost_mtc = ev.lost_mtc;
                self.lost_cyc = ev.lost_cyc;
                let ev = *ev;
                self.anchor(&ev);
            }
            None => {
                self.tsc = u64::MAX;
                self.lost_mtc = u32::MAX;
                self.lost_cyc = u32::MAX;
            }
        }
        match self.evdec.next_event() {
            Ok(ev) => {
                self.event = Some(ev);
                if let Kind::Trig {
                    anchored: false, ..
                } = ev.kind
                {
                    self.place_trig();
                }
            }
            Err(Fail::Pt(e)) => {
                self.status = Err(e);
                self.event = None;
            }
            Err(f) => {
                self.update_fast();
                return Err(f);
            }
        }
        self.update_fast();
        Ok(())
    }

    #[inline]
    fn status(&self, flags: u32) -> Status {
        let mut f = flags;
        if !self.enabled {
            f |= Status::IP_SUPPRESSED;
        }
        if self.status == Err(PtError::EOS) {
            f |= Status::EOS;
        }
        Status(f)
    }

    pub fn sync_forward(&mut self) -> Result<Status, Fail> {
        self.reset();
        let r = self.evdec.sync_forward().and_then(|()| self.start());
        self.update_fast();
        r
    }

    pub fn sync_set(&mut self, offset: u64) -> Result<Status, Fail> {
        self.reset();
        let r = self.evdec.sync_set(offset).and_then(|()| self.start());
        self.update_fast();
        r
    }

    fn start(&mut self) -> Result<Status, Fail> {
        let mut copy = self.evdec.clone();
        loop {
            if copy.pos() != self.evdec.pos() {
                break;
            }
            let ev = match copy.next_event() {
                Ok(ev) => ev,
                Err(Fail::Pt(e)) if e == PtError::EOS => break,
                Err(f) => return Err(f),
            };
            if !ev.status_update {
                break;
            }
            if let Kind::Enabled { ip, .. } = ev.kind {
                self.enabled = true;
                self.ip = ip;
                break;
            }
        }
        self.status = Ok(());
        self.fetch_event()?;
        self.trailing_event(None)
    }

    /// Code to decode in no execution mode: `NO_MODE`, where libipt
    /// decodes on in no mode or in its block cache's (docs/decoding.md).
    #[cold]
    #[inline(never)]
    fn no_mode(&mut self) -> Fail {
        self.evdec
            .note_libipt_differs(crate::event::CODE_IN_NO_MODE);
        Fail::Pt(PtError::NO_MODE)
    }

    /// The instruction at the decoder's IP, added to `block` (`None`: it
    /// does not fit: the block is full or it is in another section).
    fn one_insn(&mut self, code: &mut CodeCache, block: &mut Block) -> Result<Option<Insn>, Fail> {
        // A truncated instruction is a block's last.
        if block.ninsn == u16::MAX || block.truncated {
            return Ok(None);
        }
        let bits = match self.mode {
            mode::BITS64 => 64,
            mode::BITS32 => 32,
            mode::BITS16 => 16,
            _ => {
                // libipt looks for the code first: no code is `NOMAP`
                // in any mode.
                self.image.find(self.ip)?;
                return Err(self.no_mode());
            }
        };
        let s = self.image.find(self.ip)?;
        let isid = s.isid as i32;
        let insn = if bits == 64 {
            code.insn(s, self.ip)
        } else {
            code.insn_in(s, self.ip, bits)
        };
        let insn = match insn {
            Ok(i) => i,
            Err(f) if f.is_cut() => return self.truncated_insn(block, bits),
            Err(e) => return Err(e),
        };
        if !self.add_insn(block, &insn, isid) {
            return Ok(None);
        }
        Ok(Some(insn))
    }

    /// Adds `insn`, of section `isid`, to `block` as its last
    /// instruction; `false` when the block holds another section's.
    #[inline(always)]
    fn add_insn(&mut self, block: &mut Block, insn: &Insn, isid: i32) -> bool {
        if isid != block.isid {
            if block.ninsn > 0 {
                return false;
            }
            block.isid = isid;
        }
        self.log_call(insn);
        block.iclass = insn.class.raw();
        block.end_ip = insn.ip;
        block.size = insn.size;
        block.ninsn += 1;
        if let Some(n) = &mut self.anchor {
            *n = n.saturating_add(1);
        }
        true
    }

    /// The TRIG anchor after event `ev` was used up (libipt 2.2's
    /// `pt_blk_find_trig_anchor`, called for every event, where ptflow
    /// calls it for every event its general path fetches past: see
    /// `anchor`): an event whose IP the trace gave anchors (a count of
    /// 0 from here), a disable or an overflow resolved while disabled
    /// clears it, the others (paging, VMCS, CBR, MNT, TraceStop, MWAIT,
    /// PWRE, PWRX, SIPI, and the kinds that may have an IP when they
    /// have none) leave it. An enable, TIP, TNT or asynchronous
    /// branch without an IP clears it here, where libipt 2.2 reports an
    /// internal error (2.1.2, the reference, goes on: so must ptflow).
    #[cold]
    #[inline(never)]
    fn anchor(&mut self, ev: &Ev) {
        let anchored = !ev.ip_suppressed && !self.ip_from_insn;
        self.ip_from_insn = false;
        match ev.kind {
            Kind::Paging { .. }
            | Kind::Sipi { .. }
            | Kind::Cbr { .. }
            | Kind::Mnt
            | Kind::Stop
            | Kind::Vmcs { .. }
            | Kind::Mwait { .. }
            | Kind::Pwre { .. }
            | Kind::Pwrx { .. }
            | Kind::Pending
            | Kind::Ignore => {}
            Kind::Disabled { .. } | Kind::AsyncDisabled { .. } => self.anchor = None,
            Kind::Enabled { .. }
            | Kind::AsyncBranch { .. }
            | Kind::Tip { .. }
            | Kind::Tnt { .. }
            | Kind::Overflow { .. } => self.anchor = anchored.then_some(0),
            Kind::Trig {
                anchored: false, ..
            } => {}
            _ if anchored => self.anchor = Some(0),
            _ => {}
        }
    }

    /// Gives the current TRIG event with an instruction count its place
    /// if it has none yet (`pt_blk_provide_trig_anchor`): the count is
    /// from the anchor, so the instructions walked since are taken off
    /// and the IP is the decoder's. No anchor, or more instructions
    /// walked than the count, is libipt's `BAD_PACKET`.
    #[cold]
    #[inline(never)]
    fn provide_trig_anchor(&mut self) -> Result<(u64, u16), Fail> {
        let walked = self.anchor;
        let here = self.ip;
        let Some(Ev {
            kind: Kind::Trig {
                ip, icnt, anchored, ..
            },
            ip_suppressed: false,
            ..
        }) = &mut self.event
        else {
            return Err(Fail::Pt(PtError::INTERNAL));
        };
        if !*anchored {
            let Some(walked) = walked else {
                return Err(Fail::Pt(PtError::BAD_PACKET));
            };
            if u32::from(*icnt) < walked {
                return Err(Fail::Pt(PtError::BAD_PACKET));
            }
            *icnt -= walked as u16;
            *ip = here;
            *anchored = true;
        }
        Ok((*ip, *icnt))
    }

    /// A TRIG with an instruction count that just became the event,
    /// while tracing is on and no instruction is postponed: placed from
    /// its anchor now (libipt 2.2 does so at once too, in
    /// `pt_blk_proceed_trailing_event`, nothing walked in between), so that
    /// `trailing_event_slow` only reads it. What fails here (no anchor,
    /// more instructions walked than the count) is left for
    /// `proceed_to_trig` to report, at the next block. Out of line: TRIG
    /// handling in `trailing_event_slow` cost ptbench-fast 2.3% more
    /// instructions on interp (code generation of the fast path; any
    /// call there did).
    #[cold]
    #[inline(never)]
    fn place_trig(&mut self) {
        let suppressed = self.event.is_none_or(|e| e.ip_suppressed);
        if self.enabled && self.postponed.is_none() && !suppressed {
            let _ = self.provide_trig_anchor();
        }
    }

    /// Walks to a TRIG's place (`pt_blk_proceed_to_trig`): to its anchor,
    /// then its count of instructions on, which need no trace (libipt's
    /// `BAD_QUERY` where one does). `false` when the block ended first:
    /// the event keeps what is left of the count. Unlike libipt, a direct
    /// call or jump on the way ends the block, as everywhere else in this
    /// decoder (ptdec builds its call stacks from the blocks' last
    /// instructions); the instructions are the same.
    #[cold]
    #[inline(never)]
    fn proceed_to_trig(&mut self, code: &mut CodeCache, block: &mut Block) -> Result<bool, Fail> {
        let (ip, mut icnt) = self.provide_trig_anchor()?;
        // libipt 2.2 has the count precise while tracing is off (the
        // event decoder refuses another), and answers an internal error
        // for a count of 0 there (its check is the wrong way round).
        if !self.enabled {
            return Ok(true);
        }
        match self.proceed_to(code, block, Some(ip))? {
            Reach::Reached => {}
            Reach::Stopped => return Ok(false),
            Reach::NeedTrace(_) => return Err(Fail::Pt(BAD_QUERY)),
        }
        while icnt > 0 {
            let Some(insn) = self.one_insn(code, block)? else {
                return Ok(false);
            };
            let Some(next) = insn.next_ip() else {
                return Err(Fail::Pt(BAD_QUERY));
            };
            self.ip = next;
            icnt -= 1;
            if let Some(Ev {
                kind: Kind::Trig { ip, icnt: left, .. },
                ..
            }) = &mut self.event
            {
                *ip = next;
                *left = icnt;
            }
            if matches!(insn.class, Class::Call | Class::Jump) {
                return Ok(icnt == 0);
            }
        }
        Ok(true)
    }

    /// The instruction at the decoder's IP, which its section's end
    /// cuts, read on from the sections after it and added to `block` as
    /// its last, its bytes in the block (a truncated block: libipt's
    /// `pt_blk_proceed_one_insn` over `pt_insn_decode`): `None` when it
    /// does not fit, as [`Self::one_insn`].
    #[cold]
    #[inline(never)]
    fn truncated_insn(&mut self, block: &mut Block, bits: u32) -> Result<Option<Insn>, Fail> {
        if block.ninsn == u16::MAX || block.truncated {
            return Ok(None);
        }
        let (insn, raw) = self.image.insn_across(self.ip, bits)?;
        let isid = self.image.find(self.ip)?.isid as i32;
        if !self.add_insn(block, &insn, isid) {
            return Ok(None);
        }
        let n = usize::from(insn.size);
        block.raw = [0; 15];
        block.raw[..n].copy_from_slice(&raw[..n]);
        block.truncated = true;
        Ok(Some(insn))
    }

    /// [`Self::truncated_insn`], then on without trace or one step with
    /// trace (`pt_blk_proceed_truncated`): the block ends there.
    #[cold]
    #[inline(never)]
    fn proceed_truncated(&mut self, block: &mut Block, bits: u32) -> Result<(), Fail> {
        let Some(insn) = self.truncated_insn(block, bits)? else {
            return Ok(());
        };
        match insn.next_ip() {
            Some(next) => {
                self.ip = next;
                Ok(())
            }
            None => self.proceed_with_trace(&insn),
        }
    }

    #[inline]
    fn log_call(&mut self, insn: &Insn) {
        self.log_call_from(insn, 0, NO_NODE);
    }

    /// [`Self::log_call`] from node `call` of generation `gen`.
    #[inline]
    fn log_call_from(&mut self, insn: &Insn, gen: u64, call: u32) {
        self.retstack.log_call(insn, gen, call);
    }

    /// Follows direct call or jump `last`, ending node `cur` (no trace
    /// needed): the IP set to its target, the call logged; the link slot.
    #[inline(always)]
    fn fast_direct(&mut self, last: &Insn, gen: u64, cur: u32) -> usize {
        self.ip = last.next().wrapping_add(last.disp as u64);
        self.log_call_from(last, gen, cur);
        NEXT_NOT_TAKEN
    }

    /// Walks without trace until `ip` (`pt_blk_proceed_to_ip`), or with
    /// `None` until trace is needed or a MOV CR3 is reached, where it stays
    /// (`_to_insn` with `pt_insn_changes_cr3`, as a synchronous disable
    /// without an IP walks).
    fn proceed_to(
        &mut self,
        code: &mut CodeCache,
        block: &mut Block,
        ip: Option<u64>,
    ) -> Result<Reach, Fail> {
        loop {
            if Some(self.ip) == ip {
                return Ok(Reach::Reached);
            }
            let Some(insn) = self.one_insn(code, block)? else {
                return Ok(Reach::Stopped);
            };
            if ip.is_none() && insn.mov_cr3 {
                return Ok(Reach::Reached);
            }
            let Some(next) = insn.next_ip() else {
                return Ok(Reach::NeedTrace(insn));
            };
            self.ip = next;
            if matches!(insn.class, Class::Call | Class::Jump) {
                return Ok(if Some(self.ip) == ip {
                    Reach::Reached
                } else {
                    Reach::Stopped
                });
            }
        }
    }

    /// [`Self::proceed_to`] for a synchronous disable without an IP under
    /// erratum SKL014 (Skylake: "Intel PT TIP.PGD May Not Have Target IP
    /// Payload"): a direct call or jump that leaves the address filter's
    /// traced region may disable tracing without giving an IP, so the
    /// disable binds to the first MOV CR3 or the first direct call or jump
    /// whose target tracing does not reach (outside every FilterEn range,
    /// or in a TraceStop range), as `pt_blk_proceed_skl014` finds it.
    /// Unlike libipt, a direct call or jump that stays traced ends the
    /// block with the event not reached yet, and the next block goes on
    /// looking from its target: libipt (2.1.2 and 2.2) says "reached"
    /// there when blocks end at calls and jumps, binding the disable to
    /// the first branch, where ptxed's instruction flow (and the
    /// `skl014-jmp-jmp` vector) has it at the one that leaves.
    #[cold]
    #[inline(never)]
    fn proceed_skl014(&mut self, code: &mut CodeCache, block: &mut Block) -> Result<Reach, Fail> {
        loop {
            let Some(insn) = self.one_insn(code, block)? else {
                return Ok(Reach::Stopped);
            };
            if insn.mov_cr3 {
                return Ok(Reach::Reached);
            }
            let Some(next) = insn.next_ip() else {
                return Ok(Reach::NeedTrace(insn));
            };
            if matches!(insn.class, Class::Call | Class::Jump) {
                let ranges = self.addr_filter.as_deref().map_or(&[][..], |r| &r[..]);
                if !filter_allows(ranges, next) {
                    return Ok(Reach::Reached);
                }
                self.ip = next;
                return Ok(Reach::Stopped);
            }
            self.ip = next;
        }
    }

    /// Walks without trace to the first instruction `pred` accepts and
    /// stays at it (`pt_blk_proceed_to_insn`): `Ok(None)` when the block
    /// ended first, libipt's `BAD_QUERY` when trace is needed first.
    fn proceed_to_insn(
        &mut self,
        code: &mut CodeCache,
        block: &mut Block,
        pred: fn(&Insn) -> bool,
    ) -> Result<Option<Insn>, Fail> {
        loop {
            let Some(insn) = self.one_insn(code, block)? else {
                return Ok(None);
            };
            if pred(&insn) {
                return Ok(Some(insn));
            }
            let Some(next) = insn.next_ip() else {
                return Err(Fail::Pt(BAD_QUERY));
            };
            self.ip = next;
            if matches!(insn.class, Class::Call | Class::Jump) {
                return Ok(None);
            }
        }
    }

    /// Walks to the instruction the current event binds to and takes it
    /// into the block: for a ptwrite event the PTWRITE
    /// (`pt_blk_proceed_to_ptwrite`), for an iret, vmentry or uiret event
    /// the instruction [`binds_to`] says (`pt_blk_proceed_to_iret`, ...):
    /// the next one when the event has no IP (the event gets its IP), the
    /// one at the event's IP otherwise.
    fn proceed_to_bound(
        &mut self,
        code: &mut CodeCache,
        block: &mut Block,
        ev: &Ev,
        binds: Binds,
    ) -> Result<Option<Insn>, Fail> {
        if ev.ip_suppressed {
            let Some(insn) = self.proceed_to_insn(code, block, binds)? else {
                return Ok(None);
            };
            if let Some(e) = &mut self.event {
                e.kind.set_ip(insn.ip);
                e.ip_suppressed = false;
                self.ip_from_insn = true;
            }
            return Ok(Some(insn));
        }
        let ip = match ev.kind {
            Kind::Ptwrite { ip, .. }
            | Kind::Iret { ip }
            | Kind::VmEntry { ip }
            | Kind::Uiret { ip } => ip,
            _ => return Err(Fail::Pt(PtError::INTERNAL)),
        };
        match self.proceed_to(code, block, Some(ip))? {
            Reach::Reached => self.one_insn(code, block),
            Reach::Stopped => Ok(None),
            Reach::NeedTrace(_) => Err(Fail::Pt(BAD_QUERY)),
        }
    }

    /// `pt_blk_proceed_no_event` over cached runs: to the next
    /// instruction that needs trace, then one step with trace.
    #[inline]
    fn proceed_no_event(&mut self, code: &mut CodeCache, block: &mut Block) -> Result<(), Fail> {
        if block.ninsn == u16::MAX {
            return Ok(());
        }
        if self.mode != mode::BITS64 {
            return self.proceed_no_event_by_insn(code, block);
        }
        let s = self.image.find(self.ip)?;
        let isid = s.isid as i32;
        if isid != block.isid {
            if block.ninsn > 0 {
                return Ok(());
            }
            block.isid = isid;
        }
        let key = s.key;
        let run = match code.run(s, self.ip) {
            Ok(run) => run,
            Err(f) if f.is_cut() => return self.proceed_truncated(block, 64),
            Err(e) => return Err(e),
        };
        let n = u32::from(block.ninsn) + run.ninsn;
        if n > u32::from(u16::MAX) {
            return Err(Fail::Unsupported(&"a block of 65535 instructions"));
        }
        let last = run.last;
        block.ninsn = n as u16;
        block.end_ip = last.ip;
        block.iclass = last.class.raw();
        block.size = last.size;
        self.log_call(&last);
        if !last.class.is_branch() {
            // The section ends: the next instruction is in another one
            // (the block ends) or nowhere (libipt's decode error there).
            // Or the run ended before an instruction the section's end
            // cuts, which ends this block too.
            self.ip = last.next();
            let next = self.image.find(self.ip)?;
            if next.key == key && code.run(next, self.ip).is_err_and(Fail::is_cut) {
                return self.proceed_truncated(block, 64);
            }
            return Ok(());
        }
        match last.next_ip() {
            // A direct call or jump ends the block.
            Some(next) => {
                self.ip = next;
                Ok(())
            }
            None => {
                self.ip = last.ip;
                self.proceed_with_trace(&last)
            }
        }
    }

    /// [`Self::proceed_no_event`] in 16- or 32-bit code, an instruction
    /// at a time (the cached runs and their links are 64-bit code's):
    /// to the next instruction that needs trace, then one step with
    /// trace; a direct call or jump, the block's end, or the next
    /// instruction in another section ends the block.
    #[cold]
    #[inline(never)]
    fn proceed_no_event_by_insn(
        &mut self,
        code: &mut CodeCache,
        block: &mut Block,
    ) -> Result<(), Fail> {
        loop {
            let Some(insn) = self.one_insn(code, block)? else {
                return Ok(());
            };
            match insn.next_ip() {
                Some(next) => {
                    self.ip = next;
                    if matches!(insn.class, Class::Call | Class::Jump) {
                        return Ok(());
                    }
                }
                None => return self.proceed_with_trace(&insn),
            }
        }
    }

    #[inline]
    fn cond_branch(&mut self) -> Result<bool, PtError> {
        match &mut self.event {
            Some(Ev {
                kind: Kind::Tnt { bits, size },
                ..
            }) => {
                if *size == 0 {
                    return Err(PtError::INTERNAL);
                }
                *size -= 1;
                Ok((*bits >> *size) & 1 != 0)
            }
            _ => Err(BAD_QUERY),
        }
    }

    #[inline]
    fn proceed_with_trace(&mut self, insn: &Insn) -> Result<(), Fail> {
        match insn.class {
            Class::CondJump => {
                let taken = self.cond_branch().map_err(pt)?;
                let mut ip = insn.next();
                if taken {
                    ip = ip.wrapping_add(insn.disp as u64);
                }
                self.ip = ip;
                return Ok(());
            }
            Class::Return => match self.cond_branch() {
                Ok(true) => {
                    self.ip = match self.retstack.pop() {
                        Ok(ip) => ip,
                        Err(e) => {
                            if self.retstack.pre_psb_limit < 64 {
                                self.evdec
                                    .note_libipt_differs(crate::event::RETURN_PAST_PSB);
                            }
                            return Err(pt(e));
                        }
                    };
                    return Ok(());
                }
                Ok(false) => return Err(Fail::Pt(PtError::BAD_RETCOMP)),
                Err(e) if e == BAD_QUERY => {}
                Err(e) => return Err(Fail::Pt(e)),
            },
            Class::Jump | Class::Call if insn.direct => return Err(Fail::Pt(PtError::INTERNAL)),
            Class::Other | Class::Ptwrite => return Err(Fail::Pt(PtError::INTERNAL)),
            _ => {}
        }
        self.proceed_indirect()
    }

    /// The TIP was used: with tick events on and a time the decoder has
    /// not had yet, the TIP becomes a tick at the branch `from`; else
    /// the next event (`pt_blk_tick`).
    #[inline]
    fn tick(&mut self, from: u64) -> Result<(), Fail> {
        if self.tick_events {
            if let Some(ev) = self.event.as_mut().filter(|ev| ev.tsc != self.tsc) {
                ev.kind = Kind::Tick { ip: from };
                return Ok(());
            }
        }
        self.fetch_event()
    }

    #[inline]
    fn proceed_indirect(&mut self) -> Result<(), Fail> {
        match self.event {
            Some(Ev {
                kind: Kind::Tip { ip },
                ip_suppressed,
                ..
            }) => {
                if ip_suppressed {
                    return Err(Fail::Pt(PtError::BAD_PACKET));
                }
                let from = self.ip;
                self.ip = ip;
                self.tick(from)
            }
            Some(Ev {
                kind: Kind::Tnt { .. },
                ..
            }) => {
                // A TIP deferred behind the TNT in progress.
                let saved = self.evdec.clone();
                match self.evdec.next_event() {
                    Ok(Ev {
                        kind: Kind::Tip { ip },
                        ..
                    }) => {
                        self.ip = ip;
                        Ok(())
                    }
                    Err(Fail::Unsupported(r)) => Err(Fail::Unsupported(r)),
                    _ => {
                        self.evdec = saved;
                        Err(Fail::Pt(BAD_QUERY))
                    }
                }
            }
            _ => Err(Fail::Pt(BAD_QUERY)),
        }
    }

    /// `pt_blk_next`: the next block, written into `block`, and the
    /// status. In place rather than returned: a returned block was built
    /// with narrow stores and copied out in 16-byte words at once, and
    /// that copy waited on store forwarding (half of `next_block`'s
    /// samples in `ptdec report`, 0.17 s of 1.15 s on the bench's interp
    /// trace).
    #[inline]
    pub fn next_block(&mut self, code: &mut CodeCache, block: &mut Block) -> Result<Status, Fail> {
        if let Some(r) = self.try_fast(code, block) {
            return r;
        }
        self.next_block_slow(code, block)
    }

    /// [`Self::next_block`]'s fast path when it applies (`None`: nothing
    /// changed but the caches; [`Self::next_block_slow`] decodes the
    /// block).
    #[inline(always)]
    pub fn try_fast(
        &mut self,
        code: &mut CodeCache,
        block: &mut Block,
    ) -> Option<Result<Status, Fail>> {
        debug_assert!(!self.fast || self.fast_ready());
        if !self.fast {
            return None;
        }
        self.next_block_fast(code, block)
    }

    /// [`Self::next_block`]'s general path.
    pub fn next_block_slow(
        &mut self,
        code: &mut CodeCache,
        block: &mut Block,
    ) -> Result<Status, Fail> {
        *block = Block {
            ip: self.ip,
            mode: self.mode,
            speculative: self.speculative,
            ..Block::default()
        };
        let r = self.proceed(code, block);
        self.update_fast();
        r
    }

    /// [`Self::next_block`]'s common case in one pass over locals: tracing
    /// on, 64-bit code, nothing postponed, a TNT with bits left or a TIP
    /// in progress, and a cached run from the IP that ends at a branch
    /// this event resolves (or a direct call or jump). `None`, with
    /// nothing changed but the caches, for anything else: the general
    /// path then decodes the block from the same state, so both hand out
    /// the same block, status and error.
    #[inline(always)]
    fn next_block_fast(
        &mut self,
        code: &mut CodeCache,
        block: &mut Block,
    ) -> Option<Result<Status, Fail>> {
        // The rest of the preconditions: `self.fast`.
        let ev = self.event.as_mut()?;
        let start = self.ip;
        // The run at the IP: the one the last block's link named, or
        // looked up (and linked from the last block's run).
        let chain = self.chain;
        let (cur, node) = match code.node(chain.next) {
            Some(n) if chain.gen == code.gen() && n.ip == start => (chain.next, n),
            _ => {
                let cur = chain.look_up(&self.image, code, start)?;
                (cur, code.node(cur)?)
            }
        };
        let gen = code.gen();
        let last = node.last;
        // (Written before it is known to apply: `None` leaves the general
        // path to write the block again.)
        *block = fast_block(node, self.speculative);
        // The block's status: `None` when an event may bind where the
        // decoder now is (`trailing_event` says). Tracing is on, the
        // status is fine and nothing is postponed (checked above), so
        // with a TNT that has bits left or a TIP as the event (also
        // after the event decoder's fast path gave the next one) no
        // event binds here: `Status(0)`.
        let status;
        // The link to follow next: node `from`'s successor `slot`.
        let mut from = cur;
        let mut indirect = NO_NODE;
        let slot = match (last.class, &mut ev.kind) {
            // A conditional branch, or a compressed return, taking the
            // next TNT bit.
            (Class::CondJump | Class::Return, Kind::Tnt { bits, size }) if *size != 0 => {
                let left = *size - 1;
                let taken = (*bits >> left) & 1 != 0;
                // A return not taken (libipt's error) or with nothing to
                // return to: the general path says. (Here, with `size`
                // written before `cond_branch_to`'s `black_box`: both in
                // `tnt_branch_to`, `size` after it, cost ptbench-fast
                // 0.4-0.5% more instructions.)
                if last.class == Class::Return && (!taken || self.retstack.is_empty()) {
                    return None;
                }
                *size = left;
                let (ip, link_from, slot) =
                    tnt_branch_to(&last, taken, &mut self.retstack, gen, cur)?;
                self.ip = ip;
                from = link_from;
                status = if left != 0 {
                    Some(Ok(Status(0)))
                } else {
                    // The TNT is used up: the next event now.
                    refill_status!(self, ev)
                };
                slot
            }
            // An indirect branch (a return not compressed) to the TIP's
            // IP.
            (
                Class::Return
                | Class::Call
                | Class::Jump
                | Class::FarCall
                | Class::FarJump
                | Class::FarReturn,
                Kind::Tip { ip },
            ) if !last.direct && !ev.ip_suppressed => {
                self.ip = *ip;
                // Where the branch went last is a poor guess at an
                // interpreter's dispatch: the run at the target, if the
                // direct-mapped cache has it in this section, is a better
                // one (the next block checks its IP either way). By the
                // node's cache key, not its isid: in a section's part, the
                // whole section's run at the target (cached by isid while
                // another image had it whole) may run past the part's end.
                indirect = code.cached_node(node.key, *ip);
                self.retstack.log_call(&last, gen, cur);
                status = refill_status!(self, ev);
                NEXT_INDIRECT
            }
            // A direct call or jump: no trace needed.
            (Class::Call | Class::Jump, Kind::Tnt { size, .. }) if last.direct && *size != 0 => {
                status = Some(Ok(Status(0)));
                self.fast_direct(&last, gen, cur)
            }
            (Class::Call | Class::Jump, Kind::Tip { .. }) if last.direct => {
                status = Some(Ok(Status(0)));
                self.fast_direct(&last, gen, cur)
            }
            _ => return None,
        };
        debug_assert!(slot <= NEXT_RETURN && NEXT_TAKEN == 1);
        let next = if indirect != NO_NODE {
            indirect
        } else {
            successor(code, node, cur, from, slot)
        };
        self.chain = Chain {
            gen,
            next,
            from,
            slot: slot as u8,
        };
        // (A match: `status.unwrap_or_else` cost 2% more instructions.)
        let r = match status {
            Some(r) => r,
            None => self.trailing_event(Some(block)),
        };
        Some(r)
    }

    /// [`Self::next_block`] for as long as it would hand out blocks of
    /// the fast path's commonest kinds, each with `Status(0)`: a cached
    /// run, linked from the last one, that ends at a conditional branch or
    /// compressed return taking a bit of the TNT in progress, at an
    /// indirect near branch going to the TIP in progress, or at a direct call
    /// or jump, at most `max` of them (direct jumps take no bit: code that
    /// loops through them would go on for ever). A branch that uses up
    /// its TNT or TIP is followed only where the event decoder's fast path
    /// gives the next event (a TNT or a TIP right after it, with no event
    /// binding there: [`EventDecoder::next_event_fast`]), as
    /// `next_block`'s fast path takes it. `each` gets every such block (in
    /// `block`), and before the first and before each one for which a
    /// packet was read, the time ([`Self::time`]) and the trace offset
    /// after that block ([`Follow`]); the first block of another kind
    /// is left to [`Self::next_block`]. The
    /// number handed out. The same blocks and the same state as that many
    /// calls of `next_block`, but the IP, the link and the TNT stay in
    /// registers from one block to the next, where `next_block` reads and
    /// writes them in the decoder for every block. `each.block` returns
    /// whether to go on after its block; with `USER_ONLY`, a block in kernel code
    /// (an IP with bit 63 set) is left to `next_block` too. With `LOCAL`,
    /// `each` gets each block from a local and `block` is left as it was:
    /// for a caller that calls `next_block` next, which writes it.
    ///
    /// Where `each` takes walks ([`Follow::walk`], [`crate::walk`]), kept
    /// in `walks`, and a TNT with three bits or more is in progress, a
    /// second copy of the loop runs, which hands out walks too. In one
    /// copy, the walks' values cost the loop its registers where there
    /// are almost no walks: ptbench-fast with walks took 1.618 to 1.768 G
    /// instructions on the bench's interp trace (1.521 G without), up to
    /// 0.123 instead of 0.106 s. Which copy runs changes no output: both
    /// leave the decoder where the blocks one by one would.
    #[inline(always)]
    pub fn follow_tnt<const USER_ONLY: bool, const LOCAL: bool>(
        &mut self,
        code: &CodeCache,
        walks: &mut Walks,
        block: &mut Block,
        max: u32,
        each: &mut impl Follow,
    ) -> u32 {
        self.follow_loop::<USER_ONLY, LOCAL, false>(code, walks, block, max, each)
    }

    /// [`Self::follow_tnt`] handing out walks. Out of line, and entered
    /// only where a TNT with bits for a walk is in progress.
    #[inline(never)]
    fn follow_walking<const USER_ONLY: bool, const LOCAL: bool>(
        &mut self,
        code: &CodeCache,
        walks: &mut Walks,
        block: &mut Block,
        max: u32,
        each: &mut impl Follow,
    ) -> u32 {
        self.follow_loop::<USER_ONLY, LOCAL, true>(code, walks, block, max, each)
    }

    /// [`Self::follow_tnt`]'s loop, handing out walks with `WALK`.
    #[inline(always)]
    fn follow_loop<const USER_ONLY: bool, const LOCAL: bool, const WALK: bool>(
        &mut self,
        code: &CodeCache,
        walks: &mut Walks,
        block: &mut Block,
        max: u32,
        each: &mut impl Follow,
    ) -> u32 {
        debug_assert!(!self.fast || self.fast_ready());
        if !self.fast {
            return 0;
        }
        let Some(ev) = self.event.as_mut() else {
            return 0;
        };
        // The event in progress in locals: a TNT's bits and how many are
        // left, or (`left` 0) a TIP's IP.
        let (mut tnt, mut left, mut tip) = match ev.kind {
            Kind::Tnt { bits, size } if size != 0 => (bits, size, 0),
            Kind::Tip { ip } if !ev.ip_suppressed => (0, 0, ip),
            _ => return 0,
        };
        if !WALK && left > 2 && takes_walks(each) {
            return self.follow_walking::<USER_ONLY, LOCAL>(code, walks, block, max, each);
        }
        let gen = code.gen();
        let chain = self.chain;
        if chain.gen != gen {
            return 0;
        }
        let mut n = 0;
        let (mut next, mut from, mut slot) = (chain.next, chain.from, chain.slot);
        let mut ip = self.ip;
        let mut time = (self.tsc, self.lost_mtc, self.lost_cyc);
        let mut off = self.evdec.offset().ok();
        // Whether `each` is to be told the time and offset before the next
        // block: before the first, and where a packet was read.
        let mut moved = true;
        // After a branch that used up the event in progress, the next one
        // into the locals, from the event decoder's fast path; `false`
        // where that path cannot say (nothing changed).
        macro_rules! refilled {
            ($d:ident) => {
                refill_fast_of!($d, ev) && {
                    (tnt, left, tip) = next_in_locals(ev);
                    time = ($d.tsc, $d.lost_mtc, $d.lost_cyc);
                    off = $d.evdec.offset().ok();
                    moved = true;
                    true
                }
            };
        }
        // With `LOCAL`, each block is handed out from a local and `block`
        // is not written: the fields `each` does not read are never
        // stored. Writing the whole `Block` per block was a tenth of
        // ptbench-fast's instructions (2.006 G of interp's 10 MB: 1.828 G
        // with a local, 1.744 G without writing the last block after the
        // loop). The chunk decoder follows with `LOCAL` too: it took
        // 1.2-1.7% more instructions of `ptdec report -j1` before its
        // blocks after a call's first became cheaper (`on_followed_more`),
        // and 0.3-0.8% fewer since (interp 8.051 to 8.023 G, shapes
        // 7.282 to 7.225 G, the real LLDB row's 3 MB tile 5.436 to
        // 5.412 G).
        while let Some(node) = code.node(next) {
            if node.ip != ip || n == max || (USER_ONLY && ip >> 63 == 1) {
                break;
            }
            let last = &node.last;
            let cur = next;
            let mut indirect = NO_NODE;
            // As next_block_fast's arms for these kinds. A branch that
            // uses up its event takes the next one first, from the event
            // decoder's fast path (a TNT or a TIP right after it, with no
            // event binding here: the block's status is `Status(0)`); where
            // that path cannot say, nothing has changed and the block is
            // left to `next_block`.
            // Tests one after another, not a `match`: LLVM made the match
            // a jump table, one indirect branch per block whose target
            // changes from block to block. `perf annotate` put a fifth of
            // ptbench-fast's samples at it; as tests, commonest first,
            // ptbench-fast took 15% less CPU on the bench's interp trace,
            // 11% less on shapes and 1.4% less on the real LLDB row
            // (medians of 11 interleaved runs, `perf stat`), for 10% more
            // instructions.
            let class = last.class;
            // Plain code ahead: the blocks the next bits (never the last)
            // take the decoder through, at once, where there are two or
            // more (`crate::walk`).
            if WALK && class == Class::CondJump && left > 2 {
                let len = (left - 1).min(WALK_BITS);
                let bits = ((tnt >> (left - len)) & ((1u64 << len) - 1)) as u8;
                let w = walks.get(code, cur, node, bits, len);
                if w.blocks >= 2 && w.blocks <= max - n {
                    if moved {
                        each.moved(time, off);
                        moved = false;
                    }
                    if let Some(go_on) = each.walk(w, code) {
                        left -= w.used;
                        n += w.blocks;
                        ip = w.ip;
                        (from, slot) = (w.from, w.slot);
                        next = code
                            .node(from)
                            .map_or(NO_NODE, |nd| nd.next[usize::from(slot)]);
                        if !go_on {
                            break;
                        }
                        continue;
                    }
                }
            }
            let (to, to_slot) = if class == Class::CondJump && left > 1 {
                left -= 1;
                let (to_ip, to_slot) = cond_branch_to(last, (tnt >> left) & 1 != 0);
                ip = to_ip;
                (cur, to_slot)
            } else if last.direct && (class == Class::Call || class == Class::Jump) {
                ip = last.next().wrapping_add(last.disp as u64);
                self.retstack.log_call(last, gen, cur);
                (cur, NEXT_NOT_TAKEN)
            } else if class == Class::Return && left > 1 {
                if (tnt >> (left - 1)) & 1 == 0 || self.retstack.is_empty() {
                    break;
                }
                let Ok((to, (call_gen, call))) = self.retstack.pop_call() else {
                    break;
                };
                left -= 1;
                ip = to;
                (if call_gen == gen { call } else { NO_NODE }, NEXT_RETURN)
            } else if left == 1 && (class == Class::CondJump || class == Class::Return) {
                let taken = tnt & 1 != 0;
                if class == Class::Return && (!taken || self.retstack.is_empty()) {
                    break;
                }
                if !refilled!(self) {
                    break;
                }
                if class == Class::Return {
                    let Ok((to, (call_gen, call))) = self.retstack.pop_call() else {
                        unreachable!("a return address was there");
                    };
                    ip = to;
                    (if call_gen == gen { call } else { NO_NODE }, NEXT_RETURN)
                } else {
                    let (to_ip, to_slot) = cond_branch_to(last, taken);
                    ip = to_ip;
                    (cur, to_slot)
                }
            } else if left == 0
                // Near ones only: a far transfer (a syscall, `int`,
                // `lcall`) leaves to the kernel or maybe another mode,
                // where `next_block` has the chunk decoder look again.
                && !last.direct
                && (class == Class::Return || class == Class::Call || class == Class::Jump)
            {
                let target = tip;
                if !refilled!(self) {
                    break;
                }
                ip = target;
                // As `next_block_fast`: the run at the target in the
                // direct-mapped cache, by the node's cache key.
                indirect = code.cached_node(node.key, ip);
                self.retstack.log_call(last, gen, cur);
                (cur, NEXT_INDIRECT)
            } else {
                break;
            };
            if moved {
                each.moved(time, off);
                moved = false;
            }
            let go_on = if LOCAL {
                each.block(&fast_block(node, self.speculative))
            } else {
                *block = fast_block(node, self.speculative);
                each.block(block)
            };
            n += 1;
            from = to;
            slot = to_slot as u8;
            next = if indirect != NO_NODE {
                indirect
            } else {
                successor(code, node, cur, from, to_slot)
            };
            if !go_on {
                break;
            }
        }
        if let Kind::Tnt { size, .. } = &mut ev.kind {
            *size = left;
        }
        self.ip = ip;
        self.chain = Chain {
            gen,
            next,
            from,
            slot,
        };
        n
    }

    /// The common case first: a TNT or TIP is in progress, no event to
    /// indicate.
    #[inline]
    fn proceed(&mut self, code: &mut CodeCache, block: &mut Block) -> Result<Status, Fail> {
        if self.status.is_ok()
            && self.enabled
            && matches!(
                self.event,
                Some(Ev {
                    kind: Kind::Tnt { .. } | Kind::Tip { .. },
                    ..
                })
            )
        {
            self.proceed_no_event(code, block)?;
            return self.trailing_event(Some(block));
        }
        self.proceed_slow(code, block)
    }

    #[inline(never)]
    fn proceed_slow(&mut self, code: &mut CodeCache, block: &mut Block) -> Result<Status, Fail> {
        if let Err(e) = self.status {
            if e != PtError::EOS || !self.enabled {
                return Err(Fail::Pt(e));
            }
            self.proceed_no_event(code, block)?;
            return Ok(Status(Status::EOS));
        }
        let Some(ev) = self.event else {
            return Err(Fail::Pt(PtError::INTERNAL));
        };
        match ev.kind {
            Kind::Tnt { .. } | Kind::Tip { .. } => {
                if !self.enabled {
                    return Err(Fail::Pt(PtError::NO_ENABLE));
                }
                self.proceed_no_event(code, block)?;
                self.trailing_event(Some(block))
            }
            _ => self.proceed_event(code, block, ev),
        }
    }

    fn proceed_event(
        &mut self,
        code: &mut CodeCache,
        block: &mut Block,
        ev: Ev,
    ) -> Result<Status, Fail> {
        let to = |this: &mut Self,
                  code: &mut CodeCache,
                  block: &mut Block,
                  ip: u64|
         -> Result<bool, Fail> {
            match this.proceed_to(code, block, Some(ip))? {
                Reach::Reached => Ok(true),
                Reach::Stopped => Ok(false),
                Reach::NeedTrace(_) => Err(Fail::Pt(BAD_QUERY)),
            }
        };
        match ev.kind {
            Kind::Enabled { .. } | Kind::Cbr { .. } | Kind::Overflow { .. } | Kind::Tick { .. } => {
            }
            Kind::Disabled { ip } => {
                if !ev.status_update {
                    let r = if ev.ip_suppressed {
                        if self.errata.skl014 && self.addr_filter.is_some() {
                            self.proceed_skl014(code, block)?
                        } else {
                            self.proceed_to(code, block, None)?
                        }
                    } else {
                        self.proceed_to(code, block, Some(ip))?
                    };
                    match r {
                        Reach::Reached => {}
                        Reach::Stopped => return Ok(Status(0)),
                        Reach::NeedTrace(insn) => {
                            // The disable binds to the branch that would
                            // need trace; a call resumes after itself.
                            self.ip = match insn.class {
                                Class::Call | Class::FarCall => insn.next(),
                                _ => 0,
                            };
                        }
                    }
                }
            }
            Kind::AsyncDisabled { at, .. } => {
                if !to(self, code, block, at)? {
                    return Ok(Status(0));
                }
                if self.errata.skd022 && self.skd022_applies(at)? {
                    // Retried as the synchronous disable it became.
                    let ev = self.skd022_disable(ev);
                    return self.proceed_event(code, block, ev);
                }
            }
            Kind::AsyncBranch { from, .. } => {
                if !to(self, code, block, from)? {
                    return Ok(Status(0));
                }
            }
            Kind::ExecMode { ip, .. }
            | Kind::Iflags { ip, .. }
            | Kind::Tsx { ip, .. }
            | Kind::AsyncPaging { ip, .. }
            | Kind::AsyncVmcs { ip, .. }
            | Kind::Interrupt { ip, .. }
            | Kind::Smi { ip }
            | Kind::Init { ip }
            | Kind::VmExit { ip, .. }
            | Kind::Shutdown { ip }
            | Kind::Uintr { ip, .. } => {
                if !ev.ip_suppressed && !to(self, code, block, ip)? {
                    return Ok(Status(0));
                }
            }
            Kind::Rsm | Kind::Sipi { .. } => {}
            Kind::Iret { .. } | Kind::VmEntry { .. } | Kind::Uiret { .. } => {
                if self.enabled {
                    let Some((binds, bit)) = binds_to(&ev.kind) else {
                        return Err(Fail::Pt(PtError::INTERNAL));
                    };
                    let Some(insn) = self.proceed_to_bound(code, block, &ev, binds)? else {
                        return Ok(Status(0));
                    };
                    self.bound_binds |= bit;
                    return self.postpone(insn);
                }
            }
            Kind::Paging { .. } => {
                if self.enabled {
                    let Some(insn) = self.proceed_to_insn(code, block, binds_to_pip)? else {
                        return Ok(Status(0));
                    };
                    self.bound_paging = true;
                    return self.postpone(insn);
                }
            }
            Kind::Vmcs { .. } => {
                if self.enabled {
                    let Some(insn) = self.proceed_to_insn(code, block, binds_to_vmcs)? else {
                        return Ok(Status(0));
                    };
                    self.bound_vmcs = true;
                    return self.postpone(insn);
                }
            }
            Kind::Ptwrite { .. } => {
                if self.enabled {
                    let Some(insn) = self.proceed_to_bound(code, block, &ev, is_ptwrite)? else {
                        return Ok(Status(0));
                    };
                    self.bound_ptwrite = true;
                    return self.postpone(insn);
                }
            }
            Kind::Exstop { ip } | Kind::Mwait { ip, .. } => {
                if self.enabled && !ev.ip_suppressed && !to(self, code, block, ip)? {
                    return Ok(Status(0));
                }
            }
            Kind::Pwre { .. } | Kind::Pwrx { .. } | Kind::Mnt | Kind::Stop => {}
            Kind::Trig { .. } => {
                if !ev.ip_suppressed && !self.proceed_to_trig(code, block)? {
                    return Ok(Status(0));
                }
            }
            Kind::Tnt { .. } | Kind::Tip { .. } | Kind::Pending | Kind::Ignore => {
                return Err(Fail::Pt(PtError::INTERNAL))
            }
        }
        Ok(self.status(Status::EVENT_PENDING))
    }

    /// `pt_blk_proceed_trailing_event`: whether an event binds to where
    /// the decoder is; the postponed instruction is gone past unless an
    /// event still binds to it.
    #[inline]
    fn trailing_event(&mut self, block: Option<&Block>) -> Result<Status, Fail> {
        // The common case: a TNT with bits left or a TIP, nothing
        // postponed: no event binds here (a tick might, with them on).
        if self.status.is_ok() && self.postponed.is_none() && !self.tick_events {
            match self.event {
                Some(Ev {
                    kind: Kind::Tnt { size, .. },
                    ..
                }) if size != 0 => return Ok(self.status(0)),
                Some(Ev {
                    kind: Kind::Tip { .. },
                    ..
                }) => return Ok(self.status(0)),
                _ => {}
            }
        }
        self.trailing_event_slow(block)
    }

    #[inline(never)]
    fn trailing_event_slow(&mut self, block: Option<&Block>) -> Result<Status, Fail> {
        loop {
            if let Err(e) = self.status {
                self.proceed_postponed()?;
                let flags = if e != PtError::EOS {
                    Status::EVENT_PENDING
                } else {
                    0
                };
                return Ok(self.status(flags));
            }
            let Some(ev) = self.event else {
                return Err(Fail::Pt(PtError::INTERNAL));
            };
            let pending = match ev.kind {
                Kind::Tnt { size, .. } => {
                    // A tick on the first bit used of a TNT with a new
                    // time, handed out with the block that used it
                    // (pending) or, if another branch ended the block,
                    // after the next.
                    let tick = self.tick_events && ev.has_tsc && ev.tsc != self.tsc;
                    match block {
                        Some(b) if tick => matches!(b.iclass, iclass::COND_JUMP | iclass::RETURN),
                        _ if size != 0 => false,
                        _ => {
                            self.fetch_event()?;
                            continue;
                        }
                    }
                }
                Kind::Tick { .. } => {
                    self.proceed_postponed()?;
                    true
                }
                Kind::Tip { .. } => false,
                Kind::Disabled { ip } => match self.postponed {
                    // Indicated on the event flow.
                    None => false,
                    // Without an IP it binds to a postponed MOV CR3.
                    Some(insn) if ev.ip_suppressed && insn.mov_cr3 => true,
                    // Or to the postponed instruction if that needs trace.
                    Some(insn) => match insn.next_ip() {
                        None => {
                            self.ip = match insn.class {
                                Class::Call | Class::FarCall => insn.next(),
                                _ => 0,
                            };
                            true
                        }
                        Some(next) => {
                            self.ip = next;
                            self.clear_postponed();
                            !ev.ip_suppressed && self.ip == ip
                        }
                    },
                },
                Kind::Enabled { .. } | Kind::Cbr { .. } | Kind::Overflow { .. } => {
                    self.proceed_postponed()?;
                    true
                }
                Kind::AsyncDisabled { at, .. } => {
                    self.proceed_postponed()?;
                    if self.ip != at {
                        false
                    } else if self.errata.skd022 && self.skd022_applies(at)? {
                        // The synchronous disable it became is proceeded
                        // to at the next call.
                        self.skd022_disable(ev);
                        false
                    } else {
                        true
                    }
                }
                Kind::AsyncBranch { from, .. } => {
                    self.proceed_postponed()?;
                    self.ip == from
                }
                Kind::AsyncPaging { ip, .. } | Kind::AsyncVmcs { ip, .. } => {
                    self.proceed_postponed()?;
                    ev.ip_suppressed || self.ip == ip
                }
                // Applied at once while disabled; else indicated on the
                // event flow unless it binds to the postponed instruction
                // too (one per instruction).
                Kind::Paging { .. } => {
                    !self.enabled || bind_once(self.postponed, &mut self.bound_paging, binds_to_pip)
                }
                Kind::Vmcs { .. } => {
                    !self.enabled || bind_once(self.postponed, &mut self.bound_vmcs, binds_to_vmcs)
                }
                Kind::Ptwrite { .. } => {
                    let suppressed = ev.ip_suppressed;
                    !self.enabled
                        || bind_once(self.postponed, &mut self.bound_ptwrite, |i| {
                            suppressed && is_ptwrite(i)
                        })
                }
                Kind::Tsx { ip, aborted, .. } => {
                    self.proceed_postponed()?;
                    if ev.ip_suppressed {
                        true
                    } else {
                        if let Some(b) = block.filter(|_| self.errata.bdm64 && aborted) {
                            self.handle_bdm64(b, ip)?;
                        }
                        self.ip == ip
                    }
                }
                Kind::ExecMode { ip, .. }
                | Kind::Iflags { ip, .. }
                | Kind::Interrupt { ip, .. }
                | Kind::Smi { ip }
                | Kind::Init { ip }
                | Kind::VmExit { ip, .. }
                | Kind::Shutdown { ip }
                | Kind::Uintr { ip, .. } => {
                    self.proceed_postponed()?;
                    !self.enabled || ev.ip_suppressed || self.ip == ip
                }
                Kind::Rsm | Kind::Sipi { .. } => {
                    self.proceed_postponed()?;
                    if !ev.ip_suppressed {
                        return Err(Fail::Pt(PtError::INTERNAL));
                    }
                    true
                }
                // As a ptwrite event, with an instruction of its own.
                Kind::Iret { .. } | Kind::VmEntry { .. } | Kind::Uiret { .. } => {
                    let suppressed = ev.ip_suppressed;
                    let Some((binds, bit)) = binds_to(&ev.kind) else {
                        return Err(Fail::Pt(PtError::INTERNAL));
                    };
                    let mut bound = self.bound_binds & bit != 0;
                    let pending = !self.enabled
                        || bind_once(self.postponed, &mut bound, |i| suppressed && binds(i));
                    if bound {
                        self.bound_binds |= bit;
                    }
                    pending
                }
                // Bound to no instruction.
                Kind::Pwre { .. } | Kind::Pwrx { .. } | Kind::Mnt | Kind::Stop => {
                    self.proceed_postponed()?;
                    true
                }
                Kind::Exstop { ip } | Kind::Mwait { ip, .. } => {
                    self.proceed_postponed()?;
                    ev.ip_suppressed || !self.enabled || self.ip == ip
                }
                // Placed here once its count is used up, at its IP; else
                // the next block walks to it (`proceed_to_trig`). Without
                // an IP, or with tracing off, at once. (Its anchor was
                // taken as it became the event: `fetch_event_slow`.)
                Kind::Trig {
                    ip, icnt, anchored, ..
                } => {
                    self.proceed_postponed()?;
                    !self.enabled || ev.ip_suppressed || (anchored && icnt == 0 && ip == self.ip)
                }
                Kind::Pending | Kind::Ignore => return Err(Fail::Pt(PtError::INTERNAL)),
            };
            if pending {
                return Ok(self.status(Status::EVENT_PENDING));
            }
            self.proceed_postponed()?;
            return Ok(self.status(0));
        }
    }

    /// Goes on after a decode error at the next place the trace gives an
    /// IP, rather than at the next PSB (ptxed's `--resync-on-error`,
    /// libipt 2.2's `pt_blk_resync`). Hand-written from what ptxed prints
    /// for libipt's `ptxed-resync-*` tests (2.2's source is not at hand,
    /// and 2.1.2 has no resync): from the event the error left current,
    /// TNTs and TIPs without an IP are dropped; a TIP's target is the
    /// new IP; an event that binds to an IP (an interrupt's FUP, a TSX or
    /// MODE.Exec FUP and its iflags event, PTWRITE's FUP, a TRIG's FUP, a
    /// PSB+'s FUP, a disable) sets the IP
    /// to that and stays pending; an enable (TIP.PGE) is pending with
    /// tracing taken as disabled until it; an event without an IP is
    /// handed out first: `Err(EVENT_IGNORED)` asks the caller to read it
    /// and call again. The return stack is emptied, as at a sync: what
    /// ran without an image may have called or returned.
    pub fn resync(&mut self) -> Result<Status, Fail> {
        let r = self.resync_inner();
        self.update_fast();
        r
    }

    fn resync_inner(&mut self) -> Result<Status, Fail> {
        self.chain = Chain::NONE;
        self.retstack = RetStack::default();
        // What ran since the anchor is unknown: as at a sync.
        self.anchor = None;
        self.clear_postponed();
        loop {
            if let Err(e) = self.status {
                return Err(Fail::Pt(e));
            }
            let Some(ev) = self.event else {
                return Err(Fail::Pt(PtError::INTERNAL));
            };
            let at = |this: &mut Self, ip: u64| {
                this.ip = ip;
                this.enabled = true;
                this.trailing_event(None)
            };
            if ev.status_update {
                // A PSB+: go on as a sync at its PSB does. The chunk
                // decoder's next chunk starts with that sync, so a resync
                // that reads on into it must leave the same state (it
                // left the decoder one packet behind: one more error and
                // resync than in the chunk).
                // The status updates of the PSB+ the decoder synchronized
                // at (the error came before its IP was left) are passed.
                match self.evdec.last_psb() {
                    Some(psb) if self.evdec.sync_offset().ok() != Some(psb) => {
                        return self.sync_set(psb)
                    }
                    Some(_) => {
                        self.fetch_event()?;
                        continue;
                    }
                    None => return Err(Fail::Pt(PtError::INTERNAL)),
                }
            }
            // In no mode, code cannot be decoded (`NO_MODE`): only a
            // MODE.Exec, or a PSB+ above, can end the resync, not each
            // IP the trace gives on the way, which would fail again.
            let no_mode = self.mode == mode::UNKNOWN;
            match ev.kind {
                Kind::Tnt { .. } | Kind::Ignore => self.fetch_event()?,
                Kind::Tip { .. } if ev.ip_suppressed || no_mode => self.fetch_event()?,
                Kind::Tip { ip } => {
                    self.fetch_event()?;
                    // A PSB+ right after it (no TNT or TIP between): go on
                    // from that PSB, as a chunk that starts there does.
                    // What the code between the TIP and the PSB's IP
                    // holds, without a branch, is not listed.
                    if self.event.is_some_and(|e| e.status_update) {
                        continue;
                    }
                    return at(self, ip);
                }
                Kind::Enabled { .. } => {
                    self.enabled = false;
                    return Ok(self.status(Status::EVENT_PENDING));
                }
                Kind::Disabled { .. } | Kind::Overflow { .. } => {
                    self.enabled = true;
                    return Ok(self.status(Status::EVENT_PENDING));
                }
                Kind::AsyncBranch { .. } | Kind::AsyncDisabled { .. } if no_mode => {
                    self.fetch_event()?
                }
                Kind::AsyncBranch { from: ip, .. } | Kind::AsyncDisabled { at: ip, .. } => {
                    return at(self, ip)
                }
                Kind::ExecMode { ip, .. } if !ev.ip_suppressed => return at(self, ip),
                // MODE.Exec's iflags event binds to its FUP as the exec
                // mode event does; so does a TRIG with its IP bit.
                Kind::Iflags { ip, .. }
                | Kind::Tsx { ip, .. }
                | Kind::AsyncPaging { ip, .. }
                | Kind::AsyncVmcs { ip, .. }
                | Kind::Ptwrite { ip, .. }
                | Kind::Exstop { ip }
                | Kind::Mwait { ip, .. }
                | Kind::Trig {
                    ip, anchored: true, ..
                } if !ev.ip_suppressed => {
                    if no_mode {
                        self.fetch_event()?
                    } else {
                        return at(self, ip);
                    }
                }
                Kind::Stop => {
                    self.enabled = false;
                    return Err(Fail::Pt(PtError::EVENT_IGNORED));
                }
                Kind::Pending => return Err(Fail::Pt(PtError::INTERNAL)),
                _ => return Err(Fail::Pt(PtError::EVENT_IGNORED)),
            }
        }
    }

    /// `pt_blk_event`: the pending event, applied.
    pub fn event(&mut self) -> Result<(Ev, Status), Fail> {
        let r = self.event_inner();
        self.update_fast();
        r
    }

    fn event_inner(&mut self) -> Result<(Ev, Status), Fail> {
        if let Err(e) = self.status {
            return Err(Fail::Pt(e));
        }
        let Some(mut ev) = self.event else {
            return Err(Fail::Pt(PtError::INTERNAL));
        };
        if ev.status_update {
            // A PSB+'s status updates, handed out where it was decoded
            // through (as at a sync, where the stack starts empty).
            self.retstack.clear_at_psb();
        }
        match ev.kind {
            Kind::Tnt { size, .. } => {
                // A tick on the first bit used of a TNT with a new time;
                // the TNT stays.
                if !self.tick_events || !ev.has_tsc || ev.tsc == self.tsc {
                    return Err(Fail::Pt(BAD_QUERY));
                }
                let mut tick = ev;
                tick.kind = Kind::Tick { ip: self.ip };
                tick.ip_suppressed = false;
                tick.status_update = false;
                self.tsc = ev.tsc;
                self.lost_mtc = ev.lost_mtc;
                self.lost_cyc = ev.lost_cyc;
                if size == 0 {
                    self.fetch_event()?;
                }
                let s = self.trailing_event(None)?;
                return Ok((tick, s));
            }
            Kind::Tip { .. } => return Err(Fail::Pt(BAD_QUERY)),
            Kind::Tick { .. } => {}
            Kind::Enabled { ip, .. } => {
                if ip == self.ip {
                    ev.kind = Kind::Enabled { ip, resumed: true };
                    self.event = Some(ev);
                }
                if ev.status_update {
                    if !self.enabled {
                        return Err(Fail::Pt(PtError::BAD_STATUS_UPDATE));
                    }
                } else {
                    if ev.ip_suppressed {
                        return Err(Fail::Pt(PtError::NOIP));
                    }
                    if self.enabled {
                        return Err(Fail::Pt(BAD_CONTEXT));
                    }
                    self.ip = ip;
                    self.enabled = true;
                }
            }
            Kind::AsyncDisabled { at, .. } => {
                if self.ip != at {
                    return Err(Fail::Pt(BAD_QUERY));
                }
                self.process_disabled(&ev)?;
            }
            Kind::Disabled { .. } => self.process_disabled(&ev)?,
            Kind::AsyncBranch { from, to } => {
                if self.ip != from {
                    return Err(Fail::Pt(BAD_QUERY));
                }
                if ev.status_update || !self.enabled {
                    return Err(Fail::Pt(BAD_CONTEXT));
                }
                self.ip = to;
            }
            Kind::ExecMode { ip, mode } => {
                if self.enabled && !ev.ip_suppressed && self.ip != ip {
                    return Err(Fail::Pt(BAD_QUERY));
                }
                if ev.status_update
                    && self.enabled
                    && self.mode != mode::UNKNOWN
                    && self.mode != mode
                {
                    return Err(Fail::Pt(PtError::BAD_STATUS_UPDATE));
                }
                self.mode = mode;
            }
            Kind::Iflags { ip, .. }
            | Kind::Interrupt { ip, .. }
            | Kind::Smi { ip }
            | Kind::Init { ip }
            | Kind::VmExit { ip, .. }
            | Kind::Shutdown { ip }
            | Kind::Uintr { ip, .. } => {
                if self.enabled && !ev.ip_suppressed && self.ip != ip {
                    return Err(Fail::Pt(BAD_QUERY));
                }
            }
            Kind::Rsm | Kind::Sipi { .. } => {
                if !ev.ip_suppressed {
                    return Err(Fail::Pt(PtError::INTERNAL));
                }
            }
            Kind::Iret { .. } | Kind::VmEntry { .. } | Kind::Uiret { .. } => {}
            Kind::Cbr { ratio } => self.cbr = u32::from(ratio),
            Kind::Tsx {
                ip, speculative, ..
            } => {
                if !ev.ip_suppressed && self.ip != ip {
                    return Err(Fail::Pt(BAD_QUERY));
                }
                self.speculative = speculative;
            }
            Kind::AsyncPaging { ip, .. } | Kind::AsyncVmcs { ip, .. } => {
                if !ev.ip_suppressed && self.ip != ip {
                    return Err(Fail::Pt(BAD_QUERY));
                }
            }
            // libipt notes the CR3 or VMCS (for its image cache) or
            // nothing.
            Kind::Paging { .. } | Kind::Vmcs { .. } | Kind::Ptwrite { .. } => {}
            Kind::Overflow { ip } => {
                if ev.status_update {
                    return Err(Fail::Pt(BAD_CONTEXT));
                }
                // Tracing resumed at `ip`, or while disabled.
                self.enabled = !ev.ip_suppressed;
                self.speculative = false;
                self.ip = if ev.ip_suppressed { 0 } else { ip };
            }
            Kind::Stop => {
                // Tracing is disabled before it stops.
                if ev.status_update || self.enabled {
                    return Err(Fail::Pt(BAD_CONTEXT));
                }
            }
            Kind::Exstop { ip } | Kind::Mwait { ip, .. } => {
                if !ev.ip_suppressed && self.enabled && self.ip != ip {
                    return Err(Fail::Pt(BAD_QUERY));
                }
            }
            Kind::Pwre { .. } | Kind::Pwrx { .. } | Kind::Mnt => {}
            Kind::Trig { ip, anchored, .. } => {
                if self.enabled && !ev.ip_suppressed && anchored && self.ip != ip {
                    return Err(Fail::Pt(BAD_QUERY));
                }
            }
            Kind::Pending | Kind::Ignore => return Err(Fail::Pt(PtError::INTERNAL)),
        }
        self.fetch_event()?;
        let s = self.trailing_event(None)?;
        Ok((ev, s))
    }

    /// Erratum BDM64 (Broadwell: "An Incorrect LBR or Intel PT Record
    /// May Follow a Transactional Abort"): the trace of a branch right
    /// before a TSX abort may be corrupt. As `pt_blk_handle_erratum_bdm64`:
    /// when the block just handed out ends at a branch and the abort's IP
    /// cannot be reached from the decoder's IP by at most 256
    /// instructions that need no trace, the branch is taken to have gone
    /// to the abort's IP. Code it cannot read does not apply; what libipt
    /// might read and this image cannot is unsupported.
    #[cold]
    #[inline(never)]
    fn handle_bdm64(&mut self, block: &Block, abort_ip: u64) -> Result<(), Fail> {
        let read = |r: Result<Insn, Fail>| match r {
            Ok(i) => Ok(Some(i)),
            Err(Fail::Pt(_)) => Ok(None),
            Err(e) => Err(e),
        };
        if block.ninsn == 0 {
            return Ok(());
        }
        let bits = match self.mode {
            mode::BITS64 => 64,
            mode::BITS32 => 32,
            mode::BITS16 => 16,
            // Code in no mode cannot be read: it does not apply (the
            // next instruction fails with `NO_MODE`).
            _ => return Ok(()),
        };
        match read(self.image.insn_at(block.end_ip, bits))? {
            Some(i) if i.class.is_branch() => {}
            _ => return Ok(()),
        }
        // `pt_insn_range_is_contiguous`, 0x100 steps.
        let mut ip = self.ip;
        for _ in 0..0x100 {
            if ip == abort_ip {
                return Ok(());
            }
            match read(self.image.insn_at(ip, bits))?.and_then(|i| i.next_ip()) {
                Some(next) => ip = next,
                None => break,
            }
        }
        if ip != abort_ip {
            self.ip = abort_ip;
        }
        Ok(())
    }

    /// Erratum SKD022 (Skylake: "VM Entry That Clears TraceEn May
    /// Generate a FUP"): an asynchronous disable at a VMLAUNCH or
    /// VMRESUME may really be the synchronous disable of the VM entry,
    /// and libipt takes it for one (`pt_blk_handle_erratum_skd022`).
    /// Code in an unknown mode cannot be decoded there: it does not apply.
    fn skd022_applies(&self, at: u64) -> Result<bool, Fail> {
        let bitness = match self.mode {
            mode::BITS64 => 64,
            mode::BITS32 => 32,
            mode::BITS16 => 16,
            _ => return Ok(false),
        };
        self.image.is_vm_entry(at, bitness)
    }

    /// The asynchronous disable `ev` turned into a synchronous disable at
    /// its IP, as the pending event.
    fn skd022_disable(&mut self, mut ev: Ev) -> Ev {
        if let Kind::AsyncDisabled { ip, .. } = ev.kind {
            ev.kind = Kind::Disabled { ip };
        }
        self.event = Some(ev);
        ev
    }

    fn process_disabled(&mut self, ev: &Ev) -> Result<(), Fail> {
        if ev.status_update {
            if self.enabled {
                return Err(Fail::Pt(PtError::BAD_STATUS_UPDATE));
            }
            return Ok(());
        }
        if !self.enabled {
            return Err(Fail::Pt(BAD_CONTEXT));
        }
        self.enabled = false;
        // libipt 2.2: the IP is stale now; a TRIG counts from the anchor
        // (the disable clears it once used up).
        if let Some(n) = &mut self.anchor {
            *n = 0;
        }
        Ok(())
    }
}
