//! Operations on asynchronous tensors (SPEC §2.5).
//!
//! Every operation follows one flow: validate dtypes and domains and choose
//! the backend candidates at submission; reject exact output/input queue
//! identity; enroll one access per operand atomically (`submit`); then, when
//! the task runs, check poison, resolve views and run the body (`Operation::execute`),
//! and finally poison or clean what it wrote (`Operation::commit`).

mod checks;
mod copy;
mod elementwise;
mod host_access;
mod in_place;
mod kernel;
mod linalg;
pub(crate) mod submit;
mod tensor_ops;
mod transfer;

use std::mem::ManuallyDrop;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::backends::registry::{self, Candidates};
use crate::dispatch::KernelOp;
use crate::domain::Domain;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::queue::Mode;
use crate::runtime::body::TaskBody;
use crate::runtime::run_ctx::RunCtx;
use crate::tensor::handle::{Repr, Tensor};
use crate::tensor::value::Value;

pub use crate::op_name::OpName;
pub use crate::resolved::ResolvedView;
pub use copy::{copy, copy_in, copy_out};
pub use elementwise::{axpy, fill, scale};
pub(crate) use kernel::external_inner;
pub use kernel::{external, kernel, Kernel, KernelCall, KernelFailure, KernelFn, KernelResult};
pub use linalg::{
    add_product, assign_product, conj, contract, dot, gemm, norm2, permute, potrf, sum, syrk, trsm, ScalarArg, Uplo,
};
#[cfg(feature = "internals")]
pub(crate) use submit::enrollments;
pub use submit::{Completion, Detached, Evented, Submit};

/// One operand of a submitted operation. Where its elements are is fixed at
/// submission (`data`, `layout`, `conj`), so a running task reads no shared
/// state to find them.
pub(crate) struct Access {
    /// The handle. For a whole value or a view it is a copy without a count
    /// of its own (see [`crate::tensor::value::Counted`] for why the value, and the
    /// view with the layout `layout` points into, outlive the task anyway);
    /// a coalesced view is a counted clone, dropped with the access (see
    /// [`Access::counted`]).
    pub(crate) tensor: ManuallyDrop<Tensor>,
    pub(crate) mode: Mode,
    /// Reads conjugate (a conj view of a complex tensor).
    conj: bool,
    /// The value's dtype code and domain, copied at submission so that a
    /// running task does not read its value's line (see `value::any_poison`).
    dtype: u8,
    domain: i32,
    /// Address of element `[0, 0, ...]` (null until enrollment fills it in).
    data: *mut u8,
    /// The layout of the contents or view enrolled with (null until enrollment).
    layout: *const Layout,
}

// SAFETY: `data` and `layout` point into the immutable `Contents` the value
// held at enrollment, or into the view that `tensor` keeps alive. The root
// value (kept alive by `tensor`) keeps those contents alive: contents are
// never modified, and a value replaces its contents only by handing the old
// ones to the replacing writer, which runs after every earlier access. They
// are dereferenced only by the task that holds this access, while the epoch
// queue grants it.
unsafe impl Send for Access {}

impl Access {
    /// An access through `tensor`, which the submitter holds until the access
    /// is enrolled on its value's queue.
    #[inline]
    pub(crate) fn new(tensor: &Tensor, mode: Mode) -> Access {
        let (dtype, domain) = tensor.root().codes();
        let tensor = match &tensor.0 {
            // SAFETY: a bitwise copy of a handle to a whole value or a view,
            // never dropped (see `Access::counted`) and never cloned as a
            // handle. The value (and the view) outlive it: the submitter's
            // handle keeps them alive until the access is enrolled on the
            // value's queue, and from then on their last count cannot go
            // before that queue is idle (see `ValueRc` and `ViewRc`), that is
            // before this access's task has finished, after which the access
            // is no longer used.
            Repr::Value(_) | Repr::View(_) => ManuallyDrop::new(unsafe { std::ptr::read(tensor) }),
            Repr::Coalesced(_) => ManuallyDrop::new(tensor.clone()),
        };
        Access { tensor, mode, conj: false, dtype, domain, data: std::ptr::null_mut(), layout: std::ptr::null() }
    }

    /// Whether `tensor` holds a count of its own (and is dropped with the
    /// access): only a coalesced view's is a clone (see [`Access::new`]).
    fn counted(&self) -> bool {
        matches!(self.tensor.0, Repr::Coalesced(_))
    }

    /// The (first) hazard record: dtype, domain.
    #[inline]
    pub(crate) fn value(&self) -> &Arc<Value> {
        self.tensor.root()
    }

    /// The operand's element count (once its geometry is set).
    #[inline]
    pub(crate) fn elements(&self) -> usize {
        debug_assert!(!self.layout.is_null(), "the geometry is set at enrollment");
        // SAFETY: see the Send impl; set by enrollment before this is called.
        unsafe { (*self.layout).len() }
    }

    /// The domain of the operand's value.
    #[inline]
    pub(crate) fn domain(&self) -> Domain {
        Domain::from_i32(self.domain).expect("an access stores a valid domain code")
    }

    pub(crate) fn set_geometry(&mut self, g: crate::tensor::view::Geometry<'_>) {
        self.data = g.data;
        self.layout = g.layout;
        self.conj = g.conj;
    }

    #[inline(always)]
    fn view(&self) -> ResolvedView<'_> {
        // SAFETY: see the Send impl; set by enrollment before the task can run.
        let layout = unsafe { &*self.layout };
        ResolvedView {
            ptr: self.data,
            dtype: DType::from_u32(self.dtype as u32).expect("an access stores a valid dtype code"),
            extents: &layout.extents,
            strides: &layout.strides,
            mode: self.mode,
            domain: Domain::from_i32(self.domain).expect("an access stores a valid domain code"),
            conj: self.conj,
        }
    }
}

impl Drop for Access {
    fn drop(&mut self) {
        if self.counted() {
            // SAFETY: dropped once, here; the access is not used after.
            unsafe { ManuallyDrop::drop(&mut self.tensor) }
        }
    }
}

/// What a task does once its accesses are granted.
pub(crate) enum Body {
    /// A library operation, walked over its backend candidates.
    Native { op: KernelOp, candidates: Candidates },
    /// A user kernel.
    Kernel(KernelFn),
    /// An operation whose body runs elsewhere (host access, external work):
    /// once granted, its task parks in this token until it is finished.
    External(Arc<crate::runtime::token::TokenInner>),
}

/// How many accesses an operation keeps in place (more go to the heap): the
/// operation fills its task's room for a body with two.
pub(crate) const INLINE_ACCESSES: usize = 2;

/// A submitted operation: its name (the origin of any error it starts), its
/// operands in order, and its body.
pub(crate) struct Operation {
    pub(crate) name: OpName,
    pub(crate) accesses: SmallVec<[Access; INLINE_ACCESSES]>,
    pub(crate) body: Body,
    /// The enrollment stamp (orders this operation's poison records).
    pub(crate) stamp: u64,
}

impl Operation {
    /// Check the operands, resolve views and run the body. Any poisoned operand
    /// that is read fails the operation with that same error.
    /// `cx` carries device context in (markers to follow) and out (queued
    /// work). A device operation checks its inputs when it finishes instead
    /// (it may start while same-device predecessors are only issued, before
    /// they have recorded their outcome).
    #[inline(always)]
    pub(crate) fn execute(&mut self, cx: &mut RunCtx) -> Result<()> {
        if self.device().is_none() {
            if let Some(e) = self.poisoned_input() {
                return Err(e);
            }
        }
        let mut views: SmallVec<[ResolvedView<'_>; 4]> = SmallVec::new();
        for a in &self.accesses {
            views.push(a.view());
        }
        match &mut self.body {
            Body::Native { op, candidates } => registry::walk(*candidates, op, &views, &self.name, cx),
            Body::Kernel(k) => kernel::call(k, &self.name, &views, cx),
            // Parked by the executor before it gets here.
            Body::External(_) => Ok(()),
        }
    }

    /// The error of a poisoned region this operation reads, if any.
    pub(crate) fn poisoned_input(&self) -> Option<Error> {
        // Without poison anywhere, no operand to walk (each would say so).
        if !crate::tensor::value::any_poison() {
            return None;
        }
        for a in self.accesses.iter().filter(|a| a.mode.reads()) {
            for (v, r) in a.tensor.hazards() {
                if let Some(e) = v.poison_in(r) {
                    return Some(e);
                }
            }
        }
        None
    }

    /// The device this operation runs on, if it is a device operation.
    pub(crate) fn device(&self) -> Option<u32> {
        match (&self.body, self.body_domain()) {
            (Body::Native { .. }, Domain::Cuda(d)) => Some(d),
            _ => None,
        }
    }

    fn body_domain(&self) -> Domain {
        match &self.body {
            Body::Native { candidates, .. } => candidates.domain(),
            Body::Kernel(_) | Body::External(_) => Domain::Host,
        }
    }

    /// Record the outcome in every value the operation writes: the error on
    /// failure; on success an overwrite leaves a clean value.
    pub(crate) fn commit(&self, result: &Result<()>) {
        for a in self.accesses.iter().filter(|a| a.mode.writes()) {
            for (v, r) in a.tensor.hazards() {
                match result {
                    Err(e) => v.add_poison(r.clone(), self.stamp, e.clone()),
                    // An overwrite cleans the region it wrote; an update
                    // succeeded only on a clean region, which stays clean.
                    Ok(()) if a.mode == Mode::Write => v.clean(r),
                    Ok(()) => {}
                }
            }
        }
    }

    /// The token of an operation whose body runs elsewhere.
    pub(crate) fn external(&self) -> Option<&Arc<crate::runtime::token::TokenInner>> {
        match &self.body {
            Body::External(t) => Some(t),
            _ => None,
        }
    }

    /// The views of the granted accesses, copied, and what keeps their
    /// storage alive (counted handles of the operands, and for whole values
    /// the contents they were enrolled with), for a task about to park.
    pub(crate) fn granted(&self) -> (Vec<crate::runtime::token::GrantedView>, Vec<crate::runtime::token::Keep>) {
        let mut views = Vec::with_capacity(self.accesses.len());
        let mut keep = Vec::with_capacity(self.accesses.len());
        for a in &self.accesses {
            let v = a.view();
            views.push(crate::runtime::token::GrantedView {
                ptr: v.ptr,
                dtype: v.dtype,
                extents: v.extents.iter().copied().collect(),
                strides: v.strides.iter().copied().collect(),
                mode: v.mode,
                domain: v.domain,
                conj: v.conj,
            });
            // A counted clone: the operand is alive while this task is
            // unfinished (see `Access::new`).
            let t: Tensor = (*a.tensor).clone();
            let contents = match &t.0 {
                Repr::Value(v) => v.state.lock().contents.clone().filter(|c| c.data(v.dtype()) == a.data),
                _ => None,
            };
            keep.push((t, contents));
        }
        (views, keep)
    }

    /// Whether the operation accesses `value`.
    pub(crate) fn holds(&self, value: &Arc<Value>) -> bool {
        self.accesses.iter().any(|a| a.tensor.hazards().any(|(v, _)| Arc::ptr_eq(v, value)))
    }
}

/// The runtime runs an operation through this (it knows no operation type).
impl TaskBody for Operation {
    fn origin(&self) -> std::borrow::Cow<'static, str> {
        self.name.to_origin()
    }
    fn execute(&mut self, cx: &mut RunCtx) -> Result<()> {
        Operation::execute(self, cx)
    }
    fn commit(&self, result: &Result<()>) {
        Operation::commit(self, result)
    }
    fn external(&self) -> Option<&Arc<crate::runtime::token::TokenInner>> {
        Operation::external(self)
    }
    fn poisoned_input(&self) -> Option<Error> {
        Operation::poisoned_input(self)
    }
    fn granted(&self) -> (Vec<crate::runtime::token::GrantedView>, Vec<crate::runtime::token::Keep>) {
        Operation::granted(self)
    }
    fn holds(&self, value: &Arc<Value>) -> bool {
        Operation::holds(self, value)
    }
}
