//! Stream markers and completion callbacks.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use cudarc::driver::sys as cu;

use super::device::CudaDevice;
use super::driver::{ck, error_text};
use super::events::CudaMarker;
use crate::error::{Error, Result, Status};
use crate::tensor::device::interface::{Marker, Notify, StreamId};

/// The stream callback behind `notify`. The status comes as the integer
/// it is in C (an enum in cudarc's signature, same ABI).
pub(super) unsafe extern "C" fn notify_trampoline(_stream: cu::CUstream, status: u32, user: *mut c_void) {
    // SAFETY: `user` is the Box<Notify> leaked by `notify` for exactly
    // this callback, which the driver calls once.
    let notify = unsafe { Box::from_raw(user as *mut Notify) };
    let result = if status == 0 {
        Ok(())
    } else {
        Err(Error::new(Status::CudaError, "cuda", format!("{} (reported to a stream callback)", error_text(status))))
    };
    // A panic must not unwind into the driver's thread.
    let _ = catch_unwind(AssertUnwindSafe(move || notify(result)));
}

pub(super) fn stream_callback() -> cu::CUstreamCallback {
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

impl CudaDevice {
    pub(super) fn stream_record(&self, stream: StreamId) -> Result<Marker> {
        let slot = self.enter(stream)?;
        let event = self.events.take()?;
        // SAFETY: the event and the stream belong to this (current) context.
        if let Err(e) = ck(unsafe { cu::cuEventRecord(event, slot.stream) }, "cuEventRecord") {
            self.events.give(event);
            return Err(e);
        }
        Ok(Arc::new(CudaMarker { event, events: self.events.clone() }))
    }

    pub(super) fn stream_wait_marker(&self, stream: StreamId, marker: &Marker) -> Result<()> {
        let slot = self.enter(stream)?;
        let m = (**marker).downcast_ref::<CudaMarker>().ok_or_else(|| {
            Error::new(Status::InvalidArgument, "cuda", "the marker was not recorded on a CUDA device")
        })?;
        // SAFETY: the marker keeps its event alive; waiting on an event of
        // any context is allowed.
        ck(unsafe { cu::cuStreamWaitEvent(slot.stream, m.event, 0) }, "cuStreamWaitEvent")
    }

    pub(super) fn stream_notify(&self, stream: StreamId, notify: Notify) -> Result<()> {
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
