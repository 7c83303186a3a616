//! Tiles one core's real Intel PT for `scripts/bench`'s real-hardware row:
//! the trace from its first PSB on, written `COPIES` times, each copy's TSC
//! packets `DELTA` ticks later than the copy before, so that time goes on
//! through the copies as in a longer recording (a copy whose TSCs repeated
//! the first's would make ptdec's ordering stage hold every copy at once;
//! the bench moves the core's context switches by as much; it prints the
//! trace's first and last TSC, `tsc FIRST LAST`). Packets are
//! walked as ptdec's flow decoder reads them with the errata of the
//! bench's recording (Skylake server: SKZ84's corrupt TMA is a packet,
//! SKD007 is off); after a packet it cannot read, the walk goes on at the
//! next PSB, as a decoder does.

use std::path::PathBuf;

use anyhow::{bail, Context};
use ptflow::packet::{self, Packet};

const PSB: [u8; 16] = [
    0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
];

fn main() {
    if let Err(e) = run() {
        eprintln!("ptbench-tile: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output, copies, delta] = &args[..] else {
        bail!("usage: ptbench-tile IN_PT OUT_PT COPIES DELTA_TSC");
    };
    let copies: u64 = copies.parse().context("COPIES")?;
    let delta: u64 = delta.parse().context("DELTA_TSC")?;
    let data = std::fs::read(input).with_context(|| format!("reading {input}"))?;
    let Some(first) = find_psb(&data, 0) else {
        bail!("{input}: no PSB");
    };
    let body = &data[first..];
    let tscs = tsc_offsets(body);
    let mut out = Vec::with_capacity(body.len() * copies as usize);
    for i in 0..copies {
        let at = out.len();
        out.extend_from_slice(body);
        for &p in &tscs {
            let b = &mut out[at + p + 1..at + p + 8];
            let mut v = [0u8; 8];
            v[..7].copy_from_slice(b);
            let tsc = u64::from_le_bytes(v).wrapping_add(i * delta) & ((1 << 56) - 1);
            b.copy_from_slice(&tsc.to_le_bytes()[..7]);
        }
    }
    let output = PathBuf::from(output);
    std::fs::write(&output, &out).with_context(|| format!("writing {}", output.display()))?;
    // The first copy's TSC span, for the caller to keep the sideband of
    // that span.
    let tsc_at = |p: usize| {
        let mut v = [0u8; 8];
        v[..7].copy_from_slice(&body[p + 1..p + 8]);
        u64::from_le_bytes(v)
    };
    match (
        tscs.iter().map(|&p| tsc_at(p)).min(),
        tscs.iter().map(|&p| tsc_at(p)).max(),
    ) {
        (Some(first), Some(last)) => println!("tsc {first} {last}"),
        _ => bail!("{input}: no TSC packet"),
    }
    Ok(())
}

/// The first PSB at or after `from`.
fn find_psb(b: &[u8], from: usize) -> Option<usize> {
    b.get(from..)?
        .windows(PSB.len())
        .position(|w| w == PSB)
        .map(|p| from + p)
}

/// Offsets of the TSC packets in `b` (which starts at a PSB).
fn tsc_offsets(b: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < b.len() {
        match packet::decode_known(b, pos, false, true) {
            Ok((p, n)) => {
                if matches!(p, Packet::Tsc(_)) {
                    out.push(pos);
                }
                pos += n;
            }
            Err(_) => match find_psb(b, pos + 1) {
                Some(next) => pos = next,
                None => break,
            },
        }
    }
    out
}
