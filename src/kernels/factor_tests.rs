//! Tests of the factorisation tile kernels (potrf, trsm, syrk): each kernel
//! and dtype against independent naive references (plain loops in
//! complex128): reconstruct `L·L^H`, multiply the solution back, recompute
//! the rank-k update; over non-square, strided (padded and negative-stride
//! sub-matrices of larger buffers), row- and column-major, transposed and
//! conj operands, with NaN wherever an element must not be read and checks
//! that nothing outside the output triangle is written.

use num_complex::{Complex32, Complex64 as C};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::operand::Operand;
use super::par::{work, PAR_MIN_FLOPS};
use super::potrf::potrf;
use super::syrk::syrk;
use super::tests::{complex, rand_scalar, Lay, Placed, Tens, TestEl};
use super::trsm::trsm;
use crate::dtype::DType;
use crate::dtype::Scalar;
use crate::error::{Error, Status};

const NAN: C = C::new(f64::NAN, 0.0);

fn tens(r: usize, c: usize, mut f: impl FnMut(usize, usize) -> C) -> Tens {
    let mut v = Vec::with_capacity(r * c);
    for i in 0..r {
        for j in 0..c {
            v.push(f(i, j));
        }
    }
    Tens { ext: vec![r, c], v }
}

fn tr(t: &Tens) -> Tens {
    tens(t.ext[1], t.ext[0], |i, j| t.at(&[j, i]))
}

/// `x` rounded to `T`.
fn rnd<T: TestEl>(x: C) -> C {
    T::from_c(x).c()
}

fn rand_c<T: TestEl>(rng: &mut SmallRng) -> C {
    let im = if complex::<T>() { rng.gen_range(-1.0..1.0) } else { 0.0 };
    rnd::<T>(C::new(rng.gen_range(-1.0..1.0), im))
}

fn in_tri(i: usize, j: usize, lower: bool) -> bool {
    if lower {
        i >= j
    } else {
        i <= j
    }
}

/// A logical matrix placed in memory: stored with layout `lay`, either
/// as itself or (`trans`) as the transposed view of its stored transpose.
struct View<T> {
    p: Placed<T>,
    trans: bool,
    ext: [usize; 2],
    st: [isize; 2],
}

impl<T: TestEl> View<T> {
    fn new(m: &Tens, lay: Lay, trans: bool, rng: &mut SmallRng) -> Self {
        let ext = [m.ext[0], m.ext[1]];
        if trans {
            let p = Placed::<T>::new(&tr(m), lay, rng);
            let st = [p.strides[1], p.strides[0]];
            View { p, trans, ext, st }
        } else {
            let p = Placed::<T>::new(m, lay, rng);
            let st = [p.strides[0], p.strides[1]];
            View { p, trans, ext, st }
        }
    }

    /// Stored with explicit strides (any signs), not transposed.
    fn with_strides(m: &Tens, strides: [isize; 2]) -> Self {
        let p = Placed::<T>::with_strides(m, &strides, T::from_c(C::new(777.0, 0.0)));
        View { p, trans: false, ext: [m.ext[0], m.ext[1]], st: strides }
    }

    fn op(&mut self, conj: bool) -> Operand<'_> {
        Operand {
            // SAFETY: off is inside buf.
            ptr: unsafe { self.p.buf.as_mut_ptr().add(self.p.off) } as *mut u8,
            dtype: T::DTYPE,
            extents: &self.ext,
            strides: &self.st,
            conj,
        }
    }

    /// The logical matrix as stored now.
    fn get(&self) -> Tens {
        let g = self.p.get();
        if self.trans {
            tr(&g)
        } else {
            g
        }
    }

    fn raw(&self) -> Vec<C> {
        self.p.buf.iter().map(|x| x.c()).collect()
    }
}

/// Buffers equal, NaN matching NaN.
fn same_bits(a: &[C], b: &[C]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            (x.re == y.re || (x.re.is_nan() && y.re.is_nan())) && (x.im == y.im || (x.im.is_nan() && y.im.is_nan()))
        })
}

fn close(g: C, w: C, tol: f64) -> bool {
    (g - w).norm() <= tol * (1.0 + w.norm())
}

fn layouts(rng: &mut SmallRng, n: usize) -> Vec<(Lay, bool)> {
    let mut v = vec![(Lay::ColMajor, false), (Lay::RowMajor, false), (Lay::ColMajor, true)];
    for _ in 0..n {
        v.push((Lay::Random, rng.gen_bool(0.5)));
    }
    v
}

// ------------------------------------------------------------ potrf

/// A well-conditioned Hermitian positive definite matrix `G·G^H/n + I`,
/// exactly Hermitian in `T`.
fn hpd<T: TestEl>(n: usize, rng: &mut SmallRng) -> Tens {
    let g = tens(n, n, |_, _| C::new(0.0, 0.0));
    let g = Tens { v: g.v.iter().map(|_| rand_c::<T>(rng)).collect(), ..g };
    let mut a = tens(n, n, |_, _| C::new(0.0, 0.0));
    for i in 0..n {
        for j in 0..=i {
            let mut s = C::new(0.0, 0.0);
            for l in 0..n {
                s += g.at(&[i, l]) * g.at(&[j, l]).conj();
            }
            let mut x = s / n.max(1) as f64;
            if i == j {
                x = C::new(x.re + 1.0, 0.0);
            }
            let x = rnd::<T>(x);
            a.v[i * n + j] = x;
            a.v[j * n + i] = x.conj();
        }
    }
    a
}

/// `a` with its strict `!lower` triangle replaced by NaN (must not be read).
fn keep_tri(a: &Tens, lower: bool) -> Tens {
    tens(a.ext[0], a.ext[1], |i, j| if in_tri(i, j, lower) || i == j { a.at(&[i, j]) } else { NAN })
}

fn potrf_case<T: TestEl>(rng: &mut SmallRng, n: usize, lower: bool, lay: Lay, trans: bool) {
    let a = hpd::<T>(n, rng);
    let mut input = keep_tri(&a, lower);
    // The diagonal's imaginary part is not read.
    if complex::<T>() {
        for i in 0..n {
            input.v[i * n + i].im = 0.25;
        }
    }
    let mut v = View::<T>::new(&input, lay, trans, rng);
    let gaps = v.p.gaps();
    let what = format!("potrf {} n={n} lower={lower} {lay:?} trans={trans}", T::DTYPE.name());
    unsafe { potrf(&v.op(false), lower) }.unwrap_or_else(|e| panic!("{what}: {:?}", e.error));
    assert!(same_bits(
        &gaps.iter().map(|g| g.1).collect::<Vec<_>>(),
        &v.p.gaps().iter().map(|g| g.1).collect::<Vec<_>>()
    ));
    let r = v.get();
    // The factor: the triangle; the other strict triangle untouched (NaN).
    let f = tens(n, n, |i, j| {
        let x = r.at(&[i, j]);
        if i == j {
            assert!(x.im == 0.0 && x.re > 0.0, "{what}: diagonal ({i},{i}) = {x}");
            x
        } else if in_tri(i, j, lower) {
            x
        } else {
            assert!(x.re.is_nan(), "{what}: wrote ({i},{j}) outside the triangle");
            C::new(0.0, 0.0)
        }
    });
    // Reconstruct: L·L^H or U^H·U.
    for i in 0..n {
        for j in 0..n {
            let mut s = C::new(0.0, 0.0);
            for l in 0..n {
                s += if lower { f.at(&[i, l]) * f.at(&[j, l]).conj() } else { f.at(&[l, i]).conj() * f.at(&[l, j]) };
            }
            let w = a.at(&[i, j]);
            assert!(close(s, w, T::TOL * (n as f64 + 2.0) * 16.0), "{what}: ({i},{j}) reconstructs {s}, want {w}");
        }
    }
}

fn potrf_all<T: TestEl>(seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    for n in [0usize, 1, 2, 3, 5, 17, 40] {
        for lower in [true, false] {
            for (lay, trans) in layouts(&mut rng, 3) {
                potrf_case::<T>(&mut rng, n, lower, lay, trans);
            }
        }
    }
    // Past one diagonal block: the blocked recursion.
    for (n, lower, lay, trans) in [
        (64, true, Lay::ColMajor, false),
        (65, false, Lay::RowMajor, false),
        (100, true, Lay::Random, true),
        (130, false, Lay::Random, false),
        (150, true, Lay::RowMajor, true),
    ] {
        potrf_case::<T>(&mut rng, n, lower, lay, trans);
    }
}

#[test]
fn potrf_f32() {
    potrf_all::<f32>(11);
}
#[test]
fn potrf_f64() {
    potrf_all::<f64>(12);
}
#[test]
fn potrf_c64() {
    potrf_all::<Complex32>(13);
}
#[test]
fn potrf_c128() {
    potrf_all::<C>(14);
}

/// Not positive definite: the error names the failing pivot (1-based),
/// and says whether the matrix was written.
fn potrf_fail<T: TestEl>(seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    for lower in [true, false] {
        // Identity but for a negative (3,3) element: fails at order 3,
        // inside the first diagonal block, so nothing is written.
        let mut a = tens(5, 5, |i, j| if i == j { C::new(1.0, 0.0) } else { C::new(0.0, 0.0) });
        a.v[2 * 5 + 2] = C::new(-1.0, 0.0);
        let mut v = View::<T>::new(&keep_tri(&a, lower), Lay::Random, rng.gen_bool(0.5), &mut rng);
        let before = v.raw();
        let e = unsafe { potrf(&v.op(false), lower) }.unwrap_err();
        assert_eq!(e.error.status(), Status::InvalidArgument);
        assert_eq!(e.error.origin(), "potrf");
        assert_eq!(e.error.message(), "the leading minor of order 3 is not positive definite (pivot -1)");
        assert!(!e.written);
        assert!(same_bits(&before, &v.raw()), "a failure in the first block leaves A untouched");

        // A NaN pivot is not positive either.
        let mut a = hpd::<T>(4, &mut rng);
        a.v[0] = NAN;
        let mut v = View::<T>::new(&keep_tri(&a, lower), Lay::ColMajor, false, &mut rng);
        let e = unsafe { potrf(&v.op(false), lower) }.unwrap_err();
        assert!(e.error.message().starts_with("the leading minor of order 1 is not positive definite"), "{e:?}");
        assert!(!e.written);

        // A late failure (order 141 of 150): the leading block columns
        // have been factored, so A was written.
        let n = 150;
        let mut a = hpd::<T>(n, &mut rng);
        a.v[140 * n + 140] = C::new(-1000.0, 0.0);
        let mut v = View::<T>::new(&keep_tri(&a, lower), Lay::RowMajor, false, &mut rng);
        let e = unsafe { potrf(&v.op(false), lower) }.unwrap_err();
        assert!(e.error.message().starts_with("the leading minor of order 141 is not positive definite"), "{e:?}");
        assert!(e.written);
        // Converts to the plain error.
        let plain: Error = e.into();
        assert_eq!(plain.status(), Status::InvalidArgument);
    }
}

#[test]
fn potrf_not_positive_definite() {
    potrf_fail::<f64>(21);
    potrf_fail::<f32>(22);
    potrf_fail::<Complex32>(23);
    potrf_fail::<C>(24);
}

/// The pivot is printed at the dtype's precision.
#[test]
fn potrf_pivot_message_f32() {
    let mut a = tens(2, 2, |i, j| if i == j { C::new(1.0, 0.0) } else { C::new(0.0, 0.0) });
    a.v[3] = C::new(-0.1, 0.0);
    let mut v = View::<f32>::new(&a, Lay::ColMajor, false, &mut SmallRng::seed_from_u64(26));
    let e = unsafe { potrf(&v.op(false), true) }.unwrap_err();
    assert_eq!(e.error.message(), "the leading minor of order 2 is not positive definite (pivot -0.1)");
}

#[test]
fn potrf_argument_errors() {
    let mut rng = SmallRng::seed_from_u64(25);
    let t = Tens::random::<f64>(&[3, 4], &mut rng);
    let mut p = Placed::<f64>::new(&t, Lay::ColMajor, &mut rng);
    let before = p.buf.clone();
    let e = unsafe { potrf(&p.op(false), true) }.unwrap_err();
    assert_eq!(e.error.status(), Status::ShapeMismatch);
    assert_eq!(e.error.message(), "A is 3x4: it must be square");
    assert!(!e.written && p.buf == before);
    let t = Tens::random::<f64>(&[5], &mut rng);
    let mut p = Placed::<f64>::new(&t, Lay::ColMajor, &mut rng);
    let e = unsafe { potrf(&p.op(false), true) }.unwrap_err();
    assert_eq!((e.error.status(), e.error.message()), (Status::ShapeMismatch, "A is 5: it must be 2-d"));
    // A conj view is read-only.
    let t = hpd::<C>(3, &mut rng);
    let mut p = Placed::<C>::new(&t, Lay::ColMajor, &mut rng);
    let e = unsafe { potrf(&p.op(true), true) }.unwrap_err();
    assert_eq!(e.error.status(), Status::ReadOnly);
    // Integer dtypes are not supported.
    let mut buf = [1i32; 4];
    let (ext, st) = ([2usize, 2], [2isize, 1]);
    let op = Operand { ptr: buf.as_mut_ptr() as *mut u8, dtype: DType::I32, extents: &ext, strides: &st, conj: false };
    assert_eq!(unsafe { potrf(&op, true) }.unwrap_err().error.status(), Status::Unsupported);
    // An output addressing an element twice.
    let mut buf = [1.0f64; 4];
    let st = [1isize, 1];
    let op = Operand { ptr: buf.as_mut_ptr() as *mut u8, dtype: DType::F64, extents: &ext, strides: &st, conj: false };
    assert_eq!(unsafe { potrf(&op, true) }.unwrap_err().error.status(), Status::InvalidArgument);
}

// ------------------------------------------------------------ trsm

/// A well-conditioned triangular matrix (logical), NaN in the strict
/// other triangle, and NaN on the diagonal if `unit`; also the matrix the
/// solve uses (zeros off the triangle, ones on a unit diagonal).
fn tri<T: TestEl>(k: usize, lower: bool, unit: bool, rng: &mut SmallRng) -> (Tens, Tens) {
    let mut stored = tens(k, k, |_, _| NAN);
    let mut used = tens(k, k, |_, _| C::new(0.0, 0.0));
    for i in 0..k {
        for j in 0..k {
            let (s, u) = if i == j {
                if unit {
                    (NAN, C::new(1.0, 0.0))
                } else {
                    let d = rand_c::<T>(rng);
                    let d = rnd::<T>(d / d.norm().max(0.1) * 2.0);
                    (d, d)
                }
            } else if in_tri(i, j, lower) {
                let x = rnd::<T>(rand_c::<T>(rng) / k as f64);
                (x, x)
            } else {
                (NAN, C::new(0.0, 0.0))
            };
            stored.v[i * k + j] = s;
            used.v[i * k + j] = u;
        }
    }
    (stored, used)
}

fn matmul(a: &Tens, b: &Tens) -> Tens {
    let (m, k, n) = (a.ext[0], a.ext[1], b.ext[1]);
    tens(m, n, |i, j| (0..k).fold(C::new(0.0, 0.0), |s, l| s + a.at(&[i, l]) * b.at(&[l, j])))
}

#[allow(clippy::too_many_arguments)]
fn trsm_case<T: TestEl>(
    rng: &mut SmallRng,
    m: usize,
    n: usize,
    left: bool,
    lower: bool,
    unit: bool,
    (la, ta): (Lay, bool),
    lb: Lay,
    alpha: Scalar,
) {
    let k = if left { m } else { n };
    let (mut a_log, used) = tri::<T>(k, lower, unit, rng);
    let alpha_c = C::new(alpha.re, alpha.im);
    if alpha_c == C::new(0.0, 0.0) {
        a_log = tens(k, k, |_, _| NAN); // must not be read at all
    }
    let conj = complex::<T>() && rng.gen_bool(0.5);
    // A conj view shows conj(stored): store the conjugate.
    let mut a = View::<T>::new(&if conj { a_log.conj() } else { a_log.clone() }, la, ta, rng);
    let b0 = Tens::random::<T>(&[m, n], rng);
    let mut b = View::<T>::new(&b0, lb, false, rng);
    let gaps = b.p.gaps();
    let what = format!(
        "trsm {} {m}x{n} left={left} lower={lower} unit={unit} A {la:?} trans={ta} conj={conj} B {lb:?} alpha={alpha:?}",
        T::DTYPE.name()
    );
    unsafe { trsm(&b.op(false), &a.op(conj), left, lower, unit, alpha) }.unwrap_or_else(|e| panic!("{what}: {e:?}"));
    assert!(same_bits(
        &gaps.iter().map(|g| g.1).collect::<Vec<_>>(),
        &b.p.gaps().iter().map(|g| g.1).collect::<Vec<_>>()
    ));
    let x = b.get();
    // Multiply back: op(A)·X or X·op(A) must give alpha·B.
    let back = if left { matmul(&used, &x) } else { matmul(&x, &used) };
    for i in 0..m {
        for j in 0..n {
            let (g, w) = (back.at(&[i, j]), alpha_c * b0.at(&[i, j]));
            assert!(close(g, w, T::TOL * (k as f64 + 2.0) * 64.0), "{what}: ({i},{j}) gives {g}, want {w}");
        }
    }
}

fn trsm_all<T: TestEl>(seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let shapes = [(0, 3), (3, 0), (1, 1), (4, 7), (7, 4), (33, 20)];
    for &(m, n) in &shapes {
        for left in [true, false] {
            for lower in [true, false] {
                for unit in [false, true] {
                    for (la, ta) in layouts(&mut rng, 1) {
                        let lb = [Lay::ColMajor, Lay::RowMajor, Lay::Random][rng.gen_range(0..3)];
                        let alpha = match rng.gen_range(0..4) {
                            0 => Scalar::real(1.0),
                            1 => Scalar::real(0.0),
                            _ => rand_scalar::<T>(&mut rng),
                        };
                        trsm_case::<T>(&mut rng, m, n, left, lower, unit, (la, ta), lb, alpha);
                    }
                }
            }
        }
    }
    // Larger: faer's recursive blocking.
    for (m, n, left, lower, unit) in
        [(70, 65, true, true, false), (65, 70, false, false, true), (90, 40, true, false, false)]
    {
        let one = Scalar::real(1.0);
        trsm_case::<T>(&mut rng, m, n, left, lower, unit, (Lay::Random, true), Lay::Random, one);
        trsm_case::<T>(&mut rng, m, n, left, lower, unit, (Lay::ColMajor, false), Lay::RowMajor, one);
    }
}

#[test]
fn trsm_f32() {
    trsm_all::<f32>(31);
}
#[test]
fn trsm_f64() {
    trsm_all::<f64>(32);
}
#[test]
fn trsm_c64() {
    trsm_all::<Complex32>(33);
}
#[test]
fn trsm_c128() {
    trsm_all::<C>(34);
}

/// The tiled-Cholesky use: `A_ik <- A_ik·L_kk^{-H}`, with `L_kk` the
/// factor `potrf` left in a tile: a right solve with the adjoint view
/// (transposed strides, conj flag) of the lower factor, which is upper.
#[test]
fn trsm_with_potrf_factor() {
    let mut rng = SmallRng::seed_from_u64(35);
    let n = 24;
    let a = hpd::<C>(n, &mut rng);
    let mut l = View::<C>::new(&keep_tri(&a, true), Lay::ColMajor, false, &mut rng);
    unsafe { potrf(&l.op(false), true) }.unwrap();
    let b0 = Tens::random::<C>(&[10, n], &mut rng);
    let mut b = View::<C>::new(&b0, Lay::ColMajor, false, &mut rng);
    let lh_ext = [n, n];
    let lh_st = [l.st[1], l.st[0]];
    let lh = Operand { extents: &lh_ext, strides: &lh_st, ..l.op(true) };
    unsafe { trsm(&b.op(false), &lh, false, false, false, Scalar::real(1.0)) }.unwrap();
    // X·L^H = B0, so X·L^H·L... check X·L^H against B0 directly.
    let lg = l.get();
    let lf = tens(n, n, |i, j| if i >= j { lg.at(&[i, j]) } else { C::new(0.0, 0.0) });
    let lh_t = tens(n, n, |i, j| lf.at(&[j, i]).conj());
    let back = matmul(&b.get(), &lh_t);
    for (g, w) in back.v.iter().zip(&b0.v) {
        assert!(close(*g, *w, 1e-12), "{g} vs {w}");
    }
}

#[test]
fn trsm_argument_errors() {
    let mut rng = SmallRng::seed_from_u64(36);
    let mut a = Placed::<f64>::new(&Tens::random::<f64>(&[3, 3], &mut rng), Lay::ColMajor, &mut rng);
    let mut b = Placed::<f64>::new(&Tens::random::<f64>(&[4, 5], &mut rng), Lay::ColMajor, &mut rng);
    let before = b.buf.clone();
    let one = Scalar::real(1.0);
    let e = unsafe { trsm(&b.op(false), &a.op(false), true, true, false, one) }.unwrap_err();
    assert_eq!(e.status(), Status::ShapeMismatch);
    assert_eq!(e.message(), "A is 3x3, B is 4x5: A must be square and match B's row extent (4x4) for a left solve");
    let e = unsafe { trsm(&b.op(false), &a.op(false), false, true, false, one) }.unwrap_err();
    assert_eq!(e.message(), "A is 3x3, B is 4x5: A must be square and match B's column extent (5x5) for a right solve");
    let mut a2 = Placed::<f64>::new(&Tens::random::<f64>(&[4, 3], &mut rng), Lay::ColMajor, &mut rng);
    let e = unsafe { trsm(&b.op(false), &a2.op(false), true, true, false, one) }.unwrap_err();
    assert!(e.message().starts_with("A is 4x3, B is 4x5"), "{e:?}");
    let mut a4 = Placed::<f64>::new(&Tens::random::<f64>(&[4, 4], &mut rng), Lay::ColMajor, &mut rng);
    let e = unsafe { trsm(&b.op(false), &a4.op(false), true, true, false, Scalar::complex(1.0, 1.0)) }.unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    let mut af = Placed::<f32>::new(&Tens::random::<f32>(&[4, 4], &mut rng), Lay::ColMajor, &mut rng);
    let e = unsafe { trsm(&b.op(false), &af.op(false), true, true, false, one) }.unwrap_err();
    assert_eq!((e.status(), e.message()), (Status::DtypeMismatch, "B is f64 but A is f32"));
    assert_eq!(b.buf, before, "errors write nothing");
    // B must be writable.
    let mut bc = Placed::<C>::new(&Tens::random::<C>(&[2, 2], &mut rng), Lay::ColMajor, &mut rng);
    let mut ac = Placed::<C>::new(&Tens::random::<C>(&[2, 2], &mut rng), Lay::ColMajor, &mut rng);
    let e = unsafe { trsm(&bc.op(true), &ac.op(false), true, true, false, one) }.unwrap_err();
    assert_eq!(e.status(), Status::ReadOnly);
}

// ------------------------------------------------------------ syrk

#[allow(clippy::too_many_arguments)]
fn syrk_case<T: TestEl>(
    rng: &mut SmallRng,
    n: usize,
    k: usize,
    lower: bool,
    (la, ta): (Lay, bool),
    lc: Lay,
    alpha: f64,
    beta: Option<f64>,
) {
    let a_log = if alpha == 0.0 { tens(n, k, |_, _| NAN) } else { Tens::random::<T>(&[n, k], rng) };
    let conj = complex::<T>() && rng.gen_bool(0.5);
    let mut a = View::<T>::new(&if conj { a_log.conj() } else { a_log.clone() }, la, ta, rng);
    let reads_c = beta.is_some_and(|b| b != 0.0);
    // C: its triangle random (NaN if it must not be read), with an
    // imaginary part on the diagonal that must not be read; NaN in the
    // other strict triangle.
    let c0 = tens(n, n, |i, j| {
        if !in_tri(i, j, lower) || !reads_c {
            NAN
        } else if i == j && complex::<T>() {
            rnd::<T>(C::new(rng.gen_range(-1.0..1.0), 0.5))
        } else {
            rand_c::<T>(rng)
        }
    });
    let mut c = View::<T>::new(&c0, lc, false, rng);
    let before = c.get();
    let gaps = c.p.gaps();
    let what = format!(
        "syrk {} n={n} k={k} lower={lower} A {la:?} trans={ta} conj={conj} C {lc:?} alpha={alpha} beta={beta:?}",
        T::DTYPE.name()
    );
    let (sa, sb) = (Scalar::real(alpha), beta.map(Scalar::real));
    unsafe { syrk(&c.op(false), &a.op(conj), sa, sb, lower) }.unwrap_or_else(|e| panic!("{what}: {e:?}"));
    assert!(same_bits(
        &gaps.iter().map(|g| g.1).collect::<Vec<_>>(),
        &c.p.gaps().iter().map(|g| g.1).collect::<Vec<_>>()
    ));
    let got = c.get();
    let noop = (alpha == 0.0 || k == 0) && beta == Some(1.0);
    for i in 0..n {
        for j in 0..n {
            let g = got.at(&[i, j]);
            if !in_tri(i, j, lower) {
                let (w, o) = (g, before.at(&[i, j]));
                assert!(
                    w.re.to_bits() == o.re.to_bits() && w.im.to_bits() == o.im.to_bits(),
                    "{what}: wrote ({i},{j}) outside the triangle: {w}"
                );
                continue;
            }
            let want = if noop {
                c0.at(&[i, j])
            } else {
                let mut s = C::new(0.0, 0.0);
                if alpha != 0.0 {
                    for l in 0..k {
                        s += a_log.at(&[i, l]) * a_log.at(&[j, l]).conj();
                    }
                }
                let mut w = alpha * s;
                if let Some(b) = beta.filter(|&b| b != 0.0) {
                    let old = c0.at(&[i, j]);
                    w += b * if i == j { C::new(old.re, 0.0) } else { old };
                }
                if i == j {
                    w.im = 0.0;
                }
                w
            };
            if i == j && !noop {
                assert!(g.im == 0.0, "{what}: diagonal ({i},{i}) = {g} is not real");
            }
            assert!(close(g, want, T::TOL * (k as f64 + 2.0) * 16.0), "{what}: ({i},{j}) = {g}, want {want}");
        }
    }
}

fn syrk_all<T: TestEl>(seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let shapes = [(0, 3), (3, 0), (1, 1), (5, 3), (3, 8), (40, 17)];
    for &(n, k) in &shapes {
        for lower in [true, false] {
            for (la, ta) in layouts(&mut rng, 2) {
                let lc = [Lay::ColMajor, Lay::RowMajor, Lay::Random][rng.gen_range(0..3)];
                let alpha = [1.0, -1.0, 0.0, rng.gen_range(-2.0..2.0)][rng.gen_range(0..4)];
                let beta = [None, Some(0.0), Some(1.0), Some(rng.gen_range(-2.0..2.0))][rng.gen_range(0..4)];
                syrk_case::<T>(&mut rng, n, k, lower, (la, ta), lc, alpha, beta);
            }
        }
    }
    for (n, k, lower) in [(70, 70, true), (66, 90, false)] {
        syrk_case::<T>(&mut rng, n, k, lower, (Lay::Random, true), Lay::Random, -1.0, Some(1.0));
        syrk_case::<T>(&mut rng, n, k, lower, (Lay::ColMajor, false), Lay::ColMajor, 0.5, None);
    }
}

#[test]
fn syrk_f32() {
    syrk_all::<f32>(41);
}
#[test]
fn syrk_f64() {
    syrk_all::<f64>(42);
}
#[test]
fn syrk_c64() {
    syrk_all::<Complex32>(43);
}
#[test]
fn syrk_c128() {
    syrk_all::<C>(44);
}

/// A zero stride in A (every column the same) is a valid input.
#[test]
fn syrk_zero_stride_input() {
    let mut rng = SmallRng::seed_from_u64(45);
    let col = Tens::random::<f64>(&[4, 1], &mut rng);
    let mut buf: Vec<f64> = col.v.iter().map(|z| z.re).collect();
    let (ext, st) = ([4usize, 3], [1isize, 0]);
    let a = Operand { ptr: buf.as_mut_ptr() as *mut u8, dtype: DType::F64, extents: &ext, strides: &st, conj: false };
    let mut c = Placed::<f64>::new(&Tens::filled(&[4, 4], NAN), Lay::ColMajor, &mut rng);
    unsafe { syrk(&c.op(false), &a, Scalar::real(1.0), None, true) }.unwrap();
    let got = c.get();
    for i in 0..4 {
        for j in 0..=i {
            let w = 3.0 * col.v[i].re * col.v[j].re;
            assert!((got.at(&[i, j]).re - w).abs() < 1e-14, "({i},{j})");
        }
    }
}

#[test]
fn syrk_argument_errors() {
    let mut rng = SmallRng::seed_from_u64(46);
    let mut a = Placed::<C>::new(&Tens::random::<C>(&[3, 5], &mut rng), Lay::ColMajor, &mut rng);
    let mut c = Placed::<C>::new(&Tens::random::<C>(&[3, 4], &mut rng), Lay::ColMajor, &mut rng);
    let before = c.buf.clone();
    let one = Scalar::real(1.0);
    let e = unsafe { syrk(&c.op(false), &a.op(false), one, None, true) }.unwrap_err();
    assert_eq!(e.status(), Status::ShapeMismatch);
    assert_eq!(e.message(), "C is 3x4, A is 3x5: C must be square with A's row extent (3x3)");
    let mut c4 = Placed::<C>::new(&Tens::random::<C>(&[4, 4], &mut rng), Lay::ColMajor, &mut rng);
    let e = unsafe { syrk(&c4.op(false), &a.op(false), one, None, true) }.unwrap_err();
    assert_eq!(e.message(), "C is 4x4, A is 3x5: C must be square with A's row extent (3x3)");
    let mut c3 = Placed::<C>::new(&Tens::random::<C>(&[3, 3], &mut rng), Lay::ColMajor, &mut rng);
    let before3 = c3.buf.clone();
    let e = unsafe { syrk(&c3.op(false), &a.op(false), Scalar::complex(1.0, 0.5), None, true) }.unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e.message().starts_with("alpha = 1+0.5i must be real"), "{e:?}");
    let e = unsafe { syrk(&c3.op(false), &a.op(false), one, Some(Scalar::complex(0.0, -2.0)), true) }.unwrap_err();
    assert!(e.message().starts_with("beta = 0-2i must be real"), "{e:?}");
    let e = unsafe { syrk(&c3.op(true), &a.op(false), one, None, true) }.unwrap_err();
    assert_eq!(e.status(), Status::ReadOnly);
    let mut a1 = Placed::<C>::new(&Tens::random::<C>(&[3], &mut rng), Lay::ColMajor, &mut rng);
    let e = unsafe { syrk(&c3.op(false), &a1.op(false), one, None, true) }.unwrap_err();
    assert_eq!((e.status(), e.message()), (Status::ShapeMismatch, "A is 3: it must be 2-d"));
    assert!(c.buf == before && c3.buf == before3, "errors write nothing");
}

/// Negative strides (reversed rows and/or columns, padded) on every
/// operand, deterministically (the random layouts above also draw some).
#[test]
fn negative_strides() {
    let mut rng = SmallRng::seed_from_u64(52);
    // potrf across the first diagonal block, both triangles.
    for (lower, st) in [(true, [-1isize, -73]), (false, [-72isize, 1]), (true, [73isize, -1])] {
        let n = 70;
        let a = hpd::<C>(n, &mut rng);
        let mut v = View::<C>::with_strides(&keep_tri(&a, lower), st);
        unsafe { potrf(&v.op(false), lower) }.unwrap();
        let r = v.get();
        let f = tens(n, n, |i, j| if in_tri(i, j, lower) { r.at(&[i, j]) } else { C::new(0.0, 0.0) });
        for i in 0..n {
            for j in 0..n {
                let mut s = C::new(0.0, 0.0);
                for l in 0..n {
                    s +=
                        if lower { f.at(&[i, l]) * f.at(&[j, l]).conj() } else { f.at(&[l, i]).conj() * f.at(&[l, j]) };
                }
                assert!(close(s, a.at(&[i, j]), 1e-12), "potrf strides {st:?}: ({i},{j})");
            }
        }
    }
    // trsm: B and A reversed.
    let (m, n) = (9, 6);
    for left in [true, false] {
        let k = if left { m } else { n };
        let (a_log, used) = tri::<C>(k, true, false, &mut rng);
        let mut a = View::<C>::with_strides(&a_log, [k as isize + 3, -1]);
        let b0 = Tens::random::<C>(&[m, n], &mut rng);
        let mut b = View::<C>::with_strides(&b0, [-1, -(m as isize + 1)]);
        unsafe { trsm(&b.op(false), &a.op(false), left, true, false, Scalar::real(1.0)) }.unwrap();
        let x = b.get();
        let back = if left { matmul(&used, &x) } else { matmul(&x, &used) };
        for (g, w) in back.v.iter().zip(&b0.v) {
            assert!(close(*g, *w, 1e-12), "trsm left={left}: {g} vs {w}");
        }
    }
    // syrk: C and A reversed.
    let (n, k) = (7, 5);
    let a_log = Tens::random::<C>(&[n, k], &mut rng);
    let mut a = View::<C>::with_strides(&a_log, [1, -(n as isize)]);
    let mut c = View::<C>::with_strides(&tens(n, n, |_, _| NAN), [-(n as isize + 1), -1]);
    unsafe { syrk(&c.op(false), &a.op(false), Scalar::real(2.0), None, false) }.unwrap();
    let got = c.get();
    for i in 0..n {
        for j in 0..n {
            let g = got.at(&[i, j]);
            if i > j {
                assert!(g.re.is_nan());
                continue;
            }
            let s = (0..k).fold(C::new(0.0, 0.0), |s, l| s + a_log.at(&[i, l]) * a_log.at(&[j, l]).conj());
            let mut w = 2.0 * s;
            if i == j {
                w.im = 0.0;
            }
            assert!(close(g, w, 1e-13), "syrk ({i},{j}): {g} vs {w}");
        }
    }
}

/// Inside a 2-thread rayon pool and above the parallel threshold, the
/// kernels run faer's parallel paths; results as sequential.
#[test]
fn tiles_parallel_in_pool() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    pool.install(|| {
        assert!(work::<f64>(260, 260, 260) / 6 >= PAR_MIN_FLOPS);
        assert!(work::<f64>(150, 150, 150) / 2 >= PAR_MIN_FLOPS);
        let mut rng = SmallRng::seed_from_u64(51);
        potrf_case::<f64>(&mut rng, 260, true, Lay::ColMajor, false);
        trsm_case::<f64>(
            &mut rng,
            150,
            150,
            false,
            false,
            false,
            (Lay::ColMajor, true),
            Lay::ColMajor,
            Scalar::real(-1.0),
        );
        syrk_case::<f64>(&mut rng, 150, 150, true, (Lay::ColMajor, false), Lay::RowMajor, -1.0, Some(1.0));
    });
}
