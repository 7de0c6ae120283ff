use std::time::Instant;
use tensorasync::*;
fn heavy() -> KernelFn {
    KernelFn::new(|c| {
        let v = &c.views()[0];
        let (rows, cols) = (v.extents[0] as isize, v.extents[1] as isize);
        let p = v.ptr as *mut f64;
        let t0 = Instant::now();
        for _ in 0..40 {
            for i in 0..rows {
                for j in 0..cols {
                    unsafe {
                        let e = p.offset(i * v.strides[0] + j * v.strides[1]);
                        *e = (*e * 1.000001 + 0.5).sqrt();
                    }
                }
            }
        }
        eprintln!(
            "  kernel on {:?} took {:?} on {:?}",
            std::thread::current().name(),
            t0.elapsed(),
            std::thread::current().id()
        );
        Ok(())
    })
}
fn main() {
    let rt = Runtime::new(2).unwrap();
    let big = Tensor::zeros(DType::F64, &[256, 256], Order::RowMajor, Domain::Host).unwrap();
    let left = big.slice(&[SliceSpec::all(256), SliceSpec::range(0, 128)]).unwrap();
    let right = big.slice(&[SliceSpec::all(256), SliceSpec::range(128, 256)]).unwrap();
    for _ in 0..3 {
        let t0 = Instant::now();
        ops::kernel("heavy", &[(&left, Mode::Update)], heavy(), Submit::on(&rt).detached()).unwrap();
        ops::kernel("heavy", &[(&right, Mode::Update)], heavy(), Submit::on(&rt).detached()).unwrap();
        big.wait(None).unwrap();
        println!("disjoint pair: {:?}", t0.elapsed());
    }
}
