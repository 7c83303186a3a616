//! Intel PT configuration: perf's config terms (`-e 'cyc,mtc_period=3'`)
//! turned into the intel_pt event's `attr.config`, checked against the CPU's
//! `caps/` before the kernel sees them, and the AUXTRACE_INFO words perf
//! records beside the trace. Follows `tools/perf/arch/x86/util/intel-pt.c`:
//! the same default terms (`intel_pt_default_config`), the same period checks
//! and "Valid values are" lists (`intel_pt_val_config_term`), the same
//! AUXTRACE_INFO fill (`intel_pt_info_fill`).

use perf_event_open_sys::bindings as b;
use sideband::auxtrace_info::IntelPtInfo;

use crate::errors::Error;
use crate::pmu::{ConfigWord, Pmu};
use crate::sys::perf_event_attr;

/// One config term: `name` (meaning 1) or `name=value` (decimal or 0x hex).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub name: String,
    pub value: u64,
}

/// A parsed `-e` argument: the terms and the perf event modifiers after a
/// trailing slash (`intel_pt/cyc/u` is accepted as well as `cyc`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventSpec {
    pub terms: Vec<Term>,
    /// `k` among the modifiers: trace the kernel too.
    pub kernel: bool,
    /// `u` among the modifiers (or none given): trace user space.
    pub user: bool,
}

/// Parses `cyc,cyc_thresh=1,mtc_period=0x3` or perf's `intel_pt/TERMS/MODS`.
pub fn parse_event(spec: &str) -> Result<EventSpec, Error> {
    let spec = spec.trim();
    let (terms, mods) = match spec.strip_prefix("intel_pt/") {
        Some(rest) => match rest.rsplit_once('/') {
            Some((terms, mods)) => (terms, mods),
            None => {
                return Err(Error::BadTerm {
                    term: spec.to_string(),
                    why: "perf's form is intel_pt/TERMS/ with a closing slash".into(),
                })
            }
        },
        None => (spec, ""),
    };
    let mut out = EventSpec {
        terms: Vec::new(),
        kernel: mods.contains('k'),
        user: mods.is_empty() || mods.contains('u'),
    };
    if let Some(bad) = mods.chars().find(|c| !"ukhGHp".contains(*c)) {
        return Err(Error::BadTerm {
            term: spec.to_string(),
            why: format!("unknown event modifier {bad:?} (intel_pt honours u and k)"),
        });
    }
    for raw in terms.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (name, value) = match raw.split_once('=') {
            Some((n, v)) => {
                let v = v.trim();
                let parsed = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
                    Some(hex) => u64::from_str_radix(hex, 16),
                    None => v.parse(),
                };
                let value = parsed.map_err(|_| Error::BadTerm {
                    term: raw.to_string(),
                    why: format!("{v:?} is not a number"),
                })?;
                (n.trim(), value)
            }
            None => (raw, 1),
        };
        out.terms.push(Term {
            name: name.to_string(),
            value,
        });
    }
    Ok(out)
}

/// perf's `intel_pt_pick_bit`: `target` if valid, else the nearest lower valid
/// value, else the lowest valid one.
fn pick_bit(bits: u64, target: u32) -> Option<u32> {
    let mut pick = None;
    for pos in 0..64u32 {
        if bits & (1 << pos) != 0 {
            if pos <= target || pick.is_none() {
                pick = Some(pos);
            }
            if pos >= target {
                break;
            }
        }
    }
    pick
}

/// The terms perf uses for `-e intel_pt//` on this PMU
/// (`intel_pt_default_config`): `tsc`, then `mtc,mtc_period=3` (or the
/// nearest valid period) when MTC is supported, `psb_period=3` (nearest) when
/// configurable PSB and MTC are, and `pt,branch` when the PMU has them.
pub fn default_terms(pmu: &Pmu) -> Vec<Term> {
    let t = |name: &str, value: u64| Term {
        name: name.to_string(),
        value,
    };
    let mut terms = vec![t("tsc", 1)];
    // A missing caps file counts as supported, as in perf (older kernels).
    let mtc = pmu.cap("mtc").unwrap_or(1) != 0;
    let mut mtc_periods = 0;
    if mtc {
        mtc_periods = pmu.cap("mtc_periods").unwrap_or(0);
        if let Some(p) = pick_bit(mtc_periods, 3) {
            terms.push(t("mtc", 1));
            terms.push(t("mtc_period", p.into()));
        }
    }
    if pmu.cap("psb_cyc").unwrap_or(1) != 0 && mtc_periods != 0 {
        if let Some(p) = pick_bit(pmu.cap("psb_periods").unwrap_or(0), 3) {
            terms.push(t("psb_period", p.into()));
        }
    }
    if pmu.format("pt").is_some() && pmu.format("branch").is_some() {
        terms.push(t("pt", 1));
        terms.push(t("branch", 1));
    }
    terms
}

/// Sets `term` in `config`, replacing whatever its bits held.
fn apply(pmu: &Pmu, config: &mut u64, term: &Term) -> Result<(), Error> {
    let Some(field) = pmu.format(&term.name) else {
        let known: Vec<&str> = pmu.formats().keys().map(String::as_str).collect();
        return Err(Error::UnknownTerm {
            term: term.name.clone(),
            known: known.join(", "),
        });
    };
    if field.word != ConfigWord::Config {
        return Err(Error::BadTerm {
            term: term.name.clone(),
            why: "lives outside attr.config, which ptrec does not set".into(),
        });
    }
    let bits = field.encode(term.value).ok_or_else(|| Error::BadTerm {
        term: format!("{}={}", term.name, term.value),
        why: format!("the field holds at most {}", field.max_value()),
    })?;
    *config = (*config & !field.mask()) | bits;
    Ok(())
}

/// perf's `intel_pt_valid_str`: `0-5`, `0,3,6,9`, `0,2-4`.
pub fn valid_values(valid: u64) -> String {
    let mut parts = Vec::new();
    let mut v = 0u32;
    while v < 64 {
        if valid & (1 << v) == 0 {
            v += 1;
            continue;
        }
        let start = v;
        while v + 1 < 64 && valid & (1 << (v + 1)) != 0 {
            v += 1;
        }
        match v - start {
            0 => parts.push(start.to_string()),
            1 => parts.push(format!("{start},{v}")),
            _ => parts.push(format!("{start}-{v}")),
        }
        v += 1;
    }
    parts.join(",")
}

/// The intel_pt `attr.config` for `terms` on `pmu`: perf's default terms, then
/// the user's in order (each replaces the bits it names), then the checks
/// against `caps/` that perf and the kernel make, so a bad value is an error
/// naming the valid ones instead of a bare EINVAL from the kernel.
pub fn build_config(pmu: &Pmu, terms: &[Term]) -> Result<u64, Error> {
    let mut config = 0;
    for t in default_terms(pmu).iter().chain(terms) {
        apply(pmu, &mut config, t)?;
    }
    // perf forces pass-through: without it the kernel ignores `branch`.
    if pmu.format("pt").is_some() {
        config |= pmu.format_bits("pt");
    }
    validate(pmu, config)?;
    Ok(config)
}

/// Feature terms and the capability each needs.
const FEATURES: &[(&str, &str)] = &[
    ("cyc", "psb_cyc"),
    ("mtc", "mtc"),
    ("ptw", "ptwrite"),
    ("fup_on_ptw", "ptwrite"),
    ("pwr_evt", "power_event_trace"),
    ("event", "event_trace"),
    ("notnt", "tnt_disable"),
];

/// Value terms: the caps bitmap of valid values and the cap that enables them.
const VALUED: &[(&str, &str, &str)] = &[
    ("cyc_thresh", "cycle_thresholds", "psb_cyc"),
    ("mtc_period", "mtc_periods", "mtc"),
    ("psb_period", "psb_periods", "psb_cyc"),
];

fn validate(pmu: &Pmu, config: u64) -> Result<(), Error> {
    let caps_file = |c: &str| format!("{}/caps/{c}", pmu.dir.display());
    for &(term, cap) in FEATURES {
        let bits = pmu.format_bits(term);
        if bits != 0 && config & bits != 0 && pmu.cap(cap) == Some(0) {
            return Err(Error::Unsupported {
                term: term.to_string(),
                cap_file: caps_file(cap),
            });
        }
    }
    for &(term, caps, enable) in VALUED {
        let Some(field) = pmu.format(term) else {
            continue;
        };
        let value = field.decode(config);
        // As intel_pt_val_config_term: 0 is always valid; a disabled
        // feature leaves only 0.
        let mut valid = pmu.cap(caps).unwrap_or(0);
        if pmu.cap(enable) == Some(0) {
            valid = 0;
        }
        valid |= 1;
        if value > 63 || valid & (1 << value) == 0 {
            return Err(Error::InvalidValue {
                term: term.to_string(),
                value,
                valid: valid_values(valid),
                cap_file: caps_file(caps),
            });
        }
    }
    let (ptw, fup) = (pmu.format_bits("ptw"), pmu.format_bits("fup_on_ptw"));
    if fup != 0 && config & fup != 0 && config & ptw == 0 {
        return Err(Error::Conflict(
            "fup_on_ptw needs ptw (the kernel refuses FUP-on-PTWRITE alone)".into(),
        ));
    }
    Ok(())
}

/// How the intel_pt event is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EventOptions {
    /// Trace the kernel too (`-k`).
    pub kernel: bool,
    /// Follow children (per-cpu buffers) (`-p`, commands, `-a`).
    pub inherit: bool,
    /// Start at the target's exec (commands).
    pub enable_on_exec: bool,
    /// Leave user space out (`intel_pt//k`).
    pub exclude_user: bool,
}

/// sample_type of the intel_pt event, as perf sets it for per-cpu buffers.
pub const PT_SAMPLE_TYPE: u64 = (b::PERF_SAMPLE_IP
    | b::PERF_SAMPLE_TID
    | b::PERF_SAMPLE_TIME
    | b::PERF_SAMPLE_CPU
    | b::PERF_SAMPLE_IDENTIFIER) as u64;

/// The intel_pt `perf_event_attr` as `perf record -e intel_pt/TERMS/` opens
/// it: period 1, disabled until enabled (or exec), `sample_id_all` so AUX and
/// ITRACE_START records carry tid, time and cpu.
pub fn intel_pt_attr(pmu: &Pmu, config: u64, opts: &EventOptions) -> perf_event_attr {
    let mut attr = perf_event_attr {
        type_: pmu.type_,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config,
        sample_type: PT_SAMPLE_TYPE,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = 1;
    attr.set_disabled(1);
    attr.set_inherit(u64::from(opts.inherit));
    attr.set_enable_on_exec(u64::from(opts.enable_on_exec));
    attr.set_exclude_kernel(u64::from(!opts.kernel));
    attr.set_exclude_user(u64::from(opts.exclude_user));
    attr.set_exclude_hv(1);
    attr.set_exclude_guest(1);
    attr.set_sample_id_all(1);
    attr
}

/// perf time conversion parameters from an event's mmap metadata page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeConv {
    pub time_shift: u16,
    pub time_mult: u32,
    pub time_zero: u64,
    pub cap_user_time_zero: bool,
}

/// What the AUXTRACE_INFO record says about the recording besides the PMU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InfoOptions {
    pub snapshot: bool,
    /// Buffers are per CPU (not per thread).
    pub per_cpu_mmaps: bool,
    /// perf's `have_sched_switch`: 0 none, 2 PERF_RECORD_SWITCH of the traced
    /// tasks, 3 SWITCH_CPU_WIDE (system wide).
    pub have_sched_switch: u64,
    pub time: TimeConv,
}

/// The Intel PT words of PERF_RECORD_AUXTRACE_INFO (`intel_pt_info_fill`):
/// bit positions of tsc/noretcomp/mtc/cyc in this PMU's config, the MTC
/// period field, TSC:CTC from `tsc_art_ratio` (the kernel's copy of CPUID
/// 0x15, which perf reads with cpuid itself), and the max non-turbo ratio.
pub fn intel_pt_info(pmu: &Pmu, opts: &InfoOptions) -> IntelPtInfo {
    let (n, d) = pmu.tsc_art_ratio.unwrap_or((0, 0));
    IntelPtInfo {
        pmu_type: pmu.type_.into(),
        time_shift: opts.time.time_shift.into(),
        time_mult: opts.time.time_mult.into(),
        time_zero: opts.time.time_zero,
        cap_user_time_zero: opts.time.cap_user_time_zero,
        tsc_bit: pmu.format_bits("tsc"),
        noretcomp_bit: pmu.format_bits("noretcomp"),
        have_sched_switch: opts.have_sched_switch,
        snapshot_mode: opts.snapshot,
        per_cpu_mmaps: opts.per_cpu_mmaps,
        mtc_bit: pmu.format_bits("mtc"),
        mtc_freq_bits: pmu.format_bits("mtc_period"),
        tsc_ctc_ratio_n: n,
        tsc_ctc_ratio_d: d,
        cyc_bit: pmu.format_bits("cyc"),
        max_non_turbo_ratio: pmu.max_nonturbo_ratio.unwrap_or(0),
        filter: None,
        extra_words: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pick_bit_as_perf() {
        assert_eq!(pick_bit(0x249, 3), Some(3));
        assert_eq!(pick_bit(0x3f, 3), Some(3));
        assert_eq!(pick_bit(0b101, 3), Some(2));
        assert_eq!(pick_bit(0b110000, 3), Some(4));
        assert_eq!(pick_bit(0, 3), None);
    }

    #[test]
    fn valid_value_lists() {
        assert_eq!(valid_values(0x249), "0,3,6,9");
        assert_eq!(valid_values(0x3f), "0-5");
        assert_eq!(valid_values(0x1fff), "0-12");
        assert_eq!(valid_values(0b1101), "0,2,3");
        assert_eq!(valid_values(1), "0");
    }

    #[test]
    fn event_specs() {
        let e = parse_event("cyc,cyc_thresh=0x2, mtc_period=3").unwrap();
        assert_eq!(
            e.terms,
            vec![
                Term {
                    name: "cyc".into(),
                    value: 1
                },
                Term {
                    name: "cyc_thresh".into(),
                    value: 2
                },
                Term {
                    name: "mtc_period".into(),
                    value: 3
                },
            ]
        );
        assert!(e.user && !e.kernel);
        let e = parse_event("intel_pt/noretcomp/uk").unwrap();
        assert!(e.user && e.kernel);
        assert_eq!(e.terms.len(), 1);
        assert!(parse_event("intel_pt/cyc").is_err());
        assert!(parse_event("cyc=x").is_err());
        assert!(parse_event("intel_pt/cyc/z").is_err());
        assert_eq!(parse_event("").unwrap().terms, vec![]);
    }
}
