fn main() {
    let args: Vec<String> = std::env::args().collect();
    let b = bindgen::Builder::default()
        .header(&args[1])
        .allowlist_function("pt_.*")
        .allowlist_type("pt_.*")
        .allowlist_var("pt_.*|LIBIPT_.*")
        .prepend_enum_name(false)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .derive_default(true)
        .derive_debug(true)
        .layout_tests(true)
        .generate_comments(false)
        .generate()
        .expect("bindgen");
    b.write_to_file(&args[2]).unwrap();
}
