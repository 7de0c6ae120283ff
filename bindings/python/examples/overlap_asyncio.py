#!/usr/bin/env python3
"""Overlap a tiled computation with asyncio I/O.

A tiled Cholesky factorisation is submitted to the library's workers at once; while it
runs, the asyncio loop keeps serving a small TCP echo server and its client (the "I/O").
Each finished diagonal tile is awaited and reported as soon as it is ready, without a
thread per waiter: `await tile` goes through one completion queue per loop, read with
loop.add_reader on its file descriptor.

    python examples/overlap_asyncio.py [n] [tile]
"""
import asyncio
import sys
import time

import numpy as np

import tensorasync as ta


def submit_cholesky(A, T):
    """Right-looking tiled Cholesky, every tile operation submitted without waiting."""
    for k in range(T):
        ta.potrf(A.block(k, k))
        for i in range(k + 1, T):
            ta.trsm(A.block(i, k), A.block(k, k).T, side="right", lower=False)
        for i in range(k + 1, T):
            ta.syrk(A.block(i, i), A.block(i, k), alpha=-1.0, beta=1.0)
            for j in range(k + 1, i):
                ta.gemm(A.block(i, j), A.block(i, k), A.block(j, k).T, alpha=-1.0, beta=1.0)


async def echo_server(reader, writer):
    while data := await reader.readline():
        writer.write(data)
        await writer.drain()
    writer.close()
    await writer.wait_closed()


async def io_client(port, stop):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    n = 0
    while not stop.is_set():
        writer.write(b"ping %d\n" % n)
        await writer.drain()
        assert await reader.readline() == b"ping %d\n" % n
        n += 1
        await asyncio.sleep(0.001)
    writer.close()
    await writer.wait_closed()
    return n


async def main(n=2048, nb=256):
    T = n // nb
    rng = np.random.default_rng(0)
    m = rng.standard_normal((n, n))
    spd = m @ m.T + n * np.eye(n)
    A = ta.BlockArray.tiled((n, n), (nb, nb), np.float64)
    ta.copyto(A.all(), ta.asarray(spd))

    server = await asyncio.start_server(echo_server, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    stop = asyncio.Event()
    client = asyncio.create_task(io_client(port, stop))

    t0 = time.perf_counter()
    submit_cholesky(A, T)
    print(f"submitted {T} x {T} tiles in {(time.perf_counter() - t0) * 1e3:.1f} ms; the loop stays free")
    for k in range(T):
        await A.block(k, k)  # this diagonal tile is final once everything enrolled on it is done
        print(f"  diagonal tile {k} ready at {(time.perf_counter() - t0) * 1e3:7.1f} ms")
    await A.all()
    elapsed = time.perf_counter() - t0
    stop.set()
    pings = await client
    await asyncio.sleep(0.01)  # let the server side see the end of the stream
    server.close()
    await server.wait_closed()

    L = np.tril(np.asarray(A))
    err = np.abs(L @ L.T - spd).max() / np.abs(spd).max()
    print(f"Cholesky n={n} in {elapsed * 1e3:.1f} ms, relative error {err:.1e}; "
          f"{pings} echo round trips served meanwhile")
    assert err < 1e-12


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    asyncio.run(main(*args))
