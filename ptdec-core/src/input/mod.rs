//! Opening a trace: a trace dir (`DIR/data` plus `images/`, `sysroot/`,
//! `kcore_dir/` beside it), a perf dir from `perf record --kcore -o DIR`, or
//! a bare perf.data file (file or pipe format). Everything the decoding stage
//! needs is collected here in one pass over the records: the Intel PT
//! configuration, the TSC conversion, the CPU (for libipt's errata), the
//! sideband replayed into a [`Timeline`], and the AUXTRACE chunks grouped into
//! buffers and split into independently decodable [`Segment`]s. The
//! decode stage reads a [`Trace`] as a [`TraceSource`], the contract in
//! `crate::model::source`.
//!
//! The file is memory-mapped through `sideband::bytes::FileBytes` (that
//! crate's one unsafe block); this module has no unsafe code. AUXTRACE
//! payloads are kept as byte ranges into the mapping, never copied here.
//! Trace bytes that live outside the perf.data (an LLDB bundle's trace
//! files, [`AuxFiles`]) are mapped files of their own, each buffer a byte
//! range of one of them.

pub mod lldb;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sideband::attr::Attr;

/// The kernel's fixed event types end here (`PERF_TYPE_MAX`); a PMU such
/// as intel_pt gets a type past them.
const PERF_TYPE_MAX: u32 = 6;
use sideband::auxtrace_info::{AuxtraceInfo, IntelPtInfo, AUXTRACE_INTEL_PT};
use sideband::bytes::FileBytes;
use sideband::feature::Features;
use sideband::file::PerfFile;
use sideband::parse::RawRecord;
use sideband::record::{aux_flags, Event, Record, TimeConv};
use sideband::timeconv::TscConversion;
use sideband::timeline::{Replay, Timeline};

use crate::model::source::{BufferOwner, Recording, TraceSource};

/// `u32` -1 as perf writes "no cpu" / "no thread" in AUXTRACE records.
const NONE32: u32 = u32::MAX;

/// Why a trace cannot be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// The path does not exist or cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A directory that holds no `data` file.
    #[error("{path} is a directory without a `data` file: expected a trace dir (ptrec/ptsim -o DIR, perf record -o DIR) or a perf.data file")]
    NotATraceDir { path: PathBuf },
    /// A trace dir whose `data` is not a regular file (a FIFO, a device,
    /// a directory, a socket), itself or where its link points.
    #[error("{} is {kind}{}, not the perf.data file a trace dir holds: ptdec does not read it. \
             Put the recording there (ptrec/ptsim -o DIR, perf record -o DIR write it), or give \
             the perf.data file itself", path.display(), link.as_ref().map_or_else(String::new, |l| format!(" (a link to {})", l.display())))]
    DataNotAFile {
        path: PathBuf,
        /// "a FIFO", "a character device", ...
        kind: &'static str,
        /// Where `path` points, when it is a symbolic link.
        link: Option<PathBuf>,
    },
    /// The file is not perf.data, or its structure is broken (truncated, corrupt).
    #[error("{path}: {source}")]
    Perf {
        path: PathBuf,
        #[source]
        source: sideband::Error,
    },
    /// The file has no PERF_RECORD_AUXTRACE_INFO: it holds no AUX-area trace.
    #[error("{path} holds no AUX-area trace (no AUXTRACE_INFO record): record with ptrec, or `perf record -e intel_pt//`")]
    NoAuxtraceInfo { path: PathBuf },
    /// A trace cut before its AUXTRACE_INFO record: nothing to decode.
    #[error(
        "{path}: {warning}; it was cut before its AUXTRACE_INFO record, so nothing of the trace \
         is left to decode (copy or record the whole file again)"
    )]
    CutBeforeInfo { path: PathBuf, warning: String },
    /// An event of a PMU (intel_pt's kind) but no AUXTRACE_INFO and no
    /// trace data.
    #[error(
        "{path} records an event of PMU type {pmu} (as intel_pt's) but holds no AUXTRACE_INFO \
         record and no trace data: it was cut before that record (a pipe-mode recording cut \
         on a record boundary shows no other sign of it) or the record was removed, so nothing \
         of a trace is left to decode (copy or record the whole file again)"
    )]
    NoInfoForPmu { path: PathBuf, pmu: u32 },
    /// No attr: no event was recorded, or the file is cut before them.
    #[error(
        "{path} describes no event (no attr): a pipe-mode recording cut before its first \
         HEADER_ATTR record, or an empty recording; there is nothing to decode"
    )]
    NoEvents { path: PathBuf },
    /// The AUX-area trace is not Intel PT (e.g. Arm CoreSight or SPE).
    #[error("{path} holds an AUX-area trace of kind {kind}, not Intel PT (kind {AUXTRACE_INTEL_PT}); ptdec decodes only Intel PT")]
    NotIntelPt { path: PathBuf, kind: u32 },
    /// The Intel PT AUXTRACE_INFO record is malformed.
    #[error("{path}: Intel PT AUXTRACE_INFO record at offset {offset:#x}: {what}")]
    BadIntelPtInfo {
        path: PathBuf,
        offset: u64,
        what: String,
    },
    /// A trace named that is a device or socket, or a FIFO or pipe that
    /// no program writes to or that does not carry a perf.data.
    #[error("{} is {what}", path.display())]
    NotAStream { path: PathBuf, what: String },
    /// An LLDB trace bundle (`trace.json`) that cannot be read.
    #[error("{path}: {what}")]
    Bundle { path: PathBuf, what: String },
}

/// The CPU the trace was recorded on, from perf's CPUID feature
/// (`GenuineIntel,6,78,3`): libipt applies errata workarounds by it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuId {
    pub vendor: String,
    pub family: u16,
    pub model: u8,
    pub stepping: u8,
}

impl CpuId {
    /// Parses perf's `vendor,family,model,stepping` (x86's `get_cpuid` format).
    pub fn parse(s: &str) -> Option<CpuId> {
        let mut it = s.trim_end_matches('\0').split(',');
        let vendor = it.next()?.trim().to_string();
        let num = |t: Option<&str>| -> Option<u64> {
            let t = t?.trim();
            t.strip_prefix("0x")
                .map_or_else(|| t.parse().ok(), |h| u64::from_str_radix(h, 16).ok())
        };
        Some(CpuId {
            vendor,
            family: u16::try_from(num(it.next())?).ok()?,
            model: u8::try_from(num(it.next())?).ok()?,
            stepping: u8::try_from(num(it.next()).unwrap_or(0)).ok()?,
        })
    }

    pub fn is_intel(&self) -> bool {
        self.vendor == "GenuineIntel"
    }

    /// A warning when the vendor is another CPU maker's (`AuthenticAMD`):
    /// only Intel CPUs record Intel PT, so the trace is not what it says
    /// or `whence` (where the CPU was read: perf's CPUID feature, a
    /// bundle's `cpuInfo.vendor`) is wrong. It is still decoded: a copy
    /// whose CPU field alone was changed decodes whole (the decode said
    /// nothing of the vendor: no instructions, or "not Intel PT", later).
    /// LLDB's "intel" (its early schema) and "unknown" (a CPU it could not
    /// tell) are not warned of.
    pub fn not_intel_warning(&self, whence: &str) -> Option<String> {
        let v = self.vendor.trim();
        let intel_or_unsaid = self.is_intel()
            || v.is_empty()
            || v.eq_ignore_ascii_case("intel")
            || v.eq_ignore_ascii_case("unknown");
        (!intel_or_unsaid).then(|| {
            format!(
                "{whence} says the CPU is {:?}, not Intel's (GenuineIntel): only Intel CPUs \
                 record Intel PT, so this trace was not recorded as Intel PT, or {whence} is \
                 wrong. It is decoded as Intel PT all the same, without errata workarounds; on a \
                 machine without Intel PT, ptsim makes a real Intel PT trace",
                crate::text::cut(v, 40)
            )
        })
    }
}

/// One PERF_RECORD_AUXTRACE payload: a piece of one buffer's byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Offset of the AUXTRACE record in the file.
    pub record_offset: u64,
    /// Where the payload sits in the file.
    pub file_offset: usize,
    pub len: usize,
    /// Offset of the payload in the buffer's stream.
    pub aux_offset: u64,
    /// perf's reference (a TSC for snapshots).
    pub reference: u64,
}

/// Where data of a buffer is known to be missing (PERF_RECORD_AUX flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuxLoss {
    /// The stream offset after which data is missing (end of the AUX record's range).
    pub aux_offset: u64,
    /// `aux_flags::*` of the record.
    pub flags: u64,
    /// Perf time of the AUX record.
    pub time: Option<u64>,
}

/// One AUX buffer (perf's "queue"): a CPU's (per-cpu mmaps) or a thread's
/// (per-thread mmaps) stream of trace bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuxBuffer {
    /// The mmap index perf recorded (`auxtrace.idx`).
    pub idx: u32,
    pub cpu: Option<u32>,
    pub tid: Option<u32>,
    /// In stream order.
    pub chunks: Vec<Chunk>,
    /// Sorted by offset.
    pub losses: Vec<AuxLoss>,
    /// Which file holds the chunks' bytes (their `file_offset` is into
    /// it): 0 the perf.data, `k` the `k`-th of the [`AuxFiles`] the trace
    /// was opened with.
    pub file: usize,
}

/// Trace bytes kept outside the perf.data: whole files, each mapped once
/// however many buffers name it (an LLDB bundle's trace files; several
/// threads may share one). Each buffer is the whole of one file.
#[derive(Debug, Default)]
pub struct AuxFiles {
    /// The files, mapped.
    pub files: Vec<FileBytes>,
    /// Each buffer: the index of its file in `files`, its thread and its
    /// cpu.
    pub buffers: Vec<(usize, Option<u32>, Option<u32>)>,
}

pub use crate::model::source::Segment;

/// ITRACE_START: tracing of a task started (on a cpu, for per-cpu buffers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItraceStart {
    pub pid: u32,
    pub tid: u32,
    pub cpu: Option<u32>,
    pub time: Option<u64>,
}

/// An opened trace: configuration, sideband and the AUX buffers.
#[derive(Debug)]
pub struct Trace {
    /// The perf.data file read.
    pub data_path: PathBuf,
    /// The trace dir holding `images/`, `sysroot/`, `kcore_dir/` (when the
    /// input was a directory, or a file named `data` inside one).
    pub dir: Option<PathBuf>,
    bytes: FileBytes,
    /// Trace bytes outside the perf.data ([`AuxFiles`]): file `k` of
    /// [`AuxBuffer::file`] is `aux_files[k - 1]`.
    aux_files: Vec<FileBytes>,
    /// `aux_files` by address: (start of its bytes, index), sorted, to find
    /// the file a released slice belongs to.
    aux_by_addr: Vec<(usize, usize)>,
    pub pipe: bool,
    pub info: IntelPtInfo,
    /// The intel_pt event's attr (its config bits say tsc/mtc/cyc/noretcomp).
    pub pt_attr: Option<Attr>,
    /// TSC -> perf time; `None` when the recording has no usable conversion.
    pub tsc: Option<TscConversion>,
    pub cpu: Option<CpuId>,
    pub nr_cpus: Option<u32>,
    /// BUILD_ID feature entries: (file name, build-id).
    pub build_ids: Vec<(String, Vec<u8>)>,
    pub timeline: Timeline,
    pub buffers: Vec<AuxBuffer>,
    pub itrace_starts: Vec<ItraceStart>,
    /// Sum of PERF_RECORD_LOST counts (sideband records lost).
    pub lost_records: u64,
    /// AUX records with the truncated, partial or collision flag.
    pub aux_losses: u64,
    /// Perf time of the first and last sideband records with a time.
    pub sideband_span: Option<(u64, u64)>,
    /// What was odd but readable.
    pub warnings: Vec<String>,
    /// No Intel PT at all (`ptrec --sideband-only`): `info` is empty and
    /// there are no buffers; only the sideband can be described.
    pub sideband_only: bool,
    /// The folder of an LLDB trace bundle ([`crate::input::lldb`]), when the
    /// input was one (`data_path` is then its `trace.json`).
    pub bundle: Option<crate::input::lldb::BundleInfo>,
}

/// The reader's warning that the file was cut, if any: a certain cut
/// ("was cut"), or with `maybe` also a possible one ("may have been cut":
/// a header without feature sections, which some writers leave so).
pub fn cut_warning(warnings: &[String], maybe: bool) -> Option<&String> {
    warnings
        .iter()
        .find(|w| w.contains("was cut") || (maybe && w.contains("been cut")))
}

/// What a file that is not a regular file is, for a message: "a FIFO".
pub fn file_kind(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_file() {
        "a file"
    } else {
        "not a regular file"
    }
}

/// What to say of a FIFO that carries no perf.data, and where to look.
const PIPE_HOWTO: &str = "ptdec reads a pipe-mode perf.data from a FIFO or a pipe while a \
    program writes it (start `perf record -o - ... > FIFO` before ptdec, or pipe it: \
    `perf record -o - ... | ptdec /dev/stdin`); to decode a recording, give its trace dir or \
    perf.data file";

/// The perf.data at `path`: a regular file mapped, a FIFO or pipe
/// (`perf record -o -`'s pipe mode, as perf reads one) read to its end
/// while a program writes it, never waited on for a writer in `open`;
/// anything else refused by what it is.
fn read_trace_file(path: &Path) -> Result<FileBytes, InputError> {
    use std::io::Read;
    let io = |source| InputError::Io {
        path: path.to_owned(),
        source,
    };
    let not = |what: String| InputError::NotAStream {
        path: path.to_owned(),
        what,
    };
    let (file, mut head) = match crate::inputs::open_stream(path) {
        Ok(crate::inputs::Opened::File(f)) => return FileBytes::from_file(f).map_err(io),
        Ok(crate::inputs::Opened::Stream(f, head)) => (f, head),
        Err(e) if e.kind() == std::io::ErrorKind::NotConnected => {
            return Err(not(format!(
                "a FIFO or pipe that no program has open for writing: {PIPE_HOWTO}"
            )))
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
            let kind = std::fs::metadata(path).map_or("not a regular file", |m| file_kind(&m));
            return Err(not(format!(
                "{kind}, not a regular file: ptdec decodes a trace dir, a perf.data file (or one \
                 in pipe mode through a FIFO or pipe) or an LLDB bundle; give one of those"
            )));
        }
        Err(e) => return Err(io(e)),
    };
    // Up to perf.data's magic, to tell what came if it is not one.
    let mut file = file;
    let more = 8usize.saturating_sub(head.len()) as u64;
    (&mut file).take(more).read_to_end(&mut head).map_err(io)?;
    if head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        return Err(not(
            "a FIFO or pipe and what came through it is JSON, as an LLDB bundle's \
             trace.json: ptdec reads a bundle from its folder or its trace.json file (the files \
             it names are found beside it), not from a pipe; give the bundle's folder"
                .into(),
        ));
    }
    FileBytes::read_all(std::io::Cursor::new(head).chain(file)).map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidData {
            not(format!(
                "a FIFO or pipe, read as a pipe-mode perf.data: {e}; {PIPE_HOWTO}"
            ))
        } else {
            io(e)
        }
    })
}

impl Trace {
    /// Opens a trace dir, a perf dir, a perf.data file (file or pipe format)
    /// or an LLDB trace bundle (its folder or its `trace.json`).
    pub fn open(path: impl AsRef<Path>) -> Result<Trace, InputError> {
        Self::open_with(path, &[])
    }

    /// [`Trace::open`], with the `--sysroot` folders an LLDB bundle's
    /// missing modules are looked for in (their layout is read when the
    /// bundle is opened).
    pub fn open_with(path: impl AsRef<Path>, sysroots: &[PathBuf]) -> Result<Trace, InputError> {
        let path = path.as_ref();
        if let Some(json) = crate::input::lldb::bundle_description(path) {
            return crate::input::lldb::open(&json, sysroots);
        }
        let meta = std::fs::metadata(path).map_err(|source| InputError::Io {
            path: path.to_owned(),
            source,
        })?;
        let (data_path, dir) = if meta.is_dir() {
            let data = path.join("data");
            match std::fs::metadata(&data) {
                Ok(m) if m.is_file() => {}
                Ok(m) => {
                    return Err(InputError::DataNotAFile {
                        kind: file_kind(&m),
                        link: std::fs::read_link(&data).ok(),
                        path: data,
                    })
                }
                // An unsearchable directory says EACCES here: that, not
                // "no data file", is what the user needs to hear.
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(InputError::Io {
                        path: data,
                        source: e,
                    })
                }
                _ => {
                    return Err(InputError::NotATraceDir {
                        path: path.to_owned(),
                    })
                }
            }
            (data, Some(path.to_owned()))
        } else {
            let dir = (path.file_name() == Some("data".as_ref()))
                .then(|| path.parent().map(Path::to_owned))
                .flatten()
                .map(|d| {
                    if d.as_os_str().is_empty() {
                        ".".into()
                    } else {
                        d
                    }
                });
            (path.to_owned(), dir)
        };
        let bytes = read_trace_file(&data_path)?;
        Self::from_bytes(bytes, data_path, dir)
    }

    /// Reads a trace from bytes already in memory (tests, stdin).
    pub fn from_bytes(
        bytes: FileBytes,
        data_path: PathBuf,
        dir: Option<PathBuf>,
    ) -> Result<Trace, InputError> {
        Self::from_parts(bytes, data_path, dir, AuxFiles::default())
    }

    /// [`Trace::from_bytes`] for a perf.data whose trace bytes are (also)
    /// in other files: `aux`'s buffers come after the perf.data's own.
    pub fn from_parts(
        bytes: FileBytes,
        data_path: PathBuf,
        dir: Option<PathBuf>,
        aux: AuxFiles,
    ) -> Result<Trace, InputError> {
        let file = PerfFile::parse_mapped(&bytes).map_err(|source| InputError::Perf {
            path: data_path.clone(),
            source,
        })?;
        let mut warnings: Vec<String> = file.warnings().to_vec();
        let features = read_features(file.features(), &mut warnings);
        let RecordScan {
            info,
            time_conv,
            mut by_idx,
            aux_records,
            itrace_starts,
            lost_records,
            span,
            timeline,
        } = scan_records(&file, &data_path, &mut warnings)?;

        let mut next_idx = by_idx
            .last_key_value()
            .map_or(0, |(&i, _)| i.saturating_add(1));
        for (file, tid, cpu) in aux.buffers {
            let len = aux.files.get(file).map_or(0, |f| f.len());
            by_idx.insert(
                next_idx,
                AuxBuffer {
                    idx: next_idx,
                    cpu,
                    tid,
                    chunks: vec![Chunk {
                        record_offset: 0,
                        file_offset: 0,
                        len,
                        aux_offset: 0,
                        reference: 0,
                    }],
                    losses: Vec::new(),
                    file: file + 1,
                },
            );
            next_idx = next_idx.saturating_add(1);
        }

        // No AUXTRACE_INFO and no AUX data: a sideband-only recording
        // (`ptrec --sideband-only`), which `ptdec info` describes, unless
        // it was cut before its AUXTRACE_INFO.
        if info.is_none() && by_idx.is_empty() {
            refuse_cut_before_info(&file, &warnings, &data_path)?;
        }
        let sideband_only = info.is_none() && by_idx.is_empty();
        let (info_offset, info) = match info {
            Some(i) => i,
            None if sideband_only => (0, IntelPtInfo::default()),
            None => return Err(InputError::NoAuxtraceInfo { path: data_path }),
        };
        let pt_attr = intel_pt_attr(&file, &info, info_offset, sideband_only, &mut warnings);
        let tsc = tsc_conversion(&info, time_conv, sideband_only, &mut warnings);

        let aux_losses = aux_records.len() as u64;
        let buffers = assemble_buffers(
            by_idx,
            aux_records,
            info.per_cpu_mmaps,
            sideband_only,
            &mut warnings,
        );

        let pipe = file.is_pipe();
        drop(file);
        let mut aux_by_addr: Vec<(usize, usize)> = (aux.files.iter().enumerate())
            .map(|(k, f)| (f.as_ptr() as usize, k))
            .collect();
        aux_by_addr.sort_unstable();
        Ok(Trace {
            data_path,
            dir,
            bytes,
            aux_files: aux.files,
            aux_by_addr,
            pipe,
            info,
            pt_attr,
            tsc,
            cpu: features.cpu,
            nr_cpus: features.nr_cpus,
            build_ids: features.build_ids,
            timeline,
            buffers,
            itrace_starts,
            lost_records,
            aux_losses,
            sideband_span: span,
            // File names in them come from the recording.
            warnings: warnings
                .into_iter()
                .map(|w| crate::text::printable(&w).into_owned())
                .collect(),
            sideband_only,
            bundle: None,
        })
    }

    /// Whether a config term of the intel_pt event is set; `mask` is one of
    /// [`IntelPtInfo`]'s `*_bit` words (perf stores masks of config bits
    /// there). `None` without the attr or when the CPU has no such term.
    pub fn config_bit(&self, mask: u64) -> Option<bool> {
        IntelPtInfo::term_set(self.pt_attr?.config, mask)
    }

    /// The `mtc_period` the intel_pt event was opened with (libipt's
    /// `mtc_freq`), from its config and AUXTRACE_INFO's `mtc_freq_bits` mask.
    pub fn mtc_period(&self) -> Option<u8> {
        self.info.mtc_period(self.pt_attr?.config)
    }

    /// Whether the kernel was traced (the intel_pt event did not exclude it).
    pub fn kernel_traced(&self) -> bool {
        self.pt_attr
            .is_some_and(|a| a.flags & sideband::attr::flags::EXCLUDE_KERNEL == 0)
    }

    /// The buffers split into segments, in buffer then stream order.
    ///
    /// Full-trace mode: contiguous chunks are concatenated; a chunk that does
    /// not start where the previous ended (lost or overlapping data), and
    /// a lossy AUX record's end offset, start a new segment. Snapshot mode:
    /// every chunk is a snapshot of the ring and is decoded on its own (perf
    /// trims overlapping snapshots; we decode each whole).
    pub fn segments(&self) -> Vec<Segment> {
        split_segments(&self.buffers, self.info.snapshot_mode)
    }

    /// The bytes of the file that holds buffer `buffer`'s chunks
    /// ([`AuxBuffer::file`]): their `file_offset`s and a segment's pieces
    /// are ranges of it.
    pub fn buffer_file(&self, buffer: usize) -> &[u8] {
        match self.buffers.get(buffer).map_or(0, |b| b.file) {
            0 => &self.bytes,
            k => self.aux_files.get(k - 1).map_or(&[], |f| &f[..]),
        }
    }

    /// A segment's bytes (borrowed when it is one piece, else concatenated).
    pub fn segment_bytes(&self, s: &Segment) -> std::borrow::Cow<'_, [u8]> {
        let file = self.buffer_file(s.buffer);
        let get = |&(off, len): &(usize, usize)| file.get(off..off + len).unwrap_or_default();
        match s.pieces.as_slice() {
            [one] => std::borrow::Cow::Borrowed(get(one)),
            many => {
                // Piece by piece (a byte-wise collect cost 14 instructions
                // per byte: 5% of `ptbench-fast`'s count on 1 MB).
                let mut all = Vec::with_capacity(many.iter().map(|p| get(p).len()).sum());
                for p in many {
                    all.extend_from_slice(get(p));
                }
                std::borrow::Cow::Owned(all)
            }
        }
    }

    /// Drops the pages of `part` (a slice of [`Trace::buffer_file`]) from
    /// resident memory once decoded ([`FileBytes::release`]).
    pub fn release(&self, part: &[u8]) {
        // Each file checks that `part` lies inside it; the only candidate
        // among the others is the last one starting at or before `part`.
        self.bytes.release(part);
        let at = part.as_ptr() as usize;
        let i = self.aux_by_addr.partition_point(|&(start, _)| start <= at);
        if let Some(&(_, k)) = i.checked_sub(1).and_then(|i| self.aux_by_addr.get(i)) {
            self.aux_files[k].release(part);
        }
    }

    /// The perf.data's bytes (an LLDB bundle's trace files are not in it:
    /// [`Trace::buffer_file`]).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Total trace bytes in all buffers.
    pub fn trace_bytes(&self) -> u64 {
        self.buffers
            .iter()
            .flat_map(|b| &b.chunks)
            .map(|c| c.len as u64)
            .sum()
    }
}

/// The trace as the decode stage reads it.
impl TraceSource for Trace {
    fn recording(&self) -> Recording {
        let info = &self.info;
        Recording {
            per_cpu: info.per_cpu_mmaps,
            cyc: self.config_bit(info.cyc_bit),
            mtc: self.config_bit(info.mtc_bit),
            mtc_period: self.mtc_period(),
            tsc_ctc_ratio_n: info.tsc_ctc_ratio_n,
            tsc_ctc_ratio_d: info.tsc_ctc_ratio_d,
            max_non_turbo_ratio: info.max_non_turbo_ratio,
            tsc: self.tsc,
            intel_cpu: self
                .cpu
                .as_ref()
                .filter(|c| c.is_intel())
                .map(|c| (c.family, c.model, c.stepping)),
            kernel_traced: self.kernel_traced(),
        }
    }

    fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    fn buffers(&self) -> Vec<BufferOwner> {
        self.buffers
            .iter()
            .map(|b| BufferOwner {
                cpu: b.cpu,
                tid: b.tid,
            })
            .collect()
    }

    fn itrace_start_pids(&self) -> Vec<u32> {
        self.itrace_starts.iter().map(|i| i.pid).collect()
    }

    fn segments(&self) -> Vec<Segment> {
        Trace::segments(self)
    }

    fn buffer_file(&self, buffer: usize) -> &[u8] {
        Trace::buffer_file(self, buffer)
    }

    fn release(&self, part: &[u8]) {
        Trace::release(self, part)
    }

    fn build_ids(&self) -> &[(String, Vec<u8>)] {
        &self.build_ids
    }
}

/// What the header's feature sections say about the recording machine.
struct FeatureFacts {
    cpu: Option<CpuId>,
    nr_cpus: Option<u32>,
    build_ids: Vec<(String, Vec<u8>)>,
}

/// Reads the CPUID, NRCPUS and BUILD_ID features; one that is unreadable
/// or not understood is a warning, not an error.
fn read_features(features: &Features<'_>, warnings: &mut Vec<String>) -> FeatureFacts {
    let cpu = match features.cpuid() {
        Ok(Some(s)) => {
            let c = CpuId::parse(&s);
            match &c {
                None => warnings.push(format!(
                    "CPUID feature {s:?} not understood; decoding without errata workarounds"
                )),
                Some(c) => warnings.extend(c.not_intel_warning("the CPUID feature")),
            }
            c
        }
        Ok(None) => None,
        Err(e) => {
            warnings.push(format!("CPUID feature unreadable: {e}"));
            None
        }
    };
    let nr_cpus = match features.nrcpus() {
        Ok(n) => n.map(|n| n.available.max(n.online)),
        Err(e) => {
            warnings.push(format!("NRCPUS feature unreadable: {e}"));
            None
        }
    };
    let build_ids = match features.build_ids() {
        Ok(v) => v
            .unwrap_or_default()
            .into_iter()
            .map(|b| (b.filename, b.build_id))
            .collect(),
        Err(e) => {
            warnings.push(format!("BUILD_ID feature unreadable: {e}"));
            Vec::new()
        }
    };
    FeatureFacts {
        cpu,
        nr_cpus,
        build_ids,
    }
}

/// What one pass over the records collects.
#[derive(Default)]
struct RecordScan {
    /// The first AUXTRACE_INFO: its file offset and contents.
    info: Option<(u64, IntelPtInfo)>,
    time_conv: Option<TimeConv>,
    /// AUXTRACE chunks grouped by buffer, in file order.
    by_idx: BTreeMap<u32, AuxBuffer>,
    /// AUX records flagged lossy, with the cpu and tid they came from.
    aux_records: Vec<(Option<u32>, Option<u32>, AuxLoss)>,
    itrace_starts: Vec<ItraceStart>,
    lost_records: u64,
    /// Perf time of the first and last records with a time.
    span: Option<(u64, u64)>,
    /// The sideband replayed: every record but AUXTRACE.
    timeline: Timeline,
}

/// Parses every record in file order into a [`RecordScan`], replaying the
/// sideband into the timeline as it goes. Nothing is collected: a record
/// waiting in perf's ordered queue for its round is held as its offset,
/// and parsed again when it is due ([`Replay`]).
fn scan_records(
    file: &PerfFile<'_>,
    data_path: &Path,
    warnings: &mut Vec<String>,
) -> Result<RecordScan, InputError> {
    let mut scan = RecordScan::default();
    let mut replay: Replay<u64> = Replay::new();
    // Parsed once already: it parses again.
    let mut reread = Reread::new(file);
    let mut load = |offset: u64| reread.load(offset);
    // Records whose bytes do not parse (a sample id of no attr, a body
    // too short for its kind), framed whole: skipped, the first named.
    let mut damaged: Option<(String, u64)> = None;
    let mut released = 0;
    for raw in file.raw_records() {
        // The pages read are dropped (queued records are read again).
        let at = raw.offset as usize;
        if at - released >= sideband::file::RELEASE_EVERY {
            file.release_range(released, at);
            released = at;
        }
        let ev = match file.parse_raw(&raw) {
            Ok(ev) => ev,
            Err(e) => {
                damaged.get_or_insert_with(|| (e.to_string(), 0)).1 += 1;
                continue;
            }
        };
        if let Some(t) = ev.sample_id.time.filter(|&t| t != 0) {
            scan.span = Some(scan.span.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
        }
        scan.note(&raw, &ev, data_path, warnings)?;
        if !matches!(ev.record, Record::Auxtrace(_)) {
            replay.push(ev, |_| raw.offset, &mut load);
        }
    }
    scan.timeline = replay.finish(&mut load);
    let range = file.data_range();
    file.release_range(range.start as usize, range.end as usize);
    if let Some((first, n)) = damaged {
        warnings.push(format!(
            "{}: {n} damaged record{} skipped, the first: {first}; what they held (trace data, \
             a mapping, a thread's name or switch) is missing from the decode",
            data_path.display(),
            if n == 1 { "" } else { "s" }
        ));
    }
    Ok(scan)
}

/// Reads queued records again by their offset, dropping the pages read
/// every [`sideband::file::RELEASE_EVERY`] bytes of them (the final flush
/// of a file without FINISHED_ROUND reads every record again).
struct Reread<'f, 'a> {
    file: &'f PerfFile<'a>,
    /// The span of the records read since their pages were last dropped,
    /// and how many bytes they hold.
    lo: usize,
    hi: usize,
    read: usize,
}

impl<'f, 'a> Reread<'f, 'a> {
    fn new(file: &'f PerfFile<'a>) -> Self {
        Self {
            file,
            lo: usize::MAX,
            hi: 0,
            read: 0,
        }
    }

    /// The record at `offset`, parsed (it was, when first read).
    fn load(&mut self, offset: u64) -> Option<Event<'a>> {
        let raw = self.file.record_at(offset)?;
        let at = raw.offset as usize;
        self.lo = self.lo.min(at);
        self.hi = self.hi.max(at + raw.bytes.len());
        self.read += raw.bytes.len();
        if self.read >= sideband::file::RELEASE_EVERY {
            self.file.release_range(self.lo, self.hi);
            (self.lo, self.hi, self.read) = (usize::MAX, 0, 0);
        }
        self.file.parse_raw(&raw).ok()
    }
}

impl RecordScan {
    /// Takes from one record what the trace needs beyond the timeline: the
    /// Intel PT configuration, AUXTRACE chunks, TIME_CONV, lossy AUX
    /// records, ITRACE_START and LOST counts.
    fn note(
        &mut self,
        raw: &RawRecord<'_>,
        ev: &Event<'_>,
        data_path: &Path,
        warnings: &mut Vec<String>,
    ) -> Result<(), InputError> {
        match &ev.record {
            Record::AuxtraceInfo(ai) => {
                let pt = intel_pt_info(ai, raw.offset, data_path)?;
                if self.info.is_some() {
                    warnings.push(format!(
                        "a second AUXTRACE_INFO at offset {:#x} is ignored",
                        raw.offset
                    ));
                } else {
                    self.info = Some((raw.offset, pt));
                }
            }
            Record::Auxtrace(a) => {
                let file_offset = raw.offset as usize + raw.bytes.len();
                let b = self.by_idx.entry(a.idx).or_insert_with(|| AuxBuffer {
                    idx: a.idx,
                    cpu: (a.cpu != NONE32).then_some(a.cpu),
                    tid: (a.tid != NONE32).then_some(a.tid),
                    ..AuxBuffer::default()
                });
                b.chunks.push(Chunk {
                    record_offset: raw.offset,
                    file_offset,
                    len: a.data.len(),
                    aux_offset: a.offset,
                    reference: a.reference,
                });
            }
            Record::TimeConv(tc) => self.time_conv = Some(*tc),
            Record::Aux {
                aux_offset,
                aux_size,
                flags,
            } => {
                let lossy = aux_flags::TRUNCATED | aux_flags::PARTIAL | aux_flags::COLLISION;
                if flags & lossy != 0 {
                    self.aux_records.push((
                        ev.sample_id.cpu,
                        ev.sample_id.tid,
                        AuxLoss {
                            aux_offset: aux_offset.saturating_add(*aux_size),
                            flags: *flags,
                            time: ev.sample_id.time,
                        },
                    ));
                }
            }
            Record::ItraceStart { pid, tid } => self.itrace_starts.push(ItraceStart {
                pid: *pid,
                tid: *tid,
                cpu: ev.sample_id.cpu,
                time: ev.sample_id.time,
            }),
            // A count from the file: a hostile one must not overflow.
            Record::Lost { lost, .. } => {
                self.lost_records = self.lost_records.saturating_add(*lost)
            }
            _ => {}
        }
        Ok(())
    }
}

/// Reads an AUXTRACE_INFO record (at file offset `offset`) as Intel PT's;
/// another kind of AUX-area trace is an error.
fn intel_pt_info(
    ai: &AuxtraceInfo,
    offset: u64,
    data_path: &Path,
) -> Result<IntelPtInfo, InputError> {
    if ai.kind != AUXTRACE_INTEL_PT {
        return Err(InputError::NotIntelPt {
            path: data_path.to_owned(),
            kind: ai.kind,
        });
    }
    IntelPtInfo::from_words(&ai.priv_words).map_err(|m| InputError::BadIntelPtInfo {
        path: data_path.to_owned(),
        offset,
        what: m.0,
    })
}

/// The intel_pt event's attr: the one whose PMU type AUXTRACE_INFO (at
/// `info_offset`) names. Its absence is a warning unless sideband-only.
fn intel_pt_attr(
    file: &PerfFile<'_>,
    info: &IntelPtInfo,
    info_offset: u64,
    sideband_only: bool,
    warnings: &mut Vec<String>,
) -> Option<Attr> {
    let pt_attr = file
        .attrs()
        .entries()
        .iter()
        .map(|e| e.attr)
        .find(|a| u64::from(a.kind) == info.pmu_type);
    if pt_attr.is_none() && !sideband_only {
        warnings.push(format!(
            "no attr has the intel_pt PMU type {} of AUXTRACE_INFO (offset {info_offset:#x})",
            info.pmu_type
        ));
    }
    pt_attr
}

/// The TSC -> perf time conversion: AUXTRACE_INFO's, extended by TIME_CONV's
/// short-time fields, or TIME_CONV's alone when AUXTRACE_INFO has none
/// (or the recording is sideband-only). Neither usable is a warning.
fn tsc_conversion(
    info: &IntelPtInfo,
    time_conv: Option<TimeConv>,
    sideband_only: bool,
    warnings: &mut Vec<String>,
) -> Option<TscConversion> {
    match (sideband_only, TscConversion::from_intel_pt(info)) {
        (true, _) => time_conv
            .map(|tc| TscConversion::from_time_conv(&tc))
            .and_then(Result::ok),
        (false, conv) => match conv {
            Ok(c) => {
                // TIME_CONV adds the short-time extension where the kernel has it.
                match time_conv.map(|tc| TscConversion::from_time_conv(&tc)) {
                    Some(Ok(tc)) => Some(match tc.short_time() {
                        Some((cycles, mask)) => c.with_short_time(cycles, mask),
                        None => c,
                    }),
                    _ => Some(c),
                }
            }
            Err(e) => match time_conv.map(|tc| TscConversion::from_time_conv(&tc)) {
                Some(Ok(c)) => Some(c),
                _ => {
                    warnings.push(format!("{e}"));
                    None
                }
            },
        },
    }
}

/// Turns the scanned buffers into [`Trace::buffers`]: each lossy AUX record
/// attached to its buffer (by cpu for per-cpu mmaps, else by tid), chunks
/// and losses sorted by stream offset.
fn assemble_buffers(
    by_idx: BTreeMap<u32, AuxBuffer>,
    aux_records: Vec<(Option<u32>, Option<u32>, AuxLoss)>,
    per_cpu: bool,
    sideband_only: bool,
    warnings: &mut Vec<String>,
) -> Vec<AuxBuffer> {
    let mut buffers: Vec<AuxBuffer> = by_idx.into_values().collect();
    for (cpu, tid, loss) in aux_records {
        let hit = buffers.iter_mut().find(|b| {
            if per_cpu {
                cpu.is_some() && b.cpu == cpu
            } else {
                tid.is_some() && b.tid == tid
            }
        });
        match hit {
            Some(b) => b.losses.push(loss),
            None => warnings.push(format!(
                "an AUX record with flags {:#x} (cpu {cpu:?}, tid {tid:?}) matches no AUX buffer",
                loss.flags
            )),
        }
    }
    for b in &mut buffers {
        b.chunks.sort_by_key(|c| c.aux_offset);
        b.losses.sort_by_key(|l| l.aux_offset);
    }
    if buffers.is_empty() && !sideband_only {
        let cut = cut_warning(warnings, true).is_some();
        warnings.push(
            match cut {
                true => "the file has AUXTRACE_INFO but no AUXTRACE data: it was cut before it",
                false => "the file has AUXTRACE_INFO but no AUXTRACE data (nothing was traced)",
            }
            .into(),
        );
    }
    buffers
}

/// A file without AUXTRACE_INFO or AUX data whose attrs have an event of
/// a PMU (a dynamic type, past the kernel's fixed ones, as intel_pt's; a
/// sideband-only recording has only a software event) is not
/// sideband-only: it was cut before its AUXTRACE_INFO (a pipe-mode file
/// cut on a record boundary shows no other sign of it), or that record
/// was removed. There is nothing of a trace to decode. Nor in a file with
/// no attr at all (a pipe-mode file cut before its first HEADER_ATTR).
fn refuse_cut_before_info(
    file: &PerfFile<'_>,
    warnings: &[String],
    data_path: &Path,
) -> Result<(), InputError> {
    if file.attrs().is_empty() {
        return Err(InputError::NoEvents {
            path: data_path.to_owned(),
        });
    }
    let Some(pmu) = file
        .attrs()
        .entries()
        .iter()
        .map(|e| e.attr.kind)
        .find(|&k| k >= PERF_TYPE_MAX)
    else {
        return Ok(());
    };
    let cut = cut_warning(warnings, false);
    Err(match cut {
        Some(w) => InputError::CutBeforeInfo {
            path: data_path.to_owned(),
            warning: w.clone(),
        },
        None => InputError::NoInfoForPmu {
            path: data_path.to_owned(),
            pmu,
        },
    })
}

/// See [`Trace::segments`].
fn split_segments(buffers: &[AuxBuffer], snapshot: bool) -> Vec<Segment> {
    let mut out = Vec::new();
    for (bi, b) in buffers.iter().enumerate() {
        if snapshot {
            out.extend(b.chunks.iter().filter(|c| c.len > 0).map(|c| Segment {
                buffer: bi,
                aux_offset: c.aux_offset,
                pieces: vec![(c.file_offset, c.len)],
                after_loss: false,
                before_loss: false,
            }));
            continue;
        }
        let mut cur: Option<Segment> = None;
        let mut after_loss = false;
        let mut prev_end: Option<u64> = None;
        let mut close = |cur: &mut Option<Segment>, after_loss: &mut bool| {
            if let Some(mut s) = cur.take() {
                s.before_loss = true;
                out.push(s);
            }
            *after_loss = true;
        };
        for c in b.chunks.iter().filter(|c| c.len > 0) {
            let (c_start, c_end) = (c.aux_offset, c.aux_offset + c.len as u64);
            if prev_end.is_some_and(|e| e != c_start) {
                close(&mut cur, &mut after_loss);
            }
            let cuts = b
                .losses
                .iter()
                .map(|l| l.aux_offset)
                .filter(|&o| o >= c_start && o <= c_end);
            let mut pos = c_start;
            for cut in cuts.chain(std::iter::once(u64::MAX)) {
                let to = cut.min(c_end);
                if to > pos {
                    let s = cur.get_or_insert_with(|| Segment {
                        buffer: bi,
                        aux_offset: pos,
                        pieces: Vec::new(),
                        after_loss: std::mem::take(&mut after_loss),
                        before_loss: false,
                    });
                    s.pieces.push((
                        c.file_offset + (pos - c_start) as usize,
                        (to - pos) as usize,
                    ));
                    pos = to;
                }
                if cut != u64::MAX {
                    close(&mut cur, &mut after_loss);
                }
            }
            prev_end = Some(c_end);
        }
        if let Some(s) = cur {
            out.push(s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(aux_offset: u64, len: usize) -> Chunk {
        Chunk {
            record_offset: 0,
            file_offset: 1000 + aux_offset as usize,
            len,
            aux_offset,
            reference: 0,
        }
    }

    fn loss(aux_offset: u64) -> AuxLoss {
        AuxLoss {
            aux_offset,
            flags: aux_flags::TRUNCATED,
            time: None,
        }
    }

    #[test]
    fn contiguous_chunks_join_and_losses_split() {
        let b = AuxBuffer {
            chunks: vec![
                chunk(0, 100),
                chunk(100, 50),
                chunk(200, 10),
                chunk(210, 90),
            ],
            losses: vec![loss(120), loss(210)],
            ..AuxBuffer::default()
        };
        let segs = split_segments(&[b], false);
        let view: Vec<_> = segs
            .iter()
            .map(|s| (s.aux_offset, s.pieces.clone(), s.after_loss, s.before_loss))
            .collect();
        assert_eq!(
            view,
            vec![
                (0, vec![(1000, 100), (1100, 20)], false, true),
                (120, vec![(1120, 30)], true, true),
                (200, vec![(1200, 10)], true, true),
                (210, vec![(1210, 90)], true, false),
            ]
        );
        assert_eq!(segs[0].len(), 120);
    }

    #[test]
    fn snapshots_are_decoded_one_by_one() {
        let b = AuxBuffer {
            chunks: vec![chunk(0, 100), chunk(50, 100), chunk(400, 0)],
            ..AuxBuffer::default()
        };
        let segs = split_segments(&[b], true);
        assert_eq!(segs.len(), 2);
        assert!(segs.iter().all(|s| !s.after_loss && !s.before_loss));
    }

    #[test]
    fn cpuid_strings() {
        let c = CpuId::parse("GenuineIntel,6,78,3").unwrap();
        assert_eq!((c.family, c.model, c.stepping), (6, 78, 3));
        assert!(c.is_intel());
        let c = CpuId::parse("GenuineIntel,6,151,2\0\0").unwrap();
        assert_eq!(c.model, 151);
        assert!(CpuId::parse("AuthenticAMD").is_none());
        assert!(CpuId::parse("x,1,999,1").is_none());
    }

    #[test]
    fn another_vendors_cpu_is_warned_of() {
        let w = CpuId::parse("AuthenticAMD,25,33,0")
            .unwrap()
            .not_intel_warning("the CPUID feature")
            .unwrap();
        assert!(
            w.contains("the CPUID feature says the CPU is \"AuthenticAMD\"")
                && w.contains("only Intel CPUs record Intel PT"),
            "{w}"
        );
        for said in [
            "GenuineIntel,6,78,3",
            "unknown,6,78,3",
            "Unknown,0,0,0",
            "intel,6,1,1",
        ] {
            let c = CpuId::parse(said).unwrap();
            assert_eq!(c.not_intel_warning("x"), None, "{said}");
        }
    }

    #[test]
    fn missing_and_wrong_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let e = Trace::open(dir.path().join("nope")).unwrap_err();
        assert!(matches!(e, InputError::Io { .. }), "{e}");
        let e = Trace::open(dir.path()).unwrap_err();
        assert!(matches!(e, InputError::NotATraceDir { .. }), "{e}");
        let f = dir.path().join("x.data");
        std::fs::write(&f, b"this is not perf data at all").unwrap();
        let e = Trace::open(&f).unwrap_err();
        assert!(matches!(e, InputError::Perf { .. }), "{e}");
        assert!(e.to_string().contains("x.data"), "{e}");
    }
}
