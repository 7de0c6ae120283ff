#!/usr/bin/env python3
"""Benchmarks of the Python package, each against its peer in one run (by hand, not in CI).

  python bench/bench.py [--only=submit,gemm,chol] [--reps=N] [--gemm-n=2048] [--chol-n=4096] [--tile=256]

1. submit: the cost of submitting from Python, per operation on a 1-element tensor
   (t.fill / t.scale, the Event dropped at once), and one submit + wait round trip,
   against the same NumPy operation on an 8-element array.
2. gemm: a 256-tiled dgemm, n = 2048, on column-major block arrays, one ta.gemm per tile
   update in (k, i, j) order, then a wait: the same task graph as examples-c/bench/tiled.c
   (run `make -C examples-c/bench tiled` for the C figures), against numpy.matmul.
3. chol: a 256-tiled right-looking Cholesky, n = 4096 (816 tile operations), against
   numpy.linalg.cholesky.

Each figure is the best of --reps timed runs after a warm-up. NumPy's BLAS uses its own
threads; the library uses its worker pool (TA_NUM_THREADS, default one per core).
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import time

import numpy as np

import tensorasync as ta


def best(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench_submit(reps):
    n = 100_000
    t = ta.zeros(1)
    a = np.zeros(8)

    def submit_only(op):
        """Seconds per op of the submission loop alone, and of the loop plus the final wait."""
        loop, total = [], []
        for r in range(reps + 1):
            t.wait()
            t0 = time.perf_counter()
            for _ in range(n):
                op(1.0)
            t1 = time.perf_counter()
            t.wait()
            t2 = time.perf_counter()
            if r:
                loop.append((t1 - t0) / n)
                total.append((t2 - t0) / n)
        return min(loop), min(total)

    def np_fill():
        for _ in range(n):
            a.fill(1.0)

    def np_scale():
        for _ in range(n):
            a.__imul__(1.0)

    def ta_round_trip():
        for _ in range(n // 10):
            t.fill(1.0).wait()

    m = n // 20

    def py_kernel(x):
        x += 1.0

    def ta_py_kernels():
        for _ in range(m):
            ta.submit(py_kernel, (t, "update"))
        t.wait()

    fill_loop, fill_total = submit_only(t.fill)
    scale_loop, scale_total = submit_only(t.scale)
    rows = [
        ("ta t.fill: submission loop (1 element)", fill_loop),
        ("ta t.fill: loop + execution until done", fill_total),
        ("ta t.scale: submission loop (1 element)", scale_loop),
        ("ta t.scale: loop + execution until done", scale_total),
        ("ta t.fill(...).wait() round trip", best(ta_round_trip, reps) / (n // 10)),
        ("Python kernel chain (ta.submit), per kernel", best(ta_py_kernels, reps) / m),
        ("numpy a.fill (8 elements)", best(np_fill, reps) / n),
        ("numpy a *= 1.0 (8 elements)", best(np_scale, reps) / n),
    ]
    print("\n== submission cost from Python")
    for name, sec in rows:
        print(f"  {name:46s} {sec * 1e6:8.2f} us/op")


def tiled_gemm(n, nb):
    A = ta.BlockArray.tiled((n, n), (nb, nb), np.float64, order="F")
    B = ta.BlockArray.tiled((n, n), (nb, nb), np.float64, order="F")
    C = ta.BlockArray.tiled((n, n), (nb, nb), np.float64, order="F")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    ta.copyto(A.all(), ta.asarray(a))
    ta.copyto(B.all(), ta.asarray(b))
    T = n // nb
    tiles_a = [[A.block(i, k) for k in range(T)] for i in range(T)]
    tiles_b = [[B.block(k, j) for j in range(T)] for k in range(T)]
    tiles_c = [[C.block(i, j) for j in range(T)] for i in range(T)]
    ta.wait_all()

    def run():
        for k in range(T):
            for i in range(T):
                for j in range(T):
                    ta.gemm(tiles_c[i][j], tiles_a[i][k], tiles_b[k][j], 1.0, 0.0 if k == 0 else 1.0)
        ta.wait_all()
    return run, a, b, C


def bench_gemm(n, nb, reps):
    run, a, b, C = tiled_gemm(n, nb)
    t_ta = best(run, reps)
    ref = a @ b
    np.testing.assert_allclose(np.asarray(C)[::97, ::89], ref[::97, ::89], rtol=1e-9, atol=1e-9)
    t_np = best(lambda: np.matmul(a, b), reps)
    flops = 2.0 * n ** 3
    print(f"\n== tiled dgemm n={n}, {nb}x{nb} tiles ({(n // nb) ** 3} tile gemms)")
    print(f"  tensorasync from Python   {t_ta * 1e3:8.1f} ms  {flops / t_ta / 1e9:6.1f} GFLOP/s")
    print(f"  numpy.matmul              {t_np * 1e3:8.1f} ms  {flops / t_np / 1e9:6.1f} GFLOP/s")
    return flops / t_ta / 1e9


def bench_chol(n, nb, reps):
    rng = np.random.default_rng(2)
    m = rng.standard_normal((n, n))
    spd = m @ m.T + n * np.eye(n)
    A = ta.BlockArray.tiled((n, n), (nb, nb), np.float64, order="F")
    src = ta.asarray(spd, order="F")
    T = n // nb
    tile = [[A.block(i, j) for j in range(T)] for i in range(T)]
    tileT = [[tile[i][j].T for j in range(T)] for i in range(T)]
    whole = A.all()

    def reset():
        ta.copyto(whole, src)
        ta.wait_all()

    def run():
        for k in range(T):
            ta.potrf(tile[k][k])
            for i in range(k + 1, T):
                ta.trsm(tile[i][k], tileT[k][k], side="right", lower=False)
            for i in range(k + 1, T):
                ta.syrk(tile[i][i], tile[i][k], alpha=-1.0, beta=1.0)
                for j in range(k + 1, i):
                    ta.gemm(tile[i][j], tile[i][k], tileT[j][k], alpha=-1.0, beta=1.0)
        ta.wait_all()

    times = []
    for r in range(reps + 1):
        reset()
        t0 = time.perf_counter()
        run()
        if r:
            times.append(time.perf_counter() - t0)
    t_ta = min(times)
    L = np.tril(np.asarray(A))
    idx = rng.integers(0, n, size=(64, 2))
    for i, j in idx:
        assert abs(L[i] @ L[j] - spd[i, j]) <= 1e-8 * abs(spd).max(), (i, j)
    t_np = best(lambda: np.linalg.cholesky(spd), reps)
    flops = n ** 3 / 3.0
    ops = T + 2 * (T * (T - 1) // 2) + (T * (T - 1) * (T - 2)) // 6
    print(f"\n== tiled Cholesky n={n}, {nb}x{nb} tiles ({ops} tile operations)")
    print(f"  tensorasync from Python   {t_ta * 1e3:8.1f} ms  {flops / t_ta / 1e9:6.1f} GFLOP/s")
    print(f"  numpy.linalg.cholesky     {t_np * 1e3:8.1f} ms  {flops / t_np / 1e9:6.1f} GFLOP/s")
    return flops / t_ta / 1e9


def c_figures(args, only):
    """GFLOP/s (median, best) of the same tiled runs from C (examples-c/bench/tiled, tensorasync rows)."""
    exe = pathlib.Path(__file__).resolve().parents[3] / "examples-c" / "bench" / "tiled"
    if not exe.exists():
        print("\n(examples-c/bench/tiled not built: `make -C examples-c/bench tiled` builds it; C figures skipped)")
        return {}
    which = ",".join(k for k, name in (("gemm", "gemm"), ("chol", "chol")) if name in only)
    out = subprocess.run([str(exe), "--impl=ta", f"--only={which}", f"--reps={args.reps}",
                          f"--gemm-n={args.gemm_n}", f"--chol-n={args.chol_n}", f"--tile={args.tile}"],
                         capture_output=True, text=True, env=dict(os.environ)).stdout
    res = {}
    for m in re.finditer(r"RESULT bench=(\w+) .*impl=tensorasync unit=gflops median=([\d.]+) best=([\d.]+)", out):
        res[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    return res


_LEVEL_OF_KERNEL = {"SkylakeX": 4, "Cooperlake": 4, "SapphireRapids": 4,
                    "Haswell": 3, "Zen": 3, "SkylakeX_AVX2": 3}


def numpy_openblas_kernel():
    """The kernel NumPy's bundled OpenBLAS runs (None if NumPy has none of its own)."""
    import ctypes
    import glob

    libs = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in glob.glob(os.path.join(libs, "libscipy_openblas*.so")):
        lib = ctypes.CDLL(path)
        for sym in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename"):
            fn = getattr(lib, sym, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                return fn().decode()
    return None


def cpu_level_and_kernel():
    """The CPU's x86-64 level (4: AVX-512, 3: AVX2) and the OpenBLAS kernel meant for it."""
    flags, vendor = set(), ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "vendor_id":
                vendor = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        return 4, "Cooperlake" if "avx512_bf16" in flags else "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return 3, "Zen" if vendor == "AuthenticAMD" else "Haswell"
    return 2, None


def peers_at_their_best():
    """The peers run their best kernel: when NumPy's OpenBLAS runs a kernel below the CPU's
    level (OPENBLAS_CORETYPE set for an older CPU, say), run again with the right one. The
    same variable reaches the system OpenBLAS the library may call, as in the C benches."""
    kernel = numpy_openblas_kernel()
    level, want = cpu_level_and_kernel()
    if kernel is None or want is None or _LEVEL_OF_KERNEL.get(kernel, 2) >= level:
        return kernel
    if os.environ.get("TA_BENCH_OPENBLAS_RERUN"):
        return kernel
    os.environ["OPENBLAS_CORETYPE"] = want
    os.environ["TA_BENCH_OPENBLAS_RERUN"] = "1"
    os.execv(sys.executable, [sys.executable] + sys.argv)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default="submit,gemm,chol")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--gemm-n", type=int, default=2048)
    p.add_argument("--chol-n", type=int, default=4096)
    p.add_argument("--tile", type=int, default=256)
    args = p.parse_args()
    only = set(args.only.split(","))
    from tensorasync import _ffi

    kernel = peers_at_their_best()
    print(f"tensorasync {ta.__version__} (cffi {_ffi.MODE} mode), numpy {np.__version__}"
          f" (OpenBLAS kernel {kernel}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')})")
    if "submit" in only:
        bench_submit(args.reps)
    py = {}
    if "gemm" in only:
        py["gemm"] = bench_gemm(args.gemm_n, args.tile, args.reps)
    if "chol" in only:
        py["cholesky"] = bench_chol(args.chol_n, args.tile, args.reps)
    if py:
        c = c_figures(args, only)
        if c:
            print("\n== Python vs C (GFLOP/s; C: median and best of its runs)")
            for k, v in py.items():
                if k in c:
                    med, bst = c[k]
                    print(f"  {k:9s} Python best {v:6.1f}   C median {med:6.1f} best {bst:6.1f}   "
                          f"Python/C best {v / bst:5.2f}x")


if __name__ == "__main__":
    main()
