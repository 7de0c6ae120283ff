//! Conversions between tensors and `ndarray` arrays or Rust slices: safe
//! forms of the raw-pointer copies, for memory Rust owns.

use ndarray::{ArrayBase, ArrayD, Data, Dimension};

use crate::dtype::Element;
use crate::error::{Error, Result, Status};
use crate::layout::{Layout, Order};
use crate::ops::{self, Completion, Submit};
use crate::tensor::handle::Tensor;

impl Tensor {
    /// A host tensor holding a copy of `a` (any layout: strides of any sign,
    /// broadcast axes included), stored densely row-major. The copy is made
    /// before this returns.
    ///
    /// ```
    /// use ndarray::{array, s};
    /// use tensorasync::Tensor;
    /// let a = array![[1.0f64, 2.0, 3.0], [4.0, 5.0, 6.0]];
    /// let t = Tensor::from_array(&a.slice(s![.., ..;-1])).unwrap();
    /// assert_eq!(t.to_array::<f64>().unwrap(), array![[3.0, 2.0, 1.0], [6.0, 5.0, 4.0]].into_dyn());
    /// ```
    pub fn from_array<T: Element, S: Data<Elem = T>, D: Dimension>(a: &ArrayBase<S, D>) -> Result<Tensor> {
        let strides: Vec<isize> = a.strides().to_vec();
        let layout = Layout::strided(a.shape(), &strides, 0, "tensor_from_array")?;
        // SAFETY: `a` is a live array: every element its shape and strides
        // address from `as_ptr` is readable for the duration of the call.
        unsafe { Tensor::from_host(T::DTYPE, &layout, a.as_ptr().cast(), Order::RowMajor) }
    }

    /// A copy of the elements as an owned array (row-major), once every
    /// operation submitted on this tensor before has run; a conj view's
    /// elements conjugated. Blocks the calling thread.
    ///
    /// ```
    /// use tensorasync::{Order, Tensor};
    /// let t = Tensor::from_slice(&[2, 2], Order::ColMajor, &[1i32, 2, 3, 4]).unwrap();
    /// assert_eq!(t.to_array::<i32>().unwrap(), ndarray::array![[1, 3], [2, 4]].into_dyn());
    /// ```
    pub fn to_array<T: Element>(&self) -> Result<ArrayD<T>> {
        Ok(self.read_blocking::<T>()?.view().to_owned())
    }

    /// The elements in row-major order (see [`Tensor::to_array`]).
    ///
    /// ```
    /// use tensorasync::{Order, Tensor};
    /// let t = Tensor::from_slice(&[2, 2], Order::ColMajor, &[1u8, 2, 3, 4]).unwrap();
    /// assert_eq!(t.to_vec::<u8>().unwrap(), vec![1, 3, 2, 4]);
    /// ```
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        Ok(self.read_blocking::<T>()?.view().iter().copied().collect())
    }

    /// Copy the elements, row-major, into `out`, which must hold exactly as
    /// many; blocks the calling thread (the safe form of [`ops::copy_out`]).
    ///
    /// ```
    /// use tensorasync::{Order, Tensor};
    /// let t = Tensor::from_slice(&[3], Order::RowMajor, &[1.0f32, 2.0, 3.0]).unwrap();
    /// let mut out = [0.0f32; 3];
    /// t.copy_to_slice(&mut out).unwrap();
    /// assert_eq!(out, [1.0, 2.0, 3.0]);
    /// ```
    pub fn copy_to_slice<T: Element>(&self, out: &mut [T]) -> Result<()> {
        let g = self.read_blocking::<T>()?;
        let v = g.view();
        if v.len() != out.len() {
            return Err(Error::new(
                Status::BufferTooSmall,
                "tensor_copy_to_slice",
                format!("the tensor has {} elements, the slice {}", v.len(), out.len()),
            ));
        }
        for (o, x) in out.iter_mut().zip(v.iter()) {
            *o = *x;
        }
        Ok(())
    }
}

/// Overwrite `dst` with `data`, read as the dense row-major array of
/// `extents` (the safe form of [`ops::copy_in`]): `data` is copied before this
/// returns, and the copy into `dst` is ordered like any other write. An
/// unconstructed `dst` is constructed with `extents`.
///
/// ```
/// use tensorasync::{copy_from_slice, DType, Submit, Tensor};
/// let t = Tensor::unconstructed(DType::I32, Default::default()).unwrap();
/// copy_from_slice(&t, &[2], &[8i32, 9], Submit::default()).unwrap();
/// assert_eq!(t.to_vec::<i32>().unwrap(), vec![8, 9]);
/// ```
pub fn copy_from_slice<T: Element, C: Completion>(
    dst: &Tensor,
    extents: &[usize],
    data: &[T],
    opts: Submit<'_, C>,
) -> Result<C::Output> {
    let src = Tensor::from_slice(extents, Order::RowMajor, data).map_err(|e| e.with_origin("copy_from_slice"))?;
    ops::copy(dst, &src, opts)
}

/// Overwrite `dst` with a copy of `a` (any layout); see [`copy_from_slice`].
///
/// ```
/// use tensorasync::{copy_from_array, DType, Order, Submit, Tensor};
/// let t = Tensor::zeros(DType::F64, &[2], Order::RowMajor, Default::default()).unwrap();
/// copy_from_array(&t, &ndarray::arr1(&[1.0, -1.0]), Submit::default()).unwrap();
/// assert_eq!(t.to_vec::<f64>().unwrap(), vec![1.0, -1.0]);
/// ```
pub fn copy_from_array<T: Element, S: Data<Elem = T>, D: Dimension, C: Completion>(
    dst: &Tensor,
    a: &ArrayBase<S, D>,
    opts: Submit<'_, C>,
) -> Result<C::Output> {
    ops::copy(dst, &Tensor::from_array(a)?, opts)
}
