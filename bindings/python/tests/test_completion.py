"""Events, done callbacks and asyncio."""
import asyncio
import threading

import numpy as np
import pytest

import tensorasync as ta



def test_event_done_wait_status(native, gate):
    t = ta.zeros(4)
    ev = ta.submit_native(native.gate_kernel, (t, "update"), userdata=gate.address)
    assert not ev.done() and ev.status == "TA_STATUS_PENDING"
    assert ev.wait(timeout=0.01) is False
    gate.open()
    assert ev.wait() is True and ev.done() and ev.status == "TA_STATUS_OK"


def test_done_callback_runs_on_a_python_thread(native, gate):
    t = ta.zeros(4)
    ev = ta.submit_native(native.gate_kernel, (t, "update"), userdata=gate.address)
    seen = []
    done = threading.Event()

    def cb(e):
        seen.append((e is ev, threading.current_thread().name, e.status))
        done.set()
    ev.add_done_callback(cb)
    assert not seen
    gate.open()
    assert done.wait(30)
    assert seen == [(True, "tensorasync-dispatcher", "TA_STATUS_OK")]
    # Already complete: runs at once on this thread.
    ev.add_done_callback(lambda e: seen.append(threading.current_thread().name))
    assert seen[-1] == threading.current_thread().name


def test_ready_waits_for_everything_enrolled(native, gate):
    t = ta.zeros(3)
    ta.submit_native(native.gate_kernel, (t, "update"), userdata=gate.address)
    t.fill(2.0)
    r = t.ready()
    assert not r.done()
    gate.open()
    r.wait()
    assert r.done()
    np.testing.assert_array_equal(np.asarray(t), [2.0, 2.0, 2.0])


def test_ten_thousand_concurrent_awaits(native, gate):
    tensors = [ta.zeros(1) for _ in range(100)]
    for i, t in enumerate(tensors):
        ta.submit_native(native.gate_kernel, (t, "update"), userdata=gate.address)
        t.fill(float(i))

    async def one(t):
        await t
        return float(t)

    async def main():
        threads_before = threading.active_count()
        tasks = [asyncio.ensure_future(one(tensors[i % 100])) for i in range(10_000)]
        await asyncio.sleep(0)
        assert not any(task.done() for task in tasks)  # all 10^4 are waiting now
        assert threading.active_count() == threads_before  # and no thread per waiter
        gate.open()
        return await asyncio.gather(*tasks)
    out = asyncio.run(main())
    assert out == [float(i % 100) for i in range(10_000)]


def test_await_event_and_failure(native):
    t = ta.zeros(2)

    async def main():
        ev = t.fill(3.0)
        await ev
        bad = ta.submit_native(native.fail_kernel, (t, "update"))
        with pytest.raises(ta.KernelError):
            await bad
    asyncio.run(main())


def test_cancelling_a_waiting_coroutine(native, gate):
    t = ta.zeros(2)
    ev = ta.submit_native(native.gate_kernel, (t, "update"), userdata=gate.address)

    async def main():
        task = asyncio.ensure_future(_wait(ev))
        await asyncio.sleep(0.01)
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gate.open()
        await ev  # the operation itself is unaffected and completes
        # The late completion entry of the cancelled waiter is consumed without error.
        await t.fill(1.0)
    asyncio.run(main())
    np.testing.assert_array_equal(np.asarray(t), [1.0, 1.0])


async def _wait(ev):
    await ev


def test_asyncio_overlap_example_runs():
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "overlap_asyncio.py"
    spec = importlib.util.spec_from_file_location("overlap_asyncio", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    asyncio.run(mod.main(512, 128))  # asserts the factor against the input itself


def test_each_loop_has_its_queue_freed_with_the_loop():
    import gc
    import weakref
    from tensorasync import _completion

    async def main():
        t = ta.zeros(1)
        t.fill(1.0)
        await t
        _completion.loop_waiter()  # exists for this loop (made by the await, or now)
        assert asyncio.get_running_loop() in _completion._waiters
        return weakref.ref(asyncio.get_running_loop())
    refs = [asyncio.run(main()) for _ in range(3)]
    gc.collect()
    assert all(r() is None for r in refs)
    assert len(_completion._waiters) == 0


def test_done_callback_exceptions_are_logged_on_both_paths(native, gate, caplog):
    import logging
    calls = []

    def cb(e):
        calls.append(threading.current_thread().name)
        raise ValueError("from callback")

    t = ta.zeros(4)
    ev = ta.submit_native(native.gate_kernel, (t, "update"), userdata=gate.address)
    with caplog.at_level(logging.ERROR, logger="tensorasync"):
        ev.add_done_callback(cb)  # pending: runs on the dispatcher thread
        gate.open()
        ev.wait()
        for _ in range(3000):
            if calls:
                break
            threading.Event().wait(0.01)
        ev.add_done_callback(cb)  # finished: runs now on this thread, and does not raise
        for _ in range(3000):
            if len(caplog.records) >= 2:
                break
            threading.Event().wait(0.01)
    assert calls == ["tensorasync-dispatcher", threading.current_thread().name]
    logged = [r for r in caplog.records if r.name == "tensorasync"]
    assert len(logged) == 2
    for r in logged:
        assert "exception in a completion callback" in r.getMessage()
        assert r.exc_info[0] is ValueError and str(r.exc_info[1]) == "from callback"


def _in_thread(fn, timeout=30):
    """Run fn on a new thread (its exports are that thread's); fail if it hangs."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: B036 - reported below
            out["error"] = e
    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(timeout)
    assert not th.is_alive(), "the wait hung"
    if "error" in out:
        raise out["error"]
    return out.get("value")


def test_waiting_for_an_export_of_this_thread_raises_deadlock_error():
    def body():
        a = np.arange(4.0)
        t = ta.asarray(a)
        x = np.asarray(t)  # a read export: everything enrolled on t includes it
        with pytest.raises(ta.DeadlockError, match=r"t\.wait\(\) would never return: it waits for the "
                                                   r"np\.asarray\(\) export of tensorasync\.Tensor\(shape=\(4,\), "
                                                   r"dtype=float64\), which this thread holds") as ei:
            t.wait()
        assert ei.value.status == "TA_STATUS_WOULD_DEADLOCK"
        assert t.wait(0.01) is False  # with a timeout: the documented False
        with pytest.raises(ta.DeadlockError, match=r"wait_all\(\) would never return"):
            ta.wait_all()
        assert ta.wait_all(0.01) is False
        with pytest.raises(ta.DeadlockError, match=r"waiting for t\.ready\(\) would never return"):
            t.ready().wait()
        ev = t.fill(1.0)  # a writer: waits for x
        for wait in (ev.wait, ev.result, ev.exception):
            with pytest.raises(ta.DeadlockError, match="waiting for the operation's event would never return"):
                wait()
        assert ev.wait(0.01) is False
        with pytest.raises(ta.DeadlockError, match=r"np\.asarray\(\) would never return"):
            np.asarray(t)  # a reader after that writer
        with pytest.raises(ta.DeadlockError, match=r"__dlpack__\(\) would never return"):
            np.from_dlpack(t)
        with pytest.raises(ta.DeadlockError, match=r"t\.write\(\) would never return"):
            t.write().__enter__()
        np.testing.assert_array_equal(x, a)
        del x
        assert ev.wait() and t.wait() and ta.wait_all()
        np.testing.assert_array_equal(np.asarray(t), np.ones(4))
        with t.read() as r:
            with pytest.raises(ta.DeadlockError, match=r"the read\(\) export"):
                t.wait()
            np.testing.assert_array_equal(np.asarray(t), r)  # readers do not wait for readers
        with t.write() as w:
            w[...] = 2.0
            with pytest.raises(ta.DeadlockError, match=r"np\.asarray\(\) would never return: it waits for the write\(\)"):
                np.asarray(t)
        np.testing.assert_array_equal(np.asarray(t), np.full(4, 2.0))
    _in_thread(body)


def test_exports_of_other_elements_and_threads_do_not_count():
    def body():
        t = ta.asarray(np.arange(8.0))
        x = np.asarray(t[:4])
        with t[4:].write() as w:  # disjoint elements: granted
            w[...] = -1.0
        del x
        np.testing.assert_array_equal(np.asarray(t), [0.0, 1.0, 2.0, 3.0, -1.0, -1.0, -1.0, -1.0])
        x = np.asarray(t[:4])
        assert t[4:].wait()
        with pytest.raises(ta.DeadlockError):
            t[2:6].wait()
        del x
        B = ta.BlockArray.tiled((4, 4), (2, 2))
        y = np.asarray(B.block(0, 0))
        assert B.block(1, 1).fill(1.0).wait()
        assert B.block(0, 1).wait()
        with pytest.raises(ta.DeadlockError):
            B.all().wait()
        with pytest.raises(ta.DeadlockError):
            B.block(0, 0).fill(2.0).wait()
        del y
        np.testing.assert_array_equal(np.asarray(B.block(0, 0)), np.full((2, 2), 2.0))
    _in_thread(body)

    # An export held by another thread is waited for.
    t = ta.asarray(np.arange(3.0))
    held, release = threading.Event(), threading.Event()

    def holder():
        with t.read():
            held.set()
            release.wait(30)
    th = threading.Thread(target=holder)
    th.start()
    assert held.wait(30)
    threading.Timer(0.2, release.set).start()
    assert t.wait() and ta.wait_all()
    th.join()


def test_awaiting_an_export_of_this_task_raises_deadlock_error():
    async def main():
        t = ta.asarray(np.arange(3.0))
        x = np.asarray(t)
        with pytest.raises(ta.DeadlockError, match="awaiting t would never return: .* which this asyncio task holds"):
            await t
        ev = t.fill(1.0)
        with pytest.raises(ta.DeadlockError, match="awaiting the operation's event would never return"):
            await ev
        with pytest.raises(ta.DeadlockError, match=r"t\.update_async\(\) would never return"):
            async with t.update_async():
                pass
        del x
        assert (await t) is t
        # An export held by another task of the loop is awaited.
        held = asyncio.Event()

        async def holder():
            async with t.read_async():
                held.set()
                await asyncio.sleep(0.1)
        h = asyncio.create_task(holder())
        await held.wait()
        ev = t.fill(2.0)
        await ev
        assert (await t) is t
        await h
        np.testing.assert_array_equal(np.asarray(t), np.full(3, 2.0))
    asyncio.run(asyncio.wait_for(main(), 30))
