//! The chunk decoder's events: who runs (a context switch, an enable on a
//! CPU's buffer), whose image the flow decoder sees (from the perf
//! timeline or a raw decode's sideband, through `Context`), and the
//! events libipt hands out, turned into ops and marks.

use super::*;

impl<'i, 's, 't> ChunkDecoder<'i, 's, 't, '_> {
    /// The task running at `t` on this buffer.
    pub(super) fn task_at(&self, t: u64) -> Option<TaskId> {
        self.ctx.task_at(t)
    }

    /// Makes `task` the current one: closes the current run, starts another.
    pub(super) fn switch_to(&mut self, task: Option<TaskId>, ip: u64) {
        self.ctx.next_switch_after(self.clock.time);
        if task == self.ctx.task && (self.run.is_some() || task.is_none()) {
            return;
        }
        if let Some(mut r) = self.run.take() {
            if self.last_closed(&r) == Some(false) {
                let at = Stamp {
                    time: self.clock.time,
                    insns: r.insns,
                    cycles: self.cycles.then_some(r.cycles).into(),
                };
                r.push(Op::Disabled {
                    at,
                    ip,
                    kernel: true,
                });
            }
            self.runs_ops += r.ops.len();
            self.runs.push(r);
        }
        self.continued = None;
        // Marks made while a transfer was pending stay in the run they
        // are in.
        self.marks_at = None;
        self.ctx.task = task;
        self.run = task.map(|task| Run::new(task, self.clock.time, self.pool.take()));
        if self.run.is_some() && std::mem::take(&mut self.lost_first) {
            self.stats.lost_data += 1;
            self.gap(GapKind::LostData, 0);
        }
    }

    /// perf_event sideband: libipt-sb's `pt_sb_event` on every event
    /// ([`super::super::context::TaskContext::replay`]). A changed image
    /// goes into the decoder at once; what is to be listed is returned, for
    /// [`Self::list_notes`] after the event's own line.
    pub(super) fn on_sideband(&mut self, dec: &mut impl FlowDecoder, ev: &PtEvent) -> Vec<SbNote> {
        let place = event_place(ev);
        let Some(notes) = self.ctx.replay(ev.time_tsc(), place) else {
            return Vec::new();
        };
        self.refresh_image(dec, self.clock.time);
        notes
    }

    /// Lists the sideband's records, warnings and switches.
    pub(super) fn list_notes(&self, notes: Vec<SbNote>) {
        for n in notes {
            self.list(ListItem::Sideband(n));
        }
    }

    /// Puts the image of the current task at `t` into the decoder.
    pub(super) fn refresh_image(&mut self, dec: &mut impl FlowDecoder, t: u64) {
        if let Some(isids) = self.ctx.image_change(self.images, t) {
            self.set_image(dec, &isids);
        }
    }

    /// Puts the sections `isids` into the decoder, with the patched copies
    /// of emulated ptwrite functions among them.
    pub(super) fn set_image(&self, dec: &mut impl FlowDecoder, isids: &[u32]) {
        let overlays = self.images.emu.overlays(isids);
        dec.set_image(isids, &overlays);
    }

    /// The task running where tracing (re)starts at perf time `now`: on a
    /// CPU's buffer a real enable looks the switch slack later, past a
    /// late switch record; at a chunk's PSB (`sync`) tracing was already
    /// on, and the task is the one running at `now`.
    pub(super) fn task_enabled_at(&self, now: u64, sync: bool) -> Option<TaskId> {
        match self.ctx.owner {
            Some(Owner::Cpu(_)) if !sync => {
                self.task_at(now.saturating_add(self.setup().switch_slack))
            }
            _ => self.task_at(now),
        }
    }

    /// The time whose image the current task takes where tracing
    /// (re)starts at `ip` at perf time `now`: now plus the slack, or now
    /// ([`Context::image_time`]).
    pub(super) fn image_time_enabled(&self, ip: u64, now: u64) -> u64 {
        let t = now.saturating_add(self.setup().switch_slack);
        self.ctx.image_time(ip, t, now)
    }

    /// Tracing (re)starts at `ip`: pick the task and image, emit `Enabled`
    /// ([`Self::task_enabled_at`]; `sync`: at a chunk's PSB).
    pub(super) fn enable(&mut self, dec: &mut impl FlowDecoder, ip: u64, sync: bool) {
        let now = self.clock.time;
        let task = self.task_enabled_at(now, sync);
        self.switch_to(task, ip);
        let image_t = self.image_time_enabled(ip, now);
        self.refresh_image(dec, image_t);
        let at = self.stamp();
        self.push(Op::Enabled {
            at,
            ip,
            first: false,
        });
        self.need_enable = false;
        self.at_start = false;
        self.last_ip = ip;
        self.update_follow(dec);
    }

    pub(super) fn on_event(&mut self, dec: &mut impl FlowDecoder, ev: &PtEvent) {
        // Status updates (libipt's state at a PSB+) change nothing; an
        // untraced stretch starts at a real disable while tracing is on
        // (`need_enable` is false once a traced block or enable was seen)
        // and ends at the next enable, so its slices pair one to one.
        let update = ev.status_update();
        // A CBR restated by a PSB+ decoded through is marked once the
        // decoder is at the PSB's IP ([`Self::release_cbr`]).
        // (An enable's update comes where the PSB is reached, before
        // the walk; a MODE.Exec's once at its IP.)
        let at_ip = !matches!(ev.kind(), EventKind::Enabled { .. })
            && matches!(event_place(ev), EventPlace::Ip(_));
        if !update || at_ip {
            self.release_cbr();
        }
        if update && at_ip {
            self.psb_ip_insns = Some(self.stats.insns);
        }
        match ev.kind() {
            EventKind::Enabled { ip, .. } => {
                if update && !self.need_enable {
                    return;
                }
                self.list(ListItem::Enabled);
                self.resolve(Some(ip));
                // Tracing is on at the chunk's PSB: the ordering stage may
                // drop this enable (see the module doc).
                let sync = update && self.at_start && !self.meta.first;
                self.enable(dec, ip, sync);
                if sync {
                    self.sync_task = self.ctx.task;
                }
            }
            EventKind::Disabled { ip } => {
                if update || self.need_enable {
                    self.need_enable = true;
                    return;
                }
                self.list(ListItem::Disabled);
                self.resolve(ip);
                let at = self.stamp();
                self.push(Op::Disabled {
                    at,
                    ip: ip.unwrap_or(self.last_ip),
                    kernel: ip.is_none_or(is_kernel_ip),
                });
                self.need_enable = true;
            }
            EventKind::AsyncDisabled { at: from, ip } => {
                if update || self.need_enable {
                    self.need_enable = true;
                    return;
                }
                self.list(ListItem::Disabled);
                self.resolve(Some(from));
                let at = self.stamp();
                self.push(Op::Disabled {
                    at,
                    ip: from,
                    kernel: ip.is_none_or(is_kernel_ip),
                });
                self.last_ip = from;
                self.need_enable = true;
            }
            EventKind::AsyncBranch { from, to } => {
                if self.need_enable {
                    // Nothing decoded since the (re)sync: a resync at an
                    // interrupt's FUP in code without an image. Neither
                    // where it came from nor a frame it returns to was
                    // decoded: no call (an open frame would end the gap,
                    // and each would start another). A handler the
                    // decoder can follow starts with the enable of its
                    // first block, as at a PSB.
                    self.drop_pending();
                    self.last_ip = to.unwrap_or(from);
                    return;
                }
                self.resolve(Some(from));
                let to = to.unwrap_or(from);
                let at = self.stamp();
                // An interrupt returns to the instruction it interrupted.
                self.push(Op::Call {
                    at,
                    from,
                    to,
                    ret: from,
                    raw_time: at.time,
                });
                self.last_ip = to;
            }
            EventKind::Overflow { ip } => {
                self.drop_pending();
                self.at_start = false;
                self.stats.overflows += 1;
                self.list(ListItem::Overflow);
                // An overflow before tracing was first enabled still
                // belongs to the buffer's task: start its run for the gap.
                if self.run.is_none() {
                    let task = self.task_at(self.clock.time);
                    self.switch_to(task, ip.unwrap_or(0));
                }
                let off = self.offset(dec).unwrap_or(0);
                self.gap(GapKind::Overflow, off);
                match ip {
                    Some(ip) => self.enable(dec, ip, false),
                    None => self.need_enable = true,
                }
            }
            EventKind::Stop => {
                self.resolve(None);
                if update || self.need_enable {
                    self.need_enable = true;
                    return;
                }
                let at = self.stamp();
                self.push(Op::Disabled {
                    at,
                    ip: self.last_ip,
                    kernel: false,
                });
                self.need_enable = true;
            }
            EventKind::Cbr { .. } => {
                if let Ok(c) = dec.core_bus_ratio() {
                    self.clock.cbr = c;
                }
                // Every PSB+ restates the CBR: a restatement of the ratio
                // the chunk has already marked is no change. At the next
                // chunk's PSB after an error (`at_boundary`), that chunk
                // marks what its PSB+ states: the ordering stage drops a
                // first CBR mark that restates the last one handed on,
                // but not two (a hostile PSB+ with two CBRs gave two
                // pairs of marks here).
                let ratio = match ev.kind() {
                    EventKind::Cbr { ratio } => Some(ratio),
                    _ => None,
                };
                if !(update && (ratio == self.marked_cbr || self.edges.at_boundary)) {
                    if self.marked_cbr.is_none() && update {
                        self.sync_cbr = ratio;
                    }
                    self.marked_cbr = ratio;
                    if update
                        && !self.need_enable
                        && self.run.is_some()
                        && self.psb_ip_insns != Some(self.stats.insns)
                    {
                        // One held already (a PSB+ with no status update
                        // bound to an IP, as hostile PT makes): marked
                        // first, not lost.
                        if let Some(k) = self.held_cbr.replace(ev.kind()) {
                            self.on_mark(&k);
                        }
                    } else {
                        self.on_mark(&ev.kind());
                    }
                }
            }
            k @ EventKind::Trig { number, mult, .. } => {
                self.list(ListItem::Trig { number, mult });
                self.on_mark(&k);
            }
            k => self.on_mark(&k),
        }
    }

    /// Marks the CBR a PSB+ decoded through restated (`held_cbr`).
    ///
    /// libipt hands out a PSB+'s status updates where it reaches the PSB:
    /// those that carry its IP once it has walked there (the code up to
    /// it may need no packet: a direct jump), the others (a CBR) at once.
    /// A chunk cut at that PSB starts with the CBR, the walk the chunk
    /// before's; decoded through, the mark came before the walk. So a
    /// CBR update that comes before the decoder is at the PSB's IP (no
    /// status update bound to an IP, as a MODE.Exec's, since the last
    /// instruction) is held until one comes, or any event that is not a
    /// status update.
    pub(super) fn release_cbr(&mut self) {
        if let Some(kind) = self.held_cbr.take() {
            self.on_mark(&kind);
        }
    }

    /// PTWRITE, power and event-trace events become marks on the running
    /// thread (also in traces without branches, which have no `Enabled`).
    pub(super) fn on_mark(&mut self, kind: &EventKind) {
        let cpu = match self.ctx.owner {
            Some(Owner::Cpu(c)) => Some(c),
            _ => None,
        };
        let Some(mark) = crate::events::mark_of(kind, cpu) else {
            return;
        };
        if self.run.is_none() || (self.need_enable && self.clock.time >= self.ctx.next_switch) {
            let task = self.task_at(self.clock.time);
            self.switch_to(task, self.last_ip);
        }
        self.at_start = false;
        let at = self.stamp();
        if self.pending.set && self.marks_at.is_none() {
            // The branch pending was taken before this event: its op
            // goes before the mark once its target is known
            // ([`ChunkDecoder::resolve_before_marks`]).
            self.marks_at = self.run.as_ref().map(|r| r.ops.len());
        }
        self.push(Op::Mark {
            at,
            mark: Box::new(mark),
        });
    }
}
