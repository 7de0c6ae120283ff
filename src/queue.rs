//! Epoch queues (SPEC §2.1), with sub-range hazards (§2.3).
//!
//! A queue orders the accesses to one value. A read joins the current epoch
//! (it waits for the writers before it); a write or update opens the next
//! epoch (it waits for every earlier access). Dependencies are fixed when the
//! access is enrolled, so the order per value is submission order.
//!
//! Accesses through views carry the [`Region`] they touch, and two accesses
//! conflict only if their regions may overlap and one of them writes (see
//! [`crate::region`] for the test and its cost). So the queue keeps a
//! *frontier*: the accesses that a later access may have to wait for. A new
//! access waits for every frontier entry it conflicts with; a writer then
//! removes the entries its region covers (anything that conflicts with them
//! also conflicts with the writer, which waits for them), and finished entries
//! are dropped as the frontier grows. With whole-value accesses only, the
//! frontier is exactly the last writer plus the readers of the current epoch;
//! the last whole-value writer has a slot of its own, so a value that is only
//! written whole keeps its frontier without a vector.
//!
//! An epoch queue carries no lock of its own: it lives inside the lock of the
//! hazard record that owns it (see [`crate::tensor::value`]), and enrollment of all of
//! one operation's accesses happens while every involved record is locked (see
//! [`crate::ops::submit`]), which is what makes it atomic.

use std::sync::Arc;

use smallvec::SmallVec;
use thin_vec::ThinVec;

use crate::hazard_index::IntervalIndex;
use crate::region::Region;

/// What waits on a queue: a node of the dependency graph (the runtime's
/// task). The queue only adds edges between waiters and asks which are done.
pub(crate) trait Waiter {
    /// Whether it has finished.
    fn is_done(&self) -> bool;
    /// Make `this` wait for `pred` (no-op if `pred` already finished).
    fn depend_on(this: &Arc<Self>, pred: &Arc<Self>);
    /// As `depend_on`, met on a device-resident value: a same-device
    /// predecessor only has to have queued its work.
    fn depend_on_device(this: &Arc<Self>, pred: &Arc<Self>);
}

/// How an operation uses an operand.
#[repr(u8)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Reads the value; joins the current epoch.
    Read = 1,
    /// Overwrites every element without reading the old value; opens a new epoch.
    /// A successful overwrite of a whole value produces a clean (unpoisoned) value.
    Write = 2,
    /// Reads and writes (read-modify-write): one exclusive access that sees the
    /// old value; opens a new epoch.
    Update = 3,
}

impl Mode {
    /// Whether the access modifies the value.
    ///
    /// ```
    /// use tensorasync::Mode;
    /// assert!(!Mode::Read.writes() && Mode::Write.writes() && Mode::Update.writes());
    /// ```
    pub fn writes(self) -> bool {
        !matches!(self, Mode::Read)
    }
    /// Whether the access observes the old value.
    ///
    /// ```
    /// use tensorasync::Mode;
    /// assert!(Mode::Read.reads() && !Mode::Write.reads() && Mode::Update.reads());
    /// ```
    pub fn reads(self) -> bool {
        !matches!(self, Mode::Write)
    }
    /// The mode with numeric value `v` (1 read, 2 write, 3 update), `None`
    /// for any other.
    ///
    /// ```
    /// use tensorasync::Mode;
    /// assert_eq!(Mode::from_u32(3), Some(Mode::Update));
    /// assert_eq!(Mode::from_u32(0), None);
    /// ```
    pub fn from_u32(v: u32) -> Option<Mode> {
        match v {
            1 => Some(Mode::Read),
            2 => Some(Mode::Write),
            3 => Some(Mode::Update),
            _ => None,
        }
    }
}

/// Names the waiter type of the crate's queues without naming it here: the
/// layer that defines tasks (above the values that hold queues) binds it
/// with `impl WaiterKind for Tasks`, so a value can hold a [`TaskQueue`]
/// while the queue and the value know no task type.
pub(crate) trait WaiterKind {
    type Waiter: Waiter;
}

/// The kind of waiter that values' queues hold (see [`WaiterKind`]).
pub(crate) enum Tasks {}

/// The epoch queue of a value, a block or any hazard record.
pub(crate) type TaskQueue = EpochQueue<<Tasks as WaiterKind>::Waiter>;

/// An enrolled access that later accesses may have to wait for.
struct Entry<W> {
    task: Arc<W>,
    writes: bool,
    region: Region,
}

/// Frontiers up to this many entries are scanned; a larger one is indexed.
const INDEX_AT: usize = 32;
/// An indexed frontier that shrinks below this goes back to a vector.
const FLAT_BELOW: usize = 8;

/// The ordering state of one value (or one block, or one hazard record).
pub(crate) struct EpochQueue<W> {
    frontier: Frontier<W>,
    /// The stamp of the latest enrolled operation (see [`EpochQueue::enroll`]).
    seq: u64,
}

/// What a queue keeps of its enrolled accesses: as a vector while small (a
/// scan of a few entries is cheaper than any index), indexed by storage
/// interval while large, so enrolling an access through a view costs the
/// entries it may meet, not the whole frontier. (One enum keeps the queue at
/// two words beside its stamp: a value and its counts fill one cache line.)
enum Frontier<W> {
    Flat {
        /// The latest whole-value writer, unless a later one replaced it.
        /// It comes before every entry of `entries` and covers everything
        /// before it. Kept apart because it is the whole frontier of a value
        /// that is only written whole (a chain of updates, or independent
        /// tasks each on its own tensor): enrolling one such writer replaces
        /// another, with no vector to allocate or clear.
        writer: Option<Arc<W>>,
        /// Unfinished-or-recent accesses after `writer` that are not covered
        /// by a later writer, writers first: a reader only waits for writers,
        /// so it scans the leading writers and stops at the first reader, and
        /// a value read by thousands of pending operations (a shared matrix)
        /// costs each new reader nothing extra. A thin vector keeps it one
        /// word while empty.
        entries: ThinVec<Entry<W>>,
    },
    Indexed(Box<Indexed<W>>),
}

/// A large frontier: the same entries as `Frontier::Flat`'s, with the
/// writers and the readers each in an interval index over the storage
/// interval of their regions (see [`Region::bounds`]). Two regions that may
/// overlap have meeting bounds, so a query of the index finds every entry a
/// new access may conflict with (and every entry a writer may cover), and
/// `Region::may_overlap` stays the test of each.
struct Indexed<W> {
    /// As `Frontier::Flat`'s.
    writer: Option<Arc<W>>,
    /// The entries by id (an id names an entry in `writers` or `readers`);
    /// `None`: a free id, in `free`.
    slots: Vec<Option<Entry<W>>>,
    free: Vec<u32>,
    writers: IntervalIndex,
    readers: IntervalIndex,
    /// Accesses to no element: they conflict with nothing, but barriers wait
    /// for them and `is_idle` sees them.
    empty: Vec<Entry<W>>,
    /// Readers of the whole value: every writer meets them and no reader
    /// does, so an index would only cost them (a matrix that thousands of
    /// pending operations read).
    whole: Vec<Entry<W>>,
    /// Entries in `slots`, `empty` and `whole`.
    len: usize,
    /// Entries added since finished ones were last dropped, and how many
    /// more make the next drop due (the entries kept then): the drop costs
    /// the entries there are, and there are at most twice as many as were
    /// added since the last one.
    added: usize,
    sweep_after: usize,
}

impl<W> Default for EpochQueue<W> {
    fn default() -> Self {
        EpochQueue { frontier: Frontier::Flat { writer: None, entries: ThinVec::new() }, seq: 0 }
    }
}

impl<W: Waiter> EpochQueue<W> {
    /// The stamp after everything enrolled so far.
    pub(crate) fn next_stamp(&self) -> u64 {
        self.seq + 1
    }

    /// Take `stamp` (as [`EpochQueue::enroll`] does) for an operation that
    /// ran to completion while this queue's lock was held and the queue was
    /// idle, so it needs no entry: later operations still stamp after it.
    pub(crate) fn take_stamp(&mut self, stamp: u64) {
        debug_assert!(stamp >= self.seq, "stamps never go back");
        self.seq = stamp;
    }

    /// Enroll `task` for an access in `mode` to `region`, with the operation's
    /// `stamp` (at least [`EpochQueue::next_stamp`] of every queue the
    /// operation enrolls on, so stamps of conflicting operations follow their
    /// order on every queue they share).
    ///
    /// `on_device`: the value lives on a device and `task` is a device task,
    /// so a predecessor on the same device only has to be issued, not
    /// finished, before `task` starts (see [`Waiter::depend_on_device`]).
    pub(crate) fn enroll(&mut self, task: &Arc<W>, mode: Mode, region: &Region, stamp: u64, on_device: bool) {
        let writes = mode.writes();
        if matches!(region, Region::Empty) {
            // No element: it waits for nothing and covers nothing. (Decided
            // here, before any region test reads an `Empty` region's payload,
            // which is uninitialised.) The entry keeps the access known to
            // `is_idle` until it finishes.
            self.push(Entry { task: task.clone(), writes, region: Region::Empty });
            self.seq = stamp;
            return;
        }
        let whole = matches!(region, Region::Full);
        let depend = |pred: &Arc<W>| {
            if on_device {
                W::depend_on_device(task, pred)
            } else {
                W::depend_on(task, pred)
            }
        };
        let entries = match &mut self.frontier {
            Frontier::Flat { writer, entries } => {
                if let Some(w) = writer_before(writer, region) {
                    depend(w);
                }
                entries
            }
            Frontier::Indexed(ix) => {
                if writes && whole {
                    if let Some(w) = writer_before(&ix.writer, region) {
                        depend(w);
                    }
                    ix.iter().for_each(|e| depend(&e.task));
                    self.frontier = Frontier::Flat { writer: Some(task.clone()), entries: ThinVec::new() };
                } else {
                    ix.enroll(task, writes, region, depend);
                    if ix.len < FLAT_BELOW {
                        self.flatten();
                    }
                }
                debug_assert!(stamp >= self.seq, "stamps never go back");
                self.seq = stamp;
                return;
            }
        };
        if writes {
            for e in entries.iter() {
                if whole || e.region.may_overlap(region) {
                    depend(&e.task);
                }
            }
        } else {
            for e in entries.iter().take_while(|e| e.writes) {
                if whole || e.region.may_overlap(region) {
                    depend(&e.task);
                }
            }
        }
        // Entries a writer covers are ordered before it, and anything that
        // conflicts with them conflicts with it.
        if writes && whole {
            if !entries.is_empty() {
                entries.clear();
                if entries.capacity() > 64 {
                    *entries = ThinVec::new();
                }
            }
            if let Frontier::Flat { writer, .. } = &mut self.frontier {
                *writer = Some(task.clone());
            }
        } else if writes && matches!(&entries[..], [e] if e.region.is_same(region)) {
            // A chain of writers through one view: the one entry there is
            // has this very region, and the writer takes its place (no entry
            // dropped and pushed, no region count taken).
            let e = &mut entries[0];
            e.task = task.clone();
            e.writes = true;
        } else {
            if writes {
                // An access to no element is not ordered before this writer,
                // so it stays on the frontier for later barriers.
                entries.retain(|e| matches!(e.region, Region::Empty) || !region.covers(&e.region));
            }
            self.push(Entry { task: task.clone(), writes, region: region.clone() });
        }
        debug_assert!(stamp >= self.seq, "stamps never go back");
        self.seq = stamp;
    }

    /// Enroll a barrier: it waits for every unfinished access to `region`
    /// enrolled so far and joins as a reader, so a later writer of the region
    /// also waits for it.
    pub(crate) fn enroll_barrier(&mut self, task: &Arc<W>, region: &Region) {
        match &self.frontier {
            Frontier::Flat { writer, entries } => {
                if let Some(w) = writer_before(writer, region) {
                    W::depend_on(task, w);
                }
                for e in entries.iter() {
                    // An access to no element is still enrolled: a barrier (a
                    // wait, or the release of the handle the access goes
                    // through) waits for it too.
                    if matches!(e.region, Region::Empty) || e.region.may_overlap(region) {
                        W::depend_on(task, &e.task);
                    }
                }
            }
            Frontier::Indexed(ix) => {
                if let Some(w) = writer_before(&ix.writer, region) {
                    W::depend_on(task, w);
                }
                for e in &ix.empty {
                    W::depend_on(task, &e.task);
                }
                for e in ix.whole.iter().filter(|e| e.region.may_overlap(region)) {
                    W::depend_on(task, &e.task);
                }
                ix.meeting(region, true, |_, e| {
                    if e.region.may_overlap(region) {
                        W::depend_on(task, &e.task);
                    }
                });
            }
        }
        self.push(Entry { task: task.clone(), writes: false, region: region.clone() });
        self.seq += 1;
    }

    /// Whether nothing enrolled so far is still unfinished. When so, the
    /// finished entries are dropped (they order nothing any more), so that
    /// asking again costs nothing: a release or wait per view of a tensor
    /// with K finished slice accesses cost O(K) each, O(K²) in all.
    #[inline]
    pub(crate) fn is_idle(&mut self) -> bool {
        // Nothing enrolled, or all of it already dropped (what a value used
        // only in place keeps): nothing to look at or rebuild.
        matches!(&self.frontier, Frontier::Flat { writer: None, entries } if entries.is_empty()) || self.settle_idle()
    }

    /// [`EpochQueue::is_idle`] for a frontier that holds something.
    fn settle_idle(&mut self) -> bool {
        let writer = match &mut self.frontier {
            Frontier::Flat { writer, entries } if entries.iter().all(|e| e.task.is_done()) => writer.take(),
            Frontier::Indexed(ix) if ix.iter().all(|e| e.task.is_done()) => ix.writer.take(),
            _ => return false,
        };
        let idle = writer.as_ref().is_none_or(|w| w.is_done());
        self.frontier = Frontier::Flat { writer, entries: ThinVec::new() };
        idle
    }

    /// [`EpochQueue::is_idle`] where the answer takes a few lookups: `false`,
    /// without looking, for an indexed frontier (many view accesses, where
    /// the finished ones before the first unfinished one can be many).
    pub(crate) fn is_idle_at_a_glance(&mut self) -> bool {
        matches!(self.frontier, Frontier::Flat { .. }) && self.is_idle()
    }

    /// Add an entry, keeping writers before readers.
    fn push(&mut self, entry: Entry<W>) {
        let entries = match &mut self.frontier {
            Frontier::Flat { entries, .. } => entries,
            Frontier::Indexed(ix) => {
                ix.push(entry);
                return;
            }
        };
        // A reader after a finished reader takes its place: a stream of
        // operations that read one tensor (and finish as fast as they come)
        // keeps one entry, instead of growing and sweeping the vector.
        if let Some(last) = entries.last_mut() {
            if !entry.writes && !last.writes && last.task.is_done() {
                *last = entry;
                return;
            }
        }
        // Drop finished entries before the vector grows, so a long run of
        // accesses that finish promptly keeps the frontier small.
        if entries.len() == entries.capacity() && entries.len() >= 8 {
            entries.retain(|e| !e.task.is_done());
        }
        // A whole-value reader scans only the leading writers, and is pushed
        // at the end: it gains nothing from an index.
        let whole_reader = !entry.writes && matches!(entry.region, Region::Full);
        if entries.len() >= INDEX_AT && !whole_reader {
            self.index();
            self.push(entry);
            return;
        }
        if entry.writes {
            let at = entries.iter().take_while(|e| e.writes).count();
            // (Appending, the usual case after a whole-value writer cleared
            // the frontier, needs no shifting.)
            if at == entries.len() {
                entries.push(entry);
            } else {
                entries.insert(at, entry);
            }
        } else {
            entries.push(entry);
        }
    }

    /// Move a flat frontier into an index.
    #[cold]
    fn index(&mut self) {
        let Frontier::Flat { writer, entries } = &mut self.frontier else { return };
        let mut ix = Box::new(Indexed {
            writer: writer.take(),
            slots: Vec::with_capacity(2 * entries.len()),
            free: Vec::new(),
            writers: IntervalIndex::default(),
            readers: IntervalIndex::default(),
            empty: Vec::new(),
            whole: Vec::new(),
            len: 0,
            added: 0,
            sweep_after: entries.len(),
        });
        for e in std::mem::take(entries) {
            ix.insert(e);
        }
        self.frontier = Frontier::Indexed(ix);
    }

    /// Move an indexed frontier back into a vector, writers first.
    #[cold]
    fn flatten(&mut self) {
        let Frontier::Indexed(ix) = &mut self.frontier else { return };
        let mut entries = ThinVec::with_capacity(ix.len);
        let mut readers = ThinVec::new();
        for e in ix.slots.drain(..).flatten().chain(ix.empty.drain(..)).chain(ix.whole.drain(..)) {
            if e.writes {
                entries.push(e);
            } else {
                readers.push(e);
            }
        }
        entries.extend(readers);
        self.frontier = Frontier::Flat { writer: ix.writer.take(), entries };
    }
}

/// The whole-value writer an access to `region` must wait for, if any
/// (every access touching an element does).
fn writer_before<'a, W>(writer: &'a Option<Arc<W>>, region: &Region) -> Option<&'a Arc<W>> {
    writer.as_ref().filter(|_| Region::Full.may_overlap(region))
}

impl<W: Waiter> Indexed<W> {
    /// Enroll an access to `region` (not `Empty`, and not a whole-value
    /// writer): as `EpochQueue::enroll` with a flat frontier, asking the
    /// indexes for the entries it may meet instead of scanning them all.
    fn enroll(&mut self, task: &Arc<W>, writes: bool, region: &Region, depend: impl Fn(&Arc<W>)) {
        if let Some(w) = writer_before(&self.writer, region) {
            depend(w);
        }
        let whole = matches!(region, Region::Full);
        if whole {
            // As the flat scan: a whole-value reader waits for the writers to
            // no element too (they conflict with nothing, so this only keeps
            // the edges the same in both forms).
            for e in self.empty.iter().filter(|e| e.writes) {
                depend(&e.task);
            }
        }
        if writes {
            // Every whole-value reader meets a writer of any element (and
            // only a whole-value writer, handled before, covers them).
            for e in &self.whole {
                depend(&e.task);
            }
        }
        let mut covered: SmallVec<[u32; 8]> = SmallVec::new();
        self.meeting(region, writes, |id, e| {
            if whole || e.region.may_overlap(region) {
                depend(&e.task);
            }
            if writes && region.covers(&e.region) {
                covered.push(id);
            }
        });
        let entry = Entry { task: task.clone(), writes, region: region.clone() };
        // A covered writer with the same bounds (the next writer of a slice)
        // gives the new writer its place in the index: no removal and
        // insertion there.
        let bounds = region.bounds();
        let same = covered
            .iter()
            .position(|&id| self.slots[id as usize].as_ref().is_some_and(|e| e.writes && e.region.bounds() == bounds));
        if let Some(k) = same {
            let id = covered.swap_remove(k);
            self.slots[id as usize] = Some(entry);
            for id in covered {
                self.remove(id);
            }
        } else {
            for id in covered {
                self.remove(id);
            }
            self.push(entry);
        }
    }

    /// Calls `f` with every entry (not `Empty`) whose bounds meet those of
    /// `region` (not `Empty`): the writers, and the readers too if
    /// `readers`.
    fn meeting(&self, region: &Region, readers: bool, mut f: impl FnMut(u32, &Entry<W>)) {
        let Some((lo, hi)) = region.bounds() else { return };
        let mut visit = |id: u32| {
            if let Some(e) = &self.slots[id as usize] {
                f(id, e);
            }
        };
        self.writers.query(lo, hi, &mut visit);
        if readers {
            self.readers.query(lo, hi, &mut visit);
        }
    }

    /// Every entry, `Empty` ones included.
    fn iter(&self) -> impl Iterator<Item = &Entry<W>> {
        self.slots.iter().flatten().chain(&self.empty).chain(&self.whole)
    }

    /// Add an entry, first dropping finished ones when enough were added
    /// since the last time.
    fn push(&mut self, entry: Entry<W>) {
        if self.added >= self.sweep_after.max(INDEX_AT) {
            self.sweep();
        }
        self.added += 1;
        self.insert(entry);
    }

    fn insert(&mut self, entry: Entry<W>) {
        self.len += 1;
        if !entry.writes && matches!(entry.region, Region::Full) {
            self.whole.push(entry);
            return;
        }
        let Some((lo, hi)) = entry.region.bounds() else {
            self.empty.push(entry);
            return;
        };
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        if entry.writes { &mut self.writers } else { &mut self.readers }.insert(lo, hi, id);
        self.slots[id as usize] = Some(entry);
    }

    fn remove(&mut self, id: u32) {
        let Some(e) = self.slots[id as usize].take() else { return };
        let (lo, _) = e.region.bounds().expect("only entries with bounds have ids");
        let found = if e.writes { &mut self.writers } else { &mut self.readers }.remove(lo, id);
        debug_assert!(found, "an entry's id is in its index");
        self.free.push(id);
        self.len -= 1;
    }

    /// Drop the finished entries, each out of its index. (Rebuilding the
    /// indexes on the rest instead cost as much as inserting them again,
    /// even when nothing had finished, as behind a blocked writer.)
    #[cold]
    fn sweep(&mut self) {
        let before = self.empty.len() + self.whole.len();
        self.empty.retain(|e| !e.task.is_done());
        self.whole.retain(|e| !e.task.is_done());
        self.len -= before - (self.empty.len() + self.whole.len());
        let finished: Vec<u32> = (0..self.slots.len() as u32)
            .filter(|&id| self.slots[id as usize].as_ref().is_some_and(|e| e.task.is_done()))
            .collect();
        for id in finished {
            self.remove(id);
        }
        self.added = 0;
        self.sweep_after = self.len;
    }
}

impl<W> EpochQueue<W> {
    /// How many entries the frontier holds (for tests of its upkeep).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn frontier_len(&self) -> usize {
        match &self.frontier {
            Frontier::Flat { entries, .. } => entries.len(),
            Frontier::Indexed(ix) => ix.len,
        }
    }

    /// Whether the frontier is indexed (for tests of the index).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn is_indexed(&self) -> bool {
        matches!(self.frontier, Frontier::Indexed(_))
    }
}

/// The queue's edges against a model of the flat scan (every entry tested,
/// no finished entry dropped), with frontiers large enough to be indexed.
#[cfg(all(test, not(loom)))]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::layout::{Layout, Order};
    use crate::region::{IndexBox, Prog};

    /// A task that records what it was made to wait for.
    struct T {
        id: usize,
        done: AtomicBool,
        preds: Mutex<Vec<usize>>,
    }

    impl Waiter for T {
        fn is_done(&self) -> bool {
            self.done.load(Ordering::Relaxed)
        }
        fn depend_on(this: &Arc<Self>, pred: &Arc<Self>) {
            if !pred.done.load(Ordering::Relaxed) {
                this.preds.lock().unwrap().push(pred.id);
            }
        }
        fn depend_on_device(this: &Arc<Self>, pred: &Arc<Self>) {
            Self::depend_on(this, pred)
        }
    }

    /// The flat scan, as the queue did it before it had an index.
    #[derive(Default)]
    struct Model {
        writer: Option<usize>,
        entries: Vec<(usize, bool, Region)>,
    }

    impl Model {
        /// The predecessors of access `id` (`None`: a barrier), given which
        /// tasks are done.
        fn enroll(&mut self, id: usize, mode: Option<Mode>, region: &Region, done: &[bool]) -> BTreeSet<usize> {
            let mut preds = BTreeSet::new();
            let empty = matches!(region, Region::Empty);
            let whole = matches!(region, Region::Full);
            if let Some(w) = self.writer.filter(|_| !empty) {
                preds.insert(w);
            }
            let writes = mode.is_some_and(|m| m.writes());
            for (e, ew, er) in &self.entries {
                let conflicts = match mode {
                    None => matches!(er, Region::Empty) || er.may_overlap(region),
                    Some(_) => !empty && (writes || *ew) && (whole || er.may_overlap(region)),
                };
                if conflicts {
                    preds.insert(*e);
                }
            }
            if writes && whole {
                self.entries.clear();
                self.writer = Some(id);
            } else {
                if writes && !empty {
                    self.entries.retain(|(_, _, er)| matches!(er, Region::Empty) || !region.covers(er));
                }
                self.entries.push((id, writes, region.clone()));
            }
            preds.retain(|&p| !done[p]);
            preds
        }
    }

    fn random_region(rng: &mut SmallRng, root: &Layout, recent: &[Region]) -> Region {
        match rng.gen_range(0..100) {
            0 => Region::Full,
            1 => Region::Empty,
            2..=11 if !recent.is_empty() => recent[rng.gen_range(0..recent.len())].clone(),
            12..=21 => {
                let lo = rng.gen_range(0..root.len() as isize);
                let hi = (lo + rng.gen_range(0..40)).min(root.len() as isize - 1);
                Region::Span { lo, hi, exact: true }
            }
            n => {
                // Mostly small boxes (so that many stay on the frontier),
                // some large ones (writers that cover many), strided or not.
                let big = n >= 95;
                let axes = root
                    .extents
                    .iter()
                    .map(|&len| {
                        let step = *[1isize, 1, 1, 2, 3, -1, -2].get(rng.gen_range(0..7)).unwrap();
                        let span = if big { rng.gen_range(1..=len) } else { rng.gen_range(1..=3.min(len)) };
                        let count = (span - 1) / step.unsigned_abs() + 1;
                        let first = rng.gen_range(0..=len - span) as isize;
                        let start = if step > 0 { first } else { first + span as isize - 1 };
                        let start = start.clamp(0, len as isize - 1);
                        let last = start + step * (count as isize - 1);
                        assert!((0..len as isize).contains(&last));
                        Prog { start, step, count }
                    })
                    .collect();
                Region::Box(Arc::new(IndexBox::new(axes, root)))
            }
        }
    }

    #[test]
    fn indexed_frontiers_form_the_edges_of_the_flat_scan() {
        let root = Layout::contiguous(&[24, 20], Order::RowMajor);
        let mut indexed_steps = 0;
        for seed in 0..18u64 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut q: EpochQueue<T> = EpochQueue::default();
            let mut model = Model::default();
            let mut tasks: Vec<Arc<T>> = vec![];
            let mut done: Vec<bool> = vec![];
            let mut recent: Vec<Region> = vec![];
            // Seeds differ in how often tasks finish and whole writers come.
            let (p_done, p_full) =
                [(0.0, 0.0), (0.02, 0.001), (0.2, 0.002), (0.01, 0.0), (0.01, 0.05), (0.0, 0.1)][seed as usize % 6];
            for step in 0..4000 {
                let id = tasks.len();
                let t = Arc::new(T { id, done: AtomicBool::new(false), preds: Mutex::new(vec![]) });
                tasks.push(t.clone());
                done.push(false);
                let mut region = random_region(&mut rng, &root, &recent);
                if rng.gen_bool(p_full) {
                    region = Region::Full;
                }
                recent.push(region.clone());
                if recent.len() > 16 {
                    recent.remove(0);
                }
                let mode = match rng.gen_range(0..20) {
                    0 => None,
                    1..=9 => Some(Mode::Read),
                    10..=15 => Some(Mode::Write),
                    _ => Some(Mode::Update),
                };
                let want = model.enroll(id, mode, &region, &done);
                match mode {
                    Some(m) => q.enroll(&t, m, &region, q.next_stamp(), rng.gen_bool(0.1)),
                    None => q.enroll_barrier(&t, &region),
                }
                let got: Vec<usize> = t.preds.lock().unwrap().clone();
                let got_set: BTreeSet<usize> = got.iter().copied().collect();
                assert_eq!(got.len(), got_set.len(), "seed {seed} step {step}: an edge twice");
                assert_eq!(got_set, want, "seed {seed} step {step}: {mode:?} {region:?}");
                indexed_steps += q.is_indexed() as usize;
                // A task finishes only after what it waits for (which
                // `is_idle` relies on: a covered entry is known to be
                // unfinished while the writer that covers it is).
                for (k, task) in tasks.iter().enumerate() {
                    if !done[k] && rng.gen_bool(p_done) && task.preds.lock().unwrap().iter().all(|&p| done[p]) {
                        task.done.store(true, Ordering::Relaxed);
                        done[k] = true;
                    }
                }
                assert_eq!(q.is_idle(), done.iter().all(|&d| d), "seed {seed} step {step}");
            }
            for t in &tasks {
                t.done.store(true, Ordering::Relaxed);
            }
            assert!(q.is_idle());
        }
        assert!(indexed_steps > 10_000, "the index was used at {indexed_steps} steps");
    }

    /// Thousands of pending readers of the whole value (a shared input) stay
    /// out of the index: each waits for the writers only, the frontier
    /// stays a vector while only they come, and once a writer of a slice
    /// has made it an index they are kept beside it, met by every writer.
    #[test]
    fn readers_of_the_whole_value_stay_out_of_the_index() {
        const K: usize = 2000;
        let root = Layout::contiguous(&[64], Order::RowMajor);
        let task = |id| Arc::new(T { id, done: AtomicBool::new(false), preds: Mutex::new(vec![]) });
        let preds = |t: &Arc<T>| t.preds.lock().unwrap().iter().copied().collect::<BTreeSet<_>>();
        let mut q: EpochQueue<T> = EpochQueue::default();
        let block = task(usize::MAX);
        q.enroll(&block, Mode::Update, &Region::Full, 1, false);
        for i in 0..K {
            let r = task(i);
            q.enroll(&r, Mode::Read, &Region::Full, q.next_stamp(), false);
            assert_eq!(preds(&r), BTreeSet::from([usize::MAX]));
        }
        assert!(!q.is_indexed());
        assert_eq!(q.frontier_len(), K);
        let slice =
            Region::Box(Arc::new(IndexBox::new(SmallVec::from_slice(&[Prog { start: 3, step: 1, count: 2 }]), &root)));
        let w = task(K);
        q.enroll(&w, Mode::Write, &slice, q.next_stamp(), false);
        assert_eq!(preds(&w), (0..K).chain([usize::MAX]).collect());
        assert!(q.is_indexed());
        for i in 0..K {
            let r = task(K + 1 + i);
            q.enroll(&r, Mode::Read, &Region::Full, q.next_stamp(), false);
            assert_eq!(preds(&r), BTreeSet::from([usize::MAX, K]));
        }
        let Frontier::Indexed(ix) = &q.frontier else { unreachable!() };
        assert_eq!((ix.whole.len(), ix.len), (2 * K, 2 * K + 1));
        // A second writer of the slice meets every reader, and a barrier
        // of another slice waits for the whole readers, not the writer.
        let w2 = task(2 * K + 1);
        q.enroll(&w2, Mode::Write, &slice, q.next_stamp(), false);
        assert_eq!(preds(&w2), (0..2 * K + 1).filter(|&i| i != K).chain([usize::MAX, K]).collect());
        let other =
            Region::Box(Arc::new(IndexBox::new(SmallVec::from_slice(&[Prog { start: 40, step: 1, count: 2 }]), &root)));
        let b = task(2 * K + 2);
        q.enroll_barrier(&b, &other);
        assert_eq!(preds(&b), (0..2 * K + 1).filter(|&i| i != K).chain([usize::MAX]).collect());
    }

    /// K writers of disjoint 1-element slices behind a blocked whole writer,
    /// then a second writer per slice: each waits for exactly its slice's
    /// first writer and takes its place.
    #[test]
    fn writers_of_disjoint_slices_replace_one_another() {
        const K: usize = 5000;
        let root = Layout::contiguous(&[K], Order::RowMajor);
        let slices: Vec<Region> = (0..K as isize)
            .map(|i| {
                Region::Box(Arc::new(IndexBox::new(
                    SmallVec::from_slice(&[Prog { start: i, step: 1, count: 1 }]),
                    &root,
                )))
            })
            .collect();
        let task = |id| Arc::new(T { id, done: AtomicBool::new(false), preds: Mutex::new(vec![]) });
        let mut q: EpochQueue<T> = EpochQueue::default();
        let block = task(usize::MAX);
        q.enroll(&block, Mode::Update, &Region::Full, 1, false);
        let mut tasks = vec![];
        for round in 0..2 {
            for (i, r) in slices.iter().enumerate() {
                let t = task(round * K + i);
                q.enroll(&t, Mode::Write, r, q.next_stamp(), false);
                let want = if round == 0 { BTreeSet::from([usize::MAX]) } else { BTreeSet::from([usize::MAX, i]) };
                assert_eq!(t.preds.lock().unwrap().iter().copied().collect::<BTreeSet<_>>(), want);
                tasks.push(t);
            }
            assert!(q.is_indexed());
            assert_eq!(q.frontier_len(), K);
        }
        // A reader of two slices waits for their second writers.
        let r = task(2 * K);
        let pair =
            Region::Box(Arc::new(IndexBox::new(SmallVec::from_slice(&[Prog { start: 7, step: 1, count: 2 }]), &root)));
        q.enroll(&r, Mode::Read, &pair, q.next_stamp(), false);
        assert_eq!(
            r.preds.lock().unwrap().iter().copied().collect::<BTreeSet<_>>(),
            BTreeSet::from([usize::MAX, K + 7, K + 8])
        );
        // When they finish, the frontier empties as it grows again, and
        // goes back to a vector.
        block.done.store(true, Ordering::Relaxed);
        for t in &tasks {
            t.done.store(true, Ordering::Relaxed);
        }
        r.done.store(true, Ordering::Relaxed);
        for (i, reg) in slices.iter().cycle().enumerate().take(3 * K) {
            let t = task(3 * K + i);
            q.enroll(&t, Mode::Read, reg, q.next_stamp(), false);
            t.done.store(true, Ordering::Relaxed);
        }
        assert!(!q.is_indexed(), "{} entries", q.frontier_len());
        assert!(q.is_idle());
    }

    /// An idle check that finds everything finished drops the finished
    /// entries, so the next one costs nothing; one unfinished entry keeps
    /// them all (and the answer false).
    #[test]
    fn an_idle_frontier_is_forgotten() {
        const K: usize = 3000;
        let root = Layout::contiguous(&[K], Order::RowMajor);
        let slice = |i: usize| {
            Region::Box(Arc::new(IndexBox::new(
                SmallVec::from_slice(&[Prog { start: i as isize, step: 1, count: 1 }]),
                &root,
            )))
        };
        let task = |id| Arc::new(T { id, done: AtomicBool::new(false), preds: Mutex::new(vec![]) });
        for k in [5, K] {
            let mut q: EpochQueue<T> = EpochQueue::default();
            let tasks: Vec<_> = (0..k).map(task).collect();
            for (i, t) in tasks.iter().enumerate() {
                q.enroll(t, Mode::Write, &slice(i), q.next_stamp(), false);
            }
            assert_eq!(q.is_indexed(), k == K);
            for t in &tasks[1..] {
                t.done.store(true, Ordering::Relaxed);
            }
            assert!(!q.is_idle());
            assert_eq!(q.frontier_len(), k, "an unfinished entry keeps the frontier");
            tasks[0].done.store(true, Ordering::Relaxed);
            assert!(q.is_idle());
            assert_eq!(q.frontier_len(), 0);
            assert!(!q.is_indexed());
            // The queue still orders what comes next.
            let (w, r) = (task(K), task(K + 1));
            q.enroll(&w, Mode::Write, &slice(1), q.next_stamp(), false);
            q.enroll(&r, Mode::Read, &slice(1), q.next_stamp(), false);
            assert_eq!(r.preds.lock().unwrap().as_slice(), &[K]);
            assert!(!q.is_idle());
        }
    }
}
