//! Reference (plain-loop) BLAS for simulated devices, and the byte extents
//! of the operands commands touch.

use num_complex::{Complex32, Complex64};

use super::faults::{fault, Fault, UNKNOWN};
use crate::dtype::{DType, Element, Scalar};
use crate::tensor::device::interface::{GemmArgs, Trans};

/// Byte extent of `rows` rows `pitch` apart whose last row is `width` bytes
/// long (0 when nothing is touched); None on overflow.
pub(super) fn extent_2d(pitch: usize, width: usize, height: usize) -> Option<usize> {
    if width == 0 || height == 0 {
        return Some(0);
    }
    (height - 1).checked_mul(pitch)?.checked_add(width)
}

/// Byte extent of a BLAS vector (`n` elements at increment `inc`).
pub(super) fn extent_vec(n: usize, inc: isize, size: usize) -> Option<usize> {
    if n == 0 {
        return Some(0);
    }
    (n - 1).checked_mul(inc.unsigned_abs())?.checked_add(1)?.checked_mul(size)
}

/// Byte extent of a column-major `rows x cols` matrix with leading dimension `ld`.
pub(super) fn extent_mat(rows: usize, cols: usize, ld: usize, size: usize) -> Option<usize> {
    if rows == 0 || cols == 0 {
        return Some(0);
    }
    (cols - 1).checked_mul(ld)?.checked_add(rows)?.checked_mul(size)
}

/// Stored shape (rows, cols) of an operand whose op is `rows_op x cols_op`.
pub(super) fn stored(t: Trans, rows_op: usize, cols_op: usize) -> (usize, usize) {
    match t {
        Trans::N => (rows_op, cols_op),
        Trans::T | Trans::C => (cols_op, rows_op),
    }
}

/// Address of logical element `i` of a BLAS vector whose lowest-addressed
/// element is at `base`.
pub(super) fn vec_elem(base: u64, n: usize, inc: isize, i: usize, size: usize) -> usize {
    let pos = if inc >= 0 { i } else { n - 1 - i };
    base as usize + pos * inc.unsigned_abs() * size
}

pub(super) enum Kernel<'a> {
    Scal { n: usize, alpha: Scalar, x: u64, incx: isize },
    Axpy { n: usize, alpha: Scalar, x: u64, incx: isize, y: u64, incy: isize },
    Gemm(&'a GemmArgs),
}

/// Run `k` for a float dtype.
///
/// # Safety
/// Every element the kernel touches is valid memory aligned for the dtype,
/// and no other thread writes it meanwhile.
pub(super) unsafe fn with_float(dtype: DType, k: Kernel<'_>) -> std::result::Result<(), Fault> {
    match dtype {
        DType::F32 => run_kernel::<f32>(k),
        DType::F64 => run_kernel::<f64>(k),
        DType::C64 => run_kernel::<Complex32>(k),
        DType::C128 => run_kernel::<Complex64>(k),
        // Refused when queued; kept as an error rather than a panic.
        d => return Err(fault(UNKNOWN, format!("no simulated BLAS for {}", d.name()))),
    }
    Ok(())
}

/// # Safety
/// As for [`with_float`], with `T` the element type of the dtype.
pub(super) unsafe fn run_kernel<T: Element>(k: Kernel<'_>) {
    let size = std::mem::size_of::<T>();
    match k {
        Kernel::Scal { n, alpha, x, incx } => {
            let alpha = T::from_scalar(alpha);
            for i in 0..n {
                let p = vec_elem(x, n, incx, i, size) as *mut T;
                p.write(p.read().mul(alpha));
            }
        }
        Kernel::Axpy { n, alpha, x, incx, y, incy } => {
            let alpha = T::from_scalar(alpha);
            for i in 0..n {
                let xi = (vec_elem(x, n, incx, i, size) as *const T).read();
                let py = vec_elem(y, n, incy, i, size) as *mut T;
                py.write(alpha.mul(xi).add(py.read()));
            }
        }
        Kernel::Gemm(g) => {
            let (m, n, kk) = (g.m, g.n, g.k);
            let zero = T::zero();
            let alpha = T::from_scalar(g.alpha);
            let beta = T::from_scalar(g.beta);
            let (a, b, c) = (g.a as *const T, g.b as *const T, g.c as *mut T);
            let op = |p: *const T, t: Trans, ld: usize, r: usize, col: usize| -> T {
                match t {
                    Trans::N => p.add(r + col * ld).read(),
                    Trans::T => p.add(col + r * ld).read(),
                    Trans::C => p.add(col + r * ld).read().conj(),
                }
            };
            // The result goes to a temporary first, so C is written once.
            let mut out = vec![zero; m * n];
            if alpha != zero && kk > 0 {
                for j in 0..n {
                    for i in 0..m {
                        let mut acc = zero;
                        for l in 0..kk {
                            acc = acc.add(op(a, g.trans_a, g.lda, i, l).mul(op(b, g.trans_b, g.ldb, l, j)));
                        }
                        out[i + j * m] = alpha.mul(acc);
                    }
                }
            }
            for j in 0..n {
                for i in 0..m {
                    let p = c.add(i + j * g.ldc);
                    // beta == 0: C is not read (it may hold NaN).
                    let v = if beta == zero { out[i + j * m] } else { out[i + j * m].add(beta.mul(p.read())) };
                    p.write(v);
                }
            }
        }
    }
}
