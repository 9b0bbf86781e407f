"""``ad.jvp`` differentiated again: reverse over forward (``ad.grad`` of a function that calls ``ad.jvp``) and
forward over forward (``ad.jvp`` of one), against central differences of the first derivative, which is
checked itself against differences of the function; the refusals by name; threads."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tensorlang import ad
from tensorlang.errors import UnsupportedError


def f(x, w):
    return np.sin(x[0]) * x[1] ** 2 + w * np.exp(x[0] * x[1])


def F(x):
    return np.array([x[0] * x[1], np.sin(x[0]), x[1] ** 3, np.tanh(x[0] - x[1])])


def _central(fun, x, h=1e-6):
    x = np.asarray(x, dtype=float)
    out = []
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        out.append((np.asarray(fun(x + e)) - np.asarray(fun(x - e))) / (2 * h))
    return np.stack(out, axis=-1).reshape(np.shape(fun(x)) + x.shape)


X, W = np.array([0.3, 0.7]), 1.3
T = np.array([0.2, -1.0])


def test_the_first_derivative_itself():
    y, ty = ad.jvp(f, (X, W), (T, 0.5))
    assert y == pytest.approx(f(X, W), rel=1e-14)
    assert ty == pytest.approx(_central(lambda z: f(z[:2], z[2]), np.append(X, W)) @ np.append(T, 0.5), rel=1e-8)


@pytest.mark.parametrize("seeds", [(T, None), (T, 0.5), (None, 0.5), (np.zeros(2), 0.0)])
def test_reverse_over_forward_in_every_argument(seeds):
    def g(x, w):
        y, ty = ad.jvp(f, (x, w), seeds)
        return 3 * y + ty ** 2 + ty * y
    gx, gw = ad.grad(g, argnums=(0, 1))(X, W)
    np.testing.assert_allclose(gx, _central(lambda z: g(z, W), X), rtol=1e-7)
    assert gw == pytest.approx(float(_central(lambda z: g(X, z[0]), [W])[0]), rel=1e-7)


def test_reverse_over_forward_in_the_tangent():
    """The tangent an argument of the differentiated function: the gradient in it is ``J^T dty``."""
    def g(t):
        return np.sum(ad.jvp(F, (X,), (t,))[1] ** 2)
    np.testing.assert_allclose(ad.grad(g)(T), _central(g, T), rtol=1e-7)


def test_reverse_over_forward_of_an_array_valued_function():
    def g(x):
        return np.sum(np.cos(ad.jvp(F, (x,), (np.array([1.0, 2.0]),))[1]))
    np.testing.assert_allclose(ad.grad(g)(X), _central(g, X), rtol=1e-7)
    np.testing.assert_allclose(ad.jacobian(lambda x: ad.jvp(F, (x,), (T,))[1], mode="reverse")(X),
                               _central(lambda x: ad.jvp(F, (x,), (T,))[1], X), rtol=1e-7, atol=1e-10)


def test_reverse_over_forward_inside_a_loop_with_an_integer_primal():
    def power_sum(x, k):
        return np.sum(x ** k)

    def g(x):
        total = 0.0
        for k in range(1, 4):
            total = total + ad.jvp(power_sum, (x, k), (np.ones(3), None))[1] * k
        return total
    x = np.array([0.5, -1.5, 2.0])
    np.testing.assert_allclose(ad.grad(g)(x), _central(g, x), rtol=1e-7)


@pytest.mark.parametrize("fn, x, t, u", [
    (lambda x: np.sin(x), 1.0, 1.0, 1.0),
    (lambda x: x[0] ** 3 * x[1], np.array([1.5, -0.5]), np.array([1.0, 0.5]), np.array([0.3, 2.0])),
    (F, X, T, np.array([-0.4, 1.1])),
])
def test_forward_over_forward(fn, x, t, u):
    def first(z):
        return ad.jvp(fn, (z,), (t,))[1]
    (y, ty), (ty_y, t_ty) = ad.jvp(lambda z: ad.jvp(fn, (z,), (t,)), (x,), (u,))
    np.testing.assert_allclose(ty, first(x), rtol=1e-12)
    np.testing.assert_allclose(ty_y, ad.jvp(fn, (x,), (u,))[1], rtol=1e-12)
    expected = (first(x + 1e-6 * u) - first(x - 1e-6 * u)) / 2e-6
    np.testing.assert_allclose(t_ty, expected, rtol=1e-7, atol=1e-9)


def test_forward_over_forward_in_the_tangent_and_the_primal():
    def g(x, t):
        return ad.jvp(F, (x,), (t,))[1]
    u, v = np.array([0.5, -0.25]), np.array([1.0, 3.0])
    got = ad.jvp(g, (X, T), (u, v))[1]
    expected = (g(X + 1e-6 * u, T + 1e-6 * v) - g(X - 1e-6 * u, T - 1e-6 * v)) / 2e-6
    np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-10)


def test_the_second_derivative_of_sin_by_forward_over_forward():
    got = ad.jvp(lambda x: ad.jvp(np.sin, (x,), (1.0,))[1], (1.0,), (1.0,))
    assert got[0] == pytest.approx(np.cos(1.0), rel=1e-15) and got[1] == pytest.approx(-np.sin(1.0), rel=1e-15)


DATA = np.array([1.0, 2.0])


def test_the_values_f_captures_get_their_gradients():
    """``f`` a closure over the variables differentiated (a number, an array, an integer, a module's constant):
    their gradients are ``f``'s gradient code's, the part along the tangent from its forward mode."""
    def g(x, w, data):
        scale = 2
        y, ty = ad.jvp(lambda v: np.sum(DATA * data * np.sin(v * w) ** scale) * w, (x,), (T,))
        return 3 * y + ty ** 2
    data = np.array([0.5, -1.5])
    gx, gw, gd = ad.grad(g, argnums=(0, 1, 2))(X, W, data)
    np.testing.assert_allclose(gx, _central(lambda z: g(z, W, data), X), rtol=1e-7)
    assert gw == pytest.approx(float(_central(lambda z: g(X, z[0], data), [W])[0]), rel=1e-7)
    np.testing.assert_allclose(gd, _central(lambda z: g(X, W, z), data), rtol=1e-7)

    def called(x, w):   # (a function made inside f reads f's cell)
        return ad.jvp(lambda v: np.sum(np.sin(v * (lambda: w)())), (x,), (T,))[1]
    assert ad.grad(called, argnums=1)(X, W) == pytest.approx(float(_central(lambda z: called(X, z[0]), [W])[0]),
                                                                 rel=1e-7)

    def inner(y):   # (the second derivative of x^2 y + sin(x y) in x and y)
        return ad.jvp(lambda x: x * x * y + np.sin(x * y), (1.5,), (1.0,))[1]
    assert ad.grad(inner)(0.7) == pytest.approx(2 * 1.5 + np.cos(1.05) - 1.05 * np.sin(1.05), rel=1e-12)


@pytest.mark.parametrize("make, holds, match", [
    (lambda w: (lambda v: np.sum(v * w[0])), list, "captures 'w'.*pass the value to f as a primal"),
    (lambda w: (lambda h: (lambda v: np.sum(v * h())))(lambda: w), float, "captures 'h'.*pass the value to f as a "
     "primal"),
    (lambda w: (lambda v, k=w: np.sum(v * k)), float, "default values of a nested function"),   # (the transform's)
], ids=["in a list", "through a function", "as a default"])
def test_a_value_captured_another_way(make, holds, match):
    """Refused by the transform (its gradient would be lost): of the recordings (``tower``), against central
    differences; a default value still refused."""
    def g(x, w):
        return ad.jvp(make([w] if holds is list else w), (x,), (np.ones(2),))[1]
    if "default values" not in match:
        assert ad.grad(g, argnums=1)(X, W) == pytest.approx(float(_central(lambda z: g(X, z[0]), [W])[0]), rel=1e-7)
        return
    with pytest.raises(UnsupportedError, match=match):
        ad.grad(g, argnums=1)(X, W)


def test_third_derivatives_through_ad_jvp():
    """Refused by the transform: of the recordings (``tower``).  d2/dx2 of jvp(sin)'s tangent cos x is -cos x;
    the Hessian of F_0's derivative along T (F_0 = x0 x1: linear) is 0."""
    cos_of = lambda x: ad.jvp(np.sin, (x,), (1.0,))[1]   # noqa: E731
    assert ad.grad(ad.grad(cos_of))(1.0) == pytest.approx(-np.cos(1.0), rel=1e-12)
    np.testing.assert_array_equal(ad.hessian(lambda x: ad.jvp(F, (x,), (T,))[1][0])(X), np.zeros((2, 2)))
    (g, tg) = ad.jvp(ad.grad(cos_of), (1.0,), (1.0,))
    assert (g, tg) == (pytest.approx(-np.sin(1.0), rel=1e-12), pytest.approx(-np.cos(1.0), rel=1e-12))


@pytest.mark.parametrize("call, match", [
    (lambda: ad.grad(lambda x: ad.jvp(lambda v: (v, v), (x,), (1.0,))[1][0])(1.0), "return a real number"),
    (lambda: ad.grad(lambda x: ad.jvp(np.exp, (x + 0j,), (1.0 + 0j,))[1].real)(1.0), "real numbers or real arrays"),
])
def test_what_is_refused_by_name(call, match):
    with pytest.raises(UnsupportedError, match=match):
        call()


def test_an_f_that_writes_into_its_primal_is_refused():
    def writes(v):
        v[0] = v[0] * 2.0
        return np.sum(v ** 2)
    with pytest.raises(UnsupportedError, match="writes into its primal 0"):
        ad.grad(lambda x: ad.jvp(writes, (x,), (np.ones(2),))[1])(X.copy())


def test_threads_take_their_own_derivatives():
    def g(x):
        return np.sum(ad.jvp(F, (x,), (np.array([1.0, -1.0]),))[1] ** 2)
    points = [np.array([0.1 * k, 0.3 - 0.05 * k]) for k in range(16)]
    expected = [_central(g, p) for p in points]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(ad.grad(g), points))
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-7)


def test_forward_over_forward_through_what_f_captures():
    """The tangents of the values ``f`` captures move ``y`` and ``ty`` too (``JVP`` with ``f``'s tangent, and the
    forward-over-reverse pass along them)."""
    def g(x):
        c = 2.0
        return ad.jvp(lambda v: np.sin(v) * c, (x,), (1.0,))[1]
    assert ad.jvp(g, (1.0,), (1.0,))[1] == pytest.approx(-2 * np.sin(1.0), rel=1e-14)

    def both(x, w):
        return ad.jvp(lambda v: np.sin(v * w) * w, (x,), (T,))
    u, dw = np.array([0.5, 0.25]), 0.7
    (y, ty), (t_y, t_ty) = ad.jvp(both, (X, W), (u, dw))
    moved = [(np.asarray(a) - np.asarray(b)) / 2e-6 for a, b in zip(both(X + 1e-6 * u, W + 1e-6 * dw),
                                                                      both(X - 1e-6 * u, W - 1e-6 * dw))]
    np.testing.assert_allclose(t_y, moved[0], rtol=1e-7)
    np.testing.assert_allclose(t_ty, moved[1], rtol=1e-7)
    only_w = ad.jvp(lambda w: both(X, w)[1], (W,), (1.0,))[1]
    np.testing.assert_allclose(only_w, (both(X, W + 1e-6)[1] - both(X, W - 1e-6)[1]) / 2e-6, rtol=1e-7)


def test_the_pullback_reads_the_tangents_as_they_were_at_the_call():
    """A tangent array written after the call (and primals passed in a list) change nothing."""
    def g(x):
        t = np.ones(2)
        _, ty = ad.jvp(lambda v: np.sum(np.sin(v) * v), [x], [t])
        t[0] = 100.0
        return ty
    x = np.array([0.3, 0.5])
    np.testing.assert_allclose(ad.grad(g)(x), _central(g, x), rtol=1e-7)
