"""The reference evaluator against hand-written NumPy: the convolution (n = 10^5, m = 16) and a
256-cube matrix product.  Ratios are measured in one run (evaluator time / NumPy time), best of 7."""
from __future__ import annotations

import numpy as np

import tensorlang as tl

from harness import best as best_of, options


def best(f) -> float:
    """The best of 7 runs after a warming one."""
    return best_of(f, 7, budget=float("inf"))


def main() -> list[tuple]:
    rng = np.random.default_rng(0)
    conv = tl.parse("x : [n + m - 1]R; c : [m]R; gen(i:n) sum(j:m) x[i + j] * c[j]")
    x, c = rng.normal(size=100_000 + 15), rng.normal(size=16)
    matmul = tl.parse("A : [n][n]R; B : [n][n]R; gen(i:n, j:n) sum(k:n) A[i, k] * B[k, j]")
    A, B = rng.normal(size=(256, 256)), rng.normal(size=(256, 256))
    rows = [
        ("convolution n=1e5 m=16", best(lambda: tl.evaluate(conv, x=x, c=c)),
         best(lambda: np.correlate(x, c, "valid")), "np.correlate"),
        ("matrix product 256^3", best(lambda: tl.evaluate(matmul, A=A, B=B)), best(lambda: A @ B), "A @ B (BLAS)"),
    ]
    print(f"{'program':<26} {'evaluator':>11} {'NumPy':>11} {'ratio':>7}  reference")
    for name, ours, theirs, ref in rows:
        print(f"{name:<26} {ours * 1e3:>9.2f}ms {theirs * 1e3:>9.2f}ms {ours / theirs:>7.1f}  {ref}")
    return rows


if __name__ == "__main__":
    options(__doc__).parse_args()
    main()
