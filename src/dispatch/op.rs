//! The operation descriptor handed to backends: which operation ([`OpTag`])
//! and its immediate arguments ([`KernelOp`]), for any backend (native,
//! system BLAS, device).

use crate::dtype::{DType, Imm, Scalar};
use crate::layout::Layout;
use crate::resolved::ResolvedView;

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

impl OpTag {
    /// The operation's name in messages: the C function's, without `ta_`.
    pub fn name(self) -> &'static str {
        match self {
            OpTag::Fill => "fill",
            OpTag::Scale => "scale",
            OpTag::Axpy => "axpy",
            OpTag::Copy => "copy",
            OpTag::CopyIn => "copy_in",
            OpTag::CopyOut => "copy_out",
            OpTag::Gemm => "gemm",
            OpTag::Contract => "contract",
            OpTag::Permute => "permute",
            OpTag::Conj => "conj",
            OpTag::Sum => "sum",
            OpTag::Dot => "dot",
            OpTag::Norm2 => "norm2",
            OpTag::Potrf => "potrf",
            OpTag::Trsm => "trsm",
            OpTag::Syrk => "syrk",
        }
    }
}

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
pub(crate) enum KernelOp {
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

impl KernelOp {
    pub(crate) fn tag(&self) -> OpTag {
        match self {
            KernelOp::Fill(_) => OpTag::Fill,
            KernelOp::Scale(_) => OpTag::Scale,
            KernelOp::Axpy(_) => OpTag::Axpy,
            KernelOp::Copy => OpTag::Copy,
            KernelOp::CopyIn(_) => OpTag::CopyIn,
            KernelOp::CopyOut(_) => OpTag::CopyOut,
            KernelOp::Gemm { .. } => OpTag::Gemm,
            KernelOp::Contract(_) => OpTag::Contract,
            KernelOp::Permute(_) => OpTag::Permute,
            KernelOp::ConjCopy => OpTag::Conj,
            KernelOp::Sum(_) => OpTag::Sum,
            KernelOp::Dot { .. } => OpTag::Dot,
            KernelOp::Norm2 => OpTag::Norm2,
            KernelOp::Potrf { .. } => OpTag::Potrf,
            KernelOp::Trsm { .. } => OpTag::Trsm,
            KernelOp::Syrk { .. } => OpTag::Syrk,
        }
    }
}
