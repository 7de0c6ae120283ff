//! Sub-range hazard benchmark: the cost of enrolling an access through a view
//! while K accesses to disjoint (or overlapping) slices of one tensor are
//! pending, all behind one blocked whole-tensor writer.
//!
//! Per K and per round: a writer of the whole tensor that blocks on a gate,
//! then (timed, each phase on its own) one writer per 1-element slice `[i,
//! i+1)`, a second writer per slice (it waits for the first and replaces it),
//! a reader per overlapping 2-element slice `[i, i+2)` (it waits for two
//! writers), and a second such reader; then the gate opens and everything runs.
//!
//! A control column times K writers of K separate 1-element tensors on a
//! one-worker runtime whose worker is held: the same number of pending
//! tasks, with no shared frontier, so what it grows by with K is the cost of
//! having K tasks pending (their memory and the caches), not of the index.
//!
//! Each K starts with one round that is not in the table: its first writers
//! are the first to need memory for K pending tasks, and at K = 10^5 half
//! their time was the kernel's first touch of that memory (page faults),
//! paid once, not per submission. The last column shows that round's first
//! writers. At least 5 timed rounds follow (there were 2 at K = 10^5, one of
//! them this first one).
//!
//! Run: `cargo bench --bench hazards` (K = 1, 10^2 .. 10^5), or with the K
//! values as arguments: `cargo bench --bench hazards -- 100 1000`.

use std::time::{Duration, Instant};

use tensorasync::*;

#[path = "common/blocked_writer.rs"]
mod blocked_writer;
use blocked_writer::BlockedWriter;

fn main() {
    let mut ks: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    if ks.is_empty() {
        ks = vec![1, 100, 1_000, 10_000, 100_000];
    }
    let rt = Runtime::new(2).unwrap();
    let held = Runtime::new(1).unwrap();
    let gate = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Domain::Host).unwrap();
    println!("| K | first writer per slice, µs/op | second writer per slice, µs/op | first reader of overlapping slices, µs/op | second reader, µs/op | control: writers of K separate tensors, µs/op | first writer in the untimed first round, µs/op |");
    println!("|---|---|---|---|---|---|---|");
    for &k in &ks {
        // Enough rounds that every K submits about 2*10^5 accesses per phase.
        let rounds = (200_000 / k).clamp(5, 20_000);
        let t = Tensor::zeros(DType::F64, &[k + 1], Order::RowMajor, Domain::Host).unwrap();
        let ones: Vec<Tensor> = (0..k).map(|i| t.slice(&[SliceSpec::range(i, i + 1)]).unwrap()).collect();
        let pairs: Vec<Tensor> = (0..k).map(|i| t.slice(&[SliceSpec::range(i, i + 2)]).unwrap()).collect();
        let separate: Vec<Tensor> =
            (0..k).map(|_| Tensor::zeros(DType::F64, &[1], Order::RowMajor, Domain::Host).unwrap()).collect();
        let mut phases = [Duration::ZERO; 5];
        let mut first = Duration::ZERO;
        for round in 0..=rounds {
            // Round 0 is the untimed first round (see the module doc).
            let mut lap = [Duration::ZERO; 5];
            let blocked = BlockedWriter::submit(&t, &rt);
            blocked.wait_started();
            for (phase, (views, mode)) in
                [(&ones, Mode::Write), (&ones, Mode::Write), (&pairs, Mode::Read), (&pairs, Mode::Read)]
                    .into_iter()
                    .enumerate()
            {
                let t0 = Instant::now();
                for v in views {
                    ops::kernel("nop", &[(v, mode)], KernelFn::inline(|_| Ok(())), Submit::on(&rt).detached()).unwrap();
                }
                lap[phase] = t0.elapsed();
            }
            blocked.release();
            t.wait(None).unwrap();
            rt.wait_idle(None).unwrap();
            // The control: the held runtime's one worker waits on the gate.
            let hold = BlockedWriter::submit(&gate, &held);
            hold.wait_started();
            let t0 = Instant::now();
            for v in &separate {
                ops::kernel("nop", &[(v, Mode::Write)], KernelFn::inline(|_| Ok(())), Submit::on(&held).detached())
                    .unwrap();
            }
            lap[4] = t0.elapsed();
            hold.release();
            held.wait_idle(None).unwrap();
            if round == 0 {
                first = lap[0];
            } else {
                phases.iter_mut().zip(lap).for_each(|(p, l)| *p += l);
            }
        }
        let us = |d: Duration| d.as_secs_f64() * 1e6 / (rounds * k) as f64;
        let [w1, w2, r1, r2, c] = phases.map(us);
        let cold = first.as_secs_f64() * 1e6 / k as f64;
        println!("| {k} | {w1:.2} | {w2:.2} | {r1:.2} | {r2:.2} | {c:.2} | {cold:.2} |");
    }
}
