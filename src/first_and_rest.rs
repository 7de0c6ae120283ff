//! A list that keeps its first item in place and the next few inline.
//!
//! For the per-call lists that nearly always hold one item (the values a
//! submission locks): reaching or
//! dropping that one item costs no inline-or-spilled branch or drop loop, as
//! a small vector's does (callgrind, one-operand kernel submissions: 60
//! instructions fewer for the two lists). The rest are inline up to three,
//! so an operation on two to four values allocates nothing either (a
//! vector's allocation and free cost a 3-operand gemm about 250 instructions
//! per submission).

use smallvec::SmallVec;

pub(crate) struct FirstAndRest<T> {
    first: Option<T>,
    rest: SmallVec<[T; 3]>,
}

impl<T> FirstAndRest<T> {
    pub(crate) fn new() -> Self {
        FirstAndRest { first: None, rest: SmallVec::new() }
    }

    pub(crate) fn len(&self) -> usize {
        self.first.is_some() as usize + self.rest.len()
    }

    pub(crate) fn push(&mut self, item: T) {
        if self.first.is_none() {
            self.first = Some(item);
        } else {
            self.rest.push(item);
        }
    }

    /// Item `i`, in the order pushed.
    #[inline(always)]
    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        match i {
            0 => self.first.as_ref(),
            _ => self.rest.get(i - 1),
        }
    }

    /// Item `i`, in the order pushed.
    #[inline(always)]
    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        match i {
            0 => self.first.as_mut(),
            _ => self.rest.get_mut(i - 1),
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.first.iter().chain(&self.rest)
    }
}

#[cfg(test)]
mod tests {
    use super::FirstAndRest;

    #[test]
    fn keeps_push_order_across_the_first_and_the_rest() {
        let mut l = FirstAndRest::new();
        assert_eq!((l.len(), l.get(0)), (0, None));
        for x in [10, 20, 30] {
            l.push(x);
        }
        assert_eq!(l.len(), 3);
        assert_eq!(l.iter().copied().collect::<Vec<_>>(), [10, 20, 30]);
        assert_eq!((l.get(0), l.get(2), l.get(3)), (Some(&10), Some(&30), None));
        *l.get_mut(1).unwrap() += 1;
        assert_eq!(l.get(1), Some(&21));
    }
}
