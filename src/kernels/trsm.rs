//! `trsm`: triangular solve with many right-hand sides, on one tile (f32,
//! f64, c64, c128).
//!
//! Triangles are *logical*: "lower" means `i >= j` in the operand's own
//! index space, whatever its strides. Only the named triangle of a
//! triangular or Hermitian operand is read, and only the named triangle of
//! an output is written: the other strict triangle may hold anything (even
//! NaN) and is left untouched, as in LAPACK and BLAS. Strided operands of
//! any layout, conj flags on inputs, checks before anything is written, and
//! faer for the arithmetic, parallel as [`super::par::par_for`] decides.

use faer::linalg::triangular_solve as ts;

use super::check::{check_dtypes, check_output, dims, shape_err, two_d};
use super::faer_mat::{conj_of, mat_mut, mat_ref, transpose};
use super::float::{scalar, with_float, Float};
use super::mat2::{scale_mat, Mat2};
use super::operand::Operand;
use super::par::{par_for, work};
use crate::dtype::Scalar;
use crate::error::Result;

/// Validate a [`trsm`] call: dtypes, shapes (A square, matching B's rows for
/// `left`, its columns otherwise), a writable B, a scalar of the dtype.
pub(crate) fn trsm_check(b: &Operand<'_>, a: &Operand<'_>, left: bool, alpha: Scalar) -> Result<()> {
    const O: &str = "trsm";
    let dt = check_dtypes(O, &[("B", b.dtype), ("A", a.dtype)])?;
    two_d(O, "A", a)?;
    two_d(O, "B", b)?;
    let (side, want) = if left { ("row", b.extents[0]) } else { ("column", b.extents[1]) };
    if a.extents[0] != a.extents[1] || a.extents[0] != want {
        return Err(shape_err(
            O,
            format!(
                "A is {}, B is {}: A must be square and match B's {side} extent ({want}x{want}) for a {} solve",
                dims(a.extents),
                dims(b.extents),
                if left { "left" } else { "right" }
            ),
        ));
    }
    check_output(O, "B", b)?;
    alpha.check_for(dt, O)
}

/// Triangular solve with many right-hand sides: `op(A)·X = alpha·B`
/// (`left`) or `X·op(A) = alpha·B` (`!left`); `X` overwrites `B`. `op(A)` is
/// `A` as given: its strides may make it a transposed view, and its conj
/// flag conjugates it. `lower` says which triangle of that logical matrix is
/// `A` (so a transposed view of a stored lower `L` is `!lower`); the other
/// strict triangle is not read. `unit_diag`: the diagonal is taken as ones and
/// not read. `alpha == 0`: `B` becomes zero and `A` is not read. As in BLAS,
/// a singular `A` is not detected: a zero diagonal element gives infinities
/// or NaNs in `X`.
///
/// Errors: `DtypeMismatch`, `Unsupported`, `ShapeMismatch` (naming both
/// shapes), `ReadOnly` (B is a conj view), `InvalidArgument` (B addresses an
/// element twice; a complex alpha for a real dtype), before anything is
/// written.
///
/// Parallelism as [`super::gemm`] (the cost is m·n·k/2 multiply-adds, k the
/// order of A).
///
/// # Safety
/// See the module's safety contract ([`super`]).
pub(crate) unsafe fn trsm(
    b: &Operand<'_>,
    a: &Operand<'_>,
    left: bool,
    lower: bool,
    unit_diag: bool,
    alpha: Scalar,
) -> Result<()> {
    trsm_check(b, a, left, alpha)?;
    with_float!(b.dtype, T => {
        let (bm, am) = (Mat2::<T>::from_operand(b), Mat2::<T>::from_operand(a));
        unsafe { trsm_mat(bm, am, left, lower, unit_diag, scalar::<T>(alpha)) };
        Ok(())
    }, unreachable!("trsm_check admits float dtypes only"))
}

/// [`trsm`] on typed matrices whose shapes agree.
///
/// # Safety
/// As for [`trsm`]; `b` does not address any element twice.
pub(crate) unsafe fn trsm_mat<T: Float>(b: Mat2<T>, a: Mat2<T>, left: bool, lower: bool, unit_diag: bool, alpha: T) {
    // X·A = B is A^T·X^T = B^T: transpose both and swap the triangle.
    let (b, a, lower) = if left { (b, a, lower) } else { (transpose(b), transpose(a), !lower) };
    let (m, n) = (b.rows, b.cols);
    if m == 0 || n == 0 {
        return;
    }
    if alpha == T::zero() {
        unsafe { scale_mat(b, None) };
        return;
    }
    if alpha != scalar::<T>(Scalar::real(1.0)) {
        unsafe { scale_mat(b, Some(alpha)) };
    }
    let par = par_for(work::<T>(m, m, n) / 2);
    let conj = conj_of(a.conj);
    // SAFETY: the caller's contract (B exclusive and self-disjoint, A
    // readable and disjoint from B). faer reads only the named triangle.
    unsafe {
        let (am, bm) = (mat_ref::<T>(a), mat_mut::<T>(b));
        match (lower, unit_diag) {
            (true, false) => ts::solve_lower_triangular_in_place_with_conj(am, conj, bm, par),
            (true, true) => ts::solve_unit_lower_triangular_in_place_with_conj(am, conj, bm, par),
            (false, false) => ts::solve_upper_triangular_in_place_with_conj(am, conj, bm, par),
            (false, true) => ts::solve_unit_upper_triangular_in_place_with_conj(am, conj, bm, par),
        }
    }
}
