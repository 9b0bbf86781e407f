"""The cost of indexing in tensorlang.ad: ``for i in range(len(x)): s = s + x[i] * x[i]`` (the loop of
Zygote#365), its gradient time over its forward time against n.  Each ``x[i]``'s pullback adds into one
indexed cotangent of x (``derive/ad/cotangent.py``), so the ratio stays flat as n grows; a dense zero
array per ``x[i]`` would make it grow like n.

Run: ``python benchmarks/bench_ad_index.py`` (``--quick`` for fewer repetitions).  Forward and gradient
are timed interleaved, each keeping its best round, on the same machine in one run."""
from __future__ import annotations

import sys
import timeit

import numpy as np

from tensorlang import ad


def sum_of_squares(x):
    s = 0.0
    for i in range(len(x)):
        s = s + x[i] * x[i]
    return s


def ratio(n, rounds=5):
    """(forward seconds, gradient seconds, gradient / forward): best of ``rounds`` interleaved rounds."""
    x = np.random.default_rng(0).normal(size=n)
    g, = ad.gradient(sum_of_squares, x)
    assert np.allclose(g, 2 * x)
    fwd = grad = float("inf")
    for _ in range(rounds):
        fwd = min(fwd, timeit.timeit(lambda: sum_of_squares(x), number=1))
        grad = min(grad, timeit.timeit(lambda: ad.gradient(sum_of_squares, x), number=1))
    return fwd, grad, grad / fwd


def main(argv=()):
    quick = "--quick" in argv
    print(f"{'n':>7} {'forward ms':>11} {'gradient ms':>12} {'ratio':>7}")
    for n in (1000, 4000, 16000):
        fwd, grad, r = ratio(n, 3 if quick else 7)
        print(f"{n:>7} {fwd * 1e3:>11.2f} {grad * 1e3:>12.2f} {r:>7.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
