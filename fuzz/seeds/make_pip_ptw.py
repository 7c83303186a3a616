#!/usr/bin/env python3
"""Writes the PIP/PTWRITE seeds of fuzz/seeds/flow_lockstep/ (run from the
repository root: python3 fuzz/seeds/make_pip_ptw.py). Packets are built from
the Intel SDM's layouts; the IPs are in the fixed image of
fuzz/src/harness.rs (CODE at testkit::BASE = 0x400000), whose control flow
they follow."""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from packets import MODE64, PGD, PSB, PSBEND, fup, pge, tip, tnt, tsc  # noqa: E402


def pip(cr3, nr=False):
    """PIP: 02 43, then CR3[51:5] in bits 47:1 and NR in bit 0."""
    p = ((cr3 >> 5) << 1) | int(nr)
    return bytes([0x02, 0x43]) + struct.pack('<Q', p)[:6]


def ptw(value, eight=False, ip=False):
    """PTW: 02, then 0x12 | PayloadBytes << 5 | IP << 7, then the payload."""
    head = 0x12 | (int(eight) << 5) | (int(ip) << 7)
    return bytes([0x02, head]) + struct.pack('<Q', value)[:8 if eight else 4]






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
d = 'fuzz/seeds/flow_lockstep/'
for name, cpu, t in [('pip-ptw-cpu0', 0, a), ('pip-ptw-cpu2', 2, a),
                     ('pip-ptw-async-cpu1', 1, b), ('pip-ptw-async-cpu3', 3, b)]:
    with open(d + name, 'wb') as f:
        f.write(bytes([cpu]) + t)
