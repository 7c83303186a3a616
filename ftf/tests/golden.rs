//! Golden text dump: a small trace written with every record kind and
//! argument type, dumped by the reader and compared with a committed file.
//! `UPDATE_EXPECT=1 cargo test -p ftf --test golden` rewrites it (the one
//! variable for every golden file of the workspace; see the README).

use expect_test::expect_file;
use ftf::{Arg, ArgValue, Writer};

fn small_trace() -> Vec<u8> {
    let mut w = Writer::with_provider(Vec::new(), 2_400_000_000, 1, "ptdec").unwrap();
    w.process(4242, "prog").unwrap();
    let main = w.thread(4242, 4242, "prog").unwrap();
    let worker = w.thread(4242, 4243, "worker ünïcode").unwrap();
    w.duration_begin(main, "call", "main", 100, &[]).unwrap();
    w.duration_complete(
        main,
        "call",
        "compute",
        110,
        190,
        &[
            Arg::new("insns", 1234u64),
            Arg::new("cycles", 2000u64),
            Arg::new("address", ArgValue::Pointer(0x40_1126)),
            Arg::new("module", "/usr/bin/prog"),
        ],
    )
    .unwrap();
    w.instant(
        worker,
        "gap",
        "overflow",
        150,
        &[
            Arg::new("null", ArgValue::Null),
            Arg::new("i32", -1i32),
            Arg::new("u32", 7u32),
            Arg::new("i64", -5_000_000_000i64),
            Arg::new("f64", 0.25f64),
            Arg::new("koid", ArgValue::Koid(4243)),
            Arg::new("bool", false),
        ],
    )
    .unwrap();
    w.counter(worker, "stats", "ipc", 160, 1, &[Arg::new("value", 1.5f64)])
        .unwrap();
    w.duration_end(main, "call", "main", 200, &[]).unwrap();
    w.finish().unwrap()
}

#[test]
fn small_trace_dump_matches_golden() {
    let dump = ftf::read::dump(&small_trace()).unwrap();
    // An absolute path: expect-test would otherwise guess the workspace root.
    const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/small.txt");
    expect_file![GOLDEN].assert_eq(&dump);
}
