//! Events: the completion of one submission (SPEC §2.6), observable by
//! polling, by waiting with a timeout, or by callbacks that fire exactly once,
//! never while the library holds a lock.

use std::any::Any;
use std::sync::{Arc, Weak};

use smallvec::SmallVec;

use super::guard::call_guarded;
use super::poke::poke;
use crate::error::Result;
use crate::sync::{Condvar, Mutex};

/// Called once with the operation's outcome.
pub type Callback = Box<dyn FnOnce(&Result<()>) + Send>;

pub(crate) enum State {
    Pending(SmallVec<[Callback; 1]>),
    /// The outcome is known. Callbacks attached before it may still be
    /// running: the event is marked complete before they are called, so that
    /// a callback sees its own operation complete (poll, error, wait).
    Done(Result<()>),
}

pub(crate) struct Inner {
    pub(crate) state: Mutex<State>,
    pub(crate) cv: Condvar,
    /// The task this event completes, for refusing waits that cannot finish
    /// (a `Task`, named only where waits are: the task holds its event).
    pub(crate) task: Mutex<Option<Weak<dyn Any + Send + Sync>>>,
}

/// The completion of one submitted operation. Cloning shares the event.
#[derive(Clone)]
pub struct Event(pub(crate) Arc<Inner>);

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.poll() {
            None => f.write_str("Event(pending)"),
            Some(r) => write!(f, "Event({r:?})"),
        }
    }
}

impl Default for Event {
    fn default() -> Self {
        Event::new()
    }
}

impl Event {
    /// A pending event.
    pub fn new() -> Event {
        Event(Arc::new(Inner {
            state: Mutex::new(State::Pending(SmallVec::new())),
            cv: Condvar::new(),
            task: Mutex::new(None),
        }))
    }

    pub(crate) fn bind<T: Any + Send + Sync>(&self, task: &Arc<T>) {
        let weak: Weak<dyn Any + Send + Sync> = Arc::downgrade(task) as Weak<dyn Any + Send + Sync>;
        *self.0.task.lock() = Some(weak);
    }

    /// Record the outcome, wake the waiters, then fire the callbacks
    /// attached so far (outside the lock).
    pub(crate) fn complete(&self, result: &Result<()>) {
        for cb in self.mark_complete(result) {
            call_guarded(|| cb(result));
        }
    }

    /// Record the outcome and wake the waiters; returns the callbacks
    /// attached so far, for the caller to fire (once the event is marked,
    /// callbacks attached later run at once in the attaching thread).
    pub(crate) fn mark_complete(&self, result: &Result<()>) -> SmallVec<[Callback; 1]> {
        let callbacks = {
            let mut s = self.0.state.lock();
            match &mut *s {
                State::Pending(cbs) => {
                    let cbs = std::mem::take(cbs);
                    *s = State::Done(result.clone());
                    cbs
                }
                // Completing twice would be a runtime bug; keep the first outcome.
                State::Done(_) => return SmallVec::new(),
            }
        };
        self.0.cv.notify_all();
        callbacks
    }

    /// The outcome if the operation has completed.
    pub fn poll(&self) -> Option<Result<()>> {
        match &*self.0.state.lock() {
            State::Pending(_) => {
                poke();
                None
            }
            State::Done(r) => Some(r.clone()),
        }
    }

    /// Whether the operation has completed.
    pub fn is_complete(&self) -> bool {
        matches!(&*self.0.state.lock(), State::Done(_))
    }

    /// Run `cb` once with the outcome: now (in the calling thread) if the
    /// outcome is known, otherwise on completion.
    pub fn on_complete(&self, cb: Callback) {
        let done = {
            let mut s = self.0.state.lock();
            match &mut *s {
                State::Pending(cbs) => {
                    cbs.push(cb);
                    return;
                }
                State::Done(r) => (r.clone(), cb),
            }
        };
        call_guarded(|| (done.1)(&done.0));
    }

    /// Whether two handles refer to the same event.
    pub fn same_as(&self, other: &Event) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
