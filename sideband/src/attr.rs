//! struct perf_event_attr (`include/uapi/linux/perf_event.h`), every size
//! version from VER0 (64 bytes) to the current one, and [`AttrSet`]: the attrs
//! of a recording with their sample ids, which maps each record to the attr
//! whose `sample_type` lays it out (as perf's evlist does).

use std::collections::HashMap;

use crate::endian::{Cursor, Endian, Malformed};
use crate::sample::SampleFormat;
use crate::sink::Buf;

/// Sizes of the published perf_event_attr versions.
pub const ATTR_SIZE_VER0: u32 = 64;
pub const ATTR_SIZE_VER1: u32 = 72;
pub const ATTR_SIZE_VER2: u32 = 80;
pub const ATTR_SIZE_VER3: u32 = 96;
pub const ATTR_SIZE_VER4: u32 = 104;
pub const ATTR_SIZE_VER5: u32 = 112;
pub const ATTR_SIZE_VER6: u32 = 120;
pub const ATTR_SIZE_VER7: u32 = 128;
pub const ATTR_SIZE_VER8: u32 = 136;

/// Bits of [`Attr::flags`] (the perf_event_attr bitfield word).
pub mod flags {
    pub const DISABLED: u64 = 1 << 0;
    pub const INHERIT: u64 = 1 << 1;
    pub const PINNED: u64 = 1 << 2;
    pub const EXCLUSIVE: u64 = 1 << 3;
    pub const EXCLUDE_USER: u64 = 1 << 4;
    pub const EXCLUDE_KERNEL: u64 = 1 << 5;
    pub const EXCLUDE_HV: u64 = 1 << 6;
    pub const EXCLUDE_IDLE: u64 = 1 << 7;
    pub const MMAP: u64 = 1 << 8;
    pub const COMM: u64 = 1 << 9;
    pub const FREQ: u64 = 1 << 10;
    pub const INHERIT_STAT: u64 = 1 << 11;
    pub const ENABLE_ON_EXEC: u64 = 1 << 12;
    pub const TASK: u64 = 1 << 13;
    pub const WATERMARK: u64 = 1 << 14;
    /// Two bits (15-16).
    pub const PRECISE_IP_MASK: u64 = 3 << 15;
    pub const MMAP_DATA: u64 = 1 << 17;
    pub const SAMPLE_ID_ALL: u64 = 1 << 18;
    pub const EXCLUDE_HOST: u64 = 1 << 19;
    pub const EXCLUDE_GUEST: u64 = 1 << 20;
    pub const EXCLUDE_CALLCHAIN_KERNEL: u64 = 1 << 21;
    pub const EXCLUDE_CALLCHAIN_USER: u64 = 1 << 22;
    pub const MMAP2: u64 = 1 << 23;
    pub const COMM_EXEC: u64 = 1 << 24;
    pub const USE_CLOCKID: u64 = 1 << 25;
    pub const CONTEXT_SWITCH: u64 = 1 << 26;
    pub const WRITE_BACKWARD: u64 = 1 << 27;
    pub const NAMESPACES: u64 = 1 << 28;
    pub const KSYMBOL: u64 = 1 << 29;
    pub const BPF_EVENT: u64 = 1 << 30;
    pub const AUX_OUTPUT: u64 = 1 << 31;
    pub const CGROUP: u64 = 1 << 32;
    pub const TEXT_POKE: u64 = 1 << 33;
    pub const BUILD_ID: u64 = 1 << 34;
    pub const INHERIT_THREAD: u64 = 1 << 35;
    pub const REMOVE_ON_EXEC: u64 = 1 << 36;
    pub const SIGTRAP: u64 = 1 << 37;
}

/// `perf_event_attr.type` values.
pub mod kind {
    pub const HARDWARE: u32 = 0;
    pub const SOFTWARE: u32 = 1;
    pub const TRACEPOINT: u32 = 2;
    pub const HW_CACHE: u32 = 3;
    pub const RAW: u32 = 4;
    pub const BREAKPOINT: u32 = 5;
}

/// A perf_event_attr. `size` is the size it was read with (or will be written
/// with); fields beyond it are zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attr {
    pub kind: u32,
    pub size: u32,
    pub config: u64,
    pub sample_period_or_freq: u64,
    pub sample_type: u64,
    pub read_format: u64,
    /// The bitfield word (disabled, inherit, ..., sample_id_all, ..., context_switch, ...).
    pub flags: u64,
    pub wakeup_events_or_watermark: u32,
    pub bp_type: u32,
    pub config1: u64,
    pub config2: u64,
    pub branch_sample_type: u64,
    pub sample_regs_user: u64,
    pub sample_stack_user: u32,
    pub clockid: i32,
    pub sample_regs_intr: u64,
    pub aux_watermark: u32,
    pub sample_max_stack: u16,
    pub aux_sample_size: u32,
    pub sig_data: u64,
    pub config3: u64,
}

impl Attr {
    /// Bytes this attr occupies in a file: `size`, or VER0 when `size` is 0
    /// (perf's convention for the first ABI).
    pub fn encoded_len(&self) -> usize {
        if self.size == 0 {
            ATTR_SIZE_VER0 as usize
        } else {
            self.size as usize
        }
    }

    /// `sample_id_all` is set: non-sample records carry the sample_id trailer.
    pub fn sample_id_all(&self) -> bool {
        self.flags & flags::SAMPLE_ID_ALL != 0
    }

    /// The record layout this attr's `sample_type` describes.
    pub fn sample_format(&self) -> SampleFormat {
        SampleFormat::new(self.sample_type, self.sample_id_all())
    }

    /// Reads an attr from the start of `bytes`; returns it and the bytes it
    /// occupied (its `size`, VER0 for size 0). Fields past `size` stay zero;
    /// bytes past the fields this crate knows (a newer ABI) are skipped.
    pub fn parse<E: Endian>(bytes: &[u8]) -> Result<(Attr, usize), Malformed> {
        let mut head = Cursor::<E>::new(bytes);
        let _kind = head.u32("attr.type")?;
        let size = head.u32("attr.size")?;
        let len = if size == 0 { ATTR_SIZE_VER0 } else { size };
        if len < ATTR_SIZE_VER0 {
            return Err(Malformed(format!(
                "attr.size {size} is below the first ABI's 64 bytes"
            )));
        }
        let mut c = Cursor::<E>::new(bytes);
        let body = c.bytes(len as usize, "perf_event_attr")?;
        // Pad the known part to the newest layout so that absent fields read as 0.
        let mut full = [0u8; ATTR_SIZE_VER8 as usize];
        let known = body.len().min(full.len());
        full[..known].copy_from_slice(&body[..known]);
        let mut r = Cursor::<E>::new(&full);
        let mut a = Attr {
            kind: r.u32("type")?,
            size: r.u32("size")?,
            config: r.u64("config")?,
            sample_period_or_freq: r.u64("sample_period")?,
            sample_type: r.u64("sample_type")?,
            read_format: r.u64("read_format")?,
            flags: r.u64("flags")?,
            wakeup_events_or_watermark: r.u32("wakeup_events")?,
            bp_type: r.u32("bp_type")?,
            config1: r.u64("config1")?,
            config2: r.u64("config2")?,
            branch_sample_type: r.u64("branch_sample_type")?,
            sample_regs_user: r.u64("sample_regs_user")?,
            sample_stack_user: r.u32("sample_stack_user")?,
            clockid: r.u32("clockid")? as i32,
            sample_regs_intr: r.u64("sample_regs_intr")?,
            aux_watermark: r.u32("aux_watermark")?,
            sample_max_stack: r.u16("sample_max_stack")?,
            ..Attr::default()
        };
        let _reserved_2 = r.u16("__reserved_2")?;
        a.aux_sample_size = r.u32("aux_sample_size")?;
        let _reserved_3 = r.u32("__reserved_3")?;
        a.sig_data = r.u64("sig_data")?;
        a.config3 = r.u64("config3")?;
        Ok((a, len as usize))
    }

    /// Appends the attr in little-endian, [`Attr::encoded_len`] bytes.
    pub fn write(&self, out: &mut Buf) -> std::io::Result<()> {
        let mut full = Buf::buf();
        full.u32(self.kind)?;
        full.u32(self.size)?;
        full.u64(self.config)?;
        full.u64(self.sample_period_or_freq)?;
        full.u64(self.sample_type)?;
        full.u64(self.read_format)?;
        full.u64(self.flags)?;
        full.u32(self.wakeup_events_or_watermark)?;
        full.u32(self.bp_type)?;
        full.u64(self.config1)?;
        full.u64(self.config2)?;
        full.u64(self.branch_sample_type)?;
        full.u64(self.sample_regs_user)?;
        full.u32(self.sample_stack_user)?;
        full.u32(self.clockid as u32)?;
        full.u64(self.sample_regs_intr)?;
        full.u32(self.aux_watermark)?;
        full.u16(self.sample_max_stack)?;
        full.u16(0)?;
        full.u32(self.aux_sample_size)?;
        full.u32(0)?;
        full.u64(self.sig_data)?;
        full.u64(self.config3)?;
        let len = self.encoded_len();
        let bytes = full.as_slice();
        let known = len.min(bytes.len());
        out.bytes(&bytes[..known])?;
        out.zeros(len - known)
    }
}

/// One attr of a recording, the sample ids of its instances (one per CPU or
/// thread it was opened on) and its precomputed record layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttrEntry {
    pub attr: Attr,
    pub ids: Vec<u64>,
    pub format: SampleFormat,
}

/// The attrs of a recording. Records find their attr the way perf does: by
/// the sample id at the position the first attr's `sample_type` gives
/// (IDENTIFIER first in a sample, last in a sample_id trailer); a single attr,
/// an id of 0 (perf's synthesized records) or no id at all means the first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttrSet {
    entries: Vec<AttrEntry>,
    by_id: HashMap<u64, usize>,
    /// Some ids were lost (a file cut before its ids section): a record
    /// with an unknown id takes the first attr when every attr has its
    /// layout.
    ids_lost: bool,
}

impl AttrSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an attr and its ids; returns its index.
    pub fn push(&mut self, attr: Attr, ids: Vec<u64>) -> usize {
        let idx = self.entries.len();
        for &id in &ids {
            self.by_id.entry(id).or_insert(idx);
        }
        self.entries.push(AttrEntry {
            format: attr.sample_format(),
            attr,
            ids,
        });
        idx
    }

    pub fn entries(&self) -> &[AttrEntry] {
        &self.entries
    }

    /// Replaces the ids of the attr at `idx` (for a writer that learns them
    /// as instances appear); `false` if there is no such attr.
    pub fn set_ids(&mut self, idx: usize, ids: Vec<u64>) -> bool {
        let Some(e) = self.entries.get_mut(idx) else {
            return false;
        };
        e.ids = ids;
        self.by_id.clear();
        for (i, e) in self.entries.iter().enumerate() {
            for &id in &e.ids {
                self.by_id.entry(id).or_insert(i);
            }
        }
        true
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, idx: usize) -> Option<&AttrEntry> {
        self.entries.get(idx)
    }

    /// Notes that ids were lost (see [`AttrSet::for_record`]).
    pub fn set_ids_lost(&mut self) {
        self.ids_lost = true;
    }

    /// Whether ids were lost.
    pub fn ids_lost(&self) -> bool {
        self.ids_lost
    }

    /// The index of the attr an id belongs to.
    pub fn index_of_id(&self, id: u64) -> Option<usize> {
        self.by_id.get(&id).copied()
    }

    /// The attr whose layout applies to a record of `kind` (header excluded
    /// from `body`). `None` when the record names an id no attr has, or when
    /// the set is empty.
    pub fn for_record<E: Endian>(&self, kind: u32, body: &[u8]) -> Option<&AttrEntry> {
        let first = self.entries.first()?;
        if self.entries.len() == 1 {
            return Some(first);
        }
        let id = if kind == crate::record::kind::SAMPLE {
            let pos = first.format.id_pos?;
            read_u64_at::<E>(body, pos.checked_mul(8)?)
        } else {
            if !first.format.sample_id_all {
                return Some(first);
            }
            let pos = first.format.is_pos?;
            let off = body.len().checked_sub(pos.checked_mul(8)?)?;
            read_u64_at::<E>(body, off)
        };
        match id {
            // No room for an id: the record is malformed; let its parser say so
            // with the first attr's layout.
            None => Some(first),
            Some(0) => Some(first),
            Some(id) => match self.index_of_id(id) {
                Some(i) => self.entries.get(i),
                None if self.ids_lost && self.entries.iter().all(|e| e.format == first.format) => {
                    Some(first)
                }
                None => None,
            },
        }
    }

    /// The attr for writing an event: by its identifier or id, else the first.
    pub fn for_sample_id(&self, identifier: Option<u64>, id: Option<u64>) -> Option<&AttrEntry> {
        let first = self.entries.first()?;
        if self.entries.len() == 1 {
            return Some(first);
        }
        match identifier.or(id) {
            None | Some(0) => Some(first),
            Some(id) => self.index_of_id(id).and_then(|i| self.entries.get(i)),
        }
    }
}

fn read_u64_at<E: Endian>(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(E::u64(a))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endian::Le;

    #[test]
    fn attr_round_trips_at_every_size() {
        for size in [0, 64, 72, 80, 96, 104, 112, 120, 128, 136, 144] {
            let mut a = Attr {
                kind: 6,
                size,
                config: 0x300e601,
                sample_period_or_freq: 1,
                sample_type: 0x10087,
                read_format: 4,
                flags: flags::SAMPLE_ID_ALL | flags::DISABLED,
                wakeup_events_or_watermark: 3,
                bp_type: 4,
                config1: 5,
                config2: 6,
                branch_sample_type: 7,
                sample_regs_user: 8,
                sample_stack_user: 9,
                clockid: -1,
                sample_regs_intr: 10,
                aux_watermark: 11,
                sample_max_stack: 12,
                aux_sample_size: 13,
                sig_data: 14,
                config3: 15,
            };
            let mut b = Buf::buf();
            a.write(&mut b).unwrap();
            assert_eq!(b.len(), a.encoded_len());
            let (back, used) = Attr::parse::<Le>(b.as_slice()).unwrap();
            assert_eq!(used, a.encoded_len());
            // Fields past the size are not stored.
            let keep = a.encoded_len();
            let zero_past = |a: &mut Attr| {
                if keep < 72 {
                    a.config2 = 0;
                }
                if keep < 80 {
                    a.branch_sample_type = 0;
                }
                if keep < 96 {
                    a.sample_regs_user = 0;
                    a.sample_stack_user = 0;
                    a.clockid = 0;
                }
                if keep < 104 {
                    a.sample_regs_intr = 0;
                }
                if keep < 112 {
                    a.aux_watermark = 0;
                    a.sample_max_stack = 0;
                }
                if keep < 120 {
                    a.aux_sample_size = 0;
                }
                if keep < 128 {
                    a.sig_data = 0;
                }
                if keep < 136 {
                    a.config3 = 0;
                }
            };
            zero_past(&mut a);
            assert_eq!(back, a, "size {size}");
            let mut again = Buf::buf();
            back.write(&mut again).unwrap();
            assert_eq!(again.as_slice(), b.as_slice());
        }
    }

    #[test]
    fn attr_rejects_short_and_undersized() {
        let mut b = Buf::buf();
        Attr {
            size: 112,
            ..Attr::default()
        }
        .write(&mut b)
        .unwrap();
        for cut in 0..112 {
            assert!(Attr::parse::<Le>(&b.as_slice()[..cut]).is_err());
        }
        let mut bad = b.as_slice().to_vec();
        bad[4] = 8; // size 8 < VER0
        assert!(Attr::parse::<Le>(&bad).is_err());
    }
}
