"""``scipy.linalg``'s triangular and factored solvers: ``solve_triangular``, ``cho_factor`` and
``cho_solve``, ``lu_factor`` and ``lu_solve``, and ``solve_continuous_lyapunov``, for real matrices, in
reverse mode here and in forward mode in ``rules.jvp``.  The rules are written in the subset
``tensorlang.ad`` transforms, so that their own code is differentiated at second order.

What each function reads and writes, as SciPy calls LAPACK: ``solve_triangular`` reads one triangle of
its matrix (without the diagonal where ``unit_diagonal``); ``cho_factor(A, lower)`` reads one triangle
and returns the factor in it, the other triangle holding ``A``'s entries as they were; ``lu_factor``
returns ``L`` (unit diagonal, not stored) and ``U`` packed in one matrix, with the row interchanges
``piv`` (``A[row_order(piv)] = L U``); ``cho_solve`` and ``lu_solve`` read those packed factors only."""
from __future__ import annotations

import numpy as np
import scipy.linalg as sl

from ..runtime import NONDIFF, RULES
from .linalg import check_real, halved_lower, read_triangle


def _mT(x):
    return np.swapaxes(x, -1, -2)


def columns(x):
    """A right-hand side as a matrix: a vector as one column."""
    return x[:, None] if np.ndim(x) == 1 else x


def transposed(name: str, a, b, trans) -> bool:
    """Whether ``trans`` (``0``/``'N'``, ``1``/``'T'``, ``2``/``'C'``) solves with the transpose, the
    conjugate transpose being the transpose of real matrices; complex operands refused."""
    check_real(name, a, "scipy.linalg")
    check_real(name, b, "scipy.linalg")
    if trans not in (0, 1, 2, "N", "T", "C"):
        raise ValueError(f"Invalid 'trans' value: {trans!r}")
    return trans not in (0, "N")


def triangle(a, lower, unit_diagonal=False):
    """The triangle of ``a`` that a triangular solve reads (without its diagonal where ``unit_diagonal``)."""
    return np.tril(a, -1 if unit_diagonal else 0) if lower else np.triu(a, 1 if unit_diagonal else 0)


def row_order(piv):
    """The rows of ``A`` in the order ``L U`` has them, from LAPACK's interchanges ``piv``."""
    order = np.arange(len(piv))
    for i, p in enumerate(piv):
        order[i], order[p] = order[p], order[i]
    return order


def lu_parts(lu):
    """``(L, U)`` from ``lu_factor``'s packed matrix."""
    return np.tril(lu, -1) + np.eye(np.shape(lu)[-1]), np.triu(lu)


def _solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False, check_finite=True):
    """``y = op(T)^-1 b``: ``b-bar = op(T)^-T y-bar``, ``T-bar = -(b-bar y^T)`` (``-(y b-bar^T)`` for the
    transpose) on the triangle read."""
    t = transposed("solve_triangular", a, b, trans)
    y = sl.solve_triangular(a, b, trans, lower, unit_diagonal)

    def back(dy):
        gb = sl.solve_triangular(a, dy, trans=0 if t else 1, lower=lower, unit_diagonal=unit_diagonal)
        ga = -(columns(y) @ _mT(columns(gb)) if t else columns(gb) @ _mT(columns(y)))
        return triangle(ga, lower, unit_diagonal), gb
    return y, back


def factor_of(c, lower):
    """The lower Cholesky factor in ``cho_factor``'s matrix ``c``."""
    return np.tril(c) if lower else _mT(np.triu(c))


def _cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor's pullback (Murray, 2016) on the triangle read; the other triangle of ``c`` is
    ``A``'s."""
    check_real("cho_factor", a, "scipy.linalg")
    y = sl.cho_factor(a, lower)
    factor = factor_of(y[0], lower)
    inv = np.linalg.inv(factor)

    def back(dy):
        dc = dy[0]
        s = _mT(inv) @ halved_lower(_mT(factor) @ factor_of(dc, lower)) @ inv
        return (read_triangle(s, not lower) + (np.triu(dc, 1) if lower else np.tril(dc, -1)),)
    return y, back


def _cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """``y = A^-1 b``, ``A = L L^T`` (``U^T U``): ``b-bar = A^-1 y-bar``, ``A-bar = -b-bar y^T``, and onto the
    factor's triangle ``tril((A-bar + A-bar^T) L)`` (``triu(U (A-bar + A-bar^T))``)."""
    c, lower = c_and_lower
    check_real("cho_solve", c, "scipy.linalg")
    check_real("cho_solve", b, "scipy.linalg")
    y = sl.cho_solve((c, lower), b)

    def back(dy):
        gb = sl.cho_solve((c, lower), dy)
        g = columns(gb) @ _mT(columns(y))
        both = -(g + _mT(g))
        return (np.tril(both @ np.tril(c)) if lower else np.triu(np.triu(c) @ both), None), gb
    return y, back


def _lu_factor(a, overwrite_a=False, check_finite=True):
    """``A[order] = L U``; with ``X = L^-1 dA[order] U^-1``, ``dL = L tril(X, -1)`` and ``dU = triu(X) U``, so
    ``X-bar = tril(L^T L-bar, -1) + triu(U-bar U^T)`` and ``A-bar[order] = L^-T X-bar U^-T``."""
    check_real("lu_factor", a, "scipy.linalg")
    y = sl.lu_factor(a)
    l, u = lu_parts(y[0])
    back_order = np.argsort(row_order(y[1]))

    def back(dy):
        g = dy[0]
        gx = np.tril(_mT(l) @ np.tril(g, -1), -1) + np.triu(np.triu(g) @ _mT(u))
        w = sl.solve_triangular(l, gx, 1, True, True)
        return (_mT(sl.solve_triangular(u, _mT(w), 0, False))[back_order],)
    return y, back


def _lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """``y = op(A)^-1 b``: ``b-bar = op(A)^-T y-bar``, ``A-bar = -b-bar y^T`` (``-y b-bar^T`` for the
    transpose), and onto the packed factors, with ``B = A-bar[order]``, ``tril(B U^T, -1) + triu(L^T B)``."""
    lu, piv = lu_and_piv
    t = transposed("lu_solve", lu, b, trans)
    y = sl.lu_solve((lu, piv), b, trans)
    l, u = lu_parts(lu)
    order = row_order(piv)

    def back(dy):
        gb = sl.lu_solve((lu, piv), dy, 0 if t else 1)
        ga = -(columns(y) @ _mT(columns(gb)) if t else columns(gb) @ _mT(columns(y)))[order]
        return (np.tril(ga @ _mT(u), -1) + np.triu(_mT(l) @ ga), None), gb
    return y, back


def _solve_continuous_lyapunov(a, q):
    """``A X + X A^T = Q``: with ``S`` solving ``A^T S + S A = X-bar``, ``Q-bar = S`` and
    ``A-bar = -(S X^T + S^T X)``."""
    check_real("solve_continuous_lyapunov", a, "scipy.linalg")
    check_real("solve_continuous_lyapunov", q, "scipy.linalg")
    y = sl.solve_continuous_lyapunov(a, q)

    def back(dy):
        s = sl.solve_continuous_lyapunov(_mT(a), dy)
        return -(s @ _mT(y) + _mT(s) @ y), s
    return y, back


RULES.update({sl.solve_triangular: _solve_triangular, sl.cho_factor: _cho_factor, sl.cho_solve: _cho_solve,
              sl.lu_factor: _lu_factor, sl.lu_solve: _lu_solve,
              sl.solve_continuous_lyapunov: _solve_continuous_lyapunov})
NONDIFF.update({transposed, row_order})
