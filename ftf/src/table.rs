//! Bounded FTF string/thread tables for the writer: a hash map from key to
//! slot, and CLOCK ("second chance") eviction when every slot is taken.
//!
//! Why CLOCK: it approximates LRU with one flag per slot and no list to
//! maintain on every hit. A key used again since the hand last passed survives
//! one more sweep; a key seen once (a unique string argument, say) goes first.
//! Slots used by the record being written are pinned (by an epoch number), so
//! interning a later string of the same record never evicts an earlier one.

use std::borrow::Borrow;
use std::hash::Hash;

use crate::hash::FastMap;

struct Slot<K> {
    key: K,
    /// Used since the clock hand last passed.
    referenced: bool,
    /// Epoch of the last record that used this slot.
    pinned: u64,
    /// Counts the keys the slot has held: an index found elsewhere with
    /// the generation then current still names the same key while it is.
    generation: u64,
}

impl<K> Slot<K> {
    /// A hit by the record of `epoch`: spared by the next sweep, pinned
    /// for the rest of the record.
    fn used_by(&mut self, epoch: u64) {
        self.referenced = true;
        self.pinned = epoch;
    }
}

/// A table of at most `capacity` keys with indexes `1..=capacity`.
pub(crate) struct Table<K> {
    map: FastMap<K, u16>,
    slots: Vec<Slot<K>>,
    capacity: usize,
    hand: usize,
}

/// The outcome of [`Table::intern`].
pub(crate) enum Interned {
    /// The key already had this index: nothing to emit.
    Present(u16),
    /// The key was given this index (new, or recycled from an evicted key):
    /// the caller must emit the record that (re)defines the index.
    Assigned(u16),
}

impl<K: Hash + Eq + Clone> Table<K> {
    pub(crate) fn new(capacity: usize) -> Self {
        debug_assert!((1..=0x7fff).contains(&capacity));
        Table {
            map: FastMap::default(),
            slots: Vec::new(),
            capacity,
            hand: 0,
        }
    }

    /// Looks `key` up, assigning it a slot (evicting by CLOCK when full).
    /// Returns `None` only when every slot is pinned by `epoch`.
    pub(crate) fn intern<Q>(&mut self, key: &Q, epoch: u64) -> Option<Interned>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(&index) = self.map.get(key) {
            self.slots[usize::from(index) - 1].used_by(epoch);
            return Some(Interned::Present(index));
        }
        let owned = key.to_owned();
        if self.slots.len() < self.capacity {
            self.slots.push(Slot {
                key: owned.clone(),
                referenced: false,
                pinned: epoch,
                generation: 0,
            });
            let index = u16::try_from(self.slots.len()).ok()?;
            self.map.insert(owned, index);
            return Some(Interned::Assigned(index));
        }
        // Two full turns clear every reference bit, so a third would find
        // nothing new: stop there rather than loop forever.
        for _ in 0..2 * self.capacity + 1 {
            let i = self.hand;
            self.hand = (self.hand + 1) % self.capacity;
            let slot = &mut self.slots[i];
            if slot.pinned == epoch {
                continue;
            }
            if slot.referenced {
                slot.referenced = false;
                continue;
            }
            let old = std::mem::replace(&mut slot.key, owned.clone());
            slot.pinned = epoch;
            slot.generation = slot.generation.wrapping_add(1);
            self.map.remove::<K>(&old);
            let index = u16::try_from(i + 1).ok()?;
            self.map.insert(owned, index);
            return Some(Interned::Assigned(index));
        }
        None
    }

    /// Marks slot `index` used by the record of `epoch` when it holds
    /// `key` (a hit found without hashing, see `write::RecentStrings`).
    pub(crate) fn touch<Q>(&mut self, index: u16, key: &Q, epoch: u64) -> bool
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        match self.slots.get_mut(usize::from(index).wrapping_sub(1)) {
            Some(slot) if slot.key.borrow() == key => {
                slot.used_by(epoch);
                true
            }
            _ => false,
        }
    }

    /// The generation of slot `index` (see [`Table::touch_generation`]).
    pub(crate) fn generation(&self, index: u16) -> u64 {
        self.slots
            .get(usize::from(index).wrapping_sub(1))
            .map_or(0, |s| s.generation)
    }

    /// Marks slot `index` used by the record of `epoch` when it still
    /// holds the key it held at `generation`: a hit found without hashing
    /// or comparing the key, for a caller that knows its key cannot have
    /// changed meaning since (see `write::StaticStrings`).
    pub(crate) fn touch_generation(&mut self, index: u16, generation: u64, epoch: u64) -> bool {
        match self.slots.get_mut(usize::from(index).wrapping_sub(1)) {
            Some(slot) if slot.generation == generation => {
                slot.used_by(epoch);
                true
            }
            _ => false,
        }
    }

    /// Number of slots in use.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(i: Option<Interned>) -> (u16, bool) {
        match i.expect("slot") {
            Interned::Present(i) => (i, false),
            Interned::Assigned(i) => (i, true),
        }
    }

    #[test]
    fn hits_do_not_reassign() {
        let mut t: Table<String> = Table::new(3);
        assert_eq!(index(t.intern("a", 1)), (1, true));
        assert_eq!(index(t.intern("b", 2)), (2, true));
        assert_eq!(index(t.intern("a", 3)), (1, false));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn clock_spares_recently_used_and_pinned() {
        let mut t: Table<String> = Table::new(3);
        t.intern("a", 1);
        t.intern("b", 2);
        t.intern("c", 3);
        t.intern("a", 4); // a referenced
                          // d: hand at a (referenced -> cleared), b evicted.
        assert_eq!(index(t.intern("d", 5)), (2, true));
        // e and f in one record (epoch 6): e takes c's slot, f must not take e's.
        let (e, _) = index(t.intern("e", 6));
        let (f, _) = index(t.intern("f", 6));
        assert_ne!(e, f);
        assert_eq!(index(t.intern("e", 6)), (e, false));
        assert_eq!(index(t.intern("f", 6)), (f, false));
    }

    #[test]
    fn touch_hits_only_the_slot_holding_the_key() {
        let mut t: Table<String> = Table::new(2);
        t.intern("a", 1);
        t.intern("b", 2);
        assert!(t.touch(1, "a", 3));
        assert!(!t.touch(2, "a", 3));
        assert!(!t.touch(0, "a", 3));
        assert!(!t.touch(3, "a", 3));
        // "a" was touched by epoch 3: c evicts b, not a.
        t.intern("c", 3);
        assert_eq!(index(t.intern("a", 4)), (1, false));
    }

    #[test]
    fn all_pinned_is_none_not_a_hang() {
        let mut t: Table<(u64, u64)> = Table::new(2);
        t.intern(&(1, 1), 7);
        t.intern(&(1, 2), 7);
        assert!(t.intern(&(1, 3), 7).is_none());
        assert!(t.intern(&(1, 3), 8).is_some());
    }
}
