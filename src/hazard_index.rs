//! An interval index for large frontiers of epoch queues (see
//! [`crate::queue`]): a set of closed intervals `lo..=hi`, each with an id,
//! that finds the intervals meeting a query interval without scanning all.
//!
//! A treap keyed by `(lo, id)`, each node keeping the largest `hi` of its
//! subtree: a query skips every subtree whose largest `hi` is below the
//! query's `lo`, and every right subtree of a node whose `lo` is past the
//! query's `hi`. Expected cost: O(log n) to insert or remove, O((1 + c) log n)
//! for a query that reports c intervals. Nodes live in one vector (freed
//! slots are reused), so the index allocates only when it grows.
//!
//! An insertion walks down to its node's place by priority and splits only
//! the subtree found there; a key above every key so far (slices submitted
//! in order) splits nothing, so appending touches only the path.

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Node {
    lo: isize,
    hi: isize,
    /// The largest `hi` in this node's subtree.
    max: isize,
    id: u32,
    prio: u32,
    left: u32,
    right: u32,
}

/// A set of `(lo..=hi, id)` with `(lo, id)` unique.
pub(crate) struct IntervalIndex {
    nodes: Vec<Node>,
    free: Vec<u32>,
    root: u32,
    len: usize,
    /// No key in the set is above this one (removals leave it as it was).
    bound: Option<(isize, u32)>,
    /// xorshift state for the treap priorities.
    rng: u32,
}

impl Default for IntervalIndex {
    fn default() -> Self {
        IntervalIndex { nodes: Vec::new(), free: Vec::new(), root: NIL, len: 0, bound: None, rng: 0x9E37_79B9 }
    }
}

impl IntervalIndex {
    /// How many intervals it holds.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Remove every interval (keeping the storage).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn clear(&mut self) {
        self.nodes.clear();
        self.free.clear();
        self.root = NIL;
        self.len = 0;
        self.bound = None;
    }

    fn next_prio(&mut self) -> u32 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        x
    }

    fn update(&mut self, t: u32) {
        let n = self.nodes[t as usize];
        let mut max = n.hi;
        if n.left != NIL {
            max = max.max(self.nodes[n.left as usize].max);
        }
        if n.right != NIL {
            max = max.max(self.nodes[n.right as usize].max);
        }
        self.nodes[t as usize].max = max;
    }

    /// Splits `t` into the nodes with keys below `key` and the rest.
    fn split(&mut self, t: u32, key: (isize, u32)) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        let n = self.nodes[t as usize];
        if (n.lo, n.id) < key {
            let (a, b) = self.split(n.right, key);
            self.nodes[t as usize].right = a;
            self.update(t);
            (t, b)
        } else {
            let (a, b) = self.split(n.left, key);
            self.nodes[t as usize].left = b;
            self.update(t);
            (a, t)
        }
    }

    /// Joins two treaps whose keys are all below (`a`) and above (`b`).
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].prio > self.nodes[b as usize].prio {
            let r = self.nodes[a as usize].right;
            let m = self.merge(r, b);
            self.nodes[a as usize].right = m;
            self.update(a);
            a
        } else {
            let l = self.nodes[b as usize].left;
            let m = self.merge(a, l);
            self.nodes[b as usize].left = m;
            self.update(b);
            b
        }
    }

    /// Add `lo..=hi` with `id` (`(lo, id)` must not be in the set).
    pub(crate) fn insert(&mut self, lo: isize, hi: isize, id: u32) {
        let key = (lo, id);
        let prio = self.next_prio();
        // Down from the root while the nodes outrank the new one, raising
        // their subtree maxima to `hi` on the way.
        let mut parent = NIL;
        let mut cur = self.root;
        while cur != NIL && self.nodes[cur as usize].prio >= prio {
            let n = &mut self.nodes[cur as usize];
            n.max = n.max.max(hi);
            parent = cur;
            cur = if key < (n.lo, n.id) { n.left } else { n.right };
        }
        // The subtree found there becomes the new node's two children.
        let (left, right) = if self.bound.is_none_or(|b| key > b) { (cur, NIL) } else { self.split(cur, key) };
        self.bound = Some(self.bound.map_or(key, |b| b.max(key)));
        let node = Node { lo, hi, max: hi, id, prio, left, right };
        let t = match self.free.pop() {
            Some(t) => {
                self.nodes[t as usize] = node;
                t
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.update(t);
        if parent == NIL {
            self.root = t;
        } else {
            let p = &mut self.nodes[parent as usize];
            if key < (p.lo, p.id) {
                p.left = t;
            } else {
                p.right = t;
            }
        }
        self.len += 1;
    }

    /// Remove the interval with `lo` and `id`; whether it was there.
    pub(crate) fn remove(&mut self, lo: isize, id: u32) -> bool {
        let (found, root) = self.remove_in(self.root, (lo, id));
        self.root = root;
        if found {
            self.len -= 1;
        }
        found
    }

    fn remove_in(&mut self, t: u32, key: (isize, u32)) -> (bool, u32) {
        if t == NIL {
            return (false, NIL);
        }
        let n = self.nodes[t as usize];
        let here = (n.lo, n.id);
        if here == key {
            self.free.push(t);
            return (true, self.merge(n.left, n.right));
        }
        let found = if key < here {
            let (f, l) = self.remove_in(n.left, key);
            self.nodes[t as usize].left = l;
            f
        } else {
            let (f, r) = self.remove_in(n.right, key);
            self.nodes[t as usize].right = r;
            f
        };
        if found {
            self.update(t);
        }
        (found, t)
    }

    /// Calls `f` with the id of every interval that meets `lo..=hi` (that
    /// is, `i.lo <= hi && lo <= i.hi`), in no particular order.
    pub(crate) fn query(&self, lo: isize, hi: isize, f: &mut impl FnMut(u32)) {
        self.query_in(self.root, lo, hi, f);
    }

    fn query_in(&self, mut t: u32, lo: isize, hi: isize, f: &mut impl FnMut(u32)) {
        // The right spine is walked in the loop, the left subtrees recursively.
        while t != NIL {
            let n = &self.nodes[t as usize];
            if n.max < lo {
                return;
            }
            self.query_in(n.left, lo, hi, f);
            if n.lo > hi {
                // Every key to the right has a larger `lo`.
                return;
            }
            if lo <= n.hi {
                f(n.id);
            }
            t = n.right;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::{BTreeMap, BTreeSet};

    /// Random inserts, removals and queries against a brute-force list.
    #[test]
    fn queries_find_exactly_the_meeting_intervals() {
        let mut rng = SmallRng::seed_from_u64(7);
        for round in 0..24 {
            let range = [10isize, 100, 1000, 100_000][round % 4];
            // Odd rounds insert mostly in key order (the appends that split
            // nothing), with some keys below the largest one.
            let ordered = round % 2 == 1;
            let mut ix = IntervalIndex::default();
            let mut all: BTreeMap<u32, (isize, isize)> = BTreeMap::new();
            let mut next = 0u32;
            for step in 0..3000 {
                match rng.gen_range(0..10) {
                    0..=4 => {
                        let lo = if ordered && rng.gen_range(0..5) != 0 {
                            -range + next as isize / 2
                        } else {
                            rng.gen_range(-range..range)
                        };
                        // Mostly short intervals, some long, some inverted
                        // (`lo > hi`: it meets nothing but by the formula).
                        let len = match rng.gen_range(0..10) {
                            0 => rng.gen_range(0..2 * range),
                            1 => -rng.gen_range(1..5),
                            _ => rng.gen_range(0..4),
                        };
                        ix.insert(lo, lo + len, next);
                        all.insert(next, (lo, lo + len));
                        next += 1;
                    }
                    5..=6 if !all.is_empty() => {
                        let k = *all.keys().nth(rng.gen_range(0..all.len())).unwrap();
                        let (lo, _) = all.remove(&k).unwrap();
                        assert!(ix.remove(lo, k));
                        assert!(!ix.remove(lo, k), "removed twice");
                    }
                    _ => {
                        let lo = rng.gen_range(-range..range);
                        let hi = lo + rng.gen_range(-2..range / 4 + 2);
                        let mut got = BTreeSet::new();
                        ix.query(lo, hi, &mut |id| assert!(got.insert(id), "{id} reported twice"));
                        let want: BTreeSet<u32> =
                            all.iter().filter(|(_, &(a, b))| a <= hi && lo <= b).map(|(&k, _)| k).collect();
                        assert_eq!(got, want, "round {round} step {step} query {lo}..={hi}");
                    }
                }
                assert_eq!(ix.len(), all.len());
                if step % 16 == 0 {
                    check_shape(&ix);
                }
            }
            // Everything, then nothing.
            let mut got = BTreeSet::new();
            ix.query(isize::MIN, isize::MAX, &mut |id| {
                got.insert(id);
            });
            assert_eq!(got, all.keys().copied().collect::<BTreeSet<u32>>());
            ix.clear();
            ix.query(isize::MIN, isize::MAX, &mut |_| panic!("cleared"));
        }
    }

    /// The treap's invariants: keys in order, priorities a heap, each
    /// node's `max` its subtree's largest `hi`, `len` the node count, and
    /// no key above `bound`.
    fn check_shape(ix: &IntervalIndex) {
        fn walk(ix: &IntervalIndex, t: u32, keys: &mut Vec<(isize, u32)>) -> Option<isize> {
            if t == NIL {
                return None;
            }
            let n = ix.nodes[t as usize];
            for c in [n.left, n.right] {
                assert!(c == NIL || ix.nodes[c as usize].prio <= n.prio, "heap order");
            }
            let l = walk(ix, n.left, keys);
            keys.push((n.lo, n.id));
            let r = walk(ix, n.right, keys);
            let max = [l, Some(n.hi), r].into_iter().flatten().max();
            assert_eq!(Some(n.max), max, "subtree maximum");
            max
        }
        let mut keys = vec![];
        walk(ix, ix.root, &mut keys);
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "key order");
        assert_eq!(keys.len(), ix.len);
        if let Some(&last) = keys.last() {
            assert!(ix.bound.is_some_and(|b| b >= last), "bound");
        }
    }

    /// Disjoint unit intervals: a query meets one and visits few nodes (the
    /// tree stays balanced for sorted inserts).
    #[test]
    fn sorted_inserts_stay_shallow() {
        let mut ix = IntervalIndex::default();
        for i in 0..100_000u32 {
            ix.insert(i as isize, i as isize, i);
        }
        fn depth(ix: &IntervalIndex, t: u32) -> usize {
            if t == NIL {
                return 0;
            }
            let n = &ix.nodes[t as usize];
            1 + depth(ix, n.left).max(depth(ix, n.right))
        }
        check_shape(&ix);
        let d = depth(&ix, ix.root);
        assert!(d < 60, "depth {d} for 10^5 sorted inserts");
        let mut got = vec![];
        ix.query(50_000, 50_000, &mut |id| got.push(id));
        assert_eq!(got, [50_000]);
    }
}
