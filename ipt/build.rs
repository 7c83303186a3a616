//! Finds libipt, builds or links it, and generates the FFI declarations
//! from the header of the libipt being built (bindgen, into OUT_DIR; nothing
//! generated is committed). libipt is other people's code: it never lives in
//! this repository, it comes from one of, in this order,
//!
//! 1. `LIBIPT_SRC=DIR`, any libipt source tree ≥ 2.1.2 (e.g. a 2.2 checkout),
//!    compiled here as a static library;
//! 2. the copy `bash scripts/setup` fetched from Debian's source package and
//!    checked (`.cache/libipt-2.1.2/` in the workspace), compiled the same way;
//! 3. a system libipt ≥ 2.1.2, found with pkg-config (`libipt.pc`) or as
//!    `intel-pt.h` in the compiler's include path, linked dynamically.
//!
//! None of these: the build stops with a message naming the three ways.
//! The version found is passed on as `cfg(libipt_2_2)` (the API parts 2.2
//! added) and `LIBIPT_BUILT_WITH` (for `--version`).
//!
//! Compiling a source tree follows its own `libipt/CMakeLists.txt`: the file
//! lists are read from it, and `intel-pt.h` is written from `intel-pt.h.in`
//! into OUT_DIR with the version numbers, as its CMake does, so the source
//! tree is never written to.

use std::path::{Path, PathBuf};

/// The oldest libipt the wrapper is written for.
const MIN_VERSION: (u32, u32, u32) = (2, 1, 2);
/// What `scripts/setup` fetches (Debian's `intel-processor-trace` 2.1.2-1).
const SETUP_DIR: &str = ".cache/libipt-2.1.2";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(libipt_2_2)");
    println!("cargo:rerun-if-env-changed=LIBIPT_SRC");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    let setup_copy = manifest.join("..").join(SETUP_DIR);
    let setup_copy = setup_copy.canonicalize().unwrap_or(setup_copy);
    println!("cargo:rerun-if-changed={}", setup_copy.display());

    let found = match std::env::var_os("LIBIPT_SRC") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            source_tree(&dir)
                .unwrap_or_else(|e| fail(&format!("LIBIPT_SRC={}: {e}", dir.display())))
        }
        None if setup_copy.join("libipt/include/intel-pt.h.in").is_file() => {
            source_tree(&setup_copy)
                .unwrap_or_else(|e| fail(&format!("{}: {e}", setup_copy.display())))
        }
        None => match system() {
            Ok(found) => found,
            Err(why) => fail(&why),
        },
    };
    if found.version < MIN_VERSION {
        fail(&format!(
            "{} is libipt {}, older than {}",
            found.origin,
            dotted(found.version),
            dotted(MIN_VERSION)
        ));
    }
    let header = match &found.tree {
        Some(tree) => build_static(tree, found.version, &out),
        None => found.header.clone(),
    };
    bindings(&header, &found.include_dirs, &out.join("ffi.rs"));
    if found.version >= (2, 2, 0) {
        println!("cargo:rustc-cfg=libipt_2_2");
    }
    println!(
        "cargo:rustc-env=LIBIPT_BUILT_WITH=libipt {} ({})",
        dotted(found.version),
        found.origin
    );
}

/// A libipt to build against.
struct Found {
    version: (u32, u32, u32),
    /// Where it came from, for messages and `--version`.
    origin: String,
    /// A source tree to compile; `None` for a system library (already linked).
    tree: Option<PathBuf>,
    /// The system library's `intel-pt.h`.
    header: PathBuf,
    include_dirs: Vec<PathBuf>,
}

fn dotted(v: (u32, u32, u32)) -> String {
    format!("{}.{}.{}", v.0, v.1, v.2)
}

fn fail(why: &str) -> ! {
    eprintln!(
        "\nerror: no usable libipt: {why}\n\n\
         ptdec needs Intel's libipt ≥ {min}. Give it one of three ways:\n  \
         1. `bash scripts/setup` (fetches libipt {min} from Debian's source package\n     \
         `intel-processor-trace`, checks its sha256, unpacks it into {SETUP_DIR});\n  \
         2. LIBIPT_SRC=/path/to/libipt, a libipt source tree ≥ {min} (e.g. a 2.2 checkout);\n  \
         3. a system libipt ≥ {min} with its header (libipt.pc for pkg-config, or\n     \
         intel-pt.h in the compiler's include path).\n",
        min = dotted(MIN_VERSION)
    );
    std::process::exit(1);
}

/// A libipt source tree: its version from the top-level CMakeLists.txt.
fn source_tree(dir: &Path) -> Result<Found, String> {
    let cmake = dir.join("CMakeLists.txt");
    let text = std::fs::read_to_string(&cmake).map_err(|e| {
        format!(
            "cannot read {}: {e} (not a libipt source tree?)",
            cmake.display()
        )
    })?;
    let get = |name: &str| -> Result<u32, String> {
        cmake_set(&text, name)
            .first()
            .and_then(|v| v.trim_matches('"').parse().ok())
            .ok_or_else(|| format!("{} sets no {name}", cmake.display()))
    };
    let version = (
        get("PT_VERSION_MAJOR")?,
        get("PT_VERSION_MINOR")?,
        get("PT_VERSION_PATCH")?,
    );
    println!("cargo:rerun-if-changed={}", cmake.display());
    Ok(Found {
        version,
        origin: format!("built from {}", dir.display()),
        tree: Some(dir.to_path_buf()),
        header: PathBuf::new(),
        include_dirs: Vec::new(),
    })
}

/// The words of `set(NAME word word ...)` in a CMakeLists.txt (the first
/// such `set`), with `${OTHER}` references to earlier sets expanded.
fn cmake_set(text: &str, name: &str) -> Vec<String> {
    let Some(start) = text.find(&format!("set({name}")) else {
        return Vec::new();
    };
    let body = &text[start + 4 + name.len()..];
    let body = &body[..body.find(')').unwrap_or(body.len())];
    let mut words = Vec::new();
    for w in body.split_whitespace() {
        if w == "CACHE" {
            break;
        }
        match w.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
            Some(other) => words.extend(cmake_set(text, other)),
            None => words.push(w.to_string()),
        }
    }
    words
}

/// Compiles a libipt source tree into a static library (as its CMake does
/// on a POSIX host) and returns the configured `intel-pt.h`.
fn build_static(tree: &Path, version: (u32, u32, u32), out: &Path) -> PathBuf {
    let header_in = tree.join("libipt/include/intel-pt.h.in");
    let text = std::fs::read_to_string(&header_in)
        .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", header_in.display())));
    let text = text
        .replace("${PT_VERSION_MAJOR}", &version.0.to_string())
        .replace("${PT_VERSION_MINOR}", &version.1.to_string())
        .replace("${PT_VERSION_PATCH}", &version.2.to_string());
    let inc = out.join("include");
    std::fs::create_dir_all(&inc).expect("create OUT_DIR/include");
    let header = inc.join("intel-pt.h");
    std::fs::write(&header, text).expect("write intel-pt.h");

    let lists = tree.join("libipt/CMakeLists.txt");
    let cmake = std::fs::read_to_string(&lists)
        .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", lists.display())));
    let mut files = cmake_set(&cmake, "LIBIPT_FILES");
    files.extend(cmake_set(&cmake, "LIBIPT_SECTION_FILES"));
    files.push("src/posix/pt_section_posix.c".into());
    files.sort();
    files.dedup();
    if files.len() < 10 {
        fail(&format!("{} lists no LIBIPT_FILES", lists.display()));
    }
    let mut b = cc::Build::new();
    b.include(&inc)
        .include(tree.join("include"))
        .include(tree.join("include/posix"))
        .include(tree.join("libipt/internal/include"))
        .include(tree.join("libipt/internal/include/posix"))
        .define("PT_VERSION_MAJOR", &*version.0.to_string())
        .define("PT_VERSION_MINOR", &*version.1.to_string())
        .define("PT_VERSION_PATCH", &*version.2.to_string())
        .define("PT_VERSION_BUILD", "0")
        .define("PT_VERSION_EXT", "\"\"")
        .define("FEATURE_THREADS", None)
        .define("_POSIX_C_SOURCE", "200809L")
        .define("pt_export", "")
        .flag_if_supported("-std=c11")
        .flag_if_supported("-fvisibility=hidden")
        .warnings(false);
    for f in &files {
        let p = tree.join("libipt").join(f);
        println!("cargo:rerun-if-changed={}", p.display());
        b.file(p);
    }
    println!("cargo:rerun-if-changed={}", header_in.display());
    b.compile("ipt");
    println!("cargo:rustc-link-lib=pthread");
    header
}

/// A system libipt: pkg-config's `libipt`, else `intel-pt.h` where the C
/// compiler looks by default; linked dynamically as `-lipt`.
fn system() -> Result<Found, String> {
    let lib = pkg_config::Config::new()
        .atleast_version(&dotted(MIN_VERSION))
        .probe("libipt");
    let (include_dirs, origin) = match lib {
        Ok(lib) => (
            lib.include_paths,
            format!("system library {}, pkg-config", lib.version),
        ),
        Err(pkg) => {
            let dirs = ["/usr/local/include", "/usr/include"];
            let Some(dir) = dirs
                .iter()
                .find(|d| Path::new(d).join("intel-pt.h").is_file())
            else {
                return Err(format!(
                    "LIBIPT_SRC is not set, {SETUP_DIR} is not there, and no system libipt was found \
                     (pkg-config: {}; no intel-pt.h in {})",
                    pkg.to_string().lines().next().unwrap_or(""),
                    dirs.join(" or ")
                ));
            };
            println!("cargo:rustc-link-lib=dylib=ipt");
            (
                vec![PathBuf::from(dir)],
                format!("system library, {dir}/intel-pt.h"),
            )
        }
    };
    let header = include_dirs
        .iter()
        .map(|d| d.join("intel-pt.h"))
        .find(|h| h.is_file())
        .ok_or_else(|| format!("{origin}: no intel-pt.h in {include_dirs:?}"))?;
    let text = std::fs::read_to_string(&header)
        .map_err(|e| format!("cannot read {}: {e}", header.display()))?;
    let define = |name: &str| -> Result<u32, String> {
        text.lines()
            .find_map(|l| {
                let mut w = l.split_whitespace();
                (w.next() == Some("#define") && w.next() == Some(name))
                    .then(|| w.next()?.parse().ok())
                    .flatten()
            })
            .ok_or_else(|| format!("{} defines no {name}", header.display()))
    };
    let version = (
        define("LIBIPT_VERSION_MAJOR")?,
        define("LIBIPT_VERSION_MINOR")?,
        define("LIBIPT_VERSION_PATCH")?,
    );
    println!("cargo:rerun-if-changed={}", header.display());
    Ok(Found {
        version,
        origin,
        tree: None,
        header,
        include_dirs,
    })
}

/// The Rust declarations of `header`'s C API (functions, types and
/// constants named `pt_*`/`LIBIPT_*`), with bindgen's layout tests, which
/// check every struct's size and field offsets against the C compiler's.
fn bindings(header: &Path, include_dirs: &[PathBuf], out: &Path) {
    let mut b = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .allowlist_function("pt_.*")
        .allowlist_type("pt_.*")
        .allowlist_var("pt_.*|LIBIPT_.*")
        .prepend_enum_name(false)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .derive_default(true)
        .derive_debug(true)
        .layout_tests(true)
        .generate_comments(false)
        // Not bindgen's rerun lines for every header it reads: one of them
        // is the intel-pt.h this script writes into OUT_DIR, newer than the
        // run that wrote it, so cargo would rerun the script and rebuild
        // every crate above it on every build (each `cargo fuzz run` took
        // two full rebuilds). The rerun lines printed above cover the
        // header's source (intel-pt.h.in, or the system's intel-pt.h).
        .parse_callbacks(Box::new(
            bindgen::CargoCallbacks::new().rerun_on_header_files(false),
        ));
    for d in include_dirs {
        b = b.clang_arg(format!("-I{}", d.display()));
    }
    // bindgen panics where it cannot load libclang: say what to install.
    let generated = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || b.generate())).unwrap_or_else(|_| {
        fail("bindgen could not load libclang (apt-get install libclang-dev, or `bash scripts/setup`)")
    });
    let generated = generated.unwrap_or_else(|e| {
        fail(&format!(
            "bindgen could not read {}: {e} (bindgen needs libclang: apt-get install libclang-dev, \
             or `bash scripts/setup`)",
            header.display()
        ))
    });
    generated
        .write_to_file(out)
        .unwrap_or_else(|e| panic!("write {}: {e}", out.display()));
}
