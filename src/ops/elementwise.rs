//! Element-wise operations: fill, scale, axpy.

use super::checks::{same_dtype_and_domain, same_extents};
use super::submit::{submit, Completion, Submit};
use super::Body;
use crate::backends::registry;
use crate::dispatch::{KernelOp, OpTag};
use crate::dtype::{Imm, Scalar};
use crate::error::Result;
use crate::queue::Mode;
use crate::tensor::handle::Tensor;

/// Set every element of `t` to `value` (an overwrite: clears a poison).
///
/// ```
/// use tensorasync::{ops, DType, Imm, Order, Submit, Tensor};
/// let t = Tensor::zeros(DType::I32, &[3], Order::RowMajor, Default::default()).unwrap();
/// ops::fill(&t, Imm::int(7), Submit::default()).unwrap();
/// assert_eq!(t.to_vec::<i32>().unwrap(), vec![7, 7, 7]);
/// ```
pub fn fill<C: Completion>(t: &Tensor, value: impl Into<Imm>, opts: Submit<'_, C>) -> Result<C::Output> {
    let value = value.into();
    let origin = value.origin_for("fill", "fill_i64", "fill_u64");
    value.check_for(t.dtype(), origin)?;
    let candidates = registry::select(OpTag::Fill, t.dtype(), t.domain(), opts.selector, origin)?;
    let body = Body::Native { op: KernelOp::Fill(value), candidates };
    submit(origin, origin, &[(t, Mode::Write)], body, opts, |_| Ok(()))
}

/// `x = alpha * x` (an update: a poisoned `x` stays poisoned).
///
/// ```
/// use tensorasync::{ops, Order, Scalar, Submit, Tensor};
/// let x = Tensor::from_slice(&[3], Order::RowMajor, &[1.0f32, -2.0, 3.5]).unwrap();
/// ops::scale(&x, Scalar::real(2.0), Submit::default()).unwrap();
/// assert_eq!(x.to_vec::<f32>().unwrap(), vec![2.0, -4.0, 7.0]);
/// ```
pub fn scale<C: Completion>(x: &Tensor, alpha: impl Into<Imm>, opts: Submit<'_, C>) -> Result<C::Output> {
    let alpha = alpha.into();
    let origin = alpha.origin_for("scale", "scale_i64", "scale_u64");
    alpha.check_for(x.dtype(), origin)?;
    let candidates = registry::select(OpTag::Scale, x.dtype(), x.domain(), opts.selector, origin)?;
    let body = Body::Native { op: KernelOp::Scale(alpha), candidates };
    submit(origin, origin, &[(x, Mode::Update)], body, opts, |_| Ok(()))
}

/// `y = alpha * x + y`.
///
/// ```
/// use tensorasync::{ops, Order, Scalar, Submit, Tensor};
/// let x = Tensor::from_slice(&[3], Order::RowMajor, &[1.0f64, 2.0, 3.0]).unwrap();
/// let y = Tensor::from_slice(&[3], Order::RowMajor, &[10.0f64, 20.0, 30.0]).unwrap();
/// ops::axpy(&y, Scalar::real(2.0), &x, Submit::default()).unwrap();
/// assert_eq!(y.to_vec::<f64>().unwrap(), vec![12.0, 24.0, 36.0]);
/// ```
pub fn axpy<C: Completion>(y: &Tensor, alpha: Scalar, x: &Tensor, opts: Submit<'_, C>) -> Result<C::Output> {
    const ORIGIN: &str = "axpy";
    let [x] = super::transfer::inputs_in(ORIGIN, y.domain(), [x], &opts)?;
    let x = &*x;
    same_dtype_and_domain(ORIGIN, &[y, x])?;
    alpha.check_for(y.dtype(), ORIGIN)?;
    let candidates = registry::select(OpTag::Axpy, y.dtype(), y.domain(), opts.selector, ORIGIN)?;
    let body = Body::Native { op: KernelOp::Axpy(alpha), candidates };
    submit(ORIGIN, ORIGIN, &[(y, Mode::Update), (x, Mode::Read)], body, opts, |l| same_extents(ORIGIN, l, 0, 1))
}
