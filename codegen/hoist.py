"""Hoisting black boxes out of the loops they do not depend on, before fusion (``codegen.fuse``).

A black-box call (``exp``, ``log``, a user's function) inside a loop nest that reads only some of the
nest's variables computes the same values again at every point of the others: ``exp(q[k, a])`` in
``gen(i:n, k:B, a:m)`` evaluates ``B * m`` values ``n`` times each, and ``sum(i:n) exp(q[k, a]) * ...`` in
``gen(k, a)`` ``n`` times each.  Each such call becomes a binding of its own over exactly the variables it
reads, ``t = gen(k:B, a:m) exp(q[k, a])``, placed before the statement that reads it, and the call is
replaced by the access ``t[k, a]``: fusion then stores ``t`` (a black box is inlined only where each use
reads each element once), and every value is computed once, at the loop depth where its indices live.

A call is left in place where a guard on its way (``[i < n - 1] * ...``) mentions one of the variables it
reads (the guard may be what keeps its accesses in range), or a relation.  A hoisted binding is guarded by
the guards on its way holding somewhere in the loops it was taken out of (``exists(i:n) p``, which isl
simplifies, to ``1 <= n`` where there was no guard), so that it evaluates nothing the statement would not
have: an access the statement makes only where a guard on sizes holds is not made where it does not.
"""
from __future__ import annotations

from tensorlang.nodes import (
    Access, Affine, Call, Exists, Expr, Guard, Max, Sum, Var, conj, guard, strip_guards, tensor,
)
from tensorlang.predicates import has_relations, simplify
from tensorlang.substitute import fresh_name, rebuild
from tensorlang.traversal import free_index_vars, free_vars

__all__ = ["hoisted", "reductions_apart"]


def hoisted(lets: list, leaves: list) -> tuple[list, list]:
    """``lets`` and ``leaves`` (lists of ``[var, gen vars, gen sizes, body]``) with the black boxes hoisted:
    the new bindings, each before the first statement that reads it, and the statements reading them."""
    used = _names_in(lets, leaves)
    made: dict = {}   # (call, its variables with their sizes) -> the binding's variable

    def hoist(call: Call, kept: tuple, dropped: tuple, guards: tuple, before: list) -> Expr:
        somewhere = conj(*guards)
        for v, s in reversed(dropped):
            somewhere = Exists(v, s, somewhere)
        somewhere = simplify(somewhere, [v for v, _ in kept])
        key = (call, kept, somewhere)
        var = made.get(key)
        if var is None:
            name = fresh_name(f"{call.fn}_h", used)
            used.add(name)
            var = made[key] = Var(name, tensor(s for _, s in kept))
            before.append([var, tuple(v for v, _ in kept), tuple(s for _, s in kept), guard(somewhere, call)])
        access = var
        for v, _ in kept:
            access = Access(access, Affine.var(v))
        return access

    def rewrite(e, loops: tuple, guards: tuple, before: list, memo: dict):
        if not isinstance(e, Expr):
            return e
        key = (id(e), loops, guards)
        if key in memo:
            return memo[key]
        if isinstance(e, Call):
            reads, bound = set(free_index_vars(e)), {v for v, _ in loops}
            guarded = {v for p in guards for v in free_index_vars(p)}
            if reads < bound and not reads & guarded and len(bound) == len(loops) \
                    and not any(map(has_relations, guards)):   # (and no loop shadows another)
                out = hoist(e, tuple((v, s) for v, s in loops if v in reads),
                            tuple((v, s) for v, s in loops if v not in reads), guards, before)
                memo[key] = out
                return out
        if isinstance(e, (Sum, Max)):
            out = rebuild(e, lambda c: rewrite(c, loops + ((e.var, e.size),), guards, before, memo)
                          if c is e.body else c)
        elif isinstance(e, Guard):
            out = rebuild(e, lambda c: rewrite(c, loops, guards + (e.pred,), before, memo) if c is e.body else c)
        else:
            out = rebuild(e, lambda c: rewrite(c, loops, guards, before, memo))
        memo[key] = out
        return out

    out_lets: list = []
    out_leaves: list = []
    for into, items in ((out_lets, lets), (out_leaves, leaves)):
        for var, gv, gs, body in items:
            before: list = []
            body = rewrite(body, tuple(zip(gv, gs)), (), before, {})
            out_lets += before
            into.append([var, gv, gs, body])
    return out_lets, out_leaves


def reductions_apart(lets: list, leaves: list) -> tuple[list, list]:
    """``lets`` and ``leaves`` with each sum or maximum inside a scalar statement's value (``m + log(sum(i:n)
    exp(x[i] - m))``) made a scalar binding of its own, before the statement, guarded by the guards on its
    way: a target whose threads share a reduction's loop (CUDA) then runs it as a kernel of its own instead of
    a loop in the single thread that computes the rest.  A statement that is one reduction stays as it is."""
    used = _names_in(lets, leaves)

    def rewrite(e, guards: tuple, before: list, memo: dict):
        if not isinstance(e, Expr):
            return e
        if id(e) in memo:
            return memo[id(e)]
        if isinstance(e, (Sum, Max)) and not free_index_vars(e):
            name = fresh_name("red", used)
            used.add(name)
            out = Var(name, e.type)
            before.append([out, (), (), guard(conj(*guards), e)])
        elif isinstance(e, Guard):
            out = rebuild(e, lambda c: rewrite(c, guards + (e.pred,), before, memo) if c is e.body else c)
        else:
            out = rebuild(e, lambda c: rewrite(c, guards, before, memo))
        memo[id(e)] = out
        return out

    out_lets: list = []
    out_leaves: list = []
    for into, items in ((out_lets, lets), (out_leaves, leaves)):
        for var, gv, gs, body in items:
            if not gv and not isinstance(strip_guards(body)[1], (Sum, Max)):
                before: list = []
                body = rewrite(body, (), before, {})
                out_lets += before
            into.append([var, gv, gs, body])
    return out_lets, out_leaves


def _names_in(lets: list, leaves: list) -> set:
    """The names the bindings and their bodies use (a new binding's name must be none of them)."""
    return {c[0].name for c in lets} | {v.name for c in lets + leaves for v in free_vars(c[3])}
