"""GradBench's ``particle``: the control ``w`` that sends a charged particle, pushed by the charges at (10, 10 - w)
and (10, 0) and integrated by Euler's method until it crosses the x-axis, through the origin: the argmin in
``w`` of the square of where it crosses, by gradient descent (``descent``).

Nested AD: each Euler step needs the force, the gradient in ``x`` of the potential (the inner derivative),
and the descent needs the derivative in ``w`` of the whole simulation (the outer one), through the inner
gradients.  The eval's four functions name the modes, outer then inner: ``rr`` is ``ad.grad`` of a
simulation that calls ``ad.grad`` (reverse over reverse), ``fr`` its ``ad.jvp`` (forward over reverse);
``rf`` and ``ff`` take the inner gradient by forward mode, a JVP per coordinate, under ``ad.grad`` (reverse
over forward) and ``ad.jvp`` (forward over forward) of the simulation (``derive/ad/over_forward.py``)."""
from __future__ import annotations

import numpy as np

from .. import ad
from . import descent
from .runs import Function


def potential(x, w):
    """``1 / |x - (10, 10 - w)| + 1 / |x - (10, 0)|``, written on the two coordinates (the vector form, with
    reductions along an axis, made the nested gradient 5x slower)."""
    return 1.0 / np.sqrt((x[0] - 10.0) ** 2 + (x[1] - 10.0 + w) ** 2) + 1.0 / np.sqrt((x[0] - 10.0) ** 2 + x[1] ** 2)


_FORCE = ad.grad(potential)


def _force_reverse(x, w):
    return _FORCE(x, w)


def _force_forward(x, w):
    return np.array([ad.jvp(potential, (x, w), (e, None))[1] for e in np.eye(2)])


def miss(w, force):
    """Where the particle crosses the x-axis, squared (``x`` at the crossing, by linear interpolation of the
    last step), for the control ``w``."""
    x, xdot, dt = np.array([0.0, 8.0]), np.array([0.75, 0.0]), 0.1
    while True:
        xddot = -force(x, w)
        x_new = x + dt * xdot
        if x_new[1] <= 0:
            break
        x, xdot = x_new, xdot + dt * xddot
    crossing = x - x[1] / xdot[1] * xdot
    return crossing[0] ** 2


def _outer_reverse(force):
    derivative = ad.grad(miss)
    return lambda w: np.array([derivative(w[0], force)])


def _outer_forward(force):
    return lambda w: np.array([ad.jvp(miss, (w[0], force), (1.0, None))[1]])


def solve(outer, force, w0):
    return descent.argmin(lambda w: miss(w[0], force), outer(force), np.array([w0]))[0]


_MODES = {"rr": (_outer_reverse, _force_reverse), "fr": (_outer_forward, _force_reverse),
          "rf": (_outer_reverse, _force_forward), "ff": (_outer_forward, _force_forward)}


def _inputs(outer, force):
    return lambda raw: (outer, force, float(raw["w"]))


def define() -> dict:
    return {name: Function(_inputs(outer, force), solve, float) for name, (outer, force) in _MODES.items()}
