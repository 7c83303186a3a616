//! `ptdec raw`'s input: raw Intel PT with no perf.data around it (as LLDB,
//! simple-pt or kAFL write it) and the code it ran, given on the command
//! line in the forms libipt's `ptxed` takes. This module parses those
//! forms and loads the files into the sections of one image
//! ([`RawSection`]s, defined in `crate::model::source`, for
//! `decode::decode_raw`) and the modules that name functions
//! (`ptdec::pipeline::run` of a raw `Input`).
//!
//! * `--pt FILE[:FROM[-TO]]`: the trace, optionally a byte range of it.
//! * `--raw FILE[:FROM[-TO]]:ADDR`: bytes of FILE (all, from FROM to its
//!   end, or FROM..TO) loaded at ADDR. No symbols: functions are named
//!   `FILE+0xOFFSET`.
//! * `--elf FILE[:BASE]`: every PT_LOAD segment of an ELF file at its
//!   vaddr, or shifted so that the lowest segment sits at BASE (a shared
//!   object or PIE loaded at BASE). Functions are named from its symbols.
//! * `--cpu none|F/M[/S]`: family/model/stepping for libipt's errata.
//!
//! Numbers are decimal or `0x` hex. Unlike ptxed, a suffix after the last
//! `:` that starts like a number must parse (a typo is an error, not part
//! of the file name).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::images::{Image, ImageError, SearchPath};

pub use crate::model::source::RawSection;

/// Why a raw decode's input cannot be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RawError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file given is empty.
    #[error("{what} {}: the file is empty (0 bytes), so it holds no {}; give the file {}", path.display(), if *what == "--pt" { "trace" } else { "code" }, if *what == "--pt" { "the raw trace was saved to" } else { "that holds the code bytes" })]
    Empty { what: &'static str, path: PathBuf },
    /// A byte range lies outside its file.
    #[error("{what} {path}: range {from:#x}..{to:#x} is outside the file's {size:#x} bytes")]
    Range {
        what: &'static str,
        path: PathBuf,
        from: u64,
        to: u64,
        size: u64,
    },
    /// Code placed so that it would run past the last address.
    #[error("{what} {}: {size:#x} bytes at {addr:#x} run past the end of the address space (2^64); give a lower address", path.display())]
    Wraps {
        what: &'static str,
        path: PathBuf,
        addr: u64,
        size: u64,
    },
    /// An `--elf` (or `--pevent:kcore`: `what`) file that is not ELF.
    #[error("{what} {}: not an ELF file; {}", path.display(), not_elf_hint(what))]
    NotElf { what: &'static str, path: PathBuf },
    /// An `--elf` (or `--pevent:kcore`: `what`) file the image loader
    /// refused.
    #[error("{what}: {source}")]
    Elf {
        what: &'static str,
        source: ImageError,
    },
    /// An `--elf` (or `--pevent:kcore`: `what`) file without loadable
    /// bytes.
    #[error("{what} {}: no PT_LOAD segment with file bytes", path.display())]
    NoSegments { what: &'static str, path: PathBuf },
}

/// What to give instead of a file that is not ELF, for option `what`.
fn not_elf_hint(what: &str) -> &'static str {
    if what == "--elf" {
        "give a raw binary as --raw FILE:ADDR"
    } else {
        "give the kcore that `perf record --kcore` copied (an ELF file), or the kernel's \
         uncompressed vmlinux"
    }
}

/// A number: decimal or `0x` hex.
pub fn parse_num(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// A file and an optional byte range of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRange {
    pub path: PathBuf,
    pub from: u64,
    /// End (exclusive); `None`: the end of the file.
    pub to: Option<u64>,
}

/// `FROM` or `FROM-TO`; `None` when `s` does not start like a number.
fn parse_range(s: &str) -> Option<Result<(u64, Option<u64>), String>> {
    if !s.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let bad = || {
        Err(format!(
            "bad range `{s}`: give FROM or FROM-TO (decimal or 0x hex, FROM < TO)"
        ))
    };
    Some(match s.split_once('-') {
        None => parse_num(s).map_or_else(bad, |f| Ok((f, None))),
        Some((a, b)) => match (parse_num(a), parse_num(b)) {
            (Some(f), Some(t)) if f < t => Ok((f, Some(t))),
            _ => bad(),
        },
    })
}

/// `FILE[:FROM[-TO]]` (`--pt`, and `--raw` without its address).
pub fn parse_file_range(arg: &str) -> Result<FileRange, String> {
    if let Some((file, suffix)) = arg.rsplit_once(':') {
        if let Some(r) = parse_range(suffix) {
            let (from, to) = r?;
            if file.is_empty() {
                return Err(format!("`{arg}`: no file name before the range"));
            }
            return Ok(FileRange {
                path: file.into(),
                from,
                to,
            });
        }
    }
    if arg.is_empty() {
        return Err("no file name".into());
    }
    Ok(FileRange {
        path: arg.into(),
        from: 0,
        to: None,
    })
}

/// A `--raw FILE[:FROM[-TO]]:ADDR` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSpec {
    pub file: FileRange,
    pub addr: u64,
}

/// Parses `--raw FILE[:FROM[-TO]]:ADDR`.
pub fn parse_raw(arg: &str) -> Result<RawSpec, String> {
    let Some((rest, addr)) = arg.rsplit_once(':') else {
        return Err(format!(
            "`{arg}`: give FILE[:FROM[-TO]]:ADDR, the address the bytes were loaded at"
        ));
    };
    let addr = parse_num(addr)
        .ok_or_else(|| format!("`{arg}`: `{addr}` is not a load address (decimal or 0x hex)"))?;
    Ok(RawSpec {
        file: parse_file_range(rest)?,
        addr,
    })
}

/// A `--elf FILE[:BASE]` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElfSpec {
    pub path: PathBuf,
    /// Where the lowest PT_LOAD segment goes; `None` (or 0): at its vaddr.
    pub base: Option<u64>,
}

/// Parses `--elf FILE[:BASE]`.
pub fn parse_elf(arg: &str) -> Result<ElfSpec, String> {
    if let Some((file, base)) = arg.rsplit_once(':') {
        if base.starts_with(|c: char| c.is_ascii_digit()) {
            let base = parse_num(base)
                .ok_or_else(|| format!("`{arg}`: `{base}` is not a base address"))?;
            return Ok(ElfSpec {
                path: file.into(),
                base: Some(base),
            });
        }
    }
    Ok(ElfSpec {
        path: arg.into(),
        base: None,
    })
}

/// Parses `--cpu none|F/M[/S]`: `None` for `none`.
pub fn parse_cpu(arg: &str) -> Result<Option<(u16, u8, u8)>, String> {
    if arg == "none" {
        return Ok(None);
    }
    let bad =
        || format!("`{arg}`: give the CPU as FAMILY/MODEL[/STEPPING] (e.g. 6/85/4) or `none`");
    let parts: Vec<&str> = arg.split('/').collect();
    if !(2..=3).contains(&parts.len()) {
        return Err(bad());
    }
    let family = parse_num(parts[0])
        .and_then(|v| u16::try_from(v).ok())
        .ok_or_else(bad)?;
    let model = parse_num(parts[1])
        .and_then(|v| u8::try_from(v).ok())
        .ok_or_else(bad)?;
    let stepping = match parts.get(2) {
        Some(s) => parse_num(s)
            .and_then(|v| u8::try_from(v).ok())
            .ok_or_else(bad)?,
        None => 0,
    };
    Ok(Some((family, model, stepping)))
}

/// Code at `start..end` from one input file: what names its functions.
#[derive(Debug, Clone)]
pub struct Module {
    pub start: u64,
    pub end: u64,
    /// The file as given.
    pub name: String,
    /// The ELF image (`--elf`), for symbols; `None` for `--raw` bytes.
    pub image: Option<Arc<Image>>,
    /// Run-time address minus ELF vaddr (`--elf`), or minus file offset (`--raw`).
    pub bias: u64,
}

impl Module {
    /// The file offset of `addr` (for `FILE+0xOFF` names).
    pub fn file_offset(&self, addr: u64) -> u64 {
        let link = addr.wrapping_sub(self.bias);
        match &self.image {
            Some(img) => img.vaddr_to_offset(link).unwrap_or(link),
            None => link,
        }
    }
}

/// A raw decode's input, loaded.
#[derive(Debug)]
pub struct RawInput {
    pub pt_path: PathBuf,
    /// The trace bytes (the range asked for).
    pub pt: Vec<u8>,
    pub sections: Vec<RawSection>,
    /// By start address.
    pub modules: Vec<Module>,
}

fn file_size(path: &Path) -> Result<u64, RawError> {
    let io = |source| RawError::Io {
        path: path.to_owned(),
        source,
    };
    // Opened, not just stat'ed: libipt reads `--raw` files by their path,
    // and no output may replace them (crate::inputs).
    let meta = crate::inputs::open_regular(path)
        .and_then(|f| f.metadata())
        .map_err(io)?;
    Ok(meta.len())
}

/// `r`'s range in a file of `size` bytes, checked.
fn checked_range(what: &'static str, r: &FileRange, size: u64) -> Result<(u64, u64), RawError> {
    if size == 0 {
        return Err(RawError::Empty {
            what,
            path: r.path.clone(),
        });
    }
    let to = r.to.unwrap_or(size);
    if r.from >= size || to > size || r.from >= to {
        return Err(RawError::Range {
            what,
            path: r.path.clone(),
            from: r.from,
            to,
            size,
        });
    }
    Ok((r.from, to))
}

/// An ELF file's image, its load bias and the sections of its PT_LOAD
/// segments with file bytes.
fn load_elf(
    e: &ElfSpec,
    what: &'static str,
) -> Result<(Arc<Image>, u64, Vec<RawSection>), RawError> {
    let search = Arc::new(SearchPath::default());
    let img = Image::load(&e.path.to_string_lossy(), &e.path, search)
        .map_err(|source| RawError::Elf { what, source })?;
    let img = Arc::new(img);
    if !img.is_elf {
        return Err(RawError::NotElf {
            what,
            path: e.path.clone(),
        });
    }
    let loads: Vec<_> = img.segments.iter().filter(|s| s.filesz > 0).collect();
    if loads.is_empty() {
        return Err(RawError::NoSegments {
            what,
            path: e.path.clone(),
        });
    }
    // ptxed's rule: BASE places the lowest PT_LOAD; 0 means no shift.
    let bias = match e.base.filter(|&b| b != 0) {
        Some(base) => {
            let low = img.segments.iter().map(|s| s.vaddr).min().unwrap_or(0);
            base.wrapping_sub(low)
        }
        None => 0,
    };
    let sections = loads
        .iter()
        .map(|s| {
            let vaddr = s.vaddr.wrapping_add(bias);
            fits(what, &e.path, vaddr, s.filesz)?;
            Ok(RawSection {
                path: e.path.clone(),
                offset: s.file_offset,
                size: s.filesz,
                vaddr,
            })
        })
        .collect::<Result<_, RawError>>()?;
    Ok((img, bias, sections))
}

/// `size` bytes at `addr` end at or below 2^64 (libipt would take such a
/// section, and a module's end would saturate).
fn fits(what: &'static str, path: &Path, addr: u64, size: u64) -> Result<(), RawError> {
    match addr.checked_add(size) {
        Some(_) => Ok(()),
        None if addr.wrapping_add(size) == 0 => Ok(()),
        None => Err(RawError::Wraps {
            what,
            path: path.to_owned(),
            addr,
            size,
        }),
    }
}

impl RawInput {
    /// Reads the trace and checks every image file and range.
    pub fn load(pt: &FileRange, elfs: &[ElfSpec], raws: &[RawSpec]) -> Result<RawInput, RawError> {
        let (from, to) = checked_range("--pt", pt, file_size(&pt.path)?)?;
        let all = crate::inputs::read(&pt.path).map_err(|source| RawError::Io {
            path: pt.path.clone(),
            source,
        })?;
        let bytes = all
            .get(from as usize..to as usize)
            .ok_or_else(|| RawError::Range {
                what: "--pt",
                path: pt.path.clone(),
                from,
                to,
                size: all.len() as u64,
            })?
            .to_vec();
        let mut sections = Vec::new();
        let mut modules = Vec::new();
        for e in elfs {
            let (img, bias, secs) = load_elf(e, "--elf")?;
            for s in secs {
                modules.push(Module {
                    start: s.vaddr,
                    end: s.vaddr.saturating_add(s.size),
                    name: e.path.to_string_lossy().into_owned(),
                    image: Some(img.clone()),
                    bias,
                });
                sections.push(s);
            }
        }
        for r in raws {
            let (from, to) = checked_range("--raw", &r.file, file_size(&r.file.path)?)?;
            fits("--raw", &r.file.path, r.addr, to - from)?;
            sections.push(RawSection {
                path: r.file.path.clone(),
                offset: from,
                size: to - from,
                vaddr: r.addr,
            });
            modules.push(Module {
                start: r.addr,
                end: r.addr.saturating_add(to - from),
                name: r.file.path.to_string_lossy().into_owned(),
                image: None,
                bias: r.addr.wrapping_sub(from),
            });
        }
        modules.sort_by_key(|m| m.start);
        Ok(RawInput {
            pt_path: pt.path.clone(),
            pt: bytes,
            sections,
            modules,
        })
    }

    /// The sections of an ELF file given to option `what` (`--elf
    /// FILE[:BASE]`, `--pevent:kcore`), which errors name.
    pub fn elf_sections(e: &ElfSpec, what: &'static str) -> Result<Vec<RawSection>, RawError> {
        load_elf(e, what).map(|(_, _, s)| s)
    }

    /// The module holding `addr` (the last one given wins where they overlap).
    pub fn module(&self, addr: u64) -> Option<&Module> {
        self.modules
            .iter()
            .rev()
            .find(|m| m.start <= addr && addr < m.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_ranges_and_specs() {
        assert_eq!(parse_num("0x10"), Some(16));
        assert_eq!(parse_num("10"), Some(10));
        assert_eq!(parse_num("zz"), None);
        assert_eq!(
            parse_file_range("a.pt").unwrap(),
            FileRange {
                path: "a.pt".into(),
                from: 0,
                to: None
            }
        );
        assert_eq!(
            parse_file_range("a.pt:0x10-0x20").unwrap(),
            FileRange {
                path: "a.pt".into(),
                from: 16,
                to: Some(32)
            }
        );
        assert_eq!(parse_file_range("a.pt:4").unwrap().from, 4);
        // A colon that is part of the name.
        assert_eq!(
            parse_file_range("c:a.pt").unwrap().path,
            Path::new("c:a.pt")
        );
        assert!(parse_file_range("a.pt:0x20-0x10").is_err());
        assert!(parse_file_range("a.pt:1-zz").is_err());
        let r = parse_raw("code.bin:0x100-0x200:0x400000").unwrap();
        assert_eq!(
            (r.file.from, r.file.to, r.addr),
            (0x100, Some(0x200), 0x40_0000)
        );
        let r = parse_raw("code.bin:0x400000").unwrap();
        assert_eq!((r.file.from, r.file.to, r.addr), (0, None, 0x40_0000));
        assert!(parse_raw("code.bin").is_err());
        assert!(parse_raw("code.bin:here").is_err());
        assert!(parse_raw("code.bin:5-1:0x1000").is_err());
        assert_eq!(parse_elf("a.so:0x7f0000").unwrap().base, Some(0x7f_0000));
        assert_eq!(parse_elf("a.so").unwrap().base, None);
        assert!(parse_elf("a.so:0xzz").is_err());
        assert_eq!(parse_cpu("6/85/4").unwrap(), Some((6, 85, 4)));
        assert_eq!(parse_cpu("6/0x55").unwrap(), Some((6, 85, 0)));
        assert_eq!(parse_cpu("none").unwrap(), None);
        for bad in ["6", "6/999", "6/85/4/1", "intel", "6/x"] {
            assert!(parse_cpu(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn files_and_ranges_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let pt = dir.path().join("t.pt");
        std::fs::write(&pt, [0u8; 64]).unwrap();
        let code = dir.path().join("code.bin");
        std::fs::write(&code, [0x90u8; 32]).unwrap();
        let fr = |p: &Path, from, to| FileRange {
            path: p.to_owned(),
            from,
            to,
        };
        let ok = RawInput::load(
            &fr(&pt, 8, Some(40)),
            &[],
            &[RawSpec {
                file: fr(&code, 16, None),
                addr: 0x1000,
            }],
        )
        .unwrap();
        assert_eq!(ok.pt.len(), 32);
        assert_eq!(
            ok.sections,
            [RawSection {
                path: code.clone(),
                offset: 16,
                size: 16,
                vaddr: 0x1000
            }]
        );
        let m = ok.module(0x1004).unwrap();
        assert_eq!(m.file_offset(0x1004), 20);
        assert!(ok.module(0x1010).is_none());

        let e = RawInput::load(&fr(&pt, 0, Some(65)), &[], &[]).unwrap_err();
        assert!(e.to_string().contains("outside the file"), "{e}");
        let empty = dir.path().join("empty.pt");
        std::fs::write(&empty, b"").unwrap();
        let e = RawInput::load(&fr(&empty, 0, None), &[], &[]).unwrap_err();
        assert!(e.to_string().contains("the file is empty"), "{e}");
        let e = RawInput::load(&fr(&dir.path().join("nope"), 0, None), &[], &[]).unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
        let e = RawInput::load(
            &fr(&pt, 0, None),
            &[ElfSpec {
                path: code.clone(),
                base: None,
            }],
            &[],
        )
        .unwrap_err();
        assert!(matches!(e, RawError::NotElf { .. }), "{e}");
        // 32 bytes that would run past 2^64 are refused; ending at it is fine.
        let at = |addr| {
            RawInput::load(
                &fr(&pt, 0, None),
                &[],
                &[RawSpec {
                    file: fr(&code, 0, None),
                    addr,
                }],
            )
        };
        let e = at(u64::MAX - 8).unwrap_err();
        assert!(
            e.to_string().contains("past the end of the address space"),
            "{e}"
        );
        assert!(at(u64::MAX - 31).is_ok());
    }
}
