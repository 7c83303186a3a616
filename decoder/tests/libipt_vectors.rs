//! libipt's newest test suite, as test vectors, against `ptdec raw`: every
//! test of `../shared/libipt-tests/manifest.tsv` that has a ptxed
//! expectation (`X-ptxed.exp`) is decoded once per CPU it names, as
//! libipt's `test.bash` runs ptxed (`--raw X.bin:ORG --cpu F/M OPTIONS
//! --pt X.pt` and its sideband files), by ptdec's default flow decoder (the
//! fast one, which hands a PSB interval it does not handle to libipt
//! 2.1.2), and
//! its `--insn-list` must equal ptxed's output as `ptt.rs` compares them
//! (the shared `ptxed` module). The vectors come from a newer libipt than
//! the one ptdec is built with, so they hold what 2.1.2 does not know;
//! runs that differ are in [`EXPECTED`] with the reason, and a listed run
//! that starts to pass fails the test, so the list stays true. The tally
//! line counts the chunks the fast decoder handed to libipt, by reason.
//!
//! `PT_VECTORS_DECODER=libipt` decodes with libipt alone instead and only
//! prints the tally (the list is the fast decoder's).

mod ptxed;

use ptxed::{compare, expects_unknown_cpu, map_options, ptdec_raw, sideband_options};
use std::collections::BTreeMap;
use std::path::Path;

/// ptdec's resync goes on at a PSB+ as a sync there does, by design.
const RESYNC_STATUS: &str = "after a PSB+'s status update disagreed with the decoder (a bad \
    status update), ptxed's resync (libipt 2.2) reads that PSB+ as status updates again, fails \
    again (a resync error) and skips to the next PSB, dropping the code the PSB+ names; ptdec's \
    resync goes on as a sync at that PSB does and decodes that code, as a chunk cut at that PSB \
    does: the output must not depend on where chunks are cut (docs/decoding.md, decode errors)";
/// Runs that differ from ptxed's expectation, and why: `"TEST"` for every
/// CPU the test names, `"TEST F/M"` for one run.
const EXPECTED: &[(&str, &str)] = &[("ptxed-resync-psb-bad_status-psb", RESYNC_STATUS)];

/// One test of the manifest.
struct Vector {
    name: String,
    org: String,
    /// One run per CPU; none: one run without `--cpu`.
    cpus: Vec<String>,
    ptxed_options: String,
    sideband_files: Vec<String>,
}

/// `manifest.tsv`: a header line, then per test its name, org, CPUs,
/// ptxed's and ptdump's options and its sideband files (tab-separated,
/// lists space-separated).
fn manifest(dir: &Path) -> Vec<Vector> {
    let path = dir.join("manifest.tsv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    assert_eq!(
        header.split('\t').collect::<Vec<_>>(),
        [
            "test",
            "org",
            "cpus",
            "ptxed_options",
            "ptdump_options",
            "sideband_files"
        ],
        "{}: unexpected columns",
        path.display()
    );
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 6, "{}: {l}", path.display());
            let words = |s: &str| s.split_whitespace().map(str::to_string).collect();
            Vector {
                name: f[0].to_string(),
                org: f[1].to_string(),
                cpus: words(f[2]),
                ptxed_options: f[3].to_string(),
                sideband_files: words(f[5]),
            }
        })
        .collect()
}

#[derive(Default)]
struct Tally {
    vectors: usize,
    /// Vectors whose every run equals ptxed.
    vectors_equal: usize,
    runs: usize,
    equal: usize,
    listed: usize,
    /// Chunks the fast decoder decoded, and those it handed to libipt.
    own_chunks: u64,
    libipt_chunks: u64,
    /// Chunks handed to libipt, by the reason the summary gives, and the
    /// tests where that happened.
    reasons: BTreeMap<String, (u64, Vec<String>)>,
    failures: Vec<String>,
    /// Listed runs that equal ptxed now.
    stale: Vec<String>,
    /// Runs that differ (listed or not): per test, its CPUs.
    differ: Vec<(String, Vec<String>)>,
}

/// The summary's `flow decoder  ptdec's own for N chunks, libipt for M
/// (K REASON, ...)` line, added to the tally.
fn count_chunks(stderr: &str, name: &str, t: &mut Tally) {
    let Some(line) = stderr.lines().find(|l| l.contains("flow decoder")) else {
        return;
    };
    let num = |s: &str| -> u64 {
        s.chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .filter(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap_or(0)
    };
    if let Some(rest) = line.split("ptdec's own for ").nth(1) {
        t.own_chunks += num(rest);
    }
    if let Some(rest) = line.split(", libipt for ").nth(1) {
        t.libipt_chunks += num(rest);
        // `(K REASON, K REASON)`; a reason may hold commas and brackets
        // itself, so a part that does not start with a count goes on the
        // reason before it.
        if let Some(by) = rest.split_once(" (").and_then(|(_, b)| b.strip_suffix(')')) {
            let mut parts: Vec<(u64, String)> = Vec::new();
            for part in by.split(", ") {
                match (part.split_once(' '), parts.last_mut()) {
                    (Some((n, why)), _)
                        if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit() || c == ',') =>
                    {
                        parts.push((num(n), why.to_string()));
                    }
                    (_, Some(last)) => {
                        last.1.push_str(", ");
                        last.1.push_str(part);
                    }
                    (_, None) => {}
                }
            }
            for (n, why) in parts {
                let e = t.reasons.entry(why).or_default();
                e.0 += n;
                if e.1.last().map(String::as_str) != Some(name) {
                    e.1.push(name.to_string());
                }
            }
        }
    }
}

/// The entry of [`EXPECTED`] for a run, if any.
fn listed(name: &str, cpu: Option<&str>) -> Option<&'static str> {
    EXPECTED.iter().find_map(|(key, why)| {
        let (n, c) = key
            .split_once(' ')
            .map_or((*key, None), |(n, c)| (n, Some(c)));
        (n == name && (c.is_none() || c == cpu)).then_some(*why)
    })
}

/// Notes a run that differs, beside the test's other such runs.
fn differs(t: &mut Tally, name: &str, cpu: Option<&str>, note: &str) {
    let cpu = format!("{}{note}", cpu.unwrap_or("no cpu"));
    match t.differ.last_mut() {
        Some((n, cpus)) if n == name => cpus.push(cpu),
        _ => t.differ.push((name.to_string(), vec![cpu])),
    }
}

fn run(dir: &Path, work: &Path, v: &Vector, cpu: Option<&str>, decoder: &str, t: &mut Tally) {
    let name = &v.name;
    let exp = std::fs::read_to_string(dir.join(format!("{name}-ptxed.exp"))).unwrap();
    let opts = [v.ptxed_options.clone()];
    let (mut args, _resync) = match map_options(&opts, dir) {
        Ok(a) => a,
        Err(why) => {
            t.failures.push(format!("{name}: unmapped {why}"));
            return;
        }
    };
    if let Some(cpu) = cpu {
        args.extend(["--cpu".to_string(), cpu.to_string()]);
    }
    t.runs += 1;
    let tag = format!("{name}-{}", cpu.unwrap_or("none").replace('/', "_"));
    let list = work.join(format!("{tag}.list"));
    let out = ptdec_raw(dir, name, &v.org, &list, &work.join(format!("{tag}.ftf")))
        .arg("--decoder")
        .arg(decoder)
        .args(&args)
        .args(sideband_options(name, &v.sideband_files))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    count_chunks(&stderr, name, t);
    let (same, detail) = if expects_unknown_cpu(&exp) {
        // ptxed reports a CPU it knows no errata for as a configuration
        // error; ptdec refuses it.
        let refused = !out.status.success() && stderr.contains("knows no CPU");
        (refused, format!("an unknown CPU was not refused: {stderr}"))
    } else if !out.status.success() {
        let first = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        (false, format!("ptdec raw failed: {first}"))
    } else {
        let c = compare(&std::fs::read_to_string(&list).unwrap(), &exp);
        let detail = format!(
            "\n  ptxed: {:?} (insn count {:?})\n  ptdec: {:?}",
            c.want, c.count, c.got
        );
        (c.same, detail)
    };
    let run = format!("{name} (cpu {})", cpu.unwrap_or("none"));
    match (listed(name, cpu), same) {
        (Some(why), true) => {
            t.equal += 1;
            t.stale.push(format!(
                "{run}: equals ptxed now; remove it from EXPECTED ({why})"
            ));
        }
        (Some(_), false) => {
            t.listed += 1;
            differs(t, name, cpu, " (listed)");
        }
        (None, true) => t.equal += 1,
        (None, false) => {
            differs(t, name, cpu, "");
            t.failures.push(format!("{run}, {args:?}: {detail}"));
        }
    }
}

#[test]
fn libipt_vectors_match_ptxed() {
    let test = "libipt_vectors_match_ptxed";
    let dir = pt_tests::libipt_tests_dir();
    if !dir.join("manifest.tsv").is_file() {
        pt_tests::skipped(
            test,
            &format!(
                "{} holds no manifest.tsv (libipt's test vectors, ../shared beside the clone; \
                 PT_LIBIPT_TESTS names another place)",
                dir.display()
            ),
        );
        return;
    }
    let decoder = std::env::var("PT_VECTORS_DECODER").unwrap_or_else(|_| "fast".to_string());
    let vectors = manifest(&dir);
    let work = tempfile::tempdir().unwrap();
    let mut t = Tally::default();
    for v in &vectors {
        if !dir.join(format!("{}-ptxed.exp", v.name)).is_file() {
            // A ptdump-only test.
            continue;
        }
        t.vectors += 1;
        let before = t.equal;
        if v.cpus.is_empty() {
            run(&dir, work.path(), v, None, &decoder, &mut t);
        }
        for cpu in &v.cpus {
            run(&dir, work.path(), v, Some(cpu), &decoder, &mut t);
        }
        t.vectors_equal += usize::from(t.equal - before == v.cpus.len().max(1));
    }
    let reasons: Vec<String> = t
        .reasons
        .iter()
        .map(|(why, (n, _))| format!("{n} {why}"))
        .collect();
    eprintln!(
        "libipt vectors (--decoder {decoder}): {} vectors ({} equal in every run), {} runs, \
         {} equal, {} listed; chunks: ptdec's own {}, libipt {} ({})",
        t.vectors,
        t.vectors_equal,
        t.runs,
        t.equal,
        t.listed,
        t.own_chunks,
        t.libipt_chunks,
        reasons.join(", ")
    );
    let differ: Vec<String> = t
        .differ
        .iter()
        .map(|(name, cpus)| format!("{name}: {}", cpus.join(" ")))
        .collect();
    for (why, (n, tests)) in &t.reasons {
        eprintln!("{n} chunks to libipt for {why}: {}", tests.join(" "));
    }
    eprintln!("runs that differ from ptxed:\n  {}", differ.join("\n  "));
    if decoder != "fast" {
        return;
    }
    assert!(
        t.vectors > 150,
        "only {} vectors in {}",
        t.vectors,
        dir.display()
    );
    t.failures.extend(t.stale.iter().cloned());
    assert!(
        t.failures.is_empty(),
        "{} runs differ from what EXPECTED says:\n{}",
        t.failures.len(),
        t.failures.join("\n")
    );
}

/// `--decoder libipt` (2.1.2) on the TRIG vectors says what stopped it
/// and what to do: with the TRIG right after the first PSB+ (`trig`)
/// nothing is decoded and the run fails naming TRIG; after a TNT
/// (`tnt-trig`) the decode error at the TRIG says so in the listing and
/// the summary.
#[test]
fn libipt_names_the_trig_packet_it_does_not_know() {
    let dir = pt_tests::libipt_tests_dir();
    if !dir.join("trig.pt").is_file() {
        pt_tests::skipped(
            "libipt_names_the_trig_packet_it_does_not_know",
            &format!("{} holds no trig.pt", dir.display()),
        );
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let run = |name: &str| {
        let list = work.path().join(format!("{name}.list"));
        let out = ptdec_raw(&dir, name, "0x1000", &list, &work.path().join("out.ftf"))
            .args(["--decoder", "libipt"])
            .output()
            .unwrap();
        let listing = std::fs::read_to_string(&list).unwrap_or_default();
        (out, listing)
    };
    let (out, _) = run("trig");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("at a TRIG packet") && stderr.contains("--decoder fast"),
        "{stderr}"
    );
    let (out, listing) = run("tnt-trig");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("BadOpc (TRIG) 1"), "{stderr}");
    assert!(
        listing.contains("[1c: error: unknown opcode: a TRIG packet (libipt 2.2)"),
        "{listing}"
    );
    // The fast decoder decodes it: no error.
    let list = work.path().join("fast.list");
    let out = ptdec_raw(
        &dir,
        "tnt-trig",
        "0x1000",
        &list,
        &work.path().join("f.ftf"),
    )
    .output()
    .unwrap();
    assert!(out.status.success());
    let listing = std::fs::read_to_string(&list).unwrap();
    assert!(!listing.contains("error"), "{listing}");
    assert!(listing.contains("[trig 1a]"), "{listing}");
}
