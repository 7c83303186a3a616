//! The Parquet dataset: the call stacks' slices, the marks and the threads
//! as tables any SQL engine reads (DuckDB, Polars, DataFusion, Spark), a
//! sink of slices beside the FTF emitter ([`crate::emit`]) that writes a
//! trace as `DIR/calls/trace=NAME/part-0.parquet`, `DIR/marks/trace=NAME/…`,
//! `DIR/threads/…` and `DIR/trace/…`: one folder per table, and in it one
//! Hive-style partition per trace, so that one folder holds many traces and
//! engines read each table as one, with `trace` as a column taken from the
//! folder names (the files do not repeat it: a column of one value costs
//! the writer a dictionary lookup per row).
//!
//! # Tables
//!
//! * `calls`: one row per call, untraced slice and gap: `call_id` (unique
//!   in the trace), `parent_id` (null at a root), `depth` (the FTF's: 0 at
//!   a segment's first frame, negative above it), `pid`, `tid`,
//!   `start_ns`, `dur_ns` (ns from the origin, cut to `--start`/`--duration`),
//!   `start_insn`, `insns` (callees included), `self_insns`, `self_ns`
//!   (the row's less its children's: the rows whose `parent_id` it is),
//!   `cycles`
//!   (null without CYC), `function`, `module` (null for untraced time and
//!   gaps), `addr` (the function's entry; where tracing stopped for
//!   untraced time), `kind` (`call`: a call instruction, or a call whose
//!   start was not traced, `unknown_start`; `tail call`; `root`: a root
//!   frame or a signal handler, entered with neither; `untraced`, `gap`),
//!   `cut_start`, `cut_end` (cut by the window, or still running when a
//!   gap, a restart or the trace's end ended it: the FTF's `cut`),
//!   `unknown_start`.
//! * `marks`: PTWRITE payloads, power events, frequency changes and
//!   event-trace instants: `pid`, `tid`, `time_ns`, `insn`, `category`
//!   (`ptwrite`, `power`, `event`: the FTF's), `name`, `value` (the
//!   payload; MHz for a frequency), `ip`, `cpu`, `emulated`, `args`.
//! * `threads`: `pid`, `tid`, `name`, `process`, and the later names with
//!   their times (`rename_ns`, `rename_to`).
//! * `trace`: one row of the trace's own facts ([`TraceFacts`]).
//!
//! Signed integers throughout (Spark reads no unsigned ones): an address
//! of the kernel's half reads negative. Addresses, times and counters of
//! the FTF; strings, `pid`, `tid` and `addr` dictionary-encoded; column
//! statistics on, so engines skip row groups by time and thread, and on
//! `calls` a page index, so they skip pages inside a row group.
//!
//! # Ids
//!
//! The stacks number each thread's slices (`Slice::id`, `Slice::parent`,
//! exact because this sink asks: [`SliceSink::needs_parents`]); a call's
//! `call_id` is its thread's ordinal (threads in the order the decode
//! meets them, which is the same for any `-j` and chunk size) above its
//! number (`thread << 40 | id`).
//!
//! # Memory and files
//!
//! Rows are written in row groups of [`ROWS_PER_GROUP`] as the decode goes;
//! per thread only the calls that ended at its latest instant wait for
//! the next slice (which tells whether they were cut, as the FTF's `Tail`),
//! and the instructions of closed children wait for their parent (one sum
//! per open frame). A trace's tables are written into a temporary folder
//! in `DIR` and put in place whole by `outfile::OutDir`. The Arrow
//! project's Parquet crate writes the files; `calls`'s column chunks are
//! encoded by [`pages`] (its doc says why), the other tables' by the
//! crate's Arrow writer.

use std::fs::File;
use std::io::BufWriter;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ::parquet::arrow::{add_encoded_arrow_schema_to_metadata, ArrowSchemaConverter, ArrowWriter};
use ::parquet::basic::{Compression, Encoding, ZstdLevel};
use ::parquet::errors::ParquetError;
use ::parquet::file::metadata::KeyValue;
use ::parquet::file::properties::{EnabledStatistics, WriterProperties};
use ::parquet::file::writer::SerializedFileWriter;
use ::parquet::schema::types::{ColumnDescPtr, ColumnPath};
use arrow_array::builder::{
    BooleanBuilder, Int32Builder, Int64Builder, ListBuilder, StringBuilder,
};
use arrow_array::{ArrayRef, Int32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::model::ops::{cbr_mhz, Mark, MarkFilter, Stamp};
use crate::model::slices::{cut_to_window, Entry, FuncRef, Siblings, Slice, SliceKind, SliceSink};
use crate::outfile::{OutDir, OutFile, OutFileError};
use ftf::hash::FastMap;

mod pages;

/// Rows of `calls` per row group: a row group's columns are held in
/// memory until written (about 100 bytes a row before encoding, so 13 MB,
/// and up to four of them: filling, queued, being written), and engines
/// skip whole row groups by their statistics.
pub const ROWS_PER_GROUP: usize = 1 << 17;

/// zstd level 1. Measured on the bench's 10 MB traces, one core
/// (`taskset -c 0`, dataset bytes and user+sys seconds), when the Arrow
/// writer wrote every table: snappy 5.68 MB / 1.24 s (interp), 12.97 MB /
/// 0.94 s (shapes); zstd 1 4.59 MB / 1.34 s, 11.09 MB / 0.97 s; zstd 3
/// 4.26 MB / 1.21 s, 10.58 MB / 0.98 s; zstd 6 3.75 MB / 1.32 s, 10.08 MB
/// / 1.15 s. With `calls` in pages of [`PAGE_ROWS`] encoded by [`pages`]
/// and counted in instructions (cachegrind, `-j1`), level 3 costs 250 M
/// more than level 1 on shapes (10.04 G against 9.79 G; FTF 9.57 G) for
/// a tenth fewer bytes (9.6 MB against 10.6 MB; interp 3.4 against
/// 3.7): the CPU target (no more than FTF) weighs more than the bytes,
/// which are far under their target (12 a call) either way. Levels
/// below 1 save little once keys are packed at whole bytes ([`pages`]):
/// -7 took 170 M instructions off shapes' 9.50 G for 57% more bytes.
/// Chunks zstd barely shrinks are written uncompressed ([`pages`]).
pub const ZSTD_LEVEL: i32 = 1;

/// The tables, each a folder of the dataset.
pub const TABLES: [&str; 4] = ["calls", "marks", "threads", "trace"];

/// Refuses a trace name that cannot be a folder's (`trace=NAME`), or
/// that the engines cannot read back from one: empty, longer than 200
/// bytes, with a `/`, a control character (a NUL, a newline: DataFusion
/// refuses the path, DuckDB the whole dataset), a `\`, `=` or `?` (DuckDB
/// finds no `trace` column in a folder so named, and refuses the whole
/// dataset), a `%` (DuckDB and DataFusion URL-decode the name: `a%20b`
/// reads `a b`), or Hive's name for a null.
pub fn check_trace_name(name: &str) -> Result<(), DatasetError> {
    let why = if name.is_empty() {
        Some("it is empty")
    } else if name.len() > 200 {
        Some("it is longer than 200 bytes")
    } else if name.contains('/') {
        Some("it holds a /")
    } else if name.chars().any(char::is_control) {
        Some("it holds a control character (a NUL, a newline, a tab, ...)")
    } else if name.contains(['\\', '=', '?', '%']) {
        Some(
            "it holds one of \\ = ? %, which SQL engines misread in a folder's name \
             (DuckDB then cannot read the dataset)",
        )
    } else if name == "__HIVE_DEFAULT_PARTITION__" {
        Some("engines read it as a null name")
    } else {
        None
    };
    match why {
        Some(why) => Err(DatasetError::TraceName {
            name: name.to_string(),
            why,
        }),
        None => Ok(()),
    }
}

/// Bits of `call_id` below the thread's ordinal.
const ID_BITS: u32 = 40;

/// The trace's own facts, for the `trace` table: given by the caller.
#[derive(Debug, Clone, Default)]
pub struct TraceFacts {
    /// `--trace-name` (by default the trace dir's name).
    pub trace_name: String,
    /// The trace decoded, as given.
    pub source: String,
    /// The CPU that recorded it (`family/model/stepping`), when known.
    pub cpu: Option<String>,
    /// perf's TSC ⇄ perf time conversion, when the trace has one.
    pub tsc: Option<TscFacts>,
    /// The ptdec that wrote the dataset.
    pub ptdec_version: String,
    /// What `start_ns`, `dur_ns` and `time_ns` count: `ns` (perf time),
    /// or `tsc` for raw PT decoded without `--tsc-freq` (TSC ticks from
    /// the first timestamp); empty means `ns`.
    pub time_unit: String,
}

/// perf's TSC conversion (`time = zero + (tsc * mult) >> shift`).
#[derive(Debug, Clone, Copy, Default)]
pub struct TscFacts {
    pub time_mult: u64,
    pub time_shift: u32,
    pub time_zero: u64,
}

/// How slices become rows.
#[derive(Debug, Clone, Default)]
pub struct DatasetOptions {
    /// Perf time (ns) written as 0.
    pub origin: u64,
    /// Only slices and marks overlapping `[start, end)` (perf time), cut to it.
    pub range: Option<(u64, u64)>,
    /// Which marks are written.
    pub marks: MarkFilter,
    /// The recording had address filters: user-space untraced time is
    /// `[filtered out]` (the FTF's naming).
    pub filtered: bool,
    /// Replace an existing folder.
    pub force: bool,
    /// Permission bits of the files (`outfile::mode_of` the trace);
    /// `None`: `outfile::PRIVATE_MODE`.
    pub file_mode: Option<u32>,
    /// Rows per row group of `calls` (0: [`ROWS_PER_GROUP`]).
    pub rows_per_group: usize,
    /// Write one file, the `calls` table, instead of a folder of tables
    /// (`-o X.parquet`): see [`Dataset::create`].
    pub single_file: bool,
}

/// What the dataset holds, for the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DatasetStats {
    pub calls: u64,
    pub untraced: u64,
    pub gaps: u64,
    pub marks: u64,
    pub threads: u64,
    /// Slices and marks outside `--start`/`--duration`.
    pub dropped: u64,
    /// Marks left out by `--no-ptwrite`, `--no-power`, `--no-events`.
    pub marks_dropped: u64,
    /// Marks a single file (`-o X.parquet`) has no table for.
    pub marks_unwritten: u64,
    /// Calls still running when their segment or the trace ended.
    pub ended_open: u64,
    /// Bytes of the four files (of the one, for a single file).
    pub bytes: u64,
}

/// Why the dataset could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
    /// The folder could not be started or put in place.
    #[error(transparent)]
    Output(#[from] OutFileError),
    /// A file of the dataset could not be created or written.
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The Parquet writer failed.
    #[error("writing {path}: {source}")]
    Parquet {
        path: PathBuf,
        #[source]
        source: ParquetError,
    },
    /// More threads or slices than `call_id` numbers.
    #[error("too many threads or slices for call_id (thread {ordinal}, slice {id})")]
    IdRange { ordinal: u64, id: u64 },
    /// A single file would hold no row: the decode found only marks,
    /// which it has no table for.
    #[error(
        "{path}: the decode found no calls, only {marks} marks (PTWRITE, power, frequency, \
         events), and a single file has no marks table; write a dataset folder instead \
         (-o DIR --format parquet)"
    )]
    OnlyMarks { path: PathBuf, marks: u64 },
    /// `--trace-name` cannot name the trace's folder (`trace=NAME`).
    #[error("--trace-name {name:?}: {why}; give another name")]
    TraceName { name: String, why: &'static str },
}

/// Where a table's file is written: a file in the dataset's temporary
/// folder, or the single file `-o X.parquet` ([`OutFile`], put in place by
/// its commit).
enum Sink {
    File(File),
    Out(OutFile),
}

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = match self {
            Sink::File(f) => f.write(buf),
            Sink::Out(f) => f.write(buf),
        };
        r.inspect_err(remember)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let r = match self {
            Sink::File(f) => f.flush(),
            Sink::Out(f) => f.flush(),
        };
        r.inspect_err(remember)
    }
}

thread_local! {
    /// The last write error of a [`Sink`] on this thread.
    static FAILED_WRITE: std::cell::RefCell<Option<std::io::Error>> =
        const { std::cell::RefCell::new(None) };
}

fn remember(e: &std::io::Error) {
    let copy = std::io::Error::new(e.kind(), e.to_string());
    FAILED_WRITE.with(|f| *f.borrow_mut() = Some(copy));
}

/// `e`, or the write error behind it: the parquet crate turns a failed
/// flush of its buffer at the end of a file into a message ("fail to get
/// inner writer: ..."), so a full disk named the crate, not the file.
fn with_write_error(e: ParquetError) -> ParquetError {
    match e {
        ParquetError::General(m) => match FAILED_WRITE.with(|f| f.borrow_mut().take()) {
            Some(io) => ParquetError::External(Box::new(io)),
            None => ParquetError::General(m),
        },
        e => e,
    }
}

/// What a table's writer thread is handed.
enum ToWriter<G> {
    /// A row group.
    Group(G),
    /// A key-value pair for the file's footer (a single file's threads and
    /// trace facts).
    Meta(KeyValue),
}

/// What a table's writer thread does with the row groups it is handed.
trait TableWriter: Send + 'static {
    /// One row group's columns.
    type Group: Send + 'static;
    /// Writes one row group; gives back what the sink can fill again.
    fn write_group(&mut self, group: Self::Group) -> Result<Option<Self::Group>, ParquetError>;
    /// Adds a key-value pair to the footer.
    fn meta(&mut self, kv: KeyValue);
    /// Writes the footer; the file.
    fn finish(self) -> Result<Sink, ParquetError>;
}

impl TableWriter for ArrowWriter<Sink> {
    type Group = RecordBatch;

    fn write_group(&mut self, batch: RecordBatch) -> Result<Option<RecordBatch>, ParquetError> {
        self.write(&batch)?;
        self.flush()?;
        Ok(None)
    }

    fn meta(&mut self, kv: KeyValue) {
        self.append_key_value_metadata(kv);
    }

    fn finish(self) -> Result<Sink, ParquetError> {
        self.into_inner()
    }
}

/// One table's file, written row group by row group on a thread of its
/// own: encoding (delta packing, dictionary keys, zstd) runs beside the
/// stacks there, as the FTF emitter's block encoders do. At most
/// [`BATCHES_IN_FLIGHT`] row groups wait for it; the columns it has
/// written come back to be filled again (not freed and allocated, page by
/// page, per row group).
struct Part<W: TableWriter> {
    path: PathBuf,
    schema: SchemaRef,
    to_writer: Option<crossbeam_channel::Sender<ToWriter<W::Group>>>,
    back: crossbeam_channel::Receiver<W::Group>,
    writer: Option<std::thread::JoinHandle<Result<Sink, DatasetError>>>,
}

/// Row groups handed to a table's writer thread and not yet written.
const BATCHES_IN_FLIGHT: usize = 2;

impl<W: TableWriter> Part<W> {
    /// The file `part-0.parquet` of `table` in the temporary folder `dir`,
    /// written by the writer `make` makes of it; errors name it where it
    /// goes, `shown` (`ROOT/TABLE/trace=NAME`): the temporary is gone when
    /// they are read.
    fn create(
        dir: &Path,
        shown: &Path,
        table: &str,
        schema: SchemaRef,
        mode: u32,
        make: impl FnOnce(Sink) -> Result<W, ParquetError>,
    ) -> Result<Part<W>, DatasetError> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let folder = dir.join(table);
        let path = shown.join("part-0.parquet");
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| DatasetError::Io { path, source }
        };
        std::fs::DirBuilder::new()
            .mode((mode & 0o777) | ((mode & 0o444) >> 2))
            .create(&folder)
            .map_err(io(&path))?;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(folder.join("part-0.parquet"))
            .map_err(io(&path))?;
        Self::start(path, table, schema, Sink::File(file), make)
    }

    /// The table's writer `make` makes of `sink`, on its thread; `path`
    /// names the file in errors.
    fn start(
        path: PathBuf,
        table: &str,
        schema: SchemaRef,
        sink: Sink,
        make: impl FnOnce(Sink) -> Result<W, ParquetError>,
    ) -> Result<Part<W>, DatasetError> {
        let pq = |path: &Path| {
            let path = path.to_path_buf();
            move |source| parquet_error(&path, source)
        };
        let mut writer = make(sink).map_err(pq(&path))?;
        let (tx, rx) = crossbeam_channel::bounded::<ToWriter<W::Group>>(BATCHES_IN_FLIGHT);
        let (give_back, back) = crossbeam_channel::bounded::<W::Group>(BATCHES_IN_FLIGHT);
        let at = path.clone();
        let thread = std::thread::Builder::new()
            .name(format!("ptdec-{table}"))
            .spawn(move || {
                for msg in rx {
                    match msg {
                        ToWriter::Group(group) => {
                            if let Some(empty) = writer.write_group(group).map_err(pq(&at))? {
                                let _ = give_back.try_send(empty);
                            }
                        }
                        ToWriter::Meta(kv) => writer.meta(kv),
                    }
                }
                writer.finish().map_err(with_write_error).map_err(pq(&at))
            })
            .map_err(|source| DatasetError::Io {
                path: path.clone(),
                source,
            })?;
        Ok(Part {
            path,
            schema,
            to_writer: Some(tx),
            back,
            writer: Some(thread),
        })
    }

    /// Hands `group` to the writer thread.
    fn send(&mut self, group: W::Group) -> Result<(), DatasetError> {
        self.send_msg(ToWriter::Group(group))
    }

    /// Adds `key` = `value` to the file's footer.
    fn meta(&mut self, key: &str, value: String) -> Result<(), DatasetError> {
        self.send_msg(ToWriter::Meta(KeyValue::new(key.to_string(), value)))
    }

    fn send_msg(&mut self, msg: ToWriter<W::Group>) -> Result<(), DatasetError> {
        let sent = self.to_writer.as_ref().map(|tx| tx.send(msg));
        match sent {
            Some(Ok(())) => Ok(()),
            // The writer stopped: its error.
            _ => Err(self.join().err().unwrap_or_else(|| self.stopped())),
        }
    }

    /// A row group's columns the writer is done with, if one is back.
    fn recycled(&self) -> Option<W::Group> {
        self.back.try_recv().ok()
    }

    fn stopped(&self) -> DatasetError {
        DatasetError::Io {
            path: self.path.clone(),
            source: std::io::Error::other("its writer thread stopped"),
        }
    }

    /// Ends the writer thread: the file's footer written; the file.
    fn join(&mut self) -> Result<Sink, DatasetError> {
        self.to_writer = None;
        match self.writer.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(DatasetError::Io {
                path: self.path.clone(),
                source: std::io::Error::other("its writer thread panicked"),
            }),
            None => Err(self.stopped()),
        }
    }

    /// Ends the file (its footer) and syncs it if it is one of a
    /// folder's; returns its size, and the single file to commit.
    fn close(mut self) -> Result<(u64, Option<OutFile>), DatasetError> {
        let path = self.path.clone();
        let io = |source| DatasetError::Io {
            path: path.clone(),
            source,
        };
        match self.join()? {
            Sink::File(file) => {
                file.sync_all().map_err(io)?;
                Ok((file.metadata().map_err(io)?.len(), None))
            }
            Sink::Out(out) => Ok((out.written(), Some(out))),
        }
    }
}

/// A table written by the Arrow writer.
type ArrowPart = Part<ArrowWriter<Sink>>;

impl ArrowPart {
    fn arrow(
        dir: &Path,
        shown: &Path,
        table: &str,
        schema: SchemaRef,
        props: WriterProperties,
        mode: u32,
    ) -> Result<ArrowPart, DatasetError> {
        let s = schema.clone();
        Part::create(dir, shown, table, schema, mode, move |file| {
            ArrowWriter::try_new(file, s, Some(props))
        })
    }

    /// Hands `columns` to the writer thread as one row group.
    fn write(&mut self, columns: Vec<ArrayRef>) -> Result<(), DatasetError> {
        let batch = RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| {
            DatasetError::Parquet {
                path: self.path.clone(),
                source: ParquetError::ArrowError(e.to_string()),
            }
        })?;
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.send(batch)
    }
}

impl<W: TableWriter> Drop for Part<W> {
    /// A dataset left unfinished (an error, Ctrl-C): the thread ends before
    /// the temporary folder it writes into is removed.
    fn drop(&mut self) {
        if self.writer.is_some() {
            let _ = self.join();
        }
    }
}

/// The writer's error on `path`: a failed write (a full disk) as the
/// file's I/O error, as an FTF output's reads, not as the writer's
/// `External: ...`.
fn parquet_error(path: &Path, source: ParquetError) -> DatasetError {
    match source {
        ParquetError::External(e) => match e.downcast::<std::io::Error>() {
            Ok(e) => DatasetError::Io {
                path: path.to_path_buf(),
                source: *e,
            },
            Err(e) => DatasetError::Parquet {
                path: path.to_path_buf(),
                source: ParquetError::External(e),
            },
        },
        source => DatasetError::Parquet {
            path: path.to_path_buf(),
            source,
        },
    }
}

fn field(name: &str, t: DataType, nullable: bool) -> Field {
    Field::new(name, t, nullable)
}

fn dict(name: &str, key: DataType, nullable: bool) -> Field {
    Field::new_dictionary(name, key, DataType::Utf8, nullable)
}

fn calls_schema() -> SchemaRef {
    use DataType::{Boolean, Int32, Int64, Int8};
    Arc::new(Schema::new(vec![
        field("call_id", Int64, false),
        field("parent_id", Int64, true),
        field("depth", Int32, false),
        field("pid", Int32, false),
        field("tid", Int32, false),
        field("start_ns", Int64, false),
        field("dur_ns", Int64, false),
        field("start_insn", Int64, false),
        field("insns", Int64, false),
        field("self_insns", Int64, false),
        field("self_ns", Int64, false),
        field("cycles", Int64, true),
        dict("function", Int32, false),
        dict("module", Int32, true),
        field("addr", Int64, false),
        dict("kind", Int8, false),
        field("cut_start", Boolean, false),
        field("cut_end", Boolean, false),
        field("unknown_start", Boolean, false),
    ]))
}

fn marks_schema() -> SchemaRef {
    use DataType::{Boolean, Int32, Int64, Utf8};
    Arc::new(Schema::new(vec![
        field("pid", Int32, false),
        field("tid", Int32, false),
        field("time_ns", Int64, false),
        field("insn", Int64, false),
        field("category", Utf8, false),
        field("name", Utf8, false),
        field("value", Int64, true),
        field("ip", Int64, true),
        field("cpu", Int32, true),
        field("emulated", Boolean, false),
        field("args", Utf8, true),
    ]))
}

fn threads_schema() -> SchemaRef {
    use DataType::{Int32, Int64, Utf8};
    let list = |t: DataType| DataType::List(Arc::new(Field::new("item", t, true)));
    Arc::new(Schema::new(vec![
        field("pid", Int32, false),
        field("tid", Int32, false),
        field("name", Utf8, false),
        field("process", Utf8, false),
        field("rename_ns", list(Int64), false),
        field("rename_to", list(Utf8), false),
    ]))
}

fn trace_schema() -> SchemaRef {
    use DataType::{Int32, Int64, Utf8};
    Arc::new(Schema::new(vec![
        field("source", Utf8, false),
        field("cpu", Utf8, true),
        field("origin_ns", Int64, false),
        field("tsc_time_mult", Int64, true),
        field("tsc_time_shift", Int32, true),
        field("tsc_time_zero", Int64, true),
        field("window_start_ns", Int64, true),
        field("window_end_ns", Int64, true),
        field("ptdec_version", Utf8, false),
        field("time_unit", Utf8, false),
    ]))
}

/// The writer's settings for a table; `delta`: columns of growing
/// integers (ids, times, counters), stored as differences.
fn props(rows: usize, delta: &[&str]) -> Result<WriterProperties, ParquetError> {
    let mut b = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(ZSTD_LEVEL)?))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(rows.max(1)));
    for c in delta {
        let c = ColumnPath::from(*c);
        b = b
            .set_column_dictionary_enabled(c.clone(), false)
            .set_column_encoding(c, Encoding::DELTA_BINARY_PACKED);
    }
    Ok(b.build())
}

/// The values of a row of `calls`.
#[derive(Debug, Clone)]
struct Row {
    /// Its thread's ordinal above its number (the thread's `pid` and
    /// `tid`: [`Dataset::thread_ids`]).
    call_id: i64,
    parent_id: Option<i64>,
    depth: i32,
    start: Stamp,
    end: Stamp,
    self_insns: u64,
    self_ns: u64,
    name: Name,
    addr: u64,
    kind: Kind,
    unknown_start: bool,
    /// Ended by a gap, a restart or the trace's end.
    ended_open: bool,
}

/// What a row names: a function (by [`FuncRef`]) or a pseudo-slice.
#[derive(Debug, Clone)]
enum Name {
    Func(FuncRef),
    Pseudo(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Kind {
    Call = 0,
    Tail = 1,
    Untraced = 2,
    Gap = 3,
    /// Entered at the function's entry with neither a call nor a jump: a
    /// root frame or a signal handler (`aggregate`'s `Entry::Root`).
    Root = 4,
}

const KIND_NAMES: [&str; 5] = ["call", "tail call", "untraced", "gap", "root"];

/// A string dictionary for one row group's column: the keys here, the
/// strings in the row group's columns ([`CallColumns`]).
#[derive(Default)]
struct Dict {
    keys: FastMap<Arc<str>, u32>,
}

impl Dict {
    fn key(&mut self, s: &Arc<str>, values: &mut Vec<Arc<str>>) -> u32 {
        if let Some(&k) = self.keys.get(s) {
            return k;
        }
        let k = values.len() as u32;
        values.push(s.clone());
        self.keys.insert(s.clone(), k);
        k
    }
}

/// Rows of `calls` per [`RowBlock`]: a data page's ([`PAGE_ROWS`]), so
/// that a page's values are encoded where the sink stored them.
const BLOCK_ROWS: usize = PAGE_ROWS;

/// A column of a [`RowBlock`].
type Col<T> = Box<[T; BLOCK_ROWS]>;

fn col<T: Copy + Default>() -> Col<T> {
    match vec![T::default(); BLOCK_ROWS].into_boxed_slice().try_into() {
        Ok(c) => c,
        Err(_) => unreachable!("a vector of BLOCK_ROWS values"),
    }
}

/// [`BLOCK_ROWS`] rows of `calls`, column by column, in arrays of that
/// length: the sink stores a row's values behind one bounds check, not
/// one per column as vectors would (a quarter of its cost per row). A
/// nullable column holds a value (0) at its null rows too.
struct RowBlock {
    rows: usize,
    call_id: Col<i64>,
    parent_id: Col<i64>,
    has_parent: Col<bool>,
    depth: Col<i32>,
    /// The thread's ordinal: `pid` and `tid` are keys into the row
    /// group's dictionary of threads.
    thread: Col<u32>,
    start_ns: Col<i64>,
    dur_ns: Col<i64>,
    start_insn: Col<i64>,
    insns: Col<i64>,
    self_insns: Col<i64>,
    self_ns: Col<i64>,
    cycles: Col<i64>,
    has_cycles: Col<bool>,
    function: Col<u32>,
    module: Col<u32>,
    has_module: Col<bool>,
    /// Keys into the row group's dictionary of addresses.
    addr: Col<u32>,
    kind: Col<u32>,
    cut_start: Col<bool>,
    cut_end: Col<bool>,
    unknown_start: Col<bool>,
}

impl RowBlock {
    fn new() -> RowBlock {
        RowBlock {
            rows: 0,
            call_id: col(),
            parent_id: col(),
            has_parent: col(),
            depth: col(),
            thread: col(),
            start_ns: col(),
            dur_ns: col(),
            start_insn: col(),
            insns: col(),
            self_insns: col(),
            self_ns: col(),
            cycles: col(),
            has_cycles: col(),
            function: col(),
            module: col(),
            has_module: col(),
            addr: col(),
            kind: col(),
            cut_start: col(),
            cut_end: col(),
            unknown_start: col(),
        }
    }
}

/// One row group of `calls`: its rows in blocks, and the dictionaries
/// their keys index.
#[derive(Default)]
struct CallColumns {
    rows: usize,
    /// Blocks `..=filling` hold the rows; the others are empty, kept to
    /// be filled.
    blocks: Vec<RowBlock>,
    filling: usize,
    /// The dictionaries of `function` and `module`.
    names: Vec<Arc<str>>,
    modules: Vec<Arc<str>>,
    /// The dictionary of `addr`.
    addrs: Vec<i64>,
    /// (pid, tid) by thread ordinal.
    threads: Vec<(i32, i32)>,
}

impl CallColumns {
    /// The block to store the next row in, and its index there.
    #[inline]
    fn next_row(&mut self) -> (&mut RowBlock, usize) {
        if self
            .blocks
            .get(self.filling)
            .is_some_and(|b| b.rows == BLOCK_ROWS)
        {
            self.filling += 1;
        }
        if self.filling == self.blocks.len() {
            self.blocks.push(RowBlock::new());
        }
        let b = &mut self.blocks[self.filling];
        // `min`: what the arrays' indexing sees as in bounds.
        let i = b.rows.min(BLOCK_ROWS - 1);
        b.rows += 1;
        self.rows += 1;
        (b, i)
    }

    /// The blocks holding rows.
    fn filled(&self) -> &[RowBlock] {
        &self.blocks[..self.blocks.len().min(self.filling + 1)]
    }

    /// Empties the row group, keeping its blocks.
    fn clear(&mut self) {
        self.rows = 0;
        self.filling = 0;
        for b in &mut self.blocks {
            b.rows = 0;
        }
        self.names.clear();
        self.modules.clear();
        self.addrs.clear();
        self.threads.clear();
    }
}

/// The row group being filled and its dictionaries' keys.
#[derive(Default)]
struct CallRows {
    cols: CallColumns,
    /// Function (by `FuncRef::addr`: held here, so not freed and reused
    /// while the row group fills) → its (function, module, addr) keys.
    funcs: FastMap<usize, (u32, u32, u32)>,
    held: Vec<FuncRef>,
    names: Dict,
    modules: Dict,
    pseudo: FastMap<&'static str, u32>,
    addrs: FastMap<u64, u32>,
}

impl CallRows {
    /// The keys of a row's function, module and address (`addr`).
    fn keys(&mut self, name: &Name, addr: u64) -> (u32, Option<u32>, u32) {
        match name {
            Name::Func(f) => {
                if let Some(&(n, m, a)) = self.funcs.get(&f.addr()) {
                    return (n, Some(m), a);
                }
                let keys = (
                    self.names.key(&f.name, &mut self.cols.names),
                    self.modules.key(&f.module, &mut self.cols.modules),
                    self.addr_key(addr),
                );
                self.funcs.insert(f.addr(), keys);
                self.held.push(f.clone());
                (keys.0, Some(keys.1), keys.2)
            }
            Name::Pseudo(p) => {
                let a = self.addr_key(addr);
                if let Some(&k) = self.pseudo.get(p) {
                    return (k, None, a);
                }
                let k = self.names.key(&Arc::from(*p), &mut self.cols.names);
                self.pseudo.insert(p, k);
                (k, None, a)
            }
        }
    }

    fn addr_key(&mut self, addr: u64) -> u32 {
        let addrs = &mut self.cols.addrs;
        *self.addrs.entry(addr).or_insert_with(|| {
            addrs.push(addr as i64);
            addrs.len() as u32 - 1
        })
    }

    /// Takes the row group filled so far, leaving `empty` (cleared) to
    /// fill; `threads`: (pid, tid) by ordinal.
    fn take(&mut self, empty: CallColumns, threads: &[(i32, i32)]) -> CallColumns {
        self.funcs.clear();
        self.held.clear();
        self.pseudo.clear();
        self.names.keys.clear();
        self.modules.keys.clear();
        self.addrs.clear();
        let mut full = std::mem::replace(&mut self.cols, empty);
        full.threads.extend_from_slice(threads);
        full
    }
}

/// Rows of `calls` per data page, two pages a row group. More than the
/// Arrow writer's 20,000 (or 1 MiB) because zstd compresses each page
/// alone: on the bench's shapes trace, pages of 16,384 rows made the
/// dataset 7.4 bytes a call, 32,768 6.6, 65,536 5.9 and whole row groups
/// 4.9 (the matches zstd finds reach back that far), and each page costs
/// zstd a frame. Engines reading the page index (DataFusion, DuckDB)
/// still skip half a row group's rows by a page's min and max.
pub const PAGE_ROWS: usize = 1 << 16;

/// Writes `calls`: each row group's column chunks encoded by [`pages`]
/// page by page from the row blocks, the file (page headers, footer, page
/// index, the Arrow schema for readers that take it) by the Parquet crate.
struct CallsWriter {
    file: SerializedFileWriter<BufWriter<Sink>>,
    columns: Vec<ColumnDescPtr>,
    encoder: pages::ChunkEncoder,
    /// A column of keys gathered from the blocks (`pid`, `tid`, `kind`:
    /// made keys into their dictionaries of the values used).
    keys: Vec<u32>,
}

impl CallsWriter {
    fn new(file: Sink, schema: &Schema) -> Result<CallsWriter, ParquetError> {
        let descr = ArrowSchemaConverter::new().convert(schema)?;
        let mut props = WriterProperties::builder().build();
        add_encoded_arrow_schema_to_metadata(schema, &mut props);
        let columns = descr.columns().to_vec();
        let file = SerializedFileWriter::new(
            BufWriter::with_capacity(1 << 20, file),
            descr.root_schema_ptr(),
            Arc::new(props),
        )?;
        Ok(CallsWriter {
            file,
            columns,
            encoder: pages::ChunkEncoder::new(ZSTD_LEVEL)?,
            keys: Vec::new(),
        })
    }
}

/// A column of a [`RowBlock`].
type ColumnOf<T> = fn(&RowBlock) -> &Col<T>;

/// `column`'s pages, a block each, read where the sink stored them.
fn pages_of<T>(blocks: &[RowBlock], column: ColumnOf<T>) -> Vec<pages::Rows<'_, T>> {
    blocks
        .iter()
        .map(|b| vec![(&column(b)[..b.rows], None)])
        .collect()
}

/// A nullable column's pages: its values and whether each row has one.
fn pages_some<T>(
    blocks: &[RowBlock],
    column: fn(&RowBlock) -> (&Col<T>, &Col<bool>),
) -> Vec<pages::Rows<'_, T>> {
    blocks
        .iter()
        .map(|b| {
            let (values, has) = column(b);
            vec![(&values[..b.rows], Some(&has[..b.rows]))]
        })
        .collect()
}

/// A column gathered in one vector as pages of [`PAGE_ROWS`] (the blocks'
/// pages: every block but the last is full).
fn pages_in<T>(values: &[T]) -> Vec<pages::Rows<'_, T>> {
    values.chunks(PAGE_ROWS).map(|p| vec![(p, None)]).collect()
}

/// `column` of the blocks, one after the other, into `out`.
fn gather<T: Copy>(out: &mut Vec<T>, blocks: &[RowBlock], column: impl Fn(&RowBlock) -> &Col<T>) {
    out.clear();
    for b in blocks {
        out.extend_from_slice(&column(b)[..b.rows]);
    }
}

/// Keys into `values` (few: kinds, threads) made keys into a dictionary
/// of the values used, each once; that dictionary.
fn used_dict<V: Copy + Eq + std::hash::Hash>(keys: &mut [u32], values: &[V]) -> Vec<V> {
    let mut key = vec![u32::MAX; values.len()];
    let mut dict = Vec::new();
    let mut index = FastMap::default();
    for k in keys {
        let to = &mut key[*k as usize];
        if *to == u32::MAX {
            let v = values[*k as usize];
            *to = *index.entry(v).or_insert_with(|| {
                dict.push(v);
                dict.len() as u32 - 1
            });
        }
        *k = *to;
    }
    dict
}

impl TableWriter for CallsWriter {
    type Group = CallColumns;

    fn write_group(&mut self, mut g: CallColumns) -> Result<Option<CallColumns>, ParquetError> {
        let blocks = g.filled();
        let c = &self.columns;
        let e = &mut self.encoder;
        let mut chunks = Vec::with_capacity(c.len());
        chunks.push(e.ints(
            c[0].clone(),
            &pages_of(blocks, |b| &b.call_id),
            false,
            false,
        )?);
        let parents = pages_some(blocks, |b| (&b.parent_id, &b.has_parent));
        chunks.push(e.ints(c[1].clone(), &parents, true, false)?);
        chunks.push(e.ints(c[2].clone(), &pages_of(blocks, |b| &b.depth), false, true)?);
        for (i, part) in [|t: &(i32, i32)| t.0, |t: &(i32, i32)| t.1]
            .iter()
            .enumerate()
        {
            gather(&mut self.keys, blocks, |b| &b.thread);
            let ids: Vec<i32> = g.threads.iter().map(part).collect();
            let dict = used_dict(&mut self.keys, &ids);
            chunks.push(e.keyed_ints(c[3 + i].clone(), &pages_in(&self.keys), &dict)?);
        }
        // Growing (times, instruction counts) or few values (durations,
        // instructions per call): delta packing or a dictionary.
        let ints: [(ColumnOf<i64>, bool); 6] = [
            (|b| &b.start_ns, false),
            (|b| &b.dur_ns, true),
            (|b| &b.start_insn, false),
            (|b| &b.insns, true),
            (|b| &b.self_insns, true),
            (|b| &b.self_ns, true),
        ];
        for (i, (column, dict)) in ints.into_iter().enumerate() {
            chunks.push(e.ints(c[5 + i].clone(), &pages_of(blocks, column), false, dict)?);
        }
        let cycles = pages_some(blocks, |b| (&b.cycles, &b.has_cycles));
        chunks.push(e.ints(c[11].clone(), &cycles, true, false)?);
        let names = pages_of(blocks, |b| &b.function);
        chunks.push(e.dict(c[12].clone(), &names, false, &g.names)?);
        let modules = pages_some(blocks, |b| (&b.module, &b.has_module));
        chunks.push(e.dict(c[13].clone(), &modules, true, &g.modules)?);
        chunks.push(e.keyed_ints(c[14].clone(), &pages_of(blocks, |b| &b.addr), &g.addrs)?);
        gather(&mut self.keys, blocks, |b| &b.kind);
        let kinds = used_dict(&mut self.keys, &KIND_NAMES);
        chunks.push(e.dict(c[15].clone(), &pages_in(&self.keys), false, &kinds)?);
        let flags: [fn(&RowBlock) -> &Col<bool>; 3] =
            [|b| &b.cut_start, |b| &b.cut_end, |b| &b.unknown_start];
        for (i, column) in flags.into_iter().enumerate() {
            chunks.push(e.bools(c[16 + i].clone(), &pages_of(blocks, column))?);
        }
        let mut group = self.file.next_row_group()?;
        for chunk in chunks {
            group.append_column(&chunk.bytes, chunk.close)?;
        }
        group.close()?;
        g.clear();
        Ok(Some(g))
    }

    fn meta(&mut self, kv: KeyValue) {
        self.file.append_key_value_metadata(kv);
    }

    fn finish(self) -> Result<Sink, ParquetError> {
        self.file
            .into_inner()?
            .into_inner()
            .map_err(|e| ParquetError::External(Box::new(e.into_error())))
    }
}

/// The columns of `marks` being filled.
#[derive(Default)]
struct MarkColumns {
    rows: usize,
    pid: Int32Builder,
    tid: Int32Builder,
    time_ns: Int64Builder,
    insn: Int64Builder,
    category: StringBuilder,
    name: StringBuilder,
    value: Int64Builder,
    ip: Int64Builder,
    cpu: Int32Builder,
    emulated: BooleanBuilder,
    args: StringBuilder,
}

impl MarkColumns {
    fn take(&mut self) -> Vec<ArrayRef> {
        self.rows = 0;
        vec![
            Arc::new(self.pid.finish()),
            Arc::new(self.tid.finish()),
            Arc::new(self.time_ns.finish()),
            Arc::new(self.insn.finish()),
            Arc::new(self.category.finish()),
            Arc::new(self.name.finish()),
            Arc::new(self.value.finish()),
            Arc::new(self.ip.finish()),
            Arc::new(self.cpu.finish()),
            Arc::new(self.emulated.finish()),
            Arc::new(self.args.finish()),
        ]
    }
}

/// A thread as the `threads` table names it.
struct ThreadRow {
    pid: u32,
    tid: u32,
    name: String,
    process: String,
    renames: Vec<(u64, String)>,
}

/// The ns of slice `s` inside the window `range` (all of them without
/// one; 0 for a slice outside it, which is not written): what its row's
/// `dur_ns` says ([`Dataset::push_row`]).
fn window_ns(range: Option<(u64, u64)>, s: &Slice) -> u64 {
    cut_to_window(range, s.start.time, s.end.time).map_or(0, |(lo, hi)| hi - lo)
}

/// The children's sums of slice `id` at `depth`, taken off `sums` ((0,
/// 0) when it had none). Its sums are on top, or (a slice held for a
/// parent found later) below others of its depth or deeper, never below
/// a shallower one: the search stops there, so a leaf looks at one entry.
#[inline]
fn take_sum(sums: &mut Vec<Sum>, id: u64, depth: i32) -> (u64, u64) {
    match find_sum(sums, id, depth) {
        Some(i) => {
            let t = sums.remove(i);
            (t.insns, t.ns)
        }
        None => (0, 0),
    }
}

/// Where slice `id`'s sums lie in `sums`, searched from the top no deeper
/// than `depth` (see [`take_sum`]).
#[inline]
fn find_sum(sums: &[Sum], id: u64, depth: i32) -> Option<usize> {
    let back = sums
        .iter()
        .rev()
        .take_while(|t| t.depth >= depth)
        .position(|t| t.id == id)?;
    Some(sums.len() - 1 - back)
}

/// Adds a child's instructions and ns to the sums of its parent `id` at
/// `depth`, found as [`take_sum`] finds them or put on top.
#[inline]
fn add_sum(sums: &mut Vec<Sum>, id: u64, depth: i32, insns: u64, ns: u64) {
    match find_sum(sums, id, depth) {
        Some(i) => {
            sums[i].insns += insns;
            sums[i].ns += ns;
        }
        None => sums.push(Sum {
            id,
            depth,
            insns,
            ns,
        }),
    }
}

/// The instructions and ns of a slice's closed children, until it comes.
#[derive(Debug, Clone, Copy)]
struct Sum {
    id: u64,
    depth: i32,
    insns: u64,
    ns: u64,
}

/// Whether stamp `a` lies before `b` (equal on no axis after it).
fn earlier(a: &Stamp, b: &Stamp) -> bool {
    a != b
        && a.time <= b.time
        && a.insns <= b.insns
        && match (a.cycles.get(), b.cycles.get()) {
            (Some(x), Some(y)) => x <= y,
            _ => true,
        }
}

/// What the sink keeps per thread.
#[derive(Default)]
struct ThreadState {
    /// `call_id`'s high bits.
    ordinal: u64,
    /// The instructions and (window-cut) ns of closed children, per
    /// parent, until it comes. In close order a parent comes after its
    /// children and before its siblings' parents, so the sums are a stack:
    /// the one a slice takes is on top, and so is the one its parent's sum
    /// adds to (or goes on). Slices held for a parent found later
    /// (`ThreadStack::placing_roots`) may find theirs below the top, which
    /// [`take_sum`] and [`add_sum`] look for.
    children: Vec<Sum>,
    /// The latest slice closed at each depth, for telling tail calls.
    closed: Siblings,
    /// Calls that ended at `tail_at`, the latest end so far, waiting for
    /// the next slice to tell whether they were cut (the FTF's `Tail`,
    /// `aggregate`'s `mark_cut`).
    tail: Vec<Row>,
    tail_at: Option<Stamp>,
}

/// Writes the dataset; see the module doc.
pub struct Dataset {
    /// The folder's part being written; `None` for a single file.
    dir: Option<OutDir>,
    /// The folder or the single file, as it will be named.
    path: PathBuf,
    opts: DatasetOptions,
    facts: TraceFacts,
    calls: Part<CallsWriter>,
    /// `None` for a single file.
    marks: Option<ArrowPart>,
    call_cols: CallRows,
    mark_cols: MarkColumns,
    rows_per_group: usize,
    threads: Vec<ThreadRow>,
    state: Vec<ThreadState>,
    index: FastMap<(u32, u32), usize>,
    /// (pid, tid) by thread ordinal.
    thread_ids: Vec<(i32, i32)>,
    last: Option<((u32, u32), usize)>,
    stats: DatasetStats,
}

impl Dataset {
    /// Starts the dataset `path`: a folder (see [`OutDir::create`]), or
    /// with [`DatasetOptions::single_file`] the one file `path` holding the
    /// `calls` table, as DuckDB's `COPY ... TO 'x.parquet'` writes one: the
    /// `threads` and `trace` tables' rows go in its footer as JSON
    /// (key-value metadata `ptdec.threads`, `ptdec.trace`), and the marks
    /// are left out (counted in [`DatasetStats::marks_unwritten`]: a folder
    /// has their table). The file is written as an FTF output is
    /// ([`OutFile`]): an existing file is replaced, whole, and an input
    /// never.
    pub fn create(
        path: &Path,
        opts: DatasetOptions,
        facts: TraceFacts,
    ) -> Result<Dataset, DatasetError> {
        let mode = opts.file_mode.unwrap_or(crate::outfile::PRIVATE_MODE);
        if !opts.single_file {
            check_trace_name(&facts.trace_name)?;
        }
        let rows_per_group = if opts.rows_per_group == 0 {
            ROWS_PER_GROUP
        } else {
            opts.rows_per_group
        };
        let pq = |source| DatasetError::Parquet {
            path: path.to_path_buf(),
            source,
        };
        let schema = calls_schema();
        let (dir, calls, marks) = if opts.single_file {
            let out = if path == Path::new("-") {
                OutFile::stdout()?
            } else {
                OutFile::create(path, mode)?
            };
            let calls = Part::start(
                path.to_path_buf(),
                "calls",
                schema.clone(),
                Sink::Out(out),
                |file| CallsWriter::new(file, &schema),
            )?;
            (None, calls, None)
        } else {
            let part = format!("trace={}", facts.trace_name);
            let dir = OutDir::create(path, &part, &TABLES, opts.force, mode)?;
            let marks_props = props(rows_per_group, &["time_ns", "insn"]).map_err(pq)?;
            let calls = Part::create(
                dir.temp(),
                &dir.part_path("calls"),
                "calls",
                schema.clone(),
                mode,
                |file| CallsWriter::new(file, &schema),
            )?;
            let marks = Part::arrow(
                dir.temp(),
                &dir.part_path("marks"),
                "marks",
                marks_schema(),
                marks_props,
                mode,
            )?;
            (Some(dir), calls, Some(marks))
        };
        Ok(Dataset {
            path: dir
                .as_ref()
                .map_or_else(|| path.to_path_buf(), |d| d.path().to_path_buf()),
            dir,
            opts,
            facts,
            calls,
            marks,
            call_cols: CallRows::default(),
            mark_cols: MarkColumns::default(),
            rows_per_group,
            threads: Vec::new(),
            state: Vec::new(),
            index: FastMap::default(),
            thread_ids: Vec::new(),
            last: None,
            stats: DatasetStats::default(),
        })
    }

    pub fn stats(&self) -> &DatasetStats {
        &self.stats
    }

    /// The folder's or the single file's final name.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The index of thread (pid, tid)'s state, made when new.
    #[inline]
    fn thread_index(&mut self, key: (u32, u32)) -> usize {
        match self.last {
            Some((k, i)) if k == key => i,
            _ => self.other_thread(key),
        }
    }

    /// [`Dataset::thread_index`] of a thread other than the last one's:
    /// out of line, so that the slice's common case (the thread of the
    /// slice before) is a comparison, not a call (49 M instructions of
    /// 9.5 G on the bench's shapes trace).
    #[inline(never)]
    fn other_thread(&mut self, key: (u32, u32)) -> usize {
        let i = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                let ordinal = self.state.len() as u64;
                self.state.push(ThreadState {
                    ordinal,
                    ..ThreadState::default()
                });
                self.index.insert(key, self.state.len() - 1);
                self.thread_ids.push((key.0 as i32, key.1 as i32));
                self.state.len() - 1
            }
        };
        self.last = Some((key, i));
        i
    }

    /// `thread << 40 | id`.
    fn call_id(ordinal: u64, id: NonZeroU64) -> Result<i64, DatasetError> {
        let id = id.get();
        if id >> ID_BITS != 0 || ordinal >> (63 - ID_BITS) != 0 {
            return Err(DatasetError::IdRange { ordinal, id });
        }
        Ok(((ordinal << ID_BITS) | id) as i64)
    }

    /// How `s` was entered, as `ptdec report` counts it
    /// ([`Entry`]: a call instruction, a tail call, a root frame or signal
    /// handler, or not traced).
    fn kind(th: &mut ThreadState, s: &Slice) -> Kind {
        match th.closed.entry(s) {
            Entry::Call | Entry::UnknownStart => Kind::Call,
            Entry::Tail => Kind::Tail,
            Entry::Root => Kind::Root,
            Entry::NotACall => match s.kind {
                SliceKind::Gap { .. } => Kind::Gap,
                _ => Kind::Untraced,
            },
        }
    }

    /// The pseudo-slice names of the FTF.
    fn pseudo_name(&self, kind: &SliceKind) -> &'static str {
        match kind {
            SliceKind::Untraced { kernel: true, .. } => "[kernel]",
            SliceKind::Untraced { .. } if self.opts.filtered => "[filtered out]",
            SliceKind::Untraced { .. } => "[untraced]",
            SliceKind::Gap { kind, .. } => kind.name(),
            SliceKind::Call { .. } => "",
        }
    }

    /// Adds one row to the row group, writing it when full.
    fn push_row(&mut self, r: &Row) -> Result<(), DatasetError> {
        let (t0, t1) = (r.start.time, r.end.time);
        let Some((lo, hi)) = cut_to_window(self.opts.range, t0, t1) else {
            self.stats.dropped += 1;
            return Ok(());
        };
        let (rs, re) = self.opts.range.unwrap_or((0, u64::MAX));
        match r.kind {
            Kind::Call | Kind::Tail | Kind::Root => self.stats.calls += 1,
            Kind::Untraced => self.stats.untraced += 1,
            Kind::Gap => self.stats.gaps += 1,
        }
        self.stats.ended_open += u64::from(r.ended_open);
        let origin = self.opts.origin;
        let (fkey, mkey, akey) = self.call_cols.keys(&r.name, r.addr);
        let cycles = r.start.cycles.get().zip(r.end.cycles.get());
        let c = &mut self.call_cols.cols;
        let (b, i) = c.next_row();
        b.call_id[i] = r.call_id;
        b.has_parent[i] = r.parent_id.is_some();
        b.parent_id[i] = r.parent_id.unwrap_or(0);
        b.depth[i] = r.depth;
        b.thread[i] = (r.call_id >> ID_BITS) as u32;
        b.start_ns[i] = lo.saturating_sub(origin) as i64;
        b.dur_ns[i] = (hi - lo) as i64;
        b.start_insn[i] = r.start.insns as i64;
        b.insns[i] = r.end.insns.saturating_sub(r.start.insns) as i64;
        b.self_insns[i] = r.self_insns as i64;
        b.self_ns[i] = r.self_ns as i64;
        b.has_cycles[i] = cycles.is_some();
        b.cycles[i] = cycles.map_or(0, |(a, b)| b.saturating_sub(a) as i64);
        b.function[i] = fkey;
        b.has_module[i] = mkey.is_some();
        b.module[i] = mkey.unwrap_or(0);
        b.addr[i] = akey;
        b.kind[i] = r.kind as u32;
        b.cut_start[i] = t0 < rs;
        b.cut_end[i] = t1 > re || r.ended_open;
        b.unknown_start[i] = r.unknown_start;
        if c.rows >= self.rows_per_group {
            self.flush_calls()?;
        }
        Ok(())
    }

    fn flush_calls(&mut self) -> Result<(), DatasetError> {
        if self.call_cols.cols.rows == 0 {
            return Ok(());
        }
        let empty = self.calls.recycled().unwrap_or_default();
        let cols = self.call_cols.take(empty, &self.thread_ids);
        self.calls.send(cols)
    }

    fn flush_marks(&mut self) -> Result<(), DatasetError> {
        if self.mark_cols.rows == 0 {
            return Ok(());
        }
        let cols = self.mark_cols.take();
        match self.marks.as_mut() {
            Some(marks) => marks.write(cols),
            None => Ok(()),
        }
    }

    /// Writes thread `ti`'s held calls; `cut`: a gap, a restart or the
    /// trace's end ended them.
    fn release_tail(&mut self, ti: usize, cut: bool) -> Result<(), DatasetError> {
        let mut tail = std::mem::take(&mut self.state[ti].tail);
        self.state[ti].tail_at = None;
        for r in tail.iter_mut() {
            r.ended_open = cut;
            self.push_row(r)?;
        }
        tail.clear();
        // The buffer back, to be filled again without allocating.
        self.state[ti].tail = tail;
        Ok(())
    }

    /// Ends the dataset: the calls still held were cut by the trace's end;
    /// writes the last row groups, the `threads` and `trace` tables, and
    /// puts the folder in place.
    pub fn finish(mut self) -> Result<DatasetStats, DatasetError> {
        self.end_threads()?;
        self.stats.threads = self.threads.len() as u64;
        let Some(dir) = self.dir.take() else {
            return self.finish_file();
        };
        let mode = self.opts.file_mode.unwrap_or(crate::outfile::PRIVATE_MODE);
        let mut bytes = 0;
        let rows = self.rows_per_group;
        let pq = |source| DatasetError::Parquet {
            path: dir.path().to_path_buf(),
            source,
        };
        let mut threads = Part::arrow(
            dir.temp(),
            &dir.part_path("threads"),
            "threads",
            threads_schema(),
            props(rows, &[]).map_err(pq)?,
            mode,
        )?;
        threads.write(self.thread_columns())?;
        let mut trace = Part::arrow(
            dir.temp(),
            &dir.part_path("trace"),
            "trace",
            trace_schema(),
            props(rows, &[]).map_err(pq)?,
            mode,
        )?;
        trace.write(self.trace_columns())?;
        bytes += self.calls.close()?.0;
        let marks = self.marks.take().expect("a folder's dataset has marks");
        for part in [marks, threads, trace] {
            bytes += part.close()?.0;
        }
        self.stats.bytes = bytes;
        dir.commit()?;
        Ok(self.stats)
    }

    /// [`Dataset::finish`] for a single file: the threads and the trace's
    /// facts in its footer, the file put in place.
    fn finish_file(mut self) -> Result<DatasetStats, DatasetError> {
        let threads = self.threads_json();
        let trace = self.trace_json();
        self.calls.meta("ptdec.threads", threads)?;
        self.calls.meta("ptdec.trace", trace)?;
        let (bytes, out) = self.calls.close()?;
        self.stats.bytes = bytes;
        if let Some(out) = out {
            out.commit()?;
        }
        Ok(self.stats)
    }

    /// The `threads` table's rows as a JSON array of objects (the table's
    /// columns), for a single file's footer.
    fn threads_json(&self) -> String {
        let rows: Vec<serde_json::Value> = self
            .sorted_threads()
            .into_iter()
            .map(|t| {
                serde_json::json!({
                    "pid": t.pid as i32,
                    "tid": t.tid as i32,
                    "name": t.name,
                    "process": t.process,
                    "rename_ns": t.renames.iter()
                        .map(|(at, _)| at.saturating_sub(self.opts.origin) as i64)
                        .collect::<Vec<_>>(),
                    "rename_to": t.renames.iter().map(|(_, to)| to).collect::<Vec<_>>(),
                })
            })
            .collect();
        serde_json::Value::Array(rows).to_string()
    }

    /// The `trace` table's row as a JSON object (with the trace's name,
    /// which a folder holds in its partition's name), for a single file's
    /// footer.
    fn trace_json(&self) -> String {
        let f = &self.facts;
        let (start, end) = self.window_columns();
        serde_json::json!({
            "trace": f.trace_name,
            "source": f.source,
            "cpu": f.cpu,
            "origin_ns": self.opts.origin as i64,
            "tsc_time_mult": f.tsc.map(|t| t.time_mult as i64),
            "tsc_time_shift": f.tsc.map(|t| t.time_shift as i32),
            "tsc_time_zero": f.tsc.map(|t| t.time_zero as i64),
            "window_start_ns": start,
            "window_end_ns": end,
            "ptdec_version": f.ptdec_version,
            "time_unit": self.time_unit(),
        })
        .to_string()
    }

    /// The window's start and end from the origin, for the `trace` row.
    fn window_columns(&self) -> (Option<i64>, Option<i64>) {
        let range = self.opts.range;
        let origin = self.opts.origin;
        (
            range.map(|r| r.0.saturating_sub(origin) as i64),
            range
                .filter(|r| r.1 != u64::MAX)
                .map(|r| r.1.saturating_sub(origin) as i64),
        )
    }

    fn time_unit(&self) -> &str {
        if self.facts.time_unit.is_empty() {
            "ns"
        } else {
            &self.facts.time_unit
        }
    }

    /// Writes what waits: the calls still held, cut by the trace's end,
    /// and the rows of the row groups begun. After it, [`Dataset::stats`]
    /// counts every row (before [`Dataset::finish`] puts anything in place).
    pub fn end_threads(&mut self) -> Result<(), DatasetError> {
        for ti in 0..self.state.len() {
            self.release_tail(ti, true)?;
        }
        self.flush_calls()?;
        self.flush_marks()
    }

    /// The `threads` table's rows, in its order (pid, tid).
    fn sorted_threads(&self) -> Vec<&ThreadRow> {
        let mut rows: Vec<&ThreadRow> = self.threads.iter().collect();
        rows.sort_by_key(|t| (t.pid, t.tid));
        rows
    }

    fn thread_columns(&self) -> Vec<ArrayRef> {
        let mut pid = Int32Builder::new();
        let mut tid = Int32Builder::new();
        let mut name = StringBuilder::new();
        let mut process = StringBuilder::new();
        let mut rename_ns = ListBuilder::new(Int64Builder::new());
        let mut rename_to = ListBuilder::new(StringBuilder::new());
        for t in self.sorted_threads() {
            pid.append_value(t.pid as i32);
            tid.append_value(t.tid as i32);
            name.append_value(&t.name);
            process.append_value(&t.process);
            for (at, to) in &t.renames {
                rename_ns
                    .values()
                    .append_value(at.saturating_sub(self.opts.origin) as i64);
                rename_to.values().append_value(to);
            }
            rename_ns.append(true);
            rename_to.append(true);
        }
        vec![
            Arc::new(pid.finish()),
            Arc::new(tid.finish()),
            Arc::new(name.finish()),
            Arc::new(process.finish()),
            Arc::new(rename_ns.finish()),
            Arc::new(rename_to.finish()),
        ]
    }

    fn trace_columns(&self) -> Vec<ArrayRef> {
        let f = &self.facts;
        let one_str = |s: &str| Arc::new(StringArray::from(vec![s])) as ArrayRef;
        let opt_i64 = |v: Option<i64>| Arc::new(arrow_array::Int64Array::from(vec![v])) as ArrayRef;
        let (start, end) = self.window_columns();
        vec![
            one_str(&f.source),
            Arc::new(StringArray::from(vec![f.cpu.as_deref()])),
            opt_i64(Some(self.opts.origin as i64)),
            opt_i64(f.tsc.map(|t| t.time_mult as i64)),
            Arc::new(Int32Array::from(vec![f.tsc.map(|t| t.time_shift as i32)])),
            opt_i64(f.tsc.map(|t| t.time_zero as i64)),
            opt_i64(start),
            opt_i64(end),
            one_str(&f.ptdec_version),
            one_str(self.time_unit()),
        ]
    }

    /// The name, value and other fields of a mark's row.
    fn mark_row(&mut self, pid: u32, tid: u32, at: &Stamp, mark: &Mark) {
        let c = &mut self.mark_cols;
        c.pid.append_value(pid as i32);
        c.tid.append_value(tid as i32);
        c.time_ns
            .append_value(at.time.saturating_sub(self.opts.origin) as i64);
        c.insn.append_value(at.insns as i64);
        let args_text = |args: &[(&'static str, u64)]| {
            args.iter()
                .map(|(n, v)| format!("{n}={v:#x}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let (category, name, value, ip, cpu, emulated, args) = match mark {
            Mark::Ptwrite {
                ip,
                payload,
                emulated,
            } => (
                "ptwrite",
                "ptwrite",
                Some(*payload),
                *ip,
                None,
                *emulated,
                None,
            ),
            Mark::Cbr { ratio, cpu } => (
                "power",
                "frequency",
                Some(cbr_mhz(*ratio)),
                None,
                *cpu,
                false,
                None,
            ),
            Mark::Power { name, ip, args } => (
                "power",
                *name,
                None,
                *ip,
                None,
                false,
                Some(args_text(args)),
            ),
            Mark::Event { name, ip, args } => (
                "event",
                *name,
                None,
                *ip,
                None,
                false,
                Some(args_text(args)),
            ),
        };
        c.category.append_value(category);
        c.name.append_value(name);
        c.value.append_option(value.map(|v| v as i64));
        c.ip.append_option(ip.map(|v| v as i64));
        c.cpu.append_option(cpu.map(|v| v as i32));
        c.emulated.append_value(emulated);
        c.args.append_option(args);
        c.rows += 1;
    }
}

impl SliceSink for Dataset {
    type Error = DatasetError;

    fn needs_parents(&self) -> bool {
        true
    }

    fn thread(
        &mut self,
        pid: u32,
        tid: u32,
        name: &str,
        process: &str,
        renames: &[(u64, String)],
    ) -> Result<(), DatasetError> {
        // The thread's ordinal: in the order named.
        self.thread_index((pid, tid));
        self.threads.push(ThreadRow {
            pid,
            tid,
            name: name.to_owned(),
            process: process.to_owned(),
            renames: renames.to_vec(),
        });
        Ok(())
    }

    fn slice(&mut self, s: &Slice) -> Result<(), DatasetError> {
        let ti = self.thread_index((s.pid, s.tid));
        let th = &mut self.state[ti];
        let kind = Self::kind(th, s);
        let insns = s.insns();
        let ns = window_ns(self.opts.range, s);
        let (child_insns, child_ns) = take_sum(&mut th.children, s.id.get(), s.depth);
        let (self_insns, self_ns) = (
            insns.saturating_sub(child_insns),
            ns.saturating_sub(child_ns),
        );
        if let Some(p) = s.parent {
            add_sum(&mut th.children, p.get(), s.depth - 1, insns, ns);
        }
        let ordinal = th.ordinal;
        // Whether the calls held were cut: a gap starting where they
        // ended, or a restart's untraced time at depth 0 there.
        let call = matches!(s.kind, SliceKind::Call { .. });
        if let Some(at) = th.tail_at {
            if call && s.end == at {
                // Ended with them: held with them.
            } else if call && earlier(&s.end, &at) {
                // Held for its parent by the stacks and let go at its
                // segment's end (`ThreadStack::placing_roots`): it ended
                // before, so not with them.
            } else {
                let cut = !call
                    && s.start == at
                    && (matches!(s.kind, SliceKind::Gap { .. })
                        || (s.depth == 0 && th.tail.iter().any(|r| r.depth <= 0)));
                self.release_tail(ti, cut)?;
            }
        }
        let parent_id = s.parent.map(|p| Self::call_id(ordinal, p)).transpose()?;
        let call_id = Self::call_id(ordinal, s.id)?;
        let pseudo = self.pseudo_name(&s.kind);
        // The slice is the stacks' (`SliceSink::slice` takes it by
        // reference), so the row's function is a clone: a copy for a
        // function with a symbol (interned); for one without (counted), an
        // atomic increment, and a decrement when the row is dropped.
        let (name, addr, unknown_start) = match &s.kind {
            SliceKind::Call {
                func,
                unknown_start,
                ..
            } => (Name::Func(func.clone()), func.entry, *unknown_start),
            SliceKind::Untraced { ip, .. } => (Name::Pseudo(pseudo), *ip, false),
            SliceKind::Gap { .. } => (Name::Pseudo(pseudo), 0, false),
        };
        let row = Row {
            call_id,
            parent_id,
            depth: s.depth,
            start: s.start,
            end: s.end,
            self_insns,
            self_ns,
            name,
            addr,
            kind,
            unknown_start,
            ended_open: false,
        };
        let th = &mut self.state[ti];
        if call && th.tail_at.is_none_or(|at| at == s.end) {
            th.tail_at = Some(s.end);
            th.tail.push(row);
            return Ok(());
        }
        self.push_row(&row)
    }

    fn set_origin(&mut self, origin: u64) {
        self.opts.origin = origin;
    }

    fn mark(&mut self, pid: u32, tid: u32, at: &Stamp, mark: &Mark) -> Result<(), DatasetError> {
        if !self.opts.marks.keeps(mark) {
            self.stats.marks_dropped += 1;
            return Ok(());
        }
        if let Some((rs, re)) = self.opts.range {
            if !(rs..re).contains(&at.time) {
                self.stats.dropped += 1;
                return Ok(());
            }
        }
        if self.marks.is_none() {
            self.stats.marks_unwritten += 1;
            return Ok(());
        }
        self.stats.marks += 1;
        self.mark_row(pid, tid, at, mark);
        if self.mark_cols.rows >= self.rows_per_group {
            self.flush_marks()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
