//! Issue 23: ptdec's own flow decoder (`--decoder fast`) against libipt's
//! block decoder (`--decoder libipt`) on every trace at hand: each must
//! give byte-identical FTF and the same `ptdec report` (CSV and folded
//! stacks), whichever chunks the fast decoder handed to libipt. The traces:
//! ptsim's fixture programs in the configurations the other end-to-end
//! tests use (one PSB per 2 KiB in all but the default, decoded in chunks
//! of 4 KiB so chunk edges fall everywhere), and the real recordings in
//! `../shared/realdata/` (no code images: the errors must be the same).
//! Each trace prints how many chunks each decoder took and why.

use std::path::{Path, PathBuf};

use ptdec::decode::{DecodeOptions, DecoderKind, OnError};
use ptdec::emit::{EmitOptions, Target};
use ptdec::images::{ImageStore, SearchPath};
use ptdec::input::Trace;
use ptdec::plan::{Ftf, Plan};
use ptdec::report::render::{self, Weight};
use ptdec::report::AggregateOptions;
use ptdec::symbols::SymbolCache;

fn programs(test: &str) -> Option<PathBuf> {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-programs");
    pt_tests::fixture_programs(test, &out)
}

type Apply = fn(&mut ptsim::sim::Options);

const VARIANTS: &[(&str, Apply)] = &[
    ("default", |_| {}),
    ("--per-cpu 2 --psb-period 0", |o| {
        o.per_cpu = Some(2);
        o.pt.psb_period = 0;
    }),
    ("--noretcomp --psb-period 0", |o| {
        o.pt.noretcomp = true;
        o.pt.psb_period = 0;
    }),
    ("--cyc --psb-period 0", |o| {
        o.pt.cyc = true;
        o.pt.psb_period = 0;
    }),
    (
        "--overflow-every 3000 --overflow-lost 40 --psb-period 0",
        |o| {
            o.pt.overflow_every = Some(3000);
            o.pt.overflow_lost_insns = 40;
            o.pt.psb_period = 0;
        },
    ),
    ("--async-every 2000 --cyc", |o| {
        o.pt.async_every = Some(2000);
        o.pt.cyc = true;
    }),
];

fn simulate(progs: &Path, prog: &str, apply: Apply, dir: &Path) {
    let mut o = ptsim::sim::Options::new(progs.join(prog), Vec::new(), dir);
    o.env = Some(Vec::new());
    o.follow_children = prog == "forkexec";
    apply(&mut o);
    ptsim::sim::run(o).unwrap_or_else(|e| panic!("ptsim {prog}: {e}"));
}

/// Both decoders skip to the next PSB after an error: libipt 2.1.2
/// cannot resync, and the fast decoder's resync goes on where libipt
/// does not (docs/decoding.md).
fn decode_options(kind: DecoderKind, chunk: Option<u64>) -> DecodeOptions {
    DecodeOptions {
        decoder: kind,
        on_error: OnError::NextPsb,
        chunking: ptdec::decode::Chunking::of(chunk),
        jobs: 2,
        ..DecodeOptions::default()
    }
}

/// The FTF bytes of each output and the decode's statistics.
fn ftf(
    dir: &Path,
    kind: DecoderKind,
    chunk: Option<u64>,
    sequential_stacks: bool,
) -> (Vec<Vec<u8>>, ptdec::decode::DecodeStats) {
    let trace = Trace::open(dir).unwrap();
    let images = ImageStore::new(SearchPath {
        buildid_dir: None,
        ..SearchPath::for_trace(dir)
    });
    let symbols = SymbolCache::for_search(images.search());
    let input = ptdec::pipeline::Input::Trace {
        trace: &trace,
        images: &images,
        symbols: &symbols,
    };
    let decode = DecodeOptions {
        sequential_stacks,
        ..decode_options(kind, chunk)
    };
    let out = Ftf {
        emit: EmitOptions::default(),
        target: Target::Memory,
    };
    let plan = Plan::new(input, decode, Default::default(), out);
    let r = ptdec::pipeline::run(&plan, None).unwrap();
    (r.written.into_iter().map(|w| w.bytes).collect(), r.decode)
}

/// `ptdec report`'s CSV and folded stacks.
fn report(
    dir: &Path,
    kind: DecoderKind,
    chunk: Option<u64>,
    sequential_stacks: bool,
) -> (String, String) {
    let trace = Trace::open(dir).unwrap();
    let images = ImageStore::new(SearchPath {
        buildid_dir: None,
        ..SearchPath::for_trace(dir)
    });
    let symbols = SymbolCache::for_search(images.search());
    let input = ptdec::pipeline::Input::Trace {
        trace: &trace,
        images: &images,
        symbols: &symbols,
    };
    let decode = DecodeOptions {
        sequential_stacks,
        ..decode_options(kind, chunk)
    };
    let stacks = ptdec::pipeline::StackOptions {
        interpolate: true,
        min_duration: None,
    };
    let aggregate = AggregateOptions {
        folded: true,
        ..AggregateOptions::default()
    };
    let plan = Plan::new(input, decode, stacks, aggregate);
    let (_, agg) = ptdec::report::run(&plan, None).unwrap();
    (
        render::csv(&agg, render::Sort::SelfTime, None),
        render::folded(&agg, Weight::Insns),
    )
}

/// Both decoders on `dir`: the same FTF and report, or a panic naming
/// `what`. Returns (chunks decoded fast, chunks handed to libipt).
/// The flow decoders on each of the trace's segments as ptxed runs them
/// (`ptdec::flow_diff`): libipt's and the fast one's instructions,
/// events, times and errors, and the fast one's through `next_block` and
/// through `next_blocks`, must be the same (up to the diff's limit of
/// lines per segment).
fn flow_decoders_agree(what: &str, dir: &Path) {
    let s = pt_bench::setup(dir).unwrap_or_else(|e| panic!("{what}: {e:#}"));
    let sections: Vec<(&Path, u64, u64, u64)> = s
        .sections
        .iter()
        .map(|(f, o, n, a)| (Path::new(f.as_str()), *o, *n, *a))
        .collect();
    let mut lines = 0;
    for seg in s.trace.segments() {
        let bytes = s.trace.segment_bytes(&seg);
        let o = ptdec::flow_diff::compare(&s.cfg, &bytes, &sections)
            .unwrap_or_else(|e| panic!("{what}: the flow decoders differ: {e}"));
        lines += o.lines;
    }
    assert!(lines > 0, "{what}: the flow decoders logged nothing");
}

fn both_agree(what: &str, dir: &Path, chunk: Option<u64>) -> (u64, u64) {
    let (lib, lib_stats) = ftf(dir, DecoderKind::Libipt, chunk, false);
    let (fast, fast_stats) = ftf(dir, DecoderKind::Fast, chunk, false);
    assert!(
        lib == fast,
        "{what}: the FTF of --decoder fast differs from libipt's"
    );
    // The call stacks built ahead on the workers (crate::stitch) change
    // nothing either: the same FTF as with all of them on one thread.
    let (seq, _) = ftf(dir, DecoderKind::Libipt, chunk, true);
    assert!(
        lib == seq,
        "{what}: the FTF with call stacks built on the workers ({} ops, {} stretches declined) differs from the sequential stacks'",
        lib_stats.stacks_ahead_ops,
        lib_stats.stacks_ahead_declined
    );
    let strip = |s: &ptdec::decode::DecodeStats| ptdec::decode::DecodeStats {
        fast_chunks: 0,
        fallbacks: Default::default(),
        max_ops_held: 0,
        // libipt's block cache splits blocks where earlier decodes of the
        // same section (other chunks of the worker) ended them; the flow
        // decoder ends a block at each branch only. Same instructions.
        blocks: 0,
        ..s.clone()
    };
    assert_eq!(
        strip(&lib_stats),
        strip(&fast_stats),
        "{what}: decode statistics"
    );
    let lib_report = report(dir, DecoderKind::Libipt, chunk, false);
    assert_eq!(
        lib_report,
        report(dir, DecoderKind::Fast, chunk, false),
        "{what}: ptdec report"
    );
    assert_eq!(
        lib_report,
        report(dir, DecoderKind::Libipt, chunk, true),
        "{what}: ptdec report with call stacks built on the workers and without"
    );
    let fallback: u64 = fast_stats.fallbacks.values().sum();
    eprintln!(
        "{what}: {} chunks fast, {fallback} by libipt {:?}; call stacks of {} of {} ops built on the workers",
        fast_stats.fast_chunks, fast_stats.fallbacks, fast_stats.stacks_ahead_ops, fast_stats.ops
    );
    (fast_stats.fast_chunks, fallback)
}

const PROGRAMS: &[&str] = &[
    "plt",
    "vdso",
    "exception",
    "tiny",
    "recursion",
    "tailcall",
    "indirect",
    "longjmp",
    "signals",
    "threads",
    "forkexec",
    "rust_calls",
    "deep",
    "loopmix",
    "shapes",
    "interp",
    "libplt",
    "emuptw",
];

/// The programs the non-default configurations run.
const VARIANT_PROGRAMS: &[&str] = &[
    "recursion",
    "tailcall",
    "longjmp",
    "signals",
    "threads",
    "interp",
];

#[test]
fn fast_decoder_equals_libipt_on_ptsim_traces() {
    let test = "fast_decoder_equals_libipt_on_ptsim_traces";
    let Some(progs) = programs(test) else { return };
    let list: Vec<&str> = PROGRAMS
        .iter()
        .copied()
        .filter(|p| progs.join(p).exists())
        .collect();
    // Every program in the default configuration; the other
    // configurations on the programs whose control flow they change most
    // (ptsim single-steps: all of them in all six would take minutes).
    let mut cases: Vec<(&str, Apply, &str)> = Vec::new();
    for (i, (name, apply)) in VARIANTS.iter().enumerate() {
        for prog in &list {
            if i == 0 || VARIANT_PROGRAMS.contains(prog) {
                cases.push((name, *apply, prog));
            }
        }
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let totals = std::sync::Mutex::new((0u64, 0u64));
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(&(name, apply, prog)) = cases.get(i) else {
                    break;
                };
                let tmp = tempfile::tempdir().unwrap();
                let dir = tmp.path().join("trace");
                simulate(&progs, prog, apply, &dir);
                flow_decoders_agree(&format!("{prog} ({name})"), &dir);
                for chunk in [None, Some(4096)] {
                    let what = format!("{prog} ({name}, chunks {chunk:?})");
                    let (f, b) = both_agree(&what, &dir, chunk);
                    let mut t = totals.lock().unwrap();
                    t.0 += f;
                    t.1 += b;
                }
            });
        }
    });
    let (fast, fallback) = *totals.lock().unwrap();
    assert!(fast > 0, "no chunk was decoded by the fast decoder");
    eprintln!("ptsim traces: {fast} chunks decoded fast, {fallback} by libipt");
}

#[test]
fn fast_decoder_equals_libipt_on_real_recordings() {
    for name in ["perf.data.intel_pt-4.14", "tmon-alderlake-ptw.perf.data"] {
        let Some(file) =
            pt_tests::realdata_file("fast_decoder_equals_libipt_on_real_recordings", name)
        else {
            continue;
        };
        for chunk in [None, Some(4096)] {
            both_agree(&format!("{name} (chunks {chunk:?})"), &file, chunk);
        }
    }
}
