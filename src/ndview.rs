//! Typed `ndarray` views over a tensor's elements (what host access and Rust
//! kernels hand out): element strides of any sign, the dtype checked against
//! the Rust type, and mutable views only where no two indices share an element.

use std::ptr::NonNull;

use ndarray::{ArrayViewD, ArrayViewMutD, Axis, IxDyn, ShapeBuilder};
use smallvec::SmallVec;

use crate::dtype::{DType, Element};
use crate::error::{Error, Result, Status};
use crate::layout::non_overlapping;

/// `DtypeMismatch` unless `T` is the Rust type of `dtype`.
pub(crate) fn check_dtype<T: Element>(dtype: DType, origin: &'static str) -> Result<()> {
    if T::DTYPE == dtype {
        return Ok(());
    }
    Err(Error::new(
        Status::DtypeMismatch,
        origin,
        format!("the tensor holds {}, the view asks for {}", dtype.name(), T::DTYPE.name()),
    ))
}

/// `InvalidArgument` if two indices of `extents`/`strides` address one
/// element (zero or overlapping strides): a mutable view of them would alias.
pub(crate) fn check_unaliased(extents: &[usize], strides: &[isize], origin: &'static str) -> Result<()> {
    if non_overlapping(extents, strides) {
        return Ok(());
    }
    Err(Error::new(
        Status::InvalidArgument,
        origin,
        format!("strides {strides:?} make elements overlap: a mutable view of them would alias"),
    ))
}

/// Axis lists, inline up to rank 4 (no allocation in a kernel's common case).
type Axes = SmallVec<[usize; 4]>;

/// The lowest-address element and the strides made non-negative, with the
/// axes whose strides were negative (ndarray builds views from non-negative
/// strides; the axes are inverted afterwards).
fn normalise<T>(ptr: *mut u8, extents: &[usize], strides: &[isize]) -> (*mut T, Axes, Axes) {
    if extents.contains(&0) {
        // No element is addressed: any aligned non-null pointer will do.
        return (NonNull::<T>::dangling().as_ptr(), extents.iter().map(|_| 0).collect(), Axes::new());
    }
    let mut low = ptr.cast::<T>();
    let mut flipped = Axes::new();
    let abs = strides
        .iter()
        .zip(extents)
        .enumerate()
        .map(|(i, (&s, &e))| {
            if s < 0 {
                // SAFETY: the element at index e-1 of this axis is one the
                // view addresses, so the offset stays inside its allocation.
                low = unsafe { low.offset(s * (e as isize - 1)) };
                flipped.push(i);
            }
            s.unsigned_abs()
        })
        .collect();
    (low, abs, flipped)
}

/// A read view of `extents`/`strides` (in elements, any sign) at `ptr`.
///
/// # Safety
/// Every element addressed must be a valid, initialised `T` that nothing
/// writes for `'a`.
pub(crate) unsafe fn view<'a, T>(ptr: *mut u8, extents: &[usize], strides: &[isize]) -> ArrayViewD<'a, T> {
    let (low, abs, flipped) = normalise::<T>(ptr, extents, strides);
    // SAFETY: by the caller; `low` is the lowest addressed element, so every
    // element is at a non-negative offset from it.
    let mut v = unsafe { ArrayViewD::from_shape_ptr(IxDyn(extents).strides(IxDyn(&abs)), low) };
    for i in flipped {
        v.invert_axis(Axis(i));
    }
    v
}

/// A mutable view; `InvalidArgument` if two indices share an element.
///
/// # Safety
/// Every element addressed must be a valid `T` that nothing else reads or
/// writes for `'a`.
pub(crate) unsafe fn view_mut<'a, T>(
    ptr: *mut u8,
    extents: &[usize],
    strides: &[isize],
    origin: &'static str,
) -> Result<ArrayViewMutD<'a, T>> {
    check_unaliased(extents, strides, origin)?;
    let (low, abs, flipped) = normalise::<T>(ptr, extents, strides);
    // SAFETY: by the caller, and no two indices alias (checked above).
    let mut v = unsafe { ArrayViewMutD::from_shape_ptr(IxDyn(extents).strides(IxDyn(&abs)), low) };
    for i in flipped {
        v.invert_axis(Axis(i));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_and_zero_strides() {
        let mut data = [0.0f64, 1.0, 2.0, 3.0, 4.0, 5.0];
        let p = data.as_mut_ptr().cast::<u8>();
        // A 2x3 row-major matrix with both axes reversed: [0,0] is element 5.
        let last = unsafe { p.add(5 * 8) };
        let v = unsafe { view::<f64>(last, &[2, 3], &[-3, -1]) };
        assert_eq!(v.iter().copied().collect::<Vec<_>>(), vec![5.0, 4.0, 3.0, 2.0, 1.0, 0.0]);
        assert_eq!(v[[1, 0]], 2.0);
        let b = unsafe { view::<f64>(p, &[2, 3], &[0, 1]) };
        assert_eq!(b[[1, 2]], 2.0);
        let e = unsafe { view_mut::<f64>(p, &[2, 3], &[0, 1], "t") }.unwrap_err();
        assert_eq!(e.status(), Status::InvalidArgument);
        assert!(e.message().contains("overlap"), "{}", e.message());
        let mut m = unsafe { view_mut::<f64>(last, &[6], &[-1], "t") }.unwrap();
        m[[0]] = 50.0;
        m[[5]] = -1.0;
        assert_eq!(data[5], 50.0);
        assert_eq!(data[0], -1.0);
        let z = unsafe { view::<f64>(std::ptr::null_mut(), &[0, 3], &[3, 1]) };
        assert_eq!(z.len(), 0);
    }

    #[test]
    fn dtype_checked() {
        assert!(check_dtype::<f64>(DType::F64, "t").is_ok());
        let e = check_dtype::<f32>(DType::F64, "t").unwrap_err();
        assert_eq!(e.status(), Status::DtypeMismatch);
        assert!(e.message().contains("f64") && e.message().contains("f32"), "{}", e.message());
    }
}
