//! The parallelism policy of the kernels: when a product is worth running on
//! several of the calling pool's threads.

use std::cell::Cell;

use faer::Par;

use super::float::Float;

/// Products smaller than this run on the calling thread alone. The unit is
/// one f64 multiply-add: `m*n*k` weighted by the dtype's cost (f32 1/2, f64 1,
/// c64 2, c128 4; see [`work`]). Below it the fork/join costs more than it
/// saves (the crossover measured by benches/gemm.rs), and a small task is
/// better left to the runtime's task-level parallelism.
pub(crate) const PAR_MIN_FLOPS: usize = 112 * 112 * 112;

/// The cost of an `m x n x k` product in f64 multiply-adds (see [`PAR_MIN_FLOPS`]).
pub(crate) fn work<T: Float>(m: usize, n: usize, k: usize) -> usize {
    let mnk = m.saturating_mul(n).saturating_mul(k);
    match T::DTYPE {
        crate::dtype::DType::F32 => mnk / 2,
        crate::dtype::DType::C64 => mnk.saturating_mul(2),
        crate::dtype::DType::C128 => mnk.saturating_mul(4),
        _ => mnk,
    }
}

/// Products from this size on (f64 multiply-adds, as [`PAR_MIN_FLOPS`]) go
/// parallel even while ready tasks wait: their pieces are rayon jobs that a
/// busy peer does not take (the caller then runs them itself), and one such
/// product run sequentially because a small task happened to be queued when
/// it started would take twice as long. The tiles of a tiled factorisation
/// (256³) stay below it.
pub(crate) const BUSY_PAR_MIN_FLOPS: usize = 512 * 512 * 512;

thread_local! {
    /// On a runtime's worker thread, the runtime's answer to "would the
    /// ready tasks keep every other worker busy?" (the runtime sets it when
    /// it starts the thread: kernels sit below the runtime and cannot ask it).
    static PEERS_BUSY: Cell<Option<fn() -> bool>> = const { Cell::new(None) };
}

/// Set (or clear) this thread's [`PEERS_BUSY`] probe.
pub(crate) fn set_peers_busy_probe(probe: Option<fn() -> bool>) {
    PEERS_BUSY.with(|p| p.set(probe));
}

/// Whether the other threads of the calling worker's pool have tasks of
/// their own to run. A product then runs sequentially: split across busy
/// workers it ran slower (tiled dgemm and Cholesky on 256-tiles: 0.85-0.9x
/// of all-sequential tiles; docs/perf-notes/kernels.md).
fn peers_busy() -> bool {
    PEERS_BUSY.with(|p| p.get()).is_some_and(|busy| busy())
}

/// The parallelism for a product of `flops` f64 multiply-adds ([`work`]): faer's rayon
/// backend when called on a rayon pool thread with more than one thread and
/// the product is large enough, else sequential. On a pool thread, faer's
/// parallel pieces are rayon jobs of *that* pool (the runtime's workers), so
/// intra-op parallelism shares the runtime's cores instead of adding threads.
/// Outside any pool (a plain thread) the product runs sequentially rather than
/// waking rayon's global pool, and so does a product below
/// [`BUSY_PAR_MIN_FLOPS`] on a worker whose peers have ready tasks waiting
/// ([`peers_busy`]).
pub(crate) fn par_for(flops: usize) -> Par {
    if flops < PAR_MIN_FLOPS || rayon::current_thread_index().is_none() {
        return Par::Seq;
    }
    if flops < BUSY_PAR_MIN_FLOPS && peers_busy() {
        return Par::Seq;
    }
    match rayon::current_num_threads() {
        0 | 1 => Par::Seq,
        n => Par::rayon(n),
    }
}
