//! The drain loop (caller's thread) and the writer thread.

use super::{Session, SessionError, StopSignal, Report};

pub(super) fn run(_s: Session, _stop: &StopSignal) -> Result<Report, SessionError> {
    Err(SessionError::Panic("unimplemented drain"))
}
