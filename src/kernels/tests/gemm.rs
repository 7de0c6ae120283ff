//! gemm: every dtype and layout, parallel paths, views, zero strides, errors.

use num_complex::{Complex32, Complex64 as C};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::contract::contract_case;
use crate::dtype::{DType, Element, Scalar};
use crate::error::Status;
use crate::kernels::gemm::gemm;
use crate::kernels::operand::Operand;
use crate::kernels::par::{par_for, work, PAR_MIN_FLOPS};
use crate::kernels::test_util::*;

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
        // Each side of the direct loop's limits (SMALL_MAX_FLOPS: 4x4x4 real,
        // 3x3x3 complex).
        (4, 4, 4),
        (4, 4, 5),
        (3, 3, 3),
        (3, 3, 4),
        // The direct loop's row and column forms (C 1-4 wide along its unit
        // stride), and their fallback: thin and flat products within the limits.
        (2, 4, 8),
        (4, 2, 8),
        (1, 4, 16),
        (4, 1, 16),
        (2, 3, 10),
        (1, 3, 9),
        (3, 1, 9),
        (2, 2, 6),
        (1, 6, 5),
        (0, 3, 2),
        (3, 0, 2),
        (3, 4, 0),
        (17, 13, 11),
        // faer's small-product kernels (nano-gemm, up to 16x16x16), whose
        // AVX-512 ones run where the CPU has it: whole vectors of each
        // dtype, partial ones, and the largest size they take.
        (8, 8, 8),
        (9, 7, 12),
        (12, 16, 5),
        (16, 16, 16),
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

/// The parallel product's split into blocks of C: uneven thread counts
/// (3: one block of a third, then a 2-thread block split again), skinny
/// products whose contiguous axis is too short to split (the other one is
/// split), and both orders of C.
#[test]
fn gemm_split_shapes_in_pool() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    pool.install(|| {
        let mut rng = SmallRng::seed_from_u64(7);
        for lc in [Lay::ColMajor, Lay::RowMajor] {
            for (m, n, k) in [(300, 9, 600), (9, 300, 600), (131, 133, 120), (17, 300, 300)] {
                assert!(work::<f64>(m, n, k) >= PAR_MIN_FLOPS);
                gemm_case::<f64>(&mut rng, m, n, k, Some((Lay::ColMajor, Lay::RowMajor, lc)));
                gemm_case::<C>(&mut rng, m, n, k / 4, Some((Lay::RowMajor, Lay::ColMajor, lc)));
            }
        }
    });
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
