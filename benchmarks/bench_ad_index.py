"""The cost of indexing in tensorlang.ad: ``for i in range(len(x)): s = s + x[i] * x[i]`` (the loop of
Zygote#365), its gradient time over its forward time against n.  ``x[i]`` of a 1-D float array is a
number, so the loop takes the inlined scalar rules, and the gradients of the entries read are appended
to two C arrays scattered once (``derive/ad/cotangent.py``): the ratio stays flat as n grows (a dense
zero array per ``x[i]`` would make it grow like n).

Run: ``python benchmarks/bench_ad_index.py`` (``--quick`` for fewer repetitions).  Forward and gradient
are timed interleaved, each keeping its best round, in one run.  Times are the CPU time of the thread
(``time.thread_time``), not wall-clock time: on a machine shared with other jobs a run of 10 ms is
preempted and waits for a core far more often than one of 1 ms, which would inflate the ratio of the
longer run (the gradient) by the machine's load, not by its own work."""
from __future__ import annotations

import time

import numpy as np

from tensorlang import ad

from harness import options


def sum_of_squares(x):
    s = 0.0
    for i in range(len(x)):
        s = s + x[i] * x[i]
    return s


def _cpu(fn) -> float:
    t0 = time.thread_time()
    fn()
    return time.thread_time() - t0


def ratio(n, rounds=5):
    """(forward seconds, gradient seconds, gradient / forward): best of ``rounds`` interleaved rounds."""
    x = np.random.default_rng(0).normal(size=n)
    g, = ad.gradient(sum_of_squares, x)
    assert np.allclose(g, 2 * x)
    fwd = grad = float("inf")
    for _ in range(rounds):
        fwd = min(fwd, _cpu(lambda: sum_of_squares(x)))
        grad = min(grad, _cpu(lambda: ad.gradient(sum_of_squares, x)))
    return fwd, grad, grad / fwd


def main(quick: bool = False):
    print(f"{'n':>7} {'forward ms':>11} {'gradient ms':>12} {'ratio':>7}")
    for n in (1000, 4000, 16000):
        fwd, grad, r = ratio(n, 3 if quick else 7)
        print(f"{n:>7} {fwd * 1e3:>11.2f} {grad * 1e3:>12.2f} {r:>7.1f}")


if __name__ == "__main__":
    main(options(__doc__, "fewer repetitions").parse_args().quick)
