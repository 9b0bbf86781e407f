"""Predicates and their isl view: every question about predicates is answered here.

A predicate over index variables ``dims`` (outermost first) and size variables is an integer set: its
isl view is an ``isl.Set`` whose set dimensions are ``dims`` *by position* (display names of index
variables may collide, so nothing is ever matched by a dimension's name) and whose parameters are the
size variables *by name*.  Every size is non-negative, so every set is intersected with ``n >= 0`` for
each of its parameters.

Data relations ``R(a0, ...)`` are not affine.  A predicate is seen as a union of pairs
``(affine part, relation literals)`` (``pairs``): the literals are relation atoms, or ``exists`` nodes
whose bodies mention relations, and each affine part includes the bounds ``0 <= a_t < size_t`` that
its literals imply.  ``to_isl`` gives the union of the affine parts: an over-approximation, exact when
``is_exact``.  Every query is exact on affine predicates and conservative with relations.  That view
(``to_isl``, ``pairs`` and the small isl helpers) is ``tensorlang.isl_sets``, which the point counts of
``tensorlang.counting`` build on too, so that counting does not import this module.

The queries: ``to_isl``/``from_isl``; ``is_empty``, ``is_satisfiable``, ``implies``; ``simplify`` (isl's
``gist`` against what the context implies); ``project`` (exact elimination of ``exists``);
``solve_unique``/``solve_unique_many`` ("this sum has at most one solution, and here it is");
``injective`` ("this read of a tensor reads each element at most once");
``sample_point`` (a concrete witness for error messages); and point counts (``count``,
``count_projection``, ``count_symbolic``, ``count_projection_symbolic``, ``count_symbolic_sum``),
implemented in ``tensorlang.counting``.

isl traps this module respects (see the shared islpy cookbook): no isl object is ever a dict key; no
Python callback passed to isl can raise; ``count_val`` is only called with every parameter fixed.
"""
from __future__ import annotations

import itertools
from typing import Sequence

import islpy as isl

from .alpha import alpha_equal
from .errors import UnsupportedError
from .nodes import (
    FALSE, TRUE, Affine, And, Cmp, Exists, IndexVar, Pred, RelAtom, SizeVar, box, compare, conj, disj,
)
from .isl_sets import (
    check_dims, dt, has_relations, is_exact, isl_val, nonneg, over_approximation, pairs, param_context, param_names,
    pieces_of, position, render_constraint, to_isl, val_int,
)
from .traversal import free_index_vars, size_vars


__all__ = [
    "to_isl", "from_isl", "is_exact", "has_relations", "over_approximation", "pairs",
    "is_empty", "is_satisfiable", "implies", "simplify", "project", "solve_unique", "solve_unique_many", "injective",
    "sample_point", "count", "count_projection", "count_symbolic", "count_projection_symbolic",
    "count_symbolic_sum",
    "param_context", "isl_val",
]


# --------------------------------------------------------------------------------------------------
# isl.Set -> Pred


def _constraint_terms(c, set_vars: Sequence, params: Sequence[str]) -> tuple[list, int]:
    """The ``(var, coeff)`` terms and the constant of a div-free isl constraint."""
    terms = []
    for k, v in enumerate(set_vars):
        coeff = val_int(c.get_coefficient_val(dt.set, k))
        if coeff:
            terms.append((v, coeff))
    for k, name in enumerate(params):
        coeff = val_int(c.get_coefficient_val(dt.param, k))
        if coeff:
            terms.append((SizeVar(name), coeff))
    return terms, val_int(c.get_constant_val())


def _sort_key(terms: list, equality: bool, order: Sequence):
    """Outer dimensions first; equalities, then lower bounds, then upper bounds of a dimension."""
    rank = {id(v): k for k, v in enumerate(order)}
    inner = max((rank[id(v)] for v, _ in terms if id(v) in rank), default=-1)
    sign = next((c for v, c in terms if id(v) in rank and rank[id(v)] == inner), 0)
    return (inner, 0 if equality else (1 if sign > 0 else 2))


def _constraints(bs: isl.BasicSet, set_vars: Sequence) -> list[tuple] | None:
    """The constraints of a basic set as ``(terms, const, kind)``, kind ``"="`` or ``">="``;
    constant rows dropped; None when one of them is false."""
    params = param_names(bs)
    out = []
    for c in bs.get_constraints():
        terms, const = _constraint_terms(c, set_vars, params)
        kind = "=" if c.is_equality() else ">="
        if not terms:
            if (const == 0) if kind == "=" else (const >= 0):
                continue
            return None
        out.append((tuple(terms), const, kind))
    return out


def _render_constraints(items: Sequence[tuple], order: Sequence) -> Pred:
    """The conjunction of ``(terms, const, kind)`` constraints (kind ``= >= !=``), outer dims first."""
    rendered = []
    for terms, const, kind in items:
        p = render_constraint(list(terms), const, kind != ">=", order)
        if kind == "!=":
            p = Cmp("!=", p.lhs, p.rhs)
        key = _sort_key(terms, kind != ">=", order)
        rendered.append(((key[0], 3) if kind == "!=" else key, p))
    rendered.sort(key=lambda t: t[0])
    return conj(*(p for _, p in rendered))


def _render_basic(bs: isl.BasicSet, set_vars: Sequence, order: Sequence) -> Pred:
    items = _constraints(bs, set_vars)
    return FALSE if items is None else _render_constraints(items, order)


def _rows(bs: isl.BasicSet) -> list[tuple[tuple, int]]:
    """The inequalities of a div-free basic set as ``(coefficients over set dims and params, const)``,
    each equality given as its two halves."""
    nset, npar = bs.dim(dt.set), bs.dim(dt.param)
    out = []
    for c in bs.get_constraints():
        co = tuple(val_int(c.get_coefficient_val(dt.set, k)) for k in range(nset))
        co += tuple(val_int(c.get_coefficient_val(dt.param, k)) for k in range(npar))
        const = val_int(c.get_constant_val())
        out.append((co, const))
        if c.is_equality():
            out.append((tuple(-a for a in co), -const))
    return out


def _row_set(space: isl.Space, co: tuple, const: int) -> isl.Set:
    """``co . (dims, params) + const >= 0``."""
    nset = space.dim(dt.set)
    c = isl.Constraint.inequality_alloc(isl.LocalSpace.from_space(space))
    for k, a in enumerate(co):
        if a:
            c = c.set_coefficient_val(dt.set if k < nset else dt.param, k if k < nset else k - nset, isl_val(a))
    return isl.Set.universe(space).add_constraint(c.set_constant_val(isl_val(const)))


def _join_disequalities(items: list[list], space: isl.Space) -> list[list]:
    """Join disjuncts ``[hull, disequalities]`` whose union is ``hull' and e != v`` for one more
    disequality (isl writes ``e != v`` as ``e <= v - 1 or e >= v + 1``), while any pair joins.
    Each candidate ``e, v`` comes from a pair of opposite inequalities one value apart, and the join
    is checked by isl, so the result always means the same set."""
    changed = True
    while changed:
        changed = False
        for a, b in itertools.combinations(range(len(items)), 2):
            joined = _join_pair(items[a], items[b], space)
            if joined is not None:
                items[a] = joined
                del items[b]
                changed = True
                break
    return items


def _item_set(item: list, space: isl.Space) -> isl.Set:
    s = isl.Set.from_basic_set(item[0])
    for co, const in item[1]:  # co . x + const != 0
        s = s & (_row_set(space, co, const - 1) | _row_set(space, tuple(-a for a in co), -const - 1))
    return s


def _drop_redundant(hull: isl.BasicSet, nes: list, union: isl.Set, space: isl.Space) -> isl.BasicSet:
    """``hull`` without the constraints that the disequalities make redundant (e.g. the cut corners
    ``1 <= i + j`` of ``0 <= i, j and i != j``)."""
    kept = list(hull.get_constraints())
    k = 0
    while k < len(kept):
        trial = isl.BasicSet.universe(hull.get_space())
        for c in kept[:k] + kept[k + 1:]:
            trial = trial.add_constraint(c)
        if _item_set([trial, nes], space).is_equal(union):
            kept.pop(k)
        else:
            k += 1
    out = isl.BasicSet.universe(hull.get_space())
    for c in kept:
        out = out.add_constraint(c)
    return out


def _join_pair(x: list, y: list, space: isl.Space) -> list | None:
    if len(x[1]) != len(y[1]) or any(r not in y[1] for r in x[1]):
        return None
    union = (_item_set(x, space) | _item_set(y, space)).coalesce()
    rows_y = _rows(y[0])
    for co, ca in _rows(x[0]):
        neg = tuple(-a for a in co)
        for co2, cb in rows_y:
            if co2 != neg or ca + cb != -2:
                continue
            hull = union.convex_hull()
            nes = x[1] + [(co, ca + 1)]
            if _item_set([hull, nes], space).is_equal(union):
                return [_drop_redundant(hull, nes, union, space), nes]
    return None


def _bracket_candidates(t: isl.BasicSet, k: int) -> list[tuple[str, list, int]]:
    """Candidate bounds (affine in the params) for set dim ``k`` of ``t``: ``('lo'|'hi', terms, const)``.

    From each constraint of the projection onto ``x = x_k``, normalised to ``a*x >= -r`` or
    ``a*x <= r`` with ``a > 0``: first ``-r`` or ``r`` itself (exact when ``a = 1``, otherwise only a
    guess that ``bracket`` verifies), then ``r / a`` with each coefficient rounded outwards, which is
    always a valid bound because sizes are non-negative."""
    nd = t.dim(dt.set)
    proj = isl.Set.from_basic_set(t).project_out(dt.set, k + 1, nd - k - 1).project_out(dt.set, 0, k)
    hull = proj.remove_divs().simple_hull()
    params = param_names(hull)
    out = []
    for c in hull.get_constraints():
        a = val_int(c.get_coefficient_val(dt.set, 0))
        if a == 0:
            continue
        rest = [val_int(c.get_coefficient_val(dt.param, j)) for j in range(len(params))]
        const = val_int(c.get_constant_val())
        if c.is_equality() and a < 0:
            a, rest, const = -a, [-r for r in rest], -const
        if c.is_equality():  # x = (-rest - const) / a
            bounds = [("lo", [-r for r in rest], -const, a), ("hi", [-r for r in rest], -const, a)]
        elif a > 0:  # x >= (-rest - const) / a
            bounds = [("lo", [-r for r in rest], -const, a)]
        else:  # x <= (rest + const) / -a
            bounds = [("hi", rest, const, -a)]
        for side, num, cst, d in bounds:
            rnd = (lambda v: v // d) if side == "lo" else (lambda v: -((-v) // d))
            out.append((side, list(zip(params, num)), cst))
            if d != 1:
                out.append((side, [(p, rnd(v)) for p, v in zip(params, num)], rnd(cst)))
    out.append(("lo", [], 0))
    return out


def bracket(t: isl.BasicSet | isl.Set, k: int) -> tuple[Affine, Affine] | None:
    """Affine bounds ``lo <= x_k <= hi`` in the size variables that hold on all of ``t`` (verified by
    isl), or None.  Used to write a div or a projected variable as ``exists(x': hi - lo + 1)``."""
    t = isl.Set.from_basic_set(t) if isinstance(t, isl.BasicSet) else t
    t = nonneg(t)
    if t.is_empty():
        return Affine.const_(0), Affine.const_(-1)
    space = t.get_space()
    ls = isl.LocalSpace.from_space(space)
    names = param_names(t)
    found: dict[str, Affine] = {}
    for bs in t.get_basic_sets():
        for side, terms, const in _bracket_candidates(bs, k):
            if side in found:
                continue
            c = isl.Constraint.inequality_alloc(ls)
            sgn = 1 if side == "lo" else -1  # lo: x - (terms + const) >= 0 ; hi: terms + const - x >= 0
            c = c.set_coefficient_val(dt.set, k, isl_val(sgn))
            for name, r in terms:
                if r:
                    c = c.set_coefficient_val(dt.param, names.index(name), isl_val(-sgn * r))
            c = c.set_constant_val(isl_val(-sgn * const))
            if t.is_subset(isl.Set.universe(space).add_constraint(c)):
                found[side] = Affine.of([(SizeVar(n), r) for n, r in terms], const)
        if len(found) == 2:
            return found["lo"], found["hi"]
    return None


def from_isl(s: isl.Set | isl.BasicSet, dims: Sequence[IndexVar], context: isl.Set | None = None) -> Pred:
    """A readable predicate (a DNF of comparisons) over ``dims`` (by position) and the set's
    parameters (as ``SizeVar``s by name).

    Facts ``n >= 0`` about sizes are dropped (they always hold).  Integer divisions (strides) are
    written with ``exists`` over a fresh index variable: ``i mod 2 = 0`` with ``0 <= i < n`` becomes
    ``exists(k: n) i = 2*k and ...``; the range of the fresh variable is proved by isl to cover every
    value the division takes.  Raises ``UnsupportedError`` when no affine range can be found.
    Disjuncts that together say ``e != v`` are joined into one with ``e != v``.  With ``context`` (a
    set over the same space), constraints the context implies are left out (isl ``gist``): the result
    then means ``s`` only where the context holds.
    """
    dims = check_dims(dims)
    if isinstance(s, isl.BasicSet):
        s = isl.Set.from_basic_set(s)
    if s.dim(dt.set) != len(dims):
        raise ValueError(f"the set has {s.dim(dt.set)} dimensions, but {len(dims)} were given")
    s = s.gist_params(param_context(s.params().get_space())) if s.dim(dt.param) else s
    if s.is_empty():
        return FALSE
    plain, parts = [], []
    for bs in s.get_basic_sets():
        if bs.dim(dt.div):
            parts.append(_basic_to_pred(bs, dims))
        else:
            plain.append([bs, []])
    if len(plain) > 1:
        plain = _join_disequalities(plain, s.get_space())
    return disj(*(_render_item(item, dims, context) for item in plain), *parts)


def _render_item(item: list, dims: tuple, context: isl.Set | None) -> Pred:
    hull, nes = item
    if context is not None:
        hull = isl.Set.from_basic_set(hull).gist(context).get_basic_sets()
        hull = hull[0] if hull else None
    items = _constraints(hull, dims) if hull is not None else None
    if items is None:
        return FALSE
    nset = len(dims)
    params = param_names(item[0])
    for co, const in nes:
        terms = [(dims[k], a) for k, a in enumerate(co[:nset]) if a]
        terms += [(SizeVar(params[k]), a) for k, a in enumerate(co[nset:]) if a]
        items.append((tuple(terms), const, "!="))
    return _render_constraints(items, dims)


def _basic_to_pred(bs: isl.BasicSet, dims: tuple) -> Pred:
    ndiv = bs.dim(dt.div)
    if ndiv == 0:
        return _render_basic(bs, dims, dims)
    lifted = isl.Set.from_basic_set(bs.lift().flatten()).remove_redundancies()
    if lifted.is_empty():
        return FALSE
    t = lifted.get_basic_sets()[0]
    nd = len(dims)
    brackets = []
    for j in range(ndiv):
        t, b = _bounded_division(t, nd + j, nd)
        if b is None:
            raise UnsupportedError(f"cannot bound the integer division {bs.get_div(j)} by sizes")
        brackets.append(b)
    # write div_j = lo_j + k_j with k_j in [0, hi_j - lo_j + 1), dropping the bounds the exists implies
    space = t.get_space()
    names = param_names(t)
    box = isl.Set.universe(space)
    for j, (lo, hi) in enumerate(brackets):
        box = box & _affine_bound_set(space, nd + j, lo, 1, names) & _affine_bound_set(space, nd + j, hi, -1, names)
    body_set = isl.Set.from_basic_set(t).gist(box)
    qs = [IndexVar("q") for _ in range(ndiv)]
    order = list(dims) + qs
    body = disj(*(_render_basic(b, order, order) for b in body_set.get_basic_sets()))
    from .substitute import substitute_index

    fresh = [IndexVar("k") for _ in range(ndiv)]
    body = substitute_index(body, {q: lo + Affine.var(f) for q, f, (lo, _) in zip(qs, fresh, brackets)})
    for f, (lo, hi) in reversed(list(zip(fresh, brackets))):
        body = Exists(f, hi - lo + 1, body)
    return body


def _bounded_division(t: isl.BasicSet, k: int, nd: int):
    """``(t', (lo, hi))``: the lifted division at set dim ``k`` of ``t`` with size bounds.

    isl may pick an unbounded representative (``floor((i + j)/2)`` where only ``i - j`` is bounded);
    then the division is replaced by ``q - sum(c_v * x_v)`` for small ``c`` until one is bounded."""
    b = bracket(t, k)
    if b is not None or nd > 4:
        return t, b
    for coeffs in itertools.product((0, 1, -1), repeat=nd):
        if not any(coeffs):
            continue
        shifted = _shift_dim(t, k, coeffs)
        b = bracket(shifted, k)
        if b is not None:
            return shifted, b
    return t, None


def _shift_dim(t: isl.BasicSet, k: int, coeffs: Sequence[int]) -> isl.BasicSet:
    """``t`` with set dim ``k`` (q) replaced by ``q' = q - sum(coeffs[v] * x_v)``."""
    s = isl.Set.from_basic_set(t).insert_dims(dt.set, k + 1, 1)  # q' right after q
    ls = isl.LocalSpace.from_space(s.get_space())
    c = isl.Constraint.equality_alloc(ls).set_coefficient_val(dt.set, k + 1, isl_val(1))
    c = c.set_coefficient_val(dt.set, k, isl_val(-1))
    for v, a in enumerate(coeffs):
        if a:
            c = c.set_coefficient_val(dt.set, v, isl_val(a))
    s = s.add_constraint(c).project_out(dt.set, k, 1).remove_redundancies()
    return s.get_basic_sets()[0]


def _affine_bound_set(space: isl.Space, k: int, bound: Affine, sgn: int, names: list) -> isl.Set:
    """``x_k >= bound`` (sgn 1) or ``x_k <= bound`` (sgn -1), bound affine in sizes."""
    c = isl.Constraint.inequality_alloc(isl.LocalSpace.from_space(space))
    c = c.set_coefficient_val(dt.set, k, isl_val(sgn))
    for v, r in bound.terms:
        c = c.set_coefficient_val(dt.param, names.index(v.name), isl_val(-sgn * r))
    c = c.set_constant_val(isl_val(-sgn * bound.const))
    return isl.Set.universe(space).add_constraint(c)


# --------------------------------------------------------------------------------------------------
# decisions


def _set(pred: Pred, dims, context: Pred = TRUE) -> isl.Set:
    """The affine over-approximation of ``pred and context``."""
    return to_isl(conj(pred, context), dims) if context is not TRUE else to_isl(pred, dims)


def is_empty(pred: Pred, dims: Sequence[IndexVar], context: Pred = TRUE) -> bool:
    """True when ``pred and context`` holds nowhere, for every value of the sizes (>= 0).

    With relation atoms this is conservative: True only when the affine over-approximation is empty.
    """
    return _set(pred, dims, context).is_empty()


def is_satisfiable(pred: Pred, dims: Sequence[IndexVar], context: Pred = TRUE) -> bool:
    """``not is_empty``: with relation atoms, "may be satisfiable" (for some relation data)."""
    return not is_empty(pred, dims, context)


def implies(context: Pred, pred: Pred, dims: Sequence[IndexVar]) -> bool:
    """True when ``context`` implies ``pred`` (``context`` is a subset of ``pred``) for all sizes >= 0.

    Conservative with relation atoms: a context pair ``(B, S)`` is covered by the pairs of ``pred``
    whose relation literals all occur in ``S``; True only when every context pair is covered.
    """
    if pred is TRUE or context is FALSE:
        return True
    if is_exact(pred) and _conjuncts_of(pred, context):
        return True  # what isl would say, without building the sets (the joins of an adjoint ask this)
    # both sets over the sizes of both, each size >= 0 (a context without n knows n >= 0 too)
    sizes = size_vars(conj(context, pred))
    if is_exact(pred):
        return to_isl(context, dims, sizes).is_subset(to_isl(pred, dims, sizes))
    pred_pairs = pairs(pred)
    for b, lits in pairs(context):
        cover = [a for a, rels in pred_pairs if all(r in lits or _witnessed(r, b, lits, dims) for r in rels)]
        target = to_isl(disj(*cover), dims, sizes) if cover else None
        ctx_set = to_isl(b, dims, sizes)
        if target is None:
            if not ctx_set.is_empty():
                return False
        elif not ctx_set.is_subset(target):
            return False
    return True


def _conjuncts_of(pred: Pred, context: Pred) -> bool:
    """Whether every conjunct of ``pred`` is (the same object as) a conjunct of ``context``."""
    known = context.parts if isinstance(context, And) else (context,)
    return all(any(q is k for k in known) for q in (pred.parts if isinstance(pred, And) else (pred,)))


def _witnessed(lit: Pred, affine: Pred, lits: Sequence[Pred], dims: Sequence[IndexVar]) -> bool:
    """Whether the pair ``(affine, lits)`` implies the literal ``exists(v0:s0) ... exists(vk:sk) B`` by a
    witness: values of the bound variables that make a relation atom of ``B`` one of ``lits`` (matched
    argument by argument, each bound variable with coefficient +-1), under which the pair implies ``B``
    and the bounds ``0 <= vk < sk``.  ``[E(i, k)]`` implies ``exists(i1:n) E(i1, k) and i1 < n`` (i1 = i)."""
    if not isinstance(lit, Exists):
        return False
    bound, body = [], lit
    while isinstance(body, Exists):
        bound.append((body.var, body.size))
        body = body.body
    parts = body.parts if isinstance(body, And) else (body,)
    known = conj(affine, *lits)
    for atom in parts:
        if not isinstance(atom, RelAtom):
            continue
        for other in lits:
            if not isinstance(other, RelAtom) or other.rel is not atom.rel:
                continue
            value = _unify(atom.args, other.args, [v for v, _ in bound])
            if value is None:
                continue
            from .substitute import substitute_index

            goal = conj(substitute_index(body, value), box((value[v], s) for v, s in bound))
            if implies(known, goal, dims):
                return True
    return False


def _unify(args: Sequence[Affine], targets: Sequence[Affine], unknowns: Sequence[IndexVar]) -> dict | None:
    """Values of ``unknowns`` (each with coefficient +-1 where it is solved for) making every ``args[t]``
    equal to ``targets[t]``; None if there are none such or some unknown stays free."""
    value: dict = {}
    for a, t in zip(args, targets):
        a = a.substitute(value)
        free = [(v, c) for v, c in a.terms if any(v is u for u in unknowns)]
        if not free:
            if a != t:
                return None
            continue
        if len(free) > 1 or abs(free[0][1]) != 1:
            return None
        v, c = free[0]
        value[v] = (t - (a - Affine.var(v) * c)) * c
    return value if all(u in value for u in unknowns) else None


def simplify(pred: Pred, dims: Sequence[IndexVar], context: Pred = TRUE) -> Pred:
    """An equivalent, simpler predicate under ``context`` (``simplify(p, c) and c == p and c``).

    TRUE when the context implies ``pred``, FALSE when ``pred and context`` is empty; otherwise isl's
    ``gist`` of each pair's affine part against the context (and the bounds of the pair's relation
    literals, which are kept beside it), coalesced and converted back.  A result equal to ``pred`` up to
    the names of its bound variables is ``pred`` itself (converting back names an ``exists`` afresh), so
    that a rewriting driver that simplifies to a fixed point reaches one.
    """
    if pred is TRUE or pred is FALSE:
        return pred
    out = _simplified(pred, dims, context)
    return pred if out is not pred and alpha_equal(out, pred) else out


def _simplified(pred: Pred, dims: Sequence[IndexVar], context: Pred) -> Pred:
    if implies(context, pred, dims):
        return TRUE
    if is_empty(pred, dims, context):
        return FALSE
    ctx = to_isl(context, dims, size_vars(pred))
    try:
        if is_exact(pred):
            return _gisted(to_isl(pred, dims), ctx, dims)
        groups: list[tuple[tuple, list]] = []
        for a, lits in pairs(pred):
            for key, members in groups:
                if len(key) == len(lits) and all(x in key for x in lits):
                    members.append(a)
                    break
            else:
                groups.append((lits, [a]))
        out = []
        for lits, members in groups:
            known = ctx & to_isl(conj(*(over_approximation(x) for x in lits)), dims, size_vars(pred))
            affine = to_isl(disj(*members), dims)
            if (affine & known).is_empty():
                continue
            # a literal that the context and the rest of its pair imply is dropped
            kept = list(lits)
            for x in lits:
                rest = [y for y in kept if y is not x]
                if implies(conj(context, disj(*members), *rest), x, dims):
                    kept = rest
            out.append(conj(_gisted(affine, known, dims), *kept))
        return disj(*out)
    except UnsupportedError:
        return pred


def _gisted(s: isl.Set, ctx: isl.Set, dims) -> Pred:
    if ctx.is_subset(s):
        return TRUE
    g = s.coalesce().gist(ctx).coalesce()
    return from_isl(g, dims, ctx)


# --------------------------------------------------------------------------------------------------
# projection


def project(pred: Pred, var: IndexVar, dims: Sequence[IndexVar]) -> Pred:
    """``exists var. pred`` with ``var`` eliminated exactly (isl ``project_out``), as a predicate over
    the other dims.  Relation literals that do not mention ``var`` are kept beside the projected affine
    part; a pair whose literals mention ``var`` becomes ``exists(var': hi - lo + 1)`` over the range isl
    proves for ``var`` (UnsupportedError if there is none, i.e. var is unbounded)."""
    dims = check_dims(dims)
    k = position(var, dims)
    rest = dims[:k] + dims[k + 1:]
    if is_exact(pred):
        return from_isl(to_isl(pred, dims).project_out(dt.set, k, 1).coalesce(), rest)
    out = []
    for a, lits in pairs(pred):
        s = to_isl(a, dims)
        if s.is_empty():
            continue
        if not any(var in free_index_vars(x) for x in lits):
            out.append(conj(from_isl(s.project_out(dt.set, k, 1).coalesce(), rest), *lits))
            continue
        b = bracket(s, k)
        if b is None:
            raise UnsupportedError(f"cannot eliminate {var.name}: it has no bounds in the sizes")
        lo, hi = b
        from .substitute import substitute_index

        fresh = var.fresh()
        body = substitute_index(conj(a, *lits), {var: lo + Affine.var(fresh)})
        out.append(Exists(fresh, hi - lo + 1, body))
    return disj(*out)


# --------------------------------------------------------------------------------------------------
# unique solutions


def _aff_to_affine(aff: isl.Aff, in_vars: Sequence) -> Affine | None:
    """An isl ``Aff`` over ``in_vars`` and parameters as an ``Affine``; None if it needs a division."""
    if aff.dim(dt.div) > 0:
        return None
    vals = [(v, aff.get_coefficient_val(dt.in_, k)) for k, v in enumerate(in_vars)]
    vals += [(SizeVar(n), aff.get_coefficient_val(dt.param, k)) for k, n in enumerate(param_names(aff))]
    const = aff.get_constant_val()
    if not const.is_int() or not all(c.is_int() for _, c in vals):
        return None
    return Affine.of([(v, c.to_python()) for v, c in vals], const.to_python())


def solve_unique_many(
    pred: Pred, vars: Sequence[IndexVar], dims: Sequence[IndexVar], context: Pred = TRUE
) -> list[tuple[Pred, dict]] | None:
    """If, for every value of the other dims and the sizes (>= 0), at most one value of ``vars``
    satisfies ``pred``, the solution as pieces ``(guard, {var: affine})``: ``guard`` is a predicate over
    the other dims saying where a solution exists (gisted against ``context``, a predicate over the
    other dims), the affines are in the other dims and sizes with integer coefficients.  Otherwise (or
    when the solution needs a floor division) None.  ``[]`` means no solution anywhere.

    With relation atoms, uniqueness is decided on the affine over-approximation (sound), and each guard
    carries ``pred`` with the solution substituted (the relation atoms at the solution).
    """
    dims = check_dims(dims)
    vars = tuple(vars)
    for v in vars:
        position(v, dims)
    others = tuple(d for d in dims if all(d is not v for v in vars))
    s = to_isl(pred, dims)
    m = isl.Map.from_range(s)
    out_vars = list(dims)
    for d in others:  # move each other dim, in order, to the end of the domain tuple
        k = next(j for j, w in enumerate(out_vars) if w is d)
        m = m.move_dims(dt.in_, m.dim(dt.in_), dt.out, k, 1)
        out_vars.pop(k)
    ctx = to_isl(context, others, size_vars(pred))
    m = m.intersect_domain(ctx)
    if not m.is_single_valued():
        return None
    found: list[list] = []  # [domain, solution], pieces with the same solution joined
    for dom, maff in pieces_of(m.as_pw_multi_aff()):
        dom = nonneg(dom) & ctx
        if dom.is_empty():
            continue
        sol = [_aff_to_affine(maff.get_at(j), others) for j in range(len(out_vars))]
        if any(a is None for a in sol):
            return None
        for piece in found:
            if all(a is b for a, b in zip(piece[1], sol)):
                piece[0] = (piece[0] | dom).coalesce()
                break
        else:
            found.append([dom, sol])
    result = []
    for dom, sol in found:
        solution = {v: sol[out_vars.index(v)] for v in vars}
        try:
            guard = _gisted(dom, ctx, others)
        except UnsupportedError:
            return None
        if not is_exact(pred):
            from .substitute import substitute_index

            at = substitute_index(pred, solution)
            guard = conj(guard, simplify(at, others, conj(context, guard)))
        result.append((guard, solution))
    return result


def injective(index: Sequence[Affine], loops: Sequence[tuple[IndexVar, Affine]], pred: Pred = TRUE) -> bool:
    """Whether the points of the ``loops`` (each ``(var, size)``) where ``pred`` holds go one-to-one to
    ``index`` (affine in the loop variables and the sizes), whatever the sizes: a tensor read at
    ``index`` there reads each element at most once.  ``False`` where isl cannot tell."""
    if not loops:
        return True
    variables = tuple(v for v, _ in loops)
    ks = tuple(IndexVar("k") for _ in index)
    p = conj(box(loops), pred, *(compare("=", k, a) for k, a in zip(ks, index)))
    try:
        s = to_isl(p, ks + variables)
    except UnsupportedError:
        return False
    # the map from the index to the loop points is single-valued: at most one point reads each element
    m = isl.Map.from_range(s).move_dims(dt.in_, 0, dt.out, 0, len(ks))
    return m.is_single_valued()


def solve_unique(
    pred: Pred, var: IndexVar, dims: Sequence[IndexVar], context: Pred = TRUE
) -> list[tuple[Pred, Affine]] | None:
    """``solve_unique_many`` for one variable: pieces ``(guard, affine)`` or None."""
    sol = solve_unique_many(pred, (var,), dims, context)
    if sol is None:
        return None
    return [(g, d[var]) for g, d in sol]


# --------------------------------------------------------------------------------------------------
# witnesses


def sample_point(pred: Pred, dims: Sequence[IndexVar], context: Pred = TRUE) -> dict | None:
    """A point satisfying ``pred and context``: ``{index var: int, SizeVar: int}``, or None if empty.

    The sizes are chosen small (least total, then lexicographically least in name order), then the
    point lexicographically least where it is bounded.  With relation atoms the point satisfies the
    affine over-approximation (a point where the predicate *may* hold).
    """
    dims = check_dims(dims)
    s = _set(pred, dims, context)
    if s.is_empty():
        return None
    names = param_names(s)
    sizes = _least_params(s)
    fixed = s
    for k, name in enumerate(names):
        fixed = fixed.fix_val(dt.param, k, isl_val(sizes[name]))
    try:
        point_set = fixed.lexmin()
    except isl.Error:
        point_set = fixed
    point = point_set.sample_point()
    out: dict = {d: val_int(point.get_coordinate_val(dt.set, k)) for k, d in enumerate(dims)}
    out.update({SizeVar(name): sizes[name] for name in names})
    return out


def _least_params(s: isl.Set) -> dict[str, int]:
    """Parameter values where ``s`` is non-empty: least sum, then lexicographically least."""
    names = param_names(s)
    if not names:
        return {}
    p = s.params()
    ps = p.move_dims(dt.set, 0, dt.param, 0, len(names))  # { [n, m, ...] }
    ps = ps.insert_dims(dt.set, 0, 1)
    ls = isl.LocalSpace.from_space(ps.get_space())
    c = isl.Constraint.equality_alloc(ls).set_coefficient_val(dt.set, 0, isl_val(-1))
    for k in range(len(names)):
        c = c.set_coefficient_val(dt.set, k + 1, isl_val(1))
    ps = ps.add_constraint(c)
    try:
        least = ps.lexmin()
    except isl.Error:
        least = ps
    point = least.sample_point()
    return {name: val_int(point.get_coordinate_val(dt.set, k + 1)) for k, name in enumerate(names)}


# --------------------------------------------------------------------------------------------------
# counting lives in tensorlang.counting; these wrappers keep one entry point for predicate questions


def count(pred, dims, sizes, relations=None) -> int:
    """The number of integer points of ``dims`` satisfying ``pred`` at the given sizes (see
    ``tensorlang.counting.count``)."""
    from .counting import count as f

    return f(pred, dims, sizes, relations)


def count_projection(pred, inner_vars, dims, sizes, relations=None) -> int:
    """The number of points of the dims other than ``inner_vars`` where ``exists inner_vars. pred``."""
    from .counting import count_projection as f

    return f(pred, inner_vars, dims, sizes, relations)


def count_symbolic(pred, dims):
    """The number of points as a SymPy expression in the sizes (see ``tensorlang.counting``)."""
    from .counting import count_symbolic as f

    return f(pred, dims)


def count_projection_symbolic(pred, inner_vars, dims):
    """``count_projection`` as a SymPy expression in the sizes."""
    from .counting import count_projection_symbolic as f

    return f(pred, inner_vars, dims)


def count_symbolic_sum(terms):
    """``sum(coeff * count)`` over ``(coeff, pred, dims[, inner_vars])`` terms as one SymPy expression,
    refined over all terms together (see ``tensorlang.counting.count_symbolic_sum``)."""
    from .counting import count_symbolic_sum as f

    return f(terms)
