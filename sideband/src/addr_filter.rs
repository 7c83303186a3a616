//! Intel PT address filters in perf's syntax: what `ptrec --filter` and
//! `ptsim --filter` take from the user, what the kernel takes through
//! `PERF_EVENT_IOC_SET_FILTER`, and what AUXTRACE_INFO records (the resolved
//! form, as perf stores it, so perf and ptdec can both read it back).
//!
//! User form (perf-record(1), "address filters"):
//!
//! ```text
//! filter|start|stop|tracestop <start> [/ <size>] [@<file name>]
//! ```
//!
//! `<start>` and `<size>` are numbers or function symbols (`#n` picks the
//! n'th symbol of that name in address order, `#0`/`#g`/`#G` the global one;
//! `*` as start means the whole file); a symbol as size means "to the end of
//! that symbol"; a `filter`/`tracestop` of one symbol covers that symbol.
//! Without `@file` the kernel is meant and numbers are kernel addresses; with
//! it, numbers are offsets in that file. Several filters are separated by
//! spaces or commas; symbols must be surrounded by white space.
//!
//! Resolved form (the kernel's): `filter 0xOFF/0xSIZE@/abs/path`, `start
//! 0xOFF@/abs/path`, `stop 0xADDR` (kernel), one per filter, joined with
//! commas; `tracestop` becomes `stop` with a size.
//!
//! Pure code: symbol tables come in as data ([`FuncSym`]); reading ELF files
//! and /proc/kallsyms is the recorder's job. Hand-written because no crate
//! parses this syntax; the grammar is perf's (tools/perf/util/auxtrace.c),
//! the implementation our own.

use std::fmt;

/// What a filter does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Trace only inside the region (`filter`).
    Filter,
    /// Start tracing when the address is executed (`start`).
    Start,
    /// Stop tracing when the address is executed (`stop`).
    Stop,
    /// Stop tracing inside the region (`tracestop`; the kernel's ranged `stop`).
    TraceStop,
}

impl Action {
    fn parse(word: &str) -> Option<Action> {
        Some(match word {
            "filter" => Action::Filter,
            "start" => Action::Start,
            "stop" => Action::Stop,
            "tracestop" => Action::TraceStop,
            _ => return None,
        })
    }

    /// Whether the filter is a region (has a size) rather than one address.
    pub fn is_range(self) -> bool {
        matches!(self, Action::Filter | Action::TraceStop)
    }

    /// The keyword the kernel takes (`tracestop` is a ranged `stop`).
    pub fn kernel_word(self) -> &'static str {
        match self {
            Action::Filter => "filter",
            Action::Start => "start",
            Action::Stop | Action::TraceStop => "stop",
        }
    }
}

/// Which of several symbols of one name (`#n`, `#g`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// The name must be unique.
    Only,
    /// The global one (`#0`, `#g`, `#G`).
    Global,
    /// The n'th in address order, from 1 (`#n`).
    Nth(u32),
}

/// A start or size as the user wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loc {
    /// A number: an address (kernel) or a file offset (with `@file`), or a size.
    Num(u64),
    /// A function symbol.
    Sym { name: String, which: Which },
    /// `*`: the whole file (or kernel), start only.
    All,
}

/// One filter as the user wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub action: Action,
    pub start: Loc,
    /// `/ <size>`: a number of bytes or a symbol to whose end the region runs.
    pub size: Option<Loc>,
    /// `@<file>`; `None`: the kernel.
    pub file: Option<String>,
}

/// A filter the kernel takes: numbers only, the file made absolute by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub action: Action,
    /// File offset (with `file`) or kernel address.
    pub start: u64,
    /// Bytes of the region; 0 for `start`/`stop`.
    pub size: u64,
    pub file: Option<String>,
}

/// A function symbol of a file (start as a file offset) or of the kernel
/// (start as an address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuncSym {
    pub name: String,
    pub start: u64,
    /// 0 when unknown (kallsyms; perf then runs it to the next symbol).
    pub size: u64,
    pub global: bool,
}

/// A filter that cannot be parsed or resolved; the message names the filter
/// part that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FilterError {
    /// The text is not of the filter grammar.
    #[error("address filter {text:?}: {why}.\n{FORMS}")]
    Syntax { text: String, why: String },
    /// A symbol is not a function of the file (or kernel).
    #[error("address filter: {what} not found in {place} (symbols must be functions)")]
    NotFound { what: String, place: String },
    /// A symbol name has several definitions and no `#n` picks one.
    #[error(
        "address filter: {count} functions are named {name:?} in {place}: {list}; \
         pick one with `{name} #N` (N from 1, in address order) or the global one with `{name} #g`"
    )]
    Ambiguous {
        name: String,
        place: String,
        count: usize,
        list: String,
    },
    /// The end symbol lies before the start.
    #[error("address filter: {end} (0x{end_addr:x}) comes before the start 0x{start:x}")]
    EndBeforeStart {
        end: String,
        end_addr: u64,
        start: u64,
    },
    /// A region whose size cannot be known.
    #[error("address filter: the size of {0} is unknown; give `/ SIZE` or an end symbol")]
    NoSize(String),
    /// More filters than the CPU has address ranges.
    #[error(
        "{count} address filters given, but this CPU's Intel PT has {max} address range(s) \
         (caps/num_address_ranges); combine or drop filters"
    )]
    TooMany { count: usize, max: usize },
}

/// The forms, for error messages and `--help`.
pub const FORMS: &str =
    "Valid forms (separate several with ',' or spaces; symbols need spaces around them):\n\
  filter SYMBOL @ FILE            trace only SYMBOL in FILE\n\
  filter 0xOFFSET/0xSIZE@FILE     trace only SIZE bytes from file offset OFFSET\n\
  filter SYM1 / SYM2 @ FILE       from SYM1 to the end of SYM2\n\
  filter * @ FILE                 every function of FILE\n\
  start SYMBOL @ FILE, stop SYMBOL @ FILE\n\
                                  start/stop tracing when SYMBOL runs\n\
  tracestop SYMBOL @ FILE         do not trace inside SYMBOL\n\
  filter SYMBOL                   without @FILE: a kernel function (or 0xADDR/0xSIZE)\n\
  SYMBOL #N picks the N'th of several same-named symbols, SYMBOL #g the global one";

/// Parses the user's filter text (one or several filters).
pub fn parse(text: &str) -> Result<Vec<Spec>, FilterError> {
    let mut p = Parser { s: text, pos: 0 };
    let mut out = Vec::new();
    p.skip(" \t\n,");
    while !p.done() {
        out.push(p.one()?);
        p.skip(" \t\n,");
    }
    if out.is_empty() {
        return Err(syntax(text, "no filter given"));
    }
    Ok(out)
}

fn syntax(text: &str, why: impl Into<String>) -> FilterError {
    FilterError::Syntax {
        text: text.to_string(),
        why: why.into(),
    }
}

struct Parser<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn done(&self) -> bool {
        self.pos >= self.s.len()
    }

    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }

    fn skip(&mut self, set: &str) {
        let n = self
            .rest()
            .find(|c: char| !set.contains(c))
            .unwrap_or(self.rest().len());
        self.pos += n;
    }

    /// Up to (not including) the first character of `stop`.
    fn word(&mut self, stop: &str) -> &'a str {
        let r = self.rest();
        let n = r.find(|c: char| stop.contains(c)).unwrap_or(r.len());
        self.pos += n;
        &r[..n]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn one(&mut self) -> Result<Spec, FilterError> {
        let start_pos = self.pos;
        let word = self.word(" \t\n,");
        let action = Action::parse(word).ok_or_else(|| {
            syntax(
                self.s,
                format!("{word:?} is not one of filter, start, stop, tracestop"),
            )
        })?;
        self.skip(" \t\n");
        let start = self.loc(true)?;
        self.skip(" \t\n");
        let mut size = None;
        if self.peek() == Some('/') {
            self.pos += 1;
            self.skip(" \t\n");
            let s = self.loc(false)?;
            size = Some(s);
            self.skip(" \t\n");
        }
        let mut file = None;
        if self.peek() == Some('@') {
            self.pos += 1;
            self.skip(" \t\n");
            let f = self.word(" \t\n,");
            if f.is_empty() {
                return Err(syntax(self.s, "'@' without a file name"));
            }
            file = Some(f.to_string());
        }
        match self.peek() {
            None | Some(' ' | '\t' | '\n' | ',') => {}
            Some(c) => {
                return Err(syntax(
                    self.s,
                    format!(
                        "unexpected {c:?} after {:?}",
                        &self.s[start_pos..self.pos].trim()
                    ),
                ))
            }
        }
        if matches!(start, Loc::All) && size.is_some() {
            return Err(syntax(self.s, "'*' (the whole file) takes no '/ SIZE'"));
        }
        if matches!(size, Some(Loc::All)) {
            return Err(syntax(self.s, "'*' can only be a start"));
        }
        if let (Loc::Num(_), None, true) = (&start, &size, action.is_range()) {
            return Err(syntax(
                self.s,
                format!(
                    "{} of a number needs '/ SIZE'",
                    match action {
                        Action::TraceStop => "tracestop",
                        _ => "filter",
                    }
                ),
            ));
        }
        Ok(Spec {
            action,
            start,
            size,
            file,
        })
    }

    fn loc(&mut self, is_start: bool) -> Result<Loc, FilterError> {
        match self.peek() {
            None => Err(syntax(
                self.s,
                if is_start {
                    "missing start address or symbol"
                } else {
                    "missing size or end symbol after '/'"
                },
            )),
            Some(c) if c.is_ascii_digit() => {
                let w = self.word(" \t\n,/@");
                parse_num(w)
                    .map(Loc::Num)
                    .ok_or_else(|| syntax(self.s, format!("{w:?} is not a number")))
            }
            Some(_) => {
                let name = self.word(" \t\n,");
                if name == "*" {
                    return Ok(Loc::All);
                }
                if name.starts_with(['/', '@', '#']) {
                    return Err(syntax(self.s, format!("expected a symbol, found {name:?}")));
                }
                let save = self.pos;
                self.skip(" \t\n");
                let which = if self.peek() == Some('#') {
                    self.pos += 1;
                    let w = self.word(" \t\n,/@");
                    match w {
                        "g" | "G" | "0" => Which::Global,
                        n => match parse_num(n).and_then(|n| u32::try_from(n).ok()) {
                            Some(n) if n > 0 => Which::Nth(n),
                            _ => {
                                return Err(syntax(
                                    self.s,
                                    format!("#{w} after {name:?}: expected #N (from 1), #0 or #g"),
                                ))
                            }
                        },
                    }
                } else {
                    self.pos = save;
                    Which::Only
                };
                Ok(Loc::Sym {
                    name: name.to_string(),
                    which,
                })
            }
        }
    }
}

fn parse_num(w: &str) -> Option<u64> {
    if let Some(h) = w.strip_prefix("0x").or_else(|| w.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if w.len() > 1 && w.starts_with('0') {
        u64::from_str_radix(&w[1..], 8).ok()
    } else {
        w.parse().ok()
    }
}

/// Finds `name` among `syms` (sorted by start). Returns (start, size).
fn find(
    syms: &[FuncSym],
    name: &str,
    which: Which,
    place: &str,
) -> Result<(u64, u64), FilterError> {
    let hits: Vec<usize> = syms
        .iter()
        .enumerate()
        .filter(|(_, s)| s.name == name)
        .map(|(i, _)| i)
        .collect();
    let pick = match which {
        Which::Only => match hits.as_slice() {
            [one] => Some(*one),
            [] => None,
            many => {
                let list = many
                    .iter()
                    .enumerate()
                    .map(|(n, &i)| {
                        let s = &syms[i];
                        format!(
                            "#{} 0x{:x} {}",
                            n + 1,
                            s.start,
                            if s.global { "global" } else { "local" }
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(FilterError::Ambiguous {
                    name: name.to_string(),
                    place: place.to_string(),
                    count: many.len(),
                    list,
                });
            }
        },
        Which::Global => hits.iter().copied().find(|&i| syms[i].global),
        Which::Nth(n) => hits.get(n as usize - 1).copied(),
    };
    let Some(i) = pick else {
        let what = match which {
            Which::Only => format!("function {name:?}"),
            Which::Global => format!("global function {name:?}"),
            Which::Nth(n) => format!("occurrence #{n} of function {name:?}"),
        };
        return Err(FilterError::NotFound {
            what,
            place: place.to_string(),
        });
    };
    let s = &syms[i];
    // Unsized (kallsyms): up to the next symbol that starts later.
    let size = if s.size > 0 {
        s.size
    } else {
        syms[i + 1..]
            .iter()
            .find(|n| n.start > s.start)
            .map_or(0, |n| n.start - s.start)
    };
    Ok((s.start, size))
}

/// Resolves one filter against the function symbols of its file (or of the
/// kernel when `spec.file` is `None`), sorted by start. `file` is the name
/// to record (the absolute path of `spec.file`).
pub fn resolve(spec: &Spec, syms: &[FuncSym], file: Option<&str>) -> Result<Resolved, FilterError> {
    let place = file.map_or_else(|| "the kernel (/proc/kallsyms)".to_string(), str::to_string);
    let (start, mut size) = match &spec.start {
        Loc::Num(n) => (*n, 0),
        Loc::All => {
            let first = syms.first().ok_or_else(|| FilterError::NotFound {
                what: "any function".into(),
                place: place.clone(),
            })?;
            let end = syms
                .iter()
                .map(|s| s.start + s.size.max(1))
                .max()
                .unwrap_or(first.start);
            (first.start, end - first.start)
        }
        Loc::Sym { name, which } => {
            let (s, n) = find(syms, name, *which, &place)?;
            if n == 0 && spec.action.is_range() && spec.size.is_none() {
                return Err(FilterError::NoSize(name.clone()));
            }
            (s, if spec.action.is_range() { n } else { 0 })
        }
    };
    match &spec.size {
        None => {}
        Some(Loc::Num(n)) => size = *n,
        Some(Loc::Sym { name, which }) => {
            let (s, n) = find(syms, name, *which, &place)?;
            if n == 0 {
                return Err(FilterError::NoSize(name.clone()));
            }
            if s + n < start {
                return Err(FilterError::EndBeforeStart {
                    end: name.clone(),
                    end_addr: s,
                    start,
                });
            }
            size = s + n - start;
        }
        Some(Loc::All) => unreachable!("rejected by the parser"),
    }
    let sized = spec.action.is_range() || spec.size.is_some();
    Ok(Resolved {
        action: if spec.action == Action::Stop && sized {
            Action::TraceStop
        } else if spec.action == Action::Start && sized {
            Action::Filter
        } else {
            spec.action
        },
        start,
        size: if sized { size } else { 0 },
        file: file.map(str::to_string),
    })
}

impl fmt::Display for Resolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} 0x{:x}", self.action.kernel_word(), self.start)?;
        if self.action.is_range() {
            write!(f, "/0x{:x}", self.size)?;
        }
        if let Some(file) = &self.file {
            write!(f, "@{file}")?;
        }
        Ok(())
    }
}

/// The kernel's string for a set of resolved filters (also what
/// AUXTRACE_INFO records).
pub fn kernel_string(filters: &[Resolved]) -> String {
    filters
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses a resolved (kernel) filter string, as AUXTRACE_INFO holds it.
/// `stop` with a size reads back as [`Action::TraceStop`].
pub fn parse_resolved(text: &str) -> Result<Vec<Resolved>, FilterError> {
    parse(text)?
        .into_iter()
        .map(|s| {
            let start = match s.start {
                Loc::Num(n) => n,
                _ => return Err(syntax(text, "a resolved filter holds numbers only")),
            };
            let size = match s.size {
                None => 0,
                Some(Loc::Num(n)) => n,
                Some(_) => return Err(syntax(text, "a resolved filter holds numbers only")),
            };
            let sized = s.size.is_some();
            Ok(Resolved {
                action: match (s.action, sized) {
                    (Action::Stop, true) => Action::TraceStop,
                    (a, _) => a,
                },
                start,
                size,
                file: s.file,
            })
        })
        .collect()
}

/// Checks the number of filters against the CPU's address ranges.
pub fn check_count(count: usize, max: usize) -> Result<(), FilterError> {
    if count > max {
        return Err(FilterError::TooMany { count, max });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(name: &str, start: u64, size: u64, global: bool) -> FuncSym {
        FuncSym {
            name: name.into(),
            start,
            size,
            global,
        }
    }

    fn table() -> Vec<FuncSym> {
        vec![
            sym("_start", 0x1000, 0x20, true),
            sym("helper", 0x1040, 0x10, false),
            sym("main", 0x1100, 0x80, true),
            sym("helper", 0x1200, 0x30, true),
            sym("tail", 0x1300, 0x8, true),
        ]
    }

    fn one(text: &str) -> Spec {
        let v = parse(text).unwrap();
        assert_eq!(v.len(), 1, "{v:?}");
        v.into_iter().next().unwrap()
    }

    #[test]
    fn parses_every_form() {
        assert_eq!(
            one("filter main @ /bin/prog"),
            Spec {
                action: Action::Filter,
                start: Loc::Sym {
                    name: "main".into(),
                    which: Which::Only
                },
                size: None,
                file: Some("/bin/prog".into()),
            }
        );
        assert_eq!(
            one("filter 0x1000/0x200@/bin/ls"),
            Spec {
                action: Action::Filter,
                start: Loc::Num(0x1000),
                size: Some(Loc::Num(0x200)),
                file: Some("/bin/ls".into()),
            }
        );
        let s = one("tracestop helper #2 / tail @ ./a.out");
        assert_eq!(s.action, Action::TraceStop);
        assert_eq!(
            s.start,
            Loc::Sym {
                name: "helper".into(),
                which: Which::Nth(2)
            }
        );
        assert_eq!(
            s.size,
            Some(Loc::Sym {
                name: "tail".into(),
                which: Which::Only
            })
        );
        assert_eq!(one("filter * @ x").start, Loc::All);
        assert_eq!(
            one("start main #g @ x").start,
            Loc::Sym {
                name: "main".into(),
                which: Which::Global
            }
        );
        assert_eq!(one("stop 4096").start, Loc::Num(4096));
        let many = parse("filter main @ a, start 0x10@b stop helper #1 @ c").unwrap();
        assert_eq!(many.len(), 3);
        assert_eq!(many[1].file.as_deref(), Some("b"));
        assert_eq!(many[2].action, Action::Stop);
    }

    #[test]
    fn refuses_bad_text_naming_the_part() {
        for (text, needle) in [
            ("", "no filter"),
            ("trace main @ x", "\"trace\" is not one of"),
            ("filter", "missing start"),
            ("filter main /", "missing size"),
            ("filter main @", "without a file"),
            ("filter 0x10 @ x", "needs '/ SIZE'"),
            ("filter 0xzz/4", "is not a number"),
            ("filter main #x @ a", "#x after \"main\""),
            ("filter * / 4 @ a", "takes no"),
            ("filter 0x10/8x @ a", "is not a number"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
            assert!(e.contains("Valid forms"), "{e}");
        }
    }

    #[test]
    fn resolves_symbols_as_perf_does() {
        let t = table();
        let r = resolve(&one("filter main @ p"), &t, Some("/p")).unwrap();
        assert_eq!(r.to_string(), "filter 0x1100/0x80@/p");
        // From main to the end of tail.
        let r = resolve(&one("filter main / tail @ p"), &t, Some("/p")).unwrap();
        assert_eq!((r.start, r.size), (0x1100, 0x1308 - 0x1100));
        let r = resolve(&one("start main @ p"), &t, Some("/p")).unwrap();
        assert_eq!(r.to_string(), "start 0x1100@/p");
        let r = resolve(&one("tracestop helper #2 @ p"), &t, Some("/p")).unwrap();
        assert_eq!(r.to_string(), "stop 0x1200/0x30@/p");
        let r = resolve(&one("stop helper #g @ p"), &t, Some("/p")).unwrap();
        assert_eq!(r.to_string(), "stop 0x1200@/p");
        let r = resolve(&one("filter * @ p"), &t, Some("/p")).unwrap();
        assert_eq!((r.start, r.size), (0x1000, 0x308));
        let r = resolve(&one("filter 0x1000/0x40 @ p"), &t, Some("/p")).unwrap();
        assert_eq!(r.to_string(), "filter 0x1000/0x40@/p");
    }

    #[test]
    fn resolution_errors_name_the_symbol() {
        let t = table();
        let e = resolve(&one("filter helper @ p"), &t, Some("/p")).unwrap_err();
        assert!(matches!(e, FilterError::Ambiguous { count: 2, .. }), "{e}");
        assert!(
            e.to_string().contains("#1 0x1040 local, #2 0x1200 global"),
            "{e}"
        );
        let e = resolve(&one("filter nope @ p"), &t, Some("/p")).unwrap_err();
        assert!(
            e.to_string().contains("function \"nope\" not found in /p"),
            "{e}"
        );
        let e = resolve(&one("filter helper #3 @ p"), &t, Some("/p")).unwrap_err();
        assert!(e.to_string().contains("occurrence #3"), "{e}");
        let e = resolve(&one("filter main / _start @ p"), &t, Some("/p")).unwrap_err();
        assert!(matches!(e, FilterError::EndBeforeStart { .. }), "{e}");
    }

    #[test]
    fn kernel_symbols_run_to_the_next_one() {
        let k = vec![
            sym("do_sys_open", 0xffff_ffff_8100_0000, 0, true),
            sym("do_sys_open", 0xffff_ffff_8100_0000, 0, true),
            sym("ksys_read", 0xffff_ffff_8100_0400, 0, true),
            sym("last", 0xffff_ffff_8100_0800, 0, true),
        ];
        let r = resolve(&one("filter ksys_read"), &k, None).unwrap();
        assert_eq!(r.to_string(), "filter 0xffffffff81000400/0x400");
        let e = resolve(&one("filter last"), &k, None).unwrap_err();
        assert_eq!(e, FilterError::NoSize("last".into()));
        // A start needs no size.
        let r = resolve(&one("start last"), &k, None).unwrap();
        assert_eq!(r.to_string(), "start 0xffffffff81000800");
    }

    #[test]
    fn resolved_string_round_trips() {
        let rs = vec![
            Resolved {
                action: Action::Filter,
                start: 0x1100,
                size: 0x80,
                file: Some("/bin/a b".replace(' ', "_")),
            },
            Resolved {
                action: Action::TraceStop,
                start: 0x1200,
                size: 0x30,
                file: Some("/lib/x.so".into()),
            },
            Resolved {
                action: Action::Start,
                start: 0xffff_ffff_8100_0000,
                size: 0,
                file: None,
            },
        ];
        let s = kernel_string(&rs);
        assert_eq!(
            s,
            "filter 0x1100/0x80@/bin/a_b,stop 0x1200/0x30@/lib/x.so,start 0xffffffff81000000"
        );
        assert_eq!(parse_resolved(&s).unwrap(), rs);
    }

    #[test]
    fn count_is_checked() {
        assert!(check_count(2, 2).is_ok());
        let e = check_count(3, 2).unwrap_err().to_string();
        assert!(
            e.contains("3 address filters") && e.contains("2 address range"),
            "{e}"
        );
    }
}
