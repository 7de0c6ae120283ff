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
