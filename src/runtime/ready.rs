//! Ready tasks do not each become a rayon job (a rayon spawn from outside the
//! pool costs more than a whole small task should). A task submitted from
//! outside the pool goes to this runtime's shared injector queue; a task
//! made ready on a worker (a successor of the task it just ran) goes to that
//! worker's own queue, which the other workers steal from. A few long-lived
//! rayon jobs, the *drainers*, run them: a drainer takes its own worker's
//! tasks first, then a batch from the injector, then a batch from another
//! worker, so the submitting thread and the workers do not pass every task
//! through one contended queue end. A drainer that finds no work spins
//! briefly, then exits (its worker then takes rayon work, such as the pieces
//! of a parallel kernel); a submission starts a drainer only when more tasks
//! are queued than drainers are idle, up to one per worker. In a steady
//! stream of submissions no thread is woken per task.

use std::cell::RefCell;
use std::sync::atomic::{fence, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crossbeam_deque::{Steal, Worker};

use super::{exec, RuntimeInner, Task};

/// How long an idle drainer keeps looking for work before it exits.
const DRAIN_SPIN: Duration = Duration::from_micros(50);

/// Pause instructions between two looks at the queue by an idle drainer.
const IDLE_PAUSES: u32 = 32;

/// The most tasks a drainer moves at once from a shared queue (the injector,
/// or another worker's) to its own: taking several per visit spares the
/// queue's lines a round trip per task, while the rest stay for the others.
const STEAL_BATCH: usize = 8;

/// A worker thread's place in its runtime.
struct Seat {
    /// The runtime whose pool owns this thread (empty elsewhere).
    runtime: Weak<RuntimeInner>,
    /// The worker's own ready tasks: successors made ready by the tasks it
    /// runs. Only this thread pushes and pops; the others steal.
    local: Option<Worker<Arc<Task>>>,
}

thread_local! {
    static SEAT: RefCell<Seat> = const { RefCell::new(Seat { runtime: Weak::new(), local: None }) };
}

/// The runtime whose worker this thread is, if any.
pub(super) fn current_runtime() -> Option<Arc<RuntimeInner>> {
    SEAT.with(|s| s.borrow().runtime.upgrade())
}

/// Make this thread worker `local`'s owner in `runtime` (`None`: no longer a worker).
pub(super) fn take_seat(runtime: Weak<RuntimeInner>, local: Option<Worker<Arc<Task>>>) {
    SEAT.with(|s| *s.borrow_mut() = Seat { runtime, local });
}

impl RuntimeInner {
    /// Whether the calling thread is one of this runtime's workers.
    pub(crate) fn is_current_worker(&self) -> bool {
        SEAT.with(|s| std::ptr::eq(s.borrow().runtime.as_ptr(), self))
    }

    /// Run `f` with this thread's own queue if it is one of this runtime's workers.
    fn with_local<R>(&self, f: impl FnOnce(Option<&Worker<Arc<Task>>>) -> R) -> R {
        SEAT.with(|s| {
            let s = s.borrow();
            f(s.local.as_ref().filter(|_| std::ptr::eq(s.runtime.as_ptr(), self)))
        })
    }

    /// Queue a ready task for this runtime's workers: on one of them, in its
    /// own queue; elsewhere in the injector. A new drainer starts when more
    /// tasks are queued than drainers are idle (an idle drainer takes one
    /// task), up to one drainer per worker; for a worker's own queue, when
    /// no drainer is idle to steal from it (the worker itself is busy). A
    /// drainer stops counting itself idle before it takes a task, so two
    /// tasks pushed back to back never both count on the same idle drainer.
    pub(crate) fn push(&self, task: Arc<Task>) {
        let task = self.with_local(|local| match local {
            Some(w) => {
                w.push(task);
                None
            }
            None => Some(task),
        });
        let queued_locally = task.is_none();
        if let Some(t) = task {
            self.ready.push(t);
        }
        // Pairs with the fences in `drain`: either a drainer that is leaving
        // sees this task, or we see that it left and start another.
        fence(Ordering::SeqCst);
        let active = self.drainers.load(Ordering::SeqCst);
        let idle = self.idle_drainers.load(Ordering::SeqCst);
        let wanted = if queued_locally { idle == 0 } else { self.ready.len() > idle };
        if active == 0 || (active < self.threads && wanted) {
            self.start_drainer(active);
        }
    }

    /// Whether any queue holds a task (a look, not a promise).
    fn has_work(&self) -> bool {
        !self.ready.is_empty() || self.locals.iter().any(|s| !s.is_empty())
    }

    /// Take a ready task: this worker's own first, then a batch from the
    /// injector, then a batch from another worker.
    fn find_task(&self) -> Option<Arc<Task>> {
        let (task, more) = self.with_local(|local| {
            if let Some(t) = local.and_then(Worker::pop) {
                return (Some(t), false);
            }
            loop {
                let mut retry = false;
                let from_injector = match local {
                    Some(w) => self.ready.steal_batch_with_limit_and_pop(w, STEAL_BATCH),
                    None => self.ready.steal(),
                };
                let from_peers = self.locals.iter().map(|peer| match local {
                    Some(w) => peer.steal_batch_with_limit_and_pop(w, STEAL_BATCH),
                    None => peer.steal(),
                });
                for got in std::iter::once(from_injector).chain(from_peers) {
                    match got {
                        Steal::Success(t) => return (Some(t), local.is_some_and(|w| !w.is_empty())),
                        Steal::Retry => retry = true,
                        Steal::Empty => {}
                    }
                }
                if !retry {
                    return (None, false);
                }
            }
        });
        if more {
            // The batch left tasks here: make sure someone can steal them.
            let active = self.drainers.load(Ordering::SeqCst);
            if active < self.threads && self.idle_drainers.load(Ordering::SeqCst) == 0 {
                self.start_drainer(active);
            }
        }
        task
    }

    fn start_drainer(&self, seen: usize) {
        if self.drainers.compare_exchange(seen, seen + 1, Ordering::SeqCst, Ordering::Relaxed).is_ok() {
            // Upgrading cannot fail: a task being pushed keeps a user handle draining.
            let me = self.me.upgrade().expect("runtime alive while it has tasks");
            self.pool.spawn(move || me.drain());
        }
    }

    /// Run queued tasks until the queue stays empty for a while.
    fn drain(self: Arc<Self>) {
        // A drainer starts idle, and counts itself idle exactly while it looks
        // for work; it stops counting before it takes a task (see `push`).
        self.idle_drainers.fetch_add(1, Ordering::SeqCst);
        let mut idle = true;
        let mut idle_since = Instant::now();
        let mut spins = 0u32;
        loop {
            if !idle || self.has_work() {
                if idle {
                    self.idle_drainers.fetch_sub(1, Ordering::SeqCst);
                    idle = false;
                }
                if let Some(t) = self.find_task() {
                    exec::run(t);
                    spins = 0;
                    continue;
                }
            }
            if !idle {
                self.idle_drainers.fetch_add(1, Ordering::SeqCst);
                idle = true;
                idle_since = Instant::now();
            }
            spins = spins.wrapping_add(1);
            if spins % 16 != 0 {
                // Look at the queue's lines only now and then: every look
                // takes the tail line from the submitting thread, which must
                // take it back for its next push.
                for _ in 0..IDLE_PAUSES {
                    std::hint::spin_loop();
                }
                continue;
            }
            // (No rayon::yield_now here: it could start another drainer
            // nested on this thread, which would then hold this one, counted
            // idle, under it. Pieces of parallel kernels are taken by workers
            // that are not draining, and by this one once it exits.)
            if idle_since.elapsed() >= DRAIN_SPIN {
                self.idle_drainers.fetch_sub(1, Ordering::SeqCst);
                self.drainers.fetch_sub(1, Ordering::SeqCst);
                fence(Ordering::SeqCst);
                if !self.has_work() {
                    return;
                }
                // A task arrived as we left: take the slot back if free.
                let active = self.drainers.load(Ordering::SeqCst);
                if active >= self.threads
                    || self.drainers.compare_exchange(active, active + 1, Ordering::SeqCst, Ordering::Relaxed).is_err()
                {
                    return;
                }
                self.idle_drainers.fetch_add(1, Ordering::SeqCst);
                idle_since = Instant::now();
                continue;
            }
            std::thread::yield_now();
        }
    }

    /// Run one queued task or one piece of rayon work; false if there was none.
    pub(super) fn help_once(&self) -> bool {
        match self.find_task() {
            Some(t) => {
                exec::run(t);
                true
            }
            None => matches!(rayon::yield_now(), Some(rayon::Yield::Executed)),
        }
    }
}
