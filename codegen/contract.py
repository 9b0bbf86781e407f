"""Plain dense contractions handed to BLAS.

After lowering, a reduction ``sum(k:K) alpha * X[..] * Y[..]`` whose two factors are full accesses of
dense arrays indexed only by plain variables is a matrix product when

* ``X`` is 2-D, indexed by ``(r, k)`` or ``(k, r)``; ``Y`` is 2-D, indexed by ``(k, c)`` or ``(c, k)``
  (``r != c``): ``T[r, c] = alpha * sum_k X(r, k) Y(k, c)``, a ``gemm``; or
* ``X`` is 2-D as above and ``Y`` is 1-D, ``Y[k]``: ``T[r] = alpha * sum_k X(r, k) Y[k]``, a ``gemv``;

and ``r`` (and ``c``) are bound, around the reduction, by loops over whole boxes ``[0, size)`` that no
guard on the way restricts: a generator variable of the statement or a variable of an enclosing
reduction with no guard.  Then every element of ``T`` is needed (computing it whole costs no more than
the loops did: ``r`` and ``c`` are among the loops around the reduction), so:

* a statement that *is* the contraction (``T[r, c] = sum(k) X Y`` with ``(r, c)`` its generator
  variables) is marked, and the emitter writes it with one ``gemm``/``gemv`` call into its target;
* any other occurrence is replaced by an access ``T[r, c]`` of a new temporary, computed by a new
  marked statement placed first; equal contractions (up to the names of the summed variable: the
  forward matrix-product loss repeats ``A @ B``) share one temporary.

A marked statement keeps its ``Reduce`` body, so every emitter that does not know about BLAS (CUDA)
emits it as ordinary loops; the C emitter calls ``tl_gemm``/``tl_gemv`` (``codegen.c``), which use the
BLAS routine the run time hands over (NumPy's own OpenBLAS, or SciPy's: ``codegen.runtime``) and
otherwise cache-friendly loops (``i-k-j`` order, tiled).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from tensorlang.nodes import TRUE, Access, Add, Affine, Call, Const, Expr, Guard, IndexVar, Mul, R, TensorType, Var
from tensorlang.traversal import free_index_vars

from .ir import Array, Program, Reduce, Stmt, path_of

__all__ = ["Contraction", "extract_contractions"]


@dataclass(eq=False)
class Contraction:
    """``out[r, c] = alpha * sum_k X(r, k) Y(k, c)`` (``gemm``) or ``out[r] = alpha * sum_k X(r, k) y[k]``
    (``gemv``, ``c`` is ``None``).  ``x_t``: ``X`` is stored as ``X[k][r]``; ``y_t``: ``Y`` as ``Y[c][k]``."""

    kind: str  # "gemm" or "gemv"
    alpha: float
    x: Array
    x_t: bool
    y: Array
    y_t: bool
    m: Affine | None  # extent of r (set from its binder)
    n: Affine | None  # extent of c (gemm)
    k: Affine  # extent of k


def _factors(e: Expr, out: list) -> None:
    if isinstance(e, Mul):
        _factors(e.left, out)
        _factors(e.right, out)
    else:
        out.append(e)


def _plain(a: Affine):
    """The index variable when ``a`` is exactly one (coefficient 1, no constant)."""
    if a.const == 0 and len(a.terms) == 1 and a.terms[0][1] == 1 and isinstance(a.terms[0][0], IndexVar):
        return a.terms[0][0]
    return None


class _Arrays:
    def __init__(self, prog: Program):
        self.inputs = {(id(a.key[0]), a.key[1]): a for a in prog.inputs}
        self.temps = {id(a.key): a for a in prog.temps}

    def of(self, e: Expr):
        """``(array, index variables)`` when ``e`` is a full access of a dense array by plain variables."""
        p = path_of(e)
        if p is None:
            return None
        var, projs, idx = p
        arr = self.temps.get(id(var)) if not projs else None
        if arr is None:
            arr = self.inputs.get((id(var), projs))
        if arr is None or len(idx) != len(arr.dims) or len(idx) not in (1, 2):
            return None
        vs = [_plain(a) for a in idx]
        if any(v is None for v in vs) or len(set(map(id, vs))) != len(vs):
            return None
        return arr, tuple(vs)


def match(e: Reduce, arrays: _Arrays, order=None):
    """``(Contraction, (r, c or None))`` when ``e`` is a plain dense contraction; ``order``: the output
    variables' required order (a statement's generator variables)."""
    if len(e.vars) != 1 or e.pred is not TRUE:
        return None
    k = e.vars[0]
    factors: list = []
    _factors(e.body, factors)
    alpha = 1.0
    ops = []
    for f in factors:
        if isinstance(f, Const):
            alpha *= float(f.value) if isinstance(f.value, Fraction) else f.value
        else:
            ops.append(f)
    if len(ops) != 2:
        return None
    got = [arrays.of(f) for f in ops]
    if any(g is None for g in got):
        return None
    for g in got:
        if not any(v is k for v in g[1]):
            return None
    mats = [g for g in got if len(g[1]) == 2]
    vecs = [g for g in got if len(g[1]) == 1]
    free = [v for v in free_index_vars(e) if v is not k]
    if len(mats) == 2:
        (xa, xv), (ya, yv) = mats
        xr = xv[1] if xv[0] is k else xv[0]
        yc = yv[1] if yv[0] is k else yv[0]
        if xr is yc or xr is k or yc is k:
            return None
        if order is not None:
            if tuple(map(id, order)) == (id(yc), id(xr)):
                (xa, xv), (ya, yv), xr, yc = (ya, yv), (xa, xv), yc, xr
            elif tuple(map(id, order)) != (id(xr), id(yc)):
                return None
        if {id(v) for v in free} != {id(xr), id(yc)}:
            return None
        x_t = xv[0] is k
        y_t = yv[1] is k
        return Contraction("gemm", alpha, xa, x_t, ya, y_t, None, None, e.sizes[0]), (xr, yc)
    if len(mats) == 1 and len(vecs) == 1:
        (xa, xv), (ya, yv) = mats[0], vecs[0]
        xr = xv[1] if xv[0] is k else xv[0]
        if xr is k or (order is not None and tuple(map(id, order)) != (id(xr),)):
            return None
        if {id(v) for v in free} != {id(xr)}:
            return None
        return Contraction("gemv", alpha, xa, xv[0] is k, ya, False, None, None, e.sizes[0]), (xr, None)
    return None


def extract_contractions(prog: Program, namer) -> int:
    """Mark or extract the plain dense contractions of ``prog`` (see the module docstring); returns
    how many BLAS calls the program makes."""
    arrays = _Arrays(prog)
    new_stmts: list[Stmt] = []
    count = 0
    shared: dict = {}
    for stmt in prog.stmts:
        body = stmt.body
        if stmt.vars and isinstance(body, Reduce):
            got = match(body, arrays, order=stmt.vars)
            if got is not None:
                con, _ = got
                con.m = stmt.target.dims[0]
                con.n = stmt.target.dims[1] if con.kind == "gemm" else None
                con.k = body.sizes[0]
                stmt.contraction = con
                new_stmts.append(stmt)
                count += 1
                continue
        bound = {id(v): s for v, s in zip(stmt.vars, stmt.target.dims)}
        restricted: set[int] = set()
        top_pred = None
        if isinstance(body, Guard):
            top_pred, body = body.pred, body.body
            restricted |= {id(v) for v in free_index_vars(top_pred)}
        extracted: list[Stmt] = []
        memo: dict = {}

        def visit(e: Expr, bound: dict, restricted: frozenset) -> Expr:
            key = (id(e), tuple(sorted(bound)), restricted)
            hit = memo.get(key)
            if hit is not None:
                return hit
            out = e
            if isinstance(e, Reduce):
                got = match(e, arrays)
                if got is not None:
                    con, (r, c) = got
                    outs = [r] if c is None else [r, c]
                    if all(id(v) in bound and id(v) not in restricted for v in outs):
                        out = _replacement(e, con, outs, bound)
                if out is e:
                    inner = dict(bound)
                    if e.pred is TRUE:
                        inner.update({id(v): s for v, s in zip(e.vars, e.sizes)})
                    nb = e.body
                    new = visit(nb, inner, restricted)
                    if new is not nb:
                        out = Reduce(e.vars, e.sizes, e.pred, new)
            elif isinstance(e, Guard):
                new = visit(e.body, bound, restricted | frozenset(id(v) for v in free_index_vars(e.pred)))
                if new is not e.body:
                    out = Guard(e.pred, new)
            elif isinstance(e, (Add, Mul)):
                a, b = visit(e.left, bound, restricted), visit(e.right, bound, restricted)
                if a is not e.left or b is not e.right:
                    out = type(e)(a, b)
            elif isinstance(e, Call):
                args = tuple(visit(a, bound, restricted) for a in e.args)
                if any(x is not y for x, y in zip(args, e.args)):
                    out = Call(e.fn, args)
            memo[key] = out
            return out

        def _replacement(e: Reduce, con: Contraction, outs, bound) -> Expr:
            nonlocal count
            con.m = bound[id(outs[0])]
            con.n = bound[id(outs[1])] if len(outs) == 2 else None
            con.k = e.sizes[0]
            sig = (con.kind, con.alpha, id(con.x), con.x_t, id(con.y), con.y_t, con.m, con.n, con.k)
            arr = shared.get(sig)
            if arr is None:
                cname = namer.fresh("mm")
                dims = (con.m,) if con.n is None else (con.m, con.n)
                t = R
                for d in reversed(dims):
                    t = TensorType(d, t)
                var = Var(cname + "#blas", t)
                arr = Array(cname, dims, "temp", var, f"BLAS {con.kind}")
                prog.temps.append(arr)
                arrays.temps[id(var)] = arr
                prog.let_arrays[id(var)] = arr
                s = Stmt(arr, tuple(outs), e)
                s.contraction = con
                extracted.append(s)
                shared[sig] = arr
                count += 1
            ref: Expr = arr.key
            for v in outs:
                ref = Access(ref, Affine.var(v))
            return ref

        new_body = visit(body, bound, frozenset(restricted))
        if new_body is not body:
            stmt.body = Guard(top_pred, new_body) if top_pred is not None else new_body
        new_stmts.extend(extracted)
        new_stmts.append(stmt)
    prog.stmts = new_stmts
    prog.blas = count > 0
    return count
