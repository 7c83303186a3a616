//! The Parquet dataset in the end-to-end tests: written by ptdec's run as
//! the CLI plans it (`ptdec TRACE -o ROOT --format parquet --trace-name
//! NAME`), read back with the Arrow project's reader, and queried with
//! real engines (DuckDB, DataFusion) through `tests/py/sql.py`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, Int8Type};
use arrow_array::Array;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// Decodes the trace dir `dir` into trace `name` of the dataset `root`
/// (binaries from their recorded paths and the trace dir's vDSO, never
/// ~/.debug), with times spread as the CLI does.
pub fn write(
    dir: &Path,
    root: &Path,
    name: &str,
    decode: ptdec::decode::DecodeOptions,
) -> (ptdec::pipeline::Report, ptdec::parquet::DatasetStats) {
    let opened = super::Opened::new(dir, &[]);
    let stacks = ptdec::pipeline::StackOptions {
        interpolate: true,
        min_duration: None,
    };
    let out = ptdec::plan::Parquet {
        dataset: ptdec::parquet::DatasetOptions::default(),
        folder: root.to_path_buf(),
        facts: ptdec::parquet::TraceFacts {
            trace_name: name.to_string(),
            source: dir.display().to_string(),
            ptdec_version: "test".into(),
            ..Default::default()
        },
    };
    let plan = ptdec::plan::Plan::new(opened.input(), decode, stacks, out);
    ptdec::dataset::run(&plan, None).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

/// A row of `calls`, as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub call_id: i64,
    pub parent_id: Option<i64>,
    pub depth: i32,
    pub tid: i32,
    pub start_ns: i64,
    pub dur_ns: i64,
    pub start_insn: i64,
    pub insns: i64,
    pub function: String,
    pub addr: i64,
    pub kind: String,
}

impl Call {
    /// A call slice (not untraced time or a gap).
    pub fn is_call(&self) -> bool {
        !matches!(self.kind.as_str(), "untraced" | "gap")
    }
}

/// Every row of trace `name`'s `calls` in the dataset `root`.
pub fn calls(root: &Path, name: &str) -> Vec<Call> {
    let path = root.join("calls").join(format!("trace={name}"));
    let mut rows = Vec::new();
    for entry in std::fs::read_dir(&path).unwrap() {
        let file = std::fs::File::open(entry.unwrap().path()).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        for b in reader {
            let b = b.unwrap();
            let col = |n: &str| b.column_by_name(n).unwrap().clone();
            let i64s = |n: &str| col(n).as_primitive::<Int64Type>().clone();
            let i32s = |n: &str| col(n).as_primitive::<Int32Type>().clone();
            let function = col("function").as_dictionary::<Int32Type>().clone();
            let names = function.values().as_string::<i32>().clone();
            let kind = col("kind").as_dictionary::<Int8Type>().clone();
            let kinds = kind.values().as_string::<i32>().clone();
            let (id, parent, start, dur, start_insn, insns, addr) = (
                i64s("call_id"),
                i64s("parent_id"),
                i64s("start_ns"),
                i64s("dur_ns"),
                i64s("start_insn"),
                i64s("insns"),
                i64s("addr"),
            );
            let (depth, tid) = (i32s("depth"), i32s("tid"));
            for i in 0..b.num_rows() {
                rows.push(Call {
                    call_id: id.value(i),
                    parent_id: (!parent.is_null(i)).then(|| parent.value(i)),
                    depth: depth.value(i),
                    tid: tid.value(i),
                    start_ns: start.value(i),
                    dur_ns: dur.value(i),
                    start_insn: start_insn.value(i),
                    insns: insns.value(i),
                    function: names.value(function.keys().value(i) as usize).to_string(),
                    addr: addr.value(i),
                    kind: kinds.value(kind.keys().value(i) as usize).to_string(),
                });
            }
        }
    }
    rows
}

/// Each row's nesting level from its `parent_id` chain: 0 at a root.
/// Panics on a parent that is not a row or a chain that loops.
pub fn levels(rows: &[Call]) -> HashMap<i64, i32> {
    let by_id: HashMap<i64, &Call> = rows.iter().map(|r| (r.call_id, r)).collect();
    assert_eq!(by_id.len(), rows.len(), "call_id not unique");
    let mut level: HashMap<i64, i32> = HashMap::new();
    for r in rows {
        let mut chain = vec![r.call_id];
        let mut at = r;
        let base = loop {
            if let Some(&l) = level.get(&at.call_id) {
                break l;
            }
            match at.parent_id {
                None => break -1,
                Some(p) => {
                    let parent = by_id
                        .get(&p)
                        .unwrap_or_else(|| panic!("parent {p} of {at:?} is not a row"));
                    assert!(chain.len() <= rows.len(), "a parent chain loops at {r:?}");
                    chain.push(p);
                    at = parent;
                }
            }
        };
        // `chain` ends with the row whose level is `base` (or the root).
        let known = level.contains_key(&at.call_id);
        let mut l = base;
        for id in chain.iter().rev().skip(usize::from(known)) {
            l += 1;
            level.insert(*id, l);
        }
    }
    level
}

/// A query's answer: column names and rows of JSON values.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<serde_json::Value>>,
}

/// The engines the dataset is queried with, from the test venv; Spark too
/// where `PT_SPARK` names an installation ([`engines`]).
pub const ENGINES: [&str; 3] = ["duckdb", "datafusion", "polars"];

/// The engines this run queries with: [`ENGINES`], and Spark when
/// `PT_SPARK` names a Spark installation (SPARK_HOME, or a pip-installed
/// `pyspark` folder); without it the test says, once, that Spark was
/// skipped.
pub fn engines(test: &str) -> Vec<&'static str> {
    let mut v = ENGINES.to_vec();
    match std::env::var_os("PT_SPARK") {
        Some(home) if Path::new(&home).is_dir() => v.push("spark"),
        Some(home) => panic!("PT_SPARK={}: not a folder", Path::new(&home).display()),
        None => pt_tests::skipped(
            &format!("{test} (Spark)"),
            "PT_SPARK does not name a Spark installation; the queries ran on DuckDB, DataFusion and Polars only",
        ),
    }
    v
}

/// Whether `engine` runs `query`: Polars's SQL has no `percentile_cont`.
pub fn runs(engine: &str, query: &str) -> bool {
    engine != "polars" || !query.contains("percentile_cont")
}

/// Runs `queries` over the dataset `root` with `engine` (`duckdb` or
/// `datafusion`) in the test venv's `python`: one answer each, or a panic
/// naming the query and the engine's error.
pub fn sql(python: &Path, engine: &str, root: &Path, queries: &[String]) -> Vec<Answer> {
    let script: PathBuf = pt_tests::workspace_root().join("tests/py/sql.py");
    let mut child = Command::new(python)
        .arg(&script)
        .arg(engine)
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tests/py/sql.py");
    let input = serde_json::to_vec(queries).unwrap();
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&input).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{engine}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    v.into_iter()
        .zip(queries)
        .map(|(a, q)| {
            if let Some(e) = a.get("error") {
                panic!("{engine} failed on\n{q}\n{e}");
            }
            let columns = a["columns"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap().to_string())
                .collect();
            let rows = a["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_array().unwrap().clone())
                .collect();
            Answer { columns, rows }
        })
        .collect()
}

/// The queries of docs/sql.md, by name: each ```sql block after a
/// `<!-- query: NAME -->` line.
pub fn doc_queries() -> Vec<(String, String)> {
    marked_queries("<!-- query:")
}

/// The queries of docs/sql.md's "One file" section, each after a
/// `<!-- file-query: NAME -->` line, over `'x.parquet'`.
pub fn doc_file_queries() -> Vec<(String, String)> {
    marked_queries("<!-- file-query:")
}

fn marked_queries(marker: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(pt_tests::workspace_root().join("docs/sql.md")).unwrap();
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        let Some(name) = l
            .trim()
            .strip_prefix(marker)
            .and_then(|r| r.strip_suffix("-->"))
        else {
            continue;
        };
        assert_eq!(lines.next().map(str::trim), Some("```sql"), "{name}");
        let sql: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
        out.push((name.trim().to_string(), sql.join("\n")));
    }
    out
}
