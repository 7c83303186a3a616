//! Issue 46: the Parquet dataset (`ptdec TRACE -o ROOT --format parquet`)
//! queried with real engines, DuckDB, Apache DataFusion and Polars from the
//! test venv (`tests/py/sql.py`), on ptsim traces of the fixture programs
//! scaled up with `--repeat`:
//!
//! - per function, the calls, tail calls, roots, untraced starts, self ns,
//!   self instructions and longest call that SQL sums over `calls` are
//!   `ptdec report`'s, and the call instructions (`kind = 'call' AND NOT
//!   unknown_start`) are the truth's;
//! - every `parent_id` is a row of the same thread one level down that
//!   encloses its child, ids are unique, each row's self instructions and
//!   self ns are its own less its children's (a join on `parent_id`), and
//!   the self instructions add up to the truth's instructions;
//! - the slowest calls are `ptdec report --slowest`'s;
//! - every query of docs/sql.md runs on every engine with the same answer
//!   (Polars: all but the one with `percentile_cont`, which it lacks), and
//!   on Spark too where `PT_SPARK` names an installation (skipped
//!   visibly otherwise);
//! - two traces of one program (one with `--repeat`) in one folder: the
//!   docs' comparison finds the functions whose calls grew, by as much as
//!   the truth says; three traces side by side are one table, each
//!   `trace` its own rows; a name already there is refused without
//!   `--force`.
//!
//! gcc (for the fixture programs) and the venv's engines follow
//! `pt_tests`' tool policy.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::dataset::{self, Answer};
use ptdec::decode::DecodeOptions;
use ptsim::sim::repeat::RepeatSpec;
use serde_json::Value;

mod common;

fn programs(test: &str) -> Option<PathBuf> {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-programs");
    pt_tests::fixture_programs(test, &out)
}

/// Runs ptsim on `prog`, with a `--repeat` spec when given (empty
/// environment).
fn simulate(progs: &Path, prog: &str, repeat: Option<&str>, dir: &Path) {
    let mut o = ptsim::sim::Options::new(progs.join(prog), Vec::new(), dir);
    o.env = Some(Vec::new());
    o.repeat = repeat
        .map(|r| r.parse::<RepeatSpec>().unwrap())
        .into_iter()
        .collect();
    let r = ptsim::sim::run(o).unwrap_or_else(|e| panic!("ptsim {prog}: {e}"));
    assert!(
        matches!(r.outcome.exit, Some(ptsim::engine::Exit::Code(0))),
        "{prog}: {:?}",
        r.outcome.exit
    );
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        v => panic!("not a string: {v}"),
    }
}

/// The same answer from every engine that runs the query
/// ([`dataset::runs`]); returns DuckDB's.
fn agreed(python: &Path, root: &Path, queries: &[String], engines: &[&str]) -> Vec<Answer> {
    let mut first: Option<Vec<Answer>> = None;
    for &engine in engines {
        let mine: Vec<(usize, String)> = queries
            .iter()
            .enumerate()
            .filter(|(_, q)| dataset::runs(engine, q))
            .map(|(i, q)| (i, q.clone()))
            .collect();
        let texts: Vec<String> = mine.iter().map(|m| m.1.clone()).collect();
        let answers = dataset::sql(python, engine, root, &texts);
        match &first {
            None => first = Some(answers),
            Some(want) => {
                for ((i, q), got) in mine.iter().zip(&answers) {
                    assert_eq!(
                        got.rows, want[*i].rows,
                        "{engine} and {} answer differently:\n{q}",
                        engines[0]
                    );
                }
            }
        }
    }
    first.unwrap()
}

const PER_FUNCTION: &str = "
SELECT function, coalesce(module, '') AS module, count(*) AS calls,
       count(CASE WHEN kind = 'tail call' THEN 1 END) AS tail_calls,
       count(CASE WHEN kind = 'root' THEN 1 END) AS roots,
       count(CASE WHEN unknown_start THEN 1 END) AS unknown_start,
       sum(self_ns) AS self_ns, sum(self_insns) AS self_insns, max(dur_ns) AS max_ns,
       count(CASE WHEN kind = 'call' AND NOT unknown_start THEN 1 END) AS call_insns
FROM calls WHERE trace = 'T'
GROUP BY function, coalesce(module, '')
ORDER BY function, module";

/// Counts that must be 0: a parent that is not a row of the same thread
/// one level down enclosing its child; self instructions or ns that are
/// not the row's less its children's; ids that repeat.
const BROKEN: &str = "
SELECT
  (SELECT count(*) FROM calls c
   LEFT JOIN calls p ON p.trace = c.trace AND p.call_id = c.parent_id
   WHERE c.trace = 'T' AND c.parent_id IS NOT NULL
     AND (p.call_id IS NULL OR p.pid <> c.pid OR p.tid <> c.tid OR p.depth <> c.depth - 1
          OR p.start_insn > c.start_insn OR p.start_insn + p.insns < c.start_insn + c.insns
          OR p.start_ns > c.start_ns OR p.start_ns + p.dur_ns < c.start_ns + c.dur_ns)) AS bad_parents,
  (SELECT count(*) FROM calls c
   LEFT JOIN (SELECT trace, parent_id, sum(insns) AS i, sum(dur_ns) AS d FROM calls
              WHERE parent_id IS NOT NULL GROUP BY trace, parent_id) k
     ON k.trace = c.trace AND k.parent_id = c.call_id
   WHERE c.trace = 'T'
     AND (c.self_insns <> c.insns - coalesce(k.i, 0) OR c.self_ns <> c.dur_ns - coalesce(k.d, 0))) AS bad_self,
  (SELECT count(*) - count(DISTINCT call_id) FROM calls WHERE trace = 'T') AS repeated_ids,
  (SELECT sum(self_insns) FROM calls WHERE trace = 'T') AS insns";

const SLOWEST: &str = "
SELECT function, tid, start_ns, dur_ns FROM calls
WHERE trace = 'T' AND kind NOT IN ('untraced', 'gap')
ORDER BY dur_ns DESC, start_ns, tid LIMIT 10";

#[test]
fn engines_answer_as_the_report_and_the_truth() {
    let test = "engines_answer_as_the_report_and_the_truth";
    let Some(progs) = programs(test) else { return };
    let Some(python) = pt_tests::python_with(test, &["duckdb", "datafusion", "polars"]) else {
        return;
    };
    let engines = dataset::engines(test);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ds");
    for (prog, spec) in [("interp", "interp_run=30"), ("loopmix", "step=20")] {
        let dir = tmp.path().join(prog);
        simulate(&progs, prog, Some(spec), &dir);
        let (run, stats) = dataset::write(&dir, &root, prog, DecodeOptions::default());
        assert!(run.decode.errors.is_empty(), "{:?}", run.decode.errors);
        let (_, agg) = common::run_report(&dir, DecodeOptions::default(), false, 10);
        let q = |s: &str| s.replace("'T'", &format!("'{prog}'"));
        let a = agreed(
            &python,
            &root,
            &[q(PER_FUNCTION), q(BROKEN), q(SLOWEST)],
            &engines,
        );

        // Per function: the report's row.
        let mut want = BTreeMap::new();
        for ((_, f), st) in &agg.rows {
            let name = &agg.funcs[*f as usize];
            let key = (name.name.to_string(), name.module.to_string());
            let row = (
                st.calls,
                st.tail_calls,
                st.roots,
                st.unknown_start,
                st.self_ns,
                st.self_insns,
                st.max_ns,
            );
            want.insert(key, row);
        }
        let mut got = BTreeMap::new();
        let mut call_insns: BTreeMap<String, u64> = BTreeMap::new();
        for r in &a[0].rows {
            let n = |i: usize| int(&r[i]) as u64;
            got.insert(
                (text(&r[0]), text(&r[1])),
                (n(2), n(3), n(4), n(5), n(6), n(7), n(8)),
            );
            *call_insns.entry(text(&r[0])).or_default() += n(9);
        }
        assert_eq!(got, want, "{prog}: SQL per function vs ptdec report");
        assert_eq!(
            got.values().map(|g| g.0).sum::<u64>(),
            stats.calls + stats.untraced + stats.gaps
        );

        // The truth's call instructions per function, by symbol.
        let truth_calls = truth_calls(&dir, &text_symbols(&progs.join(prog)));
        assert!(truth_calls.len() >= 5, "{prog}: {truth_calls:?}");
        for (name, n) in &truth_calls {
            assert_eq!(
                call_insns.get(name),
                Some(n),
                "{prog}: call instructions to {name}"
            );
        }

        // Structure.
        let b = &a[1].rows[0];
        assert_eq!(
            (int(&b[0]), int(&b[1]), int(&b[2])),
            (0, 0, 0),
            "{prog}: bad parents, bad self sums, repeated ids"
        );
        assert_eq!(int(&b[3]) as u64, run.decode.insns, "{prog}: instructions");

        // The slowest calls.
        let slow: Vec<(String, i64, i64, i64)> = a[2]
            .rows
            .iter()
            .map(|r| (text(&r[0]), int(&r[1]), int(&r[2]), int(&r[3])))
            .collect();
        let report_slow: Vec<(String, i64, i64, i64)> = agg
            .slowest
            .iter()
            .map(|c| {
                (
                    agg.funcs[c.func as usize].name.to_string(),
                    c.tid as i64,
                    (c.start - agg.origin) as i64,
                    c.ns as i64,
                )
            })
            .collect();
        let durs = |v: &[(String, i64, i64, i64)]| v.iter().map(|c| c.3).collect::<Vec<_>>();
        assert_eq!(durs(&slow), durs(&report_slow), "{prog}: slowest");
        let shortest = slow.last().map_or(0, |c| c.3);
        for c in report_slow.iter().filter(|c| c.3 > shortest) {
            assert!(slow.contains(c), "{prog}: {c:?} not in SQL's {slow:?}");
        }
        eprintln!(
            "{prog} {spec}: {} functions' rows = report on {}; {} functions' call instructions = truth; {} rows, parents exact",
            got.len(),
            engines.join(", "),
            truth_calls.len(),
            stats.calls + stats.untraced + stats.gaps
        );
    }

    // Every query of the docs, on both engines, with answers.
    let docs = dataset::doc_queries();
    assert!(docs.len() >= 8, "{docs:?}");
    let queries: Vec<String> = docs.iter().map(|(_, q)| q.clone()).collect();
    let answers = agreed(&python, &root, &queries, &engines);
    for ((name, _), a) in docs.iter().zip(&answers) {
        // The comparison needs traces named before and after (the next test).
        if name != "two-builds" {
            assert!(!a.rows.is_empty(), "docs/sql.md's {name}: no rows");
        }
    }
}

/// The truth's call instructions per function of the ptsim trace dir
/// `dir`, over all threads, by the `symbols` of their targets.
fn truth_calls(dir: &Path, symbols: &BTreeMap<u64, String>) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for t in common::thread_truths(dir).values() {
        for ((kind, to), n) in t.totals() {
            if let (true, Some(name)) = (kind == "call", symbols.get(&to)) {
                *m.entry(name.clone()).or_default() += n;
            }
        }
    }
    m
}

/// The text symbols of a non-PIE program by address (`nm`).
fn text_symbols(prog: &Path) -> BTreeMap<u64, String> {
    let out = std::process::Command::new("nm")
        .arg(prog)
        .output()
        .expect("run nm");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && matches!(f[1], "T" | "t"))
                .then(|| Some((u64::from_str_radix(f[0], 16).ok()?, f[2].to_string())))?
        })
        .collect()
}

#[test]
fn traces_side_by_side_are_one_table() {
    let test = "traces_side_by_side_are_one_table";
    let Some(progs) = programs(test) else { return };
    let Some(python) = pt_tests::python_with(test, &["duckdb", "datafusion", "polars"]) else {
        return;
    };
    let engines = dataset::engines(test);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ds");
    let before = tmp.path().join("before");
    let after = tmp.path().join("after");
    let third = tmp.path().join("third");
    simulate(&progs, "interp", None, &before);
    simulate(&progs, "interp", Some("interp_run=30"), &after);
    simulate(&progs, "recursion", None, &third);
    let mut rows = BTreeMap::new();
    for (dir, name) in [(&before, "before"), (&after, "after"), (&third, "third")] {
        let (_, s) = dataset::write(dir, &root, name, DecodeOptions::default());
        rows.insert(name.to_string(), s.calls + s.untraced + s.gaps);
    }

    // A name that is there already is refused without --force.
    let opened = common::Opened::new(&before, &[]);
    let out = ptdec::plan::Parquet {
        dataset: ptdec::parquet::DatasetOptions::default(),
        folder: root.clone(),
        facts: ptdec::parquet::TraceFacts {
            trace_name: "before".into(),
            ..Default::default()
        },
    };
    let input = opened.input();
    let plan = ptdec::plan::Plan::new(input, DecodeOptions::default(), Default::default(), out);
    let Err(e) = ptdec::dataset::run(&plan, None) else {
        panic!("a trace name already in the folder was not refused");
    };
    assert!(e.to_string().contains("exists; give --force"), "{e}");

    // One table: each trace its own rows.
    let per_trace = dataset::doc_queries()
        .into_iter()
        .find(|(n, _)| n == "per-trace")
        .unwrap()
        .1;
    let two = dataset::doc_queries()
        .into_iter()
        .find(|(n, _)| n == "two-builds")
        .unwrap()
        .1;
    let grown = "
        SELECT function,
               count(CASE WHEN trace = 'after' AND kind = 'call' AND NOT unknown_start THEN 1 END)
             - count(CASE WHEN trace = 'before' AND kind = 'call' AND NOT unknown_start THEN 1 END)
                 AS more_call_insns,
               count(CASE WHEN trace = 'after' AND kind NOT IN ('untraced', 'gap') THEN 1 END)
             - count(CASE WHEN trace = 'before' AND kind NOT IN ('untraced', 'gap') THEN 1 END)
                 AS more_calls
        FROM calls WHERE trace IN ('before', 'after') AND function IN
            (SELECT function FROM calls WHERE trace = 'before'
             INTERSECT SELECT function FROM calls WHERE trace = 'after')
        GROUP BY function ORDER BY more_calls DESC, function"
        .to_string();
    let a = agreed(&python, &root, &[per_trace, two, grown], &engines);
    let got: BTreeMap<String, u64> = a[0]
        .rows
        .iter()
        .map(|r| (text(&r[0]), int(&r[1]) as u64))
        .collect();
    assert_eq!(got, rows, "rows per trace");

    // The call instructions that grew, per function, are the truth's.
    let symbols = text_symbols(&progs.join("interp"));
    let (b, f) = (
        truth_calls(&before, &symbols),
        truth_calls(&after, &symbols),
    );
    let mut checked = 0;
    for r in &a[2].rows {
        let name = text(&r[0]);
        if let (Some(x), Some(y)) = (b.get(&name), f.get(&name)) {
            assert_eq!(
                int(&r[1]),
                *y as i64 - *x as i64,
                "{name}: more call instructions"
            );
            checked += 1;
        }
    }
    assert!(checked >= 5, "only {checked} functions compared");
    // The docs' comparison: the same functions, the one that grew most
    // first.
    let grew = &a[1].rows;
    let top = text(&grew[0][0]);
    assert_eq!(
        (top.clone(), int(&grew[0][3])),
        (text(&a[2].rows[0][0]), int(&a[2].rows[0][2])),
        "docs/sql.md's two-builds"
    );
    assert!(
        f.get(&top).unwrap_or(&0) > b.get(&top).unwrap_or(&0),
        "{top}: its call instructions did not grow"
    );
    eprintln!(
        "3 traces in one dataset ({rows:?} rows); {checked} functions' grown call instructions = truth; most grown: {top} by {}",
        int(&grew[0][3])
    );
}

/// `-o X.parquet`: one file of `calls` whose rows answer as the folder's,
/// and whose footer names the threads. The queries of docs/sql.md's "One
/// file" section run on the file with DuckDB and must answer as the same
/// questions asked of the dataset folder's tables.
#[test]
fn a_single_file_answers_as_the_folder() {
    let test = "a_single_file_answers_as_the_folder";
    let Some(progs) = programs(test) else { return };
    let Some(python) = pt_tests::python_with(test, &["duckdb"]) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("threads");
    simulate(&progs, "threads", None, &dir);
    let root = tmp.path().join("ds");
    dataset::write(&dir, &root, "T", DecodeOptions::default());
    let file = tmp.path().join("x.parquet");
    let opened = common::Opened::new(&dir, &[]);
    let out = ptdec::plan::Parquet {
        dataset: ptdec::parquet::DatasetOptions {
            single_file: true,
            ..Default::default()
        },
        folder: file.clone(),
        facts: ptdec::parquet::TraceFacts {
            trace_name: "T".into(),
            ..Default::default()
        },
    };
    let plan = ptdec::plan::Plan::new(
        opened.input(),
        DecodeOptions::default(),
        Default::default(),
        out,
    );
    let (_, stats) = ptdec::dataset::run(&plan, None).unwrap();
    assert!(stats.threads >= 4, "{stats:?}");
    assert!(!root.join("x.parquet").exists());

    let queries = dataset::doc_file_queries();
    assert_eq!(queries.len(), 2, "docs/sql.md's file queries");
    let path = file.display().to_string();
    let on_file: Vec<String> = queries
        .iter()
        .map(|(_, q)| q.replace("'x.parquet'", &format!("'{path}'")))
        .collect();
    let empty = tmp.path().join("no-tables");
    std::fs::create_dir(&empty).unwrap();
    let got = dataset::sql(&python, "duckdb", &empty, &on_file);
    let want = dataset::sql(
        &python,
        "duckdb",
        &root,
        &[
            "SELECT function, count(*) AS calls FROM calls WHERE trace = 'T' GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 5".into(),
            "SELECT t.name, count(*) AS rows FROM calls c JOIN threads t USING (trace, pid, tid) \
             WHERE trace = 'T' GROUP BY 1 ORDER BY 1"
                .into(),
        ],
    );
    for (((name, _), g), w) in queries.iter().zip(&got).zip(&want) {
        assert_eq!(g.rows, w.rows, "{name}");
        assert!(!g.rows.is_empty(), "{name}");
    }
    // Every thread has its name from the footer.
    let named: i64 = got[1].rows.iter().map(|r| int(&r[1])).sum();
    assert_eq!(named as u64, stats.calls + stats.untraced + stats.gaps);
}
