//! Priorities among ready tasks (SPEC §2.8, `Submit::with_priority`): with
//! one worker held by a gated kernel, everything submitted meanwhile waits
//! in the ready queues, and the order the worker then runs it in is the
//! order the pool chose. No timing is involved.

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use tensorasync::*;

type Log = Arc<Mutex<Vec<&'static str>>>;

/// A one-worker runtime whose worker runs a kernel writing `held` that
/// blocks until the returned gate opens; returns once that kernel runs.
fn held_runtime(held: &Tensor) -> (Runtime, Gate) {
    let rt = Runtime::new(1).unwrap();
    let (gate, started) = (Gate::default(), Gate::default());
    let (g, s) = (gate.clone(), started.clone());
    let k = KernelFn::new(move |_| {
        s.open();
        g.wait();
        Ok(())
    });
    ops::kernel("gate", &[(held, Mode::Write)], k, Submit::on(&rt)).unwrap();
    started.wait();
    (rt, gate)
}

/// Submit a kernel that logs `name` when it runs, with `mode` on `t`.
fn logged(rt: &Runtime, log: &Log, name: &'static str, t: &Tensor, mode: Mode, priority: i32) {
    let l = log.clone();
    let k = KernelFn::new(move |_| {
        l.lock().unwrap().push(name);
        Ok(())
    });
    let opts = if priority == 0 { Submit::on(rt) } else { Submit::on(rt).with_priority(priority) };
    ops::kernel(name, &[(t, mode)], k, opts).unwrap();
}

fn scalar() -> Tensor {
    Tensor::zeros(DType::F64, &[1], Order::RowMajor, Domain::Host).unwrap()
}

/// Independent ready tasks: highest priority first, equal priorities in
/// submission order, priority 0 (the default) before negative ones.
#[test]
fn ready_tasks_run_highest_priority_first() {
    let held = scalar();
    let (rt, gate) = held_runtime(&held);
    let log = Log::default();
    let plan: [(&'static str, i32); 9] =
        [("a0", 0), ("b5", 5), ("c-3", -3), ("d5", 5), ("e0", 0), ("f10", 10), ("g-3", -3), ("h1", 1), ("i0", 0)];
    let ts: Vec<Tensor> = plan.iter().map(|_| scalar()).collect();
    for ((name, p), t) in plan.iter().zip(&ts) {
        logged(&rt, &log, name, t, Mode::Write, *p);
    }
    gate.open();
    rt.wait_idle(None).unwrap();
    assert_eq!(*log.lock().unwrap(), ["f10", "b5", "d5", "h1", "a0", "e0", "i0", "c-3", "g-3"]);
}

/// Without priorities the order is the submission order, as before.
#[test]
fn without_priorities_ready_tasks_run_in_submission_order() {
    let held = scalar();
    let (rt, gate) = held_runtime(&held);
    let log = Log::default();
    let names = ["a", "b", "c", "d", "e", "f"];
    let ts: Vec<Tensor> = names.iter().map(|_| scalar()).collect();
    for (name, t) in names.iter().zip(&ts) {
        logged(&rt, &log, name, t, Mode::Write, 0);
    }
    gate.open();
    rt.wait_idle(None).unwrap();
    assert_eq!(*log.lock().unwrap(), names);
}

/// A priority orders only ready tasks: a high-priority reader still waits
/// for the low-priority writer before it, while a default one overtakes.
#[test]
fn dependencies_win_over_priorities() {
    let held = scalar();
    let (rt, gate) = held_runtime(&held);
    let (x, y) = (scalar(), scalar());
    let log = Log::default();
    logged(&rt, &log, "x-writer-5", &x, Mode::Write, -5);
    logged(&rt, &log, "x-reader+9", &x, Mode::Read, 9);
    logged(&rt, &log, "y0", &y, Mode::Write, 0);
    gate.open();
    rt.wait_idle(None).unwrap();
    assert_eq!(*log.lock().unwrap(), ["y0", "x-writer-5", "x-reader+9"]);
}

/// Successors made ready together by one task: the worker goes on with the
/// highest-priority one, unless a queued task has a higher priority still;
/// without priorities, with the first one, then the rest in order.
#[test]
fn successors_are_taken_by_priority_too() {
    let held = scalar();
    let (rt, gate) = held_runtime(&held);
    let (y, z) = (scalar(), scalar());
    let log = Log::default();
    // Readers of the held tensor: ready when the gate kernel finishes.
    logged(&rt, &log, "r1", &held, Mode::Read, 1);
    logged(&rt, &log, "r3", &held, Mode::Read, 3);
    logged(&rt, &log, "r2", &held, Mode::Read, 2);
    // Ready at once, queued behind the gate.
    logged(&rt, &log, "y7", &y, Mode::Write, 7);
    logged(&rt, &log, "z0", &z, Mode::Write, 0);
    gate.open();
    rt.wait_idle(None).unwrap();
    assert_eq!(*log.lock().unwrap(), ["y7", "r3", "r2", "r1", "z0"]);

    let (rt, gate) = held_runtime(&held);
    let log = Log::default();
    for name in ["s1", "s2", "s3"] {
        logged(&rt, &log, name, &held, Mode::Read, 0);
    }
    logged(&rt, &log, "z", &z, Mode::Write, 0);
    gate.open();
    rt.wait_idle(None).unwrap();
    // s1 runs in place after the gate; z was queued before s2 and s3.
    assert_eq!(*log.lock().unwrap(), ["s1", "z", "s2", "s3"]);
}
