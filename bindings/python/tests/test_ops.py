"""Operations against NumPy's results."""
import numpy as np
import pytest

import tensorasync as ta
from test_tensors import ALL, sample

FLOATS = [np.float32, np.float64, np.complex64, np.complex128]


def tol(dtype):
    return dict(rtol=2e-4, atol=2e-4) if np.dtype(dtype) in (np.float32, np.complex64) else dict(rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", ALL)
def test_fill_scale_axpy_copy_every_dtype(dtype):
    dt = np.dtype(dtype)
    x = sample((3, 4), dt, 1)
    y = sample((3, 4), dt, 2)
    tx, ty = ta.asarray(x), ta.asarray(y)
    alpha = (2 - 1j) if dt.kind == "c" else 3
    ty.axpy(alpha, tx)
    tx.scale(2)
    np.testing.assert_allclose(np.asarray(ty), (alpha * x + y).astype(dt), **tol(dt) if dt.kind in "fc" else {})
    np.testing.assert_array_equal(np.asarray(tx), (2 * x).astype(dt))
    tz = ta.zeros((3, 4), dt)
    ta.copyto(tz, tx)
    np.testing.assert_array_equal(np.asarray(tz), (2 * x).astype(dt))
    tz.fill(5)
    np.testing.assert_array_equal(np.asarray(tz), np.full((3, 4), 5, dt))


def test_64_bit_integer_scalars_are_exact():
    t = ta.zeros(2, np.int64)
    t.fill(2**62 + 1)
    assert np.asarray(t).tolist() == [2**62 + 1] * 2
    t.fill(-(2**53) - 1)
    t.scale(3)
    assert np.asarray(t).tolist() == [3 * (-(2**53) - 1)] * 2
    u = ta.zeros(1, np.uint64)
    u.fill(2**64 - 1)
    assert np.asarray(u).tolist() == [2**64 - 1]


@pytest.mark.parametrize("dtype", FLOATS)
def test_matmul_gemm_add_product(dtype):
    a, b, c = sample((5, 7), dtype, 1), sample((7, 3), dtype, 2), sample((5, 3), dtype, 3)
    ta_, tb, tc = ta.asarray(a), ta.asarray(b), ta.asarray(c)
    np.testing.assert_allclose(np.asarray(ta_ @ tb), a @ b, **tol(dtype))
    np.testing.assert_allclose(np.asarray(ta.matmul(tb.T, ta_.T)), b.T @ a.T, **tol(dtype))
    np.testing.assert_allclose(np.asarray(ta.matmul(ta_.conj(), tb)), a.conj() @ b, **tol(dtype))
    ta.gemm(tc, ta_, tb, alpha=2.0, beta=-1.0)
    np.testing.assert_allclose(np.asarray(tc), 2 * a @ b - c, **tol(dtype))
    ta.add_product(tc, ta_, tb, alpha=0.5)
    np.testing.assert_allclose(np.asarray(tc), 2.5 * a @ b - c, **tol(dtype))


@pytest.mark.parametrize("spec,shapes", [
    ("ij,jk->ik", [(4, 5), (5, 3)]),
    ("ij,kj->ki", [(4, 5), (3, 5)]),
    ("abc,cbd->ad", [(2, 3, 4), (4, 3, 5)]),
    ("ij,k->ijk", [(2, 3), (4,)]),
    ("ij->ji", [(3, 4)]),
    ("ijk->k", [(2, 3, 4)]),
    ("ijk->ki", [(2, 3, 4)]),
])
def test_einsum_matches_numpy(spec, shapes):
    arrays = [sample(s, np.float64, i) for i, s in enumerate(shapes)]
    res = ta.einsum(spec, *[ta.asarray(a) for a in arrays])
    np.testing.assert_allclose(np.asarray(res), np.einsum(spec, *arrays), rtol=1e-12, atol=1e-12)


def test_einsum_unsupported_forms():
    a = ta.zeros((3, 3))
    with pytest.raises(NotImplementedError):
        ta.einsum("ii->i", a)
    with pytest.raises(NotImplementedError):
        ta.einsum("ij,ij->ij", a, a)


def test_tensordot_matches_numpy():
    a, b = sample((3, 4, 5), np.float64, 1), sample((4, 5, 2), np.float64, 2)
    np.testing.assert_allclose(np.asarray(ta.tensordot(ta.asarray(a), ta.asarray(b))), np.tensordot(a, b), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ta.tensordot(ta.asarray(a), ta.asarray(b), ([1], [0]))),
                               np.tensordot(a, b, ([1], [0])), rtol=1e-12)


def test_sum_of_integers_is_refused_at_submission():
    with pytest.raises(ta.UnsupportedError) as ei:
        ta.sum(ta.zeros(3, np.int32))
    assert ei.value.origin == "ta_sum" and ("int" in ei.value.message or "i32" in ei.value.message)


@pytest.mark.parametrize("dtype", FLOATS)
def test_sum_dot_norm(dtype):
    x, y = sample((4, 6), dtype, 1), sample((4, 6), dtype, 2)
    tx, ty = ta.asarray(x), ta.asarray(y)
    s = ta.sum(tx)
    assert s.ndim == 0
    t = tol(dtype)
    np.testing.assert_allclose(np.asarray(s), x.sum(), **t)
    np.testing.assert_allclose(np.asarray(ta.sum(tx, axis=0)), x.sum(axis=0), **t)
    np.testing.assert_allclose(np.asarray(tx.sum(axis=(1,))), x.sum(axis=1), **t)
    np.testing.assert_allclose(np.asarray(ta.dot(tx, ty)), (x * y).sum(), **t)
    np.testing.assert_allclose(np.asarray(ta.vdot(tx, ty)), np.vdot(x, y), **t)
    n = ta.norm(tx)
    assert n.dtype == np.abs(x).dtype
    np.testing.assert_allclose(float(n), np.linalg.norm(x), **t)


@pytest.mark.parametrize("dtype", FLOATS)
def test_potrf_trsm_syrk(dtype):
    n = 6
    m = sample((n, n), dtype, 4)
    spd = (m @ m.conj().T + n * np.eye(n)).astype(dtype)
    a = ta.asarray(spd)
    ta.potrf(a, lower=True)
    L = np.tril(np.asarray(a))
    np.testing.assert_allclose(L, np.linalg.cholesky(spd), **tol(dtype))
    b = sample((n, 3), dtype, 5)
    tb = ta.asarray(b)
    ta.trsm(tb, a, side="left", lower=True, alpha=2.0)
    np.testing.assert_allclose(L @ np.asarray(tb), 2 * b, **tol(dtype))
    bt = sample((3, n), dtype, 6)
    tbt = ta.asarray(bt)
    ta.trsm(tbt, a.T, side="right", lower=False)  # X @ L^T = B
    np.testing.assert_allclose(np.asarray(tbt) @ L.T, bt, **tol(dtype))
    c = ta.zeros((n, n), dtype)
    x = sample((n, 2), dtype, 7)
    ta.syrk(c, ta.asarray(x), alpha=1.0, beta=0.0, lower=True)
    np.testing.assert_allclose(np.tril(np.asarray(c)), np.tril(x @ x.conj().T), **tol(dtype))


def test_tiled_cholesky_on_a_block_array():
    n, nb = 64, 16
    rng = np.random.default_rng(3)
    m = rng.standard_normal((n, n))
    spd = m @ m.T + n * np.eye(n)
    A = ta.BlockArray.tiled((n, n), (nb, nb), np.float64)
    assert A.grid == (4, 4) and len(A) == 16
    ta.copyto(A.all(), ta.asarray(spd))
    T = n // nb
    for k in range(T):
        ta.potrf(A.block(k, k))
        for i in range(k + 1, T):
            ta.trsm(A.block(i, k), A.block(k, k).T, side="right", lower=False)
        for i in range(k + 1, T):
            ta.syrk(A.block(i, i), A.block(i, k), alpha=-1.0, beta=1.0)
            for j in range(k + 1, i):
                ta.gemm(A.block(i, j), A.block(i, k), A.block(j, k).T, alpha=-1.0, beta=1.0)
    L = np.tril(np.asarray(A))
    np.testing.assert_allclose(L, np.linalg.cholesky(spd), rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(np.asarray(A.block(1, 2)), np.asarray(A)[16:32, 32:48])


def test_block_array_views_match_numpy():
    A = ta.BlockArray.tiled((6, 9), (2, 4), np.float64)  # ragged last tile column
    assert A.grid == (3, 3)
    ref = np.arange(54.0).reshape(6, 9)
    ta.copyto(A.all(), ta.asarray(ref))
    np.testing.assert_array_equal(np.asarray(A.block(2, 2)), ref[4:6, 8:9])
    np.testing.assert_array_equal(np.asarray(A.coalesce((0, 1), (2, 3))), ref[0:4, 4:9])
    A.block(1, 0).fill(-1.0)
    ref[2:4, 0:4] = -1.0
    np.testing.assert_array_equal(np.asarray(A), ref)


# ----- array-like operands, axes, scalars, outputs -----------------------------------------

def test_array_like_operands_of_in_place_operations():
    """Every operand typed Tensor-or-array-like takes a NumPy array: its temporary tensor
    lives across the C call (it used to be freed first: HandleError STALE_HANDLE)."""
    m = np.arange(9.0).reshape(3, 3) + 3 * np.eye(3)
    eye = np.eye(3)
    c = ta.zeros((3, 3))
    ta.copyto(c, m).wait()
    np.testing.assert_array_equal(np.asarray(c), m)
    c.copy_from(2 * m).wait()
    np.testing.assert_array_equal(np.asarray(c), 2 * m)
    ta.axpy(1.0, m, c).wait()
    np.testing.assert_array_equal(np.asarray(c), 3 * m)
    c.axpy(-1.0, m).wait()
    np.testing.assert_array_equal(np.asarray(c), 2 * m)
    ta.gemm(c, m, eye, alpha=1.0, beta=1.0).wait()
    np.testing.assert_allclose(np.asarray(c), 3 * m)
    ta.add_product(c, m, eye, alpha=-2.0).wait()
    np.testing.assert_allclose(np.asarray(c), m)
    spd = m @ m.T
    low = np.linalg.cholesky(spd)
    b = ta.asarray(m)
    ta.trsm(b, low).wait()
    np.testing.assert_allclose(np.asarray(b), np.linalg.solve(low, m), rtol=1e-10, atol=1e-10)
    s = ta.zeros((3, 3))
    ta.syrk(s, m).wait()
    np.testing.assert_allclose(np.tril(np.asarray(s)), np.tril(m @ m.T), rtol=1e-12)
    out = ta.zeros((3, 3))
    ta.tensordot(m, eye, 1, out=out).wait()
    np.testing.assert_allclose(np.asarray(out), m)


@pytest.mark.parametrize("call", [
    lambda: ta.fill(np.zeros(3), 1.0),
    lambda: ta.scale(np.zeros(3), 2.0),
    lambda: ta.axpy(1.0, ta.zeros(3), np.zeros(3)),
    lambda: ta.copyto(np.zeros(3), ta.zeros(3)),
    lambda: ta.gemm(np.zeros((2, 2)), ta.zeros((2, 2)), ta.zeros((2, 2))),
    lambda: ta.potrf(np.eye(2)),
    lambda: ta.trsm(np.eye(2), ta.zeros((2, 2))),
    lambda: ta.syrk(np.eye(2), ta.zeros((2, 2))),
    lambda: ta.sum(ta.zeros(3), out=np.zeros(())),
])
def test_outputs_must_be_tensors(call):
    with pytest.raises(TypeError, match=r"must be a tensorasync\.Tensor, not ndarray"):
        call()


def test_out_of_range_axes_raise_axis_error_as_numpy():
    a = np.arange(24.0).reshape(2, 3, 4)
    t = ta.asarray(a)
    for axis in (3, -4, (0, 3), (-5,)):
        with pytest.raises(np.exceptions.AxisError, match="out of bounds for array of dimension 3"):
            np.sum(a, axis=axis)
        with pytest.raises(np.exceptions.AxisError, match="out of bounds for array of dimension 3"):
            ta.sum(t, axis)
    with pytest.raises(ValueError, match="duplicate value in 'axis'"):
        ta.sum(t, (0, -3))
    # In range, negative axes count from the end, as in NumPy.
    for axis in (-1, 2, (0, -1), (), None):
        np.testing.assert_allclose(np.asarray(ta.sum(t, axis)), np.sum(a, axis=axis))
    b = np.ones((4, 3))
    with pytest.raises(np.exceptions.AxisError, match="axis 5 is out of bounds for array of dimension 3"):
        ta.tensordot(t, b, axes=([5], [0]))
    with pytest.raises(np.exceptions.AxisError, match="axis -3 is out of bounds for array of dimension 2"):
        ta.tensordot(t, b, axes=([2], [-3]))
    with pytest.raises(np.exceptions.AxisError, match="contracts more axes than the operands have"):
        ta.tensordot(t, b, axes=3)
    np.testing.assert_allclose(np.asarray(ta.tensordot(t, b, axes=([-1], [-2]))), np.tensordot(a, b, axes=([-1], [-2])))
    with pytest.raises(np.exceptions.AxisError, match="axis 3 is out of bounds for array of dimension 3"):
        t.transpose(0, 1, 3)
    with pytest.raises(ValueError, match="axes don't match tensor"):
        t.transpose(0, 1)
    np.testing.assert_array_equal(np.asarray(t.transpose(-1, 0, 1)), a.transpose(-1, 0, 1))


def test_numpy_sum_dispatches_to_the_tensor():
    a = np.arange(6.0).reshape(2, 3)
    t = ta.asarray(a)
    s = np.sum(t)
    assert isinstance(s, ta.Tensor) and s.shape == ()
    assert float(s) == np.sum(a)
    np.testing.assert_array_equal(np.asarray(np.sum(t, axis=0)), np.sum(a, axis=0))
    np.testing.assert_array_equal(np.asarray(np.sum(t, axis=1, keepdims=True)), np.sum(a, axis=1, keepdims=True))
    assert np.asarray(np.sum(t, keepdims=True)).shape == (1, 1)
    out = ta.zeros(3)
    assert np.sum(t, axis=0, out=out) is out
    np.testing.assert_array_equal(np.asarray(out), np.sum(a, axis=0))
    out2 = ta.zeros((1, 3))
    assert t.sum(axis=0, out=out2, keepdims=True) is out2
    np.testing.assert_array_equal(np.asarray(out2), np.sum(a, axis=0, keepdims=True))
    assert float(np.sum(t, dtype=np.float64)) == 15.0
    with pytest.raises(ta.DTypeError, match="accumulates in the tensor's dtype float64, not float32"):
        np.sum(t, dtype=np.float32)


def test_integer_scalars_are_checked_the_same_for_every_integer_dtype():
    for dt in (np.int8, np.int32, np.int64, np.uint8, np.uint64):
        t = ta.zeros(2, dt)
        t.fill(2.0)  # an integral float is exact
        assert np.asarray(t).tolist() == [2, 2]
        for bad in (2.5, float("nan"), 1 + 1j):
            with pytest.raises(ta.InvalidArgumentError, match=f"is not representable as {np.dtype(dt).name}"):
                t.fill(bad)
            with pytest.raises(ta.InvalidArgumentError, match=f"is not representable as {np.dtype(dt).name}"):
                t.scale(bad)
        info = np.iinfo(dt)
        for bad in (info.min - 1, info.max + 1):
            with pytest.raises(ta.InvalidArgumentError, match=rf"fill value {bad} is not representable as "
                                                              rf"{np.dtype(dt).name} \(range {info.min}\.\.{info.max}\)"):
                t.fill(bad)
        with pytest.raises(ta.InvalidArgumentError, match="alpha 1.5 is not representable"):
            t.axpy(1.5, ta.zeros(2, dt))
        assert np.asarray(t).tolist() == [2, 2]  # nothing was submitted
    u = ta.zeros(2, np.uint64)
    u.fill(np.uint64(2**64 - 1))
    assert np.asarray(u).tolist() == [2**64 - 1] * 2


@pytest.mark.parametrize("bad", ["2", b"2", [2.0], None, object()])
def test_non_numeric_scalars_raise_type_error(bad):
    t = ta.zeros(2)
    name = type(bad).__name__
    with pytest.raises(TypeError, match=f"alpha must be a number, not {name}"):
        t.scale(bad)
    with pytest.raises(TypeError, match=f"fill value must be a number, not {name}"):
        t.fill(bad)
    with pytest.raises(TypeError, match=f"fill value must be a number, not {name}"):
        ta.zeros(2, np.int32).fill(bad)
    with pytest.raises(TypeError, match=f"alpha must be a number, not {name}"):
        ta.gemm(ta.zeros((2, 2)), ta.zeros((2, 2)), ta.zeros((2, 2)), alpha=bad)
    with pytest.raises(TypeError, match=f"beta must be a number, not {name}"):
        ta.gemm(ta.zeros((2, 2)), ta.zeros((2, 2)), ta.zeros((2, 2)), beta=bad)


def test_numpy_and_python_numbers_are_scalars():
    t = ta.zeros(3)
    t.fill(np.float32(1.5)).wait()
    t.scale(np.int64(2)).wait()
    t.scale(np.array(2.0)).wait()
    t.scale(True).wait()
    from fractions import Fraction
    t.scale(Fraction(1, 2)).wait()
    np.testing.assert_array_equal(np.asarray(t), [3.0, 3.0, 3.0])
    with pytest.raises(ta.InvalidArgumentError, match="is not representable as a double"):
        t.fill(10**400)


def test_trsm_side_is_checked():
    with pytest.raises(ValueError, match=r"side must be 'left' or 'right', not 'up'"):
        ta.trsm(ta.zeros((2, 2)), ta.asarray(np.eye(2)), side="up")


def test_block_array_tile_ranks_are_checked():
    with pytest.raises(ta.ShapeError, match=r"tile extents \(2,\) have rank 1, the shape \(4, 4\) rank 2"):
        ta.BlockArray.tiled((4, 4), (2,))
    with pytest.raises(ta.ShapeError, match=r"tile extents \(2, 2\) have rank 2, the shape \(4,\) rank 1"):
        ta.BlockArray.tiled((4,), (2, 2))
    # One int is the tile extent on every axis (documented).
    A = ta.BlockArray.tiled((4, 6), 2)
    assert A.grid == (2, 3) and A.block(1, 2).shape == (2, 2)
    B = ta.BlockArray.tiled((4, 4), (2, 2))
    with pytest.raises(ta.InvalidArgumentError, match=r"coalesce\(\) takes lo and hi of 2 entries, one per axis "
                                                      r"of the grid \(2, 2\), not 2 and 1"):
        B.coalesce([0, 0], [1])
    with pytest.raises(ta.InvalidArgumentError, match="not 1 and 1"):
        B.coalesce([0], [1])
    with pytest.raises(ta.InvalidArgumentError, match=r"tiles -1\.\.1 on axis 0"):
        B.coalesce([-1, 0], [1, 1])
    assert B.coalesce([0, 1], [2, 2]).shape == (4, 2)


def test_block_indices_follow_python():
    ref = np.arange(16.0).reshape(4, 4)
    B = ta.BlockArray.tiled((4, 4), (2, 2))
    ta.copyto(B.all(), ref)
    np.testing.assert_array_equal(np.asarray(B.block(-1, 0)), ref[2:4, 0:2])
    np.testing.assert_array_equal(np.asarray(B.block((-2, -1))), ref[0:2, 2:4])
    with pytest.raises(IndexError, match=r"tile index 2 is out of bounds for axis 0 of the grid \(2, 2\)"):
        B.block(2, 0)
    with pytest.raises(IndexError, match=r"tile index -3 is out of bounds for axis 1"):
        B.block(0, -3)
    with pytest.raises(IndexError, match=r"block\(\) takes 2 indices, one per axis of the grid \(2, 2\), not 1"):
        B.block(0)
