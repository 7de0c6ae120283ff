//! Allocation: the layout of a task's block, and (feature `mimalloc`) an
//! allocator for the program to install.
//!
//! The library installs no global allocator: that is the program's choice.
//! With the `mimalloc` feature, `MiMalloc` is mimalloc called through its
//! plain entry points whenever the requested alignment allows. Tasks are
//! allocated by the submitting thread and freed by a worker, which glibc
//! malloc serves with arena-lock contention (about 1000 ns per task against
//! 400 with mimalloc):
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: tensorasync::allocator::MiMalloc = tensorasync::allocator::MiMalloc;
//! fn main() {
//!     tensorasync::allocator::retain_freed_memory();
//! }
//! ```
//!
//! Why not the `mimalloc` crate's own `MiMalloc`: it sends every request to
//! `mi_malloc_aligned`. When the size class's page has no free block at hand
//! (which is often the case here: task blocks come back through the page's
//! cross-thread list), that entry point does not collect the page's returned
//! blocks as `mi_malloc` does: it over-allocates a larger block and aligns
//! inside it. `mi_malloc` returns blocks aligned to at least a word, so
//! requests for at most that alignment (nearly all of them) go there.

pub use crate::runtime::task::TASK_ALLOCATION;

#[cfg(feature = "mimalloc")]
pub use self::mimalloc::{retain_freed_memory, MiMalloc};

#[cfg(feature = "mimalloc")]
mod mimalloc {
    use std::alloc::{GlobalAlloc, Layout};
    use std::ffi::c_void;

    use libmimalloc_sys::{
        mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc, mi_zalloc_aligned,
    };

    /// Every block `mi_malloc` returns has at least this alignment.
    const WORD: usize = std::mem::size_of::<usize>();

    /// mimalloc as a global allocator (see the module notes).
    #[derive(Copy, Clone, Debug, Default)]
    pub struct MiMalloc;

    // SAFETY: each method forwards to the mimalloc function with the same
    // contract (a block of at least `size` bytes at the requested alignment, or
    // NULL; `mi_free` and `mi_realloc*` take any block mimalloc returned), and
    // the plain functions are used only for alignments mimalloc always meets.
    unsafe impl GlobalAlloc for MiMalloc {
        #[inline]
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            // SAFETY: see the impl.
            by_align(
                layout.align(),
                || unsafe { mi_malloc(layout.size()) },
                || unsafe { mi_malloc_aligned(layout.size(), layout.align()) },
            )
        }

        #[inline]
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            // SAFETY: see the impl.
            by_align(
                layout.align(),
                || unsafe { mi_zalloc(layout.size()) },
                || unsafe { mi_zalloc_aligned(layout.size(), layout.align()) },
            )
        }

        #[inline]
        unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
            // SAFETY: see the impl.
            unsafe { mi_free(ptr.cast::<c_void>()) }
        }

        #[inline]
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let p = ptr.cast::<c_void>();
            // SAFETY: see the impl.
            by_align(
                layout.align(),
                || unsafe { mi_realloc(p, new_size) },
                || unsafe { mi_realloc_aligned(p, new_size, layout.align()) },
            )
        }
    }

    /// mimalloc's `mi_option_purge_delay` (its position in `mi_option_e` of the
    /// v3 header that libmimalloc-sys 0.1.49, pinned in Cargo.toml, builds; the
    /// crate's own constants follow the v2 numbering and have no purge delay).
    const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

    extern "C" {
        #[cfg(test)]
        fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
        fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
    }

    /// Keep the memory the program frees for its own reuse, instead of handing
    /// it back to the OS after a second of disuse (mimalloc's default), unless
    /// the user chose a delay with `MIMALLOC_PURGE_DELAY` (milliseconds). A task
    /// runtime's memory is bursty and recurrent: 100k independent tasks hold
    /// 32 MB of task blocks until their tensors are next used, and memory handed
    /// back in between is faulted in again page by page at the next burst (glibc
    /// malloc keeps such small blocks too). Call it once, at any time: the
    /// option is read at every purge decision.
    pub fn retain_freed_memory() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
                // SAFETY: plain setter of a mimalloc option (thread-safe, any time).
                unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
            }
        });
    }

    /// The block from `plain` (a function without an alignment argument) when
    /// every block mimalloc returns meets `align`, else from `aligned`.
    #[inline(always)]
    fn by_align(align: usize, plain: impl FnOnce() -> *mut c_void, aligned: impl FnOnce() -> *mut c_void) -> *mut u8 {
        if align <= WORD {
            plain().cast()
        } else {
            aligned().cast()
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// The option number is mimalloc's purge delay: before
        /// `retain_freed_memory` it holds v3's default (1000 ms; its neighbours
        /// in the enum default to 1 and 0), after it -1.
        #[test]
        fn the_purge_delay_option_is_the_one_set() {
            // SAFETY: plain getter.
            let before = unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) };
            assert!(before == 1000 || before == -1, "option {MI_OPTION_PURGE_DELAY} is {before}, not a purge delay");
            if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
                retain_freed_memory();
                // SAFETY: plain getter.
                assert_eq!(unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) }, -1);
            }
        }

        /// Every size and alignment comes back aligned, zeroed when asked, and
        /// keeps its contents through a reallocation (word-aligned requests take
        /// the plain functions, larger alignments the aligned ones).
        #[test]
        fn blocks_are_aligned_zeroed_and_keep_contents() {
            let a = MiMalloc;
            for align in [1usize, 2, 4, 8, 16, 32, 64, 4096] {
                for size in [1usize, 7, 8, 24, 40, 264, 1000, 70_000] {
                    let layout = Layout::from_size_align(size, align).unwrap();
                    // SAFETY: non-zero sizes; each block is freed once, with its layout.
                    unsafe {
                        let z = a.alloc_zeroed(layout);
                        assert!(!z.is_null() && z as usize % align == 0, "zeroed {size} at {align}");
                        assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                        a.dealloc(z, layout);
                        let p = a.alloc(layout);
                        assert!(!p.is_null() && p as usize % align == 0, "{size} at {align}");
                        for i in 0..size {
                            *p.add(i) = (i % 251) as u8;
                        }
                        let q = a.realloc(p, layout, size * 3);
                        assert!(!q.is_null() && q as usize % align == 0, "realloc {size} at {align}");
                        assert!((0..size).all(|i| *q.add(i) == (i % 251) as u8));
                        a.dealloc(q, Layout::from_size_align(size * 3, align).unwrap());
                    }
                }
            }
        }
    }
}
