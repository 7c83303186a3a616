//! Writing perf.data, in file mode over a `Write + Seek` sink and in pipe mode
//! over any `Write` (for `ptrec -o -`). Records go through the same
//! serializer as everything else ([`crate::serialize`]); all integers are
//! little-endian.
//!
//! File layout, as `perf record` writes it: the 104-byte header, the ids of
//! every attr, the attrs section (`perf_event_attr` + ids `perf_file_section`
//! each), the data records, then the feature section table and the sections,
//! and finally the header rewritten with the data size and the feature bitmap.
//!
//! The header is valid from the start: data size 0 and no features, as
//! `perf record` writes it before its exit handler runs, and
//! [`FileWriter::sync_header`] updates the data size while records are
//! written. A writer killed before [`FileWriter::finish`] so leaves a file
//! that perf reads up to the last synced size and our reader
//! ([`crate::file`]) up to its last complete record.
//!
//! A writer that learns the ids of an attr only as its instances appear
//! (ptsim opens a trace buffer per thread as threads start) gives them with
//! [`FileWriter::set_ids`]. Made with [`FileWriter::with_id_room`], the file
//! keeps room for that many ids before the attrs, where perf puts them, and
//! [`FileWriter::finish`] writes them there: a copy of the file cut anywhere
//! in its data then still names its events. Ids that do not fit go after the
//! feature sections (perf looks for the feature table right after the
//! data); either way the attrs section points at them, and perf and our
//! reader find ids wherever it says they are.
//!
//! AUXTRACE records are indexed as they are written and the index is stored
//! as the AUXTRACE feature, which perf uses to queue the trace buffers of the
//! whole file before decoding (`auxtrace_queues__process_index`); perf checks
//! each entry's size against the record's `header.size`.

use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom, Write};

use crate::attr::{AttrSet, ATTR_SIZE_VER8};
use crate::error::Error;
use crate::feature::{self, AuxtraceIndexEntry};
use crate::file::{FILE_HEADER_LEN, MAGIC, PIPE_HEADER_LEN, SECTION_LEN};
use crate::parse::HEADER_LEN;
use crate::record::{kind, Event, Record};
use crate::serialize::serialize_event;
use crate::sink::{Buf, Sink};

/// A file-mode perf.data writer. The sink must be empty (positioned at 0).
#[derive(Debug)]
pub struct FileWriter<W: Write + Seek> {
    sink: Sink<W>,
    attrs: AttrSet,
    attr_size: u64,
    attrs_section: (u64, u64),
    data_offset: u64,
    features: BTreeMap<u32, Vec<u8>>,
    index: Vec<AuxtraceIndexEntry>,
    auto_index: bool,
    /// Ids were changed after the start ([`FileWriter::set_ids`]).
    late_ids: bool,
    /// Where ids may go before the attrs: (offset, bytes).
    ids_room: (u64, u64),
    buf: Vec<u8>,
}

impl<W: Write + Seek> FileWriter<W> {
    /// Writes the header placeholder, the ids and the attrs. All attrs must
    /// have the same size (perf reads them with one stride).
    pub fn new(inner: W, attrs: AttrSet) -> Result<Self, Error> {
        Self::with_id_room(inner, attrs, 0)
    }

    /// As [`FileWriter::new`], with room for `room` more ids (8 bytes each)
    /// before the attrs, for the ids given later with
    /// [`FileWriter::set_ids`].
    pub fn with_id_room(inner: W, attrs: AttrSet, room: usize) -> Result<Self, Error> {
        let attr_len = attrs
            .entries()
            .first()
            .map_or(ATTR_SIZE_VER8 as usize, |e| e.attr.encoded_len());
        if attrs
            .entries()
            .iter()
            .any(|e| e.attr.encoded_len() != attr_len)
        {
            return Err(Error::unwritable(
                "attrs section",
                "attrs of different sizes",
            ));
        }
        let mut sink = Sink::new(inner, 0);
        // Placeholder until the attrs section's place is known (below).
        sink.zeros(FILE_HEADER_LEN as usize)?;
        let mut ids_at = Vec::with_capacity(attrs.len());
        let ids_room_start = sink.pos();
        for e in attrs.entries() {
            ids_at.push((sink.pos(), 8 * e.ids.len() as u64));
            for id in &e.ids {
                sink.u64(*id)?;
            }
        }
        sink.zeros(room.saturating_mul(8))?;
        let ids_room = (ids_room_start, sink.pos() - ids_room_start);
        let attrs_offset = sink.pos();
        let mut b = Buf::buf();
        for (e, (off, size)) in attrs.entries().iter().zip(&ids_at) {
            e.attr.write(&mut b)?;
            b.u64(*off)?;
            b.u64(*size)?;
        }
        sink.bytes(b.as_slice())?;
        let data_offset = sink.pos();
        let mut w = FileWriter {
            sink,
            attr_size: attr_len as u64 + SECTION_LEN,
            attrs_section: (attrs_offset, data_offset - attrs_offset),
            attrs,
            data_offset,
            features: BTreeMap::new(),
            index: Vec::new(),
            auto_index: true,
            late_ids: false,
            ids_room,
            buf: Vec::new(),
        };
        w.sync_header()?;
        Ok(w)
    }

    /// The file header for `data_size` bytes of records and these features.
    fn header(&self, data_size: u64, bitmap: [u64; 4]) -> Result<Buf, Error> {
        let mut h = Buf::buf();
        h.u64(MAGIC)?;
        h.u64(FILE_HEADER_LEN)?;
        h.u64(self.attr_size)?;
        h.u64(self.attrs_section.0)?;
        h.u64(self.attrs_section.1)?;
        h.u64(self.data_offset)?;
        h.u64(data_size)?;
        h.u64(0)?;
        h.u64(0)?;
        for w in bitmap {
            h.u64(w)?;
        }
        Ok(h)
    }

    /// Rewrites the header with the data size so far and no features, so
    /// that a file whose writer dies before [`FileWriter::finish`] is
    /// readable up to here (by perf too). The records after the last sync
    /// are found by our reader, which reads such a file to its last
    /// complete record.
    pub fn sync_header(&mut self) -> Result<(), Error> {
        let data_size = self.sink.pos() - self.data_offset;
        let h = self.header(data_size, [0; 4])?;
        let inner = self.sink.get_mut();
        inner.seek(SeekFrom::Start(0))?;
        inner.write_all(h.as_slice())?;
        inner.seek(SeekFrom::End(0))?;
        Ok(())
    }

    /// The attrs records are laid out with.
    pub fn attrs(&self) -> &AttrSet {
        &self.attrs
    }

    /// File offset of the next record.
    pub fn pos(&self) -> u64 {
        self.sink.pos()
    }

    /// The sink (what was written so far, for a memory sink).
    pub fn get_ref(&self) -> &W {
        self.sink.get_ref()
    }

    /// The sink, for calls that write nothing to it (bytes written here
    /// would not be counted in the records' offsets).
    pub fn get_mut(&mut self) -> &mut W {
        self.sink.get_mut()
    }

    /// Writes one record (and the data following an AUXTRACE record); returns its offset.
    pub fn write_event(&mut self, ev: &Event<'_>) -> Result<u64, Error> {
        self.buf.clear();
        let rec_len = serialize_event(&self.attrs, ev, &mut self.buf)?;
        let at = self.sink.pos();
        if matches!(ev.record, Record::Auxtrace(_)) {
            self.index.push(AuxtraceIndexEntry {
                file_offset: at,
                size: rec_len as u64,
            });
        }
        self.sink.bytes(&self.buf)?;
        Ok(at)
    }

    /// Writes a record's bytes as they are (little-endian, e.g. from a
    /// perf ring), with the data following it for AUXTRACE; returns its offset.
    pub fn write_raw(&mut self, record: &[u8], following: &[u8]) -> Result<u64, Error> {
        check_raw(record)?;
        let at = self.sink.pos();
        if record.get(..4) == Some(&kind::AUXTRACE.to_le_bytes()) {
            self.index.push(AuxtraceIndexEntry {
                file_offset: at,
                size: record.len() as u64,
            });
        }
        self.sink.bytes(record)?;
        self.sink.bytes(following)?;
        Ok(at)
    }

    /// Sets a feature section's bytes (see [`crate::feature`] for encoders).
    pub fn set_feature(&mut self, id: u32, data: Vec<u8>) -> Result<(), Error> {
        if id == feature::id::RESERVED || id >= feature::id::BITS {
            return Err(Error::unwritable(
                "feature section",
                format!("feature id {id} is outside 1..256"),
            ));
        }
        self.features.insert(id, data);
        Ok(())
    }

    /// Replaces the ids of the attr at `idx` (given to [`FileWriter::new`]
    /// with none or only some of them). Records whose sample id names one of
    /// the new ids must be written after this call. The ids are stored at
    /// [`FileWriter::finish`]; a file left unfinished keeps the ids given at
    /// the start.
    pub fn set_ids(&mut self, idx: usize, ids: Vec<u64>) -> Result<(), Error> {
        if !self.attrs.set_ids(idx, ids) {
            return Err(Error::unwritable(
                "attrs section",
                format!("no attr #{idx} to set ids of"),
            ));
        }
        self.late_ids = true;
        Ok(())
    }

    /// Whether to store the index of the AUXTRACE records written (default:
    /// yes, when there are any; it replaces an AUXTRACE section set by hand).
    pub fn set_auxtrace_index(&mut self, on: bool) {
        self.auto_index = on;
    }

    /// Writes the feature sections and the final header; returns the sink.
    pub fn finish(mut self) -> Result<W, Error> {
        let data_size = self.sink.pos() - self.data_offset;
        if self.auto_index && !self.index.is_empty() {
            self.features.insert(
                feature::id::AUXTRACE,
                feature::encode_auxtrace_index(&self.index),
            );
        }
        let table = self.sink.pos();
        let mut next = table + SECTION_LEN * self.features.len() as u64;
        let mut bitmap = [0u64; 4];
        for (id, data) in &self.features {
            bitmap[(id / 64) as usize] |= 1 << (id % 64);
            self.sink.u64(next)?;
            self.sink.u64(data.len() as u64)?;
            next += data.len() as u64;
        }
        for data in self.features.values() {
            self.sink.bytes(data)?;
        }
        // perf looks for the feature table right after the data: late ids
        // that do not fit the room before the attrs go after the feature
        // sections.
        if self.late_ids {
            self.write_late_ids()?;
        }
        let h = self.header(data_size, bitmap)?;
        let mut inner = self.sink.into_inner();
        inner.seek(SeekFrom::Start(0))?;
        inner.write_all(h.as_slice())?;
        inner.seek(SeekFrom::End(0))?;
        inner.flush()?;
        Ok(inner)
    }
}

impl<W: Write + Seek> FileWriter<W> {
    /// Every attr's ids at the end, and the attrs section (same size,
    /// same place) rewritten to point at them; the ids written at the start
    /// stay as unused bytes.
    fn write_late_ids(&mut self) -> Result<(), Error> {
        let total: u64 = self
            .attrs
            .entries()
            .iter()
            .map(|e| 8 * e.ids.len() as u64)
            .sum();
        let in_room = total <= self.ids_room.1;
        let mut section = Buf::buf();
        let mut at = if in_room {
            self.ids_room.0
        } else {
            self.sink.pos()
        };
        for e in self.attrs.entries() {
            e.attr.write(&mut section)?;
            section.u64(at)?;
            section.u64(8 * e.ids.len() as u64)?;
            at += 8 * e.ids.len() as u64;
        }
        if section.as_slice().len() as u64 != self.attrs_section.1 {
            return Err(Error::unwritable(
                "attrs section",
                "its size changed since the start",
            ));
        }
        if in_room {
            let mut ids = Buf::buf();
            for e in self.attrs.entries() {
                for id in &e.ids {
                    ids.u64(*id)?;
                }
            }
            let inner = self.sink.get_mut();
            inner.seek(SeekFrom::Start(self.ids_room.0))?;
            inner.write_all(ids.as_slice())?;
        } else {
            for e in self.attrs.entries() {
                for id in &e.ids {
                    self.sink.u64(*id)?;
                }
            }
        }
        let inner = self.sink.get_mut();
        inner.seek(SeekFrom::Start(self.attrs_section.0))?;
        inner.write_all(section.as_slice())?;
        inner.seek(SeekFrom::End(0))?;
        Ok(())
    }
}

/// A pipe-mode perf.data writer: the 16-byte pipe header, then HEADER_ATTR
/// records for the attrs; features are HEADER_FEATURE records.
#[derive(Debug)]
pub struct PipeWriter<W: Write> {
    sink: Sink<W>,
    attrs: AttrSet,
    buf: Vec<u8>,
}

impl<W: Write> PipeWriter<W> {
    /// Writes the pipe header and one HEADER_ATTR record per attr.
    pub fn new(inner: W, attrs: AttrSet) -> Result<Self, Error> {
        let mut sink = Sink::new(inner, 0);
        sink.u64(MAGIC)?;
        sink.u64(PIPE_HEADER_LEN)?;
        let mut w = PipeWriter {
            sink,
            attrs: AttrSet::new(),
            buf: Vec::new(),
        };
        for e in attrs.entries() {
            w.write_event(&Event {
                misc: 0,
                record: Record::HeaderAttr {
                    attr: e.attr,
                    ids: e.ids.clone(),
                },
                sample_id: Default::default(),
            })?;
        }
        w.attrs = attrs;
        Ok(w)
    }

    pub fn attrs(&self) -> &AttrSet {
        &self.attrs
    }

    /// Stream offset of the next record.
    pub fn pos(&self) -> u64 {
        self.sink.pos()
    }

    /// Writes a HEADER_FEATURE record (at most 65519 bytes of data).
    pub fn write_feature(&mut self, id: u32, data: &[u8]) -> Result<u64, Error> {
        if id == feature::id::RESERVED || id >= feature::id::BITS {
            return Err(Error::unwritable(
                "HEADER_FEATURE",
                format!("feature id {id} is outside 1..256"),
            ));
        }
        self.write_event(&Event {
            misc: 0,
            record: Record::HeaderFeature {
                feature: u64::from(id),
                data: data.into(),
            },
            sample_id: Default::default(),
        })
    }

    /// Writes one record (and the data following an AUXTRACE record); returns its offset.
    pub fn write_event(&mut self, ev: &Event<'_>) -> Result<u64, Error> {
        self.buf.clear();
        serialize_event(&self.attrs, ev, &mut self.buf)?;
        let at = self.sink.pos();
        self.sink.bytes(&self.buf)?;
        Ok(at)
    }

    /// Writes a record's bytes as they are, with the data following it.
    pub fn write_raw(&mut self, record: &[u8], following: &[u8]) -> Result<u64, Error> {
        check_raw(record)?;
        let at = self.sink.pos();
        self.sink.bytes(record)?;
        self.sink.bytes(following)?;
        Ok(at)
    }

    /// Flushes and returns the sink.
    pub fn finish(mut self) -> Result<W, Error> {
        self.sink.get_mut().flush()?;
        Ok(self.sink.into_inner())
    }
}

fn check_raw(record: &[u8]) -> Result<(), Error> {
    let size = record.get(6..8).map(|s| u16::from_le_bytes([s[0], s[1]]));
    if record.len() < HEADER_LEN
        || size != Some(record.len() as u16)
        || record.len() > usize::from(u16::MAX)
    {
        return Err(Error::unwritable(
            "raw record",
            format!("{} bytes whose header.size is {size:?}", record.len()),
        ));
    }
    Ok(())
}
