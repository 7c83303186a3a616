//! Symbolization: names the function that holds an address of an image, for
//! the call-stack stage's slices. Reads ELF `.symtab`/`.dynsym` (or a
//! separate debug file's), synthesizes `NAME@plt` entries, reads the kernel's
//! kallsyms, and JIT maps (`/tmp/perf-PID.map`). Names are demangled (C++ and
//! Rust legacy/v0). One [`SymbolCache`] is shared by all threads; each image's
//! sorted table is computed once, on first use.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

use crate::images::{Image, SearchPath};

/// A function: its demangled name and the addresses it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Demangled name.
    pub name: Arc<str>,
    /// Start address: ELF virtual address for images, absolute for JIT maps.
    pub vaddr: u64,
    /// Size in bytes (a symbol of size 0 is extended to the next one).
    pub size: u64,
}

impl Symbol {
    /// Does the symbol cover `addr`?
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.vaddr && addr - self.vaddr < self.size.max(1)
    }
}

/// The sorted functions of one image (or one perf map).
#[derive(Debug, Default)]
pub(crate) struct SymbolTable {
    /// Sorted by `vaddr`, one per address, non-overlapping after sizing.
    syms: Vec<Symbol>,
}

impl SymbolTable {
    pub(crate) fn lookup(&self, vaddr: u64) -> Option<&Symbol> {
        let i = self.syms.partition_point(|s| s.vaddr <= vaddr);
        let s = self.syms[..i].last()?;
        s.contains(vaddr).then_some(s)
    }

    pub(crate) fn is_entry(&self, vaddr: u64) -> bool {
        self.syms.binary_search_by_key(&vaddr, |s| s.vaddr).is_ok()
    }

    pub(crate) fn len(&self) -> usize {
        self.syms.len()
    }
}

/// Names functions in images and JIT maps. `Send + Sync`.
#[derive(Default)]
pub struct SymbolCache {
    /// Per image id, computed once.
    tables: Mutex<HashMap<u64, Arc<OnceLock<SymbolTable>>>>,
    /// Per pid: the JIT map, if one exists.
    perf_maps: Mutex<HashMap<u32, Arc<OnceLock<SymbolTable>>>>,
    /// Folders holding `perf-PID.map` files, searched in order.
    perf_map_dirs: Vec<PathBuf>,
}

impl SymbolCache {
    /// A cache that reads JIT maps from `/tmp`.
    pub fn new() -> SymbolCache {
        SymbolCache {
            perf_map_dirs: vec![PathBuf::from("/tmp")],
            ..SymbolCache::default()
        }
    }

    /// A cache for decoding with `search`: JIT maps from the trace dir's
    /// `images/perf-PID.map` first, then `/tmp/perf-PID.map` when the live
    /// filesystem may be used.
    pub fn for_search(search: &SearchPath) -> SymbolCache {
        let mut dirs = Vec::new();
        if let Some(d) = &search.trace_dir {
            dirs.push(d.join("images"));
        }
        if search.live_fs {
            dirs.push(PathBuf::from("/tmp"));
        }
        SymbolCache {
            perf_map_dirs: dirs,
            ..SymbolCache::default()
        }
    }

    fn table(&self, image: &Arc<Image>) -> Arc<OnceLock<SymbolTable>> {
        let slot = {
            let mut t = self.tables.lock().unwrap_or_else(|e| e.into_inner());
            t.entry(image.id).or_default().clone()
        };
        slot.get_or_init(|| build_table(image));
        slot
    }

    /// The symbol containing `vaddr` (ELF virtual address) in `image`.
    pub fn lookup(&self, image: &Arc<Image>, vaddr: u64) -> Option<Symbol> {
        self.table(image).get()?.lookup(vaddr).cloned()
    }

    /// Is `vaddr` the first address of a function in `image`? (Tail-call detection.)
    pub fn is_function_entry(&self, image: &Arc<Image>, vaddr: u64) -> bool {
        self.table(image).get().is_some_and(|t| t.is_entry(vaddr))
    }

    /// How many functions `image` has (0 when it has no symbols).
    pub fn symbol_count(&self, image: &Arc<Image>) -> usize {
        self.table(image).get().map_or(0, SymbolTable::len)
    }

    /// JIT symbols from `perf-PID.map` for `pid`: lookup by absolute address.
    pub fn lookup_perf_map(&self, pid: u32, addr: u64) -> Option<Symbol> {
        let slot = {
            let mut m = self.perf_maps.lock().unwrap_or_else(|e| e.into_inner());
            m.entry(pid).or_default().clone()
        };
        let table = slot.get_or_init(|| {
            for dir in &self.perf_map_dirs {
                if let Ok(text) = std::fs::read_to_string(dir.join(format!("perf-{pid}.map"))) {
                    return parse_perf_map(&text);
                }
            }
            SymbolTable::default()
        });
        table.lookup(addr).cloned()
    }
}

/// `module+0xOFF` naming when nothing is known (module is the file name's
/// basename).
pub fn fallback_name(recorded_name: &str, file_offset: u64) -> String {
    let base = recorded_name
        .trim_end_matches(" (deleted)")
        .rsplit('/')
        .next()
        .unwrap_or(recorded_name);
    format!("{base}+{file_offset:#x}")
}

/// Demangles a C++ or Rust (legacy or v0) symbol name; other names are
/// returned as they are.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            if let Ok(d) = sym.demangle(&cpp_demangle::DemangleOptions::default()) {
                return d;
            }
        }
    }
    name.to_owned()
}

/// Parses a perf map: `START SIZE name` lines, START and SIZE in hex (with or
/// without `0x`). Lines that do not parse are skipped.
pub(crate) fn parse_perf_map(text: &str) -> SymbolTable {
    let mut raw = Vec::new();
    for line in text.lines() {
        let mut it = line.trim().splitn(3, ' ');
        let (Some(a), Some(s), Some(n)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let hexnum = |t: &str| u64::from_str_radix(t.trim_start_matches("0x"), 16).ok();
        let (Some(a), Some(s)) = (hexnum(a), hexnum(s)) else {
            continue;
        };
        raw.push(RawSym {
            vaddr: a,
            size: s,
            name: n.trim().to_owned(),
            rank: 0,
        });
    }
    finish(raw, u64::MAX)
}

struct RawSym {
    vaddr: u64,
    size: u64,
    name: String,
    /// Lower is preferred among aliases at one address.
    rank: u32,
}

/// Sorts, picks one name per address, sizes zero-sized symbols up to the next
/// one (or `limit`), and demangles.
fn finish(mut raw: Vec<RawSym>, limit: u64) -> SymbolTable {
    raw.sort_by(|a, b| {
        (a.vaddr, a.rank, a.size == 0, a.name.len()).cmp(&(
            b.vaddr,
            b.rank,
            b.size == 0,
            b.name.len(),
        ))
    });
    raw.dedup_by_key(|s| s.vaddr);
    let mut syms = Vec::with_capacity(raw.len());
    for i in 0..raw.len() {
        let next = raw.get(i + 1).map_or(limit, |n| n.vaddr);
        let r = &raw[i];
        let size = if r.size == 0 {
            next.saturating_sub(r.vaddr)
        } else {
            r.size
        };
        syms.push(Symbol {
            name: demangle(&r.name).into(),
            vaddr: r.vaddr,
            size,
        });
    }
    SymbolTable { syms }
}

fn build_table(image: &Image) -> SymbolTable {
    if !image.is_elf {
        return SymbolTable::default();
    }
    let Ok(obj) = object::File::parse(image.bytes()) else {
        return SymbolTable::default();
    };
    let mut raw = Vec::new();
    for (table, base_rank) in [(obj.symbols(), 0), (obj.dynamic_symbols(), 8)] {
        for s in table {
            if s.kind() != SymbolKind::Text || !s.is_definition() {
                continue;
            }
            let Ok(name) = s.name() else { continue };
            if name.is_empty() {
                continue;
            }
            let rank = base_rank
                + if s.is_global() {
                    0
                } else if s.is_weak() {
                    1
                } else {
                    2
                };
            raw.push(RawSym {
                vaddr: s.address(),
                size: s.size(),
                name: name.to_owned(),
                rank,
            });
        }
    }
    let limit = obj
        .sections()
        .filter(|s| s.kind() == object::SectionKind::Text)
        .map(|s| s.address() + s.size())
        .max()
        .unwrap_or(u64::MAX);
    finish(raw, limit)
}
