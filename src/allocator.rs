//! The library's global allocator: mimalloc, called through its plain entry
//! points whenever the requested alignment allows.
//!
//! The `mimalloc` crate's `MiMalloc` sends every request to
//! `mi_malloc_aligned`. When the size class's page has no free block at hand
//! (which is often the case here: tasks are allocated by the submitting thread
//! and mostly freed by workers, so their blocks come back through the page's
//! cross-thread list), that entry point does not collect the page's returned
//! blocks as `mi_malloc` does: it over-allocates a larger block and aligns
//! inside it. `mi_malloc` returns blocks aligned to at least a word, so
//! requests for at most that alignment (nearly all of them) go there.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys::{mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc, mi_zalloc_aligned};

/// Every block `mi_malloc` returns has at least this alignment.
const WORD: usize = std::mem::size_of::<usize>();

pub(crate) struct Allocator;

// SAFETY: each method forwards to the mimalloc function with the same
// contract (a block of at least `size` bytes at the requested alignment, or
// NULL; `mi_free` and `mi_realloc*` take any block mimalloc returned), and
// the plain functions are used only for alignments mimalloc always meets.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= WORD {
                mi_malloc(layout.size()).cast()
            } else {
                mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= WORD {
                mi_zalloc(layout.size()).cast()
            } else {
                mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: see the impl.
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= WORD {
                mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}
