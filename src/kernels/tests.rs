//! Tests of the shared kernels against independent naive references (plain
//! loops over logical indices in complex128 arithmetic), over non-square,
//! strided, column-major, transposed, negative-stride and conj operands.

use num_complex::{Complex32, Complex64 as C};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::check::{contract_shape, gemm_shape, sum_shape};
use super::contract::contract;
use super::copy::{conj_copy, permute_copy};
use super::float::{Float, RealFloat};
use super::gemm::gemm;
use super::operand::Operand;
use super::par::{par_for, work, PAR_MIN_FLOPS};
use super::reduce::{dot, norm2, sum};
use crate::dtype::{DType, Element, Scalar};
use crate::error::{Result, Status};

/// An element type under test, with conversions to and from complex128 for
/// the references.
pub(crate) trait TestEl: Float {
    fn c(self) -> C;
    fn from_c(z: C) -> Self;
    /// Relative tolerance per accumulated term.
    const TOL: f64;
}
impl TestEl for f32 {
    fn c(self) -> C {
        C::new(self as f64, 0.0)
    }
    fn from_c(z: C) -> f32 {
        z.re as f32
    }
    const TOL: f64 = 2e-6;
}
impl TestEl for f64 {
    fn c(self) -> C {
        C::new(self, 0.0)
    }
    fn from_c(z: C) -> f64 {
        z.re
    }
    const TOL: f64 = 1e-14;
}
impl TestEl for Complex32 {
    fn c(self) -> C {
        C::new(self.re as f64, self.im as f64)
    }
    fn from_c(z: C) -> Complex32 {
        Complex32::new(z.re as f32, z.im as f32)
    }
    const TOL: f64 = 2e-6;
}
impl TestEl for C {
    fn c(self) -> C {
        self
    }
    fn from_c(z: C) -> C {
        z
    }
    const TOL: f64 = 1e-14;
}

pub(crate) fn complex<T: Element>() -> bool {
    T::DTYPE.is_complex()
}

/// A logical tensor (row-major values in complex128).
#[derive(Clone, Debug)]
pub(crate) struct Tens {
    pub ext: Vec<usize>,
    pub v: Vec<C>,
}

pub(crate) fn index_iter(ext: &[usize]) -> Vec<Vec<usize>> {
    let n: usize = ext.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; ext.len()];
    for _ in 0..n {
        out.push(idx.clone());
        for d in (0..ext.len()).rev() {
            idx[d] += 1;
            if idx[d] < ext[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

impl Tens {
    pub(crate) fn flat(&self, idx: &[usize]) -> usize {
        idx.iter().zip(&self.ext).fold(0, |a, (&i, &e)| a * e + i)
    }
    pub(crate) fn at(&self, idx: &[usize]) -> C {
        self.v[self.flat(idx)]
    }
    /// Random values representable in `T` (real for real dtypes).
    pub(crate) fn random<T: TestEl>(ext: &[usize], rng: &mut SmallRng) -> Tens {
        let n: usize = ext.iter().product();
        let v = (0..n)
            .map(|_| {
                let z = C::new(rng.gen_range(-1.0..1.0), if complex::<T>() { rng.gen_range(-1.0..1.0) } else { 0.0 });
                T::from_c(z).c()
            })
            .collect();
        Tens { ext: ext.to_vec(), v }
    }
    pub(crate) fn filled(ext: &[usize], x: C) -> Tens {
        Tens { ext: ext.to_vec(), v: vec![x; ext.iter().product()] }
    }
    pub(crate) fn conj(&self) -> Tens {
        Tens { ext: self.ext.clone(), v: self.v.iter().map(|z| z.conj()).collect() }
    }
}

/// How a tensor is placed in memory.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) enum Lay {
    RowMajor,
    ColMajor,
    /// Random axis order, padding and negative strides.
    Random,
}

/// A tensor's elements placed in a buffer with some strides.
pub(crate) struct Placed<T> {
    pub buf: Vec<T>,
    pub off: usize,
    pub ext: Vec<usize>,
    pub strides: Vec<isize>,
}

impl<T: TestEl> Placed<T> {
    pub(crate) fn with_strides(t: &Tens, strides: &[isize], fill: T) -> Placed<T> {
        let mut lo = 0isize;
        let mut hi = 0isize;
        for (&e, &s) in t.ext.iter().zip(strides) {
            if e == 0 {
                continue;
            }
            let r = s * (e as isize - 1);
            if r < 0 {
                lo += r
            } else {
                hi += r
            }
        }
        let off = (-lo) as usize;
        let len = (hi - lo + 1) as usize + 3;
        let mut p = Placed { buf: vec![fill; len], off, ext: t.ext.clone(), strides: strides.to_vec() };
        if t.ext.iter().all(|&e| e > 0) {
            for idx in index_iter(&t.ext) {
                let o = p.offset(&idx);
                p.buf[o] = T::from_c(t.at(&idx));
            }
        }
        p
    }

    pub(crate) fn new(t: &Tens, lay: Lay, rng: &mut SmallRng) -> Placed<T> {
        let r = t.ext.len();
        let mut order: Vec<usize> = (0..r).collect(); // innermost first
        let mut pad = vec![0usize; r];
        let mut neg = vec![false; r];
        match lay {
            Lay::RowMajor => order.reverse(),
            Lay::ColMajor => {}
            Lay::Random => {
                for i in (1..r).rev() {
                    order.swap(i, rng.gen_range(0..=i));
                }
                for i in 0..r {
                    pad[i] = if rng.gen_bool(0.3) { rng.gen_range(1..3) } else { 0 };
                    neg[i] = rng.gen_bool(0.25);
                }
            }
        }
        let mut strides = vec![0isize; r];
        let mut step = 1isize;
        for &ax in &order {
            strides[ax] = if neg[ax] { -step } else { step };
            step *= (t.ext[ax] + pad[ax]).max(1) as isize;
        }
        // A NaN-free but conspicuous filler for gaps.
        Placed::with_strides(t, &strides, T::from_c(C::new(777.0, 0.0)))
    }

    fn offset(&self, idx: &[usize]) -> usize {
        (self.off as isize + idx.iter().zip(&self.strides).map(|(&i, &s)| i as isize * s).sum::<isize>()) as usize
    }

    pub(crate) fn op(&mut self, conj: bool) -> Operand<'_> {
        Operand {
            // SAFETY: off is inside buf.
            ptr: unsafe { self.buf.as_mut_ptr().add(self.off) } as *mut u8,
            dtype: T::DTYPE,
            extents: &self.ext,
            strides: &self.strides,
            conj,
        }
    }

    pub(crate) fn get(&self) -> Tens {
        let v = if self.ext.iter().all(|&e| e > 0) {
            index_iter(&self.ext).iter().map(|idx| self.buf[self.offset(idx)].c()).collect()
        } else {
            vec![]
        };
        Tens { ext: self.ext.clone(), v }
    }

    /// Elements of the buffer outside the tensor (must be untouched).
    pub(crate) fn gaps(&self) -> Vec<(usize, C)> {
        let mut inside = vec![false; self.buf.len()];
        if self.ext.iter().all(|&e| e > 0) {
            for idx in index_iter(&self.ext) {
                inside[self.offset(&idx)] = true;
            }
        }
        (0..self.buf.len()).filter(|&i| !inside[i]).map(|i| (i, self.buf[i].c())).collect()
    }
}

pub(crate) fn assert_close(got: &Tens, want: &Tens, tol: f64, what: &str) {
    assert_eq!(got.ext, want.ext, "{what}: extents");
    for (i, (g, w)) in got.v.iter().zip(&want.v).enumerate() {
        let err = (g - w).norm();
        assert!(err <= tol * (1.0 + w.norm()), "{what}: element {i}: got {g}, want {w} (err {err:e}, tol {tol:e})");
    }
}

pub(crate) fn rand_scalar<T: TestEl>(rng: &mut SmallRng) -> Scalar {
    let re = rng.gen_range(-2.0..2.0);
    let im = if complex::<T>() { rng.gen_range(-2.0..2.0) } else { 0.0 };
    let z = T::from_c(C::new(re, im)).c();
    Scalar::complex(z.re, z.im)
}

pub(crate) fn sc(s: Scalar) -> C {
    C::new(s.re, s.im)
}

fn lay(rng: &mut SmallRng) -> Lay {
    [Lay::RowMajor, Lay::ColMajor, Lay::Random, Lay::Random][rng.gen_range(0..4)]
}

/// Reference `alpha*op(A)*op(B) + beta*C0`.
pub(crate) fn ref_gemm(alpha: C, a: &Tens, b: &Tens, beta: Option<C>, c0: &Tens) -> Tens {
    let (m, k, n) = (a.ext[0], a.ext[1], b.ext[1]);
    let mut v = vec![C::new(0.0, 0.0); m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = C::new(0.0, 0.0);
            for l in 0..k {
                s += a.at(&[i, l]) * b.at(&[l, j]);
            }
            let mut r = alpha * s;
            if let Some(bt) = beta {
                if bt != C::new(0.0, 0.0) {
                    r += bt * c0.at(&[i, j]);
                }
            }
            v[i * n + j] = r;
        }
    }
    Tens { ext: vec![m, n], v }
}

fn gemm_case<T: TestEl>(rng: &mut SmallRng, m: usize, n: usize, k: usize, lays: Option<(Lay, Lay, Lay)>) {
    let (la, lb, lc) = lays.unwrap_or_else(|| (lay(rng), lay(rng), lay(rng)));
    let at = Tens::random::<T>(&[m, k], rng);
    let bt = Tens::random::<T>(&[k, n], rng);
    let (ca, cb) = if complex::<T>() { (rng.gen_bool(0.5), rng.gen_bool(0.5)) } else { (false, false) };
    let alpha = rand_scalar::<T>(rng);
    let beta = match rng.gen_range(0..4) {
        0 => None,
        1 => Some(Scalar::real(0.0)),
        2 => Some(Scalar::real(1.0)),
        _ => Some(rand_scalar::<T>(rng)),
    };
    // C is NaN where it must not be read.
    let reads_c = beta.is_some_and(|b| b != Scalar::real(0.0));
    let ct = if reads_c { Tens::random::<T>(&[m, n], rng) } else { Tens::filled(&[m, n], C::new(f64::NAN, 0.0)) };
    let mut a = Placed::<T>::new(&at, la, rng);
    let mut b = Placed::<T>::new(&bt, lb, rng);
    let mut c = Placed::<T>::new(&ct, lc, rng);
    let gaps = c.gaps();
    unsafe { gemm(&c.op(false), alpha, &a.op(ca), &b.op(cb), beta) }.unwrap();
    let want = ref_gemm(
        sc(alpha),
        &if ca { at.conj() } else { at.clone() },
        &if cb { bt.conj() } else { bt.clone() },
        beta.map(sc),
        &ct,
    );
    let what =
        format!("gemm {} m={m} n={n} k={k} lays={la:?},{lb:?},{lc:?} conj={ca},{cb} beta={beta:?}", T::DTYPE.name());
    assert_close(&c.get(), &want, T::TOL * (k as f64 + 2.0) * 8.0, &what);
    let gaps_after = c.gaps();
    assert!(
        gaps.iter().zip(&gaps_after).all(|(x, y)| x.1 == y.1 || (x.1.is_nan() && y.1.is_nan())),
        "{what}: wrote outside C"
    );
}

fn gemm_all<T: TestEl>(seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let shapes = [
        (3, 5, 4),
        (5, 3, 4),
        (1, 7, 3),
        (6, 1, 2),
        (4, 4, 1),
        (1, 1, 5),
        (0, 3, 2),
        (3, 0, 2),
        (3, 4, 0),
        (17, 13, 11),
        (33, 20, 40),
    ];
    for &(m, n, k) in &shapes {
        for l in [
            (Lay::RowMajor, Lay::RowMajor, Lay::RowMajor),
            (Lay::ColMajor, Lay::ColMajor, Lay::ColMajor),
            (Lay::ColMajor, Lay::RowMajor, Lay::ColMajor),
            (Lay::RowMajor, Lay::ColMajor, Lay::RowMajor),
        ] {
            gemm_case::<T>(&mut rng, m, n, k, Some(l));
        }
        for _ in 0..6 {
            gemm_case::<T>(&mut rng, m, n, k, None);
        }
    }
}

#[test]
fn gemm_f32() {
    gemm_all::<f32>(1);
}
#[test]
fn gemm_f64() {
    gemm_all::<f64>(2);
}
#[test]
fn gemm_c64() {
    gemm_all::<Complex32>(3);
}
#[test]
fn gemm_c128() {
    gemm_all::<C>(4);
}

/// Products large enough for the parallel path, run on a 2-thread rayon pool
/// (as on the runtime's workers).
#[test]
fn gemm_parallel_in_pool() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    pool.install(|| {
        assert!(matches!(par_for(PAR_MIN_FLOPS), faer::Par::Rayon(_)));
        let mut rng = SmallRng::seed_from_u64(5);
        // Each above PAR_MIN_FLOPS for its dtype.
        assert!(work::<f64>(130, 120, 110) >= PAR_MIN_FLOPS && work::<f32>(150, 140, 140) >= PAR_MIN_FLOPS);
        gemm_case::<f64>(&mut rng, 130, 120, 110, Some((Lay::RowMajor, Lay::ColMajor, Lay::RowMajor)));
        gemm_case::<f64>(&mut rng, 120, 130, 110, None);
        gemm_case::<C>(&mut rng, 100, 100, 100, None);
        gemm_case::<f32>(&mut rng, 150, 140, 140, None);
        gemm_case::<Complex32>(&mut rng, 100, 99, 98, None);
        // A larger random contraction on the pool.
        contract_case::<f64>(&mut rng, 3, 3, 2, 24);
    });
    // Outside any pool: sequential.
    assert!(matches!(par_for(usize::MAX), faer::Par::Seq));
}

/// Several parallel products at once on one 2-thread pool (as when tasks run
/// concurrently on the runtime's workers): faer's parallel pieces are jobs of
/// that pool, nested and stolen across products; all finish, all correct.
#[test]
fn gemm_concurrent_in_pool() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    pool.scope(|s| {
        for seed in 0..6u64 {
            s.spawn(move |_| {
                let mut rng = SmallRng::seed_from_u64(100 + seed);
                if seed % 2 == 0 {
                    gemm_case::<f64>(&mut rng, 130, 120, 110, None);
                } else {
                    gemm_case::<C>(&mut rng, 90, 80, 70, None);
                }
            });
        }
    });
}

/// Transposed views are swapped strides; a conj-transposed view is the
/// Hermitian adjoint, without copies.
#[test]
fn gemm_transposed_and_adjoint_views() {
    let mut rng = SmallRng::seed_from_u64(6);
    // A stored 4x3 row-major; use its transpose (3x4) as the left operand.
    let stored = Tens::random::<C>(&[4, 3], &mut rng);
    let mut a = Placed::<C>::new(&stored, Lay::RowMajor, &mut rng);
    let bt = Tens::random::<C>(&[4, 2], &mut rng);
    let mut b = Placed::<C>::new(&bt, Lay::ColMajor, &mut rng);
    let mut c = Placed::<C>::new(&Tens::filled(&[3, 2], C::new(0.0, 0.0)), Lay::RowMajor, &mut rng);
    let at_ext = [3usize, 4];
    let at_str = [a.strides[1], a.strides[0]];
    let aop = Operand { extents: &at_ext, strides: &at_str, ..a.op(true) };
    unsafe { gemm(&c.op(false), Scalar::real(1.0), &aop, &b.op(false), None) }.unwrap();
    let mut adj = Tens::filled(&[3, 4], C::new(0.0, 0.0));
    for i in 0..3 {
        for j in 0..4 {
            adj.v[i * 4 + j] = stored.at(&[j, i]).conj();
        }
    }
    let want = ref_gemm(C::new(1.0, 0.0), &adj, &bt, None, &adj);
    assert_close(&c.get(), &want, 1e-13, "A^H B");
}

/// Zero strides on inputs (broadcast rows/columns) are fine.
#[test]
fn gemm_zero_stride_inputs() {
    let mut rng = SmallRng::seed_from_u64(7);
    let row = Tens::random::<f64>(&[1, 5], &mut rng);
    let mut a = Placed::<f64>::new(&row, Lay::RowMajor, &mut rng);
    let ext = [4usize, 5];
    let st = [0isize, 1];
    let aop = Operand { extents: &ext, strides: &st, ..a.op(false) };
    let bt = Tens::random::<f64>(&[5, 3], &mut rng);
    let mut b = Placed::<f64>::new(&bt, Lay::RowMajor, &mut rng);
    let mut c = Placed::<f64>::new(&Tens::filled(&[4, 3], C::new(0.0, 0.0)), Lay::ColMajor, &mut rng);
    unsafe { gemm(&c.op(false), Scalar::real(2.0), &aop, &b.op(false), None) }.unwrap();
    let mut abig = Tens::filled(&[4, 5], C::new(0.0, 0.0));
    for i in 0..4 {
        for j in 0..5 {
            abig.v[i * 5 + j] = row.at(&[0, j]);
        }
    }
    assert_close(&c.get(), &ref_gemm(C::new(2.0, 0.0), &abig, &bt, None, &abig), 1e-14, "broadcast A");
}

/// alpha == 0 reads neither A nor B (BLAS convention): NaNs there do not leak.
#[test]
fn gemm_alpha_zero_does_not_read_inputs() {
    let mut rng = SmallRng::seed_from_u64(8);
    let nan = Tens::filled(&[3, 3], C::new(f64::NAN, 0.0));
    let mut a = Placed::<f64>::new(&nan, Lay::RowMajor, &mut rng);
    let mut b = Placed::<f64>::new(&nan, Lay::RowMajor, &mut rng);
    let ct = Tens::random::<f64>(&[3, 3], &mut rng);
    let mut c = Placed::<f64>::new(&ct, Lay::RowMajor, &mut rng);
    unsafe { gemm(&c.op(false), Scalar::real(0.0), &a.op(false), &b.op(false), Some(Scalar::real(3.0))) }.unwrap();
    let want = Tens { ext: ct.ext.clone(), v: ct.v.iter().map(|z| z * 3.0).collect() };
    assert_close(&c.get(), &want, 1e-15, "alpha=0");
}

fn status_and_msg(r: Result<()>) -> (Status, String) {
    let e = r.unwrap_err();
    (e.status(), e.message().to_string())
}

#[test]
fn gemm_errors_name_shapes() {
    let mut rng = SmallRng::seed_from_u64(9);
    let mut a = Placed::<f64>::new(&Tens::random::<f64>(&[3, 4], &mut rng), Lay::RowMajor, &mut rng);
    let mut b = Placed::<f64>::new(&Tens::random::<f64>(&[5, 2], &mut rng), Lay::RowMajor, &mut rng);
    let mut c = Placed::<f64>::new(&Tens::random::<f64>(&[3, 2], &mut rng), Lay::RowMajor, &mut rng);
    let (s, m) = status_and_msg(unsafe { gemm(&c.op(false), Scalar::real(1.0), &a.op(false), &b.op(false), None) });
    assert_eq!(s, Status::ShapeMismatch);
    assert!(m.contains("A is 3x4") && m.contains("B is 5x2"), "{m}");

    let mut b2 = Placed::<f64>::new(&Tens::random::<f64>(&[4, 2], &mut rng), Lay::RowMajor, &mut rng);
    let mut c2 = Placed::<f64>::new(&Tens::random::<f64>(&[3, 3], &mut rng), Lay::RowMajor, &mut rng);
    let (s, m) = status_and_msg(unsafe { gemm(&c2.op(false), Scalar::real(1.0), &a.op(false), &b2.op(false), None) });
    assert_eq!(s, Status::ShapeMismatch);
    assert!(m.contains("C is 3x3") && m.contains("3x2"), "{m}");

    let mut bf = Placed::<f32>::new(&Tens::random::<f32>(&[4, 2], &mut rng), Lay::RowMajor, &mut rng);
    let (s, m) = status_and_msg(unsafe { gemm(&c.op(false), Scalar::real(1.0), &a.op(false), &bf.op(false), None) });
    assert_eq!(s, Status::DtypeMismatch);
    assert!(m.contains("f64") && m.contains("f32"), "{m}");

    // Rank 3 operand.
    let mut a3 = Placed::<f64>::new(&Tens::random::<f64>(&[3, 4, 1], &mut rng), Lay::RowMajor, &mut rng);
    let (s, m) = status_and_msg(unsafe { gemm(&c.op(false), Scalar::real(1.0), &a3.op(false), &b2.op(false), None) });
    assert_eq!(s, Status::ShapeMismatch);
    assert!(m.contains("3x4x1"), "{m}");

    // Integer dtypes are not supported.
    let mut iv = vec![0i32; 16];
    let e2 = [2usize, 2];
    let s2 = [2isize, 1];
    let iop = Operand { ptr: iv.as_mut_ptr() as *mut u8, dtype: DType::I32, extents: &e2, strides: &s2, conj: false };
    let (s, _) = status_and_msg(unsafe { gemm(&iop, Scalar::real(1.0), &iop, &iop, None) });
    assert_eq!(s, Status::Unsupported);

    // Output conj view, output with repeated elements.
    let mut cc = Placed::<C>::new(&Tens::random::<C>(&[3, 2], &mut rng), Lay::RowMajor, &mut rng);
    let mut ac = Placed::<C>::new(&Tens::random::<C>(&[3, 4], &mut rng), Lay::RowMajor, &mut rng);
    let mut bc = Placed::<C>::new(&Tens::random::<C>(&[4, 2], &mut rng), Lay::RowMajor, &mut rng);
    let (s, _) = status_and_msg(unsafe { gemm(&cc.op(true), Scalar::real(1.0), &ac.op(false), &bc.op(false), None) });
    assert_eq!(s, Status::ReadOnly);
    let cext = [3usize, 2];
    let cst = [0isize, 1];
    let cop = Operand { extents: &cext, strides: &cst, ..cc.op(false) };
    let (s, m) = status_and_msg(unsafe { gemm(&cop, Scalar::real(1.0), &ac.op(false), &bc.op(false), None) });
    assert_eq!(s, Status::InvalidArgument);
    assert!(m.contains("3x2"), "{m}");
}

/// Reference einsum for a contraction.
fn ref_contract(alpha: C, a: &Tens, b: &Tens, aa: &[usize], ba: &[usize], beta: Option<C>, c0: &Tens) -> Tens {
    let af: Vec<usize> = (0..a.ext.len()).filter(|i| !aa.contains(i)).collect();
    let bf: Vec<usize> = (0..b.ext.len()).filter(|i| !ba.contains(i)).collect();
    let cext: Vec<usize> = af.iter().map(|&i| a.ext[i]).chain(bf.iter().map(|&j| b.ext[j])).collect();
    let kext: Vec<usize> = aa.iter().map(|&i| a.ext[i]).collect();
    let mut out = Tens::filled(&cext, C::new(0.0, 0.0));
    if cext.contains(&0) {
        out.v.clear();
        return out;
    }
    let kidx = if kext.contains(&0) { vec![] } else { index_iter(&kext) };
    for ci in index_iter(&cext) {
        let mut s = C::new(0.0, 0.0);
        for ki in &kidx {
            let mut ia = vec![0usize; a.ext.len()];
            let mut ib = vec![0usize; b.ext.len()];
            for (p, &i) in af.iter().enumerate() {
                ia[i] = ci[p];
            }
            for (q, &j) in bf.iter().enumerate() {
                ib[j] = ci[af.len() + q];
            }
            for (t, (&i, &j)) in aa.iter().zip(ba).enumerate() {
                ia[i] = ki[t];
                ib[j] = ki[t];
            }
            s += a.at(&ia) * b.at(&ib);
        }
        let mut r = alpha * s;
        if let Some(bt) = beta {
            if bt != C::new(0.0, 0.0) {
                r += bt * c0.at(&ci);
            }
        }
        let f = out.flat(&ci);
        out.v[f] = r;
    }
    out
}

fn contract_case<T: TestEl>(rng: &mut SmallRng, ra: usize, rb: usize, np: usize, max_ext: usize) {
    // Choose the pairs, then extents that agree on them.
    let mut pa: Vec<usize> = (0..ra).collect();
    let mut pb: Vec<usize> = (0..rb).collect();
    for i in (1..ra).rev() {
        pa.swap(i, rng.gen_range(0..=i));
    }
    for i in (1..rb).rev() {
        pb.swap(i, rng.gen_range(0..=i));
    }
    let aa: Vec<usize> = pa[..np].to_vec();
    let ba: Vec<usize> = pb[..np].to_vec();
    let mut ae: Vec<usize> = (0..ra).map(|_| rng.gen_range(1..=max_ext)).collect();
    let be: Vec<usize> = (0..rb)
        .map(|j| match ba.iter().position(|&x| x == j) {
            Some(t) => ae[aa[t]],
            None => rng.gen_range(1..=max_ext),
        })
        .collect();
    if rng.gen_bool(0.05) && ra > 0 {
        // An empty axis somewhere.
        let i = rng.gen_range(0..ra);
        if !aa.contains(&i) {
            ae[i] = 0;
        }
    }
    let at = Tens::random::<T>(&ae, rng);
    let bt = Tens::random::<T>(&be, rng);
    let cext = contract_shape(&ae, &be, &aa, &ba).unwrap();
    let (ca, cb) = if complex::<T>() { (rng.gen_bool(0.5), rng.gen_bool(0.5)) } else { (false, false) };
    let alpha = rand_scalar::<T>(rng);
    let beta = match rng.gen_range(0..3) {
        0 => None,
        1 => Some(Scalar::real(1.0)),
        _ => Some(rand_scalar::<T>(rng)),
    };
    let ct = if beta.is_some() { Tens::random::<T>(&cext, rng) } else { Tens::filled(&cext, C::new(f64::NAN, 0.0)) };
    let (la, lb, lc) = (lay(rng), lay(rng), lay(rng));
    let mut a = Placed::<T>::new(&at, la, rng);
    let mut b = Placed::<T>::new(&bt, lb, rng);
    let mut c = Placed::<T>::new(&ct, lc, rng);
    unsafe { contract(&c.op(false), alpha, &a.op(ca), &b.op(cb), &aa, &ba, beta) }.unwrap();
    let want = ref_contract(
        sc(alpha),
        &if ca { at.conj() } else { at.clone() },
        &if cb { bt.conj() } else { bt.clone() },
        &aa,
        &ba,
        beta.map(sc),
        &ct,
    );
    let k: usize = aa.iter().map(|&i| ae[i]).product();
    let what = format!("contract {} A{ae:?} B{be:?} axes {aa:?}/{ba:?} lays {la:?},{lb:?},{lc:?}", T::DTYPE.name());
    assert_close(&c.get(), &want, T::TOL * (k as f64 + 2.0) * 8.0, &what);
}

fn contract_random<T: TestEl>(seed: u64, cases: usize) {
    let mut rng = SmallRng::seed_from_u64(seed);
    for _ in 0..cases {
        let ra = rng.gen_range(1..=4);
        let rb = rng.gen_range(1..=4);
        let np = rng.gen_range(0..=ra.min(rb));
        contract_case::<T>(&mut rng, ra, rb, np, 4);
    }
}

#[test]
fn contract_random_f32() {
    contract_random::<f32>(11, 150);
}
#[test]
fn contract_random_f64() {
    contract_random::<f64>(12, 300);
}
#[test]
fn contract_random_c64() {
    contract_random::<Complex32>(13, 150);
}
#[test]
fn contract_random_c128() {
    contract_random::<C>(14, 300);
}

/// Special patterns: a matrix product written as a contraction (direct
/// views), outer product, full contraction to a scalar, a batched-looking
/// pattern whose C cannot merge (temporary C).
#[test]
fn contract_patterns() {
    let mut rng = SmallRng::seed_from_u64(15);
    for _ in 0..4 {
        // matrix product
        contract_case::<f64>(&mut rng, 2, 2, 1, 9);
        // outer product
        contract_case::<C>(&mut rng, 2, 1, 0, 6);
        // full contraction
        contract_case::<f64>(&mut rng, 3, 3, 3, 4);
        contract_case::<Complex32>(&mut rng, 4, 4, 4, 3);
    }
    // C whose M axes interleave with N axes in memory: C[i,j] from A[i,k],
    // B[k,j] with i,j of C as 3-d each merged... use a rank-4 C with
    // column-major/row-major mixing.
    let ae = [3usize, 4, 5];
    let be = [5usize, 2, 3];
    let at = Tens::random::<f64>(&ae, &mut rng);
    let bt = Tens::random::<f64>(&be, &mut rng);
    let cext = contract_shape(&ae, &be, &[2], &[0]).unwrap();
    assert_eq!(cext, vec![3, 4, 2, 3]);
    let ct = Tens::random::<f64>(&cext, &mut rng);
    let mut a = Placed::<f64>::new(&at, Lay::RowMajor, &mut rng);
    let mut b = Placed::<f64>::new(&bt, Lay::ColMajor, &mut rng);
    // C strides interleave M and N axes: (i, j, p, q) -> i*1 + p*3 + j*6 + q*24.
    let mut c = Placed::<f64>::with_strides(&ct, &[1, 6, 3, 24], 0.0);
    unsafe {
        contract(&c.op(false), Scalar::real(1.5), &a.op(false), &b.op(false), &[2], &[0], Some(Scalar::real(-0.5)))
    }
    .unwrap();
    let want = ref_contract(C::new(1.5, 0.0), &at, &bt, &[2], &[0], Some(C::new(-0.5, 0.0)), &ct);
    assert_close(&c.get(), &want, 1e-13, "interleaved C");
}

#[test]
fn contract_errors() {
    let e = contract_shape(&[3, 4], &[4, 5], &[1], &[1]).unwrap_err();
    assert_eq!(e.status(), Status::ShapeMismatch);
    assert!(e.message().contains("3x4") && e.message().contains("4x5"), "{}", e.message());
    assert_eq!(contract_shape(&[3, 4], &[4, 5], &[2], &[0]).unwrap_err().status(), Status::InvalidArgument);
    assert_eq!(contract_shape(&[4, 4], &[4, 4], &[0, 0], &[0, 1]).unwrap_err().status(), Status::InvalidArgument);
    assert_eq!(contract_shape(&[4, 4], &[4, 4], &[0], &[0, 1]).unwrap_err().status(), Status::InvalidArgument);
    assert_eq!(contract_shape(&[3, 4], &[4, 5], &[1], &[0]).unwrap(), vec![3, 5]);
    assert_eq!(contract_shape(&[3], &[5], &[], &[]).unwrap(), vec![3, 5]);
    let mut rng = SmallRng::seed_from_u64(16);
    let mut a = Placed::<f64>::new(&Tens::random::<f64>(&[3, 4], &mut rng), Lay::RowMajor, &mut rng);
    let mut b = Placed::<f64>::new(&Tens::random::<f64>(&[4, 5], &mut rng), Lay::RowMajor, &mut rng);
    let mut c = Placed::<f64>::new(&Tens::random::<f64>(&[5, 3], &mut rng), Lay::RowMajor, &mut rng);
    let e =
        unsafe { contract(&c.op(false), Scalar::real(1.0), &a.op(false), &b.op(false), &[1], &[0], None) }.unwrap_err();
    assert_eq!(e.status(), Status::ShapeMismatch);
    assert!(e.message().contains("C is 5x3") && e.message().contains("3x5"), "{}", e.message());
}

#[test]
fn shape_helpers() {
    assert_eq!(gemm_shape(&[3, 4], &[4, 7]).unwrap(), [3, 7]);
    let e = gemm_shape(&[3, 4], &[5, 2]).unwrap_err();
    assert!(e.message().contains("A is 3x4, B is 5x2"), "{}", e.message());
    assert_eq!(e.origin(), "gemm");
    assert_eq!(gemm_shape(&[3], &[3, 2]).unwrap_err().status(), Status::ShapeMismatch);
    assert_eq!(sum_shape(&[2, 3, 4], None).unwrap(), Vec::<usize>::new());
    assert_eq!(sum_shape(&[2, 3, 4], Some(&[1])).unwrap(), vec![2, 4]);
    assert_eq!(sum_shape(&[2, 3, 4], Some(&[2, 0])).unwrap(), vec![3]);
    assert_eq!(sum_shape(&[2, 3, 4], Some(&[])).unwrap(), vec![2, 3, 4]);
    let e = sum_shape(&[2, 3], Some(&[2])).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e.message().contains("2x3"), "{}", e.message());
    assert_eq!(sum_shape(&[2, 3], Some(&[1, 1])).unwrap_err().status(), Status::InvalidArgument);
}

fn permute_case<T: TestEl>(rng: &mut SmallRng) {
    let r = rng.gen_range(0..=4);
    let ext: Vec<usize> = (0..r).map(|_| rng.gen_range(1..=5)).collect();
    let mut perm: Vec<usize> = (0..r).collect();
    for i in (1..r).rev() {
        perm.swap(i, rng.gen_range(0..=i));
    }
    let st = Tens::random::<T>(&ext, rng);
    let dext: Vec<usize> = perm.iter().map(|&p| ext[p]).collect();
    let conj = complex::<T>() && rng.gen_bool(0.5);
    let mut s = Placed::<T>::new(&st, lay(rng), rng);
    let mut d = Placed::<T>::new(&Tens::filled(&dext, C::new(0.0, 0.0)), lay(rng), rng);
    unsafe { permute_copy(&d.op(false), &s.op(conj), &perm) }.unwrap();
    let mut want = Tens::filled(&dext, C::new(0.0, 0.0));
    if r > 0 {
        for di in index_iter(&dext) {
            let mut si = vec![0usize; r];
            for (k, &p) in perm.iter().enumerate() {
                si[p] = di[k];
            }
            let v = st.at(&si);
            let f = want.flat(&di);
            want.v[f] = if conj { v.conj() } else { v };
        }
    } else {
        want.v = vec![if conj { st.v[0].conj() } else { st.v[0] }];
    }
    assert_close(&d.get(), &want, 0.0, &format!("permute {} {ext:?} by {perm:?}", T::DTYPE.name()));
}

#[test]
fn permute_all_dtypes() {
    let mut rng = SmallRng::seed_from_u64(21);
    for _ in 0..60 {
        permute_case::<f32>(&mut rng);
        permute_case::<f64>(&mut rng);
        permute_case::<Complex32>(&mut rng);
        permute_case::<C>(&mut rng);
    }
    // A large transpose (tiled path), with padding and negative strides.
    let t = Tens::random::<f64>(&[70, 45], &mut rng);
    let mut s = Placed::<f64>::with_strides(&t, &[-50, 1], 0.0);
    let mut d = Placed::<f64>::new(&Tens::filled(&[45, 70], C::new(0.0, 0.0)), Lay::RowMajor, &mut rng);
    unsafe { permute_copy(&d.op(false), &s.op(false), &[1, 0]) }.unwrap();
    let got = d.get();
    for i in 0..70 {
        for j in 0..45 {
            assert_eq!(got.at(&[j, i]), t.at(&[i, j]));
        }
    }
    // Errors.
    let e = unsafe { permute_copy(&d.op(false), &s.op(false), &[0, 0]) }.unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    let e = unsafe { permute_copy(&d.op(false), &s.op(false), &[0, 1]) }.unwrap_err();
    assert_eq!(e.status(), Status::ShapeMismatch);
    assert!(e.message().contains("45x70") && e.message().contains("70x45"), "{}", e.message());
}

#[test]
fn conj_all_dtypes() {
    fn case<T: TestEl>(rng: &mut SmallRng) {
        let ext = [3usize, 4, 2];
        let t = Tens::random::<T>(&ext, rng);
        for src_conj in [false, true] {
            let src_conj = src_conj && complex::<T>();
            let mut s = Placed::<T>::new(&t, lay(rng), rng);
            let mut d = Placed::<T>::new(&Tens::filled(&ext, C::new(0.0, 0.0)), lay(rng), rng);
            unsafe { conj_copy(&d.op(false), &s.op(src_conj)) }.unwrap();
            // conj(conj(x)) = x
            let want = if src_conj { t.clone() } else { t.conj() };
            assert_close(&d.get(), &want, 0.0, &format!("conj {}", T::DTYPE.name()));
        }
    }
    let mut rng = SmallRng::seed_from_u64(22);
    for _ in 0..10 {
        case::<f32>(&mut rng);
        case::<f64>(&mut rng);
        case::<Complex32>(&mut rng);
        case::<C>(&mut rng);
    }
}

fn sum_case<T: TestEl>(rng: &mut SmallRng) {
    let r = rng.gen_range(0..=4);
    let ext: Vec<usize> = (0..r).map(|_| rng.gen_range(0..=5)).collect();
    let t = Tens::random::<T>(&ext, rng);
    let axes: Option<Vec<usize>> =
        if rng.gen_bool(0.3) { None } else { Some((0..r).filter(|_| rng.gen_bool(0.5)).collect()) };
    let oext = sum_shape(&ext, axes.as_deref()).unwrap();
    let conj = complex::<T>() && rng.gen_bool(0.5);
    let mut x = Placed::<T>::new(&t, lay(rng), rng);
    let mut o = Placed::<T>::new(&Tens::filled(&oext, C::new(f64::NAN, 0.0)), lay(rng), rng);
    unsafe { sum(&o.op(false), &x.op(conj), axes.as_deref()) }.unwrap();
    let mut want = Tens::filled(&oext, C::new(0.0, 0.0));
    let red: Vec<usize> = match &axes {
        None => (0..r).collect(),
        Some(a) => a.clone(),
    };
    if ext.iter().all(|&e| e > 0) {
        for xi in index_iter(&ext) {
            let oi: Vec<usize> = (0..r).filter(|i| !red.contains(i)).map(|i| xi[i]).collect();
            let f = want.flat(&oi);
            let v = t.at(&xi);
            want.v[f] += if conj { v.conj() } else { v };
        }
    }
    let n: usize = ext.iter().product::<usize>().max(1);
    assert_close(&o.get(), &want, T::TOL * n as f64 * 2.0, &format!("sum {} {ext:?} over {axes:?}", T::DTYPE.name()));
}

#[test]
fn sum_all_dtypes() {
    let mut rng = SmallRng::seed_from_u64(31);
    for _ in 0..80 {
        sum_case::<f32>(&mut rng);
        sum_case::<f64>(&mut rng);
        sum_case::<Complex32>(&mut rng);
        sum_case::<C>(&mut rng);
    }
    // Shape error names the shapes.
    let mut x = Placed::<f64>::new(&Tens::random::<f64>(&[2, 3], &mut rng), Lay::RowMajor, &mut rng);
    let mut o = Placed::<f64>::new(&Tens::random::<f64>(&[3], &mut rng), Lay::RowMajor, &mut rng);
    let e = unsafe { sum(&o.op(false), &x.op(false), Some(&[1])) }.unwrap_err();
    assert_eq!(e.status(), Status::ShapeMismatch);
    assert!(e.message().contains("2x3"), "{}", e.message());
}

/// Pairwise summation: a million f32 copies of 0.1 sum to within a few ulps
/// of 100000 (naive left-to-right summation is off by about 1%).
#[test]
fn sum_accuracy() {
    let n = 1_000_000usize;
    let mut v = vec![0.1f32; n];
    let e = [n];
    let s = [1isize];
    let x = Operand { ptr: v.as_mut_ptr() as *mut u8, dtype: DType::F32, extents: &e, strides: &s, conj: false };
    let mut out = 0f32;
    let o = Operand { ptr: (&mut out as *mut f32).cast(), dtype: DType::F32, extents: &[], strides: &[], conj: false };
    unsafe { sum(&o, &x, None) }.unwrap();
    let exact = 0.1f32 as f64 * n as f64;
    assert!(((out as f64) - exact).abs() / exact < 1e-6, "pairwise sum {out} vs {exact}");
    let naive: f32 = v.iter().sum();
    assert!(((naive as f64) - exact).abs() / exact > 1e-4, "naive sum is accurate here? {naive}");
    // Same layout, same result (deterministic).
    let mut again = 0f32;
    let o2 = Operand { ptr: (&mut again as *mut f32).cast(), ..o };
    unsafe { sum(&o2, &x, None) }.unwrap();
    assert_eq!(out.to_bits(), again.to_bits());
    // dot of the same vector with ones.
    let mut ones = vec![1f32; n];
    let y = Operand { ptr: ones.as_mut_ptr() as *mut u8, ..x };
    let mut d = 0f32;
    let od = Operand { ptr: (&mut d as *mut f32).cast(), ..o };
    unsafe { dot(&od, &x, &y, false) }.unwrap();
    assert!(((d as f64) - exact).abs() / exact < 1e-6, "pairwise dot {d}");
}

fn dot_case<T: TestEl>(rng: &mut SmallRng) {
    let r = rng.gen_range(1..=3);
    let ext: Vec<usize> = (0..r).map(|_| rng.gen_range(0..=6)).collect();
    let xt = Tens::random::<T>(&ext, rng);
    let yt = Tens::random::<T>(&ext, rng);
    let cplx = complex::<T>();
    let (cx, cy, conjx) = (cplx && rng.gen_bool(0.5), cplx && rng.gen_bool(0.5), rng.gen_bool(0.5));
    let mut x = Placed::<T>::new(&xt, lay(rng), rng);
    let mut y = Placed::<T>::new(&yt, lay(rng), rng);
    let mut out = T::from_c(C::new(f64::NAN, 0.0));
    let o = Operand { ptr: (&mut out as *mut T).cast(), dtype: T::DTYPE, extents: &[], strides: &[], conj: false };
    unsafe { dot(&o, &x.op(cx), &y.op(cy), conjx) }.unwrap();
    let mut want = C::new(0.0, 0.0);
    for (a, b) in xt.v.iter().zip(&yt.v) {
        let a = if cx != conjx { a.conj() } else { *a };
        let b = if cy { b.conj() } else { *b };
        want += a * b;
    }
    let n = xt.v.len() as f64;
    let err = (out.c() - want).norm();
    assert!(
        err <= T::TOL * (n + 1.0) * 4.0,
        "dot {} {ext:?} conj {cx},{cy},{conjx}: {} vs {want}",
        T::DTYPE.name(),
        out.c()
    );
}

#[test]
fn dot_all_dtypes() {
    let mut rng = SmallRng::seed_from_u64(41);
    for _ in 0..60 {
        dot_case::<f32>(&mut rng);
        dot_case::<f64>(&mut rng);
        dot_case::<Complex32>(&mut rng);
        dot_case::<C>(&mut rng);
    }
    // Errors.
    let mut x = Placed::<f64>::new(&Tens::random::<f64>(&[2, 3], &mut rng), Lay::RowMajor, &mut rng);
    let mut y = Placed::<f64>::new(&Tens::random::<f64>(&[3, 2], &mut rng), Lay::RowMajor, &mut rng);
    let mut out = 0f64;
    let o = Operand { ptr: (&mut out as *mut f64).cast(), dtype: DType::F64, extents: &[], strides: &[], conj: false };
    let e = unsafe { dot(&o, &x.op(false), &y.op(false), false) }.unwrap_err();
    assert_eq!(e.status(), Status::ShapeMismatch);
    assert!(e.message().contains("2x3") && e.message().contains("3x2"), "{}", e.message());
    let mut of = 0f32;
    let o32 = Operand { ptr: (&mut of as *mut f32).cast(), dtype: DType::F32, extents: &[], strides: &[], conj: false };
    let e = unsafe { dot(&o32, &x.op(false), &y.op(false), false) }.unwrap_err();
    assert_eq!(e.status(), Status::DtypeMismatch);
}

fn norm_of<T: TestEl>(vals: &[T], strides: isize) -> T::Re {
    let ext = [vals.len() / strides.unsigned_abs().max(1)];
    let mut v = vals.to_vec();
    let (ptr, st) = if strides < 0 {
        (unsafe { v.as_mut_ptr().add(vals.len() - 1) }, [strides])
    } else {
        (v.as_mut_ptr(), [strides])
    };
    let x = Operand { ptr: ptr as *mut u8, dtype: T::DTYPE, extents: &ext, strides: &st, conj: false };
    let mut out = <T::Re as Element>::zero();
    let o = Operand {
        ptr: (&mut out as *mut T::Re).cast(),
        dtype: <T::Re as Element>::DTYPE,
        extents: &[],
        strides: &[],
        conj: false,
    };
    unsafe { norm2(&o, &x) }.unwrap();
    out
}

#[test]
fn norm2_all_dtypes() {
    fn case<T: TestEl>(rng: &mut SmallRng) {
        for n in [0usize, 1, 5, 130, 1000] {
            let t = Tens::random::<T>(&[n], rng);
            let v: Vec<T> = t.v.iter().map(|z| T::from_c(*z)).collect();
            let want: f64 = t.v.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt();
            let got = norm_of(&v, 1).to_f64();
            assert!(
                (got - want).abs() <= T::TOL * 4.0 * (1.0 + want),
                "norm2 {} n={n}: {got} vs {want}",
                T::DTYPE.name()
            );
            if n > 1 {
                let got = norm_of(&v, -1).to_f64();
                assert!((got - want).abs() <= T::TOL * 4.0 * (1.0 + want));
            }
        }
    }
    let mut rng = SmallRng::seed_from_u64(51);
    case::<f32>(&mut rng);
    case::<f64>(&mut rng);
    case::<Complex32>(&mut rng);
    case::<C>(&mut rng);

    // Overflow and underflow are avoided by scaling.
    let big = norm_of(&[3e300f64, 4e300], 1);
    assert!((big / 5e300 - 1.0).abs() < 1e-15, "{big}");
    let small = norm_of(&[3e-300f64, 4e-300], 1);
    assert!((small / 5e-300 - 1.0).abs() < 1e-15, "{small}");
    let big32 = norm_of(&[3e30f32, 4e30], 1);
    assert!((big32 / 5e30 - 1.0).abs() < 1e-6, "{big32}");
    let tiny32 = norm_of(&[3e-30f32, 4e-30], 1);
    assert!((tiny32 / 5e-30 - 1.0).abs() < 1e-6, "{tiny32}");
    let zc = norm_of(&[C::new(3e300, 4e300), C::new(0.0, 0.0)], 1);
    assert!((zc / 5e300 - 1.0).abs() < 1e-15, "{zc}");
    assert!(norm_of(&[1.0f64, f64::NAN, f64::INFINITY], 1).is_nan());
    assert_eq!(norm_of(&[1.0f64, f64::NEG_INFINITY], 1), f64::INFINITY);
    assert_eq!(norm_of(&[0.0f64, 0.0], 1), 0.0);

    // The output dtype is the real counterpart.
    let mut x = [C::new(1.0, 0.0)];
    let e1 = [1usize];
    let s1 = [1isize];
    let xo = Operand { ptr: x.as_mut_ptr() as *mut u8, dtype: DType::C128, extents: &e1, strides: &s1, conj: false };
    let mut out = C::new(0.0, 0.0);
    let o = Operand { ptr: (&mut out as *mut C).cast(), dtype: DType::C128, extents: &[], strides: &[], conj: false };
    let e = unsafe { norm2(&o, &xo) }.unwrap_err();
    assert_eq!(e.status(), Status::DtypeMismatch);
    assert!(e.message().contains("f64"), "{}", e.message());
}
