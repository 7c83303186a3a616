//! libipt's own test suite against `ptdec raw`: every `test/src/*.ptt` of
//! the libipt ptdec was built with (`LIBIPT_SRC`, or the tree `scripts/setup`
//! fetched from Debian's source package) is assembled by that tree's `pttc`
//! (built here with cmake, cached under target/tmp; pttc needs yasm),
//! and `ptdec raw` decodes the `.pt` with the code loaded as ptxed gets it
//! in libipt's `script/test.bash` (`--raw X.bin:ORG`, the `; cpu` line's
//! `--cpu`, one run per `; cpu` line, and the `; opt:ptxed` options that
//! change decoding or what is listed). Its `--insn-list` must equal
//! `X-ptxed.exp` in every instruction address, every error (trace offset
//! and libipt's message), every overflow, and every perf_event sideband
//! record, warning and context switch ptxed prints (`--sb:*`), in order.
//! Tests that need what `ptdec raw` does not
//! have are in [`NOT_APPLICABLE`] with the reason, and runs where libipt's
//! block decoder, configured as ptdec configures it, differs from ptxed's
//! in [`LIBIPT_DEFECTS`].

mod ptxed;

use ptxed::{
    compare, expects_unknown_cpu, is_sideband_note, is_sideband_print, map_options, ptdec_raw,
    sideband_options, squeeze,
};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Tests whose expectations need what `ptdec raw` does not have.
const NOT_APPLICABLE: &[(&str, &str)] = &[(
    "ptxed-resync-nomap-mode_exec-fup",
    "ptdec ends libipt's blocks at every call (end_on_call, so that each call is \
     seen); libipt then reports the no-map error after the call only once it has \
     read ahead past the FUP at 0x24 (ptdec: offset 0x2c), and pt_blk_resync \
     resumes after that FUP, so the instruction at l2 is not decoded",
)];

/// Runs where libipt itself gives ptdec a different flow than ptxed, and
/// why. The test requires that libipt still differs from ptxed (a libipt
/// that fixes the defect makes it fail and the entry is removed) and that
/// `--decoder fast`, which does not share the defect, equals ptxed there.
const LIBIPT_DEFECTS: &[(&str, &str)] = &[(
    "skl014-jmp-jmp",
    "libipt's SKL014 workaround (pt_blk_proceed_skl014, 2.1.2 and 2.2 alike) ends \
     the block at a direct jump when the decoder was configured with end_on_jump, \
     as ptdec is (to see every jump), but returns 'event location reached', so the \
     TIP.PGD without payload is bound after the first jump: ptdec lists 0x1000 and \
     not the second jump at 0x1003 (the fast decoder lists both, as ptxed)",
)];

/// The libipt source tree ptdec was built from: `LIBIPT_SRC`, else the copy
/// `scripts/setup` fetched from Debian's source package. Its pttc, tests and
/// expectations belong to the same libipt as the decoder under test.
fn libipt_tree(test: &str) -> Option<PathBuf> {
    let tree = std::env::var_os("LIBIPT_SRC")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cache/libipt-2.1.2"));
    if tree.join("test/src").is_dir() {
        Some(tree)
    } else {
        pt_tests::missing(
            test,
            &format!(
                "{} holds no libipt source tree with test/src",
                tree.display()
            ),
        )
    }
}

/// Builds pttc from that tree (once per tree; make is incremental).
fn build_pttc(test: &str, tree: &Path) -> Option<PathBuf> {
    for tool in ["cmake", "make", "yasm"] {
        if !pt_tests::have_tool(test, tool) {
            return None;
        }
    }
    let key: String = tree
        .display()
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let build = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("pttc-pevent-{key}"));
    let pttc = build.join("bin/pttc");
    let run = |c: &mut Command| {
        let out = c.output().expect("run cmake/make");
        assert!(
            out.status.success(),
            "{c:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    if !build.join("Makefile").is_file() {
        run(Command::new("cmake")
            .arg("-S")
            .arg(tree)
            .arg("-B")
            .arg(&build)
            .args([
                "-DPTTC=ON",
                // pttc writes the `.sb` files of `@sb` directives.
                "-DSIDEBAND=ON",
                "-DPEVENT=ON",
                "-DBUILD_SHARED_LIBS=OFF",
                "-DCMAKE_BUILD_TYPE=Release",
            ]));
    }
    run(Command::new("make")
        .arg("-C")
        .arg(&build)
        .args(["-j2", "pttc"]));
    Some(pttc)
}

/// `; KEY VALUE` directives of a .ptt (script/test.bash's sed expressions).
fn directives(text: &str, key: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start().strip_prefix(';')?.trim_start();
            let rest = l.strip_prefix(key)?;
            rest.starts_with([' ', '\t'])
                .then(|| rest.trim().to_string())
        })
        .collect()
}

/// The `org` address.
fn org(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let l = l.trim();
        let lower = l.to_ascii_lowercase();
        lower.strip_prefix("org").map(|_| l[3..].trim().to_string())
    })
}

struct Outcome {
    runs: usize,
    equal: usize,
    /// Of them, runs with perf_event sideband.
    sideband_runs: usize,
    sideband_equal: usize,
    /// Sideband lines (records, switches, warnings) of the equal runs.
    sideband_lines: usize,
    /// ptdump-only sideband tests whose records ptdec listed, and how
    /// many of them equal ptdump's, and their lines.
    dump_runs: usize,
    dump_equal: usize,
    dump_lines: usize,
    failures: Vec<String>,
    not_applicable: Vec<String>,
    /// Runs `--decoder fast` decoded without libipt, and the others.
    fast: usize,
    fallback: Vec<String>,
}

#[test]
fn libipt_ptt_suite_matches_ptxed() {
    let test = "libipt_ptt_suite_matches_ptxed";
    let Some(tree) = libipt_tree(test) else {
        return;
    };
    let Some(pttc) = build_pttc(test, &tree) else {
        return;
    };
    // The core tests, and those of perf_event sideband (test/pevent).
    let mut ptts: Vec<PathBuf> = Vec::new();
    for sub in ["test/src", "test/pevent/src"] {
        let src = tree.join(sub);
        let mut v: Vec<PathBuf> = std::fs::read_dir(&src)
            .unwrap_or_else(|e| panic!("{}: {e}", src.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "ptt"))
            .collect();
        v.sort();
        ptts.extend(v);
    }
    assert!(
        ptts.len() > 150,
        "only {} .ptt files in {}",
        ptts.len(),
        tree.display()
    );
    let work = tempfile::tempdir().unwrap();
    let mut o = Outcome {
        runs: 0,
        equal: 0,
        sideband_runs: 0,
        sideband_equal: 0,
        sideband_lines: 0,
        dump_runs: 0,
        dump_equal: 0,
        dump_lines: 0,
        failures: Vec::new(),
        not_applicable: Vec::new(),
        fast: 0,
        fallback: Vec::new(),
    };
    for ptt in &ptts {
        run_ptt(&pttc, ptt, work.path(), &mut o);
    }
    eprintln!(
        "ptt suite: {} files, {} runs, {} equal to ptxed ({} runs with sideband, {} equal, \
         {} sideband lines among them); sideband records of {} ptdump-only tests, {} equal \
         ({} lines); {} not applicable:\n  {}",
        ptts.len(),
        o.runs,
        o.equal,
        o.sideband_runs,
        o.sideband_equal,
        o.sideband_lines,
        o.dump_runs,
        o.dump_equal,
        o.dump_lines,
        o.not_applicable.len(),
        o.not_applicable.join("\n  ")
    );
    // Every sideband run lists records (the suite's `--sb:*` options).
    assert!(
        o.sideband_runs == 0 || o.sideband_lines >= o.sideband_runs,
        "only {} sideband lines compared in {} runs",
        o.sideband_lines,
        o.sideband_runs
    );
    eprintln!(
        "--decoder fast: {} runs decoded by ptdec's own flow decoder alone, {} with libipt's help:\n  {}",
        o.fast,
        o.fallback.len(),
        o.fallback.join("\n  ")
    );
    assert!(
        o.failures.is_empty(),
        "{} of {} runs differ from ptxed:\n{}",
        o.failures.len(),
        o.runs,
        o.failures.join("\n")
    );
}

fn run_ptt(pttc: &Path, ptt: &Path, work: &Path, o: &mut Outcome) {
    let name = ptt.file_stem().unwrap().to_string_lossy().into_owned();
    let text = std::fs::read_to_string(ptt).unwrap();
    if let Some((_, why)) = NOT_APPLICABLE.iter().find(|(n, _)| *n == name) {
        o.not_applicable.push(format!("{name}: {why}"));
        return;
    }
    let cpus = directives(&text, "cpu");
    let cpus: Vec<Option<&str>> = if cpus.is_empty() {
        vec![None]
    } else {
        cpus.iter().map(|c| Some(c.as_str())).collect()
    };
    let org = org(&text).unwrap_or_else(|| panic!("{name}: no org directive"));
    let opts = directives(&text, "opt:ptxed");
    for cpu in cpus {
        let dir = work.join(format!(
            "{name}-{}",
            cpu.unwrap_or("none").replace('/', "_")
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = Command::new(pttc);
        if let Some(cpu) = cpu {
            c.args(["--cpu", cpu]);
        }
        let out = c.arg(ptt).current_dir(&dir).output().unwrap();
        let files: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect();
        if !out.status.success() {
            o.failures.push(format!(
                "{name}: pttc failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
            continue;
        }
        // `X-ptxed.exp`, or `X-ptxed-cpu_F_M.exp` for a `; cpu` line.
        let Some(exp) = files
            .iter()
            .find(|f| f.ends_with(".exp") && f.contains("-ptxed"))
        else {
            // A ptdump-only test; one that prints sideband is compared
            // for the records' text.
            let dump_opts = directives(&text, "opt:ptdump");
            if files.iter().any(|f| f.ends_with(".sb"))
                && dump_opts.iter().any(|l| l.contains("--sb:"))
            {
                dump_sideband(pttc, &name, &dir, &files, &dump_opts, o);
            }
            continue;
        };
        o.runs += 1;
        let sideband = files.iter().any(|f| f.ends_with(".sb"));
        o.sideband_runs += usize::from(sideband);
        let (mut args, _resync) = match map_options(&opts, &dir) {
            Ok(a) => a,
            Err(why) => {
                o.failures.push(format!("{name}: unmapped {why}"));
                continue;
            }
        };
        if let Some(cpu) = cpu {
            args.extend(["--cpu".to_string(), cpu.to_string()]);
        }
        let exp_text = std::fs::read_to_string(dir.join(exp)).unwrap();
        let list = dir.join("ptdec.list");
        // libipt's decode, the reference (the default decoder is the fast
        // one, which does not share libipt's defects).
        let out = ptdec_raw(&dir, &name, &org, &list, &dir.join("out.ftf"))
            .arg("--decoder")
            .arg("libipt")
            .args(&args)
            .args(sideband_options(&name, &files))
            .arg("-q")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // ptxed reports a CPU it knows no errata for as a configuration
        // error; ptdec refuses it.
        if expects_unknown_cpu(&exp_text) {
            if !out.status.success() && stderr.contains("knows no CPU") {
                o.equal += 1;
            } else {
                o.failures
                    .push(format!("{name}: an unknown CPU was not refused: {stderr}"));
            }
            continue;
        }
        if !out.status.success() {
            o.failures.push(format!(
                "{name} {cpu:?}: ptdec raw {args:?} failed: {stderr}"
            ));
            continue;
        }
        let got_text = std::fs::read_to_string(&list).unwrap();
        // The same run with ptdec's own flow decoder (issue 23): the
        // same listing and FTF, whichever chunks it hands to libipt.
        let fast_list = dir.join("fast.list");
        let fast = ptdec_raw(&dir, &name, &org, &fast_list, &dir.join("fast.ftf"))
            .arg("--decoder")
            .arg("fast")
            .args(&args)
            .args(sideband_options(&name, &files))
            .output()
            .unwrap();
        let fast_err = String::from_utf8_lossy(&fast.stderr);
        let defect = LIBIPT_DEFECTS.iter().find(|(n, _)| *n == name);
        let fast_same = if defect.is_some() {
            // Where libipt is wrong the fast decoder must equal ptxed.
            fast.status.success()
                && std::fs::read_to_string(&fast_list).is_ok_and(|l| compare(&l, &exp_text).same)
        } else {
            fast.status.success()
                && std::fs::read_to_string(&fast_list).ok().as_ref() == Some(&got_text)
                && std::fs::read(dir.join("fast.ftf")).ok()
                    == std::fs::read(dir.join("out.ftf")).ok()
        };
        if !fast_same {
            o.failures.push(format!(
                "{name} (cpu {cpu:?}, {args:?}): --decoder fast differs from {}: {fast_err}",
                if defect.is_some() {
                    "ptxed's expectation (where libipt is wrong)"
                } else {
                    "libipt's"
                }
            ));
        }
        match fast_err.lines().find(|l| l.contains("flow decoder")) {
            Some(l) if l.contains("libipt for 0") => o.fast += 1,
            Some(l) => o.fallback.push(format!("{name}: {}", l.trim())),
            None => o.fallback.push(format!("{name}: nothing decoded")),
        }
        let c = compare(&got_text, &exp_text);
        let same = c.same;
        if let Some((_, why)) = defect {
            if same {
                o.failures.push(format!(
                    "{name}: equals ptxed now; remove it from LIBIPT_DEFECTS ({why})"
                ));
            } else {
                o.runs -= 1;
                o.not_applicable
                    .push(format!("{name} {cpu:?}: libipt defect: {why}"));
            }
        } else if same {
            o.equal += 1;
            o.sideband_equal += usize::from(sideband);
            o.sideband_lines += c
                .want
                .iter()
                .filter(|l| is_sideband_print(l) || is_sideband_note(l))
                .count();
        } else {
            o.failures.push(format!(
                "{name} (cpu {cpu:?}, {args:?}):\n  ptxed: {:?} (insn count {:?})\n  ptdec: {:?}",
                c.want, c.count, c.got
            ));
        }
    }
}

/// A trace of our own for [`dump_sideband`]: tracing enabled once, at a
/// time later than any record of libipt's sideband tests, so that every
/// record is applied, and listed, at that first event.
const LATE_ENABLE_PTT: &str = "\
org 0x1000
bits 64
; @pt p0: psb()
; @pt p1: mode.exec(64bit)
; @pt p2: tsc(0xffffffffffff)
; @pt p3: fup(3: %l0)
; @pt p4: psbend()
l0: nop
; @pt p5: fup(1: %l1)
; @pt p6: tip.pgd(0: %l1)
l1: hlt
";

/// A ptdump-only test's sideband (libipt's `pevent-dump*`: every record
/// type, compact and verbose, with offsets and times): ptdump prints the
/// records as ptxed does (libipt-sb's one printing function), so the
/// records ptdec lists with the same `--sb:*` options, decoding a trace of
/// ours with the test's `.sb` files, must equal the record lines of its
/// `X-ptdump.exp` (blanks squeezed, as `diff -b`), in order.
fn dump_sideband(
    pttc: &Path,
    name: &str,
    dir: &Path,
    files: &[String],
    dump_opts: &[String],
    o: &mut Outcome,
) {
    let Some(exp) = files.iter().find(|f| f.ends_with("-ptdump.exp")) else {
        return;
    };
    o.dump_runs += 1;
    let late = dir.join("late-enable.ptt");
    std::fs::write(&late, LATE_ENABLE_PTT).unwrap();
    let out = Command::new(pttc)
        .arg(&late)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pttc late-enable.ptt: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sb_opts: Vec<&str> = dump_opts
        .iter()
        .flat_map(|l| l.split_whitespace())
        .filter(|w| w.starts_with("--sb"))
        .collect();
    let list = dir.join("ptdec-sb.list");
    let out = Command::new(env!("CARGO_BIN_EXE_ptdec"))
        .arg("raw")
        .arg("--pt")
        .arg(dir.join("late-enable.pt"))
        .arg("--raw")
        .arg(format!("{}:0x1000", dir.join("late-enable.bin").display()))
        .args(&sb_opts)
        .args(sideband_options(name, files))
        .current_dir(dir)
        .arg("--insn-list")
        .arg(&list)
        .args(["-q", "--time-axis", "instructions", "-o"])
        .arg(dir.join("out-sb.ftf"))
        .output()
        .unwrap();
    if !out.status.success() {
        o.failures.push(format!(
            "{name}: ptdec raw {sb_opts:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
        return;
    }
    // ptdump's lines of records (a verbose record's fields are indented);
    // ptdec's lines but for instructions and events.
    let exp_text = std::fs::read_to_string(dir.join(exp)).unwrap();
    let want: Vec<String> = exp_text
        .lines()
        .filter(|l| l.starts_with([' ', '\t']) || is_sideband_print(l))
        .map(squeeze)
        .collect();
    let got: Vec<String> = std::fs::read_to_string(&list)
        .unwrap()
        .lines()
        .filter(|l| {
            let insn = l.len() == 16 && l.bytes().all(|b| b.is_ascii_hexdigit());
            !insn && !l.starts_with('[')
        })
        .map(squeeze)
        .collect();
    if !want.is_empty() && got == want {
        o.dump_equal += 1;
        o.dump_lines += want.len();
    } else {
        o.failures.push(format!(
            "{name} ({sb_opts:?}): sideband records\n  ptdump: {want:?}\n  ptdec:  {got:?}"
        ));
    }
}
