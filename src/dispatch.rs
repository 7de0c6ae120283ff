//! Backend dispatch (SPEC §2.5): the one place where an operation's backend is
//! chosen.
//!
//! At submission, [`select`] turns an operation tag, dtype, domain and the
//! caller's [`Selector`] into an ordered candidate list, or rejects the
//! operation. At run time, after the accesses are granted, [`walk`] offers the
//! operation to each candidate in order; a backend may decline (layout, dtype,
//! device, resources) only before it has written anything, and the first that
//! accepts runs. If all decline, the error names each backend and its reason.

use std::fmt::Write as _;

use crate::backends;
use crate::domain::Domain;
use crate::dtype::{DType, Imm, Scalar};
use crate::error::{Error, Result, Status};
use crate::layout::Layout;
use crate::ops::ResolvedView;

/// Operation tags for dispatched (non-user) operations.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum OpTag {
    Fill,
    Scale,
    Axpy,
    Copy,
    CopyIn,
    CopyOut,
    Gemm,
    Contract,
    Permute,
    Conj,
    Sum,
    Dot,
    Norm2,
    Potrf,
    Trsm,
    Syrk,
}

/// Backend families a caller can allow or forbid.
#[repr(u32)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// The pure-Rust CPU backend, always present.
    Native = 1,
    /// A system BLAS found at run time.
    Blas = 2,
    /// CUDA.
    Cuda = 3,
}

/// Which backends an operation may use. The default allows all, in the
/// library's preferred order.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    /// Bit `k` set allows `BackendKind` value `k`; 0 means "any".
    mask: u32,
}

impl Selector {
    /// Any backend, in the preferred order.
    pub const AUTO: Selector = Selector { mask: 0 };

    /// Only the given backend families.
    pub fn only(kinds: &[BackendKind]) -> Selector {
        Selector { mask: kinds.iter().fold(0, |m, k| m | 1 << (*k as u32)) }
    }

    /// Decode the C ABI bitmask (bit `k` for `BackendKind` value `k`).
    pub fn from_mask(mask: u32) -> Option<Selector> {
        let known =
            (1 << BackendKind::Native as u32) | (1 << BackendKind::Blas as u32) | (1 << BackendKind::Cuda as u32);
        (mask & !known == 0).then_some(Selector { mask })
    }

    fn allows(self, kind: BackendKind) -> bool {
        self.mask == 0 || self.mask & (1 << kind as u32) != 0
    }
}

/// A backend's answer to one operation.
pub(crate) enum Outcome {
    /// It ran (successfully or not).
    Done(Result<()>),
    /// It did not touch anything and gives this reason.
    Declined(String),
}

/// A backend: a set of leaf kernels that know nothing about asynchrony.
pub(crate) trait Backend: Sync {
    fn kind(&self) -> BackendKind;
    fn name(&self) -> &'static str;
    /// Static capability, decided at submission from the tag, dtype and domain.
    fn offers(&self, tag: OpTag, dtype: DType, domain: Domain) -> bool;
    /// Run `op` on resolved views, or decline before writing anything.
    /// Host backends ignore `cx`; a device backend follows `cx.waits` and
    /// reports the work it queued in `cx.issued`.
    fn run(&self, op: &NativeOp, views: &[ResolvedView<'_>], cx: &mut RunCtx) -> Outcome;
}

// The device work and run context are the runtime's (it keeps them between
// a device task's issue and finish); backends fill them in.
pub(crate) use crate::runtime::device_work::Issued;
pub(crate) use crate::runtime::run_ctx::RunCtx;

/// Host memory given by the caller for copy-in/copy-out. The caller keeps it
/// valid until the operation completes (documented at the C ABI).
pub(crate) struct HostBuffer {
    pub(crate) ptr: *mut u8,
    pub(crate) layout: Layout,
}

// SAFETY: the pointer is only dereferenced by the task that owns this buffer
// description, under the caller's documented promise that the memory stays
// valid and untouched until the operation's completion is reported.
unsafe impl Send for HostBuffer {}

/// A scalar argument: immediate, or read from the 0-d tensor operand at this index.
#[derive(Copy, Clone, Debug)]
pub(crate) enum ScalarSlot {
    Imm(Scalar),
    View(usize),
}

impl ScalarSlot {
    /// The value, reading a tensor operand from the resolved views.
    pub(crate) fn get(self, views: &[ResolvedView<'_>]) -> Scalar {
        match self {
            ScalarSlot::Imm(s) => s,
            ScalarSlot::View(i) => {
                let v = &views[i];
                // SAFETY: a scalar operand is a 0-d tensor (checked at
                // submission) of the operation's float dtype, read under its access.
                unsafe {
                    match v.dtype {
                        DType::F32 => Scalar::real(*(v.ptr as *const f32) as f64),
                        DType::F64 => Scalar::real(*(v.ptr as *const f64)),
                        DType::C64 => {
                            let z = *(v.ptr as *const num_complex::Complex32);
                            Scalar::complex(z.re as f64, z.im as f64)
                        }
                        DType::C128 => {
                            let z = *(v.ptr as *const num_complex::Complex64);
                            Scalar::complex(z.re, z.im)
                        }
                        _ => Scalar::real(f64::NAN),
                    }
                }
            }
        }
    }
}

/// Arguments of a contraction.
pub(crate) struct ContractArgs {
    pub(crate) alpha: ScalarSlot,
    pub(crate) beta: Option<ScalarSlot>,
    pub(crate) a_axes: Box<[usize]>,
    pub(crate) b_axes: Box<[usize]>,
}

/// A dispatched operation with its immediate arguments. Views are passed in
/// operand order: fill/scale `[x]`, axpy `[y, x]`, copy `[dst, src]`, copy-in
/// `[dst]`, copy-out `[src]`, gemm and contract `[c, a, b, scalars...]`,
/// permute and conj `[dst, src]`, reductions `[out, x, (y)]`, potrf `[a]`,
/// trsm `[b, a]`, syrk `[c, a]`.
pub(crate) enum NativeOp {
    Fill(Imm),
    Scale(Imm),
    Axpy(Scalar),
    Copy,
    CopyIn(Box<HostBuffer>),
    CopyOut(Box<HostBuffer>),
    Gemm { alpha: ScalarSlot, beta: Option<ScalarSlot> },
    Contract(Box<ContractArgs>),
    Permute(Box<[usize]>),
    ConjCopy,
    Sum(Option<Box<[usize]>>),
    Dot { conjugate: bool },
    Norm2,
    Potrf { lower: bool },
    Trsm { left: bool, lower: bool, unit_diag: bool, alpha: Scalar },
    Syrk { lower: bool, alpha: Scalar, beta: Option<Scalar> },
}

impl NativeOp {
    pub(crate) fn tag(&self) -> OpTag {
        match self {
            NativeOp::Fill(_) => OpTag::Fill,
            NativeOp::Scale(_) => OpTag::Scale,
            NativeOp::Axpy(_) => OpTag::Axpy,
            NativeOp::Copy => OpTag::Copy,
            NativeOp::CopyIn(_) => OpTag::CopyIn,
            NativeOp::CopyOut(_) => OpTag::CopyOut,
            NativeOp::Gemm { .. } => OpTag::Gemm,
            NativeOp::Contract(_) => OpTag::Contract,
            NativeOp::Permute(_) => OpTag::Permute,
            NativeOp::ConjCopy => OpTag::Conj,
            NativeOp::Sum(_) => OpTag::Sum,
            NativeOp::Dot { .. } => OpTag::Dot,
            NativeOp::Norm2 => OpTag::Norm2,
            NativeOp::Potrf { .. } => OpTag::Potrf,
            NativeOp::Trsm { .. } => OpTag::Trsm,
            NativeOp::Syrk { .. } => OpTag::Syrk,
        }
    }
}

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
        Domain::Host => backends::HOST,
        Domain::Cuda(_) => backends::DEVICE,
    }
}

/// Choose the candidates for an operation at submission.
pub(crate) fn select(
    tag: OpTag,
    dtype: DType,
    domain: Domain,
    selector: Selector,
    origin: &'static str,
) -> Result<Candidates> {
    let mut set = 0u32;
    for (i, b) in registry(domain).iter().enumerate() {
        if selector.allows(b.kind()) && b.offers(tag, dtype, domain) {
            set |= 1 << i;
        }
    }
    if set == 0 {
        // No backend of the domain is allowed at all (a mask of only device
        // backends for host operands): nothing could run it.
        if !registry(domain).iter().any(|b| selector.allows(b.kind())) {
            return Err(Error::new(
                Status::NoBackend,
                origin,
                format!("the submission's backend mask {:#x} allows no backend that runs on {domain}", selector.mask),
            ));
        }
        return Err(Error::new(
            Status::Unsupported,
            origin,
            format!("no allowed backend offers {tag:?} for {} on {domain}", dtype.name()),
        ));
    }
    Ok(Candidates { domain, set })
}

/// Offer `op` to each candidate in order; the first that accepts runs.
pub(crate) fn walk(
    c: Candidates,
    op: &NativeOp,
    views: &[ResolvedView<'_>],
    origin: &crate::ops::OpName,
    cx: &mut RunCtx,
) -> Result<()> {
    walk_list(registry(c.domain), c.set, op, views, origin, cx)
}

/// [`walk`] over an explicit backend list (`set` selects entries by index).
fn walk_list(
    list: &[&dyn Backend],
    set: u32,
    op: &NativeOp,
    views: &[ResolvedView<'_>],
    origin: &crate::ops::OpName,
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
    Err(Error::new(Status::NoBackend, origin.to_origin(), format!("every backend declined {:?}: {reasons}", op.tag())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::OpName;

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
        fn run(&self, _: &NativeOp, _: &[ResolvedView<'_>], _: &mut RunCtx) -> Outcome {
            if self.decline {
                return Outcome::Declined(format!("{} does not like this layout", self.name));
            }
            self.ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Outcome::Done(Ok(()))
        }
    }

    fn fake(name: &'static str, decline: bool) -> Fake {
        Fake { name, decline, ran: Default::default() }
    }

    #[test]
    fn a_decline_falls_through_and_all_declines_name_every_backend() {
        let (a, b, c) = (fake("first", true), fake("second", false), fake("third", false));
        let list: [&dyn Backend; 3] = [&a, &b, &c];
        let name = OpName::Static("gemm");
        walk_list(&list, 0b111, &NativeOp::Copy, &[], &name, &mut RunCtx::default()).unwrap();
        assert_eq!(b.ran.load(std::sync::atomic::Ordering::SeqCst), 1, "the second backend ran");
        assert_eq!(c.ran.load(std::sync::atomic::Ordering::SeqCst), 0, "the walk stopped at the first acceptance");
        // Skipping the accepting backends leaves only decliners.
        let (d, e) = (fake("blas", true), fake("cuda", true));
        let list: [&dyn Backend; 3] = [&a, &d, &e];
        let err = walk_list(&list, 0b111, &NativeOp::Copy, &[], &name, &mut RunCtx::default()).unwrap_err();
        assert_eq!(err.status(), Status::NoBackend);
        assert_eq!(err.origin(), "gemm");
        for n in ["first", "blas", "cuda"] {
            assert!(err.message().contains(&format!("{n}: {n} does not like")), "{}", err.message());
        }
        // The set restricts which entries are offered the operation.
        let err = walk_list(&[&a, &b], 0b01, &NativeOp::Copy, &[], &name, &mut RunCtx::default()).unwrap_err();
        assert!(!err.message().contains("second"));
    }
}
