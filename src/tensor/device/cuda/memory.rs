//! Device memory: allocation, page-locked staging memory, and copies and
//! memsets queued on a stream.

use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::Ordering;

use cudarc::driver::sys as cu;

use super::device::CudaDevice;
use super::driver::{ck, cu_error, error_text, CUDA_ERROR_OUT_OF_MEMORY};
use crate::error::{Error, Result, Status};
use crate::tensor::device::interface::{DevPtr, Place, StreamId};

/// A side of a 2-D copy: (memory type, host address, device address).
pub(super) fn side(p: Place) -> (cu::CUmemorytype, *mut c_void, cu::CUdeviceptr) {
    match p {
        Place::Host(h) => (cu::CUmemorytype::CU_MEMORYTYPE_HOST, h as *mut c_void, 0),
        Place::Device(d) => (cu::CUmemorytype::CU_MEMORYTYPE_DEVICE, null_mut(), d),
    }
}

impl CudaDevice {
    pub(super) fn mem_alloc(&self, bytes: usize) -> Result<DevPtr> {
        if bytes == 0 {
            return Err(Error::new(Status::InvalidArgument, "cuda", "a device allocation needs at least one byte"));
        }
        self.ctx.bind()?;
        let mut p: cu::CUdeviceptr = 0;
        // SAFETY: writes one address; the context is current.
        let r = unsafe { cu::cuMemAlloc_v2(&mut p, bytes) } as u32;
        match r {
            0 => Ok(p),
            CUDA_ERROR_OUT_OF_MEMORY => Err(Error::new(
                Status::OutOfMemory,
                "cuda",
                format!("{} (cuMemAlloc of {bytes} bytes on CUDA device {})", error_text(r), self.ordinal),
            )),
            code => Err(cu_error(code, "cuMemAlloc")),
        }
    }

    pub(super) unsafe fn mem_free(&self, ptr: DevPtr) {
        if self.ctx.bind().is_err() {
            return;
        }
        if self.async_free.load(Ordering::Relaxed) {
            // SAFETY: the caller guarantees `ptr` came from alloc and no
            // work uses it; the free stream holds only frees, so this
            // waits for nothing.
            let r = unsafe { cu::cuMemFreeAsync(ptr, self.free_stream) } as u32;
            if r == 0 {
                return;
            }
            // The driver refuses stream-ordered frees of this memory:
            // free synchronously from now on.
            self.async_free.store(false, Ordering::Relaxed);
        }
        // SAFETY: as above.
        unsafe { cu::cuMemFree_v2(ptr) };
    }

    pub(super) fn host_alloc(&self, bytes: usize) -> Result<*mut u8> {
        if bytes == 0 {
            return Err(Error::new(Status::InvalidArgument, "cuda", "a host allocation needs at least one byte"));
        }
        self.ctx.bind()?;
        let mut p: *mut c_void = null_mut();
        // SAFETY: writes one address; the context is current.
        let r = unsafe { cu::cuMemHostAlloc(&mut p, bytes, cu::CU_MEMHOSTALLOC_PORTABLE) } as u32;
        if r == 0 && !p.is_null() {
            return Ok(p as *mut u8);
        }
        // Page-locked memory refused: pageable memory is slower but correct.
        let layout = std::alloc::Layout::from_size_align(bytes, 256)
            .map_err(|_| Error::new(Status::InvalidArgument, "cuda", format!("host allocation of {bytes} bytes")))?;
        // SAFETY: the layout has a non-zero size.
        let q = unsafe { std::alloc::alloc(layout) };
        if q.is_null() {
            return Err(Error::new(
                Status::OutOfMemory,
                "cuda",
                format!("host allocation of {bytes} bytes failed ({})", error_text(r)),
            ));
        }
        self.pageable.lock().insert(q as usize, layout);
        Ok(q)
    }

    pub(super) unsafe fn host_free(&self, ptr: *mut u8) {
        if let Some(layout) = self.pageable.lock().remove(&(ptr as usize)) {
            // SAFETY: allocated in alloc_host with this layout; freed once.
            unsafe { std::alloc::dealloc(ptr, layout) };
            return;
        }
        if self.ctx.bind().is_ok() {
            // SAFETY: the caller guarantees ptr came from alloc_host and no work uses it.
            unsafe { cu::cuMemFreeHost(ptr as *mut c_void) };
        }
    }

    #[allow(clippy::too_many_arguments)] // the arguments of the CUDA/BLAS call it queues
    pub(super) unsafe fn queue_copy_2d(
        &self,
        stream: StreamId,
        dst: Place,
        dpitch: usize,
        src: Place,
        spitch: usize,
        width: usize,
        height: usize,
    ) -> Result<()> {
        let slot = self.enter(stream)?;
        if width == 0 || height == 0 {
            return Ok(());
        }
        let (dst_ctx, src_ctx) = (self.owner(dst), self.owner(src));
        // One row, or rows that follow one another on both sides: a 1-D
        // copy (no pitch limit of the 2-D calls).
        if height == 1 || (dpitch == width && spitch == width) {
            let bytes = width.checked_mul(height).ok_or_else(|| {
                Error::new(Status::InvalidArgument, "cuda", format!("a copy of {height} rows of {width} bytes"))
            })?;
            let s = slot.stream;
            // SAFETY (each call): the caller guarantees both regions are
            // valid for `bytes` until the copy is done.
            let (r, call) = match (dst, src) {
                (Place::Device(d), Place::Host(h)) => {
                    (unsafe { cu::cuMemcpyHtoDAsync_v2(d, h as *const c_void, bytes, s) }, "cuMemcpyHtoDAsync")
                }
                (Place::Host(h), Place::Device(d)) => {
                    (unsafe { cu::cuMemcpyDtoHAsync_v2(h as *mut c_void, d, bytes, s) }, "cuMemcpyDtoHAsync")
                }
                (Place::Device(d), Place::Device(e)) if dst_ctx == src_ctx => {
                    (unsafe { cu::cuMemcpyDtoDAsync_v2(d, e, bytes, s) }, "cuMemcpyDtoDAsync")
                }
                (Place::Device(d), Place::Device(e)) => {
                    (unsafe { cu::cuMemcpyPeerAsync(d, dst_ctx, e, src_ctx, bytes, s) }, "cuMemcpyPeerAsync")
                }
                (Place::Host(d), Place::Host(h)) => (
                    unsafe { cu::cuMemcpyAsync(d as cu::CUdeviceptr, h as cu::CUdeviceptr, bytes, s) },
                    "cuMemcpyAsync",
                ),
            };
            return ck(r, call);
        }
        let (dst_type, dst_host, dst_dev) = side(dst);
        let (src_type, src_host, src_dev) = side(src);
        if dst_ctx == self.ctx.ctx && src_ctx == self.ctx.ctx {
            let p = cu::CUDA_MEMCPY2D {
                srcXInBytes: 0,
                srcY: 0,
                srcMemoryType: src_type,
                srcHost: src_host as *const c_void,
                srcDevice: src_dev,
                srcArray: null_mut(),
                srcPitch: spitch,
                dstXInBytes: 0,
                dstY: 0,
                dstMemoryType: dst_type,
                dstHost: dst_host,
                dstDevice: dst_dev,
                dstArray: null_mut(),
                dstPitch: dpitch,
                WidthInBytes: width,
                Height: height,
            };
            // SAFETY: the caller guarantees both regions are valid until
            // the copy is done; `p` is read before the call returns.
            ck(unsafe { cu::cuMemcpy2DAsync_v2(&p, slot.stream) }, "cuMemcpy2DAsync")
        } else {
            // Memory of another device: a peer copy, contexts named.
            let p = cu::CUDA_MEMCPY3D_PEER {
                srcXInBytes: 0,
                srcY: 0,
                srcZ: 0,
                srcLOD: 0,
                srcMemoryType: src_type,
                srcHost: src_host as *const c_void,
                srcDevice: src_dev,
                srcArray: null_mut(),
                srcContext: src_ctx,
                srcPitch: spitch,
                srcHeight: height,
                dstXInBytes: 0,
                dstY: 0,
                dstZ: 0,
                dstLOD: 0,
                dstMemoryType: dst_type,
                dstHost: dst_host,
                dstDevice: dst_dev,
                dstArray: null_mut(),
                dstContext: dst_ctx,
                dstPitch: dpitch,
                dstHeight: height,
                WidthInBytes: width,
                Height: height,
                Depth: 1,
            };
            // SAFETY: as above.
            ck(unsafe { cu::cuMemcpy3DPeerAsync(&p, slot.stream) }, "cuMemcpy3DPeerAsync")
        }
    }

    #[allow(clippy::too_many_arguments)] // the arguments of the CUDA/BLAS call it queues
    pub(super) unsafe fn queue_memset_2d(
        &self,
        stream: StreamId,
        dst: DevPtr,
        pitch: usize,
        value: u32,
        elem: usize,
        width: usize,
        height: usize,
    ) -> Result<()> {
        let slot = self.enter(stream)?;
        if !matches!(elem, 1 | 2 | 4) {
            return Err(Error::new(Status::InvalidArgument, "cuda", format!("memset element size {elem} (1, 2 or 4)")));
        }
        if width == 0 || height == 0 {
            return Ok(());
        }
        let s = slot.stream;
        // Width is in elements, pitch in bytes. One row, or rows back to
        // back: a 1-D memset (no pitch limit of the 2-D calls).
        if height == 1 || width.checked_mul(elem) == Some(pitch) {
            let count = width.checked_mul(height).ok_or_else(|| {
                Error::new(Status::InvalidArgument, "cuda", format!("a memset of {height} rows of {width}"))
            })?;
            // SAFETY (all three): the caller guarantees the region is
            // valid device memory until the memset is done.
            let r = match elem {
                1 => unsafe { cu::cuMemsetD8Async(dst, value as u8, count, s) },
                2 => unsafe { cu::cuMemsetD16Async(dst, value as u16, count, s) },
                _ => unsafe { cu::cuMemsetD32Async(dst, value, count, s) },
            };
            return ck(r, "cuMemsetAsync");
        }
        // SAFETY (all three): as above.
        let r = match elem {
            1 => unsafe { cu::cuMemsetD2D8Async(dst, pitch, value as u8, width, height, s) },
            2 => unsafe { cu::cuMemsetD2D16Async(dst, pitch, value as u16, width, height, s) },
            _ => unsafe { cu::cuMemsetD2D32Async(dst, pitch, value, width, height, s) },
        };
        ck(r, "cuMemsetD2DAsync")
    }
}
