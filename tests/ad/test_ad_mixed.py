"""Mixed mode: ``ad.jacobian`` (forward and reverse agree with finite differences), ``ad.hessian`` and
``ad.hvp`` (forward over reverse) against hand-derived Hessians of the paper's examples, and
``ad.forwarddiff`` inside a reverse pass."""
import math

import numpy as np
import pytest

from tensorlang import ad
from tensorlang.errors import TensorLangError, UnsupportedError


def _fd_jacobian(f, x, h=1e-6):
    x = np.asarray(x, dtype=float)
    cols = []
    for j in range(x.size):
        e = np.zeros(x.shape)
        e.flat[j] = h
        cols.append(np.ravel((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * h)))
    return np.stack(cols, axis=1)


def spiral(x):
    return np.array([np.sin(x[0]) * x[1], x[0] * x[1] ** 2, np.exp(x[1]), np.tanh(x[0] - x[1])])


def squash(x):
    return np.array([np.sum(x ** 2), np.sum(np.cos(x))])


@pytest.mark.parametrize("f, n", [(spiral, 2), (squash, 5)])
def test_jacobian_forward_and_reverse_agree_with_differences(f, n):
    x = np.linspace(-0.7, 0.9, n)
    ref = _fd_jacobian(f, x)
    for mode in (None, "forward", "reverse"):
        assert np.allclose(ad.jacobian(f, mode=mode)(x), ref, atol=1e-6), mode


def test_jacobian_shapes_and_argnums():
    def f(W, x):
        return np.tanh(W @ x)
    W, x = np.ones((3, 2)) * 0.1, np.array([0.5, -1.0])
    JW, Jx = ad.jacobian(f, argnums=(0, 1))(W, x)
    assert JW.shape == (3, 3, 2) and Jx.shape == (3, 2)
    assert np.allclose(Jx, _fd_jacobian(lambda v: f(W, v), x), atol=1e-7)
    assert ad.jacobian(math.sin)(0.3) == pytest.approx(math.cos(0.3))


def test_jacobian_refuses_what_it_cannot_shape():
    with pytest.raises(TensorLangError, match="argument 0 must be a real number or a real array"):
        ad.jacobian(lambda s: s)("abc")
    with pytest.raises(TensorLangError, match="a Jacobian needs a real number or array"):
        ad.jacobian(lambda x: [x, x])(1.0)


def rosenbrock(x, y):
    return (1 - x) ** 2 + 100 * (y - x * x) ** 2


def rosenbrock_n(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def test_hessian_of_rosenbrock_by_hand():
    x, y = 1.5, 0.5
    hand = np.array([[2 - 400 * (y - 3 * x * x), -400 * x], [-400 * x, 200.0]])
    assert np.allclose(ad.hessian(rosenbrock)(x, y), hand[0, 0])
    assert np.allclose(ad.hvp(rosenbrock, (x, y), (1.0, 0.0)), hand[:, 0])
    assert np.allclose(ad.hvp(rosenbrock, (x, y), (0.0, 1.0)), hand[:, 1])
    v = np.array([1.2, 0.8, -0.5, 0.3])
    n = len(v)
    hand = np.zeros((n, n))
    for i in range(n - 1):
        hand[i, i] += 1200 * v[i] ** 2 - 400 * v[i + 1] + 2
        hand[i + 1, i + 1] += 200
        hand[i, i + 1] = hand[i + 1, i] = -400 * v[i]
    assert np.allclose(ad.hessian(rosenbrock_n)(v), hand)


def test_hessian_of_quadratic_form():
    A = np.array([[2.0, 1.0, 0.0], [0.5, 3.0, 1.0], [0.0, -1.0, 1.0]])

    def xAx(x, A):
        return x @ (A @ x)
    assert np.allclose(ad.hessian(xAx)(np.array([0.3, -0.2, 0.5]), A), A + A.T)


def test_hessian_of_small_mlp_by_hand():
    rng = np.random.default_rng(0)
    W, x, v, t = rng.standard_normal((3, 2)), rng.standard_normal(2), rng.standard_normal(3), 0.4

    def loss(W):
        return 0.5 * (v @ np.tanh(W @ x) - t) ** 2

    h = np.tanh(W @ x)
    r = v @ h - t
    g = (v * (1 - h * h))[:, None] * x[None, :]           # d(v.h)/dW
    hand = np.einsum("ij,kl->ijkl", g, g)
    for i in range(3):
        hand[i, :, i, :] += r * v[i] * (-2 * h[i] * (1 - h[i] ** 2)) * np.outer(x, x)
    assert np.allclose(ad.hessian(loss)(W), hand)


def _second_differences(f, x, h=1e-4):
    """``d2 f / dx_j dx_k`` of array-valued ``f`` by central differences, shaped ``shape(f(x)) + 2 * shape(x)``."""
    n, y = x.size, np.asarray(f(x))
    out = np.zeros(y.shape + (n, n))
    for j in range(n):
        for k in range(n):
            ej, ek = np.zeros(n), np.zeros(n)
            ej[j], ek[k] = h, h
            ej, ek = ej.reshape(x.shape), ek.reshape(x.shape)
            out[..., j, k] = (f(x + ej + ek) - f(x + ej - ek) - f(x - ej + ek) + f(x - ej - ek)) / (4 * h * h)
    return out.reshape(y.shape + x.shape + x.shape)


@pytest.mark.parametrize("f, shape", [(spiral, (2,)), (squash, (3,)), (lambda X: np.tanh(X @ X.T), (2, 3))])
def test_hessian_of_an_array_valued_function_is_jaxs(f, shape):
    """As ``jax.hessian``: of shape ``shape(f(x)) + shape(x) + shape(x)``, the Jacobian of the Jacobian."""
    x = np.linspace(-0.6, 0.8, int(np.prod(shape))).reshape(shape)
    H = ad.hessian(f)(x)
    assert H.shape == np.shape(f(x)) + shape + shape
    assert np.allclose(H, _second_differences(f, x), atol=1e-5)
    assert np.allclose(H, ad.jacobian(ad.jacobian(f))(x))


def test_hessian_through_slogdet_by_its_forward_rule():
    def f(x):
        return np.linalg.slogdet(x)[1]
    a = np.array([[2.0, 0.1], [0.3, 1.0]])
    inv = np.linalg.inv(a)
    assert np.allclose(ad.hessian(f)(a), -np.einsum("li,jk->ijkl", inv, inv))


def test_hessian_through_sort_a_declared_linear_rule():
    def f(x):
        return np.sum(np.sort(x) * x)   # x . P x with P the sorting permutation: H = P + P^T
    assert np.array_equal(ad.hessian(f)(np.array([0.3, 0.1])), [[0.0, 2.0], [2.0, 0.0]])


def test_forwarddiff_inside_reverse_pass():
    def inner(a, b):
        s = a
        for _ in range(20):
            s = np.sin(s) * b + 0.1 * s
        return s

    def loss(a, b):
        return np.sum(ad.forwarddiff(inner, a, b) ** 2)

    def plain(a, b):
        return np.sum(inner(a, b) ** 2)

    a, b = np.array([0.3, -0.4, 0.9]), 0.7
    assert loss(a, b) == plain(a, b)
    got, want = ad.gradient(loss, a, b), ad.gradient(plain, a, b)
    assert np.allclose(got[0], want[0]) and np.isclose(got[1], want[1])


def test_forwarddiff_refuses_captured_values():
    c = 2.0

    def loss(x):
        return ad.forwarddiff(lambda u: u * c, x)
    with pytest.raises(UnsupportedError, match="captures 'c'"):
        ad.gradient(loss, 1.0)


def test_hessian_through_indexed_reads_in_a_loop():
    def cyclic(x):
        s = 0.0
        for i in range(3):
            s = s + x[i] * x[i] * x[(i + 1) % 3]
        return s

    x = np.array([0.3, -0.7, 1.1])
    hand = np.zeros((3, 3))
    for i in range(3):
        j = (i + 1) % 3
        hand[i, i] += 2 * x[j]
        hand[i, j] += 2 * x[i]
        hand[j, i] += 2 * x[i]
    assert np.allclose(ad.hessian(cyclic)(x), hand)


@pytest.mark.parametrize("mode", [None, "forward", "reverse"])
def test_a_jacobian_of_a_function_that_writes_into_its_argument_leaves_the_callers_array(mode):
    """The pullback that tells the output's size (and gives the reverse rows) runs on a copy: run on the caller's
    array, it doubled ``x[0]`` before forward mode's columns, which then gave 16 for 8."""
    def f(x):
        x[0] = x[0] * 2.0
        return x * x

    def g(x):
        x[0] = x[0] * 2.0
        return np.array([np.sum(x * x)])

    for fn, want in ((f, np.diag([8.0, 4.0, 6.0])), (g, np.array([[8.0, 4.0, 6.0]]))):
        x = np.array([1.0, 2.0, 3.0])
        np.testing.assert_allclose(ad.jacobian(fn, mode=mode)(x), want, rtol=1e-14)
        np.testing.assert_array_equal(x, [1.0, 2.0, 3.0])
