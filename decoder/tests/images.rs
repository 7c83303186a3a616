//! The image store and symbol cache on real binaries of this machine and on
//! small programs compiled here (gcc, g++, rustc, objcopy). A test whose tool
//! is missing prints one line saying so and passes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use ptdec::images::{hex, Image, ImageStore, SearchPath};
use ptdec::symbols::{fallback_name, SymbolCache};
use sideband::record::FileId;
use sideband::timeline::MappedFile;

const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";

fn mf(name: &str, file_id: Option<FileId>) -> MappedFile {
    MappedFile {
        filename: name.into(),
        file_id,
        prot: Some(5),
        flags: Some(2),
    }
}

/// A search path with nothing but what the test gives (no `~/.debug`).
fn search(trace: Option<&Path>, live_fs: bool) -> SearchPath {
    SearchPath {
        trace_dir: trace.map(Path::to_owned),
        sysroots: Vec::new(),
        buildid_dir: None,
        live_fs,
        kcore_dir: trace.map(|t| t.join("kcore_dir")),
        vmlinux: None,
        recorded_by: None,
    }
}

fn build_id_of(path: &str) -> Vec<u8> {
    let store = ImageStore::new(search(None, true));
    store
        .get(&mf(path, None))
        .unwrap()
        .build_id
        .clone()
        .unwrap()
}

fn have(tool: &str) -> bool {
    pt_tests::have_tool(module_path!(), tool)
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Copies `from` to `root/<name without its leading />`.
fn place(root: &Path, name: &str, from: &Path) -> PathBuf {
    let to = root.join(name.trim_start_matches('/'));
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(from, &to).unwrap();
    to
}

/// Compiles `src` (C, or C++ when `cxx`) into `dir/name`.
fn compile(dir: &Path, name: &str, src: &str, cxx: bool, flags: &[&str]) -> PathBuf {
    let ext = if cxx { "cc" } else { "c" };
    let file = dir.join(format!("{name}.{ext}"));
    std::fs::write(&file, src).unwrap();
    let out = dir.join(name);
    run(Command::new(if cxx { "g++" } else { "gcc" })
        .args(flags)
        .arg(&file)
        .arg("-o")
        .arg(&out));
    out
}

/// `(address, name)` of every `<NAME@plt>:` label objdump prints.
fn objdump_plt(path: &Path) -> Vec<(u64, String)> {
    let out = Command::new("objdump")
        .arg("-d")
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut v = Vec::new();
    for line in text.lines() {
        let Some((addr, rest)) = line.split_once(" <") else {
            continue;
        };
        let Some(name) = rest.strip_suffix(">:") else {
            continue;
        };
        if name.ends_with("@plt") {
            v.push((
                u64::from_str_radix(addr.trim(), 16).unwrap(),
                name.to_owned(),
            ));
        }
    }
    v
}

#[test]
fn store_and_cache_are_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<ImageStore>();
    check::<SymbolCache>();
    check::<Image>();
}

#[test]
fn bin_true_loads_with_segments_and_build_id() {
    let store = ImageStore::new(search(None, true));
    let img = store.get(&mf("/bin/true", None)).expect("/bin/true");
    assert!(img.is_elf);
    assert_eq!(img.build_id.as_ref().map(Vec::len), Some(20));
    assert_eq!(img.size, std::fs::metadata("/bin/true").unwrap().len());
    assert_eq!(img.bytes().len() as u64, img.size);
    let text = img
        .segments
        .iter()
        .find(|s| s.executable)
        .expect("PT_LOAD X");
    let off = text.file_offset + 0x10;
    let va = img.offset_to_vaddr(off).unwrap();
    assert_eq!(va, text.vaddr + 0x10);
    assert_eq!(img.vaddr_to_offset(va), Some(off));
    assert_eq!(img.offset_to_vaddr(img.size + 1), None);
    // Cached: the same Arc for the same (name, id).
    let again = store.get(&mf("/bin/true", None)).unwrap();
    assert!(Arc::ptr_eq(&img, &again));
    // No build-id recorded: accepted from the live fs, with one warning.
    assert_eq!(store.warnings().len(), 1, "{:?}", store.warnings());
    assert!(store.missing().is_empty());
}

#[test]
fn libc_symbols() {
    let store = ImageStore::new(search(None, true));
    let libc = store.get(&mf(LIBC, None)).expect("libc");
    let syms = SymbolCache::new();
    assert!(syms.symbol_count(&libc) > 1000);
    // libc's dynsym at least names malloc and __libc_start_main; find them
    // through the ELF dynamic symbols and look them up by address.
    for name in ["malloc", "__libc_start_main", "free"] {
        let addr = dynsym_addr(LIBC, name).unwrap_or_else(|| panic!("{name} in nm -D"));
        let s = syms.lookup(&libc, addr).unwrap();
        assert!(s.name.as_ref() == name || s.vaddr == addr, "{name}: {s:?}");
        assert_eq!(s.vaddr, addr);
        assert!(syms.is_function_entry(&libc, addr));
        let inside = syms.lookup(&libc, addr + 1).unwrap();
        assert_eq!(inside.vaddr, addr);
        assert!(!syms.is_function_entry(&libc, addr + 1));
    }
    let m = syms
        .lookup(&libc, dynsym_addr(LIBC, "malloc").unwrap())
        .unwrap();
    assert_eq!(&*m.name, "malloc");
    assert!(m.size > 0);
}

/// A function's address from `nm -D --defined-only`.
fn dynsym_addr(path: &str, name: &str) -> Option<u64> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(path)
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let mut it = l.split_whitespace();
        let (a, t, n) = (it.next()?, it.next()?, it.next()?);
        let n = n.split('@').next()?;
        (n == name && matches!(t, "T" | "W" | "i")).then(|| u64::from_str_radix(a, 16).ok())?
    })
}

#[test]
fn plt_entries_match_objdump() {
    if !have("objdump") || !have("gcc") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = "#include <stdio.h>\n#include <stdlib.h>\nint main(int c, char **v){ puts(v[0]); return atoi(v[0]) + c; }\n";
    let lazy = compile(tmp.path(), "lazy", src, false, &["-O0"]);
    let ibt = compile(
        tmp.path(),
        "ibt",
        src,
        false,
        &["-O0", "-fcf-protection=full", "-Wl,-z,ibtplt"],
    );
    let now = compile(tmp.path(), "now", src, false, &["-O0", "-Wl,-z,now"]);
    let store = ImageStore::new(search(None, true));
    let syms = SymbolCache::new();
    let mut checked = 0;
    for path in [Path::new("/bin/true"), &lazy, &ibt, &now] {
        let img = store.get(&mf(path.to_str().unwrap(), None)).expect("image");
        let want = objdump_plt(path);
        assert!(!want.is_empty(), "{}: objdump shows no PLT", path.display());
        for (addr, name) in &want {
            let s = syms
                .lookup(&img, *addr)
                .unwrap_or_else(|| panic!("{}: {name} at {addr:#x}", path.display()));
            assert_eq!(
                (&*s.name, s.vaddr),
                (name.as_str(), *addr),
                "{}",
                path.display()
            );
            assert!(syms.is_function_entry(&img, *addr));
            checked += 1;
        }
        if path != Path::new("/bin/true") {
            assert!(want.iter().any(|(_, n)| n == "puts@plt"));
        }
    }
    assert!(checked > 10);
}

#[test]
fn cpp_names_are_demangled() {
    if !have("g++") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = r#"
namespace shapes { struct Circle { double r; __attribute__((noinline)) double area(int scale) const; }; }
double shapes::Circle::area(int scale) const { return 3.14 * r * r * scale; }
template <typename T> __attribute__((noinline)) T twice(T x) { return x + x; }
int main(int argc, char **) { shapes::Circle c{1.0}; return (int)c.area(argc) + twice<long>(argc); }
"#;
    let prog = compile(tmp.path(), "shapes", src, true, &["-O1"]);
    let store = ImageStore::new(search(None, true));
    let img = store.get(&mf(prog.to_str().unwrap(), None)).unwrap();
    let syms = SymbolCache::new();
    let names = all_names(&syms, &img);
    assert!(
        names.iter().any(|n| n == "shapes::Circle::area(int) const"),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n == "long twice<long>(long)"),
        "{names:?}"
    );
    assert!(names.iter().any(|n| n == "main"));
}

/// Every distinct name in the image's table, found by walking its text.
fn all_names(syms: &SymbolCache, img: &Arc<Image>) -> Vec<String> {
    let mut names = Vec::new();
    for seg in img.segments.iter().filter(|s| s.executable) {
        let mut a = seg.vaddr;
        while a < seg.vaddr + seg.memsz {
            match syms.lookup(img, a) {
                Some(s) => {
                    names.push(s.name.to_string());
                    a = s.vaddr + s.size.max(1);
                }
                None => a += 1,
            }
        }
    }
    names
}

#[test]
fn rust_names_are_demangled_legacy_and_v0() {
    if !have("rustc") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("hello.rs");
    std::fs::write(
        &src,
        "mod inner { #[inline(never)] pub fn work(x: u64) -> u64 { x.wrapping_mul(3) } }\n\
         fn main() { std::process::exit(inner::work(std::env::args().count() as u64) as i32) }\n",
    )
    .unwrap();
    // Stable rustc mangles legacy by default and takes v0 on request.
    for (mangling, prefix) in [("legacy", "_ZN"), ("v0", "_R")] {
        let out = tmp.path().join(format!("hello-{mangling}"));
        let flag = (mangling == "v0").then_some("-Csymbol-mangling-version=v0");
        run(Command::new("rustc")
            .args(flag)
            .arg("-Copt-level=1")
            .arg(&src)
            .arg("-o")
            .arg(&out));
        let nm = Command::new("nm").arg(&out).output().unwrap();
        let nm = String::from_utf8_lossy(&nm.stdout);
        let line = nm
            .lines()
            .find(|l| l.contains("5inner") && l.contains("4work"))
            .expect("inner::work in nm");
        assert!(line.split_whitespace().nth(2).unwrap().starts_with(prefix));
        let addr = u64::from_str_radix(line.split_whitespace().next().unwrap(), 16).unwrap();
        let store = ImageStore::new(search(None, true));
        let img = store.get(&mf(out.to_str().unwrap(), None)).unwrap();
        let s = SymbolCache::new().lookup(&img, addr).unwrap();
        assert_eq!(&*s.name, "hello::inner::work", "{mangling}");
    }
}

/// A C program with a static function, built with debug info, then split
/// into a stripped binary and its debug file.
fn split_program(dir: &Path) -> Option<(PathBuf, PathBuf, u64)> {
    if !have("gcc") || !have("objcopy") {
        return None;
    }
    let src = "static __attribute__((noinline)) int hidden_helper(int x) { return x * 7; }\n\
               int main(int c, char **v) { (void)v; return hidden_helper(c); }\n";
    let full = compile(dir, "full", src, false, &["-O1", "-g"]);
    let nm = Command::new("nm").arg(&full).output().unwrap();
    let nm = String::from_utf8_lossy(&nm.stdout);
    let addr = nm
        .lines()
        .find(|l| l.ends_with(" hidden_helper"))
        .and_then(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
        .expect("hidden_helper in nm");
    let debug = dir.join("full.debug");
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&full)
        .arg(&debug));
    let stripped = dir.join("stripped");
    run(Command::new("objcopy")
        .arg("--strip-all")
        .arg(&full)
        .arg(&stripped));
    Some((stripped, debug, addr))
}

#[test]
fn stripped_binary_with_debuglink_in_sysroot() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((stripped, debug, addr)) = split_program(tmp.path()) else {
        return;
    };
    // The debuglink names "app.debug"; objcopy computes its CRC from the file.
    let linked = tmp.path().join("linked");
    let app_debug = tmp.path().join("app.debug");
    std::fs::copy(&debug, &app_debug).unwrap();
    run(Command::new("objcopy")
        .arg(format!("--add-gnu-debuglink={}", app_debug.display()))
        .arg(&stripped)
        .arg(&linked));
    let root = tmp.path().join("root");
    place(&root, "/opt/app/bin/app", &linked);
    let syms = SymbolCache::new();
    let mut s = search(None, false);
    s.sysroots = vec![root.clone()];

    // Without the debug file only the dynamic symbols are there.
    let store = ImageStore::new(s.clone());
    let img = store.get(&mf("/opt/app/bin/app", None)).expect("app");
    assert!(img.path.starts_with(&root));
    assert!(syms
        .lookup(&img, addr)
        .is_none_or(|s| &*s.name != "hidden_helper"));

    // Next to the file, in .debug/, and in /usr/lib/debug/<dir>/.
    for place_at in [
        "/opt/app/bin/app.debug",
        "/opt/app/bin/.debug/app.debug",
        "/usr/lib/debug/opt/app/bin/app.debug",
    ] {
        let p = place(&root, place_at, &app_debug);
        let store = ImageStore::new(s.clone());
        let img = store.get(&mf("/opt/app/bin/app", None)).unwrap();
        let syms = SymbolCache::new();
        let sym = syms.lookup(&img, addr).expect(place_at);
        assert_eq!(&*sym.name, "hidden_helper", "{place_at}");
        assert_eq!(syms.debug_file(&img), Some(p.clone()));
        std::fs::remove_file(p).unwrap();
    }

    // A debug file whose CRC does not match is not used.
    let wrong = place(&root, "/opt/app/bin/app.debug", Path::new("/bin/true"));
    let store = ImageStore::new(s);
    let img = store.get(&mf("/opt/app/bin/app", None)).unwrap();
    assert_eq!(SymbolCache::new().debug_file(&img), None);
    std::fs::remove_file(wrong).unwrap();
}

#[test]
fn stripped_binary_with_build_id_debug_file() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((stripped, debug, addr)) = split_program(tmp.path()) else {
        return;
    };
    let root = tmp.path().join("root");
    place(&root, "/usr/bin/app", &stripped);
    let mut s = search(None, false);
    s.sysroots = vec![root.clone()];
    let store = ImageStore::new(s.clone());
    let img = store.get(&mf("/usr/bin/app", None)).unwrap();
    let id = hex(img.build_id.as_ref().unwrap());
    let p = place(
        &root,
        &format!("/usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..]),
        &debug,
    );
    let syms = SymbolCache::new();
    assert_eq!(&*syms.lookup(&img, addr).unwrap().name, "hidden_helper");
    assert_eq!(syms.debug_file(&img), Some(p));

    // perf's build-id cache holds debug files too: ~/.debug/.build-id/xx/rest/debug.
    let cache = tmp.path().join("dotdebug");
    let p = place(
        &cache,
        &format!(".build-id/{}/{}/debug", &id[..2], &id[2..]),
        &debug,
    );
    let mut s2 = s.clone();
    s2.sysroots = vec![tmp.path().join("other-root")];
    place(&s2.sysroots[0], "/usr/bin/app", &stripped);
    s2.buildid_dir = Some(cache);
    let store = ImageStore::new(s2);
    let img = store.get(&mf("/usr/bin/app", None)).unwrap();
    let syms = SymbolCache::new();
    assert_eq!(&*syms.lookup(&img, addr).unwrap().name, "hidden_helper");
    assert_eq!(syms.debug_file(&img), Some(p));
}

#[test]
fn sysroot_wins_over_live_fs_and_trace_sysroot_over_user_sysroot() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("trace");
    let user = tmp.path().join("user-root");
    // Different files under the same recorded name; no build-id recorded.
    let in_user = place(&user, "/bin/true", Path::new(LIBC));
    let mut s = search(Some(&trace), true);
    s.sysroots = vec![user.clone()];
    let store = ImageStore::new(s.clone());
    assert_eq!(store.get(&mf("/bin/true", None)).unwrap().path, in_user);
    assert!(store.warnings().is_empty(), "{:?}", store.warnings());

    let in_trace = place(&trace.join("sysroot"), "/bin/true", Path::new("/bin/true"));
    let store = ImageStore::new(s);
    assert_eq!(store.get(&mf("/bin/true", None)).unwrap().path, in_trace);
}

#[test]
fn build_id_mismatch_is_a_warning_and_not_used() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    place(&root, "/bin/true", Path::new(LIBC));
    let true_id = build_id_of("/bin/true");

    // MMAP2 with a build-id: the sysroot copy is rejected, the live file matches.
    let mut s = search(None, true);
    s.sysroots = vec![root.clone()];
    let store = ImageStore::new(s.clone());
    let file = mf("/bin/true", Some(FileId::BuildId(true_id.clone())));
    let img = store.get(&file).expect("live /bin/true matches");
    assert_eq!(img.path, Path::new("/bin/true"));
    let w = store.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("build-id") && w[0].contains(&hex(&true_id)),
        "{w:?}"
    );
    assert!(w[0].contains(&root.display().to_string()), "{w:?}");
    store.get(&file).unwrap();
    assert_eq!(store.warnings().len(), 1, "warned once");

    // Without the live fs nothing is left: missing, with the mismatch as reason.
    s.live_fs = false;
    let store = ImageStore::new(s.clone());
    assert!(store.get(&file).is_none());
    let m = store.missing();
    assert_eq!(m.len(), 1);
    assert!(m[0].reason.contains("differs"), "{m:?}");
    assert_eq!(m[0].build_id.as_ref(), Some(&true_id));

    // Build-ids from the BUILD_ID feature count the same way.
    let store = ImageStore::new(s);
    store.add_known_build_ids([("/bin/true".to_string(), true_id)]);
    assert!(store.get(&mf("/bin/true", None)).is_none());
    assert_eq!(store.warnings().len(), 1);
}

#[test]
fn build_id_cache_layouts() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("dotdebug");
    let id = build_id_of("/bin/true");
    let h = hex(&id);
    let s = SearchPath {
        buildid_dir: Some(cache.clone()),
        ..search(None, false)
    };
    let file = mf("/usr/bin/true", Some(FileId::BuildId(id.clone())));
    // perf's layout: ~/.debug/<path>/<hex>/elf, linked from .build-id/xx/rest.
    let elf = place(
        &cache,
        &format!("/usr/bin/true/{h}/elf"),
        Path::new("/bin/true"),
    );
    let store = ImageStore::new(s.clone());
    assert_eq!(store.get(&file).unwrap().path, elf);
    let link_dir = cache.join(".build-id").join(&h[..2]);
    std::fs::create_dir_all(&link_dir).unwrap();
    std::os::unix::fs::symlink(format!("../../usr/bin/true/{h}"), link_dir.join(&h[2..])).unwrap();
    let store = ImageStore::new(s.clone());
    let img = store.get(&file).unwrap();
    assert_eq!(img.path, link_dir.join(&h[2..]).join("elf"));
    // Unknown build-id: the cache cannot be asked.
    let store = ImageStore::new(s);
    assert!(store.get(&mf("/usr/bin/true", None)).is_none());
}

#[test]
fn missing_image_listed_once_with_ranges() {
    let store = ImageStore::new(search(None, true));
    let file = mf("/nonexistent/libgone.so", None);
    assert!(store.get(&file).is_none());
    assert!(store.get(&file).is_none());
    store.note_undecoded(&file, 42, 0x1000, 0x1100);
    store.note_undecoded(&file, 42, 0x1100, 0x1200);
    store.note_undecoded(&file, 7, 0x5000, 0x5010);
    // Not files: never listed.
    for anon in ["//anon", "[anon:jit]", "[heap]", "[stack]"] {
        assert!(store.get(&mf(anon, None)).is_none());
        store.note_undecoded(&mf(anon, None), 42, 0, 16);
    }
    // Noted without a get first: looked up then.
    store.note_undecoded(&mf("/nonexistent/other", None), 1, 1, 2);
    let m = store.missing();
    assert_eq!(m.len(), 2, "{m:?}");
    assert_eq!(m[0].name, "/nonexistent/libgone.so");
    assert_eq!(m[0].ranges, vec![(7, 0x5000, 0x5010), (42, 0x1000, 0x1200)]);
    assert!(m[0].reason.contains("not found"), "{}", m[0].reason);
    assert_eq!(m[1].name, "/nonexistent/other");
    assert!(store.warnings().is_empty());
}

#[test]
fn malformed_elf_is_rejected_with_a_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let libc = std::fs::read(LIBC).unwrap();
    let mut s = search(None, false);
    s.sysroots = vec![root.clone()];
    // Cut in the headers, in the middle, one byte short; a bad e_phoff.
    let mut bad_phoff = libc.clone();
    bad_phoff[0x20..0x28].copy_from_slice(&u64::MAX.to_le_bytes());
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("head", libc[..40].to_vec()),
        ("half", libc[..libc.len() / 2].to_vec()),
        ("short", libc[..libc.len() - 1].to_vec()),
        ("phoff", bad_phoff),
        ("magic-only", b"\x7fELF".to_vec()),
    ];
    for (name, bytes) in cases {
        let path = format!("/lib/{name}.so");
        let to = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(&to, &bytes).unwrap();
        let store = ImageStore::new(s.clone());
        let file = mf(&path, None);
        assert!(store.get(&file).is_none(), "{name} accepted");
        let m = store.missing();
        assert_eq!(m.len(), 1);
        assert!(
            m[0].reason.contains("malformed") || m[0].reason.contains("truncated"),
            "{name}: {}",
            m[0].reason
        );
    }
}

#[test]
fn vdso_comes_from_the_trace_images() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("trace");
    let images = trace.join("images");
    std::fs::create_dir_all(&images).unwrap();
    let vdso = mf("[vdso]", None);
    // Never the decoding machine's: nothing in images/ means missing.
    let store = ImageStore::new(search(Some(&trace), true));
    assert!(store.get(&vdso).is_none());
    store.note_undecoded(&vdso, 9, 0x7fff_0000, 0x7fff_0100);
    assert_eq!(store.missing().len(), 1);

    // A single vdso-<hex>.so and no recorded build-id: used with a warning.
    let true_id = build_id_of("/bin/true");
    let by_id = images.join(format!("vdso-{}.so", hex(&true_id)));
    std::fs::copy("/bin/true", &by_id).unwrap();
    let store = ImageStore::new(search(Some(&trace), true));
    assert_eq!(store.get(&vdso).unwrap().path, by_id);
    assert_eq!(store.warnings().len(), 1);

    // vdso.so is the one when no build-id is recorded.
    std::fs::copy(LIBC, images.join("vdso.so")).unwrap();
    let store = ImageStore::new(search(Some(&trace), true));
    assert_eq!(store.get(&vdso).unwrap().path, images.join("vdso.so"));
    assert!(store.warnings().is_empty());

    // With the build-id recorded, vdso-<hex>.so.
    let store = ImageStore::new(search(Some(&trace), true));
    store.add_known_build_ids([("[vdso]".to_string(), true_id)]);
    assert_eq!(store.get(&vdso).unwrap().path, by_id);
}

#[test]
fn kernel_from_kcore_dir_with_kallsyms() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("trace");
    let kdir = trace.join("kcore_dir");
    std::fs::create_dir_all(&kdir).unwrap();
    let store = ImageStore::new(search(Some(&trace), false));
    assert!(store.kernel().is_none());

    // Any ELF with program headers stands in for perf's kcore copy here.
    std::fs::copy("/bin/true", kdir.join("kcore")).unwrap();
    let store = ImageStore::new(search(Some(&trace), false));
    let k = store.kernel().expect("kernel");
    let text = *k.segments.iter().find(|s| s.executable).unwrap();
    let base = text.vaddr;
    std::fs::write(
        kdir.join("kallsyms"),
        format!(
            "{:016x} T _stext\n{:016x} t do_thing\n{:016x} d some_data\n{:016x} T _RNvCs6GmmlP4bgsG_1r5inner\t[mymod]\n",
            base,
            base + 0x40,
            base + 0x60,
            base + 0x80
        ),
    )
    .unwrap();
    let store = ImageStore::new(search(Some(&trace), false));
    let k = store.kernel().unwrap();
    let kname = mf("[kernel.kallsyms]_text", None);
    assert!(Arc::ptr_eq(&store.get(&kname).unwrap(), &k));
    let syms = SymbolCache::new();
    assert_eq!(&*syms.lookup(&k, base + 0x10).unwrap().name, "_stext");
    assert_eq!(&*syms.lookup(&k, base + 0x70).unwrap().name, "do_thing");
    assert_eq!(&*syms.lookup(&k, base + 0x90).unwrap().name, "r::inner");
    assert!(syms.is_function_entry(&k, base + 0x40));
    // The last symbol ends with the segment.
    assert!(syms.lookup(&k, text.vaddr + text.memsz).is_none());
}

#[test]
fn live_file_with_matching_inode_needs_no_warning() {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata("/bin/true").unwrap();
    let dev = meta.dev();
    let maj = (((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0fff)) as u32;
    let min = (((dev >> 12) & 0xffff_ff00) | (dev & 0xff)) as u32;
    let store = ImageStore::new(search(None, true));
    let same = FileId::Inode {
        maj,
        min,
        ino: meta.ino(),
        ino_generation: 0,
    };
    assert!(store.get(&mf("/bin/true", Some(same))).is_some());
    assert!(store.warnings().is_empty(), "{:?}", store.warnings());
    let other = FileId::Inode {
        maj,
        min,
        ino: meta.ino() + 1,
        ino_generation: 0,
    };
    assert!(store.get(&mf("/bin/true", Some(other.clone()))).is_some());
    assert_eq!(store.warnings().len(), 1);
    assert!(store.warnings()[0].starts_with("/bin/true: no build-id recorded"));

    // Many such files are one warning, not one each (a bundle of 1000
    // modules without build-ids printed 1000 lines).
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..12 {
        let p = tmp.path().join(format!("lib{i}.so"));
        std::fs::copy("/bin/true", &p).unwrap();
        assert!(store
            .get(&mf(p.to_str().unwrap(), Some(other.clone())))
            .is_some());
    }
    let w = store.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("13 files with no build-id recorded")
            && w[0].contains("/bin/true, ")
            && w[0].contains(" and 8 more"),
        "{w:?}"
    );
}

#[test]
fn perf_map_from_the_trace_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("trace");
    std::fs::create_dir_all(trace.join("images")).unwrap();
    std::fs::write(
        trace.join("images/perf-4242.map"),
        "7f0000001000 40 LazyCompile:~foo script.js:1\n\
         0x7f0000002000 0x10 _ZN3jit4stubEv\n\
         garbage line\n",
    )
    .unwrap();
    let syms = SymbolCache::for_search(&search(Some(&trace), false));
    let s = syms.lookup_perf_map(4242, 0x7f00_0000_1010).unwrap();
    assert_eq!(&*s.name, "LazyCompile:~foo script.js:1");
    assert_eq!((s.vaddr, s.size), (0x7f00_0000_1000, 0x40));
    assert_eq!(
        &*syms.lookup_perf_map(4242, 0x7f00_0000_2000).unwrap().name,
        "jit::stub()"
    );
    assert!(syms.lookup_perf_map(4242, 0x7f00_0000_1040).is_none());
    assert!(syms.lookup_perf_map(4243, 0x7f00_0000_1010).is_none());
}

#[test]
fn fallback_names() {
    assert_eq!(
        fallback_name("/usr/lib/libfoo.so.1", 0x1234),
        "libfoo.so.1+0x1234"
    );
    assert_eq!(fallback_name("[vdso]", 0x10), "[vdso]+0x10");
    assert_eq!(fallback_name("/tmp/x (deleted)", 0), "x+0x0");
}

#[test]
fn threads_share_one_store_and_cache() {
    let store = Arc::new(ImageStore::new(search(None, true)));
    let syms = Arc::new(SymbolCache::new());
    let addr = dynsym_addr(LIBC, "malloc").unwrap();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (store, syms) = (store.clone(), syms.clone());
            std::thread::spawn(move || {
                let img = store.get(&mf(LIBC, None)).unwrap();
                (img.clone(), syms.lookup(&img, addr).unwrap().name)
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for (img, name) in &results {
        assert!(Arc::ptr_eq(img, &results[0].0));
        assert_eq!(&**name, "malloc");
    }
}

#[test]
fn vmlinux_is_preferred_unless_its_build_id_differs() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("trace");
    let kdir = trace.join("kcore_dir");
    std::fs::create_dir_all(&kdir).unwrap();
    std::fs::copy("/bin/true", kdir.join("kcore")).unwrap();
    let vmlinux = tmp.path().join("vmlinux");
    std::fs::copy(LIBC, &vmlinux).unwrap();
    let s = SearchPath {
        vmlinux: Some(vmlinux.clone()),
        ..search(Some(&trace), false)
    };
    let store = ImageStore::new(s.clone());
    assert_eq!(store.kernel().unwrap().path, vmlinux);
    // vmlinux has its own .symtab/.dynsym: no kallsyms needed.
    assert!(SymbolCache::new().symbol_count(&store.kernel().unwrap()) > 1000);

    // The recording names another kernel: vmlinux is rejected, kcore used.
    let store = ImageStore::new(s.clone());
    let kid = build_id_of("/bin/true");
    store.add_known_build_ids([("[kernel.kallsyms]".to_string(), kid.clone())]);
    assert_eq!(store.kernel().unwrap().path, kdir.join("kcore"));
    assert_eq!(store.warnings().len(), 1, "{:?}", store.warnings());

    // kallsyms from perf's build-id cache when kcore_dir has none.
    let cache = tmp.path().join("dotdebug");
    let h = hex(&kid);
    let text = *store
        .kernel()
        .unwrap()
        .segments
        .iter()
        .find(|s| s.executable)
        .unwrap();
    let cached = cache.join(".build-id").join(&h[..2]).join(&h[2..]);
    std::fs::create_dir_all(&cached).unwrap();
    std::fs::write(
        cached.join("kallsyms"),
        format!("{:016x} T start_kernel\n", text.vaddr),
    )
    .unwrap();
    let store = ImageStore::new(SearchPath {
        buildid_dir: Some(cache),
        vmlinux: None,
        ..s
    });
    store.add_known_build_ids([("[kernel.kallsyms]".to_string(), kid)]);
    let k = store.kernel().unwrap();
    assert_eq!(
        &*SymbolCache::new().lookup(&k, text.vaddr + 4).unwrap().name,
        "start_kernel"
    );
}

#[test]
fn missing_kernel_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let store = ImageStore::new(search(Some(tmp.path()), false));
    store.note_undecoded(
        &mf("[kernel.kallsyms]_text", None),
        0,
        0xffff_ffff_8100_0000,
        0xffff_ffff_8100_0010,
    );
    let m = store.missing();
    assert_eq!(m.len(), 1);
    assert!(m[0].reason.contains("kcore"), "{}", m[0].reason);
    assert!(m[0].reason.contains("--vmlinux"), "{}", m[0].reason);
}

/// A `--vmlinux` or a kcore that is not ELF is named with the reason and
/// what to give instead ("found, but the decoder could not use it" named
/// neither).
#[test]
fn a_kernel_file_that_is_not_elf_is_named_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let text = tmp.path().join("passwd");
    std::fs::write(&text, "root:x:0:0:root:/root:/bin/bash\n").unwrap();
    let kcore_dir = tmp.path().join("kcore_dir");
    std::fs::create_dir(&kcore_dir).unwrap();
    std::fs::write(kcore_dir.join("kcore"), "garbage\n").unwrap();
    for (vmlinux, named) in [
        (Some(text.clone()), text.clone()),
        (None, kcore_dir.join("kcore")),
    ] {
        let store = ImageStore::new(SearchPath {
            vmlinux,
            ..search(Some(tmp.path()), false)
        });
        store.note_undecoded(
            &mf("[kernel.kallsyms]_text", None),
            0,
            0xffff_ffff_8100_0000,
            0xffff_ffff_8100_0010,
        );
        let m = store.missing();
        assert_eq!(m.len(), 1);
        let want = format!(
            "{} was found for it, but it is not an ELF file, so the decoder cannot place its \
             code: give --vmlinux the traced kernel's uncompressed vmlinux, or --kcore the \
             folder with the kcore and kallsyms that `perf record --kcore` copied",
            named.display()
        );
        assert_eq!(m[0].reason, want);
    }
}

/// A program without a build-id, traced, then rebuilt in place (the same
/// inode, as ext4 gives a file rewritten where it is) and dated back
/// before the recording, so that neither the inode nor the time gives it
/// away: the decode errors its changed code causes come with a warning
/// naming it as the likely cause (issue 44, item 11: "say which file was
/// probably changed"). The same program unchanged decodes with neither.
#[test]
fn a_rebuilt_program_without_build_id_is_named_by_the_errors_it_causes() {
    if !have("gcc") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // _start calls f three times (a loop: a TNT each round), then exits.
    let src = |pad: usize| {
        format!(
            r#"
__attribute__((noinline)) int f(int x) {{ {} return x * 3 + 1; }}
void _start(void) {{
    volatile int s = 0;
    for (int i = 0; i < 3; i++) s += f(i);
    __asm__ volatile("mov $60, %eax; xor %edi, %edi; syscall");
}}
"#,
            "__asm__ volatile(\"nop\");".repeat(pad)
        )
    };
    let flags = [
        "-O1",
        "-static",
        "-nostdlib",
        "-fno-pie",
        "-no-pie",
        "-Wl,--build-id=none",
    ];
    let prog = compile(dir.path(), "prog", &src(0), false, &flags);
    let trace = dir.path().join("trace");
    let mut o = ptsim::sim::Options::new(&prog, Vec::new(), &trace);
    o.env = Some(Vec::new());
    ptsim::sim::run(o).unwrap();
    let decode = || {
        let out = Command::new(env!("CARGO_BIN_EXE_ptdec"))
            .arg(&trace)
            .arg("-o")
            .arg(dir.path().join("out.ftf"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = decode();
    assert!(!err.contains("errors  "), "{err}");
    assert!(!err.contains("taken from this machine"), "{err}");

    // Rebuilt with f's code moved, written over the same inode, dated an
    // hour before the recording.
    let rebuilt = compile(dir.path(), "prog2", &src(37), false, &flags);
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&prog).unwrap());
    std::fs::write(&prog, std::fs::read(&rebuilt).unwrap()).unwrap();
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&prog).unwrap()),
        ino
    );
    run(Command::new("touch").args(["-d", "1 hour ago"]).arg(&prog));
    let err = decode();
    assert!(
        err.contains("errors  "),
        "the changed code gave no error: {err}"
    );
    let want = format!(
        "while code came from {}, taken from this machine with no build-id recorded to check it \
         by",
        prog.display()
    );
    assert!(err.contains(&want), "{want:?} not in {err}");
}

/// A --sysroot copy that cannot be read (here: a cut ELF) is not skipped
/// silently for the file on this machine, which may differ: said.
#[test]
fn an_unreadable_sysroot_copy_is_said_before_another_file_is_used() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let copy = place(&root, "/bin/true", Path::new("/bin/true"));
    let whole = std::fs::read(&copy).unwrap();
    std::fs::write(&copy, &whole[..200]).unwrap();
    let mut s = search(None, true);
    s.sysroots = vec![root];
    let store = ImageStore::new(s);
    let img = store.get(&mf("/bin/true", None)).unwrap();
    assert_eq!(img.path, Path::new("/bin/true"));
    let w = store.warnings();
    assert!(
        w.iter().any(|w| w.starts_with("/bin/true: ")
            && w.contains(&*copy.to_string_lossy())
            && w.ends_with("; using /bin/true instead")),
        "{w:#?}"
    );
}
