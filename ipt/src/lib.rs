//! Intel's libipt (≥ 2.1.2; fetched by `scripts/setup` from Debian's source
//! package, or the user's own, see build.rs) with a thin safe wrapper over
//! the parts ptdec and ptsim use:
//! the block decoder (ptdec), the packet encoder and the packet, query and
//! instruction decoders (ptsim and its tests), images and the image section
//! cache, and the decoder configuration (CPU errata, timing, filters).
//!
//! Why our own wrapper and not libipt-rs: libipt-rs 0.4 is built on libipt
//! 2.1.2, its accessors panic on event types and instruction classes newer
//! libipt reports, it leaks a boxed callback per decoder, and its block
//! decoder drops the block `pt_blk_next` filled in before an error. Here
//! [`BlockDecoder::next_block`] returns the block *and* the status, events and
//! instruction classes are plain values (an unknown one is [`EventKind::Other`],
//! never a panic), and the only callback (image memory) is owned by what it
//! is installed on and freed with it.
//!
//! The FFI declarations ([`ffi`]) are generated at build time by bindgen
//! from the header of the libipt being built, with bindgen's layout tests
//! (every struct's size and field offsets against the C compiler's). What
//! libipt 2.2 added (TRIG, software-interrupt and syscall events,
//! `pt_blk_resync`) is compiled only with `cfg(libipt_2_2)`, which build.rs
//! sets from the version it found.
//!
//! # Unsafe code
//!
//! The crate denies unsafe code except in its two modules that exist for
//! it: [`ffi`] (the bindgen declarations) and `wrapper` (the safe API over
//! them, re-exported here; every unsafe block says why it is sound).
#![deny(unsafe_code)]

/// libipt's C API, as bindgen reads it from `intel-pt.h` at build time.
#[allow(
    unsafe_code,
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]
pub mod ffi {
    include!(concat!(env!("OUT_DIR"), "/ffi.rs"));
}

/// The libipt this crate was built against, e.g. "libipt 2.1.2 (DIR)":
/// its version and where it came from.
pub const BUILT_WITH: &str = env!("LIBIPT_BUILT_WITH");
#[allow(unsafe_code)]
mod wrapper;

pub use wrapper::*;
