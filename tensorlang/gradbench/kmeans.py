"""GradBench's ``kmeans``: the cost ``sum_i min_k |p_i - c_k|^2`` of centroids ``c`` and the Newton
direction ``dir = g / (H 1)`` (the gradient in ``c`` over the Hessian along the all-ones direction, entry by
entry).

This eval is Python differentiated by ``tensorlang.ad`` (the language's ``min(k:K) e`` writes the cost too:
``examples/kmeans.tl``): the cost in NumPy (squared distances by one matrix product, then the minimum over
centroids), its gradient by ``ad.grad`` and the Hessian along ones by forward over reverse (``ad.jvp`` of
the gradient), as GradBench's JAX tool does with ``jax.jvp(jax.grad(...))``."""
from __future__ import annotations

import numpy as np

from .. import ad
from .runs import Function


def cost(points, centroids):
    distances = (np.sum(points * points, axis=1)[:, None] + np.sum(centroids * centroids, axis=1)[None, :]
                 - 2.0 * (points @ centroids.T))
    return np.sum(np.min(distances, axis=1))


_GRADIENT = ad.grad(cost, argnums=1)


def direction(points, centroids):
    g, h = ad.jvp(lambda c: _GRADIENT(points, c), (centroids,), (np.ones(centroids.shape),))
    with np.errstate(invalid="ignore"):   # a centroid without points: 0 / 0, NaN, as JAX's tool gives
        return g / h


def _inputs(raw) -> tuple:
    return np.asarray(raw["points"], dtype=np.float64), np.asarray(raw["centroids"], dtype=np.float64)


def define() -> dict:
    return {"cost": Function(_inputs, cost, float), "dir": Function(_inputs, direction, lambda d: d.tolist())}
