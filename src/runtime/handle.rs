//! The public handle of a runtime: creation, the default runtime, and
//! shutdown (a drain or a cancel of what was submitted).

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use crossbeam_deque::Injector;
use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};

use super::counters::ShardedCounter;
use super::deferred;
use super::exec;
use super::guard::panic_message;
use super::observe;
use super::poke::poke;
use super::pool::{peers_busy, RuntimeInner, CANCELLING, DRAINING, IDLE_RECHECK, RUNNING, STOPPED, WORKER_OF};
use super::stats::RuntimeStats;
use super::worker_threads::WorkerThreads;
use crate::error::{Error, Result, Status};

/// The longest a dropped runtime's last user handle waits for its idle
/// drainers to exit (see [`RuntimeInner::await_last_reference`]).
const LAST_REFERENCE_WAIT: Duration = Duration::from_secs(1);

/// How many times that wait yields before it sleeps between looks.
const LAST_REFERENCE_YIELDS: u32 = 1000;

/// How [`Runtime::shutdown`] treats work that has not started.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ShutdownMode {
    /// Run everything already submitted, then stop.
    Drain,
    /// Complete everything not yet started with `Cancelled`, then stop.
    Cancel,
}

/// A worker pool plus the bookkeeping for draining and cancelling it. Cloning
/// shares the runtime. Dropping its last handle drains it: everything
/// submitted runs to completion first, and the worker threads have exited
/// when the drop returns (from one of its own workers, the drain happens on a
/// helper thread instead, so the drop never deadlocks, and that thread joins
/// the workers).
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
            std::thread::spawn(move || inner.close_last_handle());
        } else {
            self.inner.close_last_handle();
        }
    }
}

impl RuntimeInner {
    /// Stop accepting work (upgrading a drain to a cancel if asked) and wait
    /// until every admitted task has retired.
    pub(crate) fn drain_to_idle(&self, mode: ShutdownMode) {
        let target = match mode {
            ShutdownMode::Drain => DRAINING,
            ShutdownMode::Cancel => CANCELLING,
        };
        let _ = self.state.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| (s < target).then_some(target));
        if self.cancelled() {
            deferred::cancel_parked(self);
        }
        poke();
        while !self.is_quiet() {
            self.sleep_until_idle(IDLE_RECHECK);
        }
        let _ = self.state.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| (s != STOPPED).then_some(STOPPED));
        observe::runtime_stopped(self.id);
    }

    /// What the last user handle's drop does: drain everything submitted,
    /// then let the runtime drop (and join its threads) here if it can.
    fn close_last_handle(self: &Arc<Self>) {
        self.drain_to_idle(ShutdownMode::Drain);
        self.await_last_reference();
    }

    /// Wait, briefly, for the drainers of a stopped runtime to exit and
    /// give back their references, so that the caller's is the last: the
    /// runtime then drops, and joins its threads, on the caller's thread.
    /// (Drainers of a stopped runtime leave at their next idle check, a few
    /// microseconds; a reference kept longer, such as by a helper thread's
    /// drain, leaves the join to whoever drops it last.)
    fn await_last_reference(self: &Arc<Self>) {
        let deadline = Instant::now() + LAST_REFERENCE_WAIT;
        let mut looks = 0u32;
        while Arc::strong_count(self) > 1 && Instant::now() < deadline {
            // Yield first: the drainers see the runtime stopped within a few
            // microseconds, and a sleep lasts at least the timer slack (50 µs).
            if looks < LAST_REFERENCE_YIELDS {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
            looks += 1;
        }
    }
}

impl Runtime {
    /// The most workers a runtime has: a larger count is refused at once
    /// rather than started thread by thread until the system runs out.
    ///
    /// ```
    /// use tensorasync::{Runtime, Status};
    /// let e = Runtime::new(Runtime::MAX_THREADS + 1).err().unwrap();
    /// assert_eq!(e.status(), Status::InvalidArgument);
    /// ```
    pub const MAX_THREADS: usize = 4096;

    /// A runtime with `threads` workers (0 = one per available core; at
    /// most [`Runtime::MAX_THREADS`]).
    ///
    /// ```
    /// use tensorasync::{Runtime, Status};
    /// let rt = Runtime::new(2).unwrap();
    /// assert_eq!(rt.threads(), 2);
    /// let per_core = Runtime::new(0).unwrap();
    /// assert!(per_core.threads() >= 1);
    /// assert_eq!(Runtime::new(usize::MAX).err().map(|e| e.status()), Some(Status::InvalidArgument));
    /// ```
    pub fn new(threads: usize) -> Result<Runtime> {
        let threads = if threads == 0 { default_threads().min(Self::MAX_THREADS) } else { threads };
        if threads > Self::MAX_THREADS {
            return Err(Error::new(
                Status::InvalidArgument,
                "runtime_new",
                format!("{threads} worker threads: a runtime has at most {}", Self::MAX_THREADS),
            ));
        }
        static NEXT_ID: AtomicUsize = AtomicUsize::new(0);
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let mut failure = None;
        let mut handles = Vec::with_capacity(threads);
        let inner = Arc::new_cyclic(|weak: &Weak<RuntimeInner>| {
            let me = weak.clone();
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(move |k| format!("ta-rt{id}-w{k}"))
                .spawn_handler(|thread| WorkerThreads::spawn(thread, &mut handles))
                .start_handler(move |_| {
                    WORKER_OF.with(|w| *w.borrow_mut() = me.clone());
                    crate::kernels::par::set_peers_busy_probe(Some(peers_busy));
                })
                .exit_handler(|_| {
                    WORKER_OF.with(|w| *w.borrow_mut() = Weak::new());
                    crate::kernels::par::set_peers_busy_probe(None);
                })
                .panic_handler(|p| eprintln!("tensorasync: a worker job {}", panic_message(&p)))
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
                worker_threads: WorkerThreads::new(std::mem::take(&mut handles)),
                threads,
                ready: Injector::new(),
                ranked: Default::default(),
                run: exec::run,
                drainers: CachePadded::new(AtomicUsize::new(0)),
                idle_drainers: CachePadded::new(AtomicUsize::new(0)),
                idle_waiters: CachePadded::new(AtomicUsize::new(0)),
                state: AtomicU8::new(RUNNING),
                small_in_place: AtomicBool::new(true),
                outstanding: ShardedCounter::new(),
                ran_in_place: ShardedCounter::new(),
                idle_lock: Mutex::new(()),
                idle: Condvar::new(),
                stats: RuntimeStats::new(threads),
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
    ///
    /// ```
    /// use tensorasync::Runtime;
    /// let rt = Runtime::global();
    /// assert!(rt.is_global());
    /// assert!(rt.same_as(Runtime::global()));
    /// ```
    pub fn global() -> &'static Runtime {
        GLOBAL.get_or_init(|| {
            let n = std::env::var("TA_NUM_THREADS").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
            Runtime::new(n).expect("default runtime")
        })
    }

    /// Whether this is the default runtime (without creating it).
    ///
    /// ```
    /// use tensorasync::Runtime;
    /// assert!(!Runtime::new(1).unwrap().is_global());
    /// assert!(Runtime::global().is_global());
    /// ```
    pub fn is_global(&self) -> bool {
        GLOBAL.get().is_some_and(|g| g.same_as(self))
    }

    /// Process-unique number of this runtime (its workers are named `ta-rt<id>-w<k>`).
    ///
    /// ```
    /// use tensorasync::Runtime;
    /// let (a, b) = (Runtime::new(1).unwrap(), Runtime::new(1).unwrap());
    /// assert_ne!(a.id(), b.id());
    /// assert_eq!(a.clone().id(), a.id());
    /// ```
    pub fn id(&self) -> usize {
        self.inner().id
    }

    /// Number of worker threads.
    ///
    /// ```
    /// assert_eq!(tensorasync::Runtime::new(3).unwrap().threads(), 3);
    /// ```
    pub fn threads(&self) -> usize {
        self.inner().threads
    }

    /// Tasks submitted and not yet completed.
    ///
    /// ```
    /// use tensorasync::{ops, Mode, Order, Runtime, Status, Submit, Tensor};
    /// let rt = Runtime::new(2).unwrap();
    /// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
    /// // An external operation stays outstanding until its token is finished.
    /// let (token, _) = ops::external("held", &[(&t, Mode::Update)], Submit::on(&rt)).unwrap();
    /// assert_eq!(rt.outstanding(), 1);
    /// token.finish(Status::Ok, None).unwrap();
    /// rt.wait_idle(None).unwrap();
    /// assert_eq!(rt.outstanding(), 0);
    /// ```
    pub fn outstanding(&self) -> usize {
        self.inner().outstanding.sum().max(0) as usize
    }

    /// Stop accepting work, then drain or cancel what was submitted; returns once
    /// every submitted task has completed and fired its notifications. Calling it
    /// from one of this runtime's workers fails with `WouldDeadlock`. Calling it
    /// again is harmless.
    ///
    /// ```
    /// use tensorasync::{ops, DType, Order, Runtime, Scalar, ShutdownMode, Submit, Tensor};
    /// let rt = Runtime::new(2).unwrap();
    /// let t = Tensor::zeros(DType::F64, &[2], Order::RowMajor, Default::default()).unwrap();
    /// ops::fill(&t, Scalar::real(5.0), Submit::on(&rt)).unwrap();
    /// rt.shutdown(ShutdownMode::Drain).unwrap(); // the fill runs first
    /// assert_eq!(t.to_vec::<f64>().unwrap(), vec![5.0, 5.0]);
    /// assert!(ops::fill(&t, Scalar::real(1.0), Submit::on(&rt)).is_err());
    /// rt.shutdown(ShutdownMode::Drain).unwrap(); // again: harmless
    /// ```
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

    /// Let small library operations that are ready when they are submitted
    /// run on the submitting thread (`true`, the default), or send every
    /// operation to the workers (`false`). Such an operation (fill, scale,
    /// axpy, copy, conj, dot, norm2 and a full sum of at most 256 elements
    /// per operand; gemm of at most 64 elements per operand) costs less to
    /// run than to hand over; it runs only when no earlier access to its
    /// values is unfinished and none of them holds an error, never when it
    /// has a callback, and never while a runtime of the process records a
    /// trace or tracks pending work (which then see every operation as a
    /// task). It then
    /// has completed when the submission returns, with the same result and
    /// notifications; it counts in [`crate::Stats::submitted`] and
    /// `completed` (and `failed`), but never in [`Runtime::outstanding`],
    /// [`crate::Stats::steals`] or a worker's busy time. One submission can
    /// ask for the workers with
    /// [`crate::Submit::defer`].
    ///
    /// ```
    /// use tensorasync::{ops, DType, Order, Runtime, Scalar, Submit, Tensor};
    /// let rt = Runtime::new(2).unwrap();
    /// assert!(rt.small_in_place());
    /// let t = Tensor::zeros(DType::F64, &[4], Order::RowMajor, Default::default()).unwrap();
    /// let ev = ops::fill(&t, Scalar::real(1.0), Submit::on(&rt)).unwrap();
    /// assert!(ev.is_complete()); // ran in place
    /// rt.set_small_in_place(false);
    /// ops::fill(&t, Scalar::real(2.0), Submit::on(&rt)).unwrap().wait(None).unwrap();
    /// rt.wait_idle(None).unwrap(); // the worker counts its steals when its busy spell ends
    /// assert_eq!(rt.stats().steals, 1); // taken from the ready queue by a worker
    /// ```
    pub fn set_small_in_place(&self, on: bool) {
        self.inner().small_in_place.store(on, Ordering::Relaxed);
    }

    /// Whether small operations may run on the submitting thread (see
    /// [`Runtime::set_small_in_place`]).
    ///
    /// ```
    /// let rt = tensorasync::Runtime::new(1).unwrap();
    /// rt.set_small_in_place(false);
    /// assert!(!rt.small_in_place());
    /// ```
    #[inline]
    pub fn small_in_place(&self) -> bool {
        self.inner().small_in_place.load(Ordering::Relaxed)
    }

    /// Whether two handles refer to the same runtime.
    ///
    /// ```
    /// use tensorasync::Runtime;
    /// let rt = Runtime::new(1).unwrap();
    /// assert!(rt.same_as(&rt.clone()));
    /// assert!(!rt.same_as(&Runtime::new(1).unwrap()));
    /// ```
    pub fn same_as(&self, other: &Runtime) -> bool {
        Arc::ptr_eq(&self.user.inner, &other.user.inner)
    }
}

static GLOBAL: OnceLock<Runtime> = OnceLock::new();

fn default_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
