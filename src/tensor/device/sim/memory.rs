//! Simulated device memory: host memory, tracked process-wide so that
//! commands can check that the addresses they touch are live.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;

/// Alignment of simulated device (and pinned host) allocations.
pub(super) const ALIGN: usize = 256;

/// One live device allocation. Owns its memory: the memory is freed when the
/// last reference goes, so a command that is using a block keeps it alive even
/// if `free` races with it (the block is gone from [`ALLOCATIONS`] at once, so
/// every later command sees the address as illegal).
pub(super) struct Block {
    pub(super) base: u64,
    pub(super) size: usize,
    /// Unique id of the owning device (not its ordinal: unit tests create
    /// several devices with one ordinal).
    pub(super) device: u64,
    pub(super) ordinal: u32,
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: `base` came from `std::alloc::alloc` with exactly this
        // layout (see `SimDevice::alloc`), and a Block is dropped once.
        unsafe { std::alloc::dealloc(self.base as *mut u8, layout(self.size)) }
    }
}

/// Every live allocation of every simulated device, by base address.
pub(super) static ALLOCATIONS: RwLock<BTreeMap<u64, Arc<Block>>> = RwLock::new(BTreeMap::new());

pub(super) fn layout(bytes: usize) -> std::alloc::Layout {
    // Callers checked `bytes` with `checked_layout` before allocating.
    std::alloc::Layout::from_size_align(bytes, ALIGN).expect("layout checked at allocation")
}

pub(super) fn checked_layout(bytes: usize) -> Option<std::alloc::Layout> {
    std::alloc::Layout::from_size_align(bytes, ALIGN).ok()
}
