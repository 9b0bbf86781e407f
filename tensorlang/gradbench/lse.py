"""GradBench's ``lse``: ``log(sum(exp(x)))`` and its gradient (the softmax).

The tensor language has no max-reduction, so the program takes the shift ``c`` as an input:
``c + log(sum(i:n) exp(x[i] - c))`` equals the log-sum-exp for every ``c`` (its derivative in ``c`` is 0),
and with ``c = max(x)`` (NumPy, inside the timed function) no ``exp`` overflows.  Its gradient in ``x`` at
fixed ``c`` is the whole gradient."""
from __future__ import annotations

import numpy as np

from .. import api as tl
from .runs import Function

LSE = tl.parse("""
x : [n]R
c : R
c + log(sum(i:n) exp(x[i] - c))
""")


def _vector(raw) -> tuple:
    return (np.asarray(raw["x"], dtype=np.float64),)


def define() -> dict:
    primal, gradient = tl.compile(LSE), tl.compile(tl.grad(LSE, "x"))
    return {
        "primal": Function(_vector, lambda x: primal(x=x, c=float(np.max(x))), float),
        "gradient": Function(_vector, lambda x: gradient(x=x, c=float(np.max(x))), lambda g: g.tolist()),
    }
