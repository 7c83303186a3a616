//! `ptdec TRACE -o DIR --format parquet` (issue 46) on a ptsim trace of
//! `fixtures/programs/interp`, read back with the Arrow project's Parquet
//! reader: every parent exists and encloses its child, depths and times
//! are the FTF's for the same decode, per-function calls, tail calls and
//! self instructions are `ptdec report --format csv`'s, and the tables are
//! the same for `-j1`, `-j2` with stacks built ahead and a small chunk
//! size. gcc (for the fixture) follows `pt_tests`' tool policy.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, Int8Type};
use arrow_array::Array;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn ptdec() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ptdec"))
}

fn run(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = ptdec()
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "ptdec {args:?}: {err}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A ptsim trace of the interpreter, its loop run 5 more times; `None`
/// without gcc (the tool policy).
fn interp_trace(test: &str, dir: &Path) -> Option<PathBuf> {
    interp_trace_repeat(test, dir, 5)
}

/// As [`interp_trace`], the loop run `k` more times (about 4.6 KB of PT
/// each).
fn interp_trace_repeat(test: &str, dir: &Path, k: u64) -> Option<PathBuf> {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-programs");
    let progs = pt_tests::fixture_programs(test, &out)?;
    let trace = dir.join("interp.dir");
    let mut o = ptsim::sim::Options::new(progs.join("interp"), Vec::new(), &trace);
    o.env = Some(Vec::new());
    o.repeat = vec![format!("interp_run={k}").parse().unwrap()];
    ptsim::sim::run(o).unwrap();
    Some(trace)
}

/// A row of `calls`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Row {
    call_id: i64,
    parent_id: Option<i64>,
    depth: i32,
    pid: i32,
    tid: i32,
    start_ns: i64,
    dur_ns: i64,
    start_insn: i64,
    insns: i64,
    self_insns: i64,
    function: String,
    module: Option<String>,
    kind: String,
    cut_end: bool,
}

fn calls(dir: &Path) -> Vec<Row> {
    calls_of(&dir.join("calls/trace=interp/part-0.parquet"))
}

/// The rows of a file of `calls` (a dataset's, or a single file).
fn calls_of(path: &Path) -> Vec<Row> {
    let file = std::fs::File::open(path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let mut rows = Vec::new();
    for b in reader {
        let b = b.unwrap();
        let col = |n: &str| b.column_by_name(n).unwrap().clone();
        let i64s = |n: &str| col(n).as_primitive::<Int64Type>().clone();
        let i32s = |n: &str| col(n).as_primitive::<Int32Type>().clone();
        let strs = |n: &str| {
            let d = col(n).as_dictionary::<Int32Type>().clone();
            let v = d.values().as_string::<i32>().clone();
            (0..d.len())
                .map(|i| (!d.is_null(i)).then(|| v.value(d.keys().value(i) as usize).to_string()))
                .collect::<Vec<_>>()
        };
        let kind = col("kind").as_dictionary::<Int8Type>().clone();
        let kinds = kind.values().as_string::<i32>().clone();
        let (id, parent, start, dur, start_insn, insns, self_insns) = (
            i64s("call_id"),
            i64s("parent_id"),
            i64s("start_ns"),
            i64s("dur_ns"),
            i64s("start_insn"),
            i64s("insns"),
            i64s("self_insns"),
        );
        let (depth, pid, tid) = (i32s("depth"), i32s("pid"), i32s("tid"));
        let (function, module) = (strs("function"), strs("module"));
        let cut_end = col("cut_end").as_boolean().clone();
        for i in 0..b.num_rows() {
            rows.push(Row {
                call_id: id.value(i),
                parent_id: (!parent.is_null(i)).then(|| parent.value(i)),
                depth: depth.value(i),
                pid: pid.value(i),
                tid: tid.value(i),
                start_ns: start.value(i),
                dur_ns: dur.value(i),
                start_insn: start_insn.value(i),
                insns: insns.value(i),
                self_insns: self_insns.value(i),
                function: function[i].clone().unwrap(),
                module: module[i].clone(),
                kind: kinds.value(kind.keys().value(i) as usize).to_string(),
                cut_end: cut_end.value(i),
            });
        }
    }
    rows
}

/// Every id once; every parent a row of the same thread one level down
/// enclosing its child; the roots only where no such row could be.
fn assert_parents_exact(rows: &[Row]) {
    let by_id: HashMap<i64, &Row> = rows.iter().map(|r| (r.call_id, r)).collect();
    assert_eq!(by_id.len(), rows.len(), "call_id repeats");
    let mut roots = 0;
    for c in rows {
        let Some(p) = c.parent_id else {
            roots += 1;
            continue;
        };
        let p = by_id
            .get(&p)
            .unwrap_or_else(|| panic!("no parent row: {c:?}"));
        assert_eq!(
            (p.pid, p.tid, p.depth),
            (c.pid, c.tid, c.depth - 1),
            "{p:?} {c:?}"
        );
        assert!(
            p.start_ns <= c.start_ns && p.start_ns + p.dur_ns >= c.start_ns + c.dur_ns,
            "{p:?} does not enclose {c:?} in time"
        );
        assert!(
            p.start_insn <= c.start_insn && p.start_insn + p.insns >= c.start_insn + c.insns,
            "{p:?} does not enclose {c:?} in instructions"
        );
    }
    assert!((1..10).contains(&roots), "{roots} roots");
}

#[test]
fn the_dataset_agrees_with_the_ftf_and_the_report() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(trace) = interp_trace("the_dataset_agrees_with_the_ftf_and_the_report", tmp.path())
    else {
        return;
    };
    let t = trace.to_str().unwrap();
    let ds = tmp.path().join("ds");
    let d = ds.to_str().unwrap();
    run(
        &[
            t,
            "-q",
            "-j1",
            "-o",
            d,
            "--format",
            "parquet",
            "--trace-name",
            "interp",
        ],
        &[],
    );
    let rows = calls(&ds);
    assert!(rows.len() > 1000, "{} rows", rows.len());
    assert_parents_exact(&rows);

    // Self instructions are the row's less its children's.
    let mut children: HashMap<i64, i64> = HashMap::new();
    for r in &rows {
        if let Some(p) = r.parent_id {
            *children.entry(p).or_default() += r.insns;
        }
    }
    for r in &rows {
        assert_eq!(
            r.self_insns,
            r.insns - children.get(&r.call_id).unwrap_or(&0),
            "{r:?}"
        );
    }

    // The same tables however the decode is cut and wherever the stacks
    // are built.
    for (args, env) in [
        (vec!["-j2"], vec![("PTDEC_STACKS_AHEAD", "1")]),
        (
            vec!["-j2", "--chunk-size", "4K"],
            vec![("PTDEC_STACKS_AHEAD", "1")],
        ),
        (vec!["-j1", "--chunk-size", "4K"], vec![]),
        // Every jump inside a function an op (none left out as quiet):
        // the stacks and times are the same.
        (vec!["-j1"], vec![("PTDEC_KEEP_QUIET_JUMPS", "1")]),
    ] {
        let other = tmp.path().join("other");
        let o = other.to_str().unwrap();
        let mut a = vec![
            t,
            "-q",
            "-o",
            o,
            "--format",
            "parquet",
            "--force",
            "--trace-name",
            "interp",
        ];
        a.extend(args.iter().copied());
        run(&a, &env);
        assert!(calls(&other) == rows, "{args:?} {env:?}: other rows");
    }
    // The decode workers left jumps out as quiet (the summary says how
    // many) unless told to keep them: the last comparison was of two
    // decodes that differ.
    let quiet = |env: &[(&str, &str)]| {
        let out = ptdec()
            .args(["report", t])
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        err.lines()
            .find(|l| l.trim_start().starts_with("quiet jumps"))
            .map(|l| {
                let n = l.split_whitespace().nth(2).unwrap();
                n.replace(',', "").parse::<u64>().unwrap()
            })
    };
    let n = quiet(&[]);
    assert!(n.is_some_and(|n| n > 1000), "quiet jumps: {n:?}");
    assert_eq!(quiet(&[("PTDEC_KEEP_QUIET_JUMPS", "1")]), None);

    // Depths and times are the FTF's, slice for slice (the emitter's own
    // record of what it wrote, with the stack's depth).
    let ftf = ftf_slices(&trace);
    let mut ours: Vec<(i32, String, i64, i64, i32)> = rows
        .iter()
        .map(|r| {
            let name = r.function.clone();
            (r.tid, name, r.start_ns, r.start_ns + r.dur_ns, r.depth)
        })
        .collect();
    ours.sort();
    assert_eq!(ours.len(), ftf.len());
    assert!(ours == ftf, "the dataset's slices are not the FTF's");

    // Per function: calls, tail calls and self instructions are the
    // report's.
    let csv = run(&["report", t, "--format", "csv"], &[]);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (fi, ci, si, ti) = (
        at("function"),
        at("calls"),
        at("self_insns"),
        at("tail_calls"),
    );
    let mut report: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        if f[fi].starts_with('[') {
            continue;
        }
        let e = report.entry(f[fi].to_string()).or_default();
        e.0 += f[ci].parse::<u64>().unwrap();
        e.1 += f[si].parse::<u64>().unwrap();
        e.2 += f[ti].parse::<u64>().unwrap();
    }
    let mut sql: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| r.kind == "call" || r.kind == "tail call" || r.kind == "root")
    {
        let e = sql.entry(r.function.clone()).or_default();
        e.0 += 1;
        e.1 += r.self_insns as u64;
        e.2 += u64::from(r.kind == "tail call");
    }
    assert_eq!(sql, report);
}

/// The FTF's slices for the same decode: (tid, name, start, end, the
/// stack's depth), sorted.
fn ftf_slices(trace: &Path) -> Vec<(i32, String, i64, i64, i32)> {
    use ptdec::images::{ImageStore, SearchPath};
    let t = ptdec::input::Trace::open(trace).unwrap();
    let images = ImageStore::new(SearchPath {
        buildid_dir: None,
        ..SearchPath::for_trace(trace)
    });
    let symbols = ptdec::symbols::SymbolCache::for_search(images.search());
    let input = ptdec::pipeline::Input::Trace {
        trace: &t,
        images: &images,
        symbols: &symbols,
    };
    let decode = ptdec::decode::DecodeOptions {
        jobs: 1,
        ..Default::default()
    };
    let stacks = ptdec::pipeline::StackOptions {
        interpolate: true,
        min_duration: None,
    };
    let out = ptdec::plan::Ftf {
        emit: ptdec::emit::EmitOptions {
            record: true,
            ..Default::default()
        },
        target: ptdec::emit::Target::Memory,
    };
    let plan = ptdec::plan::Plan::new(input, decode, stacks, out);
    let report = ptdec::pipeline::run(&plan, None).unwrap();
    let mut v: Vec<_> = report
        .written
        .iter()
        .flat_map(|w| &w.slices)
        .map(|p| {
            (
                p.tid as i32,
                p.name.clone(),
                p.start as i64,
                p.end as i64,
                p.depth,
            )
        })
        .collect();
    v.sort();
    v
}

use pt_tests::names;

/// Every file under `dir` with its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut all = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                all.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    all
}

/// Starts ptdec writing `trace` into the dataset `ds` as `name`, and
/// waits until its temporary folder is there (the decode has begun).
fn start_writing(trace: &Path, ds: &Path, name: &str) -> std::process::Child {
    let child = ptdec()
        .arg(trace)
        .args([
            "-q",
            "-j1",
            "--format",
            "parquet",
            "--trace-name",
            name,
            "-o",
        ])
        .arg(ds)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let prefix = format!(".trace={name}.ptdec-{}-", child.id());
    let started = std::time::Instant::now();
    while !ds.is_dir() || !names(ds).iter().any(|n| n.starts_with(&prefix)) {
        assert!(
            started.elapsed().as_secs() < 120,
            "ptdec never began {name}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::thread::sleep(std::time::Duration::from_millis(30));
    child
}

/// Around a dataset's other traces: a run killed by SIGKILL leaves only
/// a hidden temporary, which the next run into the folder removes (it
/// stayed for good before); SIGINT leaves nothing and names the trace's
/// parts, not the folder, as not written (it said "DIR not written",
/// as if the other traces had gone); a write that fails (a file size
/// limit here, as a full disk) names the part where it goes, not the
/// temporary (it named `DIR/.trace=NAME.ptdec-PID-N.tmp/calls/...`, gone
/// when read, after the writer's "External:"). The other trace is kept
/// byte for byte throughout.
#[test]
fn killed_interrupted_and_failed_runs_leave_the_other_traces_and_no_temporary() {
    let test = "killed_interrupted_and_failed_runs_leave_the_other_traces_and_no_temporary";
    if ptdec::cli::ignored_signals() & (1 << (libc_sigint() - 1)) != 0 {
        pt_tests::skipped(
            test,
            "SIGINT is ignored here (nohup, setsid or a background job)",
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // About 2 MB of PT: a few tenths of a second to decode in a release build.
    let Some(trace) = interp_trace_repeat(test, tmp.path(), 450) else {
        return;
    };
    let ds = tmp.path().join("ds");
    let (t, d) = (trace.to_str().unwrap(), ds.to_str().unwrap());
    let small = interp_trace(test, &tmp.path().join("small")).unwrap();
    run(
        &[
            small.to_str().unwrap(),
            "-q",
            "-o",
            d,
            "--format",
            "parquet",
            "--trace-name",
            "keep",
        ],
        &[],
    );
    let kept = files(&ds);
    let tables = ["calls", "marks", "threads", "trace"];

    let mut child = start_writing(&trace, &ds, "killed");
    child.kill().unwrap();
    child.wait().unwrap();
    let left = names(&ds);
    assert_eq!(left.len(), 5, "{left:?}");
    assert!(left[0].starts_with(".trace=killed.ptdec-"), "{left:?}");

    let child = start_writing(&trace, &ds, "int");
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(
        err.contains(&format!(
            "{d}/{{calls,marks,threads,trace}}/trace=int not written"
        )),
        "{err}"
    );
    assert_eq!(
        names(&ds),
        tables,
        "the killed run's temporary went with the next run"
    );
    assert_eq!(files(&ds), kept);

    // A file size limit, its signal ignored: the write fails with EFBIG.
    let o = Command::new("bash")
        .args(["-c", "trap '' XFSZ; ulimit -f 16; exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_ptdec"))
        .args([
            t,
            "-q",
            "-o",
            d,
            "--format",
            "parquet",
            "--trace-name",
            "big",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "cannot write {d}/calls/trace=big/part-0.parquet: File too large"
        )),
        "{err}"
    );
    assert!(
        !err.contains(".ptdec-") && !err.contains("External"),
        "{err}"
    );
    assert_eq!(names(&ds), tables);
    assert_eq!(files(&ds), kept);
}

fn libc_sigint() -> i32 {
    nix::sys::signal::Signal::SIGINT as i32
}

/// Names the SQL engines misread in a `trace=NAME` folder (DuckDB refused
/// the whole dataset for one trace named `run=3`) are refused before
/// anything is written, and so is a trace's file name that is one, with
/// a message saying the name came from the file (it said `--trace-name
/// "x=1.data"`, an option not given).
#[test]
fn names_the_engines_misread_are_refused_before_anything_is_written() {
    let test = "names_the_engines_misread_are_refused_before_anything_is_written";
    let Some(src) = pt_tests::realdata_file(test, "tmon-alderlake-ptw.perf.data") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    for name in [
        "run=3",
        "a%20b",
        "a\nb",
        "a?b",
        "__HIVE_DEFAULT_PARTITION__",
    ] {
        let o = ptdec()
            .arg(&src)
            .args(["-q", "--format", "parquet", "--trace-name", name, "-o"])
            .arg(&ds)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{name:?}: {err}");
        assert!(err.contains("--trace-name"), "{err}");
        assert!(!ds.exists(), "{name:?}");
    }
    let file = tmp.path().join("x=1.data");
    std::fs::copy(&src, &file).unwrap();
    let o = ptdec()
        .arg(&file)
        .args(["-q", "--format", "parquet", "-o"])
        .arg(&ds)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("its file's name, \"x=1.data\"") && err.contains("give one with --trace-name"),
        "{err}"
    );
    assert!(!ds.exists());
}

/// An LLDB bundle without tscPerfZeroConversion: its times are TSC ticks
/// (ptdec warns so), and the trace table says `tsc` (it said `ns`).
#[test]
fn a_bundle_without_a_conversion_says_its_times_are_tsc_ticks() {
    let test = "a_bundle_without_a_conversion_says_its_times_are_tsc_ticks";
    let bundle = pt_tests::realdata("lldb").join("intelpt-trace");
    if !bundle.exists() {
        let _: Option<()> = pt_tests::missing(test, &format!("{} is not there", bundle.display()));
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    let o = ptdec()
        .arg(&bundle)
        .args(["-q", "--format", "parquet", "-o"])
        .arg(&ds)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let f = std::fs::File::open(ds.join("trace/trace=intelpt-trace/part-0.parquet")).unwrap();
    let batch = ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .build()
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let unit = batch.column_by_name("time_unit").unwrap();
    assert_eq!(unit.as_string::<i32>().value(0), "tsc");
}

/// The key-value metadata of a Parquet file.
fn footer(path: &Path) -> BTreeMap<String, String> {
    let file = std::fs::File::open(path).unwrap();
    let b = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    b.metadata()
        .file_metadata()
        .key_value_metadata()
        .into_iter()
        .flatten()
        .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
        .collect()
}

/// The rows of a table of the dataset `ds` as JSON objects, by the
/// column names (the strings and integers a footer's JSON holds).
fn table_json(path: &Path) -> Vec<serde_json::Value> {
    use arrow_array::types::Int64Type as I64;
    let file = std::fs::File::open(path).unwrap();
    let mut rows = Vec::new();
    for b in ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
    {
        let b = b.unwrap();
        for i in 0..b.num_rows() {
            let mut row = serde_json::Map::new();
            for (f, c) in b.schema().fields().iter().zip(b.columns()) {
                let v = if c.is_null(i) {
                    serde_json::Value::Null
                } else {
                    match c.data_type() {
                        arrow_schema::DataType::Int32 => {
                            c.as_primitive::<Int32Type>().value(i).into()
                        }
                        arrow_schema::DataType::Int64 => c.as_primitive::<I64>().value(i).into(),
                        arrow_schema::DataType::Utf8 => c.as_string::<i32>().value(i).into(),
                        arrow_schema::DataType::List(_) => {
                            let l = c.as_list::<i32>().value(i);
                            let items: Vec<serde_json::Value> = (0..l.len())
                                .map(|j| match l.data_type() {
                                    arrow_schema::DataType::Int64 => {
                                        l.as_primitive::<I64>().value(j).into()
                                    }
                                    _ => l.as_string::<i32>().value(j).into(),
                                })
                                .collect();
                            items.into()
                        }
                        t => panic!("{}: {t}", f.name()),
                    }
                };
                row.insert(f.name().clone(), v);
            }
            rows.push(serde_json::Value::Object(row));
        }
    }
    rows
}

/// `-o X.parquet` writes one file, the calls table: its rows are the
/// dataset folder's `calls`, its footer holds the `threads` rows and the
/// `trace` row (with the trace's name) as JSON, the marks a folder would
/// hold are counted in a warning, and it is written as an FTF file is:
/// replaced whole when it exists, never over an input. A folder named
/// `X.parquet` that is there already is a dataset folder, and gets the
/// trace as one.
#[test]
fn a_single_file_holds_the_calls_and_the_facts_in_its_footer() {
    let test = "a_single_file_holds_the_calls_and_the_facts_in_its_footer";
    let tmp = tempfile::tempdir().unwrap();
    let Some(trace) = interp_trace(test, tmp.path()) else {
        return;
    };
    let ds = tmp.path().join("ds");
    let file = tmp.path().join("calls.parquet");
    let t = trace.to_str().unwrap();
    run(
        &[
            t,
            "-q",
            "--trace-name",
            "interp",
            "--format",
            "parquet",
            "-o",
            ds.to_str().unwrap(),
        ],
        &[],
    );
    // Without --format: the name says parquet.
    let o = ptdec()
        .args([t, "-o", file.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(file.is_file());
    let rows = calls_of(&file);
    assert!(rows.len() > 1000, "{} rows", rows.len());
    assert_eq!(rows, calls(&ds));
    let meta = footer(&file);
    let threads: serde_json::Value = serde_json::from_str(&meta["ptdec.threads"]).unwrap();
    let want = table_json(&ds.join("threads/trace=interp/part-0.parquet"));
    assert_eq!(threads, serde_json::Value::Array(want));
    let facts: serde_json::Value = serde_json::from_str(&meta["ptdec.trace"]).unwrap();
    let mut want = table_json(&ds.join("trace/trace=interp/part-0.parquet"))
        .pop()
        .unwrap();
    want["trace"] = "interp.dir".into();
    assert_eq!(facts, want);
    // The marks: the trace's frequency, which a folder's marks table holds.
    let marks = ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(ds.join("marks/trace=interp/part-0.parquet")).unwrap(),
    )
    .unwrap()
    .metadata()
    .file_metadata()
    .num_rows();
    assert!(marks > 0);
    assert!(
        err.contains(&format!(
            "{marks} marks (PTWRITE, power, frequency, events) are not in"
        )),
        "{err}"
    );

    // Replaced whole, its mode kept as far as the trace's allows, as an
    // FTF output (never more readable than the trace).
    use std::os::unix::fs::PermissionsExt;
    let traced = std::fs::metadata(trace.join("data"))
        .unwrap()
        .permissions()
        .mode()
        & 0o666;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    std::fs::write(&file, b"not parquet").unwrap();
    run(
        &[t, "-q", "--format", "parquet", "-o", file.to_str().unwrap()],
        &[],
    );
    assert_eq!(calls_of(&file), rows);
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o640 & (traced | 0o600));

    // Never over an input (a link to the trace's data), and the input kept.
    let data = trace.join("data");
    let before = std::fs::read(&data).unwrap();
    let link = tmp.path().join("link.parquet");
    std::os::unix::fs::symlink(&data, &link).unwrap();
    let o = ptdec()
        .args([t, "-q", "-o", link.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("input"), "{err}");
    assert_eq!(std::fs::read(&data).unwrap(), before);

    // A folder named X.parquet already there: a dataset folder; so is a
    // name with a trailing /. The suffix in any case.
    let folder = tmp.path().join("many.parquet");
    std::fs::create_dir(&folder).unwrap();
    let named = |o: &str| run(&[t, "-q", "--trace-name", "interp", "-o", o], &[]);
    named(folder.to_str().unwrap());
    assert_eq!(calls(&folder), rows);
    let slash = format!("{}/", tmp.path().join("slash.parquet").display());
    named(&slash);
    assert_eq!(calls(Path::new(&slash)), rows);
    let upper = tmp.path().join("UP.PARQUET");
    named(upper.to_str().unwrap());
    assert_eq!(calls_of(&upper), rows);

    // --min-duration leaving out every call: an error naming the longest
    // call, as FTF's, no file, and not "nothing was traced in the window"
    // (it said so: the window had calls; then it wrote an empty file).
    let none = tmp.path().join("none.parquet");
    let o = ptdec()
        .args([t, "-q", "--duration", "1ms", "--min-duration", "1s", "-o"])
        .arg(&none)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("leaves out every call"), "{err}");
    assert!(!err.contains("nothing was traced in the window"), "{err}");
    assert!(!none.exists());

    // `--format parquet -o -`: the same file on standard output (it was
    // refused); the summary names it.
    let o = ptdec()
        .args([t, "--format", "parquet", "-o", "-"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("file standard output:"), "{err}");
    let piped = tmp.path().join("piped.parquet");
    std::fs::write(&piped, &o.stdout).unwrap();
    assert_eq!(calls_of(&piped), rows);
    assert_eq!(footer(&piped), footer(&file));
}

/// A single file of raw PT whose decode found only PTWRITE marks: no
/// file, an error saying the marks need a folder (it wrote a file of no
/// rows with status 0, the marks dropped).
#[test]
fn a_single_file_of_only_marks_is_refused() {
    let test = "a_single_file_of_only_marks_is_refused";
    let dir = pt_tests::libipt_tests_dir();
    let (pt, bin) = (dir.join("ptw.pt"), dir.join("ptw.bin"));
    if !pt.exists() {
        let _: Option<()> = pt_tests::missing(test, &format!("{} is not there", pt.display()));
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let raw = |out: &Path, extra: &[&str]| {
        ptdec()
            .arg("raw")
            .arg("--pt")
            .arg(&pt)
            .arg("--raw")
            .arg(format!("{}:0x100000", bin.display()))
            .args(extra)
            .arg("-o")
            .arg(out)
            .output()
            .unwrap()
    };
    let file = tmp.path().join("ptw.parquet");
    let o = raw(&file, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("only 2 marks") && err.contains("-o DIR --format parquet"),
        "{err}"
    );
    assert!(!file.exists());
    // A folder holds them.
    let ds = tmp.path().join("ds");
    let o = raw(&ds, &["-q", "--format", "parquet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(ds.join("marks/trace=ptw.pt/part-0.parquet").is_file());
}
