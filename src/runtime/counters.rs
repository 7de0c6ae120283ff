//! A counter split over cache lines, one slot per thread: counting
//! submissions and completions never bounces a shared line between the
//! submitting thread and the workers.

use std::sync::atomic::{AtomicIsize, AtomicU32, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

/// A counter split over cache lines: threads add to their own slot, so
/// counting submissions and completions never bounces a shared line between
/// the submitting thread and the workers. Only shutdown reads the sum.
/// Each slot keeps its additions and its subtractions apart (on one line),
/// so the totals of both are known too (see [`stats`]).
pub(crate) struct ShardedCounter {
    slots: Box<[CachePadded<CounterPair>]>,
}

/// One slot of a [`ShardedCounter`]: what was added and what was taken off.
#[derive(Default)]
struct CounterPair {
    added: AtomicIsize,
    taken: AtomicIsize,
}

const COUNTER_SLOTS: usize = 32;

/// Slots no living thread holds (bit `i` for slot `i`).
static FREE_SLOTS: AtomicU32 = AtomicU32::new(u32::MAX);
const _: () = assert!(COUNTER_SLOTS == u32::BITS as usize, "one bit of FREE_SLOTS per slot");

/// A thread's counter slot, given back when the thread exits: threads come
/// and go with the runtimes whose workers they are, and a new worker must
/// not get the slot of a long-lived submitting thread.
struct CounterSlot(usize);

impl CounterSlot {
    fn take() -> CounterSlot {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let mut free = FREE_SLOTS.load(Ordering::Relaxed);
        while free != 0 {
            let i = free.trailing_zeros();
            match FREE_SLOTS.compare_exchange_weak(free, free & !(1 << i), Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return CounterSlot(i as usize),
                Err(now) => free = now,
            }
        }
        // More living threads than slots: share one (correct, only slower).
        CounterSlot(COUNTER_SLOTS + NEXT.fetch_add(1, Ordering::Relaxed) % COUNTER_SLOTS)
    }

    fn index(&self) -> usize {
        self.0 % COUNTER_SLOTS
    }
}

impl Drop for CounterSlot {
    fn drop(&mut self) {
        if self.0 < COUNTER_SLOTS {
            FREE_SLOTS.fetch_or(1 << self.0, Ordering::Relaxed);
        }
    }
}

thread_local! {
    static SLOT: CounterSlot = CounterSlot::take();
}

impl ShardedCounter {
    pub(crate) fn new() -> Self {
        ShardedCounter { slots: (0..COUNTER_SLOTS).map(|_| CachePadded::new(CounterPair::default())).collect() }
    }
    /// Add one; returns what this thread's slot had added before.
    #[inline(always)]
    pub(crate) fn increment(&self) -> isize {
        // (A thread whose slot is already gone, in its last destructors, uses the first.)
        let i = SLOT.try_with(CounterSlot::index).unwrap_or(0);
        self.slots[i].added.fetch_add(1, Ordering::SeqCst)
    }
    #[inline(always)]
    pub(crate) fn decrement(&self) {
        let i = SLOT.try_with(CounterSlot::index).unwrap_or(0);
        self.slots[i].taken.fetch_add(1, Ordering::SeqCst);
    }
    /// The totals (added, taken), for the counters. Everything taken is read
    /// before anything added: whatever was taken off by then had been added
    /// before, so the difference is never below what was outstanding when
    /// the reading began.
    pub(crate) fn totals(&self) -> (isize, isize) {
        let taken: isize = self.slots.iter().map(|s| s.taken.load(Ordering::SeqCst)).sum();
        let added: isize = self.slots.iter().map(|s| s.added.load(Ordering::SeqCst)).sum();
        (added, taken)
    }
    /// What is outstanding: one pass, each slot's line read once (waiting
    /// threads call this in a loop while workers write the same lines).
    pub(crate) fn sum(&self) -> isize {
        self.slots.iter().map(|s| s.added.load(Ordering::SeqCst) - s.taken.load(Ordering::SeqCst)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread's counter slot goes back when the thread exits: threads that
    /// come and go one after the other never get the slot of a thread that
    /// lives on (here, this one).
    #[test]
    fn exited_threads_give_their_counter_slots_back() {
        let mine = SLOT.with(CounterSlot::index);
        for _ in 0..3 * COUNTER_SLOTS {
            let theirs = std::thread::spawn(|| SLOT.with(CounterSlot::index)).join().unwrap();
            assert_ne!(theirs, mine, "a new thread got a living thread's counter slot");
        }
    }
}
