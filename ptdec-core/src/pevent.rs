//! perf_event sideband for `ptdec raw`, in the forms libipt's `ptxed` takes
//! (`--pevent:primary/secondary FILE[:FROM[-TO]]` and the settings before
//! each file): the records of each `.sb` file are read here ([`Sideband`]),
//! and replayed during the decode ([`Session`]) as libipt-sb replays them
//! for ptxed, so that the image follows MMAP, COMM.EXEC, FORK, ITRACE_START
//! and context switches at the moment the trace reaches them.
//!
//! Why not link libipt-sb: `ipt/build.rs` builds libipt alone (a system
//! libipt rarely ships libipt-sb), and libipt-sb wants to own the decoder's
//! image, which `decode::chunk` builds from its own section cache. So the
//! records are parsed with the `sideband` crate (the same parser as
//! perf.data's) and the rules are reimplemented here, each with its reason:
//!
//! * Records are applied when the decoder's time (the `tsc` of each libipt
//!   event) reaches theirs; a record without a time sample is applied at
//!   once. Of several files, the one whose next record is earliest goes
//!   first, a file keeps its turn on equal times, and files are taken in
//!   command-line order.
//! * A process's image is a context: every process starts with the kernel
//!   image (`--pevent:kcore`), MMAP/MMAP2 add sections to it at once (so a
//!   mapping of the running process is visible immediately), FORK copies the
//!   parent's, COMM.EXEC starts a new one.
//! * Which context is in the decoder changes only through the primary
//!   files: ITRACE_START at once, SWITCH/SWITCH_CPU_WIDE and COMM.EXEC
//!   when the trace is in the kernel (below `--pevent:kernel-start`, as
//!   the events' IPs say) or where that is unknown, since user code
//!   cannot switch. Until the first switch the decoder has the `--raw` and
//!   `--elf` image.
//! * Kernel-mode MMAPs are ignored (kernel code comes from kcore);
//!   `[vdso]` is the `--pevent:vdso-*` file of the process's ABI (from the
//!   ELF class and machine of its first mapped file); other `[...]`, `//anon`
//!   and deleted files are lost sections (a warning).
//!
//! Unlike ptxed, a cut or malformed `.sb` file is an error when it is read,
//! not the silent end of that file's sideband.
//!
//! What the replay lists in `--insn-list` ([`SbNote`]: each record as
//! ptxed's `--sb:*` options print it, warnings, context switches) is made
//! in `pevent/print.rs` and handed out in the order ptxed prints it.
//!
//! The decode stage sees the sideband through `crate::model::source`:
//! [`Sideband`] is its [`RawSideband`], a [`Session`] its
//! [`SidebandSession`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sideband::attr::{flags, Attr, AttrSet, ATTR_SIZE_VER8};
use sideband::parse::{parse_event_le, ring_records};
use sideband::record::{aux_flags, misc, Record};
use sideband::timeconv::TscConversion;

use crate::model::source::{
    EventPlace, ImageSel, RawSection, RawSideband, SbNote, SbWarning, SidebandSession,
};
use crate::raw::{ElfSpec, FileRange};

mod print;
pub use print::{SbFormat, SbPrint};

/// The settings ptxed copies into each sideband file when it is given
/// (`--pevent:*` before `--pevent:primary/secondary`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeventConfig {
    /// perf_event_attr.sample_type of the records (`--pevent:sample-type`).
    pub sample_type: u64,
    /// (identifier, sample_type) pairs (`--pevent:sample-config ID:TYPE`).
    pub sample_config: Vec<(u64, u64)>,
    /// perf_event_mmap_page's time_zero, time_shift, time_mult: record
    /// times (perf ns) to TSC.
    pub time_zero: u64,
    pub time_shift: u16,
    pub time_mult: u32,
    /// Apply the records this many ticks earlier (`--pevent:tsc-offset`;
    /// as a signed number, later when negative).
    pub tsc_offset: u64,
    /// IPs from here up are kernel code (`--pevent:kernel-start`).
    pub kernel_start: u64,
    /// Prepended, as a string, to every mapped file name (`--pevent:sysroot`).
    pub sysroot: Option<String>,
    /// The vDSO images for x64, x32 and ia32 processes.
    pub vdso: [Option<PathBuf>; 3],
}

impl Default for PeventConfig {
    fn default() -> Self {
        PeventConfig {
            sample_type: 0,
            sample_config: Vec::new(),
            time_zero: 0,
            time_shift: 0,
            time_mult: 1,
            tsc_offset: 0,
            kernel_start: u64::MAX,
            sysroot: None,
            vdso: [None, None, None],
        }
    }
}

/// One `--pevent:primary` or `--pevent:secondary` file with its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeventSpec {
    pub file: FileRange,
    pub primary: bool,
    pub config: PeventConfig,
}

/// Why the sideband cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PeventError {
    /// A sideband file could not be read.
    #[error("{option} {path}: cannot read it: {source}")]
    Io {
        option: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A `--pevent:vdso-*` file that is no ELF image (empty, or other
    /// bytes): a `[vdso]` mapping would decode from it.
    #[error(
        "{option} {path}: {what}, not an ELF image: a vDSO is one (give a copy of the \
         recorded process's [vdso] pages; ptrec saves it as TRACE/images/vdso-BUILDID.so)"
    )]
    NotElf {
        option: &'static str,
        path: PathBuf,
        /// "it is empty", "it starts with [..]".
        what: String,
    },
    /// A byte range outside the file.
    #[error("{option} {path}: range {from:#x}..{to:#x} is outside the file's {size:#x} bytes")]
    Range {
        option: &'static str,
        path: PathBuf,
        from: u64,
        to: u64,
        size: u64,
    },
    /// A record that cannot be read (cut, or sizes that do not add up).
    #[error("{option} {path}: bad perf_event record at offset {offset:#x}: {why}; check the file and its --pevent:sample-type")]
    Record {
        option: &'static str,
        path: PathBuf,
        offset: u64,
        why: String,
    },
    /// The time conversion cannot be used.
    #[error("{option} {path}: {why}")]
    Time {
        option: &'static str,
        path: PathBuf,
        why: String,
    },
    /// A `--pevent:kcore` file that could not be read or used (the error
    /// names the option and the file).
    #[error(transparent)]
    Kcore(crate::raw::RawError),
}

/// A process's ABI, which picks its vDSO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Abi {
    X64 = 0,
    X32 = 1,
    Ia32 = 2,
}

/// The ABI an ELF file says (class, and machine for 32-bit), if it is one.
fn elf_abi(path: &Path) -> Option<Abi> {
    use std::io::Read;
    let mut h = [0u8; 20];
    std::fs::File::open(path).ok()?.read_exact(&mut h).ok()?;
    if &h[..4] != b"\x7fELF" || h[6] != 1 {
        return None;
    }
    match h[4] {
        2 => Some(Abi::X64),
        1 => match u16::from_le_bytes([h[18], h[19]]) {
            3 => Some(Abi::Ia32),
            62 => Some(Abi::X32),
            _ => None,
        },
        _ => None,
    }
}

/// The options of `PeventConfig::vdso`'s files, in its order (by ABI).
const VDSO_OPTIONS: [&str; 3] = [
    "--pevent:vdso-x64",
    "--pevent:vdso-x32",
    "--pevent:vdso-ia32",
];

/// A mapped file's section, or why there is none.
#[derive(Debug, Clone)]
enum MapTarget {
    /// A section (index into [`Sideband::sections`]) and its file's ABI.
    File(usize, Option<Abi>),
    /// `[vdso]`: the section of each configured vDSO, by ABI.
    Vdso([Option<usize>; 3]),
    /// Not a file ptdec can read (`//anon`, deleted, `[...]`).
    Lost,
}

/// What one record does.
#[derive(Debug, Clone)]
enum Effect {
    ItraceStart {
        pid: u32,
    },
    Fork {
        pid: u32,
        ppid: u32,
        tid: u32,
    },
    Exec {
        pid: u32,
    },
    /// A switch-in with the pid sample (`None`: not sampled).
    SwitchIn {
        pid: Option<u32>,
    },
    /// A cpu-wide switch-in (ignored without a pid sample) or switch-out
    /// (to `next`).
    SwitchCpuWide {
        pid: Option<u32>,
        next: Option<u32>,
    },
    Map {
        pid: u32,
        target: MapTarget,
    },
    Lost,
    TraceLost,
    Nothing,
}

#[derive(Debug, Clone)]
struct SbRecord {
    tsc: u64,
    /// Offset in the (range of the) file.
    offset: u64,
    effect: Effect,
    /// Its line in the listing (`--sb:compact` ...), if records are listed.
    text: Option<Arc<str>>,
}

#[derive(Debug)]
struct SbFile {
    /// As given on the command line (warnings name it so).
    name: String,
    primary: bool,
    kernel_start: u64,
    records: Vec<SbRecord>,
}

/// The sideband files, read: their records and every file section their
/// mappings name.
#[derive(Debug, Default)]
pub struct Sideband {
    files: Vec<SbFile>,
    /// Each section once; contexts hold indices into it.
    pub sections: Vec<RawSection>,
    /// Sections of the kernel image (`--pevent:kcore`), in every context.
    kernel: Vec<usize>,
    /// Mapped files that do not exist (their code will be missing).
    pub missing: BTreeSet<PathBuf>,
    /// Mapped files that are no regular file, and what each is (`a
    /// device`, `a directory`, [`crate::inputs::LINK_LOOP`], ...): their
    /// mappings are lost sections,
    /// never opened (a FIFO would block, `/dev/zero` never end).
    pub not_regular: BTreeMap<PathBuf, &'static str>,
    /// What is listed besides errors (ptxed's `--sb:*`).
    print: SbPrint,
}

/// `tsc` moved by ptxed's `--pevent:tsc-offset`, without wrapping.
fn offset_tsc(tsc: u64, offset: u64) -> u64 {
    let off = offset as i64;
    if off >= 0 {
        tsc.saturating_sub(off as u64)
    } else {
        tsc.saturating_add(off.unsigned_abs())
    }
}

/// The sample type of one record: by its identifier (the last 8 bytes)
/// when `--pevent:sample-config` names it, else the default.
fn sample_type_of(cfg: &PeventConfig, body: &[u8]) -> Result<u64, String> {
    if cfg.sample_config.is_empty() || body.len() < 8 {
        return Ok(cfg.sample_type);
    }
    let mut id = [0u8; 8];
    id.copy_from_slice(&body[body.len() - 8..]);
    let id = u64::from_le_bytes(id);
    match cfg.sample_config.iter().find(|(i, _)| *i == id) {
        Some(&(_, t)) if t & sideband::sample::sample_type::IDENTIFIER == 0 => Err(format!(
            "--pevent:sample-config {id:#x}:{t:#x} lacks PERF_SAMPLE_IDENTIFIER (0x10000), \
             which a record must have to be matched by its identifier"
        )),
        Some(&(_, t)) => Ok(t),
        None => Ok(cfg.sample_type),
    }
}

/// The sections of the images the sideband names, each once, and what
/// each mapped path is when it is no regular file (asked once a path).
#[derive(Default)]
struct SectionIndex(
    HashMap<(PathBuf, u64, u64, u64), usize>,
    HashMap<PathBuf, Option<&'static str>>,
);

impl SectionIndex {
    /// What `path` is when it exists and is no regular file (`a
    /// directory`, `a device`, ...), noted in `sb`.
    fn not_regular(&mut self, sb: &mut Sideband, path: &Path) -> Option<&'static str> {
        if let Some(&kind) = self.1.get(path) {
            return kind;
        }
        let kind = match std::fs::metadata(path) {
            Ok(m) => sideband::bytes::not_a_file(&m),
            // A link loop is said as one, not as a file that does not exist.
            Err(e) if crate::inputs::is_link_loop(&e) => Some(crate::inputs::LINK_LOOP),
            Err(_) => None,
        };
        if let Some(k) = kind {
            sb.not_regular.insert(path.to_owned(), k);
        }
        self.1.insert(path.to_owned(), kind);
        kind
    }

    /// The index in `sb.sections` of `size` bytes at `offset` of `path`
    /// loaded at `vaddr`, added when new (a missing file is noted).
    fn add(
        &mut self,
        sb: &mut Sideband,
        path: PathBuf,
        offset: u64,
        size: u64,
        vaddr: u64,
    ) -> usize {
        *self
            .0
            .entry((path.clone(), offset, size, vaddr))
            .or_insert_with(|| {
                if std::fs::metadata(&path).is_err() {
                    sb.missing.insert(path.clone());
                }
                sb.sections.push(RawSection {
                    path,
                    offset,
                    size,
                    vaddr,
                });
                sb.sections.len() - 1
            })
    }
}

/// What replaying `ev` (a record of a file with `cfg`) does to the
/// decode: the sections of an image it maps are added to `sb`.
fn effect_of(
    ev: &sideband::record::Event<'_>,
    cfg: &PeventConfig,
    sb: &mut Sideband,
    index: &mut SectionIndex,
) -> Effect {
    let cpumode = ev.misc & misc::CPUMODE_MASK;
    match &ev.record {
        Record::ItraceStart { pid, .. } => Effect::ItraceStart { pid: *pid },
        Record::Fork(t) => Effect::Fork {
            pid: t.pid,
            ppid: t.ppid,
            tid: t.tid,
        },
        Record::Comm { pid, .. } if ev.misc & misc::COMM_EXEC != 0 => Effect::Exec { pid: *pid },
        Record::Switch if ev.misc & misc::SWITCH_OUT == 0 => Effect::SwitchIn {
            pid: ev.sample_id.pid,
        },
        Record::SwitchCpuWide { next_prev_pid, .. } => {
            if ev.misc & misc::SWITCH_OUT == 0 {
                Effect::SwitchCpuWide {
                    pid: ev.sample_id.pid,
                    next: None,
                }
            } else {
                Effect::SwitchCpuWide {
                    pid: None,
                    next: Some(*next_prev_pid),
                }
            }
        }
        Record::Mmap(m) if cpumode != misc::KERNEL => {
            let name = m.filename.as_str();
            let target = if name == "[vdso]" {
                let mut by_abi = [None; 3];
                for (a, v) in cfg.vdso.iter().enumerate() {
                    if let Some(v) = v {
                        by_abi[a] = Some(index.add(sb, v.clone(), m.pgoff, m.len, m.addr));
                    }
                }
                MapTarget::Vdso(by_abi)
            } else if name.starts_with('[') || name == "//anon" || name.contains(" (deleted)") {
                MapTarget::Lost
            } else {
                let file = PathBuf::from(match &cfg.sysroot {
                    Some(root) => format!("{root}{name}"),
                    None => name.to_string(),
                });
                if index.not_regular(sb, &file).is_some() {
                    // Said once before the decode (`not_regular`).
                    return Effect::Map {
                        pid: m.pid,
                        target: MapTarget::Lost,
                    };
                }
                let abi = elf_abi(&file);
                MapTarget::File(index.add(sb, file, m.pgoff, m.len, m.addr), abi)
            };
            Effect::Map { pid: m.pid, target }
        }
        Record::Lost { .. } => Effect::Lost,
        Record::Aux { flags, .. } if flags & aux_flags::TRUNCATED != 0 => Effect::TraceLost,
        _ => Effect::Nothing,
    }
}

impl Sideband {
    /// Reads every file; `kcore` ELF files make up the kernel image;
    /// `print` says what the replay lists (ptxed's `--sb:*`).
    pub fn load(
        specs: &[PeventSpec],
        kcore: &[ElfSpec],
        print: SbPrint,
    ) -> Result<Sideband, PeventError> {
        let mut sb = Sideband {
            print,
            ..Sideband::default()
        };
        let mut index = SectionIndex::default();
        for k in kcore {
            let loaded = crate::raw::RawInput::elf_sections(k, "--pevent:kcore")
                .map_err(PeventError::Kcore)?;
            for s in loaded {
                let i = index.add(&mut sb, s.path, s.offset, s.size, s.vaddr);
                sb.kernel.push(i);
            }
        }
        for spec in specs {
            let option = if spec.primary {
                "--pevent:primary"
            } else {
                "--pevent:secondary"
            };
            let path = &spec.file.path;
            let name = path.display().to_string();
            let bytes = read_range(option, &spec.file)?;
            let cfg = &spec.config;
            // As every other --pevent file: a FIFO or device is refused
            // (it was accepted, and the decode's libipt would open it).
            for (v, option) in cfg.vdso.iter().zip(VDSO_OPTIONS) {
                if let Some(v) = v {
                    let io = |source| PeventError::Io {
                        option,
                        path: v.clone(),
                        source,
                    };
                    // An empty or other file was accepted silently, and
                    // the `[vdso]` code decoded from its bytes, if any.
                    let mut head = Vec::new();
                    std::io::Read::read_to_end(
                        &mut std::io::Read::take(crate::inputs::open_regular(v).map_err(io)?, 4),
                        &mut head,
                    )
                    .map_err(io)?;
                    if head != b"\x7fELF" {
                        return Err(PeventError::NotElf {
                            option,
                            path: v.clone(),
                            what: if head.is_empty() {
                                "it is empty".into()
                            } else {
                                format!("it starts with {head:02x?}")
                            },
                        });
                    }
                }
            }
            // Prepended as a string, as libipt-sb does: a file there made
            // names such as /etc/passwdusr/lib/...
            if let Some(root) = cfg.sysroot.as_deref().filter(|r| !Path::new(r).is_dir()) {
                return Err(PeventError::Io {
                    option: "--pevent:sysroot",
                    path: root.into(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::NotADirectory,
                        "not a folder; give the folder the traced files are under",
                    ),
                });
            }
            let conv = TscConversion::new(
                u64::from(cfg.time_shift),
                u64::from(cfg.time_mult),
                cfg.time_zero,
            )
            .map_err(|e| PeventError::Time {
                option,
                path: path.clone(),
                why: format!("--pevent:time-shift/-mult/-zero: {e}"),
            })?;
            let mut attrs_by_type: HashMap<u64, AttrSet> = HashMap::new();
            let mut records = Vec::new();
            for raw in ring_records(&bytes) {
                let bad = |offset, why| PeventError::Record {
                    option,
                    path: path.clone(),
                    offset,
                    why,
                };
                let raw = raw.map_err(|e| bad(0, e.to_string()))?;
                if raw.header.kind == 0 {
                    return Err(bad(raw.offset, "record type 0".into()));
                }
                let body = &raw.bytes[sideband::parse::HEADER_LEN..];
                let st = sample_type_of(cfg, body).map_err(|w| bad(raw.offset, w))?;
                let attrs = attrs_by_type.entry(st).or_insert_with(|| {
                    let mut a = AttrSet::new();
                    a.push(
                        Attr {
                            size: ATTR_SIZE_VER8,
                            sample_type: st,
                            flags: flags::SAMPLE_ID_ALL,
                            ..Attr::default()
                        },
                        Vec::new(),
                    );
                    a
                });
                let ev = parse_event_le(attrs, &raw).map_err(|e| bad(raw.offset, e.to_string()))?;
                // libipt reads the samples only of the record types it
                // knows; a record without a time is applied at once. Time
                // 0 is synthesized and means the beginning (TSC 0), which
                // --pevent:tsc-offset moves as any other.
                let time = ev
                    .sample_id
                    .time
                    .filter(|_| print::libipt_knows(raw.header.kind));
                let tsc = time.map(|t| {
                    let tsc = if t == 0 { 0 } else { conv.perf_time_to_tsc(t) };
                    offset_tsc(tsc, cfg.tsc_offset)
                });
                let text = print::record_text(
                    &sb.print,
                    &print::RecordView {
                        file: &name,
                        offset: raw.offset,
                        kind: raw.header.kind,
                        event: &ev,
                        body,
                        tsc,
                    },
                )
                .map(Arc::from);
                let tsc = tsc.unwrap_or(0);
                let effect = effect_of(&ev, cfg, &mut sb, &mut index);
                records.push(SbRecord {
                    tsc,
                    offset: raw.offset,
                    effect,
                    text,
                });
            }
            sb.files.push(SbFile {
                name,
                primary: spec.primary,
                kernel_start: cfg.kernel_start,
                records,
            });
        }
        Ok(sb)
    }

    /// How many records all files hold.
    pub fn records(&self) -> usize {
        self.files.iter().map(|f| f.records.len()).sum()
    }
}

/// The bytes of `r`: a regular file, mapped (not read whole: the records
/// are parsed as they come, so a bad first record of a huge file fails at
/// once); a device or FIFO is refused (`/dev/zero` was read without end,
/// a FIFO waited for a writer).
fn read_range(option: &'static str, r: &FileRange) -> Result<RangeBytes, PeventError> {
    let io = |source| PeventError::Io {
        option,
        path: r.path.clone(),
        source,
    };
    let file = crate::inputs::open_regular(&r.path).map_err(io)?;
    let all = sideband::bytes::FileBytes::map_file(file).map_err(io)?;
    let size = all.len() as u64;
    let to = r.to.unwrap_or(size);
    if r.from > size || to > size || r.from > to {
        return Err(PeventError::Range {
            option,
            path: r.path.clone(),
            from: r.from,
            to,
            size,
        });
    }
    Ok(RangeBytes {
        all,
        range: r.from as usize..to as usize,
    })
}

/// A range of a sideband file's bytes.
struct RangeBytes {
    all: sideband::bytes::FileBytes,
    range: std::ops::Range<usize>,
}

impl std::ops::Deref for RangeBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.all[self.range.clone()]
    }
}

/// Where the trace is, as libipt-sb tracks it from the events' IPs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loc {
    Unknown,
    User,
    Kernel,
    LikelyUser,
    LikelyKernel,
}

impl Loc {
    /// A postponed context switch may happen here.
    fn may_switch(self) -> bool {
        matches!(self, Loc::Unknown | Loc::Kernel | Loc::LikelyKernel)
    }

    /// After an event whose IP is suppressed, coming from `self`.
    fn after_suppressed(self) -> Loc {
        match self {
            Loc::Kernel | Loc::LikelyKernel => Loc::LikelyUser,
            Loc::User | Loc::LikelyUser => Loc::LikelyKernel,
            Loc::Unknown => Loc::Unknown,
        }
    }
}

#[derive(Debug)]
struct Context {
    /// The process it is the image of.
    pid: u32,
    sections: Vec<usize>,
    abi: Option<Abi>,
}

#[derive(Debug)]
struct FileState {
    /// Index of its next record.
    next: usize,
    context: Option<usize>,
    next_context: Option<usize>,
    loc: Loc,
}

/// The sideband replayed during one decode (one per decoder, sequential).
pub struct Session<'s> {
    sb: &'s Sideband,
    files: Vec<FileState>,
    /// Files with records left, by their next record's time.
    active: Vec<usize>,
    /// Files without records left that still look at events.
    retired: Vec<usize>,
    contexts: Vec<Context>,
    by_pid: HashMap<u32, usize>,
    image: ImageSel,
    notes: Vec<SbNote>,
}

impl<'s> Session<'s> {
    pub fn new(sb: &'s Sideband) -> Self {
        let files = sb
            .files
            .iter()
            .map(|_| FileState {
                next: 0,
                context: None,
                next_context: None,
                loc: Loc::Unknown,
            })
            .collect();
        let mut s = Session {
            sb,
            files,
            active: Vec::new(),
            retired: Vec::new(),
            contexts: Vec::new(),
            by_pid: HashMap::new(),
            image: ImageSel::Given,
            notes: Vec::new(),
        };
        // Files without records take no part; the others are inserted
        // last file first, each before those of equal time, so that equal
        // times go in command-line order.
        for f in (0..sb.files.len()).rev() {
            if !sb.files[f].records.is_empty() {
                s.insert(f);
            }
        }
        s
    }

    fn next_tsc(&self, f: usize) -> u64 {
        self.sb.files[f].records[self.files[f].next].tsc
    }

    fn insert(&mut self, f: usize) {
        let t = self.next_tsc(f);
        let at = self
            .active
            .iter()
            .position(|&g| t <= self.next_tsc(g))
            .unwrap_or(self.active.len());
        self.active.insert(at, f);
    }

    fn place(&self, f: usize, prev: Loc, p: EventPlace) -> Loc {
        let ks = self.sb.files[f].kernel_start;
        let of = |ip: u64| if ip < ks { Loc::User } else { Loc::Kernel };
        match p {
            EventPlace::Ip(ip) => of(ip),
            EventPlace::Suppressed => prev.after_suppressed(),
            EventPlace::SuppressedFrom(at) => of(at).after_suppressed(),
            EventPlace::LikelyKernel => Loc::LikelyKernel,
            EventPlace::Unknown => Loc::Unknown,
        }
    }

    fn warn(&mut self, f: usize, r: usize, error: bool, message: &'static str) {
        if !error && !self.sb.print.warnings {
            return;
        }
        self.notes.push(SbNote::Warning(SbWarning {
            file: self.sb.files[f].name.clone(),
            offset: self.sb.files[f].records[r].offset,
            error,
            message,
        }));
    }

    fn context_of(&mut self, pid: u32) -> usize {
        if let Some(&c) = self.by_pid.get(&pid) {
            return c;
        }
        self.contexts.push(Context {
            pid,
            sections: self.sb.kernel.clone(),
            abi: None,
        });
        let c = self.contexts.len() - 1;
        self.by_pid.insert(pid, c);
        c
    }

    fn prepare_switch(&mut self, f: usize, ctx: usize) {
        let st = &mut self.files[f];
        if st.next_context == Some(ctx) {
            return;
        }
        st.next_context = None;
        if st.context == Some(ctx) {
            return;
        }
        st.next_context = Some(ctx);
    }

    fn switch(&mut self, f: usize) {
        let st = &mut self.files[f];
        if let Some(next) = st.next_context.take() {
            st.context = Some(next);
            self.image = ImageSel::Context(next);
            if self.sb.print.switch {
                let pid = self.contexts[next].pid;
                self.notes.push(SbNote::Switch { pid });
            }
        }
    }

    fn apply(&mut self, f: usize, r: usize) {
        let primary = self.sb.files[f].primary;
        match self.sb.files[f].records[r].effect.clone() {
            Effect::ItraceStart { pid } if primary => {
                let c = self.context_of(pid);
                self.prepare_switch(f, c);
                // Tracing just started: no need to wait for the kernel.
                self.switch(f);
            }
            Effect::Fork { pid, ppid, tid } if ppid != pid && pid == tid => {
                self.by_pid.remove(&pid);
                let child = self.context_of(pid);
                if let Some(&parent) = self.by_pid.get(&ppid) {
                    let inherited = self.contexts[parent].sections.clone();
                    self.contexts[child].sections.extend(inherited);
                }
            }
            Effect::Exec { pid } => {
                self.by_pid.remove(&pid);
                let c = self.context_of(pid);
                if primary {
                    self.prepare_switch(f, c);
                }
            }
            Effect::SwitchIn { pid } if primary => match pid {
                Some(pid) => {
                    let c = self.context_of(pid);
                    self.prepare_switch(f, c);
                }
                None => self.warn(f, r, true, "bad configuration"),
            },
            Effect::SwitchCpuWide { pid, next } if primary => {
                if let Some(pid) = next.or(pid) {
                    let c = self.context_of(pid);
                    self.prepare_switch(f, c);
                }
            }
            Effect::Map { pid, target } => {
                let c = self.context_of(pid);
                match target {
                    MapTarget::File(s, abi) => {
                        let ctx = &mut self.contexts[c];
                        if ctx.abi.is_none() {
                            ctx.abi = abi;
                        }
                        ctx.sections.push(s);
                    }
                    MapTarget::Vdso(by_abi) => {
                        match self.contexts[c].abi.and_then(|a| by_abi[a as usize]) {
                            Some(s) => self.contexts[c].sections.push(s),
                            None => self.warn(f, r, true, "bad configuration"),
                        }
                    }
                    MapTarget::Lost => self.warn(f, r, false, "image section lost"),
                }
            }
            Effect::Lost => self.warn(f, r, false, "sideband lost"),
            Effect::TraceLost if primary => self.warn(f, r, false, "trace lost"),
            _ => {}
        }
    }
}

/// The sideband as a raw decode reads it.
impl RawSideband for Sideband {
    fn sections(&self) -> &[RawSection] {
        &self.sections
    }

    fn session(&self) -> Box<dyn SidebandSession + '_> {
        Box::new(Session::new(self))
    }
}

/// The replay for the decode stage: records applied at libipt's events,
/// contexts switched where the trace may switch.
impl SidebandSession for Session<'_> {
    /// The image the decoder should have now.
    fn image(&self) -> ImageSel {
        self.image
    }

    /// The sections of a context, in the order they were added (later
    /// ones take precedence where they overlap, as in libipt's image).
    fn sections(&self, ctx: usize) -> &[usize] {
        &self.contexts[ctx].sections
    }

    /// What to list since the last call: records, warnings, switches.
    fn take_notes(&mut self) -> Vec<SbNote> {
        std::mem::take(&mut self.notes)
    }

    /// A libipt event at time `tsc`: applies every record due, then lets
    /// each file place a postponed context switch.
    fn on_event(&mut self, tsc: u64, place: EventPlace) {
        while let Some(&f) = self.active.first() {
            if tsc < self.next_tsc(f) {
                break;
            }
            self.active.remove(0);
            let r = self.files[f].next;
            // As libipt-sb: printed, then applied.
            if let Some(text) = &self.sb.files[f].records[r].text {
                self.notes.push(SbNote::Record(text.clone()));
            }
            self.apply(f, r);
            self.files[f].next += 1;
            if self.files[f].next < self.sb.files[f].records.len() {
                self.insert(f);
            } else {
                self.retired.insert(0, f);
            }
        }
        let present: Vec<usize> = self.active.iter().chain(&self.retired).copied().collect();
        for f in present {
            let old = self.files[f].loc;
            let new = self.place(f, old, place);
            self.files[f].loc = new;
            match self.files[f].next_context {
                None => {
                    // Nothing left to do for a file at its end.
                    if self.files[f].next >= self.sb.files[f].records.len() {
                        self.retired.retain(|&g| g != f);
                    }
                }
                Some(_) if old.may_switch() || new.may_switch() => self.switch(f),
                Some(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsc_offset_does_not_wrap() {
        assert_eq!(offset_tsc(10, 3), 7);
        assert_eq!(offset_tsc(2, 3), 0);
        assert_eq!(offset_tsc(10, (-3i64) as u64), 13);
        assert_eq!(offset_tsc(u64::MAX - 1, (-3i64) as u64), u64::MAX);
    }
}
