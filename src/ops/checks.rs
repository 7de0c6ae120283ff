//! Checks of operands shared by several operations.

use super::submit::Locked;
use crate::error::{Error, Result, Status};
use crate::tensor::handle::Tensor;

/// Reject operands whose dtype or domain differ from the first one's.
#[inline]
pub(crate) fn same_dtype_and_domain(origin: &'static str, ts: &[&Tensor]) -> Result<()> {
    // The stored codes, compared without decoding them.
    let codes = ts[0].root().codes();
    if ts[1..].iter().all(|t| t.root().codes() == codes) {
        return Ok(());
    }
    dtype_or_domain_differs(origin, ts)
}

#[cold]
fn dtype_or_domain_differs(origin: &'static str, ts: &[&Tensor]) -> Result<()> {
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
#[inline]
pub(crate) fn same_extents(origin: &'static str, l: &Locked<'_>, a: usize, b: usize) -> Result<()> {
    match (l.layout(a), l.layout(b)) {
        (Some(la), Some(lb)) if !same(&la.extents, &lb.extents) => Err(Error::new(
            Status::ShapeMismatch,
            origin,
            format!("shapes {:?} and {:?} differ", la.extents, lb.extents),
        )),
        _ => Ok(()),
    }
}

/// Whether two extents are equal, element by element: a rank or two, where
/// the slices' comparison calls `memcmp`, about 40 instructions a call.
#[inline(always)]
fn same(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}
