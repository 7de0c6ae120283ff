//! Readiness events for tensors.

use super::{arg, guard, make_handle, need, put, ta_error, ta_event, ta_status, ta_tensor};

/// A new event that completes once every operation enrolled on `tensor` so
/// far (for a view, on the elements it touches; for a block view, on each of
/// its blocks) has completed. Never blocks. Its final status is what
/// `ta_tensor_wait` would return at that point: `TA_STATUS_OK` for a clean
/// value, the status of the error that poisoned it (`ta_event_error` gives
/// that error object), or `TA_STATUS_UNCONSTRUCTED`. Operations submitted
/// after this call are not waited for. Free the event with `ta_event_free`.
#[no_mangle]
pub extern "C" fn ta_tensor_ready(
    tensor: *const ta_tensor,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_ready";
    guard(O, error, || {
        need(event_out, O, "event_out")?;
        let t = arg(tensor, O, "tensor")?;
        let ev = t.ready();
        put(event_out, make_handle(ev, O)?);
        Ok(())
    })
}
