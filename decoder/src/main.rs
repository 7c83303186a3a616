//! `ptdec` command line: argument parsing and error printing only.
fn main() {
    eprintln!("ptdec: not implemented yet");
    std::process::exit(2);
}
