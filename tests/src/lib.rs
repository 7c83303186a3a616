//! Helpers shared by the end-to-end tests: locating the workspace, the Python
//! venv with the `fxt` reader, `perf`, and the policy for missing tools.
//!
//! Policy: a test that needs a tool the set-up installs (perf, gcc, the fxt
//! venv) fails when `PT_REQUIRE_TOOLS=1` (set by `scripts/test`, so CI never
//! silently skips) and otherwise prints one line saying it was skipped and
//! why. Perfetto's trace_processor_shell is the user's own tool, never
//! installed here: its steps skip without it ([`trace_processor`]).
#![deny(unsafe_code)]

pub mod modules;

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

/// libipt's newest test suite as test vectors (`../shared/libipt-tests`,
/// see its README.md): `PT_LIBIPT_TESTS`, else beside the clone. Read at
/// run time, never copied into the repository.
pub fn libipt_tests_dir() -> PathBuf {
    std::env::var_os("PT_LIBIPT_TESTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/libipt-tests"))
}

/// The names of `dir`'s entries, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Copies the tree `from` (a trace dir, an LLDB bundle) to `to`: its
/// files, and its folders (also through links) as folders.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// One file of the real recordings (see `../shared/realdata/README.md`).
pub fn realdata(name: &str) -> PathBuf {
    realdata_dir().join(name)
}

/// [`realdata`] when the file is there; otherwise the missing-tool policy
/// (a skip line, or a panic under `PT_REQUIRE_TOOLS=1`).
pub fn realdata_file(test: &str, name: &str) -> Option<PathBuf> {
    let p = realdata(name);
    if p.is_file() {
        Some(p)
    } else {
        missing(
            test,
            &format!("{} is not there (../shared beside the clone)", p.display()),
        )
    }
}

/// Whether `tool --version` runs; a missing tool goes through the policy.
pub fn have_tool(test: &str, tool: &str) -> bool {
    let ok = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok || missing::<()>(test, &format!("{tool} is not installed")).is_some()
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
    skipped(
        test,
        &format!("{why}; run `bash scripts/setup` to install it"),
    );
    None
}

/// The Python interpreter of the test venv, with the `fxt` package importable.
/// `PT_PYTHON` overrides the default `<root>/.venv/bin/python`.
pub fn python_with_fxt(test: &str) -> Option<PathBuf> {
    python_with(test, &["fxt"])
}

/// The Python interpreter of the test venv (`PT_PYTHON`, by default
/// `<root>/.venv/bin/python`) when it imports every one of `modules`
/// (`duckdb`, `datafusion`: scripts/requirements-test.txt); a missing one
/// goes through the tool policy.
pub fn python_with(test: &str, modules: &[&str]) -> Option<PathBuf> {
    let py = std::env::var_os("PT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv/bin/python"));
    let ok = Command::new(&py)
        .args(["-c", &format!("import {}", modules.join(", "))])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Some(py)
    } else {
        missing(
            test,
            &format!("{} cannot import {}", py.display(), modules.join(", ")),
        )
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

/// Builds the fixture programs (`fixtures/programs/build.sh`) into `out`,
/// once per test process; `None` (and a skip line, or a panic under
/// `PT_REQUIRE_TOOLS=1`) when gcc is missing. build.sh rebuilds only what
/// changed, so test binaries sharing `out` cost nothing after the first.
pub fn fixture_programs(test: &str, out: &Path) -> Option<PathBuf> {
    static BUILT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let gcc = Command::new("gcc").arg("--version").output();
    if !gcc.is_ok_and(|o| o.status.success()) {
        return missing(test, "gcc is not installed (Debian package gcc)");
    }
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|p| p == out) {
        let script = workspace_root().join("fixtures/programs/build.sh");
        let status = Command::new("bash")
            .arg(&script)
            .arg(out)
            .status()
            .expect("run bash");
        assert!(
            status.success(),
            "{} {} failed",
            script.display(),
            out.display()
        );
        built.push(out.to_path_buf());
    }
    Some(out.to_path_buf())
}

/// Fills `home` as `perf record` would have filled `~/.debug` for the trace
/// dir `trace`: each `images/vdso-<build-id>.so` at `.debug/[vdso]/<id>/vdso`
/// with its `.debug/.build-id/xx/yyyy…` link, so that perf run with
/// `HOME=home` can decode vDSO code.
pub fn perf_home(trace: &Path, home: &Path) -> std::io::Result<()> {
    let Ok(images) = std::fs::read_dir(trace.join("images")) else {
        return Ok(());
    };
    for e in images.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(id) = name
            .strip_prefix("vdso-")
            .and_then(|n| n.strip_suffix(".so"))
            .filter(|id| id.len() > 2)
        else {
            continue;
        };
        let d = home.join(".debug/[vdso]").join(id);
        std::fs::create_dir_all(&d)?;
        std::fs::copy(e.path(), d.join("vdso"))?;
        let link_dir = home.join(".debug/.build-id").join(&id[..2]);
        std::fs::create_dir_all(&link_dir)?;
        let link = link_dir.join(&id[2..]);
        if !link.exists() {
            std::os::unix::fs::symlink(format!("../../[vdso]/{id}"), link)?;
        }
    }
    Ok(())
}

/// A call or a return as perf's `--itrace=cr` branch samples state it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Branch {
    pub call: bool,
    pub from: u64,
    pub to: u64,
}

impl std::fmt::Display for Branch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.call { "call" } else { "return" };
        write!(f, "{kind} {:x} -> {:x}", self.from, self.to)
    }
}

/// What `perf script --itrace=cr` found in a trace.
#[derive(Debug, Default)]
pub struct PerfBranches {
    /// Calls and returns per tid, in order.
    pub threads: std::collections::BTreeMap<u32, Vec<Branch>>,
    /// Every `instruction trace error` line.
    pub errors: Vec<String>,
}

/// Runs `perf script -i TRACE --itrace=cre -F tid,flags,ip,addr` with a
/// HOME whose build-id cache holds the trace's vDSO (see [`perf_home`]) and
/// keeps the `call` and `return` lines per thread; `tr strt`/`tr end`
/// (tracing stopped and resumed around syscalls and interrupts) are not
/// calls. Panics when perf fails.
pub fn perf_branches(perf: &Path, trace: &Path, home: &Path) -> PerfBranches {
    perf_home(trace, home).expect("build a perf HOME");
    let out = Command::new(perf)
        .args(["script", "--itrace=cre", "-F", "tid,flags,ip,addr", "-i"])
        .arg(trace)
        .env("HOME", home)
        .env("PAGER", "cat")
        .output()
        .expect("run perf");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "perf script failed on {}: {}",
        trace.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    let mut p = PerfBranches::default();
    for line in text.lines().map(str::trim) {
        if line.starts_with("instruction trace error") {
            p.errors.push(line.to_string());
            continue;
        }
        let Some((left, right)) = line.split_once("=>") else {
            continue;
        };
        let words: Vec<&str> = left.split_whitespace().collect();
        let (Some(tid), Some(from), Some(to)) = (
            words.first().and_then(|w| w.parse::<u32>().ok()),
            words.last().and_then(|w| hex(w)),
            right.split_whitespace().next().and_then(hex),
        ) else {
            continue;
        };
        let call = match words[1..words.len() - 1].join(" ").as_str() {
            "call" => true,
            "return" => false,
            _ => continue,
        };
        p.threads
            .entry(tid)
            .or_default()
            .push(Branch { call, from, to });
    }
    p
}

// ---- Perfetto's trace processor ---------------------------------------------

/// `trace_processor_shell`, Perfetto's own importer (the engine behind
/// ui.perfetto.dev), where `$PT_TRACE_PROCESSOR` names one. It is the
/// user's own tool (nothing here fetches or ships it), so a test step that
/// needs it is skipped without it, even under `PT_REQUIRE_TOOLS=1`, with a
/// [`skipped`] line. One that is named but does not run is a mistake the user
/// made: the test fails, naming it.
pub fn trace_processor(test: &str) -> Option<PathBuf> {
    let Some(tp) = std::env::var_os("PT_TRACE_PROCESSOR").map(PathBuf::from) else {
        skipped(
            test,
            "Perfetto check: PT_TRACE_PROCESSOR does not name a trace_processor_shell",
        );
        return None;
    };
    let ok = Command::new(&tp)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{test}: PT_TRACE_PROCESSOR={} does not run (`{0} --version` failed); \
         point it at a trace_processor_shell or unset it to skip the Perfetto checks",
        tp.display()
    );
    Some(tp)
}

/// Says that a test, or one step of it, was skipped: one line
/// `SKIPPED: <test>: <reason>` on the test process's own stderr, written
/// past libtest's output capture so that `scripts/test` sees and counts it.
/// Made first and written at once: stderr is unbuffered, and `writeln!`
/// wrote each piece apart, so another test's "test ... ok" line could
/// land inside it, and `scripts/test` then counted a line that was no
/// skip and lost the one that was (81 skips instead of 80 in one CI run).
pub fn skipped(test: &str, why: &str) {
    use std::io::Write;
    let line = format!("SKIPPED: {test}: {why}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// One row of Perfetto's `slice` table on a thread's track.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfettoSlice {
    pub id: u64,
    pub ts: i64,
    pub dur: i64,
    pub depth: u32,
    /// The enclosing slice's `id`.
    pub parent: Option<u64>,
    pub name: String,
    pub category: String,
}

/// A thread as Perfetto names it, with its process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfettoThread {
    pub tid: u64,
    pub name: Option<String>,
    pub pid: Option<u64>,
    pub process_name: Option<String>,
}

/// A `stats` row with severity `error` or `data_loss` and a value above 0:
/// something the importer dropped or could not place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfettoProblem {
    pub name: String,
    pub idx: Option<i64>,
    pub severity: String,
    pub value: i64,
}

/// What Perfetto shows for one trace file.
#[derive(Debug, Default)]
pub struct PerfettoView {
    /// Slices on thread tracks, per tid, in `(ts, depth)` order.
    pub slices: std::collections::BTreeMap<u64, Vec<PerfettoSlice>>,
    /// Every row of the `slice` table, thread tracks or not.
    pub slice_count: u64,
    /// Threads other than Perfetto's own placeholder (tid 0 without a name).
    pub threads: Vec<PerfettoThread>,
    pub problems: Vec<PerfettoProblem>,
}

/// Splits trace_processor_shell's CSV output into result sets (separated
/// by blank lines), each a header and rows; `"[NULL]"` is `None`.
pub fn parse_tp_csv(text: &str) -> Vec<Vec<Vec<Option<String>>>> {
    let mut sets = Vec::new();
    let mut rows: Vec<Vec<Option<String>>> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            if !rows.is_empty() {
                sets.push(std::mem::take(&mut rows));
            }
            continue;
        }
        let mut fields = Vec::new();
        let mut chars = line.chars().peekable();
        loop {
            let mut field = String::new();
            let quoted = chars.peek() == Some(&'"');
            if quoted {
                chars.next();
                while let Some(c) = chars.next() {
                    if c == '"' {
                        if chars.peek() == Some(&'"') {
                            chars.next();
                            field.push('"');
                        } else {
                            break;
                        }
                    } else {
                        field.push(c);
                    }
                }
            }
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                field.push(c);
                chars.next();
            }
            fields.push((!(quoted && field == "[NULL]")).then_some(field));
            if chars.next().is_none() {
                break;
            }
        }
        rows.push(fields);
    }
    if !rows.is_empty() {
        sets.push(rows);
    }
    sets
}

const PERFETTO_QUERIES: &str = "\
select name, idx, severity, value from stats where value > 0 and severity in ('error', 'data_loss');
select count(*) as n from slice;
select t.tid, t.name, p.pid, p.name as pname from thread t left join process p using (upid) order by t.tid;
select t.tid, s.id, s.ts, s.dur, s.depth, s.parent_id, s.name, s.category
  from slice s join thread_track tt on s.track_id = tt.id join thread t using (utid)
  order by t.tid, s.ts, s.depth;
";

/// Loads `file` into `trace_processor_shell` (`tp`, see [`trace_processor`])
/// and returns what Perfetto shows: slices per thread, threads and their
/// processes, and every error or data-loss `stats` row. Panics when the
/// shell cannot load the file.
pub fn perfetto_view(tp: &Path, file: &Path) -> PerfettoView {
    let out = Command::new(tp)
        .arg("-Q")
        .arg(PERFETTO_QUERIES)
        .arg(file)
        .output()
        .expect("run trace_processor_shell");
    assert!(
        out.status.success(),
        "trace_processor_shell cannot load {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let sets = parse_tp_csv(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        sets.len(),
        4,
        "trace_processor_shell on {}: expected 4 result sets: {}",
        file.display(),
        String::from_utf8_lossy(&out.stdout)
    );
    let num = |v: &Option<String>| -> Option<i64> { v.as_deref().and_then(|s| s.parse().ok()) };
    let mut view = PerfettoView::default();
    for r in &sets[0][1..] {
        view.problems.push(PerfettoProblem {
            name: r[0].clone().unwrap_or_default(),
            idx: num(&r[1]),
            severity: r[2].clone().unwrap_or_default(),
            value: num(&r[3]).unwrap_or(0),
        });
    }
    view.slice_count = num(&sets[1][1][0]).unwrap_or(0) as u64;
    for r in &sets[2][1..] {
        let tid = num(&r[0]).unwrap_or(0) as u64;
        if tid == 0 && r[1].is_none() {
            continue; // Perfetto's placeholder for "no thread"
        }
        view.threads.push(PerfettoThread {
            tid,
            name: r[1].clone(),
            pid: num(&r[2]).map(|p| p as u64),
            process_name: r[3].clone(),
        });
    }
    for r in &sets[3][1..] {
        let tid = num(&r[0]).unwrap_or(0) as u64;
        view.slices.entry(tid).or_default().push(PerfettoSlice {
            id: num(&r[1]).unwrap_or(0) as u64,
            ts: num(&r[2]).unwrap_or(0),
            dur: num(&r[3]).unwrap_or(0),
            depth: num(&r[4]).unwrap_or(0) as u32,
            parent: num(&r[5]).map(|p| p as u64),
            name: r[6].clone().unwrap_or_default(),
            category: r[7].clone().unwrap_or_default(),
        });
    }
    view
}

/// A slice as the writer placed it: for [`perfetto_agrees`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedSlice {
    pub tid: u64,
    pub category: String,
    pub name: String,
    pub ts: i64,
    pub end: i64,
    /// The nesting level the writer meant (ptdec's stack depth, relative to
    /// a segment's first frame, or a reader's nesting by intervals).
    pub depth: i32,
}

/// A thread as ptdec's summary names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedThread {
    pub pid: u64,
    pub tid: u64,
    pub name: String,
}

/// Loads `file` into Perfetto's trace processor and checks what it shows
/// against what was written: no `stats` row of severity error or
/// data_loss; `events` rows in the `slice` table (FTF slices and instants
/// alike); each of `threads` under its name and pid, its process named as
/// the thread whose tid is the pid; and per thread every slice of `slices`
/// once, with every `call` slice at the level the writer gave it: Perfetto
/// counts levels from each top-level slice, so a slice's Perfetto depth plus
/// its top-level ancestor's expected depth is its expected depth, and its
/// Perfetto parent is a slice one level up. Zero-width slices are only
/// counted: Perfetto closes a slice before a zero-width one at its very end
/// and stacks zero-width slices at one instant inside each other (its
/// `SliceTracker::MaybeCloseStack`), so it cannot show where they belong. Returns the view, or `None`
/// (after the tool policy) when trace_processor_shell is missing.
pub fn perfetto_agrees(
    test: &str,
    file: &Path,
    events: u64,
    threads: &[ExpectedThread],
    slices: &[ExpectedSlice],
) -> Option<PerfettoView> {
    let tp = trace_processor(test)?;
    let view = perfetto_view(&tp, file);
    let what = format!("{test}: {}", file.display());
    assert!(
        view.problems.is_empty(),
        "{what}: Perfetto reports import problems: {:?}",
        view.problems
    );
    assert_eq!(
        view.slice_count, events,
        "{what}: Perfetto shows {} slices of {events} events written",
        view.slice_count
    );
    for t in threads {
        let got = view.threads.iter().find(|p| p.tid == t.tid);
        let got = got.unwrap_or_else(|| panic!("{what}: Perfetto has no thread {}", t.tid));
        assert_eq!(
            got.name.as_deref(),
            Some(t.name.as_str()),
            "{what}: {got:?}"
        );
        assert_eq!(got.pid, Some(t.pid), "{what}: {got:?}");
        if let Some(main) = threads.iter().find(|m| m.tid == t.pid) {
            assert_eq!(
                got.process_name.as_deref(),
                Some(main.name.as_str()),
                "{what}: {got:?}"
            );
        }
    }
    type Key = (String, String, i64, i64);
    let mut want: std::collections::BTreeMap<u64, std::collections::BTreeMap<Key, Vec<i32>>> =
        Default::default();
    for s in slices {
        want.entry(s.tid)
            .or_default()
            .entry((s.category.clone(), s.name.clone(), s.ts, s.end - s.ts))
            .or_default()
            .push(s.depth);
    }
    for (tid, mut keys) in want {
        let empty = Vec::new();
        let got = view.slices.get(&tid).unwrap_or(&empty);
        let by_id: std::collections::HashMap<u64, &PerfettoSlice> =
            got.iter().map(|s| (s.id, s)).collect();
        // Pair each Perfetto slice with an expected one of the same key,
        // shallowest with shallowest.
        let mut grouped: std::collections::BTreeMap<Key, Vec<&PerfettoSlice>> = Default::default();
        for s in got
            .iter()
            .filter(|s| s.dur > 0 || keys.contains_key(&key_of(s)))
        {
            grouped.entry(key_of(s)).or_default().push(s);
        }
        let mut expected_depth: std::collections::HashMap<u64, i32> = Default::default();
        for (key, depths) in keys.iter_mut() {
            depths.sort_unstable();
            let mut ps = grouped.remove(key).unwrap_or_default();
            ps.sort_by_key(|s| s.depth);
            assert_eq!(
                ps.len(),
                depths.len(),
                "{what}: tid {tid}: {key:?} written {} times, Perfetto shows it {} times",
                depths.len(),
                ps.len()
            );
            for (p, d) in ps.iter().zip(depths.iter()) {
                expected_depth.insert(p.id, *d);
            }
        }
        let stray: Vec<_> = grouped.values().flatten().collect();
        assert!(
            stray.is_empty(),
            "{what}: tid {tid}: Perfetto shows slices never written: {stray:?}"
        );
        for s in got.iter().filter(|s| s.category == "call" && s.dur > 0) {
            let Some(&d) = expected_depth.get(&s.id) else {
                continue;
            };
            let mut root = s;
            while let Some(p) = root.parent.and_then(|p| by_id.get(&p)) {
                root = *p;
            }
            let Some(&offset) = expected_depth.get(&root.id) else {
                continue;
            };
            assert_eq!(
                s.depth as i32 + offset,
                d,
                "{what}: tid {tid}: {s:?} is at Perfetto depth {} under {root:?} (written at {offset}), the writer put it at {d}",
                s.depth
            );
            if let Some(parent) = s.parent.and_then(|p| by_id.get(&p)) {
                if let Some(&pd) = expected_depth.get(&parent.id) {
                    assert_eq!(pd, d - 1, "{what}: tid {tid}: {s:?} under {parent:?}");
                }
            }
        }
    }
    Some(view)
}

fn key_of(s: &PerfettoSlice) -> (String, String, i64, i64) {
    (s.category.clone(), s.name.clone(), s.ts, s.dur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tp_csv_result_sets() {
        let text = "\"a\",\"b\"\n1,\"x, \"\"y\"\"\"\n2,\"[NULL]\"\n\n\"n\"\n7\n";
        let sets = parse_tp_csv(text);
        assert_eq!(sets.len(), 2);
        assert_eq!(
            sets[0][1],
            [Some("1".to_string()), Some("x, \"y\"".to_string())]
        );
        assert_eq!(sets[0][2], [Some("2".to_string()), None]);
        assert_eq!(sets[1], [[Some("n".to_string())], [Some("7".to_string())]]);
    }
}
