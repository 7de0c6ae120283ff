//! syrk against recomputing the rank-k update, and its argument errors.

use num_complex::{Complex32, Complex64 as C};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::common::*;
use crate::dtype::{DType, Scalar};
use crate::error::Status;
use crate::kernels::operand::Operand;
use crate::kernels::syrk::syrk;
use crate::kernels::test_util::{complex, Lay, Placed, Tens, TestEl};

#[allow(clippy::too_many_arguments)]
pub(super) fn syrk_case<T: TestEl>(
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
    for (n, k, lower) in [(70, 70, true), (66, 90, false), (150, 40, true), (131, 33, false)] {
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
