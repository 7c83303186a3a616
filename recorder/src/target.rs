//! What to trace, turned into open events and mapped rings: the step between
//! the configuration (pmu.rs, config.rs) and the session that drains the
//! rings. Each buffer is one ring (DATA + AUX) owned by one intel_pt event;
//! the other events of that buffer (intel_pt on other threads, the dummy
//! sideband event) send their records into it with PERF_EVENT_IOC_SET_OUTPUT,
//! as perf record does.
//!
//! * `-p PID[,PID]`: per-cpu buffers; on each CPU the events are opened on
//!   every existing thread of each PID with `inherit`, so threads and
//!   processes they create later are traced too.
//! * `--per-thread`: one buffer per existing thread (`/proc/PID/task`), no
//!   inheritance (the kernel refuses to mmap an inherited per-task event).
//! * `-- CMD`: a child held before its exec; events opened on it with
//!   `enable_on_exec` and inherit, per-cpu buffers; then it runs.
//! * `-a`: per-cpu events on every task (needs privilege).

use std::ffi::{CString, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sideband::attr::{Attr, AttrSet};
use sideband::endian::Le;

use crate::config::{self, EventOptions, InfoOptions, TimeConv};
use crate::errors::Error;
use crate::pmu::Pmu;
use crate::ring::Ring;
use crate::session::{Buffer, BufferControl, FdControl};
use crate::sideband_capture::{self, SidebandOptions};
use crate::sys::{self, perf_event_attr, Ioctl, Mapping};

/// What to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Running processes (all their threads).
    Pids(Vec<i32>),
    /// A command started by ptrec.
    Command(Vec<OsString>),
    /// Every task on every CPU.
    SystemWide,
}

/// How the events and rings are set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenOptions {
    /// One buffer per thread instead of per CPU (`--per-thread`; not with `-a`).
    pub per_thread: bool,
    /// intel_pt event options (kernel tracing, user exclusion).
    pub kernel: bool,
    pub exclude_user: bool,
    /// DATA ring pages (a power of two).
    pub data_pages: usize,
    /// AUX ring pages (a power of two).
    pub aux_pages: usize,
    /// Snapshot mode: the AUX area is mapped read-only (overwrite mode).
    pub snapshot: bool,
    /// Only the sideband event, no intel_pt (tests, and checking the
    /// sideband path on machines without the PMU).
    pub sideband_only: bool,
    /// Restrict per-cpu buffers to these CPUs (default: every online CPU).
    pub cpus: Option<Vec<u32>>,
    /// A command stays stopped (traced) after its exec at [`Opened::start`],
    /// for `--trigger SYMBOL` to be resolved where it was loaded.
    pub stop_at_exec: bool,
    /// `--filter`, resolved to the kernel's syntax ([`crate::filter`]): set
    /// on every intel_pt event and recorded in AUXTRACE_INFO.
    pub filter: Option<String>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            per_thread: false,
            kernel: false,
            exclude_user: false,
            data_pages: 128,
            aux_pages: 1024,
            snapshot: false,
            sideband_only: false,
            cpus: None,
            stop_at_exec: false,
            filter: None,
        }
    }
}

/// Whether perf would treat this user as privileged for buffer sizes
/// (`perf_event_paranoid_check(-1)`): root, CAP_PERFMON or CAP_SYS_ADMIN
/// in the effective set, or perf_event_paranoid below 0.
pub fn privileged() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    let caps = crate::outdir::status_field("CapEff:")
        .and_then(|v| u64::from_str_radix(&v, 16).ok())
        .unwrap_or(0);
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .unwrap_or(2);
    crate::outdir::running_as_root()
        || caps & (1 << CAP_SYS_ADMIN) != 0
        || caps & (1 << CAP_PERFMON) != 0
        || paranoid < 0
}

/// perf's default `-m DATA,AUX` for Intel PT (`intel_pt_recording_options`):
/// 4 MiB of AUX for privileged users, else 128 KiB of AUX and 256 KiB of
/// DATA; DATA otherwise 512 KiB (perf's default mmap size).
pub fn default_pages(privileged: bool) -> (usize, usize) {
    let page = sys::page_size();
    if privileged {
        ((512 << 10) / page, (4 << 20) / page)
    } else {
        ((256 << 10) / page, (128 << 10) / page)
    }
}

/// Checks `-m` values as perf does: powers of two; AUX at least 8 KiB (4 KiB
/// in snapshot mode).
pub fn check_pages(data_pages: usize, aux_pages: usize, snapshot: bool) -> Result<(), Error> {
    if data_pages == 0 || !data_pages.is_power_of_two() {
        return Err(Error::Usage(format!(
            "-m: {data_pages} DATA pages: must be a power of two (e.g. 64, 128)"
        )));
    }
    let min = if snapshot { 4 << 10 } else { 8 << 10 };
    let bytes = aux_pages * sys::page_size();
    if bytes < min || !aux_pages.is_power_of_two() {
        return Err(Error::Usage(format!(
            "-m: invalid AUX size {aux_pages} pages for Intel PT: must be at least {} KiB and a power of two",
            min >> 10
        )));
    }
    Ok(())
}

/// The threads of `pid` (`/proc/PID/task`), or [`Error::NoSuchPid`].
pub fn threads_of(pid: i32) -> Result<Vec<i32>, Error> {
    let dir = PathBuf::from(format!("/proc/{pid}/task"));
    let entries = std::fs::read_dir(&dir).map_err(|_| Error::NoSuchPid { pid })?;
    let mut tids: Vec<i32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    if tids.is_empty() {
        return Err(Error::NoSuchPid { pid });
    }
    Ok(tids)
}

/// Finds `prog` through PATH as execvp would (a name with a slash is used as is).
pub fn resolve_program(prog: &OsString) -> Result<PathBuf, Error> {
    let p = Path::new(prog);
    if prog.as_bytes().contains(&b'/') {
        return Ok(p.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    for dir in std::env::split_paths(&path) {
        let cand = dir.join(p);
        if let Ok(m) = std::fs::metadata(&cand) {
            use std::os::unix::fs::PermissionsExt;
            if m.is_file() && m.permissions().mode() & 0o111 != 0 {
                return Ok(cand);
            }
        }
    }
    Err(Error::Usage(format!(
        "cannot run {:?}: not found in PATH",
        prog.to_string_lossy()
    )))
}

/// The open events and rings of a recording.
pub struct Opened {
    /// One per ring, for [`crate::session::Session::new`].
    pub buffers: Vec<Buffer>,
    /// The attrs (intel_pt first, then the sideband dummy) with the ids of
    /// every event, for the perf.data header.
    pub attrs: AttrSet,
    /// The intel_pt attr (absent with `sideband_only`).
    pub pt_attr: Option<perf_event_attr>,
    /// The sideband attr.
    pub sideband_attr: perf_event_attr,
    /// The PERF_RECORD_AUXTRACE_INFO words (absent with `sideband_only`).
    pub info: Option<sideband::auxtrace_info::IntelPtInfo>,
    /// The processes traced (the child's pid for a command; empty for `-a`).
    pub pids: Vec<i32>,
    /// The child for a command, held before its exec until [`Opened::start`].
    pub child: Option<sys::HeldChild>,
    /// Every intel_pt event (to enable them at start).
    pt_fds: Vec<Arc<OwnedFd>>,
    /// The sideband events, kept open for the recording's life.
    _sideband_fds: Vec<OwnedFd>,
    enable_now: bool,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened")
            .field("buffers", &self.buffers.len())
            .field("pids", &self.pids)
            .finish_non_exhaustive()
    }
}

impl Opened {
    /// The intel_pt events (for `enable`/`disable` from the control fifo).
    pub fn pt_fds(&self) -> Vec<Arc<OwnedFd>> {
        self.pt_fds.clone()
    }

    /// Starts tracing: enables the intel_pt events (`-p`, `-a`), or lets the
    /// held command exec (its events start at the exec).
    pub fn start(&mut self) -> Result<(), Error> {
        if self.enable_now {
            for fd in &self.pt_fds {
                sys::ioctl(fd, Ioctl::Enable).map_err(|source| Error::Open {
                    what: "enabling the intel_pt event".into(),
                    source,
                })?;
            }
        }
        if let Some(child) = &mut self.child {
            child.go().map_err(|source| Error::Open {
                what: format!("executing the command (pid {})", child.pid),
                source,
            })?;
        }
        Ok(())
    }
}

/// Controls every intel_pt event writing into one ring. Pausing acts on the
/// ring itself (PERF_EVENT_IOC_PAUSE_OUTPUT on its owner pauses all writers);
/// enable/disable, and the fallback without pause, act on each event.
struct GroupControl {
    owner: FdControl,
    others: Vec<Arc<OwnedFd>>,
}

impl GroupControl {
    fn each(&self, op: Ioctl) -> std::io::Result<()> {
        self.others.iter().try_for_each(|fd| sys::ioctl(fd, op))
    }
}

impl BufferControl for GroupControl {
    fn pause(&self) -> std::io::Result<()> {
        self.owner.pause()?;
        if !self.owner.can_pause() {
            self.each(Ioctl::Disable)?;
        }
        Ok(())
    }
    fn resume(&self) -> std::io::Result<()> {
        if !self.owner.can_pause() {
            self.each(Ioctl::Enable)?;
        }
        self.owner.resume()
    }
    fn enable(&self) -> std::io::Result<()> {
        self.each(Ioctl::Enable)?;
        self.owner.enable()
    }
    fn disable(&self) -> std::io::Result<()> {
        self.owner.disable()?;
        self.each(Ioctl::Disable)
    }
    fn can_pause(&self) -> bool {
        self.owner.can_pause()
    }
    fn poll_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.owner.poll_fd()
    }
}

/// One ring to map and the events that write into it, before anything is
/// opened: a CPU's ring (every task on that CPU) or, with `--per-thread`,
/// a thread's.
struct RingEvents {
    /// The CPU the ring is for (per-cpu rings).
    cpu: Option<u32>,
    /// The thread the ring is for (`--per-thread`).
    tid: Option<u32>,
    /// `perf_event_open`'s (pid, cpu) of each event pair (intel_pt and
    /// sideband) written into the ring; the first one's events own it.
    pairs: Vec<(i32, i32)>,
}

/// The rings `target` needs and their events: one per CPU (each with
/// every task on it), or one per thread with `--per-thread`.
fn ring_events(
    target: &Target,
    pids: &[i32],
    opts: &OpenOptions,
) -> Result<Vec<RingEvents>, Error> {
    let cpus = match &opts.cpus {
        Some(c) => c.clone(),
        None => sideband_capture::online_cpus().map_err(|source| Error::Open {
            what: "reading the online CPUs".into(),
            source,
        })?,
    };
    let mut tasks = Vec::new();
    match target {
        Target::SystemWide => tasks.push(-1),
        // The child has one thread until it execs.
        Target::Command(_) => tasks.extend_from_slice(pids),
        Target::Pids(_) => {
            for &pid in pids {
                tasks.extend(threads_of(pid)?);
            }
        }
    }
    Ok(if opts.per_thread {
        tasks
            .iter()
            .map(|&tid| RingEvents {
                cpu: None,
                tid: Some(tid as u32),
                pairs: vec![(tid, -1)],
            })
            .collect()
    } else {
        cpus.iter()
            .map(|&cpu| RingEvents {
                cpu: Some(cpu),
                tid: None,
                pairs: tasks.iter().map(|&t| (t, cpu as i32)).collect(),
            })
            .collect()
    })
}

/// Sets the resolved address filter on one intel_pt event.
fn set_filter(fd: &OwnedFd, filter: &str, who: &str) -> Result<(), Error> {
    let c = CString::new(filter)
        .map_err(|_| Error::Usage("the --filter text contains a NUL byte".into()))?;
    sys::set_filter(fd, &c).map_err(|source| {
        let hint = match source.raw_os_error() {
            Some(libc::EOPNOTSUPP) => {
                " (file filters need a task: -a traces CPUs, where only kernel filters apply)"
            }
            Some(libc::EINVAL) => {
                " (the kernel refused it: a region must lie in one mapping of the file, \
                 and no more filters than caps/num_address_ranges)"
            }
            Some(libc::ENOENT) => " (a file of the filter does not exist)",
            _ => "",
        };
        Error::Open {
            what: format!("setting the address filter {filter:?} ({who}){hint}"),
            source,
        }
    })
}

/// Opens every event and maps every ring for `target`. `pmu` and `pt_config`
/// are unused with `sideband_only`.
pub fn open(
    pmu: Option<&Pmu>,
    pt_config: u64,
    target: &Target,
    opts: &OpenOptions,
) -> Result<Opened, Error> {
    if opts.per_thread && *target == Target::SystemWide {
        return Err(Error::Usage(
            "--per-thread and -a cannot be combined".into(),
        ));
    }
    let is_command = matches!(target, Target::Command(_));
    let mut child = None;
    let pids = match target {
        Target::Pids(p) => p.clone(),
        Target::SystemWide => Vec::new(),
        Target::Command(argv) => {
            let prog = resolve_program(&argv[0])?;
            let path = CString::new(prog.as_os_str().as_bytes())
                .map_err(|_| Error::Usage("the command contains a NUL byte".into()))?;
            let args = argv
                .iter()
                .map(|a| CString::new(a.as_bytes()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| Error::Usage("an argument contains a NUL byte".into()))?;
            let c = sys::HeldChild::spawn(&path, &args, opts.stop_at_exec).map_err(|source| {
                Error::Open {
                    what: "starting the command".into(),
                    source,
                }
            })?;
            let pid = c.pid;
            child = Some(c);
            vec![pid]
        }
    };
    let result = open_events(pmu, pt_config, target, &pids, opts, is_command);
    match result {
        Ok(mut o) => {
            o.child = child;
            Ok(o)
        }
        Err(e) => {
            // Dropping the held child's go pipe lets it exit without running.
            drop(child);
            Err(e)
        }
    }
}

fn open_events(
    pmu: Option<&Pmu>,
    pt_config: u64,
    target: &Target,
    pids: &[i32],
    opts: &OpenOptions,
    is_command: bool,
) -> Result<Opened, Error> {
    let per_cpu = !opts.per_thread;
    let mut event_attrs = build_attrs(pmu, pt_config, opts, is_command)?;
    let page = sys::page_size();
    let mut events = OpenEvents::default();
    let rings = ring_events(target, pids, opts)?;
    for (idx, ring_events) in rings.into_iter().enumerate() {
        events.open_ring(&mut event_attrs, idx, ring_events, opts, page)?;
    }
    let EventAttrs {
        pt: pt_attr,
        sideband: sb_attr,
    } = event_attrs;

    let mut attrs = AttrSet::new();
    if let Some(a) = &pt_attr {
        attrs.push(parse_attr(a)?, events.pt_ids);
    }
    attrs.push(parse_attr(&sb_attr)?, events.sb_ids);
    let info = pmu.filter(|_| pt_attr.is_some()).map(|pmu| {
        config::intel_pt_info(
            pmu,
            &InfoOptions {
                snapshot: opts.snapshot,
                per_cpu_mmaps: per_cpu,
                have_sched_switch: match (target, per_cpu) {
                    (Target::SystemWide, _) => 3,
                    (_, true) => 2,
                    (_, false) => 0,
                },
                time: events.time.unwrap_or_default(),
            },
        )
    });
    let info = info.map(|mut i| {
        i.filter = opts.filter.clone();
        i
    });
    Ok(Opened {
        buffers: events.buffers,
        attrs,
        pt_attr,
        sideband_attr: sb_attr,
        info,
        pids: pids.to_vec(),
        child: None,
        pt_fds: events.pt_fds,
        _sideband_fds: events.sb_fds,
        enable_now: !is_command,
    })
}

/// The attrs every ring's events are opened with.
struct EventAttrs {
    /// intel_pt (absent with `sideband_only`).
    pt: Option<perf_event_attr>,
    /// The sideband dummy event (`open_sideband` may drop its `build_id`).
    sideband: perf_event_attr,
}

/// Builds the intel_pt and sideband attrs: inherited with per-cpu rings,
/// enabled on exec for a command.
fn build_attrs(
    pmu: Option<&Pmu>,
    pt_config: u64,
    opts: &OpenOptions,
    is_command: bool,
) -> Result<EventAttrs, Error> {
    let per_cpu = !opts.per_thread;
    let pt_attr = match (opts.sideband_only, pmu) {
        (false, Some(pmu)) => Some(config::intel_pt_attr(
            pmu,
            pt_config,
            &EventOptions {
                kernel: opts.kernel,
                inherit: per_cpu,
                enable_on_exec: is_command,
                exclude_user: opts.exclude_user,
            },
        )),
        (false, None) => {
            return Err(Error::Usage(
                "internal: the intel_pt event needs its PMU".into(),
            ))
        }
        (true, _) => None,
    };
    let mut sb_attr = sideband_capture::dummy_attr(&SidebandOptions {
        context_switch: true,
        build_id: true,
        enable_on_exec: is_command,
    });
    sb_attr.set_inherit(u64::from(per_cpu));
    if opts.kernel {
        sb_attr.set_exclude_kernel(0);
    }
    Ok(EventAttrs {
        pt: pt_attr,
        sideband: sb_attr,
    })
}

/// What `open_events` gathers across rings: the buffers, every event's fd
/// and id, and the time conversion of the first ring mapped.
#[derive(Default)]
struct OpenEvents {
    buffers: Vec<Buffer>,
    pt_fds: Vec<Arc<OwnedFd>>,
    pt_ids: Vec<u64>,
    sb_fds: Vec<OwnedFd>,
    sb_ids: Vec<u64>,
    time: Option<TimeConv>,
}

/// One ring's events while they are opened: the event that owns (and
/// mapped) the ring, the other intel_pt events writing into it, and the
/// mappings.
#[derive(Default)]
struct RingGroup {
    owner: Option<Arc<OwnedFd>>,
    others: Vec<Arc<OwnedFd>>,
    base: Option<(Mapping, Option<Mapping>)>,
}

impl OpenEvents {
    /// Opens the events of one ring, maps it and adds its buffer (none when
    /// the ring has no events).
    fn open_ring(
        &mut self,
        attrs: &mut EventAttrs,
        idx: usize,
        ring_events: RingEvents,
        opts: &OpenOptions,
        page: usize,
    ) -> Result<(), Error> {
        let mut group = RingGroup::default();
        for &(pid, cpu) in &ring_events.pairs {
            self.open_pair(attrs, &mut group, pid, cpu, opts, page)?;
        }
        let (Some(owner), Some((base, aux))) = (group.owner, group.base) else {
            return Ok(());
        };
        if self.time.is_none() {
            let (time_shift, time_mult, time_zero, cap_user_time_zero) = sys::time_conv(&base);
            self.time = Some(TimeConv {
                time_shift,
                time_mult,
                time_zero,
                cap_user_time_zero,
            });
        }
        let ring = Ring::from_mappings(base, aux).map_err(|e| Error::Open {
            what: "mapping the ring".into(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })?;
        let control: Box<dyn BufferControl> = Box::new(GroupControl {
            owner: FdControl::new(owner),
            others: group.others,
        });
        self.buffers.push(Buffer {
            idx: idx as u32,
            cpu: ring_events.cpu,
            tid: ring_events.tid,
            ring,
            control,
        });
        Ok(())
    }

    /// Opens the intel_pt and sideband events of one (pid, cpu) pair into
    /// `group`'s ring; the first event opened owns and maps the ring.
    fn open_pair(
        &mut self,
        attrs: &mut EventAttrs,
        group: &mut RingGroup,
        pid: i32,
        cpu: i32,
        opts: &OpenOptions,
        page: usize,
    ) -> Result<(), Error> {
        let who = match (pid, cpu) {
            (-1, c) => format!("cpu {c}"),
            (p, -1) => format!("thread {p}"),
            (p, c) => format!("pid {p} on cpu {c}"),
        };
        let pid_for_err = (pid > 0).then_some(pid);
        if let Some(attr) = &attrs.pt {
            let fd = sys::perf_event_open(attr, pid, cpu, None).map_err(|e| {
                Error::from_open(
                    format!("opening the intel_pt event ({who})"),
                    pid_for_err,
                    e,
                )
            })?;
            self.pt_ids.push(event_id(&fd)?);
            if let Some(filter) = &opts.filter {
                set_filter(&fd, filter, &who)?;
            }
            let fd = Arc::new(fd);
            match &group.owner {
                None => {
                    group.base = Some(map_rings(&fd, opts, page)?);
                    group.owner = Some(fd.clone());
                }
                Some(o) => {
                    set_output(&fd, o)?;
                    group.others.push(fd.clone());
                }
            }
            self.pt_fds.push(fd);
        }
        // The sideband event, writing into the same ring (or owning it
        // when there is no intel_pt event).
        let sb = open_sideband(&mut attrs.sideband, pid, cpu).map_err(|e| {
            Error::from_open(
                format!("opening the sideband event ({who})"),
                pid_for_err,
                e,
            )
        })?;
        self.sb_ids.push(event_id(&sb)?);
        match &group.owner {
            Some(o) => {
                set_output(&sb, o)?;
                self.sb_fds.push(sb);
            }
            None => {
                group.base = Some(map_rings(&sb, opts, page)?);
                group.owner = Some(Arc::new(sb));
            }
        }
        Ok(())
    }
}

/// Opens the sideband event, dropping `build_id` when the kernel refuses it
/// (before 5.12) for this and every later open.
fn open_sideband(attr: &mut perf_event_attr, pid: i32, cpu: i32) -> std::io::Result<OwnedFd> {
    match sys::perf_event_open(attr, pid, cpu, None) {
        Err(e) if attr.build_id() == 1 && e.raw_os_error() == Some(libc::EINVAL) => {
            attr.set_build_id(0);
            sys::perf_event_open(attr, pid, cpu, None)
        }
        r => r,
    }
}

fn event_id(fd: &OwnedFd) -> Result<u64, Error> {
    sys::event_id(fd).map_err(|source| Error::Open {
        what: "reading an event id".into(),
        source,
    })
}

fn set_output(fd: &OwnedFd, owner: &OwnedFd) -> Result<(), Error> {
    sys::ioctl(fd, Ioctl::SetOutput(owner.as_raw_fd())).map_err(|source| Error::Open {
        what: "redirecting an event into its buffer (PERF_EVENT_IOC_SET_OUTPUT)".into(),
        source,
    })
}

/// Maps the DATA ring (metadata page + `data_pages`) and, when the event
/// is intel_pt, the AUX ring right after it: read-write for full trace,
/// read-only for snapshots (the kernel then overwrites old data).
fn map_rings(
    fd: &OwnedFd,
    opts: &OpenOptions,
    page: usize,
) -> Result<(Mapping, Option<Mapping>), Error> {
    let data_len = (opts.data_pages + 1) * page;
    let base =
        Mapping::map(fd, 0, data_len, true).map_err(|e| map_err("DATA", opts.data_pages, e))?;
    if opts.sideband_only {
        return Ok((base, None));
    }
    let aux_len = opts.aux_pages * page;
    sys::set_aux_area(&base, data_len as u64, aux_len as u64);
    let aux = Mapping::map(fd, data_len as u64, aux_len, !opts.snapshot)
        .map_err(|e| map_err("AUX", opts.aux_pages, e))?;
    Ok((base, Some(aux)))
}

fn map_err(which: &'static str, pages: usize, e: std::io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::EPERM) => Error::mlock(which, pages, e),
        // The kernel's own limit or the machine's memory: a smaller ring.
        Some(libc::ENOMEM) => Error::Open {
            what: format!(
                "mapping the {which} ring ({pages} pages; give a smaller -m, e.g. -m {})",
                (pages / 4).max(1).next_power_of_two()
            ),
            source: e,
        },
        _ => Error::Open {
            what: format!("mapping the {which} ring ({pages} pages)"),
            source: e,
        },
    }
}

/// The attr as the perf.data header stores it. The bindings' struct is
/// newer than many perf versions (perf 6.1 refuses a 144-byte attr as "a more
/// recent ABI"), so it is cut to the 128 bytes of ATTR_SIZE_VER7 when the
/// fields after them (config3 and later) are unused, as they are here.
/// The perf.data form of a kernel attr (trailing zero extensions cut to VER7).
pub fn parse_attr(attr: &perf_event_attr) -> Result<Attr, Error> {
    let mut bytes = sys::attr_bytes(attr);
    let ver7 = sideband::attr::ATTR_SIZE_VER7 as usize;
    if bytes.len() > ver7 && bytes[ver7..].iter().all(|&b| b == 0) {
        bytes.truncate(ver7);
        bytes[4..8].copy_from_slice(&(ver7 as u32).to_le_bytes());
    }
    Attr::parse::<Le>(&bytes)
        .map(|(a, _)| a)
        .map_err(|e| Error::Open {
            what: "encoding an attr".into(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.0),
        })
}

/// Resolves a `--trigger` spec to an address in process `pid`: `0xADDR` as
/// is, `FILE:SYMBOL` in the mapped file whose path is FILE or ends with
/// `/FILE`, `SYMBOL` in the main executable, then in every other mapped
/// file. The symbol's ELF address becomes a file offset through its PT_LOAD
/// segment, and that offset a run-time address through the mapping that
/// covers it in `/proc/PID/maps` (so PIE and shared libraries work).
pub fn resolve_trigger(pid: i32, spec: &str) -> Result<u64, Error> {
    if let Some(hex) = spec.strip_prefix("0x") {
        return u64::from_str_radix(hex, 16)
            .map_err(|_| Error::Usage(format!("--trigger {spec:?}: bad hex address")));
    }
    let (file, symbol) = match spec.rsplit_once(':') {
        Some((f, s)) => (Some(f), s),
        None => (None, spec),
    };
    let maps_text = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|_| Error::NoSuchPid { pid })?;
    let maps = crate::capture::parse_maps(&maps_text);
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned());
    let mut files: Vec<String> = Vec::new();
    for m in &maps {
        if crate::capture::is_file_mapping(&m.path) && !files.contains(&m.path) {
            files.push(m.path.clone());
        }
    }
    // The main executable first.
    files.sort_by_key(|f| Some(f) != exe.as_ref());
    let files: Vec<&String> = files
        .iter()
        .filter(|f| match file {
            Some(want) => *f == want || f.ends_with(&format!("/{want}")),
            None => true,
        })
        .collect();
    for path in &files {
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        let Some(offset) = symbol_file_offset(&bytes, symbol) else {
            continue;
        };
        if let Some(m) = maps
            .iter()
            .find(|m| &&m.path == path && offset >= m.offset && offset - m.offset < m.end - m.start)
        {
            return Ok(m.start + (offset - m.offset));
        }
    }
    Err(Error::Usage(format!(
        "--trigger {spec:?}: no symbol {symbol:?} in {} mapped by pid {pid}",
        match file {
            Some(f) => format!("a file named {f}"),
            None => "any file".into(),
        }
    )))
}

/// AT_ENTRY (the program's entry point) from `/proc/PID/auxv` bytes (pairs
/// of native words; AT_NULL ends them).
pub fn auxv_entry(auxv: &[u8]) -> Option<u64> {
    const AT_ENTRY: u64 = 9;
    auxv.chunks_exact(16).find_map(|kv| {
        let k = u64::from_ne_bytes(kv[..8].try_into().ok()?);
        let v = u64::from_ne_bytes(kv[8..].try_into().ok()?);
        (k == AT_ENTRY).then_some(v)
    })
}

/// The file offset of `symbol`'s address in an ELF image.
fn symbol_file_offset(bytes: &[u8], symbol: &str) -> Option<u64> {
    use object::{Object, ObjectSegment, ObjectSymbol};
    let file = object::File::parse(bytes).ok()?;
    let addr = file
        .symbols()
        .chain(file.dynamic_symbols())
        .find(|s| s.name() == Ok(symbol) && s.address() != 0)?
        .address();
    file.segments().find_map(|seg| {
        let (off, size) = seg.file_range();
        (addr >= seg.address() && addr - seg.address() < size).then(|| off + (addr - seg.address()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_defaults_and_checks() {
        let page = sys::page_size();
        assert_eq!(default_pages(true), ((512 << 10) / page, (4 << 20) / page));
        assert_eq!(
            default_pages(false),
            ((256 << 10) / page, (128 << 10) / page)
        );
        assert!(check_pages(128, 1024, false).is_ok());
        assert!(check_pages(100, 1024, false).is_err());
        assert!(check_pages(128, 1000, false).is_err());
        assert!(check_pages(128, 1, false).is_err());
        assert!(check_pages(128, 1, true).is_ok());
    }

    #[test]
    fn threads_and_programs() {
        let me = std::process::id() as i32;
        assert!(threads_of(me).unwrap().contains(&me));
        assert!(matches!(threads_of(i32::MAX), Err(Error::NoSuchPid { .. })));
        assert!(resolve_program(&"true".into()).unwrap().is_absolute());
        assert!(resolve_program(&"no-such-program-xyz".into()).is_err());
    }

    #[test]
    fn entry_point_from_auxv() {
        let auxv = std::fs::read("/proc/self/auxv").unwrap();
        let entry = auxv_entry(&auxv).unwrap();
        // Inside this test binary's executable mapping.
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let maps = crate::capture::parse_maps(&std::fs::read_to_string("/proc/self/maps").unwrap());
        assert!(maps.iter().any(|m| m.path == exe.to_str().unwrap()
            && m.perms.contains('x')
            && (m.start..m.end).contains(&entry)));
        assert_eq!(auxv_entry(&[0; 32]), None);
    }

    #[test]
    fn trigger_symbols_resolve_to_run_time_addresses() {
        let me = std::process::id() as i32;
        // A libc function's run-time address in this process.
        let want = libc::getpid as *const () as usize as u64;
        assert_eq!(resolve_trigger(me, "libc.so.6:getpid").unwrap(), want);
        assert_eq!(resolve_trigger(me, "getpid").unwrap(), want);
        assert_eq!(resolve_trigger(me, "0x1234").unwrap(), 0x1234);
        let e = resolve_trigger(me, "no_such_symbol_xyz").unwrap_err();
        assert!(e.to_string().contains("no symbol"), "{e}");
    }
}
