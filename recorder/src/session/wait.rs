//! Waiting between drain passes, pluggable so that simulated buffers (no
//! fds) can be woken by their producer the way poll(2) is woken by the
//! kernel when a ring crosses its watermark.

use std::io;
use std::time::Duration;

use super::Buffer;
use crate::sys;

/// Blocks the drain thread until a buffer may hold new data.
pub trait Waiter: Send {
    /// Returns when a buffer crossed its watermark, or after `timeout`.
    fn wait(&mut self, buffers: &[Buffer], timeout: Duration) -> io::Result<()>;
}

/// Sleeps the whole timeout.
#[derive(Debug, Default, Clone, Copy)]
pub struct SleepWaiter;

impl Waiter for SleepWaiter {
    fn wait(&mut self, _buffers: &[Buffer], timeout: Duration) -> io::Result<()> {
        std::thread::sleep(timeout);
        Ok(())
    }
}

/// poll(2) on every buffer's fd; falls back to sleeping when none has one
/// or when every fd hung up (its task exited: the caller ends the session).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PollWaiter;

impl Waiter for PollWaiter {
    fn wait(&mut self, buffers: &[Buffer], timeout: Duration) -> io::Result<()> {
        let fds: Vec<_> = buffers.iter().filter_map(|b| b.control.poll_fd()).collect();
        if fds.is_empty() {
            std::thread::sleep(timeout);
            return Ok(());
        }
        let revents = sys::poll_in(&fds, timeout)?;
        let hup = libc::POLLHUP | libc::POLLERR;
        if revents.iter().all(|r| r & hup != 0) {
            // poll would return at once forever: sleep instead.
            std::thread::sleep(timeout);
        }
        Ok(())
    }
}
