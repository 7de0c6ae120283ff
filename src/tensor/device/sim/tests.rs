//! Unit tests of the simulated device.

use std::sync::Arc;
use std::time::Duration;

use num_complex::{Complex32, Complex64};

use super::commands::{SimOp, SimOpKind};
use super::control;
use super::device::SimDevice;
use super::faults::*;
use super::memory::ALIGN;
use crate::dtype::{DType, Element, Scalar};
use crate::error::{Error, Result, Status};
use crate::tensor::device::interface::{DevPtr, Device, GemmArgs, Marker, Place, StreamId, Trans};
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
    unsafe { d.copy_2d(S0, Place::Host(out.as_mut_ptr().cast()), bytes, Place::Device(ptr), bytes, bytes, 1) }.unwrap();
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
                let g = GemmArgs { trans_a: ta, trans_b: tb, m, n, k, alpha, a: pa, lda, b: pb, ldb, beta, c: pc, ldc };
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
    assert!(
        control(ord).is_none() || std::env::var_os(crate::tensor::device::registry::SIMULATED_DEVICES_ENV).is_some()
    );
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
