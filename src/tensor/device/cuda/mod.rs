//! Real CUDA devices through cudarc (SPEC §2.7), loaded at run time.
//!
//! **What is loaded when.** Nothing at build time: cudarc's `dynamic-loading`
//! needs no toolkit and links nothing. [`probe`] runs once per process, at the
//! first device use (the registry). It opens the driver library
//! (`libcuda.so.1`, or the first name of cudarc's list that opens) with
//! `dlopen`, checks with `dlsym` that every driver symbol this file calls is
//! there, and only then lets cudarc load the same file; then `cuInit`, and for
//! each device: its primary context (retained), `STREAMS` (4) non-blocking
//! streams plus one internal stream for frees, and an event pool. cuBLAS
//! (`libcublas.so.13`, `.12`, `.11`, ...) is loaded the same way at the first
//! BLAS call of the process, and a stream's cuBLAS handle at the first BLAS
//! call on that stream. Without cuBLAS, `scal`, `axpy` and `gemm` fail with
//! `Status::CudaUnavailable` (saying why) while copies and memsets still work.
//!
//! **No panic, no abort.** cudarc panics when a library or a symbol is
//! missing. The dlopen/dlsym checks come first, and every first touch of
//! cudarc runs inside `catch_unwind` (the release profile keeps
//! `panic = "unwind"`), so a machine without a driver or GPU gets a reason
//! ("libcuda.so.1 not found: ...", "cuInit failed: CUDA_ERROR_NO_DEVICE:
//! ..."), never a crash. Status codes are read as integers and named from a
//! table that `cuGetErrorName`/`cuGetErrorString` fill at load time.
//!
//! **Threading.** Any worker thread may call any method at any time. Every
//! method first makes the device's primary context current on the calling
//! thread (`cuCtxSetCurrent`: a thread-local store in the driver). Streams,
//! events and memory are thread-safe driver objects; each stream has its own
//! cuBLAS handle, bound to that stream once (`cublasSetStream`) and used
//! under a mutex held only while a call is queued.
//!
//! **Completion.** Nothing here waits for the GPU. `notify` queues
//! `cuStreamAddCallback`: when the stream reaches it, a driver thread calls
//! back with the stream's status, and the callback only turns it into a
//! `Result` (error names from the table: no CUDA call) and calls the boxed
//! `Notify`, which signals the runtime. Markers are pooled events
//! (`CU_EVENT_DISABLE_TIMING`) recorded with `cuEventRecord`; `wait_marker` is
//! `cuStreamWaitEvent`, a dependency on the GPU, not on the host.
//!
//! **Memory.** `cuMemAlloc` (usable from every stream at once); `free`
//! queues `cuMemFreeAsync` on the internal stream (the caller guarantees no
//! work uses the memory any more, so it waits for nothing), falling back to
//! `cuMemFree` where the driver refuses. Staging buffers come from
//! `cuMemHostAlloc(PORTABLE)`. Copies: contiguous ones (one row, or rows
//! back to back on both sides) are 1-D `cuMemcpy{HtoD,DtoH,DtoD,Peer}Async`,
//! others `cuMemcpy2DAsync` (`cuMemcpy3DPeerAsync` when one side is another
//! device's memory, found with `cuPointerGetAttribute(CONTEXT)`). Driver
//! behaviour to keep in mind: a copy between the device and *pageable* host
//! memory may wait for the stream (device to pageable host always returns
//! only once done), so callers stage copies through `alloc_host` memory.

use std::sync::Arc;

use super::interface::Device;

#[cfg(feature = "cuda")]
mod blas;
#[cfg(feature = "cuda")]
mod device;
#[cfg(feature = "cuda")]
mod driver;
#[cfg(feature = "cuda")]
mod events;
#[cfg(feature = "cuda")]
mod loader;
#[cfg(feature = "cuda")]
mod memory;
#[cfg(feature = "cuda")]
mod streams;
#[cfg(all(test, feature = "cuda"))]
mod tests;

/// The CUDA devices of this machine, or why there are none. Never panics.
#[cfg(feature = "cuda")]
pub(crate) fn probe() -> std::result::Result<Vec<Arc<dyn Device>>, String> {
    device::probe()
}

/// Without the `cuda` feature there are no CUDA devices.
#[cfg(not(feature = "cuda"))]
pub(crate) fn probe() -> std::result::Result<Vec<Arc<dyn Device>>, String> {
    Err("this build has no CUDA support (built without the `cuda` feature)".into())
}

/// [`probe`] for the GPU integration tests (`tests/cuda_gpu.rs`): a fresh set
/// of devices (own streams and handles; the primary contexts are shared with
/// the registry's). Not part of the API.
#[cfg(any(test, feature = "internals"))]
pub fn probe_for_tests() -> std::result::Result<Vec<Arc<dyn Device>>, String> {
    probe()
}

#[cfg(test)]
mod probe_tests {
    #[test]
    fn probe_never_panics_and_gives_a_reason() {
        let r = std::panic::catch_unwind(crate::tensor::device::cuda::probe_for_tests).expect("probe must not panic");
        if let Err(why) = r {
            assert!(!why.is_empty());
            #[cfg(not(feature = "cuda"))]
            assert!(why.contains("without the `cuda` feature"), "{why}");
        }
    }
}
