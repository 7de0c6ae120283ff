"""Errors as exceptions: attributes, families, raised at submission or by the observer."""
import asyncio
import ctypes

import numpy as np
import pytest

import tensorasync as ta


def test_submission_error_raises_at_the_call_with_every_attribute():
    a, b = ta.zeros((2, 3)), ta.zeros((2, 3))
    with pytest.raises(ta.ShapeError) as ei:
        ta.gemm(ta.zeros((2, 2)), a, b)
    e = ei.value
    assert isinstance(e, ta.Error) and isinstance(e, ValueError)
    assert e.status == "TA_STATUS_SHAPE_MISMATCH" and e.status_code == 22 and e.code == 22
    assert "3" in e.message and e.origin == "ta_gemm"
    assert str(e).startswith("TA_STATUS_SHAPE_MISMATCH: ")


@pytest.mark.parametrize("make,cls,status", [
    (lambda: ta.axpy(1.0, ta.zeros(3, np.float32), ta.zeros(3)), ta.DTypeError, "TA_STATUS_DTYPE_MISMATCH"),
    (lambda: (lambda t: ta.axpy(1.0, t, t))(ta.zeros(3)), ta.AliasError, "TA_STATUS_ALIAS"),
    (lambda: ta.conj(ta.zeros(3, np.complex128)).fill(1.0), ta.ReadOnlyError, "TA_STATUS_READ_ONLY"),
    (lambda: ta.sum(ta.empty()), ta.UnconstructedError, "TA_STATUS_UNCONSTRUCTED"),
    (lambda: ta.zeros((2, 2)).transpose(0, 0), ta.InvalidArgumentError, None),
])
def test_families(make, cls, status):
    with pytest.raises(cls) as ei:
        make()
    assert isinstance(ei.value, ta.Error)
    if status:
        assert ei.value.status == status
    assert ei.value.message


def test_every_status_has_a_family():
    from tensorasync.errors import error_class
    for name in dir(ta._LIB):
        if name.startswith("TA_STATUS_") and name not in ("TA_STATUS_OK", "TA_STATUS_PENDING"):
            cls = error_class(getattr(ta._LIB, name))
            assert issubclass(cls, ta.Error)
            if name != "TA_STATUS_INTERNAL":
                assert cls is not ta.InternalError, name


def poisoned(native):
    """A tensor poisoned by a compiled kernel that fails with code 7."""
    t = ta.asarray(np.arange(4.0))
    ev = ta.submit_native(native.fail_kernel, (t, "update"), name="failing_kernel")
    return t, ev


def check_kernel_error(e):
    assert isinstance(e, ta.KernelError)
    assert e.status == "TA_STATUS_KERNEL_FAILED" and e.code == 7
    assert e.message == "seven is not a number I like" and e.origin == "failing_kernel"


def test_async_failure_raised_by_every_observer(native):
    t, ev = poisoned(native)
    with pytest.raises(ta.KernelError) as ei:
        ev.wait()
    check_kernel_error(ei.value)
    check_kernel_error(ev.exception())
    with pytest.raises(ta.KernelError) as ei:
        t.wait()
    check_kernel_error(ei.value)
    with pytest.raises(ta.KernelError) as ei:
        np.asarray(t)
    check_kernel_error(ei.value)
    s = ta.sum(t)  # submitted fine; fails when it runs
    with pytest.raises(ta.KernelError) as ei:
        float(s)
    check_kernel_error(ei.value)

    async def main():
        with pytest.raises(ta.KernelError) as ei:
            await ev
        check_kernel_error(ei.value)
    asyncio.run(main())
    t.fill(1.0)  # an overwrite cleans it
    assert t.wait() and float(ta.sum(t)) == 4.0


def test_potrf_of_an_indefinite_matrix_fails_asynchronously():
    a = ta.asarray(np.array([[1.0, 2.0], [2.0, 1.0]]))
    ev = ta.potrf(a)
    with pytest.raises(ta.Error) as ei:
        ev.wait()
    assert ei.value.origin == "ta_potrf" and ei.value.message
    with pytest.raises(type(ei.value)):
        np.asarray(a)


def test_errors_pickle():
    import pickle
    try:
        ta.zeros((2, 2)) @ ta.zeros((3, 3))
    except ta.Error as e:
        e2 = pickle.loads(pickle.dumps(e))
        assert type(e2) is type(e) and e2.status == e.status and e2.message == e.message and e2.origin == e.origin
