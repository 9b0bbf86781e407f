"""The rules of the NumPy functions that write entries in place (``np.add.at``, ``np.subtract.at``,
``np.put``, ``np.place``, ``np.put_along_axis``), the NaN-ignoring quantiles (``np.nanmedian``, ``np.nanquantile``,
``np.nanpercentile``), ``np.partition`` and ``np.insert``: gradients (reverse), tangents (``ad.jvp``),
Hessian-vector products (forward over reverse) and gradients of gradients (reverse over reverse), each
checked against central differences computed here with NumPy alone; and the refusals by name."""
import numpy as np
import pytest

from tensorlang import ad
from tensorlang.errors import UnsupportedError

_rng = np.random.default_rng(11)


def _central(f, x, v, h=1e-6):
    return (f(x + h * v) - f(x - h * v)) / (2 * h)


def _gradient(f, x, h=1e-6):
    """The gradient of scalar ``f`` at ``x``, one central difference per entry."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = 1.0
        g[i] = _central(f, x, e, h)
    return g


def _add_repeated(x):
    a = np.zeros(3)
    np.add.at(a, [0, 1, 1, 1], x)
    return np.sum(a * a * a)


def _add_scalar(x):
    a = x * x
    np.add.at(a, [2, 0, 2], x[1] * x[3])
    return np.sum(np.sin(a))


def _add_2d_tuple(x):
    a = np.outer(x[:3], x[1:])
    np.add.at(a, (np.array([0, 2, 0]), np.array([1, 1, 1])), x[:3] ** 2)
    return np.sum(a * a)


def _add_broadcast(x):
    a = np.ones((3, 4))
    np.add.at(a, [1, 1, 2], x)   # (x broadcast against rows)
    return np.sum(a ** 3)


def _add_loop(x):
    a = x * 1.0
    for k in range(3):
        np.add.at(a, [k, k + 1, k + 1], a[:3] * x[k])
    return np.sum(a * a)


def _add_into_view(x):
    a = np.zeros((2, 3))
    np.add.at(a[1], [0, 0, 2], x[:3] * x[1:])
    return np.sum(a ** 3) + np.sum(a * x[:3])


def _subtract(x):
    a = 2.0 * np.cos(x)
    np.subtract.at(a, [3, 3, 0], x[:3] ** 2)
    return np.sum(a * a * x)


def _put(x):
    a = x * 2.0
    np.put(a, [0, 3, 0], x[:2] ** 2)   # (the values cycled; the last write at 0 wins)
    return np.sum(a * a * x)


def _put_wrap(x):
    a = np.outer(x, x)
    np.put(a, [-1, 17, 5], np.sin(x[0]), mode="wrap")
    return np.sum(a * a)


def _place(x):
    a = x * 2.0
    np.place(a, np.array([True, False, True, True]), x[1:3] ** 3)
    return np.sum(a * a * x)


def _put_keywords(x):
    a = x * 2.0
    np.put(a, np.array([2, 0]), v=x[1:3] ** 2, mode="raise")   # (a write called with keywords: Jkw, at every order)
    return np.sum(a * x * x)


def _place_keyword(x):
    a = np.cos(x) * 1.0
    np.place(a, np.array([True, False, True, False]), vals=x[1:3] ** 2)
    return np.sum(a * a * x)


def _put_along_rows(x):
    a = np.outer(x[:3], x)
    np.put_along_axis(a, np.array([[0, 3], [1, 1], [2, 0]]), x[:3, None] ** 2, axis=1)   # (values broadcast)
    return np.sum(a * a) + a[1, 1] * x[2]


def _put_along_flat(x):
    a = np.sin(x) * 1.0
    np.put_along_axis(a, np.array([-1, 0]), x[1:3] ** 3, None)
    return np.sum(a * a * x)


def _with_nan(x):
    return np.where(np.array([[False, True, False, False], [False, False, False, True], [True] * 4]),
                    np.nan, np.reshape(x, (3, 4)))


CASES = {
    "add.at repeated": (_add_repeated, 4),
    "add.at scalar": (_add_scalar, 4),
    "add.at 2-d tuple index": (_add_2d_tuple, 4),
    "add.at broadcast rows": (_add_broadcast, 4),
    "add.at in a loop": (_add_loop, 4),
    "add.at into a view": (_add_into_view, 4),
    "subtract.at": (_subtract, 4),
    "put": (_put, 4),
    "put wrap": (_put_wrap, 4),
    "place": (_place, 4),
    "put keywords": (_put_keywords, 4),
    "place keyword": (_place_keyword, 4),
    "put_along_axis": (_put_along_rows, 4),
    "put_along_axis flat": (_put_along_flat, 4),
    "nanmedian": (lambda x: np.sum(np.nanmedian(_with_nan(x), axis=1)[:2] ** 2) + np.nanmedian(x[:7]) ** 3, 12),
    "nanquantile": (lambda x: np.sum(np.nanquantile(_with_nan(x), [0.3, 0.8], axis=0, keepdims=True)[:, :, 1:] ** 2), 12),
    "nanpercentile": (lambda x: np.sum(np.nanpercentile(_with_nan(x)[:2], 35) * x), 12),
    "partition": (lambda x: np.sum(np.partition(x, 2) ** 3 * np.arange(1.0, 6.0)), 5),
    "partition axis": (lambda x: np.sum(np.partition(np.reshape(x, (2, 3)), 1, axis=0)[0] ** 3), 6),
    "insert": (lambda x: np.sum(np.insert(x, [1, 3], x[:2] ** 2) ** 3 * np.arange(1.0, 6.0)), 3),
    "insert axis": (lambda x: np.sum(np.insert(np.reshape(x, (2, 3)), 1, x[:3] * 2, axis=0) ** 3), 6),
}


def _point(n):
    return _rng.permutation(np.linspace(0.3, 1.7, n))   # (distinct entries: no ties among the sorted ones)


@pytest.mark.parametrize("name", list(CASES))
def test_every_mode_against_central_differences(name):
    f, n = CASES[name]
    x, v = _point(n), _rng.uniform(-1, 1, n)
    g = _gradient(f, x)
    np.testing.assert_allclose(ad.grad(f)(x), g, rtol=1e-6, atol=1e-7, err_msg="reverse")
    y, t = ad.jvp(f, (x,), (v,))
    np.testing.assert_allclose(y, f(x), rtol=1e-12, err_msg="forward's value")
    np.testing.assert_allclose(t, g @ v, rtol=1e-6, atol=1e-7, err_msg="forward")
    hv = _central(lambda z: _gradient(f, z, 1e-5), x, v, 1e-4)
    np.testing.assert_allclose(ad.hvp(f, (x,), (v,))[0], hv, rtol=1e-4, atol=1e-5, err_msg="forward over reverse")
    np.testing.assert_allclose(ad.grad(lambda z: ad.grad(f)(z) @ v)(x), hv, rtol=1e-4, atol=1e-5,
                               err_msg="reverse over reverse")


def test_add_at_accumulates_a_repeated_index():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    # a = [x0, x1 + x2 + x3, 0]: d/dx sum(a^3) = 3 a[idx]^2
    np.testing.assert_allclose(ad.grad(_add_repeated)(x), 3 * np.array([1.0, 81.0, 81.0, 81.0]))


def test_nan_entries_get_zero_gradient():
    x = _point(12)
    g = ad.grad(lambda z: np.sum(np.nanmedian(_with_nan(z), axis=1)[:2]))(x)
    assert np.all(g[[1, 7, 8, 9, 10, 11]] == 0.0)
    assert np.isnan(np.nanmedian(_with_nan(x), axis=1)[2])


def test_values_match_numpy():
    x = np.array([[0.5, np.nan, 0.1], [0.7, 0.2, np.nan]])
    for q in (0.0, 0.3, 1.0, [0.25, 0.5]):
        for axis in (None, 0, 1, (0, 1)):
            got = ad.jvp(lambda z: np.nanquantile(z, q, axis=axis), (x,), (np.ones_like(x),))[0]
            np.testing.assert_allclose(got, np.nanquantile(x, q, axis=axis))


@pytest.mark.parametrize("call, what", [
    (lambda x: np.nanquantile(x, 0.3, method="nearest"), "np.nanquantile with the linear method only"),
    (lambda x: np.nanpercentile(x, 30, method="lower"), "np.nanpercentile with the linear method only"),
])
def test_nonlinear_methods_are_refused_by_name(call, what):
    with pytest.raises(UnsupportedError, match=what):
        ad.grad(lambda x: np.sum(call(x)))(_point(5))


def _ufunc_at(u):
    def f(x):
        a = x * 1.0
        u.at(a, [0, 0], x[:2])
        return np.sum(a)
    return f


@pytest.mark.parametrize("u", [np.multiply, np.divide, np.power, np.maximum, np.minimum])
@pytest.mark.parametrize("run, mode", [
    (lambda f, x: ad.grad(f)(x), "reverse"),
    (lambda f, x: ad.hvp(f, (x,), (x,)), "forward over reverse"),
    (lambda f, x: ad.grad(lambda z: ad.grad(f)(z)[0])(x), "reverse over reverse"),
])
def test_other_ufuncs_at_are_refused_by_name(u, run, mode):
    with pytest.raises(UnsupportedError, match=f"numpy.{u.__name__}.at is not differentiated in {mode} mode"):
        run(_ufunc_at(u), _point(3))
    with pytest.raises(UnsupportedError, match=f"{u.__name__}.at"):
        ad.jvp(_ufunc_at(u), (_point(3),), (np.ones(3),))


def _add_then_divide(x):
    y = x * 1.0
    np.add.at(y, [0, 0, 1], x[:3])
    y /= 1.5
    return np.sum(y * y)


def _add_then_scale_an_entry(x):
    y = x * 1.0
    np.add.at(y, [0, 1], x[:2])
    y[1] *= x[0]
    return np.sum(np.sin(y))


def _add_constants_then_scale(x):
    y = x * 1.0
    np.add.at(y, [0, 1], 1.0)
    y *= 2.0
    return np.sum(y * y)


def _added_twice(x):
    y = np.where(x > 0, x, 2 * x)
    np.add.at(y, [0, 0, 1], x[:3])
    np.add.at(y, [0, 0, 1], x[:3])
    return np.sum(y * y)


WRITTEN_AFTER = [_add_then_divide, _add_then_scale_an_entry, _add_constants_then_scale, _added_twice]


@pytest.mark.parametrize("f", WRITTEN_AFTER, ids=lambda f: f.__name__)
def test_add_at_into_an_array_written_again_after_it(f):
    """``np.add.at(y, ...)`` then another write into ``y``: the call is given a copy of ``y`` (copy on capture),
    whose writes ``runtime.cut`` copies into ``y``; its pullback handed ``y``'s gradient to the copy and left the
    gradient of ``y`` before the call there, lost (``None``, or half of it, with no error).  Now handed back.
    Second order: forward over reverse is right; reverse over reverse through that bridge is refused by name."""
    x = np.array([0.3, 0.7, 0.9, 1.1])
    np.testing.assert_allclose(ad.grad(f)(x.copy()), _gradient(f, x), rtol=1e-6, atol=1e-8)
    t = np.array([1.0, -0.5, 0.25, 2.0])
    np.testing.assert_allclose(ad.jvp(f, (x.copy(),), (t,))[1], _central(f, x, t), rtol=1e-6, atol=1e-8)
    hvp_want = _gradient(lambda u: np.dot(_gradient(f, u, 1e-4), t), x, 1e-4)
    np.testing.assert_allclose(ad.hvp(f, (x.copy(),), (t,))[0], hvp_want, rtol=1e-4, atol=1e-5)
    with pytest.raises(UnsupportedError, match="written again after it .* not supported by reverse over reverse"):
        ad.grad(lambda u: np.dot(ad.grad(f)(u), t))(x.copy())
