"""Shared oracles for the tests: central finite differences, the inner-product identity, and agreement
of two results to a tolerance.

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
    """The derivative of e at x in the direction dx (the inputs named in ``direction``): central
    differences D(h) = (e(x + h dx) - e(x - h dx)) / 2h with one Richardson step, (4 D(h/2) - D(h)) / 3,
    whose error is O(h^4) instead of O(h^2) (a program like ``2 ** sin((1 + s^2)^2)`` at s = 16 has a
    third derivative near 10^14: D(1e-6) alone is off by 7e-4 relative)."""
    def shifted(step):
        moved = dict(inputs)
        for name, d in direction.items():
            moved[name] = zip_map(lambda v, dv: np.asarray(v) + step * np.asarray(dv), inputs[name], d)
        return tl.evaluate(expr, **moved)

    def central(step):
        return zip_map(lambda a, b: (np.asarray(a) - np.asarray(b)) / (2 * step), shifted(step), shifted(-step))

    return zip_map(lambda fine, coarse: (4 * fine - coarse) / 3, central(h / 2), central(h))


def checkable_difference(expr, inputs: dict, direction: dict, h: float = 1e-6):
    """``central_difference`` at ``h`` when it agrees with the same at ``2 h`` (to 1e-5 relative), else
    None: the program varies too fast along the direction for finite differences to check a
    derivative (``sin((1 + s^2)^3)`` at s = 15 turns 4.6 radians per step of 1e-6), and a property
    test ``assume``s the estimate is there."""
    fine = central_difference(expr, inputs, direction, h)
    coarse = central_difference(expr, inputs, direction, 2 * h)
    agree = zip_map(lambda a, b: bool(np.allclose(a, b, rtol=1e-5, atol=1e-6)), fine, coarse)
    return fine if all(_leaves(agree)) else None


def _leaves(value):
    return [x for part in value for x in _leaves(part)] if isinstance(value, tuple) else [value]


def close(got, ref, tol: float = 1e-10) -> bool:
    """``got`` is ``ref`` (a compiled kernel's result against the evaluator's): the same structure and
    shapes, every element within ``tol`` relative, or ``tol`` times the largest finite magnitude of
    ``ref`` (at least 1) absolute; NaN where ``ref`` has NaN."""
    if isinstance(ref, tuple):
        return isinstance(got, tuple) and len(got) == len(ref) and all(close(g, r, tol) for g, r in zip(got, ref))
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return False
    finite = np.abs(ref[np.isfinite(ref)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    return bool(np.allclose(got, ref, rtol=tol, atol=tol * scale, equal_nan=True))


def assert_close(actual, expected, rtol=1e-5, atol=1e-6):
    zip_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=rtol, atol=atol), actual, expected)


def differenced_jacobian(fn, x, h: float = 1e-6) -> np.ndarray:
    """The Jacobian of the array function ``fn`` at ``x`` by central differences, one column per entry of x
    (rows: fn's flattened output)."""
    cols = []
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = h
        e = e.reshape(x.shape)
        cols.append(np.ravel(fn(x + e) - fn(x - e)) / (2 * h))
    return np.stack(cols, axis=1)
