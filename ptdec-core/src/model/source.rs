//! What the decode stage takes from the source stage: an opened trace
//! ([`TraceSource`], `crate::input::Trace`) with the images of its code
//! ([`CodeImages`], `crate::images::ImageStore`), or for raw PT the
//! sections of one image ([`RawSection`], `crate::raw`) and its perf_event
//! sideband replayed at libipt's events ([`RawSideband`], `crate::pevent`).
//! The source modules implement these; the decode stage sees only them.

use std::path::PathBuf;
use std::sync::Arc;

use sideband::timeconv::TscConversion;
use sideband::timeline::{MappedFile, Timeline};

/// A file section of a raw decode's image: `size` bytes at `offset` of
/// `path`, loaded at `vaddr` (ptxed's `--raw` and `--elf` sections).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSection {
    pub path: std::path::PathBuf,
    pub offset: u64,
    pub size: u64,
    pub vaddr: u64,
}

/// A stretch of one AUX buffer's bytes that is decoded with one libipt
/// decoder: contiguous chunks concatenated, split where data was lost
/// (and, in snapshot mode, one per snapshot). Its bytes are `pieces`,
/// ranges of the buffer's file ([`TraceSource::buffer_file`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Index into the trace's buffers ([`TraceSource::buffers`]).
    pub buffer: usize,
    /// Stream offset of the first byte.
    pub aux_offset: u64,
    /// File ranges `(offset, len)` whose concatenation is the segment.
    pub pieces: Vec<(usize, usize)>,
    /// Data was lost just before this segment (a gap in the offsets, or an
    /// AUX record flagged truncated/partial/collision).
    pub after_loss: bool,
    /// Data was lost just after this segment.
    pub before_loss: bool,
}

impl Segment {
    pub fn len(&self) -> usize {
        self.pieces.iter().map(|p| p.1).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whose trace an AUX buffer holds: a CPU's (per-cpu buffers), a
/// thread's, or both known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferOwner {
    pub cpu: Option<u32>,
    pub tid: Option<u32>,
}

/// How a trace was recorded, as far as decoding it goes: libipt's
/// configuration and the clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recording {
    /// Per-cpu buffers (else per-thread).
    pub per_cpu: bool,
    /// Whether the intel_pt event asked for CYC packets (`None`: its
    /// config is unknown).
    pub cyc: Option<bool>,
    /// Whether it asked for MTC packets (`None`: unknown).
    pub mtc: Option<bool>,
    /// Its `mtc_period` (libipt's `mtc_freq`), when known.
    pub mtc_period: Option<u8>,
    /// TSC:CTC ratio numerator / denominator (CPUID 0x15 EBX / EAX).
    pub tsc_ctc_ratio_n: u64,
    pub tsc_ctc_ratio_d: u64,
    /// The max non-turbo ratio (calibrates CYC).
    pub max_non_turbo_ratio: u64,
    /// TSC -> perf time; `None` when the recording has no usable one.
    pub tsc: Option<TscConversion>,
    /// The CPU it ran on, when it is an Intel one: (family, model,
    /// stepping), for libipt's errata workarounds.
    pub intel_cpu: Option<(u16, u8, u8)>,
    /// The kernel was traced (the intel_pt event did not exclude it).
    pub kernel_traced: bool,
}

/// An opened trace as the decode stage reads it: how it was recorded, its
/// process timeline, its AUX buffers cut into segments, and their bytes.
/// `Sync`: the decode workers share it.
pub trait TraceSource: Sync {
    /// How it was recorded.
    fn recording(&self) -> Recording;
    /// The process timeline its sideband replays into.
    fn timeline(&self) -> &Timeline;
    /// Its AUX buffers, in order: whose trace each holds.
    fn buffers(&self) -> Vec<BufferOwner>;
    /// The pids of its ITRACE_START records (a task whose tracing began).
    fn itrace_start_pids(&self) -> Vec<u32>;
    /// The buffers split into segments, in buffer then stream order.
    fn segments(&self) -> Vec<Segment>;
    /// The bytes of the file that holds buffer `buffer`'s segments: their
    /// pieces are ranges of it.
    fn buffer_file(&self, buffer: usize) -> &[u8];
    /// `part` (of a [`TraceSource::buffer_file`]) is decoded and will not
    /// be read again: a mapped file may drop its pages.
    fn release(&self, part: &[u8]);
    /// The build-ids the recording names for files: (file name, build-id).
    fn build_ids(&self) -> &[(String, Vec<u8>)];
}

/// A file found for a mapping, as the decoder loads it: the file and its
/// size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeFile {
    pub path: PathBuf,
    pub size: u64,
}

/// The kernel image: the file and its executable ELF segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelCode {
    pub path: PathBuf,
    pub segments: Vec<CodeSegment>,
}

/// An executable PT_LOAD segment: `filesz` bytes at `file_offset`, loaded
/// at `vaddr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeSegment {
    pub file_offset: u64,
    pub vaddr: u64,
    pub filesz: u64,
}

/// Where the code of a trace's mappings is (found, checked and cached by
/// the source stage). `Sync`: the decode workers share it.
pub trait CodeImages: Sync {
    /// Build-ids the recording names for files ([`TraceSource::build_ids`]),
    /// to check the files found against; before the first lookup.
    fn add_known_build_ids(&self, ids: &[(String, Vec<u8>)]);
    /// The kernel image, when available.
    fn kernel_code(&self) -> Option<KernelCode>;
    /// The file of a user-space mapping; `None` when it is not found,
    /// rejected, not a file, or one of the kernel's names (kernel code
    /// comes from [`CodeImages::kernel_code`]).
    fn user_code(&self, file: &MappedFile) -> Option<CodeFile>;
    /// `[start, end)` of `pid`, mapped from `file`, could not be decoded:
    /// noted for the list of missing or incomplete images.
    fn note_undecoded(&self, file: &MappedFile, pid: u32, start: u64, end: u64);
}

/// What a libipt event says about where the trace is, for the sideband
/// replay's rule that a context switch applies only outside user code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventPlace {
    /// At this IP.
    Ip(u64),
    /// A disable whose IP is suppressed: the other side of where it was.
    Suppressed,
    /// An asynchronous disable at `at` whose next IP is suppressed.
    SuppressedFrom(u64),
    /// A paging event: most likely in the kernel.
    LikelyKernel,
    /// The event says nothing.
    Unknown,
}

/// The image a [`SidebandSession`] wants in the decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageSel {
    /// The `--raw`/`--elf` image (before the first context switch).
    Given,
    /// A context's sections ([`SidebandSession::sections`]).
    Context(usize),
}

/// A sideband warning or error, as ptxed prints them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SbWarning {
    pub file: String,
    pub offset: u64,
    pub error: bool,
    pub message: &'static str,
}

/// What the replay lists, in the order ptxed prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SbNote {
    /// A record, about to be applied (`--sb:compact` ...): its text.
    Record(Arc<str>),
    /// A warning (`--sb:warn`) or an error.
    Warning(SbWarning),
    /// The image changed to this process's (`--sb:switch`).
    Switch { pid: u32 },
}

impl std::fmt::Display for SbNote {
    /// ptxed's lines: the record's text (a verbose record spans several
    /// lines), `[FILE:OFFSET sideband warning: MESSAGE]`, `[context: pid-N]`
    /// (N in hex, libipt-sb's name for a process's image).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SbNote::Record(text) => f.write_str(text),
            SbNote::Warning(w) => write!(
                f,
                "[{}:{:016x} sideband {}: {}]",
                w.file,
                w.offset,
                if w.error { "error" } else { "warning" },
                w.message
            ),
            SbNote::Switch { pid } => write!(f, "[context: pid-{pid:x}]"),
        }
    }
}

/// A raw decode's perf_event sideband, read (`ptdec raw --pevent:*`):
/// every file section its mappings name, and a replay for each decode.
/// `Send + Sync`: the decode set-up that holds it is shared.
pub trait RawSideband: Send + Sync + std::fmt::Debug {
    /// Each section its mappings name, once; a replay's contexts are
    /// indices into it.
    fn sections(&self) -> &[RawSection];
    /// A replay from the start, for one decoder.
    fn session(&self) -> Box<dyn SidebandSession + '_>;
}

/// The sideband replayed during one decode, event by event, as libipt-sb
/// replays it for ptxed (sequential: one per decoder).
pub trait SidebandSession {
    /// A libipt event at time `tsc`, at `place`: applies every record due.
    fn on_event(&mut self, tsc: u64, place: EventPlace);
    /// The image the decoder should have now.
    fn image(&self) -> ImageSel;
    /// The sections (indices into [`RawSideband::sections`]) of a context,
    /// later ones taking precedence where they overlap.
    fn sections(&self, ctx: usize) -> &[usize];
    /// What to list since the last call: records, warnings, switches.
    fn take_notes(&mut self) -> Vec<SbNote>;
}
