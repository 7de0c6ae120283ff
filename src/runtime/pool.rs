//! The worker pool of a runtime (SPEC §2.1, §2.6): a rayon pool whose
//! threads run ready tasks, and the counts that admission, retirement and
//! shutdown go by.
//!
//! Workers are the threads of a rayon pool, so kernels that are themselves
//! parallel (rayon `join`, `KernelCall::parallel_for`, faer) run their
//! pieces on the same threads as tasks instead of oversubscribing the cores.
//! Ready tasks go to this runtime's own injector queue, and a few long-lived
//! rayon jobs, the *drainers*, pop and run them (a rayon spawn per task
//! would cost more than a small task); a drainer that finds the queue empty
//! spins briefly, then exits. See docs/perf-notes/runtime.md for the
//! measurements behind the drainers' pacing.
//!
//! Tasks submitted with a priority (see `Submit::with_priority`) wait in a
//! separate heap, `ranked`, instead: drainers take its positive entries
//! before the injector's tasks and its negative ones after them. Without
//! priorities the heap stays empty and costs one load of its (unwritten)
//! count per look at the queues.

use std::cell::RefCell;
use std::cmp::Ordering as Rank;
use std::collections::BinaryHeap;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crossbeam_deque::{Injector, Steal};
use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};

use super::counters::ShardedCounter;
use super::poke;
use super::stats::{RuntimeStats, Stats};
use super::task::{RuntimeRef, Task};
use super::token::TokenInner;
use super::worker_threads::WorkerThreads;
use crate::error::{Error, Result, Status};
use crate::sync::prefetch_for_write;

pub(crate) const RUNNING: u8 = 0;
pub(crate) const DRAINING: u8 = 1;
pub(crate) const CANCELLING: u8 = 2;
pub(crate) const STOPPED: u8 = 3;

/// Every this many admissions (per thread), the pending count is sampled
/// for its peak (see `stats`).
const PEAK_SAMPLE: isize = 1024;

/// How long an idle drainer keeps looking for work before it exits.
const DRAIN_SPIN: Duration = Duration::from_micros(50);

/// Pause instructions between two looks at the
/// queue by an idle drainer, at first (see `drain` for when it waits longer,
/// up to `IDLE_PAUSES_MAX`).
const IDLE_PAUSES: u32 = 32;
const IDLE_PAUSES_MAX: u32 = 2048;

/// How many pause instructions an idle drainer spends between two checks of
/// how long it has been idle.
const CHECK_PAUSES: u32 = 512;

/// How many pause instructions apart a drainer in a long pause looks for a
/// poke (see [`poke`]).
const POKE_PAUSES: u32 = 32;

/// Where crossbeam's `Injector` keeps its tail (index and block): after the
/// head, each padded to 128 bytes on x86_64. Not an API of crossbeam, but
/// only a prefetch hint depends on it (a wrong offset costs speed, never
/// correctness), and a test checks it against the locked version.
const INJECTOR_TAIL_OFFSET: usize = 128;

/// The longest a thread waiting for a runtime to be idle sleeps between two
/// checks of its own (it is normally woken as soon as the work is done; see
/// `RuntimeInner::wake_idle_waiters`).
pub(crate) const IDLE_RECHECK: Duration = Duration::from_micros(200);

/// A thread counted in `idle_waiters` while this lives.
struct IdleWaiter<'a>(&'a RuntimeInner);

impl<'a> IdleWaiter<'a> {
    fn register(rt: &'a RuntimeInner) -> Self {
        rt.idle_waiters.fetch_add(1, Ordering::SeqCst);
        IdleWaiter(rt)
    }
}

impl Drop for IdleWaiter<'_> {
    fn drop(&mut self) {
        self.0.idle_waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

pub(crate) struct RuntimeInner {
    /// Itself, for starting drainers (which keep the runtime alive).
    pub(crate) me: Weak<RuntimeInner>,
    /// Process-unique number; worker threads are named `ta-rt<id>-w<k>`.
    pub(crate) id: usize,
    pub(crate) pool: rayon::ThreadPool,
    /// The pool's threads, joined when the runtime drops (after `pool`,
    /// which drops first and tells them to stop).
    #[expect(dead_code, reason = "held for its drop, which joins the threads")]
    pub(crate) worker_threads: WorkerThreads,
    pub(crate) threads: usize,
    /// Ready tasks of priority 0 waiting for a drainer, in FIFO order.
    pub(crate) ready: Injector<Arc<Task>>,
    /// Ready tasks of other priorities (see the module notes).
    pub(crate) ranked: Ranked,
    /// Runs a task taken from `ready` (the executor, which sits above the pool).
    pub(crate) run: fn(Arc<Task>),
    /// Drainer jobs started and not yet exited.
    pub(crate) drainers: CachePadded<AtomicUsize>,
    /// Drainers currently looking for work (they will take a pushed task).
    pub(crate) idle_drainers: CachePadded<AtomicUsize>,
    pub(crate) state: AtomicU8,
    /// Whether small operations ready at submission run on the submitting
    /// thread (see `ops::in_place`); on by default.
    pub(crate) small_in_place: AtomicBool,
    /// Tasks submitted to this runtime and not yet completed.
    pub(crate) outstanding: ShardedCounter,
    /// Operations that ran in place (see `ops::in_place`): submitted and
    /// completed at once, never outstanding (only `added` counts).
    pub(crate) ran_in_place: ShardedCounter,
    /// Threads waiting for `outstanding` to reach zero (in `wait_idle` or a
    /// drain), which a drainer that runs out of work wakes through `idle`
    /// (see [`RuntimeInner::wake_idle_waiters`]).
    pub(crate) idle_waiters: CachePadded<AtomicUsize>,
    pub(crate) idle_lock: Mutex<()>,
    pub(crate) idle: Condvar,
    /// Counters other than the sharded count (see [`stats`]).
    pub(crate) stats: RuntimeStats,
    /// Operations parked until their token is finished (see [`deferred`]),
    /// which a shutdown with cancel completes.
    pub(crate) parked: Mutex<Vec<Weak<TokenInner>>>,
}

thread_local! {
    /// The runtime whose pool owns this thread (empty elsewhere).
    pub(crate) static WORKER_OF: RefCell<Weak<RuntimeInner>> = const { RefCell::new(Weak::new()) };
}

/// The runtime whose worker this thread is, if any.
pub(crate) fn current_runtime() -> Option<Arc<RuntimeInner>> {
    WORKER_OF.with(|w| w.borrow().upgrade())
}

/// The kernels' probe on this runtime's workers (see
/// `kernels::par::set_peers_busy_probe`): enough ready tasks wait for every
/// other worker to take one.
pub(crate) fn peers_busy() -> bool {
    current_runtime().is_some_and(|rt| rt.queued() + 1 >= rt.threads)
}

impl RuntimeInner {
    /// Whether the calling thread is one of this runtime's workers.
    pub(crate) fn is_current_worker(&self) -> bool {
        WORKER_OF.with(|w| std::ptr::eq(w.borrow().as_ptr(), self))
    }

    fn stopped(&self) -> bool {
        self.state.load(Ordering::Relaxed) == STOPPED
    }

    pub(crate) fn cancelled(&self) -> bool {
        self.state.load(Ordering::Acquire) == CANCELLING
    }

    /// Admit one more task, or refuse because the runtime is shutting down.
    /// While draining, work submitted by this runtime's own tasks (from a
    /// kernel or a callback on one of its workers) is still admitted: it is
    /// part of the work being drained, and the task submitting it keeps the
    /// count from reaching zero until it is counted.
    pub(crate) fn admit(&self, origin: &'static str) -> Result<()> {
        if self.outstanding.increment() & (PEAK_SAMPLE - 1) == PEAK_SAMPLE - 1 {
            self.sample_pending();
        }
        self.accepts(origin).inspect_err(|_| self.refuse())
    }

    /// Whether the runtime takes work now, as [`RuntimeInner::admit`] decides
    /// it, counting nothing: for an operation that runs in place, on the
    /// submitting thread, before its submission returns (it is never
    /// outstanding, so a drain has nothing to wait for).
    #[inline]
    pub(crate) fn accepts(&self, origin: &'static str) -> Result<()> {
        match self.state.load(Ordering::SeqCst) {
            RUNNING => Ok(()),
            DRAINING if self.is_current_worker() || super::running::reporting_for((self as *const Self).cast()) => {
                Ok(())
            }
            _ => Err(Error::new(Status::Shutdown, origin, "the runtime is shut down")),
        }
    }

    /// Count an operation that ran in place, after it has (one operation
    /// submitted and completed, on this thread's counter slot).
    #[inline]
    pub(crate) fn count_in_place(&self) {
        self.ran_in_place.increment();
    }

    /// Ask for the ready queue's tail line in exclusive state, early in a
    /// submission, so that the push at its end finds the line here (drainers
    /// read it whenever they catch up; see docs/perf-notes/runtime.md).
    #[inline(always)]
    pub(crate) fn prepare_push(&self) {
        prefetch_for_write((&self.ready as *const Injector<Arc<Task>>).cast::<u8>().wrapping_add(INJECTOR_TAIL_OFFSET));
    }

    /// One admitted task is completely done. This must be the task's last
    /// use of the runtime: once the count reaches zero a draining last handle
    /// may free it (so nothing is notified here: a drainer that runs out of work
    /// wakes the waiters, see `wake_idle_waiters`).
    pub(crate) fn retire(&self) {
        self.outstanding.decrement();
    }

    /// An admitted task whose submission failed: retire it, uncounted as an operation.
    pub(crate) fn refuse(&self) {
        self.stats.count_refusal();
        self.retire();
    }

    #[cold]
    fn sample_pending(&self) {
        self.stats.sample_pending(self.outstanding.sum());
    }

    /// The runtime's counters now.
    pub(crate) fn stats(&self) -> Stats {
        let (added, taken) = self.outstanding.totals();
        let in_place = self.ran_in_place.totals().0.max(0) as u64;
        self.stats.snapshot(added.max(0) as u64, taken.max(0) as u64, in_place, self.queued())
    }

    /// Process-unique number of this runtime.
    pub(crate) fn id(&self) -> usize {
        self.id
    }

    /// Queue a ready task for this runtime's workers. A new drainer starts
    /// when more tasks are queued than drainers are idle (an idle drainer
    /// takes one task), up to one drainer per worker. A drainer stops counting
    /// itself idle before it takes a task, so two tasks pushed back to back
    /// never both count on the same idle drainer.
    pub(crate) fn push(&self, task: Arc<Task>) {
        if task.priority() == 0 {
            self.ready.push(task);
        } else {
            self.ranked.push(task);
        }
        // Pairs with the fences in `drain`: either a drainer that is leaving
        // sees this task, or we see that it left and start another.
        fence(Ordering::SeqCst);
        let active = self.drainers.load(Ordering::SeqCst);
        if active == 0 || (active < self.threads && self.queued() > self.idle_drainers.load(Ordering::SeqCst)) {
            self.start_drainer(active);
        }
    }

    /// Ready tasks waiting in either queue.
    fn queued(&self) -> usize {
        self.ready.len() + self.ranked.len()
    }

    /// Whether no ready task waits.
    #[inline(always)]
    fn nothing_queued(&self) -> bool {
        self.ranked.len() == 0 && self.ready.is_empty()
    }

    /// The next ready task to run: the highest priority first, and in the
    /// order they were queued among equals.
    #[inline(always)]
    fn take(&self) -> Steal<Arc<Task>> {
        if self.ranked.len() == 0 {
            return self.ready.steal();
        }
        self.take_ranked()
    }

    #[inline(never)]
    fn take_ranked(&self) -> Steal<Arc<Task>> {
        if let Some(t) = self.ranked.pop_above(Some(0)) {
            return Steal::Success(t);
        }
        match self.ready.steal() {
            Steal::Empty => self.ranked.pop_above(None).map_or(Steal::Empty, Steal::Success),
            s => s,
        }
    }

    /// Whether a queued task should run before `task` (a successor that
    /// the worker which made it ready would otherwise run next, in place).
    #[inline(always)]
    pub(crate) fn outranked(&self, task: &Task) -> bool {
        let p = task.priority();
        (self.ranked.len() != 0 && self.ranked.top().is_some_and(|top| top > p)) || (p < 0 && !self.ready.is_empty())
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
        // Tasks taken since the queue was last found empty, and the pause
        // between looks: every look costs the submitter a line transfer, so a
        // drainer that found several tasks waiting looks less often (up to
        // `IDLE_PAUSES_MAX`), and one that found a single task, or is poked,
        // looks often again (see docs/perf-notes/runtime.md).
        let mut taken = 0u32;
        let mut pauses = IDLE_PAUSES;
        let mut since_check = 0u32;
        let mut pokes = poke::pokes();
        let worker = rayon::current_thread_index();
        // The latest clock reading while idle: a busy spell is counted from
        // there (reading the clock when work is found would cost every idle
        // to busy transition a clock read; this overcounts a spell by at most
        // the time between two idle checks, CHECK_PAUSES pauses).
        let mut last_clock = idle_since;
        let mut busy_since = idle_since;
        loop {
            // A drainer that has just run a task steals again at once.
            // `is_empty` reads the queue's tail, which the submitting thread
            // writes on every push: asked before every steal, it moved that
            // line between the cores once per task even while the drainer
            // worked through a backlog (`steal` itself reads the tail only
            // once it has caught up with the submitter's block of the queue).
            if !idle || !self.nothing_queued() {
                if idle {
                    self.idle_drainers.fetch_sub(1, Ordering::SeqCst);
                    idle = false;
                    busy_since = last_clock;
                    self.stats.open_spell(worker);
                }
                if let Steal::Success(t) = self.take() {
                    (self.run)(t);
                    taken += 1;
                    continue;
                }
            }
            if !idle {
                // The spell is counted before the waiters are woken: a
                // `wait_idle` that returns sees it (see `is_quiet`).
                idle_since = Instant::now();
                last_clock = idle_since;
                self.stats.add_busy(worker, busy_since, idle_since, taken as u64);
                self.idle_drainers.fetch_add(1, Ordering::SeqCst);
                self.wake_idle_waiters();
                idle = true;
                pauses = if taken > 1 { (pauses * 2).min(IDLE_PAUSES_MAX) } else { IDLE_PAUSES };
                taken = 0;
            }
            let mut paused = 0;
            while paused < pauses {
                for _ in 0..POKE_PAUSES {
                    std::hint::spin_loop();
                }
                paused += POKE_PAUSES;
                if pauses > IDLE_PAUSES {
                    let now = poke::pokes();
                    if now != pokes {
                        // Someone waits: look now, and often from now on.
                        pokes = now;
                        pauses = IDLE_PAUSES;
                        break;
                    }
                }
            }
            // Time to leave, or to let another thread have the core? Asked
            // after every `CHECK_PAUSES` pauses, however long the pause
            // between two looks is.
            since_check += paused;
            if since_check < CHECK_PAUSES {
                continue;
            }
            since_check = 0;
            // (No rayon::yield_now here: it could start another drainer
            // nested on this thread, which would then hold this one, counted
            // idle, under it. Pieces of parallel kernels are taken by workers
            // that are not draining, and by this one once it exits.)
            last_clock = Instant::now();
            // A stopped runtime gets no more work: its last handle waits for
            // the drainers to leave (see `await_last_reference`).
            if last_clock.saturating_duration_since(idle_since) >= DRAIN_SPIN || self.stopped() {
                self.idle_drainers.fetch_sub(1, Ordering::SeqCst);
                self.drainers.fetch_sub(1, Ordering::SeqCst);
                fence(Ordering::SeqCst);
                if self.nothing_queued() {
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
                last_clock = idle_since;
                continue;
            }
            std::thread::yield_now();
        }
    }

    /// Wake the threads waiting for this runtime to be idle, if it is. Called
    /// by a drainer that found no more work after running some: the task
    /// that completes the runtime's work is, nearly always, run by a drainer
    /// that then finds the queue empty. (The exceptions, such as a device
    /// task finished by the device's thread, are seen by the waiters' own
    /// periodic checks.) The sum of the sharded count is taken only then,
    /// and only while someone waits: one load per idle transition otherwise.
    fn wake_idle_waiters(&self) {
        // SeqCst, paired with `IdleWaiter::register` in `sleep_until_idle`:
        // either this load sees the waiter, or the waiter's check (after it
        // registered) sees this drainer's retires.
        if self.idle_waiters.load(Ordering::SeqCst) != 0 && self.is_quiet() {
            // Under the lock, so a waiter between its check and its sleep
            // (it holds the lock there) cannot miss the notification.
            let _g = self.idle_lock.lock();
            self.idle.notify_all();
        }
    }

    /// No operation is outstanding and every worker's busy spell is
    /// counted: what `wait_idle` waits for, so that the counters read after
    /// it include all the work it waited for.
    pub(crate) fn is_quiet(&self) -> bool {
        self.outstanding.sum() == 0 && self.stats.spells_closed()
    }

    /// Sleep on `idle` until woken by [`Self::wake_idle_waiters`] or `slice`
    /// passes, unless the runtime is idle already. Counted as a waiter only
    /// here, not while spinning before: drainers take the sum of the sharded
    /// count (32 lines) at every idle transition while someone is counted,
    /// which would slow down the very work a spinning waiter waits for.
    pub(crate) fn sleep_until_idle(&self, slice: Duration) {
        let _waiting = IdleWaiter::register(self);
        let mut g = self.idle_lock.lock();
        if !self.is_quiet() {
            self.idle.wait_for(&mut g, slice);
        }
    }

    /// Run one queued task or one piece of rayon work; false if there was none.
    pub(crate) fn help_once(&self) -> bool {
        loop {
            match self.take() {
                Steal::Success(t) => {
                    // A spell of its own, or nested in the spell of the task
                    // that waits here (then only the task is counted).
                    let worker = rayon::current_thread_index();
                    let since = Instant::now();
                    self.stats.open_spell(worker);
                    (self.run)(t);
                    self.stats.add_busy(worker, since, Instant::now(), 1);
                    return true;
                }
                Steal::Retry => continue,
                Steal::Empty => return matches!(rayon::yield_now(), Some(rayon::Yield::Executed)),
            }
        }
    }
}

/// Ready tasks with a priority other than 0: a max-heap on (priority,
/// earliest queued), behind a lock, with its length readable without it.
#[derive(Default)]
pub(crate) struct Ranked {
    /// Tasks in the heap; written only when priorities are in use.
    len: CachePadded<AtomicUsize>,
    heap: Mutex<RankedHeap>,
}

#[derive(Default)]
struct RankedHeap {
    /// Numbers the pushes, for FIFO order among equal priorities.
    next: u64,
    tasks: BinaryHeap<Entry>,
}

struct Entry {
    priority: i32,
    seq: u64,
    task: Arc<Task>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Rank::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Rank> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Rank {
        self.priority.cmp(&other.priority).then(other.seq.cmp(&self.seq))
    }
}

impl Ranked {
    fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    fn push(&self, task: Arc<Task>) {
        let mut h = self.heap.lock();
        let seq = h.next;
        h.next += 1;
        h.tasks.push(Entry { priority: task.priority(), seq, task });
        self.len.fetch_add(1, Ordering::SeqCst);
    }

    /// The first task, if its priority is above `floor` (any, for `None`).
    fn pop_above(&self, floor: Option<i32>) -> Option<Arc<Task>> {
        let mut h = self.heap.lock();
        let top = h.tasks.peek()?.priority;
        if floor.is_some_and(|f| top <= f) {
            return None;
        }
        self.len.fetch_sub(1, Ordering::SeqCst);
        h.tasks.pop().map(|e| e.task)
    }

    /// The highest priority queued.
    fn top(&self) -> Option<i32> {
        self.heap.lock().tasks.peek().map(|e| e.priority)
    }
}

impl RuntimeInner {
    /// The runtime of `task`, typed again (see [`RuntimeRef`]).
    ///
    /// The task holds no reference count of its runtime (a count on a
    /// runtime-wide object, taken by the submitter and dropped by a worker
    /// for every task, would bounce one cache line between them per task).
    /// The pointer is valid from admission until the task retires: the
    /// runtime's last user handle drains every admitted task before it lets
    /// the runtime go, and retiring is the task's last use of it. Callers
    /// only use it for tasks that have not finished.
    #[inline(always)]
    pub(crate) fn of(task: &Task) -> Option<&RuntimeInner> {
        // SAFETY: every `RuntimeRef` is made by `task_ref` from a live
        // runtime that admitted the task; valid as said above.
        task.runtime_ref().map(|r| unsafe { r.as_ptr().cast::<RuntimeInner>().as_ref() })
    }

    /// This runtime as a task holds it; only for a task it has admitted.
    #[inline(always)]
    pub(crate) fn task_ref(&self) -> RuntimeRef {
        // SAFETY: points to this runtime, which the caller has admitted the task to.
        unsafe { RuntimeRef::new(NonNull::from(self).cast()) }
    }

    /// Number of worker threads.
    pub(crate) fn threads(&self) -> usize {
        self.threads
    }
}

impl Task {
    /// The runtime that runs this task (see [`RuntimeInner::of`]).
    #[inline(always)]
    pub(crate) fn runtime(&self) -> Option<&RuntimeInner> {
        RuntimeInner::of(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A product inside a task goes parallel only while no other ready task
    /// waits for the other workers: with one task queued behind two running
    /// ones on a 2-worker runtime it runs sequentially; alone, in parallel.
    #[test]
    fn kernels_run_sequentially_while_ready_tasks_wait() {
        use crate::kernels::par::{par_for, BUSY_PAR_MIN_FLOPS, PAR_MIN_FLOPS};
        use crate::{ops, DType, Domain, KernelFn, Mode, Order, Runtime, Submit, Tensor};
        use std::sync::atomic::AtomicBool;
        use std::sync::mpsc;

        let rt = Runtime::new(2).unwrap();
        let t = || Tensor::zeros(DType::F64, &[1], Order::RowMajor, Domain::Host).unwrap();
        let (x, y, z) = (t(), t(), t());
        let release = Arc::new(AtomicBool::new(false));
        let (seen_tx, seen) = mpsc::channel();
        let (started_tx, started) = mpsc::channel::<()>();
        // Task 1 holds one worker until released.
        let (r, s) = (release.clone(), started_tx.clone());
        let hold = KernelFn::new(move |_| {
            s.send(()).unwrap();
            while !r.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            Ok(())
        });
        ops::kernel("hold", &[(&x, Mode::Update)], hold, Submit::on(&rt)).unwrap();
        started.recv().unwrap();
        // Task 2 asks for parallelism once task 3 waits in the queue (both
        // workers still busy), then holds its worker too until released.
        let queued = Arc::new(AtomicBool::new(false));
        let (r, q, tx) = (release.clone(), queued.clone(), seen_tx.clone());
        let probe = KernelFn::new(move |_| {
            started_tx.send(()).unwrap();
            while !q.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            tx.send(par_for(PAR_MIN_FLOPS)).unwrap();
            tx.send(par_for(BUSY_PAR_MIN_FLOPS)).unwrap();
            while !r.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            Ok(())
        });
        ops::kernel("probe", &[(&y, Mode::Update)], probe, Submit::on(&rt)).unwrap();
        started.recv().unwrap();
        ops::kernel("queued", &[(&z, Mode::Update)], KernelFn::new(|_| Ok(())), Submit::on(&rt)).unwrap();
        assert!(rt.inner().queued() >= 1, "the third task waits for a worker");
        queued.store(true, Ordering::Release);
        let (par, big) = (seen.recv().unwrap(), seen.recv().unwrap());
        release.store(true, Ordering::Release);
        assert!(matches!(par, faer::Par::Seq), "a task waited: sequential");
        assert!(matches!(big, faer::Par::Rayon(_)), "a big product goes parallel all the same");
        rt.wait_idle(None).unwrap();
        // Alone on an idle runtime: parallel.
        let tx = seen_tx.clone();
        let alone = KernelFn::new(move |_| {
            tx.send(par_for(PAR_MIN_FLOPS)).unwrap();
            Ok(())
        });
        ops::kernel("alone", &[(&y, Mode::Update)], alone, Submit::on(&rt)).unwrap();
        assert!(matches!(seen.recv().unwrap(), faer::Par::Rayon(_)), "nothing waited: parallel");
    }

    /// `prepare_push` prefetches `INJECTOR_TAIL_OFFSET` bytes into the ready
    /// queue: that must be the tail index, which pushes move and steals do
    /// not. (The injector's layout does not depend on its item type, which
    /// holds here only a pointer.)
    #[test]
    fn the_injector_tail_is_where_prepare_push_looks() {
        assert_eq!(std::mem::size_of::<Injector<Arc<Task>>>(), std::mem::size_of::<Injector<Box<usize>>>());
        let q: Injector<Box<usize>> = Injector::new();
        assert!(std::mem::size_of_val(&q) >= INJECTOR_TAIL_OFFSET + std::mem::size_of::<usize>());
        // SAFETY: reads a word inside `q` (checked just above) while no
        // other thread can touch it.
        let word = |q: &Injector<Box<usize>>, at: usize| unsafe {
            (q as *const Injector<Box<usize>>).cast::<u8>().add(at).cast::<usize>().read()
        };
        let (head0, tail0) = (word(&q, 0), word(&q, INJECTOR_TAIL_OFFSET));
        q.push(Box::new(1));
        q.push(Box::new(2));
        let (head1, tail1) = (word(&q, 0), word(&q, INJECTOR_TAIL_OFFSET));
        assert_eq!(head1, head0, "a push moved the word at offset 0");
        assert!(tail1 > tail0, "two pushes left the word at the tail offset at {tail1} (was {tail0})");
        assert_eq!(q.steal().success().map(|b| *b), Some(1));
        assert_eq!(word(&q, INJECTOR_TAIL_OFFSET), tail1, "a steal moved the word at the tail offset");
        assert!(word(&q, 0) > head1, "a steal did not move the head");
    }
}
