//! cuBLAS: loaded once per process at the first BLAS call; one handle per
//! stream, bound to it at its first call; `scal`, `axpy` and `gemm`.

use std::ffi::c_int;
use std::ptr::null_mut;
use std::sync::OnceLock;

use cudarc::cublas::sys as bl;

use super::device::{BlasHandle, CudaDevice};
use super::loader::{guard, open_first, preferred_versioned};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result, Status};
use crate::tensor::device::interface::{DevPtr, GemmArgs, StreamId, Trans};

/// Every cuBLAS symbol this file calls.
pub(super) const CUBLAS_SYMBOLS: &[&str] = &[
    "cublasCreate_v2",
    "cublasDestroy_v2",
    "cublasSetStream_v2",
    "cublasSscal_v2",
    "cublasDscal_v2",
    "cublasCscal_v2",
    "cublasZscal_v2",
    "cublasCsscal_v2",
    "cublasZdscal_v2",
    "cublasSaxpy_v2",
    "cublasDaxpy_v2",
    "cublasCaxpy_v2",
    "cublasZaxpy_v2",
    "cublasSgemm_v2",
    "cublasDgemm_v2",
    "cublasCgemm_v2",
    "cublasZgemm_v2",
];

pub(super) static CUBLAS: OnceLock<std::result::Result<(), String>> = OnceLock::new();

/// Load cuBLAS once per process (at the first BLAS call).
pub(super) fn cublas() -> Result<()> {
    let r = match CUBLAS.get() {
        Some(r) => r,
        None => {
            let loaded = guard("loading cuBLAS", || {
                let candidates = cudarc::get_lib_name_candidates("cublas");
                load_cublas(&candidates)
            })
            .and_then(|r| r);
            CUBLAS.get_or_init(|| loaded)
        }
    };
    r.clone().map_err(|why| Error::new(Status::CudaUnavailable, "cuda", format!("cuBLAS is not available: {why}")))
}

pub(super) fn load_cublas(candidates: &[String]) -> std::result::Result<(), String> {
    let lib = open_first(candidates, &preferred_versioned(candidates, "libcublas.so"))?;
    let missing = lib.missing(CUBLAS_SYMBOLS);
    if !missing.is_empty() {
        return Err(format!("{} lacks {}", lib.name, missing.join(", ")));
    }
    // SAFETY: culib() only loads the library; its panic is caught.
    guard("loading cuBLAS through cudarc", || unsafe {
        bl::culib();
    })
}

pub(super) const CUBLAS_STATUS_ALLOC_FAILED: u32 = 3;

pub(super) fn cublas_status_text(code: u32) -> &'static str {
    match code {
        0 => "CUBLAS_STATUS_SUCCESS: success",
        1 => "CUBLAS_STATUS_NOT_INITIALIZED: the cuBLAS library was not initialized",
        3 => "CUBLAS_STATUS_ALLOC_FAILED: resource allocation failed",
        7 => "CUBLAS_STATUS_INVALID_VALUE: an invalid value was passed (a size, leading dimension or increment)",
        8 => "CUBLAS_STATUS_ARCH_MISMATCH: the device does not support the operation",
        11 => "CUBLAS_STATUS_MAPPING_ERROR: access to GPU memory space failed",
        13 => "CUBLAS_STATUS_EXECUTION_FAILED: the GPU program failed to execute",
        14 => "CUBLAS_STATUS_INTERNAL_ERROR: an internal cuBLAS operation failed",
        15 => "CUBLAS_STATUS_NOT_SUPPORTED: the functionality requested is not supported",
        16 => "CUBLAS_STATUS_LICENSE_ERROR: license error",
        _ => "CUBLAS_STATUS_UNKNOWN: unknown cuBLAS status",
    }
}

pub(super) fn blas_ck(r: bl::cublasStatus_t, call: &'static str) -> Result<()> {
    match r as u32 {
        0 => Ok(()),
        code => {
            let status = if code == CUBLAS_STATUS_ALLOC_FAILED { Status::OutOfMemory } else { Status::CudaError };
            Err(Error::new(status, "cuda", format!("{} ({call}, status {code})", cublas_status_text(code))))
        }
    }
}

pub(super) fn to_int(v: usize, what: &str) -> Result<c_int> {
    c_int::try_from(v)
        .map_err(|_| Error::new(Status::InvalidArgument, "cuda", format!("{what} = {v} exceeds cuBLAS's 32-bit sizes")))
}

pub(super) fn not_float(dtype: DType, op: &str) -> Error {
    Error::new(
        Status::Unsupported,
        "cuda",
        format!("{op} on a CUDA device takes f32, f64, c64 or c128, not {}", dtype.name()),
    )
}

pub(super) fn c32(s: Scalar) -> bl::cuComplex {
    bl::cuComplex { x: s.re as f32, y: s.im as f32 }
}

pub(super) fn c64(s: Scalar) -> bl::cuDoubleComplex {
    bl::cuDoubleComplex { x: s.re, y: s.im }
}

pub(super) fn op(t: Trans, dtype: DType) -> bl::cublasOperation_t {
    match t {
        Trans::N => bl::cublasOperation_t::CUBLAS_OP_N,
        Trans::T => bl::cublasOperation_t::CUBLAS_OP_T,
        Trans::C if dtype.is_complex() => bl::cublasOperation_t::CUBLAS_OP_C,
        Trans::C => bl::cublasOperation_t::CUBLAS_OP_T,
    }
}

pub(super) fn dp<T>(p: DevPtr) -> *mut T {
    p as usize as *mut T
}

impl CudaDevice {
    /// Queue one cuBLAS call on stream `id` with that stream's handle.
    pub(super) fn with_blas(
        &self,
        id: StreamId,
        call: &'static str,
        f: impl FnOnce(bl::cublasHandle_t) -> bl::cublasStatus_t,
    ) -> Result<()> {
        cublas()?;
        let slot = self.enter(id)?;
        let mut guard = slot.blas.lock();
        let handle = match &*guard {
            Some(h) => h.0,
            None => {
                let mut h: bl::cublasHandle_t = null_mut();
                // SAFETY: writes one handle; cuBLAS is loaded and the
                // device's context is current (the handle binds to it).
                blas_ck(unsafe { bl::cublasCreate_v2(&mut h) }, "cublasCreate")?;
                // SAFETY: h is a live handle and the stream lives as long as the device.
                let bound =
                    blas_ck(unsafe { bl::cublasSetStream_v2(h, slot.stream as bl::cudaStream_t) }, "cublasSetStream");
                if let Err(e) = bound {
                    // SAFETY: h is live and used by nobody else.
                    unsafe { bl::cublasDestroy_v2(h) };
                    return Err(e);
                }
                *guard = Some(BlasHandle(h));
                h
            }
        };
        blas_ck(f(handle), call)
    }

    pub(super) unsafe fn blas_scal(
        &self,
        stream: StreamId,
        dtype: DType,
        n: usize,
        alpha: Scalar,
        x: DevPtr,
        incx: isize,
    ) -> Result<()> {
        if !dtype.is_float() {
            return Err(not_float(dtype, "scal"));
        }
        if n == 0 {
            return self.enter(stream).map(drop);
        }
        let n = to_int(n, "n")?;
        // Scaling touches the same elements whichever way it walks.
        let inc = to_int(incx.unsigned_abs(), "incx")?;
        // SAFETY (each call): the caller guarantees `x` addresses n
        // elements at this increment; alpha is read before the call returns
        // (host pointer mode).
        match dtype {
            DType::F32 => {
                let a = alpha.re as f32;
                self.with_blas(stream, "cublasSscal", |h| unsafe { bl::cublasSscal_v2(h, n, &a, dp(x), inc) })
            }
            DType::F64 => {
                let a = alpha.re;
                self.with_blas(stream, "cublasDscal", |h| unsafe { bl::cublasDscal_v2(h, n, &a, dp(x), inc) })
            }
            DType::C64 if alpha.im == 0.0 => {
                let a = alpha.re as f32;
                self.with_blas(stream, "cublasCsscal", |h| unsafe { bl::cublasCsscal_v2(h, n, &a, dp(x), inc) })
            }
            DType::C64 => {
                let a = c32(alpha);
                self.with_blas(stream, "cublasCscal", |h| unsafe { bl::cublasCscal_v2(h, n, &a, dp(x), inc) })
            }
            DType::C128 if alpha.im == 0.0 => {
                let a = alpha.re;
                self.with_blas(stream, "cublasZdscal", |h| unsafe { bl::cublasZdscal_v2(h, n, &a, dp(x), inc) })
            }
            DType::C128 => {
                let a = c64(alpha);
                self.with_blas(stream, "cublasZscal", |h| unsafe { bl::cublasZscal_v2(h, n, &a, dp(x), inc) })
            }
            _ => Err(not_float(dtype, "scal")),
        }
    }

    #[allow(clippy::too_many_arguments)] // the arguments of the CUDA/BLAS call it queues
    pub(super) unsafe fn blas_axpy(
        &self,
        stream: StreamId,
        dtype: DType,
        n: usize,
        alpha: Scalar,
        x: DevPtr,
        incx: isize,
        y: DevPtr,
        incy: isize,
    ) -> Result<()> {
        if !dtype.is_float() {
            return Err(not_float(dtype, "axpy"));
        }
        if n == 0 {
            return self.enter(stream).map(drop);
        }
        let n = to_int(n, "n")?;
        // Both walking backwards pairs the same elements as both forwards.
        let (incx, incy) = if incx < 0 && incy < 0 { (-incx, -incy) } else { (incx, incy) };
        let ix = c_int::try_from(incx).map_err(|_| {
            Error::new(Status::InvalidArgument, "cuda", format!("incx = {incx} exceeds cuBLAS's 32-bit sizes"))
        })?;
        let iy = c_int::try_from(incy).map_err(|_| {
            Error::new(Status::InvalidArgument, "cuda", format!("incy = {incy} exceeds cuBLAS's 32-bit sizes"))
        })?;
        // SAFETY (each call): the caller guarantees both vectors are valid
        // for n elements at their increments and do not overlap; alpha is
        // read before the call returns (host pointer mode).
        match dtype {
            DType::F32 => {
                let a = alpha.re as f32;
                self.with_blas(stream, "cublasSaxpy", |h| unsafe { bl::cublasSaxpy_v2(h, n, &a, dp(x), ix, dp(y), iy) })
            }
            DType::F64 => {
                let a = alpha.re;
                self.with_blas(stream, "cublasDaxpy", |h| unsafe { bl::cublasDaxpy_v2(h, n, &a, dp(x), ix, dp(y), iy) })
            }
            DType::C64 => {
                let a = c32(alpha);
                self.with_blas(stream, "cublasCaxpy", |h| unsafe { bl::cublasCaxpy_v2(h, n, &a, dp(x), ix, dp(y), iy) })
            }
            DType::C128 => {
                let a = c64(alpha);
                self.with_blas(stream, "cublasZaxpy", |h| unsafe { bl::cublasZaxpy_v2(h, n, &a, dp(x), ix, dp(y), iy) })
            }
            _ => Err(not_float(dtype, "axpy")),
        }
    }

    pub(super) unsafe fn blas_gemm(&self, stream: StreamId, dtype: DType, g: &GemmArgs) -> Result<()> {
        if !dtype.is_float() {
            return Err(not_float(dtype, "gemm"));
        }
        let (m, n, k) = (to_int(g.m, "m")?, to_int(g.n, "n")?, to_int(g.k, "k")?);
        let (lda, ldb, ldc) = (to_int(g.lda, "lda")?, to_int(g.ldb, "ldb")?, to_int(g.ldc, "ldc")?);
        if m == 0 || n == 0 {
            return self.enter(stream).map(drop);
        }
        let (ta, tb) = (op(g.trans_a, dtype), op(g.trans_b, dtype));
        let (a, b, c) = (g.a, g.b, g.c);
        // SAFETY (each call): the caller guarantees the matrices are valid
        // device memory for their shapes and leading dimensions (cuBLAS
        // checks the dimensions themselves); alpha and beta are read
        // before the call returns (host pointer mode).
        match dtype {
            DType::F32 => {
                let (al, be) = (g.alpha.re as f32, g.beta.re as f32);
                self.with_blas(stream, "cublasSgemm", |h| unsafe {
                    bl::cublasSgemm_v2(h, ta, tb, m, n, k, &al, dp(a), lda, dp(b), ldb, &be, dp(c), ldc)
                })
            }
            DType::F64 => {
                let (al, be) = (g.alpha.re, g.beta.re);
                self.with_blas(stream, "cublasDgemm", |h| unsafe {
                    bl::cublasDgemm_v2(h, ta, tb, m, n, k, &al, dp(a), lda, dp(b), ldb, &be, dp(c), ldc)
                })
            }
            DType::C64 => {
                let (al, be) = (c32(g.alpha), c32(g.beta));
                self.with_blas(stream, "cublasCgemm", |h| unsafe {
                    bl::cublasCgemm_v2(h, ta, tb, m, n, k, &al, dp(a), lda, dp(b), ldb, &be, dp(c), ldc)
                })
            }
            DType::C128 => {
                let (al, be) = (c64(g.alpha), c64(g.beta));
                self.with_blas(stream, "cublasZgemm", |h| unsafe {
                    bl::cublasZgemm_v2(h, ta, tb, m, n, k, &al, dp(a), lda, dp(b), ldb, &be, dp(c), ldc)
                })
            }
            _ => Err(not_float(dtype, "gemm")),
        }
    }
}
