//! A per-core bundle's context-switch files, read straight into the
//! timeline: each file is mapped and read twice (once to check it, once
//! to apply it), and its records are never held, parsed or copied. They
//! are applied in time order across the cores, as perf's ordered queue
//! would deliver them from one file: by a merge of the cores when each
//! file is in time order (LLDB's are: each is a core's perf ring), else
//! by a sort of a 24-byte index of them (a file out of order).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use sideband::attr::{flags, Attr, AttrSet, ATTR_SIZE_VER7};
use sideband::bytes::FileBytes;
use sideband::parse::{parse_event_le, ring_records, RawRecord, RecordHeader};
use sideband::record::{Event, Record};
use sideband::sample::sample_type as st;
use sideband::timeline::Timeline;

use super::{printable_path, sid, BCore, Kind, Warnings};

/// Pages of a file read before they are dropped from memory (they stay
/// readable: [`FileBytes::release`]).
const RELEASE_EVERY: usize = 1 << 20;

/// One core's context-switch file, mapped, up to its first record that
/// cannot be read.
pub(super) struct CoreSwitches {
    core: u32,
    bytes: FileBytes,
    /// The end of the records read.
    end: usize,
    /// Whether its switches are in time order.
    sorted: bool,
}

/// The attrs LLDB's context-switch event had: `sample_id_all` with
/// TID | TIME.
fn lldb_attrs() -> AttrSet {
    let mut lldb = AttrSet::new();
    lldb.push(
        Attr {
            kind: 1,
            config: 9,
            size: ATTR_SIZE_VER7,
            sample_type: st::TID | st::TIME,
            flags: flags::SAMPLE_ID_ALL | flags::CONTEXT_SWITCH,
            ..Attr::default()
        },
        Vec::new(),
    );
    lldb
}

/// The record at `pos` of `bytes` (which holds whole records up to
/// `end`), as a switch of `core` (the core added to it), and where the
/// next record starts. `None` at the end.
fn next_switch(
    attrs: &AttrSet,
    bytes: &[u8],
    pos: usize,
    end: usize,
    core: u32,
) -> Option<(usize, Option<Event<'static>>)> {
    let rest = bytes.get(pos..end).filter(|r| !r.is_empty())?;
    let header = RecordHeader::parse::<sideband::endian::Le>(rest)?;
    let size = usize::from(header.size);
    let raw = RawRecord {
        offset: pos as u64,
        header,
        bytes: rest.get(..size)?,
        payload: &[],
    };
    Some((
        pos + size,
        switch_of(parse_event_le(attrs, &raw).ok()?, core),
    ))
}

/// A parsed record as the switch of `core` the timeline is given, `None`
/// when it is not a SWITCH_CPU_WIDE.
fn switch_of(ev: Event<'_>, core: u32) -> Option<Event<'static>> {
    let Record::SwitchCpuWide {
        next_prev_pid,
        next_prev_tid,
    } = ev.record
    else {
        return None;
    };
    let s = ev.sample_id;
    Some(Event {
        misc: ev.misc,
        record: Record::SwitchCpuWide {
            next_prev_pid,
            next_prev_tid,
        },
        sample_id: sid(
            s.pid.unwrap_or(0),
            s.tid.unwrap_or(0),
            s.time.unwrap_or(0),
            core,
        ),
    })
}

/// Maps a core's context-switch records, as LLDB saved them (the perf
/// ring of a context-switch event with `sample_id_all` and TID | TIME),
/// and checks them: a cut or unreadable record ends the file with a
/// warning. `None` (with a warning) when the file cannot be read.
pub(super) fn open(core: &BCore, warnings: &mut Warnings) -> Option<CoreSwitches> {
    let bytes = match crate::inputs::open_regular(&core.switches).and_then(FileBytes::map_file) {
        Ok(b) => b,
        Err(e) => {
            warnings.push(
                Kind::Core,
                false,
                format!("cannot read {}: {e}", printable_path(&core.switches)),
            );
            return None;
        }
    };
    let attrs = lldb_attrs();
    let (mut end, mut sorted, mut last, mut released) = (0, true, 0, 0);
    for raw in ring_records(&bytes) {
        match raw.and_then(|raw| parse_event_le(&attrs, &raw).map(|ev| (raw, ev))) {
            Ok((raw, ev)) => {
                end = raw.offset as usize + raw.bytes.len();
                if let Some(sw) = switch_of(ev, core.id) {
                    let t = sw.sample_id.time.unwrap_or(0);
                    sorted &= t >= last;
                    last = t;
                }
            }
            Err(e) => {
                warnings.push(
                    Kind::Core,
                    false,
                    format!(
                        "{}: {e}; the records after it are not read",
                        printable_path(&core.switches)
                    ),
                );
                break;
            }
        }
        if end - released >= RELEASE_EVERY {
            bytes.release(&bytes[..end]);
            released = end;
        }
    }
    bytes.release(&bytes[..end]);
    Some(CoreSwitches {
        core: core.id,
        bytes,
        end,
        sorted,
    })
}

/// Applies the switches of `cores` to `timeline` in time order (equal
/// times in the order of the cores, then of the files, as a stable sort
/// of them all would), after whatever it holds. Returns the first and
/// last of their times other than 0.
pub(super) fn apply(timeline: &mut Timeline, cores: &[CoreSwitches]) -> Option<(u64, u64)> {
    let attrs = lldb_attrs();
    let mut span: Option<(u64, u64)> = None;
    let mut apply_one = |timeline: &mut Timeline, e: &Event<'_>| {
        if let Some(t) = e.sample_id.time.filter(|&t| t != 0) {
            span = Some(span.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
        }
        timeline.apply(e);
    };
    // The next switch of core `i` at or after `pos`: its time, event,
    // offset, and where the record after it starts.
    let next = |i: usize, mut pos: usize| -> Option<(u64, Event<'static>, usize, usize)> {
        let c = &cores[i];
        loop {
            let (after, sw) = next_switch(&attrs, &c.bytes, pos, c.end, c.core)?;
            if let Some(sw) = sw {
                return Some((sw.sample_id.time.unwrap_or(0), sw, pos, after));
            }
            pos = after;
        }
    };
    if cores.iter().all(|c| c.sorted) {
        // Each core's head in a heap by (time, core): the earliest next.
        let mut heads: Vec<Option<(Event<'static>, usize)>> = Vec::with_capacity(cores.len());
        let mut heap = BinaryHeap::with_capacity(cores.len());
        for i in 0..cores.len() {
            heads.push(next(i, 0).map(|(t, sw, _, after)| {
                heap.push(Reverse((t, i)));
                (sw, after)
            }));
        }
        let mut released = vec![0usize; cores.len()];
        // What waits: a head per core (the tests bound it by the cores).
        let head_bytes = std::mem::size_of::<Reverse<(u64, usize)>>()
            + std::mem::size_of::<Option<(Event<'static>, usize)>>();
        timeline.note_waiting(heap.len(), heap.len() * head_bytes);
        while let Some(Reverse((_, i))) = heap.pop() {
            let Some((sw, after)) = heads[i].take() else {
                continue;
            };
            apply_one(timeline, &sw);
            if after - released[i] >= RELEASE_EVERY {
                cores[i].bytes.release(&cores[i].bytes[..after]);
                released[i] = after;
            }
            if let Some((t, sw, _, after)) = next(i, after) {
                heap.push(Reverse((t, i)));
                heads[i] = Some((sw, after));
            }
        }
        return span;
    }
    // A file out of order: the switches' (time, core, offset), sorted
    // (stably: by core then offset among equal times), read back in turn.
    let mut index: Vec<(u64, u32, usize)> = Vec::new();
    for (i, c) in cores.iter().enumerate() {
        let mut pos = 0;
        while let Some((t, _, at, after)) = next(i, pos) {
            index.push((t, i as u32, at));
            pos = after;
        }
        c.bytes.release(&c.bytes[..c.end]);
    }
    index.sort_by_key(|&(t, _, _)| t);
    timeline.note_waiting(
        index.len(),
        index.len() * std::mem::size_of::<(u64, u32, usize)>(),
    );
    for (_, i, at) in index {
        if let Some((_, sw, _, _)) = next(i as usize, at) {
            apply_one(timeline, &sw);
        }
    }
    span
}

#[cfg(test)]
mod tests {
    use super::*;
    use sideband::record::misc;

    /// LLDB's form of a switch: SWITCH_CPU_WIDE with TID | TIME.
    fn record(out: bool, next_prev: u32, tid: u32, time: u64) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&15u32.to_le_bytes());
        r.extend_from_slice(&(if out { misc::SWITCH_OUT } else { 0 }).to_le_bytes());
        r.extend_from_slice(&32u16.to_le_bytes());
        for v in [1, next_prev, 1, tid] {
            r.extend_from_slice(&v.to_le_bytes());
        }
        r.extend_from_slice(&time.to_le_bytes());
        r
    }

    /// The timeline of `files` (each core's records) as `apply` builds
    /// it, and as the stable sort of them all that it replaces did.
    fn both(files: &[Vec<(bool, u32, u32, u64)>]) -> (Timeline, Timeline) {
        let dir = tempfile::tempdir().unwrap();
        let mut warnings = Warnings::default();
        let mut all = Vec::new();
        let cores: Vec<CoreSwitches> = files
            .iter()
            .enumerate()
            .map(|(i, recs)| {
                let path = dir.path().join(format!("{i}.switches"));
                let bytes: Vec<u8> = recs
                    .iter()
                    .flat_map(|&(o, n, t, time)| record(o, n, t, time))
                    .collect();
                std::fs::write(&path, &bytes).unwrap();
                let core = BCore {
                    id: i as u32,
                    trace: 0,
                    switches: path,
                    switches_file: (0, i as u64),
                };
                let attrs = lldb_attrs();
                let mut pos = 0;
                while let Some((after, sw)) = next_switch(&attrs, &bytes, pos, bytes.len(), core.id)
                {
                    all.extend(sw);
                    pos = after;
                }
                open(&core, &mut warnings).unwrap()
            })
            .collect();
        assert_eq!(warnings.total(), 0);
        let mut streamed = Timeline::new();
        apply(&mut streamed, &cores);
        all.sort_by_key(|e| e.sample_id.time);
        let mut sorted = Timeline::new();
        for e in &all {
            sorted.apply(e);
        }
        (streamed, sorted)
    }

    fn same(files: &[Vec<(bool, u32, u32, u64)>]) {
        let (streamed, sorted) = both(files);
        for cpu in 0..files.len() as u32 {
            assert!(!sorted.cpu_slots(cpu).is_empty());
            assert_eq!(streamed.cpu_slots(cpu), sorted.cpu_slots(cpu), "cpu {cpu}");
        }
        // The same but for what waited to be merged (nothing, sorted).
        let mut waited = *streamed.stats();
        assert!(waited.waiting_peak > 0);
        (waited.waiting_peak, waited.waiting_peak_bytes) = (0, 0);
        assert_eq!(&waited, sorted.stats());
    }

    #[test]
    fn cores_in_order_are_merged_as_sorted() {
        // Equal times across the cores: the first core's first.
        same(&[
            vec![(true, 3, 2, 10), (false, 2, 3, 20), (true, 4, 3, 30)],
            vec![(true, 5, 6, 10), (false, 6, 5, 20), (true, 3, 5, 25)],
        ]);
    }

    #[test]
    fn a_core_out_of_order_is_sorted_by_an_index() {
        same(&[
            vec![(true, 3, 2, 10), (false, 2, 3, 40), (true, 4, 3, 30)],
            vec![(false, 6, 5, 30), (true, 5, 6, 10), (true, 3, 5, 30)],
        ]);
    }
}
