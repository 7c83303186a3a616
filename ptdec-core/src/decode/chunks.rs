//! Cutting segments into chunks at PSBs ([`cut`]), the unit of parallel
//! decoding.
//!
//! A segment (one contiguous stretch of a buffer's AUX stream, possibly
//! spread over several AUXTRACE records of the file: a [`Stream`]) is cut at
//! the first PSB at or after every multiple of the chunk size. The cuts
//! depend only on the bytes and the chunk size, never on the number of
//! workers, so every `-j` gives the same chunks and the same output. Each
//! chunk is decoded from its PSB through the next chunk's PSB+ (see the
//! `chunk` module doc); its start time is the TSC of its PSB+, which orders
//! per-cpu chunks and lets `--start/--duration` skip the chunks outside the
//! window (chunks are in time order within a segment: a binary search).
//!
//! PSBs are found with libipt's packet decoder (`pt_pkt_sync_forward`, then
//! the PSB+ packets up to PSBEND), in windows of the stream, so the bytes
//! are borrowed from the mapped file and only a window that straddles two
//! AUXTRACE records is copied.

use std::borrow::Cow;
use std::ops::Range;

use ipt::{Config as PtConfig, Packet, PacketDecoder};

/// One segment's bytes in stream order: its pieces in the mapped input.
pub(super) struct Stream<'t> {
    pieces: Vec<&'t [u8]>,
    /// Stream offset of each piece.
    starts: Vec<u64>,
    len: u64,
}

impl<'t> Stream<'t> {
    pub fn new(pieces: Vec<&'t [u8]>) -> Stream<'t> {
        let mut starts = Vec::with_capacity(pieces.len());
        let mut len = 0u64;
        for p in &pieces {
            starts.push(len);
            len += p.len() as u64;
        }
        Stream {
            pieces,
            starts,
            len,
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    /// Calls `f` with each piece of `range` (clamped to the stream), as
    /// borrowed from the input.
    pub fn for_each_piece(&self, range: Range<u64>, f: &dyn Fn(&[u8])) {
        let (lo, hi) = (range.start.min(self.len), range.end.min(self.len));
        for (j, p) in self.pieces.iter().enumerate() {
            let s = self.starts[j];
            let e = s + p.len() as u64;
            if e <= lo || s >= hi {
                continue;
            }
            f(&p[(lo.max(s) - s) as usize..(hi.min(e) - s) as usize]);
        }
    }

    /// The bytes of `range` (clamped to the stream): borrowed when they lie
    /// in one piece, else copied.
    pub fn bytes(&self, range: Range<u64>) -> Cow<'t, [u8]> {
        let (lo, hi) = (range.start.min(self.len), range.end.min(self.len));
        if lo >= hi {
            return Cow::Borrowed(&[]);
        }
        let i = self.starts.partition_point(|&s| s <= lo) - 1;
        let (s, p) = (self.starts[i], self.pieces[i]);
        if hi <= s + p.len() as u64 {
            return Cow::Borrowed(&p[(lo - s) as usize..(hi - s) as usize]);
        }
        let mut v = Vec::with_capacity((hi - lo) as usize);
        for (j, p) in self.pieces.iter().enumerate().skip(i) {
            let s = self.starts[j];
            if s >= hi {
                break;
            }
            let a = lo.max(s) - s;
            let b = hi.min(s + p.len() as u64) - s;
            v.extend_from_slice(&p[a as usize..b as usize]);
        }
        Cow::Owned(v)
    }
}

/// The bytes a chunk at stream offset `start` warms up with CYC (see
/// `chunk::decode_fast`): from the last PSB among the `max` bytes before
/// it, found by its pattern, whose stretch up to `start` holds two MTCs,
/// looking back over at most [`WARMUP_PSBS`] PSBs (else from the earliest
/// of them, but from the last where they hold no MTC at all), else all
/// `max` (its decoder synchronizes at the first PSB in them). libipt
/// calibrates CYC at each MTC from the cycles since the one before
/// (`pt_tcal_update_mtc`), and a PSB+ keeps that state: a warm-up that has
/// seen the last MTC before the chunk's PSB, and the one before it,
/// leaves the decoder as one running through leaves it there
/// (`e2e_ptsim`'s CYC variant compares the two; a hostile-input probe of
/// this session found one PSB interval without an MTC, `--mtc-period 9`,
/// not enough). Each stretch is read once: the cost is linear in the
/// bytes looked at, bounded by `max` and by the PSBs (a trace of nothing
/// but PSBs, each chunk looking at all 64 KiB again, took minutes).
pub(super) fn warmup_len(cfg: &PtConfig, stream: &Stream<'_>, start: u64, max: u64) -> u64 {
    const PSB: [u8; 16] = [
        0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02,
        0x82,
    ];
    let lo = start.saturating_sub(max);
    let bytes = stream.bytes(lo..start);
    let (mut end, mut seen, mut nearest, mut from) = (bytes.len(), 0, None, None);
    for _ in 0..WARMUP_PSBS {
        let Some(at) = memchr::memmem::rfind(&bytes[..end], &PSB) else {
            break;
        };
        nearest.get_or_insert(at);
        from = Some(at);
        seen += mtcs(cfg, &bytes[at..end]);
        if seen >= 2 {
            break;
        }
        end = at;
    }
    // No MTC at all (`mtc=0`): libipt calibrates from the TSC of each
    // PSB+, and one interval does.
    if seen == 0 {
        from = nearest;
    }
    match from {
        Some(at) => start - (lo + at as u64),
        None => start - lo,
    }
}

/// The PSBs a warm-up looks back over at most ([`warmup_len`]).
const WARMUP_PSBS: usize = 8;

/// The MTC packets in `bytes`, which start with a PSB (until a packet
/// cannot be read).
fn mtcs(cfg: &PtConfig, bytes: &[u8]) -> usize {
    let Ok(mut dec) = PacketDecoder::new(cfg, bytes) else {
        return 0;
    };
    if dec.sync_forward().is_err() {
        return 0;
    }
    let mut n = 0;
    while let Ok(p) = dec.next_packet() {
        n += usize::from(matches!(p, Packet::Mtc(_)));
    }
    n
}

/// A PSB and its PSB+.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Psb {
    /// Stream offset of the PSB.
    pub offset: u64,
    /// Stream offset just after its PSBEND.
    pub header_end: u64,
    /// The TSC the PSB+ gives.
    pub tsc: Option<u64>,
    /// Whether the PSB+ holds a MODE.Exec, a FUP; whether an OVF ends it.
    pub mode: bool,
    pub fup: bool,
    pub ovf: bool,
}

/// Bytes searched at once for a PSB at most (windows overlap by
/// [`PSB_PLUS_MAX`]).
const SEARCH_WINDOW: u64 = 1 << 20;

/// Bytes searched first: the window doubles from here up to
/// [`SEARCH_WINDOW`]. PSBs come every few KiB, and a window that straddles
/// two AUXTRACE records is copied: with 1 MiB windows from the start, each
/// 32 KiB chunk's cut copied 1 MiB (`perf record` of `ptdec report -j1`:
/// 2.7% of its CPU in that copy on the bench's interp trace).
const FIRST_SEARCH_WINDOW: u64 = 16 << 10;

/// The most bytes a PSB+ (PSB through PSBEND) may take: PSB 16, TSC 8,
/// TMA 7, CBR 4, MODE 2+2, FUP 7, VMCS 7, PIP 8, PSBEND 2, plus padding.
const PSB_PLUS_MAX: u64 = 4096;

/// The first PSB at or after `from` whose PSB+ ends with a PSBEND and
/// that gives the mode of the code after it ([`mode_given`]).
///
/// After a PSB whose PSB+ cannot be read, the search goes on from the
/// byte after that PSB, not from where reading its PSB+ stopped: garbage
/// read as packets may run into (and past) the next PSB, which must still
/// be found. The chunk decoder passes over such PSBs the same way
/// ([`next_psb`]).
pub(super) fn psb_at_or_after(stream: &Stream<'_>, cfg: &PtConfig, from: u64) -> Option<Psb> {
    let mut lo = from;
    let mut window = FIRST_SEARCH_WINDOW;
    while lo < stream.len() {
        let hi = lo.saturating_add(window).min(stream.len());
        window = (window * 2).min(SEARCH_WINDOW);
        let bytes = stream.bytes(lo..hi);
        let mut found_before = None;
        let mut start = 0;
        while let Some(at) = next_psb(cfg, &bytes, start) {
            let mut dec = PacketDecoder::new(cfg, &bytes[at as usize..]).ok()?;
            let cut_short = hi < stream.len();
            if let Some(p) = psb_plus(&mut dec, lo + at) {
                match mode_given(&mut dec, &p) {
                    Some(true) => return Some(p),
                    Some(false) => {}
                    None if !cut_short => return Some(p),
                    // Undecided at the window's end: look again from
                    // that PSB, in a larger window.
                    None => {
                        found_before = Some(lo + at);
                        break;
                    }
                }
            } else if cut_short && at + PSB_PLUS_MAX > hi - lo {
                // A PSB+ cut by the window's end: look again from that PSB.
                found_before = Some(lo + at);
                break;
            }
            start = at + 1;
        }
        lo = match found_before {
            // From that PSB; from the same place only in a larger window
            // (a PSB at the window's start whose mode comes past its end).
            Some(at) if at > lo || (at == lo && hi - lo < SEARCH_WINDOW) => at,
            _ if hi >= stream.len() => return None,
            // Keep the window's last bytes: a PSB may straddle its end.
            _ => (hi - 16).max(lo + 1),
        };
    }
    None
}

/// The most bytes from a PSB that [`mode_given`] reads to decide.
const MODE_SEARCH_MAX: u64 = 64 << 10;

/// Whether a chunk may start at `psb`, whose PSB+ `dec` has just read:
/// whether the code the trace goes on with is
/// given its execution mode (MODE.Exec) before any code runs, so that a
/// decode synchronized there knows what one that ran on into it from
/// earlier knows. libipt's decoders keep the mode across a PSB+ that
/// holds no MODE.Exec, and reset it to unknown at a sync: a chunk that
/// started at a PSB+ whose FUP comes without MODE.Exec would decode its
/// first code in no mode, where a larger chunk decodes it in the mode
/// before, and the output would depend on the chunk size. Hardware sends
/// MODE.Exec in every PSB+ with a FUP, and before every TIP.PGE (the
/// project's real recordings do so; a PSB+ of disabled tracing has
/// neither), so only a corrupt trace lacks it.
///
/// `Some(true)`: this PSB+ holds a MODE.Exec, or after it one comes before
/// tracing resumes (a TIP.PGE, the FUP after an overflow, or a PSB+ with
/// a FUP and no MODE.Exec of its own: FUPs of disabled tracing bind to
/// events, as PTWRITE's do without branch tracing, and need no mode); or
/// a packet error comes first (decoding synchronizes again after it, at
/// any chunk size). `Some(false)`: code
/// comes first, or [`MODE_SEARCH_MAX`] bytes pass undecided. `None`: the
/// bytes end first.
fn mode_given(dec: &mut PacketDecoder<'_>, psb: &Psb) -> Option<bool> {
    if psb.mode {
        return Some(true);
    }
    if psb.fup {
        return Some(false);
    }
    let (mut in_psb, mut psb_fup, mut after_ovf) = (false, false, psb.ovf);
    loop {
        if dec.offset().ok()? > MODE_SEARCH_MAX {
            return Some(false);
        }
        let p = match dec.next_packet() {
            Ok(p) => p,
            Err(e) if e == ipt::Error::EOS => return None,
            Err(_) => return Some(true),
        };
        match p {
            Packet::ModeExec { .. } => return Some(true),
            Packet::Psb => (in_psb, psb_fup) = (true, false),
            Packet::Psbend if in_psb => {
                if psb_fup {
                    return Some(false);
                }
                in_psb = false;
            }
            Packet::Fup(..) if in_psb => psb_fup = true,
            // Tracing resumes: at a TIP.PGE, or at the FUP after an
            // overflow. Other FUPs of disabled tracing bind to events
            // (PTWRITE's without branch tracing), which need no mode.
            Packet::TipPge(..) => return Some(false),
            Packet::Fup(..) if after_ovf => return Some(false),
            Packet::Ovf => after_ovf = true,
            _ => {}
        }
    }
}

/// Where the first cut from `start` looks for its end from (before one
/// past it): `first`, the first PSB at or after `start` that a chunk may
/// start at, where no PSB at all lies before it (the bytes after lost
/// data, which a decoder starting at `start` skips to `first`); else
/// `start`. Both [`cut`] and [`cuts_within`] cut so.
fn past_unsynced(stream: &Stream<'_>, cfg: &PtConfig, start: u64, first: u64) -> u64 {
    if first > start && no_psb_in(stream, cfg, start..first) {
        first
    } else {
        start
    }
}

/// Whether `range` of the stream holds no PSB (as [`next_psb`] finds
/// one), read a window at a time.
fn no_psb_in(stream: &Stream<'_>, cfg: &PtConfig, range: Range<u64>) -> bool {
    let mut lo = range.start;
    while lo < range.end {
        let hi = lo.saturating_add(SEARCH_WINDOW).min(range.end);
        // With the 15 bytes after the window: a PSB that starts in it.
        let bytes = stream.bytes(lo..(hi + 15).min(stream.len()));
        if next_psb(cfg, &bytes, 0).is_some_and(|at| lo + at < range.end) {
            return false;
        }
        lo = hi;
    }
    true
}

/// The offset in `bytes` of the first PSB that starts at or after `from`,
/// as libipt's packet decoder finds it.
pub(super) fn next_psb(cfg: &PtConfig, bytes: &[u8], from: u64) -> Option<u64> {
    let rest = bytes.get(usize::try_from(from).ok()?..)?;
    let mut dec = PacketDecoder::new(cfg, rest).ok()?;
    dec.sync_forward().ok()?;
    Some(from + dec.offset().ok()?)
}

/// The PSB whose PSB+ holds stream offset `at` (PSB through PSBEND), among
/// the PSBs after `after`: where a decode error inside a PSB+ read as a
/// status update resynchronizes, as a chunk cut there starts (libipt's
/// sync_forward would search on past it).
pub(super) fn psb_holding(cfg: &PtConfig, bytes: &[u8], after: u64, at: u64) -> Option<u64> {
    let mut p = next_psb(cfg, bytes, after)?;
    if p > at {
        return None;
    }
    while let Some(n) = next_psb(cfg, bytes, p + 1).filter(|&n| n <= at) {
        p = n;
    }
    let rest = bytes.get(usize::try_from(p).ok()?..)?;
    let mut dec = PacketDecoder::new(cfg, rest).ok()?;
    let psb = psb_plus(&mut dec, p)?;
    (at < psb.header_end).then_some(p)
}

/// Reads the PSB+ at the start of the decoder's bytes (`at` in the
/// stream; the decoder is new): `None` when it does not end with a PSBEND (or an OVF) within
/// [`PSB_PLUS_MAX`] bytes, or holds a packet libipt does not allow in a
/// PSB+ (its `pt_evt_decode_psb` refuses it: a bad context), so that
/// chunks start only at PSBs libipt's decoder can synchronize at.
fn psb_plus(dec: &mut PacketDecoder<'_>, at: u64) -> Option<Psb> {
    use ipt::ffi::{ppt_mnt, ppt_pip, ppt_vmcs};
    dec.sync_forward().ok()?;
    if dec.offset().ok()? != 0 || dec.next_packet().ok()? != Packet::Psb {
        return None;
    }
    let (mut tsc, mut mode, mut fup) = (None, false, false);
    loop {
        match dec.next_packet().ok()? {
            p @ (Packet::Psbend | Packet::Ovf) => {
                return Some(Psb {
                    offset: at,
                    header_end: at + dec.offset().ok()?,
                    tsc,
                    mode,
                    fup,
                    ovf: p == Packet::Ovf,
                });
            }
            Packet::Tsc(t) => tsc = Some(t),
            Packet::Fup(..) => fup = true,
            Packet::ModeExec { .. } => mode = true,
            Packet::Pad
            | Packet::ModeTsx
            | Packet::Tma { .. }
            | Packet::Cbr(_)
            | Packet::Mtc(_)
            | Packet::Cyc(_) => {}
            Packet::Other(t) if [ppt_pip, ppt_vmcs, ppt_mnt].contains(&t) => {}
            _ => return None,
        }
        if dec.offset().ok()? > PSB_PLUS_MAX {
            return None;
        }
    }
}

/// Bytes after the next chunk's PSB+ that a chunk's decoder may read:
/// libipt reads packets ahead of the instruction it is at (to bind events
/// to IPs), and without them ends the chunk's last block with an
/// end-of-stream error before it reaches the next chunk's PSB+. The chunk
/// decoder stops at that PSB+'s status update, so the bytes after it are
/// read, not decoded.
pub(super) const LOOKAHEAD: u64 = 16 << 10;

/// How far around a page the kernel maps others when one is read (its
/// fault-around is 64 KiB).
const AROUND: u64 = 64 << 10;

/// A chunk of a segment: the stream offsets it covers, and what it decodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Cut {
    /// The chunk proper: from its PSB (or the segment's start) to the next
    /// chunk's PSB.
    pub range: Range<u64>,
    /// What the decoder reads: the chunk, the next chunk's PSB+ and
    /// [`LOOKAHEAD`] bytes after it.
    pub decode: Range<u64>,
    /// The TSC of its PSB+ (for the first chunk: of the segment's first PSB).
    pub tsc: Option<u64>,
}

/// Cuts `stream` at the first PSB at or after each multiple of
/// `chunk_bytes`. `release` gets the bytes each search read, to drop them
/// from resident memory (the kernel maps 64 KiB around every page read,
/// so a search at every cut of a GB trace would otherwise leave hundreds
/// of MB of it resident).
///
/// A time window narrows the work to the chunks it needs, at the same cuts
/// (the first PSB at or after a multiple of the chunk size): `window.after`
/// says whether a TSC lies wholly before the window (the cuts start at the
/// last multiple whose PSB does, found by binary search), `window.past`
/// whether it lies after it (cutting stops at the first such PSB). Chunks
/// not cut are counted in the second value returned.
pub(super) fn cut(
    stream: &Stream<'_>,
    cfg: &PtConfig,
    chunk_bytes: u64,
    window: &Window<'_>,
    release: &dyn Fn(&[u8]),
) -> (Vec<Cut>, u64) {
    let chunk_bytes = chunk_bytes.max(1);
    let len = stream.len();
    let find = |pos: u64| {
        let found = psb_at_or_after(stream, cfg, pos);
        let read_to = found.map_or(len, |p| p.header_end);
        stream.for_each_piece(pos.saturating_sub(AROUND)..read_to + AROUND, release);
        found
    };
    // The last multiple k of the chunk size whose PSB lies before the
    // window (monotone in k: PSB times rise through a segment).
    let grid = len.div_ceil(chunk_bytes);
    let before = |k: u64| {
        find(k * chunk_bytes)
            .and_then(|p| p.tsc)
            .is_some_and(|t| (window.before)(t))
    };
    let k0 = if window.bounded && grid > 1 && before(1) {
        let (mut lo, mut hi) = (1, grid);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if before(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    } else {
        0
    };
    // A segment with no PSB before the first a chunk may start at (its
    // bytes follow lost data): its first chunk's decoder synchronizes at
    // that PSB, so the next chunk starts at a later one. A chunk from the
    // segment's start to that PSB would decode nothing, and the loss it
    // starts after would be lost with it (the gap goes with a chunk's
    // first run).
    let mut first_psb = 0;
    let (mut start, mut tsc, mut pos) = if k0 == 0 {
        let p = find(0);
        first_psb = past_unsynced(stream, cfg, 0, p.map_or(0, |p| p.offset));
        stream.for_each_piece(0..first_psb, release);
        (0, p.and_then(|p| p.tsc), chunk_bytes)
    } else {
        match find(k0 * chunk_bytes) {
            Some(p) => (p.offset, p.tsc, (p.offset / chunk_bytes + 1) * chunk_bytes),
            None => (0, None, chunk_bytes),
        }
    };
    let skipped_before = if start == 0 { 0 } else { k0 };
    let mut psbs: Vec<Psb> = Vec::new();
    let mut past = false;
    while pos < len {
        let Some(p) = find(pos) else {
            break;
        };
        if p.offset > start.max(first_psb) {
            psbs.push(p);
        }
        pos = (p.offset / chunk_bytes + 1) * chunk_bytes;
        if p.tsc.is_some_and(|t| (window.past)(t)) {
            past = true;
            break;
        }
    }
    let skipped_after = if past {
        (len - pos.min(len)).div_ceil(chunk_bytes)
    } else {
        0
    };
    let mut cuts = Vec::with_capacity(psbs.len() + 1);
    for p in &psbs {
        cuts.push(Cut {
            range: start..p.offset,
            decode: start..(p.header_end + LOOKAHEAD).min(len),
            tsc,
        });
        start = p.offset;
        tsc = p.tsc.or(tsc);
    }
    if !past {
        cuts.push(Cut {
            range: start..len,
            decode: start..len,
            tsc,
        });
    }
    (cuts, skipped_before + skipped_after)
}

/// The cuts of one chunk, `range`, at every PSB in it that a chunk may
/// start at ([`psb_at_or_after`]), found one at a time: what [`cut`]
/// makes of those bytes at a chunk size of one byte, but that the last
/// cut's decoder reads to `decode_end` (the chunk's own end of reading),
/// and that each cut's `tsc` is its own PSB+'s (none for the first: the
/// chunk's is known).
pub(super) fn cuts_within<'s, 't>(
    stream: &'s Stream<'t>,
    cfg: PtConfig,
    range: Range<u64>,
    decode_end: u64,
) -> CutsWithin<'s, 't> {
    // As `cut` does, the first cut of a chunk with no PSB before the first
    // a chunk may start at (a segment's first, after lost data) reaches
    // past that PSB.
    let first = psb_at_or_after(stream, &cfg, range.start).map_or(range.start, |p| p.offset);
    let first_from = past_unsynced(stream, &cfg, range.start, first) + 1;
    CutsWithin {
        stream,
        cfg,
        end: range.end,
        decode_end,
        next: Some((range.start, None)),
        first_from: Some(first_from),
    }
}

/// The iterator [`cuts_within`] returns.
#[derive(Clone)]
pub(super) struct CutsWithin<'s, 't> {
    stream: &'s Stream<'t>,
    cfg: PtConfig,
    end: u64,
    decode_end: u64,
    /// The next cut's start and TSC.
    next: Option<(u64, Option<u64>)>,
    /// Where the first cut's end is looked for (after its start, or after
    /// the first PSB where it does not start at one).
    first_from: Option<u64>,
}

impl Iterator for CutsWithin<'_, '_> {
    type Item = Cut;

    fn next(&mut self) -> Option<Cut> {
        let (start, tsc) = self.next.take()?;
        let from = self.first_from.take().unwrap_or(start + 1);
        let psb = psb_at_or_after(self.stream, &self.cfg, from).filter(|p| p.offset < self.end);
        Some(match psb {
            Some(p) => {
                self.next = Some((p.offset, p.tsc));
                Cut {
                    range: start..p.offset,
                    decode: start..(p.header_end + LOOKAHEAD).min(self.stream.len()),
                    tsc,
                }
            }
            None => Cut {
                range: start..self.end,
                decode: start..self.decode_end,
                tsc,
            },
        })
    }
}

/// A time window for [`cut`], as tests on a PSB's TSC.
pub(super) struct Window<'a> {
    /// A window was given (else every chunk is cut).
    pub bounded: bool,
    /// The TSC lies before the window (with slack).
    pub before: &'a dyn Fn(u64) -> bool,
    /// The TSC lies after the window (with slack).
    pub past: &'a dyn Fn(u64) -> bool,
}

#[cfg(test)]
impl Window<'_> {
    /// No window.
    pub const ALL: Window<'static> = Window {
        bounded: false,
        before: &|_| false,
        past: &|_| false,
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipt::{Compression, Encoder};

    const MODE64: Packet = Packet::ModeExec {
        csl: true,
        csd: false,
    };

    /// PSB+ with a TSC, a MODE.Exec and a FUP, then `n` TNT packets,
    /// `times` over.
    fn trace(times: usize, n: usize) -> (Vec<u8>, Vec<u64>) {
        trace_mtc(times, n, 0)
    }

    /// [`trace`] with `mtcs` MTC packets among each stretch's TNTs, the
    /// first before the first TNT.
    fn trace_mtc(times: usize, n: usize, mtcs: usize) -> (Vec<u8>, Vec<u64>) {
        let mut enc = Encoder::new().unwrap();
        let mut out = Vec::new();
        let mut psbs = Vec::new();
        for i in 0..times {
            psbs.push(out.len() as u64);
            for p in [
                Packet::Psb,
                Packet::Tsc(1000 * (i as u64 + 1)),
                MODE64,
                Packet::Fup(0x1000, Compression::Full),
                Packet::Psbend,
            ] {
                out.extend_from_slice(enc.encode(p).unwrap());
            }
            for k in 0..n {
                if mtcs > 0 && (k * mtcs) % n == 0 {
                    out.extend_from_slice(enc.encode(Packet::Mtc(k as u8)).unwrap());
                }
                out.extend_from_slice(
                    enc.encode(Packet::Tnt8 {
                        payload: 0b1010,
                        bits: 4,
                    })
                    .unwrap(),
                );
            }
        }
        (out, psbs)
    }

    #[test]
    fn cuts_at_the_first_psb_after_each_multiple_and_tile_the_stream() {
        let (bytes, psbs) = trace(10, 300);
        let cfg = PtConfig::default();
        for pieces in [
            vec![&bytes[..]],
            vec![&bytes[..777], &bytes[777..1500], &bytes[1500..]],
        ] {
            let s = Stream::new(pieces);
            let (cuts, _) = cut(&s, &cfg, 250, &Window::ALL, &|_| {});
            let starts: Vec<u64> = cuts.iter().map(|c| c.range.start).collect();
            let mut want = vec![0];
            let mut pos = 250;
            for &p in &psbs[1..] {
                if p >= pos {
                    want.push(p);
                    pos = (p / 250 + 1) * 250;
                }
            }
            assert_eq!(starts, want);
            for w in cuts.windows(2) {
                assert_eq!(w[0].range.end, w[1].range.start);
                // The decode range takes the next PSB+ (PSB 16, TSC 8,
                // MODE 2, FUP with a full IP 9, PSBEND 2) and the
                // lookahead.
                assert_eq!(
                    w[0].decode.end,
                    (w[1].range.start + 16 + 8 + 2 + 9 + 2 + LOOKAHEAD).min(bytes.len() as u64)
                );
            }
            assert_eq!(cuts.last().unwrap().range.end, bytes.len() as u64);
            let tscs: Vec<u64> = cuts.iter().map(|c| c.tsc.unwrap()).collect();
            assert!(tscs.windows(2).all(|w| w[0] < w[1]), "{tscs:?}");
        }
    }

    /// A warm-up starts at the last PSB before the chunk within its
    /// bound, in one piece or across pieces, else takes the whole bound.
    #[test]
    fn a_warm_up_starts_at_the_last_psb_before_the_chunk() {
        let (bytes, psbs) = trace_mtc(10, 300, 2);
        let cfg = PtConfig::default();
        for pieces in [
            vec![&bytes[..]],
            vec![
                &bytes[..psbs[3] as usize + 5],
                &bytes[psbs[3] as usize + 5..],
            ],
        ] {
            let s = Stream::new(pieces);
            for i in 1..psbs.len() {
                let start = psbs[i];
                let len = start - psbs[i - 1];
                assert_eq!(warmup_len(&cfg, &s, start, 1 << 20), len, "{i}");
                assert_eq!(warmup_len(&cfg, &s, start, len), len, "{i}");
                // The PSB before lies beyond the bound: all of it.
                assert_eq!(warmup_len(&cfg, &s, start, len - 1), len - 1, "{i}");
                // Mid-interval, the PSB before the offset.
                assert_eq!(warmup_len(&cfg, &s, start - 7, 1 << 20), len - 7, "{i}");
            }
            assert_eq!(warmup_len(&cfg, &s, 0, 1 << 20), 0);
        }
        // One MTC a stretch: two stretches, or as many as there are.
        let (bytes, psbs) = trace_mtc(10, 300, 1);
        let s = Stream::new(vec![&bytes[..]]);
        assert_eq!(warmup_len(&cfg, &s, psbs[1], 1 << 20), psbs[1]);
        for i in 2..psbs.len() {
            assert_eq!(
                warmup_len(&cfg, &s, psbs[i], 1 << 20),
                psbs[i] - psbs[i - 2],
                "{i}"
            );
            // Bounded: the earliest PSB within.
            assert_eq!(
                warmup_len(&cfg, &s, psbs[i], psbs[i] - psbs[i - 1]),
                psbs[i] - psbs[i - 1]
            );
        }
        // No MTC at all: one stretch.
        let (bytes, psbs) = trace(10, 300);
        let s = Stream::new(vec![&bytes[..]]);
        for i in 1..psbs.len() {
            assert_eq!(
                warmup_len(&cfg, &s, psbs[i], 1 << 20),
                psbs[i] - psbs[i - 1],
                "{i}"
            );
        }
        // Two MTCs in the first stretch only, then none: back to the
        // first PSB within WARMUP_PSBS, one stretch beyond them.
        let (mut bytes, _) = trace_mtc(1, 10, 2);
        let (rest, mut psbs) = trace(19, 10);
        psbs.iter_mut().for_each(|p| *p += bytes.len() as u64);
        psbs.insert(0, 0);
        bytes.extend_from_slice(&rest);
        let s = Stream::new(vec![&bytes[..]]);
        for i in 1..psbs.len() {
            let want = match i <= WARMUP_PSBS {
                true => psbs[i],
                false => psbs[i] - psbs[i - 1],
            };
            assert_eq!(warmup_len(&cfg, &s, psbs[i], 1 << 20), want, "{i}");
        }
    }

    /// A chunk cut within at every PSB is what the whole stream cut at
    /// one byte holds of it, but for the last cut's decode range, which
    /// is the chunk's, and the first cut's TSC, which is not given.
    #[test]
    fn a_chunk_cut_within_is_the_stream_cut_at_one_byte() {
        let (bytes, _) = trace(10, 300);
        let cfg = PtConfig::default();
        let s = Stream::new(vec![&bytes[..777], &bytes[777..]]);
        let (fine, _) = cut(&s, &cfg, 1, &Window::ALL, &|_| {});
        let (chunks, _) = cut(&s, &cfg, 1000, &Window::ALL, &|_| {});
        assert!(chunks.len() > 1 && fine.len() > chunks.len());
        for c in &chunks {
            let within: Vec<Cut> = cuts_within(&s, cfg, c.range.clone(), c.decode.end).collect();
            let want: Vec<&Cut> = fine
                .iter()
                .filter(|f| c.range.contains(&f.range.start))
                .collect();
            assert_eq!(within.len(), want.len());
            for (k, (a, b)) in within.iter().zip(&want).enumerate() {
                assert_eq!(a.range, b.range);
                assert_eq!(a.tsc, if k == 0 { None } else { b.tsc });
                let last = k + 1 == within.len();
                assert_eq!(
                    a.decode,
                    if last {
                        a.range.start..c.decode.end
                    } else {
                        b.decode.clone()
                    }
                );
            }
        }
    }

    /// Where libipt cannot synchronize, no chunk starts: a PSB+ holding a
    /// packet refused there (a TNT, another PSB) is not one, and the
    /// search goes on at the next PSB even when reading that PSB+ ran
    /// over it.
    #[test]
    fn only_psbs_libipt_can_sync_at_are_cuts() {
        let mut enc = Encoder::new().unwrap();
        let mut bytes = Vec::new();
        let mut put = |bytes: &mut Vec<u8>, pkts: &[Packet]| {
            for &p in pkts {
                bytes.extend_from_slice(enc.encode(p).unwrap());
            }
        };
        let tnt = Packet::Tnt8 {
            payload: 0b10,
            bits: 2,
        };
        // A TNT in a PSB+; a PSB+ cut short by the next PSB; a good one.
        put(&mut bytes, &[Packet::Psb, tnt, Packet::Psbend]);
        put(&mut bytes, &[Packet::Psb, Packet::Tsc(7)]);
        let good = bytes.len() as u64;
        put(
            &mut bytes,
            &[
                Packet::Psb,
                Packet::Tsc(8),
                MODE64,
                Packet::Fup(0x1000, Compression::Full),
                Packet::Psbend,
                tnt,
            ],
        );
        let s = Stream::new(vec![&bytes[..]]);
        let p = psb_at_or_after(&s, &PtConfig::default(), 0).unwrap();
        assert_eq!((p.offset, p.tsc), (good, Some(8)));
        assert_eq!(p.header_end, good + 16 + 8 + 2 + 9 + 2);
    }

    /// A chunk starts only where the trace gives the mode of the code that
    /// comes next ([`mode_given`]): not at a PSB+ whose FUP comes without
    /// MODE.Exec, nor at one of disabled tracing whose TIP.PGE comes
    /// without one; at one of disabled tracing whose TIP.PGE has its
    /// MODE.Exec, also past another such PSB+ on the way.
    #[test]
    fn chunks_start_only_where_the_mode_is_given() {
        let fup = Packet::Fup(0x1000, Compression::Full);
        let pge = Packet::TipPge(0x1000, Compression::Full);
        let tnt = Packet::Tnt8 {
            payload: 0b10,
            bits: 2,
        };
        let ovf = Packet::Ovf;
        let cases: [(&[Packet], bool); 9] = [
            (&[Packet::Psb, fup, Packet::Psbend, tnt], false),
            (&[Packet::Psb, fup, MODE64, Packet::Psbend, tnt], true),
            (&[Packet::Psb, Packet::Psbend, tnt, pge, tnt], false),
            (&[Packet::Psb, Packet::Psbend, MODE64, pge, tnt], true),
            (
                &[
                    Packet::Psb,
                    Packet::Psbend,
                    Packet::Psb,
                    Packet::Psbend,
                    MODE64,
                    pge,
                ],
                true,
            ),
            (
                &[
                    Packet::Psb,
                    Packet::Psbend,
                    Packet::Psb,
                    fup,
                    Packet::Psbend,
                    tnt,
                ],
                false,
            ),
            // A FUP of disabled tracing (a PTWRITE's): no code.
            (&[Packet::Psb, Packet::Psbend, fup, tnt], true),
            // The FUP after an overflow resumes tracing, also after one
            // that ends the PSB+.
            (&[Packet::Psb, Packet::Psbend, ovf, fup, tnt], false),
            (&[Packet::Psb, ovf, fup, tnt], false),
        ];
        for (i, (pkts, cut_here)) in cases.iter().enumerate() {
            let mut enc = Encoder::new().unwrap();
            let mut bytes = Vec::new();
            for &p in pkts.iter() {
                bytes.extend_from_slice(enc.encode(p).unwrap());
            }
            // Then a PSB+ that gives its mode.
            let last = bytes.len() as u64;
            for p in [Packet::Psb, MODE64, fup, Packet::Psbend, tnt] {
                bytes.extend_from_slice(enc.encode(p).unwrap());
            }
            let s = Stream::new(vec![&bytes[..]]);
            let p = psb_at_or_after(&s, &PtConfig::default(), 0).unwrap();
            let want = if *cut_here { 0 } else { last };
            assert_eq!(p.offset, want, "case {i}");
        }
        // A PSB+ of disabled tracing at the search's start whose MODE.Exec
        // comes past the first window (16 KiB): looked for in a larger
        // one, not passed over.
        let mut enc = Encoder::new().unwrap();
        let mut bytes = Vec::new();
        for p in [Packet::Psb, Packet::Psbend] {
            bytes.extend_from_slice(enc.encode(p).unwrap());
        }
        bytes.resize(bytes.len() + 20_000, 0);
        for p in [MODE64, pge, tnt, Packet::Psb, MODE64, fup, Packet::Psbend] {
            bytes.extend_from_slice(enc.encode(p).unwrap());
        }
        bytes.resize(bytes.len() + 40_000, 0);
        let s = Stream::new(vec![&bytes[..]]);
        let p = psb_at_or_after(&s, &PtConfig::default(), 0).unwrap();
        assert_eq!(p.offset, 0);
    }

    #[test]
    fn psbs_are_found_past_the_growing_windows_wherever_they_lie() {
        // A PSB+ after `pad` bytes of padding, at every offset around the
        // ends of the first windows (16 KiB, then 32 KiB more, ...) and far
        // past them, in one piece and across pieces.
        let mut enc = Encoder::new().unwrap();
        let mut psb = Vec::new();
        for p in [
            Packet::Psb,
            Packet::Tsc(5),
            MODE64,
            Packet::Fup(0x1000, Compression::Full),
            Packet::Psbend,
        ] {
            psb.extend_from_slice(enc.encode(p).unwrap());
        }
        let w = FIRST_SEARCH_WINDOW as usize;
        let mut pads: Vec<usize> = (w - 40..w + 8).chain(3 * w - 40..3 * w + 8).collect();
        pads.extend([7 * w - 20, 5 << 20]);
        for pad in pads {
            let mut bytes = vec![0u8; pad];
            bytes.extend_from_slice(&psb);
            bytes.extend_from_slice(&[0u8; 64]);
            for pieces in [vec![&bytes[..]], bytes.chunks(w / 3 + 1).collect()] {
                let s = Stream::new(pieces);
                let p = psb_at_or_after(&s, &PtConfig::default(), 0);
                assert_eq!(
                    p.map(|p| (p.offset, p.tsc)),
                    Some((pad as u64, Some(5))),
                    "pad {pad}"
                );
            }
        }
    }

    #[test]
    fn a_stream_without_psb_is_one_chunk_and_bytes_borrow_within_a_piece() {
        let junk = vec![0u8; 5000];
        let s = Stream::new(vec![&junk[..2000], &junk[2000..]]);
        let (cuts, _) = cut(&s, &PtConfig::default(), 100, &Window::ALL, &|_| {});
        assert_eq!(cuts.len(), 1);
        assert_eq!(cuts[0].range, 0..5000);
        assert!(matches!(s.bytes(10..1990), Cow::Borrowed(_)));
        assert!(matches!(s.bytes(1990..2010), Cow::Owned(_)));
        assert_eq!(s.bytes(1990..2010).len(), 20);
        assert_eq!(s.bytes(4990..9000).len(), 10);
    }
}
