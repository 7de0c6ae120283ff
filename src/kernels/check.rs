//! Argument checks shared by the kernels, made before anything is written,
//! and how their messages name shapes
//! (`gemm: A is 3x4, B is 5x2: inner extents 4 and 5 differ`).

use super::operand::Operand;
use crate::dtype::DType;
use crate::error::{Error, Result, Status};

/// `3x4`, `5` (1-d) or `scalar` (0-d): how error messages name a shape.
pub(crate) fn dims(ext: &[usize]) -> String {
    if ext.is_empty() {
        return "a scalar (0-d)".to_string();
    }
    let s: Vec<String> = ext.iter().map(|e| e.to_string()).collect();
    s.join("x")
}

pub(crate) fn shape_err(origin: &'static str, msg: String) -> Error {
    Error::new(Status::ShapeMismatch, origin, msg)
}

pub(crate) fn arg_err(origin: &'static str, msg: String) -> Error {
    Error::new(Status::InvalidArgument, origin, msg)
}

/// Check that `dtypes` (named operands) agree and are float dtypes.
pub(crate) fn check_dtypes(origin: &'static str, ops: &[(&str, DType)]) -> Result<DType> {
    let (n0, d0) = ops[0];
    for &(n, d) in &ops[1..] {
        if d != d0 {
            return Err(Error::new(
                Status::DtypeMismatch,
                origin,
                format!("{n0} is {} but {n} is {}", d0.name(), d.name()),
            ));
        }
    }
    if !d0.is_float() {
        return Err(Error::new(
            Status::Unsupported,
            origin,
            format!("dtype {} is not supported (only f32, f64, c64, c128)", d0.name()),
        ));
    }
    Ok(d0)
}

/// Check that an operand's extents and strides agree in rank.
pub(crate) fn check_rank(origin: &'static str, name: &str, x: &Operand<'_>) -> Result<()> {
    if x.extents.len() != x.strides.len() {
        return Err(arg_err(origin, format!("{name} has {} extents but {} strides", x.extents.len(), x.strides.len())));
    }
    Ok(())
}

/// Check that an output operand is writable: not a conj view, and no two
/// indices address the same element.
pub(crate) fn check_output(origin: &'static str, name: &str, x: &Operand<'_>) -> Result<()> {
    check_rank(origin, name, x)?;
    if x.conjugated() {
        return Err(Error::new(Status::ReadOnly, origin, format!("output {name} is a conjugated (read-only) view")));
    }
    if !crate::layout::non_overlapping(x.extents, x.strides) {
        return Err(arg_err(
            origin,
            format!("output {name} ({}, strides {:?}) addresses some elements twice", dims(x.extents), x.strides),
        ));
    }
    Ok(())
}

/// Check that an operand is 2-d (and its strides agree in rank).
pub(crate) fn two_d(origin: &'static str, name: &str, x: &Operand<'_>) -> Result<()> {
    check_rank(origin, name, x)?;
    if x.extents.len() != 2 {
        return Err(shape_err(origin, format!("{name} is {}: it must be 2-d", dims(x.extents))));
    }
    Ok(())
}

/// Output extents of `A·B` for 2-d `A` and `B`.
pub(crate) fn gemm_shape(a_ext: &[usize], b_ext: &[usize]) -> Result<[usize; 2]> {
    if a_ext.len() != 2 || b_ext.len() != 2 {
        return Err(shape_err("gemm", format!("A is {}, B is {}: both must be 2-d", dims(a_ext), dims(b_ext))));
    }
    if a_ext[1] != b_ext[0] {
        return Err(shape_err(
            "gemm",
            format!("A is {}, B is {}: inner extents {} and {} differ", dims(a_ext), dims(b_ext), a_ext[1], b_ext[0]),
        ));
    }
    Ok([a_ext[0], b_ext[1]])
}

/// Check a list of axes of a rank-`rank` operand: in range and distinct.
fn check_axes(origin: &'static str, name: &str, rank: usize, ext: &[usize], axes: &[usize]) -> Result<()> {
    let mut seen = vec![false; rank];
    for &ax in axes {
        if ax >= rank {
            return Err(arg_err(
                origin,
                format!("axis {ax} of {name} is out of range: {name} is {} (rank {rank})", dims(ext)),
            ));
        }
        if seen[ax] {
            return Err(arg_err(origin, format!("axis {ax} of {name} ({}) is repeated in {axes:?}", dims(ext))));
        }
        seen[ax] = true;
    }
    Ok(())
}

/// Output extents of the contraction of `A` and `B` over the axis pairs
/// `(a_axes[i], b_axes[i])`: `A`'s free axes in order, then `B`'s.
pub(crate) fn contract_shape(
    a_ext: &[usize],
    b_ext: &[usize],
    a_axes: &[usize],
    b_axes: &[usize],
) -> Result<Vec<usize>> {
    const O: &str = "contract";
    if a_axes.len() != b_axes.len() {
        return Err(arg_err(
            O,
            format!("{} axes of A {a_axes:?} but {} axes of B {b_axes:?} (they pair up)", a_axes.len(), b_axes.len()),
        ));
    }
    check_axes(O, "A", a_ext.len(), a_ext, a_axes)?;
    check_axes(O, "B", b_ext.len(), b_ext, b_axes)?;
    for (&i, &j) in a_axes.iter().zip(b_axes) {
        if a_ext[i] != b_ext[j] {
            return Err(shape_err(
                O,
                format!(
                    "A is {}, B is {}: contracted axis {i} of A has extent {} but axis {j} of B has {}",
                    dims(a_ext),
                    dims(b_ext),
                    a_ext[i],
                    b_ext[j]
                ),
            ));
        }
    }
    let mut out: Vec<usize> = (0..a_ext.len()).filter(|i| !a_axes.contains(i)).map(|i| a_ext[i]).collect();
    out.extend((0..b_ext.len()).filter(|j| !b_axes.contains(j)).map(|j| b_ext[j]));
    Ok(out)
}

/// Output extents of a sum over `axes` (`None`: every element, a 0-d result).
pub(crate) fn sum_shape(x_ext: &[usize], axes: Option<&[usize]>) -> Result<Vec<usize>> {
    match axes {
        None => Ok(Vec::new()),
        Some(axes) => {
            check_axes("sum", "x", x_ext.len(), x_ext, axes)?;
            Ok((0..x_ext.len()).filter(|i| !axes.contains(i)).map(|i| x_ext[i]).collect())
        }
    }
}

/// A vector of `len` copies of `x`, or an out-of-memory error.
pub(crate) fn try_vec<T: Clone>(origin: &'static str, len: usize, x: T) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        Error::new(Status::OutOfMemory, origin, format!("cannot allocate a temporary of {len} elements"))
    })?;
    v.resize(len, x);
    Ok(v)
}
