//! Completion order (SPEC §2.6): whatever reports an operation's completion
//! (its callback, an event callback, a completion entry, its event), the
//! operation is complete in every observable way by then, and every access
//! it held is released.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::time::Duration;

use common::*;
use tensorasync::*;

const ITERS: usize = 1000;
const ZERO: Option<Duration> = Some(Duration::ZERO);

/// What a callback of operation `ev` (writing `t`, expected outcome `fail`)
/// sees that is not yet final; 0 when everything is.
fn not_final(ev: &Event, t: &Tensor, fail: bool, r: &Result<()>) -> usize {
    let status = |r: &Result<()>| r.as_ref().err().map(|e| e.status());
    let want = fail.then_some(Status::KernelFailed);
    let mut bad = 0;
    bad += (status(r) != want) as usize;
    bad += (ev.poll().map(|r| status(&r)) != Some(want)) as usize;
    bad += (status(&ev.wait(ZERO)) != want) as usize;
    bad += (status(&t.wait(ZERO)) != want) as usize;
    if let Some(Err(e)) = ev.poll() {
        bad += (e.message() != "planned failure") as usize;
    }
    bad
}

#[test]
fn callbacks_see_their_operation_complete() {
    let rt = Runtime::new(2).unwrap();
    let t = Tensor::zeros(DType::F64, &[4], Order::RowMajor, Domain::Host).unwrap();
    let bad = Arc::new(AtomicUsize::new(0));
    for i in 0..ITERS {
        let fail = i % 2 == 1;
        let ev_slot: Arc<OnceLock<Event>> = Arc::new(OnceLock::new());
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let k = KernelFn::new(move |c| {
            go_rx.recv().unwrap();
            if fail {
                c.set_message("planned failure");
                Err(KernelFailure { code: 5, message: None })
            } else {
                Ok(())
            }
        });
        let (slot, tt, b, d) = (ev_slot.clone(), t.clone(), bad.clone(), done_tx.clone());
        let callback: Callback = Box::new(move |r| {
            b.fetch_add(not_final(slot.get().unwrap(), &tt, fail, r), Ordering::SeqCst);
            d.send(()).unwrap();
        });
        let opts = Submit { runtime: Some(&rt), callback: Some(callback), ..Default::default() };
        let ev = ops::kernel("order", &[(&t, Mode::Write)], k, opts).unwrap();
        let (slot, tt, b, d) = (ev_slot.clone(), t.clone(), bad.clone(), done_tx);
        ev.on_complete(Box::new(move |r| {
            b.fetch_add(not_final(slot.get().unwrap(), &tt, fail, r), Ordering::SeqCst);
            d.send(()).unwrap();
        }));
        ev_slot.set(ev).ok().unwrap();
        go_tx.send(()).unwrap();
        for _ in 0..2 {
            done_rx.recv_timeout(Duration::from_secs(60)).unwrap();
        }
    }
    assert_eq!(bad.load(Ordering::SeqCst), 0, "observations inside callbacks that were not final");
}

#[test]
fn a_completed_event_means_the_accesses_are_released() {
    let rt = Runtime::new(2).unwrap();
    let src = f64s(&[4], &[1.0, 2.0, 3.0, 4.0]);
    let t = Tensor::zeros(DType::F64, &[4], Order::RowMajor, Domain::Host).unwrap();
    let mut bad = 0;
    for _ in 0..ITERS {
        let gate = Gate::default();
        ops::kernel("writer", &[(&t, Mode::Update)], blocker(&gate), Submit::on(&rt)).unwrap();
        ops::copy(&t, &src, Submit::on(&rt)).unwrap();
        let ev = ops::kernel("reader", &[(&t, Mode::Read)], kernel(|_| {}), Submit::on(&rt)).unwrap();
        gate.open();
        ev.wait(LONG).unwrap();
        bad += t.wait(ZERO).is_err() as usize;
        // A lone reader of a fresh tensor.
        let fresh = f64s(&[2], &[1.0, 2.0]);
        let ev = ops::kernel("reader", &[(&fresh, Mode::Read)], kernel(|_| {}), Submit::on(&rt)).unwrap();
        ev.wait(LONG).unwrap();
        bad += fresh.wait(ZERO).is_err() as usize;
        // And readiness, which must then be complete at once.
        bad += t.ready().poll().is_none() as usize;
    }
    assert_eq!(bad, 0, "zero-timeout waits after an operation's event that were not final");
}

#[test]
fn tensor_ready_reports_what_a_wait_would() {
    let t = Tensor::zeros(DType::F64, &[4], Order::RowMajor, Domain::Host).unwrap();
    let gate = Gate::default();
    let k = KernelFn::new({
        let g = gate.clone();
        move |c| {
            g.wait();
            c.set_message("ready failure");
            Err(KernelFailure { code: 3, message: None })
        }
    });
    let failing = ops::kernel("failing", &[(&t, Mode::Write)], k, Submit::default()).unwrap();
    let ready = t.ready();
    assert!(ready.poll().is_none(), "ready before the writer ran");
    gate.open();
    let e = ready.wait(LONG).unwrap_err();
    let e_op = failing.wait(LONG).unwrap_err();
    assert_eq!(e.status(), Status::KernelFailed);
    assert_eq!(e.message(), "ready failure");
    assert!(e.same_as(&e_op), "ready reports the failing operation's own error object");
    assert_eq!(t.wait(ZERO).unwrap_err().message(), "ready failure");
}
