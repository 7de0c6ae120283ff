//! Sub-range hazards: which elements of a value an access touches.
//!
//! Accesses through views carry a [`Region`]. Two accesses to one value
//! conflict only if their regions can overlap and one of them writes; the
//! test never misses an overlap (it may report one that is not there), so
//! results stay exactly those of sequential execution.
//!
//! The rule and its cost:
//! - A whole-value access is [`Region::Full`]: it conflicts with everything.
//! - A view made by slicing and permuting keeps an exact *index box*: per axis
//!   of the root value, an arithmetic progression of indices. Two boxes are
//!   disjoint if, on some root axis, their progressions share no index (bounds
//!   and a gcd congruence test). This is exact for step-1 slices and
//!   conservative for strided ones. Cost: O(rank) per pair of accesses.
//! - Any other view (a reshape, or a slice of one) keeps the interval of
//!   storage elements it spans; intervals that do not intersect are disjoint.
//! - Enrolling an access scans the value's frontier (the unfinished accesses
//!   not yet covered by a later writer): O(frontier) region tests.

use std::sync::Arc;

use smallvec::SmallVec;

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

    /// Whether the two progressions may share an index (never false when they do).
    fn may_intersect(self, other: Prog) -> bool {
        if self.count == 0 || other.count == 0 {
            return false;
        }
        let (a0, a1, sa) = self.normalized();
        let (b0, b1, sb) = other.normalized();
        if a1 < b0 || b1 < a0 {
            return false;
        }
        // x = a0 + i*sa = b0 + j*sb has a solution only if gcd(sa, sb) divides b0 - a0.
        (b0 - a0).rem_euclid(gcd(sa, sb)) == 0
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

fn gcd(mut a: isize, mut b: isize) -> isize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.abs().max(1)
}

/// An exact set of root indices: one progression per root axis, and the
/// interval of storage elements they span (for comparing with intervals).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IndexBox {
    pub(crate) axes: SmallVec<[Prog; 4]>,
    pub(crate) span: (isize, isize),
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
        match (self, other) {
            (Region::Box(a), Region::Box(b)) => Arc::ptr_eq(a, b),
            (Region::Span { lo, hi, exact }, Region::Span { lo: l2, hi: h2, exact: e2 }) => lo == l2 && hi == h2 && exact == e2,
            (Region::Full, Region::Full) | (Region::Empty, Region::Empty) => true,
            _ => false,
        }
    }

    /// Whether the two regions (of one value) may share an element (never
    /// false when they do).
    pub(crate) fn may_overlap(&self, other: &Region) -> bool {
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

    /// Whether every element of `other` is in `self` (false when unsure).
    pub(crate) fn covers(&self, other: &Region) -> bool {
        match (self, other) {
            (_, Region::Empty) | (Region::Full, _) => true,
            (Region::Empty, _) | (_, Region::Full) => false,
            (Region::Box(a), Region::Box(b)) => {
                Arc::ptr_eq(a, b) || (a.axes.len() == b.axes.len() && a.axes.iter().zip(&b.axes).all(|(p, q)| p.contains(*q)))
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
    fn progressions_never_miss_an_intersection_and_contain_exactly() {
        let mut cases = vec![];
        for start in -3..6 {
            for step in [-3isize, -2, -1, 1, 2, 3, 4] {
                for count in 0..5 {
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
                // With a common step of 1 (plain slices) the test is exact.
                if a.step.abs() == 1 && b.step.abs() == 1 {
                    assert_eq!(a.may_intersect(b), truly, "{a:?} {b:?}");
                }
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
}
