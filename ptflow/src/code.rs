//! Code as the flow decoder walks it: the sections of an image (file
//! bytes mapped once per worker), each instruction decoded once with
//! iced-x86 and classed as libipt's instruction length decoder classes it
//! (`ptic_*`), and straight runs of instructions up to the next branch
//! cached by (section, address) as [`Node`]s with links to the runs that
//! followed them, so the same code is decoded once per worker whatever
//! the trace's length and a repeated path is followed without lookups.
//! The caches are bounded: when one is full it is cleared (the nodes with
//! a new generation, which makes every link and node index held outside
//! stale).

use std::rc::Rc;

use pttypes::iclass;
use rustc_hash::FxHashMap;

use super::Fail;

/// The most instructions or runs a cache holds before it is cleared:
/// about 20 MB per worker each, whatever the code and trace are.
const CACHE_MAX: usize = 1 << 18;

/// An instruction class, as libipt's `enum pt_insn_class`, with
/// libipt's values (so [`Class::raw`] is a cast, not a table jump the
/// profile found on every block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Class {
    Other = iclass::OTHER as u8,
    Call = iclass::CALL as u8,
    Return = iclass::RETURN as u8,
    Jump = iclass::JUMP as u8,
    CondJump = iclass::COND_JUMP as u8,
    FarCall = iclass::FAR_CALL as u8,
    FarReturn = iclass::FAR_RETURN as u8,
    FarJump = iclass::FAR_JUMP as u8,
    Ptwrite = iclass::PTWRITE as u8,
}

impl Class {
    /// libipt's value.
    #[inline]
    pub fn raw(self) -> u32 {
        u32::from(self as u8)
    }

    /// Whether a block ends at it (with blocks ended at every call and
    /// jump: every branch).
    #[inline]
    pub fn is_branch(self) -> bool {
        !matches!(self, Class::Other | Class::Ptwrite)
    }
}

/// One decoded instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub ip: u64,
    pub size: u8,
    pub class: Class,
    /// A direct near call or jump (or a conditional one): its displacement.
    pub direct: bool,
    pub disp: i64,
    /// MOV to CR3 (libipt's `PTI_INST_MOV_CR3`, class other): paging
    /// events and synchronous disables without an IP bind to it.
    pub mov_cr3: bool,
    /// libipt's `PTI_INST_VMPTRLD`, which its length decoder gives every
    /// `0f c7 /6` with a memory operand (VMPTRLD, VMCLEAR, VMXON): VMCS
    /// events bind to it.
    pub vmptrld: bool,
    /// Which event trace events bind to it when they come without an IP
    /// ([`binds`]): an iret event to IRET, SYSRET or SYSEXIT (and FRED's
    /// ERETU/ERETS, as libipt 2.2's vectors show), a vmentry event to
    /// VMLAUNCH or VMRESUME, a uiret event to UIRET (libipt's
    /// `pt_insn_is_iret`, `_is_vmentry`, `_is_uiret`).
    pub binds: u8,
}

/// What [`Insn::binds`] holds.
pub mod binds {
    pub const IRET: u8 = 1;
    pub const VMENTRY: u8 = 2;
    pub const UIRET: u8 = 4;
}

impl Insn {
    #[inline]
    pub fn next(&self) -> u64 {
        self.ip.wrapping_add(u64::from(self.size))
    }

    /// The IP after it when no trace is needed (`pt_insn_next_ip`):
    /// `None` when it needs trace.
    #[inline]
    pub fn next_ip(&self) -> Option<u64> {
        match self.class {
            Class::Other | Class::Ptwrite => Some(self.next()),
            Class::Call | Class::Jump if self.direct => {
                Some(self.next().wrapping_add(self.disp as u64))
            }
            _ => None,
        }
    }
}

/// A straight run from an address: `ninsn` instructions, the last one
/// `last` (a branch, or the section's last whole instruction).
#[derive(Debug, Clone, Copy)]
pub struct Run {
    pub ninsn: u32,
    pub last: Insn,
}

/// One section of an image: `len` bytes of a mapped file at `vaddr`.
#[derive(Clone)]
pub struct Section {
    pub isid: u32,
    pub vaddr: u64,
    /// The bytes the section is part of (a mapped file, say).
    pub bytes: Rc<dyn AsRef<[u8]>>,
    pub offset: usize,
    pub len: usize,
    /// What the code cache knows the section's code by: `isid`, or for
    /// the part of a section that a later one left ([`Image::new`]), an
    /// id of that part's own, since a run cached in the whole section
    /// may go past the part's end.
    pub(crate) key: u32,
}

/// The first id [`Image::new`] gives the part of a section (above every
/// isid libipt gives: those are positive `int`s).
const PART_KEYS: u32 = 1 << 31;

/// The id of the part of section `isid` at `vaddr`, `len` bytes long:
/// the same part gets the same id in every image (so a worker's code
/// cache keeps what it decoded there), another part another id.
fn part_key(isid: u32, vaddr: u64, len: usize) -> u32 {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    static PARTS: Mutex<BTreeMap<(u32, u64, usize), u32>> = Mutex::new(BTreeMap::new());
    let mut parts = PARTS.lock().unwrap_or_else(|e| e.into_inner());
    let next = PART_KEYS.saturating_add(parts.len() as u32);
    *parts.entry((isid, vaddr, len)).or_insert(next)
}

impl Section {
    /// Section `isid`: `len` bytes of `bytes` from `offset`, at `vaddr`.
    pub fn new(
        isid: u32,
        vaddr: u64,
        bytes: Rc<dyn AsRef<[u8]>>,
        offset: usize,
        len: usize,
    ) -> Section {
        Section {
            isid,
            vaddr,
            bytes,
            offset,
            len,
            key: isid,
        }
    }

    /// The part of this section from `vaddr`, `len` bytes long (within
    /// it), with the part's own cache key.
    fn part(&self, vaddr: u64, len: usize) -> Section {
        Section {
            isid: self.isid,
            vaddr,
            bytes: self.bytes.clone(),
            offset: self.offset + (vaddr - self.vaddr) as usize,
            len,
            key: part_key(self.isid, vaddr, len),
        }
    }

    #[inline]
    fn contains(&self, ip: u64) -> bool {
        ip >= self.vaddr && ip - self.vaddr < self.len as u64
    }

    #[inline]
    fn code(&self) -> &[u8] {
        &(*self.bytes).as_ref()[self.offset..self.offset + self.len]
    }
}

/// The sections of the image being decoded.
#[derive(Clone, Default)]
pub struct Image {
    /// By address, none overlapping.
    sections: Vec<Section>,
    /// The section the last lookup found (most lookups hit it again).
    last: std::cell::Cell<u32>,
    /// A section whose file could not be mapped is part of the image.
    missing: bool,
    /// A section was split: `find` looks every address up (see there).
    split: bool,
}

impl Image {
    /// The image of `sections`, added in this order as libipt's
    /// `pt_image_add` adds them: a section hides what it overlaps of
    /// those before it, which keep the parts before and after it (with
    /// their isid). `missing`: some of its code could not be read
    /// (decoding there is given up, as for code outside the image). A
    /// section whose `offset + len` lies past its bytes, or whose
    /// addresses wrap, counts as missing and is left out.
    pub fn new(sections: Vec<Section>, missing: bool) -> Image {
        let whole = |x: &Section| {
            x.offset
                .checked_add(x.len)
                .is_some_and(|end| end <= (*x.bytes).as_ref().len())
                && x.vaddr.checked_add(x.len as u64).is_some()
        };
        let n = sections.len();
        let sections: Vec<Section> = sections.into_iter().filter(whole).collect();
        let missing = missing || sections.len() < n;
        let mut s: Vec<Section> = Vec::with_capacity(n);
        let mut split = false;
        for new in sections {
            let (begin, end) = (new.vaddr, new.vaddr + new.len as u64);
            if s.iter()
                .any(|x| x.vaddr < end && begin < x.vaddr + x.len as u64)
            {
                let mut kept = Vec::with_capacity(s.len() + 1);
                for x in s {
                    let (xb, xe) = (x.vaddr, x.vaddr + x.len as u64);
                    if xe <= begin || end <= xb {
                        kept.push(x);
                        continue;
                    }
                    if xb < begin {
                        kept.push(x.part(xb, (begin - xb) as usize));
                    }
                    if end < xe {
                        kept.push(x.part(end, (xe - end) as usize));
                    }
                }
                s = kept;
                split = true;
            }
            s.push(new);
        }
        s.sort_by_key(|x| x.vaddr);
        Image {
            sections: s,
            last: std::cell::Cell::new(0),
            missing,
            split,
        }
    }

    /// Whether the instruction at `ip`, decoded as `bitness`-bit code, is
    /// VMLAUNCH or VMRESUME, where erratum SKD022 may turn an asynchronous
    /// disable into a synchronous one (libipt's
    /// `pt_blk_handle_erratum_skd022`; code it cannot read does not apply).
    /// `Err` where libipt might read what this image cannot (a section
    /// whose file could not be mapped).
    pub fn is_vm_entry(&self, ip: u64, bitness: u32) -> Result<bool, Fail> {
        let (raw, n) = match self.read_insn(ip) {
            Ok(r) => r,
            Err(Fail::Pt(_)) => return Ok(false),
            Err(e) => return Err(e),
        };
        let i = iced_x86::Decoder::with_ip(bitness, &raw[..n], ip, iced_x86::DecoderOptions::NONE)
            .decode();
        Ok(matches!(
            i.mnemonic(),
            iced_x86::Mnemonic::Vmlaunch | iced_x86::Mnemonic::Vmresume
        ))
    }

    /// The instruction at `ip`, decoded without the cache (for the
    /// errata's rare looks at code off the decoder's path), read as
    /// [`Self::read_insn`] reads it.
    pub fn insn_at(&self, ip: u64, bitness: u32) -> Result<Insn, Fail> {
        self.insn_across(ip, bitness).map(|(i, _)| i)
    }

    /// The `bitness`-bit instruction at `ip`, read as [`Self::read_insn`]
    /// reads it, and its bytes: for one that its section's end cuts (a
    /// truncated instruction, in libipt's words), what the block gives
    /// (`Block::raw`). libipt's `BAD_INSN` when the image holds no more
    /// of it.
    pub fn insn_across(&self, ip: u64, bitness: u32) -> Result<(Insn, [u8; 15]), Fail> {
        let (raw, n) = self.read_insn(ip)?;
        let mut d =
            iced_x86::Decoder::with_ip(bitness, &raw[..n], ip, iced_x86::DecoderOptions::NONE);
        let i = d.decode();
        if i.is_invalid() {
            return Err(if d.last_error() == iced_x86::DecoderError::NoMoreBytes {
                Fail::Pt(pttypes::Error::BAD_INSN)
            } else {
                Fail::Unsupported(&"an instruction iced-x86 cannot decode")
            });
        }
        Ok((classify(&i)?, raw))
    }

    /// Up to 15 bytes from `ip` on, as libipt's `pt_insn_decode` reads an
    /// instruction: from the section holding `ip` and, past its end, from
    /// the sections holding the addresses after it, for as long as there
    /// are some (`pt_insn_decode_retry`); the bytes and how many.
    pub fn read_insn(&self, ip: u64) -> Result<([u8; 15], usize), Fail> {
        let mut raw = [0u8; 15];
        let mut n = 0;
        while n < raw.len() {
            let at = ip.wrapping_add(n as u64);
            let s = match self.find(at) {
                Ok(s) => s,
                Err(Fail::Pt(_)) if n > 0 => break,
                Err(e) => return Err(e),
            };
            let code = s.code();
            let off = (at - s.vaddr) as usize;
            let k = (code.len() - off).min(raw.len() - n);
            raw[n..n + k].copy_from_slice(&code[off..off + k]);
            n += k;
        }
        Ok((raw, n))
    }

    /// The section holding `ip`. In an image where sections overlap
    /// (split ones: rare) every address is looked up; the test that says
    /// so also keeps the common case's code as it was before split images
    /// were followed: without it, LLVM kept fewer of the fast path's
    /// values in registers (1% more instructions in `ptbench-fast`).
    #[inline]
    pub fn find(&self, ip: u64) -> Result<&Section, Fail> {
        if let Some(s) = self.sections.get(self.last.get() as usize) {
            if s.contains(ip) && !self.split {
                return Ok(s);
            }
        }
        self.find_slow(ip)
    }

    fn find_slow(&self, ip: u64) -> Result<&Section, Fail> {
        let i = self.sections.partition_point(|s| s.vaddr <= ip);
        match i.checked_sub(1).map(|i| (i, &self.sections[i])) {
            Some((i, s)) if s.contains(ip) => {
                self.last.set(i as u32);
                Ok(s)
            }
            _ if self.missing => Err(Fail::Unsupported(&"an image file could not be mapped")),
            // libipt's error there.
            _ => Err(Fail::Pt(pttypes::Error::NOMAP)),
        }
    }
}

/// Slots of the direct-mapped cache in front of the run map.
const FRONT: usize = 1 << 14;

/// The slot of `ip` in the direct-mapped cache.
#[inline(always)]
fn front_slot(ip: u64) -> usize {
    ((ip ^ (ip >> 14)) as usize) & (FRONT - 1)
}

/// No node (an empty link).
pub const NO_NODE: u32 = u32::MAX;

/// Successor links of a node: the fall-through of a conditional branch
/// (or a direct call's or jump's target), its taken target, the last
/// target an indirect branch went to, and for a call the run its
/// compressed returns go back to (the block decoder keeps the call's node
/// beside the return address it pushes).
pub const NEXT_NOT_TAKEN: usize = 0;
pub const NEXT_TAKEN: usize = 1;
pub const NEXT_INDIRECT: usize = 2;
pub const NEXT_RETURN: usize = 3;

/// A cached run with links to the runs that followed it, so a block
/// decoder following TNT bits or a repeated branch target finds the next
/// run without hashing or looking up its section (see
/// [`super::block`]). A link is a hint: the node it names is used only
/// when its `ip` is the IP reached, and links only join runs of one
/// section, so the section the image would give is the node's own.
/// One node fills one cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct Node {
    pub ip: u64,
    pub isid: u32,
    pub ninsn: u32,
    pub last: Insn,
    pub next: [u32; 4],
    /// The section's cache key ([`Section`]'s `key`): what links and
    /// lookups match. (Last: `isid` and `ninsn` are read together for
    /// every block.)
    pub key: u32,
}

impl Node {
    #[inline]
    pub fn run(&self) -> Run {
        Run {
            ninsn: self.ninsn,
            last: self.last,
        }
    }
}

/// A node in the direct-mapped cache, keyed by (section's cache key,
/// address).
#[derive(Clone, Copy)]
struct Front {
    ip: u64,
    /// 0: empty (section ids, and so keys, start at 1).
    key: u32,
    node: u32,
}

impl Front {
    const EMPTY: Front = Front {
        ip: 0,
        key: 0,
        node: NO_NODE,
    };
}

/// A fresh generation: node indexes and links are valid only with the
/// generation they were made in, which no other cache and no other
/// fill of this one has.
fn new_gen() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A worker's decoded code, shared by its chunks.
pub struct CodeCache {
    insns: FxHashMap<(u32, u64), Insn>,
    /// 16- and 32-bit code's instructions, by (section, address, bitness).
    other_insns: FxHashMap<(u32, u64, u8), Insn>,
    /// The node of each run, by (section, address).
    runs: FxHashMap<(u32, u64), u32>,
    nodes: Vec<Node>,
    /// The last node seen at each slot: most lookups are found here
    /// without hashing.
    /// (A boxed array: an index masked to its size needs no bounds
    /// check.)
    front: Box<[Front; FRONT]>,
    /// Changes whenever the nodes are cleared (never 0).
    gen: u64,
    /// Counts the conditional and direct links made to name another node
    /// than they named: the walks found before are stale then.
    relinks: u64,
}

impl Default for CodeCache {
    fn default() -> Self {
        CodeCache {
            insns: FxHashMap::default(),
            other_insns: FxHashMap::default(),
            runs: FxHashMap::default(),
            nodes: Vec::new(),
            front: vec![Front::EMPTY; FRONT]
                .into_boxed_slice()
                .try_into()
                .unwrap_or_else(|_| unreachable!("FRONT slots")),
            gen: new_gen(),
            relinks: 0,
        }
    }
}

/// Decodes the 64-bit instruction at `ip` of `s`.
fn decode(s: &Section, ip: u64) -> Result<Insn, Fail> {
    decode_in(s, ip, 64)
}

/// Decodes the `bitness`-bit (16, 32 or 64) instruction at `ip` of `s`.
fn decode_in(s: &Section, ip: u64, bitness: u32) -> Result<Insn, Fail> {
    let code = s.code();
    let off = (ip - s.vaddr) as usize;
    let bytes = &code[off..code.len().min(off + 15)];
    if let Some(insn) = jmpabs(bytes, ip, bitness) {
        return Ok(insn);
    }
    let mut d = iced_x86::Decoder::with_ip(bitness, bytes, ip, iced_x86::DecoderOptions::NONE);
    let i = d.decode();
    if i.is_invalid() {
        return Err(
            if bytes.len() < 15 && d.last_error() == iced_x86::DecoderError::NoMoreBytes {
                Fail::CUT
            } else {
                Fail::Unsupported(&"an instruction iced-x86 cannot decode")
            },
        );
    }
    classify(&i)
}

/// APX's `JMPABS imm64` (REX2 `d5` with M0 = W = 0, opcode `a1`, 11
/// bytes) in 64-bit code, which iced-x86 does not decode: as libipt 2.2
/// takes it, an indirect jump whose target a TIP gives (the trace, not the
/// immediate, says where it went).
fn jmpabs(bytes: &[u8], ip: u64, bitness: u32) -> Option<Insn> {
    match bytes {
        [0xd5, rex2, 0xa1, imm @ ..] if bitness == 64 && rex2 & 0x88 == 0 && imm.len() >= 8 => {
            Some(Insn {
                ip,
                size: 11,
                class: Class::Jump,
                direct: false,
                disp: 0,
                mov_cr3: false,
                vmptrld: false,
                binds: 0,
            })
        }
        _ => None,
    }
}

/// libipt's class of `i` (pt_ild's opcode table: conditional jumps and
/// loops, near and far calls and jumps, returns, software interrupts,
/// syscall/sysenter and their returns, VM calls and entries, ptwrite).
fn classify(i: &iced_x86::Instruction) -> Result<Insn, Fail> {
    use iced_x86::{Mnemonic as M, Register};
    let mut insn = Insn {
        ip: i.ip(),
        size: i.len() as u8,
        class: Class::Other,
        direct: false,
        disp: 0,
        mov_cr3: false,
        vmptrld: false,
        binds: 0,
    };
    // libipt's target is the IP after the branch plus the sign-extended
    // displacement, never cut to the operand size (`pt_insn_next_ip`);
    // iced-x86 cuts a 16- or 32-bit operand size's target, which still
    // holds the displacement modulo that size.
    let direct = |insn: &mut Insn| {
        insn.direct = true;
        let d = i.near_branch_target().wrapping_sub(i.next_ip());
        insn.disp = match i.op0_kind() {
            iced_x86::OpKind::NearBranch16 => i64::from(d as u16 as i16),
            iced_x86::OpKind::NearBranch32 => i64::from(d as u32 as i32),
            _ => d as i64,
        };
    };
    if i.is_jcc_short_or_near() || i.is_loop() || i.is_loopcc() || i.is_jcx_short() {
        insn.class = Class::CondJump;
        direct(&mut insn);
    } else if i.is_call_near() {
        insn.class = Class::Call;
        direct(&mut insn);
    } else if i.is_call_near_indirect() {
        insn.class = Class::Call;
    } else if i.is_call_far() || i.is_call_far_indirect() {
        insn.class = Class::FarCall;
    } else if i.is_jmp_short_or_near() {
        insn.class = Class::Jump;
        direct(&mut insn);
    } else if i.is_jmp_near_indirect() {
        insn.class = Class::Jump;
    } else if i.is_jmp_far() || i.is_jmp_far_indirect() {
        insn.class = Class::FarJump;
    } else {
        insn.class = match i.mnemonic() {
            M::Ret => Class::Return,
            M::Retf => Class::FarReturn,
            M::Iret | M::Iretd | M::Iretq => {
                insn.binds = binds::IRET;
                Class::FarReturn
            }
            M::Int | M::Int3 | M::Into | M::Int1 | M::Syscall | M::Sysenter | M::Vmcall => {
                Class::FarCall
            }
            M::Sysexit
            | M::Sysexitq
            | M::Sysret
            | M::Sysretq
            // FRED's returns (libipt 2.2; 2.1.2 takes them for no branch).
            | M::Eretu
            | M::Erets => {
                insn.binds = binds::IRET;
                Class::FarReturn
            }
            M::Vmlaunch | M::Vmresume => {
                insn.binds = binds::VMENTRY;
                Class::FarReturn
            }
            M::Uiret => {
                insn.binds = binds::UIRET;
                Class::FarReturn
            }
            M::Ptwrite => Class::Ptwrite,
            M::Mov if i.op0_register() == Register::CR3 => {
                insn.mov_cr3 = true;
                Class::Other
            }
            M::Vmptrld | M::Vmclear | M::Vmxon => {
                insn.vmptrld = true;
                Class::Other
            }
            _ => Class::Other,
        };
    }
    if i.len() > 15 || insn.size == 0 {
        return Err(Fail::Unsupported(&"instruction length"));
    }
    Ok(insn)
}

impl CodeCache {
    /// The instruction at `ip` of section `s`.
    pub fn insn(&mut self, s: &Section, ip: u64) -> Result<Insn, Fail> {
        if let Some(&i) = self.insns.get(&(s.key, ip)) {
            return Ok(i);
        }
        let i = decode(s, ip)?;
        if self.insns.len() >= CACHE_MAX {
            self.insns.clear();
        }
        self.insns.insert((s.key, ip), i);
        Ok(i)
    }

    /// The instruction at `ip` of section `s` in 16- or 32-bit code
    /// (`bitness`), cached apart from 64-bit code's.
    #[cold]
    pub fn insn_in(&mut self, s: &Section, ip: u64, bitness: u32) -> Result<Insn, Fail> {
        if let Some(&i) = self.other_insns.get(&(s.key, ip, bitness as u8)) {
            return Ok(i);
        }
        let i = decode_in(s, ip, bitness)?;
        if self.other_insns.len() >= CACHE_MAX {
            self.other_insns.clear();
        }
        self.other_insns.insert((s.key, ip, bitness as u8), i);
        Ok(i)
    }

    /// The run from `ip` of section `s`: instructions up to and including
    /// the first branch, or to the section's end.
    #[inline]
    pub fn run(&mut self, s: &Section, ip: u64) -> Result<Run, Fail> {
        let i = self.node_at(s, ip)?;
        Ok(self.nodes[i as usize].run())
    }

    /// The generation node indexes and links belong to.
    #[inline]
    pub fn gen(&self) -> u64 {
        self.gen
    }

    /// Node `i` of this generation.
    #[inline]
    pub fn node(&self, i: u32) -> Option<&Node> {
        self.nodes.get(i as usize)
    }

    /// Links node `from` to node `to` (same section) as its successor
    /// `slot`.
    #[inline]
    pub fn link(&mut self, from: u32, slot: usize, to: u32) {
        if let Some(n) = self.nodes.get_mut(from as usize) {
            let was = std::mem::replace(&mut n.next[slot], to);
            if slot <= NEXT_TAKEN && was != NO_NODE && was != to {
                self.relinks += 1;
            }
        }
    }

    /// How many conditional and direct links were made to name another
    /// node than they did (see [`crate::walk`]).
    #[inline]
    pub fn relinks(&self) -> u64 {
        self.relinks
    }

    /// The node of the run from `ip` of the section of cache key `key` if
    /// the direct-mapped cache has it, else [`NO_NODE`]: for a branch
    /// target in the section of the branch, whose section the image need
    /// not be asked for (with the key the code cache is keyed by, the run
    /// is that section's; the section holds `ip`, as it was looked up
    /// there).
    #[inline(always)]
    pub fn cached_node(&self, key: u32, ip: u64) -> u32 {
        let f = &self.front[front_slot(ip)];
        if f.key == key && f.ip == ip {
            f.node
        } else {
            NO_NODE
        }
    }

    /// The node of the run from `ip` of section `s`.
    #[inline(always)]
    pub fn node_at(&mut self, s: &Section, ip: u64) -> Result<u32, Fail> {
        let slot = front_slot(ip);
        let f = &self.front[slot];
        // Section ids start at 1: the empty slots never match.
        if f.key == s.key && f.ip == ip {
            return Ok(f.node);
        }
        let node = self.node_slow(s, ip)?;
        self.front[slot] = Front {
            ip,
            key: s.key,
            node,
        };
        Ok(node)
    }

    #[inline(never)]
    fn node_slow(&mut self, s: &Section, ip: u64) -> Result<u32, Fail> {
        if let Some(&i) = self.runs.get(&(s.key, ip)) {
            return Ok(i);
        }
        let mut at = ip;
        let mut n = 0u32;
        let mut prev = None;
        let last = loop {
            // An instruction its section's end cuts is not part of a run
            // (it is read from the sections after it, which another image
            // may not have): the run ends before it.
            let i = match (self.insn(s, at), prev) {
                (Ok(i), _) => i,
                (Err(f), Some(p)) if f.is_cut() => break p,
                (Err(e), _) => return Err(e),
            };
            prev = Some(i);
            n += 1;
            if i.class.is_branch() || !s.contains(i.next()) || n >= u32::from(u16::MAX) {
                break i;
            }
            at = i.next();
        };
        if self.runs.len() >= CACHE_MAX {
            self.runs.clear();
            self.nodes.clear();
            self.front.iter_mut().for_each(|f| f.key = 0);
            self.gen = new_gen();
        }
        let i = self.nodes.len() as u32;
        self.nodes.push(Node {
            ip,
            isid: s.isid,
            key: s.key,
            ninsn: n,
            last,
            next: [NO_NODE; 4],
        });
        self.runs.insert((s.key, ip), i);
        Ok(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class_of(bytes: &[u8]) -> Result<(Class, bool, u8), Fail> {
        let i =
            iced_x86::Decoder::with_ip(64, bytes, 0x1000, iced_x86::DecoderOptions::NONE).decode();
        if let Some(insn) = jmpabs(bytes, 0x1000, 64) {
            return Ok((insn.class, insn.direct, insn.size));
        }
        classify(&i).map(|insn| (insn.class, insn.direct, insn.size))
    }

    /// libipt 2.2's additions: FRED's returns are far returns, APX's
    /// JMPABS an indirect jump of 11 bytes (the TIP gives its target).
    #[test]
    fn fred_returns_and_jmpabs_are_branches() {
        let eretu = [0xf3, 0x0f, 0x01, 0xca];
        let erets = [0xf2, 0x0f, 0x01, 0xca];
        for b in [&eretu[..], &erets[..]] {
            assert_eq!(class_of(b).unwrap(), (Class::FarReturn, false, 4), "{b:x?}");
        }
        let jmpabs = [0xd5, 0x00, 0xa1, 0x0d, 0x10, 0, 0, 0, 0, 0, 0];
        assert_eq!(class_of(&jmpabs).unwrap(), (Class::Jump, false, 11));
        // Not with REX2.W or REX2.M0 set, cut short, or outside 64-bit code.
        assert!(super::jmpabs(&[0xd5, 0x08, 0xa1, 0, 0, 0, 0, 0, 0, 0, 0], 0, 64).is_none());
        assert!(super::jmpabs(&[0xd5, 0x80, 0xa1, 0, 0, 0, 0, 0, 0, 0, 0], 0, 64).is_none());
        assert!(super::jmpabs(&jmpabs[..10], 0, 64).is_none());
        assert!(super::jmpabs(&jmpabs, 0, 32).is_none());
    }

    /// nop x4; mov eax, imm32; jmp rax.
    const CODE: &[u8] = &[
        0x90, 0x90, 0x90, 0x90, 0xb8, 0x11, 0x22, 0x33, 0x44, 0xff, 0xe0,
    ];

    fn section(isid: u32, vaddr: u64, offset: usize, len: usize) -> Section {
        Section::new(isid, vaddr, Rc::new(CODE.to_vec()), offset, len)
    }

    /// A later section hides what it overlaps of an earlier one, which
    /// keeps its parts before and after it with its isid (libipt's
    /// `pt_image_add`), each under a cache key of its own: one code cache
    /// over the whole section and then over its part gives each its own
    /// runs (the whole section's runs past the part's end, the part's
    /// before the instruction its end cuts).
    #[test]
    fn a_later_section_splits_an_earlier_one() {
        let whole = Image::new(vec![section(1, 0x1000, 0, CODE.len())], false);
        let split = Image::new(
            vec![section(1, 0x1000, 0, CODE.len()), section(2, 0x1006, 6, 2)],
            false,
        );
        let found: Vec<(u32, u64, usize)> = [0x1000, 0x1006, 0x1008]
            .iter()
            .map(|&ip| {
                let s = split.find(ip).expect("mapped");
                (s.isid, s.vaddr, s.len)
            })
            .collect();
        assert_eq!(found, [(1, 0x1000, 6), (2, 0x1006, 2), (1, 0x1008, 3)]);
        let front = split.find(0x1000).expect("mapped");
        assert_ne!(front.key, 1, "a part's own key");
        assert_eq!(split.find(0x1006).expect("mapped").key, 2);

        let mut code = CodeCache::default();
        let run = code
            .run(whole.find(0x1000).expect("mapped"), 0x1000)
            .expect("a run");
        assert_eq!(
            (run.ninsn, run.last.ip, run.last.class),
            (6, 0x1009, Class::Jump)
        );
        // The mov at 0x1004 runs past the front part's end.
        let run = code.run(front, 0x1000).expect("a run");
        assert_eq!((run.ninsn, run.last.ip), (4, 0x1003));
        assert!(code.run(front, 0x1004).is_err_and(Fail::is_cut));
        // Read on from the sections after it: the same bytes here.
        let (insn, raw) = split.insn_across(0x1004, 64).expect("whole");
        assert_eq!((insn.size, &raw[..5]), (5, &CODE[4..9]));
        // Without them, libipt's BAD_INSN.
        let alone = Image::new(vec![section(1, 0x1000, 0, 6)], false);
        assert_eq!(
            alone.insn_across(0x1004, 64).err(),
            Some(Fail::Pt(pttypes::Error::BAD_INSN))
        );
    }
}
