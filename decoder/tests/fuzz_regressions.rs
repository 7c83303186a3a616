//! Replays on stable every input the perf.data and decode-path fuzz
//! targets (raw_pt, trace_dir, garbage_prefix) found (`fuzz/regressions/TARGET/`) and their seeds
//! (`fuzz/seeds/TARGET/`) through the very harness the targets run
//! (`fuzz/src/harness.rs`), so a fixed crash stays fixed without nightly. Each file runs in a child
//! process with a memory limit, so an input that makes the decoder grow
//! without bound fails this test instead of the machine.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../../fuzz/src/harness.rs"]
#[allow(dead_code)]
mod harness;

fn inputs(target: &str, kinds: &[&str]) -> Vec<PathBuf> {
    let root = pt_tests::workspace_root().join("fuzz");
    let mut v = Vec::new();
    for kind in kinds {
        if let Ok(rd) = std::fs::read_dir(root.join(kind).join(target)) {
            v.extend(rd.map(|e| e.unwrap().path()).filter(|p| p.is_file()));
        }
    }
    v.sort();
    v
}

/// In the child: runs one input (`PT_FUZZ_REPLAY=TARGET:FILE`).
fn replay_in_child() -> bool {
    let Some(spec) = std::env::var_os("PT_FUZZ_REPLAY") else {
        return false;
    };
    let spec = spec.to_string_lossy().into_owned();
    let (target, file) = spec.split_once(':').expect("TARGET:FILE");
    let data = std::fs::read(file).unwrap();
    let n = match target {
        "raw_pt" => harness::raw_pt(&data),
        "flow_diff" => harness::flow_diff(&data),
        "flow_lockstep" => harness::flow_lockstep(&data),
        "trace_dir" => harness::trace_dir(&data),
        "lldb_bundle" => harness::lldb_bundle(&data),
        "garbage_prefix" => harness::garbage_prefix(&data),
        "perf_data" => harness::perf_data(&data),
        other => panic!("unknown target {other}"),
    };
    // Instructions decoded (records replayed for perf_data).
    println!("decoded {n} units");
    true
}

/// Runs each input of `target` in `kinds` (folders of fuzz/) in a child
/// (this test, filtered to itself) with a 2 GiB address-space limit and a
/// 60 s timeout.
fn replay_all(target: &str, kinds: &[&str], test: &str) {
    let files = inputs(target, kinds);
    assert!(!files.is_empty(), "no seeds for {target}");
    let exe = std::env::current_exe().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    for f in files {
        let out = Command::new("bash")
            .arg("-c")
            .arg("ulimit -v 2097152; exec timeout 60 \"$0\" \"$@\"")
            .arg(&exe)
            .args(["--exact", test, "--include-ignored", "--nocapture"])
            .env("PT_FUZZ_REPLAY", format!("{target}:{}", f.display()))
            .env("PT_FUZZ_SCRATCH", scratch.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{target} on {}: {}\n{}",
            name(&f),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let insns: u64 = stdout
            .split("decoded ")
            .nth(1)
            .and_then(|r| r.split(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("{target} on {}: {stdout}", name(&f)));
        if f.parent()
            .and_then(Path::parent)
            .is_some_and(|p| p.ends_with("seeds"))
        {
            assert!(
                insns > 10,
                "{target} decodes only {insns} instructions of the seed"
            );
        }
    }
}

fn name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// The committed seed is what ptsim writes for the fixed image today
/// (rewritten with `UPDATE_EXPECT=1`, the variable that rewrites the golden
/// files too; the seed is binary, so it is compared here rather than
/// through expect-test); the replays below check that both harnesses
/// decode it, proof that they reach the decoder.
#[test]
fn the_seed_is_a_real_trace_of_the_image() {
    let seed = harness::seed();
    for target in ["raw_pt", "trace_dir"] {
        let path = pt_tests::workspace_root()
            .join("fuzz/seeds")
            .join(target)
            .join("ptsim-run-of-the-image");
        if std::env::var_os("UPDATE_EXPECT").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &seed).unwrap();
        }
        assert_eq!(
            std::fs::read(&path).ok(),
            Some(seed.clone()),
            "{} is stale: rerun with UPDATE_EXPECT=1",
            path.display()
        );
    }
    // lldb_bundle's: a bundle of the same trace over the image.
    let path = pt_tests::workspace_root().join("fuzz/seeds/lldb_bundle/per-thread");
    let seed = harness::lldb_bundle_seed();
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &seed).unwrap();
    }
    assert_eq!(
        std::fs::read(&path).ok(),
        Some(seed.clone()),
        "{} is stale: rerun with UPDATE_EXPECT=1",
        path.display()
    );
    // The seed reaches the decoder: the image's instructions.
    assert!(harness::lldb_bundle(&seed) > 10);
    // garbage_prefix's: its parameters and garbage (the harness appends
    // the seed above).
    let path = pt_tests::workspace_root().join("fuzz/seeds/garbage_prefix/psb-every-kib");
    let seed = harness::garbage_prefix_seed();
    if std::env::var_os("PT_FUZZ_SEEDS_UPDATE").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &seed).unwrap();
    }
    assert_eq!(
        std::fs::read(&path).ok(),
        Some(seed),
        "{} is stale: rerun with PT_FUZZ_SEEDS_UPDATE=1",
        path.display()
    );
}

#[test]
fn raw_pt_inputs_decode_without_crashing() {
    if replay_in_child() {
        return;
    }
    replay_all(
        "raw_pt",
        &["seeds", "regressions"],
        "raw_pt_inputs_decode_without_crashing",
    );
}

/// The raw PT inputs through both flow decoders: the same instructions,
/// errors and FTF (issue 23's differential target, `flow_diff`).
#[test]
fn flow_decoders_agree_on_fuzz_inputs() {
    if replay_in_child() {
        return;
    }
    replay_all(
        "flow_diff",
        &["seeds", "regressions"],
        "flow_decoders_agree_on_fuzz_inputs",
    );
}

/// The same through the decoders side by side (`flow_lockstep`).
#[test]
fn flow_decoders_agree_side_by_side_on_fuzz_inputs() {
    if replay_in_child() {
        return;
    }
    replay_all(
        "flow_lockstep",
        &["seeds", "regressions"],
        "flow_decoders_agree_side_by_side_on_fuzz_inputs",
    );
}

#[test]
fn trace_dir_inputs_decode_without_crashing() {
    if replay_in_child() {
        return;
    }
    replay_all(
        "trace_dir",
        &["seeds", "regressions"],
        "trace_dir_inputs_decode_without_crashing",
    );
}

#[test]
fn lldb_bundle_inputs_decode_without_crashing() {
    if replay_in_child() {
        return;
    }
    replay_all(
        "lldb_bundle",
        &["seeds", "regressions"],
        "lldb_bundle_inputs_decode_without_crashing",
    );
}

#[test]
fn perf_data_inputs_parse_without_crashing() {
    if replay_in_child() {
        return;
    }
    replay_all(
        "perf_data",
        &["regressions"],
        "perf_data_inputs_parse_without_crashing",
    );
}

#[test]
fn garbage_prefix_inputs_decode_alike_in_any_chunks() {
    if replay_in_child() {
        return;
    }
    replay_all(
        "garbage_prefix",
        &["seeds", "regressions"],
        "garbage_prefix_inputs_decode_alike_in_any_chunks",
    );
}

/// Issue 44: the fuzz seed's trace with its perf.data cut at every offset
/// (`perf_data_cut`'s harness, offset by offset): each cut is refused or
/// decodes what is there, never a panic; cuts inside the trace data decode
/// the bytes before the cut; a cut after the data decodes everything.
#[test]
fn a_trace_cut_at_every_offset_decodes_what_is_there() {
    use ptsim::testkit::{self, Aux, Program, Setup};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    std::fs::create_dir(&dir).unwrap();
    let program = Program::new(harness::CODE.to_vec(), testkit::BASE);
    let aux = harness::seed();
    testkit::write_trace(
        &dir,
        &ptsim::pt::Config::default(),
        &program,
        &Aux::whole(&aux),
        &Setup::task(1, 1),
    );
    let full = std::fs::read(dir.join("data")).unwrap();
    let whole = harness::decode_cut(&dir, full.len());
    assert!(whole > 0);
    let file = sideband::file::PerfFile::parse(&full).unwrap();
    let rec = file
        .raw_records()
        .find(|r| r.header.kind == sideband::record::kind::AUXTRACE)
        .unwrap();
    let data_at = rec.offset as usize + rec.bytes.len();
    let mut partial = 0;
    for at in 0..=full.len() {
        std::fs::write(dir.join("data"), &full).unwrap();
        let n = harness::decode_cut(&dir, at);
        assert!(
            n <= whole,
            "cut at {at}: {n} instructions, more than the whole {whole}"
        );
        if at >= data_at + aux.len() {
            assert_eq!(n, whole, "cut at {at}, after the trace data");
        } else if at > data_at + aux.len() / 2 && n > 0 {
            partial += 1;
        }
    }
    assert!(partial > 0, "no cut inside the trace data decoded anything");
}
