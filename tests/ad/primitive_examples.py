"""Examples of every primitive of ``tensorlang.ad``'s registry, written as a user writes them: for each
primitive, calls of it as functions of one float or float-array argument ``x``, with the point to
differentiate them at (inside the function's domain, away from kinks and ties, so that central differences
are an oracle).  ``tests/ad/test_ad_registry.py`` differentiates each in every mode its record claims.

A new primitive adds its examples here; the registry test fails for a primitive that has none."""
import builtins
import dataclasses
import functools
import itertools
import math
import operator

import numpy as np
import scipy.linalg as sl
import scipy.special as sc

from tensorlang.derive.ad.lower import called_with
from tensorlang.derive.ad.rules.numpy import PARTIALS_BINARY, PARTIALS_UNARY

_rng = np.random.default_rng(7)
A = _rng.uniform(0.2, 0.9, (3, 4))        # entries in (0.2, 0.9): in every elementwise function's domain
B = _rng.uniform(1.1, 1.6, (3, 4))        # entries above A's
V = _rng.uniform(0.2, 0.9, 4)
W = _rng.uniform(0.2, 0.9, 5)
_Q = _rng.normal(size=(3, 3))
M = _Q + 3 * np.eye(3)                    # well conditioned, distinct singular values
S = _Q @ _Q.T + 3 * np.eye(3)             # symmetric positive definite, distinct eigenvalues
T = _rng.uniform(0.2, 0.9, (2, 3, 4))
C = np.array([0.3 + 0.4j, -0.2 + 0.7j, 0.5 - 0.1j])
DOMAIN = {np.arccosh: B, np.nan_to_num: A}

# {primitive: [(function of x, x), ...]}
EXAMPLES: dict = {}


def example(*keys):
    """Add ``(fn, x)`` pairs to the examples of ``keys``."""
    def add(*pairs):
        for key in keys:
            EXAMPLES.setdefault(key, []).extend(pairs)
    return add


for _f in PARTIALS_UNARY:
    example(_f)((lambda x, f=_f: f(x), DOMAIN.get(_f, A)), (lambda x, f=_f: f(x), 0.6 if _f is not np.arccosh else 1.4))
for _f in PARTIALS_BINARY:
    example(_f)((lambda x, f=_f: f(x, B), A), (lambda x, f=_f: f(A, x), B), (lambda x, f=_f: f(x, 1.3), 0.7))

for _name in ("acos", "asin", "atan", "cos", "cosh", "erf", "exp", "expm1", "fabs", "log", "log10", "log1p", "log2",
              "sin", "sinh", "sqrt", "tan", "tanh", "asinh", "atanh", "erfc"):
    _f = getattr(math, _name)
    example(_f)((lambda x, f=_f: f(x) * 2.0, 0.6))
example(math.acosh)((lambda x: math.acosh(x) * 2.0, 1.6))
example(math.log)((lambda x: math.log(x, 2.5) * x, 3.0), (lambda x: math.log(2.5, x), 1.7))   # (to a base)
example(math.atan2, math.hypot, math.pow)
for _f in (math.atan2, math.hypot, math.pow):
    example(_f)((lambda x, f=_f: f(x, 1.3), 0.7), (lambda x, f=_f: f(0.7, x), 1.3))
example(builtins.abs)((lambda x: abs(x) * x, -0.7), (lambda x: abs(x), A - 0.5))
example(builtins.float)((lambda x: float(x) * x, 0.7))
example(builtins.max)((lambda x: max(x, 0.5) * x, 0.7), (lambda x: max(list(x)), V))
example(builtins.min)((lambda x: min(x, 0.9) * x, 0.7), (lambda x: min(list(x)), V))
example(builtins.sum)((lambda x: sum(x) * x[0], V))
example(builtins.list)((lambda x: list(x)[1] * x[0], V))
example(builtins.tuple)((lambda x: tuple(x)[1] * x[0], V))
example(builtins.dict)((lambda x: dict([("a", x[0]), ("b", x[1]), ("a", x[2] ** 2)])["a"] * x[3], V),
                       (lambda x: dict({"a": x[0], "b": x[1]}, b=x[2] ** 2)["b"] * x[0], V),
                       (lambda x: dict(zip("abcd", x))["c"] * x[1], V), (lambda x: dict(a=x, b=2.0)["a"] ** 2, A))
example(builtins.filter)((lambda x: sum(filter(lambda t: t > 0.45, x)) * x[0], V),
                         (lambda x: list(filter(None, x * x))[1] * x[0], V))
example(builtins.sorted)((lambda x: sorted(x)[0] * x[1], V))
example(builtins.reversed)((lambda x: list(reversed(x))[0] * x[1], V))
example(builtins.zip)((lambda x: [a * b for a, b in zip(x, x[1:])][0], V))
example(builtins.enumerate)((lambda x: [i * a for i, a in enumerate(x)][2], V))
example(builtins.map)((lambda x: list(map(np.sin, x))[1], V))
example(called_with)((lambda x: np.sum(np.multiply(*(x, x[::-1]))), V),
                     (lambda x: _gathering(x[0], *x[1:], scale=x[2], **{"p": 2.0}), V),
                     (lambda x: _gathering(*[x, x * x], **dict(scale=1.5, p=3.0)), A))
example(itertools.combinations)((lambda x: [a * b for a, b in itertools.combinations(x, 2)], V),
                                (lambda x: list(itertools.combinations([x[:2], x[2:], x[1:3]], 2))[2], V))
example(itertools.permutations)((lambda x: [a * b ** 2 for a, b in itertools.permutations(x[:3], 2)], V),
                                (lambda x: [a * b ** 2 * c for a, b, c in itertools.permutations(x[:3])], V))
example(itertools.pairwise)((lambda x: [(b - a) ** 2 for a, b in itertools.pairwise(x)], V))
example(itertools.accumulate)((lambda x: list(itertools.accumulate(x)), V),
                              (lambda x: list(itertools.accumulate(x, operator.mul)), V))
example(builtins.getattr)((lambda x: getattr(x, "T") @ x, M))
example(builtins.complex)((lambda x: abs(complex(x, 2.0)), 0.7))
example(builtins.setattr)((lambda x: _with_attribute(x), 0.7))

for _op, _f in (("+", operator.add), ("-", operator.sub), ("*", operator.mul), ("/", operator.truediv),
                ("**", operator.pow), ("%", operator.mod), ("@", operator.matmul)):
    _right = M if _op == "@" else B
    _left = M if _op == "@" else A
    example(_f)((lambda x, f=_f, r=_right: f(x, r), _left), (lambda x, f=_f, l=_left: f(l, x), _right))
for _f, _g in ((operator.iadd, operator.add), (operator.isub, operator.sub), (operator.imul, operator.mul),
               (operator.itruediv, operator.truediv), (operator.ipow, operator.pow), (operator.imod, operator.mod),
               (operator.imatmul, operator.matmul)):
    _other = M if _f is operator.imatmul else B
    example(_f)((lambda x, f=_f, o=_other: f(x + 0.0, o), M if _f is operator.imatmul else A))
example(operator.floordiv, operator.ifloordiv)((lambda x: (x // 0.3) * x, A))
example(operator.neg)((lambda x: -x, A))
example(operator.pos)((lambda x: +x, A))

_reductions = [np.sum, np.mean, np.prod, np.max, np.min, np.amax, np.amin, np.std, np.var, np.cumsum, np.cumprod]
for _f in _reductions:
    example(_f)((lambda x, f=_f: f(x), A), (lambda x, f=_f: f(x, axis=1), A), (lambda x, f=_f: f(x, axis=0), A))
example(np.trace)((lambda x: np.trace(x), M))
example(np.diff)((lambda x: np.diff(x, axis=1) ** 2, A))
example(np.sort)((lambda x: np.sort(x, axis=1) * B, A))
example(np.clip)((lambda x: np.clip(x, 0.3, 0.8), A))
example(np.where)((lambda x: np.where(x > 0.5, x * x, np.sin(x)), A))
example(np.sign)((lambda x: np.sign(x - 0.55) * x, A))
example(np.angle)((lambda x: np.angle(x + 1j * B), A))
example(np.real)((lambda x: np.real(x * C[0]), A))
example(np.imag)((lambda x: np.imag(x * C[0]), A))
example(np.conjugate)((lambda x: np.real(np.conjugate(x * C[0]) * C[1]), A))
example(np.array)((lambda x: np.array([x[0], x[1] * 2.0]), V))
example(np.asarray)((lambda x: np.asarray(x) * 2.0, A))
example(np.full)((lambda x: np.full((2, 3), x), 0.7))
example(np.full_like)((lambda x: np.full_like(A, x), 0.7))
example(np.linspace)((lambda x: np.linspace(x, 2.0, 5), 0.7))
example(np.copyto)((lambda x: _copied_to(x), A))
example(np.select)((lambda x: np.select([x < 0.4, x > 0.7], [x * x, np.sin(x)], 0.5 * x), A))

_layout = {
    np.reshape: lambda x: np.reshape(x, (4, 3)), np.transpose: lambda x: np.transpose(x), np.ravel: np.ravel,
    np.squeeze: lambda x: np.squeeze(x[None]), np.expand_dims: lambda x: np.expand_dims(x, 1),
    np.roll: lambda x: np.roll(x, 1, axis=1), np.tile: lambda x: np.tile(x, (2, 1)),
    np.repeat: lambda x: np.repeat(x, 2, axis=0), np.flip: lambda x: np.flip(x, 1), np.fliplr: np.fliplr,
    np.flipud: np.flipud, np.rot90: np.rot90, np.tril: np.tril, np.triu: lambda x: np.triu(x, 1),
    np.diag: lambda x: np.diag(x[:, :3]), np.diagonal: lambda x: np.diagonal(x, 1),
    np.moveaxis: lambda x: np.moveaxis(x, 0, 1), np.swapaxes: lambda x: np.swapaxes(x, 0, 1),
    np.rollaxis: lambda x: np.rollaxis(x, 1), np.broadcast_to: lambda x: np.broadcast_to(x[0], (2, 4)),
    np.atleast_1d: lambda x: np.atleast_1d(x[0, 0]), np.atleast_2d: lambda x: np.atleast_2d(x[0]),
    np.atleast_3d: np.atleast_3d, np.split: lambda x: np.split(x, 2, axis=1)[1],
    np.array_split: lambda x: np.array_split(x, 3, axis=1)[0], np.hsplit: lambda x: np.hsplit(x, 2)[0],
    np.vsplit: lambda x: np.vsplit(x, 3)[2], np.dsplit: lambda x: np.dsplit(x[None], 2)[1],
    np.take: lambda x: np.take(x, [2, 0, 2], axis=1), np.take_along_axis: lambda x: np.take_along_axis(
        x, np.array([[1], [0], [3]]), axis=1), np.resize: lambda x: np.resize(x, (2, 7)),
    np.copy: lambda x: np.copy(x) * x, np.diagflat: lambda x: np.diagflat(x[0]),
    np.ascontiguousarray: lambda x: np.ascontiguousarray(x.T), np.delete: lambda x: np.delete(x, 1, axis=1),
    np.vstack: lambda x: np.vstack([x, 2 * x]), np.hstack: lambda x: np.hstack([x, x * x]),
    np.dstack: lambda x: np.dstack([x, x]), np.column_stack: lambda x: np.column_stack([x[0], x[1]]),
    np.pad: lambda x: np.pad(x, ((1, 0), (0, 2))), np.append: lambda x: np.append(x, x[0]),
    np.concatenate: lambda x: np.concatenate([x, x * x], axis=1), np.stack: lambda x: np.stack([x, 2 * x]),
}
if hasattr(np, "row_stack"):
    _layout[np.row_stack] = lambda x: np.row_stack([x, x])
for _f, _g in _layout.items():
    example(_f)((lambda x, g=_g: g(x) * 1.5, A))

example(np.dot)((lambda x: np.dot(x, V), A), (lambda x: np.dot(A, x), V))
example(np.matmul)((lambda x: np.matmul(x, M), M), (lambda x: np.matmul(M, x), M))
example(np.outer)((lambda x: np.outer(x, W), V))
example(np.inner)((lambda x: np.inner(x, A), V))
example(np.kron)((lambda x: np.kron(x, M[:2, :2]), M[:2, :2]))
example(np.cross)((lambda x: np.cross(x, V[:3]), W[:3]))
example(np.tensordot)((lambda x: np.tensordot(x, T, axes=([0, 1], [1, 2])), A[:3, :4] @ np.ones((4, 4))[:, :4]))
example(np.einsum)((lambda x: np.einsum("ij,jk->ik", x, A), M))
example(np.linalg.inv)((lambda x: np.linalg.inv(x), M))
example(np.linalg.det)((lambda x: np.linalg.det(x), M))
example(np.linalg.slogdet)((lambda x: np.linalg.slogdet(x)[1], M))
example(np.linalg.solve)((lambda x: np.linalg.solve(x, V[:3]), M), (lambda x: np.linalg.solve(M, x), V[:3]))
example(np.linalg.cholesky)((lambda x: np.linalg.cholesky(x), S))
example(np.linalg.eigh)((lambda x: np.linalg.eigh(x)[0], S), (lambda x: np.abs(np.linalg.eigh(x)[1]), S))
example(np.linalg.eigvalsh)((lambda x: np.linalg.eigvalsh(x), S))
example(np.linalg.norm)((lambda x: np.linalg.norm(x), A), (lambda x: np.linalg.norm(x, axis=1), A))
example(np.linalg.pinv)((lambda x: np.linalg.pinv(x), A))
example(np.linalg.svd)((lambda x: np.linalg.svd(x, compute_uv=False), A))
if hasattr(np.linalg, "svdvals"):
    example(np.linalg.svdvals)((lambda x: np.linalg.svdvals(x), A))

example(sc.erf)((lambda x: sc.erf(x), A))
example(sc.erfc)((lambda x: sc.erfc(x), A))
example(sc.erfinv)((lambda x: sc.erfinv(x), A - 0.1))
example(sc.expit)((lambda x: sc.expit(x), A))
example(sc.logit)((lambda x: sc.logit(x), A))
example(sc.gammaln)((lambda x: sc.gammaln(x), B))
example(sc.digamma, sc.psi)((lambda x: sc.digamma(x), B))
example(sc.polygamma)((lambda x: sc.polygamma(1, x), B))
example(sc.i0e)((lambda x: sc.i0e(x), A))
example(sc.i1e)((lambda x: sc.i1e(x), A))
example(sc.i0, np.i0)((lambda x: sc.i0(x) if isinstance(x, float) else np.i0(x), A), (lambda x: np.i0(x) * x, -0.6))
example(sc.i1)((lambda x: sc.i1(x), A - 0.5), (lambda x: sc.i1(x) * x, 0.0))
example(sc.ive)((lambda x: sc.ive(2, x), A))
example(sc.xlogy)((lambda x: sc.xlogy(x, B), A), (lambda x: sc.xlogy(A, x), B))
example(sc.xlog1py)((lambda x: sc.xlog1py(x, B), A), (lambda x: sc.xlog1py(A, x), B))
example(sc.multigammaln)((lambda x: sc.multigammaln(x, 2), 2.3))
example(sc.logsumexp)((lambda x: sc.logsumexp(x), A), (lambda x: sc.logsumexp(x, axis=1), A))
example(sc.ndtr)((lambda x: sc.ndtr(x * 4 - 2), A))
example(sc.log_ndtr)((lambda x: sc.log_ndtr(x * 12 - 9), A))
example(sc.erfcx)((lambda x: sc.erfcx(x * 4 - 2), A))
example(sc.softmax)((lambda x: sc.softmax(x), A), (lambda x: sc.softmax(x, axis=1), A))
example(sc.log_softmax)((lambda x: sc.log_softmax(x, axis=0), A), (lambda x: sc.log_softmax(x), V))
example(sl.solve_triangular)((lambda x: sl.solve_triangular(np.triu(x), V[:3]), M))
example(sl.cho_factor)((lambda x: sl.cho_factor(x)[0], S))
example(sl.cho_solve)((lambda x: sl.cho_solve(sl.cho_factor(x), V[:3]), S))
example(sl.lu_factor)((lambda x: sl.lu_factor(x)[0], M))
example(sl.lu_solve)((lambda x: sl.lu_solve(sl.lu_factor(x), V[:3]), M))
example(sl.solve_continuous_lyapunov)((lambda x: sl.solve_continuous_lyapunov(x - 6 * np.eye(3), S), M))

for _f in (np.fft.fft, np.fft.ifft, np.fft.rfft):
    example(_f)((lambda x, f=_f: np.abs(f(x)) ** 2, V), (lambda x, f=_f: f(x, axis=0), A))
example(np.fft.irfft)((lambda x: np.fft.irfft(x * (1 + 0.5j)), V))
for _f in (np.fft.fft2, np.fft.ifft2, np.fft.fftn, np.fft.ifftn):
    example(_f)((lambda x, f=_f: np.abs(f(x)) ** 2, A))
example(np.linalg.qr)((lambda x: np.linalg.qr(x)[1], A.T), (lambda x: np.abs(np.linalg.qr(x)[0]), A.T))
example(np.linalg.lstsq)((lambda x: np.linalg.lstsq(x, W[:4], rcond=None)[0], A.T))
example(np.linalg.eig)((lambda x: np.linalg.eig(x)[0], M), (lambda x: np.abs(np.linalg.eig(x)[1]), M))
example(np.linalg.eigvals)((lambda x: np.linalg.eigvals(x), M))
example(np.linalg.matrix_power)((lambda x: np.linalg.matrix_power(x, 3), M / 3))
example(np.linalg.multi_dot)((lambda x: np.linalg.multi_dot([x, M, x]), M))
example(np.linalg.cond)((lambda x: np.linalg.cond(x), M))
example(np.linalg.tensorinv)((lambda x: np.linalg.tensorinv(x.reshape(3, 3), ind=1), M))
example(np.linalg.tensorsolve)((lambda x: np.linalg.tensorsolve(x, V[:3]), M))
if hasattr(np.linalg, "matrix_norm"):
    example(np.linalg.matrix_norm)((lambda x: np.linalg.matrix_norm(x), A), (lambda x: np.linalg.matrix_norm(x, ord=1), A))
    example(np.linalg.vector_norm)((lambda x: np.linalg.vector_norm(x), V), (lambda x: np.linalg.vector_norm(x, ord=np.inf), V))
example(sl.expm)((lambda x: sl.expm(x), M / 4))

# NumPy 2's names, ufunc methods, statistics, convolutions, interpolation (most given as code: rules.implemented)
_swv = np.lib.stride_tricks.sliding_window_view
_NANS = np.zeros(A.shape, dtype=bool)
_NANS[0, 1] = _NANS[2, 3] = True          # (every row and column keeps numbers)
_with_nans = lambda x: np.where(_NANS, np.nan, x)   # noqa: E731
for _module, _name in ((np, "matrix_transpose"), (np.linalg, "matrix_transpose")):
    if hasattr(_module, _name):
        example(getattr(_module, _name))((lambda x, f=getattr(_module, _name): f(x) * 1.5, A))
if hasattr(np, "vecdot"):
    example(np.vecdot)((lambda x: np.vecdot(x, B), A), (lambda x: np.vecdot(A, x, axis=0), B))
    example(np.linalg.vecdot)((lambda x: np.linalg.vecdot(x, V), A))
    example(np.cumulative_sum)((lambda x: np.cumulative_sum(x, axis=1) ** 2, A),
                               (lambda x: np.cumulative_sum(x, include_initial=True) ** 2, V))
    example(np.cumulative_prod)((lambda x: np.cumulative_prod(x, axis=0), A),
                                (lambda x: np.cumulative_prod(x, include_initial=True), V))
    example(np.var)((lambda x: np.var(x, axis=1, mean=np.mean(x, axis=1, keepdims=True)), A))
    example(np.std)((lambda x: np.std(x, axis=0, ddof=1, mean=np.mean(x, axis=0, keepdims=True)), A))
example(np.prod)((lambda x: np.prod(x, axis=(0, 2)), T), (lambda x: np.prod(x, axis=(2, 0), keepdims=True), T))
example(np.add.reduce)((lambda x: np.add.reduce(x) ** 2, A), (lambda x: np.add.reduce(x, axis=1, keepdims=True) ** 2, A))
example(np.multiply.reduce)((lambda x: np.multiply.reduce(x, axis=1), A))
example(np.maximum.reduce)((lambda x: np.maximum.reduce(x, axis=1), A), (lambda x: np.maximum.reduce(x, axis=None), A))
example(np.minimum.reduce)((lambda x: np.minimum.reduce(x), A))
example(np.add.accumulate)((lambda x: np.add.accumulate(x, axis=1) ** 2, A))
example(np.multiply.accumulate)((lambda x: np.multiply.accumulate(x), A))
example(np.add.outer)((lambda x: np.add.outer(x, W) ** 2, V), (lambda x: np.add.outer(V, x) ** 2, A))
example(np.subtract.outer)((lambda x: np.subtract.outer(x, W) ** 2, V))
example(np.multiply.outer)((lambda x: np.multiply.outer(x, W), V), (lambda x: np.multiply.outer(x, x), V))
example(np.block)((lambda x: np.block([[x, 2 * x], [x * x, x]]), A), (lambda x: np.block([x, x[:2] ** 2]), V))
example(np.vdot)((lambda x: np.vdot(x, B), A))
example(np.cov)((lambda x: np.cov(x), A), (lambda x: np.cov(x, rowvar=False, bias=True), A),
                (lambda x: np.cov(x[0], x[1]), A))
example(np.corrcoef)((lambda x: np.corrcoef(x), A), (lambda x: np.corrcoef(x[0], x[2]), A))
example(np.average)((lambda x: np.average(x), A), (lambda x: np.average(x, axis=1, weights=V), A),
                    (lambda x: np.average(A, axis=1, weights=x), V),
                    (lambda x: np.average(x, axis=0, weights=x * x, returned=True), A))
example(np.median)((lambda x: np.median(x), A), (lambda x: np.median(x, axis=1), A),
                   (lambda x: np.median(x, axis=0, keepdims=True), A))
example(np.quantile)((lambda x: np.quantile(x, 0.3), A), (lambda x: np.quantile(x, [0.2, 0.7], axis=1), A),
                     (lambda x: np.quantile(A, x), 0.3))
example(np.percentile)((lambda x: np.percentile(x, 30, axis=0), A), (lambda x: np.percentile(x, [10, 95]), T))
example(np.nanmedian)((lambda x: np.nanmedian(_with_nans(x)), A), (lambda x: np.nanmedian(_with_nans(x), axis=1), A))
example(np.nanquantile)((lambda x: np.nanquantile(_with_nans(x), [0.2, 0.7], axis=0), A),
                        (lambda x: np.nanquantile(x, 0.3, keepdims=True), A))
example(np.nanpercentile)((lambda x: np.nanpercentile(_with_nans(x), 30, axis=1), A))
example(np.partition)((lambda x: np.partition(x, 2) ** 2, V), (lambda x: np.partition(x, (0, 2), axis=0), A))
example(np.insert)((lambda x: np.insert(x, 1, x[:2] ** 2), V), (lambda x: np.insert(x, [0, 2], 0.5, axis=1), A))
example(np.add.at)((lambda x: _added_at(x), V))
example(np.subtract.at)((lambda x: _subtracted_at(x), A))
example(np.put)((lambda x: _put_into(x), V))
example(np.place)((lambda x: _placed(x), V))
example(np.put_along_axis)((lambda x: _put_along(x), V))
example(np.nansum)((lambda x: np.nansum(_with_nans(x)), A), (lambda x: np.nansum(_with_nans(x), axis=1), A))
example(np.nanprod)((lambda x: np.nanprod(_with_nans(x), axis=0), A))
example(np.nanmean)((lambda x: np.nanmean(_with_nans(x)), A), (lambda x: np.nanmean(_with_nans(x), axis=0), A))
example(np.nanmax)((lambda x: np.nanmax(_with_nans(x), axis=1), A), (lambda x: np.nanmax(_with_nans(x)), A))
example(np.nanmin)((lambda x: np.nanmin(_with_nans(x), axis=0), A))
example(np.nanvar)((lambda x: np.nanvar(_with_nans(x)), A), (lambda x: np.nanvar(_with_nans(x), axis=1, ddof=1), A))
example(np.nanstd)((lambda x: np.nanstd(_with_nans(x), axis=0), A),
                   (lambda x: np.nanstd(_with_nans(x), axis=1, keepdims=True), A))
example(np.ptp)((lambda x: np.ptp(x, axis=1), A), (lambda x: np.ptp(x), A))
example(np.convolve)((lambda x: np.convolve(x, W), V), (lambda x: np.convolve(V, x, "same"), W),
                     (lambda x: np.convolve(x, W[:3], "valid"), V))
example(np.correlate)((lambda x: np.correlate(x, W, "full"), V), (lambda x: np.correlate(V, x, "same"), W),
                      (lambda x: np.correlate(x, W[:3]), V))
example(np.interp)((lambda x: np.interp(x, [0.0, 0.45, 1.0], [1.0, 2.0, 0.5]), A),
                   (lambda x: np.interp(A, np.array([0.0, 0.45, 1.0]), x), np.array([1.0, 2.0, 0.5])),
                   (lambda x: np.interp(x, [0.3, 0.6], [1.0, 2.0]), A))
example(np.polyval)((lambda x: np.polyval(x, 0.7), V), (lambda x: np.polyval(V, x), A))
example(np.vander)((lambda x: np.vander(x, 3), V), (lambda x: np.vander(x, increasing=True), V))
example(np.polyder)((lambda x: np.polyder(x), V), (lambda x: np.polyder(x, 2) * x[:2], V), (lambda x: np.polyder(x, 5), V))
example(np.gradient)((lambda x: np.gradient(x), W), (lambda x: np.gradient(x, 0.3, edge_order=2), W),
                     (lambda x: np.gradient(W, np.cumsum(x), edge_order=2), W),
                     (lambda x: np.gradient(np.cumsum(W), x), W), (lambda x: np.stack(np.gradient(x)), A),
                     (lambda x: np.gradient(x, 0.5, axis=(1,))[0], A), (lambda x: np.gradient(x, axis=1, edge_order=2), T))
example(np.piecewise)((lambda x: np.piecewise(x, [x < 0.5, x > 0.7], [np.sin, lambda t: t ** 2, 0.25]), A),
                      (lambda x: np.piecewise(x, x > 0.5, [lambda t: t ** 3, np.exp]), V))
example(np.broadcast_arrays)((lambda x: np.broadcast_arrays(x[:, None], x[None, :2] ** 2), V),
                            (lambda x: np.broadcast_arrays(x, 2.0)[1] * x, V))
example(np.meshgrid)((lambda x: np.meshgrid(x, W), V), (lambda x: np.meshgrid(x, x[:2], indexing="ij", sparse=True), V))
example(_swv)((lambda x: _swv(x, 3) * 1.5, V), (lambda x: _swv(x, (2, 2)) ** 2, A))
for _name in ("trapezoid", "trapz"):
    if hasattr(np, _name):
        _f = getattr(np, _name)
        example(_f)((lambda x, f=_f: f(x, axis=1), A), (lambda x, f=_f: f(A, x=x, axis=1), np.cumsum(V)),
                    (lambda x, f=_f: f(x, dx=0.5, axis=0), A))
example(np.fft.rfftn)((lambda x: np.abs(np.fft.rfftn(x)) ** 2, A), (lambda x: np.fft.rfftn(x, axes=(0, 2)), T))
example(np.fft.irfftn)((lambda x: np.fft.irfftn(x * (1 + 0.5j)), A), (lambda x: np.fft.irfftn(x * 1j, s=(3, 5)), A))
example(np.fft.rfft2)((lambda x: np.abs(np.fft.rfft2(x)) ** 2, A))
example(np.fft.irfft2)((lambda x: np.fft.irfft2(x * (1 + 0.5j)), A))

# methods: (type, name)
for _name, _g in {"sum": lambda x: x.sum(axis=1), "mean": lambda x: x.mean(), "max": lambda x: x.max(axis=0),
                  "min": lambda x: x.min(), "prod": lambda x: x.prod(axis=1), "std": lambda x: x.std(),
                  "var": lambda x: x.var(axis=0), "cumsum": lambda x: x.cumsum(axis=1),
                  "cumprod": lambda x: x.cumprod(), "reshape": lambda x: x.reshape(4, 3),
                  "transpose": lambda x: x.transpose(), "ravel": lambda x: x.ravel(),
                  "flatten": lambda x: x.flatten(), "squeeze": lambda x: x[None].squeeze(),
                  "copy": lambda x: x.copy() * x, "astype": lambda x: x.astype(np.float64) * x,
                  "clip": lambda x: x.clip(0.3, 0.8), "dot": lambda x: x.dot(V),
                  "trace": lambda x: x[:, :3].trace(), "conj": lambda x: x.conj() * x,
                  "conjugate": lambda x: x.conjugate() * x, "item": lambda x: x.item(2) * x,
                  "tolist": lambda x: x.tolist()[1][2] * x, "diagonal": lambda x: x.diagonal(offset=1) ** 2,
                  "swapaxes": lambda x: x.swapaxes(0, 1) * x.T, "repeat": lambda x: x.repeat(2, axis=0) ** 2,
                  "take": lambda x: x.take([0, 2, 2], axis=1) ** 2}.items():
    example((np.ndarray, _name))((_g, A))
example((list, "append"))((lambda x: _appended(x), V))
example((list, "extend"))((lambda x: _extended(x), V))
example((list, "insert"))((lambda x: _inserted(x), V))
example((list, "pop"))((lambda x: _popped(x), V))
example((list, "copy"))((lambda x: list(x).copy()[1] * x[0], V))
example((dict, "get"))((lambda x: {"a": x, "b": 2 * x}.get("b") * x, 0.7))
example((dict, "items"))((lambda x: [v * v for k, v in {"a": x, "b": 2 * x}.items()][1], 0.7))
example((dict, "values"))((lambda x: list({"a": x, "b": 2 * x}.values())[1] * x, 0.7))
example((dict, "copy"))((lambda x: {"a": x}.copy()["a"] * x, 0.7))
example((dict, "update"))((lambda x: _updated(x), 0.7))
example((complex, "conjugate"))((lambda x: abs(complex(x, 1.0).conjugate() * (2 + 1j)), 0.7))
example((complex, "conj"))((lambda x: abs(np.exp(1j * x).conj() * (2 + 1j)), 0.7))
example((dict, "keys"))((lambda x: [v * x for v in [{"a": x, "b": 2 * x}[k] for k in {"a": 1, "b": 2}.keys()]][1], 0.7))


class _Box:
    pass


def _gathering(first, *rest, scale, **opts):
    return scale * np.sum(first * sum(rest) ** opts["p"])


def _with_attribute(x):
    b = _Box()
    setattr(b, "v", x * x)
    return b.v * x


@dataclasses.dataclass
class _Pair:
    a: float
    b: float


def _replaced(x):
    p = dataclasses.replace(_Pair(x, 2.0), b=x * x)
    return p.a * p.b + p.b


example(dataclasses.replace)((_replaced, 0.7))


@dataclasses.dataclass
class _Nested:
    pair: _Pair
    rows: list


def _as_tuple(x):
    (a, b), rows = dataclasses.astuple(_Nested(_Pair(x, x * x), [np.array([x, 2.0]), x]))
    return a * b + np.sum(rows[0] * x) * rows[1]


def _as_dict(x):
    d = dataclasses.asdict(_Nested(_Pair(x, x * x), [np.array([x, 2.0]), x]))
    return d["pair"]["a"] * d["pair"]["b"] + np.sum(d["rows"][0] * x) * d["rows"][1]


example(dataclasses.astuple)((_as_tuple, 0.7))
example(dataclasses.asdict)((_as_dict, 0.7))


def _copied_to(x):
    y = np.zeros_like(x)
    np.copyto(y, x * x)
    return y + x


def _added_at(x):
    y = x * x
    np.add.at(y, [0, 2, 2], x[1:] * 3.0)
    return y * x


def _subtracted_at(x):
    y = np.ones((4, 4))
    np.subtract.at(y, (np.array([0, 2, 0]), np.array([1, 3, 1])), x[0, :3] ** 2)
    return y * x[1]


def _put_into(x):
    y = x * 1.5
    np.put(y, [3, 0], x[1] ** 2)
    return y * x


def _put_along(x):
    y = x * 2.0
    np.put_along_axis(y, np.array([2, 0]), x[1:3] ** 2, axis=0)
    return y * x


def _placed(x):
    y = x * 2.0
    np.place(y, np.array([False, True, True, False]), x[2:] ** 2)
    return y * x


def _appended(x):
    out = []
    for v in x:
        out.append(v * v)
    return out[1] * out[2]


def _extended(x):
    out = [x[0]]
    out.extend([x[1] * x[2], x[3]])
    return out[1] * out[0]


def _inserted(x):
    out = [x[0], x[1]]
    out.insert(1, x[2] * x[2])
    return out[1] * out[0]


def _popped(x):
    out = [x[0], x[1] * x[1], x[2]]
    v = out.pop(1)
    return v * out[1]


def _updated(x):
    d = {"a": x}
    d.update({"b": x * x})
    return d["a"] * d["b"]


# primitives with no example of floats in, with why
NO_EXAMPLE = {
    operator.and_: "bitwise: integers and bools only", operator.or_: "bitwise: integers and bools only",
    operator.xor: "bitwise: integers and bools only", operator.lshift: "shifts integers only",
    operator.rshift: "shifts integers only", operator.iand: "bitwise: integers and bools only",
    operator.ior: "bitwise: integers and bools only", operator.ixor: "bitwise: integers and bools only",
    operator.ilshift: "shifts integers only", operator.irshift: "shifts integers only",
}
example(operator.getitem)((lambda x: operator.getitem(x, slice(1, 3)) * operator.getitem([x[0], x[2]], 1), V))
example(functools.reduce)((lambda x: functools.reduce(operator.mul, [x[0], x[1], x[2]]), V),
                          (lambda x: functools.reduce(np.dot, [x, x.T, x], np.eye(3)), A[:, :3]))
example(math.fsum)((lambda x: math.fsum([x[0], x[1] * x[2]]) ** 2, V))
example(math.prod)((lambda x: math.prod([x[0], x[1], x[2]]), V), (lambda x: math.prod([x[0], x[1]], start=x[2]), V))
example(np.float_power)((lambda x: np.float_power(x + 1.0, x), A))
example(np.float64)((lambda x: np.float64(x) ** 2, 0.7), (lambda x: np.float64(x) * x, A))
NO_EXAMPLE[np.float32] = "a cast to single precision, which central differences at this step cannot check " \
                         "(test_ad_rule_arguments.py: float32 gradients)"
NO_EXAMPLE.update({u.at: "refused in every mode (test_ad_scatter_rules.py)"
                   for u in (np.multiply, np.divide, np.power, np.maximum, np.minimum)})
example(divmod)((lambda x: divmod(x[0] * 5.0, x[1])[1] * x[2] + divmod(x[3], 0.3)[0] * x[3], V))
example(math.copysign)((lambda x: math.copysign(x[0] * x[1], -x[2]) * x[3] + math.copysign(x[1], 0.5), V))
example(math.dist)((lambda x: math.dist([x[0], x[1]], [x[2] * 2.0, 0.1]) * x[3], V))
