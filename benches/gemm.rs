//! GEMM kernel benchmark: the native backend's gemm (faer inside a 2-thread
//! rayon pool, as on the runtime's workers) against OpenBLAS called directly
//! through its dlopen'ed `dgemm_`/`zgemm_` with 2 OpenBLAS threads, and
//! against matrixmultiply (ndarray's GEMM) with 2 threads, in one run.
//!
//! OpenBLAS runs its best kernel for this CPU: where Debian's build falls
//! back to an older one, the bench restarts itself with `OPENBLAS_CORETYPE`
//! set (`common/openblas_best.rs`), prints the kernel that ran, and prints
//! no ratio against a fallback kernel.
//!
//! Run: `cargo bench --bench gemm` (about a minute on 2 cores). It prints:
//! - the headline table: dgemm and zgemm at n=2048, GF/s (best and median of
//!   interleaved repetitions) and the ratio ours/OpenBLAS;
//! - the parallel-threshold sweep behind `PAR_MIN_FLOPS` (sequential vs
//!   2-thread faer inside the pool, f64, small n);
//! - criterion measurements of the same kernels (throughput in elements/s is
//!   flop/s: one "element" is one flop), and the cost in ns of small and
//!   mid-size f64 products (4x4 to 256x256, sequential) against OpenBLAS on
//!   one thread.
//!
//! The kernels are `pub(crate)` in the library, so this bench compiles the
//! kernel sources into itself (`#[path]` below) on top of the library's
//! public types.

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use num_complex::Complex64;

include!("common/kernel_shim.rs");
// The system BLAS loader (it needs nothing of the crate).
#[allow(dead_code, unused_imports)]
#[path = "../src/sysblas/library.rs"]
mod blas;

include!("common/openblas_best.rs");

use blas::Blas;
#[allow(unused_imports)]
use faer::traits::ComplexField as _;
use kernels::float::Float;
use kernels::gemm::{gemm, gemm_small, SMALL_MAX_FLOPS, SMALL_MAX_FLOPS_COMPLEX};
use kernels::mat2::Mat2;
use kernels::operand::Operand;
use kernels::par::PAR_MIN_FLOPS;
use tensorasync::{DType, Element, Scalar};

const N: usize = 2048;
const THREADS: usize = 2;

/// A dense column-major n x n matrix of pseudo-random values.
fn matrix<T: Float>(n: usize, seed: u64) -> Vec<T> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    (0..n * n).map(|_| T::from_scalar(Scalar::complex(next(), next()))).collect()
}

fn op<'a, T: Element>(v: &'a mut [T], ext: &'a [usize; 2], strides: &'a [isize; 2]) -> Operand<'a> {
    Operand { ptr: v.as_mut_ptr() as *mut u8, dtype: T::DTYPE, extents: ext, strides, conj: false }
}

/// Buffers for one n x n x n product (column-major).
struct Problem<T> {
    n: usize,
    a: Vec<T>,
    b: Vec<T>,
    c: Vec<T>,
    ext: [usize; 2],
    st: [isize; 2],
}

impl<T: Float> Problem<T> {
    fn new(n: usize) -> Self {
        Problem { n, a: matrix(n, 1), b: matrix(n, 2), c: matrix(n, 3), ext: [n, n], st: [1, n as isize] }
    }

    /// Ours: the native backend's gemm (called on a pool thread, it uses
    /// faer's rayon backend on that pool).
    fn native(&mut self) {
        let (ext, st) = (self.ext, self.st);
        let (a, b, c) = (op(&mut self.a, &ext, &st), op(&mut self.b, &ext, &st), op(&mut self.c, &ext, &st));
        unsafe { gemm(&c, Scalar::real(1.0), &a, &b, None) }.unwrap();
    }

    /// The same product straight through faer with explicit parallelism
    /// (threshold sweeps; no small-product shortcut).
    fn faer_with(&mut self, par: faer::Par) {
        let n = self.n;
        let s = n as isize;
        unsafe {
            let c = faer::MatMut::<T>::from_raw_parts_mut(self.c.as_mut_ptr(), n, n, 1, s);
            let a = faer::MatRef::<T>::from_raw_parts(self.a.as_ptr(), n, n, 1, s);
            let b = faer::MatRef::<T>::from_raw_parts(self.b.as_ptr(), n, n, 1, s);
            let one = T::from_scalar(Scalar::real(1.0));
            faer::linalg::matmul::matmul_with_conj(
                c,
                faer::Accum::Replace,
                a,
                faer::Conj::No,
                b,
                faer::Conj::No,
                one,
                par,
            );
        }
    }

    /// The direct triple loop used for tiny products (small sweep).
    fn small(&mut self) {
        let n = self.n;
        let m = |v: &mut Vec<T>| Mat2 { ptr: v.as_mut_ptr(), rows: n, cols: n, rs: 1, cs: n as isize, conj: false };
        let (a, b, c) = (m(&mut self.a), m(&mut self.b), m(&mut self.c));
        unsafe { gemm_small::<T, false, false>(c, T::from_scalar(Scalar::real(1.0)), a, b, None) };
    }

    /// OpenBLAS through the dlopen'ed Fortran symbol, column-major 'N','N'.
    fn blas(&mut self, lib: &Blas) {
        let idx = match T::DTYPE {
            DType::F32 => 0,
            DType::F64 => 1,
            DType::C64 => 2,
            _ => 3,
        };
        let f = lib.gemm[idx].expect("gemm symbol");
        let n = self.n as i32;
        let (one, zero) = (T::from_scalar(Scalar::real(1.0)), T::zero());
        let t = b'N' as std::ffi::c_char;
        unsafe {
            f(
                &t,
                &t,
                &n,
                &n,
                &n,
                (&one as *const T).cast(),
                self.a.as_ptr().cast(),
                &n,
                self.b.as_ptr().cast(),
                &n,
                (&zero as *const T).cast(),
                self.c.as_mut_ptr().cast(),
                &n,
                1,
                1,
            )
        };
    }
}

impl Problem<f64> {
    fn matrixmultiply(&mut self) {
        let n = self.n;
        let s = n as isize;
        unsafe {
            matrixmultiply::dgemm(
                n,
                n,
                n,
                1.0,
                self.a.as_ptr(),
                1,
                s,
                self.b.as_ptr(),
                1,
                s,
                0.0,
                self.c.as_mut_ptr(),
                1,
                s,
            )
        };
    }
}

impl Problem<Complex64> {
    fn matrixmultiply(&mut self) {
        let n = self.n;
        let s = n as isize;
        let o = matrixmultiply::CGemmOption::Standard;
        unsafe {
            matrixmultiply::zgemm(
                o,
                o,
                n,
                n,
                n,
                [1.0, 0.0],
                self.a.as_ptr().cast(),
                1,
                s,
                self.b.as_ptr().cast(),
                1,
                s,
                [0.0, 0.0],
                self.c.as_mut_ptr().cast(),
                1,
                s,
            )
        };
    }
}

/// Real flops of one n^3 product: 2n^3 (real), 8n^3 (complex).
fn flops<T: Element>(n: usize) -> f64 {
    let per = if T::DTYPE.is_complex() { 8.0 } else { 2.0 };
    per * (n as f64).powi(3)
}

fn secs(f: &mut dyn FnMut()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

/// Best and median GF/s of each contender, measured in interleaved rounds
/// (so background load hits them alike).
fn interleaved(reps: usize, fl: f64, contenders: &mut [(&str, &mut dyn FnMut())]) -> Vec<(f64, f64)> {
    for (_, f) in contenders.iter_mut() {
        f(); // warm-up (pool start, packing buffers, page faults)
    }
    let mut times = vec![Vec::new(); contenders.len()];
    for _ in 0..reps {
        for (i, (_, f)) in contenders.iter_mut().enumerate() {
            times[i].push(secs(*f));
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

fn headline(pool: &rayon::ThreadPool, lib: Option<&Blas>) {
    println!("\n== GEMM n={N}, {THREADS} threads (GF/s: best / median of interleaved reps) ==");
    let mut verdict = false;
    if let Some(l) = lib {
        println!("BLAS: {}", l.describe());
        let (line, ok) = openblas_kernel(l);
        println!("{line}");
        verdict = ok;
    }
    // dgemm
    {
        let mut p = Problem::<f64>::new(N);
        let mut q = Problem::<f64>::new(N);
        let mut r = Problem::<f64>::new(N);
        let mut ours = || pool.install(|| p.native());
        let mut ob = || {
            if let Some(l) = lib {
                q.blas(l)
            }
        };
        let mut mm = || r.matrixmultiply();
        let res = interleaved(7, flops::<f64>(N), &mut [("faer", &mut ours), ("openblas", &mut ob), ("mm", &mut mm)]);
        report("dgemm", &res, lib.is_some(), verdict);
    }
    // zgemm
    {
        let mut p = Problem::<Complex64>::new(N);
        let mut q = Problem::<Complex64>::new(N);
        let mut r = Problem::<Complex64>::new(N);
        let mut ours = || pool.install(|| p.native());
        let mut ob = || {
            if let Some(l) = lib {
                q.blas(l)
            }
        };
        let mut mm = || r.matrixmultiply();
        let res =
            interleaved(5, flops::<Complex64>(N), &mut [("faer", &mut ours), ("openblas", &mut ob), ("mm", &mut mm)]);
        report("zgemm", &res, lib.is_some(), verdict);
    }
}

/// `verdict`: OpenBLAS runs its best kernel, so the ratio means something.
fn report(what: &str, res: &[(f64, f64)], have_blas: bool, verdict: bool) {
    let (o, b, m) = (res[0], res[1], res[2]);
    println!("{what}: native(faer)     {:6.1} / {:6.1} GF/s", o.0, o.1);
    if have_blas {
        println!("{what}: OpenBLAS         {:6.1} / {:6.1} GF/s", b.0, b.1);
    }
    println!("{what}: matrixmultiply   {:6.1} / {:6.1} GF/s", m.0, m.1);
    if have_blas && verdict {
        println!("{what}: ratio ours/OpenBLAS: best {:.3}, median {:.3}", o.0 / b.0, o.1 / b.1);
    } else if have_blas {
        println!("{what}: no ratio against a fallback kernel");
    }
}

/// Sequential vs 2-thread faer for small n, inside the pool: where does the
/// parallel product start to pay? (`PAR_MIN_FLOPS` is set from this.)
fn threshold(pool: &rayon::ThreadPool) {
    println!("\n== parallel threshold, f64, inside a {THREADS}-thread pool (GF/s, best of interleaved reps) ==");
    println!("current PAR_MIN_FLOPS = {} (f64 n = {:.0})", PAR_MIN_FLOPS, (PAR_MIN_FLOPS as f64).cbrt());
    pool.install(|| {
        for n in [32usize, 48, 64, 80, 96, 128, 192, 256] {
            let mut p = Problem::<f64>::new(n);
            let mut q = Problem::<f64>::new(n);
            let reps = (2e8 / flops::<f64>(n)).clamp(3.0, 2000.0) as usize;
            let inner = |pr: &mut Problem<f64>, par: faer::Par| {
                for _ in 0..reps {
                    pr.faer_with(par)
                }
            };
            let mut seq = || inner(&mut p, faer::Par::Seq);
            let mut par = || inner(&mut q, faer::Par::rayon(THREADS));
            let r = interleaved(5, flops::<f64>(n) * reps as f64, &mut [("seq", &mut seq), ("par", &mut par)]);
            println!("n={n:4}: seq {:6.1}  par {:6.1}  par/seq {:.2}", r[0].0, r[1].0, r[1].0 / r[0].0);
        }
    });
}

fn criterion_benches(c: &mut Criterion, pool: &rayon::ThreadPool, lib: Option<&Blas>) {
    {
        let mut g = c.benchmark_group("dgemm_2048");
        g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
        g.throughput(Throughput::Elements(flops::<f64>(N) as u64));
        let mut p = Problem::<f64>::new(N);
        g.bench_function("native_faer", |b| b.iter(|| pool.install(|| p.native())));
        if let Some(l) = lib {
            g.bench_function("openblas", |b| b.iter(|| p.blas(l)));
        }
        g.bench_function("matrixmultiply", |b| b.iter(|| p.matrixmultiply()));
        g.finish();
    }
    {
        let mut g = c.benchmark_group("zgemm_2048");
        g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(10));
        g.throughput(Throughput::Elements(flops::<Complex64>(N) as u64));
        let mut p = Problem::<Complex64>::new(N);
        g.bench_function("native_faer", |b| b.iter(|| pool.install(|| p.native())));
        if let Some(l) = lib {
            g.bench_function("openblas", |b| b.iter(|| p.blas(l)));
        }
        g.finish();
    }
    {
        // Small products: the per-call cost the runtime adds nothing to.
        let mut g = c.benchmark_group("gemm_small");
        g.sample_size(30).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1));
        for n in [4usize, 16] {
            let mut p = Problem::<f64>::new(n);
            g.bench_with_input(BenchmarkId::new("native_f64", n), &n, |b, _| b.iter(|| p.native()));
            let mut pz = Problem::<Complex64>::new(n);
            g.bench_with_input(BenchmarkId::new("native_c128", n), &n, |b, _| b.iter(|| pz.native()));
            if let Some(l) = lib {
                g.bench_with_input(BenchmarkId::new("openblas_f64", n), &n, |b, _| b.iter(|| p.blas(l)));
            }
        }
        g.finish();
    }
}

/// Direct triple loop vs sequential faer for tiny n (`SMALL_MAX_FLOPS` and
/// `SMALL_MAX_FLOPS_COMPLEX` are set from this).
fn small_sweep<T: Float>(name: &str, current: usize) {
    println!("\n== tiny products, {name}: direct loop vs faer (ns per call, best of interleaved reps) ==");
    println!("current threshold {current} multiply-adds (n = {:.0})", (current as f64).cbrt());
    for n in [2usize, 3, 4, 5, 6, 8, 10, 12, 16] {
        let mut p = Problem::<T>::new(n);
        let mut q = Problem::<T>::new(n);
        const R: usize = 20_000;
        let mut lp = || (0..R).for_each(|_| p.small());
        let mut fq = || (0..R).for_each(|_| q.faer_with(faer::Par::Seq));
        // "GF/s" of R calls of 1 flop each = calls per ns.
        let r = interleaved(5, R as f64, &mut [("loop", &mut lp), ("faer", &mut fq)]);
        println!("n={n:3}: loop {:7.1} ns  faer {:7.1} ns", 1.0 / r[0].0, 1.0 / r[1].0);
    }
}

fn small_ns(lib: Option<&Blas>) {
    println!(
        "\n== small and mid-size gemm cost (ns per call, best of 5 reps of up to 100000 calls, about 10 ms each \
         from 24x24; OpenBLAS 1 thread) =="
    );
    // Calls per rep: 100000, or fewer for larger products (about 2*10^8
    // multiply-adds per rep), at least 200.
    let calls = |n: usize| (200_000_000 / (n * n * n)).clamp(200, 100_000);
    let per = |calls: usize, f: &mut dyn FnMut()| {
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..calls {
                f();
            }
            best = best.min(t.elapsed().as_secs_f64() * 1e9 / calls as f64);
        }
        best
    };
    let mut pz = Problem::<Complex64>::new(4);
    println!("native c128 4x4: {:.0} ns", per(calls(4), &mut || pz.native()));
    if let Some(l) = lib {
        l.set_num_threads(1);
    }
    for n in [4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256] {
        let mut p = Problem::<f64>::new(n);
        let ours = per(calls(n), &mut || p.native());
        match lib {
            Some(l) => {
                let mut q = Problem::<f64>::new(n);
                let theirs = per(calls(n), &mut || q.blas(l));
                println!(
                    "f64 {n}x{n}: native {ours:.0} ns, OpenBLAS (direct dgemm_) {theirs:.0} ns, ratio {:.2}",
                    ours / theirs
                );
            }
            None => println!("f64 {n}x{n}: native {ours:.0} ns"),
        }
    }
    if let Some(l) = lib {
        l.set_num_threads(THREADS);
    }
}

fn main() {
    openblas_best(blas::DEFAULT_CANDIDATES);
    // matrixmultiply reads its thread count once, from the environment.
    std::env::set_var("MATMUL_NUM_THREADS", THREADS.to_string());
    let pool = rayon::ThreadPoolBuilder::new().num_threads(THREADS).build().unwrap();
    let lib = match blas::load_from(blas::DEFAULT_CANDIDATES) {
        Ok(l) => Some(l),
        Err(e) => {
            println!("no OpenBLAS found ({e}): native and matrixmultiply only");
            None
        }
    };
    // The library sets BLAS to 1 thread (tasks run concurrently); this
    // measurement gives OpenBLAS the same 2 threads as ours.
    if let Some(l) = &lib {
        l.set_num_threads(THREADS);
    }
    if std::env::args().any(|a| a == "--small-loop") {
        // Profiling aid: the 4x4 native gemm in a loop.
        let mut p = Problem::<f64>::new(4);
        for _ in 0..20_000_000 {
            p.native();
        }
        return;
    }
    // `--only=headline|threshold|small`: one section (quick re-measurement);
    // `--quick-table`: every printed table, without the criterion runs.
    let only = std::env::args().find_map(|a| a.strip_prefix("--only=").map(str::to_string));
    let quick = only.is_some() || std::env::args().any(|a| a == "--quick-table");
    let want = |s: &str| only.as_deref().is_none_or(|o| o == s);
    if want("headline") {
        headline(&pool, lib.as_ref());
    }
    if want("threshold") {
        threshold(&pool);
    }
    if want("small") {
        small_sweep::<f64>("f64", SMALL_MAX_FLOPS);
        small_sweep::<f32>("f32", SMALL_MAX_FLOPS);
        small_sweep::<Complex64>("c128", SMALL_MAX_FLOPS_COMPLEX);
        small_ns(lib.as_ref());
    }
    if !quick {
        let mut c = Criterion::default().without_plots().configure_from_args();
        criterion_benches(&mut c, &pool, lib.as_ref());
        c.final_summary();
    }
    if let Some(l) = &lib {
        l.set_num_threads(1);
    }
}
