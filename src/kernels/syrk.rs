//! `syrk`: Hermitian (symmetric for real dtypes) rank-k update of one
//! triangle of a tile (f32, f64, c64, c128; `herk` in BLAS terms for the
//! complex dtypes).
//!
//! Triangles are *logical*: "lower" means `i >= j` in the operand's own
//! index space, whatever its strides. Only the named triangle of a
//! triangular or Hermitian operand is read, and only the named triangle of
//! an output is written: the other strict triangle may hold anything (even
//! NaN) and is left untouched, as in LAPACK and BLAS. Strided operands of
//! any layout, conj flags on inputs, checks before anything is written, and
//! faer for the arithmetic, parallel as [`super::par::par_for`] decides.

use faer::linalg::matmul::triangular::{matmul_with_conj as tri_matmul, BlockStructure};
use faer::Accum;

use super::check::{arg_err, check_dtypes, check_output, dims, shape_err, two_d};
use super::faer_mat::{conj_of, mat_mut, mat_ref, ToF64};
use super::float::{scalar, with_float, Float};
use super::gemm::gemm_mat;
use super::mat2::Mat2;
use super::operand::Operand;
use super::par::{par_for, work};
use crate::dtype::Scalar;
use crate::error::Result;

/// Validate a [`syrk`] call: dtypes, shapes (C square with A's row count),
/// a writable C, and real scalars.
pub(crate) fn syrk_check(c: &Operand<'_>, a: &Operand<'_>, alpha: Scalar, beta: Option<Scalar>) -> Result<()> {
    const O: &str = "syrk";
    let dt = check_dtypes(O, &[("C", c.dtype), ("A", a.dtype)])?;
    two_d(O, "C", c)?;
    two_d(O, "A", a)?;
    if c.extents[0] != c.extents[1] || c.extents[0] != a.extents[0] {
        let n = a.extents[0];
        return Err(shape_err(
            O,
            format!(
                "C is {}, A is {}: C must be square with A's row extent ({n}x{n})",
                dims(c.extents),
                dims(a.extents)
            ),
        ));
    }
    check_output(O, "C", c)?;
    for (name, s) in [("alpha", Some(alpha)), ("beta", beta)] {
        let Some(s) = s else { continue };
        if s.im != 0.0 {
            let why = if dt.is_complex() {
                "must be real (C = alpha·A·A^H + beta·C is Hermitian only for real alpha and beta)"
            } else {
                "must be real for a real dtype"
            };
            return Err(arg_err(O, format!("{name} = {}{:+}i {why}", s.re, s.im)));
        }
    }
    Ok(())
}

/// Hermitian (symmetric for real dtypes) rank-k update of one triangle:
/// `C = alpha·op(A)·op(A)^H + beta·C`, where `op(A)` is A as given (n x k,
/// conj flag honoured) and only the lower (`lower`) or upper triangle of C,
/// diagonal included, is read and written; the other strict triangle is
/// untouched. `beta == None` or `0`: C's old values are not read.
/// `alpha == 0` or `k == 0`: A is not read. Complex dtypes: as in BLAS
/// `?herk`, the imaginary parts of C's diagonal are not read and are zero on
/// return (except in the no-op case `alpha == 0` or `k == 0` with
/// `beta == 1`, which leaves C untouched).
///
/// Errors: `DtypeMismatch`, `Unsupported`, `ShapeMismatch` (naming both
/// shapes), `ReadOnly` (C is a conj view), `InvalidArgument` (C addresses an
/// element twice; alpha or beta not real), before anything is written.
///
/// Parallelism as [`super::gemm`] (the cost is n·n·k/2 multiply-adds).
///
/// # Safety
/// See the module's safety contract ([`super`]).
pub(crate) unsafe fn syrk(
    c: &Operand<'_>,
    a: &Operand<'_>,
    alpha: Scalar,
    beta: Option<Scalar>,
    lower: bool,
) -> Result<()> {
    syrk_check(c, a, alpha, beta)?;
    with_float!(c.dtype, T => {
        let (cm, am) = (Mat2::<T>::from_operand(c), Mat2::<T>::from_operand(a));
        unsafe { syrk_mat(cm, am, alpha.re, beta.map(|b| b.re), lower) };
        Ok(())
    }, unreachable!("syrk_check admits float dtypes only"))
}

/// [`syrk`] on typed matrices whose shapes agree, with real scalars.
///
/// # Safety
/// As for [`syrk`]; `c` does not address any element twice.
pub(crate) unsafe fn syrk_mat<T: Float>(c: Mat2<T>, a: Mat2<T>, alpha: f64, beta: Option<f64>, lower: bool) {
    let (n, k) = (a.rows, a.cols);
    if n == 0 {
        return;
    }
    let beta = beta.filter(|&b| b != 0.0);
    let complex = T::DTYPE.is_complex();
    if k == 0 || alpha == 0.0 {
        if beta != Some(1.0) {
            unsafe { scale_tri(c, lower, beta.map(|b| scalar::<T>(Scalar::real(b)))) };
            if complex {
                unsafe { real_diag(c) };
            }
        }
        return;
    }
    if n > SYRK_LEAF {
        unsafe { syrk_split(c, a, alpha, beta, lower) };
        return;
    }
    let accum = match beta {
        None => Accum::Replace,
        Some(1.0) => Accum::Add,
        Some(b) => {
            unsafe { scale_tri(c, lower, Some(scalar::<T>(Scalar::real(b)))) };
            Accum::Add
        }
    };
    let structure = if lower { BlockStructure::TriangularLower } else { BlockStructure::TriangularUpper };
    let par = par_for(work::<T>(n, n, k) / 2);
    // faer's triangular product may store whole blocks that straddle the
    // diagonal on some instruction sets (its non-AVX-512 kernels write parts
    // of the other strict triangle): keep that triangle and put it back.
    // SAFETY: inside C by the caller's contract, exclusively accessed.
    let other = unsafe { save_other_triangle(c, lower) };
    // SAFETY: the caller's contract (C exclusive and self-disjoint, A
    // readable and disjoint from C); what faer writes outside C's triangle
    // is restored below.
    unsafe {
        let (cm, am) = (mat_mut::<T>(c), mat_ref::<T>(a));
        tri_matmul(
            cm,
            structure,
            accum,
            am,
            BlockStructure::Rectangular,
            conj_of(a.conj),
            am.transpose(),
            BlockStructure::Rectangular,
            conj_of(!a.conj),
            scalar::<T>(Scalar::real(alpha)),
            par,
        );
        restore_other_triangle(c, lower, &other);
        if complex {
            real_diag(c);
        }
    }
}

/// Orders above this split in two ([`syrk_split`]).
const SYRK_LEAF: usize = 16;

/// [`syrk_mat`] of order above [`SYRK_LEAF`] as two diagonal blocks and one
/// GEMM: with `A = [A1; A2]`, `C11 = A1·A1^H`, `C22 = A2·A2^H` (recursively)
/// and the off-diagonal block `C21 = A2·A1^H` (or `C12 = A1·A2^H` for the
/// upper triangle). faer's triangular product ran at half its GEMM's speed on
/// 256-tiles (docs/perf-notes/kernels.md); this puts most of the flops in
/// its GEMM, and saving the other triangle (see below) stays small.
///
/// # Safety
/// As for [`syrk_mat`]; `beta` is not `Some(0.0)`, and `k > 0`.
unsafe fn syrk_split<T: Float>(c: Mat2<T>, a: Mat2<T>, alpha: f64, beta: Option<f64>, lower: bool) {
    let n = a.rows;
    let n1 = (n / 2).next_multiple_of(8).min(n - 1);
    let rows =
        |m: Mat2<T>, lo: usize, hi: usize| Mat2 { ptr: m.ptr.wrapping_offset(lo as isize * m.rs), rows: hi - lo, ..m };
    let cols =
        |m: Mat2<T>, lo: usize, hi: usize| Mat2 { ptr: m.ptr.wrapping_offset(lo as isize * m.cs), cols: hi - lo, ..m };
    let (a1, a2) = (rows(a, 0, n1), rows(a, n1, n));
    // op(X)^H: the transpose with the conj flag toggled.
    let herm = |x: Mat2<T>| Mat2 { conj: !x.conj, ..x.transpose() };
    let (to, bt) = (scalar::<T>(Scalar::real(alpha)), beta.map(|b| scalar::<T>(Scalar::real(b))));
    // SAFETY: the blocks are disjoint parts of C (the caller's contract
    // covers each), and A's row blocks are parts of A.
    unsafe {
        syrk_mat(cols(rows(c, 0, n1), 0, n1), a1, alpha, beta, lower);
        let par = par_for(work::<T>(n - n1, n1, a.cols));
        if lower {
            gemm_mat(cols(rows(c, n1, n), 0, n1), to, a2, herm(a1), bt, par);
        } else {
            gemm_mat(cols(rows(c, 0, n1), n1, n), to, a1, herm(a2), bt, par);
        }
        syrk_mat(cols(rows(c, n1, n), n1, n), a2, alpha, beta, lower);
    }
}

/// The offsets of C's strict triangle opposite `lower`'s (row `i` < column
/// `j` for `lower`), in a fixed order.
fn other_triangle<T>(c: Mat2<T>, lower: bool) -> impl Iterator<Item = isize> {
    let n = c.rows as isize;
    (0..n)
        .flat_map(move |i| (0..n).filter(move |&j| if lower { i < j } else { i > j }).map(move |j| i * c.rs + j * c.cs))
}

/// A copy of the strict triangle of square `c` that an update of the
/// `lower` (or upper) triangle must leave untouched.
///
/// # Safety
/// `c` addresses readable elements.
unsafe fn save_other_triangle<T: Float>(c: Mat2<T>, lower: bool) -> Vec<T> {
    // SAFETY: inside C by the caller's contract.
    other_triangle(c, lower).map(|o| unsafe { *c.ptr.offset(o) }).collect()
}

/// Put back what [`save_other_triangle`] kept.
///
/// # Safety
/// `c` addresses writable, exclusively accessed elements.
unsafe fn restore_other_triangle<T: Float>(c: Mat2<T>, lower: bool, saved: &[T]) {
    for (o, v) in other_triangle(c, lower).zip(saved) {
        // SAFETY: inside C by the caller's contract.
        unsafe { *c.ptr.offset(o) = *v };
    }
}

/// `C = beta·C` (`None`: zero, not read) on one triangle, diagonal included.
///
/// # Safety
/// `c` is square and addresses writable, exclusively accessed elements.
unsafe fn scale_tri<T: Float>(c: Mat2<T>, lower: bool, beta: Option<T>) {
    let n = c.rows as isize;
    // Element (i, j) of the triangle, visited with the unit-stride index
    // innermost where there is one.
    let row_inner = c.rs.unsigned_abs() <= c.cs.unsigned_abs();
    for o in 0..n {
        // Outer index o; inner range over the triangle.
        let (lo, hi) = match (row_inner, lower) {
            (true, true) => (o, n),      // column o, rows o..n
            (true, false) => (0, o + 1), // column o, rows 0..=o
            (false, true) => (0, o + 1), // row o, columns 0..=o
            (false, false) => (o, n),    // row o, columns o..n
        };
        let (base, step) = if row_inner { (o * c.cs, c.rs) } else { (o * c.rs, c.cs) };
        for x in lo..hi {
            // SAFETY: inside C by the caller's contract.
            unsafe {
                let p = c.ptr.offset(base + x * step);
                *p = match beta {
                    Some(b) => b * *p,
                    None => T::zero(),
                };
            }
        }
    }
}

/// Zero the imaginary parts of a square matrix's diagonal.
///
/// # Safety
/// As for [`scale_tri`].
unsafe fn real_diag<T: Float>(c: Mat2<T>) {
    for i in 0..c.rows as isize {
        // SAFETY: inside C.
        unsafe {
            let p = c.ptr.offset(i * (c.rs + c.cs));
            *p = scalar::<T>(Scalar::real((*p).re_part().to_f64_()));
        }
    }
}
