//! One concern of the decode workers: where functions hold, asked of the
//! stacks' resolver for each jump (`runs`'s quiet jumps) and kept.

use crate::model::slices::{PlaceAndSpan, PlaceSpan, SpanOf};

/// One worker's way to tell quiet jumps: the resolver's
/// answers, asked through [`SpanOf`], and kept: the spans it gave by
/// address, and the answers at addresses no span holds (functions'
/// entries: tail calls, PLT stubs) with the times they hold. A pure cache:
/// each holds only where and when the resolver answers so, whatever asked
/// before.
pub(super) struct JumpPlaces<'s> {
    ask: SpanOf<'s>,
    /// By `addr >> 4` modulo the slots: a pid and a span of its.
    spans: Box<[(u32, PlaceSpan); PLACE_SLOTS]>,
    /// By `addr` modulo the slots: an address's answer where no span
    /// holds it.
    points: Box<[Point; PLACE_SLOTS]>,
}

/// See [`JumpPlaces::points`].
#[derive(Clone, Copy, Default)]
struct Point {
    pid: u32,
    addr: u64,
    since: u64,
    until: u64,
    place: (bool, Option<u64>),
}

/// The spans and answers a worker keeps ([`JumpPlaces`]).
const PLACE_SLOTS: usize = 128;

/// Where [`JumpPlaces`] keeps a span of `addr`, and an answer at it.
fn slots(addr: u64) -> (usize, usize) {
    (
        (addr >> 4) as usize % PLACE_SLOTS,
        addr as usize % PLACE_SLOTS,
    )
}

impl<'s> JumpPlaces<'s> {
    pub fn new(ask: SpanOf<'s>) -> Self {
        JumpPlaces {
            ask,
            spans: Box::new([(0, PlaceSpan::default()); PLACE_SLOTS]),
            points: Box::new([Point::default(); PLACE_SLOTS]),
        }
    }

    /// What `Resolver::place_and_span` answers for `addr` in process
    /// `pid` at `time`; the span, when there is one, holds `addr`.
    #[inline(always)]
    pub fn place(&mut self, pid: u32, addr: u64, time: u64) -> PlaceAndSpan {
        let (slot, pslot) = slots(addr);
        let (p, span) = self.spans[slot];
        if p == pid && span.holds(addr, time) {
            return ((false, Some(span.func)), Some(span));
        }
        let pt = self.points[pslot];
        if pt.pid == pid && pt.addr == addr && pt.since <= time && time < pt.until {
            return (pt.place, None);
        }
        self.ask_and_keep(pid, addr, time)
    }

    /// [`JumpPlaces::place`] where nothing kept answers.
    #[inline(never)]
    fn ask_and_keep(&mut self, pid: u32, addr: u64, time: u64) -> PlaceAndSpan {
        let (slot, pslot) = slots(addr);
        let ((place, span), since, until) = (self.ask)(pid, addr, time);
        match span.filter(|s| s.holds(addr, time)) {
            Some(s) => {
                self.spans[slot] = (pid, s);
                (place, Some(s))
            }
            None => {
                if since <= time && time < until {
                    self.points[pslot] = Point {
                        pid,
                        addr,
                        since,
                        until,
                        place,
                    };
                }
                (place, None)
            }
        }
    }
}
