//! The real recordings in `shared/realdata` (no binaries come with them):
//! they open, decode without panicking, report the missing images, and the
//! decoders' time span agrees with the TSC packets perf dumps.

use std::collections::BTreeMap;

use ptdec::decode::{decode, DecodeOptions};
use ptdec::images::{ImageStore, SearchPath};
use ptdec::input::Trace;
use ptdec::model::ops::{Op, OpSink};

#[derive(Default)]
struct Collect {
    ops: BTreeMap<(u32, u32), Vec<Op>>,
}

impl OpSink for Collect {
    fn op(&mut self, pid: u32, tid: u32, op: Op) {
        self.ops.entry((pid, tid)).or_default().push(op);
    }
}

fn no_search() -> SearchPath {
    SearchPath {
        live_fs: false,
        ..SearchPath::default()
    }
}

/// Every thread's ops are in time order and end with exactly one End.
fn check_order(c: &Collect) {
    for (k, ops) in &c.ops {
        assert!(matches!(ops.last(), Some(Op::End { .. })), "{k:?}");
        assert_eq!(
            ops.iter().filter(|o| matches!(o, Op::End { .. })).count(),
            1
        );
        let firsts = ops
            .iter()
            .filter(|o| matches!(o, Op::Enabled { first: true, .. }))
            .count();
        assert!(firsts <= 1, "{k:?}");
        for w in ops.windows(2) {
            assert!(w[0].stamp().insns <= w[1].stamp().insns, "{k:?} {w:?}");
        }
    }
}

#[test]
fn skylake_file_decodes_without_binaries() {
    let Some(p) = pt_tests::realdata_file(module_path!(), "perf.data.intel_pt-4.14") else {
        return;
    };
    let t = Trace::open(&p).unwrap();
    assert!(t.info.per_cpu_mmaps);
    assert_eq!(
        t.cpu.as_ref().map(|c| (c.family, c.model, c.stepping)),
        Some((6, 78, 3))
    );
    assert!(t.tsc.is_some());
    assert_eq!(t.buffers.iter().map(|b| b.chunks.len()).sum::<usize>(), 2);
    let images = ImageStore::new(no_search());
    let mut c = Collect::default();
    let st = decode(&t, &images, &DecodeOptions::default(), &mut c).unwrap();
    eprintln!("{st:#?}");
    eprintln!(
        "missing: {:#?}",
        images.missing().iter().map(|m| &m.name).collect::<Vec<_>>()
    );
    // `perf script -D` shows 10 PSBs; the first and last TSC packets are
    // 0xbc4cbefc32 and 0xbc4cd2cfe8. The whole trace is reached: each
    // stretch stops at code without an image and resynchronizes at the
    // error (libipt 2.2's pt_blk_resync: the next FUP/TIP/PSB that gives
    // an IP), so after the first sync of each of the two buffers every
    // stop is one resync. libipt 2.1.2 has no resync: every stretch starts
    // at one of the 10 PSBs.
    let stops = if ipt::version() >= (2, 2, 0) {
        assert_eq!(st.syncs, 2);
        assert!(st.resyncs > 10, "{st:?}");
        st.resyncs
    } else {
        assert_eq!((st.syncs, st.resyncs), (10, 0));
        st.syncs
    };
    // libipt's time runs on with the MTCs after the last TSC packet.
    let (first, last) = st.tsc_span.unwrap();
    assert_eq!(first, 0xbc4c_befc32);
    assert!(last >= 0xbc4c_d2cfe8, "{last:#x}");
    assert_eq!(st.errors.get("Nomap"), Some(&stops));
    assert!(st.no_image >= 1 && st.no_image <= stops, "{st:?}");
    let tc = t.tsc.unwrap();
    let (a, b) = st.time_span.unwrap();
    assert!(a >= tc.tsc_to_perf_time(first) && b <= tc.tsc_to_perf_time(last));
    let missing = images.missing();
    let names: Vec<&str> = missing.iter().map(|m| m.name.as_str()).collect();
    for want in ["/usr/bin/coreutils", "/lib64/libc-2.23.so", "[vdso]"] {
        assert!(names.contains(&want), "{names:?}");
    }
    assert!(missing.iter().any(|m| !m.ranges.is_empty()), "{missing:?}");
    check_order(&c);
    // The ops and the syncs are those of one decoder whatever the chunk
    // size. A chunk that stops at code without an image with no PSB left
    // in it synchronizes at the next chunk's PSB and takes its enable or
    // task switch, and the next chunk's first gap there is one decoder's
    // repeated gap (before: 10 gaps in 4 KiB chunks, 6 in 32 KiB, 3 in
    // one chunk per buffer; and 2 syncs in 4 KiB chunks).
    for chunk in [1, 4 << 10, 32 << 10, 256 << 10, 16 << 20] {
        let opts = DecodeOptions {
            chunking: ptdec::decode::Chunking::Bytes(chunk),
            ..DecodeOptions::default()
        };
        let images = ImageStore::new(no_search());
        let mut got = Collect::default();
        let s = decode(&t, &images, &opts, &mut got).unwrap();
        assert_eq!((s.syncs, s.resyncs), (st.syncs, st.resyncs), "{chunk}");
        assert_eq!(
            (s.no_image, s.skipped_bytes),
            (st.no_image, st.skipped_bytes),
            "{chunk}"
        );
        assert!(got.ops == c.ops, "chunk size {chunk}: other ops");
    }
}

#[test]
fn piped_file_decodes() {
    let Some(p) = pt_tests::realdata_file(module_path!(), "perf.data.piped.intel_pt-4.14") else {
        return;
    };
    let t = Trace::open(&p).unwrap();
    assert!(t.pipe);
    let images = ImageStore::new(no_search());
    let mut c = Collect::default();
    let st = decode(&t, &images, &DecodeOptions::default(), &mut c).unwrap();
    eprintln!("{st:#?}");
    // 10 PSB patterns in the file; `perf script -D` dumps only the first
    // AUXTRACE record of this pipe-mode file (5 PSBs, first TSC 0x3a7176c8f3e).
    // Each of the two buffers syncs once; every stop at code without an
    // image resynchronizes at the error (see the test above; with libipt
    // 2.1.2 every stretch starts at a PSB).
    if ipt::version() >= (2, 2, 0) {
        assert_eq!(st.syncs, 2);
        assert_eq!(st.errors.get("Nomap"), Some(&st.resyncs));
    } else {
        assert_eq!((st.syncs, st.resyncs), (10, 0));
    }
    assert!(st.tsc_span.unwrap().0 <= 0x3a7_176c8f3e);
    check_order(&c);
}

#[test]
fn ptwrite_only_file_is_handled() {
    let Some(p) = pt_tests::realdata_file(module_path!(), "tmon-alderlake-ptw.perf.data") else {
        return;
    };
    let t = Trace::open(&p).unwrap();
    let images = ImageStore::new(no_search());
    let mut c = Collect::default();
    let st = decode(&t, &images, &DecodeOptions::default(), &mut c).unwrap();
    eprintln!("{st:#?} {:?}", t.warnings);
    // PTWRITE without branch tracing: the decoder syncs at both PSBs, finds
    // no blocks and no errors. perf -D: first and last TSC 0xe9e4b20213a6,
    // 0xe9e4b212adfd.
    assert_eq!(st.syncs, 2);
    assert!(st.errors.is_empty(), "{:?}", st.errors);
    assert_eq!(st.tsc_span, Some((0xe9e4_b20213a6, 0xe9e4_b212adfd)));
    check_order(&c);
}

/// The fast decoder's resync at the error (`--on-error resync`) on the
/// Skylake recording, whose binaries are missing: every TIP is a place to
/// go on from, and every one of them fails again. What it may not do
/// (it did before the chunk decoder took resyncs for what they are): an
/// interrupt met while resynchronizing in code without an image became a
/// call (126 with no instruction decoded), each such call ended the gap
/// and the next failure started another (144 gaps for 3 stretches), and a
/// resync that read on into the next chunk's PSB+ made the ops depend on
/// the chunk size.
#[test]
fn skylake_file_resyncs_without_inventing_calls_or_gaps() {
    use ptdec::decode::{DecoderKind, OnError};
    let Some(p) = pt_tests::realdata_file(module_path!(), "perf.data.intel_pt-4.14") else {
        return;
    };
    let t = Trace::open(&p).unwrap();
    let run = |decoder, on_error, chunk| {
        let opts = DecodeOptions {
            decoder,
            on_error,
            chunking: ptdec::decode::Chunking::Bytes(chunk),
            ..DecodeOptions::default()
        };
        let images = ImageStore::new(no_search());
        let mut c = Collect::default();
        let st = decode(&t, &images, &opts, &mut c).unwrap();
        check_order(&c);
        (st, c)
    };
    let (psb, psb_ops) = run(DecoderKind::Fast, OnError::NextPsb, 16 << 20);
    let (lib, lib_ops) = run(DecoderKind::Libipt, OnError::NextPsb, 16 << 20);
    // Skipping to the next PSB, both decoders agree (e2e_fastdec, ptt).
    assert!(psb_ops.ops == lib_ops.ops);
    assert_eq!(
        (psb.syncs, psb.resyncs, psb.no_image, psb.skipped_bytes),
        (lib.syncs, lib.resyncs, lib.no_image, lib.skipped_bytes)
    );
    let (st, ops) = run(DecoderKind::Fast, OnError::Resync, 16 << 20);
    eprintln!("resync: {st:#?}\nnext PSB: {psb:#?}");
    let calls = |c: &Collect| {
        c.ops
            .values()
            .flatten()
            .filter(|o| matches!(o, Op::Call { .. } | Op::Return { .. } | Op::Jump { .. }))
            .count()
    };
    // No code, so no instruction, and no call, return or jump.
    assert_eq!((st.insns, calls(&ops)), (0, 0));
    assert_eq!((psb.insns, calls(&psb_ops)), (0, 0));
    // Each buffer synchronizes once; after that every stop is a resync,
    // at each TIP or PSB+ (12,041; the next PSB: 10 syncs).
    assert_eq!((psb.syncs, psb.resyncs), (10, 0));
    assert_eq!(st.syncs, 2);
    assert!(st.resyncs > 12_000, "{}", st.resyncs);
    assert_eq!(st.errors.get("Nomap"), Some(&st.resyncs));
    // One gap per stretch that could not be decoded, not one per failed
    // resync: as many as at the next PSB.
    assert_eq!(st.no_image, psb.no_image);
    assert_eq!(st.no_image, 3);
    // Less of the trace is skipped: 147,467 bytes rather than 149,676
    // (the TNTs between two TIPs are lost either way without the code).
    assert!(
        st.skipped_bytes < psb.skipped_bytes,
        "{} {}",
        st.skipped_bytes,
        psb.skipped_bytes
    );
    // The same ops and counts for any chunk size.
    for chunk in [1, 4 << 10, 32 << 10, 256 << 10] {
        let (s, got) = run(DecoderKind::Fast, OnError::Resync, chunk);
        for (k, want) in &ops.ops {
            let have = got.ops.get(k).map_or(&[][..], |v| &v[..]);
            if let Some(i) = (0..want.len().max(have.len())).find(|&i| want.get(i) != have.get(i)) {
                panic!(
                    "chunk size {chunk}, thread {k:?}, op {i}: one chunk {:?}, chunked {:?}",
                    &want[i.saturating_sub(2)..(i + 3).min(want.len())],
                    &have[i.saturating_sub(2).min(have.len())..(i + 3).min(have.len())]
                );
            }
        }
        assert!(got.ops == ops.ops, "chunk size {chunk}: other threads");
        assert_eq!(
            (s.syncs, s.resyncs, s.no_image, s.skipped_bytes),
            (st.syncs, st.resyncs, st.no_image, st.skipped_bytes),
            "chunk size {chunk}"
        );
    }
}
