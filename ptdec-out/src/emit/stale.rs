//! The files an earlier `--split` left: `out-0.ftf`, `out-1.ftf`, ... are
//! one set, and a run writes only the windows that hold events, so after
//! a run with fewer (or other) windows into the same `-o` the folder would
//! hold a mix of two runs. Once this run's files are in place,
//! [`remove_stale_windows`] removes the others of the same name that ptdec
//! wrote; a file of that name that is not ptdec's FTF is left alone and
//! named.

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::{window_parts, window_path, write_ftf_header};

/// What [`remove_stale_windows`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StaleWindows {
    /// Removed: ptdec's FTF files named as a window of the output that
    /// this run did not write, by window index.
    pub removed: Vec<PathBuf>,
    /// Left in place, with why: named as a window of the output but not
    /// an FTF file ptdec wrote (a user's file, a link, a FIFO), or its
    /// removal failed.
    pub kept: Vec<(PathBuf, String)>,
}

/// The window index `name` is the file of, when it is one of
/// `template`'s windows ([`window_path`]): `out-12.ftf` is window 12 of
/// `out.ftf`, `out-012.ftf` none.
fn window_index(template: &Path, name: &OsStr) -> Option<u64> {
    let (stem, ext) = window_parts(template);
    let digits = name
        .to_str()?
        .strip_prefix(stem.as_str())?
        .strip_prefix('-')?
        .strip_suffix(ext.as_str())?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let index = digits.parse().ok()?;
    (window_path(template, index).file_name() == Some(name)).then_some(index)
}

/// Whether `path` is a regular file (not followed through a link) that
/// starts with the header ptdec writes (once decompressed, for `.gz`).
fn is_ptdec_ftf(path: &Path) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let mut want = Vec::new();
    write_ftf_header(&mut want).map_err(|e| e.to_string())?;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut head = Vec::with_capacity(want.len());
    let limit = want.len() as u64;
    let read = if path.extension().is_some_and(|e| e == "gz") {
        flate2::read::GzDecoder::new(file)
            .take(limit)
            .read_to_end(&mut head)
    } else {
        file.take(limit).read_to_end(&mut head)
    };
    match read {
        Ok(_) if head == want => Ok(()),
        _ => Err("not an FTF file written by ptdec".into()),
    }
}

/// Removes the window files of `template` (`--split`'s `-o`) in its folder
/// whose index is not in `written`, when ptdec wrote them; lists the
/// others of such a name. Called once this run's windows are in place, so
/// a failed run leaves the earlier set whole.
pub fn remove_stale_windows(template: &Path, written: &[u64]) -> StaleWindows {
    let dir = crate::outfile::folder_of(template);
    let mut found: Vec<(u64, PathBuf)> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .flatten()
            .filter_map(|e| {
                let index = window_index(template, &e.file_name())?;
                (!written.contains(&index)).then(|| (index, window_path(template, index)))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    found.sort();
    let mut out = StaleWindows::default();
    for (_, path) in found {
        match is_ptdec_ftf(&path) {
            Err(why) => out.kept.push((path, why)),
            Ok(()) => match std::fs::remove_file(&path) {
                Ok(()) => out.removed.push(path),
                Err(e) => out.kept.push((path, format!("cannot remove it: {e}"))),
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_names_are_recognised_exactly() {
        let t = Path::new("dir/out.ftf.gz");
        let idx = |n: &str| window_index(t, OsStr::new(n));
        assert_eq!(idx("out-0.ftf.gz"), Some(0));
        assert_eq!(idx("out-4095.ftf.gz"), Some(4095));
        for not in [
            "out-.ftf.gz",
            "out-01.ftf.gz",
            "out-1.ftf",
            "out-1x.ftf.gz",
            "out.ftf.gz",
            "xout-1.ftf.gz",
            "out--1.ftf.gz",
            "out-99999999999999999999999.ftf.gz",
        ] {
            assert_eq!(idx(not), None, "{not}");
        }
        let t = Path::new("trace");
        assert_eq!(window_index(t, OsStr::new("trace-3")), Some(3));
        assert_eq!(window_index(t, OsStr::new("trace-3.ftf")), None);
    }

    #[test]
    fn only_ptdecs_own_stale_windows_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut header = Vec::new();
        write_ftf_header(&mut header).unwrap();
        for i in 0..6 {
            let mut bytes = header.clone();
            bytes.extend_from_slice(&[0; 16]);
            std::fs::write(d.join(format!("w-{i}.ftf")), bytes).unwrap();
        }
        // A user's file, a link to a ptdec FTF, and other names.
        std::fs::write(d.join("w-7.ftf"), b"my notes").unwrap();
        std::os::unix::fs::symlink(d.join("w-0.ftf"), d.join("w-8.ftf")).unwrap();
        std::fs::write(d.join("w-09.ftf"), &header).unwrap();
        std::fs::write(d.join("w.ftf"), &header).unwrap();
        std::fs::write(d.join("v-5.ftf"), &header).unwrap();
        let s = remove_stale_windows(&d.join("w.ftf"), &[0, 2]);
        assert_eq!(
            s.removed,
            [1, 3, 4, 5].map(|i| d.join(format!("w-{i}.ftf")))
        );
        let kept: Vec<&Path> = s.kept.iter().map(|k| k.0.as_path()).collect();
        assert_eq!(kept, [d.join("w-7.ftf"), d.join("w-8.ftf")]);
        assert!(s.kept[0].1.contains("not an FTF"), "{:?}", s.kept);
        assert!(s.kept[1].1.contains("not a regular file"), "{:?}", s.kept);
        let mut left: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            ["v-5.ftf", "w-0.ftf", "w-09.ftf", "w-2.ftf", "w-7.ftf", "w-8.ftf", "w.ftf"]
        );
    }

    #[test]
    fn a_gzip_window_is_recognised_by_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        write_ftf_header(&mut gz).unwrap();
        std::fs::write(dir.path().join("w-3.ftf.gz"), gz.finish().unwrap()).unwrap();
        std::fs::write(dir.path().join("w-4.ftf.gz"), b"not gzip").unwrap();
        let s = remove_stale_windows(&dir.path().join("w.ftf.gz"), &[]);
        assert_eq!(s.removed, [dir.path().join("w-3.ftf.gz")]);
        assert_eq!(s.kept.len(), 1, "{:?}", s.kept);
    }
}
