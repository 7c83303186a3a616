//! `--repeat LOC=K`: finds one complete iteration of a loop of the real
//! program in a thread's event stream, so that the simulator can encode it
//! `K` more times at encoder speed (see sim/README.md, "Repeating a loop").
//!
//! A thread *arrives* at LOC when an instruction's `next_ip` is LOC. An
//! iteration runs from one arrival to the first later arrival with the same
//! stack pointer, provided the thread never returned or unwound past the
//! frame that was running LOC's caller at the first one: the stack pointer
//! never rose above that frame's return-address slot (found on a shadow stack
//! of the slots every call pushed). Such an iteration leaves the call stack
//! as it found it, so its events can be replayed with shifted clocks.

use std::collections::HashMap;
use std::str::FromStr;

use crate::model::{Event, Executed, InsnClass};

/// One `--repeat LOC=K`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepeatSpec {
    /// `SYMBOL`, `FILE:SYMBOL` or `0xADDR`.
    pub loc: String,
    /// Extra iterations.
    pub count: u64,
}

impl FromStr for RepeatSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (loc, k) = s.rsplit_once('=').ok_or_else(|| {
            format!("expected LOC=K (e.g. run_loop=1000 or 0x401136=1000), got {s:?}")
        })?;
        let count: u64 = k
            .trim()
            .parse()
            .map_err(|_| format!("{k:?} in {s:?} is not a repeat count"))?;
        if count == 0 {
            return Err(format!("{s:?}: the repeat count must be at least 1"));
        }
        if loc.is_empty() || loc.ends_with(':') {
            return Err(format!("{s:?}: LOC must be SYMBOL, FILE:SYMBOL or 0xADDR"));
        }
        if let Some(h) = loc.strip_prefix("0x") {
            u64::from_str_radix(h, 16).map_err(|_| format!("{loc:?} is not a hex address"))?;
        }
        Ok(RepeatSpec {
            loc: loc.to_string(),
            count,
        })
    }
}

/// Resolves `spec` in process `pid` (its current mappings): `0xADDR` as is,
/// symbols through the ELF files mapped (PIE and shared libraries work).
pub fn resolve(pid: u32, loc: &str) -> Option<u64> {
    match loc.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => ptrec::target::resolve_trigger(pid as i32, loc).ok(),
    }
}

/// Events of one thread kept in memory while an arrival is open; an
/// iteration longer than this cannot be repeated.
pub const MAX_ITERATION_EVENTS: usize = 4 << 20;

#[derive(Debug, Clone, Copy)]
struct Arrival {
    sp: u64,
    /// The caller's return-address slot: the arrival is void once the stack
    /// pointer rises above it.
    bound: u64,
    /// Absolute number of the arriving event in the thread's stream.
    at: u64,
    /// Truth lines of the thread after the arriving event.
    lines: u64,
}

#[derive(Debug, Default)]
struct Watch {
    done: bool,
    arrivals: Vec<Arrival>,
}

#[derive(Debug, Default)]
struct ThreadRep {
    pid: u32,
    /// Return-address slots of the open calls, innermost last.
    shadow: Vec<u64>,
    /// The thread's events from the oldest open arrival on.
    log: Vec<Event>,
    /// Absolute number of `log[0]`.
    log_base: u64,
    /// Absolute number of the next event.
    seen: u64,
    watches: Vec<Watch>,
}

/// The innermost return-address slot on `shadow` above stack pointer `sp`
/// (`u64::MAX` when none): an arrival at `sp` is void once the stack rises
/// above it.
fn bound_above(shadow: &[u64], sp: u64) -> u64 {
    shadow
        .iter()
        .rev()
        .copied()
        .find(|&s| s > sp)
        .unwrap_or(u64::MAX)
}

impl ThreadRep {
    /// Follows the call stack over `x` (whose `next_sp` is known): pops the
    /// slots it returned past, pushes the one a taken call wrote, and drops
    /// the arrivals it unwound past.
    fn follow_stack(&mut self, x: &Executed) {
        let sp = x.next_sp;
        while self.shadow.last().is_some_and(|&s| s < sp) {
            self.shadow.pop();
        }
        let fall = x.ip + u64::from(x.len);
        if matches!(x.class, InsnClass::DirectCall | InsnClass::IndirectCall) && x.next_ip != fall {
            self.shadow.push(sp);
        }
        let mut dropped = false;
        for w in &mut self.watches {
            let before = w.arrivals.len();
            w.arrivals.retain(|a| sp <= a.bound);
            dropped |= w.arrivals.len() != before;
        }
        if dropped {
            self.trim();
        }
    }

    /// The log grew too long to keep: forgets the oldest arrival.
    fn forget_oldest(&mut self) {
        let oldest = self
            .watches
            .iter()
            .flat_map(|w| w.arrivals.iter().map(|a| a.at))
            .min();
        for w in &mut self.watches {
            w.arrivals.retain(|a| Some(a.at) != oldest);
        }
        self.trim();
    }

    fn open(&self) -> bool {
        self.watches.iter().any(|w| !w.arrivals.is_empty())
    }

    fn trim(&mut self) {
        let oldest = self
            .watches
            .iter()
            .flat_map(|w| w.arrivals.iter().map(|a| a.at))
            .min();
        match oldest {
            None => {
                self.log.clear();
                self.log_base = self.seen;
            }
            Some(at) if at > self.log_base => {
                let n = ((at - self.log_base) as usize).min(self.log.len());
                self.log.drain(..n);
                self.log_base += n as u64;
            }
            Some(_) => {}
        }
    }
}

/// A complete iteration, ready to be replayed.
#[derive(Debug)]
pub struct Found {
    /// Index of the `--repeat` option.
    pub spec: usize,
    /// The thread.
    pub tid: u32,
    /// Its process.
    pub pid: u32,
    /// The iteration's events (those of this thread after the first arrival,
    /// up to and including the second).
    pub events: Vec<Event>,
    /// Clock of the first arrival's event.
    pub from_cycles: u64,
    /// Truth lines of the thread that the iteration wrote.
    pub lines: u64,
    /// Stack pointer at LOC.
    pub sp: u64,
    /// The closing arrival, to start over from when the iteration is refused.
    again: Arrival,
}

impl Found {
    /// Cycles one iteration takes.
    pub fn cycles(&self) -> u64 {
        self.events
            .last()
            .map_or(0, |e| super::cycles_of(e) - self.from_cycles)
    }

    /// Instructions in one iteration.
    pub fn insns(&self) -> u64 {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Insn(_)))
            .count() as u64
    }
}

/// Watches every thread for the iterations of the `--repeat` locations.
#[derive(Debug, Default)]
pub struct Repeater {
    specs: Vec<RepeatSpec>,
    /// (pid, spec) -> address, once resolved.
    addrs: HashMap<(u32, usize), u64>,
    threads: HashMap<u32, ThreadRep>,
    /// Per spec: the threads it was performed in.
    pub performed: Vec<Vec<u32>>,
    /// Per spec: why iterations were refused.
    pub refused: Vec<Vec<String>>,
}

impl Repeater {
    /// Watches for `specs`.
    pub fn new(specs: Vec<RepeatSpec>) -> Self {
        let n = specs.len();
        Repeater {
            specs,
            addrs: HashMap::new(),
            threads: HashMap::new(),
            performed: vec![Vec::new(); n],
            refused: vec![Vec::new(); n],
        }
    }

    /// The options.
    pub fn specs(&self) -> &[RepeatSpec] {
        &self.specs
    }

    /// Whether anything is watched.
    pub fn active(&self) -> bool {
        !self.specs.is_empty()
    }

    /// Whether a location is still unresolved in process `pid`.
    pub fn unresolved(&self, pid: u32) -> bool {
        (0..self.specs.len()).any(|i| !self.addrs.contains_key(&(pid, i)))
    }

    /// Process `pid` exec'ed a new image: its locations are resolved anew.
    pub fn exec(&mut self, pid: u32) {
        self.addrs.retain(|&(p, _), _| p != pid);
    }

    /// Tries to resolve the unresolved locations in process `pid` (at its
    /// exec, and after it mapped new code).
    pub fn resolve(&mut self, pid: u32) {
        for (i, s) in self.specs.iter().enumerate() {
            if let std::collections::hash_map::Entry::Vacant(e) = self.addrs.entry((pid, i)) {
                if let Some(a) = resolve(pid, &s.loc) {
                    e.insert(a);
                }
            }
        }
    }

    /// Whether process `pid` has had a thread besides `tid`: then a try
    /// refused in `tid` may be its last (another thread's repeat forgets
    /// its open arrivals), and `--repeat` copies `tid`'s first iteration
    /// whatever it holds ([`vdso_loop`]).
    pub fn multithreaded(&self, pid: u32, tid: u32) -> bool {
        self.threads.iter().any(|(&t, r)| r.pid == pid && t != tid)
    }

    /// Whether `spec` was resolved in any process.
    pub fn was_resolved(&self, spec: usize) -> bool {
        self.addrs.keys().any(|&(_, s)| s == spec)
    }

    /// Follows one engine event (clock already in simulated time);
    /// `truth_lines` is the thread's truth line count after it. Returns a
    /// complete iteration when this event closes one.
    pub fn observe(&mut self, ev: &Event, truth_lines: u64) -> Option<Found> {
        match *ev {
            Event::ThreadBegin { pid, tid, .. } => {
                self.begin_thread(pid, tid);
                None
            }
            Event::ThreadEnd { tid, .. } => {
                if let Some(t) = self.threads.get_mut(&tid) {
                    for w in &mut t.watches {
                        w.arrivals.clear();
                    }
                    t.log.clear();
                }
                None
            }
            Event::Async { tid, .. } => {
                let t = self.threads.get_mut(&tid)?;
                t.seen += 1;
                if t.open() {
                    t.log.push(ev.clone());
                }
                None
            }
            Event::Insn(x) => self.insn(ev, &x, truth_lines),
        }
    }

    /// Starts (or, after an exec, restarts) watching thread `tid` of
    /// process `pid`.
    fn begin_thread(&mut self, pid: u32, tid: u32) {
        // After an exec the thread starts over in a new image, but
        // a LOC it repeated stays done: once per LOC per thread.
        let done: Vec<bool> = match self.threads.get(&tid) {
            Some(t) => t.watches.iter().map(|w| w.done).collect(),
            None => vec![false; self.specs.len()],
        };
        self.threads.insert(
            tid,
            ThreadRep {
                pid,
                watches: done
                    .into_iter()
                    .map(|done| Watch {
                        done,
                        arrivals: Vec::new(),
                    })
                    .collect(),
                ..ThreadRep::default()
            },
        );
    }

    /// Follows one retired instruction `x` (the event `ev`) of its thread:
    /// its call stack, its arrivals at the locations and its log. Returns
    /// the iteration it closes, if any.
    fn insn(&mut self, ev: &Event, x: &Executed, truth_lines: u64) -> Option<Found> {
        let t = self.threads.get_mut(&x.tid)?;
        let abs = t.seen;
        t.seen += 1;
        let sp = x.next_sp;
        if sp != 0 {
            t.follow_stack(x);
        }
        let mut found = None;
        let mut arrived = false;
        for (i, w) in t.watches.iter_mut().enumerate() {
            if w.done || sp == 0 || self.addrs.get(&(t.pid, i)) != Some(&x.next_ip) {
                continue;
            }
            if let Some(a) = w.arrivals.iter().find(|a| a.sp == sp) {
                if found.is_none() {
                    found = Some((i, *a));
                }
                continue;
            }
            w.arrivals.push(Arrival {
                sp,
                bound: bound_above(&t.shadow, sp),
                at: abs,
                lines: truth_lines,
            });
            arrived = true;
        }
        if t.open() || arrived {
            if t.log.is_empty() {
                t.log_base = abs;
            }
            t.log.push(ev.clone());
        }
        if t.log.len() > MAX_ITERATION_EVENTS {
            t.forget_oldest();
        }
        let (spec, a) = found?;
        let start = (a.at + 1 - t.log_base) as usize;
        let from_cycles = super::cycles_of(&t.log[start - 1]);
        Some(Found {
            spec,
            tid: x.tid,
            pid: t.pid,
            events: t.log[start..].to_vec(),
            from_cycles,
            lines: truth_lines - a.lines,
            sp,
            again: Arrival {
                sp,
                bound: bound_above(&t.shadow, sp),
                at: abs,
                lines: truth_lines,
            },
        })
    }

    /// The iteration was replayed (or refused, `why`): the spec is done for
    /// that thread (when replayed), and every open arrival of every thread is
    /// forgotten, since its events no longer form a plain iteration.
    pub fn settle(&mut self, f: &Found, why: Option<String>) {
        let performed = why.is_none();
        match why {
            None => self.performed[f.spec].push(f.tid),
            Some(w) => self.refused[f.spec].push(w),
        }
        for (&tid, t) in self.threads.iter_mut() {
            for w in &mut t.watches {
                w.arrivals.clear();
            }
            if performed || tid != f.tid {
                t.trim();
            }
        }
        if let Some(t) = self.threads.get_mut(&f.tid) {
            if let Some(w) = t.watches.get_mut(f.spec) {
                if performed {
                    w.done = true;
                } else {
                    // Refused: the closing arrival opens the next try.
                    w.arrivals.push(f.again);
                }
            }
            t.trim();
        }
    }
}

/// How many iterations of a thread `--repeat` refuses for a loop in the
/// vDSO ([`vdso_loop`]) before it takes one anyway: one. A loop may have
/// only two iterations (the bench's `interp` runs its program three times
/// a thread), and a refused last one is a repeat lost; a second round
/// with a vDSO loop is rare (a few percent), as only a thread's first
/// reads retry often.
pub const VDSO_LOOP_TRIES: u32 = 1;

/// Where `events` (an iteration) ran a loop in the vDSO at `vdso` (its
/// address range): the first conditional branch taken backwards there.
/// The vDSO's clock reads loop on timing alone (a seqlock read retried
/// because the kernel updated the time meanwhile: 28 more instructions in
/// this machine's `clock_gettime`; nanoseconds carried into seconds one at
/// a time), so a round with such a loop is not the canonical one that
/// `--repeat` copies (sim/README.md, "Repeating a loop").
pub fn vdso_loop(events: &[Event], vdso: (u64, u64)) -> Option<u64> {
    events.iter().find_map(|e| match e {
        Event::Insn(x)
            if x.class == InsnClass::CondBranch
                && x.taken
                && x.next_ip <= x.ip
                && (vdso.0..vdso.1).contains(&x.ip) =>
        {
            Some(x.ip)
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Executed;

    /// A clock read in the vDSO that retried (its seqlock's branch taken
    /// back) or carried seconds is found; one straight through, and loops
    /// outside the vDSO, are not.
    #[test]
    fn a_loop_in_the_vdso_is_found_and_only_there() {
        use InsnClass::*;
        let vdso = (0x7000, 0x9000);
        let straight = [
            insn(0x1000, 5, DirectCall, 0x7b10, 0x100, 1),
            insn(0x7b10, 2, CondBranch, 0x7b12, 0x0f8, 2),
            insn(0x7b12, 1, Return, 0x1005, 0x100, 3),
            // A loop of the program's own.
            insn(0x1005, 2, CondBranch, 0x1000, 0x100, 4),
        ];
        assert_eq!(vdso_loop(&straight, vdso), None);
        let retried = [
            insn(0x1000, 5, DirectCall, 0x7b10, 0x100, 1),
            insn(0x7b10, 2, Other, 0x7b46, 0x0f8, 2),
            insn(0x7bac, 2, CondBranch, 0x7b46, 0x0f8, 3),
            insn(0x7bac, 2, CondBranch, 0x7bae, 0x0f8, 4),
            insn(0x7bae, 1, Return, 0x1005, 0x100, 5),
        ];
        assert_eq!(vdso_loop(&retried, vdso), Some(0x7bac));
        // Not taken: no loop.
        assert_eq!(vdso_loop(&retried[3..], vdso), None);
    }

    fn insn(ip: u64, len: u8, class: InsnClass, next_ip: u64, sp: u64, c: u64) -> Event {
        Event::Insn(Executed {
            tid: 1,
            ip,
            len,
            class,
            next_ip,
            next_sp: sp,
            taken: class == InsnClass::CondBranch && next_ip != ip + u64::from(len),
            cycles: c,
        })
    }

    fn rep() -> Repeater {
        let mut r = Repeater::new(vec!["0x2000=5".parse().unwrap()]);
        r.resolve(1);
        r.observe(
            &Event::ThreadBegin {
                pid: 1,
                tid: 1,
                ip: 0x1000,
                cycles: 0,
            },
            1,
        );
        r
    }

    #[test]
    fn parses_specs() {
        let s: RepeatSpec = "libc.so.6:getpid=3".parse().unwrap();
        assert_eq!((s.loc.as_str(), s.count), ("libc.so.6:getpid", 3));
        assert!("main".parse::<RepeatSpec>().is_err());
        assert!("main=0".parse::<RepeatSpec>().is_err());
        assert!("0xzz=3".parse::<RepeatSpec>().is_err());
        assert!("=3".parse::<RepeatSpec>().is_err());
    }

    /// main at 0x1000 calls f (0x2000) twice in a loop: the second call at
    /// the same stack pointer closes an iteration.
    #[test]
    fn a_loop_calling_loc_twice_is_one_iteration() {
        let mut r = rep();
        use InsnClass::*;
        assert!(r
            .observe(&insn(0x1000, 5, DirectCall, 0x2000, 0x7f00, 1), 2)
            .is_none());
        assert!(r
            .observe(&insn(0x2000, 1, Return, 0x1005, 0x7f08, 2), 3)
            .is_none());
        assert!(r
            .observe(&insn(0x1005, 2, CondBranch, 0x1000, 0x7f08, 3), 3)
            .is_none());
        let f = r
            .observe(&insn(0x1000, 5, DirectCall, 0x2000, 0x7f00, 4), 4)
            .expect("an iteration");
        assert_eq!((f.insns(), f.cycles(), f.lines, f.sp), (3, 3, 2, 0x7f00));
    }

    /// A recursive arrival at another stack pointer is no iteration, and an
    /// arrival is void once its caller's frame returned.
    #[test]
    fn recursion_and_returns_past_the_caller_do_not_count() {
        let mut r = rep();
        use InsnClass::*;
        // main (slot 0x7f10 from its own caller) calls g, g calls f.
        r.observe(&insn(0x900, 5, DirectCall, 0x1000, 0x7f10, 1), 2);
        r.observe(&insn(0x1000, 5, DirectCall, 0x2000, 0x7f00, 2), 3);
        // f recurses into f at a lower sp: a new arrival, not an iteration.
        assert!(r
            .observe(&insn(0x2000, 5, DirectCall, 0x2000, 0x7ef0, 3), 4)
            .is_none());
        // both return, then g returns past its frame (sp above 0x7f10).
        r.observe(&insn(0x2005, 1, Return, 0x2005, 0x7ef8, 4), 5);
        r.observe(&insn(0x2005, 1, Return, 0x1005, 0x7f08, 5), 6);
        r.observe(&insn(0x1005, 1, Return, 0x905, 0x7f18, 6), 7);
        // main calls g again, which calls f at the old sp: not an iteration
        // (the frame that called f returned in between).
        r.observe(&insn(0x905, 5, DirectCall, 0x1000, 0x7f10, 7), 8);
        assert!(r
            .observe(&insn(0x1000, 5, DirectCall, 0x2000, 0x7f00, 8), 9)
            .is_none());
    }
}
