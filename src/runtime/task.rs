//! Task nodes: the dependency graph that epoch queues build.
//!
//! A task starts with one "submission guard" dependency, gains one per
//! unfinished predecessor while its accesses are enrolled, and becomes ready
//! when the count reaches zero. Finishing a task hands its successors their
//! last dependency; those that become ready are returned to the caller (the
//! executor), which runs one inline and schedules the rest.

use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
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
    pending: AtomicU32,
    /// Set (under the successors lock) when the task finishes; read without it.
    done: AtomicBool,
    successors: Mutex<Successors>,
    /// The runtime whose workers run this task; `None` for barriers, which
    /// run inline wherever they become ready. Not reference-counted: see
    /// [`Task::runtime`].
    runtime: Option<NonNull<RuntimeInner>>,
    /// The operation and its completion; see [`Task::take_work`].
    work: UnsafeCell<Option<Work>>,
}

// SAFETY: `work` is only touched through `take_work`/`work_mut`, whose
// contracts give one thread exclusive access; `runtime` is only dereferenced
// under the contract of `Task::runtime`; everything else is atomics, locks
// and `Arc`s.
unsafe impl Sync for Task {}
unsafe impl Send for Task {}

impl Task {
    /// A task for `runtime`, which must have admitted it (see [`Task::runtime`]).
    pub(crate) fn new(runtime: Option<&RuntimeInner>, work: Work) -> Arc<Task> {
        Arc::new(Task {
            pending: AtomicU32::new(1),
            done: AtomicBool::new(false),
            successors: Mutex::new(Successors { done: false, list: SmallVec::new() }),
            runtime: runtime.map(NonNull::from),
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

    /// The runtime that runs this task.
    ///
    /// The pointer holds no reference count (a count on a runtime-wide object,
    /// taken by the submitter and dropped by a worker for every task, would
    /// bounce one cache line between them per task). It is valid from
    /// admission until the task retires: the runtime's last user handle drains
    /// every admitted task before it lets the runtime go, and retiring is the
    /// task's last use of it. Callers only use it for tasks that have not
    /// finished.
    pub(crate) fn runtime(&self) -> Option<&RuntimeInner> {
        // SAFETY: see above.
        self.runtime.map(|p| unsafe { p.as_ref() })
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
        self.done.load(Ordering::Acquire)
    }

    /// Mark finished and hand each successor its dependency; returns the ones
    /// that became ready.
    pub(crate) fn finish(&self) -> ReadyList {
        let list = {
            let mut s = self.successors.lock();
            s.done = true;
            self.done.store(true, Ordering::Release);
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
        eprintln!("Contents {}", std::mem::size_of::<crate::value::Contents>());
        eprintln!("Slot-Object {}", std::mem::size_of::<Option<crate::ffi::handles::Object>>());
    }
}
