"""Let-lifting (section 5.1, Fig. 7, rules 5.1-5.10, and M1 for a maximum): every ``let`` moves to the top
of the program.

Postcondition (``normal_forms.is_let_lifted``)::

    Le ::= e | let x = e in Le          (e without let)

The rules run leftmost-outermost (``tensorlang.rules.rewrite``).  Two of them take the guards between
them and the ``let`` along, applying 5.9 back to back with themselves, as the paper's cost argument
assumes ("we may simply assume that the two relevant rewrite rules are applied back-to-back"):

* 5.1 on ``([p] * let x = e0 in e1) + e2``: the addition is charged only where the brackets right under
  both operands hold (4.24), so the bracket must stay right under the ``+``;
* 5.7 on ``sum(i) [p] * sum(j) [q] * let ...``: a summation chain and the brackets in it are charged
  jointly (4.30), so the whole chain is lifted over at once.

Every other rule is one equation of Fig. 7.  Bound names never clash: a let pulled over a sibling that
mentions another variable of the same name, or its own variable, even bound there (``(let t = x in x) *
(let t = y in t)``), is renamed first, and the variable that 5.6/5.7 give a new
index dimension keeps its name only when no other variable of the program has it.
"""
from __future__ import annotations

from tensorlang.nodes import (
    Access, Add, Call, Gen, Guard, Let, Max, Mul, Pair, Proj, Sum, Var, strip_guards, tensor, wrap_guards,
)
from tensorlang.rules import RuleTable, register_table, rule, var_objects
from tensorlang.substitute import substitute_vars

__all__ = ["LET_LIFT", "let_lift"]


def _open(let: Let, siblings, ctx):
    """``(x, e0, e1)`` of ``let``, with x renamed apart from the variables of ``siblings``, free or bound
    (a let of x in a sibling, lifted in turn, would bind x again inside this one's scope)."""
    x, e0, e1 = let.var, let.value, let.body
    if any(x in var_objects(s) for s in siblings):
        fresh = ctx.fresh_var(x.name, x.type)
        e1 = substitute_vars(e1, {x: fresh})
        x = fresh
    return x, e0, e1


def _guarded_let(e):
    preds, body = strip_guards(e)
    return (preds, body) if isinstance(body, Let) else None


def _lifted_var(x: Var, sizes, ctx) -> Var:
    """The variable of ``x``'s value with the new index dimensions ``sizes`` (outermost first)."""
    t = tensor(sizes, x.type)
    if ctx.name_is_unique(x):
        return Var(x.name, t)
    return ctx.fresh_var(x.name, t)


@rule("5.1 let-lift add", Add, equations=("5.1", "5.9"))
def lift_add(e, ctx):
    """``([p]*(let x = e0 in e1)) + e2  ->  let x = [p]*e0 in ([p]*e1) + e2`` (either operand; the
    brackets ``[p]`` may be absent).  5.9 and 5.1 back to back: the brackets stay right under the
    ``+``, so rule 4.24 charges the addition at the same points, and ``e0`` is charged where it was."""
    for k, (side, other) in enumerate(((e.left, e.right), (e.right, e.left))):
        found = _guarded_let(side)
        if found is None:
            continue
        preds, let = found
        x, e0, e1 = _open(let, [other], ctx)
        inner = wrap_guards(preds, e1)
        body = Add(inner, other) if k == 0 else Add(other, inner)
        return Let(x, wrap_guards(preds, e0), body)
    return None


@rule("5.2 let-lift mul", Mul)
def lift_mul(e, ctx):
    """``(let x = e0 in e1) * e2  ->  let x = e0 in e1 * e2`` (either operand)."""
    for k, (side, other) in enumerate(((e.left, e.right), (e.right, e.left))):
        if isinstance(side, Let):
            x, e0, e1 = _open(side, [other], ctx)
            return Let(x, e0, Mul(e1, other) if k == 0 else Mul(other, e1))
    return None


@rule("5.3 let-lift call", Call, polynomial=False)
def lift_call(e, ctx):
    """``f(.., let x = e0 in e1, ..)  ->  let x = e0 in f(.., e1, ..)`` (the first such argument)."""
    for k, arg in enumerate(e.args):
        if isinstance(arg, Let):
            others = [a for j, a in enumerate(e.args) if j != k]
            x, e0, e1 = _open(arg, others, ctx)
            args = list(e.args)
            args[k] = e1
            return Let(x, e0, Call(e.fn, tuple(args)))
    return None


@rule("5.4 let-lift pair", Pair)
def lift_pair(e, ctx):
    """``(let x = e0 in e1, e2)  ->  let x = e0 in (e1, e2)`` (either component)."""
    for k, (side, other) in enumerate(((e.first, e.second), (e.second, e.first))):
        if isinstance(side, Let):
            x, e0, e1 = _open(side, [other], ctx)
            return Let(x, e0, Pair(e1, other) if k == 0 else Pair(other, e1))
    return None


@rule("5.5 let-lift proj", Proj)
def lift_proj(e, ctx):
    """``(let x = e0 in e1).k  ->  let x = e0 in e1.k``."""
    if isinstance(e.pair, Let):
        let = e.pair
        return Let(let.var, let.value, Proj(e.index, let.body))
    return None


@rule("5.6 let-lift gen", Gen)
def lift_gen(e, ctx):
    """``gen(i:n) let x = e0 in e1  ->  let x' = gen(i:n) e0 in gen(i:n) [x -> x'[i]] e1``.

    The lifted variable gains the index dimension (loop fission; x' : [n]T).  Cost: the value is
    charged n times on both sides (4.29), and an access costs nothing (4.31)."""
    return _lift_out_of_loop(e, ctx)


def _lift_out_of_loop(e, ctx):
    """``B(i:n) let x = e0 in e1  ->  let x' = gen(i:n) e0 in B(i:n) [x -> x'[i]] e1`` for the binder B of
    ``e`` (a generator or a maximum)."""
    if not isinstance(e.body, Let):
        return None
    let = e.body
    x = let.var
    x2 = _lifted_var(x, (e.size,), ctx)
    body = substitute_vars(let.body, {x: x2[e.var]})
    return Let(x2, Gen(e.var, e.size, let.value), type(e)(e.var, e.size, body))


def _sum_chain(e):
    """A summation chain ``sum(i) [p] * sum(j) ... body`` as ``(links, body)``: links are ("sum", var,
    size) and ("guard", pred), outermost first."""
    links = []
    while isinstance(e, (Sum, Guard)):
        if isinstance(e, Sum):
            links.append(("sum", e.var, e.size))
        else:
            links.append(("guard", e.pred))
        e = e.body
    return links, e


def _rebuild_chain(links, body, as_gen: bool):
    for link in reversed(links):
        if link[0] == "sum":
            body = (Gen if as_gen else Sum)(link[1], link[2], body)
        else:
            body = Guard(link[1], body)
    return body


@rule("5.7 let-lift sum", Sum, equations=("5.7", "5.9"))
def lift_sum(e, ctx):
    """``sum(i:n) [p] * let x = e0 in e1  ->  let x' = gen(i:n) [p] * e0 in sum(i:n) [p] * [x -> x'[i]] e1``.

    The paper's 5.7 reads ``let x = (sum e0)``; the variable is indexed by i, so its value is a
    generator.  The whole summation chain (nested sums and the brackets among them) is lifted over at
    once, with 5.9 applied to its brackets back to back: rule 4.30 charges a chain jointly, so the
    brackets must stay in the chain, and the value is charged exactly where the summand was."""
    links, body = _sum_chain(e)
    if not isinstance(body, Let):
        return None
    let = body
    x = let.var
    idx = [link[1] for link in links if link[0] == "sum"]
    x2 = _lifted_var(x, [link[2] for link in links if link[0] == "sum"], ctx)
    value = _rebuild_chain(links, let.value, as_gen=True)
    new_body = substitute_vars(let.body, {x: x2[tuple(idx)]})
    return Let(x2, value, _rebuild_chain(links, new_body, as_gen=False))


@rule("M1 let-lift max", Max, polynomial=False)
def lift_max(e, ctx):
    """``max(i:n) let x = e0 in e1  ->  let x' = gen(i:n) e0 in max(i:n) [x -> x'[i]] e1``.

    As 5.6 for a generator: the lifted variable gains the index dimension.  The value is charged n
    times on both sides, the maximum's comparisons stay where they were, and over an empty range
    (n <= 0) neither side evaluates e0.  (A bracket over the let is lifted by 5.9 first: in a maximum's
    body a bracket is a value, 0 where false, and it stays in the body on both sides.)"""
    return _lift_out_of_loop(e, ctx)


@rule("5.8 let-lift access", Access)
def lift_access(e, ctx):
    """``(let x = e0 in e1)[a]  ->  let x = e0 in e1[a]``."""
    if isinstance(e.tensor, Let):
        let = e.tensor
        return Let(let.var, let.value, Access(let.body, e.index))
    return None


@rule("5.9 let-lift guard", Guard)
def lift_guard(e, ctx):
    """``[p] * (let x = e0 in e1)  ->  let x = [p] * e0 in [p] * e1``.

    The bracket is duplicated onto the value: without it the value would be charged where p is
    false (4.33).  (Under ``+`` and in summation chains, 5.1 and 5.7 take the bracket along instead.)"""
    if isinstance(e.body, Let):
        let = e.body
        return Let(let.var, Guard(e.pred, let.value), Guard(e.pred, let.body))
    return None


@rule("5.10 let-lift let", Let)
def lift_let(e, ctx):
    """``let y = (let x = e0 in e1) in e2  ->  let x = e0 in let y = e1 in e2``.

    (The paper prints the right side as ``let x = e1 in let y = e0 in e2``, with the names swapped.)"""
    if not isinstance(e.value, Let):
        return None
    inner = e.value
    x, e0, e1 = inner.var, inner.value, inner.body
    if x is e.var or x in var_objects(e.body):
        fresh = ctx.fresh_var(x.name, x.type)
        e1 = substitute_vars(e1, {x: fresh})
        x = fresh
    return Let(x, e0, Let(e.var, e1, e.body))


LET_LIFT = register_table(RuleTable(
    "let-lift",
    [lift_add, lift_mul, lift_call, lift_pair, lift_proj, lift_gen, lift_sum, lift_max, lift_access, lift_guard,
     lift_let],
    doc="Fig. 7: move every let to the top of the program.",
))

PASS = (LET_LIFT,)


def let_lift(expr, trace=None):
    """``tl.normalize.let_lift``: the program with every ``let`` at the top (Fig. 7), same meaning, cost
    no higher."""
    from tensorlang.rules import run_pass

    return run_pass(expr, PASS, trace)
