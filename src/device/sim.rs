//! Simulated devices: "device memory" is host memory and streams are threads.
//!
//! A `SimDevice` implements [`Device`] with reference (plain-loop)
//! implementations of every command, so that everything the library does with
//! a GPU except the real kernels can be tested on machines without one:
//! device tensors, stream ordering, staging copies, error paths, and "no CPU
//! worker blocks on the GPU". [`SimControl`] (see [`control`]) lets tests
//! pause streams, inject failures, limit memory and inspect what ran.
//!
//! How it works:
//! - Each stream is one thread (`ta-sim{ordinal}-s{k}`, started at the
//!   stream's first command) that runs a FIFO of commands. Device methods
//!   queue a command and return at once; only `alloc`, `free`, `alloc_host`
//!   and `free_host` act immediately.
//! - Device memory is 256-byte aligned host memory filled with `0xFF` bytes
//!   (NaN for floats), so reads of uninitialised device memory show up.
//! - Address checking: when a command runs, every device byte range it
//!   touches must lie inside one live allocation (of this device for kernels,
//!   of any simulated device for copies); otherwise the command does nothing
//!   and its stream records `CUDA_ERROR_ILLEGAL_ADDRESS`. BLAS operands must
//!   also be aligned to their element size (`CUDA_ERROR_MISALIGNED_ADDRESS`).
//! - Asynchronous errors are per stream and not sticky: the next `notify` of
//!   the stream reports the first error since the previous `notify`, and
//!   clears it.
//! - A panic inside a command (or a notify callback) is caught and recorded
//!   as `CUDA_ERROR_UNKNOWN` on that stream; the stream keeps running.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Weak};
use std::time::Duration;

use num_complex::{Complex32, Complex64};
use parking_lot::{Condvar, Mutex, RwLock};

use super::{DevPtr, Device, GemmArgs, Marker, Notify, Place, StreamId, Trans};
use crate::dtype::{DType, Element, Scalar};
use crate::error::{Error, Result, Status};

/// Alignment of simulated device (and pinned host) allocations.
const ALIGN: usize = 256;
/// How many executed commands [`SimControl::log`] keeps.
const LOG_CAP: usize = 100_000;
/// Origin of every error this module makes.
use super::ORIGIN;

const ILLEGAL_ADDRESS: &str = "CUDA_ERROR_ILLEGAL_ADDRESS";
const MISALIGNED_ADDRESS: &str = "CUDA_ERROR_MISALIGNED_ADDRESS";
const OUT_OF_MEMORY: &str = "CUDA_ERROR_OUT_OF_MEMORY";
const UNKNOWN: &str = "CUDA_ERROR_UNKNOWN";

// ---------------------------------------------------------------------------
// Process-wide tables
// ---------------------------------------------------------------------------

/// One live device allocation. Owns its memory: the memory is freed when the
/// last reference goes, so a command that is using a block keeps it alive even
/// if `free` races with it (the block is gone from [`ALLOCATIONS`] at once, so
/// every later command sees the address as illegal).
struct Block {
    base: u64,
    size: usize,
    /// Unique id of the owning device (not its ordinal: unit tests create
    /// several devices with one ordinal).
    device: u64,
    ordinal: u32,
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: `base` came from `std::alloc::alloc` with exactly this
        // layout (see `SimDevice::alloc`), and a Block is dropped once.
        unsafe { std::alloc::dealloc(self.base as *mut u8, layout(self.size)) }
    }
}

/// Every live allocation of every simulated device, by base address.
static ALLOCATIONS: RwLock<BTreeMap<u64, Arc<Block>>> = RwLock::new(BTreeMap::new());

/// Every simulated device made by this process, for [`control`].
static DEVICES: Mutex<Vec<Weak<SimControl>>> = Mutex::new(Vec::new());

/// Unique device ids (see [`Block::device`]).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn layout(bytes: usize) -> std::alloc::Layout {
    // Callers checked `bytes` with `checked_layout` before allocating.
    std::alloc::Layout::from_size_align(bytes, ALIGN).expect("layout checked at allocation")
}

fn checked_layout(bytes: usize) -> Option<std::alloc::Layout> {
    std::alloc::Layout::from_size_align(bytes, ALIGN).ok()
}

/// The controls of simulated device `ordinal`, or None if this process does
/// not use simulated devices or has no such device.
///
/// Devices come into being when the device registry is first used (for
/// example [`super::simulate`]); when [`super::SIMULATED_DEVICES_ENV`] is set,
/// this function initialises the registry itself.
pub fn control(ordinal: u32) -> Option<Arc<SimControl>> {
    fn find(ordinal: u32) -> Option<Arc<SimControl>> {
        DEVICES.lock().iter().filter_map(Weak::upgrade).find(|c| c.ordinal == ordinal && !c.dropped.load(SeqCst))
    }
    if let Some(c) = find(ordinal) {
        return Some(c);
    }
    if std::env::var_os(super::SIMULATED_DEVICES_ENV).is_some() {
        // With the variable set, the registry makes simulated devices (or has
        // already decided); either way this cannot load a driver that the
        // process did not ask for.
        super::is_simulated();
        return find(ordinal);
    }
    None
}

// ---------------------------------------------------------------------------
// Public test controls
// ---------------------------------------------------------------------------

/// One executed command, as [`SimControl::log`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimOp {
    /// The stream it ran on.
    pub stream: u32,
    pub kind: SimOpKind,
    /// Whether it failed (injected failure, illegal address, panic).
    pub failed: bool,
}

/// What a command was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimOpKind {
    Copy,
    Memset,
    Scal,
    Axpy,
    Gemm,
    Record,
    WaitMarker,
    Notify,
}

/// The shared state of one simulated device, and its test controls.
pub struct SimControl {
    id: u64,
    ordinal: u32,
    nstreams: u32,
    sched: Mutex<Sched>,
    /// One per stream; signalled when its queue grows, on resume and on drop.
    wake: Vec<Condvar>,
    fail_next: Mutex<Option<&'static str>>,
    fail_next_call: Mutex<Option<&'static str>>,
    memory_limit: Mutex<Option<usize>>,
    delay_ns: AtomicU64,
    /// Device bytes allocated (reserved before the memory is allocated).
    allocated: AtomicUsize,
    host_allocated: AtomicUsize,
    /// Live `alloc_host` blocks: address -> size.
    host_blocks: Mutex<HashMap<usize, usize>>,
    executed: AtomicU64,
    pending: AtomicUsize,
    log: Mutex<VecDeque<SimOp>>,
    invalid_frees: AtomicU64,
    /// Set when the SimDevice is dropped (its streams then drain and stop).
    dropped: AtomicBool,
    #[cfg(test)]
    panic_next: AtomicBool,
}

struct Sched {
    paused: bool,
    shutdown: bool,
    queues: Vec<VecDeque<Cmd>>,
    started: Vec<bool>,
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

    /// The next [`Device`] method call (other than `ordinal`, `describe`,
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

    /// Device bytes currently allocated.
    pub fn allocated(&self) -> usize {
        self.allocated.load(SeqCst)
    }

    /// Page-locked (`alloc_host`) bytes currently allocated.
    pub fn host_allocated(&self) -> usize {
        self.host_allocated.load(SeqCst)
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

    /// Make the next kernel-like command (copy, memset, BLAS) panic.
    #[cfg(test)]
    fn panic_next(&self) {
        self.panic_next.store(true, SeqCst);
    }

    fn delay(&self) -> Duration {
        Duration::from_nanos(self.delay_ns.load(SeqCst))
    }

    fn finish(&self, stream: u32, kind: SimOpKind, failed: bool) {
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

// ---------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------

/// One side of a copy. Addresses travel to stream threads as integers (which
/// are `Send`); they are turned back into pointers only where the memory is
/// accessed, under the contracts of the `unsafe` device methods.
#[derive(Copy, Clone, Debug)]
enum Side {
    Host(u64),
    Dev(u64),
}

impl Side {
    fn addr(self) -> u64 {
        match self {
            Side::Host(a) | Side::Dev(a) => a,
        }
    }
}

enum Cmd {
    Copy { dst: Side, dpitch: usize, src: Side, spitch: usize, width: usize, height: usize },
    Memset { dst: u64, pitch: usize, value: u32, elem: usize, width: usize, height: usize },
    Scal { dtype: DType, n: usize, alpha: Scalar, x: u64, incx: isize },
    Axpy { dtype: DType, n: usize, alpha: Scalar, x: u64, incx: isize, y: u64, incy: isize },
    Gemm { dtype: DType, args: GemmArgs },
    Record(Arc<SimMarker>),
    Wait(Arc<SimMarker>),
    Notify(Notify),
}

impl Cmd {
    fn kind(&self) -> SimOpKind {
        match self {
            Cmd::Copy { .. } => SimOpKind::Copy,
            Cmd::Memset { .. } => SimOpKind::Memset,
            Cmd::Scal { .. } => SimOpKind::Scal,
            Cmd::Axpy { .. } => SimOpKind::Axpy,
            Cmd::Gemm { .. } => SimOpKind::Gemm,
            Cmd::Record(_) => SimOpKind::Record,
            Cmd::Wait(_) => SimOpKind::WaitMarker,
            Cmd::Notify(_) => SimOpKind::Notify,
        }
    }
}

/// A marker of a simulated device: reached when its record command runs.
struct SimMarker {
    device: u64,
    reached: Mutex<bool>,
    cv: Condvar,
}

impl SimMarker {
    fn reach(&self) {
        *self.reached.lock() = true;
        self.cv.notify_all();
    }
    fn wait(&self) {
        let mut r = self.reached.lock();
        while !*r {
            self.cv.wait(&mut r);
        }
    }
}

/// An asynchronous failure: a CUDA error name and details.
struct Fault {
    name: &'static str,
    detail: String,
}

fn fault(name: &'static str, detail: impl Into<String>) -> Fault {
    Fault { name, detail: detail.into() }
}

fn cuda_error(name: &str, detail: impl fmt::Display) -> Error {
    Error::new(Status::CudaError, ORIGIN, format!("{name}: {detail}"))
}

fn invalid(detail: impl Into<String>) -> Error {
    Error::new(Status::InvalidArgument, ORIGIN, detail.into())
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_string()
    }
}

// ---------------------------------------------------------------------------
// Stream threads
// ---------------------------------------------------------------------------

fn stream_main(ctl: Arc<SimControl>, k: u32) {
    let ki = k as usize;
    // The first asynchronous error since the last notify of this stream.
    let mut error: Option<Error> = None;
    let note = |error: &mut Option<Error>, kind: SimOpKind, f: Fault| {
        if error.is_none() {
            *error = Some(cuda_error(
                f.name,
                format_args!("{} ({:?} on simulated device {}, stream {})", f.detail, kind, ctl.ordinal, k),
            ));
        }
    };
    loop {
        let cmd = {
            let mut s = ctl.sched.lock();
            loop {
                if !s.paused || s.shutdown {
                    if let Some(c) = s.queues[ki].pop_front() {
                        break c;
                    }
                    if s.shutdown {
                        return;
                    }
                }
                ctl.wake[ki].wait(&mut s);
            }
        };
        let delay = ctl.delay();
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        let kind = cmd.kind();
        let injected = ctl.fail_next.lock().take().map(|name| fault(name, "injected failure"));
        let failed = injected.is_some();
        if let Some(f) = injected {
            note(&mut error, kind, f);
        }
        match cmd {
            Cmd::Notify(callback) => {
                let status = match error.take() {
                    Some(e) => Err(e),
                    None => Ok(()),
                };
                ctl.finish(k, kind, failed);
                if let Err(p) = catch_unwind(AssertUnwindSafe(move || callback(status))) {
                    let text = format!("a notify callback panicked: {}", panic_text(&*p));
                    note(&mut error, kind, fault(UNKNOWN, text));
                }
            }
            Cmd::Record(m) => {
                // Log first, then reach: whoever waits on the marker sees the
                // record in the log. A failed record still reaches its marker
                // (waiters would otherwise hang; the error is reported anyway).
                ctl.finish(k, kind, failed);
                m.reach();
            }
            Cmd::Wait(m) => {
                if !failed {
                    m.wait();
                }
                ctl.finish(k, kind, failed);
            }
            cmd => {
                let mut failed = failed;
                if !failed {
                    match catch_unwind(AssertUnwindSafe(|| ctl.execute(&cmd))) {
                        Ok(Ok(())) => {}
                        Ok(Err(f)) => {
                            failed = true;
                            note(&mut error, kind, f);
                        }
                        Err(p) => {
                            failed = true;
                            let text = format!("the command panicked: {}", panic_text(&*p));
                            note(&mut error, kind, fault(UNKNOWN, text));
                        }
                    }
                }
                drop(cmd);
                ctl.finish(k, kind, failed);
            }
        }
    }
}

/// Byte extent of `rows` rows `pitch` apart whose last row is `width` bytes
/// long (0 when nothing is touched); None on overflow.
fn extent_2d(pitch: usize, width: usize, height: usize) -> Option<usize> {
    if width == 0 || height == 0 {
        return Some(0);
    }
    (height - 1).checked_mul(pitch)?.checked_add(width)
}

/// Byte extent of a BLAS vector (`n` elements at increment `inc`).
fn extent_vec(n: usize, inc: isize, size: usize) -> Option<usize> {
    if n == 0 {
        return Some(0);
    }
    (n - 1).checked_mul(inc.unsigned_abs())?.checked_add(1)?.checked_mul(size)
}

/// Byte extent of a column-major `rows x cols` matrix with leading dimension `ld`.
fn extent_mat(rows: usize, cols: usize, ld: usize, size: usize) -> Option<usize> {
    if rows == 0 || cols == 0 {
        return Some(0);
    }
    (cols - 1).checked_mul(ld)?.checked_add(rows)?.checked_mul(size)
}

/// Stored shape (rows, cols) of an operand whose op is `rows_op x cols_op`.
fn stored(t: Trans, rows_op: usize, cols_op: usize) -> (usize, usize) {
    match t {
        Trans::N => (rows_op, cols_op),
        Trans::T | Trans::C => (cols_op, rows_op),
    }
}

/// Address of logical element `i` of a BLAS vector whose lowest-addressed
/// element is at `base`.
fn vec_elem(base: u64, n: usize, inc: isize, i: usize, size: usize) -> usize {
    let pos = if inc >= 0 { i } else { n - 1 - i };
    base as usize + pos * inc.unsigned_abs() * size
}

impl SimControl {
    /// Check that `[lo, lo + len)` lies in one live allocation (of this device
    /// unless `peer_ok`) and that `lo` is aligned to `align`; return the block
    /// so that it stays alive while the command uses it.
    fn pin(
        &self,
        what: &str,
        lo: u64,
        len: usize,
        peer_ok: bool,
        align: usize,
    ) -> std::result::Result<Option<Arc<Block>>, Fault> {
        if len == 0 {
            return Ok(None);
        }
        let Some(hi) = lo.checked_add(len as u64) else {
            return Err(fault(ILLEGAL_ADDRESS, format!("{what} [{lo:#x}, +{len}) wraps around the address space")));
        };
        let range = format!("{what} [{lo:#x}, {hi:#x})");
        let block = {
            let map = ALLOCATIONS.read();
            map.range(..=lo).next_back().map(|(_, b)| b.clone())
        };
        let Some(b) = block.filter(|b| lo < b.base + b.size as u64) else {
            return Err(fault(ILLEGAL_ADDRESS, format!("{range} does not start inside a live allocation")));
        };
        let end = b.base + b.size as u64;
        if hi > end {
            return Err(fault(
                ILLEGAL_ADDRESS,
                format!("{range} runs {} bytes past the end of the allocation [{:#x}, {end:#x})", hi - end, b.base),
            ));
        }
        if b.device != self.id && !peer_ok {
            return Err(fault(
                ILLEGAL_ADDRESS,
                format!(
                    "{range} is memory of simulated device {}, which kernels of device {} cannot access",
                    b.ordinal, self.ordinal
                ),
            ));
        }
        if lo % align as u64 != 0 {
            return Err(fault(MISALIGNED_ADDRESS, format!("{range} is not aligned to {align} bytes")));
        }
        Ok(Some(b))
    }

    /// Run a copy, memset or BLAS command (on its stream thread).
    fn execute(&self, cmd: &Cmd) -> std::result::Result<(), Fault> {
        #[cfg(test)]
        if self.panic_next.swap(false, SeqCst) {
            panic!("injected panic");
        }
        match *cmd {
            Cmd::Copy { dst, dpitch, src, spitch, width, height } => {
                // Extents were checked for overflow when the command was queued.
                let dext = extent_2d(dpitch, width, height).unwrap_or(usize::MAX);
                let sext = extent_2d(spitch, width, height).unwrap_or(usize::MAX);
                let _d = match dst {
                    Side::Dev(p) => self.pin("copy destination", p, dext, true, 1)?,
                    Side::Host(_) => None,
                };
                let _s = match src {
                    Side::Dev(p) => self.pin("copy source", p, sext, true, 1)?,
                    Side::Host(_) => None,
                };
                let (d, s) = (dst.addr() as usize, src.addr() as usize);
                for r in 0..height {
                    // SAFETY: device sides lie in live allocations (checked
                    // above, kept alive by the pins); host sides are valid for
                    // these rows by the contract of `Device::copy_2d`. `copy`
                    // tolerates overlap, which the contract excludes anyway.
                    unsafe { std::ptr::copy((s + r * spitch) as *const u8, (d + r * dpitch) as *mut u8, width) }
                }
                Ok(())
            }
            Cmd::Memset { dst, pitch, value, elem, width, height } => {
                let ext = extent_2d(pitch, width * elem, height).unwrap_or(usize::MAX);
                let _b = self.pin("memset destination", dst, ext, false, 1)?;
                for r in 0..height {
                    let row = dst as usize + r * pitch;
                    // SAFETY: the rows lie in a live allocation of this device
                    // (checked above); `dst` and `pitch` are multiples of
                    // `elem` (checked when queued), so the typed writes are aligned.
                    unsafe {
                        match elem {
                            1 => std::ptr::write_bytes(row as *mut u8, value as u8, width),
                            2 => (0..width).for_each(|e| (row as *mut u16).add(e).write(value as u16)),
                            _ => (0..width).for_each(|e| (row as *mut u32).add(e).write(value)),
                        }
                    }
                }
                Ok(())
            }
            Cmd::Scal { dtype, n, alpha, x, incx } => {
                let size = dtype.size();
                let ext = extent_vec(n, incx, size).unwrap_or(usize::MAX);
                let _x = self.pin("scal x", x, ext, false, size)?;
                // SAFETY: x's elements lie in a live allocation of this
                // device, aligned for the element type (checked above).
                unsafe { with_float(dtype, Kernel::Scal { n, alpha, x, incx }) }
            }
            Cmd::Axpy { dtype, n, alpha, x, incx, y, incy } => {
                let size = dtype.size();
                let _x = self.pin("axpy x", x, extent_vec(n, incx, size).unwrap_or(usize::MAX), false, size)?;
                let _y = self.pin("axpy y", y, extent_vec(n, incy, size).unwrap_or(usize::MAX), false, size)?;
                // SAFETY: as for scal, for both vectors.
                unsafe { with_float(dtype, Kernel::Axpy { n, alpha, x, incx, y, incy }) }
            }
            Cmd::Gemm { dtype, ref args } => {
                let size = dtype.size();
                let (m, n, k) = (args.m, args.n, args.k);
                if m == 0 || n == 0 {
                    return Ok(());
                }
                let (ra, ca) = stored(args.trans_a, m, k);
                let (rb, cb) = stored(args.trans_b, k, n);
                let ext = |r, c, ld| extent_mat(r, c, ld, size).unwrap_or(usize::MAX);
                let _a = self.pin("gemm A", args.a, ext(ra, ca, args.lda), false, size)?;
                let _b = self.pin("gemm B", args.b, ext(rb, cb, args.ldb), false, size)?;
                let _c = self.pin("gemm C", args.c, ext(m, n, args.ldc), false, size)?;
                // SAFETY: A, B and C lie in live allocations of this device,
                // aligned for the element type (checked above).
                unsafe { with_float(dtype, Kernel::Gemm(args)) }
            }
            Cmd::Record(_) | Cmd::Wait(_) | Cmd::Notify(_) => Ok(()),
        }
    }
}

// ---------------------------------------------------------------------------
// Reference BLAS
// ---------------------------------------------------------------------------

enum Kernel<'a> {
    Scal { n: usize, alpha: Scalar, x: u64, incx: isize },
    Axpy { n: usize, alpha: Scalar, x: u64, incx: isize, y: u64, incy: isize },
    Gemm(&'a GemmArgs),
}

/// Run `k` for a float dtype.
///
/// # Safety
/// Every element the kernel touches is valid memory aligned for the dtype,
/// and no other thread writes it meanwhile.
unsafe fn with_float(dtype: DType, k: Kernel<'_>) -> std::result::Result<(), Fault> {
    match dtype {
        DType::F32 => run_kernel::<f32>(k),
        DType::F64 => run_kernel::<f64>(k),
        DType::C64 => run_kernel::<Complex32>(k),
        DType::C128 => run_kernel::<Complex64>(k),
        // Refused when queued; kept as an error rather than a panic.
        d => return Err(fault(UNKNOWN, format!("no simulated BLAS for {}", d.name()))),
    }
    Ok(())
}

/// # Safety
/// As for [`with_float`], with `T` the element type of the dtype.
unsafe fn run_kernel<T: Element>(k: Kernel<'_>) {
    let size = std::mem::size_of::<T>();
    match k {
        Kernel::Scal { n, alpha, x, incx } => {
            let alpha = T::from_scalar(alpha);
            for i in 0..n {
                let p = vec_elem(x, n, incx, i, size) as *mut T;
                p.write(p.read().mul(alpha));
            }
        }
        Kernel::Axpy { n, alpha, x, incx, y, incy } => {
            let alpha = T::from_scalar(alpha);
            for i in 0..n {
                let xi = (vec_elem(x, n, incx, i, size) as *const T).read();
                let py = vec_elem(y, n, incy, i, size) as *mut T;
                py.write(alpha.mul(xi).add(py.read()));
            }
        }
        Kernel::Gemm(g) => {
            let (m, n, kk) = (g.m, g.n, g.k);
            let zero = T::zero();
            let alpha = T::from_scalar(g.alpha);
            let beta = T::from_scalar(g.beta);
            let (a, b, c) = (g.a as *const T, g.b as *const T, g.c as *mut T);
            let op = |p: *const T, t: Trans, ld: usize, r: usize, col: usize| -> T {
                match t {
                    Trans::N => p.add(r + col * ld).read(),
                    Trans::T => p.add(col + r * ld).read(),
                    Trans::C => p.add(col + r * ld).read().conj(),
                }
            };
            // The result goes to a temporary first, so C is written once.
            let mut out = vec![zero; m * n];
            if alpha != zero && kk > 0 {
                for j in 0..n {
                    for i in 0..m {
                        let mut acc = zero;
                        for l in 0..kk {
                            acc = acc.add(op(a, g.trans_a, g.lda, i, l).mul(op(b, g.trans_b, g.ldb, l, j)));
                        }
                        out[i + j * m] = alpha.mul(acc);
                    }
                }
            }
            for j in 0..n {
                for i in 0..m {
                    let p = c.add(i + j * g.ldc);
                    // beta == 0: C is not read (it may hold NaN).
                    let v = if beta == zero { out[i + j * m] } else { out[i + j * m].add(beta.mul(p.read())) };
                    p.write(v);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The device
// ---------------------------------------------------------------------------

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
    fn control(&self) -> Arc<SimControl> {
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

fn too_large(what: &str) -> Error {
    invalid(format!("{what} is too large for the address space"))
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

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Unit tests use ordinals far from the registry's (0..16), so that
    /// [`control`] finds the registry's devices in tests elsewhere.
    const ORD: u32 = 900;
    const S0: StreamId = StreamId(0);
    const S1: StreamId = StreamId(1);

    fn dev(streams: u32) -> SimDevice {
        SimDevice::new(ORD, streams)
    }

    /// Wait until the work queued on `s` so far is done; its status.
    fn sync(d: &SimDevice, s: StreamId) -> Result<()> {
        let (tx, rx) = mpsc::channel();
        d.notify(s, Box::new(move |r| drop(tx.send(r)))).unwrap();
        rx.recv_timeout(Duration::from_secs(20)).expect("the notify never came")
    }

    fn expect_async(d: &SimDevice, s: StreamId, name: &str) -> Error {
        let e = sync(d, s).expect_err("expected an asynchronous error");
        assert_eq!(e.status(), Status::CudaError);
        assert!(e.message().starts_with(name), "{e}");
        assert!(sync(d, s).is_ok(), "errors are not sticky");
        e
    }

    fn upload<T: Copy>(d: &SimDevice, ptr: DevPtr, data: &[T]) {
        let bytes = std::mem::size_of_val(data);
        unsafe { d.copy_2d(S0, Place::Device(ptr), bytes, Place::Host(data.as_ptr() as *mut u8), bytes, bytes, 1) }
            .unwrap();
        sync(d, S0).unwrap();
    }

    fn download<T: Element>(d: &SimDevice, ptr: DevPtr, n: usize) -> Vec<T> {
        let mut out = vec![T::zero(); n];
        let bytes = n * std::mem::size_of::<T>();
        unsafe { d.copy_2d(S0, Place::Host(out.as_mut_ptr().cast()), bytes, Place::Device(ptr), bytes, bytes, 1) }
            .unwrap();
        sync(d, S0).unwrap();
        out
    }

    fn alloc_with<T: Copy>(d: &SimDevice, data: &[T]) -> DevPtr {
        let p = d.alloc(std::mem::size_of_val(data).max(1)).unwrap();
        upload(d, p, data);
        p
    }

    /// Element types of the float dtypes, seen as complex doubles.
    trait Num: Element {
        const TOL: f64;
        fn to_c(self) -> Complex64;
        fn from_c(c: Complex64) -> Self;
    }
    impl Num for f32 {
        const TOL: f64 = 1e-4;
        fn to_c(self) -> Complex64 {
            Complex64::new(self as f64, 0.0)
        }
        fn from_c(c: Complex64) -> Self {
            c.re as f32
        }
    }
    impl Num for f64 {
        const TOL: f64 = 1e-12;
        fn to_c(self) -> Complex64 {
            Complex64::new(self, 0.0)
        }
        fn from_c(c: Complex64) -> Self {
            c.re
        }
    }
    impl Num for Complex32 {
        const TOL: f64 = 1e-4;
        fn to_c(self) -> Complex64 {
            Complex64::new(self.re as f64, self.im as f64)
        }
        fn from_c(c: Complex64) -> Self {
            Complex32::new(c.re as f32, c.im as f32)
        }
    }
    impl Num for Complex64 {
        const TOL: f64 = 1e-12;
        fn to_c(self) -> Complex64 {
            self
        }
        fn from_c(c: Complex64) -> Self {
            c
        }
    }

    /// Deterministic values in [-1, 1) (both parts).
    fn values<T: Num>(n: usize, seed: u64) -> Vec<T> {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut next = || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        };
        (0..n).map(|_| T::from_c(Complex64::new(next(), next()))).collect()
    }

    fn close<T: Num>(got: T, want: Complex64, what: &str) {
        let g = got.to_c();
        let tol = T::TOL * (1.0 + want.norm());
        assert!((g - want).norm() <= tol, "{what}: got {g}, want {want}");
    }

    fn scalar_for<T: Num>(c: Complex64) -> (Scalar, Complex64) {
        if T::DTYPE.is_complex() {
            (Scalar::complex(c.re, c.im), c)
        } else {
            // Real dtypes use the real part only: pass an imaginary part
            // that must be ignored.
            (Scalar::complex(c.re, 5.0), Complex64::new(c.re, 0.0))
        }
    }

    #[test]
    fn fifo_order_on_one_stream() {
        let d = dev(2);
        let ctl = d.control();
        let p = d.alloc(64).unwrap();
        ctl.pause();
        for v in 0..50u32 {
            unsafe { d.memset_2d(S0, p, 64, v, 4, 16, 1) }.unwrap();
        }
        assert_eq!(ctl.pending(), 50);
        assert_eq!(ctl.executed(), 0);
        ctl.resume();
        let got: Vec<u32> = download(&d, p, 16);
        assert_eq!(got, vec![49; 16]);
        let log = ctl.log();
        assert!(log[..50].iter().all(|op| *op == SimOp { stream: 0, kind: SimOpKind::Memset, failed: false }));
        unsafe { d.free(p) };
        assert_eq!(ctl.allocated(), 0);
    }

    #[test]
    fn record_and_wait_order_streams() {
        let d = dev(2);
        let ctl = d.control();
        let a = d.alloc(64).unwrap();
        let b = d.alloc(64).unwrap();
        // Stream 0 is held in a notify callback (blocking there is outside the
        // contract, but this is a test); its memset and record come after.
        let (release_tx, release_rx) = mpsc::channel::<()>();
        d.notify(
            S0,
            Box::new(move |_| {
                let _ = release_rx.recv();
            }),
        )
        .unwrap();
        unsafe { d.memset_2d(S0, a, 64, 0x11, 1, 64, 1) }.unwrap();
        let m = d.record(S0).unwrap();
        d.wait_marker(S1, &m).unwrap();
        unsafe { d.copy_2d(S1, Place::Device(b), 64, Place::Device(a), 64, 64, 1) }.unwrap();
        let (done_tx, done_rx) = mpsc::channel();
        d.notify(S1, Box::new(move |r| drop(done_tx.send(r)))).unwrap();
        // Stream 1 cannot finish while stream 0 is held.
        assert!(done_rx.try_recv().is_err());
        release_tx.send(()).unwrap();
        done_rx.recv_timeout(Duration::from_secs(20)).unwrap().unwrap();
        assert_eq!(download::<u8>(&d, b, 64), vec![0x11; 64]);
        let log = ctl.log();
        let pos = |stream, kind| log.iter().position(|o| o.stream == stream && o.kind == kind).unwrap();
        assert!(pos(0, SimOpKind::Memset) < pos(0, SimOpKind::Record));
        assert!(pos(0, SimOpKind::Record) < pos(1, SimOpKind::WaitMarker));
        assert!(pos(1, SimOpKind::WaitMarker) < pos(1, SimOpKind::Copy));
    }

    #[test]
    fn wait_on_delayed_stream() {
        let d = dev(2);
        let ctl = d.control();
        ctl.set_delay(Duration::from_millis(2));
        let a = d.alloc(256).unwrap();
        let b = d.alloc(256).unwrap();
        ctl.pause();
        for v in 1..=5u32 {
            unsafe { d.memset_2d(S0, a, 256, v, 4, 64, 1) }.unwrap();
        }
        let m = d.record(S0).unwrap();
        d.wait_marker(S1, &m).unwrap();
        unsafe { d.copy_2d(S1, Place::Device(b), 256, Place::Device(a), 256, 256, 1) }.unwrap();
        ctl.resume();
        sync(&d, S1).unwrap();
        ctl.set_delay(Duration::ZERO);
        assert_eq!(download::<u32>(&d, b, 64), vec![5; 64]);
        let log = ctl.log();
        let rec = log.iter().position(|o| o.kind == SimOpKind::Record).unwrap();
        let copy = log.iter().position(|o| o.kind == SimOpKind::Copy && o.stream == 1).unwrap();
        assert_eq!(log[..rec].iter().filter(|o| o.kind == SimOpKind::Memset).count(), 5);
        assert!(rec < copy);
    }

    #[test]
    fn foreign_markers_are_refused() {
        let d = dev(1);
        let e = dev(1);
        let m = e.record(S0).unwrap();
        assert_eq!(d.wait_marker(S0, &m).unwrap_err().status(), Status::InvalidArgument);
        let not_sim: Marker = Arc::new(5u32);
        assert_eq!(d.wait_marker(S0, &not_sim).unwrap_err().status(), Status::InvalidArgument);
        sync(&e, S0).unwrap();
    }

    #[test]
    fn injected_async_error_is_reported_once() {
        let d = dev(2);
        let ctl = d.control();
        let p = d.alloc(16).unwrap();
        unsafe { d.memset_2d(S0, p, 16, 0, 1, 16, 1) }.unwrap();
        sync(&d, S0).unwrap();
        ctl.clear_log();
        ctl.fail_next("CUDA_ERROR_LAUNCH_FAILED");
        unsafe { d.memset_2d(S0, p, 16, 7, 1, 16, 1) }.unwrap();
        let e = expect_async(&d, S0, "CUDA_ERROR_LAUNCH_FAILED");
        assert!(e.message().contains("Memset"), "{e}");
        // The failed memset did nothing.
        assert_eq!(download::<u8>(&d, p, 16), vec![0; 16]);
        let log = ctl.log();
        assert_eq!(log[0], SimOp { stream: 0, kind: SimOpKind::Memset, failed: true });
        assert!(!log[1].failed);
        // Other streams are unaffected.
        assert!(sync(&d, S1).is_ok());
        // An injected failure of a notify is reported by that notify.
        ctl.fail_next("CUDA_ERROR_ECC_UNCORRECTABLE");
        expect_async(&d, S1, "CUDA_ERROR_ECC_UNCORRECTABLE");
        // A failed record still reaches its marker.
        ctl.fail_next("CUDA_ERROR_LAUNCH_FAILED");
        let m = d.record(S0).unwrap();
        expect_async(&d, S0, "CUDA_ERROR_LAUNCH_FAILED");
        d.wait_marker(S1, &m).unwrap();
        sync(&d, S1).unwrap();
    }

    #[test]
    fn illegal_addresses_are_detected() {
        let d = dev(1);
        let ctl = d.control();
        let p = d.alloc(64).unwrap();
        let q = d.alloc(64).unwrap();
        let zeros = [0u8; 64];
        upload(&d, p, &zeros);
        upload(&d, q, &zeros);
        let mut host = [0u8; 128];
        let h = host.as_mut_ptr();
        unsafe {
            // memset one byte past the end, as one row and as a second row.
            d.memset_2d(S0, p, 65, 7, 1, 65, 1).unwrap();
            expect_async(&d, S0, ILLEGAL_ADDRESS);
            d.memset_2d(S0, p, 40, 7, 1, 25, 2).unwrap();
            expect_async(&d, S0, ILLEGAL_ADDRESS);
            // copies: device source, device destination, device-to-device.
            d.copy_2d(S0, Place::Host(h), 65, Place::Device(p), 65, 65, 1).unwrap();
            expect_async(&d, S0, ILLEGAL_ADDRESS);
            d.copy_2d(S0, Place::Device(p + 1), 64, Place::Host(h), 64, 64, 1).unwrap();
            let e = expect_async(&d, S0, ILLEGAL_ADDRESS);
            assert!(e.message().contains(&format!("{:#x}", p + 1)), "{e}");
            // Pitched device-to-device copies: the extent is (height - 1) * pitch + width.
            d.copy_2d(S0, Place::Device(q), 16, Place::Device(p), 16, 16, 4).unwrap();
            d.copy_2d(S0, Place::Device(q), 24, Place::Device(p), 16, 16, 3).unwrap();
            sync(&d, S0).unwrap();
            d.copy_2d(S0, Place::Device(q), 16, Place::Device(p), 32, 16, 3).unwrap();
            expect_async(&d, S0, ILLEGAL_ADDRESS);
            d.copy_2d(S0, Place::Device(q), 25, Place::Device(p), 16, 16, 3).unwrap();
            expect_async(&d, S0, ILLEGAL_ADDRESS);
            d.copy_2d(S0, Place::Device(q), 64, Place::Device(p), 16, 16, 2).unwrap();
            expect_async(&d, S0, ILLEGAL_ADDRESS);
            // scal: 17 floats in 64 bytes; and misaligned.
            d.scal(S0, DType::F32, 17, Scalar::real(2.0), p, 1).unwrap();
            expect_async(&d, S0, ILLEGAL_ADDRESS);
            d.scal(S0, DType::F32, 8, Scalar::real(2.0), p, -3).unwrap();
            expect_async(&d, S0, ILLEGAL_ADDRESS);
            d.scal(S0, DType::F32, 1, Scalar::real(2.0), p + 1, 1).unwrap();
            expect_async(&d, S0, MISALIGNED_ADDRESS);
            // axpy: y runs 4 bytes past q's end.
            d.axpy(S0, DType::F32, 16, Scalar::real(2.0), p, 1, q + 4, 1).unwrap();
            expect_async(&d, S0, ILLEGAL_ADDRESS);
            d.axpy(S0, DType::C128, 3, Scalar::real(2.0), p, 1, q, 1).unwrap();
            sync(&d, S0).unwrap();
            d.axpy(S0, DType::C128, 3, Scalar::real(2.0), p, 2, q, 1).unwrap();
            expect_async(&d, S0, ILLEGAL_ADDRESS);
            // gemm: C 4x4 with ldc 5 needs 76 bytes; A with trans T, k x m stored.
            let g = GemmArgs {
                trans_a: Trans::N,
                trans_b: Trans::N,
                m: 4,
                n: 4,
                k: 4,
                alpha: Scalar::real(1.0),
                a: p,
                lda: 4,
                b: p,
                ldb: 4,
                beta: Scalar::real(0.0),
                c: q,
                ldc: 4,
            };
            d.gemm(S0, DType::F32, &g).unwrap();
            sync(&d, S0).unwrap();
            d.gemm(S0, DType::F32, &GemmArgs { ldc: 5, ..g }).unwrap();
            expect_async(&d, S0, ILLEGAL_ADDRESS);
            // A^T with op(A) 5x4: A stored 4x5 at lda 4 needs 80 bytes.
            d.gemm(S0, DType::F32, &GemmArgs { trans_a: Trans::T, m: 5, n: 1, lda: 4, ldc: 5, ..g }).unwrap();
            let e = expect_async(&d, S0, ILLEGAL_ADDRESS);
            assert!(e.message().contains("gemm A"), "{e}");
            // B^H with op(B) 5x3: B stored 3x5 at ldb 4 needs 76 bytes (A^T fits: 5x3 at lda 5).
            let g2 = GemmArgs { trans_a: Trans::T, trans_b: Trans::C, m: 3, n: 3, k: 5, lda: 5, ldb: 4, ldc: 4, ..g };
            d.gemm(S0, DType::F32, &g2).unwrap();
            let e = expect_async(&d, S0, ILLEGAL_ADDRESS);
            assert!(e.message().contains("gemm B"), "{e}");
            d.gemm(S0, DType::F32, &GemmArgs { ldb: 3, ..g2 }).unwrap();
            sync(&d, S0).unwrap();
        }
        // Failed commands did nothing: q still holds the last good results.
        let before: Vec<u8> = download(&d, q, 64);
        assert!(ctl.log().iter().any(|o| o.failed));
        unsafe { d.free(p) };
        unsafe {
            // After free: every kind of command.
            d.memset_2d(S0, p, 16, 0, 1, 16, 1).unwrap();
            expect_async(&d, S0, ILLEGAL_ADDRESS);
            d.copy_2d(S0, Place::Host(h), 16, Place::Device(p), 16, 16, 1).unwrap();
            expect_async(&d, S0, ILLEGAL_ADDRESS);
            d.scal(S0, DType::F64, 2, Scalar::real(1.0), p, 1).unwrap();
            expect_async(&d, S0, ILLEGAL_ADDRESS);
            d.axpy(S0, DType::F64, 2, Scalar::real(1.0), p, 1, q, 1).unwrap();
            expect_async(&d, S0, ILLEGAL_ADDRESS);
            let g = GemmArgs {
                trans_a: Trans::N,
                trans_b: Trans::N,
                m: 2,
                n: 2,
                k: 2,
                alpha: Scalar::real(1.0),
                a: p,
                lda: 2,
                b: q,
                ldb: 2,
                beta: Scalar::real(0.0),
                c: q + 32,
                ldc: 2,
            };
            d.gemm(S0, DType::F32, &g).unwrap();
            expect_async(&d, S0, ILLEGAL_ADDRESS);
        }
        assert_eq!(download::<u8>(&d, q, 64), before);
        assert!(host.iter().all(|&b| b == 0));
        unsafe { d.free(q) };
        assert_eq!(ctl.allocated(), 0);
        assert_eq!(ctl.invalid_frees(), 0);
    }

    #[test]
    fn peer_memory_copies_but_kernels_refuse() {
        let d = SimDevice::new(ORD + 1, 1);
        let e = SimDevice::new(ORD + 2, 1);
        let p = alloc_with(&d, &[1u8, 2, 3, 4]);
        let q = e.alloc(4).unwrap();
        unsafe { d.copy_2d(S0, Place::Device(q), 4, Place::Device(p), 4, 4, 1) }.unwrap();
        sync(&d, S0).unwrap();
        assert_eq!(download::<u8>(&e, q, 4), vec![1, 2, 3, 4]);
        unsafe { d.memset_2d(S0, q, 4, 0, 1, 4, 1) }.unwrap();
        let err = expect_async(&d, S0, ILLEGAL_ADDRESS);
        assert!(err.message().contains(&format!("device {}", ORD + 2)), "{err}");
        unsafe {
            d.free(p);
            e.free(q);
        }
    }

    fn expected_vec_index(n: usize, inc: isize, i: usize) -> usize {
        // Logical element i of a BLAS vector, counted from its lowest element.
        if inc >= 0 {
            i * inc as usize
        } else {
            (n - 1 - i) * (-inc) as usize
        }
    }

    fn blas1_case<T: Num>(d: &SimDevice) {
        let n = 5;
        for &incx in &[1isize, 2, -1, -3] {
            for &incy in &[1isize, 3, -2] {
                let lx = (n - 1) * incx.unsigned_abs() + 1;
                let ly = (n - 1) * incy.unsigned_abs() + 1;
                let x: Vec<T> = values(lx, 1 + lx as u64);
                let y: Vec<T> = values(ly, 100 + ly as u64);
                let (alpha, alpha_c) = scalar_for::<T>(Complex64::new(0.75, -1.25));
                // scal
                let px = alloc_with(d, &x);
                unsafe { d.scal(S0, T::DTYPE, n, alpha, px, incx) }.unwrap();
                let got: Vec<T> = download(d, px, lx);
                let mut want: Vec<Complex64> = x.iter().map(|v| v.to_c()).collect();
                for i in 0..n {
                    let j = expected_vec_index(n, incx, i);
                    want[j] = x[j].to_c() * alpha_c;
                }
                for (g, w) in got.iter().zip(&want) {
                    close(*g, *w, &format!("scal {:?} incx {incx}", T::DTYPE));
                }
                // axpy
                upload(d, px, &x);
                let py = alloc_with(d, &y);
                unsafe { d.axpy(S0, T::DTYPE, n, alpha, px, incx, py, incy) }.unwrap();
                let got: Vec<T> = download(d, py, ly);
                let mut want: Vec<Complex64> = y.iter().map(|v| v.to_c()).collect();
                for i in 0..n {
                    let (jx, jy) = (expected_vec_index(n, incx, i), expected_vec_index(n, incy, i));
                    want[jy] = alpha_c * x[jx].to_c() + y[jy].to_c();
                }
                for (g, w) in got.iter().zip(&want) {
                    close(*g, *w, &format!("axpy {:?} incx {incx} incy {incy}", T::DTYPE));
                }
                // x itself is unchanged by axpy.
                assert_eq!(download::<T>(d, px, lx), x);
                unsafe {
                    d.free(px);
                    d.free(py);
                }
            }
        }
    }

    #[test]
    fn scal_and_axpy_match_naive_loops() {
        let d = dev(1);
        blas1_case::<f32>(&d);
        blas1_case::<f64>(&d);
        blas1_case::<Complex32>(&d);
        blas1_case::<Complex64>(&d);
        assert_eq!(d.control().allocated(), 0);
    }

    fn gemm_case<T: Num>(d: &SimDevice) {
        let (m, n, k) = (3usize, 4usize, 5usize);
        let ts = [Trans::N, Trans::T, Trans::C];
        for &ta in &ts {
            for &tb in &ts {
                for beta_zero in [false, true] {
                    let (ra, ca) = if ta == Trans::N { (m, k) } else { (k, m) };
                    let (rb, cb) = if tb == Trans::N { (k, n) } else { (n, k) };
                    let (lda, ldb, ldc) = (ra + 2, rb + 1, m + 3);
                    let a: Vec<T> = values(lda * ca, 7);
                    let b: Vec<T> = values(ldb * cb, 8);
                    let c0: Vec<T> = values(ldc * n, 9);
                    let pa = alloc_with(d, &a);
                    let pb = alloc_with(d, &b);
                    let pc = d.alloc(ldc * n * std::mem::size_of::<T>()).unwrap();
                    if !beta_zero {
                        upload(d, pc, &c0);
                    } // else C stays 0xFF bytes: NaN, which must not propagate.
                    let (alpha, alpha_c) = scalar_for::<T>(Complex64::new(1.5, -0.5));
                    let (beta, beta_c) = if beta_zero {
                        (Scalar::real(0.0), Complex64::new(0.0, 0.0))
                    } else {
                        scalar_for::<T>(Complex64::new(-0.25, 2.0))
                    };
                    let g =
                        GemmArgs { trans_a: ta, trans_b: tb, m, n, k, alpha, a: pa, lda, b: pb, ldb, beta, c: pc, ldc };
                    unsafe { d.gemm(S0, T::DTYPE, &g) }.unwrap();
                    let got: Vec<T> = download(d, pc, ldc * n);
                    let ae = |i: usize, l: usize| match ta {
                        Trans::N => a[i + l * lda].to_c(),
                        Trans::T => a[l + i * lda].to_c(),
                        Trans::C => a[l + i * lda].to_c().conj(),
                    };
                    let be = |l: usize, j: usize| match tb {
                        Trans::N => b[l + j * ldb].to_c(),
                        Trans::T => b[j + l * ldb].to_c(),
                        Trans::C => b[j + l * ldb].to_c().conj(),
                    };
                    for j in 0..n {
                        for i in 0..ldc {
                            let what = format!("gemm {:?} {ta:?}{tb:?} beta0={beta_zero} C[{i},{j}]", T::DTYPE);
                            let g = got[i + j * ldc];
                            if i >= m {
                                // Padding rows are not touched.
                                if beta_zero {
                                    assert!(g.to_c().re.is_nan(), "{what}");
                                } else {
                                    assert_eq!(g, c0[i + j * ldc], "{what}");
                                }
                                continue;
                            }
                            let mut s = Complex64::new(0.0, 0.0);
                            for l in 0..k {
                                s += ae(i, l) * be(l, j);
                            }
                            let mut want = alpha_c * s;
                            if !beta_zero {
                                want += beta_c * c0[i + j * ldc].to_c();
                            }
                            close(g, want, &what);
                        }
                    }
                    unsafe {
                        d.free(pa);
                        d.free(pb);
                        d.free(pc);
                    }
                }
            }
        }
    }

    #[test]
    fn gemm_matches_naive_loops() {
        let d = dev(1);
        gemm_case::<f32>(&d);
        gemm_case::<f64>(&d);
        gemm_case::<Complex32>(&d);
        gemm_case::<Complex64>(&d);
        assert_eq!(d.control().allocated(), 0);
    }

    #[test]
    fn gemm_edge_cases() {
        let d = dev(1);
        // k = 0: C = beta * C; alpha = 0: A and B not read (they hold NaN).
        let a = d.alloc(64).unwrap();
        let c = alloc_with(&d, &[1.0f64, 2.0, 3.0, 4.0]);
        let g = GemmArgs {
            trans_a: Trans::N,
            trans_b: Trans::N,
            m: 2,
            n: 2,
            k: 0,
            alpha: Scalar::real(1.0),
            a,
            lda: 2,
            b: a,
            ldb: 1,
            beta: Scalar::real(2.0),
            c,
            ldc: 2,
        };
        unsafe { d.gemm(S0, DType::F64, &g) }.unwrap();
        assert_eq!(download::<f64>(&d, c, 4), vec![2.0, 4.0, 6.0, 8.0]);
        unsafe { d.gemm(S0, DType::F64, &GemmArgs { k: 2, ldb: 2, alpha: Scalar::real(0.0), ..g }) }.unwrap();
        assert_eq!(download::<f64>(&d, c, 4), vec![4.0, 8.0, 12.0, 16.0]);
        unsafe {
            d.free(a);
            d.free(c);
        }
    }

    #[test]
    fn memset_2d_sets_elements() {
        let d = dev(1);
        let (pitch, rows, off) = (24usize, 4usize, 8usize);
        let total = off + pitch * rows;
        let p = d.alloc(total).unwrap();
        for (elem, width, value) in [(1usize, 10usize, 0xAABBCCDDu32), (2, 7, 0x1234_5678), (4, 5, 0xDEAD_BEEF)] {
            unsafe { d.memset_2d(S0, p, total, 0, 1, total, 1) }.unwrap();
            unsafe { d.memset_2d(S0, p + off as u64, pitch, value, elem, width, rows) }.unwrap();
            let got: Vec<u8> = download(&d, p, total);
            let mut want = vec![0u8; total];
            let bytes = value.to_le_bytes();
            for r in 0..rows {
                for e in 0..width {
                    for b in 0..elem {
                        want[off + r * pitch + e * elem + b] = bytes[b];
                    }
                }
            }
            assert_eq!(got, want, "elem {elem}");
        }
        unsafe { d.free(p) };
    }

    #[test]
    fn copy_2d_in_every_direction() {
        let d = SimDevice::new(ORD + 3, 2);
        let e = SimDevice::new(ORD + 4, 1);
        let src: Vec<u8> = (0..120).map(|i| i as u8).collect();
        let (w, h, sp, dp) = (10usize, 6usize, 20usize, 16usize);
        let p = d.alloc(dp * h).unwrap();
        let q = d.alloc(dp * h + 3).unwrap();
        let r = e.alloc(dp * h).unwrap();
        let mut out = vec![0u8; 13 * h];
        unsafe {
            d.copy_2d(S1, Place::Device(p), dp, Place::Host(src.as_ptr() as *mut u8), sp, w, h).unwrap();
            d.copy_2d(S1, Place::Device(q + 3), dp, Place::Device(p), dp, w, h).unwrap();
            d.copy_2d(S1, Place::Device(r), dp, Place::Device(q + 3), dp, w, h).unwrap();
            d.copy_2d(S1, Place::Host(out.as_mut_ptr()), 13, Place::Device(r), dp, w, h).unwrap();
        }
        sync(&d, S1).unwrap();
        for row in 0..h {
            assert_eq!(&out[row * 13..row * 13 + w], &src[row * sp..row * sp + w]);
            assert!(out[row * 13 + w..(row + 1) * 13].iter().all(|&b| b == 0));
        }
        // Gaps between rows are untouched: still the 0xFF fill.
        let dev_p: Vec<u8> = download(&d, p, dp * h);
        assert!(dev_p.chunks(dp).all(|row| row[w..].iter().all(|&b| b == 0xFF)));
        // Host to host works too; empty copies do nothing.
        let mut out2 = [0u8; 4];
        unsafe {
            d.copy_2d(S0, Place::Host(out2.as_mut_ptr()), 4, Place::Host(src.as_ptr() as *mut u8), 4, 4, 1).unwrap();
            d.copy_2d(S0, Place::Device(0x10), 0, Place::Device(0x20), 0, 0, 5).unwrap();
        }
        sync(&d, S0).unwrap();
        assert_eq!(out2, [0, 1, 2, 3]);
        unsafe {
            d.free(p);
            d.free(q);
            e.free(r);
        }
    }

    #[test]
    fn synchronous_argument_checks() {
        let d = dev(2);
        let ctl = d.control();
        let p = d.alloc(64).unwrap();
        let st = |r: Result<()>| r.unwrap_err().status();
        let g = GemmArgs {
            trans_a: Trans::T,
            trans_b: Trans::N,
            m: 2,
            n: 2,
            k: 3,
            alpha: Scalar::real(1.0),
            a: p,
            lda: 2,
            b: p,
            ldb: 3,
            beta: Scalar::real(0.0),
            c: p,
            ldc: 2,
        };
        unsafe {
            assert_eq!(st(d.memset_2d(StreamId(2), p, 4, 0, 1, 4, 1)), Status::InvalidArgument);
            assert_eq!(st(d.memset_2d(S0, p, 4, 0, 3, 4, 1)), Status::InvalidArgument);
            assert_eq!(st(d.memset_2d(S0, p + 1, 8, 0, 2, 4, 1)), Status::InvalidArgument);
            assert_eq!(st(d.memset_2d(S0, p, 6, 0, 2, 4, 2)), Status::InvalidArgument);
            assert_eq!(st(d.copy_2d(S0, Place::Device(p), 4, Place::Device(p), 8, 8, 2)), Status::InvalidArgument);
            assert_eq!(
                st(d.copy_2d(S0, Place::Device(p), 8, Place::Host(std::ptr::null_mut()), 8, 8, 2)),
                Status::InvalidArgument
            );
            assert_eq!(st(d.scal(S0, DType::I32, 4, Scalar::real(1.0), p, 1)), Status::Unsupported);
            assert_eq!(st(d.axpy(S0, DType::U8, 4, Scalar::real(1.0), p, 1, p, 1)), Status::Unsupported);
            assert_eq!(st(d.gemm(S0, DType::I64, &GemmArgs { lda: 3, ..g })), Status::Unsupported);
            assert_eq!(st(d.scal(S0, DType::F32, 4, Scalar::real(1.0), p, 0)), Status::InvalidArgument);
            assert_eq!(st(d.axpy(S0, DType::F32, 4, Scalar::real(1.0), p, 1, p, 0)), Status::InvalidArgument);
            assert_eq!(st(d.scal(S0, DType::F32, usize::MAX / 2, Scalar::real(1.0), p, 4)), Status::InvalidArgument);
            // op(A) = A^T is 2x3, so A is stored 3x2: lda >= 3.
            assert_eq!(st(d.gemm(S0, DType::F32, &g)), Status::InvalidArgument);
            assert_eq!(st(d.gemm(S0, DType::F32, &GemmArgs { lda: 3, ldb: 2, ..g })), Status::InvalidArgument);
            assert_eq!(st(d.gemm(S0, DType::F32, &GemmArgs { lda: 3, ldc: 1, ..g })), Status::InvalidArgument);
            assert_eq!(st(d.gemm(S0, DType::F32, &GemmArgs { lda: 3, m: 0, ldc: 0, ..g })), Status::InvalidArgument);
            d.gemm(S0, DType::F32, &GemmArgs { lda: 3, m: 0, ldc: 1, ..g }).unwrap();
            assert_eq!(st(d.notify(StreamId(7), Box::new(|_| ()))), Status::InvalidArgument);
            assert!(d.record(StreamId(2)).is_err());
        }
        assert_eq!(st(d.alloc(0).map(drop)), Status::InvalidArgument);
        sync(&d, S0).unwrap();
        // Only the valid empty gemm and the notify were queued.
        assert_eq!(ctl.executed(), 2);
        unsafe { d.free(p) };
    }

    #[test]
    fn memory_limit_gives_out_of_memory() {
        let d = dev(1);
        let ctl = d.control();
        ctl.set_memory_limit(Some(1000));
        let a = d.alloc(600).unwrap();
        assert_eq!(ctl.allocated(), 600);
        let e = d.alloc(600).unwrap_err();
        assert_eq!(e.status(), Status::OutOfMemory);
        assert!(e.message().contains("CUDA_ERROR_OUT_OF_MEMORY"), "{e}");
        assert!(d.describe().contains("1000"));
        let b = d.alloc(400).unwrap();
        assert_eq!(ctl.allocated(), 1000);
        unsafe { d.free(a) };
        let c = d.alloc(600).unwrap();
        ctl.set_memory_limit(None);
        let big = d.alloc(1 << 20).unwrap();
        assert_eq!(download::<u8>(&d, big + 1000, 8), vec![0xFF; 8]);
        unsafe {
            d.free(b);
            d.free(c);
            d.free(big);
        }
        assert_eq!(ctl.allocated(), 0);
        assert_eq!(d.alloc(usize::MAX).unwrap_err().status(), Status::OutOfMemory);
        // Double free is counted and ignored.
        unsafe { d.free(c) };
        assert_eq!(ctl.invalid_frees(), 1);
        assert_eq!(ctl.allocated(), 0);
    }

    #[test]
    fn host_allocations_are_counted() {
        let d = dev(1);
        let ctl = d.control();
        let h = d.alloc_host(1000).unwrap();
        assert_eq!(h as usize % ALIGN, 0);
        assert_eq!(ctl.host_allocated(), 1000);
        let h2 = d.alloc_host(24).unwrap();
        assert_eq!(ctl.host_allocated(), 1024);
        unsafe {
            d.free_host(h);
            d.free_host(h2);
        }
        assert_eq!(ctl.host_allocated(), 0);
        // Left-over pinned memory is freed with the device.
        let _ = d.alloc_host(10).unwrap();
    }

    #[test]
    fn fail_next_call_fails_one_call() {
        let d = dev(1);
        let ctl = d.control();
        ctl.fail_next_call("CUDA_ERROR_LAUNCH_FAILED");
        let e = d.alloc(8).unwrap_err();
        assert_eq!(e.status(), Status::CudaError);
        assert!(e.message().starts_with("CUDA_ERROR_LAUNCH_FAILED"), "{e}");
        assert_eq!(ctl.allocated(), 0);
        ctl.fail_next_call(OUT_OF_MEMORY);
        assert_eq!(d.alloc(8).unwrap_err().status(), Status::OutOfMemory);
        ctl.fail_next_call(OUT_OF_MEMORY);
        assert_eq!(d.alloc_host(8).unwrap_err().status(), Status::OutOfMemory);
        let p = d.alloc(8).unwrap();
        ctl.fail_next_call("CUDA_ERROR_LAUNCH_FAILED");
        let e = unsafe { d.memset_2d(S0, p, 8, 0, 1, 8, 1) }.unwrap_err();
        assert_eq!(e.status(), Status::CudaError);
        assert!(e.message().starts_with("CUDA_ERROR_LAUNCH_FAILED"));
        assert_eq!(ctl.pending(), 0);
        ctl.fail_next_call("CUDA_ERROR_LAUNCH_FAILED");
        assert_eq!(
            d.notify(S0, Box::new(|_| panic!("a failed notify call queues nothing"))).unwrap_err().status(),
            Status::CudaError
        );
        ctl.fail_next_call("CUDA_ERROR_INVALID_CONTEXT");
        // describe, ordinal, streams and free do not consume it.
        let _ = (d.describe(), d.ordinal(), d.streams());
        assert!(d.record(S0).unwrap_err().message().starts_with("CUDA_ERROR_INVALID_CONTEXT"));
        sync(&d, S0).unwrap();
        assert_eq!(ctl.executed(), 1);
        unsafe { d.free(p) };
    }

    #[test]
    fn pause_and_resume() {
        let d = dev(2);
        let ctl = d.control();
        let p = d.alloc(4).unwrap();
        ctl.pause();
        unsafe { d.memset_2d(S1, p, 4, 9, 1, 4, 1) }.unwrap();
        let (tx, rx) = mpsc::channel();
        d.notify(S1, Box::new(move |r| drop(tx.send(r)))).unwrap();
        assert_eq!(ctl.pending(), 2);
        assert_eq!(ctl.executed(), 0);
        assert!(rx.try_recv().is_err());
        ctl.resume();
        rx.recv_timeout(Duration::from_secs(20)).unwrap().unwrap();
        assert_eq!(ctl.executed(), 2);
        assert_eq!(ctl.pending(), 0);
        assert_eq!(download::<u8>(&d, p, 4), vec![9; 4]);
        unsafe { d.free(p) };
    }

    #[test]
    fn panics_become_unknown_errors() {
        let d = dev(1);
        let ctl = d.control();
        let p = d.alloc(4).unwrap();
        ctl.panic_next();
        unsafe { d.memset_2d(S0, p, 4, 1, 1, 4, 1) }.unwrap();
        let e = expect_async(&d, S0, UNKNOWN);
        assert!(e.message().contains("injected panic"), "{e}");
        // A panicking notify callback: reported by the next notify.
        d.notify(S0, Box::new(|_| panic!("callback panic"))).unwrap();
        expect_async(&d, S0, UNKNOWN);
        // The stream still works.
        unsafe { d.memset_2d(S0, p, 4, 3, 1, 4, 1) }.unwrap();
        assert_eq!(download::<u8>(&d, p, 4), vec![3; 4]);
        assert!(ctl.log().iter().any(|o| o.kind == SimOpKind::Memset && o.failed));
        unsafe { d.free(p) };
    }

    #[test]
    fn control_finds_devices_and_drop_does_not_hang() {
        let ord = ORD + 50;
        assert!(control(ord).is_none() || std::env::var_os(super::super::SIMULATED_DEVICES_ENV).is_some());
        let d = SimDevice::new(ord, 3);
        let c = control(ord).expect("control of a live device");
        assert!(Arc::ptr_eq(&c, &d.control()));
        assert_eq!(c.ordinal(), ord);
        // Drop a paused device with queued work: the work drains, nothing hangs.
        c.pause();
        let p = d.alloc(8).unwrap();
        unsafe { d.memset_2d(StreamId(2), p, 8, 5, 1, 8, 1) }.unwrap();
        let (tx, rx) = mpsc::channel();
        d.notify(StreamId(2), Box::new(move |r| drop(tx.send(r)))).unwrap();
        drop(d);
        rx.recv_timeout(Duration::from_secs(20)).unwrap().unwrap();
        assert!(control(ord).is_none());
        assert_eq!(c.executed(), 2);
    }

    #[test]
    fn stream_threads_are_named() {
        let d = SimDevice::new(ORD + 60, 2);
        let (tx, rx) = mpsc::channel();
        d.notify(S1, Box::new(move |_| drop(tx.send(std::thread::current().name().map(String::from))))).unwrap();
        let name = rx.recv_timeout(Duration::from_secs(20)).unwrap();
        assert_eq!(name.as_deref(), Some(format!("ta-sim{}-s1", ORD + 60).as_str()));
    }
}
