"""Tensor SSA (section 5.4, Fig. 10-12, rules 5.25-5.34, with the paper's four fix-ups).

Precondition: let-lifted, pair-eliminated, generators pushed out (accesses of generators and brackets
resolved by 5.21/5.22; a bracket over a generator is taken apart by 5.27 here).  Postcondition
(``normal_forms.is_tensor_ssa``, Fig. 10)::

    S ::= let X = E in S | X | (S, S)            the output: variables (and their pairs)

where E is one of the statement forms of ``statements.py`` (an input, a constant, a guarded binary
addition, a guarded map of a black box, a binary or unary tensor contraction; ``statements.classify``
recognises them), every X is let-bound earlier, and no two statements have the same right-hand side.

**The translation as statement rules.**  The paper's ``[[gen(i..) [p] * e]]_SSA`` is kept as a
statement ``let x = gen(i..) [p] * e``; each rule takes one statement whose right side is not yet an
SSA form apart, by the head of e, into SSA statements inserted before it (so the let chain stays flat:
fix-up 2 holds by construction).  Every statement means exactly what its right side meant (zero where
``p`` is false), which is what makes each step checkable on its own.

* 5.26 (and fix-up 1): ``let y = X`` or its eta-form ``let y = gen(i..) X[i..]`` is removed, y -> X.
* 5.27, 5.28: ``gen(i) [p] * gen(j) e -> gen(i, j) [p] * e``; ``[p0] * [p1] * e -> [p0 and p1] * e``.
* 5.29: a guarded constant becomes ``let C = c`` and ``gen(i..) [p] * C`` (a unary contraction without
  sums), so the statement still means exactly ``[p] * c``.
* 5.30: an input read is bound to a statement ``let X = pi..x`` (rule "5.30 input"); an access with a
  non-variable index ``X[a]`` becomes ``sum(s) [s = a] * X[s]`` (rule "5.30 access"), a sum over at most
  one point, so it costs nothing (4.30).
* 5.31-5.34: addition, product, black box and summation, as in Fig. 12.  Operands that are already
  accesses of SSA variables at index variables are used in place instead of being copied into a new
  variable by 5.30 and then removed by fix-up 1, and the brackets right under a product's operands are
  folded into the product's bracket; both only lower the cost.  In 5.32 the paper's
  ``sum(i0, i1) [g = i0 = i1] * X0[i0] * X1[i1]`` is written with the sums solved,
  ``[p] * X0[g] * X1[g]``.
* M2: a run of maxima ``max(r..) e`` puts its body into a statement of its own, read by the SSA form
  ``gen(g..) [p] * max(r..) X[g.., r..]`` (``statements.MaxReduction``).
* 5.34 takes the whole summation chain (nested sums and the brackets among them) and the brackets go
  with it into the new contraction: rule 4.30 charges the chain jointly.  A summand that is already a
  product of SSA accesses gives the contraction directly.

Fix-up 3 (name the output) runs first, fix-up 4 (common subexpressions, ordering conventions,
canonical index names, dead statements) and 5.25 (SSA names ``X0, X1, ...`` in order) last.
"""
from __future__ import annotations

import islpy as isl

from tensorlang.errors import UnsupportedError
from tensorlang.nodes import (
    FALSE, TRUE, Access, Add, Affine, Call, Const, Gen, Guard, IndexVar, Let, Max, Mul, Pair, Proj, Sum, Var,
    box, build_lets, compare, conj, gens, guard, has_pair, let_chain, maxes, strip_accesses, strip_gens,
    strip_guards, strip_maxes, strip_sums, sum_chain, sums, tensor_dims, wrap_guards,
)
from tensorlang.rules import RuleTable, register_table, rule, run_pass
from tensorlang.substitute import substitute_vars
from tensorlang.traversal import free_index_vars, free_vars, value_inputs

from ._util import is_path, path_base
from .statements import (
    Addition, Contraction, Map, bare, classify, contraction_body, exact_access, input_form, is_input_statement,
    ssa_access,
)

__all__ = ["SSA_OUTPUT", "SSA", "SSA_FINISH", "SSA_NAMES", "tensor_ssa", "output_ok"]


# --------------------------------------------------------------------------------------------------
# the program's inputs, and whether a right-hand side is an SSA form (``statements.classify``)


def _inputs(ctx) -> frozenset:
    found = ctx.cache.get("ssa.inputs")
    if found is None:
        found = frozenset(value_inputs(ctx.root))
        ctx.cache["ssa.inputs"] = found
    return found


def _is_ssa_form(v, ctx) -> bool:
    key = ("ssa.form", id(v))
    found = ctx.cache.get(key)
    if found is None:
        found = (classify(None, v, _inputs(ctx)) is not None, v)  # keep v alive with its id
        ctx.cache[key] = found
    return found[0]


# --------------------------------------------------------------------------------------------------
# the statement rules


def _split(v):
    """``gen(g..) [p] * head`` as ``(g, p, head)`` with the brackets conjoined (None if stacked brackets
    or a generator under a bracket remain: 5.27/5.28 first)."""
    dims, body = strip_gens(v)
    preds, head = strip_guards(body)
    if len(preds) > 1 or isinstance(head, Gen):
        return None
    return dims, (preds[0] if preds else TRUE), head


def _new(ctx, value):
    return ctx.fresh_var("X", value.type, numbered=True), value


def _statement(rule_fn):
    """Statement rules see ``let x = v in body`` with v not yet an SSA form."""

    def fn(e, ctx):
        if _is_ssa_form(e.value, ctx):
            return None
        return rule_fn(e, ctx)

    fn.__doc__ = rule_fn.__doc__
    return fn


def copy_of(v, inputs):
    """The variable Y when ``v`` is Y (let-bound) or ``gen(i..) Y[i..]`` over all of Y's dimensions."""
    if isinstance(v, Var):
        return v if v not in inputs else None
    dims, body = strip_gens(v)
    found = ssa_access(body, inputs)
    if found is None or not dims:
        return None
    y, idx = found
    sizes, _ = tensor_dims(y.type)
    if len(idx) != len(dims) or len(sizes) != len(dims):
        return None
    if all(a is d for a, (d, _) in zip(idx, dims)) and all(s is t for s, (_, t) in zip(sizes, dims)):
        return y
    return None


@rule("5.26 variable", Let, equations=("5.26", "fix-up 1"))
def ssa_variable(e, ctx):
    """``[[X]] = X``, and fix-up 1: ``let y = X in S  ->  [y -> X] S`` (also for ``y = gen(i..) X[i..]``)."""
    y = copy_of(e.value, _inputs(ctx))
    if y is None:
        return None
    return substitute_vars(e.body, {e.var: y})


def _first_input_path(v, inputs):
    """The first (pre-order) maximal path over an input in ``v``."""
    from tensorlang.rules import expr_children

    stack = [v]
    while stack:
        n = stack.pop()
        if isinstance(n, (Proj, Access, Var)) and is_path(n):
            if path_base(n) in inputs:
                return n
            continue
        stack.extend(reversed([c for _, c in expr_children(n)]))
    return None


@rule("5.30 input", Let)
def ssa_input(e, ctx):
    """``... pi..x [a..] ...  ->  let X = pi..x in ... X[a..] ...``: the input read becomes a statement of
    its own (a tensor of pairs is read as a struct of arrays, ``gen(j) pi_k (x[j])``).  Cost 0."""
    inputs = _inputs(ctx)
    if is_input_statement(e.value, inputs):
        return None
    path = _first_input_path(e.value, inputs)
    if path is None:
        return None
    E, inner, outer = input_form(path, inputs)
    X, _ = _new(ctx, E)
    value = substitute_paths(e.value, path, X[tuple(inner + outer)])
    return Let(X, E, Let(e.var, value, e.body))


def substitute_paths(node, path, new):
    """``node`` with every occurrence of the subterm ``path`` replaced by ``new`` (no binders in between
    can capture: ``new`` mentions the index variables ``path`` mentions)."""
    return _substitute_path(node, path, new, {})


def _substitute_path(n, path, new, memo: dict):
    # a module function, not a recursive closure (a reference cycle that only the cycle collector frees)
    if n is path:
        return new
    if not hasattr(n, "type"):
        return n
    key = id(n)
    if key in memo:
        return memo[key]
    from tensorlang.substitute import rebuild

    out = rebuild(n, lambda c: _substitute_path(c, path, new, memo) if hasattr(c, "type") else c)
    memo[key] = out
    return out


@rule("5.27 gen under guard", Let)
@_statement
def ssa_gen_flatten(e, ctx):
    """``gen(i..) [p] * gen(j) e  ->  gen(i.., j) [p] * e``."""
    dims, body = strip_gens(e.value)
    preds, head = strip_guards(body)
    if not preds or not isinstance(head, Gen):
        return None
    inner_dims, inner = strip_gens(head)
    return Let(e.var, gens(dims + inner_dims, wrap_guards(preds, inner)), e.body)


@rule("5.28 guard guard", Let)
@_statement
def ssa_guards(e, ctx):
    """``gen(i..) [p0] * [p1] * e  ->  gen(i..) [p0 and p1] * e`` (and ``[true] * e -> e``)."""
    dims, body = strip_gens(e.value)
    preds, head = strip_guards(body)
    if isinstance(head, Gen) or not (len(preds) >= 2 or (preds and preds[0] is TRUE)):
        return None
    return Let(e.var, gens(dims, guard(conj(*preds), head)), e.body)


@rule("5.29 constant", Let)
@_statement
def ssa_constant(e, ctx):
    """``gen(i..) [p] * c  ->  let C = c in gen(i..) [p] * C``: the constant (``C``) and a unary contraction
    without sums that keeps the statement exact where p is false.  (Unguarded, ``gen(i..) c`` is already
    the SSA constant form.)  Cost 0."""
    split = _split(e.value)
    if split is None:
        return None
    dims, p, head = split
    if not isinstance(head, Const) or p is TRUE:
        return None
    C, cv = _new(ctx, head)
    return Let(C, cv, Let(e.var, gens(dims, Guard(p, C)), e.body))


@rule("5.30 access", Let)
@_statement
def ssa_access_rule(e, ctx):
    """``gen(g..) [p] * X[a..]  ->  gen(g.., h..) sum(s..) [p and s = a ..] * X[s.., h..]``: every index that
    is not an index variable becomes a summation pinned by an equality (one point per g, so the sum
    costs nothing by 4.30), and the dimensions left unindexed become generators (h)."""
    split = _split(e.value)
    if split is None:
        return None
    dims, p, head = split
    if not isinstance(head, (Access, Var)) or not is_path(head):
        return None
    base = path_base(head)
    if base in _inputs(ctx):
        return None
    indices, under = strip_accesses(head)
    if under is not base:   # a read through a projection of a tensor of pairs: not this rule's
        return None
    sizes, _ = tensor_dims(base.type)
    idx, sdims, eqs = [], [], []
    for a, size in zip(indices, sizes):
        v = bare(a)
        if v is not None:
            idx.append(v)
        else:
            s = IndexVar("s")
            sdims.append((s, size))
            eqs.append(compare("=", Affine.var(s), a))
            idx.append(s)
    hdims = [(IndexVar("h"), size) for size in sizes[len(indices):]]
    idx += [h for h, _ in hdims]
    body = guard(conj(p, *eqs), base[tuple(idx)])
    new = gens(tuple(dims) + tuple(hdims), sums(sdims, body))
    return Let(e.var, new, e.body)


def _operand(ctx, dims, p, inner, stmts, exact: bool):
    """An operand as an SSA access: in place when it already is one, else a new statement
    ``X = gen(g..) [p] * inner`` read at ``X[g..]``."""
    inputs = _inputs(ctx)
    gvars = [v for v, _ in dims]
    if exact and exact_access(inner, inputs, dims):
        return inner
    if not exact and ssa_access(inner, inputs, gvars) is not None:
        return inner
    X, value = _new(ctx, gens(dims, guard(p, inner)))
    stmts.append((X, value))
    return X[tuple(gvars)]


@rule("5.31 add", Let)
@_statement
def ssa_add(e, ctx):
    """``gen(i..) [p] * ([p0] * e0 + [p1] * e1)  ->  let X0 = gen(i..) [p and p0] * e0 in let X1 = ..
    in gen(i..) ([p and p0] * X0[i..] + [p and p1] * X1[i..])``.  The addition is charged where both
    brackets hold, as before (4.24)."""
    split = _split(e.value)
    if split is None:
        return None
    dims, p, head = split
    if not isinstance(head, Add):
        return None
    stmts, terms = [], []
    for side in (head.left, head.right):
        qs, inner = strip_guards(side)
        pk = conj(p, *qs)
        terms.append(guard(pk, _operand(ctx, dims, pk, inner, stmts, exact=True)))
    new = gens(dims, Add(terms[0], terms[1]))
    return build_lets(stmts, Let(e.var, new, e.body))


@rule("5.32 mul", Let)
@_statement
def ssa_mul(e, ctx):
    """``gen(g..) [p] * e0 * e1  ->  let X0 = gen(g..) [p] * e0 in let X1 = gen(g..) [p] * e1 in
    gen(g..) [p] * X0[g..] * X1[g..]`` (the paper's sums over ``[g = i0 = i1]``, solved).  Brackets right
    under the factors join p (fewer points charged, never more)."""
    split = _split(e.value)
    if split is None:
        return None
    dims, p, head = split
    if not isinstance(head, Mul):
        return None
    ql, left = strip_guards(head.left)
    qr, right = strip_guards(head.right)
    P = conj(p, *ql, *qr)
    stmts = []
    f0 = _operand(ctx, dims, P, left, stmts, exact=False)
    f1 = _operand(ctx, dims, P, right, stmts, exact=False)
    new = gens(dims, guard(P, Mul(f0, f1)))
    return build_lets(stmts, Let(e.var, new, e.body))


@rule("5.33 call", Let, polynomial=False)
@_statement
def ssa_call(e, ctx):
    """``gen(i..) [p] * f(e0, ..)  ->  let X0 = gen(i..) [p] * e0 in .. gen(i..) [p] * f(X0[i..], ..)``.
    (Bracketing the arguments is harmless: f's value is not used where p is false.)"""
    split = _split(e.value)
    if split is None:
        return None
    dims, p, head = split
    if not isinstance(head, Call):
        return None
    stmts = []
    args = tuple(_operand(ctx, dims, p, a, stmts, exact=True) for a in head.args)
    new = gens(dims, guard(p, Call(head.fn, args)))
    return build_lets(stmts, Let(e.var, new, e.body))


@rule("5.34 sum", Let)
@_statement
def ssa_sum(e, ctx):
    """``gen(g..) [p] * sum(j..) [q] * e  ->  let X = gen(g.., j..) [p] * [q] * e in
    gen(g..) sum(j..) [p and q] * X[g.., j..]``: the whole summation chain at once, its brackets with
    it (4.30 charges the chain jointly).  A summand that is already a product of SSA accesses gives the
    contraction directly."""
    split = _split(e.value)
    if split is None:
        return None
    dims, p, head = split
    if not isinstance(head, Sum):
        return None
    sdims, qs, n = sum_chain(head)
    Q = conj(p, *qs)
    allowed = [v for v, _ in dims] + [v for v, _ in sdims]
    if contraction_body(n, _inputs(ctx), allowed):
        return Let(e.var, gens(dims, sums(sdims, guard(Q, n))), e.body)
    inner = guard(p, guard(conj(*qs), n)) if qs else guard(p, n)
    X, value = _new(ctx, gens(tuple(dims) + tuple(sdims), inner))
    new = gens(dims, sums(sdims, guard(Q, X[tuple(allowed)])))
    return Let(X, value, Let(e.var, new, e.body))


@rule("M2 max", Let, polynomial=False)
@_statement
def ssa_max(e, ctx):
    """``gen(g..) [p] * max(r..) e  ->  let X = gen(g.., r..) [p] * e in gen(g..) [p] * max(r..) X[g.., r..]``:
    the body becomes a statement of its own (normalised by the other rules), read by the SSA form of a
    maximum.  The whole run of maxima at once, as 5.34 takes a summation chain; a bracket in the body
    stays in the body, where it is a value (0 where false), not a restriction of the range.  The body is
    charged at the same points as before, and the maximum's comparisons too."""
    split = _split(e.value)
    if split is None:
        return None
    dims, p, head = split
    if not isinstance(head, Max):
        return None
    rdims, body = strip_maxes(head)
    X, value = _new(ctx, gens(tuple(dims) + tuple(rdims), guard(p, body)))
    new = gens(dims, guard(p, maxes(rdims, X[tuple(v for v, _ in tuple(dims) + tuple(rdims))])))
    return Let(X, value, Let(e.var, new, e.body))


SSA = register_table(RuleTable(
    "tensor-ssa",
    [ssa_variable, ssa_input, ssa_gen_flatten, ssa_guards, ssa_constant, ssa_access_rule, ssa_add, ssa_mul,
     ssa_call, ssa_sum, ssa_max],
    doc="Fig. 11-12: every right-hand side into one of the SSA forms of Fig. 10.",
    local=True,
))


# --------------------------------------------------------------------------------------------------
# fix-up 3: name the output


def output_ok(o, inputs, dims=()) -> bool:
    """The output grammar: let-bound variables, pairs of outputs, and (for a tensor of pairs) generators
    over pairs of variables read at exactly the generator indices."""
    if isinstance(o, Pair):
        return output_ok(o.first, inputs, dims) and output_ok(o.second, inputs, dims)
    if isinstance(o, Gen) and has_pair(o.body.type):
        return output_ok(o.body, inputs, dims + ((o.var, o.size),))
    if not dims:
        return isinstance(o, Var) and o not in inputs
    return exact_access(o, inputs, dims)


def _name_output(o, inputs, ctx, stmts, dims=()):
    if output_ok(o, inputs, dims):
        return o
    if isinstance(o, Pair):
        return Pair(_name_output(o.first, inputs, ctx, stmts, dims), _name_output(o.second, inputs, ctx, stmts, dims))
    if isinstance(o, Gen) and has_pair(o.body.type):
        return Gen(o.var, o.size, _name_output(o.body, inputs, ctx, stmts, dims + ((o.var, o.size),)))
    if has_pair(o.type) and not is_path(o):
        return o  # not in the precondition's output grammar; left for the recogniser to report
    X, value = _new(ctx, gens(dims, o))
    stmts.append((X, value))
    return X[tuple(v for v, _ in dims)]


@rule("fix-up 3 name the output", (), root=True, equations=("fix-up 3",))
def name_output(e, ctx):
    """Fix-up 3: an output that is not a variable gets a statement of its own: ``... in e  ->  ... in let
    X = e in X`` (pairs componentwise).  Cost 0."""
    bindings, out = let_chain(e)
    stmts: list = []
    new = _name_output(out, _inputs(ctx), ctx, stmts)
    if not stmts:
        return None
    return build_lets(bindings + stmts, new)


SSA_OUTPUT = register_table(RuleTable("tensor-ssa output", [name_output], doc="Fix-up 3."))


# --------------------------------------------------------------------------------------------------
# fix-up 4 and 5.25: common subexpressions, ordering, canonical names


def _pred_simplify(p, binders):
    """p simplified against the loop ranges (isl gist): the same points in the loops, a canonical form."""
    if p is TRUE or p is FALSE:
        return p
    from tensorlang.predicates import simplify

    dims = [v for v, _ in binders]
    ranges = box(binders)
    try:
        return simplify(p, dims, ranges)
    except (UnsupportedError, isl.Error):  # a predicate isl cannot take stays as it is
        return p


def _canonical_rhs(v, pos, inputs, simplify_cache):
    """Ordering conventions and canonical index names for one right-hand side (already an SSA form)."""
    from tensorlang.alpha import canonical

    v = canonical(v)
    form = classify(None, v, inputs)
    dims, body = strip_gens(v)
    if isinstance(form, Addition):
        l, r = body.left, body.right
        kl = pos.get(ssa_access(strip_guards(l)[1], inputs)[0], -1)
        kr = pos.get(ssa_access(strip_guards(r)[1], inputs)[0], -1)
        preds = []
        for side in (l, r):
            ps, inner = strip_guards(side)
            preds.append((conj(*ps), inner))
        if kr < kl:
            preds.reverse()
        preds = [(_simp(p, dims, simplify_cache), inner) for p, inner in preds]
        live = [(p, inner) for p, inner in preds if p is not FALSE]
        if len(live) == 2:
            v = gens(dims, Add(guard(*live[0]), guard(*live[1])))
        elif live:  # [false] * X0 + [p] * X1 = [p] * X1: a unary contraction
            v = gens(dims, guard(*live[0]))
        else:
            v = gens(dims, Const(0))
    elif isinstance(form, Map):
        preds, head = strip_guards(body)
        p = _simp(conj(*preds), dims, simplify_cache)
        if p is FALSE:
            v = gens(dims, Const(0))
        else:
            v = gens(dims, guard(p, head))
    elif isinstance(form, Contraction):
        sdims, n = strip_sums(body)
        preds, head = strip_guards(n)
        factors = [head.left, head.right] if isinstance(head, Mul) else [head]
        binder_pos = {id(d): k for k, (d, _) in enumerate(tuple(dims) + tuple(sdims))}

        def fkey(f):
            y, idx = ssa_access(f, inputs)
            return (pos.get(y, -1), tuple(binder_pos.get(id(a), -1) for a in idx))

        sdims, p0, factors = _eliminate_pinned(dims, sdims, conj(*preds), factors)
        preds = (p0,)
        if len(factors) == 2 and fkey(factors[1]) < fkey(factors[0]):
            factors.reverse()
        order = []
        for f in factors:
            for a in ssa_access(f, inputs)[1]:
                if any(a is s for s, _ in sdims) and not any(a is o for o in order):
                    order.append(a)
        p = conj(*preds)
        for a in free_index_vars(p):
            if any(a is s for s, _ in sdims) and not any(a is o for o in order):
                order.append(a)
        for s, _ in sdims:
            if not any(s is o for o in order):
                order.append(s)
        size_of = {id(s): size for s, size in sdims}
        sdims = [(s, size_of[id(s)]) for s in order]
        p = _simp(p, tuple(dims) + tuple(sdims), simplify_cache)
        if p is FALSE:
            v = gens(dims, Const(0))
        else:
            prod = factors[0] if len(factors) == 1 else Mul(factors[0], factors[1])
            v = gens(dims, sums(sdims, guard(p, prod)))
    return canonical(v)


def _eliminate_pinned(dims, sdims, p, factors):
    """Summation indices that the bracket pins to another index variable are solved for
    (``predicates.solve_unique``): ``sum(s) [p] * X[s] -> [p[s -> v] and 0 <= v < size] * X[v]``.  The
    sum ran over the same points, one per point of the others, so the cost is the same (4.30)."""
    from tensorlang.predicates import solve_unique
    from tensorlang.substitute import substitute_index

    changed = True
    while changed:
        changed = False
        for s, size in sdims:
            if not any(s is v for v in free_index_vars(p)):
                continue
            binders = [v for v, _ in dims] + [v for v, _ in sdims]
            try:
                sol = solve_unique(conj(p, box([(s, size)])), s, binders)
            except (UnsupportedError, isl.Error):  # a predicate isl cannot take: leave the sum
                sol = None
            if not sol or len(sol) != 1:
                continue
            a = sol[0][1]
            v = bare(a)
            if v is None or v is s or not any(v is b for b in binders):
                continue
            p = conj(substitute_index(p, {s: a}), box([(a, size)]))
            factors = [substitute_index(f, {s: a}) for f in factors]
            sdims = [(t, z) for t, z in sdims if t is not s]
            changed = True
            break
    return sdims, p, factors


def _simp(p, binders, cache):
    if p is TRUE:
        return p
    key = (id(p), tuple(id(v) for v, _ in binders), tuple(id(s) for _, s in binders))
    found = cache.get(key)
    if found is None:
        found = (_pred_simplify(p, binders), p, binders)  # keeps the key's objects alive
        cache[key] = found
    return found[0]


@rule("fix-up 4 common subexpressions", (), root=True, equations=("fix-up 4", "fix-up 2"))
def cse(e, ctx):
    """Fix-up 4: the ordering conventions (the terms of an addition and the factors of a contraction in
    the order of their variables, summation indices in order of first use, brackets simplified against
    the loop ranges by isl), canonical index names ``i0, i1, ..`` in order of introduction, then one
    variable per right-hand side (hash-consing makes equal right-hand sides one object) and no
    statement that the output does not need (input statements stay, so the program keeps its inputs).
    Cost: never higher (shared work is charged once)."""
    done = ctx.cache.get("ssa.cse.done")
    if done is not None and done[0] is e:
        return None  # this program is the result of the last run: nothing left to do
    inputs = _inputs(ctx)
    bindings, out = let_chain(e)
    mapping: dict = {}
    seen: dict = {}
    kept: list = []
    pos: dict = {}
    cache = ctx.cache.setdefault("ssa.simplify", {})
    for var, value in bindings:
        value = substitute_vars(value, mapping) if mapping else value
        if classify(var, value, inputs) is None:
            return None  # not an SSA program: leave it to the recogniser
        value = _canonical_rhs(value, pos, inputs, cache)
        copied = copy_of(value, inputs)  # a bracket simplified away can leave a copy (fix-up 1)
        if copied is not None:
            mapping[var] = copied
            continue
        other = seen.get(id(value))
        if other is not None:
            mapping[var] = other
            continue
        seen[id(value)] = var
        pos[var] = len(kept)
        kept.append((var, value))
    out = substitute_vars(out, mapping) if mapping else out
    # dead statements (input statements stay: the program keeps its inputs, and sizes stay inferable)
    live = set(free_vars(out))
    alive = []
    for var, value in reversed(kept):
        if var in live or is_input_statement(value, inputs):
            alive.append((var, value))
            live.update(free_vars(value))
    alive.reverse()
    new = build_lets(alive, out)
    ctx.cache["ssa.cse.done"] = (new,)
    return None if new is e else new


@rule("5.25 SSA names", (), root=True)
def ssa_names(e, ctx):
    """``[[let x = e0 in e1]] = let X = [[e0]] in [[ [x -> X] e1 ]]``: the statements' variables renamed
    ``X0, X1, ...`` in order.  Cost and meaning unchanged."""
    bindings, out = let_chain(e)
    taken = {v.name for v in free_vars(e)}
    mapping, new_bindings, k = {}, [], 0
    changed = False
    for var, value in bindings:
        while f"X{k}" in taken:
            k += 1
        name = f"X{k}"
        k += 1
        value = substitute_vars(value, mapping) if mapping else value
        if var.name != name:
            changed = True
            new = Var(name, var.type)
            mapping[var] = new
            var = new
        new_bindings.append((var, value))
    if not changed:
        return None
    out = substitute_vars(out, mapping) if mapping else out
    return build_lets(new_bindings, out)


SSA_FINISH = register_table(RuleTable("tensor-ssa finish", [cse], doc="Fix-up 4."))
SSA_NAMES = register_table(RuleTable("tensor-ssa names", [ssa_names], doc="5.25: the SSA variables' names."))

PASS = (SSA_OUTPUT, SSA, SSA_FINISH, SSA_NAMES)


def tensor_ssa(expr, trace=None):
    """``tl.normalize.tensor_ssa``: the program in the Tensor SSA form of Fig. 10.  Expects a let-lifted,
    pair-eliminated program with generators pushed out."""
    return run_pass(expr, PASS, trace)
