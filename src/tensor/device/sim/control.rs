//! The shared state of one simulated device and its test controls: pause
//! and resume, injected failures, memory limits, delays, and what ran.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::commands::{Cmd, SimOp, SimOpKind};
use super::memory::{layout, Block, ALLOCATIONS};

/// How many executed commands [`SimControl::log`] keeps.
const LOG_CAP: usize = 100_000;

/// Every simulated device made by this process, for [`control`].
pub(super) static DEVICES: Mutex<Vec<Weak<SimControl>>> = Mutex::new(Vec::new());

/// Unique device ids (see [`Block::device`]).
pub(super) static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The live controls of simulated device `ordinal` (see [`super::control`]).
#[cfg(any(test, feature = "internals"))]
pub(crate) fn find(ordinal: u32) -> Option<Arc<SimControl>> {
    DEVICES.lock().iter().filter_map(Weak::upgrade).find(|c| c.ordinal == ordinal && !c.dropped.load(SeqCst))
}

/// The shared state of one simulated device, and its test controls.
pub struct SimControl {
    pub(super) id: u64,
    pub(super) ordinal: u32,
    pub(super) nstreams: u32,
    pub(super) sched: Mutex<Sched>,
    /// One per stream; signalled when its queue grows, on resume and on drop.
    pub(super) wake: Vec<Condvar>,
    pub(super) fail_next: Mutex<Option<&'static str>>,
    pub(super) fail_next_call: Mutex<Option<&'static str>>,
    pub(super) memory_limit: Mutex<Option<usize>>,
    pub(super) delay_ns: AtomicU64,
    /// Device bytes allocated (reserved before the memory is allocated).
    pub(super) allocated: AtomicUsize,
    pub(super) host_allocated: AtomicUsize,
    /// Live `alloc_host` blocks: address -> size.
    pub(super) host_blocks: Mutex<HashMap<usize, usize>>,
    pub(super) executed: AtomicU64,
    pub(super) pending: AtomicUsize,
    pub(super) log: Mutex<VecDeque<SimOp>>,
    pub(super) invalid_frees: AtomicU64,
    /// Set when the SimDevice is dropped (its streams then drain and stop).
    pub(super) dropped: AtomicBool,
    #[cfg(test)]
    pub(super) panic_next: AtomicBool,
}

pub(super) struct Sched {
    pub(super) paused: bool,
    pub(super) shutdown: bool,
    pub(super) queues: Vec<VecDeque<Cmd>>,
    pub(super) started: Vec<bool>,
}

impl fmt::Debug for SimControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimControl")
            .field("ordinal", &self.ordinal)
            .field("streams", &self.nstreams)
            .field("allocated", &self.allocated())
            .field("executed", &self.executed())
            .field("pending", &self.pending())
            .finish_non_exhaustive()
    }
}

// The test controls: for the crate's tests (`internals` in test builds).
#[cfg(any(test, feature = "internals"))]
impl SimControl {
    /// The device's ordinal.
    pub fn ordinal(&self) -> u32 {
        self.ordinal
    }

    /// Streams finish their current command, then start no new command
    /// until [`SimControl::resume`]. Does not wait for running commands.
    pub fn pause(&self) {
        self.sched.lock().paused = true;
    }

    /// Let paused streams run again.
    pub fn resume(&self) {
        self.sched.lock().paused = false;
        for cv in &self.wake {
            cv.notify_all();
        }
    }

    /// The next command to execute on any stream of this device fails
    /// asynchronously: it does nothing (a marker it records is still
    /// reached, a marker wait does not wait, a notify callback is still
    /// called) and its stream's next notify reports `cuda_error_name`.
    pub fn fail_next(&self, cuda_error_name: &'static str) {
        *self.fail_next.lock() = Some(cuda_error_name);
    }

    /// The next [`crate::tensor::device::Device`] method call (other than `ordinal`, `describe`,
    /// `streams`, `free`, `free_host`) returns `Err` synchronously and queues
    /// nothing: `Status::CudaError` with a message starting with
    /// `cuda_error_name`; for `alloc`/`alloc_host` with
    /// `CUDA_ERROR_OUT_OF_MEMORY`, `Status::OutOfMemory`.
    pub fn fail_next_call(&self, cuda_error_name: &'static str) {
        *self.fail_next_call.lock() = Some(cuda_error_name);
    }

    /// Limit the device bytes that may be allocated at once (None: unlimited,
    /// the default). Allocations beyond it fail with `Status::OutOfMemory`.
    pub fn set_memory_limit(&self, bytes: Option<usize>) {
        *self.memory_limit.lock() = bytes;
    }

    /// Every command sleeps `d` (on its stream thread) before it runs.
    pub fn set_delay(&self, d: std::time::Duration) {
        self.delay_ns.store(d.as_nanos().min(u64::MAX as u128) as u64, SeqCst);
    }

    /// Page-locked (`alloc_host`) bytes currently allocated.
    pub fn host_allocated(&self) -> usize {
        self.host_allocated.load(SeqCst)
    }

    /// Executed commands in execution order (the last 100 000).
    pub fn log(&self) -> Vec<SimOp> {
        self.log.lock().iter().cloned().collect()
    }

    /// Forget the log.
    pub fn clear_log(&self) {
        self.log.lock().clear();
    }

    /// How many `free`/`free_host` calls named no live allocation of this
    /// device (a double free or a foreign pointer; the call did nothing).
    pub fn invalid_frees(&self) -> u64 {
        self.invalid_frees.load(SeqCst)
    }
}

impl SimControl {
    /// Device bytes currently allocated.
    pub fn allocated(&self) -> usize {
        self.allocated.load(SeqCst)
    }

    /// Commands executed so far (all streams). Updated before a notify
    /// callback runs and before a recorded marker is reached.
    pub fn executed(&self) -> u64 {
        self.executed.load(SeqCst)
    }

    /// Commands queued but not yet executed (all streams).
    pub fn pending(&self) -> usize {
        self.pending.load(SeqCst)
    }

    /// Make the next kernel-like command (copy, memset, BLAS) panic.
    #[cfg(test)]
    pub(super) fn panic_next(&self) {
        self.panic_next.store(true, SeqCst);
    }

    pub(super) fn delay(&self) -> Duration {
        Duration::from_nanos(self.delay_ns.load(SeqCst))
    }

    pub(super) fn finish(&self, stream: u32, kind: SimOpKind, failed: bool) {
        {
            let mut log = self.log.lock();
            if log.len() >= LOG_CAP {
                log.pop_front();
            }
            log.push_back(SimOp { stream, kind, failed });
        }
        self.executed.fetch_add(1, SeqCst);
        self.pending.fetch_sub(1, SeqCst);
    }
}

impl Drop for SimControl {
    fn drop(&mut self) {
        // Every stream thread has exited (each holds an Arc of this), so no
        // command of this device runs any more: free what was not freed.
        let leftovers: Vec<Arc<Block>> = {
            let mut map = ALLOCATIONS.write();
            let bases: Vec<u64> = map.values().filter(|b| b.device == self.id).map(|b| b.base).collect();
            bases.into_iter().filter_map(|b| map.remove(&b)).collect()
        };
        drop(leftovers);
        for (addr, size) in self.host_blocks.get_mut().drain() {
            // SAFETY: `addr` came from `std::alloc::alloc` with this layout in
            // `alloc_host` and was not freed (it is still in the table).
            unsafe { std::alloc::dealloc(addr as *mut u8, layout(size)) }
        }
    }
}
