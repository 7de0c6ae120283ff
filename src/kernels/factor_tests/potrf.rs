//! potrf against reconstructing `L·L^H`, its failures and its argument errors.

use num_complex::{Complex32, Complex64 as C};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::common::*;
use crate::dtype::DType;
use crate::error::{Error, Status};
use crate::kernels::operand::Operand;
use crate::kernels::potrf::potrf;
use crate::kernels::test_util::{complex, Lay, Placed, Tens, TestEl};

pub(super) fn potrf_case<T: TestEl>(rng: &mut SmallRng, n: usize, lower: bool, lay: Lay, trans: bool) {
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
