"""Intel PT packets for the hand-built seeds of fuzz/seeds/ (the
make_*.py scripts import it), from the Intel SDM's layouts: IP packets
with the whole address (IPBytes 6) in the fixed image of
fuzz/src/harness.rs (CODE at testkit::BASE = 0x400000)."""
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


def pgd(off):
    return ip_packet(0x01, off)


def tnt(bits):
    """A short TNT, the first branch in the highest bit below the stop bit."""
    v = 0
    for b in bits:
        v = (v << 1) | b
    return bytes([((1 << len(bits)) | v) << 1])


def tsc(t):
    return bytes([0x19]) + struct.pack('<Q', t)[:7]
