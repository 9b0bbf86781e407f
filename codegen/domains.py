"""Each statement's domain as an isl set: "the isl set is the truth".

A loop nest binds some index variables (``inner``) inside others that are already bound (``outer``:
the enclosing generator and sum variables, fixed while the nest runs).  Its domain is an ``isl.Set``
whose set dimensions are the inner variables and whose parameters are the sizes *and the outer
variables*, all named by their C names, so that isl's AST generation prints C directly and
parameters align by name.  What is known at a point of the code (the sizes are non-negative, the
enclosing loops' domains and guards hold) is a *context*: a parameter-only set, passed to isl's AST
builder (``from_context``) and used to ``gist`` guards, so redundant bounds and tests disappear.

Predicates are converted by ``tensorlang.predicates.to_isl`` (exact for affine predicates, ``exists``
projected; relation atoms replaced by the bounds they imply, an over-approximation that the emitter
completes with a run-time test).
"""
from __future__ import annotations

from typing import Sequence

import islpy as isl

from tensorlang.inputs import MAX_SIZE
from tensorlang.nodes import IndexVar, Pred
from tensorlang.predicates import has_relations, over_approximation, to_isl

dt = isl.dim_type
CTX = isl.DEFAULT_CONTEXT

__all__ = ["Names", "domain", "params_set", "lift_to_context", "base_context", "is_exact"]


class Names:
    """C names for sizes (by size name) and index variables (by identity)."""

    def __init__(self, size_cnames: dict[str, str], namer):
        self.size_cnames = size_cnames
        self.namer = namer

    def var(self, v: IndexVar) -> str:
        return self.namer.var(v)

    def size(self, s: str) -> str:
        return self.size_cnames.get(s, s)


def is_exact(pred: Pred) -> bool:
    return not has_relations(pred)


def _rename_params(s, names: Names, outer_names: Sequence[str] = ()):
    for k in range(s.dim(dt.param)):
        nm = s.get_dim_name(dt.param, k)
        c = names.size(nm)
        if c != nm:
            s = s.set_dim_name(dt.param, k, c)
    return s


def domain(pred: Pred, inner: Sequence[IndexVar], outer: Sequence[IndexVar], names: Names) -> isl.Set:
    """The isl set of ``pred`` (its affine over-approximation) over ``inner``, with ``outer`` and the sizes
    as parameters named by their C names.  The set tuple is anonymous."""
    pred = over_approximation(pred)
    from tensorlang.traversal import free_index_vars

    free = {id(v) for v in free_index_vars(pred)}
    outer = [v for v in outer if id(v) in free and all(v is not w for w in inner)]
    s = to_isl(pred, tuple(outer) + tuple(inner), ())
    no = len(outer)
    if no:
        np_ = s.dim(dt.param)
        s = s.move_dims(dt.param, np_, dt.set, 0, no)
        for k, v in enumerate(outer):
            s = s.set_dim_name(dt.param, np_ + k, names.var(v))
    s = _rename_params(s, names)
    for k, v in enumerate(inner):
        s = s.set_dim_name(dt.set, k, names.var(v))
    return s


def params_set(pred: Pred, outer: Sequence[IndexVar], names: Names) -> isl.Set:
    """A predicate over bound variables as a parameter-only set."""
    return domain(pred, (), outer, names).params()


def lift_to_context(dom: isl.Set) -> isl.Set:
    """The facts that hold inside a loop nest over ``dom``: its set dimensions become parameters."""
    n = dom.dim(dt.set)
    if n == 0:
        return dom.params()
    names = [dom.get_dim_name(dt.set, k) for k in range(n)]
    np_ = dom.dim(dt.param)
    s = dom.move_dims(dt.param, np_, dt.set, 0, n)
    for k, nm in enumerate(names):
        s = s.set_dim_name(dt.param, np_ + k, nm)
    return s.params()


def base_context(sizes: Sequence[str], names: Names) -> isl.Set:
    """``{ : 0 <= n <= 2^53 }`` for every size (the runtime refuses larger ones): so no loop bound or
    condition isl writes holds a constant that int64 cannot (a guard ``[i = 2^63 - 1]`` is dead code)."""
    space = isl.Space.create_from_names(CTX, set=[], params=[names.size(s) for s in sizes])
    s = isl.Set.universe(space)
    v = isl.affs_from_space(space)
    for s_name in sizes:
        size = v[names.size(s_name)]
        s = s & v[0].le_set(size) & size.le_set(v[0] + MAX_SIZE)
    return s.params()

