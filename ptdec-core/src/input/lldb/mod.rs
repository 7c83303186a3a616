//! LLDB trace bundles (`trace save DIR` in LLDB: `DIR/trace.json` with the
//! raw Intel PT of each thread or each core, the cores' context-switch
//! records and the modules) as ptdec input. The bundle is turned into the
//! same [`Trace`] a perf.data gives, so that the one decode pipeline reads
//! it: an in-memory perf.data of the sideband (AUXTRACE_INFO with the TSC
//! conversion, COMM and MMAP2 records for the bundle's threads and
//! modules), the cores' context switches read from their files straight
//! into its timeline (`switches`), and
//! one AUX buffer per thread or per core that is the whole of its trace
//! file, mapped ([`AuxFiles`]): never copied, and each file mapped once
//! however many threads name it.
//!
//! The JSON is read field by field so that every complaint names the file
//! and the field (`processes[1].pid`); what cannot be used (a process
//! without a pid, a missing trace file) is left out with a warning and the
//! rest is decoded. It is read element by element, never held parsed
//! ([`json`]), and a bundle past [`MAX_DESCRIPTION_BYTES`], [`MAX_TRACES`]
//! or [`MAX_ENTRIES`] is refused: what a bundle costs is bounded by its
//! files, whatever its JSON says.

use std::collections::{BTreeMap, HashMap};
use std::io::Cursor;
use std::ops::ControlFlow;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::text::{printable, printable_path};
use serde_json::value::RawValue;
use serde_json::Value;
use sideband::attr::{flags, Attr, AttrSet, ATTR_SIZE_VER7};
use sideband::auxtrace_info::{AuxtraceInfo, IntelPtInfo};
use sideband::bytes::FileBytes;
use sideband::record::{Event, FileId, Mmap, Record, SampleId};
use sideband::sample::sample_type as st;
use sideband::writer::FileWriter;

use super::{AuxFiles, CpuId, InputError, Trace};
use json::Object;

mod json;
mod switches;

/// The bundle's description file inside a bundle folder.
pub const DESCRIPTION: &str = "trace.json";

/// The most traces (threads with an `iptTrace`, and cores) one bundle may
/// list. LLDB saves one trace file per traced thread or core; past this a
/// bundle is refused before any more trace files are opened, so that the
/// buffers, mappings and per-thread state stay bounded (a bundle of 10^6
/// threads naming one trace aborted at 3.4 GB when each copied it).
pub const MAX_TRACES: usize = 1 << 16;

/// The most processes, threads, modules and cores one bundle may list
/// (each costs a few hundred bytes of sideband and timeline, however few
/// bytes of JSON it takes).
pub const MAX_ENTRIES: usize = 1 << 20;

/// The longest path a bundle may name, in bytes: Linux's `PATH_MAX` (4096,
/// its NUL included). A longer one names no file LLDB could have saved.
pub const MAX_PATH_BYTES: usize = 4095;

/// Warnings about the bundle's processes, threads, modules or cores given
/// in full, of each kind; the others are counted in one line.
pub const WARNINGS_SHOWN: usize = 3;

/// How many of the files read from outside a bundle's folder the warning
/// names (it counts the rest).
const OUTSIDE_SHOWN: usize = 5;

/// The largest `trace.json` read (LLDB writes about 100 bytes per thread
/// and module; it is held in memory while the bundle is read).
pub const MAX_DESCRIPTION_BYTES: u64 = 64 << 20;

/// A page: the least a module without a readable file is mapped as.
const PAGE: u64 = 4096;

/// The PMU type written for the intel_pt event (any number: nothing reads
/// it but AUXTRACE_INFO's match with the attr).
const PMU_TYPE: u32 = 8;
/// Sample ids of the two events of the in-memory perf.data.
const PT_ID: u64 = 1;
const SIDEBAND_ID: u64 = 2;
/// intel_pt config terms (`/sys/bus/event_source/devices/intel_pt/format`).
const CFG_PT: u64 = 1;
const CFG_TSC: u64 = 1 << 10;
const CFG_BRANCH: u64 = 1 << 13;

/// Whether `path` is an LLDB bundle: a folder holding `trace.json` and no
/// perf `data`, or a file whose first non-blank byte is `{`. Returns the
/// description file.
pub fn bundle_description(path: &Path) -> Option<PathBuf> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.is_dir() {
        let json = path.join(DESCRIPTION);
        let data = path.join("data");
        // Whatever `trace.json` is (a FIFO, a link leading nowhere): the
        // bundle's reader says what, not "a directory without `data`".
        let json_there = std::fs::symlink_metadata(&json).is_ok();
        return (json_there && !data.exists()).then_some(json);
    }
    if !meta.is_file() {
        return None;
    }
    use std::io::Read;
    let mut head = [0u8; 64];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let first = head[..n].iter().find(|b| !b.is_ascii_whitespace())?;
    (*first == b'{').then(|| path.to_owned())
}

/// What `ptdec info` says about a bundle, and the processes decoded by
/// default (LLDB shows only the threads of the bundle's processes; a
/// per-core trace also holds other processes' code).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BundleInfo {
    /// The bundle folder (files are resolved against it).
    pub dir: PathBuf,
    /// The processes of the bundle, with their listed threads.
    pub processes: Vec<(u32, Vec<u32>)>,
    /// The cores of a per-core bundle (empty: per-thread traces).
    pub cores: Vec<u32>,
    /// `tscPerfZeroConversion` as (time_mult, time_shift, time_zero).
    pub conversion: Option<(u64, u64, u64)>,
    /// Modules: the file read (or the recorded path when not found) and
    /// the load address.
    pub modules: Vec<(PathBuf, u64)>,
    /// How many warnings there were about the bundle: the trace's
    /// `warnings` give at most [`WARNINGS_SHOWN`] about its processes,
    /// threads, modules or cores of each kind, and count the rest.
    pub warnings: usize,
}

/// One thread of the bundle and its trace (an index into the mapped trace
/// files; per-thread bundles).
#[derive(Debug, Clone)]
struct BThread {
    tid: u32,
    trace: Option<usize>,
}

/// One module: where it was loaded and the file found for it.
#[derive(Debug, Clone)]
struct BModule {
    /// The name mappings are recorded under: the file in the bundle, else
    /// the recorded system path.
    path: PathBuf,
    /// The file its segments are read from, when found.
    layout: Option<PathBuf>,
    load: u64,
    build_id: Option<Vec<u8>>,
}

#[derive(Debug, Clone)]
struct BProcess {
    pid: u32,
    threads: Vec<BThread>,
    modules: Vec<BModule>,
}

/// One core of a per-core bundle: its trace (an index into the mapped
/// trace files) and its context-switch file.
#[derive(Debug, Clone)]
struct BCore {
    id: u32,
    trace: usize,
    switches: PathBuf,
    /// The context-switch file's (device, inode), as `Reader::regular`
    /// found it: one file named for two cores is refused.
    switches_file: (u64, u64),
}

/// What a bundle's JSON says, files resolved against its folder.
#[derive(Debug, Default)]
struct Bundle {
    cpu: Option<CpuId>,
    /// (time_mult, time_shift, time_zero).
    conv: Option<(u64, u64, u64)>,
    processes: Vec<BProcess>,
    cores: Vec<BCore>,
    /// The trace files, each mapped once.
    traces: Vec<FileBytes>,
    warnings: Warnings,
}

/// What a warning is about. Those about processes, threads, modules or
/// cores past [`WARNINGS_SHOWN`] of their kind are counted, not kept: a
/// bundle of 10^5 modules none of which is on this machine gives four
/// lines, not 10^5.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bundle,
    Process,
    Thread,
    Module,
    Core,
}

impl Kind {
    const ALL: [Kind; 5] = [
        Kind::Bundle,
        Kind::Process,
        Kind::Thread,
        Kind::Module,
        Kind::Core,
    ];

    /// The field a warning of this kind is about.
    fn field(self) -> &'static str {
        match self {
            Kind::Bundle => "trace.json",
            Kind::Process => "processes[]",
            Kind::Thread => "threads[]",
            Kind::Module => "modules[]",
            Kind::Core => "cpus[]",
        }
    }
}

/// The warnings about a bundle: the first [`WARNINGS_SHOWN`] of each kind
/// (every one about the bundle as a whole), and how many of each there
/// were.
#[derive(Debug, Default)]
struct Warnings {
    /// The warnings kept, and whether each is about `trace.json` (its name
    /// goes before it) rather than a file it names.
    kept: Vec<(bool, String)>,
    /// How many were given, by [`Kind`].
    counts: [usize; 5],
}

impl Warnings {
    fn push(&mut self, kind: Kind, about_description: bool, w: String) {
        let n = &mut self.counts[kind as usize];
        *n += 1;
        if kind == Kind::Bundle || *n <= WARNINGS_SHOWN {
            self.kept.push((about_description, w));
        }
    }

    /// A warning about the bundle as a whole that goes before all others:
    /// the one `-q` shows.
    fn push_first(&mut self, w: String) {
        self.counts[Kind::Bundle as usize] += 1;
        self.kept.insert(0, (true, w));
    }

    /// How many warnings were given.
    fn total(&self) -> usize {
        self.counts.iter().sum()
    }

    /// The warnings kept, then a line per kind counting those left out.
    fn lines(self) -> impl Iterator<Item = (bool, String)> {
        let counts = self.counts;
        self.kept
            .into_iter()
            .chain(Kind::ALL.into_iter().filter_map(move |k| {
                let n = counts[k as usize];
                let hint = match k {
                    Kind::Module => "; `ptdec info` lists every module and whether it was found",
                    _ => "",
                };
                (k != Kind::Bundle && n > WARNINGS_SHOWN).then(|| {
                    (
                        true,
                        format!(
                            "and {} more warnings about {} like those above{hint}",
                            n - WARNINGS_SHOWN,
                            k.field()
                        ),
                    )
                })
            }))
    }

    /// [`Warnings::lines`], those about `trace.json` after its name.
    fn into_strings(self, file: &Path) -> Vec<String> {
        self.lines()
            .map(|(about, w)| match about {
                true => format!("{}: {w}", printable_path(file)),
                false => w,
            })
            .collect()
    }
}

/// The JSON reader: the bundle folder, the `--sysroot` folders, the
/// warnings gathered (each naming its field; the file is added after) and
/// the trace files mapped.
struct Reader<'a> {
    dir: &'a Path,
    sysroots: &'a [PathBuf],
    warnings: Warnings,
    /// The trace files mapped, and each one's (device, inode): a file named
    /// by several threads is mapped once.
    traces: Vec<FileBytes>,
    trace_ids: HashMap<(u64, u64), usize>,
    /// Traces named so far (threads with an `iptTrace`, and cores).
    named_traces: usize,
    /// Entries read so far (processes, threads, modules and cores).
    entries: usize,
    /// Why the bundle is refused, once it is past a limit: the reading
    /// stops there.
    refused: Option<String>,
    /// The files read from outside the bundle's folder (after symbolic
    /// links), by real path, each with the path as the bundle named it
    /// (`/proc/self/...` shown as such, not as ptdec's own pid) and the
    /// field that named it first: LLDB allows absolute paths, so they are
    /// read, and the summary names them. Only files used are counted.
    outside: BTreeMap<PathBuf, (PathBuf, String)>,
}

fn bad(file: &Path, what: impl Into<String>) -> InputError {
    InputError::Bundle {
        path: file.to_owned(),
        what: what.into(),
    }
}

/// A number as LLDB writes it: a JSON integer, or a string of one
/// (decimal, or hex with `0x`), as LLDB accepts since it writes 64-bit
/// values that JSON readers would round.
fn number(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => {
            let s = s.trim();
            match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => s.parse().ok(),
            }
        }
        _ => None,
    }
}

/// The member `name` of `obj`, `None` when it is missing or null.
fn member<'a>(obj: &Object<'a>, name: &str) -> Option<&'a RawValue> {
    obj.get(name).copied().filter(|v| !json::is_null(v))
}

impl Reader<'_> {
    fn warn(&mut self, kind: Kind, w: String) {
        self.warnings.push(kind, true, w);
    }

    /// A required number at `at` (`processes[0].pid`).
    fn num(&self, obj: &Object, at: &str, name: &str) -> Result<u64, String> {
        let v = member(obj, name).ok_or_else(|| format!("missing value at {at}{name}"))?;
        json::leaf(v).as_ref().and_then(number).ok_or_else(|| {
            format!(
                "expected an unsigned integer (or a string of one) at {at}{name}, found {}",
                json::shown(v)
            )
        })
    }

    fn str(&self, obj: &Object, at: &str, name: &str) -> Result<String, String> {
        let v = member(obj, name).ok_or_else(|| format!("missing value at {at}{name}"))?;
        match json::leaf(v) {
            Some(Value::String(s)) => Ok(s),
            _ => Err(format!(
                "expected a string at {at}{name}, found {}",
                json::shown(v)
            )),
        }
    }

    /// A path at `at{name}`: a string no longer than [`MAX_PATH_BYTES`].
    /// A longer one is named with its length, not as "expected a string"
    /// (which a string past [`json::leaf`]'s limit would be told).
    fn path_str(&self, v: &RawValue, at: &str, name: &str) -> Result<String, String> {
        let long = |bytes: usize| {
            format!(
                "{at}{name} is a path of {bytes} bytes, longer than a path may be \
                 ({MAX_PATH_BYTES} bytes): it names no file LLDB saved"
            )
        };
        let text = v.get().trim();
        if text.starts_with('"') && text.len() > MAX_PATH_BYTES + 2 {
            // Its length as written, escapes included, when too long to parse.
            return Err(match json::leaf(v) {
                Some(Value::String(s)) => long(s.len()),
                _ => long(text.len() - 2),
            });
        }
        match json::leaf(v) {
            Some(Value::String(s)) if s.len() > MAX_PATH_BYTES => Err(long(s.len())),
            Some(Value::String(s)) => Ok(s),
            _ => Err(format!(
                "expected a string at {at}{name}, found {}",
                json::shown(v)
            )),
        }
    }

    /// A path at `at{name}` that the bundle's data is read from (a trace
    /// or context-switch file): one that is too long refuses the bundle.
    fn data_path(&mut self, obj: &Object, at: &str, name: &str) -> Result<String, String> {
        let v = member(obj, name).ok_or_else(|| format!("missing value at {at}{name}"))?;
        self.path_str(v, at, name).inspect_err(|e| {
            if e.contains("longer than a path may be") {
                self.refuse(e);
            }
        })
    }

    /// Refuses the bundle for `what`, found in the file it names (the
    /// first reason is kept).
    fn refuse(&mut self, what: &str) {
        if self.refused.is_none() {
            self.refused = Some(format!(
                "{what}; the bundle is refused (fix or remove that entry of trace.json)"
            ));
        }
    }

    /// The array `name` of `obj` (`None`: missing or null, no elements).
    fn array<'v>(&self, obj: &Object<'v>, name: &str) -> Result<Option<&'v RawValue>, String> {
        match member(obj, name) {
            None => Ok(None),
            Some(v) if json::is_array(v) => Ok(Some(v)),
            Some(v) => Err(format!(
                "expected an array at {name}, found {}",
                json::shown(v)
            )),
        }
    }

    /// A file named by the bundle, resolved against its folder.
    fn file_at(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// Whether `path` (named by `field`) is a regular file to read: a
    /// device, FIFO or socket (`/dev/zero`, a FIFO a writer never closes)
    /// would be read for ever or block, so it is refused, by name. A file
    /// outside the bundle's folder is read and remembered for the summary.
    /// A trace or context-switch file (`data`) that is no regular file
    /// refuses the bundle: LLDB saves none such, and one left out would
    /// hide it. A module file that is none is only left out. Its metadata
    /// (links followed) when it is one.
    fn regular(
        &mut self,
        field: &str,
        path: &Path,
        data: bool,
    ) -> Result<std::fs::Metadata, String> {
        let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                format!(
                    "{field} names {}, which does not exist",
                    printable_path(path)
                )
            }
            _ if crate::inputs::is_link_loop(&e) => format!(
                "{field} names {}, which is {}: fix or remove the link",
                printable_path(path),
                crate::inputs::LINK_LOOP
            ),
            _ => format!(
                "{field} names {}, which cannot be read: {e}",
                printable_path(path)
            ),
        })?;
        if let Some(kind) = sideband::bytes::not_a_file(&meta) {
            // Where a link leads, said: `zero` alone hides `/dev/zero`.
            let link = std::fs::read_link(path)
                .map(|to| format!(" (a link to {})", printable_path(&to)))
                .unwrap_or_default();
            let e = format!(
                "{field} names {}{link}, which is {kind}, not a regular file: ptdec reads only \
                 regular files named by a bundle (name the file LLDB saved)",
                printable_path(path)
            );
            if data {
                self.refuse(&e);
            }
            return Err(e);
        }
        Ok(meta)
    }

    /// Remembers `path` (named by `field`, and used) for the summary when
    /// it is outside the bundle's folder.
    fn used(&mut self, field: &str, path: &Path) {
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        if !real.starts_with(self.dir) && self.outside.len() < MAX_ENTRIES {
            self.outside
                .entry(real)
                .or_insert_with(|| (path.to_owned(), field.to_owned()));
        }
    }

    /// Counts one more entry (process, thread, module or core) and, when
    /// `trace`, one more trace: `Break` once the bundle is past
    /// [`MAX_ENTRIES`] or [`MAX_TRACES`] (it is then refused, and the
    /// reading stops).
    fn count(&mut self, trace: bool) -> ControlFlow<()> {
        self.entries += 1;
        self.named_traces += usize::from(trace);
        if self.refused.is_some() {
            return ControlFlow::Break(());
        }
        if self.named_traces > MAX_TRACES {
            self.refused = Some(format!(
                "the bundle lists more than {MAX_TRACES} traces (threads with an iptTrace, and \
                 cores): ptdec reads at most {MAX_TRACES} per bundle, so that the buffers and \
                 memory a bundle asks for stay bounded (LLDB saves one trace file per traced \
                 thread or core); list the threads to decode in a trace.json of their own"
            ));
        } else if self.entries > MAX_ENTRIES {
            self.refused = Some(format!(
                "the bundle lists more than {MAX_ENTRIES} processes, threads, modules and cores: \
                 ptdec reads at most {MAX_ENTRIES} per bundle, so that the memory a bundle asks \
                 for stays bounded; list the processes to decode in a trace.json of their own"
            ));
        }
        match self.refused {
            Some(_) => ControlFlow::Break(()),
            None => ControlFlow::Continue(()),
        }
    }

    /// The trace file at `path` (named by `field`), mapped once however
    /// many threads name it: its index in `traces`.
    fn trace_file(&mut self, field: &str, path: &Path) -> Result<usize, String> {
        let cannot = |e: std::io::Error| {
            format!(
                "{field} names {}, which cannot be read: {e}",
                printable_path(path)
            )
        };
        self.regular(field, path, true)?;
        let file = crate::inputs::open_regular(path).map_err(cannot)?;
        let meta = file.metadata().map_err(cannot)?;
        let id = (meta.dev(), meta.ino());
        if let Some(&i) = self.trace_ids.get(&id) {
            return Ok(i);
        }
        let bytes = FileBytes::map_file(file).map_err(cannot)?;
        self.used(field, path);
        self.trace_ids.insert(id, self.traces.len());
        self.traces.push(bytes);
        Ok(self.traces.len() - 1)
    }

    fn cpu(&mut self, root: &Object) -> Option<CpuId> {
        let Some(c) = member(root, "cpuInfo") else {
            self.warn(
                Kind::Bundle,
                "missing value at cpuInfo; decoding without errata workarounds".into(),
            );
            return None;
        };
        let read = || -> Result<CpuId, String> {
            let c = json::object(c).ok_or_else(|| {
                format!("expected an object at cpuInfo, found {}", json::shown(c))
            })?;
            let vendor = self.str(&c, "cpuInfo.", "vendor")?;
            let family = self.num(&c, "cpuInfo.", "family")?;
            let model = self.num(&c, "cpuInfo.", "model")?;
            let stepping = self.num(&c, "cpuInfo.", "stepping")?;
            let range = |name: &str, v: u64| format!("cpuInfo.{name} {v} is out of range");
            Ok(CpuId {
                vendor,
                family: u16::try_from(family).map_err(|_| range("family", family))?,
                model: u8::try_from(model).map_err(|_| range("model", model))?,
                stepping: u8::try_from(stepping).map_err(|_| range("stepping", stepping))?,
            })
        };
        match read() {
            Ok(c) => {
                if let Some(w) = c.not_intel_warning("cpuInfo.vendor") {
                    self.warn(Kind::Bundle, w);
                }
                Some(c)
            }
            Err(e) => {
                self.warn(
                    Kind::Bundle,
                    format!("{e}; decoding without errata workarounds"),
                );
                None
            }
        }
    }

    fn conv(&mut self, root: &Object) -> Option<(u64, u64, u64)> {
        let c = member(root, "tscPerfZeroConversion")?;
        let at = "tscPerfZeroConversion.";
        let read = || -> Result<(u64, u64, u64), String> {
            let c = json::object(c).ok_or_else(|| {
                format!(
                    "expected an object at tscPerfZeroConversion, found {}",
                    json::shown(c)
                )
            })?;
            Ok((
                self.num(&c, at, "timeMult")?,
                self.num(&c, at, "timeShift")?,
                self.num(&c, at, "timeZero")?,
            ))
        };
        match read() {
            Ok(v) if v.1 < 64 => Some(v),
            Ok(v) => {
                self.warn(
                    Kind::Bundle,
                    format!(
                        "tscPerfZeroConversion.timeShift {} is out of range; times are TSC ticks",
                        v.1
                    ),
                );
                None
            }
            Err(e) => {
                self.warn(Kind::Bundle, format!("{e}; times are TSC ticks"));
                None
            }
        }
    }

    /// Process `i`, `Err` when it is left out. Stops early when the bundle
    /// is refused ([`Reader::count`]).
    fn process(&mut self, p: &RawValue, i: usize) -> Result<BProcess, String> {
        let at = format!("processes[{i}].");
        let Some(p) = json::object(p) else {
            return Err(format!(
                "expected an object at processes[{i}], found {}",
                json::shown(p)
            ));
        };
        let pid = self.num(&p, &at, "pid")?;
        let pid = u32::try_from(pid).map_err(|_| format!("{at}pid {pid} is out of range"))?;
        let threads_json = self.array(&p, "threads").map_err(|e| format!("{at}{e}"))?;
        let modules_json = self.array(&p, "modules").map_err(|e| format!("{at}{e}"))?;
        let mut threads = Vec::new();
        if let Some(a) = threads_json {
            json::each(a, |j, raw| {
                let t = json::object(raw);
                let has_trace = t.as_ref().is_some_and(|t| member(t, "iptTrace").is_some());
                if self.count(has_trace).is_break() {
                    return ControlFlow::Break(());
                }
                if let Some(t) = self.thread(t, raw, &format!("{at}threads[{j}].")) {
                    threads.push(t);
                }
                ControlFlow::Continue(())
            });
        }
        let mut modules = Vec::new();
        if let Some(a) = modules_json {
            json::each(a, |j, m| {
                if self.count(false).is_break() {
                    return ControlFlow::Break(());
                }
                match self.module(m, &format!("{at}modules[{j}].")) {
                    Ok(m) => modules.push(m),
                    Err(e) => self.warn(Kind::Module, format!("{e}; module left out")),
                }
                ControlFlow::Continue(())
            });
        }
        Ok(BProcess {
            pid,
            threads,
            modules,
        })
    }

    /// A thread (`at`: `processes[i].threads[j].`; `t` is `raw` when that
    /// is an object), `None` when it is left out (with a warning).
    fn thread(&mut self, t: Option<Object>, raw: &RawValue, at: &str) -> Option<BThread> {
        let Some(t) = t else {
            self.warn(
                Kind::Thread,
                format!(
                    "expected an object at {}, found {}; thread left out",
                    at.trim_end_matches('.'),
                    json::shown(raw)
                ),
            );
            return None;
        };
        let tid = match self.num(&t, at, "tid") {
            Ok(v) => v,
            Err(e) => {
                self.warn(Kind::Thread, format!("{e}; thread left out"));
                return None;
            }
        };
        let Ok(tid) = u32::try_from(tid) else {
            self.warn(
                Kind::Thread,
                format!("{at}tid {tid} is out of range; thread left out"),
            );
            return None;
        };
        let trace = match member(&t, "iptTrace") {
            None => None,
            Some(_) => {
                let file = self.data_path(&t, at, "iptTrace").and_then(|s| {
                    let f = self.file_at(&s);
                    self.trace_file(&format!("{at}iptTrace"), &f)
                });
                match file {
                    Ok(i) => Some(i),
                    Err(e) => {
                        self.warn(Kind::Thread, format!("{e}; thread {tid} left out"));
                        return None;
                    }
                }
            }
        };
        Some(BThread { tid, trace })
    }

    fn module(&mut self, m: &RawValue, at: &str) -> Result<BModule, String> {
        let Some(m) = json::object(m) else {
            return Err(format!(
                "expected an object at {}, found {}",
                at.trim_end_matches('.'),
                json::shown(m)
            ));
        };
        let system = self.str(&m, at, "systemPath")?;
        let load = self.num(&m, at, "loadAddress")?;
        // A device or FIFO, or a path too long, is said, then left as a
        // file not found.
        let mut not_file = None;
        let file = match member(&m, "file").map(|v| self.path_str(v, at, "file")) {
            Some(Ok(f)) => Some(f),
            Some(Err(e)) => {
                not_file = Some(e);
                None
            }
            None => None,
        };
        let in_bundle = match file.as_deref().map(|f| self.file_at(f)) {
            // A link (even a loop, which `exists` takes for nothing) is
            // looked at: `regular` says what it is.
            Some(p) if std::fs::symlink_metadata(&p).is_ok() => {
                match self.regular(&format!("{at}file"), &p, false) {
                    Ok(_) => {
                        self.used(&format!("{at}file"), &p);
                        Some(p)
                    }
                    Err(e) => {
                        not_file = Some(e);
                        None
                    }
                }
            }
            _ => None,
        };
        let (path, layout) = match in_bundle {
            Some(p) => (p.clone(), Some(p)),
            None => {
                // The recorded path, which ptdec's image search looks up
                // under each --sysroot and on this machine; its layout is
                // read from the first of them that has it.
                let candidates: Vec<PathBuf> = self
                    .sysroots
                    .iter()
                    .map(|r| r.join(system.trim_start_matches('/')))
                    .chain(std::iter::once(PathBuf::from(&system)))
                    .collect();
                let layout = candidates.iter().find(|p| p.is_file()).cloned();
                // One that exists but is a device, FIFO or folder is named
                // as such, not as missing.
                let odd = candidates.iter().find_map(|p| {
                    let kind = sideband::bytes::not_a_file(&std::fs::metadata(p).ok()?)?;
                    Some(format!(
                        "{} is {kind}, not a regular file",
                        printable_path(p)
                    ))
                });
                let what = match &file {
                    _ if not_file.is_some() => not_file.take().unwrap_or_default(),
                    Some(f) => format!(
                        "{at}file names {}, which does not exist",
                        printable_path(&self.file_at(f))
                    ),
                    None => format!("{at}file is not given"),
                };
                let system_shown = printable(&system);
                match (&layout, odd) {
                    (Some(l), _) => self.warn(
                        Kind::Module,
                        format!("{what}; using {} for {system_shown}", printable_path(l)),
                    ),
                    (None, Some(odd)) => self.warn(
                        Kind::Module,
                        format!(
                            "{what}, and {odd}: the code of {system_shown} cannot be decoded \
                             (give --sysroot DIR holding {system_shown})"
                        ),
                    ),
                    (None, None) => self.warn(
                        Kind::Module,
                        format!(
                            "{what}, and {system_shown} is neither under a --sysroot nor on \
                             this machine: its code cannot be decoded (give --sysroot DIR \
                             holding {system_shown})",
                        ),
                    ),
                }
                (PathBuf::from(&system), layout)
            }
        };
        // Where the module ends: past the top of the address space, its
        // mappings wrapped round to address 0 (a loadAddress of 2^64-1
        // was taken, and its code never found).
        let size = layout
            .as_deref()
            .and_then(|l| std::fs::metadata(l).ok())
            .map_or(PAGE, |m| m.len().max(1));
        if load.checked_add(size).is_none() {
            return Err(format!(
                "{at}loadAddress {load:#x} of {} puts its {} {size} bytes past the top of the \
                 address space (2^64): not an address LLDB records (fix {at}loadAddress)",
                printable(&system),
                if layout.is_some() {
                    "file's"
                } else {
                    "first page's"
                },
            ));
        }
        let build_id = self.build_id(member(&m, "uuid").and_then(json::leaf), at, &path);
        Ok(BModule {
            path,
            layout,
            load,
            build_id,
        })
    }

    /// A module's build-id from its `uuid` (at `at`, for the module read
    /// from `path`): hex digits, `-` between them ignored. One that is not
    /// is a warning that the file is used unchecked.
    fn build_id(&mut self, uuid: Option<Value>, at: &str, path: &Path) -> Option<Vec<u8>> {
        match uuid {
            Some(Value::String(u)) => {
                let hex: String = u.chars().filter(|c| *c != '-').collect();
                // Only ASCII hex digits: a multi-byte character would be
                // cut in two by the pairs below.
                let hex_only = hex.chars().all(|c| c.is_ascii_hexdigit());
                let bytes: Option<Vec<u8>> = (hex_only && hex.len() % 2 == 0 && hex.len() <= 40)
                    .then(|| {
                        (0..hex.len())
                            .step_by(2)
                            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
                            .collect()
                    })
                    .flatten();
                let id = bytes.filter(|b| !b.is_empty());
                if id.is_none() && !u.is_empty() {
                    self.warn(
                        Kind::Module,
                        format!(
                            "{at}uuid \"{}\" is not a build-id (up to 20 bytes in hex digits): \
                             {} is used without checking that it is the file traced",
                            printable(&crate::text::cut(&u, 80)),
                            printable_path(path)
                        ),
                    );
                }
                id
            }
            Some(Value::Null) | None => None,
            Some(other) => {
                self.warn(
                    Kind::Module,
                    format!(
                        "{at}uuid is {}, not a string of hex digits: {} is used without \
                         checking that it is the file traced",
                        printable(&crate::text::cut(&other.to_string(), 80)),
                        printable_path(path)
                    ),
                );
                None
            }
        }
    }

    fn core(&mut self, c: &RawValue, i: usize) -> Result<BCore, String> {
        let at = format!("cpus[{i}].");
        let Some(c) = json::object(c) else {
            return Err(format!(
                "expected an object at cpus[{i}], found {}",
                json::shown(c)
            ));
        };
        let id = self.num(&c, &at, "id")?;
        let id = u32::try_from(id).map_err(|_| format!("{at}id {id} is out of range"))?;
        let trace = self.data_path(&c, &at, "iptTrace")?;
        let trace = self.file_at(&trace);
        let switches = self.data_path(&c, &at, "contextSwitchTrace")?;
        let switches = self.file_at(&switches);
        let meta = self.regular(&format!("{at}contextSwitchTrace"), &switches, true)?;
        let trace = self.trace_file(&format!("{at}iptTrace"), &trace)?;
        self.used(&format!("{at}contextSwitchTrace"), &switches);
        Ok(BCore {
            id,
            trace,
            switches,
            switches_file: (meta.dev(), meta.ino()),
        })
    }
}

/// Reads `trace.json`, refusing one past [`MAX_DESCRIPTION_BYTES`].
fn read_description(file: &Path) -> Result<Vec<u8>, InputError> {
    use std::io::Read;
    let io = |source| InputError::Io {
        path: file.to_owned(),
        source,
    };
    let f = crate::inputs::open_regular(file).map_err(|e| match std::fs::metadata(file) {
        Ok(m) if !m.is_file() && e.kind() == std::io::ErrorKind::InvalidInput => {
            let link = std::fs::read_link(file)
                .map(|to| format!(" (a link to {})", printable_path(&to)))
                .unwrap_or_default();
            bad(
                file,
                format!(
                    "it is {}{link}, not a regular file: ptdec reads an LLDB bundle's \
                         description only from a file (put there the trace.json LLDB's `trace \
                         save` wrote)",
                    crate::input::file_kind(&m)
                ),
            )
        }
        _ => io(e),
    })?;
    let too_big = |n: u64| {
        bad(
            file,
            format!(
                "{n} bytes: ptdec reads a trace.json of at most {} MiB (LLDB writes about 100 \
                 bytes per thread and module); is this an LLDB trace bundle's description?",
                MAX_DESCRIPTION_BYTES >> 20
            ),
        )
    };
    let len = f.metadata().map_err(io)?.len();
    if len > MAX_DESCRIPTION_BYTES {
        return Err(too_big(len));
    }
    let mut text = Vec::with_capacity(len as usize);
    f.take(MAX_DESCRIPTION_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(io)?;
    if text.len() as u64 > MAX_DESCRIPTION_BYTES {
        return Err(too_big(text.len() as u64));
    }
    Ok(text)
}

/// `text`, the bundle description `file`, checked as JSON whole (not
/// parsed: its parts are read one by one): its top-level object.
fn json_root<'t>(file: &Path, text: &'t [u8]) -> Result<Object<'t>, InputError> {
    let root: &RawValue = serde_json::from_slice(text).map_err(|e| {
        let how = if e.is_eof() {
            "the JSON ends early (a cut file?)"
        } else {
            "not valid JSON"
        };
        bad(
            file,
            format!(
                "{how} at line {} column {}: {e}; expected an LLDB trace bundle (`trace save`)",
                e.line(),
                e.column()
            ),
        )
    })?;
    json::object(root).ok_or_else(|| {
        bad(
            file,
            "expected a JSON object: an LLDB trace bundle (`trace save`)",
        )
    })
}

/// Reads and checks `trace.json`; fatal only when nothing can be decoded,
/// or when the bundle is past [`MAX_TRACES`] or [`MAX_ENTRIES`].
fn read_bundle(file: &Path, dir: &Path, sysroots: &[PathBuf]) -> Result<Bundle, InputError> {
    let text = read_description(file)?;
    let root = json_root(file, &text)?;
    let mut r = Reader {
        dir,
        sysroots,
        warnings: Warnings::default(),
        traces: Vec::new(),
        trace_ids: HashMap::new(),
        named_traces: 0,
        entries: 0,
        refused: None,
        outside: BTreeMap::new(),
    };
    match member(&root, "type") {
        Some(v) if json::leaf(v) == Some(Value::String("intel-pt".into())) => {}
        Some(v) => {
            return Err(bad(
                file,
                format!(
                    "field `type` is {}, not \"intel-pt\": ptdec decodes only LLDB's Intel PT \
                     bundles",
                    json::shown(v)
                ),
            ))
        }
        None => {
            return Err(bad(
                file,
                "missing value at type (\"intel-pt\" in an LLDB trace bundle)",
            ))
        }
    }
    let mut b = Bundle {
        cpu: r.cpu(&root),
        conv: r.conv(&root),
        ..Bundle::default()
    };
    if member(&root, "kernel").is_some() {
        r.warn(
            Kind::Bundle,
            "the kernel section is not read; kernel code is not decoded".into(),
        );
    }
    let processes = r.array(&root, "processes").map_err(|e| bad(file, e))?;
    let cores = r.array(&root, "cpus").map_err(|e| bad(file, e))?;
    let (mut listed_processes, mut listed_cores) = (0, 0);
    if let Some(a) = processes {
        json::each(a, |i, p| {
            listed_processes += 1;
            if r.count(false).is_break() {
                return ControlFlow::Break(());
            }
            let p = r.process(p, i);
            if r.refused.is_some() {
                // Cut short by a limit: the bundle is refused.
                return ControlFlow::Break(());
            }
            match p {
                Ok(p) => b.processes.push(p),
                Err(e) => r.warn(Kind::Process, format!("{e}; process left out")),
            }
            ControlFlow::Continue(())
        });
    }
    if let Some(a) = cores.filter(|_| r.refused.is_none()) {
        // Each core once: a second entry of one id decoded its trace again
        // into the same threads (twice the instructions, silently).
        let mut seen: HashMap<u32, usize> = HashMap::new();
        // Each core's context switches in a file of its own: one file
        // named for many cores was mapped and read again for each (about
        // 9 MB a core; 2,000 entries of a 223 KB trace.json ran out of
        // memory), and no two cores switch alike.
        let mut switch_files: HashMap<(u64, u64), usize> = HashMap::new();
        json::each(a, |i, c| {
            listed_cores += 1;
            if r.count(true).is_break() {
                return ControlFlow::Break(());
            }
            match r.core(c, i) {
                Ok(c) => {
                    if let Some(first) = seen.insert(c.id, i) {
                        r.refused = Some(format!(
                            "cpus[{i}].id {} is cpus[{first}]'s too: a core is listed once, \
                             with its trace and context switches; remove the other entry",
                            c.id
                        ));
                        return ControlFlow::Break(());
                    }
                    if let Some(first) = switch_files.insert(c.switches_file, i) {
                        r.refused = Some(format!(
                            "cpus[{i}].contextSwitchTrace is the file cpus[{first}] names too: \
                             each core's context switches are a file of its own; give each core \
                             its file (LLDB's `trace save` writes one per core)"
                        ));
                        return ControlFlow::Break(());
                    }
                    b.cores.push(c)
                }
                Err(e) => r.warn(Kind::Core, format!("{e}; core left out")),
            }
            ControlFlow::Continue(())
        });
    }
    if let Some(e) = r.refused {
        return Err(bad(file, e));
    }
    same_tid_in_two_processes(&b.processes).map_err(|e| bad(file, e))?;
    let per_thread = b
        .processes
        .iter()
        .flat_map(|p| &p.threads)
        .any(|t| t.trace.is_some());
    if !per_thread && b.cores.is_empty() {
        let why = if listed_processes == 0 && listed_cores == 0 {
            "the bundle lists no process (processes) and no core (cpus)".to_string()
        } else {
            "no thread (processes[].threads[].iptTrace) or core (cpus[]) has a readable trace"
                .to_string()
        };
        let mut what = why;
        if r.warnings.total() > 0 {
            let all: Vec<String> = r.warnings.lines().map(|(_, w)| w).collect();
            what = format!("{what}: {}", all.join("; "));
        }
        return Err(bad(file, what));
    }
    if per_thread && !b.cores.is_empty() {
        r.warn(
            Kind::Bundle,
            "both per-thread (threads[].iptTrace) and per-core (cpus) traces; only the per-core \
             traces are decoded"
                .into(),
        );
    }
    // First, so that `-q` (which shows the first warning) names them too.
    if let Some(w) = outside_warning(&r.outside, dir) {
        r.warnings.push_first(w);
    }
    b.warnings = r.warnings;
    b.traces = r.traces;
    Ok(b)
}

/// A tid listed under two pids, or twice under one: refused, naming it.
/// A thread belongs to one process (its pid is its thread group), so the
/// bundle cannot be right, and merging them (the timeline knows a thread
/// by its tid) gave the second process the first's thread silently; a
/// thread listed twice had its trace decoded twice into it (twice the
/// instructions, silently).
fn same_tid_in_two_processes(processes: &[BProcess]) -> Result<(), String> {
    let mut pid_of: HashMap<u32, u32> = HashMap::new();
    for p in processes {
        for t in &p.threads {
            match pid_of.insert(t.tid, p.pid) {
                Some(other) if other != p.pid => {
                    return Err(format!(
                        "tid {} is listed under two processes, pid {other} and pid {} \
                         (processes[].threads[].tid): a thread belongs to one process; remove \
                         it from the one it does not belong to",
                        t.tid, p.pid
                    ));
                }
                Some(_) => {
                    return Err(format!(
                        "tid {} is listed twice under pid {} (processes[].threads[].tid): a \
                         thread is listed once, with its trace; remove the other entry",
                        t.tid, p.pid
                    ));
                }
                None => {}
            }
        }
    }
    Ok(())
}

/// Where a module file's executable PT_LOAD segments are, relative to its
/// lowest PT_LOAD's page: read once per file, however many modules name it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Layout {
    /// The page of the lowest PT_LOAD.
    base: u64,
    /// Executable PT_LOAD segments with bytes in the file: (address, size
    /// in the file, file offset).
    exec: Vec<(u64, u64, u64)>,
}

/// The layout of the ELF at `path`, or `None` when it cannot be read here
/// or is not an ELF with PT_LOAD segments. The file is mapped, so only its
/// headers are read in.
fn read_layout(path: &Path) -> Option<Layout> {
    let data = crate::inputs::open_regular(path)
        .and_then(FileBytes::map_file)
        .ok()?;
    let elf = object::File::parse(&*data).ok()?;
    use object::{Object, ObjectSegment, SegmentFlags};
    let loads: Vec<_> = elf.segments().collect();
    let base = loads.iter().map(|s| s.address() & !(PAGE - 1)).min()?;
    let exec = loads
        .iter()
        .filter(|s| match s.flags() {
            SegmentFlags::Elf { p_flags } => p_flags & 1 != 0,
            _ => true,
        })
        .map(|s| (s.address(), s.file_range().1, s.file_range().0))
        .filter(|&(_, size, _)| size > 0)
        .collect();
    Some(Layout { base, exec })
}

/// The executable PT_LOAD segments of a module loaded at `load` (LLDB's
/// load address: where the lowest PT_LOAD's page goes) whose file has
/// `layout`, as (address, length, file offset). A file that cannot be
/// read here (ptdec's image search may still find it by build-id) is
/// mapped linearly from `load` (offset 0), which is where the code of an
/// ELF laid out by the usual linkers sits, up to `next` (the next module's
/// load address) and at most 1 GiB.
fn segments(layout: Option<&Layout>, load: u64, next: Option<u64>) -> Vec<(u64, u64, u64)> {
    // Never past the top of the address space (`Reader::module` refuses a
    // module that does not fit below it).
    let room = 0u64.wrapping_sub(load);
    let len = next.map_or(1 << 30, |n| n.saturating_sub(load).min(1 << 30));
    let len = len.max(PAGE);
    let linear = vec![(load, if room == 0 { len } else { len.min(room) }, 0)];
    let Some(layout) = layout.filter(|l| !l.exec.is_empty()) else {
        return linear;
    };
    let bias = load.wrapping_sub(layout.base);
    layout
        .exec
        .iter()
        .map(|&(address, size, off)| {
            let start = address.wrapping_add(bias) & !(PAGE - 1);
            let end = address.wrapping_add(bias).wrapping_add(size);
            (start, end.div_ceil(PAGE) * PAGE - start, off & !(PAGE - 1))
        })
        .collect()
}

/// A name for threads of a process: its first module's file name (LLDB
/// bundles name no threads).
fn process_name(p: &BProcess) -> String {
    p.modules
        .first()
        .and_then(|m| m.path.file_name())
        .map_or_else(
            || format!("pid {}", p.pid),
            |n| n.to_string_lossy().into_owned(),
        )
}

fn attrs(conv: bool) -> AttrSet {
    let sample_type = st::TID | st::TIME | st::CPU | st::IDENTIFIER;
    let pt = Attr {
        kind: PMU_TYPE,
        size: ATTR_SIZE_VER7,
        config: CFG_PT | CFG_BRANCH | if conv { CFG_TSC } else { 0 },
        sample_period_or_freq: 1,
        sample_type,
        flags: flags::SAMPLE_ID_ALL | flags::EXCLUDE_KERNEL | flags::EXCLUDE_HV,
        ..Attr::default()
    };
    let sideband = Attr {
        kind: 1,   // PERF_TYPE_SOFTWARE
        config: 9, // PERF_COUNT_SW_DUMMY
        size: ATTR_SIZE_VER7,
        sample_period_or_freq: 1,
        sample_type,
        flags: flags::SAMPLE_ID_ALL
            | flags::MMAP2
            | flags::COMM
            | flags::TASK
            | flags::CONTEXT_SWITCH
            | flags::EXCLUDE_KERNEL,
        ..Attr::default()
    };
    let mut set = AttrSet::new();
    set.push(pt, vec![PT_ID]);
    set.push(sideband, vec![SIDEBAND_ID]);
    set
}

fn sid(pid: u32, tid: u32, time: u64, cpu: u32) -> SampleId {
    SampleId {
        pid: Some(pid),
        tid: Some(tid),
        time: Some(time),
        cpu: Some(cpu),
        identifier: Some(SIDEBAND_ID),
        ..SampleId::default()
    }
}

/// Opens an LLDB bundle: `file` is its `trace.json`; modules the bundle
/// lacks are looked for under `sysroots`.
pub fn open(file: &Path, sysroots: &[PathBuf]) -> Result<Trace, InputError> {
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    // Absolute, so that the modules' recorded names are: ptdec's image
    // search takes a relative name as one under a sysroot.
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    let mut b = read_bundle(file, &dir, sysroots)?;
    let mut warnings = std::mem::take(&mut b.warnings);
    let per_cpu = !b.cores.is_empty();
    let werr = |e: sideband::Error| bad(file, format!("cannot assemble the trace: {e}"));

    let mut w = FileWriter::new(Cursor::new(Vec::new()), attrs(b.conv.is_some())).map_err(werr)?;
    w.write_event(&auxtrace_info(b.conv, per_cpu))
        .map_err(werr)?;

    // Threads and mappings at time 0: before everything, and not counted
    // in the recording's time span (ptdec's time origin).
    let build_ids = write_processes(&mut w, &b.processes).map_err(werr)?;
    // The context switches go straight into the timeline once it is
    // built (after these records, as perf's queue would deliver them from
    // this file: all timed, after the untimed): mapped and checked now.
    let switch_files: Vec<switches::CoreSwitches> = b
        .cores
        .iter()
        .filter_map(|c| switches::open(c, &mut warnings))
        .collect();

    // The traces: one buffer per core or per thread, each the whole of
    // its file, mapped.
    let buffers: Vec<(usize, Option<u32>, Option<u32>)> = if per_cpu {
        b.cores
            .iter()
            .map(|c| (c.trace, None, Some(c.id)))
            .collect()
    } else {
        b.processes
            .iter()
            .flat_map(|p| &p.threads)
            .filter_map(|t| Some((t.trace?, Some(t.tid), None)))
            .collect()
    };
    let aux = AuxFiles {
        files: std::mem::take(&mut b.traces),
        buffers,
    };
    // The in-memory perf.data holds no AUXTRACE record: its (empty)
    // AUXTRACE index is its one feature section, so that it reads as a
    // finished recording, not as one whose recorder was killed.
    w.set_feature(
        sideband::feature::id::AUXTRACE,
        sideband::feature::encode_auxtrace_index(&[]),
    )
    .map_err(werr)?;
    let bytes = w.finish().map_err(werr)?.into_inner();
    let mut trace = Trace::from_parts(FileBytes::Read(bytes), file.to_owned(), None, aux)?;
    if let Some((first, last)) = switches::apply(&mut trace.timeline, &switch_files) {
        trace.sideband_span = Some(
            trace
                .sideband_span
                .map_or((first, last), |(a, b)| (a.min(first), b.max(last))),
        );
    }
    drop(switch_files);
    trace.cpu = b.cpu.take();
    trace.build_ids = build_ids;
    // perf's wording about a kernel without time_zero does not fit a
    // bundle: said once here in the bundle's terms.
    if b.conv.is_none() {
        trace.warnings.retain(|w| !w.contains("time_zero"));
        warnings.push(
            Kind::Bundle,
            true,
            "no tscPerfZeroConversion: times are TSC ticks from the first timestamp, as \
             `ptdec raw` gives them"
                .into(),
        );
    }
    let total = warnings.total() + trace.warnings.len();
    let mut all = warnings.into_strings(file);
    all.append(&mut trace.warnings);
    trace.warnings = all;
    trace.bundle = Some(bundle_info(dir, &b, total));
    Ok(trace)
}

/// Each module's next load address above its own (`None`: none above),
/// by a binary search in the sorted loads (a scan of every module for each
/// was quadratic: 10^5 modules took 30 s, 2x10^5 159 s); and the loads
/// compared to find them, which the tests bound.
fn next_loads(modules: &[BModule]) -> (Vec<Option<u64>>, u64) {
    let mut loads: Vec<u64> = modules.iter().map(|m| m.load).collect();
    loads.sort_unstable();
    loads.dedup();
    let mut compared = 0u64;
    let nexts = modules
        .iter()
        .map(|m| {
            let i = loads.partition_point(|&l| {
                compared += 1;
                l <= m.load
            });
            loads.get(i).copied()
        })
        .collect();
    (nexts, compared)
}

/// Writes the COMM of every thread and the MMAPs of every module of
/// `processes` at time 0; returns the modules' build-ids by file name.
fn write_processes(
    w: &mut FileWriter<Cursor<Vec<u8>>>,
    processes: &[BProcess],
) -> Result<Vec<(String, Vec<u8>)>, sideband::Error> {
    let mut build_ids = Vec::new();
    let mut layouts: HashMap<PathBuf, Option<Layout>> = HashMap::new();
    for p in processes {
        let name = process_name(p);
        // The mappings' records name a thread of the process, so that the
        // pid itself is not listed as a thread when no thread has its id.
        let main_tid = p.threads.first().map_or(p.pid, |t| t.tid);
        for t in &p.threads {
            w.write_event(&Event {
                misc: 0,
                record: Record::Comm {
                    pid: p.pid,
                    tid: t.tid,
                    comm: name.clone(),
                },
                sample_id: sid(p.pid, t.tid, 0, 0),
            })?;
        }
        let (nexts, _) = next_loads(&p.modules);
        for (m, next) in p.modules.iter().zip(nexts) {
            let filename = m.path.to_string_lossy().into_owned();
            if let Some(id) = &m.build_id {
                build_ids.push((filename.clone(), id.clone()));
            }
            let layout = m.layout.as_ref().and_then(|l| {
                layouts
                    .entry(l.clone())
                    .or_insert_with(|| read_layout(l))
                    .as_ref()
            });
            for (addr, len, pgoff) in segments(layout, m.load, next) {
                w.write_event(&Event {
                    misc: 0,
                    record: Record::Mmap(Mmap {
                        pid: p.pid,
                        tid: p.pid,
                        addr,
                        len,
                        pgoff,
                        file_id: Some(FileId::Inode {
                            maj: 0,
                            min: 0,
                            ino: 0,
                            ino_generation: 0,
                        }),
                        prot: Some(5),  // PROT_READ | PROT_EXEC
                        flags: Some(2), // MAP_PRIVATE
                        filename: filename.clone(),
                    }),
                    sample_id: sid(p.pid, main_tid, 0, 0),
                })?;
            }
        }
    }
    Ok(build_ids)
}

/// What `ptdec info` says about bundle `b` in `dir`, with `warnings`
/// warnings in all.
fn bundle_info(dir: PathBuf, b: &Bundle, warnings: usize) -> BundleInfo {
    BundleInfo {
        dir,
        processes: b
            .processes
            .iter()
            .map(|p| (p.pid, p.threads.iter().map(|t| t.tid).collect()))
            .collect(),
        cores: b.cores.iter().map(|c| c.id).collect(),
        conversion: b.conv,
        modules: b
            .processes
            .iter()
            .flat_map(|p| &p.modules)
            .map(|m| (m.path.clone(), m.load))
            .collect(),
        warnings,
    }
}

/// The AUXTRACE_INFO record of a bundle with the time conversion `conv`
/// (time_mult, time_shift, time_zero), per-cpu or not.
fn auxtrace_info(conv: Option<(u64, u64, u64)>, per_cpu: bool) -> Event<'static> {
    let (time_mult, time_shift, time_zero) = conv.unwrap_or((0, 0, 0));
    let info = IntelPtInfo {
        pmu_type: u64::from(PMU_TYPE),
        time_shift,
        time_mult,
        time_zero,
        cap_user_time_zero: conv.is_some(),
        // Without a conversion the TSC term is unknown, as in `ptdec raw`:
        // times are TSC ticks when the trace has TSC packets.
        tsc_bit: if conv.is_some() { CFG_TSC } else { 0 },
        have_sched_switch: if per_cpu { 3 } else { 0 },
        per_cpu_mmaps: per_cpu,
        ..IntelPtInfo::default()
    };
    Event {
        misc: 0,
        record: Record::AuxtraceInfo(AuxtraceInfo::from_intel_pt(&info)),
        sample_id: SampleId::default(),
    }
}

/// The warning naming the files read from outside the bundle's folder
/// `dir` (`outside`: each with the field that named it), if any.
fn outside_warning(outside: &BTreeMap<PathBuf, (PathBuf, String)>, dir: &Path) -> Option<String> {
    let n = outside.len();
    if n == 0 {
        return None;
    }
    let files: Vec<String> = outside
        .iter()
        .take(OUTSIDE_SHOWN)
        .map(|(_, (p, field))| format!("{} ({field})", printable_path(p)))
        .collect();
    let more = match n > OUTSIDE_SHOWN {
        true => format!(" and {} more", n - OUTSIDE_SHOWN),
        false => String::new(),
    };
    Some(format!(
        "read {n} file{} outside the bundle's folder {}: {}{more}",
        if n == 1 { "" } else { "s" },
        printable_path(dir),
        files.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_may_be_strings() {
        assert_eq!(number(&serde_json::json!(4194304)), Some(4194304));
        assert_eq!(number(&serde_json::json!("4194304")), Some(4194304));
        assert_eq!(number(&serde_json::json!("0x400000")), Some(0x400000));
        assert_eq!(
            number(&serde_json::json!("18433473881008870804")),
            Some(18433473881008870804)
        );
        assert_eq!(number(&serde_json::json!(-1)), None);
        assert_eq!(number(&serde_json::json!("12ab")), None);
        assert_eq!(number(&serde_json::json!([1])), None);
    }

    #[test]
    fn a_module_not_found_is_mapped_up_to_the_next() {
        assert_eq!(
            segments(None, 0x400000, Some(0x500000)),
            vec![(0x400000, 0x100000, 0)]
        );
        assert_eq!(segments(None, 0x400000, None), vec![(0x400000, 1 << 30, 0)]);
    }

    /// Modules at descending loads 64 KiB apart (as
    /// `many_missing_modules_are_read_and_summarised` in
    /// decoder/tests/lldb.rs lists them).
    fn modules(n: u64) -> Vec<BModule> {
        (0..n)
            .map(|i| BModule {
                path: PathBuf::from(format!("/nonexistent/lib{i}.so")),
                layout: None,
                load: 0x7000_0000_0000 - i * 0x10000,
                build_id: None,
            })
            .collect()
    }

    /// Each module's next load is found by a binary search: counted, not
    /// timed (the time is `scripts/bench`'s business), as the loads
    /// compared. At most one more per module than log2 of the modules
    /// plus one, and twice the modules cost twice as much and one more
    /// comparison each; a scan of all the others for each module (30 s
    /// for 10^5 modules) compares n^2 and four times as many for 2n.
    #[test]
    fn next_loads_are_found_in_n_log_n() {
        let run = |n: u64| {
            let (nexts, compared) = next_loads(&modules(n));
            assert_eq!(nexts[0], None, "the first module is the highest");
            assert!(
                (1..n as usize)
                    .all(|i| nexts[i] == Some(0x7000_0000_0000 - (i as u64 - 1) * 0x10000)),
                "each module's next is the one listed before it"
            );
            compared
        };
        let n = 50_000u64;
        let (one, two) = (run(n), run(2 * n));
        let log = u64::from(64 - n.leading_zeros());
        assert!(
            one <= n * (log + 1),
            "{one} loads compared to place {n} modules"
        );
        assert!(
            two <= 2 * one + 2 * 2 * n,
            "{one} loads compared for {n} modules, {two} for {}: not n log n any more",
            2 * n
        );
    }

    #[test]
    fn a_module_is_placed_by_its_layout() {
        // Text at 0x401020 (file offset 0x1020) of an ELF whose lowest
        // PT_LOAD is at 0x400000, loaded at 0x7f0000000000.
        let layout = Layout {
            base: 0x400000,
            exec: vec![(0x401020, 0x2000, 0x1020)],
        };
        assert_eq!(
            segments(Some(&layout), 0x7f00_0000_0000, None),
            vec![(0x7f00_0000_1000, 0x3000, 0x1000)]
        );
    }

    #[test]
    fn warnings_past_three_of_a_kind_are_counted() {
        let mut w = Warnings::default();
        w.push(Kind::Bundle, true, "cpu".into());
        for i in 0..5 {
            w.push(Kind::Module, true, format!("module {i}"));
        }
        w.push(Kind::Core, false, "switches".into());
        for i in 0..4 {
            w.push(Kind::Bundle, true, format!("bundle {i}"));
        }
        assert_eq!(w.total(), 11);
        assert_eq!(
            w.into_strings(Path::new("t.json")),
            [
                "t.json: cpu",
                "t.json: module 0",
                "t.json: module 1",
                "t.json: module 2",
                "switches",
                "t.json: bundle 0",
                "t.json: bundle 1",
                "t.json: bundle 2",
                "t.json: bundle 3",
                "t.json: and 2 more warnings about modules[] like those above; `ptdec info` \
                 lists every module and whether it was found",
            ]
        );
    }

    #[test]
    fn bundles_are_told_from_perf_traces() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert_eq!(bundle_description(d), None);
        std::fs::write(d.join(DESCRIPTION), "  {\"type\": \"intel-pt\"}").unwrap();
        assert_eq!(bundle_description(d), Some(d.join(DESCRIPTION)));
        assert_eq!(
            bundle_description(&d.join(DESCRIPTION)),
            Some(d.join(DESCRIPTION))
        );
        // A trace dir with perf's data beside a trace.json is a perf trace.
        std::fs::write(d.join("data"), "PERFILE2").unwrap();
        assert_eq!(bundle_description(d), None);
        assert_eq!(bundle_description(&d.join("data")), None);
    }

    fn open_text(body: &str) -> Result<Trace, InputError> {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join(DESCRIPTION);
        std::fs::write(&f, body).unwrap();
        open(&f, &[])
    }

    /// Oddities no LLDB writes: a tid under two pids (was merged
    /// silently) or twice under one (decoded twice, silently), a path of 100,000 bytes (was "expected a string") and a
    /// trace that is a link to /dev/zero (was left out, the link unsaid)
    /// refuse the bundle, naming the field and what is wrong; a module
    /// file's path too long is said, and the module looked up by its
    /// systemPath.
    #[test]
    fn hostile_tids_and_paths_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.trace"), [0x02, 0x82].repeat(8)).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero")).unwrap();
        let open_with = |processes: &str, cpus: &str| {
            let f = dir.path().join(DESCRIPTION);
            let body = format!(
                "{{\"type\": \"intel-pt\", \"processes\": [{processes}], \"cpus\": [{cpus}]}}"
            );
            std::fs::write(&f, body).unwrap();
            open(&f, &[])
        };
        let long = "x".repeat(100_000);
        let refusals = [
            (
                "{\"pid\": 1, \"threads\": [{\"tid\": 5, \"iptTrace\": \"t.trace\"}]}, \
                 {\"pid\": 2, \"threads\": [{\"tid\": 5}]}"
                    .to_string(),
                String::new(),
                "tid 5 is listed under two processes, pid 1 and pid 2".to_string(),
            ),
            (
                "{\"pid\": 1, \"threads\": [{\"tid\": 5, \"iptTrace\": \"t.trace\"}, \
                 {\"tid\": 5, \"iptTrace\": \"t.trace\"}]}"
                    .to_string(),
                String::new(),
                "tid 5 is listed twice under pid 1".to_string(),
            ),
            (
                format!(
                    "{{\"pid\": 1, \"threads\": [{{\"tid\": 5, \"iptTrace\": \"{long}\"}}, \
                     {{\"tid\": 6, \"iptTrace\": \"t.trace\"}}]}}"
                ),
                String::new(),
                "processes[0].threads[0].iptTrace is a path of 100000 bytes, longer than a path \
                 may be (4095 bytes)"
                    .to_string(),
            ),
            (
                "{\"pid\": 1, \"threads\": [{\"tid\": 5}]}".to_string(),
                format!(
                    "{{\"id\": 0, \"iptTrace\": \"t.trace\", \"contextSwitchTrace\": \"{long}\"}}"
                ),
                "cpus[0].contextSwitchTrace is a path of 100000 bytes".to_string(),
            ),
            (
                "{\"pid\": 1, \"threads\": [{\"tid\": 5, \"iptTrace\": \"zero\"}, \
                 {\"tid\": 6, \"iptTrace\": \"t.trace\"}]}"
                    .to_string(),
                String::new(),
                "processes[0].threads[0].iptTrace names ".to_string(),
            ),
            (
                "{\"pid\": 1, \"threads\": [{\"tid\": 5}]}".to_string(),
                "{\"id\": 3, \"iptTrace\": \"t.trace\", \"contextSwitchTrace\": \"t.trace\"}, \
                 {\"id\": 3, \"iptTrace\": \"t.trace\", \"contextSwitchTrace\": \"t.trace\"}"
                    .to_string(),
                "cpus[1].id 3 is cpus[0]'s too".to_string(),
            ),
            (
                "{\"pid\": 1, \"threads\": [{\"tid\": 5}]}".to_string(),
                "{\"id\": 0, \"iptTrace\": \"t.trace\", \"contextSwitchTrace\": \"t.trace\"}, \
                 {\"id\": 1, \"iptTrace\": \"t.trace\", \"contextSwitchTrace\": \"t.trace\"}"
                    .to_string(),
                "cpus[1].contextSwitchTrace is the file cpus[0] names too".to_string(),
            ),
        ];
        for (processes, cpus, want) in refusals {
            let e = open_with(&processes, &cpus).unwrap_err().to_string();
            assert!(e.contains(&want), "{want:?} not in {e}");
            assert!(e.len() < 1000, "{e}");
        }
        let e = open_with(
            "{\"pid\": 1, \"threads\": [{\"tid\": 5, \"iptTrace\": \"zero\"}]}",
            "",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("zero (a link to /dev/zero), which is a device, not a regular file"),
            "{e}"
        );
        // A module's file: said, the rest decoded.
        let t = open_with(
            &format!(
                "{{\"pid\": 1, \"threads\": [{{\"tid\": 5, \"iptTrace\": \"t.trace\"}}], \
                 \"modules\": [{{\"systemPath\": \"/nowhere/m.so\", \"loadAddress\": 4096, \
                 \"file\": \"{long}\"}}]}}"
            ),
            "",
        )
        .unwrap();
        let w = t.warnings.join("\n");
        assert!(
            w.contains("processes[0].modules[0].file is a path of 100000 bytes"),
            "{w}"
        );
    }

    #[test]
    fn refusals_name_the_field() {
        let e = open_text("{\"type\": \"intel-pt\", \"processes\": [").unwrap_err();
        assert!(e.to_string().contains("the JSON ends early"), "{e}");
        assert!(e.to_string().contains(DESCRIPTION), "{e}");
        let e = open_text("[1, 2]").unwrap_err();
        assert!(e.to_string().contains("expected a JSON object"), "{e}");
        let e = open_text("{\"processes\": []}").unwrap_err();
        assert!(e.to_string().contains("missing value at type"), "{e}");
        let e = open_text("{\"type\": 3}").unwrap_err();
        assert!(e.to_string().contains("field `type` is 3"), "{e}");
        let e = open_text(
            "{\"type\": \"intel-pt\", \"cpuInfo\": {\"vendor\": \"GenuineIntel\", \
             \"family\": 6, \"model\": 79, \"stepping\": 1}, \
             \"processes\": [{\"pid\": 1, \"threads\": [{\"tid\": \"x\"}]}], \"cpus\": 5}",
        )
        .unwrap_err();
        assert!(e.to_string().contains("expected an array at cpus"), "{e}");
        let e = open_text(
            "{\"type\": \"intel-pt\", \"processes\": [{\"pid\": 1, \"threads\": \
             [{\"tid\": \"x\"}, {\"tid\": 2, \"iptTrace\": \"none.trace\"}]}]}",
        )
        .unwrap_err();
        let e = e.to_string();
        for want in [
            "missing value at cpuInfo",
            "expected an unsigned integer (or a string of one) at processes[0].threads[0].tid",
            "processes[0].threads[1].iptTrace names",
            "none.trace, which does not exist; thread 2 left out",
        ] {
            assert!(e.contains(want), "{want:?} not in {e}");
        }
    }
}
