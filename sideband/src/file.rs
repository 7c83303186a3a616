//! Reading perf.data (`tools/perf/util/header.c`, `session.c`): file mode
//! (header, attrs and their ids, data section, feature sections) and pipe mode
//! (`perf record -o -`: a 16-byte header, then attrs and features as records).
//!
//! The reader works on `&'a [u8]` and hands out [`Event<'a>`]s whose large
//! payloads (AUXTRACE data) borrow from it. [`crate::bytes::FileBytes`] maps
//! a file (or reads a pipe) to get those bytes.
//!
//! ```text
//! struct perf_file_section { u64 offset; u64 size; };
//! struct perf_file_header {
//!     u64                      magic;        /* "PERFILE2", its byte order is the file's */
//!     u64                      size;         /* sizeof(perf_file_header) = 104 */
//!     u64                      attr_size;    /* sizeof(perf_file_attr): attr + ids section */
//!     struct perf_file_section attrs;
//!     struct perf_file_section data;
//!     struct perf_file_section event_types;  /* unused */
//!     DECLARE_BITMAP(adds_features, 256);    /* one perf_file_section each, after the data */
//! };
//! struct perf_pipe_file_header { u64 magic; u64 size; /* = 16 */ };
//! ```
//!
//! Damaged files are salvaged, each with a warning that says it was cut:
//! * a header never finalized (the recorder was killed): `data.size == 0`,
//!   or a data size synced while recording with no feature sections yet and
//!   more records after it ([`crate::writer::FileWriter::sync_header`]). The
//!   records are read from the data offset up to the last complete one and
//!   there are no features. perf prints "data size field is 0" for the first
//!   (perf 6.1 then reads no records at all) and reads the second up to the
//!   synced size;
//! * a file cut inside its data section: read up to the last complete record,
//!   features ignored;
//! * a file cut inside its feature sections: the data section is read whole,
//!   with the features that are complete.
//! * a pipe-mode stream that ends inside a record is read up to there.

use crate::attr::{Attr, AttrSet};
use crate::bytes::FileBytes;
use crate::endian::{Be, ByteOrder, Cursor, Endian, Le, Malformed};
use crate::error::Error;
use crate::feature::{self, Features, Section};
use crate::parse::{self, RawRecord, RecordHeader, HEADER_LEN};
use crate::record::{kind, Event};

/// perf.data's magic, "PERFILE2", as a little-endian u64.
pub const MAGIC: u64 = 0x3245_4c49_4652_4550;
/// `sizeof(struct perf_file_header)`.
pub const FILE_HEADER_LEN: u64 = 104;
/// `sizeof(struct perf_pipe_file_header)`.
pub const PIPE_HEADER_LEN: u64 = 16;
/// `sizeof(struct perf_file_section)`.
pub const SECTION_LEN: u64 = 16;

/// A `perf_file_section`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileSection {
    pub offset: u64,
    pub size: u64,
}

/// The header of a file-mode perf.data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    pub size: u64,
    pub attr_size: u64,
    pub attrs: FileSection,
    pub data: FileSection,
    pub event_types: FileSection,
    pub adds_features: [u64; 4],
}

impl FileHeader {
    /// Whether feature bit `id` is set.
    pub fn has_feature(&self, id: u32) -> bool {
        self.adds_features
            .get((id / 64) as usize)
            .is_some_and(|w| w >> (id % 64) & 1 != 0)
    }
}

/// A parsed perf.data file or pipe stream over borrowed bytes.
#[derive(Debug, Clone)]
pub struct PerfFile<'a> {
    bytes: &'a [u8],
    order: ByteOrder,
    header: Option<FileHeader>,
    attrs: AttrSet,
    features: Features<'a>,
    data_start: usize,
    data_end: usize,
    /// A file cut inside the trace data of an AUXTRACE record whose 48
    /// bytes are whole: where that record starts (after `data_end`). Its
    /// data present is handed on as a last record with a short payload.
    cut_aux: Option<usize>,
    warnings: Vec<String>,
    /// The mapping `bytes` are, when its pages are to be dropped from
    /// memory once read ([`PerfFile::parse_mapped`]).
    pages: Option<&'a FileBytes>,
}

/// Bytes of records read between two drops of their pages.
pub const RELEASE_EVERY: usize = 1 << 20;

impl<'a> PerfFile<'a> {
    /// [`PerfFile::parse`] of a whole file, whose pages are dropped from
    /// memory as the records are framed (and by [`PerfFile::release`]):
    /// reading a file's records costs a MiB of resident memory, not the
    /// file's size. They stay readable (read again when touched).
    pub fn parse_mapped(bytes: &'a FileBytes) -> Result<Self, Error> {
        let f = Self::parse_with(bytes, Some(bytes))?;
        f.release(f.bytes.get(f.data_start..f.data_end).unwrap_or_default());
        Ok(f)
    }

    /// [`PerfFile::release`] of the file's bytes from offset `from`
    /// (rounded down to a page) to `to`.
    pub fn release_range(&self, from: usize, to: usize) {
        let from = from / 4096 * 4096;
        self.release(self.bytes.get(from..to).unwrap_or_default());
    }

    /// Drops the pages of `part` (a slice of the file) from memory, when
    /// the file was parsed with [`PerfFile::parse_mapped`].
    pub fn release(&self, part: &[u8]) {
        if let Some(pages) = self.pages {
            pages.release(part);
        }
    }

    /// Parses the header, attrs and features and checks the framing of every
    /// record (sizes, AUXTRACE payloads); record bodies are parsed when
    /// iterated with [`PerfFile::events`].
    pub fn parse(bytes: &'a [u8]) -> Result<Self, Error> {
        Self::parse_with(bytes, None)
    }

    fn parse_with(bytes: &'a [u8], pages: Option<&'a FileBytes>) -> Result<Self, Error> {
        let mut m = [0u8; 8];
        m.copy_from_slice(bytes.get(..8).ok_or_else(|| Error::Header {
            what: format!("{} bytes are too few for a perf.data header", bytes.len()),
        })?);
        let magic = u64::from_le_bytes(m);
        if magic == MAGIC {
            Self::parse_impl::<Le>(bytes, pages)
        } else if magic == MAGIC.swap_bytes() {
            Self::parse_impl::<Be>(bytes, pages)
        } else {
            Err(Error::BadMagic { magic })
        }
    }

    fn parse_impl<E: Endian>(bytes: &'a [u8], pages: Option<&'a FileBytes>) -> Result<Self, Error> {
        let hdr_err = |what: String| Error::Header { what };
        let mut c = Cursor::<E>::new(bytes);
        let _magic = c.u64("magic").map_err(|m| hdr_err(m.0))?;
        let size = c.u64("size").map_err(|m| hdr_err(m.0))?;
        let mut f = PerfFile {
            bytes,
            order: E::ORDER,
            header: None,
            attrs: AttrSet::new(),
            features: Features::new(E::ORDER),
            data_start: 0,
            data_end: 0,
            cut_aux: None,
            warnings: Vec::new(),
            pages,
        };
        if size == PIPE_HEADER_LEN {
            f.data_start = PIPE_HEADER_LEN as usize;
            f.scan_pipe::<E>()?;
            return Ok(f);
        }
        // 72 is the header before the feature bitmap existed.
        if size != FILE_HEADER_LEN && size != 72 {
            return Err(hdr_err(format!(
                "header size {size}, expected 104 (file) or 16 (pipe)"
            )));
        }
        let h = Self::read_header::<E>(&mut c, size).map_err(|m| hdr_err(m.0))?;
        f.header = Some(h);
        f.read_attrs::<E>(&h)?;
        let len = bytes.len() as u64;
        if h.data.offset < h.size || h.data.offset > len {
            return Err(hdr_err(format!(
                "data offset {:#x} is outside the file",
                h.data.offset
            )));
        }
        let header_end = h.data.offset.checked_add(h.data.size);
        let no_features = h.adds_features == [0; 4];
        // Whether the file is read to its last complete record, without features.
        let cut = if h.data.size == 0 {
            f.warnings.push(format!(
                "the recording was cut: the header's data size is 0 (the recorder did not finish); \
                 records read from offset {:#x} up to the last complete one, no feature sections",
                h.data.offset
            ));
            true
        } else if header_end.is_none_or(|e| e > len) {
            f.warnings.push(format!(
                "the file was cut inside its data section ({:#x}+{:#x} runs past the end of the \
                 {len}-byte file): records read up to the last complete one, feature sections lost",
                h.data.offset, h.data.size
            ));
            true
        } else if no_features && header_end.is_some_and(|e| e < len) {
            f.warnings.push(format!(
                "the recording was cut: the header has no feature sections and {} bytes follow \
                 its data size (the recorder did not finish); records read from offset {:#x} up \
                 to the last complete one",
                len - header_end.unwrap_or(len),
                h.data.offset
            ));
            true
        } else {
            if no_features {
                // What a recorder killed right after syncing its header
                // leaves (perf always writes features when it finishes).
                f.warnings.push(
                    "the recording may have been cut: the header lists no feature sections \
                     (the recorder did not finish?); no build-ids, CPU or clock data from them"
                        .to_string(),
                );
            }
            false
        };
        f.data_start = h.data.offset as usize;
        f.data_end = if cut {
            len as usize
        } else {
            header_end.unwrap_or(len) as usize
        };
        f.scan::<E>(cut, false)?;
        if !cut {
            if let Err(e) = f.read_features::<E>(&h) {
                f.warnings.push(format!(
                    "the file was cut inside its feature sections ({e}); the data section is read \
                     whole, the features from there on are lost"
                ));
            }
        }
        Ok(f)
    }

    fn read_header<E: Endian>(c: &mut Cursor<'_, E>, size: u64) -> Result<FileHeader, Malformed> {
        let sect = |c: &mut Cursor<'_, E>, what: &str| -> Result<FileSection, Malformed> {
            Ok(FileSection {
                offset: c.u64(what)?,
                size: c.u64(what)?,
            })
        };
        let attr_size = c.u64("attr_size")?;
        let attrs = sect(c, "attrs section")?;
        let data = sect(c, "data section")?;
        let event_types = sect(c, "event_types section")?;
        let mut adds_features = [0u64; 4];
        if size == FILE_HEADER_LEN {
            for w in &mut adds_features {
                *w = c.u64("adds_features")?;
            }
        }
        Ok(FileHeader {
            size,
            attr_size,
            attrs,
            data,
            event_types,
            adds_features,
        })
    }

    fn read_attrs<E: Endian>(&mut self, h: &FileHeader) -> Result<(), Error> {
        if h.attr_size == 0 {
            return Err(Error::Header {
                what: "attr_size is 0".into(),
            });
        }
        let region = h
            .attrs
            .offset
            .checked_add(h.attrs.size)
            .and_then(|end| self.bytes.get(h.attrs.offset as usize..end as usize))
            .ok_or_else(|| Error::Header {
                what: format!(
                    "attrs section {:#x}+{:#x} runs past the end of the file",
                    h.attrs.offset, h.attrs.size
                ),
            })?;
        let stride = usize::try_from(h.attr_size).unwrap_or(usize::MAX);
        for (index, entry) in region.chunks(stride).enumerate() {
            let offset = h.attrs.offset + (index * stride) as u64;
            let err = |what: String| Error::Attr {
                index,
                offset,
                what,
            };
            if entry.len() < stride {
                // perf ignores a partial trailing entry (nr_attrs = size / attr_size).
                break;
            }
            let (attr, used) = Attr::parse::<E>(entry).map_err(|m| err(m.0))?;
            let mut c = Cursor::<E>::new(entry.get(used..).unwrap_or_default());
            let ids_off = c.u64("ids.offset").map_err(|m| err(m.0))?;
            let ids_size = c.u64("ids.size").map_err(|m| err(m.0))?;
            let ids_bytes = match ids_off
                .checked_add(ids_size)
                .and_then(|end| self.bytes.get(ids_off as usize..end as usize))
            {
                Some(b) => b,
                None => {
                    // A file cut before the ids its writer put at the end
                    // (ptsim's and ptrec's before they kept room for them
                    // up front): the data is still there.
                    self.warnings.push(format!(
                        "the file was cut: attr #{index}'s ids ({ids_off:#x}+{ids_size:#x}) lie \
                         past its end; records with an unknown id are read with the first attr's \
                         layout when every attr has it"
                    ));
                    self.attrs.set_ids_lost();
                    &[]
                }
            };
            let mut ic = Cursor::<E>::new(ids_bytes);
            let n = ids_bytes.len() / 8;
            let ids = (0..n)
                .map(|_| ic.u64("id"))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|m| err(m.0))?;
            self.attrs.push(attr, ids);
        }
        Ok(())
    }

    fn read_features<E: Endian>(&mut self, h: &FileHeader) -> Result<(), Error> {
        let table = h.data.offset.saturating_add(h.data.size);
        let mut n = 0u64;
        for fid in 1..feature::id::BITS {
            if !h.has_feature(fid) {
                continue;
            }
            let at = table + n * SECTION_LEN;
            n += 1;
            let ferr = |what: String| Error::Feature {
                feature: feature::id::name(fid),
                offset: at,
                what,
            };
            let entry = self
                .bytes
                .get(at as usize..(at + SECTION_LEN) as usize)
                .ok_or_else(|| {
                    ferr("the feature section table runs past the end of the file".into())
                })?;
            let mut c = Cursor::<E>::new(entry);
            let s = FileSection {
                offset: c.u64("offset").map_err(|m| ferr(m.0))?,
                size: c.u64("size").map_err(|m| ferr(m.0))?,
            };
            let data = s
                .offset
                .checked_add(s.size)
                .and_then(|end| self.bytes.get(s.offset as usize..end as usize))
                .ok_or_else(|| {
                    ferr(format!(
                        "section {:#x}+{:#x} runs past the end of the file",
                        s.offset, s.size
                    ))
                })?;
            self.features.insert(
                fid,
                Section {
                    offset: s.offset,
                    data,
                },
            );
        }
        Ok(())
    }

    /// Pipe mode: frames every record, collects HEADER_ATTR and HEADER_FEATURE.
    fn scan_pipe<E: Endian>(&mut self) -> Result<(), Error> {
        self.data_end = self.bytes.len();
        self.scan::<E>(true, true)
    }

    /// Frames the records from `data_start` to `data_end`. `lenient`: an
    /// incomplete last record ends the data with a warning instead of an error.
    fn scan<E: Endian>(&mut self, lenient: bool, pipe: bool) -> Result<(), Error> {
        let mut pos = self.data_start;
        let mut released = pos;
        let mut warned_compressed = false;
        loop {
            if pos - released >= RELEASE_EVERY {
                self.release_range(released, pos);
                released = pos;
            }
            match next_raw::<E>(self.bytes, pos, self.data_end) {
                Ok(None) => break,
                Ok(Some(r)) => {
                    pos += r.stream_len();
                    if r.header.kind == kind::COMPRESSED && !warned_compressed {
                        warned_compressed = true;
                        self.warnings.push(format!(
                            "COMPRESSED records (perf record -z) are not decompressed; the first is at offset {:#x}",
                            r.offset
                        ));
                    }
                    if pipe {
                        self.pipe_record::<E>(&r)?;
                    }
                }
                Err(Incomplete::Truncated(what)) if lenient => {
                    let rest = self.bytes.get(pos..self.data_end).unwrap_or_default();
                    let aux = RecordHeader::parse::<E>(rest)
                        .filter(|h| h.kind == kind::AUXTRACE && rest.len() > usize::from(h.size));
                    if let Some(h) = aux {
                        // The trace bytes present are decoded: a copy cut in
                        // its first AUXTRACE record still holds most of it.
                        self.cut_aux = Some(pos);
                        self.warnings.push(format!(
                            "the file was cut: the data ends inside the trace data of the AUXTRACE \
                             record at offset {pos:#x} ({what}); its {} bytes present are decoded, \
                             the rest is lost",
                            rest.len() - usize::from(h.size)
                        ));
                        break;
                    }
                    self.warnings.push(format!(
                        "the file was cut: the data ends inside a record at offset {pos:#x} ({what}); \
                         read up to there"
                    ));
                    break;
                }
                Err(Incomplete::Truncated(what)) | Err(Incomplete::Malformed(what)) => {
                    // A damaged header (a size no record has, one past the
                    // data's end): the next record cannot be found, but the
                    // records before it are whole and the trace in them
                    // decodes (it was an error, and nothing decoded).
                    let k = RecordHeader::parse::<E>(self.bytes.get(pos..).unwrap_or_default())
                        .map_or(u32::MAX, |h| h.kind);
                    self.warnings.push(format!(
                        "the {} record at offset {pos:#x} is damaged ({what}): the {} bytes of \
                         records from there on are not read; the trace before it is decoded",
                        kind::name(k),
                        self.data_end - pos
                    ));
                    break;
                }
            }
        }
        self.data_end = pos;
        Ok(())
    }

    fn pipe_record<E: Endian>(&mut self, r: &RawRecord<'a>) -> Result<(), Error> {
        match r.header.kind {
            kind::HEADER_ATTR | kind::HEADER_FEATURE => {
                match parse::parse_event::<E>(&AttrSet::new(), r)?.record {
                    crate::record::Record::HeaderAttr { attr, ids } => {
                        self.attrs.push(attr, ids);
                    }
                    crate::record::Record::HeaderFeature { feature, data } => {
                        if let (Ok(fid), std::borrow::Cow::Borrowed(data)) =
                            (u32::try_from(feature), data)
                        {
                            if fid != feature::id::RESERVED && fid < feature::id::BITS {
                                self.features.insert(
                                    fid,
                                    Section {
                                        offset: r.offset,
                                        data,
                                    },
                                );
                            }
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The input's byte order.
    pub fn byte_order(&self) -> ByteOrder {
        self.order
    }

    /// Pipe mode (`perf record -o -`).
    pub fn is_pipe(&self) -> bool {
        self.header.is_none()
    }

    /// The file header (file mode only).
    pub fn header(&self) -> Option<&FileHeader> {
        self.header.as_ref()
    }

    /// The attrs with their ids (from the attrs section, or HEADER_ATTR records in pipe mode).
    pub fn attrs(&self) -> &AttrSet {
        &self.attrs
    }

    /// The feature sections (from the section table, or HEADER_FEATURE records in pipe mode).
    pub fn features(&self) -> &Features<'a> {
        &self.features
    }

    /// What was odd but readable (unfinalized header, truncated tail, ...).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Offsets of the first record and the end of the last complete one.
    pub fn data_range(&self) -> std::ops::Range<u64> {
        self.data_start as u64..self.data_end as u64
    }

    /// The records, framed but not parsed (kind, misc, bytes, payload).
    pub fn raw_records(&self) -> RawRecords<'a> {
        RawRecords {
            bytes: self.bytes,
            pos: self.data_start,
            end: self.data_end,
            order: self.order,
            cut_aux: self.cut_aux.map(|at| (at, self.bytes.len())),
        }
    }

    /// The record at `offset` (one [`PerfFile::raw_records`] handed
    /// out), framed again: a reader that keeps only offsets reads its
    /// records back with it. `None` when no whole record starts there.
    pub fn record_at(&self, offset: u64) -> Option<RawRecord<'a>> {
        let pos = usize::try_from(offset).ok()?;
        if pos < self.data_start {
            return None;
        }
        match self.order {
            ByteOrder::Little => next_raw::<Le>(self.bytes, pos, self.data_end),
            ByteOrder::Big => next_raw::<Be>(self.bytes, pos, self.data_end),
        }
        .ok()
        .flatten()
    }

    /// The records, parsed; stops after the first error.
    pub fn events<'f>(&'f self) -> Events<'f, 'a> {
        Events {
            file: self,
            raw: self.raw_records(),
            failed: false,
        }
    }

    /// Parses one framed record with this file's byte order and attrs.
    pub fn parse_raw(&self, r: &RawRecord<'a>) -> Result<Event<'a>, Error> {
        match self.order {
            ByteOrder::Little => parse::parse_event::<Le>(&self.attrs, r),
            ByteOrder::Big => parse::parse_event::<Be>(&self.attrs, r),
        }
    }
}

enum Incomplete {
    /// The bytes end inside the record.
    Truncated(String),
    /// The record's header cannot be right (size below 8).
    Malformed(String),
}

/// Frames the record at `pos` (ending before `end`), AUXTRACE payload included.
fn next_raw<E: Endian>(
    bytes: &[u8],
    pos: usize,
    end: usize,
) -> Result<Option<RawRecord<'_>>, Incomplete> {
    if pos >= end {
        return Ok(None);
    }
    let avail = bytes.get(pos..end).unwrap_or_default();
    let h = RecordHeader::parse::<E>(avail).ok_or_else(|| {
        Incomplete::Truncated(format!("{} bytes left, a header needs 8", avail.len()))
    })?;
    let size = usize::from(h.size);
    if size < HEADER_LEN {
        return Err(Incomplete::Malformed(format!(
            "header.size {size} is below the header's 8 bytes"
        )));
    }
    let rec = avail.get(..size).ok_or_else(|| {
        Incomplete::Truncated(format!(
            "{} record of {size} bytes, {} left",
            kind::name(h.kind),
            avail.len()
        ))
    })?;
    let plen = parse::payload_len::<E>(&h, rec).map_err(|m| Incomplete::Malformed(m.0))?;
    let payload = usize::try_from(plen)
        .ok()
        .and_then(|p| avail.get(size..size.checked_add(p)?))
        .ok_or_else(|| {
            Incomplete::Truncated(format!(
                "{} record announcing {plen} bytes of data, {} left",
                kind::name(h.kind),
                avail.len() - size
            ))
        })?;
    Ok(Some(RawRecord {
        offset: pos as u64,
        header: h,
        bytes: rec,
        payload,
    }))
}

/// Iterator over framed records; see [`PerfFile::raw_records`].
#[derive(Debug, Clone)]
pub struct RawRecords<'a> {
    bytes: &'a [u8],
    pos: usize,
    end: usize,
    order: ByteOrder,
    /// [`PerfFile`]'s cut AUXTRACE record and the end of the file.
    cut_aux: Option<(usize, usize)>,
}

impl<'a> Iterator for RawRecords<'a> {
    type Item = RawRecord<'a>;

    fn next(&mut self) -> Option<RawRecord<'a>> {
        // The range was framed when the file was parsed: this cannot fail.
        let r = match self.order {
            ByteOrder::Little => next_raw::<Le>(self.bytes, self.pos, self.end),
            ByteOrder::Big => next_raw::<Be>(self.bytes, self.pos, self.end),
        }
        .ok()
        .flatten();
        let Some(r) = r else {
            // Then the AUXTRACE record the file was cut in, with the trace
            // data present.
            let (at, end) = self.cut_aux.take()?;
            let rest = self.bytes.get(at..end)?;
            let h = match self.order {
                ByteOrder::Little => RecordHeader::parse::<Le>(rest),
                ByteOrder::Big => RecordHeader::parse::<Be>(rest),
            }?;
            let size = usize::from(h.size);
            return Some(RawRecord {
                offset: at as u64,
                header: h,
                bytes: rest.get(..size)?,
                payload: rest.get(size..)?,
            });
        };
        self.pos += r.stream_len();
        Some(r)
    }
}

/// Iterator over parsed records with their offsets; see [`PerfFile::events`].
#[derive(Debug)]
pub struct Events<'f, 'a> {
    file: &'f PerfFile<'a>,
    raw: RawRecords<'a>,
    failed: bool,
}

impl<'a> Iterator for Events<'_, 'a> {
    type Item = Result<(u64, Event<'a>), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let r = self.raw.next()?;
        let ev = self.file.parse_raw(&r);
        self.failed = ev.is_err();
        Some(ev.map(|e| (r.offset, e)))
    }
}
