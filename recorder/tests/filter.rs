//! `ptrec --filter`: perf's address-filter syntax resolved against real
//! binaries (checked with binutils' own view of the same files), refused
//! with a message naming what failed before anything is created, and
//! recorded in AUXTRACE_INFO so that perf reads the filter back.

use std::path::{Path, PathBuf};
use std::process::Command;

use ptrec::pmu::Pmu;
use sideband::auxtrace_info::AuxtraceInfo;
use sideband::record::{Event, Record, SampleId};

const EXE: &str = env!("CARGO_BIN_EXE_ptrec");

fn skylake() -> Pmu {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sysfs/skylake");
    Pmu::intel_pt(&root).unwrap()
}

const PROG: &str = r#"
__attribute__((noinline)) int helper(int x) { return x * 3 + 1; }
__attribute__((noinline)) int work(int n) { int s = 0; for (int i = 0; i < n; i++) s += helper(i); return s; }
int main(int argc, char **argv) { return work(argc) & 1; }
"#;

/// Builds PROG with `flags` into `dir`; `None` (after the tool policy) without gcc.
fn build(test: &str, dir: &Path, name: &str, flags: &[&str]) -> Option<PathBuf> {
    if !pt_tests::have_tool(test, "gcc") {
        return None;
    }
    let src = dir.join("prog.c");
    std::fs::write(&src, PROG).unwrap();
    let out = dir.join(name);
    let o = Command::new("gcc")
        .args(flags)
        .arg("-O1")
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    Some(out)
}

/// binutils' view: the symbol's address and size (`nm -S`), turned into a
/// file offset through the LOAD segment that holds it (`readelf -lW`).
fn binutils_offset(file: &Path, sym: &str) -> (u64, u64) {
    let nm = Command::new("nm").arg("-S").arg(file).output().unwrap();
    let nm = String::from_utf8_lossy(&nm.stdout);
    let (addr, size) = nm
        .lines()
        .find_map(|l| {
            let f: Vec<_> = l.split_whitespace().collect();
            (f.len() == 4 && f[3] == sym).then(|| {
                (
                    u64::from_str_radix(f[0], 16).unwrap(),
                    u64::from_str_radix(f[1], 16).unwrap(),
                )
            })
        })
        .unwrap_or_else(|| panic!("nm has no {sym}: {nm}"));
    let re = Command::new("readelf")
        .arg("-lW")
        .arg(file)
        .output()
        .unwrap();
    let re = String::from_utf8_lossy(&re.stdout);
    for l in re.lines().filter(|l| l.trim_start().starts_with("LOAD")) {
        let f: Vec<_> = l.split_whitespace().collect();
        let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
        let (off, va, filesz) = (hex(f[1]), hex(f[2]), hex(f[4]));
        if addr >= va && addr < va + filesz {
            return (addr - va + off, size);
        }
    }
    panic!("no LOAD segment holds {sym} at {addr:#x}: {re}");
}

#[test]
fn filters_resolve_to_file_offsets_as_binutils_say() {
    let test = "filters_resolve_to_file_offsets_as_binutils_say";
    let tmp = tempfile::tempdir().unwrap();
    for (name, flags) in [("nopie", &["-no-pie"][..]), ("pie", &["-pie", "-fPIE"][..])] {
        let Some(prog) = build(test, tmp.path(), name, flags) else {
            return;
        };
        let p = prog.to_str().unwrap();
        let canon = std::fs::canonicalize(&prog).unwrap();
        let c = canon.to_str().unwrap();
        let (w_off, w_size) = binutils_offset(&prog, "work");
        let (h_off, h_size) = binutils_offset(&prog, "helper");
        let (m_off, _) = binutils_offset(&prog, "main");

        let (resolved, string) = ptrec::filter::resolve(
            &format!("filter work @ {p}, tracestop helper @ {p}"),
            &skylake(),
        )
        .unwrap();
        assert_eq!(resolved.len(), 2);
        assert_eq!(
            string,
            format!("filter {w_off:#x}/{w_size:#x}@{c},stop {h_off:#x}/{h_size:#x}@{c}")
        );
        // A region from a number: the offset is taken as it is.
        let (_, string) =
            ptrec::filter::resolve(&format!("start main @ {p} stop 0x10@{p}"), &skylake()).unwrap();
        assert_eq!(string, format!("start {m_off:#x}@{c},stop 0x10@{c}"));

        // This CPU has 2 address ranges.
        let e = ptrec::filter::resolve(
            &format!("filter work @ {p}, tracestop helper @ {p} start main @ {p}"),
            &skylake(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("3 address filters") && e.contains("2 address range"),
            "{e}"
        );
        let e = ptrec::filter::resolve(&format!("filter nosuch @ {p}"), &skylake())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"nosuch\" not found in") && e.contains(c),
            "{e}"
        );
    }
}

/// The binary refuses a bad filter before creating anything, naming the
/// part that failed and listing the valid forms.
#[test]
fn bad_filters_from_the_binary() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    let sysfs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sysfs/skylake");
    for (filter, needle) in [
        ("filter main @ /nonexistent/prog", "/nonexistent/prog"),
        ("trace main @ /bin/true", "\"trace\" is not one of"),
        ("filter 0x10 @ /bin/true", "needs '/ SIZE'"),
    ] {
        let o = Command::new(EXE)
            .arg("--sysfs-root")
            .arg(&sysfs)
            .args(["--filter", filter, "-o"])
            .arg(&out)
            .args(["--", "/bin/true"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{filter}: {err}");
        assert!(err.contains(needle), "{filter}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!out.exists(), "{filter}: output created");
    }
    let o = Command::new(EXE).arg("--help").output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("--filter"));
}

/// The resolved filter as ptrec records it in AUXTRACE_INFO, read back by
/// perf (`perf script -D` prints the intel_pt info words and the filter).
#[test]
fn filter_string_read_back_by_perf() {
    let test = "filter_string_read_back_by_perf";
    let Some(perf) = pt_tests::perf(test) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let pmu = skylake();
    let config = ptrec::config::build_config(&pmu, &ptrec::config::default_terms(&pmu)).unwrap();
    let attr = ptrec::config::intel_pt_attr(&pmu, config, &Default::default());
    let mut attrs = sideband::attr::AttrSet::new();
    attrs.push(ptrec::target::parse_attr(&attr).unwrap(), vec![1]);
    let filter = "filter 0x1130/0x80@/usr/bin/prog,stop 0x2000/0x10@/usr/lib/libx.so";
    let mut info = ptrec::config::intel_pt_info(&pmu, &Default::default());
    info.filter = Some(filter.to_string());
    let dir = tmp.path().join("t");
    std::fs::create_dir(&dir).unwrap();
    let mut w = ptrec::session::TraceWriter::create(&dir.join("data"), attrs).unwrap();
    w.write_event(&Event {
        misc: 0,
        record: Record::AuxtraceInfo(AuxtraceInfo::from_intel_pt(&info)),
        sample_id: SampleId::default(),
    })
    .unwrap();
    w.finish().unwrap();
    let o = Command::new(perf)
        .args(["script", "-D", "-i"])
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("Filter string") && !l.contains("len"))
        .unwrap_or_else(|| {
            panic!(
                "perf printed no filter string: {text}\n{}",
                String::from_utf8_lossy(&o.stderr)
            )
        });
    assert!(line.trim_end().ends_with(filter), "{line}");
}
