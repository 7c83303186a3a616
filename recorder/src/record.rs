//! One recording from start to end, as the `ptrec` binary runs it: PMU and
//! config terms, the output directory, events and rings ([`crate::target`]),
//! the perf.data header records (AUXTRACE_INFO, TIME_CONV, the existing
//! threads' COMM/MMAP2 for `-p`, feature sections), the captures
//! ([`crate::capture`]), the session that drains the rings
//! ([`crate::session`]), and the watchers that end it (target exit, the
//! control fifo, signals).

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sideband::auxtrace_info::AuxtraceInfo;
use sideband::feature::{self, id as feat};
use sideband::record::{misc, Event, FileId, Mmap, Record, SampleId, TimeConv as TimeConvRecord};

use crate::capture::{self, MappedFiles};
use crate::config::{self, parse_event};
use crate::errors::{Error, SYSFS};
use crate::outdir::OutDir;
use crate::pmu::Pmu;
use crate::session::{
    Mode, ProgressFn, Report, Session, SessionConfig, SessionError, StopReason, StopSignal,
    TraceWriter,
};
use crate::sys::{self, Ioctl};
use crate::target::{self, OpenOptions, Target};

/// Everything a recording is asked to do.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    pub target: Target,
    pub out: PathBuf,
    pub force: bool,
    /// `-e` terms (perf's spelling), `None` for perf's defaults.
    pub event: Option<String>,
    /// `-k`: trace the kernel too, and copy kcore into `kcore_dir/`.
    pub kernel: bool,
    /// `-m DATA[,AUX]` pages; `None` parts take perf's defaults.
    pub data_pages: Option<usize>,
    pub aux_pages: Option<usize>,
    pub mode: Mode,
    pub max_snapshots: Option<u32>,
    pub duration: Option<Duration>,
    pub per_thread: bool,
    pub cpus: Option<Vec<u32>>,
    /// `--archive`: copy mapped binaries into `sysroot/`.
    pub archive: bool,
    pub sysfs_root: PathBuf,
    /// No intel_pt event: only the sideband (works without the PMU).
    pub sideband_only: bool,
    /// `--control fifo:CTL[,ACK]`.
    pub control: Option<(PathBuf, Option<PathBuf>)>,
    /// `--trigger SYMBOL|ADDR|FILE:SYMBOL`: a snapshot on each hit.
    pub trigger: Option<String>,
    /// The command line, for the CMDLINE feature.
    pub cmdline: Vec<String>,
    /// `--filter`: address filters in perf's syntax (resolved before
    /// anything is created, see [`crate::filter`]).
    pub filter: Option<String>,
}

impl RecordOptions {
    /// Defaults for `target` into `out`.
    pub fn new(target: Target, out: impl Into<PathBuf>) -> Self {
        RecordOptions {
            target,
            out: out.into(),
            force: false,
            event: None,
            kernel: false,
            data_pages: None,
            aux_pages: None,
            mode: Mode::FullTrace,
            max_snapshots: None,
            duration: None,
            per_thread: false,
            cpus: None,
            archive: false,
            sysfs_root: SYSFS.into(),
            sideband_only: false,
            control: None,
            trigger: None,
            cmdline: Vec::new(),
            filter: None,
        }
    }
}

/// What a finished recording did.
#[derive(Debug)]
pub struct Summary {
    pub report: Report,
    pub out: PathBuf,
    /// Exit code of the recorded command.
    pub child_status: Option<i32>,
    /// Things that did not work but did not stop the recording (a vDSO or
    /// binary that could not be copied).
    pub warnings: Vec<String>,
}

fn output(path: &std::path::Path) -> impl Fn(sideband::Error) -> Error + '_ {
    move |e| Error::Output {
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Records until the target exits, `stop` is signalled, the duration passes
/// or the snapshots are taken.
pub fn record(
    opts: &RecordOptions,
    stop: &StopSignal,
    progress: Option<ProgressFn>,
) -> Result<Summary, Error> {
    let pmu = if opts.sideband_only {
        None
    } else {
        Some(Pmu::intel_pt(&opts.sysfs_root)?)
    };
    let spec = parse_event(opts.event.as_deref().unwrap_or(""))?;
    let pt_config = match &pmu {
        Some(p) => config::build_config(p, &spec.terms)?,
        None => 0,
    };
    let snapshot = matches!(opts.mode, Mode::Snapshot { .. });
    let (def_data, def_aux) = target::default_pages(target::privileged());
    let data_pages = opts.data_pages.unwrap_or(def_data);
    let aux_pages = opts.aux_pages.unwrap_or(def_aux);
    target::check_pages(data_pages, aux_pages, snapshot)?;
    if let Mode::Snapshot { size: Some(size) } = opts.mode {
        let ring = (aux_pages * sys::page_size()) as u64;
        if size > ring {
            return Err(Error::Usage(format!(
                "snapshot size {size} must not be greater than the AUX ring ({ring} bytes); \
                 raise it with -m DATA,AUX"
            )));
        }
    }
    if let Target::Pids(pids) = &opts.target {
        for &pid in pids {
            target::threads_of(pid)?;
        }
    }
    // Before anything is created: a filter that cannot be resolved is a usage error.
    let filter = match (&opts.filter, &pmu) {
        (Some(text), Some(pmu)) => Some(crate::filter::resolve(text, pmu)?.1),
        (Some(_), None) => {
            return Err(Error::Usage(
                "--filter applies to the intel_pt event; --sideband-only has none".into(),
            ))
        }
        (None, _) => None,
    };
    if opts.kernel || spec.kernel {
        // Before anything is created: -k needs the kernel's addresses.
        crate::synth::read_kallsyms()?;
        capture::check_kcore()?;
    }

    let dir = OutDir::create(&opts.out, opts.force)?;
    let mut started = false;
    let result = record_into(
        &dir,
        opts,
        pmu.as_ref(),
        pt_config,
        &spec,
        filter,
        data_pages,
        aux_pages,
        stop,
        progress,
        &mut started,
    );
    match result {
        Err(e) if !started => {
            // Nothing was recorded (the command could not run, an event
            // could not be opened): leave no directory behind, and an
            // existing trace being replaced as it was.
            dir.discard();
            Err(e)
        }
        Err(e) => {
            // What was recorded is kept (and handed to the sudo user); an
            // existing trace it was to replace stays as it was.
            let replaced = dir.replaces_existing().then(|| dir.target().to_path_buf());
            match dir.keep_failed() {
                Ok(kept) => Err(Error::Partial {
                    error: Box::new(e),
                    kept,
                    replaced,
                }),
                Err(_) => Err(e),
            }
        }
        Ok(mut summary) => {
            summary.out = dir.commit()?;
            Ok(summary)
        }
    }
}

/// The recording itself, into `dir`, in its phases: open the events, write the
/// header records, capture kcore and the vDSOs, set up the session, start the
/// watchers that end it, run it. `started` turns true once the target runs
/// traced: from then on an error keeps what was recorded.
#[allow(clippy::too_many_arguments)]
fn record_into(
    dir: &OutDir,
    opts: &RecordOptions,
    pmu: Option<&Pmu>,
    pt_config: u64,
    spec: &config::EventSpec,
    filter: Option<String>,
    data_pages: usize,
    aux_pages: usize,
    stop: &StopSignal,
    progress: Option<ProgressFn>,
    started: &mut bool,
) -> Result<Summary, Error> {
    let kernel = opts.kernel || spec.kernel;
    let open_opts = open_options(opts, spec, kernel, filter, data_pages, aux_pages);
    let mut opened = target::open(pmu, pt_config, &opts.target, &open_opts)?;

    let data_path = dir.data();
    let mut writer =
        TraceWriter::create(&data_path, opened.attrs.clone()).map_err(output(&data_path))?;
    write_header_records(&mut writer, opts, &opened, kernel, &data_path)?;
    let warnings = Arc::new(Mutex::new(Vec::<String>::new()));
    let vdsos = capture_images(dir, kernel, &opened, &warnings)?;
    // --archive: files seen in MMAP records, copied when the file is finished.
    let seen: Arc<Mutex<MappedFiles>> = Arc::default();
    let sysroot = if opts.archive {
        Some(dir.subdir("sysroot")?)
    } else {
        None
    };
    archive_and_write_build_ids_at_finish(
        &mut writer,
        sysroot,
        vdsos,
        &seen,
        &warnings,
        &opened.pids,
    );
    let session = new_session(opts, &mut opened, writer, &seen, progress);

    let done = Arc::new(AtomicBool::new(false));
    let mut threads: Vec<std::thread::JoinHandle<()>> = Vec::new();
    if let Some((ctl, ack)) = &opts.control {
        threads.push(spawn_control(
            ctl.clone(),
            ack.clone(),
            stop.clone(),
            opened.pt_fds(),
            done.clone(),
        )?);
    }
    match &opts.trigger {
        Some(spec) if !open_opts.stop_at_exec => {
            for (tid, addr) in trigger_points(&opts.target, &opened, spec)? {
                threads.push(spawn_trigger(tid, addr, stop, &done)?);
            }
        }
        _ => {}
    }
    opened.start()?;
    *started = true;
    if let (Some(spec), Some(child), true) =
        (&opts.trigger, opened.child.as_mut(), open_opts.stop_at_exec)
    {
        threads.push(set_trigger_after_exec(child, spec, stop, &done)?);
    }
    let child_pid = opened.child.as_ref().map(|c| c.pid);
    let child_status = Arc::new(Mutex::new(None));
    threads.extend(spawn_exit_watcher(
        child_pid,
        &opened.pids,
        stop,
        &done,
        &child_status,
    ));

    let report = run_session(session, stop, &done, child_pid, threads, &data_path)?;
    let warnings = std::mem::take(&mut *warnings.lock().unwrap_or_else(|e| e.into_inner()));
    let child_status = *child_status.lock().unwrap_or_else(|e| e.into_inner());
    Ok(Summary {
        report,
        out: dir.path().to_path_buf(),
        child_status,
        warnings,
    })
}

/// How the events are opened: the options' target, rings and filter, the
/// kernel traced or not, and whether a command stops at its exec (for a
/// `--trigger` symbol, resolved only after the exec).
fn open_options(
    opts: &RecordOptions,
    spec: &config::EventSpec,
    kernel: bool,
    filter: Option<String>,
    data_pages: usize,
    aux_pages: usize,
) -> OpenOptions {
    OpenOptions {
        per_thread: opts.per_thread,
        kernel,
        exclude_user: !spec.user,
        data_pages,
        aux_pages,
        snapshot: matches!(opts.mode, Mode::Snapshot { .. }),
        sideband_only: opts.sideband_only,
        cpus: opts.cpus.clone(),
        stop_at_exec: matches!(opts.target, Target::Command(_))
            && opts
                .trigger
                .as_deref()
                .is_some_and(|t| !t.starts_with("0x")),
        filter,
    }
}

/// The records before the rings' own: AUXTRACE_INFO and TIME_CONV for
/// intel_pt, the kernel's MMAPs with `-k`, the existing threads' COMM and
/// MMAP2, then the environment's feature sections.
fn write_header_records(
    writer: &mut TraceWriter,
    opts: &RecordOptions,
    opened: &target::Opened,
    kernel: bool,
    data_path: &std::path::Path,
) -> Result<(), Error> {
    let sb_id = opened
        .attrs
        .entries()
        .last()
        .and_then(|e| e.ids.first().copied());
    if let Some(info) = &opened.info {
        writer
            .write_event(&Event {
                misc: 0,
                record: Record::AuxtraceInfo(AuxtraceInfo::from_intel_pt(info)),
                sample_id: SampleId::default(),
            })
            .map_err(output(data_path))?;
        writer
            .write_event(&Event {
                misc: 0,
                record: Record::TimeConv(TimeConvRecord {
                    time_shift: info.time_shift,
                    time_mult: info.time_mult,
                    time_zero: info.time_zero,
                    time_cycles: None,
                    time_mask: None,
                    cap_user_time_zero: None,
                    cap_user_time_short: None,
                }),
                sample_id: SampleId::default(),
            })
            .map_err(output(data_path))?;
    }
    if kernel {
        let kallsyms = crate::synth::read_kallsyms()?;
        for ev in crate::synth::kernel_events(&kallsyms, sb_id) {
            writer.write_event(&ev).map_err(output(data_path))?;
        }
    }
    let existing = match &opts.target {
        Target::Pids(pids) => pids.clone(),
        Target::SystemWide => crate::synth::all_pids(),
        Target::Command(_) => Vec::new(),
    };
    for ev in synthesize_existing(&existing, sb_id) {
        writer.write_event(&ev).map_err(output(data_path))?;
    }
    write_env_features(writer, opts).map_err(output(data_path))
}

/// Copies kcore into `kcore_dir/` with `-k` and the vDSOs into `images/`,
/// then hands the directory to the sudo user. Returns the vDSOs saved;
/// what could not be copied goes to `warnings`.
fn capture_images(
    dir: &OutDir,
    kernel: bool,
    opened: &target::Opened,
    warnings: &Mutex<Vec<String>>,
) -> Result<Vec<capture::Saved>, Error> {
    if kernel {
        let w = capture::copy_kcore(&dir.subdir("kcore_dir")?)?;
        warnings.lock().unwrap_or_else(|e| e.into_inner()).extend(w);
    }
    let images = dir.subdir("images")?;
    let (vdsos, w) = capture::capture_vdsos(&images, &opened.pids);
    warnings.lock().unwrap_or_else(|e| e.into_inner()).extend(w);
    // Under sudo, hand over what exists now (data, images, kcore_dir): a
    // ptrec killed from here on leaves nothing the user cannot remove.
    dir.chown_to_sudo_user()?;
    Ok(vdsos)
}

/// When the trace file is finished: copies the files `seen` mapped into
/// `sysroot` (with `--archive`), and writes the BUILD_ID feature of those and
/// the `vdsos`.
fn archive_and_write_build_ids_at_finish(
    writer: &mut TraceWriter,
    sysroot: Option<PathBuf>,
    vdsos: Vec<capture::Saved>,
    seen: &Arc<Mutex<MappedFiles>>,
    warnings: &Arc<Mutex<Vec<String>>>,
    pids: &[i32],
) {
    let (seen, warnings, pids) = (seen.clone(), warnings.clone(), pids.to_vec());
    writer.on_finish(Box::new(move |w: &mut TraceWriter| {
        let mut saved = vdsos;
        if let Some(sysroot) = sysroot {
            let seen = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let (copies, warns) = capture::archive(&sysroot, &pids, &seen);
            saved.extend(copies);
            warnings
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(warns);
        }
        let entries = capture::build_id_entries(&saved);
        if !entries.is_empty() {
            w.set_feature(feat::BUILD_ID, feature::encode_build_ids(&entries)?)?;
        }
        Ok(())
    }));
}

/// The session over the opened rings, writing to `writer`; with `--archive`
/// it notes each file an MMAP record names in `seen`.
fn new_session(
    opts: &RecordOptions,
    opened: &mut target::Opened,
    writer: TraceWriter,
    seen: &Arc<Mutex<MappedFiles>>,
    progress: Option<ProgressFn>,
) -> Session {
    let cfg = SessionConfig {
        mode: opts.mode,
        max_snapshots: opts.max_snapshots,
        duration: opts.duration,
        ..SessionConfig::default()
    };
    let buffers = std::mem::take(&mut opened.buffers);
    let mut session = Session::new(buffers, writer, cfg);
    if opts.archive {
        let attrs = opened.attrs.clone();
        let seen = seen.clone();
        session = session.with_data_observer(Box::new(move |_, bytes| {
            let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            for raw in sideband::parse::ring_records(bytes).flatten() {
                if let Ok(Event {
                    record: Record::Mmap(m),
                    ..
                }) = sideband::parse::parse_event_le(&attrs, &raw)
                {
                    let id = match m.file_id {
                        Some(FileId::BuildId(b)) => Some(b),
                        _ => None,
                    };
                    seen.entry(m.filename).or_insert(id);
                }
            }
        }));
    }
    if let Some(p) = progress {
        session = session.with_progress(p);
    }
    session
}

/// Sets a `--trigger` breakpoint at `addr` in thread `tid`; the thread
/// returned forwards its hits to `stop` as snapshots until `done`.
fn spawn_trigger(
    tid: i32,
    addr: u64,
    stop: &StopSignal,
    done: &Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>, Error> {
    let bp = crate::trigger::Breakpoint::open(tid, addr).map_err(|e| {
        Error::from_open(
            format!("setting the --trigger breakpoint at {addr:#x} in thread {tid}"),
            Some(tid),
            e,
        )
    })?;
    let handle = bp.forward(stop.clone(), done.clone());
    Ok(std::thread::spawn(move || {
        let _ = handle.join();
    }))
}

/// A `--trigger` symbol in a command stopped at its exec: runs it to its
/// entry point (the loader has then mapped its libraries), resolves the
/// symbol there, sets the breakpoint, and lets it go. On failure it does not
/// run on.
fn set_trigger_after_exec(
    child: &mut sys::HeldChild,
    spec: &str,
    stop: &StopSignal,
    done: &Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>, Error> {
    let pid = child.pid;
    let set = run_to_entry(child)
        .and_then(|()| target::resolve_trigger(pid, spec))
        .and_then(|addr| spawn_trigger(pid, addr, stop, done));
    if set.is_err() {
        let _ = sys::kill(pid, libc::SIGKILL);
    }
    let detached = child.detach();
    let handle = set?;
    detached.map_err(|source| Error::Open {
        what: format!("detaching from the command (pid {pid})"),
        source,
    })?;
    Ok(handle)
}

/// The thread that tells `stop` when the targets have exited: it waits for
/// the command (its exit code into `status`), or polls the `-p` processes
/// until `done`. `None` when there is nothing to watch (`-a`).
fn spawn_exit_watcher(
    child_pid: Option<i32>,
    pids: &[i32],
    stop: &StopSignal,
    done: &Arc<AtomicBool>,
    status: &Arc<Mutex<Option<i32>>>,
) -> Option<std::thread::JoinHandle<()>> {
    match child_pid {
        Some(pid) => {
            let (stop, status) = (stop.clone(), status.clone());
            Some(std::thread::spawn(move || {
                let code = sys::wait_child(pid).ok();
                *status.lock().unwrap_or_else(|e| e.into_inner()) = code;
                stop.targets_exited();
            }))
        }
        None if !pids.is_empty() => {
            let (stop, done, pids) = (stop.clone(), done.clone(), pids.to_vec());
            Some(std::thread::spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    if pids.iter().all(|&p| {
                        sys::kill(p, 0).is_err_and(|e| e.raw_os_error() == Some(libc::ESRCH))
                    }) {
                        stop.targets_exited();
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }))
        }
        None => None,
    }
}

/// Runs the session to its end, then ends what ran beside it: the command
/// (SIGTERM, unless it exited first) and the watcher `threads`, joined.
fn run_session(
    session: Session,
    stop: &StopSignal,
    done: &AtomicBool,
    child_pid: Option<i32>,
    threads: Vec<std::thread::JoinHandle<()>>,
    data_path: &std::path::Path,
) -> Result<Report, Error> {
    let run = session.run(stop);
    done.store(true, Ordering::SeqCst);
    if let Some(pid) = child_pid {
        // The session ended before the command (stop request, duration):
        // the command does not outlive its recording.
        if stop.stop_reason() != Some(StopReason::TargetsExited) {
            let _ = sys::kill(pid, libc::SIGTERM);
        }
    }
    for t in threads {
        let _ = t.join();
    }
    run.map_err(|e| match e {
        SessionError::Output { .. } => Error::Output {
            path: data_path.to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        },
        other => Error::Open {
            what: "recording".into(),
            source: std::io::Error::other(other.to_string()),
        },
    })
}

/// Runs a command stopped at its exec up to its entry point (AT_ENTRY).
fn run_to_entry(child: &mut sys::HeldChild) -> Result<(), Error> {
    let pid = child.pid;
    let auxv_path = format!("/proc/{pid}/auxv");
    let auxv = std::fs::read(&auxv_path).map_err(|source| Error::Open {
        what: format!("reading {auxv_path} for --trigger"),
        source,
    })?;
    let entry = target::auxv_entry(&auxv).ok_or_else(|| Error::Open {
        what: format!("reading {auxv_path} for --trigger"),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, "no AT_ENTRY"),
    })?;
    #[cfg(target_arch = "x86_64")]
    let ran = child.run_to(entry);
    #[cfg(not(target_arch = "x86_64"))]
    let ran: std::io::Result<()> = Err(std::io::Error::other(format!(
        "--trigger SYMBOL with a command is x86-64 only; give 0xADDR (entry {entry:#x})"
    )));
    ran.map_err(|source| Error::Open {
        what: format!("running the command (pid {pid}) to its entry point {entry:#x}"),
        source,
    })
}

/// Where `--trigger` breakpoints go: every thread of each `-p` process at
/// the symbol's address there; a command's absolute address on the
/// command (a command's symbol is resolved after its exec, see
/// [`run_to_entry`]).
fn trigger_points(
    target: &Target,
    opened: &target::Opened,
    spec: &str,
) -> Result<Vec<(i32, u64)>, Error> {
    let mut out = Vec::new();
    match target {
        Target::Pids(pids) => {
            for &pid in pids {
                let addr = target::resolve_trigger(pid, spec)?;
                for tid in target::threads_of(pid)? {
                    out.push((tid, addr));
                }
            }
        }
        Target::Command(_) if spec.starts_with("0x") => {
            let addr = target::resolve_trigger(0, spec)?;
            out.extend(opened.pids.iter().map(|&p| (p, addr)));
        }
        _ => {
            return Err(Error::Usage(
                "--trigger SYMBOL needs -p PID (a command's symbols are placed at its exec); \
                 with a command give an absolute 0xADDR"
                    .into(),
            ))
        }
    }
    Ok(out)
}

/// COMM and MMAP2 records for the threads and executable mappings that
/// existed before recording (perf's `perf_event__synthesize_thread_map`),
/// without which a running process's code could not be found.
pub fn synthesize_existing(pids: &[i32], sideband_id: Option<u64>) -> Vec<Event<'static>> {
    let mut out = Vec::new();
    for &pid in pids {
        let Ok(tids) = target::threads_of(pid) else {
            continue;
        };
        let sid = |tid: i32| SampleId {
            pid: Some(pid as u32),
            tid: Some(tid as u32),
            time: Some(0),
            cpu: Some(0),
            identifier: sideband_id,
            ..Default::default()
        };
        for &tid in &tids {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                .map(|s| s.trim_end().to_string())
                .unwrap_or_default();
            out.push(Event {
                misc: misc::USER,
                record: Record::Comm {
                    pid: pid as u32,
                    tid: tid as u32,
                    comm,
                },
                sample_id: sid(tid),
            });
        }
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            continue;
        };
        for m in capture::parse_maps(&maps) {
            if !m.perms.contains('x') || (!m.path.starts_with('/') && m.path != "[vdso]") {
                continue;
            }
            let (maj, min) = m.dev;
            out.push(Event {
                misc: misc::USER,
                record: Record::Mmap(Mmap {
                    pid: pid as u32,
                    tid: pid as u32,
                    addr: m.start,
                    len: m.end - m.start,
                    pgoff: m.offset,
                    file_id: Some(FileId::Inode {
                        maj,
                        min,
                        ino: m.inode,
                        ino_generation: 0,
                    }),
                    prot: Some(prot_bits(&m.perms)),
                    flags: Some(if m.perms.contains('p') {
                        libc::MAP_PRIVATE
                    } else {
                        libc::MAP_SHARED
                    } as u32),
                    filename: m.path.clone(),
                }),
                sample_id: sid(pid),
            });
        }
    }
    out
}

fn prot_bits(perms: &str) -> u32 {
    let mut p = 0;
    for (c, bit) in [
        ('r', libc::PROT_READ),
        ('w', libc::PROT_WRITE),
        ('x', libc::PROT_EXEC),
    ] {
        if perms.contains(c) {
            p |= bit;
        }
    }
    p as u32
}

/// HOSTNAME, OSRELEASE, ARCH, NRCPUS, CPUDESC, CPUID and CMDLINE, as perf
/// writes them (perf's Intel PT decoder reads the cpuid for errata).
fn write_env_features(w: &mut TraceWriter, opts: &RecordOptions) -> Result<(), sideband::Error> {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    w.set_feature(
        feat::HOSTNAME,
        feature::encode_string(&read("/proc/sys/kernel/hostname")),
    )?;
    w.set_feature(
        feat::OSRELEASE,
        feature::encode_string(&read("/proc/sys/kernel/osrelease")),
    )?;
    w.set_feature(feat::ARCH, feature::encode_string(std::env::consts::ARCH))?;
    let online = crate::sideband_capture::online_cpus()
        .map(|c| c.len() as u32)
        .unwrap_or(1);
    w.set_feature(
        feat::NRCPUS,
        feature::encode_nrcpus(feature::NrCpus {
            available: online,
            online,
        }),
    )?;
    let cpuinfo = read("/proc/cpuinfo");
    let field = |k: &str| {
        cpuinfo.lines().find_map(|l| {
            let (a, b) = l.split_once(':')?;
            (a.trim() == k).then(|| b.trim().to_string())
        })
    };
    if let Some(model) = field("model name") {
        w.set_feature(feat::CPUDESC, feature::encode_string(&model))?;
    }
    if let (Some(v), Some(f), Some(m), Some(s)) = (
        field("vendor_id"),
        field("cpu family"),
        field("model"),
        field("stepping"),
    ) {
        w.set_feature(
            feat::CPUID,
            feature::encode_string(&format!("{v},{f},{m},{s}")),
        )?;
    }
    if !opts.cmdline.is_empty() {
        w.set_feature(feat::CMDLINE, feature::encode_cmdline(&opts.cmdline))?;
    }
    Ok(())
}

/// `--control fifo:CTL[,ACK]`: perf's commands `snapshot`, `enable`,
/// `disable`, `stop` and `ping`, one per line; each is acknowledged with
/// `ack\n` on ACK when given.
fn spawn_control(
    ctl: PathBuf,
    ack: Option<PathBuf>,
    stop: StopSignal,
    pt_fds: Vec<Arc<std::os::fd::OwnedFd>>,
    done: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>, Error> {
    let open_err = |p: &PathBuf| {
        let p = p.clone();
        move |source| Error::Open {
            what: format!("opening the control fifo {}", p.display()),
            source,
        }
    };
    // Read-write and non-blocking, as perf opens it: no EOF when writers
    // come and go, and the thread can notice the end of the recording.
    let mut ctl_file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&ctl)
        .map_err(open_err(&ctl))?;
    let mut ack_file = match &ack {
        Some(a) => Some(
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(a)
                .map_err(open_err(a))?,
        ),
        None => None,
    };
    // FIFOs only, as perf's: /dev/zero was read without end (a growing
    // line, 40% of a CPU), a regular file polled for ever.
    for (path, f) in std::iter::once((&ctl, &ctl_file)).chain(ack.iter().zip(ack_file.iter())) {
        use std::os::unix::fs::FileTypeExt;
        let fifo = f.metadata().is_ok_and(|m| m.file_type().is_fifo());
        if !fifo {
            return Err(Error::Usage(format!(
                "--control: {} is not a FIFO; make one with mkfifo (as for perf record --control)",
                path.display()
            )));
        }
    }
    Ok(std::thread::spawn(move || {
        let mut pending = Vec::new();
        let mut buf = [0u8; 256];
        while !done.load(Ordering::SeqCst) {
            match ctl_file.read(&mut buf) {
                Ok(n) if n > 0 => {
                    pending.extend_from_slice(&buf[..n]);
                    // No command is this long: a line without end is
                    // dropped, not held.
                    if pending.len() > 4096 && !pending.contains(&b'\n') {
                        pending.clear();
                    }
                }
                _ => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            }
            while let Some(nl) = pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = pending.drain(..=nl).collect();
                let cmd = String::from_utf8_lossy(&line).trim().to_string();
                match cmd.as_str() {
                    "snapshot" => stop.request_snapshot(),
                    "stop" => stop.stop(StopReason::Requested),
                    "enable" | "disable" => {
                        let op = if cmd == "enable" { Ioctl::Enable } else { Ioctl::Disable };
                        for fd in &pt_fds {
                            let _ = sys::ioctl(fd, op);
                        }
                    }
                    "ping" | "" => {}
                    other => sideband::say!("ptrec: unknown control command {other:?} (snapshot, enable, disable, stop, ping)"),
                }
                if let Some(a) = &mut ack_file {
                    let _ = a.write_all(b"ack\n");
                }
            }
        }
    }))
}

/// Forwards the signal counters of [`sys::signals`] to `stop` until `done`:
/// SIGINT/SIGTERM/SIGHUP stop, SIGUSR2 takes a snapshot (as perf record).
pub fn spawn_signal_forwarder(
    stop: StopSignal,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut snaps = sys::signals::SNAPSHOT.load(Ordering::SeqCst);
        while !done.load(Ordering::SeqCst) {
            if sys::signals::STOP.load(Ordering::SeqCst) > 0 {
                stop.stop(StopReason::Requested);
            }
            let now = sys::signals::SNAPSHOT.load(Ordering::SeqCst);
            for _ in snaps..now {
                stop.request_snapshot();
            }
            snaps = now;
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}
