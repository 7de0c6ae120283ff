//! The tasks running on this thread, for refusing waits that could never
//! finish (a task waiting on a tensor it accesses, or on an operation that
//! waits for it).

use std::cell::RefCell;
use std::sync::Arc;

use super::body::TaskBody;
use super::guard::InLibraryWork;
use super::task::Task;
use crate::tensor::value::Value;

thread_local! {
    /// Tasks running on this thread, innermost last (a waiting task may help
    /// run others). The pointers are valid while their entries exist: each is
    /// pushed by `RunningGuard::push` from a frame that holds the task and
    /// operation, and popped when that guard drops, before they do.
    static RUNNING: RefCell<Vec<(*const Task, *const dyn TaskBody)>> = const { RefCell::new(Vec::new()) };
}

/// Pops the RUNNING entry even if the operation panics; counts the thread
/// into the library's work meanwhile (see `Event::wait`).
pub(crate) struct RunningGuard {
    _in_work: InLibraryWork,
}

impl RunningGuard {
    pub(crate) fn push(task: &Task, op: &(dyn TaskBody + 'static)) -> RunningGuard {
        RUNNING.with(|r| r.borrow_mut().push((task as *const Task, op as *const dyn TaskBody)));
        RunningGuard { _in_work: InLibraryWork::enter() }
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
