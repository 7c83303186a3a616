//! Helpers shared by the end-to-end tests: locating the workspace, the Python
//! venv with the `fxt` reader, `perf`, and the policy for missing tools.
//!
//! Policy: a test that needs an external tool (perf, the fxt venv) fails when
//! `PT_REQUIRE_TOOLS=1` (set by `scripts/test`, so CI never silently skips) and
//! otherwise prints one line saying it was skipped and why.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root (the folder holding the top-level Cargo.toml).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits inside the workspace")
        .to_path_buf()
}

/// `../shared/realdata` beside the workspace, where the real recordings live
/// (`PT_REALDATA` overrides it).
pub fn realdata_dir() -> PathBuf {
    std::env::var_os("PT_REALDATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/realdata"))
}

/// One file of the real recordings (see `../shared/realdata/README.md`).
pub fn realdata(name: &str) -> PathBuf {
    realdata_dir().join(name)
}

fn tools_required() -> bool {
    std::env::var("PT_REQUIRE_TOOLS").is_ok_and(|v| v == "1")
}

/// Reports a missing tool: panics under `PT_REQUIRE_TOOLS=1`, else prints a skip line.
/// Returns `None` so callers can `let Some(x) = missing(...) else { return };`.
pub fn missing<T>(test: &str, why: &str) -> Option<T> {
    if tools_required() {
        panic!("{test}: {why} (PT_REQUIRE_TOOLS=1; run `bash scripts/setup` to install it)");
    }
    eprintln!("SKIPPED {test}: {why}; run `bash scripts/setup` to install it");
    None
}

/// The Python interpreter of the test venv, with the `fxt` package importable.
/// `PT_PYTHON` overrides the default `<root>/.venv/bin/python`.
pub fn python_with_fxt(test: &str) -> Option<PathBuf> {
    let py = std::env::var_os("PT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv/bin/python"));
    let ok = Command::new(&py)
        .args(["-c", "import fxt"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Some(py)
    } else {
        missing(test, &format!("{} cannot import fxt", py.display()))
    }
}

/// The `perf` binary, when it runs.
pub fn perf(test: &str) -> Option<PathBuf> {
    let perf = std::env::var_os("PT_PERF")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("perf"));
    let ok = Command::new(&perf)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Some(perf)
    } else {
        missing(test, "perf is not installed (Debian package linux-perf)")
    }
}
