"""Structural queries over nodes: free input variables, free index variables, size variables.

Every query is memoised on the node and returns its variables in order of first occurrence, so results
are deterministic whatever the hash seed.
"""
from __future__ import annotations

from itertools import chain

from .nodes import (
    BINDERS, Access, Affine, Expr, IndexVar, Let, Node, Pred, RelAtom, RelType, SizeVar, Type, Var,
    OPERATIONS, type_size_vars,
)


def _merge(*groups) -> tuple:
    return tuple(dict.fromkeys(chain.from_iterable(groups)))  # first occurrences, in order


def _field_nodes(node: Node):
    for v in node.children:
        if isinstance(v, tuple):
            yield from (w for w in v if isinstance(w, Node))
        elif isinstance(v, Node):
            yield v


def free_vars(node: Node) -> tuple[Var, ...]:
    """Free ``Var``s (inputs and relations) of an expression or predicate."""
    if isinstance(node, Var):  # not memoised: the cache of a variable would refer to the variable
        return (node,)

    def compute():
        if isinstance(node, Let):
            body = tuple(v for v in free_vars(node.body) if v is not node.var)
            return _merge(free_vars(node.value), body)
        if isinstance(node, RelAtom):
            return (node.rel,)
        return _merge(*(free_vars(c) for c in _field_nodes(node) if isinstance(c, (Expr, Pred))))

    return node.memo("free_vars", compute)


def value_inputs(node: Node) -> tuple[Var, ...]:
    """The free variables of ``node`` that are values (not relations)."""
    return tuple(v for v in free_vars(node) if not isinstance(v.type, RelType))


def free_index_vars(node) -> tuple[IndexVar, ...]:
    """Index variables used but not bound inside an expression, predicate or affine form."""
    if isinstance(node, Affine):
        return node.index_vars
    if isinstance(node, Type):
        return ()

    def compute():
        if isinstance(node, BINDERS):
            return tuple(v for v in free_index_vars(node.body) if v is not node.var)
        return _merge(*(free_index_vars(c) for c in _field_nodes(node)))

    return node.memo("free_index_vars", compute)


def size_vars(node) -> tuple[SizeVar, ...]:
    """Size variables mentioned anywhere: in indices, ranges, predicates and variables' types."""
    if isinstance(node, Affine):
        return node.size_vars
    if isinstance(node, Type):
        return type_size_vars(node)
    if isinstance(node, SizeVar):  # a size a program declares (``Declare.sizes``)
        return (node,)

    def compute():
        own = type_size_vars(node.type) if isinstance(node, Var) else ()
        return _merge(own, *(size_vars(c) for c in _field_nodes(node)))

    return node.memo("size_vars", compute)


def bound_names(node: Node) -> tuple[str, ...]:
    """Names of let-bound variables and index variables bound anywhere below ``node``."""

    def compute():
        own = ()
        if isinstance(node, Let):
            own = (node.var.name,)
        elif isinstance(node, BINDERS):
            own = (node.var.name,)
        return _merge(own, *(bound_names(c) for c in _field_nodes(node) if isinstance(c, (Expr, Pred))))

    return node.memo("bound_names", compute)


def accesses(node: Node):
    """Every ``Access`` node below ``node``, each once."""
    from .nodes import walk

    return [n for n in walk(node) if isinstance(n, Access)]


OPERATIONS.install(free_vars=free_vars, size_vars=size_vars)
