//! Tests of the shared kernels against independent naive references (plain
//! loops over logical indices in complex128 arithmetic), over non-square,
//! strided, column-major, transposed, negative-stride and conj operands.

mod contract;
mod copy;
mod gemm;
mod reduce;
