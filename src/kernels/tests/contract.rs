//! Contraction: random patterns per dtype, special patterns, errors, and
//! the shape helpers.

use num_complex::{Complex32, Complex64 as C};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::dtype::Scalar;
use crate::error::Status;
use crate::kernels::check::{contract_shape, gemm_shape, sum_shape};
use crate::kernels::contract::contract;
use crate::kernels::test_util::*;

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

pub(super) fn contract_case<T: TestEl>(rng: &mut SmallRng, ra: usize, rb: usize, np: usize, max_ext: usize) {
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
