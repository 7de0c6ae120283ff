//! Sub-range hazards: which elements of a value an access touches.
//!
//! Accesses through views carry a `Region`. Two accesses to one value
//! conflict only if their regions can overlap and one of them writes; the
//! test never misses an overlap (it may report one that is not there), so
//! results stay exactly those of sequential execution.
//!
//! The rule and its cost:
//! - A whole-value access is `Region::Full`: it conflicts with everything.
//! - A view made by slicing and permuting keeps an exact *index box*: per axis
//!   of the root value, an arithmetic progression of indices. Two boxes are
//!   disjoint if, on some root axis, their progressions share no index (the
//!   first common index by the Chinese remainder theorem, within the common
//!   bounds). This is exact, strided slices included. Cost: O(rank) per pair
//!   of accesses.
//! - Any other view (a reshape, or a slice of one) keeps the interval of
//!   storage elements it spans; intervals that do not intersect are disjoint.
//! - Enrolling an access tests it against the entries of the value's
//!   frontier (the unfinished accesses not yet covered by a later writer)
//!   whose storage intervals ([`Region::bounds`]) meet its own: a small
//!   frontier is scanned, a large one is indexed (see [`crate::queue`]).

use std::sync::Arc;

use smallvec::SmallVec;

use crate::layout::Layout;

/// The indices `start, start + step, ...` (`count` of them) along one root axis.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Prog {
    pub(crate) start: isize,
    pub(crate) step: isize,
    pub(crate) count: usize,
}

impl Prog {
    /// Lowest index, highest index, and a positive step.
    fn normalized(self) -> (isize, isize, isize) {
        let last = self.start + self.step * (self.count as isize - 1);
        let step = if self.count <= 1 { 1 } else { self.step.abs() };
        (self.start.min(last), self.start.max(last), step)
    }

    /// Whether the two progressions share an index (exact).
    fn may_intersect(self, other: Prog) -> bool {
        self.count != 0 && other.count != 0 && Run::of(self).meet(Run::of(other)).is_some()
    }

    /// Whether every index of `other` is one of `self`'s.
    fn contains(self, other: Prog) -> bool {
        if other.count == 0 {
            return true;
        }
        if self.count == 0 {
            return false;
        }
        let (a0, a1, sa) = self.normalized();
        let (b0, b1, sb) = other.normalized();
        b0 >= a0 && b1 <= a1 && (b0 - a0) % sa == 0 && (other.count == 1 || sb % sa == 0)
    }
}

/// A progression as `lo..=hi` in steps of `step` (> 0), for the exact set
/// operations of [`Region::subtract`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Run {
    lo: isize,
    hi: isize,
    step: isize,
}

impl Run {
    fn of(p: Prog) -> Run {
        let (lo, hi, step) = p.normalized();
        Run { lo, hi, step }
    }

    fn prog(self) -> Prog {
        Prog { start: self.lo, step: self.step, count: ((self.hi - self.lo) / self.step + 1) as usize }
    }

    /// A run of the indices `lo..=hi` in steps of `step`, one index having step 1.
    fn new(lo: isize, hi: isize, step: isize) -> Run {
        Run { lo, hi, step: if lo == hi { 1 } else { step } }
    }

    /// `self ∩ other` (`None` when they share no index): the indices of both
    /// form one run whose step is the steps' lcm, from the first common
    /// index (the Chinese remainder theorem, in `i128` so that no product
    /// overflows).
    fn meet(self, other: Run) -> Option<Run> {
        let (lo, hi) = (self.lo.max(other.lo), self.hi.min(other.hi));
        if lo > hi {
            return None;
        }
        let (m, n) = (self.step as i128, other.step as i128);
        let (g, inv_m) = gcd_and_inverse(m, n);
        let d = other.lo as i128 - self.lo as i128;
        if d % g != 0 {
            return None;
        }
        // x = self.lo + m·t is on `other`'s grid when m·t ≡ d (mod n).
        let n_g = n / g;
        let t = ((d / g).rem_euclid(n_g) * inv_m.rem_euclid(n_g)).rem_euclid(n_g);
        let lcm = m / g * n;
        let x = self.lo as i128 + m * t;
        let first = lo as i128 + (x - lo as i128).rem_euclid(lcm);
        if first > hi as i128 {
            return None;
        }
        let last = first + (hi as i128 - first) / lcm * lcm;
        // `lcm` fits whenever two common indices lie within `lo..=hi`.
        let step = if first == last { 1 } else { lcm as isize };
        Some(Run::new(first as isize, last as isize, step))
    }

    /// `self ∩ other` and `self \ other` as runs: the part of `self` below
    /// the common indices, the part above, and between them `self`'s other
    /// residues modulo the common step. `None` when that takes more than
    /// [`MAX_RESIDUE_RUNS`] runs (a step far larger than `self`'s).
    fn split(self, other: Run) -> Option<(Option<Run>, SmallVec<[Run; 2]>)> {
        let Some(c) = self.meet(other) else {
            return Some((None, SmallVec::from_elem(self, 1)));
        };
        let mut rest = SmallVec::new();
        if self.lo < c.lo {
            rest.push(Run::new(self.lo, c.lo - self.step, self.step));
        }
        if c.hi < self.hi {
            rest.push(Run::new(c.hi + self.step, self.hi, self.step));
        }
        if c.lo < c.hi {
            // `c.step` is a multiple of `self.step`.
            let residues = c.step / self.step;
            if residues - 1 > MAX_RESIDUE_RUNS {
                return None;
            }
            for j in 1..residues {
                let lo = c.lo + j * self.step;
                rest.push(Run::new(lo, lo + (c.hi - lo) / c.step * c.step, c.step));
            }
        }
        Some((Some(c), rest))
    }
}

/// At most this many residue runs for one axis of a difference (see
/// [`Run::split`]); a difference that needs more is not given, and its
/// caller keeps the larger set.
const MAX_RESIDUE_RUNS: isize = 32;

/// `gcd(m, n)` (m, n > 0) and an inverse of `m / gcd` modulo `n / gcd`
/// (extended Euclid).
fn gcd_and_inverse(m: i128, n: i128) -> (i128, i128) {
    let (mut r0, mut r1, mut s0, mut s1) = (m, n, 1i128, 0i128);
    while r1 != 0 {
        let q = r0 / r1;
        (r0, r1) = (r1, r0 - q * r1);
        (s0, s1) = (s1, s0 - q * s1);
    }
    (r0, s0)
}

/// An exact set of root indices: one progression per root axis, and the
/// interval of storage elements they span (for comparing with intervals).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IndexBox {
    pub(crate) axes: SmallVec<[Prog; 4]>,
    pub(crate) span: (isize, isize),
}

impl IndexBox {
    /// The box of `axes` (indices of the root whose layout is `root`), with
    /// the storage interval they span.
    pub(crate) fn new(axes: SmallVec<[Prog; 4]>, root: &Layout) -> IndexBox {
        let (mut lo, mut hi) = (root.offset, root.offset);
        for (p, &st) in axes.iter().zip(&root.strides) {
            let last = p.start + p.step * (p.count as isize - 1);
            let (x, y) = (p.start * st, last * st);
            lo += x.min(y);
            hi += x.max(y);
        }
        IndexBox { axes, span: (lo, hi) }
    }

    /// Every index of the root (none for an empty root).
    fn of_root(root: &Layout) -> Option<IndexBox> {
        if root.is_empty() {
            return None;
        }
        Some(IndexBox::new(root.extents.iter().map(|&n| Prog { start: 0, step: 1, count: n }).collect(), root))
    }
}

/// The elements an access touches, in its root value's terms.
#[derive(Clone, Debug)]
pub(crate) enum Region {
    /// No element.
    Empty,
    /// Every element (a whole-value access).
    Full,
    /// Exactly the elements of an index box.
    Box(Arc<IndexBox>),
    /// Elements within `lo..=hi` of the root's storage; `exact` when every
    /// element of the interval is touched (a contiguous view).
    Span { lo: isize, hi: isize, exact: bool },
}

impl Region {
    /// Whether the two are the same region by construction: the same index
    /// box (accesses through one view) or equal spans. (False does not mean
    /// they differ.)
    pub(crate) fn is_same(&self, other: &Region) -> bool {
        // The variants first, on their own: an `Empty` or `Full` region's
        // payload bytes are uninitialised, and a comparison of them must not
        // be evaluated ahead of the variant test.
        if std::mem::discriminant(self) != std::mem::discriminant(other) {
            return false;
        }
        if self.is_empty_or_full() {
            return true;
        }
        match (self, other) {
            (Region::Box(a), Region::Box(b)) => Arc::ptr_eq(a, b),
            (Region::Span { lo, hi, exact }, Region::Span { lo: l2, hi: h2, exact: e2 }) => {
                lo == l2 && hi == h2 && exact == e2
            }
            (Region::Full, Region::Full) | (Region::Empty, Region::Empty) => true,
            _ => false,
        }
    }

    /// The interval of the root's storage that the region's elements lie in
    /// (`None` for no element; every offset for a whole-value access). Two
    /// regions that [`Region::may_overlap`] have meeting bounds (`a.0 <= b.1
    /// && b.0 <= a.1`): the test decides on these intervals first, so an
    /// index over them finds every candidate.
    pub(crate) fn bounds(&self) -> Option<(isize, isize)> {
        // (As in `is_same`: decided on the variants before any payload is read.)
        if matches!(self, Region::Empty) {
            return None;
        }
        if matches!(self, Region::Full) {
            return Some((isize::MIN, isize::MAX));
        }
        match self {
            Region::Box(b) => Some(b.span),
            Region::Span { lo, hi, .. } => Some((*lo, *hi)),
            Region::Empty => None,
            Region::Full => Some((isize::MIN, isize::MAX)),
        }
    }

    /// Whether the two regions (of one value) may share an element (never
    /// false when they do).
    pub(crate) fn may_overlap(&self, other: &Region) -> bool {
        // (As in `is_same`: decided on the variants before any payload is read.)
        if matches!(self, Region::Empty) || matches!(other, Region::Empty) {
            return false;
        }
        if matches!(self, Region::Full) || matches!(other, Region::Full) {
            return true;
        }
        match (self, other) {
            (Region::Empty, _) | (_, Region::Empty) => false,
            (Region::Full, _) | (_, Region::Full) => true,
            // The same box (accesses through one view handle: the common
            // case, decided without the per-axis test), then boxes whose
            // spans are apart.
            (Region::Box(a), Region::Box(b)) if Arc::ptr_eq(a, b) => true,
            (Region::Box(a), Region::Box(b)) if a.span.1 < b.span.0 || b.span.1 < a.span.0 => false,
            (Region::Box(a), Region::Box(b)) => {
                a.axes.len() != b.axes.len() || a.axes.iter().zip(&b.axes).all(|(p, q)| p.may_intersect(*q))
            }
            (Region::Span { lo, hi, .. }, Region::Box(b)) | (Region::Box(b), Region::Span { lo, hi, .. }) => {
                let (blo, bhi) = b.span;
                !(bhi < *lo || *hi < blo)
            }
            (Region::Span { lo: a0, hi: a1, .. }, Region::Span { lo: b0, hi: b1, .. }) => !(a1 < b0 || b1 < a0),
        }
    }

    /// The elements of `self` that are not in `other`, as regions of the
    /// root whose layout is `root`; `None` when that set cannot be given
    /// exactly (the caller then keeps all of `self`, a superset). Given for
    /// index boxes (strided ones too, up to [`MAX_RESIDUE_RUNS`] runs per
    /// axis) and contiguous storage spans; `Full` is the box of every root
    /// index.
    pub(crate) fn subtract(&self, other: &Region, root: &Layout) -> Option<SmallVec<[Region; 4]>> {
        let mut out = SmallVec::new();
        if other.covers(self) {
            return Some(out);
        }
        if !self.may_overlap(other) {
            out.push(self.clone());
            return Some(out);
        }
        match (self, other) {
            (Region::Full, Region::Box(b)) => Region::box_minus(&IndexBox::of_root(root)?, b, root),
            (Region::Box(a), Region::Box(b)) => Region::box_minus(a, b, root),
            (Region::Full, Region::Span { lo, hi, exact: true }) if root.footprint() == Some(root.len()) => {
                let (l0, h0) = root.checked_span()?;
                Some(Region::span_minus(l0, h0, *lo, *hi))
            }
            (Region::Span { lo: a0, hi: a1, exact: true }, Region::Span { lo: b0, hi: b1, exact: true }) => {
                Some(Region::span_minus(*a0, *a1, *b0, *b1))
            }
            _ => None,
        }
    }

    /// `a0..=a1` minus `b0..=b1`, as exact spans.
    fn span_minus(a0: isize, a1: isize, b0: isize, b1: isize) -> SmallVec<[Region; 4]> {
        let mut out = SmallVec::new();
        if a0 < b0 {
            out.push(Region::Span { lo: a0, hi: (b0 - 1).min(a1), exact: true });
        }
        if b1 < a1 {
            out.push(Region::Span { lo: (b1 + 1).max(a0), hi: a1, exact: true });
        }
        out
    }

    /// `a \ b` for boxes of one root: the union over axes `k` of the boxes
    /// that agree with `a ∩ b` on the axes before `k`, lie in `a \ b` on
    /// axis `k`, and take all of `a` after it (disjoint pieces).
    fn box_minus(a: &IndexBox, b: &IndexBox, root: &Layout) -> Option<SmallVec<[Region; 4]>> {
        if a.axes.len() != b.axes.len() || a.axes.len() != root.rank() {
            return None;
        }
        let mut out = SmallVec::new();
        let mut prefix: SmallVec<[Prog; 4]> = SmallVec::new();
        for (k, (&pa, &pb)) in a.axes.iter().zip(&b.axes).enumerate() {
            if pa.count == 0 || pb.count == 0 {
                return None;
            }
            let (common, rest) = Run::of(pa).split(Run::of(pb))?;
            for r in rest {
                let mut axes = prefix.clone();
                axes.push(r.prog());
                axes.extend(a.axes[k + 1..].iter().copied());
                out.push(Region::Box(Arc::new(IndexBox::new(axes, root))));
            }
            match common {
                Some(c) => prefix.push(c.prog()),
                // Disjoint on this axis: `a` is all that is left.
                None => return Some(out),
            }
        }
        Some(out)
    }

    /// Whether the region has no payload (`Empty` or `Full`).
    #[inline]
    fn is_empty_or_full(&self) -> bool {
        matches!(self, Region::Empty | Region::Full)
    }

    /// Whether every element of `other` is in `self` (false when unsure).
    pub(crate) fn covers(&self, other: &Region) -> bool {
        // (As in `is_same`: decided on the variants before any payload is read.)
        if matches!(other, Region::Empty) || matches!(self, Region::Full) {
            return true;
        }
        if matches!(self, Region::Empty) || matches!(other, Region::Full) {
            return false;
        }
        match (self, other) {
            (_, Region::Empty) | (Region::Full, _) => true,
            (Region::Empty, _) | (_, Region::Full) => false,
            (Region::Box(a), Region::Box(b)) => {
                Arc::ptr_eq(a, b)
                    || (a.axes.len() == b.axes.len() && a.axes.iter().zip(&b.axes).all(|(p, q)| p.contains(*q)))
            }
            (Region::Span { lo, hi, exact: true }, Region::Box(b)) => *lo <= b.span.0 && b.span.1 <= *hi,
            (Region::Span { lo, hi, exact: true }, Region::Span { lo: b0, hi: b1, .. }) => lo <= b0 && b1 <= hi,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(start: isize, step: isize, count: usize) -> Prog {
        Prog { start, step, count }
    }

    /// Brute force over small index ranges.
    fn set(p: Prog) -> Vec<isize> {
        (0..p.count as isize).map(|i| p.start + i * p.step).collect()
    }

    #[test]
    fn progressions_intersect_and_contain_exactly() {
        let mut cases = vec![];
        for start in -3..6 {
            for step in [-6isize, -3, -2, -1, 1, 2, 3, 4, 5] {
                for count in 0..6 {
                    cases.push(p(start, step, count));
                }
            }
        }
        for &a in &cases {
            for &b in &cases {
                let (sa, sb) = (set(a), set(b));
                let truly = sa.iter().any(|x| sb.contains(x));
                if truly {
                    assert!(a.may_intersect(b), "{a:?} {b:?} intersect but test says no");
                }
                assert_eq!(a.may_intersect(b), truly, "{a:?} {b:?}");
                let contained = sb.iter().all(|x| sa.contains(x));
                if a.contains(b) {
                    assert!(contained, "{a:?} claims to contain {b:?}");
                }
            }
        }
    }

    fn bx(axes: [Prog; 2], span: (isize, isize)) -> Region {
        Region::Box(Arc::new(IndexBox { axes: axes.into_iter().collect(), span }))
    }

    #[test]
    fn column_halves_are_disjoint_boxes() {
        // A 4x4 row-major root: element (i, j) at 4i + j.
        let left = bx([p(0, 1, 4), p(0, 1, 2)], (0, 13));
        let right = bx([p(0, 1, 4), p(2, 1, 2)], (2, 15));
        let whole = bx([p(0, 1, 4), p(0, 1, 4)], (0, 15));
        assert!(!left.may_overlap(&right));
        assert!(left.may_overlap(&whole));
        assert!(whole.covers(&left) && !left.covers(&whole));
        assert!(Region::Full.covers(&left));
        let even = bx([p(0, 2, 2), p(0, 1, 4)], (0, 11));
        let odd = bx([p(1, 2, 2), p(0, 1, 4)], (4, 15));
        assert!(!even.may_overlap(&odd), "interleaved rows are disjoint");
        let top = Region::Span { lo: 0, hi: 7, exact: true };
        let bottom = Region::Span { lo: 8, hi: 15, exact: true };
        assert!(!top.may_overlap(&bottom));
        assert!(top.may_overlap(&left));
        assert!(!bottom.may_overlap(&bx([p(0, 1, 2), p(0, 1, 4)], (0, 7))));
        assert!(Region::Span { lo: 0, hi: 15, exact: true }.covers(&left));
        assert!(!Region::Span { lo: 0, hi: 15, exact: false }.covers(&left));
        assert!(!Region::Empty.may_overlap(&Region::Full));
    }

    /// The root indices of a box, brute force.
    fn cells(b: &IndexBox) -> std::collections::BTreeSet<(isize, isize)> {
        let mut out = std::collections::BTreeSet::new();
        for i in set(b.axes[0]) {
            for j in set(b.axes[1]) {
                out.insert((i, j));
            }
        }
        out
    }

    fn region_cells(r: &Region, root: &Layout) -> std::collections::BTreeSet<(isize, isize)> {
        match r {
            Region::Empty => Default::default(),
            Region::Full => cells(&IndexBox::of_root(root).unwrap()),
            Region::Box(b) => cells(b),
            Region::Span { .. } => panic!("boxes subtract into boxes"),
        }
    }

    /// Box differences are given for every pair of boxes with small steps,
    /// and are exact.
    #[test]
    fn box_differences_are_exact() {
        let root = Layout::contiguous(&[5, 6], crate::layout::Order::RowMajor);
        let mut progs = vec![];
        for start in 0..5isize {
            for step in [-2isize, -1, 1, 2, 3, 4] {
                for count in 1..4usize {
                    let last = start + step * (count as isize - 1);
                    if (0..5).contains(&last) {
                        progs.push(p(start, step, count));
                    }
                }
            }
        }
        let mut exact = 0;
        let mut boxes = vec![Region::Full];
        for (k, &a) in progs.iter().enumerate() {
            let b = progs[(k * 7 + 3) % progs.len()];
            boxes.push(Region::Box(Arc::new(IndexBox::new([a, b].into_iter().collect(), &root))));
        }
        for x in &boxes {
            for y in &boxes {
                let (cx, cy) = (region_cells(x, &root), region_cells(y, &root));
                let want: std::collections::BTreeSet<_> = cx.difference(&cy).copied().collect();
                match x.subtract(y, &root) {
                    Some(pieces) => {
                        let mut got = std::collections::BTreeSet::new();
                        for piece in &pieces {
                            let c = region_cells(piece, &root);
                            assert!(c.is_disjoint(&got), "{x:?} - {y:?}: pieces overlap");
                            if let Region::Box(b) = piece {
                                let span = IndexBox::new(b.axes.clone(), &root).span;
                                assert_eq!(b.span, span);
                            }
                            got.extend(c);
                        }
                        assert_eq!(got, want, "{x:?} - {y:?}");
                        exact += 1;
                    }
                    None => panic!("{x:?} - {y:?} is not given"),
                }
            }
        }
        assert_eq!(exact, boxes.len() * boxes.len());
        // A step far beyond the other's takes more runs than are given.
        let line = Layout::contiguous(&[200], crate::layout::Order::RowMajor);
        let every = |step: isize| {
            Region::Box(Arc::new(IndexBox::new([p(0, step, 200 / step as usize)].into_iter().collect(), &line)))
        };
        let pieces = Region::Full.subtract(&every(20), &line).expect("19 residue runs are given");
        assert_eq!(pieces.len(), 19 + 1, "{pieces:?}");
        assert!(Region::Full.subtract(&every(40), &line).is_none());
        // Contiguous spans.
        let sp = |lo, hi| Region::Span { lo, hi, exact: true };
        let cut = sp(0, 29).subtract(&sp(5, 9), &root).unwrap();
        assert!(
            matches!(&cut[..], [Region::Span { lo: 0, hi: 4, .. }, Region::Span { lo: 10, hi: 29, .. }]),
            "{cut:?}"
        );
        let cut = Region::Full.subtract(&sp(0, 9), &root).unwrap();
        assert!(matches!(&cut[..], [Region::Span { lo: 10, hi: 29, .. }]), "{cut:?}");
        assert!(sp(0, 29).subtract(&Region::Span { lo: 5, hi: 9, exact: false }, &root).is_none());
    }
}
