//! User kernels: the StarPU codelet equivalent (SPEC §2.5). A function runs
//! with the resolved views of its declared operands; a failure poisons every
//! operand it writes with a message the kernel can set.

use std::ops::Range;

use super::submit::{submit, Submit};
use super::{Body, OpName, ResolvedView};
use crate::error::{Error, Result, Status};
use crate::queue::Mode;
use crate::runtime::Event;
use crate::tensor::handle::Tensor;

/// Why a kernel failed: a raw code (kept in the error object) and an optional message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelFailure {
    pub code: i64,
    pub message: Option<String>,
}

/// What a kernel returns.
pub type KernelResult = std::result::Result<(), KernelFailure>;

/// A kernel given as a plain function and two context words: no allocation
/// per submission (the C ABI uses it for a C function pointer and userdata).
pub type RawKernelFn = fn(data: [usize; 2], call: &mut KernelCall<'_>) -> KernelResult;

/// The body of a user kernel.
pub enum KernelFn {
    /// A Rust closure.
    Boxed(Box<dyn FnMut(&mut KernelCall<'_>) -> KernelResult + Send>),
    /// A function with two words of context.
    Raw { f: RawKernelFn, data: [usize; 2] },
}

impl KernelFn {
    /// A kernel from a Rust closure.
    pub fn new(f: impl FnMut(&mut KernelCall<'_>) -> KernelResult + Send + 'static) -> KernelFn {
        KernelFn::Boxed(Box::new(f))
    }
}

/// What a running kernel sees: its operands' views, in declaration order.
pub struct KernelCall<'a> {
    views: &'a [ResolvedView<'a>],
    message: Option<String>,
    deferred: Option<std::sync::Arc<crate::runtime::deferred::TokenInner>>,
}

impl<'a> KernelCall<'a> {
    /// Resolved views of the operands, in the order they were declared.
    pub fn views(&self) -> &'a [ResolvedView<'a>] {
        self.views
    }

    /// Set the message of the error this kernel is about to report.
    pub fn set_message(&mut self, msg: impl Into<String>) {
        self.message = Some(msg.into());
    }

    /// Defer the operation's completion: it does not complete when the
    /// kernel returns (whatever the kernel returns is then ignored) but when
    /// the returned token is finished, from any thread. Until then it keeps
    /// its accesses and its operands' storage (the views' data pointers stay
    /// valid), without occupying a worker. A second call fails with
    /// `InvalidArgument`.
    pub fn defer(&mut self) -> Result<crate::runtime::Token> {
        self.defer_inner().map(crate::runtime::Token::from_inner)
    }

    pub(crate) fn defer_inner(&mut self) -> Result<std::sync::Arc<crate::runtime::deferred::TokenInner>> {
        if self.deferred.is_some() {
            return Err(Error::new(
                Status::InvalidArgument,
                "ta_kernel_defer",
                "the kernel has deferred its completion already",
            ));
        }
        let t = crate::runtime::deferred::TokenInner::new();
        self.deferred = Some(t.clone());
        Ok(t)
    }

    /// Run `f` over pieces of `range` of at least `grain` items (fewer only
    /// when the whole range is shorter) on the runtime's own workers (so a parallel kernel shares the cores with other
    /// tasks instead of oversubscribing them). Returns when every piece is done.
    pub fn parallel_for(&self, range: Range<usize>, grain: usize, f: &(dyn Fn(Range<usize>) + Sync)) {
        parallel_for(range, grain.max(1), f)
    }
}

/// Split `range` recursively with rayon's `join` on the current pool (halves
/// are split only while both keep at least `grain` items); runs sequentially
/// outside a pool.
pub(crate) fn parallel_for(range: Range<usize>, grain: usize, f: &(dyn Fn(Range<usize>) + Sync)) {
    if range.len() < 2 * grain || rayon::current_thread_index().is_none() {
        if !range.is_empty() {
            f(range);
        }
        return;
    }
    let mid = range.start + range.len() / 2;
    rayon::join(|| parallel_for(range.start..mid, grain, f), || parallel_for(mid..range.end, grain, f));
}

pub(crate) fn call(
    k: &mut KernelFn,
    name: &OpName,
    views: &[ResolvedView<'_>],
    cx: &mut crate::dispatch::RunCtx,
) -> Result<()> {
    let mut call = KernelCall { views, message: None, deferred: None };
    let r = match k {
        KernelFn::Boxed(f) => f(&mut call),
        KernelFn::Raw { f, data } => f(*data, &mut call),
    };
    if call.deferred.is_some() {
        cx.deferred = call.deferred.take();
        return Ok(());
    }
    r.map_err(|fail| {
        let msg = call.message.or(fail.message).unwrap_or_else(|| format!("user kernel returned code {}", fail.code));
        Error::with_code(Status::KernelFailed, name.to_origin(), msg, fail.code)
    })
}

/// Submit an operation over `operands` whose body the caller runs itself
/// (SPEC §2.8): once every access is granted the returned token's `started`
/// event completes (with the error instead, if an input it reads is
/// poisoned), and the operation completes when the token is finished. The
/// same rules as [`kernel`] apply to the operands.
pub fn external(
    name: impl Into<OpName>,
    operands: &[(&Tensor, Mode)],
    opts: Submit<'_>,
) -> Result<(crate::runtime::Token, Option<Event>)> {
    let (t, ev) = external_inner(name, "external_submit", operands, opts)?;
    Ok((crate::runtime::Token::from_inner(t), ev))
}

pub(crate) fn external_inner(
    name: impl Into<OpName>,
    origin: &'static str,
    operands: &[(&Tensor, Mode)],
    opts: Submit<'_>,
) -> Result<(std::sync::Arc<crate::runtime::deferred::TokenInner>, Option<Event>)> {
    if let Some((t, _)) = operands.iter().find(|(t, _)| t.domain() != crate::domain::Domain::Host) {
        return Err(Error::new(
            Status::DomainMismatch,
            origin,
            format!("host access and external operations take host tensors; an operand lives on {} (copy it to the host first)", t.domain()),
        ));
    }
    let token = crate::runtime::deferred::TokenInner::new();
    let ev = submit(name, origin, operands, Body::External(token.clone()), opts, |_| Ok(()))?;
    Ok((token, ev))
}

/// Submit a user kernel over `operands` (each with its access mode). Reading
/// and writing the same value in one kernel is rejected (`Alias`): declare one
/// `Update` access instead.
pub fn kernel(
    name: impl Into<OpName>,
    operands: &[(&Tensor, Mode)],
    f: KernelFn,
    opts: Submit<'_>,
) -> Result<Option<Event>> {
    // A user kernel runs on a host worker and dereferences its views there.
    if let Some((t, _)) = operands.iter().find(|(t, _)| t.domain() != crate::domain::Domain::Host) {
        return Err(crate::error::Error::new(
            crate::error::Status::DomainMismatch,
            "kernel",
            format!("user kernels take host tensors; an operand lives on {} (copy it to the host first)", t.domain()),
        ));
    }
    submit(name, "kernel", operands, Body::Kernel(f), opts, |_| Ok(()))
}
