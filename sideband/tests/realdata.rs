//! The real recordings in ../shared/realdata parse completely, and what we
//! read agrees with perf: record counts by kind (`perf report -D`'s
//! "Aggregated stats", the summary `perf script -D` dumps alongside), AUXTRACE
//! framing, AUXTRACE_INFO and TIME_CONV as `perf script -D` prints them.
//! Values committed from perf's output keep the tests meaningful without perf.

mod common;

use std::collections::BTreeMap;

use common::*;
use sideband::auxtrace_info::IntelPtInfo;
use sideband::file::PerfFile;
use sideband::record::{Record, TimeConv};

fn counts(list: &[(&str, u64)]) -> BTreeMap<String, u64> {
    list.iter().map(|&(k, v)| (k.to_string(), v)).collect()
}

#[test]
fn every_record_parses_and_counts_match_perf() {
    let perf = perf("every_record_parses_and_counts_match_perf");
    for name in FILES {
        let bytes = realdata(name);
        let f = PerfFile::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(f.warnings().is_empty(), "{name}: {:?}", f.warnings());
        let mut n = 0;
        for e in f.events() {
            e.unwrap_or_else(|e| panic!("{name}: {e}"));
            n += 1;
        }
        assert_eq!(n, f.raw_records().count());
        assert_eq!(
            f.data_range().end,
            f.header()
                .map_or(bytes.len() as u64, |h| h.data.offset + h.data.size)
        );
        let ours = our_counts(&f);
        println!("{name}: {ours:?}");
        if let Some(perf) = &perf {
            let theirs = perf_counts(perf, &pt_tests::realdata(name), f.is_pipe());
            assert_eq!(ours, theirs, "{name}: our counts vs perf report -D");
        }
    }
    // ../shared/realdata/README.md
    let bytes = realdata("perf.data.intel_pt-4.14");
    let f = PerfFile::parse(&bytes).unwrap();
    assert_eq!(
        our_counts(&f),
        counts(&[
            ("AUX", 10),
            ("AUXTRACE", 2),
            ("AUXTRACE_INFO", 1),
            ("COMM", 3),
            ("EXIT", 1),
            ("FINISHED_ROUND", 4),
            ("ITRACE_START", 2),
            ("MMAP", 56),
            ("MMAP2", 10),
            ("SAMPLE", 15),
            ("SWITCH_CPU_WIDE", 152),
            ("TIME_CONV", 1),
        ])
    );
    let f = PerfFile::parse(&realdata("tmon-alderlake-ptw.perf.data"))
        .map(|f| our_counts(&f))
        .unwrap();
    assert_eq!(
        f,
        counts(&[
            ("AUX", 3),
            ("AUXTRACE", 2),
            ("AUXTRACE_INFO", 1),
            ("COMM", 2),
            ("CPU_MAP", 1),
            ("EXIT", 2),
            ("FINISHED_INIT", 1),
            ("FINISHED_ROUND", 3),
            ("FORK", 1),
            ("ID_INDEX", 1),
            ("ITRACE_START", 2),
            ("KSYMBOL", 21),
            ("MMAP2", 4),
            ("SWITCH_CPU_WIDE", 130),
            ("THREAD_MAP", 1),
            ("TIME_CONV", 1),
        ])
    );
}

/// (offset as perf prints it, size, offset, reference, idx, tid, cpu)
type AuxtraceLine = (u64, u64, u64, u64, u32, u32, u32);

fn num(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => s.parse().unwrap(),
    }
}

fn ours_auxtrace(f: &PerfFile<'_>) -> Vec<AuxtraceLine> {
    // perf counts pipe offsets from after the 16-byte pipe header.
    let base = if f.is_pipe() { 16 } else { 0 };
    f.events()
        .filter_map(|e| {
            let (off, ev) = e.unwrap();
            match ev.record {
                Record::Auxtrace(a) => Some((
                    off - base,
                    a.data.len() as u64,
                    a.offset,
                    a.reference,
                    a.idx,
                    a.tid,
                    a.cpu,
                )),
                _ => None,
            }
        })
        .collect()
}

fn perf_auxtrace(dump: &str) -> Vec<AuxtraceLine> {
    dump.lines()
        .filter_map(|l| {
            let (head, tail) = l.split_once(" [0x30]: PERF_RECORD_AUXTRACE size: ")?;
            let off = num(head.split_whitespace().last()?);
            let v: Vec<&str> = tail.split_whitespace().collect();
            // size  offset: O  ref: R  idx: I  tid: T  cpu: C
            Some((
                off,
                num(v[0]),
                num(v[2]),
                num(v[4]),
                num(v[6]) as u32,
                num(v[8]) as u32,
                num(v[10]) as u32,
            ))
        })
        .collect()
}

/// The "  Name   value" lines perf prints under PERF_RECORD_AUXTRACE_INFO.
fn perf_auxtrace_info(dump: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let Some((_, rest)) = dump.split_once("PERF_RECORD_AUXTRACE_INFO type: 1\n") else {
        return m;
    };
    for l in rest.lines().take_while(|l| !l.trim().is_empty()) {
        if let Some((k, v)) = l.trim().rsplit_once(char::is_whitespace) {
            m.insert(k.trim().to_string(), v.to_string());
        }
    }
    m
}

fn check_info(name: &str, i: &IntelPtInfo, perf: &BTreeMap<String, String>) {
    let v = |k: &str| {
        num(perf
            .get(k)
            .unwrap_or_else(|| panic!("{name}: perf printed no {k:?}")))
    };
    assert_eq!(i.pmu_type, v("PMU Type"), "{name}");
    assert_eq!(i.time_shift, v("Time Shift"), "{name}");
    assert_eq!(i.time_mult, v("Time Muliplier"), "{name}");
    assert_eq!(i.time_zero, v("Time Zero"), "{name}");
    assert_eq!(i.cap_user_time_zero as u64, v("Cap Time Zero"), "{name}");
    assert_eq!(i.tsc_bit, v("TSC bit"), "{name}");
    assert_eq!(i.noretcomp_bit, v("NoRETComp bit"), "{name}");
    assert_eq!(i.have_sched_switch, v("Have sched_switch"), "{name}");
    assert_eq!(i.snapshot_mode as u64, v("Snapshot mode"), "{name}");
    assert_eq!(i.per_cpu_mmaps as u64, v("Per-cpu maps"), "{name}");
    assert_eq!(i.mtc_bit, v("MTC bit"), "{name}");
    assert_eq!(i.mtc_freq_bits, v("MTC freq bits"), "{name}");
    assert_eq!(i.tsc_ctc_ratio_n, v("TSC:CTC numerator"), "{name}");
    assert_eq!(i.tsc_ctc_ratio_d, v("TSC:CTC denominator"), "{name}");
    assert_eq!(i.cyc_bit, v("CYC bit"), "{name}");
    assert_eq!(i.max_non_turbo_ratio, v("Max non-turbo ratio"), "{name}");
    assert_eq!(
        i.filter.as_deref().map_or(0, |f| f.len() as u64),
        v("Filter string len."),
        "{name}"
    );
    if let Some(c) = perf.get("Cap Event Trace") {
        assert_eq!(i.cap_event_trace(), Some(num(c)), "{name}");
    }
}

/// The "... Name  value" lines perf prints under PERF_RECORD_TIME_CONV.
fn perf_time_conv(dump: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    let Some((_, rest)) = dump.split_once("PERF_RECORD_TIME_CONV\n") else {
        return m;
    };
    for l in rest.lines().take_while(|l| l.starts_with("... ")) {
        if let Some((k, v)) = l
            .trim_start_matches("... ")
            .trim()
            .rsplit_once(char::is_whitespace)
        {
            m.insert(k.trim().to_string(), num(v));
        }
    }
    m
}

fn ours_info_and_conv(f: &PerfFile<'_>) -> (IntelPtInfo, TimeConv) {
    let mut info = None;
    let mut conv = None;
    for e in f.events() {
        match e.unwrap().1.record {
            Record::AuxtraceInfo(i) => {
                assert_eq!(i.kind, sideband::auxtrace_info::AUXTRACE_INTEL_PT);
                let pt = i.intel_pt().unwrap();
                assert_eq!(
                    pt.to_words(),
                    i.priv_words,
                    "the typed view gives the words back"
                );
                info = Some(pt);
            }
            Record::TimeConv(t) => conv = Some(t),
            _ => {}
        }
    }
    (info.unwrap(), conv.unwrap())
}

#[test]
fn auxtrace_info_time_conv_and_auxtrace_match_perf_dump() {
    // Committed from `perf script -D -i perf.data.intel_pt-4.14` (perf 6.1).
    let bytes = realdata("perf.data.intel_pt-4.14");
    let f = PerfFile::parse(&bytes).unwrap();
    assert_eq!(
        ours_auxtrace(&f),
        vec![
            (0x29c0, 0x2fd0, 0, 0xbc4cd519a6, 0, 3174, 0),
            (0x7788, 0x21a00, 0, 0xbc4cd584c2, 3, 3174, 3)
        ]
    );
    let (info, conv) = ours_info_and_conv(&f);
    assert_eq!(
        info,
        IntelPtInfo {
            pmu_type: 6,
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
            cyc_bit: 0x2,
            max_non_turbo_ratio: 12,
            filter: None,
            extra_words: vec![],
        }
    );
    assert_eq!(
        conv,
        TimeConv {
            time_shift: 31,
            time_mult: 1789569706,
            time_zero: 18446744041015200657,
            ..TimeConv::default()
        }
    );
    let tmon = realdata("tmon-alderlake-ptw.perf.data");
    let t = PerfFile::parse(&tmon).unwrap();
    let (info, conv) = ours_info_and_conv(&t);
    assert_eq!(
        info.extra_words,
        vec![0],
        "18 words: cap_event_trace after the filter length"
    );
    assert_eq!(info.pmu_type, 12);
    assert_eq!(
        conv,
        TimeConv {
            time_shift: 31,
            time_mult: 1016800969,
            time_zero: 18446744061076016896,
            time_cycles: Some(0),
            time_mask: Some(0),
            cap_user_time_zero: Some(true),
            cap_user_time_short: Some(false),
        }
    );

    let Some(perf) = perf("auxtrace_info_time_conv_and_auxtrace_match_perf_dump") else {
        return;
    };
    for name in FILES {
        let bytes = realdata(name);
        let f = PerfFile::parse(&bytes).unwrap();
        let (dump, err, ok) = run_perf(
            &perf,
            &["script", "-D"],
            &pt_tests::realdata(name),
            f.is_pipe(),
        );
        assert!(ok, "{name}: perf script -D failed: {err}");
        let ours = ours_auxtrace(&f);
        assert!(!ours.is_empty());
        assert_eq!(ours, perf_auxtrace(&dump), "{name}: AUXTRACE records");
        let (info, conv) = ours_info_and_conv(&f);
        check_info(name, &info, &perf_auxtrace_info(&dump));
        let pc = perf_time_conv(&dump);
        assert_eq!(conv.time_shift, pc["Time Shift"], "{name}");
        assert_eq!(conv.time_mult, pc["Time Muliplier"], "{name}");
        assert_eq!(conv.time_zero, pc["Time Zero"], "{name}");
        if let Some(c) = conv.time_cycles {
            assert_eq!(c, pc["Time Cycles"], "{name}");
            assert_eq!(conv.time_mask, Some(pc["Time Mask"]), "{name}");
            assert_eq!(
                conv.cap_user_time_zero,
                Some(pc["Cap Time Zero"] != 0),
                "{name}"
            );
            assert_eq!(
                conv.cap_user_time_short,
                Some(pc["Cap Time Short"] != 0),
                "{name}"
            );
        } else {
            assert!(!pc.contains_key("Time Cycles"), "{name}");
        }
    }
}

#[test]
fn features_of_the_real_files() {
    let bytes = realdata("perf.data.intel_pt-4.14");
    let f = PerfFile::parse(&bytes).unwrap();
    let ft = f.features();
    assert_eq!(ft.cpuid().unwrap().as_deref(), Some("GenuineIntel,6,78,3"));
    assert_eq!(ft.osrelease().unwrap().as_deref(), Some("4.14.18"));
    assert_eq!(ft.hostname().unwrap().as_deref(), Some("localhost"));
    assert_eq!(
        ft.cpudesc().unwrap().as_deref(),
        Some("Intel(R) Core(TM) m7-6Y75 CPU @ 1.20GHz")
    );
    let n = ft.nrcpus().unwrap().unwrap();
    assert_eq!((n.available, n.online), (4, 4));
    assert_eq!(
        ft.cmdline().unwrap().unwrap().first().map(String::as_str),
        Some("/usr/bin/perf")
    );
    let desc = ft.event_desc().unwrap().unwrap();
    let names: Vec<_> = desc.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["intel_pt//", "cycles", "dummy:u", "dummy:u"]);
    for (d, e) in desc.iter().zip(f.attrs().entries()) {
        assert_eq!(d.attr, e.attr);
        assert_eq!(d.ids, e.ids);
    }
    let index = ft.auxtrace_index().unwrap().unwrap();
    let offsets: Vec<_> = index.iter().map(|e| (e.file_offset, e.size)).collect();
    assert_eq!(offsets, [(0x29c0, 48), (0x7788, 48)]);
    let ids = ft.build_ids().unwrap().unwrap();
    assert_eq!(ids[0].filename, "[kernel.kallsyms]");
    assert_eq!(
        ids[0].build_id,
        [
            0x67, 0x26, 0x79, 0xce, 0xae, 0xcf, 0x17, 0xb7, 0xa8, 0x79, 0xe5, 0x6c, 0x56, 0x80,
            0x2a, 0xfc, 0x56, 0x8a, 0xa2, 0x42
        ]
    );
    assert_eq!(ft.clock_data().unwrap(), None);

    let t = realdata("tmon-alderlake-ptw.perf.data");
    let t = PerfFile::parse(&t).unwrap();
    let ft = t.features();
    assert_eq!(ft.cpuid().unwrap().as_deref(), Some("GenuineIntel,6,151,2"));
    assert_eq!(
        ft.version().unwrap().as_deref(),
        Some("6.1.rc1.gbfd6b5584b97")
    );
    let ids = ft.build_ids().unwrap().unwrap();
    assert!(ids
        .iter()
        .all(|e| e.misc & sideband::feature::MISC_BUILD_ID_SIZE != 0));
    assert_eq!(ids.len(), 173);
    // Pipe mode: features arrive as HEADER_FEATURE records.
    let p = realdata("perf.data.piped.intel_pt-4.14");
    let p = PerfFile::parse(&p).unwrap();
    assert!(p.is_pipe());
    assert_eq!(p.attrs().len(), 4);
    assert_eq!(
        p.features().cpuid().unwrap().as_deref(),
        Some("GenuineIntel,6,78,3")
    );
    assert_eq!(p.features().event_desc().unwrap().unwrap().len(), 4);
}
