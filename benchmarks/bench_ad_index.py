"""The cost of indexing in tensorlang.ad: ``for i in range(len(x)): s = s + x[i] * x[i]`` (the loop of
Zygote#365), its gradient time over its forward time against n.  ``x[i]`` of a 1-D float array is a
number, so the loop takes the inlined scalar rules, and the gradients of the entries read are appended
to two C arrays scattered once (``derive/ad/cotangent.py``): the ratio stays flat as n grows (a dense
zero array per ``x[i]`` would make it grow like n).  The same for the other common shapes of such a
loop: entries of an array the function makes (``y = np.tanh(x)``), neighbours (``x[i + 1] - x[i]``),
indices computed from an int argument (``x[n - 1 - i]``, ``x[k]``).

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


def of_tanh(x):
    y = np.tanh(x)
    s = 0.0
    for i in range(len(x)):
        s = s + y[i] * x[i]
    return s


def differences(x):
    s = 0.0
    for i in range(len(x) - 1):
        d = x[i + 1] - x[i]
        s = s + d * d
    return s


def reversed_with_k(x, n, k):
    s = 0.0
    for i in range(n):
        s = s + x[i] * x[n - 1 - i] + x[k]
    return s


def _expected_reversed(x, n, k):
    g = 2 * x[::-1]
    g[k] += n
    return g


# (the loop, its arguments for a vector x, its gradient in x)
PATTERNS = {
    "x[i] * x[i]": (sum_of_squares, lambda x: (x,), lambda x: 2 * x),
    "y = tanh(x); y[i] * x[i]": (of_tanh, lambda x: (x,), lambda x: np.tanh(x) + x / np.cosh(x) ** 2),
    "x[i + 1] - x[i]": (differences, lambda x: (x,),
                        lambda x: np.concatenate([[0.0], 2 * np.diff(x)]) - np.concatenate([2 * np.diff(x), [0.0]])),
    "x[n - 1 - i], x[k]": (reversed_with_k, lambda x: (x, len(x), 3), lambda x: _expected_reversed(x, len(x), 3)),
}


def _cpu(fn) -> float:
    t0 = time.thread_time()
    fn()
    return time.thread_time() - t0


def ratio(n, rounds=5, pattern="x[i] * x[i]"):
    """(forward seconds, gradient seconds, gradient / forward) of ``PATTERNS[pattern]``: best of ``rounds``
    interleaved rounds."""
    f, make, expected = PATTERNS[pattern]
    x = np.random.default_rng(0).normal(size=n)
    args = make(x)
    g = ad.gradient(f, *args)[0]
    assert np.allclose(g, expected(x)), pattern
    fwd = grad = float("inf")
    for _ in range(rounds):
        fwd = min(fwd, _cpu(lambda: f(*args)))
        grad = min(grad, _cpu(lambda: ad.gradient(f, *args)))
    return fwd, grad, grad / fwd


def main(quick: bool = False):
    print(f"{'loop':<26} {'n':>7} {'forward ms':>11} {'gradient ms':>12} {'ratio':>7}")
    for pattern in PATTERNS:
        for n in (1000, 4000, 16000):
            fwd, grad, r = ratio(n, 3 if quick else 7, pattern)
            print(f"{pattern:<26} {n:>7} {fwd * 1e3:>11.2f} {grad * 1e3:>12.2f} {r:>7.1f}")


if __name__ == "__main__":
    main(options(__doc__, "fewer repetitions").parse_args().quick)
