//! Every file a run reads is opened here ([`open`], [`read`],
//! [`read_to_string`]): the trace's perf.data, the images found in the trace
//! dir, a `--sysroot`, the build-id cache or the live filesystem, kcore,
//! kallsyms, `--vmlinux`, separate debug files, `perf-PID.map` files and
//! `ptdec raw`'s `--pt`, `--elf` and `--raw` files. Each one's (device,
//! inode), taken from the opened file itself, is recorded, so that
//! `crate::outfile` refuses to write an output over any of them, whatever
//! path, link or hard link names it.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// One file read by this run.
struct Input {
    dev: u64,
    ino: u64,
    path: PathBuf,
    /// Its read and write bits.
    mode: u32,
}

/// Every file read by this run, in the order first opened.
static INPUTS: Mutex<Vec<Input>> = Mutex::new(Vec::new());

fn record(file: &File, path: &Path) -> io::Result<()> {
    let m = file.metadata()?;
    let mut inputs = INPUTS.lock().unwrap_or_else(|e| e.into_inner());
    // The path too: an inode number seen before may be a new file's now.
    if !inputs
        .iter()
        .any(|i| i.dev == m.dev() && i.ino == m.ino() && i.path == path)
    {
        inputs.push(Input {
            dev: m.dev(),
            ino: m.ino(),
            path: path.to_owned(),
            mode: m.mode() & 0o666,
        });
    }
    Ok(())
}

/// The read and write bits every input read so far has (0o666 when none
/// was): an output made of them is no more readable than the most
/// private one.
pub fn common_mode() -> u32 {
    let inputs = INPUTS.lock().unwrap_or_else(|e| e.into_inner());
    inputs.iter().fold(0o666, |m, i| m & i.mode)
}

/// Opens `path` for reading and records it as an input of this run.
pub fn open(path: &Path) -> io::Result<File> {
    let file = File::open(path)?;
    record(&file, path)?;
    Ok(file)
}

/// [`open`] for a file that must be a regular file: opened without
/// blocking (a FIFO put in its place after a check would wait for a
/// writer) and refused when what was opened is anything else.
pub fn open_regular(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "it is not a regular file (a device, FIFO or folder)",
        ));
    }
    record(&file, path)?;
    Ok(file)
}

/// How long [`open_stream`] waits for a FIFO's writer (a shell that
/// starts `perf record -o - > FIFO &` and ptdec together opens the FIFO
/// for writing a moment after ptdec may have opened it).
const WRITER_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// An input opened by [`open_stream`].
#[derive(Debug)]
pub enum Opened {
    /// A regular file (a perf.data to map).
    File(File),
    /// A FIFO or pipe that a program writes to (`perf record -o - >
    /// FIFO`, `... | ptdec /dev/stdin`), read blocking from now on; the
    /// bytes already taken from it come first.
    Stream(File, Vec<u8>),
}

/// [`open`] for an input that may be a regular file or a stream: never
/// waits in `open(2)` for a writer. A FIFO is opened without blocking
/// and is read only when a program writes to it: with no writer within
/// [`WRITER_WAIT`] it is refused (ptdec waited silently until one came).
/// A device, socket or folder is refused, naming what it is.
pub fn open_stream(path: &Path) -> io::Result<Opened> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if meta.is_file() {
        record(&file, path)?;
        return Ok(Opened::File(file));
    }
    if !meta.file_type().is_fifo() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "it is {}, not a regular file",
                sideband::bytes::not_a_file(&meta).unwrap_or("not a regular file")
            ),
        ));
    }
    // A read without blocking tells the two apart: EAGAIN, a writer has
    // it open and has not written yet; 0, no writer (a byte read is kept).
    let start = std::time::Instant::now();
    let mut first = [0u8; 1];
    let taken = loop {
        match nix::unistd::read(file.as_raw_fd(), &mut first) {
            Ok(0) if start.elapsed() < WRITER_WAIT => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "it is a FIFO or pipe that no program has open for writing",
                ))
            }
            Ok(n) => break n,
            Err(nix::errno::Errno::EAGAIN) => break 0,
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    };
    let flags = nix::fcntl::fcntl(file.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL)?;
    let flags = nix::fcntl::OFlag::from_bits_truncate(flags) - nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(file.as_raw_fd(), nix::fcntl::FcntlArg::F_SETFL(flags))?;
    record(&file, path)?;
    Ok(Opened::Stream(file, first[..taken].to_vec()))
}

/// What a path that is a symbolic link loop is called in messages.
pub const LINK_LOOP: &str = "a symbolic link loop (links that lead back to each other, ELOOP)";

/// Whether `e` is ELOOP, a symbolic link loop: std names that kind only
/// on nightly, and `Path::exists` or `is_file` take it for a missing file.
pub fn is_link_loop(e: &io::Error) -> bool {
    e.raw_os_error() == Some(nix::libc::ELOOP)
}

/// The whole of the regular file `path` ([`open_regular`]), recorded as
/// an input.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    let mut v = Vec::new();
    open_regular(path)?.read_to_end(&mut v)?;
    Ok(v)
}

/// The whole of the regular file `path` as text ([`open_regular`]),
/// recorded as an input: a `perf-PID.map` in `/tmp`, where anyone may
/// put a FIFO (whose open waited for ever) or a link to `/dev/zero`
/// (read until memory ran out), or kcore's `kallsyms`.
pub fn read_to_string(path: &Path) -> io::Result<String> {
    let mut s = String::new();
    open_regular(path)?.read_to_string(&mut s)?;
    Ok(s)
}

/// The input of this run that `path` (followed through symbolic links) is,
/// if any: same device and inode, and the input's own path still names
/// that file (a deleted input's inode number may have been reused).
pub fn same_as(path: &Path) -> Option<PathBuf> {
    let m = std::fs::metadata(path).ok()?;
    same_as_meta(&m)
}

/// [`same_as`] for a file already opened or stat'ed.
pub fn same_as_meta(m: &std::fs::Metadata) -> Option<PathBuf> {
    INPUTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|i| {
            i.dev == m.dev()
                && i.ino == m.ino()
                && std::fs::metadata(&i.path).is_ok_and(|n| n.dev() == i.dev && n.ino() == i.ino)
        })
        .map(|i| i.path.clone())
}

/// An input of this run that lies inside folder `dir` (through any link
/// to it), if any: replacing `dir` as a whole (a Parquet dataset) would
/// remove it.
pub fn under(dir: &Path) -> Option<PathBuf> {
    let dir = std::fs::canonicalize(dir).ok()?;
    INPUTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|i| std::fs::canonicalize(&i.path).is_ok_and(|p| p.starts_with(&dir)))
        .map(|i| i.path.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_read_is_found_by_any_name_of_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let input = dir.join("vdso.so");
        std::fs::write(&input, b"\x7fELF").unwrap();
        let hard = dir.join("hard");
        std::fs::hard_link(&input, &hard).unwrap();
        let soft = dir.join("soft");
        std::os::unix::fs::symlink(&input, &soft).unwrap();
        let other = dir.join("other");
        std::fs::write(&other, b"x").unwrap();
        assert_eq!(same_as(&hard), None, "not read yet");
        assert_eq!(read(&input).unwrap(), b"\x7fELF");
        let dotted = dir.join(".").join("vdso.so");
        for p in [&input, &hard, &soft, &dotted] {
            assert_eq!(same_as(p), Some(input.clone()), "{}", p.display());
        }
        assert_eq!(same_as(&other), None);
    }

    /// What a check by path cannot promise (the file may be swapped for a
    /// FIFO before it is opened), the open does: a FIFO without a writer
    /// is refused at once, not waited on; a device and a folder too.
    #[test]
    fn open_regular_refuses_what_is_not_a_file_without_blocking() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("fifo");
        let made = nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU);
        assert!(made.is_ok(), "{made:?}");
        for p in [fifo.as_path(), Path::new("/dev/zero"), tmp.path()] {
            let e = open_regular(p).unwrap_err();
            assert!(
                e.to_string().contains("not a regular file"),
                "{}: {e}",
                p.display()
            );
        }
        let file = tmp.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        assert!(open_regular(&file).is_ok());
        // Text files too (perf-PID.map, kallsyms).
        let zero = tmp.path().join("perf-1.map");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        for p in [fifo.as_path(), zero.as_path()] {
            let e = read_to_string(p).unwrap_err();
            assert!(
                e.to_string().contains("not a regular file"),
                "{}: {e}",
                p.display()
            );
        }
        assert_eq!(read_to_string(&file).unwrap(), "x");
    }
}
