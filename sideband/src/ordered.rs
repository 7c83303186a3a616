//! Time-ordered delivery of records that arrive per-cpu-stream ordered only,
//! the way perf's ordered events work (`tools/perf/util/ordered-events.c`,
//! `session.c`). It sits between a record source (a perf.data file, ptrec's
//! live rings) and a consumer such as the [`crate::timeline::Timeline`].
//!
//! # The rule, as perf applies it
//!
//! perf record drains every cpu's ring once per *round* and then writes a
//! FINISHED_ROUND record. Each ring is in time order, but a round holds the
//! rings one after another, so records of round N can be older than the tail
//! of round N-1 (a ring drained early in round N-1 may have received records
//! that predate the last record of a ring drained late). perf assumes that
//! whatever is older than the largest time seen by the end of round N-1 has
//! been read by the end of round N, and keeps
//!
//! * `max_timestamp`: the largest time queued (the tail of the sorted queue);
//! * `next_flush`: the flush limit, 0 at the start.
//!
//! On FINISHED_ROUND (`ordered_events__flush(oe, OE_FLUSH__ROUND)`): if the
//! queue is empty nothing happens at all (not even `next_flush` moves);
//! otherwise every queued record with `time <= next_flush` is delivered in time
//! order (none when `next_flush` is 0, i.e. on the first round), and then
//! `next_flush = max_timestamp`. So the records seen up to round mark K are
//! released at mark K+1, up to the largest time seen by mark K — records of
//! round K+1 older than that limit are still released in order, because they
//! were queued before the flush. Worked example (perf's comment in session.c):
//!
//! ```text
//!   round n:   cpu0: 1 2      cpu1: 2 3 4   mark: flush <= (previous max), next_flush = 4
//!   round n+1: cpu0: 3 4 5    cpu1: 5 6 7   mark: flush <= 4 (1 2 2 3 3 4 4), next_flush = 7
//!   round n+2: cpu0: 6 7      cpu1: 8 9 10  mark: flush <= 7 (5 5 6 6 7 7), next_flush = 10
//!   end of file: flush everything (8 9 10)
//! ```
//!
//! Equal times keep their arrival order (perf's `queue_event` inserts after
//! every queued record with `time <= new`). At the end of the input perf
//! flushes everything (`OE_FLUSH__FINAL`); [`OrderedEvents::flush_all`].
//! A record queued with a time below the last delivered one is still queued
//! and delivered at the next flush (perf counts it in `nr_unordered_events`;
//! [`OrderedEvents::out_of_order`]); consumers must tolerate that.
//!
//! # Records without a time pass through
//!
//! perf delivers at once, at their position in the input, whatever has no
//! usable time: perf's user records (types >= 64: AUXTRACE_INFO, TIME_CONV,
//! AUXTRACE, ID_INDEX, ...; FINISHED_ROUND triggers the flush instead), and
//! kernel records whose time is absent (no `sample_id_all`), 0 (records perf
//! synthesized for tasks that existed before the recording: their sample_id is
//! zeroed) or `u64::MAX` (`ordered_events__queue` returns `-ETIME`). Such a
//! record overtakes queued records that precede it in the input. We do the same.
//!
//! perf also flushes half the queue when it hits its memory limit
//! (`OE_FLUSH__HALF`, up to the time midway between the oldest queued and
//! the last queued), but that limit is unset by default (`ordered_events__init`
//! sets `max_alloc_size` to `(u64)-1`; only `perf report --queue-size`
//! sets one): we have none and do not flush so, since a file without
//! FINISHED_ROUND is the one whose rings arrive out of order, and a
//! flush by time would apply its late records out of order where perf
//! sorts them. Memory stays bounded by the file instead: a waiting record costs
//! 16 bytes and its `E`: a reader of a mapped file queues the record's
//! offset, not the record ([`crate::timeline::Replay`]), so that a file
//! without FINISHED_ROUND, whose timed records all wait for its end, costs
//! 24 bytes a record.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::record::{Event, Record};

/// Where a record goes in the ordered stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Queue it at this perf time (ns).
    Timed(u64),
    /// Deliver it now, at its input position.
    Untimed,
    /// A FINISHED_ROUND mark: flush, do not deliver.
    RoundEnd,
}

impl Arrival {
    /// perf's rule for a time read from a record: 0 and `u64::MAX` mean "no time".
    pub fn from_time(time: Option<u64>) -> Self {
        match time {
            Some(t) if t != 0 && t != u64::MAX => Arrival::Timed(t),
            _ => Arrival::Untimed,
        }
    }
}

/// Events that know their place in the ordered stream. Implemented for
/// [`Event`]; a live-ring event type can implement it to use
/// [`OrderedEvents::process`].
pub trait Timestamped {
    fn arrival(&self) -> Arrival;
}

/// The time perf orders a record by (`evlist__parse_sample_timestamp`): the
/// sample's own time for SAMPLE, the `sample_id_all` trailer's time for other
/// kernel records, none for perf's user records.
pub fn order_time(event: &Event<'_>) -> Option<u64> {
    match &event.record {
        Record::Sample(s) => s.time.or(event.sample_id.time),
        Record::Unknown { kind, .. } if *kind >= crate::record::kind::HEADER_ATTR => None,
        r if is_user_record(r) => None,
        _ => event.sample_id.time,
    }
}

fn is_user_record(r: &Record<'_>) -> bool {
    matches!(
        r,
        Record::HeaderAttr { .. }
            | Record::HeaderFeature { .. }
            | Record::HeaderBuildId { .. }
            | Record::HeaderTracingData { .. }
            | Record::FinishedRound
            | Record::FinishedInit
            | Record::IdIndex(_)
            | Record::AuxtraceInfo(_)
            | Record::Auxtrace(_)
            | Record::AuxtraceError { .. }
            | Record::ThreadMap(_)
            | Record::CpuMap(_)
            | Record::TimeConv(_)
    )
}

impl Timestamped for Event<'_> {
    fn arrival(&self) -> Arrival {
        if matches!(self.record, Record::FinishedRound) {
            return Arrival::RoundEnd;
        }
        Arrival::from_time(order_time(self))
    }
}

/// perf's ordered-events queue, generic over an owned event type: borrowed
/// [`Event<'a>`]s of a mapped perf.data file, `Event<'static>` from live rings,
/// or anything else.
#[derive(Debug)]
pub struct OrderedEvents<E> {
    /// A heap by (time, arrival number): time order, stable for equal
    /// times. (A heap is a vector: 16 bytes a record besides `E`, where a
    /// `BTreeMap` of the same took about 40, its nodes half full when
    /// records come in order.)
    queue: BinaryHeap<Reverse<Queued<E>>>,
    /// The latest time queued (perf's `max_timestamp`): records leave the
    /// queue oldest first, so it holds until the queue is empty.
    max_time: u64,
    seq: u64,
    next_flush: u64,
    last_flush: u64,
    out_of_order: u64,
    /// The most records queued at once.
    peak: usize,
}

/// A queued record, ordered by its time and arrival only.
#[derive(Debug)]
struct Queued<E> {
    time: u64,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Queued<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}

impl<E> Eq for Queued<E> {}

impl<E> PartialOrd for Queued<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Queued<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.time, self.seq).cmp(&(other.time, other.seq))
    }
}

impl<E> Default for OrderedEvents<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> OrderedEvents<E> {
    pub fn new() -> Self {
        Self {
            queue: BinaryHeap::new(),
            max_time: 0,
            seq: 0,
            next_flush: 0,
            last_flush: 0,
            out_of_order: 0,
            peak: 0,
        }
    }

    /// Queues `event` at `time`, or hands it back when it has no usable time
    /// (`None`, 0, `u64::MAX`): the caller delivers it now.
    #[must_use = "an untimed event is handed back and must be delivered by the caller"]
    pub fn push(&mut self, time: Option<u64>, event: E) -> Option<E> {
        match Arrival::from_time(time) {
            Arrival::Timed(t) => {
                if t < self.last_flush {
                    self.out_of_order += 1;
                }
                self.max_time = match self.queue.is_empty() {
                    true => t,
                    false => self.max_time.max(t),
                };
                self.queue.push(Reverse(Queued {
                    time: t,
                    seq: self.seq,
                    event,
                }));
                self.peak = self.peak.max(self.queue.len());
                self.seq += 1;
                None
            }
            _ => Some(event),
        }
    }

    /// A FINISHED_ROUND mark: the records to deliver now, in time order
    /// (perf's `OE_FLUSH__ROUND`, see the module doc).
    pub fn finished_round(&mut self) -> Flush<'_, E> {
        if self.queue.is_empty() {
            return Flush {
                queue: self,
                limit: None,
            };
        }
        let limit = (self.next_flush != 0).then_some(self.next_flush);
        self.next_flush = self.max_time;
        Flush { queue: self, limit }
    }

    /// Delivers every record with `time <= limit` (perf's `OE_FLUSH__TIME`,
    /// for live sources that know no older record can still arrive). Like
    /// perf, the limit becomes the next round's flush limit.
    pub fn flush_until(&mut self, limit: u64) -> Flush<'_, E> {
        if self.queue.is_empty() {
            return Flush {
                queue: self,
                limit: None,
            };
        }
        self.next_flush = limit;
        Flush {
            queue: self,
            limit: Some(limit),
        }
    }

    /// Delivers everything (perf's `OE_FLUSH__FINAL`, at the end of the input).
    pub fn flush_all(&mut self) -> Flush<'_, E> {
        if self.queue.is_empty() {
            return Flush {
                queue: self,
                limit: None,
            };
        }
        self.next_flush = u64::MAX;
        Flush {
            queue: self,
            limit: Some(u64::MAX),
        }
    }

    /// Records waiting for a flush.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The most records that waited at once (a high-water mark of
    /// [`OrderedEvents::len`]).
    pub fn peak(&self) -> usize {
        self.peak
    }

    /// The bytes a queued record takes in the queue: 16 and its `E`
    /// (the heap's vector may have up to twice as many slots).
    pub const fn entry_bytes() -> usize {
        std::mem::size_of::<Reverse<Queued<E>>>()
    }

    /// Records that arrived older than the last delivered one (perf's
    /// `nr_unordered_events`); they were delivered late, out of order.
    pub fn out_of_order(&self) -> u64 {
        self.out_of_order
    }
}

impl<E: Timestamped> OrderedEvents<E> {
    /// Feeds one record in input order, as perf's `perf_session__process_event`
    /// does, and calls `deliver` with every record that is due: the record
    /// itself when it has no time, the flushed records on FINISHED_ROUND
    /// (the mark itself is not delivered), nothing when it was queued. Call
    /// [`OrderedEvents::finish`] at the end of the input.
    pub fn process(&mut self, event: E, mut deliver: impl FnMut(E)) {
        match event.arrival() {
            Arrival::RoundEnd => self.finished_round().for_each(deliver),
            Arrival::Untimed => deliver(event),
            Arrival::Timed(t) => {
                if let Some(e) = self.push(Some(t), event) {
                    deliver(e);
                }
            }
        }
    }

    /// The end of the input: delivers everything still queued.
    pub fn finish(&mut self, deliver: impl FnMut(E)) {
        self.flush_all().for_each(deliver);
    }
}

/// The records a flush releases, oldest first. Records not taken (the
/// iterator dropped early) stay queued for the next flush.
#[derive(Debug)]
pub struct Flush<'q, E> {
    queue: &'q mut OrderedEvents<E>,
    limit: Option<u64>,
}

impl<E> Iterator for Flush<'_, E> {
    type Item = E;

    fn next(&mut self) -> Option<E> {
        let limit = self.limit?;
        if self.queue.queue.peek()?.0.time > limit {
            return None;
        }
        let Reverse(q) = self.queue.queue.pop()?;
        self.queue.last_flush = q.time;
        Some(q.event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::SampleId;

    /// Runs (cpu, time) records and round marks (`None`) through the queue;
    /// returns the delivered records and where each round mark fell.
    fn run(input: &[Option<(u32, u64)>]) -> Vec<Vec<(u32, u64)>> {
        let mut oe = OrderedEvents::new();
        let mut rounds = vec![Vec::new()];
        for item in input {
            match *item {
                Some((cpu, t)) => assert!(oe.push(Some(t), (cpu, t)).is_none()),
                None => {
                    let flushed: Vec<_> = oe.finished_round().collect();
                    rounds.last_mut().unwrap().extend(flushed);
                    rounds.push(Vec::new());
                }
            }
        }
        let rest: Vec<_> = oe.flush_all().collect();
        rounds.last_mut().unwrap().extend(rest);
        rounds
    }

    #[test]
    fn perfs_session_c_example() {
        // The two-cpu example of the comment above process_finished_round()
        // in tools/perf/util/session.c.
        let input = [
            Some((0, 1)),
            Some((0, 2)),
            Some((1, 2)),
            Some((1, 3)),
            Some((1, 4)),
            None, // end of pass n: max 4, nothing flushed yet
            Some((0, 3)),
            Some((0, 4)),
            Some((0, 5)),
            Some((1, 5)),
            Some((1, 6)),
            Some((1, 7)),
            None, // end of pass n+1: flush <= 4
            Some((0, 6)),
            Some((0, 7)),
            Some((1, 8)),
            Some((1, 9)),
            Some((1, 10)),
            None, // end of pass n+2: flush <= 7
        ];
        let rounds = run(&input);
        assert_eq!(rounds[0], vec![]);
        // Round n+1's cpu0 records 3 and 4 are older than round n's tail (4)
        // and still come out in order, after the equal-time record of cpu1.
        assert_eq!(
            rounds[1],
            vec![(0, 1), (0, 2), (1, 2), (1, 3), (0, 3), (1, 4), (0, 4)]
        );
        assert_eq!(
            rounds[2],
            vec![(0, 5), (1, 5), (1, 6), (0, 6), (1, 7), (0, 7)]
        );
        assert_eq!(rounds[3], vec![(1, 8), (1, 9), (1, 10)]);
    }

    #[test]
    fn empty_round_does_not_move_the_limit() {
        // perf returns early on an empty queue, so next_flush keeps its value.
        let input = [
            Some((0, 10)),
            None,
            None,
            None,
            Some((0, 20)),
            None,
            Some((0, 5)),
            None,
        ];
        let rounds = run(&input);
        assert_eq!(rounds[0], vec![]); // limit 0: nothing; next_flush = 10
        assert_eq!(rounds[1], vec![(0, 10)]); // limit 10; next_flush = 10
        assert_eq!(rounds[2], vec![]); // queue empty: a no-op
        assert_eq!(rounds[3], vec![]); // 20 > 10; next_flush = 20
        assert_eq!(rounds[4], vec![(0, 5), (0, 20)]); // 5 is out of order but still first
        assert_eq!(rounds[5], vec![]);
    }

    #[test]
    fn out_of_order_is_counted_and_delivered() {
        let mut oe = OrderedEvents::new();
        let _ = oe.push(Some(10), 'a');
        assert_eq!(oe.finished_round().count(), 0);
        let _ = oe.push(Some(20), 'b');
        assert_eq!(oe.finished_round().collect::<String>(), "a");
        let _ = oe.push(Some(5), 'c'); // older than the delivered 'a'
        assert_eq!(oe.out_of_order(), 1);
        assert_eq!(oe.flush_all().collect::<String>(), "cb");
        assert!(oe.is_empty());
    }

    #[test]
    fn untimed_pass_through() {
        let mut oe = OrderedEvents::new();
        assert_eq!(oe.push(None, 1), Some(1));
        assert_eq!(oe.push(Some(0), 2), Some(2));
        assert_eq!(oe.push(Some(u64::MAX), 3), Some(3));
        assert_eq!(oe.push(Some(7), 4), None);
        assert_eq!(oe.len(), 1);
    }

    #[test]
    fn flush_until_and_partial_iteration() {
        let mut oe = OrderedEvents::new();
        for t in [5, 1, 3, 9] {
            let _ = oe.push(Some(t), t);
        }
        assert_eq!(oe.flush_until(4).collect::<Vec<_>>(), vec![1, 3]);
        // Take one of the two due records; the other stays queued.
        assert_eq!(oe.flush_until(9).next(), Some(5));
        assert_eq!(oe.len(), 1);
        assert_eq!(oe.flush_all().collect::<Vec<_>>(), vec![9]);
        assert_eq!(oe.flush_all().count(), 0);
    }

    fn ev(record: Record<'static>, time: Option<u64>) -> Event<'static> {
        Event {
            misc: 0,
            record,
            sample_id: SampleId {
                time,
                ..Default::default()
            },
        }
    }

    #[test]
    fn process_events_like_perf_session() {
        let comm = |t| {
            ev(
                Record::Comm {
                    pid: 1,
                    tid: 1,
                    comm: format!("c{t}"),
                },
                Some(t),
            )
        };
        let input = vec![
            ev(Record::TimeConv(Default::default()), None),
            comm(30),
            comm(10),
            ev(
                Record::Comm {
                    pid: 1,
                    tid: 1,
                    comm: "synth".into(),
                },
                Some(0),
            ),
            ev(Record::FinishedRound, None),
            comm(20),
            ev(Record::FinishedRound, None),
            comm(40),
        ];
        let mut oe = OrderedEvents::new();
        let mut out = Vec::new();
        for e in input {
            oe.process(e, |e| out.push(e));
        }
        oe.finish(|e| out.push(e));
        let names: Vec<String> = out
            .iter()
            .map(|e| match &e.record {
                Record::Comm { comm, .. } => comm.clone(),
                Record::TimeConv(_) => "timeconv".into(),
                r => format!("{r:?}"),
            })
            .collect();
        assert_eq!(names, ["timeconv", "synth", "c10", "c20", "c30", "c40"]);
    }

    #[test]
    fn order_time_of_records() {
        let mut s = crate::sample::Sample {
            time: Some(99),
            ..Default::default()
        };
        let e = ev(Record::Sample(s.clone()), Some(5));
        assert_eq!(order_time(&e), Some(99));
        s.time = None;
        assert_eq!(order_time(&ev(Record::Sample(s), Some(5))), Some(5));
        assert_eq!(
            order_time(&ev(Record::TimeConv(Default::default()), Some(5))),
            None
        );
        let user = ev(
            Record::Unknown {
                kind: 75,
                body: Default::default(),
            },
            Some(5),
        );
        assert_eq!(order_time(&user), None);
        let kernel = ev(
            Record::Unknown {
                kind: 22,
                body: Default::default(),
            },
            Some(5),
        );
        assert_eq!(order_time(&kernel), Some(5));
        assert_eq!(ev(Record::FinishedRound, None).arrival(), Arrival::RoundEnd);
    }
}
