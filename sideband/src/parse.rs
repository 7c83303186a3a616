//! Record parsing: one record's bytes (header included) to an [`Event`].
//!
//! The byte order is a type parameter chosen once by the caller (the perf.data
//! reader from the magic, ptrec's rings as [`Le`]); the attr of each record,
//! and so its sample_id layout, comes from the [`AttrSet`]. Every size is
//! checked against the bytes present before anything is sliced or allocated;
//! malformed bytes give [`Error::Record`] with the offset and the kind.
//!
//! A known kind whose body has a layout this crate does not type (a longer
//! newer form) is returned as [`Record::Unknown`] so that it still round-trips.

use std::borrow::Cow;

use crate::attr::{Attr, AttrSet};
use crate::auxtrace_info::AuxtraceInfo;
use crate::endian::{c_string, Cursor, Endian, Le, Malformed};
use crate::error::Error;
use crate::record::{
    kind, misc, Auxtrace, Event, FileId, IdIndexEntry, Mmap, Record, SampleId, Task, TimeConv,
};

/// `struct perf_event_header`, the first 8 bytes of every record:
///
/// ```text
/// struct perf_event_header {
///     __u32 type;
///     __u16 misc;
///     __u16 size;
/// };
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    pub kind: u32,
    pub misc: u16,
    pub size: u16,
}

pub const HEADER_LEN: usize = 8;

impl RecordHeader {
    pub fn parse<E: Endian>(b: &[u8]) -> Option<RecordHeader> {
        let mut c = Cursor::<E>::new(b);
        Some(RecordHeader {
            kind: c.u32("type").ok()?,
            misc: c.u16("misc").ok()?,
            size: c.u16("size").ok()?,
        })
    }
}

/// One record located in an input: its header, its bytes (header included)
/// and, for AUXTRACE and HEADER_TRACING_DATA, the data that follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRecord<'a> {
    /// Offset of the header in the input.
    pub offset: u64,
    pub header: RecordHeader,
    /// `header.size` bytes, header included.
    pub bytes: &'a [u8],
    /// Bytes after the record that belong to it (AUXTRACE payload, tracing data).
    pub payload: &'a [u8],
}

impl RawRecord<'_> {
    /// Bytes the record and its payload occupy in the stream.
    pub fn stream_len(&self) -> usize {
        self.bytes.len() + self.payload.len()
    }
}

/// Splits little-endian kernel records laid end to end (what ptrec and ptsim
/// copy out of a DATA ring) into [`RawRecord`]s. Kernel rings never carry
/// AUXTRACE payloads, so `payload` is always empty. `offset` counts from the
/// start of `bytes`. Stops with an error at a record whose size is impossible.
pub fn ring_records(bytes: &[u8]) -> impl Iterator<Item = Result<RawRecord<'_>, Error>> + '_ {
    let mut off = 0usize;
    std::iter::from_fn(move || {
        let rest = bytes.get(off..).filter(|r| !r.is_empty())?;
        let at = off as u64;
        let header = RecordHeader::parse::<Le>(rest);
        let size = header.map_or(0, |h| usize::from(h.size));
        let header = match header {
            Some(h) if size >= HEADER_LEN && size <= rest.len() => h,
            _ => {
                off = bytes.len(); // stop after reporting
                let kind = header.map_or(0, |h| h.kind);
                let why = format!("record size {size} with {} bytes left", rest.len());
                return Some(Err(Error::record(at, kind, why)));
            }
        };
        let raw = RawRecord {
            offset: off as u64,
            header,
            bytes: &rest[..size],
            payload: &[],
        };
        off += size;
        Some(Ok(raw))
    })
}

/// How many bytes follow a record of this header in the stream: AUXTRACE's
/// `size`, HEADER_TRACING_DATA's `size`. `Err` when the record is too short to
/// say.
pub fn payload_len<E: Endian>(header: &RecordHeader, bytes: &[u8]) -> Result<u64, Malformed> {
    let mut c = Cursor::<E>::new(bytes.get(HEADER_LEN..).unwrap_or_default());
    match header.kind {
        kind::AUXTRACE => c.u64("auxtrace.size"),
        kind::HEADER_TRACING_DATA => Ok(u64::from(c.u32("tracing_data.size")?)),
        _ => Ok(0),
    }
}

/// Parses a little-endian record (ptrec's rings, ptsim); see [`parse_event`].
pub fn parse_event_le<'a>(attrs: &AttrSet, raw: &RawRecord<'a>) -> Result<Event<'a>, Error> {
    parse_event::<Le>(attrs, raw)
}

/// Parses one record. `raw.bytes` must hold exactly `header.size` bytes and
/// `raw.payload` the data following it (see [`payload_len`]).
pub fn parse_event<'a, E: Endian>(
    attrs: &AttrSet,
    raw: &RawRecord<'a>,
) -> Result<Event<'a>, Error> {
    let h = raw.header;
    let err = |m: Malformed| Error::record(raw.offset, h.kind, m.0);
    if usize::from(h.size) < HEADER_LEN || raw.bytes.len() != usize::from(h.size) {
        return Err(err(Malformed(format!(
            "header.size {} does not match the {} bytes given",
            h.size,
            raw.bytes.len()
        ))));
    }
    let body = raw.bytes.get(HEADER_LEN..).unwrap_or_default();
    if kind::is_kernel(h.kind) {
        let entry = attrs.for_record::<E>(h.kind, body);
        if entry.is_none() && !attrs.is_empty() {
            return Err(err(Malformed::new(
                "its sample id matches none of the attrs",
            )));
        }
        let format = entry.map(|e| e.format);
        if h.kind == kind::SAMPLE {
            let Some(format) = format else {
                return Err(err(Malformed::new("a SAMPLE needs an attr to be read")));
            };
            let s = format.parse_sample::<E>(body).map_err(err)?;
            return Ok(Event {
                misc: h.misc,
                sample_id: s.sample_id(),
                record: Record::Sample(s),
            });
        }
        let trailer_len = format.map_or(0, |f| if f.sample_id_all { f.trailer_len } else { 0 });
        let split = body.len().checked_sub(trailer_len).ok_or_else(|| {
            err(Malformed(format!(
                "{} body bytes cannot hold the {trailer_len}-byte sample_id trailer",
                body.len()
            )))
        })?;
        let (fields, trailer) = body.split_at(split);
        let sample_id = match format {
            Some(f) if trailer_len > 0 => f.parse_sample_id::<E>(trailer).map_err(err)?,
            _ => SampleId::default(),
        };
        let record = parse_kernel::<E>(h, fields)
            .map_err(err)?
            .unwrap_or(Record::Unknown {
                kind: h.kind,
                body: Cow::Borrowed(fields),
            });
        Ok(Event {
            misc: h.misc,
            record,
            sample_id,
        })
    } else {
        let record = parse_user::<E>(h, body, raw.payload)
            .map_err(err)?
            .unwrap_or(Record::Unknown {
                kind: h.kind,
                body: Cow::Borrowed(body),
            });
        Ok(Event {
            misc: h.misc,
            record,
            sample_id: SampleId::default(),
        })
    }
}

/// `Some(x)` when the cursor consumed everything, else `None` (an untyped layout).
fn exact<E: Endian>(c: &Cursor<'_, E>, r: Record<'static>) -> Option<Record<'static>> {
    (c.remaining() == 0).then_some(r)
}

/// The kernel record bodies (between header and sample_id trailer), as
/// `include/uapi/linux/perf_event.h` lays them out: one parser per kind, each
/// under the kernel's comment for its struct. A fixed layout with bytes left
/// after it is a longer, newer form: [`exact`] leaves it untyped.
fn parse_kernel<E: Endian>(h: RecordHeader, b: &[u8]) -> Result<Option<Record<'_>>, Malformed> {
    let c = &mut Cursor::<E>::new(b);
    match h.kind {
        kind::MMAP => parse_mmap(c).map(Some),
        kind::MMAP2 => parse_mmap2(c, h.misc).map(Some),
        kind::LOST => parse_lost(c).map(|r| exact(c, r)),
        kind::COMM => parse_comm(c).map(Some),
        kind::EXIT => parse_task(c).map(|t| exact(c, Record::Exit(t))),
        kind::FORK => parse_task(c).map(|t| exact(c, Record::Fork(t))),
        kind::THROTTLE | kind::UNTHROTTLE => {
            parse_throttle(c, h.kind == kind::UNTHROTTLE).map(|r| exact(c, r))
        }
        kind::AUX => parse_aux(c).map(|r| exact(c, r)),
        kind::ITRACE_START => parse_itrace_start(c).map(|r| exact(c, r)),
        kind::LOST_SAMPLES => parse_lost_samples(c).map(|r| exact(c, r)),
        // Records a context switch in or out (flagged by
        // PERF_RECORD_MISC_SWITCH_OUT). See also
        // PERF_RECORD_SWITCH_CPU_WIDE.
        //
        // struct {
        //	struct perf_event_header	header;
        //	struct sample_id		sample_id;
        // };
        kind::SWITCH => Ok(exact(c, Record::Switch)),
        kind::SWITCH_CPU_WIDE => parse_switch_cpu_wide(c).map(|r| exact(c, r)),
        kind::KSYMBOL => parse_ksymbol(c).map(Some),
        kind::TEXT_POKE => parse_text_poke(c),
        _ => Ok(None),
    }
}

// struct {
//	struct perf_event_header	header;
//
//	u32				pid, tid;
//	u64				addr;
//	u64				len;
//	u64				pgoff;
//	char				filename[];
// 	struct sample_id		sample_id;
// };
/// MMAP: a mapping with no file identity, protection or flags.
fn parse_mmap<E: Endian>(c: &mut Cursor<'_, E>) -> Result<Record<'static>, Malformed> {
    Ok(Record::Mmap(Mmap {
        pid: c.u32("pid")?,
        tid: c.u32("tid")?,
        addr: c.u64("addr")?,
        len: c.u64("len")?,
        pgoff: c.u64("pgoff")?,
        file_id: None,
        prot: None,
        flags: None,
        filename: c_string(c.rest()),
    }))
}

// struct {
//	struct perf_event_header	header;
//
//	u32				pid, tid;
//	u64				addr;
//	u64				len;
//	u64				pgoff;
//	union {
//		struct {
//			u32		maj;
//			u32		min;
//			u64		ino;
//			u64		ino_generation;
//		};
//		struct {
//			u8		build_id_size;
//			u8		__reserved_1;
//			u16		__reserved_2;
//			u8		build_id[20];
//		};
//	};
//	u32				prot, flags;
//	char				filename[];
// 	struct sample_id		sample_id;
// };
/// MMAP2: a mapping with its file's inode or build id (which one `misc` says).
fn parse_mmap2<E: Endian>(c: &mut Cursor<'_, E>, misc: u16) -> Result<Record<'static>, Malformed> {
    let pid = c.u32("pid")?;
    let tid = c.u32("tid")?;
    let addr = c.u64("addr")?;
    let len = c.u64("len")?;
    let pgoff = c.u64("pgoff")?;
    let file_id = parse_mmap2_file_id(c, misc)?;
    Ok(Record::Mmap(Mmap {
        pid,
        tid,
        addr,
        len,
        pgoff,
        file_id: Some(file_id),
        prot: Some(c.u32("prot")?),
        flags: Some(c.u32("flags")?),
        filename: c_string(c.rest()),
    }))
}

/// MMAP2's union: the build id when `misc` has PERF_RECORD_MISC_MMAP_BUILD_ID,
/// else the device and inode.
fn parse_mmap2_file_id<E: Endian>(c: &mut Cursor<'_, E>, misc: u16) -> Result<FileId, Malformed> {
    if misc & misc::MMAP_BUILD_ID != 0 {
        let size = c.u8("build_id_size")?;
        let _r1 = c.u8("__reserved_1")?;
        let _r2 = c.u16("__reserved_2")?;
        let id = c.bytes(20, "build_id")?;
        let id = id.get(..usize::from(size)).ok_or_else(|| {
            Malformed(format!(
                "build_id_size {size} exceeds the 20-byte build_id field"
            ))
        })?;
        Ok(FileId::BuildId(id.to_vec()))
    } else {
        Ok(FileId::Inode {
            maj: c.u32("maj")?,
            min: c.u32("min")?,
            ino: c.u64("ino")?,
            ino_generation: c.u64("ino_generation")?,
        })
    }
}

// struct {
//	struct perf_event_header	header;
//	u64				id;
//	u64				lost;
// 	struct sample_id		sample_id;
// };
/// LOST: how many records the kernel dropped from the ring of event `id`.
fn parse_lost<E: Endian>(c: &mut Cursor<'_, E>) -> Result<Record<'static>, Malformed> {
    Ok(Record::Lost {
        id: c.u64("id")?,
        lost: c.u64("lost")?,
    })
}

// struct {
//	struct perf_event_header	header;
//
//	u32				pid, tid;
//	char				comm[];
// 	struct sample_id		sample_id;
// };
/// COMM: a thread's new command name.
fn parse_comm<E: Endian>(c: &mut Cursor<'_, E>) -> Result<Record<'static>, Malformed> {
    Ok(Record::Comm {
        pid: c.u32("pid")?,
        tid: c.u32("tid")?,
        comm: c_string(c.rest()),
    })
}

// struct {
//	struct perf_event_header	header;
//	u32				pid, ppid;
//	u32				tid, ptid;
//	u64				time;
// 	struct sample_id		sample_id;
// };
/// EXIT and FORK, which share one layout.
fn parse_task<E: Endian>(c: &mut Cursor<'_, E>) -> Result<Task, Malformed> {
    Ok(Task {
        pid: c.u32("pid")?,
        ppid: c.u32("ppid")?,
        tid: c.u32("tid")?,
        ptid: c.u32("ptid")?,
        time: c.u64("time")?,
    })
}

// struct {
//	struct perf_event_header	header;
//	u64				time;
//	u64				id;
//	u64				stream_id;
// 	struct sample_id		sample_id;
// };
/// THROTTLE and UNTHROTTLE, which share one layout.
fn parse_throttle<E: Endian>(
    c: &mut Cursor<'_, E>,
    unthrottle: bool,
) -> Result<Record<'static>, Malformed> {
    Ok(Record::Throttle {
        unthrottle,
        time: c.u64("time")?,
        id: c.u64("id")?,
        stream_id: c.u64("stream_id")?,
    })
}

// Records that new data landed in the AUX buffer part.
//
// struct {
// 	struct perf_event_header	header;
//
// 	u64				aux_offset;
// 	u64				aux_size;
//	u64				flags;
// 	struct sample_id		sample_id;
// };
/// AUX: where new trace landed in the AUX area, and its truncation flags.
fn parse_aux<E: Endian>(c: &mut Cursor<'_, E>) -> Result<Record<'static>, Malformed> {
    Ok(Record::Aux {
        aux_offset: c.u64("aux_offset")?,
        aux_size: c.u64("aux_size")?,
        flags: c.u64("flags")?,
    })
}

// Indicates that instruction trace has started
//
// struct {
//	struct perf_event_header	header;
//	u32				pid;
//	u32				tid;
//	struct sample_id		sample_id;
// };
/// ITRACE_START: the thread that the trace starts in.
fn parse_itrace_start<E: Endian>(c: &mut Cursor<'_, E>) -> Result<Record<'static>, Malformed> {
    Ok(Record::ItraceStart {
        pid: c.u32("pid")?,
        tid: c.u32("tid")?,
    })
}

// Records the dropped/lost sample number.
//
// struct {
//	struct perf_event_header	header;
//
//	u64				lost;
//	struct sample_id		sample_id;
// };
/// LOST_SAMPLES: how many samples the kernel dropped.
fn parse_lost_samples<E: Endian>(c: &mut Cursor<'_, E>) -> Result<Record<'static>, Malformed> {
    Ok(Record::LostSamples {
        lost: c.u64("lost")?,
    })
}

// CPU-wide version of PERF_RECORD_SWITCH with next_prev_pid and
// next_prev_tid that are the next (switching out) or previous
// (switching in) pid/tid.
//
// struct {
//	struct perf_event_header	header;
//	u32				next_prev_pid;
//	u32				next_prev_tid;
//	struct sample_id		sample_id;
// };
/// SWITCH_CPU_WIDE: a context switch with the thread on the other side.
fn parse_switch_cpu_wide<E: Endian>(c: &mut Cursor<'_, E>) -> Result<Record<'static>, Malformed> {
    Ok(Record::SwitchCpuWide {
        next_prev_pid: c.u32("next_prev_pid")?,
        next_prev_tid: c.u32("next_prev_tid")?,
    })
}

// Record ksymbol register/unregister events:
//
// struct {
//	struct perf_event_header	header;
//	u64				addr;
//	u32				len;
//	u16				ksym_type;
//	u16				flags;
//	char				name[];
//	struct sample_id		sample_id;
// };
/// KSYMBOL: a kernel symbol (BPF program, trampoline) registered or removed.
fn parse_ksymbol<E: Endian>(c: &mut Cursor<'_, E>) -> Result<Record<'static>, Malformed> {
    Ok(Record::Ksymbol {
        addr: c.u64("addr")?,
        len: c.u32("len")?,
        ksym_type: c.u16("ksym_type")?,
        flags: c.u16("flags")?,
        name: c_string(c.rest()),
    })
}

// Records changes to kernel text i.e. self-modified code. 'old_len' is
// the number of old bytes, 'new_len' is the number of new bytes. Either
// 'old_len' or 'new_len' may be zero to indicate, for example, the
// addition or removal of a trampoline. 'bytes' contains the old bytes
// followed immediately by the new bytes.
//
// struct {
//	struct perf_event_header	header;
//	u64				addr;
//	u16				old_len;
//	u16				new_len;
//	u8				bytes[];
//	struct sample_id		sample_id;
// };
/// TEXT_POKE: kernel text rewritten in place; `None` when the padding after
/// the bytes is not the kernel's (under 8 zero bytes).
fn parse_text_poke<E: Endian>(c: &mut Cursor<'_, E>) -> Result<Option<Record<'static>>, Malformed> {
    let addr = c.u64("addr")?;
    let old_len = c.u16("old_len")?;
    let new_len = c.u16("new_len")?;
    let old_bytes = c.bytes(usize::from(old_len), "old bytes")?.to_vec();
    let new_bytes = c.bytes(usize::from(new_len), "new bytes")?.to_vec();
    let pad = c.rest();
    Ok(
        (pad.len() < 8 && pad.iter().all(|&b| b == 0)).then_some(Record::TextPoke {
            addr,
            old_bytes,
            new_bytes,
        }),
    )
}

/// perf's user records (`tools/lib/perf/include/perf/event.h`): one parser per
/// kind, each under the struct it reads.
fn parse_user<'a, E: Endian>(
    h: RecordHeader,
    b: &'a [u8],
    payload: &'a [u8],
) -> Result<Option<Record<'a>>, Malformed> {
    let c = &mut Cursor::<E>::new(b);
    match h.kind {
        kind::HEADER_ATTR => parse_header_attr(c, b).map(Some),
        kind::HEADER_TRACING_DATA => parse_header_tracing_data(c, b, payload).map(Some),
        // struct perf_record_header_build_id {
        //	struct perf_event_header header;
        //	pid_t			 pid;
        //	union {
        //		__u8		 build_id[24];
        //		struct {
        //			__u8	 data[20];
        //			__u8	 size;
        //			__u8	 reserved1__;
        //			__u16	 reserved2__;
        //		};
        //	};
        //	char			 filename[];
        // };
        kind::HEADER_BUILD_ID => Ok(Some(Record::HeaderBuildId {
            data: Cow::Borrowed(b),
        })),
        kind::FINISHED_ROUND => Ok((b.is_empty()).then_some(Record::FinishedRound)),
        kind::FINISHED_INIT => Ok((b.is_empty()).then_some(Record::FinishedInit)),
        kind::ID_INDEX => parse_id_index(c, b),
        kind::AUXTRACE_INFO => parse_auxtrace_info(c),
        kind::AUXTRACE => parse_auxtrace(c, b, payload).map(Some),
        kind::AUXTRACE_ERROR => Ok(Some(Record::AuxtraceError {
            data: Cow::Borrowed(b),
        })),
        kind::THREAD_MAP => parse_thread_map(c),
        kind::CPU_MAP => parse_cpu_map(c, b),
        kind::TIME_CONV => parse_time_conv(c),
        // struct perf_record_header_feature {
        //	struct perf_event_header header;
        //	__u64			 feat_id;
        //	char			 data[];
        // };
        kind::HEADER_FEATURE => {
            let feature = c.u64("feat_id")?;
            Ok(Some(Record::HeaderFeature {
                feature,
                data: Cow::Borrowed(c.rest()),
            }))
        }
        _ => Ok(None),
    }
}

// struct perf_record_header_attr {
//	struct perf_event_header header;
//	struct perf_event_attr	 attr;
//	__u64			 id[];
// };
/// HEADER_ATTR: an event's attr and the ids of its per-CPU or per-thread copies.
fn parse_header_attr<E: Endian>(
    c: &mut Cursor<'_, E>,
    b: &[u8],
) -> Result<Record<'static>, Malformed> {
    let (attr, used) = Attr::parse::<E>(b)?;
    let _ = c.bytes(used, "attr")?;
    if c.remaining() % 8 != 0 {
        return Err(Malformed(format!(
            "{} bytes after the {used}-byte attr are not a whole number of ids",
            c.remaining()
        )));
    }
    let n = c.count(c.remaining() as u64 / 8, 8, "ids")?;
    let ids = (0..n).map(|_| c.u64("id")).collect::<Result<_, _>>()?;
    Ok(Record::HeaderAttr { attr, ids })
}

// struct perf_record_header_tracing_data {
//	struct perf_event_header header;
//	__u32			 size;
// };
// (the `size` bytes of tracing data follow the record)
/// HEADER_TRACING_DATA: `payload` must be exactly the `size` bytes announced.
fn parse_header_tracing_data<'a, E: Endian>(
    c: &mut Cursor<'_, E>,
    b: &[u8],
    payload: &'a [u8],
) -> Result<Record<'a>, Malformed> {
    let size = c.u32("size")?;
    if c.remaining() != 0 || payload.len() as u64 != u64::from(size) {
        return Err(Malformed(format!(
            "a {}-byte record announcing {size} bytes of tracing data, {} present",
            b.len() + HEADER_LEN,
            payload.len()
        )));
    }
    Ok(Record::HeaderTracingData {
        data: Cow::Borrowed(payload),
    })
}

// struct perf_record_id_index {
//	struct perf_event_header header;
//	__u64			 nr;
//	struct id_index_entry	 entries[];   /* id, idx, cpu, tid */
// };
// (perf 6 may append struct id_index_entry_2 { machine_pid, vcpu }[nr])
/// ID_INDEX: which CPU and thread each sample id belongs to; `None` for perf
/// 6's longer form, which stays raw.
fn parse_id_index<E: Endian>(
    c: &mut Cursor<'_, E>,
    b: &[u8],
) -> Result<Option<Record<'static>>, Malformed> {
    let nr = c.u64("nr")?;
    let n = c.count(nr, 32, "entries")?;
    if n > 0 && c.remaining() == n * 48 {
        return Ok(None);
    }
    if c.remaining() != n * 32 {
        return Err(Malformed(format!(
            "nr {nr} does not match the {} body bytes",
            b.len()
        )));
    }
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(IdIndexEntry {
            id: c.u64("id")?,
            idx: c.u64("idx")?,
            cpu: c.u64("cpu")?,
            tid: c.u64("tid")?,
        });
    }
    Ok(Some(Record::IdIndex(v)))
}

// struct perf_record_auxtrace_info {
//	struct perf_event_header header;
//	__u32			 type;
//	__u32			 reserved__; /* For alignment */
//	__u64			 priv[];
// };
/// AUXTRACE_INFO: the PMU's private words (intel_pt's config, TSC ratio...).
fn parse_auxtrace_info<E: Endian>(
    c: &mut Cursor<'_, E>,
) -> Result<Option<Record<'static>>, Malformed> {
    let kind = c.u32("type")?;
    let reserved = c.u32("reserved__")?;
    if c.remaining() % 8 != 0 || reserved != 0 {
        return Ok(None);
    }
    let n = c.count(c.remaining() as u64 / 8, 8, "priv")?;
    let priv_words = (0..n).map(|_| c.u64("priv")).collect::<Result<_, _>>()?;
    Ok(Some(Record::AuxtraceInfo(AuxtraceInfo {
        kind,
        priv_words,
    })))
}

// struct perf_record_auxtrace {
//	struct perf_event_header header;
//	__u64			 size;
//	__u64			 offset;
//	__u64			 reference;
//	__u32			 idx;
//	__u32			 tid;
//	__u32			 cpu;
//	__u32			 reserved__; /* For alignment */
// };
// (the `size` bytes of trace data follow the record)
/// AUXTRACE: one chunk of trace; `payload` must be the `size` bytes
/// announced, or fewer (the record a cut file ends in:
/// [`crate::file::PerfFile`] hands on the data present).
fn parse_auxtrace<'a, E: Endian>(
    c: &mut Cursor<'_, E>,
    b: &[u8],
    payload: &'a [u8],
) -> Result<Record<'a>, Malformed> {
    let size = c.u64("size")?;
    let a = Auxtrace {
        offset: c.u64("offset")?,
        reference: c.u64("reference")?,
        idx: c.u32("idx")?,
        tid: c.u32("tid")?,
        cpu: c.u32("cpu")?,
        data: Cow::Borrowed(payload),
    };
    let reserved = c.u32("reserved__")?;
    if c.remaining() != 0 || reserved != 0 || payload.len() as u64 > size {
        return Err(Malformed(format!(
            "a {}-byte AUXTRACE record announcing {size} bytes of data, {} present",
            b.len() + HEADER_LEN,
            payload.len()
        )));
    }
    Ok(Record::Auxtrace(a))
}

// struct perf_record_thread_map {
//	struct perf_event_header		 header;
//	__u64					 nr;
//	struct perf_record_thread_map_entry {
//		__u64	pid;
//		char	comm[16];
//	}					 entries[];
// };
/// THREAD_MAP: the threads perf record followed, with their names.
fn parse_thread_map<E: Endian>(
    c: &mut Cursor<'_, E>,
) -> Result<Option<Record<'static>>, Malformed> {
    let nr = c.u64("nr")?;
    let n = c.count(nr, 24, "entries")?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let pid = c.u64("pid")?;
        v.push((pid, c_string(c.bytes(16, "comm")?)));
    }
    Ok(exact(c, Record::ThreadMap(v)))
}

// struct perf_record_cpu_map {
//	struct perf_event_header	 header;
//	struct perf_record_cpu_map_data {   /* __packed */
//		__u16	type;                /* PERF_CPU_MAP__CPUS = 0 */
//		struct cpu_map_entries {
//			__u16	nr;
//			__u16	cpu[];
//		} cpus_data;
//	} data;
// };
/// CPU_MAP: the CPUs perf record followed; only the list form is typed.
fn parse_cpu_map<E: Endian>(
    c: &mut Cursor<'_, E>,
    b: &[u8],
) -> Result<Option<Record<'static>>, Malformed> {
    let ty = c.u16("type")?;
    if ty != 0 {
        return Ok(None);
    }
    let nr = c.u16("nr")?;
    let n = c.count(u64::from(nr), 2, "cpu")?;
    let cpus: Vec<u32> = (0..n)
        .map(|_| c.u16("cpu").map(u32::from))
        .collect::<Result<_, _>>()?;
    let pad = c.rest();
    // The list form, zero-padded to 8 bytes, round-trips; anything else stays raw.
    let typed = pad.iter().all(|&x| x == 0)
        && (HEADER_LEN + 4 + 2 * n).next_multiple_of(8) == HEADER_LEN + b.len();
    Ok(typed.then_some(Record::CpuMap(cpus)))
}

// struct perf_record_time_conv {
//	struct perf_event_header header;
//	__u64			 time_shift;
//	__u64			 time_mult;
//	__u64			 time_zero;
//	__u64			 time_cycles;
//	__u64			 time_mask;
//	__u8			 cap_user_time_zero;
//	__u8			 cap_user_time_short;
//	__u8			 reserved[6];	/* For alignment */
// };
// (perf before 5.10 writes only the first three fields)
/// TIME_CONV: the TSC to perf-time conversion, in its short or long form.
fn parse_time_conv<E: Endian>(c: &mut Cursor<'_, E>) -> Result<Option<Record<'static>>, Malformed> {
    let mut t = TimeConv {
        time_shift: c.u64("time_shift")?,
        time_mult: c.u64("time_mult")?,
        time_zero: c.u64("time_zero")?,
        ..TimeConv::default()
    };
    Ok(match c.remaining() {
        0 => Some(Record::TimeConv(t)),
        24 => {
            t.time_cycles = Some(c.u64("time_cycles")?);
            t.time_mask = Some(c.u64("time_mask")?);
            let z = c.u8("cap_user_time_zero")?;
            let s = c.u8("cap_user_time_short")?;
            let reserved = c.bytes(6, "reserved")?;
            let typed = z <= 1 && s <= 1 && reserved.iter().all(|&x| x == 0);
            t.cap_user_time_zero = Some(z != 0);
            t.cap_user_time_short = Some(s != 0);
            typed.then_some(Record::TimeConv(t))
        }
        _ => None,
    })
}

#[cfg(test)]
mod ring_record_tests {
    use super::*;

    fn rec(kind: u32, size: u16) -> Vec<u8> {
        let mut r = kind.to_le_bytes().to_vec();
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&size.to_le_bytes());
        r.resize(usize::from(size).max(8), 0xab);
        r
    }

    #[test]
    fn ring_records_split_and_stop_at_a_bad_size() {
        let mut bytes = rec(3, 16);
        bytes.extend(rec(10, 24));
        let got: Vec<_> = ring_records(&bytes).map(|r| r.unwrap()).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[1].offset, got[1].header.kind, got[1].bytes.len()),
            (16, 10, 24)
        );

        bytes.extend(rec(4, 4)); // size below a header
        bytes.extend(rec(3, 16)); // never reached
        let got: Vec<_> = ring_records(&bytes).collect();
        assert_eq!(got.len(), 3);
        let err = got[2].as_ref().unwrap_err().to_string();
        assert!(
            err.contains("40") || err.contains("0x28"),
            "offset named: {err}"
        );

        let cut = &bytes[..20]; // second record cut short
        let got: Vec<_> = ring_records(cut).collect();
        assert!(got[0].is_ok() && got[1].is_err() && got.len() == 2);
    }
}
