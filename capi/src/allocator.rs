//! The C library's global allocator: the core's [`MiMalloc`], with freed
//! task blocks kept in [`crate::block_cache`] for the next task.

use std::alloc::{GlobalAlloc, Layout};

use ta::allocator::{MiMalloc, TASK_ALLOCATION};

pub(crate) struct Allocator;

#[global_allocator]
static ALLOC: Allocator = Allocator;

// SAFETY: every block comes from `MiMalloc` and goes back to it, directly or
// through the cache, which hands a task block only to a request of the same
// layout.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout == TASK_ALLOCATION {
            if let Some(b) = crate::block_cache::take() {
                return b;
            }
        }
        // SAFETY: as for this method.
        unsafe { MiMalloc.alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for this method.
        unsafe { MiMalloc.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout == TASK_ALLOCATION {
            // SAFETY: a block of that layout that nothing uses.
            return unsafe { crate::block_cache::put(ptr) };
        }
        // SAFETY: as for this method.
        unsafe { MiMalloc.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for this method (a task block is never reallocated: an
        // `Arc` never grows).
        unsafe { MiMalloc.realloc(ptr, layout, new_size) }
    }
}
