//! Safe host access (SPEC §2.8) through `ndarray` views: a guard holds one
//! access on the tensor's epoch queue (its epoch and owner tokens) until it is
//! dropped, so operations submitted after it wait for it exactly as they
//! would for an operation. Built on [`Tensor::acquire`] and [`HostAccess`].

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use ndarray::{ArrayD, ArrayViewD, ArrayViewMutD};

use crate::dtype::Element;
use crate::error::{Error, Result, Status};
use crate::ndview;
use crate::queue::Mode;
use crate::runtime::deferred::{GrantedView, HostAccess};
use crate::runtime::event::Event;
use crate::tensor::handle::Tensor;

/// Read access to a tensor's elements, held until the guard is dropped:
/// writers submitted meanwhile wait for it. A conj view's elements are read
/// conjugated (into a copy the guard owns), never raw.
///
/// ```
/// use tensorasync::{Order, Tensor};
/// let t = Tensor::from_slice(&[2, 2], Order::RowMajor, &[1i32, 2, 3, 4]).unwrap();
/// let g = t.read_blocking::<i32>().unwrap();
/// assert_eq!(g.view()[[1, 0]], 3);
/// ```
pub struct ReadGuard<T: Element> {
    conjugated: Option<ArrayD<T>>,
    access: HostAccess,
}

/// Write or update access to a tensor's elements, held until the guard is
/// dropped, when it is committed (a write is a pure overwrite: it clears a
/// poison). Operations submitted meanwhile wait for it.
///
/// ```
/// use tensorasync::{DType, Order, Tensor};
/// let t = Tensor::zeros(DType::F64, &[3], Order::RowMajor, Default::default()).unwrap();
/// {
///     let mut g = t.write_blocking::<f64>().unwrap();
///     g.view_mut().fill(4.0);
/// }
/// assert_eq!(t.to_vec::<f64>().unwrap(), vec![4.0; 3]);
/// ```
pub struct WriteGuard<T: Element> {
    access: HostAccess,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> ReadGuard<T> {
    fn new(access: HostAccess) -> Result<ReadGuard<T>> {
        let v = access.view()?;
        ndview::check_dtype::<T>(v.dtype, ORIGIN_READ)?;
        let conjugated = v.conj.then(|| {
            // SAFETY: the access is granted for reading (see `raw_view`).
            unsafe { raw_view::<T>(v) }.map(|x| x.conj())
        });
        Ok(ReadGuard { conjugated, access })
    }

    /// The elements, with the tensor's extents and strides.
    ///
    /// ```
    /// use tensorasync::{Order, SliceSpec, Tensor};
    /// let t = Tensor::from_slice(&[4], Order::RowMajor, &[1u8, 2, 3, 4]).unwrap();
    /// let rev = t.slice(&[SliceSpec { start: 3, stop: -1, step: -1, drop: false }]).unwrap();
    /// let g = rev.read_blocking::<u8>().unwrap();
    /// assert_eq!(g.view().iter().copied().collect::<Vec<_>>(), vec![4, 3, 2, 1]);
    /// ```
    pub fn view(&self) -> ArrayViewD<'_, T> {
        if let Some(c) = &self.conjugated {
            return c.view();
        }
        let v = self.access.view().expect("granted at construction");
        // SAFETY: the access is granted for reading and lives as long as `self`.
        unsafe { raw_view::<T>(v) }
    }
}

impl<T: Element> WriteGuard<T> {
    fn new(access: HostAccess) -> Result<WriteGuard<T>> {
        let v = access.view()?;
        ndview::check_dtype::<T>(v.dtype, ORIGIN_WRITE)?;
        ndview::check_unaliased(&v.extents, &v.strides, ORIGIN_WRITE)?;
        Ok(WriteGuard { access, _t: PhantomData })
    }

    /// The elements, read-only (for a write access: what the tensor held before).
    ///
    /// ```
    /// use tensorasync::{Order, Tensor};
    /// let t = Tensor::from_slice(&[2], Order::RowMajor, &[1.0f32, 2.0]).unwrap();
    /// let g = t.update_blocking::<f32>().unwrap();
    /// assert_eq!(g.view()[[1]], 2.0);
    /// ```
    pub fn view(&self) -> ArrayViewD<'_, T> {
        let v = self.access.view().expect("granted at construction");
        // SAFETY: the access is granted exclusively and lives as long as `self`.
        unsafe { raw_view::<T>(v) }
    }

    /// The elements, writable.
    ///
    /// ```
    /// use tensorasync::{Order, Tensor};
    /// let t = Tensor::from_slice(&[2], Order::RowMajor, &[1i64, 2]).unwrap();
    /// t.update_blocking::<i64>().unwrap().view_mut().mapv_inplace(|x| x * 10);
    /// assert_eq!(t.to_vec::<i64>().unwrap(), vec![10, 20]);
    /// ```
    pub fn view_mut(&mut self) -> ArrayViewMutD<'_, T> {
        let v = self.access.view().expect("granted at construction");
        // SAFETY: the access is granted exclusively, lives as long as the
        // borrow of `self`, and its strides do not alias (checked in `new`).
        unsafe { ndview::view_mut::<T>(v.ptr, &v.extents, &v.strides, ORIGIN_WRITE) }.expect("checked at construction")
    }
}

/// A typed read view of a granted access.
///
/// # Safety
/// The access must be granted (for reading at least) and outlive `'a`.
unsafe fn raw_view<'a, T: Element>(v: &GrantedView) -> ArrayViewD<'a, T> {
    // SAFETY: by the caller; the dtype was checked against T.
    unsafe { ndview::view::<T>(v.ptr, &v.extents, &v.strides) }
}

const ORIGIN_READ: &str = "tensor_read";
const ORIGIN_WRITE: &str = "tensor_write";

impl<T: Element> std::fmt::Debug for ReadGuard<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadGuard").field("view", &self.view()).finish()
    }
}

impl<T: Element> std::fmt::Debug for WriteGuard<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteGuard").field("view", &self.view()).finish()
    }
}

/// A host access being granted: resolves to its guard, or to the error the
/// access failed with (a poisoned tensor's error for a read or an update).
/// The access is enrolled when the future is made, not when it is first
/// polled, so it is ordered where it appears in the program. Dropping it
/// unfinished gives the access up.
///
/// ```
/// use tensorasync::{Order, Tensor};
/// let t = Tensor::from_slice(&[3], Order::RowMajor, &[1u16, 2, 3]).unwrap();
/// let sum: u16 = futures::executor::block_on(async { t.read::<u16>().await.unwrap().view().sum() });
/// assert_eq!(sum, 6);
/// ```
#[must_use = "the access is given up if the future is dropped"]
pub struct Acquire<G> {
    state: Option<Result<(HostAccess, Event)>>,
    make: fn(HostAccess) -> Result<G>,
}

impl<G> std::fmt::Debug for Acquire<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Acquire")
    }
}

impl<G> Future for Acquire<G> {
    type Output = Result<G>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<G>> {
        let this = &mut *self;
        let (_, ready) = match this.state.as_mut().expect("polled after completion") {
            Ok(s) => s,
            Err(_) => {
                let Some(Err(e)) = this.state.take() else { unreachable!("matched above") };
                return Poll::Ready(Err(e));
            }
        };
        match Pin::new(ready).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(r) => {
                let Some(Ok((access, _))) = this.state.take() else { unreachable!("matched above") };
                Poll::Ready(r.and_then(|()| (this.make)(access)))
            }
        }
    }
}

/// Refuse before enrolling what no guard can serve.
fn precheck<T: Element>(t: &Tensor, mode: Mode, origin: &'static str) -> Result<()> {
    ndview::check_dtype::<T>(t.dtype(), origin)?;
    let Some(layout) = t.layout() else {
        return Err(Error::new(Status::Unconstructed, origin, "the tensor is unconstructed"));
    };
    if mode.writes() {
        ndview::check_unaliased(&layout.extents, &layout.strides, origin)?;
    }
    Ok(())
}

impl Tensor {
    fn acquire_guard<G>(&self, mode: Mode, origin: &'static str, make: fn(HostAccess) -> Result<G>) -> Acquire<G> {
        let state = self.acquire_async_named(origin, mode).map(|a| {
            let ready = a.ready().clone();
            (a, ready)
        });
        Acquire { state: Some(state), make }
    }

    /// Read access, awaited: resolves once earlier writers have finished
    /// (see [`Acquire`]). `DtypeMismatch` unless `T` is the tensor's element
    /// type; a poisoned tensor gives its error.
    ///
    /// ```
    /// use tensorasync::{Order, Tensor};
    /// let t = Tensor::from_slice(&[2], Order::RowMajor, &[1.0f64, 2.0]).unwrap();
    /// let g = futures::executor::block_on(t.read::<f64>()).unwrap();
    /// assert_eq!(g.view()[[1]], 2.0);
    /// assert!(futures::executor::block_on(t.read::<f32>()).is_err());
    /// ```
    pub fn read<T: Element>(&self) -> Acquire<ReadGuard<T>> {
        if let Err(e) = precheck::<T>(self, Mode::Read, ORIGIN_READ) {
            return Acquire { state: Some(Err(e)), make: ReadGuard::new };
        }
        self.acquire_guard(Mode::Read, ORIGIN_READ, ReadGuard::new)
    }

    /// Write access (a pure overwrite of every element), awaited: resolves
    /// once every earlier access has finished.
    ///
    /// ```
    /// use tensorasync::{DType, Order, Tensor};
    /// let t = Tensor::zeros(DType::U32, &[2], Order::RowMajor, Default::default()).unwrap();
    /// futures::executor::block_on(async {
    ///     t.write::<u32>().await.unwrap().view_mut().assign(&ndarray::arr1(&[5, 6]).into_dyn());
    /// });
    /// assert_eq!(t.to_vec::<u32>().unwrap(), vec![5, 6]);
    /// ```
    pub fn write<T: Element>(&self) -> Acquire<WriteGuard<T>> {
        self.mutable(Mode::Write)
    }

    /// Update access (read-modify-write), awaited; a poisoned tensor gives its error.
    ///
    /// ```
    /// use tensorasync::{Order, Tensor};
    /// let t = Tensor::from_slice(&[2], Order::RowMajor, &[1i8, 2]).unwrap();
    /// futures::executor::block_on(async { t.update::<i8>().await.unwrap().view_mut()[[0]] += 5 });
    /// assert_eq!(t.to_vec::<i8>().unwrap(), vec![6, 2]);
    /// ```
    pub fn update<T: Element>(&self) -> Acquire<WriteGuard<T>> {
        self.mutable(Mode::Update)
    }

    fn mutable<T: Element>(&self, mode: Mode) -> Acquire<WriteGuard<T>> {
        if let Err(e) = precheck::<T>(self, mode, ORIGIN_WRITE) {
            return Acquire { state: Some(Err(e)), make: WriteGuard::new };
        }
        self.acquire_guard(mode, ORIGIN_WRITE, WriteGuard::new)
    }

    /// [`Tensor::read`], blocking the calling thread. From a task that
    /// accesses this tensor it fails with `WouldDeadlock`.
    ///
    /// ```
    /// use tensorasync::{Order, Tensor};
    /// let t = Tensor::from_slice(&[1], Order::RowMajor, &[7u64]).unwrap();
    /// assert_eq!(t.read_blocking::<u64>().unwrap().view()[[0]], 7);
    /// ```
    pub fn read_blocking<T: Element>(&self) -> Result<ReadGuard<T>> {
        precheck::<T>(self, Mode::Read, ORIGIN_READ)?;
        ReadGuard::new(self.acquire_named(ORIGIN_READ, Mode::Read, None)?)
    }

    /// [`Tensor::write`], blocking the calling thread.
    ///
    /// ```
    /// use tensorasync::{DType, Order, Tensor};
    /// let t = Tensor::zeros(DType::I16, &[2], Order::RowMajor, Default::default()).unwrap();
    /// t.write_blocking::<i16>().unwrap().view_mut().fill(-3);
    /// assert_eq!(t.to_vec::<i16>().unwrap(), vec![-3, -3]);
    /// ```
    pub fn write_blocking<T: Element>(&self) -> Result<WriteGuard<T>> {
        precheck::<T>(self, Mode::Write, ORIGIN_WRITE)?;
        WriteGuard::new(self.acquire_named(ORIGIN_WRITE, Mode::Write, None)?)
    }

    /// [`Tensor::update`], blocking the calling thread.
    ///
    /// ```
    /// use tensorasync::{Order, Tensor};
    /// let t = Tensor::from_slice(&[2], Order::RowMajor, &[1.0f32, 2.0]).unwrap();
    /// t.update_blocking::<f32>().unwrap().view_mut().mapv_inplace(|x| -x);
    /// assert_eq!(t.to_vec::<f32>().unwrap(), vec![-1.0, -2.0]);
    /// ```
    pub fn update_blocking<T: Element>(&self) -> Result<WriteGuard<T>> {
        precheck::<T>(self, Mode::Update, ORIGIN_WRITE)?;
        WriteGuard::new(self.acquire_named(ORIGIN_WRITE, Mode::Update, None)?)
    }
}
