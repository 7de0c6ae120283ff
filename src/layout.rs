//! Tensor layouts: extents, strides in elements (negative and zero allowed) and
//! an element offset into the backing allocation. Row-major, column-major and
//! arbitrary strides are all just layouts.

use smallvec::SmallVec;

use crate::error::{Error, Result, Status};

/// Extents of a tensor (one entry per axis).
pub type Extents = SmallVec<[usize; 2]>;
/// Strides in elements (one entry per axis).
pub type Strides = SmallVec<[isize; 2]>;

/// The most axes a tensor made by an operation has: a contraction whose
/// result would have more is refused (the C ABI refuses more at every entry,
/// so that each of its tensors can be sliced, permuted and reshaped there).
///
/// ```
/// use tensorasync::{ops, DType, Domain, Order, Scalar, Status, Submit, Tensor, MAX_RANK};
/// let ones = vec![1usize; MAX_RANK / 2 + 1];
/// let a = Tensor::zeros(DType::F64, &ones, Order::RowMajor, Domain::Host).unwrap();
/// let c = Tensor::unconstructed(DType::F64, Domain::Host).unwrap();
/// // An outer product of two such tensors would have MAX_RANK + 2 axes.
/// let e = ops::contract(&c, Scalar::real(1.0), &a, &a, &[], &[], None, Submit::default()).err().unwrap();
/// assert_eq!(e.status(), Status::InvalidArgument);
/// ```
pub const MAX_RANK: usize = 64;

/// Element order for contiguous layouts.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Order {
    /// C order: the last axis is contiguous.
    RowMajor,
    /// Fortran/Julia order: the first axis is contiguous.
    ColMajor,
}

/// A strided view of elements relative to an allocation's base.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Offset of element `[0, 0, ...]` from the base, in elements.
    pub offset: isize,
    pub extents: Extents,
    pub strides: Strides,
}

impl Layout {
    /// A dense layout with the given order and offset 0.
    ///
    /// ```
    /// use tensorasync::{Layout, Order};
    /// assert_eq!(Layout::contiguous(&[2, 3], Order::RowMajor).strides.as_slice(), &[3, 1]);
    /// ```
    pub fn contiguous(extents: &[usize], order: Order) -> Layout {
        let mut strides: Strides = SmallVec::from_elem(0, extents.len());
        let mut step: isize = 1;
        let axes: Box<dyn Iterator<Item = usize>> = match order {
            Order::RowMajor => Box::new((0..extents.len()).rev()),
            Order::ColMajor => Box::new(0..extents.len()),
        };
        for ax in axes {
            strides[ax] = step;
            step = step.saturating_mul(extents[ax].max(1) as isize);
        }
        Layout { offset: 0, extents: extents.into(), strides }
    }

    /// A layout from caller-supplied strides. Checks that the element count and
    /// every offset fit in `isize`.
    ///
    /// ```
    /// use tensorasync::Layout;
    /// assert!(Layout::strided(&[2, 2], &[-2, 1], 2, "example").is_ok());
    /// assert!(Layout::strided(&[2], &[1, 1], 0, "example").is_err()); // ranks differ
    /// assert!(Layout::strided(&[0, 3], &[3, 1], 0, "example").is_ok()); // no element
    /// ```
    pub fn strided(extents: &[usize], strides: &[isize], offset: isize, origin: &'static str) -> Result<Layout> {
        if extents.len() != strides.len() {
            return Err(Error::new(Status::InvalidArgument, origin, "extents and strides differ in rank"));
        }
        let l = Layout { offset, extents: extents.into(), strides: strides.into() };
        l.checked_len().ok_or_else(|| Error::new(Status::InvalidArgument, origin, "element count overflows"))?;
        if !l.is_empty() {
            l.checked_span().ok_or_else(|| Error::new(Status::InvalidArgument, origin, "layout offsets overflow"))?;
        }
        Ok(l)
    }

    /// Number of axes.
    ///
    /// ```
    /// use tensorasync::{Layout, Order};
    /// assert_eq!(Layout::contiguous(&[2, 3, 4], Order::RowMajor).rank(), 3);
    /// ```
    pub fn rank(&self) -> usize {
        self.extents.len()
    }

    /// Number of elements.
    ///
    /// ```
    /// use tensorasync::{Layout, Order};
    /// assert_eq!(Layout::contiguous(&[2, 3], Order::RowMajor).len(), 6);
    /// ```
    #[inline]
    pub fn len(&self) -> usize {
        self.extents.iter().product()
    }

    /// Whether the layout has no elements.
    ///
    /// ```
    /// use tensorasync::{Layout, Order};
    /// assert!(Layout::contiguous(&[2, 0], Order::RowMajor).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.extents.contains(&0)
    }

    /// Number of elements, or `None` on overflow.
    ///
    /// ```
    /// use tensorasync::{Layout, Order};
    /// assert_eq!(Layout::contiguous(&[4, 5], Order::ColMajor).checked_len(), Some(20));
    /// ```
    pub fn checked_len(&self) -> Option<usize> {
        self.extents.iter().try_fold(1usize, |a, &e| a.checked_mul(e))
    }

    /// Smallest and largest element offset touched (inclusive), or `None` when
    /// empty or on overflow.
    ///
    /// ```
    /// use tensorasync::Layout;
    /// let reversed = Layout::strided(&[3], &[-1], 2, "example").unwrap();
    /// assert_eq!(reversed.checked_span(), Some((0, 2)));
    /// ```
    pub fn checked_span(&self) -> Option<(isize, isize)> {
        if self.is_empty() {
            return None;
        }
        let (mut lo, mut hi) = (self.offset, self.offset);
        for (&e, &s) in self.extents.iter().zip(&self.strides) {
            let reach = s.checked_mul(isize::try_from(e - 1).ok()?)?;
            if reach < 0 {
                lo = lo.checked_add(reach)?;
            } else {
                hi = hi.checked_add(reach)?;
            }
        }
        Some((lo, hi))
    }

    /// The byte offsets of the first byte of the lowest element and the last
    /// byte of the highest one, for elements of `size` bytes: `None` when the
    /// layout is empty, or when those offsets or the bytes between them do
    /// not fit `isize` (no pointer may be offset further).
    ///
    /// ```
    /// use tensorasync::Layout;
    /// let l = Layout::strided(&[2], &[-3], 0, "example").unwrap();
    /// assert_eq!(l.checked_byte_span(8), Some((-24, 7)));
    /// let far = Layout::strided(&[2], &[1 << 60], 0, "example").unwrap();
    /// assert_eq!(far.checked_byte_span(8), None); // element 1 lies 2^63 bytes on
    /// ```
    pub fn checked_byte_span(&self, size: usize) -> Option<(isize, isize)> {
        let (lo, hi) = self.checked_span()?;
        let size = isize::try_from(size).ok()?;
        let first = lo.checked_mul(size)?;
        let last = hi.checked_mul(size)?.checked_add(size - 1)?;
        last.checked_sub(first)?;
        Some((first, last))
    }

    /// Elements from the lowest to the highest address the layout reaches
    /// (0 when empty), or `None` on overflow.
    ///
    /// ```
    /// use tensorasync::Layout;
    /// assert_eq!(Layout::strided(&[3], &[2], 0, "example").unwrap().footprint(), Some(5));
    /// ```
    pub fn footprint(&self) -> Option<usize> {
        if self.is_empty() {
            return Some(0);
        }
        let (lo, hi) = self.checked_span()?;
        usize::try_from(hi.checked_sub(lo)?).ok()?.checked_add(1)
    }

    /// Whether every element lies inside an allocation of `capacity` elements.
    ///
    /// ```
    /// use tensorasync::{Layout, Order};
    /// let l = Layout::contiguous(&[2, 2], Order::RowMajor);
    /// assert!(l.fits_in(4) && !l.fits_in(3));
    /// ```
    pub fn fits_in(&self, capacity: usize) -> bool {
        match self.checked_span() {
            Some((lo, hi)) => lo >= 0 && (hi as usize) < capacity,
            None => self.is_empty(),
        }
    }

    /// Whether distinct indices always address distinct elements. The test is
    /// exact for layouts whose sorted strides nest (every dense, sliced or
    /// permuted layout) and conservative otherwise: it never calls an
    /// overlapping layout disjoint.
    ///
    /// ```
    /// use tensorasync::Layout;
    /// assert!(Layout::strided(&[2, 2], &[1, 2], 0, "example").unwrap().is_non_overlapping());
    /// assert!(!Layout::strided(&[2, 2], &[1, 1], 0, "example").unwrap().is_non_overlapping());
    /// ```
    pub fn is_non_overlapping(&self) -> bool {
        non_overlapping(&self.extents, &self.strides)
    }

    /// Whether this is the dense row-major layout of its extents.
    ///
    /// ```
    /// use tensorasync::{Layout, Order};
    /// assert!(Layout::contiguous(&[2, 3], Order::RowMajor).is_row_major_contiguous());
    /// ```
    pub fn is_row_major_contiguous(&self) -> bool {
        dense_in(&self.extents, &self.strides, Order::RowMajor)
    }

    /// Whether this is the dense column-major layout of its extents.
    ///
    /// ```
    /// use tensorasync::{Layout, Order};
    /// assert!(!Layout::contiguous(&[2, 3], Order::RowMajor).is_col_major_contiguous());
    /// ```
    pub fn is_col_major_contiguous(&self) -> bool {
        dense_in(&self.extents, &self.strides, Order::ColMajor)
    }
}

/// [`Layout::is_non_overlapping`] for raw extents and strides (the leaf
/// kernels check their resolved views with it).
pub fn non_overlapping(extents: &[usize], strides: &[isize]) -> bool {
    if extents.contains(&0) {
        return true;
    }
    let mut dims: SmallVec<[(usize, usize); 6]> =
        extents.iter().zip(strides).filter(|(&e, _)| e > 1).map(|(&e, &s)| (s.unsigned_abs(), e)).collect();
    dims.sort_unstable();
    let mut reach = 0usize; // largest offset reachable by the inner axes
    for (s, e) in dims {
        if s <= reach {
            return false;
        }
        reach = match s.checked_mul(e - 1).and_then(|r| r.checked_add(reach)) {
            Some(r) => r,
            None => return false,
        };
    }
    true
}

/// The axes of `N` equally-shaped layouts as `(extent, per-operand strides)`,
/// outermost first: axes of extent 1 dropped, ordered by the first operand's
/// stride (innermost = smallest), adjacent axes that are contiguous for every
/// operand merged. Empty for a single element.
pub fn merged_axes<const N: usize>(extents: &[usize], strides: [&[isize]; N]) -> SmallVec<[(usize, [isize; N]); 4]> {
    // Dense row-major operands (most of them) are one axis: no sort, no merge.
    let dense = if extents.contains(&0) { None } else { one_dense_run(extents, strides) };
    if let Some(len) = dense {
        let mut one = SmallVec::new();
        if len != 1 {
            one.push((len, [1; N]));
        }
        return one;
    }
    sorted_merged(extents, strides)
}

/// The element count, when every operand is dense row-major over `extents`
/// (which the caller has checked has no 0): their elements are one run.
#[inline(always)]
fn one_dense_run<const N: usize>(extents: &[usize], strides: [&[isize]; N]) -> Option<usize> {
    if strides.iter().all(|s| dense_in(extents, s, Order::RowMajor)) {
        Some(extents.iter().product())
    } else {
        None
    }
}

/// [`merged_axes`] by sorting the axes and merging neighbours.
fn sorted_merged<const N: usize>(extents: &[usize], strides: [&[isize]; N]) -> SmallVec<[(usize, [isize; N]); 4]> {
    let mut dims: SmallVec<[(usize, [isize; N]); 4]> = extents
        .iter()
        .enumerate()
        .filter(|(_, &e)| e != 1)
        .map(|(ax, &e)| (e, std::array::from_fn(|k| strides[k][ax])))
        .collect();
    dims.sort_by_key(|(_, s)| std::cmp::Reverse(s[0].unsigned_abs()));
    let mut merged: SmallVec<[(usize, [isize; N]); 4]> = SmallVec::new();
    for (e, s) in dims {
        if let Some(last) = merged.last_mut() {
            if (0..N).all(|k| last.1[k] == s[k] * e as isize) {
                last.0 *= e;
                last.1 = s;
                continue;
            }
        }
        merged.push((e, s));
    }
    merged
}

/// Whether `strides` are those of [`Layout::contiguous`] for `extents` in
/// `order`, where an axis of extent 0 or 1 may have any stride (no layout is
/// built to compare).
#[inline]
fn dense_in(extents: &[usize], strides: &[isize], order: Order) -> bool {
    let mut want = 1isize;
    let mut axis = |(&e, &s): (&usize, &isize)| {
        let ok = e <= 1 || s == want;
        want = want.saturating_mul(e.max(1) as isize);
        ok
    };
    match order {
        Order::RowMajor => extents.iter().zip(strides).rev().all(&mut axis),
        Order::ColMajor => extents.iter().zip(strides).all(&mut axis),
    }
}

/// Call `f(base)` for every index of the `outer` axes (outermost first),
/// `base` being each operand's offset there.
fn for_each_outer<const N: usize>(outer: &[(usize, [isize; N])], offsets: [isize; N], mut f: impl FnMut([isize; N])) {
    let mut idx: SmallVec<[usize; 4]> = SmallVec::from_elem(0, outer.len());
    let mut base = offsets;
    loop {
        f(base);
        // Odometer increment, innermost outer axis first.
        let mut ax = outer.len();
        loop {
            if ax == 0 {
                return;
            }
            ax -= 1;
            idx[ax] += 1;
            for (b, s) in base.iter_mut().zip(&outer[ax].1) {
                *b += s;
            }
            if idx[ax] < outer[ax].0 {
                break;
            }
            let n = outer[ax].0 as isize;
            for (b, s) in base.iter_mut().zip(&outer[ax].1) {
                *b -= s * n;
            }
            idx[ax] = 0;
        }
    }
}

/// Visit every element of `N` equally-shaped layouts in runs: `f(starts, len, steps)`
/// is called with the element offset of each operand at the start of a run, the
/// run length and each operand's step within the run. Axes of extent 1 are
/// dropped, axes are ordered by the first operand's stride (innermost = smallest)
/// and adjacent axes that are contiguous for every operand are merged, so dense
/// data is visited as one long run.
pub fn for_each_run<const N: usize>(
    extents: &[usize],
    offsets: [isize; N],
    strides: [&[isize]; N],
    mut f: impl FnMut([isize; N], usize, [isize; N]),
) {
    if extents.contains(&0) {
        return;
    }
    // Dense row-major operands (most of them): one run, as the merge below
    // would give, without building its vectors (a small axpy spent more on
    // them than on its elements).
    if let Some(len) = one_dense_run(extents, strides) {
        f(offsets, len, if len == 1 { [0; N] } else { [1; N] });
        return;
    }
    runs_of_merged(&sorted_merged(extents, strides), offsets, f);
}

/// The runs of [`for_each_run`] over axes already merged.
fn runs_of_merged<const N: usize>(
    merged: &[(usize, [isize; N])],
    offsets: [isize; N],
    mut f: impl FnMut([isize; N], usize, [isize; N]),
) {
    let Some(&(run, steps)) = merged.last() else {
        f(offsets, 1, [0; N]);
        return;
    };
    for_each_outer(&merged[..merged.len() - 1], offsets, |base| f(base, run, steps));
}

/// Like [`for_each_run`], two axes at a time: `f(starts, (len, steps),
/// (rows, pitches))` visits `rows` runs, run `r` of operand `k` starting at
/// `starts[k] + r * pitches[k]` (for devices, whose copies and memsets take
/// such planes in one call). `rows` is 1 (pitches 0) when there is one axis.
pub fn for_each_plane<const N: usize>(
    extents: &[usize],
    offsets: [isize; N],
    strides: [&[isize]; N],
    mut f: impl FnMut([isize; N], (usize, [isize; N]), (usize, [isize; N])),
) {
    if extents.contains(&0) {
        return;
    }
    let merged = merged_axes(extents, strides);
    match merged.len() {
        0 => f(offsets, (1, [0; N]), (1, [0; N])),
        1 => f(offsets, merged[0], (1, [0; N])),
        n => {
            let (inner, rows) = (merged[n - 1], merged[n - 2]);
            for_each_outer(&merged[..n - 2], offsets, |base| f(base, inner, rows));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dense row-major shortcut of `merged_axes` gives what sorting and
    /// merging gives, for every shape of rank 0 to 4 with extents 0 to 3
    /// (axes of extent 1 with any stride), and two operands alike.
    #[test]
    fn dense_layouts_merge_to_what_the_general_merge_gives() {
        let mut shapes: Vec<Vec<usize>> = vec![vec![]];
        for _ in 0..4 {
            let longer: Vec<Vec<usize>> =
                shapes.iter().flat_map(|s| (0..4).map(move |e| [s.clone(), vec![e]].concat())).collect();
            shapes.extend(longer.into_iter().filter(|s| s.len() <= 4));
            shapes.sort();
            shapes.dedup();
        }
        let mut checked = 0;
        for ext in &shapes {
            let mut st = Layout::contiguous(ext, Order::RowMajor).strides.clone();
            // An axis of extent 1 may carry any stride and stays dense.
            if let Some(i) = ext.iter().position(|&e| e == 1) {
                st[i] = 977;
            }
            assert!(dense_in(ext, &st, Order::RowMajor), "{ext:?} {st:?}");
            let col = Layout::contiguous(ext, Order::ColMajor);
            assert!(col.is_col_major_contiguous(), "{ext:?}");
            let both_ways = ext.iter().filter(|&&e| e > 1).count() <= 1;
            assert_eq!(col.is_row_major_contiguous(), both_ways, "{ext:?}");
            assert_eq!(merged_axes(ext, [&st]), sorted_merged(ext, [&st]), "{ext:?}");
            assert_eq!(merged_axes(ext, [&st, &st]), sorted_merged(ext, [&st, &st]), "{ext:?}");
            // `for_each_run`'s own shortcut makes the calls the general merge makes.
            let (mut short, mut general) = (vec![], vec![]);
            for_each_run(ext, [5, 9], [&st, &st], |o, n, s| short.push((o, n, s)));
            if !ext.contains(&0) {
                runs_of_merged(&sorted_merged(ext, [&st, &st]), [5, 9], |o, n, s| general.push((o, n, s)));
            }
            assert_eq!(short, general, "{ext:?}");
            checked += 1;
        }
        assert!(checked > 300);
        // Not dense: column-major, padded rows, a reversed axis.
        assert!(!dense_in(&[2, 3], &[1, 2], Order::RowMajor));
        assert!(!dense_in(&[2, 3], &[4, 1], Order::RowMajor));
        assert!(!dense_in(&[2, 3], &[3, -1], Order::RowMajor));
    }

    /// Planes visit exactly the elements runs visit, for dense, strided,
    /// permuted and negative-stride layouts of ranks 0 to 4.
    #[test]
    fn planes_cover_what_runs_cover() {
        let cases: Vec<(Vec<usize>, Vec<isize>)> = vec![
            (vec![], vec![]),
            (vec![5], vec![1]),
            (vec![5], vec![-3]),
            (vec![3, 4], vec![4, 1]),
            (vec![3, 4], vec![1, 3]),
            (vec![3, 4], vec![10, 2]),
            (vec![2, 3, 4], vec![12, 4, 1]),
            (vec![2, 3, 4], vec![1, 2, 6]),
            (vec![2, 1, 3, 2], vec![-20, 7, 5, 1]),
            (vec![2, 0, 3], vec![3, 3, 1]),
        ];
        for (extents, strides) in cases {
            let mut runs = vec![];
            for_each_run(&extents, [100, 7], [&strides, &strides], |[s, t], n, [st, _]| {
                assert_eq!(s - 100, t - 7);
                runs.extend((0..n as isize).map(|i| s + i * st));
            });
            let mut planes = vec![];
            for_each_plane(&extents, [100], [&strides], |[s], (n, [st]), (rows, [p])| {
                for r in 0..rows as isize {
                    planes.extend((0..n as isize).map(|i| s + r * p + i * st));
                }
            });
            runs.sort();
            planes.sort();
            assert_eq!(runs, planes, "extents {extents:?} strides {strides:?}");
        }
    }

    fn offsets_of(l: &Layout) -> Vec<isize> {
        let mut v = vec![];
        for_each_run(&l.extents, [l.offset], [&l.strides], |[s], n, [st]| {
            for i in 0..n as isize {
                v.push(s + i * st)
            }
        });
        v.sort();
        v
    }

    #[test]
    fn contiguous_strides() {
        let r = Layout::contiguous(&[2, 3, 4], Order::RowMajor);
        assert_eq!(&r.strides[..], &[12, 4, 1]);
        let c = Layout::contiguous(&[2, 3, 4], Order::ColMajor);
        assert_eq!(&c.strides[..], &[1, 2, 6]);
        assert!(r.is_row_major_contiguous() && c.is_col_major_contiguous());
        assert_eq!(offsets_of(&r), (0..24).collect::<Vec<_>>());
        assert_eq!(offsets_of(&c), (0..24).collect::<Vec<_>>());
    }

    #[test]
    fn negative_and_zero_strides() {
        let l = Layout { offset: 5, extents: [3, 2].into(), strides: [-2, 1].into() };
        assert_eq!(l.checked_span(), Some((1, 6)));
        assert_eq!(offsets_of(&l), vec![1, 2, 3, 4, 5, 6]);
        assert!(l.is_non_overlapping());
        let z = Layout { offset: 0, extents: [3, 2].into(), strides: [0, 1].into() };
        assert!(!z.is_non_overlapping());
        let o = Layout { offset: 0, extents: [2, 2].into(), strides: [1, 1].into() };
        assert!(!o.is_non_overlapping());
        assert!(Layout::contiguous(&[4, 5], Order::ColMajor).is_non_overlapping());
    }

    #[test]
    fn run_visits_pairs_in_lockstep() {
        let a = Layout::contiguous(&[3, 4], Order::RowMajor);
        let b = Layout::contiguous(&[3, 4], Order::ColMajor);
        let mut pairs = vec![];
        for_each_run(&a.extents, [0, 0], [&a.strides, &b.strides], |[sa, sb], n, [ta, tb]| {
            for i in 0..n as isize {
                pairs.push((sa + i * ta, sb + i * tb))
            }
        });
        pairs.sort();
        let want: Vec<_> =
            (0..3).flat_map(|i| (0..4).map(move |j| ((i * 4 + j) as isize, (i + j * 3) as isize))).collect();
        assert_eq!(pairs, want);
    }

    #[test]
    fn rank0_and_empty() {
        let s = Layout::contiguous(&[], Order::RowMajor);
        assert_eq!(s.len(), 1);
        assert_eq!(offsets_of(&s), vec![0]);
        let e = Layout::contiguous(&[3, 0], Order::RowMajor);
        assert!(e.is_empty());
        assert!(offsets_of(&e).is_empty());
    }
}
