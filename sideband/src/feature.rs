//! perf.data feature sections (`tools/perf/util/header.c`, `feat_ops`): their
//! ids, the raw bytes of each section as read, typed views of the ones the
//! decoder needs, and encoders for the writer.
//!
//! Formats (all integers in the file's byte order; a "string" is `u32 len`
//! then `len` bytes, NUL-padded to a multiple of 64 by perf):
//!
//! ```text
//! BUILD_ID         struct perf_record_header_build_id[] (header, pid, build_id[24], filename[])
//! HOSTNAME, OSRELEASE, VERSION, ARCH, CPUDESC, CPUID   string
//! NRCPUS           u32 nr_cpus_available; u32 nr_cpus_online
//! TOTAL_MEM        u64 kB
//! CMDLINE          u32 n; string argv[n]        (argv[0] is the perf binary)
//! EVENT_DESC       u32 nr; u32 attr_size; { attr[attr_size]; u32 nr_ids; string name; u64 ids[nr_ids] }[nr]
//! AUXTRACE         u64 nr; { u64 file_offset; u64 size }[nr]  (offset and header.size of each AUXTRACE record)
//! CLOCKID          u64 clockid_res_ns
//! CLOCK_DATA       u32 version (1); u32 clockid; u64 tod_ns; u64 clockid_ns
//! ```
//!
//! Other sections are kept as bytes.

use std::collections::BTreeMap;

use crate::attr::Attr;
use crate::endian::{c_string, Be, ByteOrder, Cursor, Endian, Le, Malformed};
use crate::error::Error;
use crate::sink::{padded_str, Buf};

/// Feature ids: bit numbers in the header's `adds_features` bitmap, and
/// `feat_id` of HEADER_FEATURE records (`enum` in `tools/perf/util/header.h`).
pub mod id {
    pub const RESERVED: u32 = 0;
    pub const TRACING_DATA: u32 = 1;
    pub const BUILD_ID: u32 = 2;
    pub const HOSTNAME: u32 = 3;
    pub const OSRELEASE: u32 = 4;
    pub const VERSION: u32 = 5;
    pub const ARCH: u32 = 6;
    pub const NRCPUS: u32 = 7;
    pub const CPUDESC: u32 = 8;
    pub const CPUID: u32 = 9;
    pub const TOTAL_MEM: u32 = 10;
    pub const CMDLINE: u32 = 11;
    pub const EVENT_DESC: u32 = 12;
    pub const CPU_TOPOLOGY: u32 = 13;
    pub const NUMA_TOPOLOGY: u32 = 14;
    pub const BRANCH_STACK: u32 = 15;
    pub const PMU_MAPPINGS: u32 = 16;
    pub const GROUP_DESC: u32 = 17;
    pub const AUXTRACE: u32 = 18;
    pub const STAT: u32 = 19;
    pub const CACHE: u32 = 20;
    pub const SAMPLE_TIME: u32 = 21;
    pub const MEM_TOPOLOGY: u32 = 22;
    pub const CLOCKID: u32 = 23;
    pub const DIR_FORMAT: u32 = 24;
    pub const BPF_PROG_INFO: u32 = 25;
    pub const BPF_BTF: u32 = 26;
    pub const COMPRESSED: u32 = 27;
    pub const CPU_PMU_CAPS: u32 = 28;
    pub const CLOCK_DATA: u32 = 29;
    pub const HYBRID_TOPOLOGY: u32 = 30;
    pub const PMU_CAPS: u32 = 31;
    /// Bits in the header's bitmap.
    pub const BITS: u32 = 256;

    /// The feature's name, as `perf report --header` prints it.
    pub fn name(id: u32) -> &'static str {
        const NAMES: [&str; 32] = [
            "reserved",
            "trace_info",
            "build_id",
            "hostname",
            "osrelease",
            "version",
            "arch",
            "nrcpus",
            "cpudesc",
            "cpuid",
            "total_mem",
            "cmdline",
            "event_desc",
            "cpu_topology",
            "numa_topology",
            "branch_stack",
            "pmu_mappings",
            "group_desc",
            "auxtrace",
            "stat",
            "cache",
            "sample_time",
            "mem_topology",
            "clockid",
            "dir_format",
            "bpf_prog_info",
            "bpf_btf",
            "compressed",
            "cpu_pmu_caps",
            "clock_data",
            "hybrid_topology",
            "pmu_caps",
        ];
        NAMES.get(id as usize).copied().unwrap_or("unknown")
    }
}

/// perf pads feature strings to this (`NAME_ALIGN`).
pub const NAME_ALIGN: usize = 64;

/// `PERF_RECORD_MISC_BUILD_ID_SIZE`: the build-id entry's `size` byte is valid.
pub const MISC_BUILD_ID_SIZE: u16 = 1 << 15;

/// One BUILD_ID entry: a binary the recording touched and its build-id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildIdEntry {
    /// The entry header's misc (cpumode; [`MISC_BUILD_ID_SIZE`]).
    pub misc: u16,
    pub pid: i32,
    /// The build-id (its `size` bytes with MISC_BUILD_ID_SIZE, else all 20).
    pub build_id: Vec<u8>,
    pub filename: String,
}

/// NRCPUS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NrCpus {
    pub available: u32,
    pub online: u32,
}

/// One EVENT_DESC entry: an attr, its name as given on perf's command line, its ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventDesc {
    pub attr: Attr,
    pub name: String,
    pub ids: Vec<u64>,
}

/// CLOCK_DATA: a wall-clock reference for the recording clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockData {
    pub version: u32,
    pub clockid: u32,
    /// Wall-clock (time of day) ns at the reference point.
    pub tod_ns: u64,
    /// The recording clock's ns at the same point.
    pub clockid_ns: u64,
}

/// One AUXTRACE index entry: where an AUXTRACE record is in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuxtraceIndexEntry {
    /// File offset of the AUXTRACE record's header.
    pub file_offset: u64,
    /// The record's header.size (perf checks it against the record).
    pub size: u64,
}

/// One feature section as read: where it was and its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section<'a> {
    /// File offset of the section (file mode), or of its HEADER_FEATURE record (pipe mode).
    pub offset: u64,
    pub data: &'a [u8],
}

/// The feature sections of a perf.data file or stream, by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Features<'a> {
    order: ByteOrder,
    sections: BTreeMap<u32, Section<'a>>,
}

macro_rules! by_order {
    ($self:ident, $f:ident, $($arg:expr),*) => {
        match $self.order {
            ByteOrder::Little => $f::<Le>($($arg),*),
            ByteOrder::Big => $f::<Be>($($arg),*),
        }
    };
}

impl<'a> Features<'a> {
    pub fn new(order: ByteOrder) -> Self {
        Features {
            order,
            sections: BTreeMap::new(),
        }
    }

    pub(crate) fn insert(&mut self, id: u32, section: Section<'a>) {
        self.sections.insert(id, section);
    }

    /// All sections, by id.
    pub fn sections(&self) -> &BTreeMap<u32, Section<'a>> {
        &self.sections
    }

    /// A section's bytes.
    pub fn raw(&self, id: u32) -> Option<&'a [u8]> {
        self.sections.get(&id).map(|s| s.data)
    }

    fn typed<T>(
        &self,
        id: u32,
        f: impl FnOnce(&'a [u8]) -> Result<T, Malformed>,
    ) -> Result<Option<T>, Error> {
        match self.sections.get(&id) {
            None => Ok(None),
            Some(s) => f(s.data).map(Some).map_err(|m| Error::Feature {
                feature: id::name(id),
                offset: s.offset,
                what: m.0,
            }),
        }
    }

    fn string(&self, fid: u32) -> Result<Option<String>, Error> {
        self.typed(fid, |d| by_order!(self, read_string_section, d))
    }

    pub fn hostname(&self) -> Result<Option<String>, Error> {
        self.string(id::HOSTNAME)
    }
    pub fn osrelease(&self) -> Result<Option<String>, Error> {
        self.string(id::OSRELEASE)
    }
    pub fn version(&self) -> Result<Option<String>, Error> {
        self.string(id::VERSION)
    }
    pub fn arch(&self) -> Result<Option<String>, Error> {
        self.string(id::ARCH)
    }
    pub fn cpudesc(&self) -> Result<Option<String>, Error> {
        self.string(id::CPUDESC)
    }
    /// CPUID, e.g. "GenuineIntel,6,78,3" (vendor, family, model, stepping).
    pub fn cpuid(&self) -> Result<Option<String>, Error> {
        self.string(id::CPUID)
    }
    pub fn nrcpus(&self) -> Result<Option<NrCpus>, Error> {
        self.typed(id::NRCPUS, |d| by_order!(self, read_nrcpus, d))
    }
    pub fn cmdline(&self) -> Result<Option<Vec<String>>, Error> {
        self.typed(id::CMDLINE, |d| by_order!(self, read_cmdline, d))
    }
    pub fn build_ids(&self) -> Result<Option<Vec<BuildIdEntry>>, Error> {
        self.typed(id::BUILD_ID, |d| by_order!(self, read_build_ids, d))
    }
    pub fn event_desc(&self) -> Result<Option<Vec<EventDesc>>, Error> {
        self.typed(id::EVENT_DESC, |d| by_order!(self, read_event_desc, d))
    }
    /// CLOCKID: the clock's resolution in ns.
    pub fn clockid_res_ns(&self) -> Result<Option<u64>, Error> {
        self.typed(id::CLOCKID, |d| by_order!(self, read_u64_section, d))
    }
    pub fn clock_data(&self) -> Result<Option<ClockData>, Error> {
        self.typed(id::CLOCK_DATA, |d| by_order!(self, read_clock_data, d))
    }
    /// AUXTRACE: the index of AUXTRACE records.
    pub fn auxtrace_index(&self) -> Result<Option<Vec<AuxtraceIndexEntry>>, Error> {
        self.typed(id::AUXTRACE, |d| by_order!(self, read_auxtrace_index, d))
    }
}

fn read_string<E: Endian>(c: &mut Cursor<'_, E>) -> Result<String, Malformed> {
    let len = c.u32("string length")?;
    Ok(c_string(c.bytes(len as usize, "string")?))
}

fn read_string_section<E: Endian>(d: &[u8]) -> Result<String, Malformed> {
    read_string(&mut Cursor::<E>::new(d))
}

fn read_u64_section<E: Endian>(d: &[u8]) -> Result<u64, Malformed> {
    Cursor::<E>::new(d).u64("value")
}

fn read_nrcpus<E: Endian>(d: &[u8]) -> Result<NrCpus, Malformed> {
    let mut c = Cursor::<E>::new(d);
    Ok(NrCpus {
        available: c.u32("nr_cpus_available")?,
        online: c.u32("nr_cpus_online")?,
    })
}

fn read_cmdline<E: Endian>(d: &[u8]) -> Result<Vec<String>, Malformed> {
    let mut c = Cursor::<E>::new(d);
    let n = c.u32("argc")?;
    let n = c.count(u64::from(n), 4, "argv")?;
    (0..n).map(|_| read_string(&mut c)).collect()
}

fn read_build_ids<E: Endian>(d: &[u8]) -> Result<Vec<BuildIdEntry>, Malformed> {
    let mut c = Cursor::<E>::new(d);
    let mut v = Vec::new();
    while c.remaining() > 0 {
        let start = c.pos();
        let _kind = c.u32("entry type")?;
        let misc = c.u16("entry misc")?;
        let size = c.u16("entry size")?;
        let body_len = usize::from(size).checked_sub(8).filter(|&n| n >= 28).ok_or_else(|| {
            Malformed(format!("build-id entry at +{start:#x} has size {size}, below the 36 bytes of its fields"))
        })?;
        let mut e = Cursor::<E>::new(c.bytes(body_len, "build-id entry")?);
        let pid = e.u32("pid")? as i32;
        let data = e.bytes(20, "build_id")?;
        let len = e.u8("build_id size")?;
        let _r = e.bytes(3, "reserved")?;
        let build_id = if misc & MISC_BUILD_ID_SIZE != 0 {
            data.get(..usize::from(len))
                .ok_or_else(|| Malformed(format!("build-id size {len} exceeds 20")))?
                .to_vec()
        } else {
            data.to_vec()
        };
        v.push(BuildIdEntry {
            misc,
            pid,
            build_id,
            filename: c_string(e.rest()),
        });
    }
    Ok(v)
}

fn read_event_desc<E: Endian>(d: &[u8]) -> Result<Vec<EventDesc>, Malformed> {
    let mut c = Cursor::<E>::new(d);
    let nre = c.u32("nr events")?;
    let sz = c.u32("attr size")? as usize;
    let nre = c.count(u64::from(nre), sz.max(1), "events")?;
    let mut v = Vec::with_capacity(nre);
    for _ in 0..nre {
        let raw = c.bytes(sz, "attr")?;
        let (attr, _) = Attr::parse::<E>(raw)?;
        let nr_ids = c.u32("nr ids")?;
        let name = read_string(&mut c)?;
        let n = c.count(u64::from(nr_ids), 8, "ids")?;
        let ids = (0..n).map(|_| c.u64("id")).collect::<Result<_, _>>()?;
        v.push(EventDesc { attr, name, ids });
    }
    Ok(v)
}

fn read_clock_data<E: Endian>(d: &[u8]) -> Result<ClockData, Malformed> {
    let mut c = Cursor::<E>::new(d);
    Ok(ClockData {
        version: c.u32("version")?,
        clockid: c.u32("clockid")?,
        tod_ns: c.u64("tod_ns")?,
        clockid_ns: c.u64("clockid_ns")?,
    })
}

fn read_auxtrace_index<E: Endian>(d: &[u8]) -> Result<Vec<AuxtraceIndexEntry>, Malformed> {
    let mut c = Cursor::<E>::new(d);
    let nr = c.u64("nr")?;
    let n = c.count(nr, 16, "entries")?;
    (0..n)
        .map(|_| {
            Ok(AuxtraceIndexEntry {
                file_offset: c.u64("file_offset")?,
                size: c.u64("sz")?,
            })
        })
        .collect()
}

// ---- encoders (little-endian, as perf writes them) ----

fn put_string(b: &mut Buf, s: &str) -> std::io::Result<()> {
    let p = padded_str(s, NAME_ALIGN);
    b.u32(p.len() as u32)?;
    b.bytes(&p)
}

/// A string section (HOSTNAME, OSRELEASE, VERSION, ARCH, CPUDESC, CPUID).
pub fn encode_string(s: &str) -> Vec<u8> {
    let mut b = Buf::buf();
    let _ = put_string(&mut b, s);
    b.into_inner()
}

pub fn encode_nrcpus(n: NrCpus) -> Vec<u8> {
    let mut b = Buf::buf();
    let _ = b.u32(n.available).and_then(|_| b.u32(n.online));
    b.into_inner()
}

/// CMDLINE; `argv[0]` is by perf's convention the recorder's binary.
pub fn encode_cmdline(argv: &[String]) -> Vec<u8> {
    let mut b = Buf::buf();
    let _ = (|| {
        b.u32(argv.len() as u32)?;
        argv.iter().try_for_each(|a| put_string(&mut b, a))
    })();
    b.into_inner()
}

/// BUILD_ID. Fails on a build-id longer than 20 bytes or an entry over 65535 bytes.
pub fn encode_build_ids(entries: &[BuildIdEntry]) -> Result<Vec<u8>, Error> {
    let mut b = Buf::buf();
    for e in entries {
        if e.build_id.len() > 20 {
            return Err(Error::unwritable(
                "BUILD_ID feature",
                format!("a {}-byte build-id", e.build_id.len()),
            ));
        }
        let name = padded_str(&e.filename, NAME_ALIGN);
        let size = u16::try_from(36 + name.len()).map_err(|_| {
            Error::unwritable(
                "BUILD_ID feature",
                format!("file name of {} bytes", e.filename.len()),
            )
        })?;
        b.u32(0)?;
        b.u16(e.misc)?;
        b.u16(size)?;
        b.u32(e.pid as u32)?;
        b.bytes(&e.build_id)?;
        b.zeros(20 - e.build_id.len())?;
        b.u8(if e.misc & MISC_BUILD_ID_SIZE != 0 {
            e.build_id.len() as u8
        } else {
            0
        })?;
        b.zeros(3)?;
        b.bytes(&name)?;
    }
    Ok(b.into_inner())
}

/// EVENT_DESC. Every attr is written with the size of the first (perf's `sizeof(attr)`).
pub fn encode_event_desc(events: &[EventDesc]) -> Result<Vec<u8>, Error> {
    let sz = events
        .first()
        .map_or(crate::attr::ATTR_SIZE_VER8 as usize, |e| {
            e.attr.encoded_len()
        });
    let mut b = Buf::buf();
    b.u32(events.len() as u32)?;
    b.u32(sz as u32)?;
    for e in events {
        if e.attr.encoded_len() != sz {
            return Err(Error::unwritable(
                "EVENT_DESC feature",
                "attrs of different sizes",
            ));
        }
        e.attr.write(&mut b)?;
        b.u32(e.ids.len() as u32)?;
        put_string(&mut b, &e.name)?;
        for id in &e.ids {
            b.u64(*id)?;
        }
    }
    Ok(b.into_inner())
}

pub fn encode_u64(v: u64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

pub fn encode_clock_data(c: ClockData) -> Vec<u8> {
    let mut v = Vec::with_capacity(24);
    v.extend_from_slice(&c.version.to_le_bytes());
    v.extend_from_slice(&c.clockid.to_le_bytes());
    v.extend_from_slice(&c.tod_ns.to_le_bytes());
    v.extend_from_slice(&c.clockid_ns.to_le_bytes());
    v
}

pub fn encode_auxtrace_index(entries: &[AuxtraceIndexEntry]) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + 16 * entries.len());
    v.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for e in entries {
        v.extend_from_slice(&e.file_offset.to_le_bytes());
        v.extend_from_slice(&e.size.to_le_bytes());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn features(id: u32, data: &[u8]) -> Features<'_> {
        let mut f = Features::new(ByteOrder::Little);
        f.insert(id, Section { offset: 0, data });
        f
    }

    #[test]
    fn typed_sections_round_trip() {
        let s = encode_string("GenuineIntel,6,78,3");
        assert_eq!(s.len(), 68);
        assert_eq!(
            features(id::CPUID, &s).cpuid().unwrap().unwrap(),
            "GenuineIntel,6,78,3"
        );

        let n = NrCpus {
            available: 4,
            online: 3,
        };
        assert_eq!(
            features(id::NRCPUS, &encode_nrcpus(n)).nrcpus().unwrap(),
            Some(n)
        );

        let argv: Vec<String> = ["/usr/bin/perf", "record", "-e", "intel_pt//"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            features(id::CMDLINE, &encode_cmdline(&argv))
                .cmdline()
                .unwrap(),
            Some(argv)
        );

        let ids = vec![
            BuildIdEntry {
                misc: 1,
                pid: -1,
                build_id: vec![0xab; 20],
                filename: "[kernel.kallsyms]".into(),
            },
            BuildIdEntry {
                misc: 2 | MISC_BUILD_ID_SIZE,
                pid: 42,
                build_id: vec![1, 2, 3, 4, 5, 6, 7, 8],
                filename: "/bin/ls".into(),
            },
        ];
        let enc = encode_build_ids(&ids).unwrap();
        let back = features(id::BUILD_ID, &enc).build_ids().unwrap().unwrap();
        assert_eq!(back, ids);
        assert_eq!(encode_build_ids(&back).unwrap(), enc);

        let ev = vec![
            EventDesc {
                attr: Attr {
                    kind: 8,
                    size: 128,
                    config: 0x300e601,
                    ..Attr::default()
                },
                name: "intel_pt//".into(),
                ids: vec![1, 2],
            },
            EventDesc {
                attr: Attr {
                    kind: 1,
                    size: 128,
                    config: 9,
                    ..Attr::default()
                },
                name: "dummy:u".into(),
                ids: vec![],
            },
        ];
        let enc = encode_event_desc(&ev).unwrap();
        assert_eq!(
            features(id::EVENT_DESC, &enc).event_desc().unwrap(),
            Some(ev)
        );

        let cd = ClockData {
            version: 1,
            clockid: 1,
            tod_ns: 5,
            clockid_ns: 6,
        };
        assert_eq!(
            features(id::CLOCK_DATA, &encode_clock_data(cd))
                .clock_data()
                .unwrap(),
            Some(cd)
        );
        assert_eq!(
            features(id::CLOCKID, &encode_u64(1))
                .clockid_res_ns()
                .unwrap(),
            Some(1)
        );

        let ix = vec![AuxtraceIndexEntry {
            file_offset: 0x29c0,
            size: 48,
        }];
        assert_eq!(
            features(id::AUXTRACE, &encode_auxtrace_index(&ix))
                .auxtrace_index()
                .unwrap(),
            Some(ix)
        );
    }

    #[test]
    fn truncated_sections_are_errors() {
        let ev = encode_event_desc(&[EventDesc {
            attr: Attr {
                size: 112,
                ..Attr::default()
            },
            name: "x".into(),
            ids: vec![3],
        }])
        .unwrap();
        let bid = encode_build_ids(&[BuildIdEntry {
            misc: 0,
            pid: 0,
            build_id: vec![1; 20],
            filename: "/a".into(),
        }])
        .unwrap();
        let s = encode_string("hello");
        let cmd = encode_cmdline(&["a".into()]);
        let ix = encode_auxtrace_index(&[AuxtraceIndexEntry {
            file_offset: 1,
            size: 2,
        }]);
        for cut in 0..ev.len() {
            assert!(features(id::EVENT_DESC, &ev[..cut]).event_desc().is_err());
        }
        for cut in 1..bid.len() {
            assert!(features(id::BUILD_ID, &bid[..cut]).build_ids().is_err());
        }
        for cut in 0..s.len() {
            assert!(features(id::HOSTNAME, &s[..cut]).hostname().is_err());
        }
        for cut in 0..cmd.len() {
            assert!(features(id::CMDLINE, &cmd[..cut]).cmdline().is_err());
        }
        for cut in 0..ix.len() {
            assert!(features(id::AUXTRACE, &ix[..cut]).auxtrace_index().is_err());
        }
        // A huge count is rejected before any allocation.
        let mut huge = ix.clone();
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(features(id::AUXTRACE, &huge).auxtrace_index().is_err());
    }
}
