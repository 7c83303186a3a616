//! The chunk decoder's context (`chunk`): who runs on the chunk's buffer
//! and whose code the flow decoder sees, asked of a [`TaskContext`] that
//! the perf timeline and a raw decode's replayed sideband implement, as
//! libipt-sb's `pt_sb_event` sits beside libipt's decoder.

use std::rc::Rc;

use sideband::timeline::{TaskId, Timeline as PerfTimeline};

use super::setup::{DecodeSetup, Source, NO_PID};
use super::worker_images::WorkerImages;
use crate::model::source::{CodeImages, EventPlace, ImageSel, SbNote, SidebandSession};

/// Whose trace a buffer holds.
#[derive(Debug, Clone, Copy)]
pub(super) enum Owner {
    /// A CPU's: the sideband's context switches say who runs.
    Cpu(u32),
    /// A thread's; its process from the sideband.
    Thread(u32),
    /// One known task (raw PT).
    Task(TaskId),
}

/// An image to put into the decoder: its section ids.
pub(super) type Isids = Rc<[u32]>;

/// What the chunk decoder asks of a trace's sideband: the perf timeline of
/// a trace dir or LLDB bundle ([`TimelineSource`]; also a raw decode
/// without sideband, with none), or a raw decode's perf_event sideband
/// replayed event by event ([`ReplaySource`], over a
/// [`SidebandSession`] of `crate::model::source`). It sits in the decode
/// stage, not in `crate::model`: its images are this stage's section ids.
/// Times are perf times (ns, or TSC ticks for a raw decode without a TSC
/// frequency).
pub(super) trait TaskContext {
    /// The task on CPU `cpu` at `t`, as the context switches say; `None`
    /// when none is known.
    fn task_on_cpu(&self, cpu: u32, t: u64) -> Option<TaskId>;
    /// The process of thread `tid` at `t`, when known.
    fn pid_of(&self, tid: u32, t: u64) -> Option<u32>;
    /// When the first context switch on `cpu` after `now` comes
    /// (`u64::MAX`: none); `None` when this source knows no switches.
    fn next_switch(&self, cpu: u32, now: u64) -> Option<u64>;
    /// Whether process `pid` maps code at `ip` at `t`; `None` when this
    /// source knows no mappings.
    fn maps(&self, pid: u32, ip: u64, t: u64) -> Option<bool>;
    /// The image of process `pid` at `t` when it is not the one installed
    /// last; [`TaskContext::image_until`] then says until when it holds.
    fn image_change(&mut self, images: &WorkerImages<'_, '_>, pid: u32, t: u64) -> Option<Isids>;
    /// Until when the image installed last holds (0: ask at every kernel
    /// block, as a replayed sideband may change it at any event).
    fn image_until(&self) -> u64;
    /// Replays the sideband up to an event at `tsc`, `place`: what to list,
    /// or `None` when this source replays nothing (then the image is
    /// unchanged).
    fn replay(&mut self, tsc: u64, place: EventPlace) -> Option<Vec<SbNote>>;
    /// The code at `ip` of process `pid` could not be decoded at `t`: noted
    /// for the summary's list of images that are missing or incomplete.
    fn note_missing(&self, pid: u32, ip: u64, t: u64);
}

/// Where libipt's event `ev` says the trace is, for the sideband
/// replay's rule that a context switch applies outside user code only.
pub(super) fn event_place(ev: &ipt::Event) -> EventPlace {
    use ipt::EventKind as K;
    let at = |ip: Option<u64>| ip.map_or(EventPlace::Unknown, EventPlace::Ip);
    match ev.kind() {
        K::Enabled { ip, .. } => EventPlace::Ip(ip),
        K::Disabled { ip: Some(ip) } => EventPlace::Ip(ip),
        K::Disabled { ip: None } => EventPlace::Suppressed,
        K::AsyncDisabled { ip: Some(ip), .. } => EventPlace::Ip(ip),
        K::AsyncDisabled { at, ip: None } => EventPlace::SuppressedFrom(at),
        K::AsyncBranch { to, .. } => EventPlace::Ip(to.unwrap_or(0)),
        K::AsyncPaging { ip: Some(ip), .. } => EventPlace::Ip(ip),
        K::AsyncPaging { ip: None, .. } | K::Paging { .. } => EventPlace::LikelyKernel,
        K::Overflow { ip }
        | K::ExecMode { ip }
        | K::Exstop { ip }
        | K::Mwait { ip, .. }
        | K::Ptwrite { ip, .. }
        | K::Interrupt { ip, .. }
        | K::Iret { ip }
        | K::Smi { ip }
        | K::Rsm { ip }
        | K::Init { ip }
        | K::VmEntry { ip }
        | K::VmExit { ip, .. }
        | K::Shutdown { ip }
        | K::Uintr { ip, .. }
        | K::Uiret { ip } => at(ip),
        K::Other(_) => at(ev.other_ip()),
        _ => EventPlace::Unknown,
    }
}

/// A trace dir's or LLDB bundle's perf timeline, or nothing (a raw decode
/// without sideband): the image of a process changes at the times the
/// set-up found ([`DecodeSetup::version`]).
pub(super) struct TimelineSource<'i> {
    /// The timeline and the image store, for a perf.data trace.
    perf: Option<(&'i PerfTimeline, &'i dyn CodeImages)>,
    /// (pid, map version) of the image in the decoder, and until when
    /// (perf time) that version holds.
    image: Option<(u32, usize)>,
    until: u64,
}

impl<'i> TimelineSource<'i> {
    pub(super) fn new(setup: &'i DecodeSetup<'_>) -> Self {
        let perf = match &setup.src {
            Source::Perf {
                timeline, images, ..
            } => Some((*timeline, *images)),
            Source::Raw { .. } => None,
        };
        TimelineSource {
            perf,
            image: None,
            until: 0,
        }
    }
}

impl TaskContext for TimelineSource<'_> {
    fn task_on_cpu(&self, cpu: u32, t: u64) -> Option<TaskId> {
        self.perf?.0.task_on_cpu(cpu, t)
    }

    fn pid_of(&self, tid: u32, t: u64) -> Option<u32> {
        self.perf?.0.thread(tid, t).map(|th| th.pid)
    }

    fn next_switch(&self, cpu: u32, now: u64) -> Option<u64> {
        let slots = self.perf?.0.cpu_slots(cpu);
        let i = slots.partition_point(|s| s.since <= now);
        Some(slots.get(i).map_or(u64::MAX, |s| s.since))
    }

    fn maps(&self, pid: u32, ip: u64, t: u64) -> Option<bool> {
        Some(self.perf?.0.lookup(pid, ip, t).is_some())
    }

    fn image_change(&mut self, images: &WorkerImages<'_, '_>, pid: u32, t: u64) -> Option<Isids> {
        let (v, until) = images.setup.version(pid, t);
        self.until = until;
        if self.image == Some((pid, v)) {
            return None;
        }
        self.image = Some((pid, v));
        Some(images.image(pid, v, t))
    }

    fn image_until(&self) -> u64 {
        self.until
    }

    fn replay(&mut self, _: u64, _: EventPlace) -> Option<Vec<SbNote>> {
        None
    }

    fn note_missing(&self, pid: u32, ip: u64, t: u64) {
        if let Some((tl, store)) = self.perf {
            if let Some(m) = tl.lookup(pid, ip, t) {
                store.note_undecoded(&m.file, pid, m.start, m.end);
            }
        }
    }
}

/// A raw decode's perf_event sideband, replayed at each event (a
/// [`SidebandSession`], `crate::pevent`'s): it says which image the
/// decoder should have, the given one or a context's sections. It knows
/// no switches or mappings by time (the raw decode's one task is its
/// owner).
pub(super) struct ReplaySource<'i> {
    session: Box<dyn SidebandSession + 'i>,
    /// The image of it in the decoder (which, and how many sections).
    installed: Option<(ImageSel, usize)>,
}

impl<'i> ReplaySource<'i> {
    pub(super) fn new(session: Box<dyn SidebandSession + 'i>) -> Self {
        ReplaySource {
            session,
            installed: None,
        }
    }
}

impl TaskContext for ReplaySource<'_> {
    fn task_on_cpu(&self, _: u32, _: u64) -> Option<TaskId> {
        None
    }

    fn pid_of(&self, _: u32, _: u64) -> Option<u32> {
        None
    }

    fn next_switch(&self, _: u32, _: u64) -> Option<u64> {
        None
    }

    fn maps(&self, _: u32, _: u64, _: u64) -> Option<bool> {
        None
    }

    fn image_change(&mut self, images: &WorkerImages<'_, '_>, pid: u32, _: u64) -> Option<Isids> {
        let sb = &self.session;
        let sel = sb.image();
        let n = match sel {
            ImageSel::Given => 0,
            ImageSel::Context(c) => sb.sections(c).len(),
        };
        if self.installed == Some((sel, n)) {
            return None;
        }
        self.installed = Some((sel, n));
        Some(match sel {
            ImageSel::Given => images.image(pid, 0, 0),
            ImageSel::Context(c) => {
                let base = images.setup.sideband_base();
                sb.sections(c)
                    .iter()
                    .filter_map(|&i| images.isid(base + i))
                    .collect()
            }
        })
    }

    fn image_until(&self) -> u64 {
        0
    }

    fn replay(&mut self, tsc: u64, place: EventPlace) -> Option<Vec<SbNote>> {
        self.session.on_event(tsc, place);
        Some(self.session.take_notes())
    }

    fn note_missing(&self, _: u32, _: u64, _: u64) {}
}

/// What the chunk decoder tracks of its context (the owner, the current
/// task, the next switch) over a [`TaskContext`]: which task runs and
/// which image to install, and when; the chunk decoder installs it and
/// builds the runs.
pub(super) struct Context<'i> {
    pub owner: Option<Owner>,
    /// The task whose code is decoded now.
    pub task: Option<TaskId>,
    /// Perf time of the next context switch on this CPU.
    pub next_switch: u64,
    source: Box<dyn TaskContext + 'i>,
}

impl<'i> Context<'i> {
    /// The context of a buffer of `owner` in the decode `setup` sets up:
    /// its sideband replayed, or its timeline.
    pub(super) fn of(owner: Option<Owner>, setup: &'i DecodeSetup<'_>) -> Self {
        let source: Box<dyn TaskContext + 'i> = match setup.sideband() {
            Some(sb) => Box::new(ReplaySource::new(sb.session())),
            None => Box::new(TimelineSource::new(setup)),
        };
        Context::new(owner, source)
    }

    pub(super) fn new(owner: Option<Owner>, source: Box<dyn TaskContext + 'i>) -> Self {
        Context {
            owner,
            task: None,
            next_switch: u64::MAX,
            source,
        }
    }

    /// The task running at `t` on this buffer.
    pub(super) fn task_at(&self, t: u64) -> Option<TaskId> {
        match self.owner? {
            Owner::Cpu(cpu) => self.source.task_on_cpu(cpu, t),
            Owner::Thread(tid) => Some(TaskId {
                pid: self.source.pid_of(tid, t).unwrap_or(tid),
                tid,
            }),
            Owner::Task(task) => Some(task),
        }
    }

    /// At `now`, on a CPU's buffer: when the next context switch comes.
    pub(super) fn next_switch_after(&mut self, now: u64) {
        if let Some(Owner::Cpu(cpu)) = self.owner {
            if let Some(next) = self.source.next_switch(cpu, now) {
                self.next_switch = next;
            }
        }
    }

    /// The time whose image an enable at `ip` takes: `t` (now plus the
    /// slack that lets a mapping made just before tracing resumed count
    /// although the decoder's time lags), but `now` when only that one
    /// maps `ip`: the slack must not reach past an exec that follows soon
    /// after (a forked child runs a few hundred ns of its parent's code
    /// before execve).
    pub(super) fn image_time(&self, ip: u64, t: u64, now: u64) -> u64 {
        let Some(task) = self.task else {
            return t;
        };
        // `now` is looked up only when `t` maps nothing.
        match self.source.maps(task.pid, ip, t) {
            Some(false) if self.source.maps(task.pid, ip, now) == Some(true) => now,
            _ => t,
        }
    }

    /// The current process, or none.
    fn pid(&self) -> u32 {
        self.task.map_or(NO_PID, |t| t.pid)
    }

    /// Until when the image in the decoder holds.
    pub(super) fn image_until(&self) -> u64 {
        self.source.image_until()
    }

    /// Replays the sideband up to an event ([`TaskContext::replay`]).
    pub(super) fn replay(&mut self, tsc: u64, place: EventPlace) -> Option<Vec<SbNote>> {
        self.source.replay(tsc, place)
    }

    /// The image of the current task at `t`, when it is not the one in
    /// the decoder.
    pub(super) fn image_change(&mut self, images: &WorkerImages<'_, '_>, t: u64) -> Option<Isids> {
        let pid = self.pid();
        self.source.image_change(images, pid, t)
    }

    /// The code at `ip` of the current task could not be decoded at `t`.
    pub(super) fn note_missing(&self, ip: u64, t: u64) {
        self.source.note_missing(self.pid(), ip, t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{DecodeOptions, RawConfig};
    use crate::model::source::RawSection;

    /// The worker images of a raw decode of one section (no timeline).
    fn with_raw(f: impl FnOnce(&WorkerImages<'_, '_>)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("code.bin");
        std::fs::write(&path, [0x90u8; 64]).unwrap();
        let section = RawSection {
            path,
            offset: 0,
            size: 64,
            vaddr: 0x1000,
        };
        let opts = DecodeOptions::default();
        let setup = DecodeSetup::raw(&[section], &RawConfig::default(), &opts);
        let images = WorkerImages::new(&setup).unwrap();
        f(&images);
    }

    #[test]
    fn without_a_timeline_the_owner_says_who_runs() {
        with_raw(|images| {
            let setup = images.setup;
            let task = TaskId { pid: 7, tid: 8 };
            let ctx = Context::of(Some(Owner::Task(task)), setup);
            assert_eq!(ctx.task_at(123), Some(task));
            // A thread's buffer: its pid is its tid without a timeline.
            let ctx = Context::of(Some(Owner::Thread(9)), setup);
            assert_eq!(ctx.task_at(0), Some(TaskId { pid: 9, tid: 9 }));
            // A CPU's buffer needs the context switches.
            let mut ctx = Context::of(Some(Owner::Cpu(0)), setup);
            assert_eq!(ctx.task_at(0), None);
            ctx.next_switch_after(5);
            assert_eq!(ctx.next_switch, u64::MAX);
            assert_eq!(Context::of(None, setup).task_at(0), None);
            // No timeline: an enable takes the slack's time.
            ctx.task = Some(task);
            assert_eq!(ctx.image_time(0x1000, 20, 10), 20);
            // No sideband to replay.
            assert!(ctx.replay(0, EventPlace::Unknown).is_none());
        });
    }

    #[test]
    fn an_image_is_installed_once_per_version() {
        with_raw(|images| {
            let task = TaskId { pid: 7, tid: 8 };
            let mut ctx = Context::of(Some(Owner::Task(task)), images.setup);
            ctx.task = Some(task);
            let first = ctx.image_change(images, 0).expect("the first image");
            assert_eq!(&*first, &[images.isid(0).unwrap()]);
            // The same version later: nothing to install.
            assert!(ctx.image_change(images, 1_000).is_none());
            assert_eq!(ctx.image_until(), u64::MAX);
        });
    }

    /// A source built by hand: CPU 0 runs task A until 100, then B; the
    /// process of thread 5 is 50; process 1 maps code at 0x1000 from 10
    /// until 15 (when it execs).
    struct Scripted;

    const A: TaskId = TaskId { pid: 1, tid: 1 };
    const B: TaskId = TaskId { pid: 2, tid: 3 };

    impl TaskContext for Scripted {
        fn task_on_cpu(&self, cpu: u32, t: u64) -> Option<TaskId> {
            (cpu == 0).then_some(if t < 100 { A } else { B })
        }
        fn pid_of(&self, tid: u32, _: u64) -> Option<u32> {
            (tid == 5).then_some(50)
        }
        fn next_switch(&self, cpu: u32, now: u64) -> Option<u64> {
            (cpu == 0).then_some(if now < 100 { 100 } else { u64::MAX })
        }
        fn maps(&self, pid: u32, ip: u64, t: u64) -> Option<bool> {
            Some(pid == 1 && ip == 0x1000 && (10..15).contains(&t))
        }
        fn image_change(&mut self, _: &WorkerImages<'_, '_>, _: u32, _: u64) -> Option<Isids> {
            None
        }
        fn image_until(&self) -> u64 {
            u64::MAX
        }
        fn replay(&mut self, _: u64, _: EventPlace) -> Option<Vec<SbNote>> {
            None
        }
        fn note_missing(&self, _: u32, _: u64, _: u64) {}
    }

    #[test]
    fn the_context_asks_its_source_who_runs_and_what_is_mapped() {
        let mut cpu = Context::new(Some(Owner::Cpu(0)), Box::new(Scripted));
        assert_eq!(cpu.task_at(50), Some(A));
        assert_eq!(cpu.task_at(100), Some(B));
        cpu.next_switch_after(40);
        assert_eq!(cpu.next_switch, 100);
        cpu.next_switch_after(100);
        assert_eq!(cpu.next_switch, u64::MAX);
        // Another CPU's switches are not known: the last answer stays.
        let mut other = Context::new(Some(Owner::Cpu(1)), Box::new(Scripted));
        other.next_switch = 7;
        other.next_switch_after(0);
        assert_eq!(other.next_switch, 7);
        assert_eq!(other.task_at(0), None);
        // A thread's process from the source, else its tid.
        let thread = Context::new(Some(Owner::Thread(5)), Box::new(Scripted));
        assert_eq!(thread.task_at(0), Some(TaskId { pid: 50, tid: 5 }));
        let thread = Context::new(Some(Owner::Thread(6)), Box::new(Scripted));
        assert_eq!(thread.task_at(0), Some(TaskId { pid: 6, tid: 6 }));
        // An enable at 12 takes the image of 12 plus the slack (20), but
        // of 12 when only that one maps its IP: the exec at 15 must not
        // reach back.
        cpu.task = Some(A);
        assert_eq!(cpu.image_time(0x1000, 20, 12), 12);
        assert_eq!(cpu.image_time(0x1000, 14, 12), 14);
        // Not mapped now either (5): the slack's time.
        assert_eq!(cpu.image_time(0x1000, 20, 5), 20);
        // Another process, or no task: the slack's time.
        cpu.task = Some(B);
        assert_eq!(cpu.image_time(0x1000, 20, 12), 20);
        cpu.task = None;
        assert_eq!(cpu.image_time(0x1000, 20, 12), 20);
    }
}
