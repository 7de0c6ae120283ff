//! An interval index for large frontiers of epoch queues (see
//! [`crate::queue`]): a set of closed intervals `lo..=hi`, each with an id,
//! that finds the intervals meeting a query interval without scanning all.
//!
//! A B+-tree keyed by `(lo, id)`, up to [`CAP`] entries a node. A leaf's
//! entries are the intervals; an inner node's are its children, each with a
//! lower bound of the child's keys (above every key of the child before it)
//! and the largest `hi` in the child. A query stops at the first entry whose
//! `lo` is past the query's `hi`, and skips every entry whose largest `hi` is
//! below the query's `lo`. O(log n) to insert or remove, O((1 + c) log n)
//! for a query that reports c intervals, all leaves at one depth.
//!
//! Why a B-tree: a query for one of 10^5 disjoint slices walks about 5 nodes,
//! each a few adjacent cache lines, where the treap it replaced walked about
//! 23 dependent nodes, most of them out of L1 (docs/perf-notes/runtime.md).
//! Nodes live in one vector (freed slots are reused), so the index allocates
//! only when it grows.

use smallvec::SmallVec;

/// Entries a node holds at most.
const CAP: usize = 16;
/// A node left with fewer entries by a removal merges with a sibling or
/// takes some of its entries.
const MIN: usize = CAP / 4;
const NIL: u32 = u32::MAX;

/// An interval (in a leaf) or a child (in an inner node).
#[derive(Clone, Copy)]
struct Entry {
    /// The interval's key `(lo, id)`; for a child, a lower bound of its keys.
    lo: isize,
    id: u32,
    /// Inner nodes: the child's node.
    child: u32,
    /// The interval's `hi`; for a child, the largest `hi` in it.
    max: isize,
}

impl Entry {
    const NONE: Entry = Entry { lo: 0, id: 0, child: NIL, max: isize::MIN };

    fn key(&self) -> (isize, u32) {
        (self.lo, self.id)
    }
}

#[derive(Clone)]
struct Node {
    leaf: bool,
    len: usize,
    e: [Entry; CAP],
}

impl Node {
    fn new(leaf: bool) -> Node {
        Node { leaf, len: 0, e: [Entry::NONE; CAP] }
    }

    fn entries(&self) -> &[Entry] {
        &self.e[..self.len]
    }

    /// The largest `hi` below this node.
    fn max(&self) -> isize {
        self.entries().iter().map(|e| e.max).max().unwrap_or(isize::MIN)
    }

    /// The entry an inner node holds `key` under: the last whose bound is at
    /// most `key`, or the first.
    fn route(&self, key: (isize, u32)) -> usize {
        self.entries()[1..].iter().take_while(|e| e.key() <= key).count()
    }

    fn insert_at(&mut self, at: usize, e: Entry) {
        debug_assert!(self.len < CAP);
        self.e.copy_within(at..self.len, at + 1);
        self.e[at] = e;
        self.len += 1;
    }

    fn remove_at(&mut self, at: usize) {
        self.e.copy_within(at + 1..self.len, at);
        self.len -= 1;
    }
}

/// The nodes from the root down to a leaf, each with the entry taken.
type Path = SmallVec<[(u32, usize); 16]>;

/// A set of `(lo..=hi, id)` with `(lo, id)` unique.
pub(crate) struct IntervalIndex {
    nodes: Vec<Node>,
    free: Vec<u32>,
    root: u32,
    len: usize,
}

impl Default for IntervalIndex {
    fn default() -> Self {
        IntervalIndex { nodes: Vec::new(), free: Vec::new(), root: NIL, len: 0 }
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
    }

    fn alloc(&mut self, node: Node) -> u32 {
        match self.free.pop() {
            Some(t) => {
                self.nodes[t as usize] = node;
                t
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    fn node(&self, t: u32) -> &Node {
        &self.nodes[t as usize]
    }

    fn node_mut(&mut self, t: u32) -> &mut Node {
        &mut self.nodes[t as usize]
    }

    /// Add `lo..=hi` with `id` (`(lo, id)` must not be in the set).
    pub(crate) fn insert(&mut self, lo: isize, hi: isize, id: u32) {
        let key = (lo, id);
        if self.root == NIL {
            self.root = self.alloc(Node::new(true));
        }
        // Down to the leaf, lowering the first bound (a key below every
        // key) and raising the maxima on the way.
        let mut path = Path::new();
        let mut t = self.root;
        while !self.node(t).leaf {
            let n = self.node_mut(t);
            let s = n.route(key);
            let e = &mut n.e[s];
            if key < e.key() {
                (e.lo, e.id) = key;
            }
            e.max = e.max.max(hi);
            path.push((t, s));
            t = e.child;
        }
        let at = self.node(t).entries().iter().take_while(|e| e.key() < key).count();
        let mut new = Entry { lo, id, child: NIL, max: hi };
        self.len += 1;
        // Up while a full node splits, the new right half going into the
        // parent after the left one.
        let mut at = at;
        loop {
            let Some(right) = self.put(t, at, new) else { return };
            let r = self.node(right);
            new = Entry { lo: r.e[0].lo, id: r.e[0].id, child: right, max: r.max() };
            match path.pop() {
                Some((p, s)) => {
                    let left_max = self.node(t).max();
                    self.node_mut(p).e[s].max = left_max;
                    (t, at) = (p, s + 1);
                }
                None => {
                    let l = self.node(t);
                    let left = Entry { lo: l.e[0].lo, id: l.e[0].id, child: t, max: l.max() };
                    let mut root = Node::new(false);
                    root.e[0] = left;
                    root.e[1] = new;
                    root.len = 2;
                    self.root = self.alloc(root);
                    return;
                }
            }
        }
    }

    /// Put `e` at `at` in node `t`; if `t` was full, split it and return the
    /// new right half. A node full when an entry comes at its end (slices
    /// submitted in order) keeps its entries and the new one starts the right
    /// half, so appends leave full nodes.
    fn put(&mut self, t: u32, at: usize, e: Entry) -> Option<u32> {
        let n = self.node_mut(t);
        if n.len < CAP {
            n.insert_at(at, e);
            return None;
        }
        let leaf = n.leaf;
        let mut all = [Entry::NONE; CAP + 1];
        all[..at].copy_from_slice(&n.e[..at]);
        all[at] = e;
        all[at + 1..].copy_from_slice(&n.e[at..]);
        let mid = if at == CAP { CAP } else { CAP.div_ceil(2) };
        n.e[..mid].copy_from_slice(&all[..mid]);
        n.len = mid;
        let mut right = Node::new(leaf);
        right.e[..CAP + 1 - mid].copy_from_slice(&all[mid..]);
        right.len = CAP + 1 - mid;
        Some(self.alloc(right))
    }

    /// Remove the interval with `lo` and `id`; whether it was there.
    pub(crate) fn remove(&mut self, lo: isize, id: u32) -> bool {
        let key = (lo, id);
        if self.root == NIL {
            return false;
        }
        let mut path = Path::new();
        let mut t = self.root;
        while !self.node(t).leaf {
            let n = self.node(t);
            let s = n.route(key);
            if key < n.e[s].key() {
                return false;
            }
            path.push((t, s));
            t = n.e[s].child;
        }
        let Some(at) = self.node(t).entries().iter().position(|e| e.key() == key) else { return false };
        self.node_mut(t).remove_at(at);
        self.len -= 1;
        // Up: an underfull node is mended with a sibling, and each parent
        // learns its child's maximum again.
        while let Some((p, s)) = path.pop() {
            if self.node(t).len < MIN {
                self.mend(p, s);
            } else {
                let max = self.node(t).max();
                self.node_mut(p).e[s].max = max;
            }
            t = p;
        }
        // The root: an inner node with one child gives way to it, an empty
        // node to nothing.
        loop {
            let r = self.node(self.root);
            if r.len == 0 {
                self.free.push(self.root);
                self.root = NIL;
            } else if !r.leaf && r.len == 1 {
                let child = r.e[0].child;
                self.free.push(self.root);
                self.root = child;
                continue;
            }
            return true;
        }
    }

    /// Mend the underfull child `s` of `p`: merge it with a sibling where
    /// both fit in one node, else share their entries evenly. The parent's
    /// entries for them get their bounds and maxima again.
    fn mend(&mut self, p: u32, s: usize) {
        let n = self.node(p).len;
        if n == 1 {
            // No sibling: an empty child goes, leaving `p` empty for its own
            // parent (or the root check) to drop.
            let c = self.node(p).e[0].child;
            if self.node(c).len == 0 {
                self.free.push(c);
                self.node_mut(p).len = 0;
            } else {
                let max = self.node(c).max();
                self.node_mut(p).e[0].max = max;
            }
            return;
        }
        let (ls, rs) = if s + 1 < n { (s, s + 1) } else { (s - 1, s) };
        let (l, r) = (self.node(p).e[ls].child, self.node(p).e[rs].child);
        let (ln, rn) = (self.node(l).len, self.node(r).len);
        let mut right = self.node(r).clone();
        let left = self.node_mut(l);
        if ln + rn <= CAP {
            left.e[ln..ln + rn].copy_from_slice(right.entries());
            left.len = ln + rn;
            let max = left.max();
            self.free.push(r);
            let parent = self.node_mut(p);
            parent.e[ls].max = max;
            parent.remove_at(rs);
            return;
        }
        let keep = (ln + rn) / 2;
        if ln > keep {
            // The left's last entries go to the front of the right.
            let moved = ln - keep;
            right.e.copy_within(..rn, moved);
            right.e[..moved].copy_from_slice(&left.e[keep..ln]);
        } else {
            // The right's first entries go to the end of the left.
            let moved = keep - ln;
            left.e[ln..keep].copy_from_slice(&right.e[..moved]);
            right.e.copy_within(moved..rn, 0);
        }
        left.len = keep;
        right.len = ln + rn - keep;
        let left_max = left.max();
        let (first, right_max) = (right.e[0], right.max());
        *self.node_mut(r) = right;
        let parent = self.node_mut(p);
        parent.e[ls].max = left_max;
        let e = &mut parent.e[rs];
        (e.lo, e.id, e.max) = (first.lo, first.id, right_max);
    }

    /// Calls `f` with the id of every interval that meets `lo..=hi` (that
    /// is, `i.lo <= hi && lo <= i.hi`), in no particular order.
    pub(crate) fn query(&self, lo: isize, hi: isize, f: &mut impl FnMut(u32)) {
        if self.root != NIL {
            self.query_in(self.root, lo, hi, f);
        }
    }

    fn query_in(&self, t: u32, lo: isize, hi: isize, f: &mut impl FnMut(u32)) {
        let n = self.node(t);
        for e in n.entries() {
            if e.lo > hi {
                // Every later entry's keys have a larger `lo`.
                return;
            }
            if e.max >= lo {
                if n.leaf {
                    f(e.id);
                } else {
                    self.query_in(e.child, lo, hi, f);
                }
            }
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

    /// The B-tree's invariants: every leaf at one depth, keys in order, each
    /// inner entry's bound at most its child's keys and above those of the
    /// child before it, each maximum its child's largest `hi`, no empty node
    /// but an empty root, `len` the interval count, and every node either
    /// in the tree or free.
    fn check_shape(ix: &IntervalIndex) {
        /// (depth, smallest key, largest key, largest hi) of the subtree.
        fn walk(
            ix: &IntervalIndex,
            t: u32,
            keys: &mut Vec<(isize, u32)>,
            seen: &mut Vec<u32>,
        ) -> (usize, (isize, u32), (isize, u32), isize) {
            seen.push(t);
            let n = ix.node(t);
            assert!(n.len > 0, "an empty node in the tree");
            if n.leaf {
                keys.extend(n.entries().iter().map(|e| e.key()));
                let e = n.entries();
                return (1, e[0].key(), e[n.len - 1].key(), n.max());
            }
            let mut depth = None;
            let mut prev_last = None;
            let (mut first, mut last, mut max) = ((isize::MAX, 0), (isize::MIN, 0), isize::MIN);
            for e in n.entries() {
                let (d, lo_key, hi_key, m) = walk(ix, e.child, keys, seen);
                assert!(depth.is_none_or(|x| x == d), "leaves at different depths");
                depth = Some(d);
                assert!(e.key() <= lo_key, "a bound above its child's keys");
                if let Some(p) = prev_last {
                    assert!(e.key() > p, "a bound not above the previous child's keys");
                }
                assert_eq!(e.max, m, "a child's maximum");
                prev_last = Some(hi_key);
                first = first.min(lo_key);
                last = last.max(hi_key);
                max = max.max(m);
            }
            (depth.unwrap() + 1, first, last, max)
        }
        let mut keys = vec![];
        let mut seen = vec![];
        if ix.root != NIL {
            let r = ix.node(ix.root);
            if r.len == 0 {
                assert!(r.leaf && ix.len == 0);
                seen.push(ix.root);
            } else {
                walk(ix, ix.root, &mut keys, &mut seen);
            }
        }
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "key order");
        assert_eq!(keys.len(), ix.len);
        seen.extend(&ix.free);
        seen.sort_unstable();
        assert_eq!(seen, (0..ix.nodes.len() as u32).collect::<Vec<_>>(), "nodes lost or shared");
    }

    fn depth(ix: &IntervalIndex) -> usize {
        let mut d = 0;
        let mut t = ix.root;
        while t != NIL {
            d += 1;
            let n = ix.node(t);
            t = if n.leaf { NIL } else { n.e[0].child };
        }
        d
    }

    /// Disjoint unit intervals inserted in order fill their nodes (depth 5
    /// at 10^5, as log_16 10^5 = 4.2), and a query meets one. Removed in
    /// order (the queue's sweep of finished accesses) and inserted again,
    /// the nodes are reused and the depth stays.
    #[test]
    fn sorted_inserts_fill_their_nodes() {
        let mut ix = IntervalIndex::default();
        for i in 0..100_000u32 {
            ix.insert(i as isize, i as isize, i);
        }
        check_shape(&ix);
        assert!(depth(&ix) <= 5, "depth {} for 10^5 sorted inserts", depth(&ix));
        let nodes = ix.nodes.len();
        assert!(nodes <= 100_000 / (CAP - 1) + 5, "{nodes} nodes for 10^5 sorted inserts");
        let mut got = vec![];
        ix.query(50_000, 50_000, &mut |id| got.push(id));
        assert_eq!(got, [50_000]);
        for round in 1..4u32 {
            for i in 0..100_000u32 {
                let old = (round - 1) * 100_000 + i;
                assert!(ix.remove(old as isize, old));
                let new = round * 100_000 + i;
                ix.insert(new as isize, new as isize, new);
            }
            check_shape(&ix);
            assert!(depth(&ix) <= 6, "depth {} after round {round}", depth(&ix));
            assert!(ix.nodes.len() <= 2 * nodes, "{} nodes after round {round}", ix.nodes.len());
        }
        for i in 300_000..400_000u32 {
            assert!(ix.remove(i as isize, i));
        }
        check_shape(&ix);
        assert_eq!((ix.len(), ix.root), (0, NIL));
    }

    /// Random keys, then removal of all but a few in random order: the tree
    /// stays balanced and shrinks to a leaf.
    #[test]
    fn random_removals_mend_the_tree() {
        let mut rng = SmallRng::seed_from_u64(11);
        let mut ix = IntervalIndex::default();
        let mut keys: Vec<(isize, u32)> = (0..20_000u32).map(|i| (rng.gen_range(-5000..5000), i)).collect();
        for &(lo, id) in &keys {
            ix.insert(lo, lo + 3, id);
        }
        check_shape(&ix);
        let full_depth = depth(&ix);
        assert!(full_depth <= 6, "depth {full_depth} for 2*10^4 random inserts");
        while keys.len() > 5 {
            let (lo, id) = keys.swap_remove(rng.gen_range(0..keys.len()));
            assert!(ix.remove(lo, id));
            assert!(!ix.remove(lo, id), "removed twice");
            if keys.len() % 997 == 0 {
                check_shape(&ix);
            }
        }
        check_shape(&ix);
        assert_eq!(depth(&ix), 1, "5 keys in more than a leaf");
        let mut got = BTreeSet::new();
        ix.query(isize::MIN, isize::MAX, &mut |id| {
            got.insert(id);
        });
        assert_eq!(got, keys.iter().map(|k| k.1).collect());
    }
}
