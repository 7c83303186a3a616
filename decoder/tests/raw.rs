//! `ptdec raw` end to end: a small program assembled with iced-x86, its
//! control flow emulated into ptsim's events and turned into raw Intel PT
//! by ptsim's packet generator (the bytes of one trace buffer, as LLDB,
//! simple-pt or kAFL write them), decoded by the `ptdec` binary with the
//! code given as an ELF file (built here, with symbols), as the same ELF
//! loaded at another base, and as raw bytes. The FTF must hold exactly the
//! slices the emulated execution implies; bad arguments fail cleanly.

use std::path::Path;
use std::process::{Command, Output};

use ftf::read::{EventKind, RecordKind};
use iced_x86::code_asm::*;
use iced_x86::BlockEncoderOptions;
use ptsim::model::{Event, InsnClass};
use ptsim::pt::{Config, Generator};
use ptsim::testkit::{self, Program, Thread, BASE};

fn ptdec() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ptdec"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Nested calls, a recursion, a 2-byte indirect call, a syscall that
/// returns and an exit syscall.
fn assemble() -> Program {
    let mut a = CodeAssembler::new(64).unwrap();
    let mut main = a.create_label();
    let mut fa = a.create_label();
    let mut fb = a.create_label();
    let mut rec = a.create_label();
    let mut rec_end = a.create_label();
    let mut c = a.create_label();
    let mut end = a.create_label();

    a.set_label(&mut main).unwrap();
    a.call(fa).unwrap();
    a.mov(ebx, 3).unwrap();
    a.call(rec).unwrap();
    a.lea(rax, ptr(c)).unwrap();
    a.call(rax).unwrap();
    a.nop().unwrap();
    a.syscall().unwrap(); // exit
    a.hlt().unwrap();

    a.set_label(&mut fa).unwrap();
    a.call(fb).unwrap();
    a.syscall().unwrap();
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
        (ip(&c), "c"),
        (ip(&end), ""),
    ];
    Program::new(res.inner.code_buffer, BASE).with_funcs(&labels)
}

/// The program's control flow as ptsim's engine reports it.
fn execute(p: &Program) -> Vec<Event> {
    testkit::execute(p, &Thread::new(1, 1))
}

/// What the FTF must show on the instruction axis: (depth, name, start,
/// end), a call running from the count after the call to the count after
/// its return; `name(addr)` names a function by its entry.
fn truth(events: &[Event], name: &dyn Fn(u64) -> String) -> Vec<(i32, String, u64, u64)> {
    let mut out = Vec::new();
    let mut stack: Vec<(String, u64)> = vec![(name(BASE), 0)];
    let mut n = 0u64;
    for e in events {
        let Event::Insn(e) = e else { continue };
        n += 1;
        match e.class {
            InsnClass::DirectCall | InsnClass::IndirectCall => stack.push((name(e.next_ip), n)),
            InsnClass::Return => {
                let (f, start) = stack.pop().unwrap();
                out.push((stack.len() as i32, f, start, n));
            }
            InsnClass::FarTransfer => out.push((stack.len() as i32, "[kernel]".into(), n, n)),
            _ => {}
        }
    }
    while let Some((f, start)) = stack.pop() {
        out.push((stack.len() as i32, f, start, n));
    }
    out.sort_by_key(|s| (s.2, s.0));
    out
}

/// The FTF's duration slices as (depth, name, start, end), depth from nesting.
fn slices(ftf_bytes: &[u8]) -> Vec<(i32, String, u64, u64)> {
    let mut v: Vec<(String, u64, u64)> = Vec::new();
    for r in ftf::read::parse(ftf_bytes).unwrap() {
        if let RecordKind::Event(e) = r.kind {
            if let EventKind::DurationComplete { end } = e.kind {
                v.push((e.name, e.ts, end));
            }
        }
    }
    // Parents come first on ties in file order: a stable sort keeps them first.
    v.sort_by_key(|s| s.1);
    let mut out = Vec::new();
    let mut open: Vec<(u64, u64)> = Vec::new();
    for (name, s, e) in v {
        while open.last().is_some_and(|&(os, oe)| !(os <= s && e <= oe)) {
            open.pop();
        }
        out.push((open.len() as i32, name, s, e));
        open.push((s, e));
    }
    out.sort_by_key(|s| (s.2, s.0));
    out
}

/// An ELF64 section header: (name, type, flags, addr, offset, size, link,
/// info, align, entsize).
type Shdr = (u32, u32, u64, u64, u64, u64, u32, u32, u64, u64);

/// A minimal ELF64 file: one PT_LOAD (R+X) holding `code` at `vaddr`
/// (file offset 0x1000), a .text section and a symbol table of `funcs`
/// (offset from `vaddr`, size, name).
fn elf64(e_type: u16, code: &[u8], vaddr: u64, funcs: &[(u64, u64, &str)]) -> Vec<u8> {
    fn put(v: &mut Vec<u8>, bytes: &[u8]) {
        v.extend_from_slice(bytes);
    }
    let text_off = 0x1000u64;
    let mut strtab = vec![0u8];
    let mut symtab = vec![0u8; 24];
    for &(off, size, name) in funcs {
        let st_name = strtab.len() as u32;
        strtab.extend_from_slice(name.as_bytes());
        strtab.push(0);
        put(&mut symtab, &st_name.to_le_bytes());
        put(&mut symtab, &[0x12, 0]); // STB_GLOBAL | STT_FUNC, default visibility
        put(&mut symtab, &1u16.to_le_bytes()); // .text
        put(&mut symtab, &(vaddr + off).to_le_bytes());
        put(&mut symtab, &size.to_le_bytes());
    }
    let shstrtab = b"\0.text\0.symtab\0.strtab\0.shstrtab\0";
    let symtab_off = text_off + code.len() as u64;
    let strtab_off = symtab_off + symtab.len() as u64;
    let shstrtab_off = strtab_off + strtab.len() as u64;
    let shoff = (shstrtab_off + shstrtab.len() as u64 + 7) & !7;

    let mut f = Vec::new();
    put(&mut f, b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    put(&mut f, &e_type.to_le_bytes());
    put(&mut f, &62u16.to_le_bytes()); // EM_X86_64
    put(&mut f, &1u32.to_le_bytes());
    put(&mut f, &vaddr.to_le_bytes()); // e_entry
    put(&mut f, &64u64.to_le_bytes()); // e_phoff
    put(&mut f, &shoff.to_le_bytes());
    put(&mut f, &0u32.to_le_bytes());
    for h in [64u16, 56, 1, 64, 5, 4] {
        put(&mut f, &h.to_le_bytes()); // ehsize, phentsize, phnum, shentsize, shnum, shstrndx
    }
    // PT_LOAD, R+X.
    put(&mut f, &1u32.to_le_bytes());
    put(&mut f, &5u32.to_le_bytes());
    for x in [
        text_off,
        vaddr,
        vaddr,
        code.len() as u64,
        code.len() as u64,
        0x1000,
    ] {
        put(&mut f, &x.to_le_bytes());
    }
    f.resize(text_off as usize, 0);
    put(&mut f, code);
    put(&mut f, &symtab);
    put(&mut f, &strtab);
    put(&mut f, shstrtab);
    f.resize(shoff as usize, 0);
    let sections: [Shdr; 5] = [
        (0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        (1, 1, 6, vaddr, text_off, code.len() as u64, 0, 0, 16, 0),
        (7, 2, 0, 0, symtab_off, symtab.len() as u64, 3, 1, 8, 24),
        (15, 3, 0, 0, strtab_off, strtab.len() as u64, 0, 0, 1, 0),
        (23, 3, 0, 0, shstrtab_off, shstrtab.len() as u64, 0, 0, 1, 0),
    ];
    for (name, ty, flags, addr, off, size, link, info, align, entsize) in sections {
        put(&mut f, &name.to_le_bytes());
        put(&mut f, &ty.to_le_bytes());
        for x in [flags, addr, off, size] {
            put(&mut f, &x.to_le_bytes());
        }
        put(&mut f, &link.to_le_bytes());
        put(&mut f, &info.to_le_bytes());
        put(&mut f, &align.to_le_bytes());
        put(&mut f, &entsize.to_le_bytes());
    }
    f
}

/// The trace's timing options, as ptxed takes them.
fn timing_args(cfg: &Config) -> Vec<String> {
    let t = cfg.timing;
    [
        ("--mtc-freq", u64::from(cfg.mtc_period)),
        ("--nom-freq", u64::from(t.max_nonturbo_ratio)),
        ("--cpuid-0x15.eax", u64::from(t.tsc_ctc_ratio_d)),
        ("--cpuid-0x15.ebx", u64::from(t.tsc_ctc_ratio_n)),
    ]
    .iter()
    .flat_map(|(k, v)| [k.to_string(), v.to_string()])
    .collect()
}

struct Setup {
    dir: tempfile::TempDir,
    p: Program,
    events: Vec<Event>,
    cfg: Config,
}

impl Setup {
    fn new() -> Setup {
        Setup::with(Config::default())
    }

    fn with(cfg: Config) -> Setup {
        let p = assemble();
        let events = execute(&p);
        let out = Generator::run(cfg.clone(), &events).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("trace.pt"), &out.bytes).unwrap();
        Setup {
            dir,
            p,
            events,
            cfg,
        }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }

    fn run(&self, args: &[&str]) -> Output {
        ptdec()
            .arg("raw")
            .args(args)
            .args(timing_args(&self.cfg))
            .output()
            .unwrap()
    }

    /// Decodes with `code_args` and returns the slices on `axis`.
    fn decode(
        &self,
        code_args: &[&str],
        axis: &str,
        extra: &[&str],
    ) -> Vec<(i32, String, u64, u64)> {
        let out_path = self.path("out.ftf");
        let pt = self.path("trace.pt");
        let mut args = vec!["--pt", &pt, "--cpu", "6/85/4", "-o", &out_path];
        args.extend_from_slice(&["--time-axis", axis]);
        args.extend_from_slice(code_args);
        args.extend_from_slice(extra);
        let out = self.run(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(err.contains("ptdec: wrote"), "{err}");
        eprintln!("{err}");
        slices(&std::fs::read(&out_path).unwrap())
    }
}

#[test]
fn elf_with_symbols_gives_the_exact_call_tree() {
    let s = Setup::new();
    let funcs: Vec<_> = s.p.funcs.iter().map(|&(o, z, n)| (o, z, n)).collect();
    std::fs::write(s.path("prog"), elf64(2, &s.p.code, BASE, &funcs)).unwrap();
    let got = s.decode(&["--elf", &s.path("prog")], "instructions", &[]);
    let want = truth(&s.events, &|a| s.p.func_at(a).unwrap().to_string());
    assert_eq!(got, want, "\ngot  {got:#?}\nwant {want:#?}");
    // main, a, b, rec x3, c, two syscalls.
    assert_eq!(got.len(), 9, "{got:#?}");

    // The same code in a shared object linked at 0x1000, loaded at BASE.
    std::fs::write(s.path("prog.so"), elf64(3, &s.p.code, 0x1000, &funcs)).unwrap();
    let arg = format!("{}:{BASE:#x}", s.path("prog.so"));
    let got = s.decode(&["--elf", &arg], "instructions", &[]);
    assert_eq!(got, want);
}

/// `ptdec raw --format parquet`: the dataset's rows are the same exact
/// call tree, each row's level in its `parent_id` chain its depth, and
/// the `trace` table says its times are TSC ticks.
#[test]
fn the_dataset_of_raw_pt_is_the_exact_call_tree() {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int32Type, Int64Type};
    use arrow_array::Array;
    let s = Setup::new();
    let funcs: Vec<_> = s.p.funcs.iter().map(|&(o, z, n)| (o, z, n)).collect();
    std::fs::write(s.path("prog"), elf64(2, &s.p.code, BASE, &funcs)).unwrap();
    let (pt, folder, prog) = (s.path("trace.pt"), s.path("dataset"), s.path("prog"));
    let args = [
        "--pt", &pt, "--cpu", "6/85/4", "--elf", &prog, "-o", &folder, "--format", "parquet",
    ];
    let out = s.run(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let read = |table: &str| {
        let path = Path::new(&folder)
            .join(table)
            .join("trace=trace.pt/part-0.parquet");
        let file = std::fs::File::open(path).unwrap();
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap()
            .map(|b| b.unwrap())
            .collect::<Vec<_>>()
    };
    let mut rows = Vec::new();
    for b in read("calls") {
        let col = |n: &str| b.column_by_name(n).unwrap().clone();
        let i64s = |n: &str| col(n).as_primitive::<Int64Type>().clone();
        let f = col("function").as_dictionary::<Int32Type>().clone();
        let names = f.values().as_string::<i32>().clone();
        let (id, parent, start, insns) = (
            i64s("call_id"),
            i64s("parent_id"),
            i64s("start_insn"),
            i64s("insns"),
        );
        for i in 0..b.num_rows() {
            rows.push((
                id.value(i),
                (!parent.is_null(i)).then(|| parent.value(i)),
                names.value(f.keys().value(i) as usize).to_string(),
                start.value(i) as u64,
                (start.value(i) + insns.value(i)) as u64,
            ));
        }
    }
    let level = |r: &(i64, Option<i64>, String, u64, u64)| {
        let (mut l, mut parent) = (0, r.1);
        while let Some(p) = parent {
            parent = rows
                .iter()
                .find(|x| x.0 == p)
                .expect("the parent is a row")
                .1;
            l += 1;
        }
        l
    };
    let mut got: Vec<(i32, String, u64, u64)> = rows
        .iter()
        .map(|r| (level(r), r.2.clone(), r.3, r.4))
        .collect();
    got.sort_by_key(|s| (s.2, s.0));
    let want = truth(&s.events, &|a| s.p.func_at(a).unwrap().to_string());
    assert_eq!(got, want, "\ngot  {got:#?}\nwant {want:#?}");
    let trace = &read("trace")[0];
    let unit = trace
        .column_by_name("time_unit")
        .unwrap()
        .as_string::<i32>()
        .value(0)
        .to_string();
    assert_eq!(unit, "tsc");
}

#[test]
fn raw_bytes_name_functions_by_file_offset() {
    let s = Setup::new();
    // The code sits 0x40 bytes into the file; give exactly its range.
    let mut file = vec![0xccu8; 0x40];
    file.extend_from_slice(&s.p.code);
    file.extend_from_slice(&[0xcc; 0x10]);
    std::fs::write(s.path("dump.bin"), &file).unwrap();
    let arg = format!(
        "{}:0x40-{:#x}:{BASE:#x}",
        s.path("dump.bin"),
        0x40 + s.p.code.len()
    );
    let got = s.decode(&["--raw", &arg], "instructions", &[]);
    let want = truth(&s.events, &|a| format!("dump.bin+{:#x}", a - BASE + 0x40));
    assert_eq!(got, want, "\ngot  {got:#?}\nwant {want:#?}");
}

#[test]
fn times_are_tsc_ticks_or_ns_from_the_tsc_frequency() {
    let s = Setup::new();
    let code = format!("{}:{BASE:#x}", s.path("code.bin"));
    std::fs::write(s.path("code.bin"), &s.p.code).unwrap();
    let ticks = s.decode(&["--raw", &code], "ns", &[]);
    let ns = s.decode(&["--raw", &code], "ns", &["--tsc-freq", "500MHz"]);
    let main = |v: &[(i32, String, u64, u64)]| {
        v.iter()
            .find(|x| x.0 == 0 && x.1 == "code.bin+0x0")
            .map(|x| (x.2, x.3))
            .unwrap()
    };
    // One core cycle is one TSC tick here; the program runs ~200,000 cycles
    // (two syscalls of 100,000), all inside the trace.
    let (a, b) = main(&ticks);
    assert_eq!(a, 0, "time 0 is the first op");
    assert!((100_000..=250_000).contains(&b), "{ticks:#?}");
    // At 500 MHz a tick is 2 ns.
    let (c, d) = main(&ns);
    assert_eq!(c, 0);
    assert!(d.abs_diff(2 * b) <= 2, "{b} ticks, {d} ns");
}

/// Raw PT without timing packets (no TSC, no MTC): every op has the same
/// time. Without --time-axis the output is on the instruction axis, the
/// summary says why, and Perfetto loads it without an error (`--check`);
/// `--time-axis ns` is refused with a message naming the instruction axis.
/// Before, the default wrote every slice at time 0.
#[test]
fn a_trace_without_timing_packets_defaults_to_instructions() {
    let test = "a_trace_without_timing_packets_defaults_to_instructions";
    let s = Setup::with(Config {
        tsc: false,
        mtc: false,
        ..Config::default()
    });
    let code = format!("{}:{BASE:#x}", s.path("code.bin"));
    std::fs::write(s.path("code.bin"), &s.p.code).unwrap();
    let (out_path, pt) = (s.path("out.ftf"), s.path("trace.pt"));
    let mut args = vec!["--pt", &pt, "--raw", &code, "-o", &out_path];
    let tp = pt_tests::trace_processor(test);
    let tp_path = tp.as_ref().map(|p| p.to_string_lossy().into_owned());
    if let Some(tp) = &tp_path {
        args.extend_from_slice(&["--check", "--trace-processor", tp]);
    }
    let out = s.run(&args);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("time axis     instructions: the trace has no timing packets"),
        "{err}"
    );
    assert!(!err.contains("every slice is at time 0"), "{err}");
    if tp.is_some() {
        assert!(err.contains("no import errors or data loss"), "{err}");
    }
    let got = slices(&std::fs::read(&out_path).unwrap());
    let want = truth(&s.events, &|a| format!("code.bin+{:#x}", a - BASE));
    assert_eq!(got, want, "\ngot  {got:#?}\nwant {want:#?}");

    args.extend_from_slice(&["--time-axis", "ns"]);
    let out = s.run(&args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("use --time-axis instructions"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_arguments_fail_cleanly() {
    let s = Setup::new();
    std::fs::write(s.path("code.bin"), &s.p.code).unwrap();
    let pt = s.path("trace.pt");
    let code = format!("{}:{BASE:#x}", s.path("code.bin"));
    let out_path = s.path("out.ftf");
    let check = |args: &[&str], code: i32, want: &str| {
        let out = s.run(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: wanted {want:?} in {err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    // Usage errors (clap): exit 2.
    check(
        &["--pt", &pt, "--raw", &code, "--cpu", "6", "-o", &out_path],
        2,
        "FAMILY/MODEL[/STEPPING]",
    );
    let bad_range = format!("{}:0x20-0x10:0x1000", s.path("code.bin"));
    check(
        &["--pt", &pt, "--raw", &bad_range, "-o", &out_path],
        2,
        "bad range `0x20-0x10`",
    );
    let no_addr = s.path("code.bin");
    check(
        &["--pt", &pt, "--raw", &no_addr, "-o", &out_path],
        2,
        "FILE[:FROM[-TO]]:ADDR",
    );
    check(&["--pt", &pt, "-o", &out_path], 2, "--elf");
    check(
        &[
            "--pt",
            &pt,
            "--raw",
            &code,
            "--tsc-freq",
            "fast",
            "-o",
            &out_path,
        ],
        2,
        "not a frequency",
    );
    let filter = |opt: &'static str, v: &'static str| {
        let mut a = vec!["--pt", &pt, "--raw", &code, "-o", &out_path];
        a.extend([opt, v]);
        a
    };
    check(
        &filter("--filter:addr1_cfg", "3"),
        2,
        "ADDRn_CFG is 0 (off), 1 (filter) or 2 (stop)",
    );
    check(&filter("--filter:addr3_b", "0x1g"), 2, "is not an address");
    // A range whose first address is above its last: refused naming both
    // (it was decoded, exit 0, as if the range were there).
    let mut swapped = filter("--filter:addr2_cfg", "1");
    swapped.extend(["--filter:addr2_a", "0x2000", "--filter:addr2_b", "0x1fff"]);
    check(
        &swapped,
        1,
        "--filter:addr2_a 0x2000 is above --filter:addr2_b 0x1fff",
    );
    // Files that cannot be used: exit 1, naming the file.
    let missing = s.path("nope.pt");
    check(
        &["--pt", &missing, "--raw", &code, "-o", &out_path],
        1,
        "cannot read",
    );
    let beyond = format!("{}:0x0-0x100000:0x1000", s.path("code.bin"));
    check(
        &["--pt", &pt, "--raw", &beyond, "-o", &out_path],
        1,
        "outside the file",
    );
    check(
        &["--pt", &pt, "--elf", &s.path("code.bin"), "-o", &out_path],
        1,
        "not an ELF file",
    );
    assert!(!Path::new(&out_path).exists());
}

/// ptxed's `--pevent:*` options with input that cannot be used: a usage
/// error (exit 2) for a bad number, an error naming the option and the file
/// (exit 1) for a missing, cut or out-of-range `.sb` file and for a setting
/// that would apply to no file; never a panic. (Sideband that works is
/// compared with ptxed by libipt's own tests, `tests/ptt.rs`.)
#[test]
fn bad_sideband_fails_cleanly() {
    let s = Setup::new();
    std::fs::write(s.path("code.bin"), &s.p.code).unwrap();
    let pt = s.path("trace.pt");
    let code = format!("{}:{BASE:#x}", s.path("code.bin"));
    let out_path = s.path("out.ftf");
    // An ITRACE_START record (header: type 12, misc 0, size 16; pid, tid)
    // whose copy in `cut.sb` lacks its last 4 bytes.
    let mut rec = Vec::new();
    rec.extend(12u32.to_le_bytes());
    rec.extend(0u16.to_le_bytes());
    rec.extend(16u16.to_le_bytes());
    rec.extend(7u32.to_le_bytes());
    rec.extend(7u32.to_le_bytes());
    let good = s.path("good.sb");
    std::fs::write(&good, &rec).unwrap();
    let cut = s.path("cut.sb");
    std::fs::write(&cut, &rec[..12]).unwrap();
    let check = |extra: &[&str], code_want: i32, want: &[&str]| {
        let mut args = vec!["--pt", pt.as_str(), "--raw", code.as_str(), "-o", &out_path];
        args.extend(extra);
        let out = s.run(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code_want), "{extra:?}: {err}");
        for w in want {
            assert!(err.contains(w), "{extra:?}: wanted {w:?} in {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
    };
    let missing = s.path("nope.sb");
    check(
        &["--pevent:primary", &missing],
        1,
        &["--pevent:primary", "nope.sb", "cannot read"],
    );
    check(
        &["--pevent:secondary", &cut],
        1,
        &[
            "--pevent:secondary",
            "cut.sb",
            "bad perf_event record at offset 0x0",
        ],
    );
    let beyond = format!("{good}:0x0-0x100");
    check(
        &["--pevent:primary", &beyond],
        1,
        &["--pevent:primary", "good.sb", "outside the file"],
    );
    check(
        &["--pevent:primary", &good, "--pevent:sample-type", "0x4"],
        1,
        &["--pevent:sample-type is given after the last"],
    );
    check(
        &["--pevent:time-mult", "0", "--pevent:primary", &good],
        2,
        &["time_mult"],
    );
    check(
        &["--pevent:time-shift", "64", "--pevent:primary", &good],
        2,
        &["time_shift"],
    );
    check(
        &[
            "--pevent:time-zero",
            "0x1ffffffffffffffff",
            "--pevent:primary",
            &good,
        ],
        2,
        &["is not a number"],
    );
    check(
        &["--pevent:kernel-start", "kernel", "--pevent:primary", &good],
        2,
        &["is not an address"],
    );
    check(
        &["--pevent:sample-config", "7", "--pevent:primary", &good],
        2,
        &["IDENTIFIER:SAMPLE_TYPE"],
    );
    check(
        &["--pevent:sysroot", &good, "--pevent:primary", &good],
        1,
        &["--pevent:sysroot", "not a folder"],
    );
    // A --pevent:kcore that is missing or not ELF is named under that
    // option (the errors said `--elf`, which was not given).
    let kcore_missing = s.path("nope.kcore");
    for (kcore, want) in [
        (
            &kcore_missing,
            format!("ptdec: --pevent:kcore: cannot read {kcore_missing}: "),
        ),
        (
            &good,
            format!(
                "ptdec: --pevent:kcore {good}: not an ELF file; give the kcore that `perf \
                 record --kcore` copied (an ELF file), or the kernel's uncompressed vmlinux"
            ),
        ),
    ] {
        let extra = ["--pevent:kcore", kcore.as_str(), "--pevent:primary", &good];
        check(&extra, 1, &[&want]);
        let mut args = vec!["--pt", pt.as_str(), "--raw", code.as_str(), "-o", &out_path];
        args.extend(extra);
        let err = text(&s.run(&args).stderr);
        assert!(!err.contains("--elf"), "{err}");
    }
    // A FIFO (opened without a writer, its open waited for ever) or a
    // device (/dev/zero was read without end) as sideband or code is
    // refused by name; under `timeout`, so a hang fails rather than waits.
    let fifo = s.path("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let raw_fifo = format!("{fifo}:{BASE:#x}");
    for extra in [
        vec!["--pevent:primary", fifo.as_str()],
        vec!["--pevent:secondary", fifo.as_str()],
        vec!["--pevent:primary", "/dev/zero"],
        vec!["--elf", fifo.as_str()],
        vec!["--raw", raw_fifo.as_str()],
    ] {
        let out = Command::new("timeout")
            .arg("60")
            .arg(env!("CARGO_BIN_EXE_ptdec"))
            .args(["raw", "--pt", pt.as_str(), "--raw", code.as_str(), "-o"])
            .arg(&out_path)
            .args(&extra)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {err}");
        assert!(err.contains("not a regular file"), "{extra:?}: {err}");
    }
    // The good file decodes (its process has no mappings: no code, but no
    // error either).
    let out = s.run(&[
        "--pt",
        &pt,
        "--raw",
        &code,
        "-o",
        &out_path,
        "--pevent:primary",
        &good,
    ]);
    assert!(
        !text(&out.stderr).contains("panicked"),
        "{}",
        text(&out.stderr)
    );
}

/// ptxed's `--sb:*` listing options: each record where it is applied, in
/// ptxed's compact or verbose form (the one given last counts), with its
/// file and offset in front, and the image's switch to a process
/// (`[context: pid-N]`). Without `--insn-list` they are accepted and a
/// warning says nothing is listed. (Their exact output against ptxed's:
/// `tests/ptt.rs`.)
#[test]
fn sideband_is_listed_as_ptxed_prints_it() {
    let s = Setup::new();
    std::fs::write(s.path("code.bin"), &s.p.code).unwrap();
    let pt = s.path("trace.pt");
    let code = format!("{}:{BASE:#x}", s.path("code.bin"));
    let out_path = s.path("out.ftf");
    // ITRACE_START (type 12; pid 7, tid 7), then LOST_SAMPLES (type 13;
    // 3 lost); no samples, so both are applied at the first event.
    let mut sb = Vec::new();
    for (kind, body) in [
        (12u32, [7u32.to_le_bytes(), 7u32.to_le_bytes()].concat()),
        (13, 3u64.to_le_bytes().to_vec()),
    ] {
        sb.extend(kind.to_le_bytes());
        sb.extend(0u16.to_le_bytes());
        sb.extend((8 + body.len() as u16).to_le_bytes());
        sb.extend(body);
    }
    let file = s.path("cpu0.sb");
    std::fs::write(&file, &sb).unwrap();
    let listing = |extra: &[&str]| {
        let list = s.path("list.txt");
        let mut args = vec!["--pt", pt.as_str(), "--raw", code.as_str(), "-o", &out_path];
        args.extend(["--insn-list", list.as_str()]);
        args.extend(extra);
        args.extend(["--pevent:primary", file.as_str()]);
        let out = s.run(&args);
        assert!(out.status.success(), "{extra:?}: {}", text(&out.stderr));
        let all = std::fs::read_to_string(&list).unwrap();
        // All but the instructions and ptxed's events.
        all.lines()
            .filter(|l| {
                let insn = l.len() == 16 && l.bytes().all(|b| b.is_ascii_hexdigit());
                !insn && (!l.starts_with('[') || l.starts_with("[context"))
            })
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        listing(&["--sb:compact", "--sb:offset", "--sb:switch"]),
        [
            "0000000000000000  PERF_RECORD_ITRACE_START  7/7  { }",
            "[context: pid-7]",
            "0000000000000010  PERF_RECORD_LOST_SAMPLES  3  { }",
        ]
    );
    let name = format!("{file}:0000000000000010  PERF_RECORD_LOST_SAMPLES");
    assert_eq!(
        listing(&[
            "--sb:compact",
            "--sb:verbose",
            "--sb:filename",
            "--sb:offset"
        ]),
        [
            format!("{file}:0000000000000000  PERF_RECORD_ITRACE_START"),
            "  pid: 7".to_string(),
            "  tid: 7".to_string(),
            name,
            "  lost: 3".to_string(),
        ]
    );
    assert_eq!(
        listing(&["--sb:verbose", "--sb"]),
        [
            "PERF_RECORD_ITRACE_START  7/7  { }",
            "PERF_RECORD_LOST_SAMPLES  3  { }"
        ]
    );
    assert!(listing(&[]).is_empty());
    // Without --insn-list: decoded, and a warning naming the option.
    let out = s.run(&[
        "--pt",
        &pt,
        "--raw",
        &code,
        "-o",
        &out_path,
        "--sb:time",
        "--pevent:primary",
        &file,
    ]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("--sb:time lists sideband in --insn-list"),
        "{err}"
    );
}

/// A loop calling a function 50,000 times: 100,000 call and return ops.
fn assemble_loop() -> Program {
    let mut a = CodeAssembler::new(64).unwrap();
    let mut main = a.create_label();
    let mut top = a.create_label();
    let mut f = a.create_label();
    a.set_label(&mut main).unwrap();
    a.mov(ecx, 50_000).unwrap();
    a.set_label(&mut top).unwrap();
    a.call(f).unwrap();
    a.dec(ecx).unwrap();
    a.jne(top).unwrap();
    a.syscall().unwrap(); // exit
    a.hlt().unwrap();
    a.set_label(&mut f).unwrap();
    a.nop().unwrap();
    a.ret().unwrap();
    let res = a
        .assemble_options(BASE, BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS)
        .unwrap();
    let funcs = [
        (res.label_ip(&main).unwrap() - BASE, "main"),
        (res.label_ip(&f).unwrap() - BASE, "f"),
    ];
    Program::new(res.inner.code_buffer, BASE).with_funcs(&funcs)
}

/// With an instruction listing (or sideband) a raw trace is decoded as one
/// chunk, in order; its ops are handed on as they fill up, not held to the
/// end: the ops held stay bounded however long the trace, and the ops are
/// those of the same trace decoded without a listing.
#[test]
fn a_listing_decodes_a_long_raw_trace_in_bounded_memory() {
    use ptdec::decode::{decode_raw, DecodeOptions, ListCallback, RawConfig, RawSection};
    use ptdec::model::ops::{Op, OpSink};

    #[derive(Default)]
    struct Collect(Vec<Op>);
    impl OpSink for Collect {
        fn op(&mut self, _pid: u32, _tid: u32, op: Op) {
            self.0.push(op);
        }
    }

    let p = assemble_loop();
    let thread = Thread {
        exit_syscall: 1,
        ..Thread::new(1, 1)
    };
    let events = testkit::execute(&p, &thread);
    let cfg = Config::default();
    let pt = Generator::run(cfg.clone(), &events).unwrap().bytes;
    let dir = tempfile::tempdir().unwrap();
    let code = dir.path().join("code.bin");
    std::fs::write(&code, &p.code).unwrap();
    let sections = [RawSection {
        path: code,
        offset: 0,
        size: p.code.len() as u64,
        vaddr: BASE,
    }];
    let raw = RawConfig {
        cpu: Some((6, 85, 4)),
        mtc_freq: cfg.mtc_period,
        nom_freq: cfg.timing.max_nonturbo_ratio,
        cpuid_15_eax: cfg.timing.tsc_ctc_ratio_d,
        cpuid_15_ebx: cfg.timing.tsc_ctc_ratio_n,
        ..RawConfig::default()
    };
    let decode = |opts: &DecodeOptions| {
        let mut sink = Collect::default();
        let stats = decode_raw(&pt, &sections, &raw, opts, &mut sink, None).unwrap();
        (sink.0, stats)
    };
    let (plain, _) = decode(&DecodeOptions::default());
    let listed = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let n = listed.clone();
    let opts = DecodeOptions {
        insn_list: Some(ListCallback::new(move |_| {
            n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })),
        ..DecodeOptions::default()
    };
    let (streamed, stats) = decode(&opts);
    let calls = streamed
        .iter()
        .filter(|o| matches!(o, Op::Call { .. }))
        .count();
    assert_eq!(calls, 50_000);
    assert!(
        stats.max_chunk_ops <= 1 << 16 && stats.max_ops_held <= 1 << 17,
        "{stats:?}"
    );
    assert_eq!(streamed, plain);
    assert!(listed.load(std::sync::atomic::Ordering::Relaxed) > 150_000);
}

/// `ptdec raw`'s FTF and `--insn-list` file are no more readable than the
/// `--pt` trace (issue 44): 0600 from a 0600 trace, although the umask
/// (022 here) would make a new file 0644.
#[test]
fn raw_outputs_are_as_private_as_the_trace() {
    use std::os::unix::fs::PermissionsExt;
    let s = Setup::new();
    std::fs::write(s.path("code.bin"), &s.p.code).unwrap();
    let pt = s.path("trace.pt");
    std::fs::set_permissions(&pt, std::fs::Permissions::from_mode(0o600)).unwrap();
    let code = format!("{}:{BASE:#x}", s.path("code.bin"));
    let (out, list) = (s.path("out.ftf"), s.path("list.txt"));
    let mut args = vec!["raw", "--pt", &pt, "--raw", &code, "-q", "-o", &out];
    args.extend(["--insn-list", &list]);
    let o = Command::new("bash")
        .args(["-c", "umask 022; exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_ptdec"))
        .args(&args)
        .args(timing_args(&s.cfg))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    for f in [&out, &list] {
        let m = std::fs::metadata(f).unwrap().permissions().mode() & 0o7777;
        assert_eq!(m, 0o600, "{f}");
    }
}

/// libipt's `pevent-mmap-tip_cached` vector, its PT and its code (the
/// sideband tests below build their own sideband for it), or `None`, the
/// test said skipped, where `../shared/libipt-tests` lacks it.
fn mmap_vector(test: &str) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let vectors = pt_tests::libipt_tests_dir();
    let name = "pevent-mmap-tip_cached";
    let (pt, bin) = (
        vectors.join(format!("{name}.pt")),
        vectors.join(format!("{name}.bin")),
    );
    if !pt.is_file() || !bin.is_file() {
        pt_tests::skipped(test, &format!("no {name}.pt/.bin in {}", vectors.display()));
        return None;
    }
    Some((pt, bin))
}

/// Appends a PERF_RECORD_MMAP (type 1) of pid/tid 1 to `sb`: `addr`,
/// `len`, `pgoff`, the file name padded to 8 bytes, then the sample's
/// time 0 (sample_type 0x4).
fn push_mmap(sb: &mut Vec<u8>, addr: u64, len: u64, pgoff: u64, file: &Path) {
    let mut body = Vec::new();
    for v in [1u32, 1] {
        body.extend(v.to_le_bytes());
    }
    for v in [addr, len, pgoff] {
        body.extend(v.to_le_bytes());
    }
    let mut name = file.to_string_lossy().into_owned().into_bytes();
    name.resize((name.len() / 8 + 1) * 8, 0);
    body.extend(name);
    body.extend(0u64.to_le_bytes());
    sb.extend(1u32.to_le_bytes());
    sb.extend(0u16.to_le_bytes());
    sb.extend((8 + body.len() as u16).to_le_bytes());
    sb.extend(body);
}

/// Appends ITRACE_START (type 12) of pid/tid 1, time 0, to `sb`.
fn push_itrace_start(sb: &mut Vec<u8>) {
    sb.extend(12u32.to_le_bytes());
    sb.extend(0u16.to_le_bytes());
    sb.extend(24u16.to_le_bytes());
    for v in [1u32, 1] {
        sb.extend(v.to_le_bytes());
    }
    sb.extend(0u64.to_le_bytes());
}

/// Sideband with many MMAPs of one binary at distinct addresses (a
/// program mapping a library again and again): each section went into
/// libipt's section cache up front, and a cache holds at most 65,535, so
/// the sections past that were lost (the decode found no code). libipt's
/// `pevent-mmap-tip_cached` after 70,000 such MMAPs decodes as ptxed
/// does. (That cache's look-up is linear in its sections, so adding them
/// all was also quadratic: `worker_images`'
/// `adding_sections_is_linear_in_sections` counts what it looks through.)
#[test]
fn many_sideband_mmaps_are_not_lost() {
    let Some((pt, bin)) = mmap_vector("many_sideband_mmaps_are_not_lost") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.bin");
    std::fs::copy(&bin, &m).unwrap();
    let mut sb = Vec::new();
    for i in 0..70_000u64 {
        push_mmap(&mut sb, 0x1000_0000 + i * 0x1000, 6, 0, &m);
    }
    // The vector's own two, then ITRACE_START.
    push_mmap(&mut sb, 0x1000, 6, 0, &m);
    push_mmap(&mut sb, 0xa000, 1, 0x100, &m);
    push_itrace_start(&mut sb);
    let sb_path = dir.path().join("m.sb");
    std::fs::write(&sb_path, &sb).unwrap();
    let list = dir.path().join("flow.txt");
    let out = ptdec()
        .arg("raw")
        .arg("--pt")
        .arg(&pt)
        .arg("--raw")
        .arg(format!("{}:0x1000", m.display()))
        .args(["--pevent:sample-type", "4", "--pevent:primary"])
        .arg(&sb_path)
        .arg("-o")
        .arg(dir.path().join("o.ftf"))
        .arg("--insn-list")
        .arg(&list)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let flow = std::fs::read_to_string(&list).unwrap();
    // ptxed's flow of the vector (its -ptxed.exp less the sideband lines).
    let want = "[enabled]\n0000000000001000\n0000000000001001\n000000000000a000\n\
                0000000000001000\n0000000000001001\n0000000000001004\n[disabled]\n";
    assert_eq!(flow, want, "{}", text(&out.stderr));
}

/// A `--pevent:vdso-*` file goes through the check every other
/// `--pevent` file does, and must be an ELF image (an empty or other file
/// was accepted silently): a FIFO is refused, naming the option (it was
/// accepted silently, and a decode that met a `[vdso]` MMAP would wait on
/// it). An MMAP of a folder or of `/dev/zero` is said before the decode as
/// a file that is not a regular file (it gave only "no memory mapped"),
/// never opened (a FIFO's open blocked), one of a symbolic link loop as
/// that ("does not exist" before), and the rest still decodes.
#[test]
fn non_regular_vdso_and_mapped_files_are_said() {
    let Some((pt, bin)) = mmap_vector("non_regular_vdso_and_mapped_files_are_said") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.bin");
    std::fs::copy(&bin, &m).unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // The vector's own code, its second page named as the folder,
    // /dev/zero and the FIFO; then ITRACE_START.
    let mut sb = Vec::new();
    push_mmap(&mut sb, 0x1000, 6, 0, &m);
    push_mmap(&mut sb, 0xa000, 1, 0x100, dir.path());
    push_mmap(&mut sb, 0x20000, 0x1000, 0, Path::new("/dev/zero"));
    push_mmap(&mut sb, 0x30000, 0x1000, 0, &fifo);
    let link_loop = dir.path().join("loop");
    std::os::unix::fs::symlink(&link_loop, &link_loop).unwrap();
    push_mmap(&mut sb, 0x40000, 0x1000, 0, &link_loop);
    push_itrace_start(&mut sb);
    let sb_path = dir.path().join("m.sb");
    std::fs::write(&sb_path, &sb).unwrap();
    // Under `timeout`, so a hang (an open of the FIFO) fails rather than waits.
    let run = |vdso: Option<(&str, &Path)>| {
        let mut c = Command::new("timeout");
        c.arg("60")
            .arg(env!("CARGO_BIN_EXE_ptdec"))
            .arg("raw")
            .arg("--pt")
            .arg(&pt)
            .arg("--raw")
            .arg(format!("{}:0x1000", m.display()))
            .args(["--pevent:sample-type", "4"]);
        if let Some((option, v)) = vdso {
            c.arg(option).arg(v);
        }
        c.arg("--pevent:primary")
            .arg(&sb_path)
            .arg("-o")
            .arg(dir.path().join("o.ftf"))
            .arg("--insn-list")
            .arg(dir.path().join("flow.txt"));
        c.output().unwrap()
    };
    let out = run(Some(("--pevent:vdso-x64", &fifo)));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "--pevent:vdso-x64 {}: cannot read it: it is not a regular file",
            fifo.display()
        )),
        "{err}"
    );
    // An empty or non-ELF vDSO file is refused by name (accepted
    // silently before), for each ABI.
    let empty = dir.path().join("empty.so");
    std::fs::write(&empty, b"").unwrap();
    for (option, file, what) in [
        ("--pevent:vdso-x64", &empty, "it is empty".to_string()),
        (
            "--pevent:vdso-x32",
            &sb_path,
            format!("it starts with {:02x?}", &sb[..4]),
        ),
        ("--pevent:vdso-ia32", &empty, "it is empty".to_string()),
    ] {
        let out = run(Some((option, file)));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{option}: {err}");
        assert!(
            err.contains(&format!(
                "{option} {}: {what}, not an ELF image: a vDSO is one",
                file.display()
            )),
            "{option}: {err}"
        );
    }
    let out = run(None);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    for want in [
        "files the sideband maps are not regular files".to_string(),
        "/dev/zero (a device)".to_string(),
        format!("{} (a directory)", dir.path().display()),
        format!("{} (a FIFO)", fifo.display()),
        format!(
            "files the sideband maps are symbolic link loops (links that lead back to each \
             other, ELOOP), their code is missing (fix or remove the links, or give \
             --pevent:sysroot DIR where the files are): {}",
            link_loop.display()
        ),
    ] {
        assert!(err.contains(&want), "{want:?} not in {err}");
    }
    assert!(!err.contains("do not exist"), "{err}");
    // The code before the folder's page still decodes.
    let flow = std::fs::read_to_string(dir.path().join("flow.txt")).unwrap();
    assert!(
        flow.starts_with("[enabled]\n0000000000001000\n0000000000001001\n"),
        "{flow}"
    );
}

/// Hostile PT that fills the decoders' event queue (CFE packets with
/// their IP bit and no FUP to give it) is a decode error named as such,
/// at its offset, by both decoders: libipt's `-pte_nomem` and ptflow's
/// equivalent said "out of memory". The decode goes on at the next PSB
/// as before, the two decoders alike.
#[test]
fn a_full_event_queue_is_named_not_out_of_memory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // PSB+ at 0x400000 in 64-bit code, one taken `jz $` (74 fe), then 40
    // CFEs (INTR, vector 14, IP bit set); a second PSB+ and a disable.
    let psb: Vec<u8> = [0x02, 0x82].repeat(8);
    let fup = |ip: u64| {
        let mut p = vec![0x1d | (6 << 5)];
        p.extend_from_slice(&ip.to_le_bytes());
        p
    };
    let mut pt = Vec::new();
    let psb_plus = |pt: &mut Vec<u8>| {
        pt.extend_from_slice(&psb);
        pt.extend_from_slice(&[0x99, 0x01]);
        pt.extend_from_slice(&fup(0x400000));
        pt.extend_from_slice(&[0x02, 0x23]);
    };
    psb_plus(&mut pt);
    pt.push(0b110); // TNT: taken
    let cfe_at = pt.len();
    for _ in 0..40 {
        pt.extend_from_slice(&[0x02, 0x13, 2 | 0x80, 14]);
    }
    psb_plus(&mut pt);
    pt.push(0x01); // TIP.PGD, IP suppressed
    std::fs::write(d.join("evq.pt"), &pt).unwrap();
    std::fs::write(d.join("code.bin"), [0x74, 0xfe]).unwrap();
    let mut listings = Vec::new();
    for decoder in ["fast", "libipt"] {
        let list = d.join(format!("{decoder}.txt"));
        let out = ptdec()
            .current_dir(d)
            .args(["raw", "--decoder", decoder, "--on-error", "next-psb"])
            .args([
                "--pt",
                "evq.pt",
                "--raw",
                "code.bin:0x400000",
                "-o",
                "o.ftf",
            ])
            .arg("--insn-list")
            .arg(&list)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(out.status.success(), "{decoder}: {err}");
        assert!(
            err.contains("errors        EventQueueFull 1") && !err.contains("Nomem"),
            "{decoder}: {err}"
        );
        let listing = std::fs::read_to_string(&list).unwrap();
        // The queue fills at one of the CFEs.
        let at = listing
            .lines()
            .find_map(|l| l.strip_prefix('[')?.split_once(": error: "))
            .map(|(off, what)| (u64::from_str_radix(off, 16).unwrap(), what.to_string()));
        let Some((off, what)) = at else {
            panic!("{decoder}: no error in {listing}");
        };
        assert!(
            (cfe_at as u64..cfe_at as u64 + 160).contains(&off),
            "{decoder}: {listing}"
        );
        assert_eq!(
            what,
            "too many events waiting for their IP in the trace (the decoder's event queue is \
             full): corrupt or hostile PT]",
            "{decoder}"
        );
        let gap = ptdec()
            .current_dir(d)
            .args(["dump", "o.ftf"])
            .output()
            .unwrap();
        assert!(
            text(&gap.stdout).contains(&format!("corrupt or hostile PT at offset {off:#x}")),
            "{decoder}: {}",
            text(&gap.stdout)
        );
        listings.push(listing);
    }
    // Decoding went on after the error, as it did, in both decoders.
    assert!(
        listings[0].ends_with("[enabled]\n0000000000400000\n[disabled]\n"),
        "{}",
        listings[0]
    );
    assert_eq!(listings[0], listings[1]);
}
