//! `scripts/fetch-libipt`, which brings libipt into the build from Debian's
//! source package: a tarball whose sha256 differs from Debian's (one byte
//! changed, or cut short as by an interrupted download) is refused with the
//! expected and the actual hash, and nothing is unpacked where the build
//! looks; the intact tarball unpacks to a libipt tree. Runs on the tarball
//! `scripts/setup` fetched and kept in `.cache/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const TARBALL: &str = "intel-processor-trace_2.1.2.orig.tar.gz";
const SHA256: &str = "713d3e76b6c3073b122a9f5b6c025bc301a0436582f132caf782814363acf60f";

fn fetched(test: &str) -> Option<PathBuf> {
    let p = pt_tests::workspace_root().join(".cache").join(TARBALL);
    if p.is_file() {
        Some(p)
    } else {
        pt_tests::missing(test, &format!("{} is not there", p.display()))
    }
}

fn fetch(tarball: &Path, dest: &Path) -> Output {
    Command::new("bash")
        .arg(pt_tests::workspace_root().join("scripts/fetch-libipt"))
        .arg("--tarball")
        .arg(tarball)
        .arg("--dest")
        .arg(dest)
        .env_remove("LIBIPT_SRC")
        .output()
        .unwrap()
}

/// Nothing but what the test put there: no tree, no temporary folder.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_changed_or_cut_tarball_is_refused_and_nothing_unpacked() {
    let test = "a_changed_or_cut_tarball_is_refused_and_nothing_unpacked";
    let Some(good) = fetched(test) else {
        return;
    };
    let bytes = std::fs::read(&good).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut changed = bytes.clone();
    changed[1000] ^= 1;
    let cases = [
        ("changed.tar.gz", changed),
        ("cut.tar.gz", bytes[..bytes.len() / 2].to_vec()),
    ];
    for (name, content) in cases {
        let input = tmp.path().join(name);
        std::fs::write(&input, content).unwrap();
        let dest = tmp.path().join("tree");
        let out = fetch(&input, &dest);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        let actual = sha256sum(&input);
        assert!(
            err.contains(SHA256) && err.contains(&actual) && err.contains(name),
            "{name}: the message names the file, the expected and the actual hash: {err}"
        );
        assert!(err.contains("nothing unpacked"), "{err}");
        let left = entries(tmp.path());
        assert!(
            left.iter().all(|e| e.ends_with(".tar.gz")),
            "{name}: nothing unpacked, no temporary folder left: {left:?}"
        );
    }

    let dest = tmp.path().join("tree");
    let out = fetch(&good, &dest);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dest.join("libipt/include/intel-pt.h.in").is_file());
    assert!(dest.join("test/src").is_dir());
    assert!(
        !entries(tmp.path()).iter().any(|e| e.starts_with(".fetch")),
        "{:?}",
        entries(tmp.path())
    );
}

/// The file's sha256, as `sha256sum` prints it.
fn sha256sum(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace().next().unwrap().to_string()
}
