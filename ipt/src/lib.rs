//! libipt 2.2, vendored in `vendor/libipt` and built from source by
//! build.rs, with a thin safe wrapper over the parts ptdec and ptsim use:
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
//! The FFI declarations ([`ffi`]) are bindgen output committed to the
//! repository (exact struct layouts checked at compile time, no libclang
//! needed to build).
//!
//! # Unsafe code
//!
//! The crate denies unsafe code except in its two modules that exist for
//! it: [`ffi`] (the bindgen declarations) and `wrapper` (the safe API over
//! them, re-exported here; every unsafe block says why it is sound).
#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod ffi;
#[allow(unsafe_code)]
mod wrapper;

pub use wrapper::*;
