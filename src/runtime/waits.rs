//! Waiting: blocking until a condition holds (a worker helps run tasks
//! meanwhile), waits on events, on tensors and on a whole runtime.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::event::Event;
use super::exec;
use super::handle::Runtime;
use super::poke::poke;
use super::pool::{current_runtime, IDLE_RECHECK};
use super::running::{current_task_holds, current_task_reaches};
use super::task::Task;
use crate::error::{Error, Result, Status};
use crate::region::Region;
use crate::tensor::value::Value;

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
/// completes within it and is seen without a futex wake-up.
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

/// Wait for everything enrolled on `value` so far; see `Tensor::wait`.
pub(crate) fn wait_value(value: &Arc<Value>, region: &Region, timeout: Option<Duration>) -> Result<()> {
    const ORIGIN: &str = "tensor_wait";
    if current_task_holds(value) {
        return Err(Error::new(
            Status::WouldDeadlock,
            ORIGIN,
            "a task cannot wait on a tensor it is accessing: the wait needs the task itself to finish",
        ));
    }
    let mut s = value.state.lock();
    if s.queue.is_idle() {
        drop(s);
        return crate::tensor::value::settled_state(value, region, ORIGIN);
    }
    let event = Event::new();
    let task = exec::barrier(crate::tensor::value::ValueRc::new(value.clone()), region.clone(), event.clone());
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
/// `Tensor::ready`). Never blocks.
pub(crate) fn ready_value(value: &Arc<Value>, region: &Region) -> Event {
    const ORIGIN: &str = "tensor_ready";
    let event = Event::new();
    let mut s = value.state.lock();
    if s.queue.is_idle() {
        drop(s);
        event.complete(&crate::tensor::value::settled_state(value, region, ORIGIN));
        return event;
    }
    let task = exec::barrier(crate::tensor::value::ValueRc::new(value.clone()), region.clone(), event.clone());
    s.queue.enroll_barrier(&task, region);
    drop(s);
    event.bind(&task);
    if task.release_guard() {
        exec::run(task);
    }
    event
}

impl Event {
    /// Wait for completion and return the outcome; `None` waits forever. On
    /// timeout the error has status `Timeout`. Waiting, from inside a task, on an
    /// operation that waits for that task fails with `WouldDeadlock`.
    ///
    /// From a program thread the wait returns once every notification of the
    /// completion (callbacks, completion-queue entry) has been delivered, or
    /// with the outcome when the timeout ends while they still run; from
    /// inside a callback or a task, once the outcome is known.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tensorasync::{ops, DType, Event, Order, Scalar, Status, Submit, Tensor};
    /// let t = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Default::default()).unwrap();
    /// let ev = ops::fill(&t, Scalar::real(1.0), Submit::default()).unwrap();
    /// assert!(ev.wait(None).is_ok());
    /// // An event nothing completes times out.
    /// let never = Event::new();
    /// assert_eq!(never.wait(Some(Duration::from_millis(1))).unwrap_err().status(), Status::Timeout);
    /// ```
    pub fn wait(&self, timeout: Option<Duration>) -> Result<()> {
        if let Some(r) = self.outcome_for_caller() {
            return r;
        }
        let bound = self.0.task.lock().as_ref().and_then(|w| w.upgrade());
        if let Some(task) = bound.and_then(|t| t.downcast::<Task>().ok()) {
            if current_task_reaches(&task) {
                return Err(Error::new(
                    Status::WouldDeadlock,
                    "event_wait",
                    "the awaited operation waits for the task that is waiting on it",
                ));
            }
        }
        poke();
        let done = block_until(
            || self.0.state.lock().outcome_for_caller().is_some(),
            |slice| {
                let mut s = self.0.state.lock();
                if s.outcome_for_caller().is_none() {
                    self.0.cv.wait_for(&mut s, slice);
                }
            },
            timeout,
        );
        match self.poll() {
            // Timed out waiting for the notifications: the operation itself
            // has completed, and that is what a wait reports.
            Some(r) => r,
            None => {
                debug_assert!(!done);
                Err(Error::new(Status::Timeout, "event_wait", "the operation did not complete in time"))
            }
        }
    }
}

impl Runtime {
    /// Wait until every operation submitted to this runtime so far (and any
    /// they submit) has completed, without stopping the runtime (the
    /// counterpart of `starpu_task_wait_for_all` and `taskwait`). `None`
    /// waits forever; on timeout the error has status `Timeout`. From one of
    /// this runtime's workers it fails with `WouldDeadlock` (the caller's own
    /// task can never be complete while it waits). Once it returns, the
    /// counters ([`Runtime::stats`]) include all the work it waited for.
    ///
    /// ```
    /// use tensorasync::{ops, DType, Order, Runtime, Scalar, Submit, Tensor};
    /// let rt = Runtime::new(2).unwrap();
    /// let zeros = || Tensor::zeros(DType::F32, &[8], Order::RowMajor, Default::default()).unwrap();
    /// let ts: Vec<Tensor> = (0..4).map(|_| zeros()).collect();
    /// for (i, t) in ts.iter().enumerate() {
    ///     ops::fill(t, Scalar::real(i as f64), Submit::on(&rt)).unwrap();
    /// }
    /// rt.wait_idle(None).unwrap();
    /// assert_eq!(rt.outstanding(), 0);
    /// assert_eq!(ts[3].to_vec::<f32>().unwrap(), vec![3.0; 8]);
    /// ```
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
        let done = block_until(|| inner.is_quiet(), |slice| inner.sleep_until_idle(slice.min(IDLE_RECHECK)), timeout);
        if done {
            Ok(())
        } else {
            Err(Error::new(Status::Timeout, ORIGIN, "operations were still running when the wait timed out"))
        }
    }
}
