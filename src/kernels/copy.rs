//! Materialising permute and conj, and the strided copy under them (also used
//! for contraction temporaries).

use super::check::{check_dtypes, check_output, check_rank, dims, shape_err};
use super::float::{with_float, Float};
use super::operand::Operand;
use crate::error::{Error, Result, Status};
use crate::layout::for_each_run;

/// Edge of the square tiles of a transposing copy (elements), chosen so that
/// a source and a destination tile of c128 fit in L1 together.
const TILE: usize = 32;

/// Copy `src` to `dst` (equal `extents`, strides in elements), conjugating if
/// `conj`. When the two operands' fastest axes differ (a transpose), the copy
/// runs in square tiles over those two axes so both sides stay in cache.
///
/// # Safety
/// Every element of each side is valid (dst writable and exclusively
/// accessed), and the two do not overlap.
pub(crate) unsafe fn copy_nd<T: Float>(
    extents: &[usize],
    dst: *mut T,
    ds: &[isize],
    src: *const T,
    ss: &[isize],
    conj: bool,
) {
    if extents.contains(&0) {
        return;
    }
    // Axes with extent > 1: (extent, dst stride, src stride).
    let ax: Vec<(usize, isize, isize)> =
        (0..extents.len()).filter(|&i| extents[i] > 1).map(|i| (extents[i], ds[i], ss[i])).collect();
    let inner_d = (0..ax.len()).min_by_key(|&i| ax[i].1.unsigned_abs());
    let inner_s = (0..ax.len()).min_by_key(|&i| ax[i].2.unsigned_abs());
    match (inner_d, inner_s) {
        (Some(p), Some(q)) if p != q => {
            // Transposing copy: tile over axes p (dst-fast) and q (src-fast),
            // loop over the others.
            let others: Vec<(usize, isize, isize)> =
                (0..ax.len()).filter(|&i| i != p && i != q).map(|i| ax[i]).collect();
            let oe: Vec<usize> = others.iter().map(|o| o.0).collect();
            let od: Vec<isize> = others.iter().map(|o| o.1).collect();
            let os: Vec<isize> = others.iter().map(|o| o.2).collect();
            let (np, dp, sp) = ax[p];
            let (nq, dq, sq) = ax[q];
            for_each_run(&oe, [0, 0], [&od, &os], |[o_d, o_s], len, [st_d, st_s]| {
                for r in 0..len as isize {
                    let (bd, bs) = (dst.wrapping_offset(o_d + r * st_d), src.wrapping_offset(o_s + r * st_s));
                    for i0 in (0..nq).step_by(TILE) {
                        for j0 in (0..np).step_by(TILE) {
                            for i in i0..(i0 + TILE).min(nq) {
                                let (rd, rs) =
                                    (bd.wrapping_offset(i as isize * dq), bs.wrapping_offset(i as isize * sq));
                                for j in j0..(j0 + TILE).min(np) {
                                    // SAFETY: inside both operands by the caller's contract.
                                    unsafe {
                                        let v = *rs.offset(j as isize * sp);
                                        *rd.offset(j as isize * dp) = if conj { v.conj() } else { v };
                                    }
                                }
                            }
                        }
                    }
                }
            });
        }
        _ => {
            for_each_run(extents, [0, 0], [ds, ss], |[o_d, o_s], len, [st_d, st_s]| unsafe {
                // SAFETY: inside both operands by the caller's contract.
                let (pd, ps) = (dst.offset(o_d), src.offset(o_s));
                if !conj && st_d == 1 && st_s == 1 {
                    std::ptr::copy_nonoverlapping(ps, pd, len);
                } else if conj {
                    for i in 0..len as isize {
                        *pd.offset(i * st_d) = (*ps.offset(i * st_s)).conj();
                    }
                } else {
                    for i in 0..len as isize {
                        *pd.offset(i * st_d) = *ps.offset(i * st_s);
                    }
                }
            });
        }
    }
}

/// Materialising permute: `dst[i_0, .., i_{r-1}] = src[j]` where `j[perm[k]] = i_k`,
/// i.e. axis `k` of `dst` is axis `perm[k]` of `src` (NumPy's `transpose(perm)`),
/// so `dst.extents[k] == src.extents[perm[k]]`. A conj flag on `src` is honoured
/// (the result holds the conjugated values).
///
/// # Safety
/// See the module's safety contract.
pub(crate) unsafe fn permute_copy(dst: &Operand<'_>, src: &Operand<'_>, perm: &[usize]) -> Result<()> {
    const O: &str = "permute";
    check_dtypes(O, &[("dst", dst.dtype), ("src", src.dtype)])?;
    check_rank(O, "src", src)?;
    check_output(O, "dst", dst)?;
    let r = src.extents.len();
    let mut seen = vec![false; r];
    if perm.len() != r || perm.iter().any(|&p| p >= r || std::mem::replace(&mut seen[p], true)) {
        return Err(Error::new(
            Status::InvalidArgument,
            O,
            format!("{perm:?} is not a permutation of the {r} axes of src ({})", dims(src.extents)),
        ));
    }
    let want: Vec<usize> = perm.iter().map(|&p| src.extents[p]).collect();
    if dst.extents != &want[..] {
        return Err(shape_err(
            O,
            format!(
                "dst is {}, src is {}: permuting src by {perm:?} gives {}",
                dims(dst.extents),
                dims(src.extents),
                dims(&want)
            ),
        ));
    }
    let ss: Vec<isize> = perm.iter().map(|&p| src.strides[p]).collect();
    with_float!(dst.dtype, T => unsafe {
        copy_nd::<T>(dst.extents, dst.ptr as *mut T, dst.strides, src.ptr as *const T, &ss, src.conjugated())
    }, unreachable!("checked above"));
    Ok(())
}

/// Materialising conj: `dst = conj(src)` elementwise (a plain copy for real
/// dtypes). If `src` is itself a conj view, the result is its underlying data.
///
/// # Safety
/// See the module's safety contract.
pub(crate) unsafe fn conj_copy(dst: &Operand<'_>, src: &Operand<'_>) -> Result<()> {
    const O: &str = "conj";
    check_dtypes(O, &[("dst", dst.dtype), ("src", src.dtype)])?;
    check_rank(O, "src", src)?;
    check_output(O, "dst", dst)?;
    if dst.extents != src.extents {
        return Err(shape_err(O, format!("dst is {}, src is {}: shapes differ", dims(dst.extents), dims(src.extents))));
    }
    let conj = dst.dtype.is_complex() && !src.conjugated();
    with_float!(dst.dtype, T => unsafe {
        copy_nd::<T>(dst.extents, dst.ptr as *mut T, dst.strides, src.ptr as *const T, src.strides, conj)
    }, unreachable!("checked above"));
    Ok(())
}
