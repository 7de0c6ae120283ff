//! Tensor contraction by (transpose-free where possible) reduction to GEMM.

use super::check::{check_dtypes, check_output, check_rank, contract_shape, dims, shape_err, try_vec};
use super::copy::copy_nd;
use super::float::{scalar, with_float, Float};
use super::gemm::gemm_mat;
use super::mat2::Mat2;
use super::operand::Operand;
use super::par::{par_for, work};
use crate::dtype::Scalar;
use crate::error::Result;

/// One group of axes that becomes one matrix index: for each axis its extent
/// and its stride in the two operands that share the group.
struct Group {
    ext: Vec<usize>,
    s0: Vec<isize>,
    s1: Vec<isize>,
}

/// The result of ordering a group: the axis order, whether each operand's
/// axes merge into one stride in that order, and the merged strides.
struct Ordered {
    order: Vec<usize>,
    len: usize,
    merged0: Option<isize>,
    merged1: Option<isize>,
}

/// Merge axes (outermost first) into one index if their strides nest:
/// `stride[i] == stride[i+1] * ext[i+1]`. Returns the stride of the merged
/// index (1 when there is no axis of extent > 1: any stride will do).
fn merge(order: &[usize], ext: &[usize], s: &[isize]) -> Option<isize> {
    let axes: Vec<usize> = order.iter().copied().filter(|&i| ext[i] != 1).collect();
    let Some(&last) = axes.last() else { return Some(1) };
    for w in axes.windows(2) {
        if s[w[0]] != s[w[1]].checked_mul(ext[w[1]] as isize)? {
            return None;
        }
    }
    Some(s[last])
}

impl Group {
    fn len(&self) -> usize {
        self.ext.iter().product()
    }

    /// Choose an axis order in which both operands merge if there is one
    /// (trying each operand's own stride order); otherwise the order that
    /// suits operand `prefer` (0 or 1).
    fn order(&self, prefer: usize) -> Ordered {
        let n = self.ext.len();
        let by = |s: &[isize]| {
            let mut o: Vec<usize> = (0..n).collect();
            o.sort_by_key(|&i| std::cmp::Reverse(s[i].unsigned_abs()));
            o
        };
        let cands = if prefer == 0 { [by(&self.s0), by(&self.s1)] } else { [by(&self.s1), by(&self.s0)] };
        let eval = |order: Vec<usize>| {
            let merged0 = merge(&order, &self.ext, &self.s0);
            let merged1 = merge(&order, &self.ext, &self.s1);
            Ordered { order, len: self.len(), merged0, merged1 }
        };
        let first = eval(cands[0].clone());
        if first.merged0.is_some() && first.merged1.is_some() {
            return first;
        }
        let second = eval(cands[1].clone());
        if second.merged0.is_some() && second.merged1.is_some() {
            return second;
        }
        first
    }
}

/// Contiguous temporary holding an operand's elements with its axes in the
/// order `axes` (row-major), and the matrix view of it.
struct Temp<T> {
    buf: Vec<T>,
}

/// Copy the axes `axes` of `x` (in that order, row-major) into a new buffer.
///
/// # Safety
/// `x` readable as in the module contract.
unsafe fn gather<T: Float>(origin: &'static str, x: &Operand<'_>, axes: &[usize]) -> Result<Temp<T>> {
    let ext: Vec<usize> = axes.iter().map(|&i| x.extents[i]).collect();
    let len: usize = ext.iter().product();
    let mut buf = try_vec(origin, len, T::zero())?;
    let dst_strides = row_major_strides(&ext);
    let src_strides: Vec<isize> = axes.iter().map(|&i| x.strides[i]).collect();
    unsafe { copy_nd::<T>(&ext, buf.as_mut_ptr(), &dst_strides, x.ptr as *const T, &src_strides, false) };
    Ok(Temp { buf })
}

pub(crate) fn row_major_strides(ext: &[usize]) -> Vec<isize> {
    let mut s = vec![0isize; ext.len()];
    let mut step = 1isize;
    for i in (0..ext.len()).rev() {
        s[i] = step;
        step *= ext[i].max(1) as isize;
    }
    s
}

/// Tensor contraction (tensordot): `C = alpha·contract(op(A), op(B)) [+ beta·C]`
/// over the axis pairs `(a_axes[i], b_axes[i])`. C's axes are A's free axes in
/// order, then B's free axes in order. The contraction becomes one GEMM
/// `C[M,N] = A[M,K]·B[K,N]` where M, N and K each merge a group of axes; the
/// order within each group is chosen so that the operands' strides merge, and
/// only an operand whose axes do not merge is copied (transposed) into a
/// temporary. Conj flags, `beta` and `alpha` behave as in [`gemm`].
///
/// # Safety
/// See the module's safety contract.
pub(crate) unsafe fn contract(
    c: &Operand<'_>,
    alpha: Scalar,
    a: &Operand<'_>,
    b: &Operand<'_>,
    a_axes: &[usize],
    b_axes: &[usize],
    beta: Option<Scalar>,
) -> Result<()> {
    const O: &str = "contract";
    check_dtypes(O, &[("C", c.dtype), ("A", a.dtype), ("B", b.dtype)])?;
    check_rank(O, "A", a)?;
    check_rank(O, "B", b)?;
    let want = contract_shape(a.extents, b.extents, a_axes, b_axes)?;
    if c.extents != &want[..] {
        return Err(shape_err(
            O,
            format!(
                "C is {}, A is {}, B is {}: contracting A axes {a_axes:?} with B axes {b_axes:?} gives {}",
                dims(c.extents),
                dims(a.extents),
                dims(b.extents),
                dims(&want)
            ),
        ));
    }
    check_output(O, "C", c)?;
    with_float!(c.dtype, T => unsafe { contract_typed::<T>(c, scalar::<T>(alpha), a, b, a_axes, b_axes, beta.map(scalar::<T>)) },
        unreachable!("checked above"))
}

unsafe fn contract_typed<T: Float>(
    c: &Operand<'_>,
    alpha: T,
    a: &Operand<'_>,
    b: &Operand<'_>,
    a_axes: &[usize],
    b_axes: &[usize],
    beta: Option<T>,
) -> Result<()> {
    const O: &str = "contract";
    let a_free: Vec<usize> = (0..a.extents.len()).filter(|i| !a_axes.contains(i)).collect();
    let b_free: Vec<usize> = (0..b.extents.len()).filter(|j| !b_axes.contains(j)).collect();
    let nm = a_free.len();
    // Groups: M = (A free axes, C's first axes), N = (B free axes, C's last
    // axes), K = (A contracted axes, B contracted axes).
    let gm = Group {
        ext: a_free.iter().map(|&i| a.extents[i]).collect(),
        s0: (0..nm).map(|p| c.strides[p]).collect(),
        s1: a_free.iter().map(|&i| a.strides[i]).collect(),
    };
    let gn = Group {
        ext: b_free.iter().map(|&j| b.extents[j]).collect(),
        s0: (0..b_free.len()).map(|q| c.strides[nm + q]).collect(),
        s1: b_free.iter().map(|&j| b.strides[j]).collect(),
    };
    let gk = Group {
        ext: a_axes.iter().map(|&i| a.extents[i]).collect(),
        s0: a_axes.iter().map(|&i| a.strides[i]).collect(),
        s1: b_axes.iter().map(|&j| b.strides[j]).collect(),
    };
    let (m, n, k) = (gm.len(), gn.len(), gk.len());
    if m == 0 || n == 0 {
        return Ok(());
    }
    // C stays in place when it can (copying it costs a read and a write).
    let om = gm.order(0);
    let on = gn.order(0);
    // A needs both its groups merged: prefer the order that suits A in K
    // unless A must be copied anyway.
    let ok = gk.order(if om.merged1.is_some() { 0 } else { 1 });
    debug_assert_eq!((om.len, on.len, ok.len), (m, n, k));

    // A as an M x K matrix.
    let a_tmp;
    let am = match (om.merged1, ok.merged0) {
        (Some(rs), Some(cs)) => Mat2 { ptr: a.ptr as *mut T, rows: m, cols: k, rs, cs, conj: a.conjugated() },
        _ => {
            let axes: Vec<usize> =
                om.order.iter().map(|&p| a_free[p]).chain(ok.order.iter().map(|&p| a_axes[p])).collect();
            a_tmp = unsafe { gather::<T>(O, a, &axes)? };
            Mat2 { ptr: a_tmp.buf.as_ptr() as *mut T, rows: m, cols: k, rs: k as isize, cs: 1, conj: a.conjugated() }
        }
    };
    // B as a K x N matrix.
    let b_tmp;
    let bm = match (ok.merged1, on.merged1) {
        (Some(rs), Some(cs)) => Mat2 { ptr: b.ptr as *mut T, rows: k, cols: n, rs, cs, conj: b.conjugated() },
        _ => {
            let axes: Vec<usize> =
                ok.order.iter().map(|&p| b_axes[p]).chain(on.order.iter().map(|&p| b_free[p])).collect();
            b_tmp = unsafe { gather::<T>(O, b, &axes)? };
            Mat2 { ptr: b_tmp.buf.as_ptr() as *mut T, rows: k, cols: n, rs: n as isize, cs: 1, conj: b.conjugated() }
        }
    };
    let par = par_for(work::<T>(m, n, k));
    match (om.merged0, on.merged0) {
        (Some(rs), Some(cs)) => {
            let cm = Mat2 { ptr: c.ptr as *mut T, rows: m, cols: n, rs, cs, conj: false };
            unsafe { gemm_mat(cm, alpha, am, bm, beta, par) };
        }
        _ => {
            // C's axes in the chosen (M order, N order), row-major in a temporary.
            let axes: Vec<usize> = om.order.iter().copied().chain(on.order.iter().map(|&q| nm + q)).collect();
            let beta = beta.filter(|x| *x != T::zero());
            let mut tmp = match beta {
                Some(_) => unsafe { gather::<T>(O, c, &axes)? },
                None => Temp { buf: try_vec(O, m * n, T::zero())? },
            };
            let cm = Mat2 { ptr: tmp.buf.as_mut_ptr(), rows: m, cols: n, rs: n as isize, cs: 1, conj: false };
            unsafe { gemm_mat(cm, alpha, am, bm, beta, par) };
            // Scatter back: C's axes `axes` <- temporary (row-major).
            let ext: Vec<usize> = axes.iter().map(|&i| c.extents[i]).collect();
            let dst_strides: Vec<isize> = axes.iter().map(|&i| c.strides[i]).collect();
            let src_strides = row_major_strides(&ext);
            unsafe { copy_nd::<T>(&ext, c.ptr as *mut T, &dst_strides, tmp.buf.as_ptr(), &src_strides, false) };
        }
    }
    Ok(())
}
