//! Builds the vendored libipt (`vendor/libipt`, see its VENDORED.md) as a
//! static library with the `cc` crate. libipt's CMake writes `intel-pt.h`
//! from `intel-pt.h.in` (the version numbers); we do the same substitution
//! into OUT_DIR, so the source tree is never written to.

use std::path::{Path, PathBuf};

/// libipt's version, as its top-level CMakeLists.txt sets it.
const VERSION: (u32, u32, u32) = (2, 2, 0);

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest.join("../vendor/libipt");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    let src = root.join("libipt/src");

    let header_in = root.join("libipt/include/intel-pt.h.in");
    let text = std::fs::read_to_string(&header_in)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", header_in.display()));
    let text = text
        .replace("${PT_VERSION_MAJOR}", &VERSION.0.to_string())
        .replace("${PT_VERSION_MINOR}", &VERSION.1.to_string())
        .replace("${PT_VERSION_PATCH}", &VERSION.2.to_string());
    let inc = out.join("include");
    std::fs::create_dir_all(&inc).expect("create OUT_DIR/include");
    std::fs::write(inc.join("intel-pt.h"), text).expect("write intel-pt.h");

    // The file list of libipt/CMakeLists.txt (LIBIPT_FILES and the POSIX
    // section files).
    let files = [
        "pt_error.c",
        "pt_packet_decoder.c",
        "pt_event_decoder.c",
        "pt_query_decoder.c",
        "pt_encoder.c",
        "pt_sync.c",
        "pt_version.c",
        "pt_last_ip.c",
        "pt_tnt_cache.c",
        "pt_ild.c",
        "pt_image.c",
        "pt_image_section_cache.c",
        "pt_retstack.c",
        "pt_insn_decoder.c",
        "pt_time.c",
        "pt_asid.c",
        "pt_event_queue.c",
        "pt_packet.c",
        "pt_config.c",
        "pt_insn.c",
        "pt_block_decoder.c",
        "pt_block_cache.c",
        "pt_msec_cache.c",
        "pt_section.c",
        "pt_section_file.c",
        "posix/pt_section_posix.c",
    ];
    let mut b = cc::Build::new();
    b.include(&inc)
        .include(root.join("include"))
        .include(root.join("include/posix"))
        .include(root.join("libipt/internal/include"))
        .include(root.join("libipt/internal/include/posix"))
        .define("PT_VERSION_MAJOR", &*VERSION.0.to_string())
        .define("PT_VERSION_MINOR", &*VERSION.1.to_string())
        .define("PT_VERSION_PATCH", &*VERSION.2.to_string())
        .define("PT_VERSION_BUILD", "0")
        .define("PT_VERSION_EXT", "\"\"")
        .define("FEATURE_THREADS", None)
        .define("_POSIX_C_SOURCE", "200809L")
        .define("pt_export", "")
        .flag_if_supported("-std=c11")
        .flag_if_supported("-fvisibility=hidden")
        .warnings(false);
    for f in files {
        let p = src.join(f);
        rerun(&p);
        b.file(p);
    }
    rerun(&header_in);
    b.compile("ipt");
    println!("cargo:rustc-link-lib=pthread");
}

fn rerun(p: &Path) {
    println!("cargo:rerun-if-changed={}", p.display());
}
