//! The kernels' operand: a strided view of typed elements, as the kernels
//! see a resolved view (or any strided host memory).

use crate::dtype::DType;
use crate::resolved::ResolvedView;

/// A strided operand: the kernels' view of a [`ResolvedView`] (or of any
/// strided host memory).
#[derive(Copy, Clone, Debug)]
pub(crate) struct Operand<'a> {
    /// Address of element `[0, 0, ...]`.
    pub ptr: *mut u8,
    pub dtype: DType,
    pub extents: &'a [usize],
    /// Strides in elements (possibly negative or zero).
    pub strides: &'a [isize],
    /// Read conjugated (complex dtypes only; ignored for real dtypes). An
    /// output operand must not be conjugated.
    pub conj: bool,
}

impl<'a> From<&'a ResolvedView<'a>> for Operand<'a> {
    fn from(v: &'a ResolvedView<'a>) -> Operand<'a> {
        Operand {
            ptr: v.ptr,
            dtype: v.dtype,
            extents: v.extents,
            strides: v.strides,
            conj: v.conj && v.dtype.is_complex(),
        }
    }
}

impl<'a> Operand<'a> {
    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        self.extents.iter().product()
    }

    /// Whether reads must conjugate.
    pub(crate) fn conjugated(&self) -> bool {
        self.conj && self.dtype.is_complex()
    }
}
