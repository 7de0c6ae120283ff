//! `potrf`: in-place Cholesky factorisation of one tile (f32, f64, c64,
//! c128), a tile kernel of a tiled Cholesky with `trsm`, `syrk` and `gemm`.
//!
//! Triangles are *logical*: "lower" means `i >= j` in the operand's own
//! index space, whatever its strides. Only the named triangle of a
//! triangular or Hermitian operand is read, and only the named triangle of
//! an output is written: the other strict triangle may hold anything (even
//! NaN) and is left untouched, as in LAPACK and BLAS. Strided operands of
//! any layout, conj flags on inputs, checks before anything is written, and
//! faer for the arithmetic, parallel as [`super::par::par_for`] decides.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{cholesky_in_place, cholesky_in_place_scratch, LltError, LltParams};
use faer::linalg::matmul::triangular::{matmul_with_conj as tri_matmul, BlockStructure};
use faer::linalg::triangular_solve as ts;
use faer::reborrow::{Reborrow, ReborrowMut};
use faer::{Accum, Conj, MatMut, Par, Spec};

use super::check::{arg_err, check_dtypes, check_output, dims, shape_err, two_d};
use super::faer_mat::{mat_mut, transpose, ToF64};
use super::float::{scalar, with_float, Float};
use super::mat2::Mat2;
use super::operand::Operand;
use super::par::{par_for, work};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result, Status};

/// Diagonal blocks of at most this order are factored by faer's unblocked
/// (SIMD) kernel in a contiguous column-major temporary; larger matrices are
/// split recursively (right-looking: factor a block column, solve the panel
/// below it, update the trailing matrix), as faer does itself. faer's own
/// kernel on the caller's memory would also overwrite parts of the strict
/// upper triangle near the diagonal (it works on column-major row batches),
/// which LAPACK's contract (and a tiled factorisation) forbids.
const LEAF: usize = 64;
/// Largest block column of the recursion (faer's default).
const BLOCK: usize = 128;

/// An error of [`potrf`], and whether the matrix had been modified when it
/// was found.
#[derive(Clone, Debug)]
pub(crate) struct FactorError {
    pub error: Error,
    /// `false`: nothing was written (argument errors, an allocation failure,
    /// or a failing pivot inside the first diagonal block of the recursion,
    /// i.e. a leading minor of order <= [`LEAF`] = 64, whatever n). `true`:
    /// the input triangle holds a partial factorisation (see [`potrf`]).
    pub written: bool,
}

impl From<FactorError> for Error {
    /// The error, its message saying what the matrix holds now (as LAPACK's
    /// `info` would let a caller work out).
    fn from(e: FactorError) -> Error {
        let held = if e.written {
            "the columns before the failing pivot hold the partial factor"
        } else {
            "the matrix is unchanged"
        };
        let err = &e.error;
        err.with_message(format!("{}; {held}", err.message()))
    }
}

/// Validate a [`potrf`] call: a float dtype, a square 2-d matrix, writable.
pub(crate) fn potrf_check(a: &Operand<'_>) -> Result<()> {
    const O: &str = "potrf";
    check_dtypes(O, &[("A", a.dtype)])?;
    two_d(O, "A", a)?;
    if a.extents[0] != a.extents[1] {
        return Err(shape_err(O, format!("A is {}: it must be square", dims(a.extents))));
    }
    check_output(O, "A", a)
}

/// In-place Cholesky factorisation of the Hermitian positive definite matrix
/// `A` (symmetric for real dtypes), reading one triangle only. `lower`:
/// `A = L·L^H`, and `L` (diagonal included) overwrites the lower triangle;
/// `!lower`: `A = U^H·U`, `U` overwrites the upper triangle. The other strict
/// triangle is neither read nor written. The diagonal's imaginary parts
/// (complex dtypes) are not read, and the factor's diagonal is real and
/// positive.
///
/// Errors (all `FactorError::written == false` unless said otherwise):
/// `DtypeMismatch`/`Unsupported` (not a float dtype), `ShapeMismatch` (not
/// square, not 2-d; naming the shape), `ReadOnly` (a conj view),
/// `InvalidArgument` (A addresses an element twice), `OutOfMemory`.
/// A matrix that is not positive definite (or holds a NaN or an infinity in
/// the triangle read) fails with `InvalidArgument`, "the leading minor of
/// order k is not positive definite (pivot p)" (origin "potrf"), where k
/// (1-based, as LAPACK's `info`) is the first failing pivot and p the value
/// of the failing Schur-complement diagonal element. Like LAPACK, the
/// factorisation may then have overwritten part of the triangle: the block
/// columns factored before the failing diagonal block (of at most 64
/// columns) hold the factor's columns, the trailing triangle a partially
/// updated Schur complement; the failing diagonal block itself is not
/// written. [`FactorError::written`] says whether anything was written: it is
/// `false` when k <= 64 (the first diagonal block, whatever n), where the
/// triangle is untouched.
///
/// Parallelism as [`super::gemm`] (the cost is n³/6 multiply-adds).
///
/// # Safety
/// See the module's safety contract ([`super`]).
pub(crate) unsafe fn potrf(a: &Operand<'_>, lower: bool) -> Result<(), FactorError> {
    potrf_check(a).map_err(|error| FactorError { error, written: false })?;
    with_float!(a.dtype, T => {
        let m = Mat2::<T>::from_operand(a);
        unsafe { potrf_mat(m, lower) }
    }, unreachable!("potrf_check admits float dtypes only"))
}

/// Scratch of the diagonal-block kernel, allocated once per call.
struct Leaf<T> {
    buf: Vec<T>,
    stack: MemBuffer,
    /// The failing pivot's value, once one failed (at the dtype's precision).
    pivot: String,
}

/// [`potrf`] on a typed square matrix.
///
/// # Safety
/// As for [`potrf`]; `a` does not address any element twice.
pub(crate) unsafe fn potrf_mat<T: Float>(a: Mat2<T>, lower: bool) -> Result<(), FactorError> {
    const O: &str = "potrf";
    let n = a.rows;
    if n == 0 {
        return Ok(());
    }
    // The upper case is the lower one of the transpose: if A = U^H·U then
    // conj(A) = A^T = L·L^H with L = U^T, whose lower triangle is U's upper
    // one in the same memory. (faer reads the lower triangle only.)
    let a = if lower { a } else { transpose(a) };
    let oom = |what: &str| FactorError {
        error: Error::new(Status::OutOfMemory, O, format!("cannot allocate the {what} for A ({})", dims(&[n, n]))),
        written: false,
    };
    let ln = n.min(LEAF);
    let mut buf = Vec::new();
    buf.try_reserve_exact(ln * ln).map_err(|_| oom("temporary"))?;
    buf.resize(ln * ln, T::zero());
    let req = cholesky_in_place_scratch::<T>(ln, Par::Seq, Spec::<LltParams, T>::default());
    let stack = MemBuffer::try_new(req).map_err(|_| oom("scratch"))?;
    let mut leaf = Leaf { buf, stack, pivot: String::new() };
    let par = par_for(work::<T>(n, n, n) / 6);
    let mut written = false;
    // SAFETY: the caller's contract; `a` is self-disjoint and exclusive.
    let am = unsafe { mat_mut(a) };
    match chol_lower(am, &mut leaf, &mut written, par) {
        Ok(()) => Ok(()),
        Err(k) => Err(FactorError {
            error: arg_err(
                O,
                format!("the leading minor of order {} is not positive definite (pivot {})", k + 1, leaf.pivot),
            ),
            written,
        }),
    }
}

/// Factor the lower triangle of `a` in place; `Err(k)`: pivot `k` (0-based)
/// failed. `written` becomes true once anything in `a` has been written.
fn chol_lower<T: Float>(mut a: MatMut<'_, T>, leaf: &mut Leaf<T>, written: &mut bool, par: Par) -> Result<(), usize> {
    let n = a.nrows();
    if n <= LEAF {
        return chol_leaf(a, leaf, written);
    }
    let bs = (n.next_power_of_two() / 2).min(BLOCK);
    let mut j = 0;
    while j < n {
        let b = bs.min(n - j);
        let (mut a00, _, mut a10, a11) = a.rb_mut().get_mut(j.., j..).split_at_mut(b, b);
        chol_lower(a00.rb_mut(), leaf, written, par).map_err(|k| k + j)?;
        // A10 <- A10·L00^{-H}, i.e. conj(L00)·A10^T = A10^T.
        ts::solve_lower_triangular_in_place_with_conj(a00.rb(), Conj::Yes, a10.rb_mut().transpose_mut(), par);
        // A11 <- A11 - A10·A10^H (lower triangle).
        let neg_one = -scalar::<T>(Scalar::real(1.0));
        tri_matmul(
            a11,
            BlockStructure::TriangularLower,
            Accum::Add,
            a10.rb(),
            BlockStructure::Rectangular,
            Conj::No,
            a10.rb().transpose(),
            BlockStructure::Rectangular,
            Conj::Yes,
            neg_one,
            par,
        );
        j += b;
    }
    Ok(())
}

/// Factor a small diagonal block: copy its lower triangle into a contiguous
/// column-major temporary, factor it there with faer's kernel, and copy the
/// lower triangle back only on success (so a failure here leaves `a`
/// untouched).
fn chol_leaf<T: Float>(mut a: MatMut<'_, T>, leaf: &mut Leaf<T>, written: &mut bool) -> Result<(), usize> {
    let n = a.nrows();
    let buf = &mut leaf.buf[..n * n];
    for j in 0..n {
        for i in j..n {
            buf[i + j * n] = a[(i, j)];
        }
    }
    let mut t = MatMut::from_column_major_slice_mut(buf, n, n);
    let r = cholesky_in_place(
        t.rb_mut(),
        Default::default(),
        Par::Seq,
        MemStack::new(&mut leaf.stack),
        Spec::<LltParams, T>::default(),
    );
    match r {
        Ok(_) => {
            for j in 0..n {
                // A real diagonal (the kernel scales the whole column, so a
                // stray imaginary part of the input diagonal would survive).
                a[(j, j)] = scalar::<T>(Scalar::real(t[(j, j)].re_part().to_f64_()));
                for i in j + 1..n {
                    a[(i, j)] = t[(i, j)];
                }
            }
            *written = true;
            Ok(())
        }
        Err(LltError::NonPositivePivot { index }) => {
            // faer leaves the updated (failing) diagonal value in place.
            let p = t[(index, index)].re_part().to_f64_();
            leaf.pivot = match T::DTYPE {
                DType::F32 | DType::C64 => format!("{}", p as f32),
                _ => format!("{p}"),
            };
            Err(index)
        }
    }
}
