//! perf_event records, the perf.data container and the process timeline.
//!
//! Pure code, no syscalls: the recorder (`ptrec`), the simulator (`ptsim`) and
//! the decoder (`ptdec`) all read and write perf's formats through this crate.
//! Unsafe code is denied except in [`bytes`], whose one unsafe block maps
//! a file.
//!
//! Write a small perf.data (a process's name and one mapping of its
//! program, the sideband a recording starts with), read it back, and ask the
//! timeline what ran where:
//!
//! ```
//! use std::fs::File;
//!
//! use sideband::attr::{flags, Attr, AttrSet, ATTR_SIZE_VER8};
//! use sideband::bytes::FileBytes;
//! use sideband::feature::{self, id};
//! use sideband::file::PerfFile;
//! use sideband::record::{misc, Event, Mmap, Record, SampleId};
//! use sideband::sample::sample_type;
//! use sideband::timeline::Timeline;
//! use sideband::writer::FileWriter;
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("perf.data");
//!
//! // One event whose records carry the pid/tid and time trailer (sample_id_all).
//! let attr = Attr {
//!     size: ATTR_SIZE_VER8,
//!     sample_type: sample_type::TID | sample_type::TIME,
//!     flags: flags::SAMPLE_ID_ALL,
//!     ..Attr::default()
//! };
//! let mut attrs = AttrSet::new();
//! attrs.push(attr, vec![1]);
//! let at = |time| SampleId {
//!     pid: Some(42),
//!     tid: Some(42),
//!     time: Some(time),
//!     ..SampleId::default()
//! };
//!
//! let mut w = FileWriter::new(File::create(&path)?, attrs)?;
//! w.write_event(&Event {
//!     misc: misc::COMM_EXEC,
//!     record: Record::Comm { pid: 42, tid: 42, comm: "prog".into() },
//!     sample_id: at(1_000),
//! })?;
//! w.write_event(&Event {
//!     misc: misc::USER,
//!     record: Record::Mmap(Mmap {
//!         pid: 42,
//!         tid: 42,
//!         addr: 0x40_0000,
//!         len: 0x1000,
//!         pgoff: 0,
//!         file_id: None, // a plain MMAP; MMAP2 adds the inode or build-id
//!         prot: None,
//!         flags: None,
//!         filename: "/usr/bin/prog".into(),
//!     }),
//!     sample_id: at(2_000),
//! })?;
//! // Feature sections (the recorder's command line here) follow the records.
//! let argv = ["ptrec", "-p", "42"].map(String::from);
//! w.set_feature(id::CMDLINE, feature::encode_cmdline(&argv))?;
//! w.finish()?; // writes the features and the final header
//!
//! // Read: mapped, file or pipe mode, byte order from the magic.
//! let bytes = FileBytes::open(&path)?;
//! let file = PerfFile::parse(&bytes)?;
//! assert!(file.warnings().is_empty(), "{:?}", file.warnings());
//! assert_eq!(file.features().cmdline()?, Some(argv.to_vec()));
//! let events = file.events().map(|e| e.map(|(_offset, event)| event));
//! let events = events.collect::<Result<Vec<_>, _>>()?;
//! assert_eq!(events.len(), 2);
//!
//! // Replay in perf's order; then ask by pid/tid and perf time.
//! let timeline = Timeline::replay(events);
//! assert_eq!(timeline.name(42, 1_500), Some("prog"));
//! let mapping = timeline.lookup(42, 0x40_0123, 2_500).expect("mapped at 2500");
//! assert_eq!(mapping.file.filename, "/usr/bin/prog");
//! assert_eq!(mapping.file_offset(0x40_0123), 0x123);
//! assert!(timeline.lookup(42, 0x40_0123, 1_500).is_none()); // not mapped yet
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_code)]

/// `eprintln!` that never panics. Where standard error cannot be written
/// (`2>/dev/full`, a pipe whose reader is gone), std's `eprintln!` panics
/// ("failed printing to stderr"), turning a finished run into exit 101;
/// here the message is lost and the program goes on to its own exit
/// status. Every binary's messages go through it.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr(), $($arg)*);
    }};
}

/// [`say!`] without the newline (`eprint!` that never panics).
#[macro_export]
macro_rules! say_part {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::write!(::std::io::stderr(), $($arg)*);
    }};
}

pub mod addr_filter;
pub mod attr;
pub mod auxtrace_info;
#[allow(unsafe_code)]
pub mod bytes;
pub mod endian;
pub mod error;
pub mod feature;
pub mod file;
pub mod ordered;
pub mod parse;
pub mod record;
pub mod sample;
pub mod serialize;
pub mod sink;
pub mod timeconv;
pub mod timeline;
pub mod writer;

pub use error::Error;
