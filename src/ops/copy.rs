//! Copies: tensor to tensor (any strides), host memory in, host memory out.

use super::checks::same_extents;
use super::submit::{submit, Completion, Submit};
use super::Body;
use crate::backends::registry;
use crate::dispatch::{HostBuffer, KernelOp, OpTag};
use crate::domain::Domain;
use crate::dtype::DType;
use crate::error::{Error, Result, Status};
use crate::layout::{Layout, Order};
use crate::queue::Mode;
use crate::tensor::handle::Tensor;
use crate::tensor::value::Value;

/// `dst = src`, element by element, whatever the two layouts. An overwrite: it
/// constructs an unconstructed `dst` (dense row-major, `src`'s extents) and
/// clears a poison on `dst`.
///
/// ```
/// use tensorasync::{ops, DType, Domain, Order, Submit, Tensor};
/// let src = Tensor::from_slice(&[2, 2], Order::RowMajor, &[1u16, 2, 3, 4]).unwrap();
/// // From a transposed view into a new dense tensor.
/// let dst = Tensor::unconstructed(DType::U16, Domain::Host).unwrap();
/// ops::copy(&dst, &src.transpose().unwrap(), Submit::default()).unwrap();
/// assert_eq!(dst.to_vec::<u16>().unwrap(), vec![1, 3, 2, 4]);
/// ```
pub fn copy<C: Completion>(dst: &Tensor, src: &Tensor, opts: Submit<'_, C>) -> Result<C::Output> {
    const ORIGIN: &str = "copy";
    if dst.dtype() != src.dtype() {
        return Err(Error::new(
            Status::DtypeMismatch,
            ORIGIN,
            format!("dtypes differ: {} and {}", dst.dtype().name(), src.dtype().name()),
        ));
    }
    // Copies cross domains: a device side decides where the copy runs (the
    // destination's device, if both are devices).
    let domain = if dst.domain() == Domain::Host { src.domain() } else { dst.domain() };
    let candidates = registry::select(OpTag::Copy, dst.dtype(), domain, opts.selector, ORIGIN)?;
    let body = Body::Native { op: KernelOp::Copy, candidates };
    let dtype = dst.dtype();
    let dst_domain = dst.domain();
    submit(ORIGIN, ORIGIN, &[(dst, Mode::Write), (src, Mode::Read)], body, opts, |l| {
        // Only a whole value can be unconstructed; a copy of known shape constructs it.
        if l.layout(0).is_none() {
            if let Some(src) = l.layout(1) {
                let extents = src.extents.clone();
                l.construct(0, Value::alloc_contents(dtype, &extents, Order::RowMajor, dst_domain, ORIGIN)?);
            }
        }
        same_extents(ORIGIN, l, 0, 1)
    })
}

/// Copy host memory into `dst`. `src` describes the host elements (any
/// strides, negative ones included; offsets relative to `ptr`). An unconstructed `dst` is constructed
/// (dense row-major, `src`'s extents); a constructed one must have `src`'s extents.
/// For foreign memory, which must outlive an asynchronous operation (a
/// lifetime no borrow can state); Rust data goes through the safe
/// [`crate::copy_from_slice`] and [`crate::copy_from_array`].
///
/// # Safety
/// Every element `src` addresses at `ptr` must stay readable, and unmodified,
/// until the operation completes (its event, callback or completion entry).
///
/// ```
/// use tensorasync::{ops, DType, Domain, Layout, Order, Submit, Tensor};
/// let host = [1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]; // a 2 x 3 column-major matrix
/// let dst = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
/// let layout = Layout::contiguous(&[2, 3], Order::ColMajor);
/// // SAFETY: `host` outlives the operation, which the wait below completes.
/// let ev = unsafe { ops::copy_in(&dst, host.as_ptr().cast(), layout, Submit::default()) };
/// ev.unwrap().wait(None).unwrap();
/// assert_eq!(dst.to_vec::<f64>().unwrap(), vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);
/// ```
pub unsafe fn copy_in<C: Completion>(
    dst: &Tensor,
    ptr: *const u8,
    src: Layout,
    opts: Submit<'_, C>,
) -> Result<C::Output> {
    const ORIGIN: &str = "copy_in";
    check_host_buffer(ptr, &src, dst, ORIGIN)?;
    let candidates = registry::select(OpTag::CopyIn, dst.dtype(), dst.domain(), opts.selector, ORIGIN)?;
    let extents = src.extents.clone();
    let dtype = dst.dtype();
    let domain = dst.domain();
    let body =
        Body::Native { op: KernelOp::CopyIn(Box::new(HostBuffer { ptr: ptr as *mut u8, layout: src })), candidates };
    submit(ORIGIN, ORIGIN, &[(dst, Mode::Write)], body, opts, |l| {
        match l.layout(0) {
            None => l.construct(0, Value::alloc_contents(dtype, &extents, Order::RowMajor, domain, ORIGIN)?),
            Some(have) if have.extents != extents => {
                return Err(Error::new(
                    Status::ShapeMismatch,
                    ORIGIN,
                    format!("tensor has shape {:?}, host data has shape {:?}", have.extents, extents),
                ))
            }
            Some(_) => {}
        }
        Ok(())
    })
}

/// Copy `src` out to host memory: `ptr` is where element `[0, 0, ...]` goes,
/// `strides` place the others (`None`: dense row-major in `src`'s extents),
/// and `capacity` bounds the footprint: the elements from the lowest to the
/// highest address written (which lie below `ptr` for negative strides).
/// For foreign memory, as [`copy_in`]; Rust callers use the safe
/// [`Tensor::copy_to_slice`] or [`Tensor::to_array`].
///
/// # Safety
/// `ptr` must stay writable for `capacity` elements, and untouched by the
/// caller, until the operation completes.
///
/// ```
/// use tensorasync::{ops, Order, Submit, Tensor};
/// let src = Tensor::from_slice(&[2, 2], Order::RowMajor, &[1i64, 2, 3, 4]).unwrap();
/// let mut host = [0i64; 4];
/// // SAFETY: `host` has room for 4 elements and outlives the operation, which the wait completes.
/// let ev = unsafe { ops::copy_out(&src, host.as_mut_ptr().cast(), 4, Some(&[1, 2]), Submit::default()) };
/// ev.unwrap().wait(None).unwrap();
/// assert_eq!(host, [1, 3, 2, 4]); // column-major
/// ```
pub unsafe fn copy_out<C: Completion>(
    src: &Tensor,
    ptr: *mut u8,
    capacity: usize,
    strides: Option<&[isize]>,
    opts: Submit<'_, C>,
) -> Result<C::Output> {
    const ORIGIN: &str = "copy_out";
    let Some(extents) = src.extents() else {
        return Err(Error::new(Status::Unconstructed, ORIGIN, "the source tensor is unconstructed"));
    };
    let layout = match strides {
        None => Layout::contiguous(&extents, Order::RowMajor),
        Some(s) => Layout::strided(&extents, s, 0, ORIGIN)?,
    };
    if layout.footprint().is_none_or(|n| n > capacity) {
        return Err(Error::new(
            Status::BufferTooSmall,
            ORIGIN,
            format!(
                "a buffer of {capacity} elements cannot hold shape {:?} with strides {:?}",
                extents, layout.strides
            ),
        ));
    }
    if !layout.is_non_overlapping() {
        return Err(Error::new(Status::InvalidArgument, ORIGIN, "destination strides make elements overlap"));
    }
    check_host_buffer(ptr, &layout, src, ORIGIN)?;
    let candidates = registry::select(OpTag::CopyOut, src.dtype(), src.domain(), opts.selector, ORIGIN)?;
    let body = Body::Native { op: KernelOp::CopyOut(Box::new(HostBuffer { ptr, layout })), candidates };
    submit(ORIGIN, ORIGIN, &[(src, Mode::Read)], body, opts, |l| {
        if l.layout(0).is_some_and(|have| have.extents != extents) {
            return Err(Error::new(Status::ShapeMismatch, ORIGIN, "the source changed shape during submission"));
        }
        Ok(())
    })
}

fn check_host_buffer(ptr: *const u8, l: &Layout, t: &Tensor, origin: &'static str) -> Result<()> {
    if ptr.is_null() {
        return Err(Error::new(Status::NullPointer, origin, "host pointer is NULL"));
    }
    if (ptr as usize) % t.dtype().align() != 0 {
        return Err(Error::new(
            Status::InvalidArgument,
            origin,
            format!("host pointer is not aligned for {}", t.dtype().name()),
        ));
    }
    // Element offsets must stay representable as byte offsets from `ptr`;
    // negative strides (memory below `ptr`) are the caller's to provide.
    host_bytes_fit(l, t.dtype(), origin)
}

/// Refuse a host layout whose byte offsets from its pointer do not fit
/// `isize` (see [`Layout::checked_byte_span`]).
pub(crate) fn host_bytes_fit(l: &Layout, dtype: DType, origin: &'static str) -> Result<()> {
    if l.is_empty() || l.checked_byte_span(dtype.size()).is_some() {
        Ok(())
    } else {
        Err(Error::new(Status::InvalidArgument, origin, "host layout offsets overflow"))
    }
}
