//! Epoch-queue semantics (SPEC §2.1), observed through running kernels.

mod common;

use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use common::*;
use tensorasync::internals::record_enrollments;
use tensorasync::*;

/// Queue positions, each with the (thread, op) that landed there.
type Positions = Vec<(u64, (usize, usize))>;

/// Two readers of `t`, each waiting inside its kernel (up to 10 s) until the
/// other is inside too: their events, how many of them met the other, and
/// the threads they ran on. If they were serialised, the first would time
/// out and not count.
fn two_meeting_readers(
    rt: &Runtime,
    t: &Tensor,
) -> (Vec<Event>, Arc<AtomicUsize>, Arc<Mutex<Vec<std::thread::ThreadId>>>) {
    let inside = Arc::new(AtomicUsize::new(0));
    let met = Arc::new(AtomicUsize::new(0));
    let threads = Arc::new(Mutex::new(Vec::new()));
    let mut events = vec![];
    for _ in 0..2 {
        let (inside, met, threads) = (inside.clone(), met.clone(), threads.clone());
        let k = kernel(move |_| {
            threads.lock().unwrap().push(std::thread::current().id());
            inside.fetch_add(1, Ordering::SeqCst);
            let t0 = Instant::now();
            while inside.load(Ordering::SeqCst) < 2 && t0.elapsed() < Duration::from_secs(10) {
                std::hint::spin_loop();
            }
            if inside.load(Ordering::SeqCst) == 2 {
                met.fetch_add(1, Ordering::SeqCst);
            }
        });
        events.push(ops::kernel("reader", &[(t, Mode::Read)], k, Submit::on(rt)).unwrap());
    }
    (events, met, threads)
}

#[test]
fn readers_of_one_epoch_overlap() {
    let rt = Runtime::new(2).unwrap();
    let t = f64s(&[4], &[1.0; 4]);
    let (events, met, _) = two_meeting_readers(&rt, &t);
    for e in events {
        e.wait(LONG).unwrap();
    }
    assert_eq!(met.load(Ordering::SeqCst), 2, "both readers must have been running at the same time");
}

/// Readers made ready together by a writer's finish start on the worker
/// that ran the writer (one runs there at once, the other is queued): the
/// other worker must take the queued one, whether its drainer is still
/// looking for work (`hold` 0) or has exited meanwhile.
#[test]
fn readers_released_by_a_writer_run_on_both_workers() {
    let rt = Runtime::new(2).unwrap();
    for hold in [Duration::ZERO, Duration::from_millis(20)] {
        let t = f64s(&[4], &[1.0; 4]);
        let go = Arc::new(AtomicUsize::new(0));
        let g = go.clone();
        let writer = kernel(move |_| {
            while g.load(Ordering::SeqCst) == 0 {
                std::hint::spin_loop();
            }
        });
        ops::kernel("writer", &[(&t, Mode::Update)], writer, Submit::on(&rt)).unwrap();
        let (events, met, threads) = two_meeting_readers(&rt, &t);
        std::thread::sleep(hold);
        go.store(1, Ordering::SeqCst);
        for e in events {
            e.wait(LONG).unwrap();
        }
        assert_eq!(
            met.load(Ordering::SeqCst),
            2,
            "hold {hold:?}: both readers must have been running at the same time"
        );
        let threads = threads.lock().unwrap();
        assert_ne!(threads[0], threads[1], "hold {hold:?}: the readers ran on one thread");
    }
}

#[test]
fn a_writer_never_overlaps_another_access() {
    let rt = Runtime::new(2).unwrap();
    let t = f64s(&[1], &[0.0]);
    // +k for readers inside, a large negative while a writer is inside.
    let state = Arc::new(AtomicIsize::new(0));
    let violations = Arc::new(AtomicUsize::new(0));
    let readers_overlapped = Arc::new(AtomicUsize::new(0));
    const WRITER: isize = -1_000_000;
    let mut rng = 0x2545F4914F6CDD1Du64;
    for _ in 0..3000 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let write = rng % 3 == 0;
        let (s, v, ro) = (state.clone(), violations.clone(), readers_overlapped.clone());
        let k = kernel(move |_| {
            if write {
                if s.compare_exchange(0, WRITER, Ordering::SeqCst, Ordering::SeqCst).is_err() {
                    v.fetch_add(1, Ordering::SeqCst);
                }
                for _ in 0..200 {
                    std::hint::spin_loop();
                }
                if s.compare_exchange(WRITER, 0, Ordering::SeqCst, Ordering::SeqCst).is_err() {
                    v.fetch_add(1, Ordering::SeqCst);
                }
            } else {
                let before = s.fetch_add(1, Ordering::SeqCst);
                if before < 0 {
                    v.fetch_add(1, Ordering::SeqCst);
                }
                // Stay inside long enough for a second worker to join in.
                let t0 = Instant::now();
                while t0.elapsed() < Duration::from_micros(20) {
                    if s.load(Ordering::SeqCst) > 1 {
                        ro.fetch_add(1, Ordering::SeqCst);
                        break;
                    }
                    std::hint::spin_loop();
                }
                let _ = before;
                s.fetch_sub(1, Ordering::SeqCst);
            }
        });
        let mode = if write { Mode::Update } else { Mode::Read };
        ops::kernel("access", &[(&t, mode)], k, Submit::on(&rt)).unwrap();
    }
    t.wait(LONG).unwrap();
    assert_eq!(violations.load(Ordering::SeqCst), 0, "a writer overlapped another access");
    // The check is only meaningful if accesses did run concurrently at all.
    assert!(readers_overlapped.load(Ordering::SeqCst) > 0, "readers never overlapped: the test observed nothing");
}

#[test]
fn order_equals_submission_order_with_4_submitting_threads() {
    let rt = Runtime::new(2).unwrap();
    let shared = f64s(&[1], &[0.0]);
    let log: Arc<Mutex<Vec<(usize, usize)>>> = Default::default();
    let traces: Arc<Mutex<Positions>> = Default::default();
    let barrier = Arc::new(Barrier::new(4));
    std::thread::scope(|s| {
        for th in 0..4 {
            let (rt, shared, log, traces, barrier) = (&rt, &shared, log.clone(), traces.clone(), barrier.clone());
            s.spawn(move || {
                barrier.wait();
                for i in 0..500 {
                    let log = log.clone();
                    let k = kernel(move |c| {
                        // Non-commutative update: x = 3x + (th + 1), so the final
                        // value depends on the exact order.
                        unsafe { *p64(&c.views()[0]) = 3.0 * *p64(&c.views()[0]) + (th + 1) as f64 };
                        log.lock().unwrap().push((th, i));
                    });
                    let recording = record_enrollments();
                    let opts = Submit { runtime: Some(rt), ..Default::default() };
                    ops::kernel("append", &[(shared, Mode::Update)], k, opts).unwrap();
                    let trace = recording.finish();
                    traces.lock().unwrap().push((trace[0].1, (th, i)));
                }
            });
        }
    });
    shared.wait(LONG).unwrap();
    let log = log.lock().unwrap().clone();
    assert_eq!(log.len(), 2000);
    // Each thread's operations ran in its program order ...
    for th in 0..4 {
        let mine: Vec<usize> = log.iter().filter(|(t, _)| *t == th).map(|(_, i)| *i).collect();
        assert_eq!(mine, (0..500).collect::<Vec<_>>(), "thread {th} ran out of program order");
    }
    // ... and the global execution order is exactly the enrollment order.
    let mut enrolled = traces.lock().unwrap().clone();
    enrolled.sort();
    let by_position: Vec<(usize, usize)> = enrolled.iter().map(|(_, x)| *x).collect();
    assert_eq!(log, by_position, "execution order differs from enrollment order");
    // And the value equals a sequential replay of that order.
    let mut x = 0.0f64;
    for (th, _) in &log {
        x = 3.0 * x + (*th + 1) as f64;
    }
    assert_eq!(read_f64(&shared), vec![x]);
}

#[test]
fn crossed_submissions_never_deadlock() {
    let rt = Runtime::new(2).unwrap();
    let a = f64s(&[1], &[1.0]);
    let b = f64s(&[1], &[1.0]);
    const N: usize = 10_000;
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        // Thread 1: A <- f(B); thread 2: B <- g(A), concurrently.
        for (dst, src) in [(&a, &b), (&b, &a)] {
            let (rt, barrier) = (&rt, &barrier);
            s.spawn(move || {
                barrier.wait();
                for _ in 0..N {
                    let k = kernel(|c| unsafe {
                        let (d, s) = (p64(&c.views()[0]), p64(&c.views()[1]));
                        *d = (*d + *s) % 1000.0;
                    });
                    ops::kernel("cross", &[(dst, Mode::Update), (src, Mode::Read)], k, Submit::on(rt)).unwrap();
                }
            });
        }
    });
    // A deadlock would hang here; the timeout turns it into a failure.
    a.wait(LONG).expect("A never settled: deadlock");
    b.wait(LONG).expect("B never settled: deadlock");
    // A task reports its completion (and wakes these waits) before it
    // retires from the runtime's count, so the count may still read 1 here
    // for a moment; every task must retire soon after.
    rt.wait_idle(LONG).expect("a task never retired");
    assert_eq!(rt.outstanding(), 0);
}

#[test]
fn a_blocking_wait_on_a_worker_helps_instead_of_hanging() {
    // One worker: a kernel that waits for work queued behind nothing else must
    // run that work itself, or the pool would hang forever.
    let rt = Runtime::new(1).unwrap();
    let x = f64s(&[1], &[0.0]);
    let y = f64s(&[1], &[0.0]);
    let rt2 = rt.clone();
    let y2 = y.clone();
    let k = KernelFn::new(move |c| {
        ops::fill(&y2, Scalar::real(7.0), Submit::on(&rt2)).unwrap();
        y2.wait(LONG).unwrap();
        unsafe { *p64(&c.views()[0]) = 1.0 };
        Ok(())
    });
    let ev = ops::kernel("waits_inside", &[(&x, Mode::Update)], k, Submit::on(&rt)).unwrap();
    ev.wait(LONG).unwrap();
    assert_eq!(read_f64(&y), vec![7.0]);
    assert_eq!(read_f64(&x), vec![1.0]);
}

#[test]
fn waiting_on_your_own_operand_is_refused() {
    let rt = Runtime::new(2).unwrap();
    let x = f64s(&[1], &[0.0]);
    let x2 = x.clone();
    let seen = Arc::new(Mutex::new(None));
    let seen2 = seen.clone();
    let k = KernelFn::new(move |_| {
        *seen2.lock().unwrap() = Some(x2.wait(Some(Duration::from_secs(5))).map_err(|e| e.status()));
        Ok(())
    });
    ops::kernel("self_wait", &[(&x, Mode::Read)], k, Submit::on(&rt)).unwrap().wait(LONG).unwrap();
    assert_eq!(*seen.lock().unwrap(), Some(Err(Status::WouldDeadlock)));

    // Waiting on an event of an operation that needs this kernel to finish.
    let y = f64s(&[1], &[0.0]);
    let slot: Arc<Mutex<Option<Event>>> = Default::default();
    let (slot2, rt2, y2) = (slot.clone(), rt.clone(), y.clone());
    let result = Arc::new(Mutex::new(None));
    let r2 = result.clone();
    let k = KernelFn::new(move |_| {
        // The follower reads y after this kernel's update of y.
        let ev = ops::fill(&y2, Scalar::real(1.0), Submit::on(&rt2)).unwrap();
        *slot2.lock().unwrap() = Some(ev.clone());
        *r2.lock().unwrap() = Some(ev.wait(Some(Duration::from_secs(5))).map_err(|e| e.status()));
        Ok(())
    });
    ops::kernel("holds_y", &[(&y, Mode::Update)], k, Submit::on(&rt)).unwrap().wait(LONG).unwrap();
    assert_eq!(*result.lock().unwrap(), Some(Err(Status::WouldDeadlock)));
    slot.lock().unwrap().take().unwrap().wait(LONG).unwrap();
}

#[test]
fn parallel_kernels_share_the_workers() {
    let rt = Runtime::new(2).unwrap();
    let t = f64s(&[1], &[0.0]);
    let threads: Arc<Mutex<std::collections::HashSet<std::thread::ThreadId>>> = Default::default();
    let hits = Arc::new((0..10_000).map(|_| AtomicUsize::new(0)).collect::<Vec<_>>());
    let (th2, hits2) = (threads.clone(), hits.clone());
    let k = KernelFn::new(move |c| {
        c.parallel_for(0..10_000, 64, &|r| {
            th2.lock().unwrap().insert(std::thread::current().id());
            for i in r {
                hits2[i].fetch_add(1, Ordering::Relaxed);
                for _ in 0..100 {
                    std::hint::spin_loop();
                }
            }
        });
        Ok(())
    });
    // Small tasks run alongside on other tensors.
    let others: Vec<Tensor> = (0..200).map(|_| f64s(&[1], &[0.0])).collect();
    let ev = ops::kernel("parallel", &[(&t, Mode::Update)], k, Submit::on(&rt)).unwrap();
    for o in &others {
        let th3 = threads.clone();
        ops::kernel(
            "small",
            &[(o, Mode::Update)],
            kernel(move |_| {
                th3.lock().unwrap().insert(std::thread::current().id());
            }),
            Submit::on(&rt),
        )
        .unwrap();
    }
    ev.wait(LONG).unwrap();
    rt.shutdown(ShutdownMode::Drain).unwrap();
    assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1), "every index exactly once");
    let n = threads.lock().unwrap().len();
    assert!(n <= 2, "{n} threads ran kernel pieces and tasks; the runtime has 2");
    assert!(!threads.lock().unwrap().contains(&std::thread::current().id()));
}
