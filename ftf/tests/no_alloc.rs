//! The writer's event path allocates nothing once its strings and threads are
//! in the tables: counted with a wrapping global allocator (the only unsafe
//! code near this crate, and only in this test binary, which therefore
//! allows what the workspace denies). Only the test's own thread counts:
//! the writer has no threads of its own, and the test harness's threads
//! allocate when they please (4 allocations, once, in a CI run).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use ftf::{Arg, ArgValue, ThreadRef, Writer};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Whether this thread's allocations count (a `const` cell: reading
    /// it allocates nothing and it has no destructor).
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

/// Counts an allocation made on a counted thread.
fn count() {
    if COUNTED.try_with(Cell::get).unwrap_or(false) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments, so
// `System`'s guarantees carry over; the counter has no effect on memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn warm_events_do_not_allocate() {
    COUNTED.with(|c| c.set(true));
    let names: Vec<String> = (0..100).map(|i| format!("fn_{i}")).collect();
    let threads: Vec<ThreadRef> = (0..10).map(|i| ThreadRef { pid: 1, tid: i }).collect();
    let mut w = Writer::new(std::io::sink(), 1_000_000_000).unwrap();
    let emit = |w: &mut Writer<std::io::Sink>, i: usize| {
        let args = [
            Arg::new("insns", i as u64),
            Arg::new("address", ArgValue::Pointer(0x1000 + i as u64)),
            Arg::new("module", "libc.so.6"),
        ];
        let t = threads[i % threads.len()];
        let name = &names[i % names.len()];
        w.duration_complete(t, "call", name, i as u64, i as u64 + 1, &args)
            .unwrap();
        w.instant(t, "gap", name, i as u64, &args[..1]).unwrap();
    };
    for i in 0..1000 {
        emit(&mut w, i);
    }
    let before = ALLOCS.load(Ordering::Relaxed);
    assert!(before > 0, "the counting allocator is not in use");
    for i in 0..100_000 {
        emit(&mut w, i);
    }
    let allocs = ALLOCS.load(Ordering::Relaxed) - before;
    assert_eq!(allocs, 0, "{allocs} allocations in 200000 warm events");
    w.finish().unwrap();
}
