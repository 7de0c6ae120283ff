"""Observability of the default runtime: traces, pending-work dumps and counters.

``trace_start``/``trace_stop`` (or the ``trace`` context manager) record what the
runtime runs as Chrome trace-event JSON (chrome://tracing, ui.perfetto.dev);
``track`` and ``dump`` report the operations still unfinished and what each waits
for; ``stats`` reads the runtime's counters.
"""
import contextlib
import dataclasses
import os

from ._ffi import ffi, lib
from . import errors

__all__ = ["Stats", "trace_start", "trace_stop", "trace", "track", "dump", "stats"]


@contextlib.contextmanager
def _runtime():
    rt = ffi.new("ta_runtime **")
    errors.check(lib.ta_runtime_default(rt))
    try:
        yield rt[0]
    finally:
        lib.ta_runtime_free(rt[0])


def trace_start(capacity: int = 0) -> None:
    """Start recording a trace of every operation the default runtime runs from now on.

    For each operation the trace keeps its worker, submission, ready, start and end
    times, its name, the tensors it accesses and how, the operations it waited for and
    its outcome. ``capacity`` is how many operations it keeps (0: the library's default,
    262144); when full, the oldest are dropped (their number is in the trace's
    ``otherData.dropped``). A recording in progress is discarded and restarted.
    Operations submitted before the start are not recorded. ``trace_stop`` writes it.
    """
    if capacity < 0:
        raise ValueError("capacity must be >= 0")
    opts = ffi.new("ta_trace_options *")
    opts.struct_size = ffi.sizeof("ta_trace_options")
    opts.flags = 0
    opts.capacity = int(capacity)
    errp = ffi.new("ta_error **")
    with _runtime() as rt:
        errors.check(lib.ta_runtime_trace_start(rt, opts, errp), errp)


def trace_stop(path) -> None:
    """Stop recording and write the trace to ``path`` (created or replaced) as Chrome
    trace-event JSON; ``path=None`` discards it. Operations still running are not in it.

    Raises InvalidArgumentError if no recording is in progress, InternalError (with the
    system's reason) if the file cannot be written.
    """
    cpath = ffi.NULL if path is None else ffi.new("char[]", os.fsencode(path))
    errp = ffi.new("ta_error **")
    with _runtime() as rt:
        errors.check(lib.ta_runtime_trace_stop(rt, cpath, errp), errp)


@contextlib.contextmanager
def trace(path, capacity: int = 0):
    """``with tensorasync.trace("run.json"):`` — record the operations the block runs.

    Starts a recording (``trace_start(capacity)``) and writes it to ``path`` when the
    block ends, also when it ends by an exception (``path=None`` discards it).
    Operations still running at the end are not in the trace: wait for the work the
    trace should show (``wait_all()``) inside the block.
    """
    trace_start(capacity)
    try:
        yield
    finally:
        trace_stop(path)


def track(enable: bool = True) -> None:
    """Turn tracking of pending work on (or off, ``enable=False``) for the default runtime.

    While on, every operation submitted is registered until it completes, so that
    ``dump`` can name it (about a microsecond per operation; off, nothing). Operations
    submitted while it was off are counted but not listed.
    """
    with _runtime() as rt:
        errors.check(lib.ta_runtime_track(rt, 1 if enable else 0))


_FORMATS = {"text": lib.TA_DUMP_TEXT, "dot": lib.TA_DUMP_DOT}


def dump(format: str = "text") -> str:
    """A report of the default runtime's unfinished operations, as a string.

    ``format="text"``: per operation its number and name; RUNNING, READY (queued for a
    worker) or WAITING, with how long; the tensors it accesses and how; each earlier
    unfinished operation it waits for and on which tensor; and which operations wait
    for it. ``format="dot"``: the same graph in Graphviz DOT (``digraph ...``). Only
    operations submitted while ``track()`` was on are listed. Never blocks on running
    operations.
    """
    try:
        fmt = _FORMATS[format]
    except KeyError:
        raise ValueError(f"format must be 'text' or 'dot', not {format!r}") from None
    cap = 4096
    n = ffi.new("size_t *")
    with _runtime() as rt:
        while True:
            buf = ffi.new("char[]", cap)
            errp = ffi.new("ta_error **")
            st = lib.ta_runtime_dump_string(rt, fmt, buf, cap, n, errp)
            if st == lib.TA_STATUS_BUFFER_TOO_SMALL:
                if errp[0] != ffi.NULL:
                    lib.ta_error_free(errp[0])
                # The report may grow between the calls: leave some room.
                cap = max(cap * 2, n[0] + n[0] // 4 + 256)
                continue
            errors.check(st, errp)
            return ffi.unpack(buf, n[0]).decode("utf-8", "replace")


@dataclasses.dataclass(frozen=True)
class Stats:
    """Counters of the default runtime (``stats()``); counts are since it was created.

    Operations are the submissions that were accepted: library operations, kernels,
    external operations (Python kernels) and host accesses (mappings such as
    ``t.read()``, ``np.asarray(t)``); waits and readiness events are not operations.

    Attributes:
        threads: number of worker threads.
        tasks_submitted: operations submitted.
        tasks_completed: operations completed, whatever their status
            (``tasks_submitted - tasks_completed`` are pending).
        tasks_failed: operations that completed with an error other than a cancellation:
            a failing kernel, or an input poisoned by an earlier failure.
        tasks_cancelled: operations cancelled before they ran (a cancelling shutdown).
        steals: operations a worker took from the shared ready queue (the others ran
            inline, right after the operation that made them ready).
        queue_depth: operations ready and waiting in the shared ready queue now.
        pending: operations submitted and not yet completed, now.
        peak_pending: the largest number of pending operations seen (sampled at every
            1024th submission of each submitting thread and at every ``stats()`` call).
        busy_ns: sum over the workers of the time they spent running operations, in
            nanoseconds.
    """
    threads: int
    tasks_submitted: int
    tasks_completed: int
    tasks_failed: int
    tasks_cancelled: int
    steals: int
    queue_depth: int
    pending: int
    peak_pending: int
    busy_ns: int


def stats() -> Stats:
    """The default runtime's counters (see ``Stats``). Does not stop or slow the runtime."""
    s = ffi.new("ta_stats *")
    s.struct_size = ffi.sizeof("ta_stats")
    with _runtime() as rt:
        errors.check(lib.ta_runtime_stats(rt, s))
    return Stats(**{f.name: int(getattr(s, f.name)) for f in dataclasses.fields(Stats)})
