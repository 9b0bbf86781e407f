"""GradBench's ``kmeans``: the cost ``sum_i min_k |p_i - c_k|^2`` of centroids ``c`` and the Newton
direction ``dir = g / (H 1)`` (the gradient in ``c`` over the Hessian along the all-ones direction, entry by
entry).

The cost is a tensor program with a min-reduction (``COST``, as ``examples/kmeans.tl``), compiled; its
gradient is ``ad.grad`` through the kernel's compiled adjoint (a point's cotangent goes to its nearest
centroid, split equally between equally near ones) and the Hessian along ones forward over reverse
(``ad.jvp`` of the gradient: the compiled derivative of the adjoint), as GradBench's JAX tool does with
``jax.jvp(jax.grad(...))``."""
from __future__ import annotations

import numpy as np

from .. import ad
from .. import api as tl
from .runs import Function

COST = """
p : [n][d]R
c : [k][d]R
sum(i:n) min(j:k) sum(a:d) (p[i, a] - c[j, a]) * (p[i, a] - c[j, a])
"""


KERNEL = None   # the compiled cost, made by ``define``


def cost(points, centroids):
    return KERNEL(p=points, c=centroids)


_GRADIENT = ad.grad(cost, argnums=1)


def direction(points, centroids):
    g, h = ad.jvp(lambda c: _GRADIENT(points, c), (centroids,), (np.ones(centroids.shape),))
    with np.errstate(invalid="ignore"):   # a centroid without points: 0 / 0, NaN, as JAX's tool gives
        return g / h


def _inputs(raw) -> tuple:
    return np.asarray(raw["points"], dtype=np.float64), np.asarray(raw["centroids"], dtype=np.float64)


def define() -> dict:
    global KERNEL
    KERNEL = tl.compile(tl.parse(COST))
    direction(np.zeros((2, 1)), np.ones((2, 1)))   # the derivative kernels built now, in define
    return {"cost": Function(_inputs, cost, float), "dir": Function(_inputs, direction, lambda d: d.tolist())}
