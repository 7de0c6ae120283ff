//! Values (SPEC §2): the hazard record behind every tensor handle.
//!
//! A `Value` keeps the parts of §2 that belong to the data apart from the
//! handle: the descriptor (dtype, domain, layout), the owner token (the
//! `Storage` in its `Contents`), the epoch token (the `TaskQueue` and
//! the poison state). Handles (`crate::tensor::handle::Tensor`) and views
//! (`crate::tensor::view`) point at a value through counted references
//! (`ValueRc`).
//!
//! The layout and storage recorded in a value are fixed at submission time:
//! an overwrite whose result shape is known (copy-in of a given shape, a copy
//! from a tensor of known shape) constructs the value when it is submitted,
//! so later submissions check shapes synchronously and every access records
//! where its elements are when it is enrolled. Tasks enrolled earlier never see
//! the change, because nothing can access an unconstructed value. Storage, once
//! set, is never replaced while the value lives; a future operation that
//! replaces it must keep the old storage alive (in its own task) until every
//! earlier access has finished, which a writer does by construction.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::lock_api;
use thin_vec::ThinVec;

use crate::domain::Domain;
use crate::dtype::DType;
use crate::error::{Error, Result, Status};
use crate::layout::{Layout, Order};
use crate::queue::TaskQueue;
use crate::region::Region;
use crate::tensor::counted::Counted;
use crate::tensor::storage::Storage;

/// What a constructed value holds: backing storage and the layout of its
/// elements in it. Immutable: a value's contents are replaced, never modified,
/// so an access can keep pointing at the contents it was enrolled with.
///
/// The storage is held inline (one allocation per tensor). Values that
/// share one allocation (block arrays) each hold a `Storage` wrapping their
/// part of it, whose release hook keeps the shared allocation alive.
pub(crate) struct Contents {
    storage: Storage,
    pub(crate) layout: Layout,
}

impl Contents {
    /// Contents owning `storage`; the caller has checked that `layout` lies inside it.
    pub(crate) fn owning(storage: Storage, layout: Layout) -> Arc<Contents> {
        Arc::new(Contents { storage, layout })
    }

    /// The backing storage.
    pub(crate) fn storage(&self) -> &Storage {
        &self.storage
    }

    /// Address of element `[0, 0, ...]`.
    pub(crate) fn data(&self, dtype: DType) -> *mut u8 {
        // SAFETY: the layout lies inside the storage (checked at creation),
        // so the offset stays inside the allocation.
        unsafe { self.storage().ptr().offset(self.layout.offset * dtype.size() as isize) }
    }
}

/// The mutable part of a value, guarded by its lock.
pub(crate) struct ValueState {
    pub(crate) queue: TaskQueue,
    /// The contents as of the last submission; `None` while unconstructed.
    pub(crate) contents: Option<Arc<Contents>>,
    /// Errors of failed writes, each on the region it wrote (see [`Poison`]).
    poison: ThinVec<Poison>,
}

/// A failed write's error on the region it wrote, with the queue position of
/// that write. Poison is tracked per region so that operations on disjoint
/// parts of a value, which run concurrently, give exactly the results of
/// sequential execution: a read fails with the latest error on a region it
/// may overlap (the same overlap test orders the accesses, so every such
/// write ran before it), and an overwrite cleans the entries it covers.
struct Poison {
    region: Region,
    pos: u64,
    error: Error,
}

impl ValueState {
    /// Whether a failed write left an error on some region of the value.
    pub(crate) fn is_poisoned(&self) -> bool {
        !self.poison.is_empty()
    }

    /// Whether the value holds data (or will, once the tasks enrolled so far run).
    pub(crate) fn is_constructed(&self) -> bool {
        self.contents.is_some()
    }

    /// The layout as of the last submission.
    pub(crate) fn layout(&self) -> Option<&Layout> {
        self.contents.as_deref().map(|c| &c.layout)
    }

    /// The latest error recorded on a region that may overlap `region`.
    fn poison_in(&self, region: &Region) -> Option<Error> {
        self.poison.iter().filter(|p| p.region.may_overlap(region)).max_by_key(|p| p.pos).map(|p| p.error.clone())
    }
}

/// How many values hold poison right now, process-wide. A running task
/// checks it before its operands' own flags, so that without poison it
/// never reads its values' state (see docs/perf-notes/tensor.md).
static POISONED_VALUES: AtomicUsize = AtomicUsize::new(0);

/// Whether some value may hold poison (see [`POISONED_VALUES`]). Ordered like
/// the flags: a predecessor that poisoned a value counted it before it
/// finished, which happens before its successors run.
#[inline]
pub(crate) fn any_poison() -> bool {
    POISONED_VALUES.load(Ordering::Acquire) != 0
}

/// How many values hold poison right now (only for `tests/poison_count.rs`,
/// which runs alone in its process).
#[cfg(any(test, feature = "internals"))]
pub fn poisoned_values_for_tests() -> usize {
    POISONED_VALUES.load(Ordering::Acquire)
}

/// A hazard record: one epoch queue plus the value it orders.
pub(crate) struct Value {
    /// The state, behind a lock whose word also holds the value's small
    /// fields (see [`ValueLock`]): the value and its counts fit one cache
    /// line (see docs/perf-notes/tensor.md).
    pub(crate) state: StateMutex,
}

/// The lock of a value's state, and the value's fields that are read
/// without it, in one 8-byte word (a separate mutex would take two).
pub(crate) struct ValueLock {
    raw: parking_lot::RawMutex,
    /// Mirrors `!state.poison.is_empty()` (written under the lock), so a task
    /// can check its operands without locking them. Counted in
    /// [`POISONED_VALUES`] while set.
    poisoned: AtomicBool,
    /// The dtype's code and the domain's C encoding (see [`Value::dtype`] and
    /// [`Value::domain`]).
    dtype: u8,
    domain: i32,
    /// `READ_ONLY` and `FIXED` (one byte for both keeps the word at 8 bytes).
    flags: u8,
}

/// Rejects every write at submission (const user memory, self-overlapping strides).
const READ_ONLY: u8 = 1;
/// The contents can never be replaced (a block of a block array: its
/// storage is part of a shared allocation).
const FIXED: u8 = 2;

// SAFETY: locking and unlocking are parking_lot's RawMutex's (whose
// contract this forwards unchanged); the other fields are never changed
// through the lock (only `poisoned`, an atomic).
unsafe impl lock_api::RawMutex for ValueLock {
    #[allow(clippy::declare_interior_mutable_const)] // (the trait's constant)
    const INIT: ValueLock = ValueLock {
        raw: <parking_lot::RawMutex as lock_api::RawMutex>::INIT,
        poisoned: AtomicBool::new(false),
        dtype: 0,
        domain: -1,
        flags: 0,
    };
    type GuardMarker = <parking_lot::RawMutex as lock_api::RawMutex>::GuardMarker;

    #[inline]
    fn lock(&self) {
        self.raw.lock();
    }
    #[inline]
    fn try_lock(&self) -> bool {
        self.raw.try_lock()
    }
    #[inline]
    unsafe fn unlock(&self) {
        // SAFETY: forwarded: the caller holds the lock.
        unsafe { self.raw.unlock() }
    }
    #[inline]
    fn is_locked(&self) -> bool {
        self.raw.is_locked()
    }
}

/// A value's locked state (see [`ValueLock`]).
pub(crate) type StateMutex = lock_api::Mutex<ValueLock, ValueState>;
/// A held lock on a value's state.
pub(crate) type StateGuard<'a> = lock_api::MutexGuard<'a, ValueLock, ValueState>;

impl Drop for Value {
    fn drop(&mut self) {
        if self.word().poisoned.load(Ordering::Relaxed) {
            POISONED_VALUES.fetch_sub(1, Ordering::Release);
        }
    }
}

impl Value {
    /// A block of a block array: contents fixed for its lifetime.
    pub(crate) fn new_fixed(dtype: DType, domain: Domain, contents: Arc<Contents>) -> Arc<Value> {
        Value::build(dtype, domain, Some(contents), false, true)
    }

    pub(crate) fn new(dtype: DType, domain: Domain, contents: Option<Arc<Contents>>, read_only: bool) -> Arc<Value> {
        Value::build(dtype, domain, contents, read_only, false)
    }

    fn build(
        dtype: DType,
        domain: Domain,
        contents: Option<Arc<Contents>>,
        read_only: bool,
        fixed: bool,
    ) -> Arc<Value> {
        let word = ValueLock {
            poisoned: AtomicBool::new(false),
            dtype: dtype as u32 as u8,
            domain: domain.to_i32(),
            flags: if read_only { READ_ONLY } else { 0 } | if fixed { FIXED } else { 0 },
            ..<ValueLock as lock_api::RawMutex>::INIT
        };
        let state = ValueState { queue: TaskQueue::default(), contents, poison: ThinVec::new() };
        Arc::new(Value { state: StateMutex::from_raw(word, state) })
    }

    /// The lock word with the value's small fields.
    #[inline]
    fn word(&self) -> &ValueLock {
        // SAFETY: only used to read the fields besides the lock (and the
        // `poisoned` atomic); the lock itself is only taken and released
        // through `state`.
        unsafe { self.state.raw() }
    }

    /// Whether every write is rejected at submission.
    #[inline]
    pub(crate) fn read_only(&self) -> bool {
        self.word().flags & READ_ONLY != 0
    }

    /// Whether the contents can never be replaced (a block of a block array).
    #[inline]
    pub(crate) fn fixed(&self) -> bool {
        self.word().flags & FIXED != 0
    }

    /// Element type.
    #[inline]
    pub(crate) fn dtype(&self) -> DType {
        DType::from_u32(self.word().dtype as u32).expect("a value stores a valid dtype code")
    }

    /// The dtype's code and the domain's C encoding, as stored (an access
    /// copies them; see [`DType::from_u32`] and [`Domain::from_i32`]).
    #[inline]
    pub(crate) fn codes(&self) -> (u8, i32) {
        (self.word().dtype, self.word().domain)
    }

    /// Where the elements live.
    #[inline]
    pub(crate) fn domain(&self) -> Domain {
        Domain::from_i32(self.word().domain).expect("a value stores a valid domain code")
    }

    /// The error an access to `region` fails with, if any. Called by a task
    /// that holds the access: every write to an overlapping region enrolled
    /// before it finished before the task was released, which orders their
    /// stores before this load.
    pub(crate) fn poison_in(&self, region: &Region) -> Option<Error> {
        if !any_poison() || !self.word().poisoned.load(Ordering::Acquire) {
            return None;
        }
        self.state.lock().poison_in(region)
    }

    /// Record that the write at queue position `pos` to `region` failed with `e`.
    pub(crate) fn add_poison(&self, region: Region, pos: u64, error: Error) {
        let mut s = self.state.lock();
        self.add_poison_locked(&mut s, region, pos, error);
    }

    /// [`Value::add_poison`] with the value's lock already held (`s` is its
    /// state): for a write that ran under that lock (see `ops::in_place`).
    pub(crate) fn add_poison_locked(&self, s: &mut ValueState, region: Region, pos: u64, error: Error) {
        s.poison.push(Poison { region, pos, error });
        if !self.word().poisoned.load(Ordering::Relaxed) {
            // Counted before the flag is set and before the writing task
            // finishes (under the lock, like every change of the flag).
            POISONED_VALUES.fetch_add(1, Ordering::Release);
            self.word().poisoned.store(true, Ordering::Release);
        }
    }

    /// A successful overwrite of `region`: the errors it covers are gone.
    pub(crate) fn clean(&self, region: &Region) {
        if !any_poison() || !self.word().poisoned.load(Ordering::Acquire) {
            return;
        }
        let mut s = self.state.lock();
        // Each error keeps the part of its region that this write did not
        // cover: exactly, where the difference is a union of boxes or spans
        // (see `Region::subtract`), else all of it (a read there may fail
        // although it is clean, never the reverse).
        if s.poison.iter().any(|p| region.may_overlap(&p.region)) {
            let s = &mut *s;
            let root = s.contents.as_deref().map(|c| &c.layout);
            let mut kept = ThinVec::with_capacity(s.poison.len());
            for p in s.poison.drain(..) {
                if region.covers(&p.region) {
                    continue;
                }
                match root.and_then(|root| p.region.subtract(region, root)) {
                    Some(pieces) => {
                        for piece in pieces {
                            kept.push(Poison { region: piece, pos: p.pos, error: p.error.clone() });
                        }
                    }
                    None => kept.push(p),
                }
            }
            s.poison = kept;
        }
        if s.poison.is_empty() && self.word().poisoned.load(Ordering::Relaxed) {
            self.word().poisoned.store(false, Ordering::Release);
            POISONED_VALUES.fetch_sub(1, Ordering::Release);
        }
    }

    /// Dense contents for `extents` in `domain` (used at creation and by
    /// overwrites that construct their output): zeroed on the host,
    /// uninitialised on a device (see `Tensor::zeros`).
    pub(crate) fn alloc_contents(
        dtype: DType,
        extents: &[usize],
        order: Order,
        domain: Domain,
        origin: &'static str,
    ) -> Result<Arc<Contents>> {
        let layout = Layout::contiguous(extents, order);
        let bytes = layout
            .checked_len()
            .and_then(|n| n.checked_mul(dtype.size()))
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or_else(|| {
                Error::new(Status::OutOfMemory, origin, format!("tensor of extents {extents:?} is too large"))
            })?;
        let storage = match domain {
            Domain::Host => Storage::alloc_zeroed(bytes, origin)?,
            Domain::Cuda(d) => crate::tensor::device::memory::alloc(d, bytes, origin)?,
        };
        Ok(Contents::owning(storage, layout))
    }
}

/// Host always; a device only if this process has it.
pub(crate) fn check_domain(domain: Domain, origin: &'static str) -> Result<()> {
    match domain {
        Domain::Host => Ok(()),
        Domain::Cuda(n) => crate::tensor::device::registry::device(n).map(drop).map_err(|e| e.with_origin(origin)),
    }
}

/// A counted reference to a [`Value`], as handles, views and block arrays
/// hold it (see [`Counted`]).
pub(crate) type ValueRc = Counted<Value>;

/// The state a waiter on `region` reports once everything before it has run.
pub(crate) fn settled_state(v: &Value, region: &Region, origin: &'static str) -> Result<()> {
    let s = v.state.lock();
    if let Some(e) = s.poison_in(region) {
        return Err(e);
    }
    if !s.is_constructed() {
        return Err(Error::new(Status::Unconstructed, origin, "the tensor is unconstructed"));
    }
    Ok(())
}
