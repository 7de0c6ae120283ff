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
