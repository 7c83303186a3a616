//! The `ptdec` binary's whole-trace answers (issue 22): `ptdec report` as a
//! table, CSV, JSON, folded stacks and an SVG flame graph on a ptsim trace
//! of `fixtures/programs/interp` (its loop repeated), a slowest call decoded
//! again from the window the report prints, `ptdec TRACE --min-duration`,
//! and clean failures for bad input. gcc (for the fixture) follows
//! `pt_tests`' tool policy; the Perfetto check runs where
//! `PT_TRACE_PROCESSOR` names a trace_processor_shell.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ptdec() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ptdec"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs ptdec and returns its stdout, failing the test on an error.
fn run(args: &[&str]) -> String {
    let out = ptdec().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ptdec {args:?}: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// A failure with exit status `code`, no panic; its stderr.
fn fails(out: &Output, code: i32) -> String {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// A ptsim trace of the interpreter with its loop run 30 more times, in
/// `dir`; `None` without gcc (the tool policy).
fn interp_trace(test: &str, dir: &Path) -> Option<PathBuf> {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-programs");
    let progs = pt_tests::fixture_programs(test, &out)?;
    let trace = dir.join("interp.dir");
    let mut o = ptsim::sim::Options::new(progs.join("interp"), Vec::new(), &trace);
    o.env = Some(Vec::new());
    o.repeat = vec!["interp_run=30".parse().unwrap()];
    let r = ptsim::sim::run(o).unwrap();
    assert_eq!(r.repeats.len(), 1, "{:?}", r.warnings);
    Some(trace)
}

/// The CSV's rows as fields (quoted fields unquoted).
fn csv_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(|line| {
            let mut fields = Vec::new();
            let mut field = String::new();
            let mut quoted = false;
            let mut chars = line.chars().peekable();
            while let Some(c) = chars.next() {
                match c {
                    '"' if quoted && chars.peek() == Some(&'"') => {
                        field.push('"');
                        chars.next();
                    }
                    '"' => quoted = !quoted,
                    ',' if !quoted => fields.push(std::mem::take(&mut field)),
                    c => field.push(c),
                }
            }
            fields.push(field);
            fields
        })
        .collect()
}

fn folded_sum(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum()
}

#[test]
fn report_answers_as_table_csv_json_folded_stacks_and_svg() {
    let test = "report_answers_as_table_csv_json_folded_stacks_and_svg";
    let tmp = tempfile::tempdir().unwrap();
    let Some(trace) = interp_trace(test, tmp.path()) else {
        return;
    };
    let t = trace.to_str().unwrap();

    // JSON: the totals, every function, the slowest calls.
    let json: serde_json::Value = serde_json::from_str(&run(&[
        "report",
        t,
        "-q",
        "--format",
        "json",
        "--slowest",
        "8",
    ]))
    .unwrap();
    let insns = json["insns"].as_u64().unwrap();
    let functions = json["functions"].as_array().unwrap();
    assert!(insns > 500_000 && functions.len() > 20, "{json}");
    let self_insns: u64 = functions
        .iter()
        .map(|f| f["self_insns"].as_u64().unwrap())
        .sum();
    assert_eq!(
        self_insns, insns,
        "self instructions add up to the decoded ones"
    );
    let slowest = json["slowest"].as_array().unwrap();
    assert_eq!(slowest.len(), 8);
    // The calls: call instructions, tail calls, roots and handlers,
    // untraced starts; as the summary counts them.
    let total = |k: &str| json[k].as_u64().unwrap_or_else(|| panic!("{k}: {json}"));
    assert_eq!(
        total("call_instructions") + total("tail_calls") + total("roots") + total("unknown_start"),
        total("calls")
    );
    let out = ptdec().args(["report", t]).output().unwrap();
    let (table, summary) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{summary}");
    let count = |label: &str| -> u64 {
        let line = summary
            .lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no {label} line: {summary}"));
        let n = line.trim_start()[label.len()..].split_whitespace().next();
        n.unwrap().replace(',', "").parse().unwrap()
    };
    assert_eq!(count("calls "), total("call_instructions"), "{summary}");
    assert_eq!(count("tail calls "), total("tail_calls"), "{summary}");
    let heading = table.lines().nth(1).unwrap();
    assert!(
        heading.starts_with("  calls: ")
            && heading.contains(" call instructions (what perf script --itrace=c counts)"),
        "{table}"
    );

    // CSV: the header, every function, by self time.
    let csv = csv_rows(&run(&["report", t, "-q", "--format", "csv"]));
    assert_eq!(
        csv[0].join(","),
        "function,module,calls,total_ns,self_ns,max_ns,insns,self_insns,tail_calls"
    );
    assert_eq!(csv.len() - 1, functions.len());
    let column = |rows: &[Vec<String>], i: usize| -> Vec<u64> {
        rows[1..].iter().map(|r| r[i].parse().unwrap()).collect()
    };
    assert_eq!(column(&csv, 8).iter().sum::<u64>(), total("tail_calls"));
    let by_self = column(&csv, 4);
    assert!(by_self.windows(2).all(|w| w[0] >= w[1]), "{by_self:?}");
    let csv = csv_rows(&run(&[
        "report", t, "-q", "--format", "csv", "--sort", "calls", "--top", "4",
    ]));
    assert_eq!(csv.len(), 5, "--top 4 rows and the header");
    let calls = column(&csv, 2);
    assert!(calls.windows(2).all(|w| w[0] >= w[1]), "{calls:?}");
    let per_thread = csv_rows(&run(&[
        "report",
        t,
        "-q",
        "--format",
        "csv",
        "--per-thread",
    ]));
    assert_eq!(per_thread[0][..4], ["pid", "tid", "thread", "function"]);
    let per_thread_insns: u64 = column(&per_thread, 10).iter().sum();
    assert_eq!(per_thread_insns, insns);

    // The table: the CSV's first function first; the slowest calls with
    // the options that decode each.
    let top = csv_rows(&run(&["report", t, "-q", "--format", "csv", "--top", "1"]));
    let table = run(&["report", t, "-q", "--top", "5", "--slowest", "2"]);
    let mut lines = table.lines().skip_while(|l| !l.starts_with("function "));
    lines.next();
    let first = lines.next().unwrap();
    assert!(first.starts_with(&top[1][0]), "{table}");
    assert!(
        table.contains("slowest calls") && table.contains("--start @"),
        "{table}"
    );

    // Folded stacks and the flame graph: weights add up to the decoded
    // instructions, or to the traced ns with --weight ns.
    let (folded, svg) = (tmp.path().join("out.folded"), tmp.path().join("flame.svg"));
    run(&[
        "report",
        t,
        "-q",
        "--folded",
        folded.to_str().unwrap(),
        "--flamegraph",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(folded_sum(&folded), insns);
    // `--folded -`: the same lines on stdout, instead of the table (it
    // was a file named `-`).
    let on_stdout = ptdec()
        .args(["report", t, "-q", "--folded", "-"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(on_stdout.status.success(), "{}", text(&on_stdout.stderr));
    assert_eq!(
        text(&on_stdout.stdout),
        std::fs::read_to_string(&folded).unwrap()
    );
    assert!(!tmp.path().join("-").exists());
    let image = std::fs::read_to_string(&svg).unwrap();
    assert!(
        image.contains("<svg") && image.contains("interp_run"),
        "{image}"
    );
    run(&[
        "report",
        t,
        "-q",
        "--folded",
        folded.to_str().unwrap(),
        "--weight",
        "ns",
    ]);
    assert_eq!(folded_sum(&folded), json["time_ns"].as_u64().unwrap());

    // The longest call the program made, decoded again from the printed
    // window: the same call, whole.
    let call = slowest
        .iter()
        .find(|c| !c["cut"].as_bool().unwrap())
        .expect("an uncut slow call");
    let window: Vec<&str> = call["window"].as_str().unwrap().split(' ').collect();
    let ftf = tmp.path().join("slow.ftf");
    let mut args = vec![t, "-q", "-o", ftf.to_str().unwrap()];
    args.extend(&window);
    run(&args);
    let name = format!("name={}", call["function"]);
    // The FTF writes a count that fits in 32 bits as a 32-bit argument.
    let insns = match call["insns"].as_u64() {
        Some(n) if n <= u64::from(u32::MAX) => format!("u32({n})"),
        _ => format!("u64({})", call["insns"]),
    };
    let dump = run(&["dump", ftf.to_str().unwrap()]);
    let line = dump
        .lines()
        .find(|l| l.contains("duration_complete") && l.contains(&name) && l.contains(&insns))
        .unwrap_or_else(|| panic!("{call} is not in the window's FTF"));
    assert!(
        !line.contains("\"cut\"") && !line.contains("unknown_start"),
        "{line}"
    );
}

#[test]
fn min_duration_leaves_out_shorter_calls_and_says_so() {
    let test = "min_duration_leaves_out_shorter_calls_and_says_so";
    let tmp = tempfile::tempdir().unwrap();
    let Some(trace) = interp_trace(test, tmp.path()) else {
        return;
    };
    let out_path = tmp.path().join("long.ftf");
    let out = ptdec()
        .arg(&trace)
        .arg("-o")
        .arg(&out_path)
        .args(["--min-duration", "1us"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let line = err
        .lines()
        .find(|l| l.trim_start().starts_with("min duration"))
        .unwrap_or_else(|| panic!("no min duration line: {err}"));
    assert!(line.contains("shorter than 1.000 µs"), "{line}");
    let mut calls = 0;
    for r in ftf::read::parse(&std::fs::read(&out_path).unwrap()).unwrap() {
        if let ftf::read::RecordKind::Event(e) = r.kind {
            if let ftf::read::EventKind::DurationComplete { end } = e.kind {
                if e.category == "call" {
                    assert!(end - e.ts >= 1000, "{} lasts {} ns", e.name, end - e.ts);
                    calls += 1;
                }
            }
        }
    }
    assert!(calls > 10, "{calls} calls kept");
    let Some(tp) = pt_tests::trace_processor(test) else {
        return;
    };
    let view = pt_tests::perfetto_view(&tp, &out_path);
    assert!(view.problems.is_empty(), "{:?}", view.problems);
    let shown: Vec<_> = view
        .slices
        .values()
        .flatten()
        .filter(|s| s.category == "call")
        .collect();
    assert_eq!(shown.len(), calls);
    assert!(shown.iter().all(|s| s.dur >= 1000), "{shown:?}");
}

/// `--min-duration` longer than every call: an error naming the longest
/// call and a threshold that keeps it, exit 1, and an output already there
/// left as it was (it exited 0 with an FTF of no call, without a word).
/// The threshold suggested keeps that call. (`ptdec report` has no
/// `--min-duration`.)
#[test]
fn a_min_duration_longer_than_every_call_is_refused_naming_the_longest() {
    let test = "a_min_duration_longer_than_every_call_is_refused_naming_the_longest";
    let tmp = tempfile::tempdir().unwrap();
    let Some(trace) = interp_trace(test, tmp.path()) else {
        return;
    };
    let out_path = tmp.path().join("long.ftf");
    std::fs::write(&out_path, b"earlier").unwrap();
    let decode = |min: &str| {
        ptdec()
            .arg(&trace)
            .arg("-o")
            .arg(&out_path)
            .args(["-q", "--min-duration", min])
            .output()
            .unwrap()
    };
    let err = fails(&decode("1000s"), 1);
    assert!(
        err.contains("--min-duration 1000.000 s leaves out every call")
            && err.contains("the longest of the")
            && err.contains("Nothing was written"),
        "{err}"
    );
    assert_eq!(std::fs::read(&out_path).unwrap(), b"earlier");
    // "(NNNns or less keeps that call)"
    let keep = err
        .split_once("Give a lower --min-duration (")
        .and_then(|(_, r)| r.split_once(' '))
        .map(|(d, _)| d.to_string())
        .unwrap_or_else(|| panic!("no threshold suggested: {err}"));
    // The threshold suggested keeps the longest call, and only calls as
    // long.
    let o = decode(&keep);
    assert!(o.status.success(), "{keep}: {}", text(&o.stderr));
    let ns: u64 = keep.trim_end_matches("ns").parse().unwrap();
    let mut calls = 0;
    for r in ftf::read::parse(&std::fs::read(&out_path).unwrap()).unwrap() {
        if let ftf::read::RecordKind::Event(e) = r.kind {
            if let ftf::read::EventKind::DurationComplete { end } = e.kind {
                if e.category == "call" {
                    assert!(end - e.ts >= ns, "{} lasts {} ns", e.name, end - e.ts);
                    calls += 1;
                }
            }
        }
    }
    assert!(calls >= 1, "{calls} calls kept");
}

#[test]
fn bad_report_input_fails_with_a_clear_message() {
    let test = "bad_report_input_fails_with_a_clear_message";
    let Some(input) = pt_tests::realdata_file(test, "perf.data.intel_pt-4.14") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    // A writable copy: refusing it must leave it as it was.
    let data = tmp.path().join("perf.data");
    std::fs::copy(&input, &data).unwrap();
    let before = std::fs::read(&data).unwrap();
    // An empty build-id cache: not the user's ~/.debug.
    let cache = tempfile::tempdir().unwrap();
    let report = |extra: &[&str]| {
        ptdec()
            .arg("report")
            .arg(&data)
            .arg("--buildid-dir")
            .arg(cache.path())
            .args(extra)
            .output()
            .unwrap()
    };
    let err = fails(&report(&["--sort", "fastest"]), 2);
    assert!(
        err.contains("--sort") && err.contains("calls, total, self, insns"),
        "{err}"
    );
    let err = fails(&report(&["--top", "0"]), 2);
    assert!(err.contains("--top") && err.contains("at least 1"), "{err}");
    let err = fails(&report(&["--slowest", "0"]), 2);
    assert!(
        err.contains("--slowest") && err.contains("at least 1"),
        "{err}"
    );
    for opt in ["--folded", "--flamegraph"] {
        let err = fails(&report(&[opt, data.to_str().unwrap()]), 1);
        assert!(
            err.contains(opt) && err.contains("trace being read"),
            "{err}"
        );
        assert_eq!(
            std::fs::read(&data).unwrap(),
            before,
            "{opt} changed the input"
        );
    }
    // Both files one file, also through a link not yet leading anywhere:
    // refused (the flame graph replaced the folded stacks, status 0).
    let same = tmp.path().join("same.txt");
    let link = tmp.path().join("link.txt");
    std::os::unix::fs::symlink(&same, &link).unwrap();
    for other in [&same, &link] {
        let (a, b) = (same.to_str().unwrap(), other.to_str().unwrap());
        let err = fails(&report(&["--folded", a, "--flamegraph", b]), 1);
        assert!(err.contains("are the same file"), "{err}");
        assert!(!same.exists());
    }
    // A file standard output is redirected to: the table would be lost
    // when the file replaced it.
    let shown = tmp.path().join("shown.txt");
    let out = ptdec()
        .arg("report")
        .arg(&data)
        .arg("--buildid-dir")
        .arg(cache.path())
        .arg("--folded")
        .arg(&shown)
        .stdout(std::fs::File::create(&shown).unwrap())
        .output()
        .unwrap();
    let err = fails(&out, 1);
    assert!(err.contains("standard output goes to that file"), "{err}");
    let err = fails(&report(&["--format", "csv", "--slowest", "3"]), 1);
    assert!(err.contains("--slowest") && err.contains("json"), "{err}");
    let out = ptdec()
        .arg(&data)
        .arg("-o")
        .arg(tmp.path().join("o.ftf"))
        .args(["--min-duration", "long"])
        .output()
        .unwrap();
    let err = fails(&out, 1);
    assert!(
        err.contains("--min-duration") && err.contains("not a time"),
        "{err}"
    );
    assert!(!tmp.path().join("o.ftf").exists());

    // A thread the trace does not have: the same refusal as a decode,
    // listing the threads it has.
    let err = fails(&report(&["--tid", "999999"]), 1);
    assert!(err.contains("999999") && err.contains("3174"), "{err}");

    // On a trace without decodable code the report still answers.
    let out = report(&["-q"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("[gap: no image]"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn report_help_has_an_example_for_every_option() {
    let s = run(&["report", "--help"]);
    let lines: Vec<&str> = s.lines().collect();
    for opt in [
        "--start",
        "--duration",
        "--tid",
        "--pid",
        "--sysroot",
        "--jobs",
        "--sort",
        "--top",
        "--format",
        "--per-thread",
        "--slowest",
        "--folded",
        "--flamegraph",
        "--weight",
    ] {
        // The option's line ("-j, --jobs <N>") and its description below.
        let is_option = |l: &&str| l.trim_start().starts_with('-');
        let at = lines
            .iter()
            .position(|l| is_option(l) && l.split([' ', ',']).any(|w| w == opt))
            .unwrap_or_else(|| panic!("{opt} missing from --help"));
        let block: Vec<&str> = lines[at + 1..]
            .iter()
            .take_while(|l| !is_option(l))
            .copied()
            .collect();
        assert!(
            block.iter().any(|l| l.contains("Example")),
            "{opt} has no example: {block:?}"
        );
    }
}

/// `--slowest N` keeps up to N calls until the report is printed: past
/// `MAX_SLOWEST` it is refused, naming the limit, which `--help` states
/// (issue 44: `--slowest 100000000` aborted with a 4.8 GB allocation on an
/// 18 MB trace of call-dense code, its heap of calls outgrowing memory).
#[test]
fn slowest_past_its_limit_is_refused_naming_it() {
    let test = "slowest_past_its_limit_is_refused_naming_it";
    let max = ptdec::report::MAX_SLOWEST;
    let help = run(&["report", "--help"]);
    assert!(help.contains(&format!("At most {max}")), "{help}");
    let Some(input) = pt_tests::realdata_file(test, "perf.data.intel_pt-4.14") else {
        return;
    };
    let report = |n: &str| {
        ptdec()
            .arg("report")
            .arg(&input)
            .args(["-q", "--slowest", n])
            .output()
            .unwrap()
    };
    for n in [(max + 1).to_string(), "100000000".to_string()] {
        let err = fails(&report(&n), 2);
        assert!(
            err.contains("--slowest") && err.contains(&format!("at most {max} calls")),
            "{err}"
        );
    }
    let out = report(&max.to_string());
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// Function names come from the traced binary: control characters in
/// them (an escape sequence that clears the screen or sets the terminal's
/// title, a newline that would split a row, backspaces) are escaped in
/// the table, as messages escape names. A program without libc whose two
/// functions get such names with objcopy.
#[test]
fn names_in_the_table_cannot_drive_the_terminal() {
    let test = "names_in_the_table_cannot_drive_the_terminal";
    if !pt_tests::have_tool(test, "gcc") || !pt_tests::have_tool(test, "objcopy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("p.c");
    std::fs::write(
        &src,
        "__attribute__((noinline)) int f1(int x) { return x * 3 + 1; }\n\
         __attribute__((noinline)) int f2(int x) { return f1(x) + 2; }\n\
         void _start(void) {\n\
           int s = f2(1) + f2(2);\n\
           __asm__ volatile(\"mov $60, %%eax\\n\\tsyscall\" :: \"D\"(s & 1) : \"memory\");\n\
         }\n",
    )
    .unwrap();
    let plain = dir.path().join("plain");
    let st = Command::new("gcc")
        .args(["-O1", "-static", "-nostdlib", "-fno-pie", "-no-pie", "-o"])
        .arg(&plain)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    let evil = dir.path().join("evil");
    let st = Command::new("objcopy")
        .arg("--redefine-sym")
        .arg("f1=esc\u{1b}[2J\u{1b}]0;title\u{7}")
        .arg("--redefine-sym")
        .arg("f2=nl\nrow\u{8}\u{8}XX")
        .arg(&plain)
        .arg(&evil)
        .status()
        .unwrap();
    assert!(st.success());
    let trace = dir.path().join("t");
    let o = ptsim::sim::Options::new(evil, Vec::new(), &trace);
    ptsim::sim::run(o).unwrap();
    let out = run(&["report", trace.to_str().unwrap(), "-q", "--slowest", "5"]);
    for c in ['\u{1b}', '\u{7}', '\u{8}'] {
        assert!(!out.contains(c), "{c:?} reached the table:\n{out}");
    }
    assert!(out.contains("esc\\u{1b}[2J"), "{out}");
    // The newline is escaped too: no row starts with what followed it.
    assert!(out.contains("nl\\nrow"), "{out}");
    assert!(!out.lines().any(|l| l.starts_with("row")), "{out}");
}
