//! View benchmarks (issue: views and aliases): view creation, a task on a
//! view against the same task on a whole tensor, and two compute-heavy
//! kernels on disjoint halves of one tensor against the same kernels on
//! overlapping ranges (which the sub-range hazards must serialise).
//!
//! Run: `cargo bench --bench views`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tensorasync::*;

const BATCH: usize = 10_000;

fn inc() -> KernelFn {
    KernelFn::inline(|c| {
        unsafe { *(c.views()[0].ptr as *mut f64) += 1.0 };
        Ok(())
    })
}

/// About 2 ms of arithmetic over the view's elements, touching each one.
fn heavy() -> KernelFn {
    KernelFn::inline(|c| {
        let v = &c.views()[0];
        let (rows, cols) = (v.extents[0] as isize, v.extents[1] as isize);
        let p = v.ptr as *mut f64;
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
        Ok(())
    })
}

fn views(c: &mut Criterion) {
    let rt = Runtime::new(2).unwrap();
    let t = Tensor::zeros(DType::F64, &[64, 64], Order::RowMajor, Domain::Host).unwrap();

    let mut g = c.benchmark_group("views");
    g.sample_size(30).measurement_time(Duration::from_secs(2));
    g.bench_function("create_slice_view", |b| {
        b.iter(|| {
            std::hint::black_box(
                t.slice(&[SliceSpec::range(8, 40), SliceSpec { start: 60, stop: 3, step: -2, drop: false }]).unwrap(),
            )
        })
    });
    g.bench_function("create_transpose_view", |b| b.iter(|| std::hint::black_box(t.transpose().unwrap())));
    let s = t.slice(&[SliceSpec::range(0, 32), SliceSpec::all(64)]).unwrap();
    g.bench_function("create_view_of_view", |b| b.iter(|| std::hint::black_box(s.permute(&[1, 0]).unwrap())));
    g.finish();

    // A chain of tasks on one element: through a view, and on a whole tensor.
    let mut g = c.benchmark_group("task_on_view_vs_whole");
    g.throughput(Throughput::Elements(BATCH as u64)).sample_size(20).measurement_time(Duration::from_secs(3));
    let one = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Domain::Host).unwrap();
    g.bench_function("whole", |b| {
        b.iter(|| {
            for _ in 0..BATCH {
                ops::kernel("inc", &[(&one, Mode::Update)], inc(), Submit::on(&rt).detached()).unwrap();
            }
            one.wait(None).unwrap();
        })
    });
    let elem = t.slice(&[SliceSpec::range(5, 6), SliceSpec::range(7, 8)]).unwrap();
    g.bench_function("view", |b| {
        b.iter(|| {
            for _ in 0..BATCH {
                ops::kernel("inc", &[(&elem, Mode::Update)], inc(), Submit::on(&rt).detached()).unwrap();
            }
            elem.wait(None).unwrap();
        })
    });
    g.finish();

    // Two heavy writers: disjoint column halves (concurrent) vs overlapping
    // ranges (serialised).
    let big = Tensor::zeros(DType::F64, &[256, 256], Order::RowMajor, Domain::Host).unwrap();
    let left = big.slice(&[SliceSpec::all(256), SliceSpec::range(0, 128)]).unwrap();
    let right = big.slice(&[SliceSpec::all(256), SliceSpec::range(128, 256)]).unwrap();
    let a = big.slice(&[SliceSpec::all(256), SliceSpec::range(0, 128)]).unwrap();
    let b2 = big.slice(&[SliceSpec::all(256), SliceSpec::range(64, 192)]).unwrap();
    let mut g = c.benchmark_group("two_heavy_writers");
    g.sample_size(10).measurement_time(Duration::from_secs(4));
    for (name, x, y) in [("disjoint_halves", &left, &right), ("overlapping", &a, &b2)] {
        g.bench_function(name, |bch| {
            bch.iter(|| {
                ops::kernel("heavy", &[(x, Mode::Update)], heavy(), Submit::on(&rt).detached()).unwrap();
                ops::kernel("heavy", &[(y, Mode::Update)], heavy(), Submit::on(&rt).detached()).unwrap();
                big.wait(None).unwrap();
            })
        });
    }
    g.finish();
}

criterion_group!(benches, views);
criterion_main!(benches);
