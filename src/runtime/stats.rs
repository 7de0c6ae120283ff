//! Counters of a runtime (`ta_runtime_stats`): what the hot paths count is
//! kept where they already write, so counting costs no extra shared line.
//!
//! - Submissions and completions: the two halves of the sharded count of
//!   outstanding tasks (see `ShardedCounter` in the parent module), which
//!   every admission and retirement updates anyway.
//! - Refusals (an admitted task that is dropped because the submission
//!   failed), failures and cancellations: only on those (rare) paths.
//! - Busy time and tasks taken from the ready queue: per worker, added by
//!   the worker itself once per busy spell of a drainer (plain load and
//!   store on its own line: one writer per slot). The slot also says whether
//!   a spell is open, so `wait_idle` can return only once the spells of the
//!   work it waited for are counted.
//! - The peak of pending operations: sampled by every 1024th admission of
//!   each thread's slot and by every read of the counters.

use std::sync::atomic::{AtomicIsize, AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use crossbeam_utils::CachePadded;

use crate::error::{Result, Status};

/// One worker's counters (written only by that worker).
#[derive(Default)]
pub(crate) struct WorkerSlot {
    busy_ns: AtomicU64,
    steals: AtomicU64,
    /// Busy spells started and not counted yet: more than one when a task
    /// that waits helps (`help_once`, or a drainer its help starts) inside
    /// the spell that runs it.
    open: AtomicU32,
}

/// The counters of one runtime that are not part of the sharded count.
pub(crate) struct RuntimeStats {
    workers: Box<[CachePadded<WorkerSlot>]>,
    refused: AtomicU64,
    failed: AtomicU64,
    cancelled: AtomicU64,
    peak: AtomicIsize,
}

/// A snapshot of a runtime's counters (see `ta_runtime_stats` for each).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub submitted: u64,
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub steals: u64,
    pub queue_depth: u64,
    pub pending: u64,
    pub peak_pending: u64,
    pub busy_ns: Vec<u64>,
}

impl RuntimeStats {
    pub(crate) fn new(threads: usize) -> RuntimeStats {
        RuntimeStats {
            workers: (0..threads).map(|_| CachePadded::new(WorkerSlot::default())).collect(),
            refused: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            peak: AtomicIsize::new(0),
        }
    }

    /// An admitted task that never became an operation (its submission failed).
    pub(crate) fn count_refusal(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// An operation completed with `result`, an error.
    #[cold]
    pub(crate) fn count_failure(&self, result: &Result<()>) {
        if let Err(e) = result {
            let c = if e.status() == Status::Cancelled { &self.cancelled } else { &self.failed };
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Record `pending` operations as a candidate for the peak.
    pub(crate) fn sample_pending(&self, pending: isize) {
        self.peak.fetch_max(pending, Ordering::Relaxed);
    }

    /// The slot of `worker` (the worker's index in its pool); none for a
    /// thread outside the pool.
    fn slot(&self, worker: Option<usize>) -> Option<&WorkerSlot> {
        worker.and_then(|i| self.workers.get(i)).map(|w| &**w)
    }

    /// A worker starts a busy spell, before it takes its first task.
    pub(crate) fn open_spell(&self, worker: Option<usize>) {
        if let Some(w) = self.slot(worker) {
            // Relaxed is enough: the spell's tasks retire after this store
            // (SeqCst counter updates), and `spells_closed` reads it only
            // once it has seen them retire.
            w.open.store(w.open.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        }
    }

    /// A worker's busy spell (opened by `open_spell`) that started at
    /// `since` and ran `taken` tasks from the ready queue is over: count it.
    /// A nested spell's time is already part of the one around it: only its
    /// tasks are counted.
    pub(crate) fn add_busy(&self, worker: Option<usize>, since: Instant, until: Instant, taken: u64) {
        if let Some(w) = self.slot(worker) {
            // One writer per slot (the worker itself): no read-modify-write needed.
            let open = w.open.load(Ordering::Relaxed);
            if open <= 1 {
                let ns = until.saturating_duration_since(since).as_nanos() as u64;
                w.busy_ns.store(w.busy_ns.load(Ordering::Relaxed) + ns, Ordering::Relaxed);
            }
            w.steals.store(w.steals.load(Ordering::Relaxed) + taken, Ordering::Relaxed);
            // SeqCst, paired with the idle waiters' registration (see
            // `RuntimeInner::wake_idle_waiters`); it also publishes the counts above.
            w.open.store(open.saturating_sub(1), Ordering::SeqCst);
        }
    }

    /// Whether every worker's busy spell so far has been counted.
    pub(crate) fn spells_closed(&self) -> bool {
        self.workers.iter().all(|w| w.open.load(Ordering::SeqCst) == 0)
    }

    /// The counters, given the sharded totals (`in_place`: operations that
    /// ran in place, submitted and completed at once).
    pub(crate) fn snapshot(&self, admitted: u64, retired: u64, in_place: u64, queue_depth: usize) -> Stats {
        let refused = self.refused.load(Ordering::Relaxed);
        let pending = admitted.saturating_sub(retired);
        self.sample_pending(pending as isize);
        Stats {
            submitted: admitted.saturating_sub(refused) + in_place,
            completed: retired.saturating_sub(refused) + in_place,
            failed: self.failed.load(Ordering::Relaxed),
            cancelled: self.cancelled.load(Ordering::Relaxed),
            steals: self.workers.iter().map(|w| w.steals.load(Ordering::Relaxed)).sum(),
            queue_depth: queue_depth as u64,
            pending,
            peak_pending: self.peak.load(Ordering::Relaxed).max(0) as u64,
            busy_ns: self.workers.iter().map(|w| w.busy_ns.load(Ordering::Relaxed)).collect(),
        }
    }
}
