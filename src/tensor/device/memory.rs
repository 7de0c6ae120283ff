//! Device memory as library [`Storage`]: the device address stands in for
//! the host pointer (never dereferenced on the host), and the release hook
//! gives the memory back to the device after the last access.

use std::ptr::NonNull;

use super::registry::device;
use crate::error::{Error, Result, Status};
use crate::tensor::storage::Storage;

/// `bytes` of device memory on device `ordinal` (uninitialised).
pub(crate) fn alloc(ordinal: u32, bytes: usize, origin: &'static str) -> Result<Storage> {
    let dev = device(ordinal).map_err(|e| e.with_origin(origin))?;
    if bytes == 0 {
        // A dangling, aligned, never-dereferenced address for empty tensors.
        // SAFETY: no bytes are ever accessed through it, and there is nothing to free.
        return Ok(unsafe { Storage::wrap(NonNull::<u128>::dangling().cast(), 0, None) });
    }
    let ptr = dev.alloc(bytes).map_err(|e| e.with_origin(origin))?;
    let addr = NonNull::new(ptr as usize as *mut u8)
        .ok_or_else(|| Error::new(Status::CudaError, origin, "the device returned a null allocation"))?;
    let release = Box::new(move || {
        // SAFETY: `ptr` came from this device's `alloc`; the hook runs once,
        // after the last access (the storage's contract), so no work uses it.
        unsafe { dev.free(ptr) }
    });
    // SAFETY: the address is only handed to device calls, which are valid
    // for `bytes` bytes until the release hook frees it.
    Ok(unsafe { Storage::wrap(addr, bytes, Some(release)) })
}
