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

use super::lent::with_lent_workers;
use super::library::{blas, Blas, GemmFn};
use crate::dtype::{Element, Scalar};
use crate::error::Error;
use crate::kernels::blas_plan::plan;
use crate::kernels::float::with_float;
use crate::kernels::gemm::gemm_check;
use crate::kernels::mat2::Mat2;
use crate::kernels::operand::Operand;
use crate::kernels::par::{par_for, work, BUSY_PAR_MIN_FLOPS};

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
    let w = with_float!(c.dtype, T => work::<T>(m, n, k), unreachable!("dtype checked above"));
    let threads = match par_for(w) {
        faer::Par::Rayon(t) => t.get(),
        faer::Par::Seq => 1,
    };
    with_float!(c.dtype, T => {
        let call = Call {
            f,
            ta: p.ta as c_char,
            tb: p.tb as c_char,
            k: k as c_int,
            alpha: T::from_scalar(alpha),
            beta: beta.map(T::from_scalar).unwrap_or(T::zero()),
            lda: p.lda,
            ldb: p.ldb,
            ldc: p.ldc,
        };
        // A product large enough to go parallel while tasks wait runs as one
        // call on the library's threads where idle workers lend their cores
        // (it packs B once, not once per block), else in blocks.
        let whole = Block { c: cm.ptr, a: pa, b: pb, m: bm_, n: bn };
        // SAFETY (both calls): the plan checked every leading dimension
        // against the extents, so each call reads and writes only the
        // operands' elements, which are valid by the caller's contract; C is
        // exclusively accessed and its blocks are disjoint.
        let lent = threads > 1
            && w >= BUSY_PAR_MIN_FLOPS
            && with_lent_workers(lib, threads - 1, || unsafe { call.one(whole) });
        if !lent {
            unsafe { call.blocks(whole, threads) };
        }
        Ok(Ok(()))
    }, unreachable!("dtype checked above"))
}

/// One BLAS product in the library's column-major terms, its extents and
/// pointers apart (they differ per block).
struct Call<T> {
    f: GemmFn,
    ta: c_char,
    tb: c_char,
    k: c_int,
    alpha: T,
    beta: T,
    lda: c_int,
    ldb: c_int,
    ldc: c_int,
}

/// A block of C (`m` x `n`, column-major) with the start of the A and B
/// rows and columns it needs.
#[derive(Clone, Copy)]
struct Block {
    c: *mut u8,
    a: *mut u8,
    b: *mut u8,
    m: usize,
    n: usize,
}

// SAFETY: a block is handed to the one thread that computes it; blocks of one
// product address disjoint parts of C and only read A and B.
unsafe impl Send for Block {}

impl<T: Copy + Sync> Call<T> {
    /// Compute `blk` in one library call, on as many threads as the library
    /// is set to.
    ///
    /// # Safety
    /// As for [`Call::blocks`].
    unsafe fn one(&self, blk: Block) {
        let (m, n) = (blk.m as c_int, blk.n as c_int);
        // SAFETY: as the caller guarantees.
        unsafe {
            (self.f)(
                &self.ta,
                &self.tb,
                &m,
                &n,
                &self.k,
                (&self.alpha as *const T).cast(),
                blk.a as *const c_void,
                &self.lda,
                blk.b as *const c_void,
                &self.ldb,
                (&self.beta as *const T).cast(),
                blk.c as *mut c_void,
                &self.ldc,
                1,
                1,
            )
        };
    }

    /// Compute `block` on `threads` threads of the caller's rayon pool (the
    /// runtime's workers): split in two along C's contiguous axis (or its
    /// other one when that is too short) and joined, one single-threaded
    /// library call per thread, as the native product does, so a BLAS
    /// product uses the workers' cores and no threads of its own.
    ///
    /// # Safety
    /// `block` and the call's leading dimensions must describe valid
    /// operands (C writable and not read or written by anyone else).
    unsafe fn blocks(&self, blk: Block, threads: usize) {
        let size = std::mem::size_of::<T>();
        if threads < 2 || blk.m.max(blk.n) < 16 {
            // SAFETY: as the caller guarantees.
            unsafe { self.one(blk) };
            return;
        }
        let left = threads / 2;
        let (b0, b1) = if blk.m >= 16 {
            // Rows: C and op(A) move down by `mid` rows.
            let mid = (blk.m * left / threads).next_multiple_of(8).min(blk.m - 1);
            let a_step = if self.ta == b'N' as c_char { mid } else { mid * self.lda as usize };
            let b1 = Block {
                c: blk.c.wrapping_add(mid * size),
                a: blk.a.wrapping_add(a_step * size),
                m: blk.m - mid,
                ..blk
            };
            (Block { m: mid, ..blk }, b1)
        } else {
            // Columns: C and op(B) move right by `mid` columns.
            let mid = (blk.n * left / threads).next_multiple_of(8).min(blk.n - 1);
            let b_step = if self.tb == b'N' as c_char { mid * self.ldb as usize } else { mid };
            let c_step = mid * self.ldc as usize;
            let b1 = Block {
                c: blk.c.wrapping_add(c_step * size),
                b: blk.b.wrapping_add(b_step * size),
                n: blk.n - mid,
                ..blk
            };
            (Block { n: mid, ..blk }, b1)
        };
        // SAFETY: the two blocks are disjoint parts of the caller's block.
        rayon::join(move || unsafe { self.blocks(b0, left) }, move || unsafe { self.blocks(b1, threads - left) });
    }
}
