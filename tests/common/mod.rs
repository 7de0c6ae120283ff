//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tensorasync::*;

pub mod numeric;

/// A 1-d f64 tensor wrapping `user` zero-copy; `release` runs once, after
/// the last access.
///
/// # Safety
/// `user` must stay valid, and untouched by the test, until `release` has run.
pub unsafe fn wrap_f64(user: &mut [f64], release: impl FnOnce() + Send + 'static) -> Tensor {
    // SAFETY: forwarded from the caller; `user` holds exactly the elements of the layout.
    unsafe {
        Tensor::wrap(
            DType::F64,
            Layout::contiguous(&[user.len()], Order::RowMajor),
            user.as_mut_ptr().cast(),
            true,
            Some(Box::new(release)),
        )
    }
    .unwrap()
}

/// A one-shot gate that kernels can block on.
#[derive(Clone, Default)]
pub struct Gate(Arc<AtomicBool>);

impl Gate {
    pub fn open(&self) {
        self.0.store(true, Ordering::Release);
    }
    /// Spin (yielding) until open; panics after 20 s so a broken test fails instead of hanging.
    pub fn wait(&self) {
        let t0 = Instant::now();
        while !self.0.load(Ordering::Acquire) {
            assert!(t0.elapsed() < Duration::from_secs(20), "gate never opened");
            std::thread::yield_now();
        }
    }
}

/// A kernel that blocks on `gate`.
pub fn blocker(gate: &Gate) -> KernelFn {
    let g = gate.clone();
    KernelFn::new(move |_| {
        g.wait();
        Ok(())
    })
}

pub fn f64s(extents: &[usize], data: &[f64]) -> Tensor {
    Tensor::from_slice(extents, Order::RowMajor, data).unwrap()
}

/// Read a tensor of f64 (dense row-major copy), waiting for the copy.
pub fn read_f64(t: &Tensor) -> Vec<f64> {
    let n: usize = t.extents().unwrap().iter().product();
    let mut out = vec![0.0f64; n];
    let ev = unsafe { ops::copy_out(t, out.as_mut_ptr().cast(), n, None, Submit::default()) }.unwrap();
    ev.wait(Some(Duration::from_secs(30))).unwrap();
    out
}

/// `f(views)` as a kernel that cannot fail.
pub fn kernel(f: impl FnMut(&KernelCall<'_>) + Send + 'static) -> KernelFn {
    let mut f = f;
    KernelFn::new(move |c| {
        f(c);
        Ok(())
    })
}

/// Pointer to element 0 of a view as f64.
pub fn p64(v: &ResolvedView<'_>) -> *mut f64 {
    v.ptr as *mut f64
}

pub const LONG: Option<Duration> = Some(Duration::from_secs(60));
