//! The backend over the system BLAS library (the binding is `crate::sysblas`,
//! kept free of dispatch types so benches compile it on its own).

use crate::dispatch::backend::{Backend, BackendKind, Outcome, RunCtx};
use crate::dispatch::op::{KernelOp, OpTag};
use crate::domain::Domain;
use crate::dtype::DType;
use crate::kernels::operand::Operand;
use crate::resolved::ResolvedView;
use crate::sysblas::gemm::gemm_blas;

/// The system BLAS as a dispatch backend: it offers gemm for the float
/// dtypes on the host, and declines (so the walk goes on) when no library was
/// found or the layout is one BLAS cannot take.
pub(crate) struct BlasBackend;

impl Backend for BlasBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Blas
    }
    fn name(&self) -> &'static str {
        "blas"
    }
    fn offers(&self, tag: OpTag, dtype: DType, domain: Domain) -> bool {
        tag == OpTag::Gemm && dtype.is_float() && domain == Domain::Host
    }
    fn run(&self, op: &KernelOp, v: &[ResolvedView<'_>], _cx: &mut RunCtx) -> Outcome {
        let KernelOp::Gemm { alpha, beta } = op else {
            return Outcome::Declined("the BLAS backend only runs gemm".into());
        };
        let (c, a, b) = (Operand::from(&v[0]), Operand::from(&v[1]), Operand::from(&v[2]));
        // SAFETY: the views were resolved from granted accesses (see the
        // native backend); gemm_blas has the dense kernels' contract.
        match unsafe { gemm_blas(&c, alpha.get(v), &a, &b, beta.map(|s| s.get(v))) } {
            Ok(result) => Outcome::Done(result),
            Err(reason) => Outcome::Declined(reason),
        }
    }
}
