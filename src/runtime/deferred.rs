//! Operations that complete later (SPEC §2.8): deferred completion of a user
//! kernel, operations whose body the caller runs itself, and host access.
//!
//! Such an operation is an ordinary task on the epoch queues. When its
//! accesses are granted its body does not complete it: the task *parks* in a
//! [`TokenInner`], unfinished (so every later conflicting access still waits
//! for it) but occupying no worker, until the token is finished from any
//! thread, which concludes the task as a running task would have. The token
//! keeps counted handles of the operands (and the contents they were granted
//! with), so the storage outlives the operation even when shutdown with
//! cancel completes it before its token is finished: external work may still
//! be writing into it.

use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;
use smallvec::SmallVec;

use super::event::Event;
use super::exec;
use super::task::{ReadyList, Task};
use super::RuntimeInner;
use crate::domain::Domain;
use crate::dtype::DType;
use crate::error::{Error, Result, Status};
use crate::queue::Mode;

/// How a parked operation ends.
#[derive(Clone, Debug)]
pub(crate) enum Finish {
    /// It succeeded: commit as a success (an overwrite cleans what it covers).
    Ok,
    /// It failed: outputs are poisoned with `KernelFailed` (code `status`),
    /// or with `Cancelled` if `status` is `Cancelled`.
    Fail { status: u32, message: Option<String> },
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
pub(crate) type Keep = (crate::value::Tensor, Option<Arc<crate::value::Contents>>);

enum State {
    /// The accesses are not granted yet; `early` is a finish that came first.
    Unstarted { early: Option<Finish> },
    /// Granted: the task waits here, unfinished, for its finish.
    Parked(Arc<Task>),
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

    /// Finish the operation with `f` (see [`Finished`]). Never blocks: a
    /// finish before the grant takes effect when the accesses are granted.
    pub(crate) fn finish(&self, f: Finish) -> Finished {
        let task = {
            let mut s = self.state.lock();
            match &mut *s {
                State::Unstarted { early } => {
                    if early.is_some() {
                        return Finished::Twice;
                    }
                    *early = Some(f);
                    return Finished::Now;
                }
                State::Done { cancelled: true, .. } => return Finished::Cancelled,
                State::Done { failure: Some(_), .. } => return Finished::FailedBefore,
                State::Done { .. } => return Finished::Twice,
                State::Parked(_) => {
                    let State::Parked(task) =
                        std::mem::replace(&mut *s, State::Done { cancelled: false, failure: None })
                    else {
                        unreachable!("matched above")
                    };
                    task
                }
            }
        };
        schedule_all(exec::conclude_parked(&task, f));
        Finished::Now
    }

    /// The operation's task ran while the runtime was cancelling, or found
    /// a poisoned input, before its body started: it is concluded already.
    pub(crate) fn failed_before_start(&self, e: &Error, cancelled: bool) {
        *self.state.lock() = State::Done { cancelled, failure: (!cancelled).then(|| e.clone()) };
        self.started.complete(&Err(e.clone()));
    }
}

/// Schedule tasks made ready outside a worker's run loop.
fn schedule_all(ready: ReadyList) {
    for t in ready {
        exec::schedule(t);
    }
}

/// Park `task`, whose accesses are granted, in `token`; `views` and `keep`
/// were taken from its operation. Returns what became ready (if a finish
/// came first, or the runtime is cancelling, the task concludes at once).
///
/// Called by the thread that runs the task, which must not touch the task's
/// work afterwards (the finishing thread concludes it).
pub(crate) fn park(task: &Arc<Task>, token: &Arc<TokenInner>, views: Vec<GrantedView>, keep: Vec<Keep>) -> ReadyList {
    *token.keep.lock() = keep;
    let _ = token.views.set(views);
    let mut s = token.state.lock();
    let early = match &mut *s {
        State::Unstarted { early } => early.take(),
        // Unreachable: a token is parked once, by the task that runs it.
        _ => return ReadyList::new(),
    };
    let f = match early {
        Some(f) => Some(f),
        None => {
            let rt = task.runtime().expect("a parked task has a runtime");
            if register(rt, token) {
                *s = State::Parked(task.clone());
                None
            } else {
                Some(Finish::Fail { status: Status::Cancelled as u32, message: None })
            }
        }
    };
    let cancelled = matches!(&f, Some(Finish::Fail { status, .. }) if *status == Status::Cancelled as u32);
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
    match f {
        Some(f) => exec::conclude_parked(task, f),
        None => ReadyList::new(),
    }
}

/// Record `token` as parked on `rt`, unless `rt` is cancelling (false then).
fn register(rt: &RuntimeInner, token: &Arc<TokenInner>) -> bool {
    let mut p = rt.parked.lock();
    // Under the registry's lock: a cancel sets the state before it sweeps
    // the registry under this lock, so a token is either swept or refused.
    if rt.cancelled() {
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

/// Complete every token parked on `rt` as cancelled (its state is already
/// cancelling). Their storage stays alive until each token is finished.
pub(crate) fn cancel_parked(rt: &RuntimeInner) {
    let parked: Vec<Weak<TokenInner>> = std::mem::take(&mut *rt.parked.lock());
    for w in parked {
        let Some(token) = w.upgrade() else { continue };
        let task = {
            let mut s = token.state.lock();
            if !matches!(&*s, State::Parked(_)) {
                continue;
            }
            let State::Parked(task) = std::mem::replace(&mut *s, State::Done { cancelled: true, failure: None }) else {
                unreachable!("matched above")
            };
            task
        };
        schedule_all(exec::conclude_parked(
            &task,
            Finish::Fail {
                status: Status::Cancelled as u32,
                message: Some("the runtime was shut down with cancel before the operation was finished".into()),
            },
        ));
    }
}

/// An unfinished deferred or external operation (see [`crate::KernelCall::defer`]
/// and [`crate::ops::external`]). Finish it with [`Token::finish`], from any
/// thread; dropping it unfinished finishes it as cancelled.
pub struct Token {
    inner: Option<Arc<TokenInner>>,
}

impl Token {
    pub(crate) fn from_inner(inner: Arc<TokenInner>) -> Token {
        Token { inner: Some(inner) }
    }

    fn inner(&self) -> &Arc<TokenInner> {
        self.inner.as_ref().expect("present until finished")
    }

    /// Completes once every access is granted (with the error instead if an
    /// input is poisoned, or `Cancelled` at a shutdown with cancel).
    pub fn started(&self) -> &Event {
        self.inner().started()
    }

    /// The granted views, in declaration order (`Pending` before the grant).
    pub fn views(&self) -> Result<&[GrantedView]> {
        self.inner().views("token_views")
    }

    /// Complete the operation: `Status::Ok`, or a failure (outputs are
    /// poisoned with `KernelFailed`, or `Cancelled` for `Status::Cancelled`,
    /// with `message`). Before the grant it takes effect once the accesses
    /// are granted. `AlreadyFinished` if a shutdown with cancel completed the
    /// operation already.
    pub fn finish(mut self, status: Status, message: Option<String>) -> Result<()> {
        let inner = self.inner.take().expect("present until finished");
        finish_status(&inner, status as u32, message, "token_finish")
    }

    /// [`views`](Self::views), with `origin` naming the caller in the errors
    /// this call makes (the C library passes its function's name).
    pub fn views_in(&self, origin: &'static str) -> Result<&[GrantedView]> {
        self.inner().views(origin)
    }

    /// Complete the operation with a kernel's status code: 0 is success, the
    /// value of `Status::Cancelled` cancels, any other fails the operation
    /// with `KernelFailed` carrying `code` (as a [`crate::KernelFailure`]
    /// does). Through a shared token: a second finish, or dropping the token
    /// afterwards, changes nothing (`DoubleFree` for the second finish).
    /// `origin` names the caller in the errors this call makes.
    pub fn finish_code(&self, code: u32, message: Option<String>, origin: &'static str) -> Result<()> {
        finish_status(self.inner(), code, message, origin)
    }
}

/// Finish `token` with a C-style status; the error for a token that a
/// shutdown with cancel completed already.
pub(crate) fn finish_status(
    token: &TokenInner,
    status: u32,
    message: Option<String>,
    origin: &'static str,
) -> Result<()> {
    let f = if status == Status::Ok as u32 { Finish::Ok } else { Finish::Fail { status, message } };
    match token.finish(f) {
        Finished::Now | Finished::FailedBefore => Ok(()),
        Finished::Cancelled => Err(Error::new(
            Status::AlreadyFinished,
            origin,
            "the runtime was shut down with cancel, which completed the operation as cancelled already",
        )),
        Finished::Twice => Err(Error::new(Status::DoubleFree, origin, "the token was finished already")),
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            let _ = inner.finish(Finish::Fail {
                status: Status::Cancelled as u32,
                message: Some("the token was dropped without being finished".into()),
            });
        }
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token")
    }
}

/// A host access to a tensor (SPEC §2.8): one access enrolled on its epoch
/// queue like an operation's, holding the epoch and owner tokens while it
/// lives. Dropping it releases the access (never blocks; one not yet
/// granted is released when it is granted). A write access whose view was
/// taken counts as a successful pure overwrite when it is dropped.
pub struct HostAccess {
    token: Arc<TokenInner>,
    /// Whether the view was handed out (a write is committed only then).
    seen: std::sync::atomic::AtomicBool,
}

impl HostAccess {
    /// Completes when the access is granted, or with the error it failed with.
    pub fn ready(&self) -> &Event {
        self.token.started()
    }

    /// Whether the access is granted.
    pub fn is_granted(&self) -> bool {
        self.token.is_granted()
    }

    /// The resolved view; its pointers stay valid while the access lives.
    /// `Pending` before the grant; the failure if the access failed.
    pub fn view(&self) -> Result<&GrantedView> {
        let v = &self.token.views("mapping_view")?[0];
        self.seen.store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(v)
    }
}

impl std::fmt::Debug for HostAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostAccess").field("granted", &self.is_granted()).finish()
    }
}

impl Drop for HostAccess {
    fn drop(&mut self) {
        let f = if self.seen.load(std::sync::atomic::Ordering::Relaxed) { Finish::Ok } else { Finish::Abandon };
        let _ = self.token.finish(f);
    }
}

impl crate::value::Tensor {
    /// Acquire a host access in `mode` and wait up to `timeout` (`None`:
    /// forever) until it is granted. A read waits for earlier writers, a
    /// write or update for every earlier access. A read or update of a
    /// poisoned tensor fails with its error; a write is a pure overwrite.
    /// On timeout the access is released as soon as it is granted. From a
    /// task that accesses this tensor it fails with `WouldDeadlock`.
    pub fn acquire(&self, mode: Mode, timeout: Option<std::time::Duration>) -> Result<HostAccess> {
        self.acquire_in("ta_tensor_acquire", mode, timeout)
    }

    /// [`acquire`](Self::acquire), with `origin` naming the caller in the
    /// errors this call makes (the C library passes its function's name).
    pub fn acquire_in(
        &self,
        origin: &'static str,
        mode: Mode,
        timeout: Option<std::time::Duration>,
    ) -> Result<HostAccess> {
        if self.hazards().any(|(v, _)| exec::current_task_holds(v)) {
            return Err(Error::new(
                Status::WouldDeadlock,
                origin,
                "a task cannot wait for a host access to a tensor it is accessing: the access needs the task itself to finish",
            ));
        }
        let access = self.acquire_async_in(origin, mode)?;
        match access.ready().wait(timeout) {
            Ok(()) => Ok(access),
            Err(e) if e.status() == Status::Timeout => {
                drop(access);
                Err(Error::new(Status::Timeout, origin, "the access was not granted in time"))
            }
            Err(e) => Err(e),
        }
    }

    /// Enroll a host access in `mode` without waiting; see [`HostAccess::ready`].
    pub fn acquire_async(&self, mode: Mode) -> Result<HostAccess> {
        self.acquire_async_in("ta_tensor_acquire_async", mode)
    }

    /// [`acquire_async`](Self::acquire_async), with `origin` naming the
    /// caller in the errors this call makes.
    pub fn acquire_async_in(&self, origin: &'static str, mode: Mode) -> Result<HostAccess> {
        let (token, _) = crate::ops::external_inner(
            crate::ops::OpName::Static(origin),
            origin,
            &[(self, mode)],
            Default::default(),
        )?;
        Ok(HostAccess { token, seen: std::sync::atomic::AtomicBool::new(false) })
    }
}
