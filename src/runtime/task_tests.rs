//! Tests of the task graph and of epoch queues with real tasks (the queue
//! itself knows only its `Waiter` trait), and the size budgets of the hot
//! structures.

use std::sync::Arc;

use crate::runtime::task::Task;

/// Whether `a` holds exactly the tasks of `b`, in any order.
fn same(a: &[Arc<Task>], b: &[&Arc<Task>]) -> bool {
    a.len() == b.len() && b.iter().all(|x| a.iter().any(|y| Arc::ptr_eq(x, y)))
}

mod size_budgets {
    use std::mem::size_of;

    /// The sizes the per-task costs were measured with: a value with its two
    /// reference counts fills one cache line, a task with its counts fits
    /// mimalloc's 320-byte size class (see docs/perf-notes/runtime.md; the
    /// handle table's budget is checked beside the table).
    #[test]
    fn hot_structures_stay_within_their_size_budgets() {
        let counts = crate::runtime::task::ARC_COUNTS;
        assert_eq!(size_of::<crate::tensor::value::Value>() + counts, 64, "a value and its counts are one cache line");
        assert!(
            size_of::<crate::runtime::task::Task>() + counts <= 320,
            "a task is {} bytes, over its 320-byte size class",
            size_of::<crate::runtime::task::Task>()
        );
    }
}

mod guard {
    use std::sync::{Arc, Barrier};

    use super::same;
    use crate::domain::Domain;
    use crate::dtype::DType;
    use crate::layout::Order;
    use crate::runtime::exec::idle_task as task;
    use crate::tensor::handle::Tensor;

    fn scalar() -> Tensor {
        Tensor::zeros(DType::F64, &[1], Order::RowMajor, Domain::Host).unwrap()
    }

    /// The guard counts edges without touching `pending`: predecessors that
    /// finish before the guard goes, and after, each take their own edge
    /// off, and the task is ready exactly when the last of both is gone.
    #[test]
    fn edges_finished_before_and_after_the_guard_all_count() {
        let t = scalar();
        let preds: Vec<_> = (0..3).map(|_| task(&t)).collect();
        let done_already = task(&t);
        for p in &preds {
            assert!(p.release_guard());
        }
        assert!(done_already.release_guard());
        assert!(done_already.finish().tell_all().is_empty());
        let me = task(&t);
        me.depend_on(&done_already); // finished: no edge
        for p in &preds {
            me.depend_on(p);
        }
        assert!(preds[0].finish().tell_all().is_empty(), "two edges and the guard are left");
        assert!(!me.release_guard(), "two edges are left");
        assert!(preds[1].finish().tell_all().is_empty(), "one edge is left");
        let ready = preds[2].finish().tell_all();
        assert!(ready.len() == 1 && Arc::ptr_eq(&ready[0], &me));

        // Every edge gone before the guard: the guard's release makes it ready.
        let p = task(&t);
        assert!(p.release_guard());
        let me = task(&t);
        me.depend_on(&p);
        assert!(p.finish().tell_all().is_empty());
        assert!(me.release_guard());
        // No edge at all.
        let alone = task(&t);
        alone.depend_on(&alone);
        assert!(alone.release_guard());
    }

    /// A finished task's waits are told first, wherever they were added
    /// among its other successors; the others only when told separately
    /// (after the task's callbacks, see `Finished`). Each successor is told
    /// once.
    #[test]
    fn waits_are_told_before_the_other_successors() {
        use crate::region::Region;
        use crate::runtime::event::Event;
        use crate::runtime::exec;
        use crate::tensor::value::ValueRc;
        let t = scalar();
        let wait = || exec::barrier(ValueRc::new(t.root().clone()), Region::Full, Event::new());
        let p = task(&t);
        assert!(p.release_guard());
        // others and waits interleaved: o w o w w o
        let succ = [task(&t), wait(), task(&t), wait(), wait(), task(&t)];
        for s in &succ {
            s.depend_on(&p);
            assert!(!s.release_guard(), "one edge is left");
        }
        let mut finished = p.finish();
        assert!(p.is_done(), "finished before any successor is told");
        let (mut waits, mut others) = (Default::default(), Default::default());
        finished.tell_waits(&mut waits);
        finished.tell_rest(&mut others);
        assert!(same(&waits, &[&succ[1], &succ[3], &succ[4]]), "the waits, and only they, are told first");
        assert!(same(&others, &[&succ[0], &succ[2], &succ[5]]), "the others when told separately");
        // Finished with no edge left: a later successor needs none.
        let late = wait();
        late.depend_on(&p);
        assert!(late.release_guard());
    }

    /// Predecessors finishing on other threads while the guard goes: the
    /// task becomes ready exactly once, from whichever step was last.
    #[test]
    fn a_task_becomes_ready_once_however_its_edges_and_guard_race() {
        let t = scalar();
        for round in 0..500 {
            let n = 1 + round % 4;
            let preds: Vec<_> = (0..n).map(|_| task(&t)).collect();
            for p in &preds {
                assert!(p.release_guard());
            }
            let me = task(&t);
            for p in &preds {
                me.depend_on(p);
            }
            let start = Arc::new(Barrier::new(n + 1));
            let finishers: Vec<_> = preds
                .into_iter()
                .map(|p| {
                    let start = start.clone();
                    std::thread::spawn(move || {
                        start.wait();
                        p.finish().tell_all().len()
                    })
                })
                .collect();
            start.wait();
            let by_guard = me.release_guard() as usize;
            let by_edges: usize = finishers.into_iter().map(|f| f.join().unwrap()).sum();
            assert_eq!(by_guard + by_edges, 1, "round {round}: ready {} times", by_guard + by_edges);
        }
    }
}

mod queue {
    use super::same;
    use crate::domain::Domain;
    use crate::dtype::DType;
    use crate::layout::Order;
    use crate::queue::{EpochQueue, Mode};
    use crate::region::Region;
    use crate::runtime::exec::idle_task as task;
    use crate::tensor::handle::Tensor;

    fn span(i: isize) -> Region {
        Region::Span { lo: i, hi: i, exact: true }
    }

    /// Whole-value writers are kept apart from the other entries; every
    /// access still waits for exactly the earlier accesses it conflicts with.
    #[test]
    fn whole_writers_regions_and_barriers_wait_for_exactly_their_conflicts() {
        let t = Tensor::zeros(DType::F64, &[2], Order::RowMajor, Domain::Host).unwrap();
        let mut q = EpochQueue::default();
        assert!(q.is_idle());
        let w1 = task(&t);
        q.enroll(&w1, Mode::Write, &Region::Full, 1, false);
        let r1 = task(&t); // reads element 0: after w1
        q.enroll(&r1, Mode::Read, &span(0), 2, false);
        let x = task(&t); // writes element 1: after w1, beside r1
        q.enroll(&x, Mode::Update, &span(1), 3, false);
        let r2 = task(&t); // reads everything: after w1 and x
        q.enroll(&r2, Mode::Read, &Region::Full, 4, false);
        let w2 = task(&t); // writes everything: after all of them
        q.enroll(&w2, Mode::Write, &Region::Full, 5, false);
        let b = task(&t); // waits on element 0: after w2 only
        q.enroll_barrier(&b, &span(0));
        let e = task(&t); // writes no element: waits for nothing
        q.enroll(&e, Mode::Write, &Region::Empty, 6, false);
        assert_eq!(q.next_stamp(), 7);
        assert!(!q.is_idle());

        assert!(w1.release_guard());
        assert!(e.release_guard());
        for t in [&r1, &x, &r2, &w2, &b] {
            assert!(!t.release_guard());
        }
        assert!(e.finish().tell_all().is_empty());
        assert!(same(&w1.finish().tell_all(), &[&r1, &x]));
        assert!(same(&x.finish().tell_all(), &[&r2]));
        assert!(r1.finish().tell_all().is_empty());
        assert!(!q.is_idle());
        assert!(same(&r2.finish().tell_all(), &[&w2]));
        assert!(same(&w2.finish().tell_all(), &[&b]));
        assert!(!q.is_idle());
        assert!(b.finish().tell_all().is_empty());
        assert!(q.is_idle());
    }

    /// Writers through one region replace each other's entry; a writer that
    /// covers the one entry there is replaces it too; each still waits for
    /// the writer before it, and a reader after them for both regions.
    #[test]
    fn writers_through_one_region_keep_one_entry() {
        let t = Tensor::zeros(DType::F64, &[4], Order::RowMajor, Domain::Host).unwrap();
        let mut q = EpochQueue::default();
        let x1 = task(&t);
        q.enroll(&x1, Mode::Update, &span(0), 1, false);
        let x2 = task(&t);
        q.enroll(&x2, Mode::Update, &span(0), 2, false);
        assert_eq!(q.frontier_len(), 1);
        let wide = Region::Span { lo: 0, hi: 1, exact: true };
        let x3 = task(&t); // covers element 0 and 1: after x2
        q.enroll(&x3, Mode::Write, &wide, 3, false);
        assert_eq!(q.frontier_len(), 1);
        let y = task(&t); // element 2: beside all of them
        q.enroll(&y, Mode::Update, &span(2), 4, false);
        let r = task(&t); // reads everything: after x3 and y
        q.enroll(&r, Mode::Read, &Region::Full, 5, false);
        assert!(x1.release_guard());
        assert!(y.release_guard());
        for t in [&x2, &x3, &r] {
            assert!(!t.release_guard());
        }
        assert!(same(&x1.finish().tell_all(), &[&x2]));
        assert!(same(&x2.finish().tell_all(), &[&x3]));
        assert!(x3.finish().tell_all().is_empty());
        assert!(same(&y.finish().tell_all(), &[&r]));
        assert!(r.finish().tell_all().is_empty());
        assert!(q.is_idle());
    }
}
