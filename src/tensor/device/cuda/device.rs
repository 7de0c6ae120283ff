//! One CUDA device: its context, streams, cuBLAS handles and event pool,
//! opened at probe; the [`Device`] methods are implemented in `memory`,
//! `streams` and `blas`.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use cudarc::cublas::sys as bl;
use cudarc::driver::sys as cu;
use parking_lot::Mutex;

use super::driver::{ck, driver, error_text, Ctx, Driver};
use super::events::Events;
use super::loader::guard;
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result, Status};
use crate::tensor::device::interface::{DevPtr, Device, GemmArgs, Marker, Notify, Place, StreamId};

/// Streams per device offered to the runtime.
pub(crate) const STREAMS: u32 = 4;

pub(crate) fn probe() -> std::result::Result<Vec<Arc<dyn Device>>, String> {
    let drv = driver()?;
    guard("probing CUDA devices", || probe_devices(drv)).and_then(|r| r)
}

pub(super) fn probe_devices(drv: &'static Driver) -> std::result::Result<Vec<Arc<dyn Device>>, String> {
    let mut count: c_int = 0;
    // SAFETY: writes one int; the driver is initialised.
    let r = unsafe { cu::cuDeviceGetCount(&mut count) } as u32;
    if r != 0 {
        return Err(format!("cuDeviceGetCount failed: {}", error_text(r)));
    }
    let mut out: Vec<Arc<dyn Device>> = Vec::new();
    for ordinal in 0..count.max(0) as u32 {
        let dev = CudaDevice::open(ordinal, drv).map_err(|e| format!("CUDA device {ordinal}: {}", e.message()))?;
        out.push(Arc::new(dev));
    }
    Ok(out)
}

pub(super) struct BlasHandle(pub(super) bl::cublasHandle_t);
// SAFETY: a cuBLAS handle may move between threads; it is only used under
// its stream slot's mutex.
unsafe impl Send for BlasHandle {}

pub(super) struct Slot {
    pub(super) stream: cu::CUstream,
    /// Created at the first BLAS call on this stream, bound to it once.
    pub(super) blas: Mutex<Option<BlasHandle>>,
}

/// One CUDA device (see the module notes).
pub(super) struct CudaDevice {
    pub(super) ordinal: u32,
    pub(super) ctx: Arc<Ctx>,
    pub(super) describe: String,
    pub(super) slots: Vec<Slot>,
    /// Internal stream on which `free` queues stream-ordered frees.
    pub(super) free_stream: cu::CUstream,
    /// Whether `free` uses cuMemFreeAsync (cleared if the driver refuses it).
    pub(super) async_free: AtomicBool,
    pub(super) events: Arc<Events>,
    /// Pageable fallbacks of `alloc_host` (address -> layout).
    pub(super) pageable: Mutex<HashMap<usize, std::alloc::Layout>>,
}

// SAFETY: the raw handles (streams, events, context) are thread-safe
// driver objects; the cuBLAS handles sit behind mutexes; the rest is
// plain data or synchronised.
unsafe impl Send for CudaDevice {}
// SAFETY: as for Send.
unsafe impl Sync for CudaDevice {}

impl CudaDevice {
    pub(super) fn open(ordinal: u32, drv: &Driver) -> Result<CudaDevice> {
        let mut dev: cu::CUdevice = 0;
        // SAFETY: writes one device handle; the driver is initialised.
        ck(unsafe { cu::cuDeviceGet(&mut dev, ordinal as c_int) }, "cuDeviceGet")?;
        let mut raw_ctx: cu::CUcontext = null_mut();
        // SAFETY: writes one context handle, retained until Ctx::drop.
        ck(unsafe { cu::cuDevicePrimaryCtxRetain(&mut raw_ctx, dev) }, "cuDevicePrimaryCtxRetain")?;
        let ctx = Arc::new(Ctx { ctx: raw_ctx, dev });
        ctx.bind()?;

        let mut name_buf = [0 as c_char; 256];
        // SAFETY: the driver writes at most len bytes, NUL-terminated.
        ck(unsafe { cu::cuDeviceGetName(name_buf.as_mut_ptr(), name_buf.len() as c_int, dev) }, "cuDeviceGetName")?;
        // SAFETY: NUL-terminated by the driver (and the buffer was zeroed).
        let name = unsafe { CStr::from_ptr(name_buf.as_ptr()) }.to_string_lossy().into_owned();
        let mut total: usize = 0;
        // SAFETY: writes one size.
        ck(unsafe { cu::cuDeviceTotalMem_v2(&mut total, dev) }, "cuDeviceTotalMem")?;
        let attr = |a: cu::CUdevice_attribute| -> i32 {
            let mut v: c_int = 0;
            // SAFETY: writes one int.
            let r = unsafe { cu::cuDeviceGetAttribute(&mut v, a, dev) };
            if r as u32 == 0 {
                v
            } else {
                0
            }
        };
        let major = attr(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
        let minor = attr(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
        let pools = attr(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) != 0;
        let describe = format!(
            "CUDA device {ordinal}: {name}, {:.1} GiB, compute capability {major}.{minor}, driver {}.{}",
            total as f64 / (1u64 << 30) as f64,
            drv.version / 1000,
            (drv.version % 1000) / 10
        );

        let events = Arc::new(Events { ctx: ctx.clone(), idle: Mutex::new(Vec::new()) });
        let mut device = CudaDevice {
            ordinal,
            ctx,
            describe,
            slots: Vec::with_capacity(STREAMS as usize),
            free_stream: null_mut(),
            async_free: AtomicBool::new(drv.async_free && pools),
            events,
            pageable: Mutex::new(HashMap::new()),
        };
        // On an error below, dropping `device` destroys what exists so far.
        let flags = cu::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        for _ in 0..STREAMS {
            let mut s: cu::CUstream = null_mut();
            // SAFETY: writes one stream handle; the context is current.
            ck(unsafe { cu::cuStreamCreate(&mut s, flags) }, "cuStreamCreate")?;
            device.slots.push(Slot { stream: s, blas: Mutex::new(None) });
        }
        let mut s: cu::CUstream = null_mut();
        // SAFETY: as above.
        ck(unsafe { cu::cuStreamCreate(&mut s, flags) }, "cuStreamCreate")?;
        device.free_stream = s;
        Ok(device)
    }

    /// The stream `id`, with the context made current.
    pub(super) fn enter(&self, id: StreamId) -> Result<&Slot> {
        let slot = self.slots.get(id.0 as usize).ok_or_else(|| {
            Error::new(
                Status::InvalidArgument,
                "cuda",
                format!(
                    "stream {} does not exist on CUDA device {} ({} streams)",
                    id.0,
                    self.ordinal,
                    self.slots.len()
                ),
            )
        })?;
        self.ctx.bind()?;
        Ok(slot)
    }

    /// The context owning device address `p` (ours when unknown).
    pub(super) fn owner(&self, p: Place) -> cu::CUcontext {
        match p {
            Place::Host(_) => self.ctx.ctx,
            Place::Device(d) => {
                let mut c: cu::CUcontext = null_mut();
                // SAFETY: writes one context handle; the driver validates `d`.
                let r = unsafe {
                    cu::cuPointerGetAttribute(
                        &mut c as *mut cu::CUcontext as *mut c_void,
                        cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_CONTEXT,
                        d,
                    )
                };
                if r as u32 == 0 && !c.is_null() {
                    c
                } else {
                    self.ctx.ctx
                }
            }
        }
    }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        if self.ctx.bind().is_err() {
            return;
        }
        for slot in &mut self.slots {
            if let Some(h) = slot.blas.get_mut().take() {
                // SAFETY: the handle is live and nobody else can reach it now.
                unsafe { bl::cublasDestroy_v2(h.0) };
            }
            // SAFETY: the stream is ours; pending work finishes first (the
            // driver releases it once the stream is idle).
            unsafe { cu::cuStreamDestroy_v2(slot.stream) };
        }
        if !self.free_stream.is_null() {
            // SAFETY: as above.
            unsafe { cu::cuStreamDestroy_v2(self.free_stream) };
        }
        for (addr, layout) in self.pageable.get_mut().drain() {
            // SAFETY: allocated in alloc_host with this layout, not yet freed.
            unsafe { std::alloc::dealloc(addr as *mut u8, layout) };
        }
    }
}

impl Device for CudaDevice {
    fn ordinal(&self) -> u32 {
        self.ordinal
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn streams(&self) -> u32 {
        self.slots.len() as u32
    }

    fn alloc(&self, bytes: usize) -> Result<DevPtr> {
        self.mem_alloc(bytes)
    }

    unsafe fn free(&self, ptr: DevPtr) {
        // SAFETY: forwarded from the caller.
        unsafe { self.mem_free(ptr) }
    }

    fn alloc_host(&self, bytes: usize) -> Result<*mut u8> {
        self.host_alloc(bytes)
    }

    unsafe fn free_host(&self, ptr: *mut u8) {
        // SAFETY: forwarded from the caller.
        unsafe { self.host_free(ptr) }
    }

    unsafe fn copy_2d(
        &self,
        stream: StreamId,
        dst: Place,
        dpitch: usize,
        src: Place,
        spitch: usize,
        width: usize,
        height: usize,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.queue_copy_2d(stream, dst, dpitch, src, spitch, width, height) }
    }

    unsafe fn memset_2d(
        &self,
        stream: StreamId,
        dst: DevPtr,
        pitch: usize,
        value: u32,
        elem: usize,
        width: usize,
        height: usize,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.queue_memset_2d(stream, dst, pitch, value, elem, width, height) }
    }

    unsafe fn scal(
        &self,
        stream: StreamId,
        dtype: DType,
        n: usize,
        alpha: Scalar,
        x: DevPtr,
        incx: isize,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.blas_scal(stream, dtype, n, alpha, x, incx) }
    }

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
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.blas_axpy(stream, dtype, n, alpha, x, incx, y, incy) }
    }

    unsafe fn gemm(&self, stream: StreamId, dtype: DType, g: &GemmArgs) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.blas_gemm(stream, dtype, g) }
    }

    fn record(&self, stream: StreamId) -> Result<Marker> {
        self.stream_record(stream)
    }

    fn wait_marker(&self, stream: StreamId, marker: &Marker) -> Result<()> {
        self.stream_wait_marker(stream, marker)
    }

    fn notify(&self, stream: StreamId, notify: Notify) -> Result<()> {
        self.stream_notify(stream, notify)
    }
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe)
    }
}
