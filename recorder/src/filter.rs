//! `ptrec --filter`: perf's address-filter syntax resolved to what the kernel
//! takes (file offsets in absolute paths, kernel addresses), checked against
//! the CPU's `caps/num_address_ranges` before anything is opened. The
//! grammar and the resolution rules are in [`sideband::addr_filter`], shared
//! with `ptsim --filter` and ptdec; this module supplies the symbol tables:
//! ELF function symbols (read with `object`, addresses turned into file
//! offsets through the program headers, as the kernel wants) and
//! `/proc/kallsyms` for kernel filters.

use std::path::Path;

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
use sideband::addr_filter::{self, FilterError, FuncSym, Resolved, Spec};

use crate::errors::Error;
use crate::pmu::Pmu;

/// Resolves the user's `--filter` text for `pmu`: the filters and the
/// kernel string (`filter 0x../0x..@/path,...`) to set on every intel_pt
/// event and to record in AUXTRACE_INFO.
pub fn resolve(text: &str, pmu: &Pmu) -> Result<(Vec<Resolved>, String), Error> {
    let specs = addr_filter::parse(text)?;
    let max = pmu.cap("num_address_ranges").unwrap_or(0) as usize;
    if max == 0 {
        return Err(Error::Usage(
            "this CPU's Intel PT has no address filters (caps/num_address_ranges is 0 or missing); \
             record without --filter"
                .into(),
        ));
    }
    addr_filter::check_count(specs.len(), max)?;
    let mut kallsyms: Option<Vec<FuncSym>> = None;
    let mut out = Vec::new();
    for spec in &specs {
        out.push(resolve_one(spec, &mut kallsyms, || {
            std::fs::read_to_string("/proc/kallsyms")
        })?);
    }
    let s = addr_filter::kernel_string(&out);
    Ok((out, s))
}

fn resolve_one(
    spec: &Spec,
    kallsyms: &mut Option<Vec<FuncSym>>,
    read_kallsyms: impl FnOnce() -> std::io::Result<String>,
) -> Result<Resolved, Error> {
    let needs_syms = !matches!(
        (&spec.start, &spec.size),
        (
            addr_filter::Loc::Num(_),
            None | Some(addr_filter::Loc::Num(_))
        )
    );
    match &spec.file {
        Some(file) => {
            let path = std::fs::canonicalize(file).map_err(|source| Error::Capture {
                what: format!("--filter file {file:?} (give a path to the binary or library)"),
                source,
            })?;
            let name = path.to_string_lossy().into_owned();
            // Either way the file is checked before anything is read.
            let syms = if needs_syms {
                elf_functions(&path)?
            } else {
                check_file(&path)?;
                Vec::new()
            };
            Ok(addr_filter::resolve(spec, &syms, Some(&name))?)
        }
        None => {
            if needs_syms && kallsyms.is_none() {
                let text = read_kallsyms().map_err(|source| Error::Capture {
                    what: "/proc/kallsyms for a kernel --filter (a filter without @FILE means \
                           the kernel)"
                        .into(),
                    source,
                })?;
                let syms = kallsyms_functions(&text);
                if syms.iter().all(|s| s.start == 0) {
                    return Err(Error::Usage(
                        "a kernel --filter needs kernel addresses, but /proc/kallsyms shows them \
                         as 0 (kptr_restrict): run as root, or add @FILE for a user-space filter"
                            .into(),
                    ));
                }
                *kallsyms = Some(syms);
            }
            let syms = kallsyms.as_deref().unwrap_or(&[]);
            Ok(addr_filter::resolve(spec, syms, None)?)
        }
    }
}

/// `--filter`'s `@FILE` checked before it is read: a regular file (a FIFO
/// is opened without waiting for a writer, then refused; a device such as
/// /dev/zero would be read without end), starting with ELF's magic (so a
/// large file of something else is not read whole first).
pub fn check_file(path: &Path) -> Result<std::fs::File, Error> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let io = &capture(path);
    let usage = |why: &str| {
        Error::Usage(format!(
            "--filter file {}: {why}; give the program or library the filter is in",
            path.display()
        ))
    };
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    if !f.metadata().map_err(io)?.is_file() {
        return Err(usage("not a regular file (a FIFO, device or folder)"));
    }
    let mut magic = [0u8; 4];
    if f.read_exact(&mut magic).is_err() || magic != *b"\x7fELF" {
        return Err(usage("not an ELF file"));
    }
    Ok(f)
}

/// The bytes of an ELF file [`check_file`] accepts.
fn read_elf(path: &Path) -> Result<Vec<u8>, Error> {
    use std::io::{Read, Seek};
    let mut f = check_file(path)?;
    let mut data = Vec::new();
    f.seek(std::io::SeekFrom::Start(0))
        .and_then(|_| f.read_to_end(&mut data))
        .map_err(capture(path))?;
    Ok(data)
}

/// A failure to open or read `--filter`'s file `path`.
fn capture(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Capture {
        what: format!("--filter file {}", path.display()),
        source,
    }
}

/// The function symbols of an ELF file, sorted by start, with starts and
/// sizes as file offsets (what the kernel's file filters take).
pub fn elf_functions(path: &Path) -> Result<Vec<FuncSym>, Error> {
    let err = |why: String| Error::Capture {
        what: format!("--filter symbols of {}", path.display()),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, why),
    };
    let data = read_elf(path)?;
    let file = object::File::parse(&*data).map_err(|e| err(format!("not an ELF file: {e}")))?;
    let segs: Vec<(u64, u64, u64)> = file
        .segments()
        .filter_map(|s| {
            let (off, len) = s.file_range();
            (len > 0).then(|| (s.address(), len, off))
        })
        .collect();
    let to_offset = |addr: u64| {
        segs.iter()
            .find(|&&(va, len, _)| addr >= va && addr < va + len)
            .map(|&(va, _, off)| addr - va + off)
    };
    let mut out: Vec<FuncSym> = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && s.is_definition())
        .filter_map(|s| {
            let name = s.name().ok()?.to_string();
            Some(FuncSym {
                start: to_offset(s.address())?,
                size: s.size(),
                global: s.is_global(),
                name,
            })
        })
        .collect();
    if out.is_empty() {
        return Err(err(
            "no function symbols (stripped?): give the range as 0xOFFSET/0xSIZE@FILE".into(),
        ));
    }
    out.sort_by(|a, b| (a.start, &a.name).cmp(&(b.start, &b.name)));
    // The same symbol from .symtab and .dynsym once.
    out.dedup();
    Ok(out)
}

/// Function symbols (text types t/T/w/W) of kallsyms text, sorted by
/// address; sizes unknown (0): a symbol runs to the next one.
pub fn kallsyms_functions(text: &str) -> Vec<FuncSym> {
    let mut out: Vec<FuncSym> = text
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let addr = u64::from_str_radix(it.next()?, 16).ok()?;
            let kind = it.next()?.chars().next()?;
            let name = it.next()?;
            matches!(kind, 't' | 'T' | 'w' | 'W').then(|| FuncSym {
                name: name.to_string(),
                start: addr,
                size: 0,
                global: kind.is_ascii_uppercase(),
            })
        })
        .collect();
    out.sort_by_key(|s| s.start);
    out
}

impl From<FilterError> for Error {
    fn from(e: FilterError) -> Self {
        Error::Usage(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kallsyms_functions_keep_text_only() {
        let text = "ffffffff81000000 T _text\n\
                    ffffffff81000100 t local_fn\n\
                    ffffffff81000200 D some_data\n\
                    ffffffff81000300 T ksys_read\n\
                    ffffffffc0000000 t mod_fn\t[mymod]\n";
        let f = kallsyms_functions(text);
        let names: Vec<_> = f.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["_text", "local_fn", "ksys_read", "mod_fn"]);
        assert!(!f[1].global && f[2].global);
    }

    #[test]
    fn kernel_filters_resolve_against_kallsyms() {
        let text = "ffffffff81000000 T _text\nffffffff81000300 T ksys_read\n\
                    ffffffff81000380 T next_fn\n";
        let spec = &addr_filter::parse("filter ksys_read").unwrap()[0];
        let mut cache = None;
        let r = resolve_one(spec, &mut cache, || Ok(text.into())).unwrap();
        assert_eq!(r.to_string(), "filter 0xffffffff81000300/0x80");
        // Restricted kallsyms: every address 0.
        let zeros = "0000000000000000 T _text\n0000000000000000 T ksys_read\n";
        let e = resolve_one(spec, &mut None, || Ok(zeros.into())).unwrap_err();
        assert!(e.to_string().contains("kptr_restrict"), "{e}");
        // Numbers need no symbols.
        let spec = &addr_filter::parse("start 0xffffffff81000300").unwrap()[0];
        let r = resolve_one(spec, &mut None, || panic!("kallsyms not needed")).unwrap();
        assert_eq!(r.to_string(), "start 0xffffffff81000300");
    }

    #[test]
    fn missing_file_is_named() {
        let spec = &addr_filter::parse("filter main @ /nonexistent/prog").unwrap()[0];
        let e = resolve_one(spec, &mut None, || unreachable!()).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/prog"), "{e}");
    }

    /// A device (read without end), a FIFO (its open waited for a
    /// writer for ever) or a big file of something else (read whole
    /// first) is refused before it is read.
    #[test]
    fn only_an_elf_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let text = dir.path().join("text");
        std::fs::write(&text, "not a program").unwrap();
        for (path, why) in [
            (Path::new("/dev/zero"), "not a regular file"),
            (fifo.as_path(), "not a regular file"),
            (dir.path(), "not a regular file"),
            (text.as_path(), "not an ELF file"),
        ] {
            let spec = format!("filter main @ {}", path.display());
            let spec = &addr_filter::parse(&spec).unwrap()[0];
            let e = resolve_one(spec, &mut None, || unreachable!()).unwrap_err();
            assert!(e.to_string().contains(why), "{}: {e}", path.display());
        }
        let exe = std::env::current_exe().unwrap();
        assert!(!elf_functions(&exe).unwrap().is_empty());
    }
}
