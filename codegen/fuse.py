"""Fusion before emission: a let-bound tensor is computed where it is used instead of being stored, when
that costs no more work than storing it.

A binding ``t = gen(g) body`` (after eta-expansion every use is a full access ``t[a]``) is substituted
into its uses (``t[a]`` becomes ``body[g := a]``) when

* it is not used at all (it is dropped), or
* its body is *cheap*: no sum (nor maximum) and at most ``CHEAP_OPS`` operations, so recomputing an element costs
  about what loading it does (``diag(x) = gen(i, j) [i = j] * x[i]`` is never materialised: its uses
  become guarded scalars that isl then collapses), or
* it has exactly one use (an access node in one context: a node the DAG shares, reached inside a sum and
  outside it, is two uses), *element by element*: the map from the use's iteration
  domain (the consumer's generator variables, the sums around the access and the guards on the way,
  an isl set) to the index ``a`` is injective (``predicates.injective``, the test rule S3 of
  ``derive.simplify`` makes too), so every element is computed at most once where it is used.  A use inside a loop that re-reads elements (``t[i]`` under ``gen(k)``)
  keeps ``t`` stored.

A cheap body that calls a black box (``exp``, ``log``...) is substituted only where each use is element by
element: a use that re-reads elements (the softmax weight of a point and a component, read in the loops
over pairs of dimensions) would evaluate the black box again for every read, work the certificate does not
count; such a binding is stored.  So is one that calls a *costly* black box (one whose body holds a function
other than a comparison, ``abs``, ``sign``, ``max`` or ``min``, or a power other than an integer one: ``exp``,
``log``, ``tanh``, ``pow``, ``sqrt``, a user's ``sigmoid``)
and has more than one use: its value is computed once, not once per use.  A cheap call (``equal(a, b)``, the
derivative of a minimum) is computed again in each use, which costs less than storing it and reading it back
(k-means' direction: 0.36 ms, where storing its ``n x k`` comparisons took 0.86).

Before any of that, a binding is *narrowed* to the generator variables its body reads: ``t = gen(i, k, a)
exp(q[k, a])`` (a broadcast over ``i``, as the adjoint's transposed sums make them) becomes ``t = gen(k, a)
exp(q[k, a])`` and its uses ``t[i, k, a]`` become ``t[k, a]``: each value is computed once, at the loop depth
where its indices live.

Scalar lets (0-dimensional) that stay are computed once before every loop: the loop-invariant scalars,
hoisted.  A target whose threads share a reduction's loop (CUDA: ``Capabilities.stored_reductions``) keeps
every scalar let whose value is a sum or a maximum, so that it is a kernel of its own, not a loop inside
the one thread that computes its reader.  Everything that remains is one loop nest per binding.
"""
from __future__ import annotations

import functools

import sympy

from tensorlang.nodes import (
    Access, Add, Call, Expr, Guard, Max, Mul, Proj, Sum, Var, conj, strip_accesses, strip_guards, tensor, walk,
)
from tensorlang.functions import lookup
from tensorlang.predicates import injective
from tensorlang.substitute import rebuild, substitute_index
from tensorlang.traversal import free_index_vars, free_vars

from .ir import MaxReduce, Reduce

__all__ = ["fuse", "is_cheap", "CHEAP_OPS"]

CHEAP_OPS = 8


_CHEAP_FUNCTIONS = (sympy.Piecewise, sympy.Abs, sympy.sign, sympy.Max, sympy.Min, sympy.Heaviside)


@functools.lru_cache(maxsize=None)
def _costly(spec) -> bool:
    """Whether a black box's body (``spec``, its registry entry: a name defined again is another entry) holds a
    function other than a comparison or a cheap one (``exp``, ``log``, ``tanh``...) or a power other than an
    integer one (``pow``, ``sqrt``; ``recip`` is cheap)."""
    expr = spec.expr
    return any(not isinstance(f, _CHEAP_FUNCTIONS) for f in expr.atoms(sympy.Function)) or \
        any(not p.exp.is_integer for p in expr.atoms(sympy.Pow))


def _costly_calls(body: Expr) -> bool:
    return any(isinstance(n, Call) and _costly(lookup(n.fn)) for n in walk(body))


def is_cheap(body: Expr) -> bool:
    """No reduction and at most ``CHEAP_OPS`` arithmetic operations (counted on the DAG)."""
    ops = 0
    for n in walk(body):
        if isinstance(n, (Sum, Max, Reduce, MaxReduce)):
            return False
        if isinstance(n, (Add, Mul, Call)):
            ops += 1
    return ops <= CHEAP_OPS


def _uses(var: Var, depth: int, body: Expr, gen_ctx) -> list:
    """The uses of ``var`` in ``body``: each access node ``var[a1]..[ad]`` with each context ``(loop vars with
    sizes, guards)`` it is reached in.  A node the DAG shares is one use per context: ``s[i]`` read both
    outside and inside ``sum(j:k)`` is read once per ``i`` and ``k`` times more."""
    found: dict[tuple, tuple] = {}
    seen: set[tuple] = set()

    def visit(e, ctx, guards):
        key = (id(e), ctx, guards)
        if key in seen:
            return
        seen.add(key)
        if isinstance(e, (Access, Var)):
            idx, n = strip_accesses(e)
            if n is var:
                if len(idx) == depth:
                    found[key] = (e, idx, ctx, guards)
                return
            return
        if isinstance(e, Proj):
            return
        if isinstance(e, (Sum, Max)):
            visit(e.body, ctx + ((e.var, e.size),), guards)
            return
        if isinstance(e, Guard):
            visit(e.body, ctx, guards + (e.pred,))
            return
        for c in e.children:
            if isinstance(c, Expr):
                visit(c, ctx, guards)
            elif isinstance(c, tuple):
                for d in c:
                    if isinstance(d, Expr):
                        visit(d, ctx, guards)

    visit(body, tuple(gen_ctx), ())
    return list(found.values())


def _replace(body: Expr, repl: dict[int, Expr]) -> Expr:
    memo: dict[int, Expr] = {}

    def f(n):
        if not isinstance(n, Expr):
            return n
        hit = memo.get(id(n))
        if hit is not None:
            return hit
        out = repl[id(n)] if id(n) in repl else rebuild(n, f)
        memo[id(n)] = out
        return out

    return f(body)


def _narrowed(lets: list, leaves: list) -> None:
    """Each binding of ``lets`` over only the generator variables its body reads, its uses in the bindings
    after it and in ``leaves`` indexed accordingly (in place)."""
    for k, (var, gv, gs, body) in enumerate(lets):
        read = free_index_vars(body)
        keep = [i for i, v in enumerate(gv) if v in read]
        if len(keep) == len(gv):
            continue
        narrow = Var(var.name, tensor(gs[i] for i in keep))
        lets[k] = [narrow, tuple(gv[i] for i in keep), tuple(gs[i] for i in keep), body]
        for consumer in lets[k + 1:] + leaves:
            if var not in free_vars(consumer[3]):
                continue
            repl = {}
            for node, index, _, _ in _uses(var, len(gv), consumer[3], ()):
                access = narrow
                for i in keep:
                    access = Access(access, index[i])
                repl[id(node)] = access
            consumer[3] = _replace(consumer[3], repl)


def _compared(program: list) -> set:
    """The variables read in a maximum's body or by ``equal``.  The derivatives of a maximum compare it with
    the entries it was taken over (``equal(Y[g, r], X[g])``), so both must read the same stored values: a
    value computed again in another loop may round differently (``exp`` vectorised in one loop and not in
    the other; ``a * b + c`` contracted to a fused multiply-add in one place, as nvcc may), and then no
    entry would equal the maximum.  Such a binding is inlined only where its value is reads alone."""
    out: set = set()
    for _, _, _, body in program:
        for n in walk(body):
            if isinstance(n, Max) or (isinstance(n, Call) and n.fn == "equal"):
                out.update(free_vars(n))
    return out


def fuse(lets: list, leaves: list, stored_reductions: bool = False) -> tuple[list, list]:
    """``lets`` and ``leaves`` are lists of ``[var, gen vars, gen sizes, body]``; returns the bindings
    that stay and the updated consumers.  ``stored_reductions``: a scalar binding whose value is a sum or a
    maximum stays (a GPU's threads share its loop in a kernel of its own)."""
    lets = [list(x) for x in lets]
    leaves = [list(x) for x in leaves]
    _narrowed(lets, leaves)
    program = lets + leaves  # a let's consumers: the lets after it and the leaves
    readers: dict[Var, set[int]] = {}  # a variable -> positions in program that may read it
    for j, c in enumerate(program):
        for v in free_vars(c[3]):
            readers.setdefault(v, set()).add(j)
    compared = _compared(program)
    kept = []
    for k, (var, gv, gs, body) in enumerate(lets):
        # only the consumers that read var are searched
        at = [j for j in sorted(readers.get(var, ())) if j > k and var in free_vars(program[j][3])]
        consumers = [program[j] for j in at]
        uses = [_uses(var, len(gv), c[3], zip(c[1], c[2])) for c in consumers]
        total = sum(len(u) for u in uses)
        if total == 0:
            continue  # dead
        cheap = is_cheap(body)
        if var in compared and any(isinstance(n, (Add, Mul, Call, Sum, Max)) for n in walk(body)):
            inline = False
        elif stored_reductions and not gv and isinstance(strip_guards(body)[1], (Sum, Max)):
            inline = False
        elif cheap and not any(isinstance(n, Call) for n in walk(body)):
            inline = True
        elif total == 1 or (cheap and not _costly_calls(body)):   # (inlined where each use reads element by element)
            inline = all(injective(index, ctx, conj(*guards)) for us in uses for _, index, ctx, guards in us)
        else:
            inline = False
        if not inline:
            kept.append([var, gv, gs, body])
            continue
        for c, us in zip(consumers, uses):
            if us:
                repl = {id(node): substitute_index(body, dict(zip(gv, index))) for node, index, _, _ in us}
                c[3] = _replace(c[3], repl)
        for v in free_vars(body):  # the consumers now read what var's value reads
            readers.setdefault(v, set()).update(at)
    return kept, leaves
