//! Task nodes: the dependency graph that epoch queues build.
//!
//! A task starts with one "submission guard" dependency, gains one per
//! unfinished predecessor while its accesses are enrolled, and becomes ready
//! when the count reaches zero. Finishing a task hands its successors their
//! last dependency; those that become ready are returned to the caller (the
//! executor), which runs one inline and schedules the rest.
//!
//! Device tasks (operations that run on a device, see [`crate::tensor::device`])
//! have two ends instead of one: *issued* (their work is queued on a device
//! stream, behind a marker) and *finished* (the device reported the work
//! done, and the outcome is committed). A device task that meets another
//! task of the same device on a device-resident value is released when that
//! predecessor is *issued*: it queues its own work behind the predecessor's
//! marker, so a chain of device operations stays on the device with no host
//! round trip. It still finishes only after that predecessor has finished
//! (its completion "holds"), so outcomes are committed and reported in
//! dependency order, and host-side readers wait for the finish as always.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::Arc;

use smallvec::SmallVec;

use super::body::{InlineBody, Room, TaskBody};
pub(crate) use super::device_work::Issue;
use super::trace::TaskTrace;
use super::work::{Completion, Job, Parked, Work};
use crate::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, Ordering};
use crate::sync::{prefetch_for_write, Mutex};

/// Room for successors once a task has more than one (see `depend_on`).
const SPILLED_SUCCESSORS: usize = 8;

/// Tasks that became ready together.
pub(crate) type ReadyList = SmallVec<[Arc<Task>; 4]>;

/// The successors of a task that has finished, to be told in two steps.
///
/// Waits (tasks that only report what they waited for) are told first, so
/// that a thread blocked in a wait behind the task is released before the
/// task's callbacks run. The others are told after them: a successor then
/// starts only after the completion of every predecessor it has an edge
/// from has been reported, whichever predecessor is the last, and so the
/// reports follow the edges through any chain. (Told with the waits, a
/// successor made ready by another predecessor could run and report while
/// this one was still between its finish and its callbacks; a wrapped
/// tensor's release behind the chain then ran before that callback.)
#[must_use = "the successors wait until they are told"]
pub(crate) struct Finished {
    list: SmallVec<[Arc<Task>; 1]>,
    /// How many of `list`'s first entries are waits.
    waits: usize,
    /// Same-device successors met early (see [`DeviceLink`]), whose hold
    /// this task's finish drops.
    early: SmallVec<[Arc<Task>; 1]>,
}

impl Finished {
    /// Tell the waits; those that became ready join `ready`.
    pub(crate) fn tell_waits(&mut self, ready: &mut ReadyList) {
        if self.waits > 0 {
            for t in self.list.drain(..self.waits) {
                if t.take_edge() {
                    ready.push(t);
                }
            }
            self.waits = 0;
        }
    }

    /// The successors not told yet (after [`Finished::tell_waits`]: the
    /// ones that start only after this task's report).
    pub(crate) fn untold(&self) -> &[Arc<Task>] {
        &self.list[self.waits..]
    }

    /// Tell every successor not told yet; those that became ready join `ready`.
    pub(crate) fn tell_rest(self, ready: &mut ReadyList) {
        for t in self.list {
            if t.take_edge() {
                ready.push(t);
            }
        }
        // Every device task issues before it finishes (see exec), so the
        // early successors' pending counts were released then.
        for t in self.early {
            if t.release_hold() {
                ready.push(t);
            }
        }
    }

    /// Tell every successor at once (a task that reports nothing); those
    /// that became ready.
    pub(crate) fn tell_all(mut self) -> ReadyList {
        let mut ready = ReadyList::new();
        self.tell_waits(&mut ready);
        self.tell_rest(&mut ready);
        ready
    }
}

/// The tasks waiting for this one. Whether it has finished is `Task::done`,
/// which is written under this lock and so can be read under it with a
/// relaxed load (a flag in here would cost a padded word).
struct Successors {
    list: SmallVec<[Arc<Task>; 1]>,
}

/// One submitted operation in the dependency graph.
///
/// Laid out in declaration order: the successor list and the done flag,
/// which the submitting thread takes and reads as it enrolls later tasks,
/// share the first line with the reference counts; `pending`, which workers
/// decrement as predecessors finish, comes last, lines away from them (in a
/// fan-out the submitter enrolls readers on a writer while the previous
/// readers' workers count the writer down).
#[repr(C)]
pub(crate) struct Task {
    successors: Mutex<Successors>,
    /// Set (under the successors lock) when the task finishes; read without it.
    done: AtomicBool,
    /// Whether the task is a wait (see [`Finished`]); fixed at creation.
    is_wait: bool,
    /// How many of the successor list's first entries are waits (see
    /// [`Finished`]); changed under the successors lock. In the padding
    /// beside `done`: a count inside the lock would take the task past the
    /// first line.
    waits: AtomicU16,
    /// Edges from predecessors added while the task is enrolled; only the
    /// enrolling thread touches it (see [`Task::release_guard`]).
    edges: AtomicU32,
    /// The runtime whose workers run this task; `None` for barriers, which
    /// run inline wherever they become ready. Not reference-counted, and
    /// typed only above the task (see [`RuntimeRef`]).
    runtime: Option<RuntimeRef>,
    /// The operation and its completion; see [`Task::running_work`].
    work: UnsafeCell<Option<Work>>,
    /// An operation's body, which its job owns (see [`InlineBody`]).
    room: UnsafeCell<Room>,
    /// For device tasks: the device side of the graph (see the module notes).
    link: Option<Box<DeviceLink>>,
    /// What observation records of this task, when its runtime observes
    /// (see `observe`); set before the task is enrolled. Absent from builds
    /// without trace recording (`--cfg ta_no_trace`).
    #[cfg(not(ta_no_trace))]
    trace: Option<Box<TaskTrace>>,
    /// Unfinished predecessors, plus `GUARD` less the edges added so far
    /// while enrollment is in progress (see [`Task::release_guard`]).
    pending: AtomicU32,
    /// Rank among ready tasks (see `Submit::priority`); 0 for most. Beside
    /// `pending`, in what was padding: read by whoever made the task ready.
    priority: i32,
}

/// The submission guard's weight in `pending`: more than any task can have
/// predecessors, so predecessors that finish while the task is being
/// enrolled never bring the count to zero. Adding an edge then needs no
/// read-modify-write of the count: the enrolling thread counts its edges in
/// `edges` and takes them off the guard in one step when it lets go of it
/// (one locked instruction per edge fewer).
const GUARD: u32 = 1 << 30;

/// The size of the counts an `Arc` puts before its value.
pub(crate) const ARC_COUNTS: usize = 2 * std::mem::size_of::<usize>();

/// The layout of a task's allocation (an `Arc`'s two counts, then the task),
/// which every submission allocates and a worker usually frees: a global
/// allocator may keep freed blocks of exactly this layout for the next task
/// (the C library's does). Reached as `tensorasync::allocator::TASK_ALLOCATION`.
///
/// ```
/// let l = tensorasync::allocator::TASK_ALLOCATION;
/// assert!(l.align().is_power_of_two() && l.align() >= std::mem::align_of::<usize>());
/// assert_eq!(l.size() % l.align(), 0);
/// assert!(l.size() > 2 * std::mem::size_of::<usize>()); // the Arc's counts, then the task
/// ```
pub const TASK_ALLOCATION: std::alloc::Layout = {
    let align = std::mem::align_of::<Task>();
    let align = if align > std::mem::align_of::<usize>() { align } else { std::mem::align_of::<usize>() };
    let start = ARC_COUNTS.div_ceil(align) * align;
    match std::alloc::Layout::from_size_align((start + std::mem::size_of::<Task>()).div_ceil(align) * align, align) {
        Ok(l) => l,
        Err(_) => panic!("a task's layout is valid"),
    }
};

/// Memory for a task, allocated before the task is built.
///
/// A submission's new task is usually a cold block (a worker last used it);
/// allocated early with its lines asked for at once, their transfers overlap
/// the rest of the submission, which must then execute no locked instruction
/// before the operation is built (see docs/perf-notes/runtime.md).
pub(crate) struct TaskMemory(Arc<std::mem::MaybeUninit<Task>>);

/// The runtime a task runs on, as the task holds it: the pool that defines
/// the runtime sits above the task and gives it back its type (see
/// `pool::RuntimeInner::of`).
#[derive(Copy, Clone)]
pub(crate) struct RuntimeRef(NonNull<()>);

impl RuntimeRef {
    /// # Safety
    /// `p` must point to the runtime (`pool::RuntimeInner`) that admitted
    /// the task this is stored in.
    pub(crate) unsafe fn new(p: NonNull<()>) -> RuntimeRef {
        RuntimeRef(p)
    }

    pub(crate) fn as_ptr(self) -> NonNull<()> {
        self.0
    }
}

/// The device side of a device task.
pub(crate) struct DeviceLink {
    ordinal: u32,
    /// What the finish waits for: the task's own device outcome, plus one
    /// per same-device predecessor (met early) that has not finished.
    holds: AtomicU32,
    state: Mutex<LinkState>,
}

#[derive(Default)]
struct LinkState {
    /// Set when the task has queued its work (or found it had none to queue).
    issued: bool,
    /// The marker after its work, if it queued any.
    issue: Option<Issue>,
    finished: bool,
    /// Same-device successors met early: released when this task is issued,
    /// and their hold dropped when it finishes.
    early: SmallVec<[Arc<Task>; 1]>,
    /// Markers of same-device predecessors this task's work must follow.
    waits: SmallVec<[Issue; 2]>,
    /// Between issue and finish: the work and its outcome so far.
    parked: Option<Parked>,
}

// SAFETY: `work` is only touched through `running_work`/`work_mut`, whose
// contracts give one thread exclusive access; `runtime` is only dereferenced
// under the contract of `RuntimeInner::of` (a runtime outlives its admitted
// tasks); everything else is atomics, locks and `Arc`s.
unsafe impl Sync for Task {}
unsafe impl Send for Task {}

impl Task {
    /// Memory for one task, taken at the start of a submission and asked
    /// for in exclusive state (see [`TaskMemory`]).
    #[inline(always)]
    pub(crate) fn reserve() -> TaskMemory {
        let block = Arc::new(std::mem::MaybeUninit::<Task>::uninit());
        // The lines after the first, which the Arc's counts have just been
        // written to (or mimalloc has just read the block's free-list link
        // from; asking for it again was slower).
        // The task follows the Arc's two counts in a block that starts a
        // line (mimalloc's 320-byte class), so offset 64 k from the task is
        // in line k; a different layout would only make the hint miss.
        let task = Arc::as_ptr(&block).cast::<u8>();
        let mut off = 64;
        while off < ARC_COUNTS + std::mem::size_of::<Task>() {
            prefetch_for_write(task.wrapping_add(off));
            off += 64;
        }
        TaskMemory(block)
    }

    /// A task for `runtime`, which must have admitted it (see [`RuntimeRef`]).
    /// `device`: the ordinal of the device it runs on, for device tasks.
    #[inline(always)]
    pub(crate) fn new(runtime: Option<RuntimeRef>, work: Work, device: Option<u32>) -> Arc<Task> {
        Task::new_in(Task::reserve(), runtime, work, device)
    }

    /// As [`Task::new`], in memory from [`Task::reserve`].
    #[inline(always)]
    pub(crate) fn new_in(
        memory: TaskMemory,
        runtime: Option<RuntimeRef>,
        work: Work,
        device: Option<u32>,
    ) -> Arc<Task> {
        let mut task = memory.0;
        let is_wait = matches!(work.job, Job::Barrier(..));
        let p = Task::init_header(&mut task, runtime, device, 0, is_wait);
        // SAFETY: `init_header` wrote every field but the work and the room
        // (which holds nothing here); the work is written now.
        unsafe {
            std::ptr::addr_of_mut!((*p).work).write(UnsafeCell::new(Some(work)));
            task.assume_init()
        }
    }

    /// An operation's task, in memory from [`Task::reserve`], its body
    /// written into the task's room (moving a `Work` holding the body would
    /// copy it once more). `commits_success`: see `InlineBody::place`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new_op_in<B: TaskBody>(
        memory: TaskMemory,
        runtime: Option<RuntimeRef>,
        body: B,
        commits_success: bool,
        completion: Completion,
        device: Option<u32>,
        priority: i32,
    ) -> Arc<Task> {
        let completion = completion.boxed();
        let mut task = memory.0;
        let p = Task::init_header(&mut task, runtime, device, priority, false);
        // SAFETY: `init_header` wrote every field but the work and the room;
        // the room, empty, receives the body owned by the job written into
        // the work, and the task owns both.
        unsafe {
            let job =
                Job::Op(InlineBody::place(UnsafeCell::raw_get(std::ptr::addr_of!((*p).room)), body, commits_success));
            std::ptr::addr_of_mut!((*p).work).write(UnsafeCell::new(Some(Work { job, completion })));
            task.assume_init()
        }
    }

    /// Write every field of the new task in `task` except its work and its
    /// room, which the caller writes before `assume_init`; returns the task's
    /// address. `priority`: its rank among ready tasks (see `Submit::priority`);
    /// `is_wait`: whether it is a wait (see [`Finished`]).
    #[inline(always)]
    fn init_header(
        task: &mut Arc<MaybeUninit<Task>>,
        runtime: Option<RuntimeRef>,
        device: Option<u32>,
        priority: i32,
        is_wait: bool,
    ) -> *mut Task {
        let link =
            device.map(|ordinal| Box::new(DeviceLink { ordinal, holds: AtomicU32::new(1), state: Default::default() }));
        // Written field by field into the allocation: `Arc::new` of the
        // whole struct would build it on the stack and copy it. Through the
        // raw pointer, not `Arc::get_mut`, whose uniqueness test is a locked
        // instruction on the task's (cold) line, before the operation is
        // built (see `TaskMemory`).
        debug_assert_eq!(Arc::strong_count(task), 1);
        // SAFETY (for the writes below): `task` comes from `Task::reserve`
        // and is the only reference to its allocation (a `TaskMemory` is
        // neither cloned nor shared, and an `Arc` made by `Arc::new` has no
        // weak references), so writing through its pointer is exclusive.
        let p = Arc::as_ptr(task).cast_mut().cast::<Task>();
        // SAFETY: `p` points to the new, uninitialised task; each field
        // below is written once.
        unsafe {
            std::ptr::addr_of_mut!((*p).successors).write(Mutex::new(Successors { list: SmallVec::new() }));
            std::ptr::addr_of_mut!((*p).done).write(AtomicBool::new(false));
            std::ptr::addr_of_mut!((*p).is_wait).write(is_wait);
            std::ptr::addr_of_mut!((*p).waits).write(AtomicU16::new(0));
            std::ptr::addr_of_mut!((*p).edges).write(AtomicU32::new(0));
            std::ptr::addr_of_mut!((*p).runtime).write(runtime);
            std::ptr::addr_of_mut!((*p).link).write(link);
            #[cfg(not(ta_no_trace))]
            std::ptr::addr_of_mut!((*p).trace).write(None);
            std::ptr::addr_of_mut!((*p).pending).write(AtomicU32::new(GUARD));
            std::ptr::addr_of_mut!((*p).priority).write(priority);
        }
        p
    }

    /// What observation records of this task, if anything.
    #[inline(always)]
    pub(crate) fn trace(&self) -> Option<&TaskTrace> {
        #[cfg(not(ta_no_trace))]
        return self.trace.as_deref();
        #[cfg(ta_no_trace)]
        None
    }

    /// Attach an observation record to a task no other thread holds yet.
    pub(crate) fn set_trace(task: &mut Arc<Task>, trace: Box<TaskTrace>) {
        #[cfg(not(ta_no_trace))]
        if let Some(t) = Arc::get_mut(task) {
            t.trace = Some(trace);
        }
        #[cfg(ta_no_trace)]
        let _ = (task, trace);
    }

    /// Make a wait's task, which no other thread holds yet, tell and be told
    /// as an operation: a stand-in for an operation with callbacks in the
    /// loom models, which run no runtime.
    #[cfg(all(test, loom))]
    pub(crate) fn report_as_operation(task: &mut Arc<Task>) {
        Arc::get_mut(task).expect("a task no other thread holds").is_wait = false;
    }

    /// Its priority among ready tasks (0 unless submitted with one).
    #[inline(always)]
    pub(crate) fn priority(&self) -> i32 {
        self.priority
    }

    /// Whether this is a device task.
    pub(crate) fn is_device(&self) -> bool {
        self.link.is_some()
    }

    /// The work of a task that no other thread can see yet.
    ///
    /// # Safety
    /// Only before the task is enrolled on any queue or scheduled.
    #[expect(clippy::mut_from_ref, reason = "the work is in an UnsafeCell; the contract gives one thread access")]
    pub(crate) unsafe fn work_mut(&self) -> &mut Work {
        // SAFETY: exclusive by the contract above.
        unsafe { (*self.work.get()).as_mut().expect("work is present until the task runs") }
    }

    /// The runtime that runs this task, as stored (see [`RuntimeRef`]).
    #[inline(always)]
    pub(crate) fn runtime_ref(&self) -> Option<RuntimeRef> {
        self.runtime
    }

    /// The work of a task being run, in place (running it there spares
    /// copying it out of the task; `None` once it has been dropped).
    ///
    /// # Safety
    /// Only the thread that made the task ready may call this, and only
    /// while it runs the task: the one whose `release_guard` returned true,
    /// or that received the task from `finish` or `issue` (which return each
    /// task to exactly one caller). The counter's AcqRel transitions order
    /// every earlier access before this one.
    #[expect(clippy::mut_from_ref, reason = "the work is in an UnsafeCell; the contract gives one thread access")]
    pub(crate) unsafe fn running_work(&self) -> &mut Option<Work> {
        // SAFETY: exclusive by the contract above.
        unsafe { &mut *self.work.get() }
    }

    /// Make `self` wait for `pred` (no-op if `pred` already finished).
    pub(crate) fn depend_on(self: &Arc<Self>, pred: &Arc<Task>) {
        // A finished predecessor needs no edge; checking first spares a lock
        // on a line that the worker which finished it still owns.
        if Arc::ptr_eq(self, pred) || pred.is_done() {
            return;
        }
        let mut s = pred.successors.lock();
        if !pred.done.load(Ordering::Relaxed) {
            if let Some(t) = self.trace() {
                t.edge_from(pred.trace());
            }
            self.add_edge();
            if s.list.len() == s.list.capacity() && !s.list.spilled() {
                // A task with more than one successor (a writer and the
                // readers of its epoch) usually gets several: one
                // allocation for them instead of one per doubling.
                s.list.reserve_exact(SPILLED_SUCCESSORS);
            }
            s.list.push(self.clone());
            // Waits go first (see `Finished`): swapped into place, so that
            // many waits cost no shifting. Past the count's range, a wait
            // stays among the others (it is told after the callbacks).
            if self.is_wait {
                let waits = pred.waits.load(Ordering::Relaxed);
                if waits < u16::MAX {
                    let last = s.list.len() - 1;
                    s.list.swap(usize::from(waits), last);
                    pred.waits.store(waits + 1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Make `self` wait for `pred`, which it meets on a device-resident
    /// value: if both run on the same device, `self` may start once `pred`
    /// is issued (behind its marker) and finishes after it; otherwise as
    /// [`Task::depend_on`].
    pub(crate) fn depend_on_device(self: &Arc<Self>, pred: &Arc<Task>) {
        let (Some(me), Some(pl)) = (&self.link, &pred.link) else {
            return self.depend_on(pred);
        };
        if me.ordinal != pl.ordinal || Arc::ptr_eq(self, pred) {
            return self.depend_on(pred);
        }
        let mut ps = pl.state.lock();
        if ps.finished {
            return;
        }
        if let Some(t) = self.trace() {
            t.edge_from(pred.trace());
        }
        // Count the hold before publishing the edge, so the predecessor's
        // finish cannot bring the holds to zero early.
        me.holds.fetch_add(1, Ordering::Relaxed);
        if ps.issued {
            if let Some(issue) = &ps.issue {
                me.state.lock().waits.push(issue.clone());
            }
        } else {
            self.add_edge();
        }
        ps.early.push(self.clone());
    }

    /// The markers this device task's work must follow (taken once, when it runs).
    pub(crate) fn take_waits(&self) -> SmallVec<[Issue; 2]> {
        self.link.as_ref().map(|l| std::mem::take(&mut l.state.lock().waits)).unwrap_or_default()
    }

    /// Record that this device task's work is queued (behind `issue`, if it
    /// queued any) and park what its finish needs; returns the same-device
    /// successors that became ready.
    pub(crate) fn issue(&self, issue: Option<Issue>, parked: Parked) -> ReadyList {
        let link = self.link.as_ref().expect("a device task");
        let early = {
            let mut s = link.state.lock();
            s.issued = true;
            s.parked = Some(parked);
            s.issue = issue.clone();
            s.early.clone()
        };
        let mut ready = ReadyList::new();
        for t in early {
            if let Some(i) = &issue {
                t.link.as_ref().expect("early successors are device tasks").state.lock().waits.push(i.clone());
            }
            if t.take_edge() {
                ready.push(t);
            }
        }
        ready
    }

    /// Drop one predecessor's edge (it finished, or a device predecessor
    /// issued); true if the task is now ready to run.
    #[inline]
    fn take_edge(&self) -> bool {
        self.pending.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// Drop one completion hold (the task's own device outcome, or a
    /// predecessor's finish); true if the task may now finish.
    pub(crate) fn release_hold(&self) -> bool {
        let link = self.link.as_ref().expect("a device task");
        link.holds.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// The parked work of an issued device task, when it is ready to finish.
    pub(crate) fn unpark(&self) -> Option<Parked> {
        self.link.as_ref().and_then(|l| l.state.lock().parked.take())
    }

    /// Record a device task's outcome as it arrives from the device (kept
    /// with its parked work; the first error wins).
    pub(crate) fn record_outcome(&self, outcome: crate::error::Result<()>) {
        if let (Err(e), Some(link)) = (outcome, &self.link) {
            if let Some(p) = link.state.lock().parked.as_mut() {
                p.fail(e);
            }
        }
    }

    /// Count one more predecessor that will decrement `pending` when it is
    /// done (only the enrolling thread calls this, before `release_guard`).
    fn add_edge(&self) {
        let n = self.edges.load(Ordering::Relaxed) + 1;
        debug_assert!(n < GUARD, "more predecessors than the guard's weight");
        self.edges.store(n, Ordering::Relaxed);
    }

    /// Drop the submission guard; true if the task is now ready to run.
    /// Called once, by the thread that enrolled the task, after enrolling it.
    #[inline]
    pub(crate) fn release_guard(&self) -> bool {
        let edges = self.edges.load(Ordering::Relaxed);
        if edges == 0 {
            // No predecessor holds an edge that could drop the count (the
            // common case of a task whose predecessors have all finished,
            // which `depend_on` saw with an acquiring load): ready without
            // a read-modify-write.
            return true;
        }
        // `pending` is `GUARD` less the edges already dropped; taking off
        // the rest of the guard leaves the edges still held.
        let rest = GUARD - edges;
        self.pending.fetch_sub(rest, Ordering::AcqRel) == rest
    }

    /// Whether the task has finished.
    pub(crate) fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Mark finished: the task's accesses are released (later enrollments
    /// and waits see it done). Its successors are returned to be told (see
    /// [`Finished`]).
    pub(crate) fn finish(&self) -> Finished {
        let (list, waits) = {
            let mut s = self.successors.lock();
            self.done.store(true, Ordering::Release);
            (std::mem::take(&mut s.list), usize::from(self.waits.load(Ordering::Relaxed)))
        };
        let early = match &self.link {
            Some(link) => {
                let mut s = link.state.lock();
                s.finished = true;
                std::mem::take(&mut s.early)
            }
            None => SmallVec::new(),
        };
        Finished { list, waits, early }
    }

    /// Whether `target` is `self` or (transitively) waits for `self`. Used to
    /// refuse a blocking wait that could never finish.
    pub(crate) fn reaches(&self, target: &Arc<Task>) -> bool {
        if std::ptr::eq(self, Arc::as_ptr(target)) {
            return true;
        }
        let mut seen: std::collections::HashSet<*const Task> = Default::default();
        let mut stack: Vec<Arc<Task>> = self.successors.lock().list.to_vec();
        while let Some(t) = stack.pop() {
            if Arc::ptr_eq(&t, target) {
                return true;
            }
            if seen.insert(Arc::as_ptr(&t)) {
                stack.extend(t.successors.lock().list.iter().cloned());
            }
        }
        false
    }
}

/// The tasks are what values' epoch queues hold.
impl crate::queue::WaiterKind for crate::queue::Tasks {
    type Waiter = Task;
}

impl crate::queue::Waiter for Task {
    #[inline(always)]
    fn is_done(&self) -> bool {
        Task::is_done(self)
    }
    #[inline(always)]
    fn depend_on(this: &Arc<Self>, pred: &Arc<Self>) {
        Task::depend_on(this, pred)
    }
    #[inline(always)]
    fn depend_on_device(this: &Arc<Self>, pred: &Arc<Self>) {
        Task::depend_on_device(this, pred)
    }
}
