//! Walks: the blocks that a few TNT bits take the decoder through in
//! plain code (conditional branches, and direct jumps, which need no
//! bit), found once per start and bits and then handed out whole.
//!
//! The flow decoder's loop ([`super::block::BlockDecoder::follow_tnt`])
//! hands out one block per turn: a node fetch, its class tested, a bit
//! taken, the successor link read, and the caller's work per block. On
//! real traces most blocks are of this plain kind: the LLDB bundle's
//! recording is a loop of a conditional branch and a direct jump
//! (101 M of each of its 202 M blocks), and the bench's shapes trace
//! runs 14 M of its 20 M blocks through conditional branches, most in
//! runs of two and more. A walk is what the loop would do from one node
//! with the next bits of the TNT in progress (at most [`WALK_BITS`],
//! never its last, whose use reads the next packet), until a block of
//! another kind, a link not made yet, or kernel code: its blocks, their
//! instructions, the direct jumps among them (which the call stacks'
//! stage sees as transfers), and where the decoder is after it. A caller
//! that takes walks ([`super::block::Follow::walk`]) is given one walk
//! in place of its blocks; the decoder's state after it is the one the
//! loop leaves.
//!
//! Issue 47 names libxdc's cached TNT walks and Honeybee's blocks
//! analysed ahead of the decode as the models; this is that idea, written
//! from the loop's own steps (no code of theirs): a walk is found the
//! first time its start and bits come up, by the same steps the loop
//! takes, and kept in a direct-mapped cache keyed
//! by (node, bits, how many), valid for the code cache's generation and
//! until a conditional or direct link (any) is made to name another node
//! ([`super::code::CodeCache::relinks`]). The caller
//! keeps the walks beside the code cache ([`Walks`], one per decode
//! worker, as its code cache is). Hand-written: no crate decodes Intel
//! PT flow or caches it this way.

use super::code::{Class, CodeCache, Node, NEXT_NOT_TAKEN, NEXT_TAKEN, NO_NODE};

/// The most TNT bits a walk uses.
pub const WALK_BITS: u8 = 8;
/// The most blocks in a walk (direct jumps use no bit: a loop of them
/// would go on for ever).
pub const WALK_BLOCKS: u32 = 32;
/// The most direct jumps in a walk.
pub const WALK_JUMPS: usize = 8;
/// Walks kept (a power of two).
const WALK_SLOTS: usize = 2048;

/// A direct jump in a walk.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct WalkJump {
    /// The jump instruction's address (its block's end).
    pub from: u64,
    /// Its target: the next block's IP.
    pub to: u64,
    /// The walk's instructions up to and including the jump.
    pub insns: u32,
}

/// What the decoder's loop does from one node with some TNT bits: see
/// the module doc. A walk of fewer than two blocks is not handed out.
#[derive(Clone, Copy, Debug)]
pub struct Walk {
    /// The start's node, the bits and how many ([`key`]); `u64::MAX`:
    /// none.
    key: u64,
    /// The code cache's [`CodeCache::relinks`] when it was found.
    relinks: u64,
    /// TNT bits used.
    pub(crate) used: u8,
    /// How many of `jumps` hold jumps.
    njumps: u8,
    /// Which of the last block's node's links the decoder follows next.
    pub(crate) slot: u8,
    /// The node of the last block.
    pub(crate) from: u32,
    /// Blocks.
    pub blocks: u32,
    /// Their instructions.
    pub insns: u64,
    /// The first block's IP.
    pub first_ip: u64,
    /// The last block's end (its last instruction).
    pub last_end: u64,
    /// The IP after the walk.
    pub(crate) ip: u64,
    jumps: [WalkJump; WALK_JUMPS],
}

/// A walk's key: node `cur` and the `len` bits of `bits`.
#[inline(always)]
fn key(cur: u32, bits: u8, len: u8) -> u64 {
    u64::from(cur) | u64::from(bits) << 32 | u64::from(len) << 40
}

impl Walk {
    const EMPTY: Walk = Walk {
        key: u64::MAX,
        relinks: 0,
        used: 0,
        njumps: 0,
        blocks: 0,
        insns: 0,
        first_ip: 0,
        last_end: 0,
        ip: 0,
        from: NO_NODE,
        slot: 0,
        jumps: [WalkJump {
            from: 0,
            to: 0,
            insns: 0,
        }; WALK_JUMPS],
    };

    /// Its blocks one by one, as the decoder's loop would hand them out
    /// (not speculative), found again from its start in `code` (for
    /// tests: `ptdec_core::flow_diff` compares them with the loop's).
    pub fn expand(&self, code: &CodeCache) -> Vec<pttypes::Block> {
        let (cur, bits, len) = (
            self.key as u32,
            (self.key >> 32) as u8,
            (self.key >> 40) as u8,
        );
        let mut out = Vec::new();
        let mut nd = code.node(cur);
        let mut used = 0;
        while let Some(n) = nd {
            if out.len() == self.blocks as usize {
                break;
            }
            out.push(pttypes::Block {
                ip: n.ip,
                end_ip: n.last.ip,
                isid: n.isid as i32,
                mode: pttypes::mode::BITS64,
                iclass: n.last.class.raw(),
                ninsn: n.ninsn as u16,
                size: n.last.size,
                ..pttypes::Block::default()
            });
            let last = &n.last;
            let (ip, slot) = if last.class == Class::CondJump {
                let taken = (bits >> (len - 1 - used)) & 1 != 0;
                used += 1;
                if taken {
                    (last.next().wrapping_add(last.disp as u64), NEXT_TAKEN)
                } else {
                    (last.next(), NEXT_NOT_TAKEN)
                }
            } else {
                (last.next().wrapping_add(last.disp as u64), NEXT_NOT_TAKEN)
            };
            nd = code.node(n.next[slot]).filter(|n| n.ip == ip);
        }
        out
    }

    /// The IP after it: the next block's.
    #[inline]
    pub fn ip_after(&self) -> u64 {
        self.ip
    }

    /// The direct jumps among its blocks, in order.
    #[inline]
    pub fn jumps(&self) -> &[WalkJump] {
        &self.jumps[..usize::from(self.njumps)]
    }

    /// Makes `w` the walk from node `node` (index `cur`, at its IP)
    /// with the `len` bits of `bits` (the first in the highest), in code
    /// cache `code`.
    #[inline(never)]
    fn find(w: &mut Walk, code: &CodeCache, cur: u32, node: &Node, bits: u8, len: u8) {
        *w = Walk {
            key: key(cur, bits, len),
            relinks: code.relinks(),
            first_ip: node.ip,
            ..Walk::EMPTY
        };
        let (mut nd, mut c) = (node, cur);
        loop {
            let last = &nd.last;
            // Kernel code is left to the loop, which may stop there.
            if w.blocks == WALK_BLOCKS || nd.ip >> 63 == 1 {
                break;
            }
            let (ip, slot) = if last.class == Class::CondJump && w.used < len {
                let taken = (bits >> (len - 1 - w.used)) & 1 != 0;
                w.used += 1;
                if taken {
                    (last.next().wrapping_add(last.disp as u64), NEXT_TAKEN)
                } else {
                    (last.next(), NEXT_NOT_TAKEN)
                }
            } else if last.direct && last.class == Class::Jump && usize::from(w.njumps) < WALK_JUMPS
            {
                let to = last.next().wrapping_add(last.disp as u64);
                w.jumps[usize::from(w.njumps)] = WalkJump {
                    from: last.ip,
                    to,
                    insns: 0,
                };
                w.njumps += 1;
                (to, NEXT_NOT_TAKEN)
            } else {
                break;
            };
            w.blocks += 1;
            w.insns += u64::from(nd.ninsn);
            if last.class == Class::Jump {
                w.jumps[usize::from(w.njumps) - 1].insns = w.insns as u32;
            }
            w.last_end = last.ip;
            (w.ip, w.from, w.slot) = (ip, c, slot as u8);
            let next = nd.next[slot];
            match code.node(next) {
                Some(n) if n.ip == ip => (nd, c) = (n, next),
                _ => break,
            }
        }
    }
}

/// The walks found so far (see the module doc), in a direct-mapped
/// cache (boxed: an index masked to its size needs no bounds check),
/// for the code cache generation they were found in; empty until the
/// first is asked for.
#[derive(Default)]
pub struct Walks {
    slots: Option<Box<[Walk; WALK_SLOTS]>>,
    gen: u64,
}

impl Walks {
    /// The walk from node `cur` (`node`, at the decoder's IP) with the
    /// `len` bits of `bits`, found now unless kept.
    #[inline(always)]
    pub(crate) fn get(
        &mut self,
        code: &CodeCache,
        cur: u32,
        node: &Node,
        bits: u8,
        len: u8,
    ) -> &Walk {
        if self.gen != code.gen() || self.slots.is_none() {
            self.renew(code);
        }
        let k = key(cur, bits, len);
        let h = k.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let slots = self
            .slots
            .as_mut()
            .unwrap_or_else(|| unreachable!("made by renew"));
        let w = &mut slots[(h >> 53) as usize & (WALK_SLOTS - 1)];
        // A walk found before a link was made to name another node is
        // found again (per walk: on per-cpu traces links are remade after
        // context switches, and emptying the cache at each, 0.5 MB, cost
        // a review's small per-cpu trace 2.5% of its instructions).
        if w.key != k || w.relinks != code.relinks() {
            Walk::find(w, code, cur, node, bits, len);
        }
        w
    }

    /// Empty, for code cache `code` as it is now.
    #[cold]
    #[inline(never)]
    fn renew(&mut self, code: &CodeCache) {
        match &mut self.slots {
            Some(s) => s.fill(Walk::EMPTY),
            None => {
                self.slots = Some(
                    vec![Walk::EMPTY; WALK_SLOTS]
                        .into_boxed_slice()
                        .try_into()
                        .unwrap_or_else(|_| unreachable!("WALK_SLOTS walks")),
                )
            }
        }
        self.gen = code.gen();
    }
}
