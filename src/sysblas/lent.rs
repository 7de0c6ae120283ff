//! Workers that lend their cores to one multi-threaded library call.
//!
//! A large product split into one single-threaded BLAS call per worker
//! packs all of B once per call; one call on several of the library's own
//! threads packs it once and shares the panels. To make such a call without
//! oversubscribing the cores (issue 20: a multi-threaded BLAS call reserves
//! the workers it uses), the caller offers a *lend* job per other worker on
//! its rayon pool, waits briefly for idle workers to take them, and runs the
//! call on one library thread per worker that came: those workers sleep
//! until the call returns, so the library's threads run on their cores. A
//! worker busy with tasks of its own does not come; with nobody, the caller
//! does not make the call, and the product is split as before.
//!
//! The library's thread count is process-wide, so one such call runs at a
//! time in the process, and the count goes back to 1 before the lenders
//! wake.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::library::{Blas, MULTI_THREADED_CALL};

/// How long the caller waits for workers to come. Products that take this
/// path run for milliseconds ([`crate::sysblas::gemm`]'s threshold), and an
/// idle worker takes a rayon job within microseconds.
const WAIT: Duration = Duration::from_micros(100);

/// Set on [`Gate::state`] once the caller stops waiting: a lender that comes
/// later leaves at once.
const CLOSED: usize = 1 << (usize::BITS - 1);

/// Where lenders check in and sleep until the call is over.
struct Gate {
    /// The number of lenders that came before [`CLOSED`] was set, and that bit.
    state: AtomicUsize,
    over: Mutex<bool>,
    woken: Condvar,
}

impl Gate {
    /// A worker's lend job: check in, and sleep until the call is over,
    /// unless the caller has stopped waiting.
    fn lend(&self) {
        if self.state.fetch_add(1, Ordering::AcqRel) & CLOSED != 0 {
            return;
        }
        let mut over = self.over.lock();
        while !*over {
            self.woken.wait(&mut over);
        }
    }

    /// Wait up to [`WAIT`] for `wanted` lenders, then close; the number that came.
    fn close(&self, wanted: usize) -> usize {
        #[cfg(test)]
        let deadline = Instant::now() + TEST_WAIT.with(|w| w.get()).unwrap_or(WAIT);
        #[cfg(not(test))]
        let deadline = Instant::now() + WAIT;
        while self.state.load(Ordering::Acquire) < wanted && Instant::now() < deadline {
            std::hint::spin_loop();
        }
        self.state.fetch_or(CLOSED, Ordering::AcqRel) & !CLOSED
    }

    fn release(&self) {
        *self.over.lock() = true;
        self.woken.notify_all();
    }
}

/// Releases the lenders however the call ends.
struct Release<'a>(&'a Gate);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// Run `call` with the library set to one thread per worker that lends its
/// core (up to `others` of the calling pool's other workers) plus the
/// caller's. False, and `call` not run, when no worker came, another such
/// call is running, or the library's thread count is not 1 or cannot be set.
pub(crate) fn with_lent_workers(lib: &Blas, others: usize, call: impl FnOnce()) -> bool {
    if others == 0 || rayon::current_thread_index().is_none() || lib.num_threads() != Some(1) {
        return false;
    }
    let Some(_one) = MULTI_THREADED_CALL.try_lock() else { return false };
    let gate = Gate { state: AtomicUsize::new(0), over: Mutex::new(false), woken: Condvar::new() };
    let mut ran = false;
    rayon::in_place_scope(|s| {
        for _ in 0..others {
            s.spawn(|_| gate.lend());
        }
        let _release = Release(&gate);
        let came = gate.close(others);
        if came > 0 && lib.set_num_threads(came + 1) {
            call();
            lib.set_num_threads(1);
            ran = true;
            #[cfg(test)]
            LENT_HERE.with(|n| n.set(n.get() + 1));
        }
    });
    ran
}

#[cfg(test)]
thread_local! {
    /// Calls this thread made with lent workers, for the tests to tell the
    /// two paths apart.
    pub(crate) static LENT_HERE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// A longer wait for this thread's calls, where a test needs the idle
    /// worker to come however loaded the machine is.
    pub(crate) static TEST_WAIT: std::cell::Cell<Option<Duration>> = const { std::cell::Cell::new(None) };
}
