//! The decoding stage on synthesized traces: a small program assembled with
//! iced-x86, "executed" by a control-flow emulator, turned into Intel PT by
//! ptsim's packet generator, and written as a trace dir (perf.data with
//! AUXTRACE_INFO, TIME_CONV, COMM, MMAP2, ITRACE_START, AUXTRACE; the code in
//! `sysroot/`). The ops `decode` hands over must be exactly the calls,
//! returns, jumps and enable/disable points of the emulated execution, with
//! exact instruction counts.

use std::collections::{BTreeMap, HashMap};
use std::io::Cursor;
use std::path::Path;

use iced_x86::code_asm::*;
use iced_x86::{BlockEncoderOptions, Decoder, DecoderOptions, FlowControl, Mnemonic};
use ptdec::decode::{decode, DecodeOptions, DecodeStats, ProgressCallback};
use ptdec::images::{ImageStore, SearchPath};
use ptdec::input::Trace;
use ptdec::ops::{GapKind, Op, OpSink, Stamp};
use ptsim::model::{Event, Executed, InsnClass};
use ptsim::pt::{drop_bytes, Config, Generator, Injected, InjectedKind, Output};
use sideband::attr::{flags, Attr, AttrSet, ATTR_SIZE_VER8};
use sideband::auxtrace_info::{AuxtraceInfo, IntelPtInfo};
use sideband::record::{
    aux_flags, misc, Auxtrace, Event as PEvent, FileId, Mmap, Record, SampleId, TimeConv,
};
use sideband::sample::sample_type;
use sideband::writer::FileWriter;

const BASE: u64 = 0x40_0000;
const PID: u32 = 4242;
const TID: u32 = 4243;
const PMU: u32 = 8;
const PROG: &str = "/usr/bin/prog";
/// Iterations of the loop calling `h`.
const LOOPS: u64 = 2000;

struct Program {
    code: Vec<u8>,
    entry: u64,
}

/// Nested calls, a recursion deeper than the return-compression stack, a
/// loop with a conditional branch, an indirect call, a direct and an
/// indirect jump, a syscall round trip and an exit syscall.
fn assemble() -> Program {
    let mut a = CodeAssembler::new(64).unwrap();
    let mut f = a.create_label();
    let mut g = a.create_label();
    let mut h = a.create_label();
    let mut h_even = a.create_label();
    let mut k = a.create_label();
    let mut deep = a.create_label();
    let mut deep_end = a.create_label();
    let mut loop1 = a.create_label();
    let mut over = a.create_label();
    let mut tail = a.create_label();

    a.call(f).unwrap();
    a.mov(ebx, 70).unwrap();
    a.call(deep).unwrap();
    a.mov(ecx, LOOPS as i32).unwrap();
    a.set_label(&mut loop1).unwrap();
    a.call(h).unwrap();
    a.dec(ecx).unwrap();
    a.jne(loop1).unwrap();
    a.lea(rax, ptr(k)).unwrap();
    a.call(rax).unwrap();
    a.syscall().unwrap();
    a.jmp(over).unwrap();
    a.hlt().unwrap();
    a.set_label(&mut over).unwrap();
    a.lea(rdx, ptr(tail)).unwrap();
    a.jmp(rdx).unwrap();
    a.hlt().unwrap();
    a.set_label(&mut tail).unwrap();
    a.nop().unwrap();
    a.syscall().unwrap(); // exit
    a.hlt().unwrap();

    a.set_label(&mut f).unwrap();
    a.call(g).unwrap();
    a.ret().unwrap();
    a.set_label(&mut g).unwrap();
    a.nop().unwrap();
    a.ret().unwrap();

    a.set_label(&mut h).unwrap();
    a.test(ecx, 1).unwrap();
    a.je(h_even).unwrap();
    a.nop().unwrap();
    a.set_label(&mut h_even).unwrap();
    a.ret().unwrap();

    a.set_label(&mut k).unwrap();
    a.ret().unwrap();

    a.set_label(&mut deep).unwrap();
    a.dec(ebx).unwrap();
    a.je(deep_end).unwrap();
    a.call(deep).unwrap();
    a.set_label(&mut deep_end).unwrap();
    a.ret().unwrap();

    let res = a.assemble_options(BASE, BlockEncoderOptions::NONE).unwrap();
    Program {
        code: res.inner.code_buffer,
        entry: BASE,
    }
}

/// Runs the program's control flow and reports it as ptsim's engine would.
fn execute(p: &Program) -> Vec<Event> {
    execute_as(p, PID, TID)
}

fn execute_as(p: &Program, pid: u32, tid: u32) -> Vec<Event> {
    let mut ev = vec![Event::ThreadBegin {
        pid,
        tid,
        ip: p.entry,
        cycles: 0,
    }];
    let mut regs: HashMap<iced_x86::Register, u64> = HashMap::new();
    let mut stack: Vec<u64> = Vec::new();
    let mut zf = false;
    let mut ip = p.entry;
    let mut cycles = 0u64;
    let mut syscalls = 0;
    loop {
        let off = (ip - BASE) as usize;
        let mut d = Decoder::with_ip(64, &p.code[off..], ip, DecoderOptions::NONE);
        let i = d.decode();
        let fall = i.next_ip();
        let (class, next) = match (i.mnemonic(), i.flow_control()) {
            (Mnemonic::Syscall, _) => (InsnClass::FarTransfer, fall),
            (Mnemonic::Hlt, _) => panic!("hlt reached at {ip:#x}"),
            (_, FlowControl::Call) => {
                stack.push(fall);
                (InsnClass::DirectCall, i.near_branch_target())
            }
            (_, FlowControl::IndirectCall) => {
                stack.push(fall);
                (InsnClass::IndirectCall, regs[&i.op0_register()])
            }
            (_, FlowControl::IndirectBranch) => (InsnClass::IndirectJump, regs[&i.op0_register()]),
            (_, FlowControl::UnconditionalBranch) => {
                (InsnClass::DirectJump, i.near_branch_target())
            }
            (_, FlowControl::Return) => (InsnClass::Return, stack.pop().unwrap()),
            (m, FlowControl::ConditionalBranch) => {
                let taken = match m {
                    Mnemonic::Je => zf,
                    Mnemonic::Jne => !zf,
                    _ => unreachable!(),
                };
                (
                    InsnClass::CondBranch,
                    if taken { i.near_branch_target() } else { fall },
                )
            }
            (m, _) => {
                match m {
                    Mnemonic::Mov => {
                        regs.insert(i.op0_register().full_register(), i.immediate(1));
                    }
                    Mnemonic::Dec => {
                        let r = regs.entry(i.op0_register().full_register()).or_insert(0);
                        *r = u64::from((*r as u32).wrapping_sub(1));
                        zf = *r == 0;
                    }
                    Mnemonic::Test => {
                        zf = regs[&i.op0_register().full_register()] & i.immediate(1) == 0;
                    }
                    Mnemonic::Lea => {
                        regs.insert(i.op0_register(), i.ip_rel_memory_address());
                    }
                    Mnemonic::Nop => {}
                    other => panic!("emulator lacks {other:?}"),
                }
                (InsnClass::Other, fall)
            }
        };
        cycles += 1 + ip % 3;
        ev.push(Event::Insn(Executed {
            tid,
            ip,
            len: i.len() as u8,
            class,
            next_ip: next,
            cycles,
        }));
        if class == InsnClass::FarTransfer {
            syscalls += 1;
            if syscalls == 2 {
                ev.push(Event::ThreadEnd {
                    tid,
                    cycles: cycles + 10,
                });
                return ev;
            }
            cycles += 100_000;
        }
        ip = next;
    }
}

fn zero() -> Stamp {
    Stamp::default()
}

fn at(insns: u64) -> Stamp {
    Stamp { insns, ..zero() }
}

/// The ops the decoder must produce for `events` (times and cycles zeroed),
/// with the asynchronous exits the generator injected.
fn expected_ops(events: &[Event], injected: &[Injected]) -> Vec<Op> {
    let mut asyncs = injected
        .iter()
        .filter(|i| i.kind == InjectedKind::Async)
        .map(|i| (i.insn_index, i.ip.unwrap()))
        .peekable();
    let mut ops = Vec::new();
    let mut insns = 0u64;
    let mut enable_at: Option<u64> = None;
    let mut first = true;
    for ev in events {
        match ev {
            Event::ThreadBegin { ip, .. } => enable_at = Some(*ip),
            Event::Insn(e) => {
                if let Some((_, ip)) = asyncs.next_if(|&(n, _)| n == insns) {
                    let a = at(insns);
                    ops.push(Op::Disabled {
                        at: a,
                        ip,
                        kernel: true,
                    });
                    ops.push(Op::Enabled {
                        at: a,
                        ip,
                        first: false,
                    });
                }
                if let Some(ip) = enable_at.take() {
                    ops.push(Op::Enabled {
                        at: at(insns),
                        ip,
                        first: std::mem::take(&mut first),
                    });
                }
                insns += 1;
                let (from, to, s) = (e.ip, e.next_ip, at(insns));
                match e.class {
                    InsnClass::DirectCall | InsnClass::IndirectCall => ops.push(Op::Call {
                        at: s,
                        from,
                        to,
                        ret: from + u64::from(e.len),
                    }),
                    InsnClass::Return => ops.push(Op::Return { at: s, from, to }),
                    InsnClass::DirectJump | InsnClass::IndirectJump => {
                        ops.push(Op::Jump { at: s, from, to })
                    }
                    InsnClass::FarTransfer => {
                        ops.push(Op::Disabled {
                            at: s,
                            ip: from,
                            kernel: true,
                        });
                        enable_at = Some(to);
                    }
                    InsnClass::CondBranch | InsnClass::Other => {}
                }
            }
            Event::Async { from, to, .. } => {
                ops.push(Op::Disabled {
                    at: at(insns),
                    ip: *from,
                    kernel: true,
                });
                enable_at = Some(*to);
            }
            Event::ThreadEnd { .. } => {
                let last = ops.last().map_or(zero(), Op::stamp);
                ops.push(Op::End { at: last });
            }
        }
    }
    ops
}

/// Times and cycles zeroed, for comparison with [`expected_ops`].
fn untimed(op: &Op) -> Op {
    let mut op = op.clone();
    let s = op.stamp();
    let z = at(s.insns);
    match &mut op {
        Op::Enabled { at, .. }
        | Op::Disabled { at, .. }
        | Op::Call { at, .. }
        | Op::Return { at, .. }
        | Op::Jump { at, .. }
        | Op::Gap { at, .. }
        | Op::End { at } => *at = z,
    }
    op
}

#[derive(Default)]
struct Collect {
    ops: BTreeMap<(u32, u32), Vec<Op>>,
}

impl OpSink for Collect {
    fn op(&mut self, pid: u32, tid: u32, op: Op) {
        self.ops.entry((pid, tid)).or_default().push(op);
    }
}

fn sid(time: u64) -> SampleId {
    sid_of(PID, TID, time)
}

fn sid_of(pid: u32, tid: u32, time: u64) -> SampleId {
    SampleId {
        pid: Some(pid),
        tid: Some(tid),
        time: Some(time),
        cpu: Some(0),
        identifier: Some(1),
        ..SampleId::default()
    }
}

fn ev(misc: u16, record: Record<'_>, time: u64) -> PEvent<'_> {
    PEvent {
        misc,
        record,
        sample_id: sid(time),
    }
}

/// AUX data of the one per-thread buffer, and PERF_RECORD_AUX losses.
struct Aux<'a> {
    chunks: Vec<(u64, &'a [u8])>,
    truncated_at: Option<u64>,
}

/// Who runs and how the AUX area was mapped.
struct Setup {
    /// Per-cpu buffer (cpu 0) instead of a per-thread one.
    per_cpu: bool,
    /// (pid, tid) of each traced task; each gets COMM and MMAP2 records.
    tasks: Vec<(u32, u32)>,
    /// More sideband records (context switches).
    extra: Vec<PEvent<'static>>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            per_cpu: false,
            tasks: vec![(PID, TID)],
            extra: Vec::new(),
        }
    }
}

fn write_trace(dir: &Path, cfg: &Config, code: &[u8], aux: &Aux<'_>) {
    write_trace_with(dir, cfg, code, aux, &Setup::default());
}

/// Writes `dir/data` and `dir/sysroot/usr/bin/prog`. perf time == TSC
/// (time_mult 1, time_shift 0, time_zero 0).
fn write_trace_with(dir: &Path, cfg: &Config, code: &[u8], aux: &Aux<'_>, setup: &Setup) {
    let t = cfg.timing;
    let info = IntelPtInfo {
        pmu_type: u64::from(PMU),
        time_shift: 0,
        time_mult: 1,
        time_zero: 0,
        cap_user_time_zero: true,
        // perf stores config masks here (Skylake's: see `perf script -D` of
        // ../shared/realdata/perf.data.intel_pt-4.14).
        tsc_bit: 1 << 10,
        noretcomp_bit: 1 << 11,
        have_sched_switch: 0,
        snapshot_mode: false,
        per_cpu_mmaps: setup.per_cpu,
        mtc_bit: 1 << 9,
        mtc_freq_bits: 0xf << 14,
        tsc_ctc_ratio_n: u64::from(t.tsc_ctc_ratio_n),
        tsc_ctc_ratio_d: u64::from(t.tsc_ctc_ratio_d),
        cyc_bit: 1 << 1,
        max_non_turbo_ratio: u64::from(t.max_nonturbo_ratio),
        filter: None,
        extra_words: Vec::new(),
    };
    let config = u64::from(cfg.tsc) << 10
        | u64::from(cfg.mtc) << 9
        | u64::from(cfg.cyc) << 1
        | u64::from(cfg.noretcomp) << 11
        | u64::from(cfg.mtc_period) << 14;
    let attr = Attr {
        kind: PMU,
        size: ATTR_SIZE_VER8,
        config,
        sample_type: sample_type::TID
            | sample_type::TIME
            | sample_type::CPU
            | sample_type::IDENTIFIER,
        flags: flags::SAMPLE_ID_ALL | flags::EXCLUDE_KERNEL | flags::EXCLUDE_HV,
        ..Attr::default()
    };
    let mut attrs = AttrSet::new();
    attrs.push(attr, vec![1]);
    let mut w = FileWriter::new(Cursor::new(Vec::new()), attrs).unwrap();
    let t0 = t.tsc_base;
    let records: Vec<PEvent<'_>> = vec![
        PEvent {
            misc: 0,
            record: Record::AuxtraceInfo(AuxtraceInfo::from_intel_pt(&info)),
            sample_id: SampleId::default(),
        },
        PEvent {
            misc: 0,
            record: Record::TimeConv(TimeConv {
                time_shift: 0,
                time_mult: 1,
                time_zero: 0,
                ..TimeConv::default()
            }),
            sample_id: SampleId::default(),
        },
    ];
    for r in &records {
        w.write_event(r).unwrap();
    }
    for &(pid, tid) in &setup.tasks {
        let at = |time| sid_of(pid, tid, time);
        let comm = PEvent {
            misc: misc::COMM_EXEC,
            record: Record::Comm {
                pid,
                tid,
                comm: "prog".into(),
            },
            sample_id: at(t0 - 3000),
        };
        let mmap = PEvent {
            misc: misc::USER,
            record: Record::Mmap(Mmap {
                pid,
                tid,
                addr: BASE,
                len: 0x1000,
                pgoff: 0,
                file_id: Some(FileId::Inode {
                    maj: 8,
                    min: 1,
                    ino: 1234,
                    ino_generation: 0,
                }),
                prot: Some(5),
                flags: Some(2),
                filename: PROG.into(),
            }),
            sample_id: at(t0 - 2000),
        };
        w.write_event(&comm).unwrap();
        w.write_event(&mmap).unwrap();
    }
    let (pid0, tid0) = setup.tasks[0];
    w.write_event(&PEvent {
        misc: 0,
        record: Record::ItraceStart {
            pid: pid0,
            tid: tid0,
        },
        sample_id: sid_of(pid0, tid0, t0 - 1000),
    })
    .unwrap();
    for r in &setup.extra {
        w.write_event(r).unwrap();
    }
    for (i, (offset, data)) in aux.chunks.iter().enumerate() {
        if let Some(cut) = aux.truncated_at.filter(|_| i == 1) {
            w.write_event(&ev(
                0,
                Record::Aux {
                    aux_offset: 0,
                    aux_size: cut,
                    flags: aux_flags::TRUNCATED,
                },
                t0,
            ))
            .unwrap();
        }
        w.write_event(&PEvent {
            misc: 0,
            record: Record::Auxtrace(Auxtrace {
                offset: *offset,
                reference: 0,
                idx: 0,
                tid: if setup.per_cpu { u32::MAX } else { TID },
                cpu: if setup.per_cpu { 0 } else { u32::MAX },
                data: (*data).into(),
            }),
            sample_id: SampleId::default(),
        })
        .unwrap();
    }
    w.write_event(&PEvent {
        misc: 0,
        record: Record::FinishedRound,
        sample_id: SampleId::default(),
    })
    .unwrap();
    let bytes = w.finish().unwrap().into_inner();
    std::fs::write(dir.join("data"), bytes).unwrap();
    let bin = dir.join("sysroot/usr/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("prog"), code).unwrap();
}

fn run_decode(dir: &Path, opts: &DecodeOptions) -> (Collect, DecodeStats, ImageStore) {
    let trace = Trace::open(dir).unwrap();
    let images = ImageStore::new(SearchPath {
        live_fs: false,
        buildid_dir: None,
        ..SearchPath::for_trace(dir)
    });
    let mut c = Collect::default();
    let stats = decode(&trace, &images, opts, &mut c).unwrap();
    (c, stats, images)
}

fn generate(cfg: &Config) -> (Program, Vec<Event>, Output) {
    let p = assemble();
    let events = execute(&p);
    let out = Generator::run(cfg.clone(), &events).unwrap();
    (p, events, out)
}

/// Decodes a whole trace made with `cfg` and checks the ops exactly.
fn check_exact(cfg: Config) -> (Vec<Op>, DecodeStats) {
    let (p, events, out) = generate(&cfg);
    let dir = tempfile::tempdir().unwrap();
    write_trace(
        dir.path(),
        &cfg,
        &p.code,
        &Aux {
            chunks: vec![(0, &out.bytes)],
            truncated_at: None,
        },
    );
    let (c, stats, images) = run_decode(dir.path(), &DecodeOptions::default());
    assert!(images.missing().is_empty(), "{:?}", images.missing());
    assert_eq!(c.ops.len(), 1, "{:?}", c.ops.keys());
    let ops = &c.ops[&(PID, TID)];
    let got: Vec<Op> = ops.iter().map(untimed).collect();
    let want = expected_ops(&events, &out.stats.injected);
    if got != want {
        let i = got.iter().zip(&want).position(|(a, b)| a != b);
        panic!(
            "ops differ at {i:?} of {}/{}: got {:?}, want {:?}",
            got.len(),
            want.len(),
            i.map(|i| &got[i..(i + 3).min(got.len())]),
            i.map(|i| &want[i..(i + 3).min(want.len())]),
        );
    }
    // Time is perf time (== TSC here), non-decreasing, inside the execution.
    let t = cfg.timing;
    let end = t.tsc(
        events
            .iter()
            .rev()
            .find_map(|e| match e {
                Event::Insn(e) => Some(e.cycles),
                _ => None,
            })
            .unwrap(),
    );
    for w in ops.windows(2) {
        assert!(w[0].stamp().time <= w[1].stamp().time, "{w:?}");
    }
    for op in ops {
        let s = op.stamp();
        assert!(
            s.time >= t.tsc_base && s.time <= end,
            "{op:?} outside {:#x}..{end:#x}",
            t.tsc_base
        );
        assert_eq!(s.cycles.is_some(), cfg.cyc, "{op:?}");
    }
    assert_eq!(stats.insns, out.stats.insns);
    assert_eq!(stats.threads[&(PID, TID)].insns, out.stats.insns);
    assert!(stats.errors.is_empty(), "{:?}", stats.errors);
    (ops.clone(), stats)
}

#[test]
fn default_config_gives_exact_ops() {
    let (ops, stats) = check_exact(Config::default());
    let count = |f: fn(&Op) -> bool| ops.iter().filter(|o| f(o)).count();
    // f, g, 70 deep, the loop's h, k
    let calls = (1 + 1 + 70 + LOOPS + 1) as usize;
    assert_eq!(count(|o| matches!(o, Op::Call { .. })), calls);
    assert_eq!(count(|o| matches!(o, Op::Return { .. })), calls);
    assert_eq!(count(|o| matches!(o, Op::Jump { .. })), 2);
    assert_eq!(count(|o| matches!(o, Op::Enabled { .. })), 2);
    assert!(matches!(
        ops[0],
        Op::Enabled {
            first: true,
            ip: BASE,
            ..
        }
    ));
    assert_eq!(stats.syncs, 1);
    let th = &stats.threads[&(PID, TID)];
    assert_eq!(
        (th.calls, th.returns, th.jumps),
        (calls as u64, calls as u64, 2)
    );
}

#[test]
fn progress_counts_decoded_bytes_up_to_the_total() {
    use std::sync::{Arc, Mutex};
    let cfg = Config::default();
    let (p, _, out) = generate(&cfg);
    let dir = tempfile::tempdir().unwrap();
    write_trace(
        dir.path(),
        &cfg,
        &p.code,
        &Aux {
            chunks: vec![(0, &out.bytes)],
            truncated_at: None,
        },
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let opts = DecodeOptions {
        progress: Some(ProgressCallback::new(move |done, total| {
            s2.lock().unwrap().push((done, total))
        })),
        ..DecodeOptions::default()
    };
    let (_, stats, _) = run_decode(dir.path(), &opts);
    let seen = seen.lock().unwrap();
    let total = out.bytes.len() as u64;
    assert_eq!(stats.bytes, total);
    // Reports inside the segment (every 4096 blocks), then its end.
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(seen.iter().all(|&(_, t)| t == total), "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "{seen:?}");
    assert_eq!(seen.last(), Some(&(total, total)));
}

#[test]
fn noretcomp_gives_exact_ops() {
    check_exact(Config {
        noretcomp: true,
        ..Config::default()
    });
}

#[test]
fn cyc_gives_exact_ops_with_cycles() {
    let (ops, _) = check_exact(Config {
        cyc: true,
        mtc_period: 0,
        ..Config::default()
    });
    let cycles: Vec<u64> = ops.iter().filter_map(|o| o.stamp().cycles).collect();
    assert!(cycles.windows(2).all(|w| w[0] <= w[1]));
    assert!(*cycles.last().unwrap() > 0);
}

#[test]
fn frequent_psbs_and_long_tnt_give_exact_ops() {
    check_exact(Config {
        psb_period: 0,
        long_tnt: true,
        ..Config::default()
    });
}

#[test]
fn tsc_only_gives_exact_ops() {
    check_exact(Config {
        mtc: false,
        ..Config::default()
    });
}

#[test]
fn async_exits_are_disabled_and_enabled() {
    let cfg = Config {
        async_every: Some(60),
        ..Config::default()
    };
    let (ops, _) = check_exact(cfg);
    assert!(
        ops.iter()
            .filter(|o| matches!(o, Op::Enabled { .. }))
            .count()
            > 3
    );
}

#[test]
fn overflows_are_gaps_exactly_where_injected() {
    let cfg = Config {
        overflow_every: Some(150),
        overflow_lost_insns: 10,
        ..Config::default()
    };
    let (p, _events, out) = generate(&cfg);
    let ovf: Vec<_> = out
        .stats
        .injected
        .iter()
        .filter(|i| i.kind == InjectedKind::Overflow)
        .collect();
    assert!(ovf.len() >= 2, "{:?}", out.stats.injected);
    let dir = tempfile::tempdir().unwrap();
    write_trace(
        dir.path(),
        &cfg,
        &p.code,
        &Aux {
            chunks: vec![(0, &out.bytes)],
            truncated_at: None,
        },
    );
    let (c, stats, _) = run_decode(dir.path(), &DecodeOptions::default());
    let ops = &c.ops[&(PID, TID)];
    let gaps: Vec<(usize, &Op)> = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| {
            matches!(
                o,
                Op::Gap {
                    kind: GapKind::Overflow,
                    ..
                }
            )
        })
        .collect();
    assert_eq!(gaps.len(), ovf.len(), "{ops:?}");
    assert_eq!(stats.overflows, ovf.len() as u64);
    for ((i, gap), inj) in gaps.iter().zip(&ovf) {
        let Op::Gap { offset, at, .. } = gap else {
            unreachable!()
        };
        // libipt reports the event after reading a little past the OVF packet.
        assert!(
            (inj.offset..inj.offset + 64).contains(offset),
            "gap at {offset}, OVF packet at {}",
            inj.offset
        );
        assert!(
            at.time <= inj.tsc,
            "{at:?} after the overflow at {:#x}",
            inj.tsc
        );
        // Decoding restarts where the thread continues, with the instruction
        // count of the execution minus the lost instructions.
        match (&ops[i + 1], inj.ip) {
            (Op::Enabled { ip, .. }, Some(want)) => assert_eq!(*ip, want),
            (other, want) => panic!("after the gap: {other:?}, expected Enabled at {want:?}"),
        }
    }
    assert!(stats.errors.is_empty(), "{:?}", stats.errors);
    // An overflow also loses the TNT bits pending before it, so up to a
    // TNT packet's worth of branches before it cannot be followed.
    let lost: u64 = ovf.iter().map(|i| i.lost_insns).sum();
    assert!(stats.insns + lost <= out.stats.insns);
    assert!(stats.insns + lost + 64 * ovf.len() as u64 >= out.stats.insns);
}

/// A truncated AUX buffer: two AUXTRACE chunks with bytes missing between
/// them. With the PERF_RECORD_AUX truncated flag the decoder knows data was
/// lost (LostData gaps); without it, libipt trips over the hole (a decode
/// error) and resynchronizes at the next PSB. Either way what follows
/// decodes exactly.
#[test]
fn dropped_bytes_are_lost_data_and_resync() {
    // Every return a TIP and an MTC per CTC tick: enough bytes for a few PSBs.
    let cfg = Config {
        psb_period: 0,
        noretcomp: true,
        mtc_period: 0,
        ..Config::default()
    };
    let (p, events, out) = generate(&cfg);
    assert!(
        out.stats.psb_offsets.len() >= 4,
        "{} bytes, PSBs at {:?}",
        out.bytes.len(),
        out.stats.psb_offsets
    );
    let cut = out.stats.psb_offsets[1] as usize + 100;
    let t = drop_bytes(&out.bytes, cut..cut + 333, &out.stats.psb_offsets);
    assert!(t.resync_at.is_some());
    let want = expected_ops(&events, &out.stats.injected);
    for flagged in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = t.bytes.split_at(cut);
        write_trace(
            dir.path(),
            &cfg,
            &p.code,
            &Aux {
                chunks: vec![(0, a), (cut as u64, b)],
                truncated_at: flagged.then_some(cut as u64),
            },
        );
        let (c, stats, _) = run_decode(dir.path(), &DecodeOptions::default());
        let ops = &c.ops[&(PID, TID)];
        let gaps: Vec<&Op> = ops.iter().filter(|o| matches!(o, Op::Gap { .. })).collect();
        if flagged {
            assert!(
                gaps.iter().all(|g| matches!(
                    g,
                    Op::Gap {
                        kind: GapKind::LostData,
                        ..
                    }
                )),
                "{gaps:?}"
            );
            assert_eq!(stats.lost_data, 2, "{gaps:?}");
            assert!(stats.errors.is_empty(), "{:?}", stats.errors);
        } else {
            // The hole derails the decoder: into a wrong packet or an
            // address with no code.
            assert!(
                gaps.iter().any(|g| matches!(
                    g,
                    Op::Gap {
                        kind: GapKind::DecodeError(_) | GapKind::NoImage { .. },
                        ..
                    }
                )),
                "{gaps:?}"
            );
            assert!(!stats.errors.is_empty());
        }
        assert!(stats.syncs >= 2);
        // After the last gap, the branches are the execution's tail.
        let last_gap = ops
            .iter()
            .rposition(|o| matches!(o, Op::Gap { .. }))
            .unwrap();
        let tail: Vec<(u64, u64)> = ops[last_gap..]
            .iter()
            .filter_map(|o| match o {
                Op::Call { from, to, .. }
                | Op::Return { from, to, .. }
                | Op::Jump { from, to, .. } => Some((*from, *to)),
                _ => None,
            })
            .collect();
        let all: Vec<(u64, u64)> = want
            .iter()
            .filter_map(|o| match o {
                Op::Call { from, to, .. }
                | Op::Return { from, to, .. }
                | Op::Jump { from, to, .. } => Some((*from, *to)),
                _ => None,
            })
            .collect();
        assert!(!tail.is_empty());
        assert!(
            all.ends_with(&tail),
            "flagged={flagged}: the tail after the resync is not the execution's"
        );
    }
}

#[test]
fn time_window_and_thread_filter() {
    let cfg = Config::default();
    let (p, events, out) = generate(&cfg);
    let dir = tempfile::tempdir().unwrap();
    write_trace(
        dir.path(),
        &cfg,
        &p.code,
        &Aux {
            chunks: vec![(0, &out.bytes)],
            truncated_at: None,
        },
    );
    // Another thread only: the buffer is not decoded at all.
    let (c, stats, _) = run_decode(
        dir.path(),
        &DecodeOptions {
            tids: Some([1].into()),
            ..DecodeOptions::default()
        },
    );
    assert!(c.ops.is_empty());
    assert_eq!((stats.segments, stats.segments_skipped), (0, 1));
    // A window after the syscall's return: it starts with a synthesized Enabled.
    let full = run_decode(dir.path(), &DecodeOptions::default()).0.ops[&(PID, TID)].clone();
    let second = full
        .iter()
        .filter(|o| matches!(o, Op::Enabled { .. }))
        .nth(1)
        .unwrap()
        .stamp()
        .time;
    let (c, _, _) = run_decode(
        dir.path(),
        &DecodeOptions {
            start: Some(second),
            ..DecodeOptions::default()
        },
    );
    let ops = &c.ops[&(PID, TID)];
    assert!(
        matches!(ops[0], Op::Enabled { first: true, .. }),
        "{:?}",
        ops[0]
    );
    assert!(ops.iter().all(|o| o.stamp().time >= second));
    assert!(ops.len() < full.len());
    let _ = events;
}

/// Moves every clock of `ev` by `delta` cycles.
fn shifted(ev: &Event, delta: u64) -> Event {
    let mut e = ev.clone();
    match &mut e {
        Event::ThreadBegin { cycles, .. }
        | Event::Async { cycles, .. }
        | Event::ThreadEnd { cycles, .. } => *cycles += delta,
        Event::Insn(i) => i.cycles += delta,
    }
    e
}

fn cycles_of(ev: &Event) -> u64 {
    match ev {
        Event::ThreadBegin { cycles, .. }
        | Event::Async { cycles, .. }
        | Event::ThreadEnd { cycles, .. } => *cycles,
        Event::Insn(i) => i.cycles,
    }
}

/// Two processes take turns on one CPU, switching at their syscalls; the
/// per-cpu buffer's ops go to the task the SWITCH_CPU_WIDE records name.
#[test]
fn per_cpu_buffer_follows_context_switches() {
    const PID2: u32 = 5151;
    const TID2: u32 = 5152;
    let cfg = Config::default();
    let p = assemble();
    let a = execute_as(&p, PID, TID);
    let b = execute_as(&p, PID2, TID2);
    let after_syscall = |evs: &[Event]| {
        1 + evs
            .iter()
            .position(|e| matches!(e, Event::Insn(i) if i.class == InsnClass::FarTransfer))
            .unwrap()
    };
    let (a1, a2) = a.split_at(after_syscall(&a));
    let (b1, b2) = b.split_at(after_syscall(&b));
    // Lay the pieces end to end on one clock, 100k cycles of kernel between.
    let gap = 100_000;
    let mut merged = Vec::new();
    let mut clock = 0u64;
    let mut switches = Vec::new();
    let tasks = [(PID, TID), (PID2, TID2), (PID, TID), (PID2, TID2)];
    for (n, piece) in [a1, b1, a2, b2].into_iter().enumerate() {
        let start = cycles_of(&piece[0]);
        let base = if n == 0 { 0 } else { clock + gap };
        if n > 0 {
            switches.push((clock + gap / 2, tasks[n - 1], tasks[n]));
        }
        for e in piece {
            let e = shifted(e, base.wrapping_sub(start));
            clock = cycles_of(&e);
            merged.push(e);
        }
    }
    let out = Generator::run(cfg.clone(), &merged).unwrap();
    let timing = cfg.timing;
    let mut extra = Vec::new();
    for (cycles, (opid, otid), (npid, ntid)) in switches {
        let t = timing.tsc(cycles);
        extra.push(PEvent {
            misc: misc::SWITCH_OUT,
            record: Record::SwitchCpuWide {
                next_prev_pid: npid,
                next_prev_tid: ntid,
            },
            sample_id: sid_of(opid, otid, t),
        });
        extra.push(PEvent {
            misc: 0,
            record: Record::SwitchCpuWide {
                next_prev_pid: opid,
                next_prev_tid: otid,
            },
            sample_id: sid_of(npid, ntid, t + 1),
        });
    }
    let dir = tempfile::tempdir().unwrap();
    write_trace_with(
        dir.path(),
        &cfg,
        &p.code,
        &Aux {
            chunks: vec![(0, &out.bytes)],
            truncated_at: None,
        },
        &Setup {
            per_cpu: true,
            tasks: vec![(PID, TID), (PID2, TID2)],
            extra,
        },
    );
    let (c, stats, _) = run_decode(dir.path(), &DecodeOptions::default());
    assert!(stats.errors.is_empty(), "{:?}", stats.errors);
    assert_eq!(stats.unattributed_insns, 0);
    assert_eq!(c.ops.len(), 2, "{:?}", c.ops.keys());
    for (key, events) in [((PID, TID), &a), ((PID2, TID2), &b)] {
        let got: Vec<Op> = c.ops[&key].iter().map(untimed).collect();
        assert_eq!(got, expected_ops(events, &[]), "{key:?}");
    }
    // Only one of them with a pid filter.
    let (c, _, _) = run_decode(
        dir.path(),
        &DecodeOptions {
            pids: Some([PID2].into()),
            ..DecodeOptions::default()
        },
    );
    assert_eq!(
        c.ops.keys().copied().collect::<Vec<_>>(),
        vec![(PID2, TID2)]
    );
}

/// Without the program's file the decoder stops at its first instruction:
/// a NoImage gap, and the image store lists the file with the range.
#[test]
fn missing_code_is_a_no_image_gap_and_reported() {
    let cfg = Config::default();
    let (p, _events, out) = generate(&cfg);
    let dir = tempfile::tempdir().unwrap();
    write_trace(
        dir.path(),
        &cfg,
        &p.code,
        &Aux {
            chunks: vec![(0, &out.bytes)],
            truncated_at: None,
        },
    );
    std::fs::remove_file(dir.path().join("sysroot/usr/bin/prog")).unwrap();
    let (c, stats, images) = run_decode(dir.path(), &DecodeOptions::default());
    assert_eq!(stats.no_image, 1);
    assert_eq!(stats.insns, 0);
    let ops = &c.ops[&(PID, TID)];
    assert!(
        ops.iter().any(|o| matches!(
            o,
            Op::Gap {
                kind: GapKind::NoImage { ip: BASE },
                ..
            }
        )),
        "{ops:?}"
    );
    let missing = images.missing();
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert_eq!(missing[0].name, PROG);
    assert_eq!(missing[0].ranges, vec![(PID, BASE, BASE + 0x1000)]);
}
