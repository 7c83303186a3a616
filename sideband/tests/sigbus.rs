//! Issue 44: a mapped input truncated by another process while it is read
//! ends the reader with a message naming it and status 1, not a bare
//! SIGBUS (exit 135). The test runs itself as the child that faults.

use std::process::Command;

use sideband::bytes::{name_files_on_sigbus, FileBytes};

const CHILD: &str = "SIDEBAND_SIGBUS_CHILD";

#[test]
fn a_file_truncated_while_mapped_is_named() {
    if let Some(path) = std::env::var_os(CHILD) {
        // The child: map, truncate, touch the lost pages.
        name_files_on_sigbus("reader").unwrap();
        let b = FileBytes::open(std::path::Path::new(&path)).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(0)
            .unwrap();
        let sum: u64 = b.iter().map(|&x| u64::from(x)).sum();
        println!("read {sum} without a fault");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.data");
    std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_file_truncated_while_mapped_is_named",
            "--nocapture",
        ])
        .env(CHILD, &path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("reader: {} was truncated", path.display()))
            && err.contains("SIGBUS"),
        "{err}"
    );
}
