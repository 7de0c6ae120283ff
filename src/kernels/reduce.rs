//! Reductions: sum (all elements or given axes), dot (conjugating or not) and
//! the Euclidean norm, with pairwise summation: the elements are visited in a
//! fixed order given by the layout (outer to inner by the first operand's
//! strides), summed in blocks of [`BLOCK`] with four interleaved accumulators,
//! and the block sums combined pairwise. The error grows like
//! `O(eps * (BLOCK/4 + log2(n)))` instead of `O(eps * n)`, and the result is
//! deterministic for a given layout (no dependence on threads or timing).

use super::check::{check_dtypes, check_output, check_rank, dims, shape_err, sum_shape};
use super::float::{with_float, Float, RealFloat};
use super::operand::Operand;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result, Status};
use crate::layout::{for_each_run, merged_axes};

/// Elements summed sequentially (in four lanes) before pairwise combination.
const BLOCK: usize = 128;

/// Pairwise sum of `f(offsets)` over every index of `dims` (see [`merged_axes`]),
/// starting from element offsets `base`.
fn pairwise<A: Float, const N: usize>(
    dims: &[(usize, [isize; N])],
    base: [isize; N],
    f: &impl Fn([isize; N]) -> A,
) -> A {
    let total: usize = dims.iter().map(|d| d.0).product();
    if dims.is_empty() {
        return f(base);
    }
    rec(dims, base, f, 0, total)
}

fn rec<A: Float, const N: usize>(
    dims: &[(usize, [isize; N])],
    base: [isize; N],
    f: &impl Fn([isize; N]) -> A,
    lo: usize,
    hi: usize,
) -> A {
    if hi - lo <= BLOCK {
        return block(dims, base, f, lo, hi);
    }
    // Split on a block boundary so the blocks do not depend on the recursion.
    let half = (hi - lo) / 2;
    let mid = lo + half.div_ceil(BLOCK) * BLOCK;
    rec(dims, base, f, lo, mid) + rec(dims, base, f, mid, hi)
}

/// Sum of the elements with flat indices `lo..hi` (at most [`BLOCK`]).
#[allow(clippy::needless_range_loop)] // k indexes several per-operand arrays
fn block<A: Float, const N: usize>(
    dims: &[(usize, [isize; N])],
    base: [isize; N],
    f: &impl Fn([isize; N]) -> A,
    lo: usize,
    hi: usize,
) -> A {
    let nd = dims.len();
    let mut idx = [0usize; 16];
    let mut idx_v;
    let idx: &mut [usize] = if nd <= 16 {
        &mut idx[..nd]
    } else {
        idx_v = vec![0usize; nd];
        &mut idx_v
    };
    let mut off = base;
    let mut rem = lo;
    for d in (0..nd).rev() {
        let (e, s) = dims[d];
        idx[d] = rem % e;
        rem /= e;
        for k in 0..N {
            off[k] += idx[d] as isize * s[k];
        }
    }
    let (e_in, s_in) = dims[nd - 1];
    let zero = A::zero();
    let mut acc = [zero; 4];
    let mut pos = lo;
    while pos < hi {
        let run = (hi - pos).min(e_in - idx[nd - 1]);
        let mut i = 0;
        while i + 4 <= run {
            for (l, a) in acc.iter_mut().enumerate() {
                let o = std::array::from_fn(|k| off[k] + (i + l) as isize * s_in[k]);
                *a += f(o);
            }
            i += 4;
        }
        while i < run {
            let o = std::array::from_fn(|k| off[k] + i as isize * s_in[k]);
            acc[0] += f(o);
            i += 1;
        }
        pos += run;
        if pos == hi {
            break;
        }
        // Advance the odometer by `run` along the innermost axis (which is
        // then exhausted) and carry.
        for k in 0..N {
            off[k] += run as isize * s_in[k];
        }
        idx[nd - 1] += run;
        let mut d = nd - 1;
        while idx[d] == dims[d].0 {
            for k in 0..N {
                off[k] -= dims[d].0 as isize * dims[d].1[k];
            }
            idx[d] = 0;
            d -= 1;
            idx[d] += 1;
            for k in 0..N {
                off[k] += dims[d].1[k];
            }
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// Check that an output is a single element of dtype `want`.
fn check_scalar_out(origin: &'static str, out: &Operand<'_>, want: DType) -> Result<()> {
    check_output(origin, "out", out)?;
    if out.dtype != want {
        return Err(Error::new(
            Status::DtypeMismatch,
            origin,
            format!("out is {} but must be {}", out.dtype.name(), want.name()),
        ));
    }
    if out.len() != 1 {
        return Err(shape_err(origin, format!("out is {} but must hold one element", dims(out.extents))));
    }
    Ok(())
}

/// `out = sum of x` over `axes`: `None` sums every element into a 0-d (or
/// one-element) `out`; `Some(axes)` sums over those axes, and `out`'s extents
/// are x's remaining axes in order (`Some(&[])` is a copy). A conj flag on `x`
/// is honoured. An empty reduction gives 0.
///
/// # Safety
/// See the module's safety contract.
pub(crate) unsafe fn sum(out: &Operand<'_>, x: &Operand<'_>, axes: Option<&[usize]>) -> Result<()> {
    const O: &str = "sum";
    check_dtypes(O, &[("out", out.dtype), ("x", x.dtype)])?;
    check_rank(O, "x", x)?;
    check_output(O, "out", out)?;
    let want = sum_shape(x.extents, axes)?;
    let shape_ok = match axes {
        None => out.len() == 1,
        Some(_) => out.extents == &want[..],
    };
    if !shape_ok {
        let what = match axes {
            None => "one element".to_string(),
            Some(a) => format!("{} (x summed over axes {a:?})", dims(&want)),
        };
        return Err(shape_err(
            O,
            format!("out is {}, x is {}: out must be {what}", dims(out.extents), dims(x.extents)),
        ));
    }
    let r = x.extents.len();
    let reduced: Vec<usize> = match axes {
        None => (0..r).collect(),
        Some(a) => (0..r).filter(|i| a.contains(i)).collect(),
    };
    let kept: Vec<usize> = (0..r).filter(|i| !reduced.contains(i)).collect();
    let conj = x.conjugated();
    with_float!(x.dtype, T => {
        let px = x.ptr as *const T;
        let po = out.ptr as *mut T;
        let re: Vec<usize> = reduced.iter().map(|&i| x.extents[i]).collect();
        let rs: Vec<isize> = reduced.iter().map(|&i| x.strides[i]).collect();
        let empty = re.contains(&0);
        let rdims = merged_axes(&re, [&rs]);
        // SAFETY: offsets stay inside x by the caller's contract.
        let f = |[o]: [isize; 1]| unsafe { *px.offset(o) };
        let value = |xo: isize| {
            if empty {
                return T::zero();
            }
            let s = pairwise(&rdims, [xo], &f);
            if conj { s.conj() } else { s }
        };
        if axes.is_none() {
            // SAFETY: out holds one element.
            unsafe { *po = value(0) };
        } else {
            let ke: Vec<usize> = kept.iter().map(|&i| x.extents[i]).collect();
            let ks: Vec<isize> = kept.iter().map(|&i| x.strides[i]).collect();
            for_each_run(&ke, [0, 0], [out.strides, &ks], |[oo, ox], n, [so, sx]| {
                for i in 0..n as isize {
                    // SAFETY: inside out by the caller's contract.
                    unsafe { *po.offset(oo + i * so) = value(ox + i * sx) };
                }
            });
        }
        Ok(())
    }, unreachable!("checked above"))
}

/// `out = sum_i op(x_i) * y_i` over equally shaped `x` and `y` (any rank,
/// treated as flat), where `op` conjugates if `conjugate_x` (`x^H y`, BLAS
/// `dotc`) and is the identity otherwise (`x^T y`, `dotu`). Conj flags on the
/// views are honoured on top. `out` is one element of the same dtype.
///
/// # Safety
/// See the module's safety contract.
pub(crate) unsafe fn dot(out: &Operand<'_>, x: &Operand<'_>, y: &Operand<'_>, conjugate_x: bool) -> Result<()> {
    const O: &str = "dot";
    check_dtypes(O, &[("out", out.dtype), ("x", x.dtype), ("y", y.dtype)])?;
    check_rank(O, "x", x)?;
    check_rank(O, "y", y)?;
    check_scalar_out(O, out, x.dtype)?;
    if x.extents != y.extents {
        return Err(shape_err(O, format!("x is {}, y is {}: shapes differ", dims(x.extents), dims(y.extents))));
    }
    let cx = x.conjugated() != conjugate_x;
    let cy = y.conjugated();
    with_float!(x.dtype, T => {
        let (px, py) = (x.ptr as *const T, y.ptr as *const T);
        let d = merged_axes(x.extents, [x.strides, y.strides]);
        let v = if x.len() == 0 {
            T::zero()
        } else {
            match (cx, cy) {
                // SAFETY (all arms): offsets stay inside x and y.
                (false, false) => pairwise(&d, [0, 0], &|[a, b]| unsafe { *px.offset(a) * *py.offset(b) }),
                (true, false) => pairwise(&d, [0, 0], &|[a, b]| unsafe { (*px.offset(a)).conj() * *py.offset(b) }),
                (false, true) => pairwise(&d, [0, 0], &|[a, b]| unsafe { *px.offset(a) * (*py.offset(b)).conj() }),
                // conj(x)*conj(y) = conj(x*y)
                (true, true) => pairwise(&d, [0, 0], &|[a, b]| unsafe { *px.offset(a) * *py.offset(b) }).conj(),
            }
        };
        // SAFETY: out holds one element.
        unsafe { *(out.ptr as *mut T) = v };
        Ok(())
    }, unreachable!("checked above"))
}

/// `out = ||x||_2` (Euclidean norm over every element, any rank). `out` is one
/// element of the real counterpart of x's dtype (f32 for c64, f64 for c128).
/// The sum of squares is computed directly when that can neither overflow nor
/// lose accuracy to underflow (checked on the result); otherwise again with
/// every element scaled by the largest magnitude, so the norm of any finite
/// input is finite when representable. NaN in, NaN out; an infinity gives +inf.
///
/// # Safety
/// See the module's safety contract.
pub(crate) unsafe fn norm2(out: &Operand<'_>, x: &Operand<'_>) -> Result<()> {
    const O: &str = "norm2";
    check_dtypes(O, &[("x", x.dtype)])?;
    check_rank(O, "x", x)?;
    with_float!(x.dtype, T => {
        check_scalar_out(O, out, <<T as Float>::Re as Element>::DTYPE)?;
        let v = unsafe { norm2_typed::<T>(x) };
        // SAFETY: out holds one element of the real type.
        unsafe { *(out.ptr as *mut <T as Float>::Re) = v };
        Ok(())
    }, unreachable!("checked above"))
}

unsafe fn norm2_typed<T: Float>(x: &Operand<'_>) -> T::Re {
    type R<T> = <T as Float>::Re;
    let zero = R::<T>::zero();
    if x.len() == 0 {
        return zero;
    }
    let px = x.ptr as *const T;
    let d = merged_axes(x.extents, [x.strides]);
    // SAFETY (closures): offsets stay inside x.
    let ss = pairwise(&d, [0], &|[o]| unsafe { (*px.offset(o)).abs_sq() });
    let tiny = R::<T>::MIN_NORMAL / (R::<T>::EPS * R::<T>::EPS);
    if ss.is_finite_() && ss >= tiny {
        return ss.sqrt_();
    }
    // Overflow, underflow, inf or NaN: scale by the largest magnitude.
    let amax = max_abs::<T>(px, &d);
    if amax.is_nan_() || !amax.is_finite_() || amax == zero {
        return amax;
    }
    let inv = R::<T>::from_f64(1.0) / amax;
    let scaled = pairwise(&d, [0], &|[o]| unsafe {
        let v = *px.offset(o);
        let (r, i) = (v.re_part() * inv, v.im_part() * inv);
        r * r + i * i
    });
    amax * scaled.sqrt_()
}

/// Largest |re| or |im| over the elements; NaN if any part is NaN.
fn max_abs<T: Float>(px: *const T, d: &[(usize, [isize; 1])]) -> T::Re {
    let mut m = T::Re::zero();
    let mut nan = false;
    let total: usize = d.iter().map(|x| x.0).product();
    let (ext, strides): (Vec<usize>, Vec<isize>) = d.iter().map(|&(e, [s])| (e, s)).unzip();
    if total == 0 {
        return m;
    }
    for_each_run(&ext, [0], [&strides], |[o], n, [s]| {
        for i in 0..n as isize {
            // SAFETY: offsets stay inside x (same walk as the sums).
            let v = unsafe { *px.offset(o + i * s) };
            let a = v.max_part();
            if a.is_nan_() || v.re_part().is_nan_() || v.im_part().is_nan_() {
                nan = true;
            } else if a > m {
                m = a;
            }
        }
    });
    if nan {
        T::Re::from_f64(f64::NAN)
    } else {
        m
    }
}
