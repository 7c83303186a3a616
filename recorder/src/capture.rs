//! Copies of the code the trace ran through, saved beside `DIR/data` so the
//! trace decodes later and elsewhere: the vDSO (`images/`, named as
//! `ptdec-core/src/images.rs` documents: `vdso-<build-id hex>.so`), the mapped
//! binaries with `--archive` (`sysroot/<path>`, taken through
//! `/proc/PID/map_files` when possible so a file replaced since is still
//! the mapped one, and checked by build-id), and the kernel with `-k`
//! (`kcore_dir/` as `perf record --kcore` lays it out: `kcore`, `kallsyms`,
//! `modules`).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use object::{Object, ObjectSection};

use crate::errors::Error;

fn cap_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |source| Error::Capture { what, source }
}

/// The GNU build-id of an ELF image, when it has one.
pub fn build_id(bytes: &[u8]) -> Option<Vec<u8>> {
    let file = object::File::parse(bytes).ok()?;
    file.build_id().ok().flatten().map(<[u8]>::to_vec)
}

/// Hex of a build-id.
pub fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapsLine {
    pub start: u64,
    pub end: u64,
    pub perms: String,
    pub offset: u64,
    /// Device major:minor (hex in the file).
    pub dev: (u32, u32),
    pub inode: u64,
    pub path: String,
}

/// Parses `/proc/PID/maps` text.
pub fn parse_maps(text: &str) -> Vec<MapsLine> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (range, perms, offset) = (it.next()?, it.next()?, it.next()?);
            let (dev, inode) = (it.next()?, it.next()?);
            let (maj, min) = dev.split_once(':')?;
            let path = it.collect::<Vec<_>>().join(" ");
            let (a, b) = range.split_once('-')?;
            Some(MapsLine {
                start: u64::from_str_radix(a, 16).ok()?,
                end: u64::from_str_radix(b, 16).ok()?,
                perms: perms.to_string(),
                offset: u64::from_str_radix(offset, 16).ok()?,
                dev: (
                    u32::from_str_radix(maj, 16).ok()?,
                    u32::from_str_radix(min, 16).ok()?,
                ),
                inode: inode.parse().ok()?,
                path,
            })
        })
        .collect()
}

/// Reads the `[vdso]` of process `pid` (`"self"` for ptrec) from
/// `/proc/PID/mem`. Needs ptrace access to the process (our child, or root).
pub fn read_vdso(pid: &str) -> Result<Vec<u8>, Error> {
    let maps_path = format!("/proc/{pid}/maps");
    let maps = std::fs::read_to_string(&maps_path).map_err(cap_err(&maps_path))?;
    let vdso = parse_maps(&maps)
        .into_iter()
        .find(|m| m.path == "[vdso]")
        .ok_or_else(|| {
            cap_err(format!("the vDSO of pid {pid}"))(io::Error::new(
                io::ErrorKind::NotFound,
                "no [vdso] mapping",
            ))
        })?;
    let mem_path = format!("/proc/{pid}/mem");
    let mem = File::open(&mem_path).map_err(cap_err(&mem_path))?;
    let mut bytes = vec![0; (vdso.end - vdso.start) as usize];
    mem.read_exact_at(&mut bytes, vdso.start)
        .map_err(cap_err(format!("{mem_path} at {:#x}", vdso.start)))?;
    Ok(bytes)
}

/// A saved image and its build-id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    /// The name perf gives the file in BUILD_ID (`[vdso]`, or the path).
    pub name: String,
    pub build_id: Option<Vec<u8>>,
    pub path: PathBuf,
}

/// Saves a vDSO image into `images_dir` as `vdso-<build-id hex>.so` (or
/// `vdso.so` without a build-id). The same vDSO is saved once.
pub fn save_vdso(images_dir: &Path, bytes: &[u8]) -> Result<Saved, Error> {
    let id = build_id(bytes);
    let name = match &id {
        Some(id) => format!("vdso-{}.so", hex(id)),
        None => "vdso.so".to_string(),
    };
    let path = images_dir.join(name);
    if !path.exists() {
        write_private(&path, bytes).map_err(cap_err(path.display().to_string()))?;
    }
    Ok(Saved {
        name: "[vdso]".into(),
        build_id: id,
        path,
    })
}

/// Saves ptrec's own vDSO (the one every 64-bit process of this kernel
/// maps, which is what perf records too) and that of each pid that can be
/// read and differs. Failures on pids are returned as warnings.
pub fn capture_vdsos(images_dir: &Path, pids: &[i32]) -> (Vec<Saved>, Vec<String>) {
    let mut saved: Vec<Saved> = Vec::new();
    let mut warnings = Vec::new();
    let sources = std::iter::once("self".to_string()).chain(pids.iter().map(i32::to_string));
    for pid in sources {
        match read_vdso(&pid).and_then(|b| save_vdso(images_dir, &b)) {
            Ok(s) if !saved.iter().any(|x| x.path == s.path) => saved.push(s),
            Ok(_) => {}
            Err(e) => warnings.push(e.to_string()),
        }
    }
    (saved, warnings)
}

/// Files named by MMAP/MMAP2 records (with the build-id MMAP2 carried, when
/// it did), gathered while recording for `--archive`.
pub type MappedFiles = BTreeMap<String, Option<Vec<u8>>>;

/// Whether a mapping's name is a file worth copying.
pub fn is_file_mapping(name: &str) -> bool {
    name.starts_with('/') && !name.starts_with("//anon") && !name.starts_with("/memfd:")
}

/// The executable file mappings of `pid` now, as `(path, map_files entry)`.
pub fn live_executables(pid: i32) -> Vec<(String, PathBuf)> {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    parse_maps(&maps)
        .into_iter()
        .filter(|m| m.perms.contains('x') && is_file_mapping(&m.path))
        .map(|m| {
            let entry = PathBuf::from(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end));
            (m.path.trim_end_matches(" (deleted)").to_string(), entry)
        })
        .collect()
}

/// Copies one mapped file into `sysroot/<path>`, from `source` (a
/// `map_files` entry or the path itself). When `expected` is given the
/// copy's build-id must match it. Returns the saved copy.
pub fn archive_file(
    sysroot: &Path,
    path: &str,
    source: &Path,
    expected: Option<&[u8]>,
) -> Result<Saved, Error> {
    let bytes = std::fs::read(source).map_err(cap_err(source.display().to_string()))?;
    let id = build_id(&bytes);
    if let (Some(want), Some(got)) = (expected, id.as_deref()) {
        if want != got {
            return Err(cap_err(path)(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "build-id {} differs from the recorded {} (the file changed since it was mapped)",
                    hex(got),
                    hex(want)
                ),
            )));
        }
    }
    // The copy is never more readable than the file: its permission bits at
    // most, and under sudo (where the trace goes to the invoking user) only
    // a file that user could read.
    let meta = std::fs::metadata(source).map_err(cap_err(source.display().to_string()))?;
    let mode = meta.permissions().mode() & 0o777;
    if let Some((uid, gid)) = crate::outdir::sudo_user() {
        let bits = if meta.uid() == uid {
            mode >> 6
        } else if meta.gid() == gid {
            mode >> 3
        } else {
            mode
        };
        if bits & 0o4 == 0 {
            return Err(cap_err(path)(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "not copied: uid {uid} (who ran sudo, and gets the trace) may not read it \
                     (mode {mode:o}, owner {})",
                    meta.uid()
                ),
            )));
        }
    }
    let dest = sysroot.join(path.trim_start_matches('/'));
    if let Some(parent) = dest.parent() {
        crate::outdir::create_dir_all(parent).map_err(cap_err(parent.display().to_string()))?;
    }
    let derr = |e| cap_err(dest.display().to_string())(e);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&dest)
        .map_err(derr)?;
    // An existing copy keeps no wider bits than the source either.
    let now = f.metadata().map_err(derr)?.permissions().mode() & 0o777;
    f.set_permissions(std::fs::Permissions::from_mode(now & mode))
        .map_err(derr)?;
    f.write_all(&bytes).map_err(derr)?;
    Ok(Saved {
        name: path.to_string(),
        build_id: id,
        path: dest,
    })
}

/// `--archive`: copies the live executables of `pids` (through map_files)
/// and then every other file the recording saw mapped (from disk, checked
/// against the MMAP2 build-id). Returns the copies and warnings.
pub fn archive(sysroot: &Path, pids: &[i32], seen: &MappedFiles) -> (Vec<Saved>, Vec<String>) {
    let mut done: BTreeMap<String, Saved> = BTreeMap::new();
    let mut warnings = Vec::new();
    for &pid in pids {
        for (path, entry) in live_executables(pid) {
            if done.contains_key(&path) {
                continue;
            }
            let expected = seen.get(&path).and_then(|b| b.as_deref());
            let r = archive_file(sysroot, &path, &entry, expected)
                .or_else(|_| archive_file(sysroot, &path, Path::new(&path), expected));
            match r {
                Ok(s) => {
                    done.insert(path, s);
                }
                Err(e) => warnings.push(e.to_string()),
            }
        }
    }
    for (path, id) in seen {
        if done.contains_key(path) || !is_file_mapping(path) {
            continue;
        }
        match archive_file(sysroot, path, Path::new(path), id.as_deref()) {
            Ok(s) => {
                done.insert(path.clone(), s);
            }
            Err(e) => warnings.push(e.to_string()),
        }
    }
    (done.into_values().collect(), warnings)
}

/// Whether `/proc/kcore` can be read (checked before a `-k` recording
/// creates anything): a permission error names the file and the remedy; a
/// kernel without `/proc/kcore` (CONFIG_PROC_KCORE off) is no error, see
/// [`copy_kcore`].
pub fn check_kcore() -> Result<(), Error> {
    match File::open("/proc/kcore") {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(cap_err(
            "/proc/kcore (-k copies the kernel's code from it; run as root, or with CAP_SYS_RAWIO)",
        )(e)),
        _ => Ok(()),
    }
}

/// `-k`: `kcore_dir/` as `perf record --kcore` makes it: `kallsyms` and
/// `modules` copied, and `kcore` an ELF core holding only the kernel text
/// (`_stext`..`_etext`) and the module area, read from `/proc/kcore`.
/// Without `/proc/kcore` in this kernel, `kcore_dir/` holds `kallsyms` and
/// `modules` only (perf then takes symbols from it but no code) and a
/// warning says so.
pub fn copy_kcore(kcore_dir: &Path) -> Result<Vec<String>, Error> {
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").map_err(cap_err("/proc/kallsyms"))?;
    write_private(&kcore_dir.join("kallsyms"), kallsyms.as_bytes())
        .map_err(cap_err("kcore_dir/kallsyms"))?;
    // A kernel without module support has no /proc/modules: an empty list.
    let modules = std::fs::read("/proc/modules").unwrap_or_default();
    write_private(&kcore_dir.join("modules"), &modules).map_err(cap_err("kcore_dir/modules"))?;
    let sym = |name: &str| {
        kallsyms.lines().find_map(|l| {
            let mut it = l.split_whitespace();
            let addr = it.next()?;
            let _kind = it.next()?;
            (it.next()? == name).then(|| u64::from_str_radix(addr, 16).ok())?
        })
    };
    let (Some(stext), Some(etext)) = (sym("_stext"), sym("_etext")) else {
        return Err(cap_err("/proc/kallsyms")(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "no _stext/_etext addresses (kallsyms hides them from unprivileged users; run as root)",
        )));
    };
    if stext == 0 {
        return Err(cap_err("/proc/kallsyms")(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "kernel addresses read as 0 (kptr_restrict); run as root",
        )));
    }
    let kcore = match File::open("/proc/kcore") {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(vec![
                "this kernel has no /proc/kcore (CONFIG_PROC_KCORE is off): kcore_dir/ holds \
                 kallsyms and modules but no kernel code; decode the kernel with its vmlinux"
                    .into(),
            ])
        }
        r => r.map_err(cap_err("/proc/kcore (run as root, or with CAP_SYS_RAWIO)"))?,
    };
    let segments = kcore_segments(&kcore).map_err(cap_err("/proc/kcore program headers"))?;
    let mut wanted = vec![(stext & !0xfff, (etext + 0xfff) & !0xfff)];
    // The module area: the span of module symbols (`[mod]` suffix).
    let mods: Vec<u64> = kallsyms
        .lines()
        .filter(|l| l.ends_with(']'))
        .filter_map(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
        .filter(|&a| a != 0)
        .collect();
    if let (Some(lo), Some(hi)) = (mods.iter().min(), mods.iter().max()) {
        wanted.push((lo & !0xfff, (hi + 0x1000) & !0xfff));
    }
    let mut out_segs = Vec::new();
    for (lo, hi) in wanted {
        for s in &segments {
            let (a, b) = (lo.max(s.vaddr), hi.min(s.vaddr + s.filesz));
            if a < b {
                let mut bytes = vec![0; (b - a) as usize];
                kcore
                    .read_exact_at(&mut bytes, s.offset + (a - s.vaddr))
                    .map_err(cap_err(format!("/proc/kcore at {a:#x}")))?;
                out_segs.push((a, bytes));
            }
        }
    }
    let path = kcore_dir.join("kcore");
    write_private(&path, &elf_core(&out_segs)).map_err(cap_err(path.display().to_string()))?;
    Ok(Vec::new())
}

/// Writes a file of the trace dir, mode 0600 like every other
/// ([`crate::outdir::create_file`]).
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    crate::outdir::create_file(path)?.write_all(bytes)
}

struct Segment {
    offset: u64,
    vaddr: u64,
    filesz: u64,
}

/// PT_LOAD program headers of an ELF64 little-endian core.
fn kcore_segments(f: &File) -> io::Result<Vec<Segment>> {
    let mut eh = [0u8; 64];
    f.read_exact_at(&mut eh, 0)?;
    if &eh[..4] != b"\x7fELF" || eh[4] != 2 || eh[5] != 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not an ELF64 LE core",
        ));
    }
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
    let (phoff, phentsize, phnum) = (u64_at(&eh, 32), u16_at(&eh, 54), u16_at(&eh, 56));
    if phentsize < 56 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "short program headers",
        ));
    }
    let mut out = Vec::new();
    let mut ph = vec![0u8; usize::from(phentsize)];
    for i in 0..u64::from(phnum) {
        f.read_exact_at(&mut ph, phoff + i * u64::from(phentsize))?;
        if u32::from_le_bytes([ph[0], ph[1], ph[2], ph[3]]) == 1 {
            out.push(Segment {
                offset: u64_at(&ph, 8),
                vaddr: u64_at(&ph, 16),
                filesz: u64_at(&ph, 32),
            });
        }
    }
    Ok(out)
}

/// A minimal ELF64 core: the header, one PT_LOAD per `(vaddr, bytes)`.
fn elf_core(segs: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let phoff = 64u64;
    let mut data_off = phoff + 56 * segs.len() as u64;
    let mut out = Vec::new();
    out.extend_from_slice(b"\x7fELF\x02\x01\x01");
    out.resize(16, 0);
    out.extend_from_slice(&4u16.to_le_bytes()); // ET_CORE
    out.extend_from_slice(&62u16.to_le_bytes()); // EM_X86_64
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes()); // e_entry
    out.extend_from_slice(&phoff.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes()); // e_shoff
    out.extend_from_slice(&0u32.to_le_bytes()); // e_flags
    for v in [64u16, 56, segs.len() as u16, 0, 0, 0] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for (vaddr, bytes) in segs {
        let len = bytes.len() as u64;
        out.extend_from_slice(&1u32.to_le_bytes()); // PT_LOAD
        out.extend_from_slice(&5u32.to_le_bytes()); // R+X
        for v in [data_off, *vaddr, 0, len, len, 0x1000] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        data_off += len;
    }
    for (_, bytes) in segs {
        out.extend_from_slice(bytes);
    }
    out
}

/// BUILD_ID feature entries for saved images (perf's `build_id_event`s).
pub fn build_id_entries(saved: &[Saved]) -> Vec<sideband::feature::BuildIdEntry> {
    saved
        .iter()
        .filter_map(|s| {
            Some(sideband::feature::BuildIdEntry {
                // The host machine; perf ignores entries without a cpumode.
                pid: -1,
                misc: sideband::record::misc::USER,
                build_id: s.build_id.clone()?,
                filename: s.name.clone(),
            })
        })
        .collect()
}

/// Whether the section `.text` exists (a sanity check used by tests).
pub fn has_text(bytes: &[u8]) -> bool {
    object::File::parse(bytes)
        .map(|f| f.section_by_name(".text").is_some_and(|s| s.size() > 0))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines() {
        let m = parse_maps(
            "7ffd1000-7ffd3000 r-xp 00000000 00:00 0                          [vdso]\n\
             55d0c000-55d0e000 r-xp 00002000 fd:01 1234 /usr/bin/my prog\n",
        );
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].path, "[vdso]");
        assert_eq!(m[0].start, 0x7ffd1000);
        assert_eq!(m[1].path, "/usr/bin/my prog");
        assert_eq!(m[1].offset, 0x2000);
        assert_eq!((m[1].dev, m[1].inode), ((0xfd, 1), 1234));
    }

    #[test]
    fn own_vdso_saved_with_its_build_id() {
        let tmp = tempfile::tempdir().unwrap();
        let bytes = read_vdso("self").unwrap();
        assert!(has_text(&bytes), "the vDSO parses as ELF with code");
        let s = save_vdso(tmp.path(), &bytes).unwrap();
        let id = s.build_id.clone().expect("x86-64 vDSOs carry a build-id");
        assert_eq!(
            s.path.file_name().unwrap().to_str().unwrap(),
            format!("vdso-{}.so", hex(&id))
        );
        assert_eq!(build_id(&std::fs::read(&s.path).unwrap()), Some(id));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&s.path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the vDSO image is the owner's alone");
    }

    #[test]
    fn elf_core_round_trip() {
        let core = elf_core(&[(0xffff_0000, vec![0x90; 16]), (0xffff_2000, vec![0xc3; 8])]);
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), &core).unwrap();
        let segs = kcore_segments(&File::open(tmp.path()).unwrap()).unwrap();
        assert_eq!(segs.len(), 2);
        assert_eq!((segs[1].vaddr, segs[1].filesz), (0xffff_2000, 8));
        assert_eq!(core[segs[1].offset as usize], 0xc3);
    }
}
