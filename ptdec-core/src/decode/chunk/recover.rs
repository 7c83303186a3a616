//! The chunk decoder's error recovery: synchronizing at the chunk's first
//! PSB and again after an error (at the next PSB whose PSB+ libipt can
//! read, or by libipt 2.2's resync at the next IP the trace tells), the
//! gap each error leaves, and the bound on code that needs no trace
//! (`NO_PROGRESS_INSNS`).

use super::*;
use crate::decode::order::{is_flow, is_no_image};

/// What a flow decoder's error says in gaps, listings and the summary:
/// libipt's message (`pt_errstr`), except for `NOMEM`. Both decoders give
/// that when their event queue is full (libipt's `pt_evq_enqueue` holds
/// 16 events waiting for the packet that gives their IP; ptflow mirrors
/// it), which only corrupt or hostile PT does (many CFE packets with
/// their IP bit and no FUP): "out of memory" sent users looking for
/// memory. (libipt could also give it when allocating a section's
/// buffer fails; with ptdec's few, mapped sections, this one is what
/// happens.)
pub(super) fn error_message(e: PtError) -> &'static str {
    if e == PtError::NOMEM {
        "too many events waiting for their IP in the trace (the decoder's event queue is \
         full): corrupt or hostile PT"
    } else {
        ipt::message(e)
    }
}

/// [`error_message`]'s short name for the summary's error counts.
pub(super) fn error_name(e: PtError) -> String {
    if e == PtError::NOMEM {
        "EventQueueFull".to_string()
    } else {
        e.name()
    }
}

impl<'i, 's, 't> ChunkDecoder<'i, 's, 't, '_> {
    /// Counts `n` instructions decoded: `Some(count)` when more than
    /// [`NO_PROGRESS_INSNS`] were decoded without libipt consuming a byte of
    /// trace (code that loops through direct jumps and calls, which need
    /// no packets: libipt would follow it forever).
    pub(super) fn check_progress(&mut self, dec: &mut impl FlowDecoder, n: u16) -> Option<u64> {
        self.progress(dec.offset().ok(), n);
        (self.stall.insns > NO_PROGRESS_INSNS).then_some(self.stall.insns)
    }

    /// [`ChunkDecoder::check_progress`] for one block of `n` instructions
    /// after which the trace offset is `off`.
    #[inline]
    pub(super) fn progress(&mut self, off: Option<u64>, n: u16) {
        self.stall_at(off);
        self.stall.insns += u64::from(n);
        self.stats.max_stall = self.stats.max_stall.max(self.stall.insns);
    }

    /// A new stall when the trace offset `off` is not the stall's: the
    /// decoder read a byte since.
    #[inline]
    pub(super) fn stall_at(&mut self, off: Option<u64>) {
        if off != self.stall.offset {
            self.stall = Stall {
                offset: off,
                insns: 0,
            };
            if self.held_ops() + self.listing_held() > self.op_bound {
                self.op_bound_passed();
            }
        }
    }

    /// The ops held passed the chunk's op bound (a decode worker's, with
    /// no flush; `decode::chunk_ops_bound`): decoding stops, as at the
    /// no-progress bound, and `run_decoder` ends there with `over_bound`
    /// (its output is thrown away: the calling thread decodes the chunk
    /// again, in pieces). Asked whenever the trace offset moves
    /// ([`ChunkDecoder::stall_at`]), not per block: between two moves at
    /// most [`NO_PROGRESS_INSNS`] instructions make ops, so at most that
    /// many more are held.
    #[cold]
    #[inline(never)]
    fn op_bound_passed(&mut self) {
        self.over_bound = true;
        self.stall.insns = NO_PROGRESS_INSNS + 1;
    }

    /// Listing items held back ([`ChunkDecoder::list`]).
    #[inline]
    fn listing_held(&self) -> usize {
        self.list_buf.as_ref().map_or(0, |b| b.borrow().len())
    }

    /// The ops held: in the finished runs and the current one.
    #[inline]
    pub(super) fn held_ops(&self) -> usize {
        self.runs_ops + self.run.as_ref().map_or(0, |r| r.ops.len())
    }

    /// Synchronizes at the next PSB after the last one whose PSB+ libipt
    /// can read; `None` at the end of the chunk's bytes, or at a PSB at or
    /// after the chunk's end (the next chunk starts there: what follows is
    /// its).
    ///
    /// PSBs whose PSB+ cannot be read (random bytes that happen to hold
    /// the pattern, a corrupt buffer) are passed over however many there
    /// are, each for the next PSB after it ([`next_psb`], as the chunk
    /// cuts are found), so the search moves on and ends within the
    /// chunk's bytes. A bound on their number would make the result depend
    /// on how many of them one chunk holds, that is, on the chunk size.
    /// The bytes before the chunk's first sync are counted
    /// (`ChunkStats::unsynced_bytes`) and the PSBs passed over
    /// (`ChunkStats::bad_psbs`).
    pub(super) fn sync(
        &mut self,
        dec: &mut impl FlowDecoder,
        last: &mut Option<u64>,
    ) -> Option<Status> {
        let first = last.is_none();
        let mut failed_at: Option<u64> = None;
        // After a PSB whose PSB+ could not be read: the next PSB after it
        // (libipt's sync_forward would search on from where reading that
        // PSB+ stopped, past any PSB the garbage ran into).
        let mut next: Option<u64> = None;
        // After a decode error inside a PSB+ that libipt read as a status
        // update (it disagreed with the decoder's state): that PSB, which
        // is a sync point of its own, as a chunk cut there would start.
        if let (false, Some(prev), Ok(err_at)) = (first, *last, dec.offset()) {
            next = psb_holding(&self.cfg, self.bytes, prev + 1, err_at);
        }
        let status = loop {
            let r = match next {
                Some(at) => dec.sync_set(at),
                None => dec.sync_forward(),
            };
            if matches!(r, Err(PtError::EOS)) {
                break None;
            }
            // The PSB libipt synchronized (or failed) at.
            let at = dec.sync_offset().ok();
            // Past the chunk: the end, but at the next chunk's PSB after
            // an error (`Edges::sync_in_reach`); the next chunk's own
            // enable is then dropped as a continuation (`order`), as at
            // any boundary.
            if !self.edges.sync_in_reach(first, at, r.is_ok()) {
                break None;
            }
            let e = match r {
                Ok(s) => {
                    if at.is_some() && at <= *last {
                        break None;
                    }
                    *last = at;
                    if !self.edges.warming {
                        // A chunk's first sync is counted as a chunk,
                        // unless it is its segment's first.
                        if !self.at_start || self.meta.first {
                            self.stats.syncs += 1;
                        } else {
                            self.stats.start_sync = true;
                        }
                    }
                    self.synced(dec);
                    break Some(s);
                }
                Err(e) => e,
            };
            // No progress (no PSB offset, or the same one again): libipt
            // cannot go on.
            let Some(bad) = at.filter(|&a| Some(a) > failed_at) else {
                break None;
            };
            failed_at = at;
            if !self.edges.warming {
                let off = self.offset(dec).unwrap_or(0);
                // libipt reads events past the PSB+ as it synchronizes:
                // the packet it stopped at is the first it does not know.
                let newer = unknown_to_libipt(self.bytes, e, Some(bad));
                self.list(ListItem::Error {
                    offset: off,
                    what: "sync error",
                    message: with_hint(e, newer, self.fell_back),
                });
                self.stats.bad_psbs += 1;
                let key = match newer {
                    Some(p) => format!("sync: {} ({p})", error_name(e)),
                    None => format!("sync: {}", error_name(e)),
                };
                *self.stats.errors.entry(key).or_default() += 1;
            }
            let Some(n) = next_psb(&self.cfg, self.bytes, bad + 1) else {
                break None;
            };
            next = Some(n);
        };
        if first && !self.edges.warming {
            self.stats.unsynced_bytes += self.edges.unsynced_bytes(status.map(|_| *last));
        }
        status
    }

    /// At the no-progress bound: the ops decoded in the stall are left
    /// out (the gap stands for them). How often the code that needs no
    /// trace ran is not known (a loop of direct jumps or calls runs until
    /// something the trace would tell stops it), so those ops are made
    /// up to the bound: a million calls of a function calling itself,
    /// or a million jumps, held until the chunk is done, for every PSB a
    /// hostile trace repeats (a few hundred bytes of PT took gigabytes).
    /// Per stall, so the output does not depend on the chunk size; the
    /// instructions stay counted. The stall's ops are those of the
    /// current run made after its first instruction (the transfer pending
    /// when it began was decoded with trace and has that stamp): found
    /// from the end, with nothing kept per block on the way (a mark of
    /// where each stall began, taken at every trace offset, cost
    /// `ptdec report` 0.3% more instructions).
    fn drop_stall_ops(&mut self) {
        let stall = self.stall.insns;
        let Some(r) = self.run.as_mut() else {
            return;
        };
        let mark = first_stall_op(r, stall);
        let start = r.insns.saturating_sub(stall);
        if r.ops.len() <= mark {
            // No op to drop; a jump left out in the stall goes.
            r.forget_tail(start);
            return;
        }
        for (i, op) in r.ops.iter().enumerate().skip(mark) {
            if i >= 2 {
                r.tally.counts.uncount(op);
            }
        }
        self.stats.no_progress_ops += (r.ops.len() - mark) as u64;
        r.truncate(mark, start);
        r.tally.n = mark;
    }

    /// State after the decoder (re)synchronized: a traced stretch starts
    /// with the next block, nothing is pending.
    pub(super) fn synced(&mut self, dec: &mut impl FlowDecoder) {
        self.release_cbr();
        self.need_enable = true;
        self.drop_pending();
        self.stall = Stall::default();
        self.update_time(dec, None);
        self.update_follow(dec);
    }

    /// Resynchronizes at the error (libipt 2.2's `pt_blk_resync`: the next
    /// event or PSB that tells the IP, often long before the next PSB), as
    /// ptxed's `--resync-on-error`; falls back to the next PSB (and goes
    /// there at once with a libipt older than 2.2). The events
    /// libipt hands out on the way are returned for the caller to apply.
    pub(super) fn resync(
        &mut self,
        dec: &mut impl FlowDecoder,
        last: &mut Option<u64>,
        events: &mut Vec<PtEvent>,
    ) -> Option<Status> {
        for _ in 0..1024 {
            match dec.resync() {
                Ok(s) => {
                    self.stats.resyncs += 1;
                    self.synced(dec);
                    self.edges.resync_in_reach(dec.offset().ok());
                    if s.ip_suppressed() {
                        self.list(ListItem::Disabled);
                    }
                    return Some(s);
                }
                Err(PtError::EVENT_IGNORED) => match dec.event() {
                    Ok((ev, _)) => events.push(ev),
                    Err(_) => break,
                },
                Err(PtError::EOS) => return None,
                // libipt < 2.2: no resync, only the next PSB.
                Err(PtError::NOT_SUPPORTED) => break,
                Err(e) => {
                    *self
                        .stats
                        .errors
                        .entry(format!("resync: {}", error_name(e)))
                        .or_default() += 1;
                    break;
                }
            }
        }
        self.sync(dec, last)
    }

    /// Records a decode error as a gap and resynchronizes: at the error
    /// (libipt errors, when the set-up says so) or at the next PSB. A
    /// segment that ends in lost data usually ends inside a packet: an
    /// error after which no PSB follows is that loss, reported by the
    /// `LostData` gap [`ChunkDecoder::finish`] adds, not as a decode error.
    pub(super) fn recover(
        &mut self,
        dec: &mut impl FlowDecoder,
        failure: Failure,
        last_sync: &mut Option<u64>,
    ) -> Option<Status> {
        // A decode error before the chunk: decode it again without the
        // warm-up (`decode_fast`). Past the chunk's op bound: the calling
        // thread decodes it again, in pieces (`op_bound_passed`).
        if self.edges.warming || self.over_bound {
            return None;
        }
        let off = self.offset(dec).unwrap_or(0);
        self.drop_pending();
        if let Failure::NoProgress(_) = failure {
            self.drop_stall_ops();
        }
        let nomap = failure == Failure::Pt(PtError::NOMAP);
        let (kind, name, message) = match failure {
            Failure::Pt(e) if e == PtError::NOMAP => {
                let ip = dec.take_miss().unwrap_or(self.last_ip);
                self.ctx.note_missing(ip, self.clock.time);
                (
                    GapKind::NoImage { ip },
                    e.name(),
                    ipt::message(e).to_string(),
                )
            }
            Failure::Pt(e) => {
                let newer = unknown_to_libipt(self.bytes, e, dec.offset().ok());
                let message = with_hint(e, newer, self.fell_back);
                (
                    GapKind::DecodeError(Box::new(format!(
                        "{message} at offset {:#x}",
                        self.meta.aux_offset + off
                    ))),
                    match newer {
                        Some(p) => format!("{} ({p})", error_name(e)),
                        None => error_name(e),
                    },
                    message,
                )
            }
            Failure::NoProgress(n) => (
                GapKind::DecodeError(
                    format!(
                    "no progress: {n} instructions decoded without a trace byte at offset {:#x} \
                     (code that loops through direct jumps and calls: a corrupt trace or image; \
                     their calls and jumps are left out)",
                    self.meta.aux_offset + off
                )
                    .into(),
                ),
                "NoProgress".to_string(),
                "no progress".to_string(),
            ),
        };
        self.list(ListItem::Error {
            offset: off,
            what: "error",
            message,
        });
        let at = self.stamp();
        // Resynchronizing at the same offset twice would not progress:
        // then (and for the no-progress bound) skip to the next PSB.
        let again = self.last_error_offset == Some(off);
        self.last_error_offset = Some(off);
        // An error after the chunk's own PSB+ was read in its warm-up,
        // before its first IP: one decoder running through meets it there
        // too, makes this gap and goes on from where it recovers, never to
        // that IP (the chunk before, walking to it, left the error to this
        // chunk: `next_chunk_meets`). So the chunk starts here; still
        // waiting for its first IP, it dropped all it decoded after the
        // error (a corrupt FUP in a PSB+: a fifth of a trace gone at
        // chunks of 32K, with nothing said).
        self.edges.start_at = None;
        let mut events = Vec::new();
        let next = match failure {
            Failure::Pt(_) if self.setup().resync && !again => {
                self.resync(dec, last_sync, &mut events)
            }
            _ => self.sync(dec, last_sync),
        };
        if next.is_none() && self.meta.before_loss && !nomap {
            return None;
        }
        *self.stats.errors.entry(name).or_default() += 1;
        // Code without an image stops decoding at each resync point again:
        // one gap for the whole stretch, as long as no instruction was
        // decoded since its gap (looking back past enables, disables and
        // marks, which a resync meets on the way; `order::repeated_gap`
        // does the same across chunks). So is an error met again at the
        // same offset, after a resync that did not get past it (an enable
        // without an IP: the resync stops at it again), before the sync at
        // the next PSB: one gap, the error counted twice as for code
        // without an image (it showed twice in a hostile-input probe's
        // mutant, at every chunk size).
        let offset = self.meta.aux_offset + off;
        let repeated = (nomap || again)
            && self.run.as_ref().is_some_and(|r| {
                r.ops.iter().rev().find(|o| is_flow(o)).is_some_and(|o| {
                    o.stamp().insns == r.insns
                        && match o {
                            Op::Gap { .. } if is_no_image(o) => nomap,
                            Op::Gap { offset: g, .. } => again && !nomap && *g == offset,
                            _ => false,
                        }
                })
            });
        if !repeated {
            if nomap {
                self.stats.no_image += 1;
            }
            self.push(Op::Gap { at, kind, offset });
        }
        if next.is_some() {
            let to = self.offset(dec).unwrap_or(off);
            self.stats.skipped_bytes += to.saturating_sub(off);
        } else {
            self.stats.skipped_bytes += self.meta.len.saturating_sub(off);
        }
        for ev in &events {
            self.update_time(dec, ev.tsc());
            self.on_event(dec, ev);
        }
        next
    }
}

/// What to do about a packet libipt 2.1.2 does not know.
pub(crate) const NEWER_PACKET_HINT: &str = "--decoder fast (the default) decodes it";

/// What a packet libipt 2.1.2 does not know means where libipt decoded
/// the chunk because the fast decoder gave it up: the user has the fast
/// decoder already.
const FELL_BACK_HINT: &str = "libipt decoded this chunk as the fast decoder could not (the \
    summary's `flow decoder` line says why)";

/// The first packet from `at` of `bytes` that libipt 2.1.2 does not
/// know, when libipt answered `BAD_OPC` (`e`) for a packet only a newer
/// libipt knows and ptflow reads ([`crate::decode::newer_packet`]).
fn unknown_to_libipt(bytes: &[u8], e: PtError, at: Option<u64>) -> Option<&'static str> {
    if e != PtError::BAD_OPC {
        return None;
    }
    crate::decode::newer_packet(bytes, at?)
}

/// libipt's message for `e`, with what the packet was and what to do
/// when only a newer libipt knows it (`fell_back`: libipt decodes the
/// chunk in the fast decoder's stead, so there is nothing to do).
fn with_hint(e: PtError, newer: Option<&str>, fell_back: bool) -> String {
    let hint = match fell_back {
        true => FELL_BACK_HINT,
        false => NEWER_PACKET_HINT,
    };
    match newer {
        Some(p) => format!(
            "{}: a {p} packet (libipt 2.2), which libipt 2.1.2 does not know; {hint}",
            error_message(e)
        ),
        None => error_message(e).to_string(),
    }
}

/// Where the ops the current stall of `stall` instructions made begin in
/// run `r` (the current run; its length when there are none): those
/// stamped after the stall's first instruction, found from the end.
pub(super) fn first_stall_op(r: &Run, stall: u64) -> usize {
    let start = r.insns.saturating_sub(stall);
    r.ops.len()
        - r.ops
            .iter()
            .rev()
            .take_while(|o| o.stamp().insns > start)
            .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packet libipt 2.1.2 does not know tells the user of `--decoder
    /// libipt` to take the fast decoder, and the user of the fast decoder,
    /// whose chunk libipt decoded in its stead, why libipt is there.
    #[test]
    fn a_newer_packet_says_what_to_do_by_who_asked_for_libipt() {
        let asked = with_hint(PtError::BAD_OPC, Some("TRIG"), false);
        assert!(asked.contains("a TRIG packet (libipt 2.2)"), "{asked}");
        assert!(asked.contains(NEWER_PACKET_HINT), "{asked}");
        let fell_back = with_hint(PtError::BAD_OPC, Some("TRIG"), true);
        assert!(
            fell_back.contains("a TRIG packet (libipt 2.2)"),
            "{fell_back}"
        );
        assert!(fell_back.contains(FELL_BACK_HINT), "{fell_back}");
        assert!(!fell_back.contains("--decoder fast"), "{fell_back}");
        assert_eq!(
            with_hint(PtError::BAD_OPC, None, true),
            with_hint(PtError::BAD_OPC, None, false)
        );
    }
}
