//! The chunk decoder's edges (`chunk`): when the chunk starts after its
//! warm-up and where it stops for the next chunk, decided from the
//! decoder's offsets and status updates ([`Edges`]).

use ipt::EventKind;

/// Where a chunk's decode is between its edges. A chunk is decoded from
/// its PSB, or with CYC from a warm-up PSB before it (the previous
/// chunk's last bytes), through the next chunk's PSB+; what comes before
/// the chunk's first IP and from the next chunk's first IP on belongs to
/// the neighbours (`chunk`'s module doc says why).
#[derive(Debug, Clone)]
pub(super) struct Edges {
    /// Bytes of warm-up before the chunk.
    warmup: u64,
    /// The chunk's length in bytes.
    len: u64,
    /// The segment's last chunk: nothing follows it.
    last: bool,
    /// Still in the warm-up before the chunk: blocks and events are not
    /// looked at.
    pub warming: bool,
    /// After the warm-up: the chunk starts at this IP (its PSB+'s FUP);
    /// what the decoder walks before it is the previous chunk's.
    pub start_at: Option<u64>,
    /// Where the next chunk starts (its PSB+'s FUP), once its status
    /// update was read: decoding stops there.
    pub stop_at: Option<u64>,
    /// After an error, decoding synchronized at the next chunk's PSB: its
    /// status updates are taken as one decoder takes them there (the
    /// enable, a task switch), then decoding stops.
    pub at_boundary: bool,
}

impl Edges {
    /// A chunk of `len` bytes after `warmup` bytes of warm-up; `last`: the
    /// segment's last chunk.
    pub(super) fn new(warmup: u64, len: u64, last: bool) -> Self {
        Edges {
            warmup,
            len,
            last,
            warming: warmup > 0,
            start_at: None,
            stop_at: None,
            at_boundary: false,
        }
    }

    /// A decoder offset as an offset in the chunk (less the warm-up).
    #[inline]
    pub(super) fn in_chunk(&self, decoder_offset: u64) -> u64 {
        decoder_offset.saturating_sub(self.warmup)
    }

    /// During the warm-up: whether an event belongs to the chunk. The
    /// status updates of the chunk's own PSB+ (read past the warm-up
    /// bytes, at decoder offset `offset`) do; its enable or disable ends
    /// the warm-up, and an enable's IP is where the chunk starts. From
    /// then on the chunk decodes as one synchronized at that PSB.
    pub(super) fn warmed_up(
        &mut self,
        status_update: bool,
        offset: Option<u64>,
        kind: &EventKind,
    ) -> bool {
        if !status_update || offset.is_none_or(|o| o <= self.warmup) {
            return false;
        }
        match *kind {
            EventKind::Enabled { ip, .. } => {
                self.warming = false;
                self.start_at = Some(ip);
            }
            EventKind::Disabled { .. } => self.warming = false,
            _ => {}
        }
        true
    }

    /// Whether an event says the next chunk's PSB+ was read (a status
    /// update read past this chunk's bytes, at decoder offset `offset`)
    /// with tracing off: then decoding stops. With tracing on (an enable
    /// while no enable is awaited: `need_enable` false), its IP is where
    /// the next chunk starts: decoding goes on to it ([`Edges::stop_at`];
    /// libipt hands out the status update as soon as it reads the PSB+,
    /// before its decoding has reached that IP).
    pub(super) fn at_next_chunk(
        &mut self,
        status_update: bool,
        offset: Option<u64>,
        kind: &EventKind,
        need_enable: bool,
    ) -> bool {
        if self.last || self.stop_at.is_some() || self.at_boundary || !status_update {
            return false;
        }
        if offset.is_none_or(|o| self.in_chunk(o) <= self.len) {
            return false;
        }
        match *kind {
            EventKind::Enabled { ip, .. } if !need_enable => {
                self.stop_at = Some(ip);
                false
            }
            EventKind::Enabled { .. } | EventKind::Disabled { .. } => true,
            _ => false,
        }
    }

    /// A sync at decoder offset `at` (`ok`: the PSB+ was read), the
    /// chunk's `first` or not: `false` when it lies past the chunk and
    /// decoding must end. After an error with no PSB left in the chunk,
    /// one decoder synchronizes at the next chunk's PSB and takes its
    /// status updates (the enable there, or the switch to another task
    /// that ends this one's run); so does the chunk, then it stops
    /// ([`Edges::at_boundary`]), so that the ops are the same for any
    /// chunk size.
    pub(super) fn sync_in_reach(&mut self, first: bool, at: Option<u64>, ok: bool) -> bool {
        let in_chunk = at.map(|o| self.in_chunk(o));
        if self.last || in_chunk.is_none_or(|o| o < self.len) {
            return true;
        }
        if first || self.warming || !ok || in_chunk != Some(self.len) {
            return false;
        }
        self.at_boundary = true;
        true
    }

    /// A resync after an error that left the decoder at decoder offset
    /// `at`: past the chunk's end it read on into the next chunk's PSB+
    /// (a resync goes on from the first PSB+ it meets as a sync there:
    /// `ptflow::block::BlockDecoder::resync`), so it is taken as a sync
    /// there after an error ([`Edges::sync_in_reach`]): the status
    /// updates, then the end. At the PSB itself, not read yet, decoding
    /// goes on as one decoder's would.
    pub(super) fn resync_in_reach(&mut self, at: Option<u64>) {
        if !self.last && at.is_some_and(|o| self.in_chunk(o) > self.len) {
            self.at_boundary = true;
        }
    }

    /// The chunk's bytes before its first sync: up to the sync at decoder
    /// offset `synced_at`, or all of them when there was none.
    pub(super) fn unsynced_bytes(&self, synced_at: Option<Option<u64>>) -> u64 {
        match synced_at {
            Some(at) => at.map_or(0, |o| self.in_chunk(o)).min(self.len),
            None => self.len,
        }
    }

    /// Whether blocks are looked at one by one for an edge: in the
    /// warm-up, or while the chunk's first IP or the next chunk's is
    /// looked for inside blocks.
    #[inline]
    pub(super) fn watching(&self) -> bool {
        self.warming || self.start_at.is_some() || self.stop_at.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enabled(ip: u64) -> EventKind {
        EventKind::Enabled { ip, resumed: false }
    }

    #[test]
    fn the_warm_up_ends_at_the_chunks_own_status_update() {
        let mut e = Edges::new(100, 1000, false);
        assert!(e.warming && e.watching());
        // Before the chunk's bytes, or not a status update: the warm-up's.
        assert!(!e.warmed_up(true, Some(80), &enabled(0x10)));
        assert!(!e.warmed_up(false, Some(150), &enabled(0x10)));
        assert!(e.warming);
        // The chunk's PSB+ enable: the chunk starts at its IP.
        assert!(e.warmed_up(true, Some(150), &enabled(0x401000)));
        assert!(!e.warming);
        assert_eq!(e.start_at, Some(0x401000));
        assert_eq!(e.in_chunk(150), 50);
        // A disable ends the warm-up with no IP to look for.
        let mut e = Edges::new(100, 1000, false);
        assert!(e.warmed_up(true, Some(101), &EventKind::Disabled { ip: None }));
        assert!(!e.warming && e.start_at.is_none() && !e.watching());
        // No warm-up at all: the chunk starts at its own sync.
        assert!(!Edges::new(0, 1000, false).warming);
    }

    #[test]
    fn a_resync_into_the_next_chunks_psb_ends_the_chunk_there() {
        let mut e = Edges::new(100, 1000, false);
        e.resync_in_reach(Some(1100));
        assert!(!e.at_boundary);
        e.resync_in_reach(Some(1101));
        assert!(e.at_boundary);
        let mut e = Edges::new(0, 1000, true);
        e.resync_in_reach(Some(5000));
        assert!(!e.at_boundary);
    }

    #[test]
    fn the_next_chunks_status_update_stops_the_decode_or_names_its_ip() {
        let mut e = Edges::new(0, 1000, false);
        // Inside the chunk: its own.
        assert!(!e.at_next_chunk(true, Some(1000), &enabled(0x10), false));
        // Past it with tracing on: go on to the next chunk's first IP.
        assert!(!e.at_next_chunk(true, Some(1001), &enabled(0x2000), false));
        assert_eq!(e.stop_at, Some(0x2000));
        assert!(e.watching());
        // Once known, later status updates change nothing.
        assert!(!e.at_next_chunk(true, Some(1200), &enabled(0x3000), false));
        assert_eq!(e.stop_at, Some(0x2000));
        // Past it with tracing off, or an enable awaited: stop at once.
        let mut e = Edges::new(0, 1000, false);
        assert!(e.at_next_chunk(true, Some(1001), &EventKind::Disabled { ip: None }, false));
        assert!(e.at_next_chunk(true, Some(1001), &enabled(0x10), true));
        // The segment's last chunk has no next one.
        let mut e = Edges::new(0, 1000, true);
        assert!(!e.at_next_chunk(true, Some(5000), &enabled(0x10), false));
        assert!(e.stop_at.is_none());
    }

    #[test]
    fn a_sync_past_the_chunk_ends_it_but_at_the_next_psb_after_an_error() {
        // In the chunk: go on.
        let mut e = Edges::new(10, 1000, false);
        assert!(e.sync_in_reach(true, Some(500), true));
        // The chunk's first sync past its end: nothing of it to decode.
        assert!(!e.sync_in_reach(true, Some(1010), true));
        // After an error, exactly at the next chunk's PSB (decoder offset
        // = warm-up + length): not during the warm-up; after it, take its
        // status updates, then stop.
        assert!(!e.sync_in_reach(false, Some(1010), true));
        e.warming = false;
        assert!(e.sync_in_reach(false, Some(1010), true));
        assert!(e.at_boundary);
        // Further on, or a PSB+ that could not be read: end.
        let mut e = Edges::new(10, 1000, false);
        e.warming = false;
        assert!(!e.sync_in_reach(false, Some(1500), true));
        assert!(!e.sync_in_reach(false, Some(1010), false));
        assert!(!e.at_boundary);
        // The last chunk reads to the end of its bytes.
        assert!(Edges::new(0, 1000, true).sync_in_reach(true, Some(4000), true));
    }

    #[test]
    fn unsynced_bytes_are_those_before_the_first_sync() {
        let e = Edges::new(10, 1000, false);
        assert_eq!(e.unsynced_bytes(Some(Some(310))), 300);
        assert_eq!(e.unsynced_bytes(Some(Some(5000))), 1000);
        assert_eq!(e.unsynced_bytes(Some(None)), 0);
        assert_eq!(e.unsynced_bytes(None), 1000);
    }
}
