//! [`FastMap`]: a `HashMap` with a fast hash for keys hit once per event —
//! the writer's string and thread tables here, and ptdec's maps keyed by
//! thread ids and addresses. SipHash, std's default, took about a sixth of
//! ptdec's time in a profile (`perf record -g` on `ptdec` over a 10 MB
//! trace). The hash mixes each 8-byte word of the key into the state with
//! a rotate, xor and multiply (the constant is FxHash's); it is written
//! here in a few lines because no crate on the project's dependency list
//! offers one. Not for keys an attacker picks to collide: a collision costs
//! time only, and the tables are bounded.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// See the module doc.
#[derive(Default, Clone, Copy)]
pub struct FastHash(u64);

impl FastHash {
    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FastHash {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.mix(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.mix(u64::from(n));
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }

    #[inline]
    fn write_i32(&mut self, n: i32) {
        self.mix(u64::from(n as u32));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }
}

/// A `HashMap` hashed with [`FastHash`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHash>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn strings_that_differ_anywhere_hash_apart() {
        let b = BuildHasherDefault::<FastHash>::default();
        let keys = [
            "",
            "a",
            "b",
            "ab",
            "ba",
            "abcdefgh",
            "abcdefgi",
            "abcdefghi",
            "abcdefgh\0",
        ];
        let hashes: std::collections::HashSet<u64> = keys.iter().map(|k| b.hash_one(k)).collect();
        assert_eq!(hashes.len(), keys.len());
        let mut m: FastMap<(u32, u64), u8> = FastMap::default();
        for i in 0..1000u32 {
            m.insert((i, u64::from(i) << 12), 1);
        }
        assert_eq!(m.len(), 1000);
    }
}
