"""Creation, attributes, dtypes and views, checked against NumPy."""
import numpy as np
import pytest

import tensorasync as ta

ALL = [np.float32, np.float64, np.complex64, np.complex128, np.int8, np.int16, np.int32, np.int64,
       np.uint8, np.uint16, np.uint32, np.uint64]


def sample(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    return rng.integers(0, 100, size=shape).astype(dt)


def test_dtypes_are_every_library_dtype():
    assert [np.dtype(d) for d in ALL] == list(ta.dtypes)


@pytest.mark.parametrize("dtype", ALL)
def test_asarray_round_trip_every_dtype(dtype):
    a = sample((3, 5), dtype)
    t = ta.asarray(a)
    assert t.dtype == np.dtype(dtype)
    assert t.shape == (3, 5) and t.ndim == 2 and t.size == 15
    np.testing.assert_array_equal(np.asarray(t), a)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.int16])
def test_zeros_order_and_strides(order, dtype):
    t = ta.zeros((4, 6, 2), dtype, order=order)
    ref = np.zeros((4, 6, 2), dtype, order=order)
    assert t.strides == ref.strides
    assert t.element_strides == tuple(s // ref.itemsize for s in ref.strides)
    np.testing.assert_array_equal(np.asarray(t), ref)


def test_asarray_copies_before_returning():
    a = np.arange(6.0)
    t = ta.asarray(a)
    a[:] = -1
    np.testing.assert_array_equal(np.asarray(t), np.arange(6.0))


def test_asarray_of_strided_and_reversed_arrays():
    base = np.arange(60.0).reshape(6, 10)
    for a in (base[::2, ::-3], base.T, base[:, 3], base[::-1]):
        np.testing.assert_array_equal(np.asarray(ta.asarray(a)), a)


def test_empty_is_unconstructed():
    t = ta.empty(np.float32)
    assert t.dtype == np.float32
    with pytest.raises(ta.UnconstructedError) as ei:
        t.shape
    assert ei.value.status == "TA_STATUS_UNCONSTRUCTED"
    ta.copyto(t, ta.asarray(np.ones((2, 2), np.float32)))
    np.testing.assert_array_equal(np.asarray(t), np.ones((2, 2), np.float32))


def test_unknown_dtype_is_refused():
    with pytest.raises(ta.DTypeError) as ei:
        ta.zeros(3, np.float16)
    assert "float16" in ei.value.message


KEYS = [
    (slice(None),),
    (1,),
    (-1,),
    (slice(None, None, -1),),
    (slice(4, 0, -2), slice(None)),
    (Ellipsis, 2),
    (1, Ellipsis),
    (slice(1, 3), -2, slice(None, None, 3)),
    (slice(-2, None), Ellipsis, slice(None, None, -1)),
    (slice(3, 3),),
    (slice(5, 1),),
    (0, 0, 0),
    (-5, slice(1, None), Ellipsis),
    (Ellipsis,),
]


@pytest.mark.parametrize("key", KEYS, ids=[repr(k) for k in KEYS])
def test_indexing_matches_numpy(key):
    a = sample((5, 4, 6), np.float64)
    t = ta.asarray(a)
    v = t[key]
    ref = a[key]
    assert v.shape == ref.shape
    np.testing.assert_array_equal(np.asarray(v), ref)


def test_index_errors():
    t = ta.zeros((3, 4))
    with pytest.raises(IndexError):
        t[3]
    with pytest.raises(IndexError):
        t[-4]
    with pytest.raises(IndexError):
        t[0, 0, 0]
    with pytest.raises(IndexError):
        t[..., ...]


def test_views_write_through_to_the_parent():
    a = np.zeros((4, 5))
    t = ta.asarray(a)
    t[1:3, ::-2] = 7.0
    t[0] = np.arange(5.0)
    t[3, 1:3] = ta.asarray(np.array([8.0, 9.0]))
    a[1:3, ::-2] = 7.0
    a[0] = np.arange(5.0)
    a[3, 1:3] = [8.0, 9.0]
    np.testing.assert_array_equal(np.asarray(t), a)


def test_transpose_conj_reshape_copy():
    a = sample((2, 3, 4), np.complex128)
    t = ta.asarray(a)
    np.testing.assert_array_equal(np.asarray(t.T), a.T)
    np.testing.assert_array_equal(np.asarray(t.transpose(1, 2, 0)), a.transpose(1, 2, 0))
    np.testing.assert_array_equal(np.asarray(t.transpose((2, 0, 1))), a.transpose((2, 0, 1)))
    np.testing.assert_array_equal(np.asarray(t.conj()), a.conj())
    assert t.conj().read_only
    np.testing.assert_array_equal(np.asarray(t.reshape(6, 4)), a.reshape(6, 4))
    np.testing.assert_array_equal(np.asarray(t.reshape(-1)), a.reshape(-1))
    tf = ta.asarray(a, order="F")
    np.testing.assert_array_equal(np.asarray(tf.reshape((4, 6), order="F")), a.reshape((4, 6), order="F"))
    c = t.conj().copy()
    assert not c.read_only and not c.is_view
    t.fill(0)
    np.testing.assert_array_equal(np.asarray(c), a.conj())


def test_reshape_of_a_strided_view_is_refused():
    t = ta.zeros((4, 4))
    with pytest.raises(ta.ShapeError) as ei:
        t[:, ::2].reshape(8)
    assert ei.value.status == "TA_STATUS_NOT_CONTIGUOUS"


def test_wrap_is_zero_copy_and_keeps_the_array():
    a = np.arange(8.0)
    t = ta.wrap(a)
    t.scale(2.0).wait()
    np.testing.assert_array_equal(a, np.arange(8.0) * 2)
    v = t[::2]
    del t, a
    import gc
    gc.collect()
    np.testing.assert_array_equal(np.asarray(v), np.arange(0.0, 16.0, 4.0))


def test_wrap_read_only_array():
    a = np.arange(4.0)
    a.flags.writeable = False
    with pytest.raises(ta.ReadOnlyError):
        ta.wrap(a, readonly=False)
    t = ta.wrap(a)
    assert t.read_only
    with pytest.raises(ta.ReadOnlyError) as ei:
        t.fill(1.0)
    assert ei.value.status == "TA_STATUS_READ_ONLY"
    np.testing.assert_array_equal(np.asarray(t), np.arange(4.0))


def test_scalars_and_item():
    t = ta.asarray(np.array(2.5))
    assert t.ndim == 0 and t.shape == ()
    assert float(t) == 2.5 and t.item() == 2.5
    assert int(ta.asarray(np.array([7], np.int32))) == 7
    assert complex(ta.asarray(np.array(1 + 2j))) == 1 + 2j
    with pytest.raises(ValueError):
        float(ta.zeros(2))


def test_random_indexing_matches_numpy():
    rng = np.random.default_rng(7)
    a = sample((4, 5, 3), np.float64)
    t = ta.asarray(a)

    def rand_axis(n):
        r = rng.integers(0, 3)
        if r == 0:
            return int(rng.integers(-n, n))
        vals = [None] + list(range(-n - 1, n + 2))
        step = [None, 1, 2, -1, -2, 3][rng.integers(0, 6)]
        return slice(vals[rng.integers(0, len(vals))], vals[rng.integers(0, len(vals))], step)

    for _ in range(300):
        key = tuple(rand_axis(n) for n in a.shape[: rng.integers(1, 4)])
        if rng.integers(0, 4) == 0:
            key = key[:1] + (Ellipsis,)
        v, ref = t[key], a[key]
        assert v.shape == ref.shape, key
        np.testing.assert_array_equal(np.asarray(v), ref)


EMPTY = [((0,), "C"), ((0, 3), "C"), ((3, 0), "C"), ((0, 3), "F"), ((3, 0), "F"), ((2, 0, 3), "C")]


@pytest.mark.parametrize("shape,order", EMPTY)
@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.int32])
def test_empty_arrays(shape, order, dtype):
    a = np.zeros(shape, dtype, order=order)
    for t in (ta.asarray(a), ta.asarray(a, order="F"), ta.wrap(a), ta.from_dlpack(a), ta.asarray(a[::-1])):
        assert t.shape == shape and t.size == 0 and t.dtype == a.dtype
        r = np.asarray(t)
        assert r.shape == shape and r.dtype == a.dtype
        assert t.wait()
    t = ta.wrap(a)
    t.fill(1).wait()  # nothing to write
    assert float(ta.sum(ta.asarray(np.zeros(shape)))) == 0.0


def test_big_endian_input_is_copied_in_native_order():
    for dt in (">f8", ">i4", ">c16", "<f8"):
        a = np.arange(6).reshape(2, 3).astype(dt)
        t = ta.asarray(a)
        assert t.dtype == a.dtype.newbyteorder("=") and t.dtype.isnative
        np.testing.assert_array_equal(np.asarray(t), a)
    assert ta.asarray([1, 2], dtype=">f4").dtype == np.float32
    with pytest.raises(ta.DTypeError, match="not in native byte order"):
        ta.wrap(np.zeros(3, ">f8"))  # zero copy cannot convert


def test_iteration_and_membership_as_numpy():
    a = np.arange(6.0).reshape(2, 3)
    t = ta.asarray(a)
    rows = list(t)
    assert len(rows) == 2 and all(isinstance(r, ta.Tensor) for r in rows)
    np.testing.assert_array_equal(np.asarray(rows[1]), a[1])
    z = ta.asarray(np.array(2.5))
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        list(z)
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(z)
    with pytest.raises(TypeError, match="iteration over a 0-d"):
        iter(np.array(2.5))
    for v in (3.0, 3, 5.0, 7.0, -1):
        assert (v in t) == (v in a)
    assert 2.5 in z and 2.0 not in z
    assert (1 + 0j) in ta.asarray(np.array([1 + 0j, 2j])) and 1j not in ta.asarray(np.array([1 + 0j, 2j]))


def test_array_copy_false_never_copies():
    c = ta.asarray(np.array([1 + 2j, 3 - 1j]))
    with pytest.raises(ValueError, match="cannot be exported without a copy"):
        np.asarray(c.conj(), copy=False)
    np.testing.assert_array_equal(np.asarray(c.conj()), [1 - 2j, 3 + 1j])
    np.testing.assert_array_equal(np.asarray(c.conj(), copy=True), [1 - 2j, 3 + 1j])
    # No copy is needed: a view of the tensor's memory, as NumPy's copy=False gives.
    t = ta.asarray(np.arange(4.0))
    a = np.asarray(t, copy=False)
    b = np.asarray(t.conj(), copy=False)  # the identity for real dtypes
    assert not a.flags.owndata and not a.flags.writeable and np.shares_memory(a, b)
    with pytest.raises(ValueError, match="needs a copy"):
        np.asarray(t, dtype=np.float32, copy=False)
