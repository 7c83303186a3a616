//! ptrec, the library half: everything the `ptrec` binary does, and the
//! sideband capture that `ptsim` shares with it. Unsafe code lives only in
//! [`sys`] (syscalls, mappings) and [`ring`] (volatile ring access).

pub mod capture;
pub mod config;
pub mod errors;
pub mod filter;
pub mod outdir;
pub mod pmu;
pub mod record;
pub mod ring;
pub mod session;
pub mod sideband_capture;
pub mod synth;
pub mod sys;
pub mod target;
pub mod trigger;
