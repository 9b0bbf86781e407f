"""GradBench's ``llsq``: the linear least squares ``1/2 sum_i (sign(t_i) - sum_j x_j t_i^j)^2`` over the
points ``t_i = -1 + 2 i / (n - 1)``, and its gradient in ``x``.

The program is the residual of a matrix-vector product, ``T[i][j] = t_i^j`` and ``s[i] = sign(t_i)`` its
data (the language has no power by an index); they depend on ``n`` and ``m`` only, so they are made once
per size, in the ``prepare`` timing of the first evaluation at that size (``runs``), not in ``evaluate``."""
from __future__ import annotations

import functools

import numpy as np

from .. import api as tl
from .runs import Function

LLSQ = tl.parse("""
x : [m]R
T : [n][m]R
s : [n]R
let r = gen(i:n) s[i] - sum(j:m) x[j] * T[i][j] in
0.5 * sum(i:n) r[i] * r[i]
""")


@functools.lru_cache(maxsize=4)
def points(n: int, m: int) -> tuple:
    """``T[i][j] = t_i^j`` and ``sign(t_i)`` for ``t_i = -1 + 2 i / (n - 1)``."""
    t = -1.0 + 2.0 * np.arange(n) / (n - 1.0)
    return np.cumprod(np.concatenate([np.ones((n, 1)), np.repeat(t[:, None], m - 1, axis=1)], axis=1), axis=1), \
        np.sign(t)


def _inputs(raw) -> tuple:
    x = np.asarray(raw["x"], dtype=np.float64)
    T, s = points(int(raw["n"]), x.shape[0])
    return x, T, s


def define() -> dict:
    primal, gradient = tl.compile(LLSQ), tl.compile(tl.grad(LLSQ, "x"))
    return {
        "primal": Function(_inputs, lambda x, T, s: primal(x=x, T=T, s=s), float),
        "gradient": Function(_inputs, lambda x, T, s: gradient(x=x, T=T, s=s), lambda g: g.tolist()),
    }
