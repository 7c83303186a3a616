//! [`super::FastDecoder::set_merge`]: a trace built by hand from the SDM's packet
//! layouts, decoded block by block and with blocks merged. Each merged
//! block must be the blocks it stands for, end to end, with the trace
//! offset after each of them, and the events and times must not change.

use ipt::Block;

use super::code::CodeCache;
use super::test_packets::{MODE64, PSB, PSBEND, TIP_PGD};

const BASE: u64 = 0x6000_0000;

/// Two loops on a conditional branch each, then a jump back.
const CODE: &[u8] = &[
    0x75, 0xfe, // 0x00: jnz 0x00
    0x75, 0xfe, // 0x02: jnz 0x02
    0x90, //       0x04: nop
    0xeb, 0xf9, // 0x05: jmp 0x00
];

/// FUP with the full address (IPBytes 6).
fn fup(off: u64) -> Vec<u8> {
    let mut v = vec![0x1d | (6 << 5)];
    v.extend_from_slice(&(BASE + off).to_le_bytes());
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
    /// A block, the trace offset and the TSC after it, and the blocks
    /// merged into it.
    Block(Blk, Option<u64>, u64, Vec<(u16, Option<u64>)>),
    Event(String),
}

fn decode(t: &[u8], merge: bool) -> Vec<Item> {
    let mut dec = super::test_packets::fast_decoder("merge", CODE, BASE, t);
    dec.set_merge(merge);
    let mut code = CodeCache::default();
    let mut out = Vec::new();
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
        match dec.next_block(&mut code, &mut b) {
            Ok(s) => status = s,
            Err(e) => panic!("decode error {e:?}"),
        }
        let off = dec.offset().ok();
        let b = Blk {
            ip: b.ip,
            end_ip: b.end_ip,
            iclass: b.iclass,
            ninsn: b.ninsn,
            size: b.size,
        };
        out.push(Item::Block(b, off, dec.time().0, dec.merged().to_vec()));
    }
    assert_eq!(dec.unsupported(), None);
    out
}

/// Loops on conditional branches, a TSC amid them, then a disable.
fn loops() -> Vec<u8> {
    let (t, f, n) = (true, false, false);
    [
        &PSB[..],
        &MODE64,
        &fup(0),
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
fn merged_blocks_are_the_blocks_they_stand_for() {
    let trace = loops();
    let one = decode(&trace, false);
    let merged = decode(&trace, true);
    // Every merged block stands for as many blocks as it has parts.
    let mut singles = one.iter();
    let mut groups = 0;
    let mut across_packets = false;
    for item in &merged {
        let Item::Block(b, off, time, parts) = item else {
            assert_eq!(Some(item), singles.next(), "events are the same");
            continue;
        };
        let k = parts.len().max(1);
        let those: Vec<_> = singles.by_ref().take(k).collect();
        assert_eq!(those.len(), k);
        let blocks: Vec<(&Blk, &Option<u64>, u64)> = those
            .iter()
            .map(|i| match i {
                Item::Block(b, o, t, p) => {
                    assert!(p.is_empty(), "nothing merges block by block");
                    (b, o, *t)
                }
                Item::Event(e) => panic!("an event ({e}) inside a merged block"),
            })
            .collect();
        let (first, last) = (blocks[0].0, blocks[k - 1].0);
        assert_eq!(b.ip, first.ip);
        assert_eq!(
            (b.end_ip, b.iclass, b.size),
            (last.end_ip, last.iclass, last.size)
        );
        let ninsn: u16 = blocks.iter().map(|x| x.0.ninsn).sum();
        assert_eq!(b.ninsn, ninsn);
        assert_eq!((off, *time), (blocks[k - 1].1, blocks[k - 1].2));
        if k > 1 {
            groups += 1;
            let each: Vec<(u16, Option<u64>)> = blocks.iter().map(|x| (x.0.ninsn, *x.1)).collect();
            assert_eq!(parts, &each, "the parts are the blocks with their offsets");
            across_packets |= parts.windows(2).any(|w| w[0].1 != w[1].1);
            // All but the last end at a conditional branch, at the time
            // after the first.
            for x in &blocks[..k - 1] {
                assert_eq!(x.0.iclass, ipt::ffi::ptic_cond_jump);
                assert_eq!(x.2, blocks[0].2);
            }
        }
    }
    assert_eq!(singles.next(), None, "the same blocks in all");
    assert!(groups >= 3, "blocks merged: {groups} groups");
    assert!(
        across_packets,
        "a merged block goes on into the next TNT packet"
    );
    // The TSC ends a merged block: the block after it is the first whose
    // time is the TSC's.
    let times: Vec<u64> = merged
        .iter()
        .filter_map(|i| match i {
            Item::Block(_, _, t, _) => Some(*t),
            _ => None,
        })
        .collect();
    assert!(times.contains(&0x1234_5678), "{times:x?}");
}

#[test]
fn a_block_after_merging_is_turned_off_is_one_block() {
    let trace = loops();
    let mut dec = super::test_packets::fast_decoder("merge", CODE, BASE, &trace);
    dec.set_merge(true);
    let mut code = CodeCache::default();
    let mut status = dec.sync_forward().expect("a PSB");
    let mut b = Block::default();
    let mut merged = false;
    for _ in 0..100 {
        while status.event_pending() {
            status = dec.event().expect("an event").1;
        }
        assert!(!status.eos(), "no block was merged");
        status = dec.next_block(&mut code, &mut b).expect("a block");
        if dec.is_merged() {
            merged = true;
            break;
        }
    }
    assert!(merged);
    // Turned off after a merged block (as the chunk decoder does near
    // the no-progress limit or at the next chunk's PSB): the next block
    // is one block, whatever the last one was.
    dec.set_merge(false);
    while status.event_pending() {
        status = dec.event().expect("an event").1;
    }
    dec.next_block(&mut code, &mut b).expect("a block");
    assert!(!dec.is_merged());
    assert!(dec.merged().is_empty());
}
