"""Third derivatives: ``ad.grad(ad.grad(ad.grad(f)))``, and ``ad.jvp``, ``ad.jacobian`` and ``ad.hessian`` of
``ad.grad(ad.grad(f))`` and of ``ad.grad(f)``, against closed forms and against central differences of the
second derivative; the orders and combinations that are not supported refused by name; threads.
"""
import functools
import math
import threading
from pathlib import Path

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import ad
from tensorlang.errors import UnsupportedError


def _d(g, x, h=1e-4):
    """The derivative of number function ``g`` at ``x`` by central differences with one Richardson step."""
    def central(step):
        return (g(x + step) - g(x - step)) / (2 * step)
    return (4 * central(h / 2) - central(h)) / 3


def _loop(x):
    y = x
    for i in range(3):
        y = y * x + np.sin(y)
    return y


A = np.array([[0.3, -0.5, 0.8], [1.1, 0.2, -0.7]])
X0 = np.array([0.1, 0.2, -0.4])
V = np.array([0.3, -0.2, 0.5])


def _along(s):
    """A NumPy program of a vector, along direction V from X0."""
    return np.sum(np.tanh(A @ (X0 + s * V)) ** 2)


def _built(s):
    z = np.array([s, 2.0 * s, s * s])
    return np.sum(np.exp(z) * np.cos(z))


def _vector(s):
    return np.tanh(A @ (X0 + s * V))


def _two(x, y):
    return np.sin(x * y) + x ** 3 * y


def _third(f):
    return ad.grad(ad.grad(ad.grad(f)))


@pytest.mark.parametrize("f", [np.sin, math.sin, lambda x: np.sin(x), lambda x: math.sin(x)],
                         ids=["np.sin", "math.sin", "lambda np.sin", "lambda math.sin"])
def test_the_third_derivative_of_sin_is_minus_cos(f):
    for x in (0.3, -1.2, 2.5):
        assert _third(f)(x) == pytest.approx(-math.cos(x), rel=1e-12, abs=1e-14)


@pytest.mark.parametrize("f", [_loop, _along, lambda x: np.exp(-x * x) * math.cos(x)],
                         ids=["loop", "numpy along a direction", "exp cos"])
def test_the_third_derivative_agrees_with_differences_of_the_second(f):
    second = ad.grad(ad.grad(f))
    for x in (0.3, -0.7):
        assert _third(f)(x) == pytest.approx(_d(second, x), rel=1e-6, abs=1e-8)


def test_the_third_derivative_of_the_numpy_program_by_its_closed_form():
    """``sum(tanh(u)^2)`` along ``u = A (x0 + s v)``, ``w = A v``: the third derivative is the sum of
    ``w^3`` times the third derivative of ``tanh^2`` at ``u``, written out from ``tanh' = p = 1 - t^2`` and
    ``p' = -2 t p``: ``(t^2)' = 2 t p``, ``(t^2)'' = 2 p^2 - 4 t^2 p``, ``(t^2)''' = -16 t p^2 + 8 t^3 p``."""
    s = 0.4
    t, w = np.tanh(A @ (X0 + s * V)), A @ V
    p = 1 - t * t
    expected = np.sum(w ** 3 * (-16 * t * p * p + 8 * t ** 3 * p))
    assert _third(_along)(s) == pytest.approx(expected, rel=1e-12)


def test_third_derivatives_in_two_arguments():
    x, y = 0.3, 0.7
    # d3/dx3 (sin(xy) + x^3 y) = -y^3 cos(xy) + 6 y;  d/dy d2/dx2 = -2 y sin(xy) - x y^2 cos(xy) + 6 x
    assert _third(_two)(x, y) == pytest.approx(-y ** 3 * math.cos(x * y) + 6 * y, rel=1e-12)
    mixed = -2 * y * math.sin(x * y) - x * y * y * math.cos(x * y) + 6 * x
    assert ad.grad(ad.grad(ad.grad(_two)), 1)(x, y) == pytest.approx(mixed, rel=1e-12)
    assert mixed == pytest.approx(_d(lambda b: ad.grad(ad.grad(_two))(x, b), y), rel=1e-6)


@pytest.mark.parametrize("f", [np.sin, _loop, _along], ids=["np.sin", "loop", "numpy along a direction"])
def test_forward_over_second_order(f):
    """``ad.jvp`` and ``ad.jacobian`` of ``ad.grad(ad.grad(f))``, ``ad.hessian(ad.grad(f))``: the same third
    derivative as reverse over reverse over reverse, and as differences of the second."""
    x = 0.3
    expected = _d(ad.grad(ad.grad(f)), x)
    (second, third) = ad.jvp(ad.grad(ad.grad(f)), (x,), (1.0,))
    assert second == pytest.approx(ad.grad(ad.grad(f))(x), rel=1e-12)
    assert third == pytest.approx(expected, rel=1e-6, abs=1e-8)
    assert ad.jvp(ad.grad(ad.grad(f)), (x,), (2.0,))[1] == pytest.approx(2 * third, rel=1e-12)
    assert ad.hessian(ad.grad(f))(x) == pytest.approx(third, rel=1e-12)
    assert ad.jacobian(ad.grad(ad.grad(f)))(x) == pytest.approx(third, rel=1e-12)
    assert _third(f)(x) == pytest.approx(third, rel=1e-12)


def test_a_closure_over_a_local_variable():
    """The gradient of what a function closes over passes through its third derivative, in reverse and in
    forward mode: ``a sin(x)^3``, ``a`` a local of the function that makes it."""
    def made(a):
        return lambda x: a * np.sin(x) ** 3
    x, a = 0.4, 1.3
    s, c = math.sin(x), math.cos(x)
    expected = a * (6 * c ** 3 - 21 * s * s * c)   # d3/dx3 sin^3 = 6 cos^3 - 21 sin^2 cos
    assert _third(made(a))(x) == pytest.approx(expected, rel=1e-12)
    assert ad.jvp(ad.grad(ad.grad(made(a))), (x,), (1.0,))[1] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("f, expected", [(lambda x: x ** 3, 6.0), (lambda x: np.power(x, 3), 6.0),
                                         (lambda x: x * x * np.sin(x), 6.0), (lambda x: np.sin(x) ** 3, 6.0),
                                         (lambda y: 0.0 ** y, 0.0)],
                         ids=["x**3", "np.power", "x*x*sin", "sin**3", "0.0**y"])
def test_at_zero_where_the_second_derivative_code_drops_zero_gradients(f, expected):
    """At 0, where the second derivative's code drops gradients that are 0 (``rules.numpy._none_if_zero``)
    and makes products with a zero factor 0 (the strong product): their derivatives still reach the third."""
    x = 0.0 if expected else 0.3
    assert _third(f)(x) == pytest.approx(expected, abs=1e-12)
    assert ad.jvp(ad.grad(ad.grad(f)), (x,), (1.0,))[1] == pytest.approx(expected, abs=1e-12)


def _helper(x):
    return x * np.sin(x)


def _calls_helper(x):
    return _helper(x) + x ** 3


def _calls_grad(x):
    return x * ad.grad(lambda y: x * y * y)(2.0)


def _around_a_kernel(s):
    y = _kernel()(x=X0 + s * V, a=V)
    return np.sum(y * y)


@functools.lru_cache(maxsize=None)
def _kernel():
    return tl.compile(tl.parse("x : [n]R\na : [n]R\ngen(i:n) [0 < i] * x[i] * x[i - 1] * a[i] + sin(x[i])"))


def test_what_the_transform_refuses_is_differentiated_by_recordings():
    """A fourth derivative, a third through a call of another function, of a function that calls ad.grad, through
    functions made by ad.jacobian and ad.hessian, through lists the function makes, without the arguments that have
    defaults: the transform refuses each (``BeyondOrder``) and the entry point differentiates the recordings of the
    derivatives below instead (``tower``; tests/ad/test_ad_any_order.py).  Each against a closed form or central
    differences of the second derivative, which the transform computes."""
    assert ad.grad(_third(np.sin))(0.3) == pytest.approx(math.sin(0.3), rel=1e-12)
    assert _third(_calls_helper)(0.3) == pytest.approx(-3 * math.sin(0.3) - 0.3 * math.cos(0.3) + 6, rel=1e-12)
    assert ad.grad(ad.grad(_calls_grad))(0.37) == pytest.approx(8.0, rel=1e-12)   # (_calls_grad is 4 x^2)
    second = ad.grad(ad.grad(_along))
    for third in (lambda: ad.jvp(ad.hessian(_along), (0.3,), (1.0,))[1],
                  lambda: ad.grad(ad.jacobian(ad.grad(_along)))(0.3)):
        assert third() == pytest.approx(_d(second, 0.3), rel=1e-6)
    jacobian_sum = lambda s: np.sum(ad.jacobian(_vector)(s))   # noqa: E731
    for third in (lambda: ad.hessian(jacobian_sum)(0.3), lambda: ad.grad(ad.grad(jacobian_sum))(0.3)):
        assert third() == pytest.approx(_d(ad.grad(jacobian_sum), 0.3), rel=1e-6)
    fourth = np.zeros((3, 3, 3, 3))
    fourth[np.arange(3), np.arange(3), np.arange(3), np.arange(3)] = 24.0
    np.testing.assert_allclose(ad.hessian(ad.hessian(lambda v: np.sum(v ** 4)))(X0), fourth, atol=1e-12)
    for made_a_list in (lambda s: np.sum(np.stack([X0 * s, V * s * s]) ** 2), _built):   # (the first gave a wrong
        assert _third(made_a_list)(0.3) == pytest.approx(_d(ad.grad(ad.grad(made_a_list)), 0.3), rel=1e-6)   # number)
    assert _third(lambda x, k=2.0: np.sin(k * x))(0.3) == pytest.approx(-8 * math.cos(0.6), rel=1e-12)
    assert _third(lambda x, k=2.0: np.sin(k * x))(0.3, 2.0) == pytest.approx(-8 * math.cos(0.6), rel=1e-12)


def test_what_is_not_supported_is_refused_by_name():
    # (a compiled kernel's derivatives call its adjoint kernels, recorded as calls on the recordings' stand-ins)
    assert _third(_around_a_kernel)(0.1) == pytest.approx(_d(ad.grad(ad.grad(_around_a_kernel)), 0.1), rel=1e-6)
    with pytest.raises(UnsupportedError, match="infinite or undefined .* it came out NaN"):
        _third(lambda y: np.power(0.0, y))(0.3)   # (0 ** y is 0 for y > 0: its third derivative is 0)
    # the second derivatives of these are the transform's
    assert ad.grad(ad.grad(_calls_helper))(0.3) == pytest.approx(_d(ad.grad(_calls_helper), 0.3), rel=1e-6)
    assert ad.grad(_calls_grad)(0.37) == pytest.approx(8.0 * 0.37, rel=1e-12)


@pytest.mark.parametrize("order", [3, 4])
def test_third_and_fourth_derivatives_in_threads_are_independent(order):
    """The third by the transform, the fourth by the recordings (``tower``)."""
    def nth(f):
        for _ in range(order):
            f = ad.grad(f)
        return f
    sin_nth = (lambda x: -math.cos(x)) if order == 3 else math.sin
    cases = [(np.sin, x, sin_nth(x)) for x in (0.1, 0.9)] + [
        (lambda x: np.exp(2.0 * x), x, 2.0 ** order * math.exp(2.0 * x)) for x in (0.2, -0.4)]
    results = [None] * len(cases)
    start = threading.Barrier(len(cases))

    def run(k):
        f, x, _ = cases[k]
        start.wait()
        results[k] = [nth(f)(x) for _ in range(5)]

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (_, _, expected), got in zip(cases, results):
        assert got == pytest.approx([expected] * 5, rel=1e-12)


def test_third_derivatives_through_a_kernel_of_a_pair():
    """Two steps of the compiled LSTM cell (a kernel returning a pair): ``ad.jvp`` and ``ad.jacobian`` of its
    Hessian, and reverse mode thrice, against central differences of the Hessian."""
    cell = tl.compile(tl.parse((Path(__file__).resolve().parents[2] / "examples" / "lstm_cell.tl").read_text()))
    rng = np.random.default_rng(0)
    W, U, b = rng.normal(size=(8, 2)) * 0.5, rng.normal(size=(8, 2)) * 0.5, rng.normal(size=8) * 0.5
    x, c0, h, v = (rng.normal(size=2) for _ in range(4))

    def two_steps(h):
        h1, c1 = cell(W=W, U=U, b=b, h=h, c=c0, x=x)
        h2, c2 = cell(W=W, U=U, b=b, h=h1, c=c1, x=x)
        return np.sum(h2 * c2)

    hessian = ad.hessian(two_steps)
    want = (hessian(h + 1e-4 * v) - hessian(h - 1e-4 * v)) / 2e-4
    np.testing.assert_allclose(ad.jvp(hessian, (h,), (v,))[1], want, atol=1e-6)
    np.testing.assert_allclose(ad.jacobian(hessian)(h) @ v, want, atol=1e-6)
    g = ad.grad(two_steps)
    np.testing.assert_allclose(ad.grad(lambda z: ad.grad(lambda w: g(w) @ v)(z) @ v)(h), want @ v, atol=1e-6)
