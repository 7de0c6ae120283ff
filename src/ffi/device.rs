//! CUDA devices from C: how many there are, and what each is.

use std::ffi::c_char;

use super::error::copy_str;
use super::{guard, need, put, ta_error, ta_status};
use crate::error::{Error, Status};

/// The number of CUDA devices. `TA_STATUS_CUDA_UNAVAILABLE` (with the reason
/// in `*error`) when there is no driver or no device; the library then runs
/// everything on the host and never crashes for lack of CUDA. With the
/// environment variable `TA_SIMULATED_DEVICES=n` set before the first device
/// use, the process gets `n` simulated devices instead (host memory behind
/// the device interface, for trying and testing device code without a GPU).
#[no_mangle]
pub extern "C" fn ta_cuda_device_count(count_out: *mut usize, error: *mut *mut ta_error) -> ta_status {
    const O: &str = "ta_cuda_device_count";
    guard(O, error, || {
        need(count_out, O, "count_out")?;
        let n = crate::tensor::device::device_count().map_err(|e| e.with_origin(O))?;
        put(count_out, n);
        Ok(())
    })
}

/// Describe CUDA device `ordinal` (kind, name, memory) into `buf` as
/// `ta_error_message` does. `TA_STATUS_CUDA_UNAVAILABLE` for a device that
/// does not exist.
#[no_mangle]
pub extern "C" fn ta_cuda_device_info(ordinal: u32, buf: *mut c_char, cap: usize, len_out: *mut usize) -> ta_status {
    const O: &str = "ta_cuda_device_info";
    guard(O, std::ptr::null_mut(), || {
        let dev = crate::tensor::device::device(ordinal).map_err(|e| e.with_origin(O))?;
        if buf.is_null() && cap > 0 {
            return Err(Error::new(Status::NullPointer, O, "buf is NULL but cap > 0"));
        }
        copy_str(&dev.describe(), buf, cap, len_out);
        Ok(())
    })
}
