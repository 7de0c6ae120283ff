//! Core (Rust-level) benchmarks: per-task cost of the epoch queues and the
//! runtime, without the C ABI. The C harness in examples-c/bench measures the
//! same patterns through the ABI side by side with StarPU and OpenMP.
//!
//! Run: `cargo bench --bench core`.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tensorasync::*;

#[path = "common/blocked_writer.rs"]
mod blocked_writer;
use blocked_writer::BlockedWriter;

const BATCH: usize = 10_000;

fn inc() -> KernelFn {
    KernelFn::inline(|c| {
        unsafe { *(c.views()[0].ptr as *mut f64) += 1.0 };
        Ok(())
    })
}

fn noop() -> KernelFn {
    KernelFn::inline(|_| Ok(()))
}

fn scalar_tensor() -> Tensor {
    Tensor::zeros(DType::F64, &[1], Order::RowMajor, Domain::Host).unwrap()
}

fn tasks(c: &mut Criterion) {
    let rt = Runtime::new(2).unwrap();
    let mut g = c.benchmark_group("tasks");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.sample_size(20).measurement_time(Duration::from_secs(3));

    let t = scalar_tensor();
    g.bench_function("a_chain_of_dependent_updates", |b| {
        b.iter(|| {
            for _ in 0..BATCH {
                ops::kernel("inc", &[(&t, Mode::Update)], inc(), Submit::on(&rt).detached()).unwrap();
            }
            t.wait(None).unwrap();
        })
    });

    let many: Vec<Tensor> = (0..BATCH).map(|_| scalar_tensor()).collect();
    g.bench_function("b_independent", |b| {
        b.iter(|| {
            for x in &many {
                ops::kernel("inc", &[(x, Mode::Update)], inc(), Submit::on(&rt).detached()).unwrap();
            }
            while rt.outstanding() != 0 {
                std::hint::spin_loop();
            }
        })
    });

    g.throughput(Throughput::Elements((BATCH / 9 * 9) as u64));
    g.bench_function("c_one_writer_eight_readers", |b| {
        b.iter(|| {
            for _ in 0..BATCH / 9 {
                ops::kernel("w", &[(&t, Mode::Update)], inc(), Submit::on(&rt).detached()).unwrap();
                for _ in 0..8 {
                    ops::kernel("r", &[(&t, Mode::Read)], noop(), Submit::on(&rt).detached()).unwrap();
                }
            }
            t.wait(None).unwrap();
        })
    });

    // Bulk-synchronous steps: 100 independent tasks, then a wait for all of
    // them. Idle workers that slowed down their polling during a long stream
    // must not make each step wait (see `runtime::poke`).
    g.throughput(Throughput::Elements(100));
    let mut step = many.chunks(100).cycle();
    g.bench_function("burst_of_100_then_wait_idle", |b| {
        b.iter(|| {
            for x in step.next().unwrap() {
                ops::kernel("inc", &[(x, Mode::Update)], inc(), Submit::on(&rt).detached()).unwrap();
            }
            rt.wait_idle(None).unwrap();
        })
    });

    // A step whose one task outlasts the waiter's spin (30 us of work): the
    // wait must end when the task does, not at the waiter's next periodic
    // check (see `RuntimeInner::wake_idle_waiters`; 200-240 us per step
    // before waiters were woken, about 50 us since).
    g.throughput(Throughput::Elements(1));
    g.bench_function("one_30us_task_then_wait_idle", |b| {
        let x = &many[0];
        b.iter(|| {
            let busy = KernelFn::new(|_| {
                let t0 = Instant::now();
                while t0.elapsed() < Duration::from_micros(30) {
                    std::hint::spin_loop();
                }
                Ok(())
            });
            ops::kernel("busy", &[(x, Mode::Update)], busy, Submit::on(&rt).detached()).unwrap();
            rt.wait_idle(None).unwrap();
        })
    });

    // Submission alone: everything queues behind a writer that holds the value.
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("submit_behind_a_blocked_writer", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let blocked = BlockedWriter::submit(&t, &rt);
                blocked.wait_started();
                let t0 = Instant::now();
                for _ in 0..BATCH {
                    ops::kernel("inc", &[(&t, Mode::Update)], inc(), Submit::on(&rt).detached()).unwrap();
                }
                total += t0.elapsed();
                blocked.release();
                t.wait(None).unwrap();
            }
            total
        })
    });
    g.finish();
}

fn handles(c: &mut Criterion) {
    let mut g = c.benchmark_group("handles");
    g.sample_size(30).measurement_time(Duration::from_secs(2));
    g.bench_function("d_tensor_create_and_free", |b| b.iter(|| drop(std::hint::black_box(scalar_tensor()))));
    g.finish();
}

criterion_group!(benches, tasks, handles);
criterion_main!(benches);
