"""Capture-avoiding substitution: index variables by affine forms, and input variables by expressions.

``rebuild`` is the one generic traversal step every pass uses: apply a function to a node's children
and rebuild the node only if a child changed (hash-consing makes unchanged rebuilds free anyway).
"""
from __future__ import annotations

from typing import Callable, Mapping

from .declarations import body_of, declare
from .errors import TypeCheckError
from .nodes import BINDERS, OPERATIONS, Affine, Expr, IndexVar, Let, Node, RelAtom, Type, Var, as_affine
from .traversal import free_index_vars, free_vars, size_vars


def rebuild(node: Node, f: Callable) -> Node:
    """``node`` with ``f`` applied to each child node (also inside tuple fields); other fields kept."""
    changed = False
    values = []
    for v in node.children:
        if isinstance(v, tuple):
            new = tuple(f(w) if isinstance(w, Node) else w for w in v)
            changed |= any(a is not b for a, b in zip(new, v))
        elif isinstance(v, Node) and not isinstance(v, Type):
            new = f(v)
            changed |= new is not v
        else:
            new = v
        values.append(new)
    return type(node)(*values) if changed else node


def substitute_index(node, mapping: Mapping[IndexVar, object]):
    """``[i -> a]node`` for every ``i -> a`` in mapping (values: affine forms, index variables or ints)."""
    mapping = {k: as_affine(v) for k, v in mapping.items() if as_affine(v) is not Affine.var(k)}
    if not mapping:
        return node
    return _subst_index(node, mapping, {})


def _subst_index(node, mapping: dict, memo: dict):
    if isinstance(node, Affine):
        return node.substitute(mapping)
    if isinstance(node, Type):
        return node
    if not any(v in mapping for v in free_index_vars(node)):
        return node
    key = id(node)
    if key in memo:
        return memo[key]
    if isinstance(node, BINDERS):
        inner = {k: v for k, v in mapping.items() if k is not node.var}
        var, body = _apart(node, _free_indices(inner.values()))
        out = type(node)(var, node.size, _subst_index(body, inner, {}))
    else:
        out = rebuild(node, lambda c: _subst_index(c, mapping, memo))
    memo[key] = out
    return out


def _free_indices(values) -> set[IndexVar]:
    """The index variables free in any of ``values`` (affine forms or expressions)."""
    return {v for e in values for v in free_index_vars(e)}


def _apart(binder, taken: set[IndexVar]) -> tuple:
    """``(var, body)`` of the index binder ``binder``, its variable renamed to a fresh one when it is in
    ``taken`` (the index variables free in what is put under it), so that none is captured."""
    if binder.var not in taken:
        return binder.var, binder.body
    var = binder.var.fresh()
    return var, rename_index(binder.body, binder.var, var)


def rename_index(node, old: IndexVar, new: IndexVar):
    return substitute_index(node, {old: Affine.var(new)})


def substitute_vars(node, mapping: Mapping[Var, Expr]):
    """``[x -> e]node`` for input/let variables; let-bound names and binders are renamed on capture.
    Only the entries for node's free variables are looked at (a pass renaming a long let chain passes
    the whole mapping to each statement)."""
    mapping = {x: mapping[x] for x in free_vars(node) if x in mapping and mapping[x] is not x}
    if not mapping:
        return node
    return _subst_vars(node, mapping, _free_indices(mapping.values()), {})


def _subst_vars(node, mapping: dict, taken: set[IndexVar], memo: dict):
    """``taken``: the index variables free in mapping's values, which no binder around them may capture."""
    if isinstance(node, (Affine, Type)):
        return node
    if not any(v in mapping for v in free_vars(node)):
        return node
    key = id(node)
    if key in memo:
        return memo[key]
    if isinstance(node, Var):
        out = mapping[node]
    elif isinstance(node, RelAtom):
        rel = mapping[node.rel]
        if not isinstance(rel, Var):
            raise TypeCheckError(f"relation {node.rel.name} can only be replaced by another relation")
        out = RelAtom(rel, node.args)
    elif isinstance(node, Let):
        value = _subst_vars(node.value, mapping, taken, memo)
        inner = {k: v for k, v in mapping.items() if k is not node.var}
        var, body = node.var, node.body
        if any(var in free_vars(e) for e in inner.values()):
            fresh = fresh_var(var.name, var.type, avoid=[body, *inner.values()])
            body = substitute_vars(body, {var: fresh})
            var = fresh
        if len(inner) < len(mapping):
            taken = _free_indices(inner.values())
        out = Let(var, value, _subst_vars(body, inner, taken, {}))
    elif isinstance(node, BINDERS):
        var, body = _apart(node, taken)
        out = type(node)(var, node.size, _subst_vars(body, mapping, taken, {}))
    else:
        out = rebuild(node, lambda c: _subst_vars(c, mapping, taken, memo))
    memo[key] = out
    return out


def fresh_var(name: str, type_: Type, avoid) -> Var:
    """A ``Var`` named ``name`` or ``name<k>``, distinct from every name used in the nodes of ``avoid``."""
    return Var(fresh_name(name, used_names(avoid)), type_)


def used_names(nodes) -> set[str]:
    """The names of the free variables and of the bound names of ``nodes``."""
    from .traversal import bound_names

    used: set[str] = set()
    for n in nodes:
        used.update(v.name for v in free_vars(n))
        used.update(bound_names(n))
    return used


def fresh_name(name: str, used: set[str]) -> str:
    """``name``, or ``name<k>`` for the least k >= 1 that is not in ``used``."""
    if name not in used:
        return name
    k = 1
    while f"{name}{k}" in used:
        k += 1
    return f"{name}{k}"


def substitute_inputs(expr: Expr, replacements: Mapping[str, object]) -> Expr:
    """``expr.substitute(x=e, ...)``: replace free inputs by expressions or by source text (parsed against
    expr's declarations).  Types must match."""
    from .parser import parse

    free = {v.name: v for v in free_vars(expr)}
    mapping = {}
    for name, value in replacements.items():
        if name not in free:
            raise TypeCheckError(f"{name} is not an input of this expression (inputs: {', '.join(free)})")
        var = free[name]
        if isinstance(value, str):
            decls = {v.name: v.type for v in free.values() if v.name != name}
            value = body_of(parse(value, **decls))
        if not isinstance(value, Expr):
            from .nodes import as_expr

            value = as_expr(value)
        if value.type is not var.type:
            raise TypeCheckError(f"cannot substitute {name} : {var.type} by a value of type {value.type}")
        mapping[var] = value
    kept = [v for v in free.values() if v not in mapping]
    return declare(substitute_vars(body_of(expr), mapping), kept, size_vars(expr))


def freshen(node):
    """``node`` with every index variable it binds replaced by a new one (so it can be placed under
    binders of the same variables without shadowing them)."""
    if isinstance(node, (Affine, Type)) or not isinstance(node, Node):
        return node
    if isinstance(node, BINDERS):
        var = node.var.fresh()
        body = rename_index(freshen(node.body), node.var, var)
        return type(node)(var, node.size, body)
    return rebuild(node, freshen)


OPERATIONS.install(substitute_inputs=substitute_inputs)
