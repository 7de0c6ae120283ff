//! Test helpers shared by the factorisation kernel tests: logical matrices
//! placed in memory (also transposed), well-conditioned inputs, comparisons.

use num_complex::Complex64 as C;
use rand::rngs::SmallRng;
use rand::Rng;

use crate::kernels::operand::Operand;
use crate::kernels::test_util::{complex, Lay, Placed, Tens, TestEl};

pub(super) const NAN: C = C::new(f64::NAN, 0.0);

pub(super) fn tens(r: usize, c: usize, mut f: impl FnMut(usize, usize) -> C) -> Tens {
    let mut v = Vec::with_capacity(r * c);
    for i in 0..r {
        for j in 0..c {
            v.push(f(i, j));
        }
    }
    Tens { ext: vec![r, c], v }
}

pub(super) fn tr(t: &Tens) -> Tens {
    tens(t.ext[1], t.ext[0], |i, j| t.at(&[j, i]))
}

/// `x` rounded to `T`.
pub(super) fn rnd<T: TestEl>(x: C) -> C {
    T::from_c(x).c()
}

pub(super) fn rand_c<T: TestEl>(rng: &mut SmallRng) -> C {
    let im = if complex::<T>() { rng.gen_range(-1.0..1.0) } else { 0.0 };
    rnd::<T>(C::new(rng.gen_range(-1.0..1.0), im))
}

pub(super) fn in_tri(i: usize, j: usize, lower: bool) -> bool {
    if lower {
        i >= j
    } else {
        i <= j
    }
}

/// A logical matrix placed in memory: stored with layout `lay`, either
/// as itself or (`trans`) as the transposed view of its stored transpose.
pub(super) struct View<T> {
    pub(super) p: Placed<T>,
    pub(super) trans: bool,
    pub(super) ext: [usize; 2],
    pub(super) st: [isize; 2],
}

impl<T: TestEl> View<T> {
    pub(super) fn new(m: &Tens, lay: Lay, trans: bool, rng: &mut SmallRng) -> Self {
        let ext = [m.ext[0], m.ext[1]];
        if trans {
            let p = Placed::<T>::new(&tr(m), lay, rng);
            let st = [p.strides[1], p.strides[0]];
            View { p, trans, ext, st }
        } else {
            let p = Placed::<T>::new(m, lay, rng);
            let st = [p.strides[0], p.strides[1]];
            View { p, trans, ext, st }
        }
    }

    /// Stored with explicit strides (any signs), not transposed.
    pub(super) fn with_strides(m: &Tens, strides: [isize; 2]) -> Self {
        let p = Placed::<T>::with_strides(m, &strides, T::from_c(C::new(777.0, 0.0)));
        View { p, trans: false, ext: [m.ext[0], m.ext[1]], st: strides }
    }

    pub(super) fn op(&mut self, conj: bool) -> Operand<'_> {
        Operand {
            // SAFETY: off is inside buf.
            ptr: unsafe { self.p.buf.as_mut_ptr().add(self.p.off) } as *mut u8,
            dtype: T::DTYPE,
            extents: &self.ext,
            strides: &self.st,
            conj,
        }
    }

    /// The logical matrix as stored now.
    pub(super) fn get(&self) -> Tens {
        let g = self.p.get();
        if self.trans {
            tr(&g)
        } else {
            g
        }
    }

    pub(super) fn raw(&self) -> Vec<C> {
        self.p.buf.iter().map(|x| x.c()).collect()
    }
}

/// Buffers equal, NaN matching NaN.
pub(super) fn same_bits(a: &[C], b: &[C]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            (x.re == y.re || (x.re.is_nan() && y.re.is_nan())) && (x.im == y.im || (x.im.is_nan() && y.im.is_nan()))
        })
}

pub(super) fn close(g: C, w: C, tol: f64) -> bool {
    (g - w).norm() <= tol * (1.0 + w.norm())
}

pub(super) fn layouts(rng: &mut SmallRng, n: usize) -> Vec<(Lay, bool)> {
    let mut v = vec![(Lay::ColMajor, false), (Lay::RowMajor, false), (Lay::ColMajor, true)];
    for _ in 0..n {
        v.push((Lay::Random, rng.gen_bool(0.5)));
    }
    v
}

/// A well-conditioned Hermitian positive definite matrix `G·G^H/n + I`,
/// exactly Hermitian in `T`.
pub(super) fn hpd<T: TestEl>(n: usize, rng: &mut SmallRng) -> Tens {
    let g = tens(n, n, |_, _| C::new(0.0, 0.0));
    let g = Tens { v: g.v.iter().map(|_| rand_c::<T>(rng)).collect(), ..g };
    let mut a = tens(n, n, |_, _| C::new(0.0, 0.0));
    for i in 0..n {
        for j in 0..=i {
            let mut s = C::new(0.0, 0.0);
            for l in 0..n {
                s += g.at(&[i, l]) * g.at(&[j, l]).conj();
            }
            let mut x = s / n.max(1) as f64;
            if i == j {
                x = C::new(x.re + 1.0, 0.0);
            }
            let x = rnd::<T>(x);
            a.v[i * n + j] = x;
            a.v[j * n + i] = x.conj();
        }
    }
    a
}

/// `a` with its strict `!lower` triangle replaced by NaN (must not be read).
pub(super) fn keep_tri(a: &Tens, lower: bool) -> Tens {
    tens(a.ext[0], a.ext[1], |i, j| if in_tri(i, j, lower) || i == j { a.at(&[i, j]) } else { NAN })
}

/// A well-conditioned triangular matrix (logical), NaN in the strict
/// other triangle, and NaN on the diagonal if `unit`; also the matrix the
/// solve uses (zeros off the triangle, ones on a unit diagonal).
pub(super) fn tri<T: TestEl>(k: usize, lower: bool, unit: bool, rng: &mut SmallRng) -> (Tens, Tens) {
    let mut stored = tens(k, k, |_, _| NAN);
    let mut used = tens(k, k, |_, _| C::new(0.0, 0.0));
    for i in 0..k {
        for j in 0..k {
            let (s, u) = if i == j {
                if unit {
                    (NAN, C::new(1.0, 0.0))
                } else {
                    let d = rand_c::<T>(rng);
                    let d = rnd::<T>(d / d.norm().max(0.1) * 2.0);
                    (d, d)
                }
            } else if in_tri(i, j, lower) {
                let x = rnd::<T>(rand_c::<T>(rng) / k as f64);
                (x, x)
            } else {
                (NAN, C::new(0.0, 0.0))
            };
            stored.v[i * k + j] = s;
            used.v[i * k + j] = u;
        }
    }
    (stored, used)
}

pub(super) fn matmul(a: &Tens, b: &Tens) -> Tens {
    let (m, k, n) = (a.ext[0], a.ext[1], b.ext[1]);
    tens(m, n, |i, j| (0..k).fold(C::new(0.0, 0.0), |s, l| s + a.at(&[i, l]) * b.at(&[l, j])))
}
