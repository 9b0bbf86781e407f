"""GradBench's ``gmm``: the log-likelihood of a Gaussian mixture with a Wishart prior, in the mixture's
weights ``alpha``, means ``mu`` and inverse covariance factors (``q`` the logs of their diagonals, ``l`` their
strictly lower triangles, packed by columns), and its gradient in all four, by ``tensorlang.ad`` on the
NumPy program (the tensor language has no max-reduction for the stable log-sum-exp and cannot index a
packed triangle, docs/gradbench.md).

The packed triangles are unpacked by a product with a constant 0/1 matrix (made once per dimension), not by
writing into an array, so the program is purely functional; ``scipy.special.logsumexp`` and
``multigammaln`` have rules of their own."""
from __future__ import annotations

import functools
import math

import numpy as np
import scipy.special as sc

from .. import ad
from .runs import Function


@functools.lru_cache(maxsize=8)
def unpacking(d: int) -> np.ndarray:
    """The ``(d (d - 1) / 2, d * d)`` matrix that puts a packed strictly lower triangle (by columns) in place."""
    P = np.zeros((d * (d - 1) // 2, d * d))
    entry = 0
    for col in range(d - 1):
        for row in range(col + 1, d):
            P[entry, row * d + col] = 1.0
            entry += 1
    return P


def objective(alpha, mu, q, l, x, m, gamma, P):
    n, d = x.shape
    k = alpha.shape[0]
    Qdiags = np.exp(q)
    sum_qs = np.sum(q, axis=1)
    Ls = (l @ P).reshape(k, d, d)
    xcentered = x[:, None, :] - mu[None, :, :]
    Lx = Qdiags[None, :, :] * xcentered + np.einsum("ijk,mik->mij", Ls, xcentered)
    inner = alpha[None, :] + sum_qs[None, :] - 0.5 * np.sum(Lx * Lx, axis=2)
    slse = np.sum(sc.logsumexp(inner, axis=1))
    p = d + m + 1
    prior = -np.sum(0.5 * gamma * gamma * (np.sum(Qdiags * Qdiags, axis=1) + np.sum(l * l, axis=1)) - m * sum_qs) \
        + k * (p * d * math.log(gamma / math.sqrt(2)) - sc.multigammaln(0.5 * p, d))
    return -n * d * 0.5 * math.log(2 * math.pi) + slse - n * sc.logsumexp(alpha) + prior


_GRADIENT = ad.grad(objective, argnums=(0, 1, 2, 3))


def _inputs(raw) -> tuple:
    arrays = [np.asarray(raw[name], dtype=np.float64) for name in ("alpha", "mu", "q", "l", "x")]
    d = int(raw["d"])
    l = arrays[3].reshape(arrays[0].shape[0], d * (d - 1) // 2)
    return arrays[0], arrays[1], arrays[2], l, arrays[4], float(raw["m"]), float(raw["gamma"]), unpacking(d)


def _jacobian(grads) -> dict:
    return {name: g.tolist() for name, g in zip(("alpha", "mu", "q", "l"), grads)}


def define() -> dict:
    return {"objective": Function(_inputs, objective, float), "jacobian": Function(_inputs, _GRADIENT, _jacobian)}
