//! The Rust API for Rust users: events as futures, completion queues as
//! streams (with a real executor), guarded host access through ndarray views,
//! ndarray conversions and typed kernels.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::executor::{block_on, LocalPool};
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use ndarray::{s, Array, ArrayD, Dimension, IxDyn, ShapeBuilder};
use num_complex::Complex64;
use tensorasync::*;

fn f64s(extents: &[usize], data: &[f64]) -> Tensor {
    Tensor::from_slice(extents, Order::RowMajor, data).unwrap()
}

fn failing(msg: &'static str) -> KernelFn {
    KernelFn::new(move |_| Err(KernelFailure { code: 7, message: Some(msg.into()) }))
}

/// A kernel that waits for `gate` before returning.
fn gated(gate: common::Gate) -> KernelFn {
    KernelFn::new(move |_| {
        gate.wait();
        Ok(())
    })
}

#[test]
fn an_event_future_resolves_when_its_operation_completes() {
    let t = f64s(&[1], &[0.0]);
    let gate = common::Gate::default();
    let ev = ops::kernel("gated", &[(&t, Mode::Update)], gated(gate.clone()), Submit::default()).unwrap();
    let ev2 = ev.clone();
    let h = std::thread::spawn(move || block_on(ev2));
    std::thread::sleep(Duration::from_millis(50));
    assert!(!h.is_finished(), "the future resolved before its operation ran");
    gate.open();
    h.join().unwrap().unwrap();
    // A failed operation's future gives its error.
    let ev = ops::kernel("bad", &[(&t, Mode::Update)], failing("broken"), Submit::default()).unwrap();
    let e = block_on(ev).unwrap_err();
    assert_eq!(e.status(), Status::KernelFailed);
    assert_eq!(e.message(), "broken");
}

#[test]
fn many_tasks_on_one_executor_each_wake_for_their_own_event() {
    // Eight chains on eight tensors, each behind an external operation (it
    // holds no worker); the tasks of one local executor await them.
    // Finishing the tokens in reverse order completes the tasks in that
    // order: each is woken by its own completion.
    let tensors: Vec<Tensor> = (0..8).map(|i| f64s(&[1], &[i as f64])).collect();
    let mut tokens = Vec::new();
    let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut pool = LocalPool::new();
    for (i, t) in tensors.iter().enumerate() {
        tokens.push(ops::external("held", &[(t, Mode::Update)], Submit::default()).unwrap().0);
        let ev = ops::scale(t, Scalar::real(2.0), Submit::default()).unwrap();
        let order = order.clone();
        pool.spawner()
            .spawn_local(async move {
                ev.await.unwrap();
                order.lock().push(i);
            })
            .unwrap();
    }
    pool.run_until_stalled();
    assert!(order.lock().is_empty());
    for i in (0..8).rev() {
        tokens.pop().unwrap().finish(Status::Ok, None).unwrap();
        // Run the executor until task i has run (it may need a wake).
        let t0 = std::time::Instant::now();
        while order.lock().len() < 8 - i {
            pool.run_until_stalled();
            assert!(t0.elapsed() < Duration::from_secs(20), "task {i} was never woken");
            std::thread::yield_now();
        }
    }
    assert_eq!(*order.lock(), (0..8).rev().collect::<Vec<_>>());
    pool.run();
    for (i, t) in tensors.iter().enumerate() {
        assert_eq!(t.to_vec::<f64>().unwrap(), vec![2.0 * i as f64]);
    }
}

#[test]
fn a_completion_queue_stream_yields_every_entry_once() {
    let cq = CompletionQueue::new().unwrap();
    let ts: Vec<Tensor> = (0..20).map(|_| f64s(&[4], &[1.0; 4])).collect();
    for (i, t) in ts.iter().enumerate() {
        ops::scale(t, Scalar::real(3.0), Submit { cq: Some((&cq, 100 + i as u64)), ..Default::default() }).unwrap();
    }
    let bad = f64s(&[1], &[0.0]);
    ops::kernel("bad", &[(&bad, Mode::Update)], failing("nope"), Submit { cq: Some((&cq, 7)), ..Default::default() })
        .unwrap();
    let entries: Vec<CompletionEntry> = block_on(cq.clone().take(21).collect());
    let mut tags: Vec<u64> = entries.iter().map(|e| e.tag).collect();
    tags.sort_unstable();
    let mut want: Vec<u64> = (100..120).collect();
    want.insert(0, 7);
    assert_eq!(tags, want);
    let failed = entries.iter().find(|e| e.tag == 7).unwrap();
    let e = failed.result.as_ref().unwrap_err();
    assert_eq!((e.status(), e.message()), (Status::KernelFailed, "nope"));
    assert!(entries.iter().filter(|e| e.tag != 7).all(|e| e.result.is_ok()));
    assert!(cq.is_empty());
    assert!(cq.poll(8).is_empty(), "the stream took the entries");
}

#[test]
fn a_stream_consumer_task_is_woken_by_pushes_from_workers() {
    let cq = CompletionQueue::new().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let (s, c) = (seen.clone(), cq.clone());
    let consumer = std::thread::spawn(move || {
        block_on(async move {
            let mut c = c;
            for _ in 0..5 {
                let e = c.next().await.unwrap();
                assert!(e.result.is_ok());
                s.fetch_add(1, Ordering::SeqCst);
            }
        })
    });
    let t = f64s(&[1], &[1.0]);
    let gate = common::Gate::default();
    ops::kernel("gated", &[(&t, Mode::Update)], gated(gate.clone()), Submit::default()).unwrap();
    for i in 0..5 {
        ops::scale(&t, Scalar::real(2.0), Submit { cq: Some((&cq, i)), ..Default::default() }).unwrap();
    }
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(seen.load(Ordering::SeqCst), 0);
    gate.open();
    consumer.join().unwrap();
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![32.0]);
}

#[test]
fn a_read_guard_holds_off_later_writers_until_dropped() {
    let t = f64s(&[3], &[1.0, 2.0, 3.0]);
    let g = t.read_blocking::<f64>().unwrap();
    // Readers do not wait for readers.
    let g2 = t.read_blocking::<f64>().unwrap();
    let ev = ops::fill(&t, Scalar::real(9.0), Submit::default()).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert!(!ev.is_complete(), "a writer ran while a read guard lived");
    assert_eq!(g.view().as_slice().unwrap(), &[1.0, 2.0, 3.0]);
    drop(g);
    std::thread::sleep(Duration::from_millis(30));
    assert!(!ev.is_complete(), "a writer ran while the second read guard lived");
    drop(g2);
    ev.wait(Some(Duration::from_secs(20))).unwrap();
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![9.0; 3]);
}

#[test]
fn a_write_guard_holds_off_readers_and_commits_on_drop() {
    let t = f64s(&[2], &[1.0, 2.0]);
    let out = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
    let mut g = block_on(t.update::<f64>()).unwrap();
    let ev = ops::copy(&out, &t, Submit::default()).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert!(!ev.is_complete(), "a reader ran while an update guard lived");
    g.view_mut()[[1]] = 20.0;
    drop(g);
    ev.wait(Some(Duration::from_secs(20))).unwrap();
    assert_eq!(out.to_vec::<f64>().unwrap(), vec![1.0, 20.0]);
}

#[test]
fn the_guard_future_is_ordered_where_it_was_made() {
    // The access is enrolled when `read()` is called: a write submitted
    // afterwards waits for the guard even though the future is polled later.
    let t = f64s(&[1], &[1.0]);
    let fut = t.read::<f64>();
    let ev = ops::fill(&t, Scalar::real(5.0), Submit::default()).unwrap();
    let g = block_on(fut).unwrap();
    assert_eq!(g.view()[[0]], 1.0);
    std::thread::sleep(Duration::from_millis(30));
    assert!(!ev.is_complete());
    drop(g);
    block_on(ev).unwrap();
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![5.0]);
}

#[test]
fn a_poisoned_tensor_gives_its_error_instead_of_a_guard() {
    let t = f64s(&[2], &[1.0, 2.0]);
    ops::kernel("breaks", &[(&t, Mode::Update)], failing("bad data"), Submit::default()).unwrap();
    for e in [
        t.read_blocking::<f64>().unwrap_err(),
        block_on(t.read::<f64>()).unwrap_err(),
        t.update_blocking::<f64>().unwrap_err(),
        t.to_array::<f64>().unwrap_err(),
    ] {
        assert_eq!(e.status(), Status::KernelFailed);
        assert_eq!(e.message(), "bad data");
    }
    // A write is a pure overwrite: it clears the poison.
    t.write_blocking::<f64>().unwrap().view_mut().fill(3.0);
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![3.0, 3.0]);
    t.wait(None).unwrap();
}

#[test]
fn the_element_type_must_match_the_dtype() {
    let t = f64s(&[2], &[1.0, 2.0]);
    let errors = [
        t.read_blocking::<f32>().unwrap_err(),
        block_on(t.read::<i64>()).unwrap_err(),
        t.write_blocking::<u64>().unwrap_err(),
        block_on(t.update::<Complex64>()).unwrap_err(),
        t.to_array::<f32>().unwrap_err(),
    ];
    for e in errors {
        assert_eq!(e.status(), Status::DtypeMismatch);
        assert!(e.message().contains("f64"), "{}", e.message());
    }
    // Nothing was enrolled by the refused accesses: a write runs at once.
    ops::fill(&t, Scalar::real(1.0), Submit::default()).unwrap();
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![1.0, 1.0]);
}

#[test]
fn reversed_and_strided_views_read_and_write_the_right_elements() {
    let data: Vec<f64> = (0..12).map(|x| x as f64).collect();
    let t = f64s(&[3, 4], &data);
    let step = |start, stop, step| SliceSpec { start, stop, step, drop: false };
    // Rows reversed, every other column from the right.
    let v = t.slice(&[step(2, -1, -1), step(3, -1, -2)]).unwrap();
    let want: Vec<f64> = [2usize, 1, 0].iter().flat_map(|&i| [3usize, 1].map(|j| (i * 4 + j) as f64)).collect();
    let g = v.read_blocking::<f64>().unwrap();
    assert_eq!(g.view().shape(), &[3, 2]);
    assert_eq!(g.view().iter().copied().collect::<Vec<_>>(), want);
    drop(g);
    assert_eq!(v.to_vec::<f64>().unwrap(), want);
    // Writing through the reversed view lands on the mirrored elements.
    {
        let mut w = v.update_blocking::<f64>().unwrap();
        let mut a = w.view_mut();
        a[[0, 0]] = -1.0; // element (2, 3)
        a[[2, 1]] = -2.0; // element (0, 1)
    }
    let mut expect = data.clone();
    expect[11] = -1.0;
    expect[1] = -2.0;
    assert_eq!(t.to_vec::<f64>().unwrap(), expect);
    // A transposed view reads in its own index order.
    let tr = t.transpose().unwrap().to_array::<f64>().unwrap();
    assert_eq!(tr.shape(), &[4, 3]);
    assert_eq!(tr[[3, 2]], expect[2 * 4 + 3]);
}

#[test]
fn a_conj_view_reads_conjugated_and_refuses_writes() {
    let z = [Complex64::new(1.0, 2.0), Complex64::new(-3.0, 0.5)];
    let t = Tensor::from_slice(&[2], Order::RowMajor, &z).unwrap();
    let c = t.conj().unwrap();
    let got = c.to_vec::<Complex64>().unwrap();
    assert_eq!(got, vec![Complex64::new(1.0, -2.0), Complex64::new(-3.0, -0.5)]);
    let g = block_on(c.read::<Complex64>()).unwrap();
    assert_eq!(g.view()[[1]], Complex64::new(-3.0, -0.5));
    drop(g);
    let e = c.write_blocking::<Complex64>().unwrap_err();
    assert_eq!(e.status(), Status::ReadOnly);
    // The base is untouched.
    assert_eq!(t.to_vec::<Complex64>().unwrap(), z.to_vec());
}

#[test]
fn mutable_access_to_overlapping_strides_is_refused() {
    // A broadcast row: three rows that are the same memory.
    let mut row = vec![1.0f64, 2.0];
    let layout = Layout::strided(&[3, 2], &[0, 1], 0, "test").unwrap();
    // SAFETY: `row` outlives the tensor's last access (waited below) and the
    // test leaves it alone meanwhile.
    let t = unsafe { Tensor::wrap(DType::F64, layout, row.as_mut_ptr().cast(), true, None) }.unwrap();
    assert_eq!(t.to_array::<f64>().unwrap(), ndarray::array![[1.0, 2.0], [1.0, 2.0], [1.0, 2.0]].into_dyn());
    for e in [t.update_blocking::<f64>().unwrap_err(), block_on(t.write::<f64>()).unwrap_err()] {
        assert_eq!(e.status(), Status::InvalidArgument);
        assert!(e.message().contains("overlap"), "{}", e.message());
    }
    t.wait(None).unwrap();
    drop(t);
    row[0] = 0.0;
}

/// The element of `a` at `index`, computed from the raw strides (the
/// reference the conversions are checked against).
fn at(base: &[f64], offset: isize, strides: &[isize], index: &[usize]) -> f64 {
    let o: isize = offset + index.iter().zip(strides).map(|(&i, &s)| i as isize * s).sum::<isize>();
    base[o as usize]
}

#[test]
fn from_array_and_to_array_keep_every_element_in_any_layout() {
    let base: Vec<f64> = (0..60).map(|x| (x * 7 % 61) as f64).collect();
    let c = Array::from_shape_vec((3, 4, 5), base.clone()).unwrap();
    let f = Array::from_shape_vec((3, 4, 5).f(), base.clone()).unwrap();
    // (array, offset into `base` of element 0, strides into `base`)
    let cases: Vec<(ArrayD<f64>, isize, Vec<isize>)> = vec![
        (c.clone().into_dyn(), 0, vec![20, 5, 1]),
        (f.clone().into_dyn(), 0, vec![1, 3, 12]),
        (c.slice(s![..;-1, 1..;2, ..;-2]).to_owned().into_dyn(), 49, vec![-20, 10, -2]),
        (c.view().permuted_axes([2, 0, 1]).to_owned().into_dyn(), 0, vec![1, 20, 5]),
    ];
    for (a, off, st) in &cases {
        let t = Tensor::from_array(a).unwrap();
        let back = t.to_array::<f64>().unwrap();
        assert_eq!(back.shape(), a.shape());
        for (idx, &x) in back.indexed_iter() {
            assert_eq!(x, at(&base, *off, st, idx.slice()), "at {idx:?}");
        }
    }
    // Views with negative strides and broadcast axes go in without a copy first.
    let rev = c.slice(s![.., ..;-1, 2]);
    let t = Tensor::from_array(&rev).unwrap();
    assert_eq!(t.extents().unwrap().as_slice(), &[3, 4]);
    let back = t.to_array::<f64>().unwrap();
    for (idx, &x) in back.indexed_iter() {
        assert_eq!(x, at(&base, 15 + 2, &[20, -5], idx.slice()));
    }
    let b = ndarray::arr1(&[1.0f64, 2.0]).broadcast(IxDyn(&[3, 2])).unwrap().to_owned();
    assert_eq!(Tensor::from_array(&b.view().broadcast(IxDyn(&[3, 2])).unwrap()).unwrap().to_array::<f64>().unwrap(), b);
    // Integers and complex numbers too; the dtype follows the element type.
    let i = ndarray::array![[1u16, 2], [3, 4]];
    let ti = Tensor::from_array(&i.t()).unwrap();
    assert_eq!(ti.dtype(), DType::U16);
    assert_eq!(ti.to_vec::<u16>().unwrap(), vec![1, 3, 2, 4]);
    let z = ndarray::arr1(&[Complex64::new(0.0, 1.0)]);
    assert_eq!(Tensor::from_array(&z).unwrap().dtype(), DType::C128);
}

#[test]
fn slice_copies_are_safe_and_checked() {
    let t = Tensor::unconstructed(DType::I32, Domain::Host).unwrap();
    copy_from_slice(&t, &[2, 2], &[1i32, 2, 3, 4], Submit::default()).unwrap();
    let mut out = [0i32; 4];
    t.copy_to_slice(&mut out).unwrap();
    assert_eq!(out, [1, 2, 3, 4]);
    let e = t.copy_to_slice(&mut [0i32; 3]).unwrap_err();
    assert_eq!(e.status(), Status::BufferTooSmall);
    let e = copy_from_slice(&t, &[3], &[1i32, 2], Submit::default()).unwrap_err();
    assert_eq!(e.status(), Status::ShapeMismatch);
    let e = copy_from_slice(&t, &[2], &[1.0f64, 2.0], Submit::default()).unwrap_err();
    assert_eq!(e.status(), Status::DtypeMismatch);
    copy_from_array(&t, &ndarray::array![[5i32, 6], [7, 8]].t(), Submit::default()).unwrap();
    assert_eq!(t.to_vec::<i32>().unwrap(), vec![5, 7, 6, 8]);
}

#[test]
fn typed_kernels_check_dtypes_at_submission_and_views_when_run() {
    let x = f64s(&[4], &[1.0, 2.0, 3.0, 4.0]);
    let y = f64s(&[4], &[0.0; 4]);
    // Declared types are checked at submission; nothing is enrolled.
    let e = ops::Kernel::new("k").read::<f64>(&x).write::<f32>(&y).submit(Submit::default(), |_| Ok(())).unwrap_err();
    assert_eq!(e.status(), Status::DtypeMismatch);
    assert!(e.message().contains("operand 1"), "{}", e.message());
    // A reversed input view reads in its own order.
    let rev = x.slice(&[SliceSpec { start: 3, stop: -1, step: -1, drop: false }]).unwrap();
    ops::Kernel::new("copy_rev")
        .read::<f64>(&rev)
        .write::<f64>(&y)
        .submit(Submit::default(), |c| {
            let r = c.array::<f64>(0)?;
            c.array_mut::<f64>(1)?.assign(&r);
            Ok(())
        })
        .unwrap();
    assert_eq!(y.to_vec::<f64>().unwrap(), vec![4.0, 3.0, 2.0, 1.0]);
    // Asking a view of the wrong type, a read-only operand mutably, or one
    // operand mutably twice fails the kernel with the error's message.
    let probe = |f: fn(&mut KernelCall<'_>) -> KernelResult| {
        let t = f64s(&[2], &[0.0; 2]);
        ops::kernel("probe", &[(&x, Mode::Read), (&t, Mode::Update)], KernelFn::new(f), Submit::default()).unwrap();
        t.wait(None).map(|()| t.to_vec::<f64>().unwrap())
    };
    let e = probe(|c| c.array::<f32>(0).map(drop).map_err(Into::into)).unwrap_err();
    assert_eq!((e.status(), e.code()), (Status::KernelFailed, Status::DtypeMismatch as i64));
    let e = probe(|c| c.array_mut::<f64>(0).map(drop).map_err(Into::into)).unwrap_err();
    assert!(e.message().contains("read-only"), "{}", e.message());
    let e = probe(|c| {
        let _a = c.array_mut::<f64>(1)?;
        let _b = c.array::<f64>(1)?;
        Ok(())
    })
    .unwrap_err();
    assert!(e.message().contains("alias"), "{}", e.message());
    let e = probe(|c| c.array::<f64>(5).map(drop).map_err(Into::into)).unwrap_err();
    assert!(e.message().contains("does not exist"), "{}", e.message());
    // Shared views of one operand may coexist.
    assert_eq!(
        probe(|c| {
            let (a, b) = (c.array::<f64>(0)?, c.array::<f64>(0)?);
            c.array_mut::<f64>(1)?[[0]] = a[[0]] + b[[3]];
            Ok(())
        })
        .unwrap(),
        vec![5.0, 0.0]
    );
}

#[test]
fn a_conj_operand_is_refused_by_typed_kernel_views() {
    let z = Tensor::from_slice(&[1], Order::RowMajor, &[Complex64::new(1.0, 1.0)]).unwrap();
    let zc = z.conj().unwrap();
    let out = Tensor::from_slice(&[1], Order::RowMajor, &[Complex64::new(0.0, 0.0)]).unwrap();
    ops::Kernel::new("conj_read")
        .read::<Complex64>(&zc)
        .write::<Complex64>(&out)
        .submit(Submit::default(), |c| {
            let v = c.array::<Complex64>(0)?;
            c.array_mut::<Complex64>(1)?[[0]] = v[[0]];
            Ok(())
        })
        .unwrap();
    let e = out.wait(None).unwrap_err();
    assert_eq!(e.status(), Status::KernelFailed);
    assert!(e.message().contains("conj"), "{}", e.message());
}

#[test]
fn an_inline_kernel_runs_its_captured_context() {
    let t = f64s(&[3], &[1.0, 2.0, 3.0]);
    let (k, add) = (2.0f64, 0.5f64);
    ops::kernel(
        "axpb",
        &[(&t, Mode::Update)],
        KernelFn::inline(move |c| {
            c.array_mut::<f64>(0)?.mapv_inplace(|x| k * x + add);
            Ok(())
        }),
        Submit::default(),
    )
    .unwrap();
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![2.5, 4.5, 6.5]);
    // A closure too large to be inline is boxed and still runs.
    let big = [1.0f64; 8];
    ops::kernel(
        "big",
        &[(&t, Mode::Update)],
        KernelFn::inline(move |c| {
            c.array_mut::<f64>(0)?.mapv_inplace(|x| x + big.iter().sum::<f64>());
            Ok(())
        }),
        Submit::default(),
    )
    .unwrap();
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![10.5, 12.5, 14.5]);
}

#[test]
fn a_detached_submission_returns_unit_and_the_operation_still_runs() {
    let rt = Runtime::new(2).unwrap();
    let t = f64s(&[3], &[1.0, 2.0, 3.0]);
    let x = f64s(&[3], &[1.0, 1.0, 1.0]);
    let (tx, rx) = std::sync::mpsc::channel();
    let cb: Callback = Box::new(move |r| tx.send(r.is_ok()).unwrap());
    let mut cq = CompletionQueue::new().unwrap();
    let () = ops::scale(&t, Scalar::real(2.0), Submit::on(&rt).detached()).unwrap();
    let () = ops::axpy(
        &t,
        Scalar::real(1.0),
        &x,
        Submit { runtime: Some(&rt), callback: Some(cb), ..Default::default() }.detached(),
    )
    .unwrap();
    let () = ops::Kernel::new("plus_ten")
        .update::<f64>(&t)
        .submit(Submit { runtime: Some(&rt), cq: Some((&cq, 3)), ..Default::default() }.detached(), |c| {
            c.array_mut::<f64>(0)?.mapv_inplace(|v| v + 10.0);
            Ok(())
        })
        .unwrap();
    let (copy, ()) = t.deep_copy(Submit::on(&rt).detached()).unwrap();
    let (token, ()) = ops::external("held", &[(&x, Mode::Read)], Submit::on(&rt).detached()).unwrap();
    token.started().wait(None).unwrap();
    token.finish(Status::Ok, None).unwrap();
    // The callback and the completion queue still report their operations.
    assert!(rx.recv_timeout(Duration::from_secs(30)).unwrap());
    let entry = block_on(cq.next()).unwrap();
    assert_eq!((entry.tag, entry.result.is_ok()), (3, true));
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![13.0, 15.0, 17.0]);
    assert_eq!(copy.to_vec::<f64>().unwrap(), vec![13.0, 15.0, 17.0]);
    rt.wait_idle(None).unwrap();
    assert_eq!(rt.stats().completed, 5);
}

#[test]
fn a_detached_failure_poisons_what_it_writes_and_reaches_the_callback() {
    let t = f64s(&[1], &[1.0]);
    let (tx, rx) = std::sync::mpsc::channel();
    let cb: Callback = Box::new(move |r| tx.send(r.clone().map_err(|e| e.message().to_string())).unwrap());
    let opts = Submit { callback: Some(cb), ..Default::default() }.detached();
    let () = ops::kernel("bad", &[(&t, Mode::Update)], failing("detached failure"), opts).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(30)).unwrap().unwrap_err(), "detached failure");
    let e = t.wait(None).unwrap_err();
    assert_eq!((e.status(), e.message()), (Status::KernelFailed, "detached failure"));
    // A refused submission is an error in either form, and enrolls nothing.
    let e = ops::fill(&t, Scalar::complex(0.0, 1.0), Submit::default().detached()).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
}

#[test]
fn the_default_form_returns_an_event_with_the_outcome() {
    let t = f64s(&[2], &[1.0, 2.0]);
    // Each submission form needs no annotation and gives an Event.
    let ok: Event = ops::scale(&t, Scalar::real(3.0), Submit::default()).unwrap();
    ok.wait(None).unwrap();
    let rt = Runtime::new(1).unwrap();
    let on: Event = ops::scale(&t, Scalar::real(2.0), Submit::on(&rt)).unwrap();
    let lit: Event = ops::fill(&t, Scalar::real(6.0), Submit { runtime: Some(&rt), ..Default::default() }).unwrap();
    on.wait(None).unwrap();
    lit.wait(None).unwrap();
    assert_eq!(rt.stats().completed, 2);
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![6.0, 6.0]);
    // A failing operation's event completes with its error, the same error
    // that poisons its output.
    let bad = ops::kernel("bad", &[(&t, Mode::Update)], failing("evented failure"), Submit::default()).unwrap();
    let e = bad.wait(None).unwrap_err();
    assert_eq!((e.status(), e.message(), e.code()), (Status::KernelFailed, "evented failure", 7));
    assert!(t.wait(None).unwrap_err().same_as(&e));
    // A reader of the poisoned output: its event gives that error too.
    let out = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
    let copied = ops::copy(&out, &t, Submit::default()).unwrap();
    assert!(copied.wait(None).unwrap_err().same_as(&e));
}

/// A helper generic over the form, as the operations are.
fn doubled<C: ops::Completion>(t: &Tensor, opts: Submit<'_, C>) -> Result<C::Output> {
    ops::scale(t, Scalar::real(2.0), opts)
}

#[test]
fn code_generic_over_the_completion_form_serves_both() {
    let t = f64s(&[1], &[1.0]);
    let ev: Event = doubled(&t, Submit::default()).unwrap();
    ev.wait(None).unwrap();
    let () = doubled(&t, Submit::default().detached()).unwrap();
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![4.0]);
}

/// Once `wait_idle` returns, the counters include the work it waited for:
/// each worker's busy time covers the operations it ran, every operation
/// that was ready at its submission counts as taken from the queue, and a
/// second reading gives the same numbers (nothing is still being added).
#[test]
fn the_counters_after_wait_idle_include_the_work_it_waited_for() {
    use std::sync::atomic::AtomicU64;
    use std::time::Instant;
    let rt = Runtime::new(2).unwrap();
    let ran_ns = Arc::new(AtomicU64::new(0));
    let ts: Vec<Tensor> = (0..3).map(|_| f64s(&[1], &[0.0])).collect();
    for round in 1..=300u64 {
        let ran = ran_ns.clone();
        let spin = KernelFn::new(move |_| {
            let start = Instant::now();
            while start.elapsed() < Duration::from_micros(2) {}
            ran.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
            Ok(())
        });
        let t = &ts[round as usize % ts.len()];
        ops::kernel("spin", &[(t, Mode::Update)], spin, Submit::on(&rt).detached()).unwrap();
        rt.wait_idle(None).unwrap();
        let s = rt.stats();
        let busy: u64 = s.busy_ns.iter().sum();
        let ran = ran_ns.load(Ordering::Relaxed);
        assert!(busy >= ran, "round {round}: busy {busy} ns, the kernels alone ran {ran} ns");
        assert_eq!((s.completed, s.steals), (round, round), "round {round}");
        assert_eq!(rt.stats(), s, "round {round}: the counters moved after the wait");
    }
}

/// Dropping a runtime's last handle joins its worker threads: when the drop
/// returns, every thread that ran one of its kernels has finished, its
/// thread-local destructors included (a program may then unload the
/// library). Each kernel marks its thread with a thread-local whose
/// destructor counts the thread out.
#[test]
fn dropping_a_runtime_returns_after_its_worker_threads_have_exited() {
    static LIVE: AtomicUsize = AtomicUsize::new(0);
    struct Mark;
    impl Drop for Mark {
        fn drop(&mut self) {
            LIVE.fetch_sub(1, Ordering::SeqCst);
        }
    }
    thread_local! {
        static MARK: std::cell::OnceCell<Mark> = const { std::cell::OnceCell::new() };
    }
    let mark = || {
        KernelFn::new(|_| {
            MARK.with(|m| {
                m.get_or_init(|| {
                    LIVE.fetch_add(1, Ordering::SeqCst);
                    Mark
                });
            });
            Ok(())
        })
    };
    for round in 0..20 {
        let rt = Runtime::new(2).unwrap();
        let ts: Vec<Tensor> = (0..8).map(|_| f64s(&[1], &[0.0])).collect();
        for t in &ts {
            ops::kernel("mark", &[(t, Mode::Update)], mark(), Submit { defer: true, ..Submit::on(&rt) }).unwrap();
        }
        rt.wait_idle(None).unwrap();
        assert!(LIVE.load(Ordering::SeqCst) >= 1, "round {round}: no worker ran a kernel");
        drop(rt);
        assert_eq!(LIVE.load(Ordering::SeqCst), 0, "round {round}: worker threads still running after the drop");
    }
}
