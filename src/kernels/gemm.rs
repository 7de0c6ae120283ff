//! GEMM through faer (a direct loop for tiny products), with the checks the
//! other backends share.

use faer::linalg::matmul::matmul_with_conj;
use faer::{Accum, Conj, MatMut, MatRef, Par};

use super::check::{check_dtypes, check_output, check_rank, dims, gemm_shape, shape_err};
use super::float::{scalar, with_float, Float};
use super::mat2::{scale_mat, Mat2};
use super::operand::Operand;
use super::par::{par_for, work};
use crate::dtype::Scalar;
use crate::error::Result;

/// Real products with at most this many multiply-adds (`m*n*k`) use a
/// direct triple loop instead of faer, whose fixed dispatch cost dominates
/// such tiny products (crossovers measured by benches/gemm.rs; see
/// docs/perf-notes/kernels.md).
pub(crate) const SMALL_MAX_FLOPS: usize = 4 * 4 * 4;

/// The same for complex products, whose loop is slower than faer's at 4x4.
pub(crate) const SMALL_MAX_FLOPS_COMPLEX: usize = 3 * 3 * 3;

/// `C = alpha*op(A)*op(B) [+ beta*C]` on typed matrices whose shapes agree.
/// `beta == None` or `beta == 0`: C is overwritten and never read (BLAS
/// convention). `alpha == 0` or `k == 0`: A and B are not read.
///
/// # Safety
/// As for [`gemm`]; `c` must also not address any element twice.
pub(crate) unsafe fn gemm_mat<T: Float>(c: Mat2<T>, alpha: T, a: Mat2<T>, b: Mat2<T>, beta: Option<T>, par: Par) {
    let (m, n, k) = (c.rows, c.cols, a.cols);
    debug_assert!(a.rows == m && b.rows == k && b.cols == n);
    if m == 0 || n == 0 {
        return;
    }
    let beta = beta.filter(|b| *b != T::zero());
    if k == 0 || alpha == T::zero() {
        if beta != Some(T::one_()) {
            unsafe { scale_mat(c, beta) };
        }
        return;
    }
    let small_max = if T::DTYPE.is_complex() { SMALL_MAX_FLOPS_COMPLEX } else { SMALL_MAX_FLOPS };
    if m.saturating_mul(n).saturating_mul(k) <= small_max {
        match (a.conj, b.conj) {
            (false, false) => unsafe { gemm_small::<T, false, false>(c, alpha, a, b, beta) },
            (true, false) => unsafe { gemm_small::<T, true, false>(c, alpha, a, b, beta) },
            (false, true) => unsafe { gemm_small::<T, false, true>(c, alpha, a, b, beta) },
            (true, true) => unsafe { gemm_small::<T, true, true>(c, alpha, a, b, beta) },
        }
        return;
    }
    let accum = match beta {
        None => Accum::Replace,
        Some(b) if b == T::one_() => Accum::Add,
        Some(b) => {
            unsafe { scale_mat(c, Some(b)) };
            Accum::Add
        }
    };
    let (mut c, mut a, mut b) = (c.normalize_trivial(), a.normalize_trivial(), b.normalize_trivial());
    // Positive output strides (flip the matching input axes with them), and a
    // positive stride along k for A (the product does not depend on k's order).
    if c.rs < 0 {
        c = c.flip_rows();
        a = a.flip_rows();
    }
    if c.cs < 0 {
        c = c.flip_cols();
        b = b.flip_cols();
    }
    if a.cs < 0 || (a.cs == 0 && b.rs < 0) {
        a = a.flip_cols();
        b = b.flip_rows();
    }
    let conj = |x: bool| if x { Conj::Yes } else { Conj::No };
    // SAFETY: the caller guarantees the elements are valid, C is exclusively
    // accessed and self-disjoint, and inputs do not overlap C; m, n, k > 0, so
    // every pointer addresses a real element of its operand.
    unsafe {
        let cm = MatMut::<T>::from_raw_parts_mut(c.ptr, m, n, c.rs, c.cs);
        let am = MatRef::<T>::from_raw_parts(a.ptr, m, k, a.rs, a.cs);
        let bm = MatRef::<T>::from_raw_parts(b.ptr, k, n, b.rs, b.cs);
        product(cm, accum, am, conj(a.conj), bm, conj(b.conj), alpha, par);
    }
}

/// faer's product, where a parallel one runs as blocks of C, one sequential
/// product per thread, joined on the caller's pool: at n = 2048 on 2 threads
/// that ran at 1.3x faer's own parallel product (docs/perf-notes/kernels.md).
#[allow(clippy::too_many_arguments)]
fn product<T: Float>(
    c: MatMut<'_, T>,
    accum: Accum,
    a: MatRef<'_, T>,
    conj_a: Conj,
    b: MatRef<'_, T>,
    conj_b: Conj,
    alpha: T,
    par: Par,
) {
    let threads = match par {
        Par::Rayon(n) => n.get(),
        Par::Seq => 1,
    };
    let (m, n) = (c.nrows(), c.ncols());
    if threads < 2 || m.max(n) < 16 {
        matmul_with_conj(c, accum, a, conj_a, b, conj_b, alpha, Par::Seq);
        return;
    }
    // Split the axis along which C is contiguous (its rows for column-major
    // C): measured faster than the other one on both orders. Blocks have at
    // least 8 rows or columns (a micro-kernel's height). Splitting C's
    // columns is splitting the rows of C^T = B^T·A^T.
    let contiguous_rows = c.row_stride().unsigned_abs() <= c.col_stride().unsigned_abs();
    let split_rows = if contiguous_rows { m >= 16 } else { n < 16 };
    if !split_rows {
        product(c.transpose_mut(), accum, b.transpose(), conj_b, a.transpose(), conj_a, alpha, par);
        return;
    }
    let left = threads / 2;
    let par_of = |t: usize| if t < 2 { Par::Seq } else { Par::rayon(t) };
    let mid = (m * left / threads).next_multiple_of(8).min(m - 1);
    let (c0, c1) = c.split_at_row_mut(mid);
    let (a0, a1) = a.split_at_row(mid);
    rayon::join(
        || product(c0, accum, a0, conj_a, b, conj_b, alpha, par_of(left)),
        || product(c1, accum, a1, conj_a, b, conj_b, alpha, par_of(threads - left)),
    );
}

/// `C = alpha*op(A)*op(B) [+ beta*C]` by a direct triple loop (tiny products).
///
/// # Safety
/// As for [`gemm_mat`].
pub(crate) unsafe fn gemm_small<T: Float, const CA: bool, const CB: bool>(
    c: Mat2<T>,
    alpha: T,
    a: Mat2<T>,
    b: Mat2<T>,
    beta: Option<T>,
) {
    // Where C's rows are contiguous and B's too, each row of C combines B's
    // rows; where C's columns are contiguous and A's too, the same holds for
    // the transposes (C^T = B^T A^T). Both sum in the loop's order below.
    // SAFETY (both calls): the caller's contract, and the unit strides tested.
    let done = if c.cs == 1 && b.cs == 1 {
        unsafe { by_rows::<T, CA, CB>(c, alpha, a, b, beta) }
    } else if c.rs == 1 && a.rs == 1 {
        unsafe { by_rows::<T, CB, CA>(c.transpose(), alpha, b.transpose(), a.transpose(), beta) }
    } else {
        false
    };
    if done {
        return;
    }
    for i in 0..c.rows as isize {
        let arow = a.ptr.wrapping_offset(i * a.rs);
        for j in 0..c.cols as isize {
            let bcol = b.ptr.wrapping_offset(j * b.cs);
            let mut s = T::zero();
            for l in 0..a.cols as isize {
                // SAFETY: inside A and B by the caller's contract.
                unsafe { s += conj_if(*arow.offset(l * a.cs), CA) * conj_if(*bcol.offset(l * b.rs), CB) };
            }
            // SAFETY: inside C, exclusively accessed.
            unsafe {
                let p = c.ptr.offset(i * c.rs + j * c.cs);
                *p = update(*p, alpha, s, beta);
            }
        }
    }
}

/// [`gemm_small`] for C and B with unit column strides and C at most 4
/// columns wide (false, and nothing done, when wider): each row of C is a
/// combination of B's rows, its columns summed side by side in registers
/// (docs/perf-notes/kernels.md, "Tiny products").
///
/// # Safety
/// As for [`gemm_mat`], with `c.cs == 1` and `b.cs == 1`.
#[inline(always)]
unsafe fn by_rows<T: Float, const CA: bool, const CB: bool>(
    c: Mat2<T>,
    alpha: T,
    a: Mat2<T>,
    b: Mat2<T>,
    beta: Option<T>,
) -> bool {
    // SAFETY (each arm): as for this function.
    unsafe {
        match c.cols {
            1 => rows_of::<T, CA, CB, 1>(c, alpha, a, b, beta),
            2 => rows_of::<T, CA, CB, 2>(c, alpha, a, b, beta),
            3 => rows_of::<T, CA, CB, 3>(c, alpha, a, b, beta),
            4 => rows_of::<T, CA, CB, 4>(c, alpha, a, b, beta),
            _ => return false,
        }
    }
    true
}

/// [`by_rows`] for C exactly `N` columns wide.
///
/// # Safety
/// As for [`by_rows`], with `c.cols == N`.
#[inline(always)]
unsafe fn rows_of<T: Float, const CA: bool, const CB: bool, const N: usize>(
    c: Mat2<T>,
    alpha: T,
    a: Mat2<T>,
    b: Mat2<T>,
    beta: Option<T>,
) {
    for i in 0..c.rows as isize {
        let arow = a.ptr.wrapping_offset(i * a.rs);
        let mut acc = [T::zero(); N];
        for l in 0..a.cols as isize {
            // SAFETY: inside A and B by the caller's contract; B's row `l`
            // is N contiguous elements (unit column stride, N columns).
            let (x, brow) = unsafe { (conj_if(*arow.offset(l * a.cs), CA), &*b.ptr.offset(l * b.rs).cast::<[T; N]>()) };
            for (s, y) in acc.iter_mut().zip(brow) {
                *s += x * conj_if(*y, CB);
            }
        }
        // SAFETY: C's row `i` is N contiguous elements, exclusively accessed.
        let crow = unsafe { &mut *c.ptr.offset(i * c.rs).cast::<[T; N]>() };
        for (p, s) in crow.iter_mut().zip(acc) {
            *p = update(*p, alpha, s, beta);
        }
    }
}

/// `x`, conjugated when `conj` is set.
#[inline(always)]
fn conj_if<T: Float>(x: T, conj: bool) -> T {
    if conj {
        x.conj()
    } else {
        x
    }
}

/// A direct product's new element of C: `alpha*s`, plus `beta*c` when
/// C is read (`beta` set).
#[inline(always)]
fn update<T: Float>(c: T, alpha: T, s: T, beta: Option<T>) -> T {
    match beta {
        None => alpha * s,
        Some(bt) => alpha * s + bt * c,
    }
}

/// One, for any float type.
trait One {
    fn one_() -> Self;
}
impl<T: Float> One for T {
    fn one_() -> T {
        T::from_scalar(Scalar::real(1.0))
    }
}

/// Validate a GEMM call: dtypes, shapes, and a writable, self-disjoint C.
pub(crate) fn gemm_check(origin: &'static str, c: &Operand<'_>, a: &Operand<'_>, b: &Operand<'_>) -> Result<()> {
    // Fast path for the common, valid call (a few ns); the full checks below
    // produce the error messages.
    let two = |x: &Operand<'_>| x.extents.len() == 2 && x.strides.len() == 2;
    if c.dtype == a.dtype
        && a.dtype == b.dtype
        && c.dtype.is_float()
        && two(a)
        && two(b)
        && two(c)
        && a.extents[1] == b.extents[0]
        && c.extents[0] == a.extents[0]
        && c.extents[1] == b.extents[1]
        && !c.conjugated()
        && non_overlapping_2d(c.extents, c.strides)
    {
        return Ok(());
    }
    check_dtypes(origin, &[("C", c.dtype), ("A", a.dtype), ("B", b.dtype)])?;
    check_rank(origin, "A", a)?;
    check_rank(origin, "B", b)?;
    check_rank(origin, "C", c)?;
    let want = gemm_shape(a.extents, b.extents)?;
    if c.extents != want {
        return Err(shape_err(
            origin,
            format!(
                "C is {}, A is {}, B is {}: C must be {}",
                dims(c.extents),
                dims(a.extents),
                dims(b.extents),
                dims(&want)
            ),
        ));
    }
    check_output(origin, "C", c)
}

/// `C = alpha·op(A)·op(B)` (`beta == None`: C is overwritten and never read)
/// or `C = alpha·op(A)·op(B) + beta·C`, where `op` conjugates an operand whose
/// `conj` flag is set. Operands are 2-d with any strides: a transposed view is
/// just swapped strides, negative and zero input strides are fine. As in BLAS,
/// `beta == 0` does not read C, and `alpha == 0` (or an inner extent of 0)
/// does not read A or B.
///
/// Parallelism: see [`par_for`]: faer's rayon backend on the caller's rayon
/// pool for products of at least [`PAR_MIN_FLOPS`] multiply-adds, sequential
/// otherwise.
///
/// Errors: `DtypeMismatch` (operands differ), `Unsupported` (not a float
/// dtype), `ShapeMismatch` (naming the shapes), `ReadOnly` (C is a conj view),
/// `InvalidArgument` (C addresses an element twice), before anything is written.
///
/// # Safety
/// See the module's safety contract.
pub(crate) unsafe fn gemm(
    c: &Operand<'_>,
    alpha: Scalar,
    a: &Operand<'_>,
    b: &Operand<'_>,
    beta: Option<Scalar>,
) -> Result<()> {
    gemm_check("gemm", c, a, b)?;
    with_float!(c.dtype, T => {
        let (cm, am, bm) = (Mat2::<T>::from_operand(c), Mat2::<T>::from_operand(a), Mat2::<T>::from_operand(b));
        let par = par_for(work::<T>(cm.rows, cm.cols, am.cols));
        unsafe { gemm_mat(cm, scalar::<T>(alpha), am, bm, beta.map(scalar::<T>), par) };
        Ok(())
    }, unreachable!("gemm_check admits float dtypes only"))
}

/// [`crate::layout::non_overlapping`] for a 2-d layout, without sorting or allocating.
fn non_overlapping_2d(e: &[usize], s: &[isize]) -> bool {
    let (e0, e1) = (e[0], e[1]);
    if e0 == 0 || e1 == 0 {
        return true;
    }
    let (s0, s1) = (s[0].unsigned_abs(), s[1].unsigned_abs());
    match (e0 > 1, e1 > 1) {
        (false, false) => true,
        (true, false) => s0 != 0,
        (false, true) => s1 != 0,
        (true, true) => {
            let ((si, ei), so) = if s0 <= s1 { ((s0, e0), s1) } else { ((s1, e1), s0) };
            si != 0 && si.checked_mul(ei - 1).is_some_and(|r| so > r)
        }
    }
}
