//! perf_event records as typed values: the kernel's records (`PERF_RECORD_*`
//! from `include/uapi/linux/perf_event.h`) and perf's user records (types 64+
//! from `tools/lib/perf/include/perf/event.h`).
//!
//! This module holds only the types; parsing and serialization live in
//! [`crate::parse`] and [`crate::serialize`] so that every producer (perf.data
//! files, ptrec's live rings, ptsim) builds the same values. Payloads that can
//! be large (AUXTRACE data, unknown record bodies) are borrowed from the input.

use std::borrow::Cow;

/// `perf_event_header.type` values of the kernel's records.
pub mod kind {
    pub const MMAP: u32 = 1;
    pub const LOST: u32 = 2;
    pub const COMM: u32 = 3;
    pub const EXIT: u32 = 4;
    pub const THROTTLE: u32 = 5;
    pub const UNTHROTTLE: u32 = 6;
    pub const FORK: u32 = 7;
    pub const READ: u32 = 8;
    pub const SAMPLE: u32 = 9;
    pub const MMAP2: u32 = 10;
    pub const AUX: u32 = 11;
    pub const ITRACE_START: u32 = 12;
    pub const LOST_SAMPLES: u32 = 13;
    pub const SWITCH: u32 = 14;
    pub const SWITCH_CPU_WIDE: u32 = 15;
    pub const NAMESPACES: u32 = 16;
    pub const KSYMBOL: u32 = 17;
    pub const BPF_EVENT: u32 = 18;
    pub const CGROUP: u32 = 19;
    pub const TEXT_POKE: u32 = 20;
    pub const AUX_OUTPUT_HW_ID: u32 = 21;

    // perf's user records (tools/lib/perf/include/perf/event.h).
    pub const HEADER_ATTR: u32 = 64;
    pub const HEADER_EVENT_TYPE: u32 = 65;
    pub const HEADER_TRACING_DATA: u32 = 66;
    pub const HEADER_BUILD_ID: u32 = 67;
    pub const FINISHED_ROUND: u32 = 68;
    pub const ID_INDEX: u32 = 69;
    pub const AUXTRACE_INFO: u32 = 70;
    pub const AUXTRACE: u32 = 71;
    pub const AUXTRACE_ERROR: u32 = 72;
    pub const THREAD_MAP: u32 = 73;
    pub const CPU_MAP: u32 = 74;
    pub const STAT_CONFIG: u32 = 75;
    pub const STAT: u32 = 76;
    pub const STAT_ROUND: u32 = 77;
    pub const EVENT_UPDATE: u32 = 78;
    pub const TIME_CONV: u32 = 79;
    pub const HEADER_FEATURE: u32 = 80;
    pub const COMPRESSED: u32 = 81;
    pub const FINISHED_INIT: u32 = 82;

    /// The record kind's name as perf prints it in `perf report -D`'s
    /// "Aggregated stats" (`PERF_RECORD_` stripped).
    pub fn name(kind: u32) -> &'static str {
        match kind {
            MMAP => "MMAP",
            LOST => "LOST",
            COMM => "COMM",
            EXIT => "EXIT",
            THROTTLE => "THROTTLE",
            UNTHROTTLE => "UNTHROTTLE",
            FORK => "FORK",
            READ => "READ",
            SAMPLE => "SAMPLE",
            MMAP2 => "MMAP2",
            AUX => "AUX",
            ITRACE_START => "ITRACE_START",
            LOST_SAMPLES => "LOST_SAMPLES",
            SWITCH => "SWITCH",
            SWITCH_CPU_WIDE => "SWITCH_CPU_WIDE",
            NAMESPACES => "NAMESPACES",
            KSYMBOL => "KSYMBOL",
            BPF_EVENT => "BPF_EVENT",
            CGROUP => "CGROUP",
            TEXT_POKE => "TEXT_POKE",
            AUX_OUTPUT_HW_ID => "AUX_OUTPUT_HW_ID",
            HEADER_ATTR => "ATTR",
            HEADER_EVENT_TYPE => "EVENT_TYPE",
            HEADER_TRACING_DATA => "TRACING_DATA",
            HEADER_BUILD_ID => "BUILD_ID",
            FINISHED_ROUND => "FINISHED_ROUND",
            ID_INDEX => "ID_INDEX",
            AUXTRACE_INFO => "AUXTRACE_INFO",
            AUXTRACE => "AUXTRACE",
            AUXTRACE_ERROR => "AUXTRACE_ERROR",
            THREAD_MAP => "THREAD_MAP",
            CPU_MAP => "CPU_MAP",
            STAT_CONFIG => "STAT_CONFIG",
            STAT => "STAT",
            STAT_ROUND => "STAT_ROUND",
            EVENT_UPDATE => "EVENT_UPDATE",
            TIME_CONV => "TIME_CONV",
            HEADER_FEATURE => "FEATURE",
            COMPRESSED => "COMPRESSED",
            FINISHED_INIT => "FINISHED_INIT",
            _ => "UNKNOWN",
        }
    }

    /// Kernel records (below 64) carry the sample_id trailer when the attr has sample_id_all.
    pub fn is_kernel(kind: u32) -> bool {
        kind < HEADER_ATTR
    }
}

/// `perf_event_header.misc` bits.
pub mod misc {
    pub const CPUMODE_MASK: u16 = 7;
    pub const CPUMODE_UNKNOWN: u16 = 0;
    pub const KERNEL: u16 = 1;
    pub const USER: u16 = 2;
    pub const HYPERVISOR: u16 = 3;
    pub const GUEST_KERNEL: u16 = 4;
    pub const GUEST_USER: u16 = 5;
    /// MMAP/MMAP2: a non-executable (data) mapping.
    pub const MMAP_DATA: u16 = 1 << 13;
    /// COMM: the name changed because of exec.
    pub const COMM_EXEC: u16 = 1 << 13;
    /// SWITCH / SWITCH_CPU_WIDE: the thread is switched out.
    pub const SWITCH_OUT: u16 = 1 << 13;
    /// MMAP2: the record carries a build-id instead of inode data.
    pub const MMAP_BUILD_ID: u16 = 1 << 14;
    /// SWITCH out: the task was preempted (still runnable).
    pub const SWITCH_OUT_PREEMPT: u16 = 1 << 14;
    pub const EXACT_IP: u16 = 1 << 14;
    pub const EXT_RESERVED: u16 = 1 << 15;
}

/// `PERF_RECORD_AUX` flags.
pub mod aux_flags {
    pub const TRUNCATED: u64 = 0x01;
    pub const OVERWRITE: u64 = 0x02;
    pub const PARTIAL: u64 = 0x04;
    pub const COLLISION: u64 = 0x08;
}

/// The `sample_id_all` trailer of a non-sample record (and the matching
/// fields of a SAMPLE). Which fields are present follows the attr's
/// `sample_type`; absent fields are `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleId {
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub time: Option<u64>,
    pub id: Option<u64>,
    pub stream_id: Option<u64>,
    pub cpu: Option<u32>,
    pub identifier: Option<u64>,
}

/// One record as it sits in a stream: the header's `misc`, the typed body,
/// and the sample_id trailer (empty for user records and when the attr has no
/// `sample_id_all`).
#[derive(Debug, Clone, PartialEq)]
pub struct Event<'a> {
    pub misc: u16,
    pub record: Record<'a>,
    pub sample_id: SampleId,
}

/// MMAP2's file identity: inode numbers, or (with `misc::MMAP_BUILD_ID`) a build-id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileId {
    Inode {
        maj: u32,
        min: u32,
        ino: u64,
        ino_generation: u64,
    },
    /// At most 20 bytes.
    BuildId(Vec<u8>),
}

/// PERF_RECORD_MMAP / PERF_RECORD_MMAP2 (MMAP leaves `file_id`, `prot`, `flags` as `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mmap {
    pub pid: u32,
    pub tid: u32,
    pub addr: u64,
    pub len: u64,
    pub pgoff: u64,
    /// `Some` for MMAP2.
    pub file_id: Option<FileId>,
    pub prot: Option<u32>,
    pub flags: Option<u32>,
    pub filename: String,
}

/// PERF_RECORD_FORK / PERF_RECORD_EXIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    pub pid: u32,
    pub ppid: u32,
    pub tid: u32,
    pub ptid: u32,
    pub time: u64,
}

/// PERF_RECORD_AUXTRACE: a chunk of raw trace data (borrowed from the input).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Auxtrace<'a> {
    /// Offset of this chunk in the AUX area's byte stream (monotonic).
    pub offset: u64,
    /// perf's reference (a TSC value perf uses to order snapshot chunks).
    pub reference: u64,
    /// Index of the mmap (the buffer) this chunk came from.
    pub idx: u32,
    /// Thread for per-thread buffers, else -1 as u32.
    pub tid: u32,
    /// CPU for per-cpu buffers, else -1 as u32.
    pub cpu: u32,
    pub data: Cow<'a, [u8]>,
}

/// PERF_RECORD_TIME_CONV (fields after `time_zero` exist only in newer perf;
/// `None` when the record is shorter).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeConv {
    pub time_shift: u64,
    pub time_mult: u64,
    pub time_zero: u64,
    pub time_cycles: Option<u64>,
    pub time_mask: Option<u64>,
    pub cap_user_time_zero: Option<bool>,
    pub cap_user_time_short: Option<bool>,
}

/// One entry of PERF_RECORD_ID_INDEX.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdIndexEntry {
    pub id: u64,
    pub idx: u64,
    pub cpu: u64,
    pub tid: u64,
}

/// A typed perf record. Variants for records this project does not interpret
/// keep their bytes in `Unknown` so that they round-trip.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Record<'a> {
    /// PERF_RECORD_MMAP (`file_id == None`) or MMAP2.
    Mmap(Mmap),
    /// PERF_RECORD_COMM; `misc::COMM_EXEC` in the event's misc marks exec.
    Comm {
        pid: u32,
        tid: u32,
        comm: String,
    },
    Fork(Task),
    Exit(Task),
    /// PERF_RECORD_SWITCH; direction and preemption are in misc.
    Switch,
    /// PERF_RECORD_SWITCH_CPU_WIDE: the next (switch out) or previous (switch in) task.
    SwitchCpuWide {
        next_prev_pid: u32,
        next_prev_tid: u32,
    },
    Lost {
        id: u64,
        lost: u64,
    },
    LostSamples {
        lost: u64,
    },
    /// PERF_RECORD_AUX: new data in the AUX area; `flags` are `aux_flags::*`.
    Aux {
        aux_offset: u64,
        aux_size: u64,
        flags: u64,
    },
    ItraceStart {
        pid: u32,
        tid: u32,
    },
    /// THROTTLE (`unthrottle == false`) or UNTHROTTLE.
    Throttle {
        unthrottle: bool,
        time: u64,
        id: u64,
        stream_id: u64,
    },
    Ksymbol {
        addr: u64,
        len: u32,
        ksym_type: u16,
        flags: u16,
        name: String,
    },
    TextPoke {
        addr: u64,
        old_bytes: Vec<u8>,
        new_bytes: Vec<u8>,
    },
    /// PERF_RECORD_SAMPLE, decoded as far as the attr's sample_type describes it.
    Sample(crate::sample::Sample<'a>),

    /// perf's PERF_RECORD_HEADER_ATTR (pipe mode): an attr and its ids.
    HeaderAttr {
        attr: crate::attr::Attr,
        ids: Vec<u64>,
    },
    /// PERF_RECORD_HEADER_FEATURE (pipe mode): one feature section's bytes.
    HeaderFeature {
        feature: u64,
        data: Cow<'a, [u8]>,
    },
    /// PERF_RECORD_HEADER_BUILD_ID (pipe mode), kept raw.
    HeaderBuildId {
        data: Cow<'a, [u8]>,
    },
    /// PERF_RECORD_HEADER_TRACING_DATA: the tracing data that FOLLOWS the
    /// record (its `size` field is `data.len()`, a multiple of 8).
    HeaderTracingData {
        data: Cow<'a, [u8]>,
    },
    FinishedRound,
    FinishedInit,
    /// PERF_RECORD_ID_INDEX; a record that also carries perf 6's
    /// `id_index_entry_2` array (machine_pid, vcpu) is kept as `Unknown`.
    IdIndex(Vec<IdIndexEntry>),
    AuxtraceInfo(crate::auxtrace_info::AuxtraceInfo),
    Auxtrace(Auxtrace<'a>),
    /// PERF_RECORD_AUXTRACE_ERROR, kept raw.
    AuxtraceError {
        data: Cow<'a, [u8]>,
    },
    /// PERF_RECORD_THREAD_MAP: (pid, comm) pairs.
    ThreadMap(Vec<(u64, String)>),
    /// PERF_RECORD_CPU_MAP in its list encoding (`PERF_CPU_MAP__CPUS`); the
    /// mask and range encodings are kept as `Unknown`.
    CpuMap(Vec<u32>),
    TimeConv(TimeConv),
    /// Any other record type, or a known one in a layout this crate does not
    /// type, kept as its body bytes: after the 8-byte header, and for kernel
    /// records before the sample_id trailer (which is in [`Event::sample_id`]).
    Unknown {
        kind: u32,
        body: Cow<'a, [u8]>,
    },
}

impl Record<'_> {
    /// The `perf_event_header.type` this record is written with.
    pub fn kind(&self) -> u32 {
        match self {
            Record::Mmap(m) if m.file_id.is_some() => kind::MMAP2,
            Record::Mmap(_) => kind::MMAP,
            Record::Comm { .. } => kind::COMM,
            Record::Fork(_) => kind::FORK,
            Record::Exit(_) => kind::EXIT,
            Record::Switch => kind::SWITCH,
            Record::SwitchCpuWide { .. } => kind::SWITCH_CPU_WIDE,
            Record::Lost { .. } => kind::LOST,
            Record::LostSamples { .. } => kind::LOST_SAMPLES,
            Record::Aux { .. } => kind::AUX,
            Record::ItraceStart { .. } => kind::ITRACE_START,
            Record::Throttle {
                unthrottle: false, ..
            } => kind::THROTTLE,
            Record::Throttle {
                unthrottle: true, ..
            } => kind::UNTHROTTLE,
            Record::Ksymbol { .. } => kind::KSYMBOL,
            Record::TextPoke { .. } => kind::TEXT_POKE,
            Record::Sample(_) => kind::SAMPLE,
            Record::HeaderAttr { .. } => kind::HEADER_ATTR,
            Record::HeaderFeature { .. } => kind::HEADER_FEATURE,
            Record::HeaderBuildId { .. } => kind::HEADER_BUILD_ID,
            Record::HeaderTracingData { .. } => kind::HEADER_TRACING_DATA,
            Record::FinishedRound => kind::FINISHED_ROUND,
            Record::FinishedInit => kind::FINISHED_INIT,
            Record::IdIndex(_) => kind::ID_INDEX,
            Record::AuxtraceInfo(_) => kind::AUXTRACE_INFO,
            Record::Auxtrace(_) => kind::AUXTRACE,
            Record::AuxtraceError { .. } => kind::AUXTRACE_ERROR,
            Record::ThreadMap(_) => kind::THREAD_MAP,
            Record::CpuMap(_) => kind::CPU_MAP,
            Record::TimeConv(_) => kind::TIME_CONV,
            Record::Unknown { kind, .. } => *kind,
        }
    }

    /// A copy that owns its bytes (for keeping records past the input's lifetime).
    pub fn into_owned(self) -> Record<'static> {
        fn own(c: Cow<'_, [u8]>) -> Cow<'static, [u8]> {
            Cow::Owned(c.into_owned())
        }
        match self {
            Record::Mmap(m) => Record::Mmap(m),
            Record::Comm { pid, tid, comm } => Record::Comm { pid, tid, comm },
            Record::Fork(t) => Record::Fork(t),
            Record::Exit(t) => Record::Exit(t),
            Record::Switch => Record::Switch,
            Record::SwitchCpuWide {
                next_prev_pid,
                next_prev_tid,
            } => Record::SwitchCpuWide {
                next_prev_pid,
                next_prev_tid,
            },
            Record::Lost { id, lost } => Record::Lost { id, lost },
            Record::LostSamples { lost } => Record::LostSamples { lost },
            Record::Aux {
                aux_offset,
                aux_size,
                flags,
            } => Record::Aux {
                aux_offset,
                aux_size,
                flags,
            },
            Record::ItraceStart { pid, tid } => Record::ItraceStart { pid, tid },
            Record::Throttle {
                unthrottle,
                time,
                id,
                stream_id,
            } => Record::Throttle {
                unthrottle,
                time,
                id,
                stream_id,
            },
            Record::Ksymbol {
                addr,
                len,
                ksym_type,
                flags,
                name,
            } => Record::Ksymbol {
                addr,
                len,
                ksym_type,
                flags,
                name,
            },
            Record::TextPoke {
                addr,
                old_bytes,
                new_bytes,
            } => Record::TextPoke {
                addr,
                old_bytes,
                new_bytes,
            },
            Record::Sample(s) => Record::Sample(s.into_owned()),
            Record::HeaderAttr { attr, ids } => Record::HeaderAttr { attr, ids },
            Record::HeaderFeature { feature, data } => Record::HeaderFeature {
                feature,
                data: own(data),
            },
            Record::HeaderBuildId { data } => Record::HeaderBuildId { data: own(data) },
            Record::HeaderTracingData { data } => Record::HeaderTracingData { data: own(data) },
            Record::FinishedRound => Record::FinishedRound,
            Record::FinishedInit => Record::FinishedInit,
            Record::IdIndex(v) => Record::IdIndex(v),
            Record::AuxtraceInfo(i) => Record::AuxtraceInfo(i),
            Record::Auxtrace(a) => Record::Auxtrace(Auxtrace {
                data: own(a.data),
                ..a
            }),
            Record::AuxtraceError { data } => Record::AuxtraceError { data: own(data) },
            Record::ThreadMap(v) => Record::ThreadMap(v),
            Record::CpuMap(v) => Record::CpuMap(v),
            Record::TimeConv(t) => Record::TimeConv(t),
            Record::Unknown { kind, body } => Record::Unknown {
                kind,
                body: own(body),
            },
        }
    }
}

impl Event<'_> {
    /// A copy that owns its bytes.
    pub fn into_owned(self) -> Event<'static> {
        Event {
            misc: self.misc,
            record: self.record.into_owned(),
            sample_id: self.sample_id,
        }
    }
}
