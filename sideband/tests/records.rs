//! Every record kind on hand-built values and bytes: parse(serialize(x)) == x
//! and serialize(parse(bytes)) == bytes, with two attrs of different
//! sample_id layouts; malformed bytes are errors; a file and a pipe stream
//! built from these records round-trip; an unfinalized file is read up to its
//! last complete record with a warning.

use std::borrow::Cow;
use std::io::Cursor;

use sideband::attr::{flags, Attr, AttrSet};
use sideband::auxtrace_info::{AuxtraceInfo, IntelPtInfo};
use sideband::endian::Le;
use sideband::feature::{self, BuildIdEntry, ClockData, EventDesc, NrCpus};
use sideband::file::PerfFile;
use sideband::parse::{parse_event, payload_len, RawRecord, RecordHeader};
use sideband::record::{
    misc, Auxtrace, Event, FileId, IdIndexEntry, Mmap, Record, SampleId, Task, TimeConv,
};
use sideband::sample::{sample_type as st, Sample};
use sideband::serialize::serialize_event;
use sideband::writer::{FileWriter, PipeWriter};

const PT_TYPE: u32 = 8;

/// intel_pt (ids 1, 2: IP|TID|TIME|CPU|IDENTIFIER) and cycles (ids 3, 4:
/// IP|TID|TIME|PERIOD|IDENTIFIER), both sample_id_all: trailers of 32 and 24 bytes.
fn attrs() -> AttrSet {
    let mut a = AttrSet::new();
    a.push(
        Attr {
            kind: PT_TYPE,
            size: 128,
            config: 0x300e601,
            sample_period_or_freq: 1,
            sample_type: st::IP | st::TID | st::TIME | st::CPU | st::IDENTIFIER,
            read_format: 4,
            flags: flags::SAMPLE_ID_ALL
                | flags::DISABLED
                | flags::ENABLE_ON_EXEC
                | flags::EXCLUDE_KERNEL,
            ..Attr::default()
        },
        vec![1, 2],
    );
    a.push(
        Attr {
            kind: 1,
            size: 128,
            config: 9,
            sample_period_or_freq: 1,
            sample_type: st::IP | st::TID | st::TIME | st::PERIOD | st::IDENTIFIER,
            flags: flags::SAMPLE_ID_ALL
                | flags::MMAP
                | flags::MMAP2
                | flags::COMM
                | flags::COMM_EXEC
                | flags::TASK,
            ..Attr::default()
        },
        vec![3, 4],
    );
    a
}

fn sid1(time: u64) -> SampleId {
    SampleId {
        pid: Some(100),
        tid: Some(101),
        time: Some(time),
        cpu: Some(2),
        identifier: Some(1),
        ..SampleId::default()
    }
}

fn sid2(time: u64) -> SampleId {
    SampleId {
        pid: Some(100),
        tid: Some(101),
        time: Some(time),
        identifier: Some(3),
        ..SampleId::default()
    }
}

fn ev(misc: u16, record: Record<'static>, sample_id: SampleId) -> Event<'static> {
    Event {
        misc,
        record,
        sample_id,
    }
}

fn pt_info() -> IntelPtInfo {
    IntelPtInfo {
        pmu_type: PT_TYPE as u64,
        time_shift: 31,
        time_mult: 1789569706,
        time_zero: 18446744041015200657,
        cap_user_time_zero: true,
        tsc_bit: 0x400,
        noretcomp_bit: 0x800,
        have_sched_switch: 0,
        snapshot_mode: false,
        per_cpu_mmaps: false,
        mtc_bit: 0x200,
        mtc_freq_bits: 0x3c000,
        tsc_ctc_ratio_n: 100,
        tsc_ctc_ratio_d: 2,
        cyc_bit: 0x2,
        max_non_turbo_ratio: 12,
        filter: None,
        extra_words: vec![0],
    }
}

/// PSB, PSBEND, TIP.PGE 0x401000, TNT.8 "T", TIP.PGD (no IP), padded to 8
/// bytes (perf pads AUXTRACE data to 8).
fn pt_bytes() -> Vec<u8> {
    let mut v = [0x02, 0x82].repeat(8);
    v.extend_from_slice(&[0x02, 0x23]);
    v.extend_from_slice(&[0x71, 0x00, 0x10, 0x40, 0x00, 0x00, 0x00]);
    v.extend_from_slice(&[0x06, 0x01]);
    v.resize(32, 0);
    v
}

/// One event of every kind this crate types (plus Unknown kernel and user records).
fn all_events() -> Vec<Event<'static>> {
    let mmap = Mmap {
        pid: 100,
        tid: 100,
        addr: 0x400000,
        len: 0x2000,
        pgoff: 0,
        file_id: None,
        prot: None,
        flags: None,
        filename: "/usr/bin/true".into(),
    };
    let task = Task {
        pid: 100,
        ppid: 1,
        tid: 101,
        ptid: 1,
        time: 1000,
    };
    vec![
        ev(
            0,
            Record::TimeConv(TimeConv {
                time_shift: 31,
                time_mult: 1789569706,
                time_zero: 5,
                ..TimeConv::default()
            }),
            SampleId::default(),
        ),
        ev(
            0,
            Record::TimeConv(TimeConv {
                time_shift: 31,
                time_mult: 1789569706,
                time_zero: 5,
                time_cycles: Some(7),
                time_mask: Some(0xffff),
                cap_user_time_zero: Some(true),
                cap_user_time_short: Some(false),
            }),
            SampleId::default(),
        ),
        ev(
            0,
            Record::AuxtraceInfo(AuxtraceInfo::from_intel_pt(&pt_info())),
            SampleId::default(),
        ),
        ev(
            misc::USER,
            Record::Comm {
                pid: 100,
                tid: 101,
                comm: "true".into(),
            },
            sid2(10),
        ),
        ev(
            misc::USER | misc::COMM_EXEC,
            Record::Comm {
                pid: 100,
                tid: 101,
                comm: "exactly16bytes!".into(),
            },
            sid2(11),
        ),
        ev(misc::USER, Record::Mmap(mmap.clone()), sid2(12)),
        ev(
            misc::USER,
            Record::Mmap(Mmap {
                file_id: Some(FileId::Inode {
                    maj: 8,
                    min: 1,
                    ino: 1234,
                    ino_generation: 5,
                }),
                prot: Some(5),
                flags: Some(2),
                filename: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
                ..mmap.clone()
            }),
            sid2(13),
        ),
        ev(
            misc::USER | misc::MMAP_BUILD_ID,
            Record::Mmap(Mmap {
                file_id: Some(FileId::BuildId(vec![
                    0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                ])),
                prot: Some(5),
                flags: Some(2),
                ..mmap.clone()
            }),
            sid2(14),
        ),
        ev(0, Record::Fork(task), sid2(15)),
        ev(0, Record::Exit(task), sid2(16)),
        ev(
            misc::SWITCH_OUT | misc::SWITCH_OUT_PREEMPT,
            Record::Switch,
            sid1(17),
        ),
        ev(
            0,
            Record::SwitchCpuWide {
                next_prev_pid: 0,
                next_prev_tid: 0,
            },
            sid1(18),
        ),
        ev(0, Record::Lost { id: 1, lost: 99 }, sid1(19)),
        ev(0, Record::LostSamples { lost: 3 }, sid2(20)),
        ev(
            0,
            Record::Aux {
                aux_offset: 0,
                aux_size: 32,
                flags: 0x01 | 0x04,
            },
            sid1(21),
        ),
        ev(0, Record::ItraceStart { pid: 100, tid: 101 }, sid1(22)),
        ev(
            0,
            Record::Throttle {
                unthrottle: false,
                time: 23,
                id: 3,
                stream_id: 3,
            },
            sid2(23),
        ),
        ev(
            0,
            Record::Throttle {
                unthrottle: true,
                time: 24,
                id: 3,
                stream_id: 3,
            },
            sid2(24),
        ),
        ev(
            misc::KERNEL,
            Record::Ksymbol {
                addr: 0xffffffffc0000000,
                len: 0x100,
                ksym_type: 1,
                flags: 0,
                name: "bpf_prog_6deef7357e7b4530".into(),
            },
            sid2(25),
        ),
        ev(
            misc::KERNEL,
            Record::TextPoke {
                addr: 0xffffffff81000000,
                old_bytes: vec![0x0f, 0x1f, 0x44, 0, 0],
                new_bytes: vec![0xe9, 1, 2, 3, 4],
            },
            sid2(26),
        ),
        ev(
            misc::USER,
            Record::Sample(Sample {
                identifier: Some(3),
                ip: Some(0x401000),
                pid: Some(100),
                tid: Some(101),
                time: Some(27),
                period: Some(4000),
                ..Sample::default()
            }),
            sid2(27),
        ),
        ev(
            misc::USER,
            Record::Sample(Sample {
                identifier: Some(2),
                ip: Some(0x401004),
                pid: Some(100),
                tid: Some(101),
                time: Some(28),
                cpu: Some(2),
                rest: Cow::Owned(vec![1, 2, 3, 4, 5, 6, 7, 8]),
                ..Sample::default()
            }),
            SampleId {
                pid: Some(100),
                tid: Some(101),
                time: Some(28),
                cpu: Some(2),
                identifier: Some(2),
                ..SampleId::default()
            },
        ),
        ev(
            0,
            Record::Unknown {
                kind: 16,
                body: Cow::Owned(vec![0; 16]),
            },
            sid2(29),
        ),
        ev(
            0,
            Record::Auxtrace(Auxtrace {
                offset: 0,
                reference: 0xbc4cd519a6,
                idx: 0,
                tid: 101,
                cpu: u32::MAX,
                data: Cow::Owned(pt_bytes()),
            }),
            SampleId::default(),
        ),
        ev(0, Record::FinishedRound, SampleId::default()),
        ev(0, Record::FinishedInit, SampleId::default()),
        ev(
            0,
            Record::IdIndex(vec![
                IdIndexEntry {
                    id: 1,
                    idx: 0,
                    cpu: 0,
                    tid: 101,
                },
                IdIndexEntry {
                    id: 3,
                    idx: 0,
                    cpu: 0,
                    tid: 101,
                },
            ]),
            SampleId::default(),
        ),
        ev(
            0,
            Record::ThreadMap(vec![(101, "true".into()), (102, "sixteen-bytes-xy".into())]),
            SampleId::default(),
        ),
        ev(0, Record::CpuMap(vec![0, 1, 2]), SampleId::default()),
        ev(
            0,
            Record::AuxtraceError {
                data: Cow::Owned(vec![1; 104]),
            },
            SampleId::default(),
        ),
        ev(
            0,
            Record::HeaderBuildId {
                data: Cow::Owned(vec![0; 92]),
            },
            SampleId::default(),
        ),
        ev(
            0,
            Record::HeaderTracingData {
                data: Cow::Owned(vec![7; 24]),
            },
            SampleId::default(),
        ),
        ev(
            0,
            Record::HeaderFeature {
                feature: 3,
                data: Cow::Owned(feature::encode_string("host")),
            },
            SampleId::default(),
        ),
        ev(
            0,
            Record::HeaderAttr {
                attr: attrs().entries()[0].attr,
                ids: vec![1, 2],
            },
            SampleId::default(),
        ),
        ev(
            0,
            Record::Unknown {
                kind: 81,
                body: Cow::Owned(vec![9; 8]),
            },
            SampleId::default(),
        ),
    ]
}

fn frame(bytes: &[u8]) -> RawRecord<'_> {
    let header = RecordHeader::parse::<Le>(bytes).unwrap();
    let size = header.size as usize;
    let plen = payload_len::<Le>(&header, &bytes[..size]).unwrap() as usize;
    assert_eq!(bytes.len(), size + plen);
    RawRecord {
        offset: 0,
        header,
        bytes: &bytes[..size],
        payload: &bytes[size..],
    }
}

#[test]
fn every_kind_round_trips() {
    let a = attrs();
    for x in all_events() {
        let mut bytes = Vec::new();
        let n = serialize_event(&a, &x, &mut bytes).unwrap();
        assert_eq!(n % 4, 0, "{:?}", x.record);
        let back = parse_event::<Le>(&a, &frame(&bytes)).unwrap();
        assert_eq!(back, x, "parse(serialize(x))");
        let mut again = Vec::new();
        serialize_event(&a, &back, &mut again).unwrap();
        assert_eq!(again, bytes, "serialize(parse(bytes)) for {:?}", x.record);
    }
}

#[test]
fn hand_built_bytes_round_trip() {
    // From `perf script -D` of the 4.14 recording: SWITCH_CPU_WIDE OUT,
    // trailer pid/tid 1760, time 641258080789, cpu 3, identifier 0x87.
    let bytes: [u8; 48] = [
        0x0f, 0, 0, 0, 0, 0x20, 0x30, 0, 0xe0, 0x06, 0, 0, 0xe0, 0x06, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0x15, 0xca, 0xf5, 0x4d, 0x95, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0x87, 0, 0, 0, 0, 0, 0,
        0,
    ];
    let mut a = AttrSet::new();
    a.push(
        Attr {
            size: 112,
            sample_type: st::IP | st::TID | st::TIME | st::CPU | st::IDENTIFIER,
            flags: flags::SAMPLE_ID_ALL,
            ..Attr::default()
        },
        vec![0x86, 0x87],
    );
    a.push(
        Attr {
            size: 112,
            sample_type: st::IP | st::TID | st::TIME | st::PERIOD | st::IDENTIFIER,
            flags: flags::SAMPLE_ID_ALL,
            ..Attr::default()
        },
        vec![0x88],
    );
    let e = parse_event::<Le>(&a, &frame(&bytes)).unwrap();
    assert_eq!(e.misc, misc::SWITCH_OUT);
    assert_eq!(
        e.record,
        Record::SwitchCpuWide {
            next_prev_pid: 1760,
            next_prev_tid: 1760
        }
    );
    assert_eq!(
        e.sample_id,
        SampleId {
            pid: Some(0),
            tid: Some(0),
            time: Some(641258080789),
            cpu: Some(3),
            identifier: Some(0x87),
            ..SampleId::default()
        }
    );
    let mut out = Vec::new();
    serialize_event(&a, &e, &mut out).unwrap();
    assert_eq!(out, bytes);

    // FINISHED_ROUND and a short TIME_CONV.
    let fr = [68u8, 0, 0, 0, 0, 0, 8, 0];
    assert_eq!(
        parse_event::<Le>(&a, &frame(&fr)).unwrap().record,
        Record::FinishedRound
    );
    let mut tc = vec![79u8, 0, 0, 0, 0, 0, 32, 0];
    for v in [31u64, 1789569706, 18446744041015200657] {
        tc.extend_from_slice(&v.to_le_bytes());
    }
    let e = parse_event::<Le>(&a, &frame(&tc)).unwrap();
    assert_eq!(
        e.record,
        Record::TimeConv(TimeConv {
            time_shift: 31,
            time_mult: 1789569706,
            time_zero: 18446744041015200657,
            ..TimeConv::default()
        })
    );
    let mut out = Vec::new();
    serialize_event(&a, &e, &mut out).unwrap();
    assert_eq!(out, tc);
}

#[test]
fn malformed_records_are_errors() {
    let a = attrs();
    let mut mmap2 = Vec::new();
    serialize_event(&a, &all_events()[7], &mut mmap2).unwrap();
    assert_eq!(mmap2[40], 20, "build_id_size");
    mmap2[40] = 21;
    let err = parse_event::<Le>(&a, &frame(&mmap2))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("MMAP2 record at offset 0x0") && err.contains("build_id_size 21"),
        "{err}"
    );

    // Every record cut short (size field adjusted) is an error or an untyped record, never a panic.
    for x in all_events() {
        let mut bytes = Vec::new();
        serialize_event(&a, &x, &mut bytes).unwrap();
        let rec = frame(&bytes);
        for cut in 8..rec.bytes.len() {
            let mut b = rec.bytes[..cut].to_vec();
            b[6..8].copy_from_slice(&(cut as u16).to_le_bytes());
            let h = RecordHeader::parse::<Le>(&b).unwrap();
            let r = RawRecord {
                offset: 0,
                header: h,
                bytes: &b,
                payload: rec.payload,
            };
            let _ = parse_event::<Le>(&a, &r);
        }
    }
    // A sample whose identifier matches no attr.
    let mut s = Vec::new();
    serialize_event(&a, &all_events()[20], &mut s).unwrap();
    s[8] = 99;
    let err = parse_event::<Le>(&a, &frame(&s)).unwrap_err().to_string();
    assert!(err.starts_with("SAMPLE record"), "{err}");
    // AUXTRACE whose payload is longer than announced (shorter is the
    // record a cut file ends in, whose data present is decoded).
    let mut x = Vec::new();
    serialize_event(&a, &all_events()[23], &mut x).unwrap();
    x.extend_from_slice(&[0; 8]);
    let h = RecordHeader::parse::<Le>(&x).unwrap();
    let r = RawRecord {
        offset: 0x40,
        header: h,
        bytes: &x[..48],
        payload: &x[48..],
    };
    assert!(parse_event::<Le>(&a, &r)
        .unwrap_err()
        .to_string()
        .contains("AUXTRACE record at offset 0x40"));
}

fn features() -> Vec<(u32, Vec<u8>)> {
    let a = attrs();
    vec![
        (
            feature::id::BUILD_ID,
            feature::encode_build_ids(&[BuildIdEntry {
                misc: misc::USER | feature::MISC_BUILD_ID_SIZE,
                pid: -1,
                build_id: vec![0xab; 20],
                filename: "/usr/bin/true".into(),
            }])
            .unwrap(),
        ),
        (feature::id::HOSTNAME, feature::encode_string("testhost")),
        (feature::id::OSRELEASE, feature::encode_string("6.1.0-test")),
        (feature::id::VERSION, feature::encode_string("6.1")),
        (feature::id::ARCH, feature::encode_string("x86_64")),
        (
            feature::id::NRCPUS,
            feature::encode_nrcpus(NrCpus {
                available: 4,
                online: 4,
            }),
        ),
        (
            feature::id::CPUDESC,
            feature::encode_string("Intel(R) Core(TM) m7-6Y75 CPU @ 1.20GHz"),
        ),
        (
            feature::id::CPUID,
            feature::encode_string("GenuineIntel,6,78,3"),
        ),
        (
            feature::id::CMDLINE,
            feature::encode_cmdline(&["ptsim".into(), "-o".into(), "x".into()]),
        ),
        (
            feature::id::EVENT_DESC,
            feature::encode_event_desc(&[
                EventDesc {
                    attr: a.entries()[0].attr,
                    name: "intel_pt//u".into(),
                    ids: vec![1, 2],
                },
                EventDesc {
                    attr: a.entries()[1].attr,
                    name: "dummy:u".into(),
                    ids: vec![3, 4],
                },
            ])
            .unwrap(),
        ),
        (feature::id::CLOCKID, feature::encode_u64(1)),
        (
            feature::id::CLOCK_DATA,
            feature::encode_clock_data(ClockData {
                version: 1,
                clockid: 1,
                tod_ns: 1_700_000_000_000_000_000,
                clockid_ns: 5,
            }),
        ),
    ]
}

fn build_file(events: &[Event<'_>]) -> Vec<u8> {
    let mut w = FileWriter::new(Cursor::new(Vec::new()), attrs()).unwrap();
    for (id, data) in features() {
        w.set_feature(id, data).unwrap();
    }
    for e in events {
        w.write_event(e).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// The events a file-mode perf.data can hold (no pipe-only records).
fn file_events() -> Vec<Event<'static>> {
    all_events()
        .into_iter()
        .filter(|e| {
            !matches!(
                e.record,
                Record::HeaderAttr { .. }
                    | Record::HeaderFeature { .. }
                    | Record::HeaderTracingData { .. }
            )
        })
        .collect()
}

#[test]
fn files_and_streams_built_from_records_round_trip() {
    let events = file_events();
    let bytes = build_file(&events);
    let f = PerfFile::parse(&bytes).unwrap();
    assert_eq!(f.warnings().len(), 1, "{:?}", f.warnings());
    assert!(f.warnings()[0].starts_with("COMPRESSED records"));
    assert_eq!(f.attrs(), &attrs());
    let back: Vec<_> = f.events().map(|e| e.unwrap().1).collect();
    assert_eq!(back, events);
    for (id, data) in features() {
        assert_eq!(f.features().raw(id), Some(&data[..]), "feature {id}");
    }
    assert_eq!(
        f.features().cpuid().unwrap().as_deref(),
        Some("GenuineIntel,6,78,3")
    );
    let index = f.features().auxtrace_index().unwrap().unwrap();
    assert_eq!(index.len(), 1);
    let (at, e) = f
        .events()
        .map(|e| e.unwrap())
        .find(|(_, e)| matches!(e.record, Record::Auxtrace(_)))
        .unwrap();
    assert_eq!((index[0].file_offset, index[0].size), (at, 48));
    assert!(matches!(e.record, Record::Auxtrace(ref a) if a.data == pt_bytes()));
    assert_eq!(build_file(&back), bytes, "write -> read -> write");

    // Pipe mode: every record, features as records.
    let mut w = PipeWriter::new(Vec::new(), attrs()).unwrap();
    for (id, data) in features() {
        w.write_feature(id, &data).unwrap();
    }
    for e in all_events()
        .iter()
        .filter(|e| !matches!(e.record, Record::HeaderAttr { .. }))
    {
        w.write_event(e).unwrap();
    }
    let stream = w.finish().unwrap();
    let p = PerfFile::parse(&stream).unwrap();
    assert!(p.is_pipe() && p.warnings().len() == 1);
    assert_eq!(p.attrs(), &attrs());
    assert_eq!(
        p.features().hostname().unwrap().as_deref(),
        Some("host"),
        "the last HOSTNAME record wins"
    );
    let n = p.events().filter(|e| e.is_ok()).count();
    assert_eq!(n, p.raw_records().count());
    assert_eq!(n, 2 + features().len() + all_events().len() - 1);
}

#[test]
fn unfinalized_file_is_read_up_to_its_last_complete_record() {
    let events = file_events();
    let full = build_file(&events);
    let f = PerfFile::parse(&full).unwrap();
    let data = f.data_range();
    // What a killed recorder leaves: data size 0, no feature sections, the
    // last record cut in the middle.
    let offsets: Vec<u64> = f.raw_records().map(|r| r.offset).collect();
    let last = offsets[offsets.len() - 1];
    let mut b = full[..(last as usize + 5)].to_vec();
    b[48..56].copy_from_slice(&0u64.to_le_bytes());
    let g = PerfFile::parse(&b).unwrap();
    assert_eq!(g.warnings().len(), 2, "{:?}", g.warnings());
    assert!(g.warnings()[0].contains("data size is 0"));
    assert!(g.warnings()[1].contains(&format!("{last:#x}")));
    assert!(g.features().sections().is_empty());
    let read: Vec<_> = g.events().map(|e| e.unwrap().1).collect();
    assert_eq!(read, events[..events.len() - 1]);
    assert_eq!(g.data_range(), data.start..last);
    // A finalized header whose data runs past the end of the file: the
    // file was cut inside its data section; salvaged the same way.
    let g = PerfFile::parse(&full[..(last as usize + 5)]).unwrap();
    assert!(
        g.warnings()[0].contains("cut inside its data section"),
        "{:?}",
        g.warnings()
    );
    let read: Vec<_> = g.events().map(|e| e.unwrap().1).collect();
    assert_eq!(read, events[..events.len() - 1]);
}

#[test]
fn a_file_cut_inside_its_features_keeps_its_whole_data_section() {
    let events = file_events();
    let full = build_file(&events);
    let f = PerfFile::parse(&full).unwrap();
    let data = f.data_range();
    assert!(f.features().sections().len() > 1);
    // Every cut after the data section: all records, a warning, and the
    // features that are still whole.
    for cut in (data.end as usize + 1)..full.len() {
        let g = PerfFile::parse(&full[..cut]).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert_eq!(g.data_range(), data, "cut at {cut}");
        assert!(
            g.warnings()
                .iter()
                .any(|w| w.contains("cut inside its feature sections")),
            "cut at {cut}: {:?}",
            g.warnings()
        );
        assert_eq!(g.events().count(), events.len(), "cut at {cut}");
        assert!(g.features().sections().len() < f.features().sections().len());
    }
}

#[test]
fn a_killed_writer_leaves_a_file_read_to_its_last_complete_record() {
    // What FileWriter leaves when its process dies: the header as written
    // at the start or at the last sync_header, records after it, no features.
    let events = file_events();
    let mut w = FileWriter::new(std::io::Cursor::new(Vec::new()), attrs()).unwrap();
    let at_start = w.get_ref().get_ref().clone();
    let g = PerfFile::parse(&at_start).unwrap();
    assert_eq!(g.events().count(), 0);
    assert!(g.warnings()[0].contains("was cut"), "{:?}", g.warnings());
    let half = events.len() / 2;
    for e in &events[..half] {
        w.write_event(e).unwrap();
    }
    w.sync_header().unwrap();
    for e in &events[half..] {
        w.write_event(e).unwrap();
    }
    let bytes = w.get_ref().get_ref().clone();
    let g = PerfFile::parse(&bytes).unwrap();
    assert!(
        g.warnings()[0].contains("was cut") && g.warnings()[0].contains("did not finish"),
        "{:?}",
        g.warnings()
    );
    let read: Vec<_> = g.events().map(|e| e.unwrap().1).collect();
    assert_eq!(read, events);
    // A finished file has no such warning.
    let done = w.finish().unwrap().into_inner();
    let g = PerfFile::parse(&done).unwrap();
    assert!(
        !g.warnings().iter().any(|w| w.contains("cut")),
        "{:?}",
        g.warnings()
    );
    assert_eq!(g.events().count(), events.len());
}

/// Ids given only at the end (`FileWriter::set_ids`, for instances that
/// appear while records are written): the reader maps every record to its
/// attr by them, and perf reads the file as it reads one with the ids up front.
#[test]
fn ids_set_after_the_start_are_found_where_the_attrs_say() {
    let events = file_events();
    let want = attrs();
    let mut late = AttrSet::new();
    for e in want.entries() {
        late.push(e.attr, Vec::new());
    }
    let mut w = FileWriter::new(Cursor::new(Vec::new()), late).unwrap();
    for (i, e) in want.entries().iter().enumerate() {
        w.set_ids(i, e.ids.clone()).unwrap();
    }
    assert!(w.set_ids(2, vec![9]).is_err(), "there is no attr #2");
    for (id, data) in features() {
        w.set_feature(id, data).unwrap();
    }
    for e in &events {
        w.write_event(e).unwrap();
    }
    let bytes = w.finish().unwrap().into_inner();
    let f = PerfFile::parse(&bytes).unwrap();
    assert_eq!(f.attrs(), &want);
    let read: Vec<_> = f.events().map(|e| e.unwrap().1).collect();
    assert_eq!(read, events);
    // The same records and ids as a file written with the ids up front.
    let up_front = build_file(&events);
    let up_front = PerfFile::parse(&up_front).unwrap();
    assert_eq!(f.attrs(), up_front.attrs());
    // perf maps every record to its attr by these ids (an unknown id is
    // an error), so it reads the file without a word.
    let Some(perf) = perf_bin() else { return };
    let events = perf_events();
    let mut w = FileWriter::new(Cursor::new(Vec::new()), {
        let mut late = AttrSet::new();
        for e in want.entries() {
            late.push(e.attr, Vec::new());
        }
        late
    })
    .unwrap();
    for (i, e) in want.entries().iter().enumerate() {
        w.set_ids(i, e.ids.clone()).unwrap();
    }
    for e in &events {
        w.write_event(e).unwrap();
    }
    let bytes = w.finish().unwrap().into_inner();
    let stdout = perf_script_dump(&perf, &bytes);
    assert!(
        stdout.contains("PERF_RECORD_ITRACE_START pid: 100 tid: 101"),
        "{stdout}"
    );
}

#[test]
fn perf_reads_a_small_file_built_from_records() {
    let Some(perf) = perf_bin() else { return };
    // What ptrec/ptsim write; the point is the format.
    let events = perf_events();
    let bytes = build_file(&events);
    let stdout = perf_script_dump(&perf, &bytes);
    for want in [
        "PERF_RECORD_AUXTRACE size: 0x20",
        "TIP.PGE 0x401000",
        "TNT T (1)",
        "TIP.PGD",
        "TIP.PGD no ip",
        "PERF_RECORD_MMAP2 100/100: [0x400000(0x2000) @ 0 08:01 1234 5]",
        "PERF_RECORD_COMM exec: exactly16bytes!:100/101",
        "PERF_RECORD_ITRACE_START pid: 100 tid: 101",
    ] {
        assert!(stdout.contains(want), "perf script -D lacks {want:?}");
    }
}

/// The records of [`file_events`] perf reads without a word: records whose
/// content perf reports as a problem of the recording (LOST, LOST_SAMPLES, a
/// truncated AUX area, AUXTRACE_ERROR) and unknown kinds are left out.
fn perf_events() -> Vec<Event<'static>> {
    file_events()
        .into_iter()
        .filter(|e| {
            !matches!(
                e.record,
                Record::Unknown { .. }
                    | Record::AuxtraceError { .. }
                    | Record::HeaderBuildId { .. }
                    | Record::Lost { .. }
                    | Record::LostSamples { .. }
            )
        })
        .map(|mut e| {
            if let Record::Aux { ref mut flags, .. } = e.record {
                *flags = 0;
            }
            e
        })
        .collect()
}

/// `perf script -D` on a perf.data: its stdout; perf must succeed and print
/// nothing on stderr.
fn perf_script_dump(perf: &std::path::Path, bytes: &[u8]) -> String {
    let mut t = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut t, bytes).unwrap();
    let out = std::process::Command::new(perf)
        .args(["script", "-D", "--symfs", "/nonexistent-symfs", "-i"])
        .arg(t.path())
        .env("HOME", std::env::temp_dir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if std::env::var_os("SIDEBAND_DUMP").is_some() {
        println!("{stdout}");
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "perf script -D: {stderr}"
    );
    stdout
}

fn perf_bin() -> Option<std::path::PathBuf> {
    pt_tests::perf("perf_reads_a_small_file_built_from_records")
}

/// Two attrs of one layout whose ids come late (as ptsim and ptrec learn
/// them), and COMM records of both.
fn late_id_file(room: usize) -> (Vec<u8>, Vec<Event<'static>>) {
    let attr = |config| Attr {
        kind: 1,
        size: 128,
        config,
        sample_period_or_freq: 1,
        sample_type: st::TID | st::TIME | st::IDENTIFIER,
        flags: flags::SAMPLE_ID_ALL | flags::COMM,
        ..Attr::default()
    };
    let mut set = AttrSet::new();
    set.push(attr(9), Vec::new());
    set.push(attr(10), Vec::new());
    let events: Vec<Event<'static>> = (0..64)
        .map(|i| {
            ev(
                0,
                Record::Comm {
                    pid: 100,
                    tid: 101,
                    comm: format!("c{i}"),
                },
                SampleId {
                    pid: Some(100),
                    tid: Some(101),
                    time: Some(10 + i),
                    identifier: Some(20 + i % 2),
                    ..SampleId::default()
                },
            )
        })
        .collect();
    let mut w = FileWriter::with_id_room(Cursor::new(Vec::new()), set, room).unwrap();
    w.set_ids(0, vec![20]).unwrap();
    w.set_ids(1, vec![21]).unwrap();
    for (id, data) in features() {
        w.set_feature(id, data).unwrap();
    }
    for e in &events {
        w.write_event(e).unwrap();
    }
    (w.finish().unwrap().into_inner(), events)
}

/// Issue 44: a copy of a ptsim or ptrec file cut anywhere in its data names
/// its events. With room kept up front, the late ids go before the attrs,
/// as perf writes them; without (an older file), the reader takes the
/// records of unknown ids with the first attr's layout, which every attr
/// has, and says the ids were lost.
#[test]
fn late_ids_go_before_the_attrs_and_a_cut_file_keeps_its_records() {
    let (roomy, events) = late_id_file(16);
    let f = PerfFile::parse(&roomy).unwrap();
    let data = f.data_range();
    assert_eq!(f.attrs().entries()[1].ids, [21]);
    assert!(!f.attrs().ids_lost());
    let (old, _) = late_id_file(0);
    let g = PerfFile::parse(&old).unwrap();
    assert_eq!(g.attrs().entries()[1].ids, [21]);
    for cut in [
        data.start as usize + 100,
        (data.start + data.end) as usize / 2,
        data.end as usize - 3,
    ] {
        let f = PerfFile::parse(&roomy[..cut]).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert_eq!(f.attrs().entries()[0].ids, [20], "cut at {cut}");
        let read: Vec<_> = f.events().map(|e| e.unwrap().1).collect();
        assert!(
            !read.is_empty() && read[..] == events[..read.len()],
            "cut at {cut}"
        );
        let g = PerfFile::parse(&old[..cut]).unwrap_or_else(|e| panic!("old, cut at {cut}: {e}"));
        assert!(g.attrs().ids_lost(), "cut at {cut}");
        assert!(
            g.warnings().iter().any(|w| w.contains("ids")),
            "cut at {cut}: {:?}",
            g.warnings()
        );
        let read_old: Vec<_> = g.events().map(|e| e.unwrap().1).collect();
        assert!(
            !read_old.is_empty() && read_old[..] == events[..read_old.len()],
            "old, cut at {cut}"
        );
    }
}
