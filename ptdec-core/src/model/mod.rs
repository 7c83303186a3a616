//! The contracts between ptdec's stages, in one place: what each stage
//! hands the next, and the traits a stage implements to take it. The
//! source stage hands the decode stage an opened trace and its images, or
//! raw PT and its sideband, through the traits of [`source`]. The decode
//! stage (`crate::decode`) turns trace bytes into [`ops::Op`]s per thread
//! and hands them to an [`ops::OpSink`]; what its workers build ahead for
//! a later stage travels with a run as an opaque [`ops::Ahead`] (made by a
//! [`ops::Prepare`] the later stage gives). The stages depend on this
//! module and on the libraries below it, not on each other.

pub mod ops;
pub mod slices;
pub mod source;
