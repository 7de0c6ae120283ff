//! Views and aliases (SPEC §2.3): slices, permutations, conjugation and
//! reshapes share their root's epoch queue, keep its storage alive, write
//! through, and let operations on disjoint parts run concurrently.

mod common;

use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use num_complex::Complex64 as C;
use tensorasync::*;

fn iota(extents: &[usize]) -> Tensor {
    let n: usize = extents.iter().product();
    let data: Vec<f64> = (0..n).map(|i| i as f64).collect();
    f64s(extents, &data)
}

#[test]
fn a_view_outlives_its_parent_handle() {
    let rt = Runtime::new(2).unwrap();
    let parent = iota(&[4, 3]);
    let row = parent.slice(&[SliceSpec::index(2), SliceSpec::all(3)]).unwrap();
    ops::scale(&parent, Scalar::real(10.0), Submit::on(&rt)).unwrap();
    drop(parent);
    // The view keeps the storage and sees the write submitted before it was read.
    assert_eq!(read_f64(&row), vec![60.0, 70.0, 80.0]);
    assert!(row.is_view());
    assert_eq!(row.extents().unwrap().as_slice(), &[3]);
}

/// Operations point at a view without a count of their own: a view whose
/// last handle goes while operations through it are queued stays alive until
/// they have run (ASan and valgrind check the memory), and no longer counts as
/// a live view of its value, which may then take another shape.
#[test]
fn a_view_released_with_operations_pending_serves_them_and_lets_the_value_reshape() {
    let rt = Runtime::new(2).unwrap();
    let gate = Gate::default();
    let t = iota(&[2, 3]);
    ops::kernel("hold", &[(&t, Mode::Update)], blocker(&gate), Submit::on(&rt)).unwrap();
    let row = t.slice(&[SliceSpec::index(1), SliceSpec::all(3)]).unwrap();
    let mid = row.slice(&[SliceSpec::range(1, 3)]).unwrap();
    for _ in 0..3 {
        ops::scale(&mid, Scalar::real(2.0), Submit::on(&rt)).unwrap();
    }
    let mut seen = [0.0f64; 3];
    let ev = unsafe { ops::copy_out(&row, seen.as_mut_ptr().cast(), 3, None, Submit::on(&rt)) }.unwrap();
    drop(mid);
    drop(row);
    // No live view is left: an overwrite may give the value another shape,
    // behind the queued operations (they still see the old storage).
    let a = f64s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let identity = f64s(&[2, 2], &[1.0, 0.0, 0.0, 1.0]);
    ops::assign_product(&t, Scalar::real(1.0), &a, &identity, Submit::on(&rt)).unwrap();
    gate.open();
    ev.wait(LONG).unwrap();
    assert_eq!(seen, [3.0, 32.0, 40.0], "row 1 of iota(2, 3) with its last two elements scaled by 8");
    assert_eq!(t.extents().unwrap().as_slice(), &[2, 2]);
    assert_eq!(read_f64(&t), vec![1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn parent_then_view_and_view_then_parent_are_ordered() {
    let rt = Runtime::new(2).unwrap();
    let gate = Gate::default();
    let t = iota(&[2, 4]);
    let col = t.slice(&[SliceSpec::all(2), SliceSpec::range(1, 2)]).unwrap();
    // Parent writer (held back), then a view reader: the reader must see it.
    ops::kernel("parent_writer", &[(&t, Mode::Update)], blocker(&gate), Submit::on(&rt)).unwrap();
    ops::fill(&t, Scalar::real(7.0), Submit::on(&rt)).unwrap();
    let mut seen = [0.0f64; 2];
    let ev = unsafe { ops::copy_out(&col, seen.as_mut_ptr().cast(), 2, None, Submit::on(&rt)) }.unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(ev.poll().is_none(), "the view read ran before the parent's writer");
    gate.open();
    ev.wait(LONG).unwrap();
    assert_eq!(seen, [7.0, 7.0]);
    // View writer, then a parent reader: write-through is seen.
    ops::fill(&col, Scalar::real(-1.0), Submit::on(&rt)).unwrap();
    assert_eq!(read_f64(&t), vec![7.0, -1.0, 7.0, 7.0, 7.0, -1.0, 7.0, 7.0]);
    // And a view of a view writes through to the root.
    let cell = col.slice(&[SliceSpec::index(1), SliceSpec::index(0)]).unwrap();
    ops::fill(&cell, Scalar::real(3.0), Submit::on(&rt)).unwrap();
    assert_eq!(read_f64(&t), vec![7.0, -1.0, 7.0, 7.0, 7.0, 3.0, 7.0, 7.0]);
}

#[test]
fn conjugate_views() {
    let rt = Runtime::new(1).unwrap();
    let data = [C::new(1.0, 2.0), C::new(-3.0, 0.5)];
    let z = Tensor::from_slice(&[2], Order::RowMajor, &data).unwrap();
    let zc = z.conj().unwrap();
    assert!(zc.is_conj() && zc.is_read_only());
    let read = |t: &Tensor| {
        let mut out = [C::new(0.0, 0.0); 2];
        unsafe { ops::copy_out(t, out.as_mut_ptr().cast(), 2, None, Submit::on(&rt)) }.unwrap().wait(LONG).unwrap();
        out
    };
    assert_eq!(read(&zc), [data[0].conj(), data[1].conj()]);
    // The conj of a conj reads the original values (and is still read-only).
    let zcc = zc.conj().unwrap();
    assert!(!zcc.is_conj() && zcc.is_read_only());
    assert_eq!(read(&zcc), data);
    // A conj view as an output is rejected with its own status.
    let e = ops::fill(&zc, Scalar::real(0.0), Submit::on(&rt)).unwrap_err();
    assert_eq!(e.status(), Status::ReadOnly);
    // Operations honour the flag: y = 1*conj(z) + y.
    let y = Tensor::zeros(DType::C128, &[2], Order::RowMajor, Domain::Host).unwrap();
    ops::axpy(&y, Scalar::complex(0.0, 1.0), &zc, Submit::on(&rt)).unwrap();
    assert_eq!(read(&y), [C::new(0.0, 1.0) * data[0].conj(), C::new(0.0, 1.0) * data[1].conj()]);
    // A user kernel sees the flag.
    let flag = Arc::new(AtomicUsize::new(9));
    let f2 = flag.clone();
    ops::kernel(
        "sees_conj",
        &[(&zc, Mode::Read)],
        kernel(move |c| f2.store(c.views()[0].conj as usize, Ordering::SeqCst)),
        Submit::on(&rt),
    )
    .unwrap()
    .wait(LONG)
    .unwrap();
    assert_eq!(flag.load(Ordering::SeqCst), 1);
    // The conj of a real tensor is the identity, and read-only.
    let r = iota(&[3]);
    let rc = r.conj().unwrap();
    assert!(!rc.is_conj() && rc.is_read_only());
    assert_eq!(read_f64(&rc), vec![0.0, 1.0, 2.0]);
    assert_eq!(ops::scale(&rc, Scalar::real(2.0), Submit::on(&rt)).unwrap_err().status(), Status::ReadOnly);
}

#[test]
fn slice_edge_cases() {
    let t = iota(&[5]);
    // Empty.
    let e = t.slice(&[SliceSpec::range(2, 2)]).unwrap();
    assert_eq!(e.extents().unwrap().as_slice(), &[0]);
    assert_eq!(read_f64(&e), Vec::<f64>::new());
    // Negative step: 4, 2, 0.
    let back = t.slice(&[SliceSpec { start: 4, stop: -1, step: -2, drop: false }]).unwrap();
    assert_eq!(read_f64(&back), vec![4.0, 2.0, 0.0]);
    // Reversed, then a step of the reversed view.
    let rev = t.slice(&[SliceSpec { start: 4, stop: -1, step: -1, drop: false }]).unwrap();
    assert_eq!(read_f64(&rev), vec![4.0, 3.0, 2.0, 1.0, 0.0]);
    let rev2 = rev.slice(&[SliceSpec { start: 1, stop: 5, step: 2, drop: false }]).unwrap();
    assert_eq!(read_f64(&rev2), vec![3.0, 1.0]);
    // Out of range gives its status.
    for bad in [
        SliceSpec::range(0, 6),
        SliceSpec { start: 5, stop: 3, step: -1, drop: false },
        SliceSpec { start: 2, stop: -2, step: -1, drop: false },
    ] {
        assert_eq!(t.slice(&[bad]).unwrap_err().status(), Status::OutOfRange, "{bad:?}");
    }
    assert_eq!(
        t.slice(&[SliceSpec { start: 0, stop: 5, step: 0, drop: false }]).unwrap_err().status(),
        Status::InvalidArgument
    );
    // Dropping needs exactly one index; keeping a size-1 axis keeps it.
    assert_eq!(
        t.slice(&[SliceSpec { start: 0, stop: 2, step: 1, drop: true }]).unwrap_err().status(),
        Status::InvalidArgument
    );
    let m = iota(&[3, 4]);
    let kept = m.slice(&[SliceSpec::range(1, 2), SliceSpec::all(4)]).unwrap();
    assert_eq!(kept.extents().unwrap().as_slice(), &[1, 4]);
    let dropped = m.slice(&[SliceSpec::index(1), SliceSpec::all(4)]).unwrap();
    assert_eq!(dropped.extents().unwrap().as_slice(), &[4]);
    assert_eq!(read_f64(&dropped), vec![4.0, 5.0, 6.0, 7.0]);
    // Wrong number of specs.
    assert_eq!(m.slice(&[SliceSpec::all(3)]).unwrap_err().status(), Status::InvalidArgument);
    // A view of an unconstructed tensor cannot be made.
    let u = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
    assert_eq!(u.slice(&[]).unwrap_err().status(), Status::Unconstructed);
}

#[test]
fn permute_and_reshape() {
    let t = iota(&[2, 3, 4]);
    let p = t.permute(&[2, 0, 1]).unwrap();
    assert_eq!(p.extents().unwrap().as_slice(), &[4, 2, 3]);
    let got = read_f64(&p);
    for a in 0..4 {
        for b in 0..2 {
            for c in 0..3 {
                assert_eq!(got[a * 6 + b * 3 + c], (b * 12 + c * 4 + a) as f64);
            }
        }
    }
    assert_eq!(t.permute(&[0, 1]).unwrap_err().status(), Status::InvalidArgument, "wrong rank");
    assert_eq!(t.permute(&[0, 1, 1]).unwrap_err().status(), Status::InvalidArgument, "not a permutation");
    let m = t.reshape(&[6, 4], Order::RowMajor).unwrap();
    assert_eq!(read_f64(&m), (0..24).map(|x| x as f64).collect::<Vec<_>>());
    assert_eq!(t.reshape(&[5, 5], Order::RowMajor).unwrap_err().status(), Status::ShapeMismatch);
    // A permuted view is not dense in row-major order.
    assert_eq!(p.reshape(&[24], Order::RowMajor).unwrap_err().status(), Status::NotContiguous);
    // Transposing a column-major matrix gives a row-major-dense view.
    let tt = t.reshape(&[6, 4], Order::RowMajor).unwrap().transpose().unwrap();
    assert_eq!(tt.reshape(&[24], Order::ColMajor).unwrap().extents().unwrap().as_slice(), &[24]);
    let tr = iota(&[2, 3]).transpose().unwrap();
    assert_eq!(read_f64(&tr), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
}

#[test]
fn aliasing_is_rejected_unless_provably_disjoint() {
    let rt = Runtime::new(2).unwrap();
    let t = iota(&[4, 4]);
    let top = t.slice(&[SliceSpec::range(0, 2), SliceSpec::all(4)]).unwrap();
    let bottom = t.slice(&[SliceSpec::range(2, 4), SliceSpec::all(4)]).unwrap();
    let left = t.slice(&[SliceSpec::all(4), SliceSpec::range(0, 2)]).unwrap();
    let right = t.slice(&[SliceSpec::all(4), SliceSpec::range(2, 4)]).unwrap();
    // Disjoint parts of one value may be input and output of one operation.
    ops::copy(&top, &bottom, Submit::on(&rt)).unwrap();
    ops::axpy(&right, Scalar::real(1.0), &left, Submit::on(&rt)).unwrap();
    // Overlapping parts may not.
    let middle_rows = t.slice(&[SliceSpec::range(1, 3), SliceSpec::all(4)]).unwrap();
    assert_eq!(ops::copy(&top, &middle_rows, Submit::on(&rt)).unwrap_err().status(), Status::Alias);
    assert_eq!(
        ops::axpy(
            &top,
            Scalar::real(1.0),
            &t.slice(&[SliceSpec::range(1, 3), SliceSpec::all(4)]).unwrap(),
            Submit::on(&rt)
        )
        .unwrap_err()
        .status(),
        Status::Alias
    );
    // Check the values against a plain model.
    let mut m: Vec<f64> = (0..16).map(|x| x as f64).collect();
    for r in 0..2 {
        for c in 0..4 {
            m[r * 4 + c] = m[(r + 2) * 4 + c];
        }
    }
    for r in 0..4 {
        for c in 0..2 {
            m[r * 4 + c + 2] += m[r * 4 + c];
        }
    }
    assert_eq!(read_f64(&t), m);
}

#[test]
fn writers_of_disjoint_halves_overlap_and_overlapping_writers_never_do() {
    let rt = Runtime::new(2).unwrap();
    let t = iota(&[8, 8]);
    let left = t.slice(&[SliceSpec::all(8), SliceSpec::range(0, 4)]).unwrap();
    let right = t.slice(&[SliceSpec::all(8), SliceSpec::range(4, 8)]).unwrap();
    let middle = t.slice(&[SliceSpec::all(8), SliceSpec::range(2, 6)]).unwrap();
    let inside = Arc::new(AtomicIsize::new(0));
    let max_inside = Arc::new(AtomicIsize::new(0));
    let met = Arc::new(AtomicIsize::new(0));
    let writer = |inside: Arc<AtomicIsize>, max_inside: Arc<AtomicIsize>| {
        let met = met.clone();
        kernel(move |_| {
            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
            max_inside.fetch_max(now, Ordering::SeqCst);
            // Stay inside until both writers have been inside together, or 2 s.
            let t0 = Instant::now();
            while met.load(Ordering::SeqCst) == 0 && t0.elapsed() < Duration::from_secs(2) {
                if inside.load(Ordering::SeqCst) >= 2 {
                    met.store(1, Ordering::SeqCst);
                }
                std::hint::spin_loop();
            }
            inside.fetch_sub(1, Ordering::SeqCst);
        })
    };
    ops::kernel("left", &[(&left, Mode::Update)], writer(inside.clone(), max_inside.clone()), Submit::on(&rt)).unwrap();
    ops::kernel("right", &[(&right, Mode::Update)], writer(inside.clone(), max_inside.clone()), Submit::on(&rt))
        .unwrap();
    t.wait(LONG).unwrap();
    assert_eq!(max_inside.load(Ordering::SeqCst), 2, "writers of disjoint halves did not run at the same time");
    // Overlapping writers: never together (each waits out its 2 s alone if it must).
    max_inside.store(0, Ordering::SeqCst);
    let short = |inside: Arc<AtomicIsize>, max_inside: Arc<AtomicIsize>| {
        kernel(move |_| {
            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
            max_inside.fetch_max(now, Ordering::SeqCst);
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_millis(20) {
                std::hint::spin_loop();
            }
            inside.fetch_sub(1, Ordering::SeqCst);
        })
    };
    for v in [&left, &middle, &right, &middle] {
        ops::kernel("overlapping", &[(v, Mode::Update)], short(inside.clone(), max_inside.clone()), Submit::on(&rt))
            .unwrap();
    }
    t.wait(LONG).unwrap();
    assert_eq!(max_inside.load(Ordering::SeqCst), 1, "overlapping writers ran at the same time");
}

#[test]
fn deep_copies_and_structural_copies() {
    let rt = Runtime::new(2).unwrap();
    let gate = Gate::default();
    let t = iota(&[3]);
    ops::kernel("held", &[(&t, Mode::Update)], blocker(&gate), Submit::on(&rt)).unwrap();
    ops::scale(&t, Scalar::real(2.0), Submit::on(&rt)).unwrap();
    let (copy, ev) = t.deep_copy(Submit::on(&rt)).unwrap();
    assert!(!copy.same_value(&t), "a deep copy is a new value on a fresh queue");
    ops::fill(&t, Scalar::real(-5.0), Submit::on(&rt)).unwrap();
    gate.open();
    ev.wait(LONG).unwrap();
    assert_eq!(read_f64(&copy), vec![0.0, 2.0, 4.0], "the copy saw the writes enrolled before it, not after");
    assert_eq!(read_f64(&t), vec![-5.0; 3]);
    let v = t.slice(&[SliceSpec::range(1, 3)]).unwrap();
    let (w, ev) = v.deep_copy(Submit::on(&rt)).unwrap();
    assert!(!w.is_view() && !w.same_value(&t), "a deep copy of a view is a new value");
    ev.wait(LONG).unwrap();
    assert_eq!(read_f64(&w), vec![-5.0; 2], "it holds the view's elements");
    let s = v.clone();
    assert!(s.is_view() && s.same_value(&t), "a structural copy of a view handle is the same view");
}

#[test]
fn poison_is_tracked_per_region() {
    let rt = Runtime::new(1).unwrap();
    let t = iota(&[4]);
    let left = t.slice(&[SliceSpec::range(0, 2)]).unwrap();
    let right = t.slice(&[SliceSpec::range(2, 4)]).unwrap();
    let k = KernelFn::new(|_| Err(KernelFailure { code: 3, message: Some("left broke".into()) }));
    ops::kernel("left_writer", &[(&left, Mode::Update)], k, Submit::on(&rt)).unwrap();
    // The whole value, and any region overlapping the failed write, report the error.
    assert_eq!(t.wait(LONG).unwrap_err().message(), "left broke");
    assert_eq!(left.wait(LONG).unwrap_err().origin(), "left_writer");
    // A disjoint region is clean: it reads and updates as usual (it ran
    // concurrently with the failure, and sequential execution agrees).
    right.wait(LONG).unwrap();
    ops::scale(&right, Scalar::real(10.0), Submit::on(&rt)).unwrap();
    assert_eq!(read_f64(&right), vec![20.0, 30.0]);
    // An update of a region overlapping the failure fails with the same error,
    // and poisons what it writes: now the right half overlaps a poisoned region.
    let middle = t.slice(&[SliceSpec::range(1, 3)]).unwrap();
    let e = ops::scale(&middle, Scalar::real(2.0), Submit::on(&rt)).unwrap().wait(LONG).unwrap_err();
    assert_eq!(e.origin(), "left_writer");
    assert_eq!(right.wait(LONG).unwrap_err().origin(), "left_writer");
    // An overwrite of a region covering both failures cleans the value.
    ops::fill(&t.slice(&[SliceSpec::range(0, 3)]).unwrap(), Scalar::real(1.0), Submit::on(&rt)).unwrap();
    assert_eq!(read_f64(&t), vec![1.0, 1.0, 1.0, 30.0]);
    // Overwriting only part of a poisoned region does not clean it.
    ops::kernel(
        "left_writer",
        &[(&left, Mode::Update)],
        KernelFn::new(|_| Err(KernelFailure { code: 3, message: None })),
        Submit::on(&rt),
    )
    .unwrap();
    ops::fill(&t.slice(&[SliceSpec::range(0, 1)]).unwrap(), Scalar::real(5.0), Submit::on(&rt)).unwrap();
    assert_eq!(left.wait(LONG).unwrap_err().origin(), "left_writer");
    // A whole-value overwrite cleans everything.
    ops::fill(&t, Scalar::real(0.0), Submit::on(&rt)).unwrap();
    assert_eq!(read_f64(&left), vec![0.0, 0.0]);
}
