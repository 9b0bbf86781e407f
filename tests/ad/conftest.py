"""Shared helpers of the tensorlang.ad tests: central finite differences over nested structures."""
import numpy as np
import pytest


def central_difference(f, args, i, h=1e-6):
    """The derivative of f with respect to the float argument i (or each entry of an array argument)."""
    x = args[i]
    if isinstance(x, np.ndarray):
        g = np.zeros_like(x, dtype=float)
        for k in np.ndindex(x.shape):
            up, down = x.copy(), x.copy()
            up[k] += h
            down[k] -= h
            g[k] = (f(*args[:i], up, *args[i + 1:]) - f(*args[:i], down, *args[i + 1:])) / (2 * h)
        return g
    return (f(*args[:i], x + h, *args[i + 1:]) - f(*args[:i], x - h, *args[i + 1:])) / (2 * h)


@pytest.fixture
def fd():
    return central_difference
