//! Element-wise operations: fill, scale, axpy.

use super::submit::{submit, Locked, Submit};
use super::Body;
use crate::dispatch::{self, KernelOp, OpTag};
use crate::dtype::{Imm, Scalar};
use crate::error::{Error, Result, Status};
use crate::handle::Tensor;
use crate::queue::Mode;
use crate::runtime::Event;

/// Reject operands whose dtype or domain differ from the first one's.
pub(crate) fn same_dtype_and_domain(origin: &'static str, ts: &[&Tensor]) -> Result<()> {
    let first = ts[0];
    for t in &ts[1..] {
        if t.dtype() != first.dtype() {
            return Err(Error::new(
                Status::DtypeMismatch,
                origin,
                format!("dtypes differ: {} and {}", first.dtype().name(), t.dtype().name()),
            ));
        }
        if t.domain() != first.domain() {
            return Err(Error::new(
                Status::DomainMismatch,
                origin,
                format!("domains differ: {} and {}", first.domain(), t.domain()),
            ));
        }
    }
    Ok(())
}

/// Reject operands `a` and `b` whose submission-time extents differ.
pub(crate) fn same_extents(origin: &'static str, l: &Locked<'_>, a: usize, b: usize) -> Result<()> {
    let ea = l.layout(a).map(|x| x.extents.clone());
    match (ea, l.layout(b)) {
        (Some(ea), Some(lb)) if ea != lb.extents => {
            Err(Error::new(Status::ShapeMismatch, origin, format!("shapes {:?} and {:?} differ", ea, lb.extents)))
        }
        _ => Ok(()),
    }
}

/// Set every element of `t` to `value` (an overwrite: clears a poison).
pub fn fill(t: &Tensor, value: impl Into<Imm>, opts: Submit<'_>) -> Result<Option<Event>> {
    const ORIGIN: &str = "fill";
    let value = value.into();
    value.check_for(t.dtype(), ORIGIN)?;
    let candidates = dispatch::select(OpTag::Fill, t.dtype(), t.domain(), opts.selector, ORIGIN)?;
    let body = Body::Native { op: KernelOp::Fill(value), candidates };
    submit(ORIGIN, ORIGIN, &[(t, Mode::Write)], body, opts, |_| Ok(()))
}

/// `x = alpha * x` (an update: a poisoned `x` stays poisoned).
pub fn scale(x: &Tensor, alpha: impl Into<Imm>, opts: Submit<'_>) -> Result<Option<Event>> {
    const ORIGIN: &str = "scale";
    let alpha = alpha.into();
    alpha.check_for(x.dtype(), ORIGIN)?;
    let candidates = dispatch::select(OpTag::Scale, x.dtype(), x.domain(), opts.selector, ORIGIN)?;
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
    let candidates = dispatch::select(OpTag::Axpy, y.dtype(), y.domain(), opts.selector, ORIGIN)?;
    let body = Body::Native { op: KernelOp::Axpy(alpha), candidates };
    submit(ORIGIN, ORIGIN, &[(y, Mode::Update), (x, Mode::Read)], body, opts, |l| same_extents(ORIGIN, l, 0, 1))
}
