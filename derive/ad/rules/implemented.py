"""Rules of NumPy functions (and of ``dataclasses.astuple``/``asdict``, ``functools.reduce``, ``math.fsum``,
``math.prod``, ``math.copysign``, ``math.dist``, ``divmod``, ``itertools.combinations``, ``permutations``,
``pairwise``, ``accumulate``)
given as Python code:
``implemented_by(f, impl)`` registers, as ``f``'s reverse and forward rules, the differentiation of ``impl``,
a Python function with ``f``'s parameters that computes what ``f`` does with functions that have rules of their
own (``np.linalg.cond`` as a ratio of ``svdvals``, ``np.cov`` as a product of centred arrays ...).  Its derivatives in every mode, and at second
order, are then those of that code: the reverse rule calls ``J(impl, ...)``, whose code the transform
differentiates again; the forward rule is the forward mode of ``impl``.

``impl`` is checked against ``f`` where it is registered: the rules are only as right as the code is the
same function, so each one is tested against central differences of NumPy's own ``f``."""
from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import math
import operator

import numpy as np

from ....errors import UnsupportedError
from ..registry import define
from ..runtime import NONDIFF, RULES, J
from ..tangent import JVP, JVP_RULES
from ..source import generated

_COUNT = itertools.count()


def implemented_by(f, impl):
    """Register the rules of ``f`` as the derivatives of ``impl`` (same parameters, positional or keyword,
    with defaults; no ``*args``, ``**kw`` or keyword-only ones)."""
    sig = inspect.signature(impl)
    names = list(sig.parameters)
    name = f"rule_{impl.__name__.lstrip('_')}"
    src = (f"def {name}({', '.join(names)}):\n"
           f"    y, back = J(impl, {''.join(n + ', ' for n in names)})\n"
           f"    return y, lambda dy: back(dy)[1:]\n")
    rule = generated(name, src, f"<tensorlang.ad rule {name} {next(_COUNT)}>", {"J": J, "impl": impl})
    rule.__defaults__ = impl.__defaults__
    rule.__module__ = impl.__module__

    def forward(args, ts, tkw=None, **kw):
        bad = [k for k in kw if k not in names]
        if bad:   # (as the reverse rule refuses them)
            raise UnsupportedError(f"tensorlang.ad differentiates {getattr(f, '__name__', f)} without the keyword "
                                   f"argument{'s' if len(bad) > 1 else ''} {', '.join(bad)}")
        bound = sig.bind(*args, **kw)
        bound.apply_defaults()
        full = tuple(bound.arguments[n] for n in names)
        tangents = dict(zip(names, ts))
        tangents.update(tkw or {})   # (the keyword arguments' tangents: np.average(x, weights=w))
        return JVP(impl, None, full, tuple(tangents.get(n) for n in names))

    forward.keyword_tangents = True
    RULES[f] = rule
    JVP_RULES[f] = forward
    return rule


# -- NumPy functions given as code ---------------------------------------------------------------------------------
# Each is NumPy's own definition written with functions that have rules; the helpers marked NONDIFF below compute
# only shapes, axes, indices and counts (called as they are, never differentiated).
def _matrix_transpose(x):
    return np.swapaxes(x, -1, -2)


def _vecdot(x1, x2, out=None, axis=-1, keepdims=False):   # the ufunc (out= is handled before any rule)
    return np.sum(np.conj(x1) * x2, axis=axis, keepdims=keepdims)


def _linalg_vecdot(x1, x2, axis=-1):
    return np.sum(np.conj(x1) * x2, axis=axis)


def one_axis(name, x, axis):
    """The axis of ``cumulative_sum``/``cumulative_prod`` (None only for a 1-d array, as NumPy requires)."""
    if axis is None:
        if np.ndim(x) != 1:
            raise ValueError(f"np.{name}: for arrays which have more than one dimension ``axis`` argument is required.")
        return 0
    return axis % np.ndim(x)


def initial_shape(y, axis):
    """The shape of ``y`` with length 1 along ``axis``."""
    shape = list(np.shape(y))
    shape[axis] = 1
    return tuple(shape)


def _cumulative(name, accumulate, start):
    """NumPy 2's ``cumulative_sum``/``cumulative_prod``: ``accumulate`` along one axis, with the initial value
    made by ``start`` (zeros, ones) in front where ``include_initial``."""
    def cumulative(x, axis=None, dtype=None, out=None, include_initial=False):
        ax = one_axis(name, x, axis)
        y = accumulate(x, axis=ax, dtype=dtype)
        if include_initial:
            return np.concatenate([start(initial_shape(y, ax)), y], axis=ax)
        return y
    return cumulative


_cumulative_sum = _cumulative("cumulative_sum", np.cumsum, np.zeros)
_cumulative_prod = _cumulative("cumulative_prod", np.cumprod, np.ones)


def _vdot(a, b):
    return np.sum(np.conj(np.ravel(a)) * np.ravel(b))


# ufunc methods (keyed by the bound method: ``np.add.reduce``)
def _add_reduce(array, axis=0, dtype=None, out=None, keepdims=False):
    return np.sum(array, axis=axis, dtype=dtype, keepdims=keepdims)


def _multiply_reduce(array, axis=0, dtype=None, out=None, keepdims=False):
    return np.prod(array, axis=axis, dtype=dtype, keepdims=keepdims)


def _maximum_reduce(array, axis=0, dtype=None, out=None, keepdims=False):
    return np.max(array, axis=axis, keepdims=keepdims)


def _minimum_reduce(array, axis=0, dtype=None, out=None, keepdims=False):
    return np.min(array, axis=axis, keepdims=keepdims)


def _add_accumulate(array, axis=0, dtype=None, out=None):
    return np.cumsum(array, axis=axis, dtype=dtype)


def _multiply_accumulate(array, axis=0, dtype=None, out=None):
    return np.cumprod(array, axis=axis, dtype=dtype)


def outer_shape(a, b):
    """The shape of ``a`` followed by one axis of length 1 per axis of ``b``."""
    return np.shape(a) + (1,) * np.ndim(b)


def _add_outer(A, B):
    return np.add(np.reshape(A, outer_shape(A, B)), B)


def _subtract_outer(A, B):
    return np.subtract(np.reshape(A, outer_shape(A, B)), B)


def _multiply_outer(A, B):
    return np.multiply(np.reshape(A, outer_shape(A, B)), B)


# statistics
def reduced_axes(ndim, axis):
    """The axes a reduction over ``axis`` (None, an int or a tuple) runs over, in increasing order."""
    if axis is None:
        return tuple(range(ndim))
    if np.ndim(axis) == 0:
        return (axis % ndim,)
    return tuple(sorted(a % ndim for a in axis))


def leading(k):
    return tuple(range(k))


def merged_shape(shape, k):
    """``shape`` with its first ``k`` axes merged into one."""
    return (-1,) + tuple(shape[k:])


def kept_shape(lead, shape, axes):
    """The shape of a result of ``keepdims=True``: ``lead`` (the quantiles' shape), then ``shape`` with
    length 1 along ``axes``."""
    return tuple(lead) + tuple(1 if i in axes else n for i, n in enumerate(shape))


def count(x, axis, keepdims):
    """The number of entries of ``x`` that are not NaN, over ``axis``."""
    return np.sum(~np.isnan(x), axis=axis, keepdims=keepdims)


def quantile_positions(q, n):
    """For the linear method: the index below each virtual position ``q (n - 1)`` and the one above."""
    pos = np.asarray(q, dtype=float) * (n - 1)
    lo = np.clip(np.floor(pos).astype(np.intp), 0, n - 1)
    return lo, np.minimum(lo + 1, n - 1)


def check_quantile(name, q, method, weights):
    if method != "linear":
        raise UnsupportedError(f"tensorlang.ad differentiates np.{name} with the linear method only, not {method!r}")
    if weights is not None:
        raise UnsupportedError(f"tensorlang.ad differentiates np.{name} without weights=")
    if np.any(np.asarray(q) < 0) or np.any(np.asarray(q) > 1):
        raise ValueError(f"np.{name}: quantiles must be in the range [0, 1]")


def sorted_columns(x, axes):
    """The entries of ``x`` along ``axes``, moved first and merged into one axis, sorted along it (a stable
    sort; NaN last)."""
    moved = np.moveaxis(x, axes, leading(len(axes)))
    return np.sort(np.reshape(np.copy(moved), merged_shape(np.shape(moved), len(axes))), axis=0)   # (copy: C order)


def quantiles_shape(q, x, s, axes, keepdims):
    """The shape of the quantiles ``q`` of ``x`` over ``axes`` (``s``: its sorted columns)."""
    return kept_shape(np.shape(q), np.shape(x), axes) if keepdims else np.shape(q) + np.shape(s)[1:]


def linear_quantile(a, q, axis, keepdims, scale=1.0):
    """The quantiles ``q`` of ``a`` over ``axis`` by linear interpolation between the sorted entries (a
    stable sort: at ties the entries are told apart by their order, a subgradient); ``q`` in units of
    ``scale`` (100 for percentiles)."""
    x = np.asarray(a)
    axes = reduced_axes(np.ndim(x), axis)
    s = sorted_columns(x, axes)
    qs = np.reshape(np.asarray(q), (-1,)) / scale   # (one axis of quantiles, made the shape of q at the end)
    lo, hi = quantile_positions(qs, np.shape(s)[0])
    frac = qs * (np.shape(s)[0] - 1) - lo   # (differentiable in q: the slope between the entries)
    below = np.take(s, lo, 0)   # (positional: a layout rule called with keywords is not differentiated twice)
    above = np.take(s, hi, 0)
    frac = np.reshape(frac, np.shape(lo) + (1,) * (np.ndim(s) - 1))
    y = below + frac * (above - below)
    return np.reshape(y, quantiles_shape(q, x, s, axes, keepdims))[()]   # (a scalar as NumPy's: not 0-d)


def nan_linear_quantile(a, q, axis, keepdims, scale=1.0):
    """``linear_quantile`` of the entries that are not NaN, column by column (NaN where a column has none):
    the NaN entries, sorted last, are never read, so their gradient is an exact 0."""
    x = np.asarray(a)
    axes = reduced_axes(np.ndim(x), axis)
    s = sorted_columns(x, axes)
    n = np.maximum(count(s, 0, True), 1)   # (per column; an all-NaN column reads its first entry, then NaN)
    qs = np.reshape(np.asarray(q), (-1,) + (1,) * (np.ndim(s) - 1)) / scale
    lo, hi = quantile_positions(qs, n)
    frac = qs * (n - 1) - lo
    finite = np.where(np.isnan(s), 0.0, s)
    below = np.take_along_axis(finite, lo, 0)
    above = np.take_along_axis(finite, hi, 0)
    y = np.where(all_nan(s, 0, True), np.nan, below + frac * (above - below))
    return np.reshape(y, quantiles_shape(q, x, s, axes, keepdims))[()]


def _quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, weights=None):
    check_quantile("quantile", q, method, weights)
    return linear_quantile(a, q, axis, keepdims)


def _percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, weights=None):
    check_quantile("percentile", np.asarray(q) / 100, method, weights)
    return linear_quantile(a, q, axis, keepdims, 100.0)


def _median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    return linear_quantile(a, 0.5, axis, keepdims)


def _nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False,
                 weights=None):
    check_quantile("nanquantile", q, method, weights)
    return nan_linear_quantile(a, q, axis, keepdims)


def _nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False,
                   weights=None):
    check_quantile("nanpercentile", np.asarray(q) / 100, method, weights)
    return nan_linear_quantile(a, q, axis, keepdims, 100.0)


def _nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    return nan_linear_quantile(a, 0.5, axis, keepdims)


def _partition(a, kth, axis=-1, kind="introselect", order=None):
    x = np.ravel(a) if axis is None else np.asarray(a)
    along = -1 if axis is None else axis
    return np.take_along_axis(x, np.argpartition(x, kth, along), along)   # (a permutation: ties are fine)


def weights_shape(shape, wshape, axis):
    """The shape that 1-d ``weights`` along ``axis`` broadcast with (NumPy's ``average``)."""
    if tuple(shape) == tuple(wshape):
        return tuple(wshape)
    if axis is None:
        raise TypeError("Axis must be specified when shapes of a and weights differ.")
    if len(wshape) != 1 or wshape[0] != shape[axis % len(shape)]:
        raise ValueError("Shape of weights must be consistent with shape of a along specified axis.")
    out = [1] * len(shape)
    out[axis % len(shape)] = wshape[0]
    return tuple(out)


def _average(a, axis=None, weights=None, returned=False, keepdims=False):
    x = np.asarray(a)
    if weights is None:
        avg = np.mean(x, axis=axis, keepdims=keepdims)
        scale = np.full(np.shape(avg), x.size / max(np.size(avg), 1))
    else:
        w = np.reshape(weights, weights_shape(np.shape(x), np.shape(weights), axis))
        scale = np.sum(w * np.ones(np.shape(x)), axis=axis, keepdims=keepdims)
        avg = np.sum(x * w, axis=axis, keepdims=keepdims) / scale
    if returned:
        return avg, np.broadcast_to(scale, np.shape(avg)) * 1.0
    return avg


def check_cov(name, fweights, aweights):
    if fweights is not None or aweights is not None:
        raise UnsupportedError(f"tensorlang.ad differentiates np.{name} without fweights= and aweights=")


def observations(m, y, rowvar):
    """The variables of ``np.cov``'s ``m`` and ``y`` as the rows of one 2-d array."""
    x = np.atleast_2d(m)
    if not rowvar and np.shape(x)[0] != 1:
        x = np.transpose(x)
    if y is not None:
        y2 = np.atleast_2d(y)
        if not rowvar and np.shape(y2)[0] != 1:
            y2 = np.transpose(y2)
        x = np.concatenate([x, y2], axis=0)
    return x


def _cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, dtype=None):
    check_cov("cov", fweights, aweights)
    x = observations(m, y, rowvar)
    if ddof is None:
        ddof = 0 if bias else 1
    n = np.shape(x)[1]
    centred = x - np.mean(x, axis=1, keepdims=True)
    c = np.dot(centred, np.conj(np.transpose(centred))) / (n - ddof)
    return np.squeeze(c)


def _corrcoef(x, y=None, rowvar=True, dtype=None):
    c = _cov(x, y, rowvar)
    if np.ndim(c) == 0:
        return c / c
    d = np.sqrt(np.real(np.diag(c)))
    c = c / np.reshape(d, (-1, 1)) / np.reshape(d, (1, -1))
    return np.clip(c, -1, 1)


# NaN-ignoring reductions: NaN entries take no part, and their gradient is an exact 0 (np.where's)
def all_nan(x, axis, keepdims):
    return np.all(np.isnan(x), axis=axis, keepdims=keepdims)


def _nansum(a, axis=None, dtype=None, out=None, keepdims=False):
    x = np.asarray(a)
    return np.sum(np.where(np.isnan(x), 0.0, x), axis=axis, dtype=dtype, keepdims=keepdims)


def _nanprod(a, axis=None, dtype=None, out=None, keepdims=False):
    x = np.asarray(a)
    return np.prod(np.where(np.isnan(x), 1.0, x), axis=axis, dtype=dtype, keepdims=keepdims)


def _nanmean(a, axis=None, dtype=None, out=None, keepdims=False):
    x = np.asarray(a)
    return np.sum(np.where(np.isnan(x), 0.0, x), axis=axis, keepdims=keepdims) / count(x, axis, keepdims)


def _nanmax(a, axis=None, out=None, keepdims=False):
    x = np.asarray(a)
    y = np.max(np.where(np.isnan(x), -np.inf, x), axis=axis, keepdims=keepdims)
    return np.where(all_nan(x, axis, keepdims), np.nan, y)


def _nanmin(a, axis=None, out=None, keepdims=False):
    x = np.asarray(a)
    y = np.min(np.where(np.isnan(x), np.inf, x), axis=axis, keepdims=keepdims)
    return np.where(all_nan(x, axis, keepdims), np.nan, y)


def nan_deviations(x, axis):
    """The deviations from the mean of the entries that are not NaN (0 at NaN), with the reduced axes
    moved first and merged into one, and the number of entries."""
    axes = reduced_axes(np.ndim(x), axis)
    moved = np.moveaxis(x, axes, leading(len(axes)))
    merged = np.reshape(np.copy(moved), merged_shape(np.shape(moved), len(axes)))
    n = count(merged, 0, True)
    mean = np.sum(np.where(np.isnan(merged), 0.0, merged), axis=0, keepdims=True) / n
    return np.where(np.isnan(merged), 0.0, merged - mean), n


def _nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    x = np.asarray(a)
    d, n = nan_deviations(x, axis)
    v = np.sum(np.real(d * np.conj(d)), axis=0) / (n[0] - ddof)
    if keepdims:
        return np.reshape(v, kept_shape((), np.shape(x), reduced_axes(np.ndim(x), axis)))
    return v


def _nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    x = np.asarray(a)
    d, n = nan_deviations(x, axis)
    s = np.linalg.norm(d, axis=0) / np.sqrt(n[0] - ddof)   # (norm: a subgradient 0 where all entries are equal)
    if keepdims:
        return np.reshape(s, kept_shape((), np.shape(x), reduced_axes(np.ndim(x), axis)))
    return s


def _ptp(a, axis=None, out=None, keepdims=False):
    return np.max(a, axis=axis, keepdims=keepdims) - np.min(a, axis=axis, keepdims=keepdims)


# convolutions: a product with the Toeplitz matrix of one argument (the other's entries gathered by index)
def convolution_indices(n, m, mode, correlate):
    """The index into ``v`` padded with one 0 (index ``m``) of each entry of the matrix ``T`` with
    ``np.convolve(a, v, mode) = T @ a`` (``np.correlate``'s where ``correlate``), rows of ``mode``."""
    if n == 0 or m == 0:
        raise ValueError("v cannot be empty" if m == 0 else "a cannot be empty")
    k = np.arange(n + m - 1)[:, None]
    i = np.arange(n)[None, :]
    j = i - k + (m - 1) if correlate else k - i
    idx = np.where((j >= 0) & (j < m), j, m)
    if mode == "full":
        return idx
    if mode == "same":
        length = max(n, m)
        start = min(n, m) // 2 if correlate and m > n else (min(n, m) - 1) // 2
    elif mode == "valid":
        length, start = max(n, m) - min(n, m) + 1, min(n, m) - 1
    else:
        raise ValueError(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})")
    return idx[start:start + length]


def _convolve(a, v, mode="full"):
    a1, v1 = np.ravel(a), np.ravel(v)
    idx = convolution_indices(np.size(a1), np.size(v1), mode, False)
    return np.dot(np.take(np.concatenate([v1, np.zeros(1)]), idx), a1)


def _correlate(a, v, mode="valid"):
    a1, v1 = np.ravel(a), np.ravel(v)
    idx = convolution_indices(np.size(a1), np.size(v1), mode, True)
    return np.dot(np.take(np.concatenate([np.conj(v1), np.zeros(1)]), idx), a1)


def _trapezoid(y, x=None, dx=1.0, axis=-1):
    yy = np.asarray(y)
    ax = axis % np.ndim(yy)
    moved = np.copy(np.moveaxis(yy, ax, -1))   # (copy: C order)
    if x is None:
        d = dx
    elif np.ndim(x) == 1:
        d = np.diff(x)
    else:
        d = np.moveaxis(np.diff(x, axis=ax), ax, -1)
    return np.sum(d * (moved[..., 1:] + moved[..., :-1]) / 2.0, axis=-1)


def interp_segments(x, xp, fp, left, right, period):
    """For ``np.interp``: the segment of each ``x`` (the index of the knot at or below it, within
    ``0 .. len(xp) - 2``), refusing by name where the derivative in ``x`` does not exist: at a knot where
    the slopes on its two sides differ (outside ``xp`` the slope is 0, and ``left``/``right`` may jump)."""
    if period is not None:
        raise UnsupportedError("tensorlang.ad differentiates np.interp without period=")
    xp_, fp_ = np.asarray(xp, dtype=float), np.asarray(fp)
    if xp_.ndim != 1 or len(xp_) < 2:
        raise UnsupportedError("tensorlang.ad differentiates np.interp with at least two knots xp")
    slopes = np.diff(fp_) / np.diff(xp_)
    before = np.concatenate([[0.0], slopes])
    after = np.concatenate([slopes, [0.0]])
    kink = before != after
    kink[0] |= left is not None and left != fp_[0]
    kink[-1] |= right is not None and right != fp_[-1]
    xs = np.asarray(x, dtype=float)
    at = np.searchsorted(xp_, xs)
    hit = (at < len(xp_)) & (xp_[np.minimum(at, len(xp_) - 1)] == xs)
    if np.any(hit & kink[np.minimum(at, len(xp_) - 1)]):
        bad = xs[hit & kink[np.minimum(at, len(xp_) - 1)]] if xs.ndim else xs
        raise UnsupportedError(f"tensorlang.ad: np.interp is not differentiable at x = {np.ravel(bad)[0]!r}, a knot of "
                               f"xp where its slopes on the two sides differ")
    return np.clip(np.searchsorted(xp_, xs, side="right") - 1, 0, len(xp_) - 2)


def _interp(x, xp, fp, left=None, right=None, period=None):
    j = interp_segments(x, xp, fp, left, right, period)
    x0, x1 = np.take(xp, j), np.take(xp, j + 1)
    f0, f1 = np.take(fp, j), np.take(fp, j + 1)
    y = f0 + (x - x0) * ((f1 - f0) / (x1 - x0))
    lo = np.take(fp, 0) if left is None else left
    hi = np.take(fp, -1) if right is None else right
    return np.where(x < np.take(xp, 0), lo, np.where(x > np.take(xp, -1), hi, y))


def _polyval(p, x):
    coefficients = np.asarray(p)
    # (from the first coefficient, not from zeros_like(x): a loop that starts from a constant array loses
    # its second derivative in reverse over reverse, a defect of the transform not yet fixed)
    y = coefficients[0] * np.ones_like(x)
    for k in range(1, len(coefficients)):
        y = y * x + coefficients[k]
    return y


def _vander(x, N=None, increasing=False):
    # (powers, not a loop of products: reverse over reverse through this code lost the second derivative where
    # the cotangent did not depend on x, a defect of the transform with a loop in a rule's code not yet fixed)
    xx = np.asarray(x)
    y = np.power(xx[:, None], np.arange(len(xx) if N is None else N))
    return y if increasing else np.flip(y, 1)


def _polyder(p, m=1):
    coefficients = np.asarray(p)
    if m < 0:
        raise ValueError("Order of derivative must be positive (see polyint)")
    for _ in range(m):
        n = len(coefficients) - 1
        coefficients = coefficients[:-1] * np.arange(n, 0, -1) if n > 0 else np.zeros(1) * coefficients
    return coefficients


# np.gradient: second-order central differences inside, one-sided ones of edge_order at the two ends, as weights
# of three neighbours from the spacings (NumPy's formulas for uneven spacing, which even spacing is a case of)
def check_spacing(name, spacing, n, edge_order):
    """Refuse what ``np.gradient`` refuses along an axis of ``n`` points, and spacings other than one step or one
    array of the points' coordinates (of length ``n``)."""
    if edge_order not in (1, 2):
        raise ValueError("'edge_order' greater than 2 not supported")
    if n < edge_order + 1:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at least (edge_order + 1) "
                         "elements are required.")
    if np.ndim(spacing) != 0 and (np.ndim(spacing) != 1 or len(spacing) != n):
        raise UnsupportedError(f"tensorlang.ad differentiates {name} with one step or one array of coordinates "
                               f"of the axis's length ({n}) as its spacing")


def gradient_axes(name, ndim, axis):
    """The axes ``np.gradient`` differentiates along (it returns one array for one axis, a tuple for more)."""
    if not isinstance(axis, (type(None), int, np.integer, tuple, list)):
        raise UnsupportedError(f"tensorlang.ad differentiates {name} with one spacing for every axis "
                               f"({name}(f, dx)), not one per axis: call it once per axis, with axis=")
    return list(range(ndim)) if axis is None else [a % ndim for a in axis] if isinstance(axis, (tuple, list)) \
        else [axis % ndim]


def _gradient_along(f, d, edge_order):
    """The derivative of ``f`` along its first axis, ``d`` the distances between its rows."""
    d1, d2 = d[:-1], d[1:]
    inner = (-d2 / (d1 * (d1 + d2)))[:, None] * f[:-2] + ((d2 - d1) / (d1 * d2))[:, None] * f[1:-1] \
        + (d1 / (d2 * (d1 + d2)))[:, None] * f[2:]
    if edge_order == 1:
        first = (f[1] - f[0]) / d[0]
        last = (f[-1] - f[-2]) / d[-1]
    else:
        a, b = d[0], d[1]
        first = -(2 * a + b) / (a * (a + b)) * f[0] + (a + b) / (a * b) * f[1] - a / (b * (a + b)) * f[2]
        a, b = d[-2], d[-1]
        last = b / (a * (a + b)) * f[-3] - (a + b) / (a * b) * f[-2] + (2 * b + a) / (b * (a + b)) * f[-1]
    return np.concatenate([first[None], inner, last[None]])


def _gradient(f, spacing=1.0, axis=None, edge_order=1):
    x = np.asarray(f)
    axes = gradient_axes("np.gradient", np.ndim(x), axis)
    out = []
    for a in axes:
        moved = np.moveaxis(x, a, 0)
        flat = np.reshape(np.copy(moved), (np.shape(moved)[0], -1))
        check_spacing("np.gradient", spacing, np.shape(moved)[0], edge_order)
        d = np.full(np.shape(moved)[0] - 1, 1.0) * spacing if np.ndim(spacing) == 0 else np.diff(spacing)
        g = np.reshape(_gradient_along(flat, d, edge_order), np.shape(moved))
        out.append(np.moveaxis(g, 0, a))
    return out[0] if len(out) == 1 else tuple(out)


def _piecewise(x, condlist, funclist):
    xx = np.asarray(x)
    conds = piecewise_conditions(xx, condlist, len(funclist))
    y = np.zeros_like(xx)
    for k in range(len(conds)):
        if callable(funclist[k]):
            y[conds[k]] = funclist[k](xx[conds[k]])
        else:
            y[conds[k]] = funclist[k]
    return y


def piecewise_conditions(x, condlist, nfunctions):
    """``np.piecewise``'s conditions as boolean arrays of ``x``'s shape, the default (where none holds) added
    when there is one function more than conditions; a later one sets the entries it shares with an earlier."""
    conds = [np.asarray(c, dtype=bool) for c in (condlist if isinstance(condlist, (list, tuple)) or
                                                 np.ndim(condlist) > np.ndim(x) else [condlist])]
    conds = [np.broadcast_to(c, np.shape(x)) for c in conds]
    if nfunctions == len(conds) + 1:
        conds.append(~np.any(np.array(conds), axis=0) if conds else np.ones(np.shape(x), dtype=bool))
    elif nfunctions != len(conds):
        raise ValueError(f"with {len(conds)} condition(s), either {len(conds)} or {len(conds) + 1} functions are "
                         f"expected")
    return conds


_IMPLEMENTED = {
    np.vdot: _vdot,
    np.add.reduce: _add_reduce, np.multiply.reduce: _multiply_reduce, np.maximum.reduce: _maximum_reduce,
    np.minimum.reduce: _minimum_reduce, np.add.accumulate: _add_accumulate,
    np.multiply.accumulate: _multiply_accumulate, np.add.outer: _add_outer, np.subtract.outer: _subtract_outer,
    np.multiply.outer: _multiply_outer,
    np.quantile: _quantile, np.percentile: _percentile, np.median: _median, np.average: _average, np.cov: _cov,
    np.corrcoef: _corrcoef, np.nansum: _nansum, np.nanprod: _nanprod, np.nanmean: _nanmean, np.nanmax: _nanmax,
    np.nanmin: _nanmin, np.nanmedian: _nanmedian, np.nanquantile: _nanquantile,
    np.nanpercentile: _nanpercentile, np.partition: _partition, np.nanvar: _nanvar, np.nanstd: _nanstd, np.ptp: _ptp, np.convolve: _convolve,
    np.correlate: _correlate, np.interp: _interp, np.polyval: _polyval, np.vander: _vander, np.polyder: _polyder,
    np.gradient: _gradient, np.piecewise: _piecewise,
}
for _module, _name, _impl in ((np, "matrix_transpose", _matrix_transpose), (np, "vecdot", _vecdot),
                              (np, "cumulative_sum", _cumulative_sum), (np, "cumulative_prod", _cumulative_prod),
                              (np, "trapezoid", _trapezoid), (np, "trapz", _trapezoid),
                              (np.linalg, "matrix_transpose", _matrix_transpose),
                              (np.linalg, "vecdot", _linalg_vecdot)):   # (NumPy 2's names; trapz before it)
    if hasattr(_module, _name):
        _IMPLEMENTED[getattr(_module, _name)] = _impl
for _f, _impl in _IMPLEMENTED.items():
    implemented_by(_f, _impl)
NONDIFF.update({one_axis, initial_shape, outer_shape, reduced_axes, leading, merged_shape, kept_shape, count,
                quantile_positions, check_quantile, quantiles_shape, weights_shape, check_cov, all_nan, convolution_indices,
                interp_segments, check_spacing, gradient_axes, piecewise_conditions})


# -- dataclasses.astuple and asdict: the fields' values, copied as copy.deepcopy copies them --------------------------
def _deep(value, as_fields):
    """``value`` as ``astuple``/``asdict`` put it: a dataclass by ``as_fields`` (itself), lists, tuples and dicts
    member by member, an array copied, anything else as it is (a number is immutable)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return as_fields(value)
    if type(value) is list or type(value) is tuple:
        return type(value)([_deep(v, as_fields) for v in value])
    if type(value) is dict:
        return {k: _deep(v, as_fields) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return np.copy(value)
    return value


def _astuple(obj):
    return tuple([_deep(getattr(obj, name), _astuple) for name in field_names(obj)])


def _asdict(obj):
    return {name: _deep(getattr(obj, name), _asdict) for name in field_names(obj)}


def field_names(obj) -> list:
    """The names of the fields of dataclass ``obj``, in order."""
    return [f.name for f in dataclasses.fields(obj)]


NONDIFF.add(field_names)
for _f, _impl in ((dataclasses.astuple, _astuple), (dataclasses.asdict, _asdict)):
    implemented_by(_f, _impl)
    define(_f, refused={"reverse over reverse": "the object's fields are read through its class's constructor, "
                                                "which a second reverse differentiation does not reach (forward "
                                                "over reverse, ad.hessian, does)"})


# -- functools.reduce: its loop -------------------------------------------------------------------------------------
_NO_INITIAL = object()


def _reduce(function, iterable, initial=_NO_INITIAL):
    items = list(iterable)
    if initial is _NO_INITIAL:
        acc, rest = items[0], items[1:]
    else:
        acc, rest = initial, items
    for item in rest:
        acc = function(acc, item)
    return acc


implemented_by(functools.reduce, _reduce)


# -- itertools: the items they pick, as lists (a loop over one is the same loop) -------------------------------------
def _combinations(iterable, r):
    items = list(iterable)
    return [tuple([items[i] for i in picked]) for picked in _index_combinations(len(items), r)]


def _permutations(iterable, r=None):
    items = list(iterable)
    return [tuple([items[i] for i in picked]) for picked in _index_permutations(len(items), r)]


def _index_combinations(n, r):
    """The positions ``itertools.combinations`` picks from ``n`` items (no derivative)."""
    return list(itertools.combinations(range(n), r))


def _index_permutations(n, r):
    """The positions ``itertools.permutations`` picks from ``n`` items (no derivative)."""
    return list(itertools.permutations(range(n), r))


def _pairwise(iterable):
    items = list(iterable)
    return [(items[i], items[i + 1]) for i in range(len(items) - 1)]


def _accumulate(iterable, func=None):
    out = []
    for k, item in enumerate(list(iterable)):
        if k == 0:
            total = item
        elif func is None:
            total = total + item
        else:
            total = func(total, item)
        out.append(total)
    return out


implemented_by(itertools.combinations, _combinations)
implemented_by(itertools.permutations, _permutations)
implemented_by(itertools.pairwise, _pairwise)
NONDIFF.update({_index_combinations, _index_permutations})
implemented_by(itertools.accumulate, _accumulate)


# -- math.fsum and math.prod: a sum and a product of the items ------------------------------------------------------
def _fsum(seq):
    return sum(list(seq), 0.0)   # (fsum's rounding is exact, the sum's derivative the same)


def _prod(iterable, start=1):
    return _reduce(operator.mul, iterable, start)


implemented_by(math.fsum, _fsum)
implemented_by(math.prod, _prod)


# -- divmod, math.copysign, math.dist: the quotient is constant where it is defined, the sign of b only chooses ---
def _divmod(a, b):
    return a // b, a % b   # (Python's and NumPy's divmod, by definition)


def _copysign(a, b):
    return -math.fabs(a) if np.signbit(b) else math.fabs(a)


def _dist(p, q):
    return math.sqrt(sum([(a - b) ** 2 for a, b in zip(p, q)], 0.0))


implemented_by(divmod, _divmod)
implemented_by(math.copysign, _copysign)
implemented_by(math.dist, _dist)
