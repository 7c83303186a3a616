//! The dataset on hand-built slices, read back with the Arrow project's
//! Parquet reader.

use std::num::NonZeroU64;

use ::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, Int8Type};
use arrow_array::{Array, RecordBatch};

use super::*;
use crate::model::ops::{Cycles, GapKind};
use crate::model::slices::Func;
use std::fs::File;

fn st(t: u64) -> Stamp {
    Stamp {
        time: t,
        insns: t * 10,
        cycles: Cycles::NONE,
    }
}

fn id(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).unwrap()
}

/// A call slice of thread (pid, tid) with its ids; `call`: entered by a
/// call instruction.
#[allow(clippy::too_many_arguments)]
fn call(
    (pid, tid): (u32, u32),
    depth: i32,
    me: u64,
    parent: Option<u64>,
    name: &str,
    t: (u64, u64),
    call: bool,
    unknown_start: bool,
) -> Slice {
    Slice {
        pid,
        tid,
        depth,
        id: id(me),
        parent: parent.map(id),
        start: st(t.0),
        end: st(t.1),
        kind: SliceKind::Call {
            func: FuncRef::owned(Func {
                entry: 0x1000 + name.len() as u64,
                name: name.into(),
                module: "/bin/prog".into(),
            }),
            unknown_start,
            call_time: call.then_some(t.0),
            unmatched: false,
        },
    }
}

fn gap((pid, tid): (u32, u32), me: u64, t: (u64, u64)) -> Slice {
    Slice {
        pid,
        tid,
        depth: 0,
        id: id(me),
        parent: None,
        start: st(t.0),
        end: st(t.1),
        kind: SliceKind::Gap {
            kind: GapKind::Overflow,
            offset: 0,
        },
    }
}

/// One row of `calls` as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Out {
    call_id: i64,
    parent_id: Option<i64>,
    depth: i32,
    pid: i32,
    tid: i32,
    start_ns: i64,
    dur_ns: i64,
    insns: i64,
    self_insns: i64,
    function: String,
    kind: String,
    cut_start: bool,
    cut_end: bool,
}

fn read(path: &Path) -> Vec<RecordBatch> {
    let file = File::open(path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    reader.map(|b| b.unwrap()).collect()
}

fn calls(dir: &Path) -> Vec<Out> {
    let mut rows = Vec::new();
    for b in read(&dir.join("calls/trace=t/part-0.parquet")) {
        let i64s = |name: &str| {
            b.column_by_name(name)
                .unwrap()
                .as_primitive::<Int64Type>()
                .clone()
        };
        let i32s = |name: &str| {
            b.column_by_name(name)
                .unwrap()
                .as_primitive::<Int32Type>()
                .clone()
        };
        let bools = |name: &str| b.column_by_name(name).unwrap().as_boolean().clone();
        let (call_id, parent_id, start_ns, dur_ns, insns, self_insns) = (
            i64s("call_id"),
            i64s("parent_id"),
            i64s("start_ns"),
            i64s("dur_ns"),
            i64s("insns"),
            i64s("self_insns"),
        );
        let (depth, pid, tid) = (i32s("depth"), i32s("pid"), i32s("tid"));
        let function = b
            .column_by_name("function")
            .unwrap()
            .as_dictionary::<Int32Type>()
            .clone();
        let fvalues = function.values().as_string::<i32>().clone();
        let kind = b
            .column_by_name("kind")
            .unwrap()
            .as_dictionary::<Int8Type>()
            .clone();
        let kvalues = kind.values().as_string::<i32>().clone();
        let (cut_start, cut_end) = (bools("cut_start"), bools("cut_end"));
        for i in 0..b.num_rows() {
            rows.push(Out {
                call_id: call_id.value(i),
                parent_id: (!parent_id.is_null(i)).then(|| parent_id.value(i)),
                depth: depth.value(i),
                pid: pid.value(i),
                tid: tid.value(i),
                start_ns: start_ns.value(i),
                dur_ns: dur_ns.value(i),
                insns: insns.value(i),
                self_insns: self_insns.value(i),
                function: fvalues.value(function.keys().value(i) as usize).to_string(),
                kind: kvalues.value(kind.keys().value(i) as usize).to_string(),
                cut_start: cut_start.value(i),
                cut_end: cut_end.value(i),
            });
        }
    }
    rows
}

fn facts() -> TraceFacts {
    TraceFacts {
        trace_name: "t".into(),
        source: "/traces/t".into(),
        ptdec_version: "0".into(),
        ..TraceFacts::default()
    }
}

/// Writes `slices` (each thread named first) into `dir`.
fn write(dir: &Path, opts: DatasetOptions, slices: Vec<Slice>) -> DatasetStats {
    let mut ds = Dataset::create(dir, opts, facts()).unwrap();
    let mut named = Vec::new();
    for s in slices {
        if !named.contains(&(s.pid, s.tid)) {
            named.push((s.pid, s.tid));
            ds.thread(s.pid, s.tid, "prog", "prog", &[]).unwrap();
        }
        ds.slice(&s).unwrap();
    }
    ds.finish().unwrap()
}

/// `call_id` of thread ordinal `t`'s slice `n`.
fn cid(t: i64, n: i64) -> i64 {
    (t << 40) | n
}

/// Nesting and a retroactive frame (the stacks' close order: children
/// first, the frame found above the segment last), in two threads, one
/// tid in two processes: ids unique, parents as given, self instructions
/// less the children's, a tail call told from its sibling before it.
#[test]
fn rows_carry_ids_parents_and_self_instructions() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let (a, b, c) = ((1, 10), (1, 11), (2, 10));
    let slices = vec![
        // Thread a: main(1) > f(2) > g(3); main tail-calls h(4) at 50;
        // then a return above: r(5) encloses main and h.
        call(a, 2, 3, Some(2), "g", (20, 30), true, false),
        call(b, 0, 1, None, "main", (0, 100), false, false),
        call(a, 1, 2, Some(1), "f", (10, 40), true, false),
        call(a, 0, 1, Some(5), "main", (0, 50), false, true),
        call(a, 0, 4, Some(5), "h", (50, 60), false, false),
        call(c, 0, 1, None, "other", (5, 6), false, false),
        call(a, -1, 5, None, "r", (0, 70), false, true),
    ];
    let stats = write(&dir, DatasetOptions::default(), slices);
    assert_eq!((stats.calls, stats.threads), (7, 3));
    let rows = calls(&dir);
    let by = |f: &str, tid: i32, pid: i32| {
        rows.iter()
            .find(|r| r.function == f && r.tid == tid && r.pid == pid)
            .unwrap_or_else(|| panic!("{f}: {rows:#?}"))
            .clone()
    };
    let g = by("g", 10, 1);
    assert_eq!(
        (g.call_id, g.parent_id, g.self_insns),
        (cid(0, 3), Some(cid(0, 2)), 100)
    );
    let f = by("f", 10, 1);
    assert_eq!((f.self_insns, f.insns, f.kind.as_str()), (200, 300, "call"));
    let main = by("main", 10, 1);
    assert_eq!((main.parent_id, main.self_insns), (Some(cid(0, 5)), 200));
    let h = by("h", 10, 1);
    assert_eq!(h.kind, "tail call");
    let r = by("r", 10, 1);
    assert_eq!(
        (r.call_id, r.parent_id, r.self_insns),
        (cid(0, 5), None, 100)
    );
    // Thread ordinals in the order named: a, b, then c (tid 10 again,
    // another process): its own ids.
    assert_eq!(by("main", 11, 1).call_id, cid(1, 1));
    assert_eq!(by("other", 10, 2).call_id, cid(2, 1));
    let mut ids: Vec<i64> = rows.iter().map(|r| r.call_id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), rows.len());
    // The open frames at the trace's end (r, and main of b, c's other)
    // were cut there.
    assert!(r.cut_end && by("other", 10, 2).cut_end);
    assert!(!g.cut_end && !f.cut_end);
}

/// Calls that end where a gap begins were cut by it; the gap is a root
/// row of its own; a window cuts times and drops what lies outside.
#[test]
fn a_gap_cuts_the_calls_it_ends_and_a_window_cuts_times() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let a = (1, 10);
    let slices = vec![
        call(a, 1, 2, Some(1), "f", (10, 20), true, false),
        call(a, 1, 3, Some(1), "g", (30, 40), true, false),
        call(a, 0, 1, None, "main", (0, 40), false, true),
        gap(a, 4, (40, 50)),
        call(a, 0, 5, None, "after", (50, 90), false, true),
    ];
    let opts = DatasetOptions {
        range: Some((15, 80)),
        origin: 5,
        ..DatasetOptions::default()
    };
    let stats = write(&dir, opts, slices);
    assert_eq!((stats.calls, stats.gaps, stats.dropped), (4, 1, 0));
    let rows = calls(&dir);
    let get = |f: &str| rows.iter().find(|r| r.function == f).unwrap().clone();
    let (f, g, main) = (get("f"), get("g"), get("main"));
    assert_eq!(
        (f.start_ns, f.dur_ns, f.cut_start, f.cut_end),
        (10, 5, true, false)
    );
    assert_eq!(
        (g.cut_end, main.cut_end, main.cut_start),
        (true, true, true)
    );
    let gap = get("[gap: overflow]");
    assert_eq!(
        (gap.kind.as_str(), gap.parent_id, gap.depth),
        ("gap", None, 0)
    );
    let after = get("after");
    assert_eq!((after.dur_ns, after.cut_end), (30, true));
}

/// A trace's tables appear whole at the end, each in its `trace=NAME`
/// folder: another trace is added beside it, the same name again only
/// with `force` (replacing that trace alone), nothing is left when the
/// dataset is dropped unfinished, and a folder of other things is refused.
#[test]
fn each_trace_is_put_in_place_whole_beside_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let names = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), b"x").unwrap();
    let e = Dataset::create(&other, DatasetOptions::default(), facts()).err();
    assert!(
        matches!(e, Some(DatasetError::Output(OutFileError::Io { .. }))),
        "{e:?}"
    );
    assert_eq!(names(&other), ["notes.txt"]);

    let dir = tmp.path().join("ds");
    // Dropped unfinished: no folder made, none left.
    let ds = Dataset::create(&dir, DatasetOptions::default(), facts()).unwrap();
    drop(ds);
    assert_eq!(names(tmp.path()), ["other"], "no temporary left");
    write(
        &dir,
        DatasetOptions::default(),
        vec![gap((1, 1), 1, (0, 1))],
    );
    assert_eq!(names(&dir), ["calls", "marks", "threads", "trace"]);
    assert_eq!(names(&dir.join("calls")), ["trace=t"]);
    let e = Dataset::create(&dir, DatasetOptions::default(), facts()).err();
    assert!(
        matches!(e, Some(DatasetError::Output(OutFileError::Exists { .. }))),
        "{e:?}"
    );
    // Another trace beside it.
    let mut ds = Dataset::create(
        &dir,
        DatasetOptions::default(),
        TraceFacts {
            trace_name: "u".into(),
            ..facts()
        },
    )
    .unwrap();
    ds.thread(1, 1, "prog", "prog", &[]).unwrap();
    ds.slice(&gap((1, 1), 1, (0, 1))).unwrap();
    ds.finish().unwrap();
    for t in TABLES {
        assert_eq!(names(&dir.join(t)), ["trace=t", "trace=u"], "{t}");
    }
    // The same name with force: that trace replaced, the other kept.
    let force = DatasetOptions {
        force: true,
        ..DatasetOptions::default()
    };
    write(
        &dir,
        force,
        vec![gap((1, 1), 1, (0, 1)), gap((1, 1), 2, (1, 2))],
    );
    assert_eq!(
        names(&dir),
        ["calls", "marks", "threads", "trace"],
        "no temporary left"
    );
    assert_eq!(names(&dir.join("calls")), ["trace=t", "trace=u"]);
    assert_eq!(calls(&dir).len(), 2);
    let trace = read(&dir.join("trace/trace=t/part-0.parquet"));
    assert_eq!(trace[0].num_rows(), 1);
    let threads = read(&dir.join("threads/trace=u/part-0.parquet"));
    assert_eq!(threads[0].num_rows(), 1);
    let e = check_trace_name("a/b").err();
    assert!(matches!(e, Some(DatasetError::TraceName { .. })), "{e:?}");

    // What the user put in a trace's folder is never deleted by --force:
    // the replacement is refused, naming it, and the trace stays as it was.
    for what in ["mynotes.txt", "sub"] {
        let place = dir.join("calls/trace=t").join(what);
        if what == "sub" {
            std::fs::create_dir(&place).unwrap();
        } else {
            std::fs::write(&place, b"mine").unwrap();
        }
        let force = DatasetOptions {
            force: true,
            ..DatasetOptions::default()
        };
        let e = Dataset::create(&dir, force, facts()).err();
        let msg = e.as_ref().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            matches!(e, Some(DatasetError::Output(OutFileError::Io { .. })))
                && msg.contains(what)
                && msg.contains("ptdec did not write"),
            "{e:?}"
        );
        assert!(place.exists(), "{what} kept");
        assert_eq!(calls(&dir).len(), 2, "the trace kept");
        if what == "sub" {
            std::fs::remove_dir(&place).unwrap();
        } else {
            std::fs::remove_file(&place).unwrap();
        }
    }
}

/// Marks become rows with their thread and time; a filter leaves some out.
#[test]
fn marks_are_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let opts = DatasetOptions {
        marks: MarkFilter {
            events: false,
            ..MarkFilter::default()
        },
        ..DatasetOptions::default()
    };
    let mut ds = Dataset::create(&dir, opts, facts()).unwrap();
    let pt = Mark::Ptwrite {
        ip: Some(0x401000),
        payload: 42,
        emulated: false,
    };
    let cbr = Mark::Cbr {
        ratio: 30,
        cpu: Some(3),
    };
    let ev = Mark::Event {
        name: "interrupt",
        ip: None,
        args: vec![("vector", 14)],
    };
    for m in [&pt, &cbr, &ev] {
        ds.mark(1, 2, &st(7), m).unwrap();
    }
    let stats = ds.finish().unwrap();
    assert_eq!((stats.marks, stats.marks_dropped), (2, 1));
    let b = &read(&dir.join("marks/trace=t/part-0.parquet"))[0];
    let name = b.column_by_name("name").unwrap().as_string::<i32>();
    let value = b
        .column_by_name("value")
        .unwrap()
        .as_primitive::<Int64Type>();
    assert_eq!((name.value(0), value.value(0)), ("ptwrite", 42));
    assert_eq!((name.value(1), value.value(1)), ("frequency", 3000));
}

/// Names the engines cannot read back from a `trace=NAME` folder are
/// refused before anything is made: with `=`, `?` or `\` DuckDB finds no
/// `trace` column and refuses the whole dataset, a control character
/// makes DataFusion refuse the path (and a newline DuckDB the dataset),
/// `%XX` is URL-decoded by both, and Hive's null name reads as a null.
#[test]
fn names_the_engines_misread_are_refused() {
    for bad in [
        "",
        "a/b",
        "run=3",
        "a?b",
        "a\\b",
        "a%20b",
        "a\nb",
        "a\tb",
        "a\u{1}b",
        "a\0b",
        "__HIVE_DEFAULT_PARTITION__",
        &"x".repeat(201),
    ] {
        assert!(
            matches!(check_trace_name(bad), Err(DatasetError::TraceName { .. })),
            "{bad:?}"
        );
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ds");
        let f = TraceFacts {
            trace_name: bad.to_string(),
            ..facts()
        };
        assert!(Dataset::create(&dir, DatasetOptions::default(), f).is_err());
        assert!(!dir.exists(), "{bad:?}: nothing made");
    }
    // Read back as written by DuckDB and DataFusion (checked by hand with
    // both): spaces, dots, quotes, colons, unicode, 200 bytes.
    for good in [
        "interp",
        "build 42",
        ".",
        "..",
        ".hidden",
        "a:b",
        "a'b",
        "трасса-😀",
        &"x".repeat(200),
    ] {
        assert!(check_trace_name(good).is_ok(), "{good:?}");
    }
}

/// The page index (issue 46): `calls`'s chunks in pages of [`PAGE_ROWS`],
/// each with its first row and, in the column index, the min and max of
/// its rows and how they follow each other, so that engines skip pages
/// (DataFusion's `page_index_rows_pruned`). Without a page index the
/// reader finds none and the test fails.
#[test]
fn calls_have_a_page_index_of_their_rows() {
    use ::parquet::basic::BoundaryOrder;
    use ::parquet::file::page_index::column_index::ColumnIndexMetaData as Index;
    use ::parquet::file::reader::{FileReader, SerializedFileReader};
    use ::parquet::file::serialized_reader::ReadOptionsBuilder;

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let n = ROWS_PER_GROUP + PAGE_ROWS / 3;
    // Calls one after the other, of 7 durations: start_ns rises, dur_ns
    // has few values (a dictionary).
    let slices = (0..n as u64)
        .map(|i| {
            let t = 100 + i * 10;
            call(
                (1, 10),
                0,
                i + 1,
                None,
                "f",
                (t, t + 1 + i % 7),
                true,
                false,
            )
        })
        .collect();
    write(&dir, DatasetOptions::default(), slices);
    let rows = calls(&dir);
    assert_eq!(rows.len(), n);

    let path = dir.join("calls/trace=t/part-0.parquet");
    let options = ReadOptionsBuilder::new().with_page_index().build();
    let reader =
        SerializedFileReader::new_with_options(File::open(&path).unwrap(), options).unwrap();
    let md = reader.metadata();
    let offsets = md.offset_index().expect("an offset index");
    let index = md.column_index().expect("a column index");
    let column = |name: &str| {
        let columns = md.file_metadata().schema_descr().columns().to_vec();
        columns.iter().position(|c| c.name() == name).unwrap()
    };
    let (start, dur) = (column("start_ns"), column("dur_ns"));
    let mut first = 0;
    for (g, group) in md.row_groups().iter().enumerate() {
        let group_rows = group.num_rows() as usize;
        let pages: Vec<(usize, usize)> = (0..group_rows)
            .step_by(PAGE_ROWS)
            .map(|at| (at, (at + PAGE_ROWS).min(group_rows)))
            .collect();
        for (c, column) in offsets[g].iter().enumerate() {
            let firsts: Vec<usize> = column
                .page_locations
                .iter()
                .map(|l| l.first_row_index as usize)
                .collect();
            let want: Vec<usize> = pages.iter().map(|p| p.0).collect();
            assert_eq!(firsts, want, "row group {g}, column {c}");
        }
        type Pick = fn(&Out) -> i64;
        let picks: [(usize, Pick); 2] = [(start, |r| r.start_ns), (dur, |r| r.dur_ns)];
        for (c, pick) in picks {
            let Index::INT64(ix) = &index[g][c] else {
                panic!("row group {g}, column {c}: {:?}", index[g][c])
            };
            for (p, &(a, b)) in pages.iter().enumerate() {
                let page = &rows[first + a..first + b];
                let min = page.iter().map(pick).min();
                let max = page.iter().map(pick).max();
                assert_eq!(ix.min_value(p).copied(), min, "row group {g}, page {p}");
                assert_eq!(ix.max_value(p).copied(), max, "row group {g}, page {p}");
                assert_eq!(ix.null_count(p), Some(0));
            }
        }
        assert_eq!(
            index[g][start].get_boundary_order(),
            Some(BoundaryOrder::ASCENDING)
        );
        let encodings = group.column(dur).encodings().collect::<Vec<_>>();
        assert!(
            encodings.contains(&Encoding::RLE_DICTIONARY),
            "{encodings:?}"
        );
        first += group_rows;
    }
    assert_eq!(md.num_row_groups(), 2);
}

/// A full disk when the writer's buffer is flushed at the end of a small
/// table is the file's I/O error (it was the parquet crate's "fail to get
/// inner writer" message): `/dev/full` fails every write with ENOSPC.
#[test]
fn a_full_disk_at_a_tables_end_is_the_files_error() {
    use std::sync::Arc;
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return;
    };
    let schema = Arc::new(Schema::new(vec![field("n", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(arrow_array::Int64Array::from(vec![1, 2, 3]))],
    )
    .unwrap();
    let mut w = ArrowWriter::try_new(Sink::File(full), schema, None).unwrap();
    TableWriter::write_group(&mut w, batch).unwrap();
    let e = TableWriter::finish(w)
        .err()
        .expect("/dev/full takes nothing");
    let e = parquet_error(Path::new("t/part-0.parquet"), with_write_error(e));
    match &e {
        DatasetError::Io { source, .. } => {
            assert_eq!(source.kind(), std::io::ErrorKind::StorageFull, "{e}")
        }
        _ => panic!("not the file's error: {e}"),
    }
    assert_eq!(
        e.to_string(),
        "cannot write t/part-0.parquet: No space left on device (os error 28)"
    );
}
