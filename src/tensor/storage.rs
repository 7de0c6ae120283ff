//! Owner tokens: reference-counted backing allocations (SPEC §2).
//!
//! A [`Storage`] is shared through `Arc` by the value that created it, by every
//! view and block handle over it, and by every pending task that accesses it,
//! so memory is freed (or handed back to its owner) only after the last access.

use std::alloc::{self, Layout as AllocLayout};
use std::ptr::NonNull;

use crate::error::{Error, Result, Status};

/// Called exactly once when wrapped user memory is no longer used.
pub type ReleaseFn = Box<dyn FnOnce() + Send>;

/// A backing allocation of raw bytes. Kept small: one lives in every tensor.
pub struct Storage {
    ptr: NonNull<u8>,
    bytes: usize,
    /// `None` for memory the library allocated (with [`alloc_align`]); for
    /// wrapped user memory, the hook that gives it back (a no-op when the
    /// user gave none), run once on drop.
    release: Option<ReleaseFn>,
}

/// The alignment the library allocates `bytes` with: 64 for buffers large
/// enough for SIMD to matter, 8 otherwise (every dtype's alignment divides
/// it). A function of the size, so it need not be stored.
fn alloc_align(bytes: usize) -> usize {
    if bytes >= 4096 {
        64
    } else {
        8
    }
}

// SAFETY: a Storage is a raw allocation. The bytes are only read or written by
// tasks that hold accesses granted by the epoch queues (readers share, a writer
// is exclusive), which is the synchronisation that makes sharing the pointer
// between threads sound. The release hook is `Send` and runs once, on drop.
unsafe impl Send for Storage {}
unsafe impl Sync for Storage {}

impl Storage {
    /// Allocate `bytes` zeroed host bytes. Large buffers are 64-byte aligned for SIMD.
    pub fn alloc_zeroed(bytes: usize, origin: &'static str) -> Result<Storage> {
        let align = alloc_align(bytes);
        if bytes == 0 {
            // A dangling, aligned, never-dereferenced pointer for empty tensors.
            let ptr = NonNull::new(align as *mut u8).expect("align is non-zero");
            return Ok(Storage { ptr, bytes, release: None });
        }
        let layout = AllocLayout::from_size_align(bytes, align)
            .map_err(|_| Error::new(Status::OutOfMemory, origin, format!("cannot allocate {bytes} bytes")))?;
        // SAFETY: layout has non-zero size (checked above).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| {
            Error::new(Status::OutOfMemory, origin, format!("out of memory allocating {bytes} bytes"))
        })?;
        Ok(Storage { ptr, bytes, release: None })
    }

    /// Wrap memory the library does not own. `release` runs exactly once, after the
    /// last access.
    ///
    /// # Safety
    /// `ptr` must be valid for reads (and for writes, if the tensor is written)
    /// of `bytes` bytes until `release` is called.
    pub unsafe fn wrap(ptr: NonNull<u8>, bytes: usize, release: Option<ReleaseFn>) -> Storage {
        Storage { ptr, bytes, release: Some(release.unwrap_or_else(|| Box::new(|| {}))) }
    }

    /// Base pointer of the allocation.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Size in bytes.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether this is memory the library does not own (made by [`Storage::wrap`]).
    pub fn is_wrapped(&self) -> bool {
        self.release.is_some()
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        if let Some(f) = self.release.take() {
            f();
        } else if self.bytes != 0 {
            let layout =
                AllocLayout::from_size_align(self.bytes, alloc_align(self.bytes)).expect("layout was valid at alloc");
            // SAFETY: allocated in `alloc_zeroed` with this exact layout.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn release_runs_once_after_last_reference() {
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        let mut buf = vec![0u8; 16];
        let ptr = NonNull::new(buf.as_mut_ptr()).unwrap();
        let s = Arc::new(unsafe {
            Storage::wrap(
                ptr,
                16,
                Some(Box::new(|| {
                    CALLS.fetch_add(1, Ordering::SeqCst);
                })),
            )
        });
        let s2 = s.clone();
        drop(s);
        assert_eq!(CALLS.load(Ordering::SeqCst), 0);
        drop(s2);
        assert_eq!(CALLS.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn zeroed_and_aligned() {
        let s = Storage::alloc_zeroed(8192, "t").unwrap();
        assert_eq!(s.ptr() as usize % 64, 0);
        let bytes = unsafe { std::slice::from_raw_parts(s.ptr(), 8192) };
        assert!(bytes.iter().all(|&b| b == 0));
        let e = Storage::alloc_zeroed(0, "t").unwrap();
        assert_eq!(Storage::alloc_zeroed(24, "t").unwrap().ptr() as usize % 8, 0);
        assert_eq!(e.bytes(), 0);
    }
}
