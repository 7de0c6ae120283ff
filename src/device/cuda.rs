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

use super::Device;

/// The CUDA devices of this machine, or why there are none. Never panics.
pub(crate) fn probe() -> std::result::Result<Vec<Arc<dyn Device>>, String> {
    imp::probe()
}

/// [`probe`] for the GPU integration tests (`tests/cuda_gpu.rs`): a fresh set
/// of devices (own streams and handles; the primary contexts are shared with
/// the registry's). Not part of the API.
#[doc(hidden)]
pub fn probe_for_tests() -> std::result::Result<Vec<Arc<dyn Device>>, String> {
    probe()
}

#[cfg(test)]
mod tests {
    #[test]
    fn probe_never_panics_and_gives_a_reason() {
        let r = std::panic::catch_unwind(super::probe_for_tests).expect("probe must not panic");
        if let Err(why) = r {
            assert!(!why.is_empty());
            #[cfg(not(feature = "cuda"))]
            assert!(why.contains("without the `cuda` feature"), "{why}");
        }
    }
}

#[cfg(not(feature = "cuda"))]
mod imp {
    use std::sync::Arc;

    use super::super::Device;

    pub(crate) fn probe() -> std::result::Result<Vec<Arc<dyn Device>>, String> {
        Err("this build has no CUDA support (built without the `cuda` feature)".into())
    }
}

#[cfg(feature = "cuda")]
mod imp {
    use std::collections::HashMap;
    use std::ffi::{c_char, c_int, c_void, CStr, CString};
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::ptr::{null, null_mut};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, OnceLock};

    use cudarc::cublas::sys as bl;
    use cudarc::driver::sys as cu;
    use parking_lot::Mutex;

    use super::super::{DevPtr, Device, GemmArgs, Marker, Notify, Place, StreamId, Trans};
    use crate::dtype::{DType, Scalar};
    use crate::error::{Error, Result, Status};

    /// Streams per device offered to the runtime.
    pub(crate) const STREAMS: u32 = 4;

    /// Idle events kept per device for reuse as markers.
    const MAX_POOLED_EVENTS: usize = 256;

    /// Every driver symbol this file calls (cudarc resolves each lazily at its
    /// first call and panics if it is missing: check them all up front).
    const DRIVER_SYMBOLS: &[&str] = &[
        "cuGetErrorName",
        "cuGetErrorString",
        "cuInit",
        "cuDriverGetVersion",
        "cuDeviceGetCount",
        "cuDeviceGet",
        "cuDeviceGetName",
        "cuDeviceTotalMem_v2",
        "cuDeviceGetAttribute",
        "cuDevicePrimaryCtxRetain",
        "cuDevicePrimaryCtxRelease_v2",
        "cuCtxSetCurrent",
        "cuStreamCreate",
        "cuStreamDestroy_v2",
        "cuStreamWaitEvent",
        "cuStreamAddCallback",
        "cuEventCreate",
        "cuEventDestroy_v2",
        "cuEventRecord",
        "cuMemAlloc_v2",
        "cuMemFree_v2",
        "cuMemHostAlloc",
        "cuMemFreeHost",
        "cuMemcpyHtoDAsync_v2",
        "cuMemcpyDtoHAsync_v2",
        "cuMemcpyDtoDAsync_v2",
        "cuMemcpyPeerAsync",
        "cuMemcpyAsync",
        "cuMemcpy2DAsync_v2",
        "cuMemcpy3DPeerAsync",
        "cuMemsetD8Async",
        "cuMemsetD16Async",
        "cuMemsetD32Async",
        "cuMemsetD2D8Async",
        "cuMemsetD2D16Async",
        "cuMemsetD2D32Async",
        "cuPointerGetAttribute",
    ];

    /// Used when present (CUDA >= 11.2); `cuMemFree` otherwise.
    const DRIVER_OPTIONAL_ASYNC_FREE: &str = "cuMemFreeAsync";

    /// Every cuBLAS symbol this file calls.
    const CUBLAS_SYMBOLS: &[&str] = &[
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

    // ------------------------------------------------------------------
    // Loading

    /// A library opened with `dlopen` and never closed: cudarc opens the same
    /// file again (a reference count, not a second copy).
    struct Lib {
        name: String,
        handle: *mut c_void,
    }

    // SAFETY: a dlopen handle is a process-wide token that dlsym accepts from
    // any thread; Lib never closes it.
    unsafe impl Send for Lib {}
    // SAFETY: as for Send; Lib has no interior mutability.
    unsafe impl Sync for Lib {}

    impl Lib {
        fn sym(&self, name: &str) -> *mut c_void {
            let Ok(c) = CString::new(name) else { return null_mut() };
            // SAFETY: `handle` came from a successful dlopen and is never
            // closed; `c` is a NUL-terminated string.
            unsafe { libc::dlsym(self.handle, c.as_ptr()) }
        }

        fn missing(&self, symbols: &[&str]) -> Vec<String> {
            symbols.iter().filter(|s| self.sym(s).is_null()).map(|s| s.to_string()).collect()
        }
    }

    fn dlerror_text() -> String {
        // SAFETY: dlerror returns NULL or a NUL-terminated string valid until
        // the next dl* call on this thread; it is copied at once.
        unsafe {
            let e = libc::dlerror();
            if e.is_null() {
                "unknown dlopen error".into()
            } else {
                CStr::from_ptr(e).to_string_lossy().into_owned()
            }
        }
    }

    /// Open the first of `candidates` that loads, in order (the order cudarc's
    /// loader uses, so it picks the same file). The error names `preferred`
    /// (the usual name) with its dlopen message.
    fn open_first(candidates: &[String], preferred: &str) -> std::result::Result<Lib, String> {
        let mut preferred_err = None;
        let mut first_err = None;
        for name in candidates {
            let Ok(c) = CString::new(name.as_str()) else { continue };
            // SAFETY: `c` is NUL-terminated; loading a library runs its
            // initialisers, which is what looking for the driver means.
            let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
            if !handle.is_null() {
                return Ok(Lib { name: name.clone(), handle });
            }
            let err = dlerror_text();
            if name == preferred {
                preferred_err = Some(err);
            } else if first_err.is_none() {
                first_err = Some((name.clone(), err));
            }
        }
        let others = candidates.len().saturating_sub(1);
        match (preferred_err, first_err) {
            (Some(err), _) => Err(format!("{preferred} not found: {err} (and {others} other names tried)")),
            (None, Some((name, err))) => Err(format!("{name} not found: {err} (and {others} other names tried)")),
            (None, None) => Err(format!("{preferred} not found: no library names to try")),
        }
    }

    /// Run `f`, turning a panic (cudarc's answer to a missing library or
    /// symbol) into an error string.
    fn guard<R>(what: &str, f: impl FnOnce() -> R) -> std::result::Result<R, String> {
        catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
            let msg = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            format!("{what} failed: {msg}")
        })
    }

    /// The loaded driver: its library and the names of its status codes.
    struct Driver {
        /// Kept open for the life of the process.
        _lib: Lib,
        /// Status value -> "CUDA_ERROR_NAME: description", for every value the
        /// driver names. Stream callbacks read it (they must not call CUDA).
        errors: HashMap<u32, String>,
        /// `cuDriverGetVersion`, e.g. 13000 for 13.0.
        version: i32,
        async_free: bool,
    }

    static DRIVER: OnceLock<std::result::Result<Driver, String>> = OnceLock::new();

    fn driver() -> std::result::Result<&'static Driver, String> {
        if let Some(d) = DRIVER.get() {
            return d.as_ref().map_err(Clone::clone);
        }
        let loaded = guard("loading the CUDA driver", || {
            let candidates: Vec<String> =
                ["cuda", "nvcuda"].iter().flat_map(|l| cudarc::get_lib_name_candidates(l)).collect();
            load_driver(&candidates)
        })
        .and_then(|r| r);
        DRIVER.get_or_init(|| loaded).as_ref().map_err(Clone::clone)
    }

    /// Load the driver from the first of `candidates` that opens.
    fn load_driver(candidates: &[String]) -> std::result::Result<Driver, String> {
        let lib = open_first(candidates, "libcuda.so.1")?;
        let missing = lib.missing(DRIVER_SYMBOLS);
        if !missing.is_empty() {
            return Err(format!("{} lacks {} (a driver too old for this build)", lib.name, missing.join(", ")));
        }
        let async_free = !lib.sym(DRIVER_OPTIONAL_ASYNC_FREE).is_null();
        let errors = error_table(&lib);
        // cudarc opens its own handle (the same file: same names, same order).
        // SAFETY: culib() only loads the library; its panic is caught.
        guard("loading the CUDA driver through cudarc", || unsafe {
            cu::culib();
        })?;
        // SAFETY: cuInit takes flags (0) and may be called repeatedly.
        let r = guard("cuInit", || unsafe { cu::cuInit(0) } as u32)?;
        if r != 0 {
            return Err(format!("cuInit failed: {}", lookup(&errors, r)));
        }
        let mut version: c_int = 0;
        // SAFETY: writes one int.
        let r = guard("cuDriverGetVersion", || unsafe { cu::cuDriverGetVersion(&mut version) } as u32)?;
        if r != 0 {
            return Err(format!("cuDriverGetVersion failed: {}", lookup(&errors, r)));
        }
        Ok(Driver { _lib: lib, errors, version, async_free })
    }

    /// `CUresult (*)(CUresult, const char **)`, with the status as the
    /// 32-bit integer it is in C (no Rust enum: any value is valid).
    type ErrTextFn = unsafe extern "C" fn(u32, *mut *const c_char) -> u32;

    fn error_table(lib: &Lib) -> HashMap<u32, String> {
        let (name_sym, text_sym) = (lib.sym("cuGetErrorName"), lib.sym("cuGetErrorString"));
        let mut table = HashMap::new();
        if name_sym.is_null() || text_sym.is_null() {
            return table;
        }
        // SAFETY: both symbols exist (checked just above) and have the C
        // signature `CUresult f(CUresult, const char **)`; CUresult is a
        // 32-bit enum, passed and returned like u32.
        let (name_fn, text_fn) = unsafe {
            (
                std::mem::transmute::<*mut c_void, ErrTextFn>(name_sym),
                std::mem::transmute::<*mut c_void, ErrTextFn>(text_sym),
            )
        };
        let read = |f: ErrTextFn, code: u32| -> Option<String> {
            let mut p: *const c_char = null();
            // SAFETY: f writes a pointer to a static string (or NULL) and
            // accepts any value, answering CUDA_ERROR_INVALID_VALUE for unknown ones.
            let ok = unsafe { f(code, &mut p) } == 0;
            // SAFETY: on success, p is a static NUL-terminated string.
            (ok && !p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        };
        for code in 0..=1100u32 {
            if let Some(name) = read(name_fn, code) {
                let text = read(text_fn, code).unwrap_or_default();
                table.insert(code, format!("{name}: {text}"));
            }
        }
        table
    }

    fn lookup(table: &HashMap<u32, String>, code: u32) -> String {
        table.get(&code).cloned().unwrap_or_else(|| format!("CUDA error {code}: unknown status"))
    }

    /// "CUDA_ERROR_NAME: description" for a status value (no CUDA call).
    fn error_text(code: u32) -> String {
        match DRIVER.get() {
            Some(Ok(d)) => lookup(&d.errors, code),
            _ => format!("CUDA error {code}: unknown status"),
        }
    }

    const CUDA_ERROR_OUT_OF_MEMORY: u32 = 2;

    fn cu_error(code: u32, call: &str) -> Error {
        Error::new(Status::CudaError, "cuda", format!("{} ({call})", error_text(code)))
    }

    /// Check a driver call's status. It is read as the integer it is in C.
    fn ck(r: cu::CUresult, call: &'static str) -> Result<()> {
        match r as u32 {
            0 => Ok(()),
            code => Err(cu_error(code, call)),
        }
    }

    static CUBLAS: OnceLock<std::result::Result<(), String>> = OnceLock::new();

    /// Load cuBLAS once per process (at the first BLAS call).
    fn cublas() -> Result<()> {
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

    fn load_cublas(candidates: &[String]) -> std::result::Result<(), String> {
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

    /// The first `<base>.<number>` among the candidates: cudarc's loader
    /// puts `lib<name>.so.<major of the bindings>` first among those.
    fn preferred_versioned(candidates: &[String], base: &str) -> String {
        candidates
            .iter()
            .find(|c| {
                c.strip_prefix(base)
                    .and_then(|rest| rest.strip_prefix('.'))
                    .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            })
            .cloned()
            .unwrap_or_else(|| format!("{base}.*"))
    }

    const CUBLAS_STATUS_ALLOC_FAILED: u32 = 3;

    fn cublas_status_text(code: u32) -> &'static str {
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

    fn blas_ck(r: bl::cublasStatus_t, call: &'static str) -> Result<()> {
        match r as u32 {
            0 => Ok(()),
            code => {
                let status = if code == CUBLAS_STATUS_ALLOC_FAILED { Status::OutOfMemory } else { Status::CudaError };
                Err(Error::new(status, "cuda", format!("{} ({call}, status {code})", cublas_status_text(code))))
            }
        }
    }

    // ------------------------------------------------------------------
    // Probe

    pub(crate) fn probe() -> std::result::Result<Vec<Arc<dyn Device>>, String> {
        let drv = driver()?;
        guard("probing CUDA devices", || probe_devices(drv)).and_then(|r| r)
    }

    fn probe_devices(drv: &'static Driver) -> std::result::Result<Vec<Arc<dyn Device>>, String> {
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

    // ------------------------------------------------------------------
    // Devices

    /// A retained primary context, released when the last user goes.
    struct Ctx {
        ctx: cu::CUcontext,
        dev: cu::CUdevice,
    }

    // SAFETY: a CUcontext is a driver handle that any thread may make current.
    unsafe impl Send for Ctx {}
    // SAFETY: as for Send; Ctx is never mutated.
    unsafe impl Sync for Ctx {}

    impl Ctx {
        /// Make this context current on the calling thread.
        fn bind(&self) -> Result<()> {
            // SAFETY: the context is retained for as long as self lives.
            ck(unsafe { cu::cuCtxSetCurrent(self.ctx) }, "cuCtxSetCurrent")
        }
    }

    impl Drop for Ctx {
        fn drop(&mut self) {
            // SAFETY: balances the retain in CudaDevice::open.
            unsafe { cu::cuDevicePrimaryCtxRelease_v2(self.dev) };
        }
    }

    struct Ev(cu::CUevent);
    // SAFETY: a CUevent is a driver handle usable from any thread.
    unsafe impl Send for Ev {}

    /// Idle events of one device, reused as markers.
    struct Events {
        ctx: Arc<Ctx>,
        idle: Mutex<Vec<Ev>>,
    }

    impl Events {
        /// An idle event (the context is current).
        fn take(&self) -> Result<cu::CUevent> {
            if let Some(e) = self.idle.lock().pop() {
                return Ok(e.0);
            }
            let mut e: cu::CUevent = null_mut();
            let flags = cu::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
            // SAFETY: writes one handle; the context is current.
            ck(unsafe { cu::cuEventCreate(&mut e, flags) }, "cuEventCreate")?;
            Ok(e)
        }

        /// Return an event. Re-recording it later does not affect waits
        /// already queued on it (they wait for the recording they saw).
        fn give(&self, e: cu::CUevent) {
            let mut idle = self.idle.lock();
            if idle.len() < MAX_POOLED_EVENTS {
                idle.push(Ev(e));
                return;
            }
            drop(idle);
            if self.ctx.bind().is_ok() {
                // SAFETY: the event belongs to this context and nobody holds it.
                unsafe { cu::cuEventDestroy_v2(e) };
            }
        }
    }

    impl Drop for Events {
        fn drop(&mut self) {
            if self.ctx.bind().is_err() {
                return;
            }
            for e in self.idle.get_mut().drain(..) {
                // SAFETY: idle events belong to this context; nobody holds them.
                unsafe { cu::cuEventDestroy_v2(e.0) };
            }
        }
    }

    /// A marker: an event recorded on one stream of a CUDA device.
    struct CudaMarker {
        event: cu::CUevent,
        events: Arc<Events>,
    }

    // SAFETY: the event handle is usable from any thread; the marker only
    // passes it to cuStreamWaitEvent and finally back to its pool.
    unsafe impl Send for CudaMarker {}
    // SAFETY: as for Send; the marker is never mutated.
    unsafe impl Sync for CudaMarker {}

    impl Drop for CudaMarker {
        fn drop(&mut self) {
            self.events.give(self.event);
        }
    }

    struct BlasHandle(bl::cublasHandle_t);
    // SAFETY: a cuBLAS handle may move between threads; it is only used under
    // its stream slot's mutex.
    unsafe impl Send for BlasHandle {}

    struct Slot {
        stream: cu::CUstream,
        /// Created at the first BLAS call on this stream, bound to it once.
        blas: Mutex<Option<BlasHandle>>,
    }

    /// One CUDA device (see the module notes).
    pub(crate) struct CudaDevice {
        ordinal: u32,
        ctx: Arc<Ctx>,
        describe: String,
        slots: Vec<Slot>,
        /// Internal stream on which `free` queues stream-ordered frees.
        free_stream: cu::CUstream,
        /// Whether `free` uses cuMemFreeAsync (cleared if the driver refuses it).
        async_free: AtomicBool,
        events: Arc<Events>,
        /// Pageable fallbacks of `alloc_host` (address -> layout).
        pageable: Mutex<HashMap<usize, std::alloc::Layout>>,
    }

    // SAFETY: the raw handles (streams, events, context) are thread-safe
    // driver objects; the cuBLAS handles sit behind mutexes; the rest is
    // plain data or synchronised.
    unsafe impl Send for CudaDevice {}
    // SAFETY: as for Send.
    unsafe impl Sync for CudaDevice {}

    impl CudaDevice {
        fn open(ordinal: u32, drv: &Driver) -> Result<CudaDevice> {
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
        fn enter(&self, id: StreamId) -> Result<&Slot> {
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

        /// Queue one cuBLAS call on stream `id` with that stream's handle.
        fn with_blas(
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
                    let bound = blas_ck(
                        unsafe { bl::cublasSetStream_v2(h, slot.stream as bl::cudaStream_t) },
                        "cublasSetStream",
                    );
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

        /// The context owning device address `p` (ours when unknown).
        fn owner(&self, p: Place) -> cu::CUcontext {
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

    fn to_int(v: usize, what: &str) -> Result<c_int> {
        c_int::try_from(v).map_err(|_| {
            Error::new(Status::InvalidArgument, "cuda", format!("{what} = {v} exceeds cuBLAS's 32-bit sizes"))
        })
    }

    fn not_float(dtype: DType, op: &str) -> Error {
        Error::new(
            Status::Unsupported,
            "cuda",
            format!("{op} on a CUDA device takes f32, f64, c64 or c128, not {}", dtype.name()),
        )
    }

    fn c32(s: Scalar) -> bl::cuComplex {
        bl::cuComplex { x: s.re as f32, y: s.im as f32 }
    }

    fn c64(s: Scalar) -> bl::cuDoubleComplex {
        bl::cuDoubleComplex { x: s.re, y: s.im }
    }

    fn op(t: Trans, dtype: DType) -> bl::cublasOperation_t {
        match t {
            Trans::N => bl::cublasOperation_t::CUBLAS_OP_N,
            Trans::T => bl::cublasOperation_t::CUBLAS_OP_T,
            Trans::C if dtype.is_complex() => bl::cublasOperation_t::CUBLAS_OP_C,
            Trans::C => bl::cublasOperation_t::CUBLAS_OP_T,
        }
    }

    fn dp<T>(p: DevPtr) -> *mut T {
        p as usize as *mut T
    }

    /// A side of a 2-D copy: (memory type, host address, device address).
    fn side(p: Place) -> (cu::CUmemorytype, *mut c_void, cu::CUdeviceptr) {
        match p {
            Place::Host(h) => (cu::CUmemorytype::CU_MEMORYTYPE_HOST, h as *mut c_void, 0),
            Place::Device(d) => (cu::CUmemorytype::CU_MEMORYTYPE_DEVICE, null_mut(), d),
        }
    }

    /// The stream callback behind `notify`. The status comes as the integer
    /// it is in C (an enum in cudarc's signature, same ABI).
    unsafe extern "C" fn notify_trampoline(_stream: cu::CUstream, status: u32, user: *mut c_void) {
        // SAFETY: `user` is the Box<Notify> leaked by `notify` for exactly
        // this callback, which the driver calls once.
        let notify = unsafe { Box::from_raw(user as *mut Notify) };
        let result = if status == 0 {
            Ok(())
        } else {
            Err(Error::new(
                Status::CudaError,
                "cuda",
                format!("{} (reported to a stream callback)", error_text(status)),
            ))
        };
        // A panic must not unwind into the driver's thread.
        let _ = catch_unwind(AssertUnwindSafe(move || notify(result)));
    }

    fn stream_callback() -> cu::CUstreamCallback {
        let f: unsafe extern "C" fn(cu::CUstream, u32, *mut c_void) = notify_trampoline;
        // SAFETY: CUresult is a #[repr(u32)] enum, passed like u32: the two
        // function pointer types have the same ABI.
        Some(unsafe {
            std::mem::transmute::<
                unsafe extern "C" fn(cu::CUstream, u32, *mut c_void),
                unsafe extern "C" fn(cu::CUstream, cu::CUresult, *mut c_void),
            >(f)
        })
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
            if bytes == 0 {
                return Err(Error::new(Status::InvalidArgument, "cuda", "a device allocation needs at least one byte"));
            }
            self.ctx.bind()?;
            let mut p: cu::CUdeviceptr = 0;
            // SAFETY: writes one address; the context is current.
            let r = unsafe { cu::cuMemAlloc_v2(&mut p, bytes) } as u32;
            match r {
                0 => Ok(p),
                CUDA_ERROR_OUT_OF_MEMORY => Err(Error::new(
                    Status::OutOfMemory,
                    "cuda",
                    format!("{} (cuMemAlloc of {bytes} bytes on CUDA device {})", error_text(r), self.ordinal),
                )),
                code => Err(cu_error(code, "cuMemAlloc")),
            }
        }

        unsafe fn free(&self, ptr: DevPtr) {
            if self.ctx.bind().is_err() {
                return;
            }
            if self.async_free.load(Ordering::Relaxed) {
                // SAFETY: the caller guarantees `ptr` came from alloc and no
                // work uses it; the free stream holds only frees, so this
                // waits for nothing.
                let r = unsafe { cu::cuMemFreeAsync(ptr, self.free_stream) } as u32;
                if r == 0 {
                    return;
                }
                // The driver refuses stream-ordered frees of this memory:
                // free synchronously from now on.
                self.async_free.store(false, Ordering::Relaxed);
            }
            // SAFETY: as above.
            unsafe { cu::cuMemFree_v2(ptr) };
        }

        fn alloc_host(&self, bytes: usize) -> Result<*mut u8> {
            if bytes == 0 {
                return Err(Error::new(Status::InvalidArgument, "cuda", "a host allocation needs at least one byte"));
            }
            self.ctx.bind()?;
            let mut p: *mut c_void = null_mut();
            // SAFETY: writes one address; the context is current.
            let r = unsafe { cu::cuMemHostAlloc(&mut p, bytes, cu::CU_MEMHOSTALLOC_PORTABLE) } as u32;
            if r == 0 && !p.is_null() {
                return Ok(p as *mut u8);
            }
            // Page-locked memory refused: pageable memory is slower but correct.
            let layout = std::alloc::Layout::from_size_align(bytes, 256).map_err(|_| {
                Error::new(Status::InvalidArgument, "cuda", format!("host allocation of {bytes} bytes"))
            })?;
            // SAFETY: the layout has a non-zero size.
            let q = unsafe { std::alloc::alloc(layout) };
            if q.is_null() {
                return Err(Error::new(
                    Status::OutOfMemory,
                    "cuda",
                    format!("host allocation of {bytes} bytes failed ({})", error_text(r)),
                ));
            }
            self.pageable.lock().insert(q as usize, layout);
            Ok(q)
        }

        unsafe fn free_host(&self, ptr: *mut u8) {
            if let Some(layout) = self.pageable.lock().remove(&(ptr as usize)) {
                // SAFETY: allocated in alloc_host with this layout; freed once.
                unsafe { std::alloc::dealloc(ptr, layout) };
                return;
            }
            if self.ctx.bind().is_ok() {
                // SAFETY: the caller guarantees ptr came from alloc_host and no work uses it.
                unsafe { cu::cuMemFreeHost(ptr as *mut c_void) };
            }
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
            let slot = self.enter(stream)?;
            if width == 0 || height == 0 {
                return Ok(());
            }
            let (dst_ctx, src_ctx) = (self.owner(dst), self.owner(src));
            // One row, or rows that follow one another on both sides: a 1-D
            // copy (no pitch limit of the 2-D calls).
            if height == 1 || (dpitch == width && spitch == width) {
                let bytes = width.checked_mul(height).ok_or_else(|| {
                    Error::new(Status::InvalidArgument, "cuda", format!("a copy of {height} rows of {width} bytes"))
                })?;
                let s = slot.stream;
                // SAFETY (each call): the caller guarantees both regions are
                // valid for `bytes` until the copy is done.
                let (r, call) = match (dst, src) {
                    (Place::Device(d), Place::Host(h)) => {
                        (unsafe { cu::cuMemcpyHtoDAsync_v2(d, h as *const c_void, bytes, s) }, "cuMemcpyHtoDAsync")
                    }
                    (Place::Host(h), Place::Device(d)) => {
                        (unsafe { cu::cuMemcpyDtoHAsync_v2(h as *mut c_void, d, bytes, s) }, "cuMemcpyDtoHAsync")
                    }
                    (Place::Device(d), Place::Device(e)) if dst_ctx == src_ctx => {
                        (unsafe { cu::cuMemcpyDtoDAsync_v2(d, e, bytes, s) }, "cuMemcpyDtoDAsync")
                    }
                    (Place::Device(d), Place::Device(e)) => {
                        (unsafe { cu::cuMemcpyPeerAsync(d, dst_ctx, e, src_ctx, bytes, s) }, "cuMemcpyPeerAsync")
                    }
                    (Place::Host(d), Place::Host(h)) => (
                        unsafe { cu::cuMemcpyAsync(d as cu::CUdeviceptr, h as cu::CUdeviceptr, bytes, s) },
                        "cuMemcpyAsync",
                    ),
                };
                return ck(r, call);
            }
            let (dst_type, dst_host, dst_dev) = side(dst);
            let (src_type, src_host, src_dev) = side(src);
            if dst_ctx == self.ctx.ctx && src_ctx == self.ctx.ctx {
                let p = cu::CUDA_MEMCPY2D {
                    srcXInBytes: 0,
                    srcY: 0,
                    srcMemoryType: src_type,
                    srcHost: src_host as *const c_void,
                    srcDevice: src_dev,
                    srcArray: null_mut(),
                    srcPitch: spitch,
                    dstXInBytes: 0,
                    dstY: 0,
                    dstMemoryType: dst_type,
                    dstHost: dst_host,
                    dstDevice: dst_dev,
                    dstArray: null_mut(),
                    dstPitch: dpitch,
                    WidthInBytes: width,
                    Height: height,
                };
                // SAFETY: the caller guarantees both regions are valid until
                // the copy is done; `p` is read before the call returns.
                ck(unsafe { cu::cuMemcpy2DAsync_v2(&p, slot.stream) }, "cuMemcpy2DAsync")
            } else {
                // Memory of another device: a peer copy, contexts named.
                let p = cu::CUDA_MEMCPY3D_PEER {
                    srcXInBytes: 0,
                    srcY: 0,
                    srcZ: 0,
                    srcLOD: 0,
                    srcMemoryType: src_type,
                    srcHost: src_host as *const c_void,
                    srcDevice: src_dev,
                    srcArray: null_mut(),
                    srcContext: src_ctx,
                    srcPitch: spitch,
                    srcHeight: height,
                    dstXInBytes: 0,
                    dstY: 0,
                    dstZ: 0,
                    dstLOD: 0,
                    dstMemoryType: dst_type,
                    dstHost: dst_host,
                    dstDevice: dst_dev,
                    dstArray: null_mut(),
                    dstContext: dst_ctx,
                    dstPitch: dpitch,
                    dstHeight: height,
                    WidthInBytes: width,
                    Height: height,
                    Depth: 1,
                };
                // SAFETY: as above.
                ck(unsafe { cu::cuMemcpy3DPeerAsync(&p, slot.stream) }, "cuMemcpy3DPeerAsync")
            }
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
            let slot = self.enter(stream)?;
            if !matches!(elem, 1 | 2 | 4) {
                return Err(Error::new(
                    Status::InvalidArgument,
                    "cuda",
                    format!("memset element size {elem} (1, 2 or 4)"),
                ));
            }
            if width == 0 || height == 0 {
                return Ok(());
            }
            let s = slot.stream;
            // Width is in elements, pitch in bytes. One row, or rows back to
            // back: a 1-D memset (no pitch limit of the 2-D calls).
            if height == 1 || width.checked_mul(elem) == Some(pitch) {
                let count = width.checked_mul(height).ok_or_else(|| {
                    Error::new(Status::InvalidArgument, "cuda", format!("a memset of {height} rows of {width}"))
                })?;
                // SAFETY (all three): the caller guarantees the region is
                // valid device memory until the memset is done.
                let r = match elem {
                    1 => unsafe { cu::cuMemsetD8Async(dst, value as u8, count, s) },
                    2 => unsafe { cu::cuMemsetD16Async(dst, value as u16, count, s) },
                    _ => unsafe { cu::cuMemsetD32Async(dst, value, count, s) },
                };
                return ck(r, "cuMemsetAsync");
            }
            // SAFETY (all three): as above.
            let r = match elem {
                1 => unsafe { cu::cuMemsetD2D8Async(dst, pitch, value as u8, width, height, s) },
                2 => unsafe { cu::cuMemsetD2D16Async(dst, pitch, value as u16, width, height, s) },
                _ => unsafe { cu::cuMemsetD2D32Async(dst, pitch, value, width, height, s) },
            };
            ck(r, "cuMemsetD2DAsync")
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
                    self.with_blas(stream, "cublasSaxpy", |h| unsafe {
                        bl::cublasSaxpy_v2(h, n, &a, dp(x), ix, dp(y), iy)
                    })
                }
                DType::F64 => {
                    let a = alpha.re;
                    self.with_blas(stream, "cublasDaxpy", |h| unsafe {
                        bl::cublasDaxpy_v2(h, n, &a, dp(x), ix, dp(y), iy)
                    })
                }
                DType::C64 => {
                    let a = c32(alpha);
                    self.with_blas(stream, "cublasCaxpy", |h| unsafe {
                        bl::cublasCaxpy_v2(h, n, &a, dp(x), ix, dp(y), iy)
                    })
                }
                DType::C128 => {
                    let a = c64(alpha);
                    self.with_blas(stream, "cublasZaxpy", |h| unsafe {
                        bl::cublasZaxpy_v2(h, n, &a, dp(x), ix, dp(y), iy)
                    })
                }
                _ => Err(not_float(dtype, "axpy")),
            }
        }

        unsafe fn gemm(&self, stream: StreamId, dtype: DType, g: &GemmArgs) -> Result<()> {
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

        fn record(&self, stream: StreamId) -> Result<Marker> {
            let slot = self.enter(stream)?;
            let event = self.events.take()?;
            // SAFETY: the event and the stream belong to this (current) context.
            if let Err(e) = ck(unsafe { cu::cuEventRecord(event, slot.stream) }, "cuEventRecord") {
                self.events.give(event);
                return Err(e);
            }
            Ok(Arc::new(CudaMarker { event, events: self.events.clone() }))
        }

        fn wait_marker(&self, stream: StreamId, marker: &Marker) -> Result<()> {
            let slot = self.enter(stream)?;
            let m = (**marker).downcast_ref::<CudaMarker>().ok_or_else(|| {
                Error::new(Status::InvalidArgument, "cuda", "the marker was not recorded on a CUDA device")
            })?;
            // SAFETY: the marker keeps its event alive; waiting on an event of
            // any context is allowed.
            ck(unsafe { cu::cuStreamWaitEvent(slot.stream, m.event, 0) }, "cuStreamWaitEvent")
        }

        fn notify(&self, stream: StreamId, notify: Notify) -> Result<()> {
            let slot = self.enter(stream)?;
            let user = Box::into_raw(Box::new(notify)) as *mut c_void;
            // SAFETY: the driver calls the trampoline once with `user`, which
            // owns the boxed Notify from here on.
            let r = unsafe { cu::cuStreamAddCallback(slot.stream, stream_callback(), user, 0) };
            if let Err(e) = ck(r, "cuStreamAddCallback") {
                // Not queued: the callback will never run; take the box back.
                // SAFETY: `user` came from Box::into_raw just above and was not handed over.
                drop(unsafe { Box::from_raw(user as *mut Notify) });
                return Err(e);
            }
            Ok(())
        }
    }

    impl std::fmt::Debug for CudaDevice {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.describe)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn probe_without_driver_is_a_reason_not_a_panic() {
            let first = catch_unwind(probe).expect("probe must not panic");
            let second = catch_unwind(probe).expect("probe must not panic the second time");
            match (&first, &second) {
                (Err(a), Err(b)) => {
                    println!("probe: {a}");
                    assert!(!a.is_empty());
                    assert_eq!(a, b, "a repeated probe gives the same reason");
                }
                (Ok(a), Ok(b)) => {
                    println!("probe found {} CUDA devices", a.len());
                    assert_eq!(a.len(), b.len());
                }
                _ => panic!("probe answered differently twice"),
            }
        }

        #[test]
        fn no_libcuda_here_means_not_found() {
            let c = CString::new("libcuda.so.1").unwrap();
            // SAFETY: a NUL-terminated name; the handle is closed at once.
            let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
            if !h.is_null() {
                // SAFETY: h came from dlopen just above.
                unsafe { libc::dlclose(h) };
                println!("this machine has libcuda.so.1; nothing to check");
                return;
            }
            let Err(why) = probe() else { panic!("no driver library: probe must fail") };
            assert!(why.contains("libcuda.so.1 not found"), "{why}");
            assert!(why.contains("cannot open shared object file"), "{why}");
        }

        #[test]
        fn a_missing_library_is_an_error_not_a_panic() {
            let fake = vec!["libtensorasync-no-such-driver.so.1".to_string()];
            let Err(why) = catch_unwind(|| load_driver(&fake)).expect("no panic") else { panic!("must fail") };
            assert!(why.starts_with("libtensorasync-no-such-driver.so.1 not found:"), "{why}");
            let why = catch_unwind(|| load_cublas(&fake)).expect("no panic").expect_err("must fail");
            assert!(why.contains("not found"), "{why}");
            assert!(load_driver(&[]).is_err());
        }

        #[test]
        fn a_library_without_the_symbols_is_an_error() {
            // libc opens everywhere and has none of the driver's symbols.
            let libc_names = vec!["libc.so.6".to_string()];
            let Err(why) = load_driver(&libc_names) else { panic!("libc is no CUDA driver") };
            assert!(why.contains("lacks cuGetErrorName"), "{why}");
            let why = load_cublas(&libc_names).expect_err("libc is no cuBLAS");
            assert!(why.contains("lacks cublasCreate_v2"), "{why}");
        }

        #[test]
        fn loader_names_match_the_messages() {
            let cuda = cudarc::get_lib_name_candidates("cuda");
            assert!(cuda.iter().any(|n| n == "libcuda.so.1"), "{cuda:?}");
            let blas = cudarc::get_lib_name_candidates("cublas");
            assert_eq!(preferred_versioned(&blas, "libcublas.so"), "libcublas.so.13", "{blas:?}");
            for want in ["libcublas.so.13", "libcublas.so.12", "libcublas.so.11"] {
                assert!(blas.iter().any(|n| n == want), "{want} missing from {blas:?}");
            }
        }

        #[test]
        fn status_texts() {
            assert!(cublas_status_text(7).starts_with("CUBLAS_STATUS_INVALID_VALUE"));
            assert!(cublas_status_text(12345).starts_with("CUBLAS_STATUS_UNKNOWN"));
            let e = blas_ck(bl::cublasStatus_t::CUBLAS_STATUS_ALLOC_FAILED, "cublasCreate").unwrap_err();
            assert_eq!(e.status(), Status::OutOfMemory);
            let e = blas_ck(bl::cublasStatus_t::CUBLAS_STATUS_INVALID_VALUE, "cublasDgemm").unwrap_err();
            assert_eq!(e.status(), Status::CudaError);
            assert!(e.message().contains("cublasDgemm"), "{}", e.message());
            // Without a loaded driver the text still names the code.
            if DRIVER.get().is_none_or(|d| d.is_err()) {
                assert!(error_text(700).contains("700"));
            }
        }

        #[test]
        fn cublas_unavailable_is_its_own_status() {
            // Only meaningful where cuBLAS is absent (this machine); elsewhere it loads.
            if let Err(e) = cublas() {
                assert_eq!(e.status(), Status::CudaUnavailable);
                assert!(e.message().contains("cuBLAS is not available"), "{}", e.message());
            }
        }
    }
}
