//! The trace directory (`DIR/data`, `DIR/images/`, `DIR/sysroot/`,
//! `DIR/kcore_dir/`, ptsim's `DIR/truth/`), shared by ptrec and ptsim: created
//! 0700 without following a symbolic link in its last component, never
//! replacing an existing path unless asked (`--force`), and then only a trace
//! dir (recognised by its contents) that is not the current directory, one of
//! its parents, `/` or `$HOME`. A replacement is written beside the old trace
//! and swapped in at the end ([`OutDir::commit`]), so a failed run leaves the
//! old trace as it was. Under sudo the result is handed to the invoking user,
//! on success and failure alike. Everything in it is the owner's alone
//! (folders 0700, files 0600, as perf writes perf.data): a trace holds the
//! program's arguments and whatever its memory held. [`create_file`] and
//! [`create_dir_all`] are how ptrec and ptsim create what goes in it.

use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::errors::Error;

/// perf.data's magic, "PERFILE2", in both byte orders.
const PERF_MAGICS: [&[u8; 8]; 2] = [b"PERFILE2", b"2ELIFREP"];

/// Names a trace dir may hold: ours, perf's (`perf record --kcore -o DIR`
/// writes `data` and `kcore_dir`; `--threads` writes `data.N`), and the
/// reserve file older ptrec versions left behind when killed.
const TRACE_ENTRIES: [&str; 6] = [
    "data",
    "data.reserve",
    "images",
    "sysroot",
    "kcore_dir",
    "truth",
];

/// Mode of the trace dir and of every folder in it.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file in a trace dir.
pub const FILE_MODE: u32 = 0o600;

/// Creates (or truncates) the file `path` of a trace dir, mode 0600 whatever
/// the umask, never through a symbolic link at `path`; an existing file
/// loses any wider permission bits.
pub fn create_file(path: &Path) -> std::io::Result<File> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    if f.metadata()?.permissions().mode() & 0o777 != FILE_MODE {
        f.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
    }
    Ok(f)
}

/// Creates the folder `path` of a trace dir and its missing parents, mode
/// 0700 whatever the umask (an existing folder is left as it is).
pub fn create_dir_all(path: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(path)
}

/// The output directory of one recording.
#[derive(Debug)]
pub struct OutDir {
    /// Where the files are written (the target itself, or a staging
    /// directory beside it when an existing trace is replaced).
    path: PathBuf,
    /// The name the trace has when done.
    target: PathBuf,
    /// `path` is a staging dir to swap with the existing `target`.
    replaces: bool,
    /// `--force` was given and `target` existed (and passed
    /// [`check_replaceable`]) when the run started: only then may
    /// [`OutDir::commit`] replace what is there.
    replace_allowed: bool,
    /// Parent directories this run created (handed to the sudo user too).
    created_parents: Vec<PathBuf>,
}

fn output_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Output {
        path: path.to_path_buf(),
        source,
    }
}

fn refused(path: &Path, why: impl Into<String>) -> Error {
    Error::OutputRefused {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

impl OutDir {
    /// Creates the trace dir `path` (mode 0700; missing parents are created).
    /// An existing path is an error unless `force`, and with `force` it must
    /// pass [`check_replaceable`]; the new trace is then written to a
    /// staging directory beside it until [`OutDir::commit`]. A symbolic link
    /// as the last component is always refused.
    pub fn create(path: &Path, force: bool) -> Result<OutDir, Error> {
        Self::create_impl(path, force, false)
    }

    /// As [`OutDir::create`], but the trace is always written to the
    /// staging directory and appears under its name only at
    /// [`OutDir::commit`]: for a writer that produces nothing readable
    /// until it is done (ptsim), so that a killed run never leaves a
    /// half-made trace dir under the name asked for.
    pub fn create_staged(path: &Path, force: bool) -> Result<OutDir, Error> {
        Self::create_impl(path, force, true)
    }

    fn create_impl(path: &Path, force: bool, always_stage: bool) -> Result<OutDir, Error> {
        if path.as_os_str().is_empty() {
            return Err(Error::Usage("the output path is empty".into()));
        }
        let exists = match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(Error::OutputSymlink {
                    path: path.to_path_buf(),
                })
            }
            Ok(_) if !force => {
                return Err(Error::OutputExists {
                    path: path.to_path_buf(),
                })
            }
            Ok(_) => {
                check_replaceable(path)?;
                true
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(output_err(path)(e)),
        };
        let created_parents = create_parents(path)?;
        let (dir, replaces) = if exists || always_stage {
            (staging_name(path, "new")?, true)
        } else {
            (path.to_path_buf(), false)
        };
        // mkdir(2) never follows a symbolic link in the last component: a
        // link planted since the check above makes it fail with EEXIST.
        std::fs::DirBuilder::new()
            .mode(DIR_MODE)
            .create(&dir)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => Error::OutputExists { path: dir.clone() },
                // Named by the -o given and its folder, never the hidden
                // staging name (`.s.new-PID`) the user did not give.
                kind => Error::Output {
                    path: path.to_path_buf(),
                    source: std::io::Error::new(
                        kind,
                        format!(
                            "cannot make a folder in {} ({e}); give -o a place you may write in",
                            folder_of(path).display()
                        ),
                    ),
                },
            })?;
        let d = OutDir {
            path: dir,
            target: path.to_path_buf(),
            replaces,
            replace_allowed: exists,
            created_parents,
        };
        d.chown_to_sudo_user()?;
        Ok(d)
    }

    /// Where files are written now (the staging dir while replacing).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The trace dir's final name (`-o`).
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// `data`, the perf.data file, under [`OutDir::path`].
    pub fn data(&self) -> PathBuf {
        self.path.join("data")
    }

    /// Creates (if needed) and returns the subdirectory `name`.
    pub fn subdir(&self, name: &str) -> Result<PathBuf, Error> {
        let p = self.path.join(name);
        match std::fs::DirBuilder::new().mode(DIR_MODE).create(&p) {
            Ok(()) => Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let m = std::fs::symlink_metadata(&p).map_err(output_err(&p))?;
                if m.is_dir() {
                    Ok(p)
                } else {
                    Err(Error::OutputSymlink { path: p })
                }
            }
            Err(e) => Err(output_err(&p)(e)),
        }
    }

    /// Finishes the trace dir: hands it to the sudo user, and when an
    /// existing trace is replaced, swaps the new one in (atomically where the
    /// file system can exchange two names) and removes the old one. Returns
    /// the final path.
    ///
    /// What is at the target is looked at again here, not only when the
    /// run started: something that appeared there since (a folder made by
    /// hand, another run's trace) is never replaced without `--force`, and
    /// with it only when it is a trace ([`check_replaceable`]); the new
    /// trace then stays under its staging name
    /// ([`Error::OutputAppeared`]).
    pub fn commit(self) -> Result<PathBuf, Error> {
        self.chown_to_sudo_user()?;
        if !self.replaces {
            return Ok(self.target);
        }
        let appeared = |this: &Self| Error::OutputAppeared {
            path: this.target.clone(),
            kept: this.path.clone(),
        };
        if std::fs::symlink_metadata(&self.target).is_err() {
            // Staged without anything to replace: renamed, unless
            // something took the name meanwhile (`rename(2)` would
            // replace an empty folder or a file there).
            return match crate::sys::rename_noreplace(&self.path, &self.target) {
                Ok(()) => Ok(self.target),
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Err(appeared(&self)),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    // A file system that cannot say: the plain rename,
                    // which refuses a folder that is not empty.
                    std::fs::rename(&self.path, &self.target).map_err(output_err(&self.target))?;
                    Ok(self.target)
                }
                Err(e) => Err(output_err(&self.target)(e)),
            };
        }
        if !self.replace_allowed || check_replaceable(&self.target).is_err() {
            return Err(appeared(&self));
        }
        match crate::sys::rename_exchange(&self.path, &self.target) {
            Ok(()) => {
                // `path` now holds the old trace.
                remove_any(&self.path).map_err(output_err(&self.path))?;
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                // No RENAME_EXCHANGE here: move the old one aside first.
                let old = staging_name(&self.target, "old")?;
                std::fs::rename(&self.target, &old).map_err(output_err(&self.target))?;
                std::fs::rename(&self.path, &self.target).map_err(output_err(&self.target))?;
                remove_any(&old).map_err(output_err(&old))?;
            }
            Err(e) => return Err(output_err(&self.target)(e)),
        }
        Ok(self.target)
    }

    /// Whether an existing trace is to be replaced at [`OutDir::commit`].
    pub fn replaces_existing(&self) -> bool {
        self.replaces && std::fs::symlink_metadata(&self.target).is_ok()
    }

    /// Ends a run that failed after recording something: a new trace dir is
    /// kept where it is; when an existing trace was to be replaced, that one
    /// stays as it was and the new one is kept beside it (its staging name).
    /// Hands it to the sudo user; returns where the recorded data is.
    pub fn keep_failed(self) -> Result<PathBuf, Error> {
        if self.replaces_existing() {
            self.chown_to_sudo_user()?;
            Ok(self.path)
        } else {
            self.commit()
        }
    }

    /// Removes what this run created (a start that recorded nothing); an
    /// existing trace being replaced is left untouched.
    pub fn discard(self) {
        let _ = std::fs::remove_dir_all(&self.path);
        for p in self.created_parents.iter().rev() {
            let _ = std::fs::remove_dir(p);
        }
    }

    /// Under sudo (`SUDO_UID`/`SUDO_GID` set and running as root), gives the
    /// whole tree, and any parent directory this run created, to the
    /// invoking user. Links are changed, never followed.
    pub fn chown_to_sudo_user(&self) -> Result<(), Error> {
        let Some((uid, gid)) = sudo_ids() else {
            return Ok(());
        };
        if !running_as_root() {
            return Ok(());
        }
        for p in &self.created_parents {
            std::os::unix::fs::lchown(p, Some(uid), Some(gid)).map_err(output_err(p))?;
        }
        chown_tree(&self.path, uid, gid)
    }
}

/// ptsim's ground truth holds only its own files (`TID.txt`,
/// `summary.txt`, `injected.txt`): anything else was put there by someone,
/// and replacing the trace must not delete it.
fn check_truth_dir(trace: &Path, truth: &Path) -> Result<(), Error> {
    let Ok(m) = std::fs::symlink_metadata(truth) else {
        return Ok(());
    };
    if !m.is_dir() {
        return Err(refused(
            trace,
            "its `truth` is not the folder ptsim writes; remove it yourself or choose another -o",
        ));
    }
    for entry in std::fs::read_dir(truth).map_err(output_err(truth))? {
        let entry = entry.map_err(output_err(truth))?;
        let name = entry.file_name();
        let n = name.to_string_lossy();
        let ours = matches!(&*n, "summary.txt" | "injected.txt")
            || n.strip_suffix(".txt")
                .is_some_and(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()));
        if !ours || !entry.file_type().is_ok_and(|t| t.is_file()) {
            return Err(refused(
                trace,
                format!(
                    "its truth/ holds {n:?}, which ptsim does not write; replacing the trace would \
                     delete it. Move it out or choose another -o"
                ),
            ));
        }
    }
    Ok(())
}

/// Whether `--force` may replace the existing `path`: a trace dir (only
/// names ptrec, ptsim or `perf record` write, with a perf.data `data`), an
/// empty directory, or a perf.data file; never the current directory or one
/// of its parents, `/`, or `$HOME`. The error says why not.
pub fn check_replaceable(path: &Path) -> Result<(), Error> {
    let canon = std::fs::canonicalize(path).map_err(output_err(path))?;
    if canon == Path::new("/") {
        return Err(refused(path, "it is the root directory"));
    }
    if let Ok(cwd) = std::env::current_dir().and_then(std::fs::canonicalize) {
        if cwd.starts_with(&canon) {
            return Err(refused(
                path,
                "it is the current directory or one of its parents",
            ));
        }
    }
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        if std::fs::canonicalize(&home).is_ok_and(|h| h.starts_with(&canon)) {
            return Err(refused(path, "it is $HOME or one of its parents"));
        }
    }
    let m = std::fs::symlink_metadata(path).map_err(output_err(path))?;
    if m.is_file() {
        return if has_perf_magic(path) {
            Ok(())
        } else {
            Err(refused(
                path,
                "it is a file that is not a perf.data file; remove it yourself if it should go",
            ))
        };
    }
    if !m.is_dir() {
        return Err(refused(path, "it is neither a directory nor a file"));
    }
    let mut has_data = false;
    let mut entries = 0;
    for entry in std::fs::read_dir(path).map_err(output_err(path))? {
        let entry = entry.map_err(output_err(path))?;
        entries += 1;
        let name = entry.file_name();
        let name_str = name.to_string_lossy();
        let known = TRACE_ENTRIES.contains(&name_str.as_ref())
            || name_str
                .strip_prefix("data.")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !known {
            return Err(refused(
                path,
                format!(
                    "it holds {name_str:?}, which neither ptrec, ptsim nor perf record writes \
                     into a trace dir; it does not look like a trace. Remove it yourself or \
                     choose another -o"
                ),
            ));
        }
        if name_str == "data" {
            has_data = true;
        }
        if name_str == "truth" {
            check_truth_dir(path, &entry.path())?;
        }
    }
    if entries == 0 {
        return Ok(());
    }
    let data = path.join("data");
    let data_is_file = std::fs::symlink_metadata(&data).is_ok_and(|m| m.is_file());
    if !has_data || !data_is_file || !has_perf_magic(&data) {
        return Err(refused(
            path,
            "it has no perf.data file `data` (one starting with PERFILE2); it does not look \
             like a trace. Remove it yourself or choose another -o",
        ));
    }
    Ok(())
}

fn has_perf_magic(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && PERF_MAGICS.iter().any(|m| **m == magic)
}

/// `.NAME.KIND-PID` beside `path`, for a staging or an old trace dir.
fn staging_name(path: &Path, kind: &str) -> Result<PathBuf, Error> {
    let name = path
        .file_name()
        .ok_or_else(|| refused(path, "it has no final name component"))?;
    // At most 200 bytes of the name: within NAME_MAX whenever `name` is.
    let mut s = OsString::from(".");
    s.push(std::ffi::OsStr::from_bytes(
        &name.as_bytes()[..name.len().min(200)],
    ));
    s.push(format!(".{kind}-{}", std::process::id()));
    let p = path.with_file_name(s);
    if std::fs::symlink_metadata(&p).is_ok() {
        // A leftover of an earlier run with our pid: it is ours to reuse.
        remove_any(&p).map_err(output_err(&p))?;
    }
    Ok(p)
}

/// What runs killed while writing the trace dir `path` left beside it,
/// each as a message naming it and what to do: `.NAME.new-PID` (a
/// replacement, or any ptsim trace, being written: it holds that run's
/// trace up to the kill, which ptdec reads) and `.NAME.old-PID` (the
/// trace a replacement had moved aside), whose PID no longer runs. They
/// are never removed: each may be the only copy of what was recorded.
pub fn leftovers(path: &Path) -> Vec<String> {
    let Some(name) = path.file_name() else {
        return Vec::new();
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut prefix = b".".to_vec();
    prefix.extend_from_slice(&name.as_bytes()[..name.len().min(200)]);
    let mut found: Vec<(PathBuf, &str, u32)> = entries
        .flatten()
        .filter_map(|e| {
            let entry = e.file_name();
            let rest = entry.as_bytes().strip_prefix(prefix.as_slice())?;
            let (kind, pid) = [".new-", ".old-"]
                .into_iter()
                .find_map(|k| Some((k, rest.strip_prefix(k.as_bytes())?)))?;
            let pid: u32 = std::str::from_utf8(pid).ok()?.parse().ok()?;
            // A live run's (or this one's) is no leftover.
            let dead = pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists();
            (dead && e.file_type().is_ok_and(|t| t.is_dir()))
                .then(|| (path.with_file_name(&entry), kind, pid))
        })
        .collect();
    found.sort();
    found
        .into_iter()
        .map(|(p, kind, pid)| {
            let what = if kind == ".new-" {
                "holds the trace that run wrote until it was killed, which ptdec reads"
            } else {
                "holds the trace that run was replacing, moved aside"
            };
            format!(
                "{p} was left by a run writing {path} that was killed (pid {pid}, no longer \
                 running); it {what}. Keep it under a name of its own (mv {p} NEWNAME) or \
                 remove it (rm -r {p})",
                p = p.display(),
                path = path.display(),
            )
        })
        .collect()
}

fn remove_any(p: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
        Ok(_) => std::fs::remove_file(p),
        Err(e) => Err(e),
    }
}

/// The folder `path` is in (`.` for a bare name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Creates the missing parents of `path` (0755) and returns them, outermost first.
fn create_parents(path: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut missing = Vec::new();
    let mut p = path.parent();
    while let Some(dir) = p.filter(|d| !d.as_os_str().is_empty()) {
        if std::fs::symlink_metadata(dir).is_ok() {
            break;
        }
        missing.push(dir.to_path_buf());
        p = dir.parent();
    }
    missing.reverse();
    for dir in &missing {
        match std::fs::DirBuilder::new().mode(0o755).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(output_err(dir)(e)),
        }
    }
    Ok(missing)
}

/// The invoking user's (uid, gid) when running as root under sudo: who
/// everything ptrec leaves behind is handed to.
pub fn sudo_user() -> Option<(u32, u32)> {
    sudo_ids().filter(|_| running_as_root())
}

fn sudo_ids() -> Option<(u32, u32)> {
    let uid = std::env::var("SUDO_UID").ok()?.parse().ok()?;
    let gid = std::env::var("SUDO_GID").ok()?.parse().ok()?;
    Some((uid, gid))
}

/// Whether the effective uid is 0 (from `/proc/self/status`).
pub fn running_as_root() -> bool {
    status_field("Uid:")
        .and_then(|v| v.split_whitespace().nth(1).map(|e| e == "0"))
        .unwrap_or(false)
}

/// A line of `/proc/self/status` after its `key`.
pub fn status_field(key: &str) -> Option<String> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
}

fn chown_tree(path: &Path, uid: u32, gid: u32) -> Result<(), Error> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid)).map_err(output_err(path))?;
    let m = std::fs::symlink_metadata(path).map_err(output_err(path))?;
    if m.is_dir() {
        for entry in std::fs::read_dir(path).map_err(output_err(path))? {
            let entry = entry.map_err(output_err(path))?;
            chown_tree(&entry.path(), uid, gid)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn fake_trace(dir: &Path) {
        std::fs::create_dir_all(dir.join("images")).unwrap();
        std::fs::write(dir.join("data"), b"PERFILE2 and the rest").unwrap();
    }

    #[test]
    fn never_overwrites_or_follows() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("t");
        let d = OutDir::create(&out, false).unwrap();
        assert_eq!(
            std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
            0o700
        );
        std::fs::write(d.data(), b"PERFILE2").unwrap();
        d.commit().unwrap();
        assert!(matches!(
            OutDir::create(&out, false),
            Err(Error::OutputExists { .. })
        ));
        // A symbolic link is refused even with --force, and its target untouched.
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&out, &link).unwrap();
        for force in [false, true] {
            let e = OutDir::create(&link, force).unwrap_err();
            assert!(matches!(e, Error::OutputSymlink { .. }), "{e}");
        }
        assert!(out.join("data").exists());
        // A subdir that is a link is refused.
        let d = OutDir::create(&tmp.path().join("u"), false).unwrap();
        std::os::unix::fs::symlink(tmp.path(), d.path().join("images")).unwrap();
        assert!(d.subdir("images").is_err());
        assert!(d.subdir("sysroot").unwrap().is_dir());
    }

    #[test]
    fn force_replaces_only_a_trace_and_only_at_commit() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("t");
        fake_trace(&out);
        std::fs::write(out.join("data"), b"PERFILE2 old").unwrap();
        let d = OutDir::create(&out, true).unwrap();
        assert_ne!(
            d.path(),
            out,
            "a replacement is staged beside the old trace"
        );
        std::fs::write(d.data(), b"PERFILE2 new").unwrap();
        // Until the commit, the old trace is intact.
        assert_eq!(std::fs::read(out.join("data")).unwrap(), b"PERFILE2 old");
        let staged = d.path().to_path_buf();
        assert_eq!(d.commit().unwrap(), out);
        assert_eq!(std::fs::read(out.join("data")).unwrap(), b"PERFILE2 new");
        assert!(!staged.exists());
        assert!(!out.join("images").exists(), "the old trace is gone whole");
        // A failed run (discard) leaves the old trace as it was.
        let d = OutDir::create(&out, true).unwrap();
        std::fs::write(d.data(), b"PERFILE2 half").unwrap();
        d.discard();
        assert_eq!(std::fs::read(out.join("data")).unwrap(), b"PERFILE2 new");
        let names: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no staging dir left: {names:?}");
        // A run that failed after recording: the old trace stays, the new
        // one is kept beside it.
        let d = OutDir::create(&out, true).unwrap();
        std::fs::write(d.data(), b"PERFILE2 partial").unwrap();
        let kept = d.keep_failed().unwrap();
        assert_ne!(kept, out);
        assert_eq!(std::fs::read(out.join("data")).unwrap(), b"PERFILE2 new");
        assert_eq!(
            std::fs::read(kept.join("data")).unwrap(),
            b"PERFILE2 partial"
        );
    }

    /// What appears at the output while a staged trace is written (a
    /// folder made by hand, an empty one, another run's trace) is never
    /// replaced without `--force`, nor with it when it is not a trace:
    /// the new trace stays under its staging name, which the error names.
    #[test]
    fn what_appears_at_the_output_meanwhile_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        for what in ["folder", "empty", "trace"] {
            let out = tmp.path().join(what);
            let d = OutDir::create_staged(&out, false).unwrap();
            std::fs::write(d.data(), b"PERFILE2 new").unwrap();
            match what {
                "folder" => {
                    std::fs::create_dir(&out).unwrap();
                    std::fs::write(out.join("notes.txt"), b"mine").unwrap();
                }
                "empty" => std::fs::create_dir(&out).unwrap(),
                _ => fake_trace(&out),
            }
            let staged = d.path().to_path_buf();
            let e = d.commit().unwrap_err();
            let Error::OutputAppeared { path, kept } = &e else {
                panic!("{what}: {e}");
            };
            assert_eq!((path, kept), (&out, &staged), "{what}");
            assert_eq!(std::fs::read(staged.join("data")).unwrap(), b"PERFILE2 new");
            match what {
                "folder" => assert_eq!(std::fs::read(out.join("notes.txt")).unwrap(), b"mine"),
                "empty" => assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0),
                _ => assert!(std::fs::read(out.join("data"))
                    .unwrap()
                    .starts_with(b"PERFILE2 and")),
            }
        }
        // With --force over a trace that another program replaced by a
        // folder of its own meanwhile: that folder stays.
        let out = tmp.path().join("forced");
        fake_trace(&out);
        let d = OutDir::create_staged(&out, true).unwrap();
        std::fs::remove_dir_all(&out).unwrap();
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("notes.txt"), b"mine").unwrap();
        let e = d.commit().unwrap_err();
        assert!(matches!(e, Error::OutputAppeared { .. }), "{e}");
        assert_eq!(std::fs::read(out.join("notes.txt")).unwrap(), b"mine");
    }

    #[test]
    fn force_refuses_what_is_not_a_trace() {
        let tmp = tempfile::tempdir().unwrap();
        let why = |p: &Path| match OutDir::create(p, true) {
            Err(Error::OutputRefused { why, .. }) => why,
            other => panic!("{}: {other:?}", p.display()),
        };
        // Anything besides trace entries, even next to a `data` file.
        let t = tmp.path().join("t");
        fake_trace(&t);
        std::fs::write(t.join("precious.txt"), b"x").unwrap();
        assert!(why(&t).contains("precious.txt"));
        assert!(t.join("precious.txt").exists());
        // A file of someone's inside ptsim's truth/ (issue 44); ptsim's own
        // files there are replaced.
        let v = tmp.path().join("v");
        fake_trace(&v);
        std::fs::create_dir(v.join("truth")).unwrap();
        for f in ["123.txt", "summary.txt", "injected.txt"] {
            std::fs::write(v.join("truth").join(f), b"x").unwrap();
        }
        std::fs::write(v.join("truth/analysis.md"), b"mine").unwrap();
        assert!(why(&v).contains("analysis.md"));
        assert!(v.join("truth/analysis.md").exists());
        std::fs::remove_file(v.join("truth/analysis.md")).unwrap();
        OutDir::create(&v, true).unwrap().commit().unwrap();
        // A `data` that is not perf.data.
        let u = tmp.path().join("u");
        std::fs::create_dir(&u).unwrap();
        std::fs::write(u.join("data"), b"my thesis").unwrap();
        assert!(why(&u).contains("PERFILE2"));
        // A file that is not perf.data.
        let f = tmp.path().join("notes");
        std::fs::write(&f, b"notes").unwrap();
        assert!(why(&f).contains("not a perf.data"));
        // The current directory, a parent of it, and / even when they look like traces.
        let cwd = std::env::current_dir().unwrap();
        assert!(why(Path::new(".")).contains("current directory"));
        assert!(why(Path::new("..")).contains("current directory"));
        assert!(why(Path::new("/")).contains("root"));
        assert!(why(&cwd).contains("current directory"));
        // An empty directory holds nothing to lose.
        let e = tmp.path().join("empty");
        std::fs::create_dir(&e).unwrap();
        OutDir::create(&e, true).unwrap().commit().unwrap();
    }

    #[test]
    fn force_refuses_home() {
        // $HOME is read at each call; a child process keeps this test's
        // environment change away from the other tests' threads.
        if std::env::var_os("PT_OUTDIR_HOME_CHILD").is_some() {
            let home = PathBuf::from(std::env::var_os("HOME").unwrap());
            match OutDir::create(&home, true) {
                Err(Error::OutputRefused { why, .. }) => assert!(why.contains("$HOME"), "{why}"),
                other => panic!("{other:?}"),
            }
            assert!(home.join("data").exists());
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        fake_trace(tmp.path());
        let st = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "outdir::tests::force_refuses_home",
                "--nocapture",
            ])
            .env("PT_OUTDIR_HOME_CHILD", "1")
            .env("HOME", tmp.path())
            .status()
            .unwrap();
        assert!(st.success());
    }

    #[test]
    fn a_staged_trace_appears_only_at_commit() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("t");
        let d = OutDir::create_staged(&out, false).unwrap();
        std::fs::write(d.data(), b"PERFILE2").unwrap();
        assert!(!out.exists(), "nothing under the name until the commit");
        d.commit().unwrap();
        assert_eq!(names(tmp.path()), ["t"]);
        assert!(out.join("data").exists());
    }

    /// A trace dir that cannot be made (here in /proc, where not even
    /// root makes folders; a read-only folder for a user other than root)
    /// is named as given, with its folder: the error named the hidden
    /// staging folder `.t.new-PID` instead.
    #[test]
    fn a_trace_dir_that_cannot_be_made_is_named_as_given() {
        let out = PathBuf::from(format!("/proc/ptrec-test-{}", std::process::id()));
        for staged in [false, true] {
            let e = if staged {
                OutDir::create_staged(&out, false)
            } else {
                OutDir::create(&out, false)
            }
            .err()
            .unwrap()
            .to_string();
            assert!(
                e.starts_with(&format!(
                    "writing {}: cannot make a folder in /proc (",
                    out.display()
                )) && e.ends_with("); give -o a place you may write in"),
                "{e}"
            );
            assert!(!e.contains(".new-"), "{e}");
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_name_of_255_bytes_is_replaced_too() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("t".repeat(255));
        OutDir::create(&out, false).unwrap().commit().unwrap();
        let d = OutDir::create_staged(&out, true).unwrap();
        std::fs::write(d.data(), b"PERFILE2").unwrap();
        d.commit().unwrap();
        assert!(out.join("data").exists());
    }

    #[test]
    fn files_and_folders_are_the_owners_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777;
        let d = tmp.path().join("t/truth/deeper");
        create_dir_all(&d).unwrap();
        assert_eq!(mode(&d), 0o700);
        assert_eq!(mode(&tmp.path().join("t/truth")), 0o700);
        let f = d.join("1.txt");
        create_file(&f).unwrap();
        assert_eq!(mode(&f), 0o600);
        // An existing file loses its wider bits.
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        create_file(&f).unwrap();
        assert_eq!(mode(&f), 0o600);
        // A symbolic link at the name is not followed.
        let target = tmp.path().join("elsewhere");
        std::fs::write(&target, b"keep").unwrap();
        std::os::unix::fs::symlink(&target, d.join("2.txt")).unwrap();
        assert!(create_file(&d.join("2.txt")).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    }

    #[test]
    fn leftovers_of_killed_runs_are_named_not_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("t");
        // A pid above pid_max: no process has it.
        let dead = tmp.path().join(".t.new-4999999");
        let old = tmp.path().join(".t.old-4999998");
        let live = tmp.path().join(format!(".t.new-{}", std::process::id()));
        let other = tmp.path().join(".tt.new-4999997");
        for d in [&dead, &old, &live, &other] {
            std::fs::create_dir(d).unwrap();
        }
        let w = leftovers(&out);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains(&*dead.to_string_lossy()) && w[0].contains("killed (pid 4999999"));
        assert!(
            w[0].contains("ptdec reads") && w[0].contains("rm -r"),
            "{}",
            w[0]
        );
        assert!(w[1].contains(&*old.to_string_lossy()) && w[1].contains("replacing"));
        assert!(dead.exists() && old.exists(), "never removed");
        let d = OutDir::create_staged(&out, false).unwrap();
        d.commit().unwrap();
        assert!(dead.exists(), "a later run leaves it too");
    }

    #[test]
    fn missing_parents_are_created_and_discarded() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("a/b/t");
        let d = OutDir::create(&out, false).unwrap();
        assert!(out.is_dir());
        d.discard();
        assert!(!tmp.path().join("a").exists());
    }
}
