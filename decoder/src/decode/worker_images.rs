//! What one decode worker keeps between chunks ([`WorkerImages`]): a libipt
//! image section cache holding every file section of the set-up (each file
//! section mapped once per worker), the section sets of the images built so
//! far, and the lengths of call instructions already read.
//!
//! The maps are hit once per block. They hash with [`FastHash`], a
//! multiply-and-rotate hash of the integer keys written here (a few lines;
//! SipHash, std's default, showed in ptdec's profile, and no crate on the
//! project's list offers a fast integer hasher).

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;

use ipt::SectionCache;

use super::setup::DecodeSetup;
use super::DecodeError;

/// A hasher for small integer keys: each written word is mixed into the
/// state with a rotate, xor and multiply (the constant is FxHash's). Not
/// for untrusted keys an attacker could collide on purpose; the keys here
/// are addresses and section ids, and a collision costs only time.
#[derive(Default, Clone, Copy)]
pub(super) struct FastHash(u64);

impl Hasher for FastHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_i32(&mut self, n: i32) {
        self.write_u64(n as u32 as u64);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// A `HashMap` hashed with [`FastHash`].
pub(super) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHash>>;

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
}

impl<'s, 't> WorkerImages<'s, 't> {
    pub fn new(setup: &'s DecodeSetup<'t>) -> Result<Self, DecodeError> {
        let cache = SectionCache::new().map_err(|source| DecodeError::Libipt {
            what: "allocate an image section cache",
            source,
        })?;
        let isids = setup
            .sections
            .iter()
            .map(|s| cache.add_file(&s.path, s.offset, s.size, s.vaddr).ok())
            .collect();
        Ok(WorkerImages {
            setup,
            iscache: Rc::new(cache),
            isids,
            image_sets: RefCell::new(FastMap::default()),
            call_lens: RefCell::new(FastMap::default()),
        })
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
}
