//! What the flow decoder's tests (and ptdec's differential tests, with
//! the `test-helpers` feature) build traces from: packets laid out as
//! the Intel SDM gives them, and code written to a file for the section
//! cache and the flow decoder's image to map.

use std::path::PathBuf;

pub const PSB: [u8; 16] = [
    0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
];
pub const PSBEND: [u8; 2] = [0x02, 0x23];
/// MODE.Exec: 64-bit code.
pub const MODE64: [u8; 2] = [0x99, 0x01];
/// TIP.PGD with the IP suppressed.
pub const TIP_PGD: [u8; 1] = [0x01];

/// `code` as a file named for `tag` (libipt reads sections from files),
/// written once per process: rewriting it under a test that has it
/// mapped would fault.
pub fn code_file(tag: &str, code: &[u8]) -> PathBuf {
    static WRITTEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let p = std::env::temp_dir().join(format!("ptdec-flow-{tag}-{}.bin", std::process::id()));
    let mut written = WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
    if !written.iter().any(|t| t == tag) {
        std::fs::write(&p, code).expect("write the test code");
        written.push(tag.to_string());
    }
    p
}

/// The flow decoder over `trace`, with blocks ending at calls and jumps
/// and `code` (file `tag`) at `base` as its image.
pub fn fast_decoder<'a>(
    tag: &str,
    code: &[u8],
    base: u64,
    trace: &'a [u8],
) -> super::FastDecoder<'a> {
    let bytes = std::fs::read(code_file(tag, code)).expect("read the test code");
    let section = super::code::Section::new(1, base, std::rc::Rc::new(bytes), 0, code.len());
    let cfg = pttypes::Settings {
        end_on_call: true,
        end_on_jump: true,
        ..Default::default()
    };
    let mut dec = super::FastDecoder::new(&cfg, trace).expect("a supported config");
    dec.set_image(super::code::Image::new(vec![section], false));
    dec
}
