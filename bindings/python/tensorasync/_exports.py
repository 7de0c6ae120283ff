"""The host exports this package has handed out and not yet released.

An export (``np.asarray(t)``, ``t.read()``/``write()``/``update()`` and their async
forms) holds an enrolled access until it is released: later writers of the tensor, and
every wait for "everything enrolled on it", wait for it. A blocking wait with no timeout
that waits for an export the waiting thread itself holds could never return; the
package's waits look here first and raise DeadlockError instead (SPEC §2.1: a blocking
wait that cannot finish fails with a clear status).

Each export is recorded with the thread (and asyncio task) that made it, its mode, its
tensor and whether a write overlapping it was submitted after it. The tensor module
decides which exports a wait depends on (``_tensor._depends``, reached here as
``depends``). DLPack exports are not
recorded: their consumer releases them.
"""
import asyncio
import itertools
import threading

from ._ffi import lib
from . import errors

__all__ = ["Token", "record", "forget", "own", "next_seq", "deadlock_error", "current_task", "live", "depends",
           "check_acquire"]

#: id(record) -> record, for every live export. Single dict operations are atomic (the
#: GIL, or the dict's own lock in a free-threaded build): no lock is needed.
live = {}

#: Which export a wait on some tensors depends on, and the check a new access makes:
#: ``_tensor._depends`` and ``_tensor._check_acquire``, set when that module loads. They
#: need the geometry of tensors, which lives above this module; the event and DLPack
#: modules, which sit below the tensor module, reach them here.
depends = None
check_acquire = None
_seq = itertools.count(1)


class Token:
    """Identity of one tensor value or one block array: the root of a queue key."""

    __slots__ = ("__weakref__",)


class Record:
    """One live export."""

    __slots__ = ("seq", "thread", "task", "root", "tensor", "view", "mode", "what", "region", "written")

    def __init__(self, root, tensor, view, mode, what):
        self.seq = next(_seq)
        self.thread = threading.get_ident()
        self.task = current_task()
        self.root = root          # (Token, sub): the queue key without the element range
        self.tensor = tensor      # the exported tensor (kept until the export is released)
        self.view = view          # the export's resolved ta_view (valid while it lives)
        self.mode = mode
        self.what = what          # how it was made, for messages: "np.asarray()", "read()", ...
        self.region = None        # (Token, sub, lo, hi), computed when first needed
        self.written = False      # a write overlapping it was submitted after it

    def describe(self):
        try:
            t = repr(self.tensor)
        except Exception:
            t = "a tensor"
        return f"the {self.what} export of {t}"


def current_task():
    """The running asyncio task of this thread, or None."""
    loop = asyncio._get_running_loop()
    if loop is None:
        return None
    return asyncio.current_task(loop)


def next_seq() -> int:
    """A number larger than that of every export recorded so far."""
    return next(_seq)


def record(root, tensor, view, mode, what) -> Record:
    """Record a live export; ``forget`` it when it is released."""
    rec = Record(root, tensor, view, mode, what)
    live[id(rec)] = rec
    return rec


def forget(rec) -> None:
    live.pop(id(rec), None)


def snapshot():
    """The live exports now."""
    return list(live.values())


def own(task_only=False, before=None):
    """The live exports of the calling thread (of its running asyncio task with
    ``task_only``), older than sequence number ``before`` if given, oldest first."""
    if not live:
        return []
    me = threading.get_ident()
    task = current_task() if task_only else None
    out = [r for r in snapshot()
           if r.thread == me and (not task_only or r.task is task) and (before is None or r.seq < before)]
    out.sort(key=lambda r: r.seq)
    return out


def deadlock_error(rec, waiting) -> errors.DeadlockError:
    """The DeadlockError for ``waiting`` (a description of the call), which would wait for
    the export ``rec`` that the calling thread (or asyncio task) holds."""
    holder = "this asyncio task" if rec.task is not None and rec.task is current_task() else "this thread"
    msg = (f"{waiting} would never return: it waits for {rec.describe()}, which {holder} holds; "
           f"release the export first (drop the array, leave the with block) or pass a timeout")
    st = lib.TA_STATUS_WOULD_DEADLOCK
    return errors.DeadlockError(st, st, msg, "")
