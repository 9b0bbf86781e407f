"""Shared derivative oracles for the tests: central finite differences and the inner-product identity.

Values are the evaluator's: floats, arrays and tuples (pairs); these helpers work on any of them.
"""
from __future__ import annotations

import numpy as np

import tensorlang as tl
from tensorlang.nodes import RelType


def zip_map(f, *values):
    """Apply ``f`` leaf by leaf to structurally equal values (tuples for pairs)."""
    if isinstance(values[0], tuple):
        return tuple(zip_map(f, *parts) for parts in zip(*values))
    return f(*values)


def inner(a, b) -> float:
    """The standard inner product of two values of one type (Fig. 14's <.|.>)."""
    if isinstance(a, tuple):
        return sum(inner(x, y) for x, y in zip(a, b))
    return float(np.sum(np.asarray(a) * np.asarray(b)))


def random_like(value, rng):
    return zip_map(lambda v: rng.normal(size=np.shape(v)) if np.ndim(v) else float(rng.normal()), value)


def differentiable_inputs(expr) -> list[str]:
    """The inputs a derivative can be taken for: every free variable except data relations."""
    return [name for name, t in expr.free_vars.items() if not isinstance(t, RelType)]


def central_difference(expr, inputs: dict, direction: dict, h: float = 1e-6):
    """(e(x + h dx) - e(x - h dx)) / 2h for the inputs named in ``direction``."""
    def shifted(sign):
        moved = dict(inputs)
        for name, d in direction.items():
            moved[name] = zip_map(lambda v, dv: np.asarray(v) + sign * h * np.asarray(dv), inputs[name], d)
        return tl.evaluate(expr, **moved)

    return zip_map(lambda a, b: (np.asarray(a) - np.asarray(b)) / (2 * h), shifted(+1), shifted(-1))


def assert_close(actual, expected, rtol=1e-5, atol=1e-6):
    zip_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=rtol, atol=atol), actual, expected)
