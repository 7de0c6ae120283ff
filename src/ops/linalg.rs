//! Dense linear algebra on asynchronous operands (SPEC §2.5): the gemm
//! family, tensor contraction, materialising permute and conj, reductions
//! into 0-d tensors, and the tile kernels of a Cholesky factorisation.
//!
//! Scalars (alpha, beta) are immediate values or 0-d tensors of the
//! operation's dtype ([`ScalarArg`]); a tensor scalar is one more operand,
//! read when the task runs. Shapes are checked at submission (every operand's
//! shape is known then), and the kernels check them again, naming the shapes.

use smallvec::SmallVec;

use super::checks::same_dtype_and_domain;
use super::submit::{submit, Completion, Locked, Submit};
use super::Body;
use crate::backends::registry;
use crate::dispatch::{KernelOp, ScalarSlot};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result, Status};
use crate::kernels::check as shapes;
use crate::layout::{Extents, Order};
use crate::queue::Mode;
use crate::tensor::handle::Tensor;
use crate::tensor::value::Value;

/// A scalar operand: an immediate value, or a 0-d tensor read when the task runs.
///
/// ```
/// use tensorasync::{ops, DType, Domain, Order, Submit, Tensor};
/// use tensorasync::ops::ScalarArg;
/// let alpha = Tensor::from_slice(&[], Order::RowMajor, &[3.0f64]).unwrap(); // 0-d
/// let a = Tensor::from_slice(&[1, 1], Order::RowMajor, &[2.0f64]).unwrap();
/// let b = Tensor::from_slice(&[1, 1], Order::RowMajor, &[5.0f64]).unwrap();
/// let c = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
/// ops::assign_product(&c, ScalarArg::Tensor(&alpha), &a, &b, Submit::default()).unwrap();
/// assert_eq!(c.to_vec::<f64>().unwrap(), vec![30.0]);
/// ```
#[derive(Clone, Copy)]
pub enum ScalarArg<'a> {
    Value(Scalar),
    Tensor(&'a Tensor),
}

impl From<Scalar> for ScalarArg<'_> {
    fn from(s: Scalar) -> Self {
        ScalarArg::Value(s)
    }
}

impl<'a> From<&'a Tensor> for ScalarArg<'a> {
    fn from(t: &'a Tensor) -> Self {
        ScalarArg::Tensor(t)
    }
}

/// Operands of one product's submission being put together: `c`, `a` and
/// `b`, then a 0-d tensor per scalar read from one (in an array, not a
/// small vector, whose pushes and indexing are calls on the submission path).
struct Args<'a> {
    /// The operands in order; entries from `len` on are placeholders.
    operands: [(&'a Tensor, Mode); 5],
    len: usize,
    dtype: DType,
    origin: &'static str,
}

impl<'a> Args<'a> {
    /// `c`, accessed with `c_mode`, and the inputs `a` and `b`.
    fn new(origin: &'static str, dtype: DType, c: &'a Tensor, c_mode: Mode, a: &'a Tensor, b: &'a Tensor) -> Self {
        let operands = [(c, c_mode), (a, Mode::Read), (b, Mode::Read), (c, Mode::Read), (c, Mode::Read)];
        Args { operands, len: 3, dtype, origin }
    }

    fn operands(&self) -> &[(&'a Tensor, Mode)] {
        &self.operands[..self.len]
    }

    /// A scalar slot: immediate (checked for the dtype), or a read of a 0-d
    /// tensor of the operation's dtype (at most two per operation).
    #[inline]
    fn scalar(&mut self, s: ScalarArg<'a>) -> Result<ScalarSlot> {
        match s {
            ScalarArg::Value(v) => {
                v.check_for(self.dtype, self.origin)?;
                Ok(ScalarSlot::Imm(v))
            }
            ScalarArg::Tensor(t) => {
                if t.dtype() != self.dtype {
                    return Err(Error::new(
                        Status::DtypeMismatch,
                        self.origin,
                        format!("a scalar tensor of {} for an operation on {}", t.dtype().name(), self.dtype.name()),
                    ));
                }
                self.operands[self.len] = (t, Mode::Read);
                self.len += 1;
                Ok(ScalarSlot::View(self.len - 1))
            }
        }
    }
}

/// Every scalar tensor operand (from `first` on) must be 0-d.
#[inline]
fn scalars_are_0d(l: &Locked<'_>, first: usize, count: usize, origin: &'static str) -> Result<()> {
    for i in first..count {
        if let Some(layout) = l.layout(i) {
            if layout.len() != 1 || layout.rank() != 0 {
                return Err(Error::new(
                    Status::ShapeMismatch,
                    origin,
                    format!("a scalar tensor must be 0-d, this one has extents {:?}", layout.extents),
                ));
            }
        }
    }
    Ok(())
}

fn extents_of(l: &Locked<'_>, i: usize) -> Extents {
    l.layout(i).map(|x| x.extents.clone()).unwrap_or_default()
}

/// [`extents_of`], borrowed (no copy on the submission path).
fn extents_in<'l>(l: &'l Locked<'_>, i: usize) -> &'l [usize] {
    l.layout(i).map_or(&[], |x| &x.extents)
}

/// An output of shape `want` that may be constructed (unconstructed), written
/// in place (same shape), or replaced with new storage (another shape; only a
/// whole value with no views, since views and earlier accesses keep the old
/// storage, and never for wrapped user memory). `scalar_fits`: the kernel
/// writes a 0-d result into any one-element output, so wrapped user memory
/// of one element takes it in place.
fn prepare_output(
    l: &mut Locked<'_>,
    i: usize,
    dtype: DType,
    want: &[usize],
    scalar_fits: bool,
    origin: &'static str,
) -> Result<()> {
    // The usual case, an output of the right shape, without copying its extents.
    if l.layout(i).is_some_and(|x| x.extents.as_slice() == want) {
        return Ok(());
    }
    let domain = l.domain(i);
    match l.layout(i).map(|x| x.extents.clone()) {
        None => {
            l.construct(i, Value::alloc_contents(dtype, want, Order::RowMajor, domain, origin)?);
            Ok(())
        }
        Some(have) => {
            if l.wraps_user_memory(i) {
                if scalar_fits && want.is_empty() && have.iter().product::<usize>() == 1 {
                    return Ok(());
                }
                return Err(Error::new(
                    Status::ShapeMismatch,
                    origin,
                    format!("the output wraps caller memory of extents {have:?}; the result has extents {want:?}"),
                ));
            }
            if l.is_view(i) {
                return Err(Error::new(
                    Status::ShapeMismatch,
                    origin,
                    format!("the output is a view of extents {have:?}; the result has extents {want:?}"),
                ));
            }
            let fresh = Value::alloc_contents(dtype, want, Order::RowMajor, domain, origin)?;
            l.replace_contents(i, fresh, origin)
        }
    }
}

/// An output that must already have shape `want` (its old values count).
fn require_output(l: &Locked<'_>, i: usize, want: &[usize], origin: &'static str) -> Result<()> {
    let have = extents_in(l, i);
    if l.layout(i).is_some() && have != want {
        return Err(Error::new(
            Status::ShapeMismatch,
            origin,
            format!("the output has extents {have:?}, the result has extents {want:?}"),
        ));
    }
    Ok(())
}

#[inline]
fn native<C: Completion>(
    op: KernelOp,
    dtype: DType,
    c: &Tensor,
    opts: &Submit<'_, C>,
    origin: &'static str,
) -> Result<Body> {
    let candidates = registry::select(op.tag(), dtype, c.domain(), opts.selector, origin)?;
    Ok(Body::Native { op, candidates })
}

fn check_float(dtype: DType, origin: &'static str) -> Result<()> {
    if dtype.is_float() {
        Ok(())
    } else {
        Err(Error::new(
            Status::Unsupported,
            origin,
            format!("{origin} needs a float or complex dtype, not {}", dtype.name()),
        ))
    }
}

/// The operation's name: `with_tensors` where a scalar is a 0-d tensor, so
/// that an error names the C function that took it (`ta_gemm_t`).
#[inline(always)]
fn origin_for(
    plain: &'static str,
    with_tensors: &'static str,
    alpha: &ScalarArg<'_>,
    beta: Option<&ScalarArg<'_>>,
) -> &'static str {
    if matches!(alpha, ScalarArg::Tensor(_)) || matches!(beta, Some(ScalarArg::Tensor(_))) {
        with_tensors
    } else {
        plain
    }
}

fn gemm_like<'a, C: Completion>(
    origin: &'static str,
    c: &'a Tensor,
    alpha: ScalarArg<'a>,
    a: &'a Tensor,
    b: &'a Tensor,
    beta: Option<ScalarArg<'a>>,
    opts: Submit<'_, C>,
) -> Result<C::Output> {
    let [a, b] = super::transfer::inputs_in(origin, c.domain(), [a, b], &opts)?;
    let (a, b) = (&*a, &*b);
    same_dtype_and_domain(origin, &[c, a, b])?;
    let dtype = c.dtype();
    check_float(dtype, origin)?;
    let mut args = Args::new(origin, dtype, c, if beta.is_some() { Mode::Update } else { Mode::Write }, a, b);
    let alpha = args.scalar(alpha)?;
    let beta = beta.map(|s| args.scalar(s)).transpose()?;
    let body = native(KernelOp::Gemm { alpha, beta }, dtype, c, &opts, origin)?;
    let n = args.len;
    submit(origin, origin, args.operands(), body, opts, |l| {
        scalars_are_0d(l, 3, n, origin)?;
        // The usual case first: C, A and B 2-d, their shapes agreeing (one
        // look at each layout; the checks below name what is wrong otherwise).
        if let (Some(lc), Some(la), Some(lb)) = (l.layout(0), l.layout(1), l.layout(2)) {
            let (ec, ea, eb) = (&lc.extents[..], &la.extents[..], &lb.extents[..]);
            if let ([cm, cn], [am, ak], [bk, bn]) = (ec, ea, eb) {
                if cm == am && cn == bn && ak == bk {
                    return Ok(());
                }
            }
        }
        let shape = shapes::gemm_shape(extents_in(l, 1), extents_in(l, 2))
            .map_err(|e| Error::new(e.status(), origin, e.message().to_string()))?;
        if beta.is_some() {
            require_output(l, 0, &shape, origin)
        } else {
            prepare_output(l, 0, dtype, &shape, false, origin)
        }
    })
}

/// `C = alpha·A·B`, an overwrite: constructs an unconstructed `C`, and
/// replaces the storage of a whole `C` of another shape (not while it has
/// views). Transposed and conj views of `A` and `B` are honoured without copies.
///
/// ```
/// use tensorasync::{ops, DType, Domain, Order, Scalar, Submit, Tensor};
/// let a = Tensor::from_slice(&[2, 2], Order::RowMajor, &[1.0f64, 2.0, 3.0, 4.0]).unwrap();
/// let b = Tensor::from_slice(&[2, 2], Order::RowMajor, &[5.0f64, 6.0, 7.0, 8.0]).unwrap();
/// let c = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
/// ops::assign_product(&c, Scalar::real(1.0), &a, &b, Submit::default()).unwrap();
/// assert_eq!(c.extents().unwrap().as_slice(), &[2, 2]);
/// assert_eq!(c.to_vec::<f64>().unwrap(), vec![19.0, 22.0, 43.0, 50.0]);
/// ```
pub fn assign_product<'a, C: Completion>(
    c: &'a Tensor,
    alpha: impl Into<ScalarArg<'a>>,
    a: &'a Tensor,
    b: &'a Tensor,
    opts: Submit<'_, C>,
) -> Result<C::Output> {
    let alpha = alpha.into();
    gemm_like(origin_for("assign_product", "assign_product_t", &alpha, None), c, alpha, a, b, None, opts)
}

/// `C = alpha·A·B + C`: `C` must exist with the product's shape.
///
/// ```
/// use tensorasync::{ops, Order, Scalar, Submit, Tensor};
/// let a = Tensor::from_slice(&[2, 2], Order::RowMajor, &[1.0f64, 2.0, 3.0, 4.0]).unwrap();
/// let b = Tensor::from_slice(&[2, 2], Order::RowMajor, &[5.0f64, 6.0, 7.0, 8.0]).unwrap();
/// let c = Tensor::from_slice(&[2, 2], Order::RowMajor, &[1.0f64; 4]).unwrap();
/// ops::add_product(&c, Scalar::real(1.0), &a, &b, Submit::default()).unwrap();
/// assert_eq!(c.to_vec::<f64>().unwrap(), vec![20.0, 23.0, 44.0, 51.0]);
/// ```
pub fn add_product<'a, C: Completion>(
    c: &'a Tensor,
    alpha: impl Into<ScalarArg<'a>>,
    a: &'a Tensor,
    b: &'a Tensor,
    opts: Submit<'_, C>,
) -> Result<C::Output> {
    let alpha = alpha.into();
    let origin = origin_for("add_product", "add_product_t", &alpha, None);
    gemm_like(origin, c, alpha, a, b, Some(ScalarArg::Value(Scalar::real(1.0))), opts)
}

/// `C = alpha·A·B + beta·C`: `C` must exist with the product's shape.
///
/// ```
/// use tensorasync::{ops, Order, Scalar, Submit, Tensor};
/// let a = Tensor::from_slice(&[2, 2], Order::RowMajor, &[1.0f64, 2.0, 3.0, 4.0]).unwrap();
/// let b = Tensor::from_slice(&[2, 2], Order::RowMajor, &[5.0f64, 6.0, 7.0, 8.0]).unwrap();
/// let c = Tensor::from_slice(&[2, 2], Order::RowMajor, &[2.0f64; 4]).unwrap();
/// // C = 2·A·B + 0.5·C, with A·B = [[19, 22], [43, 50]].
/// ops::gemm(&c, Scalar::real(2.0), &a, &b, Scalar::real(0.5), Submit::default()).unwrap();
/// assert_eq!(c.to_vec::<f64>().unwrap(), vec![39.0, 45.0, 87.0, 101.0]);
/// // A transposed view is read as Aᵀ.
/// ops::gemm(&c, Scalar::real(1.0), &a.transpose().unwrap(), &b, Scalar::real(0.0), Submit::default()).unwrap();
/// assert_eq!(c.to_vec::<f64>().unwrap(), vec![26.0, 30.0, 38.0, 44.0]);
/// ```
pub fn gemm<'a, C: Completion>(
    c: &'a Tensor,
    alpha: impl Into<ScalarArg<'a>>,
    a: &'a Tensor,
    b: &'a Tensor,
    beta: impl Into<ScalarArg<'a>>,
    opts: Submit<'_, C>,
) -> Result<C::Output> {
    let (alpha, beta) = (alpha.into(), beta.into());
    gemm_like(origin_for("gemm", "gemm_t", &alpha, Some(&beta)), c, alpha, a, b, Some(beta), opts)
}

/// Tensor contraction (tensordot): pairs `(a_axes[k], b_axes[k])` are summed
/// over; `C`'s axes are `A`'s free axes then `B`'s, each in order. With
/// `beta` `None`, an overwrite (constructs or replaces `C` as
/// [`assign_product`] does); otherwise `C = alpha·(A·B) + beta·C`.
// The arguments are those of tensordot plus the BLAS-style scalars.
/// ```
/// use tensorasync::{ops, DType, Domain, Order, Scalar, Submit, Tensor};
/// let a = Tensor::from_slice(&[2, 3], Order::RowMajor, &[0.0f64, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
/// let b = Tensor::from_slice(&[3], Order::RowMajor, &[1.0f64, 10.0, 100.0]).unwrap();
/// let c = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
/// // c[i] = sum_k a[i, k] * b[k]
/// ops::contract(&c, Scalar::real(1.0), &a, &b, &[1], &[0], None, Submit::default()).unwrap();
/// assert_eq!(c.to_vec::<f64>().unwrap(), vec![210.0, 543.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn contract<'a, C: Completion>(
    c: &'a Tensor,
    alpha: impl Into<ScalarArg<'a>>,
    a: &'a Tensor,
    b: &'a Tensor,
    a_axes: &[usize],
    b_axes: &[usize],
    beta: Option<ScalarArg<'a>>,
    opts: Submit<'_, C>,
) -> Result<C::Output> {
    const O: &str = "contract";
    same_dtype_and_domain(O, &[c, a, b])?;
    let dtype = c.dtype();
    check_float(dtype, O)?;
    let mut args = Args::new(O, dtype, c, if beta.is_some() { Mode::Update } else { Mode::Write }, a, b);
    let alpha = args.scalar(alpha.into())?;
    let beta_slot = beta.map(|s| args.scalar(s)).transpose()?;
    let op = KernelOp::Contract(Box::new(crate::dispatch::ContractArgs {
        alpha,
        beta: beta_slot,
        a_axes: a_axes.into(),
        b_axes: b_axes.into(),
    }));
    let body = native(op, dtype, c, &opts, O)?;
    let n = args.len;
    submit(O, O, args.operands(), body, opts, |l| {
        scalars_are_0d(l, 3, n, O)?;
        let shape = shapes::contract_shape(&extents_of(l, 1), &extents_of(l, 2), a_axes, b_axes)
            .map_err(|e| Error::new(e.status(), O, e.message().to_string()))?;
        if shape.len() > crate::layout::MAX_RANK {
            return Err(Error::new(
                Status::InvalidArgument,
                O,
                format!(
                    "the result would have {} axes, and a tensor has at most {}",
                    shape.len(),
                    crate::layout::MAX_RANK
                ),
            ));
        }
        if beta_slot.is_some() {
            require_output(l, 0, &shape, O)
        } else {
            prepare_output(l, 0, dtype, &shape, false, O)
        }
    })
}

/// `dst = src` with axes reordered (axis `k` of `dst` is axis `perm[k]` of
/// `src`), materialised. Constructs an unconstructed `dst`.
///
/// ```
/// use tensorasync::{ops, DType, Domain, Order, Submit, Tensor};
/// let src = Tensor::from_slice(&[2, 3], Order::RowMajor, &[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
/// let dst = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
/// ops::permute(&dst, &src, &[1, 0], Submit::default()).unwrap();
/// assert_eq!(dst.extents().unwrap().as_slice(), &[3, 2]);
/// assert_eq!(dst.to_vec::<f64>().unwrap(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
/// ```
pub fn permute<C: Completion>(dst: &Tensor, src: &Tensor, perm: &[usize], opts: Submit<'_, C>) -> Result<C::Output> {
    const O: &str = "permute";
    same_dtype_and_domain(O, &[dst, src])?;
    check_float(dst.dtype(), O)?;
    let dtype = dst.dtype();
    let body = native(KernelOp::Permute(perm.into()), dtype, dst, &opts, O)?;
    submit(O, O, &[(dst, Mode::Write), (src, Mode::Read)], body, opts, |l| {
        let se = extents_of(l, 1);
        let mut seen = vec![false; se.len()];
        if perm.len() != se.len() || perm.iter().any(|&p| p >= se.len() || std::mem::replace(&mut seen[p], true)) {
            return Err(Error::new(
                Status::InvalidArgument,
                O,
                format!("{perm:?} is not a permutation of the {} axes of {se:?}", se.len()),
            ));
        }
        let want: Vec<usize> = perm.iter().map(|&p| se[p]).collect();
        prepare_output(l, 0, dtype, &want, false, O)
    })
}

/// `dst = conj(src)`, materialised (a copy for real dtypes). Constructs an
/// unconstructed `dst`.
///
/// ```
/// use num_complex::Complex32;
/// use tensorasync::{ops, DType, Domain, Order, Submit, Tensor};
/// let z = [Complex32::new(1.0, 2.0), Complex32::new(-3.0, -4.0)];
/// let src = Tensor::from_slice(&[2], Order::RowMajor, &z).unwrap();
/// let dst = Tensor::unconstructed(DType::C64, Domain::Host).unwrap();
/// ops::conj(&dst, &src, Submit::default()).unwrap();
/// assert_eq!(dst.to_vec::<Complex32>().unwrap(), vec![Complex32::new(1.0, -2.0), Complex32::new(-3.0, 4.0)]);
/// ```
pub fn conj<C: Completion>(dst: &Tensor, src: &Tensor, opts: Submit<'_, C>) -> Result<C::Output> {
    const O: &str = "conj";
    same_dtype_and_domain(O, &[dst, src])?;
    check_float(dst.dtype(), O)?;
    let dtype = dst.dtype();
    let body = native(KernelOp::ConjCopy, dtype, dst, &opts, O)?;
    submit(O, O, &[(dst, Mode::Write), (src, Mode::Read)], body, opts, |l| {
        let want = extents_of(l, 1);
        prepare_output(l, 0, dtype, &want, false, O)
    })
}

/// The dtype a reduction of `x` writes: real for `norm2`, else `x`'s.
fn reduction_dtype(x: DType, real: bool) -> DType {
    match (x, real) {
        (DType::C64, true) => DType::F32,
        (DType::C128, true) => DType::F64,
        (d, _) => d,
    }
}

fn reduction<C: Completion>(
    origin: &'static str,
    out: &Tensor,
    inputs: &[&Tensor],
    op: KernelOp,
    axes: Option<&[usize]>,
    real: bool,
    opts: Submit<'_, C>,
) -> Result<C::Output> {
    same_dtype_and_domain(origin, inputs)?;
    let x = inputs[0];
    check_float(x.dtype(), origin)?;
    let want_dtype = reduction_dtype(x.dtype(), real);
    if out.dtype() != want_dtype {
        return Err(Error::new(
            Status::DtypeMismatch,
            origin,
            format!(
                "{origin} of {} writes {}, the output is {}",
                x.dtype().name(),
                want_dtype.name(),
                out.dtype().name()
            ),
        ));
    }
    if out.domain() != x.domain() {
        return Err(Error::new(Status::DomainMismatch, origin, "the output lives in another domain"));
    }
    let body = native(op, x.dtype(), x, &opts, origin)?;
    let mut operands: SmallVec<[(&Tensor, Mode); 3]> = SmallVec::new();
    operands.push((out, Mode::Write));
    for t in inputs {
        operands.push((t, Mode::Read));
    }
    submit(origin, origin, &operands, body, opts, |l| {
        let xe = extents_of(l, 1);
        if inputs.len() == 2 && extents_of(l, 2) != xe {
            return Err(Error::new(
                Status::ShapeMismatch,
                origin,
                format!("x has extents {xe:?}, y has extents {:?}", extents_of(l, 2)),
            ));
        }
        let want = shapes::sum_shape(&xe, axes).map_err(|e| Error::new(e.status(), origin, e.message().to_string()))?;
        prepare_output(l, 0, want_dtype, &want, axes.is_none(), origin)
    })
}

/// Sum of all elements (`axes` `None`, into a 0-d tensor) or over the given
/// axes (into a tensor of the remaining axes). Constructs an unconstructed `out`.
///
/// ```
/// use tensorasync::{ops, DType, Domain, Order, Submit, Tensor};
/// let x = Tensor::from_slice(&[2, 2], Order::RowMajor, &[1.0f64, 2.0, 3.0, 4.0]).unwrap();
/// let total = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
/// ops::sum(&total, &x, None, Submit::default()).unwrap();
/// assert_eq!(total.to_vec::<f64>().unwrap(), vec![10.0]);
/// let columns = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
/// ops::sum(&columns, &x, Some(&[0]), Submit::default()).unwrap();
/// assert_eq!(columns.to_vec::<f64>().unwrap(), vec![4.0, 6.0]);
/// ```
pub fn sum<C: Completion>(out: &Tensor, x: &Tensor, axes: Option<&[usize]>, opts: Submit<'_, C>) -> Result<C::Output> {
    reduction("sum", out, &[x], KernelOp::Sum(axes.map(Into::into)), axes, false, opts)
}

/// `out = sum(conj(x) · y)` with `conjugate`, else `sum(x · y)`, into a 0-d tensor.
///
/// ```
/// use tensorasync::{ops, DType, Domain, Order, Submit, Tensor};
/// let x = Tensor::from_slice(&[3], Order::RowMajor, &[1.0f64, 2.0, 3.0]).unwrap();
/// let y = Tensor::from_slice(&[3], Order::RowMajor, &[4.0f64, 5.0, 6.0]).unwrap();
/// let out = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
/// ops::dot(&out, &x, &y, false, Submit::default()).unwrap();
/// assert_eq!(out.to_vec::<f64>().unwrap(), vec![32.0]);
/// ```
pub fn dot<C: Completion>(
    out: &Tensor,
    x: &Tensor,
    y: &Tensor,
    conjugate: bool,
    opts: Submit<'_, C>,
) -> Result<C::Output> {
    reduction("dot", out, &[x, y], KernelOp::Dot { conjugate }, None, false, opts)
}

/// The Euclidean norm of all elements, into a 0-d tensor of the real dtype.
///
/// ```
/// use num_complex::Complex64;
/// use tensorasync::{ops, DType, Domain, Order, Submit, Tensor};
/// let x = Tensor::from_slice(&[2], Order::RowMajor, &[Complex64::new(3.0, 0.0), Complex64::new(0.0, 4.0)]).unwrap();
/// let out = Tensor::unconstructed(DType::F64, Domain::Host).unwrap(); // real, for a complex x
/// ops::norm2(&out, &x, Submit::default()).unwrap();
/// assert!((out.to_vec::<f64>().unwrap()[0] - 5.0).abs() < 1e-12);
/// ```
pub fn norm2<C: Completion>(out: &Tensor, x: &Tensor, opts: Submit<'_, C>) -> Result<C::Output> {
    reduction("norm2", out, &[x], KernelOp::Norm2, None, true, opts)
}

/// Which triangle of a matrix an operation uses.
///
/// ```
/// use tensorasync::{ops, Order, Submit, Tensor};
/// use tensorasync::ops::Uplo;
/// // [[4, 2], [2, 5]] = Uᵀ·U with U = [[2, 1], [0, 2]]; the strict lower triangle is untouched.
/// let a = Tensor::from_slice(&[2, 2], Order::RowMajor, &[4.0f64, 2.0, 2.0, 5.0]).unwrap();
/// ops::potrf(&a, Uplo::Upper, Submit::default()).unwrap();
/// assert_eq!(a.to_vec::<f64>().unwrap(), vec![2.0, 1.0, 2.0, 2.0]);
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Uplo {
    Lower,
    Upper,
}

/// In-place Cholesky factorisation of a square matrix: with `Lower`,
/// `A = L·L^H` and `L` overwrites the lower triangle (the strict upper one is
/// untouched). A matrix that is not positive definite fails the operation
/// (and poisons `A`).
///
/// ```
/// use tensorasync::{ops, Order, Status, Submit, Tensor};
/// use tensorasync::ops::Uplo;
/// // [[4, 2], [2, 5]] = L·Lᵀ with L = [[2, 0], [1, 2]]; the strict upper triangle is untouched.
/// let a = Tensor::from_slice(&[2, 2], Order::RowMajor, &[4.0f64, 2.0, 2.0, 5.0]).unwrap();
/// ops::potrf(&a, Uplo::Lower, Submit::default()).unwrap();
/// assert_eq!(a.to_vec::<f64>().unwrap(), vec![2.0, 2.0, 1.0, 2.0]);
/// // Not positive definite: the operation fails and poisons the matrix.
/// let bad = Tensor::from_slice(&[2, 2], Order::RowMajor, &[1.0f64, 2.0, 2.0, 1.0]).unwrap();
/// let ev = ops::potrf(&bad, Uplo::Lower, Submit::default()).unwrap();
/// assert!(ev.wait(None).is_err());
/// assert!(bad.to_vec::<f64>().is_err());
/// ```
pub fn potrf<C: Completion>(a: &Tensor, uplo: Uplo, opts: Submit<'_, C>) -> Result<C::Output> {
    const O: &str = "potrf";
    check_float(a.dtype(), O)?;
    let body = native(KernelOp::Potrf { lower: uplo == Uplo::Lower }, a.dtype(), a, &opts, O)?;
    submit(O, O, &[(a, Mode::Update)], body, opts, |l| {
        let e = extents_of(l, 0);
        if e.len() != 2 || e[0] != e[1] {
            return Err(Error::new(
                Status::ShapeMismatch,
                O,
                format!("potrf needs a square matrix, not extents {e:?}"),
            ));
        }
        Ok(())
    })
}

/// Triangular solve: `op(A)·X = alpha·B` (`left`) or `X·op(A) = alpha·B`,
/// `X` overwriting `B`. `A` is triangular as given (`uplo` describes the
/// matrix the handle shows, so a transposed view of a lower `L` is `Upper`);
/// `unit_diag` treats its diagonal as ones.
///
/// ```
/// use tensorasync::{ops, Order, Scalar, Submit, Tensor};
/// use tensorasync::ops::Uplo;
/// // Solve L·x = b with L = [[2, 0], [1, 2]], b = [2, 5]: x = [1, 2].
/// let l = Tensor::from_slice(&[2, 2], Order::RowMajor, &[2.0f64, 0.0, 1.0, 2.0]).unwrap();
/// let b = Tensor::from_slice(&[2, 1], Order::RowMajor, &[2.0f64, 5.0]).unwrap();
/// ops::trsm(&b, true, Uplo::Lower, false, Scalar::real(1.0), &l, Submit::default()).unwrap();
/// assert_eq!(b.to_vec::<f64>().unwrap(), vec![1.0, 2.0]);
/// ```
pub fn trsm<C: Completion>(
    b: &Tensor,
    left: bool,
    uplo: Uplo,
    unit_diag: bool,
    alpha: Scalar,
    a: &Tensor,
    opts: Submit<'_, C>,
) -> Result<C::Output> {
    const O: &str = "trsm";
    same_dtype_and_domain(O, &[b, a])?;
    check_float(b.dtype(), O)?;
    alpha.check_for(b.dtype(), O)?;
    let op = KernelOp::Trsm { left, lower: uplo == Uplo::Lower, unit_diag, alpha };
    let body = native(op, b.dtype(), b, &opts, O)?;
    submit(O, O, &[(b, Mode::Update), (a, Mode::Read)], body, opts, |l| {
        let (eb, ea) = (extents_of(l, 0), extents_of(l, 1));
        let need = if left { eb.first().copied() } else { eb.get(1).copied() };
        if eb.len() != 2 || ea.len() != 2 || ea[0] != ea[1] || need != Some(ea[0]) {
            return Err(Error::new(
                Status::ShapeMismatch,
                O,
                format!(
                    "trsm: A is {ea:?} and B is {eb:?}; A must be square and match B's {} extent",
                    if left { "row" } else { "column" }
                ),
            ));
        }
        Ok(())
    })
}

/// Symmetric (Hermitian) rank-k update of one triangle: `C = alpha·A·A^H +
/// beta·C` (`beta` `None`: `C`'s old values are not read).
///
/// ```
/// use tensorasync::{ops, DType, Order, Scalar, Submit, Tensor};
/// use tensorasync::ops::Uplo;
/// // C = A·Aᵀ with A = [1, 2]ᵀ: [[1, 2], [2, 4]], lower triangle only.
/// let a = Tensor::from_slice(&[2, 1], Order::RowMajor, &[1.0f64, 2.0]).unwrap();
/// let c = Tensor::zeros(DType::F64, &[2, 2], Order::RowMajor, Default::default()).unwrap();
/// ops::syrk(&c, Uplo::Lower, Scalar::real(1.0), &a, None, Submit::default()).unwrap();
/// let v = c.to_vec::<f64>().unwrap();
/// assert_eq!((v[0], v[2], v[3]), (1.0, 2.0, 4.0));
/// ```
pub fn syrk<C: Completion>(
    c: &Tensor,
    uplo: Uplo,
    alpha: Scalar,
    a: &Tensor,
    beta: Option<Scalar>,
    opts: Submit<'_, C>,
) -> Result<C::Output> {
    const O: &str = "syrk";
    same_dtype_and_domain(O, &[c, a])?;
    check_float(c.dtype(), O)?;
    for (what, s) in [("alpha", Some(alpha)), ("beta", beta)] {
        let Some(s) = s else { continue };
        s.check_for(c.dtype(), O)?;
        if s.im != 0.0 {
            return Err(Error::new(
                Status::InvalidArgument,
                O,
                format!("{what} must be real (a Hermitian update), not {} + {}i", s.re, s.im),
            ));
        }
    }
    let op = KernelOp::Syrk { lower: uplo == Uplo::Lower, alpha, beta };
    let body = native(op, c.dtype(), c, &opts, O)?;
    // An update even without beta: the other triangle keeps its old values.
    submit(O, O, &[(c, Mode::Update), (a, Mode::Read)], body, opts, |l| {
        let (ec, ea) = (extents_of(l, 0), extents_of(l, 1));
        if ec.len() != 2 || ea.len() != 2 || ec[0] != ec[1] || ec[0] != ea[0] {
            return Err(Error::new(
                Status::ShapeMismatch,
                O,
                format!("syrk: C is {ec:?} and A is {ea:?}; C must be square with A's row count"),
            ));
        }
        Ok(())
    })
}
