//! Records synthesized from `/proc` and `/sys` for what existed before the
//! recording began, as perf record writes them
//! (`tools/perf/util/synthetic-events.c`):
//!
//! * `-k`: the kernel image as one MMAP named `[kernel.kallsyms]_text`
//!   (perf's `perf_event__synthesize_kernel_mmap`: pid -1, misc KERNEL,
//!   start `_text`, pgoff the address of the reference symbol `_text`, which
//!   is how perf relocates kallsyms and vmlinux addresses later), and one
//!   MMAP per loaded module (`perf_event__synthesize_modules`: pid -1, misc
//!   KERNEL, pgoff 0, start from `/sys/module/NAME/sections/.text` as perf's
//!   `arch__fix_module_text_start`, else `/proc/modules`, and the module's
//!   `.ko` path when `modules.dep` names it, else `[NAME]`).
//! * `-a`: every process in `/proc` (`perf_event__synthesize_threads`),
//!   through [`crate::record::synthesize_existing`].

use std::io;

use sideband::record::{misc, Event, Mmap, Record, SampleId};

use crate::errors::Error;

/// The kernel image's extent from kallsyms text: `(_text, end)`, end being
/// `_edata`, else `_etext` (perf's `machine__get_running_kernel_start`).
/// `None` when `_text`/`_stext` is missing or reads as 0 (kptr_restrict).
pub fn kernel_extent(kallsyms: &str) -> Option<(u64, u64)> {
    let sym = |name: &str| {
        kallsyms.lines().find_map(|l| {
            let mut it = l.split_whitespace();
            let addr = it.next()?;
            let _kind = it.next()?;
            (it.next()? == name && it.next().is_none())
                .then(|| u64::from_str_radix(addr, 16).ok())?
        })
    };
    let text = sym("_text").or_else(|| sym("_stext")).filter(|&a| a != 0)?;
    let end = sym("_edata")
        .or_else(|| sym("_etext"))
        .filter(|&e| e > text)
        .unwrap_or(u64::MAX);
    Some((text, end))
}

/// Reads `/proc/kallsyms` and checks that it shows kernel addresses:
/// the error names the file and what to do.
pub fn read_kallsyms() -> Result<String, Error> {
    let text = std::fs::read_to_string("/proc/kallsyms").map_err(|source| Error::Capture {
        what: "/proc/kallsyms (-k needs the kernel's symbols; run as root)".into(),
        source,
    })?;
    if kernel_extent(&text).is_none() {
        return Err(Error::Capture {
            what: "/proc/kallsyms".into(),
            source: io::Error::new(
                io::ErrorKind::PermissionDenied,
                "kernel addresses read as 0 or _text is missing: -k needs them; run as root, \
                 or lower /proc/sys/kernel/kptr_restrict (0 shows them to everyone)",
            ),
        });
    }
    Ok(text)
}

/// A loaded module: name, load address of its text, size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    pub name: String,
    pub start: u64,
    pub size: u64,
}

/// Parses `/proc/modules` (`name size refcount deps state address ...`).
/// Modules whose address reads as 0 (kptr_restrict) are skipped.
pub fn parse_modules(text: &str) -> Vec<Module> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let name = f.first()?.to_string();
            let size = f.get(1)?.parse().ok()?;
            let addr = f.get(5)?.trim_start_matches("0x");
            let start = u64::from_str_radix(addr, 16).ok().filter(|&a| a != 0)?;
            Some(Module { name, start, size })
        })
        .collect()
}

/// The `.ko` path of each module `modules.dep` names (key: the module name
/// with `-` read as `_`, as the kernel names modules).
fn module_paths(release: &str) -> std::collections::HashMap<String, String> {
    let base = format!("/lib/modules/{release}");
    let Ok(dep) = std::fs::read_to_string(format!("{base}/modules.dep")) else {
        return Default::default();
    };
    dep.lines()
        .filter_map(|l| {
            let path = l.split(':').next()?;
            let file = path.rsplit('/').next()?;
            let name = file.split(".ko").next()?.replace('-', "_");
            let full = if path.starts_with('/') {
                path.to_string()
            } else {
                format!("{base}/{path}")
            };
            Some((name, full))
        })
        .collect()
}

fn kernel_event(
    addr: u64,
    len: u64,
    pgoff: u64,
    filename: String,
    sid: &SampleId,
) -> Event<'static> {
    Event {
        misc: misc::KERNEL,
        record: Record::Mmap(Mmap {
            pid: u32::MAX,
            tid: 0,
            addr,
            len,
            pgoff,
            file_id: None,
            prot: None,
            flags: None,
            filename,
        }),
        sample_id: *sid,
    }
}

/// The kernel MMAP and the module MMAPs from `kallsyms` text, `/proc/modules`
/// text and a lookup of each module's `.text` address.
pub fn kernel_events_from(
    kallsyms: &str,
    modules: &str,
    text_of: impl Fn(&str) -> Option<u64>,
    path_of: impl Fn(&str) -> Option<String>,
    sideband_id: Option<u64>,
) -> Vec<Event<'static>> {
    let sid = SampleId {
        pid: Some(u32::MAX),
        tid: Some(u32::MAX),
        time: Some(0),
        cpu: Some(0),
        identifier: sideband_id,
        ..Default::default()
    };
    let mut out = Vec::new();
    if let Some((text, end)) = kernel_extent(kallsyms) {
        out.push(kernel_event(
            text,
            end - text,
            text,
            "[kernel.kallsyms]_text".into(),
            &sid,
        ));
    }
    for m in parse_modules(modules) {
        let start = text_of(&m.name).unwrap_or(m.start);
        // The size counts from the module's base; keep the end where it was.
        let len = (m.start + m.size).saturating_sub(start).max(1);
        let name = path_of(&m.name).unwrap_or_else(|| format!("[{}]", m.name));
        out.push(kernel_event(start, len, 0, name, &sid));
    }
    out
}

/// The kernel and module MMAPs of this machine. `/proc/modules` is absent on
/// kernels without module support: then there are none.
pub fn kernel_events(kallsyms: &str, sideband_id: Option<u64>) -> Vec<Event<'static>> {
    let modules = std::fs::read_to_string("/proc/modules").unwrap_or_default();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let paths = module_paths(release.trim());
    kernel_events_from(
        kallsyms,
        &modules,
        |name| {
            let s = std::fs::read_to_string(format!("/sys/module/{name}/sections/.text")).ok()?;
            u64::from_str_radix(s.trim().trim_start_matches("0x"), 16)
                .ok()
                .filter(|&a| a != 0)
        },
        |name| paths.get(name).cloned(),
        sideband_id,
    )
}

/// Every process in `/proc` now (for `-a`).
pub fn all_pids() -> Vec<i32> {
    let mut pids: Vec<i32> = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    pids.sort_unstable();
    pids
}

#[cfg(test)]
mod tests {
    use super::*;

    const KALLSYMS: &str = "ffffffff81000000 T srso_alias_untrain_ret\n\
        ffffffff81000000 T _stext\n\
        ffffffff81000000 T _text\n\
        ffffffff822090c8 T _etext\n\
        ffffffff82c00000 D _edata\n\
        ffffffffc0002000 t foo_init\t[foo]\n";

    #[test]
    fn kernel_extent_from_kallsyms() {
        assert_eq!(
            kernel_extent(KALLSYMS),
            Some((0xffffffff81000000, 0xffffffff82c00000))
        );
        let hidden: String = KALLSYMS
            .lines()
            .map(|l| format!("0000000000000000{}\n", &l[16..]))
            .collect();
        assert_eq!(kernel_extent(&hidden), None, "kptr_restrict zeros");
        assert_eq!(kernel_extent("ffffffff81000000 T _text_x\n"), None);
    }

    #[test]
    fn kernel_and_module_mmaps() {
        let modules = "foo 16384 0 - Live 0xffffffffc0000000\n\
                       bar_baz 8192 1 foo, Live 0xffffffffc0010000 (O)\n\
                       hidden 8192 0 - Live 0x0000000000000000\n";
        let evs = kernel_events_from(
            KALLSYMS,
            modules,
            |n| (n == "foo").then_some(0xffffffffc0001000),
            |n| (n == "foo").then(|| "/lib/modules/x/foo.ko".to_string()),
            Some(7),
        );
        let mmaps: Vec<&Mmap> = evs
            .iter()
            .map(|e| {
                assert_eq!(e.misc, misc::KERNEL);
                assert_eq!(e.sample_id.identifier, Some(7));
                match &e.record {
                    Record::Mmap(m) => m,
                    r => panic!("{r:?}"),
                }
            })
            .collect();
        assert_eq!(mmaps.len(), 3);
        let k = mmaps[0];
        assert_eq!(k.filename, "[kernel.kallsyms]_text");
        assert_eq!(
            (k.pid, k.addr, k.pgoff),
            (u32::MAX, 0xffffffff81000000, 0xffffffff81000000)
        );
        assert_eq!(k.len, 0x1c00000);
        assert!(k.file_id.is_none(), "an MMAP, not MMAP2, as perf writes it");
        assert_eq!(mmaps[1].filename, "/lib/modules/x/foo.ko");
        assert_eq!(
            (mmaps[1].addr, mmaps[1].len, mmaps[1].pgoff),
            (0xffffffffc0001000, 0x3000, 0)
        );
        assert_eq!(mmaps[2].filename, "[bar_baz]");
        assert_eq!((mmaps[2].addr, mmaps[2].len), (0xffffffffc0010000, 8192));
    }

    #[test]
    fn this_machines_processes() {
        let pids = all_pids();
        assert!(pids.contains(&1));
        assert!(pids.contains(&(std::process::id() as i32)));
    }
}
