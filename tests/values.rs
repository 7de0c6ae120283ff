//! Values, errors as values, construction, release and shutdown (SPEC §2.2, §2.6).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use tensorasync::*;

fn failing(msg: &'static str) -> KernelFn {
    KernelFn::new(move |c| {
        c.set_message(msg);
        Err(KernelFailure { code: 7, message: None })
    })
}

#[test]
fn a_kernel_error_reaches_every_downstream_reader_waiter_event_and_callback() {
    let rt = Runtime::new(2).unwrap();
    let cq = CompletionQueue::new().unwrap();
    let a = f64s(&[2], &[1.0, 2.0]);
    let b = f64s(&[2], &[0.0, 0.0]);
    let c = f64s(&[2], &[0.0, 0.0]);
    let fail_ev =
        ops::kernel("broken_kernel", &[(&a, Mode::Update)], failing("disk on fire"), Submit::on(&rt)).unwrap();
    // Downstream: a reader of a that writes b, an updater of a, a reader of b
    // that writes c (two hops), with every kind of notification.
    let cb_seen: Arc<Mutex<Vec<Error>>> = Default::default();
    let cbs = cb_seen.clone();
    let ev_copy = ops::copy(
        &b,
        &a,
        Submit {
            runtime: Some(&rt),
            callback: Some(Box::new(move |r| cbs.lock().unwrap().push(r.clone().unwrap_err()))),
            cq: Some((&cq, 11)),
            ..Default::default()
        },
    )
    .unwrap();
    let ev_scale = ops::scale(&a, Scalar::real(2.0), Submit::on(&rt)).unwrap();
    let ev_hop2 =
        ops::axpy(&c, Scalar::real(1.0), &b, Submit { runtime: Some(&rt), cq: Some((&cq, 12)), ..Default::default() })
            .unwrap();

    let original = fail_ev.wait(LONG).unwrap_err();
    assert_eq!(original.status(), Status::KernelFailed);
    assert_eq!(original.message(), "disk on fire");
    assert_eq!(original.origin(), "broken_kernel");
    assert_eq!(original.code(), 7);
    for (what, ev) in [("copy", &ev_copy), ("scale", &ev_scale), ("two hops", &ev_hop2)] {
        let e = ev.wait(LONG).unwrap_err();
        assert!(e.same_as(&original), "{what}: error was re-created instead of propagated");
        assert_eq!(e.message(), "disk on fire");
        assert_eq!(e.origin(), "broken_kernel");
    }
    for t in [&a, &b, &c] {
        let e = t.wait(LONG).unwrap_err();
        assert!(e.same_as(&original));
    }
    let seen = cb_seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].same_as(&original));
    let mut entries = cq.poll(16);
    entries.sort_by_key(|e| e.tag);
    assert_eq!(entries.iter().map(|e| e.tag).collect::<Vec<_>>(), vec![11, 12]);
    for e in entries {
        assert!(e.result.unwrap_err().same_as(&original));
    }
}

#[test]
fn an_overwrite_clears_a_poison() {
    let rt = Runtime::new(2).unwrap();
    let a = f64s(&[3], &[1.0, 2.0, 3.0]);
    ops::kernel("broken", &[(&a, Mode::Update)], failing("bad"), Submit::on(&rt)).unwrap();
    assert_eq!(a.wait(LONG).unwrap_err().status(), Status::KernelFailed);
    // An update fails with the same error...
    let e = ops::scale(&a, Scalar::real(2.0), Submit::on(&rt)).unwrap().wait(LONG).unwrap_err();
    assert_eq!(e.message(), "bad");
    // ... a pure overwrite gives a fresh clean value ...
    ops::fill(&a, Scalar::real(5.0), Submit::on(&rt)).unwrap();
    a.wait(LONG).unwrap();
    assert_eq!(read_f64(&a), vec![5.0; 3]);
    // ... and so does copy-in, after another failure.
    ops::kernel("broken", &[(&a, Mode::Update)], failing("bad again"), Submit::on(&rt)).unwrap();
    let src = [9.0f64, 8.0, 7.0];
    let ev =
        unsafe { ops::copy_in(&a, src.as_ptr().cast(), Layout::contiguous(&[3], Order::RowMajor), Submit::on(&rt)) }
            .unwrap();
    ev.wait(LONG).unwrap();
    assert_eq!(read_f64(&a), vec![9.0, 8.0, 7.0]);
}

#[test]
fn reading_an_unconstructed_tensor_fails_with_its_own_status() {
    let rt = Runtime::new(1).unwrap();
    let u = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
    let y = f64s(&[2], &[0.0, 0.0]);
    let e = ops::axpy(&y, Scalar::real(1.0), &u, Submit::on(&rt)).unwrap_err();
    assert_eq!(e.status(), Status::Unconstructed);
    let mut out = [0.0f64; 2];
    let e = unsafe { ops::copy_out(&u, out.as_mut_ptr().cast(), 2, None, Submit::on(&rt)) }.unwrap_err();
    assert_eq!(e.status(), Status::Unconstructed);
    assert_eq!(u.wait(LONG).unwrap_err().status(), Status::Unconstructed);
    assert_eq!(u.extents(), None);
    // An overwrite constructs it; the shape is known at once.
    ops::copy(&u, &f64s(&[2], &[3.0, 4.0]), Submit::on(&rt)).unwrap();
    assert_eq!(u.extents().unwrap().as_slice(), &[2]);
    ops::axpy(&y, Scalar::real(1.0), &u, Submit::on(&rt)).unwrap();
    assert_eq!(read_f64(&y), vec![3.0, 4.0]);
    // A shape mismatch known at submission is rejected and enrolls nothing.
    let z = f64s(&[3], &[0.0; 3]);
    assert_eq!(ops::axpy(&z, Scalar::real(1.0), &u, Submit::on(&rt)).unwrap_err().status(), Status::ShapeMismatch);
    assert_eq!(read_f64(&z), vec![0.0; 3]);
}

#[test]
fn submission_checks_enroll_nothing() {
    let rt = Runtime::new(1).unwrap();
    let x = f64s(&[2], &[1.0, 2.0]);
    let f = Tensor::from_slice(&[2], Order::RowMajor, &[1.0f32, 2.0]).unwrap();
    assert_eq!(ops::axpy(&x, Scalar::real(1.0), &f, Submit::on(&rt)).unwrap_err().status(), Status::DtypeMismatch);
    assert_eq!(ops::axpy(&x, Scalar::real(1.0), &x, Submit::on(&rt)).unwrap_err().status(), Status::Alias);
    assert_eq!(
        ops::fill(&x, Scalar::complex(1.0, 1.0), Submit::on(&rt)).unwrap_err().status(),
        Status::InvalidArgument
    );
    let k = kernel(|_| {});
    assert_eq!(
        ops::kernel("rw", &[(&x, Mode::Read), (&x, Mode::Update)], k, Submit::on(&rt)).unwrap_err().status(),
        Status::Alias
    );
    let data = [1.0f64, 2.0];
    let ro = unsafe {
        Tensor::wrap(DType::F64, Layout::contiguous(&[2], Order::RowMajor), data.as_ptr() as *mut u8, false, None)
    }
    .unwrap();
    assert!(ro.is_read_only());
    assert_eq!(ops::fill(&ro, Scalar::real(0.0), Submit::on(&rt)).unwrap_err().status(), Status::ReadOnly);
    // Overlapping strides make a wrapped tensor read-only too.
    let mut buf = [0.0f64; 4];
    let ov = unsafe {
        Tensor::wrap(
            DType::F64,
            Layout::strided(&[2, 2], &[1, 1], 0, "t").unwrap(),
            buf.as_mut_ptr().cast(),
            true,
            None,
        )
    }
    .unwrap();
    assert_eq!(ops::scale(&ov, Scalar::real(2.0), Submit::on(&rt)).unwrap_err().status(), Status::ReadOnly);
    // Two reads of the same tensor in one kernel are fine.
    let k = kernel(|_| {});
    ops::kernel("rr", &[(&x, Mode::Read), (&x, Mode::Read)], k, Submit::on(&rt)).unwrap().wait(LONG).unwrap();
    assert_eq!(read_f64(&x), vec![1.0, 2.0]);
    // Rejected submissions left nothing behind: the runtime settles to zero.
    let t0 = std::time::Instant::now();
    while rt.outstanding() != 0 {
        assert!(t0.elapsed() < Duration::from_secs(10), "a rejected submission stayed outstanding");
        std::thread::yield_now();
    }
}

#[test]
fn strided_copies_and_dtypes() {
    let rt = Runtime::new(2).unwrap();
    // Column-major source, negative-stride destination view via wrap.
    let col = unsafe {
        let data: Vec<f64> = (0..6).map(|i| i as f64).collect(); // 2x3 column-major
        let l = Layout::contiguous(&[2, 3], Order::ColMajor);
        Tensor::from_host(DType::F64, &l, data.as_ptr().cast(), Order::ColMajor).unwrap()
    };
    let mut back = vec![0.0f64; 6];
    // dst layout: rows reversed (stride -3, offset 3).
    let l = Layout::strided(&[2, 3], &[-3, 1], 3, "t").unwrap();
    let rev = unsafe { Tensor::wrap(DType::F64, l, back.as_mut_ptr().cast(), true, None) }.unwrap();
    ops::copy(&rev, &col, Submit::on(&rt)).unwrap();
    rev.wait(LONG).unwrap();
    drop(rev);
    // col[i][j] = i + 2j; rev row i sits at memory row 1-i.
    for i in 0..2 {
        for j in 0..3 {
            assert_eq!(back[(1 - i) * 3 + j], (i + 2 * j) as f64);
        }
    }
    // Complex: axpy and scale against a reference.
    use num_complex::Complex64 as C;
    let x =
        Tensor::from_slice(&[3], Order::RowMajor, &[C::new(1.0, 2.0), C::new(-1.0, 0.5), C::new(0.0, -3.0)]).unwrap();
    let y = Tensor::from_slice(&[3], Order::RowMajor, &[C::new(0.5, 0.5); 3]).unwrap();
    let a = Scalar::complex(2.0, -1.0);
    ops::axpy(&y, a, &x, Submit::on(&rt)).unwrap();
    ops::scale(&y, Scalar::complex(0.0, 1.0), Submit::on(&rt)).unwrap();
    let mut out = [C::new(0.0, 0.0); 3];
    unsafe { ops::copy_out(&y, out.as_mut_ptr().cast(), 3, None, Submit::on(&rt)) }.unwrap().wait(LONG).unwrap();
    let xs = [C::new(1.0, 2.0), C::new(-1.0, 0.5), C::new(0.0, -3.0)];
    for k in 0..3 {
        let want = C::new(0.0, 1.0) * (C::new(2.0, -1.0) * xs[k] + C::new(0.5, 0.5));
        assert_eq!(out[k], want);
    }
    // Integers through fill/scale, exactly.
    let i = Tensor::zeros(DType::I64, &[4], Order::RowMajor, Domain::Host).unwrap();
    ops::fill(&i, Scalar::real(3.0), Submit::on(&rt)).unwrap();
    ops::scale(&i, Scalar::real(-2.0), Submit::on(&rt)).unwrap();
    let mut iout = [0i64; 4];
    unsafe { ops::copy_out(&i, iout.as_mut_ptr().cast(), 4, None, Submit::on(&rt)) }.unwrap().wait(LONG).unwrap();
    assert_eq!(iout, [-6; 4]);
}

#[test]
fn releasing_every_handle_with_10k_operations_pending() {
    static RELEASED: AtomicUsize = AtomicUsize::new(0);
    let rt = Runtime::new(2).unwrap();
    let gate = Gate::default();
    let calls = Arc::new((0..10_000).map(|_| AtomicUsize::new(0)).collect::<Vec<_>>());
    let mut user = vec![0.0f64; 8];
    // SAFETY: `user` outlives the runtime's drain below, after which the hook has run.
    let wrapped = unsafe {
        wrap_f64(&mut user, || {
            RELEASED.fetch_add(1, Ordering::SeqCst);
        })
    };
    let other = f64s(&[8], &[1.0; 8]);
    ops::kernel("blocker", &[(&wrapped, Mode::Update)], blocker(&gate), Submit::on(&rt)).unwrap();
    let mut events = vec![];
    for i in 0..10_000 {
        let c = calls.clone();
        let cb: tensorasync::Callback = Box::new(move |r| {
            assert!(r.is_ok());
            c[i].fetch_add(1, Ordering::SeqCst);
        });
        let opts = Submit { runtime: Some(&rt), callback: Some(cb), ..Default::default() };
        // Every tenth with an event, the others detached.
        match (i % 2 == 0, i % 10 == 0) {
            (true, true) => events.push(ops::axpy(&wrapped, Scalar::real(1.0), &other, opts).unwrap()),
            (true, false) => ops::axpy(&wrapped, Scalar::real(1.0), &other, opts.detached()).unwrap(),
            (false, true) => events.push(ops::scale(&wrapped, Scalar::real(1.0), opts).unwrap()),
            (false, false) => ops::scale(&wrapped, Scalar::real(1.0), opts.detached()).unwrap(),
        }
    }
    // Release every handle while all of that is pending.
    drop(events);
    drop(wrapped);
    drop(other);
    assert_eq!(RELEASED.load(Ordering::SeqCst), 0, "released while accesses were pending");
    gate.open();
    rt.shutdown(ShutdownMode::Drain).unwrap();
    assert!(calls.iter().all(|c| c.load(Ordering::SeqCst) == 1), "every callback exactly once");
    assert_eq!(RELEASED.load(Ordering::SeqCst), 1, "zero-copy release exactly once");
    assert_eq!(user, vec![5000.0; 8]);
}

/// Tasks point at their values without a count of their own; a value stays
/// until its last pending task has finished, whichever kind of handle (the
/// value, a view, a clone on another thread, a block array) goes last.
#[test]
fn values_outlive_pending_tasks_whichever_handle_goes_last() {
    static RELEASED: AtomicUsize = AtomicUsize::new(0);
    // Reads of the wrapped value (through it or a view of it), and of the tile.
    static RAN: AtomicUsize = AtomicUsize::new(0);
    static RAN_TILE: AtomicUsize = AtomicUsize::new(0);
    static RAN_AT_RELEASE: AtomicUsize = AtomicUsize::new(usize::MAX);
    const THREADS: usize = 4;
    const PER_THREAD: usize = 200;
    let rt = Runtime::new(2).unwrap();
    let gate = Gate::default();
    let mut user: Vec<f64> = (0..16).map(|i| i as f64).collect();
    // SAFETY: `user` outlives the runtime's drain below, after which the hook has run.
    let wrapped = unsafe {
        wrap_f64(&mut user, || {
            RAN_AT_RELEASE.store(RAN.load(Ordering::SeqCst), Ordering::SeqCst);
            RELEASED.fetch_add(1, Ordering::SeqCst);
        })
    };
    // A pending reader holds the queue; everything after it is readers too,
    // so the frontier is a long epoch of unfinished reads.
    ops::kernel("blocker", &[(&wrapped, Mode::Read)], blocker(&gate), Submit::on(&rt)).unwrap();
    let tiles = BlockArray::tiled(DType::F64, &[4, 4], &[2, 2], Order::RowMajor, Domain::Host).unwrap();
    ops::kernel("blocker", &[(&tiles.tile(&[1, 1]).unwrap(), Mode::Update)], blocker(&gate), Submit::on(&rt)).unwrap();
    let check = |expect: Vec<f64>, counter: &'static AtomicUsize| {
        KernelFn::new(move |c| {
            let v = &c.views()[0];
            let got: Vec<f64> = (0..v.extents[0])
                .map(|i| unsafe { *(v.ptr as *const f64).offset(i as isize * v.strides[0]) })
                .collect();
            assert_eq!(got, expect);
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
    };
    std::thread::scope(|s| {
        for k in 0..THREADS {
            let (whole, view, tile) =
                (wrapped.clone(), wrapped.slice(&[SliceSpec::range(4, 12)]).unwrap(), tiles.tile(&[1, 1]).unwrap());
            let (rt, check) = (&rt, &check);
            s.spawn(move || {
                for i in 0..PER_THREAD {
                    let kind = (i + k) % 3;
                    let counter = if kind == 2 { &RAN_TILE } else { &RAN };
                    // (A view made here goes at the end of the iteration.)
                    let (t, expect) = match (kind, i % 2 == 0) {
                        (0, true) => (whole.clone(), (0..16).map(|x| x as f64).collect()),
                        (0, false) => {
                            (whole.slice(&[SliceSpec::range(8, 16)]).unwrap(), (8..16).map(|x| x as f64).collect())
                        }
                        (1, _) => (view.clone(), (4..12).map(|x| x as f64).collect()),
                        (_, true) => (tile.clone(), vec![0.0; 2]),
                        (_, false) => (tile.slice(&[SliceSpec::index(0), SliceSpec::all(2)]).unwrap(), vec![0.0; 2]),
                    };
                    ops::kernel("check", &[(&t, Mode::Read)], check(expect, counter), Submit::on(rt)).unwrap();
                }
                // Every handle of this thread goes while its reads are pending.
            });
        }
    });
    // Then an update and reads through the whole handle only, which hold no
    // count in their tasks: once the reads above have run, every view (and
    // task holding one) is gone, and only the queue keeps the value.
    const TAIL: usize = 50;
    let gate2 = Gate::default();
    ops::kernel("blocker", &[(&wrapped, Mode::Update)], blocker(&gate2), Submit::on(&rt)).unwrap();
    for _ in 0..TAIL {
        ops::kernel(
            "check",
            &[(&wrapped, Mode::Read)],
            check((0..16).map(|x| x as f64).collect(), &RAN),
            Submit::on(&rt),
        )
        .unwrap();
    }
    drop(wrapped);
    drop(tiles);
    assert_eq!(RELEASED.load(Ordering::SeqCst), 0, "released while accesses were pending");
    gate.open();
    let t0 = std::time::Instant::now();
    while RAN.load(Ordering::SeqCst) + RAN_TILE.load(Ordering::SeqCst) < THREADS * PER_THREAD {
        assert!(t0.elapsed() < Duration::from_secs(20), "the first reads never ran");
        std::thread::yield_now();
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(RELEASED.load(Ordering::SeqCst), 0, "released while the update and its readers were pending");
    gate2.open();
    rt.shutdown(ShutdownMode::Drain).unwrap();
    let reads = RAN.load(Ordering::SeqCst);
    assert_eq!(reads + RAN_TILE.load(Ordering::SeqCst), THREADS * PER_THREAD + TAIL, "every read ran, on live memory");
    assert_eq!(RELEASED.load(Ordering::SeqCst), 1, "zero-copy release exactly once");
    assert_eq!(RAN_AT_RELEASE.load(Ordering::SeqCst), reads, "released after the last access");
    assert_eq!(user[15], 15.0);
}

/// Waits (and releases) run wherever the task they follow finishes, before
/// it retires. A long chain of operations interleaved with abandoned waits,
/// and with handles cloned and dropped around every submission, runs one
/// task after the other, not nested (nesting overflowed the worker's stack).
#[test]
fn long_chains_of_waits_and_transient_handles_do_not_nest() {
    const N: usize = 20_000;
    let rt = Runtime::new(2).unwrap();
    let gate = Gate::default();
    let t = f64s(&[4], &[1.0; 4]);
    ops::kernel("blocker", &[(&t, Mode::Update)], blocker(&gate), Submit::on(&rt)).unwrap();
    for i in 0..N {
        let h = if i % 2 == 0 { t.clone() } else { t.slice(&[SliceSpec::range(0, 4)]).unwrap() };
        ops::scale(&h, Scalar::real(if i % 4 < 2 { 2.0 } else { 0.5 }), Submit::on(&rt)).unwrap();
        // A wait that gives up at once leaves its barrier enrolled.
        assert_eq!(h.wait(Some(Duration::ZERO)).unwrap_err().status(), Status::Timeout);
    }
    gate.open();
    t.wait(LONG).unwrap();
    assert_eq!(read_f64(&t), vec![1.0; 4]);
    rt.shutdown(ShutdownMode::Drain).unwrap();
}

#[test]
fn shutdown_with_cancel_completes_pending_work_as_cancelled() {
    let rt = Runtime::new(2).unwrap();
    let gate = Gate::default();
    let t = f64s(&[1], &[0.0]);
    // The blocker must be running before shutdown begins (a task that has
    // not started when the runtime is cancelled is cancelled too).
    let started = Gate::default();
    let (g, s) = (gate.clone(), started.clone());
    let hold = KernelFn::new(move |_| {
        s.open();
        g.wait();
        Ok(())
    });
    let first = ops::kernel("blocker", &[(&t, Mode::Update)], hold, Submit::on(&rt)).unwrap();
    started.wait();
    let fired = Arc::new(AtomicUsize::new(0));
    let cancelled = Arc::new(AtomicUsize::new(0));
    let mut events = vec![];
    for _ in 0..1000 {
        let (f, c) = (fired.clone(), cancelled.clone());
        let cb: tensorasync::Callback = Box::new(move |r| {
            f.fetch_add(1, Ordering::SeqCst);
            if r.as_ref().is_err_and(|e| e.status() == Status::Cancelled) {
                c.fetch_add(1, Ordering::SeqCst);
            }
        });
        let opts = Submit { runtime: Some(&rt), callback: Some(cb), ..Default::default() };
        events.push(ops::scale(&t, Scalar::real(2.0), opts).unwrap());
    }
    let rt2 = rt.clone();
    let stopper = std::thread::spawn(move || rt2.shutdown(ShutdownMode::Cancel));
    // Wait until shutdown has begun, then let the blocker finish.
    let t0 = std::time::Instant::now();
    while ops::fill(&f64s(&[1], &[0.0]), Scalar::real(1.0), Submit::on(&rt)).is_ok() {
        assert!(t0.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(1));
    }
    gate.open();
    stopper.join().unwrap().unwrap();
    first.wait(LONG).unwrap();
    for e in &events {
        assert_eq!(e.wait(LONG).unwrap_err().status(), Status::Cancelled);
    }
    assert_eq!(fired.load(Ordering::SeqCst), 1000);
    assert_eq!(cancelled.load(Ordering::SeqCst), 1000);
    assert_eq!(t.wait(LONG).unwrap_err().status(), Status::Cancelled);
    let e = ops::fill(&t, Scalar::real(1.0), Submit::on(&rt)).unwrap_err();
    assert_eq!(e.status(), Status::Shutdown);
}

#[test]
fn events_poll_wait_and_late_callbacks() {
    let rt = Runtime::new(1).unwrap();
    let gate = Gate::default();
    let t = f64s(&[1], &[0.0]);
    let ev = ops::kernel("blocker", &[(&t, Mode::Update)], blocker(&gate), Submit::on(&rt)).unwrap();
    assert!(ev.poll().is_none());
    assert_eq!(ev.wait(Some(Duration::from_millis(20))).unwrap_err().status(), Status::Timeout);
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    ev.on_complete(Box::new(move |_| {
        c.fetch_add(1, Ordering::SeqCst);
    }));
    gate.open();
    ev.wait(LONG).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
    // Attaching to a completed event fires at once, in this thread.
    let here = std::thread::current().id();
    let where_ = Arc::new(Mutex::new(None));
    let w = where_.clone();
    ev.on_complete(Box::new(move |r| *w.lock().unwrap() = Some((std::thread::current().id(), r.is_ok()))));
    assert_eq!(*where_.lock().unwrap(), Some((here, true)));
    assert_eq!(ev.poll().map(|r| r.is_ok()), Some(true));
}

#[test]
fn a_wait_returns_after_the_events_callbacks_and_inside_them_at_once() {
    let rt = Runtime::new(1).unwrap();
    let gate = Gate::default();
    let t = f64s(&[1], &[0.0]);
    let ev = ops::kernel("blocker", &[(&t, Mode::Update)], blocker(&gate), Submit::on(&rt)).unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    // A slow callback: the program thread's wait below must not return while
    // it runs, although the event reports its outcome all along.
    let (c, e2) = (count.clone(), ev.clone());
    let seen_inside = Arc::new(Mutex::new(None));
    let si = seen_inside.clone();
    ev.on_complete(Box::new(move |_| {
        // Inside a callback a wait returns at once with the outcome (waiting
        // for the notifications would wait for this callback itself).
        let start = std::time::Instant::now();
        let r = e2.wait(LONG);
        *si.lock().unwrap() = Some((r.is_ok(), start.elapsed()));
        assert!(e2.poll().is_some());
        std::thread::sleep(Duration::from_millis(100));
        c.fetch_add(1, Ordering::SeqCst);
    }));
    let c2 = count.clone();
    ev.on_complete(Box::new(move |_| {
        std::thread::sleep(Duration::from_millis(20));
        c2.fetch_add(1, Ordering::SeqCst);
    }));
    gate.open();
    // Once the outcome is known a zero-timeout wait reports it, not a
    // timeout, even while the callbacks still run.
    while ev.poll().is_none() {
        std::thread::yield_now();
    }
    ev.wait(Some(Duration::ZERO)).unwrap();
    ev.wait(LONG).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 2);
    let (ok, took) = seen_inside.lock().unwrap().take().expect("the callback ran");
    assert!(ok);
    assert!(took < Duration::from_secs(5), "a wait inside the event's own callback returned after {took:?}");
}

#[test]
fn negative_strides_in_host_memory() {
    let rt = Runtime::new(1).unwrap();
    // Rows stored bottom-up: element [i, j] at base[(2 - i) * 2 + j].
    let mut base = [0.0f64; 6];
    let rows_up = Layout::strided(&[3, 2], &[-2, 1], 0, "t").unwrap();
    let data: Vec<f64> = (0..6).map(|k| k as f64).collect();
    let t = Tensor::from_slice(&[3, 2], Order::RowMajor, &data).unwrap();
    let ev = unsafe { ops::copy_out(&t, base.as_mut_ptr().add(4).cast(), 6, Some(&[-2, 1]), Submit::on(&rt)) };
    ev.unwrap().wait(LONG).unwrap();
    assert_eq!(base, [4.0, 5.0, 2.0, 3.0, 0.0, 1.0]);
    // The footprint, not the distance from the pointer, must fit.
    let e =
        unsafe { ops::copy_out(&t, base.as_mut_ptr().add(4).cast(), 5, Some(&[-2, 1]), Submit::on(&rt)) }.unwrap_err();
    assert_eq!(e.status(), Status::BufferTooSmall);
    // Copy back in through the same layout, and wrap it without copying.
    let u = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
    unsafe { ops::copy_in(&u, base.as_ptr().add(4).cast(), rows_up.clone(), Submit::on(&rt)) }.unwrap();
    assert_eq!(read_f64(&u), data);
    let w = unsafe { Tensor::wrap(DType::F64, rows_up, base.as_mut_ptr().add(4).cast(), true, None) }.unwrap();
    assert_eq!(read_f64(&w), data);
    ops::scale(&w, Scalar::real(10.0), Submit::on(&rt)).unwrap();
    w.wait(LONG).unwrap();
    drop(w);
    assert_eq!(base, [40.0, 50.0, 20.0, 30.0, 0.0, 10.0]);
}

#[test]
fn draining_admits_follow_up_work_from_the_runtimes_own_tasks() {
    let rt = Runtime::new(2).unwrap();
    let gate = Gate::default();
    let (a, b) = (f64s(&[1], &[0.0]), f64s(&[1], &[0.0]));
    let (rt2, b2, g2) = (rt.clone(), b.clone(), gate.clone());
    let k = KernelFn::new(move |_| {
        g2.wait();
        // Submitted while the runtime drains: part of the work being drained.
        ops::fill(&b2, Scalar::real(3.0), Submit::on(&rt2))
            .map(|_| ())
            .map_err(|e| KernelFailure { code: 1, message: Some(e.to_string()) })
    });
    let ev = ops::kernel("spawns_follow_up", &[(&a, Mode::Update)], k, Submit::on(&rt)).unwrap();
    let rt3 = rt.clone();
    let stopper = std::thread::spawn(move || rt3.shutdown(ShutdownMode::Drain));
    let t0 = std::time::Instant::now();
    while ops::fill(&f64s(&[1], &[0.0]), Scalar::real(1.0), Submit::on(&rt)).is_ok() {
        assert!(t0.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(1));
    }
    gate.open();
    stopper.join().unwrap().unwrap();
    ev.wait(LONG).unwrap();
    assert_eq!(read_f64(&b), vec![3.0]);
}

fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim().starts_with(prefix))
        .count()
}

#[test]
fn wait_idle_and_workers_end_with_the_runtime() {
    let rt = Runtime::new(2).unwrap();
    let prefix = format!("ta-rt{}-", rt.id());
    let gate = Gate::default();
    let t = f64s(&[1], &[0.0]);
    ops::kernel("blocker", &[(&t, Mode::Update)], blocker(&gate), Submit::on(&rt)).unwrap();
    for _ in 0..100 {
        ops::scale(&t, Scalar::real(2.0), Submit::on(&rt)).unwrap();
    }
    assert_eq!(rt.wait_idle(Some(Duration::from_millis(20))).unwrap_err().status(), Status::Timeout);
    gate.open();
    rt.wait_idle(LONG).unwrap();
    assert_eq!(rt.outstanding(), 0);
    assert!(threads_named(&prefix) > 0);
    // The runtime still accepts work after waiting.
    ops::fill(&t, Scalar::real(1.0), Submit::on(&rt)).unwrap();
    rt.wait_idle(LONG).unwrap();
    // Dropping the last handle drains; the workers then end, even though the
    // tensor its tasks touched is still alive.
    drop(rt);
    let t0 = std::time::Instant::now();
    while threads_named(&prefix) > 0 {
        assert!(t0.elapsed() < Duration::from_secs(10), "worker threads outlived their runtime");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(read_f64(&t), vec![1.0]);
}
