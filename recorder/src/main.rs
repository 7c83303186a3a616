//! `ptrec` command line: argument parsing and error printing only.
fn main() {
    eprintln!("ptrec: not implemented yet");
    std::process::exit(2);
}
