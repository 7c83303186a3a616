//! What can go wrong before and while ptrec records, each message naming the
//! cause and what the user can do about it. Setup code (PMU discovery, config
//! terms, opening events, the output dir, captures) returns [`Error`]; the
//! binary prints it and exits non-zero.

use std::io;
use std::path::PathBuf;

/// The default sysfs root, as the kernel mounts it.
pub const SYSFS: &str = "/sys";

/// A recording that could not be set up or finished.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The `intel_pt` PMU is absent from sysfs.
    #[error(
        "no intel_pt PMU: {} does not exist.\n\
         Intel PT needs an Intel CPU (Broadwell or later) running Linux on bare metal; \
         virtual machines usually lack it (KVM passes it through only with `-cpu host,+intel-pt` \
         and the host's pt_mode=1).\n\
         To try the pipeline on this machine, synthesize a real trace instead: \
         `ptsim -o trace.dir -- PROG ARGS`, then `ptdec trace.dir -o out.ftf`.",
        path.display()
    )]
    NoIntelPt { path: PathBuf },
    /// A sysfs file of the PMU could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Sysfs {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A sysfs file had contents that are not what the kernel writes there.
    #[error("{}: unexpected contents {text:?} ({expected})", path.display())]
    SysfsFormat {
        path: PathBuf,
        text: String,
        expected: &'static str,
    },
    /// `-e` named a term this PMU does not have.
    #[error("unknown intel_pt config term {term:?}. This PMU's terms are: {known}")]
    UnknownTerm { term: String, known: String },
    /// `-e` had a term that cannot be parsed, or a value too wide for its field.
    #[error("bad intel_pt config term {term:?}: {why}")]
    BadTerm { term: String, why: String },
    /// A period or threshold value this CPU does not support.
    #[error(
        "invalid {term}={value} for intel_pt on this CPU. Valid values are: {valid} \
         (from {cap_file})"
    )]
    InvalidValue {
        term: String,
        value: u64,
        valid: String,
        cap_file: String,
    },
    /// A feature term this CPU's Intel PT lacks.
    #[error(
        "this CPU's intel_pt does not support `{term}` ({cap_file} is 0); \
         remove `{term}` from -e"
    )]
    Unsupported { term: String, cap_file: String },
    /// Two terms that cannot go together.
    #[error("intel_pt config: {0}")]
    Conflict(String),
    /// perf_event_open refused for lack of privilege.
    #[error(
        "{what}: permission denied ({source}).\n\
         /proc/sys/kernel/perf_event_paranoid is {paranoid}; {advice}\n\
         Run ptrec as root (`sudo ptrec ...`), or give it CAP_PERFMON \
         (`sudo setcap cap_perfmon,cap_sys_ptrace+ep $(which ptrec)`), \
         or lower the setting: `sudo sysctl kernel.perf_event_paranoid=1` \
         (-1 allows everything to every user)."
    )]
    Permission {
        what: String,
        paranoid: String,
        advice: &'static str,
        #[source]
        source: io::Error,
    },
    /// mmap of a ring refused: over the locked-memory limit.
    #[error(
        "cannot map the {which} ring of {pages} pages ({source}): over the locked-memory limit.\n\
         Unprivileged users may lock perf_event_mlock_kb ({mlock_kb} KiB) per CPU plus their \
         RLIMIT_MEMLOCK ({rlimit}).\n\
         Use smaller rings (-m DATA_PAGES,AUX_PAGES, e.g. -m 64,32), raise \
         /proc/sys/kernel/perf_event_mlock_kb, or run as root."
    )]
    Mlock {
        which: &'static str,
        pages: usize,
        mlock_kb: String,
        rlimit: String,
        #[source]
        source: io::Error,
    },
    /// The pid to attach to does not exist.
    #[error("no such process: pid {pid} (check `ps -p {pid}`; it may have exited)")]
    NoSuchPid { pid: i32 },
    /// Opening or setting up an event failed for another reason.
    #[error("{what}: {source}")]
    Open {
        what: String,
        #[source]
        source: io::Error,
    },
    /// Bad command-line values the parser could not catch.
    #[error("{0}")]
    Usage(String),
    /// The output directory exists and `--force` was not given.
    #[error(
        "output {} already exists; choose another -o, or pass --force to replace it",
        path.display()
    )]
    OutputExists { path: PathBuf },
    /// The output path, or its last component, is a symbolic link.
    #[error(
        "output {} is a symbolic link; a trace dir is never written through a link \
         (a link could point anywhere, e.g. under sudo). Give the real path",
        path.display()
    )]
    OutputSymlink { path: PathBuf },
    /// Something appeared at the output path while the trace was written
    /// there under a staging name (another run, or a folder made by
    /// hand): it is left alone, and so is the new trace.
    #[error(
        "output {} appeared while the trace was being written (another run or program made it); \
         it is left as it is, and the new trace is in {}: move it where you want it, or run \
         again with another -o",
        path.display(),
        kept.display()
    )]
    OutputAppeared { path: PathBuf, kept: PathBuf },
    /// `--force` was asked to replace something that is not a trace dir, or
    /// a directory that must never be replaced.
    #[error("--force: not replacing {}: {why}", path.display())]
    OutputRefused { path: PathBuf, why: String },
    /// The recording failed after it started; what was recorded is kept.
    #[error(
        "{error}; what was recorded until then is in {}{}",
        kept.display(),
        replaced.as_ref().map_or(String::new(), |p| format!(
            " (the trace {} it was to replace is unchanged)",
            p.display()
        ))
    )]
    Partial {
        error: Box<Error>,
        kept: PathBuf,
        replaced: Option<PathBuf>,
    },
    /// Creating or writing the output failed.
    #[error("writing {}: {source}", path.display())]
    Output {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A capture (vDSO, binaries, kcore) failed.
    #[error("capturing {what}: {source}")]
    Capture {
        what: String,
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// An error from `perf_event_open`/`mmap`, turned into the specific
    /// variant its errno calls for.
    pub fn from_open(what: impl Into<String>, pid: Option<i32>, source: io::Error) -> Error {
        let what = what.into();
        match source.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => Error::permission(what, source),
            Some(libc::ESRCH) => match pid {
                Some(pid) => Error::NoSuchPid { pid },
                None => Error::Open { what, source },
            },
            _ => Error::Open { what, source },
        }
    }

    /// A permission error with the current perf_event_paranoid value.
    pub fn permission(what: String, source: io::Error) -> Error {
        let value = read_trimmed("/proc/sys/kernel/perf_event_paranoid");
        let advice = match value.parse::<i32>() {
            Ok(v) if v >= 2 => {
                "at 2 and above unprivileged users may not trace the kernel (-k) \
                 nor whole CPUs (-a), and distributions' values above 2 forbid perf events \
                 to them entirely."
            }
            Ok(1) => "at 1 unprivileged users may not trace whole CPUs (-a).",
            Ok(_) => "tracing another user's process also needs CAP_SYS_PTRACE or root.",
            Err(_) => "it could not be read.",
        };
        Error::Permission {
            what,
            paranoid: value,
            advice,
            source,
        }
    }

    /// An mmap refused with EPERM: the locked-memory limit.
    pub fn mlock(which: &'static str, pages: usize, source: io::Error) -> Error {
        let rlimit = read_trimmed("/proc/self/limits")
            .lines()
            .find(|l| l.starts_with("Max locked memory"))
            .map(|l| {
                l.split_whitespace()
                    .skip(3)
                    .take(1)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .map(|soft| {
                if soft == "unlimited" {
                    soft
                } else {
                    format!("{soft} bytes")
                }
            })
            .unwrap_or_else(|| "unknown".to_string());
        Error::Mlock {
            which,
            pages,
            mlock_kb: read_trimmed("/proc/sys/kernel/perf_event_mlock_kb"),
            rlimit,
            source,
        }
    }
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|e| format!("unreadable ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_picks_the_variant() {
        let e = Error::from_open("x", Some(7), io::Error::from_raw_os_error(libc::ESRCH));
        assert!(matches!(e, Error::NoSuchPid { pid: 7 }), "{e}");
        let e = Error::from_open("x", None, io::Error::from_raw_os_error(libc::EACCES));
        let msg = e.to_string();
        assert!(msg.contains("perf_event_paranoid is"), "{msg}");
        assert!(msg.contains("CAP_PERFMON"), "{msg}");
        let e = Error::mlock("AUX", 1024, io::Error::from_raw_os_error(libc::EPERM));
        let msg = e.to_string();
        assert!(
            msg.contains("perf_event_mlock_kb") && msg.contains("-m"),
            "{msg}"
        );
    }

    #[test]
    fn no_pmu_points_to_ptsim() {
        let msg = Error::NoIntelPt {
            path: "/sys/bus/event_source/devices/intel_pt".into(),
        }
        .to_string();
        assert!(
            msg.contains("ptsim") && msg.contains("virtual machines"),
            "{msg}"
        );
    }
}
