//! The system BLAS (see [`super::blas`]) as a dispatch backend. Kept apart
//! from the loader so the loader and kernels stay free of dispatch types
//! (benches compile them on their own).

use super::blas::gemm_blas;
use super::dense::Operand;
use crate::dispatch::{Backend, BackendKind, NativeOp, OpTag, Outcome, RunCtx};
use crate::domain::Domain;
use crate::dtype::DType;
use crate::resolved::ResolvedView;

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
    fn run(&self, op: &NativeOp, v: &[ResolvedView<'_>], _cx: &mut RunCtx) -> Outcome {
        let NativeOp::Gemm { alpha, beta } = op else {
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
