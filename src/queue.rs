//! Epoch queues (SPEC §2.1).
//!
//! A queue orders the accesses to one value. A read joins the current epoch
//! (it waits for the last writer only); a write or update opens the next epoch
//! (it waits for every reader of the current epoch, or for the last writer when
//! there are none). Dependencies are fixed when the access is enrolled, so the
//! order per value is submission order. The queue holds only the tasks of the
//! current epoch; finished ones are dropped as the queue moves on.
//!
//! An epoch queue carries no lock of its own: it lives inside the lock of the
//! hazard record that owns it (see [`crate::value`]), and enrollment of all of
//! one operation's accesses happens while every involved record is locked (see
//! [`crate::ops::submit`]), which is what makes it atomic.

use std::sync::Arc;

use thin_vec::ThinVec;

use crate::runtime::task::Task;

/// How an operation uses an operand.
#[repr(u32)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Reads the value; joins the current epoch.
    Read = 1,
    /// Overwrites every element without reading the old value; opens a new epoch.
    /// A successful overwrite produces a clean (unpoisoned) value.
    Write = 2,
    /// Reads and writes (read-modify-write): one exclusive access that sees the
    /// old value; opens a new epoch.
    Update = 3,
}

impl Mode {
    /// Whether the access modifies the value.
    pub fn writes(self) -> bool {
        !matches!(self, Mode::Read)
    }
    /// Whether the access observes the old value.
    pub fn reads(self) -> bool {
        !matches!(self, Mode::Write)
    }
    pub fn from_u32(v: u32) -> Option<Mode> {
        match v {
            1 => Some(Mode::Read),
            2 => Some(Mode::Write),
            3 => Some(Mode::Update),
            _ => None,
        }
    }
}

/// The ordering state of one value (or one block, or one hazard record).
#[derive(Default)]
pub(crate) struct EpochQueue {
    /// The writer that opened the current epoch (possibly finished).
    writer: Option<Arc<Task>>,
    /// Readers enrolled in the current epoch (some possibly finished). A thin
    /// vector keeps an idle value's queue one word smaller.
    readers: ThinVec<Arc<Task>>,
    /// Number of accesses ever enrolled; the position of the latest one.
    seq: u64,
}

impl EpochQueue {
    /// Enroll `task` for an access in `mode`; returns the access's position.
    pub(crate) fn enroll(&mut self, task: &Arc<Task>, mode: Mode) -> u64 {
        match mode {
            Mode::Read => {
                if let Some(w) = &self.writer {
                    task.depend_on(w);
                }
                self.push_reader(task);
            }
            Mode::Write | Mode::Update => {
                if self.readers.is_empty() {
                    if let Some(w) = &self.writer {
                        task.depend_on(w);
                    }
                } else {
                    // Each reader already waited for the previous writer.
                    for r in self.readers.drain(..) {
                        task.depend_on(&r);
                    }
                    if self.readers.capacity() > 64 {
                        self.readers = ThinVec::new();
                    }
                }
                self.writer = Some(task.clone());
            }
        }
        self.seq += 1;
        self.seq
    }

    /// Enroll a barrier: it waits for everything enrolled so far and joins the
    /// current epoch as a reader, so the next writer also waits for it.
    pub(crate) fn enroll_barrier(&mut self, task: &Arc<Task>) {
        if let Some(w) = &self.writer {
            task.depend_on(w);
        }
        for r in &self.readers {
            task.depend_on(r);
        }
        self.push_reader(task);
        self.seq += 1;
    }

    /// Whether nothing enrolled so far is still unfinished.
    pub(crate) fn is_idle(&self) -> bool {
        self.writer.as_ref().is_none_or(|w| w.is_done()) && self.readers.iter().all(|r| r.is_done())
    }

    fn push_reader(&mut self, task: &Arc<Task>) {
        // Drop finished readers before the vector grows, so a long run of
        // readers that finish promptly keeps the epoch small.
        if self.readers.len() == self.readers.capacity() && self.readers.len() >= 8 {
            self.readers.retain(|r| !r.is_done());
        }
        if self.writer.as_ref().is_some_and(|w| w.is_done()) {
            self.writer = None;
        }
        self.readers.push(task.clone());
    }
}
