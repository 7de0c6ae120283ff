//! A list that keeps its first item in place and any others in a vector.
//!
//! For the handle-table shards a C call locks, nearly always one: reaching or
//! dropping that one item costs no inline-or-spilled branch or drop loop, as
//! a small vector's does, and an empty vector allocates nothing. (The core
//! keeps its own for the values a submission locks.)

pub(crate) struct FirstAndRest<T> {
    first: Option<T>,
    rest: Vec<T>,
}

impl<T> FirstAndRest<T> {
    pub(crate) const fn new() -> Self {
        FirstAndRest { first: None, rest: Vec::new() }
    }

    #[cfg(test)]
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

    /// The first item, in the order pushed, for which `f` holds.
    #[inline(always)]
    pub(crate) fn find(&self, f: impl Fn(&T) -> bool) -> Option<&T> {
        match &self.first {
            Some(x) if f(x) => Some(x),
            Some(_) => self.rest.iter().find(|x| f(x)),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FirstAndRest;

    #[test]
    fn finds_in_push_order_across_the_first_and_the_rest() {
        let mut l = FirstAndRest::new();
        assert_eq!((l.len(), l.find(|_| true)), (0, None));
        for x in [10, 20, 30] {
            l.push(x);
        }
        assert_eq!((l.len(), l.find(|&x| x > 5)), (3, Some(&10)));
        assert_eq!(l.find(|&x| x > 15), Some(&20));
        assert_eq!(l.find(|&x| x > 30), None);
    }
}
