//! [`super::FastDecoder::follow`]: a trace built by hand from the SDM's
//! packet layouts, decoded block by block and with blocks followed in the
//! decoder's own loop. The blocks followed must be the blocks
//! `next_block` hands out, each with the trace offset and time after it,
//! and the events must not change.

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

/// FUP with the full address (IPBytes 6).
fn fup(base: u64, off: u64) -> Vec<u8> {
    let mut v = vec![0x1d | (6 << 5)];
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
}

/// The items decoded from `t` with the code at `base`, and how many
/// blocks `follow` handed out.
fn decode(t: &[u8], base: u64, how: How) -> (Vec<Item>, usize) {
    let mut dec = super::test_packets::fast_decoder("follow", CODE, base, t);
    let each_max = match how {
        How::OneByOne => 0,
        How::Follow { each_max } => {
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
    let mut out = Vec::new();
    let mut followed = 0;
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
            let mut n = 0;
            let handed = dec.follow(&code, &mut b, |b, time, off| {
                out.push(Item::Block(blk(b), off, time.0));
                n += 1;
                n < each_max
            });
            assert_eq!(handed as usize, n, "follow counts what it handed out");
            assert!(n <= each_max, "it stops when told");
            followed += n;
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

#[test]
fn followed_blocks_are_the_blocks_next_block_hands_out() {
    let trace = loops(BASE);
    let (one, _) = decode(&trace, BASE, How::OneByOne);
    for each_max in [usize::MAX, 1, 2] {
        let (followed, n) = decode(&trace, BASE, How::Follow { each_max });
        assert_eq!(followed, one, "each_max {each_max}");
        // Most of the loops' branches take a bit that is not their
        // packet's last, and the jump back needs none.
        assert!(n >= 8, "{n} blocks followed, each_max {each_max}");
    }
    // The TSC amid the loops: blocks after it have its time.
    assert!(one
        .iter()
        .any(|i| matches!(i, Item::Block(_, _, 0x1234_5678))));
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
