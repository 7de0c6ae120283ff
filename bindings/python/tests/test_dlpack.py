"""NumPy and DLPack export: never a pending write, later writers wait for the export."""
import gc

import numpy as np
import pytest

import tensorasync as ta

NP_VERSION = tuple(int(x) for x in np.__version__.split(".")[:2])


def test_asarray_waits_for_the_pending_write(native, gate):
    t = ta.zeros(5)
    ta.submit_native(native.gate_kernel, (t, "update"), userdata=gate.address)
    t.fill(4.0)
    import threading
    threading.Timer(0.05, gate.open).start()
    np.testing.assert_array_equal(np.asarray(t), np.full(5, 4.0))


def test_asarray_every_dtype():
    from test_tensors import ALL, sample
    for dt in ALL:
        a = sample((3, 2), dt)
        np.testing.assert_array_equal(np.asarray(ta.asarray(a)[::-1]), a[::-1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128, np.int8, np.uint64])
def test_from_dlpack_matches(dtype):
    from test_tensors import sample
    a = sample((4, 6), dtype)
    t = ta.asarray(a)
    for view, ref in ((t, a), (t[::2, ::-1], a[::2, ::-1]), (t.T, a.T)):
        x = np.from_dlpack(view)
        np.testing.assert_array_equal(x, ref)
        assert not x.flags.writeable  # a read export
        assert x.strides == ref.strides


def test_conj_view_exports_the_conjugated_values():
    a = np.array([1 + 2j, 3 - 4j])
    np.testing.assert_array_equal(np.from_dlpack(ta.asarray(a).conj()), a.conj())


def test_dlpack_device_and_arguments():
    t = ta.zeros(3)
    assert t.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError):
        t.__dlpack__(stream=5)
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0))
    cap = t.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(cap)
    cap = t.__dlpack__()
    assert '"dltensor"' in repr(cap)


def test_export_then_drop_lets_a_writer_run(native):
    t = ta.asarray(np.arange(4.0))
    x = np.from_dlpack(t)
    ev = t.fill(9.0)  # queued behind the export
    assert ev.wait(timeout=0.05) is False
    np.testing.assert_array_equal(x, np.arange(4.0))  # the export never sees the write
    del x
    gc.collect()
    assert ev.wait()
    np.testing.assert_array_equal(np.asarray(t), np.full(4, 9.0))


def test_consume_then_drop():
    t = ta.asarray(np.arange(3.0))
    cap = t.__dlpack__(max_version=(1, 0)) if NP_VERSION >= (2, 1) else t.__dlpack__()

    class Holder:
        def __dlpack__(self, **kw):
            return cap

        def __dlpack_device__(self):
            return (1, 0)
    x = np.from_dlpack(Holder())
    assert "used_dltensor" in repr(cap)
    del cap, Holder
    np.testing.assert_array_equal(x, np.arange(3.0))
    ev = t.fill(1.0)
    del x
    gc.collect()
    assert ev.wait()


@pytest.mark.parametrize("versioned", [True, False])
def test_capsule_never_consumed_releases_the_access(versioned):
    t = ta.asarray(np.arange(3.0))
    cap = t.__dlpack__(max_version=(1, 0) if versioned else None)
    ev = t.fill(2.0)
    assert ev.wait(timeout=0.05) is False
    del cap  # the capsule destructor calls the deleter
    gc.collect()
    assert ev.wait()
    np.testing.assert_array_equal(np.asarray(t), np.full(3, 2.0))


def test_exported_array_outlives_every_handle():
    t = ta.asarray(np.arange(6.0).reshape(2, 3))
    x = np.from_dlpack(t[1])
    del t
    gc.collect()
    np.testing.assert_array_equal(x, [3.0, 4.0, 5.0])


def test_writer_submitted_while_an_export_lives_waits_then_runs(native):
    t = ta.asarray(np.zeros(4))
    x = np.asarray(t)
    one = np.array(1.0)
    ev = ta.submit_native(native.add_kernel, (t, "update"), userdata=one.ctypes.data)
    assert ev.wait(timeout=0.05) is False
    np.testing.assert_array_equal(x, np.zeros(4))
    del x
    gc.collect()
    assert ev.wait()
    np.testing.assert_array_equal(np.asarray(t), np.ones(4))


def test_poisoned_tensor_raises_on_export(native):
    t = ta.asarray(np.arange(4.0))
    ta.submit_native(native.fail_kernel, (t, "update"), name="failing_kernel")
    with pytest.raises(ta.KernelError) as ei:
        np.from_dlpack(t)
    assert ei.value.code == 7 and ei.value.origin == "failing_kernel"
    with pytest.raises(ta.KernelError):
        t.__dlpack__()


def test_read_write_update_context_managers(native):
    t = ta.zeros((2, 3))
    with t.write() as a:
        assert a.flags.writeable and a.shape == (2, 3)
        a[...] = np.arange(6.0).reshape(2, 3)
    with t.read() as a:
        assert not a.flags.writeable
        np.testing.assert_array_equal(a, np.arange(6.0).reshape(2, 3))
        ev = t.scale(2.0)  # waits for the read mapping
        assert ev.wait(timeout=0.05) is False
        np.testing.assert_array_equal(a, np.arange(6.0).reshape(2, 3))
    assert ev.wait()
    with t.update() as a:
        a += 1
    np.testing.assert_array_equal(np.asarray(t), np.arange(6.0).reshape(2, 3) * 2 + 1)


def test_read_mapping_of_a_poisoned_tensor_raises_and_write_cleans(native):
    t = ta.zeros(2)
    ta.submit_native(native.fail_kernel, (t, "update"))
    with pytest.raises(ta.KernelError):
        with t.read():
            pass
    with t.write() as a:
        a[:] = 5.0
    assert t.wait()
    np.testing.assert_array_equal(np.asarray(t), [5.0, 5.0])


@pytest.mark.skipif(NP_VERSION < (2, 1), reason="NumPy 2.0 passes no copy argument")
def test_from_dlpack_copy_is_a_private_copy():
    a = np.arange(4.0)
    t = ta.asarray(a)
    x = np.from_dlpack(t, copy=True)
    np.testing.assert_array_equal(x, a)
    ev = t.fill(0.0)  # does not wait for the copy's consumer
    assert ev.wait()
    np.testing.assert_array_equal(x, a)
    cap = t.__dlpack__(max_version=(1, 0), copy=True)
    from tensorasync._dlpack import _PyCapsule_GetPointer
    m = ta._FFI.cast("ta_dl_managed_tensor_versioned *", _PyCapsule_GetPointer(id(cap), b"dltensor_versioned"))
    assert m.flags & ta._LIB.TA_DL_FLAG_IS_COPIED and not m.flags & ta._LIB.TA_DL_FLAG_READ_ONLY
    if NP_VERSION >= (2, 3):  # NumPy imports writable versioned capsules writable from 2.2.5 on
        assert x.flags.writeable


def test_from_dlpack_import_is_zero_copy():
    a = np.arange(6.0)
    t = ta.from_dlpack(a)  # NumPy arrays are DLPack producers
    # NumPy before 2.2.5 imports every capsule read-only; the tensor follows that.
    assert t.read_only == (not np.from_dlpack(a).flags.writeable)
    if t.read_only:
        a[:] *= 3
    else:
        t.scale(3.0).wait()
    np.testing.assert_array_equal(np.asarray(t), np.arange(6.0) * 3)
    np.testing.assert_array_equal(a, np.arange(6.0) * 3)
    b = ta.from_dlpack(ta.asarray(np.ones(2)))  # our own export: read-only
    assert b.read_only
    np.testing.assert_array_equal(np.asarray(b), [1.0, 1.0])


def test_async_host_access_does_not_block_the_loop(native, gate):
    import asyncio
    t = ta.zeros(3)
    ta.submit_native(native.gate_kernel, (t, "update"), userdata=gate.address)
    t.fill(4.0)

    async def main():
        ticks = 0

        async def reader():
            async with t.read_async() as a:
                assert not a.flags.writeable
                return a.tolist()
        task = asyncio.ensure_future(reader())
        for _ in range(5):
            await asyncio.sleep(0.001)
            ticks += 1  # the loop runs while the read waits for the writers
        assert not task.done()
        gate.open()
        assert await task == [4.0, 4.0, 4.0]
        async with t.update_async() as a:
            a += 1
        assert ticks == 5
    asyncio.run(main())
    np.testing.assert_array_equal(np.asarray(t), [5.0, 5.0, 5.0])


def test_cancelled_async_access_releases_its_place(native, gate):
    import asyncio
    t = ta.zeros(2)
    ta.submit_native(native.gate_kernel, (t, "update"), userdata=gate.address)

    async def main():
        async def writer():
            async with t.write_async() as a:
                a[:] = 1.0
        task = asyncio.ensure_future(writer())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gate.open()
        await t.fill(7.0)  # not stuck behind the cancelled access
    asyncio.run(main())
    np.testing.assert_array_equal(np.asarray(t), [7.0, 7.0])


def test_async_read_of_a_poisoned_tensor_raises(native):
    import asyncio
    t = ta.zeros(2)
    ta.submit_native(native.fail_kernel, (t, "update"), name="failing_kernel")

    async def main():
        with pytest.raises(ta.KernelError) as ei:
            async with t.read_async():
                pass
        assert ei.value.code == 7
    asyncio.run(main())


@pytest.mark.parametrize("shape,order", [((0,), "C"), ((0, 3), "C"), ((3, 0), "F")])
def test_empty_tensors_export_and_import(shape, order):
    a = np.zeros(shape, order=order)
    t = ta.from_dlpack(a)
    assert t.shape == shape
    for t2 in (t, ta.asarray(a)):
        r = np.from_dlpack(t2)
        assert r.shape == shape and r.dtype == np.float64
        assert np.asarray(t2).shape == shape
