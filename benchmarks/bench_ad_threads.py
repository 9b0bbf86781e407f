"""A map-reduce gradient through threads (paper 002, section 4: 1.5x on two cores): the loss is a sum over
chunks computed by ``ThreadPoolExecutor.map``, differentiated by ``tensorlang.ad`` (the chunks' pullbacks
run in parallel too), with 1 and with 2 worker threads, in one run.

Two kinds of work per chunk: a compiled tensorlang kernel (the deconvolution loss of
``examples/deconv_loss.tl``, whose C code is called through ctypes, which releases the GIL) and NumPy
elementwise work (``np.tanh``/``np.sin`` on large arrays, which also release it).  Each configuration is
timed ``--repeats`` times (interleaved: 1 thread, 2 threads, 1 thread, ...) and keeps its best; the
speed-up is the ratio of the two best times.

Run: ``python benchmarks/bench_ad_threads.py [--quick]``.
"""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import tensorlang as tl
from tensorlang import ad
from tensorlang.codegen import compile as tl_compile

from harness import options

ROOT = Path(__file__).resolve().parent.parent


def kernel_case(chunks, n, m):
    k = tl_compile(tl.parse((ROOT / "examples" / "deconv_loss.tl").read_text()))
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n + m - 1)
    zs = [rng.standard_normal(n) for _ in range(chunks)]
    c = rng.standard_normal(m)

    def make(pool):
        def loss(c):
            return sum(pool.map(lambda z: k(x=x, c=c, z=z), zs))
        return loss
    return make, c


def numpy_case(chunks, n):
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(n) for _ in range(chunks)]
    w = np.array([0.7, -0.3])

    def make(pool):
        def loss(w):
            return sum(pool.map(lambda x: np.sum(np.tanh(w[0] * x) * np.sin(w[1] * x)), xs))
        return loss
    return make, w


def best(f, arg, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f(arg)
        times.append(time.perf_counter() - t)
    return min(times)


def measure(name, make, arg, repeats):
    pools = {1: ThreadPoolExecutor(1), 2: ThreadPoolExecutor(2)}
    losses = {p: make(pool) for p, pool in pools.items()}
    g1, g2 = ad.gradient(losses[1], arg)[0], ad.gradient(losses[2], arg)[0]   # warm: transform, build adjoints
    assert np.allclose(g1, g2, rtol=1e-12), "threaded gradient differs"
    fwd = {1: [], 2: []}
    grad = {1: [], 2: []}
    for _ in range(repeats):   # interleaved, so that load from other jobs hits both alike
        for p in (1, 2):
            fwd[p].append(best(losses[p], arg, 1))
            grad[p].append(best(lambda a: ad.gradient(losses[p], a), arg, 1))
    f1, f2, d1, d2 = min(fwd[1]), min(fwd[2]), min(grad[1]), min(grad[2])
    for pool in pools.values():
        pool.shutdown()
    print(f"| {name} | {f1 * 1e3:.1f} ms | {f2 * 1e3:.1f} ms | {f1 / f2:.2f}x | {d1 * 1e3:.1f} ms | "
          f"{d2 * 1e3:.1f} ms | {d1 / d2:.2f}x |")


def main(quick: bool = False):
    repeats = 3 if quick else 7
    print(f"# {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start, best of {repeats}")
    print("| work per chunk | forward, 1 thread | forward, 2 threads | speed-up | gradient, 1 thread | "
          "gradient, 2 threads | speed-up |")
    print("|---|---|---|---|---|---|---|")
    n = 50_000 if quick else 200_000
    measure(f"tensorlang kernel (deconv loss, 8 chunks, n={n}, m=16)", *kernel_case(8, n, 16), repeats)
    measure(f"NumPy tanh/sin (8 chunks of {4 * n})", *numpy_case(8, 4 * n), repeats)
    print(f"# load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main(options(__doc__, "smaller chunks, 3 repeats instead of 7").parse_args().quick)
