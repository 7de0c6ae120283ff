"""User kernels: Python callables on package threads, compiled functions on workers."""
import threading

import numpy as np
import pytest

import tensorasync as ta



def test_native_kernel_runs_on_a_worker(native):
    a = np.arange(6.0).reshape(2, 3)
    t = ta.asarray(a)
    two = np.array(2.0)
    ev = ta.submit_native(native.add_kernel, (t[:, ::-2], "update"), userdata=two.ctypes.data, name="add")
    assert ev.wait()
    ref = a.copy()
    ref[:, ::-2] += 2.0
    np.testing.assert_array_equal(np.asarray(t), ref)


def test_native_kernel_refuses_python_objects():
    with pytest.raises(TypeError):
        ta.submit_native(lambda *v: 0, (ta.zeros(1), "update"))


def test_python_kernel_gets_numpy_views_and_runs_on_a_package_thread():
    x = np.arange(12.0).reshape(3, 4)
    tx, ty = ta.asarray(x), ta.zeros((4, 3))
    seen = {}

    def kernel(src, dst):
        seen["thread"] = threading.current_thread().name
        seen["writeable"] = (src.flags.writeable, dst.flags.writeable)
        dst[...] = src.T * 2

    ev = ta.submit(kernel, (tx, "read"), (ty, "write"))
    assert ev.wait()
    np.testing.assert_array_equal(np.asarray(ty), x.T * 2)
    assert seen["thread"].startswith("tensorasync-kernel")
    assert seen["writeable"] == (False, True)


def test_python_kernel_is_ordered_with_library_operations():
    t = ta.zeros(5)
    t.fill(1.0)
    ta.submit(lambda a: a.__imul__(3.0), (t, "update"))
    t.scale(2.0)
    ta.submit(lambda a, b: np.add(a, 1.0, out=b), (ta.asarray(np.ones(3)), "r"), (t[::2], "w"))
    np.testing.assert_array_equal(np.asarray(t), [2.0, 6.0, 2.0, 6.0, 2.0])


def test_python_kernel_exception_poisons_its_outputs():
    t = ta.zeros(3)

    def bad(a):
        raise ValueError("no thanks")
    ev = ta.submit(bad, (t, "update"), name="bad_kernel")
    with pytest.raises(ta.KernelError) as ei:
        ev.wait()
    assert "ValueError: no thanks" in ei.value.message and ei.value.origin == "bad_kernel"
    with pytest.raises(ta.KernelError):
        np.asarray(t)


def test_python_kernel_on_a_poisoned_input_does_not_run(native):
    t = ta.zeros(2)
    ta.submit_native(native.fail_kernel, (t, "update"))
    ran = []
    out = ta.zeros(2)
    ev = ta.submit(lambda a, b: ran.append(1), (t, "read"), (out, "write"))
    with pytest.raises(ta.KernelError):
        ev.wait()
    assert ran == []


def test_many_python_kernels_every_dtype():
    from test_tensors import ALL, sample
    for dt in ALL:
        a = sample((4,), dt)
        src, dst = ta.asarray(a), ta.zeros(4, dt)
        ta.submit(np.copyto, (dst, "write"), (src, "read"))
        np.testing.assert_array_equal(np.asarray(dst), a)
