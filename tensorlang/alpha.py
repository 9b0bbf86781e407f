"""Alpha-equivalence: the canonical form of a node, with bound variables renamed by binding depth.

Two expressions are equal (``==``) when their canonical forms are the same hash-consed object.  The
index binder at depth d (counting enclosing ``gen``/``sum``/``exists``) binds ``canonical_index(d)``, and
the let at let-depth d binds a variable named ``%d`` (a name no program can spell): de Bruijn levels,
so canonical forms are unique and sharing is kept.
"""
from __future__ import annotations

from .nodes import (
    BINDERS, CANONICAL_INDICES, OPERATIONS, Affine, Cmp, Let, Node, RelAtom, Type, Var, canonical_index,
)
from .substitute import rebuild
from .traversal import free_index_vars, free_vars


def canonical(node: Node) -> Node:
    """The alpha-canonical form of an expression or predicate (memoised)."""
    if isinstance(node, (Cmp, RelAtom)):  # binds nothing and holds no binder: its own canonical form
        return node

    def compute():
        canon_ids = {id(v): k for k, v in enumerate(CANONICAL_INDICES)}
        used = [canon_ids[id(v)] for v in free_index_vars(node) if id(v) in canon_ids]
        start = max(used) + 1 if used else 0
        lets = 1 + max((int(v.name[1:]) for v in free_vars(node) if v.name.startswith("%")), default=-1)
        return _canon(node, (start, lets), {}, {})

    return node.memo("alpha", compute)


def _canon(node, depth: tuple[int, int], env: dict, memo: dict):
    """``depth`` counts the enclosing index binders and lets; ``env`` renames their variables."""
    if isinstance(node, Affine):
        return node.substitute(env) if env else node
    if isinstance(node, Type):
        return node
    if isinstance(node, Var):
        return env.get(node, node)
    free = free_index_vars(node) + free_vars(node)
    key = (id(node), depth, tuple(id(env.get(v)) for v in free))
    if key in memo:
        return memo[key]
    index_depth, let_depth = depth
    if isinstance(node, BINDERS):
        new = canonical_index(index_depth)
        inner = dict(env)
        inner[node.var] = Affine.var(new)
        out = type(node)(new, node.size, _canon(node.body, (index_depth + 1, let_depth), inner, memo))
    elif isinstance(node, Let):
        new = Var(f"%{let_depth}", node.var.type)
        inner = dict(env)
        inner[node.var] = new
        value = _canon(node.value, depth, env, memo)
        out = Let(new, value, _canon(node.body, (index_depth, let_depth + 1), inner, memo))
    else:
        out = rebuild(node, lambda c: _canon(c, depth, env, memo))
    memo[key] = out
    return out


def alpha_equal(a: Node, b: Node) -> bool:
    return type(a) is type(b) and canonical(a) is canonical(b)


def alpha_hash(a: Node) -> int:
    return hash((type(a).__name__, id(canonical(a))))


OPERATIONS.install(alpha_equal=alpha_equal, alpha_hash=alpha_hash)
