//! The `calls` table's column chunks, encoded here and handed whole to the
//! Parquet crate's file writer (`SerializedRowGroupWriter::append_column`),
//! which writes the page headers, the footer and the schema. The Arrow
//! writer hashed every row's value of every dictionary column again (the
//! sink already holds each string's key) and cost, with its delta packing,
//! levels and statistics, as much CPU as the whole decode: see `Part`'s
//! doc in the parent module. Only the encodings used are written, each as
//! the format's spec says: PLAIN, DELTA_BINARY_PACKED, RLE_DICTIONARY over
//! the RLE/bit-packing hybrid, in data pages v1, compressed with zstd.

use bytes::Bytes;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::column::page::{CompressedPage, Page, PageWriteSpec, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::data_type::ByteArray;
use parquet::errors::ParquetError;
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::statistics::{Statistics, ValueStatistics};
use parquet::file::writer::{SerializedPageWriter, TrackedWrite};
use parquet::schema::types::ColumnDescPtr;

/// A column chunk ready for `append_column`: its pages and what the
/// footer says of them.
pub(super) struct Chunk {
    pub bytes: Bytes,
    pub close: ColumnCloseResult,
}

/// Bytes of a string statistic at most, as the Arrow writer's default
/// (`DEFAULT_STATISTICS_TRUNCATE_LENGTH`): a long C++ name would
/// otherwise be repeated in the footer per row group.
const STAT_BYTES: usize = 64;

/// Encodes column chunks; holds the zstd context and buffers reused for
/// every chunk of a table.
pub(super) struct ChunkEncoder {
    zstd: zstd::bulk::Compressor<'static>,
    level: i32,
    body: Vec<u8>,
}

/// An integer column's physical type (INT32, INT64): deltas wrap at its
/// width, as readers add them back.
pub(super) trait Int: Copy + Ord {
    /// `self - prev` wrapped at the type's width, sign-extended.
    fn delta(self, prev: Self) -> i64;
    /// `d - min` wrapped at the type's width, as unsigned.
    fn above(d: i64, min: i64) -> u64;
    fn widen(self) -> i64;
    fn statistics(min_max: Option<(Self, Self)>, nulls: u64) -> Statistics;
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

impl ChunkEncoder {
    pub fn new(level: i32) -> Result<ChunkEncoder, ParquetError> {
        let zstd = zstd::bulk::Compressor::new(level)
            .map_err(|e| ParquetError::General(format!("zstd level {level}: {e}")))?;
        Ok(ChunkEncoder {
            zstd,
            level,
            body: Vec::new(),
        })
    }

    /// An integer column, DELTA_BINARY_PACKED; `present`: per row,
    /// whether it has a value (`None`: every row has), `values` the
    /// present ones.
    pub fn ints<T: Int>(
        &mut self,
        descr: ColumnDescPtr,
        rows: usize,
        present: Option<&[bool]>,
        values: &[T],
    ) -> Result<Chunk, ParquetError> {
        self.body.clear();
        self.levels(present);
        let (encoding, min_max) = if values.is_empty() {
            (Encoding::PLAIN, None)
        } else {
            let min_max = delta_binary_packed(values, &mut self.body);
            (Encoding::DELTA_BINARY_PACKED, Some(min_max))
        };
        let stats = T::statistics(min_max, (rows - values.len()) as u64);
        self.chunk(descr, rows, None, encoding, stats)
    }

    /// A BOOLEAN column without nulls, PLAIN (one bit a row).
    pub fn bools(&mut self, descr: ColumnDescPtr, values: &[bool]) -> Result<Chunk, ParquetError> {
        self.body.clear();
        let (mut lo, mut hi) = (true, false);
        for bits in values.chunks(8) {
            let mut byte = 0u8;
            for (i, &b) in bits.iter().enumerate() {
                byte |= u8::from(b) << i;
                lo &= b;
                hi |= b;
            }
            self.body.push(byte);
        }
        let min_max = (!values.is_empty()).then_some((lo, hi));
        let stats = Statistics::boolean(
            min_max.map(|m| m.0),
            min_max.map(|m| m.1),
            None,
            Some(0),
            false,
        );
        self.chunk(descr, values.len(), None, Encoding::PLAIN, stats)
    }

    /// A string column, RLE_DICTIONARY: `keys` index `dict` (each of its
    /// strings used at least once), one per present row.
    pub fn dict<S: AsRef<str>>(
        &mut self,
        descr: ColumnDescPtr,
        rows: usize,
        present: Option<&[bool]>,
        keys: &[u32],
        dict: &[S],
    ) -> Result<Chunk, ParquetError> {
        self.body.clear();
        self.levels(present);
        let nulls = (rows - keys.len()) as u64;
        if dict.is_empty() {
            let stats = Statistics::byte_array(None, None, None, Some(nulls), false);
            return self.chunk(descr, rows, None, Encoding::PLAIN, stats);
        }
        let width = bits(dict.len() as u64 - 1).max(1);
        self.body.push(width as u8);
        hybrid(keys, width, &mut self.body);
        let mut page = Vec::new();
        let (mut lo, mut hi) = (dict[0].as_ref(), dict[0].as_ref());
        for s in dict {
            let s = s.as_ref();
            page.extend_from_slice(&(s.len() as u32).to_le_bytes());
            page.extend_from_slice(s.as_bytes());
            lo = lo.min(s);
            hi = hi.max(s);
        }
        let stats = string_statistics(lo, hi, nulls);
        let dict_page = (page, dict.len() as u32);
        self.chunk(
            descr,
            rows,
            Some(dict_page),
            Encoding::RLE_DICTIONARY,
            stats,
        )
    }

    /// Definition levels of a nullable column (1: a value), RLE-hybrid
    /// behind their length, as data pages v1 hold them.
    fn levels(&mut self, present: Option<&[bool]>) {
        let Some(present) = present else { return };
        let at = self.body.len();
        self.body.extend_from_slice(&[0; 4]);
        hybrid_bits(present, &mut self.body);
        let len = (self.body.len() - at - 4) as u32;
        self.body[at..at + 4].copy_from_slice(&len.to_le_bytes());
    }

    fn compress(&mut self, data: &[u8]) -> Result<Bytes, ParquetError> {
        let out = self
            .zstd
            .compress(data)
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        Ok(Bytes::from(out))
    }

    /// The chunk of one data page (`self.body`) after its dictionary page.
    fn chunk(
        &mut self,
        descr: ColumnDescPtr,
        rows: usize,
        dict: Option<(Vec<u8>, u32)>,
        encoding: Encoding,
        stats: Statistics,
    ) -> Result<Chunk, ParquetError> {
        let mut sink = TrackedWrite::new(Vec::new());
        let mut pages = SerializedPageWriter::new(&mut sink);
        let mut dict_spec: Option<PageWriteSpec> = None;
        let mut encodings = vec![Encoding::RLE];
        if let Some((plain, n)) = dict {
            let buf = self.compress(&plain)?;
            let page = Page::DictionaryPage {
                buf,
                num_values: n,
                encoding: Encoding::PLAIN,
                is_sorted: false,
            };
            dict_spec = Some(pages.write_page(CompressedPage::new(page, plain.len()))?);
            encodings.push(Encoding::PLAIN);
        }
        let body = std::mem::take(&mut self.body);
        let buf = self.compress(&body);
        self.body = body;
        let page = Page::DataPage {
            buf: buf?,
            num_values: rows as u32,
            encoding,
            def_level_encoding: Encoding::RLE,
            rep_level_encoding: Encoding::RLE,
            statistics: None,
        };
        let data_spec = pages.write_page(CompressedPage::new(page, self.body.len()))?;
        pages.close()?;
        drop(pages);
        if !encodings.contains(&encoding) {
            encodings.push(encoding);
        }
        let specs = dict_spec.iter().chain([&data_spec]);
        let (compressed, uncompressed) = specs.fold((0, 0), |(c, u), s| {
            (c + s.compressed_size as i64, u + s.uncompressed_size as i64)
        });
        let metadata = ColumnChunkMetaData::builder(descr)
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(self.level)?))
            .set_encodings(encodings)
            .set_num_values(rows as i64)
            .set_total_compressed_size(compressed)
            .set_total_uncompressed_size(uncompressed)
            .set_data_page_offset(data_spec.offset as i64)
            .set_dictionary_page_offset(dict_spec.map(|s| s.offset as i64))
            .set_statistics(stats)
            .build()?;
        let bytes = Bytes::from(sink.into_inner()?);
        Ok(Chunk {
            close: ColumnCloseResult {
                bytes_written: bytes.len() as u64,
                rows_written: rows as u64,
                metadata,
                bloom_filter: None,
                column_index: None,
                offset_index: None,
            },
            bytes,
        })
    }
}

/// Min and max of a string column, cut to [`STAT_BYTES`] as the Arrow
/// writer cuts them: the min to a prefix, the max to a prefix whose last
/// character is raised by one (so still above every value); inexact then.
fn string_statistics(lo: &str, hi: &str, nulls: u64) -> Statistics {
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
    Statistics::ByteArray(
        ValueStatistics::new(
            Some(ByteArray::from(lo_cut.as_bytes().to_vec())),
            Some(ByteArray::from(hi.into_bytes())),
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
/// at one width. Returns the values' minimum and maximum.
fn delta_binary_packed<T: Int>(values: &[T], out: &mut Vec<u8>) -> (T, T) {
    uleb(out, BLOCK as u64);
    uleb(out, MINIBLOCKS as u64);
    uleb(out, values.len() as u64);
    uleb(out, zigzag(values[0].widen()));
    let (mut lo, mut hi, mut prev) = (values[0], values[0], values[0]);
    let mut deltas = [0i64; BLOCK];
    let mut above = [0u64; BLOCK];
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
            .zip(above.chunks_exact_mut(MINI).zip(deltas.chunks_exact(MINI)))
        {
            let mut or = 0;
            for (a, &d) in a.iter_mut().zip(d) {
                *a = T::above(d, min);
                or |= *a;
            }
            *width = bits(or);
        }
        out.extend(widths.iter().map(|&w| w as u8));
        let used = block.len().div_ceil(MINI);
        for (&width, a) in widths.iter().zip(above.chunks_exact(MINI)).take(used) {
            pack32(a, width, out);
        }
    }
    (lo, hi)
}

/// 32 values bit-packed at `width` (little-endian bit order): 4 × width
/// bytes.
#[inline]
fn pack32(values: &[u64], width: u32, out: &mut Vec<u8>) {
    if width == 0 {
        return;
    }
    let mut words = [0u64; MINI];
    let mut n = 0;
    let mut acc = 0u64;
    let mut held = 0u32;
    for &v in values {
        acc |= v << held;
        held += width;
        if held >= 64 {
            words[n] = acc;
            n += 1;
            held -= 64;
            // The bits of `v` that did not fit.
            acc = if held == 0 { 0 } else { v >> (width - held) };
        }
    }
    // 32 × width bits: a half word may be left.
    if held > 0 {
        words[n] = acc;
        n += 1;
    }
    let at = out.len();
    for w in &words[..n] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out.truncate(at + 4 * width as usize);
}

/// Values as the RLE/bit-packing hybrid at `width` (at most 32): runs of
/// 8 or more equal values as RLE runs, the rest bit-packed in groups of
/// 8 (a run lends the values before it what makes their count a multiple
/// of 8; the last group is padded with zeros, which readers do not read).
fn hybrid(values: &[u32], width: u32, out: &mut Vec<u8>) {
    let n = values.len();
    let (mut i, mut literal) = (0, 0);
    while i < n {
        let v = values[i];
        let mut j = i + 1;
        while j < n && values[j] == v {
            j += 1;
        }
        if j - i >= 8 {
            let lend = (8 - (i - literal) % 8) % 8;
            if j - i - lend >= 8 {
                bit_packed(&values[literal..i + lend], width, out);
                uleb(out, ((j - i - lend) as u64) << 1);
                let bytes = width.div_ceil(8) as usize;
                out.extend_from_slice(&v.to_le_bytes()[..bytes]);
                literal = j;
            }
        }
        i = j;
    }
    bit_packed(&values[literal..], width, out);
}

/// [`hybrid`] of booleans at width 1.
fn hybrid_bits(values: &[bool], out: &mut Vec<u8>) {
    let n = values.len();
    let (mut i, mut literal) = (0, 0);
    while i < n {
        let v = values[i];
        let mut j = i + 1;
        while j < n && values[j] == v {
            j += 1;
        }
        if j - i >= 8 {
            let lend = (8 - (i - literal) % 8) % 8;
            if j - i - lend >= 8 {
                bit_packed_bits(&values[literal..i + lend], out);
                uleb(out, ((j - i - lend) as u64) << 1);
                out.push(u8::from(v));
                literal = j;
            }
        }
        i = j;
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
    let mut at = out.len();
    out.resize(at + groups * width as usize, 0);
    let mut acc = 0u64;
    let mut held = 0u32;
    for &v in values {
        acc |= u64::from(v) << held;
        held += width;
        if held >= 32 {
            out[at..at + 4].copy_from_slice(&(acc as u32).to_le_bytes());
            at += 4;
            acc >>= 32;
            held -= 32;
        }
    }
    // The padding's zeros are already there.
    let rest = held.div_ceil(8) as usize;
    out[at..at + rest].copy_from_slice(&acc.to_le_bytes()[..rest]);
}

fn bit_packed_bits(values: &[bool], out: &mut Vec<u8>) {
    if values.is_empty() {
        return;
    }
    let groups = values.len().div_ceil(8);
    uleb(out, ((groups as u64) << 1) | 1);
    for bits in values.chunks(8) {
        let mut byte = 0u8;
        for (i, &b) in bits.iter().enumerate() {
            byte |= u8::from(b) << i;
        }
        out.push(byte);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hybrid_runs_and_literals() {
        let mut out = Vec::new();
        // 3 literals, then 20 sevens: 5 lent to the literals, 15 a run.
        let v: Vec<u32> = [1, 2, 3].into_iter().chain([7; 20]).collect();
        hybrid(&v, 3, &mut out);
        assert_eq!(out[0], (1 << 1) | 1);
        assert_eq!(out[4], 15 << 1);
        assert_eq!(out[5], 7);
        assert_eq!(out.len(), 6);
    }

    #[test]
    fn raised_max_is_above() {
        assert_eq!(raised("ab").as_deref(), Some("ac"));
        assert!(raised("a\u{10FFFF}").unwrap() == "b");
    }
}
