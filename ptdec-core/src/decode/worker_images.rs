//! What one decode worker keeps between chunks ([`WorkerImages`]): a libipt
//! image section cache holding the file sections of the set-up that libipt
//! decodes or reads (each mapped once per worker, added when first needed),
//! the section sets of the images built so far, and the lengths of call
//! instructions already read.
//!
//! The maps are hit once per block: they hash with [`FastMap`].

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use ipt::SectionCache;

use super::setup::DecodeSetup;
use super::DecodeError;
use ftf::hash::FastMap;

/// (pid, map version) of an image.
type ImageKey = (u32, usize);

/// One worker's images: its section cache and what it has looked up.
pub(super) struct WorkerImages<'s, 't> {
    pub setup: &'s DecodeSetup<'t>,
    /// libipt's cache. A section is added when libipt first needs it
    /// ([`WorkerImages::lib_isid`]): libipt looks for a section among all
    /// those of the cache before it adds one, so adding every section of
    /// the set-up up front was quadratic (40,000 MMAPs of one binary: 4.3
    /// s, 80,000: 15 s), and it holds at most 65,535.
    pub iscache: Rc<SectionCache>,
    /// The id of each of the set-up's sections (`None`: libipt could not
    /// map it), ours: section `i` is `i + 1` unless the same section came
    /// before. libipt's ids differ ([`WorkerImages::lib_isid`]); a block
    /// libipt decodes says ours ([`WorkerImages::our_isid`]), and ids
    /// above the sections' are libipt's patch sections (`sections + id`).
    isids: Vec<Option<u32>>,
    /// libipt's id of each of our ids added to `iscache` so far (`None`:
    /// adding it failed).
    lib_ids: RefCell<FastMap<u32, Option<u32>>>,
    /// Our id of each libipt id in `lib_ids`.
    our_ids: RefCell<FastMap<u32, u32>>,
    /// The isids of each (pid, map version) image built so far.
    image_sets: RefCell<FastMap<ImageKey, Rc<[u32]>>>,
    /// Lengths of call instructions read so far, by (isid, ip): a block
    /// gives its last instruction's address, not its length.
    pub call_lens: RefCell<FastMap<(i32, u64), u8>>,
    /// What the last instruction of a block libipt classes as indirect or
    /// unknown does, by (isid, ip), as `chunk` codes it: read with iced-x86
    /// once, not at every such block (an interpreter's dispatch jump).
    pub last_kinds: RefCell<FastMap<(i32, u64), u8>>,
    /// perf's emulated ptwrite functions in the sections, and the patched
    /// copies that make their payload bits end blocks (`crate::events`).
    pub emu: crate::events::EmuPtwrite,
    /// The fast flow decoder's decoded code, shared by the worker's chunks.
    pub code: RefCell<ptflow::code::CodeCache>,
    /// The walks the fast decoder found in `code` (`ptflow::walk`).
    pub walks: RefCell<ptflow::walk::Walks>,
    /// The set-up's section index of each cache id.
    section_of: FastMap<u32, usize>,
    /// Where this worker asks whether a jump stays in its function
    /// (`runs`'s quiet jumps): from the set-up's `jump_spans`.
    pub places: Option<RefCell<super::places::JumpPlaces<'t>>>,
    /// Jumps are marked `inside` but none is left out: the options'
    /// `keep_quiet_jumps`, or a time window (its ops are cut to it one by
    /// one, and jumps left out past its end would be counted). Marked
    /// all the same, so that a window's times are the whole decode's.
    pub keep_quiet: bool,
    /// The fast decoder's sections, mapped once (`None`: the file could
    /// not be mapped or is shorter than the section).
    fast_sections: RefCell<FastMap<u32, Option<ptflow::code::Section>>>,
    /// Files mapped for the fast decoder, by path.
    files: RefCell<FastMap<String, Option<Rc<sideband::bytes::FileBytes>>>>,
    /// The sections libipt looked through to add ours to the probe
    /// caches ([`SectionCache::lookups`]; `iscache`'s own are its).
    /// Tests bound the sum: linear in the sections set up (only they
    /// read it).
    #[cfg_attr(not(test), allow(dead_code))]
    probe_lookups: u64,
    /// The execution modes libipt decoded each section's blocks in (bit
    /// `1 << mode`, by libipt's section id), and the last section and
    /// mode noted ([`WorkerImages::note_mode`]).
    lib_modes: RefCell<FastMap<i32, u8>>,
    last_mode: Cell<(i32, u32)>,
    /// A section was decoded in two modes ([`WorkerImages::modes_mixed`]).
    mixed: Cell<bool>,
    /// A chunk was decoded with these caches (`workers::decode_job`).
    pub used: Cell<bool>,
}

impl<'s, 't> WorkerImages<'s, 't> {
    pub fn new(setup: &'s DecodeSetup<'t>) -> Result<Self, DecodeError> {
        let cache = SectionCache::new().map_err(|error| DecodeError::Libipt {
            what: "allocate an image section cache",
            error,
        })?;
        // Whether libipt can map each section, asked of caches of a few
        // sections each (its look-up is linear in a cache's sections);
        // the same section twice gets one id, as libipt's cache gives.
        const PROBE: usize = 256;
        let mut seen: FastMap<(&str, u64, u64, u64), u32> = FastMap::default();
        let mut isids: Vec<Option<u32>> = Vec::with_capacity(setup.sections.len());
        let mut probe_lookups = 0;
        for group in setup.sections.chunks(PROBE) {
            let probe = SectionCache::new().map_err(|error| DecodeError::Libipt {
                what: "allocate an image section cache",
                error,
            })?;
            for s in group {
                let id = isids.len() as u32 + 1;
                let key = (s.path.as_str(), s.offset, s.size, s.vaddr);
                let isid = match seen.get(&key) {
                    Some(&first) => Some(first),
                    None => probe
                        .add_file(&s.path, s.offset, s.size, s.vaddr)
                        .ok()
                        .map(|_| {
                            seen.insert(key, id);
                            id
                        }),
                };
                isids.push(isid);
            }
            probe_lookups += probe.lookups();
        }
        let sections = setup.sections.iter().zip(&isids);
        let sections = sections.map(|(s, i)| (*i, s.path.as_str(), s.offset, s.size, s.vaddr));
        let emu = crate::events::EmuPtwrite::new(&cache, sections);
        let section_of = isids
            .iter()
            .enumerate()
            .filter_map(|(i, isid)| isid.map(|isid| (isid, i)))
            .collect();
        Ok(WorkerImages {
            setup,
            iscache: Rc::new(cache),
            isids,
            lib_ids: RefCell::default(),
            our_ids: RefCell::default(),
            image_sets: RefCell::new(FastMap::default()),
            call_lens: RefCell::new(FastMap::default()),
            last_kinds: RefCell::new(FastMap::default()),
            emu,
            code: RefCell::default(),
            walks: RefCell::default(),
            section_of,
            places: setup
                .jump_spans
                .map(|j| RefCell::new(super::places::JumpPlaces::new(j.worker()))),
            keep_quiet: setup.opts.keep_quiet_jumps
                || setup.opts.start.is_some()
                || setup.opts.end.is_some(),
            fast_sections: RefCell::default(),
            files: RefCell::default(),
            probe_lookups,
            lib_modes: RefCell::default(),
            last_mode: Cell::new((0, u32::MAX)),
            mixed: Cell::new(false),
            used: Cell::new(false),
        })
    }

    /// libipt decoded a block of its section `isid` in execution mode
    /// `mode`; `stale`: not the mode its decoder is in (a block from the
    /// block cache, filled in another mode, has that mode: a chunk whose
    /// code all came from it would note only that one). Looked up only
    /// where the section or mode changes from the block before, and only
    /// for sections (libipt caches their blocks).
    #[inline]
    pub fn note_mode(&self, isid: i32, mode: u32, stale: bool) {
        if stale {
            self.mixed.set(true);
        }
        // Bytes from elsewhere (isid 0: no block cache) or no mode.
        if self.last_mode.get() == (isid, mode) || isid <= 0 || mode == 0 {
            return;
        }
        self.last_mode.set((isid, mode));
        let bit = 1u8 << mode.min(7);
        let mut modes = self.lib_modes.borrow_mut();
        let m = modes.entry(isid).or_insert(0);
        *m |= bit;
        if *m != bit {
            self.mixed.set(true);
        }
    }

    /// Whether libipt decoded some section's code in two execution modes
    /// with these caches (a corrupt MODE.Exec: 64-bit code read as 16-bit
    /// code). libipt's block cache, a section's in the worker's image
    /// section cache, keeps the mode each block was decoded in and gives
    /// the block back in that mode whatever mode the decoder is in when
    /// it asks again; so what a chunk decodes after another decoded its
    /// code in another mode depends on which chunks the worker decoded
    /// before, that is, on how the chunks were shared among the workers:
    /// `-j2` gave another output from one run to the next on such a trace
    /// (a hostile-input probe's mutant). The workers then decode the chunk
    /// again with fresh caches (`workers::decode_job`).
    pub fn modes_mixed(&self) -> bool {
        self.mixed.get()
    }

    /// Our id of the set-up's section `i`.
    pub fn isid(&self, i: usize) -> Option<u32> {
        self.isids.get(i).copied().flatten()
    }

    /// libipt's id in `iscache` of our id `isid`, the section added when
    /// first asked for (a patch's id is libipt's already).
    pub fn lib_isid(&self, isid: u32) -> Option<u32> {
        let n = self.isids.len() as u32;
        if isid > n {
            return Some(isid - n);
        }
        if let Some(&lib) = self.lib_ids.borrow().get(&isid) {
            return lib;
        }
        let s = &self.setup.sections[isid.checked_sub(1)? as usize];
        let lib = self
            .iscache
            .add_file(&s.path, s.offset, s.size, s.vaddr)
            .ok();
        self.lib_ids.borrow_mut().insert(isid, lib);
        if let Some(lib) = lib {
            self.our_ids.borrow_mut().insert(lib, isid);
        }
        lib
    }

    /// Our id of libipt's id `lib` (a block's section), as
    /// [`WorkerImages::lib_isid`] gave it; `lib` as it is when not
    /// positive (no section).
    pub fn our_isid(&self, lib: i32) -> i32 {
        let Ok(l) = u32::try_from(lib) else {
            return lib;
        };
        if l == 0 {
            return lib;
        }
        let ours = match self.our_ids.borrow().get(&l) {
            Some(&o) => o,
            // A patch section, added by `EmuPtwrite` only.
            None => self.isids.len() as u32 + l,
        };
        i32::try_from(ours).unwrap_or(0)
    }

    /// Reads memory of section `isid` (ours) at `ip` into `buf`.
    pub fn read(&self, buf: &mut [u8], isid: u32, ip: u64) -> Option<usize> {
        self.iscache.read(buf, self.lib_isid(isid)?, ip).ok()
    }

    /// The section ids of `pid`'s image in map version `version` (at `t`).
    pub fn image(&self, pid: u32, version: usize, t: u64) -> Rc<[u32]> {
        self.image_sets
            .borrow_mut()
            .entry((pid, version))
            .or_insert_with(|| {
                self.setup
                    .image_specs(pid, t)
                    .into_iter()
                    .filter_map(|i| self.isids[i])
                    .collect()
            })
            .clone()
    }

    /// The fast decoder's image of sections `isids`.
    pub fn fast_image(&self, isids: &[u32]) -> ptflow::code::Image {
        let mut missing = false;
        let mut sections = Vec::with_capacity(isids.len());
        for &isid in isids {
            match self.fast_section(isid) {
                Some(s) => sections.push(s),
                None => missing = true,
            }
        }
        ptflow::code::Image::new(sections, missing)
    }

    fn fast_section(&self, isid: u32) -> Option<ptflow::code::Section> {
        if let Some(s) = self.fast_sections.borrow().get(&isid) {
            return s.clone();
        }
        let s = self.section_of.get(&isid).and_then(|&i| {
            let spec = &self.setup.sections[i];
            let bytes = self
                .files
                .borrow_mut()
                .entry(spec.path.clone())
                .or_insert_with(|| {
                    sideband::bytes::FileBytes::open(std::path::Path::new(&spec.path))
                        .ok()
                        .map(Rc::new)
                })
                .clone()?;
            let offset = usize::try_from(spec.offset).ok()?;
            let len = usize::try_from(spec.size).ok()?;
            // Bounds past the file's bytes: `Image::new` leaves the
            // section out as missing code.
            (len > 0).then(|| ptflow::code::Section::new(isid, spec.vaddr, bytes, offset, len))
        });
        self.fast_sections.borrow_mut().insert(isid, s.clone());
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{DecodeOptions, RawConfig};
    use crate::model::source::RawSection;

    /// Many sections of one file at distinct addresses (sideband MMAPs of
    /// a library mapped again and again): adding each to one libipt cache
    /// up front was quadratic, libipt looking through all those held
    /// before (40,000: 4.3 s, 80,000: 15 s). The sections libipt looks
    /// through (`SectionCache::lookups`, of every cache the worker adds
    /// to) are counted for 4,096 and 8,192 sections, with the few the
    /// decode asks for: at most 256 a section, and twice the sections
    /// cost at most twice as much (one cache of all, the probe's or
    /// `iscache` as before: 8.4 M for 4,096, and 4 times for twice).
    #[test]
    fn adding_sections_is_linear_in_sections() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("m.bin");
        std::fs::write(&bin, [0x90u8; 0x1000]).unwrap();
        let scans = |n: u64| {
            let sections: Vec<RawSection> = (0..n)
                .map(|i| RawSection {
                    path: bin.clone(),
                    offset: 0,
                    size: 0x1000,
                    vaddr: 0x1000_0000 + i * 0x1000,
                })
                .collect();
            let opts = DecodeOptions::default();
            let setup = DecodeSetup::raw(&sections, &RawConfig::default(), &opts);
            let images = WorkerImages::new(&setup).unwrap();
            // Every section mapped, each its own id; a few read.
            assert!((1..=n as usize).all(|i| images.isid(i - 1) == Some(i as u32)));
            for isid in [1, 2, n as u32 / 2, n as u32] {
                let mut b = [0u8; 1];
                let at = sections[isid as usize - 1].vaddr;
                assert_eq!(images.read(&mut b, isid, at), Some(1), "section {isid}");
                assert_eq!(b, [0x90]);
            }
            images.probe_lookups + images.iscache.lookups()
        };
        let (one, two) = (scans(4_096), scans(8_192));
        assert!(
            one <= 256 * 4_096,
            "{one} sections looked through for 4,096"
        );
        // (Slack for a probe cache of 256 not filled.)
        assert!(
            two <= 2 * one + 256 * 256,
            "{one} sections looked through for 4,096 sections, {two} for 8,192: not linear"
        );
    }
}
