//! Host access, deferred completion and external operations (SPEC §2.8).

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::*;
use tensorasync::*;

const ZERO: Option<Duration> = Some(Duration::ZERO);

fn failing(t: &Tensor, msg: &'static str) -> Event {
    let k = KernelFn::new(move |c| {
        c.set_message(msg);
        Err(KernelFailure { code: 1, message: None })
    });
    ops::kernel("failing", &[(t, Mode::Write)], k, Submit::default()).unwrap()
}

#[test]
fn a_read_access_holds_writers_not_readers() {
    let t = f64s(&[3], &[1.0, 2.0, 3.0]);
    let a = t.acquire(Mode::Read, LONG).unwrap();
    let v = a.view().unwrap();
    // SAFETY: the granted read view of 3 f64.
    assert_eq!(unsafe { std::slice::from_raw_parts(v.ptr as *const f64, 3) }, &[1.0, 2.0, 3.0]);
    let b = t.acquire(Mode::Read, LONG).unwrap();
    let fill = ops::fill(&t, Scalar::real(5.0), Submit::default()).unwrap();
    assert!(fill.poll().is_none());
    drop(b);
    assert!(fill.poll().is_none(), "one read access still lives");
    drop(a);
    fill.wait(LONG).unwrap();
    assert_eq!(read_f64(&t), vec![5.0; 3]);
}

#[test]
fn write_access_cleans_and_poisoned_reads_fail_with_the_error() {
    let t = f64s(&[2], &[1.0, 2.0]);
    let e_op = failing(&t, "boom").wait(LONG).unwrap_err();
    let e = t.acquire(Mode::Read, LONG).unwrap_err();
    assert!(e.same_as(&e_op));
    assert!(t.acquire(Mode::Update, LONG).unwrap_err().same_as(&e_op));
    {
        let w = t.acquire(Mode::Write, LONG).unwrap();
        let v = w.view().unwrap();
        // SAFETY: the granted write view of 2 f64.
        unsafe { std::slice::from_raw_parts_mut(v.ptr as *mut f64, 2).copy_from_slice(&[7.0, 8.0]) };
    }
    t.wait(LONG).unwrap();
    assert_eq!(read_f64(&t), vec![7.0, 8.0]);
    // A write access whose view was never taken wrote nothing: no clean.
    failing(&t, "again").wait(LONG).unwrap_err();
    drop(t.acquire(Mode::Write, LONG).unwrap());
    assert_eq!(t.wait(ZERO).unwrap_err().message(), "again");
}

#[test]
fn a_timed_out_access_is_released_when_granted() {
    let t = f64s(&[1], &[1.0]);
    let gate = Gate::default();
    let w = ops::kernel("gated", &[(&t, Mode::Update)], blocker(&gate), Submit::default()).unwrap();
    let e = t.acquire(Mode::Write, Some(Duration::from_millis(10))).unwrap_err();
    assert_eq!(e.status(), Status::Timeout);
    let fill = ops::fill(&t, Scalar::real(3.0), Submit::default()).unwrap();
    gate.open();
    w.wait(LONG).unwrap();
    fill.wait(LONG).unwrap();
    assert_eq!(read_f64(&t), vec![3.0]);
}

#[test]
fn an_external_operation_is_finished_from_another_thread_and_later_writers_wait() {
    let t = f64s(&[2], &[1.0, 2.0]);
    let (token, done) = ops::external("ext", &[(&t, Mode::Update)], Submit::default()).unwrap();
    token.started().wait(LONG).unwrap();
    let mut out = vec![0.0f64; 2];
    // SAFETY: `out` holds 2 f64 and outlives the copy (waited for below).
    let reader = unsafe { ops::copy_out(&t, out.as_mut_ptr().cast(), 2, None, Submit::default()) }.unwrap();
    let later = ops::fill(&t, Scalar::real(0.0), Submit::default()).unwrap();
    assert!(later.poll().is_none() && reader.poll().is_none() && done.poll().is_none());
    std::thread::spawn(move || {
        let v = &token.views().unwrap()[0];
        // SAFETY: the granted update view of 2 f64, held until the finish.
        unsafe { std::slice::from_raw_parts_mut(v.ptr as *mut f64, 2).iter_mut().for_each(|x| *x *= 10.0) };
        token.finish(Status::Ok, None).unwrap();
    })
    .join()
    .unwrap();
    done.wait(LONG).unwrap();
    reader.wait(LONG).unwrap();
    later.wait(LONG).unwrap();
    assert_eq!(out, vec![10.0, 20.0]);
    assert_eq!(read_f64(&t), vec![0.0, 0.0]);
}

#[test]
fn a_poisoned_input_fails_the_external_operation_before_it_starts() {
    let t = f64s(&[1], &[1.0]);
    let out = f64s(&[1], &[0.0]);
    let e_op = failing(&t, "upstream").wait(LONG).unwrap_err();
    let (token, done) = ops::external("send", &[(&t, Mode::Read), (&out, Mode::Write)], Submit::default()).unwrap();
    assert!(token.started().wait(LONG).unwrap_err().same_as(&e_op));
    assert!(done.wait(ZERO).unwrap_err().same_as(&e_op));
    assert!(out.wait(ZERO).unwrap_err().same_as(&e_op));
    assert_eq!(token.views().unwrap_err().status(), Status::KernelFailed);
    token.finish(Status::Ok, None).unwrap();
}

#[test]
fn a_failed_finish_poisons_the_outputs() {
    let t = f64s(&[1], &[1.0]);
    let (token, done) = ops::external("recv", &[(&t, Mode::Write)], Submit::default()).unwrap();
    token.finish(Status::Internal, Some("peer died".into())).unwrap();
    let e = done.wait(LONG).unwrap_err();
    assert_eq!(
        (e.status(), e.message(), e.origin(), e.code()),
        (Status::KernelFailed, "peer died", "recv", Status::Internal as i64)
    );
    assert!(t.wait(ZERO).unwrap_err().same_as(&e));
}

#[test]
fn a_kernel_defers_and_its_token_is_finished_later() {
    let rt = Runtime::new(1).unwrap();
    let t = f64s(&[1], &[2.0]);
    let (tx, rx) = mpsc::channel::<Token>();
    let k = KernelFn::new(move |c| {
        let tok = c.defer().unwrap();
        assert_eq!(c.defer().unwrap_err().status(), Status::InvalidArgument);
        tx.send(tok).unwrap();
        Err(KernelFailure { code: 9, message: None }) // ignored once deferred
    });
    let ev = ops::kernel("deferring", &[(&t, Mode::Update)], k, Submit::on(&rt)).unwrap();
    let token = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    // The worker is free: another task runs while the deferred one is pending
    // (on the worker: deferred, since a small fill would run in place).
    let other = f64s(&[1], &[0.0]);
    ops::fill(&other, Scalar::real(4.0), Submit { defer: true, ..Submit::on(&rt) }).unwrap().wait(LONG).unwrap();
    assert!(ev.poll().is_none());
    let v = token.views().unwrap()[0].clone();
    // SAFETY: the deferred kernel's granted update view of 1 f64.
    unsafe { *(v.ptr as *mut f64) += 1.0 };
    token.finish(Status::Ok, None).unwrap();
    ev.wait(LONG).unwrap();
    assert_eq!(read_f64(&t), vec![3.0]);
}

#[test]
fn shutdown_with_cancel_completes_tokens_and_keeps_their_storage() {
    let rt = Runtime::new(1).unwrap();
    let mut user = vec![0.0f64; 2];
    let (tx, rx) = mpsc::channel::<()>();
    // SAFETY: `user` outlives the release, which the test waits for below.
    let t = unsafe { wrap_f64(&mut user, move || tx.send(()).unwrap()) };
    let (token, done) = ops::external("irecv", &[(&t, Mode::Write)], Submit::on(&rt)).unwrap();
    token.started().wait(LONG).unwrap();
    let later = ops::fill(&t, Scalar::real(1.0), Submit::on(&rt)).unwrap();
    drop(t);
    rt.shutdown(ShutdownMode::Cancel).unwrap();
    assert_eq!(done.wait(ZERO).unwrap_err().status(), Status::Cancelled);
    assert_eq!(later.wait(ZERO).unwrap_err().status(), Status::Cancelled);
    assert!(rx.try_recv().is_err(), "the storage went before the token was finished");
    let v = token.views().unwrap()[0].clone();
    // SAFETY: the storage is kept until the token goes (checked above).
    unsafe { *(v.ptr as *mut f64) = 42.0 };
    assert_eq!(token.finish(Status::Ok, None).unwrap_err().status(), Status::AlreadyFinished);
    rx.recv_timeout(Duration::from_secs(60)).unwrap();
    assert_eq!(user[0], 42.0);
}

#[test]
fn finishing_before_the_grant_takes_effect_when_granted() {
    let t = f64s(&[1], &[1.0]);
    let gate = Gate::default();
    ops::kernel("gated", &[(&t, Mode::Update)], blocker(&gate), Submit::default()).unwrap();
    let (token, done) = ops::external("early", &[(&t, Mode::Update)], Submit::default()).unwrap();
    let started = token.started().clone();
    token.finish(Status::Ok, None).unwrap();
    assert!(done.poll().is_none() && started.poll().is_none());
    gate.open();
    done.wait(LONG).unwrap();
    started.wait(ZERO).unwrap();
}

#[test]
fn shutdown_with_cancel_completes_every_parked_token_and_only_those() {
    let rt = Runtime::new(2).unwrap();
    let tensors: Vec<Tensor> = (0..80).map(|i| f64s(&[1], &[i as f64])).collect();
    let mut live = vec![];
    for (i, t) in tensors.iter().enumerate() {
        let (token, done) = ops::external("ext", &[(t, Mode::Update)], Submit::on(&rt)).unwrap();
        token.started().wait(LONG).unwrap();
        if i % 2 == 0 {
            token.finish(Status::Ok, None).unwrap();
            done.wait(LONG).unwrap();
        } else {
            live.push((token, done));
        }
    }
    rt.shutdown(ShutdownMode::Cancel).unwrap();
    for (token, done) in live {
        assert_eq!(done.wait(ZERO).unwrap_err().status(), Status::Cancelled);
        assert_eq!(token.finish(Status::Ok, None).unwrap_err().status(), Status::AlreadyFinished);
    }
    for (i, t) in tensors.iter().enumerate() {
        let r = t.wait(ZERO);
        assert_eq!(r.is_ok(), i % 2 == 0, "tensor {i}: {r:?}");
    }
}
