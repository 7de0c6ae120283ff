//! Dense leaf kernels of the native CPU backend (SPEC §2.5): GEMM, tensor
//! contraction, materialising permute and conj, and reductions (sum, dot,
//! 2-norm) over strided operands of the four float dtypes (f32, f64, c64,
//! c128).
//!
//! These kernels know nothing about asynchrony: they run on resolved views
//! ([`Operand`]) and either finish or return an error before or after writing
//! (they never *decline*; declining is for optional backends such as
//! [`super::blas`]).
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
//! # GEMM kernel choice
//! faer 0.24 (`faer::linalg::matmul`), chosen by measurement (benches/gemm.rs;
//! the numbers at n=2048, f64, 2 threads: faer 99-103 GF/s, OpenBLAS
//! 0.3.21 96-99 GF/s, matrixmultiply 72-77 GF/s). See [`gemm`] for the
//! parallelism policy.

mod copy;
mod gemm;
mod linalg;
mod reduce;
#[cfg(test)]
pub(crate) mod tests;

use std::ops::{Add, AddAssign, Div, Mul, Neg, Sub};

use num_complex::{Complex32, Complex64};

use crate::dtype::{DType, Element, Scalar};
use crate::error::{Error, Result, Status};
use crate::resolved::ResolvedView;

pub(crate) use copy::{conj_copy, permute_copy};
pub(crate) use gemm::{contract, gemm, gemm_check, Mat2};
// For benches/gemm.rs (parallelism threshold sweeps).
#[allow(unused_imports)]
pub(crate) use gemm::{par_for, work, PAR_MIN_FLOPS};
// For benches/gemm.rs (threshold sweeps).
#[allow(unused_imports)]
pub(crate) use gemm::{gemm_mat, gemm_small, SMALL_MAX_FLOPS};
pub(crate) use linalg::{potrf, syrk, trsm};
pub(crate) use reduce::{dot, norm2, sum};

/// A strided operand: the kernels' view of a [`ResolvedView`] (or of any
/// strided host memory).
#[derive(Copy, Clone, Debug)]
pub(crate) struct Operand<'a> {
    /// Address of element `[0, 0, ...]`.
    pub ptr: *mut u8,
    pub dtype: DType,
    pub extents: &'a [usize],
    /// Strides in elements (possibly negative or zero).
    pub strides: &'a [isize],
    /// Read conjugated (complex dtypes only; ignored for real dtypes). An
    /// output operand must not be conjugated.
    pub conj: bool,
}

impl<'a> From<&'a ResolvedView<'a>> for Operand<'a> {
    fn from(v: &'a ResolvedView<'a>) -> Operand<'a> {
        Operand {
            ptr: v.ptr,
            dtype: v.dtype,
            extents: v.extents,
            strides: v.strides,
            conj: v.conj && v.dtype.is_complex(),
        }
    }
}

impl<'a> Operand<'a> {
    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        self.extents.iter().product()
    }

    /// Whether reads must conjugate.
    pub(crate) fn conjugated(&self) -> bool {
        self.conj && self.dtype.is_complex()
    }
}

/// Call `$body` with `$T` bound to the Rust type of a float dtype (f32, f64,
/// c64, c128); evaluate `$other` for any other dtype.
macro_rules! with_float {
    ($dtype:expr, $T:ident => $body:expr, $other:expr) => {{
        match $dtype {
            $crate::dtype::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::dtype::DType::F64 => {
                type $T = f64;
                $body
            }
            $crate::dtype::DType::C64 => {
                type $T = num_complex::Complex32;
                $body
            }
            $crate::dtype::DType::C128 => {
                type $T = num_complex::Complex64;
                $body
            }
            _ => $other,
        }
    }};
}
pub(crate) use with_float;

/// The float element types the dense kernels are generic over.
pub(crate) trait Float:
    Element
    + faer::traits::ComplexField
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Neg<Output = Self>
    + AddAssign
{
    /// The real counterpart (itself for real types).
    type Re: RealFloat;
    /// Real part.
    fn re_part(self) -> Self::Re;
    /// Imaginary part (zero for real types).
    fn im_part(self) -> Self::Re;
    /// `|x|^2`.
    fn abs_sq(self) -> Self::Re {
        let (r, i) = (self.re_part(), self.im_part());
        r * r + i * i
    }
    /// Largest absolute value of the real and imaginary parts.
    fn max_part(self) -> Self::Re;
}

/// f32 and f64.
pub(crate) trait RealFloat: Float<Re = Self> + PartialOrd + Div<Output = Self> {
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
    fn sqrt_(self) -> Self;
    fn is_finite_(self) -> bool;
    fn is_nan_(self) -> bool;
    /// Smallest positive normal number.
    const MIN_NORMAL: Self;
    /// Machine epsilon.
    const EPS: Self;
}

macro_rules! real_float {
    ($t:ty) => {
        impl Float for $t {
            type Re = $t;
            fn re_part(self) -> $t {
                self
            }
            fn im_part(self) -> $t {
                0.0
            }
            fn abs_sq(self) -> $t {
                self * self
            }
            fn max_part(self) -> $t {
                self.abs()
            }
        }
        impl RealFloat for $t {
            fn from_f64(x: f64) -> $t {
                x as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn sqrt_(self) -> $t {
                self.sqrt()
            }
            fn is_finite_(self) -> bool {
                self.is_finite()
            }
            fn is_nan_(self) -> bool {
                self.is_nan()
            }
            const MIN_NORMAL: $t = <$t>::MIN_POSITIVE;
            const EPS: $t = <$t>::EPSILON;
        }
    };
}
real_float!(f32);
real_float!(f64);

macro_rules! complex_float {
    ($t:ty, $r:ty) => {
        impl Float for $t {
            type Re = $r;
            fn re_part(self) -> $r {
                self.re
            }
            fn im_part(self) -> $r {
                self.im
            }
            fn max_part(self) -> $r {
                self.re.abs().max(self.im.abs())
            }
        }
    };
}
complex_float!(Complex32, f32);
complex_float!(Complex64, f64);

/// `3x4`, `5` (1-d) or `scalar` (0-d): how error messages name a shape.
pub(crate) fn dims(ext: &[usize]) -> String {
    if ext.is_empty() {
        return "a scalar (0-d)".to_string();
    }
    let s: Vec<String> = ext.iter().map(|e| e.to_string()).collect();
    s.join("x")
}

pub(crate) fn shape_err(origin: &'static str, msg: String) -> Error {
    Error::new(Status::ShapeMismatch, origin, msg)
}

fn arg_err(origin: &'static str, msg: String) -> Error {
    Error::new(Status::InvalidArgument, origin, msg)
}

/// Check that `dtypes` (named operands) agree and are float dtypes.
pub(crate) fn check_dtypes(origin: &'static str, ops: &[(&str, DType)]) -> Result<DType> {
    let (n0, d0) = ops[0];
    for &(n, d) in &ops[1..] {
        if d != d0 {
            return Err(Error::new(
                Status::DtypeMismatch,
                origin,
                format!("{n0} is {} but {n} is {}", d0.name(), d.name()),
            ));
        }
    }
    if !d0.is_float() {
        return Err(Error::new(
            Status::Unsupported,
            origin,
            format!("dtype {} is not supported (only f32, f64, c64, c128)", d0.name()),
        ));
    }
    Ok(d0)
}

/// Check that an operand's extents and strides agree in rank.
pub(crate) fn check_rank(origin: &'static str, name: &str, x: &Operand<'_>) -> Result<()> {
    if x.extents.len() != x.strides.len() {
        return Err(arg_err(origin, format!("{name} has {} extents but {} strides", x.extents.len(), x.strides.len())));
    }
    Ok(())
}

/// Check that an output operand is writable: not a conj view, and no two
/// indices address the same element.
pub(crate) fn check_output(origin: &'static str, name: &str, x: &Operand<'_>) -> Result<()> {
    check_rank(origin, name, x)?;
    if x.conjugated() {
        return Err(Error::new(Status::ReadOnly, origin, format!("output {name} is a conjugated (read-only) view")));
    }
    if !crate::layout::non_overlapping(x.extents, x.strides) {
        return Err(arg_err(
            origin,
            format!("output {name} ({}, strides {:?}) addresses some elements twice", dims(x.extents), x.strides),
        ));
    }
    Ok(())
}

/// Output extents of `A·B` for 2-d `A` and `B`.
pub(crate) fn gemm_shape(a_ext: &[usize], b_ext: &[usize]) -> Result<[usize; 2]> {
    if a_ext.len() != 2 || b_ext.len() != 2 {
        return Err(shape_err("gemm", format!("A is {}, B is {}: both must be 2-d", dims(a_ext), dims(b_ext))));
    }
    if a_ext[1] != b_ext[0] {
        return Err(shape_err(
            "gemm",
            format!("A is {}, B is {}: inner extents {} and {} differ", dims(a_ext), dims(b_ext), a_ext[1], b_ext[0]),
        ));
    }
    Ok([a_ext[0], b_ext[1]])
}

/// Check a list of axes of a rank-`rank` operand: in range and distinct.
fn check_axes(origin: &'static str, name: &str, rank: usize, ext: &[usize], axes: &[usize]) -> Result<()> {
    let mut seen = vec![false; rank];
    for &ax in axes {
        if ax >= rank {
            return Err(arg_err(
                origin,
                format!("axis {ax} of {name} is out of range: {name} is {} (rank {rank})", dims(ext)),
            ));
        }
        if seen[ax] {
            return Err(arg_err(origin, format!("axis {ax} of {name} ({}) is repeated in {axes:?}", dims(ext))));
        }
        seen[ax] = true;
    }
    Ok(())
}

/// Output extents of the contraction of `A` and `B` over the axis pairs
/// `(a_axes[i], b_axes[i])`: `A`'s free axes in order, then `B`'s.
pub(crate) fn contract_shape(
    a_ext: &[usize],
    b_ext: &[usize],
    a_axes: &[usize],
    b_axes: &[usize],
) -> Result<Vec<usize>> {
    const O: &str = "contract";
    if a_axes.len() != b_axes.len() {
        return Err(arg_err(
            O,
            format!("{} axes of A {a_axes:?} but {} axes of B {b_axes:?} (they pair up)", a_axes.len(), b_axes.len()),
        ));
    }
    check_axes(O, "A", a_ext.len(), a_ext, a_axes)?;
    check_axes(O, "B", b_ext.len(), b_ext, b_axes)?;
    for (&i, &j) in a_axes.iter().zip(b_axes) {
        if a_ext[i] != b_ext[j] {
            return Err(shape_err(
                O,
                format!(
                    "A is {}, B is {}: contracted axis {i} of A has extent {} but axis {j} of B has {}",
                    dims(a_ext),
                    dims(b_ext),
                    a_ext[i],
                    b_ext[j]
                ),
            ));
        }
    }
    let mut out: Vec<usize> = (0..a_ext.len()).filter(|i| !a_axes.contains(i)).map(|i| a_ext[i]).collect();
    out.extend((0..b_ext.len()).filter(|j| !b_axes.contains(j)).map(|j| b_ext[j]));
    Ok(out)
}

/// Output extents of a sum over `axes` (`None`: every element, a 0-d result).
pub(crate) fn sum_shape(x_ext: &[usize], axes: Option<&[usize]>) -> Result<Vec<usize>> {
    match axes {
        None => Ok(Vec::new()),
        Some(axes) => {
            check_axes("sum", "x", x_ext.len(), x_ext, axes)?;
            Ok((0..x_ext.len()).filter(|i| !axes.contains(i)).map(|i| x_ext[i]).collect())
        }
    }
}

/// A vector of `len` copies of `x`, or an out-of-memory error.
pub(crate) fn try_vec<T: Clone>(origin: &'static str, len: usize, x: T) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        Error::new(Status::OutOfMemory, origin, format!("cannot allocate a temporary of {len} elements"))
    })?;
    v.resize(len, x);
    Ok(v)
}

/// Scalar conversion for a float element type.
pub(crate) fn scalar<T: Float>(s: Scalar) -> T {
    T::from_scalar(s)
}
