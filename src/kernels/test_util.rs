//! Test utilities of the kernel tests: element types with conversions to
//! complex128, logical tensors, tensors placed in memory with any strides,
//! and the naive references.

use num_complex::{Complex32, Complex64 as C};
use rand::rngs::SmallRng;
use rand::Rng;

use crate::dtype::{Element, Scalar};
use crate::error::{Result, Status};
use crate::kernels::float::Float;
use crate::kernels::operand::Operand;

/// An element type under test, with conversions to and from complex128 for
/// the references.
pub(crate) trait TestEl: Float {
    fn c(self) -> C;
    fn from_c(z: C) -> Self;
    /// Relative tolerance per accumulated term.
    const TOL: f64;
}
impl TestEl for f32 {
    fn c(self) -> C {
        C::new(self as f64, 0.0)
    }
    fn from_c(z: C) -> f32 {
        z.re as f32
    }
    const TOL: f64 = 2e-6;
}
impl TestEl for f64 {
    fn c(self) -> C {
        C::new(self, 0.0)
    }
    fn from_c(z: C) -> f64 {
        z.re
    }
    const TOL: f64 = 1e-14;
}
impl TestEl for Complex32 {
    fn c(self) -> C {
        C::new(self.re as f64, self.im as f64)
    }
    fn from_c(z: C) -> Complex32 {
        Complex32::new(z.re as f32, z.im as f32)
    }
    const TOL: f64 = 2e-6;
}
impl TestEl for C {
    fn c(self) -> C {
        self
    }
    fn from_c(z: C) -> C {
        z
    }
    const TOL: f64 = 1e-14;
}

pub(crate) fn complex<T: Element>() -> bool {
    T::DTYPE.is_complex()
}

/// A logical tensor (row-major values in complex128).
#[derive(Clone, Debug)]
pub(crate) struct Tens {
    pub ext: Vec<usize>,
    pub v: Vec<C>,
}

pub(crate) fn index_iter(ext: &[usize]) -> Vec<Vec<usize>> {
    let n: usize = ext.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; ext.len()];
    for _ in 0..n {
        out.push(idx.clone());
        for d in (0..ext.len()).rev() {
            idx[d] += 1;
            if idx[d] < ext[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

impl Tens {
    pub(crate) fn flat(&self, idx: &[usize]) -> usize {
        idx.iter().zip(&self.ext).fold(0, |a, (&i, &e)| a * e + i)
    }
    pub(crate) fn at(&self, idx: &[usize]) -> C {
        self.v[self.flat(idx)]
    }
    /// Random values representable in `T` (real for real dtypes).
    pub(crate) fn random<T: TestEl>(ext: &[usize], rng: &mut SmallRng) -> Tens {
        let n: usize = ext.iter().product();
        let v = (0..n)
            .map(|_| {
                let z = C::new(rng.gen_range(-1.0..1.0), if complex::<T>() { rng.gen_range(-1.0..1.0) } else { 0.0 });
                T::from_c(z).c()
            })
            .collect();
        Tens { ext: ext.to_vec(), v }
    }
    pub(crate) fn filled(ext: &[usize], x: C) -> Tens {
        Tens { ext: ext.to_vec(), v: vec![x; ext.iter().product()] }
    }
    pub(crate) fn conj(&self) -> Tens {
        Tens { ext: self.ext.clone(), v: self.v.iter().map(|z| z.conj()).collect() }
    }
}

/// How a tensor is placed in memory.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) enum Lay {
    RowMajor,
    ColMajor,
    /// Random axis order, padding and negative strides.
    Random,
}

/// A tensor's elements placed in a buffer with some strides.
pub(crate) struct Placed<T> {
    pub buf: Vec<T>,
    pub off: usize,
    pub ext: Vec<usize>,
    pub strides: Vec<isize>,
}

impl<T: TestEl> Placed<T> {
    pub(crate) fn with_strides(t: &Tens, strides: &[isize], fill: T) -> Placed<T> {
        let mut lo = 0isize;
        let mut hi = 0isize;
        for (&e, &s) in t.ext.iter().zip(strides) {
            if e == 0 {
                continue;
            }
            let r = s * (e as isize - 1);
            if r < 0 {
                lo += r
            } else {
                hi += r
            }
        }
        let off = (-lo) as usize;
        let len = (hi - lo + 1) as usize + 3;
        let mut p = Placed { buf: vec![fill; len], off, ext: t.ext.clone(), strides: strides.to_vec() };
        if t.ext.iter().all(|&e| e > 0) {
            for idx in index_iter(&t.ext) {
                let o = p.offset(&idx);
                p.buf[o] = T::from_c(t.at(&idx));
            }
        }
        p
    }

    pub(crate) fn new(t: &Tens, lay: Lay, rng: &mut SmallRng) -> Placed<T> {
        let r = t.ext.len();
        let mut order: Vec<usize> = (0..r).collect(); // innermost first
        let mut pad = vec![0usize; r];
        let mut neg = vec![false; r];
        match lay {
            Lay::RowMajor => order.reverse(),
            Lay::ColMajor => {}
            Lay::Random => {
                for i in (1..r).rev() {
                    order.swap(i, rng.gen_range(0..=i));
                }
                for i in 0..r {
                    pad[i] = if rng.gen_bool(0.3) { rng.gen_range(1..3) } else { 0 };
                    neg[i] = rng.gen_bool(0.25);
                }
            }
        }
        let mut strides = vec![0isize; r];
        let mut step = 1isize;
        for &ax in &order {
            strides[ax] = if neg[ax] { -step } else { step };
            step *= (t.ext[ax] + pad[ax]).max(1) as isize;
        }
        // A NaN-free but conspicuous filler for gaps.
        Placed::with_strides(t, &strides, T::from_c(C::new(777.0, 0.0)))
    }

    fn offset(&self, idx: &[usize]) -> usize {
        (self.off as isize + idx.iter().zip(&self.strides).map(|(&i, &s)| i as isize * s).sum::<isize>()) as usize
    }

    pub(crate) fn op(&mut self, conj: bool) -> Operand<'_> {
        Operand {
            // SAFETY: off is inside buf.
            ptr: unsafe { self.buf.as_mut_ptr().add(self.off) } as *mut u8,
            dtype: T::DTYPE,
            extents: &self.ext,
            strides: &self.strides,
            conj,
        }
    }

    pub(crate) fn get(&self) -> Tens {
        let v = if self.ext.iter().all(|&e| e > 0) {
            index_iter(&self.ext).iter().map(|idx| self.buf[self.offset(idx)].c()).collect()
        } else {
            vec![]
        };
        Tens { ext: self.ext.clone(), v }
    }

    /// Elements of the buffer outside the tensor (must be untouched).
    pub(crate) fn gaps(&self) -> Vec<(usize, C)> {
        let mut inside = vec![false; self.buf.len()];
        if self.ext.iter().all(|&e| e > 0) {
            for idx in index_iter(&self.ext) {
                inside[self.offset(&idx)] = true;
            }
        }
        (0..self.buf.len()).filter(|&i| !inside[i]).map(|i| (i, self.buf[i].c())).collect()
    }
}

pub(crate) fn assert_close(got: &Tens, want: &Tens, tol: f64, what: &str) {
    assert_eq!(got.ext, want.ext, "{what}: extents");
    for (i, (g, w)) in got.v.iter().zip(&want.v).enumerate() {
        let err = (g - w).norm();
        assert!(err <= tol * (1.0 + w.norm()), "{what}: element {i}: got {g}, want {w} (err {err:e}, tol {tol:e})");
    }
}

pub(crate) fn rand_scalar<T: TestEl>(rng: &mut SmallRng) -> Scalar {
    let re = rng.gen_range(-2.0..2.0);
    let im = if complex::<T>() { rng.gen_range(-2.0..2.0) } else { 0.0 };
    let z = T::from_c(C::new(re, im)).c();
    Scalar::complex(z.re, z.im)
}

pub(crate) fn sc(s: Scalar) -> C {
    C::new(s.re, s.im)
}

pub(crate) fn lay(rng: &mut SmallRng) -> Lay {
    [Lay::RowMajor, Lay::ColMajor, Lay::Random, Lay::Random][rng.gen_range(0..4)]
}

/// Reference `alpha*op(A)*op(B) + beta*C0`.
pub(crate) fn ref_gemm(alpha: C, a: &Tens, b: &Tens, beta: Option<C>, c0: &Tens) -> Tens {
    let (m, k, n) = (a.ext[0], a.ext[1], b.ext[1]);
    let mut v = vec![C::new(0.0, 0.0); m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = C::new(0.0, 0.0);
            for l in 0..k {
                s += a.at(&[i, l]) * b.at(&[l, j]);
            }
            let mut r = alpha * s;
            if let Some(bt) = beta {
                if bt != C::new(0.0, 0.0) {
                    r += bt * c0.at(&[i, j]);
                }
            }
            v[i * n + j] = r;
        }
    }
    Tens { ext: vec![m, n], v }
}

pub(crate) fn status_and_msg(r: Result<()>) -> (Status, String) {
    let e = r.unwrap_err();
    (e.status(), e.message().to_string())
}
