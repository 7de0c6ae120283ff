//! The backend vocabulary: what a backend is ([`Backend`]), the families a
//! caller can choose from ([`BackendKind`], [`Selector`]), a backend's answer
//! ([`Outcome`]) and the device context of one run ([`RunCtx`]).

use std::any::Any;
use std::sync::Arc;

use smallvec::SmallVec;

use super::op::{KernelOp, OpTag};
use crate::device::{Device, StreamId};
use crate::domain::Domain;
use crate::dtype::DType;
use crate::error::Result;
use crate::resolved::ResolvedView;
use crate::runtime::task::Issue;

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

/// Device context of one run of an operation's body.
#[derive(Default)]
pub(crate) struct RunCtx {
    /// Markers of same-device predecessors: the work must queue behind them.
    pub(crate) waits: SmallVec<[Issue; 2]>,
    /// Set by a device backend that queued work.
    pub(crate) issued: Option<Issued>,
    /// Set by a user kernel that deferred its completion.
    pub(crate) deferred: Option<std::sync::Arc<crate::runtime::deferred::TokenInner>>,
}

/// Work a device backend queued: where, and what the finish still needs.
pub(crate) struct Issued {
    pub(crate) device: Arc<dyn Device>,
    /// The stream the work is on (the last one, if it used several after
    /// joining them).
    pub(crate) stream: StreamId,
    /// Host work to run once the device work is done (for example, unpack a
    /// staging buffer into host memory); its error fails the operation.
    pub(crate) finisher: Option<Finisher>,
    /// What must live until the device work is done (staging buffers, and
    /// storage of temporaries).
    pub(crate) keep: SmallVec<[Box<dyn Any + Send>; 2]>,
}

/// See [`Issued::finisher`].
pub(crate) type Finisher = Box<dyn FnOnce() -> Result<()> + Send>;
