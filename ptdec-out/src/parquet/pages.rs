//! The `calls` table's column chunks, encoded here from the sink's
//! columns and handed whole to the Parquet crate's file writer
//! (`SerializedRowGroupWriter::append_column`), which writes the page
//! headers, the footer and the schema. Hand-written because the Arrow
//! writer re-hashed every row's strings, whose keys the sink already
//! holds, and with its delta packing and statistics cost as much CPU as
//! the decode (issue 46). Only what the spec needs is written: PLAIN,
//! DELTA_BINARY_PACKED and RLE_DICTIONARY over the RLE/bit-packing
//! hybrid, one data page v1 per chunk, zstd, chunk statistics.

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
    /// PLAIN: little-endian.
    fn plain(self, out: &mut Vec<u8>);
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
        let min_max = (!values.is_empty()).then_some((all, any));
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
        let nulls = (rows - keys.len()) as u64;
        let Some(first) = dict.first() else {
            let stats = Statistics::byte_array(None, None, None, Some(nulls), false);
            return self.keyed(descr, rows, present, keys, None, stats);
        };
        let mut page = Vec::new();
        let (mut lo, mut hi) = (first.as_ref(), first.as_ref());
        for s in dict {
            let s = s.as_ref();
            page.extend_from_slice(&(s.len() as u32).to_le_bytes());
            page.extend_from_slice(s.as_bytes());
            lo = lo.min(s);
            hi = hi.max(s);
        }
        let stats = string_statistics(lo, hi, nulls);
        let page = (page, dict.len() as u32);
        self.keyed(descr, rows, present, keys, Some(page), stats)
    }

    /// An integer column of repeated values without nulls,
    /// RLE_DICTIONARY: `keys` index `dict` (each value used at least
    /// once).
    pub fn int_dict<T: Int>(
        &mut self,
        descr: ColumnDescPtr,
        rows: usize,
        keys: &[u32],
        dict: &[T],
    ) -> Result<Chunk, ParquetError> {
        let min_max = dict.iter().min().zip(dict.iter().max());
        let stats = T::statistics(min_max.map(|(lo, hi)| (*lo, *hi)), 0);
        let page = (!dict.is_empty()).then(|| {
            let mut bytes = Vec::new();
            for v in dict {
                v.plain(&mut bytes);
            }
            (bytes, dict.len() as u32)
        });
        self.keyed(descr, rows, None, keys, page, stats)
    }

    /// A dictionary-encoded chunk: its dictionary page (PLAIN values,
    /// how many), its data page of keys; without a dictionary (no row
    /// has a value), a PLAIN page of no values.
    fn keyed(
        &mut self,
        descr: ColumnDescPtr,
        rows: usize,
        present: Option<&[bool]>,
        keys: &[u32],
        dict: Option<(Vec<u8>, u32)>,
        stats: Statistics,
    ) -> Result<Chunk, ParquetError> {
        self.body.clear();
        self.levels(present);
        let Some((page, n)) = dict else {
            return self.chunk(descr, rows, None, Encoding::PLAIN, stats);
        };
        let width = bits(u64::from(n) - 1).max(1);
        self.body.push(width as u8);
        hybrid(keys, width, &mut self.body);
        self.chunk(
            descr,
            rows,
            Some((page, n)),
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
    let mut above = [[0u64; MINI]; MINIBLOCKS];
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
            *width = bits(or);
        }
        out.extend(widths.iter().map(|&w| w as u8));
        let used = block.len().div_ceil(MINI);
        for (&width, a) in widths.iter().zip(&above).take(used) {
            pack32(a, width, out);
        }
    }
    (lo, hi)
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
        for rows in [1usize, 2, 7, 8, 9, 31, 33, 128, 129, 300, 1000, 5000] {
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
            let values: Vec<i64> = a.iter().flatten().copied().collect();
            let c_present: Vec<bool> = c.iter().map(Option::is_some).collect();
            let c_keys: Vec<u32> = c.iter().flatten().copied().collect();
            // Dictionaries of the values used, as the sink makes them.
            let mut c_used: Vec<u32> = c_keys.clone();
            let c_dict = super::super::used_dict(&mut c_used, &words);
            let mut d_used = d.clone();
            let d_dict_used = super::super::used_dict(&mut d_used, &d_dict);
            let chunks = [
                e.ints(cols[0].clone(), rows, Some(&present), &values)
                    .unwrap(),
                e.ints(cols[1].clone(), rows, None, &b).unwrap(),
                e.dict(cols[2].clone(), rows, Some(&c_present), &c_used, &c_dict)
                    .unwrap(),
                e.int_dict(cols[3].clone(), rows, &d_used, &d_dict_used)
                    .unwrap(),
                e.bools(cols[4].clone(), &flags).unwrap(),
            ];
            let mut group = file.next_row_group().unwrap();
            for chunk in chunks {
                group.append_column(&chunk.bytes, chunk.close).unwrap();
            }
            group.close().unwrap();
            let bytes = Bytes::from(file.into_inner().unwrap());

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
