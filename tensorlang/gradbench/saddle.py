"""GradBench's ``saddle``: the saddle point of ``f(x, y) = (x0^2 + x1^2) - (y0^2 + y1^2)`` by gradient descent
(``descent``), each search starting at the given point: ``x`` minimising ``max_y f(x, y)`` (the maximum
itself found by gradient ascent in ``y``), then ``y`` maximising ``f(x, y)`` at that ``x``.

Nested AD: the descent in ``x`` needs the derivative of ``max_y f(x, y)``, a function that runs an ascent
with gradients in ``y`` (the inner derivative); the outer one differentiates through that ascent, its loop
and its inner gradients.  The eval's four functions name the modes, outer then inner: ``rr`` is ``ad.grad``
of a maximum found with ``ad.grad`` (reverse over reverse), ``fr`` a JVP per coordinate of it (forward
over reverse); the final ascent in ``y`` uses the outer mode.  ``rf`` and ``ff`` take the inner gradient by
forward mode, a JVP per coordinate, differentiated by ``ad.grad`` (reverse over forward) or by JVPs (forward
over forward: ``derive/ad/over_forward.py``)."""
from __future__ import annotations

import numpy as np

from .. import ad
from . import descent
from .runs import Function


def f(x, y):
    return (x[0] ** 2 + x[1] ** 2) - (y[0] ** 2 + y[1] ** 2)


def _reverse(g, argnum):
    """The gradient of ``g(a, b)`` in argument ``argnum`` by reverse mode."""
    return ad.grad(g, argnums=argnum)


def _forward(g, argnum):
    """The gradient of ``g(a, b)`` in argument ``argnum`` by forward mode: one JVP per coordinate."""
    def gradient(a, b):
        v = (a, b)[argnum]
        return np.array([ad.jvp(g, (a, b), (e, None) if argnum == 0 else (None, e))[1] for e in np.eye(len(v))])
    return gradient


def maximum(x, search):
    """``max_y f(x, y)``, by ascent from ``start`` with ``inner``, the gradient of ``f`` in ``y``
    (``search = (start, inner)``)."""
    start, inner = search
    y = descent.argmax(lambda v: f(x, v), lambda v: inner(x, v), start)
    return f(x, y)


def saddle(start, outer, inner):
    search = (start, inner(f, 1))
    outer_gradient = outer(maximum, 0)
    x = descent.argmin(lambda v: maximum(v, search), lambda v: outer_gradient(v, search), start)
    final_gradient = outer(f, 1)
    y = descent.argmax(lambda v: f(x, v), lambda v: final_gradient(x, v), start)
    return np.concatenate((x, y))


_MODES = {"rr": (_reverse, _reverse), "fr": (_forward, _reverse), "rf": (_reverse, _forward), "ff": (_forward, _forward)}


def _inputs(outer, inner):
    return lambda raw: (np.asarray(raw["start"], dtype=np.float64), outer, inner)


def define() -> dict:
    return {name: Function(_inputs(outer, inner), saddle, lambda p: p.tolist()) for name, (outer, inner) in _MODES.items()}
