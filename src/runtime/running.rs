//! The tasks running on this thread, for refusing waits that could never
//! finish (a task waiting on a tensor it accesses, or on an operation that
//! waits for it).

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

/// Whether `target` waits (transitively) for a task running on this thread.
pub(crate) fn current_task_reaches(target: &Arc<Task>) -> bool {
    // SAFETY: an entry's task outlives it (see INNERMOST).
    each_running(|r| unsafe { (*r.task).reaches(target) })
}
