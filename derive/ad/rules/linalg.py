"""Contractions and ``numpy.linalg``: ``einsum``, ``inner``, ``kron``, ``cross``, ``trace``, the solvers
``det``, ``slogdet``, ``inv``, ``solve``, the symmetric factorisations ``cholesky``, ``eigh``,
``eigvalsh``, the singular value decomposition ``svd`` and ``svdvals``, and the pseudo-inverse ``pinv``
(batched over leading axes as NumPy's are).

NumPy's symmetric factorisations read one triangle of their argument (the lower by default) and factor the
symmetric matrix it spells: an entry of that triangle stands for itself and its mirror, and the other
triangle is never read.  Their gradients are those of NumPy's functions as called (``read_triangle``): zero
in the triangle not read, as central differences of the call show."""
from __future__ import annotations

import numpy as np

from ....errors import UnsupportedError
from ..runtime import METHOD_RULES, MULTILINEAR, NONDIFF, RULES, asarray, is_complex, summed_to, unbroadcast


def _parse_einsum(spec, ops):
    """``(inputs, output)`` subscripts of an explicit or implicit ``einsum`` spec, with each ``...`` spelt
    out as letters the spec does not use (the same letters for every operand, aligned at the right, as
    NumPy broadcasts them)."""
    spec = spec.replace(" ", "")
    ins, arrow, out = spec.partition("->")
    inputs = ins.split(",")
    if len(inputs) != len(ops):
        raise UnsupportedError(f"np.einsum: {spec!r} names {len(inputs)} operands, {len(ops)} given")
    spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in spec]
    dims = [np.ndim(o) - len(sub.replace("...", "")) if "..." in sub else 0 for sub, o in zip(inputs, ops)]
    ellipsis = "".join(spare[:max(dims, default=0)])
    inputs = [sub.replace("...", ellipsis[len(ellipsis) - d:]) for sub, d in zip(inputs, dims)]
    if arrow:
        return inputs, out.replace("...", ellipsis)
    letters = "".join(inputs)
    singles = "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ellipsis))
    return inputs, ellipsis + singles


def _sublist_spec(args):
    """The subscripts string and the operands of einsum's sublist form ``(op, sub, op, sub, ..., [out])``."""
    def word(sub):
        return "".join("..." if s is Ellipsis else "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[s]
                       for s in sub)
    n = len(args) // 2
    spec = ",".join(word(s) for s in args[1:2 * n:2])
    return (spec + "->" + word(args[-1]) if len(args) % 2 else spec), args[0:2 * n:2]


def _einsum(spec, *ops, **kw):
    if not isinstance(spec, str):   # the sublist form: the gradients at the operands' positions
        args = (spec, *ops)
        spec, ops = _sublist_spec(args)
        y, back = _einsum(spec, *ops, **kw)

        def sublist_back(dy):
            grads = [None] * len(args)
            grads[0:2 * len(ops):2] = back(dy)[1:]
            return tuple(grads)
        return y, sublist_back
    y = np.einsum(spec, *ops, **kw)
    inputs, out = _parse_einsum(spec, ops)
    sizes = {}
    for sub, o in zip(inputs, ops):
        for c, n in zip(sub, np.shape(o)):
            sizes[c] = sizes.get(c, 1) if n == 1 else n   # (a length 0 broadcasts no more than any other)

    def back(dy):
        grads = [None]
        # complex operands conjugated, once (the convention of rules.complexes: einsum is holomorphic in each)
        conjugated = [np.conj(o) if is_complex(o) else o for o in ops]
        for k, sub in enumerate(inputs):
            once = "".join(dict.fromkeys(sub))   # a letter repeated in one operand: its diagonal
            others = [s for i, s in enumerate(inputs) if i != k]
            known = set(out).union(*others)
            kept = "".join(c for c in once if c in known)
            # three operands or more: NumPy's pairwise (BLAS) order, not one loop over every index
            g = np.einsum(f"{','.join([out] + others)}->{kept}", dy,
                          *(o for i, o in enumerate(conjugated) if i != k), optimize=len(others) > 1)
            if is_complex(g) and not is_complex(ops[k]):   # (a real operand's gradient is real)
                g = np.real(g)
            g = np.broadcast_to(np.expand_dims(g, tuple(i for i, c in enumerate(once) if c not in known)),
                                [sizes[c] for c in once])
            if once != sub:
                g = _on_diagonal(g, once, sub, sizes)
            g = summed_to(g, np.shape(ops[k]))   # (an axis of length 1 that was broadcast)
            grads.append(np.copy(g) if np.ndim(ops[k]) else g[()])   # (g may be a broadcast view)
        return tuple(grads)
    return y, back


def _on_diagonal(g, once: str, sub: str, sizes: dict):
    """The array of subscripts ``sub`` (a letter repeated) that holds ``g`` (subscripts ``once``, each letter
    once) on its diagonal and zero elsewhere: ``g`` times a Kronecker delta (an identity matrix) between each
    repeated letter and its first place, one einsum, so that it is differentiated again as einsum is."""
    fresh = iter(sorted(set(map(chr, range(ord("A"), ord("Z") + 1))) - set(sub) - set(once)))
    spread, deltas = "", []
    for c in sub:
        if c in spread:
            d = next(fresh)
            deltas.append((c + d, np.eye(sizes[c], dtype=np.result_type(g))))
            c = d
        spread += c
    subs = ",".join([once] + [s for s, _ in deltas])
    return np.einsum(f"{subs}->{spread}", g, *(e for _, e in deltas))


def _inner(a, b):
    a, b = asarray(a), asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        return np.inner(a, b), lambda dy: (unbroadcast(dy * b, a), unbroadcast(dy * a, b))
    y, back = RULES[np.tensordot](a, b, ([a.ndim - 1], [b.ndim - 1]))
    return y, lambda dy: back(dy)[:2]


def _kron(a, b):
    sa, sb = np.shape(a), np.shape(b)
    y = np.kron(a, b)   # (a number for two numbers)
    a, b = np.atleast_1d(a), np.atleast_1d(b)
    nd = max(a.ndim, b.ndim)
    a2, b2 = a.reshape((1,) * (nd - a.ndim) + a.shape), b.reshape((1,) * (nd - b.ndim) + b.shape)

    def back(dy):
        g = np.reshape(dy, tuple(x for pair in zip(a2.shape, b2.shape) for x in pair))
        ax_a, ax_b = tuple(range(1, 2 * nd, 2)), tuple(range(0, 2 * nd, 2))
        da = np.tensordot(g, b2, (ax_a, tuple(range(nd)))).reshape(sa)
        db = np.tensordot(g, a2, (ax_b, tuple(range(nd)))).reshape(sb)
        return (da if sa else da[()]), (db if sb else db[()])
    return y, back


def _cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:   # (NumPy's: axis overrides the other three)
        axisa = axisb = axisc = axis
    a, b = np.moveaxis(a, axisa, -1), np.moveaxis(b, axisb, -1)   # the vectors along the last axis
    if np.shape(a)[-1] != 3 or np.shape(b)[-1] != 3:
        raise UnsupportedError("tensorlang.ad differentiates np.cross of 3-vectors")
    y = np.cross(a, b)

    def back(dy):
        dy = np.moveaxis(dy, axisc, -1)
        return (np.moveaxis(unbroadcast(np.cross(b, dy), a), -1, axisa),
                np.moveaxis(unbroadcast(np.cross(dy, a), b), -1, axisb))
    return np.moveaxis(y, -1, axisc), back


def _trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    a = asarray(a)
    y = np.trace(a, offset, axis1, axis2, dtype)

    def back(dy):
        eye = np.eye(a.shape[axis1], a.shape[axis2], offset)
        g = np.expand_dims(asarray(dy), (0, 1)) * np.expand_dims(eye, tuple(range(2, a.ndim)))
        return (np.moveaxis(g, (0, 1), (axis1, axis2)),)
    return y, back


def _mT(x):
    return np.swapaxes(x, -1, -2)


def _without(s, count: int):
    """The products of singular values ``s`` (stacked) leaving out one of them (``count`` 1: ``p_i``, the
    product over ``j != i``) or two (``count`` 2: ``q_ij``, over ``k != i, j``)."""
    n = np.shape(s)[-1]
    eye = np.eye(n, dtype=bool)
    if count == 1:
        return np.prod(np.where(eye, 1.0, np.expand_dims(s, -2)), axis=-1)
    left = eye[:, None, :] | eye[None, :, :]   # [i, j, k]: k is i or j
    return np.prod(np.where(left, 1.0, s[..., None, None, :]), axis=-1)


def _svd_of(a):
    """``(c, u, s, vh)``: the SVD ``A = U S Vh`` and ``c = det(U) det(Vh)``, the cofactor matrix of ``A`` being
    ``c conj(U) diag(p) conj(Vh)`` (``p_i`` the product of the singular values but the ``i``-th; the cofactor
    matrix is multiplicative, and a unitary ``U``'s is ``det(U) conj(U)``)."""
    u, s, vh = np.linalg.svd(a)
    return np.linalg.det(u) * np.linalg.det(vh), u, s, vh


def cofactor(a):
    """The cofactor matrix of ``A`` (stacked), the gradient of ``det``: ``det(A) A^-T`` where ``A`` is
    invertible, and defined (without an inverse) where it is singular."""
    c, u, s, vh = _svd_of(a)
    return np.expand_dims(c, (-1, -2)) * (np.conj(u) * np.expand_dims(_without(s, 1), -2)) @ np.conj(vh)


def cofactor_derivative(a, e):
    """The derivative of ``cofactor`` at ``A`` along ``E`` (the second derivative of ``det``, a symmetric
    bilinear form: the map is its own transpose, and so its own pullback).  With ``P = U^H E Vh^H``,
    ``d cof(S)[P]`` is ``sum_{k != i} P_kk q_ik`` on the diagonal and ``-q_ij P_ji`` off it."""
    c, u, s, vh = _svd_of(a)
    p = np.conj(_mT(u)) @ e @ np.conj(_mT(vh))
    q = _without(s, 2)
    eye = np.eye(np.shape(s)[-1], dtype=bool)
    diag = np.sum(np.where(eye, 0.0, q) * np.expand_dims(np.diagonal(p, axis1=-2, axis2=-1), -2), axis=-1)
    d = np.where(eye, np.expand_dims(diag, -1), -q * _mT(p))
    return np.expand_dims(c, (-1, -2)) * np.conj(u) @ d @ np.conj(vh)


def _cofactor(a):
    return cofactor(a), lambda dy: (cofactor_derivative(a, dy),)


def _det(a):
    y = np.linalg.det(a)
    return y, lambda dy: (np.expand_dims(dy, (-1, -2)) * cofactor(a),)


def check_slogdet(sign) -> None:
    """Refuse ``slogdet`` at a singular matrix: ``log |det A|`` is ``-inf`` there, without a derivative."""
    if np.any(sign == 0):
        raise UnsupportedError("np.linalg.slogdet: log |det A| has no derivative where A is singular (it is -inf)")


def _slogdet(a):
    y = np.linalg.slogdet(a)
    check_slogdet(y[0])

    def back(dy):
        if dy is None:
            return (None,)
        if is_complex(a) and dy[0] is not None and np.any(dy[0] != 0):
            raise UnsupportedError("np.linalg.slogdet of a complex matrix: its sign (det A / |det A|) is not "
                                   "differentiated; write np.linalg.det(A) / np.abs(np.linalg.det(A))")
        # log |det A| = Re log det A: the gradient dy * conj(A^-T) in the complex convention (rules.complexes)
        return (None if dy[1] is None else np.expand_dims(dy[1], (-1, -2)) * np.conj(_mT(np.linalg.inv(a))),)
    return y, back


def _inv(a):
    y = np.linalg.inv(a)
    return y, lambda dy: (-_mT(y) @ dy @ _mT(y),)


def _solve(a, b):
    y = np.linalg.solve(a, b)
    vector = np.ndim(b) == 1   # one right-hand side (for every matrix of a stack): a column

    def back(dy):
        d, x = (asarray(dy)[..., None], y[..., None]) if vector else (dy, y)
        gb = np.linalg.solve(_mT(a), d)
        return unbroadcast(-gb @ _mT(x), a), unbroadcast(gb[..., 0] if vector else gb, b)
    return y, back


def read_triangle(s, upper: bool):
    """The gradient with respect to the argument of a function of the symmetric matrix spelt by its lower
    (or upper) triangle, from the gradient ``s`` with respect to that symmetric matrix: an off-diagonal
    entry read stands for two, ``s_ij + s_ji``; the diagonal for one; the triangle not read for none."""
    both = s + _mT(s)
    return (np.triu(both) if upper else np.tril(both)) - s * np.eye(s.shape[-1])


def symmetric_tangent(t, upper: bool):
    """The tangent of the symmetric matrix spelt by the lower (or upper) triangle of a matrix of tangent
    ``t``: the triangle read, mirrored."""
    part = np.triu(t) if upper else np.tril(t)
    return part + _mT(part) - part * np.eye(t.shape[-1])


def halved_lower(x):
    """``Phi(x)``: the lower triangle of ``x`` with its diagonal halved, the map in the Cholesky factor's
    derivative ``dL = L Phi(L^-1 dA L^-T)`` (self-adjoint in the Frobenius inner product)."""
    return np.tril(x) - 0.5 * x * np.eye(x.shape[-1])


def reciprocal_gaps(x, refusal: str):
    """``F_ij = 1 / (x_j - x_i)`` off the diagonal and 0 on it, for values ``x`` (stacked); ``refusal``,
    an ``UnsupportedError``, where two of them are equal up to rounding: no more than ``n`` units in the last
    place of the largest of them apart (the error of the decomposition that computed them)."""
    gap = np.expand_dims(x, -2) - np.expand_dims(x, -1)
    off = ~np.eye(np.shape(x)[-1], dtype=bool)
    if _tied(x, gap, off):
        raise UnsupportedError(refusal)
    return np.where(off, 1.0 / np.where(off, gap, 1.0), 0.0)


def _tied(x, gap, off) -> bool:
    """Whether two of values ``x`` (their differences ``gap``) are no more than ``n`` units in the last place
    of the largest apart, ``off`` the diagonal."""
    x = asarray(x)
    tol = x.shape[-1] * np.finfo(np.result_type(x.dtype, np.float32)).eps * np.max(np.abs(x), axis=-1, initial=0.0)
    return bool(np.any((np.abs(gap) <= np.expand_dims(tol, (-1, -2))) & off))


NONDIFF.add(_tied)


def eigenvector_factor(w):
    """``F_ij = 1 / (w_j - w_i)`` for eigenvalues ``w``: the map in the eigenvectors' derivative
    ``dV = V (F * (V^T dA V))``.  Undefined where two eigenvalues are equal: refused by name."""
    return reciprocal_gaps(w, "np.linalg.eigh: the eigenvectors' derivative is undefined where two eigenvalues "
                              "are equal (the eigenvectors of a repeated eigenvalue are not functions of the "
                              "matrix); np.linalg.eigvalsh differentiates the eigenvalues alone")


def check_real(name: str, a, module: str = "np.linalg") -> None:
    """Refuse a complex argument of the factorisation or solver ``module.name`` (its rules are for real
    ones)."""
    if np.iscomplexobj(a):
        raise UnsupportedError(f"tensorlang.ad differentiates {module}.{name} of real matrices, not complex ones")


def reads_upper(uplo: str) -> bool:
    """Whether ``UPLO`` names the upper triangle (NumPy's check and message for anything else)."""
    if uplo not in ("L", "U", "l", "u"):
        raise ValueError(f"UPLO argument must be 'L' or 'U', not {uplo!r}")
    return uplo in ("U", "u")


def _cholesky(a, upper=False):
    """``L = cholesky(A)``: ``A-bar = L^-T Phi(L^T L-bar) L^-1`` (Murray, 2016), read back onto the
    triangle NumPy reads (the upper one and the factor transposed when ``upper``)."""
    check_real("cholesky", a)
    y = np.linalg.cholesky(a, upper=True) if upper else np.linalg.cholesky(a)
    lower = _mT(y) if upper else y
    inv = np.linalg.inv(lower)

    def back(dy):
        s = _mT(inv) @ halved_lower(_mT(lower) @ (_mT(dy) if upper else dy)) @ inv
        return (read_triangle(s, upper),)
    return y, back


def _eigh(a, UPLO="L"):
    """``w, V = eigh(A)``: ``A-bar = V (diag(w-bar) + F * (V^T V-bar)) V^T`` read back onto the triangle
    NumPy reads (``eigenvector_factor``)."""
    check_real("eigh", a)
    upper = reads_upper(UPLO)
    y = np.linalg.eigh(a, UPLO)
    w, v = y

    def back(dy):
        dw, dv = dy
        inner = 0.0 if dw is None else np.expand_dims(dw, -1) * np.eye(np.shape(w)[-1])
        if dv is not None:
            inner = inner + eigenvector_factor(w) * (_mT(v) @ dv)
        return (read_triangle(v @ inner @ _mT(v), upper),)
    return y, back


def _eigvalsh(a, UPLO="L"):
    """``w = eigvalsh(A)``: ``A-bar = V diag(w-bar) V^T`` (the eigenvectors from ``eigh``), read back onto the
    triangle NumPy reads."""
    check_real("eigvalsh", a)
    upper = reads_upper(UPLO)
    y = np.linalg.eigvalsh(a, UPLO)
    v = np.linalg.eigh(a, UPLO)[1]
    return y, lambda dy: (read_triangle((v * np.expand_dims(dy, -2)) @ _mT(v), upper),)


_SINGULAR_VECTORS_REFUSED = (
    "np.linalg.svd: the singular vectors' derivative is undefined where two singular values are equal or one "
    "is zero (the vectors are not functions of the matrix there); np.linalg.svdvals differentiates the "
    "singular values alone")


def svd_factor(s):
    """``F_ij = 1 / (s_j^2 - s_i^2)`` for singular values ``s``: the map in the singular vectors'
    derivatives.  Undefined where two singular values are equal, or one is zero: refused by name."""
    if np.any(s == 0):
        raise UnsupportedError(_SINGULAR_VECTORS_REFUSED)
    return reciprocal_gaps(s * s, _SINGULAR_VECTORS_REFUSED)


def check_svd(a, full_matrices, hermitian) -> None:
    """Refuse what the SVD rules do not cover: complex matrices, ``hermitian=True``, and the full
    (non-unique) bases of a matrix that is not square."""
    check_real("svd", a)
    if hermitian:
        raise UnsupportedError("tensorlang.ad differentiates np.linalg.svd with hermitian=False")
    if full_matrices and np.shape(a)[-1] != np.shape(a)[-2]:
        raise UnsupportedError("tensorlang.ad differentiates np.linalg.svd of a matrix that is not square with "
                               "full_matrices=False (the full bases are not functions of the matrix)")


def zero_singular(s):
    """Which singular values ``s`` are zero up to rounding (no more than ``n`` units in the last place of the
    largest)."""
    s = asarray(s)
    tol = max(s.shape[-1], 1) * np.finfo(np.result_type(s.dtype, np.float32)).eps * np.max(s, axis=-1, initial=0.0)
    return s <= np.expand_dims(tol, -1)


def _tied_pairs(s):
    """Which pairs of singular values ``s`` are equal up to rounding (``_tied``'s tolerance), off the diagonal."""
    s = asarray(s)
    gap = np.expand_dims(s, -2) - np.expand_dims(s, -1)
    tol = s.shape[-1] * np.finfo(np.result_type(s.dtype, np.float32)).eps * np.max(np.abs(s), axis=-1, initial=0.0)
    return (np.abs(gap) <= np.expand_dims(tol, (-1, -2))) & ~np.eye(s.shape[-1], dtype=bool)


def check_svdvals_tangent(s) -> None:
    """Refuse the tangent of singular values ``s`` where two are equal or one is zero, up to rounding: the
    singular values are not differentiable there (their directional derivatives are not linear)."""
    if np.size(s) and (np.any(_tied_pairs(s)) or np.any(zero_singular(s))):
        raise UnsupportedError("np.linalg.svdvals: the tangent of the singular values is undefined where one is "
                               "zero or two are equal (their derivative there is not linear)")


def _svdvals_back(a, s):
    """The pullback of the singular values: ``A-bar = U diag(s-bar) V^T``.  Where two equal or zero singular
    values get different cotangents the derivative is undefined: refused by name."""
    u, _, vh = np.linalg.svd(a, full_matrices=False)

    def back(ds):
        same = np.expand_dims(s, -2) == np.expand_dims(s, -1)
        same = same | (_tied_pairs(s) if np.size(s) else same)
        if np.any(same & (np.expand_dims(ds, -2) != np.expand_dims(ds, -1))) or np.any(zero_singular(s) & (ds != 0)):
            raise UnsupportedError("np.linalg.svdvals: the derivative of a singular value is undefined where "
                                   "it is zero or equal to another that the result weighs differently")
        return ((u * np.expand_dims(ds, -2)) @ vh,)
    return back


def _svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """``U, s, Vh = svd(A)`` (Townsend, 2016), with ``F = svd_factor(s)``, ``J = F * (U^T U-bar)``,
    ``K = F * (V^T V-bar)``: ``A-bar = U ((J + J^T) S + diag(s-bar) + S (K + K^T)) V^T
    + (I - U U^T) U-bar S^-1 V^T + U S^-1 V-bar^T (I - V V^T)``; without ``compute_uv`` the singular
    values' ``U diag(s-bar) V^T``."""
    check_svd(a, full_matrices and compute_uv, hermitian)
    y = np.linalg.svd(a, full_matrices, compute_uv)
    if not compute_uv:
        return y, _svdvals_back(a, y)
    u, s, vh = y
    v = _mT(vh)

    def back(dy):
        du, ds, dvh = dy
        inner = 0.0 if ds is None else np.expand_dims(ds, -1) * np.eye(np.shape(s)[-1])
        ga = 0.0
        if du is not None or dvh is not None:
            f = svd_factor(s)
            if du is not None:
                j = f * (_mT(u) @ du)
                inner = inner + (j + _mT(j)) * np.expand_dims(s, -2)
                ga = ga + (du - u @ (_mT(u) @ du)) / np.expand_dims(s, -2) @ vh
            if dvh is not None:
                dv = _mT(dvh)
                k = f * (_mT(v) @ dv)
                inner = inner + np.expand_dims(s, -1) * (k + _mT(k))
                ga = ga + u @ (_mT(dv - v @ (_mT(v) @ dv)) / np.expand_dims(s, -1))
        return (u @ inner @ vh + ga,)
    return y, back


def _svdvals(x):
    """``s = svdvals(A)``: ``A-bar = U diag(s-bar) V^T``."""
    check_real("svdvals", x)
    y = np.linalg.svdvals(x)
    return y, _svdvals_back(x, y)


def check_pinv(a, rcond, hermitian) -> None:
    """Refuse what the pseudo-inverse's rules do not cover: complex matrices, ``hermitian=True``, and a
    matrix with fewer singular values above the cutoff than its smaller side (a perturbation changes the
    rank there, and the pseudo-inverse jumps)."""
    check_real("pinv", a)
    if hermitian:
        raise UnsupportedError("tensorlang.ad differentiates np.linalg.pinv with hermitian=False")
    s = np.linalg.svdvals(a)
    cutoff = (max(np.shape(a)[-2:]) * np.finfo(np.result_type(a, float)).eps if rcond is None else rcond)
    if np.any(s <= cutoff * np.max(s, axis=-1, keepdims=True)):
        raise UnsupportedError("np.linalg.pinv: the pseudo-inverse's derivative is undefined where the matrix "
                               "is rank-deficient (a perturbation changes its rank)")


def _pinv(a, rcond=None, hermitian=False):
    """``Y = pinv(A)`` of a matrix of full rank: ``A-bar = -Y^T Y-bar Y^T + (I - A Y) Y-bar^T Y Y^T
    + Y^T Y Y-bar^T (I - Y A)`` (the transpose of ``dY = -Y dA Y + Y Y^T dA^T (I - A Y)
    + (I - Y A) dA^T Y^T Y``)."""
    check_pinv(a, rcond, hermitian)
    y = np.linalg.pinv(a)   # (every singular value is above the cutoff: the same bits whatever rcond is)

    def back(dy):
        yt, dyt = _mT(y), _mT(dy)
        left = dyt - a @ (y @ dyt)      # (I - A Y) Y-bar^T
        right = dyt - (dyt @ y) @ a     # Y-bar^T (I - Y A)
        return (-yt @ dy @ yt + left @ (y @ yt) + (yt @ y) @ right,)
    return y, back


RULES.update({np.einsum: _einsum, np.inner: _inner, np.kron: _kron, np.cross: _cross, np.trace: _trace,
              np.linalg.det: _det, np.linalg.slogdet: _slogdet, np.linalg.inv: _inv,
              np.linalg.solve: _solve, np.linalg.cholesky: _cholesky, np.linalg.eigh: _eigh,
              np.linalg.eigvalsh: _eigvalsh, np.linalg.svd: _svd, np.linalg.svdvals: _svdvals,
              np.linalg.pinv: _pinv, cofactor: _cofactor})
# checks, called as they are when a rule's own code is differentiated
NONDIFF.update({check_real, reads_upper, check_svd, check_pinv, check_slogdet, zero_singular, _tied_pairs,
                check_svdvals_tangent})
METHOD_RULES[(np.ndarray, "trace")] = _trace
# linear in each operand (second order without *ops): after the subscripts, or at the even positions of the
# sublist form
MULTILINEAR[_einsum] = lambda args: range(1, len(args)) if isinstance(args[0], str) else range(0, len(args) - 1, 2)
