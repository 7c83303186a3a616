//! ptdec's modules in stages along the data flow (docs/architecture.md),
//! over its three crates: `ptdec-core` (base, source, decode, stacks,
//! filter), `ptdec-out` (the sinks: ftf, parquet, aggregate) and `ptdec` (run,
//! binary). Each stage imports only the stages below it that it is
//! allowed, and no modules import each other in a circle. A new module
//! must be put in a stage here; an import a stage may not make fails with
//! both modules named. Edges are read from the sources
//! (`pt_tests::modules`); the crates' own dependencies (`Cargo.toml`)
//! already keep the core below the sinks and both below `ptdec`.
//!
//! The stages of the core and the sinks stand beside each other over
//! `base`: source, decode, stacks, filter, ftf and aggregate each import
//! `base` (the contracts in `model`: `model::source` between source and
//! decode, `model::ops` between decode and stacks, `model::slices`
//! between stacks, filter and the sinks) and no other stage. Only `run`
//! (the pipeline, where a trace opened by the source stage is handed to
//! the decode stage and its ops to the stacks and a sink) imports them
//! all, and `binary` imports `run` too (the command line builds each
//! stage's options and prints what the stages report).

use std::path::{Path, PathBuf};

use pt_tests::modules::{circles, graph_of, Graph, Stages};

/// Lowest first: (stage, its modules, the stages it may import).
const STAGES: &[(&str, &[&str], &[&str])] = &[
    // ptdec-core.
    // The contracts between stages (`model`) and helpers of every stage:
    // number formatting, the inputs opened, output files.
    ("base", &["model", "text", "inputs", "outfile"], &[]),
    // Opening a trace: perf.data and LLDB bundles, images and symbols, raw
    // PT with its perf_event sideband.
    (
        "source",
        &["input", "images", "symbols", "raw", "pevent"],
        &["base"],
    ),
    // Trace bytes into ops per thread, through libipt or ptflow; what it
    // takes from the source stage comes through `model::source`.
    ("decode", &["decode", "events", "flow_diff"], &["base"]),
    // Ops into call stacks and slices, time spread between timing packets.
    ("stacks", &["interp", "stack", "stitch"], &["base"]),
    // Slices left out before a sink.
    ("filter", &["min_duration"], &["base"]),
    // ptdec-out: sinks of slices, each on its own: the FTF emitter, the
    // Parquet dataset, the report's aggregator.
    ("ftf", &["emit"], &["base"]),
    ("parquet", &["parquet"], &["base"]),
    ("aggregate", &["aggregate"], &["base"]),
    // ptdec: the run's plan (every option resolved once), the pipeline
    // assembled from it (FTF, report and raw runs), then the command line,
    // its summary and `ptdec check`.
    (
        "run",
        &["plan", "pipeline", "report", "dataset"],
        &[
            "base",
            "source",
            "decode",
            "stacks",
            "filter",
            "ftf",
            "parquet",
            "aggregate",
        ],
    ),
    (
        "binary",
        &["cli", "summary", "check"],
        &[
            "base",
            "source",
            "decode",
            "stacks",
            "filter",
            "ftf",
            "parquet",
            "aggregate",
            "run",
        ],
    ),
];

/// The three crates: the name each is imported by, and its sources.
fn crates() -> Vec<(&'static str, PathBuf)> {
    let decoder = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = decoder.parent().expect("decoder/ sits in the workspace");
    vec![
        ("ptdec_core", root.join("ptdec-core/src")),
        ("ptdec_out", root.join("ptdec-out/src")),
        ("ptdec", decoder.join("src")),
    ]
}

fn ptdec_graph() -> Graph {
    let srcs = crates();
    let g = graph_of(
        &srcs
            .iter()
            .map(|(n, p)| (*n, p.as_path()))
            .collect::<Vec<_>>(),
    );
    for m in ["decode::chunk", "emit", "aggregate", "pipeline", "cli"] {
        assert!(g.contains_key(m), "{m} was not found in {srcs:?}");
    }
    g
}

#[test]
fn every_module_sits_in_a_stage_and_imports_only_what_its_stage_may() {
    let v = Stages { stages: STAGES }.violations(&ptdec_graph());
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn no_modules_import_each_other_in_a_circle() {
    let c = circles(&ptdec_graph());
    assert!(c.is_empty(), "import circles: {c:?}");
}

/// The check can fail: a graph with ptdec's real modules and one edge from
/// the decode stage up to the pipeline is refused, naming both, and it
/// closes a circle.
#[test]
fn an_import_up_the_stages_is_named() {
    let mut g = ptdec_graph();
    g.get_mut("decode")
        .expect("decode is a module")
        .insert("pipeline".into());
    let v = Stages { stages: STAGES }.violations(&g);
    assert_eq!(
        v,
        ["decode (stage decode) imports pipeline (stage run), which decode may not import"]
    );
    assert!(!circles(&g).is_empty(), "pipeline imports decode");
}

/// Stages beside each other may not import each other: the decode stage
/// reaching into the source stage's `input` (as it did before
/// `model::source`) is refused, and so is the source stage reaching into
/// decode.
#[test]
fn an_import_between_stages_beside_each_other_is_named() {
    let mut g = ptdec_graph();
    g.get_mut("decode::setup")
        .expect("decode::setup is a module")
        .insert("input".into());
    g.get_mut("pevent")
        .expect("pevent is a module")
        .insert("decode".into());
    let v = Stages { stages: STAGES }.violations(&g);
    assert_eq!(
        v,
        [
            "decode::setup (stage decode) imports input (stage source), which decode may not import",
            "pevent (stage source) imports decode (stage decode), which source may not import",
        ]
    );
}
