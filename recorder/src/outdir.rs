//! The trace directory (`DIR/data`, `DIR/images/`, `DIR/sysroot/`,
//! `DIR/kcore_dir/`): created without following symbolic links, never
//! replacing an existing path unless asked (`--force`), and, when ptrec runs
//! under sudo, handed to the invoking user at the end so they can read and
//! delete their own trace.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::errors::Error;

/// A freshly created output directory.
#[derive(Debug)]
pub struct OutDir {
    path: PathBuf,
}

fn output_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Output {
        path: path.to_path_buf(),
        source,
    }
}

impl OutDir {
    /// Creates `path` (mode 0755). An existing path is an error unless
    /// `force`, then it is removed first (a directory only when it looks like
    /// a trace: it holds `data`, or nothing). A symbolic link as the last
    /// component is always refused, even with `force`.
    pub fn create(path: &Path, force: bool) -> Result<OutDir, Error> {
        match std::fs::symlink_metadata(path) {
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
            Ok(m) if m.is_dir() => {
                let empty = std::fs::read_dir(path)
                    .map_err(output_err(path))?
                    .next()
                    .is_none();
                if !empty && !path.join("data").exists() {
                    return Err(Error::Usage(format!(
                        "--force: {} is a directory that does not look like a trace \
                         (no `data` file in it); not removing it",
                        path.display()
                    )));
                }
                // remove_dir_all does not follow symbolic links inside.
                std::fs::remove_dir_all(path).map_err(output_err(path))?;
            }
            Ok(_) => std::fs::remove_file(path).map_err(output_err(path))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(output_err(path)(e)),
        }
        // mkdir(2) never follows a symbolic link in the last component: a
        // link planted since the check above makes it fail with EEXIST.
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => Error::OutputExists {
                    path: path.to_path_buf(),
                },
                _ => output_err(path)(e),
            })?;
        Ok(OutDir {
            path: path.to_path_buf(),
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `DIR/data`, the perf.data file.
    pub fn data(&self) -> PathBuf {
        self.path.join("data")
    }

    /// Creates (if needed) and returns the subdirectory `name`.
    pub fn subdir(&self, name: &str) -> Result<PathBuf, Error> {
        let p = self.path.join(name);
        match std::fs::DirBuilder::new().mode(0o755).create(&p) {
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

    /// Under sudo (`SUDO_UID`/`SUDO_GID` set and running as root), gives the
    /// whole tree to the invoking user. Links are changed, never followed.
    pub fn chown_to_sudo_user(&self) -> Result<(), Error> {
        let Some((uid, gid)) = sudo_ids() else {
            return Ok(());
        };
        if !running_as_root() {
            return Ok(());
        }
        chown_tree(&self.path, uid, gid)
    }
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

    #[test]
    fn never_overwrites_or_follows() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("t");
        let d = OutDir::create(&out, false).unwrap();
        std::fs::write(d.data(), b"x").unwrap();
        assert!(matches!(
            OutDir::create(&out, false),
            Err(Error::OutputExists { .. })
        ));
        // --force replaces a trace dir...
        OutDir::create(&out, true).unwrap();
        assert!(!out.join("data").exists());
        // ...but not a directory that is not a trace.
        std::fs::write(out.join("precious"), b"x").unwrap();
        assert!(matches!(OutDir::create(&out, true), Err(Error::Usage(_))));
        assert!(out.join("precious").exists());
        // A symbolic link is refused even with --force, and its target untouched.
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&out, &link).unwrap();
        for force in [false, true] {
            let e = OutDir::create(&link, force).unwrap_err();
            assert!(matches!(e, Error::OutputSymlink { .. }), "{e}");
        }
        assert!(out.join("precious").exists());
        // A subdir that is a link is refused.
        let d = OutDir::create(&tmp.path().join("u"), false).unwrap();
        std::os::unix::fs::symlink(tmp.path(), d.path().join("images")).unwrap();
        assert!(d.subdir("images").is_err());
        assert!(d.subdir("sysroot").unwrap().is_dir());
    }
}
