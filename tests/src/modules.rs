//! A crate's modules and the imports between them, read from its sources,
//! for the architecture tests: every module sits in a named stage, a stage
//! imports only the stages it is allowed, and no modules import each other
//! in a circle (`decoder/tests/architecture.rs`, `ptflow/tests/`).
//!
//! Hand-written, std only: a crate such as `syn` would parse Rust fully, but
//! the edges are plain paths and pt-tests stays std-only so every crate can
//! take it. What counts as an import of module `m` by a file: a path
//! `crate::m...` (also inside `use crate::{...}` groups), `super::x...` and
//! `self::x...` resolved from the file's module, to the longest prefix that
//! is a module. A parent's use of its own submodules by their bare names is
//! not counted (a module may use what it declares), nor is code in comments,
//! string literals or `#[cfg(test)]` modules, nor `tests.rs` files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module path (`decode::chunk`; the crate root is `""`) to the modules it
/// imports (never itself or its own submodules).
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// The import graph of the crate whose sources are under `src` (its
/// `lib.rs` and the files below it; `main.rs` and `bin/` are left out).
pub fn graph(src: &Path) -> Graph {
    graph_of(&[("", src)])
}

/// The import graph of crates that re-export each other's modules under
/// their own names (as `ptdec` does `ptdec_core::decode` as `decode`),
/// each given as (its name in paths, its sources): their modules as one
/// namespace, so that `crate::decode` in one and `ptdec_core::decode` in
/// another name the same module.
pub fn graph_of(crates: &[(&str, &Path)]) -> Graph {
    let mut files = Vec::new();
    for (_, src) in crates {
        collect(src, src, &mut files);
    }
    let names: Vec<&str> = crates
        .iter()
        .map(|c| c.0)
        .filter(|n| !n.is_empty())
        .collect();
    let modules: BTreeSet<String> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut g = Graph::new();
    for (m, path) in &files {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let code = without_tests(&strip(&text));
        let deps = g.entry(m.clone()).or_default();
        for p in paths(&code, &names) {
            if let Some(d) = resolve(m, &p, &modules) {
                let own = d == *m || m.is_empty() || d.starts_with(&format!("{m}::"));
                if !own {
                    deps.insert(d);
                }
            }
        }
    }
    g
}

/// (module path, file) of every `.rs` file under `dir`, but tests.
fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, std::path::PathBuf)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "tests" && n != "bin") {
                collect(root, &p, out);
            }
            continue;
        }
        if p.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = p.strip_prefix(root).expect("under the root");
        let mut parts: Vec<String> = rel
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        let last = parts.pop().expect("a file name");
        let stem = last.trim_end_matches(".rs");
        match stem {
            "main" if parts.is_empty() => continue,
            "tests" => continue,
            "mod" => {}
            "lib" if parts.is_empty() => {}
            _ => parts.push(stem.to_string()),
        }
        out.push((parts.join("::"), p));
    }
}

/// `text` with comments and the contents of string and char literals
/// blanked out (kept as spaces, so braces in them do not count).
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
                out.push(b' ');
            }
            b'r' if raw_string_at(b, i).is_some() => {
                let (hashes, body) = raw_string_at(b, i).expect("checked");
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                let end = b[body..]
                    .windows(close.len())
                    .position(|w| w == close.as_slice())
                    .map_or(b.len(), |p| body + p + close.len());
                out.extend_from_slice(b"\"\"");
                i = end;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.extend_from_slice(b"\"\"");
            }
            // A char literal ('x', '\n', '{', 'é'), not a lifetime ('a).
            b'\''
                if b.get(i + 1) == Some(&b'\\')
                    || b.get(i + 1 + utf8_len(b.get(i + 1).copied())) == Some(&b'\'') =>
            {
                i += 1;
                while i < b.len() && b[i] != b'\'' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.extend_from_slice(b"' '");
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The length of the UTF-8 character that starts with byte `first` (1 for
/// none).
fn utf8_len(first: Option<u8>) -> usize {
    match first {
        Some(c) if c >= 0xf0 => 4,
        Some(c) if c >= 0xe0 => 3,
        Some(c) if c >= 0xc0 => 2,
        _ => 1,
    }
}

/// At `b[i] == 'r'`, a raw string's `#` count and where its body starts
/// (also of a byte or C string: `br"…"`, `cr#"…"#`).
fn raw_string_at(b: &[u8], i: usize) -> Option<(usize, usize)> {
    let ident = |k: usize| b[k].is_ascii_alphanumeric() || b[k] == b'_';
    // Not the end of an identifier (`for"`, `bar"`), but a `b` or `c`
    // prefix that starts one.
    let prefixed = i > 0 && matches!(b[i - 1], b'b' | b'c') && (i < 2 || !ident(i - 2));
    if i > 0 && ident(i - 1) && !prefixed {
        return None;
    }
    let mut j = i + 1;
    while b.get(j) == Some(&b'#') {
        j += 1;
    }
    (b.get(j) == Some(&b'"')).then_some((j - i - 1, j + 1))
}

/// `code` without the items marked `#[cfg(test)]` that are modules (`mod
/// tests { ... }` or `mod tests;`).
fn without_tests(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let item = after.trim_start();
        if !item.starts_with("mod ") {
            out.push_str("#[cfg(test)]");
            rest = after;
            continue;
        }
        let open = item.find(['{', ';']).unwrap_or(item.len());
        if item[open..].starts_with(';') {
            rest = &item[open + 1..];
            continue;
        }
        let mut depth = 0;
        let mut end = item.len();
        for (k, c) in item[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Every path that starts with `crate::`, `super::` or `self::` in
/// `code`, or with the name of one of `crates` (`ptdec_core::`, also
/// `::ptdec_core::`: read as `crate::`), groups (`crate::{a, b::{c, d}}`)
/// expanded, as segments.
fn paths(code: &str, crates: &[&str]) -> Vec<Vec<String>> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let names: Vec<(String, &str)> = crates
        .iter()
        .map(|c| (format!("{c}::"), "crate"))
        .chain(["crate", "super", "self"].map(|h| (format!("{h}::"), h)))
        .collect();
    while i < b.len() {
        let starts_word = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        let head = names
            .iter()
            .find(|(h, _)| starts_word && b[i..].starts_with(h.as_bytes()));
        match head {
            Some((h, root)) => {
                let (h, root) = (h.as_str(), root.to_string());
                let (mut found, end) = tree(code, i + h.len());
                for p in &mut found {
                    p.insert(0, root.clone());
                }
                out.extend(found);
                i = end;
            }
            None => i += 1,
        }
    }
    out
}

/// The paths of the use tree at `code[i..]` (`a::b`, `a::{b, c::d}`,
/// `{a, b}`) and where it ends.
fn tree(code: &str, mut i: usize) -> (Vec<Vec<String>>, usize) {
    let b = code.as_bytes();
    let skip_ws = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    let mut prefix = Vec::new();
    loop {
        i = skip_ws(i);
        if b.get(i) == Some(&b'{') {
            let mut all = Vec::new();
            i += 1;
            loop {
                i = skip_ws(i);
                match b.get(i) {
                    Some(b'}') | None => return (joined(&prefix, all), i + 1),
                    Some(b',') => i += 1,
                    _ => {
                        let (found, end) = tree(code, i);
                        all.extend(found);
                        i = end;
                    }
                }
            }
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        if i == start {
            // A glob (kept as `*`), or the path ended at `::` with
            // something else.
            if b.get(i) == Some(&b'*') {
                prefix.push("*".into());
            }
            return (vec![prefix], i.max(start + 1).min(b.len()));
        }
        prefix.push(code[start..i].to_string());
        if b[i..].starts_with(b"::") {
            i += 2;
        } else {
            return (vec![prefix], i);
        }
    }
}

fn joined(prefix: &[String], tails: Vec<Vec<String>>) -> Vec<Vec<String>> {
    tails
        .into_iter()
        .map(|t| prefix.iter().cloned().chain(t).collect())
        .collect()
}

/// The module `path` (whose first segment is `crate`, `super` or `self`)
/// names from module `m` (whether a file `m.rs` or `m/mod.rs`, `super` is
/// its parent): the longest prefix that is a module of `modules`.
fn resolve(m: &str, path: &[String], modules: &BTreeSet<String>) -> Option<String> {
    let mut base: Vec<String> = if m.is_empty() {
        Vec::new()
    } else {
        m.split("::").map(str::to_string).collect()
    };
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    // A glob of the crate root: its names cannot be told apart.
    if base.is_empty() && rest.len() == 1 && rest[0] == "*" {
        return Some("*".into());
    }
    let mut best = None;
    for k in 0..=rest.len() {
        let cand: Vec<&str> = base
            .iter()
            .map(String::as_str)
            .chain(rest[..k].iter().map(String::as_str))
            .collect();
        let name = cand.join("::");
        if modules.contains(&name) {
            best = Some(name);
        }
    }
    best
}

/// The import circles of `g`: each strongly connected set of more than one
/// module, sorted.
pub fn circles(g: &Graph) -> Vec<Vec<String>> {
    // Tarjan's algorithm, iterative over an index.
    let names: Vec<&String> = g.keys().collect();
    let index: BTreeMap<&String, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let edges: Vec<Vec<usize>> = names
        .iter()
        .map(|n| g[*n].iter().filter_map(|d| index.get(d).copied()).collect())
        .collect();
    let n = names.len();
    let (mut idx, mut low) = (vec![usize::MAX; n], vec![0; n]);
    let (mut on, mut stack, mut out) = (vec![false; n], Vec::new(), Vec::new());
    let mut counter = 0;
    for root in 0..n {
        if idx[root] != usize::MAX {
            continue;
        }
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut next)) = work.last_mut() {
            if *next == 0 && idx[v] == usize::MAX {
                idx[v] = counter;
                low[v] = counter;
                counter += 1;
                stack.push(v);
                on[v] = true;
            }
            if let Some(&w) = edges[v].get(*next) {
                *next += 1;
                if idx[w] == usize::MAX {
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(idx[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(u, _)) = work.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == idx[v] {
                let mut comp = Vec::new();
                loop {
                    let w = stack.pop().expect("on the stack");
                    on[w] = false;
                    comp.push(names[w].clone());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    out.push(comp);
                }
            }
        }
    }
    out.sort();
    out
}

/// Stages of a crate, lowest first: each a name, the module paths it holds
/// (a module belongs to the stage of its longest listed prefix) and the
/// stages it may import besides itself.
pub struct Stages<'a> {
    pub stages: &'a [(&'a str, &'a [&'a str], &'a [&'a str])],
}

impl Stages<'_> {
    /// The stage of module `m`, if one lists it or a parent of it.
    pub fn of(&self, m: &str) -> Option<&str> {
        let mut best: Option<(usize, &str)> = None;
        for &(stage, mods, _) in self.stages {
            for &p in mods {
                let hit = m == p || m.starts_with(&format!("{p}::"));
                if hit && best.is_none_or(|(len, _)| p.len() > len) {
                    best = Some((p.len(), stage));
                }
            }
        }
        best.map(|(_, s)| s)
    }

    /// What is wrong with `g` by these stages: modules in no stage, and
    /// imports of a stage not allowed (each as a line naming both modules).
    pub fn violations(&self, g: &Graph) -> Vec<String> {
        let mut out = Vec::new();
        for (m, deps) in g {
            if m.is_empty() {
                continue;
            }
            let Some(sm) = self.of(m) else {
                out.push(format!("module {m} is in no stage: add it to the table"));
                continue;
            };
            let allowed = self
                .stages
                .iter()
                .find(|s| s.0 == sm)
                .map_or(&[][..], |s| s.2);
            if deps.contains("*") {
                out.push(format!(
                    "{m} imports all of the crate root (`crate::*`): name the modules \
                     instead, so that their stages can be checked"
                ));
            }
            for d in deps.iter().filter(|d| !d.is_empty() && *d != "*") {
                let Some(sd) = self.of(d) else { continue };
                if sd != sm && !allowed.contains(&sd) {
                    out.push(format!(
                        "{m} (stage {sm}) imports {d} (stage {sd}), which {sm} may not import"
                    ));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn literals_and_comments_are_blanked() {
        let s = strip("a // crate::x\n\"crate::y {\" r#\"crate::z\"# '{' 'a b /* crate::w */ c");
        assert!(!s.contains("crate::"), "{s}");
        assert!(!s.contains('{'), "{s}");
        assert!(s.contains("'a b") && s.ends_with(" c"), "{s}");
        // Byte and C raw strings, a non-ASCII char and a quote char.
        let s = strip(r##"br#"a"b"# cr"\" ('é','"') crate::kept"##);
        assert!(s.contains("crate::kept") && !s.contains('é'), "{s}");
    }

    #[test]
    fn a_crates_own_name_reads_as_crate() {
        let found = paths(
            "use ptdec_core::stack::X; ::ptdec_core::decode::y(); other::z",
            &["ptdec_core"],
        );
        let mods = set(&["", "stack", "decode"]);
        let resolved: BTreeSet<String> = found
            .iter()
            .filter_map(|p| resolve("emit", p, &mods))
            .collect();
        assert_eq!(resolved, set(&["stack", "decode"]));
        // A glob of the crate root is named as such.
        let glob = paths("use crate::*;", &[]);
        assert_eq!(resolve("m", &glob[0], &mods).as_deref(), Some("*"));
        let mut g = Graph::new();
        g.insert("m".into(), set(&["*"]));
        let stages = Stages {
            stages: &[("s", &["m"], &[])],
        };
        assert!(stages.violations(&g)[0].contains("crate::*"));
    }

    #[test]
    fn groups_expand_and_resolve_to_the_longest_module() {
        let mods = set(&["", "a", "a::b", "c", "d"]);
        let found = paths(
            "use crate::{a::b::Thing, c, d::{self, f}}; super::c::x(); self::z",
            &[],
        );
        let resolved: BTreeSet<String> = found
            .iter()
            .filter_map(|p| resolve("a::b", p, &mods))
            .collect();
        // super of a::b is a: a::c is not a module, so a itself.
        assert_eq!(resolved, set(&["a", "a::b", "c", "d"]));
    }

    #[test]
    fn test_modules_are_left_out() {
        let code = "use crate::a;\n#[cfg(test)]\nmod tests { use crate::b; fn f() { {} } }\n\
                    #[cfg(test)]\nmod more;\nuse crate::c;";
        let kept = without_tests(code);
        assert!(kept.contains("crate::a") && kept.contains("crate::c"));
        assert!(!kept.contains("crate::b") && !kept.contains("more"));
    }

    #[test]
    fn circles_are_found() {
        let mut g = Graph::new();
        g.insert("a".into(), set(&["b"]));
        g.insert("b".into(), set(&["c"]));
        g.insert("c".into(), set(&["a"]));
        g.insert("d".into(), set(&["a"]));
        assert_eq!(circles(&g), vec![vec!["a", "b", "c"]]);
        g.get_mut("c").unwrap().clear();
        assert!(circles(&g).is_empty());
    }

    #[test]
    fn stages_allow_only_what_they_list() {
        let stages = Stages {
            stages: &[
                ("base", &["m"], &[]),
                ("work", &["w", "w::low"], &["base"]),
                ("top", &["t"], &["base", "work"]),
            ],
        };
        assert_eq!(stages.of("w::x"), Some("work"));
        let mut g = Graph::new();
        g.insert("t".into(), set(&["w", "m"]));
        g.insert("w::x".into(), set(&["m", "t"]));
        g.insert("m".into(), set(&[]));
        g.insert("new".into(), set(&[]));
        let v = stages.violations(&g);
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v[0].contains("new") && v[1].contains("w::x (stage work) imports t"));
    }
}
