//! What `ptdec` tells the user on stderr: a progress bar while it works
//! (only on a terminal, never with `--quiet`), the summary of a decode run
//! ([`Report`]), and `ptdec info`'s description of a trace without decoding.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::decode::ProgressCallback;
use crate::images::{hex, is_kernel_name, is_not_a_file, ImageStore};
use crate::input::Trace;
use crate::pipeline::Report;
pub use crate::text::{duration, thousands};
use crate::text::{printable, printable_path};

/// Progress on stderr: a bar over the trace bytes while libipt decodes
/// them, with the rate and the time left (fed from the decode workers
/// through [`Progress::callback`], every few thousand blocks), then, once
/// every byte is decoded and the call stacks and the FTF writer still
/// work, a counter of the ops handed to them ([`Progress::ops`], every
/// [`crate::pipeline::OPS_PER_PROGRESS`] ops). Hidden when stderr is not a
/// terminal or when `quiet`; hidden, it hands out no callbacks, so a quiet
/// run costs nothing for progress.
pub struct Progress {
    bar: ProgressBar,
    /// The bar counts ops now (the bytes are all decoded).
    counting_ops: Cell<bool>,
}

/// The bar while libipt decodes: bytes, rate, time left.
const BYTES_TEMPLATE: &str =
    "{spinner} [{elapsed}] [{bar:30}] {bytes}/{total_bytes} at {bytes_per_sec}, {eta} left  {wide_msg}";
/// The counter once every byte is decoded.
const OPS_TEMPLATE: &str =
    "{spinner} [{elapsed}] building call stacks and writing FTF: {human_pos} ops";

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
        .progress_chars("=> ")
}

impl Progress {
    /// A bar on stderr, or a hidden one when `quiet` or stderr is not a
    /// terminal.
    pub fn new(quiet: bool) -> Self {
        let bar = if quiet || !std::io::stderr().is_terminal() {
            ProgressBar::hidden()
        } else {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(style(BYTES_TEMPLATE));
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        };
        Progress {
            bar,
            counting_ops: Cell::new(false),
        }
    }

    /// Whether nothing is drawn.
    pub fn is_hidden(&self) -> bool {
        self.bar.is_hidden()
    }

    /// The text after the bar (what is being decoded).
    pub fn message(&self, msg: impl Into<std::borrow::Cow<'static, str>>) {
        self.bar.set_message(msg);
    }

    /// The decode's progress callback (bytes decoded, bytes to decode), or
    /// `None` when nothing is drawn.
    pub fn callback(&self) -> Option<ProgressCallback> {
        if self.is_hidden() {
            return None;
        }
        let bar = self.bar.clone();
        // The length is set when it changes only: it takes the bar's lock.
        let length = AtomicU64::new(u64::MAX);
        Some(ProgressCallback::new(move |done, total| {
            if length.swap(total, Ordering::Relaxed) != total {
                bar.set_length(total);
            }
            bar.set_position(done);
        }))
    }

    /// `n` ops handed to the call stacks so far
    /// (`on_op` of [`crate::pipeline::run`]). Shown once every byte is
    /// decoded (while bytes remain, the byte bar says more).
    pub fn ops(&self, n: u64) {
        if self.is_hidden() {
            return;
        }
        if !self.counting_ops.get() {
            let decoded = self
                .bar
                .length()
                .is_none_or(|len| self.bar.position() >= len);
            if !decoded {
                return;
            }
            self.counting_ops.set(true);
            self.bar.set_style(style(OPS_TEMPLATE));
            self.bar.unset_length();
        }
        self.bar.set_position(n);
    }

    /// Clears the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

fn bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / f64::from(1u32 << 20))
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

/// The end-of-run summary for stderr.
pub fn render(report: &Report) -> String {
    let mut o = String::new();
    let files: Vec<String> = report
        .written
        .iter()
        .map(|w| {
            w.path
                .as_ref()
                .map_or_else(|| "<stdout>".into(), |p| p.display().to_string())
        })
        .collect();
    if files.is_empty() {
        // `ptdec report`: the answers went to stdout.
        let _ = writeln!(o, "ptdec: decoded");
    } else {
        let _ = writeln!(o, "ptdec: wrote {}", files.join(", "));
    }
    if !report.stale.removed.is_empty() {
        let _ = writeln!(
            o,
            "ptdec: removed {}: windows an earlier --split into the same name wrote, which \
             this run has no events for",
            file_list(&report.stale.removed)
        );
    }
    render_decoded(&mut o, report);
    render_stacks(&mut o, report);
    render_shaping(&mut o, report);
    render_threads(&mut o, report);
    o
}

/// `a, b, c`, or `a, b, ... z (N files)` for more than four.
pub fn file_list(paths: &[std::path::PathBuf]) -> String {
    let name = |p: &std::path::PathBuf| p.display().to_string();
    match paths {
        [first, second, .., last] if paths.len() > 4 => format!(
            "{}, {}, ... {} ({} files)",
            name(first),
            name(second),
            name(last),
            paths.len()
        ),
        _ => paths.iter().map(name).collect::<Vec<_>>().join(", "),
    }
}

/// The summary's time span, trace decoded, instructions, unsynced bytes
/// and decode rate.
fn render_decoded(o: &mut String, report: &Report) {
    let d = &report.decode;
    match (d.time_span, report.tsc_ticks) {
        (Some((a, b)), false) => {
            let _ = writeln!(
                o,
                "  time span     {} (perf time {a} .. {b}; 0 in the output is {})",
                duration(b.saturating_sub(a)),
                report.origin
            );
        }
        (Some((a, b)), true) => {
            let _ = writeln!(
                o,
                "  time span     {} TSC ticks (TSC {a} .. {b}; 0 in the output is {})",
                thousands(b.saturating_sub(a)),
                report.origin
            );
        }
        (None, _) => {}
    }
    let _ = writeln!(
        o,
        "  decoded       {} of trace in {} segments ({} skipped), {} chunks ({} outside the time window), {} syncs",
        bytes(d.bytes),
        d.segments,
        d.segments_skipped,
        thousands(d.chunks),
        thousands(d.chunks_skipped),
        thousands(d.syncs)
    );
    let _ = writeln!(
        o,
        "  instructions  {} in {} blocks",
        thousands(d.insns),
        thousands(d.blocks)
    );
    if d.fast_chunks > 0 || !d.fallbacks.is_empty() {
        let by: Vec<String> = d
            .fallbacks
            .iter()
            .map(|(why, n)| format!("{} {why}", thousands(*n)))
            .collect();
        let _ = writeln!(
            o,
            "  flow decoder  ptdec's own for {} chunks, libipt for {}{}",
            thousands(d.fast_chunks),
            thousands(d.fallbacks.values().sum::<u64>()),
            if by.is_empty() {
                String::new()
            } else {
                format!(" ({})", by.join(", "))
            }
        );
    }
    if d.chunks_in_pieces > 0 {
        let _ = writeln!(
            o,
            "  in pieces     {} chunks made more ops than a chunk may hold (16 a byte of trace, at \
             least 1,048,576, at most 4,194,304; a byte of corrupt or hostile PT can stand for a million): decoded \
             again on the output thread and handed on in pieces, so that memory stays bounded",
            thousands(d.chunks_in_pieces)
        );
    }
    if !d.libipt_differs.is_empty() {
        let by: Vec<String> = d
            .libipt_differs
            .iter()
            .map(|(why, n)| format!("{} with {why}", thousands(*n)))
            .collect();
        let _ = writeln!(
            o,
            "  libipt differs  in {} chunks ptdec's own flow decoder decoded where libipt 2.1.2 \
             is known to decode wrong ({}; docs/decoding.md): `--decoder libipt` gives other \
             output there",
            thousands(d.libipt_differs.values().sum::<u64>()),
            by.join(", ")
        );
    }
    if d.quiet_jumps > 0 {
        let _ = writeln!(
            o,
            "  quiet jumps   {} jumps inside a function left out before the call stacks, which do \
             nothing at them (docs/decoding.md)",
            thousands(d.quiet_jumps)
        );
    }
    if d.stacks_ahead_ops > 0 || d.stacks_ahead_declined > 0 {
        let _ = writeln!(
            o,
            "  call stacks   built on the decode workers for {} of {} ops ({} stretches declined)",
            thousands(d.stacks_ahead_ops),
            thousands(d.ops),
            thousands(d.stacks_ahead_declined)
        );
    }
    if d.unsynced_bytes > 0 || d.bad_psbs > 0 {
        let why = if d.bad_psbs > 0 {
            format!(
                "{} PSBs there have a PSB+ libipt cannot read: the data is corrupt, or not Intel PT",
                thousands(d.bad_psbs)
            )
        } else {
            "no PSB there: a buffer that starts mid-stream (after lost data), or data that is not Intel PT".to_string()
        };
        let _ = writeln!(
            o,
            "  not synced    {} ({} bytes) of trace skipped before a PSB a decoder could start at; {why}",
            bytes(d.unsynced_bytes),
            thousands(d.unsynced_bytes),
        );
    }
    if let Some(wall) = report.wall_time.filter(|w| !w.is_zero()) {
        let secs = wall.as_secs_f64();
        let _ = writeln!(
            o,
            "  rate          {:.1} MiB of trace/s, {:.1} M instructions/s ({} wall time decoding and writing)",
            d.bytes as f64 / f64::from(1u32 << 20) / secs,
            d.insns as f64 / 1e6 / secs,
            duration(u64::try_from(wall.as_nanos()).unwrap_or(u64::MAX))
        );
    }
}

/// The summary's calls, untraced slices, gaps, marks, decode errors and
/// unattributed instructions.
fn render_stacks(o: &mut String, report: &Report) {
    let d = &report.decode;
    let s = &report.stack;
    let _ = writeln!(
        o,
        "  calls         {} call instructions (returns {}, frames skipped by longjmp/exceptions {}, retroactive frames {}, max depth {})",
        thousands(s.calls),
        thousands(s.returns),
        thousands(s.skipped_frames),
        thousands(s.retroactive_frames),
        s.max_depth
    );
    // perf script --itrace=c counts call instructions; the FTF and the
    // report have a slice for each tail call too.
    let _ = writeln!(
        o,
        "  tail calls    {} (jumps to a function's entry: a call slice each, not in perf script --itrace=c's calls)",
        thousands(s.tail_calls)
    );
    let _ = writeln!(
        o,
        "  untraced      {} slices (syscalls, interrupts, switched out)",
        thousands(s.untraced)
    );
    if s.execs > 0 {
        let _ = writeln!(
            o,
            "  exec          {} (a thread ran a new program: the old one's frames end at its execve)",
            thousands(s.execs)
        );
    }
    if s.depth_restarts > 0 {
        let _ = writeln!(
            o,
            "warning: {} calls went past {} open frames in a thread, deeper than a real program's stack gets (a corrupt or hostile trace of calls that never return): each ended every frame and restarted that thread's stack",
            thousands(s.depth_restarts),
            thousands(crate::stack::MAX_DEPTH as u64)
        );
    }
    if s.cut_groups > 0 {
        let _ = writeln!(
            o,
            "warning: {} times a thread had more than {} branches at one timestamp (timing packets that never move the time: corrupt or hostile PT): each such group kept the time it had, not spread, and the next began a new one",
            thousands(s.cut_groups),
            thousands(crate::interp::MAX_GROUP as u64)
        );
    }
    if s.held_past_bound > 0 {
        let _ = writeln!(
            o,
            "warning: {} slices began at the same instant as their parent but were written before it, a thread holding {} such slices back already (timing packets that never move the time: corrupt or hostile PT): Perfetto may nest those wrongly",
            thousands(s.held_past_bound),
            thousands(crate::stack::MAX_HELD as u64)
        );
    }
    if s.unmatched_unwinds > 0 {
        let _ = writeln!(
            o,
            "  unmatched     {} returns matched no open frame and ended {} frames whose call was seen: an unwind (longjmp, exception, panic) into code with neither symbols nor unwind tables, or a return the stack cannot place; those slices carry `unmatched` and may end later than they really did",
            thousands(s.unmatched_unwinds),
            thousands(s.unmatched_frames)
        );
    }
    let _ = writeln!(
        o,
        "  gaps          {} (overflow {}, lost data {}, no image {}, other decode errors {})",
        thousands(s.gaps),
        d.overflows,
        d.lost_data,
        d.no_image,
        s.gaps
            .saturating_sub(d.overflows + d.lost_data + d.no_image)
    );
    let e = &report.emit;
    if e.ptwrites + e.power + e.cbr + e.events + e.marks_dropped > 0 {
        let _ = writeln!(
            o,
            "  marks         ptwrite {}, power {} (+ {} cbr values), events {}, left out {}",
            thousands(e.ptwrites),
            thousands(e.power),
            thousands(e.cbr),
            thousands(e.events),
            thousands(e.marks_dropped)
        );
    }
    if !d.errors.is_empty() {
        let kinds: Vec<String> = d.errors.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let _ = writeln!(o, "  errors        {}", kinds.join(", "));
        let _ = writeln!(
            o,
            "  resyncs       {} at the error, {} PSB syncs; {} of trace skipped after errors",
            thousands(d.resyncs),
            thousands(d.syncs),
            bytes(d.skipped_bytes)
        );
    }
    if d.unattributed_insns > 0 {
        let _ = writeln!(
            o,
            "  unattributed  {} instructions ran while no thread was known (no switch sideband); dropped",
            thousands(d.unattributed_insns)
        );
    }
}

/// What the output changed or left out: the time axis, zero-width calls,
/// folded and unwritten frames, `--min-duration`, the time window.
fn render_shaping(o: &mut String, report: &Report) {
    let e = &report.emit;
    if e.no_time {
        let _ = writeln!(
            o,
            "  time axis     instructions: the trace has no timing packets (TSC/MTC), or none that moves the time, so no slice has a duration in time; each thread's instruction count is written as ns (1 instruction = 1 ns in Perfetto)"
        );
    }
    if e.zero_width_calls > 0 {
        let _ = writeln!(
            o,
            "  zero width    {} call slices: no timing packet came between their call and return; the Perfetto UI draws them as chevrons (instants), and one that ends where its caller ends as the caller's sibling",
            thousands(e.zero_width_calls)
        );
    }
    if e.folds > 0 {
        let _ = writeln!(
            o,
            "  folded        {} calls and {} untraced slices deeper than level {} (Perfetto keeps {} levels per thread) into {} slices at that level (args `folded`, `folded_levels`); deepest level {}",
            thousands(e.folded_calls),
            thousands(e.folded_untraced),
            crate::emit::FOLD_DEPTH,
            crate::emit::PERFETTO_MAX_DEPTH,
            thousands(e.folds),
            e.folded_max_depth
        );
    }
    if e.ended_open > 0 {
        let _ = writeln!(
            o,
            "  cut at end    {} calls still running where their thread's trace ended (the program was killed, or exited inside them) or a gap or a restart ended it: arg `cut` = \"end\"",
            thousands(e.ended_open)
        );
    }
    if e.outer_frames > 0 {
        let _ = writeln!(
            o,
            "  not written   {} frames found more than {} levels above where tracing began (returns above the traced stack): Perfetto would have dropped everything below them",
            thousands(e.outer_frames),
            crate::emit::RETROACTIVE_RESERVE
        );
    }
    if let Some(m) = &report.min_duration {
        let _ = writeln!(
            o,
            "  min duration  {} call slices and {} untraced slices shorter than {} left out (their callers are kept)",
            thousands(m.calls),
            thousands(m.untraced),
            duration(m.min_ns)
        );
    }
    if report.emit.dropped > 0 || report.emit.cut > 0 {
        let _ = writeln!(
            o,
            "  window        {} slices outside --start/--duration, {} pieces cut at boundaries",
            thousands(report.emit.dropped),
            thousands(report.emit.cut)
        );
    }
}

/// The most missing images the decode summary lists (`ptdec info` lists
/// them all).
const MISSING_SHOWN: usize = 20;

/// The summary's threads, missing images and warnings.
fn render_threads(o: &mut String, report: &Report) {
    let d = &report.decode;
    if !report.threads.is_empty() {
        let _ = writeln!(o, "  threads       pid/tid name: instructions, calls, gaps");
    }
    for ((pid, tid), t) in &report.threads {
        let insns = d.threads.get(&(*pid, *tid)).map_or(0, |x| x.insns);
        let _ = writeln!(
            o,
            "    {pid}/{tid} {}: {}, {}, {}",
            printable(&t.name),
            thousands(insns),
            thousands(t.stack.calls),
            t.stack.gaps
        );
    }
    if !report.missing.is_empty() {
        let _ = writeln!(o, "  missing images (their code was not decoded):");
        for m in report.missing.iter().take(MISSING_SHOWN) {
            let id = m
                .build_id
                .as_deref()
                .map(|b| format!(" build-id {}", hex(b)))
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "    {}{id}: {}",
                printable(&m.name),
                printable(&m.reason)
            );
            for (pid, start, end) in &m.ranges {
                let _ = writeln!(o, "      not decoded: pid {pid} {start:#x}-{end:#x}");
            }
        }
        let more = report.missing.len().saturating_sub(MISSING_SHOWN);
        if more > 0 {
            let _ = writeln!(o, "    and {more} more (`ptdec info` lists every image)");
        }
        let _ = writeln!(
            o,
            "    give them with --sysroot DIR (a copy of the recording machine's files), --buildid-dir DIR, --kcore DIR or --vmlinux FILE"
        );
    }
    for w in &report.warnings {
        let _ = writeln!(o, "  warning: {w}");
    }
}

/// What `-q` still says of the missing images [`render_threads`] lists: one
/// line, naming the first, when code was not decoded for want of its
/// binary (it said nothing, exit 0); `None` when none is missing.
pub fn quiet_missing(report: &Report) -> Option<String> {
    let first = report.missing.first()?;
    let why = if first.reason.contains(&first.name) {
        printable(&first.reason).into_owned()
    } else {
        format!("{}: {}", printable(&first.name), printable(&first.reason))
    };
    Some(format!(
        "ptdec: warning: the code of {} image(s) was not decoded; the first, {why} \
         (`ptdec info` lists them; --sysroot DIR or --buildid-dir DIR give copies)",
        report.missing.len(),
    ))
}

/// `ptdec info`: what a trace holds, without decoding.
pub fn info(trace: &Trace, images: &ImageStore) -> String {
    let mut o = String::new();
    info_file(&mut o, trace);
    info_intel_pt(&mut o, trace);
    info_aux(&mut o, trace);
    info_threads(&mut o, trace);
    info_images(&mut o, trace, images);
    o
}

/// `ptdec info`'s file, trace dir and cpu lines.
fn info_file(o: &mut String, trace: &Trace) {
    if let Some(b) = &trace.bundle {
        info_bundle(o, trace, b);
        return;
    }
    let _ = writeln!(
        o,
        "file          {} ({} format, {})",
        trace.data_path.display(),
        if trace.pipe { "pipe" } else { "file" },
        bytes(trace.bytes().len() as u64)
    );
    if let Some(dir) = &trace.dir {
        let _ = writeln!(o, "trace dir     {}", dir.display());
    }
    match &trace.cpu {
        Some(c) => {
            let _ = writeln!(
                o,
                "cpu           {} family {} model {} stepping {}{}",
                c.vendor,
                c.family,
                c.model,
                c.stepping,
                trace
                    .nr_cpus
                    .map(|n| format!(", {n} cpus"))
                    .unwrap_or_default()
            );
        }
        None => {
            let _ = writeln!(o, "cpu           unknown (no CPUID feature)");
        }
    }
}

/// `ptdec info`'s lines for an LLDB bundle: what its `trace.json` says,
/// in place of the perf.data's file, cpu and configuration lines.
fn info_bundle(o: &mut String, trace: &Trace, b: &crate::input::lldb::BundleInfo) {
    let _ = writeln!(
        o,
        "file          {} (LLDB trace bundle)",
        trace.data_path.display()
    );
    let _ = writeln!(o, "bundle        {}", b.dir.display());
    match &trace.cpu {
        Some(c) => {
            let _ = writeln!(
                o,
                "cpu           {} family {} model {} stepping {} (cpuInfo)",
                c.vendor, c.family, c.model, c.stepping
            );
        }
        None => {
            let _ = writeln!(
                o,
                "cpu           unknown (no usable cpuInfo): no errata workarounds"
            );
        }
    }
    let traces = if b.cores.is_empty() {
        "per-thread traces".to_string()
    } else {
        format!(
            "per-core traces with context switches (cores {})",
            b.cores
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let _ = writeln!(
        o,
        "intel_pt      {traces}; the bundle does not say which packets were enabled"
    );
    match b.conversion {
        Some((mult, shift, zero)) => {
            let _ = writeln!(
                o,
                "timing        tscPerfZeroConversion: time_mult {mult}, time_shift {shift}, time_zero {zero}"
            );
        }
        None => {
            let _ = writeln!(
                o,
                "timing        no tscPerfZeroConversion: times stay in TSC ticks"
            );
        }
    }
    for (pid, tids) in &b.processes {
        let _ = writeln!(
            o,
            "process       {pid}: threads {}",
            if tids.is_empty() {
                "none listed (found in the context switches)".to_string()
            } else {
                tids.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
    }
    for (path, load) in &b.modules {
        let _ = writeln!(o, "module        {} at {load:#x}", printable_path(path));
    }
}

/// `ptdec info`'s Intel PT configuration: buffers, packets enabled,
/// timing, config terms, what the trace records, address filter.
fn info_intel_pt(o: &mut String, trace: &Trace) {
    let i = &trace.info;
    if trace.sideband_only {
        let _ = writeln!(
            o,
            "intel_pt      none: a sideband-only recording (ptrec --sideband-only): processes, \
             threads and mappings over time, no trace to decode"
        );
    }
    if !trace.sideband_only && trace.bundle.is_none() {
        let bit = |b: u64| match trace.config_bit(b) {
            Some(true) => "on",
            Some(false) => "off",
            None => "?",
        };
        let _ = writeln!(
            o,
            "intel_pt      {} buffers, {} mode, tsc {}, mtc {} (mtc_period {}), cyc {}, noretcomp {}, kernel {}",
            if i.per_cpu_mmaps { "per-cpu" } else { "per-thread" },
            if i.snapshot_mode { "snapshot" } else { "full-trace" },
            bit(i.tsc_bit),
            bit(i.mtc_bit),
            trace.mtc_period().map_or("?".into(), |p| p.to_string()),
            bit(i.cyc_bit),
            bit(i.noretcomp_bit),
            if trace.kernel_traced() { "traced" } else { "not traced" }
        );
        let _ = writeln!(
            o,
            "timing        TSC:CTC {}/{}, max non-turbo ratio {}, TSC conversion {}",
            i.tsc_ctc_ratio_n,
            i.tsc_ctc_ratio_d,
            i.max_non_turbo_ratio,
            if trace.tsc.is_some() {
                "present"
            } else {
                "missing (times stay in TSC)"
            }
        );
        if let Some(a) = &trace.pt_attr {
            let _ = writeln!(
                o,
                "config        {:#x}: {}",
                a.config,
                sideband::auxtrace_info::config_terms(a.config)
            );
            let on = |name: &str| {
                sideband::auxtrace_info::INTEL_PT_TERMS
                    .iter()
                    .find(|t| t.0 == name)
                    .is_some_and(|t| a.config >> t.1 & 1 != 0)
            };
            let mut holds = Vec::new();
            if !on("branch") {
                holds.push("no branch tracing (branch=0): no calls, PTWRITE and power events only");
            }
            if on("ptw") {
                holds.push("PTWRITE payloads (ptw)");
            }
            if on("pwr_evt") {
                holds.push("power events (pwr_evt)");
            }
            if on("event") {
                holds.push("event trace (event)");
            }
            if on("notnt") {
                holds.push("no TNT packets (notnt): conditional branches not traced");
            }
            if !holds.is_empty() {
                let _ = writeln!(o, "records       {}", holds.join("; "));
            }
        }
        match &i.filter {
            Some(f) if !f.is_empty() => {
                let _ = writeln!(o, "filter        {f}");
            }
            _ => {
                let _ = writeln!(o, "filter        none (all code traced)");
            }
        }
    }
}

/// `ptdec info`'s time range, AUX data by buffer and losses.
fn info_aux(o: &mut String, trace: &Trace) {
    if let Some((a, b)) = trace.sideband_span {
        let _ = writeln!(
            o,
            "time          perf time {a} .. {b} ({})",
            duration(b.saturating_sub(a))
        );
    }
    let chunks: usize = trace.buffers.iter().map(|b| b.chunks.len()).sum();
    let _ = writeln!(
        o,
        "aux data      {} in {} buffers, {} AUXTRACE records, {} segments",
        bytes(trace.trace_bytes()),
        trace.buffers.len(),
        chunks,
        trace.segments().len()
    );
    for b in &trace.buffers {
        let size: u64 = b.chunks.iter().map(|c| c.len as u64).sum();
        let who = match (b.cpu, b.tid) {
            (Some(c), _) => format!("cpu {c}"),
            (None, Some(t)) => format!("tid {t}"),
            _ => "?".into(),
        };
        let _ = writeln!(
            o,
            "  buffer {:>3}  {who}: {} in {} records{}",
            b.idx,
            bytes(size),
            b.chunks.len(),
            if b.losses.is_empty() {
                String::new()
            } else {
                format!(", {} lossy AUX records", b.losses.len())
            }
        );
    }
    let _ = writeln!(
        o,
        "losses        {} sideband records lost, {} AUX records flagged truncated/partial/collision",
        trace.lost_records, trace.aux_losses
    );
}

/// `ptdec info`'s threads with their names.
fn info_threads(o: &mut String, trace: &Trace) {
    let tl = &trace.timeline;
    let threads: Vec<_> = tl.threads().collect();
    let _ = writeln!(o, "threads       {}", threads.len());
    for th in threads {
        let names: Vec<_> = th.names().iter().map(|c| printable(&c.name)).collect();
        let _ = writeln!(
            o,
            "  {}/{} {}",
            th.pid,
            th.tid,
            if names.is_empty() {
                "(no name)".to_string()
            } else {
                names.join(" → ")
            }
        );
    }
}

/// `ptdec info`'s images: every file mapped executable, found or
/// missing, and the trace's warnings.
fn info_images(o: &mut String, trace: &Trace, images: &ImageStore) {
    let tl = &trace.timeline;
    // Every file mapped executable in a process, once.
    let mut files = BTreeSet::new();
    let mut seen = Vec::new();
    for pid in tl.pids() {
        if let Some(maps) = tl.process_maps(pid) {
            for m in maps.history() {
                if !is_not_a_file(&m.file.filename) && files.insert(m.file.filename.clone()) {
                    seen.push(m.file.clone());
                }
            }
        }
    }
    if trace.kernel_traced() {
        if let Some(m) = tl
            .kernel_map()
            .history()
            .iter()
            .find(|m| is_kernel_name(&m.file.filename))
        {
            if files.insert(m.file.filename.clone()) {
                seen.push(m.file.clone());
            }
        }
    }
    let _ = writeln!(o, "images        {}", seen.len());
    for f in &seen {
        match images.get(f) {
            Some(img) => {
                let _ = writeln!(
                    o,
                    "  found    {} → {}",
                    printable(&f.filename),
                    printable_path(&img.path)
                );
            }
            None => {
                let _ = writeln!(o, "  missing  {}", printable(&f.filename));
            }
        }
    }
    for m in images.missing() {
        let _ = writeln!(
            o,
            "  why      {}: {}",
            printable(&m.name),
            printable(&m.reason)
        );
    }
    for w in trace.warnings.iter().chain(&images.warnings()) {
        let _ = writeln!(o, "warning       {w}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_names_the_first_missing_image_in_one_line() {
        let mut report = Report::default();
        assert_eq!(quiet_missing(&report), None);
        let missing = |name: &str, reason: &str| crate::images::MissingImage {
            name: name.into(),
            build_id: None,
            reason: reason.into(),
            ranges: Vec::new(),
        };
        report.missing = vec![
            missing("/bin/x", "not found"),
            missing("/lib/y.so", "not found"),
        ];
        assert_eq!(
            quiet_missing(&report).unwrap(),
            "ptdec: warning: the code of 2 image(s) was not decoded; the first, /bin/x: not \
             found (`ptdec info` lists them; --sysroot DIR or --buildid-dir DIR give copies)"
        );
        // A reason that names the image is not preceded by its name.
        report.missing = vec![missing("/bin/x", "/bin/x changed since the recording")];
        let line = quiet_missing(&report).unwrap();
        assert!(
            line.contains("the first, /bin/x changed since the recording ("),
            "{line}"
        );
    }

    #[test]
    fn numbers() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(duration(45), "45 ns");
        assert_eq!(duration(1_500), "1.500 µs");
        assert_eq!(duration(2_000_000_000), "2.000 s");
        assert_eq!(bytes(2048), "2.0 KiB");
    }

    #[test]
    fn progress_templates_parse() {
        for t in [BYTES_TEMPLATE, OPS_TEMPLATE] {
            assert!(ProgressStyle::with_template(t).is_ok(), "{t}");
        }
        // Hidden (-q): no callbacks, so the decoder reports nothing.
        let p = Progress::new(true);
        assert!(p.callback().is_none());
        p.ops(1 << 16);
        p.finish();
    }

    #[test]
    fn rate_from_wall_time() {
        let mut report = Report::default();
        report.decode.bytes = 3 << 20;
        report.decode.insns = 6_000_000;
        assert!(!render(&report).contains("rate"));
        report.wall_time = Some(Duration::from_millis(500));
        let text = render(&report);
        assert!(
            text.contains(
                "  rate          6.0 MiB of trace/s, 12.0 M instructions/s (500.000 ms wall time"
            ),
            "{text}"
        );
    }
}
