//! Block arrays (SPEC §2.4): one shared backing allocation, a descriptor
//! table known at creation (block shapes and offsets need no await), and one
//! epoch queue (hazard record) per block.
//!
//! [`BlockArray::block`] returns an ordinary tensor handle ordered on that
//! block's own queue, which keeps the allocation alive (its storage wraps its
//! part of the allocation and holds a reference to the whole), so block
//! handles outlive the array handle and work in every operation and kernel.
//! [`BlockArray::coalesce`] returns one strided view over a rectangle of
//! tiles (or a run of stacked list blocks) that enrolls in every covered
//! block's queue as one composite hazard set: its reads wait for each covered
//! block's writers, and its writes are exclusive over all of them.
//!
//! Tiled arrays are stored as one array in the given order, so a tile is a
//! strided sub-array and any rectangle of tiles is one too. On the host, a
//! leading dimension whose byte stride is a multiple of 1 KiB is padded by
//! one cache line (see [`padded_leading_dimension`]).

use std::ptr::NonNull;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::domain::Domain;
use crate::dtype::DType;
use crate::error::{Error, Result, Status};
use crate::layout::{Layout, Order};
use crate::tensor::coalesced::Coalesced;
use crate::tensor::handle::Tensor;
use crate::tensor::storage::Storage;
use crate::tensor::value::{Contents, Value, ValueRc};

/// How the blocks cut the array.
enum Shape {
    /// A grid of tiles over one array (dense but for a padded leading
    /// dimension; see [`padded_leading_dimension`]).
    Tiled {
        extents: SmallVec<[usize; 4]>,
        tile: SmallVec<[usize; 4]>,
        grid: SmallVec<[usize; 4]>,
        whole: Layout,
        order: Order,
    },
    /// Blocks of arbitrary shapes, each dense in `order`, one after another.
    List { order: Order },
}

pub(crate) struct BlockArrayInner {
    dtype: DType,
    domain: Domain,
    storage: Arc<Storage>,
    /// One hazard record per block, in block order.
    blocks: Vec<ValueRc>,
    /// Each block's layout in the shared storage (absolute offsets).
    layouts: Vec<Layout>,
    shape: Shape,
}

/// A handle to a block array. Cloning shares it.
#[derive(Clone)]
pub struct BlockArray(Arc<BlockArrayInner>);

impl BlockArray {
    /// A tiled array of `extents`, cut in tiles of `tile` (the last tile on
    /// an axis may be ragged), stored as one array in `order` (on the host,
    /// with an aliasing leading dimension padded by one cache line): zeroed
    /// on the host, uninitialised on a device (see `BlockArray::tiled`).
    pub(crate) fn tiled_unfilled(
        dtype: DType,
        extents: &[usize],
        tile: &[usize],
        order: Order,
        domain: Domain,
    ) -> Result<BlockArray> {
        const O: &str = "blocks_new_tiled";
        crate::tensor::value::check_domain(domain, O)?;
        if tile.len() != extents.len() {
            return Err(Error::new(
                Status::ShapeMismatch,
                O,
                format!("tile extents {tile:?} do not fit an array of extents {extents:?} (rank differs)"),
            ));
        }
        if tile.contains(&0) {
            return Err(Error::new(Status::InvalidArgument, O, format!("tile extents {tile:?} must be positive")));
        }
        let grid: SmallVec<[usize; 4]> = extents.iter().zip(tile).map(|(&e, &t)| e.div_ceil(t)).collect();
        let mut whole = Layout::contiguous(extents, order);
        if domain == Domain::Host {
            whole = padded_leading_dimension(whole, order, dtype.size());
        }
        let (storage, whole) = alloc(dtype, whole, domain, O)?;
        let count: usize = grid.iter().product();
        let mut layouts = Vec::with_capacity(count);
        for linear in 0..count {
            let idx = unravel(linear, &grid);
            let mut offset = whole.offset;
            let mut ext = SmallVec::new();
            for (k, &i) in idx.iter().enumerate() {
                offset += (i * tile[k]) as isize * whole.strides[k];
                ext.push(tile[k].min(extents[k] - i * tile[k]));
            }
            layouts.push(Layout { offset, extents: ext, strides: whole.strides.clone() });
        }
        let shape = Shape::Tiled { extents: extents.into(), tile: tile.into(), grid, whole, order };
        Ok(BlockArray(Self::assemble(dtype, domain, storage, layouts, shape, O)?))
    }

    /// A list of blocks of the given shapes (block-sparse storage), each
    /// dense in `order`, one after another in one allocation: zeroed on the
    /// host, uninitialised on a device (see `BlockArray::list`).
    pub(crate) fn list_unfilled(dtype: DType, shapes: &[&[usize]], order: Order, domain: Domain) -> Result<BlockArray> {
        const O: &str = "blocks_new_list";
        crate::tensor::value::check_domain(domain, O)?;
        let mut layouts = Vec::with_capacity(shapes.len());
        let mut offset = 0usize;
        for s in shapes {
            let mut l = Layout::contiguous(s, order);
            l.offset = offset as isize;
            let n = l.checked_len().ok_or_else(|| Error::new(Status::OutOfMemory, O, "a block is too large"))?;
            offset =
                offset.checked_add(n).ok_or_else(|| Error::new(Status::OutOfMemory, O, "the blocks are too large"))?;
            layouts.push(l);
        }
        let (storage, _) = alloc(dtype, Layout::contiguous(&[offset], Order::RowMajor), domain, O)?;
        Ok(BlockArray(Self::assemble(dtype, domain, storage, layouts, Shape::List { order }, O)?))
    }

    fn assemble(
        dtype: DType,
        domain: Domain,
        storage: Arc<Storage>,
        layouts: Vec<Layout>,
        shape: Shape,
        origin: &'static str,
    ) -> Result<Arc<BlockArrayInner>> {
        let size = dtype.size() as isize;
        let blocks = layouts
            .iter()
            .map(|l| {
                // Each block's storage wraps its part of the allocation and
                // holds the whole one alive.
                let (lo, _) = l.checked_span().unwrap_or((l.offset, l.offset));
                let bytes = l.footprint().unwrap_or(0) * size as usize;
                // SAFETY: `lo` is inside the allocation (the layouts were cut from it).
                let ptr = unsafe { storage.ptr().offset(lo * size) };
                let keep = storage.clone();
                let part = unsafe {
                    // SAFETY: the part is valid memory while `keep` holds the allocation.
                    Storage::wrap(
                        NonNull::new(ptr).unwrap_or(NonNull::dangling()),
                        bytes,
                        Some(Box::new(move || drop(keep))),
                    )
                };
                let mut local = l.clone();
                local.offset -= lo;
                ValueRc::new(Value::new_fixed(dtype, domain, Contents::owning(part, local)))
            })
            .collect();
        let _ = origin; // creation cannot fail past the allocation
        Ok(Arc::new(BlockArrayInner { dtype, domain, storage, blocks, layouts, shape }))
    }

    /// Number of blocks.
    ///
    /// ```
    /// use tensorasync::{BlockArray, DType, Order};
    /// let b = BlockArray::tiled(DType::F32, &[6, 4], &[2, 2], Order::RowMajor, Default::default()).unwrap();
    /// assert_eq!(b.count(), 6); // a 3 x 2 grid
    /// ```
    pub fn count(&self) -> usize {
        self.0.blocks.len()
    }

    /// Tiles per axis (tiled arrays only).
    ///
    /// ```
    /// use tensorasync::{BlockArray, DType, Order};
    /// let b = BlockArray::tiled(DType::F32, &[6, 4], &[4, 3], Order::RowMajor, Default::default()).unwrap();
    /// assert_eq!(b.grid().unwrap(), &[2, 2]);
    /// let l = BlockArray::list(DType::F32, &[&[2]], Order::RowMajor, Default::default()).unwrap();
    /// assert!(l.grid().is_none());
    /// ```
    pub fn grid(&self) -> Option<&[usize]> {
        match &self.0.shape {
            Shape::Tiled { grid, .. } => Some(grid),
            Shape::List { .. } => None,
        }
    }

    /// Element type.
    ///
    /// ```
    /// use tensorasync::{BlockArray, DType, Order};
    /// let b = BlockArray::list(DType::I64, &[&[2], &[3]], Order::RowMajor, Default::default()).unwrap();
    /// assert_eq!(b.dtype(), DType::I64);
    /// assert_eq!(b.block(1).unwrap().dtype(), DType::I64);
    /// ```
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// Where the blocks live.
    ///
    /// ```
    /// use tensorasync::{BlockArray, DType, Domain, Order};
    /// let b = BlockArray::list(DType::F64, &[&[2]], Order::RowMajor, Domain::Host).unwrap();
    /// assert_eq!(b.domain(), Domain::Host);
    /// ```
    pub fn domain(&self) -> Domain {
        self.0.domain
    }

    /// Block `i` (in block order: row-major over the grid for tiled arrays),
    /// as a tensor handle on the block's own queue.
    ///
    /// ```
    /// use tensorasync::{ops, BlockArray, DType, Order, Scalar, Submit};
    /// let b = BlockArray::tiled(DType::F64, &[2, 4], &[2, 2], Order::RowMajor, Default::default()).unwrap();
    /// ops::fill(&b.block(1).unwrap(), Scalar::real(1.0), Submit::default()).unwrap(); // the right tile
    /// assert_eq!(b.all().unwrap().to_vec::<f64>().unwrap(), vec![0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0]);
    /// assert!(b.block(2).is_err());
    /// ```
    pub fn block(&self, i: usize) -> Result<Tensor> {
        let b = self.0.blocks.get(i).ok_or_else(|| {
            Error::new(
                Status::OutOfRange,
                "blocks_block",
                format!("block {i} of an array of {} blocks", self.0.blocks.len()),
            )
        })?;
        Ok(Tensor::of_value(b.clone()))
    }

    /// The tile at a multi-index (tiled arrays).
    ///
    /// ```
    /// use tensorasync::{ops, BlockArray, DType, Order, Scalar, Submit};
    /// let b = BlockArray::tiled(DType::F64, &[4, 2], &[2, 2], Order::RowMajor, Default::default()).unwrap();
    /// ops::fill(&b.tile(&[1, 0]).unwrap(), Scalar::real(2.0), Submit::default()).unwrap(); // the lower tile
    /// assert_eq!(b.all().unwrap().to_vec::<f64>().unwrap(), vec![0.0, 0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 2.0]);
    /// assert!(b.tile(&[2, 0]).is_err());
    /// ```
    pub fn tile(&self, index: &[usize]) -> Result<Tensor> {
        const O: &str = "blocks_tile";
        let grid =
            self.grid().ok_or_else(|| Error::new(Status::InvalidArgument, O, "a list of blocks has no tile grid"))?;
        check_index(index, grid, O)?;
        self.block(ravel(index, grid))
    }

    /// One view over tiles `lo..hi` (per axis) of a tiled array: a strided
    /// sub-array enrolling in every covered tile's queue, as do its slices,
    /// permutations, reshapes and conjugate.
    ///
    /// ```
    /// use tensorasync::{ops, BlockArray, DType, Order, Scalar, Submit};
    /// let b = BlockArray::tiled(DType::F64, &[2, 6], &[2, 2], Order::RowMajor, Default::default()).unwrap();
    /// // Tiles 1 and 2 of the 1 x 3 grid: columns 2..6, one 2 x 4 view.
    /// let v = b.coalesce(&[0, 1], &[1, 3]).unwrap();
    /// assert_eq!(v.extents().unwrap().as_slice(), &[2, 4]);
    /// ops::fill(&v, Scalar::real(1.0), Submit::default()).unwrap();
    /// assert_eq!(b.tile(&[0, 0]).unwrap().to_vec::<f64>().unwrap(), vec![0.0; 4]);
    /// assert_eq!(b.tile(&[0, 2]).unwrap().to_vec::<f64>().unwrap(), vec![1.0; 4]);
    /// // Its slices, transposes and reshapes are coalesced views too.
    /// assert_eq!(v.transpose().unwrap().extents().unwrap().as_slice(), &[4, 2]);
    /// ```
    pub fn coalesce(&self, lo: &[usize], hi: &[usize]) -> Result<Tensor> {
        const O: &str = "blocks_coalesce";
        let Shape::Tiled { extents, tile, grid, whole, .. } = &self.0.shape else {
            return Err(Error::new(Status::InvalidArgument, O, "use coalesce_range for a list of blocks"));
        };
        if lo.len() != grid.len() || hi.len() != grid.len() {
            return Err(Error::new(Status::InvalidArgument, O, format!("tile ranges need {} axes", grid.len())));
        }
        for k in 0..grid.len() {
            if lo[k] >= hi[k] || hi[k] > grid[k] {
                return Err(Error::new(
                    Status::OutOfRange,
                    O,
                    format!("tiles {}..{} on axis {k} of a grid {grid:?}", lo[k], hi[k]),
                ));
            }
        }
        let mut offset = whole.offset;
        let mut ext = SmallVec::new();
        for k in 0..grid.len() {
            offset += (lo[k] * tile[k]) as isize * whole.strides[k];
            ext.push((hi[k] * tile[k]).min(extents[k]) - lo[k] * tile[k]);
        }
        let box_extent: SmallVec<[usize; 4]> = lo.iter().zip(hi).map(|(a, b)| b - a).collect();
        let count: usize = box_extent.iter().product();
        let members = (0..count)
            .map(|n| {
                let rel = unravel(n, &box_extent);
                let idx: SmallVec<[usize; 4]> = rel.iter().zip(lo).map(|(r, l)| r + l).collect();
                self.0.blocks[ravel(&idx, grid)].clone()
            })
            .collect();
        let layout = Layout { offset, extents: ext, strides: whole.strides.clone() };
        Ok(Tensor::of_coalesced(Coalesced::new(self.0.storage.clone(), self.0.dtype, members, layout)))
    }

    /// One view over list blocks `first..=last`: they must be adjacent and
    /// stack into one dense array (equal extents but for the slowest axis).
    ///
    /// ```
    /// use tensorasync::{ops, BlockArray, DType, Order, Scalar, Submit};
    /// let shapes: [&[usize]; 3] = [&[1, 3], &[2, 3], &[1, 3]];
    /// let b = BlockArray::list(DType::F32, &shapes, Order::RowMajor, Default::default()).unwrap();
    /// let v = b.coalesce_range(0, 1).unwrap(); // stacks into 3 x 3
    /// assert_eq!(v.extents().unwrap().as_slice(), &[3, 3]);
    /// ops::fill(&v, Scalar::real(1.0), Submit::default()).unwrap();
    /// assert_eq!(b.block(1).unwrap().to_vec::<f32>().unwrap(), vec![1.0; 6]);
    /// assert_eq!(b.block(2).unwrap().to_vec::<f32>().unwrap(), vec![0.0; 3]);
    /// ```
    pub fn coalesce_range(&self, first: usize, last: usize) -> Result<Tensor> {
        const O: &str = "blocks_coalesce_range";
        if let Shape::Tiled { grid, .. } = &self.0.shape {
            // Consecutive tiles in block order form a rectangle only along the last axis of a row.
            let _ = grid;
            return Err(Error::new(Status::InvalidArgument, O, "use coalesce with tile ranges for a tiled array"));
        }
        let Shape::List { order } = self.0.shape else { unreachable!() };
        let n = self.0.blocks.len();
        if first > last || last >= n {
            return Err(Error::new(
                Status::OutOfRange,
                O,
                format!("blocks {first} to {last} (inclusive) of {n}: the last block is {}", n.saturating_sub(1)),
            ));
        }
        let ls = &self.0.layouts[first..=last];
        let slow = match order {
            Order::RowMajor => 0,
            Order::ColMajor => ls[0].rank().saturating_sub(1),
        };
        let mut total = 0usize;
        for (k, l) in ls.iter().enumerate() {
            let same_rank = l.rank() == ls[0].rank() && l.rank() > 0;
            let same_rest = same_rank && (0..l.rank()).all(|a| a == slow || l.extents[a] == ls[0].extents[a]);
            let adjacent = k == 0 || ls[k - 1].offset + ls[k - 1].len() as isize == l.offset;
            if !same_rest || !adjacent {
                return Err(Error::new(
                    Status::NotContiguous,
                    O,
                    format!(
                        "blocks {first} to {last} do not stack into one dense array (block {} has extents {:?})",
                        first + k,
                        l.extents
                    ),
                ));
            }
            total += l.extents[slow];
        }
        let mut ext = ls[0].extents.clone();
        ext[slow] = total;
        let mut layout = Layout::contiguous(&ext, order);
        layout.offset = ls[0].offset;
        let members = self.0.blocks[first..=last].iter().cloned().collect();
        Ok(Tensor::of_coalesced(Coalesced::new(self.0.storage.clone(), self.0.dtype, members, layout)))
    }

    /// The whole array as one view over every block.
    ///
    /// ```
    /// use tensorasync::{ops, BlockArray, DType, Order, Scalar, Submit};
    /// let b = BlockArray::tiled(DType::F64, &[3, 3], &[2, 2], Order::RowMajor, Default::default()).unwrap();
    /// ops::fill(&b.tile(&[1, 1]).unwrap(), Scalar::real(9.0), Submit::default()).unwrap();
    /// let all = b.all().unwrap();
    /// assert_eq!(all.extents().unwrap().as_slice(), &[3, 3]);
    /// assert_eq!(all.to_vec::<f64>().unwrap(), vec![0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 9.0]);
    /// // No tile: an empty tensor of the array's extents.
    /// let none = BlockArray::tiled(DType::F64, &[0, 3], &[2, 2], Order::RowMajor, Default::default()).unwrap();
    /// assert_eq!(none.all().unwrap().extents().unwrap().as_slice(), &[0, 3]);
    /// ```
    pub fn all(&self) -> Result<Tensor> {
        const O: &str = "blocks_all";
        match &self.0.shape {
            // No tile to view: an empty tensor of the array's extents.
            Shape::Tiled { extents, grid, order, .. } if grid.contains(&0) => {
                let c = Value::alloc_contents(self.0.dtype, extents, *order, self.0.domain, O)?;
                Ok(Tensor::of_contents(self.0.dtype, self.0.domain, c))
            }
            Shape::Tiled { grid, .. } => self.coalesce(&vec![0; grid.len()], grid),
            Shape::List { .. } if self.count() == 0 => {
                Err(Error::new(Status::InvalidArgument, O, "an array of no blocks has no extents to view"))
            }
            Shape::List { .. } => self.coalesce_range(0, self.count() - 1),
        }
        .map_err(|e| e.with_origin(O))
    }
}

/// Byte strides that are multiples of this put a tile's columns (rows, in
/// row-major order) on a few cache sets, so they evict each other.
const ALIASING_STRIDE: usize = 1024;

/// The padding that spreads them: one cache line.
const PAD_BYTES: usize = 64;

/// `dense` with its leading dimension (the stride of the second-fastest
/// axis) padded by one cache line when its byte stride is a multiple of
/// [`ALIASING_STRIDE`]: tiles of a 4096 x 4096 f64 array then ran their
/// kernels up to 2x slower (docs/perf-notes/kernels.md).
fn padded_leading_dimension(dense: Layout, order: Order, size: usize) -> Layout {
    let rank = dense.extents.len();
    if rank < 2 || size == 0 || PAD_BYTES % size != 0 {
        return dense;
    }
    let axes: SmallVec<[usize; 4]> = match order {
        Order::ColMajor => (0..rank).collect(),
        Order::RowMajor => (0..rank).rev().collect(),
    };
    let lead = dense.extents[axes[0]];
    if lead == 0 || (lead * size) % ALIASING_STRIDE != 0 || dense.extents[axes[1]] < 2 {
        return dense;
    }
    let mut strides = dense.strides.clone();
    let mut step = (lead + PAD_BYTES / size) as isize;
    for &ax in &axes[1..] {
        strides[ax] = step;
        step = step.saturating_mul(dense.extents[ax].max(1) as isize);
    }
    Layout { offset: 0, extents: dense.extents, strides }
}

/// An allocation that holds `layout` (zeroed on the host).
fn alloc(dtype: DType, layout: Layout, domain: Domain, origin: &'static str) -> Result<(Arc<Storage>, Layout)> {
    let bytes =
        layout.footprint().and_then(|n| n.checked_mul(dtype.size())).filter(|&b| b <= isize::MAX as usize).ok_or_else(
            || {
                let extents = &layout.extents;
                Error::new(Status::OutOfMemory, origin, format!("a block array of extents {extents:?} is too large"))
            },
        )?;
    let storage = match domain {
        Domain::Host => Storage::alloc_zeroed(bytes, origin)?,
        Domain::Cuda(d) => crate::tensor::device::memory::alloc(d, bytes, origin)?,
    };
    Ok((Arc::new(storage), layout))
}

fn check_index(index: &[usize], grid: &[usize], origin: &'static str) -> Result<()> {
    if index.len() != grid.len() || index.iter().zip(grid).any(|(i, g)| i >= g) {
        return Err(Error::new(Status::OutOfRange, origin, format!("tile {index:?} of a grid {grid:?}")));
    }
    Ok(())
}

fn unravel(mut n: usize, grid: &[usize]) -> SmallVec<[usize; 4]> {
    let mut idx: SmallVec<[usize; 4]> = SmallVec::from_elem(0, grid.len());
    for k in (0..grid.len()).rev() {
        idx[k] = n % grid[k];
        n /= grid[k];
    }
    idx
}

fn ravel(idx: &[usize], grid: &[usize]) -> usize {
    idx.iter().zip(grid).fold(0, |acc, (i, g)| acc * g + i)
}

impl std::fmt::Debug for BlockArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockArray")
            .field("dtype", &self.0.dtype)
            .field("blocks", &self.0.blocks.len())
            .field("grid", &self.grid())
            .finish()
    }
}
