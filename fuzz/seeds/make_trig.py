#!/usr/bin/env python3
"""Writes the TRIG seeds of fuzz/seeds/ (run from the repository root:
python3 fuzz/seeds/make_trig.py): libipt 2.2's TRIG packet (trigger
tracing), laid out as the Intel SDM's trigger tracing section and libipt's
trig test vectors have it, among the control flow of the fixed image of
fuzz/src/harness.rs (CODE at testkit::BASE = 0x400000). flow_lockstep
compares the flow decoders up to libipt 2.1.2's error at the first TRIG
(the first byte picks the CPU, see harness::flow_lockstep); flow_diff and
raw_pt run ptdec's own flow decoder, the only one that decodes it."""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from packets import MODE64, PGD, PSB, PSBEND, fup, pge, tip, tnt, tsc  # noqa: E402


def trig(number, icnt=None, ip=False, mult=False):
    """TRIG: D9, then IP (bit 7), ICNTV (bit 6), MULT (bit 5), then the
    trigger number, then with ICNTV the instruction count ICNT[15:0]."""
    flags = (int(ip) << 7) | (int(icnt is not None) << 6) | (int(mult) << 5)
    out = bytes([0xd9, flags, number])
    if icnt is not None:
        out += struct.pack('<H', icnt)
    return out


# Enabled at 0x00: a trigger one instruction on (before the call at 0x05)
# and a second there with MULT (counted from the first); f's je not taken,
# its ret and the loop's jne taken; a trigger two instructions after the
# jne (the call, then f's mov: before the test at 0x35); the loop around
# twice more; a trigger with its IP bit on the FUP of the indirect call at
# 0x15, then its TIP; f and g return to the syscall, which disables
# tracing. Disabled: a trigger without a count, one with a count of 0 (no
# anchor: its IP unknown). Enabled at 0x19: the jump to h, a trigger at
# h's syscall (a count of 0 after the TIP), disabled there.
a = b''.join([
    PSB, MODE64, tsc(0x1000), fup(0x00), PSBEND,
    trig(0x11, icnt=1), trig(0x12, icnt=0, mult=True),
    tnt([0, 1, 1]), trig(0x13, icnt=2), tnt([1, 1, 1]), tnt([0, 1, 0]),
    trig(0x14, icnt=0, ip=True), fup(0x15), tip(0x40), tnt([1, 1, 1]), PGD,
    trig(0x15), trig(0x16, icnt=0),
    pge(0x19), tip(0x50), trig(0x17, icnt=0), PGD,
])
# Errors, each followed by a PSB to go on from: the IP bit without a count
# (a bad packet), a count while tracing is off (a bad packet), a count
# that runs into f's je, which needs trace, a count of 0 away from where
# the decoder is (a trigger with its IP bit whose FUP is not there).
b = b''.join([
    PSB, MODE64, fup(0x0e), PSBEND, trig(0x21, ip=True), tip(0x40), PGD,
    PSB, MODE64, PSBEND, trig(0x22, icnt=3), pge(0x0e), tip(0x40), PGD,
    PSB, MODE64, fup(0x30), PSBEND, trig(0x23, icnt=5), tnt([1, 1]), PGD,
    PSB, MODE64, fup(0x30), PSBEND, trig(0x24, icnt=1, mult=True), tnt([0]),
    trig(0x25, icnt=0, ip=True), fup(0x3c), tnt([1]), PGD,
])
# Before each: a stretch of the same control flow without TRIG, timed by
# a TSC of its own, so that a seed decodes more than a few instructions
# before libipt 2.1.2's error at the first TRIG (flow_lockstep compares up
# to there) and its times move (raw_pt and flow_diff write FTF on an ns
# axis): decoder/tests/fuzz_regressions.rs wants more than 10 of a seed.
lead = b''.join([
    PSB, MODE64, tsc(0x800), fup(0x00), PSBEND,
    tnt([0, 1, 1]), tsc(0x900), tnt([1, 1, 1]), tnt([0, 1, 0]), tip(0x40), tnt([1, 1, 1]), PGD,
])
root = 'fuzz/seeds/'
for name, t in [('trig', lead + a), ('trig-errors', lead + b)]:
    for target in ['flow_diff', 'raw_pt']:
        with open(root + target + '/' + name, 'wb') as f:
            f.write(t)
    for cpu in [0, 1]:
        with open(root + 'flow_lockstep/%s-cpu%d' % (name, cpu), 'wb') as f:
            f.write(bytes([cpu]) + t)
