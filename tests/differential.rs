//! Differential test: random programs over 8 small tensors, submitted from 4
//! threads at once (each thread in its own program order), must give results
//! bit-identical to running the same operations sequentially, in the order the
//! runtime fixed at enrollment, on a plain reference model.
//!
//! The reference order is recovered from the enrollment trace: each access's
//! position in its value's queue. Sorting per value and merging with each
//! thread's program order gives a dependency graph; any topological order of
//! it is a valid sequential execution (non-conflicting operations commute).
//! The model also tracks poison: failing kernels, and which error each later
//! reader must report.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Barrier, Mutex};

use common::LONG;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tensorasync::ops::EnrollTrace;
use tensorasync::*;

const TENSORS: usize = 8;
const THREADS: usize = 4;

#[derive(Clone, Debug)]
enum Op {
    Fill(usize, f64),
    Scale(usize, f64),
    Axpy(usize, f64, usize),
    Copy(usize, usize),
    /// User kernel: d = 0.5 * d + s * s (element-wise, via raw strides).
    Mix(usize, usize),
    /// User kernel that fails; its error is identified by its name.
    Fail(usize, String),
    CopyIn(usize, [f64; 4]),
    /// Copy out to host memory, checked against the model at that point.
    Read(usize),
}

/// A tensor's state in the model: four values in logical row-major order, or
/// the name of the operation whose error poisons it.
type State = Result<[f64; 4], String>;

fn random_program(rng: &mut SmallRng, tag: usize) -> Vec<Vec<Op>> {
    let scalars = [0.5, 1.5, -1.0, 2.0, -0.25];
    (0..THREADS)
        .map(|th| {
            let n = rng.gen_range(4..14);
            (0..n)
                .map(|i| {
                    let t = rng.gen_range(0..TENSORS);
                    let mut other = rng.gen_range(0..TENSORS - 1);
                    if other >= t {
                        other += 1;
                    }
                    let s = scalars[rng.gen_range(0..scalars.len())];
                    match rng.gen_range(0..16) {
                        0 => Op::Fill(t, rng.gen_range(-4..5) as f64),
                        1..=2 => Op::Scale(t, s),
                        3..=5 => Op::Axpy(t, s, other),
                        6..=7 => Op::Copy(t, other),
                        8..=10 => Op::Mix(t, other),
                        11 => Op::Fail(t, format!("fail-{tag}-{th}-{i}")),
                        12 => Op::CopyIn(t, [rng.gen_range(-3..4) as f64, 1.0, s, -s]),
                        _ => Op::Read(t),
                    }
                })
                .collect()
        })
        .collect()
}

/// The operands of an op (for ordering) in operand order.
fn operands(op: &Op) -> Vec<usize> {
    match op {
        Op::Fill(t, _) | Op::Scale(t, _) | Op::Fail(t, _) | Op::CopyIn(t, _) | Op::Read(t) => vec![*t],
        Op::Axpy(y, _, x) => vec![*y, *x],
        Op::Copy(d, s) | Op::Mix(d, s) => vec![*d, *s],
    }
}

/// Element (i, j) of a 2x2 view.
unsafe fn at(v: &ResolvedView<'_>, i: usize, j: usize) -> *mut f64 {
    unsafe { (v.ptr as *mut f64).offset(i as isize * v.strides[0] + j as isize * v.strides[1]) }
}

fn mix_kernel() -> KernelFn {
    KernelFn::Raw {
        f: |_, c| {
            let (d, s) = (&c.views()[0], &c.views()[1]);
            for i in 0..2 {
                for j in 0..2 {
                    unsafe {
                        let sv = *at(s, i, j);
                        *at(d, i, j) = 0.5 * *at(d, i, j) + sv * sv;
                    }
                }
            }
            Ok(())
        },
        data: [0, 0],
    }
}

/// What a submitted Read saw (filled in when its copy completes).
struct ReadSlot {
    buf: Box<[f64; 4]>,
    event: Option<Event>,
    submit_error: Option<Error>,
}

/// Run one program concurrently; returns per-op traces, read results and the final states.
fn run_concurrently(rt: &Runtime, prog: &[Vec<Op>]) -> (HashMap<(usize, usize), EnrollTrace>, HashMap<(usize, usize), State>, Vec<State>, Vec<usize>) {
    let tensors: Vec<Tensor> = (0..TENSORS)
        .map(|k| {
            let data: Vec<f64> = (0..4).map(|e| (k * 4 + e) as f64).collect();
            // Half the tensors are column-major: same logical values, other strides.
            let order = if k % 2 == 0 { Order::RowMajor } else { Order::ColMajor };
            let src = Layout::contiguous(&[2, 2], Order::RowMajor);
            unsafe { Tensor::from_host(DType::F64, &src, data.as_ptr().cast(), order) }.unwrap()
        })
        .collect();
    let ids: Vec<usize> = tensors.iter().map(value_id).collect();
    let traces: Mutex<HashMap<(usize, usize), EnrollTrace>> = Default::default();
    let reads: Mutex<HashMap<(usize, usize), ReadSlot>> = Default::default();
    let copy_in_bufs: Mutex<Vec<Box<[f64; 4]>>> = Default::default();
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for (th, ops) in prog.iter().enumerate() {
            let (tensors, traces, reads, copy_in_bufs, barrier) = (&tensors, &traces, &reads, &copy_in_bufs, &barrier);
            s.spawn(move || {
                barrier.wait();
                for (i, op) in ops.iter().enumerate() {
                    let mut trace = EnrollTrace::new();
                    let opts = Submit { runtime: Some(rt), trace: Some(&mut trace), ..Default::default() };
                    let r = match op {
                        Op::Fill(t, v) => ops::fill(&tensors[*t], Scalar::real(*v), opts),
                        Op::Scale(t, a) => ops::scale(&tensors[*t], Scalar::real(*a), opts),
                        Op::Axpy(y, a, x) => ops::axpy(&tensors[*y], Scalar::real(*a), &tensors[*x], opts),
                        Op::Copy(d, src) => ops::copy(&tensors[*d], &tensors[*src], opts),
                        Op::Mix(d, src) => {
                            ops::kernel("mix", &[(&tensors[*d], Mode::Update), (&tensors[*src], Mode::Read)], mix_kernel(), opts)
                        }
                        Op::Fail(t, name) => {
                            let k = KernelFn::new(|_| Err(KernelFailure { code: 1, message: Some("planned".into()) }));
                            ops::kernel(name.clone(), &[(&tensors[*t], Mode::Update)], k, opts)
                        }
                        Op::CopyIn(t, vals) => {
                            let b = Box::new(*vals);
                            let p = b.as_ptr();
                            copy_in_bufs.lock().unwrap().push(b);
                            unsafe { ops::copy_in(&tensors[*t], p.cast(), Layout::contiguous(&[2, 2], Order::RowMajor), opts) }
                        }
                        Op::Read(t) => {
                            let mut buf = Box::new([f64::NAN; 4]);
                            let p = buf.as_mut_ptr();
                            let opts = Submit { event: true, ..opts };
                            let r = unsafe { ops::copy_out(&tensors[*t], p.cast(), 4, None, opts) };
                            let (event, submit_error) = match r {
                                Ok(e) => (e, None),
                                Err(e) => (None, Some(e)),
                            };
                            reads.lock().unwrap().insert((th, i), ReadSlot { buf, event, submit_error });
                            Ok(None)
                        }
                    };
                    r.expect("every generated operation is valid at submission");
                    traces.lock().unwrap().insert((th, i), trace);
                }
            });
        }
    });
    let mut read_results = HashMap::new();
    for (k, slot) in reads.into_inner().unwrap() {
        assert!(slot.submit_error.is_none());
        let r = slot.event.unwrap().wait(LONG);
        read_results.insert(k, r.map(|()| *slot.buf).map_err(|e| e.origin().to_string()));
    }
    let finals = tensors
        .iter()
        .map(|t| match t.wait(LONG) {
            Ok(()) => {
                let v = common::read_f64(t);
                Ok([v[0], v[1], v[2], v[3]])
            }
            Err(e) => Err(e.origin().to_string()),
        })
        .collect();
    drop(copy_in_bufs);
    (traces.into_inner().unwrap(), read_results, finals, ids)
}

fn value_id(t: &Tensor) -> usize {
    t.value_id()
}

/// A sequential order consistent with every value's queue order and every
/// thread's program order.
fn serial_order(prog: &[Vec<Op>], traces: &HashMap<(usize, usize), EnrollTrace>) -> Vec<(usize, usize)> {
    let mut per_value: BTreeMap<usize, Vec<(u64, (usize, usize))>> = BTreeMap::new();
    for (k, tr) in traces {
        for &(v, pos) in tr {
            per_value.entry(v).or_default().push((pos, *k));
        }
    }
    let mut succ: HashMap<(usize, usize), Vec<(usize, usize)>> = HashMap::new();
    let mut indeg: HashMap<(usize, usize), usize> = traces.keys().map(|k| (*k, 0)).collect();
    let mut edge = |a: (usize, usize), b: (usize, usize)| {
        succ.entry(a).or_default().push(b);
        *indeg.get_mut(&b).unwrap() += 1;
    };
    for list in per_value.values_mut() {
        list.sort();
        for w in list.windows(2) {
            assert!(w[0].0 < w[1].0, "two accesses share a queue position");
            edge(w[0].1, w[1].1);
        }
    }
    for (th, ops) in prog.iter().enumerate() {
        for i in 1..ops.len() {
            edge((th, i - 1), (th, i));
        }
    }
    let mut ready: Vec<(usize, usize)> = indeg.iter().filter(|(_, d)| **d == 0).map(|(k, _)| *k).collect();
    let mut order = vec![];
    while let Some(k) = ready.pop() {
        order.push(k);
        for s in succ.get(&k).cloned().unwrap_or_default() {
            let d = indeg.get_mut(&s).unwrap();
            *d -= 1;
            if *d == 0 {
                ready.push(s);
            }
        }
    }
    assert_eq!(order.len(), traces.len(), "the enrollment order has a cycle: not serializable");
    order
}

/// Apply one op to the model, in the same floating-point operation order as
/// the kernels. Returns what a Read observes.
fn apply(state: &mut [State], op: &Op) -> Option<State> {
    let get = |s: &[State], t: usize| s[t].clone();
    match op {
        Op::Fill(t, v) => state[*t] = Ok([*v; 4]),
        Op::CopyIn(t, vals) => state[*t] = Ok(*vals),
        Op::Scale(t, a) => {
            state[*t] = get(state, *t).map(|x| x.map(|e| a * e));
        }
        Op::Axpy(y, a, x) => {
            state[*y] = match (get(state, *y), get(state, *x)) {
                (Err(e), _) | (Ok(_), Err(e)) => Err(e),
                (Ok(yv), Ok(xv)) => Ok(std::array::from_fn(|k| a * xv[k] + yv[k])),
            };
        }
        Op::Copy(d, s) => state[*d] = get(state, *s),
        Op::Mix(d, s) => {
            state[*d] = match (get(state, *d), get(state, *s)) {
                (Err(e), _) | (Ok(_), Err(e)) => Err(e),
                (Ok(dv), Ok(sv)) => Ok(std::array::from_fn(|k| 0.5 * dv[k] + sv[k] * sv[k])),
            };
        }
        Op::Fail(t, name) => {
            state[*t] = match get(state, *t) {
                Err(e) => Err(e),
                Ok(_) => Err(name.clone()),
            };
        }
        Op::Read(t) => return Some(get(state, *t)),
    }
    None
}

fn same(a: &State, b: &State) -> bool {
    match (a, b) {
        (Ok(x), Ok(y)) => x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits()),
        (Err(x), Err(y)) => x == y,
        _ => false,
    }
}

#[test]
fn random_concurrent_programs_match_sequential_execution() {
    let programs: usize = std::env::var("TA_DIFF_PROGRAMS").ok().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let seed: u64 = std::env::var("TA_DIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x7a5c);
    let rt = Runtime::new(2).unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut ops_checked = 0usize;
    let mut poisoned_seen = 0usize;
    for p in 0..programs {
        let prog = random_program(&mut rng, p);
        let (traces, reads, finals, ids) = run_concurrently(&rt, &prog);
        // Map trace value ids back to tensor indices for readable failures.
        let index: HashMap<usize, usize> = ids.iter().enumerate().map(|(k, v)| (*v, k)).collect();
        for tr in traces.values() {
            for (v, _) in tr {
                assert!(index.contains_key(v));
            }
        }
        let order = serial_order(&prog, &traces);
        let mut model: Vec<State> =
            (0..TENSORS).map(|k| Ok(std::array::from_fn(|e| (k * 4 + e) as f64))).collect();
        for (th, i) in &order {
            let op = &prog[*th][*i];
            if let Some(seen) = apply(&mut model, op) {
                let got = &reads[&(*th, *i)];
                assert!(same(got, &seen), "program {p} (seed {seed}): read {th}:{i} {op:?} saw {got:?}, sequential gives {seen:?}");
            }
            ops_checked += 1;
        }
        for k in 0..TENSORS {
            assert!(
                same(&finals[k], &model[k]),
                "program {p} (seed {seed}): tensor {k} is {:?}, sequential gives {:?}\nprogram: {prog:?}",
                finals[k],
                model[k]
            );
            poisoned_seen += model[k].is_err() as usize;
        }
    }
    // The programs exercised both values and poison.
    assert!(ops_checked > programs * 20);
    assert!(poisoned_seen > programs / 10, "too few poisoned outcomes to test propagation ({poisoned_seen})");
}
