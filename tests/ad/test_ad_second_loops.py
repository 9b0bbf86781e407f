"""Reverse over reverse through a called function whose gradient code keeps a loop's values on a stack.

The gradient code of a function with a loop pushes the loop's values (and their pullbacks) on a list, a
box of the outer differentiation: the outer gradients of what it holds reach the store, not the cotangent
of the call's result, and the called function's outer pullback must run to take them (a cross term of a
product inside the loop was silently lost: ``ad.grad(ad.grad(f))`` gave 0 or None).  Checked against
central differences of the (first-order) gradient and against forward over reverse."""
import numpy as np
import pytest

from tensorlang import ad

A = np.array([0.5, 1.5])
E = np.array([1.0, 0.3])


def product_of(arrays):
    y = arrays[0]
    for x in arrays[1:]:
        y = y * x
    return np.sum(y)


def product_by_index(arrays):
    y = arrays[0]
    for i in range(1, len(arrays)):
        y = y * arrays[i]
    return np.sum(y)


def scaled_then_product(p, arrays):
    y = p
    for i in range(len(arrays)):
        y = arrays[i] * y
    return np.sum(y * y)


def power(a, n):
    b = np.linalg.inv(a) if n < 0 else a
    y = b
    for _ in range(abs(n) - 1):
        y = y @ b
    return y


CASES = {
    "the same array twice": lambda a: product_of([a, a]),
    "an array and its double": lambda a: product_of([a, 2.0 * a]),
    "by index": lambda a: product_by_index([a, a * a, np.sin(a)]),
    "an argument and a list": lambda a: scaled_then_product(a, [2.0 * a, np.exp(a)]),
    "a matrix power": lambda a: np.sum(power(np.outer(a, a) + np.eye(2), 3)),
}


def _gradient_differences(g, x, v, h=1e-6):
    return (g(x + h * v) - g(x - h * v)) / (2 * h)


@pytest.mark.parametrize("name", list(CASES))
def test_reverse_over_reverse_keeps_the_cross_terms_of_a_loop(name):
    f = CASES[name]
    grad = ad.grad(f)
    expected = _gradient_differences(grad, A, E)
    got = ad.grad(lambda a: np.sum(grad(a) * E))(A)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ad.hessian(f)(A) @ E, expected, rtol=1e-6, atol=1e-7)
