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
"""
from __future__ import annotations

import functools
import threading

import numpy as np

from tensorlang.codegen.kernel import right_nested_items
from tensorlang.errors import UnsupportedError
from tensorlang.nodes import (
    FALSE, TRUE, Affine, And, Cmp, Expr, Or, Pair, Pred, RelAtom, SizeVar, walk, box, conj, let_chain,
    build_lets, strip_gens,
)
from tensorlang.predicates import simplify as simplify_pred
from tensorlang.substitute import substitute_index

from .structure import Piece, Supports, pieces, support


class RelationPattern(UnsupportedError):
    """A sparse Jacobian refused because where it can be nonzero depends on the data of a relation."""


class SparseJacobian:
    """A Jacobian (or Hessian) whose value is a ``scipy.sparse.csr_array``: see the module docstring.
    ``dense`` is the structured Jacobian as an ordinary program (its value is the same matrix, dense, with
    the output indices first); ``rank`` the number of output indices."""

    def __init__(self, dense: Expr, values: Expr, parts: list[Piece], rank: int, loops: tuple):
        self.dense, self.values, self.parts, self.rank, self.loops = dense, values, parts, rank, loops
        self._patterns: dict = {}   # sizes -> (pattern, a csr_array of it that each result copies, shallow)
        self._lock = threading.Lock()

    def __str__(self) -> str:
        return f"# sparse: {len(self.parts)} piece(s), value a scipy.sparse.csr_array\n{self.dense}"

    __repr__ = __str__

    def shape(self, sizes: dict) -> tuple[int, int]:
        extents = [_extent(s, sizes) for _, s in self.loops]
        return int(np.prod(extents[:self.rank], dtype=np.int64)), int(np.prod(extents[self.rank:], dtype=np.int64))

    def pattern(self, sizes: dict):
        """``(positions, indices, indptr, shape)`` at ``sizes`` (names to ints), computed once per size:
        ``positions`` one array per piece over the piece's loops (C order), each point's position in the CSR
        ``data`` and -1 where the point is not in the pattern (int32 where the positions fit, else int64);
        ``indices`` and ``indptr`` the CSR arrays (int32 where they fit, as SciPy makes them).  All are
        read-only: every result at these sizes holds the CSR arrays, so a change of one result's structure in
        place (``eliminate_zeros``) would change the others'."""
        return self._prepared(sizes)[0]

    def _prepared(self, sizes: dict):
        """``(pattern(sizes), a csr_array of that pattern checked by SciPy, run(sizes))``, made once per size."""
        key = tuple(sorted(sizes.items()))
        with self._lock:
            found = self._patterns.get(key)
        if found is not None:
            return found
        import scipy.sparse as sp

        extents = [_extent(s, sizes) for _, s in self.loops]
        rows_of, cols_of, kept, bounds = [], [], [], [0]
        for part in self.parts:
            shape = tuple(max(_extent(s, sizes), 0) for _, s in part.loops)
            grid = np.indices(shape, dtype=np.int64, sparse=True) if shape else ()
            env = {v: grid[k] for k, (v, _) in enumerate(part.loops)}
            env.update({SizeVar(name): value for name, value in sizes.items()})
            mask = np.broadcast_to(_holds(substitute_index(part.pred, part.at), env), shape).ravel()
            coords = [np.broadcast_to(np.asarray(part.at[v].evaluate(env)), shape).ravel()[mask]
                      for v, _ in self.loops]
            rows_of.append(_flat(coords[:self.rank], extents[:self.rank], mask.sum()))
            cols_of.append(_flat(coords[self.rank:], extents[self.rank:], mask.sum()))
            kept.append(bounds[-1] + np.flatnonzero(mask))
            bounds.append(bounds[-1] + mask.size)
        rows, cols, take = (np.concatenate(a) for a in (rows_of, cols_of, kept))
        order = np.lexsort((cols, rows))
        n_rows, n_cols = self.shape(sizes)
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
        run = slice(start, start + len(take)) if len(self.parts) == 1 and len(take) and \
            np.array_equal(at[start:start + len(take)], np.arange(len(take))) else None
        found = ((positions, indices, indptr, (n_rows, n_cols)), template, run)
        with self._lock:
            self._patterns[key] = found
        return found

    def patterns(self) -> tuple:
        """Each piece's ``(loop variables, the predicate over them where its point is in the pattern)``."""
        return tuple((tuple(v for v, _ in part.loops), substitute_index(part.pred, part.at)) for part in self.parts)

    def entries(self) -> tuple:
        """Each piece's entry coordinates (the rows' indices, then the columns'), affine in its loop variables."""
        return tuple(tuple(part.at[v] for v, _ in self.loops) for part in self.parts)

    def run(self, sizes: dict):
        """The slice of the one piece's points (C order) that are the CSR ``data`` in order, where they are
        (a tridiagonal band: all of its points but the first and last), else None: there the piece's values
        as computed are the data, a view."""
        return self._prepared(sizes)[2]

    def result(self, data: np.ndarray, sizes: dict):
        """The ``csr_array`` at ``sizes`` holding ``data`` (its values in CSR order): a shallow copy of one
        that SciPy checked when the pattern was made (SciPy's constructor checks the indices again on each
        call, O(nonzeros) and 40-60 µs at any size).  The copy is what ``copy.copy`` makes, its attributes
        those of the checked one, made directly (1 µs, where ``copy.copy`` takes 2)."""
        template = self._prepared(sizes)[1]
        out = object.__new__(type(template))
        out.__dict__.update(template.__dict__)
        out.data = data
        return out

    def assemble(self, values, sizes: dict):
        """The ``csr_array`` of ``values`` (the value of ``self.values``, one array per piece, as the reference
        evaluator gives them) at ``sizes``: each piece's values put at their positions, O(nonzeros).  A
        compiled kernel writes them there itself (``codegen.kernel.SparseKernel``)."""
        positions, indices, *_ = self.pattern(sizes)
        data = np.empty(len(indices))
        for at, v in zip(positions, right_nested_items(values, len(self.parts))):
            kept = at >= 0
            data[at[kept]] = np.asarray(v, dtype=float).ravel()[kept]
        return self.result(data, sizes)


def _extent(size: Affine, sizes: dict) -> int:
    return int(size.evaluate({v: sizes[v.name] for v in size.size_vars}))


def _flat(coords: list, extents: list, count: int) -> np.ndarray:
    """The C-order flat index of the points ``coords`` (one array per dimension, ``count`` points)."""
    out = np.zeros(count, dtype=np.int64)
    for c, n in zip(coords, extents):
        out = out * n + c
    return out


def _holds(p: Pred, env: dict):
    """The points of the NumPy index arrays ``env`` where the affine predicate ``p`` holds."""
    if p is TRUE:
        return True
    if p is FALSE:
        return False
    if isinstance(p, (And, Or)):
        return functools.reduce(np.logical_and if isinstance(p, And) else np.logical_or,
                                (_holds(q, env) for q in p.parts))
    if isinstance(p, Cmp):
        lhs, rhs = p.lhs.evaluate(env), p.rhs.evaluate(env)
        return {"<": np.less, "<=": np.less_equal, "=": np.equal, "!=": np.not_equal}[p.op](lhs, rhs)
    raise UnsupportedError(f"a sparse Jacobian's pattern is computed from affine brackets; this one has {p}")


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
    s = support(body, loops, known)
    parts = pieces(s, loops) if s is not TRUE and s is not FALSE else None
    if s is FALSE:   # no nonzero: one piece of no point
        parts = [Piece(FALSE, (), {v: Affine.const_(0) for v, _ in loops}, {})]
    elif parts is None:
        variables = tuple(v for v, _ in loops)
        parts = [Piece(simplify_pred(conj(s, box(loops)), variables), loops,
                       {v: Affine.var(v) for v in variables}, {})]
    relations = sorted({a.rel.name for p in parts for a in walk(p.pred) if isinstance(a, RelAtom)})
    if s is TRUE:   # nonzero anywhere, as far as the brackets say: where a relation is read, its data decide
        relations = sorted({a.rel.name for a in walk(dense_body) if isinstance(a, RelAtom)})
    if relations:
        raise RelationPattern(
            f"tl.jacobian(..., sparse=True): where this Jacobian can be nonzero depends on the data of the relation(s) "
            f"{', '.join(relations)}, and a sparse result over a relation's pattern is not supported yet; use "
            f"sparse=False (its kernel computes only the relation's entries; scipy.sparse.csr_array(J) compresses it)")
    made = [p.value(body) for p in parts]
    out_value = made[-1]
    for first in reversed(made[:-1]):
        out_value = Pair(first, out_value)
    values = simplify_program(build_lets(bindings, out_value))
    return SparseJacobian(declare(dense_body), declare(values), parts, rank, loops)


def evaluate(jac: SparseJacobian, **inputs):
    """``tl.evaluate`` of a sparse Jacobian: its values by the reference evaluator, in its pattern."""
    from tensorlang.cost import sizes_and_relations
    from tensorlang.evaluate import evaluate as evaluate_program

    values = evaluate_program(jac.values, **inputs)
    return jac.assemble(values, sizes_and_relations(jac.values, inputs)[0])


def cost(jac: SparseJacobian, **sizes_or_inputs):
    """``tl.cost`` of a sparse Jacobian: the cost of its values, the work of its nonzeros."""
    from tensorlang.cost import cost as cost_of

    return cost_of(jac.values, **sizes_or_inputs)
