//! LLDB trace bundles (`trace save`) as `ptdec` input, on LLDB's own test
//! bundles in `../shared/realdata/lldb/` (its README says where they come
//! from and what LLDB's tests and ptxed expect of them).
//!
//! What is compared: **instructions per thread**. LLDB counts "trace
//! items" per thread, which are instructions plus events plus errors, and
//! its events changed between versions. An earlier TestTraceLoad (times
//! printed as `[tsc=...]`) gives tid 3497496 19,524 items (2 events,
//! "software disabled tracing" and "CPU core changed", and 1 error,
//! "expected tracing enabled event"); a later one (times in ns) 19,533
//! (11 events: also "trace synchronization point" and 8 "HW clock tick";
//! the same error). Both are 19,521 instructions, which is also ptxed's
//! count on the whole of core 51, the only core the thread ran on (one
//! switch-in in `51.perf_context_switch_trace`). The single-thread bundle
//! is 23 items (2 events) in the earlier and 24 (3 events) in the later:
//! 21 instructions. tid 3497497 ran only on core 45 (two switch-ins),
//! where ptxed finds 61,825 instructions. The earlier LLDB put its last
//! instruction at item 67,912 (last item 67,919): about 6,000 more than
//! the whole core holds, most likely because each of the two executions
//! was decoded to the end of the PSB block it began in, counting their
//! shared stretch twice. The later LLDB stops at an execution's end
//! ("decoding truncated: TSC ... exceeds maximum TSC value"), and its
//! TestTraceDumpFunctionCalls puts the thread's instructions at item ids
//! 5 to 61,831: 61,827 items, room for the 61,825 instructions and two
//! events (LLDB's tests do not list this thread's events).
//! ptdec splits a core's trace at the context switches (the perf time of
//! each op against the SWITCH_CPU_WIDE records), as the later LLDB does.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ptdec() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ptdec"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `../shared/realdata/lldb/NAME`, or the skip line when it is not there.
fn bundle(test: &str, name: &str) -> Option<PathBuf> {
    let p = pt_tests::realdata("lldb").join(name);
    if p.exists() {
        Some(p)
    } else {
        pt_tests::missing(
            test,
            &format!("{} is not there (../shared beside the clone)", p.display()),
        )
    }
}

/// Decodes `input` to `out` with `args`; panics on a failure or a panic.
fn decode(input: &Path, out: &Path, args: &[&str]) -> Output {
    let o = ptdec()
        .arg(input)
        .arg("-o")
        .arg(out)
        .args(args)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{}: {err}", input.display());
    assert!(!err.contains("panicked"), "{err}");
    o
}

/// (pid, tid) and the thread's instructions.
type Insns = ((u32, u32), u64);

/// The summary's per-thread lines `pid/tid name: instructions, calls, gaps`
/// as (pid, tid) → instructions.
fn thread_insns(stderr: &str) -> Vec<Insns> {
    let mut out = Vec::new();
    let mut in_threads = false;
    for line in stderr.lines() {
        if line.trim_start().starts_with("threads ") {
            in_threads = true;
            continue;
        }
        if !in_threads || !line.starts_with("    ") {
            continue;
        }
        let l = line.trim();
        let Some((who, rest)) = l.split_once(' ') else {
            continue;
        };
        let Some((Ok(pid), Ok(tid))) = who.split_once('/').map(|(p, t)| (p.parse(), t.parse()))
        else {
            continue;
        };
        // "name: 19,521, 0, 0": the fields are separated by ", ".
        let insns = rest
            .rsplit_once(": ")
            .unwrap()
            .1
            .split(", ")
            .next()
            .unwrap();
        out.push(((pid, tid), insns.replace(',', "").parse().unwrap()));
    }
    out
}

fn dump(ftf: &Path) -> String {
    let o = ptdec().arg("dump").arg(ftf).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    text(&o.stdout)
}

#[test]
fn the_single_thread_bundle_decodes_to_lldbs_21_instructions() {
    let test = "the_single_thread_bundle_decodes_to_lldbs_21_instructions";
    let Some(dir) = bundle(test, "intelpt-trace") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.ftf");
    // The folder and its trace.json are the same input.
    for input in [dir.clone(), dir.join("trace.json")] {
        let o = decode(&input, &out, &[]);
        let err = text(&o.stderr);
        assert_eq!(thread_insns(&err), vec![((1234, 3842849), 21)], "{err}");
        assert!(err.contains("no tscPerfZeroConversion"), "{err}");
    }
    let d = dump(&out);
    assert!(
        d.contains("kernel_object thread koid=3842849 name=\"a.out\""),
        "{d}"
    );
    // Two threads sharing one trace file each decode it.
    let o = decode(&dir.join("trace_2threads.json"), &out, &[]);
    assert_eq!(
        thread_insns(&text(&o.stderr)),
        vec![((1234, 3842849), 21), ((1234, 3842850), 21)]
    );
}

#[test]
fn the_multi_file_bundle_stops_at_the_missing_loader() {
    let test = "the_multi_file_bundle_stops_at_the_missing_loader";
    let Some(dir) = bundle(test, "intelpt-trace-multi-file") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.ftf");
    // Resynchronized at the error (the default), decoding goes on after
    // the loader returns and stops there again at the next lazy binding:
    // two stretches without code, 18 more instructions than ptxed
    // without --resync-on-error, which stops at the first until the next
    // PSB (as `--on-error next-psb`, checked below).
    let o = decode(&dir.join("multi-file-no-ld.json"), &out, &[]);
    let err = text(&o.stderr);
    assert_eq!(thread_insns(&err), vec![((815455, 815455), 63)], "{err}");
    assert!(err.contains("Nomap 2"), "{err}");
    let d = dump(&out);
    let gaps: Vec<&str> = d.lines().filter(|l| l.contains("cat=\"gap\"")).collect();
    assert_eq!(gaps.len(), 2, "{d}");
    for g in &gaps {
        assert!(g.contains("ip\": ptr(0x7ffff7df1950)"), "{g}");
    }
    let psb = tmp.path().join("psb.ftf");
    let o = decode(
        &dir.join("multi-file-no-ld.json"),
        &psb,
        &["--on-error", "next-psb"],
    );
    let err = text(&o.stderr);
    assert_eq!(thread_insns(&err), vec![((815455, 815455), 45)], "{err}");
    assert!(err.contains("Nomap 1"), "{err}");
    let d_psb = dump(&psb);
    let gaps: Vec<&str> = d_psb
        .lines()
        .filter(|l| l.contains("cat=\"gap\""))
        .collect();
    assert_eq!(gaps.len(), 1, "{d_psb}");
    assert!(gaps[0].contains("ip\": ptr(0x7ffff7df1950)"), "{}", gaps[0]);
    // The libraries are found at the bundle's load addresses: calls into
    // libfoo.so and libbar.so are named from their symbols.
    for f in ["foo()", "bar()"] {
        assert!(
            d.contains(&format!("name=\"{f}\"")),
            "{f} not called in\n{d}"
        );
    }
}

#[test]
fn the_multi_core_bundle_splits_at_context_switches_as_lldb() {
    let test = "the_multi_core_bundle_splits_at_context_switches_as_lldb";
    let Some(dir) = bundle(test, "intelpt-multi-core-trace") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.ftf");
    let want = vec![((3497234, 3497496), 19_521), ((3497234, 3497497), 61_825)];
    for json in [
        "trace.json",
        "trace_with_string_numbers.json",
        // Threads not listed are found in the context switches.
        "trace_missing_threads.json",
    ] {
        let o = decode(&dir.join(json), &out, &[]);
        let err = text(&o.stderr);
        assert_eq!(thread_insns(&err), want, "{json}: {err}");
        assert!(!err.contains("warning"), "{json}: {err}");
    }
    // A relative path: the modules are found as well.
    let o = ptdec()
        .current_dir(dir.parent().unwrap())
        .args(["intelpt-multi-core-trace", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(thread_insns(&text(&o.stderr)), want, "{}", text(&o.stderr));
    // Times come from tscPerfZeroConversion: the two threads' code spans
    // 71 µs of perf time, 4.6 s after the first context switch recorded.
    let o = decode(&dir, &out, &[]);
    let err = text(&o.stderr);
    assert!(
        err.contains("time span     71.312 µs (perf time 7002363907177316 .. 7002363907248628; 0 in the output is 7002359266274235)"),
        "{err}"
    );
    // Other processes' threads on the cores are left out unless asked for.
    let o = decode(&dir, &out, &["--pid", "0"]);
    assert!(thread_insns(&text(&o.stderr)).iter().all(|t| t.0 .0 == 0));
    let report = ptdec().arg("report").arg(&dir).output().unwrap();
    assert!(report.status.success(), "{}", text(&report.stderr));
    assert!(text(&report.stdout).contains("_Z3foov") || text(&report.stdout).contains("foo"));
}

/// A per-core bundle whose tscPerfZeroConversion puts the trace outside
/// its context switches (timeZero 0) decodes nothing for its processes:
/// the error says so without naming a --pid that was not given, says how
/// much trace was decoded, and points at the conversion.
#[test]
fn a_bundle_whose_conversion_misses_its_switches_says_so() {
    let test = "a_bundle_whose_conversion_misses_its_switches_says_so";
    let Some(real) = bundle(test, "intelpt-multi-core-trace") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("b");
    let cp = Command::new("cp")
        .arg("-r")
        .arg(&real)
        .arg(&dir)
        .status()
        .unwrap();
    assert!(cp.success());
    let json = std::fs::read_to_string(dir.join("trace.json")).unwrap();
    let moved = json.replace("\"timeZero\": 18433473881008870804", "\"timeZero\": 0");
    assert_ne!(json, moved, "no timeZero to change");
    std::fs::write(dir.join("trace.json"), moved).unwrap();
    let out = tmp.path().join("out.ftf");
    let o = ptdec().arg(&dir).arg("-o").arg(&out).output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("--pid"), "{err}");
    for want in [
        "nothing decoded for the processes the bundle lists: ",
        " bytes of trace were decoded, but none of it ran in their threads (3497234/3497234 \
         m.out, 3497234/3497496 m.out, 3497234/3497497 m.out)",
        "placed by the bundle's tscPerfZeroConversion: if that conversion is off, the trace's \
         times fall outside the switches",
    ] {
        assert!(err.contains(want), "{want:?} not in {err}");
    }
    assert!(!out.exists());
    // Given as --pid, the option is named as before.
    let o = ptdec()
        .arg(&dir)
        .args(["--pid", "3497234", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("nothing decoded for --pid 3497234"), "{err}");
}

#[test]
fn ptdec_info_describes_a_bundle() {
    let test = "ptdec_info_describes_a_bundle";
    let Some(dir) = bundle(test, "intelpt-multi-core-trace") else {
        return;
    };
    let o = ptdec().arg("info").arg(&dir).output().unwrap();
    let info = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for want in [
        "(LLDB trace bundle)",
        "cpu           GenuineIntel family 6 model 85 stepping 4 (cpuInfo)",
        "per-core traces with context switches (cores 45, 51)",
        "tscPerfZeroConversion: time_mult 1076264588, time_shift 31, time_zero 18433473881008870804",
        "process       3497234: threads 3497234, 3497496, 3497497",
        "modules/m.out at 0x400000",
        "buffer   0  cpu 45: 2.8 KiB",
        "3497234/3497497 m.out",
        "found    ",
    ] {
        assert!(info.contains(want), "{want:?} not in\n{info}");
    }
}

/// LLDB's malformed bundles: each is refused or decoded with a warning
/// naming the file and the field, never a panic.
#[test]
fn malformed_bundles_name_the_file_and_field() {
    let test = "malformed_bundles_name_the_file_and_field";
    let Some(dir) = bundle(test, "intelpt-trace") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.ftf");
    let run = |json: &Path| {
        let o = ptdec().arg(json).arg("-o").arg(&out).output().unwrap();
        let err = text(&o.stderr);
        assert!(!err.contains("panicked"), "{err}");
        (o.status.success(), err)
    };
    // (file, decodes, what the message says, instructions of each thread)
    let cases: [(&str, bool, &str, Vec<Insns>); 7] = [
        ("trace_bad.json", false, "expected an object at processes[0], found 123", vec![]),
        (
            "trace_bad4.json",
            false,
            "the bundle lists no process (processes) and no core (cpus): missing value at cpuInfo.family",
            vec![],
        ),
        // Another process without a pid is left out; the first decodes.
        (
            "trace_bad3.json",
            true,
            "missing value at processes[1].pid; process left out",
            vec![((1234, 5678), 21)],
        ),
        // The module at the wrong address: the thread is decoded, and the
        // code it runs has no image.
        (
            "trace_bad5.json",
            true,
            "missing value at processes[1].pid; process left out",
            vec![((1234, 5678), 0)],
        ),
        (
            "trace_bad_image.json",
            true,
            "no tscPerfZeroConversion",
            vec![((1234, 3842849), 0)],
        ),
        // A CPU that does not fit: decoded without errata workarounds,
        // which this Broadwell trace needs (LLDB refuses it: "unknown cpu").
        // Its PSB+ then does not fit the decoder's state (bad status
        // update); resynchronized at the error the decoder still finds
        // the 21 instructions (at the next PSB: none).
        (
            "trace_wrong_cpu.json",
            true,
            "cpuInfo.family 2123123 is out of range; decoding without errata workarounds",
            vec![((1234, 3842849), 21)],
        ),
        // A family given as a string is read as LLDB 16 reads it.
        (
            "trace_bad2.json",
            true,
            "no tscPerfZeroConversion",
            // As trace_wrong_cpu.json for the thread whose image is
            // there (at the next PSB: none).
            vec![((1234, 5678), 21), ((12345, 56789), 0)],
        ),
    ];
    for (name, ok, says, threads) in cases {
        let json = dir.join(name);
        let (success, err) = run(&json);
        assert_eq!(success, ok, "{name}: {err}");
        assert!(err.contains(&json.display().to_string()), "{name}: {err}");
        assert!(err.contains(says), "{name}: {says:?} not in {err}");
        if ok {
            assert_eq!(thread_insns(&err), threads, "{name}: {err}");
        } else {
            assert_eq!(err.lines().count(), 1, "{name}: {err}");
        }
    }
    assert!(run(&dir.join("trace_bad_image.json")).1.contains("Nomap 2"));
}

/// Bundles made here from the real one: another `type`, a cut JSON, a
/// missing trace file, a missing module, a module found through
/// `--sysroot`.
#[test]
fn broken_bundles_say_what_is_wrong_and_decode_what_they_can() {
    let test = "broken_bundles_say_what_is_wrong_and_decode_what_they_can";
    let Some(real) = bundle(test, "intelpt-trace") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.ftf");
    let original = std::fs::read_to_string(real.join("trace.json")).unwrap();
    let trace = real.join("3842849.trace").display().to_string();
    // Absolute paths: joined to the bundle folder, they stay as they are.
    let aout = real.join("a.out").display().to_string();
    let json = original
        .replace("\"3842849.trace\"", &format!("{trace:?}"))
        .replace("\"file\": \"a.out\"", &format!("\"file\": {aout:?}"));
    let write = |name: &str, body: &str| {
        let p = tmp.path().join(name);
        std::fs::write(&p, body).unwrap();
        p
    };
    let run = |p: &Path, extra: &[&str]| {
        let o = ptdec()
            .arg(p)
            .arg("-o")
            .arg(&out)
            .args(extra)
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert!(!err.contains("panicked"), "{err}");
        (o.status.code(), err)
    };

    let p = write("other.json", &json.replace("\"intel-pt\"", "\"coresight\""));
    let (code, err) = run(&p, &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("field `type` is \"coresight\", not \"intel-pt\""),
        "{err}"
    );
    assert!(err.contains("other.json"), "{err}");

    let p = write("cut.json", &json[..json.len() / 2]);
    let (code, err) = run(&p, &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("cut.json: the JSON ends early (a cut file?) at line"),
        "{err}"
    );

    // Two threads, one of whose trace is missing: the other is decoded.
    let two = json.replace(
        "\"threads\": [",
        "\"threads\": [\n        {\"tid\": 99, \"iptTrace\": \"gone.trace\"},",
    );
    let p = write("missing_trace.json", &two);
    let (code, err) = run(&p, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("missing_trace.json: processes[0].threads[0].iptTrace names")
            && err.contains("gone.trace, which does not exist; thread 99 left out"),
        "{err}"
    );
    assert_eq!(thread_insns(&err), vec![((1234, 3842849), 21)], "{err}");

    // The module is not in the bundle: named, its code has no image, and
    // --sysroot holding it at its systemPath decodes it all.
    let gone = json
        .replace(&format!("\"file\": {aout:?}"), "\"file\": \"a.out\"")
        .replace(
            "\"systemPath\": \"a.out\"",
            "\"systemPath\": \"/opt/app/a.out\"",
        );
    let p = write("missing_module.json", &gone);
    let (code, err) = run(&p, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("processes[0].modules[0].file names")
            && err.contains("/opt/app/a.out is neither under a --sysroot nor on this machine"),
        "{err}"
    );
    assert_eq!(thread_insns(&err), vec![((1234, 3842849), 0)], "{err}");
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("opt/app")).unwrap();
    std::fs::copy(real.join("a.out"), root.join("opt/app/a.out")).unwrap();
    let p = write(
        "missing_module.json",
        &gone.replace("\"file\": \"a.out\",", ""),
    );
    let (code, err) = run(&p, &["--sysroot", root.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(thread_insns(&err), vec![((1234, 3842849), 21)], "{err}");

    // A module whose loadAddress is the top of the address space (2^64-1),
    // or whose file would end past it: left out, naming the field and the
    // module (it was mapped round through address 0, without a word).
    for (load, hex) in [
        ("18446744073709551615", "0xffffffffffffffff"),
        ("18446744073709547520", "0xfffffffffffff000"),
    ] {
        let at_top = json.replace(
            "\"loadAddress\": 4194304",
            &format!("\"loadAddress\": {load}"),
        );
        let p = write("at_top.json", &at_top);
        let (code, err) = run(&p, &[]);
        assert_eq!(code, Some(0), "{err}");
        assert!(
            err.contains(&format!(
                "processes[0].modules[0].loadAddress {hex} of a.out puts its file's"
            )) && err.contains("past the top of the address space (2^64)")
                && err.contains("module left out"),
            "{err}"
        );
        assert_eq!(thread_insns(&err), vec![((1234, 3842849), 0)], "{err}");
    }

    // Another vendor's CPU: said first, as what cannot record Intel PT (it
    // was decoded without a word). The trace is decoded all the same.
    let p = write("amd.json", &json.replace("GenuineIntel", "AuthenticAMD"));
    let (code, err) = run(&p, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("cpuInfo.vendor says the CPU is \"AuthenticAMD\"")
            && err.contains("only Intel CPUs record Intel PT"),
        "{err}"
    );
}

/// A per-core bundle whose context-switch file for core 51 is missing, or
/// cut inside a record: the core without switches is left out (its
/// threads cannot be told apart), the cut file is read up to the cut, and
/// core 45's thread is decoded whole either way.
#[test]
fn broken_context_switch_files_leave_the_other_core_decoded() {
    let test = "broken_context_switch_files_leave_the_other_core_decoded";
    let Some(real) = bundle(test, "intelpt-multi-core-trace") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.ftf");
    for d in ["cores", "modules"] {
        std::fs::create_dir(tmp.path().join(d)).unwrap();
    }
    for f in [
        "trace.json",
        "modules/m.out",
        "cores/45.intelpt_trace",
        "cores/45.perf_context_switch_trace",
        "cores/51.intelpt_trace",
    ] {
        std::fs::copy(real.join(f), tmp.path().join(f)).unwrap();
    }
    let o = ptdec()
        .arg(tmp.path())
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("cpus[1].contextSwitchTrace names")
            && err.contains("51.perf_context_switch_trace, which does not exist; core left out"),
        "{err}"
    );
    assert_eq!(
        thread_insns(&err),
        vec![((3497234, 3497497), 61_825)],
        "{err}"
    );

    // Cut 13 bytes into a record: the records before the cut are used.
    let sw = std::fs::read(real.join("cores/51.perf_context_switch_trace")).unwrap();
    let cut = sw.len() / 2 / 32 * 32 + 13;
    std::fs::write(
        tmp.path().join("cores/51.perf_context_switch_trace"),
        &sw[..cut],
    )
    .unwrap();
    let o = ptdec()
        .arg(tmp.path())
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("51.perf_context_switch_trace: ")
            && err.contains("the records after it are not read"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let threads = thread_insns(&err);
    assert!(threads.contains(&((3497234, 3497497), 61_825)), "{err}");
}

/// Hostile bundles: `trace.json` cut at every length and with bytes
/// changed, and context-switch files with bytes changed, thousands of
/// times over, through the library's reader and, for those it accepts,
/// the whole decode. Each must be an answer (a trace or an error naming
/// what is wrong), never a panic; the decodes are bounded by the small
/// traces.
#[test]
fn cut_and_changed_bundles_never_panic() {
    let test = "cut_and_changed_bundles_never_panic";
    let Some(real) = bundle(test, "intelpt-multi-core-trace") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    for d in ["cores", "modules"] {
        std::fs::create_dir(tmp.path().join(d)).unwrap();
    }
    let files = [
        "trace.json",
        "modules/m.out",
        "cores/45.intelpt_trace",
        "cores/45.perf_context_switch_trace",
        "cores/51.intelpt_trace",
        "cores/51.perf_context_switch_trace",
    ];
    for f in files {
        std::fs::copy(real.join(f), tmp.path().join(f)).unwrap();
    }
    let json = std::fs::read(real.join("trace.json")).unwrap();
    let switches = std::fs::read(real.join("cores/45.perf_context_switch_trace")).unwrap();
    let desc = tmp.path().join("trace.json");
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut opened = 0;
    let mut try_one = |json: &[u8], switches: &[u8]| {
        std::fs::write(&desc, json).unwrap();
        std::fs::write(
            tmp.path().join("cores/45.perf_context_switch_trace"),
            switches,
        )
        .unwrap();
        let r = std::panic::catch_unwind(|| ptdec::input::lldb::open(&desc, &[]).map(|_| ()));
        match r {
            Ok(Ok(())) => opened += 1,
            Ok(Err(e)) => assert!(!e.to_string().is_empty()),
            Err(_) => panic!(
                "the bundle reader panicked on trace.json {:?} (switches {} bytes)",
                String::from_utf8_lossy(json),
                switches.len()
            ),
        }
    };
    // Every cut of the JSON.
    for n in 0..json.len() {
        try_one(&json[..n], &switches);
    }
    // Changed bytes: digits, quotes, braces and random ones.
    let alphabet = b"0123456789\"{}[],:-x \x00\xff";
    for _ in 0..3000 {
        let mut j = json.clone();
        for _ in 0..1 + next() % 3 {
            let i = (next() % j.len() as u64) as usize;
            j[i] = if next() % 2 == 0 {
                alphabet[(next() % alphabet.len() as u64) as usize]
            } else {
                next() as u8
            };
        }
        try_one(&j, &switches);
    }
    // Changed context-switch records, with the JSON intact.
    for _ in 0..1000 {
        let mut s = switches.clone();
        for _ in 0..1 + next() % 8 {
            let i = (next() % s.len() as u64) as usize;
            s[i] = next() as u8;
        }
        let cut = if next() % 4 == 0 {
            (next() % s.len() as u64) as usize
        } else {
            s.len()
        };
        try_one(&json, &s[..cut]);
    }
    assert!(opened > 0, "no mutated bundle was accepted at all");
    // A few accepted ones through the whole decode, as a user would run it.
    let out = tmp.path().join("out.ftf");
    for _ in 0..20 {
        let mut s = switches.clone();
        for _ in 0..4 {
            let i = (next() % s.len() as u64) as usize;
            s[i] = next() as u8;
        }
        std::fs::write(tmp.path().join("cores/45.perf_context_switch_trace"), &s).unwrap();
        std::fs::write(&desc, &json).unwrap();
        let o = ptdec().arg(&desc).arg("-o").arg(&out).output().unwrap();
        let err = text(&o.stderr);
        assert!(
            o.status.code().is_some_and(|c| c <= 2) && !err.contains("panicked"),
            "{err}"
        );
    }
}

/// Runs ptdec with `args` under an address-space limit of `limit` bytes
/// (`prlimit --as`, as a small machine or `ulimit -v` has); returns its
/// exit code and stderr, after checking that it neither aborted nor
/// panicked.
fn ptdec_under(limit: u64, args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    let o = Command::new("prlimit")
        .arg(format!("--as={limit}"))
        .arg(env!("CARGO_BIN_EXE_ptdec"))
        .args(args)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.code().is_some(), "{args:?}: {:?}: {err}", o.status);
    for bad in ["panicked", "memory allocation", "out of memory"] {
        assert!(!err.contains(bad), "{args:?}: {err}");
    }
    (o.status.code(), err)
}

/// The single-thread bundle copied to `dir`, with its trace replaced by a
/// sparse file of `len` zero bytes (no disk space, no PSB).
fn bundle_with_sparse_trace(real: &Path, dir: &Path, len: u64) {
    for f in ["trace.json", "a.out"] {
        std::fs::copy(real.join(f), dir.join(f)).unwrap();
    }
    let trace = std::fs::File::create(dir.join("3842849.trace")).unwrap();
    trace.set_len(len).unwrap();
}

/// A bundle's trace is mapped, not copied into an in-memory perf.data
/// (which held it about 3 times: a 1 GiB trace took 3.15 GB): with a
/// 2 GiB trace, `ptdec info` and the decode run under a 3.5 GB
/// address-space limit, of which the mapping alone takes 2 GiB. The zeros
/// hold no PSB, so the decode says that nothing could be decoded.
#[test]
fn a_big_bundle_trace_is_mapped_not_copied() {
    let test = "a_big_bundle_trace_is_mapped_not_copied";
    let Some(real) = bundle(test, "intelpt-trace") else {
        return;
    };
    if !pt_tests::have_tool(test, "prlimit") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("big");
    std::fs::create_dir(&dir).unwrap();
    bundle_with_sparse_trace(&real, &dir, 2 << 30);
    let limit = 3_500_000_000;
    let (code, err) = ptdec_under(limit, &["info".as_ref(), dir.as_os_str()]);
    assert_eq!(code, Some(0), "{err}");
    let out = tmp.path().join("out.ftf");
    let (code, err) = ptdec_under(
        limit,
        &[
            dir.as_os_str(),
            "-q".as_ref(),
            "-o".as_ref(),
            out.as_os_str(),
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("nothing decoded"), "{err}");
    assert!(!out.exists());
}

/// A copy of the single-thread bundle in `dir` whose one process lists
/// `n` threads, all naming its trace file, which is the real 4 KiB trace
/// repeated `times` times.
fn bundle_of_threads_sharing_a_trace(real: &Path, dir: &Path, n: usize, times: usize) {
    std::fs::copy(real.join("a.out"), dir.join("a.out")).unwrap();
    let trace = std::fs::read(real.join("3842849.trace")).unwrap();
    std::fs::write(dir.join("3842849.trace"), trace.repeat(times)).unwrap();
    let threads: Vec<String> = (0..n)
        .map(|i| {
            format!(
                "{{\"tid\": {}, \"iptTrace\": \"3842849.trace\"}}",
                1_000_000 + i
            )
        })
        .collect();
    let json = std::fs::read_to_string(real.join("trace.json"))
        .unwrap()
        .replace(
            "{\n          \"tid\": 3842849,\n          \"iptTrace\": \"3842849.trace\"\n        }",
            &threads.join(", "),
        );
    assert!(json.contains("1000000"), "the thread list was not replaced");
    std::fs::write(dir.join("trace.json"), json).unwrap();
}

/// Threads naming one trace file share its one mapping: 20,000 threads
/// naming one 256 KiB trace took 20,000 copies of it (5 GiB, and an abort
/// at 3.4 GB was the issue's 10^5 threads), now `ptdec info` runs in a
/// few MB; and 2,000 such threads each decode the trace's 21 instructions.
#[test]
fn threads_sharing_a_trace_file_share_its_mapping() {
    let test = "threads_sharing_a_trace_file_share_its_mapping";
    let Some(real) = bundle(test, "intelpt-trace") else {
        return;
    };
    if !pt_tests::have_tool(test, "prlimit") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("many");
    std::fs::create_dir(&dir).unwrap();
    bundle_of_threads_sharing_a_trace(&real, &dir, 20_000, 64);
    let (code, err) = ptdec_under(4_000_000_000, &["info".as_ref(), dir.as_os_str()]);
    assert_eq!(code, Some(0), "{err}");

    bundle_of_threads_sharing_a_trace(&real, &dir, 2_000, 1);
    let out = tmp.path().join("out.ftf");
    let o = decode(&dir, &out, &[]);
    let threads = thread_insns(&text(&o.stderr));
    assert_eq!(threads.len(), 2_000);
    assert!(threads.iter().all(|t| t.1 == 21), "{threads:?}");
}

/// A bundle past the limits is refused at once with the limit named, exit
/// 1 and nothing written: more than 65,536 traces (10^5 threads naming one
/// trace), more than 2^20 entries (7 million tiny module objects), or a
/// trace.json over 64 MiB.
#[test]
fn bundles_past_the_limits_are_refused_naming_them() {
    let test = "bundles_past_the_limits_are_refused_naming_them";
    let Some(real) = bundle(test, "intelpt-trace") else {
        return;
    };
    if !pt_tests::have_tool(test, "prlimit") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("many");
    std::fs::create_dir(&dir).unwrap();
    bundle_of_threads_sharing_a_trace(&real, &dir, 100_000, 1);
    let out = tmp.path().join("out.ftf");
    for args in [
        vec!["info".as_ref(), dir.as_os_str()],
        vec![dir.as_os_str(), "-o".as_ref(), out.as_os_str()],
    ] {
        // Refused with one line and nothing written, within 4 GB of address
        // space (no clock: speed is scripts/bench's business).
        let (code, err) = ptdec_under(4_000_000_000, &args);
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains(
                "the bundle lists more than 65536 traces (threads with an iptTrace, and cores): \
                 ptdec reads at most 65536 per bundle"
            ),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!out.exists());
    }

    // 60 MB of tiny objects: more than 2^20 entries (parsed whole into
    // JSON values they took 75 times their size and aborted).
    let tiny = vec!["{\"a\": 1}"; 7_000_000].join(",");
    std::fs::write(
        dir.join("trace.json"),
        format!(
            "{{\"type\": \"intel-pt\", \"processes\": [{{\"pid\": 1, \"modules\": [{tiny}]}}]}}"
        ),
    )
    .unwrap();
    let (code, err) = ptdec_under(4_000_000_000, &["info".as_ref(), dir.as_os_str()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(
            "the bundle lists more than 1048576 processes, threads, modules and cores: ptdec \
             reads at most 1048576 per bundle"
        ),
        "{err}"
    );

    // 65 MiB of blanks before the JSON (the folder is the input: a file
    // is taken for a bundle when it starts with `{`).
    let json = dir.join("trace.json");
    let body = std::fs::read(real.join("trace.json")).unwrap();
    let mut big = vec![b' '; 65 << 20];
    big.extend_from_slice(&body);
    std::fs::write(&json, big).unwrap();
    let (code, err) = ptdec_under(
        4_000_000_000,
        &[dir.as_os_str(), "-o".as_ref(), out.as_os_str()],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("trace.json: 68157973 bytes: ptdec reads a trace.json of at most 64 MiB"),
        "{err}"
    );
    assert!(!out.exists());
}

/// The single-thread bundle copied to `dir` with `n` more modules, none of
/// whose files exist, at loads 64 KiB apart in descending order (so that
/// each one's next module is found among all the others).
fn bundle_with_missing_modules(real: &Path, dir: &Path, n: usize) {
    for f in ["a.out", "3842849.trace"] {
        std::fs::copy(real.join(f), dir.join(f)).unwrap();
    }
    let modules: Vec<String> = (0..n)
        .map(|i| {
            format!(
                "{{\"file\": \"lib{i}.so\", \"systemPath\": \"/nonexistent/lib{i}.so\", \
                 \"loadAddress\": {}}}",
                0x7000_0000_0000u64 - i as u64 * 0x10000
            )
        })
        .collect();
    let json = std::fs::read_to_string(real.join("trace.json"))
        .unwrap()
        .replace(
            "\"uuid\": \"6AA9A4E2-6F28-2F33-377D-59FECE874C71-5B41261A\"\n        }",
            &format!(
                "\"uuid\": \"6AA9A4E2-6F28-2F33-377D-59FECE874C71-5B41261A\"\n        }}, {}",
                modules.join(", ")
            ),
        );
    assert!(json.contains("lib0.so"), "the module list was not extended");
    std::fs::write(dir.join("trace.json"), json).unwrap();
}

/// 10^5 modules, none of them found: the warnings are summarised, three
/// then a count, and one line with -q (one per module before, -q or not).
/// The thread still decodes its 21 instructions in a.out. (Finding each
/// module's next load address was a scan of all the others, 30 s for 10^5:
/// `input::lldb::tests::next_loads_are_found_in_n_log_n` in ptdec-core
/// counts the loads it compares, not the time.)
#[test]
fn many_missing_modules_are_read_and_summarised() {
    let test = "many_missing_modules_are_read_and_summarised";
    let Some(real) = bundle(test, "intelpt-trace") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("modules");
    std::fs::create_dir(&dir).unwrap();
    bundle_with_missing_modules(&real, &dir, 100_000);
    let out = tmp.path().join("out.ftf");
    let o = decode(&dir, &out, &[]);
    let err = text(&o.stderr);
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert!(warnings.len() <= 6, "{warnings:#?}");
    for want in [
        "processes[0].modules[1].file names",
        "lib0.so, which does not exist, and /nonexistent/lib0.so is neither under a --sysroot \
         nor on this machine",
        "and 99997 more warnings about modules[] like those above; `ptdec info` lists every \
         module and whether it was found",
    ] {
        assert!(err.contains(want), "{want:?} not in {err}");
    }
    assert_eq!(thread_insns(&err), vec![((1234, 3842849), 21)], "{err}");
    // The summary stays short: missing images are listed up to a bound.
    assert!(err.lines().count() < 80, "{} lines", err.lines().count());

    let o = decode(&dir, &out, &["-q"]);
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("ptdec: warning: 100001 warnings about the bundle ")
            && err.contains("the first: ")
            && err.contains("run without -q to see more of them"),
        "{err}"
    );
}

/// A bundle may name files anywhere (LLDB allows absolute paths): those
/// outside its folder are read and named in a warning; devices, FIFOs and
/// folders are refused by name instead of read for ever or blocking on
/// (`iptTrace` naming /dev/zero, a FIFO as `contextSwitchTrace`, a module
/// `file` that is a FIFO); and a `uuid` with a multi-byte character is
/// no build-id rather than a panic.
#[test]
fn files_outside_the_bundle_are_named_and_devices_refused() {
    let test = "files_outside_the_bundle_are_named_and_devices_refused";
    let Some(real) = bundle(test, "intelpt-trace") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("b");
    std::fs::create_dir(&dir).unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::copy(real.join("a.out"), dir.join("a.out")).unwrap();
    std::fs::copy(real.join("3842849.trace"), elsewhere.join("t.trace")).unwrap();
    let json = std::fs::read_to_string(real.join("trace.json")).unwrap();
    let write = |json: String| std::fs::write(dir.join("trace.json"), json).unwrap();

    // The trace through `../`: decoded, and named.
    write(json.replace("\"3842849.trace\"", "\"../elsewhere/t.trace\""));
    let out = tmp.path().join("out.ftf");
    let o = decode(&dir, &out, &[]);
    let err = text(&o.stderr);
    // Named as the bundle names it (joined to the folder).
    let want = "/../elsewhere/t.trace (processes[0].threads[0].iptTrace)";
    assert!(
        err.contains("read 1 file outside the bundle's folder ") && err.contains(want),
        "{want:?} not in {err}"
    );
    assert_eq!(thread_insns(&err), vec![((1234, 3842849), 21)], "{err}");
    // With -q, a bundle's warnings are one line naming the first: this
    // one, even after a warning about cpuInfo read before it.
    let cpu_at = json.find("\"cpuInfo\"").unwrap();
    let cpu_end = cpu_at + json[cpu_at..].find('}').unwrap() + 1;
    let no_cpu = format!("{}\"cpuInfo\": {{}}{}", &json[..cpu_at], &json[cpu_end..]);
    write(no_cpu.replace("\"3842849.trace\"", "\"../elsewhere/t.trace\""));
    let o = decode(&dir, &out, &["-q"]);
    let err = text(&o.stderr);
    assert!(err.contains("warnings about the bundle"), "-q: {err}");
    assert!(
        err.contains("the first: ") && err.contains("trace.json: read 1 file outside the bundle"),
        "-q: {err}"
    );
    write(json.replace("\"3842849.trace\"", "\"../elsewhere/t.trace\""));
    // `ptdec info` says it too.
    let o = ptdec().arg("info").arg(&dir).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let all = text(&o.stdout) + &text(&o.stderr);
    assert!(all.contains("outside the bundle's folder"), "{all}");

    // A trace inside the folder: no such warning.
    std::fs::copy(real.join("3842849.trace"), dir.join("3842849.trace")).unwrap();
    write(json.clone());
    let err = text(&decode(&dir, &out, &[]).stderr);
    assert!(!err.contains("outside the bundle"), "{err}");

    // /dev/zero as the trace: refused by name, at once.
    write(json.replace("\"3842849.trace\"", "\"/dev/zero\""));
    let o = ptdec().arg(&dir).arg("-o").arg(&out).output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("/dev/zero, which is a device, not a regular file"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    // A FIFO as a module file: said, and the module left out (the trace
    // decodes to nothing of a.out's code, but nothing blocks).
    let fifo = dir.join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    write(json.replace("\"file\": \"a.out\"", "\"file\": \"fifo\""));
    let o = ptdec().arg(&dir).arg("-o").arg(&out).output().unwrap();
    let err = text(&o.stderr);
    assert!(
        err.contains("fifo, which is a FIFO, not a regular file"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    // A module file that is a symbolic link loop: said as one (it was
    // "does not exist"), and the module left out.
    std::os::unix::fs::symlink("loop-b", dir.join("loop-a")).unwrap();
    std::os::unix::fs::symlink("loop-a", dir.join("loop-b")).unwrap();
    write(json.replace("\"file\": \"a.out\"", "\"file\": \"loop-a\""));
    let o = ptdec().arg(&dir).arg("-o").arg(&out).output().unwrap();
    let err = text(&o.stderr);
    assert!(
        err.contains("loop-a, which is a symbolic link loop") && !err.contains("does not exist"),
        "{err}"
    );

    // A uuid with a multi-byte character: no build-id, no panic, and
    // said: the module is used unchecked.
    write(json.replace("6AA9A4E2-6F28-2F33-377D-59FECE874C71-5B41261A", "a\u{e9}a"));
    let err = text(&decode(&dir, &out, &[]).stderr);
    assert_eq!(thread_insns(&err), vec![((1234, 3842849), 21)], "{err}");
    assert!(
        err.contains("processes[0].modules[0].uuid \"a\u{e9}a\" is not a build-id")
            && err.contains("used without checking"),
        "{err}"
    );

    // A uuid that is no string: said too.
    write(json.replace("\"6AA9A4E2-6F28-2F33-377D-59FECE874C71-5B41261A\"", "12345"));
    let err = text(&decode(&dir, &out, &[]).stderr);
    assert!(
        err.contains("processes[0].modules[0].uuid is 12345, not a string of hex digits"),
        "{err}"
    );

    // A systemPath that is a device, with no file in the bundle: named as
    // a device, not as missing.
    write(
        json.replace("\"file\": \"a.out\"", "\"file\": \"gone\"")
            .replace("\"systemPath\": \"a.out\"", "\"systemPath\": \"/dev/null\""),
    );
    let err = text(&decode(&dir, &out, &[]).stderr);
    assert!(
        err.contains("gone, which does not exist, and /dev/null is a device, not a regular file"),
        "{err}"
    );

    // A module file whose name holds a newline and an ESC: `ptdec info`
    // and the decode show it escaped, never as a line of its own.
    let odd = "a\nFAKE: ok\u{1b}[31m\u{202e}.out";
    std::fs::copy(real.join("a.out"), dir.join(odd)).unwrap();
    write(json.replace(
        "\"file\": \"a.out\"",
        &format!("\"file\": {}", serde_json::to_string(odd).unwrap()),
    ));
    let o = ptdec().arg("info").arg(&dir).output().unwrap();
    let all = text(&o.stdout) + &text(&o.stderr);
    assert!(o.status.success(), "{all}");
    assert!(
        all.contains(r"a\nFAKE: ok\u{1b}[31m\u{202e}.out")
            && !all.contains("\nFAKE")
            && !all.contains('\u{1b}')
            && !all.contains('\u{202e}'),
        "{all}"
    );
    let err = text(&decode(&dir, &out, &[]).stderr);
    assert!(!err.contains("\nFAKE") && !err.contains('\u{1b}'), "{err}");
    std::fs::remove_file(dir.join(odd)).unwrap();

    // /proc/self/exe (ptdec itself) is named as the bundle names it, not
    // as ptdec's own pid; a name with control characters is shown escaped.
    write(json.replace("\"file\": \"a.out\"", "\"file\": \"/proc/self/exe\""));
    let err = text(&decode(&dir, &out, &[]).stderr);
    assert!(
        err.contains(": /proc/self/exe (processes[0].modules[0].file)"),
        "{err}"
    );
    write(json.replace("\"file\": \"a.out\"", "\"file\": \"x\\u001b[31my\""));
    let err = text(&decode(&dir, &out, &[]).stderr);
    assert!(
        err.contains("x\\u{1b}[31my, which does not exist") && !err.contains('\u{1b}'),
        "{err}"
    );
}
