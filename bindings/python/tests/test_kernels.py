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


@pytest.mark.parametrize("ret,code", [(7, 7), (np.int64(3), 3), (np.uint8(200), 200), (2**32 - 1, 2**32 - 1),
                                      (-1, -1), (2**32, 2**32), (41, 41), (2**63 - 1, 2**63 - 1),
                                      (-2**63, -2**63), (2**63, 40)])
def test_python_kernel_return_value_is_the_error_code(ret, code, native):
    t = ta.zeros(3)
    ev = ta.submit(lambda a: ret, (t, "update"), name="returns")
    with pytest.raises(ta.KernelError) as ei:
        ev.wait()
    e = ei.value
    assert e.status == "TA_STATUS_KERNEL_FAILED" and e.code == code and e.origin == "returns"
    assert e.message == f"kernel returns returned {int(ret)}"
    # As a compiled kernel's return value (fail_kernel returns 7).
    u = ta.zeros(2)
    with pytest.raises(ta.KernelError) as ei:
        ta.submit_native(native.fail_kernel, (u, "update")).wait()
    assert ei.value.code == 7
    # Zero, None, bools and other objects are success.
    for ok in (0, np.int32(0), None, True, False, 1.5):
        t.fill(0.0)
        assert ta.submit(lambda a, ok=ok: ok, (t, "update")).wait()


def test_array_operands_may_be_read_but_not_written():
    arr = np.arange(3.0)
    out = ta.zeros(3)

    def k(src, dst):
        dst[...] = 2 * src
    assert ta.submit(k, (arr, "read"), (out, "write")).wait()  # a read of a copy made at submission
    np.testing.assert_array_equal(np.asarray(out), 2 * arr)
    for mode in ("write", "w", "update", "rw"):
        with pytest.raises(TypeError, match=r"a (write|update) access needs a tensorasync\.Tensor, not ndarray"):
            ta.submit(lambda a: None, (np.zeros(3), mode))
        with pytest.raises(TypeError, match=r"access needs a tensorasync\.Tensor, not list"):
            ta.submit_native(0, ([0.0, 1.0], mode))
    with pytest.raises(TypeError, match=r"an access mode is 'read', 'write' or 'update' .*, not None"):
        ta.submit(lambda a: None, (out, None))
    # A wrapped array is the way to let a kernel write NumPy memory.
    w = np.zeros(3)
    assert ta.submit(lambda a: a.__setitem__(..., 5.0), (ta.wrap(w), "write")).wait()
    np.testing.assert_array_equal(w, np.full(3, 5.0))
