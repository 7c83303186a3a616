//! Intel PT packets, decoded from their layouts in the Intel SDM (Vol. 3C,
//! "Intel Processor Trace", packet definitions): one [`Packet`] per
//! packet at a position in a trace buffer, with libipt's error codes for
//! what it refuses (`pte_eos` for a packet cut by the buffer's end,
//! `pte_bad_opc` for an unknown opcode, `pte_bad_packet` for reserved
//! values), so the flow decoder above it fails where libipt fails.
//! libipt 2.2's TRIG packet is read too (the vectors of libipt's newest
//! test suite and the SDM's trigger tracing section give its layout):
//! libipt 2.1.2, ptdec's reference, answers `pte_bad_opc` for it.

use pttypes::Error as PtError;

/// `pte_bad_opc`: an opcode no packet has.
pub const BAD_OPC: PtError = PtError::BAD_OPC;
/// `pte_bad_packet`: reserved bits or values in a packet.
pub const BAD_PACKET: PtError = PtError::BAD_PACKET;

/// The IP payload of TIP, TIP.PGE, TIP.PGD and FUP: the compression
/// (IPBytes, bits 7:5 of the header) and the bytes given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpPayload {
    /// 0 suppressed, 1 update 16, 2 update 32, 3 sign-extend 48, 4 update
    /// 48, 6 full.
    pub ipc: u8,
    pub ip: u64,
}

/// One packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packet {
    /// PAD: 0x00.
    Pad,
    /// PSB: 02 82 repeated 8 times.
    Psb,
    /// PSBEND: 02 23.
    Psbend,
    /// OVF: 02 F3.
    Ovf,
    /// TraceStop: 02 83.
    Stop,
    /// TNT (short, 1 byte: bit 0 clear; long, 02 A3 + 6 bytes): `size`
    /// branch bits in `bits`, the first branch the most significant.
    Tnt {
        bits: u64,
        size: u8,
    },
    Tip(IpPayload),
    TipPge(IpPayload),
    TipPgd(IpPayload),
    Fup(IpPayload),
    /// MODE.Exec (99, leaf 000): CS.L, CS.D, RFLAGS.IF.
    ModeExec {
        csl: bool,
        csd: bool,
        iflag: bool,
    },
    /// MODE.TSX (99, leaf 001).
    ModeTsx {
        intx: bool,
        abrt: bool,
    },
    /// PIP: 02 43 + 6 bytes: CR3 (bits 51:5) and NR.
    Pip {
        cr3: u64,
        nr: bool,
    },
    /// TSC: 19 + 7 bytes.
    Tsc(u64),
    /// CBR: 02 03 ratio, reserved.
    Cbr(u8),
    /// TMA: 02 73 `CTC[15:0]`, reserved, `FastCounter[8:0]`.
    Tma {
        ctc: u16,
        fc: u16,
    },
    /// MTC: 59 `CTC[7:0]` (of CTC bits mtc_freq + 7 .. mtc_freq).
    Mtc(u8),
    /// CYC: header xxxxx E 11, then bytes xxxxxxx E.
    Cyc(u64),
    /// VMCS: 02 C8 + 5 bytes (base bits 51:12).
    Vmcs(u64),
    /// MNT: 02 C3 88 + 8 bytes.
    Mnt(u64),
    /// PTWRITE: 02 (IP | PayloadBytes | 1_0010) + 4 or 8 bytes.
    Ptw {
        plc: u8,
        ip: bool,
        payload: u64,
    },
    /// EXSTOP: 02 62 (02 E2 with IP).
    Exstop {
        ip: bool,
    },
    /// MWAIT: 02 C2 `hints[31:0] ext[31:0]`.
    Mwait {
        hints: u32,
        ext: u32,
    },
    /// PWRE: 02 22 + 2 bytes.
    Pwre {
        state: u8,
        sub_state: u8,
        hw: bool,
    },
    /// PWRX: 02 A2 + 5 bytes.
    Pwrx {
        last: u8,
        deepest: u8,
        interrupt: bool,
        store: bool,
        autonomous: bool,
    },
    /// CFE: 02 13 (IP | type) vector.
    Cfe {
        ty: u8,
        vector: u8,
        ip: bool,
    },
    /// EVD: 02 53 type + 8 bytes.
    Evd {
        ty: u8,
        payload: u64,
    },
    /// BBP (block begin, architectural LBR/PEBS via PT): 02 63 (SZ | type).
    /// libipt 2.1.2 does not know it (`pte_bad_opc` there).
    Bbp {
        sz: bool,
        ty: u8,
    },
    /// BEP (block end): 02 33 (02 B3 with IP). Not in libipt 2.1.2.
    Bep {
        ip: bool,
    },
    /// TRIG (trigger tracing; libipt 2.2, not 2.1.2): D9, then a byte
    /// `IP ICNTV MULT reserved[4:0]`, the trigger number (TRBV), and with
    /// ICNTV `ICNT[15:0]`: the trigger fired `icnt` instructions after
    /// the last packet that gave an IP (IP: the next FUP gives it).
    Trig {
        ip: bool,
        icntv: bool,
        mult: bool,
        trbv: u8,
        icnt: u16,
    },
    /// A TMA with reserved bits set, under erratum SKZ84 (Skylake server
    /// and its kin: "Use of VMX TSC Scaling or TSC Offsetting Will Result
    /// in Corrupted Intel PT Packets"): libipt's packet decoder reads it
    /// as an invalid packet one byte longer than a TMA, which the event
    /// decoder skips ([`decode_known`]).
    Invalid,
}

impl Packet {
    /// Whether libipt's packet decoder knows this packet, 2.1.2's or
    /// (TRIG) 2.2's; it answers `pte_bad_opc` for the others.
    pub fn known_to_libipt(&self) -> bool {
        !matches!(self, Packet::Bbp { .. } | Packet::Bep { .. })
    }

    /// Whether libipt 2.1.2, ptdec's reference, knows this packet: not
    /// what only 2.2 knows (TRIG).
    pub fn known_to_libipt_2_1(&self) -> bool {
        self.known_to_libipt() && !matches!(self, Packet::Trig { .. })
    }
}

/// Little-endian value of `n` bytes at `b[at..]` (the caller checked `n`).
#[inline(always)]
fn le(b: &[u8], at: usize, n: usize) -> u64 {
    // One load when 8 bytes are there (most packets but the trace's
    // last few).
    if let Some(w) = b.get(at..at + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()) {
        let v = u64::from_le_bytes(w);
        return if n >= 8 {
            v
        } else {
            v & ((1u64 << (n * 8)) - 1)
        };
    }
    b[at..at + n]
        .iter()
        .rev()
        .fold(0u64, |v, &x| (v << 8) | u64::from(x))
}

/// Bytes of an IP payload with compression `ipc`.
#[inline]
fn ip_size(ipc: u8) -> Result<usize, PtError> {
    match ipc {
        0 => Ok(0),
        1 => Ok(2),
        2 => Ok(4),
        3 | 4 => Ok(6),
        6 => Ok(8),
        _ => Err(BAD_PACKET),
    }
}

/// TNT payload with its stop bit: the branch bits below the highest set
/// bit. A payload without branch bits is reserved.
#[inline]
fn tnt(payload: u64) -> Result<Packet, PtError> {
    let size = 63u32.saturating_sub(payload.leading_zeros()) as u8;
    if payload == 0 || size == 0 {
        return Err(BAD_PACKET);
    }
    Ok(Packet::Tnt {
        bits: payload & !(1u64 << size),
        size,
    })
}

/// Whether the 16 bytes at `at` are a PSB.
pub fn is_psb(b: &[u8], at: usize) -> bool {
    b.len() >= at + 16 && b[at..at + 16].chunks(2).all(|p| p == [0x02, 0x82])
}

/// A TIP at `b[at..]`, whole, with a valid IP compression: its payload
/// and size; `None` for anything else ([`decode`] says what it is).
#[inline(always)]
pub fn tip_at(b: &[u8], at: usize) -> Option<(IpPayload, usize)> {
    let &opc = b.get(at)?;
    if opc & 0x1f != 0x0d {
        return None;
    }
    let ipc = opc >> 5;
    let n = ip_size(ipc).ok()?;
    if b.len() - at < 1 + n {
        return None;
    }
    let ip = if n > 0 { le(b, at + 1, n) } else { 0 };
    Some((IpPayload { ipc, ip }, 1 + n))
}

/// [`decode`] as libipt reads the packet (2.1.2, and TRIG as 2.2 reads
/// it): what it does not know (BBP, BEP) is `BAD_OPC`, decided at the opcode, before the packet's
/// length is known, so a BBP cut by the end of the trace is `BAD_OPC`
/// there too, not `EOS`. Under erratum SKZ84 (`errata_skz84`) a TMA
/// with reserved bits set is [`Packet::Invalid`], of 8 bytes (a TMA's 7
/// and one: `pt_pkt_decode_tma`), which may end past the buffer's end
/// (the next packet is then `EOS`, as in libipt).
#[inline(always)]
pub fn decode_known(
    b: &[u8],
    at: usize,
    errata_skd007: bool,
    errata_skz84: bool,
) -> Result<(Packet, usize), PtError> {
    // The most common packet first: a short TNT (an even opcode but PAD
    // and the 0x02 prefix), whose payload has its stop bit (bit 1 or
    // above, as the opcode is at least 4).
    if let Some(&opc) = b.get(at) {
        if opc & 1 == 0 && opc > 2 {
            let payload = opc >> 1;
            let size = 7 - payload.leading_zeros() as u8;
            return Ok((
                Packet::Tnt {
                    bits: u64::from(payload & !(1u8 << size)),
                    size,
                },
                1,
            ));
        }
    }
    match decode(b, at, errata_skd007) {
        Ok((p, _)) if !p.known_to_libipt() => Err(BAD_OPC),
        Err(e) if e == PtError::EOS && b.get(at) == Some(&0x02) && b.get(at + 1) == Some(&0x63) => {
            Err(BAD_OPC)
        }
        Err(e)
            if e == BAD_PACKET
                && errata_skz84
                && b.get(at) == Some(&0x02)
                && b.get(at + 1) == Some(&0x73) =>
        {
            Ok((Packet::Invalid, 8))
        }
        r => r,
    }
}

/// The size libipt gives a packet that [`decode`] read in `n` bytes: the
/// same, but for the OVF of SKD007, which starts one byte in (libipt's
/// offset of the packet is where it ends minus this).
#[inline]
pub fn packet_size(p: &Packet, n: usize) -> usize {
    if n == 3 && matches!(p, Packet::Ovf) {
        2
    } else {
        n
    }
}

/// Decodes the packet at `b[at..]`: the packet and its size.
#[inline(always)]
pub fn decode(b: &[u8], at: usize, errata_skd007: bool) -> Result<(Packet, usize), PtError> {
    let rest = b.get(at..).ok_or(PtError::EOS)?;
    let &opc = rest.first().ok_or(PtError::EOS)?;
    match opc {
        0x00 => Ok((Packet::Pad, 1)),
        0x02 => {
            let &ext = rest.get(1).ok_or(PtError::EOS)?;
            decode_ext(rest, ext)
        }
        0x99 => {
            need(rest, 2)?;
            let p = rest[1];
            let bits = p & 0x1f;
            match p >> 5 {
                0 => Ok((
                    Packet::ModeExec {
                        csl: bits & 1 != 0,
                        csd: bits & 2 != 0,
                        iflag: bits & 4 != 0,
                    },
                    2,
                )),
                1 => Ok((
                    Packet::ModeTsx {
                        intx: bits & 1 != 0,
                        abrt: bits & 2 != 0,
                    },
                    2,
                )),
                _ => Err(BAD_PACKET),
            }
        }
        0x59 => {
            need(rest, 2)?;
            Ok((Packet::Mtc(rest[1]), 2))
        }
        0x19 => {
            need(rest, 8)?;
            Ok((Packet::Tsc(le(rest, 1, 7)), 8))
        }
        0xd9 => decode_trig(rest),
        _ if opc & 0x03 == 0x03 => {
            let (value, n) = cyc(rest)?;
            // SKD007: a 2-byte CYC whose second byte looks like an
            // extended opcode, followed by F3, is an OVF the hardware
            // mangled. libipt drops the CYC's first byte and reads the
            // OVF at `at + 1`: three bytes consumed (a plain OVF is two),
            // and the packet's offset is `at + 1` (see `packet_size`).
            if errata_skd007 && n == 2 && (value & !0x1f) == 0x20 && rest.get(2) == Some(&0xf3) {
                return Ok((Packet::Ovf, 3));
            }
            Ok((Packet::Cyc(value), n))
        }
        _ if opc & 0x01 == 0x00 => Ok((tnt(u64::from(opc >> 1))?, 1)),
        _ => {
            let make: fn(IpPayload) -> Packet = match opc & 0x1f {
                0x1d => Packet::Fup,
                0x0d => Packet::Tip,
                0x11 => Packet::TipPge,
                0x01 => Packet::TipPgd,
                _ => return Err(BAD_OPC),
            };
            let ipc = opc >> 5;
            let n = ip_size(ipc)?;
            need(rest, 1 + n)?;
            let ip = if n > 0 { le(rest, 1, n) } else { 0 };
            Ok((make(IpPayload { ipc, ip }), 1 + n))
        }
    }
}

/// TRIG: 3 bytes, 5 with ICNTV (bit 6 of the second byte). The
/// reserved bits 4:0 are not checked (libipt 2.2 does not either).
#[inline(always)]
fn decode_trig(rest: &[u8]) -> Result<(Packet, usize), PtError> {
    need(rest, 3)?;
    let flags = rest[1];
    let icntv = flags & 0x40 != 0;
    let n = if icntv { 5 } else { 3 };
    need(rest, n)?;
    Ok((
        Packet::Trig {
            ip: flags & 0x80 != 0,
            icntv,
            mult: flags & 0x20 != 0,
            trbv: rest[2],
            icnt: if icntv { le(rest, 3, 2) as u16 } else { 0 },
        },
        n,
    ))
}

/// A CYC packet's value and size.
fn cyc(rest: &[u8]) -> Result<(u64, usize), PtError> {
    let mut ext = rest[0] & 0x04 != 0;
    let mut value = u64::from(rest[0] >> 3);
    let mut shl = 5u32;
    let mut n = 1;
    while ext {
        let &x = rest.get(n).ok_or(PtError::EOS)?;
        n += 1;
        ext = x & 1 != 0;
        let bits = u64::from(x >> 1);
        shl += 7;
        if shl > 64 {
            return Err(BAD_PACKET);
        }
        value |= bits << (shl - 7);
    }
    Ok((value, n))
}

/// `rest` holds at least `n` bytes (`pte_eos` if not: the packet is cut
/// by the buffer's end).
#[inline(always)]
fn need(rest: &[u8], n: usize) -> Result<(), PtError> {
    if rest.len() < n {
        Err(PtError::EOS)
    } else {
        Ok(())
    }
}

/// The packets with the 0x02 prefix. The power event, event trace and
/// PTWRITE packets are read by their own functions, always inlined: one
/// match over `ext` as a whole.
fn decode_ext(rest: &[u8], ext: u8) -> Result<(Packet, usize), PtError> {
    match ext {
        0x82 => {
            need(rest, 16)?;
            if !is_psb(rest, 0) {
                return Err(BAD_PACKET);
            }
            Ok((Packet::Psb, 16))
        }
        0xf3 => Ok((Packet::Ovf, 2)),
        0x23 => Ok((Packet::Psbend, 2)),
        0x83 => Ok((Packet::Stop, 2)),
        0x03 => {
            need(rest, 4)?;
            Ok((Packet::Cbr(rest[2]), 4))
        }
        0x73 => {
            need(rest, 7)?;
            let ctc = u16::from_le_bytes([rest[2], rest[3]]);
            let fc = u16::from_le_bytes([rest[5], rest[6]]);
            if fc & !0x1ff != 0 || rest[4] != 0 {
                return Err(BAD_PACKET);
            }
            Ok((Packet::Tma { ctc, fc }, 7))
        }
        0x43 => {
            need(rest, 8)?;
            let p = le(rest, 2, 6);
            Ok((
                Packet::Pip {
                    cr3: (p >> 1) << 5,
                    nr: p & 1 != 0,
                },
                8,
            ))
        }
        0xc8 => {
            need(rest, 7)?;
            Ok((Packet::Vmcs(le(rest, 2, 5) << 12), 7))
        }
        0x62 | 0xe2 | 0xc2 | 0x22 | 0xa2 => decode_power(rest, ext),
        0xa3 => {
            need(rest, 8)?;
            Ok((tnt(le(rest, 2, 6))?, 8))
        }
        0x13 | 0x53 => decode_event_trace(rest, ext),
        0xc3 => {
            let &ext2 = rest.get(2).ok_or(PtError::EOS)?;
            if ext2 != 0x88 {
                return Err(BAD_OPC);
            }
            need(rest, 11)?;
            Ok((Packet::Mnt(le(rest, 3, 8)), 11))
        }
        0x63 => {
            need(rest, 3)?;
            Ok((
                Packet::Bbp {
                    sz: rest[2] & 0x80 != 0,
                    ty: rest[2] & 0x1f,
                },
                3,
            ))
        }
        0x33 | 0xb3 => Ok((
            Packet::Bep {
                ip: ext & 0x80 != 0,
            },
            2,
        )),
        _ if ext & 0x1f == 0x12 => decode_ptw(rest, ext),
        _ => Err(BAD_OPC),
    }
}

/// The power event packets (EXSTOP, MWAIT, PWRE, PWRX) of
/// [`decode_ext`].
#[inline(always)]
fn decode_power(rest: &[u8], ext: u8) -> Result<(Packet, usize), PtError> {
    match ext {
        0x62 | 0xe2 => Ok((
            Packet::Exstop {
                ip: ext & 0x80 != 0,
            },
            2,
        )),
        0xc2 => {
            need(rest, 10)?;
            Ok((
                Packet::Mwait {
                    hints: le(rest, 2, 4) as u32,
                    ext: le(rest, 6, 4) as u32,
                },
                10,
            ))
        }
        0x22 => {
            need(rest, 4)?;
            let p = le(rest, 2, 2);
            Ok((
                Packet::Pwre {
                    state: ((p & 0xf000) >> 12) as u8,
                    sub_state: ((p & 0xf00) >> 8) as u8,
                    hw: p & 0x8 != 0,
                },
                4,
            ))
        }
        0xa2 => {
            need(rest, 7)?;
            let p = le(rest, 2, 5);
            Ok((
                Packet::Pwrx {
                    last: ((p & 0xf0) >> 4) as u8,
                    deepest: (p & 0xf) as u8,
                    interrupt: p & 0x100 != 0,
                    store: p & 0x400 != 0,
                    autonomous: p & 0x800 != 0,
                },
                7,
            ))
        }
        _ => Err(BAD_OPC),
    }
}

/// The event trace packets (CFE, EVD) of [`decode_ext`].
#[inline(always)]
fn decode_event_trace(rest: &[u8], ext: u8) -> Result<(Packet, usize), PtError> {
    match ext {
        0x13 => {
            need(rest, 4)?;
            Ok((
                Packet::Cfe {
                    ty: rest[2] & 0x1f,
                    vector: rest[3],
                    ip: rest[2] & 0x80 != 0,
                },
                4,
            ))
        }
        0x53 => {
            need(rest, 11)?;
            Ok((
                Packet::Evd {
                    ty: rest[2] & 0x1f,
                    payload: le(rest, 3, 8),
                },
                11,
            ))
        }
        _ => Err(BAD_OPC),
    }
}

/// The PTWRITE packet of [`decode_ext`] (`ext & 0x1f` is 0x12), with 4
/// or 8 payload bytes as PayloadBytes says (the others are reserved).
#[inline(always)]
fn decode_ptw(rest: &[u8], ext: u8) -> Result<(Packet, usize), PtError> {
    let plc = (ext >> 5) & 0x3;
    let n = match plc {
        0 => 4,
        1 => 8,
        _ => return Err(BAD_PACKET),
    };
    need(rest, 2 + n)?;
    Ok((
        Packet::Ptw {
            plc,
            ip: ext & 0x80 != 0,
            payload: le(rest, 2, n),
        },
        2 + n,
    ))
}

#[cfg(test)]
mod tests;
