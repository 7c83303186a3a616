//! [`super::FastDecoder::follow`]: a trace built by hand from the SDM's
//! packet layouts, decoded block by block and with blocks followed in the
//! decoder's own loop. The blocks followed must be the blocks
//! `next_block` hands out, each with the trace offset and time after it,
//! and the events must not change: also where a followed block uses up
//! its TNT or TIP and the decoder reads the next packet.

use pttypes::Block;

use super::code::CodeCache;
use super::test_packets::{MODE64, PSB, PSBEND, TIP_PGD};

const BASE: u64 = 0x6000_0000;
/// The same code in kernel space: nothing is followed there.
const KERNEL_BASE: u64 = 0xffff_ffff_a000_0000;

/// Two loops on a conditional branch each, then a jump back.
const CODE: &[u8] = &[
    0x75, 0xfe, // 0x00: jnz 0x00
    0x75, 0xfe, // 0x02: jnz 0x02
    0x90, //       0x04: nop
    0xeb, 0xf9, // 0x05: jmp 0x00
];

/// A loop, a call to a loop that returns, and two indirect jumps.
const CALLS: &[u8] = &[
    0x75, 0xfe, //                   0x00: jnz 0x00
    0x75, 0x07, //                   0x02: jnz 0x0b
    0xe8, 0x04, 0x00, 0x00, 0x00, // 0x04: call 0x0d
    0xff, 0xe0, //                   0x09: jmp *%rax
    0xff, 0xe0, //                   0x0b: jmp *%rax
    0x75, 0xfe, //                   0x0d: jnz 0x0d
    0xc3, //                         0x0f: ret
];

/// FUP with the full address (IPBytes 6).
fn fup(base: u64, off: u64) -> Vec<u8> {
    let mut v = vec![0x1d | (6 << 5)];
    v.extend_from_slice(&(base + off).to_le_bytes());
    v
}

/// TIP with the full address (IPBytes 6).
fn tip(base: u64, off: u64) -> Vec<u8> {
    let mut v = vec![0x0d | (6 << 5)];
    v.extend_from_slice(&(base + off).to_le_bytes());
    v
}

/// A short TNT packet: the branches in order, `true` for taken.
fn tnt(bits: &[bool]) -> Vec<u8> {
    assert!((1..=6).contains(&bits.len()));
    let v = bits.iter().fold(1u8, |v, &b| (v << 1) | u8::from(b));
    vec![v << 1]
}

/// TSC: `19`, then 7 bytes.
fn tsc(t: u64) -> Vec<u8> {
    let mut v = vec![0x19];
    v.extend_from_slice(&t.to_le_bytes()[..7]);
    v
}

/// What the test compares of a block.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Blk {
    ip: u64,
    end_ip: u64,
    iclass: u32,
    ninsn: u16,
    size: u8,
}

#[derive(Debug, Clone, PartialEq)]
enum Item {
    /// A block, the trace offset and the TSC after it.
    Block(Blk, Option<u64>, u64),
    Event(String),
}

fn blk(b: &Block) -> Blk {
    Blk {
        ip: b.ip,
        end_ip: b.end_ip,
        iclass: b.iclass,
        ninsn: b.ninsn,
        size: b.size,
    }
}

/// How the test decodes: block by block, or following blocks first
/// before each `next_block`, going on after at most `each_max` of them
/// per call.
#[derive(Clone, Copy)]
enum How {
    OneByOne,
    Follow {
        each_max: usize,
    },
    /// Following turned on, then off again.
    FollowOff,
    /// As `Follow`, taking walks ([`crate::walk`]) too: each walk's
    /// blocks, found again one by one, go where its blocks one by one
    /// would (a walk that would pass `each_max` is declined).
    Walk {
        each_max: usize,
    },
}

/// The test's [`super::block::Follow`]: each block goes to `out` with
/// the time and offset the decoder told last (before the first block,
/// and since where it read a packet), and to `followed` with whether the
/// decoder read a packet for it (told so before it, not first); at most
/// `each_max` of them per call.
struct Each<'a> {
    told: Option<(Option<u64>, u64)>,
    read: bool,
    out: &'a mut Vec<Item>,
    followed: &'a mut Vec<(Blk, bool)>,
    n: usize,
    each_max: usize,
}

impl super::block::Follow for Each<'_> {
    fn moved(&mut self, time: (u64, u32, u32), offset: Option<u64>) {
        self.told = Some((offset, time.0));
        self.read = self.n > 0;
    }

    fn block(&mut self, b: &Block) -> bool {
        let (off, time) = self.told.expect("told before the first block");
        self.out.push(Item::Block(blk(b), off, time));
        self.followed.push((blk(b), std::mem::take(&mut self.read)));
        self.n += 1;
        self.n < self.each_max
    }
}

/// [`Each`], taking walks: each walk's blocks ([`crate::walk::Walk::expand`])
/// as `Each` takes blocks.
struct Walking<'a> {
    each: Each<'a>,
    walks: usize,
}

impl super::block::Follow for Walking<'_> {
    const WALKS: bool = true;

    fn moved(&mut self, time: (u64, u32, u32), offset: Option<u64>) {
        self.each.moved(time, offset);
    }

    fn block(&mut self, b: &Block) -> bool {
        self.each.block(b)
    }

    fn walk(&mut self, w: &crate::walk::Walk, code: &CodeCache) -> Option<bool> {
        if self.each.n + w.blocks as usize > self.each.each_max {
            return None;
        }
        let blocks = w.expand(code);
        assert_eq!(
            blocks.len(),
            w.blocks as usize,
            "a walk's blocks found again"
        );
        assert_eq!(
            blocks.iter().map(|b| u64::from(b.ninsn)).sum::<u64>(),
            w.insns,
            "its instructions"
        );
        assert_eq!(
            (blocks[0].ip, blocks[blocks.len() - 1].end_ip),
            (w.first_ip, w.last_end)
        );
        let mut go_on = true;
        for b in &blocks {
            go_on = self.each.block(b);
        }
        self.walks += 1;
        Some(go_on)
    }
}

/// The items decoded from `t` with `CODE` at `base`, and how many
/// blocks `follow` handed out.
fn decode(t: &[u8], base: u64, how: How) -> (Vec<Item>, usize) {
    let (items, followed) = decode_code(("follow", CODE), t, base, how);
    (items, followed.len())
}

/// The items decoded from `t` with `code` (file `tag`) at `base`, and
/// the blocks `follow` handed out, each with whether the decoder read a
/// packet for it.
fn decode_code(
    (tag, bytes): (&str, &[u8]),
    t: &[u8],
    base: u64,
    how: How,
) -> (Vec<Item>, Vec<(Blk, bool)>) {
    let mut dec = super::test_packets::fast_decoder(tag, bytes, base, t);
    let each_max = match how {
        How::OneByOne => 0,
        How::Follow { each_max } | How::Walk { each_max } => {
            dec.set_follow(true);
            each_max
        }
        How::FollowOff => {
            dec.set_follow(true);
            dec.set_follow(false);
            usize::MAX
        }
    };
    let mut code = CodeCache::default();
    let mut walks = crate::walk::Walks::default();
    let mut out = Vec::new();
    let mut followed = Vec::new();
    let mut status = dec.sync_forward().expect("a PSB");
    for _ in 0..1000 {
        while status.event_pending() {
            let (ev, s) = dec.event().expect("an event");
            out.push(Item::Event(format!("{:?}", ev.kind())));
            status = s;
        }
        if status.eos() {
            break;
        }
        let mut b = Block::default();
        if each_max > 0 {
            let mut each = Each {
                told: None,
                read: false,
                out: &mut out,
                followed: &mut followed,
                n: 0,
                each_max,
            };
            let (handed, n) = if let How::Walk { .. } = how {
                let mut w = Walking { each, walks: 0 };
                let handed = dec.follow(&code, &mut walks, &mut b, &mut w);
                WALKS_TAKEN.with(|c| c.set(c.get() + w.walks));
                (handed, w.each.n)
            } else {
                let handed = dec.follow(&code, &mut walks, &mut b, &mut each);
                (handed, each.n)
            };
            assert_eq!(handed as usize, n, "follow counts what it handed out");
            assert!(n <= each_max, "it stops when told");
        }
        match dec.next_block(&mut code, &mut b) {
            Ok(s) => status = s,
            Err(e) => panic!("decode error {e:?}"),
        }
        out.push(Item::Block(blk(&b), dec.offset().ok(), dec.time().0));
    }
    assert_eq!(dec.unsupported(), None);
    (out, followed)
}

/// Loops on conditional branches, a TSC amid them, then a disable.
fn loops(base: u64) -> Vec<u8> {
    let (t, f, n) = (true, false, false);
    [
        &PSB[..],
        &MODE64,
        &fup(base, 0),
        &PSBEND,
        // 0: taken twice, on to 2; 2: taken, on to 4, back to 0; taken.
        &tnt(&[t, t, f, t, n, t]),
        // 0: on to 2; 2: on to 4, back to 0; 0: taken, on to 2.
        &tnt(&[n, n, t, n]),
        &tsc(0x1234_5678),
        // 2: taken twice, on to 4, back to 0; 0, 2: on, back to 0.
        &tnt(&[t, t, n, n, n]),
        // 0: taken three times (the TSC's time comes in their midst).
        &tnt(&[t, t, t]),
        &TIP_PGD,
    ]
    .concat()
}

thread_local! {
    /// Walks [`Walking`] took.
    static WALKS_TAKEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[test]
fn followed_blocks_are_the_blocks_next_block_hands_out() {
    let trace = loops(BASE);
    let (one, _) = decode(&trace, BASE, How::OneByOne);
    for each_max in [usize::MAX, 1, 2, 3, 5] {
        let (followed, n) = decode(&trace, BASE, How::Follow { each_max });
        assert_eq!(followed, one, "each_max {each_max}");
        WALKS_TAKEN.with(|c| c.set(0));
        let (walked, m) = decode(&trace, BASE, How::Walk { each_max });
        assert_eq!(walked, one, "walking, each_max {each_max}");
        assert_eq!(m, n, "walking, each_max {each_max}");
        let walks = WALKS_TAKEN.with(|c| c.get());
        // Walks longer than the follower's room are declined.
        assert!(each_max < usize::MAX || walks > 0, "no walk taken");
        // Most of the loops' branches take a bit that is not their
        // packet's last, and the jump back needs none.
        assert!(n >= 8, "{n} blocks followed, each_max {each_max}");
    }
    // The TSC amid the loops: blocks after it have its time.
    assert!(one
        .iter()
        .any(|i| matches!(i, Item::Block(_, _, 0x1234_5678))));
}

/// Calls, returns and indirect jumps through [`CALLS`], with a TSC amid
/// the packets.
fn calls(base: u64) -> Vec<u8> {
    let (t, f) = (true, false);
    [
        &PSB[..],
        &MODE64,
        &fup(base, 0),
        &PSBEND,
        // 0: taken twice, on to 2; 2: on to the call; 0xd: taken twice,
        // on to the return (compressed, the packet's last bit).
        &tnt(&[t, t, f, f]),
        &tnt(&[t, t, f, t]),
        // 9: back to 0.
        &tip(base, 0),
        // 0: on to 2; 2: taken, to 0xb.
        &tnt(&[f, t]),
        // 0xb: to 0xb again, then to 2.
        &tip(base, 0xb),
        &tip(base, 2),
        // Three times (the runs are linked the first time, followed
        // after): 2: on to the call; 0xd: on to the return; 9: to 0; 0:
        // on to 2.
        &tnt(&[f, f, t]),
        &tip(base, 0),
        &tnt(&[f, f, f, t]),
        &tip(base, 0),
        &tnt(&[f, f, f, t]),
        &tip(base, 0),
        &tsc(0x1234_5678),
        // 0: taken, on to 2; 2: taken, to 0xb; to 0.
        &tnt(&[t, f, t]),
        &tip(base, 0),
        &tnt(&[t]),
        &TIP_PGD,
    ]
    .concat()
}

#[test]
fn followed_blocks_go_on_through_the_next_packets() {
    let trace = calls(BASE);
    let (one, _) = decode_code(("calls", CALLS), &trace, BASE, How::OneByOne);
    let mut all = Vec::new();
    for each_max in [usize::MAX, 1, 2, 3] {
        let (items, followed) =
            decode_code(("calls", CALLS), &trace, BASE, How::Follow { each_max });
        assert_eq!(items, one, "each_max {each_max}");
        all.extend(followed);
    }
    // Blocks that used up their packet were followed: a conditional
    // branch and a return taking a TNT's last bit, and the indirect jumps
    // taking a TIP (a TIP after one, too).
    for end in [0x2, 0xf, 0x9, 0xb] {
        assert!(
            all.iter().any(|&(b, read)| read && b.end_ip == BASE + end),
            "no block ending at {end:#x} followed with the next packet read: {all:x?}"
        );
    }
    assert!(one
        .iter()
        .any(|i| matches!(i, Item::Block(_, _, 0x1234_5678))));
}

/// A far transfer at 0, and a jump back to it at `.1`, for each kind the
/// fast decoder knows: a syscall (`FarCall`), a far jump through memory
/// (`FarJump`) and a far return (`FarReturn`).
const FAR_TRANSFERS: [(&str, u64, &[u8]); 3] = [
    (
        "syscalls",
        2,
        &[
            0x0f, 0x05, // 0x00: syscall
            0xeb, 0xfc, // 0x02: jmp 0x00
        ],
    ),
    (
        "far jumps",
        6,
        &[
            0xff, 0x2d, 0, 0, 0, 0, // 0x00: ljmp *0x0(%rip)
            0xeb, 0xf8, // 0x06: jmp 0x00
        ],
    ),
    (
        "far returns",
        2,
        &[
            0x48, 0xcb, // 0x00: lretq
            0xeb, 0xfc, // 0x02: jmp 0x00
        ],
    ),
];

/// A far transfer is never followed: its block is the chunk decoder's to
/// look at one by one (a syscall leaves to the kernel, a far jump or
/// return maybe to another mode). Here each far transfer goes to a TIP
/// of the jump after it, as if it came straight back.
#[test]
fn far_transfers_are_left_to_next_block() {
    for (tag, back, bytes) in FAR_TRANSFERS {
        let mut trace = [&PSB[..], &MODE64, &fup(BASE, 0), &PSBEND].concat();
        for _ in 0..8 {
            trace.extend(tip(BASE, back));
        }
        trace.extend(TIP_PGD);
        let code = (tag, bytes);
        let (one, _) = decode_code(code, &trace, BASE, How::OneByOne);
        let (items, followed) = decode_code(
            code,
            &trace,
            BASE,
            How::Follow {
                each_max: usize::MAX,
            },
        );
        assert_eq!(items, one, "{tag}");
        assert!(
            one.iter()
                .filter(|i| matches!(i, Item::Block(b, ..) if b.end_ip == BASE))
                .count()
                >= 8,
            "{tag}: {one:x?}"
        );
        assert!(
            followed.iter().all(|(b, _)| b.end_ip != BASE),
            "{tag}: a far transfer's block was followed: {followed:x?}"
        );
        assert!(!followed.is_empty(), "{tag}: the jumps back were followed");
    }
}

#[test]
fn nothing_is_followed_when_off_or_in_kernel_code() {
    let trace = loops(BASE);
    let (one, _) = decode(&trace, BASE, How::OneByOne);
    let (off, n) = decode(&trace, BASE, How::FollowOff);
    assert_eq!((&off, n), (&one, 0));
    // Kernel code: a context switch may be due at any block, which only
    // the chunk decoder's `on_block` applies.
    let trace = loops(KERNEL_BASE);
    let (one, _) = decode(&trace, KERNEL_BASE, How::OneByOne);
    let (kernel, n) = decode(
        &trace,
        KERNEL_BASE,
        How::Follow {
            each_max: usize::MAX,
        },
    );
    assert_eq!((&kernel, n), (&one, 0));
    assert!(one.len() > 10, "{one:?}");
}

/// Sections whose bounds lie past their bytes, or wrap, are left out of
/// the image as missing code: the decoder gives up there, never panics.
#[test]
fn sections_past_their_bytes_are_missing_code() {
    use super::code::{Image, Section};
    use std::rc::Rc;
    let bytes: Rc<dyn AsRef<[u8]>> = Rc::new(CODE.to_vec());
    let section =
        |offset: usize, len: usize, vaddr: u64| Section::new(1, vaddr, bytes.clone(), offset, len);
    for bad in [
        section(0, CODE.len() + 1, BASE),
        section(usize::MAX - 2, 4, BASE),
        section(0, CODE.len(), u64::MAX - 2),
    ] {
        let t = loops(BASE);
        let mut dec = super::test_packets::fast_decoder("follow", CODE, BASE, &t);
        dec.set_image(Image::new(vec![bad], false));
        let mut code = CodeCache::default();
        let mut status = dec.sync_forward().expect("a PSB");
        for _ in 0..100 {
            while status.event_pending() {
                match dec.event() {
                    Ok((_, s)) => status = s,
                    Err(_) => break,
                }
            }
            match dec.next_block(&mut code, &mut Block::default()) {
                Ok(s) => status = s,
                Err(_) => break,
            }
        }
        assert!(dec.unsupported().is_some(), "gave up on the missing code");
    }
}
