//! Dense linear algebra from C: the gemm family, contraction, materialising
//! permute and conj, reductions, and tile kernels.

use std::ffi::c_char;

use super::args::array_arg;
use super::handles::Borrows;
use super::ops::{per_form, submit_borrowing, submit_in, submit_with};
use super::{arg, borrowed, guard};
use super::{ta_diag, ta_error, ta_event, ta_scalar, ta_side, ta_status, ta_submit, ta_tensor, ta_uplo};
use super::{TA_DIAG_NON_UNIT, TA_DIAG_UNIT, TA_SIDE_LEFT, TA_SIDE_RIGHT, TA_UPLO_LOWER, TA_UPLO_UPPER};
use ta::ops::{self, ScalarArg, Uplo};
use ta::Scalar;
use ta::Tensor;
use ta::{Error, Status};

fn sc(s: ta_scalar) -> Scalar {
    Scalar::complex(s.re, s.im)
}

fn uplo_arg(u: ta_uplo, origin: &'static str) -> Result<Uplo, Error> {
    match u {
        TA_UPLO_LOWER => Ok(Uplo::Lower),
        TA_UPLO_UPPER => Ok(Uplo::Upper),
        _ => Err(Error::new(Status::InvalidArgument, origin, format!("unknown uplo {u}"))),
    }
}

/// A scalar argument from C: an immediate `ta_scalar`, or a 0-d tensor read
/// when the operation runs (the `_t` forms, which share their bodies with
/// the plain ones through this).
trait CScalar: Copy {
    /// The handle to lock before [`CScalar::borrow`] (NULL for an immediate).
    fn handle(self) -> *const ta_tensor;
    /// The scalar, its tensor borrowed from `b`.
    fn borrow<'b>(self, b: &'b Borrows, origin: &'static str, what: &str) -> Result<ScalarArg<'b>, Error>;
}

impl CScalar for ta_scalar {
    #[inline(always)]
    fn handle(self) -> *const ta_tensor {
        std::ptr::null()
    }
    #[inline(always)]
    fn borrow<'b>(self, _: &'b Borrows, _: &'static str, _: &str) -> Result<ScalarArg<'b>, Error> {
        Ok(ScalarArg::Value(sc(self)))
    }
}

impl CScalar for *const ta_tensor {
    #[inline(always)]
    fn handle(self) -> *const ta_tensor {
        self
    }
    #[inline(always)]
    fn borrow<'b>(self, b: &'b Borrows, origin: &'static str, what: &str) -> Result<ScalarArg<'b>, Error> {
        borrowed(b, self, origin, what).map(ScalarArg::Tensor)
    }
}

/// The operands of a product, `c`, `a` and `b`, borrowed from `b`.
#[inline(always)]
fn three<'b>(
    bw: &'b Borrows,
    c: *const ta_tensor,
    a: *const ta_tensor,
    b: *const ta_tensor,
    origin: &'static str,
) -> Result<[&'b Tensor; 3], Error> {
    Ok([borrowed(bw, c, origin, "c")?, borrowed(bw, a, origin, "a")?, borrowed(bw, b, origin, "b")?])
}

/// `ta_gemm` and `ta_gemm_t`.
#[allow(clippy::too_many_arguments)]
fn gemm(
    origin: &'static str,
    c: *const ta_tensor,
    alpha: impl CScalar,
    a: *const ta_tensor,
    b: *const ta_tensor,
    beta: impl CScalar,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    // The handles are borrowed, not cloned: no reference count per operand.
    guard(origin, error, || {
        per_form!(event_out, |form| submit_borrowing(
            form,
            origin,
            [c, a, b, alpha.handle(), beta.handle()],
            opts,
            event_out,
            |bw| {
                let [c, a, b] = three(bw, c, a, b, origin)?;
                let (al, be) = (alpha.borrow(bw, origin, "alpha")?, beta.borrow(bw, origin, "beta")?);
                submit_in(form, bw, origin, opts, |s| ops::gemm(c, al, a, b, be, s))
            }
        ))
    })
}

/// `ta_assign_product` (`add` false), `ta_add_product` and their `_t` forms.
#[allow(clippy::too_many_arguments)]
fn product(
    origin: &'static str,
    add: bool,
    c: *const ta_tensor,
    alpha: impl CScalar,
    a: *const ta_tensor,
    b: *const ta_tensor,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    guard(origin, error, || {
        per_form!(event_out, |form| submit_borrowing(form, origin, [c, a, b, alpha.handle()], opts, event_out, |bw| {
            let [c, a, b] = three(bw, c, a, b, origin)?;
            let al = alpha.borrow(bw, origin, "alpha")?;
            submit_in(form, bw, origin, opts, |s| match add {
                false => ops::assign_product(c, al, a, b, s),
                true => ops::add_product(c, al, a, b, s),
            })
        }))
    })
}

/// `C = alpha·A·B + beta·C` for f32, f64, complex64 and complex128. `C` must
/// exist with the product's shape (`TA_STATUS_SHAPE_MISMATCH`, known at
/// submission). Transposed and conj views of `A` and `B` are used without
/// copies. `alpha`/`beta` are immediate; see `ta_gemm_t` for 0-d tensors.
/// With `beta` 0, `C`'s old values are not read (NaN in `C` does not
/// propagate), but `C` must still exist with the right shape. The linear
/// algebra operations (gemm family, contract, permute, conj, sum, dot,
/// norm2, potrf, trsm, syrk) take float and complex dtypes only
/// (`TA_STATUS_UNSUPPORTED` for integer ones).
#[no_mangle]
pub extern "C" fn ta_gemm(
    c: *const ta_tensor,
    alpha: ta_scalar,
    a: *const ta_tensor,
    b: *const ta_tensor,
    beta: ta_scalar,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    gemm("ta_gemm", c, alpha, a, b, beta, opts, event_out, error)
}

/// `ta_gemm` with `alpha` and `beta` read from 0-d tensors of the operation's
/// dtype when the operation runs (asynchronous scalars, ordered like any operand).
#[no_mangle]
pub extern "C" fn ta_gemm_t(
    c: *const ta_tensor,
    alpha: *const ta_tensor,
    a: *const ta_tensor,
    b: *const ta_tensor,
    beta: *const ta_tensor,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    gemm("ta_gemm_t", c, alpha, a, b, beta, opts, event_out, error)
}

/// `C = alpha·A·B`, an overwrite: an unconstructed `C` is constructed (dense
/// row-major, the product's shape), a whole `C` of another shape gets new
/// storage (refused while it has views, and for a `C` that wraps caller
/// memory: `TA_STATUS_SHAPE_MISMATCH`), and a `C` of the right shape is
/// written in place.
#[no_mangle]
pub extern "C" fn ta_assign_product(
    c: *const ta_tensor,
    alpha: ta_scalar,
    a: *const ta_tensor,
    b: *const ta_tensor,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    product("ta_assign_product", false, c, alpha, a, b, opts, event_out, error)
}

/// `ta_assign_product` with `alpha` read from a 0-d tensor when the operation runs.
#[no_mangle]
pub extern "C" fn ta_assign_product_t(
    c: *const ta_tensor,
    alpha: *const ta_tensor,
    a: *const ta_tensor,
    b: *const ta_tensor,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    product("ta_assign_product_t", false, c, alpha, a, b, opts, event_out, error)
}

/// `C = alpha·A·B + C`: `C` must exist with the product's shape.
#[no_mangle]
pub extern "C" fn ta_add_product(
    c: *const ta_tensor,
    alpha: ta_scalar,
    a: *const ta_tensor,
    b: *const ta_tensor,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    product("ta_add_product", true, c, alpha, a, b, opts, event_out, error)
}

/// `ta_add_product` with `alpha` read from a 0-d tensor when the operation runs.
#[no_mangle]
pub extern "C" fn ta_add_product_t(
    c: *const ta_tensor,
    alpha: *const ta_tensor,
    a: *const ta_tensor,
    b: *const ta_tensor,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    product("ta_add_product_t", true, c, alpha, a, b, opts, event_out, error)
}

/// Tensor contraction (tensordot): axes `a_axes[k]` of `A` and `b_axes[k]` of
/// `B` (k < `naxes`) are summed over in pairs; `C`'s axes are `A`'s remaining
/// axes then `B`'s, each in order. With `beta` NULL, an overwrite that
/// constructs or reshapes `C` as `ta_assign_product` does; otherwise
/// `C = alpha·(A·B) + beta·C` with `C` of the right shape. A result of more
/// than 64 axes fails with `TA_STATUS_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn ta_contract(
    c: *const ta_tensor,
    alpha: ta_scalar,
    a: *const ta_tensor,
    b: *const ta_tensor,
    naxes: usize,
    a_axes: *const usize,
    b_axes: *const usize,
    beta: *const ta_scalar,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_contract";
    guard(O, error, || {
        per_form!(event_out, |form| submit_borrowing(form, O, [c, a, b], opts, event_out, |bw| {
            let [c, a, b] = three(bw, c, a, b, O)?;
            let (aa, ba) = (array_arg(a_axes, naxes, O, "a_axes")?, array_arg(b_axes, naxes, O, "b_axes")?);
            // SAFETY: a non-NULL `beta` points to a readable ta_scalar by the C contract.
            let beta = (!beta.is_null()).then(|| ScalarArg::Value(sc(unsafe { *beta })));
            submit_in(form, bw, O, opts, |s| ops::contract(c, sc(alpha), a, b, aa, ba, beta, s))
        }))
    })
}

/// `dst = src` with axes reordered (axis `k` of `dst` is axis `perm[k]` of
/// `src`), materialised; an unconstructed `dst` is constructed, a `dst` the
/// library owns of another shape gets new storage, and a `dst` that wraps
/// caller memory (or is a view) must have the result's shape
/// (`TA_STATUS_SHAPE_MISMATCH`). (For a view without copying, see
/// `ta_tensor_permute`.)
#[no_mangle]
pub extern "C" fn ta_permute(
    dst: *const ta_tensor,
    src: *const ta_tensor,
    rank: usize,
    perm: *const usize,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_permute";
    guard(O, error, || {
        let (d, s0) = (arg(dst, O, "dst")?, arg(src, O, "src")?);
        let perm = array_arg(perm, rank, O, "perm")?;
        per_form!(event_out, |form| submit_with(form, O, opts, event_out, |s| ops::permute(&d, &s0, perm, s)))
    })
}

/// `dst = conj(src)`, materialised (a copy for real dtypes); `dst` is
/// constructed or reshaped as `ta_permute` says. (For a lazy view, see
/// `ta_tensor_conj`.)
#[no_mangle]
pub extern "C" fn ta_conj(
    dst: *const ta_tensor,
    src: *const ta_tensor,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_conj";
    guard(O, error, || {
        let (d, s0) = (arg(dst, O, "dst")?, arg(src, O, "src")?);
        per_form!(event_out, |form| submit_with(form, O, opts, event_out, |s| ops::conj(&d, &s0, s)))
    })
}

/// The sum of `x` over `axes` (`naxes` of them) into `out`, a tensor of the
/// remaining axes; `axes` NULL sums every element into a 0-d `out`. An
/// unconstructed `out` is constructed; an owned `out` of another shape gets
/// new storage. An `out` that wraps caller memory keeps it: a 0-d result is
/// written into a one-element `out` of any rank, any other shape change is
/// `TA_STATUS_SHAPE_MISMATCH`. `ta_dot` and `ta_norm2` treat their `out` the
/// same way.
#[no_mangle]
pub extern "C" fn ta_sum(
    out: *const ta_tensor,
    x: *const ta_tensor,
    naxes: usize,
    axes: *const usize,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_sum";
    guard(O, error, || {
        let (o, xt) = (arg(out, O, "out")?, arg(x, O, "x")?);
        let axes = if axes.is_null() { None } else { Some(array_arg(axes, naxes, O, "axes")?) };
        per_form!(event_out, |form| submit_with(form, O, opts, event_out, |s| ops::sum(&o, &xt, axes, s)))
    })
}

/// The dot product into a 0-d `out`: `sum(conj(x)·y)` when `conjugate` is
/// non-zero, else `sum(x·y)`. `x` and `y` have equal extents.
#[no_mangle]
pub extern "C" fn ta_dot(
    out: *const ta_tensor,
    x: *const ta_tensor,
    y: *const ta_tensor,
    conjugate: i32,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_dot";
    guard(O, error, || {
        let (o, xt, yt) = (arg(out, O, "out")?, arg(x, O, "x")?, arg(y, O, "y")?);
        per_form!(event_out, |form| submit_with(form, O, opts, event_out, |s| ops::dot(
            &o,
            &xt,
            &yt,
            conjugate != 0,
            s
        )))
    })
}

/// The Euclidean norm of every element of `x` into a 0-d `out` of the real
/// dtype (f32 for complex64, f64 for complex128).
#[no_mangle]
pub extern "C" fn ta_norm2(
    out: *const ta_tensor,
    x: *const ta_tensor,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_norm2";
    guard(O, error, || {
        let (o, xt) = (arg(out, O, "out")?, arg(x, O, "x")?);
        per_form!(event_out, |form| submit_with(form, O, opts, event_out, |s| ops::norm2(&o, &xt, s)))
    })
}

/// In-place Cholesky factorisation of a square matrix: with
/// `TA_UPLO_LOWER`, `A = L·L^H` and `L` overwrites the lower triangle (the
/// strict upper triangle is neither read nor written). A matrix that is not
/// positive definite fails the operation with `TA_STATUS_INVALID_ARGUMENT`
/// ("the leading minor of order k is not positive definite") and poisons
/// `A`.
#[no_mangle]
pub extern "C" fn ta_potrf(
    a: *const ta_tensor,
    uplo: ta_uplo,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_potrf";
    guard(O, error, || {
        let at = arg(a, O, "a")?;
        let u = uplo_arg(uplo, O)?;
        per_form!(event_out, |form| submit_with(form, O, opts, event_out, |s| ops::potrf(&at, u, s)))
    })
}

/// Triangular solve: `A·X = alpha·B` (`TA_SIDE_LEFT`) or `X·A = alpha·B`
/// (`TA_SIDE_RIGHT`), `X` overwriting `B`. `uplo` and `diag` describe `A` as
/// given: a transposed view of a lower `L` is `TA_UPLO_UPPER`. Only the named
/// triangle of `A` is read.
#[no_mangle]
pub extern "C" fn ta_trsm(
    b: *const ta_tensor,
    side: ta_side,
    uplo: ta_uplo,
    diag: ta_diag,
    alpha: ta_scalar,
    a: *const ta_tensor,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_trsm";
    guard(O, error, || {
        let (bt, at) = (arg(b, O, "b")?, arg(a, O, "a")?);
        let left = match side {
            TA_SIDE_LEFT => true,
            TA_SIDE_RIGHT => false,
            x => return Err(Error::new(Status::InvalidArgument, O, format!("unknown side {x}"))),
        };
        let unit = match diag {
            TA_DIAG_NON_UNIT => false,
            TA_DIAG_UNIT => true,
            x => return Err(Error::new(Status::InvalidArgument, O, format!("unknown diag {x}"))),
        };
        let u = uplo_arg(uplo, O)?;
        per_form!(event_out, |form| submit_with(form, O, opts, event_out, |s| ops::trsm(
            &bt,
            left,
            u,
            unit,
            sc(alpha),
            &at,
            s
        )))
    })
}

/// Symmetric (Hermitian for complex) rank-k update of one triangle of a
/// square `C`: `C = alpha·A·A^H + beta·C` (real `alpha` and `beta` for complex).
#[no_mangle]
pub extern "C" fn ta_syrk(
    c: *const ta_tensor,
    uplo: ta_uplo,
    alpha: ta_scalar,
    a: *const ta_tensor,
    beta: ta_scalar,
    opts: *const ta_submit,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_syrk";
    guard(O, error, || {
        let (ct, at) = (arg(c, O, "c")?, arg(a, O, "a")?);
        let u = uplo_arg(uplo, O)?;
        per_form!(event_out, |form| submit_with(form, O, opts, event_out, |s| ops::syrk(
            &ct,
            u,
            sc(alpha),
            &at,
            Some(sc(beta)),
            s
        )))
    })
}

/// Describe the system BLAS found at run time (library, configuration and,
/// for OpenBLAS, the kernel it chose for this CPU, with a note when that
/// kernel is a fallback below the CPU's instruction set and the
/// `OPENBLAS_CORETYPE` setting that fixes it) into `buf` as
/// `ta_error_message` does; `TA_STATUS_UNSUPPORTED` when none was found (the
/// BLAS backend then declines everything). The dispatcher prefers the native
/// backend for every operation but the gemm below, which goes to the system
/// BLAS first when that is an OpenBLAS whose kernel matches this CPU and
/// which runs one thread per call: on a CPU with AVX-512, gemm of every
/// floating-point type whose extents are all 2048 or more (measured at
/// 0.98-1.11 times the native backend's speed there), and on an AMD CPU with
/// AVX-512, double-precision gemm whose extents are all from 24 to 96 and
/// single-precision gemm whose extents are all from 24 to 64 (measured at
/// 1.01-1.39 times the native backend's speed); on a CPU with
/// AVX2 but not AVX-512, gemm of every floating-point type whose extents are
/// all 1024 or more (measured at 0.95-1.57 times the native backend's speed
/// at 1024 and 1.11-1.31 times at 2048); on other CPUs, complex gemm whose
/// extents are all 2048 or more; otherwise the system BLAS runs only where a
/// submission's backend selector asks for it. The library sets OpenBLAS (or
/// BLIS) to one thread when it loads it, and runs a large gemm through it as
/// blocks of the output on the runtime's workers, one call each, or (from
/// 512 x 512 x 512 multiply-adds) as one call with a thread for the calling
/// worker and one for each idle worker, which sleeps meanwhile: a BLAS
/// product uses the runtime's cores and does not add to them.
#[no_mangle]
pub extern "C" fn ta_blas_info(buf: *mut c_char, cap: usize, len_out: *mut usize) -> ta_status {
    const O: &str = "ta_blas_info";
    guard(O, std::ptr::null_mut(), || {
        super::error::check_buf(buf, cap, O)?;
        let info = ta::blas_info().ok_or_else(|| Error::new(Status::Unsupported, O, "no system BLAS was found"))?;
        super::error::copy_str(&info, buf, cap, len_out);
        Ok(())
    })
}
