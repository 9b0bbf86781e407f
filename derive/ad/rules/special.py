"""``scipy.special``: ``erf``, ``erfc``, ``erfcx``, ``erfinv``, ``expit``, ``logit``, ``ndtr``, ``log_ndtr``,
``gammaln``, ``digamma``, ``polygamma``, ``i0``, ``i1``, ``i0e``, ``i1e``, ``ive`` and NumPy's ``i0`` (elementwise
in their argument),
``xlogy``, ``xlog1py`` (elementwise in both), ``multigammaln``, ``logsumexp``, and ``softmax`` and
``log_softmax`` as SciPy defines them with ``logsumexp``, in reverse and forward mode.

Each elementwise function has its partial derivative written once, a Python function of the argument(s)
and the result (``erf``, ``erfc`` and ``expit``'s are the table of scalar derivatives', which ``math.erf``
and the arrays' rules read too), from which its reverse rule and forward rule are made as NumPy's are
(``rules.numpy``); the partials are themselves written with functions that have rules, so that they
are differentiated in turn at second order: ``digamma``'s is ``polygamma(1, x)``, ``polygamma(n, x)``'s
is ``polygamma(n + 1, x)``, and the exponentially scaled Bessel functions' are ``ive`` of the
neighbouring orders, ``ive(v, x)' = (ive(v - 1, x) + ive(v + 1, x)) / 2 - sign(x) ive(v, x)``, which
has no quotient by ``x`` (``i1e'(0) = 1/2``); ``i0' = i1``, and ``i1'`` is ``(i0 + iv(2, .)) / 2`` by the scaled
functions.

Where a partial is infinite (``erfinv`` at +-1, ``logit`` at 0 and 1, ``log(y)`` of ``xlogy`` at ``y = 0``,
the poles of ``gammaln``, ``digamma`` and ``polygamma``) it is multiplied by the gradient as a strong
product (``operators.times``), exactly 0 where the gradient is; outside the function's domain, where the
function is NaN, so is its derivative (``logit`` beyond ``[0, 1]``, ``erfinv`` beyond ``[-1, 1]``).
``xlogy(x, y)``'s partial in ``y`` is ``x / y`` as a strong product, 0 where ``x`` is 0 (at ``y = 0`` too),
and in ``x`` ``log(y)``, ``xlog1py``'s likewise."""
from __future__ import annotations

import numpy as np
import scipy.special as sc

from ....errors import UnsupportedError
from ..runtime import RULES, unbroadcast
from .complexes import HOLOMORPHIC, zygote
from ..tangent import JVP_RULES
from . import jvp
from . import numpy as rnp
from .implemented import implemented_by
from .operators import times

_TWO_OVER_SQRT_PI = 2 / np.sqrt(np.pi)
_INV_SQRT_TWO_PI = 1 / np.sqrt(2 * np.pi)


def _nan_where(y, d):
    """Partial ``d`` where the function's value ``y`` is a number, NaN where it is NaN."""
    return np.where(np.isnan(y), np.nan, d)


def _d_erfinv(x, y):
    return np.exp(y * y) / _TWO_OVER_SQRT_PI


def _d_logit(x, y):
    return _nan_where(y, np.divide(1.0, x * (1 - x)))


def _d_gammaln(x, y):
    return sc.digamma(x)


def _d_digamma(x, y):
    return sc.polygamma(1, x)


def _d_i0(x, y):
    return sc.i1(x)


def _d_i1(x, y):
    """``i1' = (i0 + iv(2, .)) / 2``, by the scaled functions (no quotient by ``x``: ``i1'(0) = 1/2``)."""
    return (sc.i0e(x) + sc.ive(2, x)) / 2 * np.exp(np.abs(x))


def _d_i0e(x, y):
    return sc.i1e(x) - np.sign(x) * y


def _d_i1e(x, y):
    return (sc.i0e(x) + sc.ive(2, x)) / 2 - np.sign(x) * y


def _d_ndtr(x, y):
    return np.exp(-0.5 * x * x) * _INV_SQRT_TWO_PI   # (the normal density)


def _d_log_ndtr(x, y):
    return np.exp(-0.5 * x * x - y) * _INV_SQRT_TWO_PI   # (the density over ndtr(x), without its underflow)


def _d_erfcx(x, y):
    return 2 * x * y - _TWO_OVER_SQRT_PI


def _d_xlogy(x, y, z):
    return np.log(y), times(x, np.divide(1.0, y))


def _d_xlog1py(x, y, z):
    return np.log1p(y), times(x, np.divide(1.0, 1 + y))


PARTIALS_UNARY = {sc.erf: rnp.table_partials(sc.erf, "erf"), sc.erfc: rnp.table_partials(sc.erfc, "erfc"),
                  sc.erfinv: _d_erfinv, sc.expit: rnp.table_partials(sc.expit, "expit"), sc.logit: _d_logit,
                  sc.gammaln: _d_gammaln, sc.digamma: _d_digamma, sc.i0: _d_i0, sc.i1: _d_i1, np.i0: _d_i0,
                  sc.i0e: _d_i0e, sc.i1e: _d_i1e,
                  sc.ndtr: _d_ndtr, sc.log_ndtr: _d_log_ndtr, sc.erfcx: _d_erfcx}
PARTIALS_BINARY = {sc.xlogy: _d_xlogy, sc.xlog1py: _d_xlog1py}
rnp.STRONG.update({sc.erfinv, sc.logit, sc.gammaln, sc.digamma, sc.xlogy, sc.xlog1py})
RULES.update({f: rnp.unary_rule(f, d) for f, d in PARTIALS_UNARY.items()})
RULES.update({f: rnp.binary_rule(f, d) for f, d in PARTIALS_BINARY.items()})
JVP_RULES.update({f: jvp.unary_jvp(f, d) for f, d in PARTIALS_UNARY.items()})
JVP_RULES.update({f: jvp.binary_jvp(f, d) for f, d in PARTIALS_BINARY.items()})


# -- functions of an order (an int, not differentiated) and x --------------------------------------------------
def _d_polygamma(n, x, y):
    return sc.polygamma(n + 1, x)


def _d_ive(v, x, y):
    return (sc.ive(v - 1, x) + sc.ive(v + 1, x)) / 2 - np.sign(x) * y


def _in_x(f, d):
    """The reverse and forward rules of ``f(n, x)``, differentiable in ``x`` with partial ``d(n, x, y)``."""
    def rule(n, x):
        y = f(n, x)
        return y, lambda dy: (None, unbroadcast(times(dy, d(n, x, y)), x))

    def forward(args, ts):
        n, x = args
        y = f(n, x)
        return y, None if ts[1] is None else times(ts[1], d(n, x, y))
    return rule, forward


for _f, _d in ((sc.polygamma, _d_polygamma), (sc.ive, _d_ive)):
    RULES[_f], JVP_RULES[_f] = _in_x(_f, _d)


# -- multigammaln and logsumexp --------------------------------------------------------------------------------
def _d_multigammaln(a, d):
    """``sum_{j < d} digamma(a - j / 2)``."""
    return np.sum(sc.digamma(np.expand_dims(a, -1) - np.arange(d) / 2), axis=-1)


def _multigammaln(a, d):
    y = sc.multigammaln(a, d)
    return y, lambda dy: (times(dy, _d_multigammaln(a, d)), None)


def _multigammaln_jvp(args, ts):
    a, d = args
    y = sc.multigammaln(a, d)
    return y, None if ts[0] is None else times(ts[0], _d_multigammaln(a, d))


def _softmax(a, y, axis, keepdims):
    """``exp(a - logsumexp)``: each entry's weight, at most 1 where ``b`` is (no overflow for large ``a``)."""
    return np.exp(a - rnp.expand_reduced(y, axis, keepdims))


def _check_sign(return_sign):
    if return_sign:
        raise UnsupportedError("tensorlang.ad differentiates scipy.special.logsumexp without return_sign")


def _logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """``y = log sum b exp(a)``: ``a-bar = y-bar b exp(a - y)``, ``b-bar = y-bar exp(a - y)``."""
    _check_sign(return_sign)
    y = sc.logsumexp(a, axis=axis, b=b, keepdims=keepdims)
    w = _softmax(a, y, axis, keepdims)

    def back(dy):
        g = rnp.expand_reduced(dy, axis, keepdims) * w
        if b is None:
            return unbroadcast(g, a), None, None, None, None
        return unbroadcast(g * b, a), None, unbroadcast(g, b), None, None
    return y, back


def _logsumexp_jvp(args, ts, tkw=None, **kw):
    """The tangent ``sum (t_a b + t_b) exp(a - y)`` over the axes summed (``tkw``: the keywords' tangents)."""
    names = ("a", "axis", "b", "keepdims", "return_sign")
    given = {**dict(zip(names, args)), **kw}
    tangents = {**dict(zip(names, ts)), **(tkw or {})}
    a, axis, b, keepdims = given["a"], given.get("axis"), given.get("b"), given.get("keepdims", False)
    _check_sign(given.get("return_sign", False))
    y = sc.logsumexp(a, axis=axis, b=b, keepdims=keepdims)
    ta, tb = tangents.get("a"), tangents.get("b")
    if ta is None and tb is None:
        return y, None
    w = _softmax(a, y, axis, keepdims)
    t = 0.0 if ta is None else (ta if b is None else ta * b)
    t = t if tb is None else t + tb
    return y, np.sum(np.broadcast_to(t * w, np.shape(w)), axis=axis, keepdims=keepdims)


_logsumexp_jvp.keyword_tangents = True
RULES.update({sc.multigammaln: _multigammaln, sc.logsumexp: zygote(_logsumexp)})   # (holomorphic in a and b)
HOLOMORPHIC.add(sc.logsumexp)
JVP_RULES.update({sc.multigammaln: _multigammaln_jvp, sc.logsumexp: _logsumexp_jvp})


# -- softmax and log_softmax: SciPy's definitions, through logsumexp's rules ----------------------------------------
def _softmax_of(x, axis=None):
    return np.exp(x - sc.logsumexp(x, axis=axis, keepdims=True))


def _log_softmax_of(x, axis=None):
    return x - sc.logsumexp(x, axis=axis, keepdims=True)


implemented_by(sc.softmax, _softmax_of)
implemented_by(sc.log_softmax, _log_softmax_of)
