//! Events and completion queues.

use std::ffi::{c_int, c_void};

use super::args::timeout_arg;
use super::{arg, guard, make_handle, need, put};
use super::{ta_callback, ta_completion, ta_cq, ta_error, ta_event, ta_status, TA_STATUS_OK, TA_STATUS_PENDING};
use ta::CompletionQueue;
use ta::{Error, Status};

fn status_of(r: &ta::Result<()>) -> ta_status {
    match r {
        Ok(()) => TA_STATUS_OK,
        Err(e) => crate::status::to_c(e.status()),
    }
}

/// Poll an event without blocking: `TA_STATUS_PENDING` while the operation
/// runs, then its final status (`TA_STATUS_OK`, or the status of its error).
/// Handle problems give handle statuses (`TA_STATUS_NULL_HANDLE`, ...), which
/// operations never produce.
#[no_mangle]
pub extern "C" fn ta_event_poll(event: *const ta_event) -> ta_status {
    let mut out = TA_STATUS_PENDING;
    let st = guard("ta_event_poll", std::ptr::null_mut(), || {
        let ev = arg(event, "ta_event_poll", "event")?;
        if let Some(r) = ev.poll() {
            out = status_of(&r);
        }
        Ok(())
    });
    if st == TA_STATUS_OK {
        out
    } else {
        st
    }
}

/// Wait for an event (`timeout_ns` < 0: forever) and return the operation's
/// final status, or `TA_STATUS_TIMEOUT`. On a program thread it also waits
/// for the operation's callbacks to return (see `ta_callback`). On a worker
/// thread the wait helps run
/// other work; waiting inside a kernel on an operation that needs that kernel
/// to finish returns `TA_STATUS_WOULD_DEADLOCK`.
#[no_mangle]
pub extern "C" fn ta_event_wait(event: *const ta_event, timeout_ns: i64) -> ta_status {
    let mut out = TA_STATUS_OK;
    let st = guard("ta_event_wait", std::ptr::null_mut(), || {
        let ev = arg(event, "ta_event_wait", "event")?;
        match ev.wait(timeout_arg(timeout_ns)) {
            Ok(()) => {}
            Err(e) if matches!(e.status(), Status::Timeout | Status::WouldDeadlock) => return Err(e),
            Err(e) => out = crate::status::to_c(e.status()),
        }
        Ok(())
    });
    if st == TA_STATUS_OK {
        out
    } else {
        st
    }
}

/// The error of a completed operation: a new error handle in `*error_out`
/// (free it with `ta_error_free`), or NULL if it succeeded. Returns
/// `TA_STATUS_PENDING` (writing nothing) while the operation runs.
#[no_mangle]
pub extern "C" fn ta_event_error(event: *const ta_event, error_out: *mut *mut ta_error) -> ta_status {
    const O: &str = "ta_event_error";
    guard(O, std::ptr::null_mut(), || {
        need(error_out, O, "error_out")?;
        let ev = arg(event, O, "event")?;
        match ev.poll() {
            None => Err(Error::new(Status::Pending, O, "the operation has not completed")),
            Some(Ok(())) => {
                put(error_out, std::ptr::null_mut());
                Ok(())
            }
            Some(Err(e)) => {
                put(error_out, make_handle(e, O)?);
                Ok(())
            }
        }
    })
}

struct SendPtr(*mut c_void);
// SAFETY: the userdata pointer goes back to the user's callback only.
unsafe impl Send for SendPtr {}

/// Call `callback(status, userdata)` exactly once when the operation completes:
/// right away, on this thread, if it already has; otherwise on the thread that
/// completes it (see `ta_callback` for which thread that is, what the
/// operation's state is then, and what the callback may do). Never called
/// while the library holds a lock.
#[no_mangle]
pub extern "C" fn ta_event_on_complete(
    event: *const ta_event,
    callback: ta_callback,
    userdata: *mut c_void,
) -> ta_status {
    const O: &str = "ta_event_on_complete";
    guard(O, std::ptr::null_mut(), || {
        let Some(f) = callback else {
            return Err(Error::new(Status::NullPointer, O, "argument `callback` is NULL"));
        };
        let ev = arg(event, O, "event")?;
        let ud = SendPtr(userdata);
        ev.on_complete(Box::new(move |r| {
            let ud = &ud;
            // SAFETY: the user's callback with its own userdata.
            unsafe { f(status_of(r), ud.0) }
        }));
        Ok(())
    })
}

/// Push `{tag, status}` to `cq` when the operation completes (at once if it
/// has). When the entry can be taken, the operation is complete in every
/// observable way (as for `ta_callback`).
#[no_mangle]
pub extern "C" fn ta_event_notify(event: *const ta_event, cq: *const ta_cq, tag: u64) -> ta_status {
    const O: &str = "ta_event_notify";
    guard(O, std::ptr::null_mut(), || {
        let ev = arg(event, O, "event")?;
        let q = arg(cq, O, "cq")?;
        ev.on_complete(Box::new(move |r| q.push(ta::CompletionEntry { tag, result: r.clone() })));
        Ok(())
    })
}

/// Free an event handle (the operation is not affected). NULL is a no-op.
#[no_mangle]
pub extern "C" fn ta_event_free(event: *mut ta_event) -> ta_status {
    super::free_handle(event)
}

/// Create a completion queue.
#[no_mangle]
pub extern "C" fn ta_cq_new(cq_out: *mut *mut ta_cq, error: *mut *mut ta_error) -> ta_status {
    const O: &str = "ta_cq_new";
    guard(O, error, || {
        need(cq_out, O, "cq_out")?;
        put(cq_out, make_handle(CompletionQueue::new()?, O)?);
        Ok(())
    })
}

/// The queue's file descriptor: readable (POLLIN) exactly while completions
/// are pending. It belongs to the queue: poll it, but do not read or close it.
#[no_mangle]
pub extern "C" fn ta_cq_fd(cq: *const ta_cq, fd_out: *mut c_int) -> ta_status {
    const O: &str = "ta_cq_fd";
    guard(O, std::ptr::null_mut(), || {
        need(fd_out, O, "fd_out")?;
        put(fd_out, arg(cq, O, "cq")?.fd());
        Ok(())
    })
}

/// Take up to `cap` completions, oldest first, into `out`; the number taken
/// goes to `*count_out`. Never blocks. Each entry's `error` is NULL on success
/// or a new error handle that the caller frees.
#[no_mangle]
pub extern "C" fn ta_cq_poll(
    cq: *const ta_cq,
    out: *mut ta_completion,
    cap: usize,
    count_out: *mut usize,
) -> ta_status {
    const O: &str = "ta_cq_poll";
    guard(O, std::ptr::null_mut(), || {
        need(count_out, O, "count_out")?;
        if cap > 0 {
            need(out, O, "out")?;
        }
        let q = arg(cq, O, "cq")?;
        let entries = q.poll(cap);
        for (i, e) in entries.iter().enumerate() {
            let error = match &e.result {
                Ok(()) => std::ptr::null_mut(),
                Err(err) => make_handle(err.clone(), O).unwrap_or(std::ptr::null_mut()),
            };
            // SAFETY: `out` holds `cap` entries and i < entries.len() <= cap.
            unsafe { out.add(i).write(ta_completion { tag: e.tag, status: status_of(&e.result), error }) };
        }
        put(count_out, entries.len());
        Ok(())
    })
}

/// Free a completion queue handle. Operations still holding it keep it alive
/// until they complete. NULL is a no-op.
#[no_mangle]
pub extern "C" fn ta_cq_free(cq: *mut ta_cq) -> ta_status {
    super::free_handle(cq)
}
