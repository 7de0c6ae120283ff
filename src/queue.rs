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

use thin_vec::ThinVec;

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

/// The ordering state of one value (or one block, or one hazard record).
pub(crate) struct EpochQueue<W> {
    /// The latest whole-value writer, unless a later one replaced it. It
    /// comes before every entry of `frontier` and covers everything before
    /// it. Kept apart from `frontier` because it is the whole frontier of a
    /// value that is only written whole (a chain of updates, or independent
    /// tasks each on its own tensor): enrolling one such writer replaces
    /// another, with no vector to allocate or clear.
    writer: Option<Arc<W>>,
    /// Unfinished-or-recent accesses after `writer` that are not covered by
    /// a later writer, writers first: a reader only waits for writers, so it
    /// scans the leading writers and stops at the first reader, and a value
    /// read by thousands of pending operations (a shared matrix) costs each
    /// new reader nothing extra. A thin vector keeps it one word while empty.
    frontier: ThinVec<Entry<W>>,
    /// The stamp of the latest enrolled operation (see [`EpochQueue::enroll`]).
    seq: u64,
}

impl<W> Default for EpochQueue<W> {
    fn default() -> Self {
        EpochQueue { writer: None, frontier: ThinVec::new(), seq: 0 }
    }
}

impl<W: Waiter> EpochQueue<W> {
    /// The stamp after everything enrolled so far.
    pub(crate) fn next_stamp(&self) -> u64 {
        self.seq + 1
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
        if let Some(w) = self.writer_before(region) {
            depend(w);
        }
        if writes {
            for e in &self.frontier {
                if whole || e.region.may_overlap(region) {
                    depend(&e.task);
                }
            }
        } else {
            for e in self.frontier.iter().take_while(|e| e.writes) {
                if whole || e.region.may_overlap(region) {
                    depend(&e.task);
                }
            }
        }
        // Entries a writer covers are ordered before it, and anything that
        // conflicts with them conflicts with it.
        if writes && whole {
            if !self.frontier.is_empty() {
                self.frontier.clear();
                if self.frontier.capacity() > 64 {
                    self.frontier = ThinVec::new();
                }
            }
            self.writer = Some(task.clone());
        } else if writes && matches!(&self.frontier[..], [e] if e.region.is_same(region)) {
            // A chain of writers through one view: the one entry there is
            // has this very region, and the writer takes its place (no entry
            // dropped and pushed, no region count taken).
            let e = &mut self.frontier[0];
            e.task = task.clone();
            e.writes = true;
        } else {
            if writes {
                // An access to no element is not ordered before this writer,
                // so it stays on the frontier for later barriers.
                self.frontier.retain(|e| matches!(e.region, Region::Empty) || !region.covers(&e.region));
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
        if let Some(w) = self.writer_before(region) {
            W::depend_on(task, w);
        }
        for e in &self.frontier {
            // An access to no element is still enrolled: a barrier (a wait,
            // or the release of the handle the access goes through) waits
            // for it too.
            if matches!(e.region, Region::Empty) || e.region.may_overlap(region) {
                W::depend_on(task, &e.task);
            }
        }
        self.push(Entry { task: task.clone(), writes: false, region: region.clone() });
        self.seq += 1;
    }

    /// The whole-value writer an access to `region` must wait for, if any
    /// (every access touching an element does).
    fn writer_before(&self, region: &Region) -> Option<&Arc<W>> {
        self.writer.as_ref().filter(|_| Region::Full.may_overlap(region))
    }

    /// Whether nothing enrolled so far is still unfinished.
    pub(crate) fn is_idle(&self) -> bool {
        self.writer.as_ref().is_none_or(|w| w.is_done()) && self.frontier.iter().all(|e| e.task.is_done())
    }

    /// Add an entry, keeping writers before readers.
    fn push(&mut self, entry: Entry<W>) {
        // Drop finished entries before the vector grows, so a long run of
        // accesses that finish promptly keeps the frontier small.
        if self.frontier.len() == self.frontier.capacity() && self.frontier.len() >= 8 {
            self.frontier.retain(|e| !e.task.is_done());
        }
        if entry.writes {
            let at = self.frontier.iter().take_while(|e| e.writes).count();
            // (Appending, the usual case after a whole-value writer cleared
            // the frontier, needs no shifting.)
            if at == self.frontier.len() {
                self.frontier.push(entry);
            } else {
                self.frontier.insert(at, entry);
            }
        } else {
            self.frontier.push(entry);
        }
    }
}

impl<W> EpochQueue<W> {
    /// How many entries the frontier holds (for tests of its upkeep).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn frontier_len(&self) -> usize {
        self.frontier.len()
    }
}
