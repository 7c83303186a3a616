//! What the trace holds besides control flow, turned into [`Mark`]s: the
//! decoding stage (`decode`) hands each libipt event here and pushes the
//! mark it gets back on the thread's ops; the call-stack stage passes marks
//! by and `emit` writes them as instants and counters. Small pure functions,
//! so the decode loop needs only a hook line or two.
//!
//! Names and fields follow perf's `--itrace=w` (ptwrite), `p` (power: cbr,
//! mwait, pwre, pwrx, exstop) and `I` (event trace) samples.

use ipt::EventKind;

use crate::ops::{Mark, MarkClass};

/// The bus clock CBR ratios multiply: 100 MHz on every CPU with Intel PT.
pub const BUS_MHZ: u64 = 100;

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
        _ => None,
    }
}

/// The classes of marks to keep, from `--no-ptwrite`, `--no-power`,
/// `--no-events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkFilter {
    pub ptwrite: bool,
    pub power: bool,
    pub events: bool,
}

impl Default for MarkFilter {
    fn default() -> Self {
        MarkFilter {
            ptwrite: true,
            power: true,
            events: true,
        }
    }
}

impl MarkFilter {
    /// Whether `mark` is written.
    pub fn keeps(&self, mark: &Mark) -> bool {
        match mark.class() {
            MarkClass::Ptwrite => self.ptwrite,
            MarkClass::Power => self.power,
            MarkClass::Event => self.events,
        }
    }
}

/// The MHz a core:bus ratio stands for.
pub fn cbr_mhz(ratio: u16) -> u64 {
    u64::from(ratio) * BUS_MHZ
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptwrite_power_and_event_trace_become_marks() {
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
        assert_eq!(mark_of(&EventKind::Stop, None), None);
        assert_eq!(mark_of(&EventKind::Paging { cr3: 0 }, None), None);
    }

    #[test]
    fn filter_by_class() {
        let f = MarkFilter {
            power: false,
            ..MarkFilter::default()
        };
        assert!(!f.keeps(&Mark::Cbr {
            ratio: 1,
            cpu: None
        }));
        assert!(f.keeps(&Mark::Ptwrite {
            ip: None,
            payload: 0,
            emulated: false
        }));
        assert_eq!(cbr_mhz(47), 4700);
    }
}
