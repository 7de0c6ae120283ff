//! Backends: each implements [`crate::dispatch::backend::Backend`] over the
//! shared kernels (`crate::kernels`), the system BLAS (`crate::sysblas`) or a
//! device; `registry` lists them in preference order.
//!
//! - `native`: the pure-Rust CPU backend (every operation, every dtype);
//! - `blas`: the backend over the system BLAS library (gemm only);
//! - `device`: the backend for device tensors, queuing work on the streams of
//!   any [`crate::tensor::device::Device`] (the CUDA driver or the simulated device).

pub(crate) mod blas;
pub(crate) mod device;
pub(crate) mod native;
pub(crate) mod registry;
