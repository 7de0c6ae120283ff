//! The methods of [`Tensor`] and [`BlockArray`] that submit operations or
//! wait: creation with contents (a device tensor's zeros are a scheduled
//! fill), deep copies, and waits. They sit here, above the runtime, so that
//! the tensor layer below never submits an operation.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smallvec::SmallVec;

use super::copy::copy;
use super::elementwise::fill;
use super::submit::{Completion, Submit};
use crate::domain::Domain;
use crate::dtype::{DType, Element, Scalar};
use crate::error::{Error, Result, Status};
use crate::layout::{Layout, Order};
use crate::runtime::event::Event;
use crate::runtime::waits;
use crate::tensor::blocks::BlockArray;
use crate::tensor::handle::Tensor;
use crate::tensor::value::{check_domain, Value};

impl Tensor {
    /// A zero-filled tensor.
    ///
    /// ```
    /// use tensorasync::{DType, Domain, Order, Tensor};
    /// let t = Tensor::zeros(DType::C64, &[2, 3], Order::ColMajor, Domain::Host).unwrap();
    /// assert_eq!((t.dtype(), t.extents().unwrap().as_slice()), (DType::C64, &[2usize, 3][..]));
    /// assert_eq!(t.to_vec::<num_complex::Complex32>().unwrap(), vec![num_complex::Complex32::new(0.0, 0.0); 6]);
    /// ```
    pub fn zeros(dtype: DType, extents: &[usize], order: Order, domain: Domain) -> Result<Tensor> {
        const O: &str = "tensor_new_zeros";
        check_domain(domain, O)?;
        let contents = Value::alloc_contents(dtype, extents, order, domain, O)?;
        let t = Tensor::of_contents(dtype, domain, contents);
        if domain != Domain::Host {
            // Device memory is zeroed by the tensor's first operation (on
            // the default runtime): creation never waits for the device, and
            // every later access follows the fill.
            fill(&t, Scalar::real(0.0), Default::default()).map_err(|e| e.with_origin(O))?;
        }
        Ok(t)
    }

    /// A tensor holding a copy of `data`, laid out densely in `order`.
    ///
    /// ```
    /// use tensorasync::{DType, Order, Status, Tensor};
    /// let t = Tensor::from_slice(&[2, 2], Order::RowMajor, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    /// assert_eq!(t.dtype(), DType::F32);
    /// assert_eq!(t.to_array::<f32>().unwrap()[[1, 0]], 3.0);
    /// let e = Tensor::from_slice(&[2, 2], Order::RowMajor, &[1.0f32]).unwrap_err();
    /// assert_eq!(e.status(), Status::ShapeMismatch);
    /// ```
    pub fn from_slice<T: Element>(extents: &[usize], order: Order, data: &[T]) -> Result<Tensor> {
        let l = Layout::contiguous(extents, order);
        if l.checked_len() != Some(data.len()) {
            return Err(Error::new(
                Status::ShapeMismatch,
                "tensor_new_copy",
                format!("extents {extents:?} need {:?} elements, got {}", l.checked_len(), data.len()),
            ));
        }
        // SAFETY: `data` is a live slice of exactly `l.len()` elements of T.
        unsafe { Tensor::from_host(T::DTYPE, &l, data.as_ptr().cast(), order) }
    }

    /// A tensor holding a copy of host memory described by `src` (any strides),
    /// stored densely in `order`. The copy is made before this returns. For
    /// foreign memory; Rust data goes through the safe [`Tensor::from_slice`]
    /// and [`Tensor::from_array`].
    ///
    /// # Safety
    /// Every element `src` addresses must be readable at `ptr` (offsets in
    /// elements of `dtype`).
    ///
    /// ```
    /// use tensorasync::{DType, Layout, Order, Tensor};
    /// let host = [1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0];
    /// // Every other element.
    /// let every_other = Layout::strided(&[3], &[2], 0, "example").unwrap();
    /// // SAFETY: the layout addresses elements 0, 2 and 4 of `host`.
    /// let t = unsafe { Tensor::from_host(DType::F64, &every_other, host.as_ptr().cast(), Order::RowMajor) }.unwrap();
    /// assert_eq!(t.to_vec::<f64>().unwrap(), vec![1.0, 3.0, 5.0]);
    /// ```
    pub unsafe fn from_host(dtype: DType, src: &Layout, ptr: *const u8, order: Order) -> Result<Tensor> {
        super::copy::host_bytes_fit(src, dtype, "tensor_new_copy")?;
        let c = Value::alloc_contents(dtype, &src.extents, order, Domain::Host, "tensor_new_copy")?;
        // SAFETY: `c` is fresh and dense for `src.extents`; `ptr` by the caller.
        unsafe { crate::backends::native::copy_raw(dtype, c.storage().ptr(), &c.layout, ptr, src) };
        Ok(Tensor::of_contents(dtype, Domain::Host, c))
    }

    /// A deep copy: a new value on a fresh queue, in this tensor's domain,
    /// holding the elements this handle selects (dense row-major; a conj
    /// view's elements conjugated), filled by a scheduled copy that sees
    /// every write enrolled before it. The event (if asked for in `opts`)
    /// reports that copy. (A structural copy, sharing the value, is `clone`.)
    ///
    /// ```
    /// use tensorasync::{ops, Order, Scalar, Submit, Tensor};
    /// let t = Tensor::from_slice(&[2, 2], Order::RowMajor, &[1.0f64, 2.0, 3.0, 4.0]).unwrap();
    /// let (copy, _) = t.transpose().unwrap().deep_copy(Submit::default()).unwrap();
    /// ops::fill(&t, Scalar::real(0.0), Submit::default()).unwrap(); // does not touch the copy
    /// assert_eq!(copy.to_vec::<f64>().unwrap(), vec![1.0, 3.0, 2.0, 4.0]);
    /// assert!(!copy.is_view());
    /// ```
    pub fn deep_copy<C: Completion>(&self, opts: Submit<'_, C>) -> Result<(Tensor, C::Output)> {
        let fresh = Tensor::unconstructed(self.dtype(), self.domain())?;
        let ev = copy(&fresh, self, opts)?;
        Ok((fresh, ev))
    }

    /// Wait for every operation enrolled on this tensor so far (for a view,
    /// on the elements it touches), then report the value's state: `Ok` for a
    /// clean constructed value, the poisoning error, or an `Unconstructed`
    /// error. `None` waits forever. From inside a task, waiting on a tensor the
    /// task itself accesses fails with `WouldDeadlock`.
    ///
    /// ```
    /// use tensorasync::{ops, DType, Order, Scalar, Submit, Tensor};
    /// use tensorasync::ops::Uplo;
    /// let t = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Default::default()).unwrap();
    /// ops::fill(&t, Scalar::real(1.0), Submit::default()).unwrap();
    /// assert!(t.wait(None).is_ok());
    /// // A failed operation poisons what it writes; the wait reports it.
    /// let bad = Tensor::from_slice(&[1, 1], Order::RowMajor, &[-1.0f64]).unwrap();
    /// ops::potrf(&bad, Uplo::Lower, Submit::default()).unwrap();
    /// assert!(bad.wait(None).is_err());
    /// ```
    pub fn wait(&self, timeout: Option<Duration>) -> Result<()> {
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        let mut first_error = Ok(());
        for (v, r) in self.hazards() {
            let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
            let r = waits::wait_value(v, r, left);
            if first_error.is_ok() {
                first_error = r;
            }
        }
        first_error
    }

    /// An event that completes once every operation enrolled on this tensor
    /// so far (for a view, on the elements it touches) has completed, with
    /// the outcome [`Tensor::wait`] would report. Never blocks.
    ///
    /// ```
    /// use tensorasync::{ops, Mode, Order, Status, Submit, Tensor};
    /// let t = Tensor::from_slice(&[1], Order::RowMajor, &[1.0f64]).unwrap();
    /// let (token, _) = ops::external("outside", &[(&t, Mode::Update)], Submit::default()).unwrap();
    /// let ready = t.ready();
    /// assert!(!ready.is_complete()); // the external operation is unfinished
    /// token.finish(Status::Ok, None).unwrap();
    /// ready.wait(None).unwrap();
    /// ```
    pub fn ready(&self) -> Event {
        let mut events: SmallVec<[Event; 1]> = self.hazards().map(|(v, r)| waits::ready_value(v, r)).collect();
        if events.len() == 1 {
            return events.pop().expect("one event");
        }
        // Several hazard records (a coalesced block view): one event for
        // all, with the first error in block order.
        let all = Event::new();
        let n = events.len();
        let left = Arc::new((AtomicUsize::new(n), parking_lot::Mutex::new(vec![None; n])));
        for (i, e) in events.iter().enumerate() {
            let (all, left) = (all.clone(), left.clone());
            e.on_complete(Box::new(move |r| {
                left.1.lock()[i] = Some(r.clone());
                if left.0.fetch_sub(1, Ordering::AcqRel) == 1 {
                    let outcome = left
                        .1
                        .lock()
                        .iter_mut()
                        .map(|r| r.take().expect("every part completed"))
                        .find(|r| r.is_err())
                        .unwrap_or(Ok(()));
                    all.complete(&outcome);
                }
            }));
        }
        all
    }
}

impl BlockArray {
    /// A zero-filled tiled array of `extents`, cut in tiles of `tile` (the
    /// last tile on an axis may be ragged), stored as one array in `order`:
    /// dense, but on the host a leading dimension whose byte stride is a
    /// multiple of 1 KiB is padded by one cache line (such strides make a
    /// tile's columns evict each other from the caches).
    ///
    /// ```
    /// use tensorasync::{BlockArray, DType, Order};
    /// // 5 x 3 in 2 x 2 tiles: a 3 x 2 grid, ragged on both axes.
    /// let b = BlockArray::tiled(DType::F32, &[5, 3], &[2, 2], Order::RowMajor, Default::default()).unwrap();
    /// assert_eq!(b.grid().unwrap(), &[3, 2]);
    /// assert_eq!(b.tile(&[2, 1]).unwrap().extents().unwrap().as_slice(), &[1, 1]);
    /// assert_eq!(b.all().unwrap().to_vec::<f32>().unwrap(), vec![0.0; 15]);
    /// ```
    pub fn tiled(dtype: DType, extents: &[usize], tile: &[usize], order: Order, domain: Domain) -> Result<BlockArray> {
        BlockArray::tiled_unfilled(dtype, extents, tile, order, domain)?.zeroed()
    }

    /// A zero-filled list of blocks of the given shapes (block-sparse
    /// storage), each dense in `order`, one after another in one allocation.
    ///
    /// ```
    /// use tensorasync::{BlockArray, DType, Order};
    /// let b = BlockArray::list(DType::F64, &[&[2, 2], &[3]], Order::RowMajor, Default::default()).unwrap();
    /// assert_eq!(b.count(), 2);
    /// assert!(b.grid().is_none());
    /// assert_eq!(b.block(1).unwrap().to_vec::<f64>().unwrap(), vec![0.0; 3]);
    /// ```
    pub fn list(dtype: DType, shapes: &[&[usize]], order: Order, domain: Domain) -> Result<BlockArray> {
        BlockArray::list_unfilled(dtype, shapes, order, domain)?.zeroed()
    }

    /// Host allocations come zeroed; device memory gets a zero fill as each
    /// block's first operation (on the default runtime), so creation never
    /// waits for the device and every later access follows the fill.
    fn zeroed(self) -> Result<BlockArray> {
        if self.domain() != Domain::Host {
            for i in 0..self.count() {
                fill(&self.block(i)?, Scalar::real(0.0), Default::default())?;
            }
        }
        Ok(self)
    }
}
