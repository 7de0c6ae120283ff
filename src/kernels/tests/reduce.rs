//! sum, dot and norm2: every dtype, and the accuracy of pairwise summation.

use num_complex::{Complex32, Complex64 as C};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::dtype::{DType, Element};
use crate::error::Status;
use crate::kernels::check::sum_shape;
use crate::kernels::float::RealFloat;
use crate::kernels::operand::Operand;
use crate::kernels::reduce::{dot, norm2, sum};
use crate::kernels::test_util::*;

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
