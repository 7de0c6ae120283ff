//! Differential test: random programs over 8 small tensors and views of
//! them (rows, columns, elements, transposes, reversals, conjugates),
//! submitted from 4 threads at once (each thread in its own program order),
//! must give results bit-identical to running the same operations
//! sequentially, in the order the runtime fixed at enrollment, on a plain
//! reference model.
//!
//! The reference order is recovered from the enrollment trace: each access's
//! position in its value's queue. Sorting per value and merging with each
//! thread's program order gives a dependency graph; any topological order of
//! it is a valid sequential execution (non-conflicting operations commute).
//! Operations on disjoint views of one tensor run concurrently, so the test
//! also checks the sub-range hazards. The model tracks poison per element:
//! failing kernels poison what they write, an overwrite cleans exactly what
//! it writes (a partial overwrite included), and a reader reports the latest
//! error on an element it reads.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Barrier, Mutex};

use common::LONG;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tensorasync::internals::{record_enrollments, EnrollTrace};
use tensorasync::*;

/// Queue positions, each with the (thread, op) that landed there.
type Positions = Vec<(u64, (usize, usize))>;
/// A read's destination buffer, its element count and its event.
type PendingRead = (Box<[f64; 16]>, usize, Event);
/// Elements, and the poisoned element sets with their messages.
type Model = (Vec<f64>, Vec<(Vec<usize>, String)>);

const TENSORS: usize = 8;
const THREADS: usize = 4;

/// A view of a 2x2 root; element (i, j) of the root is number 2i + j.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Whole,
    Transpose,
    RowsReversed,
    Conj,
    Row(usize),
    RowReversed(usize),
    Col(usize),
    Elem(usize, usize),
}

const KINDS: [Kind; 14] = [
    Kind::Whole,
    Kind::Transpose,
    Kind::RowsReversed,
    Kind::Conj,
    Kind::Row(0),
    Kind::Row(1),
    Kind::RowReversed(0),
    Kind::RowReversed(1),
    Kind::Col(0),
    Kind::Col(1),
    Kind::Elem(0, 0),
    Kind::Elem(0, 1),
    Kind::Elem(1, 0),
    Kind::Elem(1, 1),
];

impl Kind {
    /// Root element numbers, in the view's row-major order.
    fn elems(self) -> Vec<usize> {
        match self {
            Kind::Whole | Kind::Conj => vec![0, 1, 2, 3],
            Kind::Transpose => vec![0, 2, 1, 3],
            Kind::RowsReversed => vec![2, 3, 0, 1],
            Kind::Row(r) => vec![2 * r, 2 * r + 1],
            Kind::RowReversed(r) => vec![2 * r + 1, 2 * r],
            Kind::Col(c) => vec![c, 2 + c],
            Kind::Elem(r, c) => vec![2 * r + c],
        }
    }
    fn rank(self) -> usize {
        match self {
            Kind::Whole | Kind::Conj | Kind::Transpose | Kind::RowsReversed => 2,
            Kind::Row(_) | Kind::RowReversed(_) | Kind::Col(_) => 1,
            Kind::Elem(..) => 0,
        }
    }
    fn writable(self) -> bool {
        self != Kind::Conj
    }
    fn make(self, t: &Tensor) -> Tensor {
        let all = SliceSpec::all(2);
        let rev = SliceSpec { start: 1, stop: -1, step: -1, drop: false };
        match self {
            Kind::Whole => t.clone(),
            Kind::Transpose => t.transpose().unwrap(),
            Kind::RowsReversed => t.slice(&[rev, all]).unwrap(),
            Kind::Conj => t.conj().unwrap(),
            Kind::Row(r) => t.slice(&[SliceSpec::index(r), all]).unwrap(),
            Kind::RowReversed(r) => t.slice(&[SliceSpec::index(r), rev]).unwrap(),
            Kind::Col(c) => t.slice(&[all, SliceSpec::index(c)]).unwrap(),
            Kind::Elem(r, c) => t.slice(&[SliceSpec::index(r), SliceSpec::index(c)]).unwrap(),
        }
    }
}

/// An operand: root tensor number and view kind.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct V(usize, Kind);

#[derive(Clone, Debug)]
enum Op {
    Fill(V, f64),
    Scale(V, f64),
    Axpy(V, f64, V),
    Copy(V, V),
    /// User kernel: d = 0.5 * d + s * s (element-wise, via raw strides).
    Mix(V, V),
    /// User kernel that fails; its error is identified by its name.
    Fail(V, String),
    /// Copy host memory into a whole root.
    CopyIn(usize, [f64; 4]),
    /// Copy out to host memory, checked against the model at that point.
    Read(V),
}

fn random_program(rng: &mut SmallRng, tag: usize) -> Vec<Vec<Op>> {
    let scalars = [0.5, 1.5, -1.0, 2.0, -0.25];
    let pick = |rng: &mut SmallRng, writable: bool| loop {
        let k = KINDS[rng.gen_range(0..KINDS.len())];
        // Whole roots half the time, so there is plenty of whole-value traffic too.
        let k = if rng.gen_bool(0.5) { Kind::Whole } else { k };
        if k.writable() || !writable {
            return V(rng.gen_range(0..TENSORS), k);
        }
    };
    // A second operand of the same rank: on the same root when the elements
    // are disjoint (about a third of the time), else on another root.
    let partner = |rng: &mut SmallRng, first: V| loop {
        let k = KINDS[rng.gen_range(0..KINDS.len())];
        if k.rank() != first.1.rank() {
            continue;
        }
        let disjoint = !k.elems().iter().any(|e| first.1.elems().contains(e));
        if disjoint && rng.gen_bool(0.35) {
            return V(first.0, k);
        }
        let mut other = rng.gen_range(0..TENSORS - 1);
        if other >= first.0 {
            other += 1;
        }
        return V(other, k);
    };
    (0..THREADS)
        .map(|th| {
            let n = rng.gen_range(4..14);
            (0..n)
                .map(|i| {
                    let s = scalars[rng.gen_range(0..scalars.len())];
                    match rng.gen_range(0..16) {
                        0 => Op::Fill(pick(rng, true), rng.gen_range(-4..5) as f64),
                        1..=2 => Op::Scale(pick(rng, true), s),
                        3..=5 => {
                            let y = pick(rng, true);
                            Op::Axpy(y, s, partner(rng, y))
                        }
                        6..=7 => {
                            let d = pick(rng, true);
                            Op::Copy(d, partner(rng, d))
                        }
                        8..=10 => {
                            let d = pick(rng, true);
                            Op::Mix(d, partner(rng, d))
                        }
                        11 => Op::Fail(pick(rng, true), format!("fail-{tag}-{th}-{i}")),
                        12 => Op::CopyIn(rng.gen_range(0..TENSORS), [rng.gen_range(-3..4) as f64, 1.0, s, -s]),
                        _ => Op::Read(pick(rng, false)),
                    }
                })
                .collect()
        })
        .collect()
}

/// Pointers to every element of a view, in its row-major order.
fn elements(v: &ResolvedView<'_>) -> Vec<*mut f64> {
    let p = v.ptr as *mut f64;
    let mut out = vec![];
    match v.extents.len() {
        0 => out.push(p),
        1 => (0..v.extents[0] as isize).for_each(|i| out.push(unsafe { p.offset(i * v.strides[0]) })),
        _ => {
            for i in 0..v.extents[0] as isize {
                for j in 0..v.extents[1] as isize {
                    out.push(unsafe { p.offset(i * v.strides[0] + j * v.strides[1]) });
                }
            }
        }
    }
    out
}

fn mix_kernel() -> KernelFn {
    KernelFn::inline(|c| {
        let (d, s) = (elements(&c.views()[0]), elements(&c.views()[1]));
        for (pd, ps) in d.iter().zip(&s) {
            unsafe {
                let sv = **ps;
                **pd = 0.5 * **pd + sv * sv;
            }
        }
        Ok(())
    })
}

/// What a read observes: the view's values in row-major order, or the name of
/// the operation whose error it reports.
type Seen = Result<Vec<f64>, String>;

/// What a submitted Read saw (filled in when its copy completes).
struct ReadSlot {
    buf: Box<[f64; 4]>,
    len: usize,
    event: Event,
}

struct Outcome {
    traces: HashMap<(usize, usize), EnrollTrace>,
    reads: HashMap<(usize, usize), Seen>,
    finals: Vec<Seen>,
}

/// Run one program concurrently.
fn run_concurrently(rt: &Runtime, prog: &[Vec<Op>]) -> Outcome {
    let roots: Vec<Tensor> = (0..TENSORS)
        .map(|k| {
            let data: Vec<f64> = (0..4).map(|e| (k * 4 + e) as f64).collect();
            // Half the tensors are column-major: same logical values, other strides.
            let order = if k % 2 == 0 { Order::RowMajor } else { Order::ColMajor };
            let src = Layout::contiguous(&[2, 2], Order::RowMajor);
            unsafe { Tensor::from_host(DType::F64, &src, data.as_ptr().cast(), order) }.unwrap()
        })
        .collect();
    let views: HashMap<(usize, Kind), Tensor> =
        (0..TENSORS).flat_map(|t| KINDS.map(|k| ((t, k), k.make(&roots[t])))).collect();
    let traces: Mutex<HashMap<(usize, usize), EnrollTrace>> = Default::default();
    let reads: Mutex<HashMap<(usize, usize), ReadSlot>> = Default::default();
    let copy_in_bufs: Mutex<Vec<Box<[f64; 4]>>> = Default::default();
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for (th, ops) in prog.iter().enumerate() {
            let (roots, views, traces, reads, copy_in_bufs, barrier) =
                (&roots, &views, &traces, &reads, &copy_in_bufs, &barrier);
            s.spawn(move || {
                let h = |v: &V| &views[&(v.0, v.1)];
                barrier.wait();
                for (i, op) in ops.iter().enumerate() {
                    let recording = record_enrollments();
                    let opts = Submit { runtime: Some(rt), ..Default::default() };
                    let r = match op {
                        Op::Fill(v, x) => ops::fill(h(v), Scalar::real(*x), opts.detached()),
                        Op::Scale(v, a) => ops::scale(h(v), Scalar::real(*a), opts.detached()),
                        Op::Axpy(y, a, x) => ops::axpy(h(y), Scalar::real(*a), h(x), opts.detached()),
                        Op::Copy(d, src) => ops::copy(h(d), h(src), opts.detached()),
                        Op::Mix(d, src) => ops::kernel(
                            "mix",
                            &[(h(d), Mode::Update), (h(src), Mode::Read)],
                            mix_kernel(),
                            opts.detached(),
                        ),
                        Op::Fail(v, name) => {
                            let k = KernelFn::new(|_| Err(KernelFailure { code: 1, message: Some("planned".into()) }));
                            ops::kernel(name.clone(), &[(h(v), Mode::Update)], k, opts.detached())
                        }
                        Op::CopyIn(t, vals) => {
                            let b = Box::new(*vals);
                            let p = b.as_ptr();
                            copy_in_bufs.lock().unwrap().push(b);
                            unsafe {
                                ops::copy_in(
                                    &roots[*t],
                                    p.cast(),
                                    Layout::contiguous(&[2, 2], Order::RowMajor),
                                    opts.detached(),
                                )
                            }
                        }
                        Op::Read(v) => {
                            let mut buf = Box::new([f64::NAN; 4]);
                            let p = buf.as_mut_ptr();
                            let len = v.1.elems().len();
                            let event = unsafe { ops::copy_out(h(v), p.cast(), 4, None, opts) }.expect("valid read");
                            reads.lock().unwrap().insert((th, i), ReadSlot { buf, len, event });
                            Ok(())
                        }
                    };
                    r.unwrap_or_else(|e| panic!("every generated operation is valid at submission: {op:?}: {e}"));
                    let trace = recording.finish();
                    traces.lock().unwrap().insert((th, i), trace);
                }
            });
        }
    });
    let reads = reads
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|(k, slot)| {
            (k, slot.event.wait(LONG).map(|()| slot.buf[..slot.len].to_vec()).map_err(|e| e.origin().to_string()))
        })
        .collect();
    let finals =
        roots.iter().map(|t| t.wait(LONG).map(|()| common::read_f64(t)).map_err(|e| e.origin().to_string())).collect();
    drop(copy_in_bufs);
    Outcome { traces: traces.into_inner().unwrap(), reads, finals }
}

/// A sequential order consistent with every value's queue order and every
/// thread's program order.
fn serial_order(prog: &[Vec<Op>], traces: &HashMap<(usize, usize), EnrollTrace>) -> Vec<(usize, usize)> {
    serial_order_generic(&prog.iter().map(|t| t.len()).collect::<Vec<_>>(), traces)
}

fn serial_order_generic(lens: &[usize], traces: &HashMap<(usize, usize), EnrollTrace>) -> Vec<(usize, usize)> {
    let mut per_value: BTreeMap<usize, Positions> = BTreeMap::new();
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
            // Stamps are per operation: only one operation's two disjoint
            // accesses to a value share one.
            assert!(w[0].0 < w[1].0 || w[0].1 == w[1].1, "two operations share a queue position");
            // One operation may access two disjoint parts of a value.
            if w[0].1 != w[1].1 {
                edge(w[0].1, w[1].1);
            }
        }
    }
    for (th, &len) in lens.iter().enumerate() {
        for i in 1..len {
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

/// One root in the model: values in row-major order, and errors on the
/// element sets their failed writes touched (oldest first).
#[derive(Clone)]
struct Root {
    vals: [f64; 4],
    poison: Vec<(Vec<usize>, String)>,
}

impl Root {
    /// The latest error on a set overlapping `elems`.
    fn error(&self, elems: &[usize]) -> Option<String> {
        self.poison.iter().rev().find(|(set, _)| set.iter().any(|e| elems.contains(e))).map(|(_, n)| n.clone())
    }
    fn read(&self, elems: &[usize]) -> Seen {
        match self.error(elems) {
            Some(e) => Err(e),
            None => Ok(elems.iter().map(|&e| self.vals[e]).collect()),
        }
    }
    /// An overwrite cleans exactly the elements it writes (SPEC §2.2): each
    /// error keeps the rest of its set.
    fn clean(&mut self, elems: &[usize]) {
        for (set, _) in &mut self.poison {
            set.retain(|e| !elems.contains(e));
        }
        self.poison.retain(|(set, _)| !set.is_empty());
    }
}

/// Apply one op to the model, with the runtime's rules: the first poisoned
/// operand it reads (in operand order) fails it, a failure poisons what it
/// writes, an overwrite cleans what it writes. Returns what a Read observes.
fn apply(m: &mut [Root], op: &Op) -> Option<Seen> {
    let get = |m: &[Root], v: &V| m[v.0].read(&v.1.elems());
    match op {
        Op::Read(v) => return Some(get(m, v)),
        Op::Fill(v, x) => {
            let e = v.1.elems();
            e.iter().for_each(|&k| m[v.0].vals[k] = *x);
            m[v.0].clean(&e);
        }
        Op::CopyIn(t, vals) => {
            m[*t].vals = *vals;
            m[*t].clean(&[0, 1, 2, 3]);
        }
        Op::Copy(d, s) => {
            let de = d.1.elems();
            match get(m, s) {
                Err(err) => m[d.0].poison.push((de, err)),
                Ok(sv) => {
                    de.iter().zip(sv).for_each(|(&k, x)| m[d.0].vals[k] = x);
                    m[d.0].clean(&de);
                }
            }
        }
        Op::Scale(v, a) => {
            let e = v.1.elems();
            match m[v.0].error(&e) {
                Some(err) => m[v.0].poison.push((e, err)),
                None => e.iter().for_each(|&k| m[v.0].vals[k] *= a),
            }
        }
        Op::Fail(v, name) => {
            let e = v.1.elems();
            let err = m[v.0].error(&e).unwrap_or_else(|| name.clone());
            m[v.0].poison.push((e, err));
        }
        Op::Axpy(y, _, x) | Op::Mix(y, x) => {
            let ye = y.1.elems();
            match (get(m, y), get(m, x)) {
                (Err(err), _) | (Ok(_), Err(err)) => m[y.0].poison.push((ye, err)),
                (Ok(yv), Ok(xv)) => {
                    for (n, &k) in ye.iter().enumerate() {
                        m[y.0].vals[k] = match op {
                            Op::Axpy(_, a, _) => a * xv[n] + yv[n],
                            _ => 0.5 * yv[n] + xv[n] * xv[n],
                        };
                    }
                }
            }
        }
    }
    None
}

fn same(a: &Seen, b: &Seen) -> bool {
    match (a, b) {
        (Ok(x), Ok(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits()),
        (Err(x), Err(y)) => x == y,
        _ => false,
    }
}

#[test]
fn random_concurrent_programs_with_views_match_sequential_execution() {
    let programs: usize = std::env::var("TA_DIFF_PROGRAMS").ok().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let seed: u64 = std::env::var("TA_DIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x7a5c);
    let rt = Runtime::new(2).unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut ops_checked, mut poisoned_seen, mut same_root_pairs) = (0usize, 0usize, 0usize);
    for p in 0..programs {
        let prog = random_program(&mut rng, p);
        same_root_pairs += prog
            .iter()
            .flatten()
            .filter(|op| matches!(op, Op::Axpy(a, _, b) | Op::Copy(a, b) | Op::Mix(a, b) if a.0 == b.0))
            .count();
        let out = run_concurrently(&rt, &prog);
        let order = serial_order(&prog, &out.traces);
        let mut model: Vec<Root> =
            (0..TENSORS).map(|k| Root { vals: std::array::from_fn(|e| (k * 4 + e) as f64), poison: vec![] }).collect();
        for (th, i) in &order {
            let op = &prog[*th][*i];
            if let Some(seen) = apply(&mut model, op) {
                let got = &out.reads[&(*th, *i)];
                if !same(got, &seen) {
                    for (k, tr) in &out.traces {
                        eprintln!("{k:?} {:?} {tr:?}", prog[k.0][k.1]);
                    }
                    eprintln!("order {order:?}");
                }
                assert!(same(got, &seen), "program {p} (seed {seed}): read {th}:{i} {op:?} saw {got:?}, sequential gives {seen:?}\nprogram: {prog:?}");
            }
            ops_checked += 1;
        }
        for (k, m) in model.iter().enumerate().take(TENSORS) {
            let want = m.read(&[0, 1, 2, 3]);
            assert!(
                same(&out.finals[k], &want),
                "program {p} (seed {seed}): tensor {k} is {:?}, sequential gives {want:?}\nprogram: {prog:?}",
                out.finals[k]
            );
            poisoned_seen += want.is_err() as usize;
        }
    }
    // The programs exercised values, poison, and disjoint parts of one tensor.
    assert!(ops_checked > programs * 20);
    assert!(poisoned_seen > programs / 10, "too few poisoned outcomes to test propagation ({poisoned_seen})");
    assert!(same_root_pairs > programs / 4, "too few operations on disjoint parts of one tensor ({same_root_pairs})");
}

// ---- block arrays ---------------------------------------------------------

/// A target in a 4x4 block array of 2x2 tiles (tile t at tile row t/2, tile
/// column t%2; element (i, j) of the array is number 4i + j).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
enum BT {
    Tile(usize),
    TileRow(usize, usize),
    RowOfTiles(usize),
    ColOfTiles(usize),
    All,
}

const BTS: [BT; 13] = [
    BT::Tile(0),
    BT::Tile(1),
    BT::Tile(2),
    BT::Tile(3),
    BT::TileRow(0, 0),
    BT::TileRow(0, 1),
    BT::TileRow(3, 0),
    BT::TileRow(3, 1),
    BT::RowOfTiles(0),
    BT::RowOfTiles(1),
    BT::ColOfTiles(0),
    BT::ColOfTiles(1),
    BT::All,
];

impl BT {
    /// Array element numbers in the target's row-major order.
    fn elems(self) -> Vec<usize> {
        let at = |t: usize, li: usize, lj: usize| (2 * (t / 2) + li) * 4 + 2 * (t % 2) + lj;
        match self {
            BT::Tile(t) => (0..4).map(|k| at(t, k / 2, k % 2)).collect(),
            BT::TileRow(t, r) => (0..2).map(|j| at(t, r, j)).collect(),
            BT::RowOfTiles(r) => (0..8).map(|k| (2 * r + k / 4) * 4 + k % 4).collect(),
            BT::ColOfTiles(c) => (0..8).map(|k| (k / 2) * 4 + 2 * c + k % 2).collect(),
            BT::All => (0..16).collect(),
        }
    }
    /// (tile, local element numbers within the tile) it orders on, in member order.
    fn hazards(self) -> Vec<(usize, Vec<usize>)> {
        let all = || vec![0, 1, 2, 3];
        match self {
            BT::Tile(t) => vec![(t, all())],
            BT::TileRow(t, r) => vec![(t, vec![2 * r, 2 * r + 1])],
            BT::RowOfTiles(r) => vec![(2 * r, all()), (2 * r + 1, all())],
            BT::ColOfTiles(c) => vec![(c, all()), (2 + c, all())],
            BT::All => (0..4).map(|t| (t, all())).collect(),
        }
    }
    fn shape(self) -> u8 {
        match self {
            BT::Tile(_) => 0,
            BT::TileRow(..) => 1,
            BT::RowOfTiles(_) => 2,
            BT::ColOfTiles(_) => 3,
            BT::All => 4,
        }
    }
    fn make(self, b: &BlockArray) -> Tensor {
        match self {
            BT::Tile(t) => b.block(t).unwrap(),
            BT::TileRow(t, r) => b.block(t).unwrap().slice(&[SliceSpec::index(r), SliceSpec::all(2)]).unwrap(),
            BT::RowOfTiles(r) => b.coalesce(&[r, 0], &[r + 1, 2]).unwrap(),
            BT::ColOfTiles(c) => b.coalesce(&[0, c], &[2, c + 1]).unwrap(),
            BT::All => b.all().unwrap(),
        }
    }
}

/// An operand: array (0 or 1) and target.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
struct B(usize, BT);

#[derive(Clone, Debug)]
enum BOp {
    Fill(B, f64),
    Scale(B, f64),
    Axpy(B, f64, B),
    Copy(B, B),
    Fail(B, String),
    Read(B),
}

fn random_block_program(rng: &mut SmallRng, tag: usize) -> Vec<Vec<BOp>> {
    let pick = |rng: &mut SmallRng| B(rng.gen_range(0..2), BTS[rng.gen_range(0..BTS.len())]);
    let partner = |rng: &mut SmallRng, first: B| loop {
        let t = BTS[rng.gen_range(0..BTS.len())];
        if t.shape() != first.1.shape() {
            continue;
        }
        // The same array only where no tile element is shared.
        let clash = first
            .1
            .hazards()
            .iter()
            .any(|(ta, ea)| t.hazards().iter().any(|(tb, eb)| ta == tb && ea.iter().any(|e| eb.contains(e))));
        let array = if clash || rng.gen_bool(0.5) { 1 - first.0 } else { first.0 };
        return B(array, t);
    };
    let scalars = [0.5, 1.5, -1.0, 2.0];
    (0..THREADS)
        .map(|th| {
            (0..rng.gen_range(4..12))
                .map(|i| {
                    let s = scalars[rng.gen_range(0..scalars.len())];
                    match rng.gen_range(0..12) {
                        0 => BOp::Fill(pick(rng), rng.gen_range(-3..4) as f64),
                        1..=2 => BOp::Scale(pick(rng), s),
                        3..=5 => {
                            let y = pick(rng);
                            BOp::Axpy(y, s, partner(rng, y))
                        }
                        6..=7 => {
                            let d = pick(rng);
                            BOp::Copy(d, partner(rng, d))
                        }
                        8 => BOp::Fail(pick(rng), format!("bfail-{tag}-{th}-{i}")),
                        _ => BOp::Read(pick(rng)),
                    }
                })
                .collect()
        })
        .collect()
}

/// One block array in the model: 16 values, and per tile the errors on the
/// local element sets their failed writes touched (oldest first).
#[derive(Clone)]
struct BArr {
    vals: [f64; 16],
    poison: [Vec<(Vec<usize>, String)>; 4],
}

impl BArr {
    /// The runtime's rule: the first covered tile (in member order) whose
    /// latest overlapping error exists fails the access.
    fn error(&self, t: BT) -> Option<String> {
        t.hazards().iter().find_map(|(tile, set)| {
            self.poison[*tile].iter().rev().find(|(s, _)| s.iter().any(|e| set.contains(e))).map(|(_, n)| n.clone())
        })
    }
    fn read(&self, t: BT) -> Seen {
        match self.error(t) {
            Some(e) => Err(e),
            None => Ok(t.elems().iter().map(|&e| self.vals[e]).collect()),
        }
    }
    fn poison(&mut self, t: BT, err: String) {
        for (tile, set) in t.hazards() {
            self.poison[tile].push((set, err.clone()));
        }
    }
    fn clean(&mut self, t: BT) {
        for (tile, set) in t.hazards() {
            for (s, _) in &mut self.poison[tile] {
                s.retain(|e| !set.contains(e));
            }
            self.poison[tile].retain(|(s, _)| !s.is_empty());
        }
    }
}

fn apply_block(m: &mut [BArr; 2], op: &BOp) -> Option<Seen> {
    match op {
        BOp::Read(b) => return Some(m[b.0].read(b.1)),
        BOp::Fill(b, x) => {
            b.1.elems().iter().for_each(|&e| m[b.0].vals[e] = *x);
            m[b.0].clean(b.1);
        }
        BOp::Scale(b, a) => match m[b.0].error(b.1) {
            Some(err) => m[b.0].poison(b.1, err),
            None => b.1.elems().iter().for_each(|&e| m[b.0].vals[e] *= a),
        },
        BOp::Fail(b, name) => {
            let err = m[b.0].error(b.1).unwrap_or_else(|| name.clone());
            m[b.0].poison(b.1, err);
        }
        BOp::Copy(d, s) => match m[s.0].read(s.1) {
            Err(err) => m[d.0].poison(d.1, err),
            Ok(sv) => {
                d.1.elems().iter().zip(sv).for_each(|(&e, x)| m[d.0].vals[e] = x);
                m[d.0].clean(d.1);
            }
        },
        BOp::Axpy(y, a, x) => match (m[y.0].read(y.1), m[x.0].read(x.1)) {
            (Err(err), _) | (Ok(_), Err(err)) => m[y.0].poison(y.1, err),
            (Ok(yv), Ok(xv)) => {
                for (n, &e) in y.1.elems().iter().enumerate() {
                    m[y.0].vals[e] = a * xv[n] + yv[n];
                }
            }
        },
    }
    None
}

#[test]
fn random_concurrent_programs_on_block_arrays_match_sequential_execution() {
    let programs: usize = std::env::var("TA_DIFF_PROGRAMS").ok().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let seed: u64 = std::env::var("TA_DIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0xb10c);
    let rt = Runtime::new(2).unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut coalesced_ops, mut poisoned_reads) = (0usize, 0usize);
    for p in 0..programs {
        let prog = random_block_program(&mut rng, p);
        let arrays: Vec<BlockArray> = (0..2)
            .map(|a| {
                let order = if a == 0 { Order::RowMajor } else { Order::ColMajor };
                let b = BlockArray::tiled(DType::F64, &[4, 4], &[2, 2], order, Domain::Host).unwrap();
                let data: Vec<f64> = (0..16).map(|e| (a * 16 + e) as f64).collect();
                unsafe {
                    ops::copy_in(
                        &b.all().unwrap(),
                        data.as_ptr().cast(),
                        Layout::contiguous(&[4, 4], Order::RowMajor),
                        Submit::on(&rt),
                    )
                }
                .unwrap()
                .wait(LONG)
                .unwrap();
                b
            })
            .collect();
        let handles: HashMap<B, Tensor> = (0..2).flat_map(|a| BTS.map(|t| (B(a, t), t.make(&arrays[a])))).collect();
        let traces: Mutex<HashMap<(usize, usize), EnrollTrace>> = Default::default();
        let reads: Mutex<HashMap<(usize, usize), PendingRead>> = Default::default();
        let barrier = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for (th, ops_) in prog.iter().enumerate() {
                let (handles, traces, reads, barrier, rt) = (&handles, &traces, &reads, &barrier, &rt);
                s.spawn(move || {
                    barrier.wait();
                    for (i, op) in ops_.iter().enumerate() {
                        let recording = record_enrollments();
                        let opts = Submit { runtime: Some(rt), ..Default::default() };
                        let h = |b: &B| &handles[b];
                        let r = match op {
                            BOp::Fill(b, x) => ops::fill(h(b), Scalar::real(*x), opts.detached()),
                            BOp::Scale(b, a) => ops::scale(h(b), Scalar::real(*a), opts.detached()),
                            BOp::Axpy(y, a, x) => ops::axpy(h(y), Scalar::real(*a), h(x), opts.detached()),
                            BOp::Copy(d, s0) => ops::copy(h(d), h(s0), opts.detached()),
                            BOp::Fail(b, name) => {
                                let k = KernelFn::new(|_| Err(KernelFailure { code: 1, message: None }));
                                ops::kernel(name.clone(), &[(h(b), Mode::Update)], k, opts.detached())
                            }
                            BOp::Read(b) => {
                                let mut buf = Box::new([f64::NAN; 16]);
                                let p = buf.as_mut_ptr();
                                let ev = unsafe { ops::copy_out(h(b), p.cast(), 16, None, opts) }.unwrap();
                                reads.lock().unwrap().insert((th, i), (buf, b.1.elems().len(), ev));
                                Ok(())
                            }
                        };
                        r.unwrap_or_else(|e| panic!("valid at submission: {op:?}: {e}"));
                        let trace = recording.finish();
                        traces.lock().unwrap().insert((th, i), trace);
                    }
                });
            }
        });
        let traces = traces.into_inner().unwrap();
        let reads: HashMap<(usize, usize), Seen> = reads
            .into_inner()
            .unwrap()
            .into_iter()
            .map(|(k, (buf, n, ev))| (k, ev.wait(LONG).map(|()| buf[..n].to_vec()).map_err(|e| e.origin().to_string())))
            .collect();
        let order = serial_order_generic(&prog.iter().map(|t| t.len()).collect::<Vec<_>>(), &traces);
        let mut model: [BArr; 2] = std::array::from_fn(|a| BArr {
            vals: std::array::from_fn(|e| (a * 16 + e) as f64),
            poison: Default::default(),
        });
        for (th, i) in &order {
            let op = &prog[*th][*i];
            coalesced_ops += matches!(
                op,
                BOp::Axpy(B(_, BT::RowOfTiles(_) | BT::ColOfTiles(_) | BT::All), ..)
                    | BOp::Copy(B(_, BT::RowOfTiles(_) | BT::ColOfTiles(_) | BT::All), _)
            ) as usize;
            if let Some(seen) = apply_block(&mut model, op) {
                let got = &reads[&(*th, *i)];
                poisoned_reads += seen.is_err() as usize;
                assert!(same(got, &seen), "block program {p} (seed {seed}): read {th}:{i} {op:?} saw {got:?}, sequential gives {seen:?}\nprogram: {prog:?}");
            }
        }
        for a in 0..2 {
            let got = handles[&B(a, BT::All)]
                .wait(LONG)
                .map(|()| common::read_f64(&handles[&B(a, BT::All)]))
                .map_err(|e| e.origin().to_string());
            let want = model[a].read(BT::All);
            assert!(
                same(&got, &want),
                "block program {p} (seed {seed}): array {a} is {got:?}, sequential gives {want:?}\nprogram: {prog:?}"
            );
        }
    }
    assert!(coalesced_ops > programs / 2, "too few coalesced writes ({coalesced_ops})");
    assert!(poisoned_reads > programs / 20, "too few poisoned reads ({poisoned_reads})");
}

// ---- poison over random slices -------------------------------------------

/// A random slice of a 5x6 root: per axis a range with a step (negative
/// steps too), sometimes one index with the axis dropped.
#[derive(Clone, Debug)]
struct RSlice {
    root: usize,
    specs: [SliceSpec; 2],
}

const RROWS: usize = 5;
const RCOLS: usize = 6;

impl RSlice {
    fn random(rng: &mut SmallRng, strided: bool) -> RSlice {
        let axis = |rng: &mut SmallRng, n: usize| {
            if rng.gen_bool(0.15) {
                return SliceSpec::index(rng.gen_range(0..n));
            }
            let steps: &[isize] = if strided { &[1, 2, 3, -1, -2] } else { &[1, 1, -1] };
            let step = steps[rng.gen_range(0..steps.len())];
            let start = rng.gen_range(0..n) as isize;
            if step > 0 {
                SliceSpec { start, stop: rng.gen_range(start + 1..=n as isize), step, drop: false }
            } else {
                SliceSpec { start, stop: rng.gen_range(-1..start), step, drop: false }
            }
        };
        RSlice { root: rng.gen_range(0..2), specs: [axis(rng, RROWS), axis(rng, RCOLS)] }
    }
    fn indices(s: &SliceSpec) -> Vec<usize> {
        let mut out = vec![];
        let mut i = s.start;
        while (s.step > 0 && i < s.stop) || (s.step < 0 && i > s.stop) {
            out.push(i as usize);
            i += s.step;
        }
        out
    }
    /// Root element numbers (row-major 6i + j), in the view's row-major order.
    fn elems(&self) -> Vec<usize> {
        let (rows, cols) = (Self::indices(&self.specs[0]), Self::indices(&self.specs[1]));
        rows.iter().flat_map(|&i| cols.iter().map(move |&j| RCOLS * i + j)).collect()
    }
    fn extents(&self) -> Vec<usize> {
        self.specs.iter().filter(|s| !s.drop).map(|s| Self::indices(s).len()).collect()
    }
    fn make(&self, roots: &[Tensor]) -> Tensor {
        roots[self.root].slice(&self.specs).unwrap()
    }
}

#[derive(Clone, Debug)]
enum SOp {
    /// ta_fill: an overwrite.
    Fill(RSlice, f64),
    /// ta_copy_in of host values: an overwrite.
    CopyIn(RSlice, f64),
    /// ta_copy from a clean tensor of the view's shape: an overwrite.
    Copy(RSlice, f64),
    /// ta_scale: an update.
    Scale(RSlice, f64),
    /// A user kernel that updates the view and fails (named).
    Fail(RSlice, String),
    Read(RSlice),
}

/// One program submitted in order from one thread (operations on disjoint
/// parts still run concurrently on the runtime's workers), checked against a
/// per-element poison model. With step-1 slices the runtime must agree with
/// the model exactly (values and error names). With strided slices a read
/// may fail where the model is clean (the difference of two strided boxes is
/// not always kept exactly), but never succeed where the model is poisoned,
/// and a successful read shows the model's values.
fn run_slice_program(rt: &Runtime, ops_: &[SOp], strided: bool, stats: &mut [usize; 3]) {
    let roots: Vec<Tensor> = (0..2)
        .map(|k| {
            let order = if k == 0 { Order::RowMajor } else { Order::ColMajor };
            let data: Vec<f64> = (0..RROWS * RCOLS).map(|e| (k * 100 + e) as f64).collect();
            let src = Layout::contiguous(&[RROWS, RCOLS], Order::RowMajor);
            unsafe { Tensor::from_host(DType::F64, &src, data.as_ptr().cast(), order) }.unwrap()
        })
        .collect();
    let mut model: Vec<Model> =
        (0..2).map(|k| ((0..RROWS * RCOLS).map(|e| (k * 100 + e) as f64).collect(), vec![])).collect();
    let error = |m: &Model, elems: &[usize]| {
        m.1.iter().rev().find(|(set, _)| set.iter().any(|e| elems.contains(e))).map(|(_, n)| n.clone())
    };
    let clean = |m: &mut (Vec<f64>, Vec<(Vec<usize>, String)>), elems: &[usize]| {
        for (set, _) in &mut m.1 {
            set.retain(|e| !elems.contains(e));
        }
        m.1.retain(|(set, _)| !set.is_empty());
    };
    let mut pending: Vec<(usize, Box<[f64; 30]>, Event)> = vec![];
    let mut keep: Vec<(Box<[f64; 30]>, Tensor)> = vec![];
    let mut expect: Vec<Seen> = vec![];
    for op in ops_ {
        let opts = Submit { runtime: Some(rt), ..Default::default() };
        match op {
            SOp::Fill(v, x) => {
                ops::fill(&v.make(&roots), Scalar::real(*x), opts).unwrap();
                let m = &mut model[v.root];
                let e = v.elems();
                e.iter().for_each(|&k| m.0[k] = *x);
                clean(m, &e);
            }
            SOp::CopyIn(v, x) | SOp::Copy(v, x) => {
                let e = v.elems();
                let vals: Box<[f64; 30]> = Box::new(std::array::from_fn(|k| x + k as f64));
                let layout = Layout::contiguous(&v.extents(), Order::RowMajor);
                let t = v.make(&roots);
                if matches!(op, SOp::CopyIn(..)) {
                    unsafe { ops::copy_in(&t, vals.as_ptr().cast(), layout, opts) }.unwrap();
                } else {
                    let src = unsafe { Tensor::from_host(DType::F64, &layout, vals.as_ptr().cast(), Order::ColMajor) }
                        .unwrap();
                    ops::copy(&t, &src, opts).unwrap();
                    keep.push((Box::new([0.0; 30]), src));
                }
                let m = &mut model[v.root];
                e.iter().enumerate().for_each(|(n, &k)| m.0[k] = vals[n]);
                clean(m, &e);
                keep.push((vals, t));
            }
            SOp::Scale(v, a) => {
                ops::scale(&v.make(&roots), Scalar::real(*a), opts).unwrap();
                let m = &mut model[v.root];
                let e = v.elems();
                match error(m, &e) {
                    Some(err) => m.1.push((e, err)),
                    None => e.iter().for_each(|&k| m.0[k] *= a),
                }
            }
            SOp::Fail(v, name) => {
                let k = KernelFn::new(|_| Err(KernelFailure { code: 1, message: Some("planned".into()) }));
                ops::kernel(name.clone(), &[(&v.make(&roots), Mode::Update)], k, opts).unwrap();
                let m = &mut model[v.root];
                let e = v.elems();
                let err = error(m, &e).unwrap_or_else(|| name.clone());
                m.1.push((e, err));
            }
            SOp::Read(v) => {
                let mut buf = Box::new([f64::NAN; 30]);
                let e = v.elems();
                let ev = unsafe { ops::copy_out(&v.make(&roots), buf.as_mut_ptr().cast(), 30, None, opts) }.unwrap();
                let m = &model[v.root];
                expect.push(match error(m, &e) {
                    Some(err) => Err(err),
                    None => Ok(e.iter().map(|&k| m.0[k]).collect()),
                });
                pending.push((e.len(), buf, ev));
            }
        }
    }
    for ((n, buf, ev), want) in pending.into_iter().zip(expect) {
        let got: Seen = ev.wait(LONG).map(|()| buf[..n].to_vec()).map_err(|e| e.origin().to_string());
        stats[0] += 1;
        stats[1] += want.is_err() as usize;
        match (&got, &want) {
            (Err(_), Ok(_)) if strided => stats[2] += 1,
            (Err(g), Err(_)) if strided => assert!(g.starts_with("sfail"), "{g}"),
            _ => {
                assert!(same(&got, &want), "read saw {got:?}, the per-element model gives {want:?}\nprogram: {ops_:?}")
            }
        }
    }
    for r in &roots {
        let _ = r.wait(LONG);
    }
    drop(keep);
}

#[test]
fn partial_overwrites_over_random_slices_clean_exactly_what_they_write() {
    let programs: usize = std::env::var("TA_DIFF_PROGRAMS").ok().and_then(|s| s.parse().ok()).unwrap_or(10_000) / 10;
    let seed: u64 = std::env::var("TA_DIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x511c);
    let rt = Runtime::new(2).unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    for strided in [false, true] {
        let mut stats = [0usize; 3];
        for p in 0..programs.max(20) {
            let ops_: Vec<SOp> = (0..rng.gen_range(8..30))
                .map(|i| {
                    let v = RSlice::random(&mut rng, strided);
                    let x = rng.gen_range(-4..5) as f64;
                    match rng.gen_range(0..12) {
                        0..=1 => SOp::Fill(v, x),
                        2 => SOp::CopyIn(v, x),
                        3 => SOp::Copy(v, x),
                        4 => SOp::Scale(v, [2.0, -1.0, 0.5][rng.gen_range(0..3)]),
                        5..=6 => SOp::Fail(v, format!("sfail-{p}-{i}")),
                        _ => SOp::Read(v),
                    }
                })
                .collect();
            run_slice_program(&rt, &ops_, strided, &mut stats);
        }
        let [reads, poisoned, conservative] = stats;
        eprintln!("slices (strided {strided}): {reads} reads, {poisoned} of a poisoned element, {conservative} failed conservatively");
        assert!(poisoned > reads / 25 && poisoned < reads * 9 / 10, "{poisoned} of {reads} reads see poison");
        if !strided {
            assert_eq!(conservative, 0);
        }
    }
}
