//! The three kernels on negative strides, and on the parallel paths inside a
//! rayon pool.

use num_complex::Complex64 as C;
use rand::rngs::SmallRng;
use rand::SeedableRng;

use super::common::*;
use super::potrf::potrf_case;
use super::syrk::syrk_case;
use super::trsm::trsm_case;
use crate::dtype::Scalar;
use crate::kernels::par::{work, PAR_MIN_FLOPS};
use crate::kernels::potrf::potrf;
use crate::kernels::syrk::syrk;
use crate::kernels::test_util::{Lay, Tens};
use crate::kernels::trsm::trsm;

/// Negative strides (reversed rows and/or columns, padded) on every
/// operand, deterministically (the random layouts of the other tests also draw some).
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
