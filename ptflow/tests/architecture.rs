//! ptflow's layers, packets ⊂ events ⊂ blocks (the crate doc): each layer
//! imports only those below it, the code cache stands alone, and no
//! modules import each other in a circle. Edges are read from the sources
//! (`pt_tests::modules`).

use pt_tests::modules::{circles, graph, Stages};

/// Lowest first: (layer, its modules, the layers it may import).
const LAYERS: &[(&str, &[&str], &[&str])] = &[
    ("packets", &["packet", "time"], &[]),
    ("code", &["code"], &[]),
    ("walks", &["walk"], &["code"]),
    ("events", &["event"], &["packets"]),
    (
        "blocks",
        &["block"],
        &["packets", "events", "code", "walks"],
    ),
    // Test builds only (the `test-helpers` feature).
    (
        "test helpers",
        &["test_packets", "follow_tests"],
        &["packets", "events", "code", "walks", "blocks"],
    ),
];

fn src() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_module_sits_in_a_layer_and_imports_only_those_below() {
    let g = graph(&src());
    assert!(g.contains_key("block"), "the sources were not found: {g:?}");
    let v = Stages { stages: LAYERS }.violations(&g);
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn no_modules_import_each_other_in_a_circle() {
    let c = circles(&graph(&src()));
    assert!(c.is_empty(), "import circles: {c:?}");
}
