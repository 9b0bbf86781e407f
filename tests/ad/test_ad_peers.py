"""The peer suite: the functions other Python AD systems test themselves with (`peer_functions.py`:
google/tangent's `tests/functions.py`, HIPS/autograd's `tests/test_numpy.py`, `test_scalar_ops.py`,
`test_graphs.py`, `test_builtins.py`), each differentiated as a user calls `tensorlang.ad` (`ad.gradient`
and `ad.grad` for a scalar output, `ad.pullback` with a fixed cotangent otherwise) and checked against
central differences of the function alone in every float entry of its arguments; second order
(`ad.grad(ad.grad(f))`, `ad.hessian`, `ad.hvp`) against second differences for a subset. A function
tensorlang.ad refuses must say why with a TensorLangError (REFUSED)."""
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
    if isinstance(y, tuple):
        return tuple(_cotangent(e, rng) for e in y)
    return rng.standard_normal(np.shape(y))


def _inner(y, dy):
    if isinstance(y, tuple):
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
    return cases


CASES = _tangent_cases() + _autograd_cases()
# functions tensorlang.ad refuses, with the reason its TensorLangError gives
REFUSED = {"ag_gradient": "no derivative rule for numpy.gradient"}


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


# second order that tensorlang.ad refuses, with the reason
REFUSED_SECOND = {
    "power_arg1_zero": "no derivative rule for constructing float64",   # np.power's own rule calls np.float64
    "ag_enclosing_scope_ref": "a third derivative is not supported",   # ad.grad(ad.grad(f)) of an f that calls ad.grad
    "ag_vector_product": "forward over reverse .* through grad",   # ad.hvp of an f that calls ad.grad
}


def _expect(name, run):
    if name in REFUSED_SECOND:
        with pytest.raises(TensorLangError, match=REFUSED_SECOND[name]):
            run()
    else:
        run()


@pytest.mark.parametrize("f, a", _second_order_cases())
def test_peer_second_derivative(f, a, request):
    """``ad.grad(ad.grad(f))`` of a scalar function against the second difference of f."""
    name = request.node.callspec.id.split(".")[-1].split("-")[0]
    _expect(name, lambda: np.testing.assert_allclose(ad.grad(ad.grad(f))(a), hvp_by_differences(f, [a], [1.0])[0],
                                                     rtol=1e-4, atol=1e-5))


def _hvp_cases():
    vector = [f for f in pf.TANGENT if f not in pf.TANGENT_SPECIAL and list(inspect.signature(f).parameters) == ["x"]]
    cases = [pytest.param(f, (pf.TANGENT_ARGS["x"][0],), id=f"tangent.{f.__name__}") for f in vector]
    cases += [pytest.param(f, pf.TANGENT_SPECIAL[f][0], id=f"tangent.{f.__name__}")
              for f in (pf.logistic_regression, pf.rnn, pf.bilinear)]
    cases += [pytest.param(f, args, id=f"autograd.{_NAMES[id(f)]}") for f, args in pf.AG_HVP]
    return cases


@pytest.mark.parametrize("f, args", _hvp_cases())
def test_peer_hessian_vector_product(f, args, request):
    _expect(request.node.callspec.id.split(".")[-1], lambda: _check_hvp(f, args))


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
