//! Small library operations run in place.
//!
//! A library operation whose kernel costs less than handing it to a worker
//! (a 4x4 gemm, an axpy of a few elements) and that is ready when it is
//! submitted (every value it touches is idle and clean) runs on the
//! submitting thread, before the submission returns, under the locks the
//! submission holds anyway. No task is made, enrolled, queued or handed
//! over, so the lines of its values and locks never move to a worker and
//! back: the operation is planned before its task would be made
//! (`submit::plan_first`), and runs from the submitter's stack.
//!
//! It is the same operation with the same result and notifications: the
//! locks order it against every other submission on its values exactly as
//! its enrollment would have (it takes its stamp on each queue), and the
//! kernels that qualify take no lock and call no user code, and the
//! products are far below the size the kernels split across the workers,
//! so a kernel run in place never waits for them while it holds the locks.
//!
//! Only operations without a callback (documented to run on a worker), on
//! host values, while no runtime records a trace or tracks pending work,
//! qualify; a runtime can
//! turn it off ([`crate::Runtime::set_small_in_place`]) and so can one
//! submission ([`crate::Submit::defer`]). See docs/perf-notes/runtime.md
//! for the sizes.

use std::panic::{catch_unwind, AssertUnwindSafe};

use smallvec::SmallVec;

use super::{Body, Operation};
use crate::dispatch::KernelOp;
use crate::domain::Domain;
use crate::error::{Error, Result, Status};
use crate::kernels::par::PAR_MIN_FLOPS;
use crate::runtime::body::TaskBody;
use crate::runtime::guard::panic_message;
use crate::runtime::run_ctx::RunCtx;

/// The most elements of any operand of an elementwise operation or
/// reduction that runs in place.
pub(crate) const ELEMENTWISE_MAX: usize = 256;

/// The most elements of any operand of a gemm that runs in place (8x8: at
/// most 512 multiply-adds).
pub(crate) const GEMM_MAX: usize = 64;

// A product with operands of at most `GEMM_MAX` elements has at most
// `GEMM_MAX`^(3/2) multiply-adds: sequential (see `kernels::par`).
const _: () = assert!(GEMM_MAX * GEMM_MAX * GEMM_MAX < PAR_MIN_FLOPS * PAR_MIN_FLOPS);

/// The most elements any operand of `body` may have for it to run in place,
/// for a host library operation of a kind whose cost is known from its
/// operands' sizes; `None` for every other body.
#[inline]
pub(crate) fn limit(body: &Body) -> Option<usize> {
    let Body::Native { op, candidates } = body else {
        return None;
    };
    if candidates.domain() != Domain::Host {
        return None;
    }
    match op {
        KernelOp::Fill(_)
        | KernelOp::Scale(_)
        | KernelOp::Axpy(_)
        | KernelOp::Copy
        | KernelOp::ConjCopy
        | KernelOp::Dot { .. }
        | KernelOp::Norm2
        | KernelOp::Sum(None) => Some(ELEMENTWISE_MAX),
        KernelOp::Gemm { .. } => Some(GEMM_MAX),
        _ => None,
    }
}

/// Run `op` on this thread: its accesses are granted (the caller holds the
/// locks of their idle, clean values). A panic fails the operation, as it
/// does on a worker.
pub(crate) fn execute(op: &mut Operation) -> Result<()> {
    let mut cx = RunCtx { waits: SmallVec::new(), issued: None, deferred: None };
    match catch_unwind(AssertUnwindSafe(|| op.execute(&mut cx))) {
        Ok(r) => r,
        Err(p) => Err(Error::new(Status::Panic, op.origin(), panic_message(&p))),
    }
}
