//! GEMM through faer, and tensor contraction by (transpose-free where
//! possible) reduction to GEMM.

use faer::linalg::matmul::matmul_with_conj;
use faer::{Accum, Conj, MatMut, MatRef, Par};

use super::check::{check_dtypes, check_output, check_rank, contract_shape, dims, gemm_shape, shape_err, try_vec};
use super::copy::copy_nd;
use super::float::{scalar, with_float, Float};
use super::operand::Operand;
use crate::dtype::Scalar;
use crate::error::Result;

/// Products smaller than this run on the calling thread alone. The unit is
/// one f64 multiply-add: `m*n*k` weighted by the dtype's cost (f32 1/2, f64 1,
/// c64 2, c128 4; see [`work`]). Below it the fork/join costs more than it
/// saves (the crossover measured by benches/gemm.rs), and a small task is
/// better left to the runtime's task-level parallelism.
pub(crate) const PAR_MIN_FLOPS: usize = 112 * 112 * 112;

/// The cost of an `m x n x k` product in f64 multiply-adds (see [`PAR_MIN_FLOPS`]).
pub(crate) fn work<T: Float>(m: usize, n: usize, k: usize) -> usize {
    let mnk = m.saturating_mul(n).saturating_mul(k);
    match T::DTYPE {
        crate::dtype::DType::F32 => mnk / 2,
        crate::dtype::DType::C64 => mnk.saturating_mul(2),
        crate::dtype::DType::C128 => mnk.saturating_mul(4),
        _ => mnk,
    }
}

/// Products with at most this many multiply-adds (`m*n*k`) use a direct
/// triple loop instead of faer, whose fixed dispatch cost dominates such tiny
/// products (crossover measured by benches/gemm.rs).
pub(crate) const SMALL_MAX_FLOPS: usize = 3 * 3 * 3;

/// A typed 2-d strided matrix.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Mat2<T> {
    pub ptr: *mut T,
    pub rows: usize,
    pub cols: usize,
    pub rs: isize,
    pub cs: isize,
    pub conj: bool,
}

impl<T> Mat2<T> {
    pub(crate) fn from_operand(x: &Operand<'_>) -> Mat2<T> {
        Mat2 {
            ptr: x.ptr as *mut T,
            rows: x.extents[0],
            cols: x.extents[1],
            rs: x.strides[0],
            cs: x.strides[1],
            conj: x.conjugated(),
        }
    }

    /// Give axes of extent 1 a stride that makes the matrix look dense along
    /// its other axis (their stride is never used to address anything).
    pub(crate) fn normalize_trivial(mut self) -> Self {
        if self.rows <= 1 {
            self.rs = if self.cs == 1 { self.cols.max(1) as isize } else { 1 };
        }
        if self.cols <= 1 {
            self.cs = if self.rs == 1 { self.rows.max(1) as isize } else { 1 };
        }
        self
    }

    /// Reverse the row order (pointer to the last row, stride negated).
    fn flip_rows(mut self) -> Self {
        if self.rows > 0 {
            self.ptr = self.ptr.wrapping_offset(self.rs * (self.rows as isize - 1));
        }
        self.rs = -self.rs;
        self
    }

    fn flip_cols(mut self) -> Self {
        if self.cols > 0 {
            self.ptr = self.ptr.wrapping_offset(self.cs * (self.cols as isize - 1));
        }
        self.cs = -self.cs;
        self
    }

    fn transpose(self) -> Self {
        Mat2 { rows: self.cols, cols: self.rows, rs: self.cs, cs: self.rs, ..self }
    }
}

/// `C = beta*C` (`None`: `C = 0`, never read), element by element.
///
/// # Safety
/// `c` addresses writable, exclusively accessed elements.
pub(crate) unsafe fn scale_mat<T: Float>(c: Mat2<T>, beta: Option<T>) {
    let c = if c.rs.unsigned_abs() < c.cs.unsigned_abs() { c.transpose() } else { c };
    // Now the column index varies fastest in memory (|cs| <= |rs|).
    for i in 0..c.rows as isize {
        let row = c.ptr.wrapping_offset(i * c.rs);
        for j in 0..c.cols as isize {
            // SAFETY: inside the operand by the caller's contract.
            unsafe {
                let p = row.offset(j * c.cs);
                *p = match beta {
                    Some(b) => b * *p,
                    None => T::zero(),
                };
            }
        }
    }
}

/// The parallelism for a product of `flops` f64 multiply-adds ([`work`]): faer's rayon
/// backend when called on a rayon pool thread with more than one thread and
/// the product is large enough, else sequential. On a pool thread, faer's
/// parallel pieces are rayon jobs of *that* pool (the runtime's workers), so
/// intra-op parallelism shares the runtime's cores instead of adding threads.
/// Outside any pool (a plain thread) the product runs sequentially rather than
/// waking rayon's global pool.
pub(crate) fn par_for(flops: usize) -> Par {
    if flops < PAR_MIN_FLOPS || rayon::current_thread_index().is_none() {
        return Par::Seq;
    }
    match rayon::current_num_threads() {
        0 | 1 => Par::Seq,
        n => Par::rayon(n),
    }
}

/// `C = alpha*op(A)*op(B) [+ beta*C]` on typed matrices whose shapes agree.
/// `beta == None` or `beta == 0`: C is overwritten and never read (BLAS
/// convention). `alpha == 0` or `k == 0`: A and B are not read.
///
/// # Safety
/// As for [`gemm`]; `c` must also not address any element twice.
pub(crate) unsafe fn gemm_mat<T: Float>(c: Mat2<T>, alpha: T, a: Mat2<T>, b: Mat2<T>, beta: Option<T>, par: Par) {
    let (m, n, k) = (c.rows, c.cols, a.cols);
    debug_assert!(a.rows == m && b.rows == k && b.cols == n);
    if m == 0 || n == 0 {
        return;
    }
    let beta = beta.filter(|b| *b != T::zero());
    if k == 0 || alpha == T::zero() {
        if beta != Some(T::one_()) {
            unsafe { scale_mat(c, beta) };
        }
        return;
    }
    if m.saturating_mul(n).saturating_mul(k) <= SMALL_MAX_FLOPS {
        match (a.conj, b.conj) {
            (false, false) => unsafe { gemm_small::<T, false, false>(c, alpha, a, b, beta) },
            (true, false) => unsafe { gemm_small::<T, true, false>(c, alpha, a, b, beta) },
            (false, true) => unsafe { gemm_small::<T, false, true>(c, alpha, a, b, beta) },
            (true, true) => unsafe { gemm_small::<T, true, true>(c, alpha, a, b, beta) },
        }
        return;
    }
    let accum = match beta {
        None => Accum::Replace,
        Some(b) if b == T::one_() => Accum::Add,
        Some(b) => {
            unsafe { scale_mat(c, Some(b)) };
            Accum::Add
        }
    };
    let (mut c, mut a, mut b) = (c.normalize_trivial(), a.normalize_trivial(), b.normalize_trivial());
    // Positive output strides (flip the matching input axes with them), and a
    // positive stride along k for A (the product does not depend on k's order).
    if c.rs < 0 {
        c = c.flip_rows();
        a = a.flip_rows();
    }
    if c.cs < 0 {
        c = c.flip_cols();
        b = b.flip_cols();
    }
    if a.cs < 0 || (a.cs == 0 && b.rs < 0) {
        a = a.flip_cols();
        b = b.flip_rows();
    }
    let conj = |x: bool| if x { Conj::Yes } else { Conj::No };
    // SAFETY: the caller guarantees the elements are valid, C is exclusively
    // accessed and self-disjoint, and inputs do not overlap C; m, n, k > 0, so
    // every pointer addresses a real element of its operand.
    unsafe {
        let cm = MatMut::<T>::from_raw_parts_mut(c.ptr, m, n, c.rs, c.cs);
        let am = MatRef::<T>::from_raw_parts(a.ptr, m, k, a.rs, a.cs);
        let bm = MatRef::<T>::from_raw_parts(b.ptr, k, n, b.rs, b.cs);
        matmul_with_conj(cm, accum, am, conj(a.conj), bm, conj(b.conj), alpha, par);
    }
}

/// `C = alpha*op(A)*op(B) [+ beta*C]` by a direct triple loop (tiny products).
///
/// # Safety
/// As for [`gemm_mat`].
pub(crate) unsafe fn gemm_small<T: Float, const CA: bool, const CB: bool>(
    c: Mat2<T>,
    alpha: T,
    a: Mat2<T>,
    b: Mat2<T>,
    beta: Option<T>,
) {
    let ld = |x: T, cj: bool| if cj { x.conj() } else { x };
    for i in 0..c.rows as isize {
        let arow = a.ptr.wrapping_offset(i * a.rs);
        for j in 0..c.cols as isize {
            let bcol = b.ptr.wrapping_offset(j * b.cs);
            let mut s = T::zero();
            for l in 0..a.cols as isize {
                // SAFETY: inside A and B by the caller's contract.
                unsafe { s += ld(*arow.offset(l * a.cs), CA) * ld(*bcol.offset(l * b.rs), CB) };
            }
            // SAFETY: inside C, exclusively accessed.
            unsafe {
                let p = c.ptr.offset(i * c.rs + j * c.cs);
                *p = match beta {
                    None => alpha * s,
                    Some(bt) => alpha * s + bt * *p,
                };
            }
        }
    }
}

/// One, for any float type.
trait One {
    fn one_() -> Self;
}
impl<T: Float> One for T {
    fn one_() -> T {
        T::from_scalar(Scalar::real(1.0))
    }
}

/// Validate a GEMM call: dtypes, shapes, and a writable, self-disjoint C.
pub(crate) fn gemm_check(origin: &'static str, c: &Operand<'_>, a: &Operand<'_>, b: &Operand<'_>) -> Result<()> {
    // Fast path for the common, valid call (a few ns); the full checks below
    // produce the error messages.
    let two = |x: &Operand<'_>| x.extents.len() == 2 && x.strides.len() == 2;
    if c.dtype == a.dtype
        && a.dtype == b.dtype
        && c.dtype.is_float()
        && two(a)
        && two(b)
        && two(c)
        && a.extents[1] == b.extents[0]
        && c.extents[0] == a.extents[0]
        && c.extents[1] == b.extents[1]
        && !c.conjugated()
        && non_overlapping_2d(c.extents, c.strides)
    {
        return Ok(());
    }
    check_dtypes(origin, &[("C", c.dtype), ("A", a.dtype), ("B", b.dtype)])?;
    check_rank(origin, "A", a)?;
    check_rank(origin, "B", b)?;
    check_rank(origin, "C", c)?;
    let want = gemm_shape(a.extents, b.extents)?;
    if c.extents != want {
        return Err(shape_err(
            origin,
            format!(
                "C is {}, A is {}, B is {}: C must be {}",
                dims(c.extents),
                dims(a.extents),
                dims(b.extents),
                dims(&want)
            ),
        ));
    }
    check_output(origin, "C", c)
}

/// `C = alpha·op(A)·op(B)` (`beta == None`: C is overwritten and never read)
/// or `C = alpha·op(A)·op(B) + beta·C`, where `op` conjugates an operand whose
/// `conj` flag is set. Operands are 2-d with any strides: a transposed view is
/// just swapped strides, negative and zero input strides are fine. As in BLAS,
/// `beta == 0` does not read C, and `alpha == 0` (or an inner extent of 0)
/// does not read A or B.
///
/// Parallelism: see [`par_for`]: faer's rayon backend on the caller's rayon
/// pool for products of at least [`PAR_MIN_FLOPS`] multiply-adds, sequential
/// otherwise.
///
/// Errors: `DtypeMismatch` (operands differ), `Unsupported` (not a float
/// dtype), `ShapeMismatch` (naming the shapes), `ReadOnly` (C is a conj view),
/// `InvalidArgument` (C addresses an element twice), before anything is written.
///
/// # Safety
/// See the module's safety contract.
pub(crate) unsafe fn gemm(
    c: &Operand<'_>,
    alpha: Scalar,
    a: &Operand<'_>,
    b: &Operand<'_>,
    beta: Option<Scalar>,
) -> Result<()> {
    gemm_check("gemm", c, a, b)?;
    with_float!(c.dtype, T => {
        let (cm, am, bm) = (Mat2::<T>::from_operand(c), Mat2::<T>::from_operand(a), Mat2::<T>::from_operand(b));
        let par = par_for(work::<T>(cm.rows, cm.cols, am.cols));
        unsafe { gemm_mat(cm, scalar::<T>(alpha), am, bm, beta.map(scalar::<T>), par) };
        Ok(())
    }, unreachable!("gemm_check admits float dtypes only"))
}

/// [`crate::layout::non_overlapping`] for a 2-d layout, without sorting or allocating.
fn non_overlapping_2d(e: &[usize], s: &[isize]) -> bool {
    let (e0, e1) = (e[0], e[1]);
    if e0 == 0 || e1 == 0 {
        return true;
    }
    let (s0, s1) = (s[0].unsigned_abs(), s[1].unsigned_abs());
    match (e0 > 1, e1 > 1) {
        (false, false) => true,
        (true, false) => s0 != 0,
        (false, true) => s1 != 0,
        (true, true) => {
            let ((si, ei), so) = if s0 <= s1 { ((s0, e0), s1) } else { ((s1, e1), s0) };
            si != 0 && si.checked_mul(ei - 1).is_some_and(|r| so > r)
        }
    }
}

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
