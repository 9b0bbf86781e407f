"""More of ``numpy.linalg`` and ``scipy.linalg.expm``, in reverse and forward mode and at second order.

Given as code (``implemented.implemented_by``), its derivatives those of functions that have rules:

* ``np.linalg.norm`` of every ``ord`` of matrices (``'fro'``, ``'nuc'`` the sum of the singular values, 2 and
  -2 the largest and smallest, 1 and -1 the largest and smallest column sum of ``abs``, ``inf`` and ``-inf``
  of row sums) and vectors (``inf``/``-inf`` the largest and smallest ``abs``), with ``keepdims``; NumPy 2's
  ``matrix_norm`` and ``vector_norm`` (several axes too); ``cond`` (a ratio of singular values, else
  ``norm(A) norm(inv(A))``); ``multi_dot`` (the products in a row); ``matrix_power`` (products of ``A`` or
  of ``inv(A)``); ``tensorinv`` and ``tensorsolve`` (``inv`` and ``solve`` of the reshaped arrays).
  Where such a function is not differentiable the rule it reaches refuses by name: a singular value
  that is zero or tied with another (``svdvals``), a singular matrix (``inv``, ``solve``).

With rules of their own (for real matrices):

* ``qr`` (modes ``reduced``, ``r``, and ``complete`` of a square matrix) of a matrix with no more columns than
  rows and of full rank: with ``X = Q^T dA R^-1``, ``Omega = tril(X, -1) - tril(X, -1)^T``,
  ``dR = (X - Omega) R`` and ``dQ = dA R^-1 - Q X + Q Omega``; refused by name where ``R`` has a zero on
  its diagonal (the factors are not functions of the matrix there);
* ``lstsq`` of full column rank: ``dx = (A^T A)^-1 (dA^T r + A^T (db - dA x))`` with the residual ``r = b - A x``,
  the residuals' ``2 r^T (db - dA x)`` and the singular values'; refused by name where the rank is deficient;
* ``eig`` and ``eigvals`` (complex results, in the convention of ``rules.complexes``) of a matrix whose
  eigenvalues are distinct: with ``P = V^-1 dA V`` and ``F_ij = 1 / (w_j - w_i)``, ``dw = diag(P)`` and
  ``dV = V (F * P)`` made to follow LAPACK's normalisation (each eigenvector of norm 1, its entry of
  largest modulus real); refused by name where two eigenvalues are equal;
* ``scipy.linalg.expm``: its derivative along ``E`` is the upper right block of ``expm([[A, E], [0, A]])``,
  its pullback the same of ``A^H`` and the cotangent."""
from __future__ import annotations

import numpy as np
import scipy.linalg as sl

from ....errors import UnsupportedError
from ..runtime import NONDIFF, RULES, asarray
from ..tangent import JVP_RULES
from . import jvp  # noqa: F401  (registers the forward rule of norm first, kept as plain_norm's)
from .implemented import implemented_by
from .linalg import check_real, reciprocal_gaps


def _mT(x):
    return np.swapaxes(x, -1, -2)


# -- norms ----------------------------------------------------------------------------------------------------------
def norm_kind(x, ord, axis):
    """How ``np.linalg.norm(x, ord, axis)`` is computed: ``('plain', axes)`` (a p-norm or the Frobenius norm,
    ``rules.numpy``'s), ``('vector', axes)`` (``ord`` +-inf of vectors) or ``('matrix', axes)``; ``axes`` the
    axes reduced, as NumPy counts them."""
    nd = np.ndim(x)
    if axis is None:
        axes = tuple(range(nd))
    elif np.ndim(axis) == 0:
        axes = (axis % nd,)
    else:
        axes = tuple(a % nd for a in axis)
    if len(axes) == 1:
        if ord is not None and not isinstance(ord, str) and np.isinf(ord):
            return "vector", axes
        return "plain", axes
    if len(axes) == 2 and ord is not None and ord != "fro":
        return "matrix", tuple(axis) if axis is not None else axes
    return "plain", axes


def plain_norm(x, ord, axis):
    """``np.linalg.norm`` of a p-norm or the Frobenius norm (the rules of ``rules.numpy``)."""
    return np.linalg.norm(x, ord, axis)


def _matrix(x, ord, axes):
    m = np.moveaxis(x, axes, (-2, -1))
    if ord == 2:   # (take: a new array, where an index would give a view written to by a second derivative)
        return np.take(np.linalg.svdvals(m), 0, axis=-1)
    if ord == -2:
        return np.take(np.linalg.svdvals(m), -1, axis=-1)
    if ord == "nuc":
        return np.sum(np.linalg.svdvals(m), axis=-1)
    if ord == 1:
        return np.max(np.sum(np.abs(m), axis=-2), axis=-1)
    if ord == -1:
        return np.min(np.sum(np.abs(m), axis=-2), axis=-1)
    if ord == np.inf:
        return np.max(np.sum(np.abs(m), axis=-1), axis=-1)
    if ord == -np.inf:
        return np.min(np.sum(np.abs(m), axis=-1), axis=-1)
    raise ValueError("Invalid norm order for matrices.")


def _norm(x, ord=None, axis=None, keepdims=False):
    x = asarray(x)
    kind, axes = norm_kind(x, ord, axis)
    if kind == "plain":
        y = plain_norm(x, ord, axis)
    elif kind == "vector":
        y = np.max(np.abs(x), axis=axes[0]) if ord > 0 else np.min(np.abs(x), axis=axes[0])
    else:
        y = _matrix(x, ord, axes)
    if keepdims:
        return np.expand_dims(y, tuple(sorted(a % np.ndim(x) for a in axes)))
    return y


def _matrix_norm(x, keepdims=False, ord="fro"):
    return _norm(x, ord, (-2, -1), keepdims)


def vector_axes(x, axis):
    """The axes ``vector_norm`` reduces (all of them by default), and the shape of ``x`` with them moved
    last and merged into one."""
    nd = np.ndim(x)
    axes = tuple(range(nd)) if axis is None else tuple(a % nd for a in ((axis,) if np.ndim(axis) == 0 else axis))
    kept = tuple(n for i, n in enumerate(np.shape(x)) if i not in axes)
    return axes, kept + (-1,)


def _vector_norm(x, axis=None, keepdims=False, ord=2):
    x = asarray(x)
    axes, merged = vector_axes(x, axis)
    flat = np.reshape(np.moveaxis(x, axes, tuple(range(-len(axes), 0))), merged)
    y = _norm(flat, ord, -1, False)
    if keepdims:
        return np.expand_dims(y, axes)
    return y


def _cond(x, p=None):
    if p is None or p == 2 or p == -2:
        s = np.linalg.svdvals(x)
        if p == -2:
            return s[..., -1] / s[..., 0]
        return s[..., 0] / s[..., -1]
    return _norm(x, p, (-2, -1), False) * _norm(np.linalg.inv(x), p, (-2, -1), False)


# -- products ----------------------------------------------------------------------------------------------------------
def _multi_dot(arrays):
    return product_from(arrays, 0)


def product_from(arrays, i):
    """``arrays[i] @ ... @ arrays[-1]``, by recursion (reverse over reverse through a loop that reads a list
    holding one array twice loses its second derivative)."""
    if i == len(arrays) - 1:
        return arrays[i]
    return arrays[i] @ product_from(arrays, i + 1)


def _power(b, k):
    y = b
    for _ in range(k - 1):
        y = y @ b
    return y


def _matrix_power(a, n):
    if n == 0:
        return np.zeros_like(a) + np.eye(np.shape(a)[-1], dtype=np.result_type(a))
    if n < 0:
        return _power(np.linalg.inv(a), -n)
    return _power(a, n)


def inverse_shape(shape, ind):
    """``tensorinv``'s matrix (rows, columns) and the shape of its result."""
    if ind <= 0:
        raise ValueError("Invalid ind argument.")
    return int(np.prod(shape[:ind])), int(np.prod(shape[ind:])), tuple(shape[ind:]) + tuple(shape[:ind])


def _tensorinv(a, ind=2):
    rows, cols, shape = inverse_shape(np.shape(a), ind)
    return np.reshape(np.linalg.inv(np.reshape(a, (rows, cols))), shape)


def solve_plan(shape, bdim, axes):
    """``tensorsolve``'s permutation of ``a``'s axes (None: none), its matrix's side and the result's shape."""
    order = list(range(len(shape)))
    if axes is not None:
        for k in axes:
            order.remove(k % len(shape))
            order.append(k % len(shape))
    moved = tuple(shape[k] for k in order)
    out = moved[bdim:]
    return (None if axes is None else tuple(order)), int(np.prod(out)), out


def _tensorsolve(a, b, axes=None):
    order, n, out = solve_plan(np.shape(a), np.ndim(b), axes)
    if order is not None:
        a = np.transpose(a, order)
    return np.reshape(np.linalg.solve(np.reshape(a, (-1, n)), np.ravel(b)), out)


# -- qr -----------------------------------------------------------------------------------------------------------------
def check_qr(a, mode):
    """Refuse what the QR rules do not cover: complex matrices, ``mode='raw'``, more columns than rows, and the
    complete (non-unique) basis of a matrix that is not square."""
    check_real("qr", a)
    m, n = np.shape(a)[-2:]
    if mode not in ("reduced", "complete", "r"):
        raise UnsupportedError(f"tensorlang.ad differentiates np.linalg.qr in modes 'reduced', 'complete' and 'r', "
                               f"not {mode!r}")
    if m < n:
        raise UnsupportedError("tensorlang.ad differentiates np.linalg.qr of a matrix with no more columns than rows")
    if mode == "complete" and m != n:
        raise UnsupportedError("tensorlang.ad differentiates np.linalg.qr of a matrix that is not square with "
                               "mode='reduced' (the complete basis is not a function of the matrix)")


def check_full_rank(r, name):
    """Refuse a triangular factor with a zero on its diagonal, up to rounding (the matrix is rank-deficient)."""
    d = np.abs(np.diagonal(r, axis1=-2, axis2=-1))
    tol = max(np.shape(r)[-2:]) * np.finfo(np.result_type(r, np.float32)).eps * np.max(d, axis=-1, initial=0.0)
    if np.any(d <= np.expand_dims(tol, -1)):
        raise UnsupportedError(f"{name}: the derivative is undefined where the matrix is rank-deficient (its "
                               f"factors are not functions of the matrix there)")


def _right_inverse(x, r):
    """``x R^-1``."""
    return _mT(np.linalg.solve(_mT(r), _mT(x)))


def qr_tangent(q, r, t):
    """``(dQ, dR)`` along ``t``."""
    x = _right_inverse(_mT(q) @ t, r)
    low = np.tril(x, -1)
    omega = low - _mT(low)
    return _right_inverse(t, r) - q @ x + q @ omega, (x - omega) @ r


def qr_back(q, r, gq, gr):
    """``A-bar = (Q X-bar + (I - Q Q^T) Q-bar) R^-T`` with ``B = Q^T Q-bar - R-bar R^T`` and
    ``X-bar = R-bar R^T + tril(B - B^T, -1)``."""
    b = 0.0
    gx = 0.0
    if gr is not None:
        gx = gr @ _mT(r)
        b = -gx
    if gq is not None:
        b = b + _mT(q) @ gq
    left = q @ (gx + np.tril(b - _mT(b), -1))
    if gq is not None:
        left = left + gq - q @ (_mT(q) @ gq)
    return _mT(np.linalg.solve(r, _mT(left)))


def _qr(a, mode="reduced"):
    check_qr(a, mode)
    y = np.linalg.qr(a, mode)
    q, r = np.linalg.qr(a) if mode == "r" else y
    check_full_rank(r, "np.linalg.qr")

    def back(dy):
        if mode == "r":
            return qr_back(q, r, None, dy), None
        return qr_back(q, r, dy[0], dy[1]), None
    return y, back


def _qr_jvp(args, ts, mode="reduced"):
    a = args[0]
    mode = args[1] if len(args) > 1 else mode
    check_qr(a, mode)
    y = np.linalg.qr(a, mode)
    if ts[0] is None:
        return y, None
    q, r = np.linalg.qr(a) if mode == "r" else y
    check_full_rank(r, "np.linalg.qr")
    dq, dr = qr_tangent(q, r, ts[0])
    return y, dr if mode == "r" else type(y)(dq, dr)


# -- lstsq --------------------------------------------------------------------------------------------------------------
def check_lstsq(a, b, rank):
    check_real("lstsq", a)
    check_real("lstsq", b)
    if rank < np.shape(a)[-1]:
        raise UnsupportedError("np.linalg.lstsq: the derivative is undefined where the matrix is rank-deficient "
                               "(a perturbation changes its rank, and the solution jumps)")


def _columns(x):
    return x[:, None] if np.ndim(x) == 1 else x


def _lstsq(a, b, rcond=None):
    """``x-bar``: with ``z = (A^T A)^-1 x-bar``, ``b-bar = A z`` and ``A-bar = r z^T - A z x^T``; the residuals'
    ``b-bar = 2 r res-bar``, ``A-bar = -2 r res-bar x^T``; the singular values' ``U diag(s-bar) V^T``."""
    y = np.linalg.lstsq(a, b, rcond)
    x, res, rank, s = y
    check_lstsq(a, b, rank)
    vector = np.ndim(b) == 1

    def back(dy):
        gx, gres, gs = dy[0], dy[1], dy[3]
        xc, rc = _columns(x), _columns(b - a @ x)
        ga = 0.0
        gb = 0.0
        if gx is not None:
            z = np.linalg.solve(_mT(a) @ a, _columns(gx))
            gb = a @ z
            ga = rc @ _mT(z) - (a @ z) @ _mT(xc)
        if gres is not None and np.size(res):
            w = 2 * rc * gres
            gb = gb + w
            ga = ga - w @ _mT(xc)
        if gs is not None:
            u, _, vh = np.linalg.svd(a, full_matrices=False)
            ga = ga + (u * gs) @ vh
        gb = gb[:, 0] if vector and np.ndim(gb) == 2 else gb
        return ga, gb, None
    return y, back


def _lstsq_jvp(args, ts, rcond=None):
    a, b = args[:2]
    rcond = args[2] if len(args) > 2 else rcond
    y = np.linalg.lstsq(a, b, rcond)
    x, res, rank, s = y
    check_lstsq(a, b, rank)
    ta, tb = ts[0], ts[1]
    if ta is None and tb is None:
        return y, None
    r = b - a @ x
    d = 0.0 if tb is None else tb   # db - dA x
    if ta is not None:
        d = d - ta @ x
    rhs = _mT(a) @ d
    if ta is not None:
        rhs = rhs + _mT(ta) @ r
    dx = np.linalg.solve(_mT(a) @ a, rhs)
    dres = np.sum(2 * r * d, axis=0) * np.ones(np.shape(res)) if np.size(res) else np.zeros(np.shape(res))
    ds = np.zeros(np.shape(s))
    if ta is not None:
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        ds = np.sum(u * (ta @ _mT(vh)), axis=-2)
    return y, (dx, dres, None, ds)


# -- eig and eigvals --------------------------------------------------------------------------------------------------
_EIG_REFUSED = ("np.linalg.eig: the derivative is undefined where two eigenvalues are equal (the eigenvalues are "
                "not differentiable there, nor the eigenvectors functions of the matrix)")


def check_eig(a, name):
    check_real(name, a)


def largest_entry(v):
    """For each eigenvector (column of ``v``), 1 at its entry of largest modulus (made real by LAPACK), else 0."""
    k = np.argmax(np.abs(v), axis=-2)
    return (np.arange(np.shape(v)[-2])[:, None] == np.expand_dims(k, -2)).astype(float)


def eig_tangent(w, v, t):
    """``(dw, dV)`` along ``t``: ``P = V^-1 dA V``, ``dw = diag(P)``, ``dV0 = V (F * P)``, made of norm 1
    (``dV1 = dV0 - V Re(diag(V^H dV0))``) and of real largest entries
    (``dV = dV1 - i V Im(dV1_kj) / V_kj``)."""
    f = reciprocal_gaps(w, _EIG_REFUSED)
    p = np.linalg.solve(v, t @ v)
    dw = np.diagonal(p, axis1=-2, axis2=-1)
    dv = v @ (f * p)
    dv = dv - v * np.expand_dims(np.real(np.sum(np.conj(v) * dv, axis=-2)), -2)
    mask = largest_entry(v)
    vk = np.real(np.sum(mask * v, axis=-2))
    dv = dv - 1j * v * np.expand_dims(np.imag(np.sum(mask * dv, axis=-2)) / vk, -2)
    return dw, dv


def eig_back(w, v, gw, gv):
    """The adjoint of ``eig_tangent`` (real part: ``A`` is real)."""
    vh = np.conj(_mT(v))
    gp = 0.0
    if gw is not None:
        gp = np.expand_dims(gw, -1) * np.eye(np.shape(w)[-1])
    if gv is not None:
        f = reciprocal_gaps(w, _EIG_REFUSED)
        mask = largest_entry(v)
        vk = np.real(np.sum(mask * v, axis=-2))
        z = np.sum(np.conj(gv) * v, axis=-2)
        gv1 = gv + 1j * mask * np.expand_dims(np.imag(z) / vk, -2)
        beta = np.real(np.sum(np.conj(gv1) * v, axis=-2))
        gv0 = gv1 - v * np.expand_dims(beta, -2)
        gp = gp + np.conj(f) * (vh @ gv0)
    return np.real(np.linalg.solve(vh, gp @ vh))


def _eig(a):
    check_eig(a, "eig")
    y = np.linalg.eig(a)
    w, v = y[0], np.copy(y[1], order="C")   # (LAPACK's eigenvectors are in Fortran order)
    reciprocal_gaps(w, _EIG_REFUSED)
    return y, lambda dy: (eig_back(w, v, dy[0], dy[1]),)


def _eig_jvp(args, ts):
    a = args[0]
    check_eig(a, "eig")
    y = np.linalg.eig(a)
    if ts[0] is None:
        return y, None
    dw, dv = eig_tangent(y[0], y[1], ts[0])
    return y, type(y)(dw if np.iscomplexobj(y[0]) else np.real(dw), dv if np.iscomplexobj(y[1]) else np.real(dv))


def _eigvals(a):
    check_eig(a, "eigvals")
    w, v = np.linalg.eig(a)
    v = np.copy(v, order="C")   # (LAPACK's eigenvectors are in Fortran order)
    reciprocal_gaps(w, _EIG_REFUSED.replace("eig:", "eigvals:"))
    return w, lambda dy: (eig_back(w, v, dy, None),)


def _eigvals_jvp(args, ts):
    a = args[0]
    check_eig(a, "eigvals")
    w, v = np.linalg.eig(a)
    if ts[0] is None:
        return w, None
    reciprocal_gaps(w, _EIG_REFUSED.replace("eig:", "eigvals:"))
    dw = np.diagonal(np.linalg.solve(v, ts[0] @ v), axis1=-2, axis2=-1)
    return w, dw if np.iscomplexobj(w) else np.real(dw)


# -- scipy.linalg.expm --------------------------------------------------------------------------------------------------
def frechet_expm(a, e):
    """The derivative of ``expm`` at ``A`` along ``E``: the upper right block of ``expm([[A, E], [0, A]])``."""
    n = np.shape(a)[-1]
    z = np.zeros(np.shape(a), dtype=np.result_type(a, e))
    big = np.concatenate([np.concatenate([a, e], axis=-1), np.concatenate([z, a], axis=-1)], axis=-2)
    return sl.expm(big)[..., :n, n:]


def _expm(A):
    y = sl.expm(A)

    def back(dy):
        g = frechet_expm(np.conj(_mT(A)), dy)
        return (g if np.iscomplexobj(A) else np.real(g),)
    return y, back


def _expm_jvp(args, ts):
    y = sl.expm(args[0])
    return y, None if ts[0] is None else frechet_expm(args[0], ts[0])


RULES.update({np.linalg.qr: _qr, np.linalg.lstsq: _lstsq, np.linalg.eig: _eig, np.linalg.eigvals: _eigvals,
              sl.expm: _expm})
JVP_RULES.update({np.linalg.qr: _qr_jvp, np.linalg.lstsq: _lstsq_jvp, np.linalg.eig: _eig_jvp,
                  np.linalg.eigvals: _eigvals_jvp, sl.expm: _expm_jvp})
NONDIFF.update({check_qr, check_full_rank, check_lstsq, check_eig, largest_entry})


RULES[plain_norm], JVP_RULES[plain_norm] = RULES[np.linalg.norm], JVP_RULES[np.linalg.norm]
implemented_by(np.linalg.norm, _norm)
implemented_by(np.linalg.cond, _cond)
implemented_by(np.linalg.multi_dot, _multi_dot)
implemented_by(np.linalg.matrix_power, _matrix_power)
implemented_by(np.linalg.tensorinv, _tensorinv)
implemented_by(np.linalg.tensorsolve, _tensorsolve)
if hasattr(np.linalg, "matrix_norm"):
    implemented_by(np.linalg.matrix_norm, _matrix_norm)
    implemented_by(np.linalg.vector_norm, _vector_norm)
NONDIFF.update({norm_kind, vector_axes, inverse_shape, solve_plan})
