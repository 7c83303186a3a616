//! One concern of the chunk decoder (`chunk`): its context. Who runs on
//! the chunk's buffer (its owner: a CPU, a thread or one known task) and
//! whose code the flow decoder sees, from either of two sources: the perf
//! timeline of a trace dir or LLDB bundle (context switches, mappings
//! over time), or a raw decode's perf_event sideband replayed event by
//! event (`crate::pevent`, as libipt-sb's `pt_sb_event` beside libipt's
//! decoder). It says which image to install and when; the chunk decoder
//! installs it and builds the runs.

use std::rc::Rc;

use sideband::timeline::TaskId;

use super::setup::{DecodeSetup, NO_PID};
use super::worker_images::WorkerImages;
use crate::pevent::{ImageSel, Session};

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

/// See the module doc.
pub(super) struct Context<'i> {
    pub owner: Option<Owner>,
    /// The task whose code is decoded now.
    pub task: Option<TaskId>,
    /// (pid, map version) of the image in the decoder, and until when
    /// (perf time) that version holds.
    image: Option<(u32, usize)>,
    pub image_until: u64,
    /// A raw decode's perf_event sideband, replayed at each event, and
    /// the image of it in the decoder (which, and how many sections).
    sb: Option<Session<'i>>,
    sb_installed: Option<(ImageSel, usize)>,
    /// Perf time of the next context switch on this CPU.
    pub next_switch: u64,
}

/// An image to put into the decoder: its section ids.
pub(super) type Isids = Rc<[u32]>;

impl<'i> Context<'i> {
    pub(super) fn new(owner: Option<Owner>, sb: Option<Session<'i>>) -> Self {
        Context {
            owner,
            task: None,
            image: None,
            image_until: 0,
            sb,
            sb_installed: None,
            next_switch: u64::MAX,
        }
    }

    /// The task running at `t` on this buffer.
    pub(super) fn task_at(&self, setup: &DecodeSetup<'_>, t: u64) -> Option<TaskId> {
        let tl = setup.timeline();
        match self.owner? {
            Owner::Cpu(cpu) => tl?.task_on_cpu(cpu, t),
            Owner::Thread(tid) => Some(TaskId {
                pid: tl.and_then(|tl| tl.thread(tid, t)).map_or(tid, |th| th.pid),
                tid,
            }),
            Owner::Task(task) => Some(task),
        }
    }

    /// At perf time `now`, on a CPU's buffer: when the next context switch
    /// comes.
    pub(super) fn next_switch_after(&mut self, setup: &DecodeSetup<'_>, now: u64) {
        if let (Some(Owner::Cpu(cpu)), Some(tl)) = (self.owner, setup.timeline()) {
            let slots = tl.cpu_slots(cpu);
            let i = slots.partition_point(|s| s.since <= now);
            self.next_switch = slots.get(i).map_or(u64::MAX, |s| s.since);
        }
    }

    /// The time whose image an enable at `ip` takes: `t` (now plus the
    /// slack that lets a mapping made just before tracing resumed count
    /// although the decoder's time lags), but `now` when only that one
    /// maps `ip`: the slack must not reach past an exec that follows soon
    /// after (a forked child runs a few hundred ns of its parent's code
    /// before execve).
    pub(super) fn image_time(&self, setup: &DecodeSetup<'_>, ip: u64, t: u64, now: u64) -> u64 {
        match (setup.timeline(), self.task) {
            (Some(tl), Some(task))
                if tl.lookup(task.pid, ip, t).is_none()
                    && tl.lookup(task.pid, ip, now).is_some() =>
            {
                now
            }
            _ => t,
        }
    }

    /// The sideband session, to replay an event into.
    pub(super) fn session(&mut self) -> Option<&mut Session<'i>> {
        self.sb.as_mut()
    }

    /// The image of the current task at `t`, when it is not the one in
    /// the decoder (with a sideband: the image it says).
    pub(super) fn image_change(&mut self, images: &WorkerImages<'_, '_>, t: u64) -> Option<Isids> {
        if self.sb.is_some() {
            return self.sb_image_change(images);
        }
        let pid = self.task.map_or(NO_PID, |t| t.pid);
        let (v, until) = images.setup.version(pid, t);
        self.image_until = until;
        if self.image == Some((pid, v)) {
            return None;
        }
        self.image = Some((pid, v));
        Some(images.image(pid, v, t))
    }

    /// The image the sideband says, when it is not the one in the
    /// decoder.
    pub(super) fn sb_image_change(&mut self, images: &WorkerImages<'_, '_>) -> Option<Isids> {
        let sb = self.sb.as_ref()?;
        let sel = sb.image();
        let n = match sel {
            ImageSel::Given => 0,
            ImageSel::Context(c) => sb.sections(c).len(),
        };
        if self.sb_installed == Some((sel, n)) {
            return None;
        }
        self.sb_installed = Some((sel, n));
        Some(match sel {
            ImageSel::Given => {
                let pid = self.task.map_or(NO_PID, |t| t.pid);
                images.image(pid, 0, 0)
            }
            ImageSel::Context(c) => {
                let base = images.setup.sideband_base();
                sb.sections(c)
                    .iter()
                    .filter_map(|&i| images.isid(base + i))
                    .collect()
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{DecodeOptions, RawConfig};
    use crate::raw::RawSection;

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
            let ctx = Context::new(Some(Owner::Task(task)), None);
            assert_eq!(ctx.task_at(setup, 123), Some(task));
            // A thread's buffer: its pid is its tid without a timeline.
            let ctx = Context::new(Some(Owner::Thread(9)), None);
            assert_eq!(ctx.task_at(setup, 0), Some(TaskId { pid: 9, tid: 9 }));
            // A CPU's buffer needs the context switches.
            let mut ctx = Context::new(Some(Owner::Cpu(0)), None);
            assert_eq!(ctx.task_at(setup, 0), None);
            ctx.next_switch_after(setup, 5);
            assert_eq!(ctx.next_switch, u64::MAX);
            assert_eq!(Context::new(None, None).task_at(setup, 0), None);
            // No timeline: an enable takes the slack's time.
            assert_eq!(ctx.image_time(setup, 0x1000, 20, 10), 20);
        });
    }

    #[test]
    fn an_image_is_installed_once_per_version() {
        with_raw(|images| {
            let task = TaskId { pid: 7, tid: 8 };
            let mut ctx = Context::new(Some(Owner::Task(task)), None);
            ctx.task = Some(task);
            let first = ctx.image_change(images, 0).expect("the first image");
            assert_eq!(&*first, &[images.isid(0).unwrap()]);
            // The same version later: nothing to install.
            assert!(ctx.image_change(images, 1_000).is_none());
            assert_eq!(ctx.image_until, u64::MAX);
            assert!(ctx.sb_image_change(images).is_none());
        });
    }
}
