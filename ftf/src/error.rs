//! The crate's one error type, shared by the writer (I/O, argument limits) and
//! the reader (malformed input, always with the byte offset of the record).

/// What went wrong writing or reading an FTF file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The sink refused bytes, or flushing it failed.
    #[error("cannot write the FTF output: {0}")]
    Io(#[from] std::io::Error),

    /// An event or kernel object was given more arguments than a record holds.
    #[error("{count} arguments given but an FTF record holds at most 15; drop some")]
    TooManyArgs {
        /// Number of arguments passed.
        count: usize,
    },

    /// Every table slot was pinned by the record being written (cannot happen
    /// with at most 15 arguments; kept so the writer never panics).
    #[error("no free {table} table slot for one record")]
    TableExhausted {
        /// `"string"` or `"thread"`.
        table: &'static str,
    },

    /// Reading the input failed (not its contents: the file or stream).
    #[error("cannot read the FTF input: {0}")]
    Read(std::io::Error),

    /// The input is not well-formed FTF.
    #[error("malformed FTF {record} record at byte offset {offset:#x}: {reason}")]
    Malformed {
        /// Byte offset of the record (or of the truncated header) in the input.
        offset: usize,
        /// Which record kind was being read (`"header"` before the type is known).
        record: &'static str,
        /// What was wrong with it.
        reason: String,
    },
}
