"""NumPy: elementwise ufuncs with broadcasting (gradients summed back to each argument's shape),
reductions with axes, ``dot``/``matmul``/``outer``, shape functions, indexing helpers, ``concatenate``/
``stack``, ``where``/``maximum``/``minimum``/``clip``, and the array methods that mirror them."""
from __future__ import annotations

import numpy as np

from ..runtime import METHOD_RULES, NONDIFF, RULES, ZERO
from .operators import _matmul_back, unbroadcast


def _unary(f, d):
    """``f`` elementwise with derivative ``d(x, y)``."""
    def rule(x, *rest, **kw):
        y = f(x, *rest, **kw)
        return y, lambda dy: (dy * d(x, y),)
    return rule


_UNARY = {
    np.exp: lambda x, y: y, np.log: lambda x, y: 1 / x, np.tanh: lambda x, y: 1 - y * y,
    np.sin: lambda x, y: np.cos(x), np.cos: lambda x, y: -np.sin(x), np.tan: lambda x, y: 1 + y * y,
    np.sqrt: lambda x, y: 0.5 / y, np.abs: lambda x, y: np.sign(x), np.negative: lambda x, y: -1,
    np.square: lambda x, y: 2 * x, np.log1p: lambda x, y: 1 / (1 + x), np.expm1: lambda x, y: y + 1,
    np.arctan: lambda x, y: 1 / (1 + x * x), np.sinh: lambda x, y: np.cosh(x), np.cosh: lambda x, y: np.sinh(x),
    np.log2: lambda x, y: 1 / (x * np.log(2)), np.log10: lambda x, y: 1 / (x * np.log(10)),
    np.positive: lambda x, y: 1, np.reciprocal: lambda x, y: -y * y,
}


def _binary(f, d):
    """``f(a, b)`` elementwise with partial derivatives ``d(a, b, y) -> (da, db)``; un-broadcast."""
    def rule(a, b):
        y = f(a, b)

        def back(dy):
            pa, pb = d(a, b, y)
            return unbroadcast(dy * pa, a), unbroadcast(dy * pb, b)
        return y, back
    return rule


def _gt(a, b):
    return (np.asarray(a) > np.asarray(b)).astype(float)


_BINARY = {
    np.add: lambda a, b, y: (1, 1), np.subtract: lambda a, b, y: (1, -1),
    np.multiply: lambda a, b, y: (b, a), np.divide: lambda a, b, y: (1 / b, -y / b),
    np.power: lambda a, b, y: (b * a ** (b - 1), y * np.log(np.where(np.asarray(a) > 0, a, 1))),
    np.maximum: lambda a, b, y: (1 - _gt(b, a), _gt(b, a)), np.minimum: lambda a, b, y: (1 - _gt(a, b), _gt(a, b)),
    np.arctan2: lambda a, b, y: (b / (a * a + b * b), -a / (a * a + b * b)),
    np.logaddexp: lambda a, b, y: (np.exp(a - y), np.exp(b - y)),
}


def _expand(dy, axis, keepdims):
    """``dy`` of a reduction over ``axis``, reshaped to broadcast against the reduced array."""
    if axis is None or keepdims:
        return dy
    return np.expand_dims(dy, axis)


def _sum(x, axis=None, keepdims=False, **kw):
    x = np.asarray(x) if not isinstance(x, np.ndarray) else x
    y = np.sum(x, axis=axis, keepdims=keepdims, **kw)
    if axis is None:
        return y, lambda dy: (np.full(x.shape, dy, dtype=np.result_type(dy, float)),)
    return y, lambda dy: (np.broadcast_to(_expand(dy, axis, keepdims), x.shape).astype(float),)


def _mean(x, axis=None, keepdims=False):
    x = np.asarray(x)
    y = np.mean(x, axis=axis, keepdims=keepdims)
    n = x.size / max(np.size(y), 1)
    return y, lambda dy: (np.broadcast_to(_expand(dy, axis, keepdims), x.shape) / n,)


def _extremum(f):
    def rule(x, axis=None, keepdims=False):
        x = np.asarray(x)
        y = f(x, axis=axis, keepdims=keepdims)

        def back(dy):
            if axis is None:  # the whole gradient goes to the first extremal entry
                g = np.zeros(x.shape, dtype=np.result_type(x.dtype, float))
                g.flat[np.argmax(x == y)] = dy
                return (g,)
            ye = _expand(y, axis, keepdims)
            mask = (x == ye).astype(float)
            mask /= mask.sum(axis=axis, keepdims=True)
            return (mask * _expand(dy, axis, keepdims),)
        return y, back
    return rule


def _dot(a, b):
    y = np.dot(a, b)
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return y, lambda dy: (unbroadcast(dy * b, a), unbroadcast(dy * a, b))
    return y, lambda dy: _matmul_back(dy, a, b)


def _matmul(a, b):
    return np.matmul(a, b), lambda dy: _matmul_back(dy, a, b)


def _outer(a, b):
    return np.outer(a, b), lambda dy: (dy @ np.ravel(b), np.ravel(a) @ dy)


def _reshape(x, *shape, **kw):
    s = np.shape(x)
    y = np.reshape(x, shape[0] if len(shape) == 1 else shape, **kw)
    return y, lambda dy: (np.reshape(dy, s), *(None,) * len(shape))


def _transpose(x, *axes):
    ax = axes[0] if len(axes) == 1 else (axes or None)
    y = np.transpose(x, ax)
    inv = None if ax is None else np.argsort(ax)
    return y, lambda dy: (np.transpose(dy, inv), *(None,) * len(axes))


def _ravel(x):
    s = np.shape(x)
    return np.ravel(x), lambda dy: (np.reshape(dy, s),)


def _squeeze(x, axis=None):
    s = np.shape(x)
    return np.squeeze(x, axis), lambda dy: (np.reshape(dy, s), None)


def _expand_dims(x, axis):
    s = np.shape(x)
    return np.expand_dims(x, axis), lambda dy: (np.reshape(dy, s), None)


def _concatenate(xs, axis=0):
    sizes = np.cumsum([np.shape(x)[axis] for x in xs])[:-1]
    return np.concatenate(xs, axis), lambda dy: (list(np.split(dy, sizes, axis)), None)


def _stack(xs, axis=0):
    n = len(xs)
    return np.stack(xs, axis), lambda dy: ([np.take(dy, i, axis) for i in range(n)], None)


def _where(c, a, b):
    y = np.where(c, a, b)
    return y, lambda dy: (None, unbroadcast(np.where(c, dy, 0), a), unbroadcast(np.where(c, 0, dy), b))


def _clip(x, lo, hi):
    y = np.clip(x, lo, hi)
    inside = (np.asarray(x) >= (lo if lo is not None else -np.inf)) & (np.asarray(x) <= (hi if hi is not None else np.inf))
    return y, lambda dy: (unbroadcast(dy * inside, x), None, None)


def _array(xs, dtype=None):
    y = np.array(xs, dtype=dtype)
    kind = type(xs)

    def back(dy):
        if kind is np.ndarray:
            return (dy, None)
        g = np.asarray(dy).tolist() if kind in (list, tuple) and y.ndim == 1 else list(np.asarray(dy))
        return (tuple(g) if kind is tuple else g, None)
    return y, back


def _norm(x, ord=None, axis=None):
    if ord is not None or axis is not None:
        raise TypeError("tensorlang.ad differentiates np.linalg.norm only with the default ord and axis")
    y = np.linalg.norm(x)
    return y, lambda dy: (dy * np.asarray(x) / y, None, None)


RULES.update({f: _unary(f, d) for f, d in _UNARY.items()})
RULES.update({f: _binary(f, d) for f, d in _BINARY.items()})
RULES.update({
    np.sum: _sum, np.mean: _mean, np.max: _extremum(np.max), np.min: _extremum(np.min),
    np.amax: _extremum(np.max), np.amin: _extremum(np.min), np.dot: _dot, np.matmul: _matmul,
    np.outer: _outer, np.reshape: _reshape, np.transpose: _transpose, np.ravel: _ravel, np.squeeze: _squeeze,
    np.expand_dims: _expand_dims, np.concatenate: _concatenate, np.stack: _stack, np.where: _where,
    np.clip: _clip, np.array: _array, np.asarray: _array, np.linalg.norm: _norm,
})
NONDIFF.update({np.zeros, np.ones, np.zeros_like, np.ones_like, np.empty, np.empty_like, np.arange,
                np.linspace, np.shape, np.size, np.ndim, np.argmax, np.argmin, np.argsort, np.sign, np.floor,
                np.ceil, np.round, np.isnan, np.isfinite, np.eye, np.full, np.full_like, np.allclose,
                np.isclose, np.array_equal})


def _astype(x, dtype, **kw):
    y = x.astype(dtype, **kw)
    if np.dtype(dtype).kind in "fc":
        return y, lambda dy: (dy, None)
    return y, ZERO


METHOD_RULES.update({
    (np.ndarray, "sum"): _sum, (np.ndarray, "mean"): _mean, (np.ndarray, "max"): _extremum(np.max),
    (np.ndarray, "min"): _extremum(np.min), (np.ndarray, "dot"): _dot, (np.ndarray, "reshape"): _reshape,
    (np.ndarray, "transpose"): _transpose, (np.ndarray, "ravel"): _ravel, (np.ndarray, "flatten"): _ravel,
    (np.ndarray, "squeeze"): _squeeze, (np.ndarray, "clip"): _clip, (np.ndarray, "astype"): _astype,
    (np.ndarray, "copy"): lambda x: (x.copy(), lambda dy: (dy,)),
})
