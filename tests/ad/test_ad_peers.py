"""The peer suite: the functions other Python AD systems test themselves with (`peer_functions.py`:
google/tangent's `tests/functions.py`, HIPS/autograd's `tests/test_numpy.py`, `test_scalar_ops.py`,
`test_graphs.py`, `test_builtins.py`), each differentiated as a user calls `tensorlang.ad` (`ad.gradient`
and `ad.grad` for a scalar output, `ad.pullback` with a fixed cotangent otherwise) and checked against
central differences of the function alone in every float entry of its arguments; second order
(`ad.grad(ad.grad(f))`, `ad.hessian`, `ad.hvp`) against second differences for a subset. A function
tensorlang.ad refuses must say why with a TensorLangError (REFUSED)."""
import functools
import inspect
import itertools

import numpy as np
import pytest

import peer_functions as pf   # tests/ad is on the path (rootdir conftest)
from conftest import hvp_by_differences
from tensorlang import ad
from tensorlang.errors import TensorLangError

H = 1e-6
_NAMES = {id(v): k for k, v in vars(pf).items() if callable(v)}
_NAMES.update({id(np.append): "np.append", id(np.var): "np.var", id(np.std): "np.std"})


def _paths(v, path=()):
    """The positions of v's float entries: (path through containers, index into an array or None)."""
    if isinstance(v, (list, tuple)):
        return [p for i, e in enumerate(v) for p in _paths(e, path + (i,))]
    if isinstance(v, dict):
        return [p for k, e in v.items() for p in _paths(e, path + (k,))]
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        return [(path, k) for k in np.ndindex(v.shape)]
    if isinstance(v, (float, np.floating)):
        return [(path, None)]
    return []


def _copy(v):
    if isinstance(v, (list, tuple)):
        return type(v)(_copy(e) for e in v)
    if isinstance(v, dict):
        return {k: _copy(e) for k, e in v.items()}
    return v.copy() if isinstance(v, np.ndarray) else v


def _moved(v, path, k, d):
    """A copy of v with the entry at (path, k) moved by d."""
    v = _copy(v)
    if not path:
        if k is None:
            return type(v)(v + d)
        v[k] += d
        return v
    outer = list(v) if isinstance(v, tuple) else v
    outer[path[0]] = _moved(v[path[0]], path[1:], k, d)
    return type(v)(outer) if isinstance(v, tuple) else outer


def _entry(g, path, k):
    """The gradient's entry at (path, k); a missing gradient is zero."""
    for p in path:
        if g is None:
            return 0.0
        g = g.get(p) if isinstance(g, dict) else g[p]
    if g is None:
        return 0.0
    return np.asarray(g)[k] if k is not None else g


def _cotangent(y, rng):
    if isinstance(y, (tuple, list)):
        return type(y)(_cotangent(e, rng) for e in y)
    return rng.standard_normal(np.shape(y))


def _inner(y, dy):
    if isinstance(y, (tuple, list)):
        return sum(_inner(a, b) for a, b in zip(y, dy))
    return float(np.sum(np.real(y) * dy))


def _is_scalar(y):
    return isinstance(y, (float, np.floating)) or (isinstance(y, np.ndarray) and y.shape == ()
                                                   and y.dtype.kind == "f")


def check_against_differences(fn, args):
    """fn's gradient (a scalar output) or vector-Jacobian product (other outputs) from tensorlang.ad,
    against central differences of fn in every float entry of every argument."""
    y = fn(*_copy(args))
    if _is_scalar(y):
        loss = fn
        got = ad.gradient(fn, *_copy(args))
        wrt = tuple(i for i, a in enumerate(args) if _paths(a))
        if wrt:
            by_grad = ad.grad(fn, argnums=wrt)(*_copy(args))
            for i, g in zip(wrt, by_grad):
                for path, k in _paths(args[i]):
                    np.testing.assert_allclose(_entry(g, path, k), _entry(got[i], path, k), rtol=1e-12)
    else:
        dy = _cotangent(y, np.random.default_rng(7))
        _, back = ad.pullback(fn, *_copy(args))
        got = back(dy)
        loss = lambda *a: _inner(fn(*a), dy)
    assert len(got) == len(args)
    for i, a in enumerate(args):
        for path, k in _paths(a):
            up = loss(*args[:i], _moved(a, path, k, H), *args[i + 1:])
            down = loss(*args[:i], _moved(a, path, k, -H), *args[i + 1:])
            np.testing.assert_allclose(_entry(got[i], path, k), (up - down) / (2 * H), rtol=1e-5, atol=1e-6,
                                       err_msg=f"argument {i} at {path} {k}")


def _tangent_cases():
    cases = []
    for f in pf.TANGENT:
        if f in pf.TANGENT_SPECIAL:
            arg_lists = pf.TANGENT_SPECIAL[f]
        else:
            params = inspect.signature(f).parameters
            pools = [pf.TANGENT_DOMAIN.get(f, pf.TANGENT_ARGS[p]) if p == "a" else pf.TANGENT_ARGS[p]
                     for p in params]
            arg_lists = list(itertools.product(*pools))
        cases += [pytest.param(f, args, id=f"tangent.{f.__name__}-{j}") for j, args in enumerate(arg_lists)]
    return cases


def _autograd_cases():
    cases = [pytest.param(f, args, id=f"autograd.{_NAMES[id(f)]}-{j}")
             for f, arg_lists in pf.AG_NUMPY for j, args in enumerate(arg_lists)]
    cases += [pytest.param(f, args, id=f"autograd.scalar_ops.{name}-{j}")
              for name, f, arg_lists in pf.AG_SCALAR_OPS for j, args in enumerate(arg_lists)]
    seen = {}
    for name, f, args in pf.AG_SYSTEMATIC:
        seen[name] = seen.get(name, -1) + 1
        cases.append(pytest.param(f, args, id=f"autograd.{name}-{seen[name]}"))
    return cases


CASES = _tangent_cases() + _autograd_cases()
# functions tensorlang.ad refuses, with the reason its TensorLangError gives
REFUSED: dict = {}


@pytest.mark.parametrize("fn, args", CASES)
def test_peer_function(fn, args):
    name = _NAMES.get(id(fn), getattr(fn, "__name__", ""))
    if name in REFUSED:
        with pytest.raises(TensorLangError, match=REFUSED[name]):
            check_against_differences(fn, args)
    else:
        check_against_differences(fn, args)


def _second_order_cases():
    scalar = [f for f in pf.TANGENT if f not in pf.TANGENT_SPECIAL and list(inspect.signature(f).parameters) == ["a"]]
    cases = [pytest.param(f, a, id=f"tangent.{f.__name__}-{a}") for f in scalar
             for a in pf.TANGENT_DOMAIN.get(f, pf.TANGENT_ARGS["a"])
             if _is_scalar(np.float64(f(a)))]
    cases += [pytest.param(f, args[0], id=f"autograd.scalar_ops.{name}") for name, f, arg_lists in pf.AG_SCALAR_OPS
              for args in arg_lists[:1] if len(args) == 1]
    cases += [pytest.param(f, 0.37, id=f"autograd.{_NAMES[id(f)]}")
              for f in (pf.ag_grad_fanout, pf.ag_grad_identity, pf.ag_enclosing_scope_ref)]
    return cases


@pytest.mark.parametrize("f, a", _second_order_cases())
def test_peer_second_derivative(f, a):
    """``ad.grad(ad.grad(f))`` of a scalar function against the second difference of f (a function that calls
    ``ad.grad`` inside, ``ag_enclosing_scope_ref``, differentiated by the recordings: ``tower``)."""
    np.testing.assert_allclose(ad.grad(ad.grad(f))(a), hvp_by_differences(f, [a], [1.0])[0], rtol=1e-4, atol=1e-5)


def _hvp_cases():
    vector = [f for f in pf.TANGENT if f not in pf.TANGENT_SPECIAL and list(inspect.signature(f).parameters) == ["x"]]
    cases = [pytest.param(f, (pf.TANGENT_ARGS["x"][0],), id=f"tangent.{f.__name__}") for f in vector]
    cases += [pytest.param(f, pf.TANGENT_SPECIAL[f][0], id=f"tangent.{f.__name__}")
              for f in (pf.logistic_regression, pf.rnn, pf.bilinear)]
    cases += [pytest.param(f, args, id=f"autograd.{_NAMES[id(f)]}") for f, args in pf.AG_HVP]
    return cases


@pytest.mark.parametrize("f, args", _hvp_cases())
def test_peer_hessian_vector_product(f, args):
    _check_hvp(f, args)   # (ag_vector_product calls ad.grad: differentiated by the recordings, ``tower``)


def _check_hvp(f, args):
    """``ad.hvp`` in every float argument, and ``ad.hessian`` times the direction for one array argument,
    against mixed second differences of f."""
    rng = np.random.default_rng(3)
    wrt = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
    vs = [rng.standard_normal(np.shape(a)) if i in wrt else 0 * a for i, a in enumerate(args)]
    expected = hvp_by_differences(f, list(args), vs, h=5e-5)
    got = ad.hvp(f, tuple(_copy(args)), tuple(vs))
    for i in wrt:   # (None: f is linear in the argument)
        np.testing.assert_allclose(0.0 if got[i] is None else got[i], expected[i], rtol=1e-4, atol=1e-5,
                                   err_msg=f"argument {i}")
    if wrt == [0] and len(args) == 1:
        (x,), (v,) = args, vs
        hv = np.tensordot(ad.hessian(f)(x.copy()), v, axes=v.ndim)
        np.testing.assert_allclose(hv, expected[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("f, args, reason", [pytest.param(f, a, r, id=f"autograd.{n}") for n, f, a, r in pf.AG_REFUSED])
def test_peer_refused(f, args, reason):
    """autograd's test functions of NumPy calls tensorlang.ad has no rule for: a clear refusal."""
    with pytest.raises(TensorLangError, match=reason):
        check_against_differences(f, args)


def _sin_sum(fn, arity):
    """A scalar function of fn's arguments whose Hessian holds fn's first and second derivatives."""
    if arity == 1:
        return lambda x: np.sum(np.sin(fn(x)))
    return lambda x, y: np.sum(np.sin(fn(x, y)))


def _systematic_hvp_cases():
    cases, seen = [], set()
    for name, f, args in pf.AG_SYSTEMATIC:
        if name in pf.AG_SYSTEMATIC_HVP and name not in seen and all(
                isinstance(a, np.ndarray) and a.size for a in args):
            seen.add(name)
            cases.append(pytest.param(_sin_sum(f, len(args)), tuple(args), id=f"autograd.{name}"))
    assert seen == pf.AG_SYSTEMATIC_HVP
    return cases


@pytest.mark.parametrize("f, args", _systematic_hvp_cases())
def test_peer_systematic_hessian_vector_product(f, args):
    _check_hvp(f, args)


# HIPS/autograd tests/test_wrappers.py, in tensorlang.ad's API: value_and_grad, grad with argnums and
# has_aux, hessian, hvp (autograd's hessian_tensor_product and make_hvp), the vector-Jacobian product
# (tensor_jacobian_product, with a cotangent of the output's shape) and jvp (make_jvp) against the Jacobian,
# gradient dtypes, partial objects; the refusal of ad.value_and_grad inside a differentiated function.
_W = np.random.RandomState(1)


def test_wrappers_value_and_grad():
    fun = lambda x: 3.0 * x ** 3.2
    assert ad.value_and_grad(fun)(1.7) == (fun(1.7), ad.grad(fun)(1.7))
    fun = lambda x: np.sum(np.sin(x) ** 2)
    x = _W.randn(5)
    value, g = ad.value_and_grad(fun)(x)
    assert type(value) is np.float64 and value == fun(x)
    np.testing.assert_allclose(g, ad.grad(fun)(x))
    with pytest.raises(TensorLangError, match=r"value_and_grad is not differentiated in reverse mode: ad.value_and_grad\(f\) inside a function"):
        ad.grad(lambda x: ad.value_and_grad(fun)(x)[0])(x)   # autograd's fun2
    with pytest.raises(TensorLangError, match=r"value_and_grad is not differentiated in forward mode"):
        ad.jvp(lambda x: ad.value_and_grad(fun)(x)[0], (x,), (x,))


def test_wrappers_hessian_of_a_quadratic():
    h = _W.randn(5, 5)
    np.testing.assert_allclose(ad.hessian(lambda x: np.dot(np.dot(x, h), x))(_W.randn(5)), h + h.T, atol=1e-12)


def test_wrappers_multigrad():
    def complicated_fun(a, b, c, d, e, f=1.1, g=9.0):
        return a + np.sin(b) + np.cosh(c) + np.cos(d) + np.tan(e) + f + g

    def complicated_fun_3_1(d_b):
        d, b = d_b
        return complicated_fun(0.5, b, 0.2, d, 0.7, f=0.6, g=-0.1)
    args = (0.5, -0.3, 0.2, -1.1, 0.7)
    wrapped = ad.grad(lambda a, b, c, d, e: complicated_fun(a, b, c, d, e, f=0.6, g=-0.1), argnums=(3, 1))(*args)
    np.testing.assert_allclose(wrapped, ad.grad(complicated_fun_3_1)((-1.1, -0.3)))
    value, g = ad.value_and_grad(lambda a, b, c, d, e: complicated_fun(a, b, c, d, e, f=0.6, g=-0.1),
                                 argnums=(3, 1))(*args)
    assert value == complicated_fun(*args, f=0.6, g=-0.1)
    np.testing.assert_allclose(g, wrapped)
    a, b = _W.randn(3), _W.randn(3)
    one = ad.grad(lambda x, y: np.sum(x + np.sin(y)), argnums=(0,))(a, b)
    np.testing.assert_allclose(one[0], ad.grad(lambda xy: np.sum(xy[0] + np.sin(xy[1])))((a, b))[0])


@pytest.mark.parametrize("shape", [(5,), (5, 4), (5, 4, 3)])
def test_wrappers_hessian_tensor_product(shape):
    fun = lambda a: np.sum(np.sin(a))
    a, v = _W.randn(*shape), _W.randn(*shape)
    hv = np.tensordot(ad.hessian(fun)(a), v, axes=v.ndim)
    np.testing.assert_allclose(ad.hvp(fun, (a,), (v,))[0], hv, atol=1e-12)
    np.testing.assert_allclose(hv, -np.sin(a) * v, atol=1e-12)


@pytest.mark.parametrize("shape", [(5,), (5, 4), (5, 4, 3)])
def test_wrappers_tensor_jacobian_product(shape):
    fun = lambda a: np.roll(np.sin(a), 1)   # an asymmetric Jacobian
    a, v = _W.randn(*shape), _W.randn(*shape)
    jac = ad.jacobian(fun)(a)
    _, back = ad.pullback(fun, a)
    np.testing.assert_allclose(back(v)[0], np.tensordot(v, jac, axes=v.ndim), atol=1e-12)


def test_wrappers_make_jvp():
    a, x, v = _W.randn(3, 5), _W.randn(5), _W.randn(5)
    fun = lambda x: np.tanh(np.dot(a, x))
    np.testing.assert_allclose(ad.jvp(fun, (x,), (v,))[1], ad.jacobian(fun)(x) @ v, atol=1e-12)


def test_wrappers_grad_and_aux():
    a, x = _W.randn(5, 4), _W.randn(4)
    g, aux = ad.grad(lambda x: (np.sum(np.dot(a, x)), x ** 2), has_aux=True)(x)
    np.testing.assert_allclose(g, ad.grad(lambda x: np.sum(np.dot(a, x)))(x))
    np.testing.assert_allclose(aux, x ** 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.longdouble])
def test_wrappers_dtypes(dtype):
    y = _W.randn(10, 10).astype(dtype)
    assert ad.grad(lambda x: np.real(np.sum(x ** 2)))(y).dtype.type is dtype


def test_wrappers_partial():
    def f(x, y):
        return x
    assert ad.grad(functools.partial(f, y=1))(0.5) == 1.0
