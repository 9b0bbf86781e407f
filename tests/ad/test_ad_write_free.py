"""Calls of module-global functions that write to nothing (``analysis.write_free``): their callers pass them
arrays without copies and get inlined array rules, guarded by the functions' bindings.  A helper that
writes (itself or through what it calls), one rebound between gradients, and one rebound while a gradient
runs are each checked: the gradient is right against central differences, or the rebinding is refused."""
import types

import numpy as np
import pytest

from tensorlang import ad
from tensorlang.errors import UnsupportedError

SOURCE = """
import numpy as np

def squash(z):
    return 1.0 / (1.0 + np.exp(-z))

def cell(w, h, x):
    z = w @ h + x
    return squash(z) * np.tanh(z)

def f(w, xs):
    h = np.zeros(3)
    total = 0.0
    for t in range(len(xs)):
        h = cell(w, h, xs[t])
        total = total + np.sum(h * h)
    return total
"""


def module():
    m = types.ModuleType("write_free_case")
    ad.define(SOURCE, m.__dict__)
    return m


def numeric(f, w, xs, eps=1e-6):
    g = np.zeros_like(w)
    for i in np.ndindex(w.shape):
        a, b = w.copy(), w.copy()
        a[i] += eps
        b[i] -= eps
        g[i] = (f(a, xs) - f(b, xs)) / (2 * eps)
    return g


RNG = np.random.default_rng(4)
W, XS = RNG.normal(size=(3, 3)) * 0.5, RNG.normal(size=(5, 3))


def test_write_free_helpers_are_assumed_and_guarded():
    m = module()
    code = str(ad.code_adjoint(m.f, W, XS))
    assert "_ad_J(_v" in code and "_ad_snap" not in code   # cell is given w itself, not a copy per step
    assert np.allclose(ad.gradient(m.f, W, XS)[0], numeric(m.f, W, XS), atol=1e-6)


HALVING = """
def squash(z):
    z *= 0.5          # writes into the caller's z, which cell reads afterwards
    return 1.0 / (1.0 + np.exp(-z))
"""


def test_a_helper_that_writes_its_argument_is_not_assumed():
    m = module()
    ad.define(HALVING, m.__dict__)
    assert np.allclose(ad.gradient(m.f, W, XS)[0], numeric(m.f, W, XS), atol=1e-6)


def test_a_helper_that_calls_a_writing_helper_is_not_assumed():
    m = module()
    ad.define("""
def halve(z):
    z[...] = z * 0.5

def squash(z):
    halve(z)
    return 1.0 / (1.0 + np.exp(-z))
""", m.__dict__)
    assert np.allclose(ad.gradient(m.f, W, XS)[0], numeric(m.f, W, XS), atol=1e-6)


def test_rebinding_a_helper_between_gradients():
    m = module()
    first = ad.gradient(m.f, W, XS)[0]
    assert np.allclose(first, numeric(m.f, W, XS), atol=1e-6)
    ad.define(HALVING, m.__dict__)
    second = ad.gradient(m.f, W, XS)[0]   # the entry's guard hands over to the code that assumes nothing
    assert np.allclose(second, numeric(m.f, W, XS), atol=1e-6)
    assert not np.allclose(first, second)


def test_rebinding_a_helper_while_the_gradient_runs_is_refused():
    m = module()
    ad.define("""
def rebind(x):
    NAMESPACE["squash"] = np.tanh
    return x

def g(w, xs):
    a = cell(w, np.zeros(3), xs[0])
    rebind(0.0)
    return np.sum(cell(w, a, xs[1]))
""", m.__dict__)
    m.NAMESPACE = m.__dict__
    with pytest.raises(UnsupportedError, match="rebound while it ran"):
        ad.gradient(m.g, W, XS)


def test_recursive_helpers():
    m = module()
    ad.define("""
def power(z, n):
    return z if n == 1 else z * power(z, n - 1)

def h(w, xs):
    return np.sum(power(w @ xs[0], 3))
""", m.__dict__)
    assert "_ad_snap" not in str(ad.code_adjoint(m.h, W, XS))
    assert np.allclose(ad.gradient(m.h, W, XS)[0], numeric(m.h, W, XS), atol=1e-6)


def test_a_helper_that_writes_through_a_primitive_is_not_assumed():
    # (after the analysis a call of a primitive is a rule call: np.copyto's writes must still be seen)
    m = module()
    ad.define("""
def fill(z, v):
    np.copyto(z, v)
    return 0.0

def k(x):
    z = x * 2.0
    y = np.sin(z)
    fill(z, x * x)
    return np.sum(y * z)
""", m.__dict__)
    x = XS[0]
    g = ad.gradient(m.k, x)[0]
    assert np.allclose(g, [(m.k(x + e) - m.k(x - e)) / 2e-6 for e in np.eye(3) * 1e-6], atol=1e-6)
