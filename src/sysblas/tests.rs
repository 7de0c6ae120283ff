//! Tests of the system BLAS binding: loading (present, absent, redirected)
//! and gemm against an independent reference, over the layouts BLAS takes
//! and those it declines.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use num_complex::{Complex32, Complex64 as C};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::gemm::{gemm_blas, gemm_blas_with};
use super::lent::{with_lent_workers, LENT_HERE, TEST_WAIT};
use super::library::{blas_info, cpu_level, fallback_note, kernel_level, load_from, Blas, DEFAULT_CANDIDATES, ENV_VAR};
use crate::dtype::DType;
use crate::dtype::Scalar;
use crate::error::Status;
use crate::kernels::operand::Operand;
use crate::kernels::test_util::{assert_close, complex, rand_scalar, ref_gemm, sc, Lay, Placed, Tens, TestEl};

/// Held by the tests that make lent calls and by those that need none
/// running, so that the lent tests' calls do not find another test's lent
/// call in progress (only one runs at a time) and the library's thread
/// count is 1 outside them.
static LENT_TESTS: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// The system BLAS for the "present" tests, or `None` (skipped) where none
/// is installed. `TA_REQUIRE_BLAS=1` turns a missing BLAS into a failure.
fn lib() -> Option<Blas> {
    match load_from(DEFAULT_CANDIDATES) {
        Ok(l) => Some(l),
        Err(e) => {
            assert!(std::env::var_os("TA_REQUIRE_BLAS").is_none(), "TA_REQUIRE_BLAS is set but: {e}");
            eprintln!("no system BLAS here, skipping: {e}");
            None
        }
    }
}

fn blas_case<T: TestEl>(
    lib: &Blas,
    rng: &mut SmallRng,
    m: usize,
    n: usize,
    k: usize,
    lays: (Lay, Lay, Lay),
    conj: (bool, bool),
) {
    let (la, lb, lc) = lays;
    let at = Tens::random::<T>(&[m, k], rng);
    let bt = Tens::random::<T>(&[k, n], rng);
    let alpha = rand_scalar::<T>(rng);
    let beta = match rng.gen_range(0..4) {
        0 => None,
        1 => Some(Scalar::real(0.0)),
        2 => Some(Scalar::real(1.0)),
        _ => Some(rand_scalar::<T>(rng)),
    };
    let reads_c = beta.is_some_and(|b| b != Scalar::real(0.0));
    let ct = if reads_c { Tens::random::<T>(&[m, n], rng) } else { Tens::filled(&[m, n], C::new(f64::NAN, 0.0)) };
    let mut a = Placed::<T>::new(&at, la, rng);
    let mut b = Placed::<T>::new(&bt, lb, rng);
    let mut c = Placed::<T>::new(&ct, lc, rng);
    let what = format!("blas {} {m}x{n}x{k} {lays:?} conj {conj:?} beta {beta:?}", T::DTYPE.name());
    let gaps = c.gaps();
    let r = unsafe { gemm_blas_with(lib, &c.op(false), alpha, &a.op(conj.0), &b.op(conj.1), beta) };
    r.unwrap_or_else(|why| panic!("{what}: declined: {why}")).unwrap();
    let want = ref_gemm(
        sc(alpha),
        &if conj.0 { at.conj() } else { at.clone() },
        &if conj.1 { bt.conj() } else { bt.clone() },
        beta.map(sc),
        &ct,
    );
    assert_close(&c.get(), &want, T::TOL * (k as f64 + 2.0) * 8.0, &what);
    let after = c.gaps();
    assert!(gaps.iter().zip(&after).all(|(x, y)| x.1 == y.1), "{what}: wrote outside C");
}

fn blas_all<T: TestEl>(lib: &Blas, seed: u64) {
    let sizes = [(3, 5, 4), (5, 3, 4), (1, 6, 3), (6, 1, 2), (1, 1, 4), (4, 4, 1), (0, 3, 2), (3, 4, 0), (20, 17, 33)];
    blas_sizes::<T>(lib, seed, &sizes);
}

/// [`blas_case`] for each size, on every layout of A, B and C.
fn blas_sizes<T: TestEl>(lib: &Blas, seed: u64, sizes: &[(usize, usize, usize)]) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let lays = [Lay::RowMajor, Lay::ColMajor];
    for &(m, n, k) in sizes {
        for &la in &lays {
            for &lb in &lays {
                for &lc in &lays {
                    let conj = if complex::<T>() {
                        // BLAS conjugates only operands it reads transposed:
                        // with C column-major, row-major A and B.
                        (la == Lay::RowMajor && rng.gen_bool(0.7), lb == Lay::RowMajor && rng.gen_bool(0.7))
                    } else {
                        (false, false)
                    };
                    let conj = if lc == Lay::ColMajor { conj } else { (false, false) };
                    blas_case::<T>(lib, &mut rng, m, n, k, (la, lb, lc), conj);
                }
            }
        }
    }
}

#[test]
fn blas_present_all_dtypes() {
    let Some(lib) = lib() else { return };
    assert!(lib.gemm.iter().all(Option::is_some), "{} lacks a gemm symbol", lib.path);
    blas_all::<f32>(&lib, 1);
    blas_all::<f64>(&lib, 2);
    blas_all::<Complex32>(&lib, 3);
    blas_all::<C>(&lib, 4);
    // Loading set BLAS to one thread (the runtime's workers parallelise),
    // and a lent call (another test's) sets it back before it ends.
    let _no_lent_call = LENT_TESTS.lock();
    if let Some(t) = lib.num_threads() {
        assert_eq!(t, 1, "{}", lib.describe());
    }
    // The process-wide loader finds the same library (unless redirected).
    if std::env::var_os(ENV_VAR).is_none() {
        let info = blas_info().expect("a BLAS loads here");
        assert!(info.starts_with(DEFAULT_CANDIDATES[0]) || info.contains("blas"), "{info}");
    }
}

/// Products large enough to go parallel, on a pool of 3 threads (as on a
/// runtime's workers): split into blocks of C, one call per thread, along
/// C's contiguous axis or, for a skinny C, the other one; uneven splits.
#[test]
fn blas_splits_across_the_pool() {
    let Some(lib) = lib() else { return };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    let sizes = [(150, 131, 120), (9, 600, 400), (600, 10, 400), (130, 130, 130)];
    pool.install(|| {
        assert!(matches!(crate::kernels::par::par_for(130 * 130 * 130), faer::Par::Rayon(_)), "parallel here");
        blas_sizes::<f64>(&lib, 5, &sizes);
        blas_sizes::<C>(&lib, 6, &sizes[..2]);
        blas_sizes::<f32>(&lib, 7, &sizes[2..]);
        blas_sizes::<Complex32>(&lib, 8, &sizes[3..]);
    });
}

/// A small f64 product: one single-threaded call, as a plain thread makes.
fn small_f64_case(lib: &Blas, rng: &mut SmallRng) {
    blas_case::<f64>(lib, rng, 40, 50, 60, (Lay::RowMajor, Lay::ColMajor, Lay::ColMajor), (false, false));
}

/// This thread's lent calls wait up to a second for the idle worker, which
/// on a machine busy with other tests may take longer than the library's
/// wait to wake.
fn wait_long_for_lenders() {
    TEST_WAIT.with(|w| w.set(Some(std::time::Duration::from_secs(1))));
}

/// Concurrent calls from several threads (single-threaded BLAS mode).
#[test]
fn blas_concurrent_calls() {
    let Some(lib) = lib() else { return };
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let lib = &lib;
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(40 + t);
                for _ in 0..5 {
                    small_f64_case(lib, &mut rng);
                    blas_case::<C>(
                        lib,
                        &mut rng,
                        30,
                        20,
                        25,
                        (Lay::RowMajor, Lay::RowMajor, Lay::ColMajor),
                        (true, false),
                    );
                }
            });
        }
    });
}

/// On a pool whose other worker is idle, that worker lends its core: the
/// call runs with the library on two threads, which is back on one after;
/// a product of 512³ multiply-adds through the gemm takes that path and
/// matches the reference (waiting long for the worker:
/// [`wait_long_for_lenders`]).
#[test]
fn blas_lent_worker_runs_the_library_on_two_threads() {
    let Some(lib) = lib() else { return };
    if lib.num_threads().is_none() {
        return;
    }
    let _alone = LENT_TESTS.lock();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let mut rng = SmallRng::seed_from_u64(50);
    pool.install(|| {
        wait_long_for_lenders();
        // The library counts as tuned (set to one thread) during the call.
        let tuned = lib.tuned_for_this_cpu();
        let mut seen = None;
        let call = || seen = Some((lib.num_threads(), lib.tuned_for_this_cpu()));
        assert!(with_lent_workers(&lib, 1, call), "the idle worker did not come");
        assert_eq!(seen, Some((Some(2), tuned)));
        let before = LENT_HERE.with(|n| n.get());
        let lays = (Lay::RowMajor, Lay::ColMajor, Lay::RowMajor);
        blas_case::<f64>(&lib, &mut rng, 512, 512, 512, lays, (false, false));
        assert_eq!(LENT_HERE.with(|n| n.get()), before + 1, "the product did not run with the lent worker");
    });
    assert_eq!(lib.num_threads(), Some(1));
}

/// A worker busy with a job of its own does not come: the caller stops
/// waiting, and the call is not made (the product then runs in blocks).
#[test]
fn blas_busy_worker_lends_nothing() {
    let Some(lib) = lib() else { return };
    let _alone = LENT_TESTS.lock();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let (started, release) = (AtomicBool::new(false), AtomicBool::new(false));
    pool.install(|| {
        rayon::scope(|s| {
            s.spawn(|_| {
                started.store(true, Ordering::Release);
                while !release.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
            });
            // Not run here: this thread spins, so the other worker took it.
            while !started.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            let mut called = false;
            let ran = with_lent_workers(&lib, 1, || called = true);
            release.store(true, Ordering::Release);
            assert!(!ran && !called, "a busy worker lent its core");
        });
    });
    // Outside a pool, or with no other worker, nobody can lend.
    assert!(!with_lent_workers(&lib, 1, || panic!("no pool here")));
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    assert!(!one.install(|| with_lent_workers(&lib, 0, || panic!("nobody to lend"))));
}

/// Products of 512³ multiply-adds (large enough to take the lent path) on
/// two pools at once, against the reference, while plain threads make
/// single-threaded calls: the two pools' lent calls take turns (or split
/// into blocks), and the plain calls stay right while the library runs on
/// two threads.
#[test]
fn blas_lent_calls_beside_other_callers() {
    let Some(lib) = lib() else { return };
    let _alone = LENT_TESTS.lock();
    let done = AtomicUsize::new(0);
    let lent = AtomicUsize::new(0);
    let lays = (Lay::RowMajor, Lay::RowMajor, Lay::RowMajor);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (lib, done, lent) = (&lib, &done, &lent);
            s.spawn(move || {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
                let mut rng = SmallRng::seed_from_u64(60 + t);
                pool.install(|| {
                    wait_long_for_lenders();
                    for _ in 0..2 {
                        let before = LENT_HERE.with(|n| n.get());
                        blas_case::<f64>(lib, &mut rng, 512, 512, 512, lays, (false, false));
                        lent.fetch_add(LENT_HERE.with(|n| n.get()) - before, Ordering::Relaxed);
                    }
                });
                done.fetch_add(1, Ordering::Release);
            });
        }
        for t in 0..2u64 {
            let (lib, done) = (&lib, &done);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(70 + t);
                let mut calls = 0;
                while done.load(Ordering::Acquire) < 2 || calls < 10 {
                    small_f64_case(lib, &mut rng);
                    calls += 1;
                }
            });
        }
    });
    // Lent calls take turns in the process, and the first one finds the
    // turn free: at least one of the four products ran with a lent worker.
    assert!(lent.load(Ordering::Relaxed) >= 1, "no product ran with a lent worker");
}

/// Padded leading dimensions and transposed/adjoint views, and a
/// conjugated column-major A accepted through the row-major mapping.
#[test]
fn blas_padded_and_views() {
    let Some(lib) = lib() else { return };
    let mut rng = SmallRng::seed_from_u64(5);
    let at = Tens::random::<C>(&[4, 3], &mut rng);
    let bt = Tens::random::<C>(&[3, 5], &mut rng);
    // A column-major with ld 6, conjugated; C row-major with ld 7.
    let mut a = Placed::<C>::with_strides(&at, &[1, 6], C::new(0.0, 0.0));
    let mut b = Placed::<C>::with_strides(&bt, &[1, 3], C::new(0.0, 0.0));
    let mut c = Placed::<C>::with_strides(&Tens::filled(&[4, 5], C::new(f64::NAN, 0.0)), &[7, 1], C::new(0.0, 0.0));
    let r = unsafe { gemm_blas_with(&lib, &c.op(false), Scalar::real(1.0), &a.op(true), &b.op(false), None) };
    r.expect("accepted").unwrap();
    let want = ref_gemm(C::new(1.0, 0.0), &at.conj(), &bt, None, &at);
    assert_close(&c.get(), &want, 1e-13, "conj col-major A, row-major C");
}

#[test]
fn blas_declines_layouts_it_cannot_take() {
    let Some(lib) = lib() else { return };
    let mut rng = SmallRng::seed_from_u64(6);
    let at = Tens::random::<C>(&[4, 3], &mut rng);
    let bt = Tens::random::<C>(&[3, 5], &mut rng);
    let ct = Tens::random::<C>(&[4, 5], &mut rng);
    let mut c = Placed::<C>::new(&ct, Lay::ColMajor, &mut rng);
    let before = c.get();
    let mut b = Placed::<C>::new(&bt, Lay::ColMajor, &mut rng);
    let cases: Vec<(Vec<isize>, bool, &str)> = vec![
        (vec![-1, 4], false, "negative"),
        (vec![2, 8], false, "unit stride"),
        (vec![1, 4], true, "conjugated"),
        (vec![1, 2], false, "leading dimension"),
    ];
    for (strides, conj, reason) in cases {
        let mut a = Placed::<C>::with_strides(&at, &strides, C::new(0.0, 0.0));
        let r = unsafe {
            gemm_blas_with(&lib, &c.op(false), Scalar::real(1.0), &a.op(conj), &b.op(false), Some(Scalar::real(1.0)))
        };
        match r {
            Err(why) => assert!(why.contains(reason), "strides {strides:?}: {why}"),
            Ok(_) => panic!("strides {strides:?} conj {conj}: accepted"),
        }
        assert_close(&c.get(), &before, 0.0, "declined calls write nothing");
    }
    // Overlapping C is an error for every backend, not a decline.
    let ext = [4usize, 5];
    let st = [0isize, 1];
    let mut a = Placed::<C>::new(&at, Lay::ColMajor, &mut rng);
    let cop = Operand { extents: &ext, strides: &st, ..c.op(false) };
    let r = unsafe { gemm_blas_with(&lib, &cop, Scalar::real(1.0), &a.op(false), &b.op(false), None) };
    assert_eq!(r.expect("ran").unwrap_err().status(), Status::InvalidArgument);
    // Shape errors name the shapes.
    let mut b2 = Placed::<C>::new(&Tens::random::<C>(&[5, 2], &mut rng), Lay::ColMajor, &mut rng);
    let mut c2 = Placed::<C>::new(&Tens::random::<C>(&[4, 2], &mut rng), Lay::ColMajor, &mut rng);
    let e = unsafe { gemm_blas_with(&lib, &c2.op(false), Scalar::real(1.0), &a.op(false), &b2.op(false), None) }
        .expect("ran")
        .unwrap_err();
    assert!(e.message().contains("A is 4x3") && e.message().contains("B is 5x2"), "{}", e.message());
    // Integer dtypes: declined.
    let mut iv = vec![0i32; 4];
    let e2 = [2usize, 2];
    let s2 = [2isize, 1];
    let iop = Operand { ptr: iv.as_mut_ptr() as *mut u8, dtype: DType::I32, extents: &e2, strides: &s2, conj: false };
    assert!(unsafe { gemm_blas_with(&lib, &iop, Scalar::real(1.0), &iop, &iop, None) }.is_err());
}

#[test]
fn blas_absent_declines() {
    let e = load_from(&[]).err().expect("no candidates");
    assert!(!e.is_empty());
    let e = load_from(&["/nonexistent/libta-no-blas.so"]).err().expect("missing file");
    assert!(e.contains("/nonexistent/libta-no-blas.so"), "{e}");
    // A library without gemm symbols is skipped with a reason.
    let e = load_from(&["libc.so.6"]).err().expect("libc has no dgemm_");
    assert!(e.contains("no sgemm_"), "{e}");
}

/// Runs this test binary again with `TA_BLAS_LIB` pointing at a missing
/// file: the process-wide loader then has no BLAS, and gemm declines with
/// the reason (see `child_without_blas`).
#[test]
fn blas_absent_in_subprocess() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["--exact", "sysblas::tests::child_without_blas", "--nocapture", "--test-threads=1"])
        .env(ENV_VAR, "/nonexistent/libta-no-blas.so")
        .env("TA_BLAS_TEST_CHILD", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed") && text.contains("child: declined"), "{text}");
}

#[test]
fn child_without_blas() {
    if std::env::var_os("TA_BLAS_TEST_CHILD").is_none() {
        return; // only meaningful in the subprocess above
    }
    assert!(blas_info().is_none());
    let mut rng = SmallRng::seed_from_u64(7);
    let mut a = Placed::<f64>::new(&Tens::random::<f64>(&[2, 2], &mut rng), Lay::RowMajor, &mut rng);
    let mut b = Placed::<f64>::new(&Tens::random::<f64>(&[2, 2], &mut rng), Lay::RowMajor, &mut rng);
    let ct = Tens::random::<f64>(&[2, 2], &mut rng);
    let mut c = Placed::<f64>::new(&ct, Lay::RowMajor, &mut rng);
    let r = unsafe { gemm_blas(&c.op(false), Scalar::real(1.0), &a.op(false), &b.op(false), None) };
    let Err(why) = r else { panic!("accepted without a BLAS") };
    assert!(why.contains("/nonexistent/libta-no-blas.so"), "{why}");
    assert_close(&c.get(), &ct, 0.0, "untouched");
    println!("child: declined: {why}");
}

#[test]
fn kernel_levels_and_fallback_notes() {
    assert_eq!(kernel_level("Prescott"), Some(2));
    assert_eq!(kernel_level("HASWELL"), Some(3));
    assert_eq!(kernel_level("SkylakeX"), Some(4));
    assert_eq!(kernel_level("Cooperlake"), Some(4));
    assert_eq!(kernel_level("riscv64_generic"), None);
    let note = fallback_note("Prescott", 4).expect("Prescott on AVX-512 is a fallback");
    assert!(note.contains("AVX-512") && note.contains("OPENBLAS_CORETYPE="), "{note}");
    assert!(fallback_note("Haswell", 4).is_some());
    assert!(fallback_note("Haswell", 3).is_none());
    assert!(fallback_note("SkylakeX", 4).is_none());
    assert!(fallback_note("Prescott", 2).is_none());
    // A name not known here gives no verdict rather than a wrong one.
    assert!(fallback_note("riscv64_generic", 4).is_none());
}

/// OpenBLAS reads `OPENBLAS_CORETYPE` when it loads, so each setting runs in
/// a child process (`child_kernel`): a forced old kernel is reported as a
/// fallback with the setting that fixes it, and that setting is then not.
#[test]
fn blas_info_names_a_fallback_kernel() {
    let Some(lib) = lib() else { return };
    let (Some(_), Some(cpu)) = (lib.core.as_ref(), cpu_level()) else {
        eprintln!("not an OpenBLAS with openblas_get_corename, or not x86-64: skipping");
        return;
    };
    let run = |coretype: &str| {
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(exe)
            .args(["--exact", "sysblas::tests::child_kernel", "--nocapture", "--test-threads=1"])
            .env("OPENBLAS_CORETYPE", coretype)
            .env("TA_BLAS_TEST_KERNEL_CHILD", "1")
            .env_remove(ENV_VAR)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && text.contains("1 passed"), "{text}");
        let at = text.find("child: ").unwrap_or_else(|| panic!("{text}"));
        text[at..].lines().next().unwrap().to_string()
    };
    if cpu >= 3 {
        let old = run("Prescott");
        assert!(old.contains("kernel Prescott") || old.contains("kernel prescott"), "{old}");
        assert!(old.contains("fallback") && old.contains("OPENBLAS_CORETYPE="), "{old}");
        // The setting the note names makes the note go away.
        let fix = old.split("OPENBLAS_CORETYPE=").nth(1).unwrap().split_whitespace().next().unwrap().to_string();
        let good = run(&fix);
        assert!(!good.contains("fallback"), "with OPENBLAS_CORETYPE={fix}: {good}");
        assert!(good.to_ascii_lowercase().contains(&format!("kernel {}", fix.to_ascii_lowercase())), "{good}");
    }
}

#[test]
fn child_kernel() {
    if std::env::var_os("TA_BLAS_TEST_KERNEL_CHILD").is_none() {
        return; // only meaningful in the subprocess above
    }
    println!("child: {}", blas_info().expect("a BLAS loads here"));
}
