"""Point counts of predicates: concretely at given sizes (relations included) and symbolically.

Concrete (``count``, ``count_projection``):

* affine predicates: isl's ``count_val`` with every size fixed.  It enumerates every dimension but
  the innermost, so when that would be slow (more than ``SYMBOLIC_THRESHOLD`` outer points) the
  symbolic count is evaluated instead where one exists;
* with relation atoms: the predicate is a union of pairs ``(affine part, relation literals)``
  (``predicates.pairs``).  The points of each pair are enumerated with NumPy, level by level (one
  dimension at a time, from bounds computed vectorised from isl's constraints), starting either from
  nothing or, when cheaper, from the nonzero tuples of one of the pair's relation atoms ("driving" by
  the relation: an index ``R(i, j)`` pins ``i`` and ``j`` to the tuples of ``R``).  The points are then
  filtered exactly: by the affine part (isl constraints evaluated with NumPy, floor divisions
  included) and by the relation literals (looked up in the data; an ``exists(j) ...R...`` literal by a
  loop over j when that is small, otherwise by finding the points of its body the same way and
  joining).  Distinct points are counted.

Symbolic (``count_symbolic``, ``count_projection_symbolic``), without the GPL barvinok library:
eliminate the dimensions fixed by equalities, then sum the innermost dimension between its bounds.
With lower bounds ``L_a`` and upper bounds ``U_b`` (unit coefficients), the outer space splits into
disjoint regions where ``L_a`` is the greatest lower and ``U_b`` the least upper bound (ties broken by
order), and on each ``sum(x = L_a .. U_b) p(x) = G(U_b) - G(L_a - 1)`` with ``G`` the Faulhaber
polynomial of ``p``.  That identity is also right (zero) when ``U_b = L_a - 1``, so each region is
relaxed to ``L_a <= U_b + 1``, which keeps conditions like ``n >= 1`` out of the result.  Recursing to
no dimensions leaves ``(region of the sizes, polynomial)`` terms; these are refined into disjoint
regions and rendered as a polynomial, a ``Min``/``Max`` or a ``Piecewise``.  Strides (integer
divisions) and non-unit coefficients raise ``UnsupportedError``; callers then count concretely.
``count_symbolic_sum`` refines the regions of a signed sum of counts together (a cost is one), so the
result reads ``Piecewise((n*(2*m - 1), m >= 1), (0, True))`` instead of a sum of piecewise terms.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Mapping, Sequence

import islpy as isl
import numpy as np
import sympy

from .errors import UnsupportedError
from .nodes import Affine, Cmp, Exists, IndexVar, Pred, RelAtom, SizeVar, box, compare, conj
from .substitute import substitute_index
from .isl_sets import (
    check_dims, dt, has_relations, is_exact, isl_val, nonneg, pairs, param_context, position,
    param_names, render_constraint, to_isl, val_int,
)

SYMBOLIC_THRESHOLD = 200_000  # outer points above which count() tries the symbolic count first
ENUMERATION_LIMIT = 50_000_000  # most candidate points the NumPy enumeration may build
_BIG = 2**62

# --------------------------------------------------------------------------------------------------
# concrete counting


def _size_values(s: isl.Set, sizes: Mapping) -> dict[str, int]:
    given = {(k.name if isinstance(k, SizeVar) else str(k)): int(v) for k, v in sizes.items()}
    out = {}
    for name in param_names(s):
        if name not in given:
            raise ValueError(f"the size {name} is needed to count points")
        if given[name] < 0:
            raise ValueError(f"the size {name} = {given[name]} is negative")
        out[name] = given[name]
    return out


def _fix(s: isl.Set, values: Mapping[str, int]) -> isl.Set:
    """``s`` with every parameter fixed (count_val silently returns 0 otherwise)."""
    for k, name in enumerate(param_names(s)):
        s = s.fix_val(dt.param, k, isl_val(values[name]))
    return s


def _count_fixed(s: isl.Set) -> int:
    if s.is_empty():
        return 0
    if not s.is_bounded():
        raise ValueError("the predicate has infinitely many points")
    return val_int(s.count_val())


def _outer_work(s: isl.Set) -> int:
    """How many points isl's count_val would enumerate: the box of all dims but the innermost."""
    work = 1
    for k in range(s.dim(dt.set) - 1):
        lo, hi = s.dim_min_val(k), s.dim_max_val(k)
        if not (lo.is_int() and hi.is_int()):
            return _BIG
        work *= max(0, hi.to_python() - lo.to_python() + 1)
    return work


def _count_affine_set(s: isl.Set, sizes: Mapping, symbolic_source=None) -> int:
    values = _size_values(s, sizes)
    fixed = _fix(s, values)
    if fixed.is_empty():
        return 0
    if symbolic_source is not None and fixed.is_bounded() and _outer_work(fixed) > SYMBOLIC_THRESHOLD:
        try:
            expr = symbolic_source()
        except UnsupportedError:
            pass
        else:
            return int(expr.subs({_symbol(n): v for n, v in values.items()}))
    return _count_fixed(fixed)


def count(pred: Pred, dims: Sequence[IndexVar], sizes: Mapping, relations: Mapping | None = None) -> int:
    """The exact number of integer points of ``dims`` satisfying ``pred`` at the given sizes.

    ``sizes`` maps size names (or ``SizeVar``s) to ints; every size of the predicate is needed.
    ``relations`` maps relation names to their data: a boolean NumPy array, a SciPy sparse matrix
    (its nonzero pattern) or a list of index tuples.  Raises ValueError for an infinite count.
    """
    dims = check_dims(dims)
    if is_exact(pred):
        s = to_isl(pred, dims)
        return _count_affine_set(s, sizes, lambda: count_symbolic(pred, dims))
    pts = _points(pred, dims, _Data(sizes, relations or {}))
    return int(len(pts))


def count_projection(
    pred: Pred, inner_vars: Sequence[IndexVar], dims: Sequence[IndexVar], sizes: Mapping,
    relations: Mapping | None = None,
) -> int:
    """The number of points of the dims other than ``inner_vars`` where ``exists inner_vars. pred``
    (the ``#[exists i. p]`` of the cost model's rule 4.30)."""
    dims = check_dims(dims)
    inner_pos = sorted(position(v, dims) for v in inner_vars)
    if is_exact(pred):
        s = _project(to_isl(pred, dims), inner_pos)
        return _count_affine_set(s, sizes, lambda: count_projection_symbolic(pred, inner_vars, dims))
    pts = _points(pred, dims, _Data(sizes, relations or {}))
    keep = [k for k in range(len(dims)) if k not in inner_pos]
    if len(pts) == 0:
        return 0
    if not keep:
        return 1
    return int(len(_unique_rows(pts[:, keep])))


def _project(s: isl.Set, positions: Sequence[int]) -> isl.Set:
    for k in sorted(positions, reverse=True):
        s = s.project_out(dt.set, k, 1)
    return s.coalesce()


# --------------------------------------------------------------------------------------------------
# vectorised evaluation of isl sets


def _basic_rows(bs: isl.BasicSet, values: Mapping[str, int]):
    """``(divs, constraints)`` of a basic set with the parameters substituted by ``values``.

    divs: ``(set coeffs, div coeffs, const, denominator)`` meaning ``floor((...)/den)``;
    constraints: ``(is_eq, set coeffs, div coeffs, const)``."""
    nset, ndiv = bs.dim(dt.set), bs.dim(dt.div)
    params = param_names(bs)
    divs = []
    for k in range(ndiv):
        aff = bs.get_div(k)
        den = val_int(aff.get_denominator_val())
        num = lambda v: val_int(v.mul(isl_val(den)))
        xs = [num(aff.get_coefficient_val(dt.in_, j)) for j in range(nset)]
        ds = [num(aff.get_coefficient_val(dt.div, j)) for j in range(aff.dim(dt.div))]
        const = num(aff.get_constant_val())
        const += sum(num(aff.get_coefficient_val(dt.param, j)) * values[p] for j, p in enumerate(params))
        divs.append((xs, ds, const, den))
    cons = []
    for c in bs.get_constraints():
        xs = [val_int(c.get_coefficient_val(dt.set, j)) for j in range(nset)]
        ds = [val_int(c.get_coefficient_val(dt.div, j)) for j in range(ndiv)]
        const = val_int(c.get_constant_val())
        const += sum(val_int(c.get_coefficient_val(dt.param, j)) * values[p] for j, p in enumerate(params))
        cons.append((c.is_equality(), xs, ds, const))
    return divs, cons


def _linear(coeffs: Sequence[int], cols, const: int, n: int) -> np.ndarray:
    out = np.full(n, const, dtype=np.int64)
    for c, col in zip(coeffs, cols):
        if c:
            out += c * col
    return out


def isl_mask(s: isl.Set, cols: Sequence[np.ndarray], values: Mapping[str, int]) -> np.ndarray:
    """Which rows of the columns ``cols`` (one per set dim) lie in ``s`` at the given sizes."""
    n = len(cols[0]) if cols else 1
    out = np.zeros(n, dtype=bool)
    for bs in s.get_basic_sets():
        divs, cons = _basic_rows(bs, values)
        dvals: list = []
        for xs, ds, const, den in divs:
            dvals.append(np.floor_divide(_linear(xs + ds, list(cols) + dvals, const, n), den))
        ok = np.ones(n, dtype=bool)
        for eq, xs, ds, const in cons:
            v = _linear(xs + ds, list(cols) + dvals, const, n)
            ok &= (v == 0) if eq else (v >= 0)
        out |= ok
    return out


# --------------------------------------------------------------------------------------------------
# vectorised enumeration of the points of an isl set


def _unique_rows(a: np.ndarray) -> np.ndarray:
    if len(a) <= 1 or a.shape[1] == 0:
        return a[:1] if a.shape[1] == 0 else a
    return np.unique(a, axis=0)


def _level_bounds(bs_rows, prefix: np.ndarray, level: int):
    """Per prefix row: ``(valid, lo, hi)`` for dim ``level`` from a div-free basic set's constraints."""
    n = len(prefix)
    cols = [prefix[:, j] for j in range(level)]
    valid = np.ones(n, dtype=bool)
    lo = np.full(n, -_BIG, dtype=np.int64)
    hi = np.full(n, _BIG, dtype=np.int64)
    for eq, xs, _ds, const in bs_rows:
        a = xs[level]
        r = _linear(xs[:level], cols, const, n)
        if a == 0:
            valid &= (r == 0) if eq else (r >= 0)
        elif eq:
            valid &= (r % a) == 0
            v = -(r // a)
            lo, hi = np.maximum(lo, v), np.minimum(hi, v)
        elif a > 0:  # x >= ceil(-r / a)
            lo = np.maximum(lo, -np.floor_divide(r, a))
        else:  # x <= floor(r / -a)
            hi = np.minimum(hi, np.floor_divide(r, -a))
    return valid, lo, hi


def _expand(prefix: np.ndarray, lo: np.ndarray, counts: np.ndarray) -> np.ndarray:
    total = int(counts.sum())
    if total > ENUMERATION_LIMIT:
        raise UnsupportedError(f"too many points to enumerate ({total})")
    rows = np.repeat(prefix, counts, axis=0)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    col = np.repeat(lo, counts) + (np.arange(total, dtype=np.int64) - starts)
    return np.concatenate([rows, col[:, None]], axis=1)


def enumerate_points(s: isl.Set, values: Mapping[str, int], seed: np.ndarray | None = None) -> np.ndarray:
    """All integer points of ``s`` at the given sizes, as an ``(N, dims)`` int64 array (distinct rows).

    ``seed`` (optional) gives candidate values of the first dims; the rest are enumerated level by
    level between bounds from the (rational) projections, then every row is checked exactly."""
    nd = s.dim(dt.set)
    fixed = _fix(s, values)
    if seed is None:
        pts = np.zeros((1, 0), dtype=np.int64)
    else:
        pts = np.asarray(seed, dtype=np.int64)
        pts = pts.reshape(-1, 1) if pts.ndim == 1 else pts
    for level in range(pts.shape[1], nd):
        proj = fixed.project_out(dt.set, level + 1, nd - level - 1).remove_divs().coalesce()
        parts = []
        for bs in proj.get_basic_sets():
            _divs, rows = _basic_rows(bs, values)
            valid, lo, hi = _level_bounds(rows, pts, level)
            if np.any(valid & ((lo == -_BIG) | (hi == _BIG))):
                raise ValueError("the predicate has infinitely many points")
            counts = np.where(valid, np.maximum(hi - lo + 1, 0), 0)
            parts.append(_expand(pts, lo, counts))
        if not parts:
            return np.zeros((0, nd), dtype=np.int64)
        pts = np.concatenate(parts) if len(parts) > 1 else parts[0]
        if len(parts) > 1:
            pts = _unique_rows(pts)
    if len(pts) == 0:
        return pts.reshape(0, nd)
    keep = isl_mask(fixed, [pts[:, j] for j in range(nd)], values)
    return pts[keep]


# --------------------------------------------------------------------------------------------------
# relation data


class RelationData:
    """A relation's data at given sizes: membership tests and its nonzero tuples, vectorised."""

    def __init__(self, name: str, value, shape: tuple[int, ...]):
        self.name = name
        self.shape = tuple(int(x) for x in shape)
        self.dense = None
        if hasattr(value, "tocoo"):  # scipy.sparse
            coo = value.tocoo()
            keep = np.asarray(coo.data) != 0
            tuples = np.stack([np.asarray(coo.row)[keep], np.asarray(coo.col)[keep]], axis=1)
        elif isinstance(value, np.ndarray) and value.ndim == len(self.shape):
            self.dense = value.astype(bool, copy=False)
            self.shape = self.dense.shape
            tuples = np.argwhere(self.dense)
        else:
            tuples = np.asarray(list(value), dtype=np.int64).reshape(-1, len(self.shape))
        tuples = np.asarray(tuples, dtype=np.int64).reshape(-1, len(self.shape))
        ok = np.all((tuples >= 0) & (tuples < np.asarray(self.shape, dtype=np.int64)), axis=1)
        self.tuples = _unique_rows(tuples[ok]) if len(tuples) else tuples
        self._keys = None if self.dense is not None else self._linear_keys(self.tuples)

    def _linear_keys(self, rows: np.ndarray) -> np.ndarray:
        if not len(rows):
            return np.zeros(0, dtype=np.int64)
        return np.ravel_multi_index(tuple(rows.T), self.shape)

    def contains(self, args: Sequence[np.ndarray]) -> np.ndarray:
        n = len(args[0])
        inside = np.ones(n, dtype=bool)
        for a, s in zip(args, self.shape):
            inside &= (a >= 0) & (a < s)
        out = np.zeros(n, dtype=bool)
        if not inside.any():
            return out
        idx = tuple(a[inside] for a in args)
        if self.dense is not None:
            out[inside] = self.dense[idx]
        else:
            keys = np.ravel_multi_index(idx, self.shape)
            pos = np.searchsorted(self._keys, keys)
            pos = np.minimum(pos, max(len(self._keys) - 1, 0))
            out[inside] = (self._keys[pos] == keys) if len(self._keys) else False
        return out


class _Data:
    """Sizes and relation data of one count."""

    def __init__(self, sizes: Mapping, relations: Mapping):
        self.sizes = {(k.name if isinstance(k, SizeVar) else str(k)): int(v) for k, v in sizes.items()}
        self.relations = relations
        self._rel: dict[str, RelationData] = {}

    def env_sizes(self) -> dict:
        return {SizeVar(k): v for k, v in self.sizes.items()}

    def relation(self, atom: RelAtom) -> RelationData:
        name = atom.rel.name
        if name not in self._rel:
            if name not in self.relations:
                raise ValueError(f"the data of relation {name} is needed to count points")
            env = self.env_sizes()
            shape = tuple(s.evaluate(env) for s in atom.rel.type.sizes)
            self._rel[name] = RelationData(name, self.relations[name], shape)
        return self._rel[name]


def _eval_affine(a: Affine, dims: Sequence[IndexVar], cols, data: _Data, n: int) -> np.ndarray:
    out = np.full(n, a.const, dtype=np.int64)
    for v, c in a.terms:
        if isinstance(v, SizeVar):
            if v.name not in data.sizes:
                raise ValueError(f"the size {v.name} is needed to count points")
            out += c * data.sizes[v.name]
        else:
            out += c * cols[position(v, dims)]
    return out


def pred_mask(pred: Pred, dims: Sequence[IndexVar], cols, data: _Data) -> np.ndarray:
    """Which rows of ``cols`` (one column per dim) satisfy ``pred``, relation data included."""
    n = len(cols[0]) if len(cols) else 1
    out = np.zeros(n, dtype=bool)
    for affine, lits in pairs(pred):
        s = to_isl(affine, dims)
        ok = isl_mask(s, cols, _size_values(s, data.sizes)) if n else out.copy()
        for lit in lits:
            if not ok.any():
                break
            ok &= _literal_mask(lit, dims, cols, data, n)
        out |= ok
    return out


EXISTS_LOOP_LIMIT = 2_000_000  # above (range x rows), an ``exists`` over relations is evaluated by a join


def _literal_mask(lit: Pred, dims, cols, data: _Data, n: int) -> np.ndarray:
    """Which rows satisfy a relation literal: an atom (looked up) or an ``exists`` over relations."""
    if isinstance(lit, RelAtom):
        args = [_eval_affine(a, dims, cols, data, n) for a in lit.args]
        return data.relation(lit).contains(args)
    assert isinstance(lit, Exists)
    size = lit.size.evaluate(data.env_sizes())
    if size <= 0 or n == 0:
        return np.zeros(n, dtype=bool)
    if size * n > EXISTS_LOOP_LIMIT:
        return _exists_by_join(lit, size, dims, cols, data, n)
    if any(lit.var is d for d in dims):  # a binder that shadows a dimension: bind a fresh variable
        fresh = lit.var.fresh()
        lit = Exists(fresh, lit.size, substitute_index(lit.body, {lit.var: Affine.var(fresh)}))
    inner = tuple(dims) + (lit.var,)
    out = np.zeros(n, dtype=bool)
    for k in range(size):
        todo = ~out
        if not todo.any():
            break
        sub = [c[todo] for c in cols] + [np.full(int(todo.sum()), k, dtype=np.int64)]
        out[todo] = pred_mask(lit.body, inner, sub, data)
    return out


def _exists_by_join(lit: Exists, size: int, dims, cols, data: _Data, n: int) -> np.ndarray:
    """``exists var. body`` at the rows: the body's points (over dims and var, within the rows'
    bounding box, found as ``count`` finds points) projected to dims, then looked up."""
    bounds = []
    for d, c in zip(dims, cols):
        bounds += [compare("<=", int(c.min()), d), compare("<=", d, int(c.max()))]
    body = conj(lit.body, box([(lit.var, lit.size)]), *bounds)
    pts = _points(body, tuple(dims) + (lit.var,), data)
    if not len(dims):
        return np.full(n, len(pts) > 0)
    return _rows_in(np.stack(cols, axis=1), _unique_rows(pts[:, : len(dims)]))


def _rows_in(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Which rows of ``a`` are rows of ``b`` (int arrays with the same number of columns)."""
    if not len(b):
        return np.zeros(len(a), dtype=bool)
    lo = np.minimum(a.min(axis=0), b.min(axis=0))
    span = np.maximum(a.max(axis=0), b.max(axis=0)) - lo + 1
    if float(np.prod(span.astype(float))) < 2.0**62:
        weights = np.concatenate([np.cumprod(span[::-1])[::-1][1:], [1]]).astype(np.int64)
        return np.isin((a - lo) @ weights, (b - lo) @ weights)
    known = {tuple(r) for r in b.tolist()}
    return np.fromiter((tuple(r) in known for r in a.tolist()), dtype=bool, count=len(a))


def _points(pred: Pred, dims: tuple, data: _Data) -> np.ndarray:
    """The distinct points of ``dims`` satisfying ``pred`` (with relations) at the given sizes."""
    found = []
    for affine, lits in pairs(pred):
        s = to_isl(affine, dims)
        values = _size_values(s, data.sizes)
        fixed = _fix(s, values)
        if fixed.is_empty():
            continue
        pts = _pair_candidates(fixed, s, affine, lits, dims, values, data)
        for lit in lits:
            if not len(pts):
                break
            cols = [pts[:, j] for j in range(len(dims))]
            pts = pts[_literal_mask(lit, dims, cols, data, len(pts))]
        found.append(pts)
    if not found:
        return np.zeros((0, len(dims)), dtype=np.int64)
    pts = np.concatenate(found) if len(found) > 1 else found[0]
    return _unique_rows(pts) if len(found) > 1 else pts


def _box_volume(fixed: isl.Set, positions) -> int:
    vol = 1
    for k in positions:
        lo, hi = fixed.dim_min_val(k), fixed.dim_max_val(k)
        if not (lo.is_int() and hi.is_int()):
            return _BIG
        vol *= max(0, hi.to_python() - lo.to_python() + 1)
    return vol


def _pair_candidates(fixed, s, affine, lits, dims, values, data: _Data) -> np.ndarray:
    """The points of a pair's affine part, enumerated directly or driven by a relation's tuples."""
    plain = _box_volume(fixed, range(len(dims)))
    best, best_cost = None, plain
    for lit in lits:
        if not isinstance(lit, RelAtom):
            continue
        rel = data.relation(lit)
        pinned = {id(v) for a in lit.args for v in a.index_vars}
        free = [k for k, d in enumerate(dims) if id(d) not in pinned]
        cost = len(rel.tuples) * _box_volume(fixed, free)
        if cost < best_cost:
            best, best_cost = lit, cost
    if best is None:
        return enumerate_points(s, values)
    rel = data.relation(best)
    ts = [IndexVar(f"t{j}") for j in range(len(best.args))]
    driven = conj(affine, *(compare("=", t, a) for t, a in zip(ts, best.args)))
    q = to_isl(driven, tuple(ts) + tuple(dims))
    pts = enumerate_points(q, _size_values(q, data.sizes), seed=rel.tuples)
    return _unique_rows(pts[:, len(ts):])


# --------------------------------------------------------------------------------------------------
# symbolic counting

_SYMBOLS: dict[str, sympy.Symbol] = {}
_SYM_CACHE: "OrderedDict[tuple, tuple]" = OrderedDict()
_SYM_CACHE_SIZE = 1024


def _symbol(name: str) -> sympy.Symbol:
    if name not in _SYMBOLS:
        _SYMBOLS[name] = sympy.Symbol(name, integer=True, nonnegative=True)
    return _SYMBOLS[name]


def count_symbolic(pred: Pred, dims: Sequence[IndexVar]) -> sympy.Expr:
    """The number of points of ``dims`` satisfying ``pred`` as a SymPy expression in the sizes
    (symbols ``Symbol(name, integer=True, nonnegative=True)``), exact for every size >= 0.

    Raises ``UnsupportedError`` for relation atoms, strides (integer divisions) and non-unit
    coefficients where a dimension must be summed; use ``count`` then.  Results are cached."""
    dims = check_dims(dims)
    key = ("count", id(pred), tuple(id(d) for d in dims))
    return _cached(key, (pred, dims), lambda: _combine(_raw_terms(pred, dims, ())))


def count_projection_symbolic(pred: Pred, inner_vars: Sequence[IndexVar], dims: Sequence[IndexVar]):
    """``count_projection`` as a SymPy expression: the number of outer points where
    ``exists inner_vars. pred``."""
    dims = check_dims(dims)
    inner = tuple(inner_vars)
    key = ("projection", id(pred), tuple(id(d) for d in dims), tuple(id(v) for v in inner))
    return _cached(key, (pred, dims, inner), lambda: _combine(_raw_terms(pred, dims, inner)))


def count_symbolic_sum(terms: Sequence[tuple]) -> sympy.Expr:
    """``sum(coeff * #pred)`` over ``terms``, each ``(coeff, pred, dims)`` or ``(coeff, pred, dims,
    inner_vars)`` (the latter counts ``exists inner_vars. pred`` over the other dims), as one SymPy
    expression: the regions of the sizes are refined over all terms together, so the result reads as
    one polynomial per region (``Piecewise((n*(2*m - 1), m >= 1), (0, True))``) rather than a sum of
    piecewise counts.  Raises ``UnsupportedError`` as ``count_symbolic`` does."""
    pieces: list = []
    for term in terms:
        coeff, pred, dims = term[0], term[1], check_dims(term[2])
        inner = tuple(term[3]) if len(term) > 3 else ()
        pieces.extend((s, coeff * poly) for s, poly in _raw_terms(pred, dims, inner))
    return _combine(pieces)


def _raw_terms(pred: Pred, dims: tuple, inner: tuple) -> list:
    """``[(isl set of sizes, polynomial)]`` whose sum is the count (cached)."""
    key = ("raw", id(pred), tuple(id(d) for d in dims), tuple(id(v) for v in inner))

    def compute():
        s = to_isl(pred, dims)
        if inner:
            s = _project(s, [position(v, dims) for v in inner])
        return _symbolic_terms(pred, s)

    return _cached(key, (pred, dims, inner), compute)


def _cached(key, keep, compute):
    hit = _SYM_CACHE.get(key)
    if hit is not None:
        _SYM_CACHE.move_to_end(key)
        if isinstance(hit[1], UnsupportedError):
            raise hit[1]
        return hit[1]
    try:
        value = compute()
    except UnsupportedError as err:
        value = err
    _SYM_CACHE[key] = (keep, value)
    if len(_SYM_CACHE) > _SYM_CACHE_SIZE:
        _SYM_CACHE.popitem(last=False)
    if isinstance(value, UnsupportedError):
        raise value
    return value


def _symbolic_terms(pred: Pred, s: isl.Set) -> list:
    if has_relations(pred):
        raise UnsupportedError("a count over data relations depends on the data; count concretely")
    params = param_names(s)
    s = nonneg(s).coalesce()
    if s.is_empty():
        return []
    nd = s.dim(dt.set)
    xs = [sympy.Symbol(f"_x{j}", integer=True) for j in range(nd)]
    psyms = [_symbol(p) for p in params]
    terms: list = []
    for bs in s.make_disjoint().get_basic_sets():
        if bs.dim(dt.div):
            raise UnsupportedError("counting a set with strides (integer divisions) symbolically")
        rows = [_row(c, nd, len(params)) for c in bs.get_constraints()]
        _sum_rows(rows, list(xs), psyms, params, sympy.Integer(1), terms)
    return [(_rows_to_set(rows, 0, params), poly) for rows, poly in terms]


def _row(c, nd: int, np_: int) -> tuple:
    """A constraint as ``(is_eq, coeffs over [dims..., params..., 1])``."""
    coeffs = [val_int(c.get_coefficient_val(dt.set, j)) for j in range(nd)]
    coeffs += [val_int(c.get_coefficient_val(dt.param, j)) for j in range(np_)]
    coeffs.append(val_int(c.get_constant_val()))
    return (c.is_equality(), tuple(coeffs))


def _rows_to_set(rows, nd: int, params: Sequence[str]) -> isl.Set:
    space = isl.Space.create_from_names(isl.DEFAULT_CONTEXT, set=[f"x{j}" for j in range(nd)],
                                        params=list(params))
    ls = isl.LocalSpace.from_space(space)
    bs = isl.BasicSet.universe(space)
    for eq, co in rows:
        if not any(co[:-1]):  # a constant row (isl wants no all-zero constraint rows)
            if (co[-1] == 0) if eq else (co[-1] >= 0):
                continue
            return isl.Set.empty(space)
        c = isl.Constraint.equality_alloc(ls) if eq else isl.Constraint.inequality_alloc(ls)
        for j in range(nd):
            if co[j]:
                c = c.set_coefficient_val(dt.set, j, isl_val(co[j]))
        for j in range(len(params)):
            if co[nd + j]:
                c = c.set_coefficient_val(dt.param, j, isl_val(co[nd + j]))
        c = c.set_constant_val(isl_val(co[-1]))
        bs = bs.add_constraint(c)
    return nonneg(isl.Set.from_basic_set(bs))


def _normalise(rows, nd: int, params) -> list | None:
    """The rows of the basic set without redundancies and with its equalities; None if empty."""
    s = _rows_to_set(rows, nd, params)
    if s.is_empty():
        return None
    s = s.detect_equalities().remove_redundancies()
    bss = s.get_basic_sets()
    if len(bss) != 1 or bss[0].dim(dt.div):
        raise UnsupportedError("counting a set with strides (integer divisions) symbolically")
    return [_row(c, nd, len(params)) for c in bss[0].get_constraints()]


def _sum_rows(rows, xs: list, psyms: list, params, poly: sympy.Expr, terms: list) -> None:
    """Append ``(param rows, polynomial)`` terms whose total is ``sum over the set of poly``."""
    nd = len(xs)
    rows = _normalise(rows, nd, params)
    if rows is None:
        return
    if nd == 0:
        terms.append((rows, poly))
        return
    syms = list(xs) + list(psyms)
    # 1. a dimension fixed by an equality with a unit coefficient: substitute it
    for eq, co in rows:
        if not eq:
            continue
        j = next((j for j in reversed(range(nd)) if co[j] in (1, -1)), None)
        if j is None:
            continue
        c = co[j]
        value = -c * _lin_expr(tuple(co[:j]) + (0,) + tuple(co[j + 1:]), syms)
        new_rows = []
        for e2, co2 in rows:
            if co2[j]:
                f = co2[j] * c
                co2 = tuple(a - f * b for a, b in zip(co2, co))
            new_rows.append((e2, co2[:j] + co2[j + 1:]))
        _sum_rows(new_rows, xs[:j] + xs[j + 1:], psyms, params, sympy.expand(poly.subs(xs[j], value)), terms)
        return
    if any(eq and any(co[:nd]) for eq, co in rows):
        raise UnsupportedError("an equality with non-unit coefficients (a stride) in a symbolic count")
    # 2. sum a dimension whose bounds all have unit coefficients, innermost first
    j = next((j for j in reversed(range(nd)) if all(co[j] in (-1, 0, 1) for _, co in rows)), None)
    if j is None:
        raise UnsupportedError("bounds with non-unit coefficients (strides) in a symbolic count")
    drop = lambda co: co[:j] + co[j + 1:]
    lowers = [tuple(-a for a in drop(co)) for _, co in rows if co[j] == 1]  # x >= L
    uppers = [drop(co) for _, co in rows if co[j] == -1]  # x <= U
    others = [(eq, drop(co)) for eq, co in rows if co[j] == 0]
    if not lowers or not uppers:
        raise UnsupportedError("the predicate has infinitely many points")
    rest_syms = xs[:j] + xs[j + 1:]
    rest_all = list(rest_syms) + list(psyms)
    g = _faulhaber(poly, xs[j])
    for a, lo in enumerate(lowers):
        for b, up in enumerate(uppers):
            region = list(others)
            for a2, lo2 in enumerate(lowers):
                if a2 != a:  # lo > lo2 for earlier, lo >= lo2 for later
                    region.append((False, _sub(lo, lo2, -1 if a2 < a else 0)))
            for b2, up2 in enumerate(uppers):
                if b2 != b:
                    region.append((False, _sub(up2, up, -1 if b2 < b else 0)))
            region.append((False, _sub(up, lo, 1)))  # lo <= up + 1 (the sum is 0 at lo = up + 1)
            lo_e, up_e = _lin_expr(lo, rest_all), _lin_expr(up, rest_all)
            new_poly = sympy.expand(g(up_e) - g(lo_e - 1))
            _sum_rows(region, rest_syms, psyms, params, new_poly, terms)


def _sub(a: tuple, b: tuple, const: int) -> tuple:
    out = [x - y for x, y in zip(a, b)]
    out[-1] += const
    return tuple(out)


def _lin_expr(co: Sequence[int], syms: Sequence) -> sympy.Expr:
    """``sum(co[k] * syms[k]) + co[-1]`` as a SymPy expression."""
    return sum((c * s for c, s in zip(co[:-1], syms) if c), sympy.Integer(co[-1]))


_POWER_SUMS: dict[int, sympy.Expr] = {}
_N = sympy.Symbol("_N", integer=True)


def _power_sum(d: int) -> sympy.Expr:
    """``sum(x = 0 .. N) x**d`` as a polynomial in ``_N`` (Faulhaber)."""
    if d not in _POWER_SUMS:
        x = sympy.Symbol("_t", integer=True)
        _POWER_SUMS[d] = sympy.expand(sympy.summation(x**d, (x, 0, _N)))
    return _POWER_SUMS[d]


def _faulhaber(poly: sympy.Expr, x: sympy.Symbol):
    """``G`` with ``G(N) = sum(x = 0 .. N) poly``, as a function of a SymPy expression ``N``."""
    p = sympy.Poly(poly, x)
    parts = [(coeff, _power_sum(m[0])) for m, coeff in zip(p.monoms(), p.coeffs())]

    def g(n_expr):
        return sum((coeff * ps.subs(_N, n_expr) for coeff, ps in parts), sympy.Integer(0))

    return g


# --- combining the terms over regions of the sizes


def _combine(terms: Sequence[tuple]) -> sympy.Expr:
    """One expression for ``sum(poly over its set of sizes)``: the sets are refined into disjoint
    regions, regions with equal polynomials joined, and the result rendered as a polynomial, a
    ``Min``/``Max`` of affine pieces, or a ``Piecewise``."""
    params = sorted({name for s, _ in terms for name in param_names(s)})
    psyms = [_symbol(p) for p in params]
    whole = _rows_to_set([], 0, params)
    space = whole.get_space()
    regions: list[list] = []  # [isl params set, polynomial], disjoint
    for c, poly in terms:
        c = c.align_params(space) & whole
        new: list[list] = []
        rest = c
        for d, p in regions:
            both = d & c
            if not both.is_empty():
                new.append([both, p + poly])
            only = d - c
            if not only.is_empty():
                new.append([only, p])
            rest = rest - d
        if not rest.is_empty():
            new.append([rest, poly])
        regions = new
    merged: list[list] = []
    for d, p in regions:  # join regions whose polynomials agree on them; zero regions stay out
        p = sympy.expand(p)
        if p == 0 or _vanishes(p, d, params, psyms):
            continue
        for m in merged:
            diff = sympy.expand(m[1] - p)
            if diff == 0 or _vanishes(diff, d, params, psyms):
                m[0] = (m[0] | d).coalesce()
                break
            if _vanishes(diff, m[0], params, psyms):
                m[0], m[1] = (m[0] | d).coalesce(), p
                break
        else:
            merged.append([d, p])
    if not merged:
        return sympy.Integer(0)
    covered = merged[0][0]
    for d, _ in merged[1:]:
        covered = covered | d
    zero = (whole - covered).coalesce()  # where the count is 0
    if not zero.is_empty():
        for m in merged:
            if _vanishes(m[1], zero, params, psyms):
                m[0] = (m[0] | zero).coalesce()
                break
        else:
            merged.append([zero, sympy.Integer(0)])
    merged = [[d, _reduce_on(p, d, params, psyms)] for d, p in merged]
    if len(merged) == 1:
        return sympy.factor(merged[0][1])
    extreme = _min_max(merged, params, psyms)
    if extreme is not None:
        return extreme
    pieces = [(sympy.factor(p), _condition(d, params)) for d, p in merged]
    pieces = [q for q in pieces if q[0] != 0] + [q for q in pieces if q[0] == 0]  # the zero region last
    pieces[-1] = (pieces[-1][0], True)
    return sympy.Piecewise(*pieces)


def _reduce_on(poly: sympy.Expr, region: isl.Set, params, psyms) -> sympy.Expr:
    """``poly`` simplified with the equalities between sizes that hold on all of ``region``."""
    hull = region.affine_hull()
    for c in hull.get_constraints():
        if not c.is_equality():
            continue
        co = [val_int(c.get_coefficient_val(dt.param, j)) for j in range(len(params))]
        j = next((j for j, a in enumerate(co) if a in (1, -1)), None)
        if j is not None:
            rest = sum((a * s for k, (a, s) in enumerate(zip(co, psyms)) if k != j and a), sympy.Integer(0))
            poly = sympy.expand(poly.subs(psyms[j], -co[j] * (rest + val_int(c.get_constant_val()))))
    return poly


def _vanishes(poly: sympy.Expr, zone: isl.Set, params, psyms) -> bool:
    """Whether ``poly`` is 0 at every point of the parameter set ``zone`` (a sufficient test)."""
    for bs in zone.get_basic_sets():
        bs = bs.detect_equalities()
        p = poly
        for c in bs.get_constraints():
            if not c.is_equality():
                continue
            co = [val_int(c.get_coefficient_val(dt.param, j)) for j in range(len(params))]
            j = next((j for j, a in enumerate(co) if a in (1, -1)), None)
            if j is None:
                continue
            rest = sum((a * s for k, (a, s) in enumerate(zip(co, psyms)) if k != j and a), sympy.Integer(0))
            rest += val_int(c.get_constant_val())
            p = p.subs(psyms[j], -co[j] * rest)
        if sympy.expand(p) == 0:
            continue
        pts = isl.Set.from_basic_set(bs).move_dims(dt.set, 0, dt.param, 0, len(params))
        if not pts.is_bounded() or val_int(pts.count_val()) > 64:
            return False
        found: list = []
        pts.foreach_point(lambda pt: found.append([pt.get_coordinate_val(dt.set, k).to_python()
                                                   for k in range(len(params))]))
        if any(poly.subs(dict(zip(psyms, vals))) != 0 for vals in found):
            return False
    return True


def _affine_coeffs(p: sympy.Expr, psyms) -> list[int] | None:
    """``[c_0, ..., c_k, const]`` of an integer-affine polynomial in the sizes, else None."""
    try:
        poly = sympy.Poly(p, *psyms) if psyms else None
    except sympy.PolynomialError:
        return None
    if poly is None:
        return [int(p)] if p.is_Integer else None
    if poly.total_degree() > 1:
        return None
    out = [poly.coeff_monomial(s) for s in psyms] + [poly.coeff_monomial(1)]
    return [int(c) for c in out] if all(c.is_Integer for c in out) else None


def _min_max(merged, params, psyms):
    """``Min``/``Max`` of the regions' polynomials when each region is where its polynomial is least
    (greatest); None otherwise."""
    affs = [_affine_coeffs(p, psyms) for _, p in merged]
    if any(a is None for a in affs):
        return None
    for sign, op in ((1, sympy.Min), (-1, sympy.Max)):
        ok = True
        for (d, _), a in zip(merged, affs):
            for b in affs:
                # region d is inside { sign*(b - a) >= 0 }
                diff = tuple(sign * (y - x) for x, y in zip(a, b))
                if not d.is_subset(_rows_to_set([(False, diff)], 0, params)):
                    ok = False
                    break
            if not ok:
                break
        if ok:
            return op(*(sympy.factor(p) for _, p in merged))
    return None


def _condition(d: isl.Set, params) -> sympy.Basic:
    """The parameter set ``d`` as a SymPy condition (facts ``n >= 0`` dropped)."""
    d = d.gist_params(param_context(d.params().get_space())).coalesce() if params else d
    disjuncts = []
    for bs in d.get_basic_sets():
        rels = []
        for c in bs.get_constraints():
            terms = [(SizeVar(n), val_int(c.get_coefficient_val(dt.param, j))) for j, n in enumerate(params)]
            terms = [(v, a) for v, a in terms if a]
            if not terms:
                continue
            rels.append(_sympy_cmp(render_constraint(terms, val_int(c.get_constant_val()), c.is_equality(), ())))
        disjuncts.append(sympy.And(*rels))
    return sympy.Or(*disjuncts)


def _sympy_affine(a: Affine) -> sympy.Expr:
    return sum((c * _symbol(v.name) for v, c in a.terms), sympy.Integer(a.const))


def _sympy_cmp(p: Cmp) -> sympy.Basic:
    lhs, rhs = _sympy_affine(p.lhs), _sympy_affine(p.rhs)
    return {"<": sympy.Lt, "<=": sympy.Le, "=": sympy.Eq}[p.op](lhs, rhs, evaluate=False)
