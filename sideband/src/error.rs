//! The crate's error type: which structure could not be read or written, and
//! where (file offsets; for pipe streams, offsets from the stream start).

/// An error reading or writing perf's formats.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input does not start with perf.data's magic ("PERFILE2" in either byte order).
    #[error("not a perf.data file or stream: magic is {magic:#018x}, expected \"PERFILE2\"")]
    BadMagic { magic: u64 },
    /// The perf.data file header (offset 0) is truncated or inconsistent.
    #[error("perf.data header: {what}")]
    Header { what: String },
    /// An attr entry of the attrs section (or its ids) could not be read.
    #[error("attr #{index} at offset {offset:#x}: {what}")]
    Attr {
        index: usize,
        offset: u64,
        what: String,
    },
    /// A record's bytes do not match its type or declared size.
    #[error("{kind} record at offset {offset:#x}: {what}")]
    Record {
        offset: u64,
        kind: &'static str,
        what: String,
    },
    /// A feature section (file mode) or HEADER_FEATURE record could not be read.
    #[error("feature {feature} section at offset {offset:#x}: {what}")]
    Feature {
        feature: &'static str,
        offset: u64,
        what: String,
    },
    /// A value cannot be written in perf's format (too large for its field, no matching attr, ...).
    #[error("cannot write {kind}: {what}")]
    Unwritable { kind: &'static str, what: String },
    /// The output could not be written.
    #[error("writing perf.data: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    pub(crate) fn record(offset: u64, kind: u32, what: impl Into<String>) -> Self {
        Error::Record {
            offset,
            kind: crate::record::kind::name(kind),
            what: what.into(),
        }
    }

    pub(crate) fn unwritable(kind: &'static str, what: impl Into<String>) -> Self {
        Error::Unwritable {
            kind,
            what: what.into(),
        }
    }
}
