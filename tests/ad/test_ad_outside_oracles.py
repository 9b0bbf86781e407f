"""Derivatives checked against oracles that share no code with tensorlang.ad: central differences computed
here with plain NumPy, or closed forms; in reverse mode, forward mode and at second order, wherever the
function has a derivative.  Each case was once a wrong derivative given without an error, or a raw
exception: a method reached through ``getattr``, ``x.flat[i]`` in forward mode, masked branches of
``np.where``, the norm at 0, the determinant of a singular matrix ..."""
import concurrent.futures as cf
import functools
import types

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.special as sc

from tensorlang import ad
from tensorlang.errors import UnsupportedError
from all_modes import check_modes   # (tests/ad is on the path)


def cd(f, x, h=1e-6):
    """The derivative of ``f`` at ``x`` (a float or a float array) by central differences: an array of shape
    ``shape(f(x)) + shape(x)``."""
    x = np.asarray(x, dtype=float)
    cols = []
    for k in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[k] = h
        up, down = (x + e, x - e) if x.ndim else (float(x + e), float(x - e))
        cols.append((np.asarray(f(up), dtype=float) - np.asarray(f(down), dtype=float)) / (2 * h))
    out = np.stack(cols, axis=-1) if cols else np.zeros(np.shape(f(x)) + (0,))
    return out.reshape(np.shape(f(x)) + x.shape)


def cd2(f, x, h=1e-4):
    """The Hessian of scalar ``f`` at ``x`` by second central differences."""
    return cd(lambda z: cd(f, z, h), x, h)


def along(f, x, t, h=1e-6):
    """The derivative of ``f`` at ``x`` along ``t`` by central differences."""
    return (np.asarray(f(x + h * t)) - np.asarray(f(x - h * t))) / (2 * h)


def close(a, b, tol=1e-5):
    return np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=tol, atol=tol)


# -- a method reached through getattr ---------------------------------------------------------------------------
X23 = np.array([[1.0, -2.0, 0.5], [0.3, 1.5, -0.7]])


def _getattr_sum(x):
    return np.sum(getattr(x, "sum")(axis=1) ** 2)


def _kept_method(x):
    total = x.sum
    return np.sum(total(axis=0) ** 3)


class _Scaler:
    def __init__(self, w):
        self.w = w

    def scale(self, v, k=1.0):
        return self.w * v * k


def _python_method_by_name(w):
    s = _Scaler(w)
    return getattr(s, "scale")(2.0, k=w) + s.scale(1.0, k=3.0)


@pytest.mark.parametrize("f", [_getattr_sum, _kept_method])
def test_a_method_reached_through_getattr_in_every_mode(f):
    t = np.array([[0.2, -1.0, 0.4], [1.0, 0.5, -0.3]])
    assert close(ad.grad(f)(X23), cd(f, X23))
    assert close(ad.jvp(f, (X23,), (t,))[1], along(f, X23, t))
    assert close(ad.jvp(lambda x: getattr(x, "sum")(axis=1), (X23,), (t,))[1], t.sum(axis=1))
    assert close(ad.hessian(f)(X23), cd2(f, X23), 1e-4)


def test_a_python_method_reached_through_getattr():
    f = _python_method_by_name
    assert close(ad.grad(f)(1.5), cd(f, 1.5))
    assert close(ad.jvp(f, (1.5,), (1.0,))[1], cd(f, 1.5))
    assert close(ad.hessian(f)(1.5), 4.0)   # 2 w ** 2 + 3 w


# -- x.flat[i] in forward mode ------------------------------------------------------------------------------------
V4 = np.array([1.0, 2.0, 3.0, 4.0])
T4 = np.array([1.0, -1.0, 0.5, 2.0])


def _flat_write(x):
    y = x * 2.0
    y.flat[1] = x[0] ** 2
    return np.sum(y * x)


def test_an_entry_read_through_flat_in_every_mode():
    assert close(ad.jvp(lambda x: x.flat[2] * x, (V4,), (T4,))[1], V4[2] * T4 + T4[2] * V4)
    m = V4.reshape(2, 2)
    assert close(ad.jvp(lambda x: x.flat[3] * x, (m,), (T4.reshape(2, 2),))[1],
                 along(lambda x: x.flat[3] * x, m, T4.reshape(2, 2)))
    f = lambda x: np.sum(x.flat[2] * x)   # noqa: E731
    assert close(ad.grad(f)(V4), cd(f, V4))
    assert close(ad.hessian(f)(V4), cd2(f, V4), 1e-4)


def test_an_entry_written_through_flat_in_every_mode():
    f = _flat_write
    assert close(ad.grad(f)(V4), cd(f, V4))
    assert close(ad.jvp(f, (V4,), (T4,))[1], along(f, V4, T4))
    assert close(ad.hessian(f)(V4), cd2(f, V4), 1e-4)


# -- sinc at 0 ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("x", [0.0, 1e-9, 0.01, 0.3, 1.7])
def test_sinc_to_second_order_at_and_near_zero(x):
    def exact(x):   # sinc''(x), its Taylor series at 0 (-pi^2/3), else the closed form
        u = np.pi * x
        if abs(u) < 1e-3:
            return np.pi ** 2 * (-1 / 3 + u * u / 10)
        return np.pi ** 2 * ((2 - u * u) * np.sin(u) - 2 * u * np.cos(u)) / u ** 3
    assert close(ad.grad(ad.grad(np.sinc))(x), exact(x), 1e-9)
    assert close(ad.hessian(lambda v: np.sum(np.sinc(v)))(np.array([x])), [[exact(x)]], 1e-9)
    assert close(ad.hvp(lambda v: np.sinc(v), (x,), (1.0,))[0], exact(x), 1e-9)
    assert close(ad.grad(np.sinc)(x), cd(np.sinc, x), 1e-7)
    assert close(ad.jvp(np.sinc, (x,), (1.0,))[1], cd(np.sinc, x), 1e-7)


# -- a ** b where b == 0, and at a == 0 -------------------------------------------------------------------------
def test_the_hessian_of_a_power_at_a_zero_exponent_is_symmetric():
    # d2(a ** b) = [[b (b - 1) a ** (b - 2), a ** (b - 1) (1 + b log a)], [., a ** b log(a) ** 2]]
    exact = np.array([[0.0, 0.25], [0.25, np.log(4.0) ** 2]])
    v = np.array([4.0, 0.0])
    for f in (lambda v: v[0] ** v[1], lambda v: np.power(v[0], v[1]), lambda v: np.sum(v[:1] ** v[1:])):
        assert close(ad.hessian(f)(v), exact, 1e-9)
    assert close(ad.grad(lambda b: ad.grad(lambda a, b: a ** b)(4.0, b))(0.0), 0.25, 1e-12)
    assert close(ad.grad(ad.grad(lambda b: 4.0 ** b))(0.0), np.log(4.0) ** 2, 1e-12)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_the_derivative_of_a_root_at_zero_is_inf_as_a_float_gives_it():
    assert ad.grad(lambda x: x ** 0.5)(0.0) == np.inf
    assert ad.jvp(lambda x: x ** 0.5, (0.0,), (1.0,))[1] == np.inf
    assert ad.grad(lambda x: x ** 0)(0.0) == 0.0 and ad.grad(lambda x: x ** 1.0)(0.0) == 1.0
    assert ad.grad(lambda x: x ** 2)(0.0) == 0.0
    assert list(ad.grad(lambda x: np.sum(x ** 0.5))(np.array([0.0, 4.0]))) == [np.inf, 0.25]


# -- eigenvalues equal up to rounding ---------------------------------------------------------------------------
def test_eigenvectors_at_eigenvalues_equal_up_to_rounding_are_refused():
    q, _ = np.linalg.qr(np.array([[1.0, 2.0, 0.5], [0.3, -1.0, 2.0], [1.0, 1.0, 1.0]]))
    a = q @ np.diag([1e-17, 2e-17, 1.0]) @ q.T
    a = (a + a.T) / 2
    w = np.linalg.eigvalsh(a)
    assert w[0] != w[1]   # not exactly equal: the refusal needs a tolerance
    f = lambda a: np.sum(np.linalg.eigh(a)[1][:, 0] ** 3)   # noqa: E731
    for call in (lambda: ad.grad(f)(a), lambda: ad.jvp(f, (a,), (np.eye(3),)), lambda: ad.hessian(f)(a)):
        with pytest.raises(UnsupportedError, match="eigh"):
            call()
    # the eigenvalues alone are differentiable there
    g = lambda a: np.sum(np.linalg.eigvalsh(a) ** 2)   # noqa: E731
    assert close(ad.grad(g)(a), cd(g, a))


# -- map over sequences of different lengths --------------------------------------------------------------------
def test_map_stops_at_the_shortest_sequence_and_the_others_get_zeros():
    x = np.arange(5.0) + 1
    f = lambda x: sum(map(lambda a, b: a * b * a, x, [1.0, 2.0, 3.0]))   # noqa: E731
    g = ad.grad(f)(x)
    assert type(g) is np.ndarray and g.shape == (5,) and close(g, cd(f, x))
    assert close(ad.jvp(f, (x,), (np.ones(5),))[1], along(f, x, np.ones(5)))
    assert close(ad.hessian(f)(x), np.diag([2.0, 4.0, 6.0, 0.0, 0.0]), 1e-9)


# -- the branch np.where, maximum or clip leaves out contributes an exact zero ------------------------------------
MASKED = {
    "where sqrt": lambda x: np.where(x > 0, np.sqrt(x), 0.0),
    "sqrt of maximum": lambda x: np.sqrt(np.maximum(x, 0.0)),
    "log of maximum in where": lambda x: np.where(x > 0, np.log(np.maximum(x, 0)), 0.0),
    "sqrt of clip": lambda x: np.sqrt(np.clip(x, 0.0, None)),
    "quotient in where": lambda x: np.where(x != 0, 1 / x, 0.0),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", sorted(MASKED))
def test_a_masked_branch_contributes_an_exact_zero_in_every_mode(name):
    f = MASKED[name]
    # a number where the branch with the singular derivative is left out: exactly 0, never NaN
    for d in (ad.grad(f)(-1.0), ad.jvp(f, (-1.0,), (1.0,))[1], ad.hvp(lambda s: f(s) + 0.0, (-1.0,), (1.0,))[0]):
        assert d == 0.0 or name == "quotient in where"
    # arrays: 0 at the entries left out, the derivative of the branch taken elsewhere
    x, t = np.array([-1.0, -2.5, 4.0, 0.7]), np.array([1.0, 2.0, -0.5, 1.5])
    s = lambda x: np.sum(f(x) ** 2)   # noqa: E731
    g = ad.grad(s)(x)
    assert not np.isnan(g).any() and close(g, cd(s, x))
    ty = ad.jvp(f, (x,), (t,))[1]
    assert not np.isnan(ty).any() and close(ty, along(f, x, t))
    h = ad.hessian(s)(x)
    assert not np.isnan(h).any() and close(h, cd2(s, x), 1e-3)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_the_quotient_in_where_at_a_masked_zero():
    f = MASKED["quotient in where"]
    x = np.array([0.0, 2.0])
    assert list(ad.grad(lambda x: np.sum(f(x)))(x)) == [0.0, -0.25]
    assert list(ad.jvp(f, (x,), (np.ones(2),))[1]) == [0.0, -0.25]
    assert close(ad.hessian(lambda x: np.sum(f(x)))(x), [[0.0, 0.0], [0.0, 0.25]], 1e-12)


# -- complex powers ----------------------------------------------------------------------------------------------
def test_a_complex_power_in_forward_mode_and_its_wirtinger_derivatives():
    z = 0.7 - 1.3j
    exact = 0.5 / np.sqrt(z)   # d z ** 0.5 / dz, holomorphic
    assert abs(ad.jvp(lambda z: z ** 0.5, (z,), (1 + 0j,))[1] - exact) < 1e-12
    dz, dzbar = ad.wirtinger(lambda z: z ** 0.5, z)
    assert abs(dz - exact) < 1e-12 and abs(dzbar) < 1e-12
    h = 1e-6   # along i: i f'(z)
    fd = ((z + 1j * h) ** 0.5 - (z - 1j * h) ** 0.5) / (2 * h)
    assert abs(ad.jvp(lambda z: z ** 0.5, (z,), (1j,))[1] - fd) < 1e-8


# -- the norm at 0 -----------------------------------------------------------------------------------------------
def test_the_norm_at_zero_has_the_subgradient_zero_and_no_second_derivative():
    z = np.zeros(3)
    assert list(ad.grad(np.linalg.norm)(z)) == [0.0, 0.0, 0.0]
    assert list(ad.grad(lambda x: np.linalg.norm(x, 3))(z)) == [0.0, 0.0, 0.0]
    assert ad.jvp(np.linalg.norm, (z,), (np.ones(3),))[1] == 0.0
    m = np.array([[0.0, 0.0], [3.0, 4.0]])
    f = lambda x: np.sum(np.linalg.norm(x, axis=1))   # noqa: E731
    assert close(ad.grad(f)(m), [[0.0, 0.0], [0.6, 0.8]], 1e-12)
    assert close(ad.jvp(lambda x: np.linalg.norm(x, axis=1), (m,), (np.ones((2, 2)),))[1], [0.0, 1.4], 1e-12)
    # elsewhere, against central differences
    x = np.array([3.0, -4.0, 1.0])
    assert close(ad.grad(np.linalg.norm)(x), cd(np.linalg.norm, x))
    assert close(ad.hessian(lambda x: np.linalg.norm(x))(x), cd2(np.linalg.norm, x), 1e-4)
    # the second derivative at 0 is undefined (infinite): refused, never 0 or NaN
    with pytest.raises(UnsupportedError, match="norm"):
        ad.hessian(lambda x: np.linalg.norm(x) ** 2)(z)
    with pytest.raises(UnsupportedError, match="norm"):
        ad.grad(ad.grad(lambda x: np.linalg.norm(np.array([x, 0.0])) ** 2))(0.0)


# -- the determinant of a singular matrix -------------------------------------------------------------------------
SINGULAR = {"rank 1": np.array([[1.0, 2.0], [2.0, 4.0]]),
            "rank 2 of 3": np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]),
            "zero": np.zeros((3, 3)),
            "invertible": np.array([[2.0, 0.5, 1.0], [0.3, 3.0, -1.0], [1.0, 0.0, 2.0]])}


@pytest.mark.parametrize("name", sorted(SINGULAR))
def test_the_determinant_of_a_singular_matrix_in_every_mode(name):
    a = SINGULAR[name]
    e = np.arange(a.size, dtype=float).reshape(a.shape) / 7 - 0.3
    det = np.linalg.det
    assert close(ad.grad(det)(a), cd(det, a))
    assert close(ad.jvp(det, (a,), (e,))[1], np.sum(cd(det, a) * e))
    assert close(ad.hessian(lambda a: det(a))(a), cd2(det, a), 1e-4)
    assert close(ad.hvp(lambda a: det(a), (a,), (e,))[0], np.tensordot(cd2(det, a), e, 2), 1e-4)
    g = lambda t: np.sum(ad.grad(det)(a + t * e) * e)   # noqa: E731
    assert close(ad.grad(g)(0.0), cd(g, 0.0))


def test_the_determinant_gradient_is_the_cofactor_matrix_and_slogdet_refuses_a_singular_matrix():
    a = SINGULAR["rank 1"]
    assert close(ad.grad(np.linalg.det)(a), [[4.0, -2.0], [-2.0, 1.0]], 1e-12)
    stack = np.stack([a, SINGULAR["invertible"][:2, :2]])
    f = lambda a: np.sum(np.linalg.det(a) ** 2)   # noqa: E731
    assert close(ad.grad(f)(stack), cd(f, stack))
    g = lambda a: np.linalg.slogdet(a)[1]   # noqa: E731
    for call in (lambda: ad.grad(g)(a), lambda: ad.jvp(g, (a,), (np.eye(2),))):
        with pytest.raises(UnsupportedError, match="slogdet"):
            call()


# -- scipy.linalg's triangular and factored solvers ---------------------------------------------------------------
_R = np.random.default_rng(3)
_M = _R.normal(size=(3, 3)) + 3 * np.eye(3)
_S = _M @ _M.T
_b, _B = _R.normal(size=3), _R.normal(size=(3, 2))
SOLVERS = {
    "solve_triangular lower": (lambda a: sl.solve_triangular(a, _b, lower=True), _M),
    "solve_triangular transposed": (lambda a: sl.solve_triangular(a, _B, trans="T"), _M),
    "solve_triangular unit diagonal": (lambda a: sl.solve_triangular(a, _b, 1, True, True), _M),
    "solve_triangular right-hand side": (lambda v: sl.solve_triangular(_M, v, lower=True), _b),
    "cho_solve": (lambda s: sl.cho_solve(sl.cho_factor(s), _b), _S),
    "cho_solve lower": (lambda s: sl.cho_solve(sl.cho_factor(s, lower=True), _B), _S),
    "cho_factor": (lambda s: sl.cho_factor(s)[0], _S),
    "cho_solve right-hand side": (lambda v: sl.cho_solve(sl.cho_factor(_S), v), _b),
    "lu_solve": (lambda a: sl.lu_solve(sl.lu_factor(a), _b), _M),
    "lu_solve transposed": (lambda a: sl.lu_solve(sl.lu_factor(a), _B, trans=1), _M),
    "lu_factor": (lambda a: sl.lu_factor(a)[0], _M),
    "lu_solve right-hand side": (lambda v: sl.lu_solve(sl.lu_factor(_M), v), _b),
    "solve_continuous_lyapunov": (lambda a: sl.solve_continuous_lyapunov(a, _S), -_S),
    "solve_continuous_lyapunov q": (lambda q: sl.solve_continuous_lyapunov(_M - _S, q), _S),
}


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_scipy_solvers_in_every_mode(name):
    f, x = SOLVERS[name]
    rng = np.random.default_rng(7)
    w, t = rng.normal(size=np.shape(f(x))), rng.normal(size=x.shape)
    s = lambda x: np.sum(f(x) * w) + np.sum(f(x) ** 3)   # noqa: E731
    assert close(ad.grad(s)(x), cd(s, x))
    assert close(ad.jvp(f, (x,), (t,))[1], along(f, x, t))
    h = cd2(s, x)
    assert close(ad.hessian(s)(x), h, 1e-4)
    g = lambda e: np.sum(ad.grad(s)(x + e * t) * t)   # noqa: E731
    assert close(ad.grad(g)(0.0), np.tensordot(np.tensordot(h, t, x.ndim), t, x.ndim), 1e-4)


def _gp_nll(theta, X, y):
    K = np.exp(theta[0]) * np.exp(-0.5 * ((X[:, None] - X[None, :]) ** 2) / np.exp(theta[1])) + 1e-2 * np.eye(len(X))
    L = np.linalg.cholesky(K)
    a = sl.solve_triangular(L, y, lower=True)
    return 0.5 * a @ a + np.sum(np.log(np.diag(L)))


def test_the_hessian_of_a_gaussian_process_likelihood():
    X = np.linspace(0.0, 1.0, 5)
    y, theta = np.sin(3 * X), np.array([0.1, -1.0])
    f = lambda th: _gp_nll(th, X, y)   # noqa: E731
    assert close(ad.grad(_gp_nll)(theta, X, y), cd(f, theta))
    assert close(ad.hessian(_gp_nll)(theta, X, y), cd(lambda th: ad.grad(_gp_nll)(th, X, y), theta), 1e-5)
    assert close(ad.jvp(f, (theta,), (np.array([1.0, -0.5]),))[1], along(f, theta, np.array([1.0, -0.5])))


# -- empty inputs and outputs -------------------------------------------------------------------------------------
def test_jacobians_and_hessians_of_empty_arrays_are_empty():
    empty = np.zeros(0)
    h = ad.hessian(lambda x: np.sum(x ** 2) + 1.0)(empty)
    assert type(h) is np.ndarray and h.shape == (0, 0)
    for mode in ("forward", "reverse"):
        assert ad.jacobian(lambda x: x ** 2, mode=mode)(empty).shape == (0, 0)
        assert ad.jacobian(lambda x: x[:0] * 2, mode=mode)(np.ones(2)).shape == (0, 2)
        assert ad.jacobian(lambda x: np.sum(x ** 3), mode=mode)(np.ones((0, 3))).shape == (0, 3)
    assert ad.hessian(lambda x: np.sum(x ** 3))(np.ones((2, 0))).shape == (2, 0, 2, 0)


# -- work submitted to a thread pool, at second order -------------------------------------------------------------
def _submitted(x):
    ex = cf.ThreadPoolExecutor(2)
    w = np.array([1.0, -2.0, 0.5])
    a = ex.submit(lambda v: np.sum(np.sin(v) * w * v), x)
    b = ex.submit(lambda v, k: np.sum(v ** 3) * k, x, 2.0)
    return a.result() * b.result() + a.result()


def test_work_submitted_to_a_thread_pool_in_every_mode():
    x = np.array([0.3, -1.2, 0.8])
    t = np.array([1.0, 0.5, -2.0])
    f = _submitted
    assert close(ad.grad(f)(x), cd(f, x))
    assert close(ad.jvp(f, (x,), (t,))[1], along(f, x, t))
    h = cd2(f, x)
    assert close(ad.hessian(f)(x), h, 1e-4)
    assert close(ad.hvp(f, (x,), (t,))[0], h @ t, 1e-4)


# -- keywords that are not differentiable, index constructors -----------------------------------------------------
def test_int_tuple_keywords_and_index_constructors_in_forward_mode():
    x = np.arange(6.0).reshape(2, 1, 1, 3) / 3 + 0.5
    t = np.ones_like(x)
    f = lambda x: np.squeeze(x, axis=(1, 2)) ** 2   # noqa: E731
    assert close(ad.jvp(f, (x,), (t,))[1], along(f, x, t))
    v, tv = np.array([3.0, -4.0, 1.0]), np.array([1.0, 2.0, 0.5])
    g = lambda x: np.linalg.norm(x, keepdims=False)   # noqa: E731
    assert close(ad.jvp(g, (v,), (tv,))[1], along(g, v, tv))
    m, tm = np.array([[2.0, 0.5], [0.3, 3.0]]), np.array([[1.0, -1.0], [0.5, 2.0]])
    k = lambda x: np.sum(x[np.tril_indices(2)] ** 2) + np.sum(x[np.triu_indices(2, 1)] ** 3)   # noqa: E731
    assert close(ad.grad(k)(m), cd(k, m))
    assert close(ad.jvp(k, (m,), (tm,))[1], along(k, m, tm))
    assert close(ad.hessian(k)(m), cd2(k, m), 1e-4)


def test_second_order_through_index_and_constant_constructors_with_keywords():
    x = np.array([3.0, 1.0, 2.0])
    f = lambda x: np.sum(x[np.argsort(x, axis=0)] ** 3 * np.arange(3, dtype=float))   # noqa: E731
    assert close(ad.hessian(f)(x), np.diag([36.0, 0.0, 12.0]), 1e-12)
    assert close(ad.hessian(f)(x), cd2(f, x), 1e-4)
    for g in (lambda s: np.sum(np.zeros(3) + s ** 3) + np.floor(s) + np.ceil(s) + np.round(s),
              lambda s: np.sum(np.split(np.array([s, s * s]), 2)[1] ** 2) * np.arange(2.0, dtype=float)[1]):
        assert close(ad.grad(ad.grad(g))(1.3), cd(lambda s: cd(g, s, 1e-4), 1.3, 1e-4), 1e-4)


B43 = np.array([[1.0, -0.5, 2.0], [0.3, 1.2, -1.0], [0.0, 0.7, 0.4], [-1.5, 0.2, 0.9]])
INT_KEYWORDS = {
    "tensordot axes": lambda a: np.tensordot(a, B43, axes=([1], [1])) ** 2,
    "tensordot axes tuples": lambda a: np.sin(np.tensordot(a, B43, axes=((1,), (1,)))),
    "einsum optimize": lambda a: np.einsum("ij,kj,il->kl", a, B43, a, optimize=True),
    "sum axis tuple keepdims": lambda a: np.sum(a ** 3, axis=(0, 1), keepdims=True) * a,
    "moveaxis": lambda a: np.moveaxis(a ** 2, source=0, destination=1) * a.T,
    "transpose axes": lambda a: np.cos(np.transpose(a, axes=(1, 0))) * a.T,
}


@pytest.mark.parametrize("name", sorted(INT_KEYWORDS))
def test_int_valued_keywords_pass_through_forward_mode_and_the_hessian(name):
    f = INT_KEYWORDS[name]
    a, t = X23, np.array([[0.2, -1.0, 0.4], [1.0, 0.5, -0.3]])
    assert close(ad.jvp(f, (a,), (t,))[1], along(f, a, t))
    assert close(ad.jacobian(f, mode="forward")(a), cd(f, a))
    s = lambda a: np.sum(f(a) ** 2)   # noqa: E731
    assert close(ad.hessian(s)(a), cd2(s, a), 1e-4)


# -- forward mode over ad.grad --------------------------------------------------------------------------------------
def _sin_square(x, s=1.0):
    return np.sum(np.sin(x) * x ** 2) * s + np.prod(x[:2]) ** 2


def test_forward_mode_over_a_function_made_by_grad():
    x, t = np.array([0.5, -1.0, 2.0]), np.array([1.0, 0.5, -0.2])
    g = ad.grad(_sin_square)
    y, ty = ad.jvp(g, (x,), (t,))
    assert close(y, cd(_sin_square, x)) and close(ty, along(g, x, t))
    h = cd(g, x)
    assert close(ad.jacobian(g, mode="forward")(x), h) and close(ad.jacobian(g)(x), h)
    assert close(ad.jacobian(g)(x), ad.hessian(_sin_square)(x), 1e-12)
    assert close(ad.jacobian(g)(x, s=2.0), 2 * h - ad.hessian(lambda x: np.prod(x[:2]) ** 2)(x))
    assert close(ad.jvp(lambda x: g(x) * x, (x,), (t,))[1], along(lambda x: g(x) * x, x, t))
    # numbers, and argnums picking one or several arguments
    cube = ad.grad(lambda s: s ** 3)
    assert ad.jvp(cube, (2.0,), (1.0,)) == (12.0, 12.0)
    p = lambda a, b: a ** 2 * np.sin(b)   # noqa: E731
    (ga, gb), (ta, tb) = ad.jvp(ad.grad(p, argnums=(0, 1)), (2.0, 1.5), (1.0, 0.5))
    assert close((ga, gb), (4 * np.sin(1.5), 4 * np.cos(1.5)))
    assert close((ta, tb), (2 * np.sin(1.5) + 4 * np.cos(1.5) * 0.5, 4 * np.cos(1.5) - 4 * np.sin(1.5) * 0.5))
    assert close(ad.jvp(ad.grad(p, argnums=1), (2.0, 1.5), (1.0, 0.5))[1], tb)
    assert ad.jacobian(ad.grad(ad.grad(lambda s: s ** 4)))(2.0) == pytest.approx(48.0)   # (a third derivative)


# -- the masked branch at second order, for numbers ----------------------------------------------------------------
SECOND_MASKED = ["where sqrt", "sqrt of maximum", "log of maximum in where"]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", SECOND_MASKED)
def test_a_masked_branch_contributes_an_exact_zero_in_reverse_over_reverse(name):
    f = MASKED[name]
    for x in (-1.0, np.float64(-2.5), np.array(-1.0)):
        assert ad.grad(ad.grad(f))(x) == 0.0
        assert ad.grad(ad.grad(lambda s: f(s) * 3.0))(x) == 0.0
    assert close(ad.grad(ad.grad(f))(4.0), cd(lambda s: cd(f, s, 1e-4), 4.0, 1e-4), 1e-4)
    x, v = np.array([-1.0, -2.5, 4.0, 0.7]), np.array([1.0, 2.0, -0.5, 1.5])
    s = lambda x: np.sum(f(x) ** 2 + f(x))   # noqa: E731
    hv = ad.grad(lambda x: np.sum(ad.grad(s)(x) * v))(x)
    assert not np.isnan(hv).any() and close(hv, cd2(s, x) @ v, 1e-3)


def test_an_argument_that_does_not_reach_the_result_gets_an_exact_zero_also_at_inf_and_nan():
    for y in (np.inf, -np.inf, np.nan, np.float64(np.inf)):
        assert ad.gradient(lambda x, y: x * 2.0, 1.5, y) == (2.0, 0.0)
        assert ad.grad(lambda x, y: x * 2.0 if x > 0 else y, argnums=(0, 1))(1.5, y) == (2.0, 0.0)


# -- compiled tensorlang kernels in forward mode ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def kernels():
    import tensorlang as tl
    return {"square": tl.compile(tl.parse("x : [n]R\ngen(i:n) x[i] * x[i]")),
            "sum": tl.compile(tl.parse("x : [n]R\nsum(i:n) x[i] * x[i]")),
            "two": tl.compile(tl.parse("x : [n]R\nw : [n]R\ngen(i:n) w[i] * x[i] * x[i] * x[i]"))}


def test_a_compiled_kernel_in_forward_mode(kernels):
    sq, total, two = kernels["square"], kernels["sum"], kernels["two"]
    x, t, w = np.array([0.5, -1.0, 2.0]), np.array([1.0, 0.5, -0.2]), np.array([0.3, -2.0, 1.5])
    cases = [(lambda x: sq(x=x), 2 * np.diag(x)), (lambda x: total(x=x), 2 * x),
             (lambda x: np.sin(sq(x=x)) * x, None), (lambda x: two(x=x, w=w), np.diag(3 * w * x ** 2)),
             (lambda w: two(x=x, w=w), np.diag(x ** 3))]
    for f, exact in cases:
        J = ad.jacobian(f, mode="forward")(x)
        assert close(J, cd(f, x))
        assert exact is None or close(J, exact, 1e-12)
        assert close(ad.jvp(f, (x,), (t,))[1], along(f, x, t))
        assert close(ad.jacobian(f, mode="reverse")(x), J, 1e-12)
    # both inputs differentiated, and one kernel per set of inputs with a tangent, built once
    g = lambda x, w: np.sum(two(x=x, w=w) ** 2)   # noqa: E731
    assert close(ad.jvp(g, (x, w), (t, t))[1], (g(x + 1e-6 * t, w + 1e-6 * t) - g(x - 1e-6 * t, w - 1e-6 * t)) / 2e-6)
    ad.jvp(g, (x, w), (t, t))
    built = dict(two.forward_kernels)
    ad.jvp(g, (x, w), (t, None))
    assert sorted(built) == [("w",), ("w", "x"), ("x",)] and two.forward_kernels == built
    for k in (sq, total):   # forward over reverse: the compiled derivative of the kernel's adjoint
        assert close(ad.hessian(lambda x: np.sum(k(x=x)) * 1.0)(x), 2 * np.eye(3), 1e-12)


# -- NumPy's arithmetic of a list or tuple with an array: elementwise, not concatenation --------------------------
SEQUENCE_ARITHMETIC = {
    "list plus array": lambda x, y: np.sum(([1.0, 2.0, 3.0, 4.0] + x) ** 2 * y),
    "array minus list": lambda x, y: np.sum((x - [1.0, y, 3.0, y * y]) ** 2),
    "list of items times array": lambda x, y: np.sum([x[0], x[1] * x[2], y, 2.0] * x),
    "tuple over array": lambda x, y: np.sum((1.0, y, 3.0, 4.0) / (x + 2.0)),
    "list to the power of an array": lambda x, y: np.sum([1.5, 2.0, y, 4.0] ** x),
    "list matmul array": lambda x, y: [1.0, y, 3.0, x[0]] @ x,
    "numpy number plus list": lambda x, y: np.sum(x[0] + [x[1], y]) * x[3],
    "lists still concatenate": lambda x, y: sum([x[0], x[1]] + [y * x[2]]),
}


@pytest.mark.parametrize("name", sorted(SEQUENCE_ARITHMETIC))
def test_a_list_or_tuple_with_an_array_is_numpy_arithmetic_in_every_mode(name):
    # (`[1.0, 2.0] + x` gave an empty list as the gradient, with no error; the other operators were refused)
    check_modes(SEQUENCE_ARITHMETIC[name], np.array([0.3, -1.2, 0.8, 0.5]), 0.7)


# -- the builtin sum: rows broadcast against each other and the start; lists concatenated ---------------------------
BUILTIN_SUMS = {
    "array rows onto an array start": lambda x, y: sum(x, y * x)[1] + np.sum(sum(x, y * x) ** 2),
    "scalar items onto an array start": lambda x, y: np.sum(sum([x[0], y * x[1]], x ** 2) ** 2),
    "rows of a matrix": lambda x, y: np.sum(sum(np.outer(x, x * y)) ** 2),
    "arrays onto a scalar start": lambda x, y: np.sum(sum([x, x[::-1] * y], y) ** 3),
    "lists concatenated": lambda x, y: np.sum(np.array(sum([[x[0]], [x[1] * x[2], y]], [x[3]])) * [2.0, 3.0, 5.0, 7.0]),
    "tuples concatenated": lambda x, y: np.dot(sum(((x[0],), (x[1] * y,)), ()), x[2:]),
}


@pytest.mark.parametrize("name", sorted(BUILTIN_SUMS))
def test_the_builtin_sum_in_every_mode(name):
    # (`sum(x, start)` gave each row the whole gradient, and `sum(lists, [])` each list all of it, with no error)
    check_modes(BUILTIN_SUMS[name], np.array([0.3, -1.2, 0.8, 0.5]), 0.7)


# -- NumPy and SciPy functions given lists that hold constants, in the function or in a helper it calls -----------
def _centred(v):
    return np.subtract(v, np.sum(v))


def _shifted(v):
    return v - np.max(v, keepdims=True)


def _log_softmax(v):
    return v - sc.logsumexp(v, keepdims=True)


LISTS_TO_NUMPY = {
    "subtract the sum, in a helper": lambda x, y: np.sum(np.asarray(_centred([x[0], x[1] * y])) ** 2),
    "minus the max, in a helper": lambda x, y: np.sum(_shifted([x[0], 0.7, x[2] * y]) ** 2),
    "log-softmax, in a helper": lambda x, y: np.sum(_log_softmax([x[0], 0.7, x[1] * y]) * [1.0, 2.0, 3.0]),
    "softmax of a list": lambda x, y: np.sum(sc.softmax([x[0], y, x[2] * x[1]]) * [1.0, 2.0, 3.0]),
    "elementwise, partials of the array": lambda x, y: np.sum(np.square([x[0], y, x[1]])) + np.sum(np.arctan2([x[0], y], x[2:])),
    "maximum, where, clip": lambda x, y: np.sum(np.maximum([x[0], 1.0], x[:2]) + np.where([True, False], [x[1], y], x[2:]))
                                    + np.sum(np.clip([x[0], y, x[3]], 0.2, 0.6)),
    "abs and power": lambda x, y: np.sum(np.abs([x[1], y, -x[2]]) * np.power([x[0], y, 2.0], 2)),
    "sort of a list": lambda x, y: np.sort([x[1], y, x[0]])[0] * x[3],
    "a number made an array": lambda x, y: np.sum(np.asarray(np.sum([x[0], y]) * np.mean([x[1], 0.7])) ** 2),
}


@pytest.mark.parametrize("name", sorted(LISTS_TO_NUMPY))
def test_numpy_functions_of_lists_with_constants_in_every_mode(name):
    # (np.subtract(v, np.sum(v)) gave the list a summed gradient, and reverse over reverse lost it where a helper
    # took the list; the others were raw errors: a list doubled by a partial's `2 * x`, None tangents of constants)
    check_modes(LISTS_TO_NUMPY[name], np.array([0.3, -1.2, 0.8, 0.5]), 0.7)


def test_a_function_an_object_holds_called_as_its_method_in_every_mode():
    # (forward mode passed the object as the function's first argument: a raw TypeError)
    def loss(x, y):
        model = types.SimpleNamespace(activation=np.tanh)
        model.scale = lambda v: v * y
        return np.sum(model.activation(model.scale(x)) ** 2) + np.sum(model.scale(v=x))

    check_modes(loss, np.array([0.3, -1.2, 0.8, 0.5]), 0.7)


class _Model:
    def __init__(self, w):
        self.w = w

    @functools.cached_property
    def w2(self):
        return self.w ** 2

    def __call__(self, x):
        return np.sum(self.w2 * x)


@functools.lru_cache(maxsize=None)
def _coefficient(a):
    return a ** 2 + 1.0


def test_a_cached_property_and_a_cached_function_in_every_mode():
    # (a cached_property was read as a constant in every mode: the gradient lacked its dependence on w, with no
    # error; a function wrapped by functools.lru_cache had no rule)
    check_modes(lambda x, y: _Model(x * y)(x) + _Model(x)(x * 2) * y, np.array([0.3, -1.2, 0.8, 0.5]), 0.7)
    check_modes(lambda x, y: _coefficient(y) * np.sum(x) + _coefficient(0.5) * y, np.array([0.3, -1.2, 0.8]), 0.7)
