//! Element-wise operations: fill, scale, axpy.

use super::checks::{same_dtype_and_domain, same_extents};
use super::submit::{submit, Submit};
use super::Body;
use crate::backends::registry;
use crate::dispatch::{KernelOp, OpTag};
use crate::dtype::{Imm, Scalar};
use crate::error::Result;
use crate::queue::Mode;
use crate::runtime::Event;
use crate::tensor::handle::Tensor;

/// Set every element of `t` to `value` (an overwrite: clears a poison).
pub fn fill(t: &Tensor, value: impl Into<Imm>, opts: Submit<'_>) -> Result<Option<Event>> {
    const ORIGIN: &str = "fill";
    let value = value.into();
    value.check_for(t.dtype(), ORIGIN)?;
    let candidates = registry::select(OpTag::Fill, t.dtype(), t.domain(), opts.selector, ORIGIN)?;
    let body = Body::Native { op: KernelOp::Fill(value), candidates };
    submit(ORIGIN, ORIGIN, &[(t, Mode::Write)], body, opts, |_| Ok(()))
}

/// `x = alpha * x` (an update: a poisoned `x` stays poisoned).
pub fn scale(x: &Tensor, alpha: impl Into<Imm>, opts: Submit<'_>) -> Result<Option<Event>> {
    const ORIGIN: &str = "scale";
    let alpha = alpha.into();
    alpha.check_for(x.dtype(), ORIGIN)?;
    let candidates = registry::select(OpTag::Scale, x.dtype(), x.domain(), opts.selector, ORIGIN)?;
    let body = Body::Native { op: KernelOp::Scale(alpha), candidates };
    submit(ORIGIN, ORIGIN, &[(x, Mode::Update)], body, opts, |_| Ok(()))
}

/// `y = alpha * x + y`.
pub fn axpy(y: &Tensor, alpha: Scalar, x: &Tensor, opts: Submit<'_>) -> Result<Option<Event>> {
    const ORIGIN: &str = "axpy";
    let staged = super::transfer::inputs_in(ORIGIN, y.domain(), &[x], &opts)?;
    let x = &staged[0];
    same_dtype_and_domain(ORIGIN, &[y, x])?;
    alpha.check_for(y.dtype(), ORIGIN)?;
    let candidates = registry::select(OpTag::Axpy, y.dtype(), y.domain(), opts.selector, ORIGIN)?;
    let body = Body::Native { op: KernelOp::Axpy(alpha), candidates };
    submit(ORIGIN, ORIGIN, &[(y, Mode::Update), (x, Mode::Read)], body, opts, |l| same_extents(ORIGIN, l, 0, 1))
}
