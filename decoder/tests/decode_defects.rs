//! The decode loop on hand-encoded raw PT (libipt's encoder) over tiny
//! images: each test pins one defect of the loop as it was on libipt-rs
//! (instructions before an error dropped, duplicate untraced slices, an
//! overflow before the first enable lost, no bound on code that needs no
//! packets) and the `--time-axis instructions` warning. Then trace dirs
//! whose AUX data is damaged (ptsim's generator, `ptsim::testkit`): a
//! garbage prefix full of PSBs, a broken PSB+ that runs into the next PSB,
//! AUX data that is not Intel PT at all, and thread filters that match no
//! thread.

use std::path::Path;
use std::process::Command;

use iced_x86::code_asm::{ecx, ptr, rbx, CodeAssembler};
use iced_x86::BlockEncoderOptions;
use ipt::{Compression, Encoder, Packet};
use ptdec::decode::{
    decode, decode_raw, Chunking, DecodeOptions, DecodeStats, DecoderKind, OnError, RawConfig,
    RawSection, NO_PROGRESS_INSNS,
};
use ptdec::images::{ImageStore, SearchPath};
use ptdec::input::Trace;
use ptdec::model::ops::{GapKind, Op, OpSink};
use ptsim::testkit::{self, Aux, Program, Setup, Thread, BASE};

const CODE: u64 = 0x1000;

#[derive(Default)]
struct Collect(Vec<Op>);

impl OpSink for Collect {
    fn op(&mut self, _pid: u32, _tid: u32, op: Op) {
        self.0.push(op);
    }
}

fn encode(pkts: &[Packet]) -> Vec<u8> {
    let mut enc = Encoder::new().unwrap();
    let mut out = Vec::new();
    for &p in pkts {
        out.extend_from_slice(enc.encode(p).unwrap());
    }
    out
}

const PSB_ENABLED: [Packet; 4] = [
    Packet::Psb,
    Packet::ModeExec {
        csl: true,
        csd: false,
    },
    Packet::Fup(CODE, Compression::Sext48),
    Packet::Psbend,
];

/// [`run`] with the flow decoder `decoder` in chunks of `chunk` bytes.
fn run_chunked(pt: &[u8], code: &[u8], decoder: DecoderKind, chunk: u64) -> (Vec<Op>, DecodeStats) {
    run_opts(
        pt,
        code,
        DecodeOptions {
            decoder,
            chunking: Chunking::Bytes(chunk),
            ..DecodeOptions::default()
        },
    )
}

/// A PSB+ with tracing on at `ip` ([`PSB_ENABLED`] at another IP).
fn psb_at(ip: u64) -> [Packet; 4] {
    let mut p = PSB_ENABLED;
    p[2] = Packet::Fup(ip, Compression::Sext48);
    p
}

/// Decodes `pt` against `code` loaded at CODE.
fn run(pt: &[u8], code: &[u8]) -> (Vec<Op>, DecodeStats) {
    run_with(pt, code, DecoderKind::default())
}

/// [`run`] with the flow decoder `decoder`.
fn run_with(pt: &[u8], code: &[u8], decoder: DecoderKind) -> (Vec<Op>, DecodeStats) {
    run_opts(
        pt,
        code,
        DecodeOptions {
            decoder,
            ..DecodeOptions::default()
        },
    )
}

/// [`run`] with the options `opts`.
fn run_opts(pt: &[u8], code: &[u8], opts: DecodeOptions) -> (Vec<Op>, DecodeStats) {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("code.bin");
    std::fs::write(&bin, code).unwrap();
    let sections = [RawSection {
        path: bin,
        offset: 0,
        size: code.len() as u64,
        vaddr: CODE,
    }];
    let mut c = Collect::default();
    let st = decode_raw(pt, &sections, &RawConfig::default(), &opts, &mut c, None).unwrap();
    (c.0, st)
}

/// `jmp $` needs no packets: libipt follows it forever. The bound turns
/// it into a decode error gap, and the stall's ops are left out: a
/// million jumps made up to the bound. So with either flow decoder:
/// ptdec's own follows such blocks in its own loop
/// (`FlowDecoder::follow`) while a TNT has bits left, the second case.
#[test]
fn direct_jump_loop_is_a_no_progress_gap_with_bounded_ops() {
    for decoder in [DecoderKind::Libipt, DecoderKind::Fast] {
        for bits in [1, 2] {
            direct_jump_loop(decoder, bits);
        }
    }
}

/// A function that calls itself (`call $`), entered at each of several
/// PSBs: each stall reaches the bound, and none of its million calls is
/// kept (a few hundred bytes of such PT held gigabytes of calls and open
/// frames, found by a hostile probe).
#[test]
fn a_call_loop_at_every_psb_keeps_no_made_up_calls() {
    for decoder in [DecoderKind::Libipt, DecoderKind::Fast] {
        // As the probe had it: PSB+ with tracing off, enabled at the
        // function, then a disable whose IP is not given, which the
        // decoder walks on looking for.
        let mut pkts = Vec::new();
        for _ in 0..3 {
            pkts.extend_from_slice(&[
                Packet::Psb,
                Packet::ModeExec {
                    csl: true,
                    csd: false,
                },
                Packet::Psbend,
                Packet::TipPge(CODE, Compression::Sext48),
                Packet::TipPgd(0, Compression::Suppressed),
            ]);
        }
        let pt = encode(&pkts);
        let (ops, st) = run_with(&pt, &[0xe8, 0xfb, 0xff, 0xff, 0xff], decoder);
        assert_eq!(
            st.errors.get("NoProgress"),
            Some(&3),
            "{decoder:?}: {:?}",
            st.errors
        );
        // The stall counts from the first block after the enable's
        // packet: all its calls are left out.
        let calls = ops.iter().filter(|o| matches!(o, Op::Call { .. })).count();
        assert_eq!(calls, 0, "{decoder:?}");
        assert!(ops.len() < 32, "{decoder:?}: {} ops", ops.len());
        assert!(
            st.no_progress_ops >= 3 * (NO_PROGRESS_INSNS - 1),
            "{decoder:?}: {st:?}"
        );
        assert!(
            st.insns > 3 * NO_PROGRESS_INSNS,
            "{decoder:?}: instructions stay counted"
        );
    }
}

fn direct_jump_loop(decoder: DecoderKind, bits: u8) {
    let mut pkts = PSB_ENABLED.to_vec();
    // TNT bits that no instruction ever asks for: not the end of trace.
    pkts.push(Packet::Tnt8 { payload: 1, bits });
    let pt = encode(&pkts);
    let (ops, st) = run_with(&pt, &[0xeb, 0xfe], decoder);
    let st = &st;
    // The chunk is the fast decoder's own: libipt did not stand in.
    let fast = u64::from(decoder == DecoderKind::Fast);
    assert_eq!(
        (st.fast_chunks, st.fallbacks.len()),
        (fast, 0),
        "{decoder:?}"
    );
    assert!(st.max_stall > NO_PROGRESS_INSNS, "{st:?}");
    assert_eq!(st.errors.get("NoProgress"), Some(&1), "{:?}", st.errors);
    assert!(
        ops.iter().any(|o| matches!(o, Op::Gap { kind: GapKind::DecodeError(m), .. } if m.contains("no progress"))),
        "no no-progress gap"
    );
    assert!(ops.len() < 16, "{} ops", ops.len());
    assert!(st.no_progress_ops >= NO_PROGRESS_INSNS / 2, "{st:?}");
}

/// PIP (paging) packets, hand-encoded: `02 43` and CR3[47:5] shifted
/// left by one.
fn pip(cr3: u64) -> Vec<u8> {
    let mut b = vec![0x02, 0x43];
    b.extend_from_slice(&((cr3 >> 5) << 1).to_le_bytes()[..6]);
    b
}

/// libipt's `pip-pip_mov_cr3-fail`: two paging events, one `mov cr3`;
/// while looking for a second `mov cr3` to bind the second event to,
/// libipt runs out of code. `pt_blk_next` returns the block holding `mov
/// cr3` and `hlt` *with* the error: both instructions count (ptxed: 2).
#[test]
fn instructions_before_an_error_are_kept() {
    let mut pt = encode(&PSB_ENABLED);
    pt.extend(pip(0xa000));
    pt.extend(pip(0xb000));
    // mov cr3, rax; hlt
    let (ops, st) = run(&pt, &[0x0f, 0x22, 0xd8, 0xf4]);
    assert_eq!(st.insns, 2, "{st:?}");
    assert_eq!(st.errors.get("Nomap"), Some(&1), "{st:?}");
    assert!(
        ops.iter().any(|o| matches!(
            o,
            Op::Gap {
                kind: GapKind::NoImage { .. },
                ..
            }
        )),
        "{ops:#?}"
    );
}

/// TIP.PGD, two PSB+ without FUP (status updates: tracing is off), a
/// TIP.PGE: one disable/enable pair, so one Disabled op.
#[test]
fn one_untraced_stretch_per_disable_enable_pair() {
    let mut pkts = PSB_ENABLED.to_vec();
    pkts.extend([
        Packet::TipPgd(0, Compression::Suppressed),
        Packet::Psb,
        Packet::Psbend,
        Packet::Psb,
        Packet::Psbend,
        Packet::TipPge(CODE, Compression::Sext48),
        Packet::TipPgd(0, Compression::Suppressed),
    ]);
    let pt = encode(&pkts);
    // nop; jmp rax (an indirect jump: the TIP.PGD ends it).
    let (ops, _st) = run(&pt, &[0x90, 0xff, 0xe0]);
    let disabled = ops
        .iter()
        .filter(|o| matches!(o, Op::Disabled { .. }))
        .count();
    let enabled = ops
        .iter()
        .filter(|o| matches!(o, Op::Enabled { .. }))
        .count();
    assert_eq!((enabled, disabled), (2, 2), "{ops:#?}");
}

/// An overflow before tracing was first enabled is written as a gap.
#[test]
fn overflow_before_first_enable_is_a_gap() {
    let pkts = [
        Packet::Psb,
        Packet::Psbend,
        Packet::Ovf,
        Packet::TipPge(CODE, Compression::Sext48),
        Packet::TipPgd(0, Compression::Suppressed),
    ];
    let pt = encode(&pkts);
    let (ops, st) = run(&pt, &[0x90, 0xff, 0xe0]);
    assert_eq!(st.overflows, 1);
    assert!(
        ops.iter().any(|o| matches!(
            o,
            Op::Gap {
                kind: GapKind::Overflow,
                ..
            }
        )),
        "{ops:#?}"
    );
}

/// A PSB+ that runs into the next PSB (which libipt refuses inside a
/// PSB+): reading it consumed that PSB, and libipt's sync_forward would
/// search on from after it, skipping it. The decoder synchronizes there
/// and decodes what follows as it would without the broken PSB+ before.
#[test]
fn a_psb_right_after_an_unreadable_psb_plus_is_synchronized_at() {
    let mut rest = PSB_ENABLED.to_vec();
    rest.push(Packet::TipPgd(0, Compression::Suppressed));
    let code = [0x90, 0xff, 0xe0];
    let (want, alone) = run(&encode(&rest), &code);
    assert_eq!(alone.insns, 2, "{alone:?}");
    let broken = encode(&[Packet::Psb, Packet::Tsc(1)]);
    let mut pt = broken.clone();
    pt.extend(encode(&rest));
    let (ops, st) = run(&pt, &code);
    assert_eq!(st.insns, alone.insns, "{st:?}");
    assert_eq!(ops, want);
    assert_eq!(
        (st.bad_psbs, st.unsynced_bytes),
        (1, broken.len() as u64),
        "{st:?}"
    );
}

fn ptdec_raw(dir: &Path, pt: &[u8], code: &[u8], extra: &[&str]) -> std::process::Output {
    std::fs::write(dir.join("t.pt"), pt).unwrap();
    std::fs::write(dir.join("code.bin"), code).unwrap();
    Command::new(env!("CARGO_BIN_EXE_ptdec"))
        .current_dir(dir)
        .args([
            "raw",
            "--pt",
            "t.pt",
            "--raw",
            "code.bin:0x1000",
            "-o",
            "out.ftf",
        ])
        .args(extra)
        .output()
        .unwrap()
}

/// Without timing packets, the instructions axis needs no warning; the
/// ns axis gets one.
#[test]
fn no_timing_warning_on_the_instructions_axis() {
    let mut pkts = PSB_ENABLED.to_vec();
    pkts.push(Packet::TipPgd(0, Compression::Suppressed));
    let pt = encode(&pkts);
    let dir = tempfile::tempdir().unwrap();
    let code = [0x90, 0xff, 0xe0];
    let out = ptdec_raw(dir.path(), &pt, &code, &["--time-axis", "instructions"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("no timing packets"), "{err}");
    let out = ptdec_raw(dir.path(), &pt, &code, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no timing packets"), "{err}");
}

/// A CPU libipt knows no errata for is refused (ptxed: "unknown cpu").
#[test]
fn unknown_cpu_is_refused() {
    let pt = encode(&PSB_ENABLED);
    let dir = tempfile::tempdir().unwrap();
    let out = ptdec_raw(dir.path(), &pt, &[0x90], &["--cpu", "0/0"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("knows no CPU 0/0/0") && err.contains("--cpu none"),
        "{err}"
    );
}

const PID: u32 = 4242;
const TID: u32 = 4243;

/// A loop of `n` indirect calls (a TIP each) and conditional branches,
/// as ptsim's generator encodes it with a PSB every 2 KiB: the AUX data,
/// the program, and the offsets of its PSBs.
fn loop_trace(n: i32) -> (Vec<u8>, Program, Vec<u64>) {
    let mut a = CodeAssembler::new(64).unwrap();
    let mut top = a.create_label();
    let mut f = a.create_label();
    let mut even = a.create_label();
    a.mov(ecx, n).unwrap();
    a.lea(rbx, ptr(f)).unwrap();
    a.set_label(&mut top).unwrap();
    a.call(rbx).unwrap();
    a.dec(ecx).unwrap();
    a.jne(top).unwrap();
    a.syscall().unwrap(); // exit
    a.hlt().unwrap();
    a.set_label(&mut f).unwrap();
    a.test(ecx, 1).unwrap();
    a.je(even).unwrap();
    a.nop().unwrap();
    a.set_label(&mut even).unwrap();
    a.ret().unwrap();
    let res = a.assemble_options(BASE, BlockEncoderOptions::NONE).unwrap();
    let program = Program::new(res.inner.code_buffer, BASE);
    let thread = Thread {
        exit_syscall: 1,
        ..Thread::new(PID, TID)
    };
    let events = testkit::execute(&program, &thread);
    let cfg = ptsim::pt::Config {
        psb_period: 0,
        ..ptsim::pt::Config::default()
    };
    let out = ptsim::pt::Generator::run(cfg, &events).unwrap();
    (out.bytes, program, out.stats.psb_offsets)
}

/// Writes `aux` as the AUX data of a trace dir of `program` (perf.data as
/// ptrec writes it: the bytes are one AUXTRACE record's payload).
fn write_dir(dir: &Path, program: &Program, aux: &[u8]) {
    let cfg = ptsim::pt::Config {
        psb_period: 0,
        ..ptsim::pt::Config::default()
    };
    std::fs::create_dir_all(dir).unwrap();
    testkit::write_trace(dir, &cfg, program, &Aux::whole(aux), &Setup::task(PID, TID));
}

/// Bytes that are not Intel PT (xorshift), the same for a seed.
fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// PSB: `02 82` eight times.
const PSB: [u8; 16] = [
    0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
];

/// Random bytes with a PSB at the start of every KiB: a decoder finds a
/// PSB everywhere and can read none of their PSB+.
fn garbage_with_psbs(len: usize) -> Vec<u8> {
    let mut g = random_bytes(len, 0x5eed);
    for at in (0..len.saturating_sub(PSB.len())).step_by(1024) {
        g[at..at + PSB.len()].copy_from_slice(&PSB);
    }
    g
}

fn decode_dir(dir: &Path, chunk_bytes: u64) -> (Vec<Op>, DecodeStats) {
    let trace = Trace::open(dir).unwrap();
    let images = ImageStore::new(SearchPath {
        live_fs: false,
        buildid_dir: None,
        ..SearchPath::for_trace(dir)
    });
    let opts = DecodeOptions {
        chunking: ptdec::decode::Chunking::Bytes(chunk_bytes),
        jobs: 2,
        ..DecodeOptions::default()
    };
    let mut c = Collect::default();
    let st = decode(&trace, &images, &opts, &mut c).unwrap();
    (c.0, st)
}

fn ptdec_dir(dir: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ptdec"))
        .current_dir(dir)
        .args([".", "-o", "out.ftf"])
        .args(extra)
        .output()
        .unwrap()
}

/// A buffer whose first 70 KiB were overwritten with random bytes that
/// carry a PSB every KiB (more PSBs than libipt's sync was once tried at
/// per chunk), followed by the intact rest: the intact part decodes in
/// full, the same ops for any chunk size, as when those 70 KiB hold no
/// PSB at all (zeros); the summary says how many bytes were skipped and why.
#[test]
fn a_garbage_prefix_with_psbs_is_skipped_whatever_the_chunk_size() {
    let (aux, program, psbs) = loop_trace(100_000);
    const BAD: usize = 70 << 10;
    assert!(aux.len() > 2 * BAD, "{} bytes of PT", aux.len());
    // The first intact PSB: decoding must start there.
    let good = *psbs.iter().find(|&&p| p >= BAD as u64).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (garbled, zeroed) = (tmp.path().join("garbled"), tmp.path().join("zeroed"));
    let mut bytes = aux.clone();
    bytes[..BAD].copy_from_slice(&garbage_with_psbs(BAD));
    write_dir(&garbled, &program, &bytes);
    bytes[..BAD].fill(0);
    write_dir(&zeroed, &program, &bytes);

    let (want, ref_stats) = decode_dir(&zeroed, 16 << 20);
    assert!(ref_stats.insns > 100_000, "{ref_stats:?}");
    assert_eq!(
        (ref_stats.unsynced_bytes, ref_stats.bad_psbs),
        (good, 0),
        "{ref_stats:?}"
    );
    let mut errors = None;
    for chunk in [1, 4 << 10, 256 << 10, 16 << 20] {
        let (got, st) = decode_dir(&garbled, chunk);
        assert_eq!(
            st.insns, ref_stats.insns,
            "chunk size {chunk}: instructions: {st:?}"
        );
        assert!(
            got == want,
            "chunk size {chunk}: other ops than the intact part's"
        );
        // Every PSB of the garbage was tried, once, whatever the chunks.
        assert_eq!(
            (st.unsynced_bytes, st.bad_psbs, st.syncs),
            (good, (BAD / 1024) as u64, ref_stats.syncs),
            "chunk size {chunk}: {st:?}"
        );
        let e = errors.get_or_insert_with(|| st.errors.clone());
        assert_eq!(*e, st.errors, "chunk size {chunk}");
    }
    for chunk in ["1", "8M"] {
        let out = ptdec_dir(&garbled, &["--chunk-size", chunk]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let bytes = format!("{} bytes", ptdec::summary::thousands(good));
        assert!(
            err.contains(&bytes) && err.contains("PSB"),
            "--chunk-size {chunk}: the summary does not name the {bytes} skipped:\n{err}"
        );
    }
}

/// AUX data of random bytes (no PSB anywhere) decodes to nothing: ptdec
/// says no PSB was found in it, exits with 1 and writes no file; the same
/// for `ptdec raw`.
#[test]
fn aux_data_that_is_not_intel_pt_fails_and_writes_nothing() {
    let (_, program, _) = loop_trace(10);
    let tmp = tempfile::tempdir().unwrap();
    let junk = random_bytes(50_000, 7);
    write_dir(tmp.path(), &program, &junk);
    let out = ptdec_dir(tmp.path(), &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no PSB") && err.contains("50,000 bytes"),
        "{err}"
    );
    assert!(!tmp.path().join("out.ftf").exists());

    let raw = tempfile::tempdir().unwrap();
    let out = ptdec_raw(raw.path(), &junk, &[0x90], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no PSB"), "{err}");
    assert!(!raw.path().join("out.ftf").exists());
}

/// `--tid`/`--pid` that match no thread of the trace: ptdec says so, lists
/// the threads the trace has (pid/tid and name), exits with 1 and writes
/// no file. A filter that matches decodes as before.
#[test]
fn a_thread_filter_that_matches_nothing_fails_and_lists_the_threads() {
    let (aux, program, _) = loop_trace(100);
    let tmp = tempfile::tempdir().unwrap();
    write_dir(tmp.path(), &program, &aux);
    for filter in [["--tid", "1"], ["--pid", "1"], ["--tid", "4242"]] {
        let out = ptdec_dir(tmp.path(), &filter);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{filter:?}: {err}");
        assert!(
            err.contains(&filter.join(" ")) && err.contains("4242/4243 prog"),
            "{filter:?}: {err}"
        );
        assert!(!tmp.path().join("out.ftf").exists(), "{filter:?}");
    }
    let out = ptdec_dir(tmp.path(), &["--tid", "4243"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(tmp.path().join("out.ftf").exists());
}

/// A PSB+ whose FUP comes without its MODE.Exec: as the first, code in no
/// execution mode, which the fast decoder reports as an error of its own
/// (`NoMode`) and goes on from at the next MODE.Exec, where it used to
/// hand the chunk to libipt (whose block cache made the output depend on
/// what the worker decoded before); in the middle of the trace, the mode
/// goes on from before, and no chunk starts there, so the output is the
/// same at every chunk size.
#[test]
fn code_in_no_mode_is_an_error_and_no_chunk_starts_without_a_mode() {
    let psb = |mode: bool| {
        let mut p = vec![Packet::Psb];
        if mode {
            p.push(Packet::ModeExec {
                csl: true,
                csd: false,
            });
        }
        p.extend([Packet::Fup(CODE, Compression::Sext48), Packet::Psbend]);
        p
    };
    // `jnz $` then `jmp` back to it: a TNT bit per pass, taken or not.
    let code = [0x75, 0xfe, 0xeb, 0xfc];
    let tnts = |n: usize| {
        vec![
            Packet::Tnt8 {
                payload: 0b101,
                bits: 3
            };
            n
        ]
    };
    let mut pkts = Vec::new();
    for mode in [false, true, false, false, true, false] {
        pkts.extend(psb(mode));
        pkts.extend(tnts(40));
    }
    let pt = encode(&pkts);
    for on_error in [OnError::Resync, OnError::NextPsb] {
        let mut outputs = Vec::new();
        for chunk in [u64::MAX, 1, 64, 200] {
            let (ops, st) = run_opts(
                &pt,
                &code,
                DecodeOptions {
                    decoder: DecoderKind::Fast,
                    chunking: Chunking::Bytes(chunk),
                    on_error,
                    ..DecodeOptions::default()
                },
            );
            // Every chunk is the fast decoder's own; only the first PSB's
            // stretch is lost, with one error.
            assert!(
                st.fallbacks.is_empty(),
                "{on_error:?} chunk {chunk}: {:?}",
                st.fallbacks
            );
            assert_eq!(st.fast_chunks, st.chunks, "{on_error:?} chunk {chunk}");
            assert_eq!(
                st.errors.get("NoMode"),
                Some(&1),
                "{on_error:?} chunk {chunk}: {:?}",
                st.errors
            );
            assert_eq!(
                st.errors.len(),
                1,
                "{on_error:?} chunk {chunk}: {:?}",
                st.errors
            );
            assert!(
                st.libipt_differs
                    .keys()
                    .any(|k| k.contains("no execution mode")),
                "{on_error:?} chunk {chunk}: {:?}",
                st.libipt_differs
            );
            // Five PSBs' stretches of 120 passes, each 1-2 instructions.
            assert!(
                st.insns >= 5 * 120,
                "{on_error:?} chunk {chunk}: {}",
                st.insns
            );
            let gap = ops.iter().find_map(|o| match o {
                Op::Gap {
                    kind: GapKind::DecodeError(m),
                    ..
                } => Some(m.to_string()),
                _ => None,
            });
            assert!(
                gap.as_deref().is_some_and(|m| m.contains("MODE.Exec")),
                "{on_error:?} chunk {chunk}: {gap:?}"
            );
            outputs.push((format!("{ops:?}"), st.insns, st.chunks));
        }
        // Cut at the two PSBs with a mode, at most.
        assert!(
            outputs.iter().any(|o| o.2 == 3),
            "{:?}",
            outputs.iter().map(|o| o.2).collect::<Vec<_>>()
        );
        for o in &outputs[1..] {
            assert_eq!((&o.0, o.1), (&outputs[0].0, outputs[0].1), "{on_error:?}");
        }
    }
}

/// A compressed return after a PSB to a call made before it, which the
/// hardware never writes (it compresses only returns whose calls it saw
/// since the last PSB): `call f` at CODE, a PSB+ at `f`'s `ret`, then a
/// TNT bit taking the return. The fast decoder empties its return stack
/// at a PSB+ it decodes through, as a chunk starting at that PSB starts
/// with an empty one: "return with an empty return stack" in one chunk
/// and at one-byte chunks alike, and the summary counts the chunk where
/// libipt differs. libipt keeps its stack through the PSB and returns to
/// the call in one chunk, but not in a chunk cut at the PSB (docs/
/// decoding.md, "A compressed return past a PSB").
#[test]
fn a_compressed_return_past_a_psb_is_an_error_however_the_trace_is_cut() {
    // CODE: call CODE+7; CODE+5: jnz $ (needs a TNT bit); CODE+7: ret.
    let code = [0xe8, 0x02, 0x00, 0x00, 0x00, 0x75, 0xfe, 0xc3];
    let mut pkts = psb_at(CODE).to_vec();
    pkts.extend(psb_at(CODE + 7));
    pkts.push(Packet::Tnt8 {
        payload: 1,
        bits: 1,
    });
    let pt = encode(&pkts);
    let run = |decoder, chunk| run_chunked(&pt, &code, decoder, chunk);
    let empty = |st: &DecodeStats| st.errors.get("RetstackEmpty").copied();
    let (whole, st) = run(DecoderKind::Fast, u64::MAX);
    assert_eq!(st.chunks, 1);
    assert_eq!(empty(&st), Some(1), "{:?}", st.errors);
    assert!(
        st.libipt_differs.keys().any(|k| k.contains("before a PSB")),
        "{:?}",
        st.libipt_differs
    );
    let (cut, st) = run(DecoderKind::Fast, 1);
    assert_eq!(st.chunks, 2);
    assert_eq!(empty(&st), Some(1), "{:?}", st.errors);
    assert_eq!(format!("{whole:?}"), format!("{cut:?}"));
    // libipt: the return to CODE+5 in one chunk, the error in two.
    let (_, st) = run(DecoderKind::Libipt, u64::MAX);
    assert_eq!(empty(&st), None, "{:?}", st.errors);
    let (_, st) = run(DecoderKind::Libipt, 1);
    assert_eq!(empty(&st), Some(1), "{:?}", st.errors);
}

/// The same past 64 calls: `n` nested calls made after the PSB, all
/// returned, then one compressed return more, against the call made
/// before it. libipt's return stack holds 64 addresses: below 64 calls
/// it still holds that call and returns to it, where the fast decoder
/// fails and says libipt differs; from 64 on, libipt has lost it too and
/// fails alike, and nothing differs.
#[test]
fn a_return_past_a_psb_and_64_calls_differs_from_libipt_no_more() {
    // CODE: call f; CODE+5: jnz $; f = CODE+7: jnz CODE+14; call f;
    // CODE+14: ret.
    let code = [
        0xe8, 0x02, 0x00, 0x00, 0x00, 0x75, 0xfe, 0x75, 0x05, 0xe8, 0xf9, 0xff, 0xff, 0xff, 0xc3,
    ];
    for (n, differs) in [(63, true), (64, false)] {
        let mut pkts = psb_at(CODE).to_vec();
        // The PSB at f's entry, after the first call.
        pkts.extend(psb_at(CODE + 7));
        // n calls (jnz not taken), then jnz taken, n + 1 returns.
        let mut bits = vec![false; n];
        bits.extend(vec![true; n + 2]);
        for six in bits.chunks(6) {
            let payload = six.iter().fold(0u8, |p, &b| p << 1 | u8::from(b));
            pkts.push(Packet::Tnt8 {
                payload,
                bits: six.len() as u8,
            });
        }
        let pt = encode(&pkts);
        let (_, fast) = run_with(&pt, &code, DecoderKind::Fast);
        let (_, lib) = run_with(&pt, &code, DecoderKind::Libipt);
        let empty = |st: &DecodeStats| st.errors.get("RetstackEmpty").copied();
        assert_eq!(empty(&fast), Some(1), "{n}: {:?}", fast.errors);
        assert_eq!(
            fast.libipt_differs
                .keys()
                .any(|k| k.contains("before a PSB")),
            differs,
            "{n}: {:?}",
            fast.libipt_differs
        );
        assert_eq!(
            empty(&lib),
            (!differs).then_some(1),
            "{n}: {:?}",
            lib.errors
        );
    }
}

/// A PSB+ that restates a changed CBR, right after a branch whose target
/// is the PSB's IP: the branch was taken before the PSB, so its op comes
/// before the CBR mark, in one chunk as in a chunk cut at the PSB (which
/// hands the branch out with the chunk before). One chunk made the mark
/// first, before a jump of an earlier time, and the time spread up to
/// that mark moved with the chunk size (by 1-18 ns on a ptsim trace whose
/// PSB+ a probe changed).
#[test]
fn a_cbr_restated_at_a_psb_comes_after_the_branch_before_it() {
    // Three rounds of JNZ_JMP_LOOP (the last jump's target the PSB's
    // IP), two more.
    let mut pkts = psb_cbrs(1000, &[10], false);
    pkts.push(taken(3));
    pkts.extend(psb_cbrs(2000, &[20], false));
    pkts.push(taken(2));
    pkts.push(Packet::TipPgd(0, Compression::Suppressed));
    let pt = encode(&pkts);
    for decoder in [DecoderKind::Fast, DecoderKind::Libipt] {
        let run = |chunk| run_chunked(&pt, &JNZ_JMP_LOOP, decoder, chunk);
        let (whole, st) = run(u64::MAX);
        assert_eq!(st.chunks, 1, "{decoder:?}");
        assert!(st.errors.is_empty(), "{decoder:?}: {:?}", st.errors);
        // The changed ratio's mark, after the third jump.
        let shape: String = whole
            .iter()
            .filter_map(|op| match op {
                Op::Jump { to: CODE, .. } => Some('j'),
                Op::Mark { .. } => Some('m'),
                _ => None,
            })
            .collect();
        assert!(
            shape.starts_with("mjjjmj"),
            "{decoder:?}: {shape} {whole:?}"
        );
        let times: Vec<u64> = whole.iter().map(|op| op.stamp().time).collect();
        assert!(times.is_sorted(), "{decoder:?}: {times:?}");
        let (cut, st) = run(1);
        assert_eq!(st.chunks, 2, "{decoder:?}");
        assert_eq!(format!("{whole:?}"), format!("{cut:?}"), "{decoder:?}");
    }
}

/// CODE: jnz CODE+4; nop; nop; CODE+4: jmp CODE: a loop that takes a
/// TNT bit a round, each PSB+ at CODE.
const JNZ_JMP_LOOP: [u8; 6] = [0x75, 0x02, 0x90, 0x90, 0xeb, 0xfa];

/// A PSB+ at CODE with a TSC and `cbrs`, and MODE.Exec unless `no_mode`.
fn psb_cbrs(tsc: u64, cbrs: &[u8], no_mode: bool) -> Vec<Packet> {
    let mut p = vec![Packet::Psb, Packet::Tsc(tsc)];
    p.extend(cbrs.iter().map(|&c| Packet::Cbr(c)));
    if !no_mode {
        p.push(PSB_ENABLED[1]);
    }
    p.extend([Packet::Fup(CODE, Compression::Sext48), Packet::Psbend]);
    p
}

/// `bits` taken branches in one TNT.
fn taken(bits: u8) -> Packet {
    Packet::Tnt8 {
        payload: (1 << bits) - 1,
        bits,
    }
}

/// `pt` over [`JNZ_JMP_LOOP`] with each flow decoder in one chunk and in
/// chunks of one byte (a chunk at every PSB): the same ops, which are
/// returned with each decoder's statistics.
fn same_ops_however_cut(pt: &[u8], on_error: OnError) -> Vec<(Vec<Op>, DecodeStats)> {
    let mut outs = Vec::new();
    for decoder in [DecoderKind::Fast, DecoderKind::Libipt] {
        let run = |chunk| {
            run_opts(
                pt,
                &JNZ_JMP_LOOP,
                DecodeOptions {
                    decoder,
                    on_error,
                    chunking: Chunking::Bytes(chunk),
                    ..DecodeOptions::default()
                },
            )
        };
        let (whole, st) = run(u64::MAX);
        let (cut, cut_st) = run(1);
        assert!(cut_st.chunks > st.chunks, "{decoder:?}");
        assert_eq!(format!("{whole:?}"), format!("{cut:?}"), "{decoder:?}");
        assert_eq!(st.errors, cut_st.errors, "{decoder:?}");
        outs.push((whole, st));
    }
    outs
}

/// A PSB+ whose IP the decode never gets to, an OVF right after it (the
/// packets that would take it there were lost: a sound ptsim trace whose
/// overflows lose instructions): the same ops however the trace is cut.
/// The chunk before that PSB, walking to its IP, went on past the
/// overflow, where the trace resumes, and decoded the code there up to
/// that IP, which the chunk starting at the PSB decoded again after the
/// overflow. Now that chunk stops at the overflow, the next chunk's.
#[test]
fn an_overflow_between_a_psb_plus_and_its_ip_is_one_edge_however_the_trace_is_cut() {
    let mut pkts = psb_cbrs(1000, &[10], false);
    pkts.push(taken(3));
    // At the jnz, the decode needs a bit; the PSB+ says the jmp after it.
    pkts.extend([
        Packet::Psb,
        Packet::Tsc(2000),
        Packet::Cbr(10),
        PSB_ENABLED[1],
        Packet::Fup(CODE + 4, Compression::Sext48),
        Packet::Psbend,
        Packet::Ovf,
        Packet::Fup(CODE, Compression::Sext48),
        taken(2),
    ]);
    pkts.extend(psb_cbrs(3000, &[10], false));
    pkts.extend([taken(2), Packet::TipPgd(0, Compression::Suppressed)]);
    for on_error in [OnError::Resync, OnError::NextPsb] {
        for (ops, st) in same_ops_however_cut(&encode(&pkts), on_error) {
            let overflows = ops
                .iter()
                .filter(|op| {
                    matches!(
                        op,
                        Op::Gap {
                            kind: GapKind::Overflow,
                            ..
                        }
                    )
                })
                .count();
            assert_eq!(overflows, 1, "{on_error:?} {ops:?}");
            assert!(st.errors.is_empty(), "{:?}", st.errors);
        }
    }
}

/// The CBR ratios marked, in order.
fn cbr_marks(ops: &[Op]) -> Vec<u16> {
    ops.iter()
        .filter_map(|op| match op {
            Op::Mark { mark, .. } => match **mark {
                ptdec::model::ops::Mark::Cbr { ratio, .. } => Some(ratio),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// A packet that cannot be read right after a PSB+ (a CBR of ratio 0,
/// as a probe inserted): one gap however the trace is cut. The chunk
/// before that PSB, walking to its IP, met the packet too and made a
/// gap of its own: two where one decoder running through makes one.
#[test]
fn a_bad_packet_right_after_a_psb_plus_is_one_gap_however_the_trace_is_cut() {
    let mut pkts = psb_cbrs(1000, &[10], false);
    pkts.push(taken(3));
    pkts.extend(psb_cbrs(2000, &[10], false));
    pkts.extend([Packet::Cbr(0), taken(2)]);
    pkts.extend(psb_cbrs(3000, &[10], false));
    pkts.extend([taken(2), Packet::TipPgd(0, Compression::Suppressed)]);
    for on_error in [OnError::Resync, OnError::NextPsb] {
        for (ops, st) in same_ops_however_cut(&encode(&pkts), on_error) {
            let gaps = ops.iter().filter(|op| matches!(op, Op::Gap { .. })).count();
            assert_eq!(gaps, 1, "{on_error:?} {ops:?}");
            assert_eq!(st.errors.get("BadPacket"), Some(&1), "{:?}", st.errors);
        }
    }
}

/// A TIP.PGE without an IP right after a PSB+ (a probe's corruption of a
/// real trace: two bytes after PSBEND): one gap however the trace is cut,
/// and one where the resync meets it again.
/// The chunk before that PSB, walking to its IP, read the packet and made
/// a gap of its own, and the chunk starting there another: two where one
/// decoder running through makes one. Unlike a packet that cannot be
/// read, the error is one of the decoder's state too, so the chunk before
/// ends without a gap only where a decoder synchronized at that PSB meets
/// the same error at the same offset.
#[test]
fn an_enable_without_an_ip_right_after_a_psb_plus_is_one_gap_however_the_trace_is_cut() {
    let mut pkts = psb_cbrs(1000, &[10], false);
    pkts.push(taken(3));
    pkts.extend(psb_cbrs(2000, &[10], false));
    pkts.extend([Packet::TipPge(0, Compression::Suppressed), taken(2)]);
    pkts.extend(psb_cbrs(3000, &[10], false));
    pkts.extend([taken(2), Packet::TipPgd(0, Compression::Suppressed)]);
    for on_error in [OnError::Resync, OnError::NextPsb] {
        for (ops, st) in same_ops_however_cut(&encode(&pkts), on_error) {
            // The error's gap, once: the resync reads the same packet
            // again, at the same offset, and the error it meets there is
            // the same gap (two gaps of no length until the forty-fifth
            // session).
            let gaps: Vec<&Op> = ops
                .iter()
                .filter(|op| matches!(op, Op::Gap { .. }))
                .collect();
            assert!(
                matches!(gaps[..], [Op::Gap { offset: 79, .. }]),
                "{on_error:?} {ops:?}"
            );
            // The error, and the same again where the resync reads it.
            assert!(st.errors.keys().eq(["Noip"]), "{:?}", st.errors);
        }
    }
}

/// After a decode error with no PSB left in its chunk, the chunk takes
/// the next PSB+'s status updates, as one decoder synchronizing there
/// does, and the next chunk, which starts at that PSB, takes them too.
/// A PSB+ with two CBRs (hostile) was marked twice at small chunk sizes:
/// the ordering stage drops only a first CBR mark that restates the last
/// one. Now the chunk before leaves them to the next.
#[test]
fn the_cbrs_of_a_psb_plus_after_an_error_are_marked_once_however_the_trace_is_cut() {
    let mut pkts = psb_cbrs(1000, &[10], false);
    // A TIP where the jnz wants a TNT bit: the error, then the next PSB.
    pkts.extend([taken(2), Packet::Tip(CODE, Compression::Sext48)]);
    pkts.extend(psb_cbrs(2000, &[1, 20], false));
    pkts.extend([taken(2), Packet::TipPgd(0, Compression::Suppressed)]);
    for (ops, st) in same_ops_however_cut(&encode(&pkts), OnError::NextPsb) {
        assert_eq!(cbr_marks(&ops), [10, 1, 20], "{ops:?}");
        assert_eq!(st.errors.values().sum::<u64>(), 1, "{:?}", st.errors);
    }
}

/// A PSB+ without a MODE.Exec (hostile) has no status update bound to
/// its IP, at which a restated CBR decoded through is marked
/// ([`a_cbr_restated_at_a_psb_comes_after_the_branch_before_it`]): the
/// CBR held there is marked at the next event, not lost when the next
/// PSB+'s CBR is held in turn (found by a review).
#[test]
fn a_cbr_held_at_a_psb_plus_without_mode_exec_is_not_lost() {
    let mut pkts = psb_cbrs(1000, &[10], false);
    pkts.push(taken(3));
    pkts.extend(psb_cbrs(2000, &[20], true));
    pkts.push(taken(3));
    pkts.extend(psb_cbrs(3000, &[30], false));
    pkts.extend([taken(2), Packet::TipPgd(0, Compression::Suppressed)]);
    // Where it is marked follows the chunk size here (the walk to the
    // PSB's IP has no event to end it: the mark comes at the next PSB+'s
    // status update or at the PSB where a chunk starts), not whether.
    let pt = encode(&pkts);
    for decoder in [DecoderKind::Fast, DecoderKind::Libipt] {
        for chunk in [1, u64::MAX] {
            let (ops, st) = run_chunked(&pt, &JNZ_JMP_LOOP, decoder, chunk);
            assert!(st.errors.is_empty(), "{:?}", st.errors);
            assert_eq!(
                cbr_marks(&ops),
                [10, 20, 30],
                "{decoder:?} {chunk}: {ops:?}"
            );
        }
    }
}

/// Straight-line code longer than a block holds (65,535 instructions: a
/// block's count is 16 bits, in libipt as in ptflow): the fast decoder
/// ends the block there and goes on in the next, without handing the
/// chunk to libipt, and both decoders count every instruction.
#[test]
fn straight_line_code_longer_than_a_block_is_the_fast_decoders() {
    // 70,000 NOPs, then `jnz` back to the first; two passes, then out.
    const NOPS: usize = 70_000;
    let mut code = vec![0x90u8; NOPS];
    let back = -(NOPS as i32) - 6;
    code.extend_from_slice(&[0x0f, 0x85]);
    code.extend_from_slice(&back.to_le_bytes());
    code.push(0xf4); // hlt: where the not-taken branch goes
    let mut pkts = PSB_ENABLED.to_vec();
    pkts.push(Packet::Tnt8 {
        payload: 0b10,
        bits: 2,
    });
    pkts.push(Packet::TipPgd(0, Compression::Suppressed));
    let pt = encode(&pkts);
    let mut counts = Vec::new();
    for decoder in [DecoderKind::Libipt, DecoderKind::Fast] {
        let (_, st) = run_with(&pt, &code, decoder);
        if decoder == DecoderKind::Fast {
            assert!(st.fallbacks.is_empty(), "{:?}", st.fallbacks);
            assert_eq!(st.fast_chunks, st.chunks);
        }
        counts.push((st.insns, st.errors.clone()));
    }
    assert_eq!(counts[0], counts[1]);
    // The two passes of NOPs and `jnz`, at least.
    assert!(counts[1].0 >= 2 * (NOPS as u64 + 1), "{counts:?}");
}

/// PT whose timing packets never move the time (every PSB+ restates one
/// TSC), while calls and returns go on: a loop calling a function that
/// returns at once, 1,100,000 times, one compressed return's TNT bit each.
/// Every slice ties with the segment's start and every op joins one group
/// of the time spreading, so before both were bounded the whole trace was
/// held in memory. Now the spreading ends a group at `interp::MAX_GROUP`
/// ops, the stack holds at most `stack::MAX_HELD` slices back and writes
/// the rest as they close, the summary says both, and the FTF is the same
/// for every `-j` and chunk size.
#[test]
fn time_that_never_moves_is_held_within_bounds() {
    use ptdec::emit::EmitOptions;
    // 0x1000: call 0x1010; 0x1005: jmp 0x1000; 0x1010: ret
    let mut code = vec![0xe8, 0x0b, 0, 0, 0, 0xeb, 0xf9];
    code.resize(0x10, 0x90);
    code.push(0xc3);
    let passes = ptdec::stack::MAX_HELD + 50_000;
    // Every PSB+ (at the call the decoder stops at) with the same time.
    let psb = [
        Packet::Psb,
        Packet::Tsc(0x10_0000),
        Packet::ModeExec {
            csl: true,
            csd: false,
        },
        Packet::Fup(CODE, Compression::Sext48),
        Packet::Psbend,
    ];
    let pt = taken_passes(&psb, &psb, passes);
    let pt_len = pt.len() as u64;
    let dir = tempfile::tempdir().unwrap();
    let input = code_input(dir.path(), pt, &code);
    let mut outputs = Vec::new();
    for (jobs, chunk) in [(1, 64 << 10), (2, 4 << 10)] {
        let r = run_raw_ftf(
            &input,
            jobs,
            chunk,
            // Times spread, as by default.
            ptdec::plan::StackOptions {
                interpolate: true,
                ..Default::default()
            },
            // As the command line without --time-axis: the axis the trace
            // calls for.
            EmitOptions {
                axis_auto: true,
                ..EmitOptions::default()
            },
        );
        let what = format!("-j{jobs} chunks of {chunk}: {:?}", r.stack);
        assert!(r.decode.chunks > 1 || chunk >= pt_len, "{what}");
        // A call, a return and a jump a pass, in groups of MAX_GROUP.
        let ops = 3 * passes as u64;
        assert_eq!(
            r.stack.cut_groups,
            (ops - 1) / ptdec::interp::MAX_GROUP as u64,
            "{what}"
        );
        // The f slices past those held back went out before the segment
        // closed, and so do the last f, the untraced time after the trace
        // and the end's: all tie with the segment's start.
        let past = (passes - ptdec::stack::MAX_HELD) as u64;
        assert!(
            (past..=past + 3).contains(&r.stack.held_past_bound),
            "{what}"
        );
        // The passes, and the call the trace ends in.
        assert_eq!(r.stack.calls, passes as u64 + 1, "{what}");
        let summary = ptdec::summary::render(&r);
        for want in [
            "branches at one timestamp (timing packets that never move the time",
            "slices began at the same instant as their parent but were written before it, a thread holding 1,048,576",
        ] {
            assert!(summary.contains(want), "{want}: {summary}");
        }
        outputs.push(r.written.into_iter().map(|w| w.bytes).collect::<Vec<_>>());
    }
    assert!(outputs.iter().all(|o| *o == outputs[0]));
}

/// PT of `passes` taken branches after `head`: one TNT bit each, 47 to a
/// packet, with `psb` every 500 packets (4 KiB or so), and the end.
fn taken_passes(head: &[Packet], psb: &[Packet], passes: usize) -> Vec<u8> {
    let mut pkts = head.to_vec();
    let mut left = passes;
    let mut since_psb = 0;
    while left > 0 {
        let bits = left.min(47);
        left -= bits;
        pkts.push(Packet::Tnt64 {
            payload: (1u64 << bits) - 1,
            bits: bits as u8,
        });
        since_psb += 1;
        if since_psb == 500 && left > 0 {
            since_psb = 0;
            pkts.extend_from_slice(psb);
        }
    }
    pkts.push(Packet::TipPgd(0, Compression::Suppressed));
    encode(&pkts)
}

/// Raw PT `pt` of `code` at CODE, the code written to `dir` as `code.bin`.
fn code_input(dir: &Path, pt: Vec<u8>, code: &[u8]) -> ptdec::raw::RawInput {
    let bin = dir.join("code.bin");
    std::fs::write(&bin, code).unwrap();
    ptdec::raw::RawInput {
        pt_path: "t.pt".into(),
        pt,
        sections: vec![RawSection {
            path: bin,
            offset: 0,
            size: code.len() as u64,
            vaddr: CODE,
        }],
        modules: vec![ptdec::raw::Module {
            start: CODE,
            end: CODE + code.len() as u64,
            name: "code.bin".into(),
            image: None,
            bias: CODE,
        }],
    }
}

/// Decodes `input` into an FTF in memory with `jobs` workers and chunks of
/// `chunk` bytes (by libipt, as `DecodeOptions`' default).
fn run_raw_ftf(
    input: &ptdec::raw::RawInput,
    jobs: usize,
    chunk: u64,
    stacks: ptdec::plan::StackOptions,
    emit: ptdec::emit::EmitOptions,
) -> ptdec::pipeline::Report {
    run_raw_ftf_with(input, (jobs, chunk, DecoderKind::default()), stacks, emit)
}

/// [`run_raw_ftf`] with the flow decoder `decoder`.
fn run_raw_ftf_with(
    input: &ptdec::raw::RawInput,
    (jobs, chunk, decoder): (usize, u64, DecoderKind),
    stacks: ptdec::plan::StackOptions,
    emit: ptdec::emit::EmitOptions,
) -> ptdec::pipeline::Report {
    use ptdec::pipeline::{self, Input};
    use ptdec::plan::{Ftf, Plan};
    let symbols = ptdec::symbols::SymbolCache::new();
    let cfg = RawConfig::default();
    let plan = Plan::new(
        Input::Raw {
            input,
            cfg: &cfg,
            symbols: &symbols,
        },
        DecodeOptions {
            jobs,
            chunking: Chunking::Bytes(chunk),
            decoder,
            ..DecodeOptions::default()
        },
        stacks,
        Ftf {
            emit,
            target: ptdec::emit::Target::Memory,
        },
    );
    pipeline::run(&plan, None).unwrap()
}

/// Calls that never return, each steered by a TNT bit (`call f; f: jnz
/// back`): a trace of a few hundred KB whose stack would hold a frame per
/// call. Past `stack::MAX_DEPTH` frames the thread's stack restarts, so
/// its memory stays bounded; the FTF is the same for every `-j` and
/// chunk size (the decode workers' stacks give up at the bound, and the
/// real stack takes their ops), and the summary says so.
#[test]
fn calls_that_never_return_restart_the_stack_at_the_depth_bound() {
    use ptdec::emit::EmitOptions;
    use ptdec::stack::MAX_DEPTH;
    // 0x1000: call 0x1010; 0x1010: jnz 0x1000
    let mut code = vec![0xe8, 0x0b, 0, 0, 0];
    code.resize(0x10, 0x90);
    code.extend_from_slice(&[0x75, 0xee]);
    let passes = MAX_DEPTH + 5000;
    // A PSB+ at the `jnz` the decoder waits at.
    let psb = [
        Packet::Psb,
        Packet::ModeExec {
            csl: true,
            csd: false,
        },
        Packet::Fup(CODE + 0x10, Compression::Sext48),
        Packet::Psbend,
    ];
    let pt = taken_passes(&PSB_ENABLED, &psb, passes);
    let pt_len = pt.len() as u64;
    let dir = tempfile::tempdir().unwrap();
    let input = code_input(dir.path(), pt, &code);
    let mut outputs = Vec::new();
    for (jobs, chunk) in [(1, 64 << 10), (2, 4 << 10), (2, 1 << 20)] {
        let r = run_raw_ftf(
            &input,
            jobs,
            chunk,
            Default::default(),
            EmitOptions {
                axis: ptdec::emit::TimeAxis::Instructions,
                ..EmitOptions::default()
            },
        );
        assert_eq!(
            r.stack.depth_restarts, 1,
            "-j{jobs} chunks of {chunk}: {:?}",
            r.stack
        );
        assert!(
            r.decode.chunks > 1 || chunk >= pt_len,
            "{:?}",
            r.decode.chunks
        );
        let summary = ptdec::summary::render(&r);
        assert!(
            summary.contains("warning: 1 calls went past 1,048,576 open frames"),
            "{summary}"
        );
        outputs.push(r.written.into_iter().map(|w| w.bytes).collect::<Vec<_>>());
    }
    assert!(outputs.iter().all(|o| *o == outputs[0]));
}

/// A byte of PT can stand for a million ops: a TNT bit taking a branch
/// back over a chain of direct jumps, which need no packet (here 50,000
/// jumps a pass, six passes a byte, 6,000,000 ops from 20 bytes of TNT).
/// Held whole, such a chunk took 64 MiB of ops a byte of trace (48 bytes
/// took 1.3 GB). Past its bound (`decode::chunk_ops_bound`: 1,048,576 ops
/// for a chunk this small) the decode worker gives the chunk back, and
/// the calling thread decodes it again and hands it on in pieces, so at
/// most about a stall's ops are held at once; every instruction is
/// counted, the FTF is the same for every `-j` and chunk size, and the
/// summary says what happened.
#[test]
fn a_byte_standing_for_a_million_ops_is_held_within_bounds() {
    use ptdec::emit::EmitOptions;
    const JUMPS: usize = 50_000;
    const BYTES: usize = 20;
    // 0x1000: JUMPS times `jmp` to the next instruction, then `jnz` back
    // to the first; `hlt` where the branch not taken goes.
    let mut code = [0xeb, 0x00].repeat(JUMPS);
    let back = -(code.len() as i32) - 6;
    code.extend_from_slice(&[0x0f, 0x85]);
    code.extend_from_slice(&back.to_le_bytes());
    code.push(0xf4);
    let mut pkts = PSB_ENABLED.to_vec();
    for _ in 0..BYTES {
        pkts.push(Packet::Tnt8 {
            payload: 0b11_1111,
            bits: 6,
        });
    }
    pkts.push(Packet::TipPgd(0, Compression::Suppressed));
    let pt = encode(&pkts);
    let dir = tempfile::tempdir().unwrap();
    let input = code_input(dir.path(), pt, &code);
    let passes = 6 * BYTES as u64 + 1;
    let mut outputs = Vec::new();
    for (jobs, chunk, decoder) in [
        (1, 64 << 10, DecoderKind::Libipt),
        (2, 4 << 10, DecoderKind::Fast),
    ] {
        let r = run_raw_ftf_with(
            &input,
            (jobs, chunk, decoder),
            ptdec::plan::StackOptions::default(),
            EmitOptions {
                axis_auto: true,
                ..EmitOptions::default()
            },
        );
        let d = &r.decode;
        let what = format!("-j{jobs} chunks of {chunk}, {decoder:?}: {d:?}");
        assert_eq!(d.insns, passes * (JUMPS as u64 + 1), "{what}");
        // The fast decoder decoded the chunk again itself, handing its
        // runs on as they filled up.
        assert!(d.fallbacks.is_empty(), "{what}");
        assert_eq!(
            d.fast_chunks,
            u64::from(decoder == DecoderKind::Fast),
            "{what}"
        );
        assert!(d.errors.is_empty(), "{what}");
        assert_eq!(d.chunks_in_pieces, d.chunks, "{what}");
        assert!(
            d.max_ops_held <= (ptdec::decode::NO_PROGRESS_INSNS + (1 << 16))
                && d.max_ops_held * 8 < d.ops,
            "{what}"
        );
        let summary = ptdec::summary::render(&r);
        assert!(
            summary.contains("chunks made more ops than a chunk may hold"),
            "{summary}"
        );
        outputs.push(r.written.into_iter().map(|w| w.bytes).collect::<Vec<_>>());
    }
    assert!(outputs.iter().all(|o| *o == outputs[0]));
}
