//! Finishing operations that complete later (SPEC §2.8): a token's finish
//! concludes its parked task (see `token`) as a running task would have,
//! and a shutdown with cancel completes every parked token as cancelled.

use std::sync::{Arc, Weak};

use super::event::Event;
use super::exec;
use super::pool::RuntimeInner;
use super::task::{ReadyList, Task};
pub(crate) use super::token::{Finish, Finished, GrantedView, TokenInner};
use crate::error::{Error, Result, Status};

/// Finish the operation of `token` with `f` (see [`Finished`]). Never
/// blocks: a finish before the grant takes effect when the accesses are
/// granted.
pub(crate) fn finish(token: &TokenInner, f: Finish) -> Finished {
    match token.take_for_finish(f) {
        Ok((task, f)) => {
            let task = task.downcast::<Task>().expect("a token parks a task");
            schedule_all(exec::conclude_parked(&task, f));
            Finished::Now
        }
        Err(found) => found,
    }
}

/// Schedule tasks made ready outside a worker's run loop.
fn schedule_all(ready: ReadyList) {
    for t in ready {
        exec::schedule(t);
    }
}

/// Complete every token parked on `rt` as cancelled (its state is already
/// cancelling). Their storage stays alive until each token is finished.
pub(crate) fn cancel_parked(rt: &RuntimeInner) {
    let parked: Vec<Weak<TokenInner>> = std::mem::take(&mut *rt.parked.lock());
    for w in parked {
        let Some(token) = w.upgrade() else { continue };
        let Some(task) = token.take_for_cancel() else { continue };
        let task = task.downcast::<Task>().expect("a token parks a task");
        schedule_all(exec::conclude_parked(
            &task,
            Finish::Cancel {
                message: Some("the runtime was shut down with cancel before the operation was finished".into()),
            },
        ));
    }
}

/// An unfinished deferred or external operation (see `KernelCall::defer`
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
    ///
    /// ```
    /// use tensorasync::{ops, Mode, Order, Status, Submit, Tensor};
    /// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
    /// let (writer, _) = ops::external("first", &[(&t, Mode::Update)], Submit::default()).unwrap();
    /// let (reader, _) = ops::external("second", &[(&t, Mode::Read)], Submit::default()).unwrap();
    /// writer.started().wait(None).unwrap();
    /// assert!(!reader.started().is_complete()); // waits for the writer
    /// writer.finish(Status::Ok, None).unwrap();
    /// reader.started().wait(None).unwrap();
    /// reader.finish(Status::Ok, None).unwrap();
    /// ```
    pub fn started(&self) -> &Event {
        self.inner().started()
    }

    /// The granted views, in declaration order (`Pending` before the grant).
    ///
    /// ```
    /// use tensorasync::{ops, Mode, Order, Status, Submit, Tensor};
    /// let t = Tensor::from_slice(&[2, 3], Order::RowMajor, &[0.0f64; 6]).unwrap();
    /// let (token, _) = ops::external("look", &[(&t, Mode::Read)], Submit::default()).unwrap();
    /// token.started().wait(None).unwrap();
    /// let v = &token.views().unwrap()[0];
    /// assert_eq!((v.extents.as_slice(), v.strides.as_slice()), (&[2usize, 3][..], &[3isize, 1][..]));
    /// token.finish(Status::Ok, None).unwrap();
    /// ```
    pub fn views(&self) -> Result<&[GrantedView]> {
        self.inner().views("token_views")
    }

    /// Complete the operation: `Status::Ok`, or a failure (outputs are
    /// poisoned with `KernelFailed`, or `Cancelled` for `Status::Cancelled`,
    /// with `message`). Before the grant it takes effect once the accesses
    /// are granted. `AlreadyFinished` if a shutdown with cancel completed the
    /// operation already.
    ///
    /// ```
    /// use tensorasync::{ops, Mode, Order, Status, Submit, Tensor};
    /// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
    /// let (token, ev) = ops::external("outside", &[(&t, Mode::Update)], Submit::default()).unwrap();
    /// token.finish(Status::KernelFailed, Some("device lost".into())).unwrap();
    /// let e = ev.wait(None).unwrap_err();
    /// assert_eq!((e.status(), e.message()), (Status::KernelFailed, "device lost"));
    /// assert!(t.to_vec::<f64>().is_err()); // the output is poisoned
    /// ```
    pub fn finish(mut self, status: Status, message: Option<String>) -> Result<()> {
        let inner = self.inner.take().expect("present until finished");
        finish_with(&inner, finish_of(status, message))
    }

    /// [`finish`](Self::finish) through a shared token (one in an `Arc`, say),
    /// so that any of its holders may finish it: the first finish decides, a
    /// later one changes nothing and is `DoubleFree`, and dropping the token
    /// afterwards changes nothing either. The operands' storage is kept until
    /// the token is dropped.
    ///
    /// ```
    /// use tensorasync::{ops, Mode, Order, Status, Submit, Tensor};
    /// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
    /// let (token, _) = ops::external("outside", &[(&t, Mode::Update)], Submit::default()).unwrap();
    /// let token = std::sync::Arc::new(token);
    /// token.finish_shared(Status::Ok, None).unwrap();
    /// assert_eq!(token.finish_shared(Status::Cancelled, None).unwrap_err().status(), Status::DoubleFree);
    /// t.wait(None).unwrap();
    /// ```
    pub fn finish_shared(&self, status: Status, message: Option<String>) -> Result<()> {
        finish_with(self.inner(), finish_of(status, message))
    }

    /// Fail with `KernelFailed` carrying `code` (see `Token::fail_shared`).
    pub(crate) fn finish_failure(&self, code: i64, message: Option<String>) -> Result<()> {
        finish_with(self.inner(), Finish::Fail { code, message })
    }

    /// Finish as failed with `error` itself: the outputs are poisoned with
    /// it (status, code, origin and message as they are), as when an error
    /// made elsewhere (a message from another process) propagates. Through
    /// a shared token, as [`finish_shared`](Self::finish_shared).
    ///
    /// ```
    /// use tensorasync::{ops, Error, Mode, Order, Status, Submit, Tensor};
    /// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
    /// let (token, _) = ops::external("recv", &[(&t, Mode::Write)], Submit::default()).unwrap();
    /// let e = Error::with_code(Status::OutOfMemory, String::from("alloc on rank 3"), "no room for 2 GiB", 7);
    /// token.finish_error_shared(e).unwrap();
    /// let got = t.wait(None).unwrap_err();
    /// assert_eq!((got.status(), got.origin(), got.message(), got.code()), (Status::OutOfMemory, "alloc on rank 3", "no room for 2 GiB", 7));
    /// ```
    pub fn finish_error_shared(&self, error: Error) -> Result<()> {
        finish_with(self.inner(), Finish::Error(error))
    }
}

/// How finishing with `status` concludes the operation.
fn finish_of(status: Status, message: Option<String>) -> Finish {
    match status {
        Status::Ok => Finish::Ok,
        Status::Cancelled => Finish::Cancel { message },
        s => Finish::Fail { code: s as i64, message },
    }
}

/// Finish `token` with `f`; the error for a token that a shutdown with
/// cancel completed already, or that was finished before.
fn finish_with(token: &TokenInner, f: Finish) -> Result<()> {
    const ORIGIN: &str = "token_finish";
    match finish(token, f) {
        Finished::Now | Finished::FailedBefore => Ok(()),
        Finished::Cancelled => Err(Error::new(
            Status::AlreadyFinished,
            ORIGIN,
            "the runtime was shut down with cancel, which completed the operation as cancelled already",
        )),
        Finished::Twice => Err(Error::new(Status::DoubleFree, ORIGIN, "the token was finished already")),
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            let _ =
                finish(&inner, Finish::Cancel { message: Some("the token was dropped without being finished".into()) });
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
    pub(crate) fn new(token: Arc<TokenInner>) -> HostAccess {
        HostAccess { token, seen: std::sync::atomic::AtomicBool::new(false) }
    }

    /// Completes when the access is granted, or with the error it failed with.
    ///
    /// ```
    /// use tensorasync::{Mode, Order, Tensor};
    /// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
    /// let access = t.acquire_async(Mode::Read).unwrap();
    /// access.ready().wait(None).unwrap();
    /// assert!(access.is_granted());
    /// ```
    pub fn ready(&self) -> &Event {
        self.token.started()
    }

    /// Whether the access is granted.
    ///
    /// ```
    /// use tensorasync::{Mode, Order, Tensor};
    /// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
    /// let writer = t.acquire(Mode::Update, None).unwrap();
    /// let reader = t.acquire_async(Mode::Read).unwrap();
    /// assert!(writer.is_granted() && !reader.is_granted());
    /// drop(writer);
    /// reader.ready().wait(None).unwrap();
    /// assert!(reader.is_granted());
    /// ```
    pub fn is_granted(&self) -> bool {
        self.token.is_granted()
    }

    /// The resolved view; its pointers stay valid while the access lives.
    /// `Pending` before the grant; the failure if the access failed.
    ///
    /// ```
    /// use tensorasync::{Mode, Order, Tensor};
    /// let t = Tensor::from_slice(&[3], Order::RowMajor, &[1.0f64, 2.0, 3.0]).unwrap();
    /// let a = t.acquire(Mode::Read, None).unwrap();
    /// let v = a.view().unwrap();
    /// assert_eq!(v.extents.as_slice(), &[3]);
    /// ```
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
        let _ = finish(&self.token, f);
    }
}
