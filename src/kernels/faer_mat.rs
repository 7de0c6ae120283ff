//! faer views of the kernels' typed matrices ([`Mat2`]), shared by the
//! factorisation kernels.

use faer::{Conj, MatMut, MatRef};

use super::float::{Float, RealFloat};
use super::mat2::Mat2;

pub(crate) fn transpose<T>(m: Mat2<T>) -> Mat2<T> {
    Mat2 { rows: m.cols, cols: m.rows, rs: m.cs, cs: m.rs, ..m }
}

pub(crate) fn conj_of(c: bool) -> Conj {
    if c {
        Conj::Yes
    } else {
        Conj::No
    }
}

/// A faer view of a typed matrix.
///
/// # Safety
/// The elements are valid for reads for the lifetime chosen by the caller.
pub(crate) unsafe fn mat_ref<'a, T: Float>(m: Mat2<T>) -> MatRef<'a, T> {
    unsafe { MatRef::from_raw_parts(m.ptr as *const T, m.rows, m.cols, m.rs, m.cs) }
}

/// # Safety
/// The elements are valid for reads and writes and exclusively accessed, and
/// no two indices address the same element.
pub(crate) unsafe fn mat_mut<'a, T: Float>(m: Mat2<T>) -> MatMut<'a, T> {
    unsafe { MatMut::from_raw_parts_mut(m.ptr, m.rows, m.cols, m.rs, m.cs) }
}

/// `f64` of a real part, for messages and scalar conversion.
pub(crate) trait ToF64 {
    fn to_f64_(self) -> f64;
}
impl<R: RealFloat> ToF64 for R {
    fn to_f64_(self) -> f64 {
        self.to_f64()
    }
}
