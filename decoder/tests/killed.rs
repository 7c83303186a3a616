//! A program killed while it runs (`ptsim --max-insns`, issue 43): the
//! calls it left running are written to the FTF with `cut` = `end`, read
//! back from the file: as many as the ground truth's frames open at the
//! kill (and the root frame), all ending where the trace does, none of the
//! calls that returned; `ptdec report` counts the same calls cut. gcc (for
//! the fixture) follows `pt_tests`' tool policy.

use std::path::Path;
use std::process::Command;

use ftf::read::{EventKind, RecordKind, Value};

/// One call slice read back: (name, start, end, cut arg, unknown_start).
type Call = (String, u64, u64, Option<String>, bool);

fn calls(ftf: &Path) -> Vec<Call> {
    let bytes = std::fs::read(ftf).unwrap();
    let mut v = Vec::new();
    for r in ftf::read::parse(&bytes).unwrap() {
        let RecordKind::Event(e) = r.kind else {
            continue;
        };
        let EventKind::DurationComplete { end } = e.kind else {
            continue;
        };
        if e.category != "call" {
            continue;
        }
        let cut = e.args.iter().find_map(|a| match (&*a.name, &a.value) {
            ("cut", Value::Str(s)) => Some(s.clone()),
            _ => None,
        });
        let unknown_start = e.args.iter().any(|a| a.name == "unknown_start");
        v.push((e.name, e.ts, end, cut, unknown_start));
    }
    v
}

/// `truth/TID.txt` of the trace's one thread: (calls, returns), and the
/// index of the last call to `to`.
fn truth(dir: &Path, to: u64) -> (u64, u64, u64) {
    let mut files = std::fs::read_dir(dir.join("truth"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_stem()
                .is_some_and(|s| s.to_string_lossy().parse::<u32>().is_ok())
        });
    let file = files.next().expect("a thread's truth");
    assert!(files.next().is_none(), "one thread");
    let lines = ptsim::truth::read_thread_file(&file).unwrap();
    let (mut calls, mut returns, mut last) = (0, 0, 0);
    for l in &lines {
        match l.kind.as_str() {
            "call" => calls += 1,
            "return" => returns += 1,
            _ => {}
        }
        if l.kind == "call" && l.to == to {
            last = l.index;
        }
    }
    (calls, returns, last)
}

/// The address of `name` in the (non-PIE) program `prog`, by `nm`.
fn symbol(prog: &Path, name: &str) -> u64 {
    let out = Command::new("nm").arg(prog).output().expect("run nm");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[2] == name).then(|| u64::from_str_radix(f[0], 16).unwrap())
        })
        .unwrap_or_else(|| panic!("no {name} in {}", prog.display()))
}

fn simulate(prog: &Path, dir: &Path, max_insns: Option<u64>) -> bool {
    let mut o = ptsim::sim::Options::new(prog, Vec::new(), dir);
    o.env = Some(Vec::new());
    o.force = true;
    o.max_insns = max_insns;
    let r = ptsim::sim::run(o).unwrap();
    r.outcome.limit_reached
}

#[test]
fn calls_running_when_the_program_was_killed_are_cut_in_the_ftf() {
    let test = "calls_running_when_the_program_was_killed_are_cut_in_the_ftf";
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-programs");
    let Some(progs) = pt_tests::fixture_programs(test, &out) else {
        return;
    };
    // recursion: main -> compute -> fact x6. Killed two instructions into
    // the deepest fact.
    let prog = progs.join("recursion");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("trace");
    let fact = symbol(&prog, "fact");
    assert!(!simulate(&prog, &dir, None), "ran to its end");
    let (_, _, deepest) = truth(&dir, fact);
    assert!(simulate(&prog, &dir, Some(deepest + 2)), "killed");
    let (truth_calls, truth_returns, _) = truth(&dir, fact);
    let open = truth_calls - truth_returns;
    assert!(open >= 8, "{open} frames open at the kill");

    let ftf = tmp.path().join("out.ftf");
    let run = Command::new(env!("CARGO_BIN_EXE_ptdec"))
        .arg(&dir)
        .arg("-o")
        .arg(&ftf)
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{summary}");
    let calls = calls(&ftf);
    let end = calls.iter().map(|c| c.2).max().unwrap();
    let cut: Vec<&Call> = calls.iter().filter(|c| c.3.is_some()).collect();
    // The frames the truth says were open, and the root frame (_start,
    // entered at the trace's first instruction, never returns).
    assert_eq!(cut.len() as u64, open + 1, "{cut:#?}");
    assert!(
        cut.iter()
            .all(|c| c.3.as_deref() == Some("end") && c.2 == end),
        "{cut:#?}"
    );
    let facts = calls.iter().filter(|c| c.0 == "fact").count();
    assert_eq!(facts, 6, "{calls:#?}");
    assert!(
        calls
            .iter()
            .filter(|c| ["main", "compute", "fact"].contains(&c.0.as_str()))
            .all(|c| c.3.is_some()),
        "all of main, compute and fact were running: {calls:#?}"
    );
    let line = summary
        .lines()
        .find(|l| l.trim_start().starts_with("cut at end"))
        .unwrap_or_else(|| panic!("no cut at end line: {summary}"));
    assert!(
        line.contains(&format!(" {} calls still running", cut.len())),
        "{line}"
    );

    // The report calls the same calls cut (those with an untraced start
    // count once).
    let run = Command::new(env!("CARGO_BIN_EXE_ptdec"))
        .args(["report", "-q", "--format", "json"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(run.status.success());
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let partial = calls.iter().filter(|c| c.3.is_some() || c.4).count() as u64;
    assert_eq!(json["cut"].as_u64(), Some(partial), "{json}");
    eprintln!(
        "recursion killed at instruction {}: {open} frames open by the truth, {} calls cut at their end in the FTF, {partial} cut in the report",
        deepest + 2,
        cut.len()
    );
}
