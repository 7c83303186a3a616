//! Every file ptdec writes goes through here: it is written to a temporary
//! file beside its final name and renamed into place only once complete
//! ([`OutFile::commit`]), so a failed, full-disk or killed run never leaves a
//! truncated output, and an existing file is replaced only by a whole one.
//! An output that is the same file (device and inode, also through symbolic
//! links) as an input registered with [`protect_input`] is refused: writing
//! it would destroy the trace being read (and its memory mapping).

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// (device, inode) of every input of this run.
static INPUTS: Mutex<Vec<(u64, u64, PathBuf)>> = Mutex::new(Vec::new());

/// Counter for unique temporary names within this process.
static SEQ: AtomicU64 = AtomicU64::new(0);

/// Registers `path` (followed through links) as an input no output may
/// replace. A path that cannot be read is ignored: opening it reports that.
pub fn protect_input(path: &Path) {
    if let Ok(m) = std::fs::metadata(path) {
        INPUTS.lock().unwrap_or_else(|e| e.into_inner()).push((
            m.dev(),
            m.ino(),
            path.to_path_buf(),
        ));
    }
}

/// The input that `path` (followed through links) is, if any.
fn same_as_input(path: &Path) -> Option<PathBuf> {
    let m = std::fs::metadata(path).ok()?;
    INPUTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(dev, ino, input)| {
            // Still that file: a deleted input's inode may have been reused.
            *dev == m.dev()
                && *ino == m.ino()
                && std::fs::metadata(input).is_ok_and(|i| i.dev() == *dev && i.ino() == *ino)
        })
        .map(|(_, _, p)| p.clone())
}

/// Why an output cannot be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutFileError {
    /// The output is one of the inputs.
    #[error(
        "{} is the same file as the input {}; writing it would destroy the input. \
         Choose another -o",
        path.display(),
        input.display()
    )]
    IsInput { path: PathBuf, input: PathBuf },
    /// Creating, writing or renaming failed.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl From<OutFileError> for io::Error {
    fn from(e: OutFileError) -> io::Error {
        match e {
            OutFileError::Io { source, .. } => source,
            other => io::Error::new(io::ErrorKind::AlreadyExists, other.to_string()),
        }
    }
}

/// An output file being written; the temporary is removed unless committed.
#[derive(Debug)]
pub struct OutFile {
    file: Option<File>,
    /// The temporary renamed to `path` on commit; `None` when writing to a
    /// device or FIFO (`-o /dev/null`, `-o /dev/stdout`), which is opened
    /// as it is and never replaced.
    tmp: Option<PathBuf>,
    path: PathBuf,
}

impl OutFile {
    /// Starts writing `path`: refuses an input, creates `.NAME.ptdec-PID-N.tmp`
    /// beside it (beside a symbolic link's target, when `path` is a link).
    pub fn create(path: &Path) -> Result<OutFile, OutFileError> {
        if let Some(input) = same_as_input(path) {
            return Err(OutFileError::IsInput {
                path: path.to_path_buf(),
                input,
            });
        }
        let err = |source| OutFileError::Io {
            path: path.to_path_buf(),
            source,
        };
        let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        let real = if is_link {
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
        } else {
            path.to_path_buf()
        };
        match std::fs::metadata(&real) {
            Ok(m) if m.is_dir() => {
                return Err(err(io::Error::new(
                    io::ErrorKind::IsADirectory,
                    "it is a directory; give a file name",
                )))
            }
            // A device, FIFO or socket is written in place: renaming a
            // file over /dev/null would replace the device itself.
            Ok(m) if !m.is_file() => {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(err)?;
                return Ok(OutFile {
                    file: Some(file),
                    tmp: None,
                    path: path.to_path_buf(),
                });
            }
            _ => {}
        }
        let name = real.file_name().ok_or_else(|| {
            err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the path has no file name",
            ))
        })?;
        // At most 200 bytes of the name, so that the temporary stays within
        // NAME_MAX (255) whenever the final name does.
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(std::ffi::OsStr::from_bytes(
            &name.as_bytes()[..name.len().min(200)],
        ));
        tmp_name.push(format!(
            ".ptdec-{}-{}.tmp",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let tmp = real.with_file_name(tmp_name);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .open(&tmp)
            .map_err(err)?;
        Ok(OutFile {
            file: Some(file),
            tmp: Some(tmp),
            path: real,
        })
    }

    /// Makes the file durable and renames it to its final name.
    pub fn commit(mut self) -> Result<(), OutFileError> {
        let err = |source| OutFileError::Io {
            path: self.path.clone(),
            source,
        };
        let mut file = self.file.take().expect("not yet committed");
        let Some(tmp) = self.tmp.take() else {
            return file.flush().map_err(err);
        };
        file.sync_all().map_err(err)?;
        drop(file);
        std::fs::rename(&tmp, &self.path).map_err(err)
    }
}

impl Write for OutFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.as_mut().map_or(Ok(0), |f| f.write(buf))
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.as_mut().map_or(Ok(()), |f| f.flush())
    }
}

impl Drop for OutFile {
    fn drop(&mut self) {
        if let (Some(_), Some(tmp)) = (&self.file, &self.tmp) {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Standard output as a file, for `-o -`: fails when fd 1 was closed
/// (`ptdec ... -o - >&-`) instead of reporting success for output that went
/// nowhere. Rust's runtime reopens a closed fd 0-2 on `/dev/null` (read and
/// write) before `main`, where `io::stdout` would also swallow EBADF; a
/// shell's `>/dev/null` opens it write-only, so `/dev/null` open read-write
/// on fd 1 is the closed stdout.
pub fn stdout() -> io::Result<File> {
    use std::os::fd::AsFd;
    let closed = || {
        // Not BrokenPipe: that one ends ptdec quietly with success.
        io::Error::other("standard output is closed; give -o FILE or redirect it")
    };
    if reopened_dev_null(1) {
        return Err(closed());
    }
    let fd = io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|_| closed())?;
    Ok(File::from(fd))
}

/// Whether `fd` is `/dev/null` opened read-write (see [`stdout`]).
fn reopened_dev_null(fd: u32) -> bool {
    let is_null = std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .is_ok_and(|p| p == Path::new("/dev/null"));
    let rdwr = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .is_some_and(|flags| flags & 3 == 2);
    is_null && rdwr
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_appears_until_commit_and_a_failed_run_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.ftf");
        std::fs::write(&out, b"old whole file").unwrap();
        let mut f = OutFile::create(&out).unwrap();
        f.write_all(b"half").unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"old whole file");
        drop(f);
        assert_eq!(std::fs::read(&out).unwrap(), b"old whole file");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let mut f = OutFile::create(&out).unwrap();
        f.write_all(b"new").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_name_of_255_bytes_can_be_written() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("x".repeat(255));
        let mut f = OutFile::create(&out).unwrap();
        f.write_all(b"ok").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"ok");
    }

    #[test]
    fn an_input_is_never_an_output_also_through_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let input = dir.join("data");
        std::fs::write(&input, b"PERFILE2").unwrap();
        protect_input(&input);
        let link = dir.join("link.ftf");
        std::os::unix::fs::symlink(&input, &link).unwrap();
        for p in [&input, &link] {
            let e = OutFile::create(p).unwrap_err();
            assert!(matches!(e, OutFileError::IsInput { .. }), "{e}");
            assert!(e.to_string().contains("same file as the input"), "{e}");
        }
        assert_eq!(std::fs::read(&input).unwrap(), b"PERFILE2");
    }

    #[test]
    fn a_device_is_written_in_place_never_replaced() {
        let mut f = OutFile::create(Path::new("/dev/null")).unwrap();
        f.write_all(b"bytes").unwrap();
        f.commit().unwrap();
        let m = std::fs::metadata("/dev/null").unwrap();
        assert!(!m.is_file(), "/dev/null is still a device");
        let names: Vec<_> = std::fs::read_dir("/dev")
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".ptdec-"))
            .collect();
        assert!(names.is_empty(), "{names:?}");
    }

    #[test]
    fn a_link_output_writes_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real.ftf");
        std::fs::write(&target, b"old").unwrap();
        let link = dir.path().join("out.ftf");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut f = OutFile::create(&link).unwrap();
        f.write_all(b"new").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
    }
}
