//! Snapshot triggers from hardware breakpoints: an execute breakpoint
//! (PERF_TYPE_BREAKPOINT, HW_BREAKPOINT_X) on a function of the target
//! samples on every hit (period 1, woken per sample); each SAMPLE in its
//! DATA ring becomes one snapshot request on the session's [`StopSignal`].
//! Breakpoints work in VMs, unlike Intel PT, so this path is tested for real.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use perf_event_open_sys::bindings as b;
use sideband::record::kind;

use crate::ring::Ring;
use crate::session::StopSignal;
use crate::sys::{self, perf_event_attr, Ioctl, Mapping};

/// HW_BREAKPOINT_X from `linux/hw_breakpoint.h`.
const HW_BREAKPOINT_X: u32 = 4;

/// DATA pages of the breakpoint's ring (plus the metadata page).
const DATA_PAGES: usize = 8;

/// The attr of an execute breakpoint at `addr` in user space.
pub fn breakpoint_attr(addr: u64) -> perf_event_attr {
    let mut attr = perf_event_attr {
        type_: b::PERF_TYPE_BREAKPOINT,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        sample_type: (b::PERF_SAMPLE_IP | b::PERF_SAMPLE_TID | b::PERF_SAMPLE_TIME) as u64,
        bp_type: HW_BREAKPOINT_X,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = 1;
    attr.__bindgen_anon_2.wakeup_events = 1;
    attr.__bindgen_anon_3.bp_addr = addr;
    attr.__bindgen_anon_4.bp_len = std::mem::size_of::<libc::c_long>() as u64;
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    attr.set_disabled(1);
    attr
}

/// An execute breakpoint on one task and the ring its hits land in.
#[derive(Debug)]
pub struct Breakpoint {
    fd: OwnedFd,
    ring: Ring,
    hits: u64,
}

impl Breakpoint {
    /// Opens (enabled) a breakpoint at `addr` in task `pid`, following it
    /// on every CPU.
    pub fn open(pid: i32, addr: u64) -> io::Result<Breakpoint> {
        let fd = sys::perf_event_open(&breakpoint_attr(addr), pid, -1, None)?;
        let len = (1 + DATA_PAGES) * sys::page_size();
        let base = Mapping::map(&fd, 0, len, true)?;
        let ring = Ring::from_mappings(base, None).map_err(io::Error::other)?;
        sys::ioctl(&fd, Ioctl::Enable)?;
        Ok(Breakpoint { fd, ring, hits: 0 })
    }

    /// The event fd (readable on each hit).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Drains the ring; returns the hits (SAMPLE records) since the last call.
    pub fn take_hits(&mut self) -> io::Result<u64> {
        let mut bytes = Vec::new();
        self.ring.drain_data(&mut bytes).map_err(io::Error::other)?;
        let mut n = 0;
        for rec in sideband::parse::ring_records(&bytes) {
            let rec = rec.map_err(io::Error::other)?;
            if rec.header.kind == kind::SAMPLE {
                n += 1;
            }
        }
        self.hits += n;
        Ok(n)
    }

    /// Hits seen so far.
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// Forwards every hit to `stop` as a snapshot request, on a thread that
    /// polls the fd, until `until` is set (then after one last drain, so no
    /// hit before it is missed). Returns the total hits.
    pub fn forward(
        mut self,
        stop: StopSignal,
        until: Arc<AtomicBool>,
    ) -> thread::JoinHandle<io::Result<u64>> {
        thread::spawn(move || loop {
            let ended = until.load(Ordering::SeqCst);
            sys::poll_in(&[self.fd()], Duration::from_millis(10))?;
            for _ in 0..self.take_hits()? {
                stop.request_snapshot();
            }
            if ended {
                return Ok(self.hits);
            }
        })
    }
}
