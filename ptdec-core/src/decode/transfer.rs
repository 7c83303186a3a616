//! One concern of the chunk decoder (`chunk`): what a block's last
//! instruction does to the call stack (a call, a return, a jump, or
//! nothing the stacks follow) and its length (a call's return address
//! follows it), and the instructions of a block for the listing. The
//! block's instruction class says it where it can; otherwise the
//! instruction is decoded (iced-x86) from the block's raw bytes or from
//! the worker's image section cache, once per (section, address): the
//! per-worker caches are `WorkerImages::last_kinds` and `call_lens`.

use ipt::Block;

use super::worker_images::WorkerImages;

/// What kind of control transfer a block ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Transfer {
    #[default]
    Call,
    Return,
    Jump,
}

impl Transfer {
    /// A byte for the per-worker cache (`WorkerImages::last_kinds`).
    fn code(t: Option<Transfer>) -> u8 {
        match t {
            None => 0,
            Some(Transfer::Call) => 1,
            Some(Transfer::Return) => 2,
            Some(Transfer::Jump) => 3,
        }
    }

    fn from_code(c: u8) -> Option<Transfer> {
        match c {
            1 => Some(Transfer::Call),
            2 => Some(Transfer::Return),
            3 => Some(Transfer::Jump),
            _ => None,
        }
    }

    /// The transfer a block the fast decoder followed makes
    /// (`FlowDecoder::follow`): it ends at a conditional branch or a near
    /// call, jump or return, which its class says, so
    /// nothing is looked up, and nothing of the block but its class is
    /// read. (`Insns::classify` may look the instruction up from a copy
    /// of the block: the copy stays out of memory, but every field of
    /// every followed block was computed for it.)
    #[inline(always)]
    pub(super) fn of_followed(b: &Block) -> Option<Transfer> {
        use ipt::iclass::*;
        debug_assert!(matches!(b.iclass, CALL | RETURN | JUMP | COND_JUMP));
        match b.iclass {
            CALL => Some(Transfer::Call),
            RETURN => Some(Transfer::Return),
            JUMP => Some(Transfer::Jump),
            _ => None,
        }
    }

    /// The transfer `insn` makes, by its flow control.
    pub(super) fn of_insn(insn: &iced_x86::Instruction) -> Option<Transfer> {
        use iced_x86::FlowControl as F;
        match insn.flow_control() {
            F::Call | F::IndirectCall => Some(Transfer::Call),
            F::Return => Some(Transfer::Return),
            F::UnconditionalBranch | F::IndirectBranch => Some(Transfer::Jump),
            // syscall, int n: a far call into the kernel.
            F::Interrupt => Some(Transfer::Call),
            _ => None,
        }
    }
}

/// One instruction of `bitness`-bit code at `ip` from `bytes`.
pub(super) fn decode_one(bitness: u32, bytes: &[u8], ip: u64) -> Option<iced_x86::Instruction> {
    let mut d = iced_x86::Decoder::with_ip(bitness, bytes, ip, iced_x86::DecoderOptions::NONE);
    let insn = d.decode();
    (!insn.is_invalid()).then_some(insn)
}

/// A block's instructions as a worker reads them (a copy of a reference:
/// free to make per call).
#[derive(Clone, Copy)]
pub(super) struct Insns<'i, 's, 't>(pub &'i WorkerImages<'s, 't>);

impl Insns<'_, '_, '_> {
    /// The control transfer the block's last instruction makes. Inline
    /// with the classes that say it: as a call it cost 21 instructions a
    /// block (callgrind, `ptdec report` of the bench's interp trace).
    #[inline]
    pub(super) fn classify(self, b: &Block) -> Option<Transfer> {
        use ipt::iclass::*;
        match b.iclass {
            CALL | FAR_CALL => Some(Transfer::Call),
            RETURN | FAR_RETURN => Some(Transfer::Return),
            JUMP | FAR_JUMP => Some(Transfer::Jump),
            COND_JUMP | OTHER | PTWRITE => None,
            // A copy, made here: with `b` itself, its address escaped to
            // the out-of-line call, and a block the fast decoder followed
            // was written to memory whole for every block, never taking
            // this path (`ptdec report` 2-4% more instructions).
            _ => {
                let copy = *b;
                self.classify_insn(&copy)
            }
        }
    }

    /// [`Insns::classify`] for the classes that do not say.
    #[inline(never)]
    fn classify_insn(self, b: &Block) -> Option<Transfer> {
        match b.iclass {
            // INDIRECT (an indirect jump or a far transfer), UNKNOWN and
            // classes newer libipt may add: look at the instruction (once
            // per address of an image section).
            _ if b.isid > 0 && !b.truncated => {
                let key = (b.isid, b.end_ip);
                if let Some(&k) = self.0.last_kinds.borrow().get(&key) {
                    return Transfer::from_code(k);
                }
                let t = self.decode_last(b);
                self.0
                    .last_kinds
                    .borrow_mut()
                    .insert(key, Transfer::code(t));
                t
            }
            _ => self.decode_last(b),
        }
    }

    fn decode_last(self, b: &Block) -> Option<Transfer> {
        match self.last_insn(b) {
            Some(insn) => Transfer::of_insn(&insn),
            // No bytes: the decoder followed it, so it transfers control.
            None => (!b.truncated && b.isid <= 0).then_some(Transfer::Jump),
        }
    }

    /// The length of the block's last instruction (a call's: the return
    /// address follows it): the decoder's when it said (the fast decoder
    /// always does; the lookup below was 1.4% of `ptdec report`), else
    /// cached per worker.
    #[inline]
    pub(super) fn last_len(self, b: &Block) -> Option<u8> {
        if b.truncated || b.size != 0 {
            return Some(b.size);
        }
        // A copy, as in `classify`.
        let copy = *b;
        self.last_len_cached(&copy)
    }

    /// [`Insns::last_len`] when the decoder did not say.
    #[inline(never)]
    fn last_len_cached(self, b: &Block) -> Option<u8> {
        let key = (b.isid, b.end_ip);
        if let Some(&n) = self.0.call_lens.borrow().get(&key) {
            return Some(n);
        }
        let n = self.last_insn(b)?.len() as u8;
        self.0.call_lens.borrow_mut().insert(key, n);
        Some(n)
    }

    /// The block's last instruction, decoded with iced-x86 from the block's
    /// raw bytes (truncated blocks) or the image section cache.
    pub(super) fn last_insn(self, b: &Block) -> Option<iced_x86::Instruction> {
        if b.truncated {
            let bytes = &b.raw[..usize::from(b.size).min(b.raw.len())];
            return decode_one(b.bitness(), bytes, b.end_ip);
        }
        self.insn_at(b, b.end_ip)
    }

    /// The instruction at `ip` of block `b`'s image section.
    pub(super) fn insn_at(self, b: &Block, ip: u64) -> Option<iced_x86::Instruction> {
        if b.truncated && ip == b.end_ip {
            return self.last_insn(b);
        }
        let isid = u32::try_from(b.isid).ok().filter(|&i| i > 0)?;
        let mut buf = [0u8; 15];
        let n = self.0.read(&mut buf, isid, ip)?;
        decode_one(b.bitness(), &buf[..n], ip)
    }

    /// The address of each instruction of `b` in turn, `Err(ip)` at the
    /// first one that cannot be read (the block goes on past it): the
    /// addresses between `ip` and `end_ip` come from decoding each
    /// instruction's length, and a direct branch inside a block is
    /// followed (ptxed's `xed_next_ip` adds the displacement likewise).
    pub(super) fn each_ip(self, b: &Block, mut each: impl FnMut(Result<u64, u64>)) {
        let mut ip = b.ip;
        for i in 0..b.ninsn {
            each(Ok(ip));
            if i + 1 == b.ninsn {
                break;
            }
            let Some(insn) = self.insn_at(b, ip) else {
                each(Err(ip));
                return;
            };
            use iced_x86::OpKind as K;
            ip = match insn.op0_kind() {
                K::NearBranch16 | K::NearBranch32 | K::NearBranch64 => insn.near_branch_target(),
                _ => insn.next_ip(),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::setup::DecodeSetup;
    use crate::decode::{DecodeOptions, RawConfig};
    use crate::model::source::RawSection;
    use ipt::iclass;

    const BASE: u64 = 0x40_0000;
    /// nop; call +0; jmp rax; ret; jz +2; syscall; int 0x80; ud2; call rax
    const CODE: &[u8] = &[
        0x90, 0xe8, 0, 0, 0, 0, 0xff, 0xe0, 0xc3, 0x74, 0x02, 0x0f, 0x05, 0xcd, 0x80, 0x0f, 0x0b,
        0xff, 0xd0,
    ];

    /// The worker images of a raw decode of `CODE` at `BASE`.
    fn with_images(f: impl FnOnce(Insns<'_, '_, '_>)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("code.bin");
        std::fs::write(&path, CODE).unwrap();
        let section = RawSection {
            path,
            offset: 0,
            size: CODE.len() as u64,
            vaddr: BASE,
        };
        let opts = DecodeOptions::default();
        let setup = DecodeSetup::raw(&[section], &RawConfig::default(), &opts);
        let images = WorkerImages::new(&setup).unwrap();
        assert_eq!(images.isid(0), Some(1));
        f(Insns(&images));
    }

    /// A block of `CODE` from `ip` to `end_ip`, in section 1, with the
    /// class `iclass` and no length.
    fn block(ip: u64, end_ip: u64, iclass: u32, ninsn: u16) -> Block {
        Block {
            ip: BASE + ip,
            end_ip: BASE + end_ip,
            isid: 1,
            mode: ipt::mode::BITS64,
            iclass,
            ninsn,
            ..Block::default()
        }
    }

    /// A block whose last instruction's bytes the decoder gave
    /// (`truncated`: none in an image section).
    fn truncated(bytes: &[u8], iclass: u32) -> Block {
        let mut raw = [0u8; 15];
        raw[..bytes.len()].copy_from_slice(bytes);
        Block {
            ip: 0x1000,
            end_ip: 0x1000,
            isid: 0,
            mode: ipt::mode::BITS64,
            iclass,
            ninsn: 1,
            raw,
            size: bytes.len() as u8,
            truncated: true,
            ..Block::default()
        }
    }

    #[test]
    fn the_class_says_it_where_it_can() {
        with_images(|insns| {
            // The class wins over the bytes: a `ret` classed as a call.
            for (class, want) in [
                (iclass::CALL, Some(Transfer::Call)),
                (iclass::FAR_CALL, Some(Transfer::Call)),
                (iclass::RETURN, Some(Transfer::Return)),
                (iclass::FAR_RETURN, Some(Transfer::Return)),
                (iclass::JUMP, Some(Transfer::Jump)),
                (iclass::FAR_JUMP, Some(Transfer::Jump)),
                (iclass::COND_JUMP, None),
                (iclass::OTHER, None),
                (iclass::PTWRITE, None),
            ] {
                assert_eq!(
                    insns.classify(&block(8, 8, class, 1)),
                    want,
                    "class {class}"
                );
            }
            assert!(insns.0.last_kinds.borrow().is_empty());
        });
    }

    #[test]
    fn otherwise_the_instruction_says_it_once_per_address() {
        with_images(|insns| {
            for (at, want) in [
                (1, Some(Transfer::Call)),   // call rel32
                (6, Some(Transfer::Jump)),   // jmp rax
                (8, Some(Transfer::Return)), // ret
                (9, None),                   // jz
                (11, Some(Transfer::Call)),  // syscall: into the kernel
                (13, Some(Transfer::Call)),  // int 0x80
                (15, None),                  // ud2
                (17, Some(Transfer::Call)),  // call rax
            ] {
                for class in [iclass::INDIRECT, iclass::UNKNOWN, 99] {
                    let b = block(0, at, class, 2);
                    assert_eq!(insns.classify(&b), want, "at {at}, class {class}");
                }
                let cached = insns.0.last_kinds.borrow().get(&(1, BASE + at)).copied();
                assert_eq!(cached, Some(Transfer::code(want)), "at {at}");
            }
            // Read from the cache, not the code: a planted entry wins.
            insns
                .0
                .last_kinds
                .borrow_mut()
                .insert((1, BASE + 9), Transfer::code(Some(Transfer::Return)));
            let b = block(0, 9, iclass::INDIRECT, 2);
            assert_eq!(insns.classify(&b), Some(Transfer::Return));
        });
    }

    #[test]
    fn truncated_blocks_and_blocks_without_bytes() {
        with_images(|insns| {
            let b = truncated(&[0xff, 0xd0], iclass::INDIRECT);
            assert_eq!(insns.classify(&b), Some(Transfer::Call));
            assert_eq!(insns.last_len(&b), Some(2));
            assert_eq!(
                insns.classify(&truncated(&[0xc3], iclass::UNKNOWN)),
                Some(Transfer::Return)
            );
            assert_eq!(
                insns.classify(&truncated(&[0x0f, 0x0b], iclass::UNKNOWN)),
                None
            );
            // Bytes that are no instruction: nothing.
            assert_eq!(insns.classify(&truncated(&[0x0f], iclass::UNKNOWN)), None);
            // No section and no bytes: the decoder followed it somewhere.
            let mut b = block(0, 0, iclass::INDIRECT, 1);
            b.isid = 0;
            assert_eq!(insns.classify(&b), Some(Transfer::Jump));
            // Nothing was cached for them.
            assert!(insns.0.last_kinds.borrow().is_empty());
        });
    }

    #[test]
    fn the_length_of_a_call_is_the_decoders_or_read_once() {
        with_images(|insns| {
            let mut b = block(0, 1, iclass::CALL, 2);
            b.size = 5;
            assert_eq!(insns.last_len(&b), Some(5));
            assert!(insns.0.call_lens.borrow().is_empty());
            b.size = 0;
            assert_eq!(insns.last_len(&b), Some(5));
            assert_eq!(insns.0.call_lens.borrow().get(&(1, BASE + 1)), Some(&5));
            let b = block(0, 17, iclass::CALL, 2);
            assert_eq!(insns.last_len(&b), Some(2));
            // Outside the section: unknown.
            let b = block(0x100, 0x100, iclass::CALL, 1);
            assert_eq!(insns.last_len(&b), None);
        });
    }

    #[test]
    fn each_ip_walks_the_block_and_follows_direct_branches() {
        with_images(|insns| {
            // nop, call +0 (followed: its target is the next instruction),
            // jmp rax.
            let mut got = Vec::new();
            insns.each_ip(&block(0, 6, iclass::INDIRECT, 3), |r| got.push(r));
            assert_eq!(got, [Ok(BASE), Ok(BASE + 1), Ok(BASE + 6)]);
            // A jz taken inside a block: followed to its target.
            let mut got = Vec::new();
            insns.each_ip(&block(9, 13, iclass::OTHER, 2), |r| got.push(r));
            assert_eq!(got, [Ok(BASE + 9), Ok(BASE + 13)]);
            // Code that cannot be read stops the walk at it.
            let mut got = Vec::new();
            insns.each_ip(&block(0x100, 0x110, iclass::OTHER, 3), |r| got.push(r));
            assert_eq!(got, [Ok(BASE + 0x100), Err(BASE + 0x100)]);
        });
    }
}
