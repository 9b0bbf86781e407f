"""GradBench's ``hello``: ``square(x) = x * x`` and ``double``, its derivative, as tensor programs."""
from __future__ import annotations

import numpy as np

from .. import api as tl
from .runs import Function

SQUARE = tl.parse("x : R\nx * x")


def define() -> dict:
    square, derivative = tl.compile(SQUARE), tl.compile(tl.grad(SQUARE, "x"))
    return {
        "square": Function(lambda x: (float(x),), lambda x: square(x=x), float, repeated=False),
        "double": Function(lambda x: (float(x),), lambda x: derivative(x=x), float, repeated=False),
    }
