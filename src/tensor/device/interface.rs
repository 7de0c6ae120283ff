//! The device interface: the [`Device`] trait and the types its methods
//! take (see the module notes of [`crate::tensor::device`] for the conventions).

use std::any::Any;
use std::sync::Arc;

use crate::dtype::{DType, Scalar};
use crate::error::Result;

/// The origin of errors raised by device implementations (the runtime
/// replaces it with the operation's name when the error fails an operation).
pub const ORIGIN: &str = "cuda";

/// A device address (a `CUdeviceptr` on CUDA; a host address on the
/// simulated device). Host code other than the simulated device never
/// dereferences one.
pub type DevPtr = u64;

/// One of a device's streams: an index below [`Device::streams`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct StreamId(pub u32);

/// A point in one stream's queued work (a CUDA event recorded on it): the
/// work queued on that stream before it. Opaque; each device downcasts its own.
pub type Marker = Arc<dyn Any + Send + Sync>;

/// Called once with the stream's status when the work queued before it is
/// done. It runs on a driver thread: it must only signal (push to a queue,
/// set a flag), never call back into the device or block.
pub type Notify = Box<dyn FnOnce(Result<()>) + Send>;

/// Where one side of a copy is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// Host memory (pageable, or page-locked from [`Device::alloc_host`]).
    Host(*mut u8),
    /// Device memory of this device, or of another device of the same kind
    /// (a peer copy; the implementation makes it work or returns an error).
    Device(DevPtr),
}

// SAFETY: a Place is an address; dereferencing it is governed by the
// contracts of the unsafe methods that take one.
unsafe impl Send for Place {}
unsafe impl Sync for Place {}

/// How BLAS reads a matrix operand.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Trans {
    /// As stored (column-major).
    N,
    /// Transposed.
    T,
    /// Conjugate-transposed (equals `T` for real dtypes).
    C,
}

/// `C = alpha·op(A)·op(B) + beta·C`, BLAS conventions (column-major; `op(A)`
/// is `m x k`, `op(B)` is `k x n`, `C` is `m x n`). With `beta` zero, `C` is
/// not read (it may hold NaN).
#[derive(Copy, Clone, Debug)]
pub struct GemmArgs {
    pub trans_a: Trans,
    pub trans_b: Trans,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: Scalar,
    pub a: DevPtr,
    pub lda: usize,
    pub b: DevPtr,
    pub ldb: usize,
    pub beta: Scalar,
    pub c: DevPtr,
    pub ldc: usize,
}

/// One accelerator. Implementations are `Send + Sync`: any worker thread may
/// queue work on any stream at any time (two threads may use one stream
/// concurrently; the implementation serialises what needs it, such as a BLAS
/// handle bound to a stream).
pub trait Device: Send + Sync {
    /// This device's ordinal (the `N` of `Domain::Cuda(N)`).
    fn ordinal(&self) -> u32;

    /// One line for humans: kind, name, memory (for `ta_cuda_device_info`).
    fn describe(&self) -> String;

    /// How many streams the device offers (at least 1). Streams are created
    /// once and live as long as the device.
    fn streams(&self) -> u32;

    /// Allocate `bytes` (> 0) of device memory, aligned for every dtype.
    /// Out of memory is `Status::OutOfMemory`; other failures `Status::CudaError`
    /// with the CUDA error name in the message.
    fn alloc(&self, bytes: usize) -> Result<DevPtr>;

    /// Free memory from [`Device::alloc`]. Called only when no queued or
    /// running work uses it any more; it must not wait for unrelated work
    /// (use a stream-ordered free where a plain free would synchronise).
    ///
    /// # Safety
    /// `ptr` came from this device's `alloc` and is freed once.
    unsafe fn free(&self, ptr: DevPtr);

    /// Allocate `bytes` (> 0) of page-locked host memory for staging
    /// transfers (pageable memory if the driver refuses; still correct).
    fn alloc_host(&self, bytes: usize) -> Result<*mut u8>;

    /// Free memory from [`Device::alloc_host`], once no queued work uses it.
    ///
    /// # Safety
    /// `ptr` came from this device's `alloc_host` and is freed once.
    unsafe fn free_host(&self, ptr: *mut u8);

    /// Queue a 2-D copy: `height` rows of `width` bytes, row `r` of the
    /// destination at `dst + r * dpitch` and of the source at
    /// `src + r * spitch`. Any direction (host/device on either side).
    ///
    /// # Safety
    /// Both regions are valid (and the destination writable) until the copy
    /// is done, and they do not overlap.
    #[allow(clippy::too_many_arguments)] // the arguments of the CUDA/BLAS call it queues
    unsafe fn copy_2d(
        &self,
        stream: StreamId,
        dst: Place,
        dpitch: usize,
        src: Place,
        spitch: usize,
        width: usize,
        height: usize,
    ) -> Result<()>;

    /// Queue a 2-D memset of device memory: `height` rows of `width`
    /// elements of `elem` bytes (1, 2 or 4), each set to the low `elem`
    /// bytes of `value`; rows `pitch` bytes apart, elements contiguous.
    ///
    /// # Safety
    /// The region is valid device memory until the memset is done.
    #[allow(clippy::too_many_arguments)] // the arguments of the CUDA/BLAS call it queues
    unsafe fn memset_2d(
        &self,
        stream: StreamId,
        dst: DevPtr,
        pitch: usize,
        value: u32,
        elem: usize,
        width: usize,
        height: usize,
    ) -> Result<()>;

    /// Queue `x = alpha * x` (BLAS `scal`) for a float dtype; `alpha` is real
    /// for real dtypes.
    ///
    /// # Safety
    /// `x` addresses `n` valid elements at increment `incx` (see the module notes).
    unsafe fn scal(
        &self,
        stream: StreamId,
        dtype: DType,
        n: usize,
        alpha: Scalar,
        x: DevPtr,
        incx: isize,
    ) -> Result<()>;

    /// Queue `y = alpha * x + y` (BLAS `axpy`) for a float dtype.
    ///
    /// # Safety
    /// As for [`Device::scal`], for both vectors; they do not overlap.
    #[allow(clippy::too_many_arguments)]
    unsafe fn axpy(
        &self,
        stream: StreamId,
        dtype: DType,
        n: usize,
        alpha: Scalar,
        x: DevPtr,
        incx: isize,
        y: DevPtr,
        incy: isize,
    ) -> Result<()>;

    /// Queue a GEMM (cuBLAS) for a float dtype.
    ///
    /// # Safety
    /// The matrices are valid device memory for their shapes and leading
    /// dimensions; `C` does not overlap `A` or `B`.
    unsafe fn gemm(&self, stream: StreamId, dtype: DType, args: &GemmArgs) -> Result<()>;

    /// Record a marker after the work queued on `stream` so far.
    fn record(&self, stream: StreamId) -> Result<Marker>;

    /// Make later work on `stream` wait for `marker` (recorded on any stream
    /// of this device) without blocking the host.
    fn wait_marker(&self, stream: StreamId, marker: &Marker) -> Result<()>;

    /// Call `notify` with the stream's status once the work queued on
    /// `stream` so far is done (see [`Notify`]).
    fn notify(&self, stream: StreamId, notify: Notify) -> Result<()>;
}
