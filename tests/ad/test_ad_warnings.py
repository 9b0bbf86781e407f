"""Typical gradients emit no warning (every warning an error here), powers among them: the partial of
``a ** b`` in ``a`` is infinite at ``a == 0`` for ``b < 1`` and is made so without NumPy's divide-by-zero
warning, at first and second order, its values unchanged."""
import warnings

import numpy as np
import pytest

from tensorlang import ad
from tensorlang.derive.ad.rules.operators import pow_da

from conftest import central_difference   # tests/ad is on the path (rootdir conftest)

X = np.array([0.3, 1.7, 2.2])


def _quiet(call):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return call()


def _second_difference(f, x, h=1e-4):
    return (f(x + h) - 2 * f(x) + f(x - h)) / (h * h)


@pytest.mark.parametrize("f, x", [
    (lambda x: x ** 0.5, 2.0),
    (lambda x: x ** 3, -1.5),
    (lambda x: x ** -1.0, 0.7),
    (lambda x: x ** 2.5 + np.sqrt(x), 1.3),
    (lambda x: np.exp(-x * x) * np.log(x), 0.9),
    (lambda x: (1.0 + x) ** x, 0.6),
])
def test_scalar_gradients_and_second_derivatives_are_quiet_and_right(f, x):
    g = _quiet(lambda: ad.grad(f)(x))
    assert np.isclose(g, central_difference(f, (x,), 0), rtol=1e-6)
    h = _quiet(lambda: ad.grad(ad.grad(f))(x))
    assert np.isclose(h, _second_difference(f, x), rtol=1e-4)


@pytest.mark.parametrize("f", [
    lambda x: np.sum(x ** 0.5),
    lambda x: np.sum(x ** 2.5) + np.sum(x) ** 2,
    lambda x: np.sum(x ** np.array([0.5, 1.0, 3.0])),
    lambda x: np.log(np.sum(np.exp(x))) + np.linalg.norm(x),
    lambda x: np.sum(np.tanh(x) / (1.0 + x * x)),
])
def test_array_gradients_hessians_and_jvps_are_quiet_and_right(f):
    g = _quiet(lambda: ad.grad(f)(X))
    assert np.allclose(g, central_difference(f, (X,), 0), rtol=1e-6)
    hess = _quiet(lambda: ad.hessian(f)(X))
    by_differences = np.array([central_difference(lambda y: ad.grad(f)(y)[k], (X,), 0) for k in range(len(X))])
    assert np.allclose(hess, by_differences, rtol=1e-5, atol=1e-7)
    _, tangent = _quiet(lambda: ad.jvp(f, (X,), (np.ones_like(X),)))
    assert np.isclose(tangent, g.sum())


def test_powers_at_zero_are_quiet():
    assert _quiet(lambda: ad.grad(lambda x: x ** 0.5)(0.0)) == np.inf   # the derivative does not exist
    assert _quiet(lambda: ad.grad(lambda x: x ** 2)(0.0)) == 0.0
    assert _quiet(lambda: ad.grad(lambda x: x ** 0)(0.0)) == 0.0
    g = _quiet(lambda: ad.grad(lambda x: np.sum(x ** 0.5))(np.array([0.0, 4.0])))
    assert g[0] == np.inf and g[1] == 0.25
    assert _quiet(lambda: pow_da(-0.0, -2.0)) == np.inf          # IEEE: (-0) ** -3 is -inf
    assert _quiet(lambda: pow_da(0.0, -2.0)) == -np.inf
    assert np.isnan(_quiet(lambda: pow_da(0j, 0.5)))
