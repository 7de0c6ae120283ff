//! Events: the completion of one submission (SPEC §2.6), observable by
//! polling, by waiting with a timeout, or by callbacks that fire exactly once,
//! never while the library holds a lock.

use std::any::Any;
use std::sync::{Arc, Weak};

use smallvec::SmallVec;

use super::guard::{call_guarded, in_library_work};
use super::poke::poke;
use crate::error::Result;
use crate::sync::{Condvar, Mutex};

/// Called once with the operation's outcome.
pub type Callback = Box<dyn FnOnce(&Result<()>) + Send>;

pub(crate) enum State {
    Pending(SmallVec<[Callback; 1]>),
    /// The outcome is known and the notifications are being delivered: the
    /// event is marked complete before they are, so that a callback sees its
    /// own operation complete (poll, error, a wait from inside it).
    Done(Result<()>),
    /// Every notification of the completion has been delivered: a wait from a
    /// program thread returns only now, so it can rely on what the callbacks
    /// did.
    Settled(Result<()>),
}

impl State {
    /// The outcome, once known.
    pub(crate) fn outcome(&self) -> Option<&Result<()>> {
        match self {
            State::Pending(_) => None,
            State::Done(r) | State::Settled(r) => Some(r),
        }
    }

    /// The outcome if a wait from this thread may return with it: the outcome
    /// is known and either every notification has been delivered or this
    /// thread is itself running the library's work (a callback or a task),
    /// which a wait for the notifications could hold up.
    pub(crate) fn outcome_for_caller(&self) -> Option<&Result<()>> {
        match self {
            State::Pending(_) => None,
            State::Done(r) => in_library_work().then_some(r),
            State::Settled(r) => Some(r),
        }
    }
}

pub(crate) struct Inner {
    pub(crate) state: Mutex<State>,
    pub(crate) cv: Condvar,
    /// The task this event completes, for refusing waits that cannot finish
    /// (a `Task`, named only where waits are: the task holds its event).
    pub(crate) task: Mutex<Option<Weak<dyn Any + Send + Sync>>>,
    /// Tasks awaiting the event as a future (see [`Event::poll_waker`]).
    /// `has_wakers` is set under `state`'s lock, so completion reads it
    /// without taking this lock when nobody awaits.
    wakers: Mutex<SmallVec<[std::task::Waker; 1]>>,
    has_wakers: std::sync::atomic::AtomicBool,
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
    ///
    /// ```
    /// let e = tensorasync::Event::new();
    /// assert!(!e.is_complete());
    /// assert!(e.poll().is_none());
    /// ```
    pub fn new() -> Event {
        Event(Arc::new(Inner {
            state: Mutex::new(State::Pending(SmallVec::new())),
            cv: Condvar::new(),
            task: Mutex::new(None),
            wakers: Mutex::new(SmallVec::new()),
            has_wakers: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    pub(crate) fn bind<T: Any + Send + Sync>(&self, task: &Arc<T>) {
        let weak: Weak<dyn Any + Send + Sync> = Arc::downgrade(task) as Weak<dyn Any + Send + Sync>;
        *self.0.task.lock() = Some(weak);
    }

    /// Record the outcome, fire the callbacks attached so far (outside the
    /// lock), then settle.
    pub(crate) fn complete(&self, result: &Result<()>) {
        for cb in self.mark_complete(result) {
            call_guarded(|| cb(result));
        }
        self.settle();
    }

    /// Record the outcome; returns the callbacks attached so far, for the
    /// caller to fire before [`Event::settle`] (once the event is marked,
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
                State::Done(_) | State::Settled(_) => return SmallVec::new(),
            }
        };
        // Waits from inside callbacks and tasks return once the outcome is
        // known (see `Event::wait`).
        self.0.cv.notify_all();
        callbacks
    }

    /// Every notification has been delivered: release the program threads
    /// waiting, and the futures awaiting the event.
    pub(crate) fn settle(&self) {
        {
            let mut s = self.0.state.lock();
            let State::Done(r) = &mut *s else { return };
            let r = std::mem::replace(r, Ok(()));
            *s = State::Settled(r);
        }
        self.0.cv.notify_all();
        if self.0.has_wakers.load(std::sync::atomic::Ordering::Acquire) {
            for w in std::mem::take(&mut *self.0.wakers.lock()) {
                w.wake();
            }
        }
    }

    /// The outcome if the operation has completed; otherwise `waker` is woken
    /// when it completes (registered under the state lock, so a completion
    /// cannot slip between the check and the registration).
    pub(crate) fn poll_waker(&self, waker: &std::task::Waker) -> Option<Result<()>> {
        let s = self.0.state.lock();
        match s.outcome_for_caller() {
            Some(r) => Some(r.clone()),
            None => {
                let mut w = self.0.wakers.lock();
                if !w.iter().any(|x| x.will_wake(waker)) {
                    w.push(waker.clone());
                }
                self.0.has_wakers.store(true, std::sync::atomic::Ordering::Release);
                drop(w);
                drop(s);
                poke();
                None
            }
        }
    }

    /// The outcome if the operation has completed.
    ///
    /// ```
    /// use tensorasync::{ops, DType, Order, Scalar, Submit, Tensor};
    /// let t = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Default::default()).unwrap();
    /// let ev = ops::fill(&t, Scalar::real(1.0), Submit::default()).unwrap();
    /// ev.wait(None).unwrap();
    /// assert!(matches!(ev.poll(), Some(Ok(()))));
    /// ```
    pub fn poll(&self) -> Option<Result<()>> {
        let r = self.0.state.lock().outcome().cloned();
        if r.is_none() {
            poke();
        }
        r
    }

    /// Whether the operation has completed.
    ///
    /// ```
    /// use tensorasync::{ops, Mode, Order, Status, Submit, Tensor};
    /// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
    /// let (token, ev) = ops::external("outside", &[(&t, Mode::Update)], Submit::default()).unwrap();
    /// assert!(!ev.is_complete()); // the token is not finished yet
    /// token.finish(Status::Ok, None).unwrap();
    /// ev.wait(None).unwrap();
    /// assert!(ev.is_complete());
    /// ```
    pub fn is_complete(&self) -> bool {
        self.0.state.lock().outcome().is_some()
    }

    /// See [`State::outcome_for_caller`].
    pub(crate) fn outcome_for_caller(&self) -> Option<Result<()>> {
        self.0.state.lock().outcome_for_caller().cloned()
    }

    /// Run `cb` once with the outcome: now (in the calling thread) if the
    /// outcome is known, otherwise on completion.
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use tensorasync::{ops, DType, Order, Scalar, Submit, Tensor};
    /// let t = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Default::default()).unwrap();
    /// let ev = ops::fill(&t, Scalar::real(1.0), Submit::default()).unwrap();
    /// let (tx, rx) = mpsc::channel();
    /// ev.on_complete(Box::new(move |r| tx.send(r.is_ok()).unwrap()));
    /// assert!(rx.recv().unwrap());
    /// ```
    pub fn on_complete(&self, cb: Callback) {
        let done = {
            let mut s = self.0.state.lock();
            match &mut *s {
                State::Pending(cbs) => {
                    cbs.push(cb);
                    return;
                }
                State::Done(r) | State::Settled(r) => (r.clone(), cb),
            }
        };
        call_guarded(|| (done.1)(&done.0));
    }

    /// Whether two handles refer to the same event.
    ///
    /// ```
    /// use tensorasync::Event;
    /// let e = Event::new();
    /// assert!(e.same_as(&e.clone()));
    /// assert!(!e.same_as(&Event::new()));
    /// ```
    pub fn same_as(&self, other: &Event) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
