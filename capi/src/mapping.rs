//! Host access from C: mappings (SPEC §2.8).

use std::sync::Arc;

use super::args::timeout_arg;
use super::{
    arg, guard, make_handle, need, put, ta_error, ta_event, ta_mapping, ta_mode, ta_status, ta_tensor, ta_view,
};
use ta::GrantedView;
use ta::Mode;
use ta::{Error, Status};

pub(crate) fn mode_arg(m: ta_mode, origin: &'static str) -> Result<Mode, Error> {
    Mode::from_u32(m).ok_or_else(|| Error::new(Status::InvalidArgument, origin, format!("mode {m} is not a ta_mode")))
}

/// The C view of a granted access (pointers into `v`).
pub(crate) fn c_view(v: &GrantedView) -> ta_view {
    ta_view {
        data: v.ptr.cast(),
        extents: v.extents.as_ptr(),
        strides: v.strides.as_ptr(),
        rank: v.extents.len(),
        dtype: v.dtype as u32,
        mode: v.mode as u32,
        domain: crate::domain::to_c(v.domain),
        conj: v.conj as u8,
    }
}

/// Acquire host access to `tensor` and wait up to `timeout_ns`
/// (`TA_WAIT_FOREVER`: no limit) until it is granted; on success
/// `*mapping_out` is a granted mapping (`ta_mapping_view` gives the data).
/// `mode` is `TA_MODE_READ` (waits for earlier writers; later readers do not
/// wait for the mapping, later writers do), `TA_MODE_WRITE` (a pure
/// overwrite: waits for every earlier access; once the mapping's view was
/// taken, freeing the mapping counts as a successful overwrite, which cleans
/// a poisoned tensor) or `TA_MODE_UPDATE` (read and write; waits for every
/// earlier access). The access is enrolled like an operation's, so it is
/// ordered with operations submitted before and after it.
///
/// Statuses: a READ or UPDATE of a poisoned tensor (or poisoned elements of
/// a view) fails with the status of the tensor's error, which `*error`
/// receives (the same error object as the failing operation's);
/// `TA_STATUS_UNCONSTRUCTED`; `TA_STATUS_DOMAIN_MISMATCH` for a device
/// tensor; `TA_STATUS_READ_ONLY` for WRITE or UPDATE on a read-only tensor or
/// view; `TA_STATUS_TIMEOUT` if not granted in time (an access nothing
/// earlier holds up is granted within the call, so a `timeout_ns` of 0 tries
/// without waiting; on timeout nothing is returned, and
/// the enrolled access is released as soon as it is granted, so later work
/// is not held up); `TA_STATUS_WOULD_DEADLOCK` when called from a kernel on a
/// tensor that kernel accesses, or whose earlier operations wait for that
/// kernel (as does `ta_event_wait` on the event of `ta_tensor_acquire_async`
/// there). Mappings use the default runtime; a shutdown
/// of it with `TA_SHUTDOWN_CANCEL` cancels mappings that are not freed yet
/// (their data stays valid until `ta_mapping_free`).
#[no_mangle]
pub extern "C" fn ta_tensor_acquire(
    tensor: *const ta_tensor,
    mode: ta_mode,
    timeout_ns: i64,
    mapping_out: *mut *mut ta_mapping,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_acquire";
    guard(O, error, || {
        need(mapping_out, O, "mapping_out")?;
        let t = arg(tensor, O, "tensor")?;
        let m = t.acquire_named(O, mode_arg(mode, O)?, timeout_arg(timeout_ns))?;
        put(mapping_out, make_handle(Arc::new(m), O)?);
        Ok(())
    })
}

/// The non-blocking form of `ta_tensor_acquire`: enrolls the access now and
/// returns at once a mapping that is not yet granted, and an event (free it
/// with `ta_event_free`) that completes when the access is granted (status
/// `TA_STATUS_OK`) or fails (the status of the tensor's error, which
/// `ta_event_error` gives; the mapping then holds nothing and only needs
/// `ta_mapping_free`). Submission-time problems (unconstructed, device,
/// read-only tensor) fail this call as for `ta_tensor_acquire`. `event_out`
/// may be NULL.
#[no_mangle]
pub extern "C" fn ta_tensor_acquire_async(
    tensor: *const ta_tensor,
    mode: ta_mode,
    mapping_out: *mut *mut ta_mapping,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_acquire_async";
    guard(O, error, || {
        need(mapping_out, O, "mapping_out")?;
        let t = arg(tensor, O, "tensor")?;
        let m = Arc::new(t.acquire_async_named(O, mode_arg(mode, O)?)?);
        let ev = if event_out.is_null() { None } else { Some(make_handle(m.ready().clone(), O)?) };
        let h = match make_handle(m, O) {
            Ok(h) => h,
            Err(e) => {
                if let Some(ev) = ev {
                    super::event::ta_event_free(ev);
                }
                return Err(e);
            }
        };
        put(mapping_out, h);
        if let Some(ev) = ev {
            put(event_out, ev);
        }
        Ok(())
    })
}

/// The resolved view of a granted mapping: data, extents, strides (in
/// elements), rank, dtype, mode, domain and conj flag. Every pointer in it
/// stays valid until `ta_mapping_free`. For WRITE and UPDATE mappings the
/// data may be written. `TA_STATUS_PENDING` while the access is not granted
/// yet; the failure's status if the acquisition failed (or
/// `TA_STATUS_CANCELLED` if a shutdown cancelled it before the grant).
#[no_mangle]
pub extern "C" fn ta_mapping_view(mapping: *const ta_mapping, view_out: *mut ta_view) -> ta_status {
    const O: &str = "ta_mapping_view";
    guard(O, std::ptr::null_mut(), || {
        need(view_out, O, "view_out")?;
        let m = super::arg(mapping, O, "mapping")?;
        let v = c_view(m.view()?);
        put(view_out, v);
        Ok(())
    })
}

/// Release a mapping's access. Never blocks; a mapping not yet granted is
/// released when it is granted (and then counts as unused). Later writers
/// waiting behind the mapping then run. Pointers from `ta_mapping_view`
/// become invalid. NULL is a no-op; a freed mapping gives
/// `TA_STATUS_DOUBLE_FREE`.
#[no_mangle]
pub extern "C" fn ta_mapping_free(mapping: *mut ta_mapping) -> ta_status {
    super::free_handle(mapping)
}
