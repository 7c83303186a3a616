//! The fuzz harnesses of the perf.data reader and the decode path: what
//! ptdec does with a perf.data, with `ptdec raw` and `ptdec DIR` bytes
//! nobody checked. Shared by the fuzz targets (`fuzz/fuzz_targets/`,
//! nightly, libFuzzer) and the stable test that replays the inputs they
//! found (`decoder/tests/fuzz_regressions.rs`), so a regression input runs
//! through exactly the code that failed. Errors are fine; a panic, an abort
//! or unbounded memory is a bug.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ptdec::decode::{DecodeOptions, RawConfig, RawSection};
use ptdec::emit::{EmitOptions, Target};
use ptdec::images::{ImageStore, SearchPath};
use ptdec::input::Trace;
use ptdec::pipeline::{self, RunOptions};
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

fn run_options() -> RunOptions<'static> {
    RunOptions {
        decode: DecodeOptions {
            jobs: 1,
            ..DecodeOptions::default()
        },
        emit: EmitOptions::default(),
        target: Target::Memory,
        on_op: None,
    }
}

/// `ptdec raw --pt DATA --raw image.bin:BASE`: `data` is the raw PT.
/// Returns the instructions decoded (0 when decoding failed).
pub fn raw_pt(data: &[u8]) -> u64 {
    let image = image_file();
    let len = CODE.len() as u64;
    let input = RawInput {
        pt_path: "fuzz.pt".into(),
        pt: data.to_vec(),
        sections: vec![RawSection {
            path: image.to_path_buf(),
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
    };
    let symbols = SymbolCache::new();
    pipeline::run_raw(&input, &RawConfig::default(), &symbols, run_options())
        .map_or(0, |r| r.decode.insns)
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
    pipeline::run(&trace, &images, &symbols, run_options()).map_or(0, |r| r.decode.insns)
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
