//! Config terms and caps against fake sysfs trees laid out as real CPUs show
//! them (tests/sysfs/README.md says where each value comes from).

use std::path::PathBuf;

use ptrec::config::{self, build_config, default_terms, parse_event, InfoOptions};
use ptrec::errors::Error;
use ptrec::pmu::Pmu;

fn sysfs(cpu: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sysfs")
        .join(cpu)
}

fn pmu(cpu: &str) -> Pmu {
    Pmu::intel_pt(&sysfs(cpu)).unwrap()
}

fn config(cpu: &str, terms: &str) -> Result<u64, Error> {
    build_config(&pmu(cpu), &parse_event(terms).unwrap().terms)
}

#[test]
fn trees_parse() {
    for cpu in ["skylake", "icelake", "sapphirerapids"] {
        let p = pmu(cpu);
        assert_eq!(p.name, "intel_pt");
        assert_eq!(p.format_bits("tsc"), 1 << 10, "{cpu}");
        assert_eq!(p.format_bits("mtc_period"), 0x3c000, "{cpu}");
        assert_eq!(p.cap("mtc_periods"), Some(0x249), "{cpu}");
        assert_eq!(p.cap("psb_periods"), Some(0x3f), "{cpu}");
    }
    let s = pmu("skylake");
    assert_eq!(s.type_, 6);
    assert_eq!(s.tsc_art_ratio, Some((100, 2)));
    assert_eq!(s.max_nonturbo_ratio, Some(12));
    assert_eq!(s.cap("cycle_thresholds"), Some(0x3fff));
    assert_eq!(s.cap("ptwrite"), Some(0));
    assert!(pmu("sapphirerapids").format("notnt").is_some());
    assert!(pmu("skylake").format("notnt").is_none());
}

/// The Skylake recording in ../shared/realdata was made with `-e intel_pt//`
/// by perf 4.14 and its attr has config 0x300e601: perf's default terms on
/// this layout must give the same bits.
#[test]
fn default_config_matches_perf_on_skylake() {
    let names: Vec<String> = default_terms(&pmu("skylake"))
        .iter()
        .map(|t| format!("{}={}", t.name, t.value))
        .collect();
    assert_eq!(
        names,
        [
            "tsc=1",
            "mtc=1",
            "mtc_period=3",
            "psb_period=3",
            "pt=1",
            "branch=1"
        ]
    );
    assert_eq!(config("skylake", "").unwrap(), 0x300e601);
    // The same on the other layouts (the default picks the same periods).
    assert_eq!(config("icelake", "").unwrap(), 0x300e601);
    assert_eq!(config("sapphirerapids", "").unwrap(), 0x300e601);
}

/// The realdata file's attr config, read by perf, agrees with ours (when
/// perf is installed; the number above is what it prints).
#[test]
fn realdata_attr_config_as_perf_prints_it() {
    let Some(perf) = pt_tests::perf("realdata_attr_config_as_perf_prints_it") else {
        return;
    };
    let file = pt_tests::realdata("perf.data.intel_pt-4.14");
    if !file.exists() {
        pt_tests::missing::<()>("realdata_attr_config_as_perf_prints_it", "no realdata");
        return;
    }
    let out = std::process::Command::new(perf)
        .args(["evlist", "-v", "-i"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with("intel_pt//")).unwrap();
    let ours = format!("config: {:#x},", config("skylake", "").unwrap());
    assert!(line.contains(&ours), "perf: {line}\nours: {ours}");
}

#[test]
fn user_terms_replace_their_bits() {
    let c = config(
        "skylake",
        "cyc,cyc_thresh=1,mtc_period=3,noretcomp,psb_period=3,tsc,branch",
    )
    .unwrap();
    let expect = 0x300e601 | 1 << 1 | 1 << 19 | 1 << 11;
    assert_eq!(c, expect);
    // tsc=0 and mtc=0 clear them; mtc_period=6 replaces 3; psb_period=0 clears.
    let c = config("skylake", "tsc=0,mtc_period=6,psb_period=0").unwrap();
    assert_eq!(c, 0x300e601 & !(1 << 10) & !0x3c000 & !0xf00_0000 | 6 << 14);
    // branch=0 keeps pass-through (pt) so the kernel honours it.
    let c = config("skylake", "branch=0").unwrap();
    assert_eq!(c & 1, 1);
    assert_eq!(c & 1 << 13, 0);
    // ptw exists on Sapphire Rapids (Golden Cove).
    let c = config("sapphirerapids", "ptw,fup_on_ptw").unwrap();
    assert_eq!(c & (1 << 12 | 1 << 5), 1 << 12 | 1 << 5);
}

#[test]
fn unknown_term_lists_the_known_ones() {
    let e = config("skylake", "cyc,bogus=1").unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::UnknownTerm { .. }), "{msg}");
    assert!(
        msg.contains("\"bogus\"") && msg.contains("mtc_period") && msg.contains("cyc_thresh"),
        "{msg}"
    );
}

#[test]
fn values_outside_caps_list_the_valid_ones() {
    let msg = config("skylake", "mtc_period=15").unwrap_err().to_string();
    assert!(msg.contains("Valid values are: 0,3,6,9"), "{msg}");
    assert!(msg.contains("caps/mtc_periods"), "{msg}");
    let msg = config("skylake", "psb_period=7").unwrap_err().to_string();
    assert!(msg.contains("Valid values are: 0-5"), "{msg}");
    // Sky Lake accepts cyc_thresh=13 (0x3fff); Ice Lake server stops at 12.
    config("skylake", "cyc,cyc_thresh=13").unwrap();
    let msg = config("icelake", "cyc,cyc_thresh=13")
        .unwrap_err()
        .to_string();
    assert!(msg.contains("Valid values are: 0-12"), "{msg}");
    let msg = config("sapphirerapids", "cyc,cyc_thresh=8")
        .unwrap_err()
        .to_string();
    assert!(msg.contains("Valid values are: 0-5"), "{msg}");
    // Too wide for the 4-bit field.
    let e = config("skylake", "mtc_period=16").unwrap_err();
    assert!(matches!(e, Error::BadTerm { .. }), "{e}");
}

#[test]
fn features_this_cpu_lacks() {
    let e = config("skylake", "ptw").unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Unsupported { .. }), "{msg}");
    assert!(
        msg.contains("`ptw`") && msg.contains("caps/ptwrite"),
        "{msg}"
    );
    let msg = config("skylake", "pwr_evt").unwrap_err().to_string();
    assert!(msg.contains("power_event_trace"), "{msg}");
    let msg = config("sapphirerapids", "event").unwrap_err().to_string();
    assert!(msg.contains("event_trace"), "{msg}");
    // fup_on_ptw alone is refused by the kernel; say so before it does.
    let msg = config("sapphirerapids", "fup_on_ptw")
        .unwrap_err()
        .to_string();
    assert!(msg.contains("needs ptw"), "{msg}");
}

/// cyc on a CPU whose caps/psb_cyc is 0 (a copy of the Skylake tree with
/// that one file changed, as on early Broadwell parts).
#[test]
fn cyc_without_psb_cyc() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("bus/event_source/devices/intel_pt");
    let src = sysfs("skylake").join("bus/event_source/devices/intel_pt");
    for sub in ["", "format", "caps"] {
        std::fs::create_dir_all(dev.join(sub)).unwrap();
        for e in std::fs::read_dir(src.join(sub)).unwrap() {
            let e = e.unwrap();
            if e.path().is_file() {
                std::fs::copy(e.path(), dev.join(sub).join(e.file_name())).unwrap();
            }
        }
    }
    std::fs::write(dev.join("caps/psb_cyc"), "0\n").unwrap();
    let p = Pmu::intel_pt(tmp.path()).unwrap();
    let msg = build_config(&p, &parse_event("cyc").unwrap().terms)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("`cyc`") && msg.contains("caps/psb_cyc is 0"),
        "{msg}"
    );
    // Without psb_cyc the default drops psb_period, as perf's does.
    let c = build_config(&p, &[]).unwrap();
    assert_eq!(c & 0xf00_0000, 0);
}

#[test]
fn no_pmu_mentions_ptsim() {
    let e = Pmu::intel_pt(&sysfs("no-pt")).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::NoIntelPt { .. }), "{msg}");
    assert!(msg.contains("ptsim"), "{msg}");
}

/// AUXTRACE_INFO words as perf 4.14 wrote them on the Skylake machine
/// (`perf script -D`: TSC bit 0x400, NoRETComp bit 0x800, MTC bit 0x200,
/// MTC freq bits 0x3c000, CYC bit 0x2, TSC:CTC 100/2, max non-turbo 12).
#[test]
fn auxtrace_info_as_perf_fills_it() {
    let info = config::intel_pt_info(
        &pmu("skylake"),
        &InfoOptions {
            per_cpu_mmaps: true,
            have_sched_switch: 3,
            ..Default::default()
        },
    );
    assert_eq!(info.pmu_type, 6);
    assert_eq!(info.tsc_bit, 0x400);
    assert_eq!(info.noretcomp_bit, 0x800);
    assert_eq!(info.mtc_bit, 0x200);
    assert_eq!(info.mtc_freq_bits, 0x3c000);
    assert_eq!(info.cyc_bit, 0x2);
    assert_eq!((info.tsc_ctc_ratio_n, info.tsc_ctc_ratio_d), (100, 2));
    assert_eq!(info.max_non_turbo_ratio, 12);
    assert!(info.per_cpu_mmaps && !info.snapshot_mode);
}

#[test]
fn attr_as_perf_opens_it() {
    let p = pmu("skylake");
    let a = config::intel_pt_attr(
        &p,
        0x300e601,
        &config::EventOptions {
            inherit: true,
            enable_on_exec: true,
            ..Default::default()
        },
    );
    assert_eq!(a.type_, 6);
    assert_eq!(a.config, 0x300e601);
    assert_eq!(a.sample_type, config::PT_SAMPLE_TYPE);
    assert_eq!((a.disabled(), a.inherit(), a.enable_on_exec()), (1, 1, 1));
    assert_eq!(
        (a.exclude_kernel(), a.exclude_hv(), a.sample_id_all()),
        (1, 1, 1)
    );
    let k = config::intel_pt_attr(
        &p,
        0x300e601,
        &config::EventOptions {
            kernel: true,
            ..Default::default()
        },
    );
    assert_eq!((k.exclude_kernel(), k.inherit()), (0, 0));
}

/// ptdec names a recording's config terms from sideband's table of perf's
/// intel_pt format bits: every format file of the fake trees agrees with it.
#[test]
fn sideband_term_table_matches_the_sysfs_format_files() {
    for cpu in ["skylake", "icelake", "sapphirerapids"] {
        let p = pmu(cpu);
        for (name, lo, width) in sideband::auxtrace_info::INTEL_PT_TERMS {
            let Some(f) = p.format(name) else {
                continue; // an older CPU without the term (notnt, event)
            };
            let mask = ((1u64 << width) - 1) << lo;
            assert_eq!(f.mask(), mask, "{cpu}: {name}");
        }
        for name in p.formats().keys() {
            assert!(
                sideband::auxtrace_info::INTEL_PT_TERMS
                    .iter()
                    .any(|t| t.0 == name),
                "{cpu}: format term {name} missing from the table"
            );
        }
    }
}
