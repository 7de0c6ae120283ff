//! Checks of operands shared by several operations.

use super::submit::Locked;
use crate::error::{Error, Result, Status};
use crate::tensor::handle::Tensor;

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
