"""Shared helpers of the tensorlang.ad tests: central finite differences over nested structures, and the
check of a generated program of one vector argument."""
import itertools
import linecache

import numpy as np
import pytest

_GENERATED = itertools.count()


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
    """``d/dargs <grad f(args), vs>`` from f alone, one per argument (floats or float arrays): mixed second
    central differences ``(F(x+hv+he) - F(x+hv-he) - F(x-hv+he) + F(x-hv-he)) / 4h^2``."""
    out = []
    for i, a in enumerate(args):
        g = np.zeros(np.shape(a))
        for k in np.ndindex(g.shape):
            def at(s, t):
                moved = [np.array(x + s * h * v, dtype=float) for x, v in zip(args, vs)]
                moved[i][k] += t * h
                return f(*(m if isinstance(x, np.ndarray) else float(m) for m, x in zip(moved, args)))
            g[k] = (at(1, 1) - at(1, -1) - at(-1, 1) + at(-1, -1)) / (4 * h * h)
        out.append(g if isinstance(a, np.ndarray) else float(g))
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


def check_generated_program(src, seed, n, namespace, label, kept=True):
    """Compile ``src`` (which defines ``f(x)``, registered with ``linecache`` so tensorlang.ad reads its source;
    not, so that it is recorded, where ``kept`` is False) in ``namespace``, and check ``ad.gradient(f, x)`` at a
    random ``x`` of length ``n`` against central differences (``x`` itself must not change)."""
    from tensorlang import ad
    name = f"<generated {label} {next(_GENERATED)}>"
    if kept:
        linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    ns = dict(namespace)
    exec(compile(src, name, "exec"), ns)
    f = ns["f"]
    x = np.random.default_rng(seed).uniform(-1.0, 1.0, n)
    x0 = x.copy()
    g, = ad.gradient(f, x)
    np.testing.assert_array_equal(x, x0)
    g = np.zeros(n) if g is None else g   # x did not reach the result
    np.testing.assert_allclose(g, central_difference(f, [x], 0), rtol=1e-5, atol=1e-6, err_msg=src)
