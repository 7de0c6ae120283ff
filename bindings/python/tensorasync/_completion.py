"""Completion delivery: events, the package's dispatcher thread, and one
completion queue per asyncio loop.

No Python code runs on a library worker thread. Completions are pushed by
the library into completion queues (``ta_event_notify``); the package reads
them on Python threads: its dispatcher thread (done callbacks, releases of
wrapped arrays, starts of Python kernels) or an asyncio loop's reader
callback (``await``).
"""
import asyncio
import itertools
import logging
import os
import select
import threading
import weakref

from ._ffi import ffi, lib
from . import errors
from . import _exports

__all__ = ["Event"]

_log = logging.getLogger("tensorasync")
_BATCH = 256


def _ns(timeout):
    if timeout is None:
        return -1
    return max(0, int(timeout * 1e9))


class _Dispatcher:
    """One Python thread reading one completion queue; runs an action per tag."""

    def __init__(self):
        cqp = ffi.new("ta_cq **")
        errp = ffi.new("ta_error **")
        errors.check(lib.ta_cq_new(cqp, errp), errp)
        self.cq = cqp[0]
        fd = ffi.new("int *")
        errors.check(lib.ta_cq_fd(self.cq, fd))
        self.fd = fd[0]
        self._wake_r, self._wake_w = os.pipe()
        self._actions = {}
        self._lock = threading.Lock()
        self._tags = itertools.count(1)
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="tensorasync-dispatcher", daemon=True)
        self._thread.start()

    def add(self, action):
        """Register ``action(status, error_or_None)``; returns the tag to notify with."""
        tag = next(self._tags)
        with self._lock:
            self._actions[tag] = action
        return tag

    def discard(self, tag):
        with self._lock:
            self._actions.pop(tag, None)

    def notify(self, event_handle, action):
        """Run ``action(status, error)`` on this thread when the event completes."""
        tag = self.add(action)
        st = lib.ta_event_notify(event_handle, self.cq, tag)
        if st:
            self.discard(tag)
            errors.check(st)

    def _run(self):
        buf = ffi.new("ta_completion[]", _BATCH)
        count = ffi.new("size_t *")
        fds = [self.fd, self._wake_r]
        while not self._stop:
            try:
                select.select(fds, [], [])
            except InterruptedError:
                continue
            except (OSError, ValueError):
                break
            while True:
                lib.ta_cq_poll(self.cq, buf, _BATCH, count)
                n = count[0]
                for i in range(n):
                    entry = buf[i]
                    tag, status, err = entry.tag, entry.status, entry.error
                    with self._lock:
                        action = self._actions.pop(tag, None)
                    exc = errors.from_handle(status, err) if status else None
                    if action is not None:
                        try:
                            action(status, exc)
                        except BaseException:  # a user callback failed: report, keep going
                            _log.exception("tensorasync: exception in a completion callback")
                if n < _BATCH:
                    break

    def stop(self, timeout=5.0):
        self._stop = True
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)


_dispatcher = None
_dispatcher_lock = threading.Lock()


def dispatcher() -> _Dispatcher:
    """The package's dispatcher (started on first use)."""
    global _dispatcher
    d = _dispatcher
    if d is None:
        with _dispatcher_lock:
            if _dispatcher is None:
                _dispatcher = _Dispatcher()
            d = _dispatcher
    return d


def stop_dispatcher():
    d = _dispatcher
    if d is not None:
        d.stop()


class _LoopWaiter:
    """The completion queue of one asyncio loop, read with ``loop.add_reader`` on its fd."""

    def __init__(self, loop):
        cqp = ffi.new("ta_cq **")
        errp = ffi.new("ta_error **")
        errors.check(lib.ta_cq_new(cqp, errp), errp)
        self.cq = cqp[0]
        fd = ffi.new("int *")
        errors.check(lib.ta_cq_fd(self.cq, fd))
        self.fd = fd[0]
        # A weak reference: the waiters table maps loops weakly, and a strong one here
        # would keep every loop (and its queue) alive for ever.
        self.loop = weakref.ref(loop)
        self.futures = {}
        self.tags = itertools.count(1)
        self.buf = ffi.new("ta_completion[]", _BATCH)
        self.count = ffi.new("size_t *")
        loop.add_reader(self.fd, self._drain)
        # The queue is freed once the loop is gone; pending entries then keep it alive in the library.
        weakref.finalize(loop, lib.ta_cq_free, self.cq)

    def wait(self, event_handle, keep):
        fut = self.loop().create_future()
        tag = next(self.tags)
        self.futures[tag] = (fut, keep)
        st = lib.ta_event_notify(event_handle, self.cq, tag)
        if st:
            del self.futures[tag]
            errors.check(st)
        return fut

    def _drain(self):
        while True:
            lib.ta_cq_poll(self.cq, self.buf, _BATCH, self.count)
            n = self.count[0]
            for i in range(n):
                entry = self.buf[i]
                tag, status, err = entry.tag, entry.status, entry.error
                exc = errors.from_handle(status, err) if status else None
                item = self.futures.pop(tag, None)
                if item is None:
                    continue
                fut = item[0]
                if fut.done():  # cancelled while waiting
                    continue
                if exc is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(exc)
            if n < _BATCH:
                break


_waiters = weakref.WeakKeyDictionary()


def loop_waiter(loop=None) -> _LoopWaiter:
    """The completion queue reader of the running asyncio loop."""
    if loop is None:
        loop = asyncio.get_running_loop()
    w = _waiters.get(loop)
    if w is None:
        w = _LoopWaiter(loop)
        _waiters[loop] = w
    return w


class Event:
    """The completion of one operation (or of everything enrolled on a tensor, see ``Tensor.ready``).

    ``done()`` polls, ``wait(timeout)`` blocks with the GIL released, ``add_done_callback(fn)``
    calls ``fn(event)`` on a Python thread, and ``await event`` suspends an asyncio task until
    completion. A failed operation raises its :class:`tensorasync.Error` from ``wait``,
    ``result`` and ``await``. An operation that writes a tensor waits for the live exports
    of it (``np.asarray(t)``, ``t.read()``, ...): waiting with no timeout for one that waits
    for an export held by the waiting thread (or, for ``await``, by the awaiting task)
    raises :class:`tensorasync.DeadlockError` instead of hanging.

    An event is immutable: ``copy.copy`` and ``copy.deepcopy`` give the event itself;
    pickling raises TypeError.
    """

    __slots__ = ("_h", "_keep", "_guard", "__weakref__")

    def __init__(self, handle, keep=None):
        self._h = handle
        self._keep = keep
        # (tensors, seq, what): the tensors the operation writes (for Tensor.ready, waits
        # for), set when exports were live at submission; exports older than seq count;
        # what names the event in messages.
        self._guard = None

    def __del__(self):
        h = getattr(self, "_h", None)
        if h is not None:
            self._h = None
            try:
                lib.ta_event_free(h)
            except Exception:
                pass

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce_ex__(self, protocol):
        raise TypeError("cannot pickle a tensorasync.Event (a handle to an operation of this process)")

    def _check_deadlock(self, waiting, task_only=False):
        """Raise DeadlockError if this pending event waits for a live export that the
        calling thread (asyncio task) holds."""
        guard = self._guard
        if guard is None or not _exports.live:
            return
        rec = _exports.depends(guard[0], task_only=task_only, before=guard[1])
        if rec is not None and self._poll() == lib.TA_STATUS_PENDING:
            raise _exports.deadlock_error(rec, f"{waiting} {guard[2]}")

    def _poll(self) -> int:
        if self._h is None:
            return 0
        return lib.ta_event_poll(self._h)

    def done(self) -> bool:
        """Whether the operation has completed (successfully or not). Never blocks."""
        return self._poll() != lib.TA_STATUS_PENDING

    def exception(self, timeout=None):
        """Wait (up to ``timeout`` seconds, None: forever) and return the operation's error, or None.

        Raises :class:`tensorasync.TimeoutError` if it is still running after ``timeout``.
        """
        if self._h is None:
            return None
        if timeout is None:
            self._check_deadlock("waiting for")
        st = lib.ta_event_wait(self._h, _ns(timeout))
        if st == lib.TA_STATUS_TIMEOUT:
            raise errors.from_handle(st, ffi.NULL)
        if st == 0:
            return None
        errp = ffi.new("ta_error **")
        lib.ta_event_error(self._h, errp)
        return errors.from_handle(st, errp[0])

    def wait(self, timeout=None) -> bool:
        """Wait up to ``timeout`` seconds (None: forever); True once completed, False on timeout.

        A failed operation raises its error. The GIL is released while waiting.
        """
        try:
            exc = self.exception(timeout)
        except errors.TimeoutError:
            return False
        if exc is not None:
            raise exc
        return True

    def result(self, timeout=None):
        """Wait and return None, raising the operation's error (or TimeoutError)."""
        exc = self.exception(timeout)
        if exc is not None:
            raise exc

    @property
    def status(self) -> str:
        """The status name now: ``"TA_STATUS_PENDING"`` while running, then the final status."""
        return ffi.string(lib.ta_status_name(self._poll())).decode()

    def add_done_callback(self, fn) -> None:
        """Call ``fn(event)`` once the operation completes.

        If it already has, ``fn`` runs now on this thread; otherwise on the package's
        dispatcher thread (a Python thread, never a library worker). Either way, exceptions
        raised by ``fn`` are logged to the ``tensorasync`` logger, not raised (as
        ``concurrent.futures.Future.add_done_callback`` does).
        """
        if self.done():
            try:
                fn(self)
            except Exception:
                _log.exception("tensorasync: exception in a completion callback")
            return
        dispatcher().notify(self._h, lambda status, exc, fn=fn, ev=self: fn(ev))

    def __await__(self):
        if self._h is None:
            return None
        st = self._poll()
        if st == lib.TA_STATUS_PENDING:
            self._check_deadlock("awaiting", task_only=True)
            fut = loop_waiter().wait(self._h, self)
            yield from fut.__await__()
            return None
        if st != 0:
            raise self.exception(0)
        return None

    def __repr__(self):
        return f"<tensorasync.Event {self.status}>"
