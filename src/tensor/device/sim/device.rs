//! The simulated [`Device`]: methods check their arguments, then queue a
//! command on the stream's thread (memory is allocated at once).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::commands::{Cmd, Side, SimMarker};
use super::control::{Sched, SimControl, DEVICES, NEXT_ID};
use super::faults::{cuda_error, invalid, too_large, OUT_OF_MEMORY};
use super::kernels::{extent_2d, extent_mat, extent_vec, stored};
use super::memory::{checked_layout, layout, Block, ALLOCATIONS};
use super::stream::stream_main;
use crate::dtype::DType;
use crate::dtype::Scalar;
use crate::error::{Error, Result, Status};
use crate::tensor::device::interface::{DevPtr, Device, GemmArgs, Marker, Notify, Place, StreamId, ORIGIN};

/// A simulated device (see the module notes).
pub(crate) struct SimDevice {
    ctl: Arc<SimControl>,
}

impl SimDevice {
    pub(crate) fn new(ordinal: u32, streams: u32) -> SimDevice {
        let streams = streams.max(1);
        let ctl = Arc::new(SimControl {
            id: NEXT_ID.fetch_add(1, SeqCst),
            ordinal,
            nstreams: streams,
            sched: Mutex::new(Sched {
                paused: false,
                shutdown: false,
                queues: (0..streams).map(|_| VecDeque::new()).collect(),
                started: vec![false; streams as usize],
            }),
            wake: (0..streams).map(|_| Condvar::new()).collect(),
            fail_next: Mutex::new(None),
            fail_next_call: Mutex::new(None),
            memory_limit: Mutex::new(None),
            delay_ns: AtomicU64::new(0),
            allocated: AtomicUsize::new(0),
            host_allocated: AtomicUsize::new(0),
            host_blocks: Mutex::new(HashMap::new()),
            executed: AtomicU64::new(0),
            pending: AtomicUsize::new(0),
            log: Mutex::new(VecDeque::new()),
            invalid_frees: AtomicU64::new(0),
            dropped: AtomicBool::new(false),
            #[cfg(test)]
            panic_next: AtomicBool::new(false),
        });
        let mut devices = DEVICES.lock();
        devices.retain(|w| w.strong_count() > 0);
        devices.push(Arc::downgrade(&ctl));
        SimDevice { ctl }
    }

    /// This device's controls.
    #[cfg(test)]
    pub(super) fn control(&self) -> Arc<SimControl> {
        self.ctl.clone()
    }

    /// The injected failure of this call, if [`SimControl::fail_next_call`] asked for one.
    fn injected_call_failure(&self, method: &str) -> Result<()> {
        match self.ctl.fail_next_call.lock().take() {
            None => Ok(()),
            Some(name) => {
                let detail = format!("injected failure of {method} on simulated device {}", self.ctl.ordinal);
                let mut e = cuda_error(name, detail);
                if name == OUT_OF_MEMORY && (method == "alloc" || method == "alloc_host") {
                    e = Error::new(Status::OutOfMemory, ORIGIN, e.message().to_string());
                }
                Err(e)
            }
        }
    }

    fn stream_index(&self, stream: StreamId) -> Result<u32> {
        if stream.0 < self.ctl.nstreams {
            Ok(stream.0)
        } else {
            Err(invalid(format!(
                "stream {} is out of range: simulated device {} has {} streams",
                stream.0, self.ctl.ordinal, self.ctl.nstreams
            )))
        }
    }

    fn float_dtype(&self, dtype: DType, method: &str) -> Result<usize> {
        if dtype.is_float() {
            Ok(dtype.size())
        } else {
            Err(Error::new(
                Status::Unsupported,
                ORIGIN,
                format!("{method} is not supported for {} on a CUDA device", dtype.name()),
            ))
        }
    }

    /// Queue `cmd` on stream `k` (already checked), starting its thread if needed.
    fn enqueue(&self, k: u32, cmd: Cmd) -> Result<()> {
        let ki = k as usize;
        let mut s = self.ctl.sched.lock();
        if !s.started[ki] {
            let ctl = self.ctl.clone();
            std::thread::Builder::new()
                .name(format!("ta-sim{}-s{}", self.ctl.ordinal, k))
                .spawn(move || stream_main(ctl, k))
                .map_err(|e| {
                    cuda_error("CUDA_ERROR_OPERATING_SYSTEM", format_args!("cannot start a stream thread: {e}"))
                })?;
            s.started[ki] = true;
        }
        s.queues[ki].push_back(cmd);
        self.ctl.pending.fetch_add(1, SeqCst);
        drop(s);
        self.ctl.wake[ki].notify_one();
        Ok(())
    }
}

impl Drop for SimDevice {
    fn drop(&mut self) {
        // Never blocks (it may run on one of this device's own stream
        // threads, inside a notify callback): the threads drain their queues,
        // pause or not, and exit on their own.
        self.ctl.dropped.store(true, SeqCst);
        {
            let mut s = self.ctl.sched.lock();
            s.shutdown = true;
            s.paused = false;
        }
        for cv in &self.ctl.wake {
            cv.notify_all();
        }
    }
}

impl Device for SimDevice {
    fn ordinal(&self) -> u32 {
        self.ctl.ordinal
    }

    fn describe(&self) -> String {
        let memory = match *self.ctl.memory_limit.lock() {
            Some(l) => format!("memory limited to {l} bytes"),
            None => "host memory, unlimited".to_string(),
        };
        format!("simulated device {} ({} streams, {memory})", self.ctl.ordinal, self.ctl.nstreams)
    }

    fn streams(&self) -> u32 {
        self.ctl.nstreams
    }

    fn alloc(&self, bytes: usize) -> Result<DevPtr> {
        self.injected_call_failure("alloc")?;
        if bytes == 0 {
            return Err(invalid("cannot allocate 0 bytes of device memory"));
        }
        let oom = |why: String| {
            Error::new(
                Status::OutOfMemory,
                ORIGIN,
                format!(
                    "{OUT_OF_MEMORY}: cannot allocate {bytes} bytes on simulated device {}: {why}",
                    self.ctl.ordinal
                ),
            )
        };
        let Some(lay) = checked_layout(bytes) else {
            return Err(oom("the size is too large".into()));
        };
        // Reserve the bytes against the limit first (no lock is held while
        // the memory is allocated and filled).
        let limit = *self.ctl.memory_limit.lock();
        let reserved = self.ctl.allocated.fetch_update(SeqCst, SeqCst, |used| {
            let total = used.checked_add(bytes)?;
            (limit.is_none_or(|l| total <= l)).then_some(total)
        });
        if let Err(used) = reserved {
            return Err(oom(format!("{used} of the {} bytes allowed are in use", limit.unwrap_or(usize::MAX))));
        }
        // SAFETY: `lay` has a non-zero size.
        let p = unsafe { std::alloc::alloc(lay) };
        if p.is_null() {
            self.ctl.allocated.fetch_sub(bytes, SeqCst);
            return Err(oom("the host allocator failed".into()));
        }
        // SAFETY: `p` points to `bytes` freshly allocated bytes.
        unsafe { std::ptr::write_bytes(p, 0xFF, bytes) };
        let base = p as u64;
        let block = Arc::new(Block { base, size: bytes, device: self.ctl.id, ordinal: self.ctl.ordinal });
        ALLOCATIONS.write().insert(base, block);
        Ok(base)
    }

    unsafe fn free(&self, ptr: DevPtr) {
        let block = {
            let mut map = ALLOCATIONS.write();
            match map.get(&ptr) {
                Some(b) if b.device == self.ctl.id => {
                    self.ctl.allocated.fetch_sub(b.size, SeqCst);
                    map.remove(&ptr)
                }
                _ => None,
            }
        };
        if block.is_none() {
            self.ctl.invalid_frees.fetch_add(1, SeqCst);
            eprintln!(
                "tensorasync: simulated device {}: free of {ptr:#x}, which is no live allocation of it (ignored)",
                self.ctl.ordinal
            );
        }
        // The memory itself goes when the last command using it lets go.
        drop(block);
    }

    fn alloc_host(&self, bytes: usize) -> Result<*mut u8> {
        self.injected_call_failure("alloc_host")?;
        if bytes == 0 {
            return Err(invalid("cannot allocate 0 bytes of page-locked memory"));
        }
        let oom = || {
            Error::new(
                Status::OutOfMemory,
                ORIGIN,
                format!("{OUT_OF_MEMORY}: cannot allocate {bytes} bytes of page-locked host memory"),
            )
        };
        let lay = checked_layout(bytes).ok_or_else(oom)?;
        // SAFETY: `lay` has a non-zero size.
        let p = unsafe { std::alloc::alloc(lay) };
        if p.is_null() {
            return Err(oom());
        }
        // SAFETY: `p` points to `bytes` freshly allocated bytes.
        unsafe { std::ptr::write_bytes(p, 0xFF, bytes) };
        self.ctl.host_blocks.lock().insert(p as usize, bytes);
        self.ctl.host_allocated.fetch_add(bytes, SeqCst);
        Ok(p)
    }

    unsafe fn free_host(&self, ptr: *mut u8) {
        let size = self.ctl.host_blocks.lock().remove(&(ptr as usize));
        match size {
            Some(size) => {
                self.ctl.host_allocated.fetch_sub(size, SeqCst);
                // SAFETY: `ptr` came from `alloc_host` with this layout and was
                // in the table, so it is freed exactly once.
                std::alloc::dealloc(ptr, layout(size));
            }
            None => {
                self.ctl.invalid_frees.fetch_add(1, SeqCst);
                eprintln!(
                    "tensorasync: simulated device {}: free_host of {ptr:p}, which alloc_host did not return (ignored)",
                    self.ctl.ordinal
                );
            }
        }
    }

    unsafe fn copy_2d(
        &self,
        stream: StreamId,
        dst: Place,
        dpitch: usize,
        src: Place,
        spitch: usize,
        width: usize,
        height: usize,
    ) -> Result<()> {
        self.injected_call_failure("copy_2d")?;
        let k = self.stream_index(stream)?;
        let side = |p: Place| match p {
            Place::Host(h) => Side::Host(h as u64),
            Place::Device(d) => Side::Dev(d),
        };
        let (dst, src) = (side(dst), side(src));
        if width > 0 && height > 0 {
            if dpitch < width || spitch < width {
                return Err(invalid(format!(
                    "copy_2d: pitches ({dpitch}, {spitch}) must be at least the width ({width})"
                )));
            }
            for (s, pitch, what) in [(dst, dpitch, "destination"), (src, spitch, "source")] {
                let ext = extent_2d(pitch, width, height).ok_or_else(|| too_large("copy_2d region"))?;
                if s.addr() == 0 {
                    return Err(invalid(format!("copy_2d: the {what} address is null")));
                }
                if s.addr().checked_add(ext as u64).is_none() {
                    return Err(too_large("copy_2d region"));
                }
            }
        }
        self.enqueue(k, Cmd::Copy { dst, dpitch, src, spitch, width, height })
    }

    unsafe fn memset_2d(
        &self,
        stream: StreamId,
        dst: DevPtr,
        pitch: usize,
        value: u32,
        elem: usize,
        width: usize,
        height: usize,
    ) -> Result<()> {
        self.injected_call_failure("memset_2d")?;
        let k = self.stream_index(stream)?;
        if !matches!(elem, 1 | 2 | 4) {
            return Err(invalid(format!("memset_2d: element size {elem} is not 1, 2 or 4")));
        }
        if width > 0 && height > 0 {
            let row = width.checked_mul(elem).ok_or_else(|| too_large("memset_2d row"))?;
            if height > 1 && pitch < row {
                return Err(invalid(format!("memset_2d: pitch {pitch} is less than the row size {row}")));
            }
            if dst % elem as u64 != 0 || (height > 1 && pitch % elem != 0) {
                return Err(invalid(format!(
                    "memset_2d: address {dst:#x} or pitch {pitch} is not a multiple of {elem}"
                )));
            }
            extent_2d(pitch, row, height).ok_or_else(|| too_large("memset_2d region"))?;
        }
        self.enqueue(k, Cmd::Memset { dst, pitch, value, elem, width, height })
    }

    unsafe fn scal(
        &self,
        stream: StreamId,
        dtype: DType,
        n: usize,
        alpha: Scalar,
        x: DevPtr,
        incx: isize,
    ) -> Result<()> {
        self.injected_call_failure("scal")?;
        let k = self.stream_index(stream)?;
        let size = self.float_dtype(dtype, "scal")?;
        if n > 1 && incx == 0 {
            return Err(invalid("scal: incx must not be 0"));
        }
        extent_vec(n, incx, size).ok_or_else(|| too_large("scal vector"))?;
        self.enqueue(k, Cmd::Scal { dtype, n, alpha, x, incx })
    }

    unsafe fn axpy(
        &self,
        stream: StreamId,
        dtype: DType,
        n: usize,
        alpha: Scalar,
        x: DevPtr,
        incx: isize,
        y: DevPtr,
        incy: isize,
    ) -> Result<()> {
        self.injected_call_failure("axpy")?;
        let k = self.stream_index(stream)?;
        let size = self.float_dtype(dtype, "axpy")?;
        if n > 1 && incy == 0 {
            return Err(invalid("axpy: incy must not be 0"));
        }
        extent_vec(n, incx, size).ok_or_else(|| too_large("axpy x"))?;
        extent_vec(n, incy, size).ok_or_else(|| too_large("axpy y"))?;
        self.enqueue(k, Cmd::Axpy { dtype, n, alpha, x, incx, y, incy })
    }

    unsafe fn gemm(&self, stream: StreamId, dtype: DType, args: &GemmArgs) -> Result<()> {
        self.injected_call_failure("gemm")?;
        let k = self.stream_index(stream)?;
        let size = self.float_dtype(dtype, "gemm")?;
        let g = *args;
        let (ra, ca) = stored(g.trans_a, g.m, g.k);
        let (rb, cb) = stored(g.trans_b, g.k, g.n);
        for (name, ld, rows) in [("lda", g.lda, ra), ("ldb", g.ldb, rb), ("ldc", g.ldc, g.m)] {
            if ld < rows.max(1) {
                return Err(invalid(format!("gemm: {name} = {ld} is less than max(1, {rows})")));
            }
        }
        for (name, rows, cols, ld) in [("A", ra, ca, g.lda), ("B", rb, cb, g.ldb), ("C", g.m, g.n, g.ldc)] {
            extent_mat(rows, cols, ld, size).ok_or_else(|| too_large(&format!("gemm {name}")))?;
        }
        g.m.checked_mul(g.n).and_then(|e| e.checked_mul(size)).ok_or_else(|| too_large("gemm C"))?;
        self.enqueue(k, Cmd::Gemm { dtype, args: g })
    }

    fn record(&self, stream: StreamId) -> Result<Marker> {
        self.injected_call_failure("record")?;
        let k = self.stream_index(stream)?;
        let m = Arc::new(SimMarker { device: self.ctl.id, reached: Mutex::new(false), cv: Condvar::new() });
        self.enqueue(k, Cmd::Record(m.clone()))?;
        Ok(m)
    }

    fn wait_marker(&self, stream: StreamId, marker: &Marker) -> Result<()> {
        self.injected_call_failure("wait_marker")?;
        let k = self.stream_index(stream)?;
        let m = marker
            .clone()
            .downcast::<SimMarker>()
            .map_err(|_| invalid("wait_marker: the marker is not one of a simulated device"))?;
        if m.device != self.ctl.id {
            return Err(invalid(format!(
                "wait_marker: the marker was recorded on another device, not on simulated device {}",
                self.ctl.ordinal
            )));
        }
        self.enqueue(k, Cmd::Wait(m))
    }

    fn notify(&self, stream: StreamId, notify: Notify) -> Result<()> {
        self.injected_call_failure("notify")?;
        let k = self.stream_index(stream)?;
        self.enqueue(k, Cmd::Notify(notify))
    }
}
