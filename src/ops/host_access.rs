//! Host access to a tensor (SPEC §2.8): an external operation on one
//! operand, whose token the caller holds while it uses the memory.

use super::submit::Submit;
use crate::error::{Error, Result, Status};
use crate::queue::Mode;
use crate::runtime::deferred::HostAccess;

impl crate::tensor::handle::Tensor {
    /// Acquire a host access in `mode` and wait up to `timeout` (`None`:
    /// forever) until it is granted. A read waits for earlier writers, a
    /// write or update for every earlier access. A read or update of a
    /// poisoned tensor fails with its error; a write is a pure overwrite.
    /// On timeout the access is released as soon as it is granted. From a
    /// task that accesses this tensor, or that an earlier access to it waits
    /// for, it fails with `WouldDeadlock`.
    ///
    /// ```
    /// use tensorasync::{Mode, Order, Tensor};
    /// let t = Tensor::from_slice(&[2], Order::RowMajor, &[1.0f64, 2.0]).unwrap();
    /// let a = t.acquire(Mode::Read, None).unwrap();
    /// assert!(a.is_granted());
    /// assert_eq!(a.view().unwrap().extents.as_slice(), &[2]);
    /// ```
    pub fn acquire(&self, mode: Mode, timeout: Option<std::time::Duration>) -> Result<HostAccess> {
        self.acquire_named("tensor_acquire", mode, timeout)
    }

    /// [`acquire`](Self::acquire), with `name` naming the host access: the
    /// origin of the errors it makes, and its name in traces and pending-work
    /// dumps, where a program's accesses can then be told apart (`acquire`
    /// names it `tensor_acquire`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tensorasync::{Mode, Order, Status, Tensor};
    /// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
    /// let writer = t.acquire(Mode::Update, None).unwrap();
    /// // A second update waits for the first, which is held: it times out.
    /// let e = t.acquire_named("my_acquire", Mode::Update, Some(Duration::from_millis(1))).unwrap_err();
    /// assert_eq!((e.status(), e.origin()), (Status::Timeout, "my_acquire"));
    /// drop(writer);
    /// ```
    pub fn acquire_named(
        &self,
        name: &'static str,
        mode: Mode,
        timeout: Option<std::time::Duration>,
    ) -> Result<HostAccess> {
        if self.hazards().any(|(v, _)| crate::runtime::running::current_task_holds(v)) {
            return Err(Error::new(
                Status::WouldDeadlock,
                name,
                "a task cannot wait for a host access to a tensor it is accessing: the access needs the task itself to finish",
            ));
        }
        let access = self.acquire_async_named(name, mode)?;
        match access.ready().wait(timeout) {
            Ok(()) => Ok(access),
            Err(e) if e.status() == Status::Timeout => {
                drop(access);
                Err(Error::new(Status::Timeout, name, "the access was not granted in time"))
            }
            Err(e) if e.status() == Status::WouldDeadlock => {
                drop(access);
                Err(Error::new(
                    Status::WouldDeadlock,
                    name,
                    "the access waits for the task that is waiting for it (an earlier access to the tensor waits for that task)",
                ))
            }
            Err(e) => Err(e),
        }
    }

    /// Enroll a host access in `mode` without waiting; see [`HostAccess::ready`].
    ///
    /// ```
    /// use tensorasync::{Mode, Order, Tensor};
    /// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
    /// let first = t.acquire_async(Mode::Update).unwrap();
    /// let second = t.acquire_async(Mode::Read).unwrap();
    /// first.ready().wait(None).unwrap();
    /// assert!(!second.is_granted()); // after the update
    /// drop(first);
    /// second.ready().wait(None).unwrap();
    /// assert!(second.is_granted());
    /// ```
    pub fn acquire_async(&self, mode: Mode) -> Result<HostAccess> {
        self.acquire_async_named("tensor_acquire_async", mode)
    }

    /// [`acquire_async`](Self::acquire_async), with `name` naming the host
    /// access as for [`acquire_named`](Self::acquire_named) (`acquire_async`
    /// names it `tensor_acquire_async`).
    ///
    /// ```
    /// use tensorasync::{Mode, Order, Tensor};
    /// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
    /// let a = t.acquire_async_named("my_acquire_async", Mode::Read).unwrap();
    /// a.ready().wait(None).unwrap();
    /// // A conj view is read-only: a write access is refused, in the caller's name.
    /// let e = t.conj().unwrap().acquire_async_named("my_acquire_async", Mode::Write).err().unwrap();
    /// assert_eq!(e.origin(), "my_acquire_async");
    /// ```
    pub fn acquire_async_named(&self, name: &'static str, mode: Mode) -> Result<HostAccess> {
        let (token, _) =
            super::external_inner(super::OpName::from(name), name, &[(self, mode)], Submit::default().detached())?;
        Ok(HostAccess::new(token))
    }
}
