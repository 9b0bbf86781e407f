"""NumPy: elementwise ufuncs with broadcasting (gradients summed back to each argument's shape),
reductions with axes, ``dot``/``matmul``/``outer``, shape functions, indexing helpers, ``concatenate``/
``stack``, ``where``/``maximum``/``minimum``/``clip``, and the array methods that mirror them."""
from __future__ import annotations

import itertools

import numpy as np

from ....errors import UnsupportedError
from ..cotangent import Indexed, dense
from ..runtime import (ARRAY_TYPES, LINEAR, METHOD_RULES, NONDIFF, NONDIFF_METHODS, RULES, along_first, asarray,
                       sequence_grad, unbroadcast)
from ..tangent import JVP_METHOD_RULES, JVP_RULES, densify
from ..source import generated
from .operators import TEMPLATE_HELPERS, matmul_back, matmul_grad, times
from ....scalar_derivatives import SCALAR_DERIVATIVES, partial_template


# -- elementwise functions ----------------------------------------------------------------------------------
# Each derivative is the table of scalar derivatives' (``tensorlang.scalar_derivatives``), as the template of the
# gradient on arrays: ``{dy}`` the incoming gradient, ``{0}`` and ``{1}`` the arguments, ``{y}`` the result,
# ``{np}`` NumPy, ``_ad_*`` the helpers of generated code (``HELPERS``).  The templates are inlined as they
# stand where the arguments are known arrays (``ARRAY_INLINE``, ``ARRAY_BINOPS``); elsewhere the rule
# multiplies the gradient by the partial derivative, the template with ``{dy}`` taken out (``partial``), made
# a Python function whose source is kept so that nested derivatives differentiate it in turn.  A derivative
# that can be infinite or undefined where the function is finite or NaN is a strong product
# ``_ad_times({dy}, partial)`` (``times``), exactly 0 where either factor is, so that a branch that np.where,
# maximum, minimum or clip leaves out contributes an exact 0.
def _gradients(names: dict) -> dict:
    return {f: SCALAR_DERIVATIVES[name].for_arrays() for f, name in names.items()}


ELEMENTWISE_UNARY = {f: ts[0] for f, ts in _gradients({
    np.exp: "exp", np.log: "log", np.tanh: "tanh", np.sin: "sin", np.cos: "cos", np.tan: "tan", np.sqrt: "sqrt",
    np.abs: "abs", np.negative: "negative", np.square: "square", np.log1p: "log1p", np.expm1: "expm1",
    np.arctan: "atan", np.sinh: "sinh", np.cosh: "cosh", np.log2: "log2", np.log10: "log10", np.positive: "positive",
    np.reciprocal: "recip", np.arcsin: "asin", np.arccos: "acos", np.arcsinh: "asinh", np.arccosh: "acosh",
    np.arctanh: "atanh", np.exp2: "exp2", np.cbrt: "cbrt", np.fabs: "abs", np.sinc: "sinc", np.deg2rad: "radians",
    np.rad2deg: "degrees", np.nan_to_num: "nan_to_num",
}).items()}
ELEMENTWISE_BINARY = _gradients({
    np.add: "add", np.subtract: "subtract", np.multiply: "multiply", np.divide: "divide", np.power: "pow",
    np.maximum: "max", np.minimum: "min", np.arctan2: "atan2", np.logaddexp: "logaddexp",
    np.logaddexp2: "logaddexp2", np.hypot: "hypot", np.mod: "mod", np.fmod: "fmod",
})
for _alias, _f in ((np.radians, np.deg2rad), (np.degrees, np.rad2deg), (np.absolute, np.abs)):
    ELEMENTWISE_UNARY[_alias] = ELEMENTWISE_UNARY[_f]
for _alias, _f in ((np.fmax, np.maximum), (np.fmin, np.minimum), (np.true_divide, np.divide), (np.remainder, np.mod),
                   (np.float_power, np.power)):
    ELEMENTWISE_BINARY[_alias] = ELEMENTWISE_BINARY[_f]


def partial(template: str, args: tuple[str, ...]) -> str:
    """The partial derivative in a gradient template as an expression in ``args`` (the names for ``{0}``,
    ``{1}``) and ``y``: ``"{dy} * {np}.cos({0})"`` gives ``"np.cos(x)"``."""
    return partial_template(template).format(*args, y="y", np="np")




_SINC_SERIES = 0.05   # below this |pi x| sinc's derivatives are summed as series (their quotients cancel)


def _sinc_d(x, y):
    """``sinc'(x) = (cos(pi x) - sinc(x)) / x`` (``y`` is ``sinc(x)``)."""
    u = np.pi * asarray(x)
    small = np.abs(u) < _SINC_SERIES
    u2 = u * u
    series = np.pi * u * (-1 / 3 + u2 * (1 / 30 - u2 * (1 / 840 - u2 / 45360)))
    return np.where(small, series, (np.cos(u) - y) / np.where(small, 1.0, x))


def _sinc_dd(x):
    """``sinc''(x) = pi^2 ((2 - u^2) sin u - 2 u cos u) / u^3`` for ``u = pi x``; ``-pi^2 / 3`` at 0."""
    u = np.pi * asarray(x)
    small = np.abs(u) < _SINC_SERIES
    u2 = u * u
    series = -1 / 3 + u2 * (1 / 10 - u2 * (1 / 168 - u2 / 6480))
    s = np.where(small, 1.0, u)
    return np.pi ** 2 * np.where(small, series, ((2 - s * s) * np.sin(s) - 2 * s * np.cos(s)) / s ** 3)


# sinc's derivative is a function of x alone (y is sinc(x)): its own derivative is sinc'' in x, none in y
RULES[_sinc_d] = lambda x, y: (_sinc_d(x, y), lambda d: (d * _sinc_dd(x), None))
JVP_RULES[_sinc_d] = lambda args, ts: (_sinc_d(*args), None if ts[0] is None else ts[0] * _sinc_dd(args[0]))


def _times_jvp(args, ts):
    """The product rule of ``times``, each term a strong product."""
    (dy, d), (tdy, td) = args, ts
    ty = None if tdy is None else times(tdy, d)
    if td is not None:
        g = times(dy, td)
        ty = g if ty is None else ty + g
    return times(dy, d), ty


def _times_back(dy, d):
    """The pullback of ``times``: strong products too, NaN in ``dy``'s gradient made 0 where ``dy`` is 0 (the
    product is 0 there whatever ``dy``'s neighbourhood), and None for a gradient that is 0 throughout (a
    branch left out), which the code of the partial derivative would turn into NaN again (``0 / nan``)."""
    def back(c):
        gdy = times(c, d)
        if type(gdy) in ARRAY_TYPES or np.isnan(np.sum(gdy)):   # (a batch: each example's, without a branch)
            gdy = np.where(np.isnan(gdy) & (asarray(dy) == 0), 0, gdy)[()]
        return _none_if_zero(unbroadcast(gdy, dy)), _none_if_zero(unbroadcast(times(c, dy), d))
    return back


def _none_if_zero(g):
    """None for a gradient that is 0 throughout; a batch's as it is (its examples may differ)."""
    return g if type(g) in ARRAY_TYPES or np.any(g) else None


def times_rule(dy, d):
    """The rule of ``times`` (a product, holomorphic: ``rules.complexes`` conjugates its pullback)."""
    return times(dy, d), _times_back(dy, d)


RULES[times] = times_rule
# (differentiated again, a third derivative: the identity, a gradient dropped as 0 keeps its derivative)
RULES[_none_if_zero] = lambda g: (_none_if_zero(g), lambda d: (d,))
JVP_RULES[_none_if_zero] = lambda args, ts: (_none_if_zero(*args), ts[0])
JVP_RULES[times] = _times_jvp


def _gt(a, b):
    return (asarray(a) > asarray(b)).astype(float)


_COUNT = itertools.count()


def _partials(f, templates, args):
    """``d(*args, y)``: the partial derivatives of elementwise ``f`` (one, or a tuple of one per argument),
    from its gradient templates, a Python function whose source is kept in ``linecache``."""
    name = f"d_{f.__name__}"
    exprs = [partial(t, args) for t in templates]
    body = exprs[0] if len(exprs) == 1 else "(" + "".join(e + ", " for e in exprs) + ")"
    src = f"def {name}({', '.join(args)}, y):\n    return {body}\n"
    return generated(name, src, f"<tensorlang.ad partial derivative {next(_COUNT)} of {f.__name__}>",
                     {"np": np, **_TEMPLATE_HELPERS})


def table_partials(f, name: str):
    """``d(*args, y)`` of elementwise ``f`` from the entry ``name`` of the table of scalar derivatives."""
    templates = SCALAR_DERIVATIVES[name].for_arrays()
    return _partials(f, templates, ("x",) if len(templates) == 1 else ("a", "b"))


# the helpers that the templates of elementwise functions name
_TEMPLATE_HELPERS = {**TEMPLATE_HELPERS, "_ad_gt": _gt, "_ad_sinc_d": _sinc_d}
PARTIALS_UNARY = {f: _partials(f, [t], ("x",)) for f, t in ELEMENTWISE_UNARY.items()}
PARTIALS_BINARY = {f: _partials(f, ts, ("a", "b")) for f, ts in ELEMENTWISE_BINARY.items()}
# the functions whose gradients are strong products (``times``)
STRONG = {f for f, ts in [*ELEMENTWISE_UNARY.items(), *ELEMENTWISE_BINARY.items()]
          if any(t.startswith("_ad_times(") for t in ([ts] if type(ts) is str else ts))}


def product(f):
    """How the gradients and tangents of elementwise ``f`` are multiplied by its partials: ``times`` or ``*``."""
    return times if f in STRONG else _plain


def _plain(dy, d):
    return dy * d


def operand(x):
    """An operand of an elementwise function as the array it stands for (a list or tuple of numbers: the
    partials are written for arrays, where ``2 * x`` doubles and does not repeat)."""
    return asarray(x) if type(x) is list or type(x) is tuple else x


def unary_rule(f, d):
    """``f`` elementwise with derivative ``d(x, y)`` (``dtype``: of the result; a ufunc's other keyword
    arguments, ``where=`` ..., are refused)."""
    mul = product(f)

    def rule(x, dtype=None):
        if type(x) is list or type(x) is tuple:   # (the array it stands for; its items' gradients)
            y, back = rule(asarray(x), dtype)
            return y, lambda dy: (sequence_grad(back(dy)[0], type(x)),)
        y = f(x) if dtype is None else f(x, dtype=dtype)
        return y, lambda dy: (mul(dy, d(x, y)),)
    return rule


def binary_rule(f, d):
    """``f(a, b)`` elementwise with partial derivatives ``d(a, b, y) -> (da, db)``; un-broadcast."""
    mul = product(f)

    def rule(a, b, dtype=None):
        xa, xb = operand(a), operand(b)   # (a list's partials are its array's; its gradient its items')
        y = f(xa, xb) if dtype is None else f(xa, xb, dtype=dtype)

        def back(dy):
            pa, pb = d(xa, xb, y)
            return unbroadcast(mul(dy, pa), a), unbroadcast(mul(dy, pb), b)
        return y, back
    return rule


def expand_reduced(dy, axis, keepdims):
    """``dy`` of a reduction over ``axis``, reshaped to broadcast against the reduced array."""
    if axis is None or keepdims:
        return dy
    return np.expand_dims(dy, axis)


def _spread(dy, x, axis, keepdims):
    """The gradient ``dy`` of a reduction of ``x`` over ``axis``, copied along the reduced axes."""
    return np.broadcast_to(expand_reduced(dy, axis, keepdims), x.shape).astype(np.result_type(x, dy, 0.0))


def _sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue, where=True):
    x = asarray(a)
    y = np.sum(x, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)
    if initial is np._NoValue:
        return y, lambda dy: (_sum_grad(dy, x, axis, keepdims, where),)
    # ``initial`` is added to every sum
    return y, lambda dy: (_sum_grad(dy, x, axis, keepdims, where), None, None, None, None, unbroadcast(dy, initial))


def _sum_grad(dy, x, axis, keepdims, where):
    """The gradient of ``np.sum(x, axis, keepdims=keepdims, where=where)``: ``dy`` in each entry summed (0 in
    those ``where`` leaves out)."""
    if axis is None and where is True and type(dy) not in ARRAY_TYPES:   # (np.full cannot fill with a batch)
        return np.full(x.shape, dy, dtype=np.result_type(x, dy, 0.0))
    g = _spread(dy, x, axis, keepdims)
    return g if where is True else g * where


def _mean(a, axis=None, dtype=None, out=None, keepdims=False, where=True):
    x = asarray(a)
    y = np.mean(x, axis=axis, dtype=dtype, keepdims=keepdims, where=where)
    if where is True:
        n = x.size / max(np.size(y), 1)
        return y, lambda dy: (_spread(dy, x, axis, keepdims) / n,)
    count = np.sum(np.broadcast_to(where, x.shape), axis=axis, keepdims=True)   # the entries averaged, per result
    return y, lambda dy: (_spread(dy, x, axis, keepdims) * where / count,)


def _var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, mean=None):
    x = asarray(a)
    if mean is None:
        y = np.var(x, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)
        m = np.mean(x, axis=axis, keepdims=True)
    else:   # NumPy 2's mean=: the mean given (keepdims shaped) is used, and differentiated in turn
        y = np.var(x, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, mean=mean)
        m = mean
    n = x.size / max(np.size(y), 1)

    def back(dy):
        g = _spread(dy, x, axis, keepdims) * (x - m) * (2 / (n - ddof))
        if mean is None:
            return (g,)
        return g, None, None, None, None, None, -np.sum(g, axis=axis, keepdims=True)
    return y, back


def _std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, mean=None):
    x = asarray(a)
    if mean is None:
        y = np.std(x, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)
        m = np.mean(x, axis=axis, keepdims=True)
    else:
        y = np.std(x, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, mean=mean)
        m = mean
    n = x.size / max(np.size(y), 1)

    def back(dy):
        # where y == 0 every entry equals the mean, so the gradient is 0 there (not 0/0)
        g = _spread(dy / (np.where(y == 0, 1, y) * (n - ddof)), x, axis, keepdims) * (x - m)
        if mean is None:
            return (g,)
        return g, None, None, None, None, None, -np.sum(g, axis=axis, keepdims=True)
    return y, back


_SPREAD_NAMES = ("axis", "dtype", "out", "ddof", "keepdims", "mean")


def _spread_jvp(f):
    """The forward rule of ``np.var``/``np.std``: ``sum(2 (x - m) (tx - tm)) / (n - ddof)`` over the axes
    (``tm`` the mean's tangent: of the mean given by ``mean=``, or the mean of ``tx``); for ``std`` divided
    by ``2 std``, 0 where the entries are all equal (as the reverse rule)."""
    def jvp(args, ts, tkw=None, **kw):
        bad = [k for k in kw if k not in _SPREAD_NAMES]
        if bad:   # (where=, correction=: as the reverse rule refuses them)
            raise UnsupportedError(f"tensorlang.ad differentiates {f.__name__} without the keyword argument"
                                   f"{'s' if len(bad) > 1 else ''} {', '.join(bad)}")
        p = dict(zip(_SPREAD_NAMES, args[1:]))
        p.update(kw)
        tkw = tkw or {}
        x = asarray(args[0])
        y = f(x, **p)
        tmean = tkw.get("mean") if "mean" in kw else (ts[6] if len(ts) > 6 else None)
        if ts[0] is None and tmean is None:
            return y, None
        axis, keepdims, ddof = p.get("axis"), p.get("keepdims", False), p.get("ddof", 0)
        m = p.get("mean")
        m = np.mean(x, axis=axis, keepdims=True) if m is None else m
        tx = np.zeros(x.shape) if ts[0] is None else ts[0]
        tm = np.mean(tx, axis=axis, keepdims=True) if p.get("mean") is None else (0.0 if tmean is None else tmean)
        n = x.size / max(np.size(y), 1)
        tvar = np.sum(np.real(np.conj(x - m) * (tx - tm)), axis=axis, keepdims=keepdims) * (2 / (n - ddof))
        if f is np.var:
            return y, tvar
        return y, tvar / (2 * np.where(y == 0, 1, y))
    jvp.keyword_tangents = True
    return jvp


def _spread_method_jvp(f):
    """``x.var()``/``x.std()`` in forward mode (a method's keyword arguments have no tangents here: a
    ``mean=`` is refused by name)."""
    rule = _spread_jvp(f)

    def jvp(obj, tobj, args, ts, **kw):
        if "mean" in kw:
            raise UnsupportedError(f"tensorlang.ad.jvp differentiates ndarray.{f.__name__} without mean=; "
                                   f"write np.{f.__name__}(x, mean=...)")
        return rule((obj, *args), (tobj, *ts), **kw)
    return jvp


def _exclusive(x, axis):
    """The product of the other entries along ``axis``, for each entry (exact where entries are 0)."""
    ones = np.ones_like(np.take(x, [0], axis=axis))
    left = np.cumprod(np.concatenate([ones, np.delete(x, -1, axis=axis)], axis=axis), axis=axis)
    right = np.flip(np.cumprod(np.concatenate([ones, np.delete(np.flip(x, axis), -1, axis=axis)], axis=axis),
                               axis=axis), axis)
    return left * right


def _prod(a, axis=None, dtype=None, out=None, keepdims=False):
    x = asarray(a)
    y = np.prod(x, axis=axis, dtype=dtype, keepdims=keepdims)
    if axis is None:
        return y, lambda dy: (np.reshape(dy * _exclusive(np.ravel(x), 0), x.shape),)
    if isinstance(axis, (int, np.integer)):
        return y, lambda dy: (expand_reduced(dy, axis, keepdims) * _exclusive(x, axis),)
    # several axes: moved last and merged into one
    axes = tuple(sorted(a % x.ndim for a in axis))
    last = tuple(range(x.ndim - len(axes), x.ndim))
    moved = np.moveaxis(x, axes, last)
    merged = np.reshape(moved, moved.shape[:x.ndim - len(axes)] + (-1,))

    def back(dy):
        d = np.reshape(dy, merged.shape[:-1] + (1,))
        return (np.moveaxis(np.reshape(d * _exclusive(merged, -1), moved.shape), last, axes),)
    return y, back


def _cumsum(a, axis=None, dtype=None, out=None):
    x = asarray(a)
    y = np.cumsum(x, axis=axis, dtype=dtype)
    if axis is None:
        return y, lambda dy: (np.reshape(np.flip(np.cumsum(np.flip(dy))), x.shape),)
    return y, lambda dy: (np.flip(np.cumsum(np.flip(dy, axis), axis=axis), axis),)


def _cumprod(a, axis=None, dtype=None, out=None):
    x = asarray(a)
    if axis is None:
        y, back = _cumprod(np.ravel(x), 0, dtype)
        return y, lambda dy: (np.reshape(back(dy)[0], x.shape),)
    y = np.cumprod(x, axis=axis, dtype=dtype)
    if np.any(x == 0):
        raise UnsupportedError("tensorlang.ad differentiates np.cumprod of arrays without zeros")
    return y, lambda dy: (np.flip(np.cumsum(np.flip(dy * y, axis), axis=axis), axis) / x,)


def _diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    if prepend is not np._NoValue or append is not np._NoValue:
        raise UnsupportedError("tensorlang.ad differentiates np.diff without prepend/append")
    x = asarray(a)
    y = np.diff(x, n, axis)

    def back(dy):
        g = dy
        for _ in range(n):   # the transpose of one difference: -g[0], g[0] - g[1], ..., g[-1]
            pad = [(0, 0)] * np.ndim(g)
            pad[axis] = (1, 1)
            g = -np.diff(np.pad(g, pad), 1, axis)
        return (g,)
    return y, back


def _sort(a, axis=-1, kind=None, order=None):
    x = asarray(a)
    if axis is None:
        y, back = _sort(np.ravel(x), -1, kind)
        return y, lambda dy: (np.reshape(back(dy)[0], x.shape),)
    i = np.argsort(x, axis=axis, kind="stable")
    y = np.take_along_axis(x, i, axis=axis)

    def back(dy):
        g = np.zeros_like(x, dtype=np.result_type(x, dy, 0.0))   # (of x's kind: a batch of ad.vmap's for a batch)
        np.put_along_axis(g, i, dy, axis=axis)
        return (g,)
    return y, back


def _sort_along(args, kw, ts):
    """``np.sort`` along tangents: the tangent in the order of the sorted entries (it is a permutation)."""
    x, t = asarray(args[0]), asarray(ts[0])   # (a list's tangent: its items')
    axis = kw.get("axis", args[1] if len(args) > 1 else -1)
    if axis is None:
        x, t, axis = np.ravel(x), np.ravel(t), -1
    return np.take_along_axis(t, np.argsort(x, axis=axis, kind="stable"), axis=axis)


def _extremum(f):
    """The gradient of ``max``/``min``: to the first extremal entry over the whole array, shared by the tied
    entries along an axis; to ``initial`` where it is beyond every entry (where it ties one, to the entry: a
    one-sided derivative, as at any tie)."""
    def rule(a, axis=None, out=None, keepdims=False, initial=np._NoValue):
        x = asarray(a)
        y = f(x, axis=axis, keepdims=keepdims, initial=initial)

        def back(dy):
            if axis is None and type(x) in ARRAY_TYPES:   # (a batch: the first extremal entry of each example's)
                hit = np.ravel(x) == y
                first = (np.arange(x.size) == np.argmax(hit)) & hit
                g = np.reshape(np.where(first, dy, 0.0), x.shape).astype(np.result_type(x.dtype, 0.0))
                won = ~np.any(hit)
            elif axis is None:  # the whole gradient goes to the first extremal entry
                g = np.zeros(x.size, dtype=np.result_type(x.dtype, 0.0))
                won = initial is not np._NoValue and not np.any(x == y)
                if not won:
                    g[np.argmax(x == y)] = np.reshape(dy, ())
                g = np.reshape(g, x.shape)
            else:
                ye = expand_reduced(y, axis, keepdims)
                mask = (x == ye).astype(float)
                hits = mask.sum(axis=axis, keepdims=True)
                g = mask / np.maximum(hits, 1) * expand_reduced(dy, axis, keepdims)
                won = np.reshape(hits == 0, np.shape(y))
            if initial is np._NoValue:
                return (g,)
            return g, None, None, None, unbroadcast(np.where(won, dy, 0.0), initial)
        return y, back
    return rule


def _tensordot(a, b, axes=2):
    y = np.tensordot(a, b, axes)
    a, b = asarray(a), asarray(b)
    if np.ndim(axes) == 0:
        ax_a, ax_b = list(range(a.ndim - axes, a.ndim)), list(range(axes))
    else:
        ax_a, ax_b = ([x] if np.ndim(x) == 0 else list(x) for x in axes)
    ax_a, ax_b = [x % a.ndim for x in ax_a], [x % b.ndim for x in ax_b]
    free_a = [i for i in range(a.ndim) if i not in ax_a]
    free_b = [i for i in range(b.ndim) if i not in ax_b]
    na = len(free_a)

    # the contracted axes left in da (db) are b's (a's) in increasing order: their partners in a (b)
    left_a = [ax_a[j] for j in np.argsort(ax_b)]
    left_b = [ax_b[j] for j in np.argsort(ax_a)]

    def back(dy):
        da = np.tensordot(dy, b, (list(range(na, np.ndim(dy))), free_b))
        db = np.tensordot(a, dy, (free_a, list(range(na))))
        return (np.transpose(da, np.argsort(free_a + left_a)), np.transpose(db, np.argsort(left_b + free_b)), None)
    return y, back


def _dot(a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        y = np.dot(a, b)
        return y, lambda dy: (unbroadcast(dy * b, a), unbroadcast(dy * a, b))
    y, back = _tensordot(a, b, ([np.ndim(a) - 1], [max(np.ndim(b) - 2, 0)]))
    return y, lambda dy: back(dy)[:2]


def _matmul(a, b):
    return np.matmul(a, b), lambda dy: matmul_back(dy, a, b)


def _outer(a, b):
    return np.outer(a, b), lambda dy: (_shaped(dy @ np.ravel(b), a), _shaped(np.ravel(a) @ dy, b))


def _shaped(g, x):
    """Gradient ``g`` of a flattened argument in the shape of ``x`` (a number for a number)."""
    if type(x) is np.ndarray:
        return np.reshape(g, x.shape)
    return np.reshape(g, np.shape(x))[()] if np.ndim(x) == 0 else np.reshape(g, np.shape(x))


def _reshape(a, *shape, **kw):
    s = np.shape(a)
    y = np.reshape(a, shape[0] if len(shape) == 1 else shape, **kw) if shape else np.reshape(a, **kw)
    order = _order(kw.get("order", "C"), "reshape")
    return y, lambda dy: (np.reshape(dy, s, order=order),) + (None,) * len(shape)


def _order(order, name):
    """The ``order`` of a reshape ('C' or 'F'; the others depend on the memory layout of the array)."""
    if order not in ("C", "F"):   # (the message without an f-string: rules' code is differentiated again)
        raise UnsupportedError("tensorlang.ad differentiates np." + name + " with order 'C' or 'F', not " + str(order))
    return order


def _transpose_axes(a, axes=None):
    y = np.transpose(a, axes)
    inv = None if axes is None else np.argsort(axes)
    return y, lambda dy: (np.transpose(dy, inv), None)


def _transpose(x, *axes):
    """``x.transpose(1, 0)``, ``x.transpose((1, 0))``"""
    y, back = _transpose_axes(x, axes[0] if len(axes) == 1 else (axes or None))
    return y, lambda dy: (back(dy)[0], *(None,) * len(axes))


def _ravel(a, order="C"):
    s = np.shape(a)
    order = _order(order, "ravel")
    return np.ravel(a, order), lambda dy: (np.reshape(dy, s, order=order), None)


def _flatten(a, order="C"):
    s = np.shape(a)
    order = _order(order, "ndarray.flatten")
    return a.flatten(order), lambda dy: (np.reshape(dy, s, order=order), None)   # (a copy, never a view)


def _squeeze(a, axis=None):
    s = np.shape(a)
    return np.squeeze(a, axis), lambda dy: (np.reshape(dy, s), None)


def _expand_dims(a, axis):
    s = np.shape(a)
    return np.expand_dims(a, axis), lambda dy: (np.reshape(dy, s), None)


def _concatenate(xs, axis=0, dtype=None):
    if axis is None:   # the arrays flattened, then joined
        y, back = _concatenate([np.ravel(x) for x in xs], 0, dtype)
        shapes = [np.shape(x) for x in xs]
        return y, lambda dy: ([np.reshape(d, s) for d, s in zip(back(dy)[0], shapes)], None, None)
    sizes = np.cumsum([np.shape(x)[axis] for x in xs])[:-1]
    return np.concatenate(xs, axis, dtype=dtype), lambda dy: (list(np.split(dy, sizes, axis)), None, None)


def _stack(arrays, axis=0):
    n = len(arrays)
    return np.stack(arrays, axis), lambda dy: ([np.take(dy, i, axis) for i in range(n)], None)


def _where(condition, x=np._NoValue, y=np._NoValue):
    if x is np._NoValue and y is np._NoValue:   # the indices of the true entries: no derivative
        return np.where(condition), lambda dy: (None,)
    out = np.where(condition, x, y)
    return out, lambda dy: (None, unbroadcast(np.where(condition, dy, 0), x),
                            unbroadcast(np.where(condition, 0, dy), y))


def _clip(a, a_min=np._NoValue, a_max=np._NoValue, out=None, min=np._NoValue, max=np._NoValue):
    lo = a_min if a_min is not np._NoValue else None if min is np._NoValue else min
    hi = a_max if a_max is not np._NoValue else None if max is np._NoValue else max
    y = np.clip(a, lo, hi)
    from_x, from_lo, from_hi = clip_masks(a, lo, hi)

    def back(dy):
        dlo = None if lo is None else unbroadcast(times(dy, from_lo), lo)
        dhi = None if hi is None else unbroadcast(times(dy, from_hi), hi)
        return (unbroadcast(times(dy, from_x), a), None if a_min is np._NoValue else dlo,
                None if a_max is np._NoValue else dhi, None, None if min is np._NoValue else dlo,
                None if max is np._NoValue else dhi)
    return y, back


def clip_masks(x, lo, hi):
    """Where ``np.clip(x, lo, hi)`` (``minimum(maximum(x, lo), hi)``) takes ``x``, ``lo`` and ``hi``
    (None: no bound)."""
    x = asarray(x)
    lo = -np.inf if lo is None else lo
    hi = np.inf if hi is None else hi
    from_x = (x >= lo) & (x <= hi)
    from_lo = (x < lo) & (asarray(lo) <= hi)
    return from_x, from_lo, ~(from_x | from_lo)


def _array(object, dtype=None, copy=True, order="K", subok=False, ndmin=0, like=None):
    if type(object) in ARRAY_TYPES and ndmin <= object.ndim:   # (a batch of ad.vmap: an array already)
        y = asarray(object, dtype)
        return (y.copy() if copy and y is object else y), lambda dy: (dy,)
    of_arrays = ndmin == 0 and holds_array_type(object)   # (lists of stand-ins of a recording, batches of
    if of_arrays:                                          # ad.vmap: stacked, as NumPy would)
        y = stacked(object)
        y = y if dtype is None else y.astype(dtype)
    else:
        y = np.array(object, dtype=dtype, copy=copy, order=order, subok=subok, ndmin=ndmin)
    if not of_arrays and type(object) is not np.ndarray and np.ndim(object) == 0:
        return y, lambda dy: (np.sum(dy),)   # (a number; the sum of its one entry, differentiable again)
    kind = type(object)
    shape = y.shape if of_arrays else None   # (np.shape of lists of stand-ins would convert them)

    def back(dy):
        if kind is np.ndarray:
            return (np.reshape(dy, object.shape),)
        return (sequence_grad(asarray(dy).reshape(np.shape(object) if shape is None else shape), kind),)
    return y, back


def holds_array_type(x) -> bool:
    """Whether lists or tuples ``x`` hold a value of a type of ``ARRAY_TYPES``."""
    return type(x) in (list, tuple) and any(type(i) in ARRAY_TYPES or holds_array_type(i) for i in x)


def stacked(x):
    """``np.array(x)`` of lists or tuples ``x`` as stacks of their items (of a type of ``ARRAY_TYPES`` too)."""
    return np.stack([stacked(i) for i in x]) if type(x) in (list, tuple) else asarray(x)


def _asarray(a, dtype=None, order=None):
    return _array(a, dtype, None)


def _linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    if retstep or axis != 0:
        raise UnsupportedError("tensorlang.ad differentiates np.linspace without retstep and along axis 0")
    y = np.linspace(start, stop, num, endpoint, dtype=dtype)
    t = np.linspace(0.0, 1.0, num, endpoint).reshape((-1,) + (1,) * (y.ndim - 1))
    return y, lambda dy: (unbroadcast(np.sum(dy * (1 - t), axis=0), start),
                          unbroadcast(np.sum(dy * t, axis=0), stop), None, None, None, None, None)


def _full(shape, fill_value, dtype=None, order="C"):
    y = np.full(shape, fill_value, dtype, order)
    return y, lambda dy: (None, unbroadcast(dy, fill_value), None, None)


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None):
    y = np.full_like(a, fill_value, dtype, order, subok, shape)
    return y, lambda dy: (None, unbroadcast(dy, fill_value), None, None, None, None)


def norm_power(x, ord, axis):
    """``(p, axes)`` of ``np.linalg.norm(x, ord, axis)`` as ``sum(|x|**p over axes) ** (1/p)`` (axes None:
    all): vector p-norms of any finite nonzero ``ord`` (2 for a complex ``x``) and Frobenius norms; the
    others (max, min, counts, the matrix norms of singular values or of row and column sums) are refused."""
    x = asarray(x)
    axes = None if axis is None else tuple(a % x.ndim for a in ((axis,) if np.ndim(axis) == 0 else axis))
    vector = len(axes) == 1 if axes is not None else x.ndim == 1
    if vector and ord is not None and not isinstance(ord, str) and np.isfinite(ord) and ord != 0:
        if ord == 2 or x.dtype.kind != "c":
            return float(ord), axes
    if ord is None or (ord == "fro" and not vector):
        return 2.0, axes
    raise UnsupportedError("tensorlang.ad differentiates np.linalg.norm with a finite nonzero ord of vectors "
                           "(real ones but for ord=2) or the Frobenius norm, not ord=" + repr(ord))


def norm_partials(x, y, p, axes):
    """The derivative of the norm ``y`` in each entry of ``x`` (for a complex ``x``, ``x / y``: Zygote's
    convention), ``y`` broadcast back over the reduced axes; 0 where the norm is 0 (the subgradient PyTorch
    and JAX give there: every entry of ``x`` is 0)."""
    ye = y if axes is None else np.expand_dims(y, axes)
    if p == 2.0:
        return _quotient0(x, ye)
    return _quotient0(np.sign(x) * np.abs(x) ** (p - 1), ye ** (p - 1))


def _quotient0(n, d):
    """``n / d``, 0 where ``d`` is 0 (there ``n`` is 0 too: the norm's subgradient at 0)."""
    at0 = asarray(d) == 0
    return np.where(at0, 0.0, n / np.where(at0, 1.0, d))


def _refuse_at0(d):
    if np.any(asarray(d) == 0):
        raise UnsupportedError("np.linalg.norm: its second derivative at 0 is undefined (its gradient there is "
                               "the subgradient 0)")


def _quotient0_rule(n, d):
    y = _quotient0(n, d)

    def back(c):
        _refuse_at0(d)
        return unbroadcast(c / d, n), unbroadcast(-c * y / d, d)
    return y, back


def _quotient0_jvp(args, ts):
    (n, d), (tn, td) = args, ts
    y = _quotient0(n, d)
    if tn is None and td is None:
        return y, None
    _refuse_at0(d)
    return y, (0 if tn is None else tn / d) - (0 if td is None else td * y / d)


RULES[_quotient0] = _quotient0_rule
JVP_RULES[_quotient0] = _quotient0_jvp


def _norm(x, ord=None, axis=None):
    x = asarray(x)
    p, axes = norm_power(x, ord, axis)
    y = np.linalg.norm(x, ord, axis)

    def back(dy):
        return (norm_partials(x, y, p, axes) * (dy if axes is None else np.expand_dims(dy, axes)), None, None)
    return y, back


RULES.update({f: unary_rule(f, d) for f, d in PARTIALS_UNARY.items()})
RULES.update({f: binary_rule(f, d) for f, d in PARTIALS_BINARY.items()})
RULES.update({
    np.sum: _sum, np.mean: _mean, np.max: _extremum(np.max), np.min: _extremum(np.min),
    np.amax: _extremum(np.max), np.amin: _extremum(np.min), np.dot: _dot, np.matmul: _matmul,
    np.outer: _outer, np.reshape: _reshape, np.ravel: _ravel, np.squeeze: _squeeze,
    np.expand_dims: _expand_dims, np.concatenate: _concatenate, np.stack: _stack, np.where: _where,
    np.clip: _clip, np.array: _array, np.asarray: _asarray, np.linalg.norm: _norm, np.linspace: _linspace,
    np.full: _full, np.full_like: _full_like, np.tensordot: _tensordot, np.transpose: _transpose_axes,
    np.var: _var, np.std: _std, np.prod: _prod, np.cumsum: _cumsum, np.cumprod: _cumprod, np.diff: _diff,
    np.sort: _sort,
})
LINEAR[_sort] = _sort_along
LINEAR.update({r: along_first(r) for r in (_reshape, _transpose, _diff)})   # (their code takes *args or writes)
NONDIFF_CALLS = {np.zeros, np.ones, np.zeros_like, np.ones_like, np.empty, np.empty_like, np.arange,
                 np.shape, np.size, np.ndim, np.argmax, np.argmin, np.argsort, np.argpartition,
                 np.floor, np.ceil, np.round, np.trunc, np.floor_divide, np.isnan, np.isfinite, np.isinf, np.isposinf,
                 np.isneginf, np.signbit, np.isreal, np.iscomplex, np.equal, np.not_equal, np.less, np.less_equal,
                 np.greater, np.greater_equal, np.logical_and, np.logical_or, np.logical_xor, np.logical_not,
                 np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.invert, np.left_shift, np.right_shift,
                 np.eye, np.allclose,
                 np.isclose, np.array_equal, np.result_type, np.iscomplexobj, np.isscalar, np.broadcast_shapes,
                 np.tril_indices, np.triu_indices, np.tril_indices_from, np.triu_indices_from,
                 np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.bool_}
NONDIFF.update(NONDIFF_CALLS)   # (none has an effect: ``rules.effect_free``)


def _astype(x, dtype, **kw):
    y = x.astype(dtype, **kw)
    if np.dtype(dtype).kind in "fc":
        return y, lambda dy: (dy, None)
    return y, lambda dy: (None, None)   # (a pullback of as many gradients as arguments: it is LINEAR)


def _astype_along(args, kw, ts):
    """``astype`` is linear in the array (a cast to a float or complex type; other casts have no tangent)."""
    kw = dict(kw)
    x, dtype = args[0], args[1] if len(args) > 1 else kw.pop("dtype")   # (x.astype(dtype=...))
    return None if ts[0] is None or np.dtype(dtype).kind not in "fc" else asarray(ts[0]).astype(dtype, **kw)


LINEAR[_astype] = _astype_along   # (its code takes **kw)


def _float_type(t):
    """``np.float64(x)`` and ``np.float32(x)``: a cast of a real number or array, linear in ``x`` (an array stays
    one)."""
    def cast(x=0.0):
        y = asarray(x, t) if type(x) in ARRAY_TYPES else t(x)
        return y, lambda dy: (np.reshape(dy, np.shape(x)) if np.ndim(x) else dy,)
    LINEAR[cast] = lambda args, kw, ts: None if not ts or ts[0] is None else \
        (asarray(ts[0], t) if type(ts[0]) in ARRAY_TYPES else t(ts[0]))
    return cast


RULES.update({t: _float_type(t) for t in (np.float64, np.float32)})


def _tolist(x):
    """``x.tolist()``: nested lists of the entries (a number for a 0-d array); the gradient is the lists'
    gradients as an array, zeros where an entry has none."""
    y = x.tolist()
    return y, lambda dy: (asarray(densify(dy, y), dtype=np.result_type(x, 0.0)).reshape(x.shape),)


def _item(x, *index):
    """``x.item(*index)``: one entry; its gradient is zeros but at that entry."""
    def back(dy):
        g = np.zeros(x.shape, dtype=np.result_type(x, dy))
        if len(index) > 1 or index and isinstance(index[0], tuple):   # (x.item(1, 2), x.item((1, 2)))
            g[index if len(index) > 1 else index[0]] = dy
        else:
            g.flat[index[0] if index else 0] = dy
        return (g, *(None for _ in index))
    return x.item(*index), back


LINEAR[_tolist] = lambda args, kw, ts: None if ts[0] is None else asarray(ts[0]).tolist()
LINEAR[_item] = lambda args, kw, ts: None if ts[0] is None else asarray(ts[0]).item(*args[1:])
METHOD_RULES.update({(np.ndarray, "tolist"): _tolist, (np.ndarray, "item"): _item})


METHOD_RULES.update({
    (np.ndarray, "sum"): _sum, (np.ndarray, "mean"): _mean, (np.ndarray, "max"): _extremum(np.max),
    (np.ndarray, "min"): _extremum(np.min), (np.ndarray, "dot"): _dot, (np.ndarray, "reshape"): _reshape,
    (np.ndarray, "transpose"): _transpose, (np.ndarray, "ravel"): _ravel, (np.ndarray, "flatten"): _flatten,
    (np.ndarray, "squeeze"): _squeeze, (np.ndarray, "clip"): _clip, (np.ndarray, "astype"): _astype,
    (np.ndarray, "copy"): lambda x: (x.copy(), lambda dy: (dy,)),
    (np.ndarray, "var"): _var, (np.ndarray, "std"): _std, (np.ndarray, "prod"): _prod,
    (np.ndarray, "cumsum"): _cumsum, (np.ndarray, "cumprod"): _cumprod,
})
NONDIFF_METHODS.update({"argmax", "argmin", "argsort", "nonzero", "round", "searchsorted", "all", "any"})
# methods that are their NumPy function with the array first (``x.swapaxes(0, 1)`` is ``np.swapaxes(x, 0, 1)``):
# the function's rules (``jvp``: its forward mode)
FUNCTION_METHODS = {"diagonal": np.diagonal, "swapaxes": np.swapaxes, "repeat": np.repeat, "take": np.take}
METHOD_RULES.update({(np.ndarray, name): RULES[f] for name, f in FUNCTION_METHODS.items()})
JVP_RULES.update({np.var: _spread_jvp(np.var), np.std: _spread_jvp(np.std)})
JVP_METHOD_RULES.update({(np.ndarray, "var"): _spread_method_jvp(np.var), (np.ndarray, "std"): _spread_method_jvp(np.std)})


# -- inlined NumPy rules --------------------------------------------------------------------------------------
# For arguments known to be arrays (a specialisation for ``np.ndarray`` arguments, and the results of
# inlined operations on them), the common NumPy rules are written straight into the generated code as
# expressions, as the scalar rules are (``rules.scalar``): no rule call, no pullback closure, no generic
# un-broadcasting when the shapes cannot differ.  Templates: ``{dy}`` the incoming gradient, ``{y}`` the
# result, ``{0}`` the argument, ``{np}`` the numpy module.
class ArrayInline:
    """``derivs[0]`` is the argument's gradient; ``primal`` (optional) replaces the call in the primal
    (``x.sum()`` is several times cheaper than ``np.sum(x)``); a reduction (array to scalar) has the
    template of its ``tangent`` (forward mode: ``{t}`` the argument's tangent), other entries are
    elementwise (array to array, number to number)."""

    def __init__(self, name, derivs, primal=None, tangent=None):
        self.name, self.derivs, self.primal, self.tangent = name, derivs, primal, tangent
        self.reduce = tangent is not None


# the elementwise functions inlined, by the name the IR shows
_INLINED = {"exp": np.exp, "log": np.log, "tanh": np.tanh, "sin": np.sin, "cos": np.cos, "tan": np.tan, "sqrt": np.sqrt,
            "square": np.square, "negative": np.negative, "abs": np.abs, "log1p": np.log1p, "expm1": np.expm1}
ARRAY_INLINE = {f: ArrayInline(name, [ELEMENTWISE_UNARY[f]]) for name, f in _INLINED.items()}
ARRAY_INLINE.update({
    np.sum: ArrayInline("sum", ["_ad_full({0}, {dy})"], "{0}.sum()", "{t}.sum()"),
    np.mean: ArrayInline("mean", ["_ad_full({0}, {dy} / {0}.size)"], "{0}.mean()", "{t}.mean()"),
    np.max: ArrayInline("max", ["_ad_onehot({0}, {0}.argmax(), {dy})"], "{0}.max()", "{t}.flat[{0}.argmax()]"),
    np.min: ArrayInline("min", ["_ad_onehot({0}, {0}.argmin(), {dy})"], "{0}.min()", "{t}.flat[{0}.argmin()]"),
})
ARRAY_INLINE[np.amax], ARRAY_INLINE[np.amin] = ARRAY_INLINE[np.max], ARRAY_INLINE[np.min]
# ``x.sum()`` and the like (no arguments) on an array: the same entries
ARRAY_METHODS = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}
FLOAT_ARRAY_MAKERS = (np.zeros, np.ones, np.empty)   # a call with a shape alone makes a new float64 array
# array methods that never write to their array
PURE_METHODS = {"sum", "mean", "max", "min", "reshape", "transpose", "dot", "copy", "astype", "conj", "ravel",
                "flatten", "std", "var", "prod", "squeeze", "item", "tolist", "all", "any", "argmax", "argmin",
                "cumsum", "real", "imag", "diagonal", "swapaxes", "repeat", "take", "round",
                "argsort", "searchsorted"}
# methods and functions whose result may be a view of their first argument (sharing its memory)
# methods whose pullback does not read the values they were called with or returned (linear in the array)
LINEAR_METHODS = {"copy", "flatten", "sum", "mean", "cumsum", "trace", "conj", "conjugate", "astype", "tolist", "item"}

VIEW_METHODS = {"reshape", "transpose", "ravel", "squeeze", "expand_dims", "swapaxes", "moveaxis", "view",
                "diagonal", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray", "atleast_1d",
                "atleast_2d", "atleast_3d", "flip", "fliplr", "flipud", "rot90", "broadcast_to", "split",
                "array_split", "hsplit", "vsplit", "dsplit", "real", "imag", "rollaxis"}

# y = a OP b with an array operand (the other an array or a number): the gradients of a and b before
# un-broadcasting; ``reduced`` gives the gradient of an operand that is a number (summed over the array)
ARRAY_BINOPS = {op: list(ELEMENTWISE_BINARY[f]) for op, f in
                (("+", np.add), ("-", np.subtract), ("*", np.multiply), ("/", np.divide), ("**", np.power))}
ARRAY_BINOPS["@"] = ["_ad_mm0({dy}, {0}, {1})", "_ad_mm1({dy}, {0}, {1})"]
# x[i] on an array with an int index
ARRAY_GETITEM = "_ad_scatter({0}, {1}, {dy})"
ARRAY_BINOPS_REDUCED = {op: [f"_ad_rsum({t})" for t in ts] for op, ts in ARRAY_BINOPS.items() if op != "@"}
ARRAY_BINOPS_REDUCED.update({   # the sum of a product without the product's array, a negation after the sum
    "-": ["_ad_rsum({dy})", "-_ad_rsum({dy})"],
    "*": ["_ad_vdot({dy}, {1})", "_ad_vdot({dy}, {0})"],
    "/": ["_ad_rsum({dy} / {1})", "-_ad_vdot({dy}, {y}) / {1}"],
})


def _full(x, dy):
    """The gradient of ``x.sum()``: ``dy`` in every entry."""
    return np.full(np.shape(x), dy, dtype=np.result_type(x, dy, 0.0))


def _onehot(x, i, dy):
    """The gradient of ``x.max()`` (or ``min``): ``dy`` at the first extremal entry ``i``."""
    g = np.zeros(np.shape(x), dtype=np.result_type(asarray(x).dtype, dy, 0.0))
    g.flat[i] = dy
    return g


def _rsum(g):
    """An array gradient summed to the gradient of a number operand that was broadcast."""
    return g.sum() if type(g) is np.ndarray or type(g) is Indexed else g


def _vdot(g, x):
    """``(g * x).sum()`` without the temporary, for the gradient of a number operand of ``*``."""
    g = dense(g)
    if type(g) is np.ndarray and type(x) is np.ndarray and g.shape == x.shape and g.dtype.kind == "f" \
            and x.dtype.kind == "f":
        return np.dot(g.ravel(), x.ravel())
    return _rsum(g * x)


def _unb(g, x):
    """``unbroadcast`` with the common case (same shape) first."""
    if type(g) is np.ndarray and type(x) is np.ndarray and g.shape == x.shape:
        return g
    return unbroadcast(g, x)


def _scatter(x, i, dy):
    """The gradient of ``x[i]``: ``dy`` at ``i``, zero elsewhere (an indexed cotangent)."""
    if type(x) is np.ndarray and x.dtype == np.float64:
        return Indexed.at(x.shape, x.dtype, i, dy)
    return Indexed.at(np.shape(x), np.result_type(asarray(x).dtype, 0.0), i, dy)


def _register_inline_helpers():
    from ..runtime import HELPERS
    HELPERS.update({"_ad_np": np, "_ad_full": _full, "_ad_onehot": _onehot, "_ad_rsum": _rsum,
                    "_ad_vdot": _vdot, "_ad_unb": _unb, "_ad_mm0": lambda dy, a, b: matmul_grad(dy, a, b, 0),
                    "_ad_mm1": lambda dy, a, b: matmul_grad(dy, a, b, 1), "_ad_scatter": _scatter,
                    **_TEMPLATE_HELPERS})
    # rules for the helpers, so that generated code can itself be differentiated (nested derivatives)
    RULES.update({
        _full: lambda x, dy: (_full(x, dy), lambda d: (None, _rsum(d))),
        _onehot: lambda x, i, dy: (_onehot(x, i, dy), lambda d: (None, None, asarray(d).flat[i])),
        _rsum: lambda g: (_rsum(g), lambda d: (np.broadcast_to(d, np.shape(g)) * 1.0
                                                if type(g) is np.ndarray else d,)),
        _vdot: lambda g, x: (_vdot(g, x), lambda d: (d * x, d * g)),
        _scatter: lambda x, i, dy: (_scatter(x, i, dy), lambda d: (None, None, asarray(d)[i])),
        _unb: lambda g, x: (_unb(g, x), lambda d: (np.broadcast_to(d, np.shape(g)) * 1.0
                                                     if type(g) is np.ndarray else d, None)),
    })


_register_inline_helpers()
