//! Small library operations that are ready when they are submitted run on
//! the submitting thread (`ops::in_place`): they have completed when the
//! submission returns, with the results, errors and order that the workers
//! give; everything else still goes to the workers.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{blocker, f64s, read_f64, Gate, LONG};
use tensorasync::*;

/// C = A B for row-major n x n matrices, by the textbook loop.
fn matmul(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    let mut c = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            c[i * n + j] = (0..n).map(|k| a[i * n + k] * b[k * n + j]).sum();
        }
    }
    c
}

fn square(n: usize, seed: usize) -> Vec<f64> {
    (0..n * n).map(|i| ((i * 7 + seed * 3) % 11) as f64 - 5.0).collect()
}

#[test]
fn a_small_ready_operation_has_completed_when_its_submission_returns() {
    let rt = Runtime::new(2).unwrap();
    assert!(rt.small_in_place(), "on by default");
    let (av, bv) = (square(4, 1), square(4, 2));
    let (a, b) = (f64s(&[4, 4], &av), f64s(&[4, 4], &bv));
    let c = Tensor::zeros(DType::F64, &[4, 4], Order::RowMajor, Domain::Host).unwrap();
    let ev = ops::gemm(&c, Scalar::real(1.0), &a, &b, Scalar::real(0.0), Submit::on(&rt)).unwrap();
    assert!(matches!(ev.poll(), Some(Ok(()))), "complete at return");
    // A chain of 200 updates and a reduction, each complete at its return.
    let x = f64s(&[3], &[1.0, 2.0, 3.0]);
    let y = f64s(&[3], &[0.0; 3]);
    for _ in 0..200 {
        let ev = ops::axpy(&y, Scalar::real(0.5), &x, Submit::on(&rt)).unwrap();
        assert!(ev.is_complete());
    }
    let d = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
    assert!(ops::dot(&d, &x, &y, false, Submit::on(&rt)).unwrap().is_complete());
    let s = rt.stats();
    assert_eq!((s.submitted, s.completed, s.failed, s.steals), (202, 202, 0, 0));
    assert!(s.busy_ns.iter().all(|&b| b == 0), "no worker ran them: {:?}", s.busy_ns);
    assert_eq!(read_f64(&c), matmul(&av, &bv, 4));
    assert_eq!(read_f64(&y), vec![100.0, 200.0, 300.0]);
    assert_eq!(read_f64(&d), vec![1400.0]);
}

/// Each reason for the workers: the operation is not complete at return
/// (where something holds it back) or was taken from the ready queue (a
/// steal), and its result is the same.
#[test]
fn the_workers_run_it_when_in_place_is_off_deferred_called_back_blocked_poisoned_or_large() {
    let rt = Runtime::new(2).unwrap();
    let steals = |rt: &Runtime| {
        rt.wait_idle(LONG).unwrap();
        rt.stats().steals
    };
    let x = f64s(&[4], &[0.0; 4]);
    let fill = |v: f64, opts: Submit<'_>| ops::fill(&x, Scalar::real(v), opts).unwrap();

    // Turned off for the runtime, then on again.
    rt.set_small_in_place(false);
    assert!(!rt.small_in_place());
    fill(1.0, Submit::on(&rt)).wait(LONG).unwrap();
    assert_eq!(steals(&rt), 1);
    rt.set_small_in_place(true);
    assert!(fill(2.0, Submit::on(&rt)).is_complete());
    assert_eq!(steals(&rt), 1);

    // Deferred by the submission.
    fill(3.0, Submit { defer: true, ..Submit::on(&rt) }).wait(LONG).unwrap();
    assert_eq!(steals(&rt), 2);
    assert_eq!(read_f64(&x), vec![3.0; 4]);

    // With a callback: it runs on a worker, as documented.
    let seen: Arc<Mutex<Option<String>>> = Default::default();
    let s2 = seen.clone();
    let cb = Box::new(move |r: &Result<()>| {
        assert!(r.is_ok());
        *s2.lock().unwrap() = std::thread::current().name().map(String::from);
    });
    fill(4.0, Submit { callback: Some(cb), ..Submit::on(&rt) }).wait(LONG).unwrap();
    assert_eq!(steals(&rt), 3);
    let name = seen.lock().unwrap().clone().expect("the callback ran on a named thread");
    assert!(name.starts_with("ta-rt"), "callback on {name}");

    // Behind an unfinished access: not complete until the gate opens.
    let gate = Gate::default();
    ops::kernel("gate", &[(&x, Mode::Read)], blocker(&gate), Submit::on(&rt)).unwrap();
    let ev = fill(5.0, Submit::on(&rt));
    std::thread::sleep(Duration::from_millis(20));
    assert!(!ev.is_complete(), "ran past an unfinished reader");
    gate.open();
    ev.wait(LONG).unwrap();
    assert_eq!(read_f64(&x), vec![5.0; 4]);

    // Too large: 257 elements, and a 9x9 gemm.
    let before = steals(&rt);
    let big = f64s(&[257], &[0.0; 257]);
    ops::fill(&big, Scalar::real(1.0), Submit::on(&rt)).unwrap().wait(LONG).unwrap();
    assert_eq!(steals(&rt), before + 1);
    let (av, bv) = (square(9, 3), square(9, 4));
    let (a, b) = (f64s(&[9, 9], &av), f64s(&[9, 9], &bv));
    let c = Tensor::zeros(DType::F64, &[9, 9], Order::RowMajor, Domain::Host).unwrap();
    ops::gemm(&c, Scalar::real(1.0), &a, &b, Scalar::real(0.0), Submit::on(&rt)).unwrap().wait(LONG).unwrap();
    assert_eq!(steals(&rt), before + 2);
    assert_eq!(read_f64(&c), matmul(&av, &bv, 9));
    // 8x8 is small.
    let (av, bv) = (square(8, 5), square(8, 6));
    let (a, b) = (f64s(&[8, 8], &av), f64s(&[8, 8], &bv));
    let c = Tensor::zeros(DType::F64, &[8, 8], Order::RowMajor, Domain::Host).unwrap();
    assert!(ops::gemm(&c, Scalar::real(1.0), &a, &b, Scalar::real(0.0), Submit::on(&rt)).unwrap().is_complete());
    assert_eq!(steals(&rt), before + 2);
    assert_eq!(read_f64(&c), matmul(&av, &bv, 8));
}

/// A failure in place records the error as a worker would: the event has
/// it at return, the output is poisoned (a later reader fails with it, on a
/// worker, since the output is poisoned), and an overwrite cleans it.
#[test]
fn a_failure_in_place_poisons_the_output_as_a_worker_would() {
    let rt = Runtime::new(2).unwrap();
    let blas_only = Selector::only(&[BackendKind::Blas]);
    let (av, bv) = (square(3, 7), square(3, 8));
    let (a, b) = (f64s(&[3, 3], &av), f64s(&[3, 3], &bv));
    let mut errors = Vec::new();
    for defer in [false, true] {
        let c = Tensor::zeros(DType::F64, &[3, 3], Order::RowMajor, Domain::Host).unwrap();
        // Negative strides, which the BLAS backend declines at run time.
        let rev = c.slice(&[SliceSpec { start: 2, stop: -1, step: -1, drop: false }, SliceSpec::all(3)]).unwrap();
        let opts = Submit { selector: blas_only, defer, ..Submit::on(&rt) };
        let ev = ops::gemm(&rev, Scalar::real(1.0), &a, &b, Scalar::real(0.0), opts).unwrap();
        if !defer {
            assert!(ev.is_complete(), "ran in place");
        }
        let e = ev.wait(LONG).unwrap_err();
        assert_eq!(e.status(), Status::NoBackend);
        let d = Tensor::zeros(DType::F64, &[3, 3], Order::RowMajor, Domain::Host).unwrap();
        let e2 = ops::copy(&d, &c, Submit::on(&rt)).unwrap().wait(LONG).unwrap_err();
        assert_eq!((e2.status(), e2.message()), (e.status(), e.message()), "the reader fails with the writer's error");
        ops::assign_product(&c, Scalar::real(1.0), &a, &b, Submit::on(&rt)).unwrap().wait(LONG).unwrap();
        assert_eq!(read_f64(&c), matmul(&av, &bv, 3));
        errors.push(e.message().to_string());
    }
    assert_eq!(errors[0], errors[1], "the same error either way");
    let s = rt.stats();
    assert_eq!((s.failed, s.completed), (4, 6));
}

/// Submissions from several threads on shared small tensors: every update
/// is counted once whichever thread ran it (in place or on a worker).
#[test]
fn concurrent_submitters_on_shared_small_tensors_lose_no_update() {
    let rt = Runtime::new(2).unwrap();
    let y = f64s(&[4], &[0.0; 4]);
    let one = f64s(&[4], &[1.0; 4]);
    std::thread::scope(|s| {
        for t in 0..3 {
            let (rt, y, one) = (&rt, &y, &one);
            s.spawn(move || {
                for i in 0..2000 {
                    let opts = Submit { defer: (i + t) % 5 == 0, ..Submit::on(rt) };
                    ops::axpy(y, Scalar::real(1.0), one, opts).unwrap();
                }
            });
        }
    });
    rt.wait_idle(LONG).unwrap();
    assert_eq!(read_f64(&y), vec![6000.0; 4]);
    assert_eq!(rt.stats().completed, 6000);
}

/// What an operation run in place reports beyond its event: a completion
/// queue entry with its outcome (success and failure), the runtime's
/// counters in the detached form too, and no outstanding work at any time.
#[test]
fn an_operation_in_place_notifies_its_queue_and_is_counted_in_either_form() {
    let rt = Runtime::new(2).unwrap();
    let cq = CompletionQueue::new().unwrap();
    let x = f64s(&[3], &[1.0, 2.0, 3.0]);
    let y = f64s(&[3], &[1.0; 3]);
    let opts = |tag| Submit { cq: Some((&cq, tag)), ..Submit::on(&rt) };
    assert!(ops::axpy(&y, Scalar::real(2.0), &x, opts(7)).unwrap().is_complete());
    let () = ops::scale(&y, Scalar::real(0.5), opts(8).detached()).unwrap();
    assert_eq!(rt.outstanding(), 0, "nothing is outstanding after an in-place run");
    // A failure in place (the BLAS backend declines a reversed output at run time).
    let (a, c) = (f64s(&[3, 3], &square(3, 1)), f64s(&[3, 3], &[0.0; 9]));
    let rev = c.slice(&[SliceSpec { start: 2, stop: -1, step: -1, drop: false }, SliceSpec::all(3)]).unwrap();
    let blas_only = Submit { selector: Selector::only(&[BackendKind::Blas]), ..opts(9) };
    let ev = ops::gemm(&rev, Scalar::real(1.0), &a, &a, Scalar::real(0.0), blas_only).unwrap();
    let e = ev.poll().expect("complete at return").unwrap_err();
    assert_eq!(e.status(), Status::NoBackend);
    let got: Vec<(u64, Option<Status>)> =
        cq.poll(8).into_iter().map(|c| (c.tag, c.result.err().map(|e| e.status()))).collect();
    assert_eq!(got, vec![(7, None), (8, None), (9, Some(Status::NoBackend))]);
    let s = rt.stats();
    assert_eq!((s.submitted, s.completed, s.failed, s.pending, s.steals), (3, 3, 1, 0, 0));
    ops::copy(&x, &x.conj().unwrap(), Submit::on(&rt)).err(); // refused at submission: not counted
    assert_eq!(rt.stats().submitted, 3);
    assert_eq!(read_f64(&x), vec![1.0, 2.0, 3.0]);
}

/// A small operation refused at submission changes nothing: a plan error
/// leaves an unconstructed output unconstructed, and so does a runtime shut
/// down after the plan has constructed it.
#[test]
fn a_small_operation_refused_at_submission_leaves_its_output_as_it_was() {
    let rt = Runtime::new(1).unwrap();
    let (x, short) = (f64s(&[3], &[1.0, 2.0, 3.0]), f64s(&[2], &[1.0, 2.0]));
    let d = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
    let e = ops::dot(&d, &x, &short, false, Submit::on(&rt)).unwrap_err();
    assert_eq!(e.status(), Status::ShapeMismatch);
    assert_eq!(d.extents(), None, "still unconstructed after a plan error");
    rt.shutdown(ShutdownMode::Drain).unwrap();
    let e = ops::dot(&d, &x, &x, false, Submit::on(&rt)).unwrap_err();
    assert_eq!((e.status(), e.origin()), (Status::Shutdown, "dot"));
    assert_eq!(d.extents(), None, "still unconstructed after a refusal");
    let s = rt.stats();
    assert_eq!((s.submitted, s.completed), (0, 0));
    // The same dot on a running runtime constructs it, in place.
    let rt = Runtime::new(1).unwrap();
    assert!(ops::dot(&d, &x, &x, false, Submit::on(&rt)).unwrap().is_complete());
    assert_eq!(read_f64(&d), vec![14.0]);
}
