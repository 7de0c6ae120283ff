//! Backends: leaf kernels behind the [`crate::dispatch::Backend`] trait.

pub(crate) mod blas;
pub(crate) mod blas_backend;
pub(crate) mod cuda;
pub(crate) mod dense;
pub(crate) mod native;

use crate::dispatch::Backend;

/// Host backends in preference order: the native backend first (its gemm
/// matches OpenBLAS and runs on the runtime's workers, while the system BLAS
/// runs one thread per call), then the system BLAS, which callers can pick
/// with a selector and which declines what it cannot run.
pub(crate) static HOST: &[&dyn Backend] = &[&native::Native, &blas_backend::BlasBackend];

/// Device backends (every CUDA device, real or simulated).
pub(crate) static DEVICE: &[&dyn Backend] = &[&cuda::Cuda];
