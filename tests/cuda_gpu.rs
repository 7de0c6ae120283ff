//! Real-GPU tests of the CUDA device (`src/device/cuda.rs`), written directly
//! against the `Device` trait. Each test first looks for a CUDA device and,
//! where there is none (no driver, no GPU, or simulated devices), prints
//! "skipped: no CUDA device" and returns: the file passes everywhere and
//! checks something only on a GPU. `scripts/gpu-check.sh` runs it there:
//!
//!     cargo test --release --test cuda_gpu -- --nocapture

use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use num_complex::{Complex32, Complex64};
use tensorasync::internals::device::{self, DevPtr, Device, GemmArgs, Marker, Place, StreamId, Trans};
use tensorasync::{DType, Scalar, Status};

// ---------------------------------------------------------------------------
// Finding a device

fn devices() -> Option<&'static [Arc<dyn Device>]> {
    static DEVICES: OnceLock<Option<Vec<Arc<dyn Device>>>> = OnceLock::new();
    DEVICES
        .get_or_init(|| {
            if device::is_simulated() {
                eprintln!("devices are simulated in this process (TA_SIMULATED_DEVICES)");
                return None;
            }
            if let Err(e) = device::device_count() {
                eprintln!("{}", e.message());
                return None;
            }
            match device::probe_for_tests() {
                Ok(list) if !list.is_empty() => Some(list),
                Ok(_) => None,
                Err(why) => panic!("the registry found CUDA devices but a second probe failed: {why}"),
            }
        })
        .as_deref()
}

macro_rules! gpu_or_skip {
    () => {
        match devices() {
            Some(list) => &*list[0],
            None => {
                println!("skipped: no CUDA device");
                return;
            }
        }
    };
}

const S0: StreamId = StreamId(0);
const S1: StreamId = StreamId(1);

/// Wait (in the test thread) until the work queued on `s` so far is done,
/// through `notify`; its status comes back.
fn sync(dev: &dyn Device, s: StreamId) -> tensorasync::Result<()> {
    let (tx, rx) = mpsc::channel();
    dev.notify(
        s,
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    )?;
    rx.recv_timeout(Duration::from_secs(120)).expect("the stream callback never came")
}

fn sync_ok(dev: &dyn Device, s: StreamId) {
    sync(dev, s).unwrap_or_else(|e| panic!("stream {s:?} failed: {e:?}"));
}

/// Device memory freed on drop (tests sync before; a panicking test leaks
/// instead of freeing memory that queued work may still use).
struct DevBuf<'a> {
    dev: &'a dyn Device,
    ptr: DevPtr,
    bytes: usize,
}

impl<'a> DevBuf<'a> {
    fn new(dev: &'a dyn Device, bytes: usize) -> Self {
        let ptr = dev.alloc(bytes).unwrap_or_else(|e| panic!("alloc({bytes}): {e:?}"));
        DevBuf { dev, ptr, bytes }
    }
    fn at(&self, offset: usize) -> DevPtr {
        assert!(offset <= self.bytes);
        self.ptr + offset as u64
    }
}

impl Drop for DevBuf<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            // SAFETY: from alloc; the test synchronised the streams that used it.
            unsafe { self.dev.free(self.ptr) };
        }
    }
}

fn bytes_of<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: plain numeric data viewed as bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

fn vec_from_bytes<T: Copy + Default>(b: &[u8]) -> Vec<T> {
    let n = b.len() / std::mem::size_of::<T>();
    let mut v = vec![T::default(); n];
    // SAFETY: v holds n elements = b.len() bytes of plain numeric data.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), v.as_mut_ptr() as *mut u8, n * std::mem::size_of::<T>()) };
    v
}

/// Copy host bytes into new device memory (stream 0) and wait.
fn upload<'a>(dev: &'a dyn Device, data: &[u8]) -> DevBuf<'a> {
    let buf = DevBuf::new(dev, data.len().max(1));
    // SAFETY: both regions are valid for data.len() bytes until the sync.
    unsafe { dev.copy_2d(S0, Place::Device(buf.ptr), 0, Place::Host(data.as_ptr() as *mut u8), 0, data.len(), 1) }
        .expect("upload");
    sync_ok(dev, S0);
    buf
}

/// Copy `len` bytes of device memory to the host (stream 0) and wait.
fn download(dev: &dyn Device, ptr: DevPtr, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    // SAFETY: both regions are valid for len bytes until the sync.
    unsafe { dev.copy_2d(S0, Place::Host(out.as_mut_ptr()), 0, Place::Device(ptr), 0, len, 1) }.expect("download");
    sync_ok(dev, S0);
    out
}

// ---------------------------------------------------------------------------
// Element types and references

trait El: Copy + Default + Send + std::fmt::Debug + 'static {
    const DT: DType;
    /// Relative tolerance of one result against the f64 reference.
    const TOL: f64;
    fn from_c(c: Complex64) -> Self;
    fn to_c(self) -> Complex64;
}

impl El for f32 {
    const DT: DType = DType::F32;
    const TOL: f64 = 2e-5;
    fn from_c(c: Complex64) -> Self {
        c.re as f32
    }
    fn to_c(self) -> Complex64 {
        Complex64::new(self as f64, 0.0)
    }
}

impl El for f64 {
    const DT: DType = DType::F64;
    const TOL: f64 = 1e-13;
    fn from_c(c: Complex64) -> Self {
        c.re
    }
    fn to_c(self) -> Complex64 {
        Complex64::new(self, 0.0)
    }
}

impl El for Complex32 {
    const DT: DType = DType::C64;
    const TOL: f64 = 2e-5;
    fn from_c(c: Complex64) -> Self {
        Complex32::new(c.re as f32, c.im as f32)
    }
    fn to_c(self) -> Complex64 {
        Complex64::new(self.re as f64, self.im as f64)
    }
}

impl El for Complex64 {
    const DT: DType = DType::C128;
    const TOL: f64 = 1e-13;
    fn from_c(c: Complex64) -> Self {
        c
    }
    fn to_c(self) -> Complex64 {
        self
    }
}

/// Deterministic values in [-1, 1) (imaginary parts dropped for real types).
fn random<T: El>(n: usize, seed: u64) -> Vec<T> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut next = move || {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    };
    (0..n).map(|_| T::from_c(Complex64::new(next(), next()))).collect()
}

/// The alpha and beta a test uses: complex for complex dtypes, real otherwise.
fn scalar_for<T: El>(re: f64, im: f64) -> Scalar {
    if T::DT.is_complex() {
        Scalar::complex(re, im)
    } else {
        Scalar::real(re)
    }
}

fn sc(s: Scalar) -> Complex64 {
    Complex64::new(s.re, s.im)
}

fn assert_close<T: El>(got: &[T], want: &[Complex64], scale: f64, what: &str) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let err = (g.to_c() - w).norm();
        assert!(
            err <= T::TOL * scale * (1.0 + w.norm()),
            "{what} ({:?}): element {i} is {g:?}, want {w} (error {err:e})",
            T::DT
        );
    }
}

/// Where logical element `i` of an `n`-vector with increment `inc` sits,
/// counted from its lowest-addressed element (BLAS convention).
fn blas_index(i: usize, n: usize, inc: isize) -> usize {
    if inc >= 0 {
        i * inc as usize
    } else {
        (n - 1 - i) * inc.unsigned_abs()
    }
}

// ---------------------------------------------------------------------------
// Tests

#[test]
fn registry_and_description() {
    let dev = gpu_or_skip!();
    let all = devices().unwrap();
    assert_eq!(device::device_count().unwrap(), all.len());
    for (i, d) in all.iter().enumerate() {
        println!("{}", d.describe());
        assert_eq!(d.ordinal() as usize, i);
        assert!(d.describe().starts_with(&format!("CUDA device {i}: ")), "{}", d.describe());
    }
    assert!(dev.streams() >= 2, "the tests need two streams");
}

#[test]
fn alloc_and_free() {
    let dev = gpu_or_skip!();
    let mut ptrs = Vec::new();
    for bytes in [1usize, 8, 1000, 1 << 20, 64 << 20] {
        let p = dev.alloc(bytes).unwrap_or_else(|e| panic!("alloc({bytes}): {e:?}"));
        assert_ne!(p, 0);
        assert_eq!(p % 256, 0, "device memory is aligned for every dtype");
        ptrs.push(p);
    }
    for p in ptrs {
        // SAFETY: from alloc, unused.
        unsafe { dev.free(p) };
    }
    let h = dev.alloc_host(4096).expect("alloc_host");
    assert!(!h.is_null());
    // SAFETY: 4096 writable bytes from alloc_host.
    unsafe { std::ptr::write_bytes(h, 0x11, 4096) };
    // SAFETY: from alloc_host, unused.
    unsafe { dev.free_host(h) };
    assert_eq!(dev.alloc(0).unwrap_err().status(), Status::InvalidArgument);
}

#[test]
fn out_of_memory_is_its_own_status() {
    let dev = gpu_or_skip!();
    let e = dev.alloc(1usize << 50).expect_err("1 PiB cannot be allocated");
    assert_eq!(e.status(), Status::OutOfMemory, "{e:?}");
    assert!(e.message().contains("CUDA_ERROR_OUT_OF_MEMORY"), "{}", e.message());
    println!("1 PiB: {e:?}");
    // The device still works.
    let b = upload(dev, &[1, 2, 3, 4]);
    assert_eq!(download(dev, b.ptr, 4), vec![1, 2, 3, 4]);
}

#[test]
fn copy_2d_round_trips_with_pitches() {
    let dev = gpu_or_skip!();
    let (rows, width) = (9usize, 100usize);
    let (hpitch_in, dpitch_a, dpitch_b, hpitch_out) = (128usize, 256usize, 512usize, 160usize);
    let src: Vec<u8> = (0..rows * hpitch_in).map(|i| (i * 7 % 251) as u8).collect();
    let a = DevBuf::new(dev, rows * dpitch_a);
    let b = DevBuf::new(dev, rows * dpitch_b);
    let mut out = vec![0xEEu8; rows * hpitch_out];
    // SAFETY: every region is valid for its rows x pitch until the syncs below.
    unsafe {
        dev.memset_2d(S0, a.ptr, dpitch_a, 0, 1, dpitch_a, rows).unwrap();
        dev.memset_2d(S0, b.ptr, dpitch_b, 0, 1, dpitch_b, rows).unwrap();
        dev.copy_2d(S0, Place::Device(a.ptr), dpitch_a, Place::Host(src.as_ptr() as *mut u8), hpitch_in, width, rows)
            .unwrap();
        dev.copy_2d(S0, Place::Device(b.ptr), dpitch_b, Place::Device(a.ptr), dpitch_a, width, rows).unwrap();
        dev.copy_2d(S0, Place::Host(out.as_mut_ptr()), hpitch_out, Place::Device(b.ptr), dpitch_b, width, rows)
            .unwrap();
    }
    sync_ok(dev, S0);
    for r in 0..rows {
        assert_eq!(&out[r * hpitch_out..r * hpitch_out + width], &src[r * hpitch_in..r * hpitch_in + width], "row {r}");
        assert!(
            out[r * hpitch_out + width..(r + 1) * hpitch_out].iter().all(|&x| x == 0xEE),
            "host padding of row {r}"
        );
    }
    // The device padding was not written.
    let whole_b = download(dev, b.ptr, rows * dpitch_b);
    for r in 0..rows {
        assert!(whole_b[r * dpitch_b + width..(r + 1) * dpitch_b].iter().all(|&x| x == 0), "device padding of row {r}");
    }

    // Page-locked host memory on both ends, and a column offset.
    let pin_in = dev.alloc_host(rows * hpitch_in).unwrap();
    let pin_out = dev.alloc_host(rows * hpitch_out).unwrap();
    // SAFETY: the pinned buffers hold these sizes; the copies are done at the sync.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), pin_in, rows * hpitch_in);
        std::ptr::write_bytes(pin_out, 0xEE, rows * hpitch_out);
        dev.copy_2d(S1, Place::Device(a.at(8)), dpitch_a, Place::Host(pin_in.add(3)), hpitch_in, width - 8, rows)
            .unwrap();
        dev.copy_2d(S1, Place::Host(pin_out), hpitch_out, Place::Device(a.at(8)), dpitch_a, width - 8, rows).unwrap();
    }
    sync_ok(dev, S1);
    // SAFETY: pinned buffer of rows * hpitch_out bytes, no work pending.
    let got = unsafe { std::slice::from_raw_parts(pin_out, rows * hpitch_out) }.to_vec();
    for r in 0..rows {
        assert_eq!(
            &got[r * hpitch_out..r * hpitch_out + width - 8],
            &src[r * hpitch_in + 3..r * hpitch_in + width - 5]
        );
    }
    // SAFETY: from alloc_host, no work pending.
    unsafe {
        dev.free_host(pin_in);
        dev.free_host(pin_out);
    }

    // Rows back to back on both sides (one 1-D copy), device to device and back.
    let c = DevBuf::new(dev, rows * width);
    let mut back = vec![0u8; rows * width];
    // SAFETY: rows * width bytes on every side; synced below.
    unsafe {
        dev.copy_2d(S0, Place::Device(c.ptr), width, Place::Device(a.ptr), dpitch_a, width, rows).unwrap();
        dev.copy_2d(S0, Place::Host(back.as_mut_ptr()), width, Place::Device(c.ptr), width, width, rows).unwrap();
    }
    sync_ok(dev, S0);
    for r in 0..rows {
        let mut want = src[r * hpitch_in..r * hpitch_in + width].to_vec();
        want[8..].copy_from_slice(&src[r * hpitch_in + 3..r * hpitch_in + width - 5]);
        assert_eq!(&back[r * width..(r + 1) * width], &want[..], "contiguous row {r}");
    }

    // Zero sizes are no-ops.
    // SAFETY: nothing is copied.
    unsafe { dev.copy_2d(S0, Place::Device(a.ptr), 0, Place::Device(b.ptr), 0, 0, 5) }.unwrap();
    sync_ok(dev, S0);
}

#[test]
fn memset_2d_for_each_element_size() {
    let dev = gpu_or_skip!();
    let (pitch, rows) = (512usize, 6usize);
    for (elem, value) in [(1usize, 0xA5u32), (2, 0xBEEF), (4, 0xDEAD_BEEF)] {
        let buf = DevBuf::new(dev, pitch * rows);
        let (offset, width, height) = (64usize, 20usize, 4usize);
        // SAFETY: the regions lie inside the buffer until the sync.
        unsafe {
            dev.memset_2d(S0, buf.ptr, pitch, 0, 1, pitch, rows).unwrap();
            dev.memset_2d(S0, buf.at(offset), pitch, value, elem, width, height).unwrap();
        }
        let got = download(dev, buf.ptr, pitch * rows);
        let pattern = &value.to_le_bytes()[..elem];
        for r in 0..rows {
            for c in 0..pitch {
                let inside = r < height && c >= offset && c < offset + width * elem;
                let want = if inside { pattern[(c - offset) % elem] } else { 0 };
                assert_eq!(got[r * pitch + c], want, "elem {elem}: row {r}, byte {c}");
            }
        }
    }
    // One row ignores the pitch.
    let buf = DevBuf::new(dev, 64);
    // SAFETY: 16 u32 fit in the buffer.
    unsafe { dev.memset_2d(S0, buf.ptr, 0, 7, 4, 16, 1) }.unwrap();
    let got: Vec<u32> = vec_from_bytes(&download(dev, buf.ptr, 64));
    assert_eq!(got, vec![7u32; 16]);
}

fn check_scal<T: El>(dev: &dyn Device) {
    let n = 1000usize;
    let mut alphas = vec![scalar_for::<T>(0.5, -1.25), Scalar::real(-2.0)];
    if T::DT.is_complex() {
        alphas.push(Scalar::real(2.5)); // the real-alpha path (Csscal/Zdscal)
    }
    for alpha in alphas {
        for inc in [1isize, 3, -2] {
            let len = 1 + (n - 1) * inc.unsigned_abs();
            let x0: Vec<T> = random(len, 11 + inc as u64);
            let buf = upload(dev, bytes_of(&x0));
            // SAFETY: the buffer holds n elements at |inc|.
            unsafe { dev.scal(S0, T::DT, n, alpha, buf.ptr, inc) }.unwrap();
            sync_ok(dev, S0);
            let got: Vec<T> = vec_from_bytes(&download(dev, buf.ptr, len * std::mem::size_of::<T>()));
            let mut want: Vec<Complex64> = x0.iter().map(|v| v.to_c()).collect();
            for i in 0..n {
                let j = blas_index(i, n, inc);
                want[j] *= sc(alpha);
            }
            assert_close(&got, &want, 4.0, &format!("scal alpha {alpha:?} inc {inc}"));
        }
    }
}

#[test]
fn large_contiguous_copy_and_memset() {
    let dev = gpu_or_skip!();
    // Beyond 2 GiB: more than the largest pitch the 2-D calls accept.
    let bytes = (5usize << 30) / 2;
    let a = match dev.alloc(bytes) {
        Ok(p) => p,
        Err(e) if e.status() == Status::OutOfMemory => {
            println!("skipped: not enough device memory for 2 x 2.5 GiB");
            return;
        }
        Err(e) => panic!("{e:?}"),
    };
    let b = dev.alloc(bytes).unwrap();
    // SAFETY: both buffers hold `bytes`; synced below.
    unsafe {
        dev.memset_2d(S0, a, bytes, 0x3C3C_3C3C, 4, bytes / 4, 1).unwrap();
        dev.memset_2d(S0, b, 0, 0, 1, bytes, 1).unwrap();
        dev.copy_2d(S0, Place::Device(b), bytes, Place::Device(a), bytes, bytes, 1).unwrap();
    }
    sync_ok(dev, S0);
    for offset in [0, bytes / 2, bytes - 64] {
        assert_eq!(download(dev, b + offset as u64, 64), vec![0x3C; 64], "offset {offset}");
    }
    // SAFETY: from alloc; their work is done.
    unsafe {
        dev.free(a);
        dev.free(b);
    }
}

#[test]
fn scal_for_every_float_dtype() {
    let dev = gpu_or_skip!();
    check_scal::<f32>(dev);
    check_scal::<f64>(dev);
    check_scal::<Complex32>(dev);
    check_scal::<Complex64>(dev);
}

fn check_axpy<T: El>(dev: &dyn Device) {
    let n = 777usize;
    let alpha = scalar_for::<T>(-0.75, 0.5);
    for (incx, incy) in [(1isize, 1isize), (2, 3), (-1, -2), (-2, 1), (1, -3)] {
        let (lx, ly) = (1 + (n - 1) * incx.unsigned_abs(), 1 + (n - 1) * incy.unsigned_abs());
        let x0: Vec<T> = random(lx, 21);
        let y0: Vec<T> = random(ly, 22);
        let bx = upload(dev, bytes_of(&x0));
        let by = upload(dev, bytes_of(&y0));
        // SAFETY: both buffers hold n elements at their increments.
        unsafe { dev.axpy(S1, T::DT, n, alpha, bx.ptr, incx, by.ptr, incy) }.unwrap();
        sync_ok(dev, S1);
        let got: Vec<T> = vec_from_bytes(&download(dev, by.ptr, ly * std::mem::size_of::<T>()));
        let mut want: Vec<Complex64> = y0.iter().map(|v| v.to_c()).collect();
        for i in 0..n {
            let (ix, iy) = (blas_index(i, n, incx), blas_index(i, n, incy));
            want[iy] += sc(alpha) * x0[ix].to_c();
        }
        assert_close(&got, &want, 4.0, &format!("axpy incx {incx} incy {incy}"));
    }
}

#[test]
fn axpy_for_every_float_dtype() {
    let dev = gpu_or_skip!();
    check_axpy::<f32>(dev);
    check_axpy::<f64>(dev);
    check_axpy::<Complex32>(dev);
    check_axpy::<Complex64>(dev);
}

/// Element (i, j) of op(M) for M stored column-major with leading dimension ld.
fn op_at<T: El>(m: &[T], ld: usize, t: Trans, i: usize, j: usize) -> Complex64 {
    match t {
        Trans::N => m[i + j * ld].to_c(),
        Trans::T => m[j + i * ld].to_c(),
        Trans::C => m[j + i * ld].to_c().conj(),
    }
}

fn check_gemm<T: El>(dev: &dyn Device) {
    let (m, n, k) = (37usize, 29usize, 23usize);
    let sz = std::mem::size_of::<T>();
    for ta in [Trans::N, Trans::T, Trans::C] {
        for tb in [Trans::N, Trans::T, Trans::C] {
            for beta_zero in [false, true] {
                let (ra, ca) = if ta == Trans::N { (m, k) } else { (k, m) };
                let (rb, cb) = if tb == Trans::N { (k, n) } else { (n, k) };
                let (lda, ldb, ldc) = (ra + 3, rb + 2, m + 1);
                let a: Vec<T> = random(lda * ca, 31);
                let b: Vec<T> = random(ldb * cb, 32);
                let c0: Vec<T> = if beta_zero {
                    // With beta zero, C is not read: NaN must not leak through.
                    vec![T::from_c(Complex64::new(f64::NAN, f64::NAN)); ldc * n]
                } else {
                    random(ldc * n, 33)
                };
                let alpha = scalar_for::<T>(1.5, -0.5);
                let beta = if beta_zero { Scalar::real(0.0) } else { scalar_for::<T>(-0.75, 0.25) };
                let (da, db, dc) = (upload(dev, bytes_of(&a)), upload(dev, bytes_of(&b)), upload(dev, bytes_of(&c0)));
                let args = GemmArgs {
                    trans_a: ta,
                    trans_b: tb,
                    m,
                    n,
                    k,
                    alpha,
                    a: da.ptr,
                    lda,
                    b: db.ptr,
                    ldb,
                    beta,
                    c: dc.ptr,
                    ldc,
                };
                // SAFETY: the matrices fit their buffers.
                unsafe { dev.gemm(S1, T::DT, &args) }.unwrap();
                sync_ok(dev, S1);
                let got: Vec<T> = vec_from_bytes(&download(dev, dc.ptr, ldc * n * sz));
                let mut want: Vec<Complex64> = c0.iter().map(|v| v.to_c()).collect();
                for j in 0..n {
                    for i in 0..m {
                        let mut acc = Complex64::new(0.0, 0.0);
                        for p in 0..k {
                            acc += op_at(&a, lda, ta, i, p) * op_at(&b, ldb, tb, p, j);
                        }
                        let old = if beta_zero { Complex64::new(0.0, 0.0) } else { sc(beta) * want[i + j * ldc] };
                        want[i + j * ldc] = sc(alpha) * acc + old;
                    }
                }
                // Compare the m x n part; the padding row of C is left as it was.
                let (got_c, want_c): (Vec<T>, Vec<Complex64>) =
                    (0..n).flat_map(|j| (0..m).map(move |i| i + j * ldc)).map(|ix| (got[ix], want[ix])).unzip();
                assert_close(&got_c, &want_c, k as f64, &format!("gemm {ta:?}{tb:?} beta_zero={beta_zero}"));
                if !beta_zero {
                    for j in 0..n {
                        assert_eq!(format!("{:?}", got[m + j * ldc]), format!("{:?}", c0[m + j * ldc]), "C padding");
                    }
                }
            }
        }
    }
}

#[test]
fn gemm_for_every_float_dtype_and_trans() {
    let dev = gpu_or_skip!();
    check_gemm::<f32>(dev);
    check_gemm::<f64>(dev);
    check_gemm::<Complex32>(dev);
    check_gemm::<Complex64>(dev);
}

#[test]
fn markers_order_work_across_streams() {
    let dev = gpu_or_skip!();
    let n = 1024usize;
    let ones = vec![1.0f64; n * n];
    let (a, b) = (upload(dev, bytes_of(&ones)), upload(dev, bytes_of(&ones)));
    let c = DevBuf::new(dev, n * n * 8);
    let d = DevBuf::new(dev, n * n * 8);
    let reps = 8;
    // SAFETY: all matrices are n x n f64 in their buffers; synced below.
    unsafe {
        dev.memset_2d(S0, c.ptr, 0, 0, 4, n * n * 2, 1).unwrap();
        dev.memset_2d(S1, d.ptr, 0, 0, 4, n * n * 2, 1).unwrap();
        for _ in 0..reps {
            let g = GemmArgs {
                trans_a: Trans::N,
                trans_b: Trans::N,
                m: n,
                n,
                k: n,
                alpha: Scalar::real(1.0),
                a: a.ptr,
                lda: n,
                b: b.ptr,
                ldb: n,
                beta: Scalar::real(1.0),
                c: c.ptr,
                ldc: n,
            };
            dev.gemm(S0, DType::F64, &g).unwrap();
        }
    }
    let m: Marker = dev.record(S0).unwrap();
    dev.wait_marker(S1, &m).unwrap();
    drop(m); // the wait holds on without the marker
             // SAFETY: both buffers hold n*n f64; S1 waits for S0's gemms.
    unsafe { dev.copy_2d(S1, Place::Device(d.ptr), 0, Place::Device(c.ptr), 0, n * n * 8, 1) }.unwrap();
    sync_ok(dev, S1);
    let got: Vec<f64> = vec_from_bytes(&download(dev, d.ptr, n * n * 8));
    let want = (reps * n) as f64;
    assert!(got.iter().all(|&v| v == want), "S1 copied C before S0's gemms were done: {} != {want}", got[0]);
    sync_ok(dev, S0);

    // A marker that is not a CUDA marker is refused.
    let wrong: Marker = Arc::new(5u32);
    assert_eq!(dev.wait_marker(S1, &wrong).unwrap_err().status(), Status::InvalidArgument);
    // Many markers in flight recycle their events.
    for _ in 0..2000 {
        let m = dev.record(S0).unwrap();
        dev.wait_marker(S1, &m).unwrap();
    }
    sync_ok(dev, S1);
}

#[test]
fn notify_comes_in_order_and_after_the_work() {
    let dev = gpu_or_skip!();
    let s = StreamId(dev.streams() - 1);
    let buf = DevBuf::new(dev, 1 << 20);
    let seen = Arc::new(Mutex::new(Vec::new()));
    for i in 0..300u32 {
        // SAFETY: inside the buffer; synced below.
        unsafe { dev.memset_2d(s, buf.ptr, 0, i, 4, 1 << 18, 1) }.unwrap();
        let seen = seen.clone();
        dev.notify(s, Box::new(move |r| seen.lock().unwrap().push((i, r.is_ok())))).unwrap();
    }
    sync_ok(dev, s);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 300);
    for (k, (i, ok)) in seen.iter().enumerate() {
        assert_eq!(*i as usize, k, "callbacks out of order");
        assert!(ok, "callback {k} got an error");
    }

    // The callback runs after the copy into page-locked memory is done.
    let pinned = dev.alloc_host(1 << 20).unwrap() as usize;
    let (tx, rx) = mpsc::channel();
    // SAFETY: buffers of 1 MiB; the callback reads the pinned one only after the copy.
    unsafe {
        dev.memset_2d(s, buf.ptr, 0, 0x5A, 1, 1 << 20, 1).unwrap();
        dev.copy_2d(s, Place::Host(pinned as *mut u8), 0, Place::Device(buf.ptr), 0, 1 << 20, 1).unwrap();
    }
    dev.notify(
        s,
        Box::new(move |r| {
            // SAFETY: 1 MiB of pinned memory, written by the copy queued before.
            let data = unsafe { std::slice::from_raw_parts(pinned as *const u8, 1 << 20) };
            let _ = tx.send((r.is_ok(), data.iter().all(|&b| b == 0x5A)));
        }),
    )
    .unwrap();
    let (ok, all) = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    assert!(ok && all, "the notify ran before the copy was done (ok {ok}, data {all})");
    // SAFETY: from alloc_host; its copy is done.
    unsafe { dev.free_host(pinned as *mut u8) };

    // An unknown stream queues nothing.
    let e = dev.notify(StreamId(999), Box::new(|_| panic!("must not run"))).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
}

#[test]
fn injected_errors_are_reported_and_leave_the_device_usable() {
    let dev = gpu_or_skip!();
    let buf = DevBuf::new(dev, 4096);
    // A gemm whose leading dimension is too small for A: cuBLAS refuses it.
    let g = GemmArgs {
        trans_a: Trans::N,
        trans_b: Trans::N,
        m: 16,
        n: 4,
        k: 4,
        alpha: Scalar::real(1.0),
        a: buf.ptr,
        lda: 15,
        b: buf.ptr,
        ldb: 4,
        beta: Scalar::real(0.0),
        c: buf.at(2048),
        ldc: 16,
    };
    // SAFETY: cuBLAS rejects the call before touching memory.
    let e = unsafe { dev.gemm(S0, DType::F64, &g) }.unwrap_err();
    assert_eq!(e.status(), Status::CudaError, "{e:?}");
    assert!(e.message().contains("CUBLAS_STATUS_INVALID_VALUE"), "{}", e.message());
    println!("bad lda: {e:?}");

    // A 2-D copy whose pitch is narrower than its rows: the driver refuses it.
    let host = [0u8; 256];
    // SAFETY: the driver rejects the pitch before copying.
    let e = unsafe { dev.copy_2d(S0, Place::Device(buf.ptr), 16, Place::Host(host.as_ptr() as *mut u8), 64, 64, 2) }
        .unwrap_err();
    assert_eq!(e.status(), Status::CudaError, "{e:?}");
    assert!(e.message().contains("CUDA_ERROR_INVALID_VALUE"), "{}", e.message());
    println!("bad pitch: {e:?}");

    // Checked before any CUDA call.
    // SAFETY: refused before use.
    unsafe {
        assert_eq!(dev.memset_2d(S0, buf.ptr, 0, 0, 3, 4, 1).unwrap_err().status(), Status::InvalidArgument);
        assert_eq!(
            dev.scal(S0, DType::I32, 4, Scalar::real(2.0), buf.ptr, 1).unwrap_err().status(),
            Status::Unsupported
        );
        assert_eq!(
            dev.scal(StreamId(99), DType::F64, 4, Scalar::real(2.0), buf.ptr, 1).unwrap_err().status(),
            Status::InvalidArgument
        );
    }
    assert_eq!(dev.record(StreamId(99)).unwrap_err().status(), Status::InvalidArgument);

    // Nothing sticky: the stream reports success and data still moves.
    sync_ok(dev, S0);
    let b = upload(dev, &[9, 8, 7]);
    assert_eq!(download(dev, b.ptr, 3), vec![9, 8, 7]);
}

#[test]
fn free_does_not_wait_for_unrelated_work() {
    let dev = gpu_or_skip!();
    let n = 4096usize;
    let a = DevBuf::new(dev, n * n * 8);
    let c = DevBuf::new(dev, n * n * 8);
    // SAFETY: n x n f64 matrices in their buffers; synced below.
    unsafe {
        dev.memset_2d(S0, a.ptr, 0, 0, 4, n * n * 2, 1).unwrap();
        for _ in 0..24 {
            let g = GemmArgs {
                trans_a: Trans::N,
                trans_b: Trans::N,
                m: n,
                n,
                k: n,
                alpha: Scalar::real(1.0),
                a: a.ptr,
                lda: n,
                b: a.ptr,
                ldb: n,
                beta: Scalar::real(0.0),
                c: c.ptr,
                ldc: n,
            };
            dev.gemm(S0, DType::F64, &g).unwrap();
        }
    }
    let t0 = Instant::now();
    let p = dev.alloc(1 << 20).unwrap();
    // SAFETY: p is unused.
    unsafe { dev.free(p) };
    let t_free = t0.elapsed();
    sync_ok(dev, S0);
    let t_all = t0.elapsed();
    println!("alloc+free while gemms run: {t_free:?}; the gemms took {t_all:?} in all");
    assert!(
        t_free * 4 < t_all,
        "free waited for unrelated work ({t_free:?} of {t_all:?}): cuMemFreeAsync refused, cuMemFree synchronised?"
    );
}

#[test]
fn threads_share_streams_and_blas_handles() {
    let dev = gpu_or_skip!();
    let n = 256usize;
    let threads = 8;
    let ptrs: Vec<DevPtr> = (0..threads).map(|_| dev.alloc(n * 8).unwrap()).collect();
    std::thread::scope(|scope| {
        for (t, &p) in ptrs.iter().enumerate() {
            scope.spawn(move || {
                let s = StreamId(t as u32 % dev.streams());
                let ones = vec![1.0f64; n];
                // SAFETY: p holds n f64; `ones` lives until the sync below.
                unsafe { dev.copy_2d(s, Place::Device(p), 0, Place::Host(ones.as_ptr() as *mut u8), 0, n * 8, 1) }
                    .unwrap();
                for _ in 0..50 {
                    // SAFETY: p holds n f64.
                    unsafe { dev.scal(s, DType::F64, n, Scalar::real(2.0), p, 1) }.unwrap();
                }
                sync_ok(dev, s);
            });
        }
    });
    for p in ptrs {
        let got: Vec<f64> = vec_from_bytes(&download(dev, p, n * 8));
        assert!(got.iter().all(|&v| v == 2f64.powi(50)), "got {}", got[0]);
        // SAFETY: its work is done.
        unsafe { dev.free(p) };
    }
}

#[test]
fn peer_copy_between_devices() {
    let _ = gpu_or_skip!();
    let all = devices().unwrap();
    if all.len() < 2 {
        println!("skipped: one CUDA device (a peer copy needs two)");
        return;
    }
    let (d0, d1) = (&*all[0], &*all[1]);
    let data: Vec<u8> = (0..4096u32).map(|i| (i % 253) as u8).collect();
    let src = upload(d1, &data);
    let dst = DevBuf::new(d0, 8192);
    // SAFETY: 64 rows of 64 bytes fit both buffers (pitches 64 and 128).
    unsafe { d0.copy_2d(S0, Place::Device(dst.ptr), 128, Place::Device(src.ptr), 64, 64, 64) }.unwrap();
    sync_ok(d0, S0);
    let got = download(d0, dst.ptr, 8192);
    for r in 0..64 {
        assert_eq!(&got[r * 128..r * 128 + 64], &data[r * 64..r * 64 + 64], "row {r}");
    }
}

// ---------------------------------------------------------------------------
// The library end to end on the GPU: device tensors through the public API.

mod common;

use common::numeric::{assert_close as close_to, make, matmul, random as random_values, read, transpose, C, DTYPES};
use tensorasync::{ops, Domain, Layout, Order, Runtime, SliceSpec, Submit, Tensor};

const GPU: Domain = Domain::Cuda(0);

fn to_gpu(host: &Tensor, rt: &Runtime) -> Tensor {
    let t = Tensor::unconstructed(host.dtype(), GPU).unwrap();
    ops::copy(&t, host, Submit::on(rt)).unwrap();
    t
}

#[test]
fn library_gemm_family_on_the_gpu() {
    let _dev = gpu_or_skip!();
    let rt = Runtime::new(2).unwrap();
    let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(11);
    let (m, k, n) = (67, 33, 45);
    for dtype in DTYPES {
        let cx = dtype.is_complex();
        let (av, bv, cv) = (
            random_values(&mut rng, m * k, cx),
            random_values(&mut rng, k * n, cx),
            random_values(&mut rng, m * n, cx),
        );
        let a = to_gpu(&make(dtype, &[m, k], Order::RowMajor, &av), &rt);
        let b = to_gpu(&make(dtype, &[k, n], Order::ColMajor, &bv), &rt);
        let c = Tensor::unconstructed(dtype, GPU).unwrap();
        ops::assign_product(&c, Scalar::real(2.0), &a, &b, Submit::on(&rt)).unwrap();
        let ab = matmul(&av, &bv, m, k, n);
        close_to(&read(&c), &ab.iter().map(|z| z * 2.0).collect::<Vec<_>>(), dtype, "assign_product on the GPU");
        // gemm with a transposed (conjugated for complex) view of A.
        let c2 = to_gpu(&make(dtype, &[m, n], Order::RowMajor, &cv), &rt);
        let at = to_gpu(&make(dtype, &[k, m], Order::RowMajor, &transpose(&av, m, k)), &rt);
        let view = if cx { at.transpose().unwrap().conj().unwrap() } else { at.transpose().unwrap() };
        let alog: Vec<C> = if cx { av.iter().map(|z| z.conj()).collect() } else { av.clone() };
        ops::gemm(&c2, Scalar::real(0.5), &view, &b, Scalar::real(-1.0), Submit::on(&rt)).unwrap();
        let want: Vec<C> = matmul(&alog, &bv, m, k, n).iter().zip(&cv).map(|(p, c)| p * 0.5 - c).collect();
        close_to(&read(&c2), &want, dtype, "gemm with a transposed A on the GPU");
        ops::add_product(&c, Scalar::real(1.0), &a, &b, Submit::on(&rt)).unwrap();
        close_to(&read(&c), &ab.iter().map(|z| z * 3.0).collect::<Vec<_>>(), dtype, "add_product on the GPU");
    }
}

#[test]
fn library_elementwise_copies_and_chains_on_the_gpu() {
    let _dev = gpu_or_skip!();
    let rt = Runtime::new(2).unwrap();
    let vals: Vec<f64> = (0..4096).map(|i| i as f64 * 0.25 - 100.0).collect();
    let h = Tensor::from_slice(&[64, 64], Order::RowMajor, &vals).unwrap();
    let d = to_gpu(&h, &rt);
    // A chain of 1000 device operations with no host round trip.
    for i in 0..1000 {
        ops::scale(&d, Scalar::real(if i % 2 == 0 { 2.0 } else { 0.5 }), Submit::on(&rt)).unwrap();
    }
    let x = Tensor::zeros(DType::F64, &[64, 64], Order::ColMajor, GPU).unwrap();
    ops::fill(&x, Scalar::real(1.5), Submit::on(&rt)).unwrap();
    ops::axpy(&d, Scalar::real(2.0), &x, Submit::on(&rt)).unwrap();
    let rows = d.slice(&[SliceSpec { start: 1, stop: 64, step: 3, drop: false }, SliceSpec::all(64)]).unwrap();
    ops::fill(&rows, Scalar::real(-7.0), Submit::on(&rt)).unwrap();
    let mut out = vec![0.0f64; 4096];
    unsafe { ops::copy_out(&d, out.as_mut_ptr().cast(), 4096, None, Submit::on(&rt)) }
        .unwrap()
        .wait(Some(Duration::from_secs(60)))
        .unwrap();
    for i in 0..64 {
        for j in 0..64 {
            let want = if i % 3 == 1 { -7.0 } else { vals[i * 64 + j] + 3.0 };
            assert_eq!(out[i * 64 + j], want, "[{i},{j}]");
        }
    }
    // Device to device, and a strided upload from host memory.
    let e = Tensor::unconstructed(DType::F64, GPU).unwrap();
    ops::copy(&e, &d.transpose().unwrap(), Submit::on(&rt)).unwrap();
    unsafe { ops::copy_in(&x, vals.as_ptr().cast(), Layout::contiguous(&[64, 64], Order::RowMajor), Submit::on(&rt)) }
        .unwrap();
    let got = read(&e);
    for i in 0..64 {
        for j in 0..64 {
            assert_eq!(got[i * 64 + j].re, out[j * 64 + i]);
        }
    }
    assert_eq!(read(&x).iter().map(|z| z.re).collect::<Vec<_>>(), vals);
}
