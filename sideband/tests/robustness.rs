//! Malformed input never panics: every truncation of a real recording, and
//! a few thousand random byte flips (deterministic PRNG), go through the
//! reader, the record parser, the typed feature views and the serializer,
//! and come out as values or errors.

mod common;

use common::*;
use sideband::auxtrace_info::AuxtraceInfo;
use sideband::file::PerfFile;
use sideband::record::Record;
use sideband::serialize::serialize_event;

/// Everything the reader offers, exercised on `bytes`.
fn exercise(bytes: &[u8]) -> usize {
    let Ok(f) = PerfFile::parse(bytes) else {
        return 0;
    };
    let ft = f.features();
    let _ = (
        ft.build_ids(),
        ft.hostname(),
        ft.osrelease(),
        ft.cpuid(),
        ft.cpudesc(),
        ft.nrcpus(),
    );
    let _ = (
        ft.cmdline(),
        ft.event_desc(),
        ft.clockid_res_ns(),
        ft.clock_data(),
        ft.auxtrace_index(),
    );
    let mut n = 0;
    let mut out = Vec::new();
    for e in f.events() {
        let Ok((_, e)) = e else { break };
        if let Record::AuxtraceInfo(i) = &e.record {
            let _ = AuxtraceInfo::intel_pt(i);
        }
        out.clear();
        let _ = serialize_event(f.attrs(), &e, &mut out);
        n += 1;
    }
    n
}

#[test]
fn every_truncation_is_a_value_or_an_error() {
    for name in FILES {
        let bytes = realdata(name);
        let full = exercise(&bytes);
        assert!(full > 0);
        // Every cut through the header and attrs, around every record header
        // and every feature section boundary, and every 37th byte elsewhere
        // (each cut re-reads the whole prefix, so every byte would take minutes).
        let f = PerfFile::parse(&bytes).unwrap();
        let mut edges: Vec<usize> = f.raw_records().map(|r| r.offset as usize).collect();
        edges.push(f.data_range().end as usize);
        for s in f.features().sections().values() {
            edges.push(s.offset as usize);
            edges.push(s.offset as usize + s.data.len());
        }
        let near = |cut: usize| edges.iter().any(|&e| cut + 2 >= e && cut <= e + 12);
        for cut in 0..bytes.len() {
            if cut as u64 <= f.data_range().start + 64 || near(cut) || cut % 37 == 0 {
                exercise(&bytes[..cut]);
            }
        }
    }
}

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn random_byte_flips_are_values_or_errors() {
    let files: Vec<Vec<u8>> = FILES.iter().map(|n| realdata(n)).collect();
    // Where flips matter most: the file header, attrs, record headers and
    // feature sections. Half the flips go to record headers.
    let headers: Vec<Vec<usize>> = files
        .iter()
        .map(|b| {
            PerfFile::parse(b)
                .unwrap()
                .raw_records()
                .map(|r| r.offset as usize)
                .collect()
        })
        .collect();
    let mut rng = Rng(0x5eed_0f5d_eba2_d001);
    for _ in 0..3000 {
        let which = rng.below(files.len());
        let mut b = files[which].clone();
        for _ in 0..1 + rng.below(4) {
            let at = if rng.below(2) == 0 {
                let hs = &headers[which];
                hs[rng.below(hs.len())] + rng.below(56)
            } else if rng.below(3) == 0 {
                rng.below(0x400)
            } else {
                rng.below(b.len())
            };
            if let Some(x) = b.get_mut(at) {
                *x = match rng.below(4) {
                    0 => 0,
                    1 => 0xff,
                    _ => rng.next() as u8,
                };
            }
        }
        exercise(&b);
    }
}
