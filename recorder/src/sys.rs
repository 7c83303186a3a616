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
