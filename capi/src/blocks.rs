//! Block arrays from C.

use super::args::{array_arg, domain_arg, dtype_arg, order_arg, rank_arg};
use super::{arg, guard, make_handle, need, put};
use super::{ta_blocks, ta_domain, ta_dtype, ta_error, ta_order, ta_status, ta_tensor};
use ta::BlockArray;
use ta::Error;

/// Create a tiled block array: `rank` extents cut in tiles of `tile_extents`
/// (the last tile on an axis may be ragged), stored as one zero-filled
/// allocation in `order`, with one epoch queue per tile. Tile extents of
/// another rank give `TA_STATUS_SHAPE_MISMATCH`. The storage is dense, except
/// on the host when the leading dimension (the stride of the second-fastest
/// axis) would be a multiple of 1024 bytes: it is then padded by 64 bytes,
/// because such strides make a tile's columns (rows, in row-major order)
/// evict each other from the caches. Tiles, coalesced views and the whole
/// array report their strides, as every view does.
#[no_mangle]
pub extern "C" fn ta_blocks_new_tiled(
    dtype: ta_dtype,
    domain: ta_domain,
    rank: usize,
    extents: *const usize,
    tile_extents: *const usize,
    order: ta_order,
    blocks_out: *mut *mut ta_blocks,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_blocks_new_tiled";
    guard(O, error, || {
        need(blocks_out, O, "blocks_out")?;
        let ext = array_arg(extents, rank, O, "extents")?;
        let tile = array_arg(tile_extents, rank, O, "tile_extents")?;
        let b = BlockArray::tiled(dtype_arg(dtype, O)?, ext, tile, order_arg(order, O)?, domain_arg(domain, O)?)?;
        put(blocks_out, make_handle(b, O)?);
        Ok(())
    })
}

/// Create a list of `nblocks` blocks of arbitrary shapes (block-sparse
/// storage) in one zero-filled allocation: block `k` has rank `ranks[k]` and
/// its extents are the next `ranks[k]` entries of `extents` (all blocks'
/// extents, one after another). Each block is dense in `order`; the blocks
/// follow one another in memory.
#[no_mangle]
pub extern "C" fn ta_blocks_new_list(
    dtype: ta_dtype,
    domain: ta_domain,
    nblocks: usize,
    ranks: *const usize,
    extents: *const usize,
    order: ta_order,
    blocks_out: *mut *mut ta_blocks,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_blocks_new_list";
    guard(O, error, || {
        need(blocks_out, O, "blocks_out")?;
        let ranks: &[usize] = if nblocks == 0 {
            &[]
        } else {
            need(ranks, O, "ranks")?;
            // SAFETY: `ranks` holds `nblocks` entries by the C contract.
            unsafe { std::slice::from_raw_parts(ranks, nblocks) }
        };
        let mut total = 0usize;
        for (i, &r) in ranks.iter().enumerate() {
            total += rank_arg(r, O, &format!("extents of block {i}"))?;
        }
        let flat: &[usize] = if total == 0 {
            &[]
        } else {
            need(extents, O, "extents")?;
            // SAFETY: `extents` holds the sum of `ranks` entries by the C contract.
            unsafe { std::slice::from_raw_parts(extents, total) }
        };
        let mut shapes = Vec::with_capacity(nblocks);
        let mut at = 0;
        for &r in ranks {
            shapes.push(&flat[at..at + r]);
            at += r;
        }
        let b = BlockArray::list(dtype_arg(dtype, O)?, &shapes, order_arg(order, O)?, domain_arg(domain, O)?)?;
        put(blocks_out, make_handle(b, O)?);
        Ok(())
    })
}

/// The number of blocks.
#[no_mangle]
pub extern "C" fn ta_blocks_count(blocks: *const ta_blocks, count_out: *mut usize) -> ta_status {
    const O: &str = "ta_blocks_count";
    guard(O, std::ptr::null_mut(), || {
        need(count_out, O, "count_out")?;
        put(count_out, arg(blocks, O, "blocks")?.count());
        Ok(())
    })
}

/// The number of tiles per axis of a tiled array, into `grid_out` (`cap`
/// entries); `TA_STATUS_INVALID_ARGUMENT` for a list of blocks.
#[no_mangle]
pub extern "C" fn ta_blocks_grid(blocks: *const ta_blocks, grid_out: *mut usize, cap: usize) -> ta_status {
    const O: &str = "ta_blocks_grid";
    guard(O, std::ptr::null_mut(), || {
        let b = arg(blocks, O, "blocks")?;
        let grid =
            b.grid().ok_or_else(|| Error::new(ta::Status::InvalidArgument, O, "a list of blocks has no tile grid"))?;
        if cap < grid.len() {
            return Err(Error::new(
                ta::Status::BufferTooSmall,
                O,
                format!("the grid has {} axes, the buffer holds {cap}", grid.len()),
            ));
        }
        if !grid.is_empty() {
            need(grid_out, O, "grid_out")?;
            // SAFETY: `grid_out` holds `cap >= grid.len()` entries by the C contract.
            unsafe { std::ptr::copy_nonoverlapping(grid.as_ptr(), grid_out, grid.len()) };
        }
        Ok(())
    })
}

/// A tensor handle for block `index` (row-major over the grid for a tiled
/// array), ordered on the block's own epoch queue. It keeps the allocation
/// alive after the array handle is freed, and works in every operation and
/// kernel. `TA_STATUS_OUT_OF_RANGE` for an index past the last block.
#[no_mangle]
pub extern "C" fn ta_blocks_block(
    blocks: *const ta_blocks,
    index: usize,
    block_out: *mut *mut ta_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_blocks_block";
    guard(O, error, || {
        need(block_out, O, "block_out")?;
        let t = arg(blocks, O, "blocks")?.block(index)?;
        put(block_out, make_handle(t, O)?);
        Ok(())
    })
}

/// A tensor handle for the tile at a multi-index of a tiled array.
#[no_mangle]
pub extern "C" fn ta_blocks_tile(
    blocks: *const ta_blocks,
    rank: usize,
    tile_index: *const usize,
    block_out: *mut *mut ta_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_blocks_tile";
    guard(O, error, || {
        need(block_out, O, "block_out")?;
        let idx = array_arg(tile_index, rank, O, "tile_index")?;
        let t = arg(blocks, O, "blocks")?.tile(idx)?;
        put(block_out, make_handle(t, O)?);
        Ok(())
    })
}

/// One view over the tiles `lo[k]` up to but not including `hi[k]` on each
/// axis of a tiled array (`hi` is exclusive, unlike the inclusive `last` of
/// `ta_blocks_coalesce_range`): a
/// strided sub-array that enrolls in every covered tile's queue as one
/// composite hazard set (its reads wait for each tile's writers; its writes
/// are exclusive over all of them).
///
/// A slice, permutation, transpose, reshape or conjugate of a coalesced
/// view is a coalesced view too, ordered on the same blocks (a transposed
/// panel, or its conjugate, for example).
#[no_mangle]
pub extern "C" fn ta_blocks_coalesce(
    blocks: *const ta_blocks,
    rank: usize,
    lo: *const usize,
    hi: *const usize,
    view_out: *mut *mut ta_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_blocks_coalesce";
    guard(O, error, || {
        need(view_out, O, "view_out")?;
        let (l, h) = (array_arg(lo, rank, O, "lo")?, array_arg(hi, rank, O, "hi")?);
        let t = arg(blocks, O, "blocks")?.coalesce(l, h)?;
        put(view_out, make_handle(t, O)?);
        Ok(())
    })
}

/// One view over list blocks `first` to `last`, both included (`last` is
/// inclusive, unlike `hi` of `ta_blocks_coalesce`), which must be adjacent and stack
/// into one dense array (equal extents but for the slowest axis):
/// `TA_STATUS_NOT_CONTIGUOUS` otherwise. Views of it are as for
/// `ta_blocks_coalesce`.
#[no_mangle]
pub extern "C" fn ta_blocks_coalesce_range(
    blocks: *const ta_blocks,
    first: usize,
    last: usize,
    view_out: *mut *mut ta_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_blocks_coalesce_range";
    guard(O, error, || {
        need(view_out, O, "view_out")?;
        let t = arg(blocks, O, "blocks")?.coalesce_range(first, last)?;
        put(view_out, make_handle(t, O)?);
        Ok(())
    })
}

/// The whole array as one view over every block (`ta_blocks_coalesce` over
/// every tile, or `ta_blocks_coalesce_range` over every block of a list);
/// views of it are as for `ta_blocks_coalesce`. An array of no
/// tiles (an extent of 0) gives an empty tensor of its extents; a list of
/// no blocks has none, and fails with `TA_STATUS_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn ta_blocks_all(
    blocks: *const ta_blocks,
    view_out: *mut *mut ta_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_blocks_all";
    guard(O, error, || {
        need(view_out, O, "view_out")?;
        let t = arg(blocks, O, "blocks")?.all()?;
        put(view_out, make_handle(t, O)?);
        Ok(())
    })
}

/// Free a block array handle. Block and view handles made from it stay valid
/// and keep the allocation alive. NULL is a no-op.
#[no_mangle]
pub extern "C" fn ta_blocks_free(blocks: *mut ta_blocks) -> ta_status {
    super::free_handle(blocks)
}
