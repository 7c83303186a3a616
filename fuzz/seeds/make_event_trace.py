#!/usr/bin/env python3
"""Writes the event trace seeds of fuzz/seeds/flow_lockstep/ (run from the
repository root: python3 fuzz/seeds/make_event_trace.py): CFE and EVD
packets, built from the Intel SDM's layouts, among the control flow of the
fixed image of fuzz/src/harness.rs (CODE at testkit::BASE = 0x400000), so
that the lockstep target compares both flow decoders' event trace:
interrupts with a page fault's address and their asynchronous branches,
VM exits with their qualification and reason, every CFE type with and
without its IP bit, while tracing is on and off, and a CFE type no decoder
knows. The first byte picks the CPU (see harness::flow_lockstep)."""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from packets import MODE64, PGD, PSB, PSBEND, fup, pge, tip, tnt, tsc  # noqa: E402


def cfe(kind, vector=0, ip=False):
    """CFE: 02 13, then Type (bits 4:0) and IP (bit 7), then the vector."""
    return bytes([0x02, 0x13, kind | (int(ip) << 7), vector])


def evd(kind, payload):
    """EVD: 02 53, then Type (bits 5:0), then an 8-byte payload."""
    return bytes([0x02, 0x53, kind]) + struct.pack('<Q', payload)


INTR, IRET, SMI, RSM, SIPI, INIT, VMENTRY, VMEXIT, VMEXIT_INTR, SHUTDOWN = range(1, 11)
UINTR, UIRET, UNKNOWN = 0x0c, 0x0d, 0x0b
CR2, VMXQ, VMXR = 0, 1, 2

# Enabled: a page fault (EVD CR2, CFE INTR with its IP) interrupting the
# return at 0x3c, handled at 0x3d (its FUP and TIP); an SMI without an IP
# waiting for the FUP at the syscall at 0x17, an INIT for the FUP at the
# jump at 0x20; disabled at the syscall at 0x50. Enabled again, an IRET
# event with its IP at the return at 0x45; an unknown CFE type taking the
# FUP at 0x17 with it; a VM exit (EVD VMXQ, VMXR, CFE VMEXIT_INTR with its
# IP) leaving tracing at 0x50 (FUP, TIP.PGD).
a = b''.join([
    PSB, MODE64, tsc(0x1000), fup(0x0e), PSBEND, tip(0x40), tnt([0]),
    evd(CR2, 0x7fff0000dead), cfe(INTR, 14, True), fup(0x3c), tip(0x3d),
    tnt([1, 1]), cfe(SMI), fup(0x17), tip(0x19), cfe(INIT), fup(0x20),
    tip(0x50), PGD,
    pge(0x00), tnt([0, 1, 1, 0, 1, 1]), tnt([0, 1, 0]), tip(0x40), tnt([0, 1]),
    cfe(IRET, 0, True), fup(0x45), tnt([1]),
    cfe(UNKNOWN, 0, True), fup(0x17), tip(0x19), tip(0x50),
    evd(VMXQ, 0x1234), evd(VMXR, 0x30), cfe(VMEXIT_INTR, 32, True), fup(0x50),
    PGD,
])
# Disabled: every type without its IP stands alone (SIPI and RSM never
# have one); enabled at 0x0e, a user interrupt with its IP at 0x3c to
# 0x3d, a user-interrupt return with its IP at the syscall at 0x17; EVD of
# an unknown type; a VM entry without an IP, which binds to the next
# VMLAUNCH or VMRESUME (the image has none); a shutdown with its IP at
# 0x50.
b = b''.join([
    PSB, MODE64, tsc(0x2000), PSBEND,
    cfe(SMI), cfe(RSM), cfe(SIPI, 0x9a), cfe(INIT), cfe(INTR, 2),
    evd(VMXR, 0x1), cfe(VMEXIT), cfe(SHUTDOWN), cfe(UINTR, 5), cfe(UIRET),
    cfe(IRET), cfe(VMENTRY), pge(0x0e), tip(0x40), tnt([0]),
    cfe(UINTR, 7, True), fup(0x3c), tip(0x3d), tnt([1, 1]),
    cfe(UIRET, 0, True), fup(0x17), tip(0x19), tip(0x50),
    evd(0x1f, 0xffff), cfe(VMENTRY), cfe(SHUTDOWN, 0, True), fup(0x50), PGD,
])
# Context errors: a CFE IRET after an EVD CR2; EVD VMXQ twice; RSM with
# its IP bit (a bad packet); then a PSB to go on from.
c = b''.join([
    PSB, MODE64, fup(0x0e), PSBEND, tip(0x40),
    evd(CR2, 0x1000), cfe(IRET), tnt([1, 1]),
    PSB, MODE64, fup(0x0e), PSBEND, tip(0x40),
    evd(VMXQ, 1), evd(VMXQ, 2), cfe(VMEXIT, 0, True), fup(0x3c), PGD,
    PSB, MODE64, fup(0x0e), PSBEND, cfe(RSM, 0, True), tip(0x40), PGD,
])
d = 'fuzz/seeds/flow_lockstep/'
for name, cpu, t in [('event-trace-cpu0', 0, a), ('event-trace-cpu1', 1, a),
                     ('event-trace-disabled-cpu2', 2, b),
                     ('event-trace-disabled-cpu0', 0, b),
                     ('event-trace-errors-cpu3', 3, c),
                     ('event-trace-errors-cpu0', 0, c)]:
    with open(d + name, 'wb') as f:
        f.write(bytes([cpu]) + t)
