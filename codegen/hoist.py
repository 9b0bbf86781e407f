"""Hoisting black boxes and partial sums out of the loops they do not depend on, before fusion
(``codegen.fuse``).

A black-box call (``exp``, ``log``, a user's function) inside a loop nest that reads only some of the
nest's variables computes the same values again at every point of the others: ``exp(q[k, a])`` in
``gen(i:n, k:B, a:m)`` evaluates ``B * m`` values ``n`` times each, and ``sum(i:n) exp(q[k, a]) * ...`` in
``gen(k, a)`` ``n`` times each.  Each such call becomes a binding of its own over exactly the variables it
reads, ``t = gen(k:B, a:m) exp(q[k, a])``, placed before the statement that reads it, and the call is
replaced by the access ``t[k, a]``: fusion then stores ``t`` (a black box is inlined only where each use
reads each element once), and every value is computed once, at the loop depth where its indices live.
A sum or maximum that leaves out one of the loops around it (``sum(i:n) d[i, k]`` in ``gen(k:B, a:m)``) is
hoisted the same way, after its own black boxes.

``factored`` runs first and makes such sums: in ``gen(k, a) sum(i:n, b:m) [b < a] * f[i, k, b] * L[k, b, a]``
(the gradient of a batch of triangular products, O(n B m^2)), the factors that do not read ``i`` leave the
sum over ``i``, ``sum(b:m) [b < a] * L[k, b, a] * sum(i:n) f[i, k, b]``, whose inner sum leaves out ``a``:
hoisted, it is computed once per ``(k, b)``, O(n B m) in all.  Over the reals the two are equal; the order
of the additions (and, where a value is infinite or NaN, how it combines) changes, as the language's
contract allows.

A call is left in place where a guard on its way (``[i < n - 1] * ...``) mentions one of the variables it
reads (the guard may be what keeps its accesses in range), or a relation.  A hoisted binding is guarded by
the guards on its way holding somewhere in the loops it was taken out of (``exists(i:n) p``, which isl
simplifies, to ``1 <= n`` where there was no guard), so that it evaluates nothing the statement would not
have: an access the statement makes only where a guard on sizes holds is not made where it does not.  A
hoisted sum reads, at each point of its binding, what the statement read at every point of the loops left out
where that guard holds, so its own variables' guards need not keep it in place.  The factors ``factored``
takes out of a sum are guarded by the sum's own brackets holding for some value of its variable, for the same
reason.
"""
from __future__ import annotations

from tensorlang.nodes import (
    TRUE, Access, Affine, Call, Exists, Expr, Guard, Max, Mul, Sum, Var, conj, guard, strip_guards, strip_sums,
    sums, tensor, wrap_guards,
)
from tensorlang.predicates import has_relations, simplify
from tensorlang.substitute import fresh_name, rebuild
from tensorlang.traversal import free_index_vars, free_vars

__all__ = ["HOISTABLE", "factored", "hoisted", "reductions_apart"]

HOISTABLE = (Call, Sum, Max)   # the nodes ``hoisted`` takes out of the loops they do not read


def hoisted(lets: list, leaves: list) -> tuple[list, list]:
    """``lets`` and ``leaves`` (lists of ``[var, gen vars, gen sizes, body]``) with the black boxes hoisted:
    the new bindings, each before the first statement that reads it, and the statements reading them."""
    used = _names_in(lets, leaves)
    made: dict = {}   # (call, its variables with their sizes) -> the binding's variable

    def hoist(node: Expr, kept: tuple, dropped: tuple, guards: tuple, before: list, memo: dict) -> Expr:
        somewhere = conj(*guards)
        for v, s in reversed(dropped):
            somewhere = Exists(v, s, somewhere)
        somewhere = simplify(somewhere, [v for v, _ in kept])
        key = (node, kept, somewhere)
        var = made.get(key)
        if var is None:
            name = fresh_name(f"{node.fn if isinstance(node, Call) else type(node).__name__.lower()}_h", used)
            used.add(name)
            var = made[key] = Var(name, tensor(s for _, s in kept))
            value = node if isinstance(node, Call) else \
                rewrite(node, kept, (somewhere,) if somewhere is not TRUE else (), before, memo)
            before.append([var, tuple(v for v, _ in kept), tuple(s for _, s in kept), guard(somewhere, value)])
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
        if isinstance(e, HOISTABLE):
            reads, bound = set(free_index_vars(e)), {v for v, _ in loops}
            guarded = {v for p in guards for v in free_index_vars(p)}
            if reads < bound and len(bound) == len(loops) and not (isinstance(e, Call) and reads & guarded) \
                    and not any(map(has_relations, guards)) and not has_relations(e):   # (no loop shadows another)
                out = hoist(e, tuple((v, s) for v, s in loops if v in reads),
                            tuple((v, s) for v, s in loops if v not in reads), guards, before, memo)
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


def factored(lets: list, leaves: list) -> tuple[list, list]:
    """``lets`` and ``leaves`` (as ``hoisted`` takes them) with each run of nested sums whose summand is a
    product factored where that makes a partial sum that leaves out a loop around it (see the module
    docstring): of the sums' variables, the one whose sum, holding only the factors and brackets that read it,
    leaves out the most of the other variables in scope (the first of those in the run's order) goes innermost,
    the rest of the product outside it."""
    def rewrite(e, loops: tuple):
        if not isinstance(e, Expr):
            return e
        if isinstance(e, Sum):
            run, body = strip_sums(e)
            out = _factor(run, body, loops)
            if out is not None:
                return rewrite(out, loops)
            inner = rewrite(body, loops + tuple(v for v, _ in run))
            return e if inner is body else sums(run, inner)
        if isinstance(e, Max):
            return rebuild(e, lambda c: rewrite(c, loops + (e.var,)) if c is e.body else c)
        return rebuild(e, lambda c: rewrite(c, loops))

    return tuple([[var, gv, gs, rewrite(body, tuple(gv))] for var, gv, gs, body in items] for items in (lets, leaves))


def _product(e: Expr, guards: list, factors: list) -> None:
    """The brackets and factors of product ``e`` (a bracket guards its whole product: the strong zero)."""
    if isinstance(e, Guard):
        guards.append(e.pred)
        _product(e.body, guards, factors)
    elif isinstance(e, Mul):
        _product(e.left, guards, factors)
        _product(e.right, guards, factors)
    else:
        factors.append(e)


def _times(factors: list) -> Expr:
    out = factors[0]
    for f in factors[1:]:
        out = Mul(out, f)
    return out


def _factor(run: list, body: Expr, loops: tuple) -> Expr | None:
    """The run of sums ``run`` over ``body`` with one variable's sum innermost around the factors that read
    it, or None where no variable's sum would leave out a variable in scope."""
    guards: list = []
    factors: list = []
    _product(body, guards, factors)
    if any(map(has_relations, guards)):
        return None
    best = None
    for v, size in run:
        inside = [f for f in factors if v in free_index_vars(f)]
        outside = [f for f in factors if v not in free_index_vars(f)]
        own = [p for p in guards if v in free_index_vars(p)]
        left_out = _left_out(v, inside, own, run, loops)
        if outside and left_out and (best is None or left_out > best[0]):
            best = (left_out, v, size, inside, outside, own)
    if best is None:
        return None
    _, v, size, inside, outside, own = best
    rest = [(w, s) for w, s in run if w is not v]
    scope = list(loops) + [w for w, _ in rest]
    somewhere = simplify(Exists(v, size, conj(*own)), scope)
    inner = Sum(v, size, wrap_guards(own, _times(inside)))
    kept = [p for p in guards if v not in free_index_vars(p)]
    return sums(rest, wrap_guards(kept + [somewhere], _times(outside + [inner])))


def _left_out(v, inside: list, own: list, run: list, loops: tuple) -> int:
    """How many variables in scope the sum over ``v`` of the factors ``inside`` and its brackets ``own`` leaves
    out (0 where it has no factor)."""
    if not inside:
        return 0
    reads = {w for x in inside + own for w in free_index_vars(x)} - {v}
    return len((set(loops) | {w for w, _ in run if w is not v}) - reads)


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
