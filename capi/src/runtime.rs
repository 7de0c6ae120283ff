//! Runtimes.

use super::{arg, guard, make_handle, need, put, ta_error, ta_runtime, ta_shutdown, ta_status};
use super::{TA_SHUTDOWN_CANCEL, TA_SHUTDOWN_DRAIN};
use ta::{Error, Status};
use ta::{Runtime, ShutdownMode};

/// Create a runtime with `threads` worker threads (0: one per available core).
/// Kernels that are parallel (`ta_kernel_parallel_for`) share these workers.
/// More than 4096 threads fails with `TA_STATUS_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn ta_runtime_new(
    threads: usize,
    runtime_out: *mut *mut ta_runtime,
    error: *mut *mut ta_error,
) -> ta_status {
    guard("ta_runtime_new", error, || {
        need(runtime_out, "ta_runtime_new", "runtime_out")?;
        let rt = Runtime::new(threads)?;
        put(runtime_out, make_handle(rt, "ta_runtime_new")?);
        Ok(())
    })
}

/// A new handle to the process-wide default runtime (created on first use with
/// `TA_NUM_THREADS` workers, default one per core). Operations submitted with
/// a NULL runtime run there. Freeing this handle does not stop the runtime.
#[no_mangle]
pub extern "C" fn ta_runtime_default(runtime_out: *mut *mut ta_runtime) -> ta_status {
    guard("ta_runtime_default", std::ptr::null_mut(), || {
        need(runtime_out, "ta_runtime_default", "runtime_out")?;
        put(runtime_out, make_handle(Runtime::global().clone(), "ta_runtime_default")?);
        Ok(())
    })
}

/// Number of worker threads of a runtime.
#[no_mangle]
pub extern "C" fn ta_runtime_threads(runtime: *const ta_runtime, threads_out: *mut usize) -> ta_status {
    guard("ta_runtime_threads", std::ptr::null_mut(), || {
        need(threads_out, "ta_runtime_threads", "threads_out")?;
        put(threads_out, arg(runtime, "ta_runtime_threads", "runtime")?.threads());
        Ok(())
    })
}

/// Let small library operations that are ready when they are submitted run
/// on the calling thread (`enable` != 0, the default), or send every
/// operation to the workers (`enable` 0). Handing a task to a worker costs
/// more than such an operation's kernel: fill, scale, axpy, copy, conj, dot,
/// norm2 and a sum over all axes of at most 256 elements per operand, and a
/// gemm of at most 64 elements per operand (8x8). It runs in place only
/// when no earlier access to its tensors is unfinished and none of them is
/// poisoned, never when `opts.callback` is set (callbacks run on workers),
/// and never while a runtime of the process records a trace or tracks
/// pending work (`ta_runtime_trace_start`, `ta_runtime_track`), which then
/// see every operation as a task. It has then completed when
/// the call returns, with the same result and notifications (its event, its
/// completion queue entry); it counts in `ta_stats.submitted` and
/// `completed` (and `failed`), never in `ta_stats.pending`, `steals` or a
/// worker's `busy_ns`. The flag `TA_SUBMIT_DEFER` asks for the workers for
/// one submission. The kernels that run in place never block and call no
/// user code.
#[no_mangle]
pub extern "C" fn ta_runtime_set_small_in_place(runtime: *const ta_runtime, enable: i32) -> ta_status {
    guard("ta_runtime_set_small_in_place", std::ptr::null_mut(), || {
        arg(runtime, "ta_runtime_set_small_in_place", "runtime")?.set_small_in_place(enable != 0);
        Ok(())
    })
}

/// Whether small operations may run on the calling thread: 1 or 0 in
/// `*enabled_out` (see `ta_runtime_set_small_in_place`).
#[no_mangle]
pub extern "C" fn ta_runtime_small_in_place(runtime: *const ta_runtime, enabled_out: *mut i32) -> ta_status {
    guard("ta_runtime_small_in_place", std::ptr::null_mut(), || {
        need(enabled_out, "ta_runtime_small_in_place", "enabled_out")?;
        put(enabled_out, arg(runtime, "ta_runtime_small_in_place", "runtime")?.small_in_place() as i32);
        Ok(())
    })
}

/// Stop accepting work and drain (`TA_SHUTDOWN_DRAIN`: run everything
/// submitted) or cancel (`TA_SHUTDOWN_CANCEL`: complete everything not yet
/// started with `TA_STATUS_CANCELLED`, poisoning its outputs). Blocks until
/// every submitted operation has completed and fired its notifications; every
/// callback fires exactly once. Later submissions fail with
/// `TA_STATUS_SHUTDOWN`, except, while draining, those made by the runtime's
/// own running kernels and callbacks (follow-up work of the work being drained). Fails with `TA_STATUS_WOULD_DEADLOCK` when called
/// from one of the runtime's own workers. Shutting down a runtime that is
/// already shut down returns `TA_STATUS_OK` at once.
#[no_mangle]
pub extern "C" fn ta_runtime_shutdown(
    runtime: *const ta_runtime,
    mode: ta_shutdown,
    error: *mut *mut ta_error,
) -> ta_status {
    guard("ta_runtime_shutdown", error, || {
        let rt = arg(runtime, "ta_runtime_shutdown", "runtime")?;
        let mode = match mode {
            TA_SHUTDOWN_DRAIN => ShutdownMode::Drain,
            TA_SHUTDOWN_CANCEL => ShutdownMode::Cancel,
            m => {
                return Err(Error::new(
                    Status::InvalidArgument,
                    "ta_runtime_shutdown",
                    format!("unknown shutdown mode {m}"),
                ))
            }
        };
        rt.shutdown(mode)
    })
}

/// Drain and stop a runtime made by `ta_runtime_new`, then free its handle.
/// Blocks until submitted work is done and the runtime's worker threads have
/// exited (their thread-local destructors included), so that the program may
/// then fork or unload the library. For a handle from
/// `ta_runtime_default`, only the handle is freed. NULL is a no-op. Called
/// from one of the runtime's own workers (a kernel or callback), it frees
/// nothing and returns `TA_STATUS_WOULD_DEADLOCK`.
#[no_mangle]
pub extern "C" fn ta_runtime_free(runtime: *mut ta_runtime) -> ta_status {
    if runtime.is_null() {
        return super::TA_STATUS_OK;
    }
    let status = guard("ta_runtime_free", std::ptr::null_mut(), || {
        let rt = arg(runtime, "ta_runtime_free", "runtime")?;
        if !rt.is_global() {
            rt.shutdown(ShutdownMode::Drain)?;
        }
        Ok(())
    });
    match status {
        super::TA_STATUS_OK => super::free_handle(runtime),
        super::TA_STATUS_STALE_HANDLE => super::TA_STATUS_DOUBLE_FREE,
        s => s,
    }
}

/// Wait until every operation submitted to the runtime so far (and any they
/// submit) has completed, without stopping it: the counterpart of
/// `starpu_task_wait_for_all`. `timeout_ns` < 0 waits forever; returns
/// `TA_STATUS_TIMEOUT` if work remains, or `TA_STATUS_WOULD_DEADLOCK` when
/// called from one of the runtime's own workers. Once it returns
/// `TA_STATUS_OK`, the counters (`ta_runtime_stats`,
/// `ta_runtime_worker_busy_ns`) include all the work it waited for, and stay
/// put until more is submitted.
#[no_mangle]
pub extern "C" fn ta_runtime_wait_idle(
    runtime: *const ta_runtime,
    timeout_ns: i64,
    error: *mut *mut ta_error,
) -> ta_status {
    guard("ta_runtime_wait_idle", error, || {
        arg(runtime, "ta_runtime_wait_idle", "runtime")?.wait_idle(super::args::timeout_arg(timeout_ns))
    })
}
