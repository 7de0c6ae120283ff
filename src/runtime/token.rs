//! Tokens: the shared state of an operation that completes later (SPEC
//! §2.8), a deferred user kernel, an external operation or a host access.
//!
//! When such an operation's accesses are granted its task *parks* in its
//! token, unfinished (so every later conflicting access still waits for it)
//! but occupying no worker, until the token is finished from any thread
//! (see `deferred`). The token keeps counted handles of the operands (and the
//! contents they were granted with), so the storage outlives the operation
//! even when a shutdown with cancel completes it before the token is
//! finished: external work may still be writing into it.

use std::any::Any;
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;
use smallvec::SmallVec;

use super::event::Event;
use crate::domain::Domain;
use crate::dtype::DType;
use crate::error::{Error, Result, Status};
use crate::queue::Mode;

/// A parked task, as the token holds it.
pub(crate) type Parked = Arc<dyn Any + Send + Sync>;

/// How a parked operation ends.
#[derive(Clone, Debug)]
pub(crate) enum Finish {
    /// It succeeded: commit as a success (an overwrite cleans what it covers).
    Ok,
    /// It failed: outputs are poisoned with `KernelFailed` carrying `code`.
    Fail { code: i64, message: Option<String> },
    /// It was cancelled: outputs are poisoned with `Cancelled`.
    Cancel { message: Option<String> },
    /// It failed with this error (one that came from elsewhere: another
    /// process, another library): outputs are poisoned with it as it is.
    Error(Error),
    /// Nothing was done (a host access that was given up before it was
    /// granted): release the accesses, commit nothing.
    Abandon,
}

/// One granted access, with its geometry copied out of the operation.
#[derive(Clone, Debug)]
pub struct GrantedView {
    /// Address of element `[0, 0, ...]`.
    pub ptr: *mut u8,
    pub dtype: DType,
    pub extents: SmallVec<[usize; 4]>,
    /// Strides in elements.
    pub strides: SmallVec<[isize; 4]>,
    pub mode: Mode,
    pub domain: Domain,
    pub conj: bool,
}

// SAFETY: the pointer is only handed to the token's holder, who may use it
// from any thread while the access is held (that is the point of a token).
unsafe impl Send for GrantedView {}
unsafe impl Sync for GrantedView {}

/// What keeps an operand's storage alive while a token lives.
pub(crate) type Keep = (crate::tensor::handle::Tensor, Option<Arc<crate::tensor::value::Contents>>);

enum State {
    /// The accesses are not granted yet; `early` is a finish that came first.
    Unstarted { early: Option<Finish> },
    /// Granted: the task waits here, unfinished, for its finish (a runtime
    /// `Task`, named above the token: a task's body holds its token).
    Parked(Parked),
    /// Completed: finished, failed before its body started (`failure`), or
    /// completed as cancelled by a shutdown (`cancelled`).
    Done { cancelled: bool, failure: Option<Error> },
}

/// The shared state of one deferred or external operation.
pub(crate) struct TokenInner {
    state: Mutex<State>,
    /// Completes when the accesses are granted (or the operation failed or
    /// was cancelled before that).
    started: Event,
    /// The granted views, set before `started` completes with success.
    views: OnceLock<Vec<GrantedView>>,
    /// Operand handles and contents, taken when granted, dropped with the token.
    keep: Mutex<Vec<Keep>>,
}

/// What finishing a token found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Finished {
    /// The finish took effect (now, or when the accesses are granted).
    Now,
    /// The operation had failed before it started (its inputs were
    /// poisoned): it is complete already, nothing else to do.
    FailedBefore,
    /// A shutdown with cancel completed the operation as cancelled already.
    Cancelled,
    /// Finished before (only reachable from Rust through a second handle).
    Twice,
}

impl TokenInner {
    pub(crate) fn new() -> Arc<TokenInner> {
        Arc::new(TokenInner {
            state: Mutex::new(State::Unstarted { early: None }),
            started: Event::new(),
            views: OnceLock::new(),
            keep: Mutex::new(Vec::new()),
        })
    }

    /// The event that completes when the accesses are granted.
    pub(crate) fn started(&self) -> &Event {
        &self.started
    }

    /// The granted views: `Err(Pending)` before they are granted, the
    /// failure if the operation failed or was cancelled before that.
    pub(crate) fn views(&self, origin: &'static str) -> Result<&[GrantedView]> {
        if let Some(v) = self.views.get() {
            return Ok(v);
        }
        match &*self.state.lock() {
            State::Done { failure: Some(e), .. } => Err(e.clone()),
            State::Done { cancelled: true, .. } => Err(Error::new(
                Status::Cancelled,
                origin,
                "the operation was cancelled before its accesses were granted",
            )),
            _ => Err(Error::new(Status::Pending, origin, "the accesses are not granted yet")),
        }
    }

    /// Whether the accesses have been granted.
    pub(crate) fn is_granted(&self) -> bool {
        self.views.get().is_some()
    }

    /// Take the parked task for finishing with `f`; otherwise what the
    /// finish found (a finish before the grant is kept for the grant).
    pub(crate) fn take_for_finish(&self, f: Finish) -> std::result::Result<(Parked, Finish), Finished> {
        let mut s = self.state.lock();
        match &mut *s {
            State::Unstarted { early } => {
                if early.is_some() {
                    return Err(Finished::Twice);
                }
                *early = Some(f);
                Err(Finished::Now)
            }
            State::Done { cancelled: true, .. } => Err(Finished::Cancelled),
            State::Done { failure: Some(_), .. } => Err(Finished::FailedBefore),
            State::Done { .. } => Err(Finished::Twice),
            State::Parked(_) => {
                let State::Parked(task) = std::mem::replace(&mut *s, State::Done { cancelled: false, failure: None })
                else {
                    unreachable!("matched above")
                };
                Ok((task, f))
            }
        }
    }

    /// Take the parked task, if the token holds one, for completing it as
    /// cancelled by a shutdown.
    pub(crate) fn take_for_cancel(&self) -> Option<Parked> {
        let mut s = self.state.lock();
        if !matches!(&*s, State::Parked(_)) {
            return None;
        }
        let State::Parked(task) = std::mem::replace(&mut *s, State::Done { cancelled: true, failure: None }) else {
            unreachable!("matched above")
        };
        Some(task)
    }

    /// The operation's task ran while the runtime was cancelling, or found
    /// a poisoned input, before its body started: it is concluded already.
    pub(crate) fn failed_before_start(&self, e: &Error, cancelled: bool) {
        *self.state.lock() = State::Done { cancelled, failure: (!cancelled).then(|| e.clone()) };
        self.started.complete(&Err(e.clone()));
    }
}

/// Park `task`, whose accesses are granted, in `token`; `views` and `keep`
/// were taken from its operation. `register` records the token with the
/// task's runtime (false if that is cancelling), under the token's lock.
/// Returns how to conclude the task now, if a finish came first or the
/// runtime is cancelling; `None` if it parked.
///
/// Called by the thread that runs the task, which must not touch the task's
/// work afterwards (the finishing thread concludes it).
pub(crate) fn park<T: Any + Send + Sync>(
    task: &Arc<T>,
    token: &Arc<TokenInner>,
    views: Vec<GrantedView>,
    keep: Vec<Keep>,
    register: impl FnOnce(&Arc<TokenInner>) -> bool,
) -> Option<Finish> {
    *token.keep.lock() = keep;
    let _ = token.views.set(views);
    let mut s = token.state.lock();
    let early = match &mut *s {
        State::Unstarted { early } => early.take(),
        // Unreachable: a token is parked once, by the task that runs it.
        _ => return None,
    };
    let f = match early {
        Some(f) => Some(f),
        None => {
            if register(token) {
                *s = State::Parked(task.clone() as Parked);
                None
            } else {
                Some(Finish::Cancel { message: None })
            }
        }
    };
    let cancelled = matches!(&f, Some(Finish::Cancel { .. }));
    if f.is_some() {
        *s = State::Done { cancelled, failure: None };
    }
    drop(s);
    if cancelled {
        token.started.complete(&Err(Error::new(
            Status::Cancelled,
            "deferred",
            "the runtime was shut down with cancel before the operation started",
        )));
    } else {
        token.started.complete(&Ok(()));
    }
    f
}

/// Record `token` in a runtime's registry of parked tokens, unless the
/// runtime is cancelling (false then; `cancelled` reads its state, under the
/// registry's lock: a cancel sets the state before it sweeps the registry
/// under this lock, so a token is either swept or refused).
pub(crate) fn register(
    parked: &Mutex<Vec<Weak<TokenInner>>>,
    cancelled: impl FnOnce() -> bool,
    token: &Arc<TokenInner>,
) -> bool {
    let mut p = parked.lock();
    if cancelled() {
        return false;
    }
    if p.len() >= 16 && p.len().is_power_of_two() {
        // Tokens that are gone (finished and freed). (No token's lock is
        // taken here: a parking thread holds its own while it waits for
        // this one.)
        p.retain(|w| w.strong_count() > 0);
    }
    p.push(Arc::downgrade(token));
    true
}
