//! The shared kernel library (SPEC §2.5): pure-Rust leaf kernels over
//! strided operands of the four float dtypes (f32, f64, c64, c128): GEMM and
//! tensor contraction, materialising permute and conj, reductions (sum, dot,
//! 2-norm) and the tile kernels of a tiled Cholesky (potrf, trsm, syrk). The
//! native backend runs them; the BLAS and device backends share their checks
//! and the BLAS call plan.
//!
//! These kernels know nothing about asynchrony: they run on resolved views
//! ([`operand::Operand`]) and either finish or return an error before or
//! after writing (they never *decline*; declining is for optional backends
//! such as the system BLAS).
//!
//! # Safety contract (every `unsafe fn` here)
//! For each operand, every element addressed by `ptr + sum(i_k * strides[k])`
//! (in elements of the operand's dtype, `0 <= i_k < extents[k]`) must be valid
//! for reads (inputs) or reads and writes (outputs), and properly aligned for
//! the dtype. `ptr` may be dangling when the operand has no elements. Output
//! operands must be exclusively accessed by the call: no other thread reads or
//! writes them meanwhile, and no output element is also an element of an
//! input operand. Inputs may overlap each other and may use zero strides.
//!
//! Errors name the operation (the error's origin) and the shapes involved,
//! e.g. `gemm: A is 3x4, B is 5x2: inner extents 4 and 5 differ`.
//!
//! GEMM runs on faer, chosen by measurement against OpenBLAS and
//! matrixmultiply (benches/gemm.rs; the numbers are in the performance notes).

pub(crate) mod blas_plan;
pub(crate) mod check;
pub(crate) mod contract;
pub(crate) mod copy;
pub(crate) mod faer_mat;
pub(crate) mod float;
pub(crate) mod gemm;
pub(crate) mod mat2;
pub(crate) mod operand;
pub(crate) mod par;
pub(crate) mod potrf;
pub(crate) mod reduce;
pub(crate) mod syrk;
pub(crate) mod trsm;

#[cfg(test)]
mod factor_tests;
#[cfg(test)]
pub(crate) mod test_util;
#[cfg(test)]
mod tests;
