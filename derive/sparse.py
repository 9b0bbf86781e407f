"""Sparse Jacobians and Hessians: ``tl.jacobian(e, wrt, sparse=True)`` and ``tl.hessian(e, wrt, sparse=True)``.

A ``SparseJacobian`` is a program whose value is a ``scipy.sparse.csr_array`` (rows: the flattened outputs,
columns: the flattened inputs, C order).  It is made from the structured Jacobian (``derive/structure.py``):
the support of its body, split into disjoint pieces each stored over fewer loops (``structure.pieces``: an
index that is a band of constant width around the others is stored as an offset), gives

* ``values``: a program, taking the primal's inputs, whose value is the nonzeros of each piece, one tensor
  per piece (right-nested pairs), each over the piece's loops: its cost is the work of the nonzeros;
* ``pattern(sizes)``: the rows and columns of those values, computed once per size from the pieces'
  predicates with NumPy (affine comparisons over the pieces' loops), sorted into CSR, and for each piece
  the position in the CSR ``data`` of each of its points (-1 outside the pattern).

A compiled kernel (``codegen.kernel.SparseKernel``) writes each value at its position in ``data`` itself,
reading the positions; ``tl.evaluate`` runs ``values`` with the reference evaluator and puts the values at
their positions in NumPy (``assemble``); ``tl.cost`` counts ``values``.

Data relations.  Where the support is a conjunction of affine brackets and relation atoms (the Jacobian of
a sparse product ``sum(j) [E(i, j)] * A[i, j] * x[j]`` is nonzero on ``E(i0, j0)``), each piece keeps the
atoms, and a piece with an atom ``R(u + c, w + d)`` over two of its loops is stored over ``R``'s entries: its
points are its other loops times the entries of ``R`` in the order of its canonical CSR form, so its
positions (and the kernel's work, ``codegen.scatter``) are O(nnz), never the dense box.  Such a pattern
depends on the relation's data: it is computed once per size and relation (``relation_entries``).  A support
with disjunctions and existentials over a relation (a graph Laplacian's diagonal, ``exists(j) E(i, j)``, the
support of a sum over a row: ``structure.project_relations``) gives the pieces of each disjunct, an entry
held by several kept once; its existentials are read off the relation's entries, and the values' brackets
cleaned of what a kernel would test by a loop (``implied_existentials_dropped``).  A support the brackets
do not bound (``true``) over a relation is refused by name (``RelationPattern``).
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import numpy as np

from tensorlang.codegen.kernel import right_nested_items
from tensorlang.errors import UnsupportedError
from tensorlang.nodes import (
    FALSE, TRUE, Affine, And, Cmp, Exists, Expr, Or, Pair, Pred, RelAtom, SizeVar, walk, box, conj, drop_conjunct,
    let_chain, build_lets, strip_gens, Gen, Guard, Max, Sum, disj,
)
from tensorlang.codegen.runtime import canonical_csr, sorted_unique
from tensorlang.inputs import checked_sparse, relation_tuples
from tensorlang.isl_sets import has_relations, pairs
from tensorlang.predicates import project, simplify as simplify_pred
from tensorlang.substitute import rebuild, substitute_index

from .structure import Piece, Supports, pieces, relation_support


class RelationPattern(UnsupportedError):
    """A sparse Jacobian refused because where it can be nonzero depends on the data of a relation."""


class SparseJacobian:
    """A Jacobian (or Hessian) whose value is a ``scipy.sparse.csr_array``: see the module docstring.
    ``dense`` is the structured Jacobian as an ordinary program (its value is the same matrix, dense, with
    the output indices first); ``rank`` the number of output indices."""

    def __init__(self, dense: Expr, values: Expr, parts: list[Piece], rank: int, loops: tuple,
                 stored: tuple = (), overlapping: bool = False):
        self.dense, self.values, self.parts, self.rank, self.loops = dense, values, parts, rank, loops
        # whether two pieces may hold the same entry (the disjuncts of a support over relations overlap where
        # the data say so): the first piece's point is kept, the others' left out of the pattern
        self.overlapping = overlapping
        # for each piece, None or how it is stored over a relation's entries: (the atom over the piece's
        # loops, the positions in its loops of the atom's row and column variables)
        self.stored = stored or (None,) * len(parts)
        self.relations = tuple(sorted({a.rel.name for p in parts for a in walk(p.pred) if isinstance(a, RelAtom)}))
        self._types = {a.rel.name: a.rel.type for p in parts for a in walk(p.pred) if isinstance(a, RelAtom)}
        self._patterns: dict = {}   # sizes -> its Prepared pattern
        self._seen: list = []   # over relations: (sizes, the relations' entries, the Prepared), the latest first
        self._lock = threading.Lock()

    def __str__(self) -> str:
        return f"# sparse: {len(self.parts)} piece(s), value a scipy.sparse.csr_array\n{self.dense}"

    __repr__ = __str__

    def shape(self, sizes: dict) -> tuple[int, int]:
        extents = [_extent(s, sizes) for _, s in self.loops]
        return int(np.prod(extents[:self.rank], dtype=np.int64)), int(np.prod(extents[self.rank:], dtype=np.int64))

    def pattern(self, sizes: dict, inputs: dict | None = None):
        """``(positions, indices, indptr, shape)`` at ``sizes`` (names to ints) and the relations among
        ``inputs`` (names to values, in any form ``tl.evaluate`` takes; needed where ``self.relations``),
        computed once per size and relation: ``positions`` one array per piece over the piece's points (C
        order: its loops, or its other loops and then the entries of the relation it is stored over), each
        point's position in the CSR ``data`` and -1 where the point is not in the pattern (int32 where the
        positions fit, else int64); ``indices`` and ``indptr`` the CSR arrays (int32 where they fit, as SciPy
        makes them).  All are read-only: every result at these sizes holds the CSR arrays, so a change of one
        result's structure in place (``eliminate_zeros``) would change the others'."""
        return self.prepared(sizes, inputs).pattern

    def prepared(self, sizes: dict, inputs: dict | None = None) -> Prepared:
        """The ``Prepared`` pattern at ``sizes`` (and the relations among ``inputs``), made once per size and
        kept; over relations, once per size and relation, the last few kept (a relation is compared with the
        ones kept entry for entry, O(nnz): one changed in place is a new one)."""
        key = tuple(sorted(sizes.items()))
        if not self.relations:
            with self._lock:
                found = self._patterns.get(key)
            if found is None:
                found = self._prepare(sizes, {})
                with self._lock:
                    self._patterns[key] = found
            return found
        missing = [name for name in self.relations if inputs is None or name not in inputs]
        if missing:
            raise UnsupportedError(f"the pattern of this sparse Jacobian depends on the data of relation(s) "
                                   f"{', '.join(missing)}: pass them")
        entries = {name: relation_entries(name, self._types[name], inputs[name], sizes) for name in self.relations}
        with self._lock:
            seen = list(self._seen)
        for k, kept, found in seen:
            if k == key and all(len(a) == len(b) and np.array_equal(a, b)
                                for name in self.relations for a, b in zip(entries[name], kept[name])):
                return found
        found = self._prepare(sizes, entries)
        with self._lock:
            self._seen.insert(0, (key, {name: tuple(np.array(a) for a in e) for name, e in entries.items()}, found))
            del self._seen[8:]
        return found

    def _prepare(self, sizes: dict, entries: dict) -> Prepared:
        """The pattern at ``sizes`` and the relations' ``entries`` (``relation_entries``)."""
        import scipy.sparse as sp

        related = {name: _pairs(e, tuple(_extent(s, sizes) for s in self._types[name].sizes))
                   for name, e in entries.items()}
        members = {name: _Members(pairs, tuple(_extent(s, sizes) for s in self._types[name].sizes))
                   for name, pairs in related.items()}
        extents = [_extent(s, sizes) for _, s in self.loops]
        rows_of, cols_of, kept, bounds, sources = [], [], [], [0], []
        for part, stored in zip(self.parts, self.stored):
            env, shape, inside, source = _points(part, stored, sizes, related)
            pred = substitute_index(part.pred, part.at)
            if stored is not None:   # (its points are the relation's entries: the atom holds there)
                pred = drop_conjunct(pred, stored[0])
            mask = np.broadcast_to(inside & _holds(pred, env, members), shape).ravel()
            sources.append(source)
            coords = [np.broadcast_to(np.asarray(part.at[v].evaluate(env)), shape).ravel()[mask]
                      for v, _ in self.loops]
            rows_of.append(_flat(coords[:self.rank], extents[:self.rank], mask.sum()))
            cols_of.append(_flat(coords[self.rank:], extents[self.rank:], mask.sum()))
            kept.append(bounds[-1] + np.flatnonzero(mask))
            bounds.append(bounds[-1] + mask.size)
        rows, cols, take = (np.concatenate(a) for a in (rows_of, cols_of, kept))
        n_rows, n_cols = self.shape(sizes)
        flat = rows * n_cols + cols
        if self.overlapping:   # each entry once: the first piece's point (a stable sort keeps the pieces' order)
            once = np.argsort(flat, kind="stable")
            once = once[np.concatenate(([True], flat[once][1:] != flat[once][:-1]))] if len(once) else once
            rows, cols, take, flat = rows[once], cols[once], take[once], flat[once]
        order = np.arange(len(flat)) if np.all(flat[1:] > flat[:-1]) else np.lexsort((cols, rows))
        index = np.int32 if max(n_cols, len(take)) < 2 ** 31 else np.int64
        indptr = np.zeros(n_rows + 1, dtype=index)
        np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
        at = np.full(bounds[-1], -1, dtype=np.int32 if len(take) < 2 ** 31 else np.int64)
        at[take[order]] = np.arange(len(take), dtype=at.dtype)
        indices = cols[order].astype(index)
        positions = [at[lo:hi] for lo, hi in zip(bounds, bounds[1:])]
        for shared in (indices, indptr, at):   # every result holds them: a change in place is refused, not shared
            shared.flags.writeable = False
        template = sp.csr_array((np.zeros(len(indices)), indices, indptr), shape=(n_rows, n_cols), copy=False)
        start = int(take[order[0]]) if len(take) else 0
        run = slice(start, start + len(take)) if len(self.parts) == 1 and not entries and len(take) and \
            np.array_equal(at[start:start + len(take)], np.arange(len(take))) else None
        return Prepared((positions, indices, indptr, (n_rows, n_cols)), template, run, sources)

    def patterns(self) -> tuple:
        """Each piece's ``(loop variables, the predicate over them where its point is in the pattern)``."""
        return tuple((tuple(v for v, _ in part.loops), substitute_index(part.pred, part.at)) for part in self.parts)

    def entries(self) -> tuple:
        """Each piece's entry coordinates (the rows' indices, then the columns'), affine in its loop variables."""
        return tuple(tuple(part.at[v] for v, _ in self.loops) for part in self.parts)

    def assemble(self, values, sizes: dict, inputs: dict | None = None):
        """The ``csr_array`` of ``values`` (the value of ``self.values``, one array per piece over its loops, as
        the reference evaluator gives them) at ``sizes`` (and the relations among ``inputs``): each piece's
        values put at their positions, O(nonzeros).  A compiled kernel writes them there itself
        (``codegen.kernel.SparseKernel``)."""
        prepared = self.prepared(sizes, inputs)
        positions, indices, *_ = prepared.pattern
        data = np.empty(len(indices))
        for at, source, v in zip(positions, prepared.sources, right_nested_items(values, len(self.parts))):
            kept = at >= 0
            flat = np.asarray(v, dtype=float).ravel()
            data[at[kept]] = flat[kept] if source is None else flat[source[kept]]
        return prepared.result(data)


@dataclass(frozen=True)
class Prepared:
    """A sparse Jacobian's pattern at one size (and relation): ``pattern`` (``SparseJacobian.pattern``), a
    ``csr_array`` of it that SciPy checked (``template``), ``run`` the slice of the one piece's points (C
    order) that are the CSR ``data`` in order where they are (a tridiagonal band: all of its points but the
    first and last; there the piece's values as computed are the data, a view), else None, and ``sources``
    for each piece stored over a relation's entries the index of each of its points in its values over its
    loops (C order; ``assemble`` reads them), else None."""

    pattern: tuple
    template: object
    run: slice | None
    sources: list

    def result(self, data: np.ndarray):
        """The ``csr_array`` holding ``data`` (its values in CSR order): a shallow copy of ``template``
        (SciPy's constructor checks the indices again on each call, O(nonzeros) and 40-60 µs at any size).
        The copy is what ``copy.copy`` makes, its attributes those of the checked one, made directly (1 µs,
        where ``copy.copy`` takes 2)."""
        out = object.__new__(type(self.template))
        out.__dict__.update(self.template.__dict__)
        out.data = data
        return out


def relation_entries(name: str, t, value, sizes: dict) -> tuple[np.ndarray, ...]:
    """The entries of the relation ``value`` (any form ``tl.evaluate`` takes) at ``sizes``, never dense: for a
    2-D relation its canonical CSR arrays ``(indptr, indices)`` (rows sorted, no duplicates: the arrays a
    kernel reads, ``codegen.runtime``; a canonical ``csr`` matrix's own, not copied), for another one its
    index tuples' row-major flat indices, sorted without duplicates.  O(nnz log nnz), O(nnz) for a
    canonical CSR matrix."""
    import scipy.sparse as sp

    shape = tuple(max(0, int(s.evaluate({v: sizes[v.name] for v in s.size_vars}))) for s in t.sizes)
    if len(shape) == 2 and sp.issparse(value) and getattr(value, "format", None) == "csr":
        if checked_sparse(name, value).has_canonical_format and np.count_nonzero(value.data) == value.nnz:
            return np.asarray(value.indptr), np.asarray(value.indices)
    index = relation_tuples(name, t, value, shape)
    if len(shape) == 2:
        return canonical_csr(index[0], index[1], *shape)
    return (sorted_unique(np.ravel_multi_index(index, shape)) if all(shape) else np.zeros(0, dtype=np.int64),)


def _pairs(entries: tuple, shape: tuple) -> tuple[np.ndarray, ...]:
    """A relation's index tuples, one int64 array per dimension in the order of its entries, from its
    ``relation_entries``."""
    if len(shape) == 2:
        indptr, indices = entries
        rows = np.repeat(np.arange(shape[0], dtype=np.int64), np.diff(np.asarray(indptr, dtype=np.int64)))
        return rows, np.asarray(indices, dtype=np.int64)
    return tuple(np.asarray(a, dtype=np.int64) for a in np.unravel_index(entries[0], shape))


def _extent(size: Affine, sizes: dict) -> int:
    return int(size.evaluate({v: sizes[v.name] for v in size.size_vars}))


def _flat(coords: list, extents: list, count: int) -> np.ndarray:
    """The C-order flat index of the points ``coords`` (one array per dimension, ``count`` points)."""
    out = np.zeros(count, dtype=np.int64)
    for c, n in zip(coords, extents):
        out = out * n + c
    return out


def _points(part: Piece, stored, sizes: dict, related: dict):
    """``(env, shape, inside, sources)`` of a piece's points: ``env`` each of its loop variables (and the
    sizes) as a NumPy index array broadcasting to ``shape``.  A piece stored over a relation's entries has
    its other loops and then the relation's entries as its points (the atom's variables read off the
    entries), ``inside`` where those variables lie within their extents, and ``sources`` the index of each
    point in the piece's values over its loops; else ``inside`` is True and ``sources`` None."""
    extents = tuple(max(_extent(s, sizes), 0) for _, s in part.loops)
    sized = {SizeVar(name): value for name, value in sizes.items()}
    if stored is None:
        grid = np.indices(extents, dtype=np.int64, sparse=True) if extents else ()
        env = {v: grid[k] for k, (v, _) in enumerate(part.loops)}
        return {**env, **sized}, extents, True, None
    atom, ka, kb = stored
    others = [k for k in range(len(part.loops)) if k not in (ka, kb)]
    pairs = related[atom.rel.name]
    shape = tuple(extents[k] for k in others) + (len(pairs[0]),)
    grid = np.indices(shape[:-1], dtype=np.int64, sparse=True) if others else ()
    env = {part.loops[k][0]: g[..., None] for k, g in zip(others, grid)}
    for k, arg, entries in ((ka, atom.args[0], pairs[0]), (kb, atom.args[1], pairs[1])):
        v = part.loops[k][0]
        shift = (arg - Affine.var(v)).evaluate(sized)   # arg = v + shift
        env[v] = (entries - shift).reshape((1,) * len(others) + (-1,))
    inside = functools.reduce(np.logical_and, ((env[part.loops[k][0]] >= 0) & (env[part.loops[k][0]] < extents[k])
                                               for k in (ka, kb)))
    flat = np.zeros(shape, dtype=np.int64)
    for k, n in enumerate(extents):   # (clipped: a point outside is never read, ``assemble``)
        flat = flat * n + np.clip(env[part.loops[k][0]], 0, max(n - 1, 0))
    return {**env, **sized}, shape, inside, flat.ravel()


class _Members:
    """Membership of index tuples in a relation: its tuples (``relation_pairs``) as sorted flat indices."""

    def __init__(self, pairs: tuple, shape: tuple):
        self.pairs, self.shape = pairs, shape
        self.keys = np.ravel_multi_index(pairs, shape) if all(shape) else np.zeros(0, dtype=np.int64)

    def __call__(self, index: list):
        index = np.broadcast_arrays(*index)
        inside = functools.reduce(np.logical_and, ((a >= 0) & (a < n) for a, n in zip(index, self.shape)))
        if not len(self.keys):
            return np.zeros(np.shape(inside), dtype=bool)
        flat = np.ravel_multi_index([np.clip(a, 0, n - 1) for a, n in zip(index, self.shape)], self.shape)
        at = np.minimum(np.searchsorted(self.keys, flat), len(self.keys) - 1)
        return inside & (self.keys[at] == flat)


def _holds(p: Pred, env: dict, members: dict | None = None):
    """The points of the NumPy index arrays ``env`` where the predicate ``p`` holds (affine, and relation
    atoms looked up in ``members``, name to ``_Members``)."""
    if p is TRUE:
        return True
    if p is FALSE:
        return False
    if isinstance(p, RelAtom) and members and p.rel.name in members:
        return members[p.rel.name]([a.evaluate(env) for a in p.args])
    if isinstance(p, (And, Or)):
        return functools.reduce(np.logical_and if isinstance(p, And) else np.logical_or,
                                (_holds(q, env, members) for q in p.parts))
    if isinstance(p, Exists):
        return _exists(p, env, members)
    if isinstance(p, Cmp):
        lhs, rhs = p.lhs.evaluate(env), p.rhs.evaluate(env)
        return {"<": np.less, "<=": np.less_equal, "=": np.equal, "!=": np.not_equal}[p.op](lhs, rhs)
    raise UnsupportedError(f"a sparse Jacobian's pattern is computed from affine brackets; this one has {p}")


def _exists(p: Exists, env: dict, members: dict | None):
    """Where ``exists(k:size) body`` holds: ``k`` solved from an equality of ``body`` (``c*k + a = 0``: the
    points where ``a`` is a multiple of ``c`` within ``0 <= k < size``, a stride); else read off a relation
    where ``body`` has an atom ``R(.., k + c, ..)`` (``_over_entries``); else tried at each of its values."""
    k, extent = p.var, int(p.size.evaluate(env))
    parts = p.body.parts if isinstance(p.body, And) else (p.body,)
    for q in parts:
        if isinstance(q, Cmp) and q.op == "=" and (q.lhs - q.rhs).coeff(k):
            form = q.lhs - q.rhs
            c, rest = form.coeff(k), np.asarray((form - Affine.var(k) * form.coeff(k)).evaluate(env))
            value, remainder = np.divmod(-rest, c)
            at = (remainder == 0) & (value >= 0) & (value < extent)
            return at & _holds(p.body, {**env, k: np.where(at, value, 0)}, members)
    if not has_relations(p.body):   # affine: projected exactly by isl, where that leaves no existential
        dims = tuple(dict.fromkeys(v for v in _index_vars(p.body) if v is not k))
        projected = project(conj(p.body, box(((k, p.size),))), k, (*dims, k))
        if not any(isinstance(q, Exists) for q in walk(projected)):
            return _holds(projected, env, members)
    found = _over_entries(k, extent, parts, env, members)
    if found is not None:
        return found
    return functools.reduce(np.logical_or, (_holds(p.body, {**env, k: np.int64(v)}, members) for v in range(extent)),
                            False)


def _over_entries(k, extent: int, parts: tuple, env: dict, members: dict | None):
    """``exists(k) and(parts)`` read off the entries of a relation, in O(nnz): where the parts that read ``k``
    hold one atom ``R(v + c, k + d)`` (or ``R(k + d, v + c)``; ``v`` an index variable or none) and otherwise
    read only ``k``, ``v`` and the sizes, they are evaluated at every entry of ``R`` (``k`` and ``v`` read
    off it), and the points whose ``v`` has an entry where they hold are looked up.  None where the parts
    are not of that form."""
    reading = list(dict.fromkeys(q for q in parts if _reads(q, k)))
    atoms = [q for q in reading if isinstance(q, RelAtom) and any(a.coeff(k) for a in q.args)]
    if len(atoms) != 1 or not members or atoms[0].rel.name not in members or len(atoms[0].args) != 2:
        return None
    atom = atoms[0]
    at = [j for j, arg in enumerate(atom.args) if arg.coeff(k)]
    if len(at) != 1 or atom.args[at[0]].coeff(k) != 1:
        return None
    j = at[0]
    other = atom.args[1 - j]
    v = other.index_vars[0] if len(other.index_vars) == 1 and other.coeff(other.index_vars[0]) == 1 else None
    if other.index_vars and v is None or any(u is not k and u is not v for q in reading for u in _index_vars(q)):
        return None
    relation = members[atom.rel.name]
    sized = {u: x for u, x in env.items() if isinstance(u, SizeVar)}
    here = {**sized, k: relation.pairs[j] - (atom.args[j] - Affine.var(k)).evaluate(sized)}
    if v is not None:
        here[v] = relation.pairs[1 - j] - (other - Affine.var(v)).evaluate(sized)
    ok = (here[k] >= 0) & (here[k] < extent)
    rest_of = conj(*[q for q in reading if q is not atom])
    ok &= np.broadcast_to(np.asarray(_holds(rest_of, here, members), dtype=bool), ok.shape)
    if v is None:
        found = np.bool_(ok.any())
    else:
        allowed = sorted_unique(here[v][ok])
        point = np.asarray(env[v])
        if len(allowed):
            found = allowed[np.minimum(np.searchsorted(allowed, point), len(allowed) - 1)] == point
        else:
            found = np.zeros(np.shape(point), dtype=bool)
    rest = [q for q in parts if not _reads(q, k)]
    return found & _holds(conj(*rest), env, members) if rest else found


def _reads(q: Pred, k) -> bool:
    return any(v is k for v in _index_vars(q))


def _index_vars(q: Pred) -> list:
    """The index variables the affine forms of ``q`` (its comparisons and relation atoms) read."""
    out = []
    for node in walk(q):
        if isinstance(node, Cmp):
            out += [*node.lhs.index_vars, *node.rhs.index_vars]
        elif isinstance(node, RelAtom):
            out += [v for a in node.args for v in a.index_vars]
    return out


def sparse_jacobian(dense_body: Expr, declare, rank: int) -> SparseJacobian:
    """The ``SparseJacobian`` of a structured Jacobian's body (``gen(outputs, inputs) ...`` after its lets);
    ``declare`` makes a program of an expression (the primal's inputs and sizes)."""
    from .simplify import simplify_program

    bindings, out = let_chain(dense_body)
    loops, body = strip_gens(out)
    loops = tuple(loops)
    known = Supports()
    for var, value in bindings:
        v_loops, v_body = strip_gens(value)
        if v_loops:
            known.learn(var, tuple(v_loops), v_body)
    s = relation_support(body, loops, known)
    read = sorted({a.rel.name for a in walk(dense_body) if isinstance(a, RelAtom)})
    if s is TRUE and read:
        raise RelationPattern(
            f"tl.jacobian(..., sparse=True): where this Jacobian can be nonzero depends on the data of the relation(s) "
            f"{', '.join(read)} in a way its brackets do not bound; a sparse result is made where they say it is "
            f"nonzero on relation atoms, affine brackets and existentials over a relation (the Jacobian of a "
            f"sparse product, nonzero on E(i, j); a graph Laplacian's diagonal, exists(j) E(i, j)); use "
            f"sparse=False (its kernel computes only the relation's entries; scipy.sparse.csr_array(J) compresses "
            f"it)")
    parts, stored = [], []
    for affine, literals in _disjuncts(s):
        for part in _affine_pieces(affine, loops):
            part = Piece(conj(part.pred, *literals), part.loops, part.at, part.offsets) if literals else part
            parts.append(part)
            stored.append(_stored_over_entries(part, tuple(q for q in literals if isinstance(q, RelAtom))))
    made = [_computed(p).value(body) for p in parts]
    out_value = made[-1]
    for first in reversed(made[:-1]):
        out_value = Pair(first, out_value)
    values = implied_existentials_dropped(simplify_program(build_lets(bindings, out_value)))
    return SparseJacobian(declare(dense_body), declare(values), parts, rank, loops, tuple(stored),
                          overlapping=len(parts) > 1 and has_relations(s))


def implied_existentials_dropped(e: Expr, loops: tuple = ()) -> Expr:
    """``e`` with every existential over a relation that a sibling atom of its conjunction implies left out
    (``[E(i0, i1) and exists(i2) E(i0, i2) and 0 <= i2 < n]``: ``i2 = i1`` is a witness), and every disjunct
    of a guard that holds all the literals of another (``A or X and A`` is ``A``), and the literals common to
    every disjunct of a guard taken out of it (``E(i, k) and (p or q)``, so that a sum over ``k`` runs row
    ``i`` of ``E``).  The derivatives of a graph energy carry such existentials (the support of a sum over a
    relation's row, ``structure``), and a C kernel tests one by a loop over the relation's extent at each
    point where it is read."""
    if isinstance(e, (Gen, Sum, Max)):
        inner = loops + ((e.var, e.size),)
        body = implied_existentials_dropped(e.body, inner)
        return e if body is e.body else type(e)(e.var, e.size, body)
    if isinstance(e, Guard):
        pred, body = _implied_dropped(e.pred, loops), implied_existentials_dropped(e.body, loops)
        return e if pred is e.pred and body is e.body else Guard(pred, body)
    if isinstance(e, Pred):
        return e
    return rebuild(e, lambda child: implied_existentials_dropped(child, loops))


def _implied_dropped(p: Pred, loops: tuple) -> Pred:
    """The bracket ``p`` cleaned as ``implied_existentials_dropped`` says, within ``loops``."""
    if isinstance(p, And):
        parts = [_implied_dropped(q, loops) for q in p.parts]
        if any(a is not b for a, b in zip(parts, p.parts)):
            p = conj(*parts)
    if isinstance(p, Or):
        parts = [_implied_dropped(q, loops) for q in p.parts]
        literals = [set(q.parts) if isinstance(q, And) else {q} for q in parts]
        keep = [k for k in range(len(parts))   # (absorption: a disjunct with every literal of another goes)
                if not any(j != k and literals[j] <= literals[k] and (literals[j] != literals[k] or j < k)
                           for j in range(len(parts)))]
        first = parts[keep[0]].parts if isinstance(parts[keep[0]], And) else (parts[keep[0]],)
        common = [q for q in first if all(q in literals[k] for k in keep)] if len(keep) > 1 else []
        if common:   # (a literal of every disjunct taken out: a relation atom there lets a sum run its rows)
            rest = [conj(*[q for q in (parts[k].parts if isinstance(parts[k], And) else (parts[k],))
                           if q not in common]) for k in keep]
            return conj(*common, disj(*rest))
        kept = [parts[k] for k in keep]
        return p if len(kept) == len(p.parts) and all(a is b for a, b in zip(kept, p.parts)) else disj(*kept)
    if not isinstance(p, And) or not any(isinstance(q, Exists) for q in p.parts):
        return p
    kept = [q for q in p.parts if not (isinstance(q, Exists) and _witnessed(q, [r for r in p.parts if r is not q],
                                                                            loops))]
    return p if len(kept) == len(p.parts) else conj(*kept)


def _witnessed(ex: Exists, siblings: list, loops: tuple) -> bool:
    """Whether ``ex`` holds wherever ``siblings`` do (within ``loops``): for some sibling atom of the same
    relation, the value of ``ex``'s variable that makes one of its atoms that atom makes every other literal
    of its body a sibling or implied by the siblings' affine part and the loops' bounds."""
    body = ex.body.parts if isinstance(ex.body, And) else (ex.body,)
    atoms = [q for q in siblings if isinstance(q, RelAtom)]
    affine = conj(box(loops), *[q for q in siblings if not has_relations(q)])
    dims = tuple(v for v, _ in loops)
    for mine in (q for q in body if isinstance(q, RelAtom) and any(a.coeff(ex.var) for a in q.args)):
        for theirs in (q for q in atoms if q.rel is mine.rel):
            witness = _unified(mine, theirs, ex.var)
            if witness is None:
                continue
            here = [substitute_index(q, {ex.var: witness}) for q in body]
            if all(any(q is r for r in siblings) or (not has_relations(q) and _implied(affine, q, dims))
                   for q in here):
                return True
    return False


def _unified(mine: RelAtom, theirs: RelAtom, var):
    """The value of ``var`` that makes the atom ``mine`` the atom ``theirs`` (one of its arguments ``var + c``,
    the others equal), or None."""
    witness = None
    for a, b in zip(mine.args, theirs.args):
        c = a.coeff(var)
        if c == 0:
            if a != b:
                return None
        elif c != 1 or witness is not None:
            return None
        else:
            witness = b - (a - Affine.var(var))
    return witness


def _implied(context: Pred, q: Pred, dims: tuple) -> bool:
    from tensorlang.predicates import implies

    try:
        return implies(context, q, dims)
    except (UnsupportedError, ValueError):
        return False


def _disjuncts(s: Pred) -> list[tuple[Pred, tuple]]:
    """The support ``s`` as ``(affine part, relation literals)`` disjuncts (``isl_sets.pairs``; one, with no
    literals, where ``s`` reads no relation)."""
    if not has_relations(s):
        return [(s, ())]
    return pairs(s)


def _affine_pieces(affine: Pred, loops: tuple) -> list[Piece]:
    """The pieces of the affine support ``affine`` (``structure.pieces``): one of no point where it is
    false, the whole box where no piece stores fewer loops."""
    if affine is FALSE:
        return [Piece(FALSE, (), {v: Affine.const_(0) for v, _ in loops}, {})]
    parts = pieces(affine, loops) if affine is not TRUE else None
    if parts is None:
        variables = tuple(v for v, _ in loops)
        parts = [Piece(simplify_pred(conj(affine, box(loops)), variables), loops,
                       {v: Affine.var(v) for v in variables}, {})]
    return parts


def _computed(part: Piece) -> Piece:
    """``part`` as its values are computed: its existentials over a relation left out of its bracket (a C
    kernel would test each by a loop over the relation's extent at every point; its values outside its
    pattern are never read, and the Jacobian's own brackets make its values right inside).  Its affine
    part, which implies the bounds such an existential states of the piece's loops (``isl_sets.pairs``), and
    its affine existentials (strides) stay: they keep its reads within their tensors."""
    kept = [q for q in (part.pred.parts if isinstance(part.pred, And) else (part.pred,))
            if not (isinstance(q, Exists) and has_relations(q))]
    return Piece(conj(*kept), part.loops, part.at, part.offsets)


def _stored_over_entries(part: Piece, atoms: tuple):
    """How ``part`` is stored over a relation's entries: ``(atom, ka, kb)`` for the first of ``atoms`` that
    reads, over the piece's loops, ``R(u + c, w + d)`` with ``u`` and ``w`` two of its loops (at positions
    ``ka`` and ``kb``) and ``c``, ``d`` affine in the sizes; None where none does (its points are then its
    loops, the atoms looked up at each)."""
    variables = [v for v, _ in part.loops]
    for atom in atoms:
        here = substitute_index(atom, part.at)
        if len(here.args) != 2:
            continue
        ks = []
        for arg in here.args:
            vs = arg.index_vars
            if len(vs) == 1 and arg.coeff(vs[0]) == 1 and vs[0] in variables:
                ks.append(variables.index(vs[0]))
        if len(ks) == 2 and ks[0] != ks[1]:
            return here, ks[0], ks[1]
    return None


def evaluate(jac: SparseJacobian, **inputs):
    """``tl.evaluate`` of a sparse Jacobian: its values by the reference evaluator, in its pattern."""
    from tensorlang.cost import sizes_and_relations
    from tensorlang.evaluate import evaluate as evaluate_program

    values = evaluate_program(jac.values, **inputs)
    return jac.assemble(values, sizes_and_relations(jac.values, inputs)[0], inputs)


def cost(jac: SparseJacobian, **sizes_or_inputs):
    """``tl.cost`` of a sparse Jacobian: the cost of its values, the work of its nonzeros."""
    from tensorlang.cost import cost as cost_of

    return cost_of(jac.values, **sizes_or_inputs)
