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

/// An error and its causes as one line for a binary's `main`, leaving out a
/// cause whose text the line already holds (many errors here repeat their
/// source in their own message, and `{:#}` would print it twice).
pub fn display_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = c.source();
    }
    line
}

#[cfg(test)]
mod chain_tests {
    use super::display_chain;

    #[derive(Debug)]
    struct E(&'static str, Option<Box<E>>);
    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for E {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    #[test]
    fn repeated_causes_are_left_out() {
        let e = E(
            "cannot read x: no such file",
            Some(Box::new(E(
                "no such file",
                Some(Box::new(E("errno 2", None))),
            ))),
        );
        assert_eq!(display_chain(&e), "cannot read x: no such file: errno 2");
    }
}
