"""``tensorlang.ad`` with JAX's shape: ``ad.grad(f, argnums)`` gives the gradient itself (a tuple for a
tuple of argnums), ``ad.value_and_grad``, ``ad.grad(ad.grad(h))``, ``ad.grad`` called inside a differentiated function, an error for a non-scalar output, a
gradient SciPy can use as ``jac``; and errors that show the user's own file and line, not the library's."""
import math
import traceback

import numpy as np
import pytest

from tensorlang import TensorLangError, UnsupportedError, ad

RNG = np.random.default_rng(3)
X = RNG.normal(size=(6, 3))
Y = RNG.normal(size=6)


def ridge(w, lam):
    r = X @ w - Y
    return np.sum(r * r) + lam * np.sum(w * w)


def ridge_gradient(w, lam):  # the oracle: by hand
    return 2 * X.T @ (X @ w - Y) + 2 * lam * w


def cube(x):
    return x * x * x


def test_grad_gives_the_gradient_of_one_argument_or_a_tuple():
    w = RNG.normal(size=3)
    np.testing.assert_allclose(ad.grad(ridge)(w, 0.5), ridge_gradient(w, 0.5))
    gw, glam = ad.grad(ridge, argnums=(0, 1))(w, 0.5)
    np.testing.assert_allclose(gw, ridge_gradient(w, 0.5))
    assert glam == pytest.approx(np.sum(w * w))
    assert ad.grad(ridge, argnums=1)(w, 0.5) == pytest.approx(np.sum(w * w))
    assert ad.gradient(ridge, w, 0.5)[1] == pytest.approx(np.sum(w * w))  # Zygote's form: a tuple
    with pytest.raises(TensorLangError, match="argnums=2"):
        ad.grad(ridge, argnums=2)(w, 0.5)
    with pytest.raises(TensorLangError, match="argnums must be"):
        ad.grad(ridge, argnums="w")


def test_value_and_grad():
    w = RNG.normal(size=3)
    value, g = ad.value_and_grad(ridge)(w, 0.1)
    assert value == pytest.approx(ridge(w, 0.1))
    np.testing.assert_allclose(g, ridge_gradient(w, 0.1))
    value, (gw, glam) = ad.value_and_grad(ridge, argnums=(0, 1))(w, 0.1)
    assert glam == pytest.approx(np.sum(w * w))


def test_grad_composes_into_a_second_derivative():
    for x in (2.0, -0.5):
        assert ad.grad(ad.grad(cube))(x) == pytest.approx(6 * x)
        assert ad.grad(ad.grad(math.sin))(x) == pytest.approx(-math.sin(x))
    assert ad.grad(ad.grad(lambda x: math.exp(2.0 * x)))(0.3) == pytest.approx(4 * math.exp(0.6))
    assert ad.grad(ad.grad(ad.grad(cube)))(1.0) == pytest.approx(6.0)
    assert ad.grad(ad.grad(ad.grad(ad.grad(cube))))(1.0) == 0.0   # (of its recordings: ``tower``)


def _central(f, x, h=1e-5):
    return (f(x + h) - f(x - h)) / (2 * h)


def _grad_inside(x):
    inner = lambda y, z: x * x * y * y * z   # noqa: E731  (closes over x)
    return ad.grad(inner, argnums=1)(2.0, 5.0) + ad.grad(inner)(1.0, 3.0)


def test_grad_made_inside_a_differentiated_function_passes_gradients_to_what_it_closes_over():
    for x in (3.0, -0.7):
        assert ad.gradient(_grad_inside, x)[0] == pytest.approx(_central(_grad_inside, x), rel=1e-7)
    outer = lambda c: ad.grad(lambda y: c * c * y * y)(1.0)   # noqa: E731  (2 c^2)
    assert ad.grad(outer)(3.0) == pytest.approx(12.0)
    with pytest.raises(UnsupportedError, match="value_and_grad"):
        ad.gradient(lambda x: ad.value_and_grad(lambda y: x * y)(2.0)[1], 1.0)


def test_scipy_minimize_takes_ad_grad_as_jac():
    optimize = pytest.importorskip("scipy.optimize")

    def loss(w):
        return ridge(w, 0.3)

    result = optimize.minimize(loss, np.zeros(3), jac=ad.grad(loss), method="BFGS")
    assert result.success
    exact = np.linalg.solve(X.T @ X + 0.3 * np.eye(3), X.T @ Y)
    np.testing.assert_allclose(result.x, exact, rtol=1e-5, atol=1e-7)


def double(x):
    return x * 2


def test_a_non_scalar_output_is_an_error_naming_it():
    x = np.ones(3)
    for f in (double, np.sin):
        with pytest.raises(TensorLangError, match=r"real scalar.*array of shape \(3,\).*ad\.jacobian.*ad\.pullback"):
            ad.gradient(f, x)
        with pytest.raises(TensorLangError, match="real scalar"):
            ad.grad(f)(x)
        with pytest.raises(TensorLangError, match="real scalar"):
            ad.value_and_grad(f)(x)
    with pytest.raises(TensorLangError, match="of type tuple"):
        ad.gradient(lambda x: (x, x), 1.0)
    y, back = ad.pullback(double, x)  # the vector-Jacobian product the message points to
    np.testing.assert_array_equal(back(np.arange(3.0))[0], 2 * np.arange(3.0))
    assert ad.gradient(lambda x: np.sum(np.sin(x)), x)[0] == pytest.approx(np.cos(x))


def broken(x):
    y = x * 2.0
    z = math.log(y - 10.0)  # the line the traceback must show
    return z * z


def _shown(call):
    with pytest.raises(Exception) as info:
        call()
    return info.value, "".join(traceback.format_exception(info.value))


def test_a_run_time_error_names_the_users_line_without_chained_internals():
    for call in (lambda: ad.gradient(broken, 1.0), lambda: ad.grad(broken)(1.0),
                 lambda: ad.pullback(broken, 1.0)):
        err, shown = _shown(call)
        assert isinstance(err, ValueError)
        frames = traceback.extract_tb(err.__traceback__)
        assert (frames[-1].filename, frames[-1].line) == (__file__, "z = math.log(y - 10.0)  # the line the "
                                                                    "traceback must show")
        assert "During handling" not in shown and "KeyError" not in shown
        assert "runtime.py" not in shown and "<tensorlang" not in shown


def test_a_transform_time_error_names_the_users_line():
    def uses_a_set(x):
        return len({x, 2 * x}) * x

    err, shown = _shown(lambda: ad.gradient(uses_a_set, 1.0))
    assert isinstance(err, UnsupportedError)
    assert f"{__file__}:" in str(err) and "return len({x, 2 * x}) * x" in str(err)
    assert "During handling" not in shown and "lower.py" not in shown


def test_has_aux_returns_the_auxiliary_value_undifferentiated():
    """``ad.grad(f, has_aux=True)`` and ``ad.value_and_grad(f, has_aux=True)`` as in JAX: ``f`` returns
    ``(value, aux)``; aux (here the predictions, which depend on the parameters) carries no gradient."""
    def loss(w, lam):
        pred = X @ w
        return np.sum((pred - Y) ** 2) + lam * np.sum(w * w), {"pred": pred, "n": len(Y)}
    w = RNG.normal(size=3)
    g, aux = ad.grad(loss, has_aux=True)(w, 0.5)
    np.testing.assert_allclose(g, ad.grad(lambda w, lam: loss(w, lam)[0])(w, 0.5))
    np.testing.assert_allclose(g, 2 * X.T @ (X @ w - Y) + w, rtol=1e-12)
    np.testing.assert_allclose(aux["pred"], X @ w)
    (value, aux2), (gw, glam) = ad.value_and_grad(loss, argnums=(0, 1), has_aux=True)(w, 0.5)
    assert value == pytest.approx(loss(w, 0.5)[0]) and aux2["n"] == len(Y)
    np.testing.assert_allclose(gw, g)
    assert glam == pytest.approx(np.sum(w * w))
    with pytest.raises(TensorLangError, match="must return a pair"):
        ad.grad(lambda w: np.sum(w), has_aux=True)(w)
