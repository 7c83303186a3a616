//! PERF_RECORD_AUXTRACE_INFO and the Intel PT private words perf stores in it
//! (`tools/perf/util/intel-pt.h`, the `INTEL_PT_*` index enum).

/// `perf_record_auxtrace_info.type` for Intel PT (`PERF_AUXTRACE_INTEL_PT`).
pub const AUXTRACE_INTEL_PT: u32 = 1;

/// PERF_RECORD_AUXTRACE_INFO: the AUX-area kind and its private words, kept
/// verbatim so that a record round-trips; [`AuxtraceInfo::intel_pt`] gives the
/// typed view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuxtraceInfo {
    pub kind: u32,
    pub priv_words: Vec<u64>,
}

/// The Intel PT configuration perf records in AUXTRACE_INFO.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntelPtInfo {
    pub pmu_type: u64,
    pub time_shift: u64,
    pub time_mult: u64,
    pub time_zero: u64,
    pub cap_user_time_zero: bool,
    /// Bit position of `tsc` in the intel_pt event's config.
    pub tsc_bit: u64,
    pub noretcomp_bit: u64,
    pub have_sched_switch: u64,
    pub snapshot_mode: bool,
    pub per_cpu_mmaps: bool,
    pub mtc_bit: u64,
    pub mtc_freq_bits: u64,
    /// TSC:CTC ratio numerator / denominator (CPUID 0x15 EBX / EAX).
    pub tsc_ctc_ratio_n: u64,
    pub tsc_ctc_ratio_d: u64,
    pub cyc_bit: u64,
    pub max_non_turbo_ratio: u64,
    /// The address filter string, when one was set.
    pub filter: Option<String>,
    /// Words newer perf appends after the filter string, kept as they are.
    pub extra_words: Vec<u64>,
}
