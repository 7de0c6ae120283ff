//! The CUDA driver: loading it once per process, the names of its status
//! codes, checked calls, and devices' primary contexts.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr::null;
use std::sync::OnceLock;

use cudarc::driver::sys as cu;

use super::loader::{guard, open_first, Lib};
use crate::error::{Error, Result, Status};

/// Every driver symbol this file calls (cudarc resolves each lazily at its
/// first call and panics if it is missing: check them all up front).
pub(super) const DRIVER_SYMBOLS: &[&str] = &[
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
pub(super) const DRIVER_OPTIONAL_ASYNC_FREE: &str = "cuMemFreeAsync";

/// The loaded driver: its library and the names of its status codes.
pub(super) struct Driver {
    /// Kept open for the life of the process.
    pub(super) _lib: Lib,
    /// Status value -> "CUDA_ERROR_NAME: description", for every value the
    /// driver names. Stream callbacks read it (they must not call CUDA).
    pub(super) errors: HashMap<u32, String>,
    /// `cuDriverGetVersion`, e.g. 13000 for 13.0.
    pub(super) version: i32,
    pub(super) async_free: bool,
}

pub(super) static DRIVER: OnceLock<std::result::Result<Driver, String>> = OnceLock::new();

pub(super) fn driver() -> std::result::Result<&'static Driver, String> {
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
pub(super) fn load_driver(candidates: &[String]) -> std::result::Result<Driver, String> {
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
pub(super) type ErrTextFn = unsafe extern "C" fn(u32, *mut *const c_char) -> u32;

pub(super) fn error_table(lib: &Lib) -> HashMap<u32, String> {
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

pub(super) fn lookup(table: &HashMap<u32, String>, code: u32) -> String {
    table.get(&code).cloned().unwrap_or_else(|| format!("CUDA error {code}: unknown status"))
}

/// "CUDA_ERROR_NAME: description" for a status value (no CUDA call).
pub(super) fn error_text(code: u32) -> String {
    match DRIVER.get() {
        Some(Ok(d)) => lookup(&d.errors, code),
        _ => format!("CUDA error {code}: unknown status"),
    }
}

pub(super) const CUDA_ERROR_OUT_OF_MEMORY: u32 = 2;

pub(super) fn cu_error(code: u32, call: &str) -> Error {
    Error::new(Status::CudaError, "cuda", format!("{} ({call})", error_text(code)))
}

/// Check a driver call's status. It is read as the integer it is in C.
pub(super) fn ck(r: cu::CUresult, call: &'static str) -> Result<()> {
    match r as u32 {
        0 => Ok(()),
        code => Err(cu_error(code, call)),
    }
}

/// A retained primary context, released when the last user goes.
pub(super) struct Ctx {
    pub(super) ctx: cu::CUcontext,
    pub(super) dev: cu::CUdevice,
}

// SAFETY: a CUcontext is a driver handle that any thread may make current.
unsafe impl Send for Ctx {}
// SAFETY: as for Send; Ctx is never mutated.
unsafe impl Sync for Ctx {}

impl Ctx {
    /// Make this context current on the calling thread.
    pub(super) fn bind(&self) -> Result<()> {
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
