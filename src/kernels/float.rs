//! The float element types the kernels are generic over (f32, f64, c64,
//! c128), and the dispatch from a dtype to one of them.

use std::ops::{Add, AddAssign, Div, Mul, Neg, Sub};

use num_complex::{Complex32, Complex64};

use crate::dtype::{Element, Scalar};

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

/// Scalar conversion for a float element type.
pub(crate) fn scalar<T: Float>(s: Scalar) -> T {
    T::from_scalar(s)
}
