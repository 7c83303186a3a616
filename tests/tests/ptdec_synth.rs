//! `ptdec` end to end on a synthesized trace: a small program assembled with
//! iced-x86 (nested calls, a syscall inside a function, recursion, a tail
//! call, exit), its control flow emulated into ptsim's events, turned into
//! Intel PT by ptsim's packet generator and written as a trace dir with a
//! JIT map naming the functions. The FTF that comes out must hold exactly
//! the slices that the emulated execution implies (computed here from the
//! events, independently of the decoder), must be read by the `fxt` Python
//! package as our reader reads it, and its text dump must match the golden
//! file `decoder/tests/golden/synth.txt` (rewritten with `UPDATE_EXPECT=1`,
//! the one variable for every golden file of the workspace).

mod common;

use std::path::Path;

use ftf::read::{EventKind, RecordKind, Value};
use iced_x86::code_asm::*;
use iced_x86::BlockEncoderOptions;
use ptdec::decode::DecodeOptions;
use ptdec::emit::{EmitOptions, Target, TimeAxis};
use ptdec::images::{ImageStore, SearchPath};
use ptdec::input::Trace;
use ptdec::pipeline::Report;
use ptdec::symbols::SymbolCache;
use ptsim::model::{Event, InsnClass};
use ptsim::pt::{Config, Generator};
use ptsim::testkit::{self, Aux, Program, Setup, Thread, BASE};

const PID: u32 = 4242;
const TID: u32 = 4242;

fn assemble() -> Program {
    let mut a = CodeAssembler::new(64).unwrap();
    let mut main = a.create_label();
    let mut fa = a.create_label();
    let mut fb = a.create_label();
    let mut rec = a.create_label();
    let mut rec_end = a.create_label();
    let mut t = a.create_label();
    let mut c = a.create_label();
    let mut end = a.create_label();

    a.set_label(&mut main).unwrap();
    a.call(fa).unwrap();
    a.mov(ebx, 3).unwrap();
    a.call(rec).unwrap();
    a.call(t).unwrap();
    a.nop().unwrap();
    a.syscall().unwrap(); // exit
    a.hlt().unwrap();

    a.set_label(&mut fa).unwrap();
    a.call(fb).unwrap();
    a.syscall().unwrap(); // a syscall that returns
    a.nop().unwrap();
    a.ret().unwrap();

    a.set_label(&mut fb).unwrap();
    a.nop().unwrap();
    a.nop().unwrap();
    a.ret().unwrap();

    a.set_label(&mut rec).unwrap();
    a.dec(ebx).unwrap();
    a.je(rec_end).unwrap();
    a.call(rec).unwrap();
    a.set_label(&mut rec_end).unwrap();
    a.ret().unwrap();

    a.set_label(&mut t).unwrap();
    a.nop().unwrap();
    a.jmp(c).unwrap(); // tail call

    a.set_label(&mut c).unwrap();
    a.nop().unwrap();
    a.ret().unwrap();
    a.set_label(&mut end).unwrap();
    a.nop().unwrap();

    let res = a
        .assemble_options(BASE, BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS)
        .unwrap();
    let ip = |l: &CodeLabel| res.label_ip(l).unwrap() - BASE;
    let labels = [
        (ip(&main), "main"),
        (ip(&fa), "a"),
        (ip(&fb), "b"),
        (ip(&rec), "rec"),
        (ip(&t), "t"),
        (ip(&c), "c"),
        (ip(&end), ""),
    ];
    Program::new(res.inner.code_buffer, BASE).with_funcs(&labels)
}

/// The program's control flow as ptsim's engine would report it: one event
/// per retired instruction; a syscall costs 100,000 cycles of kernel time.
fn execute(p: &Program) -> Vec<Event> {
    testkit::execute(p, &Thread::new(PID, TID))
}

/// What the FTF must show, from the events alone: (depth, name, first
/// instruction index, end index), where a call's slice runs from the
/// instruction count after the call to the count after its return.
fn truth(p: &Program, events: &[Event]) -> Vec<(i32, String, u64, u64)> {
    let mut out = Vec::new();
    let mut stack: Vec<(&str, u64)> = vec![("main", 0)];
    let mut n = 0u64;
    for e in events {
        let Event::Insn(e) = e else { continue };
        n += 1;
        match e.class {
            InsnClass::DirectCall => stack.push((p.func_at(e.next_ip).unwrap(), n)),
            InsnClass::Return => {
                let (name, start) = stack.pop().unwrap();
                out.push((stack.len() as i32, name.to_string(), start, n));
            }
            InsnClass::DirectJump => {
                if let Some(f) = p.func_at(e.next_ip) {
                    let (name, start) = stack.pop().unwrap();
                    out.push((stack.len() as i32, name.to_string(), start, n));
                    stack.push((f, n));
                }
            }
            InsnClass::FarTransfer => {
                out.push((stack.len() as i32, "[kernel]".into(), n, n));
            }
            _ => {}
        }
    }
    while let Some((name, start)) = stack.pop() {
        out.push((stack.len() as i32, name.to_string(), start, n));
    }
    out.sort_by_key(|s| (s.2, s.0));
    out
}

/// Writes the trace dir (the code as `dir/sysroot/usr/bin/prog`, a raw file,
/// no ELF: names come from `dir/images/perf-PID.map`). perf time == TSC.
fn write_trace(dir: &Path, cfg: &Config, p: &Program, aux: &[u8]) {
    testkit::write_trace(dir, cfg, p, &Aux::whole(aux), &Setup::task(PID, TID));
    let map: String = p
        .funcs
        .iter()
        .map(|(a, s, n)| format!("{:x} {s:x} {n}\n", p.base + a))
        .collect();
    std::fs::create_dir_all(dir.join("images")).unwrap();
    std::fs::write(dir.join(format!("images/perf-{PID}.map")), map).unwrap();
}

/// Synthesizes the trace with `cfg` and decodes it with `emit` into memory.
fn decode_synth(cfg: Config, emit: EmitOptions) -> (Program, Vec<Event>, Report) {
    let (p, events, report) = try_decode_synth(cfg, emit);
    (p, events, report.unwrap())
}

fn try_decode_synth(
    cfg: Config,
    emit: EmitOptions,
) -> (
    Program,
    Vec<Event>,
    Result<Report, ptdec::pipeline::RunError>,
) {
    let p = assemble();
    let events = execute(&p);
    let out = Generator::run(cfg.clone(), &events).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_trace(dir.path(), &cfg, &p, &out.bytes);
    let trace = Trace::open(dir.path()).unwrap();
    let images = ImageStore::new(SearchPath {
        live_fs: false,
        buildid_dir: None,
        ..SearchPath::for_trace(dir.path())
    });
    let symbols = SymbolCache::for_search(images.search());
    let input = ptdec::pipeline::Input::Trace {
        trace: &trace,
        images: &images,
        symbols: &symbols,
    };
    let (decode, stacks) = (DecodeOptions::default(), Default::default());
    let report = common::ftf_run(input, decode, stacks, emit, Target::Memory);
    (p, events, report)
}

fn str_arg<'a>(args: &'a [ftf::read::Arg], name: &str) -> Option<&'a Value> {
    args.iter().find(|a| a.name == name).map(|a| &a.value)
}

/// The FTF's slices as (depth, name, start, end) on the instruction axis,
/// depth recomputed from nesting.
fn slices(bytes: &[u8]) -> Vec<(i32, String, u64, u64)> {
    let mut v: Vec<(String, u64, u64)> = Vec::new();
    for r in ftf::read::parse(bytes).unwrap() {
        if let RecordKind::Event(e) = r.kind {
            if let EventKind::DurationComplete { end } = e.kind {
                assert_eq!(
                    (e.thread.pid, e.thread.tid),
                    (u64::from(PID), u64::from(TID))
                );
                v.push((e.name, e.ts, end));
            }
        }
    }
    // Parents come first on ties in file order, so a stable sort by start
    // keeps them first.
    let mut sorted = v.clone();
    sorted.sort_by_key(|s| s.1);
    let mut out = Vec::new();
    let mut open: Vec<(u64, u64)> = Vec::new();
    for (name, s, e) in sorted {
        while open.last().is_some_and(|&(os, oe)| !(os <= s && e <= oe)) {
            open.pop();
        }
        out.push((open.len() as i32, name, s, e));
        open.push((s, e));
    }
    out.sort_by_key(|s| (s.2, s.0));
    out
}

#[test]
fn slices_match_the_emulated_execution() {
    let (p, events, report) = decode_synth(
        Config::default(),
        EmitOptions {
            axis: TimeAxis::Instructions,
            ..EmitOptions::default()
        },
    );
    let want = truth(&p, &events);
    let got = slices(&report.written[0].bytes);
    assert_eq!(got, want, "\ngot  {got:#?}\nwant {want:#?}");
    assert!(report.missing.is_empty(), "{:?}", report.missing);
    let s = &report.stack;
    assert_eq!((s.calls, s.returns, s.tail_calls, s.gaps), (6, 6, 1, 0));
    assert_eq!((s.retroactive_frames, s.skipped_frames), (0, 0));
    assert_eq!(report.threads[&(PID, TID)].name, "prog");
}

#[test]
fn ns_axis_slices_nest_and_carry_their_args() {
    let (_, _, report) = decode_synth(Config::default(), EmitOptions::default());
    let records = ftf::read::parse(&report.written[0].bytes).unwrap();
    let mut calls = 0;
    for r in &records {
        let RecordKind::Event(e) = &r.kind else {
            continue;
        };
        let EventKind::DurationComplete { end } = e.kind else {
            continue;
        };
        assert!(e.ts <= end, "{e:?}");
        match e.category.as_str() {
            "call" => {
                calls += 1;
                assert!(
                    str_arg(&e.args, "insns").and_then(Value::as_u64).is_some(),
                    "{e:?}"
                );
                assert!(
                    matches!(str_arg(&e.args, "addr"), Some(Value::Pointer(_))),
                    "{e:?}"
                );
                assert!(
                    matches!(str_arg(&e.args, "module"), Some(Value::Str(m)) if m == "perf-4242.map"),
                    "{e:?}"
                );
                assert!(str_arg(&e.args, "cycles").is_none(), "no CYC: {e:?}");
            }
            "untraced" => assert_eq!(e.name, "[kernel]"),
            other => panic!("unexpected category {other}: {e:?}"),
        }
    }
    assert_eq!(calls, 8); // main, a, b, rec ×3, t, c
    let kobj: Vec<_> = records
        .iter()
        .filter_map(|r| match &r.kind {
            RecordKind::KernelObject(k) => Some((k.obj_type, k.koid, k.name.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        kobj,
        [(1, 4242, "prog".to_string()), (2, 4242, "prog".to_string())]
    );
    // The syscall inside a: untraced time of about 100,000 TSC ticks (perf time == TSC).
    let kernel = records.iter().find_map(|r| match &r.kind {
        RecordKind::Event(e) if e.name == "[kernel]" => match e.kind {
            EventKind::DurationComplete { end } if end > e.ts => Some(end - e.ts),
            _ => None,
        },
        _ => None,
    });
    assert!(
        kernel.is_some_and(|d| (90_000..=110_000).contains(&d)),
        "{kernel:?}"
    );
}

#[test]
fn cycles_axis_with_cyc_packets() {
    let (p, events, report) = decode_synth(
        Config {
            cyc: true,
            mtc_period: 0,
            ..Config::default()
        },
        EmitOptions {
            axis: TimeAxis::Cycles,
            ..EmitOptions::default()
        },
    );
    // Cycle stamps are coarser than instructions (many ops share one), so
    // zero-length slices make the nesting ambiguous: check the slices and
    // that each one's `cycles` arg is its length on this axis.
    let mut names = Vec::new();
    for r in ftf::read::parse(&report.written[0].bytes).unwrap() {
        let RecordKind::Event(e) = r.kind else {
            continue;
        };
        let EventKind::DurationComplete { end } = e.kind else {
            continue;
        };
        if e.category == "call" {
            assert_eq!(
                str_arg(&e.args, "cycles").and_then(Value::as_u64),
                Some(end - e.ts),
                "{e:?}"
            );
        }
        names.push(e.name);
    }
    let mut want: Vec<_> = truth(&p, &events).into_iter().map(|s| s.1).collect();
    names.sort();
    want.sort();
    assert_eq!(names, want);
    let dump = ftf::read::dump(&report.written[0].bytes).unwrap();
    assert!(dump.contains("\"cycles\": u32("), "{dump}");
}

#[test]
fn golden_dump() {
    let (_, _, report) = decode_synth(Config::default(), EmitOptions::default());
    let dump = ftf::read::dump(&report.written[0].bytes).unwrap();
    let path = pt_tests::workspace_root().join("decoder/tests/golden/synth.txt");
    expect_test::expect_file![path].assert_eq(&dump);
}

#[test]
fn fxt_reads_the_decoded_trace() {
    let test = "fxt_reads_the_decoded_trace";
    let Some(python) = pt_tests::python_with_fxt(test) else {
        return;
    };
    let (_, _, report) = decode_synth(
        Config {
            async_every: Some(7),
            ..Config::default()
        },
        EmitOptions::default(),
    );
    let bytes = &report.written[0].bytes;
    common::fxt_agrees(test, &python, bytes);
    let theirs = common::our_view(bytes);
    assert!(
        theirs.contains("DurationCompleteEventRecord 4242 4242 call rec"),
        "{theirs}"
    );
}

/// Perfetto's importer shows every slice and instant ptdec wrote, on both
/// axes, with syscalls and asynchronous exits (untraced slices) inside
/// calls: no import error, each call at the depth ptdec's stack gave it,
/// the thread and process named as in the summary.
#[test]
fn perfetto_shows_every_slice_where_ptdec_put_it() {
    let test = "perfetto_shows_every_slice_where_ptdec_put_it";
    for axis in [TimeAxis::Ns, TimeAxis::Instructions] {
        for async_every in [None, Some(7)] {
            let (_, _, report) = decode_synth(
                Config {
                    async_every,
                    ..Config::default()
                },
                EmitOptions {
                    axis,
                    record: true,
                    ..EmitOptions::default()
                },
            );
            assert!(report.written[0].events > 8, "{axis:?}");
            common::perfetto_agrees_with_report(
                &format!("{test} {axis:?} {async_every:?}"),
                &report,
            );
        }
    }
}

/// A trace without timing packets (no TSC, no MTC) gives every slice the
/// same time. Without `--time-axis` ptdec writes it on the instruction
/// axis and says so; with `ns` asked for, it refuses and names
/// `--time-axis instructions`. Before, it wrote every slice at time 0 and
/// Perfetto nested them all inside each other.
#[test]
fn a_trace_without_timing_packets_is_written_on_the_instruction_axis() {
    let test = "a_trace_without_timing_packets_is_written_on_the_instruction_axis";
    let timeless = || Config {
        tsc: false,
        mtc: false,
        ..Config::default()
    };
    let (_, _, report) = decode_synth(
        timeless(),
        EmitOptions {
            axis_auto: true,
            record: true,
            ..EmitOptions::default()
        },
    );
    assert!(report.emit.no_time, "{:?}", report.emit);
    assert_eq!(report.emit.axis, TimeAxis::Instructions);
    let summary = ptdec::summary::render(&report);
    assert!(
        summary.contains("time axis     instructions: the trace has no timing packets"),
        "{summary}"
    );
    // Decoding a perf.data trace without time finds no image at time 0 (the
    // MMAP records come later): a decoder limit, not the emitter's; what it
    // writes Perfetto shows. decoder/tests/raw.rs checks the slices.
    common::perfetto_agrees_with_report(test, &report);

    let (_, _, refused) = try_decode_synth(timeless(), EmitOptions::default());
    let err = refused.expect_err("ns axis on a trace without time");
    let msg = err.to_string();
    assert!(msg.contains("--time-axis instructions"), "{msg}");

    // A trace with time keeps the ns axis when none was chosen.
    let (_, _, timed) = decode_synth(
        Config::default(),
        EmitOptions {
            axis_auto: true,
            ..EmitOptions::default()
        },
    );
    assert!(!timed.emit.no_time);
    assert_eq!(timed.emit.axis, TimeAxis::Ns);
}
