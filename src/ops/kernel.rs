//! User kernels: the StarPU codelet equivalent (SPEC §2.5). A function runs
//! with the resolved views of its declared operands; a failure poisons every
//! operand it writes with a message the kernel can set.

use std::ops::Range;

use super::submit::{submit, Submit};
use super::{Body, OpName, ResolvedView};
use crate::error::{Error, Result, Status};
use crate::queue::Mode;
use crate::runtime::Event;
use crate::value::Tensor;

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

pub(crate) fn call(k: &mut KernelFn, name: &OpName, views: &[ResolvedView<'_>]) -> Result<()> {
    let mut call = KernelCall { views, message: None };
    let r = match k {
        KernelFn::Boxed(f) => f(&mut call),
        KernelFn::Raw { f, data } => f(*data, &mut call),
    };
    r.map_err(|fail| {
        let msg = call
            .message
            .or(fail.message)
            .unwrap_or_else(|| format!("user kernel returned code {}", fail.code));
        Error::with_code(Status::KernelFailed, name.to_origin(), msg, fail.code)
    })
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
