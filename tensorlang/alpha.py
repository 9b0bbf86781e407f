"""Alpha-equivalence: the canonical form of a node, with bound index variables renamed by binding depth.

Two expressions are equal (``==``) when their canonical forms are the same hash-consed object.  The
binder at depth d (counting enclosing ``gen``/``sum``/``exists``) binds ``canonical_index(d)``: de Bruijn
levels, so canonical forms are unique and sharing is kept.
"""
from __future__ import annotations

from .nodes import Affine, Exists, Gen, Node, Sum, Type, _CANONICAL, canonical_index
from .substitute import rebuild
from .traversal import free_index_vars

_BINDERS = (Gen, Sum, Exists)


def canonical(node: Node) -> Node:
    """The alpha-canonical form of an expression or predicate (memoised)."""

    def compute():
        canon_ids = {id(v): k for k, v in enumerate(_CANONICAL)}
        used = [canon_ids[id(v)] for v in free_index_vars(node) if id(v) in canon_ids]
        start = max(used) + 1 if used else 0
        return _canon(node, start, {}, {})

    return node.memo("alpha", compute)


def _canon(node, depth: int, env: dict, memo: dict):
    if isinstance(node, Affine):
        return node.substitute(env) if env else node
    if isinstance(node, Type):
        return node
    free = free_index_vars(node)
    key = (id(node), depth, tuple(id(env.get(v)) for v in free))
    if key in memo:
        return memo[key]
    if isinstance(node, _BINDERS):
        new = canonical_index(depth)
        inner = dict(env)
        inner[node.var] = Affine.var(new)
        out = type(node)(new, node.size, _canon(node.body, depth + 1, inner, memo))
    else:
        out = rebuild(node, lambda c: _canon(c, depth, env, memo))
    memo[key] = out
    return out


def alpha_equal(a: Node, b: Node) -> bool:
    return type(a) is type(b) and canonical(a) is canonical(b)


def alpha_hash(a: Node) -> int:
    return hash((type(a).__name__, id(canonical(a))))
