//! One concern of the chunk decoder (`chunk`): its clock. The decoder's
//! TSC as blocks and events pass, perf time from it (converted only when
//! the TSC moves: timing packets are far sparser than blocks), the core
//! cycles between TSC values scaled by the core:bus ratio (`--cycles`
//! traces), and the span of TSC values the chunk saw.

/// See the module doc.
#[derive(Debug, Clone, Copy)]
pub(super) struct Clock {
    /// The decoder's TSC (0 before the first).
    pub tsc: u64,
    /// Perf time now.
    pub time: u64,
    /// The core:bus ratio of the last CBR (0: none yet).
    pub cbr: u32,
    /// Cycles are counted ([`Clock::set_tsc`]'s answer).
    cycles: bool,
    /// The TSC cycles were last counted at.
    last_cycle_tsc: Option<u64>,
    /// Cycles do not count, though the TSC they count from moves: the
    /// chunk walks into the next one, which counts them
    /// (`ChunkDecoder::at_next_chunk`).
    pub cycles_wait: bool,
    /// The least and greatest TSC seen.
    pub span: Option<(u64, u64)>,
}

impl Clock {
    /// A clock at perf time `time`, counting cycles when `cycles`.
    pub(super) fn new(time: u64, cycles: bool) -> Clock {
        Clock {
            tsc: 0,
            time,
            cbr: 0,
            cycles,
            last_cycle_tsc: None,
            cycles_wait: false,
            span: None,
        }
    }

    /// The decoder's TSC is now `tsc`: perf time follows (`perf_time`
    /// converts), and the core cycles since the last TSC are returned when
    /// cycles are counted (TSC ticks scaled by the CBR over the max
    /// non-turbo ratio `nom`, or ticks when either is unknown; none while
    /// [`Clock::cycles_wait`]). The TSC libipt answers right after a sync
    /// (0 or all-ones) is no time.
    #[inline(always)]
    pub(super) fn set_tsc(
        &mut self,
        tsc: u64,
        nom: u64,
        perf_time: impl FnOnce(u64) -> u64,
    ) -> Option<u64> {
        if tsc == 0 || tsc == u64::MAX || tsc == self.tsc {
            return None;
        }
        let mut cycles = None;
        if self.cycles {
            if let Some(prev) = self
                .last_cycle_tsc
                .filter(|&p| tsc > p && !self.cycles_wait)
            {
                let d = tsc - prev;
                cycles = Some(if self.cbr != 0 && nom != 0 {
                    d * u64::from(self.cbr) / nom
                } else {
                    d
                });
            }
            self.last_cycle_tsc = Some(tsc);
        }
        self.tsc = tsc;
        self.span = Some(
            self.span
                .map_or((tsc, tsc), |(a, b)| (a.min(tsc), b.max(tsc))),
        );
        self.time = perf_time(tsc);
        cycles
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(tsc: u64) -> u64 {
        tsc * 10 + 1
    }

    #[test]
    fn time_follows_the_tsc_and_the_span_grows() {
        let mut c = Clock::new(7, false);
        assert_eq!(c.time, 7);
        // No time yet, and the TSC right after a sync: nothing changes.
        for t in [0, u64::MAX] {
            assert_eq!(c.set_tsc(t, 0, |_| unreachable!("not converted")), None);
            assert_eq!((c.tsc, c.time, c.span), (0, 7, None));
        }
        assert_eq!(c.set_tsc(100, 0, conv), None);
        assert_eq!((c.tsc, c.time, c.span), (100, 1001, Some((100, 100))));
        // The same TSC again is not converted again.
        c.set_tsc(100, 0, |_| unreachable!("converted once"));
        // Backwards (a later chunk's warm-up, a wrapped buffer): followed.
        c.set_tsc(40, 0, conv);
        c.set_tsc(300, 0, conv);
        assert_eq!((c.tsc, c.time, c.span), (300, 3001, Some((40, 300))));
    }

    #[test]
    fn cycles_are_tsc_ticks_scaled_by_the_ratio() {
        let mut c = Clock::new(0, true);
        // The first TSC only starts the count.
        assert_eq!(c.set_tsc(1000, 24, conv), None);
        // No CBR yet: ticks.
        assert_eq!(c.set_tsc(1100, 24, conv), Some(100));
        // At CBR 36 on a max non-turbo ratio of 24: 1.5 cycles a tick.
        c.cbr = 36;
        assert_eq!(c.set_tsc(1300, 24, conv), Some(300));
        // Unknown max non-turbo ratio: ticks.
        assert_eq!(c.set_tsc(1400, 0, conv), Some(100));
        // Backwards: no cycles, and the count restarts there.
        assert_eq!(c.set_tsc(1200, 24, conv), None);
        assert_eq!(c.set_tsc(1224, 24, conv), Some(36));
        // Waiting: the count moves on without counting.
        c.cycles_wait = true;
        assert_eq!(c.set_tsc(1300, 24, conv), None);
        assert_eq!(c.set_tsc(1324, 24, conv), None);
        // Without counting: never.
        let mut c = Clock::new(0, false);
        c.set_tsc(1, 24, conv);
        assert_eq!(c.set_tsc(1000, 24, conv), None);
    }
}
