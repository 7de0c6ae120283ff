//! Completion queues (SPEC §2.6): completions tagged with user data, polled in
//! batches, with a file descriptor that is readable exactly while completions
//! are pending, for epoll, libuv, Julia `FileWatching` or Go's netpoller.
//!
//! The descriptor is a non-blocking eventfd. Its counter is set when the queue
//! goes from empty to non-empty and cleared when a poll empties it, both under
//! the queue's lock, so readability always matches "entries pending".

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result, Status};

/// One completed operation.
#[derive(Clone, Debug)]
pub struct CompletionEntry {
    /// The tag given at submission.
    pub tag: u64,
    /// The operation's outcome.
    pub result: Result<()>,
}

struct Inner {
    entries: Mutex<VecDeque<CompletionEntry>>,
    fd: OwnedFd,
    /// Tasks awaiting an entry as a stream (see [`CompletionQueue::poll_waker`]),
    /// registered and taken under `entries`' lock; `has_wakers` (also only
    /// touched under that lock) spares a push the second lock when nobody awaits.
    wakers: Mutex<Vec<std::task::Waker>>,
    has_wakers: std::sync::atomic::AtomicBool,
}

/// A queue of completions with a pollable file descriptor. Cloning shares it.
#[derive(Clone)]
pub struct CompletionQueue(Arc<Inner>);

impl CompletionQueue {
    /// A new, empty completion queue.
    ///
    /// ```
    /// let cq = tensorasync::CompletionQueue::new().unwrap();
    /// assert_eq!(cq.len(), 0);
    /// assert!(cq.poll(8).is_empty());
    /// ```
    pub fn new() -> Result<CompletionQueue> {
        // SAFETY: eventfd has no pointer arguments; a negative return is an error.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(Error::new(
                Status::Internal,
                "cq_new",
                format!("eventfd failed: {}", std::io::Error::last_os_error()),
            ));
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(CompletionQueue(Arc::new(Inner {
            entries: Mutex::new(VecDeque::new()),
            fd,
            wakers: Mutex::new(Vec::new()),
            has_wakers: std::sync::atomic::AtomicBool::new(false),
        })))
    }

    /// The descriptor that is readable while completions are pending. It stays
    /// owned by the queue: do not read from or close it.
    ///
    /// ```
    /// use tensorasync::{CompletionEntry, CompletionQueue};
    /// let cq = CompletionQueue::new().unwrap();
    /// let readable = |fd| {
    ///     let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    ///     // SAFETY: one valid pollfd, no wait.
    ///     unsafe { libc::poll(&mut p, 1, 0) == 1 }
    /// };
    /// assert!(!readable(cq.fd()));
    /// cq.push(CompletionEntry { tag: 1, result: Ok(()) });
    /// assert!(readable(cq.fd()));
    /// cq.poll(1);
    /// assert!(!readable(cq.fd()));
    /// ```
    pub fn fd(&self) -> RawFd {
        self.0.fd.as_raw_fd()
    }

    /// Add an entry, as a completion does (for completions the program
    /// reports itself, such as a callback that forwards to the queue).
    ///
    /// ```
    /// use tensorasync::{CompletionEntry, CompletionQueue, Error, Status};
    /// let cq = CompletionQueue::new().unwrap();
    /// cq.push(CompletionEntry { tag: 7, result: Err(Error::new(Status::KernelFailed, "mine", "it broke")) });
    /// let e = cq.poll(1).pop().unwrap();
    /// assert_eq!(e.tag, 7);
    /// assert_eq!(e.result.unwrap_err().message(), "it broke");
    /// ```
    pub fn push(&self, entry: CompletionEntry) {
        let mut q = self.0.entries.lock();
        if q.is_empty() {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to our own eventfd. It
            // cannot block (EFD_NONBLOCK) and cannot overflow (the counter
            // is at most 1).
            unsafe { libc::write(self.fd(), (&one as *const u64).cast(), 8) };
        }
        q.push_back(entry);
        if !self.0.has_wakers.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        self.0.has_wakers.store(false, std::sync::atomic::Ordering::Relaxed);
        let wakers = std::mem::take(&mut *self.0.wakers.lock());
        drop(q);
        for w in wakers {
            w.wake();
        }
    }

    /// Take the oldest completion, or register `waker` to be woken by the
    /// next push (under the queue's lock, so no push slips in between).
    pub(crate) fn poll_waker(&self, waker: &std::task::Waker) -> Option<CompletionEntry> {
        let mut q = self.0.entries.lock();
        if let Some(e) = q.pop_front() {
            if q.is_empty() {
                let mut sink: u64 = 0;
                // SAFETY: reads 8 bytes into a live u64; non-blocking.
                unsafe { libc::read(self.fd(), (&mut sink as *mut u64).cast(), 8) };
            }
            return Some(e);
        }
        let mut w = self.0.wakers.lock();
        if !w.iter().any(|x| x.will_wake(waker)) {
            w.push(waker.clone());
        }
        self.0.has_wakers.store(true, std::sync::atomic::Ordering::Relaxed);
        drop(w);
        drop(q);
        super::poke::poke();
        None
    }

    /// Take up to `max` completions, oldest first.
    ///
    /// ```
    /// use tensorasync::{CompletionEntry, CompletionQueue};
    /// let cq = CompletionQueue::new().unwrap();
    /// for tag in 1..=3 {
    ///     cq.push(CompletionEntry { tag, result: Ok(()) });
    /// }
    /// let tags: Vec<u64> = cq.poll(2).iter().map(|e| e.tag).collect();
    /// assert_eq!(tags, vec![1, 2]); // oldest first, at most 2
    /// assert_eq!(cq.poll(8).len(), 1);
    /// ```
    pub fn poll(&self, max: usize) -> Vec<CompletionEntry> {
        let mut q = self.0.entries.lock();
        let n = max.min(q.len());
        if n == 0 {
            // The caller waits for completions (see `runtime::poke`).
            super::poke::poke();
        }
        let out: Vec<_> = q.drain(..n).collect();
        if n > 0 && q.is_empty() {
            let mut sink: u64 = 0;
            // SAFETY: reads 8 bytes into a live u64; non-blocking.
            unsafe { libc::read(self.fd(), (&mut sink as *mut u64).cast(), 8) };
        }
        out
    }

    /// Number of pending completions.
    ///
    /// ```
    /// use tensorasync::{CompletionEntry, CompletionQueue};
    /// let cq = CompletionQueue::new().unwrap();
    /// cq.push(CompletionEntry { tag: 1, result: Ok(()) });
    /// cq.push(CompletionEntry { tag: 2, result: Ok(()) });
    /// assert_eq!(cq.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.0.entries.lock().len()
    }

    /// Whether no completion is pending.
    ///
    /// ```
    /// use tensorasync::{CompletionEntry, CompletionQueue};
    /// let cq = CompletionQueue::new().unwrap();
    /// assert!(cq.is_empty());
    /// cq.push(CompletionEntry { tag: 1, result: Ok(()) });
    /// assert!(!cq.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readable(fd: RawFd) -> bool {
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        unsafe { libc::poll(&mut p, 1, 0) == 1 && p.revents & libc::POLLIN != 0 }
    }

    #[test]
    fn fd_is_readable_exactly_while_pending() {
        let cq = CompletionQueue::new().unwrap();
        assert!(!readable(cq.fd()));
        cq.push(CompletionEntry { tag: 1, result: Ok(()) });
        cq.push(CompletionEntry { tag: 2, result: Ok(()) });
        assert!(readable(cq.fd()));
        let a = cq.poll(1);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].tag, 1);
        assert!(readable(cq.fd()), "one entry still pending");
        let b = cq.poll(16);
        assert_eq!(b.iter().map(|e| e.tag).collect::<Vec<_>>(), vec![2]);
        assert!(!readable(cq.fd()));
        assert!(cq.poll(4).is_empty());
    }
}
