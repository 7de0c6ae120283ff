//! A cache of freed task blocks, between the global allocator and mimalloc.
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

use parking_lot::Mutex;

/// Blocks per magazine.
const MAGAZINE: usize = 64;
/// Full magazines the depot keeps.
const DEPOT: usize = 16;

/// The size and alignment of an `Arc<Task>`'s allocation, the only blocks
/// cached (`ArcInner` is two counts then the value, `repr(C)`).
pub(crate) const SIZE: usize = {
    let align = std::mem::align_of::<crate::runtime::task::Task>();
    let start = crate::runtime::task::ARC_COUNTS.div_ceil(align) * align;
    (start + std::mem::size_of::<crate::runtime::task::Task>()).div_ceil(align) * align
};
pub(crate) const ALIGN: usize = {
    let a = std::mem::align_of::<crate::runtime::task::Task>();
    if a > std::mem::align_of::<usize>() {
        a
    } else {
        std::mem::align_of::<usize>()
    }
};

struct Magazine {
    len: usize,
    blocks: [*mut u8; MAGAZINE],
}

impl Magazine {
    const EMPTY: Magazine = Magazine { len: 0, blocks: [std::ptr::null_mut(); MAGAZINE] };

    /// A block, refilling from `depot` when empty.
    fn take(&mut self, depot: &Mutex<Depot>) -> Option<*mut u8> {
        if self.len == 0 && !depot.lock().refill(self) {
            return None;
        }
        self.len -= 1;
        Some(self.blocks[self.len])
    }

    /// Keep `b`, passing a full magazine to `depot` first; false when both are full.
    fn put(&mut self, b: *mut u8, depot: &Mutex<Depot>) -> bool {
        if self.len == MAGAZINE && !depot.lock().store(self) {
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

static SHARED: Mutex<Depot> = Mutex::new(Depot::EMPTY);

/// Gives a block back to mimalloc.
///
/// # Safety
/// `b` is a block from mimalloc that nothing uses.
unsafe fn release(b: *mut u8) {
    // SAFETY: by the contract.
    unsafe { libmimalloc_sys::mi_free(b.cast()) }
}

/// A cached block of `SIZE` bytes, if there is one.
#[inline]
pub(crate) fn take() -> Option<*mut u8> {
    // SAFETY: the magazine is this thread's, and its methods do not
    // re-enter the allocator (they allocate nothing).
    LOCAL.try_with(|l| unsafe { &mut *l.0.get() }.take(&SHARED)).ok().flatten()
}

/// Cache `b`, a block of `SIZE` bytes from mimalloc that nothing uses; gives
/// it back to mimalloc when the caches are full (or this thread's is gone).
///
/// # Safety
/// As for `GlobalAlloc::dealloc` of a block allocated with `SIZE` and `ALIGN`.
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
    use std::alloc::Layout;
    use std::sync::Arc;

    fn block(i: usize) -> *mut u8 {
        (0x1000 + 8 * i) as *mut u8
    }

    /// Blocks come back last in, first out; a full magazine moves to the
    /// depot and an empty one is refilled from it; with both full, `put`
    /// refuses (the block then goes back to mimalloc).
    #[test]
    fn magazines_pass_through_the_depot_and_stay_bounded() {
        let depot = Mutex::new(Depot::EMPTY);
        let mut freeing = Magazine::EMPTY;
        let n = MAGAZINE * (DEPOT + 1);
        for i in 0..n {
            assert!(freeing.put(block(i), &depot), "block {i} is kept");
        }
        assert!(!freeing.put(block(n), &depot), "every magazine is full");
        assert_eq!((freeing.len, depot.lock().len), (MAGAZINE, DEPOT));
        // Another thread's empty magazine takes the last full one stored.
        let mut taking = Magazine::EMPTY;
        let got: Vec<_> = (0..MAGAZINE).map(|_| taking.take(&depot).unwrap()).collect();
        let stored = (DEPOT - 1) * MAGAZINE..DEPOT * MAGAZINE;
        assert_eq!(got, stored.rev().map(block).collect::<Vec<_>>());
        assert_eq!(depot.lock().len, DEPOT - 1);
        // The freeing thread's own magazine is last in, first out.
        assert_eq!(freeing.take(&depot), Some(block(n - 1)));
        let mut empty = Depot::EMPTY;
        let mut none = Magazine::EMPTY;
        assert_eq!(none.take(&Mutex::new(Depot::EMPTY)), None);
        assert!(!empty.refill(&mut none));
    }

    /// `SIZE` and `ALIGN` are the layout of an `Arc<Task>` (two counts,
    /// then the task), and a task's block is reused through the cache: a
    /// task made right after another was freed on this thread gets its block.
    #[test]
    fn task_blocks_go_through_the_cache() {
        let counts = Layout::new::<[usize; 2]>();
        let arc = counts.extend(Layout::new::<crate::runtime::task::Task>()).unwrap().0.pad_to_align();
        assert_eq!((SIZE, ALIGN), (arc.size(), arc.align()));
        let t = crate::Tensor::zeros(
            crate::dtype::DType::F64,
            &[1],
            crate::layout::Order::RowMajor,
            crate::domain::Domain::Host,
        )
        .unwrap();
        let task = || crate::runtime::exec::idle_task(&t);
        let first = task();
        let at = Arc::as_ptr(&first) as usize;
        drop(first);
        let second = task();
        assert_eq!(Arc::as_ptr(&second) as usize, at, "the freed block is the next one handed out");
    }
}
