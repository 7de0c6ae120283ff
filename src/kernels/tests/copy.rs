//! Materialising permute and conj, every dtype.

use num_complex::{Complex32, Complex64 as C};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::dtype::Element;
use crate::error::Status;
use crate::kernels::copy::{conj_copy, permute_copy};
use crate::kernels::test_util::*;

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
