//! Running tasks: execute, record the outcome, notify, release successors.
//!
//! The order of a task's last steps is fixed: commit (poison or clean what it
//! wrote), then release its accesses (the task counts as finished on every
//! queue), then mark its event complete, then tell the waits behind it, then
//! fire its callbacks and completion entry, then tell its other successors
//! (see `task::Finished`), then drop its operands, and only then run or
//! schedule the successors that became ready. So when any notification of an
//! operation is observed, the operation is complete in every way (its event
//! polls the outcome, a zero-timeout wait on a tensor whose last operation it
//! was returns that outcome), no successor of it starts (so none reports its
//! completion) before it has reported, and a runtime drains only after every
//! callback has fired.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use super::event::Event;
use super::guard::panic_message;
use super::pool::RuntimeInner;
use super::run_ctx::RunCtx;
use super::running::{Reporting, Running};
use super::task::{ReadyList, Task};
use super::token::{self, Finish, GrantedView, Keep, TokenInner};
use super::work::{Completion, Job, Parked, Released, Work};
use crate::error::{Error, Result, Status};
use crate::region::Region;
use crate::tensor::value::{settled_state, ValueRc};

/// Queue a ready task: barriers run at once in the calling thread, operations
/// go to their runtime's workers.
pub(crate) fn schedule(task: Arc<Task>) {
    match task.runtime().map(|rt| rt as *const RuntimeInner) {
        None => run(task),
        // SAFETY: a ready task is admitted and unfinished, so its runtime is
        // alive (see `Task::runtime`); the pointer only decouples the borrow.
        Some(rt) => unsafe { (*rt).push(task) },
    }
}

/// Run a ready task, then keep running one newly ready successor inline (a
/// dependency chain stays on one worker with no queue round trip) and
/// schedule the others. The one kept is the first of the highest priority,
/// and only if no queued task has a higher one.
pub(crate) fn run(task: Arc<Task>) {
    let mut next = Some(task);
    while let Some(t) = next.take() {
        let ready = execute(&t);
        drop(t);
        for s in ready {
            let here = s.runtime().is_none_or(|rt| rt.is_current_worker());
            if here && next.as_ref().is_none_or(|n| s.priority() > n.priority()) {
                if let Some(n) = next.replace(s) {
                    schedule(n);
                }
            } else {
                schedule(s);
            }
        }
        if next.as_ref().is_some_and(|n| n.runtime().is_some_and(|rt| rt.outranked(n))) {
            schedule(next.take().expect("checked just above"));
        }
    }
}

fn execute(task: &Arc<Task>) -> ReadyList {
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
        return task.finish().tell_all();
    };
    let mut cx = RunCtx { waits: task.take_waits(), issued: None, deferred: None };
    // The token of an external operation that fails before it starts.
    let mut failed_external = None;
    let result = match &mut work.job {
        Job::Barrier(v, region) => settled_state(v.arc(), region, "tensor_wait"),
        Job::Release(_) => Ok(()),
        Job::Op(body) => {
            let op = body.get_mut();
            if task.runtime().is_some_and(|rt| rt.cancelled()) {
                failed_external = op.external().cloned();
                Err(Error::new(
                    Status::Cancelled,
                    op.origin(),
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
                        return park(task, &token, views, keep);
                    }
                }
            } else {
                let running = Running::new(task, op);
                let _running = running.enter();
                let r = match catch_unwind(AssertUnwindSafe(|| op.execute(&mut cx))) {
                    Ok(r) => r,
                    Err(p) => Err(Error::new(Status::Panic, op.origin(), panic_message(&p))),
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
                    return park(task, &token, views, keep);
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
        let failure = result.clone().expect_err("an external operation concludes here only on failure");
        let ready = conclude(task, slot, result, true);
        token.failed_before_start(&failure, failure.status() == Status::Cancelled);
        return ready;
    }
    conclude(task, slot, result, true)
}

/// Park `task` in `token` (see [`token::park`]), registered with its
/// runtime; what became ready if it concluded at once instead.
fn park(task: &Arc<Task>, token: &Arc<TokenInner>, views: Vec<GrantedView>, keep: Vec<Keep>) -> ReadyList {
    let rt = task.runtime().expect("a parked task has a runtime");
    match token::park(task, token, views, keep, |t| token::register(&rt.parked, || rt.cancelled(), t)) {
        Some(f) => conclude_parked(task, f),
        None => ReadyList::new(),
    }
}

/// Conclude a task parked by [`token::park`] with `f`.
///
/// Only the thread that took the task out of its token's parked state (or
/// the parking thread, for a finish that came first) calls this, once.
pub(crate) fn conclude_parked(task: &Arc<Task>, f: Finish) -> ReadyList {
    // SAFETY: the task is parked: its runner returned without concluding it,
    // and the caller is the one thread that concludes it (see above); the
    // token's lock orders the runner's last writes before this.
    let slot = unsafe { task.running_work() };
    let origin = match slot.as_ref().map(|w| &w.job) {
        Some(Job::Op(op)) => op.get().origin(),
        _ => "deferred".into(),
    };
    let (result, commit) = match f {
        Finish::Ok => (Ok(()), true),
        Finish::Abandon => (Ok(()), false),
        Finish::Cancel { message } => (
            Err(Error::new(
                Status::Cancelled,
                origin,
                message.unwrap_or_else(|| "the operation was cancelled by its token".into()),
            )),
            true,
        ),
        Finish::Error(e) => (Err(e), true),
        Finish::Fail { code, message } => {
            let msg = message.unwrap_or_else(|| format!("the operation was finished with status {code}"));
            (Err(Error::with_code(Status::KernelFailed, origin, msg, code)), true)
        }
    };
    conclude(task, slot, result, commit)
}

/// The last steps of every task: commit, notify, release successors, drop
/// the operands, retire. `slot` is the task's work (see `Task::running_work`).
/// Without `commit`, nothing is recorded in the values (an abandoned host
/// access: nothing was written).
fn conclude(task: &Arc<Task>, slot: &mut Option<Work>, result: Result<()>, commit: bool) -> ReadyList {
    let work = slot.as_mut().expect("present until concluded");
    let completion = work.completion.take();
    match &work.job {
        Job::Op(op) => {
            if commit && op.commits(&result) {
                op.get().commit(&result)
            }
        }
        // A wait holds its value only to read the outcome: let go of it
        // before the waiter wakes, so a caller that frees a tensor right
        // after waiting for it gets the memory back at once.
        Job::Barrier(..) => *slot = None,
        // The count goes after the task has finished (its value may go with
        // it, frontier and all).
        Job::Release(_) => {
            let ready = task.finish().tell_all();
            *slot = None;
            return ready;
        }
    }
    if let Some(t) = task.trace() {
        t.finishing();
    }
    // The accesses go first: once any notification is seen, a wait on a
    // value sees this task finished.
    let mut finished = task.finish();
    // The event is marked before the waits behind this task complete, so a
    // readiness event or wait that sees this task done also sees its event
    // done.
    let attached = completion.as_ref().map(|c| c.mark(&result));
    let mut ready = ReadyList::new();
    finished.tell_waits(&mut ready);
    if task.runtime().is_some() {
        // Waits that this task made ready complete before its callbacks: a
        // thread blocked in a wait behind this task is released before they
        // run (so a callback's own zero-timeout wait is not held up by that
        // earlier waiter's barrier).
        run_inline(&mut ready, true);
    }
    if let Some(c) = completion {
        let attached = attached.unwrap_or_default();
        if c.callback.is_some() || !attached.is_empty() {
            // User code runs: a wait there on what starts only after it
            // fails at once, and its follow-up work is the runtime's own.
            let rt = task.runtime().map_or(std::ptr::null(), |r| (r as *const RuntimeInner).cast());
            let reporting = Reporting::new(finished.untold(), rt);
            let _reporting = reporting.enter();
            c.notify(attached, &result);
        } else {
            c.notify(attached, &result);
        }
    }
    // The other successors only now: none starts before this report.
    finished.tell_rest(&mut ready);
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
            t.concluded(&result);
        }
        // Last use of the runtime pointer: see `Task::runtime`.
        rt.retire();
    }
    ready
}

/// Run the runtime-less tasks (waits and releases) of `ready` here, one
/// after the other, not nested (their own successors join the list); with
/// `waits_only`, only the waits.
#[inline(always)]
fn run_inline(ready: &mut ReadyList, waits_only: bool) {
    // Most tasks make no such task ready: only look when one is there.
    if ready.iter().any(|t| t.runtime().is_none()) {
        run_inline_from(ready, waits_only)
    }
}

fn run_inline_from(ready: &mut ReadyList, waits_only: bool) {
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
fn issue_device(task: &Arc<Task>, mut parked: Parked) -> ReadyList {
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
fn finish_device(task: &Arc<Task>, parked: Parked) -> ReadyList {
    let Parked { job, completion, mut result, mut tail } = parked;
    if let Job::Op(body) = &job {
        let op = body.get();
        // Device errors name the device layer; the error starts in this operation.
        if let Err(e) = &result {
            if e.origin() == crate::tensor::device::ORIGIN {
                result = Err(e.with_origin(op.origin()));
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
                    Err(p) => Err(Error::new(Status::Panic, op.origin(), panic_message(&p))),
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

/// A barrier task for waiting on `value`; it runs inline wherever it becomes ready.
pub(crate) fn barrier(value: ValueRc, region: Region, event: Event) -> Arc<Task> {
    let completion = Completion { event: Some(event), ..Default::default() }.boxed();
    Task::new(None, Work { job: Job::Barrier(value, region), completion }, None)
}

/// A release task for `value` (see [`crate::runtime::release_value`]); it
/// runs inline wherever it becomes ready.
pub(crate) fn release(value: Released) -> Arc<Task> {
    Task::new(None, Work { job: Job::Release(value), completion: None }, None)
}

/// A task that runs nothing (a release task holding a count of `t`'s
/// value), for tests of the task graph and of task memory.
#[cfg(test)]
pub(crate) fn idle_task(t: &crate::tensor::handle::Tensor) -> Arc<Task> {
    release(Released::Value(crate::tensor::value::ValueRc::new(t.root().clone())))
}
