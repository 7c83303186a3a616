//! PIP and PTWRITE traces built by hand from the SDM's packet layouts, run
//! through both decoders: the flow decoder must follow them alone and log
//! what libipt logs.

use std::path::PathBuf;

use ipt::{Config, EventKind};

use super::compare;
use ptflow::code::CodeCache;
use ptflow::test_packets::{MODE64, PSB, PSBEND, TIP_PGD};

const BASE: u64 = 0x7000_0000;

/// The code both decoders walk.
const CODE: &[u8] = &[
    0x90, //                         0x00: nop
    0xf3, 0x48, 0x0f, 0xae, 0xe0, // 0x01: ptwrite rax
    0x90, //                         0x06: nop
    0xf3, 0x0f, 0xae, 0xe0, //       0x07: ptwrite eax
    0x0f, 0x05, //                   0x0b: syscall
    0xff, 0xe0, //                   0x0d: jmp rax
    0x0f, 0x22, 0xd8, //             0x0f: mov cr3, rax
    0xff, 0xe0, //                   0x12: jmp rax
    0x0f, 0xc7, 0x30, //             0x14: vmptrld [rax]
    0xff, 0xe0, //                   0x17: jmp rax
];

/// An IP packet (`opcode` with IPBytes 6: the full address).
fn ip_packet(opcode: u8, ip: u64) -> Vec<u8> {
    let mut v = vec![opcode | (6 << 5)];
    v.extend_from_slice(&ip.to_le_bytes());
    v
}
fn fup(off: u64) -> Vec<u8> {
    ip_packet(0x1d, BASE + off)
}
fn tip(off: u64) -> Vec<u8> {
    ip_packet(0x0d, BASE + off)
}
fn tip_pge(off: u64) -> Vec<u8> {
    ip_packet(0x11, BASE + off)
}

/// PIP: `02 43`, then 6 bytes holding CR3[51:5] in bits 47:1 and NR in
/// bit 0.
fn pip(cr3: u64, nr: bool) -> Vec<u8> {
    let p = ((cr3 >> 5) << 1) | u64::from(nr);
    let mut v = vec![0x02, 0x43];
    v.extend_from_slice(&p.to_le_bytes()[..6]);
    v
}

/// VMCS: `02 c8`, then 5 bytes holding the VMCS base's bits 51:12.
fn vmcs(base: u64) -> Vec<u8> {
    let mut v = vec![0x02, 0xc8];
    v.extend_from_slice(&(base >> 12).to_le_bytes()[..5]);
    v
}

/// PTW: `02`, then `0x12` with PayloadBytes in bits 6:5 (0: 4 bytes, 1:
/// 8 bytes) and IP in bit 7, then the payload.
fn ptw(payload: u64, eight: bool, ip: bool) -> Vec<u8> {
    let mut v = vec![0x02, 0x12 | (u8::from(eight) << 5) | (u8::from(ip) << 7)];
    v.extend_from_slice(&payload.to_le_bytes()[..if eight { 8 } else { 4 }]);
    v
}

fn trace(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn code_file() -> PathBuf {
    ptflow::test_packets::code_file("pip", CODE)
}

fn cfg() -> Config {
    let mut c = Config::default();
    c.set_block_flags(true, true);
    c
}

/// Both decoders log the same, and the flow decoder needed no help.
fn same(name: &str, t: &[u8]) -> usize {
    let path = code_file();
    let o = compare(&cfg(), t, &[(&path, 0, CODE.len() as u64, BASE)])
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(o.unsupported, None, "{name}");
    o.lines
}

/// Both decoders report the same error, and go on alike after it.
fn same_error(name: &str, t: &[u8]) {
    let path = code_file();
    let o = compare(&cfg(), t, &[(&path, 0, CODE.len() as u64, BASE)])
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(o.unsupported, None, "{name}");
    assert!(o.errors > 0, "{name}: no error");
}

/// The events the flow decoder hands out, as ptxed would ask for them.
fn fast_events(t: &[u8]) -> Vec<EventKind> {
    let mut dec = ptflow::test_packets::fast_decoder("pip", CODE, BASE, t);
    let mut code = CodeCache::default();
    let mut out = Vec::new();
    let Ok(mut status) = dec.sync_forward() else {
        return out;
    };
    for _ in 0..1000 {
        while status.event_pending() {
            match dec.event() {
                Ok((ev, s)) => {
                    out.push(ev.kind());
                    status = s;
                }
                Err(_) => return out,
            }
        }
        if status.eos() {
            break;
        }
        let r = dec.next_block(&mut code, &mut ipt::Block::default());
        match r {
            Ok(s) => status = s,
            Err(_) => break,
        }
    }
    assert_eq!(dec.unsupported(), None);
    out
}

#[test]
fn pip_in_psb_and_ptwrite_without_ip() {
    let t = trace(&[
        &PSB,
        &pip(0x1234_5000, false),
        &MODE64,
        &fup(0),
        &PSBEND,
        // Bound to the ptwrite instructions at 0x01 and 0x07.
        &ptw(0x1122_3344, false, false),
        &ptw(0x5566_7788_99aa_bbcc, true, false),
        // Bound to the syscall at 0x0b, which then needs the TIP.
        &pip(0xabcd_e000, true),
        &tip(0x0d),
        &tip(0x00),
        &TIP_PGD,
    ]);
    assert!(same("psb", &t) > 10);
    let evs = fast_events(&t);
    assert!(evs.contains(&EventKind::AsyncPaging {
        cr3: 0x1234_5000,
        ip: Some(BASE)
    }));
    assert!(evs.contains(&EventKind::Ptwrite {
        ip: Some(BASE + 1),
        size: 4,
        payload: 0x1122_3344
    }));
    assert!(evs.contains(&EventKind::Ptwrite {
        ip: Some(BASE + 7),
        size: 8,
        payload: 0x5566_7788_99aa_bbcc
    }));
    assert!(evs.contains(&EventKind::Paging { cr3: 0xabcd_e000 }));
}

#[test]
fn ptwrite_with_ip_binds_to_fup() {
    let t = trace(&[
        &PSB,
        &MODE64,
        &fup(0),
        &PSBEND,
        &ptw(0xfeed, false, true),
        &fup(0x07),
        &tip(0x0d),
        &tip(0x00),
        &TIP_PGD,
    ]);
    same("ptw ip", &t);
    let evs = fast_events(&t);
    assert!(evs.contains(&EventKind::Ptwrite {
        ip: Some(BASE + 7),
        size: 4,
        payload: 0xfeed
    }));
}

#[test]
fn pip_while_disabled_and_in_async_branch() {
    let t = trace(&[
        &PSB,
        &MODE64,
        &PSBEND,
        // Applied at once: tracing is disabled.
        &pip(0x1000, false),
        &tip_pge(0x00),
        // An asynchronous branch from 0x01 to the syscall, with a PIP
        // bound to its TIP.
        &fup(0x01),
        &pip(0x2000, true),
        &tip(0x0b),
        &tip(0x0d),
        &tip(0x06),
        // An asynchronous disable with a PIP.
        &fup(0x07),
        &pip(0x3000, false),
        &TIP_PGD,
    ]);
    same("async", &t);
    let evs = fast_events(&t);
    assert!(evs.contains(&EventKind::Paging { cr3: 0x1000 }));
    assert!(evs.contains(&EventKind::AsyncPaging {
        cr3: 0x2000,
        ip: Some(BASE + 0x0b)
    }));
    assert!(evs.contains(&EventKind::AsyncPaging {
        cr3: 0x3000,
        ip: None
    }));
}

#[test]
fn ptwrite_and_pip_on_one_instruction() {
    // Two PTWs for one ptwrite instruction: the second binds to the next
    // one; the PIP after them binds to the syscall behind them.
    let t = trace(&[
        &PSB,
        &MODE64,
        &fup(0),
        &PSBEND,
        &ptw(1, false, false),
        &ptw(2, false, false),
        &pip(0x4000, false),
        &tip(0x0d),
        &tip(0x00),
        &TIP_PGD,
    ]);
    same("twice", &t);
    // A second PIP on the syscall waits for the next instruction that
    // binds it, and going past the syscall needs the TIP behind it:
    // libipt's error, the same in both.
    let t = trace(&[
        &PSB,
        &MODE64,
        &fup(0x0b),
        &PSBEND,
        &pip(0x4000, false),
        &pip(0x5000, false),
        &tip(0x0d),
    ]);
    same_error("two pips", &t);
    // Without a ptwrite instruction to bind to: libipt's error.
    let t = trace(&[
        &PSB,
        &MODE64,
        &fup(0x0b),
        &PSBEND,
        &ptw(1, false, false),
        &tip(0x0d),
    ]);
    same_error("no ptwrite", &t);
}

#[test]
fn pip_and_disable_bind_to_mov_cr3() {
    // The PIP binds to the MOV CR3 at 0x0f; the jmp after it needs the TIP.
    let t = trace(&[
        &PSB,
        &MODE64,
        &fup(0x0f),
        &PSBEND,
        &pip(0x8000, false),
        &tip(0x00),
        &TIP_PGD,
    ]);
    same("pip", &t);
    assert!(fast_events(&t).contains(&EventKind::Paging { cr3: 0x8000 }));
    // A disable without an IP binds to the MOV CR3 as well.
    let t = trace(&[&PSB, &MODE64, &fup(0x0f), &PSBEND, &TIP_PGD]);
    same("disable", &t);
    // Both on the same MOV CR3.
    let t = trace(&[
        &PSB,
        &MODE64,
        &fup(0x0f),
        &PSBEND,
        &pip(0x9000, true),
        &TIP_PGD,
    ]);
    same("both", &t);
}

#[test]
fn vmcs_like_pip() {
    // In PSB+, then one bound to the VMPTRLD at 0x14.
    let t = trace(&[
        &PSB,
        &vmcs(0x1_2345_6000),
        &MODE64,
        &fup(0x14),
        &PSBEND,
        &vmcs(0x2_0000_0000),
        &tip(0x00),
        &TIP_PGD,
    ]);
    same("vmptrld", &t);
    // With a PIP in an asynchronous branch: the VMCS goes first.
    let t = trace(&[
        &PSB,
        &MODE64,
        &fup(0),
        &PSBEND,
        &fup(0x01),
        &pip(0x7000, false),
        &vmcs(0x3000),
        &tip(0x0b),
        &tip(0x0d),
        &tip(0x06),
        &fup(0x07),
        &pip(0x8000, true),
        &vmcs(0x4000),
        &TIP_PGD,
        // Disabled: applied at once.
        &vmcs(0x5000),
    ]);
    same("async", &t);
    let evs = fast_events(&t);
    let at = |k: &EventKind| evs.iter().position(|e| e == k);
    let paging = at(&EventKind::AsyncPaging {
        cr3: 0x7000,
        ip: Some(BASE + 0x0b),
    })
    .expect("the async paging event");
    let vmcs = at(&EventKind::Other(ipt::ffi::ptev_async_vmcs)).expect("the async vmcs event");
    assert!(vmcs < paging);
    assert!(evs.contains(&EventKind::Other(ipt::ffi::ptev_vmcs)));
}

/// 16- and 32-bit code (MODE.Exec without CS.L), above 64 KiB and 4 GiB:
/// the flow decoder follows it as libipt does, its direct branches going
/// to the IP after them plus the displacement, never cut to the operand
/// size (as iced-x86 cuts its targets), and past a call whose target no
/// section holds, libipt's error and the next PSB.
#[test]
fn sixteen_and_thirty_two_bit_code() {
    const CODE16: &[u8] = &[
        0x90, //             0x00: nop
        0xeb, 0x01, //       0x01: jmp short 0x04
        0x90, //             0x03: nop (jumped over)
        0x90, //             0x04: nop
        0x74, 0x01, //       0x05: jz 0x08
        0x90, //             0x07: nop
        0x90, //             0x08: nop
        0xff, 0xe0, //       0x09: jmp (e)ax
        0xe8, 0x00, 0x10, // 0x0b: call 0x100e (16-bit; outside the code)
        0x00, 0x00, //       (32-bit: call 0x1010)
    ];
    let path = ptflow::test_packets::code_file("modes", CODE16);
    let taken: &[u8] = &[0x06];
    for base in [0x7000_0000u64, 0x1_2345_0000] {
        for (bits, mode) in [(16, 0x00u8), (32, 0x02)] {
            let ip = |off: u64| {
                let mut v = vec![0x0d | (6 << 5)];
                v.extend_from_slice(&(base + off).to_le_bytes());
                v
            };
            let mut pge = ip(0);
            pge[0] = 0x11 | (6 << 5);
            let t = trace(&[
                &PSB,
                &[0x99, mode],
                &PSBEND,
                &pge,
                taken,
                &ip(0),
                taken,
                &ip(0x0b),
                &PSB,
                &[0x99, mode],
                &PSBEND,
                &pge,
                taken,
                &TIP_PGD,
            ]);
            let name = format!("{bits}-bit code at {base:#x}");
            let o = compare(&cfg(), &t, &[(&path, 0, CODE16.len() as u64, base)])
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(o.unsupported, None, "{name}");
            assert!(o.lines > 10, "{name}: {o:?}");
        }
    }
}

/// The same code run in 16-bit mode, then after a PSB whose MODE.Exec
/// says 64-bit: libipt's block cache hands out the 16-bit pass's blocks
/// (with their mode) in 64-bit code, its defect; the fast decoder decodes
/// the second pass as 64-bit code. The comparison ends at libipt's stale
/// block; without that, it found them different (the fuzz input
/// `sixteen-bit-after-mode-exec-aa9da39b`).
#[test]
fn libipt_block_cache_keeps_the_mode_it_was_filled_in() {
    const CODE: &[u8] = &[
        0x48, 0x8d, 0x05, 0x00, 0x00, 0x00, 0x00, // 0x00: 64-bit: lea rax, [rip]
        //                   (16-bit: dec ax; lea ax, [di]; add [bx+si], al twice)
        0xff, 0xe0, //                               0x07: jmp rax (16-bit: jmp ax)
    ];
    let path = ptflow::test_packets::code_file("two-modes", CODE);
    let base = 0x7000_0000u64;
    let ip = |opcode: u8| {
        let mut v = vec![opcode | (6 << 5)];
        v.extend_from_slice(&base.to_le_bytes());
        v
    };
    let (pge, tip) = (ip(0x11), ip(0x0d));
    let sixteen_then_sixty_four = trace(&[
        &PSB,
        &[0x99, 0x00],
        &PSBEND,
        &pge,
        &tip,
        &tip,
        &MODE64,
        &tip,
        &tip,
        &tip,
        &TIP_PGD,
    ]);
    let o = compare(
        &cfg(),
        &sixteen_then_sixty_four,
        &[(&path, 0, CODE.len() as u64, base)],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(o.libipt_stale_mode, "{o:?}");
    assert_eq!(o.unsupported, None);
    // 16-bit code from 0x01 on: no entry at 0x00, whose 64-bit lea ends
    // at the 16-bit pass's entry for 0x07, and libipt fails with an
    // internal error (the fuzz input sixteen-bit-stale-cache-internal).
    let mut pge1 = pge.clone();
    pge1[1] += 1;
    let mut tip1 = tip.clone();
    tip1[1] += 1;
    let internal = trace(&[
        &PSB,
        &[0x99, 0x00],
        &PSBEND,
        &pge1,
        &tip1,
        &MODE64,
        &tip,
        &tip,
        &tip,
        &TIP_PGD,
    ]);
    let o = compare(&cfg(), &internal, &[(&path, 0, CODE.len() as u64, base)])
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(o.libipt_stale_mode, "{o:?}");
    // Each mode alone: no stale block, the decoders agree throughout.
    for mode in [&[0x99, 0x00][..], &MODE64] {
        let t = trace(&[&PSB, mode, &PSBEND, &pge, &tip, &tip, &TIP_PGD]);
        let o = compare(&cfg(), &t, &[(&path, 0, CODE.len() as u64, base)])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!o.libipt_stale_mode && o.unsupported.is_none(), "{o:?}");
        assert!(o.lines > 8, "{o:?}");
    }
}

/// Overlapping sections and instructions cut by a section's end: a later
/// section hides what it overlaps of an earlier one, which keeps its
/// parts before and after (libipt's `pt_image_add`), and an instruction
/// that runs past its section's end is read on from the next (a
/// truncated block, its bytes in the block), or is libipt's `BAD_INSN`
/// where no section follows.
#[test]
fn overlapping_sections_and_truncated_instructions() {
    const CODE: &[u8] = &[
        // Section A, the file's first 16 bytes, at BASE.
        0x90, 0x90, 0x90, 0x90, 0x90, 0x90, // 0x00: nop x6
        0xb8, 0x11, //                          0x06: mov eax, 0x44332211 (on in B)
        0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, //  0x08: hidden by B
        0xe0, //                                0x0e: (jmp rax's second byte)
        0x90, //                                0x0f: nop
        // Section B, the file's next 6 bytes, at BASE + 8.
        0x22, 0x33, 0x44, //                    0x08: (mov's last bytes)
        0x90, 0x90, //                          0x0b: nop x2
        0xff, //                                0x0d: jmp rax (on in A's back part)
    ];
    let path = ptflow::test_packets::code_file("overlap", CODE);
    let sections = [(&*path, 0, 16, BASE), (&*path, 16, 6, BASE + 8)];
    let t = trace(&[
        &PSB,
        &MODE64,
        &PSBEND,
        &tip_pge(0),
        &tip(0),
        &tip(3),
        &TIP_PGD,
        // Past the image's end: no code at 0x10.
        &PSB,
        &MODE64,
        &PSBEND,
        &tip_pge(0),
        &tip(0xf),
        &TIP_PGD,
    ]);
    let o = compare(&cfg(), &t, &sections).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(o.unsupported, None, "{o:?}");
    // The NOMAP error, and the sync that finds no PSB after it.
    assert!(o.lines > 50 && o.errors == 2, "{o:?}");

    // Section A alone, cut after the mov's second byte: no section holds
    // the rest (libipt's BAD_INSN), then the next PSB.
    let t = trace(&[
        &PSB,
        &MODE64,
        &PSBEND,
        &tip_pge(0),
        &TIP_PGD,
        &PSB,
        &MODE64,
        &PSBEND,
        &tip_pge(6),
        &TIP_PGD,
    ]);
    let o = compare(&cfg(), &t, &[(&path, 0, 8, BASE)]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(o.unsupported, None, "{o:?}");
    assert_eq!(o.errors, 2, "{o:?}");
}

/// iflags events (libipt's `enable_iflags_events`, ptxed's
/// `--event:iflags`): MODE.Exec's interrupt flag as a status update in
/// PSB+ and as an event where it changes, bound to the next FUP or TIP as
/// an exec mode event is; a MODE.Exec that changes nothing binds nothing.
#[test]
fn iflags_events() {
    const CODE: &[u8] = &[0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0xe0];
    let path = ptflow::test_packets::code_file("iflags", CODE);
    let mut c = cfg();
    c.set_block_events(false, true);
    let mode_if = |iflag: bool| [0x99, 0x01 | (u8::from(iflag) << 2)];
    let t = trace(&[
        &PSB,
        &mode_if(false),
        &PSBEND,
        &tip_pge(0),
        &mode_if(true),
        &fup(2),
        &mode_if(false),
        &fup(4),
        // Nothing changes: bound to the TIP, no event.
        &mode_if(false),
        &tip(1),
        &mode_if(true),
        &tip(0),
        &fup(6),
        &TIP_PGD,
        &PSB,
        &mode_if(true),
        &PSBEND,
        &tip_pge(0),
        &TIP_PGD,
    ]);
    let o =
        compare(&c, &t, &[(&path, 0, CODE.len() as u64, BASE)]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(o.unsupported, None, "{o:?}");
    assert!(o.lines > 25, "{o:?}");
    // A PSB+ whose flag is not the one the decoder has: libipt's
    // BAD_STATUS_UPDATE (with iflags events on; else the flag may be
    // stale and is not checked).
    let t = trace(&[
        &PSB,
        &mode_if(false),
        &PSBEND,
        &tip_pge(0),
        &tip(0),
        &PSB,
        &mode_if(true),
        &fup(0),
        &PSBEND,
        &tip(0),
        &TIP_PGD,
    ]);
    for iflags in [false, true] {
        c.set_block_events(false, iflags);
        let o = compare(&c, &t, &[(&path, 0, CODE.len() as u64, BASE)])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(o.unsupported, None, "{o:?}");
        assert_eq!(o.errors > 0, iflags, "{o:?}");
    }
}

/// Tick events (libipt's `enable_tick_events`, ptxed's `--event:tick`):
/// a TIP or the first bit used of a TNT that comes with a time the
/// decoder has not had yet becomes a tick at its branch (a TNT's after the
/// block that used it, or after the next when another branch ended the
/// block), as libipt's block decoder makes them.
#[test]
fn tick_events() {
    const CODE: &[u8] = &[
        0x75, 0xfe, // 0x00: jnz 0x00
        0x75, 0xfe, // 0x02: jnz 0x02
        0x90, //       0x04: nop
        0xe8, 0x02, 0x00, 0x00, 0x00, // 0x05: call 0x0c
        0xff, 0xe0, // 0x0a: jmp rax
        0xc3, //       0x0c: ret
    ];
    let path = ptflow::test_packets::code_file("tick", CODE);
    let tsc = |t: u64| {
        let mut v = vec![0x19];
        v.extend_from_slice(&t.to_le_bytes()[..7]);
        v
    };
    // A short TNT: the bits in order, `true` for taken.
    let tnt = |bits: &[bool]| {
        let v = bits.iter().fold(1u8, |v, &b| (v << 1) | u8::from(b));
        vec![v << 1]
    };
    let mut c = cfg();
    c.set_block_events(true, false);
    let t = trace(&[
        &PSB,
        &tsc(1000),
        &MODE64,
        &PSBEND,
        &tip_pge(0),
        // A TNT tick at the first jnz.
        &tsc(2000),
        &tnt(&[true, false]),
        &tnt(&[false]),
        // At the compressed return (a block that ends at a direct call
        // first: the tick waits for the return's block).
        &tsc(3000),
        &tnt(&[true]),
        // A TIP tick at jmp rax.
        &tsc(4000),
        &tip(2),
        &tnt(&[false]),
        &tnt(&[true]),
        // No new time: no tick.
        &tip(0),
        &tsc(5000),
        &tnt(&[false, false, true]),
        &TIP_PGD,
    ]);
    let o =
        compare(&c, &t, &[(&path, 0, CODE.len() as u64, BASE)]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(o.unsupported, None, "{o:?}");
    assert!(o.lines > 20, "{o:?}");
}

/// CFE: `02 13`, then the type in bits 4:0 and IP in bit 7, then the
/// vector.
fn cfe(kind: u8, vector: u8, ip: bool) -> Vec<u8> {
    vec![0x02, 0x13, kind | (u8::from(ip) << 7), vector]
}

/// EVD: `02 53`, then the type in bits 5:0, then an 8-byte payload.
fn evd(kind: u8, payload: u64) -> Vec<u8> {
    let mut v = vec![0x02, 0x53, kind];
    v.extend_from_slice(&payload.to_le_bytes());
    v
}

/// An asynchronous branch (FUP, TIP) while an EVD waits in the event
/// queue for its CFE: the branch goes from the FUP's IP to the TIP's and
/// the EVD stays queued until the page fault's CFE takes it. libipt 2.1.2
/// hands out the wrong event there (docs/decoding.md); the flow decoder
/// decodes it, says where libipt differs, and the logs agree up to that
/// step.
#[test]
fn an_async_branch_behind_an_evd() {
    const CFE_INTR: u8 = 1;
    const EVD_CR2: u8 = 0;
    let t = trace(&[
        &PSB,
        &MODE64,
        &fup(0x00),
        &PSBEND,
        &evd(EVD_CR2, 0xdead_b000),
        // From the nop at 0x06 to 0x00.
        &fup(0x06),
        &tip(0x00),
        // The syscall at 0x0b, to 0x0d.
        &tip(0x0d),
        // A page fault at the jmp at 0x0d, handled at 0x06.
        &cfe(CFE_INTR, 14, true),
        &fup(0x0d),
        &tip(0x06),
        &TIP_PGD,
    ]);
    let path = code_file();
    let o = compare(&cfg(), &t, &[(&path, 0, CODE.len() as u64, BASE)])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(o.unsupported, None, "{o:?}");
    assert_eq!(
        o.libipt_differs,
        Some(ptflow::event::ASYNC_BRANCH_BEHIND_EVENTS),
        "{o:?}"
    );
    // Compared up to the step that read the TIP (the block before the
    // branch, whose end makes the decoder read on).
    assert!(o.lines > 0, "{o:?}");
    let evs = fast_events(&t);
    let branch = evs
        .iter()
        .position(|e| {
            *e == EventKind::AsyncBranch {
                from: BASE + 0x06,
                to: Some(BASE),
            }
        })
        .unwrap_or_else(|| panic!("no asynchronous branch: {evs:?}"));
    let fault = evs
        .iter()
        .position(|e| {
            *e == EventKind::Interrupt {
                vector: 14,
                cr2: Some(0xdead_b000),
                ip: Some(BASE + 0x0d),
            }
        })
        .unwrap_or_else(|| panic!("no page fault with its CR2: {evs:?}"));
    assert!(branch < fault, "{evs:?}");
}

/// TRIG (libipt 2.2's trigger tracing), which libipt 2.1.2 does not know:
/// the logs are compared up to libipt's error at it, and the flow decoder
/// places the triggers: one counted from the PSB+'s FUP past the PTWRITE
/// bound without an IP (which gives no IP to count from: before the nop
/// at 0x06), one with MULT counted from it (before the syscall), one
/// without a count while disabled (no IP).
#[test]
fn trig_is_compared_up_to_libipts_error_and_placed_by_its_count() {
    let t = trace(&[
        &PSB,
        &MODE64,
        &fup(0x00),
        &PSBEND,
        &ptw(7, true, false),
        &[0xd9, 0x40, 0x1a, 2, 0],
        &[0xd9, 0x60, 0x1b, 2, 0],
        &TIP_PGD,
        &[0xd9, 0x00, 0x1c],
    ]);
    let path = code_file();
    let o = compare(&cfg(), &t, &[(&path, 0, CODE.len() as u64, BASE)])
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(o.libipt_newer_packet);
    // The sync, the PSB+'s events, the code up to the PTWRITE and its
    // event agree before libipt's error.
    assert!(o.lines >= 4, "{o:?}");
    let trigs: Vec<EventKind> = fast_events(&t)
        .into_iter()
        .filter(|k| matches!(k, EventKind::Trig { .. }))
        .collect();
    assert_eq!(
        trigs,
        [
            EventKind::Trig {
                number: 0x1a,
                mult: false,
                ip: Some(BASE + 0x06),
            },
            EventKind::Trig {
                number: 0x1b,
                mult: true,
                ip: Some(BASE + 0x0b),
            },
            EventKind::Trig {
                number: 0x1c,
                mult: false,
                ip: None,
            },
        ]
    );
}
