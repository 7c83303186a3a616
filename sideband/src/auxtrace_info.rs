//! PERF_RECORD_AUXTRACE_INFO and the Intel PT private words perf stores in it
//! (`tools/perf/util/intel-pt.h`, the `INTEL_PT_*` index enum; filled by
//! `intel_pt_info_fill` in `tools/perf/arch/x86/util/intel-pt.c` and read by
//! `intel_pt_process_auxtrace_info` in `tools/perf/util/intel-pt.c`).
//!
//! ```text
//! struct perf_record_auxtrace_info {
//!     struct perf_event_header header;
//!     __u32 type;
//!     __u32 reserved__; /* For alignment */
//!     __u64 priv[];
//! };
//! ```
//!
//! Intel PT's `priv[]`: PMU_TYPE, TIME_SHIFT, TIME_MULT, TIME_ZERO,
//! CAP_USER_TIME_ZERO, TSC_BIT, NORETCOMP_BIT, HAVE_SCHED_SWITCH,
//! SNAPSHOT_MODE, PER_CPU_MMAPS, MTC_BIT, MTC_FREQ_BITS, TSC_CTC_N,
//! TSC_CTC_D, CYC_BIT, MAX_NONTURBO_RATIO, FILTER_STR_LEN (17 words; older
//! perf writes fewer, perf requires at least 9), then the filter string (its
//! length plus a NUL, rounded up to 8 bytes) when FILTER_STR_LEN is not 0, then
//! words newer perf appends (perf 5.18+: `cap_event_trace`).

use crate::endian::Malformed;

/// `perf_record_auxtrace_info.type` for Intel PT (`PERF_AUXTRACE_INTEL_PT`).
pub const AUXTRACE_INTEL_PT: u32 = 1;

/// Index of each Intel PT private word (`INTEL_PT_*` in intel-pt.h).
pub mod intel_pt_word {
    pub const PMU_TYPE: usize = 0;
    pub const TIME_SHIFT: usize = 1;
    pub const TIME_MULT: usize = 2;
    pub const TIME_ZERO: usize = 3;
    pub const CAP_USER_TIME_ZERO: usize = 4;
    pub const TSC_BIT: usize = 5;
    pub const NORETCOMP_BIT: usize = 6;
    pub const HAVE_SCHED_SWITCH: usize = 7;
    pub const SNAPSHOT_MODE: usize = 8;
    pub const PER_CPU_MMAPS: usize = 9;
    pub const MTC_BIT: usize = 10;
    pub const MTC_FREQ_BITS: usize = 11;
    pub const TSC_CTC_N: usize = 12;
    pub const TSC_CTC_D: usize = 13;
    pub const CYC_BIT: usize = 14;
    pub const MAX_NONTURBO_RATIO: usize = 15;
    pub const FILTER_STR_LEN: usize = 16;
    /// Words before the filter string in a current record.
    pub const PRIV_MAX: usize = 17;
    /// The fewest words perf accepts (`min_sz` in intel_pt_process_auxtrace_info).
    pub const MIN: usize = 9;
}

/// PERF_RECORD_AUXTRACE_INFO: the AUX-area kind and its private words, kept
/// verbatim so that a record round-trips; [`AuxtraceInfo::intel_pt`] gives the
/// typed view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuxtraceInfo {
    pub kind: u32,
    pub priv_words: Vec<u64>,
}

impl AuxtraceInfo {
    /// The Intel PT view, when the kind is Intel PT and the words are well formed.
    pub fn intel_pt(&self) -> Option<IntelPtInfo> {
        if self.kind != AUXTRACE_INTEL_PT {
            return None;
        }
        IntelPtInfo::from_words(&self.priv_words).ok()
    }

    /// An Intel PT AUXTRACE_INFO built from the typed view.
    pub fn from_intel_pt(info: &IntelPtInfo) -> Self {
        AuxtraceInfo {
            kind: AUXTRACE_INTEL_PT,
            priv_words: info.to_words(),
        }
    }
}

/// The Intel PT configuration perf records in AUXTRACE_INFO.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntelPtInfo {
    pub pmu_type: u64,
    pub time_shift: u64,
    pub time_mult: u64,
    pub time_zero: u64,
    pub cap_user_time_zero: bool,
    /// The `tsc` term's mask in the intel_pt event's config (perf stores
    /// `perf_pmu__format_bits`, a mask such as 0x400, not a bit number; the
    /// other `*_bit` words likewise).
    pub tsc_bit: u64,
    /// Mask of the `noretcomp` term.
    pub noretcomp_bit: u64,
    pub have_sched_switch: u64,
    pub snapshot_mode: bool,
    pub per_cpu_mmaps: bool,
    /// Mask of the `mtc` term.
    pub mtc_bit: u64,
    /// Mask of the `mtc_period` field in config (e.g. 0x3c000): a field, not
    /// a value; see [`IntelPtInfo::mtc_period`].
    pub mtc_freq_bits: u64,
    /// TSC:CTC ratio numerator / denominator (CPUID 0x15 EBX / EAX).
    pub tsc_ctc_ratio_n: u64,
    pub tsc_ctc_ratio_d: u64,
    /// Mask of the `cyc` term.
    pub cyc_bit: u64,
    pub max_non_turbo_ratio: u64,
    /// The address filter string, when one was set.
    pub filter: Option<String>,
    /// Words newer perf appends after the filter string, kept as they are.
    pub extra_words: Vec<u64>,
}

/// perf's intel_pt PMU format (`/sys/bus/event_source/devices/intel_pt/format`):
/// each config term, its lowest bit in `perf_event_attr.config` and its
/// width. AUXTRACE_INFO records masks for only some terms; the rest sit
/// where every kernel since 4.1 puts them (`arch/x86/events/intel/pt.c`).
pub const INTEL_PT_TERMS: [(&str, u32, u32); 14] = [
    ("pt", 0, 1),
    ("cyc", 1, 1),
    ("pwr_evt", 4, 1),
    ("fup_on_ptw", 5, 1),
    ("mtc", 9, 1),
    ("tsc", 10, 1),
    ("noretcomp", 11, 1),
    ("ptw", 12, 1),
    ("branch", 13, 1),
    ("mtc_period", 14, 4),
    ("cyc_thresh", 19, 4),
    ("psb_period", 24, 4),
    ("event", 31, 1),
    ("notnt", 55, 1),
];

/// The intel_pt event's `config` as perf's config terms, as `perf record -e
/// intel_pt/TERMS/` would spell them: every one-bit term as `name=0|1`, the
/// fields as `name=N`; bits no term covers as `other=0x...`.
pub fn config_terms(config: u64) -> String {
    let mut covered = 0u64;
    let mut out = Vec::new();
    for (name, lo, width) in INTEL_PT_TERMS {
        let mask = ((1u64 << width) - 1) << lo;
        covered |= mask;
        out.push(format!("{name}={}", (config & mask) >> lo));
    }
    if config & !covered != 0 {
        out.push(format!("other={:#x}", config & !covered));
    }
    out.join(",")
}

impl IntelPtInfo {
    /// Whether the config term with `mask` (one of the `*_bit` words) is set
    /// in the intel_pt event's `config`; `None` when the mask is 0 (the CPU
    /// or the recording perf has no such term).
    pub fn term_set(config: u64, mask: u64) -> Option<bool> {
        (mask != 0).then_some(config & mask != 0)
    }

    /// The `mtc_period` term's value in the intel_pt event's `config` (the
    /// MTCFreq field that libipt's `mtc_freq` wants), extracted with the
    /// `mtc_freq_bits` mask as perf's `intel_pt_mtc_period` does; `None`
    /// when the mask is 0.
    pub fn mtc_period(&self, config: u64) -> Option<u8> {
        let mask = self.mtc_freq_bits;
        (mask != 0).then(|| ((config & mask) >> mask.trailing_zeros()) as u8)
    }

    /// Reads the private words. Words an older perf did not write read as 0.
    pub fn from_words(w: &[u64]) -> Result<Self, Malformed> {
        use intel_pt_word as iw;
        if w.len() < iw::MIN {
            return Err(Malformed(format!(
                "Intel PT AUXTRACE_INFO has {} private words, perf requires at least {}",
                w.len(),
                iw::MIN
            )));
        }
        let g = |i: usize| w.get(i).copied().unwrap_or(0);
        let mut info = IntelPtInfo {
            pmu_type: g(iw::PMU_TYPE),
            time_shift: g(iw::TIME_SHIFT),
            time_mult: g(iw::TIME_MULT),
            time_zero: g(iw::TIME_ZERO),
            cap_user_time_zero: g(iw::CAP_USER_TIME_ZERO) != 0,
            tsc_bit: g(iw::TSC_BIT),
            noretcomp_bit: g(iw::NORETCOMP_BIT),
            have_sched_switch: g(iw::HAVE_SCHED_SWITCH),
            snapshot_mode: g(iw::SNAPSHOT_MODE) != 0,
            per_cpu_mmaps: g(iw::PER_CPU_MMAPS) != 0,
            mtc_bit: g(iw::MTC_BIT),
            mtc_freq_bits: g(iw::MTC_FREQ_BITS),
            tsc_ctc_ratio_n: g(iw::TSC_CTC_N),
            tsc_ctc_ratio_d: g(iw::TSC_CTC_D),
            cyc_bit: g(iw::CYC_BIT),
            max_non_turbo_ratio: g(iw::MAX_NONTURBO_RATIO),
            filter: None,
            extra_words: Vec::new(),
        };
        let Some(after) = w.get(iw::PRIV_MAX..) else {
            return Ok(info);
        };
        let len = g(iw::FILTER_STR_LEN);
        let mut rest = after;
        if len != 0 {
            let nwords = usize::try_from(len)
                .ok()
                .and_then(|l| l.checked_add(1))
                .map(|l| l.div_ceil(8))
                .filter(|&n| n <= after.len())
                .ok_or_else(|| {
                    Malformed(format!(
                        "Intel PT filter string length {len} exceeds the {} words left",
                        after.len()
                    ))
                })?;
            let (words, tail) = after.split_at(nwords);
            let bytes: Vec<u8> = words.iter().flat_map(|x| x.to_le_bytes()).collect();
            info.filter = Some(crate::endian::c_string(
                bytes.get(..len as usize).unwrap_or_default(),
            ));
            rest = tail;
        }
        info.extra_words = rest.to_vec();
        Ok(info)
    }

    /// The private words in the current layout: 17 words, the filter
    /// string, the extra words.
    pub fn to_words(&self) -> Vec<u64> {
        let filter = self.filter.as_deref().unwrap_or("");
        let mut w = vec![
            self.pmu_type,
            self.time_shift,
            self.time_mult,
            self.time_zero,
            self.cap_user_time_zero as u64,
            self.tsc_bit,
            self.noretcomp_bit,
            self.have_sched_switch,
            self.snapshot_mode as u64,
            self.per_cpu_mmaps as u64,
            self.mtc_bit,
            self.mtc_freq_bits,
            self.tsc_ctc_ratio_n,
            self.tsc_ctc_ratio_d,
            self.cyc_bit,
            self.max_non_turbo_ratio,
            filter.len() as u64,
        ];
        if !filter.is_empty() {
            let bytes = crate::sink::padded_str(filter, 8);
            w.extend(bytes.chunks_exact(8).map(|c| {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                // Stored as the bytes of the string: the little-endian words we write.
                u64::from_le_bytes(a)
            }));
        }
        w.extend_from_slice(&self.extra_words);
        w
    }

    /// `cap_event_trace` (perf 5.18+), the first word after the filter string.
    pub fn cap_event_trace(&self) -> Option<u64> {
        self.extra_words.first().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> IntelPtInfo {
        IntelPtInfo {
            pmu_type: 8,
            time_shift: 31,
            time_mult: 1789569706,
            time_zero: 18446744041015200657,
            cap_user_time_zero: true,
            tsc_bit: 0x400,
            noretcomp_bit: 0x800,
            have_sched_switch: 3,
            snapshot_mode: false,
            per_cpu_mmaps: true,
            mtc_bit: 0x200,
            mtc_freq_bits: 0x3c000,
            tsc_ctc_ratio_n: 100,
            tsc_ctc_ratio_d: 2,
            cyc_bit: 2,
            max_non_turbo_ratio: 12,
            filter: None,
            extra_words: vec![0],
        }
    }

    /// The real Skylake recording's attr: `config: 0x300e601` (perf evlist -v
    /// of ../shared/realdata/perf.data.intel_pt-4.14): tsc, mtc, mtc_period=3,
    /// no cyc, no noretcomp.
    #[test]
    fn terms_from_the_real_config() {
        let i = sample();
        let config = 0x300e601;
        assert_eq!(IntelPtInfo::term_set(config, i.tsc_bit), Some(true));
        assert_eq!(IntelPtInfo::term_set(config, i.mtc_bit), Some(true));
        assert_eq!(IntelPtInfo::term_set(config, i.cyc_bit), Some(false));
        assert_eq!(IntelPtInfo::term_set(config, i.noretcomp_bit), Some(false));
        assert_eq!(IntelPtInfo::term_set(config, 0), None);
        assert_eq!(i.mtc_period(config), Some(3));
        assert_eq!(i.mtc_period(0x0003_c000), Some(15));
        assert_eq!(
            IntelPtInfo {
                mtc_freq_bits: 0,
                ..i
            }
            .mtc_period(config),
            None
        );
    }

    #[test]
    fn words_round_trip() {
        for filter in [
            None,
            Some("filter 0x1000/0x200@/bin/ls"),
            Some("1234567"),
            Some("12345678"),
        ] {
            let info = IntelPtInfo {
                filter: filter.map(String::from),
                ..sample()
            };
            let w = info.to_words();
            assert_eq!(IntelPtInfo::from_words(&w).unwrap(), info);
            assert_eq!(IntelPtInfo::from_words(&w).unwrap().to_words(), w);
        }
    }

    #[test]
    fn short_and_bad_words() {
        let w = sample().to_words();
        assert!(IntelPtInfo::from_words(&w[..8]).is_err());
        let old = IntelPtInfo::from_words(&w[..9]).unwrap();
        assert_eq!(old.time_mult, 1789569706);
        assert_eq!(old.mtc_bit, 0);
        let mut bad = w.clone();
        bad[intel_pt_word::FILTER_STR_LEN] = 1000;
        assert!(IntelPtInfo::from_words(&bad).is_err());
        bad[intel_pt_word::FILTER_STR_LEN] = u64::MAX;
        assert!(IntelPtInfo::from_words(&bad).is_err());
    }

    #[test]
    fn config_terms_spell_perfs_terms() {
        // The Alder Lake recording's config: ptw, branch=0.
        assert_eq!(
            super::config_terms(0x300d401),
            "pt=1,cyc=0,pwr_evt=0,fup_on_ptw=0,mtc=0,tsc=1,noretcomp=0,ptw=1,branch=0,\
             mtc_period=3,cyc_thresh=0,psb_period=3,event=0,notnt=0"
        );
        assert!(super::config_terms(1 << 40).ends_with(",other=0x10000000000"));
    }
}
