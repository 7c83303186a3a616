//! The decode loop on hand-encoded raw PT (libipt's encoder) over tiny
//! images: each test pins one defect of the loop as it was on libipt-rs
//! (instructions before an error dropped, duplicate untraced slices, an
//! overflow before the first enable lost, no bound on code that needs no
//! packets) and the `--time-axis instructions` warning.

use std::path::Path;
use std::process::Command;

use ipt::{Compression, Encoder, Packet};
use ptdec::decode::{
    decode_raw, DecodeOptions, DecodeStats, RawConfig, RawSection, NO_PROGRESS_INSNS,
};
use ptdec::ops::{GapKind, Op, OpSink};

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

/// Decodes `pt` against `code` loaded at CODE.
fn run(pt: &[u8], code: &[u8]) -> (Vec<Op>, DecodeStats) {
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
    let st = decode_raw(
        pt,
        &sections,
        &RawConfig::default(),
        &DecodeOptions::default(),
        &mut c,
    )
    .unwrap();
    (c.0, st)
}

/// `jmp $` needs no packets: libipt follows it forever. The bound turns
/// it into a decode error gap; the ops of the segment stay bounded.
#[test]
fn direct_jump_loop_is_a_no_progress_gap_with_bounded_ops() {
    let mut pkts = PSB_ENABLED.to_vec();
    // A TNT bit that no instruction ever asks for: not the end of trace.
    pkts.push(Packet::Tnt8 {
        payload: 1,
        bits: 1,
    });
    let pt = encode(&pkts);
    let (ops, st) = run(&pt, &[0xeb, 0xfe]);
    assert!(st.max_stall > NO_PROGRESS_INSNS, "{st:?}");
    assert_eq!(st.errors.get("NoProgress"), Some(&1), "{:?}", st.errors);
    assert!(
        ops.iter().any(|o| matches!(o, Op::Gap { kind: GapKind::DecodeError(m), .. } if m.contains("no progress"))),
        "no no-progress gap"
    );
    assert!(
        (ops.len() as u64) < NO_PROGRESS_INSNS + 16,
        "{} ops",
        ops.len()
    );
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
