//! The tasks running on this thread, for refusing waits that could never
//! finish (a task waiting on a tensor it accesses, or on an operation that
//! waits for it), and the tasks whose completion this thread is reporting
//! (a callback waiting on an operation behind its own).

use std::cell::Cell;
use std::ptr;
use std::sync::Arc;

use super::body::TaskBody;
use super::guard::InLibraryWork;
use super::task::Task;
use crate::tensor::value::Value;

/// A task running on this thread, in the stack frame that runs it. The
/// thread's running tasks are a list of these, innermost first (a waiting
/// task may help run others), so entering and leaving cost no allocation.
pub(crate) struct Running {
    task: *const Task,
    op: *const dyn TaskBody,
    outer: Cell<*const Running>,
}

thread_local! {
    /// The innermost task running on this thread, or null. Each entry is
    /// valid while it is listed: [`Running::enter`] lists it for the life of
    /// a guard that borrows it, and the entry borrows the task and body.
    static INNERMOST: Cell<*const Running> = const { Cell::new(ptr::null()) };
}

impl Running {
    pub(crate) fn new(task: &Task, op: &(dyn TaskBody + 'static)) -> Running {
        Running { task, op, outer: Cell::new(ptr::null()) }
    }

    /// List this task as running on this thread, and count the thread into
    /// the library's work (see `Event::wait`), while the guard lives.
    pub(crate) fn enter(&self) -> RunningGuard<'_> {
        INNERMOST.with(|top| self.outer.set(top.replace(self)));
        RunningGuard { running: self, _in_work: InLibraryWork::enter() }
    }
}

/// Unlists its entry even if the operation panics.
pub(crate) struct RunningGuard<'a> {
    running: &'a Running,
    _in_work: InLibraryWork,
}

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        INNERMOST.with(|top| top.set(self.running.outer.get()));
    }
}

/// The tasks running on this thread, innermost first.
fn each_running(mut f: impl FnMut(&Running) -> bool) -> bool {
    let mut at = INNERMOST.with(Cell::get);
    while !at.is_null() {
        // SAFETY: listed entries are alive (see INNERMOST), and this runs
        // inside them all.
        let r = unsafe { &*at };
        if f(r) {
            return true;
        }
        at = r.outer.get();
    }
    false
}

/// Whether a task running on this thread accesses `value`.
pub(crate) fn current_task_holds(value: &Arc<Value>) -> bool {
    // SAFETY: an entry's body outlives it (see INNERMOST).
    each_running(|r| unsafe { (*r.op).holds(value) })
}

/// Whether `target` waits (transitively) for a task running on this thread,
/// or for one whose completion this thread is reporting.
pub(crate) fn current_task_reaches(target: &Arc<Task>) -> bool {
    // SAFETY: an entry's task outlives it (see INNERMOST).
    each_running(|r| unsafe { (*r.task).reaches(target) })
        || each_reporting(|r| {
            // SAFETY: an entry's successors outlive it (see REPORTING).
            unsafe { &*r.successors }.iter().any(|s| s.reaches(target))
        })
}

/// A task whose completion this thread is reporting (its callbacks run), in
/// the stack frame that reports it: its successors are told only after
/// the callbacks return, so a callback's wait on any of them could never
/// finish; and its runtime's follow-up work is admitted while it drains.
pub(crate) struct Reporting {
    successors: *const [Arc<Task>],
    /// The task's runtime, by address (only compared: see [`reporting_for`]).
    runtime: *const (),
    outer: Cell<*const Reporting>,
}

thread_local! {
    /// The innermost completion this thread reports, or null (listed as
    /// [`INNERMOST`] is; an entry borrows the successors and the runtime).
    static REPORTING: Cell<*const Reporting> = const { Cell::new(ptr::null()) };
}

impl Reporting {
    /// `runtime`: the address of the task's runtime (null for none).
    pub(crate) fn new(successors: &[Arc<Task>], runtime: *const ()) -> Reporting {
        Reporting { successors, runtime, outer: Cell::new(ptr::null()) }
    }

    /// List this completion as reported on this thread while the guard lives.
    pub(crate) fn enter(&self) -> ReportingGuard<'_> {
        REPORTING.with(|top| self.outer.set(top.replace(self)));
        ReportingGuard { reporting: self }
    }
}

/// Unlists its entry even if a callback panics.
pub(crate) struct ReportingGuard<'a> {
    reporting: &'a Reporting,
}

impl Drop for ReportingGuard<'_> {
    fn drop(&mut self) {
        REPORTING.with(|top| top.set(self.reporting.outer.get()));
    }
}

fn each_reporting(mut f: impl FnMut(&Reporting) -> bool) -> bool {
    let mut at = REPORTING.with(Cell::get);
    while !at.is_null() {
        // SAFETY: listed entries are alive (see REPORTING).
        let r = unsafe { &*at };
        if f(r) {
            return true;
        }
        at = r.outer.get();
    }
    false
}

/// Whether this thread is reporting the completion of a task of the
/// runtime at address `rt`.
pub(crate) fn reporting_for(rt: *const ()) -> bool {
    !rt.is_null() && each_reporting(|r| ptr::eq(r.runtime, rt))
}
