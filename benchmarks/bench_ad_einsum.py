"""Whether ``np.einsum`` under ``tensorlang.ad`` should be contracted by a compiled tensorlang program:
a matrix product ``ij,jk->ik`` and a three-operand chain ``ij,jk,kl->il`` against n, each timed as
NumPy's ``np.einsum`` as called (no ``optimize``: one loop over every index), NumPy with
``optimize=True`` (pairwise contractions through BLAS), the equivalent tensorlang program compiled to C
(``tl.compile``; its compile time apart), and the gradient of ``sum(einsum(...) * w)`` in the first
operand through ``ad.gradient`` over the forward.

Run: ``python benchmarks/bench_ad_einsum.py`` (``--quick`` for fewer repetitions).  All columns of a
row are timed interleaved in one run, best of the rounds; CPU time of the thread (``time.thread_time``)."""
from __future__ import annotations

import time

import numpy as np

import tensorlang as tl
from tensorlang import ad

from harness import options

CASES = {
    "ij,jk->ik": "gen(i:n, k:n) sum(j:n) A[i, j] * B[j, k]",
    "ij,jk,kl->il": "gen(i:n, l:n) sum(j:n, k:n) A[i, j] * B[j, k] * C[k, l]",
}
NAMES = "ABC"


def _cpu(fn) -> float:
    t0 = time.thread_time()
    fn()
    return time.thread_time() - t0


def row(spec, n, rounds):
    rng = np.random.default_rng(0)
    k = spec.count(",") + 1
    ops = [rng.normal(size=(n, n)) for _ in range(k)]
    w = rng.normal(size=(n, n))
    decls = {name: "[n][n]R" for name in NAMES[:k]}
    t0 = time.perf_counter()
    kernel = tl.compile(tl.parse(CASES[spec], **decls))
    compile_s = time.perf_counter() - t0
    inputs = dict(zip(NAMES, ops))
    assert np.allclose(kernel(**inputs), np.einsum(spec, *ops))
    if k == 2:
        loss = lambda a: np.sum(np.einsum(spec, a, ops[1]) * w)   # noqa: E731
    else:
        loss = lambda a: np.sum(np.einsum(spec, a, ops[1], ops[2]) * w)   # noqa: E731
    ad.gradient(loss, ops[0])
    runs = {
        "numpy": lambda: np.einsum(spec, *ops),
        "numpy optimize": lambda: np.einsum(spec, *ops, optimize=True),
        "tensorlang": lambda: kernel(**inputs),
        "forward": lambda: loss(ops[0]),
        "gradient": lambda: ad.gradient(loss, ops[0]),
    }
    best = {name: float("inf") for name in runs}
    for _ in range(rounds):
        for name, fn in runs.items():
            best[name] = min(best[name], _cpu(fn))
    return best, compile_s


def main(quick=False):
    rounds = 3 if quick else 7
    print(f"{'einsum':>14} {'n':>4} {'numpy ms':>9} {'optimize ms':>11} {'tensorlang ms':>13} "
          f"{'tl/numpy':>8} {'tl/optimize':>11} {'compile s':>9} {'grad/fwd':>8}")
    for spec in CASES:
        for n in (16, 32, 64):
            b, c = row(spec, n, rounds)
            print(f"{spec:>14} {n:>4} {b['numpy'] * 1e3:9.3f} {b['numpy optimize'] * 1e3:11.3f} "
                  f"{b['tensorlang'] * 1e3:13.3f} {b['tensorlang'] / b['numpy']:8.2f} "
                  f"{b['tensorlang'] / b['numpy optimize']:11.2f} {c:9.2f} {b['gradient'] / b['forward']:8.2f}")


if __name__ == "__main__":
    main(options(__doc__, "fewer repetitions").parse_args().quick)
