//! The decoding stage on synthesized traces: a small program assembled with
//! iced-x86, "executed" by a control-flow emulator, turned into Intel PT by
//! ptsim's packet generator, and written as a trace dir (perf.data with
//! AUXTRACE_INFO, TIME_CONV, COMM, MMAP2, ITRACE_START, AUXTRACE; the code in
//! `sysroot/`). The ops `decode` hands over must be exactly the calls,
//! returns, jumps and enable/disable points of the emulated execution, with
//! exact instruction counts.

use std::collections::BTreeMap;
use std::path::Path;

use iced_x86::code_asm::*;
use iced_x86::BlockEncoderOptions;
use ptdec::decode::{decode, DecodeOptions, DecodeStats, DecoderKind, ProgressCallback};
use ptdec::images::{ImageStore, SearchPath};
use ptdec::input::Trace;
use ptdec::model::ops::{GapKind, Op, OpSink, Stamp};
use ptsim::model::{Event, InsnClass};
use ptsim::pt::{drop_bytes, Config, Generator, Injected, InjectedKind, Output};
use ptsim::testkit::{self, sample_id, Aux, Program, Setup, Thread, BASE, PROG};
use sideband::record::{misc, Event as PEvent, Record};

const PID: u32 = 4242;
const TID: u32 = 4243;
/// Iterations of the loop calling `h`.
const LOOPS: u64 = 2000;

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
    Program::new(res.inner.code_buffer, BASE)
}

/// Runs the program's control flow and reports it as ptsim's engine would.
fn execute(p: &Program) -> Vec<Event> {
    execute_as(p, PID, TID)
}

/// Instructions cost 1 to 3 cycles, so that CYC packets differ.
fn execute_as(p: &Program, pid: u32, tid: u32) -> Vec<Event> {
    testkit::execute(p, &Thread::new(pid, tid).uneven())
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
                        raw_time: s.time,
                    }),
                    InsnClass::Return => ops.push(Op::Return { at: s, from, to }),
                    InsnClass::DirectJump | InsnClass::IndirectJump => ops.push(Op::Jump {
                        at: s,
                        from,
                        to,
                        inside: false,
                    }),
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
    *op.stamp_mut() = z;
    if let Op::Call { raw_time, .. } = &mut op {
        // As decoded: the call's time.
        assert_eq!(*raw_time, s.time);
        *raw_time = 0;
    }
    op
}

#[derive(Default)]
struct Collect {
    ops: BTreeMap<(u32, u32), Vec<Op>>,
    /// Marks (ptsim writes a CBR in every PSB+), kept apart from the
    /// control flow the tests compare.
    marks: Vec<Op>,
}

impl OpSink for Collect {
    fn op(&mut self, pid: u32, tid: u32, op: Op) {
        if matches!(op, Op::Mark { .. }) {
            self.marks.push(op);
            return;
        }
        self.ops.entry((pid, tid)).or_default().push(op);
    }
}

fn write_trace(dir: &Path, cfg: &Config, p: &Program, aux: &Aux<'_>) {
    testkit::write_trace(dir, cfg, p, aux, &Setup::task(PID, TID));
}

/// [`write_trace`] with all of `out`'s bytes as one AUX record.
fn write_whole(dir: &Path, cfg: &Config, p: &Program, out: &Output) {
    write_trace(
        dir,
        cfg,
        p,
        &Aux {
            chunks: vec![(0, &out.bytes)],
            truncated_at: None,
        },
    );
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
    write_whole(dir.path(), &cfg, &p, &out);
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
    // Cut at every PSB (a chunk per PSB), on two workers with a window of
    // two chunks: the same ops, stamps and all.
    let tiny = DecodeOptions {
        chunking: ptdec::decode::Chunking::Bytes(1),
        jobs: 2,
        window: Some(2),
        ..DecodeOptions::default()
    };
    let (c2, stats2, _) = run_decode(dir.path(), &tiny);
    assert_eq!(
        stats2.chunks as usize,
        out.stats.psb_offsets.len(),
        "a chunk per PSB"
    );
    let ops2 = &c2.ops[&(PID, TID)];
    if ops2 != ops {
        let i = ops2.iter().zip(ops).position(|(a, b)| a != b);
        panic!(
            "chunked ops differ at {i:?} of {}/{}: got {:?}, want {:?}",
            ops2.len(),
            ops.len(),
            i.map(|i| &ops2[i.saturating_sub(1)..(i + 3).min(ops2.len())]),
            i.map(|i| &ops[i.saturating_sub(1)..(i + 3).min(ops.len())]),
        );
    }
    assert_eq!(stats2.insns, stats.insns);
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
    let cfg = Config {
        psb_period: 0,
        long_tnt: true,
        ..Config::default()
    };
    let (p, _, out) = generate(&cfg);
    let dir = tempfile::tempdir().unwrap();
    write_whole(dir.path(), &cfg, &p, &out);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let opts = DecodeOptions {
        progress: Some(ProgressCallback::new(move |done, total| {
            s2.lock().unwrap().push((done, total))
        })),
        // Several chunks: progress is reported per chunk.
        chunking: ptdec::decode::Chunking::Bytes(1),
        ..DecodeOptions::default()
    };
    let (_, stats, _) = run_decode(dir.path(), &opts);
    let seen = seen.lock().unwrap();
    let total = out.bytes.len() as u64;
    assert_eq!(stats.bytes, total);
    // A report per chunk (several: tests/tests/e2e_ptsim.rs), the last at
    // the total.
    assert_eq!(seen.len() as u64, stats.chunks, "{seen:?}");
    assert!(seen.iter().all(|&(_, t)| t == total), "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "{seen:?}");
    assert_eq!(seen.last(), Some(&(total, total)));
}

/// The workers run at a lower priority than the thread they deliver to
/// (decode/workers.rs says why): the progress callback, called on the
/// worker that decoded the chunk, sees its nice value 5 above the
/// delivering thread's (at most 19), whose own stays as it was.
#[test]
fn workers_decode_at_a_lower_priority_than_delivery() {
    use std::sync::{Arc, Mutex};
    // Every return a TIP and a cycle count per packet: over 2 KB, so
    // several PSBs and chunks.
    let cfg = Config {
        psb_period: 0,
        noretcomp: true,
        cyc: true,
        ..Config::default()
    };
    let (p, _, out) = generate(&cfg);
    let dir = tempfile::tempdir().unwrap();
    write_whole(dir.path(), &cfg, &p, &out);
    let nice = || rustix::process::getpriority_process(None).unwrap();
    let base = nice();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let opts = DecodeOptions {
        progress: Some(ProgressCallback::new(move |_, _| {
            s2.lock().unwrap().push(nice())
        })),
        chunking: ptdec::decode::Chunking::Bytes(1),
        jobs: 2,
        ..DecodeOptions::default()
    };
    let (_, stats, _) = run_decode(dir.path(), &opts);
    let seen = seen.lock().unwrap();
    assert!(stats.chunks > 1, "{stats:?}");
    assert_eq!(seen.len() as u64, stats.chunks);
    assert!(
        seen.iter().all(|&n| n == (base + 5).min(19)),
        "base {base}: {seen:?}"
    );
    assert_eq!(nice(), base);
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
    let cycles: Vec<u64> = ops.iter().filter_map(|o| o.stamp().cycles.get()).collect();
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
    write_whole(dir.path(), &cfg, &p, &out);
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
/// lost (one LostData gap); without it, libipt trips over the hole (a decode
/// error) and resynchronizes at the next PSB. Either way what follows
/// decodes exactly, for any chunk size and either decoder.
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
    // Whatever the chunk size (a chunk at every PSB; a chunk from the
    // loss to the first PSB after it would decode nothing), with either
    // decoder (the fast decoder gives every chunk of this trace to
    // libipt, in parts: its image file is not mapped).
    let runs = [true, false].into_iter().flat_map(|flagged| {
        [DecoderKind::Libipt, DecoderKind::Fast]
            .into_iter()
            .flat_map(move |d| [1, 2100, 32 << 10].map(|c| (flagged, d, c)))
    });
    for (flagged, decoder, chunk) in runs {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = t.bytes.split_at(cut);
        write_trace(
            dir.path(),
            &cfg,
            &p,
            &Aux {
                chunks: vec![(0, a), (cut as u64, b)],
                truncated_at: flagged.then_some(cut as u64),
            },
        );
        let opts = DecodeOptions {
            chunking: ptdec::decode::Chunking::Bytes(chunk),
            decoder,
            ..DecodeOptions::default()
        };
        let (c, stats, _) = run_decode(dir.path(), &opts);
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
            // One loss, one gap: the segment before the loss ends with
            // it; the segment after starts with one for its first task,
            // dropped as the same loss where that task is the one the
            // gap before is in (here: the only one).
            assert_eq!(
                (stats.lost_data, gaps.len()),
                (1, 1),
                "{decoder:?}, chunks of {chunk}: {gaps:?}"
            );
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
        // Decoding resumed after the hole: at a PSB or at the error.
        assert!(stats.syncs + stats.resyncs >= 2, "{stats:?}");
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
    write_whole(dir.path(), &cfg, &p, &out);
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
            sample_id: sample_id(opid, otid, t),
        });
        extra.push(PEvent {
            misc: 0,
            record: Record::SwitchCpuWide {
                next_prev_pid: opid,
                next_prev_tid: otid,
            },
            sample_id: sample_id(npid, ntid, t + 1),
        });
    }
    let dir = tempfile::tempdir().unwrap();
    testkit::write_trace(
        dir.path(),
        &cfg,
        &p,
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
    write_whole(dir.path(), &cfg, &p, &out);
    std::fs::remove_file(dir.path().join("sysroot/usr/bin/prog")).unwrap();
    let (c, stats, images) = run_decode(dir.path(), &DecodeOptions::default());
    // libipt stops at each point it resynchronizes at; they make one gap.
    // libipt 2.1.2 has no resync: one stop, then nothing until the next PSB.
    assert_eq!(stats.no_image, 1, "{stats:?}");
    if ipt::version() >= (2, 2, 0) {
        assert_eq!(stats.errors.get("Nomap"), Some(&stats.resyncs), "{stats:?}");
    } else {
        assert_eq!(
            (stats.errors.get("Nomap"), stats.resyncs),
            (Some(&1), 0),
            "{stats:?}"
        );
    }
    assert_eq!(stats.insns, 0);
    let no_image_gaps = c.ops[&(PID, TID)]
        .iter()
        .filter(|o| {
            matches!(
                o,
                Op::Gap {
                    kind: GapKind::NoImage { .. },
                    ..
                }
            )
        })
        .count();
    assert_eq!(no_image_gaps, 1);
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

/// Issue 44: a copy of a trace cut inside its AUXTRACE record's trace data
/// (as a full disk or a killed copy leaves it) decodes the bytes present,
/// with a warning, where the file was before read as holding no trace.
#[test]
fn a_file_cut_inside_its_trace_data_decodes_the_bytes_present() {
    let cfg = Config::default();
    let (p, _events, out) = generate(&cfg);
    let tmp = tempfile::tempdir().unwrap();
    let full = tmp.path().join("full");
    std::fs::create_dir(&full).unwrap();
    write_whole(&full, &cfg, &p, &out);
    let bytes = std::fs::read(full.join("data")).unwrap();
    let file = sideband::file::PerfFile::parse(&bytes).unwrap();
    let aux = file
        .raw_records()
        .find(|r| r.header.kind == sideband::record::kind::AUXTRACE)
        .unwrap();
    let (all, _, _) = run_decode(&full, &DecodeOptions::default());
    let all = &all.ops[&(PID, TID)];
    for keep in [out.bytes.len() / 3, out.bytes.len() * 2 / 3] {
        let cut = tmp.path().join(format!("cut{keep}"));
        std::fs::create_dir(&cut).unwrap();
        write_whole(&cut, &cfg, &p, &out);
        let end = aux.offset as usize + aux.bytes.len() + keep;
        std::fs::write(cut.join("data"), &bytes[..end]).unwrap();
        let trace = Trace::open(&cut).unwrap();
        assert!(
            trace
                .warnings
                .iter()
                .any(|w| w.contains(&format!("its {keep} bytes present are decoded"))),
            "{:?}",
            trace.warnings
        );
        let (got, stats, _) = run_decode(&cut, &DecodeOptions::default());
        let got = &got.ops[&(PID, TID)];
        // What was decoded is what the whole trace has up to there; the cut
        // ends it (a last op that may differ: End where the bytes stop).
        let calls = got.iter().filter(|o| matches!(o, Op::Call { .. })).count();
        assert!(calls > 5, "cut at {keep}: {calls} calls");
        let n = got.len() - 1;
        assert_eq!(got[..n], all[..n], "cut at {keep}");
        assert!(stats.insns > 0);
    }
}
