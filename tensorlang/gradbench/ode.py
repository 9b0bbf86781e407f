"""GradBench's ``ode``: ``s`` steps of fourth-order Runge-Kutta from ``y = 0`` to ``t = 2`` on
``y0' = x0``, ``yi' = xi y(i-1)``, the final state (primal) and the gradient of its last entry in ``x``, by
``tensorlang.ad`` on the NumPy solver (a Python loop over the steps, differentiated without tracing)."""
from __future__ import annotations

import numpy as np

from .. import ad
from .runs import Function


def field(x, y):
    """The right-hand side: ``x0`` first, then ``xi * y(i-1)``."""
    return np.concatenate((x[:1], x[1:] * y[:-1]))


def solve(x, s):
    h = 2.0 / s
    y = np.zeros_like(x)
    for _ in range(s):
        k1 = field(x, y)
        k2 = field(x, y + h / 2 * k1)
        k3 = field(x, y + h / 2 * k2)
        k4 = field(x, y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


def last(x, s):
    return solve(x, s)[-1]


_GRADIENT = ad.grad(last)


def _inputs(raw) -> tuple:
    return np.asarray(raw["x"], dtype=np.float64), int(raw["s"])


def define() -> dict:
    return {"primal": Function(_inputs, solve, lambda y: y.tolist()),
            "gradient": Function(_inputs, _GRADIENT, lambda g: g.tolist())}
