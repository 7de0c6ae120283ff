//! A cache of freed task blocks (of the core's `TASK_ALLOCATION` layout),
//! between the global allocator and mimalloc.
//!
//! A task is allocated by the thread that submits it and usually freed by
//! the worker that ran it. mimalloc takes such a cross-thread free onto the
//! block's page, and the owning thread later collects those blocks by
//! walking them as a linked list, one cache miss per block, none of which
//! overlaps another; and each allocation reads the block's link again.
//! perf, 100k dependent tasks: 20% of the submitting thread's time in those
//! two places (`_mi_page_free_collect`, `_mi_theap_malloc_zero`). Here a
//! freed block of the task size goes onto the freeing thread's magazine (an
//! array of pointers, nothing written into the block), full magazines go to
//! a shared depot, and allocations of that size take from the allocating
//! thread's magazine, refilled from the depot: no block is read on the way
//! back, so the only misses left are the writes of the new task, which the
//! submission asks for early (see `runtime::task::TaskMemory`).
//!
//! Bounded: a magazine per thread and `DEPOT` full ones are kept; beyond
//! that, blocks go back to mimalloc. A thread's magazine is emptied into
//! mimalloc when the thread exits.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use std::alloc::GlobalAlloc;

use parking_lot::Mutex;
use ta::allocator::{MiMalloc, TASK_ALLOCATION};

/// Blocks per magazine.
const MAGAZINE: usize = 64;
/// Full magazines the depot keeps.
const DEPOT: usize = 16;

struct Magazine {
    len: usize,
    blocks: [*mut u8; MAGAZINE],
}

impl Magazine {
    const EMPTY: Magazine = Magazine { len: 0, blocks: [std::ptr::null_mut(); MAGAZINE] };

    /// A block, refilling from `depot` when empty.
    fn take(&mut self, depot: &Shared) -> Option<*mut u8> {
        if self.len == 0 && !depot.refill(self) {
            return None;
        }
        self.len -= 1;
        Some(self.blocks[self.len])
    }

    /// Keep `b`, passing a full magazine to `depot` first; false when both are full.
    fn put(&mut self, b: *mut u8, depot: &Shared) -> bool {
        if self.len == MAGAZINE && !depot.store(self) {
            return false;
        }
        self.blocks[self.len] = b;
        self.len += 1;
        true
    }
}

/// Full magazines, shared by the threads.
struct Depot {
    len: usize,
    magazines: [[*mut u8; MAGAZINE]; DEPOT],
}

// SAFETY: the pointers are blocks nobody uses, handed between threads under the lock.
unsafe impl Send for Depot {}

impl Depot {
    const EMPTY: Depot = Depot { len: 0, magazines: [[std::ptr::null_mut(); MAGAZINE]; DEPOT] };

    /// Fill the empty `m` with a stored magazine, if any.
    fn refill(&mut self, m: &mut Magazine) -> bool {
        if self.len == 0 {
            return false;
        }
        self.len -= 1;
        m.blocks = self.magazines[self.len];
        m.len = MAGAZINE;
        true
    }

    /// Store the full `m`, emptying it, if there is room.
    fn store(&mut self, m: &mut Magazine) -> bool {
        if self.len == DEPOT {
            return false;
        }
        self.magazines[self.len] = m.blocks;
        self.len += 1;
        m.len = 0;
        true
    }
}

/// A thread's magazine; what is left in it goes back to mimalloc when the
/// thread exits.
struct Local(UnsafeCell<Magazine>);

impl Drop for Local {
    fn drop(&mut self) {
        let m = self.0.get_mut();
        for &b in &m.blocks[..m.len] {
            // SAFETY: every cached block came from `put` of a block that
            // mimalloc allocated and nothing else holds.
            unsafe { release(b) }
        }
        m.len = 0;
    }
}

thread_local! {
    static LOCAL: Local = const { Local(UnsafeCell::new(Magazine::EMPTY)) };
}

/// The depot, and how many magazines it held when its lock was last
/// released: a thread whose magazine is empty (or full) reads that first,
/// and takes the lock only when the depot can help. A thread that keeps
/// finding the depot empty (a submitter ahead of the workers that free its
/// tasks) would otherwise lock and unlock it on every allocation: two locked
/// instructions of a submission's dozen (docs/perf-notes/runtime.md). A
/// stale count only sends a block to mimalloc or takes the lock for nothing.
struct Shared {
    depot: Mutex<Depot>,
    stored: AtomicUsize,
}

impl Shared {
    const fn new() -> Shared {
        Shared { depot: Mutex::new(Depot::EMPTY), stored: AtomicUsize::new(0) }
    }

    /// As [`Depot::refill`]; without the lock when the depot was empty.
    fn refill(&self, m: &mut Magazine) -> bool {
        if self.stored.load(Ordering::Relaxed) == 0 {
            return false;
        }
        self.locked(|d| d.refill(m))
    }

    /// As [`Depot::store`]; without the lock when the depot was full.
    fn store(&self, m: &mut Magazine) -> bool {
        if self.stored.load(Ordering::Relaxed) == DEPOT {
            return false;
        }
        self.locked(|d| d.store(m))
    }

    /// `f` on the depot under its lock, then its count recorded beside it.
    fn locked<R>(&self, f: impl FnOnce(&mut Depot) -> R) -> R {
        let mut d = self.depot.lock();
        let r = f(&mut d);
        self.stored.store(d.len, Ordering::Relaxed);
        r
    }
}

static SHARED: Shared = Shared::new();

/// Gives a block back to mimalloc.
///
/// # Safety
/// `b` is a block from mimalloc that nothing uses.
unsafe fn release(b: *mut u8) {
    // SAFETY: by the contract.
    unsafe { MiMalloc.dealloc(b, TASK_ALLOCATION) }
}

/// A cached block of the task layout, if there is one.
#[inline]
pub(crate) fn take() -> Option<*mut u8> {
    // SAFETY: the magazine is this thread's, and its methods do not
    // re-enter the allocator (they allocate nothing).
    LOCAL.try_with(|l| unsafe { &mut *l.0.get() }.take(&SHARED)).ok().flatten()
}

/// Cache `b`, a block of the task layout from mimalloc that nothing uses; gives
/// it back to mimalloc when the caches are full (or this thread's is gone).
///
/// # Safety
/// As for `GlobalAlloc::dealloc` of a block allocated with `TASK_ALLOCATION`.
#[inline]
pub(crate) unsafe fn put(b: *mut u8) {
    // SAFETY: as in `take`.
    let kept = LOCAL.try_with(|l| unsafe { &mut *l.0.get() }.put(b, &SHARED));
    if kept != Ok(true) {
        // SAFETY: by the contract.
        unsafe { release(b) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(i: usize) -> *mut u8 {
        (0x1000 + 8 * i) as *mut u8
    }

    /// Blocks come back last in, first out; a full magazine moves to the
    /// depot and an empty one is refilled from it; with both full, `put`
    /// refuses (the block then goes back to mimalloc).
    #[test]
    fn magazines_pass_through_the_depot_and_stay_bounded() {
        let depot = Shared::new();
        let mut freeing = Magazine::EMPTY;
        let n = MAGAZINE * (DEPOT + 1);
        for i in 0..n {
            assert!(freeing.put(block(i), &depot), "block {i} is kept");
        }
        assert!(!freeing.put(block(n), &depot), "every magazine is full");
        assert_eq!((freeing.len, depot.depot.lock().len), (MAGAZINE, DEPOT));
        // Another thread's empty magazine takes the last full one stored.
        let mut taking = Magazine::EMPTY;
        let got: Vec<_> = (0..MAGAZINE).map(|_| taking.take(&depot).unwrap()).collect();
        let stored = (DEPOT - 1) * MAGAZINE..DEPOT * MAGAZINE;
        assert_eq!(got, stored.rev().map(block).collect::<Vec<_>>());
        assert_eq!(depot.depot.lock().len, DEPOT - 1);
        // The freeing thread's own magazine is last in, first out.
        assert_eq!(freeing.take(&depot), Some(block(n - 1)));
        let mut empty = Depot::EMPTY;
        let mut none = Magazine::EMPTY;
        assert_eq!(none.take(&Shared::new()), None);
        assert!(!empty.refill(&mut none));
    }

    /// A thread whose magazine is empty does not lock an empty depot, nor
    /// does one whose magazine is full lock a full depot: both go on while
    /// another thread holds the depot's lock (before, each took the lock).
    #[test]
    fn an_empty_or_full_depot_is_not_locked() {
        use std::sync::mpsc;
        use std::time::Duration;
        let depot: &'static Shared = Box::leak(Box::new(Shared::new()));
        let held = depot.depot.lock();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut m = Magazine::EMPTY;
            tx.send(m.take(depot).map(|b| b as usize)).unwrap();
        });
        let got = rx.recv_timeout(Duration::from_secs(10));
        assert_eq!(got, Ok(None), "taking from an empty magazine waited for the empty depot's lock");
        drop(held);

        let mut filling = Magazine::EMPTY;
        for i in 0..MAGAZINE * DEPOT + 1 {
            assert!(filling.put(block(i), depot));
        }
        assert_eq!(depot.depot.lock().len, DEPOT);
        let held = depot.depot.lock();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut m = Magazine::EMPTY;
            for i in 0..MAGAZINE {
                assert!(m.put(block(i), depot));
            }
            tx.send(m.put(block(MAGAZINE), depot)).unwrap();
        });
        let got = rx.recv_timeout(Duration::from_secs(10));
        assert_eq!(got, Ok(false), "putting into a full magazine waited for the full depot's lock");
        drop(held);
        // With the depot holding magazines again, an empty magazine refills.
        let mut m = Magazine::EMPTY;
        assert!(m.take(depot).is_some());
        assert_eq!(m.len, MAGAZINE - 1);
    }

    /// A task block freed on this thread is the next one handed out.
    #[test]
    fn task_blocks_go_through_the_cache() {
        // SAFETY: a block of a non-zero layout, freed once with it.
        unsafe {
            let b = MiMalloc.alloc(TASK_ALLOCATION);
            put(b);
            assert_eq!(take(), Some(b), "the freed block is the next one handed out");
            MiMalloc.dealloc(b, TASK_ALLOCATION);
        }
    }
}
