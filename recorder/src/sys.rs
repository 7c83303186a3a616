//! The unsafe room: raw `perf_event_open`, its ioctls, and the shared mappings
//! of the DATA and AUX rings. Everything else in the recorder is safe code over
//! what this module hands out.
//!
//! Errors are made in one place ([`check`]): a `-1` becomes
//! `io::Error::last_os_error()`. File descriptors are `OwnedFd`, closed on drop.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

use perf_event_open_sys as sys;
pub use sys::bindings::{perf_event_attr, perf_event_mmap_page};

/// Turns a C-style `-1` return into the errno it left.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Opens a perf event (`perf_event_open(2)`) with `PERF_FLAG_FD_CLOEXEC`.
/// `pid` -1 with a `cpu` is per-cpu; a `pid` with `cpu` -1 follows that task.
pub fn perf_event_open(
    attr: &perf_event_attr,
    pid: i32,
    cpu: i32,
    group: Option<&OwnedFd>,
) -> io::Result<OwnedFd> {
    let mut attr = *attr;
    attr.size = std::mem::size_of::<perf_event_attr>() as u32;
    let group_fd = group.map_or(-1, |g| g.as_raw_fd());
    // SAFETY: `attr` is a fully initialized perf_event_attr on our stack whose
    // size field matches its type; the kernel may write the expected size back
    // into it, which is why it is a private mutable copy.
    let fd = check(unsafe {
        sys::perf_event_open(
            &mut attr,
            pid,
            cpu,
            group_fd,
            sys::bindings::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    })?;
    // SAFETY: the syscall just returned this fd to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The ioctls the recorder uses on an event fd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ioctl {
    Enable,
    Disable,
    /// PERF_EVENT_IOC_PAUSE_OUTPUT(1): stop writing to the ring buffer.
    Pause,
    /// PERF_EVENT_IOC_PAUSE_OUTPUT(0).
    Resume,
    /// PERF_EVENT_IOC_SET_OUTPUT(target): send this event's records to another event's ring.
    SetOutput(i32),
}

/// Issues `op` on `fd`.
pub fn ioctl(fd: &OwnedFd, op: Ioctl) -> io::Result<()> {
    let fd = fd.as_raw_fd();
    // SAFETY: `fd` is a live perf event fd borrowed for the call; each ioctl
    // takes an integer argument, no pointers.
    let ret = unsafe {
        match op {
            Ioctl::Enable => sys::ioctls::ENABLE(fd, 0),
            Ioctl::Disable => sys::ioctls::DISABLE(fd, 0),
            Ioctl::Pause => sys::ioctls::PAUSE_OUTPUT(fd, 1),
            Ioctl::Resume => sys::ioctls::PAUSE_OUTPUT(fd, 0),
            Ioctl::SetOutput(target) => sys::ioctls::SET_OUTPUT(fd, target),
        }
    };
    check(ret).map(drop)
}

/// Sets an address filter string on an intel_pt event
/// (PERF_EVENT_IOC_SET_FILTER; the kernel's syntax, see `crate::filter`).
pub fn set_filter(fd: &OwnedFd, filter: &std::ffi::CStr) -> io::Result<()> {
    // The kernel copies the string (strndup_user) and never writes it, but
    // the binding takes `*mut`: hand it a private copy.
    let mut bytes = filter.to_bytes_with_nul().to_vec();
    // SAFETY: `fd` is a live perf event fd; the pointer is to our NUL-terminated
    // buffer, alive for the call.
    check(unsafe { sys::ioctls::SET_FILTER(fd.as_raw_fd(), bytes.as_mut_ptr().cast()) }).map(drop)
}

/// The kernel's id of an event (PERF_EVENT_IOC_ID): the value records carry
/// in their IDENTIFIER / ID sample fields.
pub fn event_id(fd: &OwnedFd) -> io::Result<u64> {
    let mut id = 0u64;
    // SAFETY: `fd` is a live perf event fd; the kernel writes one u64 through
    // the pointer, which points to our local.
    check(unsafe { sys::ioctls::ID(fd.as_raw_fd(), &mut id) })?;
    Ok(id)
}

/// The bytes of an attr as the kernel and perf.data lay it out.
pub fn attr_bytes(attr: &perf_event_attr) -> Vec<u8> {
    let len = std::mem::size_of::<perf_event_attr>();
    // SAFETY: perf_event_attr is a repr(C) plain-data struct of `len` bytes
    // with no padding holes the kernel does not define (bindgen asserts the
    // layout); we copy it out byte for byte.
    unsafe { std::slice::from_raw_parts((attr as *const perf_event_attr).cast::<u8>(), len) }
        .to_vec()
}

/// A shared mapping of part of a perf event fd, unmapped on drop.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; all access to it goes through
// volatile loads/stores and fences in ring.rs, which is the protocol the
// kernel defines for concurrent access. Moving the owner between threads is fine.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` at `offset` (`MAP_SHARED`), read-write or read-only.
    pub fn map(fd: &OwnedFd, offset: u64, len: usize, writable: bool) -> io::Result<Mapping> {
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "mmap offset too large"))?;
        // SAFETY: a fresh mapping chosen by the kernel (addr NULL), of a fd we
        // borrow for the call; the result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                offset,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned NULL"))?;
        Ok(Mapping { ptr, len })
    }

    /// Start of the mapping.
    pub fn as_ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never, for a successful map).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned and nothing
        // borrows the memory past the owner's lifetime (rings borrow `self`).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).unwrap_or(4096)
}

/// poll(2) for POLLIN on `fds` for up to `timeout`; returns each fd's
/// revents (all 0 on timeout). EINTR counts as a timeout.
pub fn poll_in(
    fds: &[std::os::fd::BorrowedFd<'_>],
    timeout: std::time::Duration,
) -> io::Result<Vec<i16>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `pfds` is a live array of `pfds.len()` pollfd structs that the
    // kernel reads and writes during the call; the fds are borrowed for it.
    let ret = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    match check(ret) {
        Ok(_) => Ok(pfds.iter().map(|p| p.revents).collect()),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(vec![0; pfds.len()]),
        Err(e) => Err(e),
    }
}

// ---- Setup helpers for ptrec's targets (target.rs, main.rs) ----

/// Tells the kernel where the AUX area goes (`aux_offset`/`aux_size` in the
/// metadata page), which must precede the AUX mmap.
pub fn set_aux_area(base: &Mapping, offset: u64, size: u64) {
    let meta = base.as_ptr().cast::<perf_event_mmap_page>().as_ptr();
    // SAFETY: `base` maps at least the metadata page (a successful map of a
    // perf fd at offset 0); these two fields are written only by user space,
    // before the AUX mmap that reads them.
    unsafe {
        std::ptr::write_volatile(std::ptr::addr_of_mut!((*meta).aux_offset), offset);
        std::ptr::write_volatile(std::ptr::addr_of_mut!((*meta).aux_size), size);
    }
}

/// perf time conversion of the metadata page: `(time_shift, time_mult,
/// time_zero, cap_user_time_zero)`, read under the page's seqlock.
pub fn time_conv(base: &Mapping) -> (u16, u32, u64, bool) {
    let meta = base.as_ptr().cast::<perf_event_mmap_page>().as_ptr();
    loop {
        // SAFETY: as in `set_aux_area`, the page is mapped for `base`'s
        // lifetime; the kernel updates these fields under `lock`, which we
        // read before and after with acquire ordering (its seqlock protocol).
        let (seq, v, seq2) = unsafe {
            let seq = std::ptr::read_volatile(std::ptr::addr_of!((*meta).lock));
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            let caps =
                std::ptr::read_volatile(std::ptr::addr_of!((*meta).__bindgen_anon_1.capabilities));
            let v = (
                std::ptr::read_volatile(std::ptr::addr_of!((*meta).time_shift)),
                std::ptr::read_volatile(std::ptr::addr_of!((*meta).time_mult)),
                std::ptr::read_volatile(std::ptr::addr_of!((*meta).time_zero)),
                // cap_user_time_zero is bit 4 of `capabilities`.
                caps & (1 << 4) != 0,
            );
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            (
                seq,
                v,
                std::ptr::read_volatile(std::ptr::addr_of!((*meta).lock)),
            )
        };
        if seq == seq2 {
            return v;
        }
    }
}

/// Sends `sig` to `pid` (0 tests that the process exists).
pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: kill has no memory-safety preconditions.
    check(unsafe { libc::kill(pid, sig) }).map(drop)
}

/// Waits for child `pid` to end; returns its exit code (128+signal when killed).
pub fn wait_child(pid: i32) -> io::Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid on a pid with a valid pointer to our local.
        match check(unsafe { libc::waitpid(pid, &mut status, 0) }) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
            Ok(_) => break,
        }
    }
    Ok(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        -1
    })
}

/// A forked child held before its exec until [`HeldChild::go`], so that
/// events can be opened on it first (perf record's workload "go pipe").
#[derive(Debug)]
pub struct HeldChild {
    /// The child's pid.
    pub pid: i32,
    go: Option<OwnedFd>,
    exec_err: OwnedFd,
    /// Traced (PTRACE_TRACEME): [`go`](Self::go) returns with the child
    /// stopped right after its exec, until [`detach`](Self::detach).
    traced: bool,
}

fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into our two-element array.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both fds were just created for us and nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

impl HeldChild {
    /// Forks; the child waits for [`go`](Self::go) and then execs `path`
    /// with `argv` (the caller resolved `path` through PATH, so that the child
    /// only makes async-signal-safe calls). If this process dies first, the
    /// child sees the pipe close and exits 127 without running anything.
    ///
    /// With `traced`, the child asks to be traced before its exec, so that
    /// [`go`](Self::go) returns with it stopped at the exec (SIGTRAP): its
    /// code is mapped but none of it has run.
    pub fn spawn(
        path: &std::ffi::CStr,
        argv: &[std::ffi::CString],
        traced: bool,
    ) -> io::Result<HeldChild> {
        let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        let (go_r, go_w) = pipe_cloexec()?;
        let (err_r, err_w) = pipe_cloexec()?;
        // SAFETY: between fork and exec the child calls only async-signal-safe
        // functions (read, execv, write, _exit) on memory prepared before the
        // fork (`ptrs`, `path`, the fds).
        let pid = check(unsafe { libc::fork() })?;
        if pid == 0 {
            // SAFETY: see above. `go_r` stays open in the child only until
            // exec (O_CLOEXEC); a byte or EOF from it releases the child.
            // The child's copies of the parent's ends are closed first: its
            // own `go_w` would keep the pipe open, so the EOF of a parent
            // that died or gave up would never come and the child would
            // wait forever.
            unsafe {
                libc::close(go_w.as_raw_fd());
                libc::close(err_r.as_raw_fd());
                let mut byte = 0u8;
                let n = libc::read(go_r.as_raw_fd(), (&mut byte as *mut u8).cast(), 1);
                if n != 1 {
                    libc::_exit(127);
                }
                if traced {
                    libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0);
                }
                libc::execv(path.as_ptr(), ptrs.as_ptr());
                let errno = *libc::__errno_location();
                libc::write(err_w.as_raw_fd(), (&errno as *const i32).cast(), 4);
                libc::_exit(127);
            }
        }
        drop((go_r, err_w));
        Ok(HeldChild {
            pid,
            go: Some(go_w),
            exec_err: err_r,
            traced,
        })
    }

    /// Lets the child exec; returns the exec error if it failed.
    pub fn go(&mut self) -> io::Result<()> {
        let Some(go) = self.go.take() else {
            return Ok(());
        };
        let byte = 1u8;
        // SAFETY: writing one byte from our local into a pipe fd we own.
        check(unsafe { libc::write(go.as_raw_fd(), (&byte as *const u8).cast(), 1) } as i32)?;
        drop(go);
        let mut errno = 0i32;
        // SAFETY: reading at most 4 bytes into our local i32. EOF (0) means
        // the exec succeeded and closed the CLOEXEC write end.
        let n = unsafe {
            libc::read(
                self.exec_err.as_raw_fd(),
                (&mut errno as *mut i32).cast(),
                4,
            )
        };
        if n == 4 {
            return Err(io::Error::from_raw_os_error(errno));
        }
        if self.traced {
            self.wait_stop(libc::SIGTRAP)?;
        }
        Ok(())
    }

    /// Waits for the traced child to stop with `sig`.
    fn wait_stop(&self, sig: i32) -> io::Result<()> {
        let mut status = 0;
        loop {
            // SAFETY: waitpid on our child with a valid pointer to our local.
            match check(unsafe { libc::waitpid(self.pid, &mut status, 0) }) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
                Ok(_) => break,
            }
        }
        if libc::WIFSTOPPED(status) && libc::WSTOPSIG(status) == sig {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "pid {} did not stop with signal {sig} (wait status {status:#x})",
                self.pid
            )))
        }
    }

    /// Runs the traced, stopped child until it reaches `addr` (e.g. its
    /// entry point, once the dynamic loader has mapped the libraries), with
    /// a one-shot int3 there; it stays stopped at `addr`.
    #[cfg(target_arch = "x86_64")]
    pub fn run_to(&self, addr: u64) -> io::Result<()> {
        let peek = |a: u64| -> io::Result<libc::c_long> {
            // SAFETY: PTRACE_PEEKDATA reads a word of the stopped tracee; the
            // result is in the return value, errors in errno (reset first).
            unsafe {
                *libc::__errno_location() = 0;
                let v = libc::ptrace(libc::PTRACE_PEEKDATA, self.pid, a, 0);
                if v == -1 && *libc::__errno_location() != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(v)
            }
        };
        let poke = |a: u64, v: libc::c_long| -> io::Result<()> {
            // SAFETY: PTRACE_POKEDATA writes a word into the stopped tracee.
            check(unsafe { libc::ptrace(libc::PTRACE_POKEDATA, self.pid, a, v) } as i32).map(drop)
        };
        let orig = peek(addr)?;
        poke(addr, (orig & !0xff) | 0xcc)?;
        // SAFETY: continues the stopped tracee without a signal.
        check(unsafe { libc::ptrace(libc::PTRACE_CONT, self.pid, 0, 0) } as i32)?;
        self.wait_stop(libc::SIGTRAP)?;
        poke(addr, orig)?;
        // SAFETY: a zeroed user_regs_struct is valid; GETREGS/SETREGS read
        // and write it whole for the stopped tracee.
        unsafe {
            let mut regs: libc::user_regs_struct = std::mem::zeroed();
            check(libc::ptrace(libc::PTRACE_GETREGS, self.pid, 0, &mut regs) as i32)?;
            if regs.rip != addr + 1 {
                return Err(io::Error::other(format!(
                    "pid {} stopped at {:#x}, not at {addr:#x}",
                    self.pid, regs.rip
                )));
            }
            regs.rip = addr;
            check(libc::ptrace(libc::PTRACE_SETREGS, self.pid, 0, &regs) as i32)?;
        }
        Ok(())
    }

    /// Lets the traced child run on, untraced.
    pub fn detach(&mut self) -> io::Result<()> {
        if !std::mem::take(&mut self.traced) {
            return Ok(());
        }
        // SAFETY: detaches our stopped tracee, delivering no signal.
        check(unsafe { libc::ptrace(libc::PTRACE_DETACH, self.pid, 0, 0) } as i32).map(drop)
    }
}

/// Signal counters set by the handlers [`install_signal_counters`] installs.
pub mod signals {
    use std::sync::atomic::AtomicU64;
    /// SIGINT + SIGTERM + SIGHUP received.
    pub static STOP: AtomicU64 = AtomicU64::new(0);
    /// SIGUSR2 received.
    pub static SNAPSHOT: AtomicU64 = AtomicU64::new(0);
}

extern "C" fn on_signal(sig: libc::c_int) {
    use std::sync::atomic::Ordering;
    // Only atomics: async-signal-safe.
    if sig == libc::SIGUSR2 {
        signals::SNAPSHOT.fetch_add(1, Ordering::SeqCst);
    } else {
        signals::STOP.fetch_add(1, Ordering::SeqCst);
    }
}

/// Counts SIGINT, SIGTERM, SIGHUP (stop) and SIGUSR2 (snapshot) in
/// [`signals`] instead of letting them end the process.
pub fn install_signal_counters() -> io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGUSR2] {
        // SAFETY: a zeroed sigaction is valid; the handler only touches
        // atomics (async-signal-safe) and SA_RESTART keeps syscalls going.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            check(libc::sigaction(sig, &sa, std::ptr::null_mut()))?;
        }
    }
    Ok(())
}

/// The time stamp counter (perf's `reference` of AUXTRACE records on x86);
/// 0 elsewhere.
pub fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no memory effects; every x86_64 CPU has it.
        unsafe { std::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// Renames `a` to `b` unless `b` exists (`renameat2(RENAME_NOREPLACE)`:
/// EEXIST then, where `rename(2)` would replace an empty folder or a
/// file). Fails with EINVAL on file systems that cannot say.
pub fn rename_noreplace(a: &std::path::Path, b: &std::path::Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let ca = std::ffi::CString::new(a.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let cb = std::ffi::CString::new(b.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: both paths are NUL-terminated C strings that outlive the call;
    // AT_FDCWD resolves them as rename(2) would.
    check(unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    })
    .map(|_| ())
}

/// Swaps two paths atomically (`renameat2(RENAME_EXCHANGE)`): both must
/// exist; afterwards each name refers to what the other did. Fails with
/// EINVAL on file systems that cannot exchange.
pub fn rename_exchange(a: &std::path::Path, b: &std::path::Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let ca = std::ffi::CString::new(a.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let cb = std::ffi::CString::new(b.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: both paths are NUL-terminated C strings that outlive the call;
    // AT_FDCWD resolves them as rename(2) would.
    check(unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    })
    .map(|_| ())
}
