//! The runtime: a worker pool that runs ready tasks, and the waiting, shutdown
//! and completion machinery around it (SPEC §2.1, §2.6).
//!
//! Workers are the threads of a rayon pool, so kernels that are themselves
//! parallel (rayon `join`, [`crate::ops::KernelCall::parallel_for`], faer) run
//! their pieces on the same threads as tasks: small tasks and parallel kernels
//! share the cores instead of oversubscribing them.
//!
//! Ready tasks do not each become a rayon job (a rayon spawn from outside the
//! pool costs more than a whole small task should). They go to this runtime's
//! own injector queue, and a few long-lived rayon jobs, the *drainers*, pop and
//! run them. A drainer that finds the queue empty spins briefly, then exits
//! (its worker then takes rayon work, such as the pieces of a parallel
//! kernel); a submission starts a drainer only when more tasks are queued
//! than drainers are idle, up to one per worker. In a steady stream of
//! submissions no thread is woken per task, and idle drainers look at the
//! queue less and less often while they keep finding several tasks at once
//! (each look costs the submitting thread a cache-line transfer), until a
//! thread starts waiting for results.
//!
//! A blocking wait on a worker thread helps run queued tasks and rayon work
//! instead of blocking the pool.

pub(crate) mod cq;
pub(crate) mod deferred;
pub(crate) mod event;
pub(crate) mod exec;
#[cfg(all(test, loom))]
mod loom_models;
pub(crate) mod observe;
pub(crate) mod stats;
pub(crate) mod task;

use std::cell::RefCell;
use std::sync::atomic::{fence, AtomicIsize, AtomicU32, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use crossbeam_deque::{Injector, Steal};
use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result, Status};
use crate::region::Region;
use crate::value::Value;
use crate::view::View;

pub use cq::{CompletionEntry, CompletionQueue};
pub use deferred::{GrantedView, HostAccess, Token};
pub use event::{Callback, Event};
pub(crate) use exec::Released;
pub(crate) use task::Task;

/// How [`Runtime::shutdown`] treats work that has not started.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ShutdownMode {
    /// Run everything already submitted, then stop.
    Drain,
    /// Complete everything not yet started with `Cancelled`, then stop.
    Cancel,
}

const RUNNING: u8 = 0;
const DRAINING: u8 = 1;
const CANCELLING: u8 = 2;
const STOPPED: u8 = 3;

/// Every this many admissions (per thread), the pending count is sampled
/// for its peak (see [`stats`]).
const PEAK_SAMPLE: isize = 1024;

/// How long an idle drainer keeps looking for work before it exits.
const DRAIN_SPIN: Duration = Duration::from_micros(50);

/// Pause instructions (about 25 ns each here) between two looks at the
/// queue by an idle drainer, at first (see `drain` for when it waits longer,
/// up to `IDLE_PAUSES_MAX`).
const IDLE_PAUSES: u32 = 32;
const IDLE_PAUSES_MAX: u32 = 2048;

/// How many pause instructions an idle drainer spends between two checks of
/// how long it has been idle (about 13 us).
const CHECK_PAUSES: u32 = 512;

/// How many pause instructions apart a drainer in a long pause looks for a
/// poke (see [`poke`]).
const POKE_PAUSES: u32 = 32;

/// Bumped by every thread that starts waiting for operations to complete
/// (see [`poke`]). On a line of its own: idle drainers read it often, and
/// only waiting threads write it.
static POKES: CachePadded<AtomicUsize> = CachePadded::new(AtomicUsize::new(0));

/// Tell idle drainers that a thread waits for operations to complete: those
/// in a long pause (see `RuntimeInner::drain`) look at their queue at once
/// and go back to short pauses. Called when a blocking wait starts and when
/// a poll finds an operation still pending, so that a wait after a burst of
/// submissions is not served at the slow pace that suits the burst.
pub(crate) fn poke() {
    POKES.fetch_add(1, Ordering::Relaxed);
}

/// Where crossbeam's `Injector` keeps its tail (index and block): after the
/// head, each padded to 128 bytes on x86_64. Not an API of crossbeam, but
/// only a prefetch hint depends on it (a wrong offset costs speed, never
/// correctness), and a test checks it against the locked version.
const INJECTOR_TAIL_OFFSET: usize = 128;

/// Ask for the line at `p` in exclusive state (prefetchw; nothing on other
/// architectures).
#[inline(always)]
pub(crate) fn prefetch_for_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it reads and writes nothing the program
    // can observe and never faults, whatever the address.
    unsafe {
        std::arch::asm!("prefetchw [{}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The longest a thread waiting for a runtime to be idle sleeps between two
/// checks of its own (it is normally woken as soon as the work is done; see
/// `RuntimeInner::wake_idle_waiters`).
const IDLE_RECHECK: Duration = Duration::from_micros(200);

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

/// A counter split over cache lines: threads add to their own slot, so
/// counting submissions and completions never bounces a shared line between
/// the submitting thread and the workers. Only shutdown reads the sum.
/// Each slot keeps its additions and its subtractions apart (on one line),
/// so the totals of both are known too (see [`stats`]).
struct ShardedCounter {
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
/// and go with the runtimes whose workers they are, and handing out slots
/// round robin gave, after about fifteen runtimes, a new worker the slot of
/// the long-lived submitting thread (whose line then moved between them on
/// every task).
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
    fn new() -> Self {
        ShardedCounter { slots: (0..COUNTER_SLOTS).map(|_| CachePadded::new(CounterPair::default())).collect() }
    }
    /// Add one; returns what this thread's slot had added before.
    #[inline(always)]
    fn increment(&self) -> isize {
        // (A thread whose slot is already gone, in its last destructors, uses the first.)
        let i = SLOT.try_with(CounterSlot::index).unwrap_or(0);
        self.slots[i].added.fetch_add(1, Ordering::SeqCst)
    }
    #[inline(always)]
    fn decrement(&self) {
        let i = SLOT.try_with(CounterSlot::index).unwrap_or(0);
        self.slots[i].taken.fetch_add(1, Ordering::SeqCst);
    }
    /// The totals (added, taken), for the counters. Everything taken is read
    /// before anything added: whatever was taken off by then had been added
    /// before, so the difference is never below what was outstanding when
    /// the reading began.
    fn totals(&self) -> (isize, isize) {
        let taken: isize = self.slots.iter().map(|s| s.taken.load(Ordering::SeqCst)).sum();
        let added: isize = self.slots.iter().map(|s| s.added.load(Ordering::SeqCst)).sum();
        (added, taken)
    }
    /// What is outstanding: one pass, each slot's line read once (waiting
    /// threads call this in a loop while workers write the same lines).
    fn sum(&self) -> isize {
        self.slots.iter().map(|s| s.added.load(Ordering::SeqCst) - s.taken.load(Ordering::SeqCst)).sum()
    }
}

pub(crate) struct RuntimeInner {
    /// Itself, for starting drainers (which keep the runtime alive).
    me: Weak<RuntimeInner>,
    /// Process-unique number; worker threads are named `ta-rt<id>-w<k>`.
    id: usize,
    pool: rayon::ThreadPool,
    threads: usize,
    /// Ready tasks waiting for a drainer.
    ready: Injector<Arc<Task>>,
    /// Drainer jobs started and not yet exited.
    drainers: CachePadded<AtomicUsize>,
    /// Drainers currently looking for work (they will take a pushed task).
    idle_drainers: CachePadded<AtomicUsize>,
    state: AtomicU8,
    /// Tasks submitted to this runtime and not yet completed.
    outstanding: ShardedCounter,
    /// Threads waiting for `outstanding` to reach zero (in `wait_idle` or a
    /// drain), which a drainer that runs out of work wakes through `idle`
    /// (see [`RuntimeInner::wake_idle_waiters`]).
    idle_waiters: CachePadded<AtomicUsize>,
    idle_lock: Mutex<()>,
    idle: Condvar,
    /// Counters other than the sharded count (see [`stats`]).
    pub(crate) stats: stats::RuntimeStats,
    /// Operations parked until their token is finished (see [`deferred`]),
    /// which a shutdown with cancel completes.
    pub(crate) parked: Mutex<Vec<Weak<deferred::TokenInner>>>,
}

thread_local! {
    /// The runtime whose pool owns this thread (empty elsewhere).
    static WORKER_OF: RefCell<Weak<RuntimeInner>> = const { RefCell::new(Weak::new()) };
}

/// The runtime whose worker this thread is, if any.
fn current_runtime() -> Option<Arc<RuntimeInner>> {
    WORKER_OF.with(|w| w.borrow().upgrade())
}

impl RuntimeInner {
    /// Whether the calling thread is one of this runtime's workers.
    pub(crate) fn is_current_worker(&self) -> bool {
        WORKER_OF.with(|w| std::ptr::eq(w.borrow().as_ptr(), self))
    }

    pub(crate) fn cancelled(&self) -> bool {
        self.state.load(Ordering::Acquire) == CANCELLING
    }

    /// Admit one more task, or refuse because the runtime is shutting down.
    /// While draining, work submitted by this runtime's own tasks (from a
    /// kernel or a callback on one of its workers) is still admitted: it is
    /// part of the work being drained, and the task submitting it keeps the
    /// count from reaching zero until it is counted.
    #[inline]
    pub(crate) fn admit(&self, origin: &'static str) -> Result<()> {
        if self.outstanding.increment() & (PEAK_SAMPLE - 1) == PEAK_SAMPLE - 1 {
            self.sample_pending();
        }
        match self.state.load(Ordering::SeqCst) {
            RUNNING => Ok(()),
            DRAINING if self.is_current_worker() => Ok(()),
            _ => {
                self.refuse();
                Err(Error::new(Status::Shutdown, origin, "the runtime is shut down"))
            }
        }
    }

    /// Ask for the ready queue's tail line in exclusive state, early in a
    /// submission, so that the push at its end finds the line here. Drainers
    /// read that line whenever they catch up with the submitter (crossbeam's
    /// `Injector::steal` compares head and tail while they are in one block),
    /// and a push that has to fetch it back stalls twice, on the load of the
    /// tail and on the compare-and-swap: perf put about 20% of the
    /// submitting thread's samples in pattern (b) there. Fetched ~100 ns
    /// ahead, the transfer overlaps the rest of the submission (interleaved
    /// runs of 100k independent submissions: 142-145 -> 129-132 ns each).
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
    pub(crate) fn stats(&self) -> stats::Stats {
        let (added, taken) = self.outstanding.totals();
        self.stats.snapshot(added.max(0) as u64, taken.max(0) as u64, self.ready.len())
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
        self.ready.push(task);
        // Pairs with the fences in `drain`: either a drainer that is leaving
        // sees this task, or we see that it left and start another.
        fence(Ordering::SeqCst);
        let active = self.drainers.load(Ordering::SeqCst);
        if active == 0 || (active < self.threads && self.ready.len() > self.idle_drainers.load(Ordering::SeqCst)) {
            self.start_drainer(active);
        }
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
        // between looks. Every look takes the queue's tail line from a
        // submitting thread, which must take it back for its next push: a
        // drainer that keeps up with a stream of submissions (it finds the
        // queue empty again after each task or two) would cost the submitter
        // a line transfer per task. So a drainer that found more than one
        // task waiting looks less often (the stream's tasks then wait in the
        // queue a little, and are taken back to back), up to
        // `IDLE_PAUSES_MAX` (about 50 us; a stream's tasks then come out of
        // the queue many at a time, and the drainers run far enough behind
        // the submitter not to share the lines of the tasks it is enrolling);
        // one that found a single task (a round trip: the submitter waits for
        // it) looks often again, so latency stays low, and so does one that
        // is poked because a thread started waiting (see `poke`).
        let mut taken = 0u32;
        let mut pauses = IDLE_PAUSES;
        let mut since_check = 0u32;
        let mut pokes = POKES.load(Ordering::Relaxed);
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
            if !idle || !self.ready.is_empty() {
                if idle {
                    self.idle_drainers.fetch_sub(1, Ordering::SeqCst);
                    idle = false;
                    busy_since = last_clock;
                }
                if let Steal::Success(t) = self.ready.steal() {
                    exec::run(t);
                    taken += 1;
                    continue;
                }
            }
            if !idle {
                self.idle_drainers.fetch_add(1, Ordering::SeqCst);
                self.wake_idle_waiters();
                idle = true;
                idle_since = Instant::now();
                last_clock = idle_since;
                self.stats.add_busy(worker, busy_since, idle_since, taken as u64);
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
                    let now = POKES.load(Ordering::Relaxed);
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
            if last_clock.saturating_duration_since(idle_since) >= DRAIN_SPIN {
                self.idle_drainers.fetch_sub(1, Ordering::SeqCst);
                self.drainers.fetch_sub(1, Ordering::SeqCst);
                fence(Ordering::SeqCst);
                if self.ready.is_empty() {
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
        if self.idle_waiters.load(Ordering::SeqCst) != 0 && self.outstanding.sum() == 0 {
            // Under the lock, so a waiter between its check and its sleep
            // (it holds the lock there) cannot miss the notification.
            let _g = self.idle_lock.lock();
            self.idle.notify_all();
        }
    }

    /// Sleep on `idle` until woken by [`Self::wake_idle_waiters`] or `slice`
    /// passes, unless the runtime is idle already. Counted as a waiter only
    /// here, not while spinning before: drainers take the sum of the sharded
    /// count (32 lines) at every idle transition while someone is counted,
    /// which would slow down the very work a spinning waiter waits for.
    fn sleep_until_idle(&self, slice: Duration) {
        let _waiting = IdleWaiter::register(self);
        let mut g = self.idle_lock.lock();
        if self.outstanding.sum() != 0 {
            self.idle.wait_for(&mut g, slice);
        }
    }

    /// Run one queued task or one piece of rayon work; false if there was none.
    fn help_once(&self) -> bool {
        loop {
            match self.ready.steal() {
                Steal::Success(t) => {
                    let since = Instant::now();
                    exec::run(t);
                    self.stats.add_busy(rayon::current_thread_index(), since, Instant::now(), 1);
                    return true;
                }
                Steal::Retry => continue,
                Steal::Empty => return matches!(rayon::yield_now(), Some(rayon::Yield::Executed)),
            }
        }
    }
}

/// A worker pool plus the bookkeeping for draining and cancelling it. Cloning
/// shares the runtime. Dropping its last handle drains it: everything
/// submitted runs to completion first (from one of its own workers, the drain
/// happens on a helper thread instead, so the drop never deadlocks).
#[derive(Clone)]
pub struct Runtime {
    user: Arc<UserHandle>,
}

/// The part shared by a runtime's user handles; dropping it drains.
struct UserHandle {
    inner: Arc<RuntimeInner>,
}

impl Drop for UserHandle {
    fn drop(&mut self) {
        // Tasks refer to their runtime without a reference count (see
        // `Task::runtime`): the runtime must outlive every admitted task.
        if self.inner.is_current_worker() {
            let inner = self.inner.clone();
            std::thread::spawn(move || inner.drain_to_idle(ShutdownMode::Drain));
        } else {
            self.inner.drain_to_idle(ShutdownMode::Drain);
        }
    }
}

impl RuntimeInner {
    /// Stop accepting work (upgrading a drain to a cancel if asked) and wait
    /// until every admitted task has retired.
    fn drain_to_idle(&self, mode: ShutdownMode) {
        let target = match mode {
            ShutdownMode::Drain => DRAINING,
            ShutdownMode::Cancel => CANCELLING,
        };
        let _ = self.state.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| (s < target).then_some(target));
        if self.cancelled() {
            deferred::cancel_parked(self);
        }
        poke();
        while self.outstanding.sum() != 0 {
            self.sleep_until_idle(IDLE_RECHECK);
        }
        let _ = self.state.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| (s != STOPPED).then_some(STOPPED));
        observe::runtime_stopped(self.id);
    }
}

impl Runtime {
    /// A runtime with `threads` workers (0 = one per available core).
    pub fn new(threads: usize) -> Result<Runtime> {
        let threads = if threads == 0 { default_threads() } else { threads };
        static NEXT_ID: AtomicUsize = AtomicUsize::new(0);
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let mut failure = None;
        let inner = Arc::new_cyclic(|weak: &Weak<RuntimeInner>| {
            let me = weak.clone();
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(move |k| format!("ta-rt{id}-w{k}"))
                .start_handler(move |_| WORKER_OF.with(|w| *w.borrow_mut() = me.clone()))
                .exit_handler(|_| WORKER_OF.with(|w| *w.borrow_mut() = Weak::new()))
                .panic_handler(|p| eprintln!("tensorasync: a worker job {}", exec::panic_message(&p)))
                .build();
            let pool = pool.unwrap_or_else(|e| {
                failure = Some(e.to_string());
                // Report the failure below; a one-thread pool keeps the value well-formed.
                rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("cannot start any worker thread")
            });
            RuntimeInner {
                me: weak.clone(),
                id,
                pool,
                threads,
                ready: Injector::new(),
                drainers: CachePadded::new(AtomicUsize::new(0)),
                idle_drainers: CachePadded::new(AtomicUsize::new(0)),
                idle_waiters: CachePadded::new(AtomicUsize::new(0)),
                state: AtomicU8::new(RUNNING),
                outstanding: ShardedCounter::new(),
                idle_lock: Mutex::new(()),
                idle: Condvar::new(),
                stats: stats::RuntimeStats::new(threads),
                parked: Mutex::new(Vec::new()),
            }
        });
        if let Some(e) = failure {
            return Err(Error::new(Status::Internal, "runtime_new", format!("cannot start worker threads: {e}")));
        }
        observe::runtime_created(&inner);
        Ok(Runtime { user: Arc::new(UserHandle { inner }) })
    }

    pub(crate) fn inner(&self) -> &RuntimeInner {
        &self.user.inner
    }

    /// The process-wide default runtime, created on first use with
    /// `TA_NUM_THREADS` workers (default: one per available core).
    pub fn global() -> &'static Runtime {
        GLOBAL.get_or_init(|| {
            let n = std::env::var("TA_NUM_THREADS").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
            Runtime::new(n).expect("default runtime")
        })
    }

    /// Whether this is the default runtime (without creating it).
    pub fn is_global(&self) -> bool {
        GLOBAL.get().is_some_and(|g| g.same_as(self))
    }

    /// Process-unique number of this runtime (its workers are named `ta-rt<id>-w<k>`).
    pub fn id(&self) -> usize {
        self.inner().id
    }

    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.inner().threads
    }

    /// Tasks submitted and not yet completed.
    pub fn outstanding(&self) -> usize {
        self.inner().outstanding.sum().max(0) as usize
    }

    /// Wait until every operation submitted to this runtime so far (and any
    /// they submit) has completed, without stopping the runtime (the
    /// counterpart of `starpu_task_wait_for_all` and `taskwait`). `None`
    /// waits forever; on timeout the error has status `Timeout`. From one of
    /// this runtime's workers it fails with `WouldDeadlock` (the caller's own
    /// task can never be complete while it waits).
    pub fn wait_idle(&self, timeout: Option<Duration>) -> Result<()> {
        const ORIGIN: &str = "runtime_wait_idle";
        let inner = self.inner();
        if inner.is_current_worker() {
            return Err(Error::new(
                Status::WouldDeadlock,
                ORIGIN,
                "a runtime's own task cannot wait for the runtime to be idle",
            ));
        }
        poke();
        let done = block_until(
            || inner.outstanding.sum() == 0,
            |slice| inner.sleep_until_idle(slice.min(IDLE_RECHECK)),
            timeout,
        );
        if done {
            Ok(())
        } else {
            Err(Error::new(Status::Timeout, ORIGIN, "operations were still running when the wait timed out"))
        }
    }

    /// Stop accepting work, then drain or cancel what was submitted; returns once
    /// every submitted task has completed and fired its notifications. Calling it
    /// from one of this runtime's workers fails with `WouldDeadlock`. Calling it
    /// again is harmless.
    pub fn shutdown(&self, mode: ShutdownMode) -> Result<()> {
        if self.inner().is_current_worker() {
            return Err(Error::new(
                Status::WouldDeadlock,
                "runtime_shutdown",
                "a runtime cannot be shut down from one of its own workers",
            ));
        }
        self.inner().drain_to_idle(mode);
        Ok(())
    }

    /// Whether two handles refer to the same runtime.
    pub fn same_as(&self, other: &Runtime) -> bool {
        Arc::ptr_eq(&self.user.inner, &other.user.inner)
    }
}

static GLOBAL: OnceLock<Runtime> = OnceLock::new();

fn default_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Block until `done()` or the deadline. On a worker thread, run queued tasks
/// and rayon work while waiting, so the pool never hangs on its own waiters.
pub(crate) fn block_until(done: impl Fn() -> bool, park: impl Fn(Duration), timeout: Option<Duration>) -> bool {
    let deadline = timeout.map(|t| Instant::now() + t);
    let worker_of = current_runtime();
    if worker_of.is_none() && spin_until(&done, deadline) {
        return true;
    }
    let mut backoff = Duration::from_micros(20);
    loop {
        if done() {
            return true;
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return false;
        }
        if worker_of.as_ref().is_some_and(|rt| rt.help_once()) {
            backoff = Duration::from_micros(20);
            continue;
        }
        let mut slice = if worker_of.is_some() { backoff } else { Duration::from_millis(100) };
        if let Some(d) = deadline {
            slice = slice.min(d - now);
        }
        park(slice);
        backoff = (backoff * 2).min(Duration::from_millis(1));
    }
}

/// How long an outside thread spins before it parks: a short operation
/// completes within it, and the waiter then sees it without a futex wake-up
/// (several microseconds each); a long one loses nothing measurable.
const SPIN_BEFORE_PARK: Duration = Duration::from_micros(10);

/// Spin (yielding the core in between) until `done()`, [`SPIN_BEFORE_PARK`]
/// or the deadline; whether `done()` became true.
fn spin_until(done: &impl Fn() -> bool, deadline: Option<Instant>) -> bool {
    let start = Instant::now();
    let stop = deadline.map_or(start + SPIN_BEFORE_PARK, |d| d.min(start + SPIN_BEFORE_PARK));
    loop {
        for _ in 0..64 {
            if done() {
                return true;
            }
            std::hint::spin_loop();
        }
        if Instant::now() >= stop {
            return done();
        }
        std::thread::yield_now();
    }
}

/// Wait for everything enrolled on `value` so far; see [`crate::Tensor::wait`].
pub(crate) fn wait_value(value: &Arc<Value>, region: &Region, timeout: Option<Duration>) -> Result<()> {
    const ORIGIN: &str = "tensor_wait";
    if exec::current_task_holds(value) {
        return Err(Error::new(
            Status::WouldDeadlock,
            ORIGIN,
            "a task cannot wait on a tensor it is accessing: the wait needs the task itself to finish",
        ));
    }
    let mut s = value.state.lock();
    if s.queue.is_idle() {
        drop(s);
        return crate::value::settled_state(value, region, ORIGIN);
    }
    let event = Event::new();
    let task = exec::barrier(crate::value::ValueRc::new(value.clone()), region.clone(), event.clone());
    s.queue.enroll_barrier(&task, region);
    drop(s);
    event.bind(&task);
    if task.release_guard() {
        exec::run(task);
    }
    event.wait(timeout)
}

/// An event that completes once everything enrolled on `region` of `value`
/// so far has completed, with the outcome a wait would report (see
/// [`crate::Tensor::ready`]). Never blocks.
pub(crate) fn ready_value(value: &Arc<Value>, region: &Region) -> Event {
    const ORIGIN: &str = "tensor_ready";
    let event = Event::new();
    let mut s = value.state.lock();
    if s.queue.is_idle() {
        drop(s);
        event.complete(&crate::value::settled_state(value, region, ORIGIN));
        return event;
    }
    let task = exec::barrier(crate::value::ValueRc::new(value.clone()), region.clone(), event.clone());
    s.queue.enroll_barrier(&task, region);
    drop(s);
    event.bind(&task);
    if task.release_guard() {
        exec::run(task);
    }
    event
}

/// Let go of a counted reference to `value` (see [`crate::value::ValueRc`]).
///
/// Every count of a value goes here, under the value's lock, so a count
/// that is not the last stays not the last until it has gone. The last one
/// goes at once if nothing enrolled on the value is unfinished; otherwise it
/// moves into a release task that runs after everything enrolled so far, so
/// that the value outlives the tasks that point at it without a count.
pub(crate) fn release_value(value: Arc<Value>) {
    let ptr = Arc::as_ptr(&value);
    // SAFETY: the value stays alive while it is used: see `release_under`.
    release_under(unsafe { &*ptr }, value, |last| Released::Value(crate::value::ValueRc::new(last)));
}

/// Let go of a counted reference to `view` (see [`crate::value::ViewRc`]),
/// under its root value's lock, as [`release_value`] does for values. A
/// last count that moves into a release task lets go of the view's contents
/// first (see [`View::release_contents`]).
pub(crate) fn release_view(view: Arc<View>) {
    let ptr = Arc::as_ptr(view.root.arc());
    // SAFETY: the view's count of its root keeps the value alive while it is
    // used: see `release_under`. (No count of the value is taken here: every
    // count of a value must go under its lock, see `ValueRc`.)
    release_under(unsafe { &*ptr }, view, |mut last| {
        if let Some(view) = Arc::get_mut(&mut last) {
            view.release_contents();
        }
        Released::View(last)
    });
}

/// Drop `count` under `value`'s lock; if it is the last one and operations
/// are still enrolled on `value`, move it (made into `Released`) into a
/// release task behind them instead.
///
/// `value` must stay alive while `count` lives: `count` goes only after the
/// lock's guard (when it is the last), or while other counts remain (which
/// can only go under this lock), or moves into the release task, which
/// cannot run before the guard goes.
fn release_under<T>(value: &Value, count: Arc<T>, released: impl FnOnce(Arc<T>) -> Released) {
    let mut s = value.state.lock();
    if Arc::strong_count(&count) > 1 {
        drop(count);
        return;
    }
    if s.queue.is_idle() {
        drop(s);
        drop(count);
        return;
    }
    let task = exec::release(released(count));
    s.queue.enroll_barrier(&task, &Region::Full);
    drop(s);
    if task.release_guard() {
        exec::run(task);
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
