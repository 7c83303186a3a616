//! `DIR/data`: the perf.data writer the session's writer thread owns.
//!
//! Nothing recorded may be lost when the disk fills up, so every record
//! reaches the file in one all-or-nothing append: [`Guarded`] undoes a
//! partial append (truncates back) before it reports the error, which keeps
//! the file, and the position [`FileWriter`] counts, at a record boundary.
//! Then [`OutputSink::release_reserve`] frees space held back from the start
//! (an unlinked reserve file in the trace dir, so that no process death can
//! leave it behind) so the feature sections and the header can still be
//! written: the result is a complete perf.data of everything before the
//! failure. The header is valid from the start and its data size is synced
//! at every round ([`TraceWriter::sync_header`]), so a killed ptrec leaves a
//! readable file. The AUXTRACE index is kept here, of records that really made
//! it to the file, and stored as the AUXTRACE feature at the end.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use sideband::attr::AttrSet;
use sideband::feature::{self, AuxtraceIndexEntry};
use sideband::record::{Auxtrace, Event, Record};
use sideband::writer::FileWriter;

/// Where perf.data bytes go: a file, or a test sink.
pub trait OutputSink: Write + Seek + Send {
    /// Cuts the output back to `len` bytes (undoing a partial append).
    fn truncate(&mut self, len: u64) -> io::Result<()>;
    /// Frees the space held back for finishing the file after a write
    /// failure (disk full). Default: nothing held back.
    fn release_reserve(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl OutputSink for File {
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.set_len(len)
    }
}

impl OutputSink for io::Cursor<Vec<u8>> {
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.get_mut().truncate(len as usize);
        Ok(())
    }
}

/// `DIR/data` plus a reserve holding back space for finishing the file on a
/// full disk: a file created beside `data` and unlinked at once, held open.
/// Closing it (when the file is finished, dropped, or the process dies)
/// frees the space, and there is never a name to leave behind.
#[derive(Debug)]
pub struct DataFile {
    file: File,
    reserve: Option<File>,
}

/// Default space held back for the feature sections and header: 1 MiB.
pub const DEFAULT_RESERVE: u64 = 1 << 20;

impl DataFile {
    /// Creates (truncates) `path`, mode 0600 as perf creates perf.data, and
    /// a `reserve_bytes` reserve beside it.
    pub fn create(path: &Path, reserve_bytes: u64) -> io::Result<DataFile> {
        let file = crate::outdir::create_file(path)?;
        let reserve = if reserve_bytes > 0 {
            let mut name = path.as_os_str().to_owned();
            name.push(format!(".reserve-{}", std::process::id()));
            let rpath = PathBuf::from(name);
            let mut r = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(crate::outdir::FILE_MODE)
                .open(&rpath)?;
            // Nameless from here on: the space goes with the last close.
            std::fs::remove_file(&rpath)?;
            // Real zeros, not a sparse file: the blocks must be allocated.
            let zeros = vec![0u8; 64 << 10];
            let mut left = reserve_bytes;
            while left > 0 {
                let n = left.min(zeros.len() as u64) as usize;
                r.write_all(&zeros[..n])?;
                left -= n as u64;
            }
            r.sync_all()?;
            Some(r)
        } else {
            None
        };
        Ok(DataFile { file, reserve })
    }
}

impl Write for DataFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Seek for DataFile {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.file.seek(pos)
    }
}

impl OutputSink for DataFile {
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
    fn release_reserve(&mut self) -> io::Result<()> {
        drop(self.reserve.take());
        Ok(())
    }
}

impl Drop for DataFile {
    fn drop(&mut self) {
        let _ = self.release_reserve();
    }
}

/// Makes every append all-or-nothing (see the module doc); the first
/// failure releases the sink's reserve.
pub(crate) struct Guarded {
    inner: Box<dyn OutputSink>,
    pos: u64,
    end: u64,
    released: bool,
}

impl Write for Guarded {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.pos += n as u64;
        self.end = self.end.max(self.pos);
        Ok(n)
    }

    fn write_all(&mut self, mut buf: &[u8]) -> io::Result<()> {
        let start = self.pos;
        let appending = start == self.end;
        while !buf.is_empty() {
            let r = match self.inner.write(buf) {
                Ok(0) => Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "the output accepted no more bytes",
                )),
                Ok(n) => {
                    self.pos += n as u64;
                    self.end = self.end.max(self.pos);
                    buf = &buf[n..];
                    Ok(())
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
                Err(e) => Err(e),
            };
            if let Err(e) = r {
                // An append that failed half-way is cut back, so the file
                // ends at the previous record boundary. An overwrite in
                // place (the header) is left as it is.
                if appending && self.pos != start {
                    self.inner.truncate(start)?;
                    self.inner.seek(SeekFrom::Start(start))?;
                    self.pos = start;
                    self.end = start;
                }
                // The first failure frees the reserve, for the finish.
                if !self.released {
                    self.released = true;
                    let _ = self.inner.release_reserve();
                }
                return Err(e);
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl Seek for Guarded {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.pos = self.inner.seek(pos)?;
        self.end = self.end.max(self.pos);
        Ok(self.pos)
    }
}

/// header.size of an AUXTRACE record (perf_event_header + 40 bytes).
const AUXTRACE_HEADER_LEN: u64 = 48;

/// Something to do right before the file is finished (late feature
/// sections such as build-ids), on the success and failure paths alike.
pub type Finisher = Box<dyn FnOnce(&mut TraceWriter) -> Result<(), sideband::Error> + Send>;

/// The perf.data file of a trace directory, written record by record.
pub struct TraceWriter {
    file: FileWriter<Guarded>,
    index: Vec<AuxtraceIndexEntry>,
    finishers: Vec<Finisher>,
}

impl std::fmt::Debug for TraceWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceWriter")
            .field("pos", &self.file.pos())
            .field("auxtrace_records", &self.index.len())
            .finish_non_exhaustive()
    }
}

/// Ids the file keeps room for before the attrs (4 KiB): the ids of the
/// events opened as the recording goes (one per CPU or thread per attr:
/// 3 attrs on 128 CPUs fit) go there, where perf puts them, so a copy cut
/// anywhere in the data still names its events; more go after the feature
/// sections (and a cut copy is then read with the first attr's layout).
const ID_ROOM: usize = 512;

impl TraceWriter {
    /// Starts a perf.data over `sink` (which must be empty): header
    /// placeholder, ids (and room for more) and attrs.
    pub fn new(sink: Box<dyn OutputSink>, attrs: AttrSet) -> Result<TraceWriter, sideband::Error> {
        let guarded = Guarded {
            inner: sink,
            pos: 0,
            end: 0,
            released: false,
        };
        let mut file = FileWriter::with_id_room(guarded, attrs, ID_ROOM)?;
        file.set_auxtrace_index(false);
        Ok(TraceWriter {
            file,
            index: Vec::new(),
            finishers: Vec::new(),
        })
    }

    /// Creates `path` (normally `DIR/data`) with the default reserve.
    pub fn create(path: &Path, attrs: AttrSet) -> Result<TraceWriter, sideband::Error> {
        let sink = DataFile::create(path, DEFAULT_RESERVE)?;
        TraceWriter::new(Box::new(sink), attrs)
    }

    /// The attrs records are laid out with.
    pub fn attrs(&self) -> &AttrSet {
        self.file.attrs()
    }

    /// File offset of the next record (= bytes in the file so far).
    pub fn pos(&self) -> u64 {
        self.file.pos()
    }

    /// Writes one record (an AUXTRACE with its data) in one append.
    pub fn write_event(&mut self, ev: &Event<'_>) -> Result<u64, sideband::Error> {
        let at = self.file.write_event(ev)?;
        if matches!(ev.record, Record::Auxtrace(_)) {
            self.index.push(AuxtraceIndexEntry {
                file_offset: at,
                size: AUXTRACE_HEADER_LEN,
            });
        }
        Ok(at)
    }

    /// Writes one AUXTRACE record and its data.
    pub fn write_auxtrace(&mut self, a: Auxtrace<'_>) -> Result<u64, sideband::Error> {
        self.write_event(&Event {
            misc: 0,
            record: Record::Auxtrace(a),
            sample_id: Default::default(),
        })
    }

    /// Writes one record's bytes as they came from a ring (little-endian,
    /// `header.size == record.len()`); not for AUXTRACE, which carries data.
    pub fn write_raw(&mut self, record: &[u8]) -> Result<u64, sideband::Error> {
        self.file.write_raw(record, &[])
    }

    /// Rewrites the header with the data size so far (see the module doc).
    pub fn sync_header(&mut self) -> Result<(), sideband::Error> {
        self.file.sync_header()
    }

    /// Sets a feature section.
    pub fn set_feature(&mut self, id: u32, data: Vec<u8>) -> Result<(), sideband::Error> {
        self.file.set_feature(id, data)
    }

    /// Replaces the ids of the attr at `idx`, for a writer that learns them
    /// as the instances appear (see [`FileWriter::set_ids`]).
    pub fn set_ids(&mut self, idx: usize, ids: Vec<u64>) -> Result<(), sideband::Error> {
        self.file.set_ids(idx, ids)
    }

    /// Frees the space held back for finishing the file, as the first
    /// failed append does: for a writer that stops on another file's
    /// failure (the disk is full) and must still finish this one.
    pub fn release_reserve(&mut self) -> io::Result<()> {
        let g = self.file.get_mut();
        g.released = true;
        g.inner.release_reserve()
    }

    /// Runs `f` right before the file is finished.
    pub fn on_finish(&mut self, f: Finisher) {
        self.finishers.push(f);
    }

    /// Runs the finishers, writes the AUXTRACE index, the feature sections
    /// and the final header. Returns the file's size.
    pub fn finish(mut self) -> Result<u64, sideband::Error> {
        for f in std::mem::take(&mut self.finishers) {
            f(&mut self)?;
        }
        if !self.index.is_empty() {
            self.file.set_feature(
                feature::id::AUXTRACE,
                feature::encode_auxtrace_index(&self.index),
            )?;
        }
        let mut g = self.file.finish()?;
        let size = g.pos;
        g.inner.release_reserve()?;
        Ok(size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A sink that accepts `budget` bytes, then fails with ENOSPC.
    struct Full(io::Cursor<Vec<u8>>, usize);

    impl Write for Full {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            let room = self.1.saturating_sub(self.0.position() as usize);
            if room == 0 {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            self.0.write(&b[..b.len().min(room)])
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    impl Seek for Full {
        fn seek(&mut self, p: SeekFrom) -> io::Result<u64> {
            self.0.seek(p)
        }
    }
    impl OutputSink for Full {
        fn truncate(&mut self, len: u64) -> io::Result<()> {
            self.0.get_mut().truncate(len as usize);
            Ok(())
        }
    }

    fn guarded(budget: usize) -> Guarded {
        Guarded {
            inner: Box::new(Full(io::Cursor::new(Vec::new()), budget)),
            pos: 0,
            end: 0,
            released: false,
        }
    }

    #[test]
    fn a_failed_append_is_cut_back_to_the_record_boundary() {
        let mut g = guarded(10);
        g.write_all(b"abcdef").unwrap();
        assert!(g.write_all(b"ghijkl").is_err());
        assert_eq!((g.pos, g.end), (6, 6));
        assert_eq!(g.inner.seek(SeekFrom::End(0)).unwrap(), 6);
        assert!(g.released);
    }

    #[test]
    fn a_failed_overwrite_in_place_truncates_nothing() {
        let mut g = guarded(8);
        g.write_all(b"abcdefgh").unwrap();
        g.seek(SeekFrom::Start(4)).unwrap();
        g.write_all(b"XY").unwrap();
        g.seek(SeekFrom::Start(6)).unwrap();
        assert!(g.write_all(b"0123").is_err());
        assert_eq!(g.inner.seek(SeekFrom::End(0)).unwrap(), 8);
    }

    #[test]
    fn the_reserve_has_no_name_and_the_header_is_valid_from_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let mut w = TraceWriter::create(&path, crate::session::sim::sim_attrs(&[1])).unwrap();
        // The reserve holds its space but has no name a killed ptrec could
        // leave behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["data"]);
        let reserve = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
            .find(|l| l.to_string_lossy().contains("data.reserve-"))
            .expect("the reserve is open");
        assert!(
            reserve.to_string_lossy().ends_with("(deleted)"),
            "{reserve:?}"
        );
        // What a SIGKILL right now leaves: a perf.data read with a warning.
        w.write_raw(&[68, 0, 0, 0, 0, 0, 8, 0]).unwrap();
        w.sync_header().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let f = sideband::file::PerfFile::parse(&bytes).unwrap();
        assert_eq!(f.raw_records().count(), 1);
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let size = w.finish().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
        let bytes = std::fs::read(&path).unwrap();
        sideband::file::PerfFile::parse(&bytes).unwrap();
    }
}
