//! The CUDA domain (SPEC §2.7) on simulated devices: everything except the
//! leaf GPU kernels, on machines without a GPU. The simulated device keeps
//! "device memory" in host memory, runs each stream on its own thread, checks
//! every device address against live allocations, and can be paused, slowed
//! down and made to fail, so these tests observe placement, stream and marker
//! ordering, staging, declines, error paths, and that no CPU worker ever
//! waits for the device.
//!
//! Tests share the process's two simulated devices and take turns (`serial`),
//! since pausing or failing a device would disturb a neighbour.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use common::numeric::*;
use common::{read_f64, LONG};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use tensorasync::internals::device;
use tensorasync::internals::device::sim::{self, SimControl, SimOpKind};
use tensorasync::*;

const D0: Domain = Domain::Cuda(0);
const D1: Domain = Domain::Cuda(1);

/// Simulated devices for this process, one test at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    assert!(device::simulate(device::SimConfig::default()), "simulated devices are in use");
    for d in 0..2 {
        let c = ctl(d);
        c.resume();
        c.set_delay(Duration::ZERO);
        c.set_memory_limit(None);
    }
    // Earlier tests may have left work behind (zero fills of device tensors
    // run on the default runtime): let it finish first.
    Runtime::global().wait_idle(LONG).unwrap();
    for d in 0..2 {
        let t0 = std::time::Instant::now();
        while ctl(d).pending() > 0 {
            assert!(t0.elapsed() < Duration::from_secs(20), "device {d} never went idle");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    g
}

fn ctl(d: u32) -> Arc<SimControl> {
    sim::control(d).expect("a simulated device")
}

fn rt() -> Runtime {
    Runtime::new(2).unwrap()
}

/// A device copy of host values (via an unconstructed device tensor).
fn on(domain: Domain, host: &Tensor, rt: &Runtime) -> Tensor {
    let t = Tensor::unconstructed(host.dtype(), domain).unwrap();
    ops::copy(&t, host, Submit::on(rt)).unwrap();
    t
}

/// Read any tensor's values, wherever it lives.
fn values(t: &Tensor) -> Vec<C> {
    read(t)
}

#[test]
fn devices_are_counted_and_placement_is_carried_by_every_handle() {
    let _g = serial();
    assert_eq!(device::device_count().unwrap(), 2);
    let t = Tensor::zeros(DType::F64, &[4, 6], Order::RowMajor, D1).unwrap();
    assert_eq!(t.domain(), D1);
    assert_eq!(read_f64(&t), vec![0.0; 24], "zeros on a device are zero");
    let v = t.slice(&[SliceSpec::range(1, 3), SliceSpec { start: 5, stop: -1, step: -2, drop: false }]).unwrap();
    assert_eq!(v.domain(), D1);
    assert_eq!(t.transpose().unwrap().domain(), D1);
    let blocks = BlockArray::tiled(DType::F32, &[5, 5], &[2, 2], Order::ColMajor, D0).unwrap();
    assert_eq!(blocks.domain(), D0);
    assert_eq!(blocks.tile(&[2, 1]).unwrap().domain(), D0);
    assert_eq!(blocks.all().unwrap().domain(), D0);
    let e = Tensor::unconstructed(DType::F64, Domain::Cuda(7)).unwrap_err();
    assert_eq!(e.status(), Status::CudaUnavailable);
    assert!(e.message().contains("no CUDA device 7"), "{}", e.message());
}

#[test]
fn copies_in_every_direction_with_strides_and_conj() {
    let _g = serial();
    let rt = rt();
    let mut rng = SmallRng::seed_from_u64(1);
    for dtype in [DType::F32, DType::F64, DType::C64, DType::C128] {
        let vals = random(&mut rng, 4 * 5, dtype.is_complex());
        let host = make(dtype, &[4, 5], Order::RowMajor, &vals);
        // Host -> device 0 (constructs), device 0 -> device 1, device 1 -> host.
        let d0 = on(D0, &host, &rt);
        let d1 = on(D1, &d0, &rt);
        assert_close(&values(&d1), &vals, dtype, "round trip");
        // A strided host view into a column-major device tensor, and back out
        // through a reversed device slice into a transposed host view.
        let dcol = Tensor::zeros(dtype, &[5, 4], Order::ColMajor, D0).unwrap();
        ops::copy(&dcol, &host.transpose().unwrap(), Submit::on(&rt)).unwrap();
        assert_close(&values(&dcol), &transpose(&vals, 4, 5), dtype, "transposed upload");
        let back = Tensor::zeros(dtype, &[4, 5], Order::RowMajor, Domain::Host).unwrap();
        let rows_rev = dcol.transpose().unwrap().slice(&[SliceSpec::all(4), SliceSpec::all(5)]).unwrap();
        ops::copy(&back, &rows_rev, Submit::on(&rt)).unwrap();
        assert_close(&values(&back), &vals, dtype, "download from a strided device view");
        // Every second column of the device tensor, into a host view.
        let cols = d1.slice(&[SliceSpec::all(4), SliceSpec { start: 0, stop: 5, step: 2, drop: false }]).unwrap();
        let want: Vec<C> = (0..4).flat_map(|i| [0, 2, 4].map(|j| vals[i * 5 + j])).collect();
        assert_close(&values(&cols), &want, dtype, "stepped device slice");
        if dtype.is_complex() {
            // A conj view is conjugated on the way to the host.
            let conj: Vec<C> = vals.iter().map(|z| z.conj()).collect();
            assert_close(&values(&d0.conj().unwrap()), &conj, dtype, "conj download");
            let h2 = Tensor::unconstructed(dtype, Domain::Host).unwrap();
            ops::copy(&h2, &d1.conj().unwrap(), Submit::on(&rt)).unwrap();
            assert_close(&values(&h2), &conj, dtype, "conj copy to a host tensor");
        }
    }
    // Integer dtypes copy too.
    let ints: Vec<i32> = (0..12).map(|i| i * 7 - 30).collect();
    let h = Tensor::from_slice(&[3, 4], Order::RowMajor, &ints).unwrap();
    let d = on(D1, &h, &rt);
    let mut out = vec![0i32; 12];
    unsafe { ops::copy_out(&d, out.as_mut_ptr().cast(), 12, None, Submit::on(&rt)) }.unwrap().wait(LONG).unwrap();
    assert_eq!(out, ints);
}

#[test]
fn fill_scale_and_axpy_on_device_views() {
    let _g = serial();
    let rt = rt();
    let mut rng = SmallRng::seed_from_u64(2);
    for dtype in [DType::F32, DType::F64, DType::C64, DType::C128] {
        let cx = dtype.is_complex();
        let yv = random(&mut rng, 6 * 4, cx);
        let xv = random(&mut rng, 6 * 4, cx);
        let y = on(D0, &make(dtype, &[6, 4], Order::RowMajor, &yv), &rt);
        let x = on(D0, &make(dtype, &[6, 4], Order::ColMajor, &xv), &rt);
        let (alpha, s) = if cx {
            (Scalar::complex(0.5, -2.0), Scalar::complex(-1.5, 0.25))
        } else {
            (Scalar::real(0.5), Scalar::real(-1.5))
        };
        let (a, sc) = (C::new(alpha.re, alpha.im), C::new(s.re, s.im));
        // y = alpha * x + y over everything; then scale a reversed row slice;
        // then fill a stepped column slice.
        ops::axpy(&y, alpha, &x, Submit::on(&rt)).unwrap();
        let rev = y.slice(&[SliceSpec { start: 4, stop: 0, step: -1, drop: false }, SliceSpec::all(4)]).unwrap();
        ops::scale(&rev, s, Submit::on(&rt)).unwrap();
        let cols = y.slice(&[SliceSpec::all(6), SliceSpec { start: 1, stop: 4, step: 2, drop: false }]).unwrap();
        ops::fill(&cols, Scalar::real(3.0), Submit::on(&rt)).unwrap();
        let mut want: Vec<C> = yv.iter().zip(&xv).map(|(y, x)| y + a * x).collect();
        for i in 1..=4 {
            for j in 0..4 {
                want[i * 4 + j] *= sc;
            }
        }
        for i in 0..6 {
            for j in [1, 3] {
                want[i * 4 + j] = C::new(3.0, 0.0);
            }
        }
        assert_close(&values(&y), &want, dtype, "fill/scale/axpy");
        // axpy between views with opposite strides.
        let z = Tensor::zeros(dtype, &[6], Order::RowMajor, D0).unwrap();
        let xr = x.slice(&[SliceSpec { start: 5, stop: -1, step: -1, drop: false }, SliceSpec::index(2)]).unwrap();
        ops::axpy(&z, Scalar::real(2.0), &xr, Submit::on(&rt)).unwrap();
        let want: Vec<C> = (0..6).map(|i| xv[(5 - i) * 4 + 2] * 2.0).collect();
        assert_close(&values(&z), &want, dtype, "axpy with a reversed x");
    }
}

#[test]
fn the_gemm_family_runs_through_the_device_blas() {
    let _g = serial();
    let rt = rt();
    let mut rng = SmallRng::seed_from_u64(3);
    let (m, k, n) = (5, 3, 4);
    for dtype in [DType::F32, DType::F64, DType::C64, DType::C128] {
        let cx = dtype.is_complex();
        let (av, bv, cv) = (random(&mut rng, m * k, cx), random(&mut rng, k * n, cx), random(&mut rng, m * n, cx));
        let a = on(D1, &make(dtype, &[m, k], Order::RowMajor, &av), &rt);
        let b = on(D1, &make(dtype, &[k, n], Order::ColMajor, &bv), &rt);
        // assign_product constructs its device output.
        let c = Tensor::unconstructed(dtype, D1).unwrap();
        ops::assign_product(&c, Scalar::real(2.0), &a, &b, Submit::on(&rt)).unwrap();
        let ab = matmul(&av, &bv, m, k, n);
        assert_close(&values(&c), &ab.iter().map(|z| z * 2.0).collect::<Vec<_>>(), dtype, "assign_product");
        // gemm with a transposed (and, for complex, conjugated) view.
        let c2 = on(D1, &make(dtype, &[m, n], Order::RowMajor, &cv), &rt);
        let at = on(D1, &make(dtype, &[k, m], Order::RowMajor, &transpose(&av, m, k)), &rt);
        let a_view = if cx { at.transpose().unwrap().conj().unwrap() } else { at.transpose().unwrap() };
        let a_logical: Vec<C> = if cx { av.iter().map(|z| z.conj()).collect() } else { av.clone() };
        let (alpha, beta) = if cx {
            (Scalar::complex(0.5, 1.0), Scalar::complex(-1.0, 0.5))
        } else {
            (Scalar::real(0.5), Scalar::real(-1.0))
        };
        ops::gemm(&c2, alpha, &a_view, &b, beta, Submit::on(&rt)).unwrap();
        let p = matmul(&a_logical, &bv, m, k, n);
        let want: Vec<C> =
            p.iter().zip(&cv).map(|(p, c)| C::new(alpha.re, alpha.im) * p + C::new(beta.re, beta.im) * c).collect();
        assert_close(&values(&c2), &want, dtype, "gemm with transposed/conj A");
        // add_product needs a constructed output of the right shape.
        ops::add_product(&c, Scalar::real(1.0), &a, &b, Submit::on(&rt)).unwrap();
        assert_close(&values(&c), &ab.iter().map(|z| z * 3.0).collect::<Vec<_>>(), dtype, "add_product");
        let e =
            ops::add_product(&Tensor::unconstructed(dtype, D1).unwrap(), Scalar::real(1.0), &a, &b, Submit::on(&rt))
                .unwrap_err();
        assert_eq!(e.status(), Status::Unconstructed);
    }
}

#[test]
fn chains_stay_on_the_device_and_no_worker_waits_for_it() {
    let _g = serial();
    let rt = rt();
    let c = ctl(0);
    let x = on(D0, &Tensor::from_slice(&[64], Order::RowMajor, &[1.0f64; 64]).unwrap(), &rt);
    x.wait(LONG).unwrap();
    c.clear_log();
    c.pause();
    let executed = c.executed();
    // 200 dependent device operations, submitted while the device is paused.
    let alpha = |i: usize| Scalar::real(if i % 2 == 0 { 2.0 } else { 0.5 });
    for i in 0..199 {
        ops::scale(&x, alpha(i), Submit::on(&rt).detached()).unwrap();
    }
    let last = ops::scale(&x, alpha(199), Submit::on(&rt)).unwrap();
    // Every one of them reaches the device queue without any of them having
    // run: each was released when its predecessor was *issued*.
    let t0 = std::time::Instant::now();
    while c.pending() < 200 {
        assert!(t0.elapsed() < Duration::from_secs(20), "only {} commands queued", c.pending());
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(c.executed(), executed, "the paused device ran nothing");
    assert!(last.poll().is_none(), "not complete while the device is paused");
    // Both workers are free: host work runs to completion meanwhile.
    let h = Tensor::from_slice(&[3], Order::RowMajor, &[1.0f64, 2.0, 3.0]).unwrap();
    for _ in 0..10 {
        ops::scale(&h, Scalar::real(2.0), Submit::on(&rt)).unwrap();
    }
    h.wait(LONG).unwrap();
    assert_eq!(read_f64(&h), vec![1024.0, 2048.0, 3072.0]);
    c.resume();
    last.wait(LONG).unwrap();
    assert_eq!(read_f64(&x), vec![1.0; 64]);
    // One stream, no cross-stream waits, notifications after the work.
    let log: Vec<_> = c.log().into_iter().filter(|o| o.kind == SimOpKind::Scal).collect();
    assert_eq!(log.len(), 200);
    assert!(log.iter().all(|o| o.stream == log[0].stream), "the chain stayed on one stream");
    assert!(!c.log().iter().any(|o| o.kind == SimOpKind::WaitMarker), "no cross-stream waits in a chain");
}

#[test]
fn work_on_several_streams_joins_through_markers() {
    let _g = serial();
    let rt = rt();
    let c = ctl(0);
    let mk = |v: f64| on(D0, &Tensor::from_slice(&[32], Order::RowMajor, &[v; 32]).unwrap(), &rt);
    let (x, y) = (mk(1.0), mk(10.0));
    x.wait(LONG).unwrap();
    y.wait(LONG).unwrap();
    c.clear_log();
    c.set_delay(Duration::from_millis(2));
    // Independent chains go to different streams (round robin) ...
    for _ in 0..3 {
        ops::scale(&x, Scalar::real(2.0), Submit::on(&rt)).unwrap();
        ops::scale(&y, Scalar::real(3.0), Submit::on(&rt)).unwrap();
    }
    // ... and an operation reading both waits for the other stream's marker.
    ops::axpy(&y, Scalar::real(1.0), &x, Submit::on(&rt)).unwrap();
    assert_eq!(read_f64(&y), vec![270.0 + 8.0; 32]);
    let log = c.log();
    let axpy = log.iter().position(|o| o.kind == SimOpKind::Axpy).expect("axpy ran");
    let scal_streams: std::collections::HashSet<u32> =
        log.iter().filter(|o| o.kind == SimOpKind::Scal).map(|o| o.stream).collect();
    assert_eq!(scal_streams.len(), 2, "two chains, two streams");
    let wait = log
        .iter()
        .position(|o| o.kind == SimOpKind::WaitMarker && o.stream == log[axpy].stream)
        .expect("a marker wait");
    assert!(wait < axpy);
    assert_eq!(log.iter().filter(|o| o.kind == SimOpKind::Scal).count(), 6);
    assert!(log[..axpy].iter().filter(|o| o.kind == SimOpKind::Scal).count() == 6, "every scale ran before the axpy");
}

#[test]
fn host_visible_completion_fires_only_once_results_are_there() {
    let _g = serial();
    let rt = rt();
    let c = ctl(1);
    let vals: Vec<f64> = (0..1000).map(|i| i as f64).collect();
    let d = on(D1, &Tensor::from_slice(&[1000], Order::RowMajor, &vals).unwrap(), &rt);
    ops::scale(&d, Scalar::real(-1.0), Submit::on(&rt)).unwrap();
    c.set_delay(Duration::from_millis(20));
    // The callback reads the caller's buffer: the download must be unpacked by then.
    let out = Arc::new(Mutex::new(vec![0.0f64; 1000]));
    let seen = Arc::new(AtomicUsize::new(0));
    let (o2, s2) = (out.clone(), seen.clone());
    let cb: Callback = Box::new(move |r| {
        r.as_ref().unwrap();
        let ok = o2.lock().unwrap().iter().enumerate().all(|(i, &v)| v == -(i as f64));
        s2.store(if ok { 1 } else { 2 }, Ordering::SeqCst);
    });
    let ptr = out.lock().unwrap().as_mut_ptr();
    let ev = unsafe {
        ops::copy_out(
            &d,
            ptr.cast(),
            1000,
            None,
            Submit { runtime: Some(&rt), callback: Some(cb), ..Default::default() },
        )
    }
    .unwrap();
    ev.wait(LONG).unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 1, "the callback saw the downloaded values");
    // Waiting on the device tensor waits for everything enrolled on it.
    ops::fill(&d, Scalar::real(5.0), Submit::on(&rt)).unwrap();
    d.wait(LONG).unwrap();
    c.set_delay(Duration::ZERO);
    assert_eq!(read_f64(&d), vec![5.0; 1000]);
}

#[test]
fn cuda_errors_poison_outputs_with_the_error_name() {
    let _g = serial();
    let rt = rt();
    let c = ctl(0);
    let x = Tensor::zeros(DType::F64, &[16], Order::RowMajor, D0).unwrap();
    ops::fill(&x, Scalar::real(1.0), Submit::on(&rt)).unwrap();
    x.wait(LONG).unwrap();
    let y = Tensor::zeros(DType::F64, &[16], Order::RowMajor, D0).unwrap();
    y.wait(LONG).unwrap();
    // An asynchronous failure: the scale's command fails on the device.
    c.pause();
    c.fail_next("CUDA_ERROR_ILLEGAL_ADDRESS");
    let ev = ops::scale(&x, Scalar::real(2.0), Submit::on(&rt)).unwrap();
    // A dependent device operation is queued behind it before anyone knows.
    let ev2 = ops::axpy(&y, Scalar::real(1.0), &x, Submit::on(&rt)).unwrap();
    c.resume();
    let e = ev.wait(LONG).unwrap_err();
    assert_eq!(e.status(), Status::CudaError);
    assert!(e.message().contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{}", e.message());
    assert_eq!(e.origin(), "scale");
    // The dependent operation and every reader report that same error.
    assert!(ev2.wait(LONG).unwrap_err().same_as(&e));
    assert!(y.wait(LONG).unwrap_err().same_as(&e));
    let mut out = [0.0f64; 16];
    let r = unsafe { ops::copy_out(&x, out.as_mut_ptr().cast(), 16, None, Submit::on(&rt)) }.unwrap().wait(LONG);
    assert!(r.unwrap_err().same_as(&e));
    // An overwrite cleans it.
    ops::fill(&x, Scalar::real(4.0), Submit::on(&rt)).unwrap();
    assert_eq!(read_f64(&x), vec![4.0; 16]);
    // A call that fails when the work is queued.
    c.fail_next_call("CUDA_ERROR_LAUNCH_FAILED");
    let e = ops::scale(&x, Scalar::real(2.0), Submit::on(&rt)).unwrap().wait(LONG).unwrap_err();
    assert_eq!(e.status(), Status::CudaError);
    assert!(e.message().contains("CUDA_ERROR_LAUNCH_FAILED"), "{}", e.message());
}

#[test]
fn out_of_memory_is_a_status() {
    let _g = serial();
    let rt = rt();
    let c = ctl(1);
    c.set_memory_limit(Some(c.allocated() + (1 << 20)));
    let e = Tensor::zeros(DType::F64, &[1 << 18], Order::RowMajor, D1).unwrap_err();
    assert_eq!(e.status(), Status::OutOfMemory);
    assert!(e.message().contains("CUDA_ERROR_OUT_OF_MEMORY"), "{}", e.message());
    // An output constructed at submission: the submission reports it.
    let a = Tensor::zeros(DType::F32, &[256, 1], Order::RowMajor, D1).unwrap();
    let b = Tensor::zeros(DType::F32, &[1, 2048], Order::RowMajor, D1).unwrap();
    let out = Tensor::unconstructed(DType::F32, D1).unwrap();
    let e = ops::assign_product(&out, Scalar::real(1.0), &a, &b, Submit::on(&rt)).unwrap_err();
    assert_eq!(e.status(), Status::OutOfMemory);
    c.set_memory_limit(None);
    ops::assign_product(&out, Scalar::real(1.0), &a, &b, Submit::on(&rt)).unwrap();
    out.wait(LONG).unwrap();
    // Freeing the tensor gives its memory back (once the last access has
    // let go of it).
    let with = c.allocated();
    drop(out);
    rt.wait_idle(LONG).unwrap();
    let t0 = std::time::Instant::now();
    while c.allocated() != with - 256 * 2048 * 4 {
        assert!(t0.elapsed() < Duration::from_secs(20), "still {} bytes allocated", c.allocated());
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn mixed_domains_fail_at_submission_unless_a_transfer_is_asked_for() {
    let _g = serial();
    let rt = rt();
    let hx = Tensor::from_slice(&[4], Order::RowMajor, &[1.0f64, 2.0, 3.0, 4.0]).unwrap();
    let dy = on(D0, &Tensor::from_slice(&[4], Order::RowMajor, &[10.0f64; 4]).unwrap(), &rt);
    let e = ops::axpy(&dy, Scalar::real(1.0), &hx, Submit::on(&rt)).unwrap_err();
    assert_eq!(e.status(), Status::DomainMismatch);
    assert!(e.message().contains("TA_SUBMIT_TRANSFER") && !e.message().contains("Submit::"), "{}", e.message());
    ops::axpy(&dy, Scalar::real(1.0), &hx, Submit { runtime: Some(&rt), transfer: true, ..Default::default() })
        .unwrap();
    assert_eq!(read_f64(&dy), vec![11.0, 12.0, 13.0, 14.0]);
    // gemm: host A and device-1 B into a device-0 C.
    let a = Tensor::from_slice(&[2, 2], Order::RowMajor, &[1.0f64, 2.0, 3.0, 4.0]).unwrap();
    let b = on(D1, &Tensor::from_slice(&[2, 2], Order::RowMajor, &[1.0f64, 0.0, 0.0, 2.0]).unwrap(), &rt);
    let c = Tensor::unconstructed(DType::F64, D0).unwrap();
    assert_eq!(
        ops::assign_product(&c, Scalar::real(1.0), &a, &b, Submit::on(&rt)).unwrap_err().status(),
        Status::DomainMismatch
    );
    ops::assign_product(
        &c,
        Scalar::real(1.0),
        &a,
        &b,
        Submit { runtime: Some(&rt), transfer: true, ..Default::default() },
    )
    .unwrap();
    assert_eq!(read_f64(&c), vec![1.0, 4.0, 3.0, 8.0]);
    // User kernels take host tensors only.
    let e = ops::kernel("k", &[(&dy, Mode::Update)], KernelFn::new(|_| Ok(())), Submit::on(&rt)).unwrap_err();
    assert_eq!(e.status(), Status::DomainMismatch);
}

#[test]
fn backends_decline_and_the_walk_names_them() {
    let _g = serial();
    let rt = rt();
    // A layout cuBLAS cannot take (no unit stride): declined at run time,
    // and the error names the backend and its reason.
    let big = Tensor::zeros(DType::F64, &[6, 6], Order::RowMajor, D0).unwrap();
    let odd = big
        .slice(&[
            SliceSpec { start: 0, stop: 6, step: 2, drop: false },
            SliceSpec { start: 0, stop: 6, step: 2, drop: false },
        ])
        .unwrap();
    let b = Tensor::zeros(DType::F64, &[3, 3], Order::RowMajor, D0).unwrap();
    let c = Tensor::zeros(DType::F64, &[3, 3], Order::RowMajor, D0).unwrap();
    let e =
        ops::gemm(&c, Scalar::real(1.0), &odd, &b, Scalar::real(0.0), Submit::on(&rt)).unwrap().wait(LONG).unwrap_err();
    assert_eq!(e.status(), Status::NoBackend);
    assert!(e.message().contains("cuda: ") && e.message().contains("unit stride"), "{}", e.message());
    // No device backend offers integer scaling or reductions: known at submission.
    let i = Tensor::zeros(DType::I32, &[4], Order::RowMajor, D0).unwrap();
    assert_eq!(ops::scale(&i, Scalar::real(2.0), Submit::on(&rt)).unwrap_err().status(), Status::Unsupported);
    let s = Tensor::unconstructed(DType::F64, D0).unwrap();
    assert_eq!(ops::sum(&s, &b, None, Submit::on(&rt)).unwrap_err().status(), Status::Unsupported);
    // Host operands with CUDA allowed first: CUDA does not offer the host
    // domain, so the native backend runs it.
    let h = Tensor::from_slice(&[2], Order::RowMajor, &[1.0f64, 2.0]).unwrap();
    let sel = Selector::only(&[BackendKind::Cuda, BackendKind::Native]);
    ops::scale(&h, Scalar::real(3.0), Submit { runtime: Some(&rt), selector: sel, ..Default::default() }).unwrap();
    assert_eq!(read_f64(&h), vec![3.0, 6.0]);
    let only = Selector::only(&[BackendKind::Cuda]);
    // Only CUDA allowed for host operands: no allowed backend runs there at all.
    let e = ops::scale(&h, Scalar::real(3.0), Submit { runtime: Some(&rt), selector: only, ..Default::default() })
        .unwrap_err();
    assert_eq!(e.status(), Status::NoBackend, "{e}");
    assert!(e.message().contains("host"), "{e}");
}

#[test]
fn staging_buffers_are_reused_and_device_memory_is_released() {
    let _g = serial();
    let rt = rt();
    let c = ctl(1);
    let before = c.allocated();
    {
        let d = Tensor::zeros(DType::F64, &[4096], Order::RowMajor, D1).unwrap();
        let data = vec![1.5f64; 4096];
        let upload = |d: &Tensor| {
            unsafe {
                ops::copy_in(d, data.as_ptr().cast(), Layout::contiguous(&[4096], Order::RowMajor), Submit::on(&rt))
            }
            .unwrap();
            ops::scale(d, Scalar::real(2.0), Submit::on(&rt)).unwrap();
        };
        // One at a time: one staging buffer serves every upload.
        for _ in 0..20 {
            upload(&d);
            d.wait(LONG).unwrap();
        }
        let one = c.host_allocated();
        assert!(one <= 65536, "{one} bytes of staging for sequential 32 KiB uploads");
        // Uploads submitted while the device is paused are all in flight at
        // once, each holding its own buffer until its copy is done ...
        let burst = |d: &Tensor| {
            c.pause();
            for _ in 0..30 {
                upload(d);
            }
            // Each pair queues 6 commands (copy, scal, and a marker and a
            // notification after each): wait until all are queued.
            let t0 = std::time::Instant::now();
            while c.pending() < 30 * 6 {
                assert!(t0.elapsed() < Duration::from_secs(20));
                std::thread::sleep(Duration::from_millis(1));
            }
            c.resume();
            d.wait(LONG).unwrap();
        };
        burst(&d);
        let first = c.host_allocated();
        assert!(first >= 30 * 32768, "{first} bytes for 30 uploads in flight");
        // ... and a second burst reuses them instead of allocating more.
        burst(&d);
        assert_eq!(c.host_allocated(), first, "the second burst reused the pooled buffers");
        assert_eq!(read_f64(&d), vec![3.0; 4096]);
        assert!(c.allocated() >= before + 4096 * 8, "allocated {} before {before}", c.allocated());
    }
    rt.wait_idle(LONG).unwrap();
    Runtime::global().wait_idle(LONG).unwrap();
    assert_eq!(c.allocated(), before, "the device tensor's memory went back after its last access");
}
