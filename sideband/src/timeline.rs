//! The process timeline: sideband records replayed, in time order, into what
//! the decoder asks while it walks a trace: which image is mapped at an
//! address in a process at a time, which thread ran on a cpu at a time, and
//! what threads were called.
//!
//! # The one interface
//!
//! Every source feeds the timeline through [`SidebandSink::apply`] (also
//! [`Timeline::apply`]), one [`Event`] at a time: perf.data files (through
//! [`Replay`] or [`Timeline::replay`], which put them in perf's order with
//! [`OrderedEvents`]), ptrec's live rings and ptsim alike — samply's converter
//! is the model: the same handlers whatever the source. The contract:
//!
//! * Events come in time order, as [`OrderedEvents`] delivers them. An event
//!   older than one already applied is applied at the latest time seen (the
//!   timeline never rewrites history) and counted in
//!   [`TimelineStats::time_went_backwards`].
//! * The time of an event is its `sample_id` time (SAMPLE: the sample's time;
//!   FORK/EXIT without `sample_id_all`: the record's own time), in perf time
//!   (ns; convert TSC with [`crate::timeconv`]). An event without a time, or
//!   with time 0 (records perf synthesized for tasks that predate the
//!   recording), applies at the latest time seen, 0 at the start.
//! * `misc` is the header's misc (cpumode, COMM_EXEC, SWITCH_OUT,
//!   MMAP_DATA, FORK_EXEC); `sample_id.cpu` places SWITCH/ITRACE_START records.
//! * Records the timeline does not use (AUX, AUXTRACE, user records, ...) are
//!   ignored, so a source can pass everything. Odd input (EXIT before FORK,
//!   MMAP for an unknown pid, unmatched switches) never fails; it is counted
//!   in [`TimelineStats`].
//! * Queries may be interleaved with `apply` (live use); they answer from the
//!   events applied so far.
//!
//! # What the records mean here
//!
//! * MMAP/MMAP2 of user code: an executable mapping of the pid from then on.
//!   It replaces whatever it overlaps, splitting partly covered mappings as the
//!   kernel's mmap(MAP_FIXED) does; a non-executable mapping (MMAP2 `prot`
//!   without PROT_EXEC, MMAP with `misc::MMAP_DATA`) only removes what it
//!   covers. munmap produces no record, so mappings end only when replaced.
//! * Kernel MMAPs (cpumode kernel, or pid -1) go to one kernel image map: the
//!   `[kernel.kallsyms]_text` map and the modules. Like perf's
//!   `maps__fixup_end`, a kernel-image map is clipped at the first module above
//!   its start instead of replacing it. Guest records are ignored.
//! * COMM with `misc::COMM_EXEC`: the process got a new image, so all its
//!   mappings end there (the kernel reports the new image's MMAP2s after the
//!   COMM). perf only relies on overlap fixups here and keeps stale maps;
//!   samply starts a new process — we end the old mappings, which is what the
//!   kernel did. The name joins the thread's name history either way.
//! * FORK with pid != ppid (a new process): the child's maps are a copy of the
//!   parent's at that time (perf's `thread__clone_maps`), unless perf
//!   synthesized the FORK (`FORK_EXEC` in misc: its MMAPs follow). FORK
//!   with pid == ppid is a new thread: it shares the process's maps. Either
//!   way the new thread starts a new lifetime of its tid, named after its
//!   parent thread until its own COMM.
//! * EXIT: the end of the thread's lifetime.
//! * SWITCH_CPU_WIDE out: `next_prev` runs on the cpu from then on; in: the
//!   record's own task runs (its `next_prev` ran before). SWITCH (per-thread
//!   records) in: the record's task runs; out: unknown (`None`). ITRACE_START:
//!   the task whose trace starts on that cpu runs.
//!
//! Switch records are written by the kernel after the switch-out of the old
//! task has begun, so their perf time is slightly after the point where the
//! trace of the old task ends. Like libipt's sideband library
//! (`pt_sb_pevent_apply`), the decoder should apply a switch that is due at
//! the next point where the trace is in the kernel or disabled, not at the
//! exact instruction whose time first passes the record's: [`Timeline::cpu_slots`]
//! gives the raw switch times for that.
//!
//! # Cost
//!
//! Mappings are versioned, not copied: each carries the time range it is valid
//! for (`since..until`), and an overlap creates at most two new pieces. A
//! lookup binary-searches the mappings by start address and scans back over
//! those that start less than the longest mapping's length below the address,
//! so it is O(log n + k) with k the mappings (of all times) in that window.
//! A [`Mapping`] says how long it stays valid, so the decoder can reuse it for
//! every address in its range until `until` without asking again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::ordered::{order_time, Arrival, OrderedEvents, Timestamped};
use crate::record::{misc, Event, FileId, Mmap, Record, Task};

/// `PROT_EXEC` of mmap(2).
const PROT_EXEC: u32 = 4;
/// `PERF_RECORD_MISC_FORK_EXEC` (include/uapi/linux/perf_event.h): perf marks
/// the FORK records it synthesizes for existing tasks with it.
const FORK_EXEC: u16 = 1 << 13;
/// pid/tid -1, as the kernel and perf write it for "no task" (kernel maps).
const NO_TASK: u32 = u32::MAX;

/// The file behind a mapping, shared by all pieces a split makes of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedFile {
    /// As recorded: a path, `[vdso]`, `[kernel.kallsyms]_text`, `//anon`, ...
    pub filename: String,
    /// MMAP2's inode numbers or build-id; `None` for MMAP.
    pub file_id: Option<FileId>,
    /// MMAP2's `prot` and `flags`; `None` for MMAP.
    pub prot: Option<u32>,
    pub flags: Option<u32>,
}

/// An executable mapping `[start, end)` valid during `[since, until)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// File offset of `start` in bytes, as recorded (for the kernel image map
    /// perf records the kernel's start address here instead).
    pub pgoff: u64,
    pub file: Arc<MappedFile>,
    /// Perf time this mapping was created (or split off, or copied at fork).
    pub since: u64,
    /// Perf time it was replaced; `u64::MAX` while it is current.
    pub until: u64,
}

impl Mapping {
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }

    pub fn valid_at(&self, t: u64) -> bool {
        self.since <= t && t < self.until
    }

    /// The offset in the mapped file of `addr` (which must be in the mapping).
    pub fn file_offset(&self, addr: u64) -> u64 {
        addr.wrapping_sub(self.start).wrapping_add(self.pgoff)
    }
}

/// The executable mappings of one process (or of the kernel) over time.
#[derive(Debug, Clone, Default)]
pub struct ImageMap {
    /// Every mapping ever made, in creation order.
    maps: Vec<Mapping>,
    /// `(start, index into maps)`, sorted by start then creation. A tree,
    /// not a sorted vector: mappings come in any address order, and an
    /// insertion into the middle of a vector moved half of it (175k
    /// MMAP2s in cycling addresses took 1.2 s, 700k 25 s).
    by_start: BTreeSet<(u64, usize)>,
    /// The current mappings, by start; they never overlap.
    live: BTreeMap<u64, usize>,
    /// The longest mapping, bounding the backward scan of a lookup.
    max_len: u64,
}

impl ImageMap {
    /// Every mapping that contains `addr`, at any time, latest start
    /// first (the scan back stops where no mapping is long enough to
    /// reach `addr`).
    fn containing(&self, addr: u64) -> impl Iterator<Item = &Mapping> + '_ {
        self.by_start
            .range(..=(addr, usize::MAX))
            .rev()
            .take_while(move |&&(start, _)| addr - start < self.max_len)
            .map(|&(_, i)| &self.maps[i])
            .filter(move |m| addr < m.end)
    }

    /// The mapping containing `addr` at time `t`.
    pub fn lookup(&self, addr: u64, t: u64) -> Option<&Mapping> {
        self.containing(addr).find(|m| m.valid_at(t))
    }

    /// Where no mapping contains `addr` at `t`: the times `[since, until)`
    /// around `t` over which that stays so (the last mapping of `addr` to
    /// end before `t` and the first to start after it bound them).
    /// Meaningful only where [`Self::lookup`] finds nothing.
    pub fn unmapped_span(&self, addr: u64, t: u64) -> (u64, u64) {
        self.containing(addr)
            .fold((0, u64::MAX), |(since, until), m| {
                if m.until <= t {
                    (since.max(m.until), until)
                } else if m.since > t {
                    (since, until.min(m.since))
                } else {
                    (since, until)
                }
            })
    }

    /// The mappings valid at `t`, by address.
    pub fn at(&self, t: u64) -> impl Iterator<Item = &Mapping> + '_ {
        self.by_start
            .iter()
            .map(|&(_, i)| &self.maps[i])
            .filter(move |m| m.valid_at(t))
    }

    /// Every mapping of every time, in creation order (to find all the files
    /// a decode will need).
    pub fn history(&self) -> &[Mapping] {
        &self.maps
    }

    /// The current mappings, by address.
    pub fn current(&self) -> impl Iterator<Item = &Mapping> + '_ {
        self.live.values().map(|&i| &self.maps[i])
    }

    fn push(&mut self, start: u64, end: u64, pgoff: u64, file: Arc<MappedFile>, t: u64) {
        if start >= end {
            return;
        }
        let i = self.maps.len();
        self.maps.push(Mapping {
            start,
            end,
            pgoff,
            file,
            since: t,
            until: u64::MAX,
        });
        self.by_start.insert((start, i));
        self.live.insert(start, i);
        self.max_len = self.max_len.max(end - start);
    }

    /// Ends at `t` every current mapping overlapping `[start, end)`, keeping
    /// the parts outside it as new pieces.
    fn punch(&mut self, start: u64, end: u64, t: u64) {
        let hits: Vec<usize> = self
            .live
            .range(..end)
            .rev()
            .map(|(_, &i)| i)
            .take_while(|&i| self.maps[i].end > start)
            .collect();
        for i in hits {
            let old = self.maps[i].clone();
            self.live.remove(&old.start);
            self.maps[i].until = t;
            if old.start < start {
                self.push(old.start, start, old.pgoff, old.file.clone(), t);
            }
            if old.end > end {
                let pgoff = old.pgoff.wrapping_add(end - old.start);
                self.push(end, old.end, pgoff, old.file, t);
            }
        }
    }

    fn map(&mut self, start: u64, end: u64, pgoff: u64, file: Arc<MappedFile>, exec: bool, t: u64) {
        self.punch(start, end, t);
        if exec {
            self.push(start, end, pgoff, file, t);
        }
    }

    /// Ends every current mapping at `t` (exec, or a pid reused by a new process).
    fn clear(&mut self, t: u64) {
        for (_, i) in std::mem::take(&mut self.live) {
            self.maps[i].until = t;
        }
    }
}

/// A view of one process's image at one time, from [`Timeline::image_map`].
#[derive(Debug, Clone, Copy)]
pub struct ImageMapAt<'a> {
    map: Option<&'a ImageMap>,
    t: u64,
}

impl<'a> ImageMapAt<'a> {
    pub fn lookup(&self, addr: u64) -> Option<&'a Mapping> {
        self.map?.lookup(addr, self.t)
    }

    pub fn iter(&self) -> impl Iterator<Item = &'a Mapping> + 'a {
        let t = self.t;
        self.map.into_iter().flat_map(move |m| m.at(t))
    }
}

/// A name a thread had from `time` on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comm {
    pub time: u64,
    pub name: Arc<str>,
    /// Set by exec (COMM_EXEC) rather than prctl/inherited.
    pub exec: bool,
}

/// One lifetime of a tid (a tid reused after EXIT gets another).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    pub pid: u32,
    pub tid: u32,
    /// The parent thread's tid, from FORK.
    pub ppid: Option<u32>,
    /// FORK time, when the fork was recorded.
    pub start: Option<u64>,
    /// EXIT time, when the exit was recorded.
    pub end: Option<u64>,
    /// The time of the first record that named this thread.
    pub first_seen: u64,
    names: Vec<Comm>,
}

impl Thread {
    fn new(pid: u32, tid: u32, t: u64) -> Self {
        Self {
            pid,
            tid,
            ppid: None,
            start: None,
            end: None,
            first_seen: t,
            names: Vec::new(),
        }
    }

    /// When this lifetime begins for queries: FORK time, else first seen.
    pub fn begin(&self) -> u64 {
        self.start.unwrap_or(self.first_seen)
    }

    /// Every name, oldest first.
    pub fn names(&self) -> &[Comm] {
        &self.names
    }

    /// The name at `t`: the last set at or before `t`, else the first known
    /// (a thread seen before its first COMM is called what it was called next).
    pub fn name_at(&self, t: u64) -> Option<&str> {
        let i = self.names.partition_point(|c| c.time <= t);
        self.names.get(i.saturating_sub(1)).map(|c| &*c.name)
    }

    fn current_name(&self) -> Option<&Arc<str>> {
        self.names.last().map(|c| &c.name)
    }
}

/// A task: process and thread id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId {
    pub pid: u32,
    pub tid: u32,
}

/// From `since` on (until the next slot), `task` runs on the cpu; `None`
/// when it is not known (after a per-thread switch-out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuSlot {
    pub since: u64,
    pub task: Option<TaskId>,
}

/// Odd input the timeline met and how it coped. None of it is an error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TimelineStats {
    /// Events applied.
    pub events: u64,
    /// Events older than one applied before (applied at the later time).
    pub time_went_backwards: u64,
    /// Records the ordered merge had to deliver late (see [`OrderedEvents::out_of_order`]).
    pub out_of_order: u64,
    /// EXIT of a thread never seen before (normal for threads older than the recording).
    pub exit_of_unknown_thread: u64,
    /// A second EXIT for an ended thread.
    pub duplicate_exit: u64,
    /// Switches whose outgoing or previous task is not the one the cpu had.
    pub unmatched_switches: u64,
    /// SWITCH/ITRACE_START records without a cpu or task in their sample_id.
    pub switch_without_cpu_or_task: u64,
    /// Guest-kernel or guest-user records (ignored).
    pub guest_records: u64,
    /// Sum of PERF_RECORD_LOST counts: the timeline may miss records.
    pub lost_records: u64,
    /// The most records held at once, waiting to be applied in time order
    /// (a perf.data's ordered queue, [`Replay`]; an LLDB bundle's merge
    /// of its cores' switch files). The tests bound memory with it.
    pub waiting_peak: u64,
    /// The bytes those records took while waiting: a perf.data's queue
    /// holds 24 a record (its offset), a bundle's merge a head per core.
    pub waiting_peak_bytes: u64,
}

/// Where sideband records go: the one method every source calls. See the
/// module doc for the contract.
pub trait SidebandSink {
    fn apply(&mut self, event: &Event<'_>);
}

/// Per-process image maps, per-thread names and lifetimes, per-cpu tasks, over time.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    processes: BTreeMap<u32, ImageMap>,
    kernel: ImageMap,
    threads: BTreeMap<u32, Vec<Thread>>,
    cpus: BTreeMap<u32, Vec<CpuSlot>>,
    now: u64,
    stats: TimelineStats,
}

impl SidebandSink for Timeline {
    fn apply(&mut self, event: &Event<'_>) {
        Timeline::apply(self, event);
    }
}

/// Replays records into a [`Timeline`] as they are read, in perf's order
/// ([`OrderedEvents`]: what has no time is applied at once, the rest when
/// its round is flushed). A record that must wait is queued as a `K`
/// that can be far smaller than the record: a mapped perf.data queues
/// the record's offset and reads it again when it is due, so that a file
/// without FINISHED_ROUND (whose records all wait for its end) costs 24
/// bytes a record in the queue, not a parsed [`Event`] of a few hundred.
#[derive(Debug)]
pub struct Replay<K> {
    timeline: Timeline,
    ordered: OrderedEvents<K>,
}

impl<K> Default for Replay<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K> Replay<K> {
    pub fn new() -> Self {
        Self {
            timeline: Timeline::new(),
            ordered: OrderedEvents::new(),
        }
    }

    /// Feeds the next record of the input: applied now when it has no
    /// time, queued as `key(event)` when it has one, and on FINISHED_ROUND
    /// the records due are read back with `load` and applied (`None`: the
    /// record is skipped).
    pub fn push<'e, 'l>(
        &mut self,
        event: Event<'e>,
        key: impl FnOnce(Event<'e>) -> K,
        load: impl FnMut(K) -> Option<Event<'l>>,
    ) {
        match event.arrival() {
            Arrival::RoundEnd => {
                let flushed = self.ordered.finished_round();
                apply_loaded(&mut self.timeline, flushed, load);
            }
            Arrival::Untimed => self.timeline.apply(&event),
            Arrival::Timed(t) => {
                if let Some(k) = self.ordered.push(Some(t), key(event)) {
                    // Not reached: a timed record is always queued.
                    apply_loaded(&mut self.timeline, std::iter::once(k), load);
                }
            }
        }
    }

    /// Records queued, waiting for their round.
    pub fn queued(&self) -> usize {
        self.ordered.len()
    }

    /// The end of the input: applies what is still queued (read back with
    /// `load`) and hands over the timeline.
    pub fn finish<'l>(mut self, load: impl FnMut(K) -> Option<Event<'l>>) -> Timeline {
        let flushed = self.ordered.flush_all();
        apply_loaded(&mut self.timeline, flushed, load);
        self.timeline.stats.out_of_order = self.ordered.out_of_order();
        let peak = self.ordered.peak();
        self.timeline
            .note_waiting(peak, peak * OrderedEvents::<K>::entry_bytes());
        self.timeline
    }
}

fn apply_loaded<'l, K>(
    timeline: &mut Timeline,
    keys: impl Iterator<Item = K>,
    mut load: impl FnMut(K) -> Option<Event<'l>>,
) {
    for k in keys {
        if let Some(e) = load(k) {
            timeline.apply(&e);
        }
    }
}

impl Timeline {
    pub fn new() -> Self {
        Self::default()
    }

    /// Replays records in input (file) order: orders them as perf does
    /// ([`OrderedEvents`], FINISHED_ROUND included) and applies them. The
    /// records waiting for their round are held whole; [`Replay`] holds
    /// less.
    pub fn replay<'a>(events: impl IntoIterator<Item = Event<'a>>) -> Self {
        let mut replay = Replay::new();
        for event in events {
            replay.push(event, |e| e, Some);
        }
        replay.finish(Some)
    }

    /// Notes that `records` (of `bytes`) waited at once to be applied in
    /// time order, for [`TimelineStats::waiting_peak`]: the highest kept.
    pub fn note_waiting(&mut self, records: usize, bytes: usize) {
        let s = &mut self.stats;
        s.waiting_peak = s.waiting_peak.max(records as u64);
        s.waiting_peak_bytes = s.waiting_peak_bytes.max(bytes as u64);
    }

    /// Applies one record (see the module doc for the contract).
    pub fn apply(&mut self, event: &Event<'_>) {
        let t = self.advance(event);
        self.stats.events += 1;
        match &event.record {
            Record::Mmap(m) => self.mmap(event.misc, m, t),
            Record::Comm { pid, tid, comm } => self.comm(event.misc, *pid, *tid, comm, t),
            Record::Fork(task) => self.fork(event.misc, task, t),
            Record::Exit(task) => self.exit(task, t),
            Record::Switch => self.switch(event, None, t),
            Record::SwitchCpuWide {
                next_prev_pid,
                next_prev_tid,
            } => {
                let next_prev = TaskId {
                    pid: *next_prev_pid,
                    tid: *next_prev_tid,
                };
                self.note_thread(next_prev.pid, next_prev.tid, t);
                self.switch(event, Some(next_prev), t);
            }
            Record::ItraceStart { pid, tid } => {
                self.note_thread(*pid, *tid, t);
                match event.sample_id.cpu {
                    Some(cpu) => self.set_cpu(
                        cpu,
                        Some(TaskId {
                            pid: *pid,
                            tid: *tid,
                        }),
                        t,
                    ),
                    None => self.stats.switch_without_cpu_or_task += 1,
                }
            }
            Record::Sample(s) => {
                if let (Some(pid), Some(tid)) = (s.pid, s.tid) {
                    self.note_thread(pid, tid, t);
                }
            }
            // A count from the file: a hostile one must not overflow.
            Record::Lost { lost, .. } => {
                self.stats.lost_records = self.stats.lost_records.saturating_add(*lost)
            }
            _ => {}
        }
    }

    /// The event's time, clamped to never go back.
    fn advance(&mut self, event: &Event<'_>) -> u64 {
        let time = order_time(event).or(match &event.record {
            Record::Fork(task) | Record::Exit(task) => Some(task.time),
            _ => None,
        });
        match time {
            Some(t) if t != 0 && t != u64::MAX => {
                if t < self.now {
                    self.stats.time_went_backwards += 1;
                } else {
                    self.now = t;
                }
                self.now
            }
            _ => self.now,
        }
    }

    fn mmap(&mut self, misc_bits: u16, m: &Mmap, t: u64) {
        let cpumode = misc_bits & misc::CPUMODE_MASK;
        if cpumode == misc::GUEST_KERNEL || cpumode == misc::GUEST_USER {
            self.stats.guest_records += 1;
            return;
        }
        let exec = match m.prot {
            Some(prot) => prot & PROT_EXEC != 0,
            None => misc_bits & misc::MMAP_DATA == 0,
        };
        let start = m.addr;
        let mut end = m.addr.saturating_add(m.len);
        let file = Arc::new(MappedFile {
            filename: m.filename.clone(),
            file_id: m.file_id.clone(),
            prot: m.prot,
            flags: m.flags,
        });
        if cpumode == misc::KERNEL || m.pid == NO_TASK {
            if m.filename.starts_with("[kernel.kallsyms]") {
                // perf's maps__fixup_end: the kernel image ends where the first module begins.
                // (A range from past the start: empty, not a panic, for a map of length 0.)
                let from = start.saturating_add(1);
                if let Some((&next, _)) = self.kernel.live.range(from..end.max(from)).next() {
                    end = next;
                }
            }
            self.kernel.map(start, end, m.pgoff, file, exec, t);
            return;
        }
        self.note_thread(m.pid, m.tid, t);
        self.processes
            .entry(m.pid)
            .or_default()
            .map(start, end, m.pgoff, file, exec, t);
    }

    fn comm(&mut self, misc_bits: u16, pid: u32, tid: u32, comm: &str, t: u64) {
        let exec = misc_bits & misc::COMM_EXEC != 0;
        if exec {
            self.processes.entry(pid).or_default().clear(t);
        }
        if let Some(thread) = self.thread_mut(pid, tid, t) {
            thread.names.push(Comm {
                time: t,
                name: comm.into(),
                exec,
            });
        }
    }

    fn fork(&mut self, misc_bits: u16, task: &Task, t: u64) {
        if task.pid == NO_TASK || task.tid == NO_TASK {
            return;
        }
        let parent_name = self
            .current(task.ptid)
            .and_then(Thread::current_name)
            .cloned();
        let gens = self.threads.entry(task.tid).or_default();
        // A thread first seen in records older than its FORK (same time, or
        // delivered out of order) is this lifetime; anything else is an older one.
        let adopt = gens.last().is_some_and(|g| {
            g.start.is_none() && g.end.is_none() && g.pid == task.pid && g.first_seen >= t
        });
        if !adopt {
            gens.push(Thread::new(task.pid, task.tid, t));
        }
        let n = gens.len() - 1;
        let thread = &mut gens[n];
        thread.start = Some(t);
        thread.ppid = Some(task.ptid);
        if let (true, Some(name)) = (thread.names.is_empty(), parent_name) {
            thread.names.push(Comm {
                time: t,
                name,
                exec: false,
            });
        }

        if task.pid != task.ppid {
            let inherited: Vec<Mapping> = if misc_bits & FORK_EXEC == 0 {
                self.processes
                    .get(&task.ppid)
                    .map(|p| p.current().cloned().collect())
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            let child = self.processes.entry(task.pid).or_default();
            child.clear(t);
            for m in inherited {
                child.push(m.start, m.end, m.pgoff, m.file, t);
            }
        }
    }

    fn exit(&mut self, task: &Task, t: u64) {
        if task.pid == NO_TASK || task.tid == NO_TASK {
            return;
        }
        let known = self.threads.get(&task.tid).is_some_and(|g| !g.is_empty());
        let Some(thread) = self.thread_mut(task.pid, task.tid, t) else {
            return;
        };
        if thread.end.is_some() {
            self.stats.duplicate_exit += 1;
            return;
        }
        thread.end = Some(t);
        if !known {
            self.stats.exit_of_unknown_thread += 1;
        }
    }

    fn switch(&mut self, event: &Event<'_>, next_prev: Option<TaskId>, t: u64) {
        let sid = &event.sample_id;
        let (Some(cpu), Some(pid), Some(tid)) = (sid.cpu, sid.pid, sid.tid) else {
            self.stats.switch_without_cpu_or_task += 1;
            return;
        };
        let me = TaskId { pid, tid };
        self.note_thread(pid, tid, t);
        let out = event.misc & misc::SWITCH_OUT != 0;
        let running = self.cpus.get(&cpu).and_then(|s| s.last()).map(|s| s.task);
        let matched = match (out, running) {
            // Nothing or nobody known was running: nothing to contradict.
            (_, None) | (_, Some(None)) => true,
            // The outgoing task should be the one running.
            (true, Some(r)) => r == Some(me),
            // The incoming task was announced by the switch-out, or the previous task was running.
            (false, Some(r)) => r == Some(me) || (next_prev.is_some() && r == next_prev),
        };
        if !matched {
            self.stats.unmatched_switches += 1;
        }
        let task = match (out, next_prev) {
            (true, Some(next)) => Some(next),
            (true, None) => None,
            (false, _) => Some(me),
        };
        self.set_cpu(cpu, task, t);
    }

    fn set_cpu(&mut self, cpu: u32, task: Option<TaskId>, t: u64) {
        let slots = self.cpus.entry(cpu).or_default();
        if let Some(last) = slots.last_mut() {
            if last.task == task {
                return;
            }
            if last.since == t {
                // Two switches at the same time: keep the later one.
                last.task = task;
                let n = slots.len();
                if n >= 2 && slots[n - 2].task == task {
                    slots.pop();
                }
                return;
            }
        }
        slots.push(CpuSlot { since: t, task });
    }

    /// Registers a thread seen in a record (no-op for pid/tid -1).
    fn note_thread(&mut self, pid: u32, tid: u32, t: u64) {
        let _ = self.thread_mut(pid, tid, t);
    }

    /// The current lifetime of `tid`, created when unknown or when it
    /// belonged to another pid (a tid reused without its FORK recorded).
    fn thread_mut(&mut self, pid: u32, tid: u32, t: u64) -> Option<&mut Thread> {
        if pid == NO_TASK || tid == NO_TASK {
            return None;
        }
        let gens = self.threads.entry(tid).or_default();
        if gens.last().is_none_or(|g| g.pid != pid) {
            gens.push(Thread::new(pid, tid, t));
        }
        gens.last_mut()
    }

    fn current(&self, tid: u32) -> Option<&Thread> {
        self.threads.get(&tid)?.last()
    }

    // ---- queries ----

    /// The image of process `pid` at time `t` (empty when the pid is unknown).
    pub fn image_map(&self, pid: u32, t: u64) -> ImageMapAt<'_> {
        ImageMapAt {
            map: self.processes.get(&pid),
            t,
        }
    }

    /// The mapping containing `addr` in process `pid` at time `t`, falling
    /// back to the kernel image map (kernel addresses are the same in every process).
    pub fn lookup(&self, pid: u32, addr: u64, t: u64) -> Option<&Mapping> {
        self.processes
            .get(&pid)
            .and_then(|m| m.lookup(addr, t))
            .or_else(|| self.kernel.lookup(addr, t))
    }

    /// Where [`Self::lookup`] finds no mapping of `addr` in process `pid`
    /// at `t`: the times `[since, until)` around `t` over which it finds
    /// none (neither in the process's map nor in the kernel's). A cache
    /// of lookups may keep a miss for that long, and no longer.
    pub fn unmapped_span(&self, pid: u32, addr: u64, t: u64) -> (u64, u64) {
        let (ps, pu) = self
            .processes
            .get(&pid)
            .map_or((0, u64::MAX), |m| m.unmapped_span(addr, t));
        let (ks, ku) = self.kernel.unmapped_span(addr, t);
        (ps.max(ks), pu.min(ku))
    }

    /// All mappings of process `pid` over time.
    pub fn process_maps(&self, pid: u32) -> Option<&ImageMap> {
        self.processes.get(&pid)
    }

    /// The kernel image and modules.
    pub fn kernel_map(&self) -> &ImageMap {
        &self.kernel
    }

    /// The task running on `cpu` at `t`: `None` before the first switch seen
    /// on that cpu or while unknown.
    pub fn task_on_cpu(&self, cpu: u32, t: u64) -> Option<TaskId> {
        let slots = self.cpus.get(&cpu)?;
        let i = slots.partition_point(|s| s.since <= t);
        slots.get(i.checked_sub(1)?)?.task
    }

    pub fn tid_on_cpu(&self, cpu: u32, t: u64) -> Option<u32> {
        self.task_on_cpu(cpu, t).map(|task| task.tid)
    }

    /// The switch history of `cpu`, oldest first.
    pub fn cpu_slots(&self, cpu: u32) -> &[CpuSlot] {
        self.cpus.get(&cpu).map_or(&[], Vec::as_slice)
    }

    /// The cpus with switch history, ascending.
    pub fn cpus(&self) -> impl Iterator<Item = u32> + '_ {
        self.cpus.keys().copied()
    }

    /// The lifetime of `tid` at `t`: the last begun at or before `t`, else the first.
    pub fn thread(&self, tid: u32, t: u64) -> Option<&Thread> {
        let gens = self.threads.get(&tid)?;
        let i = gens.partition_point(|g| g.begin() <= t);
        gens.get(i.saturating_sub(1))
    }

    /// Every lifetime of `tid`, oldest first.
    pub fn thread_lifetimes(&self, tid: u32) -> &[Thread] {
        self.threads.get(&tid).map_or(&[], Vec::as_slice)
    }

    /// The name of `tid` at `t`.
    pub fn name(&self, tid: u32, t: u64) -> Option<&str> {
        self.thread(tid, t)?.name_at(t)
    }

    /// The pid of `tid`'s latest lifetime.
    pub fn pid_of(&self, tid: u32) -> Option<u32> {
        self.current(tid).map(|th| th.pid)
    }

    /// Every thread lifetime, by tid then time.
    pub fn threads(&self) -> impl Iterator<Item = &Thread> + '_ {
        self.threads.values().flatten()
    }

    /// Every tid seen, ascending.
    pub fn tids(&self) -> impl Iterator<Item = u32> + '_ {
        self.threads.keys().copied()
    }

    /// Every pid seen (with threads or mappings), ascending.
    pub fn pids(&self) -> Vec<u32> {
        let set: BTreeSet<u32> = self
            .processes
            .keys()
            .copied()
            .chain(self.threads().map(|th| th.pid))
            .collect();
        set.into_iter().collect()
    }

    pub fn stats(&self) -> &TimelineStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::SampleId;

    fn at(time: u64) -> SampleId {
        SampleId {
            time: Some(time),
            ..Default::default()
        }
    }

    fn ev(misc: u16, record: Record<'static>, sample_id: SampleId) -> Event<'static> {
        Event {
            misc,
            record,
            sample_id,
        }
    }

    fn mmap2(
        pid: u32,
        addr: u64,
        len: u64,
        pgoff: u64,
        name: &str,
        prot: u32,
        t: u64,
    ) -> Event<'static> {
        ev(
            misc::USER,
            Record::Mmap(Mmap {
                pid,
                tid: pid,
                addr,
                len,
                pgoff,
                file_id: Some(FileId::Inode {
                    maj: 8,
                    min: 1,
                    ino: 42,
                    ino_generation: 0,
                }),
                prot: Some(prot),
                flags: Some(2),
                filename: name.into(),
            }),
            at(t),
        )
    }

    fn comm(pid: u32, tid: u32, name: &str, exec: bool, t: u64) -> Event<'static> {
        let m = misc::USER | if exec { misc::COMM_EXEC } else { 0 };
        ev(
            m,
            Record::Comm {
                pid,
                tid,
                comm: name.into(),
            },
            at(t),
        )
    }

    fn task(pid: u32, ppid: u32, tid: u32, ptid: u32, t: u64) -> Task {
        Task {
            pid,
            ppid,
            tid,
            ptid,
            time: t,
        }
    }

    fn fork(pid: u32, ppid: u32, tid: u32, ptid: u32, t: u64) -> Event<'static> {
        ev(0, Record::Fork(task(pid, ppid, tid, ptid, t)), at(t))
    }

    fn exit(pid: u32, tid: u32, t: u64) -> Event<'static> {
        ev(0, Record::Exit(task(pid, pid, tid, tid, t)), at(t))
    }

    fn on_cpu(cpu: u32, pid: u32, tid: u32, t: u64) -> SampleId {
        SampleId {
            time: Some(t),
            cpu: Some(cpu),
            pid: Some(pid),
            tid: Some(tid),
            ..Default::default()
        }
    }

    fn cpu_wide(out: bool, cpu: u32, me: (u32, u32), other: (u32, u32), t: u64) -> Event<'static> {
        ev(
            if out { misc::SWITCH_OUT } else { 0 },
            Record::SwitchCpuWide {
                next_prev_pid: other.0,
                next_prev_tid: other.1,
            },
            on_cpu(cpu, me.0, me.1, t),
        )
    }

    fn apply_all(events: &[Event<'static>]) -> Timeline {
        let mut tl = Timeline::new();
        for e in events {
            tl.apply(e);
        }
        tl
    }

    fn names_at(tl: &Timeline, pid: u32, t: u64) -> Vec<(u64, u64, u64, String)> {
        tl.image_map(pid, t)
            .iter()
            .map(|m| (m.start, m.end, m.pgoff, m.file.filename.clone()))
            .collect()
    }

    const RX: u32 = 5; // PROT_READ | PROT_EXEC
    const RW: u32 = 3;

    #[test]
    fn mmap_overlap_splits_and_replaces() {
        let tl = apply_all(&[
            mmap2(7, 0x1000, 0x9000, 0, "a", RX, 10), // [0x1000, 0xa000)
            mmap2(7, 0x4000, 0x2000, 0x100000, "b", RX, 20), // punches [0x4000, 0x6000)
            mmap2(7, 0x8000, 0x4000, 0, "c", RX, 30), // overlaps a's tail and beyond
            mmap2(7, 0x2000, 0x1000, 0, "data", RW, 40), // non-exec: only removes
        ]);
        assert_eq!(names_at(&tl, 7, 5), vec![]);
        assert_eq!(names_at(&tl, 7, 10), vec![(0x1000, 0xa000, 0, "a".into())]);
        assert_eq!(
            names_at(&tl, 7, 25),
            vec![
                (0x1000, 0x4000, 0, "a".into()),
                (0x4000, 0x6000, 0x100000, "b".into()),
                (0x6000, 0xa000, 0x5000, "a".into()), // pgoff moved with the split
            ]
        );
        assert_eq!(
            names_at(&tl, 7, 35),
            vec![
                (0x1000, 0x4000, 0, "a".into()),
                (0x4000, 0x6000, 0x100000, "b".into()),
                (0x6000, 0x8000, 0x5000, "a".into()),
                (0x8000, 0xc000, 0, "c".into()),
            ]
        );
        assert_eq!(
            names_at(&tl, 7, 40),
            vec![
                (0x1000, 0x2000, 0, "a".into()),
                (0x3000, 0x4000, 0x2000, "a".into()),
                (0x4000, 0x6000, 0x100000, "b".into()),
                (0x6000, 0x8000, 0x5000, "a".into()),
                (0x8000, 0xc000, 0, "c".into()),
            ]
        );
        // Lookups at each time; a mapping says how long it holds.
        let a = tl.lookup(7, 0x5000, 15).unwrap();
        assert_eq!((a.file.filename.as_str(), a.since, a.until), ("a", 10, 20));
        assert_eq!(a.file_offset(0x5000), 0x4000);
        assert_eq!(tl.lookup(7, 0x5000, 20).unwrap().file.filename, "b");
        assert_eq!(tl.lookup(7, 0x9000, 29).unwrap().file.filename, "a");
        assert_eq!(tl.lookup(7, 0x9000, 30).unwrap().file.filename, "c");
        assert!(tl.lookup(7, 0x2800, 39).is_some());
        assert!(tl.lookup(7, 0x2800, 40).is_none());
        assert!(tl.lookup(7, 0xc000, 40).is_none());
        // A miss holds from the last mapping's end to the next one's start.
        assert_eq!(tl.unmapped_span(7, 0x2800, 40), (40, u64::MAX));
        assert_eq!(tl.unmapped_span(7, 0x5000, 5), (0, 10));
        assert_eq!(tl.unmapped_span(7, 0xb000, 12), (0, 30));
        assert_eq!(tl.unmapped_span(7, 0xc000, 40), (0, u64::MAX));
        assert_eq!(tl.unmapped_span(8, 0x5000, 5), (0, u64::MAX));
        assert!(tl.lookup(7, 0x500, 40).is_none());
        assert!(tl.lookup(8, 0x5000, 40).is_none());
        // The file is shared by the pieces, not copied.
        let pieces: Vec<_> = tl
            .process_maps(7)
            .unwrap()
            .history()
            .iter()
            .filter(|m| m.file.filename == "a")
            .collect();
        assert!(
            pieces.len() > 1
                && pieces
                    .windows(2)
                    .all(|w| Arc::ptr_eq(&w[0].file, &w[1].file))
        );
    }

    #[test]
    fn exec_clears_the_old_image() {
        let tl = apply_all(&[
            comm(9, 9, "sh", false, 0),
            mmap2(9, 0x400000, 0x1000, 0, "/bin/sh", RX, 5),
            mmap2(9, 0x7f00000, 0x1000, 0, "/lib/libc.so", RX, 6),
            comm(9, 9, "echo", true, 100),
            mmap2(9, 0x500000, 0x1000, 0, "/bin/echo", RX, 110),
        ]);
        assert_eq!(tl.image_map(9, 99).iter().count(), 2);
        assert_eq!(tl.image_map(9, 100).iter().count(), 0);
        assert_eq!(
            names_at(&tl, 9, 110),
            vec![(0x500000, 0x501000, 0, "/bin/echo".into())]
        );
        assert!(tl.lookup(9, 0x7f00000, 200).is_none());
        assert_eq!(
            tl.lookup(9, 0x7f00000, 50).unwrap().file.filename,
            "/lib/libc.so"
        );
        assert_eq!(tl.name(9, 99), Some("sh"));
        assert_eq!(tl.name(9, 100), Some("echo"));
        assert!(tl.thread(9, 100).unwrap().names()[1].exec);
    }

    #[test]
    fn fork_copies_maps_and_threads_share() {
        let tl = apply_all(&[
            comm(10, 10, "parent", false, 1),
            mmap2(10, 0x1000, 0x1000, 0, "p", RX, 2),
            fork(11, 10, 11, 10, 50), // new process
            fork(10, 10, 12, 10, 60), // new thread of 10
            mmap2(10, 0x3000, 0x1000, 0, "after-fork", RX, 70),
            mmap2(11, 0x5000, 0x1000, 0, "child-only", RX, 80),
            comm(10, 12, "worker", false, 90),
        ]);
        assert!(tl.image_map(11, 49).iter().next().is_none());
        assert_eq!(names_at(&tl, 11, 50), vec![(0x1000, 0x2000, 0, "p".into())]);
        assert_eq!(tl.image_map(11, 100).iter().count(), 2); // p + child-only, not after-fork
        assert!(tl.lookup(11, 0x3000, 100).is_none());
        assert!(tl.lookup(10, 0x5000, 100).is_none());
        assert_eq!(tl.image_map(10, 100).iter().count(), 2);
        // Names are inherited at fork, then renamed.
        assert_eq!(tl.name(11, 50), Some("parent"));
        assert_eq!(tl.name(12, 89), Some("parent"));
        assert_eq!(tl.name(12, 90), Some("worker"));
        assert_eq!(tl.pid_of(12), Some(10));
        assert_eq!(tl.pid_of(11), Some(11));
        let th = tl.thread(12, 70).unwrap();
        assert_eq!((th.start, th.end, th.ppid), (Some(60), None, Some(10)));
        assert_eq!(tl.pids(), vec![10, 11]);
        assert_eq!(tl.tids().collect::<Vec<_>>(), vec![10, 11, 12]);
    }

    #[test]
    fn synthesized_fork_does_not_clone_maps() {
        let mut f = fork(21, 20, 21, 20, 0);
        f.misc = FORK_EXEC;
        let tl = apply_all(&[mmap2(20, 0x1000, 0x1000, 0, "p", RX, 0), f]);
        assert_eq!(tl.image_map(21, 0).iter().count(), 0);
    }

    #[test]
    fn comm_renames_over_time_and_lifetimes() {
        let tl = apply_all(&[
            comm(5, 6, "a", false, 10),
            comm(5, 6, "b", false, 20),
            comm(5, 6, "c", false, 30),
            exit(5, 6, 40),
            fork(8, 1, 6, 1, 50), // tid 6 reused by another process
            comm(8, 6, "d", false, 60),
        ]);
        assert_eq!(tl.name(6, 5), Some("a")); // before the first COMM: the first name
        assert_eq!(tl.name(6, 10), Some("a"));
        assert_eq!(tl.name(6, 19), Some("a"));
        assert_eq!(tl.name(6, 25), Some("b"));
        assert_eq!(tl.name(6, 45), Some("c"));
        // The new lifetime: its parent (tid 1) had no name, so until its
        // COMM it is called what it is called next.
        assert_eq!(tl.name(6, 55), Some("d"));
        assert_eq!(tl.name(6, 60), Some("d"));
        let lives = tl.thread_lifetimes(6);
        assert_eq!(lives.len(), 2);
        assert_eq!((lives[0].pid, lives[0].end), (5, Some(40)));
        assert_eq!((lives[1].pid, lives[1].start), (8, Some(50)));
        assert_eq!(tl.pid_of(6), Some(8));
        assert_eq!(tl.thread(6, 45).unwrap().pid, 5);
        assert_eq!(tl.stats().exit_of_unknown_thread, 0);
    }

    #[test]
    fn cpu_wide_switches() {
        let idle = (0, 0);
        let a = (100, 100);
        let b = (100, 101);
        let tl = apply_all(&[
            cpu_wide(true, 0, idle, a, 10),
            cpu_wide(false, 0, a, idle, 11),
            cpu_wide(true, 0, a, b, 20),
            cpu_wide(false, 0, b, a, 21),
            cpu_wide(true, 1, idle, a, 25),
            cpu_wide(false, 1, a, idle, 26),
            cpu_wide(true, 0, b, idle, 30),
            cpu_wide(false, 0, idle, b, 31),
        ]);
        assert_eq!(tl.tid_on_cpu(0, 9), None);
        assert_eq!(tl.tid_on_cpu(0, 10), Some(100));
        assert_eq!(tl.tid_on_cpu(0, 19), Some(100));
        assert_eq!(tl.tid_on_cpu(0, 20), Some(101));
        assert_eq!(tl.tid_on_cpu(0, 30), Some(0));
        assert_eq!(tl.tid_on_cpu(0, 1000), Some(0));
        assert_eq!(tl.task_on_cpu(1, 26), Some(TaskId { pid: 100, tid: 100 }));
        assert_eq!(tl.tid_on_cpu(2, 26), None);
        assert_eq!(tl.cpu_slots(0).len(), 3);
        assert_eq!(tl.cpus().collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(tl.stats().unmatched_switches, 0);
        assert_eq!(tl.pid_of(101), Some(100));
    }

    #[test]
    fn per_thread_switches_and_itrace_start() {
        let sw = |out: bool, cpu, tid, t| {
            ev(
                if out { misc::SWITCH_OUT } else { 0 },
                Record::Switch,
                on_cpu(cpu, 50, tid, t),
            )
        };
        let tl = apply_all(&[
            ev(
                0,
                Record::ItraceStart { pid: 50, tid: 50 },
                on_cpu(2, 50, 50, 5),
            ),
            sw(true, 2, 50, 10),
            sw(false, 3, 50, 12),
            sw(true, 3, 50, 20),
            sw(false, 2, 51, 22),
        ]);
        assert_eq!(tl.tid_on_cpu(2, 5), Some(50));
        assert_eq!(tl.tid_on_cpu(2, 10), None);
        assert_eq!(tl.tid_on_cpu(3, 15), Some(50));
        assert_eq!(tl.tid_on_cpu(3, 20), None);
        assert_eq!(tl.tid_on_cpu(2, 22), Some(51));
        assert_eq!(tl.stats().unmatched_switches, 0);
    }

    #[test]
    fn odd_input_is_counted_not_fatal() {
        let mut no_cpu = cpu_wide(true, 0, (1, 1), (2, 2), 60);
        no_cpu.sample_id.cpu = None;
        let tl = apply_all(&[
            exit(30, 31, 10),                          // EXIT before (without) FORK
            exit(30, 31, 11),                          // twice
            fork(30, 30, 31, 30, 12),                  // then the FORK: a new lifetime
            mmap2(77, 0x1000, 0x1000, 0, "x", RX, 20), // unknown pid
            cpu_wide(true, 0, (1, 1), (2, 2), 30),
            cpu_wide(true, 0, (3, 3), (4, 4), 40), // 3 was not running
            cpu_wide(false, 0, (9, 9), (8, 8), 45), // neither announced nor previous
            comm(1, 1, "late", false, 5),          // time goes backwards
            mmap2(77, u64::MAX - 10, 100, 0, "wrap", RX, 50), // end overflows
            mmap2(77, 0x9000, 0, 0, "empty", RX, 50),
            no_cpu,
            ev(
                misc::GUEST_USER,
                Record::Mmap(Mmap {
                    pid: 1,
                    tid: 1,
                    addr: 0,
                    len: 1,
                    pgoff: 0,
                    file_id: None,
                    prot: None,
                    flags: None,
                    filename: "g".into(),
                }),
                at(70),
            ),
        ]);
        let s = tl.stats();
        assert_eq!(s.exit_of_unknown_thread, 1);
        assert_eq!(s.duplicate_exit, 1);
        assert_eq!(s.unmatched_switches, 2);
        assert_eq!(s.time_went_backwards, 1);
        assert_eq!(s.switch_without_cpu_or_task, 1);
        assert_eq!(s.guest_records, 1);
        assert_eq!(tl.thread_lifetimes(31).len(), 2);
        assert_eq!(tl.name(1, 45), Some("late"));
        assert_eq!(tl.thread(1, 45).unwrap().names()[0].time, 45); // applied at the latest time
        assert_eq!(tl.lookup(77, 0x1800, 25).unwrap().file.filename, "x");
        assert_eq!(tl.lookup(77, u64::MAX - 1, 50).unwrap().end, u64::MAX);
        assert_eq!(tl.image_map(77, 60).iter().count(), 2);
    }

    #[test]
    fn kernel_maps_are_separate_and_clipped() {
        let kmmap = |addr, len, pgoff, name: &str, t| {
            ev(
                misc::KERNEL,
                Record::Mmap(Mmap {
                    pid: NO_TASK,
                    tid: 0,
                    addr,
                    len,
                    pgoff,
                    file_id: None,
                    prot: None,
                    flags: None,
                    filename: name.into(),
                }),
                at(t),
            )
        };
        // Modules first, then a kernel map that claims everything above it.
        let tl = apply_all(&[
            kmmap(0xffffffffc0000000, 0x6000, 0, "/lib/modules/x.ko", 0),
            kmmap(
                0xffffffff81000000,
                u64::MAX - 0xffffffff81000000,
                0xffffffff81000000,
                "[kernel.kallsyms]_text",
                0,
            ),
            mmap2(3, 0x1000, 0x1000, 0, "u", RX, 1),
        ]);
        let k = tl.lookup(3, 0xffffffff81234567, 5).unwrap();
        assert_eq!(
            (k.file.filename.as_str(), k.end),
            ("[kernel.kallsyms]_text", 0xffffffffc0000000)
        );
        assert_eq!(
            tl.lookup(3, 0xffffffffc0000010, 5).unwrap().file.filename,
            "/lib/modules/x.ko"
        );
        assert_eq!(
            tl.lookup(999, 0xffffffffc0000010, 5).unwrap().file.filename,
            "/lib/modules/x.ko"
        );
        assert_eq!(tl.kernel_map().current().count(), 2);
        assert_eq!(tl.image_map(3, 5).iter().count(), 1);
        assert_eq!(tl.pids(), vec![3]);
    }

    #[test]
    fn replay_orders_rounds() {
        // Two cpu streams in one round, the second older than the first.
        let round = || ev(0, Record::FinishedRound, SampleId::default());
        let tl = Timeline::replay(vec![
            comm(1, 1, "first", false, 0),
            comm(1, 1, "at-30", false, 30),
            comm(1, 1, "at-20", false, 20),
            round(),
            comm(1, 1, "at-25", false, 25),
            round(),
        ]);
        let names: Vec<_> = tl
            .thread(1, 100)
            .unwrap()
            .names()
            .iter()
            .map(|c| (c.time, c.name.to_string()))
            .collect();
        assert_eq!(
            names,
            [
                (0, "first".into()),
                (20, "at-20".into()),
                (25, "at-25".into()),
                (30, "at-30".into())
            ]
        );
        assert_eq!(tl.stats().time_went_backwards, 0);
    }

    #[test]
    fn a_replay_that_queues_keys_is_the_replay_of_the_records() {
        // Switches of two cpus, one round out of order, a round mark, an
        // untimed name between them: queued as indexes, read back when due.
        let round = || ev(0, Record::FinishedRound, SampleId::default());
        let input = vec![
            cpu_wide(true, 0, (1, 1), (2, 2), 10),
            cpu_wide(true, 1, (3, 3), (4, 4), 30),
            cpu_wide(false, 0, (2, 2), (1, 1), 20),
            comm(5, 5, "untimed", false, 0),
            round(),
            cpu_wide(true, 0, (2, 2), (1, 1), 15),
            round(),
            cpu_wide(false, 1, (4, 4), (3, 3), 40),
        ];
        let whole = Timeline::replay(input.clone());
        let mut replay = Replay::new();
        let load = |i: usize| input.get(i).cloned();
        for (i, e) in input.iter().enumerate() {
            replay.push(e.clone(), |_| i, load);
        }
        assert_eq!(replay.queued(), 1);
        let keyed = replay.finish(load);
        // As many records waited (the first round flushes none), in less:
        // 24 bytes each (an index and its place in the queue), where the
        // records themselves took more.
        let (k, w) = (*keyed.stats(), *whole.stats());
        assert_eq!(k.waiting_peak, 4);
        assert_eq!(k.waiting_peak_bytes, 4 * 24);
        assert!(w.waiting_peak_bytes > k.waiting_peak_bytes);
        assert_eq!(
            TimelineStats {
                waiting_peak_bytes: 0,
                ..k
            },
            TimelineStats {
                waiting_peak_bytes: 0,
                ..w
            }
        );
        for cpu in [0, 1] {
            assert_eq!(keyed.cpu_slots(cpu), whole.cpu_slots(cpu));
        }
        assert_eq!(keyed.cpu_slots(0).len(), 3);
        assert_eq!(keyed.name(5, 0), Some("untimed"));
    }
}
