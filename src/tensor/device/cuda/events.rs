//! Pooled CUDA events, and the markers made of them.

use std::ptr::null_mut;
use std::sync::Arc;

use cudarc::driver::sys as cu;
use parking_lot::Mutex;

use super::driver::{ck, Ctx};
use crate::error::Result;

/// Idle events kept per device for reuse as markers.
pub(super) const MAX_POOLED_EVENTS: usize = 256;

pub(super) struct Ev(pub(super) cu::CUevent);
// SAFETY: a CUevent is a driver handle usable from any thread.
unsafe impl Send for Ev {}

/// Idle events of one device, reused as markers.
pub(super) struct Events {
    pub(super) ctx: Arc<Ctx>,
    pub(super) idle: Mutex<Vec<Ev>>,
}

impl Events {
    /// An idle event (the context is current).
    pub(super) fn take(&self) -> Result<cu::CUevent> {
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
    pub(super) fn give(&self, e: cu::CUevent) {
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
pub(super) struct CudaMarker {
    pub(super) event: cu::CUevent,
    pub(super) events: Arc<Events>,
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
