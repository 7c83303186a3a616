//! What the trace holds besides control flow, turned into [`Mark`]s: the
//! decoding stage (`decode`) hands each libipt event here and pushes the
//! mark it gets back on the thread's ops; the call-stack stage passes marks
//! by and `emit` writes them as instants and counters. Small pure functions,
//! so the decode loop needs only a hook line or two.
//!
//! Names and fields follow perf's `--itrace=w` (ptwrite), `p` (power: cbr,
//! mwait, pwre, pwrx, exstop) and `I` (event trace) samples; a TRIG
//! (trigger tracing) is an event mark `trig` with its trigger number.
//!
//! perf's emulated ptwrite (a function that spells the payload in 64
//! conditional branches to the next instruction) is decoded by giving
//! libipt an image in which those branches are rewritten so that the
//! not-taken ones end a block ([`EmuPtwrite`]); instruction counts and the
//! trace bits consumed stay the same.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use ipt::EventKind;

use crate::model::ops::Mark;

/// The mark an event stands for, or `None` for events that are control
/// flow or timing (handled by the decode loop itself). `cpu` is the buffer's
/// CPU for a per-CPU trace.
pub fn mark_of(kind: &EventKind, cpu: Option<u32>) -> Option<Mark> {
    let power = |name: &'static str, ip: Option<u64>, args: Vec<(&'static str, u64)>| {
        Some(Mark::Power { name, ip, args })
    };
    let event = |name: &'static str, ip: Option<u64>, args: Vec<(&'static str, u64)>| {
        Some(Mark::Event { name, ip, args })
    };
    match *kind {
        EventKind::Ptwrite { ip, payload, .. } => Some(Mark::Ptwrite {
            ip,
            payload,
            emulated: false,
        }),
        EventKind::Cbr { ratio } => Some(Mark::Cbr { ratio, cpu }),
        EventKind::Mwait { ip, hints, ext } => power(
            "mwait",
            ip,
            vec![("hints", u64::from(hints)), ("extensions", u64::from(ext))],
        ),
        EventKind::Pwre {
            state,
            sub_state,
            hw,
        } => power(
            "pwre",
            None,
            vec![
                ("cstate", u64::from(state)),
                ("sub_cstate", u64::from(sub_state)),
                ("hw", u64::from(hw)),
            ],
        ),
        EventKind::Pwrx {
            last,
            deepest,
            interrupt,
            store,
            autonomous,
        } => power(
            "pwrx",
            None,
            vec![
                ("last_cstate", u64::from(last)),
                ("deepest_cstate", u64::from(deepest)),
                // perf's wake reason bits: 1 interrupt, 2 store, 4 autonomous.
                (
                    "wake_reason",
                    u64::from(interrupt) | u64::from(store) << 1 | u64::from(autonomous) << 2,
                ),
            ],
        ),
        EventKind::Exstop { ip } => power("exstop", ip, Vec::new()),
        EventKind::Interrupt { vector, cr2, ip } => {
            let mut args = vec![("vector", u64::from(vector))];
            args.extend(cr2.map(|c| ("cr2", c)));
            event("interrupt", ip, args)
        }
        EventKind::Iret { ip } => event("iret", ip, Vec::new()),
        EventKind::Smi { ip } => event("smi", ip, Vec::new()),
        EventKind::Rsm { ip } => event("rsm", ip, Vec::new()),
        EventKind::Sipi { vector } => event("sipi", None, vec![("vector", u64::from(vector))]),
        EventKind::Init { ip } => event("init", ip, Vec::new()),
        EventKind::VmEntry { ip } => event("vmentry", ip, Vec::new()),
        EventKind::VmExit {
            vector,
            reason,
            qualification,
            ip,
        } => {
            let mut args = Vec::new();
            args.extend(vector.map(|v| ("vector", u64::from(v))));
            args.extend(reason.map(|r| ("reason", r)));
            args.extend(qualification.map(|q| ("qualification", q)));
            event("vmexit", ip, args)
        }
        EventKind::Shutdown { ip } => event("shutdown", ip, Vec::new()),
        EventKind::Uintr { vector, ip } => event("uintr", ip, vec![("vector", u64::from(vector))]),
        EventKind::Uiret { ip } => event("uiret", ip, Vec::new()),
        EventKind::Trig { number, mult, ip } => event(
            "trig",
            ip,
            vec![("trigger", u64::from(number)), ("mult", u64::from(mult))],
        ),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// perf's emulated ptwrite

/// The marker perf recognizes after the function's first instruction, a
/// two-byte `jmp` over it: `ud2` and "perf,ptwrite  " (`man perf-intel-pt`,
/// "EMULATED PTWRITE").
const EMU_MAGIC: &[u8; 16] = b"\x0f\x0bperf,ptwrite  ";
/// `jmp +16` over the marker, then `mov %rdi,%rax`.
const EMU_HEAD: [u8; 2] = [0xeb, 0x10];
const EMU_MOV: [u8; 3] = [0x48, 0x89, 0xf8];
/// One payload bit: `shl %rax; jc .+2` (to the next instruction).
const EMU_BIT: [u8; 5] = [0x48, 0xd1, 0xe0, 0x72, 0x00];
/// The same five bytes as ptdec's image has them: `jc .+4; jmp .+3; nop`.
/// Taken, the `jc` lands on the `nop`; not taken, the `jmp` skips it: both
/// reach the next bit with two instructions and one TNT bit, as the
/// original, but a not-taken bit now ends a block (libipt's blocks end at
/// jumps for ptdec), which tells the bits apart. libipt's blocks do not say
/// whether a conditional branch inside them was taken, and a `jc` to the
/// next instruction goes there either way.
const EMU_PATCHED_BIT: [u8; 5] = [0x72, 0x02, 0xeb, 0x01, 0x90];
const EMU_BITS: usize = 64;
/// Bytes from the function's entry to its first bit.
const EMU_BITS_AT: u64 = (EMU_HEAD.len() + EMU_MAGIC.len() + EMU_MOV.len()) as u64;
/// The whole function: head, marker, mov, 64 bits, `ret`.
const EMU_LEN: usize = EMU_BITS_AT as usize + EMU_BITS * EMU_BIT.len() + 1;

/// Offsets in `code` of the emulated-ptwrite functions it holds, each
/// checked byte for byte (head, marker, 64 bit pairs, `ret`).
pub fn find_emulated_ptwrite(code: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    for i in memchr::memmem::find_iter(code, EMU_MAGIC) {
        let Some(entry) = i.checked_sub(EMU_HEAD.len()) else {
            continue;
        };
        let Some(f) = code.get(entry..entry + EMU_LEN) else {
            continue;
        };
        let bits = &f[EMU_BITS_AT as usize..EMU_LEN - 1];
        if f[..2] == EMU_HEAD
            && f[EMU_HEAD.len() + EMU_MAGIC.len()..EMU_BITS_AT as usize] == EMU_MOV
            && bits.chunks(EMU_BIT.len()).all(|c| c == EMU_BIT)
            && f[EMU_LEN - 1] == 0xc3
        {
            out.push(entry);
        }
    }
    out
}

/// The bits as ptdec's image has them (see [`EMU_PATCHED_BIT`]).
pub fn emulated_ptwrite_patch() -> Vec<u8> {
    EMU_PATCHED_BIT.repeat(EMU_BITS)
}

/// Sites found per file section, shared by the workers (a file is read once).
type SiteCache = std::sync::Mutex<HashMap<(String, u64, u64), Arc<Vec<u64>>>>;
static SITES: std::sync::OnceLock<SiteCache> = std::sync::OnceLock::new();

/// Entries (file offsets) of emulated-ptwrite functions in `size` bytes at
/// `offset` of `path`; none when the file cannot be read.
fn sites_in_file(path: &str, offset: u64, size: u64) -> Arc<Vec<u64>> {
    let cache = SITES.get_or_init(Default::default);
    let key = (path.to_string(), offset, size);
    if let Some(s) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return s;
    }
    let read = || -> std::io::Result<Vec<u8>> {
        use std::io::{Read, Seek};
        let mut f = crate::inputs::open_regular(std::path::Path::new(path))?;
        f.seek(std::io::SeekFrom::Start(offset))?;
        let mut v = Vec::new();
        f.take(size).read_to_end(&mut v)?;
        Ok(v)
    };
    let found: Vec<u64> = read()
        .map(|code| {
            find_emulated_ptwrite(&code)
                .into_iter()
                .map(|i| offset + i as u64)
                .collect()
        })
        .unwrap_or_default();
    let found = Arc::new(found);
    if let Ok(mut c) = cache.lock() {
        c.insert(key, found.clone());
    }
    found
}

/// Sections larger than this are not searched (kernel images).
const EMU_SEARCH_MAX: u64 = 256 << 20;

/// One decode worker's view of perf's emulated ptwrite: where the
/// functions are, and the image sections that patch them (see
/// [`EMU_PATCHED_BIT`]) to be added over the sections they are in.
#[derive(Default)]
pub struct EmuPtwrite {
    /// The patched bits as a file libipt maps (kept while decoding).
    file: Option<tempfile::NamedTempFile>,
    /// Section-cache id of a file section → the patch sections over it.
    overlays: HashMap<u32, Vec<u32>>,
    /// Entry addresses of the functions.
    entries: BTreeSet<u64>,
}

/// Where one thread's decode is inside an emulated ptwrite.
#[derive(Debug, Default, Clone)]
pub struct EmuState {
    /// Entry of the function being decoded, and its bits not taken so far.
    active: Option<(u64, u64)>,
}

impl EmuPtwrite {
    /// Finds the functions in `sections` (section-cache id, path, file
    /// offset, size, load address) and adds a patch section to `cache`
    /// for each.
    pub fn new<'a>(
        cache: &ipt::SectionCache,
        sections: impl Iterator<Item = (Option<u32>, &'a str, u64, u64, u64)>,
    ) -> EmuPtwrite {
        let mut e = EmuPtwrite::default();
        for (isid, path, offset, size, vaddr) in sections {
            let Some(isid) = isid else { continue };
            if vaddr >> 63 == 1 || size > EMU_SEARCH_MAX || path.is_empty() {
                continue;
            }
            for &entry_off in sites_in_file(path, offset, size).iter() {
                if e.file.is_none() {
                    let Ok(mut f) = tempfile::NamedTempFile::new() else {
                        return e;
                    };
                    if std::io::Write::write_all(&mut f, &emulated_ptwrite_patch()).is_err() {
                        return e;
                    }
                    e.file = Some(f);
                }
                let Some(file) = &e.file else { continue };
                let entry = vaddr.wrapping_add(entry_off - offset);
                let patch = file.path().to_string_lossy();
                let len = (EMU_BITS * EMU_BIT.len()) as u64;
                if let Ok(o) = cache.add_file(&patch, 0, len, entry + EMU_BITS_AT) {
                    e.overlays.entry(isid).or_default().push(o);
                    e.entries.insert(entry);
                }
            }
        }
        e
    }

    /// Whether the images hold no emulated ptwrite function: then
    /// [`EmuPtwrite::on_block`] never marks anything.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The patch sections to add after the file sections `isids`.
    pub fn overlays(&self, isids: &[u32]) -> Vec<u32> {
        if self.overlays.is_empty() {
            return Vec::new();
        }
        isids
            .iter()
            .filter_map(|i| self.overlays.get(i))
            .flatten()
            .copied()
            .collect()
    }

    /// Follows a decoded block `[ip, end_ip]` (`end_ip`: its last
    /// instruction): the block ending at a function's entry `jmp` starts a
    /// payload, a block ending at a bit's `jmp` marks that bit not taken,
    /// the block ending at the `ret` completes the payload, anything
    /// outside the function abandons it (a gap, an interrupt).
    pub fn on_block(&self, st: &mut EmuState, ip: u64, end_ip: u64) -> Option<Mark> {
        if self.entries.is_empty() {
            return None;
        }
        if let Some((entry, zeros)) = st.active {
            let bits = entry + EMU_BITS_AT;
            let ret = bits + (EMU_BITS * EMU_BIT.len()) as u64;
            if ip < entry || end_ip > ret {
                st.active = None;
            } else if end_ip == ret {
                st.active = None;
                return Some(Mark::Ptwrite {
                    ip: Some(entry),
                    payload: !zeros,
                    emulated: true,
                });
            } else if end_ip >= bits && (end_ip - bits) % 5 == 2 {
                let i = (end_ip - bits) / 5;
                st.active = Some((entry, zeros | 1 << (63 - i)));
                return None;
            } else {
                return None;
            }
        }
        if self.entries.contains(&end_ip) {
            st.active = Some((end_ip, 0));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptwrite_power_event_trace_and_triggers_become_marks() {
        assert_eq!(
            mark_of(
                &EventKind::Ptwrite {
                    ip: Some(0x401000),
                    size: 8,
                    payload: 42
                },
                None
            ),
            Some(Mark::Ptwrite {
                ip: Some(0x401000),
                payload: 42,
                emulated: false
            })
        );
        assert_eq!(
            mark_of(&EventKind::Cbr { ratio: 47 }, Some(3)),
            Some(Mark::Cbr {
                ratio: 47,
                cpu: Some(3)
            })
        );
        let Some(Mark::Power { name, args, .. }) = mark_of(
            &EventKind::Pwrx {
                last: 1,
                deepest: 6,
                interrupt: true,
                store: false,
                autonomous: true,
            },
            None,
        ) else {
            panic!("pwrx is a power mark")
        };
        assert_eq!(name, "pwrx");
        assert!(args.contains(&("wake_reason", 5)));
        let Some(Mark::Event { name, args, ip }) = mark_of(
            &EventKind::Interrupt {
                vector: 14,
                cr2: Some(0x7000),
                ip: Some(0x401234),
            },
            None,
        ) else {
            panic!("an interrupt is an event mark")
        };
        assert_eq!((name, ip), ("interrupt", Some(0x401234)));
        assert_eq!(args, vec![("vector", 14), ("cr2", 0x7000)]);
        let Some(Mark::Event { name, args, ip }) = mark_of(
            &EventKind::Trig {
                number: 0x1a,
                mult: true,
                ip: Some(0x1003),
            },
            None,
        ) else {
            panic!("a trigger is an event mark")
        };
        assert_eq!((name, ip), ("trig", Some(0x1003)));
        assert_eq!(args, vec![("trigger", 0x1a), ("mult", 1)]);
        assert_eq!(mark_of(&EventKind::Stop, None), None);
        assert_eq!(mark_of(&EventKind::Paging { cr3: 0 }, None), None);
    }

    /// The function as perf documents it, at `entry` in a buffer.
    fn emu_function() -> Vec<u8> {
        let mut f = EMU_HEAD.to_vec();
        f.extend_from_slice(EMU_MAGIC);
        f.extend_from_slice(&EMU_MOV);
        for _ in 0..EMU_BITS {
            f.extend_from_slice(&EMU_BIT);
        }
        f.push(0xc3);
        f
    }

    #[test]
    fn emulated_ptwrite_functions_are_found_byte_for_byte() {
        let mut code = vec![0x90; 100];
        code.extend(emu_function());
        code.extend([0xcc; 10]);
        assert_eq!(find_emulated_ptwrite(&code), vec![100]);
        // A marker without the function around it is not one.
        let mut bad = code.clone();
        bad[100 + EMU_BITS_AT as usize + 7] = 0x01;
        assert!(find_emulated_ptwrite(&bad).is_empty());
        assert!(find_emulated_ptwrite(&code[..300]).is_empty());
        assert!(find_emulated_ptwrite(&EMU_MAGIC[..]).is_empty());
        assert_eq!(emulated_ptwrite_patch().len(), EMU_BITS * EMU_BIT.len());
    }

    #[test]
    fn blocks_spell_the_payload() {
        let entry = 0x1000;
        let e = EmuPtwrite {
            entries: [entry].into(),
            ..Default::default()
        };
        let bits = entry + EMU_BITS_AT;
        let ret = bits + 320;
        let mut st = EmuState::default();
        // Payload 0x5fff...ff: bits 63 and 61 are 0 (not taken: blocks end
        // at their jmp), the rest taken.
        assert_eq!(e.on_block(&mut st, 0x900, entry), None);
        assert_eq!(e.on_block(&mut st, entry + 18, bits + 2), None);
        assert_eq!(e.on_block(&mut st, bits + 5, bits + 12), None);
        assert_eq!(
            e.on_block(&mut st, bits + 15, ret),
            Some(Mark::Ptwrite {
                ip: Some(entry),
                payload: 0x5fff_ffff_ffff_ffff,
                emulated: true
            })
        );
        // Leaving the function abandons the payload.
        assert_eq!(e.on_block(&mut st, 0x900, entry), None);
        assert_eq!(e.on_block(&mut st, 0x5000, 0x5010), None);
        assert_eq!(e.on_block(&mut st, bits, ret), None);
    }
}
