//! Reading perf's DATA and AUX rings: the consumer half of the protocol in
//! `include/uapi/linux/perf_event.h` (`perf_event_mmap_page`).
//!
//! The producer (the kernel, or a test thread behaving as it does) writes
//! bytes, then publishes `data_head`/`aux_head`. We load the head with a
//! volatile read followed by an acquire fence, copy the bytes out, then issue
//! a release fence and store the tail. Heads are monotonic byte counters; the
//! position in the ring is `head % size` (sizes are powers of two). Bytes are
//! only ever copied out, never borrowed, because the producer owns the memory
//! again as soon as the tail moves.

use std::io;
use std::ptr::{addr_of, addr_of_mut, NonNull};
use std::sync::atomic::{fence, Ordering};

use crate::sys::{perf_event_mmap_page, Mapping};

/// A malformed ring.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RingError {
    /// A record header in the DATA ring had an impossible size.
    #[error("DATA ring: record at ring offset {offset:#x} has size {size}, below 8 or past the published head")]
    BadRecord { offset: u64, size: u16 },
    /// The metadata page described an area that does not fit the mapping.
    #[error("ring metadata page describes {what} ({offset:#x}+{size:#x}) outside the {len:#x}-byte mapping")]
    BadLayout {
        what: &'static str,
        offset: u64,
        size: u64,
        len: usize,
    },
    /// An area size that is not a power of two.
    #[error("{what} size {size:#x} is not a power of two")]
    NotPowerOfTwo { what: &'static str, size: u64 },
}

/// One ring: the metadata page, the DATA area and, when mapped, the AUX area.
pub struct Ring {
    meta: NonNull<perf_event_mmap_page>,
    data: NonNull<u8>,
    data_size: u64,
    aux: Option<(NonNull<u8>, u64)>,
    /// Keeps the memory behind the pointers alive.
    _owner: Box<dyn Send>,
}

// SAFETY: the pointers refer to memory owned by `_owner` (Send); all accesses
// are volatile copies ordered by fences as the ring protocol requires.
unsafe impl Send for Ring {}

impl Ring {
    /// A ring over a perf mmap: `base` is the metadata page plus the DATA area,
    /// `aux` the AUX area mapped at the metadata page's `aux_offset`.
    pub fn from_mappings(base: Mapping, aux: Option<Mapping>) -> Result<Ring, RingError> {
        let meta = base.as_ptr().cast::<perf_event_mmap_page>();
        // SAFETY: `base` is at least one page long (the metadata page), so the
        // fields are in bounds; they are written once by the kernel at mmap time.
        let (data_offset, data_size) = unsafe {
            (
                std::ptr::read_volatile(addr_of!((*meta.as_ptr()).data_offset)),
                std::ptr::read_volatile(addr_of!((*meta.as_ptr()).data_size)),
            )
        };
        check_layout("DATA area", data_offset, data_size, base.len())?;
        // SAFETY: checked just above that offset+size lies inside the mapping.
        let data = unsafe { base.as_ptr().add(data_offset as usize) };
        let aux_area = match &aux {
            Some(m) => {
                check_layout("AUX area", 0, m.len() as u64, m.len())?;
                Some((m.as_ptr(), m.len() as u64))
            }
            None => None,
        };
        Ok(Ring {
            meta,
            data,
            data_size,
            aux: aux_area,
            _owner: Box::new((base, aux)),
        })
    }

    /// A ring over memory that the caller lays out as perf does (tests, and a
    /// simulated kernel producer).
    ///
    /// # Safety
    /// `meta` must point to a `perf_event_mmap_page`, `data` to `data_size`
    /// bytes and `aux` to its size in bytes, all valid for reads and writes for
    /// as long as `owner` lives, and written concurrently only through the
    /// ring protocol (volatile stores, release fence before the head store).
    pub unsafe fn from_raw(
        meta: NonNull<perf_event_mmap_page>,
        data: NonNull<u8>,
        data_size: u64,
        aux: Option<(NonNull<u8>, u64)>,
        owner: Box<dyn Send>,
    ) -> Result<Ring, RingError> {
        check_pow2("DATA area", data_size)?;
        if let Some((_, size)) = aux {
            check_pow2("AUX area", size)?;
        }
        Ok(Ring {
            meta,
            data,
            data_size,
            aux,
            _owner: owner,
        })
    }

    /// Size of the DATA area in bytes.
    pub fn data_size(&self) -> u64 {
        self.data_size
    }

    /// Size of the AUX area in bytes, when mapped.
    pub fn aux_size(&self) -> Option<u64> {
        self.aux.map(|(_, s)| s)
    }

    /// The published DATA head; bytes before it are complete.
    pub fn data_head(&self) -> u64 {
        // SAFETY: `meta` is valid for the ring's lifetime (constructor contract).
        let head = unsafe { std::ptr::read_volatile(addr_of!((*self.meta.as_ptr()).data_head)) };
        fence(Ordering::Acquire);
        head
    }

    /// Our DATA tail (what we have consumed).
    pub fn data_tail(&self) -> u64 {
        // SAFETY: as in `data_head`; only the consumer writes the tail.
        unsafe { std::ptr::read_volatile(addr_of!((*self.meta.as_ptr()).data_tail)) }
    }

    /// Hands bytes before `tail` back to the producer.
    pub fn set_data_tail(&self, tail: u64) {
        fence(Ordering::Release);
        // SAFETY: as in `data_head`; the fence orders our reads of the area
        // before the store that lets the producer overwrite it.
        unsafe { std::ptr::write_volatile(addr_of_mut!((*self.meta.as_ptr()).data_tail), tail) }
    }

    /// The published AUX head (0 when no AUX area is mapped).
    pub fn aux_head(&self) -> u64 {
        // SAFETY: as in `data_head`.
        let head = unsafe { std::ptr::read_volatile(addr_of!((*self.meta.as_ptr()).aux_head)) };
        fence(Ordering::Acquire);
        head
    }

    /// Our AUX tail.
    pub fn aux_tail(&self) -> u64 {
        // SAFETY: as in `data_tail`.
        unsafe { std::ptr::read_volatile(addr_of!((*self.meta.as_ptr()).aux_tail)) }
    }

    /// Hands AUX bytes before `tail` back to the producer.
    pub fn set_aux_tail(&self, tail: u64) {
        fence(Ordering::Release);
        // SAFETY: as in `set_data_tail`.
        unsafe { std::ptr::write_volatile(addr_of_mut!((*self.meta.as_ptr()).aux_tail), tail) }
    }

    /// Appends `len` DATA bytes starting at monotonic position `from` to `out`
    /// (two copies when the range wraps the ring's end).
    pub fn copy_data(&self, from: u64, len: u64, out: &mut Vec<u8>) {
        copy_ring(self.data, self.data_size, from, len, out)
    }

    /// Appends `len` AUX bytes starting at monotonic position `from` to `out`.
    /// Does nothing when no AUX area is mapped.
    pub fn copy_aux(&self, from: u64, len: u64, out: &mut Vec<u8>) {
        if let Some((ptr, size)) = self.aux {
            copy_ring(ptr, size, from, len, out)
        }
    }

    /// Copies every complete DATA record published since the last call into
    /// `out` and releases them to the producer. Returns the bytes copied.
    /// Record sizes are checked on the way, so a corrupt ring is an error
    /// instead of a misaligned stream.
    pub fn drain_data(&self, out: &mut Vec<u8>) -> Result<u64, RingError> {
        let head = self.data_head();
        let mut tail = self.data_tail();
        let start = out.len();
        let mut header = Vec::with_capacity(8);
        while tail < head {
            header.clear();
            self.copy_data(tail, 8.min(head - tail), &mut header);
            let size = if header.len() == 8 {
                u16::from_le_bytes([header[6], header[7]])
            } else {
                0
            };
            if size < 8 || u64::from(size) > head - tail {
                out.truncate(start);
                return Err(RingError::BadRecord {
                    offset: tail % self.data_size,
                    size,
                });
            }
            self.copy_data(tail, u64::from(size), out);
            tail += u64::from(size);
        }
        self.set_data_tail(tail);
        Ok((out.len() - start) as u64)
    }
}

fn check_pow2(what: &'static str, size: u64) -> Result<(), RingError> {
    if size.is_power_of_two() {
        Ok(())
    } else {
        Err(RingError::NotPowerOfTwo { what, size })
    }
}

fn check_layout(what: &'static str, offset: u64, size: u64, len: usize) -> Result<(), RingError> {
    check_pow2(what, size)?;
    match offset.checked_add(size) {
        Some(end) if end <= len as u64 => Ok(()),
        _ => Err(RingError::BadLayout {
            what,
            offset,
            size,
            len,
        }),
    }
}

fn copy_ring(area: NonNull<u8>, size: u64, from: u64, len: u64, out: &mut Vec<u8>) {
    let len = len.min(size);
    let start = from & (size - 1);
    let first = len.min(size - start);
    for (off, n) in [(start, first), (0, len - first)] {
        if n == 0 {
            continue;
        }
        out.reserve(n as usize);
        let dst = out.len();
        // SAFETY: `off + n <= size` by construction, the area is valid for
        // `size` bytes (constructor contract) and `out` has room for `n` more
        // bytes after `reserve`; the regions cannot overlap (ours is a Vec).
        unsafe {
            std::ptr::copy_nonoverlapping(
                area.as_ptr().add(off as usize),
                out.as_mut_ptr().add(dst),
                n as usize,
            );
            out.set_len(dst + n as usize);
        }
    }
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("data_size", &self.data_size)
            .field("aux_size", &self.aux_size())
            .finish_non_exhaustive()
    }
}

/// A page-aligned block laid out as a perf mmap (metadata page, DATA area,
/// AUX area) on the heap, with a producer that writes it exactly as the kernel
/// does. For tests of everything above the syscalls.
pub mod sim {
    use super::*;
    use std::alloc::{alloc_zeroed, dealloc, Layout};
    use std::sync::Arc;

    const PAGE: usize = 4096;

    #[derive(Clone, Copy)]
    enum Field {
        DataHead,
        DataTail,
        AuxHead,
        AuxTail,
    }

    /// The shared memory block.
    pub struct Block {
        ptr: NonNull<u8>,
        layout: Layout,
        data_size: u64,
        aux_size: u64,
    }

    // SAFETY: plain heap memory accessed only through the ring protocol.
    unsafe impl Send for Block {}
    // SAFETY: as above; concurrent access is volatile and fenced.
    unsafe impl Sync for Block {}

    impl Block {
        /// A block with power-of-two `data_size` and `aux_size` (0 for none).
        pub fn new(data_size: u64, aux_size: u64) -> io::Result<Arc<Block>> {
            let total = PAGE as u64 + data_size + aux_size;
            let layout = Layout::from_size_align(total as usize, PAGE)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            // SAFETY: the layout has a non-zero size (at least one page).
            let ptr = NonNull::new(unsafe { alloc_zeroed(layout) })
                .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, "ring block"))?;
            let block = Block {
                ptr,
                layout,
                data_size,
                aux_size,
            };
            let meta = block.meta();
            // SAFETY: the metadata page is the first page of the block.
            unsafe {
                (*meta.as_ptr()).data_offset = PAGE as u64;
                (*meta.as_ptr()).data_size = data_size;
                (*meta.as_ptr()).aux_offset = PAGE as u64 + data_size;
                (*meta.as_ptr()).aux_size = aux_size;
            }
            Ok(Arc::new(block))
        }

        fn meta(&self) -> NonNull<perf_event_mmap_page> {
            self.ptr.cast()
        }

        fn area(&self, offset: u64) -> NonNull<u8> {
            // SAFETY: callers pass offsets of areas inside the allocation.
            unsafe { self.ptr.add(offset as usize) }
        }

        /// A consumer [`Ring`] over this block.
        pub fn ring(self: &Arc<Block>) -> Result<Ring, RingError> {
            let aux = (self.aux_size > 0)
                .then(|| (self.area(PAGE as u64 + self.data_size), self.aux_size));
            // SAFETY: the pointers lie inside the block, which the ring keeps
            // alive through the Arc; the producer below follows the protocol.
            unsafe {
                Ring::from_raw(
                    self.meta(),
                    self.area(PAGE as u64),
                    self.data_size,
                    aux,
                    Box::new(Arc::clone(self)),
                )
            }
        }

        fn field(&self, f: Field) -> *mut u64 {
            let m = self.meta().as_ptr();
            // SAFETY: `m` points to the metadata page at the start of the
            // block; projecting to a field creates no reference.
            unsafe {
                match f {
                    Field::DataHead => addr_of_mut!((*m).data_head),
                    Field::DataTail => addr_of_mut!((*m).data_tail),
                    Field::AuxHead => addr_of_mut!((*m).aux_head),
                    Field::AuxTail => addr_of_mut!((*m).aux_tail),
                }
            }
        }

        fn load(&self, f: Field) -> u64 {
            // SAFETY: `field` returns a pointer to a u64 inside the metadata page.
            unsafe { std::ptr::read_volatile(self.field(f)) }
        }

        fn store(&self, f: Field, v: u64) {
            // SAFETY: as in `load`.
            unsafe { std::ptr::write_volatile(self.field(f), v) }
        }

        fn write_wrapped(&self, area: u64, size: u64, pos: u64, bytes: &[u8]) {
            for (i, b) in bytes.iter().enumerate() {
                let off = (pos + i as u64) & (size - 1);
                // SAFETY: `off < size`, inside the area.
                unsafe { std::ptr::write_volatile(self.area(area + off).as_ptr(), *b) }
            }
        }

        /// Kernel behaviour for DATA: append one record if it fits before the
        /// consumer's tail, then publish the head. Returns false (the kernel
        /// would count it as lost) when the ring is full.
        pub fn produce_record(&self, record: &[u8]) -> bool {
            let head = self.load(Field::DataHead);
            fence(Ordering::Acquire);
            let tail = self.load(Field::DataTail);
            if head + record.len() as u64 - tail > self.data_size {
                return false;
            }
            self.write_wrapped(PAGE as u64, self.data_size, head, record);
            fence(Ordering::Release);
            self.store(Field::DataHead, head + record.len() as u64);
            true
        }

        /// Kernel behaviour for AUX: append trace bytes. In full-trace mode
        /// (`overwrite == false`) only what fits before the tail is written and
        /// the count is returned; in overwrite mode everything is written and
        /// the head keeps counting.
        pub fn produce_aux(&self, bytes: &[u8], overwrite: bool) -> usize {
            let head = self.load(Field::AuxHead);
            fence(Ordering::Acquire);
            let tail = self.load(Field::AuxTail);
            let room = if overwrite {
                u64::MAX
            } else {
                self.aux_size - (head - tail)
            };
            let n = (bytes.len() as u64).min(room) as usize;
            self.write_wrapped(
                PAGE as u64 + self.data_size,
                self.aux_size,
                head,
                &bytes[..n],
            );
            fence(Ordering::Release);
            self.store(Field::AuxHead, head + n as u64);
            n
        }
    }

    impl Drop for Block {
        fn drop(&mut self) {
            // SAFETY: allocated in `new` with this layout.
            unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::sim::Block;

    fn record(kind: u32, body_words: usize, fill: u8) -> Vec<u8> {
        let size = 8 + 8 * body_words;
        let mut r = Vec::with_capacity(size);
        r.extend_from_slice(&kind.to_le_bytes());
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&(size as u16).to_le_bytes());
        r.resize(size, fill);
        r
    }

    #[test]
    fn records_split_at_the_ring_end_come_out_whole() {
        let block = Block::new(256, 0).unwrap();
        let ring = block.ring().unwrap();
        let mut expected = Vec::new();
        let mut got = Vec::new();
        // 40-byte records in a 256-byte ring: they straddle the end every few.
        for i in 0..50u8 {
            let r = record(3, 4, i);
            assert!(block.produce_record(&r), "ring full at record {i}");
            expected.extend_from_slice(&r);
            if i % 3 == 2 {
                ring.drain_data(&mut got).unwrap();
            }
        }
        ring.drain_data(&mut got).unwrap();
        assert_eq!(got, expected);
        assert_eq!(ring.data_tail(), ring.data_head());
    }

    #[test]
    fn full_ring_refuses_until_drained() {
        let block = Block::new(128, 0).unwrap();
        let ring = block.ring().unwrap();
        let r = record(1, 3, 7); // 32 bytes
        for _ in 0..4 {
            assert!(block.produce_record(&r));
        }
        assert!(!block.produce_record(&r), "a fifth record cannot fit");
        let mut out = Vec::new();
        assert_eq!(ring.drain_data(&mut out).unwrap(), 128);
        assert!(block.produce_record(&r));
    }

    #[test]
    fn corrupt_record_size_is_an_error() {
        let block = Block::new(128, 0).unwrap();
        let ring = block.ring().unwrap();
        let mut bad = record(1, 1, 0);
        bad[6] = 4; // size 4 < 8
        assert!(block.produce_record(&bad));
        let mut out = Vec::new();
        assert!(ring.drain_data(&mut out).is_err());
        assert!(out.is_empty());
    }

    #[test]
    fn aux_bytes_wrap_and_concurrent_producer_matches() {
        let block = Block::new(64, 4096).unwrap();
        let ring = block.ring().unwrap();
        let total: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let producer = {
            let block = block.clone();
            let total = total.clone();
            std::thread::spawn(move || {
                let mut sent = 0;
                while sent < total.len() {
                    let chunk = &total[sent..(sent + 333).min(total.len())];
                    sent += block.produce_aux(chunk, false);
                    std::thread::yield_now();
                }
            })
        };
        let mut got = Vec::new();
        while got.len() < total.len() {
            let head = ring.aux_head();
            let tail = ring.aux_tail();
            ring.copy_aux(tail, head - tail, &mut got);
            ring.set_aux_tail(head);
            std::thread::yield_now();
        }
        producer.join().unwrap();
        assert_eq!(got, total);
    }
}
