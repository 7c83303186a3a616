//! The bytes of a perf.data file: memory-mapped when it is a regular file (so
//! AUXTRACE payloads are borrowed from the page cache, never copied), read
//! into memory when it is a pipe or a FIFO (`perf record -o -` output).
//! Other readers of whole files (ptdec's ELF images and raw code) map them
//! through [`FileBytes::map_file`] too, so no other crate needs unsafe code
//! to map a file.
//!
//! This is the crate's one unsafe block: mapping a file. Everything else in
//! `sideband` is safe code over the `&[u8]` this hands out (the crate root
//! allows unsafe code in this module only).

use std::fs::File;
use std::io::{self, Read};
use std::ops::Deref;
use std::path::Path;

/// A whole input file as bytes.
#[derive(Debug)]
pub enum FileBytes {
    /// A read-only private mapping of a regular file.
    Mapped(memmap2::Mmap),
    /// The contents of a pipe, FIFO or empty file.
    Read(Vec<u8>),
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
        if file.metadata()?.len() > 0 {
            // SAFETY: the mapping is read-only and private and lives as
            // long as the FileBytes. If another process truncates or
            // rewrites the file while it is mapped, reads may see changed
            // bytes or fault (SIGBUS), the risk perf and every debugger take
            // with the files they read; every reader of these bytes treats
            // them as untrusted (sizes checked, no panics), a recorder never
            // rewrites a finished trace in place, and a trace dir or sysroot
            // is not written during a decode.
            if let Ok(map) = unsafe { memmap2::Mmap::map(&file) } {
                return Ok(FileBytes::Mapped(map));
            }
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(FileBytes::Read(bytes))
    }

    /// Reads a stream to its end (pipe-mode input on stdin). A stream that
    /// does not start with perf.data's magic is refused after its first 8
    /// bytes, so that a device that never ends (`/dev/zero`, a terminal)
    /// is not read until memory runs out.
    pub fn read_all(mut input: impl Read) -> io::Result<FileBytes> {
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
        input.read_to_end(&mut bytes)?;
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
        let FileBytes::Mapped(map) = self else {
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

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(m) => m,
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
        // A perf.data stream is read whole.
        let stream = [&b"PERFILE2"[..], &[0x10, 0, 0, 0, 0, 0, 0, 0], b"rest"].concat();
        assert_eq!(&*FileBytes::read_all(&stream[..]).unwrap(), &stream[..]);
    }
}
