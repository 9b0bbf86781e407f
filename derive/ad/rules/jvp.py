"""Forward-mode rules (JVPs): ``rule(args, tangents) -> (y, ty)``, None being the zero tangent.

Most are derived from the data the reverse rules are made of, so each derivative is written once:
elementwise NumPy functions from their partial derivatives (``rules.numpy.PARTIALS_UNARY``/
``PARTIALS_BINARY``: the tangent is the partial times the argument's tangent, summed over the
arguments, where the pullback multiplies the incoming gradient), ``math`` from the scalar templates
(``rules.scalar``), operators on numbers and arrays from ``rules.operators.NUMERIC_GRADS``.  Linear
functions (reshapes, reductions, ``real``) apply themselves to the tangent; bilinear ones (``dot``, ``@``,
``outer``, ``cross``) take the product rule; data structures carry their tangents alongside.  A primitive with a
reverse rule and no forward rule is handled by ``tangent.transposed``.
"""
from __future__ import annotations

import builtins as _b
import dataclasses
import functools
import inspect
import math as _m
import numbers
import operator
import types

import numpy as np
import scipy.linalg as sl

from ....errors import UnsupportedError
from ..lower import as_sequence, called_with, keywords_of
from ..cotangent import dense as dense_cotangent
from ..ir import extends_list, is_array, memory_of, writable_array
from ..runtime import HELPERS as _REVERSE_HELPERS
from ..runtime import ARRAY_TYPES, LINEAR, asarray, check_keywords, field_grad, make_like
from ..runtime import acc as tadd
from ..tangent import (JVP, JVP_METHOD_RULES, JVP_RULES, JVPkw, JVPm, dense, densify, mutable, tangent_of,
                       write_attr, zero)
from ..source import generated
from .builtins import dict_items, kept_by, ranking
from .complexes import CMATH, sign_tangent
from .layout import concatenator_getitem
from .linalg import (check_pinv, check_real, check_slogdet, check_svd, check_svdvals_tangent, cofactor,
                     cofactor_derivative, eigenvector_factor, halved_lower, reads_upper, svd_factor, symmetric_tangent)
from .numpy import (FUNCTION_METHODS, PARTIALS_BINARY, PARTIALS_UNARY, clip_masks, holds_array_type, norm_partials,
                    norm_power, operand, product, stacked, times)
from .operators import DUNDER, NUMERIC_GRADS, PYIOP, PYOP, TEMPLATE_HELPERS, is_numeric, numpy_with_sequence
from .math import LONGER_FORMS
from .scalar import INLINE_CALLS
from .scipy_linalg import factor_of, lu_parts, row_order, transposed, triangle
from .structures import ARRAY_CONSTANT_ATTRIBUTES, AxisConcatenator, flat_places, getter, index_grad


def _fit(t, y):
    """Tangent ``t`` broadcast to the shape of an array result ``y`` (a number operand's tangent; of a batch's
    per example, a stand-in's as its value's)."""
    if is_array(y) and t is not None and np.shape(t) != y.shape:
        return np.broadcast_to(t, y.shape).astype(np.result_type(t, float))
    return t


def _fresh(t, y):
    """Tangent ``t`` of an operand as the tangent of ``y``, a new array of the operand's values (``x + 0.0``):
    a copy (broadcast to ``y``'s shape), so that no other array has it as its tangent."""
    if is_array(t) and t.shape == np.shape(y):   # (a stand-in of a recording's too)
        return t.copy()
    return _fit(t, y)


# -- elementwise: from the partial derivatives of the reverse rules ------------------------------------------
def unary_jvp(f, d):
    mul = product(f)

    def rule(args, ts, dtype=None):   # (the other keywords of a ufunc, where= ..., are refused)
        x, *rest = args
        x, t = operand(x), operand_tangent(ts[0], x)
        y = f(x, *rest) if dtype is None else f(x, *rest, dtype=dtype)
        return y, None if t is None else mul(t, d(x, y))
    return rule


def binary_jvp(f, d):
    mul = product(f)

    def rule(args, ts, dtype=None):
        ts = tuple(map(operand_tangent, ts, args))
        a, b = map(operand, args)
        y = f(a, b) if dtype is None else f(a, b, dtype=dtype)
        if ts[0] is None and ts[1] is None:
            return y, None
        pa, pb = d(a, b, y)
        ty = None
        if ts[0] is not None:
            ty = mul(ts[0], pa)
        if ts[1] is not None:
            ty = tadd(ty, mul(ts[1], pb))
        return y, _fit(ty, y)
    return rule


def _from_template(f, spec):
    """The JVP of a ``math`` function from its scalar template (``{dy}`` becomes each tangent); of its longer
    form (``math.log(x, base)``), the forward mode of its code."""
    n = max(spec.nargs)
    names = [f"a{i}" for i in range(n)]
    body = [f"def jvp_{spec.name}(args, ts):"]
    if f in LONGER_FORMS:
        body += [f"    if len(args) > {n}:", "        return JVP(_longer, None, args, ts)"]
    body += [f"    {', '.join(names)}, = args", f"    y = f({', '.join(names)})", "    ty = None"]
    for i, t in enumerate(spec.derivs):
        body += [f"    if ts[{i}] is not None:",
                 f"        ty = _tadd(ty, {t.format(*names, dy=f'ts[{i}]', y='y', m='_m')})"]
    src = "\n".join(body + ["    return y, ty"]) + "\n"
    return generated(f"jvp_{spec.name}", src, f"<tensorlang.ad jvp {spec.name}>",
                     {"f": f, "_m": _m, "_tadd": tadd, "JVP": JVP, "_longer": LONGER_FORMS.get(f), **TEMPLATE_HELPERS})


# -- operators on values of unknown kind ------------------------------------------------------------------------
def _binop(op):
    pyop, grads, name = PYOP[op], NUMERIC_GRADS.get(op), DUNDER[op]

    def rule(args, ts):
        # an indexed cotangent (in the adjoint that forward over reverse runs) is the array it stands for
        a, b = map(dense_cotangent, args)
        ta, tb = map(dense_cotangent, ts)
        if is_numeric(a) and is_numeric(b):
            y = pyop(a, b)
            if op == "@":
                return y, _bilinear_tangent(pyop, a, b, ta, tb)
            if grads is None or ta is None and tb is None:
                return y, None
            ty = None
            if ta is not None:
                ty = grads(ta, a, b, y)[0]
            if tb is not None:
                ty = tadd(ty, grads(tb, a, b, y)[1])
            return y, _fit(ty, y)
        return _dunder(op, name, pyop, a, b, ta, tb)
    return rule


def _dunder(op, name, pyop, a, b, ta, tb):
    m = getattr(type(a), f"__{name}__", None)
    if isinstance(m, types.FunctionType):
        y, ty = JVP(m, None, (a, b), (ta, tb))
        if y is not NotImplemented:
            return y, ty
    m = getattr(type(b), f"__r{name}__", None)
    if isinstance(m, types.FunctionType):
        y, ty = JVP(m, None, (b, a), (tb, ta))
        if y is not NotImplemented:
            return y, ty
    y = pyop(a, b)
    if numpy_with_sequence(y, a, b):   # (a list or tuple taken as np.asarray takes it)
        return _binop(op)(tuple(map(asarray, (a, b))), (operand_tangent(ta, a), operand_tangent(tb, b)))
    if op == "+" and isinstance(a, (list, tuple)):
        seq = type(a) if type(a) in (list, tuple) else list
        return y, seq(_seq(ta, a)) + seq(_seq(tb, b))
    if op == "*" and isinstance(a, (list, tuple)) and isinstance(b, int):
        return y, None if ta is None else ta * b
    if op == "*" and isinstance(b, (list, tuple)) and isinstance(a, int):
        return y, None if tb is None else a * tb
    if op == "|" and isinstance(a, dict) and isinstance(b, dict):   # a merge: b's keys win
        ty = {k: t for k, t in (ta or {}).items() if k not in b}
        ty.update(tb or {})
        return y, ty
    if ta is not None or tb is not None:
        raise UnsupportedError(f"tensorlang.ad.jvp has no forward rule for {type(a).__name__} {op} "
                               f"{type(b).__name__}")
    return y, None


def _seq(t, x):
    return [None] * len(x) if t is None else list(t)


def operand_tangent(t, x):
    """The tangent ``t`` of an operand ``x`` of an arithmetic or bilinear primitive as an operand: None where
    it is zero by its structure (a list of numbers without tangents), a list's item by item, zeros for None."""
    if not isinstance(x, (list, tuple)) or t is None:
        return t
    return np.asarray(densify(t, x)) if any(ti is not None for ti in np.ravel(np.array(t, dtype=object))) else None


def _bilinear_tangent(f, a, b, ta, tb):
    ta, tb = operand_tangent(ta, a), operand_tangent(tb, b)
    ty = None if ta is None else f(ta, b)
    return ty if tb is None else tadd(ty, f(a, tb))


def _bilinear(f):
    def rule(args, ts):
        a, b = args
        return f(a, b), _bilinear_tangent(f, a, b, *ts)
    return rule


def _cross(args, ts, **kw):
    """``np.cross`` (its axes as keywords), bilinear: the product rule, one pass over the vectors."""
    a, b = args
    f = functools.partial(np.cross, **kw)
    return f(a, b), _bilinear_tangent(f, a, b, *ts)


def _unary_op(op, x, t):
    x, t = dense_cotangent(x), dense_cotangent(t)
    if op in ("not", "~"):
        return (not x) if op == "not" else ~x, None
    if is_numeric(x):
        return (-x, None if t is None else -t) if op == "-" else (+x, None if t is None else +t)   # (new arrays)
    return JVP(getattr(type(x), "__neg__" if op == "-" else "__pos__"), None, (x,), (t,))


# -- linear functions: the function applied to the tangent ---------------------------------------------------------
def _linear(f):
    def rule(args, ts, **kw):
        if kw.get("order", "C") not in ("C", "F"):   # (reshape, ravel: 'A' and 'K' follow the memory layout)
            raise UnsupportedError(f"tensorlang.ad differentiates np.{f.__name__} with order 'C' or 'F'")
        x, *rest = args
        y = f(x, *rest, **kw)
        return y, None if ts[0] is None else f(ts[0], *rest, **kw)
    return rule


def _sum_np(args, ts, tkw=None, **kw):
    """``np.sum``: linear in the array and ``initial`` (added to every sum) together (``tkw``: the keyword
    arguments' tangents)."""
    if not args:   # np.sum(a=x)
        args, ts = (kw.pop("a"),), ((tkw or {}).get("a"),)
    y = np.sum(*args, **kw)
    tinitial = ts[5] if len(ts) > 5 else (tkw or {}).get("initial")
    if ts[0] is None and tinitial is None:
        return y, None
    tinitial = 0 if tinitial is None else tinitial
    targs = (dense(ts[0], args[0]), *args[1:5], tinitial, *args[6:])[:len(args)]
    return y, np.sum(*targs, **({**kw, "initial": tinitial} if "initial" in kw else kw))


_sum_np.keyword_tangents = True


def _extremum(f):
    """The tangent of ``max``/``min``: the first extremal entry's over the whole array, the average of
    the tied entries' along an axis (as the reverse rule shares the gradient); ``initial``'s where it is
    beyond every entry."""
    def rule(args, ts, tkw=None, axis=None, out=None, keepdims=False, initial=np._NoValue):
        x = asarray(args[0])
        axis, keepdims = (*args[1:2], axis)[0], (*args[3:4], keepdims)[0]   # (also by position: x.max(0))
        initial = (*args[4:5], initial)[0]
        y = f(x, axis=axis, keepdims=keepdims, initial=initial)
        t, ti = ts[0], ts[4] if len(ts) > 4 else (tkw or {}).get("initial")
        if t is None and ti is None:
            return y, None
        t = np.broadcast_to(np.zeros(x.shape) if t is None else t, x.shape)
        if axis is None and type(x) in ARRAY_TYPES:   # (a batch: the first extremal entry of each example's)
            hit = np.ravel(x) == y
            first = (np.arange(x.size) == np.argmax(hit)) & hit
            ty, won = np.sum(np.where(first, np.ravel(t), 0.0)), ~np.any(hit)
        elif axis is None:
            won = initial is not np._NoValue and not np.any(x == y)
            ty = np.zeros(np.shape(y), np.result_type(t, 0.0)) if won else np.reshape(t.flat[np.argmax(x == y)],
                                                                                    np.shape(y))
        else:
            ye = y if keepdims else np.expand_dims(y, axis)
            mask = (x == ye).astype(float)
            hits = np.sum(mask, axis=axis, keepdims=keepdims)
            ty, won = np.sum(mask * t, axis=axis, keepdims=keepdims) / np.maximum(hits, 1), hits == 0
        return y, ty if ti is None else ty + np.where(won, ti, 0.0)
    rule.keyword_tangents = True
    return rule


def _stack_like(f):
    """``np.stack``/``np.concatenate``...: the tangents stacked as the arrays are (given by position or as
    ``arrays=``, whose tangent is then in ``tkw``)."""
    def rule(args, ts, tkw=None, **kw):
        xs, tx = (args[0], ts[0]) if args else (kw.pop("arrays"), (tkw or {}).get("arrays"))
        axis = args[1] if len(args) > 1 else kw.pop("axis", 0)
        y = f(xs, axis, **kw)
        if tx is None:
            return y, None
        return y, f([densify(t, np.asarray(x, dtype=float) if np.ndim(x) == 0 and not hasattr(x, "dtype") else x)
                     for t, x in zip(tx, xs)], axis)
    rule.keyword_tangents = True
    return rule


def _where(args, ts):
    if len(args) == 1:   # the indices of the true entries
        return np.where(args[0]), None
    c, a, b = args
    y = np.where(c, a, b)
    if ts[1] is None and ts[2] is None:
        return y, None
    return y, _fit(np.where(c, dense(ts[1], a), dense(ts[2], b)), y)


def _clip(args, ts, tkw=None, a_min=None, a_max=None, min=None, max=None):
    """``np.clip``: the tangent of whichever of the array and the bounds (by position or by any of NumPy's
    keyword names, ``tkw`` their tangents) each entry takes."""
    x, lo, hi = (*args, None, None)[:3]
    tkw = tkw or {}
    tx, tlo, thi = (*ts, None, None)[:3]
    tlo = tlo if lo is not None else tkw.get("a_min") if a_min is not None else tkw.get("min")
    thi = thi if hi is not None else tkw.get("a_max") if a_max is not None else tkw.get("max")
    lo = lo if lo is not None else a_min if a_min is not None else min
    hi = hi if hi is not None else a_max if a_max is not None else max
    y = np.clip(x, lo, hi)
    ty = None
    for t, mask in zip((tx, tlo, thi), clip_masks(x, lo, hi)):
        ty = tadd(ty, None if t is None else times(t, mask))
    return y, ty


_clip.keyword_tangents = True


def _array(f):
    """``np.array`` and ``np.asarray`` (which returns an array argument itself: ``JVP`` gives it its own
    tangent then)."""
    def rule(args, ts, dtype=None):
        if type(args[0]) in ARRAY_TYPES:   # (a batch of ad.vmap: an array already, its tangent too)
            y = asarray(args[0], dtype)
            y = y.copy() if f is np.array and y is args[0] else y
            return y, None if ts[0] is None or y.dtype.kind not in "fc" else asarray(ts[0], y.dtype)
        if holds_array_type(args[0]):   # (lists of stand-ins of a recording: stacked, their tangents too)
            y = stacked(args[0]) if dtype is None else stacked(args[0]).astype(dtype)
            if ts[0] is None or y.dtype.kind not in "fc":
                return y, None
            return y, stacked(densify(ts[0], args[0])).astype(np.result_type(y.dtype, float))
        return _array_tangent(f(*args) if dtype is None else f(*args, dtype=dtype), args, ts)
    return rule


def _array_tangent(y, args, ts):
    xs = args[0]
    if ts[0] is None or y.dtype.kind not in "fcO":   # (an integer array has no tangent; an object array holds
        return y, None                              # the numbers, its tangent theirs)
    return y, np.array(densify(ts[0], xs), dtype=object if y.dtype.kind == "O" else np.result_type(y.dtype, float))


def _options(args, *keywords):
    """The options after a forward rule's first argument, as NumPy takes them: those passed by position,
    then, for the rest, ``keywords`` (the values the rule's keyword parameters got)."""
    return (*args[1:], *keywords[len(args) - 1:])


def _norm(args, ts, ord=None, axis=None, keepdims=False):
    x = asarray(args[0])
    ord, axis, keepdims = _options(args, ord, axis, keepdims)
    if keepdims:
        raise UnsupportedError("tensorlang.ad differentiates np.linalg.norm without keepdims")
    p, axes = norm_power(x, ord, axis)
    y = np.linalg.norm(x, ord, axis)
    if ts[0] is None:
        return y, None
    return y, np.sum(np.real(np.conj(norm_partials(x, y, p, axes)) * ts[0]), axis=axes)


# -- numpy.linalg: d inv(A) = -inv(A) dA inv(A), d log|det A| = tr(inv(A) dA), batched over leading axes --------
def _mT(x):
    return np.swapaxes(x, -1, -2)


def _dlogdet(a, t):
    """``tr(inv(A) dA)`` per matrix of a stack (the tangent of ``log|det A|``)."""
    return np.sum(_mT(np.linalg.inv(a)) * t, axis=(-1, -2))


def _inv(args, ts):
    y = np.linalg.inv(args[0])
    return y, None if ts[0] is None else -y @ ts[0] @ y


def _det(args, ts):
    y = np.linalg.det(args[0])
    return y, None if ts[0] is None else np.sum(cofactor(args[0]) * ts[0], axis=(-1, -2))


def _cofactor(args, ts):
    return cofactor(args[0]), None if ts[0] is None else cofactor_derivative(args[0], ts[0])


def _slogdet(args, ts):
    """The sign of a real determinant is constant where it is differentiable: its tangent is zero (None);
    a complex one moves with the phase, ``i Im(tr(inv(A) dA))``."""
    a, t = args[0], ts[0]
    y = np.linalg.slogdet(a)
    check_slogdet(y[0])
    if t is None:
        return y, None
    d = _dlogdet(a, t)
    if not np.iscomplexobj(d):
        return y, type(y)(None, d)
    return y, type(y)(y[0] * 1j * np.imag(d), np.real(d))


def _solve(args, ts):
    a, b = args
    y = np.linalg.solve(a, b)
    if ts[0] is None and ts[1] is None:
        return y, None
    rhs = dense(ts[1], y) if ts[1] is not None else 0 * y
    if ts[0] is not None:
        rhs = rhs - (ts[0] @ y[..., None])[..., 0] if np.ndim(b) == 1 else rhs - ts[0] @ y
    if np.ndim(b) == 1:   # one right-hand side (for every matrix of a stack): a column
        return y, np.linalg.solve(a, np.broadcast_to(rhs, y.shape)[..., None])[..., 0]
    return y, np.linalg.solve(a, rhs)


def _cholesky(args, ts, upper=False):
    """``dL = L Phi(L^-1 dA L^-T)`` with dA the tangent of the symmetric matrix the triangle read spells."""
    a, t = args[0], ts[0]
    check_real("cholesky", a)
    y = np.linalg.cholesky(a, upper=True) if upper else np.linalg.cholesky(a)
    if t is None:
        return y, None
    lower = _mT(y) if upper else y
    inv = np.linalg.inv(lower)
    dl = lower @ halved_lower(inv @ symmetric_tangent(t, upper) @ _mT(inv))
    return y, _mT(dl) if upper else dl


def _symmetric_eigen(f):
    """The forward rule of ``eigh`` or ``eigvalsh``: ``dw = diag(V^T dA V)`` and, for ``eigh``,
    ``dV = V (F * (V^T dA V))`` (``eigenvector_factor``)."""
    def rule(args, ts, UPLO="L"):
        a, t = args[0], ts[0]
        UPLO, = _options(args, UPLO)
        check_real(f.__name__, a)
        upper = reads_upper(UPLO)
        y = f(a, UPLO)
        if t is None:
            return y, None
        w, v = y if f is np.linalg.eigh else np.linalg.eigh(a, UPLO)
        x = _mT(v) @ symmetric_tangent(t, upper) @ v
        dw = np.diagonal(x, axis1=-2, axis2=-1)
        return y, type(y)(dw, v @ (eigenvector_factor(w) * x)) if f is np.linalg.eigh else dw
    return rule


def _svd(args, ts, full_matrices=True, compute_uv=True, hermitian=False):
    """``ds = diag(U^T dA V)``; with ``dP = U^T dA V`` and ``F = svd_factor(s)``,
    ``dU = U (F * (dP S + S dP^T)) + (I - U U^T) dA V S^-1`` and
    ``dV = V (F * (S dP + dP^T S)) + (I - V V^T) dA^T U S^-1``."""
    a, t = args[0], ts[0]
    full_matrices, compute_uv, hermitian = _options(args, full_matrices, compute_uv, hermitian)
    check_svd(a, full_matrices and compute_uv, hermitian)
    y = np.linalg.svd(a, full_matrices, compute_uv)
    if t is None:
        return y, None
    u, s, vh = y if compute_uv else np.linalg.svd(a, full_matrices=False)
    v = _mT(vh)
    dp = _mT(u) @ t @ v
    ds = np.diagonal(dp, axis1=-2, axis2=-1)
    if not compute_uv:
        return y, ds
    f = svd_factor(s)
    row, col = np.expand_dims(s, -1), np.expand_dims(s, -2)
    du = u @ (f * (dp * col + row * _mT(dp))) + (t @ v - u @ dp) / col
    dv = v @ (f * (row * dp + _mT(dp) * col)) + (_mT(t) @ u - v @ _mT(dp)) / col
    return y, type(y)(du, ds, _mT(dv))


def _svdvals(args, ts):
    """``ds = diag(U^T dA V)``."""
    a, t = args[0], ts[0]
    check_real("svdvals", a)
    y = np.linalg.svdvals(a)
    if t is None:
        return y, None
    check_svdvals_tangent(y)
    u, _, vh = np.linalg.svd(a, full_matrices=False)
    return y, np.sum(u * (t @ _mT(vh)), axis=-2)


def _pinv(args, ts, rcond=None, hermitian=False):
    """``dY = -Y dA Y + Y Y^T dA^T (I - A Y) + (I - Y A) dA^T Y^T Y`` (a matrix of full rank)."""
    a, t = args[0], ts[0]
    rcond, hermitian = _options(args, rcond, hermitian)
    check_pinv(a, rcond, hermitian)
    y = np.linalg.pinv(a)   # (every singular value is above the cutoff: the same bits whatever rcond is)
    if t is None:
        return y, None
    tt, yt = _mT(t), _mT(y)
    return y, -y @ t @ y + (y @ yt) @ (tt - (tt @ a) @ y) + (tt - y @ (a @ tt)) @ (yt @ y)


# -- scipy.linalg: d op(A)^-1 b = op(A)^-1 (db - op(dA) y), the factorisations' tangents -----------------------
def _triangular(args, ts, trans=0, lower=False, unit_diagonal=False, overwrite_b=False, check_finite=True):
    a, b = args[:2]
    trans, lower, unit_diagonal = _options(args[1:], trans, lower, unit_diagonal)
    t = transposed("solve_triangular", a, b, trans)
    y = sl.solve_triangular(a, b, trans, lower, unit_diagonal)
    if ts[0] is None and ts[1] is None:
        return y, None
    rhs = dense(ts[1], y)
    if ts[0] is not None:
        da = triangle(ts[0], lower, unit_diagonal)
        rhs = rhs - (_mT(da) if t else da) @ y
    return y, sl.solve_triangular(a, np.broadcast_to(rhs, y.shape), trans, lower, unit_diagonal)


def _cho_factor(args, ts, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor's tangent in the triangle read, ``A``'s own in the other."""
    a, t = args[0], ts[0]
    lower, = _options(args, lower)
    check_real("cho_factor", a, "scipy.linalg")
    y = sl.cho_factor(a, lower)
    if t is None:
        return y, None
    factor = factor_of(y[0], lower)
    inv = np.linalg.inv(factor)
    dl = factor @ halved_lower(inv @ symmetric_tangent(t, not lower) @ _mT(inv))
    return y, (dl + np.triu(t, 1) if lower else _mT(dl) + np.tril(t, -1), None)


def _factor_tangent(ts):
    """The tangent of a factorisation's matrix, the first item of its pair (None for none)."""
    return None if ts[0] is None else ts[0][0]


def _cho_solve(args, ts, overwrite_b=False, check_finite=True):
    """``dA = dL L^T + L dL^T`` (``dU^T U + U^T dU``), ``dy = A^-1 (db - dA y)``."""
    (c, lower), b = args[:2]
    check_real("cho_solve", c, "scipy.linalg")
    check_real("cho_solve", b, "scipy.linalg")
    y = sl.cho_solve((c, lower), b)
    tc = _factor_tangent(ts)
    if tc is None and ts[1] is None:
        return y, None
    rhs = dense(ts[1], y)
    if tc is not None:
        l, dl = factor_of(c, lower), factor_of(tc, lower)
        rhs = rhs - (dl @ (_mT(l) @ y) + l @ (_mT(dl) @ y))
    return y, sl.cho_solve((c, lower), np.broadcast_to(rhs, y.shape))


def _lu_factor(args, ts, overwrite_a=False, check_finite=True):
    """With ``X = L^-1 dA[order] U^-1``: ``dL = L tril(X, -1)``, ``dU = triu(X) U``."""
    a, t = args[0], ts[0]
    check_real("lu_factor", a, "scipy.linalg")
    y = sl.lu_factor(a)
    if t is None:
        return y, None
    l, u = lu_parts(y[0])
    w = sl.solve_triangular(l, t[row_order(y[1])], 0, True, True)
    x = _mT(sl.solve_triangular(u, _mT(w), 1, False))
    return y, (l @ np.tril(x, -1) + np.triu(x) @ u, None)


def _lu_solve(args, ts, trans=0, overwrite_b=False, check_finite=True):
    """``dA[order] = dL U + L dU``, ``dy = op(A)^-1 (db - op(dA) y)``."""
    (lu, piv), b = args[:2]
    trans, = _options(args[1:], trans)
    t = transposed("lu_solve", lu, b, trans)
    y = sl.lu_solve((lu, piv), b, trans)
    tlu = _factor_tangent(ts)
    if tlu is None and ts[1] is None:
        return y, None
    rhs = dense(ts[1], y)
    if tlu is not None:
        l, u = lu_parts(lu)
        da = np.empty_like(l)
        da[row_order(piv)] = np.tril(tlu, -1) @ u + l @ np.triu(tlu)
        rhs = rhs - (_mT(da) if t else da) @ y
    return y, sl.lu_solve((lu, piv), np.broadcast_to(rhs, y.shape), trans)


def _lyapunov(args, ts):
    """``A dX + dX A^T = dQ - dA X - X dA^T``."""
    a, q = args
    check_real("solve_continuous_lyapunov", a, "scipy.linalg")
    check_real("solve_continuous_lyapunov", q, "scipy.linalg")
    y = sl.solve_continuous_lyapunov(a, q)
    if ts[0] is None and ts[1] is None:
        return y, None
    rhs = dense(ts[1], y)
    if ts[0] is not None:
        rhs = rhs - ts[0] @ y - y @ _mT(ts[0])
    return y, sl.solve_continuous_lyapunov(a, rhs)


# -- builtins ------------------------------------------------------------------------------------------------------
def _sum(args, ts):
    xs = args[0]
    start = args[1] if len(args) > 1 else 0
    y = _b.sum(xs, start)
    t = ts[1] if len(ts) > 1 else None
    if isinstance(y, (list, tuple)):   # a concatenation (``sum(rows, [])``): the tangents concatenated
        return y, type(y)(_b.sum((_seq(ti, x) for ti, x in zip(ts[0] or [None] * len(xs), xs)), _seq(t, start)))
    if type(xs) is np.ndarray:
        return y, _fit(tadd(t, None if ts[0] is None else _b.sum(ts[0])), y)
    for ti in (ts[0] or ()):
        t = tadd(t, ti)
    return y, _fit(t, y)


def _pick(pick):
    """The forward rule of ``max``/``min``; ``key`` only chooses (the tangent of a ``key`` closure, ``tkw``, is none of
    the result's)."""
    def rule(args, ts, tkw=None, key=None):
        seq, tseq = (args[0], ts[0]) if len(args) == 1 else (args, ts)
        items = list(seq)
        i = pick(range(len(items)), key=ranking(items, key))
        return items[i], None if tseq is None else tseq[i]
    rule.keyword_tangents = True
    return rule


def _abs(args, ts):
    x, = args
    m = getattr(type(x), "__abs__", None)
    if isinstance(m, types.FunctionType) and type(x) not in ARRAY_TYPES:   # (a class's own __abs__; a batch's is np.abs)
        return JVP(m, None, (x,), ts)
    if isinstance(x, complex) or np.iscomplexobj(x):
        y = np.abs(x)
        return y, None if ts[0] is None else np.real(np.conj(x) * ts[0]) / np.where(y == 0, 1, y)
    return abs(x), None if ts[0] is None else ts[0] * np.sign(x)


def _np_abs(args, ts):
    """``np.abs``: ``abs`` of the array a list or tuple stands for."""
    return _abs((operand(args[0]),), (operand_tangent(ts[0], args[0]),))


def _float(args, ts):
    x, t = args[0], ts[0]
    if type(x) in ARRAY_TYPES:   # (as the reverse rule: a batch, a recording's stand-in, its one entry as a 0-d array)
        return np.reshape(x, ()), None if t is None else np.reshape(t, ())
    return float(x), None if t is None else float(t)


def _container(kind):
    """The forward rule of ``list(xs)`` or ``tuple(xs)``: the items' tangents (a dict's keys have none)."""
    def rule(args, ts):
        xs = args[0] if args else ()
        y = kind(xs)
        return y, None if not args or ts[0] is None or isinstance(xs, dict) else kind(_seq(ts[0], xs))
    return rule


def _zip(args, ts, strict=False):
    y = list(zip(*args, strict=strict))
    tss = [_seq(t, s) for t, s in zip(ts, args)]
    return y, [tuple(col) for col in zip(*tss)]


def _enumerate(args, ts):
    xs = args[0]
    start = args[1] if len(args) > 1 else 0
    return list(enumerate(xs, start)), [(None, t) for t in _seq(ts[0], xs)]


def _map(args, ts):
    f, *seqs = args
    results = [JVP(f, ts[0], xs, txs) for xs, txs in zip(zip(*seqs), zip(*(_seq(t, s) for t, s in zip(ts[1:], seqs))))]
    return [r[0] for r in results], [r[1] for r in results]


def _called_with(args, ts):
    """``called_with(f, args, named, opts)``: JVP of ``f`` as any call, the tangents of its arguments those of the
    tuple's items and the dicts' values."""
    f, pos, named, opts = args
    tf, tpos, tnamed, topts = ts
    kw = keywords_of(f, named, opts)
    tpos = (None,) * len(pos) if tpos is None else tuple(tpos)
    if not kw:
        return JVP(f, tf, pos, tpos)
    tkw = {**(tnamed or {}), **(topts or {})}
    return JVPkw(tuple(kw), f, tf, (*pos, *kw.values()), (*tpos, *map(tkw.get, kw)))


def _reversed(args, ts):
    return list(reversed(args[0])), list(reversed(_seq(ts[0], args[0])))


def _dict(args, ts, tkw=None, **kw):
    """``dict(pairs or mapping, **kw)``: a key's tangent is that of the value it keeps."""
    items = dict_items(args[0]) if args else []
    tsrc = None if not args else ts[0]
    if isinstance(tsrc, dict):
        titems = [tsrc.get(k) for k, _ in items]
    else:
        titems = [None if t is None else t[1] for t in _seq(tsrc, items)]
    t = {k: tv for (k, _), tv in zip(items, titems)}
    t.update(tkw or {})
    return dict(items, **kw), t if any(v is not None for v in t.values()) else None


_dict.keyword_tangents = True


def _filter(args, ts):
    f, xs = args
    items, t = list(xs), _seq(ts[1], list(xs))
    kept = kept_by(f, items)
    return [items[i] for i in kept], [t[i] for i in kept]


def _sorted(args, ts, tkw=None, key=None, reverse=False):
    """``sorted``: ``key`` only chooses the order (the tangent of a ``key`` closure, ``tkw``, is none of the
    result's)."""
    items = list(args[0])
    order = sorted(range(len(items)), key=(lambda i: items[i]) if key is None else (lambda i: key(items[i])),
                   reverse=reverse)
    t = _seq(ts[0], items)
    return [items[i] for i in order], [t[i] for i in order]


_sorted.keyword_tangents = True


def _as_sequence(args, ts):
    y = as_sequence(args[0])
    if type(args[0]) is np.flatiter:   # (x.flat: its tangent the tangent's flat iterator)
        return y, None if ts[0] is None else as_sequence(ts[0])
    if y is args[0] or ts[0] is None or type(args[0]) is dict:   # (a dict's keys, which it iterates, have none)
        return y, None if type(args[0]) is dict else ts[0]
    if type(args[0]) not in (list, tuple) and type(args[0]) not in ARRAY_TYPES:
        raise UnsupportedError(f"tensorlang.ad.jvp does not differentiate iterating over a "
                               f"{type(args[0]).__qualname__}: iterate over a list or an array")
    return y, list(ts[0])


# -- data structures -----------------------------------------------------------------------------------------------
def getitem(obj, tobj, idx, tidx=None):
    """``obj[idx]`` and its tangent (``tidx``: the index's, for ``np.r_[x, a]``, whose index holds entries)."""
    t = type(obj)
    if isinstance(obj, AxisConcatenator):
        return concatenator_getitem(obj, idx)[0], (None if tidx is None else
                                                   LINEAR[concatenator_getitem]((obj, idx), {}, (None, tidx)))
    if t in (list, tuple, dict, np.ndarray) or t in ARRAY_TYPES or isinstance(obj, tuple):
        tobj = tangent_of(obj, tobj)
        if tobj is None:
            return obj[idx], None
        return obj[idx], (tobj.get(idx) if t is dict else tobj[idx])
    if t is np.flatiter:   # x.flat[i]: the same entries of x's tangent, tobj its flat iterator
        return obj[idx], None if tobj is None else tobj[idx]
    m = getattr(t, "__getitem__", None)
    if isinstance(m, types.FunctionType):
        return JVP(m, None, (obj, idx), (tangent_of(obj, tobj), tidx))
    if tangent_of(obj, tobj) is not None:
        raise UnsupportedError(f"tensorlang.ad.jvp has no forward rule for reading an item of a {t.__name__}")
    return obj[idx], None


def write_item(obj, tobj, idx, val, tval):
    """The tangent of ``obj[idx] = val`` written into ``obj``'s tangent (before the write itself); returns
    that tangent."""
    tl = mutable(obj, tobj)
    if is_array(obj):
        tl[idx] = 0 if tval is None else tval
    elif type(obj) is list and type(idx) is slice and tval is None:
        tl[idx] = [None] * len(val)
    else:
        tl[idx] = tval
    return tl


def setitem(obj, tobj, idx, val, tval):
    t = type(obj)
    if t in (list, dict) or is_array(obj):
        tl = write_item(obj, tobj, idx, val, tval)
        obj[idx] = val
        return tl
    if t is np.flatiter:   # x.flat[i] = v: a write into x at the places the flat index names (no view of x)
        base, places = flat_places(obj, idx)
        tl = setitem(base, None if tobj is None else tobj.base, places, val, tval)
        return None if tl is None else tl.flat
    m = getattr(t, "__setitem__", None)
    if isinstance(m, types.FunctionType):
        JVP(m, None, (obj, idx, val), (tangent_of(obj, tobj), None, tval))
        return tangent_of(obj, tobj)
    if tval is not None:
        raise UnsupportedError(f"tensorlang.ad.jvp has no forward rule for writing into a {t.__name__}")
    obj[idx] = val
    return tobj


def getattr_(obj, tobj, name):
    """``obj.name`` and its tangent; a bound method's (``x.sum``) is ``SimpleNamespace(__self__=tobj)``, as
    reverse mode's gradient of one, which calling it reads."""
    t = type(obj)
    if t is np.ndarray or isinstance(obj, np.generic) or t in ARRAY_TYPES and inspect.getattr_static(
            obj, name, getattr_) is getattr_:   # (a NumPy scalar's as a 0-d array's; a stand-in's: its value's)
        y = getattr(obj, name)
        tobj = tangent_of(obj, tobj)
        if tobj is not None and name in ("T", "mT", "real", "imag", "flat"):
            return y, getattr(asarray(tobj), name)
        if tobj is not None and name not in ARRAY_CONSTANT_ATTRIBUTES and getattr(y, "__self__", None) is not obj \
                and type(memory_of(obj)) is np.ndarray and isinstance(y, (np.ndarray, np.generic, float, complex)) \
                and np.result_type(y).kind in "fc":
            # (x.base: a tangent forward mode cannot give)
            raise UnsupportedError(f"tensorlang.ad.jvp does not differentiate the attribute {name} of an array")
        return y, _bound_tangent(y, obj, tobj)
    fget = getter(obj, name)
    if fget is not None:
        return JVP(fget, None, (obj,), (tangent_of(obj, tobj),))
    fallback = getattr(t, "__getattr__", None)
    if isinstance(fallback, types.FunctionType) and inspect.getattr_static(obj, name, getattr_) is getattr_:
        return JVP(fallback, None, (obj, name), (tangent_of(obj, tobj), None))   # the class's __getattr__
    y = getattr(obj, name)
    if isinstance(obj, types.ModuleType) or callable(y) and not isinstance(y, types.FunctionType):
        return y, _bound_tangent(y, obj, tangent_of(obj, tobj))
    tobj = tangent_of(obj, tobj)
    return y, None if tobj is None else getattr(tobj, name, None)


def _bound_tangent(y, obj, tobj):
    """The tangent of attribute ``y`` of ``obj`` that is a method bound to it: ``obj``'s tangent as its
    ``__self__`` (None for other attributes, and where ``obj`` has none)."""
    if tobj is None or getattr(y, "__self__", None) is not obj or isinstance(obj, types.ModuleType):
        return None
    return types.SimpleNamespace(__self__=tobj)


def _replace(args, ts, tkw=None, **changes):
    """``dataclasses.replace(obj, **changes)`` and its tangent: ``obj``'s tangent with the replaced fields'
    tangents in their places."""
    (obj,), (tobj,) = args, ts
    y = dataclasses.replace(obj, **changes)
    tobj, tkw = tangent_of(obj, tobj), tkw or {}
    fields = {f.name: tkw.get(f.name) if f.name in changes else getattr(tobj, f.name, None)
              for f in dataclasses.fields(obj)}
    return y, None if all(t is None for t in fields.values()) else make_like(y, fields)


_replace.keyword_tangents = True


def setattr_(obj, tobj, name, val, tval):
    t = type(obj)
    static = getattr(t, name, None)
    if isinstance(t.__setattr__, types.FunctionType):   # the class's own __setattr__, or a property's setter
        JVP(t.__setattr__, None, (obj, name, val), (tangent_of(obj, tobj), None, tval))
        return tangent_of(obj, tobj)
    if isinstance(static, property) and isinstance(static.fset, types.FunctionType):
        JVP(static.fset, None, (obj, val), (tangent_of(obj, tobj), tval))
        return tangent_of(obj, tobj)
    tl = write_attr(obj, tobj, name, tval)
    setattr(obj, name, val)
    return tl


def _getattr_call(args, ts):
    """The builtin ``getattr(obj, name[, default])``."""
    if len(args) > 2 and not hasattr(args[0], args[1]):
        return args[2], ts[2]
    return getattr_(args[0], ts[0], args[1])


def _setattr_call(args, ts):
    setattr_(args[0], ts[0], args[1], args[2], ts[2])
    return None, None


def closure_tangent(names, ts, rec):
    """The tangent of a closure: its captured variables' tangents (a recursive one holds itself)."""
    fields = {n: t for n, t in zip(names, ts) if t is not None}
    if not fields and rec is None:
        return None
    ns = types.SimpleNamespace(**fields)
    if rec is not None:
        setattr(ns, rec, ns)
    return ns


# -- methods ---------------------------------------------------------------------------------------------------------
def _method(rule):
    """A method rule from a function rule taking the object first (and the keywords' tangents, ``tkw``, where
    the function's rule takes them)."""
    def method(obj, tobj, args, ts, tkw=None, **kw):
        if kw:
            check_keywords(f"{type(obj).__name__} method", rule, tuple(kw))
        if tkw is not None:
            return rule((obj, *args), (tobj, *ts), tkw=tkw, **kw)
        return rule((obj, *args), (tobj, *ts), **kw)
    method.keyword_tangents = getattr(rule, "keyword_tangents", False)
    return method


def _dict_update_tangent(tl, args, ts):
    tl.update({k: v for k, v in (ts[0] or {}).items() if v is not None})
    for k in args[0]:
        if not ts[0] or ts[0].get(k) is None:
            tl.pop(k, None)


# the methods that write to their object: ``write(tangent, args, ts)`` does the same to the object's tangent
# (before the object itself is written: a fresh zero tangent has the object's length) and returns the
# tangent of the result
METHOD_WRITES = {
    (list, "append"): lambda tl, args, ts: tl.append(ts[0]),
    (list, "extend"): lambda tl, args, ts: tl.extend(_seq(ts[0], args[0])),
    (list, "insert"): lambda tl, args, ts: tl.insert(args[0], ts[1]),
    (list, "pop"): lambda tl, args, ts: tl.pop(*args),
    (dict, "update"): _dict_update_tangent,
}


def write_method(obj, tobj, name, args, ts):
    """The tangent of ``obj.name(*args)`` for a method in ``METHOD_WRITES``, written into ``obj``'s tangent
    before the call; returns the tangent of the call's result."""
    return METHOD_WRITES[(type(obj), name)](mutable(obj, tobj), args, ts)


def _inplace(op):
    """``a op= b`` (``operators.make_inplace``): on a float array (a batch too) the result written into ``a``
    and its tangent into ``a``'s, on a list ``+=`` extends it, on a dict ``|=`` updates it, on an object whose
    class defines ``__iop__`` in Python that method, otherwise ``a op b``."""
    plain, name = _binop(op), f"__i{DUNDER[op]}__"

    def rule(args, ts):
        a, b = args
        if writable_array(a) and a.dtype.kind in "fc":   # (a batch of ad.vmap too, whose data is its own)
            if type(a) is np.ndarray and a.base is not None and type(ts[0]) is np.ndarray and ts[0].base is None:
                raise UnsupportedError("tensorlang.ad.jvp: an in-place operation on a view of an array whose "
                                       "tangent is not a view of the array's own tangent")
            y, ty = plain((a.copy(), b.copy() if b is a else b), ts)
            return a, setitem(a, ts[0], Ellipsis, y, ty)
        if op == "+" and extends_list(a, b) or type(a) is dict and op == "|":
            ty = write_method(a, ts[0], "extend" if op == "+" else "update", (b,), (ts[1],))
            a.extend(b) if op == "+" else a.update(b)
            return a, tangent_of(a, ty)
        m = getattr(type(a), name, None)
        if isinstance(m, types.FunctionType) and type(a) not in ARRAY_TYPES:   # (not a stand-in's: a number)
            y, ty = JVP(m, None, (a, b), ts)
            if y is not NotImplemented:
                return y, ty
        return plain(args, ts)
    return rule


def ufunc_at(u, tu, args, ts):
    """``np.add.at(a, idx, b)`` and ``np.subtract.at``: linear, so the same call on ``a``'s tangent with
    ``b``'s (other ufuncs' ``at`` are refused once a tangent reaches them)."""
    a, idx, *b = args
    ta, tb = ts[0], ts[2] if len(ts) > 2 else None
    if ta is None and tb is None and tangent_of(a, None) is None:
        return u.at(*args), None
    if u not in (np.add, np.subtract) or not b:
        raise UnsupportedError(f"tensorlang.ad.jvp has no forward rule for np.{u.__name__}.at")
    if ta is not None and not ta.flags.writeable:
        raise UnsupportedError(f"tensorlang.ad.jvp: np.{u.__name__}.at into an array whose tangent is read-only")
    u.at(mutable(a, ta), idx, 0.0 if tb is None else tb)
    return u.at(*args), None


def _writing(name):
    def rule(obj, tobj, args, ts):
        ty = write_method(obj, tobj, name, args, ts)
        return getattr(obj, name)(*args), ty
    return rule


def _copy(x, t, args, ts):
    """``x.copy()``: the tangent copied too (an array, or an array-like's own ``copy``: a batched one under
    ``ad.vmap``); a number is immutable and kept."""
    if t is None or isinstance(t, numbers.Number):
        return x.copy(), t
    return x.copy(), np.array(t) if type(t) is np.ndarray else t.copy()


def _flatten(x, t, args, ts, order="C"):
    """``x.flatten()``, a copy (``np.ravel``'s result may be a view)."""
    order = (*args, order)[0]
    if order not in ("C", "F"):   # ('A' and 'K' follow the memory layout, which the tangent's need not have)
        raise UnsupportedError(f"tensorlang.ad differentiates ndarray.flatten with order 'C' or 'F', not {order!r}")
    return x.flatten(order), None if t is None else asarray(t).flatten(order)


def _dict_get(d, t, args, ts):
    k = args[0]
    if k in d:
        return d[k], None if t is None else t.get(k)
    return (args[1] if len(args) > 1 else None), (ts[1] if len(ts) > 1 else None)


def _astype(x, t, args, ts, **kw):
    y = x.astype(*args, **kw)
    return y, None if t is None or y.dtype.kind not in "fc" else asarray(t).astype(np.result_type(y.dtype, float))


JVP_RULES.update({f: unary_jvp(f, d) for f, d in PARTIALS_UNARY.items()})
JVP_RULES.update({f: binary_jvp(f, d) for f, d in PARTIALS_BINARY.items()})
JVP_RULES.update({f: _from_template(f, spec) for f, spec in INLINE_CALLS.items()
                  if getattr(f, "__module__", None) == "math"})
JVP_RULES.update({PYOP[op]: _binop(op) for op in DUNDER})
JVP_RULES.update({PYIOP[op + "="]: _inplace(op) for op in DUNDER})
JVP_RULES.update({f: _linear(f) for f in (np.mean, np.reshape, np.transpose, np.ravel, np.squeeze,
                                           np.expand_dims, np.real, np.imag, np.conj, np.conjugate, np.negative,
                                           np.positive, np.cumsum, np.trace, np.diag, np.split, np.array_split,
                                           np.hsplit, np.vsplit, np.dsplit)})
JVP_RULES.update({
    np.sum: _sum_np, np.max: _extremum(np.max), np.min: _extremum(np.min), np.amax: _extremum(np.max),
    np.amin: _extremum(np.min),
    np.dot: _bilinear(np.dot), np.matmul: _bilinear(np.matmul), np.outer: _bilinear(np.outer),
    np.cross: _cross,
    np.concatenate: _stack_like(np.concatenate), np.stack: _stack_like(np.stack), np.where: _where,
    np.clip: _clip, np.array: _array(np.array), np.asarray: _array(np.asarray), np.linalg.norm: _norm,
    np.linalg.inv: _inv, np.linalg.det: _det, np.linalg.slogdet: _slogdet, np.linalg.solve: _solve,
    np.linalg.cholesky: _cholesky, np.linalg.eigh: _symmetric_eigen(np.linalg.eigh),
    np.linalg.eigvalsh: _symmetric_eigen(np.linalg.eigvalsh), np.linalg.svd: _svd, np.linalg.svdvals: _svdvals,
    np.linalg.pinv: _pinv, cofactor: _cofactor, sl.solve_triangular: _triangular, sl.cho_factor: _cho_factor,
    sl.cho_solve: _cho_solve, sl.lu_factor: _lu_factor, sl.lu_solve: _lu_solve,
    sl.solve_continuous_lyapunov: _lyapunov,
    operator.neg: lambda args, ts: _unary_op("-", args[0], ts[0]),
    operator.pos: lambda args, ts: _unary_op("+", args[0], ts[0]),
    _b.sum: _sum, _b.min: _pick(_b.min), _b.max: _pick(_b.max), _b.abs: _abs, np.abs: _np_abs, _b.float: _float,
    _b.list: _container(list), _b.tuple: _container(tuple), _b.dict: _dict, _b.filter: _filter,
    _b.zip: _zip, _b.enumerate: _enumerate, _b.map: _map, _b.reversed: _reversed, _b.sorted: _sorted,
    called_with: _called_with,
    as_sequence: _as_sequence,
    _b.getattr: _getattr_call, _b.setattr: _setattr_call,
    operator.getitem: lambda args, ts: getitem(args[0], ts[0], args[1], ts[1]),
})
_ARRAY_METHODS = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "reshape": np.reshape,
                  "transpose": np.transpose, "ravel": np.ravel, "squeeze": np.squeeze,
                  "dot": np.dot, "clip": np.clip, "conj": np.conj, "conjugate": np.conj, "cumsum": np.cumsum}


def _array_method(f):
    rule = JVP_RULES[f]
    if f in (np.reshape, np.transpose):   # x.reshape(2, 3) as np.reshape(x, (2, 3))
        return lambda x, t, args, ts, **kw: rule((x, args[0] if len(args) == 1 else args or None), (t, None), **kw)
    return _method(rule)


def _function_method(f):
    """The forward rule of a method that is NumPy function ``f`` with the array first: the function's."""
    def method(x, t, args, ts, tkw=None, **kw):
        if not kw:
            return JVP(f, None, (x, *args), (t, *ts))
        return JVPkw(tuple(kw), f, None, (x, *args, *kw.values()), (t, *ts, *map((tkw or {}).get, kw)))
    method.keyword_tangents = True
    return method


def _linear_in_last(f):
    """The forward rule of ``f(a, b, dy)``, linear in ``dy`` (the gradient of a container whose item or field
    has gradient ``dy``)."""
    return lambda args, ts: (f(*args), None if ts[-1] is None else f(*args[:-1], ts[-1]))


JVP_RULES.update({index_grad: _linear_in_last(index_grad), field_grad: _linear_in_last(field_grad)})
JVP_RULES[dataclasses.replace] = _replace


def _partial(args, ts, tkw=None, **kw):
    """``functools.partial(func, *args, **kw)``: its tangent a namespace of the tangents of the function, the
    bound arguments and the bound keywords (as ``tangent.partial_jvp`` reads it); a partial of a partial is one
    partial of the inner function (Python flattens it), the inner one's tangents first."""
    func, tfunc, tkw = args[0], ts[0], tkw or {}
    p = functools.partial(func, *args[1:], **kw)
    if all(t is None for t in ts) and not any(t is not None for t in tkw.values()):
        return p, None
    targs, tkeys = tuple(ts[1:]), dict(tkw)
    if p.func is not func:
        targs = (*(getattr(tfunc, "args", None) or (None,) * len(func.args)), *targs)
        tkeys = {**{k: (getattr(tfunc, "keywords", None) or {}).get(k) for k in func.keywords}, **tkeys}
        tfunc = getattr(tfunc, "func", None)
    return p, types.SimpleNamespace(func=tfunc, args=targs, keywords=tkeys)


_partial.keyword_tangents = True
JVP_RULES[functools.partial] = _partial
JVP_METHOD_RULES.update({(np.ndarray, name): _array_method(f) for name, f in _ARRAY_METHODS.items()})
JVP_METHOD_RULES.update({(np.ndarray, name): _function_method(f) for name, f in FUNCTION_METHODS.items()})
JVP_METHOD_RULES.update({key: _writing(key[1]) for key in METHOD_WRITES})
JVP_METHOD_RULES.update({
    (np.ndarray, "copy"): _copy, (np.ndarray, "astype"): _astype, (np.ndarray, "flatten"): _flatten,
    (np.ufunc, "at"): ufunc_at,
    (np.ndarray, "tolist"): lambda x, t, args, ts: (x.tolist(), None if t is None else asarray(t).tolist()),
    (np.ndarray, "item"): lambda x, t, args, ts: (x.item(*args), None if t is None else asarray(t).item(*args)),
    (list, "copy"): _copy, (dict, "copy"): _copy, (dict, "get"): _dict_get,
    (dict, "items"): lambda d, t, args, ts: (list(d.items()), [(None, None if t is None else t.get(k)) for k in d]),
    (dict, "values"): lambda d, t, args, ts: (list(d.values()), [None if t is None else t.get(k) for k in d]),
    (dict, "keys"): lambda d, t, args, ts: (list(d.keys()), None),
    (complex, "conjugate"): lambda z, t, args, ts: (z.conjugate(), None if t is None else np.conj(t)),
    (complex, "conj"): lambda z, t, args, ts: (z.conj(), None if t is None else np.conj(t)),
})

def _angle(args, ts, deg=False):
    z, t = args[0], ts[0]
    y = np.angle(z, deg)
    scale = 180 / np.pi if deg else 1.0
    return y, None if t is None else scale * np.imag(np.conj(z) * t) / np.abs(z) ** 2


def _complex(args, ts):
    re, im = (*args, 0.0)[:2]
    tre, tim = (*ts, None)[:2]
    return complex(*args), tadd(None if tre is None else tre + 0j, None if tim is None else 1j * tim)


JVP_RULES.update({f: unary_jvp(f, d) for f, d in CMATH.items()})
JVP_RULES.update({np.angle: _angle, complex: _complex,
                  np.sign: lambda args, ts: (np.sign(args[0]), None if ts[0] is None else sign_tangent(*args, *ts))})

# the names generated forward code binds (``forward.generate``)
HELPERS = {
    "_fw_J": JVP, "_fw_Jkw": JVPkw, "_fw_Jm": JVPm, "_fw_zero": zero, "_fw_fit": _fit, "_fw_fresh": _fresh,
    "_fw_tan": tangent_of, "_fw_unary": _unary_op, "_fw_getitem": getitem, "_fw_setitem": setitem,
    "_fw_getattr": getattr_, "_fw_setattr": setattr_, "_fw_closure": closure_tangent,
    "_ad_field": _REVERSE_HELPERS["_ad_field"], "_ad_deref": _REVERSE_HELPERS["_ad_deref"], "_ad_np": np,
    "_ad_math": _m,
}


# -- the helpers of generated reverse code (forward over reverse: Hessians) ---------------------------------------
def _additive(f):
    """A helper that is a sum of its arguments (``acc``, ``addn``): the same sum of the tangents."""
    return lambda args, ts: (f(*args), tadd(*ts) if len(ts) == 2 else f(*ts))


def _multilinear(f, positions):
    """A helper linear in each argument at ``positions`` (the others fix shapes or indices): the product
    rule, one term per tangent."""
    def rule(args, ts):
        ty = None
        for p in positions:
            if ts[p] is not None:
                ty = tadd(ty, f(*args[:p], ts[p], *args[p + 1:]))
        return f(*args), ty
    return rule


def _register_reverse_helpers():
    h = _REVERSE_HELPERS
    JVP_RULES.update({
        h["_ad_acc"]: _additive(h["_ad_acc"]), h["_ad_addn"]: _additive(h["_ad_acc"]),
        h["_ad_field"]: _multilinear(h["_ad_field"], (0,)), h["_ad_item"]: _multilinear(h["_ad_item"], (0,)),
        h["_ad_full"]: _multilinear(h["_ad_full"], (1,)), h["_ad_onehot"]: _multilinear(h["_ad_onehot"], (2,)),
        h["_ad_rsum"]: _multilinear(h["_ad_rsum"], (0,)), h["_ad_vdot"]: _multilinear(h["_ad_vdot"], (0, 1)),
        h["_ad_unb"]: _multilinear(h["_ad_unb"], (0,)), h["_ad_mm0"]: _multilinear(h["_ad_mm0"], (0, 2)),
        h["_ad_mm1"]: _multilinear(h["_ad_mm1"], (0, 1)), h["_ad_scatter"]: _multilinear(h["_ad_scatter"], (2,)),
        h["_ad_fngrad"]: _multilinear(h["_ad_fngrad"], (1,)), h["_ad_fold"]: _multilinear(h["_ad_fold"], (0,)),
        h["_ad_like"]: _multilinear(h["_ad_like"], (1,)),
        dense_cotangent: _multilinear(dense_cotangent, (0,)),
        h["_ad_deref"]: lambda args, ts: (h["_ad_deref"](*args),
                                          h["_ad_field"](ts[0], args[0].__code__.co_freevars[args[1]])),
    })


_register_reverse_helpers()
