//! How `ptdec report` prints an [`Aggregate`]: a table for people, CSV and
//! JSON for scripts, folded stacks (`outer;inner;leaf WEIGHT`, the format
//! of Brendan Gregg's FlameGraph tools) and an SVG flame graph drawn from
//! them by the `inferno` crate.

use std::fmt::Write as _;
use std::io;

use super::aggregate::{Aggregate, FuncId, FuncStats, SlowCall, ThreadKey};
use crate::pipeline::Report;
use crate::text::{duration, printable, thousands};

/// What the rows are sorted by, largest first (`--sort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Sort {
    Calls,
    /// Total time, callees included.
    Total,
    /// Self time.
    #[default]
    #[value(name = "self")]
    SelfTime,
    /// Instructions, callees included.
    Insns,
}

impl Sort {
    fn key(self, s: &FuncStats) -> u64 {
        match self {
            Sort::Calls => s.calls,
            Sort::Total => s.total_ns,
            Sort::SelfTime => s.self_ns,
            Sort::Insns => s.insns,
        }
    }

    /// How the table's heading names it.
    fn describe(self) -> &'static str {
        match self {
            Sort::Calls => "calls",
            Sort::Total => "total time",
            Sort::SelfTime => "self time",
            Sort::Insns => "instructions",
        }
    }
}

/// What a folded stack's weight counts (`--weight`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Weight {
    /// Self instructions: exact, whatever the timing packets.
    #[default]
    Insns,
    /// Self ns.
    Ns,
}

impl Weight {
    fn unit(self) -> &'static str {
        match self {
            Weight::Insns => "instructions",
            Weight::Ns => "ns",
        }
    }
}

/// How the rows are printed (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// For people: [`table`].
    #[default]
    Table,
    /// Every function: [`csv`].
    Csv,
    /// Every function, the totals and the slowest calls: [`json`].
    Json,
}

/// The report in `format`: `top` rows (per thread), by default 25 in the
/// table and all in CSV and JSON; `trace` names the input in the table.
pub fn print(
    agg: &Aggregate,
    report: &Report,
    format: Format,
    sort: Sort,
    top: Option<usize>,
    trace: &str,
) -> String {
    match format {
        Format::Table => table(
            agg,
            report,
            &TableOptions {
                trace,
                sort,
                top: top.unwrap_or(DEFAULT_TOP),
            },
        ),
        Format::Csv => csv(agg, sort, top),
        Format::Json => json(agg, report, sort, top),
    }
}

/// Rows the table shows without `--top`.
pub const DEFAULT_TOP: usize = 25;

/// The totals a report starts with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// ns of every slice without a parent: the traced time, gaps and
    /// untraced time included.
    pub ns: u64,
    /// Instructions in slices (the self instructions of every row).
    pub insns: u64,
    /// Calls (function rows only), and those cut.
    pub calls: u64,
    pub cut: u64,
    /// Of `calls`: entered by a tail call, root frames and signal
    /// handlers, and those whose start was not traced
    /// ([`FuncStats`]'s fields); the rest were call instructions
    /// ([`Totals::call_insns`]).
    pub tail_calls: u64,
    pub roots: u64,
    pub unknown_start: u64,
    /// Distinct functions.
    pub functions: u64,
}

impl Totals {
    /// Calls entered by a call instruction: what `perf script --itrace=c`
    /// counts as calls.
    pub fn call_insns(&self) -> u64 {
        self.calls - self.tail_calls - self.roots - self.unknown_start
    }
}

/// Adds up the rows.
pub fn totals(agg: &Aggregate) -> Totals {
    let mut t = Totals::default();
    let mut funcs = std::collections::BTreeSet::new();
    for ((_, f), s) in &agg.rows {
        t.ns += s.self_ns;
        t.insns += s.self_insns;
        if !agg.funcs[*f as usize].pseudo {
            t.calls += s.calls;
            t.cut += s.cut;
            t.tail_calls += s.tail_calls;
            t.roots += s.roots;
            t.unknown_start += s.unknown_start;
            funcs.insert(*f);
        }
    }
    t.functions = funcs.len() as u64;
    t
}

type Row<'a> = (ThreadKey, FuncId, &'a FuncStats);

/// The rows by thread (none unless per thread), then by `sort`, largest
/// first, then by name.
fn sorted(agg: &Aggregate, sort: Sort) -> Vec<Row<'_>> {
    let mut rows: Vec<Row> = agg.rows.iter().map(|((t, f), s)| (*t, *f, s)).collect();
    rows.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then(sort.key(b.2).cmp(&sort.key(a.2)))
            .then_with(|| {
                agg.funcs[a.1 as usize]
                    .name
                    .cmp(&agg.funcs[b.1 as usize].name)
            })
            .then(a.1.cmp(&b.1))
    });
    rows
}

/// The first `top` rows of each thread (all with `None`).
fn first_per_thread(rows: Vec<Row<'_>>, top: Option<usize>) -> Vec<Row<'_>> {
    let Some(top) = top else { return rows };
    let mut out = Vec::new();
    let mut n = 0;
    let mut thread = None;
    for r in rows {
        if out.is_empty() || r.0 != thread {
            thread = r.0;
            n = 0;
        }
        if n < top {
            out.push(r);
        }
        n += 1;
    }
    out
}

fn thread_label(agg: &Aggregate, pid: u32, tid: u32) -> String {
    match agg.threads.get(&(pid, tid)) {
        Some(name) => format!("{pid}/{tid} {}", printable(name)),
        None => format!("{pid}/{tid}"),
    }
}

/// The file name of a module path (the table is narrow).
fn short_module(m: &str) -> &str {
    m.rsplit('/').next().unwrap_or(m)
}

/// `s` cut to `max` characters, `…` marking the cut, its control and
/// invisible characters escaped first ([`printable`]): the names in the
/// table come from the traced binaries, which must not drive the
/// terminal it is printed on nor split its rows.
fn clip(s: &str, max: usize) -> String {
    let s = &*printable(s);
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Widest function and module columns of the table.
const FUNCTION_WIDTH: usize = 48;
const MODULE_WIDTH: usize = 24;

/// What the table shows besides the rows.
pub struct TableOptions<'a> {
    /// The trace as the user named it (for the heading and the commands).
    pub trace: &'a str,
    pub sort: Sort,
    /// Rows per thread (all threads together unless per thread).
    pub top: usize,
}

/// The table for people: a heading with the totals, then the functions by
/// `sort` (per thread when the rows are), then the slowest calls with the
/// command that decodes each for Perfetto.
pub fn table(agg: &Aggregate, report: &Report, o: &TableOptions) -> String {
    let t = totals(agg);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ptdec report of {}: {} threads, {} traced, {} instructions, {} calls ({} cut: start or end not traced) of {} functions",
        printable(o.trace),
        report.threads.len(),
        duration(t.ns),
        thousands(report.decode.insns),
        thousands(t.calls),
        thousands(t.cut),
        thousands(t.functions)
    );
    let _ = writeln!(
        out,
        "  calls: {} call instructions (what perf script --itrace=c counts), {} tail calls (jumps to a function's entry), {} root frames and signal handlers, {} whose start was not traced",
        thousands(t.call_insns()),
        thousands(t.tail_calls),
        thousands(t.roots),
        thousands(t.unknown_start)
    );
    if t.insns != report.decode.insns {
        let _ = writeln!(
            out,
            "  {} of the instructions lie in call slices (a --start/--duration window counts whole calls)",
            thousands(t.insns)
        );
    }
    let rows = sorted(agg, o.sort);
    let shown = first_per_thread(rows, Some(o.top));
    let _ = writeln!(
        out,
        "\nby {}, top {} (every function: --format csv)",
        o.sort.describe(),
        o.top
    );
    let cells: Vec<[String; 10]> = shown
        .iter()
        .map(|(_, f, s)| {
            let name = &agg.funcs[*f as usize];
            [
                clip(&name.name, FUNCTION_WIDTH),
                clip(short_module(&name.module), MODULE_WIDTH),
                thousands(s.calls),
                if s.cut > 0 {
                    thousands(s.cut)
                } else {
                    String::new()
                },
                duration(s.total_ns),
                duration(s.self_ns),
                format!("{:.1}%", percent(s.self_ns, t.ns)),
                duration(s.max_ns),
                thousands(s.insns),
                thousands(s.self_insns),
            ]
        })
        .collect();
    let head = [
        "function",
        "module",
        "calls",
        "cut",
        "total time",
        "self time",
        "self %",
        "max time",
        "insns",
        "self insns",
    ];
    let mut width: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for c in &cells {
        for (w, v) in width.iter_mut().zip(c) {
            *w = (*w).max(v.chars().count());
        }
    }
    let line = |out: &mut String, c: &[&str]| {
        let mut l = String::new();
        for (i, (v, w)) in c.iter().zip(&width).enumerate() {
            let pad = w - v.chars().count();
            if i < 2 {
                l.push_str(v);
                l.push_str(&" ".repeat(pad));
            } else {
                l.push_str(&" ".repeat(pad));
                l.push_str(v);
            }
            l.push_str("  ");
        }
        let _ = writeln!(out, "{}", l.trim_end());
    };
    let mut thread = None;
    for (i, c) in cells.iter().enumerate() {
        let row_thread = shown[i].0;
        if i == 0 || row_thread != thread {
            thread = row_thread;
            if let Some((pid, tid)) = row_thread {
                let _ = writeln!(out, "\nthread {}", thread_label(agg, pid, tid));
            }
            line(&mut out, &head);
        }
        let c: Vec<&str> = c.iter().map(String::as_str).collect();
        line(&mut out, &c);
    }
    slowest_table(&mut out, agg, o.trace);
    out
}

/// The slowest calls (`--slowest`), each with the command that decodes
/// it for Perfetto from `trace`, appended to `out`.
fn slowest_table(out: &mut String, agg: &Aggregate, trace: &str) {
    if agg.slowest.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nslowest calls (decode one for Perfetto: ptdec {} --start @NS --duration D -o slow.ftf)",
        printable(trace)
    );
    let head = [
        "duration", "thread", "depth", "function", "module", "window",
    ];
    let cells: Vec<[String; 6]> = agg
        .slowest
        .iter()
        .map(|c| {
            let name = &agg.funcs[c.func as usize];
            let mut f = clip(&name.name, FUNCTION_WIDTH);
            if c.cut {
                f.push_str(" [cut]");
            }
            [
                duration(c.ns),
                thread_label(agg, c.pid, c.tid),
                c.depth.to_string(),
                f,
                clip(short_module(&name.module), MODULE_WIDTH),
                window(c),
            ]
        })
        .collect();
    let mut width: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for c in &cells {
        for (w, v) in width.iter_mut().zip(c) {
            *w = (*w).max(v.chars().count());
        }
    }
    for c in std::iter::once(head.map(String::from)).chain(cells) {
        let mut l = String::new();
        for (i, (v, w)) in c.iter().zip(&width).enumerate() {
            let pad = " ".repeat(w - v.chars().count());
            if i == 0 || i == 2 {
                l.push_str(&pad);
                l.push_str(v);
            } else {
                l.push_str(v);
                l.push_str(&pad);
            }
            l.push_str("  ");
        }
        let _ = writeln!(out, "{}", l.trim_end());
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// The options that decode this call whole, timed as in the report
/// ([`SlowCall::window`]).
pub fn window(c: &SlowCall) -> String {
    let (a, b) = c.window;
    // At least 1 ns: a window of 0 ns is refused (it holds nothing), and
    // a call of no time (no timing packets) is found in the ns it is at.
    format!("--start @{a} --duration {}ns", (b - a).max(1))
}

/// A CSV field, quoted when it holds a comma, quote or line break (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The CSV header; per thread, `pid,tid,thread,` comes first.
/// (`tail_calls` came later than the others: last, so that the columns
/// before it kept their places.)
pub const CSV_HEADER: &str =
    "function,module,calls,total_ns,self_ns,max_ns,insns,self_insns,tail_calls";

/// Every row (the first `top` of each thread with `top`) as CSV under
/// [`CSV_HEADER`], times in ns, modules as recorded.
pub fn csv(agg: &Aggregate, sort: Sort, top: Option<usize>) -> String {
    let rows = first_per_thread(sorted(agg, sort), top);
    let per_thread = rows.iter().any(|r| r.0.is_some());
    let mut out = String::new();
    if per_thread {
        out.push_str("pid,tid,thread,");
    }
    out.push_str(CSV_HEADER);
    out.push('\n');
    for (t, f, s) in rows {
        if let Some((pid, tid)) = t {
            let name = agg.threads.get(&(pid, tid)).map_or("", String::as_str);
            let _ = write!(out, "{pid},{tid},{},", csv_field(name));
        }
        let name = &agg.funcs[f as usize];
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{}",
            csv_field(&name.name),
            csv_field(&name.module),
            s.calls,
            s.total_ns,
            s.self_ns,
            s.max_ns,
            s.insns,
            s.self_insns,
            s.tail_calls
        );
    }
    out
}

/// The report as one JSON object: the totals, `functions` (the CSV's
/// fields, plus `cut`, `unknown_start` and `roots`, and `pid`, `tid`,
/// `thread` per thread) and `slowest`. Keys in sorted order (as a
/// `serde_json::Value` prints them), serialized straight from the rows:
/// building a `Value` of a `--per-thread` report first took 2.8 times
/// the table's memory.
pub fn json(agg: &Aggregate, report: &Report, sort: Sort, top: Option<usize>) -> String {
    let mut s = Vec::new();
    write_json(&mut s, agg, report, sort, top).expect("a Vec takes every byte");
    String::from_utf8(s).expect("serde_json writes UTF-8")
}

/// [`json`] written to `out` as it is made (`ptdec report --format json`
/// streams it to standard output: no copy of the report in memory).
pub fn write_json(
    out: &mut dyn io::Write,
    agg: &Aggregate,
    report: &Report,
    sort: Sort,
    top: Option<usize>,
) -> io::Result<()> {
    let doc = JsonReport {
        agg,
        report,
        sort,
        totals: totals(agg),
        functions: first_per_thread(sorted(agg, sort), top),
    };
    let mut w = io::BufWriter::with_capacity(1 << 16, out);
    // A write error comes back as the io::Error it was (a full disk).
    serde_json::to_writer_pretty(&mut w, &doc).map_err(io::Error::from)?;
    io::Write::write_all(&mut w, b"\n")?;
    io::Write::flush(&mut w)
}

/// [`json`]'s document.
struct JsonReport<'a> {
    agg: &'a Aggregate,
    report: &'a Report,
    sort: Sort,
    totals: Totals,
    functions: Vec<Row<'a>>,
}

impl serde::Serialize for JsonReport<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let t = &self.totals;
        let sort = match self.sort {
            Sort::Calls => "calls",
            Sort::Total => "total",
            Sort::SelfTime => "self",
            Sort::Insns => "insns",
        };
        let agg = self.agg;
        let mut m = ser.serialize_map(Some(13))?;
        m.serialize_entry("call_instructions", &t.call_insns())?;
        m.serialize_entry("calls", &t.calls)?;
        m.serialize_entry("cut", &t.cut)?;
        m.serialize_entry("functions", &JsonRows(agg, &self.functions))?;
        m.serialize_entry("insns", &self.report.decode.insns)?;
        m.serialize_entry("origin_ns", &agg.origin)?;
        m.serialize_entry("roots", &t.roots)?;
        m.serialize_entry("slowest", &JsonSlows(agg))?;
        m.serialize_entry("sort", sort)?;
        m.serialize_entry("tail_calls", &t.tail_calls)?;
        m.serialize_entry("threads", &self.report.threads.len())?;
        m.serialize_entry("time_ns", &t.ns)?;
        m.serialize_entry("unknown_start", &t.unknown_start)?;
        m.end()
    }
}

/// `functions`, row by row.
struct JsonRows<'a>(&'a Aggregate, &'a [Row<'a>]);

impl serde::Serialize for JsonRows<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_seq(self.1.iter().map(|r| JsonRow(self.0, *r)))
    }
}

/// `slowest`, call by call.
struct JsonSlows<'a>(&'a Aggregate);

impl serde::Serialize for JsonSlows<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_seq(self.0.slowest.iter().map(|c| JsonSlow(self.0, c)))
    }
}

/// One row of `functions`.
struct JsonRow<'a>(&'a Aggregate, Row<'a>);

impl serde::Serialize for JsonRow<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let JsonRow(agg, (th, f, s)) = *self;
        let name = &agg.funcs[f as usize];
        let mut m = ser.serialize_map(None)?;
        m.serialize_entry("calls", &s.calls)?;
        m.serialize_entry("cut", &s.cut)?;
        m.serialize_entry("function", &*name.name)?;
        m.serialize_entry("insns", &s.insns)?;
        m.serialize_entry("max_ns", &s.max_ns)?;
        m.serialize_entry("module", &*name.module)?;
        if let Some((pid, _)) = th {
            m.serialize_entry("pid", &pid)?;
        }
        m.serialize_entry("roots", &s.roots)?;
        m.serialize_entry("self_insns", &s.self_insns)?;
        m.serialize_entry("self_ns", &s.self_ns)?;
        m.serialize_entry("tail_calls", &s.tail_calls)?;
        if let Some((pid, tid)) = th {
            m.serialize_entry("thread", &agg.threads.get(&(pid, tid)))?;
            m.serialize_entry("tid", &tid)?;
        }
        m.serialize_entry("total_ns", &s.total_ns)?;
        m.serialize_entry("unknown_start", &s.unknown_start)?;
        m.end()
    }
}

/// One call of `slowest`.
struct JsonSlow<'a>(&'a Aggregate, &'a SlowCall);

impl serde::Serialize for JsonSlow<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let JsonSlow(agg, c) = *self;
        let name = &agg.funcs[c.func as usize];
        let mut m = ser.serialize_map(Some(11))?;
        m.serialize_entry("cut", &c.cut)?;
        m.serialize_entry("depth", &c.depth)?;
        m.serialize_entry("duration_ns", &c.ns)?;
        m.serialize_entry("function", &*name.name)?;
        m.serialize_entry("insns", &c.insns)?;
        m.serialize_entry("module", &*name.module)?;
        m.serialize_entry("pid", &c.pid)?;
        m.serialize_entry("start_ns", &c.start)?;
        m.serialize_entry("thread", &agg.threads.get(&(c.pid, c.tid)))?;
        m.serialize_entry("tid", &c.tid)?;
        m.serialize_entry("window", &window(c))?;
        m.end()
    }
}

/// A frame's name in a folded line: `;` separates frames and the weight
/// follows the last space, so `;` and line breaks become ':' and ' '.
fn frame(name: &str) -> String {
    name.replace(';', ":").replace(['\n', '\r'], " ")
}

/// Folded stacks, one line `outer;inner;leaf WEIGHT` per distinct path
/// with a weight above 0, sorted; per thread, the outermost frame is the
/// thread (`NAME PID/TID`). The weights add up to the instructions (or
/// ns) of every slice.
pub fn folded(agg: &Aggregate, weight: Weight) -> String {
    let mut lines: Vec<String> = agg
        .folded
        .iter()
        .filter_map(|f| {
            let w = match weight {
                Weight::Insns => f.insns,
                Weight::Ns => f.ns,
            };
            if w == 0 {
                return None;
            }
            let mut frames: Vec<String> = Vec::with_capacity(f.path.len() + 1);
            if let Some((pid, tid)) = f.thread {
                let name = agg.threads.get(&(pid, tid)).map_or("", String::as_str);
                frames.push(frame(&format!("{name} {pid}/{tid}")));
            }
            frames.extend(f.path.iter().map(|&f| frame(&agg.funcs[f as usize].name)));
            Some(format!("{} {w}", frames.join(";")))
        })
        .collect();
    lines.sort_unstable();
    let mut out = lines.join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// Why a flame graph cannot be drawn.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FlameError {
    /// No path has a weight: nothing was decoded (or no time passed, with
    /// `--weight ns`).
    #[error("nothing to draw: no call has a {0} weight (was anything decoded?)")]
    Empty(&'static str),
    /// inferno or the writer failed.
    #[error("cannot draw the flame graph: {0}")]
    Io(#[from] io::Error),
}

/// An SVG flame graph of [`folded`]'s lines, drawn by inferno.
pub fn flamegraph(
    agg: &Aggregate,
    weight: Weight,
    title: &str,
    out: impl io::Write,
) -> Result<(), FlameError> {
    let text = folded(agg, weight);
    if text.is_empty() {
        return Err(FlameError::Empty(weight.unit()));
    }
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = weight.unit().to_string();
    // The same colours for the same input.
    opts.deterministic = true;
    opts.hash = true;
    inferno::flamegraph::from_lines(&mut opts, text.lines(), out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call of no time (a trace without timing packets) gets a window
    /// ptdec takes: at least 1 ns (`--duration 0ns` is refused).
    #[test]
    fn a_windows_duration_is_at_least_1ns() {
        let call = |window| SlowCall {
            func: 0,
            pid: 1,
            tid: 1,
            depth: 0,
            start: 5,
            ns: 0,
            insns: 3,
            cut: false,
            window,
        };
        assert_eq!(window(&call((5, 5))), "--start @5 --duration 1ns");
        assert_eq!(window(&call((5, 9))), "--start @5 --duration 4ns");
    }
}
