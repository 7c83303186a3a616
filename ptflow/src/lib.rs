//! ptdec's own Intel PT flow decoder, in pure Rust: packets
//! ([`packet`]), events with their time ([`event`], [`time`]) and blocks
//! ([`block`]) over code decoded once per worker ([`code`]), handing out
//! exactly the blocks, events, statuses and offsets libipt's block decoder
//! hands out, in the types both share ([`pttypes`]), so that a consumer
//! (ptdec's chunk decoder) runs unchanged over either.
//!
//! Decode a trace over an image built from byte providers (any
//! `AsRef<[u8]>`: a mapped file, a `Vec`):
//!
//! ```
//! use std::rc::Rc;
//! use ptflow::code::{CodeCache, Image, Section};
//! use ptflow::{Block, Error, EventKind, FastDecoder, Settings};
//!
//! // At 0x1000: nop; nop; jmp rax.
//! let code: Rc<dyn AsRef<[u8]>> = Rc::new(vec![0x90, 0x90, 0xff, 0xe0]);
//! let section = Section::new(1, 0x1000, code, 0, 4);
//! // PSB, MODE.Exec (64-bit), PSBEND; TIP.PGE to 0x1000; TIP.PGD.
//! let mut trace = [0x02, 0x82].repeat(8);
//! trace.extend([0x99, 0x01, 0x02, 0x23, 0x71, 0x00, 0x10, 0, 0, 0, 0, 0x01]);
//! let cfg = Settings { end_on_call: true, end_on_jump: true, ..Default::default() };
//! let mut dec = FastDecoder::new(&cfg, &trace).unwrap();
//! dec.set_image(Image::new(vec![section], false));
//! let (mut cache, mut block, mut insns, mut events) = (CodeCache::default(), Block::default(), 0, vec![]);
//! let mut status = dec.sync_forward().unwrap();
//! loop {
//!     while status.event_pending() {
//!         let (event, s) = dec.event().unwrap();
//!         (events, status) = ([events, vec![event.kind()]].concat(), s);
//!     }
//!     match dec.next_block(&mut cache, &mut block) {
//!         Ok(s) => (insns, status) = (insns + block.ninsn, s),
//!         Err(Error::EOS) => break,
//!         Err(e) => panic!("{e}"),
//!     }
//! }
//! assert_eq!(insns, 3);
//! assert_eq!(events.last(), Some(&EventKind::Disabled { ip: None }));
//! assert!(events.contains(&EventKind::Enabled { ip: 0x1000, resumed: false }));
//! ```
//!
//! Why hand-written: libipt re-decodes every instruction each time the
//! trace passes it and crosses the FFI per block and event; here a
//! straight run of code is decoded once (iced-x86) into a node that links
//! to the runs that followed it (not taken, taken, last indirect target),
//! so a block whose successor was seen before is found without a lookup
//! (else one direct-mapped or hash lookup), in the worker's own memory;
//! the common block (a TNT bit, a TIP or a direct branch, no event) is
//! decoded in one pass ([`block`]'s fast path) with the packets it needs
//! read in place.
//!
//! What it follows: PSB+ (status updates), TNT, TIP, TIP.PGE/PGD, FUP
//! (asynchronous branches and disables), MODE.Exec, MODE.TSX (speculative
//! blocks, aborts), OVF, PIP and VMCS (paging and VMCS events, bound to
//! MOV CR3 or VMPTRLD, far branches and VM entries as libipt binds them), PTW (ptwrite events, bound to their
//! FUP or to the next PTWRITE instruction), TSC/TMA/MTC/CYC time and CBR,
//! power events (PWRE, PWRX, EXSTOP, MWAIT), MNT and TraceStop, tick
//! and iflags events when asked for,
//! return compression, 64-bit code (16- and 32-bit code too, an
//! instruction at a time), and the errata workarounds these need
//! as libipt applies them (BDM70; SKD007, an OVF read one byte into a
//! CYC; SKD022 at VMLAUNCH/VMRESUME; SKD010, APL11 and APL12 after an
//! OVF; BDM64 at a TSX abort; SKL014 at a direct branch leaving the
//! address filter, bound where libipt's instruction flow binds it, which
//! its block decoder does not: see [`block`]);
//! SKL168, which libipt's event decoder never arms; SKZ84, a TMA with
//! reserved bits skipped as libipt's packet decoder skips it). At a
//! decode error (no code mapped at an address, a packet that does not fit
//! the code, a bad packet) it reports libipt's error, with the
//! instructions before it in the block and the trace offset libipt has
//! there, and synchronizes again as libipt does (`sync_forward`,
//! `sync_set`). Images whose sections overlap are split as libipt's
//! `pt_image_add` splits them, and an instruction cut by its section's
//! end is read on from the sections after it (a truncated block, as
//! libipt's). Event trace (CFE/EVD) is followed as libipt 2.1.2's event
//! and block decoders follow it. Anything else (code in an unknown
//! mode, an instruction iced-x86 cannot decode,
//! perf's emulated ptwrite) makes it stop
//! with [`Fail::Unsupported`], and ptdec decodes that PSB interval with libipt
//! instead: the output is the same either way (but for libipt's SKL014
//! defect, and its block cache's for code run in two modes, which lists
//! the mode the code was first cached in), and ptdec's summary counts
//! those chunks by reason. ptdec's
//! `flow_diff` runs both side by side for the tests and the
//! `flow_lockstep` fuzz target.
//!
//! Dependencies: [`pttypes`] (the shared vocabulary), iced-x86 (decoding
//! instructions) and rustc-hash (the code cache's maps); no libipt, no
//! unsafe code.

#![forbid(unsafe_code)]

pub mod block;
pub mod code;
pub mod event;
pub mod packet;
pub mod time;
pub mod walk;

#[cfg(test)]
mod follow_tests;
#[cfg(any(test, feature = "test-helpers"))]
#[doc(hidden)]
pub mod test_packets;

pub use pttypes;
pub use pttypes::{Block, Error, Event, EventKind, Settings, Status};

use pttypes::{event_type, Error as PtError, EventParts};

use block::BlockDecoder;
use code::{CodeCache, Image};
use event::{Ev, EventDecoder, Kind};

/// Why the flow decoder stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fail {
    /// libipt's error at this point (libipt fails here too).
    Pt(PtError),
    /// Something it does not follow yet: libipt decodes this chunk.
    /// The reason is behind a thin reference so that `Fail`, and the
    /// `Result<Status, Fail>` of every step, fit in two registers: a
    /// 24-byte result went through the stack, and the profile showed its
    /// copy stalling on the narrower stores that wrote it.
    Unsupported(&'static &'static str),
}

/// The flow decoder over one trace buffer, with libipt's block decoder
/// interface in libipt's types.
pub struct FastDecoder<'a> {
    dec: BlockDecoder<'a>,
    /// Set once something it does not follow was met: every call fails
    /// from then on.
    unsupported: Option<&'static str>,
    /// The last error it reported (libipt reports it there too).
    error: Option<PtError>,
    /// The address it found no code at, after a `NOMAP` error
    /// ([`Self::take_miss`]).
    miss: Option<u64>,
    /// Whether [`FastDecoder::follow`] hands out blocks
    /// ([`FastDecoder::set_follow`]).
    follow: bool,
}

impl Fail {
    /// The instruction runs past its section's end (iced-x86 found too
    /// few bytes there): the block decoder reads the rest from the
    /// sections after it, as libipt's `pt_insn_decode_retry` does
    /// ([`code::Image::insn_across`]). Only the code cache says this, and
    /// only the block decoder acts on it; anywhere else it is a reason
    /// to give up like any other. (Not a variant of its own: one more
    /// made every step's `Result` cost the fast path 1% more
    /// instructions.)
    pub const CUT: Fail = Fail::Unsupported(&CUT);

    /// Whether this is [`Fail::CUT`].
    #[inline]
    pub fn is_cut(self) -> bool {
        matches!(self, Fail::Unsupported(r) if std::ptr::eq(r, &CUT))
    }
}

static CUT: &str = "an instruction cut by its section's end";

impl<'a> FastDecoder<'a> {
    /// A decoder over `trace` with `cfg`'s errata and timing; `Err` with
    /// the reason when the configuration asks for what it does not
    /// follow.
    pub fn new(cfg: &Settings, trace: &'a [u8]) -> Result<Self, &'static str> {
        if !cfg.end_on_call || !cfg.end_on_jump {
            return Err("blocks that do not end at calls and jumps");
        }
        let errata = cfg.errata;
        let mut evdec = EventDecoder::new(trace, errata, cfg.freq, cfg.keep_tcal_on_ovf);
        if cfg.iflags_events {
            evdec.enable_iflags_events();
        }
        let mut dec = BlockDecoder::new(evdec, errata, cfg.addr_filter.then_some(cfg.addr_ranges));
        if cfg.tick_events {
            dec.enable_tick_events();
        }
        Ok(FastDecoder {
            dec,
            unsupported: None,
            error: None,
            miss: None,
            follow: false,
        })
    }

    /// Whether [`Self::follow`] hands out blocks from now on: the
    /// caller's sign that at each of them it does nothing but what its
    /// callback does.
    pub fn set_follow(&mut self, on: bool) {
        self.follow = on;
    }

    /// Why it stopped, if it met something it does not follow.
    pub fn unsupported(&self) -> Option<&'static str> {
        self.unsupported
    }

    /// Whether, and why, it decoded something libipt 2.1.2 is known to
    /// decode wrong ([`event::EventDecoder::libipt_differs`]): the
    /// decoders' outputs may differ from there on, and this one's is
    /// right.
    pub fn libipt_differs(&self) -> Option<&'static str> {
        self.dec.evdec.libipt_differs()
    }

    /// The last error it reported, if any (libipt's error there).
    pub fn error(&self) -> Option<PtError> {
        self.error
    }

    /// The address it found no code at, after a `NOMAP` error: the one
    /// libipt's image read callback is asked for there (ptdec's gap
    /// names it).
    pub fn take_miss(&mut self) -> Option<u64> {
        self.miss.take()
    }

    /// libipt's error for a failure: a decode error is returned as it
    /// is (the caller synchronizes again, as after libipt's); an
    /// unsupported one is noted (every call fails from then on). Either
    /// way the block decoder's fast path is off until the next sync.
    #[cold]
    #[inline(never)]
    fn fail(&mut self, f: Fail) -> PtError {
        if f != Fail::Pt(PtError::EOS) {
            self.dec.stop_fast();
        }
        match f {
            Fail::Pt(e) => {
                if e != PtError::EOS {
                    self.error = Some(e);
                    if e == PtError::NOMAP {
                        self.miss = Some(self.dec.ip());
                    }
                }
                e
            }
            Fail::Unsupported(why) => {
                self.unsupported.get_or_insert(*why);
                PtError::EOS
            }
        }
    }

    #[inline]
    fn check(&self) -> Result<(), PtError> {
        match self.unsupported {
            Some(_) => Err(PtError::EOS),
            None => Ok(()),
        }
    }

    pub fn sync_forward(&mut self) -> Result<Status, PtError> {
        self.check()?;
        self.dec.sync_forward().map_err(|f| self.fail(f))
    }

    pub fn sync_set(&mut self, offset: u64) -> Result<Status, PtError> {
        self.check()?;
        self.dec.sync_set(offset).map_err(|f| self.fail(f))
    }

    /// Goes on after a decode error where the trace next gives an IP
    /// ([`block::BlockDecoder::resync`]); `Err(EVENT_IGNORED)`: read the
    /// event, then call again.
    pub fn resync(&mut self) -> Result<Status, PtError> {
        self.check()?;
        match self.dec.resync() {
            // Not a failure: an event to read first.
            Err(Fail::Pt(e)) if e == PtError::EVENT_IGNORED => Err(e),
            r => r.map_err(|f| self.fail(f)),
        }
    }

    /// [`Self::next_block`] again and again, for as
    /// long as the status is `Status(0)` and at most `max` times before
    /// the last: `each` gets every block with that status and the time
    /// after it ([`Self::time`]), and the next result is returned, its
    /// block in `block` (`Status(0)` too after `max` blocks: code that
    /// loops through direct jumps needs no trace and would go on for
    /// ever). The same blocks, results and state as those calls of
    /// `next_block`; most blocks come from [`BlockDecoder::follow_tnt`],
    /// which keeps the decoder's IP, link and TNT in registers.
    #[inline(always)]
    pub fn next_blocks(
        &mut self,
        code: &mut CodeCache,
        block: &mut pttypes::Block,
        max: u32,
        mut each: impl FnMut(&pttypes::Block, (u64, u32, u32)),
    ) -> Result<Status, PtError> {
        /// `each` with the time the decoder told last.
        struct Each<F> {
            each: F,
            time: (u64, u32, u32),
        }
        impl<F: FnMut(&pttypes::Block, (u64, u32, u32))> block::Follow for Each<F> {
            #[inline(always)]
            fn moved(&mut self, time: (u64, u32, u32), _: Option<u64>) {
                self.time = time;
            }
            #[inline(always)]
            fn block(&mut self, b: &pttypes::Block) -> bool {
                (self.each)(b, self.time);
                true
            }
        }
        let mut f = Each {
            each: &mut each,
            time: self.time(),
        };
        // `each` takes no walks: none is looked up, none kept.
        self.next_blocks_to(code, &mut walk::Walks::default(), block, max, &mut f)
    }

    /// [`Self::next_blocks`] to a [`block::Follow`], `f`: where it takes
    /// walks ([`walk`]), the blocks of plain code the decoder walks
    /// through come at once (the same blocks, results and state). The
    /// blocks with `Status(0)` that [`Self::next_block`] hands out on the
    /// way go to [`block::Follow::block`] too (its result is not asked),
    /// after [`block::Follow::moved`] with the time after each and no
    /// offset; the last, returned, does not.
    #[inline(always)]
    pub fn next_blocks_to(
        &mut self,
        code: &mut CodeCache,
        walks: &mut walk::Walks,
        block: &mut pttypes::Block,
        max: u32,
        f: &mut impl block::Follow,
    ) -> Result<Status, PtError> {
        let mut left = max;
        loop {
            left -= self
                .dec
                .follow_tnt::<false, true>(code, walks, block, left, f);
            match self.next_block(code, block) {
                Ok(Status(0)) if left > 0 => {
                    left -= 1;
                    f.moved(self.time(), None);
                    f.block(block);
                }
                r => return r,
            }
        }
    }

    /// While following is on ([`Self::set_follow`]), the blocks
    /// [`BlockDecoder::follow_tnt`] hands out in user code, each to
    /// `each` ([`block::Follow::block`]), for as long as that returns
    /// `true`; the number handed out (0 with following off). Each has
    /// `Status(0)`, and the decoder is where as many calls of
    /// [`Self::next_block`] would have left it: the chunk decoder's own
    /// loop over the commonest blocks, with what it does per block in
    /// `each` instead of after a return from `next_block` for every block.
    /// Packets are read on the way only where a block uses up its TNT or
    /// TIP and the next packet is a TNT or a TIP with no event binding
    /// there. Before the first block, and before each block for which a
    /// packet was read, `each` is told the time and the trace offset
    /// ([`Self::offset`]) after that block, as `next_block` would have
    /// left them ([`block::Follow::moved`]); they hold for the blocks
    /// after it until the next. Each block is handed out from a local:
    /// `block` is left as it was, for the [`Self::next_block`] that comes
    /// next, which writes it. Where `each` takes walks, the blocks of
    /// plain code come in walks ([`walk`]), kept in `walks` (the code
    /// cache's, kept beside it).
    #[inline(always)]
    pub fn follow(
        &mut self,
        code: &CodeCache,
        walks: &mut walk::Walks,
        block: &mut pttypes::Block,
        each: &mut impl block::Follow,
    ) -> u32 {
        if !self.follow {
            return 0;
        }
        self.dec
            .follow_tnt::<true, true>(code, walks, block, u32::MAX, each)
    }

    /// The next block, written into `block` (see
    /// [`BlockDecoder::next_block`]), and the status.
    #[inline(always)]
    pub fn next_block(
        &mut self,
        code: &mut CodeCache,
        block: &mut pttypes::Block,
    ) -> Result<Status, PtError> {
        // The block decoder's fast path is off once it stopped (`fail`).
        if let Some(r) = self.dec.try_fast(code, block) {
            return r.map_err(|f| self.fail(f));
        }
        if let Err(e) = self.check() {
            *block = pttypes::Block::default();
            return Err(e);
        }
        self.dec
            .next_block_slow(code, block)
            .map_err(|f| self.fail(f))
    }

    pub fn event(&mut self) -> Result<(Event, Status), PtError> {
        self.check()?;
        match self.dec.event() {
            Ok((ev, s)) => match to_event(&ev) {
                Some(e) => Ok((e, s)),
                None => Err(self.fail(Fail::Unsupported(&"an event kind"))),
            },
            Err(f) => Err(self.fail(f)),
        }
    }

    #[inline]
    pub fn offset(&self) -> Result<u64, PtError> {
        self.dec.evdec.offset()
    }

    pub fn sync_offset(&self) -> Result<u64, PtError> {
        self.dec.evdec.sync_offset()
    }

    #[inline]
    pub fn time(&self) -> (u64, u32, u32) {
        self.dec.time()
    }

    pub fn core_bus_ratio(&self) -> u32 {
        self.dec.cbr()
    }

    pub fn set_image(&mut self, image: Image) {
        self.dec.set_image(image);
    }
}

/// The event in libipt's type.
fn to_event(ev: &Ev) -> Option<Event> {
    let ip = |v: u64| (!ev.ip_suppressed).then_some(v);
    let mut exec_mode = 0;
    let mut tsx = None;
    let mut non_root = false;
    let mut vmcs = None;
    let mut other_ip = None;
    let kind = match ev.kind {
        Kind::Enabled { ip, resumed } => EventKind::Enabled { ip, resumed },
        Kind::Disabled { ip: i } => EventKind::Disabled { ip: ip(i) },
        Kind::AsyncDisabled { at, ip: i } => EventKind::AsyncDisabled { at, ip: ip(i) },
        Kind::AsyncBranch { from, to } => EventKind::AsyncBranch { from, to: ip(to) },
        Kind::ExecMode { ip: i, mode } => {
            exec_mode = mode;
            EventKind::ExecMode { ip: ip(i) }
        }
        Kind::Tick { ip } => {
            other_ip = Some(ip);
            EventKind::Other(event_type::TICK)
        }
        Kind::Iflags { ip, .. } => {
            other_ip = Some(ip);
            EventKind::Other(event_type::IFLAGS)
        }
        Kind::Cbr { ratio } => EventKind::Cbr {
            ratio: u16::from(ratio),
        },
        Kind::Overflow { ip: i } => EventKind::Overflow { ip: ip(i) },
        Kind::Tsx {
            ip,
            speculative,
            aborted,
        } => {
            tsx = Some((ip, speculative, aborted));
            EventKind::Other(event_type::TSX)
        }
        Kind::Paging { cr3, non_root: nr } => {
            non_root = nr;
            EventKind::Paging { cr3 }
        }
        Kind::AsyncPaging {
            cr3,
            non_root: nr,
            ip: i,
        } => {
            non_root = nr;
            EventKind::AsyncPaging { cr3, ip: ip(i) }
        }
        Kind::Vmcs { base } => {
            vmcs = Some((base, 0));
            EventKind::Other(event_type::VMCS)
        }
        Kind::AsyncVmcs { base, ip } => {
            vmcs = Some((base, ip));
            EventKind::Other(event_type::ASYNC_VMCS)
        }
        Kind::Ptwrite {
            ip: i,
            size,
            payload,
        } => EventKind::Ptwrite {
            ip: ip(i),
            size,
            payload,
        },
        Kind::Exstop { ip: i } => EventKind::Exstop { ip: ip(i) },
        Kind::Mwait { ip: i, hints, ext } => EventKind::Mwait {
            ip: ip(i),
            hints,
            ext,
        },
        Kind::Pwre {
            state,
            sub_state,
            hw,
        } => EventKind::Pwre {
            state,
            sub_state,
            hw,
        },
        Kind::Pwrx {
            last,
            deepest,
            interrupt,
            store,
            autonomous,
        } => EventKind::Pwrx {
            last,
            deepest,
            interrupt,
            store,
            autonomous,
        },
        Kind::Mnt => EventKind::Other(event_type::MNT),
        Kind::Stop => EventKind::Stop,
        Kind::Interrupt {
            ip: i,
            vector,
            has_cr2,
            cr2,
        } => EventKind::Interrupt {
            vector,
            cr2: has_cr2.then_some(cr2),
            ip: ip(i),
        },
        Kind::Iret { ip: i } => EventKind::Iret { ip: ip(i) },
        Kind::Smi { ip: i } => EventKind::Smi { ip: ip(i) },
        Kind::Rsm => EventKind::Rsm { ip: None },
        Kind::Sipi { vector } => EventKind::Sipi { vector },
        Kind::Init { ip: i } => EventKind::Init { ip: ip(i) },
        Kind::VmEntry { ip: i } => EventKind::VmEntry { ip: ip(i) },
        Kind::VmExit {
            ip: i,
            vector,
            has,
            qualification,
            reason,
        } => {
            use event::vmexit_has as h;
            EventKind::VmExit {
                vector: (has & h::VECTOR != 0).then_some(vector),
                reason: (has & h::REASON != 0).then_some(reason),
                qualification: (has & h::QUALIFICATION != 0).then_some(qualification),
                ip: ip(i),
            }
        }
        Kind::Shutdown { ip: i } => EventKind::Shutdown { ip: ip(i) },
        Kind::Uintr { ip: i, vector } => EventKind::Uintr { vector, ip: ip(i) },
        Kind::Uiret { ip: i } => EventKind::Uiret { ip: ip(i) },
        Kind::Trig {
            ip: i,
            trbv,
            mult,
            anchored,
            ..
        } => EventKind::Trig {
            number: trbv,
            mult,
            ip: ip(i).filter(|_| anchored),
        },
        Kind::Tnt { .. } | Kind::Tip { .. } | Kind::Pending | Kind::Ignore => return None,
    };
    Event::from_parts(&EventParts {
        kind,
        status_update: ev.status_update,
        ip_suppressed: ev.ip_suppressed,
        tsc: ev.has_tsc.then_some(ev.tsc),
        time_tsc: ev.tsc,
        lost_mtc: ev.lost_mtc,
        lost_cyc: ev.lost_cyc,
        exec_mode,
        tsx,
        non_root,
        vmcs,
        other_ip,
    })
}
