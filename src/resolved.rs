//! The resolved view: what a kernel sees of a tensor operand while its task
//! runs (pointer, layout, dtype, domain, access mode).

use crate::domain::Domain;
use crate::dtype::DType;
use crate::queue::Mode;

/// A view materialised inside a running task: valid only while the task's
/// access lasts (SPEC §2, "resolved view").
#[derive(Debug)]
pub struct ResolvedView<'a> {
    /// Address of element `[0, 0, ...]`.
    pub ptr: *mut u8,
    pub dtype: DType,
    pub extents: &'a [usize],
    /// Strides in elements (may be negative or zero).
    pub strides: &'a [isize],
    pub mode: Mode,
    pub domain: Domain,
    /// Whether reads must conjugate (complex dtypes only).
    pub conj: bool,
}
