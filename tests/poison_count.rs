//! The process-wide count of poisoned values, which running tasks check before
//! their operands' own flags (see `value::POISONED_VALUES`). This binary holds
//! one test so that nothing else in its process poisons values meanwhile:
//! the count must follow every value that gains its first poison, loses its
//! last, or is freed while poisoned, or tasks would skip poison (count too
//! low) or check every operand for ever (count stuck above zero).

mod common;

use common::*;
use tensorasync::internals::poisoned_values_for_tests as count;
use tensorasync::*;

fn failing(msg: &'static str) -> KernelFn {
    KernelFn::new(move |_| Err(KernelFailure { code: 7, message: Some(msg.into()) }))
}

#[test]
fn the_poison_count_follows_values_that_gain_lose_or_drop_poison() {
    let rt = Runtime::new(2).unwrap();
    assert_eq!(count(), 0);

    // Two failures on one value count it once; a second value counts too.
    let a = f64s(&[3], &[1.0, 2.0, 3.0]);
    let b = f64s(&[2], &[1.0, 2.0]);
    ops::kernel("first", &[(&a, Mode::Update)], failing("a broke"), Submit::on(&rt)).unwrap();
    ops::kernel("second", &[(&a, Mode::Update)], failing("not reported"), Submit::on(&rt)).unwrap();
    ops::kernel("third", &[(&b, Mode::Update)], failing("b broke"), Submit::on(&rt)).unwrap();
    assert_eq!(a.wait(LONG).unwrap_err().message(), "a broke");
    assert_eq!(b.wait(LONG).unwrap_err().message(), "b broke");
    assert_eq!(count(), 2);

    // A reader submitted behind a clean operation still sees the poison: the
    // count lets it through to the value's own flag.
    let c = f64s(&[3], &[0.0; 3]);
    ops::copy(&c, &a, Submit::on(&rt)).unwrap();
    let e = c.wait(LONG).unwrap_err();
    assert_eq!((e.message(), e.origin()), ("a broke", "first"));
    assert_eq!(count(), 3, "the copy's output is poisoned too");

    // A poisoned region: overwriting another part keeps the value counted,
    // overwriting the region clears it; a whole overwrite clears `a`.
    let d = f64s(&[3], &[1.0, 2.0, 3.0]);
    let left = d.slice(&[SliceSpec::range(0, 2)]).unwrap();
    let right = d.slice(&[SliceSpec::range(2, 3)]).unwrap();
    ops::kernel("left", &[(&left, Mode::Update)], failing("left broke"), Submit::on(&rt)).unwrap();
    ops::fill(&right, Scalar::real(5.0), Submit::on(&rt)).unwrap();
    assert_eq!(d.wait(LONG).unwrap_err().message(), "left broke");
    assert_eq!(count(), 4);
    ops::fill(&left, Scalar::real(4.0), Submit::on(&rt)).unwrap();
    assert_eq!(read_f64(&d), vec![4.0, 4.0, 5.0]);
    assert_eq!(count(), 3);
    ops::fill(&a, Scalar::real(6.0), Submit::on(&rt)).unwrap();
    assert_eq!(read_f64(&a), vec![6.0; 3]);
    assert_eq!(count(), 2);

    // A value freed while poisoned stops counting once its last access is done.
    drop(left);
    drop(right);
    drop(b);
    rt.wait_idle(LONG).unwrap();
    assert_eq!(count(), 1);
    drop(c);
    rt.wait_idle(LONG).unwrap();
    assert_eq!(count(), 0);

    // With no poison left, a clean chain runs and reads back as usual.
    for _ in 0..100 {
        ops::scale(&a, Scalar::real(1.0), Submit::on(&rt)).unwrap();
    }
    assert_eq!(read_f64(&a), vec![6.0; 3]);
    assert_eq!(count(), 0);
}
