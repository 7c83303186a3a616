//! The `calls` table's column chunks, encoded here from the sink's row
//! blocks and handed whole to the Parquet crate's file writer
//! (`SerializedRowGroupWriter::append_column`), which writes the page
//! headers, the footer, the schema and the page index. Hand-written
//! because the Arrow writer re-hashed every row's strings, whose keys the
//! sink already holds, and with its delta packing and statistics cost as
//! much CPU as the decode (issue 46). Only what the spec needs is
//! written: PLAIN, DELTA_BINARY_PACKED and RLE_DICTIONARY over the
//! RLE/bit-packing hybrid, data pages v1 (the caller's pages: a few per
//! chunk), zstd, chunk statistics, and the column and offset indexes
//! (per page min/max, nulls, boundary order; where each page lies) that
//! engines prune pages by.
//!
//! Keys and deltas of a compressed chunk are packed at whole bytes (8, 16,
//! 24 bits...), not at the bits they need: `ptsim --repeat` traces repeat
//! runs of durations and deltas, and packed at 10 or 11 bits a run starts
//! at any bit, so zstd saw other bytes each time. On the bench's shapes
//! trace (2.23 M rows) this took `dur_ns` from 2.16 to 1.09 MB, `self_ns`
//! 1.86 to 1.06, `parent_id` 1.72 to 0.95, `start_insn` 0.57 to 0.17 (the
//! dataset 10.6 to 7.4 MB, 6.5 to 4.5 bytes a call; interp 3.75 to 2.98
//! MB), for about as much zstd work. A chunk whose zstd pages come to more
//! than [`RAW_ABOVE`] of its bytes packed tight is not worth zstd's ~30
//! instructions a byte: the column's next [`RAW_CHUNKS`] chunks are
//! written uncompressed and packed tight (shapes' `start_ns`, 3.49 MB
//! compressed against 3.75 raw, cost 109 M of the dataset's 9.53 G
//! instructions), then one is compressed again to look.

use bytes::Bytes;
use parquet::basic::{BoundaryOrder, Compression, Encoding, ZstdLevel};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::data_type::ByteArray;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ColumnChunkMetaData, ColumnIndexBuilder, OffsetIndexBuilder};
use parquet::file::statistics::{Statistics, ValueStatistics};
use parquet::file::writer::{SerializedPageWriter, TrackedWrite};
use parquet::schema::types::ColumnDescPtr;

/// A column chunk ready for `append_column`: its pages and what the
/// footer says of them.
pub(super) struct Chunk {
    pub bytes: Bytes,
    pub close: ColumnCloseResult,
}

/// One data page's rows of a column, as parts (a row block's rows each)
/// in order; for a nullable column with, per row, whether it has a value
/// (a null row's value is not read). Without it every row has one.
pub(super) type Rows<'a, T> = Vec<(&'a [T], Option<&'a [bool]>)>;

/// Bytes of a string statistic at most, as the Arrow writer's default
/// (`DEFAULT_STATISTICS_TRUNCATE_LENGTH`, and its column index's): a long
/// C++ name would otherwise be repeated in the footer per page.
const STAT_BYTES: usize = 64;

/// Distinct values at most in an integer column's dictionary
/// ([`ChunkEncoder::ints`]): keys of 12 bits at most, and a table of
/// twice as many slots (96 KiB) that stays in the cache.
const INT_DICT_MAX: usize = 4096;
const INT_DICT_SLOTS: usize = 2 * INT_DICT_MAX;

/// A column chunk whose zstd pages come to more than this share of its
/// bytes packed tight (each value in as few bits as it needs) is not
/// worth compressing: its next [`RAW_CHUNKS`] chunks are written
/// uncompressed and packed tight, then one is compressed again to look.
const RAW_ABOVE: f64 = 0.6;
const RAW_CHUNKS: u32 = 15;

/// A column's chunks so far: how many more to write uncompressed.
struct ColumnCodec {
    column: String,
    raw_left: u32,
}

/// Encodes column chunks; holds the zstd context and buffers reused for
/// every chunk of a table.
pub(super) struct ChunkEncoder {
    zstd: zstd::bulk::Compressor<'static>,
    level: i32,
    /// A page's bytes before compression.
    body: Vec<u8>,
    /// A nullable column's page: whether each row has a value.
    present: Vec<bool>,
    /// A chunk's dictionary keys.
    keys: Vec<u32>,
    table: IntTable,
    /// The chunk's data pages, compressed.
    pages: Vec<DataPage>,
    /// Per column, whether its chunks are compressed ([`RAW_ABOVE`]).
    codecs: Vec<ColumnCodec>,
    /// The chunk being encoded is written uncompressed.
    raw: bool,
    /// Its pages' bytes had they been packed tight (not byte-aligned).
    tight: usize,
}

/// A data page, compressed, and what the column index says of it.
struct DataPage {
    buf: Bytes,
    uncompressed: usize,
    rows: usize,
    encoding: Encoding,
    nulls: u64,
    /// Its min and max as the column index holds them (PLAIN, a string
    /// cut to [`STAT_BYTES`]); `None`: only nulls.
    min_max: Option<(Vec<u8>, Vec<u8>)>,
}

/// An integer column's physical type (INT32, INT64): deltas wrap at its
/// width, as readers add them back.
pub(super) trait Int: Copy + Ord {
    /// `self - prev` wrapped at the type's width, sign-extended.
    fn delta(self, prev: Self) -> i64;
    /// `d - min` wrapped at the type's width, as unsigned.
    fn above(d: i64, min: i64) -> u64;
    fn widen(self) -> i64;
    /// PLAIN: little-endian.
    fn plain(self, out: &mut Vec<u8>);
    fn statistics(min_max: Option<(Self, Self)>, nulls: u64) -> Statistics;
    /// PLAIN, as the column index holds a min or max.
    fn bytes(self) -> Vec<u8> {
        let mut v = Vec::with_capacity(8);
        self.plain(&mut v);
        v
    }
}

impl Int for i64 {
    #[inline]
    fn delta(self, prev: i64) -> i64 {
        self.wrapping_sub(prev)
    }
    #[inline]
    fn above(d: i64, min: i64) -> u64 {
        d.wrapping_sub(min) as u64
    }
    #[inline]
    fn widen(self) -> i64 {
        self
    }
    fn plain(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn statistics(min_max: Option<(i64, i64)>, nulls: u64) -> Statistics {
        Statistics::int64(
            min_max.map(|m| m.0),
            min_max.map(|m| m.1),
            None,
            Some(nulls),
            false,
        )
    }
}

impl Int for i32 {
    #[inline]
    fn delta(self, prev: i32) -> i64 {
        i64::from(self.wrapping_sub(prev))
    }
    #[inline]
    fn above(d: i64, min: i64) -> u64 {
        u64::from((d as i32).wrapping_sub(min as i32) as u32)
    }
    #[inline]
    fn widen(self) -> i64 {
        i64::from(self)
    }
    fn plain(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn statistics(min_max: Option<(i32, i32)>, nulls: u64) -> Statistics {
        Statistics::int32(
            min_max.map(|m| m.0),
            min_max.map(|m| m.1),
            None,
            Some(nulls),
            false,
        )
    }
}

/// The pages' minima and maxima: the chunk's, and whether from page to
/// page they only rise or only fall (the column index's boundary order,
/// as the crate's column writer tells it).
struct Bounds<T> {
    chunk: Option<(T, T)>,
    last: Option<(T, T)>,
    up: bool,
    down: bool,
}

impl<T: PartialOrd + Copy> Bounds<T> {
    fn new() -> Bounds<T> {
        Bounds {
            chunk: None,
            last: None,
            up: true,
            down: true,
        }
    }

    /// The next page with a value: its min and max.
    fn page(&mut self, lo: T, hi: T) {
        if let Some((a, b)) = self.last {
            self.up &= a <= lo && b <= hi;
            self.down &= lo <= a && hi <= b;
        }
        self.last = Some((lo, hi));
        self.chunk = Some(match self.chunk {
            Some((a, b)) => (if lo < a { lo } else { a }, if hi > b { hi } else { b }),
            None => (lo, hi),
        });
    }

    fn order(&self) -> BoundaryOrder {
        if self.up {
            BoundaryOrder::ASCENDING
        } else if self.down {
            BoundaryOrder::DESCENDING
        } else {
            BoundaryOrder::UNORDERED
        }
    }
}

impl ChunkEncoder {
    pub fn new(level: i32) -> Result<ChunkEncoder, ParquetError> {
        let zstd = zstd::bulk::Compressor::new(level)
            .map_err(|e| ParquetError::General(format!("zstd level {level}: {e}")))?;
        Ok(ChunkEncoder {
            zstd,
            level,
            body: Vec::new(),
            present: Vec::new(),
            keys: Vec::new(),
            table: IntTable::new(),
            pages: Vec::new(),
            codecs: Vec::new(),
            raw: false,
            tight: 0,
        })
    }

    /// An integer column, one data page per entry of `pages`:
    /// RLE_DICTIONARY when `dict` asks for it, the column is not
    /// `nullable` and its chunk holds at most [`INT_DICT_MAX`] distinct
    /// values (durations and counts of a few loops: keys of a few bits,
    /// where their deltas would take as many bits as the values);
    /// DELTA_BINARY_PACKED else.
    pub fn ints<T: Int>(
        &mut self,
        descr: ColumnDescPtr,
        pages: &[Rows<T>],
        nullable: bool,
        dict: bool,
    ) -> Result<Chunk, ParquetError> {
        self.begin(&descr);
        if dict && !nullable {
            if let Some(chunk) = self.few_ints(descr.clone(), pages)? {
                return Ok(chunk);
            }
        }
        self.pages.clear();
        let mut bounds = Bounds::new();
        let mut staged: Vec<T> = Vec::new();
        let mut nulls = 0;
        for page in pages {
            // One part without nulls (the sink's block): encoded where
            // it is, not copied.
            if let [(values, None)] = page[..] {
                if !nullable {
                    self.body.clear();
                    let rows = values.len();
                    if values.is_empty() {
                        self.data_page(0, Encoding::PLAIN, 0, None, 0)?;
                        continue;
                    }
                    let (lo, hi, pad) = delta_binary_packed(values, !self.raw, &mut self.body);
                    bounds.page(lo, hi);
                    let min_max = Some((lo.bytes(), hi.bytes()));
                    self.data_page(rows, Encoding::DELTA_BINARY_PACKED, 0, min_max, pad)?;
                    continue;
                }
            }
            // One part of nulls only (`cycles` without CYC): one run of
            // definition levels, not a copy of the rows.
            if let [(v, Some(has))] = page[..] {
                if nullable && !v.is_empty() && !has[..v.len()].contains(&true) {
                    self.body.clear();
                    null_levels(v.len(), &mut self.body);
                    nulls += v.len() as u64;
                    self.data_page(v.len(), Encoding::PLAIN, v.len() as u64, None, 0)?;
                    continue;
                }
            }
            let values = &mut staged;
            values.clear();
            self.present.clear();
            let mut rows = 0;
            for &(v, has) in page {
                rows += v.len();
                match has {
                    Some(has) => {
                        self.present.extend_from_slice(&has[..v.len()]);
                        values.extend(v.iter().zip(has).filter(|(_, &h)| h).map(|(&v, _)| v));
                    }
                    None => {
                        if nullable {
                            self.present.extend(std::iter::repeat_n(true, v.len()));
                        }
                        values.extend_from_slice(v);
                    }
                }
            }
            self.body.clear();
            if nullable {
                levels(&self.present, &mut self.body);
            }
            let page_nulls = (rows - values.len()) as u64;
            nulls += page_nulls;
            if values.is_empty() {
                self.data_page(rows, Encoding::PLAIN, page_nulls, None, 0)?;
            } else {
                let (lo, hi, pad) = delta_binary_packed(values, !self.raw, &mut self.body);
                bounds.page(lo, hi);
                let min_max = Some((lo.bytes(), hi.bytes()));
                self.data_page(
                    rows,
                    Encoding::DELTA_BINARY_PACKED,
                    page_nulls,
                    min_max,
                    pad,
                )?;
            }
        }
        let stats = T::statistics(bounds.chunk, nulls);
        self.chunk(descr, None, stats, bounds.order())
    }

    /// [`ChunkEncoder::ints`] as a dictionary, or `None` when the chunk
    /// holds more than [`INT_DICT_MAX`] distinct values.
    fn few_ints<T: Int>(
        &mut self,
        descr: ColumnDescPtr,
        pages: &[Rows<T>],
    ) -> Result<Option<Chunk>, ParquetError> {
        self.table.clear();
        self.keys.clear();
        let mut dict: Vec<T> = Vec::new();
        // Per page: where its keys end.
        let mut ends = Vec::with_capacity(pages.len());
        for page in pages {
            for &(v, _) in page {
                let Some(&first) = v.first() else { continue };
                let Some(mut last_key) = self.table.key(&mut dict, first) else {
                    return Ok(None);
                };
                let mut last = first;
                // A value like the row's before (most rows of a loop's
                // calls: 78-99 % on interp) is not looked up again. The
                // keys extended, not zeroed first then written (a byte
                // an instruction under valgrind: 45 M on shapes); once the
                // dictionary is full the part's other rows are still
                // looked up (a page at most), so the extend knows its length.
                let mut full = false;
                let table = &mut self.table;
                self.keys.extend(v.iter().map(|&x| {
                    if x != last {
                        match table.key(&mut dict, x) {
                            Some(key) => (last, last_key) = (x, key),
                            None => full = true,
                        }
                    }
                    last_key
                }));
                if full {
                    return Ok(None);
                }
            }
            ends.push(self.keys.len());
        }
        let mut plain = Vec::with_capacity(dict.len() * 8);
        for v in &dict {
            v.plain(&mut plain);
        }
        let n = dict.len() as u32;
        let tight = bits(u64::from(n.max(1)) - 1).max(1);
        let width = self.width(tight);
        self.pages.clear();
        let mut bounds = Bounds::new();
        let mut start = 0;
        let keys = std::mem::take(&mut self.keys);
        let mut seen = vec![false; dict.len()];
        for &end in &ends {
            let page = &keys[start..end];
            self.body.clear();
            self.body.push(width as u8);
            hybrid(page, width, &mut self.body);
            let pad = padding(self.body.len(), width, tight);
            // The page's min and max among the values its keys name: a
            // store a row, not two comparisons.
            let min_max = used_min_max(page, &dict, &mut seen).map(|(lo, hi)| {
                bounds.page(lo, hi);
                (lo.bytes(), hi.bytes())
            });
            let encoding = if n == 0 {
                Encoding::PLAIN
            } else {
                Encoding::RLE_DICTIONARY
            };
            self.data_page(end - start, encoding, 0, min_max, pad)?;
            start = end;
        }
        self.keys = keys;
        let stats = T::statistics(bounds.chunk, 0);
        let page = (n > 0).then_some((plain, n));
        self.chunk(descr, page, stats, bounds.order()).map(Some)
    }

    /// A BOOLEAN column without nulls, PLAIN (one bit a row).
    pub fn bools(
        &mut self,
        descr: ColumnDescPtr,
        pages: &[Rows<bool>],
    ) -> Result<Chunk, ParquetError> {
        self.begin(&descr);
        self.pages.clear();
        let mut bounds = Bounds::new();
        for page in pages {
            let values = match page[..] {
                [(v, _)] => v,
                _ => {
                    self.present.clear();
                    for &(v, _) in page {
                        self.present.extend_from_slice(v);
                    }
                    &self.present
                }
            };
            self.body.clear();
            let (mut all, mut any) = (true, false);
            let mut groups = values.chunks_exact(8);
            for g in &mut groups {
                let byte = pack_bools(std::array::from_fn(|i| g[i]));
                all &= byte == 0xFF;
                any |= byte != 0;
                self.body.push(byte);
            }
            let rest = groups.remainder();
            if !rest.is_empty() {
                let byte = pack_bools(std::array::from_fn(|i| {
                    rest.get(i).copied().unwrap_or(false)
                }));
                all &= rest.iter().all(|&b| b);
                any |= byte != 0;
                self.body.push(byte);
            }
            let rows = values.len();
            let min_max = (rows > 0).then(|| {
                bounds.page(all, any);
                (vec![u8::from(all)], vec![u8::from(any)])
            });
            self.data_page(rows, Encoding::PLAIN, 0, min_max, 0)?;
        }
        let stats = Statistics::boolean(
            bounds.chunk.map(|m| m.0),
            bounds.chunk.map(|m| m.1),
            None,
            Some(0),
            false,
        );
        self.chunk(descr, None, stats, bounds.order())
    }

    /// A string column, RLE_DICTIONARY: the keys index `dict` (each of its
    /// strings used at least once), one per present row.
    pub fn dict<S: AsRef<str>>(
        &mut self,
        descr: ColumnDescPtr,
        pages: &[Rows<u32>],
        nullable: bool,
        dict: &[S],
    ) -> Result<Chunk, ParquetError> {
        self.begin(&descr);
        // The strings in order, for a page's min and max.
        let mut order: Vec<u32> = (0..dict.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| dict[a as usize].as_ref().cmp(dict[b as usize].as_ref()));
        let mut seen = vec![false; dict.len()];
        let mut plain = Vec::new();
        for s in dict {
            let s = s.as_ref();
            plain.extend_from_slice(&(s.len() as u32).to_le_bytes());
            plain.extend_from_slice(s.as_bytes());
        }
        let n = dict.len() as u32;
        let tight = bits(u64::from(n.max(1)) - 1).max(1);
        let width = self.width(tight);
        self.pages.clear();
        let mut bounds: Bounds<&str> = Bounds::new();
        let mut nulls = 0;
        for page in pages {
            let (keys, rows, page_nulls) =
                page_keys(page, nullable, &mut self.keys, &mut self.present);
            nulls += page_nulls;
            self.body.clear();
            if nullable {
                levels(&self.present, &mut self.body);
            }
            if n == 0 {
                self.data_page(rows, Encoding::PLAIN, page_nulls, None, 0)?;
                continue;
            }
            let at = self.body.len();
            self.body.push(width as u8);
            hybrid(keys, width, &mut self.body);
            let pad = padding(self.body.len() - at, width, tight);
            // The keys used, then the first and last of them in the
            // strings' order: a store a row, not a comparison of strings.
            mark_seen(keys, &mut seen);
            let first = order.iter().position(|&k| seen[k as usize]);
            let last = order.iter().rposition(|&k| seen[k as usize]);
            seen.fill(false);
            let min_max = first.zip(last).map(|(lo, hi)| {
                let lo = dict[order[lo] as usize].as_ref();
                let hi = dict[order[hi] as usize].as_ref();
                bounds.page(lo, hi);
                let (lo, hi) = cut_min_max(lo, hi);
                (lo.0, hi.0)
            });
            self.data_page(rows, Encoding::RLE_DICTIONARY, page_nulls, min_max, pad)?;
        }
        let stats = match bounds.chunk {
            Some((lo, hi)) => string_statistics(lo, hi, nulls),
            None => Statistics::byte_array(None, None, None, Some(nulls), false),
        };
        let page = (n > 0).then_some((plain, n));
        self.chunk(descr, page, stats, bounds.order())
    }

    /// An integer column of repeated values without nulls,
    /// RLE_DICTIONARY: the keys index `dict` (each value used at least
    /// once).
    pub fn keyed_ints<T: Int>(
        &mut self,
        descr: ColumnDescPtr,
        pages: &[Rows<u32>],
        dict: &[T],
    ) -> Result<Chunk, ParquetError> {
        self.begin(&descr);
        let mut plain = Vec::new();
        for v in dict {
            v.plain(&mut plain);
        }
        let n = dict.len() as u32;
        let tight = bits(u64::from(n.max(1)) - 1).max(1);
        let width = self.width(tight);
        self.pages.clear();
        let mut bounds = Bounds::new();
        let mut seen = vec![false; dict.len()];
        for page in pages {
            let (keys, rows, _) = page_keys(page, false, &mut self.keys, &mut self.present);
            self.body.clear();
            if n == 0 {
                self.data_page(rows, Encoding::PLAIN, 0, None, 0)?;
                continue;
            }
            self.body.push(width as u8);
            hybrid(keys, width, &mut self.body);
            let pad = padding(self.body.len(), width, tight);
            // The values used: a store a row, then a look at each value.
            let min_max = used_min_max(keys, dict, &mut seen).map(|(lo, hi)| {
                bounds.page(lo, hi);
                (lo.bytes(), hi.bytes())
            });
            self.data_page(rows, Encoding::RLE_DICTIONARY, 0, min_max, pad)?;
        }
        let stats = T::statistics(bounds.chunk, 0);
        let page = (n > 0).then_some((plain, n));
        self.chunk(descr, page, stats, bounds.order())
    }

    /// Starts a chunk of column `descr`: compressed or not, as its
    /// chunks before tell ([`RAW_ABOVE`]).
    fn begin(&mut self, descr: &ColumnDescPtr) {
        let name = descr.name();
        let i = match self.codecs.iter().position(|c| c.column == name) {
            Some(i) => i,
            None => {
                self.codecs.push(ColumnCodec {
                    column: name.to_string(),
                    raw_left: 0,
                });
                self.codecs.len() - 1
            }
        };
        self.raw = self.codecs[i].raw_left > 0;
        self.tight = 0;
    }

    /// The bit width keys or deltas needing `tight` bits are packed at:
    /// whole bytes when the chunk is compressed, so that a run of values
    /// seen before is the same bytes wherever it starts (zstd finds the
    /// `--repeat` rounds' repeats, which bit offsets hid), `tight` when not.
    fn width(&self, tight: u32) -> u32 {
        if self.raw {
            tight
        } else {
            tight.div_ceil(8) * 8
        }
    }

    /// `self.body` as the chunk's next data page, compressed unless the
    /// chunk is raw; `pad`: its bytes of padding to whole bytes.
    fn data_page(
        &mut self,
        rows: usize,
        encoding: Encoding,
        nulls: u64,
        min_max: Option<(Vec<u8>, Vec<u8>)>,
        pad: usize,
    ) -> Result<(), ParquetError> {
        self.tight += self.body.len() - pad.min(self.body.len());
        let buf = if self.raw {
            Bytes::copy_from_slice(&self.body)
        } else {
            let buf = self
                .zstd
                .compress(&self.body)
                .map_err(|e| ParquetError::External(Box::new(e)))?;
            Bytes::from(buf)
        };
        self.pages.push(DataPage {
            buf,
            uncompressed: self.body.len(),
            rows,
            encoding,
            nulls,
            min_max,
        });
        Ok(())
    }

    /// The chunk: its dictionary page (PLAIN values, how many), then the
    /// data pages encoded (`self.pages`); its page index.
    fn chunk(
        &mut self,
        descr: ColumnDescPtr,
        dict: Option<(Vec<u8>, u32)>,
        stats: Statistics,
        order: BoundaryOrder,
    ) -> Result<Chunk, ParquetError> {
        let physical = descr.physical_type();
        let mut sink = TrackedWrite::new(Vec::new());
        let mut writer = SerializedPageWriter::new(&mut sink);
        let mut encodings = vec![Encoding::RLE];
        let (mut compressed, mut uncompressed) = (0i64, 0i64);
        let mut dict_offset = None;
        if let Some((plain, n)) = dict {
            let buf = if self.raw {
                Bytes::copy_from_slice(&plain)
            } else {
                let buf = self
                    .zstd
                    .compress(&plain)
                    .map_err(|e| ParquetError::External(Box::new(e)))?;
                Bytes::from(buf)
            };
            let page = Page::DictionaryPage {
                buf,
                num_values: n,
                encoding: Encoding::PLAIN,
                is_sorted: false,
            };
            let spec = writer.write_page(CompressedPage::new(page, plain.len()))?;
            compressed += spec.compressed_size as i64;
            uncompressed += spec.uncompressed_size as i64;
            dict_offset = Some(spec.offset as i64);
            encodings.push(Encoding::PLAIN);
        }
        let mut column_index = ColumnIndexBuilder::new(physical);
        let mut offset_index = OffsetIndexBuilder::new();
        let mut data_offset = None;
        let mut rows = 0;
        let packed: usize = self.pages.iter().map(|p| p.buf.len()).sum();
        self.next_codec(&descr, packed);
        for page in self.pages.drain(..) {
            let data = Page::DataPage {
                buf: page.buf,
                num_values: page.rows as u32,
                encoding: page.encoding,
                def_level_encoding: Encoding::RLE,
                rep_level_encoding: Encoding::RLE,
                statistics: None,
            };
            let spec = writer.write_page(CompressedPage::new(data, page.uncompressed))?;
            data_offset.get_or_insert(spec.offset as i64);
            compressed += spec.compressed_size as i64;
            uncompressed += spec.uncompressed_size as i64;
            offset_index.append_offset_and_size(spec.offset as i64, spec.compressed_size as i32);
            offset_index.append_row_count(page.rows as i64);
            match page.min_max {
                Some((lo, hi)) => column_index.append(false, lo, hi, page.nulls as i64),
                None => column_index.append(true, Vec::new(), Vec::new(), page.nulls as i64),
            }
            if !encodings.contains(&page.encoding) {
                encodings.push(page.encoding);
            }
            rows += page.rows;
        }
        writer.close()?;
        column_index.set_boundary_order(order);
        let metadata = ColumnChunkMetaData::builder(descr)
            .set_compression(if self.raw {
                Compression::UNCOMPRESSED
            } else {
                Compression::ZSTD(ZstdLevel::try_new(self.level)?)
            })
            .set_encodings(encodings)
            .set_num_values(rows as i64)
            .set_total_compressed_size(compressed)
            .set_total_uncompressed_size(uncompressed)
            .set_data_page_offset(data_offset.unwrap_or(0))
            .set_dictionary_page_offset(dict_offset)
            .set_statistics(stats)
            .build()?;
        let bytes = Bytes::from(sink.into_inner()?);
        Ok(Chunk {
            close: ColumnCloseResult {
                bytes_written: bytes.len() as u64,
                rows_written: rows as u64,
                metadata,
                bloom_filter: None,
                column_index: Some(column_index.build()?),
                offset_index: Some(offset_index.build()),
            },
            bytes,
        })
    }
}

impl ChunkEncoder {
    /// After a chunk of `descr` whose data pages came to `packed` bytes:
    /// whether its next chunks are compressed.
    fn next_codec(&mut self, descr: &ColumnDescPtr, packed: usize) {
        let Some(c) = self.codecs.iter_mut().find(|c| c.column == descr.name()) else {
            return;
        };
        if self.raw {
            c.raw_left -= 1;
        } else if packed as f64 > RAW_ABOVE * self.tight as f64 {
            c.raw_left = RAW_CHUNKS;
        }
    }
}

/// Bytes of padding in `len` bytes of values packed at `width` bits
/// rather than `tight`.
fn padding(len: usize, width: u32, tight: u32) -> usize {
    len * (width - tight) as usize / width as usize
}

/// The integer dictionary's hash table: per slot a value and its key
/// (`u32::MAX`: free); a fixed size, so that a slot masked to it needs no
/// bounds check.
struct IntTable {
    slots: Box<[(i64, u32); INT_DICT_SLOTS]>,
}

impl IntTable {
    fn new() -> IntTable {
        let slots = vec![(0i64, u32::MAX); INT_DICT_SLOTS].into_boxed_slice();
        match slots.try_into() {
            Ok(slots) => IntTable { slots },
            Err(_) => unreachable!("a vector of INT_DICT_SLOTS slots"),
        }
    }

    fn clear(&mut self) {
        self.slots.fill((0, u32::MAX));
    }

    /// `x`'s key in `dict`, added when new; `None` when the dictionary
    /// is full.
    #[inline]
    fn key<T: Int>(&mut self, dict: &mut Vec<T>, x: T) -> Option<u32> {
        let v = x.widen();
        let shift = 64 - INT_DICT_SLOTS.trailing_zeros();
        let mut h = ((v as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize;
        loop {
            let slot = &mut self.slots[h & (INT_DICT_SLOTS - 1)];
            if slot.0 == v && slot.1 != u32::MAX {
                return Some(slot.1);
            }
            if slot.1 == u32::MAX {
                if dict.len() == INT_DICT_MAX {
                    return None;
                }
                *slot = (v, dict.len() as u32);
                dict.push(x);
                return Some(slot.1);
            }
            h += 1;
        }
    }
}

/// A page's keys (of the rows with a value): its one part without nulls
/// where it is (the sink's block), else copied into `keys`; whether each
/// row has one into `present` (`nullable`). With its rows and nulls.
fn page_keys<'x>(
    page: &[(&'x [u32], Option<&'x [bool]>)],
    nullable: bool,
    keys: &'x mut Vec<u32>,
    present: &mut Vec<bool>,
) -> (&'x [u32], usize, u64) {
    present.clear();
    if let [(v, None)] = page[..] {
        if nullable {
            present.extend(std::iter::repeat_n(true, v.len()));
        }
        return (v, v.len(), 0);
    }
    keys.clear();
    let mut rows = 0;
    for &(v, has) in page {
        rows += v.len();
        match has {
            Some(has) => {
                present.extend_from_slice(&has[..v.len()]);
                keys.extend(v.iter().zip(has).filter(|(_, &h)| h).map(|(&k, _)| k));
            }
            None => {
                if nullable {
                    present.extend(std::iter::repeat_n(true, v.len()));
                }
                keys.extend_from_slice(v);
            }
        }
    }
    (&keys[..], rows, (rows - keys.len()) as u64)
}

/// Marks the keys `keys` holds in `seen`.
#[inline]
fn mark_seen(keys: &[u32], seen: &mut [bool]) {
    for &k in keys {
        seen[k as usize] = true;
    }
}

/// The least and greatest of the values of `dict` that `keys` name
/// (`None` for no keys): each key marked in `seen` (as long as `dict`,
/// all false, and left so), then the marked values read.
fn used_min_max<T: Copy + Ord>(keys: &[u32], dict: &[T], seen: &mut [bool]) -> Option<(T, T)> {
    mark_seen(keys, seen);
    let used = dict
        .iter()
        .zip(seen.iter())
        .filter(|(_, &s)| s)
        .map(|(&v, _)| v);
    let min_max = used.fold(None, |m: Option<(T, T)>, v| {
        Some(m.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))))
    });
    seen.fill(false);
    min_max
}

/// Definition levels of a nullable column's page (1: a value),
/// RLE-hybrid behind their length, as data pages v1 hold them.
fn levels(present: &[bool], body: &mut Vec<u8>) {
    let at = body.len();
    body.extend_from_slice(&[0; 4]);
    hybrid_bits(present, body);
    let len = (body.len() - at - 4) as u32;
    body[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

/// [`levels`] of `rows` nulls: one run of zeros.
fn null_levels(rows: usize, body: &mut Vec<u8>) {
    let at = body.len();
    body.extend_from_slice(&[0; 4]);
    uleb(body, (rows as u64) << 1);
    body.push(0);
    let len = (body.len() - at - 4) as u32;
    body[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

/// A string min and max cut to [`STAT_BYTES`] as the Arrow writer cuts
/// them: the min to a prefix, the max to a prefix whose last character
/// is raised by one (so still above every value); each with whether it
/// is exact.
fn cut_min_max(lo: &str, hi: &str) -> ((Vec<u8>, bool), (Vec<u8>, bool)) {
    let prefix = |s: &str| {
        let mut n = STAT_BYTES.min(s.len());
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        n
    };
    let lo_cut = &lo[..prefix(lo)];
    let hi_cut = (hi.len() > STAT_BYTES)
        .then(|| raised(&hi[..prefix(hi)]))
        .flatten();
    let min_exact = lo_cut.len() == lo.len();
    let max_exact = hi_cut.is_none();
    let hi = hi_cut.unwrap_or_else(|| hi.to_string());
    (
        (lo_cut.as_bytes().to_vec(), min_exact),
        (hi.into_bytes(), max_exact),
    )
}

/// Min and max of a string column as [`cut_min_max`] cuts them.
fn string_statistics(lo: &str, hi: &str, nulls: u64) -> Statistics {
    let ((lo, min_exact), (hi, max_exact)) = cut_min_max(lo, hi);
    Statistics::ByteArray(
        ValueStatistics::new(
            Some(ByteArray::from(lo)),
            Some(ByteArray::from(hi)),
            None,
            Some(nulls),
            false,
        )
        .with_min_is_exact(min_exact)
        .with_max_is_exact(max_exact),
    )
}

/// `s` with its last character that can be raised raised by one and the
/// rest dropped: a string above every string starting with `s`.
fn raised(s: &str) -> Option<String> {
    let mut chars: Vec<char> = s.chars().collect();
    while let Some(c) = chars.pop() {
        let next = (u32::from(c) + 1..=0x10FFFF).find_map(char::from_u32);
        if let Some(n) = next {
            chars.push(n);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// Bits needed for `v`.
#[inline]
fn bits(v: u64) -> u32 {
    64 - v.leading_zeros()
}

fn uleb(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Values per block of DELTA_BINARY_PACKED, and miniblocks per block (of
/// 32 values each), as the Arrow writer's.
const BLOCK: usize = 128;
const MINIBLOCKS: usize = 4;
const MINI: usize = BLOCK / MINIBLOCKS;

/// `values` (at least one) as DELTA_BINARY_PACKED: a header (block
/// size, miniblocks, count, first value), then per block of 128 deltas
/// their minimum and per miniblock of 32 the deltas above it bit-packed
/// at one width (whole bytes when `aligned`, see [`ChunkEncoder::width`]).
/// Returns the values' minimum and maximum, and the bytes of padding
/// `aligned` added.
fn delta_binary_packed<T: Int>(values: &[T], aligned: bool, out: &mut Vec<u8>) -> (T, T, usize) {
    uleb(out, BLOCK as u64);
    uleb(out, MINIBLOCKS as u64);
    uleb(out, values.len() as u64);
    uleb(out, zigzag(values[0].widen()));
    let (mut lo, mut hi, mut prev) = (values[0], values[0], values[0]);
    let mut deltas = [0i64; BLOCK];
    let mut above = [[0u64; MINI]; MINIBLOCKS];
    let mut pad = 0;
    for block in values[1..].chunks(BLOCK) {
        let mut min = i64::MAX;
        for (d, &v) in deltas.iter_mut().zip(block) {
            *d = v.delta(prev);
            prev = v;
            min = min.min(*d);
            lo = lo.min(v);
            hi = hi.max(v);
        }
        // A short last block: deltas at the minimum pack as zeros, and
        // its empty miniblocks get width 0 (their bytes are not written).
        deltas[block.len()..].fill(min);
        uleb(out, zigzag(min));
        let mut widths = [0u32; MINIBLOCKS];
        for (width, (a, d)) in widths
            .iter_mut()
            .zip(above.iter_mut().zip(deltas.chunks_exact(MINI)))
        {
            let mut or = 0;
            for (a, &d) in a.iter_mut().zip(d) {
                *a = T::above(d, min);
                or |= *a;
            }
            let tight = bits(or);
            *width = if aligned {
                tight.div_ceil(8) * 8
            } else {
                tight
            };
            pad += 4 * (*width - tight) as usize;
        }
        out.extend(widths.iter().map(|&w| w as u8));
        let used = block.len().div_ceil(MINI);
        for (&width, a) in widths.iter().zip(&above).take(used) {
            pack32(a, width, out);
        }
    }
    (lo, hi, pad)
}

/// 32 values bit-packed at `width` (little-endian bit order): 4 × width
/// bytes. One function per width, so that each value's shifts and where
/// it crosses a word are constants.
fn pack32(values: &[u64; MINI], width: u32, out: &mut Vec<u8>) {
    macro_rules! widths {
        ($($w:literal)*) => {
            match width {
                $($w => pack32_at::<$w>(values, out),)*
                _ => {}
            }
        };
    }
    widths!(
        1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
        33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61
        62 63 64
    );
}

#[inline(always)]
fn pack32_at<const W: u32>(values: &[u64; MINI], out: &mut Vec<u8>) {
    // Written out per value: every position is a constant.
    let mut words = [0u64; MINI + 1];
    macro_rules! values {
        ($($i:literal)*) => {$({
            let (v, bit) = (values[$i], $i * W);
            let (word, shift) = ((bit / 64) as usize, bit % 64);
            words[word] |= v << shift;
            if shift + W > 64 {
                words[word + 1] |= v >> (64 - shift);
            }
        })*};
    }
    values!(
        0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
    );
    let at = out.len();
    for w in &words[..(W as usize).div_ceil(2)] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out.truncate(at + 4 * W as usize);
}

/// Values as the RLE/bit-packing hybrid at `width` (1 to 32), looked at
/// in groups of 8: a group of equal values starts an RLE run (as long as
/// the value repeats), the others are bit-packed (the last group padded
/// with zeros, which readers do not read).
fn hybrid(values: &[u32], width: u32, out: &mut Vec<u8>) {
    let n = values.len();
    let (mut i, mut literal) = (0, 0);
    while i + 8 <= n {
        let v = values[i];
        // Not `all`: no early exit, so the compiler compares 8 at once.
        let same = values[i..i + 8].iter().fold(true, |s, &x| s & (x == v));
        if same {
            let mut j = i + 8;
            while j < n && values[j] == v {
                j += 1;
            }
            bit_packed(&values[literal..i], width, out);
            uleb(out, ((j - i) as u64) << 1);
            let bytes = width.div_ceil(8) as usize;
            out.extend_from_slice(&v.to_le_bytes()[..bytes]);
            (i, literal) = (j, j);
        } else {
            i += 8;
        }
    }
    bit_packed(&values[literal..], width, out);
}

/// [`hybrid`] of booleans at width 1.
fn hybrid_bits(values: &[bool], out: &mut Vec<u8>) {
    let n = values.len();
    let (mut i, mut literal) = (0, 0);
    while i + 8 <= n {
        let v = values[i];
        let same = values[i..i + 8].iter().fold(true, |s, &x| s & (x == v));
        if same {
            let mut j = i + 8;
            while j < n && values[j] == v {
                j += 1;
            }
            bit_packed_bits(&values[literal..i], out);
            uleb(out, ((j - i) as u64) << 1);
            out.push(u8::from(v));
            (i, literal) = (j, j);
        } else {
            i += 8;
        }
    }
    bit_packed_bits(&values[literal..], out);
}

/// One bit-packed run of the hybrid: its header, then `values` (padded
/// to a multiple of 8) at `width`.
fn bit_packed(values: &[u32], width: u32, out: &mut Vec<u8>) {
    if values.is_empty() {
        return;
    }
    let groups = values.len().div_ceil(8);
    uleb(out, ((groups as u64) << 1) | 1);
    macro_rules! widths {
        ($($w:literal)*) => {
            match width {
                $($w => bit_packed_at::<$w>(values, out),)*
                _ => {}
            }
        };
    }
    widths!(
        1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
    );
}

fn bit_packed_at<const W: u32>(values: &[u32], out: &mut Vec<u8>) {
    let mut groups = values.chunks_exact(8);
    for g in &mut groups {
        pack8::<W>(std::array::from_fn(|i| g[i]), out);
    }
    let rest = groups.remainder();
    if !rest.is_empty() {
        pack8::<W>(
            std::array::from_fn(|i| rest.get(i).copied().unwrap_or(0)),
            out,
        );
    }
}

/// 8 values at width `W`: `W` bytes.
#[inline(always)]
fn pack8<const W: u32>(values: [u32; 8], out: &mut Vec<u8>) {
    let mut words = [0u64; 5];
    macro_rules! values {
        ($($i:literal)*) => {$({
            let (v, bit) = (u64::from(values[$i]), $i * W);
            let (word, shift) = ((bit / 64) as usize, bit % 64);
            words[word] |= v << shift;
            if shift + W > 64 {
                words[word + 1] |= v >> (64 - shift);
            }
        })*};
    }
    values!(0 1 2 3 4 5 6 7);
    let at = out.len();
    for w in &words[..(W as usize).div_ceil(8)] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out.truncate(at + W as usize);
}

fn bit_packed_bits(values: &[bool], out: &mut Vec<u8>) {
    if values.is_empty() {
        return;
    }
    let groups = values.len().div_ceil(8);
    uleb(out, ((groups as u64) << 1) | 1);
    for g in values.chunks(8) {
        out.push(pack_bools(std::array::from_fn(|i| {
            g.get(i).copied().unwrap_or(false)
        })));
    }
}

/// 8 booleans as the bits of a byte, the first the lowest: each of the
/// 8 bytes (0 or 1) times the constant lands its bit in the top byte,
/// byte i at bit i, and no two products overlap (so nothing carries).
#[inline]
fn pack_bools(b: [bool; 8]) -> u8 {
    let bytes = u64::from_le_bytes(b.map(u8::from));
    (bytes.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hybrid_runs_and_literals() {
        let mut out = Vec::new();
        // A group of 8 with 3 literals, then 15 sevens: 5 in the
        // literals' group, 10 a run.
        let v: Vec<u32> = [1, 2, 3].into_iter().chain([7; 15]).collect();
        hybrid(&v, 3, &mut out);
        // 1 group, 3 bytes at width 3: 1 2 3 7 7 7 7 7, the first value
        // in the lowest bits (001, 010, 011, 111, ...).
        assert_eq!(
            out[..4],
            [(1 << 1) | 1, 0b1101_0001, 0b1111_1110, 0b1111_1111]
        );
        assert_eq!(out[4..], [10 << 1, 7]);
    }

    #[test]
    fn packing_is_little_endian_bit_order() {
        let mut out = Vec::new();
        bit_packed(&[1, 0, 1, 1, 0, 0, 0, 1, 1], 1, &mut out);
        assert_eq!(out, [(2 << 1) | 1, 0b1000_1101, 0b1]);
        let mut out = Vec::new();
        let mut values = [0u64; MINI];
        values[0] = 5;
        values[31] = 7;
        pack32(&values, 3, &mut out);
        assert_eq!(out.len(), 12);
        assert_eq!(out[0], 5);
        assert_eq!(out[11], 7 << 5);
    }

    /// Random columns (nulls, any widths, wrapping deltas, runs) through
    /// the encoder, the Parquet crate's file writer and its Arrow reader.
    #[test]
    fn chunks_read_back_as_written() {
        use arrow_array::cast::AsArray;
        use arrow_array::types::{Int32Type as I32, Int64Type as I64};
        use arrow_array::Array;
        use arrow_schema::{DataType, Field, Schema};
        use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
        use parquet::arrow::ArrowSchemaConverter;
        use parquet::file::properties::WriterProperties;
        use parquet::file::writer::SerializedFileWriter;
        use std::sync::Arc;

        let schema = Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Int32, false),
            Field::new("c", DataType::Utf8, true),
            Field::new("d", DataType::Int64, false),
            Field::new("e", DataType::Boolean, false),
        ]);
        let descr = ArrowSchemaConverter::new().convert(&schema).unwrap();
        let cols = descr.columns().to_vec();
        let mut rng = fastrand::Rng::with_seed(46);
        for rows in [1usize, 2, 7, 8, 9, 31, 33, 128, 129, 300, 1000, 5000, 20000] {
            let mut file = SerializedFileWriter::new(
                Vec::new(),
                descr.root_schema_ptr(),
                Arc::new(WriterProperties::builder().build()),
            )
            .unwrap();
            let mut e = ChunkEncoder::new(3).unwrap();
            // Values of every magnitude, runs of one value, nulls.
            let any_i64 = |rng: &mut fastrand::Rng| match rng.u8(0..4) {
                0 => rng.i64(..),
                1 => rng.i64(-3..3),
                2 => [i64::MIN, i64::MAX, 0][rng.usize(0..3)],
                _ => {
                    let bits = rng.u32(0..63);
                    rng.i64(0..1 << bits)
                }
            };
            let mut a = Vec::new();
            for _ in 0..rows {
                let v = (rng.u8(0..5) != 0).then(|| any_i64(&mut rng));
                let run = if rng.bool() { rng.usize(1..20) } else { 1 };
                a.extend(std::iter::repeat_n(v, run));
            }
            a.truncate(rows);
            let b: Vec<i32> = (0..rows)
                .map(|_| match rng.u8(0..3) {
                    0 => rng.i32(..),
                    1 => [i32::MIN, i32::MAX][rng.usize(0..2)],
                    _ => rng.i32(-100..100),
                })
                .collect();
            let words = ["x", "yy", "", "zzz"];
            let c: Vec<Option<u32>> = (0..rows)
                .map(|i| (i % 5 != 1).then(|| if i % 40 < 20 { 2 } else { rng.u32(0..4) }))
                .collect();
            let d_dict = [i64::MIN, -1, 7, i64::MAX];
            let d: Vec<u32> = (0..rows)
                .map(|i| if i % 3 == 0 { 1 } else { rng.u32(0..4) })
                .collect();
            let flags: Vec<bool> = (0..rows).map(|i| i % 13 < 9 || rng.bool()).collect();

            let present: Vec<bool> = a.iter().map(Option::is_some).collect();
            let values: Vec<i64> = a.iter().map(|v| v.unwrap_or(0)).collect();
            let c_present: Vec<bool> = c.iter().map(Option::is_some).collect();
            let c_keys: Vec<u32> = c.iter().map(|k| k.unwrap_or(0)).collect();
            // Dictionaries of the values used, as the sink makes them.
            let mut c_used: Vec<u32> = c.iter().flatten().copied().collect();
            let c_dict = super::super::used_dict(&mut c_used, &words);
            let mut c_iter = c_used.iter();
            let c_keys: Vec<u32> = c_keys
                .iter()
                .zip(&c_present)
                .map(|(&k, &p)| if p { *c_iter.next().unwrap() } else { k })
                .collect();
            let mut d_used = d.clone();
            let d_dict_used = super::super::used_dict(&mut d_used, &d_dict);
            // Pages of random lengths, each of parts of random lengths
            // (the sink's row blocks).
            let mut cuts = vec![0];
            while *cuts.last().unwrap() < rows {
                let at = *cuts.last().unwrap() + rng.usize(1..=rows.div_ceil(3).max(1));
                cuts.push(at.min(rows));
            }
            let mut parts = Vec::new();
            for w in cuts.windows(2) {
                let (mut at, end) = (w[0], w[1]);
                let mut page = Vec::new();
                while at < end {
                    let next = (at + rng.usize(1..=64)).min(end);
                    page.push(at..next);
                    at = next;
                }
                parts.push(page);
            }
            fn pages<'a, T>(
                parts: &[Vec<std::ops::Range<usize>>],
                v: &'a [T],
                has: Option<&'a [bool]>,
            ) -> Vec<Rows<'a, T>> {
                parts
                    .iter()
                    .map(|p| {
                        p.iter()
                            .map(|r| (&v[r.clone()], has.map(|h| &h[r.clone()])))
                            .collect()
                    })
                    .collect()
            }
            // `d` as an integer column of few values, dictionary-encoded.
            let d_values: Vec<i64> = d.iter().map(|&k| d_dict[k as usize]).collect();
            let chunks = [
                e.ints(
                    cols[0].clone(),
                    &pages(&parts, &values, Some(&present)),
                    true,
                    false,
                )
                .unwrap(),
                e.ints(
                    cols[1].clone(),
                    &pages(&parts, &b, None),
                    false,
                    rows % 2 == 0,
                )
                .unwrap(),
                e.dict(
                    cols[2].clone(),
                    &pages(&parts, &c_keys, Some(&c_present)),
                    true,
                    &c_dict,
                )
                .unwrap(),
                if rows % 2 == 0 {
                    e.keyed_ints(cols[3].clone(), &pages(&parts, &d_used, None), &d_dict_used)
                        .unwrap()
                } else {
                    e.ints(
                        cols[3].clone(),
                        &pages(&parts, &d_values, None),
                        false,
                        true,
                    )
                    .unwrap()
                },
                e.bools(cols[4].clone(), &pages(&parts, &flags, None))
                    .unwrap(),
            ];
            let mut group = file.next_row_group().unwrap();
            for chunk in chunks {
                group.append_column(&chunk.bytes, chunk.close).unwrap();
            }
            group.close().unwrap();
            let bytes = Bytes::from(file.into_inner().unwrap());

            check_page_index(&bytes, &cuts, &a, &b, &c, &words, &d_values, &flags);
            let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
                .unwrap()
                .with_batch_size(1 << 20)
                .build()
                .unwrap();
            let batch = reader.map(|b| b.unwrap()).next().unwrap();
            let got_a: Vec<Option<i64>> = batch.column(0).as_primitive::<I64>().iter().collect();
            assert_eq!(got_a, a, "{rows} rows");
            let got_b: Vec<i32> = batch.column(1).as_primitive::<I32>().values().to_vec();
            assert_eq!(got_b, b, "{rows} rows");
            let got_c: Vec<Option<&str>> = batch.column(2).as_string::<i32>().iter().collect();
            let want_c: Vec<Option<&str>> =
                c.iter().map(|k| k.map(|k| words[k as usize])).collect();
            assert_eq!(got_c, want_c, "{rows} rows");
            let got_d: Vec<i64> = batch.column(3).as_primitive::<I64>().values().to_vec();
            let want_d: Vec<i64> = d.iter().map(|&k| d_dict[k as usize]).collect();
            assert_eq!(got_d, want_d, "{rows} rows");
            let got_e: Vec<bool> = batch.column(4).as_boolean().iter().flatten().collect();
            assert_eq!(got_e, flags, "{rows} rows");
            assert_eq!(batch.column(4).null_count(), 0);
        }
    }

    /// The file's page index against the rows: a page per range of
    /// `cuts`, its first row, its nulls, its min and max; the boundary
    /// order the pages' min and max follow.
    #[allow(clippy::too_many_arguments)]
    fn check_page_index(
        bytes: &Bytes,
        cuts: &[usize],
        a: &[Option<i64>],
        b: &[i32],
        c: &[Option<u32>],
        words: &[&str],
        d: &[i64],
        flags: &[bool],
    ) {
        use parquet::file::page_index::column_index::ColumnIndexMetaData as Index;
        use parquet::file::reader::FileReader;
        use parquet::file::serialized_reader::{ReadOptionsBuilder, SerializedFileReader};
        let options = ReadOptionsBuilder::new().with_page_index().build();
        let reader = SerializedFileReader::new_with_options(bytes.clone(), options).unwrap();
        let md = reader.metadata();
        let offsets = &md.offset_index().expect("an offset index")[0];
        let index = &md.column_index().expect("a column index")[0];
        let rows = *cuts.last().unwrap();
        for column in offsets {
            let firsts: Vec<usize> = column
                .page_locations
                .iter()
                .map(|l| l.first_row_index as usize)
                .collect();
            assert_eq!(firsts, cuts[..cuts.len() - 1], "{rows} rows");
        }
        /// Per page: nulls, min, max of the values present.
        fn want<T: Ord + Copy>(
            cuts: &[usize],
            v: &[Option<T>],
        ) -> Vec<(i64, Option<T>, Option<T>)> {
            cuts.windows(2)
                .map(|w| {
                    let page = &v[w[0]..w[1]];
                    let nulls = page.iter().filter(|x| x.is_none()).count() as i64;
                    let present = page.iter().flatten();
                    (
                        nulls,
                        present.clone().min().copied(),
                        present.max().copied(),
                    )
                })
                .collect()
        }
        fn order<T: Ord + Copy>(pages: &[(i64, Option<T>, Option<T>)]) -> BoundaryOrder {
            let m: Vec<(T, T)> = pages.iter().filter_map(|p| p.1.zip(p.2)).collect();
            if m.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1) {
                BoundaryOrder::ASCENDING
            } else if m.windows(2).all(|w| w[0].0 >= w[1].0 && w[0].1 >= w[1].1) {
                BoundaryOrder::DESCENDING
            } else {
                BoundaryOrder::UNORDERED
            }
        }
        macro_rules! check {
            ($index:expr, $variant:ident, $want:expr) => {{
                let want = $want;
                let Index::$variant(ix) = $index else {
                    panic!("{rows} rows: {:?}", $index)
                };
                let got: Vec<_> = (0..want.len())
                    .map(|p| {
                        (
                            ix.null_count(p).unwrap(),
                            ix.min_value(p).copied(),
                            ix.max_value(p).copied(),
                        )
                    })
                    .collect();
                assert_eq!(got, want, "{rows} rows");
                assert_eq!(
                    $index.get_boundary_order(),
                    Some(order(&want)),
                    "{rows} rows"
                );
            }};
        }
        check!(&index[0], INT64, want(cuts, a));
        let b: Vec<Option<i32>> = b.iter().copied().map(Some).collect();
        check!(&index[1], INT32, want(cuts, &b));
        let d: Vec<Option<i64>> = d.iter().copied().map(Some).collect();
        check!(&index[3], INT64, want(cuts, &d));
        let flags: Vec<Option<bool>> = flags.iter().copied().map(Some).collect();
        check!(&index[4], BOOLEAN, want(cuts, &flags));
        let c: Vec<Option<&str>> = c.iter().map(|k| k.map(|k| words[k as usize])).collect();
        let want_c = want(cuts, &c);
        let Index::BYTE_ARRAY(ix) = &index[2] else {
            panic!("{rows} rows: {:?}", index[2])
        };
        for (p, (nulls, lo, hi)) in want_c.iter().enumerate() {
            assert_eq!(ix.null_count(p), Some(*nulls), "{rows} rows, page {p}");
            assert_eq!(ix.is_null_page(p), lo.is_none(), "{rows} rows, page {p}");
            if let (Some(lo), Some(hi)) = (lo, hi) {
                assert_eq!(
                    ix.min_value(p),
                    Some(lo.as_bytes()),
                    "{rows} rows, page {p}"
                );
                assert_eq!(
                    ix.max_value(p),
                    Some(hi.as_bytes()),
                    "{rows} rows, page {p}"
                );
            }
        }
        assert_eq!(
            index[2].get_boundary_order(),
            Some(order(&want_c)),
            "{rows} rows"
        );
    }

    /// A column of 1,000 values (10-bit keys) made of runs of values seen
    /// before, of any length, as `--repeat` rounds give: its keys packed
    /// at whole bytes, zstd finds the runs wherever they start (packed at
    /// 10 bits, a run starts at any bit and is other bytes each time:
    /// 0.73 of the tight size, against 0.27 here).
    #[test]
    fn repeats_are_found_at_any_bit_offset() {
        use arrow_schema::{DataType, Field, Schema};
        use parquet::arrow::ArrowSchemaConverter;
        let schema = Schema::new(vec![Field::new("d", DataType::Int64, false)]);
        let descr = ArrowSchemaConverter::new().convert(&schema).unwrap();
        let col = descr.column(0);
        let mut rng = fastrand::Rng::with_seed(46);
        let values: Vec<i64> = (0..1000).map(|_| rng.i64(0..1 << 40)).collect();
        let motifs: Vec<Vec<i64>> = (0..512)
            .map(|_| {
                let len = rng.usize(5..24);
                (0..len).map(|_| values[rng.usize(0..1000)]).collect()
            })
            .collect();
        let mut rows: Vec<i64> = values.clone();
        while rows.len() < 60_000 {
            rows.extend_from_slice(&motifs[rng.usize(0..motifs.len())]);
        }
        rows.truncate(60_000);
        let mut e = ChunkEncoder::new(1).unwrap();
        let chunk = e
            .ints(col, &[vec![(&rows[..], None)]], false, true)
            .unwrap();
        let meta = &chunk.close.metadata;
        assert_eq!(
            meta.compression(),
            Compression::ZSTD(ZstdLevel::try_new(1).unwrap())
        );
        let tight = rows.len() * 10 / 8;
        let data = meta.compressed_size() as usize - 1000 * 8;
        assert!(
            data * 3 < tight,
            "{data} bytes of keys, {tight} packed tight"
        );
    }

    /// A chunk zstd barely shrinks makes the column's next chunks raw
    /// (packed tight, not compressed), and they read back.
    #[test]
    fn incompressible_columns_go_uncompressed() {
        use arrow_schema::{DataType, Field, Schema};
        use parquet::arrow::ArrowSchemaConverter;
        let schema = Schema::new(vec![Field::new("n", DataType::Int64, false)]);
        let descr = ArrowSchemaConverter::new().convert(&schema).unwrap();
        let col = descr.column(0);
        let mut rng = fastrand::Rng::with_seed(46);
        let mut e = ChunkEncoder::new(1).unwrap();
        let mut codecs = Vec::new();
        for _ in 0..RAW_CHUNKS + 2 {
            let rows: Vec<i64> = (0..5000).map(|_| rng.i64(..)).collect();
            let chunk = e
                .ints(col.clone(), &[vec![(&rows[..], None)]], false, false)
                .unwrap();
            codecs.push(chunk.close.metadata.compression());
        }
        let zstd = Compression::ZSTD(ZstdLevel::try_new(1).unwrap());
        assert_eq!(codecs[0], zstd);
        assert!(codecs[1..=RAW_CHUNKS as usize]
            .iter()
            .all(|&c| c == Compression::UNCOMPRESSED));
        assert_eq!(codecs[RAW_CHUNKS as usize + 1], zstd);
    }

    #[test]
    fn booleans_pack_lowest_first() {
        for v in 0..=255u8 {
            assert_eq!(pack_bools(std::array::from_fn(|i| v >> i & 1 == 1)), v);
        }
    }

    #[test]
    fn raised_max_is_above() {
        assert_eq!(raised("ab").as_deref(), Some("ac"));
        assert!(raised("a\u{10FFFF}").unwrap() == "b");
    }
}
