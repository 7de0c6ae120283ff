//! Model checks of the runtime's concurrency protocols under loom, in a
//! `--cfg loom` build with the `loom` feature (see `crate::sync`; the
//! script gives the cfg to this crate alone and runs each model):
//!
//! ```text
//! scripts/test-hardening.sh loom
//! ```
//!
//! What runs under the model checker is the library's own code: the task's
//! pending count, submission guard and successor list (`Task::depend_on`,
//! `release_guard`, `finish`), the epoch queue's enrollment
//! (`EpochQueue::enroll`, `enroll_barrier`, `is_idle`), a task's last steps
//! (`exec::run`: execute, release the accesses, complete the event, fire
//! the callbacks), and events (`Event::on_complete`, `poll`,
//! `mark_complete`). Their atomics and mutexes are loom's. The queue is
//! held in a loom mutex standing for the lock of the value that owns it
//! (the queue's contract: it lives inside that lock). Not modelled: the
//! runtime's worker pool and injector (the worker is a model thread that
//! receives ready tasks over a channel), `Arc` reference counts (std's),
//! and the task's `UnsafeCell` work slot, whose exclusive use the pending
//! count's AcqRel transitions give (loom checks those transitions, not the
//! cell's accesses).
//!
//! Each model but the last has three submitting threads and one worker;
//! the last has two workers. Each counts the interleavings it explored
//! (printed at the end).

use std::sync::atomic::{AtomicUsize, Ordering as StdOrdering};
use std::sync::Arc;

use loom::sync::mpsc;

use super::event::Event;
use super::exec;
use super::task::Task;
use crate::domain::Domain;
use crate::dtype::DType;
use crate::error::Status;
use crate::layout::Order;
use crate::queue::{EpochQueue, Mode};
use crate::region::Region;
use crate::sync::Mutex;
use crate::tensor::handle::Tensor;
use crate::tensor::value::ValueRc;

/// The value lock with its epoch queue.
type Queue = Arc<Mutex<EpochQueue<Task>>>;

/// The order in which tasks were enrolled.
type Log = Arc<std::sync::Mutex<Vec<usize>>>;

/// What callbacks found wrong. Callbacks run under the library's panic
/// guard (a panic in one is reported and goes no further), so they record
/// violations here and the model asserts there are none at its end. (A std
/// mutex: nothing inside it is a loom operation, so it never blocks a model
/// thread.)
#[derive(Clone, Default)]
struct Violations(Arc<std::sync::Mutex<Vec<String>>>);

impl Violations {
    fn check(&self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.lock().unwrap().push(what());
        }
    }
    fn assert_none(&self) {
        let v = self.0.lock().unwrap();
        assert!(v.is_empty(), "violations: {v:?}");
    }
}

/// A task that completes `ev` with the settled state of `t` (a wait's
/// barrier task: it fails with `Unconstructed` when `t` has no value).
fn task_for(t: &Tensor, ev: &Event) -> Arc<Task> {
    exec::barrier(ValueRc::new(t.root().clone()), Region::Full, ev.clone())
}

/// Enroll `task` for `mode` (`None`: as a barrier) under the queue's lock,
/// then drop the guard; a task that is ready goes to the worker. Every
/// enrollment sends exactly one message, so the worker knows how many to
/// expect.
fn submit(q: &Queue, task: Arc<Task>, mode: Option<(Mode, Region)>, to_worker: &mpsc::Sender<Option<Arc<Task>>>) {
    {
        let mut g = q.lock();
        let stamp = g.next_stamp();
        match mode {
            Some((m, r)) => g.enroll(&task, m, &r, stamp, false),
            None => g.enroll_barrier(&task, &Region::Full),
        }
    }
    let ready = task.release_guard();
    to_worker.send(ready.then_some(task)).unwrap();
}

/// The worker: runs every task made ready by its guard (and, inline, the
/// successors each one makes ready), until all `n` enrollments are heard of.
fn worker(n: usize, rx: mpsc::Receiver<Option<Arc<Task>>>) {
    for _ in 0..n {
        if let Some(t) = rx.recv().unwrap() {
            exec::run(t);
        }
    }
}

fn run_model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    let iterations = Arc::new(AtomicUsize::new(0));
    let count = iterations.clone();
    let start = std::time::Instant::now();
    loom::model(move || {
        count.fetch_add(1, StdOrdering::Relaxed);
        f();
    });
    eprintln!(
        "loom model {name}: {} interleavings explored in {:.1} s (LOOM_MAX_PREEMPTIONS={})",
        iterations.load(StdOrdering::Relaxed),
        start.elapsed().as_secs_f64(),
        std::env::var("LOOM_MAX_PREEMPTIONS").unwrap_or_else(|_| "unbounded".into())
    );
}

/// Enrollment and release on one epoch queue, with the task's pending
/// count and guard: a writer of the whole value and a reader are enrolled
/// by two threads, and a writer of one element or the release of the
/// value's last handle (a barrier enrolled behind everything while work is
/// in flight, as `release_value` does) by a third, while the worker runs
/// and finishes what became ready. Every task runs exactly once,
/// only after every earlier task it conflicts with has finished; the queue
/// is idle at the end; nothing waits forever (loom reports a deadlock).
///
/// Two models, to keep each within its time: in the first the third thread
/// writes one element, in the second it releases the last handle.
#[test]
fn loom_epoch_queue_enrollment() {
    epoch_queue_model("epoch_queue_enrollment", false);
}

/// See [`loom_epoch_queue_enrollment`].
#[test]
fn loom_epoch_queue_release_mid_flight() {
    epoch_queue_model("epoch_queue_release_mid_flight", true);
}

fn epoch_queue_model(name: &'static str, release_last: bool) {
    let value = Tensor::zeros(DType::F64, &[2], Order::RowMajor, Domain::Host).unwrap();
    run_model(name, move || {
        let q: Queue = Arc::new(Mutex::new(EpochQueue::default()));
        let (tx, rx) = mpsc::channel();
        // Each task's event records that it ran, and checks its conflicts
        // had finished: `before[i]` are the tasks enrolled before task `i`
        // that it conflicts with, filled in as they are enrolled.
        // (std types: nothing inside them is a loom operation, and they add
        // no interleavings of their own.)
        let ran: Arc<[AtomicUsize; 4]> = Arc::new(Default::default());
        let events: Vec<Event> = (0..4).map(|_| Event::new()).collect();
        let tasks: Vec<Arc<Task>> = events.iter().map(|e| task_for(&value, e)).collect();
        let log: Log = Arc::default();
        let bad = Violations::default();
        for (i, e) in events.iter().enumerate() {
            let (ran, log, bad) = (ran.clone(), log.clone(), bad.clone());
            e.on_complete(Box::new(move |_| {
                // The log is the enrollment order: every task enrolled
                // before this one that it conflicts with must have finished.
                // 0: writer (whole), 1: reader (whole), 2: writer of element
                // 1, 3: the release (a barrier: it joins as a reader). All
                // regions overlap, so only two readers do not conflict.
                let order = log.lock().unwrap().clone();
                let Some(me) = order.iter().position(|&k| k == i) else {
                    return bad.check(false, || format!("task {i} ran before it was enrolled"));
                };
                // (`ran` rather than the tasks' own done flags: every task
                // runs on the worker, one after the other, so a task that
                // finished before this one became ready has run its
                // callbacks too, and reading plain flags adds no
                // interleavings to the model.)
                let reader = |k: usize| k == 1 || k == 3;
                for &k in &order[..me] {
                    if !(reader(k) && reader(i)) {
                        bad.check(ran[k].load(StdOrdering::Relaxed) == 1, || {
                            format!("task {i} ran before task {k}, enrolled before it and conflicting")
                        });
                    }
                }
                ran[i].fetch_add(1, StdOrdering::Relaxed);
            }));
        }
        let mut threads = Vec::new();
        for (i, mode) in [
            (0, (Mode::Update, Region::Full)),
            (1, (Mode::Read, Region::Full)),
            (2, (Mode::Write, Region::Span { lo: 1, hi: 1, exact: true })),
        ] {
            let (q, tx, t, log, ran) = (q.clone(), tx.clone(), tasks[i].clone(), log.clone(), ran.clone());
            let release = (i == 2 && release_last).then(|| tasks[3].clone());
            threads.push(loom::thread::spawn(move || {
                if release.is_none() {
                    submit_logged(&q, t, Some(mode), &tx, &log, i);
                }
                if let Some(r) = release {
                    // The last handle goes while work may be pending: behind
                    // everything enrolled, or at once if nothing is pending
                    // (as `release_value` does).
                    let mut g = q.lock();
                    if g.is_idle() {
                        // Nothing to wait for: the count goes now, and no
                        // later task has to wait for it.
                        drop(g);
                        drop(r);
                        ran[3].fetch_add(1, StdOrdering::Relaxed);
                        tx.send(None).unwrap();
                    } else {
                        g.enroll_barrier(&r, &Region::Full);
                        log.lock().unwrap().push(3);
                        drop(g);
                        let ready = r.release_guard();
                        tx.send(ready.then_some(r)).unwrap();
                    }
                }
            }));
        }
        drop(tx);
        let w = loom::thread::spawn(move || worker(3, rx));
        for t in threads {
            t.join().unwrap();
        }
        w.join().unwrap();
        for (i, r) in ran.iter().enumerate() {
            // Task 2 (the element's writer) or 3 (the release) takes part.
            let want = usize::from(i < 2 || (i == 3) == release_last);
            assert_eq!(r.load(StdOrdering::Relaxed), want, "task {i} ran {} times", r.load(StdOrdering::Relaxed));
        }
        assert!(q.lock().is_idle());
        bad.assert_none();
    });
}

/// As [`submit`], recording the enrollment order in `log` under the
/// queue's lock.
fn submit_logged(
    q: &Queue,
    task: Arc<Task>,
    mode: Option<(Mode, Region)>,
    tx: &mpsc::Sender<Option<Arc<Task>>>,
    log: &Log,
    i: usize,
) {
    {
        let mut g = q.lock();
        let stamp = g.next_stamp();
        match mode {
            Some((m, r)) => g.enroll(&task, m, &r, stamp, false),
            None => g.enroll_barrier(&task, &Region::Full),
        }
        log.lock().unwrap().push(i);
    }
    let ready = task.release_guard();
    tx.send(ready.then_some(task)).unwrap();
}

/// The completion of events and their callbacks: an operation that fails
/// (a wait on an unconstructed tensor) behind a writer, with callbacks
/// attached while it runs, its event polled, and its value's handle
/// released mid-flight. Whenever the event is seen complete (by poll, or in
/// any callback) its outcome is final and readable, and the task has
/// released its accesses (the queue holds nothing unfinished of it: a
/// zero-timeout wait would see it done); every callback fires exactly once.
#[test]
fn loom_event_completion_and_callbacks() {
    let ok = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Domain::Host).unwrap();
    let bad = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
    run_model("event_completion_and_callbacks", move || {
        let q: Queue = Arc::new(Mutex::new(EpochQueue::default()));
        let (tx, rx) = mpsc::channel();
        let (ew, ef) = (Event::new(), Event::new());
        let writer = task_for(&ok, &ew);
        let failing = task_for(&bad, &ef);
        let fired = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
        let bad = Violations::default();
        // Observed complete: final outcome, and the accesses released.
        let check = {
            let (writer, failing, bad) = (writer.clone(), failing.clone(), bad.clone());
            move |ev: &Event, failing_one: bool, seen: &str| {
                let Some(r) = ev.poll() else {
                    return bad.check(false, || format!("{seen}: the event polls pending"));
                };
                let task = if failing_one { &failing } else { &writer };
                let status = r.err().map(|e| e.status());
                let want = if failing_one { Some(Status::Unconstructed) } else { None };
                bad.check(status == want, || format!("{seen}: outcome {status:?}, want {want:?}"));
                bad.check(task.is_done(), || {
                    format!("{seen}: the event completed before its task released its accesses")
                });
            }
        };
        // Submitter 1: the writer, then the failing operation behind it
        // (it reads what the writer wrote).
        let s1 = {
            let (q, tx, writer, failing) = (q.clone(), tx.clone(), writer.clone(), failing.clone());
            loom::thread::spawn(move || {
                submit(&q, writer, Some((Mode::Update, Region::Full)), &tx);
                submit(&q, failing, Some((Mode::Read, Region::Full)), &tx);
            })
        };
        // Submitter 2: callbacks on both events, attached while they run
        // (or after: then they run at once, here).
        let s2 = {
            let (ew, ef, fired, check) = (ew.clone(), ef.clone(), fired.clone(), check.clone());
            loom::thread::spawn(move || {
                for (ev, failing_one) in [(ef, true), (ew, false)] {
                    let (fired, check, ev2) = (fired.clone(), check.clone(), ev.clone());
                    ev.on_complete(Box::new(move |_| {
                        check(&ev2, failing_one, "in a callback");
                        fired.fetch_add(1, loom::sync::atomic::Ordering::Relaxed);
                    }));
                }
            })
        };
        // Submitter 3: polls the failing event, and releases the value's
        // last handle mid-flight (a release task behind everything, as
        // `release_value` enrolls when work is pending).
        let s3 = {
            let (q, tx, ef, check, release) = (q.clone(), tx.clone(), ef.clone(), check.clone(), exec::idle_task(&ok));
            loom::thread::spawn(move || {
                if ef.poll().is_some() {
                    check(&ef, true, "polled");
                }
                let mut g = q.lock();
                if g.is_idle() {
                    drop(g);
                    exec::run(release);
                    tx.send(None).unwrap();
                } else {
                    g.enroll_barrier(&release, &Region::Full);
                    drop(g);
                    let ready = release.release_guard();
                    tx.send(ready.then_some(release)).unwrap();
                }
            })
        };
        drop(tx);
        let w = loom::thread::spawn(move || worker(3, rx));
        for t in [s1, s2, s3, w] {
            t.join().unwrap();
        }
        assert_eq!(fired.load(loom::sync::atomic::Ordering::Relaxed), 2, "every callback fires exactly once");
        check(&ef, true, "at the end");
        check(&ew, false, "at the end");
        assert!(q.lock().is_idle());
        bad.assert_none();
    });
}

/// The order of reports through a task with two predecessors: T1 updates
/// A, T2 updates B, T3 reads both (stand-ins for operations with
/// callbacks, see `Task::report_as_operation`), T3 enrolled while both
/// are unfinished (the case `ta_callback`'s promise covers); T1 and T2 run
/// on two workers, and T3 runs on whichever finishes last. Whichever that
/// is, T3's callback (and so T3 itself, which a task's successor starts
/// after) comes after the callbacks of both T1 and T2: a task tells its
/// successors only after its own callbacks (`task::Finished`). Told with
/// its waits, T3 could run and report on T2's worker while T1's worker was
/// between T1's finish and its callback.
#[test]
fn loom_reports_follow_the_edges() {
    let a = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Domain::Host).unwrap();
    let b = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Domain::Host).unwrap();
    run_model("reports_follow_the_edges", move || {
        let (qa, qb): (Queue, Queue) = Default::default();
        let events: Vec<Event> = (0..3).map(|_| Event::new()).collect();
        let tasks: Vec<Arc<Task>> = [&a, &b, &a]
            .iter()
            .zip(&events)
            .map(|(t, e)| {
                let mut task = task_for(t, e);
                Task::report_as_operation(&mut task);
                task
            })
            .collect();
        let reported = Arc::new([(); 3].map(|_| loom::sync::atomic::AtomicBool::new(false)));
        let bad = Violations::default();
        for (i, e) in events.iter().enumerate() {
            let (reported, bad) = (reported.clone(), bad.clone());
            e.on_complete(Box::new(move |_| {
                if i == 2 {
                    for k in 0..2 {
                        bad.check(reported[k].load(loom::sync::atomic::Ordering::Acquire), || {
                            format!("T3 reported before the callback of its predecessor T{}", k + 1)
                        });
                    }
                }
                reported[i].store(true, loom::sync::atomic::Ordering::Release);
            }));
        }
        let stamp = |q: &Queue| q.lock().next_stamp();
        let (sa, sb) = (stamp(&qa), stamp(&qb));
        qa.lock().enroll(&tasks[0], Mode::Update, &Region::Full, sa, false);
        qb.lock().enroll(&tasks[1], Mode::Update, &Region::Full, sb, false);
        qa.lock().enroll(&tasks[2], Mode::Read, &Region::Full, sa + 1, false);
        qb.lock().enroll(&tasks[2], Mode::Read, &Region::Full, sb + 1, false);
        assert!(tasks[0].release_guard() && tasks[1].release_guard());
        assert!(!tasks[2].release_guard(), "T3 waits for T1 and T2");
        let workers: Vec<_> = tasks[..2].iter().cloned().map(|t| loom::thread::spawn(move || exec::run(t))).collect();
        for w in workers {
            w.join().unwrap();
        }
        for (i, r) in reported.iter().enumerate() {
            assert!(r.load(loom::sync::atomic::Ordering::Relaxed), "T{} reported", i + 1);
        }
        bad.assert_none();
    });
}
