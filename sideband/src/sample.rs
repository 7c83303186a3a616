//! PERF_RECORD_SAMPLE decoded as far as the attr's sample_type describes it,
//! and the sample_id trailer that `sample_id_all` appends to other records.
//! [`SampleFormat`] is computed once per attr and used for every record.

use std::borrow::Cow;

use crate::endian::{Cursor, Endian, Malformed};
use crate::record::SampleId;
use crate::sink::Buf;

/// `perf_event_attr.sample_type` bits.
pub mod sample_type {
    pub const IP: u64 = 1 << 0;
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const ADDR: u64 = 1 << 3;
    pub const READ: u64 = 1 << 4;
    pub const CALLCHAIN: u64 = 1 << 5;
    pub const ID: u64 = 1 << 6;
    pub const CPU: u64 = 1 << 7;
    pub const PERIOD: u64 = 1 << 8;
    pub const STREAM_ID: u64 = 1 << 9;
    pub const RAW: u64 = 1 << 10;
    pub const BRANCH_STACK: u64 = 1 << 11;
    pub const REGS_USER: u64 = 1 << 12;
    pub const STACK_USER: u64 = 1 << 13;
    pub const WEIGHT: u64 = 1 << 14;
    pub const DATA_SRC: u64 = 1 << 15;
    pub const IDENTIFIER: u64 = 1 << 16;
    pub const TRANSACTION: u64 = 1 << 17;
    pub const REGS_INTR: u64 = 1 << 18;
    pub const PHYS_ADDR: u64 = 1 << 19;
    pub const AUX: u64 = 1 << 20;
    pub const CGROUP: u64 = 1 << 21;
    pub const DATA_PAGE_SIZE: u64 = 1 << 22;
    pub const CODE_PAGE_SIZE: u64 = 1 << 23;
    pub const WEIGHT_STRUCT: u64 = 1 << 24;
}

use sample_type as st;

/// Where the fields of a SAMPLE and of the sample_id trailer sit, for one
/// attr (linux-perf-event-reader's `parse_info.rs` idea: computed once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleFormat {
    pub sample_type: u64,
    pub sample_id_all: bool,
    /// Bytes of the sample_id trailer on non-sample kernel records (0 without sample_id_all).
    pub trailer_len: usize,
    /// Index (in u64 words from the start of a SAMPLE body) of the sample id, as perf's `id_pos`.
    pub id_pos: Option<usize>,
    /// Index (in u64 words counted back from the end of a non-sample record) of the id, as perf's `is_pos`.
    pub is_pos: Option<usize>,
}

impl SampleFormat {
    pub fn new(sample_type: u64, sample_id_all: bool) -> Self {
        let has = |b| sample_type & b != 0;
        let trailer_len = if sample_id_all {
            [
                st::TID,
                st::TIME,
                st::ID,
                st::STREAM_ID,
                st::CPU,
                st::IDENTIFIER,
            ]
            .iter()
            .filter(|&&b| has(b))
            .count()
                * 8
        } else {
            0
        };
        let id_pos = if has(st::IDENTIFIER) {
            Some(0)
        } else if has(st::ID) {
            Some(
                [st::IP, st::TID, st::TIME, st::ADDR]
                    .iter()
                    .filter(|&&b| has(b))
                    .count(),
            )
        } else {
            None
        };
        let is_pos = if has(st::IDENTIFIER) {
            Some(1)
        } else if has(st::ID) {
            Some(1 + [st::CPU, st::STREAM_ID].iter().filter(|&&b| has(b)).count())
        } else {
            None
        };
        SampleFormat {
            sample_type,
            sample_id_all,
            trailer_len,
            id_pos,
            is_pos,
        }
    }

    fn has(&self, bit: u64) -> bool {
        self.sample_type & bit != 0
    }

    /// Reads a sample_id trailer (exactly [`SampleFormat::trailer_len`] bytes).
    pub fn parse_sample_id<E: Endian>(&self, trailer: &[u8]) -> Result<SampleId, Malformed> {
        let mut c = Cursor::<E>::new(trailer);
        let mut s = SampleId::default();
        if self.has(st::TID) {
            s.pid = Some(c.u32("sample_id.pid")?);
            s.tid = Some(c.u32("sample_id.tid")?);
        }
        if self.has(st::TIME) {
            s.time = Some(c.u64("sample_id.time")?);
        }
        if self.has(st::ID) {
            s.id = Some(c.u64("sample_id.id")?);
        }
        if self.has(st::STREAM_ID) {
            s.stream_id = Some(c.u64("sample_id.stream_id")?);
        }
        if self.has(st::CPU) {
            s.cpu = Some(c.u32("sample_id.cpu")?);
            let _res = c.u32("sample_id.res")?;
        }
        if self.has(st::IDENTIFIER) {
            s.identifier = Some(c.u64("sample_id.identifier")?);
        }
        Ok(s)
    }

    /// Appends a sample_id trailer; fields the format has but `s` lacks are written as 0.
    pub fn write_sample_id(&self, s: &SampleId, out: &mut Buf) -> std::io::Result<()> {
        if !self.sample_id_all {
            return Ok(());
        }
        if self.has(st::TID) {
            out.u32(s.pid.unwrap_or(0))?;
            out.u32(s.tid.unwrap_or(0))?;
        }
        if self.has(st::TIME) {
            out.u64(s.time.unwrap_or(0))?;
        }
        if self.has(st::ID) {
            out.u64(s.id.unwrap_or(0))?;
        }
        if self.has(st::STREAM_ID) {
            out.u64(s.stream_id.unwrap_or(0))?;
        }
        if self.has(st::CPU) {
            out.u32(s.cpu.unwrap_or(0))?;
            out.u32(0)?;
        }
        if self.has(st::IDENTIFIER) {
            out.u64(s.identifier.unwrap_or(0))?;
        }
        Ok(())
    }

    /// Reads a SAMPLE body (after the header).
    pub fn parse_sample<'a, E: Endian>(&self, body: &'a [u8]) -> Result<Sample<'a>, Malformed> {
        let mut c = Cursor::<E>::new(body);
        let mut s = Sample::default();
        if self.has(st::IDENTIFIER) {
            s.identifier = Some(c.u64("identifier")?);
        }
        if self.has(st::IP) {
            s.ip = Some(c.u64("ip")?);
        }
        if self.has(st::TID) {
            s.pid = Some(c.u32("pid")?);
            s.tid = Some(c.u32("tid")?);
        }
        if self.has(st::TIME) {
            s.time = Some(c.u64("time")?);
        }
        if self.has(st::ADDR) {
            s.addr = Some(c.u64("addr")?);
        }
        if self.has(st::ID) {
            s.id = Some(c.u64("id")?);
        }
        if self.has(st::STREAM_ID) {
            s.stream_id = Some(c.u64("stream_id")?);
        }
        if self.has(st::CPU) {
            s.cpu = Some(c.u32("cpu")?);
            let _res = c.u32("cpu.res")?;
        }
        if self.has(st::PERIOD) {
            s.period = Some(c.u64("period")?);
        }
        s.rest = Cow::Borrowed(c.rest());
        Ok(s)
    }

    /// Appends a SAMPLE body; absent fields the format has are written as 0.
    pub fn write_sample(&self, s: &Sample<'_>, out: &mut Buf) -> std::io::Result<()> {
        if self.has(st::IDENTIFIER) {
            out.u64(s.identifier.unwrap_or(0))?;
        }
        if self.has(st::IP) {
            out.u64(s.ip.unwrap_or(0))?;
        }
        if self.has(st::TID) {
            out.u32(s.pid.unwrap_or(0))?;
            out.u32(s.tid.unwrap_or(0))?;
        }
        if self.has(st::TIME) {
            out.u64(s.time.unwrap_or(0))?;
        }
        if self.has(st::ADDR) {
            out.u64(s.addr.unwrap_or(0))?;
        }
        if self.has(st::ID) {
            out.u64(s.id.unwrap_or(0))?;
        }
        if self.has(st::STREAM_ID) {
            out.u64(s.stream_id.unwrap_or(0))?;
        }
        if self.has(st::CPU) {
            out.u32(s.cpu.unwrap_or(0))?;
            out.u32(0)?;
        }
        if self.has(st::PERIOD) {
            out.u64(s.period.unwrap_or(0))?;
        }
        out.bytes(&s.rest)
    }
}

/// A sample. Fields the attr did not ask for are `None`; what follows PERIOD
/// in the record (READ, CALLCHAIN, RAW, ...) is kept verbatim in `rest` so
/// that the record round-trips.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sample<'a> {
    pub identifier: Option<u64>,
    pub ip: Option<u64>,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub time: Option<u64>,
    pub addr: Option<u64>,
    pub id: Option<u64>,
    pub stream_id: Option<u64>,
    pub cpu: Option<u32>,
    pub period: Option<u64>,
    /// The body bytes after the decoded fields, verbatim.
    pub rest: Cow<'a, [u8]>,
}

impl Sample<'_> {
    /// The identity fields as a [`SampleId`] (what the trailer of other records carries).
    pub fn sample_id(&self) -> SampleId {
        SampleId {
            pid: self.pid,
            tid: self.tid,
            time: self.time,
            id: self.id,
            stream_id: self.stream_id,
            cpu: self.cpu,
            identifier: self.identifier,
        }
    }

    /// A copy that owns its bytes.
    pub fn into_owned(self) -> Sample<'static> {
        Sample {
            rest: Cow::Owned(self.rest.into_owned()),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endian::Le;

    #[test]
    fn positions_match_perf() {
        // intel_pt// in the realdata: IP|TID|TIME|CPU|IDENTIFIER.
        let f = SampleFormat::new(st::IP | st::TID | st::TIME | st::CPU | st::IDENTIFIER, true);
        assert_eq!((f.trailer_len, f.id_pos, f.is_pos), (32, Some(0), Some(1)));
        let f = SampleFormat::new(
            st::IP | st::TID | st::TIME | st::ID | st::CPU | st::STREAM_ID,
            true,
        );
        assert_eq!((f.trailer_len, f.id_pos, f.is_pos), (40, Some(3), Some(3)));
        let f = SampleFormat::new(st::IP | st::TID, false);
        assert_eq!((f.trailer_len, f.id_pos, f.is_pos), (0, None, None));
    }

    #[test]
    fn sample_and_trailer_round_trip() {
        let all = st::IDENTIFIER
            | st::IP
            | st::TID
            | st::TIME
            | st::ADDR
            | st::ID
            | st::STREAM_ID
            | st::CPU
            | st::PERIOD;
        let f = SampleFormat::new(all | st::CALLCHAIN, true);
        let s = Sample {
            identifier: Some(7),
            ip: Some(0xffff_ffff_8100_0000),
            pid: Some(10),
            tid: Some(11),
            time: Some(12),
            addr: Some(13),
            id: Some(7),
            stream_id: Some(14),
            cpu: Some(3),
            period: Some(4000),
            rest: Cow::Owned(vec![1, 0, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9, 9, 9, 9, 9]),
        };
        let mut b = Buf::buf();
        f.write_sample(&s, &mut b).unwrap();
        let back = f.parse_sample::<Le>(b.as_slice()).unwrap();
        assert_eq!(back, s);
        for cut in 0..72 {
            assert!(
                f.parse_sample::<Le>(&b.as_slice()[..cut]).is_err(),
                "cut {cut}"
            );
        }
        let id = s.sample_id();
        let mut t = Buf::buf();
        f.write_sample_id(&id, &mut t).unwrap();
        assert_eq!(t.len(), f.trailer_len);
        assert_eq!(f.parse_sample_id::<Le>(t.as_slice()).unwrap(), id);
    }
}
