//! Backend selection (SPEC §2.5): the one place where an operation's backend
//! is chosen.
//!
//! At submission, [`select`] turns an operation tag, dtype, domain and the
//! caller's [`Selector`] into an ordered candidate list, or rejects the
//! operation. At run time, after the accesses are granted, [`walk`] offers the
//! operation to each candidate in order; a backend may decline (layout, dtype,
//! device, resources) only before it has written anything, and the first that
//! accepts runs. If all decline, the error names each backend and its reason.

use std::fmt::Write as _;

use super::blas::BlasBackend;
use super::device::DeviceBackend;
use super::native::NativeBackend;
use crate::dispatch::backend::{Backend, Outcome, RunCtx, Selector};
use crate::dispatch::op::{KernelOp, OpTag};
use crate::domain::Domain;
use crate::dtype::DType;
use crate::error::{Error, Result, Status};
use crate::op_name::OpName;
use crate::resolved::ResolvedView;

/// Host backends in preference order: the native backend first (measured at
/// least as fast as the system BLAS on the runtime's workers for every gemm
/// but those [`blas_wins`] names), then the system BLAS, which
/// callers can pick with a selector and which declines what it cannot run.
static HOST: &[&dyn Backend] = &[&NativeBackend, &BlasBackend];

/// [`HOST`] with the system BLAS first, for the operations
/// [`blas_wins`] names.
static HOST_BLAS_FIRST: &[&dyn Backend] = &[&BlasBackend, &NativeBackend];

/// Complex products with every extent from this on run faster on a tuned
/// OpenBLAS, split on the workers, than on the native backend: 1.04-1.05x at
/// 2048 for c64 and c128 in two runs, 0.99-1.00x at 1024, on AVX-512
/// (docs/perf-notes/kernels.md, "The system BLAS on the workers"). The
/// policy on CPU levels nothing was measured on.
pub(crate) const BLAS_COMPLEX_GEMM_MIN: usize = 2048;

/// On AVX-512, products of every float dtype with every extent from this on
/// run at least as fast on a tuned OpenBLAS, split on the workers, as on the
/// native backend (faer's widest kernels on stable Rust are AVX2). Medians,
/// BLAS over native, at 2048: dgemm 1.03-1.07x and sgemm 1.03-1.11x in four
/// alternated pairs on a Xeon whose OpenBLAS runs its Cooperlake kernel, and
/// 0.98-1.02x on an earlier Xeon (SkylakeX kernel); complex as
/// [`BLAS_COMPLEX_GEMM_MIN`]. At 1024 the native product was faster on both
/// (docs/perf-notes/kernels.md, "Real products from 2048 on AVX-512").
pub(crate) const BLAS_GEMM_MIN_AVX512: usize = 2048;

/// On an AVX2 CPU without AVX-512, products of every float dtype with every
/// extent from this on run at least as fast on a tuned OpenBLAS (its Haswell
/// or Zen kernel), split on the workers, as on the native backend. Medians on
/// Zen 3, BLAS over native, two runs: dgemm 1.21-1.31x at 2048 and 1.17-1.57x
/// at 1024, sgemm 1.11-1.20x and 0.95-1.07x, zgemm 1.13-1.15x and cgemm 1.01x
/// at 1024; at 512 within 8% either way (docs/perf-notes/kernels.md, "The
/// system BLAS on an AVX2 CPU").
pub(crate) const BLAS_GEMM_MIN_AVX2: usize = 1024;

/// On an AVX2 CPU without AVX-512, f64 products with every extent from this
/// on whose right operand BLAS reads transposed (the `tb` of
/// [`crate::kernels::blas_plan::plan`]: with C column-major, a B stored by
/// rows, such as the transposed tile `A_jk^T` of a tiled Cholesky's update)
/// run faster on a tuned OpenBLAS than on the native backend, whose AVX2
/// kernels lose ground on such an operand. A stream of `ta_gemm` on two
/// outputs alternated (both workers busy, one call each), BLAS over native,
/// medians of 9 alternated rounds on Zen 3, OpenBLAS's Zen kernel: 128
/// 1.04-1.09x, 256 1.10-1.17x, 384 1.23-1.33x, 512 1.12-1.47x, in each
/// layout that gives BLAS a transposed B (B transposed, A and B transposed,
/// C and B row-major); the same products without it ran 0.90-0.99x up to
/// 384 in that stream, whose operands stay in cache (with operands from the
/// last-level cache they too go to the BLAS, from
/// [`BLAS_F64_GEMM_MIN_AVX2`]). The tiled Cholesky, whose updates have this form, did not move
/// measurably: it runs near the machine's dgemm rate with either kernel
/// (docs/perf-notes/kernels.md, "Products with a transposed right operand on AVX2").
pub(crate) const BLAS_F64_ROW_B_MIN_AVX2: usize = 128;

/// [`BLAS_F64_ROW_B_MIN_AVX2`] for f32: 128 0.999x, 192 1.03x, 256 1.12x,
/// 384 1.24x. Complex products were not measured there and keep
/// [`BLAS_GEMM_MIN_AVX2`].
pub(crate) const BLAS_F32_ROW_B_MIN_AVX2: usize = 256;

/// On an AVX2 CPU without AVX-512, f64 products with every extent from this
/// on run faster on a tuned OpenBLAS whatever their layout, once their
/// operands come from the last-level cache as a tiled algorithm's tiles do
/// (faer's AVX2 kernels lose more than OpenBLAS's on such operands). Zen 3,
/// OpenBLAS's Zen kernel, streams of `ta_gemm` with the backend forced,
/// BLAS over native, medians of 9 alternated rounds, two runs: 16 outputs
/// over 16 pairs of operands (about 24 MiB at 256) 192 1.05-1.21x, 256
/// 1.08-1.15x, 384 1.12-1.16x, 512 1.04-1.07x, 128 0.97-0.98x; the same on
/// two outputs and one pair of operands kept in cache, 256 1.00-1.05x. The
/// tiled dgemm bench (256 tiles) with its products forced onto the BLAS ran
/// 1.05-1.07x its native run (docs/perf-notes/kernels.md, "Products from
/// mid sizes on AVX2, whatever their layout").
pub(crate) const BLAS_F64_GEMM_MIN_AVX2: usize = 256;

/// [`BLAS_F64_GEMM_MIN_AVX2`] for f32, where faer holds out longer: in the
/// same streams, operands from the last-level cache 256 1.04-1.54x, 384
/// 0.99-1.11x, 512 1.10-1.14x; kept in cache 256 0.97-0.98x, 384
/// 1.05-1.07x, 512 1.02-1.14x.
pub(crate) const BLAS_F32_GEMM_MIN_AVX2: usize = 512;

/// On an AMD CPU with AVX-512 (Zen 4), f64 products with every extent in
/// this range ran faster as one call of a tuned OpenBLAS (one thread, on the
/// worker) than on the native backend, where products of more than 16³
/// multiply-adds take faer's general path, whose fixed costs these sizes do
/// not repay. A stream of `ta_gemm` on one output with the backend forced,
/// BLAS over native, medians of 7 alternated rounds, in five runs (four at
/// 96): 24x24 0.86-0.95, 32 0.80-0.89, 48 0.90-0.96, 64 0.92-0.99, 96
/// 0.96-0.97; at 16 either way (0.74-1.06); from 128 the native product
/// runs on two workers and wins. Intel's AVX-512 Xeons were not measured at
/// these sizes, so they keep the native backend (docs/perf-notes/kernels.md,
/// "AVX-512 kernels for small products").
pub(crate) const BLAS_F64_MID_AMD_AVX512: std::ops::RangeInclusive<usize> = 24..=96;

/// [`BLAS_F64_MID_AMD_AVX512`] for f32 products. The same stream, three
/// runs: 24x24 0.72-0.97, 32 0.78-0.92, 48 0.86-0.90, 64 0.89-0.94; at 96
/// level (0.96-1.02), so the range stops at 64. Complex products ran 1.2-1.4
/// times slower on the BLAS at every size from 12 to 128 (c128, one run) and
/// stay native.
pub(crate) const BLAS_F32_MID_AMD_AVX512: std::ops::RangeInclusive<usize> = 24..=64;

/// The setting of a real `dtype` (`f64` or `f32`); `None` for the complex
/// types, which these policies leave to the larger rules.
fn real<T>(dtype: DType, f64: T, f32: T) -> Option<T> {
    match dtype {
        DType::F64 => Some(f64),
        DType::F32 => Some(f32),
        _ => None,
    }
}

/// A product's dtype and extents (`C` is `m x n`, the inner extent `k`).
#[derive(Copy, Clone, Debug)]
pub(crate) struct Product {
    pub(crate) dtype: DType,
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
}

/// The dispatch policy between the two host backends that both run gemm:
/// whether a product of `dtype` and extents `m x n x k` goes to a system
/// BLAS that is `tuned` (see `Blas::tuned_for_this_cpu`) before the native
/// backend, on a CPU of x86-64 level `cpu` (see `sysblas::library::cpu_level`:
/// 3 is AVX2, 4 AVX-512) made by AMD or not (`amd`). `row_b` tells whether
/// BLAS would read the right operand transposed; it is asked only where the
/// answer matters (a plan costs more than a tiny product). Elsewhere than
/// AVX2 and AVX-512 nothing was measured, and only large complex products go
/// to the BLAS.
pub(crate) fn blas_wins(p: Product, row_b: impl Fn() -> bool, tuned: bool, cpu: Option<u8>, amd: bool) -> bool {
    let Product { dtype, m, n, k } = p;
    let (min, max) = (m.min(n).min(k), m.max(n).max(k));
    tuned
        && match cpu {
            Some(3) => {
                min >= BLAS_GEMM_MIN_AVX2
                    || real(dtype, BLAS_F64_GEMM_MIN_AVX2, BLAS_F32_GEMM_MIN_AVX2).is_some_and(|r| min >= r)
                    || (real(dtype, BLAS_F64_ROW_B_MIN_AVX2, BLAS_F32_ROW_B_MIN_AVX2).is_some_and(|r| min >= r)
                        && row_b())
            }
            Some(4) => {
                min >= BLAS_GEMM_MIN_AVX512
                    || (amd
                        && real(dtype, BLAS_F64_MID_AMD_AVX512, BLAS_F32_MID_AMD_AVX512)
                            .is_some_and(|r| r.contains(&min) && r.contains(&max)))
            }
            _ => dtype.is_complex() && min >= BLAS_COMPLEX_GEMM_MIN,
        }
}

/// The host backends in the order `op` on `views` is offered to them.
fn host_order(op: &KernelOp, views: &[ResolvedView<'_>]) -> &'static [&'static dyn Backend] {
    let KernelOp::Gemm { .. } = op else { return HOST };
    // C, A and B come first (tensor scalars, if any, after them).
    let [c, a, _, ..] = views else { return HOST };
    let ([m, n], [_, k]) = (c.extents, a.extents) else { return HOST };
    let cpu = crate::sysblas::library::cpu_level();
    let amd = crate::sysblas::library::cpu_is_amd();
    let row_b = || right_operand_transposed(views);
    let p = Product { dtype: c.dtype, m: *m, n: *n, k: *k };
    let wins = |tuned| blas_wins(p, row_b, tuned, cpu, amd);
    // The library is looked at only for products the policy could send to it.
    if wins(true) && wins(crate::sysblas::library::blas().is_ok_and(|b| b.tuned_for_this_cpu())) {
        HOST_BLAS_FIRST
    } else {
        HOST
    }
}

/// Whether BLAS would read the right operand of the product C = A·B on
/// `views` (C, A, B first) transposed: B stored by rows under a column-major
/// C, or A stored by columns under a row-major C (BLAS then computes
/// `C^T = B^T·A^T`). False where BLAS cannot take the layout at all.
fn right_operand_transposed(views: &[ResolvedView<'_>]) -> bool {
    use crate::kernels::{blas_plan::plan, mat2::Mat2, operand::Operand};
    let [c, a, b, ..] = views else { return false };
    let m = |v| Mat2::<u8>::from_operand(&Operand::from(v));
    plan(&m(c), &m(a), &m(b)).is_ok_and(|p| p.tb != b'N')
}

/// Device backends (every CUDA device, real or simulated).
static DEVICE: &[&dyn Backend] = &[&DeviceBackend];

/// The candidate backends chosen at submission, as a bit set over the registry
/// of the operation's domain (kept small: it lives in every pending task).
#[derive(Copy, Clone, Debug)]
pub(crate) struct Candidates {
    domain: Domain,
    set: u32,
}

impl Candidates {
    /// The domain the operation runs in.
    pub(crate) fn domain(&self) -> Domain {
        self.domain
    }
}

/// Backends for a domain, in preference order.
fn registry(domain: Domain) -> &'static [&'static dyn Backend] {
    match domain {
        Domain::Host => HOST,
        Domain::Cuda(_) => DEVICE,
    }
}

/// Choose the candidates for an operation at submission.
#[inline]
pub(crate) fn select(
    tag: OpTag,
    dtype: DType,
    domain: Domain,
    selector: Selector,
    origin: &'static str,
) -> Result<Candidates> {
    let set = match domain {
        Domain::Host => host_set(tag, dtype, selector),
        Domain::Cuda(_) => offered(registry(domain), tag, dtype, domain, selector),
    };
    if set == 0 {
        return Err(none_offers(tag, dtype, domain, selector, origin));
    }
    Ok(Candidates { domain, set })
}

/// The entries of `list` that `selector` allows and that offer the operation.
fn offered(list: &[&dyn Backend], tag: OpTag, dtype: DType, domain: Domain, selector: Selector) -> u32 {
    let mut set = 0u32;
    for (i, b) in list.iter().enumerate() {
        if selector.allows(b.kind()) && b.offers(tag, dtype, domain) {
            set |= 1 << i;
        }
    }
    set
}

/// [`offered`] for [`HOST`], with its backends called by type (inlined: a
/// submission pays a few instructions instead of four virtual calls).
#[inline]
fn host_set(tag: OpTag, dtype: DType, selector: Selector) -> u32 {
    fn bit(b: impl Backend, tag: OpTag, dtype: DType, selector: Selector) -> u32 {
        (selector.allows(b.kind()) && b.offers(tag, dtype, Domain::Host)) as u32
    }
    bit(NativeBackend, tag, dtype, selector) | bit(BlasBackend, tag, dtype, selector) << 1
}

#[cold]
fn none_offers(tag: OpTag, dtype: DType, domain: Domain, selector: Selector, origin: &'static str) -> Error {
    // No backend of the domain is allowed at all (a mask of only device
    // backends for host operands): nothing could run it.
    if !registry(domain).iter().any(|b| selector.allows(b.kind())) {
        return Error::new(
            Status::NoBackend,
            origin,
            format!("the submission's backend mask {:#x} allows no backend that runs on {domain}", selector.mask()),
        );
    }
    Error::new(
        Status::Unsupported,
        origin,
        format!("no allowed backend offers {} for {} on {domain}", tag.name(), dtype.name()),
    )
}

/// Offer `op` to each candidate in order; the first that accepts runs.
pub(crate) fn walk(
    c: Candidates,
    op: &KernelOp,
    views: &[ResolvedView<'_>],
    origin: &OpName,
    cx: &mut RunCtx,
) -> Result<()> {
    match c.domain {
        // Both host backends offer the operation: the policy orders them
        // (the set's bits follow `HOST`'s order, and the swap keeps both).
        Domain::Host if c.set == 0b11 => walk_list(host_order(op, views), 0b11, op, views, origin, cx),
        _ => walk_list(registry(c.domain), c.set, op, views, origin, cx),
    }
}

/// [`walk`] over an explicit backend list (`set` selects entries by index).
fn walk_list(
    list: &[&dyn Backend],
    set: u32,
    op: &KernelOp,
    views: &[ResolvedView<'_>],
    origin: &OpName,
    cx: &mut RunCtx,
) -> Result<()> {
    let mut reasons = String::new();
    for (i, b) in list.iter().enumerate() {
        if set & (1 << i) == 0 {
            continue;
        }
        match b.run(op, views, cx) {
            Outcome::Done(r) => return r,
            Outcome::Declined(why) => {
                let _ = write!(reasons, "{}{}: {}", if reasons.is_empty() { "" } else { "; " }, b.name(), why);
            }
        }
    }
    Err(Error::new(
        Status::NoBackend,
        origin.to_origin(),
        format!("every backend declined {}: {reasons}", op.tag().name()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::backend::BackendKind;

    /// A backend that declines, or accepts and records that it ran.
    struct Fake {
        name: &'static str,
        decline: bool,
        ran: std::sync::atomic::AtomicUsize,
    }

    impl Backend for Fake {
        fn kind(&self) -> BackendKind {
            BackendKind::Native
        }
        fn name(&self) -> &'static str {
            self.name
        }
        fn offers(&self, _: OpTag, _: DType, _: Domain) -> bool {
            true
        }
        fn run(&self, _: &KernelOp, _: &[ResolvedView<'_>], _: &mut RunCtx) -> Outcome {
            if self.decline {
                return Outcome::Declined(format!("{} does not like this layout", self.name));
            }
            self.ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Outcome::Done(Ok(()))
        }
    }

    /// [`blas_wins`] for a product whose right operand BLAS reads as stored.
    fn blas_wins(dtype: DType, m: usize, n: usize, k: usize, tuned: bool, cpu: Option<u8>, amd: bool) -> bool {
        super::blas_wins(Product { dtype, m, n, k }, || false, tuned, cpu, amd)
    }

    /// A host view of `dtype` with these extents and strides (never dereferenced).
    fn host_view(dtype: DType, extents: &'static [usize], strides: &'static [isize]) -> ResolvedView<'static> {
        ResolvedView {
            ptr: std::ptr::NonNull::<u8>::dangling().as_ptr(),
            dtype,
            extents,
            strides,
            mode: crate::queue::Mode::Read,
            domain: Domain::Host,
            conj: false,
        }
    }

    /// `C = 1·A·B`.
    fn gemm_op() -> KernelOp {
        KernelOp::Gemm { alpha: crate::dispatch::op::ScalarSlot::Imm(crate::dtype::Scalar::real(1.0)), beta: None }
    }

    fn fake(name: &'static str, decline: bool) -> Fake {
        Fake { name, decline, ran: Default::default() }
    }

    #[test]
    fn the_host_set_by_type_is_the_registry_walked() {
        use OpTag::*;
        let tags = [
            Fill, Scale, Axpy, Copy, CopyIn, CopyOut, Gemm, Contract, Permute, Conj, Sum, Dot, Norm2, Potrf, Trsm, Syrk,
        ];
        let selectors = [
            Selector::AUTO,
            Selector::only(&[BackendKind::Native]),
            Selector::only(&[BackendKind::Blas]),
            Selector::only(&[BackendKind::Cuda]),
            Selector::only(&[BackendKind::Native, BackendKind::Blas]),
        ];
        let mut gemm_on_both = 0;
        for tag in tags {
            for &dtype in DType::ALL {
                for selector in selectors {
                    let want = offered(HOST, tag, dtype, Domain::Host, selector);
                    assert_eq!(host_set(tag, dtype, selector), want, "{tag:?} {dtype:?} {selector:?}");
                    gemm_on_both += (want == 0b11) as usize;
                }
            }
        }
        // Both bits are reachable: gemm on the four float dtypes, with AUTO and with both allowed.
        assert_eq!(gemm_on_both, 8);
    }

    #[test]
    fn the_blas_goes_first_only_for_large_products_on_a_tuned_library() {
        // These clauses do not depend on the vendor.
        let both = |dtype: DType, m, n, k, tuned, cpu: Option<u8>| {
            let wins = blas_wins(dtype, m, n, k, tuned, cpu, false);
            assert_eq!(wins, blas_wins(dtype, m, n, k, tuned, cpu, true), "{m}x{n}x{k} {dtype:?} {cpu:?}");
            wins
        };
        // Levels nothing was measured on: large complex products only.
        for cpu in [Some(2), None] {
            let big = BLAS_COMPLEX_GEMM_MIN;
            for dtype in [DType::C64, DType::C128] {
                assert!(both(dtype, big, big, big, true, cpu));
                assert!(both(dtype, big + 1, 3 * big, big, true, cpu));
                assert!(!both(dtype, big, big, big, false, cpu), "an untuned library never");
                for (m, n, k) in [(big - 1, big, big), (big, big - 1, big), (big, big, big - 1), (1024, 1024, 1024)] {
                    assert!(!both(dtype, m, n, k, true, cpu), "{m}x{n}x{k} {cpu:?}");
                }
            }
            for dtype in [DType::F32, DType::F64] {
                assert!(!both(dtype, 4 * big, 4 * big, 4 * big, true, cpu), "{dtype:?} {cpu:?}");
            }
        }
        // AVX2: complex dtypes from 1024 on (real ones from lower extents:
        // the AVX2 tests below); AVX-512: every float dtype from 2048 on.
        const ALL: &[DType] = &[DType::F32, DType::F64, DType::C64, DType::C128];
        for (cpu, big, below, dtypes) in [(3, BLAS_GEMM_MIN_AVX2, 512, &ALL[2..]), (4, BLAS_GEMM_MIN_AVX512, 1024, ALL)]
        {
            for &dtype in dtypes {
                assert!(both(dtype, big, big, big, true, Some(cpu)), "{dtype:?} {cpu}");
                assert!(both(dtype, 4 * big, big, 2 * big, true, Some(cpu)), "{dtype:?} {cpu}");
                assert!(!both(dtype, 4 * big, 4 * big, 4 * big, false, Some(cpu)), "an untuned library never");
                for (m, n, k) in [(big - 1, big, big), (big, big - 1, big), (big, big, big - 1), (below, below, below)]
                {
                    assert!(!both(dtype, m, n, k, true, Some(cpu)), "{m}x{n}x{k} {dtype:?} {cpu}");
                }
            }
        }
        // The order for views of those shapes (never dereferenced here).
        let views = |dtype, m: &'static [usize], a: &'static [usize]| {
            let v = |extents| host_view(dtype, extents, &[1, 1]);
            [v(m), v(a), v(&[1, 1])]
        };
        let gemm = gemm_op();
        let tuned = crate::sysblas::library::blas().is_ok_and(|b| b.tuned_for_this_cpu());
        let first = |op: &KernelOp, v: &[ResolvedView<'_>]| host_order(op, v)[0].name();
        const BIG: &[usize] = &[BLAS_COMPLEX_GEMM_MIN, BLAS_COMPLEX_GEMM_MIN];
        let want = if tuned { "blas" } else { "native" };
        assert_eq!(first(&gemm, &views(DType::C128, BIG, BIG)), want, "tuned: {tuned}");
        let level = crate::sysblas::library::cpu_level();
        let want = if tuned && matches!(level, Some(3 | 4)) { "blas" } else { "native" };
        assert_eq!(first(&gemm, &views(DType::F64, BIG, BIG)), want, "tuned: {tuned}, level: {level:?}");
        assert_eq!(first(&gemm, &views(DType::C64, &[8, 8], &[8, 8])), "native");
        assert_eq!(first(&KernelOp::Copy, &views(DType::C128, BIG, BIG)), "native");
        // Mid-size real products: the BLAS first on an AMD AVX-512 CPU only.
        let amd = crate::sysblas::library::cpu_is_amd();
        let want = if tuned && level == Some(4) && amd { "blas" } else { "native" };
        const MID: &[usize] = &[48, 48];
        for dtype in [DType::F64, DType::F32] {
            let got = first(&gemm, &views(dtype, MID, MID));
            assert_eq!(got, want, "{dtype:?}: tuned: {tuned}, level: {level:?}, amd: {amd}");
        }
        assert_eq!(first(&gemm, &views(DType::C128, MID, MID)), "native");
    }

    #[test]
    fn mid_size_real_products_go_to_the_blas_on_amd_avx512_only() {
        for (dtype, range) in [(DType::F64, BLAS_F64_MID_AMD_AVX512), (DType::F32, BLAS_F32_MID_AMD_AVX512)] {
            let (lo, hi) = (*range.start(), *range.end());
            for (m, n, k) in [(lo, lo, lo), (hi, hi, hi), (lo, hi, lo), (hi, lo, 48), (32, 64, hi)] {
                let what = format!("{m}x{n}x{k} {dtype:?}");
                assert!(blas_wins(dtype, m, n, k, true, Some(4), true), "{what}");
                assert!(!blas_wins(dtype, m, n, k, false, Some(4), true), "{what}: an untuned library never");
                assert!(!blas_wins(dtype, m, n, k, true, Some(4), false), "{what}: not on other vendors");
                for cpu in [Some(3), Some(2), None] {
                    assert!(!blas_wins(dtype, m, n, k, true, cpu, true), "{what} {cpu:?}");
                }
            }
            // Every extent must be in the range.
            for (m, n, k) in
                [(lo - 1, lo, lo), (lo, lo, lo - 1), (hi + 1, hi, hi), (hi, hi, hi + 1), (16, 16, 16), (128, 128, 128)]
            {
                assert!(!blas_wins(dtype, m, n, k, true, Some(4), true), "{m}x{n}x{k} {dtype:?}");
            }
        }
        // f32 stops at 64, where f64 goes on to 96.
        assert!(blas_wins(DType::F64, 96, 96, 96, true, Some(4), true));
        assert!(!blas_wins(DType::F32, 96, 96, 96, true, Some(4), true));
        // Complex products stay native.
        for dtype in [DType::C64, DType::C128] {
            for n in [24, 48, 64, 96] {
                assert!(!blas_wins(dtype, n, n, n, true, Some(4), true), "{n} {dtype:?}");
            }
        }
    }

    #[test]
    fn real_products_with_a_transposed_right_operand_go_to_the_blas_from_mid_sizes_on_avx2() {
        let p = |dtype, m, n, k| Product { dtype, m, n, k };
        let never = || -> bool { panic!("the layout was asked where it does not matter") };
        for (dtype, min) in [(DType::F64, BLAS_F64_ROW_B_MIN_AVX2), (DType::F32, BLAS_F32_ROW_B_MIN_AVX2)] {
            // Below the extent from which every layout goes to the BLAS (the test above).
            for (m, n, k) in [(min, min, min), (2 * min - 1, min, 3 * min), (BLAS_GEMM_MIN_AVX2 - 1, min, min)] {
                let what = format!("{m}x{n}x{k} {dtype:?}");
                for amd in [false, true] {
                    assert!(super::blas_wins(p(dtype, m, n, k), || true, true, Some(3), amd), "{what}");
                    assert!(!super::blas_wins(p(dtype, m, n, k), || false, true, Some(3), amd), "{what}: B as stored");
                    assert!(!super::blas_wins(p(dtype, m, n, k), || true, false, Some(3), amd), "{what}: untuned");
                }
                for cpu in [Some(4), Some(2), None] {
                    assert!(!super::blas_wins(p(dtype, m, n, k), never, true, cpu, false), "{what} {cpu:?}");
                }
            }
            for (m, n, k) in [(min - 1, min, min), (min, min - 1, min), (min, min, min - 1), (4, 4, 4)] {
                assert!(!super::blas_wins(p(dtype, m, n, k), never, true, Some(3), false), "{m}x{n}x{k} {dtype:?}");
            }
        }
        // Complex products: only from BLAS_GEMM_MIN_AVX2, whatever the layout.
        for dtype in [DType::C64, DType::C128] {
            assert!(!super::blas_wins(p(dtype, 512, 512, 512), never, true, Some(3), false), "{dtype:?}");
        }
    }

    #[test]
    fn real_products_go_to_the_blas_from_mid_sizes_on_avx2_whatever_their_layout() {
        let p = |dtype, m, n, k| Product { dtype, m, n, k };
        let never = || -> bool { panic!("the layout was asked where it does not matter") };
        for (dtype, min, row_b_min) in [
            (DType::F64, BLAS_F64_GEMM_MIN_AVX2, BLAS_F64_ROW_B_MIN_AVX2),
            (DType::F32, BLAS_F32_GEMM_MIN_AVX2, BLAS_F32_ROW_B_MIN_AVX2),
        ] {
            assert!(row_b_min < min && min < BLAS_GEMM_MIN_AVX2, "{dtype:?}");
            for (m, n, k) in [(min, min, min), (min, 2 * min, 3 * min)] {
                let what = format!("{m}x{n}x{k} {dtype:?}");
                for amd in [false, true] {
                    assert!(super::blas_wins(p(dtype, m, n, k), never, true, Some(3), amd), "{what}");
                    assert!(!super::blas_wins(p(dtype, m, n, k), never, false, Some(3), amd), "{what}: untuned");
                }
                for cpu in [Some(4), Some(2), None] {
                    assert!(!super::blas_wins(p(dtype, m, n, k), never, true, cpu, false), "{what} {cpu:?}");
                }
            }
            // One extent below: only a transposed right operand goes to the BLAS.
            for (m, n, k) in [(min - 1, min, min), (min, min - 1, min), (min, min, min - 1)] {
                let what = format!("{m}x{n}x{k} {dtype:?}");
                assert!(!super::blas_wins(p(dtype, m, n, k), || false, true, Some(3), false), "{what}");
                assert!(super::blas_wins(p(dtype, m, n, k), || true, true, Some(3), false), "{what}");
            }
        }
        for dtype in [DType::C64, DType::C128] {
            assert!(!super::blas_wins(p(dtype, 512, 512, 512), never, true, Some(3), false), "{dtype:?}");
        }
    }

    #[test]
    fn the_right_operand_is_transposed_where_blas_reads_it_by_rows() {
        const E: &[usize] = &[4, 4];
        let v = |strides| host_view(DType::F64, E, strides);
        const COL: &[isize] = &[1, 4];
        const ROW: &[isize] = &[4, 1];
        const NEITHER: &[isize] = &[8, 2];
        // (C, A, B): BLAS computes C = op(A)·op(B) for a column-major C, and
        // C^T = op(B^T)·op(A^T) for a row-major one.
        for (c, a, b, want) in [
            (COL, COL, COL, false),
            (COL, ROW, COL, false),
            (COL, COL, ROW, true),
            (COL, ROW, ROW, true),
            (ROW, ROW, ROW, false),
            (ROW, COL, ROW, true),
            (ROW, ROW, COL, false),
            (COL, COL, NEITHER, false),
        ] {
            assert_eq!(right_operand_transposed(&[v(c), v(a), v(b)]), want, "C {c:?}, A {a:?}, B {b:?}");
        }
        // On this machine, a 128 f64 product with B by rows goes to the BLAS
        // first exactly where the policy says (AVX2 and a tuned library),
        // and so does a 256 product whatever its layout.
        let gemm = gemm_op();
        let tuned = crate::sysblas::library::blas().is_ok_and(|b| b.tuned_for_this_cpu());
        let level = crate::sysblas::library::cpu_level();
        let want = if tuned && level == Some(3) { "blas" } else { "native" };
        const MID: &[usize] = &[128, 128];
        let w = |strides| host_view(DType::F64, MID, strides);
        const COL128: &[isize] = &[1, 128];
        const ROW128: &[isize] = &[128, 1];
        assert_eq!(host_order(&gemm, &[w(COL128), w(COL128), w(ROW128)])[0].name(), want, "{tuned} {level:?}");
        assert_eq!(host_order(&gemm, &[w(COL128), w(COL128), w(COL128)])[0].name(), "native");
        const LARGER: &[usize] = &[256, 256];
        const COL256: &[isize] = &[1, 256];
        let w = |strides| host_view(DType::F64, LARGER, strides);
        assert_eq!(host_order(&gemm, &[w(COL256), w(COL256), w(COL256)])[0].name(), want, "{tuned} {level:?}");
    }

    #[test]
    fn a_decline_falls_through_and_all_declines_name_every_backend() {
        let (a, b, c) = (fake("first", true), fake("second", false), fake("third", false));
        let list: [&dyn Backend; 3] = [&a, &b, &c];
        let name = OpName::from("gemm");
        walk_list(&list, 0b111, &KernelOp::Copy, &[], &name, &mut RunCtx::default()).unwrap();
        assert_eq!(b.ran.load(std::sync::atomic::Ordering::SeqCst), 1, "the second backend ran");
        assert_eq!(c.ran.load(std::sync::atomic::Ordering::SeqCst), 0, "the walk stopped at the first acceptance");
        // Skipping the accepting backends leaves only decliners.
        let (d, e) = (fake("blas", true), fake("cuda", true));
        let list: [&dyn Backend; 3] = [&a, &d, &e];
        let err = walk_list(&list, 0b111, &KernelOp::Copy, &[], &name, &mut RunCtx::default()).unwrap_err();
        assert_eq!(err.status(), Status::NoBackend);
        assert_eq!(err.origin(), "gemm");
        for n in ["first", "blas", "cuda"] {
            assert!(err.message().contains(&format!("{n}: {n} does not like")), "{}", err.message());
        }
        // The set restricts which entries are offered the operation.
        let err = walk_list(&[&a, &b], 0b01, &KernelOp::Copy, &[], &name, &mut RunCtx::default()).unwrap_err();
        assert!(!err.message().contains("second"));
    }
}
