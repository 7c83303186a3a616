//! The flow decoder interface the chunk decoder drives ([`FlowDecoder`]):
//! what it used of libipt's block decoder (synchronize, next block, the
//! pending event with its status flags, offsets, time, the image), so
//! that libipt's block decoder and ptdec's own (`crate::flow`) run under
//! the same chunk decoder and produce the same ops.

use ipt::{Block, BlockDecoder, Config as PtConfig, Error as PtError, Event, Status};

use super::worker_images::WorkerImages;
use ptflow::FastDecoder;

/// Which flow decoder decodes (`--decoder`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DecoderKind {
    /// ptdec's own, with libipt for the PSB intervals it does not handle.
    Fast,
    /// libipt's block decoder for everything.
    #[default]
    Libipt,
}

/// What the chunk decoder asks of a flow decoder: libipt's block decoder
/// API (`pt_blk_*`), with the image given as section ids of the worker's
/// image section cache.
pub(crate) trait FlowDecoder {
    fn sync_forward(&mut self) -> Result<Status, PtError>;
    fn sync_set(&mut self, offset: u64) -> Result<Status, PtError>;
    /// libipt 2.2's resync at the error; `Err(NOT_SUPPORTED)` without it.
    fn resync(&mut self) -> Result<Status, PtError>;
    /// The next block, written into `block` (in place: see
    /// `ptflow::block::BlockDecoder::next_block`), and the status.
    fn next_block(&mut self, block: &mut Block) -> Result<Status, PtError>;
    /// Blocks with `Status(0)` in user code, each to `each`
    /// (`ptflow::block::Follow::block`), for as long as that returns
    /// `true` and the decoder has them at hand; the number handed out.
    /// The same blocks as that many calls of `next_block` (a TNT or TIP
    /// packet may be read on the way). Only while following is on
    /// (`set_follow`), the chunk decoder's sign that it does nothing at a
    /// block but what `each` does; libipt's hands out none. Before the
    /// first block, and before each for which a packet was read, `each`
    /// is told the time and the trace offset after that block
    /// (`ptflow::block::Follow::moved`).
    #[inline]
    fn follow(&mut self, _block: &mut Block, _each: &mut impl ptflow::block::Follow) -> u32 {
        0
    }
    fn event(&mut self) -> Result<(Event, Status), PtError>;
    /// The error a decoder of this kind, made afresh on `bytes` and
    /// synchronized at the PSB at offset `psb`, meets first among that
    /// PSB+'s status updates and the events it hands out right after
    /// them, before any block, with the decoder's offset then; `None`
    /// where it meets none there (or cannot be made). This decoder is
    /// left as it is.
    fn error_after_psb(&self, cfg: &PtConfig, bytes: &[u8], psb: u64) -> Option<(PtError, u64)>;
    fn offset(&self) -> Result<u64, PtError>;
    fn sync_offset(&self) -> Result<u64, PtError>;
    /// (TSC, lost MTC, lost CYC) as `pt_blk_time` answers.
    fn time(&mut self) -> Result<(u64, u32, u32), PtError>;
    fn core_bus_ratio(&mut self) -> Result<u32, PtError>;
    /// Decodes with the sections `isids` (then the patched copies
    /// `overlays`, which replace parts of them) of the worker's cache.
    fn set_image(&mut self, isids: &[u32], overlays: &[u32]);
    /// The address the image had no code at, after a `NOMAP` error.
    fn take_miss(&mut self) -> Option<u64>;
    /// Why this decoder gave up (the chunk goes to libipt); `None` while
    /// it decodes.
    fn unsupported(&self) -> Option<&'static str> {
        None
    }
    /// Whether, and why, this decoder went where libipt is known to
    /// decode wrong (the fast decoder's `FastDecoder::libipt_differs`).
    fn libipt_differs(&self) -> Option<&'static str> {
        None
    }
    /// Whether `follow` may hand out blocks (the fast decoder's
    /// `FastDecoder::set_follow`; libipt's never does).
    fn set_follow(&mut self, _on: bool) {}
}

/// libipt's block decoder with the worker's section cache.
pub(crate) struct Libipt<'a, 'w, 's, 't> {
    pub dec: BlockDecoder<'a>,
    pub images: &'w WorkerImages<'s, 't>,
    /// The execution mode the decoder's events last gave (0: none since
    /// the last sync). A block from libipt's block cache has the mode the
    /// cache was filled in, not this one (`WorkerImages::note_mode`).
    pub mode: u32,
}

impl<'a, 'w, 's, 't> Libipt<'a, 'w, 's, 't> {
    /// libipt's block decoder of a chunk's `bytes`, with no memory besides
    /// the file sections: its callback only records the address libipt
    /// found no code at (for the NoImage gap).
    pub fn of_chunk(
        images: &'w WorkerImages<'s, 't>,
        cfg: &PtConfig,
        bytes: &'a [u8],
    ) -> Result<Self, PtError> {
        let mut dec = Libipt {
            dec: BlockDecoder::new(cfg, bytes)?,
            images,
            mode: 0,
        };
        dec.dec.image().set_memory(Vec::new());
        Ok(dec)
    }
}

impl FlowDecoder for Libipt<'_, '_, '_, '_> {
    fn sync_forward(&mut self) -> Result<Status, PtError> {
        self.mode = 0;
        self.dec.sync_forward()
    }
    fn sync_set(&mut self, offset: u64) -> Result<Status, PtError> {
        self.mode = 0;
        self.dec.sync_set(offset)
    }
    fn resync(&mut self) -> Result<Status, PtError> {
        self.dec.resync()
    }
    fn next_block(&mut self, block: &mut Block) -> Result<Status, PtError> {
        let (mut b, r) = self.dec.next_block();
        self.images
            .note_mode(b.isid, b.mode, b.ninsn > 0 && b.mode != self.mode);
        // Blocks say our section ids, whichever decoder made them.
        b.isid = self.images.our_isid(b.isid);
        *block = b;
        r
    }
    fn event(&mut self) -> Result<(Event, Status), PtError> {
        let r = self.dec.event();
        if let Ok((ev, _)) = &r {
            if let Some(m) = ev.exec_mode() {
                self.mode = m;
            }
        }
        r
    }
    fn error_after_psb(&self, cfg: &PtConfig, bytes: &[u8], psb: u64) -> Option<(PtError, u64)> {
        let dec = BlockDecoder::new(cfg, bytes).ok()?;
        first_error_after_psb(
            Libipt {
                dec,
                images: self.images,
                mode: 0,
            },
            psb,
        )
    }
    fn offset(&self) -> Result<u64, PtError> {
        self.dec.offset()
    }
    fn sync_offset(&self) -> Result<u64, PtError> {
        self.dec.sync_offset()
    }
    fn time(&mut self) -> Result<(u64, u32, u32), PtError> {
        self.dec.time()
    }
    fn core_bus_ratio(&mut self) -> Result<u32, PtError> {
        self.dec.core_bus_ratio()
    }
    fn set_image(&mut self, isids: &[u32], overlays: &[u32]) {
        let mut img = self.dec.image();
        img.clear();
        for &isid in isids {
            if let Some(lib) = self.images.lib_isid(isid) {
                let _ = img.add_cached(&self.images.iscache, lib);
            }
        }
        // The patches are libipt's ids.
        for &lib in overlays {
            let _ = img.add_cached(&self.images.iscache, lib);
        }
    }
    fn take_miss(&mut self) -> Option<u64> {
        self.dec.image().take_miss()
    }
}

/// Why the fast decoder gives up where an image holds perf's emulated
/// ptwrite (patched copies of code): wherever that image is, so a chunk
/// is not cut in parts for it (`GaveUp::Refused`).
pub(crate) const EMULATED_PTWRITE: &str = "emulated ptwrite (patched code)";

/// ptdec's own flow decoder with the worker's decoded code.
pub(crate) struct Fast<'a, 'w, 's, 't> {
    pub dec: FastDecoder<'a>,
    pub images: &'w WorkerImages<'s, 't>,
    /// Set when the image cannot be followed (emulated ptwrite copies).
    pub unsupported: Option<&'static str>,
}

impl<'a, 'w, 's, 't> Fast<'a, 'w, 's, 't> {
    /// The fast decoder of a chunk's `bytes`; `Err`: why it does not
    /// decode the trace's settings.
    pub fn of_chunk(
        images: &'w WorkerImages<'s, 't>,
        cfg: &PtConfig,
        bytes: &'a [u8],
    ) -> Result<Self, &'static str> {
        Ok(Fast {
            dec: FastDecoder::new(&cfg.settings(), bytes)?,
            images,
            unsupported: None,
        })
    }
}

impl FlowDecoder for Fast<'_, '_, '_, '_> {
    fn sync_forward(&mut self) -> Result<Status, PtError> {
        self.dec.sync_forward()
    }
    fn sync_set(&mut self, offset: u64) -> Result<Status, PtError> {
        self.dec.sync_set(offset)
    }
    /// ptflow's own resync at the error ([`ptflow::FastDecoder::resync`]),
    /// with any libipt: 2.1.2 has none (`--decoder libipt` then goes on at
    /// the next PSB).
    #[inline(never)]
    fn resync(&mut self) -> Result<Status, PtError> {
        self.dec.resync()
    }
    #[inline(always)]
    fn next_block(&mut self, block: &mut Block) -> Result<Status, PtError> {
        if self.unsupported.is_some() {
            *block = Block::default();
            return Err(PtError::EOS);
        }
        let mut code = self.images.code.borrow_mut();
        self.dec.next_block(&mut code, block)
    }
    #[inline(always)]
    fn follow(&mut self, block: &mut Block, each: &mut impl ptflow::block::Follow) -> u32 {
        if self.unsupported.is_some() {
            return 0;
        }
        let code = self.images.code.borrow();
        let mut walks = self.images.walks.borrow_mut();
        self.dec.follow(&code, &mut walks, block, each)
    }
    fn event(&mut self) -> Result<(Event, Status), PtError> {
        if self.unsupported.is_some() {
            return Err(PtError::EOS);
        }
        self.dec.event()
    }
    fn error_after_psb(&self, cfg: &PtConfig, bytes: &[u8], psb: u64) -> Option<(PtError, u64)> {
        first_error_after_psb(Fast::of_chunk(self.images, cfg, bytes).ok()?, psb)
    }
    fn offset(&self) -> Result<u64, PtError> {
        self.dec.offset()
    }
    fn sync_offset(&self) -> Result<u64, PtError> {
        self.dec.sync_offset()
    }
    fn time(&mut self) -> Result<(u64, u32, u32), PtError> {
        Ok(self.dec.time())
    }
    fn core_bus_ratio(&mut self) -> Result<u32, PtError> {
        Ok(self.dec.core_bus_ratio())
    }
    fn set_image(&mut self, isids: &[u32], overlays: &[u32]) {
        if !overlays.is_empty() {
            self.unsupported.get_or_insert(EMULATED_PTWRITE);
            return;
        }
        self.dec.set_image(self.images.fast_image(isids));
    }
    fn take_miss(&mut self) -> Option<u64> {
        self.dec.take_miss()
    }
    fn unsupported(&self) -> Option<&'static str> {
        self.unsupported.or(self.dec.unsupported())
    }
    fn libipt_differs(&self) -> Option<&'static str> {
        self.dec.libipt_differs()
    }
    fn set_follow(&mut self, on: bool) {
        self.dec.set_follow(on);
    }
}

/// [`FlowDecoder::error_after_psb`] with `dec`, made afresh.
fn first_error_after_psb(mut dec: impl FlowDecoder, psb: u64) -> Option<(PtError, u64)> {
    let mut status = match dec.sync_set(psb) {
        Ok(s) => s,
        Err(e) => return Some((e, dec.offset().ok()?)),
    };
    while status.event_pending() {
        match dec.event() {
            Ok((_, s)) => status = s,
            Err(e) => return Some((e, dec.offset().ok()?)),
        }
    }
    None
}
