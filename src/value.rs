//! Tensor values: the durable handle of SPEC §2.
//!
//! A [`Tensor`] is a handle to a [`Value`], the hazard record that keeps the
//! four parts of §2 apart: the descriptor (dtype, domain, layout), the owner
//! token (an `Arc<Storage>`), the epoch token (the [`EpochQueue`] and the
//! poison state) and, only inside a running task, the resolved view.
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

use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::lock_api;

use crate::blocks::Coalesced;
use crate::domain::Domain;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result, Status};
use crate::layout::{Extents, Layout, Order};
use crate::queue::EpochQueue;
use crate::region::Region;
use crate::runtime;
use crate::storage::{ReleaseFn, Storage};
use crate::view::{SliceSpec, View};
use thin_vec::ThinVec;

static FULL_REGION: Region = Region::Full;
use smallvec::SmallVec;

/// What a constructed value holds: backing storage and the layout of its
/// elements in it. Immutable: a value's contents are replaced, never modified,
/// so an access can keep pointing at the contents it was enrolled with.
///
/// The storage is held inline (one allocation fewer per tensor). Values that
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
    pub(crate) queue: EpochQueue,
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
/// checks it before its operands' own flags: with no poison anywhere (the
/// usual case) it never reads its values' line, which the submitting thread
/// writes on every submission (its lock and queue live there), so that line
/// does not travel between the submitter's core and the workers' per task.
/// The count changes only when a value gains its first poison or loses its
/// last, and stays on one read-shared line otherwise.
static POISONED_VALUES: AtomicUsize = AtomicUsize::new(0);

/// Whether some value may hold poison (see [`POISONED_VALUES`]). Ordered like
/// the flags: a predecessor that poisoned a value counted it before it
/// finished, which happens before its successors run.
#[inline]
fn any_poison() -> bool {
    POISONED_VALUES.load(Ordering::Acquire) != 0
}

/// How many values hold poison right now (only for `tests/poison_count.rs`,
/// which runs alone in its process).
#[doc(hidden)]
pub fn poisoned_values_for_tests() -> usize {
    POISONED_VALUES.load(Ordering::Acquire)
}

/// A hazard record: one epoch queue plus the value it orders.
pub(crate) struct Value {
    /// The state, behind a lock whose word also holds the value's small
    /// fields (see [`ValueLock`]), so that the value with its reference
    /// counts fills one cache line (64 bytes), which only submitting threads
    /// use per operation: accesses copy the dtype and domain codes, and tasks
    /// read the poison flag only while some value holds poison (see
    /// [`POISONED_VALUES`]).
    pub(crate) state: StateMutex,
}

/// The lock of a value's state, and the value's fields that are read
/// without it, in one 8-byte word: a separate `parking_lot::Mutex` would pad
/// its one-byte lock to the state's alignment, and these fields would take
/// another word after it.
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

    fn new(dtype: DType, domain: Domain, contents: Option<Arc<Contents>>, read_only: bool) -> Arc<Value> {
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
        let state = ValueState { queue: EpochQueue::default(), contents, poison: ThinVec::new() };
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
    /// uninitialised on a device (see [`Tensor::zeros`]).
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
            Domain::Cuda(d) => crate::device::storage::alloc(d, bytes, origin)?,
        };
        Ok(Contents::owning(storage, layout))
    }
}

/// A counted reference to something pending operations point at without a
/// count of their own: a [`Value`] ([`ValueRc`]) or a [`View`] ([`ViewRc`]).
///
/// A count taken by the submitter and dropped by a worker for every task
/// would move the object's cache line between the two threads twice per
/// task. The object outlives those tasks by another rule: every count goes
/// under its value's lock (see [`crate::runtime::release_value`] and
/// [`crate::runtime::release_view`]), and the last one, if tasks are still
/// queued on the value, moves into a release task enrolled behind them. So
/// the last count goes only when the queue is idle, and nothing can be
/// enrolled through the object after that (enrolling needs a counted
/// reference). Every count of a value is a `ValueRc` and every count of a
/// view a `ViewRc`, the runtime's own wait and release tasks' included, so
/// that no count goes around the lock.
pub(crate) struct Counted<T: Release>(ManuallyDrop<Arc<T>>);

/// How the last count of a [`Counted`] object goes.
pub(crate) trait Release: Sized {
    /// Let go of one count, under the lock of the object's value.
    fn release(count: Arc<Self>);
}

impl Release for Value {
    fn release(count: Arc<Value>) {
        runtime::release_value(count)
    }
}

impl Release for View {
    fn release(count: Arc<View>) {
        runtime::release_view(count)
    }
}

/// A counted reference to a [`Value`], as handles, views and block arrays
/// hold it.
pub(crate) type ValueRc = Counted<Value>;

/// A counted reference to a [`View`], as handles hold it (operations point
/// at the view's layout).
pub(crate) type ViewRc = Counted<View>;

impl<T: Release> Counted<T> {
    pub(crate) fn new(v: Arc<T>) -> Counted<T> {
        Counted(ManuallyDrop::new(v))
    }

    pub(crate) fn arc(&self) -> &Arc<T> {
        &self.0
    }
}

impl<T: Release> Clone for Counted<T> {
    fn clone(&self) -> Self {
        Counted::new(Arc::clone(&self.0))
    }
}

impl<T: Release> std::ops::Deref for Counted<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Release> Drop for Counted<T> {
    fn drop(&mut self) {
        // SAFETY: the only place the Arc is taken out, and `self` is not used after.
        let v = unsafe { ManuallyDrop::take(&mut self.0) };
        T::release(v);
    }
}

/// A handle to an asynchronous tensor: a whole value, or a view of one (see
/// the view module). Cloning the handle shares it (same data, same epoch
/// queue: a structural copy); [`Tensor::deep_copy`] makes a new value.
/// Releasing a handle never blocks, and pending operations keep the data alive.
#[derive(Clone)]
pub struct Tensor(pub(crate) Repr);

/// A whole value is one pointer, so plain tensors stay as small as they can.
#[derive(Clone)]
pub(crate) enum Repr {
    Value(ValueRc),
    View(ViewRc),
    /// Several blocks of a block array as one view (several hazard records).
    Coalesced(Arc<Coalesced>),
}

/// The hazard records a handle orders on, each with the region it touches:
/// one for a value or a view, one per covered block for a coalesced view.
pub(crate) enum Hazards<'a> {
    One(Option<(&'a Arc<Value>, &'a Region)>),
    Many(std::slice::Iter<'a, ValueRc>),
}

impl<'a> Iterator for Hazards<'a> {
    type Item = (&'a Arc<Value>, &'a Region);
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Hazards::One(x) => x.take(),
            Hazards::Many(it) => it.next().map(|v| (v.arc(), &FULL_REGION)),
        }
    }
}

/// Host always; a device only if this process has it.
pub(crate) fn check_domain(domain: Domain, origin: &'static str) -> Result<()> {
    match domain {
        Domain::Host => Ok(()),
        Domain::Cuda(n) => crate::device::device(n).map(drop).map_err(|e| e.with_origin(origin)),
    }
}

impl Tensor {
    fn whole(v: Arc<Value>) -> Tensor {
        Tensor(Repr::Value(ValueRc::new(v)))
    }

    /// A handle to an existing value (a block of a block array).
    pub(crate) fn of_value(v: ValueRc) -> Tensor {
        Tensor(Repr::Value(v))
    }

    fn of_view(v: View) -> Tensor {
        Tensor(Repr::View(ViewRc::new(Arc::new(v))))
    }

    pub(crate) fn of_coalesced(c: Coalesced) -> Tensor {
        Tensor(Repr::Coalesced(Arc::new(c)))
    }

    /// The value (hazard record) this handle orders on: itself, a view's
    /// root, or a coalesced view's first block.
    #[inline]
    pub(crate) fn root(&self) -> &Arc<Value> {
        match &self.0 {
            Repr::Value(v) => v.arc(),
            Repr::View(v) => v.root.arc(),
            Repr::Coalesced(c) => c.members[0].arc(),
        }
    }

    /// Every hazard record this handle orders on, with its region.
    pub(crate) fn hazards(&self) -> Hazards<'_> {
        match &self.0 {
            Repr::Value(v) => Hazards::One(Some((v.arc(), &FULL_REGION))),
            Repr::View(v) => Hazards::One(Some((v.root.arc(), &v.region))),
            Repr::Coalesced(c) => Hazards::Many(c.members.iter()),
        }
    }

    /// The one hazard record of a value or a view, with its region (`None`
    /// for a coalesced view, which has several).
    #[inline]
    pub(crate) fn single_hazard(&self) -> Option<(&Arc<Value>, &Region)> {
        match &self.0 {
            Repr::Value(v) => Some((v.arc(), &FULL_REGION)),
            Repr::View(v) => Some((v.root.arc(), &v.region)),
            Repr::Coalesced(_) => None,
        }
    }

    /// The coalesced view, if this handle is one.
    pub(crate) fn coalesced(&self) -> Option<&Coalesced> {
        match &self.0 {
            Repr::Coalesced(c) => Some(c),
            _ => None,
        }
    }

    /// The view, if this handle is one.
    pub(crate) fn view(&self) -> Option<&View> {
        match &self.0 {
            Repr::View(v) => Some(v),
            _ => None,
        }
    }

    /// An unconstructed tensor: dtype and domain known, no shape yet. An
    /// overwrite (copy-in, copy) constructs it.
    pub fn unconstructed(dtype: DType, domain: Domain) -> Result<Tensor> {
        check_domain(domain, "tensor_new")?;
        Ok(Tensor::whole(Value::new(dtype, domain, None, false)))
    }

    /// A zero-filled tensor.
    pub fn zeros(dtype: DType, extents: &[usize], order: Order, domain: Domain) -> Result<Tensor> {
        const O: &str = "tensor_new_zeros";
        check_domain(domain, O)?;
        let contents = Value::alloc_contents(dtype, extents, order, domain, O)?;
        let t = Tensor::whole(Value::new(dtype, domain, Some(contents), false));
        if domain != Domain::Host {
            // Device memory is zeroed by the tensor's first operation (on
            // the default runtime): creation never waits for the device, and
            // every later access follows the fill.
            crate::ops::fill(&t, crate::dtype::Scalar::real(0.0), Default::default()).map_err(|e| e.with_origin(O))?;
        }
        Ok(t)
    }

    /// A tensor holding a copy of `data`, laid out densely in `order`.
    pub fn from_slice<T: Element>(extents: &[usize], order: Order, data: &[T]) -> Result<Tensor> {
        let l = Layout::contiguous(extents, order);
        if l.checked_len() != Some(data.len()) {
            return Err(Error::new(
                Status::ShapeMismatch,
                "tensor_new_copy",
                format!("extents {extents:?} need {:?} elements, got {}", l.checked_len(), data.len()),
            ));
        }
        // SAFETY: `data` is a live slice of exactly `l.len()` elements of T.
        unsafe { Tensor::from_host(T::DTYPE, &l, data.as_ptr().cast(), order) }
    }

    /// A tensor holding a copy of host memory described by `src` (any strides),
    /// stored densely in `order`. The copy is made before this returns.
    ///
    /// # Safety
    /// Every element `src` addresses must be readable at `ptr` (offsets in
    /// elements of `dtype`).
    pub unsafe fn from_host(dtype: DType, src: &Layout, ptr: *const u8, order: Order) -> Result<Tensor> {
        let c = Value::alloc_contents(dtype, &src.extents, order, Domain::Host, "tensor_new_copy")?;
        // SAFETY: `c` is fresh and dense for `src.extents`; `ptr` by the caller.
        unsafe { crate::backends::native::copy_raw(dtype, c.storage().ptr(), &c.layout, ptr, src) };
        Ok(Tensor::whole(Value::new(dtype, Domain::Host, Some(c), false)))
    }

    /// Wrap host memory without copying. `release` runs exactly once, after the
    /// last access; if wrapping fails it is dropped uncalled (the caller keeps
    /// ownership). A `writable == false` tensor, or one whose strides make
    /// elements overlap, is read-only: every write to it is rejected at submission.
    ///
    /// # Safety
    /// `ptr` is the address of element offset 0 of `layout` (negative strides
    /// reach below it). It must stay valid for reads (and writes, if writable)
    /// of every element `layout` addresses until `release` runs, and nothing
    /// else may write it meanwhile.
    pub unsafe fn wrap(
        dtype: DType,
        layout: Layout,
        ptr: *mut u8,
        writable: bool,
        release: Option<ReleaseFn>,
    ) -> Result<Tensor> {
        let origin = "tensor_wrap";
        let Some(base) = std::ptr::NonNull::new(ptr) else {
            return Err(Error::new(Status::NullPointer, origin, "data pointer is NULL"));
        };
        if (ptr as usize) % dtype.align() != 0 {
            return Err(Error::new(
                Status::InvalidArgument,
                origin,
                format!("data pointer is not aligned for {}", dtype.name()),
            ));
        }
        // The storage starts at the lowest element the layout reaches, which
        // lies below `ptr` when strides are negative.
        let too_large = || Error::new(Status::InvalidArgument, origin, "layout is too large");
        let (lo, bytes) = match layout.checked_span() {
            Some((lo, _)) => (lo, layout.footprint().and_then(|n| n.checked_mul(dtype.size())).ok_or_else(too_large)?),
            None if layout.is_empty() => (0, 0),
            None => return Err(too_large()),
        };
        let shift = lo.checked_mul(dtype.size() as isize).ok_or_else(too_large)?;
        let mut layout = layout;
        layout.offset -= lo;
        // SAFETY: by the caller's contract every addressed element is valid
        // memory, and the lowest one is `lo` elements from `ptr`.
        let base = unsafe { std::ptr::NonNull::new_unchecked(base.as_ptr().offset(shift)) };
        let read_only = !writable || !layout.is_non_overlapping();
        // SAFETY: forwarded from the caller.
        let storage = unsafe { Storage::wrap(base, bytes, release) };
        Ok(Tensor::whole(Value::new(dtype, Domain::Host, Some(Contents::owning(storage, layout)), read_only)))
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.root().dtype()
    }

    /// Domain (host or CUDA device).
    #[inline]
    pub fn domain(&self) -> Domain {
        self.root().domain()
    }

    /// Whether writes to this tensor are rejected (read-only memory, conj views).
    pub fn is_read_only(&self) -> bool {
        match &self.0 {
            Repr::Value(v) => v.read_only(),
            Repr::View(v) => v.read_only,
            Repr::Coalesced(_) => false,
        }
    }

    /// Whether this handle is a view of another value (coalesced block views included).
    pub fn is_view(&self) -> bool {
        !matches!(self.0, Repr::Value(_))
    }

    /// Whether reads through this handle conjugate (a conj view of a complex tensor).
    pub fn is_conj(&self) -> bool {
        self.view().is_some_and(|v| v.conj)
    }

    /// The extents as known at submission time, `None` while unconstructed.
    pub fn extents(&self) -> Option<Extents> {
        self.layout().map(|l| l.extents)
    }

    /// The layout as known at submission time, `None` while unconstructed.
    /// (For a view, the offset is relative to the root's storage.)
    pub fn layout(&self) -> Option<Layout> {
        match &self.0 {
            Repr::Value(v) => v.state.lock().layout().cloned(),
            Repr::View(v) => Some(v.layout.clone()),
            Repr::Coalesced(c) => Some(c.layout.clone()),
        }
    }

    /// An identity for the value (its epoch queue): equal for handles that
    /// share the value, views included, and the id used by
    /// [`crate::ops::EnrollTrace`].
    pub fn value_id(&self) -> usize {
        Arc::as_ptr(self.root()) as usize
    }

    /// Whether two handles order on the same value (the same epoch queue).
    pub fn same_value(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(self.root(), other.root())
    }

    /// Wait for every operation enrolled on this tensor so far (for a view,
    /// on the elements it touches), then report the value's state: `Ok` for a
    /// clean constructed value, the poisoning error, or an `Unconstructed`
    /// error. `None` waits forever. From inside a task, waiting on a tensor the
    /// task itself accesses fails with `WouldDeadlock`.
    pub fn wait(&self, timeout: Option<Duration>) -> Result<()> {
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        let mut first_error = Ok(());
        for (v, r) in self.hazards() {
            let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
            let r = runtime::wait_value(v, r, left);
            if first_error.is_ok() {
                first_error = r;
            }
        }
        first_error
    }

    /// An event that completes once every operation enrolled on this tensor
    /// so far (for a view, on the elements it touches) has completed, with
    /// the outcome [`Tensor::wait`] would report. Never blocks.
    pub fn ready(&self) -> runtime::Event {
        let mut events: SmallVec<[runtime::Event; 1]> =
            self.hazards().map(|(v, r)| runtime::ready_value(v, r)).collect();
        if events.len() == 1 {
            return events.pop().expect("one event");
        }
        // Several hazard records (a coalesced block view): one event for
        // all, with the first error in block order.
        let all = runtime::Event::new();
        let n = events.len();
        let left = Arc::new((AtomicUsize::new(n), parking_lot::Mutex::new(vec![None; n])));
        for (i, e) in events.iter().enumerate() {
            let (all, left) = (all.clone(), left.clone());
            e.on_complete(Box::new(move |r| {
                left.1.lock()[i] = Some(r.clone());
                if left.0.fetch_sub(1, Ordering::AcqRel) == 1 {
                    let outcome = left
                        .1
                        .lock()
                        .iter_mut()
                        .map(|r| r.take().expect("every part completed"))
                        .find(|r| r.is_err())
                        .unwrap_or(Ok(()));
                    all.complete(&outcome);
                }
            }));
        }
        all
    }

    /// Derive a new view from this handle seen as a view.
    fn derive(&self, origin: &'static str, f: impl FnOnce(&View) -> Result<View>) -> Result<Tensor> {
        let v = match &self.0 {
            Repr::View(v) => f(v)?,
            Repr::Value(v) => f(&View::of_root(v, origin)?)?,
            Repr::Coalesced(_) => {
                return Err(Error::new(
                    Status::Unsupported,
                    origin,
                    "views of a coalesced block view are not supported; coalesce the blocks you need instead",
                ))
            }
        };
        Ok(Tensor::of_view(v))
    }

    /// A view of some elements: one [`SliceSpec`] per axis (a range with a step,
    /// possibly negative, or one index that drops the axis).
    pub fn slice(&self, specs: &[SliceSpec]) -> Result<Tensor> {
        self.derive("tensor_slice", |v| v.slice(specs))
    }

    /// A view with axes reordered: axis `j` of the result is axis `perm[j]` of this one.
    pub fn permute(&self, perm: &[usize]) -> Result<Tensor> {
        self.derive("tensor_permute", |v| v.permute(perm))
    }

    /// A view with the axes in reverse order (the matrix transpose for rank 2).
    pub fn transpose(&self) -> Result<Tensor> {
        let rank = self
            .extents()
            .ok_or_else(|| Error::new(Status::Unconstructed, "tensor_transpose", "the tensor is unconstructed"))?
            .len();
        let perm: SmallVec<[usize; 4]> = (0..rank).rev().collect();
        self.derive("tensor_transpose", |v| v.permute(&perm))
    }

    /// A read-only conjugate view: lazy for complex dtypes (kernels read the
    /// elements conjugated), the identity for real ones. The conj of a conj
    /// reads the original values.
    pub fn conj(&self) -> Result<Tensor> {
        self.derive("tensor_conj", |v| Ok(v.conjugate()))
    }

    /// A view with new extents over the same elements read in `order`; the
    /// elements must be dense in that order (`NotContiguous` otherwise).
    pub fn reshape(&self, extents: &[usize], order: Order) -> Result<Tensor> {
        self.derive("tensor_reshape", |v| v.reshape(extents, order))
    }

    /// A copy. For a view, the same view (a structural copy of the handle).
    /// For a whole value, a new value on a fresh queue, filled by a scheduled
    /// copy that sees every write enrolled before it; the event (if asked for
    /// in `opts`) reports that copy.
    pub fn deep_copy(&self, opts: crate::ops::Submit<'_>) -> Result<(Tensor, Option<crate::runtime::Event>)> {
        if self.is_view() {
            return Ok((self.clone(), None));
        }
        let fresh = Tensor::unconstructed(self.dtype(), self.domain())?;
        let ev = crate::ops::copy(&fresh, self, opts)?;
        Ok((fresh, ev))
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("dtype", &self.dtype())
            .field("domain", &self.domain())
            .field("extents", &self.extents())
            .finish()
    }
}

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
