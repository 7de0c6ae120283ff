//! The backend vocabulary: what a backend is ([`Backend`]), the families a
//! caller can choose from ([`BackendKind`], [`Selector`]), a backend's answer
//! ([`Outcome`]) and the device context of one run ([`RunCtx`]).

use super::op::{KernelOp, OpTag};
use crate::domain::Domain;
use crate::dtype::DType;
use crate::error::Result;
use crate::resolved::ResolvedView;

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
    ///
    /// ```
    /// use tensorasync::{ops, DType, Order, Scalar, Selector, Submit, Tensor};
    /// assert_eq!(Selector::AUTO, Selector::default());
    /// let t = Tensor::zeros(DType::F32, &[2], Order::RowMajor, Default::default()).unwrap();
    /// ops::fill(&t, Scalar::real(3.0), Submit { selector: Selector::AUTO, ..Default::default() }).unwrap();
    /// assert_eq!(t.to_vec::<f32>().unwrap(), vec![3.0; 2]);
    /// ```
    pub const AUTO: Selector = Selector { mask: 0 };

    /// Only the given backend families.
    ///
    /// ```
    /// use tensorasync::{ops, BackendKind, DType, Order, Scalar, Selector, Submit, Tensor};
    /// let t = Tensor::zeros(DType::F32, &[2], Order::RowMajor, Default::default()).unwrap();
    /// // No CUDA backend runs on a host tensor: the submission is refused.
    /// let cuda_only = Submit { selector: Selector::only(&[BackendKind::Cuda]), ..Default::default() };
    /// assert!(ops::fill(&t, Scalar::real(1.0), cuda_only).is_err());
    /// let native = Submit { selector: Selector::only(&[BackendKind::Native]), ..Default::default() };
    /// ops::fill(&t, Scalar::real(1.0), native).unwrap();
    /// assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0; 2]);
    /// ```
    pub fn only(kinds: &[BackendKind]) -> Selector {
        Selector { mask: kinds.iter().fold(0, |m, k| m | 1 << (*k as u32)) }
    }

    /// The bitmask (bit `k` for `BackendKind` value `k`; 0 means "any").
    pub(crate) fn mask(self) -> u32 {
        self.mask
    }

    /// Whether backends of `kind` may run the operation.
    pub(crate) fn allows(self, kind: BackendKind) -> bool {
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
    fn run(&self, op: &KernelOp, views: &[ResolvedView<'_>], cx: &mut RunCtx) -> Outcome;
}

// The device work and run context are the runtime's (it keeps them between
// a device task's issue and finish); backends fill them in.
pub(crate) use crate::runtime::device_work::Issued;
pub(crate) use crate::runtime::run_ctx::RunCtx;
