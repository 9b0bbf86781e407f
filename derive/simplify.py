"""Simplification of what the derivative rules produce, through the predicate module.

Every rule here obeys the law of DESIGN.md: it never raises the cost of Fig. 6 (``proofs/`` checks
each application).  Each is a named ``Rule`` of the table ``SIMPLIFY`` (which ``proofs/`` reads too): S1,
S2 and S5-S8 run in one pass of ``rules.ScopedDriver``, which gives each rule the loops and brackets
around its node; S3 and S4 work on the let chain.

* ``S1 one-point sum``: a summed variable that the predicate pins to one value at every other point is
  substituted away, ``sum(v) [p] * e -> [p'] * e[v -> a]`` (``p'``: where the solution exists).  A sum
  over at most one point costs no addition (4.30), and the bracket only narrows where e is evaluated.
  A sum whose predicate is empty is the zero.
* ``S2 bracket``: stacked brackets are one (5.24), simplified (``gist``) against the loops and brackets
  around them; a bracket they imply disappears, an empty one makes its operand the zero.
* ``S3 inline``: a let-bound tensor is computed where it is read instead of being stored, when that
  cannot cost more: its value costs nothing (a constant, an access), or it is read once and at
  distinct points (the index map from the loops around the read is injective: ``predicates.injective``,
  the test ``codegen.fuse`` makes too; so each element is computed at most once, as before).  This is
  what turns the adjoint of a convolution back into a correlation and keeps the pathological programs'
  gradients free of n-by-n temporaries.
* ``S4 dead let``: a binding nothing reads is dropped (6.20).
* ``S5 unit``: ``1 * e`` and ``e * 1`` are ``e`` (one multiplication fewer), as left by ``tl.grad``'s
  ``dy = 1``; ``0 + e`` and ``e + 0`` are ``e`` (one addition fewer), as left where a compressed tensor's
  read has no piece (T3, ``derive/structure.py``).
* ``S6 hoist bracket``: ``([p] * a) * b -> [p] * (a * b)`` (and on the right): the product is then
  computed only where p holds, and a sum around it sees the bracket (S1), as after one-hot probing.
* ``S7 constant``: ``c0 + c1`` and ``c0 * c1`` of constants are one constant.
* ``S8 implied by the sum``: ``[p and q] * sum(v) [c] * e -> [p] * sum(v) [c] * e`` when ``c`` implies
  ``q`` (over the loops and ``v``): where ``q`` fails every term's bracket fails and the sum is zero.
  The sum's points are the same, so the cost is too.
"""
from __future__ import annotations

from typing import Callable, Sequence

from tensorlang.nodes import (
    FALSE, Access, Add, And, Const, Expr, Gen, Guard, Let, Max, Mul, Pair, Pred, Proj, Sum, Var, box,
    build_lets, conj, guard, let_chain, strip_accesses, strip_gens, strip_guards, sum_chain, sums, zero,
)
from tensorlang.predicates import implies, injective, solve_unique
from tensorlang.predicates import simplify as simplify_pred
from tensorlang.rules import Rule, RuleTable, Scope, ScopedDriver, rule
from tensorlang.substitute import freshen, rebuild, substitute_index, substitute_vars
from tensorlang.traversal import free_vars


def solve_sums(dims: Sequence, pred: Pred, body: Expr, outer_dims: Sequence) -> Expr:
    """``sum(dims) [pred] * body`` inside the loops ``outer_dims`` (``pred`` and ``body`` over both), with
    every summed variable that ``pred`` pins to one value substituted away (rule S1)."""
    dims = list(dims)
    outer = tuple(v for v, _ in outer_dims)
    progress = True
    while progress:
        progress = False
        for k, (v, _) in enumerate(dims):
            others = outer + tuple(w for w, _ in dims if w is not v)
            solution = solve_unique(conj(pred, box(dims)), v, (v,) + others)
            if solution == []:
                return Const(0)
            if solution is None or len(solution) != 1:
                continue
            (where, value), = solution
            pred = where
            body = substitute_index(body, {v: value})
            dims.pop(k)
            progress = True
            break
    variables = outer + tuple(v for v, _ in dims)
    pred = simplify_pred(pred, variables, box(tuple(outer_dims) + tuple(dims)))
    if pred is FALSE:
        return Const(0)
    return sums(dims, guard(pred, body))


# ------------------------------------------------------------------------------------------------
# the whole-program pass


def simplify_program(expr: Expr, trace: list | None = None) -> Expr:
    """The rules of ``SIMPLIFY`` to a fixed point: S1, S2, S5-S8 in one pass with the loops and brackets
    around each node as context (``rules.ScopedDriver``), then S3 and S4 on the let chain.  ``trace`` (a
    list) receives ``(rule, before, after)`` for each step."""
    while True:
        new = ScopedDriver(SIMPLIFY, trace).run(expr)
        new = INLINE.fn(new, trace)
        new = DEAD_LET.fn(new, trace)
        if new is expr:
            return expr
        expr = new


@rule("S1 one-point sum", Sum)
def one_point_sum(e: Sum, scope: Scope) -> Expr:
    """``sum(v) [p] * e -> [p'] * e[v -> a]`` where p pins v to one value a (see the module docstring);
    the sum chain's body is simplified first, with the summed loops and the brackets as context."""
    dims, context = scope.loops, scope.guard
    summed, brackets, inner = sum_chain(e)
    preds = conj(*brackets)
    body = scope.visit(inner, tuple(summed), preds)
    solved = solve_sums(summed, conj(context, preds), body, dims)
    solved = _drop_context(solved, context, dims)
    if _same_sum(solved, summed, preds, body):
        return e if body is inner else sums(summed, guard(preds, body))
    return scope.record(one_point_sum, e, solved)


@rule("S2 bracket", Guard)
def bracket(e: Guard, scope: Scope) -> Expr:
    """Stacked brackets are one, simplified against the loops and brackets around them; then S8 on what
    is left."""
    dims, context = scope.loops, scope.guard
    brackets, inner = strip_guards(e)
    preds = conj(*brackets)
    p = simplify_pred(preds, scope.variables, conj(box(dims), context))
    if p is FALSE:
        return scope.record(bracket, e, zero(e.type))
    body = scope.visit(inner, (), p)
    out = guard(p, body)
    if out is e:
        return e
    out = scope.record(bracket, e, out) if p is not preds or isinstance(e.body, Guard) else out
    return implied_by_sum.fn(out, scope) if isinstance(out, Guard) else out


@rule("S5 unit", (Add, Mul))
def unit(e: Expr, scope: Scope) -> Expr | None:
    """``1 * e -> e``, ``e * 1 -> e``, ``0 + e -> e`` and ``e + 0 -> e``."""
    is_unit = _is_one if isinstance(e, Mul) else _is_zero
    if not (is_unit(e.left) or is_unit(e.right)):
        return None
    kept = e.right if is_unit(e.left) else e.left
    return scope.record(unit, e, scope.visit(kept))


@rule("S6 hoist bracket", Mul)
def hoist_bracket(e: Mul, scope: Scope) -> Expr | None:
    """``([p] * a) * b -> [p] * (a * b)`` (and on the right)."""
    if isinstance(e.left, Guard):
        hoisted = Guard(e.left.pred, Mul(e.left.body, e.right))
    elif isinstance(e.right, Guard):
        hoisted = Guard(e.right.pred, Mul(e.left, e.right.body))
    else:
        return None
    return scope.record(hoist_bracket, e, scope.visit(hoisted))


@rule("S7 constant", (Add, Mul))
def constant(e: Expr, scope: Scope) -> Expr | None:
    """``c0 + c1`` and ``c0 * c1`` of constants are one constant."""
    if not (isinstance(e.left, Const) and isinstance(e.right, Const)):
        return None
    value = e.left.value + e.right.value if isinstance(e, Add) else e.left.value * e.right.value
    return scope.record(constant, e, Const(value))


@rule("S8 implied by the sum", Guard)
def implied_by_sum(e: Guard, scope: Scope) -> Expr:
    """``[p and q] * sum(v) [c] * e -> [p] * sum(v) [c] * e`` where c implies q (run on what S2 leaves)."""
    implied = _implied_by_sum(e.pred, e.body, scope.loops)
    return e if implied is e.pred else scope.record(implied_by_sum, e, guard(implied, e.body))


def _drop_context(e: Expr, context: Pred, dims) -> Expr:
    """The brackets S1 left on a sum restate the context: gist them against it."""
    if isinstance(e, Guard):
        variables = tuple(v for v, _ in dims)
        p = simplify_pred(e.pred, variables, conj(box(dims), context))
        return zero(e.type) if p is FALSE else guard(p, e.body)
    return e


def _implied_by_sum(p: Pred, body: Expr, dims) -> Pred:
    """``p`` less its conjuncts that the bracket of the sum ``body`` implies (S8): where such a conjunct
    fails, every term of the sum has a false bracket, so the sum is zero there anyway.  This is what
    makes the adjoint of ``gen(i) sum(j) [E(i, j)] * y[j]`` the transposed product ``gen(k) sum(i)
    [E(i, k)] * dy[i]``, without the bracket ``exists(i) E(i, k)`` that a kernel would test in O(n)."""
    if not isinstance(body, Sum):
        return p
    summed, brackets, _ = sum_chain(body)
    inner = conj(*brackets, box(tuple(dims) + tuple(summed)))
    variables = tuple(v for v, _ in dims) + tuple(v for v, _ in summed)
    parts = p.parts if isinstance(p, And) else (p,)
    kept = tuple(x for x in parts if not implies(inner, x, variables))
    return p if len(kept) == len(parts) else conj(*kept)


def _is_one(e: Expr) -> bool:
    return isinstance(e, Const) and e.value == 1


def _is_zero(e: Expr) -> bool:
    return isinstance(e, Const) and e.value == 0


def _same_sum(solved: Expr, summed, preds: Pred, body: Expr) -> bool:
    """Whether S1 left the sum as it was (same variables, same bracket)."""
    e = solved
    for v, _ in summed:
        if not isinstance(e, Sum) or e.var is not v:
            return False
        e = e.body
    brackets, e = strip_guards(e)
    return e is body and conj(*brackets) == preds


# S3 -----------------------------------------------------------------------------------------------


def _occurrences(e: Expr, var: Var) -> list[tuple[Expr, tuple]]:
    """Every read of ``var`` in ``e`` (counted in the tree, with multiplicity), each with the loops
    around it: ``(node, dims)`` where node is the outermost access chain over var (or var itself)."""
    found: list = []
    _visit_occurrences(e, (), var, found)
    return found


def _visit_occurrences(n: Expr, dims: tuple, var: Var, found: list) -> None:
    # a module function, not a closure: a recursive closure is a reference cycle, and everything it holds
    # would wait for the cycle collector
    if var not in free_vars(n):
        return
    if isinstance(n, Access) or n is var:
        _, base = strip_accesses(n)
        if base is var:
            found.append((n, dims))
            return
    if isinstance(n, (Gen, Sum, Max)):
        _visit_occurrences(n.body, dims + ((n.var, n.size),), var, found)
        return
    for c in n.children:
        for x in c if isinstance(c, tuple) else (c,):
            if isinstance(x, Expr):
                _visit_occurrences(x, dims, var, found)


def _is_free(value: Expr) -> bool:
    """A value that costs nothing at any point: constants, reads and brackets of them."""
    while isinstance(value, (Gen, Guard)):
        value = value.body
    while isinstance(value, (Access, Proj)):
        value = value.tensor if isinstance(value, Access) else value.pair
    return isinstance(value, (Const, Var))


def _inline_lets(e: Expr, trace) -> Expr:
    """S3 over the let chain at the top of ``e``, innermost binding first.  The values after a binding
    and the components of the chain's output (the right-nested pairs of a gradient in several inputs)
    are its slots; an index from each variable to the slots that read it keeps every decision and
    rewrite to the slots it concerns, so the pass is linear in the program (not in the chain's length
    times the program, nor in the number of gradients times the output's pairs)."""
    bindings, out = let_chain(e)
    if not bindings:
        return e
    slots = [value for _, value in bindings] + _pair_parts(out)
    kept = [True] * len(bindings)
    readers: dict[Var, set[int]] = {}
    end: dict[Var, int] = {}  # a shadowing binding of the same variable: reads after it are its own

    def index(s: int) -> None:
        for v in free_vars(slots[s]):
            readers.setdefault(v, set()).add(s)

    def rest(j: int) -> Expr:
        return build_lets([(bindings[s][0], slots[s]) for s in range(j + 1, len(bindings)) if kept[s]],
                          _pairs(slots[len(bindings):]))

    for s in range(len(bindings), len(slots)):
        index(s)
    for j in reversed(range(len(bindings))):
        var, value = bindings[j]
        reading = sorted(s for s in readers.get(var, ()) if j < s <= end.get(var, len(slots) - 1))
        end[var] = j
        rewrite = _inlining(var, value, [use for s in reading for use in _occurrences(slots[s], var)])
        if rewrite is None:
            index(j)
            continue
        before = Let(var, value, rest(j)) if trace is not None else None
        for s in reading:
            slots[s] = rewrite(slots[s])
            index(s)
        kept[j] = False
        if trace is not None:
            trace.append((INLINE.name, before, rest(j)))
    return build_lets([(var, slots[s]) for s, (var, _) in enumerate(bindings) if kept[s]],
                      _pairs(slots[len(bindings):]))


def _pair_parts(out: Expr) -> list[Expr]:
    """``(a, (b, c))`` as ``[a, b, c]`` (along the second components only): ``_pairs`` is its inverse."""
    parts = []
    while isinstance(out, Pair):
        parts.append(out.first)
        out = out.second
    return parts + [out]


def _pairs(parts: list[Expr]) -> Expr:
    out = parts[-1]
    for first in reversed(parts[:-1]):
        out = Pair(first, out)
    return out


def _inlining(var: Var, value: Expr, uses: list) -> Callable | None:
    """How S3 rewrites a slot (a function of it) when ``let var = value`` is inlined at ``uses`` (the
    reads in the slots, with the loops around each, as ``_occurrences`` gives them), or None when the
    binding stays."""
    if _is_path(value):  # an alias of an input (or of a part of one): read it directly
        return lambda slot: substitute_vars(slot, {var: value})
    gen_dims, body = strip_gens(value)
    dims = [v for v, _ in gen_dims]
    full = all(len(strip_accesses(node)[0]) == len(dims) for node, _ in uses)
    cheap = _is_free(value) and full
    single = len(uses) == 1 and full and injective(strip_accesses(uses[0][0])[0], uses[0][1])
    if not uses or not (cheap or single):
        return None
    copies: dict[int, Expr] = {}
    for node, _ in uses:
        mapping = dict(zip(dims, strip_accesses(node)[0]))
        copies.setdefault(id(node), substitute_index(freshen(body), mapping))
    return lambda slot: _replace(slot, copies, var)


def _is_path(e: Expr) -> bool:
    while isinstance(e, Proj):
        e = e.pair
    return isinstance(e, Var)


def _replace(e: Expr, copies: dict[int, Expr], var: Var) -> Expr:
    """``e`` with each read of ``var`` whose node id ``copies`` maps replaced by its copy, in one pass
    that enters only the nodes where ``var`` is free (each once)."""
    return _replace_in(e, copies, var, {})


def _replace_in(n, copies: dict[int, Expr], var: Var, memo: dict[int, Expr]):
    if not isinstance(n, Expr) or var not in free_vars(n):
        return n
    if id(n) in copies:
        return copies[id(n)]
    if id(n) not in memo:
        memo[id(n)] = rebuild(n, lambda c: _replace_in(c, copies, var, memo))
    return memo[id(n)]


# S4 -----------------------------------------------------------------------------------------------


def _drop_dead(e: Expr, trace) -> Expr:
    """S4 over the let chain at the top of ``e``, innermost binding first, with the set of variables the
    kept values and the output read (linear in the chain)."""
    bindings, out = let_chain(e)
    read = set(free_vars(out))
    live = []
    for var, value in reversed(bindings):
        if var in read:
            read.discard(var)  # reads above this binding are of an outer binding of the same name
            read.update(free_vars(value))
            live.append((var, value))
        elif trace is not None:
            body = build_lets(live[::-1], out)
            trace.append((DEAD_LET.name, Let(var, value, body), body))
    return build_lets(live[::-1], out)


INLINE = Rule("S3 inline", _inline_lets, (Let,), "a let-bound tensor computed where it is read (see the module "
              "docstring); on the let chain, root=True", root=True)
DEAD_LET = Rule("S4 dead let", _drop_dead, (Let,), "a binding nothing reads is dropped (6.20)", root=True)
SIMPLIFY = RuleTable("simplify", [one_point_sum, bracket, INLINE, DEAD_LET, unit, hoist_bracket, constant,
                                  implied_by_sum], doc="the simplification rules S1-S8, none raising the cost")
