"""Lifetime and threads: del never blocks, GC from any thread, concurrent submitters, exit."""
import gc
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import tensorasync as ta


def test_del_never_blocks_and_pending_work_keeps_the_data(native, gate):
    a = np.zeros(4)
    t = ta.wrap(a)
    ev = ta.submit_native(native.gate_kernel, (t, "update"), userdata=gate.address)
    one = np.array(1.0)
    ev2 = ta.submit_native(native.add_kernel, (t, "update"), userdata=one.ctypes.data)
    del t  # returns while two operations are pending on the wrapped array
    gc.collect()
    assert not ev.done()
    gate.open()
    assert ev2.wait()
    np.testing.assert_array_equal(a, np.ones(4))


def test_wrapped_array_kept_alive_until_the_last_access(native, gate):
    import weakref
    a = np.zeros(3)
    ref = weakref.ref(a)
    t = ta.wrap(a)
    ev = ta.submit_native(native.gate_kernel, (t, "update"), userdata=gate.address)
    del a, t
    gc.collect()
    assert ref() is not None  # the library still accesses it
    released = threading.Event()
    weakref.finalize(ref(), released.set)
    gate.open()
    ev.wait()
    # The release arrives through the dispatcher's completion queue, which drops the array.
    assert released.wait(60)
    assert ref() is None


def test_handles_collected_on_other_threads():
    tensors = [ta.zeros(8) for _ in range(200)]
    views = [t[::2] for t in tensors]
    for t in tensors:
        t.fill(1.0)

    def drop(items):
        items.clear()
        gc.collect()
    th = [threading.Thread(target=drop, args=(part,)) for part in (tensors, views)]
    for x in th:
        x.start()
    for x in th:
        x.join()
    assert ta.wait_all()


def test_many_python_threads_submit_at_once():
    n_threads, n_ops = 8, 200
    results = [None] * n_threads

    def worker(k):
        t = ta.zeros(16)
        for i in range(n_ops):
            t.axpy(1.0, ta.asarray(np.full(16, float(k))))
        results[k] = np.asarray(t)
    th = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
    for x in th:
        x.start()
    for x in th:
        x.join()
    for k in range(n_threads):
        np.testing.assert_array_equal(results[k], np.full(16, float(k * n_ops)))


def test_blocking_waits_release_the_gil(native, gate):
    # While this thread waits inside the library, another Python thread runs and opens the gate.
    t = ta.zeros(1)
    ev = ta.submit_native(native.gate_kernel, (t, "update"), userdata=gate.address)
    threading.Thread(target=gate.open).start()
    assert ev.wait()


def run_child(code, timeout=120):
    # The child imports the same package as this process (not a source tree in its cwd).
    import tempfile
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(ta.__file__)))
    env["PYTHONPATH"] = pkg_parent + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=tempfile.gettempdir())


def test_exit_with_pending_work_neither_hangs_nor_crashes(native):
    # A writer queued behind a gate that is never opened and an export that a module-level
    # array holds: at exit, work that cannot start is cancelled.
    lib_path = native._name
    r = run_child(f"""
        import ctypes, numpy as np, tensorasync as ta
        native = ctypes.CDLL({lib_path!r})
        flag = ctypes.c_int(0)
        t = ta.asarray(np.arange(4.0))
        u = ta.zeros(4)
        held = np.asarray(t)          # a read export held by a module-level array
        t.fill(1.0)                   # a writer queued behind it
        ta.submit_native(native.gate_kernel, (u, "update"), userdata=ctypes.addressof(flag))
        u.fill(2.0)                   # queued behind a kernel that never ends by itself
        import threading
        threading.Timer(1.0, lambda: setattr(flag, "value", 1)).start()
        print("submitted", flush=True)
        """)
    assert r.returncode == 0, r.stderr
    assert "submitted" in r.stdout


def test_exit_cancels_a_writer_behind_a_held_export():
    r = run_child("""
        import atexit
        def report():
            print("writer", ev.status, flush=True)
        atexit.register(report)   # registered first, so it runs last: after the package's shutdown
        import numpy as np, tensorasync as ta
        t = ta.asarray(np.arange(4.0))
        held = np.asarray(t)      # a read export never released before exit
        ev = t.fill(1.0)          # a writer queued behind it
        """)
    assert r.returncode == 0, r.stderr
    assert "writer TA_STATUS_CANCELLED" in r.stdout


def test_shutdown_refuses_later_work():
    r = run_child("""
        import tensorasync as ta
        t = ta.zeros(2)
        ta.shutdown()
        try:
            t.fill(1.0)
        except ta.ShutdownError as e:
            print("refused", e.status)
        """)
    assert r.returncode == 0, r.stderr
    assert "refused TA_STATUS_SHUTDOWN" in r.stdout


def test_exit_with_python_kernels_pending():
    r = run_child("""
        import atexit
        def report():
            print("kernel", ev.status, "ran", ran, flush=True)
        atexit.register(report)
        import numpy as np, tensorasync as ta
        t = ta.asarray(np.arange(4.0))
        held = np.asarray(t)                       # holds a read access until exit
        ran = []
        ev = ta.submit(lambda a: ran.append(1), (t, "update"))  # cannot start before exit
        done = ta.submit(lambda a: None, (ta.zeros(2), "update"))
        done.wait()                                # Python kernels do run meanwhile
        """)
    assert r.returncode == 0, r.stderr
    assert "kernel TA_STATUS_CANCELLED ran []" in r.stdout


def test_copy_copy_gives_a_handle_of_its_own():
    import copy
    a = np.arange(4.0)
    t = ta.asarray(a)
    c = copy.copy(t)
    del c
    gc.collect()
    np.testing.assert_array_equal(np.asarray(t), a)  # the original's handle was not freed
    # A whole tensor's copy is a new value (ta_tensor_clone, SPEC §2.3).
    c = copy.copy(t)
    assert not c.is_view
    c.fill(7.0)
    np.testing.assert_array_equal(np.asarray(t), a)
    np.testing.assert_array_equal(np.asarray(c), np.full(4, 7.0))
    f = ta.asarray(np.arange(6.0).reshape(2, 3), order="F")
    np.testing.assert_array_equal(np.asarray(copy.copy(f)), np.arange(6.0).reshape(2, 3))
    # A view's copy is the same view: it writes through to the parent.
    v = t[1:3]
    vc = copy.copy(v)
    assert vc.is_view and vc.shape == (2,)
    del v
    gc.collect()
    vc.fill(-1.0)
    np.testing.assert_array_equal(np.asarray(t), [0.0, -1.0, -1.0, 3.0])
    # A deep copy is always a new value, of a view too.
    d = copy.deepcopy(t[::2])
    assert not d.is_view
    d.fill(5.0)
    np.testing.assert_array_equal(np.asarray(t), [0.0, -1.0, -1.0, 3.0])
    np.testing.assert_array_equal(np.asarray(d), [5.0, 5.0])
    cj = ta.asarray(np.array([1 + 2j]))
    np.testing.assert_array_equal(np.asarray(copy.deepcopy(cj.conj())), [1 - 2j])


def test_events_and_block_arrays_copy_and_pickle():
    import copy
    import pickle
    ev = ta.zeros(3).fill(1.0)
    assert copy.copy(ev) is ev and copy.deepcopy(ev) is ev  # immutable
    e2 = copy.copy(ev)
    del e2
    gc.collect()
    assert ev.wait() and ev.status == "TA_STATUS_OK"
    with pytest.raises(TypeError, match="cannot pickle a tensorasync.Event"):
        pickle.dumps(ev)
    with pytest.raises(TypeError, match=r"cannot pickle a tensorasync.Tensor .*pickle np.asarray\(t\)"):
        pickle.dumps(ta.zeros(2))
    B = ta.BlockArray.tiled((4, 4), (2, 2))
    for f in (copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match="a tensorasync.BlockArray cannot be copied"):
            f(B)
    with pytest.raises(TypeError, match="cannot pickle a tensorasync.BlockArray"):
        pickle.dumps(B)
    assert B.all().shape == (4, 4)
    # A container of tensors deep-copies into new values.
    box = {"t": ta.asarray(np.arange(3.0))}
    box2 = copy.deepcopy(box)
    box2["t"].fill(0.0)
    np.testing.assert_array_equal(np.asarray(box["t"]), np.arange(3.0))


def test_failed_constructors_leave_no_error_in_del(monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    with pytest.raises(TypeError, match="create tensors with"):
        ta.Tensor()
    with pytest.raises(TypeError, match="create block arrays with"):
        ta.BlockArray()
    with pytest.raises(ta.Error):
        ta.BlockArray.tiled((4,), (0,))
    gc.collect()
    assert seen == []
