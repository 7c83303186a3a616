//! The decode set-up every worker shares ([`DecodeSetup`]): the libipt
//! configuration, the file sections of every image the trace may need, and
//! which sections make up a process's image at a time (from the sideband
//! timeline), or, for raw PT, the one image of the given sections.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use ipt::{AddrFilter, Config as PtConfig, Cpu, Frequency};
use sideband::timeconv::TscConversion;
use sideband::timeline::{Mapping, TaskId, Timeline};

use super::{DecodeOptions, OnError, RawConfig, RawSection};
use crate::model::slices::JumpSpans;
use crate::model::source::{BufferOwner, CodeImages, RawSideband, Recording, Segment, TraceSource};

/// A file section for libipt: `size` bytes at `offset` of `path` loaded at `vaddr`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct SectionSpec {
    pub path: String,
    pub offset: u64,
    pub size: u64,
    pub vaddr: u64,
}

/// A mapping's identity in the (immutable) timeline.
type MapKey = (u64, u64, u64, usize);

fn map_key(m: &Mapping) -> MapKey {
    (m.start, m.end, m.pgoff, Arc::as_ptr(&m.file) as usize)
}

/// The pid used for "no process known": the image is the kernel's only.
pub(super) const NO_PID: u32 = u32::MAX;

pub(super) fn is_kernel_ip(ip: u64) -> bool {
    ip >> 63 == 1
}

/// The processes whose code the trace may hold: those of per-thread
/// buffers' threads (restricted by the options' filters: other buffers are
/// not decoded), of tasks switched in on per-cpu buffers and of ITRACE_START
/// records (all of them: a per-cpu buffer is decoded whole, and its other
/// tasks' ops dropped).
fn traced_pids(
    trace: &dyn TraceSource,
    buffers: &[BufferOwner],
    opts: &DecodeOptions,
) -> BTreeSet<u32> {
    let tl = trace.timeline();
    let mut pids = BTreeSet::new();
    for b in buffers {
        if let Some(tid) = b.tid {
            let lifetimes = tl.thread_lifetimes(tid);
            let tasks = lifetimes
                .iter()
                .map(|th| TaskId { pid: th.pid, tid })
                .chain(lifetimes.is_empty().then_some(TaskId { pid: tid, tid }));
            pids.extend(tasks.filter(|t| opts.wants(*t)).map(|t| t.pid));
        }
        if let Some(cpu) = b.cpu {
            pids.extend(
                tl.cpu_slots(cpu)
                    .iter()
                    .filter_map(|s| s.task.map(|t| t.pid)),
            );
        }
    }
    pids.extend(trace.itrace_start_pids());
    pids
}

/// Where the running task, its image and perf time come from.
pub(super) enum Source<'t> {
    /// A perf.data trace: the sideband timeline and the images it names.
    Perf {
        timeline: &'t Timeline,
        images: &'t dyn CodeImages,
        /// TSC -> perf time, when the trace has a conversion.
        tsc: Option<TscConversion>,
        /// Whose trace each buffer holds.
        buffers: Vec<BufferOwner>,
        /// The sections of each mapping that has an image.
        map_specs: HashMap<MapKey, Vec<usize>>,
        /// Per pid: the times its image (or the kernel's) changes.
        changes: HashMap<u32, Vec<u64>>,
    },
    /// Raw PT (`ptdec raw`): one thread, one image of the given sections
    /// (the first `given` of [`DecodeSetup::sections`]; the sideband's
    /// follow), time in TSC ticks (or ns from a given TSC frequency).
    Raw {
        tsc_hz: Option<u64>,
        given: usize,
        sideband: Option<Arc<dyn RawSideband>>,
    },
}

/// What every worker shares: where images and times come from, the file
/// sections of every image, and libipt's configuration.
pub(super) struct DecodeSetup<'t> {
    pub src: Source<'t>,
    pub opts: &'t DecodeOptions,
    /// Every file section any image needs, each once; images are sets of
    /// indices into it.
    pub sections: Vec<SectionSpec>,
    pub freq: Frequency,
    /// The CPU, for libipt's errata workarounds.
    pub cpu: Option<Cpu>,
    /// How far (ns) a context switch or mmap may lie after libipt's time
    /// estimate for an enable and still apply to it
    /// ([`DecodeOptions::switch_slack_ns`]).
    pub switch_slack: u64,
    /// The trace has CYC packets: count cycles.
    pub cycles: bool,
    /// The max non-turbo ratio (CBR scale for cycles).
    pub max_non_turbo: u64,
    /// Per-cpu buffers (else per-thread).
    pub per_cpu: bool,
    /// Resynchronize at an error (`pt_blk_resync`) rather than at the next PSB.
    pub resync: bool,
    /// The address filter configuration the trace was recorded with, as
    /// libipt's errata workarounds need it (raw decodes: ptxed's
    /// `--filter:addrN_*`).
    pub addr_filters: [AddrFilter; 4],
    /// libipt's tick and iflags events (raw decodes: ptxed's `--event:*`).
    pub tick_events: bool,
    pub iflags_events: bool,
    /// Where the decode workers ask whether a jump stays in its function
    /// (`runs`'s quiet jumps); `None`: every jump is an op, none `inside`.
    pub jump_spans: Option<&'t dyn JumpSpans>,
}

/// How far (ns) a context switch or mmap may lie after libipt's time
/// estimate for an enable and still apply to it, when no option says
/// ([`DecodeOptions::switch_slack_ns`]): two MTC periods, within
/// 100 ns..1 ms; 1 µs without MTC or a time conversion.
fn default_switch_slack(rec: &Recording, mtc_bits: u8) -> u64 {
    let mtc = rec.mtc.unwrap_or(true);
    let (n, d) = (rec.tsc_ctc_ratio_n, rec.tsc_ctc_ratio_d);
    match (&rec.tsc, mtc && n != 0 && d != 0) {
        (Some(tc), true) => {
            let ticks = (2u64 << mtc_bits) * n / d;
            tc.tsc_to_perf_time(ticks)
                .wrapping_sub(tc.tsc_to_perf_time(0))
                .clamp(100, 1_000_000)
        }
        _ => 1_000,
    }
}

impl<'t> DecodeSetup<'t> {
    pub fn new(
        trace: &'t dyn TraceSource,
        images: &'t dyn CodeImages,
        opts: &'t DecodeOptions,
    ) -> Self {
        let rec = trace.recording();
        let tl = trace.timeline();
        let buffers = trace.buffers();
        let mut specs = Vec::new();
        let mut spec_index: HashMap<SectionSpec, usize> = HashMap::new();
        let mut map_specs: HashMap<MapKey, Vec<usize>> = HashMap::new();
        let mut add = |spec: SectionSpec| -> usize {
            *spec_index.entry(spec.clone()).or_insert_with(|| {
                specs.push(spec);
                specs.len() - 1
            })
        };
        let kernel_history = tl.kernel_map().history();
        let mut kernel_changes = Vec::new();
        // Kernel code (image and modules) comes from the kernel image (kcore
        // maps the modules too), never from the module files.
        let kernel = rec.kernel_traced.then(|| images.kernel_code()).flatten();
        for m in kernel_history {
            kernel_changes.push(m.since);
            kernel_changes.push(m.until);
            let Some(img) = &kernel else {
                continue;
            };
            let path = img.path.to_string_lossy().into_owned();
            let mut v = Vec::new();
            for s in &img.segments {
                let lo = s.vaddr.max(m.start);
                let hi = s.vaddr.saturating_add(s.filesz).min(m.end);
                if lo < hi {
                    v.push(add(SectionSpec {
                        path: path.clone(),
                        offset: s.file_offset + (lo - s.vaddr),
                        size: hi - lo,
                        vaddr: lo,
                    }));
                }
            }
            map_specs.insert(map_key(m), v);
        }
        let mut changes = HashMap::new();
        for pid in traced_pids(trace, &buffers, opts) {
            let mut c = kernel_changes.clone();
            if let Some(pm) = tl.process_maps(pid) {
                for m in pm.history() {
                    c.push(m.since);
                    c.push(m.until);
                    // None for the kernel's names too: its code comes
                    // from the kernel image above.
                    let Some(img) = images.user_code(&m.file) else {
                        continue;
                    };
                    let spec = SectionSpec {
                        path: img.path.to_string_lossy().into_owned(),
                        offset: m.pgoff,
                        size: m.end - m.start,
                        vaddr: m.start,
                    };
                    if m.pgoff < img.size {
                        let i = add(spec);
                        map_specs.insert(map_key(m), vec![i]);
                    }
                }
            }
            c.retain(|&t| t != u64::MAX);
            c.sort_unstable();
            c.dedup();
            changes.insert(pid, c);
        }
        kernel_changes.retain(|&t| t != u64::MAX);
        kernel_changes.sort_unstable();
        kernel_changes.dedup();
        changes.insert(NO_PID, kernel_changes);

        // perf's default when the attr is absent: mtc_period=3.
        let mtc_bits = rec.mtc_period.unwrap_or(3).min(15);
        let freq = Frequency {
            mtc_freq: mtc_bits,
            nom_freq: rec.max_non_turbo_ratio.min(255) as u8,
            cpuid_15_ebx: rec.tsc_ctc_ratio_n as u32,
            cpuid_15_eax: rec.tsc_ctc_ratio_d as u32,
        };
        let cpu = rec.intel_cpu.map(|(family, model, stepping)| Cpu {
            family,
            model,
            stepping,
        });
        let slack = opts
            .switch_slack_ns
            .unwrap_or_else(|| default_switch_slack(&rec, mtc_bits));
        DecodeSetup {
            src: Source::Perf {
                timeline: tl,
                images,
                tsc: rec.tsc,
                buffers,
                map_specs,
                changes,
            },
            opts,
            sections: specs,
            freq,
            cpu,
            switch_slack: slack,
            cycles: rec.cyc.unwrap_or(false),
            max_non_turbo: rec.max_non_turbo_ratio,
            per_cpu: rec.per_cpu,
            resync: opts.on_error == OnError::Resync,
            addr_filters: Default::default(),
            tick_events: false,
            iflags_events: false,
            jump_spans: None,
        }
    }

    /// The plan of a raw decode: every section is in the one image.
    pub fn raw(sections: &[RawSection], cfg: &RawConfig, opts: &'t DecodeOptions) -> Self {
        let sideband = cfg.sideband.as_ref().map(|s| s.0.clone());
        let sb_sections = sideband.iter().flat_map(|s| s.sections().iter());
        let specs = sections
            .iter()
            .chain(sb_sections)
            .map(|s| SectionSpec {
                path: s.path.to_string_lossy().into_owned(),
                offset: s.offset,
                size: s.size,
                vaddr: s.vaddr,
            })
            .collect();
        DecodeSetup {
            src: Source::Raw {
                tsc_hz: cfg.tsc_hz.filter(|&hz| hz > 0),
                given: sections.len(),
                sideband,
            },
            opts,
            sections: specs,
            freq: Frequency {
                mtc_freq: cfg.mtc_freq,
                nom_freq: cfg.nom_freq,
                cpuid_15_eax: cfg.cpuid_15_eax,
                cpuid_15_ebx: cfg.cpuid_15_ebx,
            },
            cpu: cfg.cpu.map(|(family, model, stepping)| Cpu {
                family,
                model,
                stepping,
            }),
            switch_slack: 0,
            cycles: cfg.cycles,
            max_non_turbo: u64::from(cfg.nom_freq),
            per_cpu: false,
            resync: opts.on_error == OnError::Resync,
            addr_filters: cfg.addr_filters,
            tick_events: cfg.tick_events,
            iflags_events: cfg.iflags_events,
            jump_spans: None,
        }
    }

    /// libipt's configuration: blocks end at every call and jump, so each
    /// control transfer is seen. A CPU libipt knows no errata for decodes
    /// by the spec (a raw decode refuses it before, in [`decode_raw`]).
    pub fn pt_config(&self) -> PtConfig {
        let mut c = PtConfig::default();
        c.set_freq(self.freq);
        c.set_block_flags(true, true);
        c.set_addr_filters(self.addr_filters);
        c.set_block_events(self.tick_events, self.iflags_events);
        if let Some(cpu) = self.cpu {
            let _ = c.set_cpu(cpu);
        }
        c
    }

    /// A raw decode's perf_event sideband.
    pub fn sideband(&self) -> Option<&dyn RawSideband> {
        match &self.src {
            Source::Raw {
                sideband: Some(sb), ..
            } => Some(&**sb),
            _ => None,
        }
    }

    /// Where the sideband's sections start in [`DecodeSetup::sections`].
    pub fn sideband_base(&self) -> usize {
        match &self.src {
            Source::Raw { given, .. } => *given,
            Source::Perf { .. } => 0,
        }
    }

    pub fn perf_time(&self, tsc: u64) -> u64 {
        match &self.src {
            Source::Perf { tsc: conv, .. } => conv.map_or(tsc, |c| c.tsc_to_perf_time(tsc)),
            Source::Raw { tsc_hz: None, .. } => tsc,
            Source::Raw {
                tsc_hz: Some(hz), ..
            } => {
                (u128::from(tsc) * 1_000_000_000 / u128::from(*hz)).min(u128::from(u64::MAX)) as u64
            }
        }
    }

    /// The version of `pid`'s image at `t`, and until when it holds.
    pub fn version(&self, pid: u32, t: u64) -> (usize, u64) {
        let Source::Perf { changes, .. } = &self.src else {
            return (0, u64::MAX);
        };
        let c = changes
            .get(&pid)
            .or_else(|| changes.get(&NO_PID))
            .map_or(&[][..], Vec::as_slice);
        let v = c.partition_point(|&x| x <= t);
        (v, c.get(v).copied().unwrap_or(u64::MAX))
    }

    /// The section specs of `pid`'s image at `t` (user mappings, then kernel).
    pub fn image_specs(&self, pid: u32, t: u64) -> Vec<usize> {
        let Source::Perf {
            timeline: tl,
            map_specs,
            ..
        } = &self.src
        else {
            let given = match &self.src {
                Source::Raw { given, .. } => *given,
                Source::Perf { .. } => 0,
            };
            return (0..given).collect();
        };
        let user = (pid != NO_PID)
            .then(|| tl.image_map(pid, t))
            .into_iter()
            .flat_map(|m| m.iter());
        user.chain(tl.kernel_map().at(t))
            .filter_map(|m| map_specs.get(&map_key(m)))
            .flatten()
            .copied()
            .collect()
    }

    /// Whether the buffer of segment `s` may hold ops of wanted threads.
    pub fn wanted(&self, s: &Segment) -> bool {
        let Source::Perf {
            timeline: tl,
            buffers,
            ..
        } = &self.src
        else {
            return true;
        };
        if !self.opts.filtered() {
            return true;
        }
        let b = &buffers[s.buffer];
        if self.per_cpu {
            match b.cpu {
                Some(cpu) if !tl.cpu_slots(cpu).is_empty() => tl
                    .cpu_slots(cpu)
                    .iter()
                    .any(|sl| sl.task.is_some_and(|t| self.opts.wants(t))),
                _ => true,
            }
        } else {
            match b.tid {
                Some(tid) => {
                    let lifetimes = tl.thread_lifetimes(tid);
                    if lifetimes.is_empty() {
                        self.opts.wants(TaskId { pid: tid, tid })
                    } else {
                        lifetimes
                            .iter()
                            .any(|th| self.opts.wants(TaskId { pid: th.pid, tid }))
                    }
                }
                None => true,
            }
        }
    }
}

// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use sideband::timeline::MappedFile;

    use super::*;
    use crate::model::source::{CodeFile, KernelCode};

    /// A trace built by hand, through the contract alone: one per-cpu
    /// buffer, CYC and MTC, an Intel CPU, perf time equal to the TSC.
    struct Handmade {
        timeline: Timeline,
        kernel_traced: bool,
    }

    impl TraceSource for Handmade {
        fn recording(&self) -> Recording {
            Recording {
                per_cpu: true,
                cyc: Some(true),
                mtc: Some(true),
                mtc_period: Some(3),
                tsc_ctc_ratio_n: 100,
                tsc_ctc_ratio_d: 2,
                max_non_turbo_ratio: 24,
                tsc: Some(TscConversion::new(0, 1, 0).unwrap()),
                intel_cpu: Some((6, 78, 3)),
                kernel_traced: self.kernel_traced,
            }
        }
        fn timeline(&self) -> &Timeline {
            &self.timeline
        }
        fn buffers(&self) -> Vec<BufferOwner> {
            vec![BufferOwner {
                cpu: Some(0),
                tid: None,
            }]
        }
        fn itrace_start_pids(&self) -> Vec<u32> {
            Vec::new()
        }
        fn segments(&self) -> Vec<Segment> {
            Vec::new()
        }
        fn buffer_file(&self, _: usize) -> &[u8] {
            &[]
        }
        fn release(&self, _: &[u8]) {}
        fn build_ids(&self) -> &[(String, Vec<u8>)] {
            &[]
        }
    }

    /// Images that have nothing, counting how often the kernel is asked for.
    #[derive(Default)]
    struct NoImages {
        kernel_asked: AtomicUsize,
    }

    impl CodeImages for NoImages {
        fn add_known_build_ids(&self, _: &[(String, Vec<u8>)]) {}
        fn kernel_code(&self) -> Option<KernelCode> {
            self.kernel_asked.fetch_add(1, Ordering::Relaxed);
            None
        }
        fn user_code(&self, _: &MappedFile) -> Option<CodeFile> {
            None
        }
        fn note_undecoded(&self, _: &MappedFile, _: u32, _: u64, _: u64) {}
    }

    #[test]
    fn the_set_up_takes_what_the_recording_says() {
        let trace = Handmade {
            timeline: Timeline::new(),
            kernel_traced: true,
        };
        let images = NoImages::default();
        let opts = DecodeOptions::default();
        let setup = DecodeSetup::new(&trace, &images, &opts);
        assert!(setup.per_cpu && setup.cycles);
        assert_eq!(setup.max_non_turbo, 24);
        let cpu = Cpu {
            family: 6,
            model: 78,
            stepping: 3,
        };
        assert_eq!(setup.cpu, Some(cpu));
        assert_eq!((setup.freq.mtc_freq, setup.freq.nom_freq), (3, 24));
        assert_eq!((setup.freq.cpuid_15_ebx, setup.freq.cpuid_15_eax), (100, 2));
        // Two MTC periods: 2 << 3 CTC ticks of 100 / 2 TSC ticks, in ns.
        assert_eq!(setup.switch_slack, 800);
        assert_eq!(setup.perf_time(1234), 1234);
        assert_eq!(images.kernel_asked.load(Ordering::Relaxed), 1);
        // Not traced: the kernel image is not looked for.
        let user_only = Handmade {
            kernel_traced: false,
            ..trace
        };
        DecodeSetup::new(&user_only, &images, &opts);
        assert_eq!(images.kernel_asked.load(Ordering::Relaxed), 1);
    }
}
