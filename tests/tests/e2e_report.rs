//! Issue 22: `ptdec report` and `--min-duration` on traces scaled up with
//! `ptsim --repeat`, against the ground truth:
//!
//! - per function, the report's calls less its tail calls, root frames and
//!   signal handlers, and frames whose start was not traced are the
//!   truth's call instructions (counted from its `repeat` lines), and over
//!   all functions the call instructions and tail calls are the stacks'
//!   (the summary's);
//! - the self instructions of all rows, and the folded stacks' weights, add
//!   up to the decoded instructions, which are the truth's; the folded ns
//!   to the rows' self ns;
//! - each of the slowest calls, decoded again with `--start @NS --duration
//!   D` as the report prints them, is in the FTF whole: same function,
//!   thread and instructions, the same start and end, not cut;
//! - `--min-duration 1us` writes only call slices of at least 1 µs, every
//!   one of the full decode's that long, and Perfetto (where
//!   `PT_TRACE_PROCESSOR` names it) shows them all without import errors.
//!
//! gcc (for the fixture programs) follows `pt_tests`' tool policy.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use ftf::read::{EventKind, RecordKind};
use ptdec::decode::DecodeOptions;
use ptdec::emit::{EmitOptions, Target};
use ptdec::report::render::{self, Weight};
use ptdec::report::Aggregate;
use ptsim::sim::repeat::RepeatSpec;

mod common;

fn programs(test: &str) -> Option<PathBuf> {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-programs");
    pt_tests::fixture_programs(test, &out)
}

/// Runs ptsim on `prog` with one `--repeat` spec (empty environment).
fn simulate(progs: &Path, prog: &str, repeat: &str, dir: &Path) {
    let mut o = ptsim::sim::Options::new(progs.join(prog), Vec::new(), dir);
    o.env = Some(Vec::new());
    o.repeat = vec![repeat.parse::<RepeatSpec>().unwrap()];
    let r = ptsim::sim::run(o).unwrap_or_else(|e| panic!("ptsim {prog}: {e}"));
    assert!(
        matches!(r.outcome.exit, Some(ptsim::engine::Exit::Code(0))),
        "{prog}: {:?}",
        r.outcome.exit
    );
    assert_eq!(r.repeats.len(), 1, "{prog}: {:?}", r.warnings);
}

/// The text symbols of a non-PIE program by address (`nm`).
fn text_symbols(prog: &Path) -> BTreeMap<u64, String> {
    let out = Command::new("nm").arg(prog).output().expect("run nm");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && matches!(f[1], "T" | "t"))
                .then(|| Some((u64::from_str_radix(f[0], 16).ok()?, f[2].to_string())))?
        })
        .collect()
}

/// `ptdec report` as the CLI runs it by default (interpolated times), per
/// thread or not, with folded stacks and the `slowest` longest calls.
fn report(dir: &Path, per_thread: bool, slowest: usize) -> (ptdec::pipeline::Report, Aggregate) {
    let (run, agg) = common::run_report(dir, DecodeOptions::default(), per_thread, slowest);
    assert!(run.decode.errors.is_empty(), "{:?}", run.decode.errors);
    assert!(run.missing.is_empty(), "{:?}", run.missing);
    (run, agg)
}

/// One call slice of an FTF file: (tid, name, start, end, insns, cut or
/// unknown start).
type Call = (u64, String, u64, u64, u64, bool);

fn ftf_calls(bytes: &[u8]) -> Vec<Call> {
    let mut v = Vec::new();
    for r in ftf::read::parse(bytes).unwrap() {
        let RecordKind::Event(e) = r.kind else {
            continue;
        };
        let EventKind::DurationComplete { end } = e.kind else {
            continue;
        };
        if e.category != "call" {
            continue;
        }
        let insns = e.args.iter().find_map(|a| match (&*a.name, &a.value) {
            ("insns", v) => v.as_u64(),
            _ => None,
        });
        let partial = e
            .args
            .iter()
            .any(|a| a.name == "cut" || a.name == "unknown_start");
        v.push((e.thread.tid, e.name, e.ts, end, insns.unwrap_or(0), partial));
    }
    v
}

/// Decodes `dir` to FTF in memory as `ptdec TRACE` does by default, with a
/// window and `--min-duration`.
fn decode_ftf(dir: &Path, window: Option<(u64, u64)>, min_duration: Option<u64>) -> Vec<u8> {
    let report = common::run_pipeline(
        dir,
        &[],
        DecodeOptions {
            start: window.map(|w| w.0),
            end: window.map(|w| w.1),
            ..DecodeOptions::default()
        },
        ptdec::pipeline::StackOptions {
            interpolate: true,
            min_duration,
        },
        // The range is the decode's window, resolved by the run.
        EmitOptions {
            axis_auto: true,
            ..EmitOptions::default()
        },
        Target::Memory,
    );
    if let Some(min) = min_duration {
        let m = report.min_duration.expect("the filter's counts");
        assert_eq!(m.min_ns, min);
        assert!(m.calls > 0, "no call was shorter than {min} ns");
    }
    report.written.into_iter().next().unwrap().bytes
}

#[test]
fn report_counts_calls_as_the_truth_and_adds_up_to_every_instruction() {
    let test = "report_counts_calls_as_the_truth_and_adds_up_to_every_instruction";
    let Some(progs) = programs(test) else { return };
    for (prog, spec) in [("interp", "interp_run=30"), ("loopmix", "step=20")] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("trace");
        simulate(&progs, prog, spec, &dir);
        let truth = common::thread_truths(&dir);
        let path = progs.join(prog);
        let (run, agg) = report(&dir, false, 0);

        // Instructions: decoded = truth = self instructions = folded weights.
        let truth_insns: u64 = std::fs::read_to_string(dir.join("truth/summary.txt"))
            .unwrap()
            .lines()
            .filter(|l| {
                l.split_whitespace()
                    .next()
                    .is_some_and(|t| t.parse::<u32>().is_ok())
            })
            .filter_map(|l| l.split_whitespace().nth(2)?.parse::<u64>().ok())
            .sum();
        assert_eq!(
            run.decode.insns, truth_insns,
            "{prog}: decoded instructions"
        );
        let totals = render::totals(&agg);
        assert_eq!(totals.insns, truth_insns, "{prog}: self instructions");
        let folded = render::folded(&agg, Weight::Insns);
        let weights: u64 = folded
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum();
        assert_eq!(weights, truth_insns, "{prog}: folded instruction weights");
        let ns: u64 = render::folded(&agg, Weight::Ns)
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum();
        assert_eq!(ns, totals.ns, "{prog}: folded ns weights");
        assert!(ns > 0, "{prog}: no time passed");

        // Calls per function: the truth's call instructions, once the
        // report's tail calls, roots and untraced starts are taken out.
        let symbols = text_symbols(&path);
        let jumped = common::jump_targets(&path);
        let mut want: BTreeMap<&str, u64> = BTreeMap::new();
        for t in truth.values() {
            for ((kind, to), n) in t.totals() {
                if kind != "call" {
                    continue;
                }
                if let Some(name) = symbols.get(&to) {
                    *want.entry(name).or_default() += n;
                }
            }
        }
        let module = path.to_string_lossy();
        let mut checked = 0;
        for (name, n) in &want {
            let row = agg.rows.iter().find(|((_, f), _)| {
                let f = &agg.funcs[*f as usize];
                &*f.name == *name && *f.module == *module
            });
            let (_, st) = row.unwrap_or_else(|| panic!("{prog}: no row for {name}"));
            assert_eq!(
                st.calls - st.tail_calls - st.roots - st.unknown_start,
                *n,
                "{prog}: calls of {name} (report {st:?})"
            );
            checked += 1;
        }
        assert!(checked >= 5, "{prog}: only {checked} functions checked");
        assert_eq!(
            (totals.call_insns(), totals.tail_calls),
            (run.stack.calls, run.stack.tail_calls),
            "{prog}: call instructions and tail calls, report and stacks"
        );
        let tail_called = agg.rows.iter().filter(|(_, st)| st.tail_calls > 0).count();
        if prog == "loopmix" {
            assert!(
                tail_called > 0 && !jumped.is_empty(),
                "{prog}: no tail call"
            );
            assert!(totals.roots > 1, "{prog}: no signal handler");
        }
        let repeated = &agg.rows.iter().max_by_key(|(_, s)| s.calls).unwrap();
        eprintln!(
            "{prog} {spec}: {checked} functions' calls = truth ({} call instructions, {} tail calls into {tail_called} functions, {} roots and handlers, {} untraced starts); {truth_insns} instructions = self = folded; most called: {} x{}",
            totals.call_insns(),
            totals.tail_calls,
            totals.roots,
            totals.unknown_start,
            agg.funcs[repeated.0 .1 as usize].name,
            repeated.1.calls
        );

        // Per thread: the same rows, split.
        let (_, per) = report(&dir, true, 0);
        let sum = |a: &Aggregate| -> (u64, u64, u64) {
            a.rows.values().fold((0, 0, 0), |s, r| {
                (s.0 + r.calls, s.1 + r.self_insns, s.2 + r.self_ns)
            })
        };
        assert_eq!(sum(&per), sum(&agg), "{prog}: per thread");
        assert!(per.rows.keys().all(|(t, _)| t.is_some()));
    }
}

#[test]
fn slowest_calls_round_trip_through_start_at_ns() {
    let test = "slowest_calls_round_trip_through_start_at_ns";
    let Some(progs) = programs(test) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("trace");
    simulate(&progs, "interp", "interp_run=20", &dir);
    let (_, agg) = report(&dir, false, 12);
    assert_eq!(agg.slowest.len(), 12);
    assert!(agg.slowest.windows(2).all(|w| w[0].ns >= w[1].ns));
    let mut whole = 0;
    for c in &agg.slowest {
        let name = &*agg.funcs[c.func as usize].name;
        if c.cut || c.window == (c.start, c.start + c.ns) {
            // Its start was not traced or it was entered by a jump: there
            // is no call instruction to start the window at.
            continue;
        }
        let bytes = decode_ftf(&dir, Some(c.window), None);
        let (start, end) = (c.start - agg.origin, c.start + c.ns - agg.origin);
        let calls = ftf_calls(&bytes);
        let found = calls
            .iter()
            .find(|k| k.0 == u64::from(c.tid) && k.1 == name && k.4 == c.insns);
        let k = found.unwrap_or_else(|| {
            panic!(
                "{name} ({} instructions) is not in the FTF of {}",
                c.insns,
                render::window(c)
            )
        });
        assert!(!k.5, "{name}: cut in the FTF of {}", render::window(c));
        assert_eq!((k.2, k.3), (start, end), "{name}: {}", render::window(c));
        whole += 1;
    }
    assert!(whole >= 5, "only {whole} of the slowest calls checked");
    eprintln!("interp: {whole} of the 12 slowest calls decoded whole from their window");
}

#[test]
fn min_duration_keeps_only_calls_that_long() {
    let test = "min_duration_keeps_only_calls_that_long";
    let Some(progs) = programs(test) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("trace");
    simulate(&progs, "interp", "interp_run=20", &dir);
    let all = ftf_calls(&decode_ftf(&dir, None, None));
    let bytes = decode_ftf(&dir, None, Some(1000));
    let kept = ftf_calls(&bytes);
    assert!(!kept.is_empty());
    assert!(
        kept.len() * 10 < all.len(),
        "{} of {}",
        kept.len(),
        all.len()
    );
    for k in &kept {
        assert!(k.3 - k.2 >= 1000, "{k:?} is shorter than 1 µs");
    }
    let long: Vec<&Call> = all.iter().filter(|k| k.3 - k.2 >= 1000).collect();
    assert_eq!(
        long,
        kept.iter().collect::<Vec<_>>(),
        "the calls of 1 µs or more"
    );
    let Some(tp) = pt_tests::trace_processor(test) else {
        return;
    };
    let file = tmp.path().join("long.ftf");
    std::fs::write(&file, &bytes).unwrap();
    let view = pt_tests::perfetto_view(&tp, &file);
    assert!(view.problems.is_empty(), "{:?}", view.problems);
    let calls: Vec<_> = view
        .slices
        .values()
        .flatten()
        .filter(|s| s.category == "call")
        .collect();
    assert_eq!(calls.len(), kept.len(), "call slices in Perfetto");
    assert!(calls.iter().all(|s| s.dur >= 1000), "{calls:?}");
}
