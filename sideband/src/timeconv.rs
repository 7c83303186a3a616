//! perf time (the kernel's `perf_clock`, in ns) <-> TSC conversion.
//!
//! Intel PT timestamps are TSC values; sideband records carry perf time. The
//! decoder converts with the parameters the kernel publishes in the perf mmap
//! page (`time_shift`, `time_mult`, `time_zero`, and on some architectures
//! `time_cycles`/`time_mask`), which perf stores in PERF_RECORD_TIME_CONV and,
//! for Intel PT, in the AUXTRACE_INFO private words.
//!
//! The arithmetic is perf's own (`tools/perf/util/tsc.c`): a quotient/remainder
//! split in wrapping 64-bit arithmetic, not an exact 128-bit product. It is
//! reproduced operation for operation so that every result is bit-identical to
//! what `perf script` prints, including where the 64-bit intermediates wrap.

use crate::auxtrace_info::IntelPtInfo;
use crate::record::TimeConv;

/// Why a set of conversion parameters cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TimeConvError {
    /// `time_mult` is zero: the kernel published no TSC conversion (perf
    /// would divide by zero in `perf_time_to_tsc`).
    #[error("TSC conversion has time_mult = 0; the recording has no usable TSC <-> perf time parameters (decode without timing)")]
    ZeroMult,
    /// `time_shift` is 64 or more, which no kernel produces (the shift would be undefined in C).
    #[error("TSC conversion has time_shift = {0}, expected less than 64; the TIME_CONV or AUXTRACE_INFO record is corrupt")]
    ShiftOutOfRange(u64),
    /// The kernel did not set `cap_user_time_zero`, so `time_zero` is not meaningful.
    #[error("the recording kernel did not provide time_zero (cap_user_time_zero = 0); TSC values cannot be converted to perf time")]
    NoTimeZero,
}

/// The parameters of perf's `struct perf_tsc_conversion`, validated.
///
/// Build one with [`TscConversion::from_time_conv`] or
/// [`TscConversion::from_intel_pt`]; convert with
/// [`TscConversion::tsc_to_perf_time`] and its inverse
/// [`TscConversion::perf_time_to_tsc`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TscConversion {
    time_shift: u32,
    time_mult: u64,
    time_zero: u64,
    time_cycles: u64,
    time_mask: u64,
    cap_user_time_short: bool,
}

impl TscConversion {
    /// Conversion from the three classic parameters, without the short-time
    /// extension. Errors on `time_mult == 0` and `time_shift >= 64`.
    pub fn new(time_shift: u64, time_mult: u64, time_zero: u64) -> Result<Self, TimeConvError> {
        if time_mult == 0 {
            return Err(TimeConvError::ZeroMult);
        }
        let time_shift = match u32::try_from(time_shift) {
            Ok(s) if s < 64 => s,
            _ => return Err(TimeConvError::ShiftOutOfRange(time_shift)),
        };
        Ok(Self {
            time_shift,
            time_mult,
            time_zero,
            time_cycles: 0,
            time_mask: 0,
            cap_user_time_short: false,
        })
    }

    /// Adds the `cap_user_time_short` extension: the counter is only
    /// `time_mask + 1` wide and is extended from `time_cycles` before
    /// conversion (used on arm64; x86 kernels publish it switched off).
    pub fn with_short_time(mut self, time_cycles: u64, time_mask: u64) -> Self {
        self.time_cycles = time_cycles;
        self.time_mask = time_mask;
        self.cap_user_time_short = true;
        self
    }

    /// From PERF_RECORD_TIME_CONV, as perf's `perf_event__process_time_conv`
    /// reads it: the short-time fields are used only when the record is long
    /// enough to carry them and `cap_user_time_short` is set. A record that
    /// says `cap_user_time_zero = 0` is refused. Older (shorter) records carry
    /// no capability bits; perf wrote them only when time_zero was available.
    pub fn from_time_conv(tc: &TimeConv) -> Result<Self, TimeConvError> {
        if tc.cap_user_time_zero == Some(false) {
            return Err(TimeConvError::NoTimeZero);
        }
        let conv = Self::new(tc.time_shift, tc.time_mult, tc.time_zero)?;
        Ok(
            match (tc.cap_user_time_short, tc.time_cycles, tc.time_mask) {
                (Some(true), Some(cycles), Some(mask)) => conv.with_short_time(cycles, mask),
                _ => conv,
            },
        )
    }

    /// From the Intel PT words of AUXTRACE_INFO (`INTEL_PT_TIME_SHIFT`,
    /// `_TIME_MULT`, `_TIME_ZERO`, `_CAP_USER_TIME_ZERO`), which is what perf's
    /// Intel PT decoder uses (`intel_pt_process_auxtrace_info`).
    pub fn from_intel_pt(info: &IntelPtInfo) -> Result<Self, TimeConvError> {
        if !info.cap_user_time_zero {
            return Err(TimeConvError::NoTimeZero);
        }
        Self::new(info.time_shift, info.time_mult, info.time_zero)
    }

    pub fn time_shift(&self) -> u32 {
        self.time_shift
    }

    pub fn time_mult(&self) -> u64 {
        self.time_mult
    }

    pub fn time_zero(&self) -> u64 {
        self.time_zero
    }

    /// `(time_cycles, time_mask)` when the short-time extension is in use.
    pub fn short_time(&self) -> Option<(u64, u64)> {
        self.cap_user_time_short
            .then_some((self.time_cycles, self.time_mask))
    }

    /// TSC -> perf time, perf's `tsc_to_perf_time`:
    ///
    /// ```c
    /// if (tc->cap_user_time_short)
    ///     cyc = tc->time_cycles + ((cyc - tc->time_cycles) & tc->time_mask);
    /// quot = cyc >> tc->time_shift;
    /// rem  = cyc & (((u64)1 << tc->time_shift) - 1);
    /// return tc->time_zero + quot * tc->time_mult +
    ///        ((rem * tc->time_mult) >> tc->time_shift);
    /// ```
    pub fn tsc_to_perf_time(&self, tsc: u64) -> u64 {
        let cyc = if self.cap_user_time_short {
            self.time_cycles
                .wrapping_add(tsc.wrapping_sub(self.time_cycles) & self.time_mask)
        } else {
            tsc
        };
        let quot = cyc >> self.time_shift;
        let rem = cyc & ((1u64 << self.time_shift) - 1);
        self.time_zero
            .wrapping_add(quot.wrapping_mul(self.time_mult))
            .wrapping_add(rem.wrapping_mul(self.time_mult) >> self.time_shift)
    }

    /// perf time -> TSC, perf's `perf_time_to_tsc`:
    ///
    /// ```c
    /// t = ns - tc->time_zero;
    /// quot = t / tc->time_mult;
    /// rem  = t % tc->time_mult;
    /// return (quot << tc->time_shift) +
    ///        (rem << tc->time_shift) / tc->time_mult;
    /// ```
    ///
    /// Both directions round down, so a round trip loses at most one unit of
    /// the coarser clock: `tsc_to_perf_time(perf_time_to_tsc(ns))` is `ns` or
    /// up to `ceil(time_mult / 2^time_shift)` ns less. perf applies no
    /// short-time correction in this direction and neither do we.
    pub fn perf_time_to_tsc(&self, ns: u64) -> u64 {
        let t = ns.wrapping_sub(self.time_zero);
        let quot = t / self.time_mult;
        let rem = t % self.time_mult;
        (quot << self.time_shift).wrapping_add((rem << self.time_shift) / self.time_mult)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AUXTRACE_INFO / TIME_CONV of `realdata/perf.data.intel_pt-4.14`, from
    /// `perf script -D -i perf.data.intel_pt-4.14` (perf 6.1):
    /// `Time Shift 31`, `Time Muliplier 1789569706`, `Time Zero 18446744041015200657`.
    fn skylake() -> TscConversion {
        TscConversion::new(31, 1789569706, 18446744041015200657).unwrap()
    }

    /// `realdata/tmon-alderlake-ptw.perf.data`, same command:
    /// `Time Shift 31`, `Time Muliplier 1016800969`, `Time Zero 18446744061076016896`,
    /// `Time Cycles 0`, `Time Mask 0`, `Cap Time Zero 1`, `Cap Time Short 0`.
    fn alderlake() -> TscConversion {
        TscConversion::new(31, 1016800969, 18446744061076016896).unwrap()
    }

    /// (TSC, perf time) pairs perf computed. The TSC is the TSC packet of each
    /// PSB+ (`perf script -D -i FILE | grep -A4 'PSB$' | grep TSC`); the time is
    /// the matching PSB event of
    /// `perf script -i FILE --itrace=p -F cpu,time,event,synth --ns`.
    const SKYLAKE_PAIRS: &[(u64, u64)] = &[
        (0xbc4cbefc32, 641_256_845_844), // cpu 3, psb offs 0
        (0xbc4cc2e7b2, 641_257_059_924), // cpu 3, psb offs 0x4258
        (0xbc4cc529cc, 641_257_183_253), // cpu 3, psb offs 0x8078
        (0xbc4cc79738, 641_257_315_823), // cpu 3, psb offs 0xc090
        (0xbc4ccaa4fa, 641_257_482_598), // cpu 3, psb offs 0x100d0
        (0xbc4ccbee14, 641_257_552_806), // cpu 3, psb offs 0x14090
        (0xbc4cce32fe, 641_257_676_734), // cpu 3, psb offs 0x18190
        (0xbc4ccf5cfe, 641_257_740_308), // cpu 3, psb offs 0x1c150
        (0xbc4cd1aa5a, 641_257_866_038), // cpu 3, psb offs 0x20190
        (0xbc4cd2cfe8, 641_257_928_663), // cpu 0, psb offs 0
    ];

    const ALDERLAKE_PAIRS: &[(u64, u64)] = &[
        (0xe9e4b20213a6, 121_752_730_158_257), // cpu 4, psb offs 0
        (0xe9e4b20efb80, 121_752_730_558_724), // cpu 7, psb offs 0
    ];

    #[test]
    fn tsc_to_perf_time_matches_perf() {
        for &(tsc, ns) in SKYLAKE_PAIRS {
            assert_eq!(skylake().tsc_to_perf_time(tsc), ns, "tsc {tsc:#x}");
        }
        for &(tsc, ns) in ALDERLAKE_PAIRS {
            assert_eq!(alderlake().tsc_to_perf_time(tsc), ns, "tsc {tsc:#x}");
        }
    }

    #[test]
    fn perf_time_to_tsc_inverts_within_rounding() {
        for (conv, pairs) in [(skylake(), SKYLAKE_PAIRS), (alderlake(), ALDERLAKE_PAIRS)] {
            // One perf-time ns is at most ceil(2^shift / mult) TSC ticks.
            let ticks_per_ns = (1u64 << conv.time_shift()).div_ceil(conv.time_mult());
            for &(tsc, ns) in pairs {
                let back = conv.perf_time_to_tsc(ns);
                assert!(
                    back <= tsc && tsc - back <= ticks_per_ns,
                    "{tsc:#x} -> {ns} -> {back:#x}"
                );
                // And back to perf time, rounding down by at most 1 ns here (mult < 2^shift).
                let again = conv.tsc_to_perf_time(back);
                assert!(
                    again <= ns && ns - again <= 1,
                    "{ns} -> {back:#x} -> {again}"
                );
            }
        }
    }

    /// Exact 128-bit reference of what the quot/rem split computes when nothing wraps.
    fn exact_tsc_to_ns(c: &TscConversion, tsc: u64) -> u64 {
        let prod = ((tsc as u128) * (c.time_mult() as u128)) >> c.time_shift();
        (c.time_zero() as u128 + prod) as u64
    }

    #[test]
    fn split_arithmetic_equals_exact_product_in_range() {
        let c = skylake();
        let mut x: u64 = 0x1234_5678_9abc;
        for _ in 0..10_000 {
            // xorshift over realistic TSC values (< 2^56).
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let tsc = x >> 8;
            assert_eq!(c.tsc_to_perf_time(tsc), exact_tsc_to_ns(&c, tsc));
            let ns = c.tsc_to_perf_time(tsc);
            let back = c.perf_time_to_tsc(ns);
            assert!(back <= tsc && tsc - back <= 2);
        }
    }

    #[test]
    fn wraps_like_c() {
        // time_zero is a large "negative" number in both recordings: the sum
        // wraps in u64 exactly as it does in perf.
        let c = skylake();
        assert_eq!(c.tsc_to_perf_time(0), 18446744041015200657);
        assert_eq!(c.perf_time_to_tsc(18446744041015200657), 0);
        // Extreme inputs do not panic.
        let _ = c.tsc_to_perf_time(u64::MAX);
        let _ = c.perf_time_to_tsc(u64::MAX);
        let big = TscConversion::new(63, u64::MAX, u64::MAX).unwrap();
        let _ = big.tsc_to_perf_time(u64::MAX);
        let _ = big.perf_time_to_tsc(0);
    }

    #[test]
    fn short_time_extension() {
        // A 32-bit counter: values are extended from time_cycles.
        let base = TscConversion::new(0, 1, 0).unwrap();
        let short = base.with_short_time(0x1_0000_0000, 0xffff_ffff);
        assert_eq!(short.short_time(), Some((0x1_0000_0000, 0xffff_ffff)));
        assert_eq!(short.tsc_to_perf_time(0x10), 0x1_0000_0010);
        assert_eq!(base.tsc_to_perf_time(0x10), 0x10);
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert_eq!(TscConversion::new(31, 0, 5), Err(TimeConvError::ZeroMult));
        assert_eq!(
            TscConversion::new(64, 1, 0),
            Err(TimeConvError::ShiftOutOfRange(64))
        );
        assert_eq!(
            TscConversion::new(u64::MAX, 1, 0),
            Err(TimeConvError::ShiftOutOfRange(u64::MAX))
        );
        let tc = TimeConv {
            time_shift: 31,
            time_mult: 3,
            cap_user_time_zero: Some(false),
            ..Default::default()
        };
        assert_eq!(
            TscConversion::from_time_conv(&tc),
            Err(TimeConvError::NoTimeZero)
        );
        let info = IntelPtInfo {
            time_shift: 31,
            time_mult: 0,
            cap_user_time_zero: true,
            ..Default::default()
        };
        assert_eq!(
            TscConversion::from_intel_pt(&info),
            Err(TimeConvError::ZeroMult)
        );
    }

    #[test]
    fn from_records() {
        let tc = TimeConv {
            time_shift: 31,
            time_mult: 1789569706,
            time_zero: 18446744041015200657,
            ..Default::default()
        };
        assert_eq!(TscConversion::from_time_conv(&tc).unwrap(), skylake());
        let tc_short = TimeConv {
            time_cycles: Some(7),
            time_mask: Some(0xff),
            cap_user_time_zero: Some(true),
            cap_user_time_short: Some(true),
            ..tc
        };
        assert_eq!(
            TscConversion::from_time_conv(&tc_short)
                .unwrap()
                .short_time(),
            Some((7, 0xff))
        );
        let tc_not_short = TimeConv {
            cap_user_time_short: Some(false),
            ..tc_short
        };
        assert_eq!(
            TscConversion::from_time_conv(&tc_not_short).unwrap(),
            skylake()
        );
        let info = IntelPtInfo {
            time_shift: 31,
            time_mult: 1016800969,
            time_zero: 18446744061076016896,
            cap_user_time_zero: true,
            ..Default::default()
        };
        assert_eq!(TscConversion::from_intel_pt(&info).unwrap(), alderlake());
    }
}
