"""JAX's conventions of ``ad.grad``, ``ad.value_and_grad``, ``ad.jacobian`` and ``ad.hessian``: an int or bool
argument in a differentiated position is an error naming it and its dtype (not at other positions); keyword
arguments are passed to the function and not differentiated; ``ad.stop_gradient`` has derivative zero in
every mode.  Every result is checked against a closed form."""
import math

import numpy as np
import pytest

from tensorlang import TensorLangError, UnsupportedError, ad
from tensorlang.errors import TypeCheckError


def power(x, n):
    return x ** n


def total_cubes(x):
    return np.sum(x ** 3)


class Accumulator:
    def __init__(self):
        self.total = 0.0


# -- integer arguments -----------------------------------------------------------------------------------------------
INTEGERS = [(3, "an int", "int"), (True, "a bool", "bool"), (np.int32(3), "a NumPy int32", "int32"),
            (np.arange(3), "an array of dtype int64", "int64"), (np.array([True, False]), "an array of dtype bool", "bool")]
APIS = {"grad": lambda f: ad.grad(f), "value_and_grad": lambda f: ad.value_and_grad(f),
        "jacobian": lambda f: ad.jacobian(f), "hessian": lambda f: ad.hessian(f)}


@pytest.mark.parametrize("api", list(APIS))
@pytest.mark.parametrize("x, what, dtype", INTEGERS, ids=[w for _, w, _ in INTEGERS])
def test_an_integer_in_a_differentiated_position_is_refused_by_name(api, x, what, dtype):
    with pytest.raises(TypeCheckError, match=rf"ad\.{api}\(total_cubes\): argument 0 \(x\) is {what}, and {api} "
                                             rf"requires real- or complex-valued inputs .* but got {dtype};"):
        APIS[api](total_cubes)(x)


def test_an_integer_in_a_tuple_of_argnums_is_refused_and_elsewhere_allowed():
    with pytest.raises(TypeCheckError, match=r"argument 1 \(n\) is an int"):
        ad.grad(power, argnums=(0, 1))(2.0, 3)
    with pytest.raises(TypeCheckError, match=r"argument 1 \(n\) is an int"):
        ad.value_and_grad(power, argnums=1)(2.0, 3)
    assert ad.grad(power)(2.0, 3) == 12.0   # n is not differentiated
    assert ad.value_and_grad(power)(2.0, 3) == (8.0, 12.0)
    assert ad.jacobian(power)(2.0, 3) == pytest.approx(12.0)
    assert ad.hessian(power)(2.0, 3) == pytest.approx(12.0)
    assert ad.gradient(power, 2.0, 3) == (12.0, None)   # Zygote's form keeps None for an int


def test_floats_of_every_kind_are_differentiated():
    assert ad.grad(total_cubes)(np.float32(2.0)) == pytest.approx(12.0)
    assert np.allclose(ad.grad(total_cubes)(np.array([1.0, 2.0], dtype=np.float32)), [3.0, 12.0])
    assert ad.grad(lambda z: (z * z).real)(1.0 + 2.0j) == pytest.approx(2.0 - 4.0j)


# -- keyword arguments --------------------------------------------------------------------------------------------------
def scaled(x, y, scale=1.0, offset=0.0):
    return scale * x * x * y + offset


def test_keyword_arguments_are_passed_and_not_differentiated():
    x, y = 2.0, 3.0
    assert ad.grad(scaled)(x, y, scale=3.0) == pytest.approx(2 * 3.0 * x * y)
    assert ad.grad(scaled, argnums=(0, 1))(x, y, offset=1.0, scale=3.0) == pytest.approx((2 * 3.0 * x * y, 3.0 * x * x))
    value, g = ad.value_and_grad(scaled, argnums=1)(x, y, scale=0.5)
    assert value == pytest.approx(0.5 * x * x * y) and g == pytest.approx(0.5 * x * x)
    assert ad.jacobian(scaled)(x, y, scale=3.0) == pytest.approx(2 * 3.0 * x * y)
    assert ad.hessian(scaled)(x, y, scale=3.0) == pytest.approx(2 * 3.0 * y)
    assert ad.hessian(scaled, argnums=-1)(x, y, scale=3.0) == 0.0   # (the last of the positional arguments: y)
    assert ad.grad(ad.grad(scaled))(x, y, scale=3.0) == pytest.approx(2 * 3.0 * y)
    (value, aux), g = ad.value_and_grad(lambda x, k=1.0: (k * x * x, x + k), has_aux=True)(x, k=4.0)
    assert (value, aux, g) == pytest.approx((16.0, 6.0, 16.0))


def test_keyword_arrays_and_keywords_that_are_not_parameters():
    w = np.array([1.0, 2.0, 3.0])
    x = np.array([0.5, -1.0, 2.0])
    assert np.allclose(ad.grad(lambda x, w=None: np.sum(w * x * x))(x, w=w), 2 * w * x)
    assert np.allclose(ad.jacobian(lambda x, w=None: w * np.sin(x))(x, w=w), np.diag(w * np.cos(x)))
    with pytest.raises(TypeError, match="unexpected keyword argument 'sacle'"):
        ad.grad(scaled)(1.0, 2.0, sacle=3.0)
    with pytest.raises(TensorLangError, match="argnums"):
        ad.grad(scaled, argnums=2)(1.0, 2.0, scale=3.0)   # scale is a keyword: not an argument position


# -- stop_gradient ---------------------------------------------------------------------------------------------------
def stopped(x):
    return x ** 3 * ad.stop_gradient(x)   # x^3 c: f' = 3 x^2 c, f'' = 6 x c (c = x, held constant)


def stopped_arrays(x):
    ys = []
    for i in range(len(x)):
        ys.append(x[i] * ad.stop_gradient(x[i] ** 2))
    return sum(ys) + np.sum(np.exp(ad.stop_gradient(x)))   # sum x_i c_i + const


def written_after_stop(x):
    y = ad.stop_gradient(x)   # a copy: writing it changes neither x nor x's derivatives
    y[0] = 10.0 * x[1]
    return np.sum(x * y)      # x0 * 10 x1 + x1^2 (held) + x2^2 (held)


def test_stop_gradient_returns_its_argument_and_has_derivative_zero_in_every_mode():
    x = 1.5
    v = np.array([1.0, 2.0])
    assert ad.stop_gradient(x) is x and ad.stop_gradient(v) is not v and np.array_equal(ad.stop_gradient(v), v)
    assert ad.stop_gradient({"a": [v, 2.0]})["a"][1] == 2.0
    with pytest.raises(UnsupportedError, match="ad.stop_gradient of Accumulator is not supported"):
        ad.stop_gradient(Accumulator())
    assert stopped(x) == pytest.approx(x ** 4)
    assert ad.grad(stopped)(x) == pytest.approx(3 * x ** 3)
    assert ad.jvp(stopped, (x,), (2.0,)) == pytest.approx((x ** 4, 2.0 * 3 * x ** 3))
    assert ad.hessian(stopped)(x) == pytest.approx(6 * x * x)
    assert ad.hvp(stopped, (x,), (2.0,))[0] == pytest.approx(2.0 * 6 * x * x)
    assert ad.grad(ad.grad(stopped))(x) == pytest.approx(6 * x * x)
    assert ad.grad(lambda x: ad.stop_gradient(x * x))(x) == 0.0
    xs = np.array([0.5, -1.0, 2.0])
    assert np.allclose(ad.grad(stopped_arrays)(xs), xs ** 2)
    assert ad.jvp(stopped_arrays, (xs,), (v.tolist() + [1.0],))[1] == pytest.approx(xs ** 2 @ [1.0, 2.0, 1.0])
    assert np.allclose(ad.hessian(lambda x: np.sum(x * x * ad.stop_gradient(x)))(xs), np.diag(2 * xs))
    a, b, c = xs
    assert np.allclose(ad.grad(written_after_stop)(xs), [10 * b, 10 * a + b, c])
    assert ad.jvp(written_after_stop, (xs,), (np.array([1.0, 2.0, 3.0]),))[1] == pytest.approx(10 * b + 2 * (10 * a + b) + 3 * c)
    assert np.allclose(ad.hessian(written_after_stop)(xs), [[0, 10, 0], [10, 0, 0], [0, 0, 0]])


def test_stop_gradient_is_exported():
    assert "stop_gradient" in ad.__all__ and math.isclose(ad.stop_gradient(2.0), 2.0)


def test_a_gradient_that_does_not_depend_on_its_argument_is_zeros_like_it():
    """Where ``f`` does not depend on a differentiated argument (a constant, a count of positive entries), ``ad.grad``
    and ``ad.value_and_grad`` give zeros of its type, shape and dtype, as ``jax.grad`` does (they gave None for an
    array, which ``x - lr * g`` then failed on, while a float got 0.0); a container argument gets the same container
    of zeros.  ``ad.gradient``, Zygote's form, keeps None, Zygote's ``nothing``."""
    x = np.array([0.5, -1.0, 2.0])
    for g in (ad.grad(lambda v: 3.0)(x), ad.grad(lambda v: np.sum(v > 0) * 1.0)(x),
              ad.value_and_grad(lambda v: np.sum(v > 0) * 1.0)(x)[1]):
        assert type(g) is np.ndarray and g.shape == (3,) and not g.any()
    g32 = ad.grad(lambda v: 3.0)(x.astype(np.float32))
    assert g32.dtype == np.float32 and not g32.any()
    assert ad.grad(lambda a: 3.0)(2.0) == 0.0 and ad.grad(lambda a: 3.0)(np.float32(2.0)) == np.float32(0.0)
    ga, gb = ad.grad(lambda a, b: np.sum(b * b), argnums=(0, 1))(x, x)
    np.testing.assert_array_equal(ga, np.zeros(3))
    np.testing.assert_array_equal(gb, 2 * x)
    d = ad.grad(lambda p: 1.0)({"w": x, "n": 3})
    assert d.keys() == {"w", "n"} and not d["w"].any() and d["n"] is None
    x2 = x - 0.1 * ad.grad(lambda v: np.sum(v > 0) * 1.0)(x)   # (a step of gradient descent, as users write it)
    np.testing.assert_array_equal(x2, x)
    assert ad.gradient(lambda v: 3.0, x) == (None,)


def test_a_gradient_called_inside_a_derivative_is_zeros_where_it_is_there():
    """``ad.grad(f)`` called inside a differentiated function gives what it gives outside: zeros, not None, where
    ``f`` does not depend on the argument (``None * u`` raised a raw ``TypeError`` there)."""
    x, u = np.array([0.3, -0.7, 1.1]), np.array([0.5, -0.2, 0.3])
    inner = ad.grad(lambda v: np.sum(np.sin(np.vander(v, 1))))
    np.testing.assert_array_equal(ad.grad(lambda z: np.sum(inner(z) * u))(x), np.zeros(3))
    np.testing.assert_array_equal(ad.jvp(lambda z: np.sum(inner(z) * u), (x,), (u,))[1], 0.0)
