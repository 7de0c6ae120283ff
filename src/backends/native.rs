//! The native CPU backend: pure-Rust leaf kernels over resolved strided views.
//! Always present, every dtype, any strides; conj flags on inputs are honoured.

use crate::dispatch::backend::{Backend, BackendKind, Outcome, RunCtx};
use crate::dispatch::op::{HostBuffer, KernelOp, OpTag};
use crate::domain::Domain;
use crate::dtype::with_element_type;
use crate::dtype::{DType, Element, Imm, Scalar};
use crate::error::{Error, Result, Status};
use crate::kernels::contract;
use crate::kernels::copy as kcopy;
use crate::kernels::gemm;
use crate::kernels::operand::Operand;
use crate::kernels::potrf;
use crate::kernels::reduce;
use crate::kernels::syrk;
use crate::kernels::trsm;
use crate::layout::{for_each_run, Layout};
use crate::resolved::ResolvedView;

/// The native backend (always present, every dtype, any strides).
pub(crate) struct NativeBackend;

impl Backend for NativeBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Native
    }
    fn name(&self) -> &'static str {
        "native"
    }
    fn offers(&self, _tag: OpTag, _dtype: DType, domain: Domain) -> bool {
        // Every dispatched operation, every dtype, any strides.
        domain == Domain::Host
    }
    fn run(&self, op: &KernelOp, v: &[ResolvedView<'_>], _cx: &mut RunCtx) -> Outcome {
        // SAFETY (all arms): the views were resolved from granted accesses, so
        // their elements lie inside live storage and no other task writes them
        // concurrently; host buffers are valid by the caller's contract.
        Outcome::Done(unsafe {
            match op {
                KernelOp::Fill(s) => {
                    fill(&v[0], *s);
                    Ok(())
                }
                KernelOp::Scale(s) => {
                    scale(&v[0], *s);
                    Ok(())
                }
                KernelOp::Axpy(s) => axpy(&v[0], *s, &v[1]),
                KernelOp::Copy => copy_views(&v[0], &v[1]),
                KernelOp::CopyIn(buf) => copy_in(&v[0], buf),
                KernelOp::CopyOut(buf) => copy_out(&v[0], buf),
                KernelOp::Gemm { alpha, beta } => {
                    let (c, a, b) = (Operand::from(&v[0]), Operand::from(&v[1]), Operand::from(&v[2]));
                    gemm::gemm(&c, alpha.get(v), &a, &b, beta.map(|s| s.get(v)))
                }
                KernelOp::Contract(x) => {
                    let (c, a, b) = (Operand::from(&v[0]), Operand::from(&v[1]), Operand::from(&v[2]));
                    contract::contract(&c, x.alpha.get(v), &a, &b, &x.a_axes, &x.b_axes, x.beta.map(|s| s.get(v)))
                }
                KernelOp::Permute(perm) => kcopy::permute_copy(&Operand::from(&v[0]), &Operand::from(&v[1]), perm),
                KernelOp::ConjCopy => kcopy::conj_copy(&Operand::from(&v[0]), &Operand::from(&v[1])),
                KernelOp::Sum(axes) => reduce::sum(&Operand::from(&v[0]), &Operand::from(&v[1]), axes.as_deref()),
                KernelOp::Dot { conjugate } => {
                    reduce::dot(&Operand::from(&v[0]), &Operand::from(&v[1]), &Operand::from(&v[2]), *conjugate)
                }
                KernelOp::Norm2 => reduce::norm2(&Operand::from(&v[0]), &Operand::from(&v[1])),
                KernelOp::Potrf { lower } => potrf::potrf(&Operand::from(&v[0]), *lower).map_err(Error::from),
                KernelOp::Trsm { left, lower, unit_diag, alpha } => {
                    trsm::trsm(&Operand::from(&v[0]), &Operand::from(&v[1]), *left, *lower, *unit_diag, *alpha)
                }
                KernelOp::Syrk { lower, alpha, beta } => {
                    syrk::syrk(&Operand::from(&v[0]), &Operand::from(&v[1]), *alpha, *beta, *lower)
                }
            }
        })
    }
}

fn shape_error(what: &'static str, a: &[usize], b: &[usize]) -> Error {
    Error::new(Status::ShapeMismatch, what, format!("shapes {a:?} and {b:?} differ"))
}

/// Fill every element with `s`.
///
/// # Safety
/// `v` must address writable elements that no one else accesses meanwhile.
unsafe fn fill(v: &ResolvedView<'_>, s: Imm) {
    with_element_type!(v.dtype, T => {
        let x = T::from_imm(s);
        let base = v.ptr as *mut T;
        for_each_run(v.extents, [0], [v.strides], |[o], n, [st]| {
            for i in 0..n as isize {
                unsafe { *base.offset(o + i * st) = x };
            }
        });
    })
}

/// `x = s * x`.
///
/// # Safety
/// As for [`fill`].
unsafe fn scale(v: &ResolvedView<'_>, s: Imm) {
    with_element_type!(v.dtype, T => {
        let a = T::from_imm(s);
        let base = v.ptr as *mut T;
        for_each_run(v.extents, [0], [v.strides], |[o], n, [st]| {
            for i in 0..n as isize {
                unsafe {
                    let p = base.offset(o + i * st);
                    *p = a.mul(*p);
                }
            }
        });
    })
}

/// `y = s * x + y` (with `x` conjugated if its view says so).
///
/// # Safety
/// `y` writable and exclusively accessed, `x` readable.
unsafe fn axpy(y: &ResolvedView<'_>, s: Scalar, x: &ResolvedView<'_>) -> Result<()> {
    if y.extents != x.extents {
        return Err(shape_error("axpy", y.extents, x.extents));
    }
    with_element_type!(y.dtype, T => {
        let a = T::from_scalar(s);
        let (py, px) = (y.ptr as *mut T, x.ptr as *const T);
        let cj = x.conj;
        for_each_run(y.extents, [0, 0], [y.strides, x.strides], |[oy, ox], n, [sy, sx]| {
            // Dense runs (nearly all) in a loop the compiler vectorises.
            if sy == 1 && sx == 1 && !cj {
                let (py, px) = unsafe { (py.offset(oy), px.offset(ox)) };
                for i in 0..n {
                    unsafe { *py.add(i) = a.mul(*px.add(i)).add(*py.add(i)) };
                }
                return;
            }
            for i in 0..n as isize {
                unsafe {
                    let xv = *px.offset(ox + i * sx);
                    let xv = if cj { xv.conj() } else { xv };
                    let p = py.offset(oy + i * sy);
                    *p = a.mul(xv).add(*p);
                }
            }
        });
    });
    Ok(())
}

/// Copy `src` into `dst` element by element (shapes must match), conjugating
/// if `src` is a conj view of a complex tensor.
///
/// # Safety
/// `dst` writable and exclusively accessed, `src` readable.
unsafe fn copy_views(dst: &ResolvedView<'_>, src: &ResolvedView<'_>) -> Result<()> {
    if dst.extents != src.extents {
        return Err(shape_error("copy", dst.extents, src.extents));
    }
    if dst.dtype != src.dtype {
        return Err(Error::new(Status::DtypeMismatch, "copy", "dtypes differ"));
    }
    let conj = src.conj && src.dtype.is_complex();
    unsafe { copy_strided(dst.dtype, dst.extents, (dst.ptr, 0, dst.strides), (src.ptr, 0, src.strides), conj) };
    Ok(())
}

unsafe fn copy_in(dst: &ResolvedView<'_>, buf: &HostBuffer) -> Result<()> {
    let b = &buf.layout;
    if dst.extents != &b.extents[..] {
        return Err(shape_error("copy_in", dst.extents, &b.extents));
    }
    unsafe { copy_strided(dst.dtype, dst.extents, (dst.ptr, 0, dst.strides), (buf.ptr, b.offset, &b.strides), false) };
    Ok(())
}

unsafe fn copy_out(src: &ResolvedView<'_>, buf: &HostBuffer) -> Result<()> {
    let b = &buf.layout;
    if src.extents != &b.extents[..] {
        return Err(shape_error("copy_out", src.extents, &b.extents));
    }
    let conj = src.conj && src.dtype.is_complex();
    unsafe { copy_strided(src.dtype, src.extents, (buf.ptr, b.offset, &b.strides), (src.ptr, 0, src.strides), conj) };
    Ok(())
}

/// Copy between two layouts of equal extents, relative to base pointers.
///
/// # Safety
/// Every element of `dl` at `dst` must be writable, every element of `sl` at
/// `src` readable, and the two must not overlap.
pub(crate) unsafe fn copy_raw(dtype: DType, dst: *mut u8, dl: &Layout, src: *const u8, sl: &Layout) {
    unsafe { copy_layouts(dtype, dst, dl, src, sl, false) }
}

/// [`copy_raw`], conjugating complex elements if `conj`.
///
/// # Safety
/// As for [`copy_raw`].
pub(crate) unsafe fn copy_layouts(dtype: DType, dst: *mut u8, dl: &Layout, src: *const u8, sl: &Layout, conj: bool) {
    debug_assert_eq!(dl.extents, sl.extents);
    let conj = conj && dtype.is_complex();
    unsafe {
        copy_strided(dtype, &dl.extents, (dst, dl.offset, &dl.strides), (src as *mut u8, sl.offset, &sl.strides), conj)
    }
}

/// One side of a strided copy: base pointer, element offset, strides.
type Side<'a> = (*mut u8, isize, &'a [isize]);

unsafe fn copy_strided(dtype: DType, extents: &[usize], dst: Side<'_>, src: Side<'_>, conj: bool) {
    with_element_type!(dtype, T => unsafe { copy_typed::<T>(extents, dst, src, conj) })
}

unsafe fn copy_typed<T: Element>(extents: &[usize], dst: Side<'_>, src: Side<'_>, conj: bool) {
    let (pd, ps) = (dst.0 as *mut T, src.0 as *const T);
    for_each_run(extents, [dst.1, src.1], [dst.2, src.2], |[od, os], n, [sd, ss]| unsafe {
        if conj {
            for i in 0..n as isize {
                *pd.offset(od + i * sd) = (*ps.offset(os + i * ss)).conj();
            }
        } else if sd == 1 && ss == 1 {
            std::ptr::copy_nonoverlapping(ps.offset(os), pd.offset(od), n);
        } else {
            for i in 0..n as isize {
                *pd.offset(od + i * sd) = *ps.offset(os + i * ss);
            }
        }
    });
}
