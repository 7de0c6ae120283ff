//! Decoding of C arguments: enumerations, arrays, layouts and timeouts.

use ta::DType;
use ta::Domain;
use ta::{Error, Status};
use ta::{Layout, Order};

use crate::need;
use crate::types::*;

/// Largest rank accepted through the C ABI: the core's.
use ta::MAX_RANK;

pub(crate) fn dtype_arg(d: ta_dtype, origin: &'static str) -> Result<DType, Error> {
    DType::from_u32(d).ok_or_else(|| Error::new(Status::InvalidArgument, origin, format!("unknown dtype {d}")))
}

pub(crate) fn domain_arg(d: ta_domain, origin: &'static str) -> Result<Domain, Error> {
    crate::domain::from_c(d).ok_or_else(|| Error::new(Status::InvalidArgument, origin, format!("unknown domain {d}")))
}

pub(crate) fn order_arg(o: ta_order, origin: &'static str) -> Result<Order, Error> {
    match o {
        TA_ORDER_ROW_MAJOR => Ok(Order::RowMajor),
        TA_ORDER_COL_MAJOR => Ok(Order::ColMajor),
        _ => Err(Error::new(Status::InvalidArgument, origin, format!("unknown order {o}"))),
    }
}

/// Refuse a rank past [`MAX_RANK`]: every tensor made through the C ABI
/// can then be sliced, permuted and reshaped through it.
pub(crate) fn rank_arg(rank: usize, origin: &'static str, what: &str) -> Result<usize, Error> {
    if rank > MAX_RANK {
        return Err(Error::new(
            Status::InvalidArgument,
            origin,
            format!("`{what}` has {rank} entries, one per axis, and a tensor has at most {MAX_RANK} axes"),
        ));
    }
    Ok(rank)
}

/// Read `rank` entries (one per axis) from a C array (NULL allowed when `rank` is 0).
pub(crate) fn array_arg<'a, T>(p: *const T, rank: usize, origin: &'static str, what: &str) -> Result<&'a [T], Error> {
    list_arg(p, rank_arg(rank, origin, what)?, origin, what)
}

/// Read `len` entries from a C array of any length (NULL allowed when `len` is 0).
pub(crate) fn list_arg<'a, T>(p: *const T, rank: usize, origin: &'static str, what: &str) -> Result<&'a [T], Error> {
    if rank == 0 {
        return Ok(&[]);
    }
    need(p, origin, what)?;
    // SAFETY: the C contract is that a non-NULL array argument holds `rank` entries.
    Ok(unsafe { std::slice::from_raw_parts(p, rank) })
}

/// A host layout from C arguments: explicit strides, or dense in `order`.
pub(crate) fn layout_arg(
    rank: usize,
    extents: *const usize,
    strides: *const isize,
    order: Order,
    origin: &'static str,
) -> Result<Layout, Error> {
    let ext = array_arg(extents, rank, origin, "extents")?;
    if strides.is_null() {
        let l = Layout::contiguous(ext, order);
        l.checked_len().ok_or_else(|| Error::new(Status::InvalidArgument, origin, "element count overflows"))?;
        Ok(l)
    } else {
        Layout::strided(ext, array_arg(strides, rank, origin, "strides")?, 0, origin)
    }
}

pub(crate) fn timeout_arg(ns: i64) -> Option<std::time::Duration> {
    (ns >= 0).then(|| std::time::Duration::from_nanos(ns as u64))
}
