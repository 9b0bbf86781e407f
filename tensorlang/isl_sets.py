"""Predicates as isl sets: ``to_isl`` and what every isl question about predicates builds on.

A predicate over index variables ``dims`` (outermost first) and size variables is an integer set whose
set dimensions are ``dims`` *by position* and whose parameters are the size variables *by name*, each
``>= 0``.  Data relations are not affine: ``pairs`` sees a predicate as a union of (affine part,
relation literals), and ``to_isl`` gives the union of the affine parts (exact when ``is_exact``).
``tensorlang.predicates`` (the questions: emptiness, implication, gist, projection, unique solutions)
and ``tensorlang.counting`` (point counts) both build on this module.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Iterable, Sequence

import islpy as isl

from .nodes import (
    FALSE, TRUE, Affine, And, Cmp, Exists, IndexVar, Or, Pred, RelAtom, SizeVar, box, conj, disj, walk,
)
from .traversal import free_index_vars, size_vars

dt = isl.dim_type
CTX = isl.DEFAULT_CONTEXT


# --------------------------------------------------------------------------------------------------
# small isl helpers


def isl_val(x: int) -> isl.Val:
    """An isl integer; big ints go through a string (``isl.Val(int)`` only takes int64)."""
    x = int(x)
    return isl.Val(x) if -(2**62) < x < 2**62 else isl.Val(str(x))


def val_int(v: isl.Val) -> int:
    """The Python int of an integral ``isl.Val`` (raises ValueError otherwise)."""
    if not v.is_int():
        raise ValueError(f"{v} is not an integer")
    return v.to_python()


def param_names(s) -> list[str]:
    """The names of the parameters of an isl object, in position order."""
    return [s.get_dim_name(dt.param, k) for k in range(s.dim(dt.param))]


def param_context(space: isl.Space) -> isl.Set:
    """``{ : n >= 0 }`` for every parameter of ``space`` (as a set over the space's set dims)."""
    s = isl.Set.universe(space)
    ls = isl.LocalSpace.from_space(space)
    for k in range(space.dim(dt.param)):
        c = isl.Constraint.inequality_alloc(ls).set_coefficient_val(dt.param, k, isl_val(1))
        s = s.add_constraint(c)
    return s


def nonneg(s: isl.Set) -> isl.Set:
    """``s`` intersected with ``n >= 0`` for each of its parameters."""
    return s & param_context(s.get_space())


def _space(ndims: int, params: Sequence[str], dim_names: Sequence[str] | None = None) -> isl.Space:
    names = list(dim_names) if dim_names is not None else [f"x{k}" for k in range(ndims)]
    return isl.Space.create_from_names(CTX, set=names, params=list(params))


def _dim_names(dims: Sequence[IndexVar], params: Sequence[str]) -> list[str]:
    """Display names for isl's set dimensions (never used for matching): unique, distinct from sizes."""
    out: list[str] = []
    taken = set(params)
    for k, v in enumerate(dims):
        name = v.name if v.name not in taken else f"{v.name}_{k}"
        taken.add(name)
        out.append(name)
    return out


def pieces_of(pw) -> list:
    """The ``(set, affine)`` pieces of a ``PwAff``/``PwMultiAff``, in isl's order (callback never raises)."""
    out: list = []

    def collect(s, a):
        out.append((s, a))

    pw.foreach_piece(collect)
    return out


# --------------------------------------------------------------------------------------------------
# relation atoms


def has_relations(pred: Pred) -> bool:
    """Whether ``pred`` mentions a data relation anywhere (memoised on the node)."""
    return pred.memo("tl_has_relations", lambda: any(isinstance(n, RelAtom) for n in walk(pred)))


def is_exact(pred: Pred) -> bool:
    """True when ``pred`` is affine (no relation atoms), so that ``to_isl`` is exact."""
    return not has_relations(pred)


def relation_bounds(atom: RelAtom) -> Pred:
    """``0 <= a_t < size_t`` for every argument of a relation atom: what the atom implies."""
    return box(zip(atom.args, atom.rel.type.sizes))


def over_approximation(pred: Pred) -> Pred:
    """``pred`` with each relation atom replaced by the bounds it implies (an affine superset)."""
    if not has_relations(pred):
        return pred

    def compute():
        if isinstance(pred, RelAtom):
            return relation_bounds(pred)
        if isinstance(pred, And):
            return conj(*(over_approximation(p) for p in pred.parts))
        if isinstance(pred, Or):
            return disj(*(over_approximation(p) for p in pred.parts))
        if isinstance(pred, Exists):
            return Exists(pred.var, pred.size, over_approximation(pred.body))
        return pred

    return pred.memo("tl_over_approximation", compute)


def pairs(pred: Pred) -> list[tuple[Pred, tuple[Pred, ...]]]:
    """``pred`` as a union of ``(affine part, relation literals)``: the DESIGN's "union of pairs".

    A literal is a relation atom or an ``exists`` whose body mentions a relation.  Each affine part
    includes the over-approximation of its literals, so ``affine part`` is implied by the pair, and the
    union of the affine parts is ``over_approximation(pred)``.  Subtrees without relations stay whole
    (no DNF blow-up for them).
    """
    if not has_relations(pred):
        return [] if pred is FALSE else [(pred, ())]
    if isinstance(pred, (RelAtom, Exists)):
        return [(over_approximation(pred), (pred,))]
    if isinstance(pred, Or):
        out: list = []
        for p in pred.parts:
            out.extend(pairs(p))
        return out
    if isinstance(pred, And):
        acc: list = [(TRUE, ())]
        for p in pred.parts:
            acc = [
                (conj(a, b), ra + tuple(x for x in rb if x not in ra))
                for a, ra in acc
                for b, rb in pairs(p)
            ]
        return [(a, r) for a, r in acc if a is not FALSE]
    raise TypeError(f"not a predicate: {pred!r}")


# --------------------------------------------------------------------------------------------------
# Pred -> isl.Set


class _Builder:
    """Builds isl sets for predicates over a fixed parameter list (names sorted) and dimension names."""

    def __init__(self, params: Sequence[str], dim_names: Sequence[str]):
        self.params = list(params)
        self.param_pos = {name: k for k, name in enumerate(self.params)}
        self.base_names = list(dim_names)
        self._spaces: dict[int, isl.Space] = {}

    def space(self, ndims: int) -> isl.Space:
        if ndims not in self._spaces:
            names = self.base_names[:ndims] + [f"e{k}" for k in range(len(self.base_names), ndims)]
            self._spaces[ndims] = _space(ndims, self.params, names)
        return self._spaces[ndims]

    def constraint(self, row: tuple, pos: dict, ndims: int) -> isl.Constraint | None:
        """The isl constraint of a row ``(equality, terms, const)`` (``_rows``); None for a row without
        terms, which holds everywhere or nowhere (isl wants no all-zero constraint rows)."""
        equality, terms, const = row
        if not terms:
            return None
        ls = isl.LocalSpace.from_space(self.space(ndims))
        c = isl.Constraint.equality_alloc(ls) if equality else isl.Constraint.inequality_alloc(ls)
        for var, coeff in terms:
            if isinstance(var, IndexVar):
                c = c.set_coefficient_val(dt.set, pos[id(var)], isl_val(coeff))
            else:
                c = c.set_coefficient_val(dt.param, self.param_pos[var.name], isl_val(coeff))
        return c.set_constant_val(isl_val(const))

    def build(self, p: Pred, pos: dict, ndims: int) -> isl.Set:
        """The set of ``p`` where ``pos`` maps ``id(index var)`` to its dimension."""
        if p is TRUE:
            return isl.Set.universe(self.space(ndims))
        if p is FALSE:
            return isl.Set.empty(self.space(ndims))
        if isinstance(p, Cmp):
            return self.conjunction((p,), pos, ndims)
        if isinstance(p, And):
            return self.conjunction(p.parts, pos, ndims)
        if isinstance(p, Or):
            out = isl.Set.empty(self.space(ndims))
            for q in p.parts:
                out = out | self.build(q, pos, ndims)
            return out
        if isinstance(p, RelAtom):
            return self.build(relation_bounds(p), pos, ndims)
        if isinstance(p, Exists):
            inner = dict(pos)
            inner[id(p.var)] = ndims
            body = conj(box([(p.var, p.size)]), p.body)
            s = self.build(body, inner, ndims + 1)
            return s.project_out(dt.set, ndims, 1)
        raise TypeError(f"not a predicate: {p!r}")

    def conjunction(self, parts, pos: dict, ndims: int) -> isl.Set:
        """The set of ``and`` of ``parts``: the rows of the comparisons but ``!=`` added to one set as
        constraints, every other part intersected with it."""
        out = isl.Set.universe(self.space(ndims))
        for q in parts:
            rows = _rows(q) if isinstance(q, Cmp) else None
            if rows is None or len(rows) != 1:
                out = out & (self.build(q, pos, ndims) if rows is None else self.disequality(rows, pos, ndims))
                continue
            c = self.constraint(rows[0], pos, ndims)
            if c is not None:
                out = out.add_constraint(c)
            elif not _holds(rows[0]):
                return isl.Set.empty(self.space(ndims))
        return out

    def disequality(self, rows: tuple, pos: dict, ndims: int) -> isl.Set:
        """``a != b`` as the union of ``a < b`` and ``b < a``."""
        out = isl.Set.empty(self.space(ndims))
        for row in rows:
            c = self.constraint(row, pos, ndims)
            if c is not None:
                out = out | isl.Set.universe(self.space(ndims)).add_constraint(c)
            elif _holds(row):
                return isl.Set.universe(self.space(ndims))
        return out


def _rows(p: Cmp) -> tuple:
    """``p`` as constraint rows ``(equality, terms, const)``, each ``sum(terms) + const = 0`` or ``>= 0``:
    one row, or for ``!=`` two whose union it is.  Memoised on the comparison (the rows hold its
    variables, never the comparison)."""

    def compute():
        diff: dict = {}
        for v, c in p.rhs.terms:
            diff[v] = diff.get(v, 0) + c
        for v, c in p.lhs.terms:
            diff[v] = diff.get(v, 0) - c
        terms = tuple((v, c) for v, c in diff.items() if c != 0)
        const = p.rhs.const - p.lhs.const
        if p.op == "<":
            return ((False, terms, const - 1),)
        if p.op == "<=":
            return ((False, terms, const),)
        if p.op == "=":
            return ((True, terms, const),)
        return ((False, terms, const - 1), (False, tuple((v, -c) for v, c in terms), -const - 1))

    return p.memo("isl_sets.rows", compute)


def _holds(row: tuple) -> bool:
    """Whether a row without terms holds: its constant is 0 (an equality) or >= 0."""
    equality, _, const = row
    return const == 0 if equality else const >= 0


_CACHE_SIZE = 256
_ISL_CACHE: "OrderedDict[tuple, tuple]" = OrderedDict()


def check_dims(dims: Sequence) -> tuple:
    """``dims`` as a tuple, checked: distinct index variables."""
    dims = tuple(dims)
    for d in dims:
        if not isinstance(d, IndexVar):
            raise ValueError(f"a dimension must be an IndexVar, not {d!r}")
    if len({id(d) for d in dims}) != len(dims):
        raise ValueError(f"repeated dimension in {list(dims)!r}")
    return dims


def _param_list(pred: Pred, params: Iterable) -> tuple[str, ...]:
    names = {s.name for s in size_vars(pred)}
    for p in params:
        names.add(p.name if isinstance(p, SizeVar) else str(p))
    return tuple(sorted(names))


def to_isl(pred: Pred, dims: Sequence[IndexVar], params: Iterable = ()) -> isl.Set:
    """The isl set of ``pred`` over ``dims`` (by position) and its size variables (by name).

    Relation atoms are replaced by the bounds they imply, so the set is an over-approximation unless
    ``is_exact(pred)``; ``exists`` is projected exactly.  ``params`` adds size variables (``SizeVar`` or
    names) to the space.  The set is intersected with ``n >= 0`` for every size and coalesced.
    Raises ValueError when ``pred`` has a free index variable that is not in ``dims``.
    """
    dims = check_dims(dims)
    names = _param_list(pred, params)
    key = (id(pred), tuple(id(d) for d in dims), names)
    hit = _ISL_CACHE.get(key)
    if hit is not None:
        _ISL_CACHE.move_to_end(key)
        return hit[2]
    dim_ids = {id(d) for d in dims}
    missing = [v for v in free_index_vars(pred) if id(v) not in dim_ids]
    if missing:
        raise ValueError(
            f"index variable(s) {', '.join(v.name for v in missing)} are free in the predicate "
            f"but not among the dimensions {[d.name for d in dims]}"
        )
    builder = _Builder(names, _dim_names(dims, names))
    pos = {id(d): k for k, d in enumerate(dims)}
    s = nonneg(builder.build(pred, pos, len(dims))).coalesce()
    _ISL_CACHE[key] = (pred, dims, s)
    if len(_ISL_CACHE) > _CACHE_SIZE:
        _ISL_CACHE.popitem(last=False)
    return s


def render_constraint(terms: list, const: int, equality: bool, order: Sequence) -> Pred:
    """A readable comparison for ``sum(terms) + const (= 0 | >= 0)``.

    Equalities solve for the last (innermost) variable of ``order`` with a unit coefficient
    (``k = i + j``);
    inequalities put the negative terms on the left (``0 <= i``, ``i < n``, ``i < 3``, ``j <= i + 2``).
    """
    if equality:
        for v in reversed(order):
            c = next((c for w, c in terms if w is v), 0)
            if c in (1, -1):
                rest = Affine.of([(w, -c * d) for w, d in terms if w is not v], -c * const)
                return Cmp("=", Affine.var(v), rest)
    pos = Affine.of([(v, c) for v, c in terms if c > 0])
    neg = Affine.of([(v, -c) for v, c in terms if c < 0])
    if equality:
        lhs, rhs = (pos + const, neg) if const >= 0 else (pos, neg - const)
        rank = {id(v): k for k, v in enumerate(order)}
        first = lambda a: min((rank.get(id(v), len(rank)) for v in a.index_vars), default=len(rank) + 1)
        if first(rhs) < first(lhs):
            lhs, rhs = rhs, lhs
        return Cmp("=", lhs, rhs)
    # neg <= pos + const
    if not neg.terms:
        return Cmp("<=", Affine.const_(-const), pos)
    if not pos.terms:
        return Cmp("<", neg, Affine.const_(const + 1))
    if const == -1:
        return Cmp("<", neg, pos)
    if const < -1:
        return Cmp("<", neg, pos + (const + 1))
    return Cmp("<=", neg, pos + const)


def position(var: IndexVar, dims: Sequence) -> int:
    """The position of ``var`` among ``dims`` (by identity)."""
    for k, d in enumerate(dims):
        if d is var:
            return k
    raise ValueError(f"{var!r} is not among the dimensions {list(dims)!r}")
