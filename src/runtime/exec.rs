//! Running tasks: execute, record the outcome, notify, release successors.
//!
//! The order of a task's last steps is fixed: commit (poison or clean what it
//! wrote), then release its accesses (the task counts as finished on every
//! queue; successors it made ready are collected, not yet run), then mark its
//! event complete, then fire its callbacks and completion entry, then drop
//! its operands, and only then run or schedule the successors it made ready.
//! So when any notification of an operation is observed, the operation is
//! complete in every way (its event polls the outcome, a zero-timeout wait on
//! a tensor whose last operation it was returns that outcome), a successor
//! that this task released never reports its completion before it, and a
//! runtime drains only after every callback has fired.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use super::cq::{CompletionEntry, CompletionQueue};
use super::event::{Callback, Event};
use super::task::Task;
use crate::dispatch::{Issued, RunCtx};
use crate::error::{Error, Result, Status};
use crate::ops::Operation;
use crate::region::Region;
use crate::value::{settled_state, Contents, Value, ValueRc};

/// How a task reports its outcome, and what it keeps alive until then
/// (boxed in the task only when needed, so a plain pending task stays small).
#[derive(Default)]
pub(crate) struct Completion {
    pub(crate) event: Option<Event>,
    pub(crate) callback: Option<Callback>,
    pub(crate) cq: Option<(CompletionQueue, u64)>,
    /// Contents this task replaced: earlier accesses still point into them.
    pub(crate) keep_alive: Option<Arc<Contents>>,
}

impl Completion {
    /// `None` when there is nothing to notify or keep.
    #[inline]
    pub(crate) fn boxed(self) -> Option<Box<Completion>> {
        let needed = self.event.is_some() || self.callback.is_some() || self.cq.is_some() || self.keep_alive.is_some();
        if !needed {
            // Every field is `None`: nothing to drop (skips the drop glue).
            std::mem::forget(self);
            return None;
        }
        Some(Box::new(self))
    }

    /// Event first (marked complete), then callback, then completion entry,
    /// then the event's own callbacks: whatever a notification observes, the
    /// event already reports the outcome.
    fn fire(self, result: &Result<()>) {
        let attached = self.event.as_ref().map(|e| e.mark_complete(result));
        if let Some(cb) = self.callback {
            call_guarded(|| cb(result));
        }
        if let Some((q, tag)) = self.cq {
            q.push(CompletionEntry { tag, result: result.clone() });
        }
        for cb in attached.into_iter().flatten() {
            call_guarded(|| cb(result));
        }
    }
}

pub(crate) enum Job {
    Op(Operation),
    /// A wait on a value: completes once everything enrolled before it has.
    Barrier(ValueRc, Region),
    /// Holds a released value or view until everything enrolled before it
    /// has finished (see [`crate::runtime::release_value`]); only its drop
    /// matters.
    Release(#[allow(dead_code)] Released),
}

/// A device task between issue and finish: what its finish needs.
pub(crate) struct Parked {
    job: Job,
    completion: Option<Box<Completion>>,
    /// The outcome so far: the issue's, then the device's.
    result: Result<()>,
    /// Host work for after the device work, and what must live until then.
    tail: Option<Issued>,
}

impl Parked {
    /// Record a failure (the first one wins).
    pub(crate) fn fail(&mut self, e: Error) {
        if self.result.is_ok() {
            self.result = Err(e);
        }
    }
}

/// What a task does and how it reports.
pub(crate) struct Work {
    job: Job,
    completion: Option<Box<Completion>>,
}

impl Work {
    // Inlined so that the operation is built where the work holds it (out
    // of line, the 192-byte operation was copied once more per submission).
    #[inline(always)]
    pub(crate) fn op(op: Operation, completion: Completion) -> Work {
        // Box first: `op` then moves once, straight into place.
        let completion = completion.boxed();
        Work { job: Job::Op(op), completion }
    }

    pub(crate) fn set_stamp(&mut self, stamp: u64) {
        if let Job::Op(op) = &mut self.job {
            op.stamp = stamp;
        }
    }

    /// Keep `c` alive until this task has run (see `Completion::keep_alive`).
    pub(crate) fn keep_alive(&mut self, c: Arc<Contents>) {
        self.completion.get_or_insert_with(Default::default).keep_alive = Some(c);
    }

    /// The operation, unless this is a barrier or a release.
    pub(crate) fn operation(&self) -> Option<&Operation> {
        match &self.job {
            Job::Op(op) => Some(op),
            Job::Barrier(..) | Job::Release(_) => None,
        }
    }

    #[inline]
    pub(crate) fn accesses_mut(&mut self) -> &mut [crate::ops::Access] {
        match &mut self.job {
            Job::Op(op) => &mut op.accesses,
            Job::Barrier(..) | Job::Release(_) => &mut [],
        }
    }
}

/// A barrier task for waiting on `value`; it runs inline wherever it becomes ready.
pub(crate) fn barrier(value: ValueRc, region: Region, event: Event) -> Arc<Task> {
    let completion = Completion { event: Some(event), ..Default::default() }.boxed();
    Task::new(None, Work { job: Job::Barrier(value, region), completion }, None)
}

/// The last count of a value or of a view, kept by a release task.
pub(crate) enum Released {
    Value(#[allow(dead_code)] ValueRc),
    View(#[allow(dead_code)] Arc<crate::view::View>),
}

/// A release task for `value` (see [`crate::runtime::release_value`]); it
/// runs inline wherever it becomes ready.
pub(crate) fn release(value: Released) -> Arc<Task> {
    Task::new(None, Work { job: Job::Release(value), completion: None }, None)
}

/// A task that runs nothing (a release task holding a count of `t`'s
/// value), for tests of the task graph and of task memory.
#[cfg(test)]
pub(crate) fn idle_task(t: &crate::value::Tensor) -> Arc<Task> {
    release(Released::Value(crate::value::ValueRc::new(t.root().clone())))
}

thread_local! {
    /// Tasks running on this thread, innermost last (a waiting task may help
    /// run others). The pointers are valid while their entries exist: each is
    /// pushed by `RunningGuard::push` from a frame that holds the task and
    /// operation, and popped when that guard drops, before they do.
    static RUNNING: RefCell<Vec<(*const Task, *const Operation)>> = const { RefCell::new(Vec::new()) };
}

/// Pops the RUNNING entry even if the operation panics.
struct RunningGuard;

impl RunningGuard {
    fn push(task: &Task, op: &Operation) -> RunningGuard {
        RUNNING.with(|r| r.borrow_mut().push((task as *const Task, op as *const Operation)));
        RunningGuard
    }
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        RUNNING.with(|r| r.borrow_mut().pop());
    }
}

/// Whether a task running on this thread accesses `value`.
pub(crate) fn current_task_holds(value: &Arc<Value>) -> bool {
    RUNNING.with(|r| {
        r.borrow().iter().any(|(_, op)| {
            // SAFETY: entries point at operations on this thread's stack,
            // popped (by RunningGuard) before those operations are dropped.
            unsafe { (**op).holds(value) }
        })
    })
}

/// Whether `target` waits (transitively) for a task running on this thread.
pub(crate) fn current_task_reaches(target: &Arc<Task>) -> bool {
    let running: Vec<*const Task> = RUNNING.with(|r| r.borrow().iter().map(|(t, _)| *t).collect());
    // SAFETY: see RUNNING; the entries outlive this call, which runs inside them.
    running.iter().any(|&t| unsafe { (*t).reaches(target) })
}

/// Queue a ready task: barriers run at once in the calling thread, operations
/// go to their runtime's workers.
pub(crate) fn schedule(task: Arc<Task>) {
    match task.runtime().map(|rt| rt as *const super::RuntimeInner) {
        None => run(task),
        // SAFETY: a ready task is admitted and unfinished, so its runtime is
        // alive (see `Task::runtime`); the pointer only decouples the borrow.
        Some(rt) => unsafe { (*rt).push(task) },
    }
}

/// Run a ready task, then keep running one newly ready successor inline (a
/// dependency chain stays on one worker with no queue round trip) and
/// schedule the others.
pub(crate) fn run(task: Arc<Task>) {
    let mut next = Some(task);
    while let Some(t) = next.take() {
        let ready = execute(&t);
        drop(t);
        for s in ready {
            let here = s.runtime().is_none_or(|rt| rt.is_current_worker());
            if next.is_none() && here {
                next = Some(s);
            } else {
                schedule(s);
            }
        }
    }
}

fn execute(task: &Arc<Task>) -> super::task::ReadyList {
    if task.is_device() {
        if let Some(parked) = task.unpark() {
            return finish_device(task, parked);
        }
    }
    // SAFETY: `run` is only called with tasks this thread made ready (from
    // `release_guard`, `finish`, or a queue those feed, which hands each out once).
    let slot = unsafe { task.running_work() };
    if let Some(t) = task.trace() {
        t.started();
    }
    let Some(work) = slot.as_mut() else {
        // Unreachable: only the thread that made the task ready runs it.
        return task.finish();
    };
    let mut cx = RunCtx { waits: task.take_waits(), issued: None, deferred: None };
    // The token of an external operation that fails before it starts.
    let mut failed_external = None;
    let result = match &mut work.job {
        Job::Barrier(v, region) => settled_state(v.arc(), region, "tensor_wait"),
        Job::Release(_) => Ok(()),
        Job::Op(op) => {
            if task.runtime().is_some_and(|rt| rt.cancelled()) {
                failed_external = op.external().cloned();
                Err(Error::new(
                    Status::Cancelled,
                    op.name.to_origin(),
                    "the runtime was shut down with cancel before the operation ran",
                ))
            } else if let Some(token) = op.external() {
                // An operation whose body runs elsewhere: granted unless an
                // input it reads is poisoned.
                match op.poisoned_input() {
                    Some(e) => {
                        failed_external = Some(token.clone());
                        Err(e)
                    }
                    None => {
                        let token = token.clone();
                        let (views, keep) = op.granted();
                        if let Some(t) = task.trace() {
                            t.parked();
                        }
                        return super::deferred::park(task, &token, views, keep);
                    }
                }
            } else {
                let _running = RunningGuard::push(task, op);
                let r = match catch_unwind(AssertUnwindSafe(|| op.execute(&mut cx))) {
                    Ok(r) => r,
                    Err(p) => Err(Error::new(Status::Panic, op.name.to_origin(), panic_message(&p))),
                };
                if let Some(token) = cx.deferred.take() {
                    // The kernel deferred its completion (its result is
                    // ignored): the task keeps its accesses until the token
                    // is finished.
                    drop(_running);
                    let (views, keep) = op.granted();
                    if let Some(t) = task.trace() {
                        t.parked();
                    }
                    return super::deferred::park(task, &token, views, keep);
                }
                r
            }
        }
    };
    if task.is_device() {
        let Work { job, completion } = slot.take().expect("present until concluded");
        return issue_device(task, Parked { job, completion, result, tail: cx.issued });
    }
    if let Some(token) = failed_external {
        // Failed (or cancelled) before its body started.
        let failure = result.clone().err().expect("an external operation concludes here only on failure");
        let ready = conclude(task, slot, result, true);
        token.failed_before_start(&failure, failure.status() == Status::Cancelled);
        return ready;
    }
    conclude(task, slot, result, true)
}

/// Conclude a task parked by [`super::deferred::park`] with `f`.
///
/// Only the thread that took the task out of its token's parked state (or
/// the parking thread, for a finish that came first) calls this, once.
pub(crate) fn conclude_parked(task: &Arc<Task>, f: super::deferred::Finish) -> super::task::ReadyList {
    use super::deferred::Finish;
    // SAFETY: the task is parked: its runner returned without concluding it,
    // and the caller is the one thread that concludes it (see above); the
    // token's lock orders the runner's last writes before this.
    let slot = unsafe { task.running_work() };
    let origin = match slot.as_ref().map(|w| &w.job) {
        Some(Job::Op(op)) => op.name.to_origin(),
        _ => "deferred".into(),
    };
    let (result, commit) = match f {
        Finish::Ok => (Ok(()), true),
        Finish::Abandon => (Ok(()), false),
        Finish::Fail { status, message } if status == Status::Cancelled as u32 => (
            Err(Error::new(
                Status::Cancelled,
                origin,
                message.unwrap_or_else(|| "the operation was cancelled by its token".into()),
            )),
            true,
        ),
        Finish::Fail { status, message } => {
            let msg = message.unwrap_or_else(|| format!("the operation was finished with status {status}"));
            (Err(Error::with_code(Status::KernelFailed, origin, msg, status as i64)), true)
        }
    };
    conclude(task, slot, result, commit)
}

/// The last steps of every task: commit, notify, release successors, drop
/// the operands, retire. `slot` is the task's work (see `Task::running_work`).
/// Without `commit`, nothing is recorded in the values (an abandoned host
/// access: nothing was written).
fn conclude(task: &Arc<Task>, slot: &mut Option<Work>, result: Result<()>, commit: bool) -> super::task::ReadyList {
    let work = slot.as_mut().expect("present until concluded");
    let completion = work.completion.take();
    match &work.job {
        Job::Op(op) => {
            if commit {
                op.commit(&result)
            }
        }
        // A wait holds its value only to read the outcome: let go of it
        // before the waiter wakes, so a caller that frees a tensor right
        // after waiting for it gets the memory back at once.
        Job::Barrier(..) => *slot = None,
        // The count goes after the task has finished (its value may go with
        // it, frontier and all).
        Job::Release(_) => {
            let ready = task.finish();
            *slot = None;
            return ready;
        }
    }
    if let Some(t) = task.trace() {
        t.finishing();
    }
    // The accesses go first: once any notification is seen, a wait on a
    // value sees this task finished.
    let mut ready = task.finish();
    if task.runtime().is_some() {
        // Waits that this task made ready complete before it reports: a
        // thread blocked in a wait behind this task is released before this
        // task's callbacks run (so a callback's own zero-timeout wait is not
        // held up by that earlier waiter's barrier).
        run_inline(&mut ready, true);
    }
    if let Some(c) = completion {
        c.fire(&result);
    }
    // An operation's operands (and wrapped memory with its release hook)
    // live until its completion has been reported. (Dropped in place.)
    *slot = None;
    if let Some(rt) = task.runtime() {
        // Waits and releases that this task made ready run before it
        // retires: a drained runtime has let go of every value its tasks
        // kept (see `crate::runtime::release_value`).
        run_inline(&mut ready, false);
        if result.is_err() {
            rt.stats.count_failure(&result);
        }
        if let Some(t) = task.trace() {
            t.concluded(task, &result);
        }
        // Last use of the runtime pointer: see `Task::runtime`.
        rt.retire();
    }
    ready
}

/// Run the runtime-less tasks (waits and releases) of `ready` here, one
/// after the other, not nested (their own successors join the list); with
/// `waits_only`, only the waits.
fn run_inline(ready: &mut super::task::ReadyList, waits_only: bool) {
    let mut i = 0;
    while i < ready.len() {
        // SAFETY: the tasks of `ready` were made ready by this thread and are
        // not scheduled yet, so this thread alone may look at their work.
        let take = ready[i].runtime().is_none()
            && (!waits_only || matches!(unsafe { ready[i].running_work() }, Some(Work { job: Job::Barrier(..), .. })));
        if take {
            let t = ready.remove(i);
            ready.extend(execute(&t));
        } else {
            i += 1;
        }
    }
}

/// A device task has run its body: its work is queued on a stream (or it
/// had none, or it failed). Mark it issued, so same-device successors can
/// queue theirs behind its marker, and ask the device to signal when the
/// work is done; the signal only schedules the finish (no worker waits).
fn issue_device(task: &Arc<Task>, mut parked: Parked) -> super::task::ReadyList {
    let queued = parked.tail.as_ref().map(|i| (i.device.clone(), i.stream));
    let mut issue = None;
    if let Some((dev, stream)) = &queued {
        if let Some(t) = task.trace() {
            t.issued(dev.ordinal(), stream.0);
        }
        if parked.result.is_ok() {
            match dev.record(*stream) {
                Ok(m) => issue = Some((*stream, m)),
                Err(e) => parked.fail(e),
            }
        }
    }
    let mut ready = task.issue(issue, parked);
    let had_work = queued.is_some();
    let own_outcome = match queued {
        // Even after a failure, queued work must be done before the finish
        // lets its memory go.
        Some((dev, stream)) => {
            let t = task.clone();
            dev.notify(
                stream,
                Box::new(move |outcome| {
                    if let Some(tr) = t.trace() {
                        tr.device_done();
                    }
                    t.record_outcome(outcome);
                    if t.release_hold() {
                        schedule(t);
                    }
                }),
            )
            .err()
        }
        None => None,
    };
    if !had_work || own_outcome.is_some() {
        if let Some(e) = own_outcome {
            task.record_outcome(Err(e));
        }
        if task.release_hold() {
            ready.push(task.clone());
        }
    }
    ready
}

/// A device task's work is done and every same-device predecessor has
/// finished: run its host tail, re-check its inputs (a predecessor may have
/// failed on the device after this task queued its work), and conclude.
fn finish_device(task: &Arc<Task>, parked: Parked) -> super::task::ReadyList {
    let Parked { job, completion, mut result, mut tail } = parked;
    if let Job::Op(op) = &job {
        // Device errors name the device layer; the error starts in this operation.
        if let Err(e) = &result {
            if e.origin() == crate::device::ORIGIN {
                result = Err(e.with_origin(op.name.to_origin()));
            }
        }
        if result.is_ok() {
            if let Some(e) = op.poisoned_input() {
                result = Err(e);
            }
        }
        if result.is_ok() {
            if let Some(f) = tail.as_mut().and_then(|t| t.finisher.take()) {
                result = match catch_unwind(AssertUnwindSafe(f)) {
                    Ok(r) => r,
                    Err(p) => Err(Error::new(Status::Panic, op.name.to_origin(), panic_message(&p))),
                };
            }
        }
    }
    // The device work and the finisher are done: staging goes back before
    // anyone hears of the completion.
    drop(tail);
    // SAFETY: this thread runs the task's finish (it holds the parked work).
    let slot = unsafe { task.running_work() };
    *slot = Some(Work { job, completion });
    conclude(task, slot, result, true)
}

/// Run a user callback; a panic in it is reported on stderr and goes no further
/// (it must not take down a worker, and the operation's outcome is already fixed).
pub(crate) fn call_guarded(f: impl FnOnce()) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
        eprintln!("tensorasync: a completion callback {}", panic_message(&p));
    }
}

pub(crate) fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    crate::error::panic_message(&**p)
}
