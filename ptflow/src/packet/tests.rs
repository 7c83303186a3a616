//! Packets built by hand from the SDM's layouts, and the same bytes
//! through libipt's packet decoder.

use super::*;

/// Whether `ours` is the packet libipt's packet decoder read
/// (`theirs`, in the wrapper's view of it).
pub fn same_as_libipt(ours: &Packet, theirs: &ipt::Packet) -> bool {
    use ipt::{Compression as C, Packet as L};
    let ipc = |c: &C| match c {
        C::Suppressed => 0,
        C::Update16 => 1,
        C::Update32 => 2,
        C::Sext48 => 3,
        C::Update48 => 4,
        C::Full => 6,
    };
    let ip_eq = |a: &IpPayload, ip: &u64, c: &C| a.ipc == ipc(c) && a.ip == *ip;
    match (ours, theirs) {
        (Packet::Pad, L::Pad)
        | (Packet::Psb, L::Psb)
        | (Packet::Psbend, L::Psbend)
        | (Packet::Ovf, L::Ovf)
        | (Packet::Stop, L::Stop)
        | (Packet::ModeTsx { .. }, L::ModeTsx) => true,
        (Packet::Fup(a), L::Fup(ip, c))
        | (Packet::Tip(a), L::Tip(ip, c))
        | (Packet::TipPge(a), L::TipPge(ip, c))
        | (Packet::TipPgd(a), L::TipPgd(ip, c)) => ip_eq(a, ip, c),
        (Packet::Tnt { bits, size }, L::Tnt8 { payload, bits: n }) => {
            *bits == u64::from(*payload) && size == n
        }
        (Packet::Tnt { bits, size }, L::Tnt64 { payload, bits: n }) => bits == payload && size == n,
        (Packet::ModeExec { csl, csd, .. }, L::ModeExec { csl: l, csd: d }) => csl == l && csd == d,
        (Packet::Tsc(a), L::Tsc(b)) => a == b,
        (Packet::Tma { ctc, fc }, L::Tma { ctc: c, fc: f }) => ctc == c && fc == f,
        (Packet::Cbr(a), L::Cbr(b)) | (Packet::Mtc(a), L::Mtc(b)) => a == b,
        (Packet::Cyc(a), L::Cyc(b)) => a == b,
        (
            Packet::Ptw { plc, ip, payload },
            L::Ptw {
                payload: p,
                plc: c,
                fup,
            },
        ) => plc == c && ip == fup && payload == p,
        (Packet::Exstop { ip }, L::Exstop { fup }) => ip == fup,
        (Packet::Mwait { hints, ext }, L::Mwait { hints: h, ext: e }) => hints == h && ext == e,
        (
            Packet::Pwre {
                state,
                sub_state,
                hw,
            },
            L::Pwre {
                state: s,
                sub_state: u,
                hw: h,
            },
        ) => state == s && sub_state == u && hw == h,
        (
            Packet::Pwrx {
                last,
                deepest,
                interrupt,
                store,
                autonomous,
            },
            L::Pwrx {
                last: l,
                deepest: d,
                interrupt: i,
                store: s,
                autonomous: a,
            },
        ) => last == l && deepest == d && interrupt == i && store == s && autonomous == a,
        (
            Packet::Cfe { ty, vector, ip },
            L::Cfe {
                kind,
                vector: v,
                ip: i,
            },
        ) => u32::from(*ty) == *kind && vector == v && ip == i,
        (Packet::Evd { ty, payload }, L::Evd { kind, payload: p }) => {
            u32::from(*ty) == *kind && payload == p
        }
        // PIP, VMCS and MNT, which the wrapper does not spell out.
        (Packet::Pip { .. } | Packet::Vmcs(_) | Packet::Mnt(_), L::Other(_)) => true,
        (Packet::Invalid, L::Other(t)) => *t == ipt::ffi::ppt_invalid,
        _ => false,
    }
}

/// Decodes `buf` from its first PSB with both libipt's packet decoder and
/// [`decode`], packet by packet, until the end or the first error:
/// the number of packets that agreed, or what differed.
pub fn compare_with_libipt(cfg: &ipt::Config, buf: &[u8]) -> Result<u64, String> {
    let Ok(mut dec) = ipt::PacketDecoder::new(cfg, buf) else {
        return Err("libipt: no packet decoder".into());
    };
    if dec.sync_forward().is_err() {
        return Ok(0);
    }
    let (skd007, skz84) = (cfg.errata().skd007, cfg.errata().skz84);
    let mut n = 0u64;
    loop {
        let at = dec.offset().map_err(|e| format!("libipt offset: {e}"))? as usize;
        let theirs = dec.next_packet();
        let ours = decode_known(buf, at, skd007, skz84);
        match (ours, theirs) {
            (Ok((p, size)), Ok(l)) => {
                let next = dec.offset().map_err(|e| format!("libipt offset: {e}"))? as usize;
                if !same_as_libipt(&p, &l) || at + size != next {
                    return Err(format!(
                        "offset {at:#x}: ours {p:?} ({size} bytes), libipt {l:?} ({} bytes)",
                        next - at
                    ));
                }
                n += 1;
            }
            (Err(a), Err(b)) if a == b => return Ok(n),
            // libipt 2.2's TRIG, which 2.1.2 does not know: the rest is
            // not comparable.
            (Ok((p, _)), Err(b)) if !p.known_to_libipt_2_1() && b == BAD_OPC => return Ok(n),
            (a, b) => return Err(format!("offset {at:#x}: ours {a:?}, libipt {b:?}")),
        }
    }
}

fn one(bytes: &[u8]) -> Result<(Packet, usize), PtError> {
    decode(bytes, 0, false)
}

#[test]
fn sdm_layouts() {
    let ip = |ipc, ip| IpPayload { ipc, ip };
    let cases: Vec<(Vec<u8>, Packet)> = vec![
        (vec![0x00], Packet::Pad),
        ([0x02, 0x82].repeat(8), Packet::Psb),
        (vec![0x02, 0x23], Packet::Psbend),
        (vec![0x02, 0xf3], Packet::Ovf),
        (vec![0x02, 0x83], Packet::Stop),
        // Short TNT: 1 0 1 1, stop bit, 0: branches taken, not, taken, taken.
        (
            vec![0b0011_0110],
            Packet::Tnt {
                bits: 0b1011,
                size: 4,
            },
        ),
        (
            vec![0x02, 0xa3, 0b101, 0, 0, 0, 0, 0],
            Packet::Tnt {
                bits: 0b01,
                size: 2,
            },
        ),
        (vec![0x2d, 0x34, 0x12], Packet::Tip(ip(1, 0x1234))),
        (vec![0x0d], Packet::Tip(ip(0, 0))),
        (
            vec![0x61, 1, 2, 3, 4, 5, 0x86],
            Packet::TipPgd(ip(3, 0x8605_0403_0201)),
        ),
        (
            vec![0xd1, 1, 2, 3, 4, 5, 6, 7, 8],
            Packet::TipPge(ip(6, 0x0807_0605_0403_0201)),
        ),
        (vec![0x5d, 1, 2, 3, 4], Packet::Fup(ip(2, 0x0403_0201))),
        (
            vec![0x99, 0x01],
            Packet::ModeExec {
                csl: true,
                csd: false,
                iflag: false,
            },
        ),
        (
            vec![0x99, 0x22],
            Packet::ModeTsx {
                intx: false,
                abrt: true,
            },
        ),
        (
            vec![0x02, 0x43, 0x21, 0x43, 0x65, 0x87, 0, 0],
            Packet::Pip {
                cr3: (0x8765_4321u64 >> 1) << 5,
                nr: true,
            },
        ),
        (
            vec![0x19, 1, 2, 3, 4, 5, 6, 7],
            Packet::Tsc(0x07_0605_0403_0201),
        ),
        (vec![0x02, 0x03, 0x2a, 0], Packet::Cbr(0x2a)),
        (
            vec![0x02, 0x73, 0x34, 0x12, 0, 0xff, 0x01],
            Packet::Tma {
                ctc: 0x1234,
                fc: 0x1ff,
            },
        ),
        (vec![0x59, 0x77], Packet::Mtc(0x77)),
        // CYC: 5 bits in the header, then 7 per byte.
        (vec![0b1010_1011], Packet::Cyc(0b10101)),
        (vec![0b0000_1111, 0b0000_0010], Packet::Cyc(0b1_00001)),
        (
            vec![0x02, 0xc8, 1, 2, 3, 4, 5],
            Packet::Vmcs(0x05_0403_0201 << 12),
        ),
        (
            vec![0x02, 0xc3, 0x88, 1, 2, 3, 4, 5, 6, 7, 8],
            Packet::Mnt(0x0807_0605_0403_0201),
        ),
        (
            vec![0x02, 0x32 | 0x80, 1, 2, 3, 4, 5, 6, 7, 8],
            Packet::Ptw {
                plc: 1,
                ip: true,
                payload: 0x0807_0605_0403_0201,
            },
        ),
        (
            vec![0x02, 0x12, 1, 2, 3, 4],
            Packet::Ptw {
                plc: 0,
                ip: false,
                payload: 0x0403_0201,
            },
        ),
        (vec![0x02, 0xe2], Packet::Exstop { ip: true }),
        (
            vec![0x02, 0xc2, 1, 0, 0, 0, 2, 0, 0, 0],
            Packet::Mwait { hints: 1, ext: 2 },
        ),
        (
            vec![0x02, 0x22, 0x08, 0x21],
            Packet::Pwre {
                state: 2,
                sub_state: 1,
                hw: true,
            },
        ),
        (
            vec![0x02, 0xa2, 0x21, 0x05, 0, 0, 0],
            Packet::Pwrx {
                last: 2,
                deepest: 1,
                interrupt: true,
                store: true,
                autonomous: false,
            },
        ),
        (
            vec![0x02, 0x13, 0x82, 14],
            Packet::Cfe {
                ty: 2,
                vector: 14,
                ip: true,
            },
        ),
        (
            vec![0x02, 0x53, 0x01, 1, 2, 3, 4, 5, 6, 7, 8],
            Packet::Evd {
                ty: 1,
                payload: 0x0807_0605_0403_0201,
            },
        ),
        (vec![0x02, 0x63, 0x80 | 4], Packet::Bbp { sz: true, ty: 4 }),
        (vec![0x02, 0xb3], Packet::Bep { ip: true }),
        // As the `trig` and `trig-fup` vectors of libipt 2.2's tests
        // have them (their ptdump lines: `trig 03, mult`, `trig 1a, ip,
        // icnt: 0`, `trig a1, icnt: 1`).
        (
            vec![0xd9, 0x20, 0x03],
            Packet::Trig {
                ip: false,
                icntv: false,
                mult: true,
                trbv: 3,
                icnt: 0,
            },
        ),
        (
            vec![0xd9, 0xc0, 0x1a, 0, 0],
            Packet::Trig {
                ip: true,
                icntv: true,
                mult: false,
                trbv: 0x1a,
                icnt: 0,
            },
        ),
        (
            vec![0xd9, 0x40, 0xa1, 0x01, 0x02],
            Packet::Trig {
                ip: false,
                icntv: true,
                mult: false,
                trbv: 0xa1,
                icnt: 0x201,
            },
        ),
    ];
    for (bytes, want) in cases {
        assert_eq!(one(&bytes), Ok((want, bytes.len())), "{bytes:02x?}");
    }
}

#[test]
fn reserved_values_and_cut_packets_are_libipts_errors() {
    assert_eq!(one(&[0x05]), Err(BAD_OPC));
    assert_eq!(one(&[0xb1]), Err(BAD_PACKET), "IPBytes 101 is reserved");
    assert_eq!(
        one(&[0x02, 0xa3, 1, 0, 0, 0, 0, 0]),
        Err(BAD_PACKET),
        "no branch"
    );
    assert_eq!(one(&[0x99, 0x40]), Err(BAD_PACKET), "mode leaf 010");
    assert_eq!(one(&[0x02, 0x73, 0, 0, 1, 0, 0]), Err(BAD_PACKET));
    assert_eq!(
        one(&[0x02, 0x52, 0, 0, 0, 0]),
        Err(BAD_PACKET),
        "PTW size 10"
    );
    assert_eq!(one(&[0x19, 1, 2]), Err(PtError::EOS));
    assert_eq!(one(&[0x02]), Err(PtError::EOS));
    assert_eq!(one(&[0xd9, 0x00]), Err(PtError::EOS), "TRIG cut");
    assert_eq!(
        one(&[0xd9, 0x40, 1, 2]),
        Err(PtError::EOS),
        "TRIG's ICNT cut"
    );
    assert_eq!(one(&[0x07]), Err(PtError::EOS), "CYC extension cut");
    assert_eq!(one(&[]), Err(PtError::EOS));
}

/// Every packet libipt's encoder writes, read back by both decoders.
#[test]
fn agrees_with_libipts_packet_decoder() {
    use ipt::{Compression as C, Packet as L};
    let mut enc = ipt::Encoder::new().unwrap();
    let packets = [
        L::Psb,
        L::Tsc(0x1234_5678),
        L::Cbr(40),
        L::Tma { ctc: 0x55, fc: 3 },
        L::ModeExec {
            csl: true,
            csd: false,
        },
        L::Fup(0x7fff_1234_5678, C::Sext48),
        L::Psbend,
        L::Tnt8 {
            payload: 0b101,
            bits: 3,
        },
        L::Tnt64 {
            payload: 0x1_0000_0001,
            bits: 40,
        },
        L::Tip(0x5678, C::Update16),
        L::Mtc(9),
        L::Cyc(0x1234),
        L::TipPgd(0, C::Suppressed),
        L::TipPge(0xffff_8000_0000_1000, C::Full),
        L::Pad,
        L::Ptw {
            payload: 42,
            plc: 0,
            fup: true,
        },
        L::Ovf,
        L::Stop,
    ];
    let mut buf = Vec::new();
    for p in packets {
        buf.extend_from_slice(enc.encode(p).unwrap());
    }
    let cfg = ipt::Config::default();
    assert_eq!(compare_with_libipt(&cfg, &buf), Ok(packets.len() as u64));
}

/// Random bytes after a PSB: both decoders agree up to the first error.
#[test]
fn agrees_with_libipt_on_noise() {
    let cfg = ipt::Config::default();
    let mut x = 0x1234_5678_9abc_def0u64;
    for _ in 0..300 {
        let mut buf = [0x02u8, 0x82].repeat(8);
        buf.extend_from_slice(&[0x02, 0x23]);
        for _ in 0..64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf.push(x as u8);
        }
        compare_with_libipt(&cfg, &buf).unwrap();
    }
}

/// Erratum SKZ84: a TMA with its reserved byte or bits set is an invalid
/// packet of 8 bytes for libipt on the CPUs it applies to (Skylake
/// server, 6/85), `BAD_PACKET` elsewhere; both decoders read it alike,
/// also where its eighth byte is past the buffer's end.
#[test]
fn skz84_corrupt_tma_is_libipts_invalid_packet() {
    let mut skx = ipt::Config::default();
    skx.set_cpu(ipt::Cpu {
        family: 6,
        model: 85,
        stepping: 4,
    })
    .unwrap();
    assert!(skx.errata().skz84);
    let mut buf = [0x02u8, 0x82].repeat(8);
    buf.extend_from_slice(&[0x02, 0x23]);
    // Reserved byte set, then a FastCounter above 9 bits.
    buf.extend_from_slice(&[0x02, 0x73, 0x01, 0x01, 0x01, 0x01, 0x00, 0x00]);
    buf.extend_from_slice(&[0x02, 0x73, 0x01, 0x01, 0x00, 0xff, 0xff, 0x00]);
    buf.extend_from_slice(&[0x02, 0x73, 0x01, 0x01, 0x01, 0x01, 0x00]);
    // PSB, PSBEND, two invalid packets, then the end inside the third.
    assert_eq!(compare_with_libipt(&skx, &buf), Ok(5));
    assert_eq!(
        decode_known(&buf, 18, false, true),
        Ok((Packet::Invalid, 8))
    );
    assert_eq!(decode_known(&buf, 18, false, false), Err(BAD_PACKET));
    assert_eq!(compare_with_libipt(&ipt::Config::default(), &buf), Ok(2));
}
