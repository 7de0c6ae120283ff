//! Tests of the factorisation tile kernels (potrf, trsm, syrk): each kernel
//! and dtype against independent naive references (plain loops in
//! complex128): reconstruct `L·L^H`, multiply the solution back, recompute
//! the rank-k update; over non-square, strided (padded and negative-stride
//! sub-matrices of larger buffers), row- and column-major, transposed and
//! conj operands, with NaN wherever an element must not be read and checks
//! that nothing outside the output triangle is written.

mod common;
mod potrf;
mod syrk;
mod tiles;
mod trsm;
