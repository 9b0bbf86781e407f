"""GradBench's ``lse``: ``log(sum(exp(x)))`` and its gradient (the softmax).

The program shifts the exponentials by the maximum, ``m + log(sum(i:n) exp(x[i] - m))`` with
``m = max(i:n) x[i]`` (``examples/logsumexp.tl``), so that no ``exp`` overflows; its gradient is the
softmax (at ties the maximum's share of the cotangent is split equally, and cancels exactly)."""
from __future__ import annotations

import numpy as np

from .. import api as tl
from .runs import Function

LSE = tl.parse("""
x : [n]R
let m = max(i:n) x[i] in
m + log(sum(i:n) exp(x[i] - m))
""")


def _vector(raw) -> tuple:
    return (np.asarray(raw["x"], dtype=np.float64),)


def define() -> dict:
    primal, gradient = tl.compile(LSE), tl.compile(tl.grad(LSE, "x"))
    return {
        "primal": Function(_vector, lambda x: primal(x=x), float),
        "gradient": Function(_vector, lambda x: gradient(x=x), lambda g: g.tolist()),
    }
