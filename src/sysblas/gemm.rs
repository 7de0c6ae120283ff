//! gemm through the loaded system BLAS library, with the native kernel's
//! semantics.
//!
//! BLAS is column-major. Row-major operands are handled by the transpose
//! identity `C^T = B^T A^T`; transposed views become `'T'`, conjugated
//! transposed views `'C'`. A layout BLAS cannot take is *declined* (before
//! anything is written), so the dispatcher's walk goes on to the next backend:
//! no stride of 1 in an operand, a negative stride, a leading dimension too
//! small, a conj flag on an operand that BLAS would have to read
//! untransposed, an extent beyond 32-bit integers, or a non-float dtype.

use std::ffi::{c_char, c_int, c_void};

use super::library::{blas, Blas};
use crate::dtype::{Element, Scalar};
use crate::error::Error;
use crate::kernels::blas_plan::plan;
use crate::kernels::float::with_float;
use crate::kernels::gemm::gemm_check;
use crate::kernels::mat2::Mat2;
use crate::kernels::operand::Operand;

/// `C = alpha·op(A)·op(B) [+ beta·C]` through the process's BLAS, with the
/// semantics of [`crate::kernels::gemm::gemm`]. `Err(reason)`: declined, nothing was
/// written. `Ok(result)`: it ran (`Ok(Err(e))` for a shape or dtype error,
/// the same errors the native kernel reports).
///
/// # Safety
/// As for [`crate::kernels::gemm::gemm`].
pub(crate) unsafe fn gemm_blas(
    c: &Operand<'_>,
    alpha: Scalar,
    a: &Operand<'_>,
    b: &Operand<'_>,
    beta: Option<Scalar>,
) -> Result<Result<(), Error>, String> {
    let lib = blas().map_err(|e| format!("no system BLAS ({e})"))?;
    unsafe { gemm_blas_with(lib, c, alpha, a, b, beta) }
}

/// [`gemm_blas`] with an explicit library.
///
/// # Safety
/// As for [`crate::kernels::gemm::gemm`].
pub(crate) unsafe fn gemm_blas_with(
    lib: &Blas,
    c: &Operand<'_>,
    alpha: Scalar,
    a: &Operand<'_>,
    b: &Operand<'_>,
    beta: Option<Scalar>,
) -> Result<Result<(), Error>, String> {
    let idx = match c.dtype {
        crate::dtype::DType::F32 => 0,
        crate::dtype::DType::F64 => 1,
        crate::dtype::DType::C64 => 2,
        crate::dtype::DType::C128 => 3,
        d => return Err(format!("BLAS has no {} gemm", d.name())),
    };
    if let Err(e) = gemm_check("gemm", c, a, b) {
        return Ok(Err(e));
    }
    let Some(f) = lib.gemm[idx] else {
        return Err(format!("{} has no {}gemm_", lib.path, ["s", "d", "c", "z"][idx]));
    };
    let (cm, am, bm) = (Mat2::<u8>::from_operand(c), Mat2::<u8>::from_operand(a), Mat2::<u8>::from_operand(b));
    let (m, n, k) = (cm.rows, cm.cols, am.cols);
    if m == 0 || n == 0 {
        return Ok(Ok(()));
    }
    if [m, n, k].iter().any(|&d| d > c_int::MAX as usize) {
        return Err(format!("extents {m}x{n}x{k} exceed BLAS's 32-bit integers"));
    }
    let p = plan(&cm, &am, &bm)?;
    let (bm_, bn, pa, pb) = if p.swap { (n, m, bm.ptr, am.ptr) } else { (m, n, am.ptr, bm.ptr) };
    let (bm_, bn, bk) = (bm_ as c_int, bn as c_int, k as c_int);
    with_float!(c.dtype, T => {
        let alpha: T = T::from_scalar(alpha);
        let beta: T = beta.map(T::from_scalar).unwrap_or(T::zero());
        let (ta, tb) = (p.ta as c_char, p.tb as c_char);
        // SAFETY: the plan checked every leading dimension against the
        // extents, so BLAS reads and writes exactly the operands' elements,
        // which are valid by the caller's contract; C is exclusively accessed.
        unsafe {
            f(
                &ta, &tb, &bm_, &bn, &bk,
                (&alpha as *const T).cast(), pa as *const c_void, &p.lda,
                pb as *const c_void, &p.ldb,
                (&beta as *const T).cast(), cm.ptr as *mut c_void, &p.ldc,
                1, 1,
            )
        };
        Ok(Ok(()))
    }, unreachable!("dtype checked above"))
}
