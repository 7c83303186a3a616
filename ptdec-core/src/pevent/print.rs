//! ptxed's `--sb:*` printing of perf_event sideband for `ptdec raw
//! --insn-list`: each record as ptxed prints it at the moment it is applied
//! (`--sb:compact` one line, `--sb:verbose` a field a line, with the file
//! name, offset and time in front when asked), and the new image's name on
//! a context switch (`--sb:switch`). A record's text is made once, when its
//! file is read; the replay in [`super::Session`] hands it to the listing.
//!
//! The format is libipt-sb's, learned from its printing code and the
//! `.exp` files of libipt's test suite (which `decoder/tests/ptt.rs`
//! compares with): hex numbers without `0x`, offsets and times on 16
//! digits, two spaces between the parts.

use std::fmt::Write;

use sideband::record::{aux_flags, kind, misc, Event, Record, SampleId};

/// How records are printed: one line, or one field a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SbFormat {
    /// `--sb:compact` (or `--sb`).
    Compact,
    /// `--sb:verbose`.
    Verbose,
}

/// What ptxed's `--sb:*` options ask to be listed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SbPrint {
    /// The record itself, and its samples (`--sb:compact`, `--sb:verbose`;
    /// the one given last counts).
    pub format: Option<SbFormat>,
    /// The sideband file's name in front (`--sb:filename`).
    pub filename: bool,
    /// The record's offset in the file (or its range) in front (`--sb:offset`).
    pub offset: bool,
    /// The record's time, as TSC, in front when it has a time (`--sb:time`).
    pub time: bool,
    /// `[context: pid-N]` when the image changes to another process's
    /// (`--sb:switch`).
    pub switch: bool,
    /// Warnings too, not only errors (`--sb:warn`).
    pub warnings: bool,
}

impl SbPrint {
    /// Whether each record gets a line. As in ptxed, any of the options
    /// gives one, so `--sb:offset` alone lists the offsets.
    pub fn records(&self) -> bool {
        self.format.is_some() || self.filename || self.offset || self.time
    }
}

/// Whether libipt's perf_event reader knows a record type. It reads the
/// body and the samples of those only: others are printed as `UNKNOWN`,
/// without samples, and (without a time) are applied at once.
pub(super) fn libipt_knows(k: u32) -> bool {
    matches!(
        k,
        kind::MMAP
            | kind::LOST
            | kind::COMM
            | kind::EXIT
            | kind::THROTTLE
            | kind::UNTHROTTLE
            | kind::FORK
            | kind::MMAP2
            | kind::AUX
            | kind::ITRACE_START
            | kind::LOST_SAMPLES
            | kind::SWITCH
            | kind::SWITCH_CPU_WIDE
    )
}

/// One record to print: where it is, its type, and what was read of it.
pub(super) struct RecordView<'a> {
    /// The sideband file as given on the command line.
    pub file: &'a str,
    /// Offset in the file (or its range).
    pub offset: u64,
    /// `perf_event_header.type`.
    pub kind: u32,
    /// The parsed record.
    pub event: &'a Event<'a>,
    /// The record's bytes after the header (MMAP2's inode fields are
    /// printed from them, whatever their form).
    pub body: &'a [u8],
    /// The record's time as TSC (after `--pevent:tsc-offset`), if it has one.
    pub tsc: Option<u64>,
}

/// A field written in verbose form: `\n  NAME: VALUE`.
fn field(out: &mut String, name: &str, value: impl std::fmt::LowerHex) {
    let _ = write!(out, "\n  {name}: {value:x}");
}

/// The text of one record as ptxed prints it (without the line's end), or
/// `None` when `p` asks for no record lines.
pub(super) fn record_text(p: &SbPrint, r: &RecordView<'_>) -> Option<String> {
    if !p.records() {
        return None;
    }
    let mut out = String::new();
    match (p.filename, p.offset) {
        (true, true) => {
            let _ = write!(out, "{}:{:016x}  ", r.file, r.offset);
        }
        (true, false) => {
            let _ = write!(out, "{}  ", r.file);
        }
        (false, true) => {
            let _ = write!(out, "{:016x}  ", r.offset);
        }
        (false, false) => {}
    }
    if let (true, Some(tsc)) = (p.time, r.tsc) {
        let _ = write!(out, "{tsc:016x}  ");
    }
    let Some(format) = p.format else {
        return Some(out);
    };
    let known = libipt_knows(r.kind) && body_text(&mut out, format, r);
    if !known {
        match format {
            SbFormat::Compact => {
                let _ = write!(out, "UNKNOWN ({:x}, {:x})  {{ }}", r.kind, r.event.misc);
            }
            SbFormat::Verbose => {
                out.push_str("UNKNOWN");
                field(&mut out, "type", r.kind);
                field(&mut out, "misc", r.event.misc);
            }
        }
        return Some(out);
    }
    samples_text(&mut out, format, &r.event.sample_id);
    Some(out)
}

/// The record's name and fields; false when the parsed record is not of
/// the type the header says (then it is printed as unknown). Compact form
/// puts the fields on the name's line; verbose form a field a line.
fn body_text(out: &mut String, format: SbFormat, r: &RecordView<'_>) -> bool {
    let compact = format == SbFormat::Compact;
    let ev = r.event;
    match (r.kind, &ev.record) {
        (kind::MMAP, Record::Mmap(m)) => mmap_text(out, compact, m),
        (kind::MMAP2, Record::Mmap(m)) if r.body.len() >= 64 => mmap2_text(out, compact, m, r.body),
        (kind::COMM, Record::Comm { pid, tid, comm }) => {
            let name = if ev.misc & misc::COMM_EXEC != 0 {
                "PERF_RECORD_COMM.EXEC"
            } else {
                "PERF_RECORD_COMM"
            };
            head(out, compact, name, format_args!("{pid:x}/{tid:x}, {comm}"));
            if !compact {
                field(out, "pid", *pid);
                field(out, "tid", *tid);
                let _ = write!(out, "\n  comm: {comm}");
            }
        }
        (kind::EXIT, Record::Exit(t)) | (kind::FORK, Record::Fork(t)) => {
            let name = if r.kind == kind::EXIT {
                "PERF_RECORD_EXIT"
            } else {
                "PERF_RECORD_FORK"
            };
            task_text(out, compact, name, t);
        }
        (kind::SWITCH, Record::Switch) | (kind::SWITCH_CPU_WIDE, Record::SwitchCpuWide { .. }) => {
            switch_text(out, compact, ev);
        }
        _ => return counter_text(out, compact, r.kind, &ev.record),
    }
    true
}

/// A record's name, then in compact form its fields on the same line.
fn head(out: &mut String, compact: bool, name: &str, fields: std::fmt::Arguments) {
    out.push_str(name);
    if compact {
        let _ = write!(out, "  {fields}");
    }
}

/// PERF_RECORD_MMAP.
fn mmap_text(out: &mut String, compact: bool, m: &sideband::record::Mmap) {
    head(
        out,
        compact,
        "PERF_RECORD_MMAP",
        format_args!(
            "{:x}/{:x}, {:x}, {:x}, {:x}, {}",
            m.pid, m.tid, m.addr, m.len, m.pgoff, m.filename
        ),
    );
    if !compact {
        mapping_fields(out, m);
        let _ = write!(out, "\n  filename: {}", m.filename);
    }
}

/// PERF_RECORD_MMAP2, whose device, inode and protection fields are read
/// from the record's body (`body` holds at least 64 bytes).
fn mmap2_text(out: &mut String, compact: bool, m: &sideband::record::Mmap, body: &[u8]) {
    let u32_at = |o: usize| u32::from_le_bytes(body[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(body[o..o + 8].try_into().unwrap());
    let (maj, min, ino, ino_gen) = (u32_at(32), u32_at(36), u64_at(40), u64_at(48));
    let (prot, flags) = (u32_at(56), u32_at(60));
    head(
        out,
        compact,
        "PERF_RECORD_MMAP2",
        format_args!(
            "{:x}/{:x}, {:x}, {:x}, {:x}, {maj:x}, {min:x}, {ino:x}, {ino_gen:x}, \
             {prot:x}, {flags:x}, {}",
            m.pid, m.tid, m.addr, m.len, m.pgoff, m.filename
        ),
    );
    if !compact {
        mapping_fields(out, m);
        field(out, "maj", maj);
        field(out, "min", min);
        field(out, "ino", ino);
        field(out, "ino_generation", ino_gen);
        field(out, "prot", prot);
        field(out, "flags", flags);
        let _ = write!(out, "\n  filename: {}", m.filename);
    }
}

/// The fields MMAP and MMAP2 share, in verbose form.
fn mapping_fields(out: &mut String, m: &sideband::record::Mmap) {
    field(out, "pid", m.pid);
    field(out, "tid", m.tid);
    field(out, "addr", m.addr);
    field(out, "len", m.len);
    field(out, "pgoff", m.pgoff);
}

/// PERF_RECORD_EXIT and PERF_RECORD_FORK.
fn task_text(out: &mut String, compact: bool, name: &str, t: &sideband::record::Task) {
    head(
        out,
        compact,
        name,
        format_args!(
            "{:x}/{:x}, {:x}/{:x}, {:x}",
            t.pid, t.tid, t.ppid, t.ptid, t.time
        ),
    );
    if !compact {
        field(out, "pid", t.pid);
        field(out, "ppid", t.ppid);
        field(out, "tid", t.tid);
        field(out, "ptid", t.ptid);
        field(out, "time", t.time);
    }
}

/// PERF_RECORD_SWITCH (the same in both forms: no fields) and
/// PERF_RECORD_SWITCH_CPU_WIDE.
fn switch_text(out: &mut String, compact: bool, ev: &Event<'_>) {
    let switched_out = ev.misc & misc::SWITCH_OUT != 0;
    let Record::SwitchCpuWide {
        next_prev_pid,
        next_prev_tid,
    } = ev.record
    else {
        out.push_str(if switched_out {
            "PERF_RECORD_SWITCH.OUT"
        } else {
            "PERF_RECORD_SWITCH.IN"
        });
        return;
    };
    let (dir, who) = if switched_out {
        ("OUT", "next")
    } else {
        ("IN", "prev")
    };
    let _ = write!(out, "PERF_RECORD_SWITCH_CPU_WIDE.{dir}");
    if compact {
        let _ = write!(out, "  {next_prev_pid:x}/{next_prev_tid:x}");
    } else {
        field(out, &format!("{who} pid"), next_prev_pid);
        field(out, &format!("{who} tid"), next_prev_tid);
    }
}

/// The records of lost data, throttling, AUX and trace starts; false when
/// `record` is not of type `kind`.
fn counter_text(out: &mut String, compact: bool, kind: u32, record: &Record<'_>) -> bool {
    match (kind, record) {
        (kind::LOST, Record::Lost { id, lost }) => {
            head(
                out,
                compact,
                "PERF_RECORD_LOST",
                format_args!("{id:x}, {lost:x}"),
            );
            if !compact {
                field(out, "id", *id);
                field(out, "lost", *lost);
            }
        }
        (
            kind::THROTTLE | kind::UNTHROTTLE,
            Record::Throttle {
                time,
                id,
                stream_id,
                ..
            },
        ) => {
            let name = if kind == kind::THROTTLE {
                "PERF_RECORD_THROTTLE"
            } else {
                "PERF_RECORD_UNTHROTTLE"
            };
            head(
                out,
                compact,
                name,
                format_args!("{time:x}, {id:x}, {stream_id:x}"),
            );
            if !compact {
                field(out, "time", *time);
                field(out, "id", *id);
                field(out, "stream_id", *stream_id);
            }
        }
        (
            kind::AUX,
            Record::Aux {
                aux_offset,
                aux_size,
                flags,
            },
        ) => {
            let name = if flags & aux_flags::TRUNCATED != 0 {
                "PERF_RECORD_AUX.TRUNCATED"
            } else {
                "PERF_RECORD_AUX"
            };
            head(
                out,
                compact,
                name,
                format_args!("{aux_offset:x}, {aux_size:x}, {flags:x}"),
            );
            if !compact {
                field(out, "aux offset", *aux_offset);
                field(out, "aux size", *aux_size);
                field(out, "flags", *flags);
            }
        }
        (kind::ITRACE_START, Record::ItraceStart { pid, tid }) => {
            head(
                out,
                compact,
                "PERF_RECORD_ITRACE_START",
                format_args!("{pid:x}/{tid:x}"),
            );
            if !compact {
                field(out, "pid", *pid);
                field(out, "tid", *tid);
            }
        }
        (kind::LOST_SAMPLES, Record::LostSamples { lost }) => {
            head(
                out,
                compact,
                "PERF_RECORD_LOST_SAMPLES",
                format_args!("{lost:x}"),
            );
            if !compact {
                field(out, "lost", *lost);
            }
        }
        _ => return false,
    }
    true
}

/// The samples of the `sample_id_all` trailer: `  { pid/tid time id
/// cpu-N stream identifier }`, or a field a line.
fn samples_text(out: &mut String, format: SbFormat, s: &SampleId) {
    match format {
        SbFormat::Compact => {
            out.push_str("  {");
            if let (Some(pid), Some(tid)) = (s.pid, s.tid) {
                let _ = write!(out, " {pid:x}/{tid:x}");
            }
            if let Some(t) = s.time {
                let _ = write!(out, " {t:x}");
            }
            if let Some(id) = s.id {
                let _ = write!(out, " {id:x}");
            }
            if let Some(cpu) = s.cpu {
                let _ = write!(out, " cpu-{cpu:x}");
            }
            if let Some(sid) = s.stream_id {
                let _ = write!(out, " {sid:x}");
            }
            if let Some(ident) = s.identifier {
                let _ = write!(out, " {ident:x}");
            }
            out.push_str(" }");
        }
        SbFormat::Verbose => {
            if let (Some(pid), Some(tid)) = (s.pid, s.tid) {
                field(out, "pid", pid);
                field(out, "tid", tid);
            }
            if let Some(t) = s.time {
                field(out, "time", t);
            }
            if let Some(id) = s.id {
                field(out, "id", id);
            }
            if let Some(cpu) = s.cpu {
                field(out, "cpu", cpu);
            }
            if let Some(sid) = s.stream_id {
                field(out, "stream id", sid);
            }
            if let Some(ident) = s.identifier {
                field(out, "identifier", ident);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sideband::record::{Mmap, Task};

    fn event(record: Record<'static>, misc: u16, sample_id: SampleId) -> Event<'static> {
        Event {
            misc,
            record,
            sample_id,
        }
    }

    fn text(p: SbPrint, kind: u32, ev: &Event<'_>, body: &[u8], tsc: Option<u64>) -> String {
        record_text(
            &p,
            &RecordView {
                file: "cpu0.sb",
                offset: 0x28,
                kind,
                event: ev,
                body,
                tsc,
            },
        )
        .unwrap()
    }

    fn compact() -> SbPrint {
        SbPrint {
            format: Some(SbFormat::Compact),
            ..SbPrint::default()
        }
    }

    fn verbose() -> SbPrint {
        SbPrint {
            format: Some(SbFormat::Verbose),
            ..SbPrint::default()
        }
    }

    fn mmap() -> Event<'static> {
        let m = Mmap {
            pid: 0x1a,
            tid: 0x1b,
            addr: 0x1000,
            len: 0x5,
            pgoff: 0,
            file_id: None,
            prot: None,
            flags: None,
            filename: "a.bin".into(),
        };
        let s = SampleId {
            pid: Some(1),
            tid: Some(2),
            time: Some(0x10),
            cpu: Some(3),
            ..SampleId::default()
        };
        event(Record::Mmap(m), 0, s)
    }

    #[test]
    fn compact_is_one_line_with_its_samples() {
        let ev = mmap();
        assert_eq!(
            text(compact(), kind::MMAP, &ev, &[], Some(0x99)),
            "PERF_RECORD_MMAP  1a/1b, 1000, 5, 0, a.bin  { 1/2 10 cpu-3 }"
        );
        let all = SbPrint {
            filename: true,
            offset: true,
            time: true,
            ..compact()
        };
        assert_eq!(
            text(all, kind::MMAP, &ev, &[], Some(0x99)),
            "cpu0.sb:0000000000000028  0000000000000099  \
             PERF_RECORD_MMAP  1a/1b, 1000, 5, 0, a.bin  { 1/2 10 cpu-3 }"
        );
        // No time sample: no time, whatever --sb:time says.
        let t = SbPrint {
            time: true,
            ..compact()
        };
        let ev = event(Record::Switch, misc::SWITCH_OUT, SampleId::default());
        assert_eq!(
            text(t, kind::SWITCH, &ev, &[], None),
            "PERF_RECORD_SWITCH.OUT  { }"
        );
    }

    #[test]
    fn verbose_is_a_field_a_line() {
        let t = Task {
            pid: 2,
            ppid: 1,
            tid: 2,
            ptid: 1,
            time: 0x20,
        };
        let ev = event(
            Record::Fork(t),
            0,
            SampleId {
                time: Some(0x20),
                ..SampleId::default()
            },
        );
        assert_eq!(
            text(verbose(), kind::FORK, &ev, &[], Some(0x20)),
            "PERF_RECORD_FORK\n  pid: 2\n  ppid: 1\n  tid: 2\n  ptid: 1\n  time: 20\n  time: 20"
        );
        let ev = event(
            Record::SwitchCpuWide {
                next_prev_pid: 5,
                next_prev_tid: 6,
            },
            misc::SWITCH_OUT,
            SampleId::default(),
        );
        assert_eq!(
            text(verbose(), kind::SWITCH_CPU_WIDE, &ev, &[], None),
            "PERF_RECORD_SWITCH_CPU_WIDE.OUT\n  next pid: 5\n  next tid: 6"
        );
        assert_eq!(
            text(compact(), kind::SWITCH_CPU_WIDE, &ev, &[], None),
            "PERF_RECORD_SWITCH_CPU_WIDE.OUT  5/6  { }"
        );
    }

    #[test]
    fn mmap2_fields_come_from_the_bytes() {
        let mut body = vec![0u8; 72];
        body[32..36].copy_from_slice(&8u32.to_le_bytes()); // maj
        body[36..40].copy_from_slice(&1u32.to_le_bytes()); // min
        body[40..48].copy_from_slice(&0x1234u64.to_le_bytes()); // ino
        body[56..60].copy_from_slice(&5u32.to_le_bytes()); // prot
        body[60..64].copy_from_slice(&2u32.to_le_bytes()); // flags
        let ev = mmap();
        assert_eq!(
            text(compact(), kind::MMAP2, &ev, &body, None),
            "PERF_RECORD_MMAP2  1a/1b, 1000, 5, 0, 8, 1, 1234, 0, 5, 2, a.bin  { 1/2 10 cpu-3 }"
        );
    }

    #[test]
    fn types_libipt_does_not_read_are_unknown_without_samples() {
        let ev = event(Record::Switch, 0x2, SampleId::default());
        assert_eq!(
            text(compact(), kind::KSYMBOL, &ev, &[], None),
            "UNKNOWN (11, 2)  { }"
        );
        assert_eq!(
            text(verbose(), kind::KSYMBOL, &ev, &[], None),
            "UNKNOWN\n  type: 11\n  misc: 2"
        );
        assert!(!libipt_knows(kind::SAMPLE));
    }

    #[test]
    fn prefixes_alone_still_make_a_line_and_nothing_makes_none() {
        let ev = mmap();
        let p = SbPrint {
            offset: true,
            ..SbPrint::default()
        };
        assert_eq!(text(p, kind::MMAP, &ev, &[], None), "0000000000000028  ");
        let none = SbPrint {
            switch: true,
            warnings: true,
            ..SbPrint::default()
        };
        let view = RecordView {
            file: "f",
            offset: 0,
            kind: kind::MMAP,
            event: &ev,
            body: &[],
            tsc: None,
        };
        assert_eq!(record_text(&none, &view), None);
    }
}
