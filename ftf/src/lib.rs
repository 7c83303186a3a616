//! Fuchsia Trace Format (FTF) writer and reader. Knows nothing about Intel PT:
//! `ptdec` feeds [`Writer`] processes, threads, slices and instants; the
//! [`read`] module parses any FTF file back into records and a text dump for
//! golden tests and for `ptdec` to inspect its own output.
//!
//! Write a small trace that Perfetto opens (ui.perfetto.dev, "Open trace
//! file"), then read it back:
//!
//! ```
//! use ftf::read::{EventKind, RecordKind};
//! use ftf::{Arg, Writer};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("out.ftf");
//!
//! // Timestamps count nanoseconds (1e9 ticks per second).
//! let mut w = Writer::new(std::fs::File::create(&path)?, 1_000_000_000)?;
//! w.process(42, "prog")?;
//! let main = w.thread(42, 42, "prog")?;
//! w.duration_complete(main, "call", "main", 1_000, 9_000, &[Arg::new("insns", 1234u64)])?;
//! w.duration_complete(main, "call", "work", 2_000, 5_000, &[Arg::new("insns", 300u64)])?;
//! w.instant(main, "ptwrite", "ptwrite", 6_000, &[Arg::new("payload", 7u64)])?;
//! w.finish()?;
//!
//! // Records, typed: the two slices and the instant, in the order written.
//! let bytes = std::fs::read(&path)?;
//! let events: Vec<_> = ftf::read::parse(&bytes)?
//!     .into_iter()
//!     .filter_map(|r| match r.kind {
//!         RecordKind::Event(e) => Some(e),
//!         _ => None,
//!     })
//!     .collect();
//! assert_eq!(events.len(), 3);
//! assert_eq!(events[1].name, "work");
//! assert_eq!(events[1].kind, EventKind::DurationComplete { end: 5_000 });
//!
//! // Or a text dump, one line per record (what `ptdec dump` prints).
//! let dump = ftf::read::dump(&bytes)?;
//! assert!(dump.contains(r#"cat="call" name="work" end=5000"#), "{dump}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Why hand-written, from the spec (fuchsia.dev reference/tracing/trace-format):
//! the Rust FTF crates we found are `ftfrs` (a prototype record-level
//! encoder: the caller picks string and thread table indexes, one `Record`
//! value per event, no kernel object records among its listed types) and
//! `ftfrs-tracing` (a `tracing` layer over it); neither documents reusing table
//! slots when the 32767/255 limits are reached, and neither is in the registry
//! this workspace builds from (`cargo info` finds neither). What we need is
//! small: a dozen record layouts, recycling tables, an allocation-free event path.
#![forbid(unsafe_code)]

mod error;
pub mod hash;
pub mod read;
mod table;
mod write;

pub use error::Error;
pub use write::{truncate, write_header, Arg, ArgValue, Text, ThreadRef, Writer};

/// Result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The magic-number record that starts every FTF file, as one little-endian word.
pub const MAGIC: u64 = 0x0016_5478_4604_0010;

/// Longest string, in bytes, that the writer emits; longer ones are truncated
/// at a char boundary. The spec's string length field holds 15 bits but sets
/// this "conservative maximum string length limit of 32000 bytes".
pub const MAX_STRING_LEN: usize = 32000;

/// Number of slots in the string table (indexes 1..=0x7fff; 0 is the empty string).
pub const STRING_TABLE_SLOTS: usize = 0x7fff;

/// Number of slots in the thread table (indexes 1..=0xff; 0 means inline).
pub const THREAD_TABLE_SLOTS: usize = 0xff;

/// Most arguments one record can carry (a 4-bit field).
pub const MAX_ARGS: usize = 15;

/// Kernel object type of a process (`ZX_OBJ_TYPE_PROCESS`).
pub const OBJ_TYPE_PROCESS: u8 = 1;

/// Kernel object type of a thread (`ZX_OBJ_TYPE_THREAD`).
pub const OBJ_TYPE_THREAD: u8 = 2;

/// Record, event and argument type numbers and header field helpers shared by
/// the writer and the reader.
pub(crate) mod format {
    pub const RT_METADATA: u64 = 0;
    pub const RT_INIT: u64 = 1;
    pub const RT_STRING: u64 = 2;
    pub const RT_THREAD: u64 = 3;
    pub const RT_EVENT: u64 = 4;
    pub const RT_KERNEL_OBJECT: u64 = 7;
    pub const RT_LARGE: u64 = 15;

    pub const MT_PROVIDER_INFO: u64 = 1;
    pub const MT_PROVIDER_SECTION: u64 = 2;
    pub const MT_PROVIDER_EVENT: u64 = 3;
    pub const MT_TRACE_INFO: u64 = 4;

    pub const ET_INSTANT: u64 = 0;
    pub const ET_COUNTER: u64 = 1;
    pub const ET_DURATION_BEGIN: u64 = 2;
    pub const ET_DURATION_END: u64 = 3;
    pub const ET_DURATION_COMPLETE: u64 = 4;
    pub const ET_ASYNC_BEGIN: u64 = 5;
    pub const ET_ASYNC_INSTANT: u64 = 6;
    pub const ET_ASYNC_END: u64 = 7;
    pub const ET_FLOW_BEGIN: u64 = 8;
    pub const ET_FLOW_STEP: u64 = 9;
    pub const ET_FLOW_END: u64 = 10;

    pub const AT_NULL: u64 = 0;
    pub const AT_I32: u64 = 1;
    pub const AT_U32: u64 = 2;
    pub const AT_I64: u64 = 3;
    pub const AT_U64: u64 = 4;
    pub const AT_F64: u64 = 5;
    pub const AT_STRING: u64 = 6;
    pub const AT_POINTER: u64 = 7;
    pub const AT_KOID: u64 = 8;
    pub const AT_BOOL: u64 = 9;

    /// Largest size, in words, of a record with the ordinary 12-bit size field.
    pub const MAX_RECORD_WORDS: usize = 0xfff;

    /// String ref bit marking an inline string; the low 15 bits are its length.
    pub const STRING_REF_INLINE: u16 = 0x8000;

    /// Bits `[lo ..= hi]` of `word`, as the spec numbers them.
    pub const fn field(word: u64, lo: u32, hi: u32) -> u64 {
        let width = hi - lo + 1;
        if width >= 64 {
            word >> lo
        } else {
            (word >> lo) & ((1u64 << width) - 1)
        }
    }

    /// Bytes a stream of `len` bytes takes once padded to 8.
    pub const fn padded(len: usize) -> usize {
        (len + 7) & !7
    }
}
