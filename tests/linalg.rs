//! Dense linear algebra through the runtime (SPEC §2.5): the gemm family on
//! async operands (views included), contraction, materialising permute and
//! conj, reductions into 0-d tensors, async scalars, output construction, and
//! the backend walk with and without a system BLAS. Every result is checked
//! against an independent naive reference.

mod common;

use common::numeric::*;
use common::LONG;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tensorasync::*;

fn rt() -> Runtime {
    Runtime::new(2).unwrap()
}

#[test]
fn gemm_family_on_views_for_every_dtype() {
    let rt = rt();
    let mut rng = SmallRng::seed_from_u64(1);
    let (m, k, n) = (5, 3, 4);
    for dtype in DTYPES {
        let cx = dtype.is_complex();
        // A given as the transpose view of a k x m column-major tensor; B as
        // the conj view of a k x n tensor; C a strided slice of a bigger one.
        let at_vals = random(&mut rng, k * m, cx);
        let b_vals = random(&mut rng, k * n, cx);
        let at = make(dtype, &[k, m], Order::ColMajor, &at_vals);
        let a = at.transpose().unwrap();
        let a_vals = transpose(&at_vals, k, m);
        let bt = make(dtype, &[k, n], Order::RowMajor, &b_vals);
        let b = bt.conj().unwrap();
        let b_conj: Vec<C> = b_vals.iter().map(|z| z.conj()).collect();
        let big_vals = random(&mut rng, (m + 2) * (2 * n), cx);
        let big = make(dtype, &[m + 2, 2 * n], Order::RowMajor, &big_vals);
        let c = big
            .slice(&[SliceSpec::range(1, m + 1), SliceSpec { start: 0, stop: 2 * n as isize, step: 2, drop: false }])
            .unwrap();
        let big_vals = read(&big); // as stored (rounded for single precision)
        let c_old: Vec<C> =
            (0..m).flat_map(|i| (0..n).map(move |j| (i, j))).map(|(i, j)| big_vals[(i + 1) * 2 * n + 2 * j]).collect();
        let (alpha, beta) =
            if cx { (C::new(0.5, -1.0), C::new(2.0, 0.25)) } else { (C::new(1.5, 0.0), C::new(-0.5, 0.0)) };
        ops::gemm(&c, Scalar::complex(alpha.re, alpha.im), &a, &b, Scalar::complex(beta.re, beta.im), Submit::on(&rt))
            .unwrap();
        let ab = matmul(&a_vals, &b_conj, m, k, n);
        let want: Vec<C> = ab.iter().zip(&c_old).map(|(p, o)| alpha * p + beta * o).collect();
        assert_close(&read(&c), &want, dtype, &format!("gemm {dtype:?}"));
        // The rest of the big tensor is untouched (write-through only where C is).
        let after = read(&big);
        for i in 0..m + 2 {
            for j in 0..2 * n {
                if !(1..=m).contains(&i) || j % 2 == 1 {
                    assert_eq!(after[i * 2 * n + j], big_vals[i * 2 * n + j]);
                }
            }
        }
        // add_product: C += alpha A B.
        let c2 = make(dtype, &[m, n], Order::ColMajor, &c_old);
        ops::add_product(&c2, Scalar::complex(alpha.re, alpha.im), &a, &b, Submit::on(&rt)).unwrap();
        let want2: Vec<C> = ab.iter().zip(&c_old).map(|(p, o)| alpha * p + o).collect();
        assert_close(&read(&c2), &want2, dtype, &format!("add_product {dtype:?}"));
        // assign_product into an unconstructed tensor: constructed with the product's shape.
        let u = Tensor::unconstructed(dtype, Domain::Host).unwrap();
        ops::assign_product(&u, Scalar::complex(alpha.re, alpha.im), &a, &b, Submit::on(&rt)).unwrap();
        assert_eq!(u.extents().unwrap().as_slice(), &[m, n], "the shape is known at once");
        let want3: Vec<C> = ab.iter().map(|p| alpha * p).collect();
        assert_close(&read(&u), &want3, dtype, &format!("assign_product {dtype:?}"));
    }
}

#[test]
fn outputs_are_constructed_replaced_or_rejected() {
    let rt = rt();
    let a = make(DType::F64, &[2, 3], Order::RowMajor, &random(&mut SmallRng::seed_from_u64(2), 6, false));
    let b = make(DType::F64, &[3, 2], Order::RowMajor, &random(&mut SmallRng::seed_from_u64(3), 6, false));
    // add_product and gemm need a constructed output of the right shape.
    let u = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
    assert_eq!(
        ops::add_product(&u, Scalar::real(1.0), &a, &b, Submit::on(&rt)).unwrap_err().status(),
        Status::Unconstructed
    );
    let wrong = Tensor::zeros(DType::F64, &[3, 3], Order::RowMajor, Domain::Host).unwrap();
    let e = ops::gemm(&wrong, Scalar::real(1.0), &a, &b, Scalar::real(0.0), Submit::on(&rt)).unwrap_err();
    assert_eq!(e.status(), Status::ShapeMismatch);
    assert!(e.message().contains("[3, 3]") && e.message().contains("[2, 2]"), "names the shapes: {}", e.message());
    // assign_product replaces the storage of an output of another shape ...
    let r = Tensor::zeros(DType::F64, &[5], Order::RowMajor, Domain::Host).unwrap();
    ops::fill(&r, Scalar::real(7.0), Submit::on(&rt)).unwrap();
    let (old_reader, old) = f64s_reader(&r);
    ops::assign_product(&r, Scalar::real(1.0), &a, &b, Submit::on(&rt)).unwrap();
    assert_eq!(r.extents().unwrap().as_slice(), &[2, 2]);
    old_reader.wait(LONG).unwrap();
    assert_eq!(&old[..], &[7.0; 5], "the earlier read saw the old storage");
    // ... but not while it has views.
    let v = r.slice(&[SliceSpec::range(0, 1), SliceSpec::all(2)]).unwrap();
    let e = ops::assign_product(&r, Scalar::real(1.0), &b, &a, Submit::on(&rt)).unwrap_err();
    assert_eq!(e.status(), Status::ShapeMismatch);
    drop(v);
    ops::assign_product(&r, Scalar::real(1.0), &b, &a, Submit::on(&rt)).unwrap();
    assert_eq!(r.extents().unwrap().as_slice(), &[3, 3]);
    // Mismatched inner extents name the shapes.
    let e = ops::assign_product(&u, Scalar::real(1.0), &a, &a, Submit::on(&rt)).unwrap_err();
    assert_eq!(e.status(), Status::ShapeMismatch);
    assert!(e.message().contains("2x3"), "{}", e.message());
    // Integer dtypes are not supported by the dense kernels.
    let i = Tensor::zeros(DType::I32, &[2, 2], Order::RowMajor, Domain::Host).unwrap();
    let j = Tensor::zeros(DType::I32, &[2, 2], Order::RowMajor, Domain::Host).unwrap();
    let k = Tensor::zeros(DType::I32, &[2, 2], Order::RowMajor, Domain::Host).unwrap();
    assert_eq!(
        ops::gemm(&i, Scalar::real(1.0), &j, &k, Scalar::real(0.0), Submit::on(&rt)).unwrap_err().status(),
        Status::Unsupported
    );
}

/// A read of `t` submitted now (it must see the contents as they were), and
/// the buffer it lands in: read the buffer only after the event completes.
fn f64s_reader(t: &Tensor) -> (Event, Box<[f64]>) {
    let n: usize = t.extents().unwrap().iter().product();
    let mut buf = vec![0.0; n].into_boxed_slice();
    // The boxed slice's heap block does not move when the box does, and the
    // caller keeps it until the event completes.
    let e = unsafe { ops::copy_out(t, buf.as_mut_ptr().cast(), n, None, Submit::default()) };
    (e.unwrap(), buf)
}

#[test]
fn async_scalars_are_ordered_like_any_operand() {
    let rt = rt();
    let alpha = Tensor::zeros(DType::F64, &[], Order::RowMajor, Domain::Host).unwrap();
    let beta = Tensor::zeros(DType::F64, &[], Order::RowMajor, Domain::Host).unwrap();
    let a = make(DType::F64, &[2, 2], Order::RowMajor, &[1.0, 2.0, 3.0, 4.0].map(|x| C::new(x, 0.0)));
    let i2 = make(DType::F64, &[2, 2], Order::RowMajor, &[1.0, 0.0, 0.0, 1.0].map(|x| C::new(x, 0.0)));
    let c = make(DType::F64, &[2, 2], Order::RowMajor, &[1.0; 4].map(|x| C::new(x, 0.0)));
    let gate = common::Gate::default();
    // alpha is written by a task that is held back; gemm must wait for it.
    ops::kernel("held", &[(&alpha, Mode::Update)], common::blocker(&gate), Submit::on(&rt)).unwrap();
    ops::fill(&alpha, Scalar::real(10.0), Submit::on(&rt)).unwrap();
    ops::fill(&beta, Scalar::real(-1.0), Submit::on(&rt)).unwrap();
    ops::gemm(&c, &alpha, &a, &i2, &beta, Submit::on(&rt)).unwrap();
    // A later write of alpha must not be seen by the gemm.
    ops::fill(&alpha, Scalar::real(1000.0), Submit::on(&rt)).unwrap();
    gate.open();
    let got: Vec<f64> = read(&c).iter().map(|z| z.re).collect();
    assert_eq!(got, vec![9.0, 19.0, 29.0, 39.0]);
    // A scalar tensor must be 0-d and of the operation's dtype.
    let vec1 = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Domain::Host).unwrap();
    assert_eq!(ops::gemm(&c, &vec1, &a, &i2, &beta, Submit::on(&rt)).unwrap_err().status(), Status::ShapeMismatch);
    let f32s = Tensor::zeros(DType::F32, &[], Order::RowMajor, Domain::Host).unwrap();
    assert_eq!(ops::gemm(&c, &f32s, &a, &i2, &beta, Submit::on(&rt)).unwrap_err().status(), Status::DtypeMismatch);
    // A poisoned scalar poisons the result with its error.
    ops::kernel(
        "bad_alpha",
        &[(&alpha, Mode::Update)],
        KernelFn::new(|_| Err(KernelFailure { code: 1, message: None })),
        Submit::on(&rt),
    )
    .unwrap();
    ops::gemm(&c, &alpha, &a, &i2, &beta, Submit::on(&rt)).unwrap();
    assert_eq!(c.wait(LONG).unwrap_err().origin(), "bad_alpha");
}

/// Naive einsum for contraction references: C[free_a..., free_b...] = sum over pairs.
fn tensordot(a: &[C], ae: &[usize], b: &[C], be: &[usize], aa: &[usize], ba: &[usize]) -> (Vec<C>, Vec<usize>) {
    let fa: Vec<usize> = (0..ae.len()).filter(|x| !aa.contains(x)).collect();
    let fb: Vec<usize> = (0..be.len()).filter(|x| !ba.contains(x)).collect();
    let ce: Vec<usize> = fa.iter().map(|&x| ae[x]).chain(fb.iter().map(|&x| be[x])).collect();
    let ke: Vec<usize> = aa.iter().map(|&x| ae[x]).collect();
    let count = |e: &[usize]| e.iter().product::<usize>();
    let unravel = |mut i: usize, e: &[usize]| -> Vec<usize> {
        let mut idx = vec![0; e.len()];
        for d in (0..e.len()).rev() {
            idx[d] = i % e[d];
            i /= e[d];
        }
        idx
    };
    let ravel = |idx: &[usize], e: &[usize]| idx.iter().zip(e).fold(0, |acc, (i, n)| acc * n + i);
    let mut c = vec![C::new(0.0, 0.0); count(&ce)];
    for (ci, cv) in c.iter_mut().enumerate() {
        let cidx = unravel(ci, &ce);
        for ki in 0..count(&ke) {
            let kidx = unravel(ki, &ke);
            let mut ia = vec![0; ae.len()];
            let mut ib = vec![0; be.len()];
            for (p, &x) in fa.iter().enumerate() {
                ia[x] = cidx[p];
            }
            for (p, &x) in fb.iter().enumerate() {
                ib[x] = cidx[fa.len() + p];
            }
            for (p, (&x, &y)) in aa.iter().zip(ba).enumerate() {
                ia[x] = kidx[p];
                ib[y] = kidx[p];
            }
            *cv += a[ravel(&ia, ae)] * b[ravel(&ib, be)];
        }
    }
    (c, ce)
}

#[test]
fn contraction_matches_einsum_on_random_index_patterns() {
    let rt = rt();
    let mut rng = SmallRng::seed_from_u64(7);
    for case in 0..60 {
        let dtype = DTYPES[case % 4];
        let (ra, rb) = (rng.gen_range(1..=4), rng.gen_range(1..=4));
        let npairs = rng.gen_range(0..=ra.min(rb).min(2));
        let mut aa: Vec<usize> = (0..ra).collect();
        let mut ba: Vec<usize> = (0..rb).collect();
        for i in (1..aa.len()).rev() {
            aa.swap(i, rng.gen_range(0..=i));
        }
        for i in (1..ba.len()).rev() {
            ba.swap(i, rng.gen_range(0..=i));
        }
        aa.truncate(npairs);
        ba.truncate(npairs);
        let mut ae: Vec<usize> = (0..ra).map(|_| rng.gen_range(1..=3)).collect();
        let mut be: Vec<usize> = (0..rb).map(|_| rng.gen_range(1..=3)).collect();
        for (&x, &y) in aa.iter().zip(&ba) {
            be[y] = ae[x];
        }
        if ae.iter().product::<usize>() == 0 {
            ae[0] = 1;
        }
        let cx = dtype.is_complex();
        let av = random(&mut rng, ae.iter().product(), cx);
        let bv = random(&mut rng, be.iter().product(), cx);
        let order = if case % 3 == 0 { Order::ColMajor } else { Order::RowMajor };
        let a = make(dtype, &ae, order, &av);
        let b = make(dtype, &be, Order::RowMajor, &bv);
        let c = Tensor::unconstructed(dtype, Domain::Host).unwrap();
        ops::contract(&c, Scalar::real(1.0), &a, &b, &aa, &ba, None, Submit::on(&rt)).unwrap();
        let (want, ce) = tensordot(&av, &ae, &bv, &be, &aa, &ba);
        assert_eq!(c.extents().unwrap().as_slice(), ce.as_slice(), "case {case}");
        assert_close(&read(&c), &want, dtype, &format!("contract case {case}: {ae:?}x{be:?} over {aa:?}/{ba:?}"));
        // The accumulating form: C = 2·(A·B) + (-1)·C = A·B.
        ops::contract(&c, Scalar::real(2.0), &a, &b, &aa, &ba, Some(Scalar::real(-1.0).into()), Submit::on(&rt))
            .unwrap();
        assert_close(&read(&c), &want, dtype, &format!("contract accumulate case {case}"));
    }
    let a = make(DType::F64, &[2, 3], Order::RowMajor, &[C::new(1.0, 0.0); 6]);
    let c = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
    let e = ops::contract(&c, Scalar::real(1.0), &a, &a, &[1], &[1, 0], None, Submit::on(&rt)).unwrap_err();
    assert!(matches!(e.status(), Status::InvalidArgument | Status::ShapeMismatch), "{e:?}");
}

#[test]
fn permute_conj_and_reductions() {
    let rt = rt();
    let mut rng = SmallRng::seed_from_u64(11);
    for dtype in DTYPES {
        let cx = dtype.is_complex();
        let x = make(dtype, &[2, 3, 4], Order::ColMajor, &random(&mut rng, 24, cx));
        let xv = read(&x); // as stored (rounded for single precision)
                           // Materialising permute.
        let p = Tensor::unconstructed(dtype, Domain::Host).unwrap();
        ops::permute(&p, &x, &[2, 0, 1], Submit::on(&rt)).unwrap();
        assert_eq!(p.extents().unwrap().as_slice(), &[4, 2, 3]);
        let got = read(&p);
        for a in 0..4 {
            for b in 0..2 {
                for c in 0..3 {
                    assert_eq!(got[a * 6 + b * 3 + c], xv[b * 12 + c * 4 + a]);
                }
            }
        }
        // Materialising conj.
        let cj = Tensor::unconstructed(dtype, Domain::Host).unwrap();
        ops::conj(&cj, &x, Submit::on(&rt)).unwrap();
        assert_eq!(read(&cj), xv.iter().map(|z| z.conj()).collect::<Vec<_>>());
        // sum over all elements, and over axes.
        let s = Tensor::unconstructed(dtype, Domain::Host).unwrap();
        ops::sum(&s, &x, None, Submit::on(&rt)).unwrap();
        assert_eq!(s.extents().unwrap().len(), 0, "a 0-d result");
        assert_close(&read(&s), &[xv.iter().sum()], dtype, "sum all");
        let s2 = Tensor::unconstructed(dtype, Domain::Host).unwrap();
        ops::sum(&s2, &x, Some(&[0, 2]), Submit::on(&rt)).unwrap();
        let want: Vec<C> = (0..3)
            .map(|j| (0..2).flat_map(|i| (0..4).map(move |k| (i, k))).map(|(i, k)| xv[i * 12 + j * 4 + k]).sum())
            .collect();
        assert_close(&read(&s2), &want, dtype, "sum axes 0, 2");
        // dot, conjugating or not, over a view.
        let y = make(dtype, &[2, 3, 4], Order::RowMajor, &random(&mut rng, 24, cx));
        let yv = read(&y);
        for conjugate in [false, true] {
            let d = Tensor::unconstructed(dtype, Domain::Host).unwrap();
            ops::dot(&d, &x, &y, conjugate, Submit::on(&rt)).unwrap();
            let want: C = xv.iter().zip(&yv).map(|(a, b)| if conjugate { a.conj() * b } else { a * b }).sum();
            assert_close(&read(&d), &[want], dtype, &format!("dot conj={conjugate}"));
        }
        // norm2 into the real dtype.
        let real = match dtype {
            DType::C64 => DType::F32,
            DType::C128 => DType::F64,
            d => d,
        };
        let nrm = Tensor::unconstructed(real, Domain::Host).unwrap();
        ops::norm2(&nrm, &x, Submit::on(&rt)).unwrap();
        let want = xv.iter().map(|z| z.norm_sqr()).sum::<f64>().sqrt();
        assert_close(&read(&nrm), &[C::new(want, 0.0)], dtype, "norm2");
        if cx {
            let wrong = Tensor::unconstructed(dtype, Domain::Host).unwrap();
            assert_eq!(ops::norm2(&wrong, &x, Submit::on(&rt)).unwrap_err().status(), Status::DtypeMismatch);
        }
        // A conj view read by a reduction is conjugated.
        let xc = x.conj().unwrap();
        let sc = Tensor::unconstructed(dtype, Domain::Host).unwrap();
        ops::sum(&sc, &xc, None, Submit::on(&rt)).unwrap();
        assert_close(&read(&sc), &[xv.iter().map(|z| z.conj()).sum()], dtype, "sum of conj view");
    }
}

#[test]
fn the_system_blas_when_selected() {
    let rt = rt();
    let blas_only = Selector::only(&[BackendKind::Blas]);
    let mut rng = SmallRng::seed_from_u64(5);
    let present = std::process::Command::new("sh")
        .arg("-c")
        .arg("ldconfig -p | grep -q libopenblas.so.0")
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    let av = random(&mut rng, 12, false);
    let bv = random(&mut rng, 12, false);
    let a = make(DType::F64, &[3, 4], Order::RowMajor, &av);
    let b = make(DType::F64, &[4, 3], Order::ColMajor, &bv);
    let c = Tensor::zeros(DType::F64, &[3, 3], Order::RowMajor, Domain::Host).unwrap();
    let ev = ops::gemm(
        &c,
        Scalar::real(1.0),
        &a,
        &b,
        Scalar::real(0.0),
        Submit { runtime: Some(&rt), selector: blas_only, ..Default::default() },
    )
    .unwrap();
    match ev.wait(LONG) {
        Ok(()) => {
            assert!(present || std::env::var("TA_BLAS_LIB").is_ok(), "BLAS ran although none should be installed");
            assert_close(&read(&c), &matmul(&av, &bv, 3, 4, 3), DType::F64, "blas gemm");
        }
        Err(e) => {
            assert!(!present, "OpenBLAS is installed but the BLAS backend declined: {e}");
            assert_eq!(e.status(), Status::NoBackend);
            assert!(e.message().contains("blas:"), "{}", e.message());
        }
    }
    // A layout BLAS cannot take (negative strides): BLAS declines, and the
    // error names it; with the native backend allowed, the walk goes on.
    let rev = c.slice(&[SliceSpec { start: 2, stop: -1, step: -1, drop: false }, SliceSpec::all(3)]).unwrap();
    let opts = |sel| Submit { runtime: Some(&rt), selector: sel, ..Default::default() };
    let e =
        ops::gemm(&rev, Scalar::real(1.0), &a, &b, Scalar::real(0.0), opts(blas_only)).unwrap().wait(LONG).unwrap_err();
    assert_eq!(e.status(), Status::NoBackend);
    assert!(e.message().contains("blas: "), "{}", e.message());
    // (That failure poisoned C; an overwrite cleans it.)
    let both = Selector::only(&[BackendKind::Blas, BackendKind::Native]);
    ops::assign_product(&rev, Scalar::real(1.0), &a, &b, opts(both)).unwrap().wait(LONG).unwrap();
    let mut want = matmul(&av, &bv, 3, 4, 3);
    want = [6, 7, 8, 3, 4, 5, 0, 1, 2].iter().map(|&k| want[k]).collect();
    assert_close(&read(&c), &want, DType::F64, "native gemm after BLAS declined");
}

/// The BLAS-absent case runs in a child process (the library is looked up
/// once per process), with `TA_BLAS_LIB` naming a file that does not exist.
#[test]
fn without_a_system_blas_the_blas_backend_declines() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["--exact", "blas_absent_child", "--nocapture", "--test-threads=1"])
        .env("TA_BLAS_LIB", "/nonexistent/libblas-missing.so")
        .env("TA_BLAS_ABSENT_CHILD", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {text}");
    assert!(text.contains("CHILD CHECKED THE DECLINE"), "the child did not run its check: {text}");
}

/// Only does something in the child process of the test above.
#[test]
fn blas_absent_child() {
    if std::env::var("TA_BLAS_ABSENT_CHILD").is_err() {
        return;
    }
    let rt = rt();
    let a = make(DType::F64, &[2, 2], Order::RowMajor, &[C::new(1.0, 0.0); 4]);
    let c = Tensor::zeros(DType::F64, &[2, 2], Order::RowMajor, Domain::Host).unwrap();
    let opts = Submit { runtime: Some(&rt), selector: Selector::only(&[BackendKind::Blas]), ..Default::default() };
    let e = ops::gemm(&c, Scalar::real(1.0), &a, &a.clone().transpose().unwrap(), Scalar::real(0.0), opts)
        .unwrap()
        .wait(LONG)
        .unwrap_err();
    assert_eq!(e.status(), Status::NoBackend);
    assert!(e.message().contains("blas: no system BLAS"), "{}", e.message());
    // The default walk still works without BLAS (an overwrite cleans the poison).
    ops::assign_product(&c, Scalar::real(1.0), &a, &a.transpose().unwrap(), Submit::on(&rt)).unwrap();
    assert_eq!(read(&c), vec![C::new(2.0, 0.0); 4]);
    println!("CHILD CHECKED THE DECLINE");
}
