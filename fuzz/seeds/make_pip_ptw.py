#!/usr/bin/env python3
"""Writes the PIP/PTWRITE and power event/MNT/TraceStop seeds of
fuzz/seeds/flow_lockstep/ (run from the
repository root: python3 fuzz/seeds/make_pip_ptw.py). Packets are built from
the Intel SDM's layouts; the IPs are in the fixed image of
fuzz/src/harness.rs (CODE at testkit::BASE = 0x400000), whose control flow
they follow."""
import struct

BASE = 0x400000
PSB = bytes([0x02, 0x82] * 8)
PSBEND = bytes([0x02, 0x23])
MODE64 = bytes([0x99, 0x01])  # MODE.Exec, CS.L: 64-bit code
PGD = bytes([0x01])  # TIP.PGD, IP suppressed


def ip_packet(opcode, off):
    """An IP packet with IPBytes 6 (the whole address)."""
    return bytes([opcode | (6 << 5)]) + struct.pack('<Q', BASE + off)


def fup(off):
    return ip_packet(0x1d, off)


def tip(off):
    return ip_packet(0x0d, off)


def pge(off):
    return ip_packet(0x11, off)


def pip(cr3, nr=False):
    """PIP: 02 43, then CR3[51:5] in bits 47:1 and NR in bit 0."""
    p = ((cr3 >> 5) << 1) | int(nr)
    return bytes([0x02, 0x43]) + struct.pack('<Q', p)[:6]


def ptw(value, eight=False, ip=False):
    """PTW: 02, then 0x12 | PayloadBytes << 5 | IP << 7, then the payload."""
    head = 0x12 | (int(eight) << 5) | (int(ip) << 7)
    return bytes([0x02, head]) + struct.pack('<Q', value)[:8 if eight else 4]


def tnt(bits):
    """A short TNT, the first branch in the highest bit below the stop bit."""
    v = 0
    for b in bits:
        v = (v << 1) | b
    return bytes([((1 << len(bits)) | v) << 1])


def tsc(t):
    return bytes([0x19]) + struct.pack('<Q', t)[:7]


def mwait(hints, ext):
    """MWAIT: 02 c2, then hints (EAX) and extensions (ECX), 4 bytes each."""
    return bytes([0x02, 0xc2]) + struct.pack('<II', hints, ext)


def pwre(state, sub, hw=False):
    """PWRE: 02 22, HW in bit 7 of the first byte (libipt 2.1.2 reads bit
    3: both set), then the thread C-state in 7:4 and sub-state in 3:0."""
    return bytes([0x02, 0x22, 0x88 if hw else 0, (state << 4) | sub])


def pwrx(last, deepest, wake):
    """PWRX: 02 a2, last core C-state in 7:4 and deepest in 3:0, then the
    wake reasons (bit 0 interrupt, 2 store, 3 autonomous), 3 reserved."""
    return bytes([0x02, 0xa2, (last << 4) | deepest, wake, 0, 0, 0])


def exstop(ip=False):
    """EXSTOP: 02 62, with IP 02 e2."""
    return bytes([0x02, 0xe2 if ip else 0x62])


def mnt(payload):
    """MNT: 02 c3 88, then an 8-byte payload."""
    return bytes([0x02, 0xc3, 0x88]) + struct.pack('<Q', payload)


STOP = bytes([0x02, 0x83])  # TraceStop


# PIP in PSB+; the call loop; a PIP bound to the syscall at 0x17 and a
# disable there; PIP and PTW while disabled; an asynchronous disable with a
# PIP; PTW with its FUP while disabled; re-enabled, a PSB+ with a PIP.
a = b''.join([
    PSB, pip(0x1a2b3000), MODE64, tsc(0x1000), fup(0), PSBEND,
    tnt([0, 1, 1, 0, 1, 1]), tnt([0, 1, 0]), tip(0x40), tnt([0, 1, 1]),
    pip(0x2b3c4000), PGD,
    pip(0x3c4d5000, True), ptw(0x11223344), pge(0x19), tip(0x50),
    fup(0x50), pip(0x4d5e6000), PGD,
    ptw(0xdeadbeef, False, True), fup(0x50), ptw(0x0102030405060708, True),
    pge(0x0e), PSB, pip(0x6f708000), MODE64, tsc(0x2000), fup(0x0e), PSBEND,
    tip(0x40), tnt([0, 1, 1]), PGD,
])
# PTW with its FUP at 0x35 (the event binds to the instruction there); an
# asynchronous branch 0x3c -> 0x3d with a PIP bound to its TIP; PIPs bound
# to the syscall at 0x17, enabled and after a TIP.PGE.
b = b''.join([
    PSB, MODE64, fup(0x0e), PSBEND, tip(0x40),
    ptw(0xfeedface, False, True), fup(0x35), tnt([0]),
    fup(0x3c), pip(0x7a8b9000), tip(0x3d), tnt([1, 1]),
    pip(0x1000), tip(0x19), tip(0x50), PGD,
    pge(0x00), tnt([0, 1, 1, 0, 1, 1]), tnt([0, 1, 0]), tip(0x40),
    tnt([0, 1, 1]), pip(0x2000, True), tip(0x19), tip(0x50), PGD,
])
# MNT in PSB+; MWAIT and EXSTOP.IP bound to the FUP at f (0x30), which
# the call at 0x05 reaches without trace; PWRE, PWRX; the run of a; an MNT;
# disabled at the syscall at 0x17: TraceStop, a standalone EXSTOP, MWAIT
# and EXSTOP without IP; re-enabled at 0x19 to the syscall at 0x50.
c = b''.join([
    PSB, mnt(0x1122334455667788), MODE64, tsc(0x1000), fup(0), PSBEND,
    mwait(0x20, 1), exstop(True), tsc(0x1800), fup(0x30),
    pwre(2, 1, True), pwrx(2, 2, 0x01),
    tnt([0, 1, 1, 0, 1, 1]), tnt([0, 1, 0]), tip(0x40), tnt([0, 1, 1]),
    mnt(0x99), PGD,
    STOP, exstop(), mwait(0x30, 0), exstop(), pwrx(6, 6, 0x0d),
    pge(0x19), tip(0x50), PGD,
])
d = 'fuzz/seeds/flow_lockstep/'
for name, cpu, t in [('pip-ptw-cpu0', 0, a), ('pip-ptw-cpu2', 2, a),
                     ('pip-ptw-async-cpu1', 1, b), ('pip-ptw-async-cpu3', 3, b),
                     ('pwr-stop-mnt-cpu0', 0, c), ('pwr-stop-mnt-cpu2', 2, c)]:
    with open(d + name, 'wb') as f:
        f.write(bytes([cpu]) + t)
