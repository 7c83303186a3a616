//! The image store: finds the bytes of every file named by MMAP/MMAP2 (and of
//! the kernel) so libipt can follow the code and symbols can be named. It sits
//! between the sideband timeline (which says which file is mapped where) and
//! the decoder and symbolizer (which read the file's bytes). One store is
//! shared by all decode threads; each file is found, checked and mapped once.
//! The decode stage reads it as [`CodeImages`] (`crate::model::source`).
//!
//! # Where a file is looked for, in order
//!
//! For a recorded path `P` (` (deleted)` suffix dropped) and the build-id
//! recorded for it (MMAP2 build-id form, or the perf.data BUILD_ID feature
//! through [`ImageStore::add_known_build_ids`]):
//!
//! 1. `TRACE/sysroot/P` (copies made by ptrec at record time);
//! 2. `DIR/P` for each `--sysroot DIR`, in order (like perf's `--symfs` and
//!    ptxed's `--pevent:sysroot`);
//! 3. perf's build-id cache (default `~/.debug`), when the build-id is known:
//!    `.build-id/xx/yyyy…/elf` (perf's layout since 4.x: the link leads to
//!    `~/.debug/P/<hex>/` whose `elf` is the binary), `.build-id/xx/yyyy…` when
//!    it is itself a file (the older layout), and `P/<hex>/elf`;
//! 4. the live filesystem `P` (unless `live_fs` is off).
//!
//! A candidate whose build-id differs from the recorded one is a warning and is
//! not used; the search goes on. When no build-id was recorded (MMAP, or MMAP2
//! in its inode form), copies under a sysroot are trusted as the user's
//! choice, and the live file is accepted with one warning per file unless
//! MMAP2's inode and device numbers say it is the very file that was mapped —
//! inode numbers are the only identity the recording has, and decoding on the
//! recording machine is the common case.
//!
//! # The vDSO
//!
//! `[vdso]` is never taken from the decoding machine: its vDSO is most likely
//! another kernel's, and the decoder hands libipt files, not memory. ptrec and
//! ptsim write the traced processes' vDSO into the trace dir as
//!
//! * `TRACE/images/vdso-<build-id hex>.so` — one file per distinct vDSO, and a
//!   BUILD_ID feature entry named `[vdso]` with that build-id, so the decoder
//!   knows which one to use;
//! * `TRACE/images/vdso.so` — used when the recording names no build-id for
//!   `[vdso]` (a trace with a single vDSO, the usual case);
//!
//! and when neither applies, a single `images/vdso-*.so` is used with a
//! warning. perf's build-id cache (`~/.debug/[vdso]/<hex>/vdso`) is also
//! searched when the build-id is known.
//!
//! # The kernel
//!
//! `--vmlinux FILE` when given, else `kcore_dir/kcore` (perf's `--kcore`
//! layout: an ELF core whose program headers map kernel virtual addresses,
//! with `kcore_dir/kallsyms` beside it for symbols). Every kernel name
//! (`[kernel.kallsyms]…`) gets this one image; kernel module maps are looked
//! up as files.
//!
//! `[anon…]`, `//anon`, `[heap]`, `[stack]` and similar are not files: they are
//! never looked up and never listed as missing.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use object::{Object, ObjectSegment, SegmentFlags};
use sideband::bytes::FileBytes;
use sideband::record::FileId;
use sideband::timeline::MappedFile;

use crate::model::source::{CodeFile, CodeImages, CodeSegment, KernelCode};

/// Why an image could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file starts like an ELF file but its headers cannot be parsed.
    #[error("{path}: malformed ELF: {reason}")]
    MalformedElf { path: PathBuf, reason: String },
    /// A PT_LOAD segment lies beyond the end of the file.
    #[error("{path}: truncated: segment at file offset {offset:#x} + {size:#x} is beyond the file's {file_size:#x} bytes")]
    Truncated {
        path: PathBuf,
        offset: u64,
        size: u64,
        file_size: u64,
    },
    /// The file's build-id is not the one recorded.
    #[error("{path}: build-id {found} differs from the recorded {expected}; not used")]
    BuildIdMismatch {
        path: PathBuf,
        expected: String,
        found: String,
    },
}

/// Where images are looked for. See the module doc for the order.
#[derive(Debug, Clone)]
pub struct SearchPath {
    /// The trace dir: its `sysroot/` and `images/` are searched.
    pub trace_dir: Option<PathBuf>,
    /// `--sysroot DIR`s, searched in order after the trace dir's sysroot.
    pub sysroots: Vec<PathBuf>,
    /// perf's build-id cache; `~/.debug` by default.
    pub buildid_dir: Option<PathBuf>,
    /// Whether files may be taken from the decoding machine's own filesystem.
    pub live_fs: bool,
    /// perf's `--kcore` copy: `kcore` and `kallsyms`.
    pub kcore_dir: Option<PathBuf>,
    /// An uncompressed kernel ELF image, preferred over `kcore_dir`.
    pub vmlinux: Option<PathBuf>,
    /// When the recording was last written (its perf.data's mtime): a live
    /// file without a build-id that is newer was changed since.
    pub recorded_by: Option<std::time::SystemTime>,
}

impl Default for SearchPath {
    fn default() -> Self {
        SearchPath {
            trace_dir: None,
            sysroots: Vec::new(),
            buildid_dir: std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".debug")),
            live_fs: true,
            kcore_dir: None,
            vmlinux: None,
            recorded_by: None,
        }
    }
}

impl SearchPath {
    /// The defaults for decoding trace dir `dir`: its `sysroot/`, `images/`
    /// and `kcore_dir/`, `~/.debug`, and the live filesystem.
    pub fn for_trace(dir: impl Into<PathBuf>) -> SearchPath {
        let dir = dir.into();
        SearchPath {
            kcore_dir: Some(dir.join("kcore_dir")),
            trace_dir: Some(dir),
            ..SearchPath::default()
        }
    }

    /// The roots under which system paths (`/usr/lib/debug/...`) of the
    /// recording machine are searched: the trace sysroot, then each
    /// `--sysroot`.
    pub(crate) fn roots(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.trace_dir
            .iter()
            .map(|d| d.join("sysroot"))
            .chain(self.sysroots.iter().cloned())
    }
}

/// One ELF PT_LOAD program header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub file_offset: u64,
    pub vaddr: u64,
    pub filesz: u64,
    pub memsz: u64,
    pub executable: bool,
}

/// A file found for a mapping (or the kernel), checked and mapped.
pub struct Image {
    /// The name the recording gave it.
    pub recorded_name: String,
    /// The file found.
    pub path: PathBuf,
    /// Its build-id (from its ELF note), if it has one.
    pub build_id: Option<Vec<u8>>,
    /// Its size in bytes.
    pub size: u64,
    /// Its PT_LOAD program headers; empty for non-ELF files.
    pub segments: Vec<Segment>,
    pub is_elf: bool,
    /// Mapped, or read when mapping is not possible (empty files, some
    /// special filesystems).
    bytes: FileBytes,
    /// Unique per loaded image: the symbol cache's key.
    pub(crate) id: u64,
    /// Where the symbolizer looks for separate debug files.
    pub(crate) search: Arc<SearchPath>,
    /// For the kernel image from kcore: the kallsyms file beside it.
    pub(crate) kallsyms: Option<PathBuf>,
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Image")
            .field("recorded_name", &self.recorded_name)
            .field("path", &self.path)
            .field("build_id", &self.build_id.as_deref().map(hex))
            .field("size", &self.size)
            .field("segments", &self.segments)
            .field("is_elf", &self.is_elf)
            .finish_non_exhaustive()
    }
}

static NEXT_IMAGE_ID: AtomicU64 = AtomicU64::new(1);

impl Image {
    /// Opens, maps and checks `path`. Files that are not ELF are accepted as
    /// raw bytes (no segments); files that start as ELF must parse and have
    /// every PT_LOAD inside the file.
    pub fn load(
        recorded_name: &str,
        path: &Path,
        search: Arc<SearchPath>,
    ) -> Result<Image, ImageError> {
        let io = |source| ImageError::Io {
            path: path.to_owned(),
            source,
        };
        // Without waiting for a writer when it is a FIFO.
        let file = crate::inputs::open_regular(path).map_err(io)?;
        let bytes = FileBytes::map_file(file).map_err(io)?;
        Image::from_bytes(recorded_name, path, bytes, search)
    }

    fn from_bytes(
        recorded_name: &str,
        path: &Path,
        bytes: FileBytes,
        search: Arc<SearchPath>,
    ) -> Result<Image, ImageError> {
        let data: &[u8] = &bytes;
        let size = data.len() as u64;
        let is_elf = data.starts_with(b"\x7fELF");
        let mut segments = Vec::new();
        let mut build_id = None;
        if is_elf {
            let malformed = |e: object::Error| ImageError::MalformedElf {
                path: path.to_owned(),
                reason: e.to_string(),
            };
            let obj = object::File::parse(data).map_err(malformed)?;
            for seg in obj.segments() {
                let (offset, filesz) = seg.file_range();
                let executable = match seg.flags() {
                    SegmentFlags::Elf { p_flags } => p_flags & object::elf::PF_X != 0,
                    _ => false,
                };
                if offset.checked_add(filesz).is_none_or(|end| end > size) {
                    return Err(ImageError::Truncated {
                        path: path.to_owned(),
                        offset,
                        size: filesz,
                        file_size: size,
                    });
                }
                segments.push(Segment {
                    file_offset: offset,
                    vaddr: seg.address(),
                    filesz,
                    memsz: seg.size(),
                    executable,
                });
            }
            build_id = obj.build_id().map_err(malformed)?.map(<[u8]>::to_vec);
        }
        Ok(Image {
            recorded_name: recorded_name.to_owned(),
            path: path.to_owned(),
            build_id,
            size,
            segments,
            is_elf,
            bytes,
            id: NEXT_IMAGE_ID.fetch_add(1, Ordering::Relaxed),
            search,
            kallsyms: None,
        })
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The ELF virtual address of a file offset (through the PT_LOAD that
    /// holds it); `None` outside every segment and for non-ELF files.
    pub fn offset_to_vaddr(&self, file_offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| file_offset >= s.file_offset && file_offset - s.file_offset < s.filesz)
            .map(|s| s.vaddr.wrapping_add(file_offset - s.file_offset))
    }

    /// The file offset of an ELF virtual address; `None` when it is not
    /// backed by file bytes (outside every segment, or in `.bss`).
    pub fn vaddr_to_offset(&self, vaddr: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| vaddr >= s.vaddr && vaddr - s.vaddr < s.filesz)
            .map(|s| s.file_offset.wrapping_add(vaddr - s.vaddr))
    }
}

/// Why `img`, found for a mapping (the kernel's when `kernel`), gave no
/// code: the file, the reason and what to give instead.
fn found_but_unused(img: &Image, kernel: bool) -> String {
    let why = if img.is_elf {
        "none of its segments holds the addresses traced (a different build?)"
    } else {
        "it is not an ELF file, so the decoder cannot place its code"
    };
    let todo = if kernel {
        "give --vmlinux the traced kernel's uncompressed vmlinux, or --kcore the folder \
         with the kcore and kallsyms that `perf record --kcore` copied"
    } else {
        "put the file that ran under a --sysroot"
    };
    format!("{} was found for it, but {why}: {todo}", img.path.display())
}

/// A file the decode needed and could not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingImage {
    /// The recorded name.
    pub name: String,
    /// The recorded build-id, if any.
    pub build_id: Option<Vec<u8>>,
    /// Why it is missing: where it was looked for, or why candidates were rejected.
    pub reason: String,
    /// `(pid, start, end)` ranges left undecoded because of it, by pid and address.
    pub ranges: Vec<(u32, u64, u64)>,
}

/// The cache key of a mapped file: its name and recorded identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Identity {
    None,
    Inode {
        maj: u32,
        min: u32,
        ino: u64,
        ino_generation: u64,
    },
    BuildId(Vec<u8>),
}

impl From<&Option<FileId>> for Identity {
    fn from(id: &Option<FileId>) -> Self {
        match id {
            None => Identity::None,
            Some(FileId::Inode {
                maj,
                min,
                ino,
                ino_generation,
            }) => Identity::Inode {
                maj: *maj,
                min: *min,
                ino: *ino,
                ino_generation: *ino_generation,
            },
            Some(FileId::BuildId(b)) => Identity::BuildId(b.clone()),
        }
    }
}

type Key = (String, Identity);
type Lookup = Result<Arc<Image>, String>;
/// `(pid, start, end)`: addresses of a process left undecoded.
type Ranges = Vec<(u32, u64, u64)>;

#[derive(Default)]
struct Notes {
    /// Warnings, in order, each once.
    warnings: Vec<String>,
    seen: HashSet<String>,
    /// Undecoded ranges by file.
    undecoded: BTreeMap<Key, (MappedFile, Ranges)>,
    /// Files of this machine taken for recorded ones without a build-id
    /// to check them by.
    unverified: BTreeSet<PathBuf>,
    /// The recorded names of those taken from a file that is not the
    /// recorded inode: said in one warning (a bundle of 1000 modules
    /// without build-ids would otherwise print 1000 lines), placed where
    /// the first of them arose (`unchecked_at`).
    unchecked: Vec<String>,
    unchecked_at: Option<usize>,
    /// Distinct warnings past [`MAX_WARNINGS`], counted, not kept.
    dropped: usize,
}

/// The most distinct warnings a store keeps: past them, only a count.
const MAX_WARNINGS: usize = 50;
/// The most file names the warning about unchecked files shows.
const UNCHECKED_SHOWN: usize = 5;

/// Finds, checks and caches the images of a trace. `Send + Sync`: one store is
/// shared by all decode threads.
pub struct ImageStore {
    search: Arc<SearchPath>,
    known_build_ids: RwLock<HashMap<String, Vec<u8>>>,
    /// One slot per (name, identity); resolved once, outside the map's lock.
    cache: Mutex<HashMap<Key, Arc<OnceLock<Lookup>>>>,
    /// Images by the path found, so two keys naming one file share it.
    by_path: Mutex<HashMap<PathBuf, Arc<Image>>>,
    kernel: OnceLock<Lookup>,
    notes: Mutex<Notes>,
}

/// Recorded names that are not files: anonymous memory, heap, stack, ...
pub fn is_not_a_file(name: &str) -> bool {
    name.is_empty()
        || name.starts_with("[anon")
        || name.starts_with("//anon")
        || name == "[heap]"
        || name.starts_with("[stack")
        || name == "[vvar]"
        || name == "[vvar_vclock]"
        || name == "[vsyscall]"
        || name == "[uprobes]"
        || name.starts_with("/dev/zero")
        || name.starts_with("/anon_hugepage")
        || name.starts_with("/SYSV")
        || name.starts_with("/memfd:")
}

/// Is `name` one of the kernel's image names (`[kernel.kallsyms]_text`, ...)?
pub fn is_kernel_name(name: &str) -> bool {
    name.starts_with("[kernel.kallsyms]") || name.starts_with("[guest.kernel.kallsyms")
}

/// Lower-case hex of a build-id.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

impl ImageStore {
    pub fn new(search: SearchPath) -> ImageStore {
        ImageStore {
            search: Arc::new(search),
            known_build_ids: RwLock::new(HashMap::new()),
            cache: Mutex::new(HashMap::new()),
            by_path: Mutex::new(HashMap::new()),
            kernel: OnceLock::new(),
            notes: Mutex::new(Notes::default()),
        }
    }

    /// The search path this store uses.
    pub fn search(&self) -> &SearchPath {
        &self.search
    }

    /// Build-ids the recording names for files (perf.data's BUILD_ID feature).
    /// Call before the first [`ImageStore::get`]: a file already resolved is
    /// not looked up again. A build-id in an MMAP2 record wins over these.
    pub fn add_known_build_ids(&self, entries: impl IntoIterator<Item = (String, Vec<u8>)>) {
        let mut known = self
            .known_build_ids
            .write()
            .unwrap_or_else(|e| e.into_inner());
        for (name, id) in entries {
            known.insert(name, id);
        }
    }

    /// The image for a mapping's file, cached by (filename, file id); `None`
    /// when it is not a file, not found or rejected (the reason is recorded
    /// for [`ImageStore::missing`]).
    pub fn get(&self, file: &MappedFile) -> Option<Arc<Image>> {
        if is_not_a_file(&file.filename) {
            return None;
        }
        if is_kernel_name(&file.filename) {
            return self.kernel();
        }
        self.lookup(file).ok()
    }

    fn lookup(&self, file: &MappedFile) -> Lookup {
        let key: Key = (file.filename.clone(), Identity::from(&file.file_id));
        let slot = {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            cache.entry(key).or_default().clone()
        };
        slot.get_or_init(|| self.resolve(file)).clone()
    }

    /// The build-id the recording gives for `file`, if any.
    pub fn recorded_build_id(&self, file: &MappedFile) -> Option<Vec<u8>> {
        match &file.file_id {
            Some(FileId::BuildId(b)) if !b.is_empty() => Some(b.clone()),
            _ => {
                let known = self
                    .known_build_ids
                    .read()
                    .unwrap_or_else(|e| e.into_inner());
                known.get(&file.filename).cloned()
            }
        }
    }

    fn resolve(&self, file: &MappedFile) -> Lookup {
        let name = file
            .filename
            .strip_suffix(" (deleted)")
            .unwrap_or(&file.filename);
        let expected = self.recorded_build_id(file);
        let mut tried = Vec::new();
        let mut rejected = Vec::new();
        let mut unread: Vec<String> = Vec::new();
        // Candidates that exist but are no regular file (a folder, a
        // device): said as such, not as "not found".
        let mut odd: Vec<String> = Vec::new();
        for candidate in self.candidates(name, expected.as_deref()) {
            if !candidate.path.is_file() {
                let meta = std::fs::metadata(&candidate.path);
                if meta.as_ref().is_err_and(crate::inputs::is_link_loop) {
                    odd.push(format!(
                        "{} is {}",
                        candidate.path.display(),
                        crate::inputs::LINK_LOOP
                    ));
                }
                if let Some(kind) = meta.ok().as_ref().and_then(sideband::bytes::not_a_file) {
                    odd.push(format!(
                        "{} is {kind}, not a regular file",
                        candidate.path.display()
                    ));
                }
                continue;
            }
            tried.push(candidate.path.display().to_string());
            match self.accept(file, name, &candidate, expected.as_deref()) {
                Ok(image) => {
                    // A candidate before it that could not be read (an
                    // unmappable --sysroot copy, say) is said, not
                    // skipped silently for a file that may differ.
                    if !unread.is_empty() {
                        self.warn(format!(
                            "{name}: {}; using {} instead",
                            unread.join("; "),
                            image.path.display()
                        ));
                    }
                    return Ok(image);
                }
                Err(e) => {
                    let why = e.to_string();
                    if matches!(e, ImageError::BuildIdMismatch { .. }) {
                        self.warn(why.clone());
                    } else {
                        unread.push(why.clone());
                    }
                    rejected.push(why);
                }
            }
        }
        Err(if rejected.is_empty() && !odd.is_empty() {
            format!("{} (looked in {})", odd.join("; "), self.places(name))
        } else if rejected.is_empty() {
            format!("not found (looked in {})", self.places(name))
        } else {
            rejected.join("; ")
        })
    }

    fn places(&self, name: &str) -> String {
        let mut p: Vec<String> = Vec::new();
        if let Some(d) = &self.search.trace_dir {
            if name == "[vdso]" {
                p.push(d.join("images").display().to_string());
            } else {
                p.push(d.join("sysroot").display().to_string());
            }
        }
        p.extend(self.search.sysroots.iter().map(|s| s.display().to_string()));
        if let Some(b) = &self.search.buildid_dir {
            p.push(format!("build-id cache {}", b.display()));
        }
        if self.search.live_fs && name != "[vdso]" {
            p.push("the live filesystem".into());
        }
        p.join(", ")
    }

    /// The places to try for `name`, in order.
    fn candidates(&self, name: &str, expected: Option<&[u8]>) -> Vec<Candidate> {
        let s = &self.search;
        let mut out = Vec::new();
        let push =
            |out: &mut Vec<Candidate>, path: PathBuf, kind| out.push(Candidate { path, kind });
        if name == "[vdso]" {
            if let Some(images) = s.trace_dir.as_ref().map(|d| d.join("images")) {
                if let Some(id) = expected {
                    push(
                        &mut out,
                        images.join(format!("vdso-{}.so", hex(id))),
                        Kind::Copy,
                    );
                }
                push(&mut out, images.join("vdso.so"), Kind::Copy);
                let mut others: Vec<PathBuf> = std::fs::read_dir(&images)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("vdso-") && n.ends_with(".so"))
                    })
                    .collect();
                if others.len() == 1 && expected.is_none() {
                    push(&mut out, others.remove(0), Kind::Guess);
                }
            }
            if let (Some(cache), Some(id)) = (&s.buildid_dir, expected) {
                let h = hex(id);
                push(
                    &mut out,
                    cache.join("[vdso]").join(&h).join("vdso"),
                    Kind::Copy,
                );
                let (a, b) = h.split_at(2.min(h.len()));
                push(
                    &mut out,
                    cache.join(".build-id").join(a).join(b).join("vdso"),
                    Kind::Copy,
                );
            }
            return out;
        }
        let rel = Path::new(name.trim_start_matches('/'));
        for root in s.roots() {
            push(&mut out, root.join(rel), Kind::Copy);
        }
        if let (Some(cache), Some(id)) = (&s.buildid_dir, expected) {
            let h = hex(id);
            let (a, b) = h.split_at(2.min(h.len()));
            let link = cache.join(".build-id").join(a).join(b);
            push(&mut out, link.join("elf"), Kind::Copy);
            push(&mut out, link, Kind::Copy);
            push(&mut out, cache.join(rel).join(&h).join("elf"), Kind::Copy);
        }
        if s.live_fs && name.starts_with('/') {
            push(&mut out, PathBuf::from(name), Kind::Live);
        }
        out
    }

    /// Loads a candidate and checks it against what was recorded.
    fn accept(
        &self,
        file: &MappedFile,
        name: &str,
        c: &Candidate,
        expected: Option<&[u8]>,
    ) -> Result<Arc<Image>, ImageError> {
        let known = self
            .by_path
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&c.path)
            .cloned();
        let image = match known {
            Some(i) => i,
            None => {
                let i = Arc::new(Image::load(&file.filename, &c.path, self.search.clone())?);
                self.by_path
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry(c.path.clone())
                    .or_insert(i)
                    .clone()
            }
        };
        if let Some(expected) = expected {
            if image.build_id.as_deref() != Some(expected) {
                return Err(ImageError::BuildIdMismatch {
                    path: c.path.clone(),
                    expected: hex(expected),
                    found: image.build_id.as_deref().map_or("(none)".into(), hex),
                });
            }
            return Ok(image);
        }
        match c.kind {
            Kind::Copy => {}
            Kind::Guess => self.warn(format!(
                "{name}: no build-id recorded; using {} as the only vDSO image in the trace",
                c.path.display()
            )),
            Kind::Live => {
                self.notes
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .unverified
                    .insert(c.path.clone());
                if !same_inode(&c.path, &file.file_id) {
                    let mut notes = self.notes.lock().unwrap_or_else(|e| e.into_inner());
                    if !notes.unchecked.iter().any(|n| n == name) {
                        if notes.unchecked_at.is_none() {
                            notes.unchecked_at = Some(notes.warnings.len());
                        }
                        notes.unchecked.push(name.to_owned());
                    }
                } else if let Some(when) = changed_since(&c.path, self.search.recorded_by) {
                    // Filesystems reuse inode numbers: a program rebuilt in
                    // place often gets the one it had.
                    self.warn(format!(
                        "{name}: no build-id recorded, and the file on this machine, though it has the recorded inode, was modified {when} after the recording was written: it was probably rebuilt or replaced since, and decode errors in it (bad instructions, bad returns) would come from that. Decode with the program as it was (--sysroot), or record with build-ids"
                    ));
                }
            }
        }
        Ok(image)
    }

    /// The kernel image (`--vmlinux`, else `kcore_dir/kcore`), when available.
    /// A vmlinux whose build-id differs from the recorded
    /// `[kernel.kallsyms]` one is a warning and is not used. kcore carries no
    /// build-id; its symbols come from `kcore_dir/kallsyms`, else from perf's
    /// build-id cache (`.build-id/xx/yyyy…/kallsyms`).
    pub fn kernel(&self) -> Option<Arc<Image>> {
        self.kernel
            .get_or_init(|| self.resolve_kernel())
            .as_ref()
            .ok()
            .cloned()
    }

    fn resolve_kernel(&self) -> Lookup {
        let s = &self.search;
        let name = "[kernel.kallsyms]";
        let expected = self
            .known_build_ids
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned();
        let mut reasons = Vec::new();
        if let Some(v) = &s.vmlinux {
            match Image::load(name, v, s.clone()) {
                Ok(img) => match (&expected, &img.build_id) {
                    (Some(want), Some(got)) if want != got => {
                        let e = ImageError::BuildIdMismatch {
                            path: v.clone(),
                            expected: hex(want),
                            found: hex(got),
                        };
                        self.warn(e.to_string());
                        reasons.push(e.to_string());
                    }
                    _ => return Ok(Arc::new(img)),
                },
                Err(e) => reasons.push(e.to_string()),
            }
        }
        let kcore = s.kcore_dir.as_ref().map(|d| d.join("kcore"));
        match kcore.filter(|k| k.is_file()) {
            Some(kcore) => {
                let mut image = Image::load(name, &kcore, s.clone()).map_err(|e| e.to_string())?;
                let beside = kcore.with_file_name("kallsyms");
                let cached = match (&s.buildid_dir, &expected) {
                    (Some(cache), Some(id)) => {
                        let h = hex(id);
                        let (a, b) = h.split_at(2.min(h.len()));
                        Some(cache.join(".build-id").join(a).join(b).join("kallsyms"))
                    }
                    _ => None,
                };
                image.kallsyms = std::iter::once(beside).chain(cached).find(|p| p.is_file());
                Ok(Arc::new(image))
            }
            None => {
                reasons.push(match &s.kcore_dir {
                    Some(d) => format!("{} not found", d.join("kcore").display()),
                    None => "no kcore_dir".into(),
                });
                if s.vmlinux.is_none() {
                    reasons.push("no --vmlinux given".into());
                }
                Err(reasons.join("; "))
            }
        }
    }

    /// Records that `[start, end)` of `pid` was left undecoded because `file`
    /// was missing.
    pub fn note_undecoded(&self, file: &MappedFile, pid: u32, start: u64, end: u64) {
        if is_not_a_file(&file.filename) {
            return;
        }
        let key: Key = (file.filename.clone(), Identity::from(&file.file_id));
        let mut notes = self.notes.lock().unwrap_or_else(|e| e.into_inner());
        let entry = notes
            .undecoded
            .entry(key)
            .or_insert_with(|| (file.clone(), Vec::new()));
        add_range(&mut entry.1, (pid, start, end.max(start)));
    }

    /// Missing images, each listed once (per name and recorded identity) with
    /// the reason and the ranges left undecoded, by name.
    pub fn missing(&self) -> Vec<MissingImage> {
        let mut out: BTreeMap<Key, MissingImage> = BTreeMap::new();
        let failed: Vec<(Key, String)> = {
            let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            cache
                .iter()
                .filter_map(|(k, slot)| match slot.get() {
                    Some(Err(reason)) => Some((k.clone(), reason.clone())),
                    _ => None,
                })
                .collect()
        };
        for (key, reason) in failed {
            let build_id = match &key.1 {
                Identity::BuildId(b) => Some(b.clone()),
                _ => self
                    .known_build_ids
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&key.0)
                    .cloned(),
            };
            out.insert(
                key.clone(),
                MissingImage {
                    name: key.0,
                    build_id,
                    reason,
                    ranges: Vec::new(),
                },
            );
        }
        let undecoded: Vec<(Key, MappedFile, Ranges)> = {
            let notes = self.notes.lock().unwrap_or_else(|e| e.into_inner());
            notes
                .undecoded
                .iter()
                .map(|(k, (f, r))| (k.clone(), f.clone(), r.clone()))
                .collect()
        };
        for (key, file, ranges) in undecoded {
            let reason = if is_kernel_name(&file.filename) {
                match self.kernel.get_or_init(|| self.resolve_kernel()) {
                    Err(r) => r.clone(),
                    Ok(img) => found_but_unused(img, true),
                }
            } else {
                match self.lookup(&file) {
                    Err(r) => r,
                    Ok(img) => found_but_unused(&img, false),
                }
            };
            let build_id = self.recorded_build_id(&file);
            let m = out.entry(key).or_insert_with(|| MissingImage {
                name: file.filename.clone(),
                build_id,
                reason,
                ranges: Vec::new(),
            });
            m.ranges = ranges;
        }
        out.into_values().collect()
    }

    /// The files of this machine used for recorded ones without a build-id
    /// to check them by (they may have changed since the recording).
    pub fn unverified(&self) -> Vec<PathBuf> {
        let notes = self.notes.lock().unwrap_or_else(|e| e.into_inner());
        notes.unverified.iter().cloned().collect()
    }

    /// The warning for a decode that met `errors` decode errors (by name)
    /// while code came from [`ImageStore::unverified`] files: the trace
    /// itself says that the code it ran was not the code read (a changed
    /// instruction stream gives bad instructions, bad returns and bad
    /// queries), so those files are named as the likely cause.
    pub fn changed_code_hint(&self, errors: &BTreeMap<String, u64>) -> Option<String> {
        // Errors a changed image gives; not lost data, overflows or code
        // without any image.
        let n: u64 = errors
            .iter()
            .filter(|(k, _)| !k.starts_with("sync:") && !k.contains("Nomap"))
            .map(|(_, n)| n)
            .sum();
        let files = self.unverified();
        if n == 0 || files.is_empty() {
            return None;
        }
        let shown: Vec<String> = files
            .iter()
            .take(5)
            .map(|p| p.display().to_string())
            .collect();
        let more = match files.len() > 5 {
            true => format!(" and {} more", files.len() - 5),
            false => String::new(),
        };
        Some(format!(
            "{n} decode error{} while code came from {}{more}, taken from this machine with no \
             build-id recorded to check {}: if {} changed since the recording (rebuilt, \
             upgraded), the errors come from that; decode with the files as they were \
             (--sysroot), or record with build-ids",
            if n == 1 { "" } else { "s" },
            shown.join(", "),
            if files.len() == 1 { "it by" } else { "them by" },
            if files.len() == 1 { "it" } else { "one" },
        ))
    }

    /// Build-id mismatches and other warnings, each once, in the order they
    /// arose.
    /// At most [`MAX_WARNINGS`] of them, then a count of the others.
    pub fn warnings(&self) -> Vec<String> {
        let notes = self.notes.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = notes.warnings.clone();
        if let Some(at) = notes.unchecked_at {
            let w = unchecked_warning(&notes.unchecked);
            out.insert(at.min(out.len()), crate::text::printable(&w).into_owned());
        }
        if notes.dropped > 0 {
            out.push(format!(
                "and {} more warning{} about images, not shown",
                notes.dropped,
                if notes.dropped == 1 { "" } else { "s" }
            ));
        }
        out
    }

    /// `msg` is kept with its control characters escaped: it names files
    /// the recording names.
    fn warn(&self, msg: String) {
        let msg = crate::text::printable(&msg).into_owned();
        let mut notes = self.notes.lock().unwrap_or_else(|e| e.into_inner());
        if notes.warnings.len() >= MAX_WARNINGS {
            if notes.seen.insert(msg) {
                notes.dropped += 1;
            }
            return;
        }
        if notes.seen.insert(msg.clone()) {
            notes.warnings.push(msg);
        }
    }
}

/// The images as the decode stage reads them.
impl CodeImages for ImageStore {
    fn add_known_build_ids(&self, ids: &[(String, Vec<u8>)]) {
        ImageStore::add_known_build_ids(self, ids.iter().cloned());
    }

    fn kernel_code(&self) -> Option<KernelCode> {
        let img = self.kernel()?;
        Some(KernelCode {
            path: img.path.clone(),
            segments: img
                .segments
                .iter()
                .filter(|s| s.executable)
                .map(|s| CodeSegment {
                    file_offset: s.file_offset,
                    vaddr: s.vaddr,
                    filesz: s.filesz,
                })
                .collect(),
        })
    }

    fn user_code(&self, file: &MappedFile) -> Option<CodeFile> {
        if is_kernel_name(&file.filename) {
            return None;
        }
        let img = self.get(file)?;
        Some(CodeFile {
            path: img.path.clone(),
            size: img.size,
        })
    }

    fn note_undecoded(&self, file: &MappedFile, pid: u32, start: u64, end: u64) {
        ImageStore::note_undecoded(self, file, pid, start, end);
    }
}

/// The one warning about the recorded files (`names`) that had no build-id
/// and were taken from this machine's files of that name, not the recorded
/// inode.
fn unchecked_warning(names: &[String]) -> String {
    if let [name] = names {
        return format!(
            "{name}: no build-id recorded; using the file on this machine, which may differ from the one traced (copy it into the trace's sysroot/ or use --sysroot)"
        );
    }
    let more = names.len().saturating_sub(UNCHECKED_SHOWN);
    format!(
        "{} files with no build-id recorded: using the files of those names on this machine, which may differ from the ones traced: {}{} (copy them into the trace's sysroot/ or use --sysroot)",
        names.len(),
        names[..names.len().min(UNCHECKED_SHOWN)].join(", "),
        if more > 0 { format!(" and {more} more") } else { String::new() }
    )
}

/// Adds a range, merging it with the ranges of the same pid it overlaps or
/// touches; keeps the list sorted.
fn add_range(ranges: &mut Vec<(u32, u64, u64)>, r: (u32, u64, u64)) {
    let (pid, mut start, mut end) = r;
    ranges.retain(|&(p, s, e)| {
        if p == pid && s <= end && start <= e {
            start = start.min(s);
            end = end.max(e);
            false
        } else {
            true
        }
    });
    let at = ranges.partition_point(|&x| x < (pid, start, end));
    ranges.insert(at, (pid, start, end));
}

/// How long after `recorded` the file at `path` was last modified, when it
/// was (more than a second after: clocks and copies blur the edge).
fn changed_since(path: &Path, recorded: Option<std::time::SystemTime>) -> Option<String> {
    let recorded = recorded?;
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    let after = modified.duration_since(recorded).ok()?;
    (after.as_secs() >= 1).then(|| format!("{} s", after.as_secs()))
}

/// Does the live file at `path` have the inode MMAP2 recorded?
fn same_inode(path: &Path, id: &Option<FileId>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(FileId::Inode { maj, min, ino, .. }) = id else {
        return false;
    };
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    let dev = meta.dev();
    // glibc's gnu_dev_major/minor.
    let dev_maj = (((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0fff)) as u32;
    let dev_min = (((dev >> 12) & 0xffff_ff00) | (dev & 0xff)) as u32;
    meta.ino() == *ino && dev_maj == *maj && dev_min == *min
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A copy the user or the recorder provided (sysroot, build-id cache, trace images).
    Copy,
    /// A guess among the trace's images.
    Guess,
    /// The decoding machine's own file.
    Live,
}

struct Candidate {
    path: PathBuf,
    kind: Kind,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 executable: the header and one PT_LOAD of `filesz`
    /// bytes at file offset 0, vaddr 0x400000.
    fn tiny_elf(filesz: u64) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2; // ELFCLASS64
        b[5] = 1; // little-endian
        b[6] = 1; // EV_CURRENT
        b[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
        b[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
        b[20..24].copy_from_slice(&1u32.to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        b[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
        b[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        b[56..58].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
        let mut ph = vec![0u8; 56];
        ph[0..4].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD
        ph[4..8].copy_from_slice(&5u32.to_le_bytes()); // R+X
        ph[16..24].copy_from_slice(&0x40_0000u64.to_le_bytes());
        ph[24..32].copy_from_slice(&0x40_0000u64.to_le_bytes());
        ph[32..40].copy_from_slice(&filesz.to_le_bytes());
        ph[40..48].copy_from_slice(&filesz.wrapping_add(0x100).to_le_bytes());
        b.extend(ph);
        b
    }

    fn load(bytes: Vec<u8>) -> Result<Image, ImageError> {
        Image::from_bytes(
            "/x",
            Path::new("/x"),
            FileBytes::Read(bytes),
            Arc::new(SearchPath::default()),
        )
    }

    #[test]
    fn hand_built_elf_segments_and_translation() {
        let img = load(tiny_elf(120)).unwrap();
        assert!(img.is_elf);
        assert_eq!(
            img.segments,
            vec![Segment {
                file_offset: 0,
                vaddr: 0x40_0000,
                filesz: 120,
                memsz: 376,
                executable: true
            }]
        );
        assert_eq!(img.offset_to_vaddr(0x10), Some(0x40_0010));
        assert_eq!(img.offset_to_vaddr(120), None);
        assert_eq!(img.vaddr_to_offset(0x40_0077), Some(0x77));
        // .bss-like tail: in memory, not in the file.
        assert_eq!(img.vaddr_to_offset(0x40_0080), None);
        assert_eq!(img.build_id, None);
    }

    #[test]
    fn segment_beyond_the_file_is_truncation() {
        let e = load(tiny_elf(0x1000)).unwrap_err();
        assert!(
            matches!(
                e,
                ImageError::Truncated {
                    size: 0x1000,
                    file_size: 120,
                    ..
                }
            ),
            "{e}"
        );
        let e = load(tiny_elf(u64::MAX)).unwrap_err();
        assert!(matches!(e, ImageError::Truncated { .. }), "{e}");
    }

    #[test]
    fn elf_cut_in_its_headers_is_malformed() {
        for cut in [4, 20, 63, 64, 100] {
            let e = load(tiny_elf(120)[..cut].to_vec()).unwrap_err();
            assert!(matches!(e, ImageError::MalformedElf { .. }), "{cut}: {e}");
        }
    }

    #[test]
    fn non_elf_files_are_raw_bytes() {
        let img = load(b"\x90\x90\xc3".to_vec()).unwrap();
        assert!(!img.is_elf);
        assert!(img.segments.is_empty());
        assert_eq!(img.bytes(), b"\x90\x90\xc3");
        assert_eq!(img.offset_to_vaddr(0), None);
    }

    #[test]
    fn ranges_merge_per_pid() {
        let mut r = Vec::new();
        add_range(&mut r, (1, 10, 20));
        add_range(&mut r, (2, 15, 16));
        add_range(&mut r, (1, 20, 30));
        add_range(&mut r, (1, 40, 50));
        add_range(&mut r, (1, 5, 12));
        assert_eq!(r, vec![(1, 5, 30), (1, 40, 50), (2, 15, 16)]);
        add_range(&mut r, (1, 0, 100));
        assert_eq!(r, vec![(1, 0, 100), (2, 15, 16)]);
    }

    #[test]
    fn names_that_are_not_files() {
        for n in [
            "//anon",
            "[anon:dalvik]",
            "[heap]",
            "[stack]",
            "[stack:123]",
            "",
            "/memfd:jit (deleted)",
        ] {
            assert!(is_not_a_file(n), "{n}");
        }
        for n in ["/usr/lib/libc.so.6", "[vdso]", "[kernel.kallsyms]_text"] {
            assert!(!is_not_a_file(n), "{n}");
        }
        assert!(is_kernel_name("[kernel.kallsyms]_text"));
        assert_eq!(hex(&[0, 0xab, 0x10]), "00ab10");
    }

    /// Issue 44: a program without a build-id rebuilt in place keeps its
    /// inode number (ext4 reuses it): the inode check alone took it for the
    /// very file. Newer than the recording, it is named as probably changed.
    #[test]
    fn a_live_file_with_the_recorded_inode_but_newer_is_named() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let prog = dir.path().join("prog");
        std::fs::write(&prog, tiny_elf(120)).unwrap();
        let m = std::fs::metadata(&prog).unwrap();
        let dev = m.dev();
        let file = MappedFile {
            filename: prog.display().to_string(),
            file_id: Some(FileId::Inode {
                maj: (((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0fff)) as u32,
                min: (((dev >> 12) & 0xffff_ff00) | (dev & 0xff)) as u32,
                ino: m.ino(),
                ino_generation: 0,
            }),
            prot: None,
            flags: None,
        };
        let modified = m.modified().unwrap();
        let store = |recorded_by| {
            ImageStore::new(SearchPath {
                buildid_dir: None,
                recorded_by,
                ..SearchPath::default()
            })
        };
        // Recorded after the file was written: the very file, no warning.
        let s = store(Some(modified + std::time::Duration::from_secs(5)));
        assert!(s.get(&file).is_some());
        assert!(s.warnings().is_empty(), "{:?}", s.warnings());
        // Recorded a minute before it was last written.
        let s = store(Some(modified - std::time::Duration::from_secs(60)));
        assert!(s.get(&file).is_some());
        let w = s.warnings();
        assert!(
            w.len() == 1 && w[0].contains("rebuilt or replaced") && w[0].contains("60 s"),
            "{w:?}"
        );
    }

    #[test]
    fn deleted_suffix_is_dropped_for_lookup() {
        let store = ImageStore::new(SearchPath {
            buildid_dir: None,
            ..SearchPath::default()
        });
        let file = MappedFile {
            filename: "/bin/true (deleted)".into(),
            file_id: None,
            prot: None,
            flags: None,
        };
        let img = store.get(&file).expect("/bin/true");
        assert_eq!(img.path, Path::new("/bin/true"));
        assert_eq!(img.recorded_name, "/bin/true (deleted)");
    }

    /// A candidate that is a symbolic link loop is said as one, not as
    /// "not found" (a sysroot whose copy of the binary is a looping link).
    #[test]
    fn a_link_loop_is_named_not_missing() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("bin")).unwrap();
        let looped = root.path().join("bin/prog");
        std::os::unix::fs::symlink(&looped, &looped).unwrap();
        let store = ImageStore::new(SearchPath {
            sysroots: vec![root.path().to_owned()],
            buildid_dir: None,
            live_fs: false,
            ..SearchPath::default()
        });
        let file = MappedFile {
            filename: "/bin/prog".into(),
            file_id: None,
            prot: None,
            flags: None,
        };
        let e = store.lookup(&file).unwrap_err();
        assert!(
            e.contains(&format!("{} is a symbolic link loop", looped.display()))
                && !e.contains("not found"),
            "{e}"
        );
    }
}
