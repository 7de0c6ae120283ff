//! The stream threads: each runs its stream's commands in order, checking
//! the addresses they touch and recording asynchronous failures.

use std::panic::{catch_unwind, AssertUnwindSafe};
#[cfg(test)]
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use super::commands::{Cmd, Side, SimOpKind};
use super::control::SimControl;
use super::faults::{cuda_error, fault, panic_text, Fault, ILLEGAL_ADDRESS, MISALIGNED_ADDRESS, UNKNOWN};
use super::kernels::{extent_2d, extent_mat, extent_vec, stored, with_float, Kernel};
use super::memory::{Block, ALLOCATIONS};
use crate::error::Error;

pub(super) fn stream_main(ctl: Arc<SimControl>, k: u32) {
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

impl SimControl {
    /// Check that `[lo, lo + len)` lies in one live allocation (of this device
    /// unless `peer_ok`) and that `lo` is aligned to `align`; return the block
    /// so that it stays alive while the command uses it.
    pub(super) fn pin(
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
    pub(super) fn execute(&self, cmd: &Cmd) -> std::result::Result<(), Fault> {
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
