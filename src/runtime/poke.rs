//! Pokes: how a thread that starts waiting for results tells idle drainers
//! to look at their queues often again (see `pool`).

use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

/// Bumped by every thread that starts waiting for operations to complete.
/// On a line of its own: idle drainers read it often, and only waiting
/// threads write it.
static POKES: CachePadded<AtomicUsize> = CachePadded::new(AtomicUsize::new(0));

/// Tell idle drainers that a thread waits for operations to complete: those
/// in a long pause look at their queue at once and go back to short pauses.
/// Called when a blocking wait starts and when a poll finds an operation
/// still pending.
pub(crate) fn poke() {
    POKES.fetch_add(1, Ordering::Relaxed);
}

/// The number of pokes so far (a drainer compares it with what it saw last).
#[inline(always)]
pub(crate) fn pokes() -> usize {
    POKES.load(Ordering::Relaxed)
}
