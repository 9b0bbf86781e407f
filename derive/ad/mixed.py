"""Mixed-mode AD (LANGUAGE.md section 4): ``jvp`` (forward mode), ``jacobian`` (forward or reverse by the
shapes), ``hessian`` and ``hvp`` (forward over reverse), and ``forwarddiff`` (a Jacobian computed in
forward mode inside a reverse pass, stored and applied in the pullback, as Zygote's ``forwarddiff``).
"""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError, TensorLangError
from . import forward  # noqa: F401  (registers the forward rules)
from .runtime import kind_of
from .ir import NUM
from .tangent import JVP, TSTORE, zero


def jvp(f, primals, tangents):
    """``(f(*primals), J v)``: the value and the directional derivative of ``f`` at ``primals`` along
    ``tangents`` (one per primal, mirroring its structure; None is zero), by forward mode."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise TensorLangError(f"ad.jvp: {len(primals)} primals but {len(tangents)} tangents")
    for i, (x, t) in enumerate(zip(primals, tangents)):
        _check_tangent(x, t, f"tangents[{i}]")
    outer, TSTORE[0] = TSTORE[0], {}
    try:
        y, ty = JVP(f, None, primals, tangents)
    finally:
        TSTORE[0] = outer
    return y, _dense_out(ty, y)


def _check_tangent(x, t, where):
    if t is None:
        return
    if type(x) is np.ndarray or type(t) is np.ndarray:
        if np.shape(x) != np.shape(t):
            raise ShapeError(f"ad.jvp: {where} has shape {np.shape(t)}, its primal {np.shape(x)}")
    elif isinstance(x, (list, tuple)) and type(x) in (list, tuple):
        if not isinstance(t, (list, tuple)) or len(t) != len(x):
            raise ShapeError(f"ad.jvp: {where} must be a {type(x).__name__} of {len(x)} tangents")
        for k, (xi, ti) in enumerate(zip(x, t)):
            _check_tangent(xi, ti, f"{where}[{k}]")
    elif kind_of(x) == NUM and kind_of(t) not in (NUM, "int"):
        raise TensorLangError(f"ad.jvp: {where} must be a number (its primal is {type(x).__name__})")


def _dense_out(ty, y):
    """A zero of the output's type for an output that does not depend on the inputs."""
    return zero(y) if ty is None else ty

