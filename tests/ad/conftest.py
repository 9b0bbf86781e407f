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


def hvp_by_differences(f, args, vs, h=2e-4):
    """``d/dargs <grad f(args), vs>`` from f alone, one array per array argument: mixed second central
    differences ``(F(x+hv+he) - F(x+hv-he) - F(x-hv+he) + F(x-hv-he)) / 4h^2``."""
    out = []
    for i, a in enumerate(args):
        g = np.zeros(a.shape)
        for k in np.ndindex(a.shape):
            def at(s, t):
                moved = [x + s * h * v for x, v in zip(args, vs)]
                moved[i] = moved[i].copy()
                moved[i][k] += t * h
                return f(*moved)
            g[k] = (at(1, 1) - at(1, -1) - at(-1, 1) + at(-1, -1)) / (4 * h * h)
        out.append(g)
    return out


@pytest.fixture
def fd():
    return central_difference


def gradient_check(f, *args, rtol=1e-6, atol=1e-8):
    """``ad.gradient(f, *args)`` checked against central differences in every float or float-array
    argument (each must get a gradient); returns the gradients."""
    from tensorlang import ad
    got = ad.gradient(f, *args)
    for i, a in enumerate(args):
        if isinstance(a, (float, np.ndarray)):
            assert got[i] is not None, f"argument {i}: no gradient"
            np.testing.assert_allclose(got[i], central_difference(f, args, i), rtol=rtol, atol=atol,
                                       err_msg=f"argument {i}")
    return got


@pytest.fixture
def check():
    return gradient_check
