//! Element types and immediate scalars.

use num_complex::{Complex32, Complex64};

use crate::error::{Error, Result, Status};

/// The element type of a tensor. Complex types use the num-complex layout,
/// which equals C99 `float complex` / `double complex`.
#[repr(u32)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32 = 1,
    F64 = 2,
    C64 = 3,
    C128 = 4,
    I8 = 10,
    I16 = 11,
    I32 = 12,
    I64 = 13,
    U8 = 14,
    U16 = 15,
    U32 = 16,
    U64 = 17,
}

impl DType {
    /// Every dtype.
    ///
    /// ```
    /// assert_eq!(tensorasync::DType::ALL.len(), 12);
    /// ```
    pub const ALL: &'static [DType] = &[
        DType::F32,
        DType::F64,
        DType::C64,
        DType::C128,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
    ];

    /// The dtype with this numeric value, if any.
    ///
    /// ```
    /// use tensorasync::DType;
    /// assert_eq!(DType::from_u32(DType::F64 as u32), Some(DType::F64));
    /// assert_eq!(DType::from_u32(99), None);
    /// ```
    #[inline]
    pub fn from_u32(v: u32) -> Option<DType> {
        // A match, not a search of `ALL`: tensors store their dtype as this
        // code and decode it on every submission (see `Value::dtype`).
        Some(match v {
            1 => DType::F32,
            2 => DType::F64,
            3 => DType::C64,
            4 => DType::C128,
            10 => DType::I8,
            11 => DType::I16,
            12 => DType::I32,
            13 => DType::I64,
            14 => DType::U8,
            15 => DType::U16,
            16 => DType::U32,
            17 => DType::U64,
            _ => return None,
        })
    }

    /// Bytes per element.
    ///
    /// ```
    /// assert_eq!(tensorasync::DType::C64.size(), 8);
    /// ```
    pub fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 => 1,
            DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::C64 | DType::I64 | DType::U64 => 8,
            DType::C128 => 16,
        }
    }

    /// Alignment of one element.
    ///
    /// ```
    /// assert_eq!(tensorasync::DType::C128.align(), 8);
    /// ```
    pub fn align(self) -> usize {
        match self {
            DType::C64 => 4,
            DType::C128 => 8,
            d => d.size(),
        }
    }

    /// Whether the dtype is complex (conjugation is then not the identity).
    ///
    /// ```
    /// assert!(tensorasync::DType::C64.is_complex() && !tensorasync::DType::F64.is_complex());
    /// ```
    pub fn is_complex(self) -> bool {
        matches!(self, DType::C64 | DType::C128)
    }

    /// Whether the dtype is a floating-point or complex type.
    ///
    /// ```
    /// assert!(tensorasync::DType::C64.is_float() && !tensorasync::DType::I32.is_float());
    /// ```
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::C64 | DType::C128)
    }

    /// Short lower-case name (`"f64"`, `"c128"`, ...).
    ///
    /// ```
    /// assert_eq!(tensorasync::DType::C128.name(), "c128");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::C64 => "c64",
            DType::C128 => "c128",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
        }
    }
}

/// An immediate scalar operand (alpha, beta, fill values). Real dtypes require
/// `im == 0`; integer dtypes require an integral `re` that the dtype holds
/// exactly. A double cannot name every 64-bit integer: [`Imm::int`] carries
/// one exactly (for fill and scale).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Scalar {
    pub re: f64,
    pub im: f64,
}

impl Scalar {
    /// A real scalar.
    /// ```
    /// assert_eq!(tensorasync::Scalar::real(2.0).im, 0.0);
    /// ```
    pub const fn real(re: f64) -> Self {
        Scalar { re, im: 0.0 }
    }
    /// A complex scalar.
    /// ```
    /// let z = tensorasync::Scalar::complex(1.0, -1.0);
    /// assert_eq!((z.re, z.im), (1.0, -1.0));
    /// ```
    pub const fn complex(re: f64, im: f64) -> Self {
        Scalar { re, im }
    }

    /// The integer this scalar names, if it is integral (every integral
    /// double of magnitude below 2^64 converts exactly).
    fn integer(self) -> Option<i128> {
        (self.im == 0.0 && self.re.fract() == 0.0 && self.re.abs() < 2f64.powi(64)).then_some(self.re as i128)
    }

    /// Check that this scalar is representable in `dtype` (submission-time check).
    ///
    /// ```
    /// use tensorasync::{DType, Scalar};
    /// assert!(Scalar::complex(1.0, 1.0).check_for(DType::C64, "example").is_ok());
    /// assert!(Scalar::complex(1.0, 1.0).check_for(DType::F64, "example").is_err());
    /// ```
    #[inline]
    pub fn check_for(self, dtype: DType, origin: &'static str) -> Result<()> {
        let ok = match dtype {
            DType::C64 | DType::C128 => true,
            DType::F32 | DType::F64 => self.im == 0.0,
            _ => {
                let (lo, hi) = int_range(dtype);
                self.integer().is_some_and(|v| lo <= v && v <= hi)
            }
        };
        if ok {
            Ok(())
        } else {
            Err(self.not_representable(dtype, origin))
        }
    }

    #[cold]
    fn not_representable(self, dtype: DType, origin: &'static str) -> Error {
        Error::new(
            Status::InvalidArgument,
            origin,
            format!("scalar {}{:+}i is not representable as {}", self.re, self.im, dtype.name()),
        )
    }
}

/// The values an integer dtype holds.
fn int_range(dtype: DType) -> (i128, i128) {
    match dtype {
        DType::I8 => (i8::MIN as i128, i8::MAX as i128),
        DType::I16 => (i16::MIN as i128, i16::MAX as i128),
        DType::I32 => (i32::MIN as i128, i32::MAX as i128),
        DType::I64 => (i64::MIN as i128, i64::MAX as i128),
        DType::U8 => (0, u8::MAX as i128),
        DType::U16 => (0, u16::MAX as i128),
        DType::U32 => (0, u32::MAX as i128),
        DType::U64 => (0, u64::MAX as i128),
        _ => (i128::MIN, i128::MAX),
    }
}

/// An exact 64-bit integer: its bits, and whether they are read as signed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct ExactInt {
    bits: u64,
    signed: bool,
}

impl ExactInt {
    fn value(self) -> i128 {
        if self.signed {
            self.bits as i64 as i128
        } else {
            self.bits as i128
        }
    }
}

/// The immediate value of a fill or a scale: a [`Scalar`], or an exact
/// 64-bit integer ([`Imm::int`]), which an integer dtype takes exactly and a
/// floating-point or complex dtype as its nearest value.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Imm {
    scalar: Scalar,
    int: Option<ExactInt>,
}

impl From<Scalar> for Imm {
    fn from(scalar: Scalar) -> Imm {
        Imm { scalar, int: None }
    }
}

impl Imm {
    /// An exact signed 64-bit integer.
    ///
    /// ```
    /// use tensorasync::{DType, Imm};
    /// assert!(Imm::int(-1).check_for(DType::I8, "example").is_ok());
    /// ```
    pub fn int(v: i64) -> Imm {
        Imm { scalar: Scalar::real(v as f64), int: Some(ExactInt { bits: v as u64, signed: true }) }
    }
    /// An exact unsigned 64-bit integer.
    ///
    /// ```
    /// use tensorasync::{DType, Imm};
    /// assert!(Imm::uint(256).check_for(DType::U8, "example").is_err());
    /// ```
    pub fn uint(v: u64) -> Imm {
        Imm { scalar: Scalar::real(v as f64), int: Some(ExactInt { bits: v, signed: false }) }
    }
    /// The value as a scalar (nearest, for an exact integer).
    ///
    /// ```
    /// use tensorasync::{Imm, Scalar};
    /// assert_eq!(Imm::int(3).scalar(), Scalar::real(3.0));
    /// ```
    pub fn scalar(self) -> Scalar {
        self.scalar
    }
    /// The operation's name for this kind of value: an error from a fill
    /// with an exact integer names the C function that took it
    /// (`ta_fill_i64`).
    ///
    /// ```
    /// use tensorasync::{Imm, Scalar};
    /// assert_eq!(Imm::from(Scalar::real(1.0)).origin_for("fill", "fill_i64", "fill_u64"), "fill");
    /// assert_eq!(Imm::int(-1).origin_for("fill", "fill_i64", "fill_u64"), "fill_i64");
    /// assert_eq!(Imm::uint(1).origin_for("fill", "fill_i64", "fill_u64"), "fill_u64");
    /// ```
    pub fn origin_for(self, scalar: &'static str, signed: &'static str, unsigned: &'static str) -> &'static str {
        match self.int {
            None => scalar,
            Some(ExactInt { signed: true, .. }) => signed,
            Some(ExactInt { signed: false, .. }) => unsigned,
        }
    }
    /// The value's 64-bit pattern for an integer dtype (checked by
    /// [`Imm::check_for`]; the element type truncates it to its width).
    fn int_bits(self) -> Option<u64> {
        self.int.map(|i| i.bits)
    }
    /// Check that the value is representable in `dtype`.
    ///
    /// ```
    /// use tensorasync::{DType, Imm, Status};
    /// let e = Imm::int(-1).check_for(DType::U32, "example").unwrap_err();
    /// assert_eq!(e.status(), Status::InvalidArgument);
    /// ```
    pub fn check_for(self, dtype: DType, origin: &'static str) -> Result<()> {
        match self.int {
            None => self.scalar.check_for(dtype, origin),
            Some(i) if !dtype.is_float() => {
                let (lo, hi) = int_range(dtype);
                let v = i.value();
                if lo <= v && v <= hi {
                    Ok(())
                } else {
                    Err(Error::new(
                        Status::InvalidArgument,
                        origin,
                        format!("integer {v} is not representable as {}", dtype.name()),
                    ))
                }
            }
            Some(_) => Ok(()),
        }
    }
}

/// A Rust element type with a runtime dtype tag. Arithmetic used by the native
/// kernels is defined here so that every dtype goes through one generic path.
pub trait Element: Copy + Send + Sync + 'static + PartialEq + std::fmt::Debug {
    const DTYPE: DType;
    /// Convert a checked scalar (see [`Scalar::check_for`]).
    ///
    /// ```
    /// use tensorasync::{Element, Scalar};
    /// assert_eq!(<i32 as Element>::from_scalar(Scalar::real(7.0)), 7);
    /// ```
    fn from_scalar(s: Scalar) -> Self;
    /// Convert a checked immediate (see [`Imm::check_for`]).
    ///
    /// ```
    /// use tensorasync::{Element, Imm};
    /// assert_eq!(<u64 as Element>::from_imm(Imm::uint(u64::MAX)), u64::MAX);
    /// ```
    fn from_imm(v: Imm) -> Self {
        Self::from_scalar(v.scalar)
    }
    /// The additive identity.
    /// ```
    /// assert_eq!(<f32 as tensorasync::Element>::zero(), 0.0);
    /// ```
    fn zero() -> Self;
    /// The product (wrapping for integers).
    /// ```
    /// assert_eq!(tensorasync::Element::mul(3i64, 4), 12);
    /// ```
    fn mul(self, other: Self) -> Self;
    /// The sum (wrapping for integers).
    /// ```
    /// assert_eq!(tensorasync::Element::add(250u8, 10), 4);
    /// ```
    fn add(self, other: Self) -> Self;
    /// Complex conjugate (identity for real types).
    ///
    /// ```
    /// use num_complex::Complex32;
    /// assert_eq!(tensorasync::Element::conj(Complex32::new(1.0, 2.0)), Complex32::new(1.0, -2.0));
    /// ```
    fn conj(self) -> Self;
}

macro_rules! real_element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DTYPE: DType = $d;
            fn from_scalar(s: Scalar) -> Self {
                s.re as $t
            }
            fn zero() -> Self {
                0 as $t
            }
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn add(self, o: Self) -> Self {
                self + o
            }
            fn conj(self) -> Self {
                self
            }
        }
    };
}

macro_rules! int_element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DTYPE: DType = $d;
            fn from_scalar(s: Scalar) -> Self {
                // Exact for every checked (integral, in range) value.
                s.re as $t
            }
            fn from_imm(v: Imm) -> Self {
                // Truncating the checked value's 64-bit pattern keeps it exact.
                match v.int_bits() {
                    Some(bits) => bits as $t,
                    None => Self::from_scalar(v.scalar),
                }
            }
            fn zero() -> Self {
                0
            }
            // Integer arithmetic wraps, like C unsigned arithmetic: a kernel never panics.
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn conj(self) -> Self {
                self
            }
        }
    };
}

real_element!(f32, DType::F32);
real_element!(f64, DType::F64);
int_element!(i8, DType::I8);
int_element!(i16, DType::I16);
int_element!(i32, DType::I32);
int_element!(i64, DType::I64);
int_element!(u8, DType::U8);
int_element!(u16, DType::U16);
int_element!(u32, DType::U32);
int_element!(u64, DType::U64);

impl Element for Complex32 {
    const DTYPE: DType = DType::C64;
    fn from_scalar(s: Scalar) -> Self {
        Complex32::new(s.re as f32, s.im as f32)
    }
    fn zero() -> Self {
        Complex32::new(0.0, 0.0)
    }
    fn mul(self, o: Self) -> Self {
        self * o
    }
    fn add(self, o: Self) -> Self {
        self + o
    }
    fn conj(self) -> Self {
        Complex32::conj(&self)
    }
}

impl Element for Complex64 {
    const DTYPE: DType = DType::C128;
    fn from_scalar(s: Scalar) -> Self {
        Complex64::new(s.re, s.im)
    }
    fn zero() -> Self {
        Complex64::new(0.0, 0.0)
    }
    fn mul(self, o: Self) -> Self {
        self * o
    }
    fn add(self, o: Self) -> Self {
        self + o
    }
    fn conj(self) -> Self {
        Complex64::conj(&self)
    }
}

/// Call `$body` with `$T` bound to the Rust element type of `$dtype`.
macro_rules! with_element_type {
    ($dtype:expr, $T:ident => $body:expr) => {{
        use $crate::dtype::DType;
        match $dtype {
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            DType::C64 => {
                type $T = num_complex::Complex32;
                $body
            }
            DType::C128 => {
                type $T = num_complex::Complex64;
                $body
            }
            DType::I8 => {
                type $T = i8;
                $body
            }
            DType::I16 => {
                type $T = i16;
                $body
            }
            DType::I32 => {
                type $T = i32;
                $body
            }
            DType::I64 => {
                type $T = i64;
                $body
            }
            DType::U8 => {
                type $T = u8;
                $body
            }
            DType::U16 => {
                type $T = u16;
                $body
            }
            DType::U32 => {
                type $T = u32;
                $body
            }
            DType::U64 => {
                type $T = u64;
                $body
            }
        }
    }};
}
pub(crate) use with_element_type;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_checks() {
        assert!(Scalar::real(3.0).check_for(DType::I32, "t").is_ok());
        assert_eq!(Scalar::real(3.5).check_for(DType::I32, "t").unwrap_err().status(), Status::InvalidArgument);
        assert_eq!(Scalar::real(-1.0).check_for(DType::U8, "t").unwrap_err().status(), Status::InvalidArgument);
        assert_eq!(Scalar::complex(1.0, 1.0).check_for(DType::F64, "t").unwrap_err().status(), Status::InvalidArgument);
        assert!(Scalar::complex(1.0, 1.0).check_for(DType::C64, "t").is_ok());
        // Every integral value a 64-bit dtype holds, exactly.
        for v in [2f64.powi(60), -(2f64.powi(53) + 2.0), -(2f64.powi(63)), 2f64.powi(63) - 1024.0] {
            assert!(Scalar::real(v).check_for(DType::I64, "t").is_ok(), "{v}");
            assert_eq!(<i64 as Element>::from_scalar(Scalar::real(v)) as f64, v);
        }
        assert_eq!(<i64 as Element>::from_scalar(Scalar::real(-(2f64.powi(63)))), i64::MIN);
        assert_eq!(<u64 as Element>::from_scalar(Scalar::real(2f64.powi(64) - 2048.0)), u64::MAX - 2047);
        for (v, d) in [(2f64.powi(63), DType::I64), (2f64.powi(64), DType::U64), (-1.0, DType::U64), (0.5, DType::I64)]
        {
            assert_eq!(Scalar::real(v).check_for(d, "t").unwrap_err().status(), Status::InvalidArgument, "{v}");
        }
        for v in [i64::MIN, i64::MAX, (1 << 53) + 1] {
            assert!(Imm::int(v).check_for(DType::I64, "t").is_ok());
            assert_eq!(<i64 as Element>::from_imm(Imm::int(v)), v);
        }
        assert_eq!(<u64 as Element>::from_imm(Imm::uint(u64::MAX)), u64::MAX);
        assert_eq!(<i8 as Element>::from_imm(Imm::int(-128)), -128);
        assert!(Imm::uint(u64::MAX).check_for(DType::I64, "t").is_err());
        assert!(Imm::int(-1).check_for(DType::U64, "t").is_err());
        assert!(Imm::int(128).check_for(DType::I8, "t").is_err());
        assert_eq!(<f64 as Element>::from_imm(Imm::int((1 << 60) + 1)), 2f64.powi(60));
    }

    #[test]
    fn codes_round_trip() {
        for &d in DType::ALL {
            assert_eq!(DType::from_u32(d as u32), Some(d));
        }
        let codes: Vec<u32> = DType::ALL.iter().map(|d| *d as u32).collect();
        for v in 0..64 {
            assert_eq!(DType::from_u32(v).is_some(), codes.contains(&v), "code {v}");
        }
    }

    #[test]
    fn sizes_match_rust_types() {
        assert_eq!(DType::C64.size(), std::mem::size_of::<Complex32>());
        assert_eq!(DType::C128.size(), std::mem::size_of::<Complex64>());
        assert_eq!(DType::C128.align(), std::mem::align_of::<Complex64>());
    }
}
