"""``scipy.special`` rules (``derive/ad/rules/special.py``) against central differences computed here with
plain NumPy/SciPy: the gradient (``ad.gradient``) and the tangent (``ad.jvp``) of a weighted sum of each
function against differences of the sum, and at second order the Hessian (``ad.hessian``, forward over
reverse) and the Hessian-vector product by reverse over reverse against differences of the gradient."""
import numpy as np
import pytest
import scipy.special as sc

from tensorlang import ad

X = np.array([-1.5, -0.2, 0.0, 0.7, 2.0])
CASES = {
    "erf": (sc.erf, [X]),
    "erfc": (sc.erfc, [X]),
    "erfinv": (sc.erfinv, [np.array([-0.9, -0.3, 0.0, 0.5, 0.95])]),
    "expit": (sc.expit, [np.array([-5.0, -0.5, 0.0, 1.0, 8.0])]),
    "logit": (sc.logit, [np.array([0.05, 0.3, 0.5, 0.8, 0.97])]),
    "gammaln": (sc.gammaln, [np.array([-0.5, 0.3, 1.0, 2.5, 7.0])]),
    "digamma": (sc.digamma, [np.array([-1.5, 0.4, 1.3, 3.0, 10.0])]),
    "polygamma": (lambda x: sc.polygamma(2, x), [np.array([0.4, 1.3, 3.0, 10.0])]),
    "i0e": (sc.i0e, [np.array([-3.0, -0.7, 0.4, 1.5, 20.0])]),
    "i1e": (sc.i1e, [np.array([-3.0, -0.7, 0.4, 1.5, 20.0])]),
    "ive": (lambda x: sc.ive(3, x), [np.array([-3.0, -0.7, 0.4, 1.5])]),
    "xlogy": (sc.xlogy, [np.array([[0.5], [2.0], [-1.3]]), np.array([0.3, 1.5, 4.0, 9.0])]),
    "xlog1py": (sc.xlog1py, [np.array([0.5, 2.0, -1.3, 0.7]), np.array([-0.5, 0.2, 3.0, 10.0])]),
    "multigammaln": (lambda a: sc.multigammaln(a, 3), [np.array([2.1, 3.5, 6.0])]),
    "logsumexp": (sc.logsumexp, [np.array([[0.3, -1.0, 2.0, 0.5], [1.0, 1.0, -3.0, 0.0]])]),
    "logsumexp-axis": (lambda a: sc.logsumexp(a, axis=1), [np.array([[0.3, -1.0, 2.0], [1.0, 1.0, -3.0]])]),
    "logsumexp-keepdims": (lambda a: sc.logsumexp(a, axis=0, keepdims=True),
                           [np.array([[0.3, -1.0, 2.0], [1.0, 1.0, -3.0]])]),
    "logsumexp-b": (lambda a, b: sc.logsumexp(a, axis=-1, b=b),
                    [np.array([[0.3, -1.0, 2.0], [1.0, 1.0, -3.0]]), np.array([0.5, 2.0, 1.5])]),
}


def _sum(y):
    """``sum(w * y)`` with weights that differ between entries."""
    return np.sum(y * (1 + 0.1 * np.arange(np.size(y)).reshape(np.shape(y))))


def _weighted(f, args):
    """The weighted sum of ``f`` of one or two arguments (``tensorlang.ad`` takes no ``*args``)."""
    return (lambda x: _sum(f(x))) if len(args) == 1 else (lambda x, y: _sum(f(x, y)))


def _hvp(loss, args, i, v):
    """The Hessian-vector product in argument ``i`` by reverse over reverse (None, a gradient that is 0
    throughout, as 0: ``xlogy``'s second derivative in ``x``)."""
    if len(args) == 1:
        hv = ad.grad(lambda x: np.sum(ad.grad(loss)(x) * v))(*args)
    else:
        hv = ad.grad(lambda x, y: np.sum(ad.grad(loss, argnums=i)(x, y) * v), argnums=i)(*args)
    return np.zeros_like(args[i]) if hv is None else hv


def _central(f, args, i, h):
    """The central differences of scalar ``f`` in each entry of ``args[i]``."""
    x = np.asarray(args[i], dtype=float)
    g = np.zeros(x.shape + np.shape(f(*args)))
    for k in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[k] = h
        up, down = list(args), list(args)
        up[i], down[i] = x + e, x - e
        g[k] = (np.asarray(f(*up)) - np.asarray(f(*down))) / (2 * h)
    return g


@pytest.mark.parametrize("name", CASES)
def test_first_order(name):
    f, args = CASES[name]
    loss = _weighted(f, args)
    grads = ad.gradient(loss, *args)
    rng = np.random.default_rng(0)
    for i, x in enumerate(args):
        np.testing.assert_allclose(grads[i], _central(loss, args, i, 1e-6), rtol=1e-6, atol=1e-7)
        v = rng.standard_normal(np.shape(x))
        tangents = [v if j == i else np.zeros_like(a) for j, a in enumerate(args)]
        ty = ad.jvp(loss, tuple(args), tuple(tangents))[1]
        np.testing.assert_allclose(ty, np.sum(_central(loss, args, i, 1e-6) * v), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", CASES)
def test_second_order(name):
    f, args = CASES[name]
    loss = _weighted(f, args)
    rng = np.random.default_rng(1)
    for i, x in enumerate(args):
        expected = _central(lambda *a: ad.gradient(loss, *a)[i], args, i, 1e-5)   # [k] = d grad / d x_k
        np.testing.assert_allclose(ad.hessian(loss, argnums=i)(*args), expected, rtol=1e-5, atol=1e-6)
        v = rng.standard_normal(np.shape(x))
        hv = _hvp(loss, args, i, v)
        np.testing.assert_allclose(hv, np.tensordot(v, expected, np.ndim(v)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("f, x", [(sc.erf, 0.3), (sc.erfinv, -0.4), (sc.expit, 2.0), (sc.logit, 0.2),
                                  (sc.gammaln, 3.3), (sc.digamma, 0.7), (sc.i0e, -1.2), (sc.i1e, 2.5)])
def test_numbers_at_second_order(f, x):
    d = (f(x + 1e-6) - f(x - 1e-6)) / 2e-6
    dd = (f(x + 1e-4) - 2 * f(x) + f(x - 1e-4)) / 1e-8
    assert ad.grad(f)(x) == pytest.approx(d, rel=1e-6)
    assert ad.grad(ad.grad(f))(x) == pytest.approx(dd, rel=1e-4, abs=1e-5)


def test_i1e_derivative_at_zero_is_one_half():
    assert ad.grad(sc.i1e)(0.0) == pytest.approx(0.5)
    assert ad.jvp(sc.i1e, (np.zeros(2),), (np.ones(2),))[1] == pytest.approx([0.5, 0.5])


def test_logsumexp_at_large_inputs_is_the_softmax():
    a = np.array([[1000.0, 1001.0, 999.5], [-1000.0, 1000.0, 1000.0]])
    s = np.exp(a - np.max(a, axis=1, keepdims=True))
    s /= np.sum(s, axis=1, keepdims=True)
    g = ad.grad(lambda a: np.sum(sc.logsumexp(a, axis=1)))(a)
    np.testing.assert_allclose(g, s, rtol=1e-12)
    v = np.array([[1.0, -2.0, 0.5], [0.3, 0.0, 1.0]])
    np.testing.assert_allclose(ad.jvp(lambda a: sc.logsumexp(a, axis=1), (a,), (v,))[1], np.sum(s * v, axis=1))
    h = ad.hessian(lambda r: sc.logsumexp(r))(a[0])
    np.testing.assert_allclose(h, np.diag(s[0]) - np.outer(s[0], s[0]), atol=1e-12)


def test_logsumexp_refuses_return_sign():
    from tensorlang.errors import UnsupportedError
    with pytest.raises(UnsupportedError, match="return_sign"):
        ad.grad(lambda a: sc.logsumexp(a, return_sign=True)[0])(np.ones(3))


def test_values_where_not_differentiable_follow_the_function():
    gx, gy = ad.gradient(lambda x, y: np.sum(sc.xlogy(x, y)), np.array([0.0, 0.0, 2.0]), np.array([3.0, 0.0, 0.0]))
    np.testing.assert_array_equal(gx, [np.log(3.0), -np.inf, -np.inf])
    np.testing.assert_array_equal(gy, [0.0, 0.0, np.inf])
    t = ad.jvp(lambda x, y: sc.xlogy(x, y), (np.array([0.0]), np.array([0.0])), (np.zeros(1), np.ones(1)))[1]
    np.testing.assert_array_equal(t, [0.0])
    np.testing.assert_array_equal(ad.grad(lambda x: np.sum(sc.erfinv(x)))(np.array([-1.0, 1.0, 1.5])),
                                  [np.inf, np.inf, np.nan])
    np.testing.assert_array_equal(ad.grad(lambda x: np.sum(sc.logit(x)))(np.array([0.0, 1.0, 1.5, -0.5])),
                                  [np.inf, np.inf, np.nan, np.nan])
    np.testing.assert_array_equal(ad.jvp(sc.logit, (np.array([0.0, 2.0]),), (np.ones(2),))[1], [np.inf, np.nan])
