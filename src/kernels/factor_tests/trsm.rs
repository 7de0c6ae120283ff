//! trsm against multiplying the solution back, and its argument errors.

use num_complex::{Complex32, Complex64 as C};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::common::*;
use crate::dtype::Scalar;
use crate::error::Status;
use crate::kernels::operand::Operand;
use crate::kernels::potrf::potrf;
use crate::kernels::test_util::{complex, rand_scalar, Lay, Placed, Tens, TestEl};
use crate::kernels::trsm::trsm;

#[allow(clippy::too_many_arguments)]
pub(super) fn trsm_case<T: TestEl>(
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
