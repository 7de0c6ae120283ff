use std::time::Instant;
use tensorasync::*;
fn inc() -> KernelFn {
    KernelFn::inline(|c| {
        unsafe { *(c.views()[0].ptr as *mut f64) += 1.0 };
        Ok(())
    })
}
fn main() {
    let rt = Runtime::new(2).unwrap();
    let one = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Domain::Host).unwrap();
    let t = Tensor::zeros(DType::F64, &[16, 16], Order::RowMajor, Domain::Host).unwrap();
    let elem = t.slice(&[SliceSpec::range(5, 6), SliceSpec::range(7, 8)]).unwrap();
    let (mut w, mut v, mut r) = (vec![], vec![], vec![]);
    for _ in 0..41 {
        let t0 = Instant::now();
        for _ in 0..10_000 {
            ops::kernel("inc", &[(&one, Mode::Update)], inc(), Submit::on(&rt).detached()).unwrap();
        }
        one.wait(None).unwrap();
        let a = t0.elapsed().as_nanos() as f64 / 1e4;
        let t0 = Instant::now();
        for _ in 0..10_000 {
            ops::kernel("inc", &[(&elem, Mode::Update)], inc(), Submit::on(&rt).detached()).unwrap();
        }
        elem.wait(None).unwrap();
        let b = t0.elapsed().as_nanos() as f64 / 1e4;
        w.push(a);
        v.push(b);
        r.push(b / a);
    }
    for x in [&mut w, &mut v, &mut r] {
        x.sort_by(|a, b| a.partial_cmp(b).unwrap());
    }
    println!("whole {:.0} view {:.0} ratio {:.3}", w[20], v[20], r[20]);
}
