"""Loop nests from isl's AST generation.

``loop_nest(stmts, context, iterators)`` takes named statement domains (isl sets over the same loop
variables, parameters named by C names), schedules each by the identity (the loop order is the order of
the variables), and asks isl for the AST under the known facts (``AstBuild.from_context``).  So:

* a variable pinned by an equality (``sum(k) [k = 0] ...``, ``[i = j]``) is an assignment, not a loop
  (isl turns loops that run once into the value);
* an empty domain produces no code; guards become loop bounds (``for (j = i + 1; j < m; ...)``), and
  the parts of a guard that do not depend on the loop variables become one ``if`` around the nest;
* statements with disjoint domains over the same variables (a generator's "compute" and "zero" parts)
  are interleaved by isl into loops with tight bounds and no tests inside.

The result is a small tree (``For``, ``If``, ``Block``, ``User``) whose expressions are already C text
(``ast_expr_c``), walked by the emitters.  isl's macros ``min``, ``max``, ``floord`` are provided by the
emitted prelude.  No Python callback is passed to isl here, so nothing can raise inside isl.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import islpy as isl

dt = isl.dim_type

__all__ = ["For", "If", "Block", "User", "loop_nest", "ast_expr_c", "cond_c"]


@dataclass
class For:
    var: str
    init: str
    cond: str
    inc: str
    body: object
    degenerate: bool = False
    outermost: bool = False


@dataclass
class If:
    cond: str
    then: object
    orelse: object = None


@dataclass
class Block:
    children: list = field(default_factory=list)


@dataclass
class User:
    name: str
    args: list  # C expressions of the statement's domain coordinates
    domain: object = None  # the part of the statement's domain this leaf runs (an isl.Set), from isl


_BIN = {
    "add": "+", "sub": "-", "mul": "*", "eq": "==", "le": "<=", "lt": "<", "ge": ">=", "gt": ">",
    "and_": "&&", "and_then": "&&", "or_": "||", "or_else": "||", "pdiv_q": "/", "pdiv_r": "%",
    "zdiv_r": "%", "div": "/",
}


def ast_expr_c(e) -> str:
    """An ``isl.AstExpr`` as a C expression (64-bit integer arithmetic)."""
    t = e.get_type()
    if t == isl.ast_expr_type.int:
        v = e.get_val().to_python()
        return f"{v}L" if abs(v) >= 2**31 else str(v)
    if t == isl.ast_expr_type.id:
        return e.get_id().get_name()
    op = e.get_op_type()
    name = op.name if hasattr(op, "name") else str(op)
    name = name.split(".")[-1]
    args = [ast_expr_c(e.get_op_arg(k)) for k in range(e.get_op_n_arg())]
    if name in _BIN:
        return "(" + f" {_BIN[name]} ".join(args) + ")"
    if name == "minus":
        return f"(-{args[0]})"
    if name in ("max", "min"):
        out = args[0]
        for a in args[1:]:
            out = f"tl_{name}({out}, {a})"
        return out
    if name == "fdiv_q":
        return f"tl_floord({args[0]}, {args[1]})"
    if name in ("cond", "select"):
        return f"({args[0]} ? {args[1]} : {args[2]})"
    raise NotImplementedError(f"isl AST operation {name}")


def _name(e) -> str:
    return e.get_id().get_name()


def _walk(node, depth: int, leaves: dict | None = None):
    t = node.get_type()
    if t == isl.ast_node_type.block:
        children = node.block_get_children()
        return Block([_walk(children.get_at(k), depth, leaves) for k in range(children.n_ast_node())])
    if t == isl.ast_node_type.for_:
        var = _name(node.for_get_iterator())
        init = ast_expr_c(node.for_get_init())
        if node.for_is_degenerate():
            return For(var, init, "", "", _walk(node.for_get_body(), depth, leaves), degenerate=True)
        body = _walk(node.for_get_body(), depth + 1, leaves)
        return For(var, init, ast_expr_c(node.for_get_cond()), ast_expr_c(node.for_get_inc()), body,
                   outermost=depth == 0)
    if t == isl.ast_node_type.if_:
        cond = ast_expr_c(node.if_get_cond())
        then = _walk(node.if_get_then_node(), depth, leaves)
        orelse = _walk(node.if_get_else_node(), depth, leaves) if node.if_has_else_node() else None
        return If(cond, then, orelse)
    if t == isl.ast_node_type.user:
        call = node.user_get_expr()
        name = _name(call.get_op_arg(0))
        args = [ast_expr_c(call.get_op_arg(k)) for k in range(1, call.get_op_n_arg())]
        domain = None
        if leaves is not None:
            try:
                us = leaves.get(node.get_annotation().get_name())
            except isl.Error:  # no annotation: the leaf's domain is unknown
                us = None
            if us is not None:
                sets = []
                us.foreach_set(sets.append)
                domain = sets[0] if len(sets) == 1 else None
        return User(name, args, domain)
    if t == isl.ast_node_type.mark:
        return _walk(node.mark_get_node(), depth, leaves)
    raise NotImplementedError(f"isl AST node {t}")


def loop_nest(stmts: Sequence[tuple[str, isl.Set]], context: isl.Set, iterators: Sequence[str],
              separate: bool = True, schedules: dict | None = None):
    """The loop tree that runs every statement once at each point of its domain, in lexicographic order
    of the (shared) loop variables; ``None`` when every domain is empty under ``context``.  ``schedules``
    (by statement name, an injective ``isl.Map`` from the statement's domain space to ``len(iterators)``
    dimensions) orders the points by their image instead; a leaf's arguments are still the statement's
    own variables."""
    context = int64_context(context)
    umap = None
    for name, dom in stmts:
        dom = dom.intersect_params(context).coalesce()
        if dom.is_empty():
            continue
        dom = dom.set_tuple_name(name)
        if schedules is None:
            m = isl.Map.identity(isl.Space.map_from_set(dom.get_space())).intersect_domain(dom)
        else:
            m = schedules[name].set_tuple_name(dt.in_, name).intersect_domain(dom)
        m = m.reset_tuple_id(dt.out)
        um = isl.UnionMap.from_map(m)
        umap = um if umap is None else umap.union(um)
    if umap is None:
        return None
    build = isl.AstBuild.from_context(context)
    if separate and iterators:
        # "separate": split loops so that every statement runs in loops of its own (no if inside)
        dims = ", ".join(f"d{k}" for k in range(len(iterators)))
        build = build.set_options(isl.UnionMap(f"{{ [{dims}] -> separate[x] }}"))
    if iterators:
        ids = isl.IdList.alloc(isl.DEFAULT_CONTEXT, len(iterators))
        for it in iterators:
            ids = ids.add(isl.Id(it))
        build = build.set_iterators(ids)
    leaves: dict = {}
    failures: list = []

    def at_leaf(node, b):
        # never raise inside an isl callback (it would turn into a crash at exit): record and go on
        try:
            key = f"leaf{len(leaves)}"
            leaves[key] = b.get_schedule().domain()
            return node.set_annotation(isl.Id(key))
        except isl.Error:  # the leaf stays without its domain
            return node
        except Exception as exc:  # noqa: BLE001 - a bug: raised again once isl has returned
            failures.append(exc)
            return node

    build, handle = build.set_at_each_domain(at_leaf)
    node = build.node_from_schedule_map(umap)
    del handle
    if failures:
        raise failures[0]
    tree = _walk(node, 0, leaves)
    if separate and iterators and _users(tree) > MAX_SEPARATE_COPIES:
        # separation can copy a statement once per piece of a complicated domain: fall back to isl's
        # default (tests in the loops), which keeps the code linear in the domain's description
        return loop_nest(stmts, context, iterators, separate=False, schedules=schedules)
    return tree


MAX_SEPARATE_COPIES = 64


def _users(tree) -> int:
    if isinstance(tree, Block):
        return sum(_users(c) for c in tree.children)
    if isinstance(tree, For):
        return _users(tree.body)
    if isinstance(tree, If):
        return _users(tree.then) + (_users(tree.orelse) if tree.orelse is not None else 0)
    return 1


def int64_context(context: isl.Set) -> isl.Set:
    """``context`` and what C's types add to it: every parameter (a size or an enclosing loop's variable,
    each an ``int64_t``) lies in int64's range, so a condition that only a value beyond it could meet
    (``2*j + 2^64 + 1 < n``) is known false, and isl never prints a constant C cannot hold."""
    for k in range(context.dim(dt.param)):
        context = context.lower_bound_val(dt.param, k, isl.Val(str(-2**63))).upper_bound_val(
            dt.param, k, isl.Val(str(2**63 - 1)))
    return context


def cond_c(s: isl.Set, context: isl.Set) -> str | None:
    """A parameter-only set as a C condition under ``context``: ``None`` when it always holds, ``"0"``
    when it never does; otherwise the condition gisted against what is known."""
    context = int64_context(context)
    if (s & context).is_empty():
        return "0"
    if context.is_subset(s):
        return None
    g = s.gist_params(context).coalesce()
    build = isl.AstBuild.from_context(context)
    return ast_expr_c(build.expr_from_set(g))
