"""GradBench's ``det``: the determinant of an ``ell x ell`` matrix (given flat, in row order) and its
gradient, by ``tensorlang.ad``: ``ad.grad(np.linalg.det)``, whose rule is the cofactor matrix (right at
singular matrices too).  (GradBench's manual tool expands by minors, ``ell!`` work; the LU factorisation is
``ell^3``.)"""
from __future__ import annotations

import numpy as np

from .. import ad
from .runs import Function

_GRADIENT = ad.grad(np.linalg.det)


def _matrix(raw) -> tuple:
    ell = int(raw["ell"])
    return (np.asarray(raw["A"], dtype=np.float64).reshape(ell, ell),)


def define() -> dict:
    return {"primal": Function(_matrix, np.linalg.det, float),
            "gradient": Function(_matrix, _GRADIENT, lambda g: g.ravel().tolist())}
