//! What one decode worker keeps between chunks ([`WorkerImages`]): a libipt
//! image section cache holding every file section of the set-up (each file
//! section mapped once per worker), the section sets of the images built so
//! far, and the lengths of call instructions already read.
//!
//! The maps are hit once per block: they hash with [`FastMap`].

use std::cell::RefCell;
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
    pub iscache: Rc<SectionCache>,
    /// The cache's id of each of the set-up's sections (`None`: libipt
    /// could not map it).
    isids: Vec<Option<u32>>,
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
    /// The set-up's section index of each cache id.
    section_of: FastMap<u32, usize>,
    /// The fast decoder's sections, mapped once (`None`: the file could
    /// not be mapped or is shorter than the section).
    fast_sections: RefCell<FastMap<u32, Option<ptflow::code::Section>>>,
    /// Files mapped for the fast decoder, by path.
    files: RefCell<FastMap<String, Option<Rc<sideband::bytes::FileBytes>>>>,
}

impl<'s, 't> WorkerImages<'s, 't> {
    pub fn new(setup: &'s DecodeSetup<'t>) -> Result<Self, DecodeError> {
        let cache = SectionCache::new().map_err(|error| DecodeError::Libipt {
            what: "allocate an image section cache",
            error,
        })?;
        let isids: Vec<Option<u32>> = setup
            .sections
            .iter()
            .map(|s| cache.add_file(&s.path, s.offset, s.size, s.vaddr).ok())
            .collect();
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
            image_sets: RefCell::new(FastMap::default()),
            call_lens: RefCell::new(FastMap::default()),
            last_kinds: RefCell::new(FastMap::default()),
            emu,
            code: RefCell::default(),
            section_of,
            fast_sections: RefCell::default(),
            files: RefCell::default(),
        })
    }

    /// The cache's id of the set-up's section `i`.
    pub fn isid(&self, i: usize) -> Option<u32> {
        self.isids.get(i).copied().flatten()
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
