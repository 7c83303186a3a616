//! Symbolization: names the function that holds an address of an image, for
//! the call-stack stage's slices. Reads ELF `.symtab`/`.dynsym` (or a
//! separate debug file's), synthesizes `NAME@plt` entries, reads the kernel's
//! kallsyms, and JIT maps (`/tmp/perf-PID.map`). Names are demangled (C++ and
//! Rust legacy/v0). One [`SymbolCache`] is shared by all threads; each image's
//! sorted table is computed once, on first use.
//!
//! JIT maps are read from `TRACE/images/perf-PID.map` (where ptrec copies
//! `/tmp/perf-PID.map` at the end of a recording), then from `/tmp` itself
//! when the live filesystem may be used ([`SymbolCache::for_search`]).

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use object::{
    Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationTarget, SectionKind,
    SymbolKind,
};

use crate::images::{hex, Image, SearchPath};

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

/// One function of a table; its name is demangled on first use (a large C++
/// library has hundreds of thousands of symbols, a trace touches a few).
#[derive(Debug)]
struct Entry {
    vaddr: u64,
    size: u64,
    raw: Box<str>,
    name: OnceLock<Arc<str>>,
}

impl Entry {
    fn symbol(&self) -> Symbol {
        let name = self
            .name
            .get_or_init(|| match self.raw.strip_suffix("@plt") {
                // `_Znwm@plt` is `operator new(unsigned long)@plt`, as perf
                // and objdump -C name it.
                Some(callee) => format!("{}@plt", demangle(callee)).into(),
                None => demangle(&self.raw).into(),
            })
            .clone();
        Symbol {
            name,
            vaddr: self.vaddr,
            size: self.size,
        }
    }

    fn contains(&self, addr: u64) -> bool {
        addr >= self.vaddr && addr - self.vaddr < self.size.max(1)
    }
}

/// The sorted functions of one image (or one perf map), and where they came
/// from.
#[derive(Debug, Default)]
pub(crate) struct SymbolTable {
    /// Sorted by `vaddr`, one per address.
    entries: Vec<Entry>,
    /// The separate debug file whose `.symtab` was used, if any.
    debug_file: Option<PathBuf>,
}

impl SymbolTable {
    pub(crate) fn lookup(&self, vaddr: u64) -> Option<Symbol> {
        let i = self.entries.partition_point(|s| s.vaddr <= vaddr);
        // A symbol may sit inside a sized one (a local label with a type):
        // look back a little for the innermost one that holds the address.
        self.entries[..i]
            .iter()
            .rev()
            .take(4)
            .find(|e| e.contains(vaddr))
            .map(Entry::symbol)
    }

    /// The addresses `[lo, hi)` around `vaddr` (`lo <= vaddr < hi`) where
    /// [`SymbolTable::lookup`] gives the same answer: between the nearest
    /// starts and ends, of the entries it looks at, on either side. No
    /// entry starts inside `(lo, hi)`.
    pub(crate) fn span(&self, vaddr: u64) -> (u64, u64) {
        let i = self.entries.partition_point(|s| s.vaddr <= vaddr);
        let mut lo = i.checked_sub(1).map_or(0, |j| self.entries[j].vaddr);
        let mut hi = self.entries.get(i).map_or(u64::MAX, |e| e.vaddr);
        // The entries `lookup` looks back at: each holds all of the span
        // or none of it.
        for e in self.entries[..i].iter().rev().take(4) {
            match e.vaddr.checked_add(e.size.max(1)) {
                Some(end) if end <= vaddr => lo = lo.max(end),
                Some(end) => hi = hi.min(end),
                None => {}
            }
        }
        (lo, hi)
    }

    pub(crate) fn is_entry(&self, vaddr: u64) -> bool {
        self.entries
            .binary_search_by_key(&vaddr, |s| s.vaddr)
            .is_ok()
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
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
        self.table(image).get()?.lookup(vaddr)
    }

    /// The symbol containing `vaddr` in `image`, and the ELF virtual
    /// addresses `[lo, hi)` around `vaddr` where [`SymbolCache::lookup`]
    /// gives it too, with no function starting inside `(lo, hi)`.
    pub fn lookup_span(&self, image: &Arc<Image>, vaddr: u64) -> Option<(Symbol, u64, u64)> {
        let table = self.table(image);
        let t = table.get()?;
        let sym = t.lookup(vaddr)?;
        let (lo, hi) = t.span(vaddr);
        Some((sym, lo, hi))
    }

    /// Is `vaddr` the first address of a function in `image`? (Tail-call detection.)
    pub fn is_function_entry(&self, image: &Arc<Image>, vaddr: u64) -> bool {
        self.table(image).get().is_some_and(|t| t.is_entry(vaddr))
    }

    /// How many functions `image` has (0 when it has no symbols).
    pub fn symbol_count(&self, image: &Arc<Image>) -> usize {
        self.table(image).get().map_or(0, SymbolTable::len)
    }

    /// The separate debug file whose symbols were used for `image`, if any.
    pub fn debug_file(&self, image: &Arc<Image>) -> Option<PathBuf> {
        self.table(image).get()?.debug_file.clone()
    }

    /// JIT symbols from `perf-PID.map` for `pid`: lookup by absolute address.
    pub fn lookup_perf_map(&self, pid: u32, addr: u64) -> Option<Symbol> {
        let slot = {
            let mut m = self.perf_maps.lock().unwrap_or_else(|e| e.into_inner());
            m.entry(pid).or_default().clone()
        };
        let table = slot.get_or_init(|| {
            for dir in &self.perf_map_dirs {
                if let Ok(text) =
                    crate::inputs::read_to_string(&dir.join(format!("perf-{pid}.map")))
                {
                    return parse_perf_map(&text);
                }
            }
            SymbolTable::default()
        });
        table.lookup(addr)
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
    SymbolTable {
        entries: finish(raw, u64::MAX),
        debug_file: None,
    }
}

struct RawSym {
    vaddr: u64,
    size: u64,
    name: String,
    /// Lower is preferred among aliases at one address.
    rank: u32,
}

/// Sorts, picks one name per address (perf's preferences: sized over
/// unsized, `.symtab` over `.dynsym`, global over weak over local, fewer
/// leading underscores), and sizes zero-sized symbols up to the next one (or
/// `limit`).
fn finish(mut raw: Vec<RawSym>, limit: u64) -> Vec<Entry> {
    let underscores = |n: &str| n.len() - n.trim_start_matches('_').len();
    raw.sort_by(|a, b| {
        (a.vaddr, a.size == 0, a.rank, underscores(&a.name)).cmp(&(
            b.vaddr,
            b.size == 0,
            b.rank,
            underscores(&b.name),
        ))
    });
    raw.dedup_by_key(|s| s.vaddr);
    let mut entries = Vec::with_capacity(raw.len());
    for i in 0..raw.len() {
        let next = raw.get(i + 1).map_or(limit, |n| n.vaddr);
        let r = &mut raw[i];
        let size = if r.size == 0 {
            next.saturating_sub(r.vaddr)
        } else {
            r.size
        };
        entries.push(Entry {
            vaddr: r.vaddr,
            size,
            raw: std::mem::take(&mut r.name).into_boxed_str(),
            name: OnceLock::new(),
        });
    }
    entries
}

fn build_table(image: &Image) -> SymbolTable {
    if let Some(kallsyms) = &image.kallsyms {
        return kallsyms_table(image, kallsyms);
    }
    if !image.is_elf {
        return SymbolTable::default();
    }
    let Ok(obj) = object::File::parse(image.bytes()) else {
        return SymbolTable::default();
    };
    let mut raw = Vec::new();
    let mut debug_file = None;
    if has_functions(&obj) {
        elf_functions(obj.symbols(), 0, &mut raw);
    } else if let Some(debug) = find_debug_file(image, &obj) {
        if let Ok(dobj) = object::File::parse(debug.bytes()) {
            elf_functions(dobj.symbols(), 0, &mut raw);
            debug_file = Some(debug.path.clone());
        }
    } else {
        mini_debug_info(&obj, &mut raw);
    }
    elf_functions(obj.dynamic_symbols(), 8, &mut raw);
    plt_functions(&obj, &mut raw);
    irelative_plt_functions(&obj, &mut raw);
    // The program's entry point (ld.so's, or a static program's): perf
    // names it `_start` too when nothing else does.
    let entry = obj.entry();
    if entry != 0 {
        raw.push(RawSym {
            vaddr: entry,
            size: 0,
            name: "_start".to_owned(),
            rank: 12,
        });
    }
    let text: Vec<(u64, u64)> = obj
        .sections()
        .filter(|s| s.kind() == SectionKind::Text)
        .map(|s| (s.address(), s.address().saturating_add(s.size())))
        .collect();
    let limit = text.iter().map(|t| t.1).max().unwrap_or(u64::MAX);
    // Functions no symbol names (every static function of a stripped
    // binary): their `.eh_frame` FDEs give their extents.
    let unwind = eh_frame_functions(image, &obj, &mut raw);
    raw.extend(unwind);
    let mut entries = finish(raw, limit);
    // An unsized symbol reaches the next one, but not past its own section:
    // `_init` (unsized, in `.init`) must not swallow the `.plt` after it.
    for e in &mut entries {
        if let Some(&(_, end)) = text.iter().find(|t| t.0 <= e.vaddr && e.vaddr < t.1) {
            e.size = e.size.min(end - e.vaddr);
        }
    }
    SymbolTable {
        entries,
        debug_file,
    }
}

/// Most bytes a MiniDebugInfo section may decompress to: Fedora's are a few
/// hundred KiB (function symbols only); a hostile one stops here.
const MINI_DEBUG_INFO_MAX: usize = 64 << 20;

/// The function symbols of the MiniDebugInfo (`.gnu_debugdata`: an
/// xz-compressed ELF holding the `.symtab` entries that `.dynsym` lacks, as
/// Fedora and others ship stripped binaries). Unreadable or oversized data
/// adds nothing.
fn mini_debug_info(obj: &object::File<'_>, raw: &mut Vec<RawSym>) {
    let Some(data) = obj
        .section_by_name(".gnu_debugdata")
        .and_then(|s| s.data().ok())
    else {
        return;
    };
    /// A `Write` that refuses to grow past [`MINI_DEBUG_INFO_MAX`].
    struct Capped(Vec<u8>);
    impl std::io::Write for Capped {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.0.len() + buf.len() > MINI_DEBUG_INFO_MAX {
                return Err(std::io::Error::other("MiniDebugInfo too large"));
            }
            self.0.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut out = Capped(Vec::new());
    if lzma_rs::xz_decompress(&mut std::io::BufReader::new(data), &mut out).is_err() {
        return;
    }
    if let Ok(mini) = object::File::parse(&out.0[..]) {
        elf_functions(mini.symbols(), 0, raw);
    }
}

/// One function per `.eh_frame` FDE whose start no symbol covers, named
/// `module+0xOFFSET` (the file offset of its start) as code without any
/// symbol is: the compiler writes an FDE for every function (and each
/// `.cold` part), and distributions strip symbols but keep `.eh_frame`, so
/// a stripped program's functions keep their extents and the call stacks
/// can tell which function a longjmp, an exception or a panic lands in.
/// Read with `gimli`; a malformed section ends the list where it breaks.
fn eh_frame_functions(image: &Image, obj: &object::File<'_>, known: &mut [RawSym]) -> Vec<RawSym> {
    use gimli::UnwindSection;
    let mut out = Vec::new();
    let Some(sec) = obj.section_by_name(".eh_frame") else {
        return out;
    };
    let Ok(data) = sec.data() else { return out };
    let eh = gimli::EhFrame::new(data, gimli::LittleEndian);
    let mut bases = gimli::BaseAddresses::default().set_eh_frame(sec.address());
    if let Some(text) = obj.section_by_name(".text") {
        bases = bases.set_text(text.address());
    }
    if let Some(got) = obj.section_by_name(".got") {
        bases = bases.set_got(got.address());
    }
    // Where a symbol starts, or a sized one reaches (unsized ones reach
    // the next start, FDEs' included). An unsized symbol where an FDE
    // starts (`_start` at the entry point) gets the FDE's size: reaching
    // the next symbol, it would swallow code without FDEs after it
    // (crtstuff's `frame_dummy`, ...).
    let mut starts: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, s) in known.iter().enumerate() {
        starts.entry(s.vaddr).or_default().push(i);
    }
    let mut sized: Vec<(u64, u64)> = known
        .iter()
        .filter(|s| s.size > 0)
        .map(|s| (s.vaddr, s.vaddr.saturating_add(s.size)))
        .collect();
    sized.sort_unstable();
    // Merged into disjoint runs, so one binary search answers.
    let mut runs: Vec<(u64, u64)> = Vec::with_capacity(sized.len());
    for (a, b) in sized {
        match runs.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => runs.push((a, b)),
        }
    }
    let covered = |a: u64| {
        let i = runs.partition_point(|r| r.0 <= a);
        i > 0 && a < runs[i - 1].1
    };
    let mut entries = eh.entries(&bases);
    while let Ok(Some(e)) = entries.next() {
        let gimli::CieOrFde::Fde(partial) = e else {
            continue;
        };
        let Ok(fde) = partial.parse(gimli::EhFrame::cie_from_offset) else {
            continue;
        };
        let (start, len) = (fde.initial_address(), fde.len());
        if len == 0 || covered(start) {
            continue;
        }
        if let Some(named) = starts.get(&start) {
            for &i in named {
                if known[i].size == 0 {
                    known[i].size = len;
                }
            }
            continue;
        }
        let Some(offset) = image.vaddr_to_offset(start) else {
            continue;
        };
        out.push(RawSym {
            vaddr: start,
            size: len,
            name: fallback_name(&image.recorded_name, offset),
            rank: 16,
        });
    }
    out
}

/// `*ABS*+0xRESOLVER@plt` for each `.plt` entry whose GOT slot carries an
/// IRELATIVE relocation (resolver address in the addend), as objdump names
/// them: static glibc calls its IFUNCs (strlen, memcpy, ...) through such a
/// `.plt` (read from the section relocations: there is no dynamic symbol
/// table), and libc.so calls its own IFUNCs so (the dynamic relocations),
/// where [`plt_functions`] finds no symbol to name them by.
fn irelative_plt_functions(obj: &object::File<'_>, raw: &mut Vec<RawSym>) {
    use object::elf::R_X86_64_IRELATIVE;
    use object::RelocationFlags;
    if obj.architecture() != object::Architecture::X86_64 {
        return;
    }
    let mut got: HashMap<u64, i64> = HashMap::new();
    let mut note = |slot: u64, r: &object::Relocation| {
        if let RelocationFlags::Elf { r_type } = r.flags() {
            if r_type == R_X86_64_IRELATIVE {
                got.insert(slot, r.addend());
            }
        }
    };
    match obj.dynamic_relocations() {
        // A shared object (libc calls its own IFUNCs through such entries).
        Some(relocs) if obj.dynamic_symbol_table().is_some() => {
            for (slot, r) in relocs {
                note(slot, &r);
            }
        }
        _ => {
            for sec in obj.sections() {
                for (slot, r) in sec.relocations() {
                    note(slot, &r);
                }
            }
        }
    }
    if got.is_empty() {
        return;
    }
    for sec in obj.sections() {
        if !matches!(sec.name(), Ok(".plt" | ".iplt")) {
            continue;
        }
        let Ok(data) = sec.data() else { continue };
        // 8-byte entries (`jmp *slot(%rip); xchg %ax,%ax`) in GNU ld's
        // static .plt, 16 with IBT: look at every 8 bytes.
        for pos in (0..data.len().saturating_sub(5)).step_by(8) {
            let addr = sec.address() + pos as u64;
            if let Some(addend) = got_jump(&data[pos..], addr).and_then(|slot| got.get(&slot)) {
                raw.push(RawSym {
                    vaddr: addr,
                    size: 8,
                    name: format!("*ABS*+{addend:#x}@plt"),
                    rank: 4,
                });
            }
        }
    }
}

/// Does the file's own `.symtab` name any function?
fn has_functions(obj: &object::File<'_>) -> bool {
    obj.symbols()
        .any(|s| s.kind() == SymbolKind::Text && s.is_definition())
}

/// The defined functions (STT_FUNC and STT_GNU_IFUNC, which `object` both
/// calls Text) of a symbol table.
fn elf_functions<'d>(
    syms: impl Iterator<Item = impl ObjectSymbol<'d>>,
    base_rank: u32,
    raw: &mut Vec<RawSym>,
) {
    for s in syms {
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

/// `NAME@plt` for each x86-64 PLT entry, named as `objdump -d` names them.
///
/// Each entry jumps through a GOT slot: `jmp *disp32(%rip)` (`ff 25`), after
/// an `endbr64` (`f3 0f 1e fa`) in IBT PLTs and/or a `bnd` prefix (`f2`). The
/// slot's dynamic relocation (JUMP_SLOT in `.rela.plt`, GLOB_DAT in
/// `.rela.dyn` for `.plt.got`) names the function. Lazy `.plt` (16-byte
/// entries after a 16-byte header whose jump has no relocation), IBT
/// `.plt.sec` (16 bytes) and `.plt.got` (8 bytes, 16 with IBT) are all read
/// this way, so the layouts need no table of their own; IBT's `.plt` entries
/// (`endbr64; push; jmp .plt`) have no GOT jump and stay unnamed, as in objdump.
fn plt_functions(obj: &object::File<'_>, raw: &mut Vec<RawSym>) {
    if obj.architecture() != object::Architecture::X86_64 {
        return;
    }
    let (Some(relocs), Some(dynsyms)) = (obj.dynamic_relocations(), obj.dynamic_symbol_table())
    else {
        return;
    };
    let mut got: HashMap<u64, String> = HashMap::new();
    for (slot, r) in relocs {
        if let RelocationTarget::Symbol(i) = r.target() {
            if let Some(name) = dynsyms.symbol_by_index(i).ok().and_then(|s| s.name().ok()) {
                if !name.is_empty() {
                    got.insert(slot, name.to_owned());
                }
            }
        }
    }
    if got.is_empty() {
        return;
    }
    for sec in obj.sections() {
        let Ok(sname) = sec.name() else { continue };
        if !matches!(sname, ".plt" | ".plt.sec" | ".plt.got") {
            continue;
        }
        let Ok(data) = sec.data() else { continue };
        let ibt = data.starts_with(&ENDBR64);
        let entsize = if sname == ".plt.got" && !ibt { 8 } else { 16 };
        for (k, entry) in data.chunks_exact(entsize).enumerate() {
            let addr = sec.address() + (k * entsize) as u64;
            let Some(slot) = got_jump(entry, addr) else {
                continue;
            };
            if let Some(name) = got.get(&slot) {
                raw.push(RawSym {
                    vaddr: addr,
                    size: entsize as u64,
                    name: format!("{name}@plt"),
                    rank: 4,
                });
            }
        }
    }
}

const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];

/// The GOT slot a PLT entry at `addr` jumps through, if it starts with
/// `[endbr64] [bnd] jmp *disp32(%rip)`.
fn got_jump(entry: &[u8], addr: u64) -> Option<u64> {
    let mut p = 0;
    if entry.starts_with(&ENDBR64) {
        p = 4;
    }
    if entry.get(p) == Some(&0xf2) {
        p += 1;
    }
    if entry.get(p..p + 2) != Some(&[0xff, 0x25]) {
        return None;
    }
    let disp = i32::from_le_bytes(entry.get(p + 2..p + 6)?.try_into().ok()?);
    Some(
        addr.wrapping_add(p as u64 + 6)
            .wrapping_add(disp as i64 as u64),
    )
}

/// The separate debug file of `image`, as gdb finds it: by build-id
/// (`/usr/lib/debug/.build-id/xx/rest.debug`, and perf's cache
/// `.build-id/xx/rest/debug`), then by `.gnu_debuglink` (next to the file,
/// in its `.debug/`, and in `/usr/lib/debug/<dir>/`), each under the
/// trace's sysroot, every `--sysroot` and, when allowed, `/`. A candidate is
/// used only when its build-id matches the image's, or (without build-ids)
/// when its CRC32 matches the debuglink's.
fn find_debug_file(image: &Image, obj: &object::File<'_>) -> Option<Image> {
    let search = &image.search;
    let mut roots: Vec<PathBuf> = search.roots().collect();
    if search.live_fs {
        roots.push(PathBuf::from("/"));
    }
    let build_id = image.build_id.as_deref().filter(|b| b.len() >= 2);
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(id) = build_id {
        let h = hex(id);
        let (a, b) = h.split_at(2);
        for root in &roots {
            candidates.push(
                root.join("usr/lib/debug/.build-id")
                    .join(a)
                    .join(format!("{b}.debug")),
            );
        }
        if let Some(cache) = &search.buildid_dir {
            candidates.push(cache.join(".build-id").join(a).join(b).join("debug"));
        }
    }
    let link = obj.gnu_debuglink().ok().flatten();
    if let Some((name, _)) = link {
        let name = Path::new(std::ffi::OsStr::from_bytes(name));
        let mut dirs: Vec<PathBuf> = image
            .path
            .parent()
            .map(Path::to_owned)
            .into_iter()
            .collect();
        let recorded_dir = Path::new(&image.recorded_name).parent();
        if let Some(rd) = recorded_dir.filter(|d| d.is_absolute()) {
            let rel = rd.strip_prefix("/").unwrap_or(rd);
            for root in &roots {
                dirs.push(root.join(rel));
            }
        }
        for d in &dirs {
            candidates.push(d.join(name));
            candidates.push(d.join(".debug").join(name));
        }
        if let Some(rd) = recorded_dir.filter(|d| d.is_absolute()) {
            let rel = rd.strip_prefix("/").unwrap_or(rd);
            for root in &roots {
                candidates.push(root.join("usr/lib/debug").join(rel).join(name));
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    for c in candidates {
        if !seen.insert(c.clone()) || !c.is_file() || c == image.path {
            continue;
        }
        let Ok(debug) = Image::load(&image.recorded_name, &c, search.clone()) else {
            continue;
        };
        let ok = match (build_id, debug.build_id.as_deref()) {
            (Some(a), Some(b)) => a == b,
            _ => link.is_some_and(|(_, crc)| crc32(debug.bytes()) == crc),
        };
        if ok {
            return Some(debug);
        }
    }
    None
}

/// CRC-32 (IEEE, as `.gnu_debuglink` stores it).
fn crc32(data: &[u8]) -> u32 {
    static TABLE: OnceLock<[u32; 256]> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *e = c;
        }
        t
    });
    let mut crc = !0u32;
    for &b in data {
        crc = table[((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

/// The kernel's functions from a kallsyms file (`ADDR TYPE NAME [MODULE]`,
/// text types `T t W w`), sized to the next symbol and capped at the end of
/// the kcore segment that holds them. All-zero addresses (kptr_restrict)
/// give an empty table.
fn kallsyms_table(image: &Image, path: &Path) -> SymbolTable {
    let Ok(text) = crate::inputs::read_to_string(path) else {
        return SymbolTable::default();
    };
    let mut raw = Vec::new();
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let (Some(a), Some(t), Some(n)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if !matches!(t, "T" | "t" | "W" | "w") {
            continue;
        }
        let Ok(vaddr) = u64::from_str_radix(a, 16) else {
            continue;
        };
        if vaddr == 0 {
            continue;
        }
        let rank = if t == "T" || t == "W" { 0 } else { 2 };
        raw.push(RawSym {
            vaddr,
            size: 0,
            name: n.to_owned(),
            rank,
        });
    }
    let mut entries = finish(raw, u64::MAX);
    // The last symbol of each segment would otherwise reach the next one.
    for e in &mut entries {
        if let Some(seg) = image
            .segments
            .iter()
            .find(|s| e.vaddr >= s.vaddr && e.vaddr - s.vaddr < s.memsz)
        {
            e.size = e.size.min(seg.memsz - (e.vaddr - seg.vaddr));
        }
    }
    SymbolTable {
        entries,
        debug_file: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_cpp_and_rust() {
        assert_eq!(
            demangle("_ZN6shapes6Circle4areaEi"),
            "shapes::Circle::area(int)"
        );
        assert_eq!(demangle("_Z5twiceIlET_S0_"), "long twice<long>(long)");
        // Rust legacy (the hash is dropped) and v0.
        assert_eq!(
            demangle("_ZN5hello5inner4work17h0123456789abcdefE"),
            "hello::inner::work"
        );
        assert_eq!(demangle("_RNvCs6GmmlP4bgsG_1r5inner"), "r::inner");
        // C names, PLT names and garbage stay as they are.
        for n in ["malloc", "puts@plt", "_Z", "_R", "_ZZZ"] {
            assert_eq!(demangle(n), n);
        }
    }

    /// A C++ PLT stub is named as perf and `objdump -C` name it: the
    /// callee demangled, `@plt` kept.
    #[test]
    fn plt_names_demangle_the_callee() {
        let entry = |raw: &str| Entry {
            vaddr: 0x1000,
            size: 16,
            raw: raw.into(),
            name: OnceLock::new(),
        };
        assert_eq!(
            &*entry("_Znwm@plt").symbol().name,
            "operator new(unsigned long)@plt"
        );
        assert_eq!(&*entry("puts@plt").symbol().name, "puts@plt");
        assert_eq!(
            &*entry("*ABS*+0x9f1c0@plt").symbol().name,
            "*ABS*+0x9f1c0@plt"
        );
        assert_eq!(
            &*entry("_Z5twiceIlET_S0_").symbol().name,
            "long twice<long>(long)"
        );
    }

    #[test]
    fn crc32_is_the_debuglink_crc() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn plt_entry_forms() {
        // Lazy .plt entry: jmp *0x2fe2(%rip) at 0x1030 -> 0x1030 + 6 + 0x2fe2.
        let lazy = [
            0xff, 0x25, 0xe2, 0x2f, 0, 0, 0x68, 0, 0, 0, 0, 0xe9, 0, 0, 0, 0,
        ];
        assert_eq!(got_jump(&lazy, 0x1030), Some(0x4018));
        // IBT .plt.sec: endbr64; bnd jmp *disp(%rip).
        let ibt = [
            0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0x10, 0, 0, 0, 0x0f, 0x1f, 0x44, 0, 0,
        ];
        assert_eq!(got_jump(&ibt, 0x2000), Some(0x2000 + 11 + 0x10));
        // Negative displacement.
        let back = [0xff, 0x25, 0xf0, 0xff, 0xff, 0xff, 0x66, 0x90];
        assert_eq!(got_jump(&back, 0x1000), Some(0x1000 + 6 - 0x10));
        // IBT lazy .plt: endbr64; push; bnd jmp rel32: no GOT jump.
        let push = [
            0xf3, 0x0f, 0x1e, 0xfa, 0x68, 0, 0, 0, 0, 0xf2, 0xe9, 0, 0, 0, 0, 0x90,
        ];
        assert_eq!(got_jump(&push, 0x1000), None);
        assert_eq!(got_jump(&[0xff, 0x25, 1], 0), None);
    }

    #[test]
    fn perf_map_lines() {
        let t = parse_perf_map(
            "1000 10 first\n0x2000 0x0 sized by the next\n3000 8 _ZN3jit4stubEv\n\nzz 10 bad\n4000\n",
        );
        assert_eq!(t.len(), 3);
        let s = t.lookup(0x100f).unwrap();
        assert_eq!((&*s.name, s.vaddr, s.size), ("first", 0x1000, 0x10));
        assert!(t.lookup(0x1010).is_none());
        assert_eq!(t.lookup(0x2fff).unwrap().size, 0x1000);
        assert_eq!(&*t.lookup(0x3000).unwrap().name, "jit::stub()");
    }

    #[test]
    fn aliases_pick_one_name_and_unsized_symbols_reach_the_next() {
        let raw = |vaddr, size, name: &str, rank| RawSym {
            vaddr,
            size,
            name: name.into(),
            rank,
        };
        let entries = finish(
            vec![
                raw(0x100, 0, "__unsized_alias", 0),
                raw(0x100, 0x20, "__local_name", 2),
                raw(0x100, 0x20, "global_name", 0),
                raw(0x100, 0x20, "_global_name", 0),
                raw(0x200, 0, "tail", 1),
            ],
            0x280,
        );
        let t = SymbolTable {
            entries,
            debug_file: None,
        };
        assert_eq!(t.len(), 2);
        let s = t.lookup(0x11f).unwrap();
        assert_eq!((&*s.name, s.size), ("global_name", 0x20));
        assert!(t.lookup(0x120).is_none());
        assert_eq!(t.lookup(0x27f).unwrap().size, 0x80);
        assert!(t.lookup(0x280).is_none());
        assert!(t.is_entry(0x200) && !t.is_entry(0x201));
    }

    /// Over random tables of nested, overlapping and unsized symbols:
    /// every address of `span(v)` looks up as `v` does, and none but `lo`
    /// can be an entry.
    #[test]
    fn a_span_looks_up_alike_throughout() {
        let mut rng = fastrand::Rng::with_seed(47);
        for _ in 0..300 {
            let n = rng.usize(1..12);
            let mut raw: Vec<(u64, u64)> = (0..n)
                .map(|_| (rng.u64(0..200), [0, 1, 3, 10, 40][rng.usize(..5)]))
                .collect();
            raw.sort_unstable();
            raw.dedup_by_key(|e| e.0);
            let t = SymbolTable {
                entries: raw
                    .iter()
                    .map(|&(vaddr, size)| Entry {
                        vaddr,
                        size,
                        raw: format!("f{vaddr}").into(),
                        name: OnceLock::new(),
                    })
                    .collect(),
                debug_file: None,
            };
            for v in 0..260 {
                let (lo, hi) = t.span(v);
                assert!(lo <= v && v < hi, "{raw:?} {v}: {lo}..{hi}");
                let want = t.lookup(v).map(|s| s.vaddr);
                for a in lo..hi.min(300) {
                    assert_eq!(t.lookup(a).map(|s| s.vaddr), want, "{raw:?} {v} at {a}");
                    assert!(a == lo || !t.is_entry(a), "{raw:?} {v} at {a}");
                }
            }
        }
    }
}
