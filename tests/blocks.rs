//! Block arrays (SPEC §2.4): one allocation, one epoch queue per block,
//! block handles and coalesced views, and the tiled workloads built on them.

mod common;

use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tensorasync::*;

fn tiled(extents: &[usize], tile: &[usize]) -> BlockArray {
    BlockArray::tiled(DType::F64, extents, tile, Order::RowMajor, Domain::Host).unwrap()
}

/// Fill a whole block array with `f(i, j)` through its coalesced view.
fn fill_with(b: &BlockArray, rows: usize, cols: usize, f: impl Fn(usize, usize) -> f64) {
    let data: Vec<f64> = (0..rows * cols).map(|k| f(k / cols, k % cols)).collect();
    let all = b.all().unwrap();
    unsafe {
        ops::copy_in(&all, data.as_ptr().cast(), Layout::contiguous(&[rows, cols], Order::RowMajor), Submit::default())
    }
    .unwrap()
    .wait(LONG)
    .unwrap();
}

#[test]
fn tiles_ragged_edges_and_descriptors() {
    let b = tiled(&[5, 7], &[2, 3]);
    assert_eq!(b.grid().unwrap(), &[3, 3]);
    assert_eq!(b.count(), 9);
    fill_with(&b, 5, 7, |i, j| (i * 10 + j) as f64);
    // Shapes are known at creation, ragged at the edges.
    assert_eq!(b.tile(&[2, 2]).unwrap().extents().unwrap().as_slice(), &[1, 1]);
    assert_eq!(b.tile(&[0, 2]).unwrap().extents().unwrap().as_slice(), &[2, 1]);
    assert_eq!(read_f64(&b.tile(&[1, 1]).unwrap()), vec![23.0, 24.0, 25.0, 33.0, 34.0, 35.0]);
    assert_eq!(read_f64(&b.block(8).unwrap()), vec![46.0]);
    // A coalesced rectangle of tiles is one strided sub-array.
    let c = b.coalesce(&[1, 1], &[3, 3]).unwrap();
    assert_eq!(c.extents().unwrap().as_slice(), &[3, 4]);
    assert_eq!(read_f64(&c), vec![23.0, 24.0, 25.0, 26.0, 33.0, 34.0, 35.0, 36.0, 43.0, 44.0, 45.0, 46.0]);
    // Misuse: each gives its status.
    assert_eq!(b.block(9).unwrap_err().status(), Status::OutOfRange);
    assert_eq!(b.tile(&[3, 0]).unwrap_err().status(), Status::OutOfRange);
    assert_eq!(b.coalesce(&[0, 0], &[4, 1]).unwrap_err().status(), Status::OutOfRange);
    let e = BlockArray::tiled(DType::F64, &[4, 4], &[2], Order::RowMajor, Domain::Host).unwrap_err();
    assert_eq!(e.status(), Status::ShapeMismatch, "a tile shape that does not fit");
    // A block cannot take another shape (its storage is the array's).
    let x = Tensor::zeros(DType::F64, &[3, 3], Order::RowMajor, Domain::Host).unwrap();
    let e = ops::assign_product(&b.tile(&[0, 0]).unwrap(), Scalar::real(1.0), &x, &x, Submit::default()).unwrap_err();
    assert_eq!(e.status(), Status::ShapeMismatch);
}

/// The conjugate of a coalesced view (and of its transpose) reads the
/// conjugated elements of every covered tile, takes part in products as a
/// conjugated operand, is refused as an output, and is the identity (still
/// read-only) for a real array; the conjugate of the conjugate reads the
/// original elements again.
#[test]
fn coalesced_views_conjugate() {
    use num_complex::Complex64 as Z;
    let z = |i: usize, j: usize| Z::new((10 * i + j) as f64, i as f64 - 2.0 * j as f64);
    let (n, cols) = (4, 6);
    let b = BlockArray::tiled(DType::C128, &[n, cols], &[2, 2], Order::RowMajor, Domain::Host).unwrap();
    let data: Vec<Z> = (0..n * cols).map(|k| z(k / cols, k % cols)).collect();
    let all = b.all().unwrap();
    ops::copy(&all, &Tensor::from_slice(&[n, cols], Order::RowMajor, &data).unwrap(), Submit::default())
        .unwrap()
        .wait(LONG)
        .unwrap();
    // Tile columns 1..3 (columns 2..6), all rows: a 4 x 4 panel.
    let panel = b.coalesce(&[0, 1], &[2, 3]).unwrap();
    let pc = panel.conj().unwrap();
    assert!(pc.is_conj() && pc.is_read_only() && !panel.is_conj() && !panel.is_read_only());
    let want: Vec<Z> = (0..n * 4).map(|k| z(k / 4, k % 4 + 2).conj()).collect();
    assert_eq!(pc.to_vec::<Z>().unwrap(), want);
    assert_eq!(pc.conj().unwrap().to_vec::<Z>().unwrap(), panel.to_vec::<Z>().unwrap());
    let pct = pc.transpose().unwrap();
    assert!(pct.is_conj(), "a transpose of the conjugate stays conjugated");
    // G = P^H P through the conjugated, transposed panel, against a loop.
    let g = Tensor::zeros(DType::C128, &[4, 4], Order::RowMajor, Domain::Host).unwrap();
    ops::assign_product(&g, Scalar::real(1.0), &pct, &panel, Submit::default()).unwrap().wait(LONG).unwrap();
    let got = g.to_vec::<Z>().unwrap();
    for i in 0..4 {
        for j in 0..4 {
            let want: Z = (0..n).map(|r| z(r, i + 2).conj() * z(r, j + 2)).sum();
            assert!((got[i * 4 + j] - want).norm() < 1e-9, "P^H P ({i}, {j}): {} against {want}", got[i * 4 + j]);
        }
    }
    // An output: refused, naming the conjugate.
    let e = ops::fill(&pc, Scalar::real(0.0), Submit::default()).unwrap_err();
    assert_eq!(e.status(), Status::ReadOnly);
    assert!(e.message().contains("conj"), "{}", e.message());
    // Real: the identity, still read-only.
    let r = tiled(&[4, 4], &[2, 2]);
    fill_with(&r, 4, 4, |i, j| (i * 10 + j) as f64);
    let rc = r.all().unwrap().conj().unwrap();
    assert!(!rc.is_conj() && rc.is_read_only());
    assert_eq!(read_f64(&rc), read_f64(&r.all().unwrap()));
    assert_eq!(ops::fill(&rc, Scalar::real(0.0), Submit::default()).unwrap_err().status(), Status::ReadOnly);
}

/// A leading dimension whose byte stride is a multiple of 1 KiB is padded by
/// one cache line on the host (column-major: the column stride; row-major:
/// the row stride); other extents stay dense. Values are where the indices
/// say, through tiles, coalesced views and the whole array.
#[test]
fn aliasing_leading_dimensions_are_padded() {
    for (order, dt, ext, want) in [
        (Order::ColMajor, DType::F64, [256usize, 3], vec![1isize, 264]),
        (Order::RowMajor, DType::F64, [3, 128], vec![136, 1]),
        (Order::RowMajor, DType::F32, [2, 256], vec![272, 1]),
        (Order::ColMajor, DType::C128, [64, 2], vec![1, 68]),
        (Order::RowMajor, DType::F64, [3, 100], vec![100, 1]),
        (Order::ColMajor, DType::F64, [128, 1], vec![1, 128]),
    ] {
        let b = BlockArray::tiled(dt, &ext, &[2, 2], order, Domain::Host).unwrap();
        let all = b.all().unwrap();
        assert_eq!(all.layout().unwrap().strides.as_slice(), want.as_slice(), "{order:?} {dt:?} {ext:?}");
        assert_eq!(b.tile(&[0, 0]).unwrap().layout().unwrap().strides.as_slice(), want.as_slice());
    }
    // Rank 3, column-major: the padded stride carries into the next axis.
    let b = BlockArray::tiled(DType::F64, &[128, 3, 2], &[64, 3, 1], Order::ColMajor, Domain::Host).unwrap();
    assert_eq!(b.all().unwrap().layout().unwrap().strides.as_slice(), &[1, 136, 408]);

    // Values through every kind of handle, and a product on the tiles.
    let (rows, cols) = (128, 256);
    let b = BlockArray::tiled(DType::F64, &[rows, cols], &[64, 64], Order::RowMajor, Domain::Host).unwrap();
    fill_with(&b, rows, cols, |i, j| (i * 1000 + j) as f64);
    let tile = read_f64(&b.tile(&[1, 2]).unwrap());
    assert_eq!(tile.len(), 64 * 64);
    assert_eq!((tile[0], tile[1], tile[64], tile[4095]), (64128.0, 64129.0, 65128.0, 127191.0));
    let c = b.coalesce(&[1, 3], &[2, 4]).unwrap();
    assert_eq!(read_f64(&c)[..2], [64192.0, 64193.0]);
    let all = read_f64(&b.all().unwrap());
    assert!(all.iter().enumerate().all(|(k, &v)| v == ((k / cols) * 1000 + k % cols) as f64));
}

#[test]
fn block_lists_and_stacking() {
    let shapes: [&[usize]; 4] = [&[2, 3], &[1, 3], &[4], &[2, 2]];
    let b = BlockArray::list(DType::F64, &shapes, Order::RowMajor, Domain::Host).unwrap();
    assert_eq!(b.count(), 4);
    assert!(b.grid().is_none());
    for (k, s) in shapes.iter().enumerate() {
        assert_eq!(b.block(k).unwrap().extents().unwrap().as_slice(), *s);
    }
    ops::fill(&b.block(0).unwrap(), Scalar::real(1.0), Submit::default()).unwrap();
    ops::fill(&b.block(1).unwrap(), Scalar::real(2.0), Submit::default()).unwrap();
    // Blocks 0 and 1 stack into a 3x3 array; 1 and 2 do not.
    let s = b.coalesce_range(0, 1).unwrap();
    assert_eq!(s.extents().unwrap().as_slice(), &[3, 3]);
    assert_eq!(read_f64(&s), vec![1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
    assert_eq!(
        b.coalesce_range(1, 2).unwrap_err().status(),
        Status::NotContiguous,
        "coalescing blocks that do not fit together"
    );
    assert_eq!(b.coalesce_range(2, 5).unwrap_err().status(), Status::OutOfRange);
}

#[test]
fn block_handles_outlive_the_array_handle() {
    let b = tiled(&[4, 4], &[2, 2]);
    fill_with(&b, 4, 4, |i, j| (i * 4 + j) as f64);
    let t = b.tile(&[1, 0]).unwrap();
    let all = b.all().unwrap();
    drop(b);
    ops::scale(&t, Scalar::real(2.0), Submit::default()).unwrap();
    assert_eq!(read_f64(&t), vec![16.0, 18.0, 24.0, 26.0]);
    drop(t);
    assert_eq!(read_f64(&all)[8..10], [16.0, 18.0]);
}

#[test]
fn writers_of_different_blocks_overlap_in_time() {
    let rt = Runtime::new(2).unwrap();
    let b = tiled(&[4, 4], &[2, 4]);
    let (inside, max_inside, met) =
        (Arc::new(AtomicIsize::new(0)), Arc::new(AtomicIsize::new(0)), Arc::new(AtomicIsize::new(0)));
    let writer = || {
        let (inside, max_inside, met) = (inside.clone(), max_inside.clone(), met.clone());
        kernel(move |_| {
            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
            max_inside.fetch_max(now, Ordering::SeqCst);
            let t0 = Instant::now();
            while met.load(Ordering::SeqCst) == 0 && t0.elapsed() < Duration::from_secs(5) {
                if inside.load(Ordering::SeqCst) >= 2 {
                    met.store(1, Ordering::SeqCst);
                }
                std::hint::spin_loop();
            }
            inside.fetch_sub(1, Ordering::SeqCst);
        })
    };
    for k in 0..2 {
        ops::kernel("block_writer", &[(&b.block(k).unwrap(), Mode::Update)], writer(), Submit::on(&rt)).unwrap();
    }
    rt.wait_idle(LONG).unwrap();
    assert_eq!(max_inside.load(Ordering::SeqCst), 2, "writers of two blocks did not run at the same time");
}

#[test]
fn the_composite_hazard_orders_blocks_and_coalesced_views() {
    let rt = Runtime::new(2).unwrap();
    let b = tiled(&[4, 4], &[2, 2]);
    let gate = Gate::default();
    let t11 = b.tile(&[1, 1]).unwrap();
    let bottom = b.coalesce(&[1, 0], &[2, 2]).unwrap();
    let all = b.all().unwrap();
    // A held writer of one tile: a coalesced reader covering it must wait,
    // and a coalesced writer must wait; a disjoint tile must not.
    ops::kernel("held", &[(&t11, Mode::Update)], blocker(&gate), Submit::on(&rt)).unwrap();
    ops::fill(&t11, Scalar::real(7.0), Submit::on(&rt)).unwrap();
    let mut seen = [0.0f64; 8];
    let read = unsafe { ops::copy_out(&bottom, seen.as_mut_ptr().cast(), 8, None, Submit::on(&rt)) }.unwrap();
    let free = ops::fill(&b.tile(&[0, 0]).unwrap(), Scalar::real(1.0), Submit::on(&rt)).unwrap();
    free.wait(LONG).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(read.poll().is_none(), "the coalesced read ran before the covered tile's writer");
    gate.open();
    read.wait(LONG).unwrap();
    assert_eq!(seen, [0.0, 0.0, 7.0, 7.0, 0.0, 0.0, 7.0, 7.0]);
    // A coalesced writer, then block readers and writers: they see it.
    ops::fill(&all, Scalar::real(3.0), Submit::on(&rt)).unwrap();
    ops::scale(&t11, Scalar::real(2.0), Submit::on(&rt)).unwrap();
    assert_eq!(read_f64(&b.tile(&[0, 1]).unwrap()), vec![3.0; 4]);
    assert_eq!(read_f64(&bottom), vec![3.0, 3.0, 6.0, 6.0, 3.0, 3.0, 6.0, 6.0]);
    // A failure through a coalesced view poisons every covered block, and
    // only those.
    let k = KernelFn::new(|_| Err(KernelFailure { code: 2, message: Some("coalesced broke".into()) }));
    ops::kernel("coalesced_writer", &[(&bottom, Mode::Update)], k, Submit::on(&rt)).unwrap();
    assert_eq!(t11.wait(LONG).unwrap_err().message(), "coalesced broke");
    b.tile(&[0, 0]).unwrap().wait(LONG).unwrap();
    assert_eq!(all.wait(LONG).unwrap_err().origin(), "coalesced_writer");
    // Coalesced views and their blocks cannot alias in one operation.
    let e = ops::copy(&bottom, &b.coalesce(&[0, 0], &[1, 2]).unwrap(), Submit::on(&rt)).map(|_| ());
    assert!(e.is_ok(), "disjoint tile rows may be copied one into the other");
    let e = ops::axpy(&t11, Scalar::real(1.0), &b.coalesce(&[1, 1], &[2, 2]).unwrap(), Submit::on(&rt)).unwrap_err();
    assert_eq!(e.status(), Status::Alias);
}

/// Dense reference: C = A·B.
fn matmul(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    let mut c = vec![0.0; n * n];
    for i in 0..n {
        for k in 0..n {
            for j in 0..n {
                c[i * n + j] += a[i * n + k] * b[k * n + j];
            }
        }
    }
    c
}

#[test]
fn tiled_gemm_matches_a_dense_reference() {
    let rt = Runtime::new(2).unwrap();
    let mut rng = SmallRng::seed_from_u64(3);
    for (n, tile) in [(12, 4), (13, 4), (17, 5), (9, 9), (10, 3)] {
        let av: Vec<f64> = (0..n * n).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let bv: Vec<f64> = (0..n * n).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let (a, b, c) = (tiled(&[n, n], &[tile, tile]), tiled(&[n, n], &[tile, tile]), tiled(&[n, n], &[tile, tile]));
        fill_with(&a, n, n, |i, j| av[i * n + j]);
        fill_with(&b, n, n, |i, j| bv[i * n + j]);
        let g = a.grid().unwrap()[0];
        // One task per tile update, C_ij += A_ik B_kj, in program order.
        for i in 0..g {
            for j in 0..g {
                for k in 0..g {
                    let (cij, aik, bkj) =
                        (c.tile(&[i, j]).unwrap(), a.tile(&[i, k]).unwrap(), b.tile(&[k, j]).unwrap());
                    ops::gemm(&cij, Scalar::real(1.0), &aik, &bkj, Scalar::real(1.0), Submit::on(&rt)).unwrap();
                }
            }
        }
        let got = read_f64(&c.all().unwrap());
        let want = matmul(&av, &bv, n);
        for (x, y) in got.iter().zip(&want) {
            assert!((x - y).abs() < 1e-12 * n as f64, "n={n} tile={tile}: {x} vs {y}");
        }
    }
}

/// Dense lower Cholesky by the textbook loops (the independent reference).
fn cholesky_ref(a: &[f64], n: usize) -> Vec<f64> {
    let mut l = vec![0.0; n * n];
    for j in 0..n {
        let d = a[j * n + j] - (0..j).map(|k| l[j * n + k] * l[j * n + k]).sum::<f64>();
        l[j * n + j] = d.sqrt();
        for i in j + 1..n {
            let s = a[i * n + j] - (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum::<f64>();
            l[i * n + i.min(j)] = s / l[j * n + j];
        }
    }
    l
}

/// Right-looking tiled Cholesky (lower): one POTRF, TRSM, SYRK or GEMM task
/// per tile, submitted in program order without waiting.
fn tiled_cholesky(a: &BlockArray, rt: &Runtime) {
    let g = a.grid().unwrap()[0];
    let t = |i: usize, j: usize| a.tile(&[i, j]).unwrap();
    for k in 0..g {
        ops::potrf(&t(k, k), ops::Uplo::Lower, Submit::on(rt)).unwrap();
        for i in k + 1..g {
            // X · L_kk^T = A_ik: the transposed view of the lower L_kk is upper.
            ops::trsm(
                &t(i, k),
                false,
                ops::Uplo::Upper,
                false,
                Scalar::real(1.0),
                &t(k, k).transpose().unwrap(),
                Submit::on(rt),
            )
            .unwrap();
        }
        for i in k + 1..g {
            ops::syrk(
                &t(i, i),
                ops::Uplo::Lower,
                Scalar::real(-1.0),
                &t(i, k),
                Some(Scalar::real(1.0)),
                Submit::on(rt),
            )
            .unwrap();
            for j in k + 1..i {
                let ajk_t = t(j, k).transpose().unwrap();
                ops::gemm(&t(i, j), Scalar::real(-1.0), &t(i, k), &ajk_t, Scalar::real(1.0), Submit::on(rt)).unwrap();
            }
        }
    }
}

#[test]
fn tiled_cholesky_matches_a_dense_reference() {
    let rt = Runtime::new(2).unwrap();
    let mut rng = SmallRng::seed_from_u64(5);
    for (n, tile) in [(12, 4), (13, 4), (17, 5), (9, 9), (10, 3), (40, 16)] {
        // A = M M^T + n I: symmetric positive definite.
        let m: Vec<f64> = (0..n * n).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let spd: Vec<f64> = (0..n * n)
            .map(|k| {
                let (i, j) = (k / n, k % n);
                (0..n).map(|p| m[i * n + p] * m[j * n + p]).sum::<f64>() + if i == j { n as f64 } else { 0.0 }
            })
            .collect();
        let a = tiled(&[n, n], &[tile, tile]);
        fill_with(&a, n, n, |i, j| spd[i * n + j]);
        tiled_cholesky(&a, &rt);
        let got = read_f64(&a.all().unwrap());
        let want = cholesky_ref(&spd, n);
        for i in 0..n {
            for j in 0..=i {
                let (x, y) = (got[i * n + j], want[i * n + j]);
                assert!((x - y).abs() < 1e-10 * n as f64, "n={n} tile={tile} L[{i},{j}]: {x} vs {y}");
            }
            // The strict upper triangle is never touched by a lower factorisation.
            for j in i + 1..n {
                assert_eq!(got[i * n + j], spd[i * n + j], "n={n} tile={tile}: upper [{i},{j}] changed");
            }
        }
    }
}

#[test]
fn a_failed_tile_factorisation_poisons_what_depends_on_it() {
    let rt = Runtime::new(2).unwrap();
    let (n, tile) = (8, 4);
    // Identity, except a negative entry on the diagonal of the last tile.
    let a = tiled(&[n, n], &[tile, tile]);
    fill_with(&a, n, n, |i, j| {
        if i != j {
            0.0
        } else if i == 6 {
            -1.0
        } else {
            1.0
        }
    });
    tiled_cholesky(&a, &rt);
    let err = a.tile(&[1, 1]).unwrap().wait(LONG).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert_eq!(err.origin(), "potrf");
    assert!(err.message().contains("not positive definite"), "{}", err.message());
    // The first tile column factored cleanly and stays readable.
    a.tile(&[0, 0]).unwrap().wait(LONG).unwrap();
    a.tile(&[1, 0]).unwrap().wait(LONG).unwrap();
    // Reading the whole array reports the same error, not a new one.
    let whole = a.all().unwrap().wait(LONG).unwrap_err();
    assert!(whole.same_as(&err));
}
