//! ptrec, the library half: everything the `ptrec` binary does, and the
//! sideband capture that `ptsim` shares with it. Unsafe code is denied
//! except in [`sys`] (syscalls, mappings, the held child) and [`ring`]
//! (volatile access to the shared ring pages).
#![deny(unsafe_code)]

pub mod capture;
pub mod config;
pub mod errors;
pub mod filter;
pub mod outdir;
pub mod pmu;
pub mod record;
#[allow(unsafe_code)]
pub mod ring;
pub mod session;
pub mod sideband_capture;
pub mod synth;
#[allow(unsafe_code)]
pub mod sys;
pub mod target;
pub mod trigger;
