//! What libipt's `ptxed` prints, compared with what `ptdec raw --insn-list`
//! lists, shared by the two tests that run libipt's test suite: `ptt.rs`
//! (the `.ptt` files of the libipt ptdec was built from, assembled with its
//! `pttc`) and `libipt_vectors.rs` (libipt's newest suite, as test vectors
//! in `../shared/libipt-tests`). ptxed's options are mapped to ptdec's, and
//! both listings are reduced to instruction addresses, errors, overflows and
//! sideband lines and triggers (TRIG) before they are compared.

use std::path::Path;
use std::process::Command;

/// ptxed's sideband options for the `.sb` files pttc wrote, as libipt's
/// `script/test.bash` makes them from each file's name
/// (`NAME-pevent-primary,sample-type=0x4,time-zero=0x0.sb`: the settings,
/// then `--pevent:primary FILE`). The files are named relative to the
/// directory ptdec runs in, as ptxed's are.
pub fn sideband_options(name: &str, files: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for f in files.iter().filter(|f| f.ends_with(".sb")) {
        let part = f
            .strip_suffix(".sb")
            .and_then(|b| b.strip_prefix(&format!("{name}-")))
            .unwrap_or_else(|| panic!("{name}: unexpected sideband file name {f}"));
        let (prefix, settings) = part.split_once(',').unwrap_or((part, ""));
        let (format_part, prio) = prefix.rsplit_once('-').expect("FORMAT-PRIO");
        let format = format_part.rsplit('-').next().unwrap();
        for kv in settings.split(',').filter(|kv| !kv.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            out.push(format!("--{format}:{k}"));
            out.push(v.to_string());
        }
        out.push(format!("--{format}:{prio}"));
        out.push(f.clone());
    }
    out
}

/// ptxed's expectation reduced to what is compared: instruction
/// addresses, errors as `[OFFSET: KIND: MESSAGE]`, overflows, triggers; and the
/// instruction count of `--stat` output.
pub fn normalize_exp(exp: &str) -> (Vec<String>, Option<u64>) {
    let mut lines = Vec::new();
    let mut count = None;
    for l in exp.lines() {
        let l = l.trim();
        if let Some(n) = l.strip_prefix("insn:") {
            count = n.trim().trim_end_matches('.').parse().ok();
            continue;
        }
        let addr = l.strip_prefix("? ").unwrap_or(l);
        if addr.len() == 16 && addr.bytes().all(|b| b.is_ascii_hexdigit()) {
            lines.push(addr.to_string());
        } else if is_sideband_note(l) {
            lines.push(l.to_string());
        } else if is_sideband_print(l) {
            lines.push(squeeze(l));
        } else if let Some(t) = trig_line(l) {
            lines.push(t);
        } else if l.starts_with('[') && l[1..].split([' ', ',', ']']).any(|w| w == "overflow") {
            // `[overflow]`, or with --event:time `[TIME  overflow]`.
            lines.push("[overflow]".to_string());
        } else if let Some(inner) = l.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
            // [OFFSET, IP: KIND: MESSAGE]
            if let Some((pos, rest)) = inner.split_once(", ") {
                if let Some((_ip, kind_msg)) = rest.split_once(": ") {
                    if kind_msg.starts_with("error: ") || kind_msg.starts_with("sync error: ") {
                        lines.push(format!("[{pos}: {kind_msg}]"));
                    }
                }
            }
        }
    }
    (lines, count)
}

/// A trigger as ptxed prints it (`[trig 1a]`, `[trig 05, mult]`, with
/// `--event:ip` `[trig 1a, ip: 0000000000001003]`), without the IP: the
/// listing places it among the instructions, as ptdec lists it.
pub fn trig_line(l: &str) -> Option<String> {
    let inner = l.strip_prefix("[trig ")?.strip_suffix(']')?;
    let parts: Vec<&str> = inner
        .split(", ")
        .filter(|p| !p.starts_with("ip: "))
        .collect();
    Some(format!("[trig {}]", parts.join(", ")))
}

/// A sideband warning or error: `[FILE:OFFSET sideband warning: MESSAGE]`.
pub fn is_sideband_note(l: &str) -> bool {
    l.starts_with('[') && (l.contains(" sideband warning: ") || l.contains(" sideband error: "))
}

/// A sideband record as `--sb:compact` prints it
/// (`[FILE:][OFFSET  ][TSC  ]PERF_RECORD_... { SAMPLES }`), or a context
/// switch as `--sb:switch` prints it (`[context: pid-1]`).
pub fn is_sideband_print(l: &str) -> bool {
    l.starts_with("[context: ")
        || l.split_whitespace()
            .any(|w| w.starts_with("PERF_RECORD_") || w == "UNKNOWN")
}

/// A line with its runs of blanks made one space: the `.exp` files align
/// the records' fields, and libipt's `test.bash` compares with `diff -b`.
pub fn squeeze(l: &str) -> String {
    l.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// ptdec's listing reduced the same way.
pub fn normalize_list(list: &str) -> Vec<String> {
    list.lines()
        .filter_map(|l| {
            if (l.len() == 16 && l.bytes().all(|b| b.is_ascii_hexdigit()))
                || l == "[overflow]"
                || l.starts_with("[trig ")
                || l.contains(": error: ")
                || l.contains(": sync error: ")
                || is_sideband_note(l)
            {
                Some(l.to_string())
            } else if is_sideband_print(l) {
                Some(squeeze(l))
            } else {
                None
            }
        })
        .collect()
}

/// `ptdec raw` options for ptxed's, or why they cannot be given.
/// `dir`: where pttc wrote its files (ptxed runs there).
pub fn map_options(opts: &[String], dir: &Path) -> Result<(Vec<String>, bool), String> {
    let mut out = Vec::new();
    let mut resync = false;
    for line in opts {
        let words: Vec<&str> = line.split_whitespace().collect();
        let mut i = 0;
        while i < words.len() {
            let w = words[i];
            let value = || words.get(i + 1).map(|v| v.to_string());
            match w {
                "--resync-on-error" => resync = true,
                // More code, relative to where ptxed runs.
                "--raw" => {
                    let v = value().ok_or("--raw without a value")?;
                    out.push(w.to_string());
                    out.push(dir.join(v).display().to_string());
                    i += 1;
                }
                "--cpu" | "--mtc-freq" | "--nom-freq" | "--cpuid-0x15.eax" | "--cpuid-0x15.ebx" => {
                    out.push(w.to_string());
                    out.push(value().ok_or(format!("{w} without a value"))?);
                    i += 1;
                }
                // ptdec raw takes ptxed's address-filter and sideband
                // options as they are.
                _ if w.starts_with("--filter:addr") || w.starts_with("--pevent:") => {
                    out.push(w.to_string());
                    out.push(value().ok_or(format!("{w} without a value"))?);
                    i += 1;
                }
                // Events that change when sideband is applied, and what
                // of the sideband is listed: ptdec raw takes them as ptxed.
                "--event:tick" | "--event:iflags" | "--sb:warn" | "--sb:compact" | "--sb"
                | "--sb:verbose" | "--sb:filename" | "--sb:offset" | "--sb:time"
                | "--sb:switch" => out.push(w.to_string()),
                // Output only: which events are printed, statistics, block
                // boundaries, the decoder kind (block and instruction
                // decoders decode the same flow), timing calibration.
                "--quiet"
                | "--stat"
                | "--stat:insn"
                | "--stat:blocks"
                | "--event:ip"
                | "--event:time"
                | "--block-decoder"
                | "--insn-decoder"
                | "--block:show-blocks"
                | "--block:end-on-call"
                | "--block:end-on-jump"
                | "--insn:keep-tcal-on-ovf"
                | "--block:keep-tcal-on-ovf" => {}
                other => return Err(format!("ptxed option {other}")),
            }
            i += 1;
        }
    }
    if !resync {
        out.extend(["--on-error".to_string(), "next-psb".to_string()]);
    }
    Ok((out, resync))
}

/// A listing compared with ptxed's expectation.
pub struct Compared {
    /// ptxed's lines, reduced ([`normalize_exp`]).
    pub want: Vec<String>,
    /// ptdec's lines, reduced ([`normalize_list`]).
    pub got: Vec<String>,
    /// The instruction count of ptxed's `--stat`, if it printed one.
    pub count: Option<u64>,
    /// Whether they agree: the same lines, or (ptxed's `--quiet --stat`)
    /// the same number of instructions.
    pub same: bool,
}

/// Compares ptdec's `--insn-list` with ptxed's expected output.
pub fn compare(list: &str, exp: &str) -> Compared {
    let got = normalize_list(list);
    let (want, count) = normalize_exp(exp);
    let insns = got.iter().filter(|l| !l.starts_with('[')).count() as u64;
    let same = match count {
        // --quiet: only the statistics.
        Some(n) if want.is_empty() => insns == n,
        Some(n) => insns == n && got == want,
        None => got == want,
    };
    Compared {
        want,
        got,
        count,
        same,
    }
}

/// Whether ptxed's expectation is the configuration error of a CPU it
/// knows no errata for (ptdec refuses such a CPU: "knows no CPU").
pub fn expects_unknown_cpu(exp: &str) -> bool {
    exp.contains("config error: unknown cpu")
}

/// `ptdec raw` on a test's trace and code as ptxed gets them
/// (`--pt X.pt --raw X.bin:ORG`), run in `dir` (where the sideband files
/// are, named relative to it as ptxed's are), the listing in `list`, the
/// FTF in `ftf`, on the instruction axis (the tests have no time to
/// speak of). The caller adds the decoder, the mapped options and `-q`.
pub fn ptdec_raw(dir: &Path, name: &str, org: &str, list: &Path, ftf: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ptdec"));
    c.arg("raw")
        .arg("--pt")
        .arg(dir.join(format!("{name}.pt")))
        .arg("--raw")
        .arg(format!(
            "{}:{org}",
            dir.join(format!("{name}.bin")).display()
        ))
        .current_dir(dir)
        .arg("--insn-list")
        .arg(list)
        .arg("--time-axis")
        .arg("instructions")
        .arg("-o")
        .arg(ftf);
    c
}
