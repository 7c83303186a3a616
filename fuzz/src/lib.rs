//! Shared code of the fuzz targets.

pub mod harness;
