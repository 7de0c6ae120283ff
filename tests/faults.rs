//! Faults: a Rust kernel that panics.

mod common;

use std::time::Duration;

use common::*;
use tensorasync::*;

/// A panicking kernel fails its operation with `Panic` (the panic's message
/// kept), poisons what it writes (region by region: only the slice it
/// updated), leaves what it only reads clean, and a later overwrite cleans
/// the poison; the worker that ran it keeps running operations.
#[test]
fn a_panicking_rust_kernel_poisons_its_outputs() {
    // The kernel's panic is expected: keep its report (and backtrace) out of
    // the test output, and everything else as usual.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.to_string().contains("kernel exploded") {
            default_hook(info);
        }
    }));
    let rt = Runtime::new(2).unwrap();
    let out = f64s(&[4], &[1.0, 2.0, 3.0, 4.0]);
    let input = f64s(&[4], &[5.0, 6.0, 7.0, 8.0]);
    let half = out.slice(&[SliceSpec::range(0, 2)]).unwrap();
    let k = KernelFn::new(|_| panic!("kernel exploded at step {}", 3));
    let ev = ops::kernel("exploding", &[(&half, Mode::Update), (&input, Mode::Read)], k, Submit::on(&rt)).unwrap();
    let e = ev.wait(Some(Duration::from_secs(30))).unwrap_err();
    assert_eq!(e.status(), Status::Panic);
    assert!(e.message().contains("kernel exploded at step 3"), "message: {}", e.message());

    // The output's slice is poisoned with that error; the other half and the input are clean.
    let e2 = half.wait(Some(Duration::from_secs(30))).unwrap_err();
    assert_eq!(e2.status(), Status::Panic);
    assert!(e2.same_as(&e), "the poison is the kernel's own error");
    let rest = out.slice(&[SliceSpec::range(2, 4)]).unwrap();
    assert_eq!(read_f64(&rest), vec![3.0, 4.0]);
    assert_eq!(read_f64(&input), vec![5.0, 6.0, 7.0, 8.0]);

    // A reader of the poisoned slice fails with the same error.
    let sum = Tensor::zeros(DType::F64, &[], Order::RowMajor, Domain::Host).unwrap();
    let r = ops::sum(&sum, &half, None, Submit::on(&rt)).unwrap().wait(Some(Duration::from_secs(30)));
    let e3 = r.unwrap_err();
    assert_eq!(e3.status(), Status::Panic);
    assert!(e3.message().contains("kernel exploded"), "message: {}", e3.message());

    // An overwrite cleans it, and the runtime still runs work.
    ops::fill(&half, Scalar::real(9.0), Submit::on(&rt)).unwrap();
    assert_eq!(read_f64(&out), vec![9.0, 9.0, 3.0, 4.0]);
    rt.shutdown(ShutdownMode::Drain).unwrap();
}
