//! The bytes of a perf.data file: memory-mapped when it is a regular file (so
//! AUXTRACE payloads are borrowed from the page cache, never copied), read
//! into memory when it is a pipe or a FIFO (`perf record -o -` output).
//! Other readers of whole files (ptdec's ELF images and raw code) map them
//! through [`FileBytes::map_file`] too, so no other crate needs unsafe code
//! to map a file.
//!
//! A file truncated by another process while it is mapped makes the reader
//! fault (SIGBUS) when it touches the missing pages. [`name_files_on_sigbus`]
//! installs a handler that names the file and ends the process with status
//! 1 instead of the bare signal: every mapping is noted in a fixed table
//! the handler can read without locks (a message per file, made when it
//! was mapped). Hand-written (no crate does this): `signal-hook` lets a
//! handler run, but not name a mapping from the fault's address.
//!
//! A pipe or FIFO is read into memory up to [`STREAM_MAX`] bytes.
//!
//! This module holds the crate's unsafe code: mapping a file, dropping its
//! pages, the SIGBUS handler. Everything else in `sideband` is safe code
//! over the `&[u8]` this hands out (the crate root allows unsafe code in
//! this module only).

use std::fs::File;
use std::io::{self, Read};
use std::ops::Deref;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Most bytes a perf.data read from a pipe or FIFO may take (it is held in
/// memory whole): 4 GiB. Save a longer stream to a file (`perf record -o
/// -`'s output redirected) and decode that: files are mapped, not read.
pub const STREAM_MAX: u64 = 4 << 30;

/// Most bytes read from a file whose size is 0 though it is not empty (a
/// /proc or sysfs file): 64 MiB.
pub const UNSIZED_MAX: u64 = 64 << 20;

/// A whole input file as bytes.
#[derive(Debug)]
pub enum FileBytes {
    /// A read-only private mapping of a regular file.
    Mapped(Mapping),
    /// The contents of a pipe, FIFO or empty file.
    Read(Vec<u8>),
}

/// A file's mapping, noted for the SIGBUS handler while it lives.
#[derive(Debug)]
pub struct Mapping {
    map: memmap2::Mmap,
    slot: Option<usize>,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            forget_mapping(i);
        }
    }
}

/// Mappings the SIGBUS handler can name (more are mapped, unnamed).
const SLOTS: usize = 256;

/// One noted mapping: its address range and the message naming its file
/// (leaked `Box<[u8]>` while noted; null when free).
struct Slot {
    start: AtomicUsize,
    len: AtomicUsize,
    msg: AtomicPtr<u8>,
    msg_len: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    msg: AtomicPtr::new(std::ptr::null_mut()),
    msg_len: AtomicUsize::new(0),
};
static NOTED: [Slot; SLOTS] = [FREE; SLOTS];
/// The program name the messages start with, once the handler is on.
static PROGRAM: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Notes a mapping of `file` at `map` for the handler; its slot.
fn note_mapping(file: &File, map: &memmap2::Mmap) -> Option<usize> {
    let prog = PROGRAM.get()?;
    let path = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .map_or_else(|_| "an input file".to_string(), |p| p.display().to_string());
    let msg = format!(
        "{prog}: {path} was truncated or rewritten while {prog} read it (SIGBUS); \
         nothing more was written: decode a copy that nothing writes to\n"
    )
    .into_bytes()
    .into_boxed_slice();
    let i = NOTED.iter().position(|s| {
        s.msg_len
            .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    })?;
    let s = &NOTED[i];
    let len = msg.len();
    s.msg
        .store(Box::into_raw(msg).cast::<u8>(), Ordering::Release);
    s.len.store(map.len(), Ordering::Release);
    s.start.store(map.as_ptr() as usize, Ordering::Release);
    s.msg_len.store(len, Ordering::Release);
    Some(i)
}

fn forget_mapping(i: usize) {
    let s = &NOTED[i];
    s.start.store(0, Ordering::Release);
    let len = s.msg_len.swap(usize::MAX, Ordering::AcqRel);
    let p = s.msg.swap(std::ptr::null_mut(), Ordering::AcqRel);
    if !p.is_null() {
        // SAFETY: `p` and `len` are the `Box<[u8]>` leaked by
        // `note_mapping` for this slot, taken out of it once (swapped to
        // null) so that nothing else frees or reads it afterwards.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)) });
    }
    s.msg_len.store(0, Ordering::Release);
}

/// Installs the SIGBUS handler that names the mapped file a fault hit
/// (messages start with `program`) and exits with status 1; for binaries
/// (ptdec), not libraries. Files mapped before the call are not named.
pub fn name_files_on_sigbus(program: &'static str) -> io::Result<()> {
    let _ = PROGRAM.set(program);
    extern "C" fn on_sigbus(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
        // SAFETY: the kernel hands a SA_SIGINFO handler a valid siginfo.
        let addr = unsafe { (*info).si_addr() } as usize;
        let mut said = false;
        for s in &NOTED {
            let start = s.start.load(Ordering::Acquire);
            let len = s.len.load(Ordering::Acquire);
            if start == 0 || addr < start || addr - start >= len {
                continue;
            }
            let p = s.msg.load(Ordering::Acquire);
            let n = s.msg_len.load(Ordering::Acquire);
            if !p.is_null() && n != usize::MAX && n != 0 {
                // SAFETY: a live slot's message (the mapping faulting now
                // is alive, so its slot is not being freed); write(2) is
                // async-signal-safe.
                unsafe { libc::write(2, p.cast(), n) };
                said = true;
            }
            break;
        }
        if !said {
            // A mapping not noted: libipt's of a binary's code, or one
            // past the slots. Named as what it can be.
            let prog = PROGRAM.get().copied().unwrap_or("ptdec");
            let m: &[u8] = b": an input file (the trace's data, or a binary or library whose code \
                is read) was truncated or rewritten while it was read (SIGBUS); nothing more was \
                written: decode with copies that nothing writes to\n";
            // SAFETY: static buffers; write(2) is async-signal-safe.
            unsafe {
                libc::write(2, prog.as_ptr().cast(), prog.len());
                libc::write(2, m.as_ptr().cast(), m.len());
            }
        }
        // SAFETY: _exit is async-signal-safe; returning would fault again.
        unsafe { libc::_exit(1) };
    }
    // SAFETY: a zeroed sigaction is valid (no flags, empty mask) before
    // the fields below are set; the handler only reads atomics and calls
    // async-signal-safe functions.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigbus as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// What `meta` is when it is not a regular file ("a directory", "a
/// FIFO", "a device", "a socket"), for messages that say so.
pub fn not_a_file(meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() || t.is_block_device() {
        Some("a device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        None
    }
}

impl FileBytes {
    /// Maps the perf.data at `path` when it is a regular file; reads it
    /// when it is a stream ([`FileBytes::read_all`]).
    pub fn open(path: &Path) -> io::Result<FileBytes> {
        Self::from_file(File::open(path)?)
    }

    /// [`FileBytes::open`] for a file the caller opened (ptdec opens its
    /// inputs itself, to record which files they are).
    pub fn from_file(file: File) -> io::Result<FileBytes> {
        let meta = file.metadata()?;
        if meta.is_file() && meta.len() > 0 {
            Self::map_file(file)
        } else {
            Self::read_all(file)
        }
    }

    /// Maps an opened file whatever it holds (an ELF image, raw code, a
    /// perf.data), or reads it when it cannot be mapped (an empty file,
    /// some special filesystems). Meant for regular files (the caller
    /// checks); anything else is read to its end, unchecked.
    pub fn map_file(mut file: File) -> io::Result<FileBytes> {
        let mut map_error = None;
        if file.metadata()?.len() > 0 {
            // SAFETY: the mapping is read-only and private and lives as
            // long as the FileBytes. If another process truncates or
            // rewrites the file while it is mapped, reads may see changed
            // bytes or fault (SIGBUS), the risk perf and every debugger take
            // with the files they read; every reader of these bytes treats
            // them as untrusted (sizes checked, no panics), a recorder never
            // rewrites a finished trace in place, and a trace dir or sysroot
            // is not written during a decode.
            match unsafe { memmap2::Mmap::map(&file) } {
                Ok(map) => {
                    let slot = note_mapping(&file, &map);
                    return Ok(FileBytes::Mapped(Mapping { map, slot }));
                }
                // Some filesystems cannot map files (and an address-space
                // limit refuses big mappings): read it, within the bound.
                Err(e) => map_error = Some(e),
            }
        }
        // A file whose size the filesystem does not tell (/proc, sysfs)
        // may hold far more than it says: /proc/self/pagemap reads as 8
        // bytes per page of the address space, 256 GiB. Read it only up to
        // a bound.
        // Read in blocks of a multiple of 8 bytes (pagemap refuses others).
        let mut bytes = Vec::new();
        let mut block = vec![0u8; 64 << 10];
        loop {
            let n = match file.read(&mut block) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            bytes.extend_from_slice(&block[..n]);
            if bytes.len() as u64 > UNSIZED_MAX {
                break;
            }
        }
        if let (Some(e), true) = (&map_error, bytes.len() as u64 > UNSIZED_MAX) {
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "it cannot be mapped into memory ({e}) and is over {} MiB, the most ptdec \
                     reads into memory instead: raise the address-space limit (ulimit -v), or \
                     copy it to a filesystem that can map files (ext4, tmpfs)",
                    UNSIZED_MAX >> 20
                ),
            ));
        }
        if bytes.len() as u64 > UNSIZED_MAX {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the file says it is empty but holds more than {} MiB (a /proc or sysfs \
                     file?): ptdec reads such a file only up to that size; copy what it \
                     holds into a regular file",
                    UNSIZED_MAX >> 20
                ),
            ));
        }
        Ok(FileBytes::Read(bytes))
    }

    /// Reads a stream to its end (pipe-mode input on stdin). A stream that
    /// does not start with perf.data's magic is refused after its first 8
    /// bytes, so that a device that never ends (`/dev/zero`, a terminal)
    /// is not read until memory runs out.
    pub fn read_all(input: impl Read) -> io::Result<FileBytes> {
        Self::read_stream(input, STREAM_MAX)
    }

    /// [`FileBytes::read_all`] holding at most `cap` bytes.
    fn read_stream(mut input: impl Read, cap: u64) -> io::Result<FileBytes> {
        let mut bytes = Vec::new();
        (&mut input).take(8).read_to_end(&mut bytes)?;
        if let Ok(m) = <[u8; 8]>::try_from(&bytes[..]) {
            let magic = u64::from_le_bytes(m);
            if magic != crate::file::MAGIC && magic != crate::file::MAGIC.swap_bytes() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "not perf.data: it starts with {:02x?}, not the magic PERFILE2",
                        &bytes[..]
                    ),
                ));
            }
        }
        let got = (&mut input)
            .take(cap.saturating_sub(8))
            .read_to_end(&mut bytes)?;
        if got as u64 == cap.saturating_sub(8) && input.read(&mut [0u8])? > 0 {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!(
                    "a perf.data stream over {} MiB: a pipe or FIFO is held in memory, at most \
                     that much; save it to a file and decode the file (files are mapped, not read)",
                    cap >> 20
                ),
            ));
        }
        Ok(FileBytes::Read(bytes))
    }
}

impl FileBytes {
    /// Drops the pages of `part` (a slice of these bytes) from the
    /// process's resident memory, when mapped: a decoder that has gone
    /// past them keeps its peak RSS at what it is working on, not at the
    /// size of the trace. The bytes stay readable (a later read faults
    /// them in again from the page cache or the file). Only whole pages
    /// inside `part` are dropped; anything else is a no-op.
    pub fn release(&self, part: &[u8]) {
        let FileBytes::Mapped(Mapping { map, .. }) = self else {
            return;
        };
        let base = map.as_ptr() as usize;
        let (lo, hi) = (part.as_ptr() as usize, part.as_ptr() as usize + part.len());
        if lo < base || hi > base + map.len() {
            return;
        }
        const PAGE: usize = 4096;
        let start = (lo - base).div_ceil(PAGE) * PAGE;
        let end = (hi - base) / PAGE * PAGE;
        if start < end {
            // SAFETY: `map` is a read-only, file-backed shared mapping
            // (memmap2's `Mmap::map`): MADV_DONTNEED only unmaps its pages
            // from this process, and the next access reads them again from
            // the page cache or the file, unchanged. (It would zero pages
            // of anonymous or privately written mappings; this is neither.)
            // The range lies inside the mapping (checked above).
            let _ = unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
            };
        }
    }
}

impl AsRef<[u8]> for FileBytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(m) => &m.map,
            FileBytes::Read(v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_a_file_and_reads_a_pipe() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"PERFILE2 and more").unwrap();
        let b = FileBytes::open(&p).unwrap();
        assert!(matches!(b, FileBytes::Mapped(_)));
        assert_eq!(&b[..8], b"PERFILE2");
        let r = FileBytes::read_all(&b"abc"[..]).unwrap();
        assert_eq!(&*r, b"abc");
        std::fs::write(&p, b"").unwrap();
        assert!(FileBytes::open(&p).unwrap().is_empty());
        assert!(FileBytes::open(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn map_file_takes_any_content() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"\x7fELF, not perf.data").unwrap();
        let b = FileBytes::map_file(File::open(&p).unwrap()).unwrap();
        assert!(matches!(b, FileBytes::Mapped(_)));
        assert_eq!(&*b, b"\x7fELF, not perf.data");
        std::fs::write(&p, b"").unwrap();
        let b = FileBytes::map_file(File::open(&p).unwrap()).unwrap();
        assert!(matches!(b, FileBytes::Read(ref v) if v.is_empty()));
        // A /proc file says it is empty: read up to the bound, no further
        // (pagemap would be 256 GiB).
        let b = FileBytes::map_file(File::open("/proc/self/stat").unwrap()).unwrap();
        assert!(!b.is_empty());
        let e = FileBytes::map_file(File::open("/proc/self/pagemap").unwrap()).unwrap_err();
        assert!(e.to_string().contains("says it is empty"), "{e}");
    }

    #[test]
    fn a_stream_that_is_not_perf_data_is_refused_at_once() {
        // What /dev/zero gives: refused after 8 bytes, not read to the end.
        let mut zeros = std::io::repeat(0).take(1 << 20);
        let e = FileBytes::read_all(&mut zeros).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("PERFILE2"), "{e}");
        assert_eq!(zeros.limit(), (1 << 20) - 8);
        let e = FileBytes::open(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        // A perf.data stream is read whole, up to the cap.
        let stream = [&b"PERFILE2"[..], &[0x10, 0, 0, 0, 0, 0, 0, 0], b"rest"].concat();
        assert_eq!(&*FileBytes::read_all(&stream[..]).unwrap(), &stream[..]);
        let endless = (&stream[..8]).chain(std::io::repeat(1));
        let e = FileBytes::read_stream(endless, 2 << 20).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
        assert!(e.to_string().contains("over 2 MiB"), "{e}");
        let exact = [&stream[..8], &[1u8; (2 << 20) - 8][..]].concat();
        assert_eq!(
            FileBytes::read_stream(&exact[..], 2 << 20).unwrap().len(),
            2 << 20
        );
    }
}
