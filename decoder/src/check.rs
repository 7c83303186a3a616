//! `ptdec check`: loads an FTF file into Perfetto's own importer
//! (`trace_processor_shell`, the engine behind ui.perfetto.dev) and reports
//! what it could not place: every `stats` row of severity `error` or
//! `data_loss` (slices dropped for nesting deeper than Perfetto keeps,
//! overlapping slices, unreadable records, ...), with the number of slices
//! and threads it shows. The last step of the data flow, after `emit`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Instant;

/// Why a check could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// No trace_processor_shell where it was looked for.
    #[error("trace_processor_shell not found (tried {tried}); give --trace-processor PATH or set PT_TRACE_PROCESSOR (download: curl -LO https://get.perfetto.dev/trace_processor)")]
    NotFound { tried: String },
    /// It could not be started.
    #[error("cannot run {path}: {source}")]
    Run {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// It ran but could not load the file.
    #[error("Perfetto cannot load {file}: {message}")]
    Load { file: PathBuf, message: String },
    /// It did not finish in the time allowed, and was killed.
    #[error("{path} did not finish loading {file} in {seconds} s and was stopped; give --check-timeout SECS to wait longer")]
    Timeout {
        path: PathBuf,
        file: PathBuf,
        seconds: u64,
    },
    /// Its output was not the result sets asked for.
    #[error("unexpected output from {path}: {output}")]
    Output { path: PathBuf, output: String },
}

/// A `stats` row with severity `error` or `data_loss`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub name: String,
    pub severity: String,
    pub value: i64,
    pub description: String,
}

/// What Perfetto made of a file.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    /// Rows of the `slice` table (FTF duration events and instants).
    pub slices: u64,
    /// Threads with a tid (Perfetto adds a placeholder with tid 0).
    pub threads: u64,
    pub problems: Vec<Problem>,
    /// Seconds trace_processor_shell took to load and answer.
    pub seconds: f64,
}

impl CheckReport {
    /// Whether Perfetto reported an import error or data loss.
    pub fn failed(&self) -> bool {
        !self.problems.is_empty()
    }
}

/// `explicit`, else `$PT_TRACE_PROCESSOR`, else `trace_processor_shell` on
/// the `PATH`.
pub fn find_trace_processor(explicit: Option<&Path>) -> Result<PathBuf, CheckError> {
    let env = std::env::var_os("PT_TRACE_PROCESSOR").map(PathBuf::from);
    let (candidates, tried): (Vec<PathBuf>, String) = match (explicit, env) {
        (Some(p), _) => (vec![p.to_path_buf()], p.display().to_string()),
        (None, Some(p)) => {
            let tried = format!("$PT_TRACE_PROCESSOR {}", p.display());
            (vec![p], tried)
        }
        (None, None) => (
            std::env::var_os("PATH")
                .map(|p| {
                    std::env::split_paths(&p)
                        .map(|d| d.join("trace_processor_shell"))
                        .collect()
                })
                .unwrap_or_default(),
            "trace_processor_shell on the PATH".into(),
        ),
    };
    match candidates.into_iter().find(|c| c.is_file()) {
        Some(c) => Ok(c),
        None => Err(CheckError::NotFound { tried }),
    }
}

/// How long a check may take by default: 600 s, and 1 s per MB of the
/// file (trace_processor_shell loads FTF at tens of MB/s).
pub fn default_timeout(file: &Path) -> u64 {
    let mb = std::fs::metadata(file).map_or(0, |m| m.len() >> 20);
    600 + mb
}

/// How much of trace_processor_shell's stdout and stderr is kept: its
/// answers to [`QUERIES`] are a few lines.
const OUTPUT_MAX: u64 = 16 << 20;

/// The process group of the trace_processor_shell running, if one is
/// (0: none), for [`stop_running`].
static RUNNING_GROUP: AtomicI32 = AtomicI32::new(0);

/// Kills the process group of the trace_processor_shell running, if one
/// is: ptdec is ending on a signal, and the group, of its own, would not
/// get a Ctrl-C from the terminal.
pub fn stop_running() {
    kill_group(RUNNING_GROUP.swap(0, Ordering::SeqCst));
}

/// SIGKILL to process group `pgid` (0: none).
fn kill_group(pgid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pgid) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// Runs `cmd` with its stdout and stderr collected, killing it after
/// `seconds`: `None` then. Its output is read on two threads, so a child
/// that fills one pipe while we wait cannot hang both. It runs in a
/// process group of its own, killed whole: killing the child alone left
/// what it had started running (a `sleep` of a wrapper script, for ever).
fn run_for(cmd: &mut Command, seconds: u64) -> std::io::Result<Option<std::process::Output>> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    use std::time::Duration;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()?;
    // Its pid is its group's id; neither is reused before it is waited for.
    let pgid = i32::try_from(child.id()).unwrap_or(0);
    RUNNING_GROUP.store(pgid, Ordering::SeqCst);
    fn collect<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            // At most OUTPUT_MAX kept, the rest read and dropped (a tool
            // that prints without end was held whole: 5 GB in 17 s).
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = (&mut p).take(OUTPUT_MAX).read_to_end(&mut buf);
                let _ = std::io::copy(&mut p, &mut std::io::sink());
            }
            buf
        })
    }
    let out = collect(child.stdout.take());
    let err = collect(child.stderr.take());
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(e) => {
                RUNNING_GROUP.store(0, Ordering::SeqCst);
                kill_group(pgid);
                let _ = child.wait();
                return Err(e);
            }
        }
        if Instant::now() >= deadline {
            // The group before the child is waited for: until then no
            // other group can have its id.
            RUNNING_GROUP.store(0, Ordering::SeqCst);
            kill_group(pgid);
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    RUNNING_GROUP.store(0, Ordering::SeqCst);
    // A grandchild that left the group (setsid) and holds the pipes open
    // would keep the readers waiting: after a kill they are left to finish
    // on their own.
    let Some(status) = status else {
        return Ok(None);
    };
    Ok(Some(std::process::Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }))
}

const QUERIES: &str = "\
select name, severity, value, description from stats where value > 0 and severity in ('error', 'data_loss') order by name;
select count(*) from slice;
select count(*) from thread where tid != 0 or name is not null;
";

/// Loads `file` (FTF, plain or gzip) into trace_processor_shell `tp`,
/// waiting at most `timeout` seconds (default [`default_timeout`]).
pub fn check(tp: &Path, file: &Path, timeout: Option<u64>) -> Result<CheckReport, CheckError> {
    let t0 = Instant::now();
    let limit = timeout.unwrap_or_else(|| default_timeout(file));
    let out = run_for(Command::new(tp).arg("-Q").arg(QUERIES).arg(file), limit)
        .map_err(|source| CheckError::Run {
            path: tp.to_path_buf(),
            source,
        })?
        .ok_or_else(|| CheckError::Timeout {
            path: tp.to_path_buf(),
            file: file.to_path_buf(),
            seconds: limit,
        })?;
    let seconds = t0.elapsed().as_secs_f64();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        // Its last line says why; the rest is progress.
        let message = err
            .split(['\n', '\r'])
            .rfind(|l| !l.trim().is_empty())
            .map(|l| l.rsplit("Loading trace: ").next().unwrap_or(l))
            .unwrap_or("it failed without a message")
            .trim()
            .to_string();
        return Err(CheckError::Load {
            file: file.to_path_buf(),
            message,
        });
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let bad = || CheckError::Output {
        path: tp.to_path_buf(),
        output: text.chars().take(500).collect(),
    };
    let sets = result_sets(&text);
    let [problems, slices, threads] = &sets[..] else {
        return Err(bad());
    };
    let count = |set: &Vec<Vec<String>>| -> Option<u64> { set.get(1)?.first()?.parse().ok() };
    let mut report = CheckReport {
        slices: count(slices).ok_or_else(bad)?,
        threads: count(threads).ok_or_else(bad)?,
        problems: Vec::new(),
        seconds,
    };
    for row in problems.iter().skip(1) {
        let [name, severity, value, description] = &row[..] else {
            return Err(bad());
        };
        report.problems.push(Problem {
            name: name.clone(),
            severity: severity.clone(),
            value: value.parse().map_err(|_| bad())?,
            description: description.clone(),
        });
    }
    Ok(report)
}

/// trace_processor_shell's CSV: result sets separated by blank lines, a
/// header row first, fields quoted with `"` doubled inside.
fn result_sets(text: &str) -> Vec<Vec<Vec<String>>> {
    let mut sets = Vec::new();
    let mut rows = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            if !rows.is_empty() {
                sets.push(std::mem::take(&mut rows));
            }
            continue;
        }
        let mut fields = Vec::new();
        let mut field = String::new();
        let (mut quoted, mut chars) = (false, line.chars().peekable());
        while let Some(c) = chars.next() {
            match c {
                '"' if quoted && chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = !quoted,
                ',' if !quoted => fields.push(std::mem::take(&mut field)),
                c => field.push(c),
            }
        }
        fields.push(field);
        rows.push(fields);
    }
    if !rows.is_empty() {
        sets.push(rows);
    }
    sets
}

/// The report as the user reads it; `written`: events ptdec wrote into
/// the file, when it just wrote it.
pub fn render(file: &Path, r: &CheckReport, written: Option<u64>) -> String {
    let mut o = format!(
        "ptdec check: {}: Perfetto shows {} slices on {} thread{} (loaded in {:.2} s)",
        file.display(),
        r.slices,
        r.threads,
        if r.threads == 1 { "" } else { "s" },
        r.seconds
    );
    if let Some(w) = written {
        o += &format!(", of {w} written");
    }
    o.push('\n');
    if r.problems.is_empty() {
        o += "  no import errors or data loss\n";
    }
    for p in &r.problems {
        o += &format!(
            "  {} {}: {} ({})\n",
            p.severity, p.name, p.value, p.description
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_result_sets() {
        let text = "\"name\",\"value\"\n\"a, \"\"b\"\"\",3\n\n\"count(*)\"\n12\n";
        let sets = result_sets(text);
        assert_eq!(sets.len(), 2);
        assert_eq!(sets[0][1], ["a, \"b\"", "3"]);
        assert_eq!(sets[1][1], ["12"]);
    }

    #[test]
    fn missing_tool_is_named() {
        let e = find_trace_processor(Some(Path::new("/nonexistent/tp"))).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("/nonexistent/tp") && msg.contains("--trace-processor"),
            "{msg}"
        );
    }
}
