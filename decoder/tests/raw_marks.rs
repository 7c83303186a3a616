//! What a trace holds besides calls, end to end through `ptdec raw`: packets
//! no execution here can produce (PTWRITE, MWAIT, PWRE/PWRX, EXSTOP, event
//! trace CFE/EVD) built with libipt's encoder, decoded by the `ptdec`
//! binary, the FTF read back by our reader (and by the `fxt` Python reader
//! and Perfetto's importer when they are installed): every packet is the
//! instant or counter value docs/decoding.md promises, with perf's field values,
//! and `--no-ptwrite`, `--no-power`, `--no-events` leave each kind out.

use std::path::Path;
use std::process::Command;

use ftf::read::{EventKind, RecordKind, Value};
use ipt::{ffi, Compression, Encoder, Packet};

/// The code the enabled stretch runs: `ptwrite rax; nop; ret`.
const CODE: [u8; 7] = [0xf3, 0x48, 0x0f, 0xae, 0xe0, 0x90, 0xc3];
const BASE: u64 = 0x40_1000;

/// Tracing off (no TIP.PGE, as with `branch=0`): a CBR in PSB+, then one
/// packet of each kind, each after its own TSC (MWAIT, PWRE and EXSTOP
/// together, as the hardware writes them); then tracing enabled at `BASE`,
/// a PTWRITE bound to the `ptwrite` instruction by its FUP, and tracing
/// disabled at the `ret`.
fn trace() -> Vec<u8> {
    let mut enc = Encoder::new().unwrap();
    let mut pt = Vec::new();
    let mut tsc = 1_000_000u64;
    let mut put = |pt: &mut Vec<u8>, p: Packet| pt.extend_from_slice(enc.encode(p).unwrap());
    put(&mut pt, Packet::Psb);
    put(&mut pt, Packet::Tsc(tsc));
    put(&mut pt, Packet::Cbr(24));
    put(&mut pt, Packet::Psbend);
    let body = [
        vec![Packet::Ptw {
            payload: 0x1122_3344_5566_7788,
            plc: 1,
            fup: false,
        }],
        vec![Packet::Ptw {
            payload: 0xdead_beef,
            plc: 0,
            fup: false,
        }],
        vec![Packet::Cbr(8)],
        // An MWAIT: the hardware writes MWAIT, PWRE and EXSTOP together.
        vec![
            Packet::Mwait {
                hints: 0x20,
                ext: 1,
            },
            Packet::Pwre {
                state: 2,
                sub_state: 1,
                hw: false,
            },
            Packet::Exstop { fup: false },
        ],
        vec![Packet::Pwrx {
            last: 2,
            deepest: 6,
            interrupt: true,
            store: false,
            autonomous: false,
        }],
        vec![
            Packet::Evd {
                kind: ffi::pt_evd_cr2,
                payload: 0x7fff_1000,
            },
            Packet::Cfe {
                kind: ffi::pt_cfe_intr,
                vector: 14,
                ip: false,
            },
        ],
        vec![Packet::Cfe {
            kind: ffi::pt_cfe_iret,
            vector: 0,
            ip: false,
        }],
        vec![
            Packet::Evd {
                kind: ffi::pt_evd_vmxr,
                payload: 48,
            },
            Packet::Evd {
                kind: ffi::pt_evd_vmxq,
                payload: 0x181,
            },
            Packet::Cfe {
                kind: ffi::pt_cfe_vmexit,
                vector: 0,
                ip: false,
            },
        ],
        vec![Packet::Cfe {
            kind: ffi::pt_cfe_vmentry,
            vector: 0,
            ip: false,
        }],
    ];
    for group in body {
        tsc += 1000;
        put(&mut pt, Packet::Tsc(tsc));
        for p in group {
            put(&mut pt, p);
        }
    }
    tsc += 1000;
    put(&mut pt, Packet::Tsc(tsc));
    // MODE.Exec before the TIP.PGE, as hardware sends it (without one the
    // code is in no mode: a decode error of its own).
    put(
        &mut pt,
        Packet::ModeExec {
            csl: true,
            csd: false,
        },
    );
    put(&mut pt, Packet::TipPge(BASE, Compression::Sext48));
    put(
        &mut pt,
        Packet::Ptw {
            payload: 42,
            plc: 1,
            fup: true,
        },
    );
    put(&mut pt, Packet::Fup(BASE, Compression::Sext48));
    tsc += 1000;
    put(&mut pt, Packet::Tsc(tsc));
    put(&mut pt, Packet::TipPgd(0, Compression::Suppressed));
    pt
}

fn ptdec(dir: &Path, extra: &[&str]) -> Vec<u8> {
    let (pt, code, out) = (dir.join("t.pt"), dir.join("code.bin"), dir.join("o.ftf"));
    std::fs::write(&pt, trace()).unwrap();
    std::fs::write(&code, CODE).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_ptdec"))
        .arg("raw")
        .arg("--pt")
        .arg(&pt)
        .arg("--raw")
        .arg(format!("{}:{BASE:#x}", code.display()))
        .args(["--cpu", "none", "-o"])
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    std::fs::read(&out).unwrap()
}

/// (category, name, args as `name=value`) of every instant and counter.
fn marks(bytes: &[u8]) -> Vec<(String, String, Vec<String>)> {
    let mut v = Vec::new();
    for r in ftf::read::parse(bytes).unwrap() {
        let RecordKind::Event(e) = r.kind else {
            continue;
        };
        if !matches!(e.kind, EventKind::Instant | EventKind::Counter { .. }) {
            continue;
        }
        let args = e
            .args
            .iter()
            .map(|a| match &a.value {
                v @ (Value::U32(_) | Value::U64(_)) => {
                    format!("{}={:#x}", a.name, v.as_u64().unwrap_or_default())
                }
                Value::Pointer(x) => format!("{}=ptr:{x:#x}", a.name),
                Value::Bool(b) => format!("{}={b}", a.name),
                other => format!("{}={other:?}", a.name),
            })
            .collect();
        v.push((e.category.to_string(), e.name.to_string(), args));
    }
    v
}

fn m(cat: &str, name: &str, args: &[&str]) -> (String, String, Vec<String>) {
    (
        cat.into(),
        name.into(),
        args.iter().map(|s| s.to_string()).collect(),
    )
}

#[test]
fn every_kind_is_an_instant_or_counter_with_perfs_fields() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = ptdec(dir.path(), &["--time-axis", "ns"]);
    let got = marks(&bytes);
    let mut want = vec![
        m("power", "cpu frequency", &["MHz=0x960"]),
        m("ptwrite", "ptwrite", &["payload=0x1122334455667788"]),
        m("ptwrite", "ptwrite", &["payload=0xdeadbeef"]),
        m("power", "cpu frequency", &["MHz=0x320"]),
    ];
    // The packets are MWAIT, PWRE, EXSTOP. libipt 2.2 reports the PWRE
    // after the EXSTOP it waits for; 2.1.2 reports it first.
    let mwait = m("power", "mwait", &["hints=0x20", "extensions=0x1"]);
    let pwre = m("power", "pwre", &["cstate=0x2", "sub_cstate=0x1", "hw=0x0"]);
    let exstop = m("power", "exstop", &[]);
    if ipt::version() >= (2, 2, 0) {
        want.extend([mwait, exstop, pwre]);
    } else {
        want.extend([pwre, mwait, exstop]);
    }
    want.extend([
        m(
            "power",
            "pwrx",
            &["last_cstate=0x2", "deepest_cstate=0x6", "wake_reason=0x1"],
        ),
        m("event", "interrupt", &["vector=0xe", "cr2=0x7fff1000"]),
        m("event", "iret", &[]),
        m("event", "vmexit", &["reason=0x30", "qualification=0x181"]),
        m("event", "vmentry", &[]),
        m(
            "ptwrite",
            "ptwrite",
            &["payload=0x2a", &format!("ip=ptr:{BASE:#x}")],
        ),
    ]);
    assert_eq!(got, want, "{}", ftf::read::dump(&bytes).unwrap());
    // Each at its own time: instants are ordered by their TSC.
    let times: Vec<u64> = ftf::read::parse(&bytes)
        .unwrap()
        .into_iter()
        .filter_map(|r| match r.kind {
            RecordKind::Event(e) if e.category != "call" && e.category != "untraced" => Some(e.ts),
            _ => None,
        })
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert!(times.first() < times.last(), "{times:?}");

    let path = dir.path().join("o.ftf");
    if let Some(python) = pt_tests::python_with_fxt(module_path!()) {
        let script = "import sys\nfrom fxt.reader import parse_records\nr = parse_records(open(sys.argv[1], 'rb'))\nassert not r.had_unexpected_eof\nfor p in r.records_by_provider.values():\n    for e in p.records:\n        if type(e).__name__ in ('InstantEventRecord', 'CounterEventRecord'):\n            print(type(e).__name__, e.category, e.name, sorted(e.args.items()))\n";
        let o = Command::new(python)
            .args(["-c", script])
            .arg(&path)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8_lossy(&o.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), want.len(), "{text}");
        assert!(
            lines[0].starts_with("CounterEventRecord power cpu frequency [('MHz', 2400)]"),
            "{text}"
        );
        assert!(
            lines[8].contains("interrupt") && lines[8].contains("('vector', 14)"),
            "{text}"
        );
    }
    if let Some(tp) = pt_tests::trace_processor(module_path!()) {
        let o = Command::new(tp)
            .arg("-Q")
            .arg("select (select count(*) from slice where category in ('ptwrite','power','event')) || ',' || (select count(*) from counter) || ',' || (select count(*) from stats where severity in ('error','data_loss') and value > 0) as x")
            .arg(&path)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("\"11,2,0\""), "Perfetto: {text}");
    }
}

#[test]
fn options_leave_each_kind_out() {
    let dir = tempfile::tempdir().unwrap();
    let cats = |extra: &[&str]| -> Vec<String> {
        let mut c: Vec<String> = marks(&ptdec(dir.path(), extra))
            .into_iter()
            .map(|m| m.0)
            .collect();
        c.dedup();
        c.sort();
        c.dedup();
        c
    };
    assert_eq!(cats(&[]), ["event", "power", "ptwrite"]);
    assert_eq!(cats(&["--no-ptwrite"]), ["event", "power"]);
    assert_eq!(cats(&["--no-power"]), ["event", "ptwrite"]);
    assert_eq!(cats(&["--no-events"]), ["power", "ptwrite"]);
    assert!(cats(&["--no-events", "--no-power", "--no-ptwrite"]).is_empty());
}
