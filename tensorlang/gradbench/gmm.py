"""GradBench's ``gmm``: the log-likelihood of a Gaussian mixture with a Wishart prior, in the mixture's
weights ``alpha``, means ``mu`` and inverse covariance factors (``q`` the logs of their diagonals, ``l`` their
strictly lower triangles, packed by columns), and its gradient in all four.

The objective is one tensor program (``MIXTURE``), compiled: the sum over the points of each point's
log-sum-exp over the components shifted by their maximum (a max-reduction, so that no ``exp`` overflows
where a point is far from every mean), the weights' log-sum-exp shifted the same way, and the Wishart prior.
Around it, in NumPy: the packed triangles unpacked (``unpacking``: for small ``d`` a product with a constant
0/1 matrix, for larger ones a gather; either made once per dimension, so the program is purely functional)
and the constant terms (``multigammaln``), which no argument moves.  ``ad.grad`` differentiates the whole in
the four parameters: the kernel through its compiled adjoint in ``alpha``, ``mu``, ``q`` and ``L`` (the points
``x``, ``gamma`` and ``m`` are left out of ``argnums``, so not differentiated), the unpacking by its
transpose (the gather's: a scatter-add)."""
from __future__ import annotations

import functools
import math

import numpy as np
import scipy.special as sc

from .. import ad
from .. import api as tl
from .runs import Function, warm

MIXTURE = """
x : [n][d]R
alpha : [k]R
mu : [k][d]R
q : [k][d]R
L : [k][d][d]R
gamma : R
m : R
let y = gen(i:n, j:k, a:d) exp(q[j, a]) * (x[i, a] - mu[j, a]) + sum(b:d) [b < a] * L[j, a, b] * (x[i, b] - mu[j, b]) in
let e = gen(i:n, j:k) alpha[j] + (sum(a:d) q[j, a]) - 0.5 * (sum(a:d) y[i, j, a] * y[i, j, a]) in
let s = gen(i:n) max(j:k) e[i, j] in
let top = max(j:k) alpha[j] in
(sum(i:n) s[i] + log(sum(j:k) exp(e[i, j] - s[i])) - top - log(sum(j:k) exp(alpha[j] - top)))
 - (sum(j:k, a:d) 0.5 * gamma * gamma * exp(q[j, a]) * exp(q[j, a]) - m * q[j, a])
 - (sum(j:k, a:d, b:d) [b < a] * 0.5 * gamma * gamma * L[j, a, b] * L[j, a, b])
"""


# the largest d whose packed triangles are unpacked by a product with a 0/1 matrix, O(k d^4), and beyond it by a
# gather, O(k d^2): at d = 10 the two cost tensorlang.ad's gradient the same; at d = 64, k = 50, n = 1,000 the
# objective took 46 ms with the product and 29 with the gather, its gradient 87 and 77
PRODUCT_UNPACKING_MAX = 16


@functools.lru_cache(maxsize=8)
def unpacking(d: int) -> np.ndarray:
    """What puts a strictly lower triangle packed by columns in place in a ``d x d`` matrix (row-major): up to
    ``PRODUCT_UNPACKING_MAX``, the ``(d (d - 1) / 2, d * d)`` 0/1 matrix of a product; beyond, for each of the
    matrix's entries the position of its packed value, ``d (d - 1) / 2`` (a zero appended) where it has none."""
    positions = np.array([row * d + col for col in range(d - 1) for row in range(col + 1, d)], dtype=np.int64)
    if d > PRODUCT_UNPACKING_MAX:
        reads = np.full(d * d, len(positions))
        reads[positions] = np.arange(len(positions))
        return reads
    P = np.zeros((len(positions), d * d))
    P[np.arange(len(positions)), positions] = 1.0
    return P


KERNEL = None   # the compiled objective, made by ``define``


def objective(alpha, mu, q, l, x, m, gamma, P):
    n, d = x.shape
    k = alpha.shape[0]
    p = d + m + 1
    constant = -n * d * 0.5 * math.log(2 * math.pi) \
        + k * (p * d * math.log(gamma / math.sqrt(2)) - sc.multigammaln(0.5 * p, d))
    L = (l @ P) if P.ndim == 2 else np.concatenate((l, np.zeros((k, 1))), axis=1)[:, P]
    return constant + KERNEL(x=x, alpha=alpha, mu=mu, q=q, L=L.reshape(k, d, d), gamma=gamma, m=m)


_GRADIENT = ad.grad(objective, argnums=(0, 1, 2, 3))


def _inputs(raw) -> tuple:
    arrays = [np.asarray(raw[name], dtype=np.float64) for name in ("alpha", "mu", "q", "l", "x")]
    d = int(raw["d"])
    l = arrays[3].reshape(arrays[0].shape[0], d * (d - 1) // 2)
    return arrays[0], arrays[1], arrays[2], l, arrays[4], float(raw["m"]), float(raw["gamma"]), unpacking(d)


def _jacobian(grads) -> dict:
    return {name: g.tolist() for name, g in zip(("alpha", "mu", "q", "l"), grads)}


_SMALLEST = {"d": 2, "alpha": [0.0], "mu": [[0.0, 0.0]], "q": [[0.0, 0.0]], "l": [0.0], "x": [[1.0, 2.0]], "m": 0,
             "gamma": 1.0}


def define() -> dict:
    global KERNEL
    KERNEL = tl.compile(tl.parse(MIXTURE))
    warm(objective, *_inputs(_SMALLEST))
    warm(_GRADIENT, *_inputs(_SMALLEST))   # the kernel of the value and gradient built now, in define
    return {"objective": Function(_inputs, objective, float), "jacobian": Function(_inputs, _GRADIENT, _jacobian)}
