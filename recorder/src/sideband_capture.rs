//! The sideband event: a dummy software event that carries no samples but
//! makes the kernel write MMAP2, COMM (with exec), FORK/EXIT and, optionally,
//! SWITCH records for the traced task into a DATA ring. `ptrec` opens it beside
//! every intel_pt event; `ptsim` opens the very same event on its child, so the
//! sideband of a synthetic trace comes from the kernel for real.
//!
//! For a task target the event is opened once per online CPU with `inherit`
//! (as `perf record -p` does): the kernel refuses to mmap an inherited
//! per-task (cpu == -1) event, and per-cpu rings follow every thread the task
//! creates later.

use std::io;
use std::os::fd::OwnedFd;

use perf_event_open_sys::bindings as b;
use sideband::attr::{Attr, AttrSet};
use sideband::endian::Le;

use crate::ring::{Ring, RingError};
use crate::sys::{self, perf_event_attr, Ioctl, Mapping};

/// What the sideband event asks the kernel for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SidebandOptions {
    /// PERF_RECORD_SWITCH / SWITCH_CPU_WIDE records (needed for per-cpu traces).
    pub context_switch: bool,
    /// MMAP2 records carry build-ids instead of inode data (Linux 5.12+);
    /// [`SidebandCapture::open_task`] falls back to inode form when refused.
    pub build_id: bool,
    /// Start disabled and let the kernel enable the event at the target's exec.
    pub enable_on_exec: bool,
}

impl Default for SidebandOptions {
    fn default() -> Self {
        SidebandOptions {
            context_switch: true,
            build_id: true,
            enable_on_exec: true,
        }
    }
}

/// sample_type of the sideband event: every record carries TID, TIME, CPU
/// and IDENTIFIER in its sample_id_all trailer.
pub const SAMPLE_TYPE: u64 =
    (b::PERF_SAMPLE_IDENTIFIER | b::PERF_SAMPLE_TID | b::PERF_SAMPLE_TIME | b::PERF_SAMPLE_CPU)
        as u64;

/// The attr of the dummy sideband event.
pub fn dummy_attr(opts: &SidebandOptions) -> perf_event_attr {
    let mut attr = perf_event_attr {
        type_: b::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: u64::from(b::PERF_COUNT_SW_DUMMY),
        sample_type: SAMPLE_TYPE,
        ..Default::default()
    };
    attr.set_disabled(u64::from(opts.enable_on_exec));
    attr.set_enable_on_exec(u64::from(opts.enable_on_exec));
    attr.set_inherit(1);
    attr.set_mmap(1);
    attr.set_mmap2(1);
    attr.set_comm(1);
    attr.set_comm_exec(1);
    attr.set_task(1);
    attr.set_sample_id_all(1);
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    attr.set_context_switch(u64::from(opts.context_switch));
    attr.set_build_id(u64::from(opts.build_id));
    // Wake the reader for every record: sideband is sparse and we poll anyway.
    attr.__bindgen_anon_2.wakeup_events = 1;
    attr
}

/// Online CPU numbers from `/sys/devices/system/cpu/online` ("0-3,5").
pub fn online_cpus() -> io::Result<Vec<u32>> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online")?;
    parse_cpu_list(text.trim()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("cannot parse /sys/devices/system/cpu/online: {text:?}"),
        )
    })
}

/// Parses a kernel cpu list such as `0-3,5`.
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 65536 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// One CPU's sideband event and ring.
#[derive(Debug)]
pub struct CpuSideband {
    /// The CPU the event counts on.
    pub cpu: u32,
    /// The event fd.
    pub fd: OwnedFd,
    /// Its DATA ring.
    pub ring: Ring,
}

/// Sideband events on a task, one per online CPU.
#[derive(Debug)]
pub struct SidebandCapture {
    attr: perf_event_attr,
    cpus: Vec<CpuSideband>,
}

impl SidebandCapture {
    /// Opens the sideband event on `pid` (and, through inherit, every task it
    /// creates later) on each online CPU, each with a DATA ring of
    /// `data_pages` pages (a power of two).
    pub fn open_task(pid: i32, opts: &SidebandOptions, data_pages: usize) -> io::Result<Self> {
        Self::open_task_clock(pid, opts, data_pages, None)
    }

    /// [`SidebandCapture::open_task`], with records stamped by `clockid`
    /// (`use_clockid`, e.g. `libc::CLOCK_MONOTONIC`) instead of perf's own
    /// clock when given. ptsim reads CLOCK_MONOTONIC around the tracee's
    /// kernel round trips to place each record in its simulated timeline.
    pub fn open_task_clock(
        pid: i32,
        opts: &SidebandOptions,
        data_pages: usize,
        clockid: Option<i32>,
    ) -> io::Result<Self> {
        let mut attr = dummy_attr(opts);
        if let Some(clock) = clockid {
            attr.set_use_clockid(1);
            attr.clockid = clock;
        }
        let cpus = online_cpus()?;
        let mut out = Vec::with_capacity(cpus.len());
        for &cpu in &cpus {
            let fd = match sys::perf_event_open(&attr, pid, cpu as i32, None) {
                // Kernels before 5.12 reject the build_id bit with EINVAL.
                Err(e) if attr.build_id() == 1 && e.raw_os_error() == Some(libc::EINVAL) => {
                    attr.set_build_id(0);
                    sys::perf_event_open(&attr, pid, cpu as i32, None)?
                }
                r => r?,
            };
            let len = (data_pages + 1) * sys::page_size();
            let base = Mapping::map(&fd, 0, len, true)?;
            let ring = Ring::from_mappings(base, None).map_err(ring_err)?;
            out.push(CpuSideband { cpu, fd, ring });
        }
        Ok(SidebandCapture { attr, cpus: out })
    }

    /// The attr the events were opened with (build_id cleared if refused).
    pub fn attr(&self) -> &perf_event_attr {
        &self.attr
    }

    /// The per-CPU events and rings.
    pub fn cpus(&self) -> &[CpuSideband] {
        &self.cpus
    }

    /// The attr and event ids in the `sideband` crate's form, for parsing
    /// the drained records and for writing them into a perf.data.
    pub fn attr_set(&self) -> io::Result<AttrSet> {
        let bytes = sys::attr_bytes(&self.attr);
        let (attr, _) = Attr::parse::<Le>(&bytes)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.0))?;
        let ids = self
            .cpus
            .iter()
            .map(|c| sys::event_id(&c.fd))
            .collect::<io::Result<_>>()?;
        let mut set = AttrSet::new();
        set.push(attr, ids);
        Ok(set)
    }

    /// Enables every event now (instead of at exec).
    pub fn enable(&self) -> io::Result<()> {
        self.cpus
            .iter()
            .try_for_each(|c| sys::ioctl(&c.fd, Ioctl::Enable))
    }

    /// Appends the raw records published on every CPU's ring since the last
    /// call to `out`, one CPU after the other (so the caller writes a
    /// FINISHED_ROUND after each call, as perf record does). Returns the bytes
    /// appended.
    pub fn drain(&self, out: &mut Vec<u8>) -> io::Result<u64> {
        let mut n = 0;
        for c in &self.cpus {
            n += c.ring.drain_data(out).map_err(ring_err)?;
        }
        Ok(n)
    }
}

fn ring_err(e: RingError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,5"), Some(vec![0, 1, 2, 3, 5]));
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    /// The kernel writes COMM (exec), MMAP2 and EXIT records for a real child.
    #[test]
    fn sideband_of_a_real_child() {
        // The child is held before its exec (ptrec's `-- CMD` mechanism) so
        // the event is opened first; enable_on_exec then starts it at the
        // exec.
        let path = std::ffi::CString::new("/bin/true").unwrap();
        let mut child =
            crate::sys::HeldChild::spawn(&path, std::slice::from_ref(&path), false).unwrap();
        let pid = child.pid;
        let cap = match SidebandCapture::open_task(pid, &SidebandOptions::default(), 8) {
            Ok(c) => c,
            Err(e) => {
                let _ = crate::sys::kill(pid, libc::SIGKILL);
                let _ = crate::sys::wait_child(pid);
                panic!("opening the dummy sideband event failed: {e} (perf_event_paranoid?)");
            }
        };
        child.go().unwrap();
        assert_eq!(crate::sys::wait_child(pid).unwrap(), 0);
        let mut bytes = Vec::new();
        cap.drain(&mut bytes).unwrap();
        // The live ring feeds the timeline through the same interface as a
        // perf.data file does, in time order: the rings are drained one CPU
        // after the other, and a child that moved between CPUs has records
        // on each (in drain order, the last record's time could come before
        // the MMAP2 records, whose mappings the map at that time lacked: a
        // failure seen once in CI on a loaded machine).
        let attrs = cap.attr_set().unwrap();
        let mut timeline = sideband::timeline::Timeline::new();
        let mut events: Vec<_> = sideband::parse::ring_records(&bytes)
            .map(|raw| sideband::parse::parse_event_le(&attrs, &raw.unwrap()).unwrap())
            .collect();
        events.sort_by_key(|e| e.sample_id.time.unwrap_or(0));
        let mut last_time = 0;
        for event in &events {
            assert_eq!(event.sample_id.pid, Some(pid as u32), "{event:?}");
            last_time = event.sample_id.time.unwrap_or(last_time).max(last_time);
            timeline.apply(event);
        }
        let pid = pid as u32;
        assert_eq!(
            timeline.name(pid, last_time),
            Some("true"),
            "COMM with exec"
        );
        let maps = timeline.image_map(pid, last_time);
        let files: Vec<&str> = maps.iter().map(|m| m.file.filename.as_str()).collect();
        assert!(
            files.iter().any(|f| f.ends_with("/true")),
            "the executable: {files:?}"
        );
        assert!(files.iter().any(|f| f.contains("libc")), "libc: {files:?}");
        let lifetimes = timeline.thread_lifetimes(pid);
        assert!(
            lifetimes.iter().any(|t| t.end.is_some()),
            "EXIT seen: {lifetimes:?}"
        );
    }
}
