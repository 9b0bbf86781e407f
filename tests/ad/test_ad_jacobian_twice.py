"""Functions that ``ad.jacobian`` and ``ad.hessian`` make, differentiated once more (``derive/ad/probed.py``):
``ad.jacobian(ad.jacobian(f))`` in each mode (JAX's ``jacfwd(jacrev(f))``), ``ad.jvp`` of a Jacobian, ``ad.grad`` of
a loss that calls one (made outside the function or inside it, over a closure's parameters), checked against
second derivatives written by hand and central differences of Jacobians written by hand; and the orders beyond,
refused by name."""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from oracles import differenced_jacobian
from tensorlang import ad
from tensorlang.errors import UnsupportedError

X = np.array([0.3, -0.5, 0.9, 0.2])


def f(v):
    return np.sin(v) * v[0] + v ** 2


def jacobian_of_f(v):
    """d f_k / d v_j, by hand."""
    J = np.diag(np.cos(v) * v[0] + 2 * v)
    J[:, 0] += np.sin(v)
    return J


def second_of_f(v):
    """d^2 f_k / d v_j d v_i, by hand."""
    n = v.size
    T = np.zeros((n, n, n))
    for k in range(n):
        T[k, k, k] += -np.sin(v[k]) * v[0] + 2
        T[k, k, 0] += np.cos(v[k])
        T[k, 0, k] += np.cos(v[k])
    return T


def differenced(F, x):
    """Central differences of ``F`` in ``x`` (``oracles.differenced_jacobian``), shaped ``shape(F(x)) + shape(x)``."""
    return differenced_jacobian(F, x).reshape(np.shape(F(x)) + np.shape(x))


@pytest.mark.parametrize("outer", [None, "forward", "reverse"])
@pytest.mark.parametrize("inner", [None, "forward", "reverse"])
def test_the_jacobian_of_a_jacobian_is_the_second_derivative(inner, outer):
    got = ad.jacobian(ad.jacobian(f, mode=inner), mode=outer)(X)
    assert got.shape == (4, 4, 4)
    np.testing.assert_allclose(got, second_of_f(X), rtol=1e-12, atol=1e-12)


def test_a_jacobian_of_a_jacobian_of_a_scalar_function_is_its_second_derivative_as_a_number():
    got = ad.jacobian(ad.jacobian(lambda t: np.sin(t) * t))(0.7)
    assert got == pytest.approx(2 * math.cos(0.7) - 0.7 * math.sin(0.7), rel=1e-13)


def test_a_jacobian_of_a_scalar_functions_jacobian_is_its_hessian():
    g = lambda v: np.sum(np.tanh(v) ** 3) * v[1]   # noqa: E731
    np.testing.assert_allclose(ad.jacobian(ad.jacobian(g))(X), ad.hessian(g)(X), rtol=1e-12, atol=1e-13)


def test_the_jvp_of_a_jacobian_is_the_second_derivative_along_the_tangent():
    t = np.array([1.0, 2.0, -1.0, 0.5])
    y, ty = ad.jvp(ad.jacobian(f), (X,), (t,))
    np.testing.assert_allclose(y, jacobian_of_f(X), rtol=1e-13)
    np.testing.assert_allclose(ty, second_of_f(X) @ t, rtol=1e-12, atol=1e-13)


def test_jacobians_of_two_arguments_in_each_argument():
    def g(a, b):
        return np.tanh(a * b[0]) + b * b

    def jacobian_in_b(a, b):   # by hand
        J = np.diag(2 * b)
        J[:, 0] += a * (1 - np.tanh(a * b[0]) ** 2)
        return J

    a, b = np.array([0.5, 0.1, 0.4]), np.array([0.3, 0.7, -0.2])
    J = ad.jacobian(g, argnums=1)
    np.testing.assert_allclose(J(a, b), jacobian_in_b(a, b), rtol=1e-13)
    np.testing.assert_allclose(ad.jacobian(J, argnums=1)(a, b), differenced(lambda q: jacobian_in_b(a, q), b),
                               rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(ad.jacobian(J, argnums=0)(a, b), differenced(lambda q: jacobian_in_b(q, b), a),
                               rtol=1e-7, atol=1e-8)


def test_the_gradient_of_a_loss_that_calls_a_jacobian_made_outside_or_inside_it():
    made = ad.jacobian(f)

    def outside(v):
        return np.sum(made(v) ** 2)

    def inside(v):
        return np.sum(ad.jacobian(f)(v) ** 2)

    want = differenced(lambda v: np.sum(jacobian_of_f(v) ** 2), X)
    for loss in (outside, inside):
        np.testing.assert_allclose(ad.grad(loss)(X), want, rtol=1e-7, atol=1e-8)


def test_the_gradient_in_a_models_parameters_of_a_loss_on_its_input_jacobian():
    """A Jacobian penalty: the model's parameters are closed over by the function whose Jacobian is taken."""
    x0 = np.array([0.2, -0.4, 0.7])

    def penalty(w):
        return np.sum(ad.jacobian(lambda z: np.tanh(w * z))(x0) ** 2)

    def by_hand(w):   # the Jacobian is diagonal: w (1 - tanh(w z)^2)
        return np.sum((w * (1 - np.tanh(w * x0) ** 2)) ** 2)

    w = np.array([0.7, 1.3, -0.6])
    np.testing.assert_allclose(ad.grad(penalty)(w), differenced(by_hand, w), rtol=1e-7, atol=1e-8)


def test_through_the_loops_lists_and_calls_of_the_function():
    def helper(a, b):
        return a * np.exp(b)

    def g(v):
        out = []
        for i in range(v.size - 1):
            out.append(helper(v[i], v[i + 1]))
        return np.stack(out)

    def jacobian_of_g(v):
        J = np.zeros((v.size - 1, v.size))
        for i in range(v.size - 1):
            J[i, i] = np.exp(v[i + 1])
            J[i, i + 1] = v[i] * np.exp(v[i + 1])
        return J

    np.testing.assert_allclose(ad.jacobian(ad.jacobian(g))(X), differenced(jacobian_of_g, X), rtol=1e-7, atol=1e-8)


def test_an_empty_output_has_an_empty_second_derivative():
    got = ad.jacobian(ad.jacobian(lambda v: v[:0] * v[0]))(X)
    assert got.shape == (0, 4, 4)


def test_in_threads():
    points = [X + 0.1 * k for k in range(16)]
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(ad.jacobian(ad.jacobian(f)), points))
    for x, g in zip(points, got):
        np.testing.assert_allclose(g, second_of_f(x), rtol=1e-12, atol=1e-12)


def test_what_is_not_supported_is_refused_by_name():
    with pytest.raises(UnsupportedError, match="an int argnums and 1 to 3 positional arguments"):
        ad.grad(lambda v: np.sum(ad.jacobian(lambda a, b: a * b, argnums=(0, 1))(v, X)[0]))(X)
    # (a Jacobian called with keyword arguments, differentiated: of the recordings, ``tower``; sum(diag(2 q s)))
    jacobian_sum = lambda v: np.sum(ad.jacobian(lambda q, scale=1.0: q * q * scale)(v, scale=2.0))   # noqa: E731
    np.testing.assert_allclose(ad.grad(jacobian_sum)(X), np.full(X.shape, 4.0), rtol=1e-12)
    with pytest.raises(UnsupportedError, match=r"ad.jacobian\(sparse=True\) is not supported"):
        ad.grad(lambda v: np.sum(ad.jacobian(f, sparse=True)(v).toarray()))(X)
    sparse = ad.jacobian(f, sparse=True)
    with pytest.raises(UnsupportedError, match=r"ad.jacobian\(sparse=True\) is not supported"):
        ad.jvp(sparse, (X,), (X,))
    # a third derivative through Jacobians: of the recordings; f's third derivatives are those of sin(v) v[0]
    third = np.zeros((4, 4, 4, 4))
    for k in range(4):
        third[k, k, k, k] += -np.cos(X[k]) * X[0]
        for a, b in ((k, 0), (0, k)):
            third[k, k, a, b] += -np.sin(X[k])
        third[k, 0, k, k] += -np.sin(X[k])
    np.testing.assert_allclose(ad.jacobian(ad.jacobian(ad.jacobian(f)))(X), third, rtol=1e-12, atol=1e-15)
