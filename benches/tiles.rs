//! Tile-kernel benchmark for a tiled Cholesky: the native backend's potrf,
//! trsm, syrk and gemm (faer 0.24) on 256x256 f64 tiles, one thread (tiles
//! run one per task, so each kernel runs sequentially), against OpenBLAS's
//! LAPACK/BLAS (`dpotrf_`, `dtrsm_`, `dsyrk_`, `dgemm_`, dlopen'ed, with
//! `openblas_set_num_threads(1)`), in one run.
//!
//! The calls are the ones a right-looking tiled Cholesky (lower) makes:
//! - potrf: `A_kk = L·L^T` (lower, in place);
//! - trsm: `A_ik <- A_ik·L_kk^{-T}` (right side, the transposed view of the
//!   lower factor; BLAS 'R','L','T','N');
//! - syrk: `A_ii <- A_ii - A_ik·A_ik^T` (lower triangle);
//! - gemm: `A_ij <- A_ij - A_ik·A_jk^T`.
//!
//! OpenBLAS runs its best kernel for this CPU: where Debian's build falls
//! back to an older one, the bench restarts itself with `OPENBLAS_CORETYPE`
//! set (`common/openblas_best.rs`), prints the kernel that ran, and prints
//! no ratio against a fallback kernel.
//!
//! Run: `cargo bench --bench tiles` (about 30 s). It prints a table (GF/s,
//! best and median of interleaved repetitions, ratio ours/OpenBLAS), then
//! criterion's measurements (throughput in elements/s is flop/s: one
//! "element" is one flop). `--quick-table`: the table only.
//!
//! The library is looked for as `src/sysblas/library.rs` does (its
//! `candidates`): `TA_BLAS_LIB` if set (`none`, `off` or `0`: no library),
//! else `libopenblas.so.0`, `libblas.so.3`, `libopenblas.so`; all four
//! symbols are needed. The native kernels are `pub(crate)`, so this
//! bench compiles the kernel sources into itself (`#[path]` below).

use std::ffi::{c_char, c_int, c_void, CString};
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, Throughput};

include!("common/kernel_shim.rs");
// The system BLAS loader (it needs nothing of the crate), for the kernel's name.
#[allow(dead_code, unused_imports)]
#[path = "../src/sysblas/library.rs"]
mod blas;
include!("common/openblas_best.rs");

use kernels::operand::Operand;
use kernels::{gemm::gemm, potrf::potrf, syrk::syrk, trsm::trsm};
use tensorasync::{DType, Scalar};

const N: usize = 256;

type PotrfFn = unsafe extern "C" fn(*const c_char, *const c_int, *mut f64, *const c_int, *mut c_int, usize);
#[allow(clippy::type_complexity)]
type TrsmFn = unsafe extern "C" fn(
    *const c_char,
    *const c_char,
    *const c_char,
    *const c_char,
    *const c_int,
    *const c_int,
    *const f64,
    *const f64,
    *const c_int,
    *mut f64,
    *const c_int,
    usize,
    usize,
    usize,
    usize,
);
#[allow(clippy::type_complexity)]
type SyrkFn = unsafe extern "C" fn(
    *const c_char,
    *const c_char,
    *const c_int,
    *const c_int,
    *const f64,
    *const f64,
    *const c_int,
    *const f64,
    *mut f64,
    *const c_int,
    usize,
    usize,
);
#[allow(clippy::type_complexity)]
type GemmFn = unsafe extern "C" fn(
    *const c_char,
    *const c_char,
    *const c_int,
    *const c_int,
    *const c_int,
    *const f64,
    *const f64,
    *const c_int,
    *const f64,
    *const c_int,
    *const f64,
    *mut f64,
    *const c_int,
    usize,
    usize,
);
type SetThreadsFn = unsafe extern "C" fn(c_int);

/// The reference library's four kernels.
struct Lapack {
    path: String,
    /// The kernel OpenBLAS runs, and whether a ratio against it means
    /// something (not a fallback kernel).
    kernel: (String, bool),
    potrf: PotrfFn,
    trsm: TrsmFn,
    syrk: SyrkFn,
    gemm: GemmFn,
}

fn load() -> Result<Lapack, String> {
    let mut why = Vec::new();
    for path in blas::candidates() {
        let c = CString::new(path.clone()).map_err(|e| e.to_string())?;
        // SAFETY: dlopen/dlsym with valid C strings; the handle is never closed.
        unsafe {
            let h = libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
            if h.is_null() {
                why.push(format!("{path}: cannot open"));
                continue;
            }
            let sym = |n: &std::ffi::CStr| libc::dlsym(h, n.as_ptr());
            let (p, t, s, g) = (sym(c"dpotrf_"), sym(c"dtrsm_"), sym(c"dsyrk_"), sym(c"dgemm_"));
            if p.is_null() || t.is_null() || s.is_null() || g.is_null() {
                why.push(format!("{path}: lacks dpotrf_/dtrsm_/dsyrk_/dgemm_"));
                continue;
            }
            let st = sym(c"openblas_set_num_threads");
            if !st.is_null() {
                std::mem::transmute::<*mut c_void, SetThreadsFn>(st)(1);
            }
            let kernel = match blas::load_from(&[path.as_str()]) {
                Ok(b) => openblas_kernel(&b),
                Err(e) => (format!("kernel unknown ({e})"), true),
            };
            return Ok(Lapack {
                path,
                kernel,
                potrf: std::mem::transmute::<*mut c_void, PotrfFn>(p),
                trsm: std::mem::transmute::<*mut c_void, TrsmFn>(t),
                syrk: std::mem::transmute::<*mut c_void, SyrkFn>(s),
                gemm: std::mem::transmute::<*mut c_void, GemmFn>(g),
            });
        }
    }
    if why.is_empty() {
        why.push(format!("disabled by {}", blas::ENV_VAR));
    }
    Err(why.join("; "))
}

/// Pseudo-random values in [-0.5, 0.5).
fn random(len: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        })
        .collect()
}

/// A symmetric positive definite n x n matrix, column-major: `G·G^T/n + I`.
fn spd(n: usize) -> Vec<f64> {
    let g = random(n * n, 7);
    let mut a = vec![0.0; n * n];
    for j in 0..n {
        for i in 0..n {
            let s: f64 = (0..n).map(|l| g[i + l * n] * g[j + l * n]).sum();
            a[i + j * n] = s / n as f64 + if i == j { 1.0 } else { 0.0 };
        }
    }
    a
}

/// The buffers of one step of a tiled Cholesky on n x n column-major tiles.
struct Tiles {
    /// The SPD diagonal tile, pristine (potrf input).
    a0: Vec<f64>,
    /// Its lower factor (trsm's triangle).
    l: Vec<f64>,
    /// Off-diagonal tiles.
    x: Vec<f64>,
    y: Vec<f64>,
}

impl Tiles {
    fn new(n: usize) -> Tiles {
        let a0 = spd(n);
        let mut l = a0.clone();
        potrf_native(n, &mut l);
        Tiles { a0, l, x: random(n * n, 3), y: random(n * n, 4) }
    }
}

fn op<'a>(v: &'a [f64], ext: &'a [usize; 2], st: &'a [isize; 2]) -> Operand<'a> {
    Operand { ptr: v.as_ptr() as *mut u8, dtype: DType::F64, extents: ext, strides: st, conj: false }
}

fn col(n: usize) -> ([usize; 2], [isize; 2]) {
    ([n, n], [1, n as isize])
}

fn potrf_native(n: usize, a: &mut [f64]) {
    let (e, s) = col(n);
    unsafe { potrf(&op(a, &e, &s), true) }.map_err(|e| e.error).unwrap();
}

/// `B <- B·L^{-T}`: a right solve with the transposed (upper) view of L.
fn trsm_native(n: usize, b: &mut [f64], l: &[f64]) {
    let (e, s) = col(n);
    let lt = [n as isize, 1];
    unsafe { trsm(&op(b, &e, &s), &op(l, &e, &lt), false, false, false, Scalar::real(1.0)) }.unwrap();
}

/// `C <- C - A·A^T`, lower triangle.
fn syrk_native(n: usize, c: &mut [f64], a: &[f64]) {
    let (e, s) = col(n);
    unsafe { syrk(&op(c, &e, &s), &op(a, &e, &s), Scalar::real(-1.0), Some(Scalar::real(1.0)), true) }.unwrap();
}

/// `C <- C - A·B^T`.
fn gemm_native(n: usize, c: &mut [f64], a: &[f64], b: &[f64]) {
    let (e, s) = col(n);
    let bt = [n as isize, 1];
    let (one, m1) = (Scalar::real(1.0), Scalar::real(-1.0));
    unsafe { gemm(&op(c, &e, &s), m1, &op(a, &e, &s), &op(b, &e, &bt), Some(one)) }.unwrap();
}

fn ch(c: u8) -> c_char {
    c as c_char
}

fn potrf_blas(lib: &Lapack, n: usize, a: &mut [f64]) {
    let (n, mut info) = (n as c_int, 0);
    unsafe { (lib.potrf)(&ch(b'L'), &n, a.as_mut_ptr(), &n, &mut info, 1) };
    assert_eq!(info, 0, "dpotrf_ info");
}

fn trsm_blas(lib: &Lapack, n: usize, b: &mut [f64], l: &[f64]) {
    let n = n as c_int;
    let one = 1.0f64;
    let (r, lo, t, nd) = (ch(b'R'), ch(b'L'), ch(b'T'), ch(b'N'));
    unsafe { (lib.trsm)(&r, &lo, &t, &nd, &n, &n, &one, l.as_ptr(), &n, b.as_mut_ptr(), &n, 1, 1, 1, 1) };
}

fn syrk_blas(lib: &Lapack, n: usize, c: &mut [f64], a: &[f64]) {
    let n = n as c_int;
    let (m1, one) = (-1.0f64, 1.0f64);
    unsafe { (lib.syrk)(&ch(b'L'), &ch(b'N'), &n, &n, &m1, a.as_ptr(), &n, &one, c.as_mut_ptr(), &n, 1, 1) };
}

fn gemm_blas(lib: &Lapack, n: usize, c: &mut [f64], a: &[f64], b: &[f64]) {
    let n = n as c_int;
    let (m1, one) = (-1.0f64, 1.0f64);
    let (nn, t) = (ch(b'N'), ch(b'T'));
    unsafe { (lib.gemm)(&nn, &t, &n, &n, &n, &m1, a.as_ptr(), &n, b.as_ptr(), &n, &one, c.as_mut_ptr(), &n, 1, 1) };
}

/// Flops of each kernel on n x n tiles (LAPACK's counts, leading terms).
fn flops(kernel: &str, n: usize) -> f64 {
    let n = n as f64;
    match kernel {
        "potrf" => n * n * n / 3.0,
        "trsm" => n * n * n,
        "syrk" => n * n * (n + 1.0),
        _ => 2.0 * n * n * n,
    }
}

/// Best and median GF/s of each contender over interleaved rounds; `prep`
/// (untimed) restores a contender's inputs before each timed call.
fn interleaved(reps: usize, fl: f64, contenders: &mut [&mut dyn FnMut(bool)]) -> Vec<(f64, f64)> {
    let mut times = vec![Vec::with_capacity(reps); contenders.len()];
    for f in contenders.iter_mut() {
        f(false); // warm-up
    }
    for _ in 0..reps {
        for (i, f) in contenders.iter_mut().enumerate() {
            f(true); // untimed restore
            let t = Instant::now();
            f(false);
            times[i].push(t.elapsed().as_secs_f64());
        }
    }
    times
        .into_iter()
        .map(|mut t| {
            t.sort_by(f64::total_cmp);
            (fl / t[0] / 1e9, fl / t[t.len() / 2] / 1e9)
        })
        .collect()
}

/// One kernel, ours and (if loaded) OpenBLAS's, each on its own buffers.
/// `run(restore, which, bufs)`: `restore` resets the in-place operand.
fn row(name: &str, lib: Option<&Lapack>, reps: usize) {
    let n = N;
    let t = Tiles::new(n);
    let mk = || (t.a0.clone(), t.x.clone());
    let (mut o1, mut o2) = mk();
    let (mut b1, mut b2) = mk();
    let call = |blas: bool, restore: bool, w: &mut Vec<f64>, v: &mut Vec<f64>| match name {
        "potrf" => {
            if restore {
                w.copy_from_slice(&t.a0);
            } else if blas {
                potrf_blas(lib.unwrap(), n, w);
            } else {
                potrf_native(n, w);
            }
        }
        "trsm" => {
            if restore {
                v.copy_from_slice(&t.x);
            } else if blas {
                trsm_blas(lib.unwrap(), n, v, &t.l);
            } else {
                trsm_native(n, v, &t.l);
            }
        }
        "syrk" => {
            if restore {
                w.copy_from_slice(&t.a0);
            } else if blas {
                syrk_blas(lib.unwrap(), n, w, &t.x);
            } else {
                syrk_native(n, w, &t.x);
            }
        }
        _ => {
            if restore {
                v.copy_from_slice(&t.y);
            } else if blas {
                gemm_blas(lib.unwrap(), n, v, &t.x, &t.y);
            } else {
                gemm_native(n, v, &t.x, &t.y);
            }
        }
    };
    let mut ours = |restore: bool| call(false, restore, &mut o1, &mut o2);
    let mut theirs = |restore: bool| call(true, restore, &mut b1, &mut b2);
    let fl = flops(name, n);
    if let Some(l) = lib {
        let r = interleaved(reps, fl, &mut [&mut ours, &mut theirs]);
        let ratio = if l.kernel.1 {
            format!("ratio {:.2} / {:.2}", r[0].0 / r[1].0, r[0].1 / r[1].1)
        } else {
            "no ratio against a fallback kernel".to_string()
        };
        println!(
            "{name:6} native {:6.1} / {:6.1}   OpenBLAS {:6.1} / {:6.1}   {ratio}",
            r[0].0, r[0].1, r[1].0, r[1].1
        );
    } else {
        let r = interleaved(reps, fl, &mut [&mut ours]);
        println!("{name:6} native {:6.1} / {:6.1}", r[0].0, r[0].1);
    }
}

fn table(lib: Option<&Lapack>) {
    println!("\n== tiles {N}x{N} f64, 1 thread (GF/s: best / median of interleaved reps; ratio ours/OpenBLAS) ==");
    match lib {
        Some(l) => println!("reference: {} (1 thread); {}", l.path, l.kernel.0),
        None => println!("no OpenBLAS/LAPACK found: native only"),
    }
    for k in ["potrf", "trsm", "syrk", "gemm"] {
        row(k, lib, 60);
    }
}

fn criterion_benches(c: &mut Criterion, lib: Option<&Lapack>) {
    let n = N;
    let t = Tiles::new(n);
    let mut g = c.benchmark_group("tiles_256_f64_1thread");
    g.sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1));
    let small = BatchSize::SmallInput;

    g.throughput(Throughput::Elements(flops("potrf", n) as u64));
    g.bench_function("potrf/native", |b| b.iter_batched_ref(|| t.a0.clone(), |a| potrf_native(n, a), small));
    if let Some(l) = lib {
        g.bench_function("potrf/openblas", |b| b.iter_batched_ref(|| t.a0.clone(), |a| potrf_blas(l, n, a), small));
    }
    g.throughput(Throughput::Elements(flops("trsm", n) as u64));
    g.bench_function("trsm/native", |b| b.iter_batched_ref(|| t.x.clone(), |x| trsm_native(n, x, &t.l), small));
    if let Some(lb) = lib {
        g.bench_function("trsm/openblas", |b| b.iter_batched_ref(|| t.x.clone(), |x| trsm_blas(lb, n, x, &t.l), small));
    }
    g.throughput(Throughput::Elements(flops("syrk", n) as u64));
    let mut c1 = t.a0.clone();
    g.bench_function("syrk/native", |b| b.iter(|| syrk_native(n, &mut c1, &t.x)));
    if let Some(l) = lib {
        let mut c2 = t.a0.clone();
        g.bench_function("syrk/openblas", |b| b.iter(|| syrk_blas(l, n, &mut c2, &t.x)));
    }
    g.throughput(Throughput::Elements(flops("gemm", n) as u64));
    let mut c3 = t.y.clone();
    g.bench_function("gemm/native", |b| b.iter(|| gemm_native(n, &mut c3, &t.x, &t.y)));
    if let Some(l) = lib {
        let mut c4 = t.y.clone();
        g.bench_function("gemm/openblas", |b| b.iter(|| gemm_blas(l, n, &mut c4, &t.x, &t.y)));
    }
    g.finish();
}

fn main() {
    let cands = blas::candidates();
    openblas_best(&cands.iter().map(String::as_str).collect::<Vec<_>>());
    let lib = match load() {
        Ok(l) => Some(l),
        Err(e) => {
            println!("no reference LAPACK ({e})");
            None
        }
    };
    // Sanity: both factor the same tile alike.
    if let Some(l) = &lib {
        let t = Tiles::new(32);
        let (mut a, mut b) = (t.a0.clone(), t.a0.clone());
        potrf_native(32, &mut a);
        potrf_blas(l, 32, &mut b);
        let d = (0..32).flat_map(|j| (j..32).map(move |i| (i, j))).map(|(i, j)| (a[i + 32 * j] - b[i + 32 * j]).abs());
        assert!(d.fold(0.0, f64::max) < 1e-12, "native and OpenBLAS potrf disagree");
    }
    table(lib.as_ref());
    if !std::env::args().any(|a| a == "--quick-table") {
        let mut c = Criterion::default().without_plots().configure_from_args();
        criterion_benches(&mut c, lib.as_ref());
        c.final_summary();
    }
}
