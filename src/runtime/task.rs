//! Task nodes: the dependency graph that epoch queues build.
//!
//! A task starts with one "submission guard" dependency, gains one per
//! unfinished predecessor while its accesses are enrolled, and becomes ready
//! when the count reaches zero. Finishing a task hands its successors their
//! last dependency; those that become ready are returned to the caller (the
//! executor), which runs one inline and schedules the rest.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use smallvec::SmallVec;

use super::exec::Work;
use super::RuntimeInner;

/// Tasks that became ready together.
pub(crate) type ReadyList = SmallVec<[Arc<Task>; 4]>;

struct Successors {
    done: bool,
    list: SmallVec<[Arc<Task>; 1]>,
}

/// One submitted operation in the dependency graph.
pub(crate) struct Task {
    /// Unfinished predecessors, plus one while enrollment is in progress.
    pending: AtomicUsize,
    successors: Mutex<Successors>,
    /// The runtime whose workers run this task; `None` for barriers, which
    /// run inline wherever they become ready.
    pub(crate) runtime: Option<Arc<RuntimeInner>>,
    /// The operation and its completion; see [`Task::take_work`].
    work: UnsafeCell<Option<Work>>,
}

// SAFETY: `work` is only touched through `take_work`, whose contract gives one
// thread exclusive access; everything else is atomics, locks and `Arc`s.
unsafe impl Sync for Task {}

impl Task {
    pub(crate) fn new(runtime: Option<Arc<RuntimeInner>>, work: Work) -> Arc<Task> {
        Arc::new(Task {
            pending: AtomicUsize::new(1),
            successors: Mutex::new(Successors { done: false, list: SmallVec::new() }),
            runtime,
            work: UnsafeCell::new(Some(work)),
        })
    }

    /// The work of a task that no other thread can see yet.
    ///
    /// # Safety
    /// Only before the task is enrolled on any queue or scheduled.
    pub(crate) unsafe fn work_mut(&self) -> &mut Work {
        // SAFETY: exclusive by the contract above.
        unsafe { (*self.work.get()).as_mut().expect("work is present until the task runs") }
    }

    /// Take the work out to run it.
    ///
    /// # Safety
    /// Only the thread that made the task ready may call this: the one whose
    /// `release_guard` returned true, or that received the task from
    /// `finish` (which returns each task to exactly one caller). The counter's
    /// AcqRel transitions order every earlier access before this one.
    pub(crate) unsafe fn take_work(&self) -> Option<Work> {
        // SAFETY: exclusive by the contract above.
        unsafe { (*self.work.get()).take() }
    }

    /// Make `self` wait for `pred` (no-op if `pred` already finished).
    pub(crate) fn depend_on(self: &Arc<Self>, pred: &Arc<Task>) {
        if Arc::ptr_eq(self, pred) {
            return;
        }
        let mut s = pred.successors.lock();
        if !s.done {
            // Count before publishing, so the predecessor's release cannot
            // bring the counter to zero early.
            self.pending.fetch_add(1, Ordering::Relaxed);
            s.list.push(self.clone());
        }
    }

    /// Drop the submission guard; true if the task is now ready to run.
    pub(crate) fn release_guard(&self) -> bool {
        self.pending.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// Whether the task has finished.
    pub(crate) fn is_done(&self) -> bool {
        self.successors.lock().done
    }

    /// Mark finished and hand each successor its dependency; returns the ones
    /// that became ready.
    pub(crate) fn finish(&self) -> ReadyList {
        let list = {
            let mut s = self.successors.lock();
            s.done = true;
            std::mem::take(&mut s.list)
        };
        let mut ready = ReadyList::new();
        for t in list {
            if t.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                ready.push(t);
            }
        }
        ready
    }

    /// Whether `target` is `self` or (transitively) waits for `self`. Used to
    /// refuse a blocking wait that could never finish.
    pub(crate) fn reaches(&self, target: &Arc<Task>) -> bool {
        if std::ptr::eq(self, Arc::as_ptr(target)) {
            return true;
        }
        let mut seen: std::collections::HashSet<*const Task> = Default::default();
        let mut stack: Vec<Arc<Task>> = self.successors.lock().list.to_vec();
        while let Some(t) = stack.pop() {
            if Arc::ptr_eq(&t, target) {
                return true;
            }
            if seen.insert(Arc::as_ptr(&t)) {
                stack.extend(t.successors.lock().list.iter().cloned());
            }
        }
        false
    }
}

#[cfg(test)]
mod size_probe {
    #[test]
    fn print_sizes() {
        eprintln!("Task {}", std::mem::size_of::<super::Task>());
        eprintln!("Work {}", std::mem::size_of::<super::Work>());
        eprintln!("Operation {}", std::mem::size_of::<crate::ops::Operation>());
        eprintln!("Body {}", std::mem::size_of::<crate::ops::Body>());
        eprintln!("NativeOp {}", std::mem::size_of::<crate::dispatch::NativeOp>());
        eprintln!("KernelFn {}", std::mem::size_of::<crate::ops::KernelFn>());
        eprintln!("Completion {}", std::mem::size_of::<crate::runtime::exec::Completion>());
        eprintln!("Value {}", std::mem::size_of::<crate::value::Value>());
        eprintln!("Storage {}", std::mem::size_of::<crate::storage::Storage>());
        eprintln!("Layout {}", std::mem::size_of::<crate::layout::Layout>());
    }
}
