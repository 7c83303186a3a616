//! The fuzz harnesses of the perf.data reader and the decode path: what
//! ptdec does with a perf.data, with `ptdec raw` and `ptdec DIR` bytes
//! nobody checked, and with garbage before valid trace in chunks of any
//! size. Shared by the fuzz targets (`fuzz/fuzz_targets/`,
//! nightly, libFuzzer) and the stable test that replays the inputs they
//! found (`decoder/tests/fuzz_regressions.rs`), so a regression input runs
//! through exactly the code that failed. Errors are fine; a panic, an abort
//! or unbounded memory is a bug.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use ptdec::decode::{
    decode, DecodeOptions, DecodeStats, DecoderKind, ListCallback, OnError, RawConfig, RawSection,
};
use ptdec::emit::{EmitOptions, Target};
use ptdec::images::{ImageStore, SearchPath};
use ptdec::input::Trace;
use ptdec::model::ops::{Op, OpSink};
use ptdec::pipeline::{self, Input, Report, RunError};
use ptdec::plan::{Ftf, Plan};
use ptdec::raw::{Module, RawInput};
use ptdec::symbols::SymbolCache;
use ptsim::testkit::{self, Aux, Program, Setup};

/// The fixed image both harnesses decode against, at [`testkit::BASE`]: a
/// loop of direct calls, a conditional branch, an indirect call and jump
/// (through `lea rax`), returns, two syscalls (the second ends the thread in
/// [`testkit::execute`]) and, never reached by the real run, a jump to
/// itself that libipt can follow forever without consuming a packet.
pub const CODE: &[u8] = &[
    0xb9, 0x03, 0x00, 0x00, 0x00, //             0x00: mov ecx, 3
    0xe8, 0x26, 0x00, 0x00, 0x00, //             0x05: call f (0x30)
    0xff, 0xc9, //                               0x0a: dec ecx
    0x75, 0xf7, //                               0x0c: jne 0x05
    0x48, 0x8d, 0x05, 0x2b, 0x00, 0x00, 0x00, // 0x0e: lea rax, [g]
    0xff, 0xd0, //                               0x15: call rax
    0x0f, 0x05, //                               0x17: syscall
    0x48, 0x8d, 0x05, 0x30, 0x00, 0x00, 0x00, // 0x19: lea rax, [h]
    0xff, 0xe0, //                               0x20: jmp rax
    0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
    0x90, //                                     0x22..0x30: nop
    0xb8, 0x01, 0x00, 0x00, 0x00, //             0x30: f: mov eax, 1
    0xa9, 0x01, 0x00, 0x00, 0x00, //             0x35: test eax, 1
    0x74, 0x01, //                               0x3a: je 0x3d
    0xc3, //                                     0x3c: ret
    0xc3, //                                     0x3d: ret
    0x90, 0x90, //                               0x3e..0x40: nop
    0xe8, 0xeb, 0xff, 0xff, 0xff, //             0x40: g: call f
    0xc3, //                                     0x45: ret
    0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, // 0x46..0x50: nop
    0x0f, 0x05, //                               0x50: h: syscall
    0xeb, 0xfe, //                               0x52: jmp 0x52
];

/// The Intel PT ptsim's generator writes for a run of [`CODE`] (perf's
/// default config terms): the seed of both targets (`fuzz/seeds/`).
pub fn seed() -> Vec<u8> {
    let program = Program::new(CODE.to_vec(), testkit::BASE);
    let events = testkit::execute(&program, &testkit::Thread::new(1, 1));
    ptsim::pt::Generator::run(ptsim::pt::Config::default(), &events)
        .expect("ptsim encodes the seed run")
        .bytes
}

/// A per-process scratch directory under `$PT_FUZZ_SCRATCH` (set by
/// scripts/fuzz and the stable replay to a directory they remove), else the
/// temporary directory.
fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base =
            std::env::var_os("PT_FUZZ_SCRATCH").map_or_else(std::env::temp_dir, PathBuf::from);
        let d = base.join(format!("pt-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("create the fuzz scratch dir");
        d
    })
}

/// The image as a file (libipt reads sections from files).
fn image_file() -> &'static Path {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let p = scratch().join("image.bin");
        std::fs::write(&p, CODE).expect("write the fuzz image");
        p
    })
}

fn decode_options() -> DecodeOptions {
    DecodeOptions {
        jobs: 1,
        ..DecodeOptions::default()
    }
}

/// `input` decoded into FTF in memory, as `ptdec` plans and runs it.
fn run_ftf(input: Input<'_>, decode: DecodeOptions) -> Result<Report, RunError> {
    let out = Ftf {
        emit: EmitOptions::default(),
        target: Target::Memory,
    };
    let plan = Plan::new(input, decode, Default::default(), out);
    pipeline::run(&plan, None)
}

/// A trace decoded into FTF in memory: the instructions decoded (0 when
/// decoding failed).
fn trace_insns(trace: &Trace, images: &ImageStore, symbols: &SymbolCache) -> u64 {
    let input = Input::Trace {
        trace,
        images,
        symbols,
    };
    run_ftf(input, decode_options()).map_or(0, |r| r.decode.insns)
}

/// `data` as raw PT over the fixed image at `testkit::BASE`, as
/// `ptdec raw --pt DATA --raw image.bin:BASE` loads it.
fn raw_input(data: &[u8]) -> RawInput {
    let len = CODE.len() as u64;
    RawInput {
        pt_path: "fuzz.pt".into(),
        pt: data.to_vec(),
        sections: vec![RawSection {
            path: image_file().to_path_buf(),
            offset: 0,
            size: len,
            vaddr: testkit::BASE,
        }],
        modules: vec![Module {
            start: testkit::BASE,
            end: testkit::BASE + len,
            name: "image.bin".into(),
            image: None,
            bias: testkit::BASE,
        }],
    }
}

/// `ptdec raw --pt DATA --raw image.bin:BASE`: `data` is the raw PT.
/// Checked besides: decoded with every chunk handed on in pieces (its ops
/// past a bound of 3, `DecodeOptions::chunk_ops`: decoded again on the
/// calling thread and flushed as they fill up), the FTF and the counts
/// are the same. Returns the instructions decoded (0 when decoding
/// failed).
pub fn raw_pt(data: &[u8]) -> u64 {
    let input = raw_input(data);
    let symbols = SymbolCache::new();
    let cfg = RawConfig::default();
    let run = |decode: DecodeOptions| {
        let input = Input::Raw {
            input: &input,
            cfg: &cfg,
            symbols: &symbols,
        };
        run_ftf(input, decode).map(|r| {
            let bytes: Vec<Vec<u8>> = r.written.into_iter().map(|w| w.bytes).collect();
            (bytes, r.decode)
        })
    };
    let whole = run(decode_options());
    let pieces = run(DecodeOptions {
        chunk_ops: Some(3),
        ..decode_options()
    });
    match (&whole, &pieces) {
        (Ok((a, sa)), Ok((b, sb))) => {
            assert_eq!(
                (sa.insns, sa.ops, &sa.threads, &sa.errors),
                (sb.insns, sb.ops, &sb.threads, &sb.errors),
                "in pieces: other counts"
            );
            assert!(a == b, "in pieces: another FTF");
        }
        (Err(_), Err(_)) => {}
        _ => panic!(
            "in pieces: {:?} against {:?}",
            pieces.as_ref().map(|p| &p.1),
            whole.as_ref().map(|w| &w.1)
        ),
    }
    whole.map_or(0, |w| w.1.insns)
}

/// What one decoder made of raw PT: the instruction listing (`ptdec raw
/// --insn-list`: every instruction, error with its offset, enable,
/// disable; empty without `list`), the FTF bytes and the decode's
/// statistics (`None` when decoding failed). Without a listing the chunk
/// decoder lets the fast decoder follow blocks in its own loop
/// (`FastDecoder::set_follow`); with one it does not.
fn raw_pt_with(
    data: &[u8],
    decoder: DecoderKind,
    list: bool,
    on_error: OnError,
) -> (Vec<String>, Vec<Vec<u8>>, Option<DecodeStats>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let l = lines.clone();
    let mut o = decode_options();
    o.decoder = decoder;
    o.on_error = on_error;
    if list {
        o.insn_list = Some(ListCallback::new(move |item| {
            l.lock().unwrap().push(item.to_string());
        }));
    }
    let (ftf, stats) = match run_raw(data, o, EmitOptions::default()) {
        Ok(r) => (
            r.written.into_iter().map(|w| w.bytes).collect(),
            Some(r.decode),
        ),
        Err(_) => (Vec::new(), None),
    };
    let lines = std::mem::take(&mut *lines.lock().unwrap());
    (lines, ftf, stats)
}

/// Raw PT `data` decoded into FTF in memory, as `ptdec raw` runs it.
fn run_raw(data: &[u8], o: DecodeOptions, emit: EmitOptions) -> Result<Report, RunError> {
    let input = raw_input(data);
    let symbols = SymbolCache::new();
    let cfg = RawConfig::default();
    let input = Input::Raw {
        input: &input,
        cfg: &cfg,
        symbols: &symbols,
    };
    let out = Ftf {
        emit,
        target: Target::Memory,
    };
    pipeline::run(&Plan::new(input, o, Default::default(), out), None)
}

/// Whether the fast decoder gave any part of raw PT `data` to libipt (its
/// statistics; the time axis chosen as `ptdec raw` chooses it, so that a
/// trace without timing packets is decoded rather than refused).
fn fast_gave_up(data: &[u8]) -> bool {
    let mut o = decode_options();
    o.decoder = DecoderKind::Fast;
    o.on_error = NEXT_PSB;
    let emit = EmitOptions {
        axis_auto: true,
        ..EmitOptions::default()
    };
    run_raw(data, o, emit).is_ok_and(|r| !r.decode.fallbacks.is_empty())
}

/// Whether MODE.Exec packets in `trace` give more than one mode. Code
/// run in two modes is where the decoders differ on purpose: libipt's
/// block cache lists it in the mode it was first cached in, depending on
/// what the worker decoded before (docs/decoding.md); `flow_lockstep`
/// compares such traces up to where libipt's cache goes stale.
fn two_modes(trace: &[u8]) -> bool {
    let Ok(mut p) = ipt::PacketDecoder::new(&ipt::Config::default(), trace) else {
        return false;
    };
    let mut seen = None;
    while p.sync_forward().is_ok() {
        while let Ok(packet) = p.next_packet() {
            if let ipt::Packet::ModeExec { csl, csd } = packet {
                if seen.is_some_and(|s| s != (csl, csd)) {
                    return true;
                }
                seen = Some((csl, csd));
            }
        }
    }
    false
}

/// Raw PT decoded by libipt's block decoder and by ptdec's own flow
/// decoder (`--decoder fast`, which hands what it does not follow to
/// libipt): the same instructions, errors and error offsets, and the same
/// FTF, or a panic; then both again without a listing (where the fast
/// decoder follows blocks in its own loop): the same FTF and decode
/// statistics; where the fast decoder gave parts of the trace to libipt,
/// as [`fast_alone`]. Returns the instructions decoded.
pub fn flow_diff(data: &[u8]) -> u64 {
    if two_modes(data) {
        return 0;
    }
    if ptdec::decode::holds_newer_packet(data) {
        return fast_alone(data);
    }
    // Where the fast decoder gave PSB intervals to libipt, it decoded the
    // rest in parts cut at the PSBs (`decode::parts`), and libipt's one
    // decode of the whole is no reference: on fuzzed bytes a part that
    // starts at a PSB does not always decode as one decoder running
    // through that PSB does (nor does a chunk: `--chunk-size` in
    // docs/decoding.md). (Before, libipt decoded the whole chunk then: the
    // comparison was libipt's with itself.) Compared with itself instead.
    if fast_gave_up(data) {
        return fast_alone(data);
    }
    // The fast decoder without a listing first: where it decoded more
    // than `LISTED_STALL` instructions without reading a byte (a stall up
    // to the no-progress bound), the listings would hold that many lines
    // each, which took most of a 40 s run under the fuzzer's
    // instrumentation for one input: such an input is compared without
    // them (`flow_lockstep` compares every step of the same inputs).
    let (_, fast_ftf, fast_stats) = raw_pt_with(data, DecoderKind::Fast, false, NEXT_PSB);
    if fast_stats
        .as_ref()
        .is_some_and(|s| s.max_stall > LISTED_STALL)
    {
        return unlisted(data, fast_ftf, fast_stats);
    }
    let (lib_list, lib_ftf, lib_stats) = raw_pt_with(data, DecoderKind::Libipt, true, NEXT_PSB);
    let (fast_list, fast_listed_ftf, fast_listed_stats) =
        raw_pt_with(data, DecoderKind::Fast, true, NEXT_PSB);
    // Where the fast decoder went where libipt is known to decode wrong,
    // the outputs differ by design (`flow_lockstep` compares the two up
    // to that step).
    // So is code in no execution mode, an error of the fast decoder's
    // own, listed as such also where nothing else was decoded (and no
    // output or statistics were written).
    // (Looked for only where the decode wrote nothing: the listing may
    // hold a million lines, and this runs under the fuzzer's
    // instrumentation.)
    let no_mode = ipt::Error::NO_MODE.description();
    if differs_by_design(&fast_listed_stats)
        || (fast_listed_stats.is_none() && fast_list.iter().any(|l| l.contains(no_mode)))
    {
        let _ = raw_pt_with(data, DecoderKind::Fast, false, OnError::Resync);
        return fast_listed_stats.map_or(0, |s| s.insns);
    }
    if lib_list != fast_list {
        let at = lib_list
            .iter()
            .zip(&fast_list)
            .position(|(a, b)| a != b)
            .unwrap_or(lib_list.len().min(fast_list.len()));
        panic!(
            "the flow decoders differ at listing line {at}: libipt {:?}, fast {:?}",
            &lib_list[at.min(lib_list.len())..(at + 3).min(lib_list.len())],
            &fast_list[at.min(fast_list.len())..(at + 3).min(fast_list.len())]
        );
    }
    let decoded = insns(&lib_stats);
    assert_eq!(decoded, insns(&fast_listed_stats), "instructions decoded");
    assert!(lib_ftf == fast_listed_ftf, "the FTF differs");
    unlisted(data, fast_ftf, fast_stats);
    decoded
}

/// Instructions decoded, by the statistics.
fn insns(s: &Option<DecodeStats>) -> u64 {
    s.as_ref().map_or(0, |s| s.insns)
}

/// Whether the fast decoder went where libipt is known to decode wrong
/// (its statistics say).
fn differs_by_design(s: &Option<DecodeStats>) -> bool {
    s.as_ref().is_some_and(|s| !s.libipt_differs.is_empty())
}

/// Instructions decoded without reading a byte past which `flow_diff`
/// compares no listings (see there).
const LISTED_STALL: u64 = 1 << 16;

/// `flow_diff` without listings: libipt's FTF and statistics without a
/// listing against the fast decoder's (`fast_ftf`, `fast_stats`), then
/// the fast decoder's resync at the error. The instructions decoded.
fn unlisted(data: &[u8], fast_ftf: Vec<Vec<u8>>, fast_stats: Option<DecodeStats>) -> u64 {
    if !differs_by_design(&fast_stats) {
        let (_, lib_ftf, lib_stats) = raw_pt_with(data, DecoderKind::Libipt, false, NEXT_PSB);
        assert!(lib_ftf == fast_ftf, "the FTF differs without a listing");
        // Block counts differ (libipt's block cache); the fast decoder's
        // own counters are its only.
        let strip = |s: Option<DecodeStats>| {
            s.map(|s| DecodeStats {
                blocks: 0,
                fast_chunks: 0,
                fallbacks: Default::default(),
                max_ops_held: 0,
                ..s
            })
        };
        assert_eq!(
            strip(lib_stats),
            strip(fast_stats.clone()),
            "decode statistics without a listing"
        );
    }
    // The fast decoder's resync at the error, which libipt 2.1.2 has not
    // (nothing to compare with): it must not panic nor run unbounded.
    let _ = raw_pt_with(data, DecoderKind::Fast, false, OnError::Resync);
    insns(&fast_stats)
}

/// `flow_diff` for raw PT with a packet libipt 2.1.2 does not know
/// (libipt 2.2's TRIG), which only ptdec's own flow decoder decodes, or
/// that it decodes in parts (see `flow_diff`):
/// nothing to compare it with but itself, so the same FTF and
/// instructions with a listing (block by block) as without (where it
/// follows blocks in its own loop), and its resync must not panic nor run
/// unbounded.
fn fast_alone(data: &[u8]) -> u64 {
    let (_, listed_ftf, listed_stats) = raw_pt_with(data, DecoderKind::Fast, true, NEXT_PSB);
    let (_, ftf, stats) = raw_pt_with(data, DecoderKind::Fast, false, NEXT_PSB);
    let insns = |s: &Option<DecodeStats>| s.as_ref().map_or(0, |s| s.insns);
    assert_eq!(insns(&listed_stats), insns(&stats), "instructions decoded");
    assert!(listed_ftf == ftf, "the FTF differs without a listing");
    let _ = raw_pt_with(data, DecoderKind::Fast, false, OnError::Resync);
    insns(&stats)
}

/// What `flow_diff` compares the decoders with: libipt 2.1.2 skips to the
/// next PSB after an error, where the fast decoder would resync.
const NEXT_PSB: OnError = OnError::NextPsb;

/// The flow decoders side by side on raw PT (`ptdec::flow_diff`): the
/// same instructions, events, times, errors and error offsets up to where
/// ptdec's own gives up, or a panic. The first byte picks the CPU whose
/// errata both apply (none, Skylake 6/78, Goldmont 6/92, Broadwell 6/61),
/// the rest is the trace. Returns the log lines that agreed.
pub fn flow_lockstep(data: &[u8]) -> u64 {
    let Some((&pick, trace)) = data.split_first() else {
        return 0;
    };
    let mut cfg = ipt::Config::default();
    cfg.set_block_flags(true, true);
    let cpu = match pick % 4 {
        1 => Some((6, 78)),
        2 => Some((6, 92)),
        3 => Some((6, 61)),
        _ => None,
    };
    if let Some((family, model)) = cpu {
        let _ = cfg.set_cpu(ipt::Cpu {
            family,
            model,
            stepping: 0,
        });
    }
    let image = image_file();
    let len = CODE.len() as u64;
    match ptdec::flow_diff::compare(&cfg, trace, &[(image, 0, len, testkit::BASE)]) {
        Ok(o) => o.lines as u64,
        Err(e) => panic!("the flow decoders differ: {e}"),
    }
}

/// `ptdec DIR` on a trace dir as ptrec writes it (AUXTRACE_INFO, TIME_CONV,
/// COMM, MMAP2 of the image, ITRACE_START) whose one AUX buffer is `data`.
/// Returns the instructions decoded (0 when decoding failed).
pub fn trace_dir(data: &[u8]) -> u64 {
    let dir = scratch().join("trace");
    std::fs::create_dir_all(&dir).expect("create the fuzz trace dir");
    let cfg = ptsim::pt::Config::default();
    let program = Program::new(CODE.to_vec(), testkit::BASE);
    testkit::write_trace(&dir, &cfg, &program, &Aux::whole(data), &Setup::task(1, 1));
    let Ok(trace) = Trace::open(&dir) else {
        return 0;
    };
    let images = ImageStore::new(SearchPath::for_trace(&dir));
    images.add_known_build_ids(trace.build_ids.iter().cloned());
    let symbols = SymbolCache::for_search(images.search());
    trace_insns(&trace, &images, &symbols)
}

/// A trace dir (as [`trace_dir`] writes it, the AUX data being `data`
/// after its first 4 bytes, or [`seed`]'s when fewer than 16 follow) whose
/// perf.data is cut where those 4 bytes say (modulo its length + 1), as a
/// full disk or a killed copy leaves it, then decoded: whatever the cut,
/// the reader may refuse the file or decode what is there, never panic or
/// grow without bound. Returns the instructions decoded.
pub fn perf_data_cut(data: &[u8]) -> u64 {
    let Some((cut, aux)) = data.split_first_chunk::<4>() else {
        return 0;
    };
    let aux = if aux.len() < 16 { seed_trace() } else { aux };
    let dir = scratch().join("cut");
    std::fs::create_dir_all(&dir).expect("create the fuzz trace dir");
    let cfg = ptsim::pt::Config::default();
    let program = Program::new(CODE.to_vec(), testkit::BASE);
    testkit::write_trace(&dir, &cfg, &program, &Aux::whole(aux), &Setup::task(1, 1));
    decode_cut(&dir, u32::from_le_bytes(*cut) as usize)
}

/// Cuts `dir`'s perf.data at `at` (modulo its length + 1) and decodes it.
pub fn decode_cut(dir: &std::path::Path, at: usize) -> u64 {
    let path = dir.join("data");
    let bytes = std::fs::read(&path).expect("the trace just written");
    let at = at % (bytes.len() + 1);
    std::fs::write(&path, &bytes[..at]).expect("cut the trace");
    let Ok(trace) = Trace::open(dir) else {
        return 0;
    };
    let images = ImageStore::new(SearchPath::for_trace(dir));
    images.add_known_build_ids(trace.build_ids.iter().cloned());
    let symbols = SymbolCache::for_search(images.search());
    trace_insns(&trace, &images, &symbols)
}

/// The bytes of a PSB (`02 82` eight times).
const PSB: [u8; 16] = [
    0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
];

/// [`seed`], computed once.
fn seed_trace() -> &'static [u8] {
    static SEED: OnceLock<Vec<u8>> = OnceLock::new();
    SEED.get_or_init(seed)
}

/// Drops the ops a decode hands over (its stats count them).
struct Count;

impl OpSink for Count {
    fn op(&mut self, _pid: u32, _tid: u32, _op: Op) {}
}

/// Writes a trace dir (as [`trace_dir`] does) named `name` in the scratch
/// dir whose AUX data is `aux`, and decodes it with each chunk size.
fn decode_dir_chunked(name: &str, aux: &[u8], chunks: &[u64]) -> Vec<DecodeStats> {
    let dir = scratch().join(name);
    std::fs::create_dir_all(&dir).expect("create the fuzz trace dir");
    let cfg = ptsim::pt::Config::default();
    let program = Program::new(CODE.to_vec(), testkit::BASE);
    testkit::write_trace(&dir, &cfg, &program, &Aux::whole(aux), &Setup::task(1, 1));
    let trace = Trace::open(&dir).expect("the harness writes a readable trace dir");
    let images = ImageStore::new(SearchPath::for_trace(&dir));
    chunks
        .iter()
        .map(|&c| {
            let opts = DecodeOptions {
                jobs: 1,
                chunking: ptdec::decode::Chunking::Bytes(c),
                ..DecodeOptions::default()
            };
            decode(&trace, &images, &opts, &mut Count).expect("decoding sets up")
        })
        .collect()
}

/// Instructions of [`seed`] decoded alone, computed once.
fn seed_insns() -> u64 {
    static INSNS: OnceLock<u64> = OnceLock::new();
    *INSNS.get_or_init(|| decode_dir_chunked("seed", seed_trace(), &[u64::MAX])[0].insns)
}

/// The parameters [`garbage_prefix`] reads from its input's first 4 bytes:
/// the chunk size (1 to 8 KiB) and every how many bytes a PSB is planted
/// in the garbage (`None`: never; 16 to 1039).
pub fn garbage_prefix_params(p: [u8; 4]) -> (u64, Option<usize>) {
    let chunk = 1 + u64::from(u16::from_le_bytes([p[0], p[1]])) % 8192;
    let every = match u16::from_le_bytes([p[2], p[3]]) % 1025 {
        0 => None,
        n => Some(usize::from(n) + 15),
    };
    (chunk, every)
}

/// `ptdec DIR --chunk-size N` on a trace dir whose AUX data is garbage
/// followed by valid Intel PT ([`seed`]): a buffer whose start was
/// overwritten. The input's first 4 bytes choose the chunk size and how
/// often a PSB is planted in the garbage ([`garbage_prefix_params`]), the
/// rest is the garbage. Besides no panic and bounded memory, checked:
/// - the instructions decoded are the same in chunks of that size as in
///   one chunk (`--chunk-size` changes nothing);
/// - when the garbage holds no PSB a decoder could synchronize at (the
///   first sync is at the seed's PSB), the seed decodes in full, and the
///   bytes before it are counted as not synced.
///
/// Returns the instructions decoded in chunks.
pub fn garbage_prefix(data: &[u8]) -> u64 {
    let Some((params, garbage)) = data.split_first_chunk::<4>() else {
        return 0;
    };
    let (chunk, every) = garbage_prefix_params(*params);
    let mut aux = garbage.to_vec();
    if let Some(step) = every {
        for at in (0..aux.len().saturating_sub(PSB.len())).step_by(step) {
            aux[at..at + PSB.len()].copy_from_slice(&PSB);
        }
    }
    let prefix = aux.len() as u64;
    aux.extend_from_slice(seed_trace());
    let want = seed_insns();
    let st = decode_dir_chunked("garbage", &aux, &[u64::MAX, chunk]);
    let (one, chunked) = (&st[0], &st[1]);
    assert_eq!(
        chunked.insns, one.insns,
        "chunks of {chunk} bytes decode other instructions than one chunk \
         ({prefix} bytes of garbage, PSB every {every:?})\none: {one:?}\nchunked: {chunked:?}"
    );
    if one.unsynced_bytes == prefix {
        assert_eq!(
            one.insns, want,
            "the seed after {prefix} bytes of garbage without a usable PSB is not decoded in full: {one:?}"
        );
    }
    chunked.insns
}

/// The seed of [`garbage_prefix`] (`fuzz/seeds/garbage_prefix/`): 4 KiB
/// chunks, a PSB every KiB of 3000 random bytes.
pub fn garbage_prefix_seed() -> Vec<u8> {
    let mut v = vec![0xff, 0x0f, 0xf1, 0x03];
    debug_assert_eq!(
        garbage_prefix_params([v[0], v[1], v[2], v[3]]),
        (4096, Some(1024))
    );
    let mut x = 0x5eed_u64;
    v.extend((0..3000).map(|_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 24) as u8
    }));
    v
}

/// Any bytes as a perf.data: parse, the features ptdec reads, every record,
/// and a replay of the sideband into a timeline. Returns the records
/// replayed (0 when the file did not parse).
pub fn perf_data(data: &[u8]) -> u64 {
    let Ok(file) = sideband::file::PerfFile::parse(data) else {
        return 0;
    };
    let features = file.features();
    let _ = features.cpuid();
    let _ = features.build_ids();
    let _ = features.auxtrace_index();
    let events: Vec<_> = file
        .events()
        .filter_map(Result::ok)
        .map(|(_, e)| e)
        .collect();
    let n = events.len() as u64;
    let _ = sideband::timeline::Timeline::replay(events);
    n
}

/// An LLDB trace bundle (`trace save`'s folder) whose `trace.json` is
/// `data` up to its first zero byte, and whose one trace file `t.trace`
/// (also the `contextSwitchTrace` of any core) is what follows (the seed
/// trace when fewer than 16 bytes follow), with the fixed image as the
/// module file `m`; decoded as `ptdec BUNDLE` does. Names outside the
/// folder are the fuzzer's to pick: ptdec reads regular files wherever they
/// are (as LLDB does) and refuses devices and FIFOs. Returns the
/// instructions decoded.
pub fn lldb_bundle(data: &[u8]) -> u64 {
    let (json, trace) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let trace = if trace.len() < 16 {
        seed_trace()
    } else {
        trace
    };
    let dir = scratch().join("bundle");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the fuzz bundle dir");
    let write = |name: &str, bytes: &[u8]| {
        std::fs::write(dir.join(name), bytes).expect("write the fuzz bundle");
    };
    write(ptdec::input::lldb::DESCRIPTION, json);
    write("t.trace", trace);
    write("m", CODE);
    let Ok(trace) = Trace::open(&dir) else {
        return 0;
    };
    let images = ImageStore::new(SearchPath::for_trace(&dir));
    images.add_known_build_ids(trace.build_ids.iter().cloned());
    let symbols = SymbolCache::for_search(images.search());
    let _ = ptdec::summary::info(&trace, &images);
    trace_insns(&trace, &images, &symbols)
}

/// The seed of `lldb_bundle`: a per-thread bundle of the seed trace over
/// the fixed image, as LLDB writes one.
pub fn lldb_bundle_seed() -> Vec<u8> {
    let json = format!(
        r#"{{
  "type": "intel-pt",
  "cpuInfo": {{"vendor": "GenuineIntel", "family": 6, "model": 85, "stepping": 4}},
  "tscPerfZeroConversion": {{"timeMult": 1, "timeShift": 0, "timeZero": 0}},
  "processes": [
    {{
      "pid": 1,
      "triple": "x86_64-*-linux",
      "threads": [{{"tid": 1, "iptTrace": "t.trace"}}],
      "modules": [
        {{"file": "m", "systemPath": "/m", "loadAddress": "{:#x}"}}
      ]
    }}
  ]
}}"#,
        testkit::BASE
    );
    [json.as_bytes(), &[0], seed_trace()].concat()
}
