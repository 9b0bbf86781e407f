"""GradBench's ``kmeans``: the cost ``sum_i min_k |p_i - c_k|^2`` of centroids ``c`` and the Newton
direction ``dir = g / (H 1)`` (the gradient in ``c`` over the Hessian along the all-ones direction, entry by
entry).

The cost is a tensor program with a min-reduction (``COST``), compiled.  Its squared distances are written
as GradBench's JAX and PyTorch tools write theirs, ``|p_i|^2 + |c_k|^2 - 2 p_i . c_k``: the products of
points and centroids are one contraction, which the compiled kernel hands to BLAS (``codegen.contract``),
where ``examples/kmeans.tl``'s ``sum(a:d) (p[i, a] - c[j, a])^2`` is a loop over every pair and coordinate
(the same minimum up to rounding: the expanded form loses digits to cancellation for points far from the
centroids' scale, as the peers' does).  Its
gradient in ``c`` is the language's own, ``tl.grad`` (a point's cotangent goes to its nearest centroid,
split equally between equally near ones), and the Hessian along ones is that gradient's forward derivative
(``tl.derivative(gradient, ["c"])``) with ``dc = 1``: the gradient and its derivative compiled as one
program, their common statements computed once (``value_and_derivative``), so ``dir`` is one kernel call.
(``ad.jvp`` of ``ad.grad`` of the cost kernel, as GradBench's JAX tool writes it, gives the same numbers
but runs the cost's adjoint in every input, ``p`` too, and the derivative of that: 5.1 ms where this takes
2.6 ms at k = 100, n = 1,000, d = 8, load average 0.5-0.8.)"""
from __future__ import annotations

import numpy as np

from .. import api as tl
from ..derive.api import value_and_derivative
from .runs import Function

COST = """
p : [n][d]R
c : [k][d]R
let pc = gen(i:n, j:k) sum(a:d) p[i, a] * c[j, a] in
let pp = gen(i:n) sum(a:d) p[i, a] * p[i, a] in
let cc = gen(j:k) sum(a:d) c[j, a] * c[j, a] in
sum(i:n) min(j:k) pp[i] + cc[j] - 2 * pc[i, j]
"""

# the compiled cost, and its gradient in c paired with that gradient's derivative in c, made by ``define``
KERNEL = GRADIENT_AND_DERIVATIVE = None
TANGENT = "dc"   # the derivative's input that takes the direction (its name, from ``value_and_derivative``)


def cost(points, centroids):
    return KERNEL(p=points, c=centroids)


def direction(points, centroids):
    g, h = GRADIENT_AND_DERIVATIVE(p=points, c=centroids, **{TANGENT: np.ones(centroids.shape)})
    with np.errstate(invalid="ignore"):   # a centroid without points: 0 / 0, NaN, as JAX's tool gives
        return g / h


def _inputs(raw) -> tuple:
    return np.asarray(raw["points"], dtype=np.float64), np.asarray(raw["centroids"], dtype=np.float64)


def define() -> dict:
    global KERNEL, GRADIENT_AND_DERIVATIVE, TANGENT
    program = tl.parse(COST)
    both, tangents = value_and_derivative(tl.grad(program, "c"), ["c"])
    KERNEL, GRADIENT_AND_DERIVATIVE, TANGENT = tl.compile(program), tl.compile(both), tangents["c"]
    return {"cost": Function(_inputs, cost, float), "dir": Function(_inputs, direction, lambda d: d.tolist())}
