"""Chunked statement groups: a temporary computed chunk by chunk (of its first index) together with the
statements that read it, so that it never goes through memory.

A group is a statement ``T[t, ...] = ...`` whose target is a temporary, followed by the statements that
read ``T`` (the ones right after it; no later statement reads ``T``).  Each reader is either

* a gather ``U[k, ...] = ...``, its first variable ``k`` its *chunk variable*, or
* a reduction into a small target that runs in chunks of its first summed variable ``r`` (the chunk
  variable), ``U[g] = sum(r, ...) ...``: ``Schedule.emit_chunked``'s chunks for a 1-D target and one sum,
  else the interchanged form over each chunk's terms,

(the readers of a 1-D ``T``: a 1-D target and one sum) and reads ``T`` only at ``T[v + rest, ...]`` (all
of ``T``'s indices), ``v`` its chunk variable and ``rest`` affine in the sizes and in variables of known
extents (the sums around the access; ``g`` of a reduction).  So a chunk of the readers' chunk variables
reads a window of ``T``'s first index whose bounds are those of the chunk widened by the lowest and the
highest ``rest`` (``Reader.reach``), whole along its other indices: the group's chunks compute that
window of ``T`` into a small buffer and run the readers on it (``Schedule.emit_group``).  The gradient
of the deconvolution loss in ``(c, x)``: ``dX`` (the residual), ``dc`` (a reduction reading ``dX[i]``)
and ``dx`` (a gather reading ``dX[k - i]``, ``0 <= i < m``) in one pass over the signal; the 2-D
convolution's in ``(x, w)``: rows of ``dX``, the image adjoint reading ``dX[k0 - a, k1 - b]`` and the
kernel adjoint summing over ``dX``'s rows.
"""
from __future__ import annotations

from dataclasses import dataclass

from tensorlang.nodes import Access, Affine, Expr, IndexVar, Proj

from .ir import Program, Reduce, Stmt, path_of

__all__ = ["Group", "Reader", "accesses", "find_groups", "reads"]


@dataclass
class Reader:
    """A statement of a group that reads its temporary: ``var`` its chunk variable, ``reduction`` the
    reduction that runs in chunks (``None`` for a gather), ``reach`` the lowest and highest ``rest`` of
    its reads ``T[var + rest]`` (affine in the sizes)."""

    stmt: Stmt
    var: IndexVar
    reduction: Reduce | None
    reach: tuple[Affine, Affine]


@dataclass
class Group:
    producer: Stmt
    readers: list[Reader]

    @property
    def stmts(self) -> list[Stmt]:
        return [self.producer] + [r.stmt for r in self.readers]


def find_groups(prog: Program, chunked) -> dict[int, Group]:
    """The groups of ``prog`` by the ``id`` of their first statement; ``chunked(stmt)``: the reduction
    that ``emit_chunked`` would run in chunks for ``stmt`` (or ``None``)."""
    out: dict[int, Group] = {}
    stmts = prog.stmts
    mentioned: dict[int, list[int]] = {}  # id of a node -> the statements whose bodies may read it
    for j, s in enumerate(stmts):
        for m in _mentions(s.body):
            mentioned.setdefault(m, []).append(j)
    for k, p in enumerate(stmts):
        t = p.target
        if t.kind != "temp" or not t.dims or len(p.vars) != len(t.dims) or p.contraction is not None:
            continue
        readers = [j for j in mentioned.get(id(t.key), ()) if j > k and reads(stmts[j].body, t.key)]
        if not readers or readers != list(range(k + 1, k + 1 + len(readers))):
            continue
        targets = [stmts[j].target.key for j in readers]
        found = [_reader(stmts[j], t.key, len(t.dims), chunked(stmts[j]), targets) for j in readers]
        if all(r is not None for r in found) and sum(r.reduction is not None for r in found) <= 1:
            out[id(p)] = Group(p, found)
    return out


def _reader(stmt: Stmt, tvar, ndim: int, red: Reduce | None, targets) -> Reader | None:
    """``stmt`` as a reader of ``tvar`` (``ndim`` indices; ``None`` when it cannot be one)."""
    if not stmt.vars or len(stmt.vars) != len(stmt.target.dims) or stmt.contraction is not None:
        return None
    if ndim == 1 and (len(stmt.vars) != 1 or (red is not None and len(red.vars) != 1)):
        return None  # a 1-D temporary's chunks are long (REDUCE_CHUNK): only readers of one variable
    if any(key is not None and reads(stmt.body, key) for key in targets):  # the readers do not read one another
        return None
    if red is not None:
        var, extents = red.vars[0], {id(v): d for v, d in zip(stmt.vars, stmt.target.dims)}
    else:
        var, extents = stmt.vars[0], {}
    lows, highs = [], []
    for idx, ext in accesses(stmt.body, tvar, ndim, extents):
        if idx is None or dict(idx.terms).get(var) != 1:
            return None
        low = high = Affine.const_(idx.const)
        for v, c in idx.terms:
            if v is var:
                continue
            if not isinstance(v, IndexVar):  # a size
                low, high = low + Affine.var(v) * c, high + Affine.var(v) * c
            elif id(v) in ext:
                span = (ext[id(v)] - 1) * c
                low, high = (low + span, high) if c < 0 else (low, high + span)
            else:
                return None
        lows.append(low)
        highs.append(high)
    return Reader(stmt, var, red, (lows, highs)) if lows else None


def reads(body: Expr, key) -> bool:
    return any(True for _ in accesses(body, key, 0, {}))


def _mentions(body: Expr) -> set[int]:
    """The ids of the nodes of ``body`` that ``accesses`` visits, and of their subtrees but a sum's
    guard: every ``key`` that ``reads(body, key)`` may find (a superset, computed once per statement so
    that finding a temporary's readers does not walk every later statement)."""
    out: set[int] = set()
    stack = [body]
    while stack:
        e = stack.pop()
        if id(e) in out:
            continue
        out.add(id(e))
        if not isinstance(e, Expr):
            continue
        for c in ((e.body,) if isinstance(e, Reduce) else e.children):
            stack.extend(c if isinstance(c, tuple) else (c,))
    return out


def accesses(body: Expr, key, ndim: int, extents: dict):
    """``(index, extents)`` for each access ``key[index, ...]`` in ``body`` (``key`` the variable of an array
    of ``ndim`` dimensions; ``index`` the first of the access's ``ndim`` indices): the extents of the
    variables of the sums around it (and of ``extents``), by ``id``; ``(None, ...)`` for any other use
    of ``key``."""
    stack = [(body, extents)]
    seen = set()
    while stack:
        e, ext = stack.pop()
        if e is key:
            yield None, ext
        if not isinstance(e, Expr) or (id(e), id(ext)) in seen:
            continue
        seen.add((id(e), id(ext)))
        if isinstance(e, (Access, Proj)):
            p = path_of(e)
            if p is not None and p[0] is key:
                yield (p[2][0] if len(p[2]) == ndim and not p[1] else None), ext
                continue
        if isinstance(e, Reduce):
            ext = {**ext, **{id(v): s for v, s in zip(e.vars, e.sizes)}}
            stack.append((e.body, ext))
            continue
        for c in e.children:  # operands, and the arguments of a call (a tuple)
            stack.extend((w, ext) for w in (c if isinstance(c, tuple) else (c,)))
