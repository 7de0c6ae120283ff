//! Views (SPEC §2.3): slices, permutations, conjugation and reshapes of a
//! value. A view is a durable handle: it shares its root value's epoch queue
//! and poison state exactly, keeps the root's storage alive (even after every
//! handle to the root is released), and carries its own layout, conj flag and
//! the `Region` of the root it touches.
//!
//! Views are made at once, from the root's contents as of the last
//! submission: a view of an unconstructed tensor cannot be made.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::dtype::DType;
use crate::error::{Error, Result, Status};
use crate::failpoint::{self, Site};
use crate::layout::{Layout, Order};
use crate::region::{IndexBox, Prog, Region};
use crate::tensor::counted::Counted;
use crate::tensor::value::{Contents, ValueRc};

/// How one root axis is reached from a view: either fixed at one index, or
/// `start + step * i` along view axis `axis`.
#[derive(Copy, Clone, Debug)]
enum RootAxis {
    Fixed(isize),
    Mapped { axis: usize, start: isize, step: isize },
}

/// A counted reference to a [`View`], as handles hold it (operations point
/// at the view's layout; see [`Counted`]).
pub(crate) type ViewRc = Counted<View>;

/// A view of a value: its own layout, conj flag and region over the root's
/// contents, ordered on the root's queue.
pub(crate) struct View {
    /// The hazard record shared with the root (its exact queue).
    pub(crate) root: ValueRc,
    /// The root's contents when the view was made (keeps the storage alive),
    /// while a handle to the view lives (see [`View::contents`]).
    contents: Option<Arc<Contents>>,
    /// Where the view's elements are in the storage (absolute offset).
    pub(crate) layout: Layout,
    /// Reads conjugate (complex dtypes only).
    pub(crate) conj: bool,
    /// Writes are rejected (conj views, read-only roots).
    pub(crate) read_only: bool,
    /// How root indices follow from view indices, while that is an index
    /// box (slices and permutations); `None` after a reshape.
    map: Option<SmallVec<[RootAxis; 4]>>,
    /// The elements touched, for sub-range hazards.
    pub(crate) region: Region,
}

/// One axis of a slice: indices `start, start + step, ...` up to `stop`
/// (exclusive). With a negative step, `start` is the highest index and
/// `stop` the one below the last (-1 to run through index 0). `drop` removes
/// the axis, and requires exactly one index.
///
/// ```
/// use tensorasync::{Order, SliceSpec, Tensor};
/// let t = Tensor::from_slice(&[4], Order::RowMajor, &[1u8, 2, 3, 4]).unwrap();
/// // Every other index, from the highest down.
/// let s = SliceSpec { start: 3, stop: -1, step: -2, drop: false };
/// assert_eq!(t.slice(&[s]).unwrap().to_vec::<u8>().unwrap(), vec![4, 2]);
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SliceSpec {
    pub start: isize,
    pub stop: isize,
    pub step: isize,
    pub drop: bool,
}

impl SliceSpec {
    /// Every index of an axis of extent `n`.
    ///
    /// ```
    /// use tensorasync::{Order, SliceSpec, Tensor};
    /// let t = Tensor::from_slice(&[2, 2], Order::RowMajor, &[1u8, 2, 3, 4]).unwrap();
    /// let col1 = t.slice(&[SliceSpec::all(2), SliceSpec::index(1)]).unwrap();
    /// assert_eq!(col1.to_vec::<u8>().unwrap(), vec![2, 4]);
    /// ```
    pub fn all(n: usize) -> SliceSpec {
        SliceSpec { start: 0, stop: n as isize, step: 1, drop: false }
    }
    /// `start..stop`.
    ///
    /// ```
    /// use tensorasync::SliceSpec;
    /// let s = SliceSpec::range(1, 3);
    /// assert_eq!((s.start, s.stop, s.step, s.drop), (1, 3, 1, false));
    /// ```
    pub fn range(start: usize, stop: usize) -> SliceSpec {
        SliceSpec { start: start as isize, stop: stop as isize, step: 1, drop: false }
    }
    /// The single index `i`, dropping the axis.
    ///
    /// ```
    /// use tensorasync::{Order, SliceSpec, Tensor};
    /// let t = Tensor::from_slice(&[2, 3], Order::RowMajor, &[1u8, 2, 3, 4, 5, 6]).unwrap();
    /// let row = t.slice(&[SliceSpec::index(1), SliceSpec::all(3)]).unwrap();
    /// assert_eq!(row.extents().unwrap().as_slice(), &[3]); // the axis is dropped
    /// assert_eq!(row.to_vec::<u8>().unwrap(), vec![4, 5, 6]);
    /// ```
    pub fn index(i: usize) -> SliceSpec {
        SliceSpec { start: i as isize, stop: i as isize + 1, step: 1, drop: true }
    }

    /// Number of indices selected on an axis of extent `n`, after checking bounds.
    fn count(&self, n: usize, axis: usize) -> Result<usize> {
        const O: &str = "tensor_slice";
        let n = n as isize;
        let bad = |what: String| Err(Error::new(Status::OutOfRange, O, format!("axis {axis} (extent {n}): {what}")));
        let count = match self.step {
            0 => return Err(Error::new(Status::InvalidArgument, O, format!("axis {axis}: step is 0"))),
            s if s > 0 => {
                if self.start < 0 || self.stop < self.start || self.stop > n {
                    return bad(format!("{}..{} step {s} is out of range", self.start, self.stop));
                }
                // (stop - start - 1) / s + 1 without overflow for any step.
                if self.stop == self.start {
                    0
                } else {
                    (self.stop - self.start - 1) / s + 1
                }
            }
            s => {
                if self.stop < -1 || self.start < self.stop || self.start > n - 1 && self.start != self.stop {
                    return bad(format!("{}..{} step {s} is out of range", self.start, self.stop));
                }
                if self.start == self.stop {
                    0
                } else {
                    ((self.start - self.stop - 1) as usize / s.unsigned_abs() + 1) as isize
                }
            }
        } as usize;
        if self.drop && count != 1 {
            return Err(Error::new(
                Status::InvalidArgument,
                O,
                format!("axis {axis}: dropping an axis needs exactly one index, the slice selects {count}"),
            ));
        }
        Ok(count)
    }
}

/// What a handle resolves to when an operation is submitted.
pub(crate) struct Geometry<'a> {
    pub(crate) data: *mut u8,
    pub(crate) layout: &'a Layout,
    pub(crate) conj: bool,
}

/// A new view whose region may have been allocated (an index box): fails
/// as that allocation would when a test arms [`Site::Region`].
fn region_allocated(v: View, origin: &'static str) -> Result<View> {
    if matches!(v.region, Region::Box(_)) && failpoint::hit(Site::Region) {
        return Err(failpoint::out_of_memory(Site::Region, origin));
    }
    Ok(v)
}

impl View {
    /// The view of a whole value as it is now (the starting point of every view).
    pub(crate) fn of_root(root: &ValueRc, origin: &'static str) -> Result<View> {
        let contents = root.state.lock().contents.clone().ok_or_else(|| {
            Error::new(Status::Unconstructed, origin, "a view of an unconstructed tensor cannot be made")
        })?;
        let layout = contents.layout.clone();
        let map = (0..layout.rank()).map(|axis| RootAxis::Mapped { axis, start: 0, step: 1 }).collect();
        let mut v = View {
            root: root.clone(),
            contents: Some(contents),
            layout,
            conj: false,
            read_only: root.read_only(),
            map: Some(map),
            region: Region::Full,
        };
        v.region = v.compute_region();
        Ok(v)
    }

    fn dtype(&self) -> DType {
        self.root.dtype()
    }

    /// The root's contents the view selects from.
    fn contents(&self) -> &Arc<Contents> {
        self.contents.as_ref().expect("a view's contents are kept while a handle to it lives")
    }

    /// The view's last handle has gone, but operations on its value may
    /// still be pending (see [`crate::tensor::counted`]). They need the
    /// view's layout, not its count of the contents: they point into the
    /// value's contents, which a writer that replaces them keeps alive until
    /// it has run, after them. Letting go of the count here lets such a
    /// writer replace them (it refuses while a view still counts them).
    pub(crate) fn release_contents(&mut self) {
        self.contents = None;
    }

    pub(crate) fn geometry(&self) -> Geometry<'_> {
        let size = self.dtype().size() as isize;
        // SAFETY: the view's layout lies inside the contents' storage (views
        // only ever select elements of their parent), which `contents` keeps alive.
        let data = unsafe { self.contents().storage().ptr().offset(self.layout.offset * size) };
        Geometry { data, layout: &self.layout, conj: self.conj }
    }

    fn derived(&self, layout: Layout, map: Option<SmallVec<[RootAxis; 4]>>) -> View {
        let mut v = View {
            root: self.root.clone(),
            contents: Some(self.contents().clone()),
            layout,
            conj: self.conj,
            read_only: self.read_only,
            map,
            region: Region::Empty,
        };
        v.region = v.compute_region();
        v
    }

    fn compute_region(&self) -> Region {
        if self.layout.is_empty() {
            return Region::Empty;
        }
        let span = self.layout.checked_span().expect("a view's layout lies inside its storage");
        let root = &self.contents().layout;
        match &self.map {
            Some(map) => {
                let axes: SmallVec<[Prog; 4]> = map
                    .iter()
                    .map(|r| match *r {
                        RootAxis::Fixed(i) => Prog { start: i, step: 1, count: 1 },
                        RootAxis::Mapped { axis, start, step } => {
                            Prog { start, step, count: self.layout.extents[axis] }
                        }
                    })
                    .collect();
                // Every index of every root axis (a permutation or a reversal
                // of the whole value): the region is all of it.
                let all = axes.iter().zip(&root.extents).all(|(p, &n)| p.count == n && (n <= 1 || p.step.abs() == 1));
                if all {
                    Region::Full
                } else {
                    Region::Box(Arc::new(IndexBox { axes, span }))
                }
            }
            None => {
                let exact = self.layout.footprint() == Some(self.layout.len());
                if exact && self.layout.len() == root.len() && root.footprint() == Some(root.len()) {
                    // Every element of a dense root (a reshape of all of it).
                    Region::Full
                } else {
                    Region::Span { lo: span.0, hi: span.1, exact }
                }
            }
        }
    }

    /// A slice: one spec per axis.
    pub(crate) fn slice(&self, specs: &[SliceSpec]) -> Result<View> {
        let (layout, new_axis) = sliced(&self.layout, specs)?;
        let map = self.map.as_ref().map(|m| {
            m.iter()
                .map(|r| match *r {
                    RootAxis::Fixed(i) => RootAxis::Fixed(i),
                    RootAxis::Mapped { axis, start, step } => {
                        let s = &specs[axis];
                        let start = start + step * s.start;
                        match new_axis[axis] {
                            None => RootAxis::Fixed(start),
                            Some(a) => {
                                RootAxis::Mapped { axis: a, start, step: step * slice_step(s, layout.extents[a]) }
                            }
                        }
                    }
                })
                .collect()
        });
        region_allocated(self.derived(layout, map), "tensor_slice")
    }

    /// Axes reordered: view axis `j` is this view's axis `perm[j]`.
    pub(crate) fn permute(&self, perm: &[usize]) -> Result<View> {
        let (layout, inverse) = permuted(&self.layout, perm)?;
        let map = self.map.as_ref().map(|m| {
            m.iter()
                .map(|r| match *r {
                    RootAxis::Mapped { axis, start, step } => RootAxis::Mapped { axis: inverse[axis], start, step },
                    fixed => fixed,
                })
                .collect()
        });
        region_allocated(self.derived(layout, map), "tensor_permute")
    }

    /// The conjugate: lazy for complex dtypes, the identity for real ones.
    /// Either way the view is read-only.
    pub(crate) fn conjugate(&self) -> View {
        let mut v = self.derived(self.layout.clone(), self.map.clone());
        v.conj = self.dtype().is_complex() && !self.conj;
        v.read_only = true;
        v
    }

    /// The same elements with new extents, read in `order`; the view must be
    /// dense in that order.
    pub(crate) fn reshape(&self, extents: &[usize], order: Order) -> Result<View> {
        Ok(self.derived(reshaped(&self.layout, extents, order)?, None))
    }
}

/// The step a slice takes on one axis: a step that selects at most one
/// index is taken as 1 (the same elements), so that no stride is multiplied
/// by a step past the axis.
fn slice_step(spec: &SliceSpec, count: usize) -> isize {
    if count > 1 {
        spec.step
    } else {
        1
    }
}

/// The layout of a slice of `l` (one spec per axis), and where each of
/// `l`'s axes went (`None`: dropped). Shared by views of values and of
/// coalesced block views.
pub(crate) fn sliced(l: &Layout, specs: &[SliceSpec]) -> Result<(Layout, SmallVec<[Option<usize>; 4]>)> {
    const O: &str = "tensor_slice";
    if specs.len() != l.rank() {
        return Err(Error::new(
            Status::InvalidArgument,
            O,
            format!("{} slice specs for a tensor of rank {}", specs.len(), l.rank()),
        ));
    }
    let mut offset = l.offset;
    let mut extents = SmallVec::new();
    let mut strides = SmallVec::new();
    let mut new_axis = SmallVec::new();
    for (k, spec) in specs.iter().enumerate() {
        let count = spec.count(l.extents[k], k)?;
        if count > 0 {
            offset += spec.start * l.strides[k];
        }
        if spec.drop {
            new_axis.push(None);
        } else {
            new_axis.push(Some(extents.len()));
            extents.push(count);
            strides.push(l.strides[k] * slice_step(spec, count));
        }
    }
    Ok((Layout { offset, extents, strides }, new_axis))
}

/// The layout of `l` with axes reordered (axis `j` is `l`'s axis
/// `perm[j]`), and the inverse permutation.
pub(crate) fn permuted(l: &Layout, perm: &[usize]) -> Result<(Layout, SmallVec<[usize; 4]>)> {
    const O: &str = "tensor_permute";
    let rank = l.rank();
    if perm.len() != rank {
        return Err(Error::new(
            Status::InvalidArgument,
            O,
            format!("a permutation of {} axes for a tensor of rank {rank}", perm.len()),
        ));
    }
    let mut inverse: SmallVec<[usize; 4]> = SmallVec::from_elem(usize::MAX, rank);
    for (j, &p) in perm.iter().enumerate() {
        if p >= rank || inverse[p] != usize::MAX {
            return Err(Error::new(Status::InvalidArgument, O, format!("{perm:?} is not a permutation of 0..{rank}")));
        }
        inverse[p] = j;
    }
    let layout = Layout {
        offset: l.offset,
        extents: perm.iter().map(|&p| l.extents[p]).collect(),
        strides: perm.iter().map(|&p| l.strides[p]).collect(),
    };
    Ok((layout, inverse))
}

/// The layout of the elements of `l` with new extents, read in `order`;
/// `l` must be dense in that order.
pub(crate) fn reshaped(l: &Layout, extents: &[usize], order: Order) -> Result<Layout> {
    const O: &str = "tensor_reshape";
    let n: Option<usize> = extents.iter().try_fold(1usize, |a, &e| a.checked_mul(e));
    if n != Some(l.len()) {
        return Err(Error::new(
            Status::ShapeMismatch,
            O,
            format!("cannot reshape {:?} ({} elements) to {extents:?}", l.extents, l.len()),
        ));
    }
    let dense = match order {
        Order::RowMajor => l.is_row_major_contiguous(),
        Order::ColMajor => l.is_col_major_contiguous(),
    };
    if !dense {
        return Err(Error::new(
            Status::NotContiguous,
            O,
            format!(
                "a reshape needs data dense in {} order; strides {:?} for extents {:?} are not",
                match order {
                    Order::RowMajor => "row-major",
                    Order::ColMajor => "column-major",
                },
                l.strides,
                l.extents
            ),
        ));
    }
    let mut layout = Layout::contiguous(extents, order);
    layout.offset = l.offset;
    Ok(layout)
}
