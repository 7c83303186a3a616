//! Every file ptdec writes goes through here: it is written to a temporary
//! file in the output's directory and linked or renamed into place only once
//! complete ([`OutFile::commit`]), so a failed, interrupted or killed run
//! never leaves a truncated output, and an existing file is replaced only by
//! a whole one.
//!
//! The temporary has no name where the filesystem allows it (`O_TMPFILE`):
//! whatever ends the run before the commit (an error, SIGINT, SIGKILL, an
//! abort) leaves nothing behind. Elsewhere it is `.NAME.ptdec-PID-N.tmp`,
//! removed when the output is dropped and by [`abandon`] (ptdec's SIGINT,
//! SIGTERM and SIGHUP handler); only SIGKILL or an abort leave that one.
//!
//! An output that is the same file (device and inode, through any link) as
//! a file this run read (`crate::inputs`) is refused, when the output is
//! created and again just before it replaces its file, after every input
//! was opened: writing it would destroy the trace or image being read.
//!
//! An output holds the code paths, pids and names of the trace it comes
//! from, so it is no more readable than that trace: a new output gets the
//! trace's read and write bits ([`mode_of`]; 0600 when they are unknown),
//! less the umask, and a file it replaces keeps its own mode less the
//! bits the trace's do not have (a file of 0666 replaced by the output of
//! a trace of 0600 is 0600: an output is never more readable than its
//! trace, nor than the file it replaces).

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The permission bits of an output whose trace's are not known: its
/// owner's alone.
pub const PRIVATE_MODE: u32 = 0o600;

/// The permission bits an output made from `trace` (the file it is
/// decoded from) is created with: the read and write bits the trace and
/// every input read so far share (an LLDB bundle's per-core trace and
/// context switches, `ptdec raw`'s sideband: [`crate::inputs::common_mode`]),
/// always with the owner's (a read-only trace still gives a file its
/// owner may replace); [`PRIVATE_MODE`] when `trace` cannot be read.
pub fn mode_of(trace: &Path) -> u32 {
    std::fs::metadata(trace).map_or(PRIVATE_MODE, |m| {
        (m.permissions().mode() & crate::inputs::common_mode()) | PRIVATE_MODE
    })
}

/// Counter for unique temporary names and output ids within this process.
static SEQ: AtomicU64 = AtomicU64::new(0);

/// The outputs being written, and whether the run was abandoned.
struct Pending {
    /// (id, final path, named temporary) of every output not yet
    /// committed or dropped.
    outputs: Vec<(u64, PathBuf, Option<PathBuf>)>,
    /// (id, folder) of the dataset folders made for an output in
    /// `outputs`: removed with it when still empty.
    made: Vec<(u64, PathBuf)>,
    /// (id, path) of the outputs written in place (standard output, a
    /// FIFO, a device) not yet committed or dropped: what an interrupted
    /// run leaves incomplete ([`in_place`]).
    in_place: Vec<(u64, PathBuf)>,
    /// Set by [`abandon`]: no output may be created or committed any more.
    abandoned: bool,
}

/// Held while an output is linked or renamed into place and while
/// [`abandon`] removes the temporaries, so neither sees half of the other.
static PENDING: Mutex<Pending> = Mutex::new(Pending {
    outputs: Vec::new(),
    made: Vec::new(),
    in_place: Vec::new(),
    abandoned: false,
});

fn pending() -> std::sync::MutexGuard<'static, Pending> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Stops every output of this run, for a signal handler about to exit:
/// removes the named temporaries of the outputs being written (unnamed
/// ones vanish with the process) and makes any later create or commit
/// fail. Returns the outputs that were being written and will not be. An
/// output whose commit had begun is completed first.
pub fn abandon() -> Vec<PathBuf> {
    let mut p = pending();
    p.abandoned = true;
    let mut unfinished = Vec::new();
    for (_, path, named) in p.outputs.drain(..) {
        if let Some(tmp) = named {
            // A folder's temporary ([`OutDir`]) goes with what it holds.
            if std::fs::symlink_metadata(&tmp).is_ok_and(|m| m.is_dir()) {
                let _ = std::fs::remove_dir_all(tmp);
            } else {
                let _ = std::fs::remove_file(tmp);
            }
        }
        unfinished.push(path);
    }
    for (_, folder) in p.made.drain(..) {
        // Only when empty: another run may have added its part.
        let _ = std::fs::remove_dir(folder);
    }
    unfinished
}

/// The outputs written in place (`-` for standard output, FIFOs and
/// devices by name) and not finished: after [`abandon`], what their
/// readers got is incomplete, and nothing can take it back.
pub fn in_place() -> Vec<PathBuf> {
    pending().in_place.iter().map(|o| o.1.clone()).collect()
}

/// An output written where it is, registered for [`in_place`].
fn written_in_place(file: File, path: PathBuf) -> OutFile {
    let id = SEQ.fetch_add(1, Ordering::Relaxed);
    pending().in_place.push((id, path.clone()));
    OutFile {
        file: Some(file),
        temp: Temp::InPlace,
        path,
        id,
        written: 0,
        started: 0,
        stdout: false,
    }
}

/// Why an output cannot be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutFileError {
    /// The output is one of the inputs.
    #[error(
        "{} is the same file as the input {}; writing it would destroy the input. \
         Give the output another name",
        path.display(),
        input.display()
    )]
    IsInput { path: PathBuf, input: PathBuf },
    /// The run was interrupted ([`abandon`]).
    #[error("{} was not written: ptdec was interrupted", path.display())]
    Abandoned { path: PathBuf },
    /// An output folder would replace a folder that holds an input.
    #[error(
        "{} holds the input {}; replacing it would destroy the input. Give the output another name",
        path.display(),
        input.display()
    )]
    HoldsInput { path: PathBuf, input: PathBuf },
    /// The output folder exists and the caller did not say to replace it.
    #[error("{} exists; give --force to replace it, or another name", path.display())]
    Exists { path: PathBuf },
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

/// Where an output's bytes wait for their commit.
#[derive(Debug)]
enum Temp {
    /// An `O_TMPFILE` file in the output's directory.
    Unnamed,
    /// `.NAME.ptdec-PID-N.tmp` beside the output.
    Named(PathBuf),
    /// A device, FIFO or socket (`-o /dev/null`), written in place and
    /// never replaced: renaming a file over /dev/null would replace the
    /// device itself.
    InPlace,
}

/// An output file being written; the temporary is removed unless committed.
#[derive(Debug)]
pub struct OutFile {
    file: Option<File>,
    temp: Temp,
    /// The final name (a symbolic link's target, when given a link).
    path: PathBuf,
    /// This output's entry in [`PENDING`].
    id: u64,
    /// Bytes written, and up to where their writeback was started.
    written: u64,
    started: u64,
    /// Standard output: its write errors are named as [`Stdout`]'s.
    stdout: bool,
}

/// Written bytes whose writeback is started at once (see
/// [`OutFile::write`]).
const WRITEBACK_STEP: u64 = 16 << 20;

impl OutFile {
    /// Starts writing `path`: refuses an input, creates the temporary in
    /// its directory (a symbolic link's target's directory, when `path` is
    /// a link) with the permission bits `mode` (less the umask), or with
    /// those of the file `path` names when it is one, less those not in
    /// `mode`: a file replaced keeps its mode, never more open than
    /// `mode`.
    pub fn create(path: &Path, mode: u32) -> Result<OutFile, OutFileError> {
        Self::create_with(path, mode, true)
    }

    /// [`OutFile::create`]; `unnamed: false` skips `O_TMPFILE` (tests of
    /// the named temporary).
    fn create_with(path: &Path, mode: u32, unnamed: bool) -> Result<OutFile, OutFileError> {
        if let Some(input) = crate::inputs::same_as(path) {
            return Err(OutFileError::IsInput {
                path: path.to_path_buf(),
                input,
            });
        }
        let err = |source| OutFileError::Io {
            path: path.to_path_buf(),
            source,
        };
        let real = resolve(path).map_err(err)?;
        let existing = std::fs::metadata(&real);
        // The mode of the file replaced, set on the temporary as it is (the
        // umask applies to new files only), less the bits `mode` has not:
        // a file anyone may read, replaced by a private trace's output,
        // kept its mode (this session's hostile probe).
        let keep = existing
            .as_ref()
            .ok()
            .filter(|m| m.is_file())
            .map(|m| (m.permissions().mode() & mode & 0o777, m.uid(), m.gid()));
        match existing {
            Ok(m) if m.is_dir() => {
                return Err(err(io::Error::new(
                    io::ErrorKind::IsADirectory,
                    "it is a directory; give a file name",
                )))
            }
            Ok(m) if m.file_type().is_block_device() => {
                return Err(err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "it is a block device (a disk); ptdec writes files, FIFOs and \
                     character devices only. Give a file name",
                )))
            }
            Ok(m) if m.file_type().is_socket() => {
                return Err(err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "it is a socket; ptdec writes files, FIFOs and character devices only. \
                     Give a file name",
                )))
            }
            Ok(m) if !m.is_file() => {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(err)?;
                return Ok(written_in_place(file, path.to_path_buf()));
            }
            _ => {}
        }
        let name = real.file_name().ok_or_else(|| {
            err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the path has no file name",
            ))
        })?;
        let dir = folder_of(&real);
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(err(io::Error::new(
                    io::ErrorKind::NotADirectory,
                    format!("{} is not a folder; give a name in a folder", dir.display()),
                )))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(err(missing_folder(dir))),
            Err(_) => {}
        }
        sweep_dead_temps(dir, name);
        let mut p = pending();
        if p.abandoned {
            return Err(OutFileError::Abandoned { path: real });
        }
        // The commit links the unnamed file through /proc (place_unnamed).
        let mode = mode & 0o777;
        let unnamed = if unnamed && Path::new("/proc/self/fd").is_dir() {
            open_unnamed(dir, mode).ok()
        } else {
            None
        };
        let (file, temp) = match unnamed {
            Some(f) => (f, Temp::Unnamed),
            None => {
                let tmp = real.with_file_name(temp_name(name));
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode)
                    .open(&tmp)
                    .map_err(err)?;
                (file, Temp::Named(tmp))
            }
        };
        if let Some((keep, uid, gid)) = keep {
            // The file replaced keeps its owner and group, as a shell's `>`
            // keeps them, where this process may give them (root may).
            let _ = std::os::unix::fs::fchown(&file, Some(uid), Some(gid));
            if let Err(e) = file.set_permissions(std::fs::Permissions::from_mode(keep)) {
                if let Temp::Named(tmp) = &temp {
                    let _ = std::fs::remove_file(tmp);
                }
                return Err(err(e));
            }
        }
        let id = SEQ.fetch_add(1, Ordering::Relaxed);
        let named = match &temp {
            Temp::Named(t) => Some(t.clone()),
            _ => None,
        };
        p.outputs.push((id, real.clone(), named));
        Ok(OutFile {
            file: Some(file),
            temp,
            path: real,
            id,
            written: 0,
            started: 0,
            stdout: false,
        })
    }

    /// Standard output as an output ([`binary_stdout`]): written in place, as a
    /// FIFO or device given by name is.
    pub fn stdout() -> Result<OutFile, OutFileError> {
        Self::on_stdout(binary_stdout())
    }

    /// Standard output for text (folded stacks, an SVG): as
    /// [`OutFile::stdout`], but a terminal is allowed.
    pub fn text_stdout() -> Result<OutFile, OutFileError> {
        Self::on_stdout(stdout_file())
    }

    fn on_stdout(file: io::Result<File>) -> Result<OutFile, OutFileError> {
        let file = file.map_err(|source| OutFileError::Io {
            path: PathBuf::from("standard output"),
            source,
        })?;
        let mut out = written_in_place(file, PathBuf::from("-"));
        out.stdout = true;
        Ok(out)
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Makes the file durable and puts it in place, unless an input
    /// opened since [`OutFile::create`] is the file it would replace.
    pub fn commit(mut self) -> Result<(), OutFileError> {
        let path = self.path.clone();
        let err = |source| OutFileError::Io {
            path: path.clone(),
            source,
        };
        let mut file = self.file.take().expect("not yet committed");
        if matches!(self.temp, Temp::InPlace) {
            return file.flush().map_err(|e| err(self.named(e)));
        }
        file.sync_all().map_err(err)?;
        let mut p = pending();
        if p.abandoned {
            return Err(OutFileError::Abandoned { path });
        }
        if let Some(input) = crate::inputs::same_as(&path) {
            return Err(OutFileError::IsInput { path, input });
        }
        let placed = match &self.temp {
            Temp::Named(tmp) => std::fs::rename(tmp, &path),
            _ => place_unnamed(&file, &path),
        };
        // Committed or not, the temporary is gone or this drop's to remove.
        p.outputs.retain(|o| o.0 != self.id);
        match placed {
            Ok(()) => {
                self.temp = Temp::InPlace;
                Ok(())
            }
            Err(e) => {
                drop(p);
                self.file = Some(file);
                Err(err(e))
            }
        }
    }
}

/// The file an output named `path` is written to: `path`, or where it
/// leads when it is a symbolic link. A link to a file not there yet makes
/// that file, as a shell's `>` does ([`dangling_target`]). A link the
/// kernel follows to something with no path (`/dev/stdout` on a pipe,
/// `/proc/self/fd/N`) is `path` itself, written in place; one to a
/// deleted file is refused.
fn resolve(path: &Path) -> io::Result<PathBuf> {
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Ok(path.to_path_buf());
    }
    let Ok(m) = std::fs::metadata(path) else {
        return dangling_target(path);
    };
    match std::fs::canonicalize(path) {
        Ok(real) if std::fs::metadata(&real).is_ok() => Ok(real),
        _ if !m.is_file() => Ok(path.to_path_buf()),
        _ => Err(io::Error::new(
            io::ErrorKind::NotFound,
            "it leads to a file that was deleted; give another name",
        )),
    }
}

/// Whether two outputs are one file, however spelled, through links and
/// before either exists; `-` (standard output) is the same as `-`, and as
/// the file standard output is redirected to.
pub fn same_output(a: &Path, b: &Path) -> bool {
    let stdout = Path::new("-");
    if a == b && a == stdout {
        return true;
    }
    let key = |p: &Path| -> Option<PathBuf> {
        if p == stdout {
            // The file standard output was redirected to (`> F`), which a
            // file replaced by its name would leave unlinked; a pipe or a
            // deleted file has no path.
            let fd = Path::new("/proc/self/fd/1");
            return std::fs::metadata(fd)
                .is_ok_and(|m| m.is_file())
                .then(|| std::fs::canonicalize(fd).ok())
                .flatten();
        }
        let real = resolve(p).ok()?;
        if let Ok(real) = std::fs::canonicalize(&real) {
            return Some(real);
        }
        let dir = folder_of(&real);
        Some(std::fs::canonicalize(dir).ok()?.join(real.file_name()?))
    };
    key(a).is_some_and(|k| Some(k) == key(b))
}

/// Where the dangling symbolic link `link` points, through further
/// dangling links, with the folder it names resolved: the file an output
/// given as `link` becomes. Its folder must exist.
fn dangling_target(link: &Path) -> io::Result<PathBuf> {
    let mut at = link.to_path_buf();
    // As the kernel's limit on links followed in one lookup (ELOOP).
    for _ in 0..40 {
        let to = std::fs::read_link(&at)?;
        if to.as_os_str().as_encoded_bytes().ends_with(b"/") {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!(
                    "it is a symbolic link to the folder {}, which does not exist; give a file name",
                    to.display()
                ),
            ));
        }
        let to = match at.parent() {
            Some(dir) if to.is_relative() => dir.join(to),
            _ => to,
        };
        if std::fs::symlink_metadata(&to).is_ok_and(|m| m.file_type().is_symlink()) {
            at = to;
            continue;
        }
        let no_folder = || {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "it is a symbolic link to {}, whose folder does not exist; \
                     make the folder or give another name",
                    to.display()
                ),
            )
        };
        let name = to.file_name().ok_or_else(no_folder)?;
        let dir = folder_of(&to);
        let dir = std::fs::canonicalize(dir).map_err(|_| no_folder())?;
        return Ok(dir.join(name));
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        "it is a symbolic link in a loop of links; give another name",
    ))
}

/// The folder `path` names an entry of: its parent, `.` for a bare name.
/// The error for an output whose folder `dir` does not exist.
fn missing_folder(dir: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "its folder {} does not exist; make it (mkdir -p {0}) or give another name",
            dir.display()
        ),
    )
}

pub fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// What a `--split` run holds while it writes the window files of its
/// `-o` (`OUT-0.ftf`, `OUT-1.ftf`, ...) and removes an earlier run's: an
/// exclusive `flock` on `.OUT.ptdec-split.lock` in the same folder, which
/// holds its pid. A second run into the same `-o` is refused while the
/// first runs: both wrote their windows over each other's and removed
/// each other's as stale, which left a mix of the two runs (refused
/// rather than waited for: the second would only replace the first's
/// files). Removed when dropped; a run killed leaves the file unlocked,
/// and the next run takes it.
pub struct SplitLock {
    path: PathBuf,
    _lock: nix::fcntl::Flock<File>,
}

/// `--split -o OUT` while another run holds OUT's [`SplitLock`].
#[derive(Debug, thiserror::Error)]
#[error(
    "another ptdec ({holder}) is writing the --split windows of {out} (it holds {lock}); \
     wait for it to end, or give -o another name (two runs into one -o would leave a mix of \
     both runs' windows)"
)]
pub struct SplitLocked {
    /// `-o`.
    pub out: String,
    /// `pid N`, or what is known of the other run.
    pub holder: String,
    /// The lock file.
    pub lock: String,
}

impl SplitLock {
    /// Takes the lock of the window files named after `template`; `None`
    /// where no lock can be made (a folder that cannot be written: the
    /// windows then fail to be written, and say why).
    pub fn take(template: &Path) -> Result<Option<SplitLock>, SplitLocked> {
        use nix::fcntl::{Flock, FlockArg};
        use std::io::Read as _;
        let Some(name) = template.file_name() else {
            return Ok(None);
        };
        let mut lock_name = std::ffi::OsString::from(".");
        lock_name.push(std::ffi::OsStr::from_bytes(
            &name.as_bytes()[..name.len().min(200)],
        ));
        lock_name.push(".ptdec-split.lock");
        let path = folder_of(template).join(lock_name);
        // A lock file removed by its holder between our open and our lock
        // is taken again under its new inode; a few tries are plenty.
        for _ in 0..100 {
            let Ok(file) = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
                .open(&path)
            else {
                return Ok(None);
            };
            let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => lock,
                Err((file, nix::errno::Errno::EWOULDBLOCK)) => {
                    let mut text = String::new();
                    let _ = (&file).take(32).read_to_string(&mut text);
                    let holder = match text.trim().parse::<u32>() {
                        Ok(pid) => format!("pid {pid}"),
                        Err(_) => "a run that has not yet written its pid".to_string(),
                    };
                    return Err(SplitLocked {
                        out: template.display().to_string(),
                        holder,
                        lock: path.display().to_string(),
                    });
                }
                Err(_) => return Ok(None),
            };
            let same = match (lock.metadata(), std::fs::symlink_metadata(&path)) {
                (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
                _ => false,
            };
            if !same {
                continue;
            }
            let _ = lock.set_len(0);
            let _ = writeln!(*lock, "{}", std::process::id());
            return Ok(Some(SplitLock { path, _lock: lock }));
        }
        Ok(None)
    }
}

impl Drop for SplitLock {
    fn drop(&mut self) {
        // Removed while still held: a run that opened it meanwhile finds
        // it gone once it has the lock, and makes another.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `.NAME.ptdec-PID-N.tmp`, with at most 200 bytes of NAME so that it stays
/// within NAME_MAX (255) whenever NAME does.
fn temp_name(name: &std::ffi::OsStr) -> std::ffi::OsString {
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(std::ffi::OsStr::from_bytes(
        &name.as_bytes()[..name.len().min(200)],
    ));
    tmp_name.push(format!(
        ".ptdec-{}-{}.tmp",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    tmp_name
}

/// Removes the temporaries of `name` in `dir` (`.NAME.ptdec-PID-N.tmp`,
/// [`temp_name`]) whose run is gone: a SIGKILL while [`place_unnamed`]
/// renamed one, or any time a named temporary was written, leaves it, and
/// nothing else would ever remove it. A temporary of a live process
/// (another ptdec writing the same output, or a PID since reused) is left.
fn sweep_dead_temps(dir: &Path, name: &std::ffi::OsStr) {
    let mut prefix = b".".to_vec();
    prefix.extend_from_slice(&name.as_bytes()[..name.len().min(200)]);
    prefix.extend_from_slice(b".ptdec-");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let file = e.file_name();
        let Some(rest) = file.as_bytes().strip_prefix(prefix.as_slice()) else {
            continue;
        };
        let Some(rest) = rest.strip_suffix(b".tmp") else {
            continue;
        };
        let pid = std::str::from_utf8(rest)
            .ok()
            .and_then(|r| r.split_once('-'))
            .filter(|(_, n)| n.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty())
            .and_then(|(pid, _)| pid.parse::<i32>().ok())
            .filter(|&pid| pid > 0);
        let Some(pid) = pid else { continue };
        let gone = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
            == Err(nix::errno::Errno::ESRCH);
        if gone && e.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// A file without a name in `dir` (`O_TMPFILE`) with the permission bits
/// `mode` (less the umask); an error where the
/// filesystem or kernel has none (the caller then names one).
fn open_unnamed(dir: &Path, mode: u32) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .mode(mode)
        .custom_flags(nix::libc::O_TMPFILE)
        .open(dir)
}

/// Gives the unnamed `file` the name `path`: a link when `path` does not
/// exist; else a link to a temporary name renamed over `path`, since a
/// link never replaces a file. Called under [`PENDING`]'s lock, so the
/// signal handler waits for it; SIGKILL between the two steps would leave
/// the temporary.
fn place_unnamed(file: &File, path: &Path) -> io::Result<()> {
    // The /proc link of an O_TMPFILE file can be linked (open(2)); linkat
    // with AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH.
    let fd_path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    let link = |to: &Path| {
        nix::unistd::linkat(
            None,
            fd_path.as_path(),
            None,
            to,
            nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW,
        )
        .map_err(io::Error::from)
    };
    match link(path) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        other => return other,
    }
    let name = path.file_name().unwrap_or_default();
    let tmp = path.with_file_name(temp_name(name));
    link(&tmp)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

impl Write for OutFile {
    /// Writes to the temporary and, every [`WRITEBACK_STEP`] bytes, starts
    /// the writeback of what was written since the last time
    /// (`POSIX_FADV_DONTNEED`, which on Linux starts it without waiting and
    /// drops only the pages already clean). The commit's `fsync` then finds
    /// little left to write: it took 0.21 s of a 1.3 s `ptdec -j2` with a
    /// 200 MB output, all at the end, with nothing else to do meanwhile.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(f) = self.file.as_mut() else {
            return Ok(0);
        };
        let n = match f.write(buf) {
            Ok(n) => n,
            Err(e) => return Err(self.named(e)),
        };
        self.written += n as u64;
        if self.written - self.started >= WRITEBACK_STEP && !matches!(self.temp, Temp::InPlace) {
            // Only a hint: an error changes nothing (the commit syncs all).
            let _ = nix::fcntl::posix_fadvise(
                f.as_raw_fd(),
                self.started as i64,
                (self.written - self.started) as i64,
                nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
            );
            self.started = self.written;
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        let r = self.file.as_mut().map_or(Ok(()), |f| f.flush());
        r.map_err(|e| self.named(e))
    }
}

impl OutFile {
    /// A write error, named as [`Stdout`] names it when this is standard
    /// output.
    fn named(&self, e: io::Error) -> io::Error {
        if self.stdout {
            stdout_error(e)
        } else {
            e
        }
    }
}

impl Drop for OutFile {
    fn drop(&mut self) {
        if matches!(self.temp, Temp::InPlace) {
            pending().in_place.retain(|o| o.0 != self.id);
            return;
        }
        let mut p = pending();
        p.outputs.retain(|o| o.0 != self.id);
        if let Temp::Named(tmp) = &self.temp {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// One part of a dataset folder being written: a Parquet dataset's
/// trace, whose tables go to `ROOT/TABLE/PART/` (`PART` is `trace=NAME`),
/// so that one folder holds many traces and engines read each table as
/// one. The tables are written into a temporary folder
/// `ROOT/.PART.ptdec-PID-N.tmp` and renamed into place by
/// [`OutDir::commit`] once all are whole, under the lock [`abandon`]
/// takes, so Ctrl-C never leaves some of the tables. Until then the
/// temporary is removed when the `OutDir` is dropped and by [`abandon`];
/// SIGKILL leaves it (hidden: engines read `ROOT/TABLE/**`), and the next
/// run into `ROOT` removes it: a temporary holds a file `.lock` its run
/// keeps locked (`flock`) from before the temporary gets its name, so one
/// whose lock can be taken belongs to no live run. A part already
/// there is replaced only when the caller says so (`force`), and never
/// when an input of the run lies inside it or it holds anything but
/// ptdec's `part-N.parquet` files; a folder that holds other things than
/// a dataset's tables is refused.
#[derive(Debug)]
pub struct OutDir {
    /// The temporary folder; `None` once committed.
    tmp: Option<PathBuf>,
    root: PathBuf,
    part: String,
    tables: Vec<String>,
    force: bool,
    /// The root was made for this output: removed again if it stays empty.
    made_root: bool,
    mode: u32,
    /// This output's entry in [`PENDING`].
    id: u64,
    /// `TEMP/.lock`, locked while this run lives (see [`OutDir::sweep`]);
    /// `None` where the filesystem has no locks.
    _lock: Option<nix::fcntl::Flock<File>>,
}

/// The file in a dataset temporary that its run keeps locked.
const LOCK: &str = ".lock";

impl OutDir {
    /// Starts writing part `part` of the tables `tables` of the dataset
    /// folder `root` (made when missing): refuses a file at `root`, a
    /// folder there that is not a dataset, and a part already there unless
    /// `force` (never one holding an input); makes the temporary folder
    /// with the permission bits `mode` of a file plus the search bits of
    /// its read bits.
    pub fn create(
        root: &Path,
        part: &str,
        tables: &[&str],
        force: bool,
        mode: u32,
    ) -> Result<OutDir, OutFileError> {
        let err = |source| OutFileError::Io {
            path: root.to_path_buf(),
            source,
        };
        let tables: Vec<String> = tables.iter().map(|t| t.to_string()).collect();
        let mode = (mode & 0o777) | ((mode & 0o444) >> 2);
        Self::check_root(root, &tables)?;
        for t in &tables {
            Self::check_place(&root.join(t).join(part), force)?;
        }
        Self::sweep(root);
        let mut p = pending();
        if p.abandoned {
            return Err(OutFileError::Abandoned {
                path: root.to_path_buf(),
            });
        }
        let made_root = match std::fs::DirBuilder::new().mode(mode).create(root) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
            // The root is made, not the folders above it (as for a file).
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(err(missing_folder(folder_of(root))))
            }
            Err(e) => return Err(err(e)),
        };
        let tmp = root.join(temp_name(std::ffi::OsStr::new(part)));
        let lock = match Self::make_locked(&tmp, mode) {
            Ok(lock) => lock,
            Err(e) => {
                if made_root {
                    let _ = std::fs::remove_dir(root);
                }
                return Err(err(e));
            }
        };
        let id = SEQ.fetch_add(1, Ordering::Relaxed);
        // Named by the parts it would have put in place: the folder's
        // other traces stay.
        let shown = root.join(format!("{{{}}}", tables.join(","))).join(part);
        p.outputs.push((id, shown, Some(tmp.clone())));
        if made_root {
            p.made.push((id, root.to_path_buf()));
        }
        Ok(OutDir {
            tmp: Some(tmp),
            root: root.to_path_buf(),
            part: part.to_string(),
            tables,
            force,
            made_root,
            mode,
            id,
            _lock: lock,
        })
    }

    /// Makes the temporary folder `tmp` with `.lock` in it locked: made
    /// as `tmp` with `.new` for `.tmp` (which [`OutDir::sweep`] leaves
    /// alone), locked, then renamed to `tmp`, so no sweep ever sees it
    /// unlocked. The lock is `None` where the filesystem has none (its
    /// temporaries are then never swept).
    fn make_locked(tmp: &Path, mode: u32) -> io::Result<Option<nix::fcntl::Flock<File>>> {
        use nix::fcntl::{Flock, FlockArg};
        let mut new = tmp.as_os_str().to_owned();
        // `temp_name` ends in `.tmp`.
        new = std::ffi::OsString::from_vec(
            new.as_bytes()[..new.len() - 4]
                .iter()
                .chain(b".new")
                .copied()
                .collect(),
        );
        let new = PathBuf::from(new);
        std::fs::DirBuilder::new().mode(mode).create(&new)?;
        let made = (|| {
            let file = File::options()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(mode & 0o666)
                .open(new.join(LOCK))?;
            let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).ok();
            std::fs::rename(&new, tmp)?;
            Ok(lock)
        })();
        if made.is_err() {
            let _ = std::fs::remove_dir_all(&new);
        }
        made
    }

    /// Removes the temporaries in `root` that no live run holds: those
    /// of runs killed by SIGKILL (or a crash). One whose `.lock` cannot
    /// be opened or locked (a live run, a filesystem without locks, or
    /// one made by a ptdec without them) is left.
    fn sweep(root: &Path) {
        use nix::fcntl::{Flock, FlockArg};
        let Ok(entries) = std::fs::read_dir(root) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.as_bytes();
            let ours = name.starts_with(b".")
                && name.ends_with(b".tmp")
                && name.windows(7).any(|w| w == b".ptdec-");
            if !ours || !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = e.path();
            let Ok(file) = File::options().read(true).write(true).open(path.join(LOCK)) else {
                continue;
            };
            if let Ok(_held) = Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }

    /// Refuses a file at `root`, and a folder there that holds anything
    /// but the dataset's `tables` and hidden entries (temporaries): the
    /// tables would be added to a folder of other things.
    fn check_root(root: &Path, tables: &[String]) -> Result<(), OutFileError> {
        let refuse = |why: &str| OutFileError::Io {
            path: root.to_path_buf(),
            source: io::Error::new(io::ErrorKind::AlreadyExists, why.to_string()),
        };
        let Ok(m) = std::fs::metadata(root) else {
            // A link to a folder not there: not made through the link
            // (a file is, see `dangling_target`; a folder of tables is
            // the user's to place).
            if let Ok(to) = std::fs::read_link(root) {
                return Err(OutFileError::Io {
                    path: root.to_path_buf(),
                    source: io::Error::new(
                        io::ErrorKind::NotFound,
                        format!(
                            "it is a symbolic link to {}, which does not exist; \
                             make that folder or give another name",
                            to.display()
                        ),
                    ),
                });
            }
            return Ok(());
        };
        if !m.is_dir() {
            let t = m.file_type();
            let what = if t.is_file() {
                "a file"
            } else if t.is_char_device() || t.is_block_device() {
                "a device"
            } else if t.is_fifo() {
                "a pipe"
            } else {
                "a socket"
            };
            return Err(refuse(&format!(
                "it is {what}, not a folder; give a folder name"
            )));
        }
        let entries = std::fs::read_dir(root).map_err(|source| OutFileError::Io {
            path: root.to_path_buf(),
            source,
        })?;
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if !name.starts_with('.') && !tables.iter().any(|t| *t == name) {
                return Err(refuse(&format!(
                    "it holds {name}, so it is not a dataset folder (one that holds only the \
                     tables {}); give a new or empty folder, or a dataset folder",
                    tables.join(", ")
                )));
            }
            // Found only when the tables are put in place, after the decode.
            if !name.starts_with('.') && !std::fs::metadata(e.path()).is_ok_and(|m| m.is_dir()) {
                return Err(refuse(&format!(
                    "it holds {name}, which is not a folder, where the table {name} goes; \
                     give a new or empty folder, or a dataset folder"
                )));
            }
        }
        Ok(())
    }

    /// Refuses what is at a part's `path`: a part without `force`, or one
    /// holding an input.
    fn check_place(path: &Path, force: bool) -> Result<(), OutFileError> {
        let Ok(m) = std::fs::symlink_metadata(path) else {
            return Ok(());
        };
        if !m.is_dir() {
            // Not a part this writes: --force does not replace it.
            return Err(OutFileError::Io {
                path: path.to_path_buf(),
                source: io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "it is not a folder, so not a trace of the dataset; remove it, or give \
                     another --trace-name",
                ),
            });
        }
        if let Some(input) = crate::inputs::under(path) {
            return Err(OutFileError::HoldsInput {
                path: path.to_path_buf(),
                input,
            });
        }
        if !force {
            return Err(OutFileError::Exists {
                path: path.to_path_buf(),
            });
        }
        // --force replaces the part folder whole: refused when it holds
        // what ptdec did not write there (a user's notes, a subfolder),
        // which would go with it (as `--split` leaves a file it did not
        // write and names it).
        if let Some(name) = Self::foreign_entry(path) {
            return Err(OutFileError::Io {
                path: path.to_path_buf(),
                source: io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "it holds {name}, which ptdec did not write, and --force would \
                         delete it with the trace it replaces; move it out of the folder, \
                         or give another --trace-name"
                    ),
                ),
            });
        }
        Ok(())
    }

    /// The first entry of part folder `path` that ptdec does not write
    /// there (it writes regular files `part-N.parquet` only), by name.
    fn foreign_entry(path: &Path) -> Option<String> {
        let entries = match std::fs::read_dir(path) {
            Ok(e) => e,
            // Unreadable: what it holds is unknown, so it is not replaced.
            Err(e) => return Some(format!("entries that cannot be listed ({e})")),
        };
        let mut foreign: Vec<String> = entries
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                let ours = name
                    .to_str()
                    .and_then(|n| n.strip_prefix("part-"))
                    .and_then(|n| n.strip_suffix(".parquet"))
                    .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
                !(ours && e.file_type().is_ok_and(|t| t.is_file()))
            })
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        foreign.sort();
        match foreign.len() {
            0 => None,
            1 => foreign.pop(),
            n => Some(format!("{} and {} other entries", foreign[0], n - 1)),
        }
    }

    /// The temporary folder the tables go into (`TEMP/TABLE/`).
    pub fn temp(&self) -> &Path {
        self.tmp.as_deref().expect("not yet committed")
    }

    /// The dataset folder.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Where table `table`'s part goes (`ROOT/TABLE/PART`), to name in
    /// errors.
    pub fn part_path(&self, table: &str) -> PathBuf {
        self.root.join(table).join(&self.part)
    }

    /// Puts the part in place (its files synced by the writer), after
    /// checking again what it replaces: for each table, a part in the way
    /// is renamed aside, the new one renamed into place; the old ones are
    /// removed once all are.
    pub fn commit(mut self) -> Result<(), OutFileError> {
        use nix::fcntl::{Flock, FlockArg};
        let tmp = self.tmp.clone().expect("not yet committed");
        // One commit into the folder at a time, across processes (`flock`
        // on the folder; none where the filesystem has no locks): two runs
        // replacing the same part with --force otherwise interleave their
        // renames, one's calls beside the other's marks. Taken before
        // [`PENDING`], so a signal is not held up by another process.
        let one_at_a_time = File::open(&self.root)
            .ok()
            .and_then(|f| Flock::lock(f, FlockArg::LockExclusive).ok());
        let mut p = pending();
        if p.abandoned {
            return Err(OutFileError::Abandoned {
                path: self.root.clone(),
            });
        }
        for t in &self.tables {
            Self::check_place(&self.root.join(t).join(&self.part), self.force)?;
        }
        let mut aside = Vec::new();
        let mut placed = Vec::new();
        let mut made = Vec::new();
        let result = self.place_all(&tmp, &mut aside, &mut placed, &mut made);
        if let Err(e) = result {
            // Back as it was: the new parts out, the old ones in, the
            // table folders made for them gone.
            for (dst, src) in placed.iter().rev() {
                let _ = std::fs::rename(dst, src);
            }
            for (old, dst) in aside.iter().rev() {
                let _ = std::fs::rename(old, dst);
            }
            for table in made.iter().rev() {
                let _ = std::fs::remove_dir(table);
            }
            return Err(e);
        }
        p.outputs.retain(|o| o.0 != self.id);
        p.made.retain(|o| o.0 != self.id);
        self.tmp = None;
        drop(p);
        drop(one_at_a_time);
        for dir in
            std::iter::once(self.root.clone()).chain(self.tables.iter().map(|t| self.root.join(t)))
        {
            // The renames durable; only a hint where the folder cannot be opened.
            if let Ok(d) = File::open(&dir) {
                let _ = d.sync_all();
            }
        }
        for (old, _) in &aside {
            // The trace is in place: what it replaced goes with the
            // temporary (the next run's sweep removes what stays).
            let _ = std::fs::remove_dir_all(old);
        }
        let _ = std::fs::remove_dir_all(&tmp);
        Ok(())
    }

    /// The renames of [`OutDir::commit`]: each table's folder made when
    /// missing, an old part moved aside into the temporary (`aside`: (where
    /// it is now, where it was)), the new one moved in (`placed`: (where it
    /// is now, where it was)).
    fn place_all(
        &self,
        tmp: &Path,
        aside: &mut Vec<(PathBuf, PathBuf)>,
        placed: &mut Vec<(PathBuf, PathBuf)>,
        made: &mut Vec<PathBuf>,
    ) -> Result<(), OutFileError> {
        let err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| OutFileError::Io { path, source }
        };
        for t in &self.tables {
            let table = self.root.join(t);
            match std::fs::DirBuilder::new().mode(self.mode).create(&table) {
                Ok(()) => made.push(table.clone()),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(err(&table)(e)),
            }
            let dst = table.join(&self.part);
            let old = tmp.join(format!(".old-{t}"));
            match std::fs::rename(&dst, &old) {
                Ok(()) => aside.push((old, dst.clone())),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(err(&dst)(e)),
            }
            let src = tmp.join(t);
            std::fs::rename(&src, &dst).map_err(err(&dst))?;
            placed.push((dst, src));
        }
        Ok(())
    }
}

impl Drop for OutDir {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let mut p = pending();
            p.outputs.retain(|o| o.0 != self.id);
            p.made.retain(|o| o.0 != self.id);
            let _ = std::fs::remove_dir_all(tmp);
            if self.made_root {
                // Only when empty: another run may have added its part.
                let _ = std::fs::remove_dir(&self.root);
            }
        }
    }
}

/// `--split` keeps each window's file open until the end (up to
/// `ptdec_out::emit::MAX_WINDOWS`, 4096): the soft limit on open files (often 1024)
/// is raised to the hard one, as far as it goes.
pub fn raise_open_files() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}

/// Standard output, for text: [`stdout_file`], whose write errors are
/// named ([`Stdout`]).
pub fn stdout() -> io::Result<Stdout> {
    stdout_file().map(Stdout)
}

/// Standard output whose write errors say they are standard output's
/// ([`stdout_error`]): every command names a failed write to it the same
/// way, where a bare "No space left on device" named nothing.
#[derive(Debug)]
pub struct Stdout(File);

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(stdout_error)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf).map_err(stdout_error)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().map_err(stdout_error)
    }
}

/// A failed write to standard output, named, with what to do on a full
/// disk ([`stdout_error`]).
#[derive(Debug)]
struct StdoutError(io::Error);

impl std::fmt::Display for StdoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hint = match self.0.kind() {
            io::ErrorKind::StorageFull => "; free space on its disk or redirect it to another",
            // EBADF: fd 1 open for reading only (`1<FILE`), or closed.
            _ if self.0.raw_os_error() == Some(nix::libc::EBADF) => {
                "; it is not open for writing (closed, or opened for reading as `1<FILE` \
                 does): redirect it to a file (> FILE) or a pipe"
            }
            _ => "",
        };
        write!(f, "cannot write to standard output{hint}: {}", self.0)
    }
}

// The cause is in the message: no `source`, which would print it twice.
impl std::error::Error for StdoutError {}

/// `e`, from a write to standard output, named as such. Its kind is kept:
/// a closed pipe (`BrokenPipe`) still ends ptdec quietly, as ripgrep
/// does. Named once, however many writers it passes through.
pub fn stdout_error(e: io::Error) -> io::Error {
    if e.get_ref().is_some_and(|inner| inner.is::<StdoutError>()) {
        return e;
    }
    io::Error::new(e.kind(), StdoutError(e))
}

/// Standard output as a file, for `-o -`: fails when fd 1 was closed
/// (`ptdec ... -o - >&-`) instead of reporting success for output that went
/// nowhere. Rust's runtime reopens a closed fd 0-2 on `/dev/null` (read and
/// write) before `main`, where `io::stdout` would also swallow EBADF; a
/// shell's `>/dev/null` opens it write-only, so `/dev/null` open read-write
/// on fd 1 is the closed stdout.
fn stdout_file() -> io::Result<File> {
    use std::os::fd::AsFd;
    let closed = || {
        // Not BrokenPipe: that one ends ptdec quietly with success.
        io::Error::other("standard output is closed; redirect it to a file (> FILE)")
    };
    if reopened_dev_null(1) {
        return Err(closed());
    }
    let fd = io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|_| closed())?;
    let file = File::from(fd);
    // `1<FILE` opens it for reading only: every write would fail with
    // EBADF after the decode's work, so said now.
    let mode = nix::fcntl::fcntl(file.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL)
        .map(|f| f & nix::libc::O_ACCMODE);
    if mode == Ok(nix::libc::O_RDONLY) {
        return Err(io::Error::other(
            "standard output is open for reading only (as `1<FILE` opens it), not for \
             writing; redirect it to a file (> FILE) or a pipe",
        ));
    }
    // `ptdec trace/data -o - >>trace/data` appends to what is being read.
    if let Some(input) = file
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .and_then(|m| crate::inputs::same_as_meta(&m))
    {
        return Err(io::Error::other(format!(
            "standard output is the input {}; writing it would destroy the input. \
             Redirect it to another file",
            input.display()
        )));
    }
    Ok(file)
}

/// [`stdout_file`] for binary output (FTF, Parquet): a terminal is refused,
/// as gzip and zstd refuse it, rather than filled with bytes no one can
/// read there.
pub fn binary_stdout() -> io::Result<File> {
    let out = stdout_file()?;
    if nix::unistd::isatty(out.as_raw_fd()).unwrap_or(false) {
        return Err(io::Error::other(
            "standard output is a terminal, and the output is binary; \
             redirect it (> out.ftf, | ...) or give -o FILE",
        ));
    }
    Ok(out)
}

/// Whether `fd` is `/dev/null` opened read-write (see [`stdout_file`]).
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
        // With an unnamed temporary, and with a named one (filesystems
        // without O_TMPFILE); replacing a file and writing a new one.
        for unnamed in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let out = dir.path().join("out.ftf");
            std::fs::write(&out, b"old whole file").unwrap();
            let mut f = OutFile::create_with(&out, PRIVATE_MODE, unnamed).unwrap();
            assert_eq!(matches!(f.temp, Temp::Unnamed), unnamed);
            f.write_all(b"half").unwrap();
            assert_eq!(std::fs::read(&out).unwrap(), b"old whole file");
            drop(f);
            assert_eq!(std::fs::read(&out).unwrap(), b"old whole file");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
            let mut f = OutFile::create_with(&out, PRIVATE_MODE, unnamed).unwrap();
            f.write_all(b"new").unwrap();
            f.commit().unwrap();
            assert_eq!(std::fs::read(&out).unwrap(), b"new");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
            let fresh = dir.path().join("fresh.ftf");
            let mut f = OutFile::create_with(&fresh, PRIVATE_MODE, unnamed).unwrap();
            f.write_all(b"first").unwrap();
            f.commit().unwrap();
            assert_eq!(std::fs::read(&fresh).unwrap(), b"first");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
        }
    }

    /// A file's temporary left by a run killed as it put the file in
    /// place (`.NAME.ptdec-PID-N.tmp` of a PID that is gone) is removed by
    /// the next run writing NAME; a live process's, another output's and
    /// other files are kept.
    #[test]
    fn the_next_run_removes_a_killed_runs_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let me = std::process::id();
        let names = [
            format!(".out.ftf.ptdec-{dead}-3.tmp"),
            format!(".out.ftf.ptdec-{me}-3.tmp"),
            format!(".other.ftf.ptdec-{dead}-3.tmp"),
            format!(".out.ftf.ptdec-{dead}-x.tmp"),
            "out.ftf.ptdec-1-1.tmp".to_string(),
        ];
        for n in &names {
            std::fs::write(dir.path().join(n), b"x").unwrap();
        }
        let mut f = OutFile::create(&dir.path().join("out.ftf"), PRIVATE_MODE).unwrap();
        f.write_all(b"new").unwrap();
        f.commit().unwrap();
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut want: Vec<String> = names[1..].to_vec();
        want.push("out.ftf".into());
        want.sort();
        assert_eq!(left, want);
    }

    /// A dataset's temporary left by a killed run (its `.lock` not held)
    /// is removed by the next run into the folder; a live run's (locked),
    /// and one without a `.lock` (not known to be dead), are kept.
    #[test]
    fn the_next_dataset_run_removes_what_a_killed_one_left() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ds");
        let tables = ["calls", "marks"];
        let live = OutDir::create(&root, "trace=live", &tables, false, PRIVATE_MODE).unwrap();
        for t in tables {
            std::fs::create_dir(live.temp().join(t)).unwrap();
        }
        let dead = root.join(".trace=dead.ptdec-4194304-0.tmp");
        std::fs::create_dir_all(dead.join("calls")).unwrap();
        std::fs::write(dead.join("calls/part-0.parquet"), b"half").unwrap();
        std::fs::write(dead.join(LOCK), b"").unwrap();
        let unknown = root.join(".trace=old.ptdec-4194305-0.tmp");
        std::fs::create_dir(&unknown).unwrap();
        let other = root.join(".notes");
        std::fs::write(&other, b"x").unwrap();
        let next = OutDir::create(&root, "trace=next", &tables, false, PRIVATE_MODE).unwrap();
        assert!(!dead.exists(), "the dead run's temporary is removed");
        assert!(live.temp().join("calls").is_dir(), "the live run's is kept");
        assert!(unknown.is_dir() && other.is_file());
        // Each run's temporary is locked from before it has its name: no
        // `.new` is left, and the live ones' locks are held.
        let mut hidden: Vec<String> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        hidden.sort();
        assert_eq!(hidden.len(), 4, "{hidden:?}");
        assert!(hidden.iter().all(|h| h.ends_with(".tmp") || h == ".notes"));
        for d in [live.temp(), next.temp()] {
            let f = File::options()
                .read(true)
                .write(true)
                .open(d.join(LOCK))
                .unwrap();
            assert!(
                nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).is_err()
            );
        }
        live.commit().unwrap();
        drop(next);
        assert_eq!(
            std::fs::read_dir(&root).unwrap().count(),
            4,
            "calls, marks, .notes and the unknown temporary"
        );
    }

    /// A commit waits while another process commits into the same
    /// folder (its `flock` on the folder, taken here by another open of
    /// it), so two runs replacing one part never mix their tables.
    #[test]
    fn a_commit_waits_for_another_into_the_same_folder() {
        use nix::fcntl::{Flock, FlockArg};
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ds");
        let d = OutDir::create(&root, "trace=a", &["calls"], true, PRIVATE_MODE).unwrap();
        std::fs::create_dir(d.temp().join("calls")).unwrap();
        let other = Flock::lock(File::open(&root).unwrap(), FlockArg::LockExclusive).unwrap();
        let committing = std::thread::spawn(move || d.commit());
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(!committing.is_finished(), "committed beside another commit");
        assert!(!root.join("calls/trace=a").exists());
        drop(other);
        committing.join().unwrap().unwrap();
        assert!(root.join("calls/trace=a").is_dir());
    }

    /// A dataset folder that is a file or a device is refused saying
    /// which (`-o /dev/null` said "it is a file").
    #[test]
    fn a_dataset_folder_that_is_no_folder_is_refused_saying_what_it_is() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        for (root, what) in [
            (file.as_path(), "it is a file, not a folder"),
            (Path::new("/dev/null"), "it is a device, not a folder"),
        ] {
            let e = OutDir::create(root, "trace=a", &["calls"], false, PRIVATE_MODE).unwrap_err();
            assert!(e.to_string().contains(what), "{e}");
        }
        assert_eq!(std::fs::read(&file).unwrap(), b"x");
        // A dataset folder whose own folder is missing is named with it
        // and how to make it (the error was a bare "No such file or
        // directory").
        let missing = tmp.path().join("no");
        let e = OutDir::create(
            &missing.join("ds"),
            "trace=a",
            &["calls"],
            false,
            PRIVATE_MODE,
        )
        .unwrap_err()
        .to_string();
        let want = format!(
            "cannot write {}: its folder {} does not exist; make it (mkdir -p {}) or give \
             another name",
            missing.join("ds").display(),
            missing.display(),
            missing.display()
        );
        assert!(e.contains(&want), "{e}");
        assert!(!missing.exists());
    }

    /// What is not a folder where a table or a part goes is refused when
    /// the output is created, before the decode: a file `calls` failed
    /// only when the tables were put in place ("Not a directory"), and a
    /// file at a part's place was replaced with --force, the run then
    /// failing with the new part in place and its temporary left.
    #[test]
    fn a_file_where_a_table_or_a_part_goes_is_refused_up_front() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ds");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("calls"), b"x").unwrap();
        let e = OutDir::create(&root, "trace=a", &["calls"], true, PRIVATE_MODE).unwrap_err();
        assert!(
            e.to_string().contains("calls, which is not a folder"),
            "{e}"
        );
        std::fs::remove_file(root.join("calls")).unwrap();
        std::fs::create_dir(root.join("calls")).unwrap();
        std::fs::write(root.join("calls/trace=a"), b"x").unwrap();
        let e = OutDir::create(&root, "trace=a", &["calls"], true, PRIVATE_MODE).unwrap_err();
        assert!(e.to_string().contains("it is not a folder"), "{e}");
        assert_eq!(std::fs::read(root.join("calls/trace=a")).unwrap(), b"x");
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 1, "no temporary");
    }

    /// This process's umask, as /proc/self/status gives it.
    fn umask() -> u32 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let v = status
            .lines()
            .find_map(|l| l.strip_prefix("Umask:"))
            .unwrap();
        u32::from_str_radix(v.trim(), 8).unwrap()
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_new_output_gets_the_mode_given_and_a_replaced_one_keeps_its_own_at_most() {
        let mask = umask();
        for unnamed in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            for (name, given) in [("private.ftf", 0o600), ("shared.ftf", 0o644)] {
                let out = dir.path().join(name);
                let mut f = OutFile::create_with(&out, given, unnamed).unwrap();
                f.write_all(b"new").unwrap();
                f.commit().unwrap();
                assert_eq!(mode(&out), given & !mask, "{name} unnamed={unnamed}");
            }
            // Replaced: its own mode, whatever the umask, less what the
            // mode given has not (never more open than the trace).
            for (kept, given) in [
                (0o640, 0o640),
                (0o604, 0o644),
                (0o600, 0o644),
                (0o666, 0o600),
                (0o644, 0o640),
            ] {
                let out = dir.path().join("kept.ftf");
                std::fs::write(&out, b"old").unwrap();
                std::fs::set_permissions(&out, std::fs::Permissions::from_mode(kept)).unwrap();
                let mut f = OutFile::create_with(&out, given, unnamed).unwrap();
                f.write_all(b"new").unwrap();
                f.commit().unwrap();
                assert_eq!(std::fs::read(&out).unwrap(), b"new");
                assert_eq!(mode(&out), kept & given, "{kept:o} unnamed={unnamed}");
            }
        }
    }

    #[test]
    fn mode_of_gives_the_traces_read_and_write_bits() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("data");
        std::fs::write(&t, b"PERFILE2").unwrap();
        for (traced, want) in [
            (0o600, 0o600),
            (0o640, 0o640),
            (0o644, 0o644),
            (0o755, 0o644),
            (0o400, 0o600),
            (0o444, 0o644),
        ] {
            std::fs::set_permissions(&t, std::fs::Permissions::from_mode(traced)).unwrap();
            assert_eq!(mode_of(&t), want, "{traced:o}");
        }
        assert_eq!(mode_of(&dir.path().join("missing")), PRIVATE_MODE);
    }

    #[test]
    fn writeback_starts_as_the_bytes_come_and_the_file_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("big.ftf");
        let mut f = OutFile::create(&out, PRIVATE_MODE).unwrap();
        let piece: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
        let pieces = (5 * WRITEBACK_STEP / 2) >> 20;
        for k in 0..pieces {
            f.write_all(&piece[k as usize % 7..]).unwrap();
        }
        // Started twice: past one step, and less than one step behind.
        assert!(
            f.started > WRITEBACK_STEP && f.written - f.started < WRITEBACK_STEP,
            "started {} of {}",
            f.started,
            f.written
        );
        f.commit().unwrap();
        let back = std::fs::read(&out).unwrap();
        let mut at = 0;
        for k in 0..pieces {
            let p = &piece[k as usize % 7..];
            assert!(back[at..at + p.len()] == *p, "piece {k}");
            at += p.len();
        }
        assert_eq!(at, back.len());
    }

    #[test]
    fn an_unnamed_temporary_is_used_where_the_filesystem_has_them() {
        // The tests' temporary dirs are on a filesystem with O_TMPFILE
        // (ext4, xfs, btrfs, tmpfs): if not, SIGKILL would leave files.
        let dir = tempfile::tempdir().unwrap();
        let f = OutFile::create(&dir.path().join("out.ftf"), PRIVATE_MODE).unwrap();
        assert!(matches!(f.temp, Temp::Unnamed), "{:?}", f.temp);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_name_of_255_bytes_can_be_written() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("x".repeat(255));
        let mut f = OutFile::create(&out, PRIVATE_MODE).unwrap();
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
        crate::inputs::read(&input).unwrap();
        let link = dir.join("link.ftf");
        std::os::unix::fs::symlink(&input, &link).unwrap();
        let hard = dir.join("hard.ftf");
        std::fs::hard_link(&input, &hard).unwrap();
        for p in [&input, &link, &hard] {
            let e = OutFile::create(p, PRIVATE_MODE).unwrap_err();
            assert!(matches!(e, OutFileError::IsInput { .. }), "{e}");
            assert!(e.to_string().contains("same file as the input"), "{e}");
        }
        assert_eq!(std::fs::read(&input).unwrap(), b"PERFILE2");
    }

    #[test]
    fn an_input_read_after_the_output_was_created_is_not_replaced() {
        // Images are opened as the decode meets them, after the output was
        // created: the commit checks again.
        for unnamed in [true, false] {
            let tmp = tempfile::tempdir().unwrap();
            let image = tmp.path().join("vdso.so");
            std::fs::write(&image, b"\x7fELF image").unwrap();
            let mut f = OutFile::create_with(&image, PRIVATE_MODE, unnamed).unwrap();
            f.write_all(b"FTF").unwrap();
            crate::inputs::read(&image).unwrap();
            let e = f.commit().unwrap_err();
            assert!(matches!(e, OutFileError::IsInput { .. }), "{e}");
            assert_eq!(std::fs::read(&image).unwrap(), b"\x7fELF image");
            assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
        }
    }

    #[test]
    fn abandon_removes_named_temporaries_and_stops_every_output() {
        // abandon() stops this process's outputs for good: run in a child
        // (this test binary again, this test only, with the folder in an
        // environment variable).
        const DIR: &str = "PTDEC_TEST_ABANDON_DIR";
        if let Some(dir) = std::env::var_os(DIR) {
            let dir = PathBuf::from(dir);
            let named = dir.join("named.ftf");
            let unnamed = dir.join("unnamed.ftf");
            let mut a = OutFile::create_with(&named, PRIVATE_MODE, false).unwrap();
            let mut b = OutFile::create_with(&unnamed, PRIVATE_MODE, true).unwrap();
            a.write_all(b"half").unwrap();
            b.write_all(b"half").unwrap();
            // A dataset into a folder it makes: the folder goes too (an
            // empty one was left).
            let ds = OutDir::create(&dir.join("ds"), "trace=t", &["calls"], false, PRIVATE_MODE)
                .unwrap();
            assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2, "named, ds");
            let mut gone = abandon();
            gone.sort();
            let part = dir.join("ds/{calls}/trace=t");
            assert_eq!(gone, [part, named.clone(), unnamed]);
            std::mem::forget(ds);
            assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
            let e = a.commit().unwrap_err();
            assert!(matches!(e, OutFileError::Abandoned { .. }), "{e}");
            let e = OutFile::create(&named, PRIVATE_MODE).unwrap_err();
            assert!(e.to_string().contains("interrupted"), "{e}");
            std::process::exit(if std::fs::read_dir(&dir).unwrap().count() == 0 {
                0
            } else {
                1
            });
        }
        let dir = tempfile::tempdir().unwrap();
        let o = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "outfile::tests::abandon_removes_named_temporaries_and_stops_every_output",
                "--test-threads=1",
            ])
            .env(DIR, dir.path())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("running 1 test"),
            "the child ran the test"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_device_is_written_in_place_never_replaced() {
        let mut f = OutFile::create(Path::new("/dev/null"), PRIVATE_MODE).unwrap();
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
    fn a_dangling_link_output_makes_the_file_it_points_to() {
        let dir = tempfile::tempdir().unwrap();
        let write = |link: &Path| -> Result<(), OutFileError> {
            let mut f = OutFile::create(link, PRIVATE_MODE)?;
            f.write_all(b"new").unwrap();
            f.commit()
        };
        // Relative to the link's folder, through a second dangling link;
        // the links stay links (the link was replaced by a file).
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let first = dir.path().join("out.ftf");
        std::os::unix::fs::symlink("sub/second", &first).unwrap();
        std::os::unix::fs::symlink("real.ftf", dir.path().join("sub/second")).unwrap();
        write(&first).unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("sub/real.ftf")).unwrap(),
            b"new"
        );
        for link in [&first, &dir.path().join("sub/second")] {
            assert!(std::fs::symlink_metadata(link)
                .unwrap()
                .file_type()
                .is_symlink());
        }
        // Into a folder not there, and a loop of links: refused, saying so.
        let lost = dir.path().join("lost.ftf");
        std::os::unix::fs::symlink("no/such/dir/x.ftf", &lost).unwrap();
        let e = write(&lost).unwrap_err().to_string();
        assert!(e.contains("whose folder does not exist"), "{e}");
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        let e = write(&a).unwrap_err().to_string();
        assert!(e.contains("loop of links"), "{e}");
        assert!(!dir.path().join("no").exists());
    }

    #[test]
    fn a_dataset_folder_that_is_a_dangling_link_is_refused_saying_so() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ds");
        std::os::unix::fs::symlink("elsewhere", &root).unwrap();
        let e = OutDir::create(&root, "trace=t", &["calls"], false, PRIVATE_MODE)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("symbolic link to elsewhere, which does not exist"),
            "{e}"
        );
    }

    #[test]
    fn a_proc_link_to_a_pipe_is_written_in_place_and_to_a_deleted_file_refused() {
        use std::io::Read;
        // `-o /dev/stdout` on a pipe: the link leads to "pipe:[N]", which
        // is no path; it was taken for a dangling link and failed.
        let (r, w) = nix::unistd::pipe().unwrap();
        let link = PathBuf::from(format!("/proc/self/fd/{}", w.as_raw_fd()));
        let mut f = OutFile::create(&link, PRIVATE_MODE).unwrap();
        f.write_all(b"through").unwrap();
        f.commit().unwrap();
        drop(w);
        let mut got = String::new();
        File::from(r).read_to_string(&mut got).unwrap();
        assert_eq!(got, "through");
        // An open file since deleted: not a new file named "x (deleted)".
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone.ftf");
        let open = File::create(&gone).unwrap();
        std::fs::remove_file(&gone).unwrap();
        let link = PathBuf::from(format!("/proc/self/fd/{}", open.as_raw_fd()));
        let e = OutFile::create(&link, PRIVATE_MODE)
            .unwrap_err()
            .to_string();
        assert!(e.contains("deleted"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // A dangling link to a folder (trailing /): no file of its name.
        let trail = dir.path().join("trail");
        std::os::unix::fs::symlink("newdir/", &trail).unwrap();
        let e = OutFile::create(&trail, PRIVATE_MODE)
            .unwrap_err()
            .to_string();
        assert!(e.contains("to the folder newdir/"), "{e}");
        assert!(!dir.path().join("newdir").exists());
    }

    #[test]
    fn same_output_sees_one_file_through_links_before_it_exists() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::os::unix::fs::symlink("x.txt", d.join("la")).unwrap();
        std::os::unix::fs::symlink(d.join("x.txt"), d.join("lb")).unwrap();
        assert!(same_output(&d.join("la"), &d.join("lb")));
        assert!(same_output(&d.join("la"), &d.join("./x.txt")));
        assert!(!same_output(&d.join("la"), &d.join("y.txt")));
        assert!(same_output(Path::new("-"), Path::new("-")));
        assert!(!same_output(Path::new("-"), &d.join("x.txt")));
    }

    #[test]
    fn a_failed_commit_leaves_no_table_folder_it_made() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ds");
        let out =
            OutDir::create(&root, "trace=t", &["calls", "marks"], false, PRIVATE_MODE).unwrap();
        for t in ["calls", "marks"] {
            std::fs::create_dir(out.temp().join(t)).unwrap();
        }
        // In the way after the checks: `calls` is placed, then `marks`
        // fails (it left an empty `calls/`, and `ds/` with it).
        std::fs::write(root.join("marks"), b"a file").unwrap();
        assert!(out.commit().is_err());
        let mut left: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["marks"]);
    }

    #[test]
    fn a_replaced_file_keeps_its_owner_and_a_missing_folder_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.ftf");
        std::fs::write(&out, b"old").unwrap();
        let nobody = 65534;
        if std::os::unix::fs::chown(&out, Some(nobody), Some(nobody)).is_err() {
            println!("skipped the owner: not root");
        } else {
            let mut f = OutFile::create(&out, PRIVATE_MODE).unwrap();
            f.write_all(b"new").unwrap();
            f.commit().unwrap();
            let m = std::fs::metadata(&out).unwrap();
            assert_eq!((m.uid(), m.gid()), (nobody, nobody));
        }
        let e = OutFile::create(&dir.path().join("no/such/x.ftf"), PRIVATE_MODE)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("its folder") && e.contains("does not exist"),
            "{e}"
        );
        let e = OutFile::create(&out.join("x.ftf"), PRIVATE_MODE)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a folder"), "{e}");
        let sock = dir.path().join("sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let e = OutFile::create(&sock, PRIVATE_MODE)
            .unwrap_err()
            .to_string();
        assert!(e.contains("it is a socket"), "{e}");
    }

    #[test]
    fn a_block_device_is_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let disk = dir.path().join("disk");
        // A node of no device (major 7 is loop; minor 1000 is not made):
        // refused before anything opens it.
        let made = nix::sys::stat::mknod(
            &disk,
            nix::sys::stat::SFlag::S_IFBLK,
            nix::sys::stat::Mode::from_bits_truncate(0o600),
            nix::sys::stat::makedev(7, 1000),
        );
        if let Err(e) = made {
            println!("skipped: cannot make a block device node here ({e}); needs CAP_MKNOD");
            return;
        }
        let e = OutFile::create(&disk, PRIVATE_MODE)
            .unwrap_err()
            .to_string();
        assert!(e.contains("it is a block device"), "{e}");
    }

    #[test]
    fn a_link_output_writes_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real.ftf");
        std::fs::write(&target, b"old").unwrap();
        let link = dir.path().join("out.ftf");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut f = OutFile::create(&link, PRIVATE_MODE).unwrap();
        f.write_all(b"new").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
    }
}
