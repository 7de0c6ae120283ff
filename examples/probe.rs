use std::time::Instant;
use tensorasync::*;
fn med(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[0], v[v.len() / 2])
}
fn k() -> KernelFn {
    KernelFn::inline(|c| {
        unsafe { *(c.views()[0].ptr as *mut f64) += 1.0 };
        Ok(())
    })
}
fn main() {
    let n = 100_000;
    let rt = Runtime::new(2).unwrap();
    let t = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Domain::Host).unwrap();
    let mut v = vec![];
    for _ in 0..7 {
        let t0 = Instant::now();
        for _ in 0..n {
            ops::kernel("k", &[(&t, Mode::Update)], k(), Submit::on(&rt).detached()).unwrap();
        }
        t.wait(None).unwrap();
        v.push(t0.elapsed().as_nanos() as f64 / n as f64);
    }
    println!("chain       min {:.0} med {:.0} ns/task", med(v.clone()).0, med(v).1);
    let ts: Vec<Tensor> =
        (0..n).map(|_| Tensor::zeros(DType::F64, &[1], Order::RowMajor, Domain::Host).unwrap()).collect();
    let mut v = vec![];
    for _ in 0..7 {
        let t0 = Instant::now();
        for x in &ts {
            ops::kernel("k", &[(x, Mode::Update)], k(), Submit::on(&rt).detached()).unwrap();
        }
        while rt.outstanding() != 0 {
            std::hint::spin_loop();
        }
        v.push(t0.elapsed().as_nanos() as f64 / n as f64);
    }
    println!("independent min {:.0} med {:.0} ns/task", med(v.clone()).0, med(v).1);
    let mut v = vec![];
    for _ in 0..7 {
        let t0 = Instant::now();
        for _ in 0..n / 10 {
            ops::kernel("w", &[(&t, Mode::Update)], k(), Submit::on(&rt).detached()).unwrap();
            for _ in 0..8 {
                ops::kernel("r", &[(&t, Mode::Read)], KernelFn::inline(|_| Ok(())), Submit::on(&rt).detached())
                    .unwrap();
            }
        }
        t.wait(None).unwrap();
        v.push(t0.elapsed().as_nanos() as f64 / (n / 10 * 9) as f64);
    }
    println!("fanout      min {:.0} med {:.0} ns/task", med(v.clone()).0, med(v).1);
}
