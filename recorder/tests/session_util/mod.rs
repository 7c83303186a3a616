//! Shared helpers of the session tests: simulated buffers, producers that
//! write as the kernel does, and a reader of the perf.data they produce.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{self, Seek, SeekFrom, Write};
use std::sync::{Arc, Mutex};

use ptrec::session::sim::{SimBuffer, SimOptions, SimWaker};
use sideband::file::PerfFile;
use sideband::record::kind;

/// A deterministic byte stream without long zero runs.
pub fn pattern(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x as u8) | 1
        })
        .collect()
}

/// A COMM record of `buf` with a name of `len` characters.
pub fn comm(buf: &SimBuffer, pid: u32, len: usize) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&pid.to_le_bytes());
    body.extend_from_slice(&pid.to_le_bytes());
    body.extend((0..len).map(|i| b'a' + (i % 26) as u8));
    body.push(0);
    buf.make_record(kind::COMM, &body)
}

pub fn sim(n: usize, opts: SimOptions, waker: &Arc<SimWaker>) -> Vec<Arc<SimBuffer>> {
    (0..n)
        .map(|i| {
            SimBuffer::new(
                SimOptions {
                    id: 100 + i as u64,
                    ..opts
                },
                Arc::clone(waker),
            )
            .unwrap()
        })
        .collect()
}

pub fn ids(n: usize) -> Vec<u64> {
    (0..n).map(|i| 100 + i as u64).collect()
}

#[derive(Debug, Clone)]
pub struct Chunk {
    pub offset: u64,
    pub reference: u64,
    pub cpu: u32,
    pub data: Vec<u8>,
}

/// What a perf.data holds, per buffer.
#[derive(Debug, Default)]
pub struct Parsed {
    /// AUXTRACE chunks by idx, in file order.
    pub aux: BTreeMap<u32, Vec<Chunk>>,
    /// Kernel records by event id, concatenated in file order.
    pub data: BTreeMap<u64, Vec<u8>>,
    pub rounds: usize,
    pub auxtrace_index_entries: usize,
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Parses a perf.data completely (every record must parse) and sorts it out.
pub fn parse(bytes: &[u8]) -> Parsed {
    let file = PerfFile::parse(bytes).expect("perf.data parses");
    for ev in file.events() {
        ev.expect("every record parses");
    }
    let mut p = Parsed::default();
    for r in file.raw_records() {
        match r.header.kind {
            kind::AUXTRACE => {
                let size = u64_at(r.bytes, 8) as usize;
                assert_eq!(size, r.payload.len());
                p.aux
                    .entry(u32::from_le_bytes(r.bytes[32..36].try_into().unwrap()))
                    .or_default()
                    .push(Chunk {
                        offset: u64_at(r.bytes, 16),
                        reference: u64_at(r.bytes, 24),
                        cpu: u32::from_le_bytes(r.bytes[40..44].try_into().unwrap()),
                        data: r.payload.to_vec(),
                    });
            }
            kind::FINISHED_ROUND => p.rounds += 1,
            k if k < 64 => {
                let id = u64_at(r.bytes, r.bytes.len() - 8);
                p.data.entry(id).or_default().extend_from_slice(r.bytes);
            }
            k => panic!("unexpected record kind {k}"),
        }
    }
    if let Some(h) = file.header() {
        if h.has_feature(sideband::feature::id::AUXTRACE) {
            p.auxtrace_index_entries = p.aux.values().map(Vec::len).sum();
        }
    }
    p
}

/// Full trace: the chunks must be contiguous and, concatenated, equal
/// `stream` (only the last may carry zero padding).
pub fn assert_contiguous(chunks: &[Chunk], stream: &[u8]) {
    let mut got = Vec::new();
    for c in chunks {
        assert_eq!(c.offset, got.len() as u64, "chunk offsets are contiguous");
        got.extend_from_slice(&c.data);
    }
    assert!(
        got.len() >= stream.len(),
        "{} < {}",
        got.len(),
        stream.len()
    );
    assert!(got.len() - stream.len() < 8, "padding only at the end");
    assert!(got[stream.len()..].iter().all(|&b| b == 0));
    assert!(
        got[..stream.len()] == *stream,
        "AUX bytes differ from the producer's"
    );
}

/// An in-memory output that fails with ENOSPC past `budget` bytes, and
/// gets `reserve` more bytes when the reserve is released.
#[derive(Debug, Clone)]
pub struct SmallDisk {
    pub bytes: Arc<Mutex<Vec<u8>>>,
    pos: u64,
    budget: u64,
    reserve: u64,
}

impl SmallDisk {
    pub fn new(budget: u64, reserve: u64) -> SmallDisk {
        SmallDisk {
            bytes: Arc::default(),
            pos: 0,
            budget,
            reserve,
        }
    }
}

impl Write for SmallDisk {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut v = self.bytes.lock().unwrap();
        let room = self.budget.saturating_sub(self.pos) as usize;
        if room == 0 && !buf.is_empty() {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        let n = buf.len().min(room);
        let end = self.pos as usize + n;
        if v.len() < end {
            v.resize(end, 0);
        }
        v[self.pos as usize..end].copy_from_slice(&buf[..n]);
        self.pos += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Seek for SmallDisk {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let len = self.bytes.lock().unwrap().len() as u64;
        self.pos = match pos {
            SeekFrom::Start(p) => p,
            SeekFrom::End(d) => (len as i64 + d) as u64,
            SeekFrom::Current(d) => (self.pos as i64 + d) as u64,
        };
        Ok(self.pos)
    }
}

impl ptrec::session::OutputSink for SmallDisk {
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.bytes.lock().unwrap().truncate(len as usize);
        Ok(())
    }
    fn release_reserve(&mut self) -> io::Result<()> {
        self.budget += std::mem::take(&mut self.reserve);
        Ok(())
    }
}
