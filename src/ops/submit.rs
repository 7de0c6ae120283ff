//! Atomic submission: every operand's hazard record is locked (in address
//! order, so concurrent submissions cannot deadlock), the operation is checked
//! against the values' submission-time state, and then all its accesses are
//! enrolled before any lock is released. Two operations that share values are
//! therefore enrolled in the same order on every queue they share, which is
//! why submissions from many threads never form a wait cycle (two-phase
//! locking makes the enrollment order a serialization order).

use parking_lot::MutexGuard;
use smallvec::SmallVec;

use super::{Access, Body, Operation};
use crate::dispatch::Selector;
use crate::error::{Error, Result, Status};
use crate::queue::Mode;
use crate::runtime::cq::CompletionQueue;
use crate::runtime::event::{Callback, Event};
use crate::runtime::exec::{self, Completion, Work};
use crate::runtime::{Runtime, Task};
use crate::value::{Tensor, ValueState};

/// Where each enrolled access landed: `(value id, position in its queue)`.
/// Sorting operations by these positions per value recovers the order the
/// runtime guarantees; tests use it to replay a concurrent program sequentially.
pub type EnrollTrace = SmallVec<[(usize, u64); 3]>;

/// How to submit an operation and report its completion.
#[derive(Default)]
pub struct Submit<'a> {
    /// The runtime that runs the task (default: [`Runtime::global`]).
    pub runtime: Option<&'a Runtime>,
    /// Return an [`Event`] for the operation.
    pub event: bool,
    /// Called once with the outcome, on a worker thread, outside any lock.
    pub callback: Option<Callback>,
    /// Push the outcome to this completion queue with this tag.
    pub cq: Option<(&'a CompletionQueue, u64)>,
    /// Which backends may run a dispatched operation.
    pub selector: Selector,
    /// Receives the queue positions of the enrolled accesses.
    pub trace: Option<&'a mut EnrollTrace>,
}

impl<'a> Submit<'a> {
    /// Submit to `rt` and ask for an event.
    pub fn on(rt: &'a Runtime) -> Self {
        Submit { runtime: Some(rt), ..Default::default() }
    }
    /// Also return an event.
    pub fn with_event(mut self) -> Self {
        self.event = true;
        self
    }
}

/// The values of one submission, locked; indexed by operand.
pub(crate) struct Locked<'g> {
    guards: SmallVec<[MutexGuard<'g, ValueState>; 4]>,
    /// Operand index -> guard index.
    slot: SmallVec<[usize; 4]>,
}

impl Locked<'_> {
    /// The submission-time state of operand `i`.
    pub(crate) fn state(&mut self, i: usize) -> &mut ValueState {
        &mut self.guards[self.slot[i]]
    }
}

/// Submit an operation. `plan` runs with every operand locked: it checks shapes
/// against the submission-time state and may construct outputs. On any error
/// nothing is enrolled.
pub(crate) fn submit(
    name: impl Into<super::OpName>,
    origin: &'static str,
    operands: &[(&Tensor, Mode)],
    body: Body,
    opts: Submit<'_>,
    plan: impl FnOnce(&mut Locked<'_>) -> Result<()>,
) -> Result<Option<Event>> {
    let rt = opts.runtime.unwrap_or_else(|| Runtime::global());

    // Static checks: read-only outputs, and outputs sharing an input's queue.
    for (t, m) in operands {
        if m.writes() && t.value.read_only {
            return Err(Error::new(Status::ReadOnly, origin, "the output tensor is read-only"));
        }
    }
    // Operands in address order: the lock order, and where duplicates meet.
    // (Most operations have one operand: no sorting, no bookkeeping.)
    let mut order: SmallVec<[usize; 4]> = SmallVec::new();
    if operands.len() > 1 {
        for i in 0..operands.len() {
            order.push(i);
        }
        order.sort_unstable_by_key(|&i| operands[i].0.value_id());
        for w in order.windows(2) {
            let (a, b) = (operands[w[0]], operands[w[1]]);
            if a.0.same_value(b.0) && (a.1.writes() || b.1.writes()) {
                return Err(Error::new(
                    Status::Alias,
                    origin,
                    "an output shares the epoch queue of another operand of the same operation",
                ));
            }
        }
    }

    rt.inner().admit(origin)?;
    let event = opts.event.then(Event::new);
    let mut accesses = SmallVec::new();
    for (t, m) in operands {
        accesses.push(Access::new(t.value.clone(), *m));
    }
    let completion = Completion { event: event.clone(), callback: opts.callback, cq: opts.cq.map(|(q, tag)| (q.clone(), tag)) };
    let task = Task::new(Some(rt.inner()), Work::op(Operation { name: name.into(), accesses, body }, completion));

    // Lock each distinct value once, in address order.
    let mut locked = Locked { guards: SmallVec::new(), slot: SmallVec::new() };
    let mut unique: SmallVec<[(usize, Mode); 4]> = SmallVec::new(); // (operand, mode)
    if operands.len() == 1 {
        locked.guards.push(operands[0].0.value.state.lock());
        locked.slot.push(0);
        unique.push((0, operands[0].1));
    } else {
        for _ in 0..operands.len() {
            locked.slot.push(0);
        }
        for &i in &order {
            let (t, m) = operands[i];
            match unique.last() {
                // Only read+read duplicates get here (see the alias check).
                Some(&(j, _)) if operands[j].0.same_value(t) => {}
                _ => {
                    locked.guards.push(t.value.state.lock());
                    unique.push((i, m));
                }
            }
            locked.slot[i] = locked.guards.len() - 1;
        }
    }

    let checked = plan(&mut locked).and_then(|()| {
        for (i, (_, m)) in operands.iter().enumerate() {
            if !locked.state(i).is_constructed() {
                let what = if m.reads() { "reads" } else { "writes" };
                return Err(Error::new(
                    Status::Unconstructed,
                    origin,
                    format!("operand {i} is unconstructed and this operation {what} it"),
                ));
            }
        }
        Ok(())
    });
    if let Err(e) = checked {
        drop(locked);
        drop(task);
        rt.inner().retire();
        return Err(e);
    }

    // Record where each operand's elements are, now that the plan is final.
    // SAFETY: the task is not yet enrolled, so no other thread can see its work.
    let work = unsafe { task.work_mut() };
    for (i, a) in work.accesses_mut().iter_mut().enumerate() {
        let c = locked.state(i).contents.as_deref().expect("checked constructed above");
        a.data = c.data(a.value.dtype);
        a.layout = &c.layout;
    }

    let mut trace = opts.trace;
    for (g, &(i, m)) in locked.guards.iter_mut().zip(&unique) {
        let pos = g.queue.enroll(&task, m);
        if let Some(tr) = trace.as_deref_mut() {
            tr.push((operands[i].0.value_id(), pos));
        }
    }
    drop(locked);

    if let Some(e) = &event {
        e.bind(&task);
    }
    if task.release_guard() {
        exec::schedule(task);
    }
    Ok(event)
}
